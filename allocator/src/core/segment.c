/*
 * segment.c — segment records and sizes: a new segment's bookkeeping,
 * linking and unlinking it, how large one is, the ceiling and the cap.
 *
 * - A SEGMENT is what a kind reserves; blocks tile it (I1); a fresh one is
 *   one free block; it belongs to one domain, on its list (I8). It keeps no
 *   live count: it is empty when it is one free block (I2).
 * - Sizes (ccai_segment_sizes), PyTorch's, a pool apart for medium:
 *
 *     pool     requests              segment reserved        least
 *     small    <= small_max (1M)     small_segment (2M)      same
 *     medium   <  large_min (10M)    medium_segment (20M)    request rounded
 *                                                            to segment_round
 *     large    >= large_min          request rounded to segment_round (2M)
 *
 *   A least segment over the ceiling shrinks to it, never below the request.
 * - The ceiling: min(device total, max_reserved), the total kept once
 *   mem_info answers (a refusal: asked again at the next call that needs
 *   it; an upstream without mem_info: never asked); a request's also at
 *   most the kind's max_range. A request above it can never succeed (5a).
 * - The cap (ccai_cap_room): max_reserved, or the lower of it and the
 *   reserved peak while a request is held.
 * - Cost: O(1) each (plus the kind's upstream call); ccai_segment_live
 *   O(its blocks).
 */
#include "block.h" /* the split, block records */

#include <stdlib.h>
#include <string.h>

/* ---- sizes -------------------------------------------------------------- */

/* The ceiling as known now (the device total once answered). */
static size_t known_ceiling(const cca_allocator *a) {
    size_t ceiling = a->device_total ? a->device_total : SIZE_MAX;
    if (a->config.max_reserved && a->config.max_reserved < ceiling)
        ceiling = a->config.max_reserved;
    return ceiling;
}

void ccai_segment_sizes(const cca_allocator *a, size_t rounded, ccai_pool_kind pool, size_t *want, size_t *least) {
    const cca_config *c = &a->config;
    if (pool == CCAI_POOL_SMALL) {
        *want = *least = c->small_segment;
    } else if (rounded < c->large_min) {
        *want = c->medium_segment;
        *least = ccai_round_up(rounded, c->segment_round);
    } else {
        *want = *least = ccai_round_up(rounded, c->segment_round);
    }
    size_t ceiling = known_ceiling(a) / CCA_GRANULARITY * CCA_GRANULARITY;
    if (*least > ceiling) { /* shrinks to the ceiling, never below the request */
        bool same = *want == *least;
        *least = rounded > ceiling ? rounded : ceiling;
        if (same)
            *want = *least;
    }
}

size_t ccai_segment_ceiling(cca_allocator *a) {
    if (!a->device_total_known) { /* refused: asked again next time; no mem_info op: never */
        size_t free_b = 0, total_b = 0;
        cca_upstream *u = ccai_upstream_op(a);
        a->device_total_known = !u->ops.mem_info || cca_upstream_mem_info(u, &free_b, &total_b) == CCA_OK;
        a->device_total = a->device_total_known && u->ops.mem_info ? total_b : 0;
    }
    return known_ceiling(a);
}

size_t ccai_request_ceiling(cca_allocator *a) {
    size_t ceiling = ccai_segment_ceiling(a);
    return ceiling > a->kind->max_range ? a->kind->max_range : ceiling;
}

/* ---- segments ----------------------------------------------------------- */

/* The bookkeeping of a new segment, before the upstream is asked: the
 * record, its one block, the page bitmap (`words` of them, expandable only),
 * and the stream's bins in the pool. Undone by ccai_segment_discard. */
cca_status ccai_segment_new(cca_allocator *a, cca_stream stream, ccai_pool_kind pool, bool shared, size_t words,
                            ccai_segment **out) {
    ccai_segment *s = calloc(1, sizeof *s);
    uint64_t *bits = words ? calloc(words, sizeof *bits) : NULL;
    ccai_block *b = ccai_block_new(a);
    if (!s || (words && !bits) || !b || ccai_free_index_attach(&a->serving->pools[pool], stream) != CCA_OK) {
        free(s);
        free(bits);
        if (b)
            ccai_block_recycle(a, b);
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "host malloc failed for segment bookkeeping");
    }
    s->stream = stream;
    s->domain = a->serving;
    s->index = &a->serving->pools[pool];
    s->shared = shared;
    s->pool = pool;
    s->mapped = bits;
    s->first = b;
    b->segment = s;
    b->seg = ccai_segment_flags(a, s);
    b->stream = stream;
    b->state = CCAI_FREE;
    *out = s;
    return CCA_OK;
}

void ccai_segment_discard(cca_allocator *a, ccai_segment *s) {
    ccai_free_index_detach(s->index, s->stream);
    ccai_block_recycle(a, s->first);
    free(s->mapped);
    free(s);
}

/* The upstream granted [base, base + size): one free block over it, the
 * segment at the head of the allocator's list and its domain's, counted. */
void ccai_segment_link(cca_allocator *a, ccai_segment *s, uintptr_t base, size_t size) {
    s->base = base;
    s->size = size;
    s->first->addr = base;
    s->first->size = size;
    CCAI_LIST_PUSH(a->segments, s, prev, next);
    if (!s->domain->segs) /* the domain holds memory from now on */
        CCAI_LIST_PUSH(a->holding, s->domain, hprev, hnext);
    CCAI_LIST_PUSH(s->domain->segs, s, dprev, dnext);
    ccai_free_index_insert(s->index, s->first);
    ccai_raise(&a->c.segments, &a->c.segments_peak, 1);
    a->c.upstream_allocs++;
    s->domain->c.segments++;
    s->domain->c.upstream_allocs++;
}

/* The reverse, after the upstream took it back: s is freed. */
void ccai_segment_unlink(cca_allocator *a, ccai_segment *s) {
    ccai_assert(ccai_segment_empty(s));
    ccai_free_index_remove(s->index, s->first);
    if (s->domain->arena == s)
        s->domain->arena = NULL;
    CCAI_LIST_UNLINK(a->segments, s, prev, next);
    CCAI_LIST_UNLINK(s->domain->segs, s, dprev, dnext);
    if (!s->domain->segs) /* it holds nothing any more */
        CCAI_LIST_UNLINK(a->holding, s->domain, hprev, hnext);
    ccai_lower(&a->c.segments, 1);
    a->c.upstream_frees++;
    ccai_lower(&s->domain->c.segments, 1);
    s->domain->c.upstream_frees++;
    ccai_segment_discard(a, s);
}

const char *ccai_cap_name(const cca_allocator *a, char *buf, size_t len) {
    size_t cap = ccai_cap(a);
    bool max = cap == a->config.max_reserved;
    snprintf(buf, len, max ? "max_reserved (%zu)" : "the reserved peak (%zu, hold_peak)", cap);
    return buf;
}

cca_status ccai_cap_room(const cca_allocator *a, size_t bytes) {
    size_t cap = ccai_cap(a);
    char name[64];
    if (cap && (a->c.reserved > cap || bytes > cap - a->c.reserved))
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "%s would be exceeded", ccai_cap_name(a, name, sizeof name));
    return CCA_OK;
}

void ccai_segment_live(const ccai_segment *s, size_t *blocks, size_t *bytes) {
    size_t n = 0, sum = 0;
    for (const ccai_block *b = s->first; b; b = b->next)
        if (b->state != CCAI_FREE) {
            n++;
            sum += b->size;
        }
    *blocks = n;
    *bytes = sum;
}
