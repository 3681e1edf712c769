/*
 * grow.c — the growth policy's slow path (policy.h) and the one retry every
 * policy shares; the steps of one cca_alloc (docs/allocator.md):
 *
 *   ccai_growth_grow      5   from alloc.c, a->policy->grow
 *    ├─ ccai_growth_never 5a  over the device, max_reserved or the kind's range
 *    ├─ take              5b  new memory (a->kind->grow), mapped (a->kind->back)
 *    ├─ a->policy->retry  5c  hold_peak:1: the hold's steps first (policies/hold.c)
 *    ├─ the retry         5c  (a)-(d): synchronize, take again, release the
 *    │                        shortfall, take, release all, take
 *    └─ fail                  CCA_ERR_OUT_OF_MEMORY; alloc.c reports it
 *
 * - One retry for every caller (growth, greedy, the hold, and
 *   cca_domain_reserve with an arena request), each one alloc_retries
 *   but the hold's own (ccai_grow_release_and_take).
 * - What memory is new, what a request needs and whether the device must
 *   be idle come from a->kind. Live blocks never move.
 * - Cost: a take is one or two upstream calls (classic) or a best fit, a
 *   mem_info and maps (pages); a retry adds a synchronize (pages: its
 *   streams' waits), one mem_info, up to two release walks and two takes
 *   (pages with frees pending: three, (a)'s being one).
 */
#include "internal.h"
#include "block.h" /* the split, block records */
#include "fit.h"   /* best fit */

#include <stdlib.h>
#include <string.h>

/* ---- 5b: new memory ------------------------------------------------------ */

cca_status ccai_grow_map_held(cca_allocator *a, size_t rounded, ccai_block **b, ccai_device_room *room) {
    size_t held = ccai_block_held(a, *b, rounded);
    cca_status st = !(*b)->unmapped || a->kind->usable(*b, held) ? CCA_OK : a->kind->back(a, *b, held, room);
    a->held_split = st == CCA_OK && held != (*b)->size; /* step 6 keeps the split decided before the map */
    *b = st == CCA_OK ? *b : NULL;
    return st;
}

/* Step 5b: a block from new memory (the kind's grow), its bytes usable. */
static cca_status take(cca_allocator *a, size_t rounded, cca_stream stream, ccai_pool_kind pool, ccai_block **b) {
    ccai_device_room room = {false, 0};
    cca_status st = a->kind->grow(a, rounded, stream, pool, &room, b);
    return st == CCA_OK ? ccai_grow_map_held(a, rounded, b, &room) : st;
}

cca_status ccai_grow_take_again(cca_allocator *a, size_t rounded, cca_stream stream, ccai_pool_kind pool,
                                ccai_block **b) {
    ccai_device_room room = {false, 0};
    if ((*b = ccai_arena_fit(a, rounded)) != NULL && ccai_grow_map_held(a, rounded, b, &room) == CCA_OK)
        return CCA_OK;
    return take(a, rounded, stream, pool, b);
}

/* ---- 5c: the retry --------------------------------------------------------- */

/* The kind's least; where it can say what a given block would add (pages),
 * the fewer of the domain's arena block and best fit in the pools. */
size_t ccai_grow_need(cca_allocator *a, size_t rounded, cca_stream stream, ccai_pool_kind pool) {
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

static size_t need_now(cca_allocator *a, const ccai_grow_req *q) {
    return q->arena ? q->rounded : ccai_grow_need(a, q->rounded, q->stream, q->pool);
}

/* One retry, for a request or a domain's footprint arena (q->arena), in
 * docs/allocator.md's letters: (b) first if no free is pending: can releasing
 * help (ccai_release_can_help)? No: nothing synchronized or released, the
 * message the refusal that brought the request here, then why; (a) wait,
 * with frees pending or when the kind unmaps only once its users' work is
 * done (quiesce; a failure ends it); frees were pending: take a completed
 * block as cca_alloc's step 4 would (pages: also new memory), then (b);
 * (c) release the shortfall, take again; (d) release everything, take
 * once more. An arena releases everything and reserves again. */
cca_status ccai_grow_release_and_take(cca_allocator *a, const ccai_grow_req *q, ccai_block **b) {
    size_t rounded = q->rounded;
    cca_stream stream = q->stream;
    ccai_pool_kind pool = q->pool;
    bool idle = a->kind->quiesce != NULL, pending = a->c.pending != 0;
    size_t free_b = 0;
    unsigned flags = 0;
    char refused[CCAI_ERROR_CAP]; /* what brought us here: named first if nothing is released */
    ccai_error_save(refused);
    /* (b), none pending */
    cca_status can = pending ? CCA_OK : ccai_release_can_help(a, need_now(a, q), &free_b);
    /* (a) */
    if (can == CCA_OK && (idle || pending)) {
        cca_status sync = idle ? a->kind->quiesce(a) : ccai_stream_wait_all(a);
        if (idle && sync != CCA_OK)
            return ccai_release_unsynced();
        if (idle || sync == CCA_OK)
            flags = CCAI_RELEASE_UNMAP;
        if (pending) { /* (a)'s take (none pending: it would repeat the one refused) */
            if (!q->arena && (idle ? ccai_grow_take_again(a, rounded, stream, pool, b) == CCA_OK
                                   : (*b = ccai_arena_fit(a, rounded)) != NULL ||
                                         (*b = ccai_best_fit(a, pool, stream, rounded)) != NULL))
                return CCA_OK;
            can = ccai_release_can_help(a, need_now(a, q), &free_b);
        }
    } else if (can == CCA_OK) {
        flags = CCAI_RELEASE_UNMAP; /* nothing was queued to wait for */
    }
    if (can != CCA_OK)
        return q->arena ? can : cca_set_error(can, "%s; %s", refused, cca_last_error());
    /* (c), (d) */
    if (q->arena) {
        (void)ccai_release(a, 0, flags, NULL);
        ccai_segment *s = NULL;
        return a->kind->reserve(a, rounded, NULL, CCAI_POOL_ARENA, true, &s);
    }
    size_t keep = ccai_release_keep(a, a->kind->shortfall(a, rounded, pool), free_b);
    if (keep > 0) {
        (void)ccai_release(a, keep, flags, NULL); /* a refusal only means less room */
        if (ccai_grow_take_again(a, rounded, stream, pool, b) == CCA_OK)
            return CCA_OK;
    }
    (void)ccai_release(a, 0, flags, NULL);
    return ccai_grow_take_again(a, rounded, stream, pool, b);
}

cca_status ccai_grow_retry(cca_allocator *a, const ccai_grow_req *q, ccai_block **b) {
    a->c.retries++;
    return ccai_grow_release_and_take(a, q, b);
}

/* ---- 5a and 5: the chain --------------------------------------------------- */

/* Step 5a: the request's least segment (pages: its pages) passes the
 * ceiling. (A range spans the ceiling rounded up to the page: step 4 asks
 * too, before it maps a cached block's pages.) */
cca_status ccai_growth_never(cca_allocator *a, size_t size, size_t rounded, ccai_pool_kind pool) {
    size_t ceiling = ccai_request_ceiling(a), least = a->kind->least(a, rounded, pool);
    if (least > ceiling)
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY,
                             "%s: %zu bytes need a %zu-byte segment, more than the device, max_reserved or the "
                             "address budget allows (%zu bytes): it can never succeed",
                             a->allocating, size, least, ceiling);
    return CCA_OK;
}

/* Step 5; `refused`: step 4's block could not get its pages, which a take
 * would ask again: straight to the retry. */
cca_status ccai_growth_grow(cca_allocator *a, size_t size, size_t rounded, cca_stream stream, ccai_pool_kind pool,
                            bool refused, ccai_block **b) {
    cca_status st = ccai_growth_never(a, size, rounded, pool);
    if (st != CCA_OK)
        return st;
    st = refused ? CCA_ERR_OUT_OF_MEMORY : take(a, rounded, stream, pool, b);
    if (st == CCA_ERR_OUT_OF_MEMORY)
        st = a->policy->retry(a, &(ccai_grow_req){rounded, stream, pool, false}, b);
    if (st == CCA_ERR_OUT_OF_MEMORY)
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "%s: cannot reserve a segment for %zu bytes: %s", a->allocating,
                             size, cca_last_error());
    return st;
}

const ccai_policy ccai_policy_growth = {
    .name = "growth",
    .start = NULL,
    .never = ccai_growth_never,
    .grow = ccai_growth_grow,
    .begin = NULL,
    .retry = ccai_grow_retry,
};
