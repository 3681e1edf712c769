/*
 * alloc.c — the cached path: cca_alloc, cca_alloc_in, cca_free,
 * cca_record_stream, cca_block_size.
 *
 * - One lock round trip per call; the cached pair (an alloc a cached block
 *   serves, then its free) calls no upstream and allocates no host memory
 *   except a block record for a split's remainder.
 * - A request is rounded to CCA_GRANULARITY (512 B) and served by best fit
 *   in its pool's free index: the smallest block >= size, lowest address
 *   on ties (free_index.c). Anything else is the slow path (grow.c).
 * - Every LIVE block is in the live map (live_map.c): cca_free finds it in
 *   O(1); a pointer that is not one is diagnosed (check.c), never freed.
 * - Cost of a cached pair: two lock round trips, one best-fit descent,
 *   one insert, two O(1) hash operations.
 *
 * The life of one cca_alloc(size, stream), alloc_step:
 *   1 round          size -> multiple of 512; 0 -> NULL, OK
 *   2 pool           small / medium / large (ccai_pool_of); greedy: the arena
 *   3 poll           complete pending frees whose events finished (stream.c)
 *   4 best fit       the domain's footprint arena, then the pool (+ medium)
 *   5 grow           none fits, or its pages cannot be mapped: grow.c
 *   6 split          take the block, its remainder a free block (block.c)
 *   7 live           live map, counters, trace, history
 */
#include "internal.h"
#include "block.h" /* step 6, the split */
#include "fit.h"   /* step 4, best fit */

/* Step 3 of an allocation: complete the deferred frees whose events are done.
 * Inline so that the usual case, no queue at all, is one load. */
static inline void ccai_stream_poll(cca_allocator *a) {
    if (a->queues)
        ccai_stream_poll_queues(a);
}

#include <stdlib.h>
#include <string.h>

/* ---- steps 1-7 ---------------------------------------------------------- */

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
    ccai_raise(&c->allocated, &c->allocated_peak, b->size);
    ccai_raise(&c->requested, &c->requested_peak, size);
    ccai_raise(&c->active, &c->active_peak, 1);
    c->alloc_calls++;
    b->born = c->alloc_calls; /* a leak report's age (domain.c) */
    if (a->domains_tracked) { /* only once a domain exists (domain.c) */
        ccai_domain_counters *d = &b->segment->domain->c;
        ccai_raise(&d->allocated, &d->allocated_peak, b->size);
        ccai_raise(&d->requested, &d->requested_peak, size);
        ccai_raise(&d->active, &d->active_peak, 1);
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
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "%s: size %zu is too large to round", a->allocating, size);
    size_t rounded = ccai_round_up(size, CCA_GRANULARITY);
    /* 2 */
    ccai_pool_kind pool = ccai_pool_of(a, rounded);
    cca_stream key = a->config.policy == CCA_POLICY_GREEDY ? NULL : stream;
    /* 3 */
    ccai_stream_poll(a);
    /* 4 (a domain's footprint arena first: domain.c) */
    ccai_assert(d == a->serving);
    ccai_block *b = ccai_arena_fit(a, rounded);
    if (!b) {
        b = ccai_best_fit_in(a, d->pools, pool, key, rounded);
        if (b)
            prefetch_pair(a, &d->pools[pool], b);
    }
    bool split = b && ccai_block_worth_splitting(a, b, rounded); /* decided once: the pages to map, then step 6 */
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
    if (to_map && ccai_grow_never_succeeds(a, size, rounded, pool) != CCA_OK)
        b = NULL, to_map = false; /* step 5 fails it (5a), nothing mapped */
    if (to_map) {
        ccai_device_room room = {false, 0};
        cca_status st = a->kind->back(a, b, held, &room); /* only pages mark blocks unmapped */
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
        cca_status st = ccai_grow(a, size, rounded, key, pool, refused, &b);
        if (st != CCA_OK) {
            if (st == CCA_ERR_OUT_OF_MEMORY) {
                char why[512];
                snprintf(why, sizeof why, "%s", cca_last_error());
                ccai_grow_log_oom(a, size, rounded, stream, log);
                cca_set_error(st, "%s", why);
                return st;
            }
            return named(a, st);
        }
        split = ccai_block_worth_splitting(a, b, rounded);
    }
    /* 6 */
    if (ccai_block_take(a, b, rounded, split) != CCA_OK) { /* b unchanged; its pages stay mapped */
        ccai_grow_log_oom(a, size, rounded, stream, log);
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
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_alloc: %s is NULL", a ? "out" : "allocator");
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
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_alloc_in: %s is NULL", a ? "out" : "allocator");
    ccai_deferred_log log;
    log.set = false;
    cca_status st = ccai_lock(a, "cca_alloc_in");
    if (st != CCA_OK)
        return st;
    cca_domain *d = ccai_domain_lookup(a, h);
    if (!d) {
        st = cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_alloc_in: domain %p is not one of this allocator's", (void *)h);
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
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_free: allocator is NULL");
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
        ccai_lower(&a->c.requested, b->requested);
        if (a->domains_tracked)
            ccai_lower(&b->segment->domain->c.requested, b->requested);
        if (a->trace)
            ccai_trace_free(a->trace, b->id, b->requested, b->alloc_stream, b->segment->domain->trace_no);
        uintptr_t addr = b->addr; /* for the history: b may merge away below */
        size_t requested = b->requested;
        cca_stream used = b->alloc_stream;
        bool deferred = (b->uses || b->alloc_stream != b->stream || (b->seg & CCAI_SEG_SHARED)) &&
                        ccai_stream_defer_free(a, b, &st);
        if (!deferred) {
            if (b->uses) /* every user done: its record goes (stream.c) */
                ccai_stream_use_free(a, b);
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
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_record_stream: %s is NULL", a ? "ptr" : "allocator");
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
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_block_size: NULL argument");
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
