/*
 * grow.c — the slow path: a request no cached block serves, in one chain of
 * steps (the numbers are those of the life of one cca_alloc, docs/allocator.md):
 *
 *   ccai_grow                       5   entered from alloc.c
 *    ├─ ccai_grow_never_succeeds    5a  fail at once: over the device, max_reserved,
 *    │                                  the arena or the address budget
 *    ├─ take                        5b  new memory: a->kind->grow, then map what
 *    │                                  the block lacks (a->kind->back)
 *    ├─ hold                        5c  hold_peak:1 only: the retry with the peak as
 *    │                                  the cap, then release all and raise the peak
 *    ├─ retry = release_and_take    5c  synchronize, take again, release the
 *    │                                  shortfall, take, release all, take
 *    └─ fail                        5d  CCA_ERR_OUT_OF_MEMORY; alloc.c logs it
 *
 * - One retry for every caller: cca_alloc and cca_alloc_in (ccai_grow), the
 *   hold, and cca_domain_reserve (ccai_grow_retry with an arena request).
 *   Each counts one alloc_retries.
 * - Nothing here asks which segment kind it has: new memory, the bytes a
 *   request needs and whether the device must be idle come from a->kind.
 * - Live blocks never move or change; what a retry released stays released.
 * - Cost: a take is one or two upstream calls (classic) or a best fit, a
 *   mem_info and maps (pages); a retry adds a synchronize, one mem_info and
 *   a release walk over the segments (pages: over their blocks).
 */
#include "internal.h"
#include "block.h" /* the split, block records */
#include "fit.h"   /* best fit */

#include <stdlib.h>
#include <string.h>

/* ---- 5d: the report ------------------------------------------------------ */

void ccai_grow_log_oom(cca_allocator *a, size_t size, size_t rounded, cca_stream stream, ccai_deferred_log *log) {
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

/* ---- 5b: new memory ------------------------------------------------------ */

/* Make the bytes of *b that a request of `rounded` will hold usable (pages:
 * map what is missing); *b = NULL if the device refuses. A block without
 * the `unmapped` mark needs nothing: every classic block. */
static cca_status map_held(cca_allocator *a, size_t rounded, ccai_block **b, ccai_device_room *room) {
    size_t held = ccai_block_held(a, *b, rounded);
    if (!(*b)->unmapped || ccai_block_pages_mapped(*b, held))
        return CCA_OK;
    cca_status st = a->kind->back(a, *b, held, room);
    if (st != CCA_OK)
        *b = NULL;
    return st;
}

/* Step 5b: a block from new memory (the kind's grow), its bytes usable. */
static cca_status take(cca_allocator *a, size_t rounded, cca_stream stream, ccai_pool_kind pool, ccai_block **b) {
    ccai_device_room room = {false, 0};
    cca_status st = a->kind->grow(a, rounded, stream, pool, &room, b);
    return st == CCA_OK ? map_held(a, rounded, b, &room) : st;
}

/* The retry's take: the serving domain's arena (its pages mapped again
 * where a release unmapped them), else step 5b's take. */
static cca_status take_again(cca_allocator *a, size_t rounded, cca_stream stream, ccai_pool_kind pool, ccai_block **b) {
    ccai_device_room room = {false, 0};
    if ((*b = ccai_arena_fit(a, rounded)) != NULL && map_held(a, rounded, b, &room) == CCA_OK)
        return CCA_OK;
    return take(a, rounded, stream, pool, b);
}

/* ---- 5c: the retry --------------------------------------------------------- */

/* The retry's `need`: the least a request adds to what stays reserved once
 * everything cached is released: the kind's least (classic: the least
 * segment; pages: the request's pages); where the kind can say what a
 * given block would add (pages: its new pages), the block a "take again"
 * would use — the domain's arena block first, else best fit in the pools,
 * whichever needs fewer. */
static size_t retry_need(cca_allocator *a, size_t rounded, cca_stream stream, ccai_pool_kind pool) {
    size_t need = a->kind->least(a, rounded, pool);
    if (!a->kind->new_bytes)
        return need;
    ccai_block *in_arena = ccai_arena_fit(a, rounded), *in_pools = ccai_best_fit(a, pool, stream, rounded);
    if (in_pools)
        need = a->kind->new_bytes(a, in_pools, rounded);
    if (in_arena && a->kind->new_bytes(a, in_arena, rounded) < need)
        need = a->kind->new_bytes(a, in_arena, rounded);
    return need;
}

/* One retry, for a request (alloc) or a domain's footprint arena (arena):
 *   1. can releasing make room? With no free pending, asked now (before
 *      any synchronize): nothing cached; max_reserved (or the held peak)
 *      over what stays plus the need; the device's free memory plus
 *      everything cached short of the need (ccai_release_can_help). No:
 *      nothing is synchronized or released; the message is the refusal
 *      that brought the request here, then why;
 *   2. synchronize: with frees pending (to complete them), and always when
 *      the kind gives memory back only to an idle device (pages: unmapping
 *      does not wait for queued work). There a failed synchronize ends the
 *      retry (nothing can be unmapped or completed: ccai_release_unsynced);
 *   3. frees were pending: a request takes a completed block as step 4
 *      would (the arena, then the pools; over pages also new memory), then
 *      asks step 1 again, the completed frees now releasable;
 *   4. a request releases the shortfall and takes again; then everything
 *      cached goes back and it takes once more. An arena releases
 *      everything at once and reserves once more. */
static cca_status release_and_take(cca_allocator *a, const ccai_grow_req *q, ccai_block **b) {
    size_t rounded = q->rounded;
    cca_stream stream = q->stream;
    ccai_pool_kind pool = q->pool;
    bool idle = a->kind->unmap_when_idle, pending = a->c.pending != 0;
    size_t free_b = 0, need = q->arena ? rounded : 0;
    unsigned flags = 0;
    char refused[CCAI_ERROR_CAP]; /* the refusal that brought us here: named first if nothing is released */
    ccai_error_save(refused);
    /* 1 */
    cca_status can = pending ? CCA_OK
                             : ccai_release_can_help(a, q->arena ? need : retry_need(a, rounded, stream, pool), &free_b);
    /* 2 */
    if (can == CCA_OK && (idle || pending)) {
        cca_status sync = idle ? ccai_stream_sync_device(a) : ccai_stream_wait_all(a);
        if (idle && sync != CCA_OK) /* no page unmapped, no free completed: no take or release can help */
            return ccai_release_unsynced();
        if (idle || sync == CCA_OK)
            flags = CCAI_RELEASE_UNMAP;
        /* 3: with none pending the synchronize (for the unmapping) completed
         * nothing: a take now would only repeat the one refused */
        if (pending) {
            if (!q->arena && (idle ? take_again(a, rounded, stream, pool, b) == CCA_OK
                                   : (*b = ccai_arena_fit(a, rounded)) != NULL ||
                                         (*b = ccai_best_fit(a, pool, stream, rounded)) != NULL))
                return CCA_OK;
            can = ccai_release_can_help(a, q->arena ? need : retry_need(a, rounded, stream, pool), &free_b);
        }
    } else if (can == CCA_OK) {
        flags = CCAI_RELEASE_UNMAP; /* nothing was queued to wait for */
    }
    if (can != CCA_OK)
        return q->arena ? can : cca_set_error(can, "%s; %s", refused, cca_last_error());
    /* 4 */
    if (q->arena) {
        (void)ccai_release(a, 0, flags, NULL);
        ccai_segment *s = NULL;
        return a->kind->reserve(a, rounded, NULL, CCAI_POOL_ARENA, true, &s);
    }
    /* the shortfall to release first: the kind's (classic: the least
     * segment; pages: the request's bytes and one page more, as its pages
     * may straddle one more) */
    need = a->kind->shortfall(a, rounded, pool);
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
    return release_and_take(a, &(ccai_grow_req){rounded, stream, pool, false}, b);
}

cca_status ccai_grow_retry(cca_allocator *a, const ccai_grow_req *q, ccai_block **b) {
    a->c.retries++;
    return release_and_take(a, q, b);
}

/* Step 5c under hold_peak:1 (counted in peak_holds, not alloc_retries):
 * refused by the peak cap (a->peak_hold) or by the device.
 *   1. the retry's release and take with the peak as the cap (nothing
 *      released when even everything cached leaves it over the peak);
 *   2. the peak rises by the least: release everything cached (pages:
 *      after a synchronize; failed, nothing unmapped) and take with no
 *      cap; pages map no ahead pages (a->peak_rising). Nothing is released
 *      or synchronized when releasing cannot make room even without the
 *      peak (ccai_release_can_help); the take is made and refused;
 *   3. refused still: the ordinary retry, counted in alloc_retries.
 * Cost: a full release walks every block of pages segments, and each
 * synchronize waits for the device: paid only by requests that raise the
 * peak. docs/allocator.md, "Holding the peak". */
static cca_status hold(cca_allocator *a, size_t rounded, cca_stream stream, ccai_pool_kind pool, ccai_block **b) {
    uint64_t frees = a->release_frees; /* not upstream_frees: a map refused part-way unmaps what it mapped */
    cca_status st = release_and_take(a, &(ccai_grow_req){rounded, stream, pool, false}, b);
    a->peak_hold = false;
    if (st == CCA_ERR_OUT_OF_MEMORY) {
        /* The retry's rule, the peak no longer a cap: release nothing (and,
         * expandable, synchronize nothing) when releasing cannot make room,
         * for max_reserved or the device dooms the request whatever goes
         * back: the take below is refused, the retry says why, and the
         * cache stays, as it does without hold_peak. */
        size_t free_b = 0;
        bool idle = a->kind->unmap_when_idle;
        if (ccai_release_can_help(a, retry_need(a, rounded, stream, pool), &free_b) == CCA_OK &&
            (!idle || ccai_stream_sync_device(a) == CCA_OK))
            (void)ccai_release(a, 0, idle ? CCAI_RELEASE_UNMAP : 0, NULL); /* a refusal: less room */
        a->peak_rising = true;
        st = take_again(a, rounded, stream, pool, b);
        a->peak_rising = false;
    }
    a->c.peak_holds += a->release_frees != frees; /* counted when it released something cached */
    return st == CCA_ERR_OUT_OF_MEMORY ? retry(a, rounded, stream, pool, b) : st;
}

/* ---- 5a and 5: the chain --------------------------------------------------- */

/* Step 5a: CCA_ERR_OUT_OF_MEMORY (with its message) for a request that can
 * never succeed, else CCA_OK. Asked by step 5 first, and by step 4 before
 * it maps the pages a cached block lacks: an expandable range spans the
 * ceiling rounded up to the page, so its free block may "fit" a request
 * whose pages the device or max_reserved can never hold, and the map would
 * reach the upstream. */
cca_status ccai_grow_never_succeeds(cca_allocator *a, size_t size, size_t rounded, ccai_pool_kind pool) {
    size_t ceiling = ccai_request_ceiling(a);
    if (a->config.policy == CCA_POLICY_GREEDY) {
        /* Impossible whatever arena an empty-cache would leave behind: over
         * greedy_bytes (over pages: rounded up to the page, which the arena
         * may be), or over the device's total or max_reserved (the arena is
         * never larger). Refused before re-reserving anything. */
        size_t fixed = a->kind->whole(a, a->config.greedy_bytes / CCA_GRANULARITY * CCA_GRANULARITY);
        if (fixed && fixed < ceiling)
            ceiling = fixed;
        if (rounded > ceiling)
            return cca_set_error(CCA_ERR_OUT_OF_MEMORY,
                             "%s: %zu bytes can never fit a greedy arena of at most %zu bytes", a->allocating, size, ceiling);
        return CCA_OK;
    }
    size_t least = a->kind->least(a, rounded, pool);
    if (least > ceiling)
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY,
                         "%s: %zu bytes need a %zu-byte segment, more than the device, max_reserved or the "
                         "address budget allows (%zu bytes): it can never succeed",
                         a->allocating, size, least, ceiling);
    return CCA_OK;
}

/* Step 5: no cached block fits; or `refused`: step 4's best fit in the
 * pools is a block whose pages the device would not map, which step 5b's
 * take (growth) or the greedy arena's best fit would find again and ask
 * the same map of: straight to the retry then. */
cca_status ccai_grow(cca_allocator *a, size_t size, size_t rounded, cca_stream stream, ccai_pool_kind pool,
                            bool refused, ccai_block **b) {
    cca_status never = ccai_grow_never_succeeds(a, size, rounded, pool);
    if (never != CCA_OK)
        return never;
    if (a->config.policy == CCA_POLICY_GREEDY) {
        ccai_segment *arena = ccai_arena_find(a);
        if (!arena) { /* released by empty-cache: reserve it again */
            cca_status st = ccai_arena_reserve(a);
            if (st != CCA_OK) /* the message names the call made, as every failure of the path */
                return cca_error_prefix(st, "%s", a->allocating);
            arena = ccai_arena_find(a);
            if ((*b = ccai_best_fit(a, pool, NULL, rounded)) != NULL)
                return CCA_OK;
        }
        if (rounded > arena->size)
            return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "%s: %zu bytes can never fit the %zu-byte greedy arena",
                             a->allocating, size, arena->size);
        /* A full arena: pending frees complete once the device is
         * synchronized, and one of them may fit (both kinds of segment). */
        if (!(*b = ccai_best_fit(a, pool, NULL, rounded)) && a->c.pending && ccai_stream_wait_all(a) == CCA_OK)
            *b = ccai_best_fit(a, pool, NULL, rounded);
        if (!*b) /* no block that fits: an OOM, no retry */
            return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "%s: the greedy arena has no free block of %zu bytes",
                             a->allocating, size);
        /* over pages, a free block that fits may have trimmed pages the
         * device would not map: the retry frees other free pages of the
         * arena (nothing to map: CCA_OK at once) */
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
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "%s: cannot reserve a segment for %zu bytes: %s", a->allocating, size,
                         cca_last_error());
    return st;
}
