/*
 * segment.c — segment records and sizes: the bookkeeping of a new segment,
 * linking and unlinking it, how large one is, the ceiling, the cap, and
 * the greedy arena.
 *
 * - A SEGMENT is what a kind reserves (classic: one cudaMalloc; pages: an
 *   address range). Its blocks tile it (I1); a fresh one is one free block.
 *   It belongs to one domain and is on its list (I8).
 * - Sizes (ccai_segment_sizes), PyTorch's, a pool apart for medium:
 *
 *     pool     requests              segment reserved        least
 *     small    <= small_max (1M)     small_segment (2M)      same
 *     medium   <  large_min (10M)    medium_segment (20M)    request rounded
 *                                                            to segment_round
 *     large    >= large_min          request rounded to segment_round (2M)
 *
 *   A least segment over the ceiling shrinks to it (rounded down to 512 B),
 *   never below the request.
 * - The ceiling (ccai_segment_ceiling): min(device total, max_reserved),
 *   the device total asked once (mem_info), on the first request that needs
 *   a segment; ccai_request_ceiling also caps it at the kind's largest
 *   range. A request above it can never succeed (grow.c, 5a).
 * - The cap (ccai_cap_room): max_reserved, or the lower of it and the
 *   reserved peak while a hold_peak request is held under it.
 * - The greedy arena: one shared segment (key stream NULL), greedy_bytes or
 *   greedy_fraction of the device's free memory, capped by max_reserved,
 *   reserved through the kind.
 * - A segment keeps no live count: it is empty when it is one free block
 *   (I2); ccai_segment_live walks it for the reports.
 * - Cost: new, link and unlink O(1) (plus the kind's upstream call); sizes
 *   O(1); ccai_segment_live O(its blocks); the arena is found by a walk of
 *   the segment list (the greedy slow path only).
 */
#include "block.h" /* the split, block records */

#include <stdlib.h>
#include <string.h>

/* ---- sizes -------------------------------------------------------------- */

/* The ceiling as known now (the device total once asked). */
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
    if (!a->device_total_known) {
        size_t free_b = 0, total_b = 0;
        a->device_total_known = true;
        if (cca_upstream_mem_info(ccai_upstream_op(a), &free_b, &total_b) == CCA_OK)
            a->device_total = total_b;
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
 * segment at the head of the list, counted. */
void ccai_segment_link(cca_allocator *a, ccai_segment *s, uintptr_t base, size_t size) {
    s->base = base;
    s->size = size;
    s->first->addr = base;
    s->first->size = size;
    s->next = a->segments;
    if (a->segments)
        a->segments->prev = s;
    a->segments = s;
    ccai_free_index_insert(s->index, s->first);
    a->c.segments++;
    if (a->c.segments > a->c.segments_peak)
        a->c.segments_peak = a->c.segments;
    a->c.upstream_allocs++;
    s->domain->c.segments++;
    s->domain->c.upstream_allocs++;
    ccai_domain_add_segment(a, s);
}

/* The reverse, after the upstream took it back: s is freed. */
void ccai_segment_unlink(cca_allocator *a, ccai_segment *s) {
    ccai_assert(ccai_segment_empty(s) && a->c.segments > 0);
    ccai_free_index_remove(s->index, s->first);
    if (s->domain->arena == s)
        s->domain->arena = NULL;
    if (s->prev)
        s->prev->next = s->next;
    else
        a->segments = s->next;
    if (s->next)
        s->next->prev = s->prev;
    a->c.segments--;
    a->c.upstream_frees++;
    ccai_assert(s->domain->c.segments > 0);
    s->domain->c.segments--;
    ccai_domain_remove_segment(a, s);
    s->domain->c.upstream_frees++;
    ccai_segment_discard(a, s);
}

const char *ccai_cap_name(const cca_allocator *a, char *buf, size_t len) {
    size_t cap = ccai_cap(a);
    if (cap == a->config.max_reserved)
        snprintf(buf, len, "max_reserved (%zu)", cap);
    else
        snprintf(buf, len, "the reserved peak (%zu, hold_peak)", cap);
    return buf;
}

cca_status ccai_cap_room(const cca_allocator *a, size_t bytes) {
    size_t cap = ccai_cap(a);
    char name[64];
    if (cap && (a->c.reserved > cap || bytes > cap - a->c.reserved))
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "%s would be exceeded", ccai_cap_name(a, name, sizeof name));
    return CCA_OK;
}



/* ---- the greedy arena --------------------------------------------------- */

ccai_segment *ccai_arena_find(const cca_allocator *a) {
    for (ccai_segment *s = a->segments; s; s = s->next)
        if (s->shared)
            return s;
    return NULL;
}

static cca_status arena_size(cca_allocator *a, size_t *size) {
    size_t want = a->config.greedy_bytes;
    if (!want) {
        size_t free_b = 0, total_b = 0;
        cca_status st = cca_upstream_mem_info(ccai_upstream_op(a), &free_b, &total_b);
        if (st != CCA_OK)
            return cca_set_error(st, "greedy: cannot size the arena from greedy_fraction: %s", cca_last_error());
        double bytes = (double)free_b * a->config.greedy_fraction; /* fraction <= 1: at most free_b */
        want = bytes >= (double)free_b ? free_b : (size_t)bytes;
    }
    if (a->config.max_reserved && want > a->config.max_reserved)
        want = a->config.max_reserved;
    want = want / CCA_GRANULARITY * CCA_GRANULARITY;
    cca_status st = a->kind->fit_arena(a, &want);
    if (st != CCA_OK)
        return st;
    if (!want)
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "greedy: arena size rounds to 0 bytes");
    *size = want;
    return CCA_OK;
}

cca_status ccai_arena_reserve(cca_allocator *a) {
    size_t size = 0;
    cca_status st = arena_size(a, &size);
    if (st != CCA_OK)
        return st;
    ccai_segment *s;
    st = a->kind->reserve(a, size, NULL, CCAI_POOL_LARGE, true, &s);
    if (st != CCA_OK)
        return cca_set_error(st, "greedy: reserving the %zu-byte arena failed: %s", size, cca_last_error());
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
