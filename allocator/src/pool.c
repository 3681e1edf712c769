/*
 * pool.c — the best-fit caching pool: cca_create/destroy, cca_alloc/free,
 * splitting and coalescing.
 *
 * Memory comes from the upstream in SEGMENTS (segment.c); a segment is cut
 * into BLOCKS that tile it (internal.h, invariant I1). A freed block is
 * cached in the free index of its pool, never returned to the upstream by
 * cca_free; only whole free segments go back (release.c).
 *
 *   segment (20 MiB, medium pool, stream s)
 *   ┌──────────┬────────────────┬──────────┬───────────────────────────────┐
 *   │ A live 4M│ B free 6M      │ C live 2M│ D free 8M                     │
 *   └──────────┴────────────────┴──────────┴───────────────────────────────┘
 *   free C  ->  B, C and D coalesce into one free 16M block (I2).
 *
 * The life of one cca_alloc(size, stream) — alloc_locked, step by step:
 *   1. round size up to CCA_GRANULARITY (512 B); size 0 -> NULL, OK;
 *   2. pick the pool: small (<= small_max, 1 MiB), medium (< large_min,
 *      10 MiB) or large (segment.c has the table); greedy: the arena;
 *   3. complete pending frees whose events finished (stream.c; bounded work);
 *   4. best fit in the pool's free index for the request's key stream: the
 *      smallest block >= size, lowest address on ties (block_index.c). A
 *      large request also looks in the medium pool and takes the better fit
 *      there; a medium request never looks in the large pool (so a
 *      long-lived mid-size block cannot pin a big segment). With max_split
 *      set, a smaller request never takes a block above max_split, and a
 *      request >= max_split takes one only if the block is less than
 *      medium_segment larger (PyTorch bounds this slack by 20 MiB);
 *   5. none fits, or (expandable) the device would not map the pages of
 *      the block step 4 found -> get_block:
 *      a. a request that can never succeed — its least segment (which
 *         shrinks to the ceiling, never below the request) is above the
 *         device's total memory or max_reserved, or above the arena — fails
 *         at once: nothing is synchronized, released or asked of the upstream
 *         (step 4 asks this too before it maps a block's missing pages: a
 *         range spans the ceiling rounded up to the page, so its free block
 *         may hold a request whose pages can never be mapped);
 *      b. reserve a segment (growth; preferred size, then least size) or,
 *         after an empty-cache released it, the greedy arena again.
 *         Expandable: best fit, else a new range, only when max_reserved
 *         and the device's free memory (one mem_info) hold the request's
 *         pages (expandable.c, "the device's free memory"); then map the
 *         pages the block lacks. Skipped (greedy: the arena's map) when
 *         step 4's best fit in the pools was refused its pages: it would
 *         find that block again and ask the same map;
 *      c. refused -> the retry (growth), counted in alloc_retries: if frees
 *         are pending, synchronize, complete them and try best fit again;
 *         then release nothing when releasing cannot make room — nothing
 *         is cached, or max_reserved is set and what would stay reserved
 *         with everything cached released (the segments live and pending
 *         blocks pin) plus the request's least segment is over it, or the
 *         device's free bytes plus the cached free segments cannot hold
 *         it; otherwise release cached free segments largest first until
 *         the shortfall is covered and reserve again, then release the
 *         rest and reserve once more. Expandable segments: the same retry
 *         (what stays: the pages live and pending blocks touch; the
 *         request's least: the new pages its block would need), but it
 *         synchronizes with no free pending too (unmapping needs an idle
 *         device) unless releasing cannot make room, ends at once when
 *         that synchronize fails (nothing can be unmapped or completed:
 *         the synchronize's failure is the message's cause), and it
 *         releases free pages as well (expandable.c, release.c).
 *         hold_peak:1 puts a hold before it: a request that would raise
 *         reserved bytes past their peak while something is cached first
 *         takes the same steps with the peak as the cap, then releases
 *         everything (unless releasing cannot make room even so) and
 *         raises the peak by what it still needs (hold, counted in
 *         peak_holds; the retry only if the device refuses);
 *      d. still nothing: CCA_ERR_OUT_OF_MEMORY and one log line, written
 *         after the lock is released. Live blocks never change; segments
 *         released by step c stay released (the stats count them);
 *   6. take the block out of the free index (take_block), splitting it: the
 *      remainder becomes a free block if it is worth keeping —
 *      small pool and greedy arena: >= 512 B; medium and large pools:
 *      > small_max (a smaller tail would only serve small requests, which
 *      have their own pool, so it stays with the block as slack); never for
 *      a block above max_split; and, in an expandable segment, whenever the
 *      remainder reaches a page the request does not touch that is not
 *      mapped (as slack it would have to be mapped: worth_splitting);
 *   7. record the block in the live map and the counters.
 *
 * cca_free: find the block in the live map (O(1)); if another stream may
 * still use it, defer (stream.c); else coalesce with FREE neighbours and
 * reinsert into the free index.
 *
 * Locking: one mutex per allocator around every public entry point (log
 * lines are written after it is released). A cached alloc+free pair is two
 * lock round trips, one best-fit descent and one insert into small
 * per-class B+-trees (the split's remainder and the block merged back by the
 * free pass through the recent slot: block_index.c), and two O(1) hash
 * operations; docs/allocator.md has the measurements.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- counters ----------------------------------------------------------- */

static void raise_by(size_t *cur, size_t *peak, size_t by) {
    *cur += by;
    if (*cur > *peak)
        *peak = *cur;
}

static void lower_by(size_t *cur, size_t by) {
    ccai_assert(*cur >= by);
    *cur -= by;
}

/* ---- lifetime ----------------------------------------------------------- */

cca_status cca_create(const cca_config *c, cca_upstream *u, cca_allocator **out) {
    if (!out)
        return ccai_fail(CCA_ERR_INVALID_ARGUMENT, "cca_create: out is NULL");
    *out = NULL;
    if (!u)
        return ccai_fail(CCA_ERR_INVALID_ARGUMENT, "cca_create: upstream is NULL");
    cca_config cfg;
    if (c) {
        cfg = *c;
        cca_status st = cca_config_validate(&cfg);
        if (st != CCA_OK)
            return st;
    } else {
        cca_config_default(&cfg);
        /* a bad CCALLOC_CONF is logged, not a failure: the caller's message stays */
        char saved[CCAI_ERROR_CAP];
        ccai_error_save(saved);
        if (cca_config_apply_env(&cfg) != CCA_OK) {
            ccai_log("%s; using the defaults", cca_last_error());
            cca_config_default(&cfg);
            ccai_error_restore(saved);
        }
    }
    cca_allocator *a = calloc(1, sizeof *a);
    if (!a)
        return ccai_fail(CCA_ERR_OUT_OF_MEMORY, "cca_create: host malloc failed");
    ccai_mutex_init(&a->lock);
    a->config = cfg;
    a->upstream = u;
    ccai_domain_init_root(a);
    if (cfg.expandable && !cca_upstream_has_vm(u))
        ccai_upstream_log_no_vm(u); /* classic segments: said once per upstream, with its reason */
    if (cfg.expandable && cca_upstream_has_vm(u)) {
        cca_status st = cca_upstream_vm_granularity(u, &a->page);
        if (st != CCA_OK) {
            free(a);
            return cca_error_prefix(st, "cca_create: expandable:1 needs the upstream's granularity");
        }
        a->expandable = true;
        a->whole_maps = cca_upstream_vm_backing(u) == CCA_VM_WHOLE_MAPS;
    }
    /* step 1's bound: every rounding a request may meet (to 512 bytes, to
     * its segment's size, with expandable segments to whole pages) stays
     * representable below it, so no later step has to check for overflow */
    size_t rounding = a->expandable && a->page > cfg.segment_round ? a->page : cfg.segment_round;
    a->max_request = SIZE_MAX - (rounding + CCA_GRANULARITY);
    if (ccai_live_map_init(&a->live) != CCA_OK) {
        free(a);
        return cca_error_prefix(CCA_ERR_OUT_OF_MEMORY, "cca_create");
    }
    a->trace = ccai_trace_open_from_env();
    if (cfg.history) {
        cca_status st = ccai_history_create(cfg.history, &a->history);
        if (st != CCA_OK) {
            cca_destroy(a);
            return cca_error_prefix(st, "cca_create");
        }
    }
    if (cfg.policy == CCA_POLICY_GREEDY) {
        /* under the lock, as every upstream op the allocator calls (a line
         * an op logs waits for the unlock); no other thread knows a yet */
        (void)ccai_mutex_lock(&a->lock); /* a is new: none of its ops is running, so never refused */
        cca_status st = ccai_arena_reserve(a);
        ccai_mutex_unlock(&a->lock);
        if (st != CCA_OK) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", cca_last_error());
            cca_destroy(a);
            return ccai_fail(st, "cca_create: %s", msg);
        }
    }
    ccai_fork_register_allocator(a); /* fork.c: a fork from now on waits for its lock */
    *out = a;
    return CCA_OK;
}

/* cca_destroy's synchronize: with pages mapped, always (unmapping does not
 * wait for queued work, and a block freed on its own stream may still have
 * some); else only for pending frees (freeing a classic segment waits for
 * the device: cudaFree does). On failure its message goes to why. */
static cca_status destroy_sync(cca_allocator *a, char why[CCAI_ERROR_CAP]) {
    cca_status st = a->c.mapped ? ccai_stream_sync_device(a) : ccai_stream_wait_all(a);
    if (st != CCA_OK)
        snprintf(why, CCAI_ERROR_CAP, "%s", cca_last_error());
    return st;
}

cca_status cca_destroy(cca_allocator *a) {
    if (!a)
        return ccai_fail(CCA_ERR_INVALID_ARGUMENT, "cca_destroy: allocator is NULL");
    if (ccai_mutex_held_here(&a->lock)) /* from inside one of a's ops: refused before anything changes */
        return ccai_lock_refused("cca_destroy");
    ccai_fork_unregister_allocator(a); /* before its lock: registry, then allocator, as fork.c takes them */
    (void)ccai_mutex_lock(&a->lock);   /* not refused: checked above */
    char sync_why[CCAI_ERROR_CAP] = "";
    cca_status sync = destroy_sync(a, sync_why);
    size_t live = a->live.count;
    size_t live_bytes = a->c.allocated;
    size_t pending = a->c.pending; /* of those, freed but waiting on streams */
    /* not synchronized: mapped pages stay mapped (and their ranges reserved) */
    size_t kept = sync != CCA_OK ? a->c.mapped : 0;
    cca_status result = CCA_OK;
    while (a->segments) {
        ccai_segment *s = a->segments;
        for (ccai_block *b = s->first; b; b = b->next)
            ccai_stream_use_free(a, b);
        if (s->expandable)
            ccai_expandable_destroy(a, s, kept != 0, &result);
        else if (cca_upstream_free(ccai_upstream_op(a), (void *)s->base, s->size) != CCA_OK)
            result = CCA_ERR_UPSTREAM;
        a->segments = s->next;
        free(s);
    }
    while (a->slabs) {
        ccai_block_slab *next = a->slabs->next;
        free(a->slabs);
        a->slabs = next;
    }
    ccai_stream_destroy(a);
    ccai_live_map_destroy(&a->live);
    ccai_domain_destroy_all(a);
    ccai_history_destroy(a->history);
    struct ccai_trace *trace = a->trace;
    ccai_mutex_unlock(&a->lock);
    free(a);
    /* after the lock: a failed recording is logged here, and no log line is
     * written while a ccalloc lock is held (ccalloc.h) */
    ccai_trace_close(trace);
    char kept_note[2 * CCAI_ERROR_CAP] = ""; /* room for the synchronize's message whole */
    if (kept)
        snprintf(kept_note, sizeof kept_note,
                 "the synchronize failed, so %zu bytes of mapped pages were left mapped in the upstream, their "
                 "ranges reserved (queued work may still use them): %s",
                 kept, sync_why);
    char pending_note[96] = "";
    if (pending)
        snprintf(pending_note, sizeof pending_note,
                 " (%zu of them freed, their streams' work never seen to complete)", pending);
    if (live)
        return ccai_fail(CCA_ERR_LIVE_BLOCKS, "cca_destroy: %zu blocks (%zu bytes) were still live%s%s%s", live,
                         live_bytes, pending_note, kept ? "; " : "", kept_note);
    if (kept)
        return ccai_fail(sync, "cca_destroy: %s", kept_note);
    if (result != CCA_OK)
        return ccai_fail(result, "cca_destroy: the upstream refused to take a segment back");
    if (sync != CCA_OK)
        return ccai_fail(sync, "cca_destroy: synchronize failed before releasing the segments: %s", sync_why);
    return CCA_OK;
}

cca_status cca_get_config(const cca_allocator *a, cca_config *c) {
    if (!a || !c)
        return ccai_fail(CCA_ERR_INVALID_ARGUMENT, "cca_get_config: NULL argument");
    *c = a->config; /* immutable after creation: no lock needed */
    return CCA_OK;
}

/* ---- returning blocks to the pool --------------------------------------- */

static void absorb_next(cca_allocator *a, ccai_block *b) {
    ccai_block *n = b->next;
    b->size += n->size;
    if (n->unmapped) /* pages of either may be unmapped (a branch: classic blocks never are) */
        b->unmapped = true;
    b->next = n->next;
    if (n->next)
        n->next->prev = b;
    ccai_block_recycle(a, n);
    a->c.merges++;
}

void ccai_pool_return(cca_allocator *a, ccai_block *b) {
    if (a->history) /* a deferred free completes, or a forced domain release */
        ccai_history_record(a->history, CCAI_EV_FREE_COMPLETED, b->addr, b->requested, b->alloc_stream);
    ccai_live_map_remove(&a->live, b);
    ccai_pool_return_unlinked(a, b);
}

void ccai_pool_return_unlinked(cca_allocator *a, ccai_block *b) {
    ccai_free_index *ix = ccai_block_index(a, b);
    ccai_assert(b->state != CCAI_FREE && !b->needs_sync && ix == b->segment->index);
    if (b->uses)
        ccai_stream_use_free(a, b);
    lower_by(&a->c.allocated, b->size);
    lower_by(&a->c.active, 1);
    if (a->domains_tracked) {
        lower_by(&b->segment->domain->c.allocated, b->size);
        lower_by(&b->segment->domain->c.active, 1);
    }
    b->requested = 0;
    b->alloc_stream = NULL;
    b->state = CCAI_FREE;
    b->unmapped = false; /* its pages are mapped (I7); one 16-bit store with state */
    if (b->prev && b->prev->state == CCAI_FREE) {
        ccai_block *p = b->prev;
        ccai_free_index_remove(ix, p);
        absorb_next(a, p);
        b = p;
    }
    ccai_block *n = b->next;
    if (n && n->state == CCAI_FREE) {
        if (ccai_free_index_swap_recent(ix, n, b)) { /* the remainder of b's split */
            absorb_next(a, b);
            return;
        }
        ccai_free_index_remove(ix, n);
        absorb_next(a, b);
    }
    ccai_free_index_insert(ix, b);
}

/* ---- allocation --------------------------------------------------------- */

static size_t round_up(size_t v, size_t to) {
    return (v + to - 1) / to * to;
}

static void log_oom(cca_allocator *a, size_t size, size_t rounded, cca_stream stream, ccai_deferred_log *log) {
    a->c.ooms++;
    if (a->history) {
        size_t free_now = 0, total_now = 0;
        (void)cca_upstream_mem_info(ccai_upstream_op(a), &free_now, &total_now);
        ccai_history_record(a->history, CCAI_EV_OOM, free_now, size, stream);
    }
    if (!a->config.log_oom)
        return;
    char req[32], res[32], alloc[32], largest[32], devfree[32] = "unknown", total[32] = "?";
    size_t free_b, total_b, big = 0;
    /* as cca_get_stats counts it: of an expandable segment, the mapped part
     * (its unmapped tail is a free block as large as the range left) */
    for (const cca_domain *d = &a->root; d; d = d->next)
        big = ccai_domain_largest_free(d, big);
    if (cca_upstream_mem_info(ccai_upstream_op(a), &free_b, &total_b) == CCA_OK) {
        cca_format_bytes(free_b, devfree, sizeof devfree);
        cca_format_bytes(total_b, total, sizeof total);
    }
    snprintf(log->line, sizeof log->line,
             "out of memory: requested %s (%zu B rounded to %zu) on stream %p; reserved %s, allocated %s, "
             "largest free block %s, device free %s of %s (policy %s%s)",
             cca_format_bytes(size, req, sizeof req), size, rounded, stream,
             cca_format_bytes(a->c.reserved, res, sizeof res), cca_format_bytes(a->c.allocated, alloc, sizeof alloc),
             cca_format_bytes(big, largest, sizeof largest), devfree, total,
             a->config.policy == CCA_POLICY_GREEDY ? "greedy" : "growth",
             a->config.max_reserved ? ", max_reserved set" : "");
    log->set = true;
}

static bool better_fit(const ccai_block *x, const ccai_block *than) {
    return x && (!than || x->size < than->size || (x->size == than->size && x->addr < than->addr));
}

/* Step 4: best fit for a request of `pool` on key stream `key`, among the
 * blocks of domain d (its free index `pools`). */
static inline ccai_block *best_fit_in(cca_allocator *a, ccai_free_index *pools, ccai_pool_kind pool, cca_stream key,
                                      size_t rounded) {
    const cca_config *c = &a->config;
    size_t max_size = SIZE_MAX;
    if (c->max_split) {
        if (rounded < c->max_split)
            max_size = c->max_split;
        else if (rounded <= SIZE_MAX - c->medium_segment)
            max_size = rounded + c->medium_segment - 1; /* slack < medium_segment */
    }
    ccai_block *b = ccai_free_index_best_fit(&pools[pool], key, rounded, max_size);
    if (pool == CCAI_POOL_LARGE && c->medium_pool && c->policy == CCA_POLICY_GROWTH && !a->expandable &&
        rounded <= c->medium_segment) {
        ccai_block *m = ccai_free_index_best_fit(&pools[CCAI_POOL_MEDIUM], key, rounded, max_size);
        if (better_fit(m, b))
            b = m;
    }
    return b;
}

/* The same in the domain the call serves (the growth paths). */
static ccai_block *best_fit(cca_allocator *a, ccai_pool_kind pool, cca_stream key, size_t rounded) {
    return best_fit_in(a, a->serving->pools, pool, key, rounded);
}

/* The serving domain's footprint arena (domain.c), which step 4 asks
 * first: best fit at any size and stream; NULL without an arena. */
static ccai_block *arena_fit(cca_allocator *a, size_t rounded) {
    cca_domain *d = a->serving;
    return d->arena ? ccai_free_index_best_fit(&d->pools[CCAI_POOL_ARENA], NULL, rounded, SIZE_MAX) : NULL;
}

static cca_status reserve_for(cca_allocator *a, size_t rounded, cca_stream stream, ccai_pool_kind pool,
                              ccai_block **b) {
    size_t want, least;
    ccai_segment_sizes(a, rounded, pool, &want, &least);
    ccai_segment *s = NULL;
    cca_status st = ccai_segment_reserve(a, want, stream, pool, false, &s);
    if (st == CCA_ERR_OUT_OF_MEMORY && least < want)
        st = ccai_segment_reserve(a, least, stream, pool, false, &s);
    *b = st == CCA_OK ? s->first : NULL; /* a fresh segment is always used */
    return st;
}

/* Step 6's rule for any segment: is the remainder of b after `rounded`
 * bytes worth a block of its own? */
static bool worth_a_block(const cca_allocator *a, const ccai_block *b, size_t rounded) {
    size_t remainder = b->size - rounded;
    if ((b->seg & CCAI_SEG_SHARED) || ccai_block_pool(b) == CCAI_POOL_SMALL)
        return remainder >= CCA_GRANULARITY;
    if (a->config.max_split && b->size > a->config.max_split)
        return false;
    return remainder > a->config.small_max;
}

/* Step 6: split b after `rounded` bytes? When the remainder is worth a
 * block; in an expandable segment also when it reaches a page the request
 * does not touch and that is not mapped: kept as slack it would have to be
 * mapped (I7), pages the request does not need (and, near a device that is
 * no whole number of pages, pages the device cannot hold); split off it
 * stays a free block over unmapped pages, merged back at the free. Only a
 * block marked unmapped can have such pages (the cached path's one test). */
static bool worth_splitting(const cca_allocator *a, const ccai_block *b, size_t rounded) {
    if (worth_a_block(a, b, rounded))
        return true;
    if (!b->unmapped || b->size == rounded)
        return false;
    const ccai_segment *s = b->segment;
    size_t from = round_up(b->addr + rounded - s->base, s->page), to = round_up(b->addr + b->size - s->base, s->page);
    return from < to && !ccai_pages_mapped(s, s->base + from, to - from);
}

/* The bytes of b a request of `rounded` will hold: all of b when the
 * remainder stays with it as slack. In an expandable segment they must all
 * be mapped (I7), slack included. */
static size_t held_bytes(const cca_allocator *a, const ccai_block *b, size_t rounded) {
    return worth_splitting(a, b, rounded) ? rounded : b->size;
}

static cca_status map_held(cca_allocator *a, size_t rounded, ccai_block **b, ccai_device_room *room);

/* Expandable segments: best fit, or the tail of a new segment for (key,
 * pool) when no block is large enough (first use, or address space used
 * up) and both max_reserved and the device's free memory have room for the
 * request's pages; then map what the block lacks. */
static cca_status expandable_take(cca_allocator *a, size_t rounded, cca_stream key, ccai_pool_kind pool,
                                  ccai_block **b) {
    ccai_device_room room = {false, 0};
    *b = best_fit(a, pool, key, rounded);
    if (!*b) {
        if (a->config.policy == CCA_POLICY_GREEDY)
            return ccai_fail(CCA_ERR_OUT_OF_MEMORY, "the greedy arena has no free block of %zu bytes", rounded);
        /* the device's or max_reserved's size; unknown: the default range,
         * or the request's pages if they need more (get_block checked that
         * they fit the ceiling and do not overflow) */
        size_t va = ccai_segment_ceiling(a);
        if (va == SIZE_MAX) {
            size_t pages = round_up(rounded, a->page);
            va = pages > CCAI_EXPANDABLE_DEFAULT_RANGE ? pages : CCAI_EXPANDABLE_DEFAULT_RANGE;
        }
        /* Address space is finite too: every (domain, stream, pool) has a
         * range of its own, and ~1,600 ranges of an 80 GiB device would
         * fill a 47-bit space. A range takes at most half of what is left
         * of the allocator's budget (CCAI_ADDRESS_BUDGET), so ranges keep
         * the device's size until the budget is nearly spent, then halve,
         * never below the request's own pages; a reservation the upstream
         * refuses is tried again at half the size, down to those pages. */
        size_t least = round_up(rounded, a->page);
        /* a new range's first block starts on a page: its map is at least
         * the request's pages, all new, so a map the cap or the device
         * refuses is refused before any range is reserved (one would stay
         * behind, empty). The device's free memory costs one mem_info per
         * new range; its answer then spares the map ahead pages it cannot
         * hold. Stale, it errs either way: memory freed by another tenant
         * since is found by the retry's own question; memory taken since,
         * by the map's refusal (the range then stays, as without asking). */
        cca_status st = ccai_cap_room(a, least);
        if (st == CCA_OK)
            st = ccai_device_room_for(a, &room, least, "a new range's first pages");
        if (st != CCA_OK)
            return st;
        size_t held = a->c.address_space;
        size_t room = held < CCAI_ADDRESS_BUDGET ? (CCAI_ADDRESS_BUDGET - held) / 2 : 0;
        if (va > room)
            va = room > least ? room : least;
        ccai_segment *s = NULL;
        while ((st = ccai_expandable_reserve(a, va, key, pool, false, &s)) == CCA_ERR_OUT_OF_MEMORY && va / 2 >= least)
            va /= 2;
        if (st != CCA_OK)
            return st;
        *b = s->first;
        ccai_assert((*b)->size >= rounded);
    }
    return map_held(a, rounded, b, &room);
}

/* Map the pages of *b that a request of `rounded` will hold and are not
 * mapped yet; *b = NULL if the device refuses. room: the device's free
 * memory, asked already or not. */
static cca_status map_held(cca_allocator *a, size_t rounded, ccai_block **b, ccai_device_room *room) {
    size_t held = held_bytes(a, *b, rounded);
    if (!(*b)->unmapped || ccai_block_pages_mapped(*b, held))
        return CCA_OK;
    cca_status st = ccai_expandable_map(a, *b, held, room);
    if (st != CCA_OK)
        *b = NULL;
    return st;
}

/* Step 5b: a block from new memory: a classic segment, or pages of an
 * expandable one. */
static cca_status take(cca_allocator *a, size_t rounded, cca_stream stream, ccai_pool_kind pool, ccai_block **b) {
    return a->expandable ? expandable_take(a, rounded, stream, pool, b) : reserve_for(a, rounded, stream, pool, b);
}

/* The retry's take: the serving domain's arena (its pages mapped again
 * where a release unmapped them), else step 5b's take. */
static cca_status take_again(cca_allocator *a, size_t rounded, cca_stream stream, ccai_pool_kind pool, ccai_block **b) {
    ccai_device_room room = {false, 0};
    if ((*b = arena_fit(a, rounded)) != NULL && (!a->expandable || map_held(a, rounded, b, &room) == CCA_OK))
        return CCA_OK;
    return take(a, rounded, stream, pool, b);
}

/* Expandable: the bytes of new pages a request of `rounded` would map in
 * block b once every free page is unmapped: the pages under what it holds
 * of b, less the first and the last when a live or pending neighbour
 * (free neighbours merge, I2) keeps them mapped (whole maps: less every
 * page of the maps such a neighbour shares with b). */
static size_t new_pages_in(const cca_allocator *a, const ccai_block *b, size_t rounded) {
    const ccai_segment *s = b->segment;
    size_t page = s->page, off = b->addr - s->base, end = off + b->size;
    /* what it holds: its slack too, unless that reaches a page no live or
     * pending neighbour keeps (then unmapped, so split off: worth_splitting) */
    size_t held = rounded;
    if (!worth_a_block(a, b, rounded)) {
        size_t req_last = (off + rounded - 1) / page, blk_last = (end - 1) / page;
        bool kept = end % page && b->next; /* b's last page, held by the next block */
        if (blk_last - req_last <= (size_t)kept)
            held = b->size;
    }
    size_t first = off / page, last = (off + held - 1) / page, n = last - first + 1;
    /* whole maps: a neighbour holds every page of a map it shares with b,
     * and that map may reach many pages into b; those are neither new nor
     * releasable (ccai_releasable leaves them out): counted here too, the
     * retry would ask the device and max_reserved for them twice */
    if (s->starts)
        return (n - ccai_expandable_kept_pages(b, first, last)) * page;
    bool head = off % page && b->prev, tail = end % page && b->next && last == (end - 1) / page;
    n -= head;
    if (tail && !(head && first == last))
        n--;
    return n * page;
}

/* The retry's `need`: the least a request adds to what stays reserved once
 * everything cached is released. Classic: its least segment (the preferred
 * size is tried first, then that). Expandable: the new pages of the block
 * a "take again" would use — the domain's arena block first, else best fit
 * in the pools, whichever needs fewer — or a new range's pages for its
 * bytes when no block fits (its first block starts on a page). */
static size_t retry_need(cca_allocator *a, size_t rounded, cca_stream stream, ccai_pool_kind pool) {
    size_t want, least;
    ccai_segment_sizes(a, rounded, pool, &want, &least);
    if (!a->expandable)
        return least;
    ccai_block *in_arena = arena_fit(a, rounded), *in_pools = best_fit(a, pool, stream, rounded);
    size_t need = in_pools ? new_pages_in(a, in_pools, rounded) : round_up(rounded, a->page);
    if (in_arena && new_pages_in(a, in_arena, rounded) < need)
        need = new_pages_in(a, in_arena, rounded);
    return need;
}

/* Step 5c: the growth policy's one retry, for both kinds of segment:
 *   - synchronize: classic, only when frees are pending (to complete them);
 *     expandable, also with none pending, since pages are unmapped only
 *     once the device is idle — but then only when releasing can make room
 *     (below). Expandable, a failed synchronize ends the retry: no page
 *     can be unmapped and no free completed, and there is nothing else to
 *     release, so a take or a release would only repeat the refusal
 *     (ccai_release_unsynced: OOM, the synchronize named as the cause);
 *     classic, the retry goes on (freeing a segment waits for the device
 *     by itself);
 *   - when frees were pending, take a block again (a completed free may
 *     fit; with none pending the synchronize completed nothing, and a take
 *     would repeat the refused one);
 *   - release nothing when releasing cannot make room
 *     (ccai_release_can_help, with retry_need): nothing is cached; or
 *     max_reserved is set and what would stay reserved with everything
 *     cached released (classic: the segments live and pending blocks pin;
 *     expandable: the pages they touch) plus the least the request adds
 *     is over it; or the device's free memory plus everything cached is
 *     short of that least. With frees pending this is asked after they
 *     completed, else before any synchronize. The message is the refusal
 *     that brought the request here, then that reason;
 *   - otherwise release the shortfall and take again, then release
 *     everything and take once more.
 * Each "take again" looks as step 4 does, the serving domain's footprint
 * arena first (else a completed arena free is released as wholly free and
 * a segment reserved in its place, or, expandable, an arena block whose
 * pages the release unmapped is passed over for a new range), then the
 * pools, then new memory. The greedy arena over pages comes here only when
 * a fitting free block's pages cannot be mapped: the arena is at most
 * max_reserved, so the cap's test never refuses there and only the
 * device's does. */
static cca_status release_and_take(cca_allocator *a, size_t rounded, cca_stream stream, ccai_pool_kind pool,
                                   ccai_block **b) {
    bool pages = a->expandable, pending = a->c.pending != 0;
    size_t free_b = 0;
    unsigned flags = 0;
    char refused[CCAI_ERROR_CAP]; /* the refusal that brought us here: named first if nothing is released */
    ccai_error_save(refused);
    /* with no free pending, whether releasing can make room is known now:
     * with pages, before the synchronize that unmapping needs */
    cca_status can = pending ? CCA_OK : ccai_release_can_help(a, retry_need(a, rounded, stream, pool), &free_b);
    if (can == CCA_OK && (pages || pending)) {
        /* pages: the device itself, even with nothing pending (queued work
         * may still use free blocks' pages); a failure leaves frees pending */
        cca_status sync = pages ? ccai_stream_sync_device(a) : ccai_stream_wait_all(a);
        if (pages && sync != CCA_OK) /* no page unmapped, no free completed: no take or release can help */
            return ccai_release_unsynced();
        if (pages)
            flags = CCAI_RELEASE_UNMAP;
        /* with none pending the synchronize (for the unmapping) completed
         * nothing: a take now would only repeat the one refused */
        if (pending) {
            /* a completed free serves as step 4 would have served it: the
             * domain's arena first, then the pools (classic: cached blocks
             * only; new memory comes after the release below) */
            if (pages ? take_again(a, rounded, stream, pool, b) == CCA_OK
                      : (*b = arena_fit(a, rounded)) != NULL || (*b = best_fit(a, pool, stream, rounded)) != NULL)
                return CCA_OK;
            /* completed frees are releasable now */
            can = ccai_release_can_help(a, retry_need(a, rounded, stream, pool), &free_b);
        }
    }
    if (can != CCA_OK) /* "<the refusal>; <why releasing cannot help>" */
        return ccai_fail(can, "%s; %s", refused, cca_last_error());
    /* the shortfall to release first: the least segment, or the request's
     * bytes and one page more (its pages may straddle one more) */
    size_t want, need;
    ccai_segment_sizes(a, rounded, pool, &want, &need);
    if (pages)
        need = rounded + a->page;
    size_t shortfall = free_b < need ? need - free_b : 0;
    size_t cap = ccai_cap(a);
    if (cap && a->c.reserved + need > cap && a->c.reserved + need - cap > shortfall)
        shortfall = a->c.reserved + need - cap;
    size_t keep = a->c.reserved > shortfall ? a->c.reserved - shortfall : 0;
    if (keep > 0) {
        (void)ccai_release(a, keep, flags, NULL); /* a refusal only means less room */
        if (take_again(a, rounded, stream, pool, b) == CCA_OK)
            return CCA_OK;
    }
    (void)ccai_release(a, 0, flags, NULL);
    return take_again(a, rounded, stream, pool, b);
}

static cca_status retry(cca_allocator *a, size_t rounded, cca_stream stream, ccai_pool_kind pool, ccai_block **b) {
    a->c.retries++;
    return release_and_take(a, rounded, stream, pool, b);
}

/* Step 5c under hold_peak:1 (counted in peak_holds instead of the retry):
 * the request was refused because it would raise reserved bytes above
 * their peak (a->peak_hold: reserved_peak is the cap ccai_cap adds), or
 * by the device.
 *   - the retry's release and take, the peak as the cap: release the
 *     shortfall (the tails' pages first, then whole free segments, then
 *     other free pages) and take again, then everything and take once
 *     more; nothing is released when even everything cached would leave
 *     the request over the peak (ccai_release_can_help);
 *   - then the peak must rise, and rises by the least: everything cached
 *     is released (expandable: after the device synchronized; if that
 *     fails nothing is unmapped) and the request is taken again with no
 *     hold: expandable, its own pages and no ahead pages (a->peak_rising;
 *     ahead pages would raise the peak further for calls saved later);
 *     classic, a segment of its usual size, as without hold_peak. Nothing
 *     is released (nor synchronized) when releasing cannot make room even
 *     without the peak (ccai_release_can_help: max_reserved, or the
 *     device's free memory plus everything cached, dooms the request), as
 *     the retry releases nothing then; the take is still made and refused,
 *     and the retry below says why;
 *   - refused still (the device is full): the ordinary retry, counted in
 *     alloc_retries; it finds nothing cached unless frees were pending.
 * Cost: a full release walks every block of expandable segments
 * (ccai_releasable), and each synchronize waits for the device: paid only
 * by requests that would raise the peak. */
static cca_status hold(cca_allocator *a, size_t rounded, cca_stream stream, ccai_pool_kind pool, ccai_block **b) {
    uint64_t frees = a->release_frees; /* not upstream_frees: a map refused part-way unmaps what it mapped */
    cca_status st = release_and_take(a, rounded, stream, pool, b);
    a->peak_hold = false;
    if (st == CCA_ERR_OUT_OF_MEMORY) {
        /* The retry's rule, the peak no longer a cap: release nothing (and,
         * expandable, synchronize nothing) when releasing cannot make room,
         * for max_reserved or the device dooms the request whatever goes
         * back: the take below is refused, the retry says why, and the
         * cache stays, as it does without hold_peak. */
        size_t free_b = 0;
        if (ccai_release_can_help(a, retry_need(a, rounded, stream, pool), &free_b) == CCA_OK &&
            (!a->expandable || ccai_stream_sync_device(a) == CCA_OK))
            (void)ccai_release(a, 0, a->expandable ? CCAI_RELEASE_UNMAP : 0, NULL); /* a refusal: less room */
        a->peak_rising = true;
        st = take_again(a, rounded, stream, pool, b);
        a->peak_rising = false;
    }
    a->c.peak_holds += a->release_frees != frees; /* counted when it released something cached */
    return st == CCA_ERR_OUT_OF_MEMORY ? retry(a, rounded, stream, pool, b) : st;
}

/* Step 5a: CCA_ERR_OUT_OF_MEMORY (with its message) for a request that can
 * never succeed, else CCA_OK. Asked by step 5 first, and by step 4 before
 * it maps the pages a cached block lacks: an expandable range spans the
 * ceiling rounded up to the page, so its free block may "fit" a request
 * whose pages the device or max_reserved can never hold, and the map would
 * reach the upstream. */
static cca_status never_succeeds(cca_allocator *a, size_t size, size_t rounded, ccai_pool_kind pool) {
    size_t ceiling = ccai_request_ceiling(a);
    if (a->config.policy == CCA_POLICY_GREEDY) {
        /* Impossible whatever arena an empty-cache would leave behind: over
         * greedy_bytes (over pages: rounded up to the page, which the arena
         * may be), or over the device's total or max_reserved (the arena is
         * never larger). Refused before re-reserving anything. */
        size_t fixed = a->config.greedy_bytes / CCA_GRANULARITY * CCA_GRANULARITY;
        if (a->expandable && fixed % a->page)
            fixed = fixed > SIZE_MAX - a->page ? SIZE_MAX : round_up(fixed, a->page);
        if (fixed && fixed < ceiling)
            ceiling = fixed;
        if (rounded > ceiling)
            return ccai_fail(CCA_ERR_OUT_OF_MEMORY,
                             "%s: %zu bytes can never fit a greedy arena of at most %zu bytes", a->allocating, size, ceiling);
        return CCA_OK;
    }
    size_t want, least;
    ccai_segment_sizes(a, rounded, pool, &want, &least);
    if (a->expandable) /* its pages at least (a block that starts on a page boundary) */
        least = rounded > SIZE_MAX - a->page ? SIZE_MAX : round_up(rounded, a->page);
    if (least > ceiling)
        return ccai_fail(CCA_ERR_OUT_OF_MEMORY,
                         "%s: %zu bytes need a %zu-byte segment, more than the device, max_reserved or the "
                         "address budget allows (%zu bytes): it can never succeed",
                         a->allocating, size, least, ceiling);
    return CCA_OK;
}

/* Step 5: no cached block fits; or `refused`: step 4's best fit in the
 * pools is a block whose pages the device would not map, which step 5b's
 * take (growth) or the greedy arena's best fit would find again and ask
 * the same map of: straight to the retry then. */
static cca_status get_block(cca_allocator *a, size_t size, size_t rounded, cca_stream stream, ccai_pool_kind pool,
                            bool refused, ccai_block **b) {
    cca_status never = never_succeeds(a, size, rounded, pool);
    if (never != CCA_OK)
        return never;
    if (a->config.policy == CCA_POLICY_GREEDY) {
        ccai_segment *arena = ccai_arena_find(a);
        if (!arena) { /* released by empty-cache: reserve it again */
            cca_status st = ccai_arena_reserve(a);
            if (st != CCA_OK) /* the message names the call made, as every failure of the path */
                return cca_error_prefix(st, "%s", a->allocating);
            arena = ccai_arena_find(a);
            if ((*b = best_fit(a, pool, NULL, rounded)) != NULL)
                return CCA_OK;
        }
        if (rounded > arena->size)
            return ccai_fail(CCA_ERR_OUT_OF_MEMORY, "%s: %zu bytes can never fit the %zu-byte greedy arena",
                             a->allocating, size, arena->size);
        /* A full arena: pending frees complete once the device is
         * synchronized, and one of them may fit (both kinds of segment). */
        if (!(*b = best_fit(a, pool, NULL, rounded)) && a->c.pending && ccai_stream_wait_all(a) == CCA_OK)
            *b = best_fit(a, pool, NULL, rounded);
        if (!*b) /* no block that fits: an OOM, no retry */
            return ccai_fail(CCA_ERR_OUT_OF_MEMORY, "%s: the greedy arena has no free block of %zu bytes",
                             a->allocating, size);
        if (!a->expandable)
            return CCA_OK;
        /* a free block that fits, whose trimmed pages the device would not
         * map: the retry frees other free pages of the arena */
        ccai_device_room room = {false, 0};
        cca_status st = refused ? CCA_ERR_OUT_OF_MEMORY : map_held(a, rounded, b, &room);
        if (st == CCA_ERR_OUT_OF_MEMORY)
            st = retry(a, rounded, NULL, pool, b);
        return st == CCA_OK ? st : cca_error_prefix(st, "%s", a->allocating);
    }
    cca_status st = refused ? CCA_ERR_OUT_OF_MEMORY : take(a, rounded, stream, pool, b);
    if (st == CCA_ERR_OUT_OF_MEMORY)
        st = a->peak_hold ? hold(a, rounded, stream, pool, b) : retry(a, rounded, stream, pool, b);
    if (st == CCA_ERR_OUT_OF_MEMORY)
        return ccai_fail(CCA_ERR_OUT_OF_MEMORY, "%s: cannot reserve a segment for %zu bytes: %s", a->allocating, size,
                         cca_last_error());
    return st;
}

/* Step 6: take b out of the free index, splitting off its remainder when
 * that is worth it (the remainder enters the index as its recent block).
 * The index is the one of b's segment: a large request may take a medium
 * block. CCA_ERR_OUT_OF_MEMORY, b untouched and still indexed, only when the
 * remainder needs a block record, host memory has none, and b lies in an
 * expandable segment: there the remainder's pages may be unmapped, so b
 * cannot be handed out whole (I7). A classic segment's block is handed out
 * unsplit instead. */
static cca_status take_block(cca_allocator *a, ccai_block *b, size_t rounded, bool split) {
    ccai_free_index *ix = ccai_block_index(a, b);
    ccai_block *rest = NULL;
    /* decided before step 4 or 5 mapped pages: a map ahead may since have
     * mapped the slack's pages, so "split" may now be more than needed, never
     * less (nothing is unmapped in between) */
    ccai_assert(split || !worth_splitting(a, b, rounded));
    if (split) {
        rest = ccai_block_new(a);
        if (!rest && (b->seg & CCAI_SEG_EXPANDABLE))
            return ccai_fail(CCA_ERR_OUT_OF_MEMORY, "%s: host malloc failed for a block record", a->allocating);
    }
    if (!rest) {
        ccai_free_index_take(ix, b);
        return CCA_OK;
    }
    rest->addr = b->addr + rounded;
    rest->size = b->size - rounded;
    rest->segment = b->segment;
    rest->seg = b->seg;
    rest->stream = b->stream;
    rest->state = CCAI_FREE;
    rest->unmapped = b->unmapped; /* what step 4 did not map stays as it was */
    ccai_free_index_split(ix, b, rest);
    rest->prev = b;
    rest->next = b->next;
    if (b->next)
        b->next->prev = rest;
    b->next = rest;
    b->size = rounded;
    a->c.splits++;
    return CCA_OK;
}

/* Step 7. */
static void mark_live(cca_allocator *a, ccai_block *b, size_t size, cca_stream stream) {
    b->state = CCAI_LIVE;
    b->requested = size;
    b->alloc_stream = stream;
    /* a->trace is set at creation or never: without a trace no id is
     * needed; the recorder may log that it stops, written after the unlock */
    if (a->trace) {
        ccai_mutex_hold_log(&a->lock);
        b->id = ccai_trace_alloc(a->trace, size, stream, b->segment->domain->trace_no);
    }
    if (a->history)
        ccai_history_record(a->history, CCAI_EV_ALLOC, b->addr, size, stream);
    ccai_live_map_insert(&a->live, b);
    ccai_counters *c = &a->c;
    raise_by(&c->allocated, &c->allocated_peak, b->size);
    raise_by(&c->requested, &c->requested_peak, size);
    raise_by(&c->active, &c->active_peak, 1);
    c->alloc_calls++;
    b->born = c->alloc_calls; /* a leak report's age (domain.c) */
    if (a->domains_tracked) { /* only once a domain exists (domain.c) */
        ccai_domain_counters *d = &b->segment->domain->c;
        raise_by(&d->allocated, &d->allocated_peak, b->size);
        raise_by(&d->requested, &d->requested_peak, size);
        raise_by(&d->active, &d->active_peak, 1);
        d->alloc_calls++;
    }
}

/* A failure from deeper down (an upstream's own message) returned by the
 * allocating call: its message starts with that call's name, once (paths
 * of step 5 may have named it already). */
static cca_status named(const cca_allocator *a, cca_status st) {
    const char *why = cca_last_error();
    size_t n = strlen(a->allocating);
    if (strncmp(why, a->allocating, n) == 0 && why[n] == ':')
        return st;
    return cca_error_prefix(st, "%s", a->allocating);
}

/* Step 4 found b: ask now for the lines the pair needs next, so that their
 * cache misses overlap instead of following one another. The live map's
 * bucket for b's address (step 7): the leaf best fit just read holds that
 * address (when b is the index's hint), so the bucket is on its way before
 * b's record arrives. b's neighbours: the matching cca_free reads their
 * state to merge. With 100k free blocks the pair's lines no longer fit the
 * core's own cache; these took `ccbench micro`'s p99 there from 120-130 to
 * 100-120 ns, lower in every one of six interleaved rounds (docs/allocator.md,
 * "Speed of the cached path"). A prefetch never faults: a NULL neighbour
 * costs nothing. */
static inline void prefetch_pair(const cca_allocator *a, const ccai_free_index *ix, const ccai_block *b) {
    if (ix->hint == b)
        __builtin_prefetch(&a->live.buckets[ccai_live_map_bucket(&a->live, ix->hint_leaf->e[ix->hint_pos].addr)], 1);
    __builtin_prefetch(b->prev);
    __builtin_prefetch(b->next);
}

static cca_status alloc_step(cca_allocator *a, cca_domain *d, size_t size, cca_stream stream, void **out,
                             ccai_deferred_log *log) {
    /* 1 (a->max_request: set by cca_create, see there) */
    if (size > a->max_request)
        return ccai_fail(CCA_ERR_INVALID_ARGUMENT, "%s: size %zu is too large to round", a->allocating, size);
    size_t rounded = round_up(size, CCA_GRANULARITY);
    /* 2 */
    ccai_pool_kind pool = ccai_pool_of(a, rounded);
    cca_stream key = a->config.policy == CCA_POLICY_GREEDY ? NULL : stream;
    /* 3 */
    ccai_stream_poll(a);
    /* 4 (a domain's footprint arena first: domain.c) */
    ccai_assert(d == a->serving);
    ccai_block *b = arena_fit(a, rounded);
    if (!b) {
        b = best_fit_in(a, d->pools, pool, key, rounded);
        if (b)
            prefetch_pair(a, &d->pools[pool], b);
    }
    bool split = b && worth_splitting(a, b, rounded); /* decided once: the pages to map, then step 6 */
    size_t held = split ? rounded : b ? b->size : 0;
    /* off the cached path, steps may fail inside a call that then succeeds
     * (a refused map, the retry): the caller's message is put back then */
    bool to_map = b && b->unmapped && !ccai_block_pages_mapped(b, held);
    bool slow = !b || to_map;
    /* hold_peak: off the cached path, a request may not raise reserved
     * bytes above their peak until releasing cached memory could not make
     * room (hold, step 5c; a->peak_hold is cleared by alloc_locked). Only
     * when something may be released: cached bytes, or pending frees to
     * complete (a peak of 0: nothing was ever reserved). */
    if (slow && a->config.hold_peak && (a->c.reserved > a->c.allocated || a->c.pending))
        a->peak_hold = true; /* reserved > 0 here, so reserved_peak is too */
    char saved[CCAI_ERROR_CAP];
    if (slow)
        ccai_error_save(saved);
    bool refused = false;
    if (to_map && never_succeeds(a, size, rounded, pool) != CCA_OK)
        b = NULL, to_map = false; /* step 5 fails it (5a), nothing mapped */
    if (to_map) {
        ccai_device_room room = {false, 0};
        cca_status st = ccai_expandable_map(a, b, held, &room);
        if (st != CCA_OK && st != CCA_ERR_OUT_OF_MEMORY)
            return named(a, st);
        if (st != CCA_OK) {
            /* the device is full: the retry of step 5, at once when b is
             * the pools' best fit (step 5 would find b again) */
            refused = b->segment != d->arena;
            b = NULL;
        }
    }
    /* 5 */
    if (!b) {
        cca_status st = get_block(a, size, rounded, key, pool, refused, &b);
        if (st != CCA_OK) {
            if (st == CCA_ERR_OUT_OF_MEMORY) {
                char why[512];
                snprintf(why, sizeof why, "%s", cca_last_error());
                log_oom(a, size, rounded, stream, log);
                ccai_fail(st, "%s", why);
                return st;
            }
            return named(a, st);
        }
        split = worth_splitting(a, b, rounded);
    }
    /* 6 */
    if (take_block(a, b, rounded, split) != CCA_OK) { /* b unchanged; its pages stay mapped */
        log_oom(a, size, rounded, stream, log);
        return CCA_ERR_OUT_OF_MEMORY;
    }
    /* 7 */
    mark_live(a, b, size, stream);
    *out = (void *)b->addr;
    if (slow)
        ccai_error_restore(saved);
    return CCA_OK;
}

static cca_status alloc_locked(cca_allocator *a, cca_domain *d, size_t size, cca_stream stream, void **out,
                               ccai_deferred_log *log) {
    cca_status st = alloc_step(a, d, size, stream, out, log);
    a->peak_hold = false;
    return st;
}

cca_status cca_alloc(cca_allocator *a, size_t size, cca_stream s, void **out) {
    if (out)
        *out = NULL;
    if (!a || !out)
        return ccai_fail(CCA_ERR_INVALID_ARGUMENT, "cca_alloc: %s is NULL", a ? "out" : "allocator");
    if (size == 0)
        return CCA_OK;
    ccai_deferred_log log;
    log.set = false;
    cca_status st = ccai_lock(a, "cca_alloc");
    if (st != CCA_OK)
        return st;
    st = alloc_locked(a, &a->root, size, s, out, &log);
    ccai_unlock(a);
    ccai_log_flush(&log);
    return st;
}

cca_status cca_alloc_in(cca_allocator *a, cca_domain *h, size_t size, cca_stream s, void **out) {
    if (out)
        *out = NULL;
    if (!a || !out)
        return ccai_fail(CCA_ERR_INVALID_ARGUMENT, "cca_alloc_in: %s is NULL", a ? "out" : "allocator");
    ccai_deferred_log log;
    log.set = false;
    cca_status st = ccai_lock(a, "cca_alloc_in");
    if (st != CCA_OK)
        return st;
    cca_domain *d = ccai_domain_lookup(a, h);
    if (!d) {
        st = ccai_fail(CCA_ERR_INVALID_ARGUMENT, "cca_alloc_in: domain %p is not one of this allocator's", (void *)h);
    } else if (size == 0) {
        st = CCA_OK;
    } else {
        a->serving = d;
        a->allocating = "cca_alloc_in";
        st = alloc_locked(a, a->serving, size, s, out, &log);
        a->serving = &a->root;
        a->allocating = "cca_alloc";
    }
    ccai_unlock(a);
    ccai_log_flush(&log);
    return st;
}

/* ---- free and friends --------------------------------------------------- */

cca_status cca_free(cca_allocator *a, void *ptr) {
    if (!a)
        return ccai_fail(CCA_ERR_INVALID_ARGUMENT, "cca_free: allocator is NULL");
    if (!ptr)
        return CCA_OK;
    cca_status st = ccai_lock(a, "cca_free");
    if (st != CCA_OK)
        return st;
    ccai_block **link = ccai_live_map_link(&a->live, (uintptr_t)ptr), *b = *link;
    if (!b || b->state != CCAI_LIVE) {
        st = ccai_diagnose_pointer(a, ptr, "cca_free");
    } else {
        a->c.free_calls++;
        lower_by(&a->c.requested, b->requested);
        if (a->domains_tracked)
            lower_by(&b->segment->domain->c.requested, b->requested);
        if (a->trace)
            ccai_trace_free(a->trace, b->id, b->requested, b->alloc_stream, b->segment->domain->trace_no);
        uintptr_t addr = b->addr; /* for the history: b may merge away below */
        size_t requested = b->requested;
        cca_stream used = b->alloc_stream;
        bool deferred = (b->uses || b->alloc_stream != b->stream || (b->seg & CCAI_SEG_SHARED)) &&
                        ccai_stream_defer_free(a, b, &st);
        if (!deferred) {
            ccai_live_map_unlink(&a->live, link);
            ccai_pool_return_unlinked(a, b);
        }
        if (a->history)
            ccai_history_free(a->history, addr, requested, used, deferred);
    }
    ccai_unlock(a);
    return st;
}

cca_status cca_record_stream(cca_allocator *a, void *ptr, cca_stream s) {
    if (!a || !ptr)
        return ccai_fail(CCA_ERR_INVALID_ARGUMENT, "cca_record_stream: %s is NULL", a ? "ptr" : "allocator");
    cca_status st = ccai_lock(a, "cca_record_stream");
    if (st != CCA_OK)
        return st;
    ccai_block *b = ccai_live_map_find(&a->live, (uintptr_t)ptr);
    if (!b || b->state != CCAI_LIVE)
        st = ccai_diagnose_pointer(a, ptr, "cca_record_stream");
    else
        st = ccai_stream_record(b, s);
    ccai_unlock(a);
    return st;
}

cca_status cca_block_size(cca_allocator *a, const void *ptr, size_t *size) {
    if (!a || !ptr || !size)
        return ccai_fail(CCA_ERR_INVALID_ARGUMENT, "cca_block_size: NULL argument");
    cca_status st = ccai_lock(a, "cca_block_size");
    if (st != CCA_OK)
        return st;
    ccai_block *b = ccai_live_map_find(&a->live, (uintptr_t)ptr);
    if (!b || b->state != CCAI_LIVE)
        st = ccai_diagnose_pointer(a, ptr, "cca_block_size");
    else
        *size = b->size;
    ccai_unlock(a);
    return st;
}
