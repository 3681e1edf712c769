/*
 * alloc.c — the cached path: cca_alloc, cca_alloc_in, cca_free,
 * cca_record_stream, cca_block_size.
 *
 * - The cached pair (an alloc a cached block serves, then its free) calls
 *   no upstream; its host memory, if any: a block record for a remainder,
 *   a tree node (free_index.c) and the live map's doubling (live_map.c).
 * - Every LIVE block is in the live map: cca_free finds it in O(1); a
 *   pointer that is not one is diagnosed (check.c), never freed.
 * - Cost of a cached pair: two lock round trips, a best fit and an insert
 *   (index v2: one descent, no tree change), two O(1) hash operations.
 *
 * The life of one cca_alloc(size, stream), alloc_step:
 *   1 round          size -> multiple of 512; 0 -> NULL, OK
 *   2 pool           small / medium / large (ccai_pool_of); greedy: the arena
 *   3 poll           complete pending frees whose events finished (stream.c)
 *   4 best fit       the domain's footprint arena, then the pool (large: + medium)
 *   5 grow           none fits, or its pages cannot be mapped: a->policy
 *   6 split          take the block, its remainder a free block (block.h)
 *   7 live           live map, counters, trace, history
 */
#include "core/internal.h"
#include "domain_set.h"    /* a handle's record */
#include "sleep.h"         /* a sleeping domain refuses, its copies dropped */
#include "observe/check.h" /* the unlock, a bad pointer's diagnosis */
#include "observe/oom.h"
#include "observe/trace.h"
#include "core/block.h" /* step 6, the split */
#include "core/fit.h"   /* step 4, best fit */

#include <stdlib.h>
#include <string.h>

/* ---- steps 1-7 ---------------------------------------------------------- */

/* Step 7 */
static void mark_live(cca_allocator *a, ccai_block *b, size_t size, cca_stream stream) {
    b->state = CCAI_LIVE;
    b->requested = size;
    b->alloc_stream = stream;
    if (a->trace) { /* the recorder may log: written after the unlock */
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
    if (a->domains_tracked)   /* only once a domain exists */
        ccai_domain_count_alloc(&b->segment->domain->c, b, size);
}

/* A failure from deeper down: its message starts with the call's name, once. */
static cca_status named(const cca_allocator *a, cca_status st) {
    const char *why = cca_last_error();
    size_t n = strlen(a->allocating);
    if (strncmp(why, a->allocating, n) == 0 && why[n] == ':')
        return st;
    return cca_error_prefix(st, "%s", a->allocating);
}

/* Step 4 found b: prefetch the lines the pair reads next (the live map's
 * bucket for b, b's neighbours for the merge at free), so their misses
 * overlap. Measured: docs/allocator-measurements.md, "Speed". */
static inline void prefetch_pair(const cca_allocator *a, const ccai_free_index *ix, const ccai_block *b) {
    if (ix->hint == b)
        __builtin_prefetch(&a->live.buckets[ccai_live_map_bucket(&a->live, ix->hint_leaf->e[ix->hint_pos].addr)], 1);
    __builtin_prefetch(b->prev);
    __builtin_prefetch(b->next);
}

static cca_status alloc_step(cca_allocator *a, cca_domain *d, size_t size, cca_stream stream, void **out,
                             ccai_deferred_log *log) {
    /* 1 */
    if (size > a->max_request)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "%s: size %zu is too large to round", a->allocating, size);
    size_t rounded = ccai_round_up(size, CCA_GRANULARITY);
    /* 2 */
    ccai_pool_kind pool = ccai_pool_of(a, rounded);
    cca_stream key = a->config.policy == CCA_POLICY_GREEDY ? NULL : stream;
    /* 3 (no queue: one load) */
    if (a->queues)
        ccai_stream_poll_queues(a);
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
    bool to_map = b && b->unmapped && !a->kind->usable(b, held);
    bool slow = !b || to_map;
    if (slow && a->policy->begin) /* hold_peak: held under the peak (policies/hold.c) */
        a->policy->begin(a);
    char saved[CCAI_ERROR_CAP]; /* a slow step may fail inside a call that succeeds: put back */
    if (slow)
        ccai_error_save(saved);
    bool refused = false;
    if (to_map && a->policy->never(a, size, rounded, pool) != CCA_OK) {
        b = NULL; /* step 5 fails it (5a), nothing mapped */
    } else if (to_map) {
        cca_status st = a->kind->back(a, b, held, &(ccai_device_room){false, 0});
        if (st != CCA_OK && st != CCA_ERR_OUT_OF_MEMORY)
            return named(a, st);
        refused = st != CCA_OK && b->segment != d->arena; /* step 5 would find b again: retry at once */
        b = st == CCA_OK ? b : NULL;
    }
    /* 5 */
    if (!b) {
        a->held_split = false; /* set by a map of step 5 (grow.c) */
        cca_status st = a->policy->grow(a, size, rounded, key, pool, refused, &b);
        if (st != CCA_OK) {
            if (st == CCA_ERR_OUT_OF_MEMORY)
                ccai_oom_report(a, size, rounded, stream, log);
            return st == CCA_ERR_OUT_OF_MEMORY ? st : named(a, st);
        }
        split = a->held_split || ccai_block_worth_splitting(a, b, rounded); /* as decided before its map */
    }
    /* 6 */
    if (ccai_block_take(a, b, rounded, split) != CCA_OK) { /* b unchanged; its pages stay mapped */
        ccai_oom_report(a, size, rounded, stream, log);
        return CCA_ERR_OUT_OF_MEMORY;
    }
    /* 7 */
    mark_live(a, b, size, stream);
    *out = (void *)b->addr;
    if (slow)
        ccai_error_restore(saved);
    return CCA_OK;
}

/* cca_alloc (the default domain; size 0 answered before the lock) and
 * cca_alloc_in (domain h, looked up first): steps 1-7 for the domain, a
 * sleeping one refused (sleep.c). Inlined into each, `in` a constant: the
 * cached pair pays no lookup and no store of the domain served. */
static inline __attribute__((always_inline)) cca_status alloc_call(cca_allocator *a, const cca_domain *h, bool in,
                                                                   size_t size, cca_stream s, void **out) {
    const char *fn = in ? "cca_alloc_in" : "cca_alloc";
    if (out)
        *out = NULL;
    if (!a || !out)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, a ? "out" : "allocator");
    if (size == 0 && !in)
        return CCA_OK;
    ccai_deferred_log log;
    log.set = false;
    cca_status st = ccai_lock(a, fn);
    if (st != CCA_OK)
        return st;
    cca_domain *d = &a->root; /* a->serving between calls, a->allocating "cca_alloc" */
    if (in)
        st = ccai_domain_find(a, h, fn, &d);
    if (st == CCA_OK && size > 0) {
        if (in) {
            a->serving = d;
            a->allocating = fn;
        }
        st = d->sleep ? ccai_sleep_refuse(a, d) : alloc_step(a, d, size, s, out, &log);
        a->peak_hold = false;
        if (in) {
            a->serving = &a->root;
            a->allocating = "cca_alloc";
        }
    }
    ccai_unlock(a);
    ccai_log_flush(&log);
    return st;
}

cca_status cca_alloc(cca_allocator *a, size_t size, cca_stream s, void **out) {
    return alloc_call(a, NULL, false, size, s, out);
}

cca_status cca_alloc_in(cca_allocator *a, cca_domain *h, size_t size, cca_stream s, void **out) {
    return alloc_call(a, h, true, size, s, out);
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
        cca_domain *d = b->segment->domain;
        if (a->domains_tracked) /* its domain's requested bytes */
            ccai_lower(&d->c.requested, b->requested);
        if (d->sleep) /* asleep: its host copy dropped (sleep.c) */
            ccai_sleep_drop(a, b);
        if (a->trace)
            ccai_trace_free(a->trace, b->id, b->requested, b->alloc_stream, b->segment->domain->trace_no);
        bool deferred = (b->uses || b->alloc_stream != b->stream || (b->seg & CCAI_SEG_SHARED)) &&
                        ccai_stream_defer_free(a, b, &st);
        if (a->history)
            ccai_history_free(a->history, b->addr, b->requested, b->alloc_stream, deferred);
        if (!deferred) {
            if (b->uses) /* every user done: its record goes (stream.c) */
                ccai_stream_use_free(a, b);
            ccai_live_map_unlink(&a->live, link);
            ccai_pool_return_unlinked(a, b);
        }
    }
    ccai_unlock(a);
    return st;
}

/* The live block at ptr for public call fn, else the diagnosis (check.c). */
static cca_status live_block(cca_allocator *a, const void *ptr, const char *fn, ccai_block **b) {
    *b = ccai_live_map_find(&a->live, (uintptr_t)ptr);
    return *b && (*b)->state == CCAI_LIVE ? CCA_OK : ccai_diagnose_pointer(a, ptr, fn);
}

cca_status cca_record_stream(cca_allocator *a, void *ptr, cca_stream s) {
    if (!a || !ptr)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_record_stream: %s is NULL", a ? "ptr" : "allocator");
    cca_status st = ccai_lock(a, "cca_record_stream");
    if (st != CCA_OK)
        return st;
    ccai_block *b;
    if ((st = live_block(a, ptr, "cca_record_stream", &b)) == CCA_OK)
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
    ccai_block *b;
    if ((st = live_block(a, ptr, "cca_block_size", &b)) == CCA_OK)
        *size = b->size;
    ccai_unlock(a);
    return st;
}
