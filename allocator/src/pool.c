/*
 * pool.c — the best-fit caching pool: cca_create/destroy, cca_alloc/free,
 * segments, splitting and coalescing, stream-deferred frees.
 *
 * Memory comes from the upstream in SEGMENTS; a segment is cut into BLOCKS
 * that tile it (internal.h, invariant I1). A free block is cached in the free
 * index of its pool, never returned to the upstream by cca_free; only whole
 * free segments go back, through cca_trim / cca_empty_cache / the OOM retry.
 *
 *   segment (20 MiB, large pool, stream s)
 *   ┌──────────┬────────────────┬──────────┬───────────────────────────────┐
 *   │ A live 4M│ B free 6M      │ C live 2M│ D free 8M                     │
 *   └──────────┴────────────────┴──────────┴───────────────────────────────┘
 *   free C  ->  B, C and D coalesce into one free 16M block (I2).
 *
 * The life of one cca_alloc(size, stream), growth policy:
 *   1. round size up to CCA_GRANULARITY (512 B); size 0 -> NULL, OK;
 *   2. pick the pool: small (<= small_max, 1 MiB), medium (< large_min,
 *      10 MiB) or large; a large request also looks in the medium pool and
 *      takes the better fit there, a medium request never looks in the large
 *      pool (so a long-lived mid-size block cannot pin a big segment);
 *   3. best fit in that pool's free index for this stream: smallest block
 *      >= size, lowest address on ties (block_index.c: size classes with a
 *      bitmap, a small treap per class);
 *   4. none: reserve a segment — small pool: small_segment (2 MiB); medium
 *      pool: medium_segment (20 MiB); large pool: the request rounded up to
 *      segment_round (2 MiB). These are PyTorch's sizes: small segments keep
 *      tiny tensors from pinning big segments, the 20 MiB segment packs
 *      mid-size tensors, and big tensors get their own segment so that they
 *      can be returned whole. PyTorch keeps medium and large in one pool;
 *      ccalloc separates them (medium_pool:0 restores PyTorch's layout);
 *   5. the upstream refuses (or max_reserved would be crossed): synchronize,
 *      release every free segment, retry once (alloc_retries); still no: OOM
 *      with one log line, state unchanged;
 *   6. split: the remainder becomes a free block if it is worth keeping —
 *      small pool and greedy arena: >= 512 B; medium and large pools:
 *      > small_max (a smaller tail would only serve small requests, which
 *      have their own pool, so it stays with the block as slack);
 *   7. record the block in the live map (address -> block) and the stats.
 *
 * Greedy policy (TensorFlow's default): one arena segment of greedy_bytes, or
 * greedy_fraction of the device's free memory, reserved at cca_create and
 * shared by all streams; the upstream is not called again and a full arena is
 * an OOM. The arena always splits (step 6, 512 B rule) since nothing else can
 * serve the remainder. After empty-cache releases it, the next cca_alloc
 * reserves it again.
 *
 * Streams: in the growth policy a segment belongs to the stream of the request
 * that reserved it, so a freed block is reused only on its own stream, with no
 * synchronization (work on one stream is ordered). A block used on other
 * streams (cca_record_stream), or a block of the shared greedy arena allocated
 * on a non-default stream, is PENDING at cca_free: an event is recorded on each
 * of those streams and the block rejoins the pool only when all completed
 * (polled at the next cca_alloc; waited for by trim/empty-cache/OOM retry).
 *
 * Locking: one mutex per allocator around every public entry point. A
 * cached alloc+free pair is two lock round trips, two O(log n) treap
 * operations on small per-class treaps and two O(1) hash operations.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define SLAB_BLOCKS 128

/* ---- block records ------------------------------------------------------------ */

ccai_block *ccai_block_new(cca_allocator *a) {
    if (!a->spare_blocks) {
        ccai_block_slab *slab = calloc(1, sizeof *slab + SLAB_BLOCKS * sizeof(ccai_block));
        if (!slab)
            return NULL;
        slab->next = a->slabs;
        a->slabs = slab;
        for (size_t i = 0; i < SLAB_BLOCKS; i++) {
            slab->blocks[i].next = a->spare_blocks;
            a->spare_blocks = &slab->blocks[i];
        }
    }
    ccai_block *b = a->spare_blocks;
    a->spare_blocks = b->next;
    memset(b, 0, sizeof *b);
    return b;
}

void ccai_block_recycle(cca_allocator *a, ccai_block *b) {
    free(b->used_on);
    free(b->pending.events);
    b->next = a->spare_blocks; /* cleared again by ccai_block_new */
    a->spare_blocks = b;
}

/* ---- sizes ---------------------------------------------------------------- */

static size_t round_up(size_t v, size_t to) {
    return (v + to - 1) / to * to;
}

ccai_pool_kind ccai_pool_of(const cca_allocator *a, size_t rounded) {
    const cca_config *c = &a->config;
    if (c->policy == CCA_POLICY_GREEDY)
        return CCAI_POOL_LARGE;
    if (c->small_pool && rounded <= c->small_max)
        return CCAI_POOL_SMALL;
    if (c->medium_pool && rounded < c->large_min)
        return CCAI_POOL_MEDIUM;
    return CCAI_POOL_LARGE;
}

/* Preferred and minimal segment sizes for a growth-policy request. */
static void segment_sizes(const cca_allocator *a, size_t rounded, ccai_pool_kind pool, size_t *want, size_t *least) {
    const cca_config *c = &a->config;
    if (pool == CCAI_POOL_SMALL) {
        *want = *least = c->small_segment;
    } else if (rounded < c->large_min) {
        *want = c->medium_segment;
        *least = round_up(rounded, c->segment_round);
    } else {
        *want = *least = round_up(rounded, c->segment_round);
    }
}

static bool worth_splitting(const cca_allocator *a, const ccai_block *b, size_t rounded) {
    size_t remainder = b->size - rounded;
    if (b->segment->shared || b->segment->pool == CCAI_POOL_SMALL)
        return remainder >= CCA_GRANULARITY;
    if (a->config.max_split && b->size > a->config.max_split)
        return false;
    return remainder > a->config.small_max;
}

/* ---- segments ------------------------------------------------------------- */

static void counters_add_reserved(ccai_counters *c, size_t size) {
    c->reserved += size;
    if (c->reserved > c->reserved_peak)
        c->reserved_peak = c->reserved;
    c->segments++;
    if (c->segments > c->segments_peak)
        c->segments_peak = c->segments;
    c->upstream_allocs++;
}

/* Reserve a segment of `size` bytes and index its one free block. */
static cca_status segment_reserve(cca_allocator *a, size_t size, cca_stream stream, ccai_pool_kind pool, bool shared,
                                  ccai_segment **out) {
    if (a->config.max_reserved &&
        size >
            a->config.max_reserved - (a->c.reserved < a->config.max_reserved ? a->c.reserved : a->config.max_reserved))
        return ccai_fail(CCA_ERR_OUT_OF_MEMORY, "max_reserved (%zu) would be exceeded", a->config.max_reserved);
    ccai_segment *s = calloc(1, sizeof *s);
    ccai_block *b = ccai_block_new(a);
    if (!s || !b || ccai_free_index_attach(&a->pools[pool], stream) != CCA_OK) {
        free(s);
        if (b)
            ccai_block_recycle(a, b);
        return ccai_fail(CCA_ERR_OUT_OF_MEMORY, "host malloc failed for segment bookkeeping");
    }
    void *base = NULL;
    cca_status st = cca_upstream_alloc(a->upstream, size, &base);
    if (st != CCA_OK) {
        ccai_free_index_detach(&a->pools[pool], stream);
        free(s);
        ccai_block_recycle(a, b);
        return st;
    }
    s->base = (uintptr_t)base;
    s->size = size;
    s->stream = stream;
    s->shared = shared;
    s->pool = pool;
    s->first = b;
    s->next = a->segments;
    if (a->segments)
        a->segments->prev = s;
    a->segments = s;
    b->addr = s->base;
    b->size = size;
    b->segment = s;
    b->stream = stream;
    b->state = CCAI_FREE;
    ccai_free_index_insert(&a->pools[pool], b);
    counters_add_reserved(&a->c, size);
    *out = s;
    return CCA_OK;
}

cca_status ccai_segment_release(cca_allocator *a, ccai_segment *s) {
    ccai_block *b = s->first;
    /* precondition: one free block tiles the segment */
    cca_status st = cca_upstream_free(a->upstream, (void *)s->base, s->size);
    if (st != CCA_OK)
        return st; /* the segment stays, fully indexed: state intact */
    ccai_free_index_remove(&a->pools[s->pool], b);
    ccai_free_index_detach(&a->pools[s->pool], s->stream);
    ccai_block_recycle(a, b);
    if (s->prev)
        s->prev->next = s->next;
    else
        a->segments = s->next;
    if (s->next)
        s->next->prev = s->prev;
    a->c.reserved -= s->size;
    a->c.segments--;
    a->c.upstream_frees++;
    free(s);
    return CCA_OK;
}

static ccai_segment *find_arena(const cca_allocator *a) {
    for (ccai_segment *s = a->segments; s; s = s->next)
        if (s->shared)
            return s;
    return NULL;
}

static cca_status greedy_arena_size(cca_allocator *a, size_t *size) {
    size_t want = a->config.greedy_bytes;
    if (!want) {
        size_t free_b = 0, total_b = 0;
        cca_status st = cca_upstream_mem_info(a->upstream, &free_b, &total_b);
        if (st != CCA_OK)
            return ccai_fail(st, "greedy: cannot size the arena from greedy_fraction: %s", cca_last_error());
        want = (size_t)((double)free_b * a->config.greedy_fraction);
    }
    if (a->config.max_reserved && want > a->config.max_reserved)
        want = a->config.max_reserved;
    want = want / CCA_GRANULARITY * CCA_GRANULARITY;
    if (!want)
        return ccai_fail(CCA_ERR_OUT_OF_MEMORY, "greedy: arena size rounds to 0 bytes");
    *size = want;
    return CCA_OK;
}

static cca_status greedy_reserve_arena(cca_allocator *a) {
    size_t size = 0;
    cca_status st = greedy_arena_size(a, &size);
    if (st != CCA_OK)
        return st;
    ccai_segment *s;
    return segment_reserve(a, size, NULL, CCAI_POOL_LARGE, true, &s);
}

/* ---- returning blocks to the pool ------------------------------------------------ */

static void absorb_next(cca_allocator *a, ccai_block *b) {
    ccai_block *n = b->next;
    b->size += n->size;
    b->next = n->next;
    if (n->next)
        n->next->prev = b;
    ccai_block_recycle(a, n);
    a->c.merges++;
}

/* A LIVE or PENDING block rejoins its pool, coalescing with free neighbours. */
static void return_block(cca_allocator *a, ccai_block *b) {
    ccai_segment *s = b->segment;
    ccai_free_index *ix = &a->pools[s->pool];
    ccai_live_map_remove(&a->live, b);
    s->live_blocks--;
    s->live_bytes -= b->size;
    a->c.allocated -= b->size;
    a->c.active--;
    free(b->used_on);
    b->used_on = NULL;
    b->used_on_count = b->used_on_cap = 0;
    b->requested = 0;
    b->alloc_stream = NULL;
    b->state = CCAI_FREE;
    if (b->prev && b->prev->state == CCAI_FREE) {
        ccai_block *p = b->prev;
        ccai_free_index_remove(ix, p);
        absorb_next(a, p);
        b = p;
    }
    if (b->next && b->next->state == CCAI_FREE) {
        ccai_free_index_remove(ix, b->next);
        absorb_next(a, b);
    }
    ccai_free_index_insert(ix, b);
}

static bool pending_ready(cca_allocator *a, ccai_block *b) {
    for (size_t i = 0; i < b->pending.count; i++)
        if (b->pending.events[i] && ccai_upstream_event_query(a->upstream, b->pending.events[i]) != CCA_OK)
            return false;
    return true;
}

void ccai_process_pending(cca_allocator *a, bool wait) {
    if (!a->pending_head)
        return;
    if (wait)
        (void)cca_upstream_synchronize(a->upstream);
    ccai_block **link = &a->pending_head;
    while (*link) {
        ccai_block *b = *link;
        if (!pending_ready(a, b)) {
            link = &b->pending_next;
            continue;
        }
        *link = b->pending_next;
        b->pending_next = NULL;
        for (size_t i = 0; i < b->pending.count; i++)
            if (b->pending.events[i])
                ccai_upstream_event_destroy(a->upstream, b->pending.events[i]);
        free(b->pending.events);
        b->pending.events = NULL;
        b->pending.count = 0;
        a->c.pending--;
        return_block(a, b);
    }
}

/* Streams whose work must finish before b can be reused by others. */
static size_t streams_to_wait_for(const ccai_block *b, cca_stream *out, size_t cap) {
    size_t n = 0;
    if (b->segment->shared && b->alloc_stream != NULL && n < cap)
        out[n++] = b->alloc_stream;
    for (size_t i = 0; i < b->used_on_count && n < cap; i++)
        out[n++] = b->used_on[i];
    return n;
}

/* Defer b until events on its other streams complete; false = do it now. */
static bool defer_free(cca_allocator *a, ccai_block *b) {
    if (b->used_on_count == 0 && !(b->segment->shared && b->alloc_stream != NULL))
        return false; /* the common case: reused on its own stream, no wait */
    size_t cap = b->used_on_count + 1;
    cca_stream *streams = malloc(cap * sizeof *streams);
    if (!streams) {
        (void)cca_upstream_synchronize(a->upstream);
        return false;
    }
    size_t n = streams_to_wait_for(b, streams, cap);
    if (n == 0) {
        free(streams);
        return false;
    }
    void **events = ccai_upstream_has_events(a->upstream) ? calloc(n, sizeof *events) : NULL;
    bool recorded = events != NULL;
    for (size_t i = 0; recorded && i < n; i++)
        recorded = ccai_upstream_event_record(a->upstream, streams[i], &events[i]) == CCA_OK;
    free(streams);
    if (!recorded) {
        /* no events (or recording failed): wait for the whole device instead */
        for (size_t i = 0; events && i < n; i++)
            if (events[i])
                ccai_upstream_event_destroy(a->upstream, events[i]);
        free(events);
        (void)cca_upstream_synchronize(a->upstream);
        return false;
    }
    bool done = true;
    for (size_t i = 0; done && i < n; i++)
        done = ccai_upstream_event_query(a->upstream, events[i]) == CCA_OK;
    if (done) { /* already complete (the host device, or an idle GPU): no wait */
        for (size_t i = 0; i < n; i++)
            ccai_upstream_event_destroy(a->upstream, events[i]);
        free(events);
        return false;
    }
    b->pending.events = events;
    b->pending.count = n;
    b->state = CCAI_PENDING;
    b->pending_next = a->pending_head;
    a->pending_head = b;
    a->c.pending++;
    return true;
}

/* ---- lifetime --------------------------------------------------------------- */

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
        if (cca_config_apply_env(&cfg) != CCA_OK) {
            ccai_log("%s; using the defaults", cca_last_error());
            cca_config_default(&cfg);
        }
    }
    cca_allocator *a = calloc(1, sizeof *a);
    if (!a)
        return ccai_fail(CCA_ERR_OUT_OF_MEMORY, "cca_create: host malloc failed");
    a->config = cfg;
    a->upstream = u;
    if (ccai_live_map_init(&a->live) != CCA_OK) {
        free(a);
        return CCA_ERR_OUT_OF_MEMORY;
    }
    pthread_mutex_init(&a->lock, NULL);
    a->trace = ccai_trace_open_from_env();
    if (cfg.policy == CCA_POLICY_GREEDY) {
        cca_status st = greedy_reserve_arena(a);
        if (st != CCA_OK) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", cca_last_error());
            cca_destroy(a);
            return ccai_fail(st, "cca_create: greedy arena: %s", msg);
        }
    }
    *out = a;
    return CCA_OK;
}

cca_status cca_destroy(cca_allocator *a) {
    if (!a)
        return ccai_fail(CCA_ERR_INVALID_ARGUMENT, "cca_destroy: allocator is NULL");
    pthread_mutex_lock(&a->lock);
    ccai_process_pending(a, true);
    size_t live = a->live.count;
    size_t live_bytes = a->c.allocated;
    cca_status result = CCA_OK;
    while (a->segments) {
        ccai_segment *s = a->segments;
        for (ccai_block *b = s->first, *next; b; b = next) {
            next = b->next;
            for (size_t i = 0; i < b->pending.count; i++)
                if (b->pending.events[i])
                    ccai_upstream_event_destroy(a->upstream, b->pending.events[i]);
            free(b->used_on);
            free(b->pending.events);
        }
        if (cca_upstream_free(a->upstream, (void *)s->base, s->size) != CCA_OK)
            result = CCA_ERR_UPSTREAM;
        a->segments = s->next;
        free(s);
    }
    while (a->slabs) {
        ccai_block_slab *next = a->slabs->next;
        free(a->slabs);
        a->slabs = next;
    }
    ccai_live_map_destroy(&a->live);
    for (int p = 0; p < CCAI_POOL_COUNT; p++)
        ccai_free_index_destroy(&a->pools[p]);
    ccai_trace_close(a->trace);
    pthread_mutex_unlock(&a->lock);
    pthread_mutex_destroy(&a->lock);
    free(a);
    if (live)
        return ccai_fail(CCA_ERR_LIVE_BLOCKS, "cca_destroy: %zu blocks (%zu bytes) were still live", live, live_bytes);
    if (result != CCA_OK)
        return ccai_fail(result, "cca_destroy: the upstream refused to take a segment back");
    return CCA_OK;
}

cca_status cca_get_config(const cca_allocator *a, cca_config *c) {
    if (!a || !c)
        return ccai_fail(CCA_ERR_INVALID_ARGUMENT, "cca_get_config: NULL argument");
    *c = a->config; /* immutable after creation: no lock needed */
    return CCA_OK;
}

/* ---- allocation ---------------------------------------------------------------- */

static void log_oom(cca_allocator *a, size_t size, size_t rounded, cca_stream stream) {
    a->c.ooms++;
    if (!a->config.log_oom)
        return;
    char req[32], res[32], alloc[32], largest[32], devfree[32] = "unknown", total[32] = "?";
    size_t free_b, total_b, big = 0;
    for (int p = 0; p < CCAI_POOL_COUNT; p++) {
        size_t l = ccai_free_index_largest(&a->pools[p]);
        if (l > big)
            big = l;
    }
    if (cca_upstream_mem_info(a->upstream, &free_b, &total_b) == CCA_OK) {
        cca_format_bytes(free_b, devfree, sizeof devfree);
        cca_format_bytes(total_b, total, sizeof total);
    }
    ccai_log("out of memory: requested %s (%zu B rounded to %zu) on stream %p; reserved %s, allocated %s, "
             "largest free block %s, device free %s of %s (policy %s%s)",
             cca_format_bytes(size, req, sizeof req), size, rounded, stream,
             cca_format_bytes(a->c.reserved, res, sizeof res), cca_format_bytes(a->c.allocated, alloc, sizeof alloc),
             cca_format_bytes(big, largest, sizeof largest), devfree, total,
             a->config.policy == CCA_POLICY_GREEDY ? "greedy" : "growth",
             a->config.max_reserved ? ", max_reserved set" : "");
}

/* Reserve a segment able to hold `rounded`, trying the preferred size first;
 * *block is its one free block, which the request takes (a fresh segment is
 * always used, even if it is larger than max_split). */
static cca_status grow_for(cca_allocator *a, size_t rounded, cca_stream stream, ccai_pool_kind pool,
                           ccai_block **block) {
    size_t want, least;
    segment_sizes(a, rounded, pool, &want, &least);
    ccai_segment *s = NULL;
    cca_status st = segment_reserve(a, want, stream, pool, false, &s);
    if (st == CCA_ERR_OUT_OF_MEMORY && least < want)
        st = segment_reserve(a, least, stream, pool, false, &s);
    *block = st == CCA_OK ? s->first : NULL;
    return st;
}

static bool better_fit(const ccai_block *x, const ccai_block *than) {
    return x && (!than || x->size < than->size || (x->size == than->size && x->addr < than->addr));
}

/* Best fit for a request of `pool`. A large request may also take a block of
 * a medium segment (the worst it can pin is one medium segment); a medium
 * request never takes a block of a large segment. */
static ccai_block *take_block(cca_allocator *a, ccai_pool_kind pool, cca_stream key_stream, size_t rounded) {
    size_t max_size = SIZE_MAX;
    if (a->config.policy == CCA_POLICY_GROWTH && a->config.max_split && rounded < a->config.max_split)
        max_size = a->config.max_split;
    ccai_block *b = ccai_free_index_best_fit(&a->pools[pool], key_stream, rounded, max_size);
    if (pool == CCAI_POOL_LARGE && a->config.medium_pool && a->config.policy == CCA_POLICY_GROWTH &&
        rounded <= a->config.medium_segment) {
        ccai_block *m = ccai_free_index_best_fit(&a->pools[CCAI_POOL_MEDIUM], key_stream, rounded, max_size);
        if (better_fit(m, b))
            b = m;
    }
    return b;
}

static cca_status alloc_locked(cca_allocator *a, size_t size, cca_stream stream, void **out) {
    if (size > SIZE_MAX - (a->config.segment_round + CCA_GRANULARITY))
        return ccai_fail(CCA_ERR_INVALID_ARGUMENT, "cca_alloc: size %zu is too large to round", size);
    size_t rounded = round_up(size, CCA_GRANULARITY);
    bool greedy = a->config.policy == CCA_POLICY_GREEDY;
    ccai_pool_kind pool = ccai_pool_of(a, rounded);
    cca_stream key_stream = greedy ? NULL : stream;

    ccai_process_pending(a, false);
    ccai_block *b = take_block(a, pool, key_stream, rounded);
    if (!b && greedy) {
        cca_status st = CCA_OK;
        if (!find_arena(a))
            st = greedy_reserve_arena(a); /* after an empty-cache: reserve again */
        if (st == CCA_OK && a->pending_head)
            ccai_process_pending(a, true);
        b = st == CCA_OK ? take_block(a, pool, key_stream, rounded) : NULL;
        if (!b) {
            char why[256];
            snprintf(why, sizeof why, "%s", st == CCA_OK ? "the arena is full" : cca_last_error());
            log_oom(a, size, rounded, stream);
            return ccai_fail(st == CCA_OK || st == CCA_ERR_OUT_OF_MEMORY ? CCA_ERR_OUT_OF_MEMORY : st,
                             "cca_alloc: greedy arena cannot hold %zu bytes: %s", size, why);
        }
    } else if (!b) {
        cca_status st = grow_for(a, rounded, stream, pool, &b);
        if (st == CCA_ERR_OUT_OF_MEMORY) {
            /* retry once after giving every cached free segment back */
            a->c.retries++;
            ccai_process_pending(a, true);
            (void)ccai_release_free_segments(a, 0, NULL); /* a refused free only means less room */
            b = take_block(a, pool, key_stream, rounded); /* a pending block may fit now */
            st = b ? CCA_OK : grow_for(a, rounded, stream, pool, &b);
        }
        if (st == CCA_ERR_OUT_OF_MEMORY) {
            log_oom(a, size, rounded, stream);
            return ccai_fail(CCA_ERR_OUT_OF_MEMORY, "cca_alloc: cannot reserve a segment for %zu bytes", size);
        }
        if (st != CCA_OK)
            return st;
    }

    pool = b->segment->pool; /* a large request may take a medium block */
    ccai_free_index_remove(&a->pools[pool], b);
    if (worth_splitting(a, b, rounded)) {
        ccai_block *rest = ccai_block_new(a);
        if (rest) {
            rest->addr = b->addr + rounded;
            rest->size = b->size - rounded;
            rest->segment = b->segment;
            rest->stream = b->stream;
            rest->state = CCAI_FREE;
            rest->prev = b;
            rest->next = b->next;
            if (b->next)
                b->next->prev = rest;
            b->next = rest;
            b->size = rounded;
            ccai_free_index_insert(&a->pools[pool], rest);
            a->c.splits++;
        } /* no host memory for a record: hand out the block unsplit */
    }
    b->state = CCAI_LIVE;
    b->requested = size;
    b->alloc_stream = stream;
    b->id = a->trace ? ccai_trace_alloc(a->trace, size, stream) : ++a->alloc_sequence;
    ccai_live_map_insert(&a->live, b);
    b->segment->live_blocks++;
    b->segment->live_bytes += b->size;

    ccai_counters *c = &a->c;
    c->allocated += b->size;
    if (c->allocated > c->allocated_peak)
        c->allocated_peak = c->allocated;
    c->requested += size;
    if (c->requested > c->requested_peak)
        c->requested_peak = c->requested;
    c->active++;
    if (c->active > c->active_peak)
        c->active_peak = c->active;
    c->alloc_calls++;
    *out = (void *)b->addr;
    return CCA_OK;
}

cca_status cca_alloc(cca_allocator *a, size_t size, cca_stream s, void **out) {
    if (out)
        *out = NULL;
    if (!a || !out)
        return ccai_fail(CCA_ERR_INVALID_ARGUMENT, "cca_alloc: %s is NULL", a ? "out" : "allocator");
    if (size == 0)
        return CCA_OK;
    pthread_mutex_lock(&a->lock);
    cca_status st = alloc_locked(a, size, s, out);
    pthread_mutex_unlock(&a->lock);
    return st;
}

/* Why is ptr not a live block? Fills the error message (lock held). */
static cca_status diagnose_bad_pointer(cca_allocator *a, const void *ptr, const char *who) {
    uintptr_t p = (uintptr_t)ptr;
    ccai_block *live = ccai_live_map_find(&a->live, p);
    if (live && live->state == CCAI_PENDING)
        return ccai_fail(CCA_ERR_INVALID_POINTER, "%s: double free of %p (its free is waiting on stream events)", who,
                         ptr);
    for (ccai_segment *s = a->segments; s; s = s->next) {
        if (p < s->base || p >= s->base + s->size)
            continue;
        for (ccai_block *b = s->first; b; b = b->next) {
            if (p < b->addr || p >= b->addr + b->size)
                continue;
            if (b->state == CCAI_FREE && b->addr == p)
                return ccai_fail(CCA_ERR_INVALID_POINTER, "%s: double free of %p", who, ptr);
            if (b->state == CCAI_FREE)
                return ccai_fail(CCA_ERR_INVALID_POINTER,
                                 "%s: %p lies inside a free block (double free of a coalesced block, or stale pointer)",
                                 who, ptr);
            return ccai_fail(CCA_ERR_INVALID_POINTER, "%s: interior pointer %p (block starts at %p, offset %zu)", who,
                             ptr, (void *)b->addr, (size_t)(p - b->addr));
        }
    }
    return ccai_fail(CCA_ERR_INVALID_POINTER, "%s: %p was not allocated by this allocator", who, ptr);
}

cca_status cca_free(cca_allocator *a, void *ptr) {
    if (!a)
        return ccai_fail(CCA_ERR_INVALID_ARGUMENT, "cca_free: allocator is NULL");
    if (!ptr)
        return CCA_OK;
    pthread_mutex_lock(&a->lock);
    ccai_block *b = ccai_live_map_find(&a->live, (uintptr_t)ptr);
    if (!b || b->state != CCAI_LIVE) {
        cca_status st = diagnose_bad_pointer(a, ptr, "cca_free");
        pthread_mutex_unlock(&a->lock);
        return st;
    }
    a->c.free_calls++;
    a->c.requested -= b->requested;
    if (a->trace)
        ccai_trace_free(a->trace, b->id, b->requested, b->alloc_stream);
    if (!defer_free(a, b))
        return_block(a, b);
    pthread_mutex_unlock(&a->lock);
    return CCA_OK;
}

cca_status cca_record_stream(cca_allocator *a, void *ptr, cca_stream s) {
    if (!a || !ptr)
        return ccai_fail(CCA_ERR_INVALID_ARGUMENT, "cca_record_stream: %s is NULL", a ? "ptr" : "allocator");
    pthread_mutex_lock(&a->lock);
    cca_status st = CCA_OK;
    ccai_block *b = ccai_live_map_find(&a->live, (uintptr_t)ptr);
    if (!b || b->state != CCAI_LIVE) {
        st = diagnose_bad_pointer(a, ptr, "cca_record_stream");
    } else if (s != b->alloc_stream) {
        bool known = false;
        for (size_t i = 0; i < b->used_on_count; i++)
            known |= b->used_on[i] == s;
        if (!known) {
            if (b->used_on_count == b->used_on_cap) {
                size_t cap = b->used_on_cap ? 2 * b->used_on_cap : 2;
                cca_stream *grown = realloc(b->used_on, cap * sizeof *grown);
                if (!grown)
                    st = ccai_fail(CCA_ERR_OUT_OF_MEMORY, "cca_record_stream: host malloc failed");
                else
                    b->used_on = grown, b->used_on_cap = cap;
            }
            if (st == CCA_OK)
                b->used_on[b->used_on_count++] = s;
        }
    }
    pthread_mutex_unlock(&a->lock);
    return st;
}

cca_status cca_block_size(cca_allocator *a, const void *ptr, size_t *size) {
    if (!a || !ptr || !size)
        return ccai_fail(CCA_ERR_INVALID_ARGUMENT, "cca_block_size: NULL argument");
    pthread_mutex_lock(&a->lock);
    ccai_block *b = ccai_live_map_find(&a->live, (uintptr_t)ptr);
    cca_status st = CCA_OK;
    if (!b || b->state != CCAI_LIVE)
        st = diagnose_bad_pointer(a, ptr, "cca_block_size");
    else
        *size = b->size;
    pthread_mutex_unlock(&a->lock);
    return st;
}
