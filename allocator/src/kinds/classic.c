/*
 * classic.c — classic segments (kind.h): one upstream allocation each (one
 * cudaMalloc), of the sizes in segment.c's table.
 *
 * - A segment goes back only when wholly free: one live block pins it.
 *   Release: free segments, largest first (equal sizes: lowest address first), until reserved <= keep.
 * - Every byte is usable at once: no block is ever marked unmapped.
 * - Cost: grow is one upstream alloc (two when the preferred size is
 *   refused); release sorts the free segments through their records, O(s
 *   log s), with no host memory (support/chain_sort.h).
 */
#include "../core/internal.h"
#include "../support/chain_sort.h" /* largest first, with no host memory */

#include <stdio.h>

/* ---- reserve and release ------------------------------------------------------ */

static cca_status classic_reserve(cca_allocator *a, size_t size, cca_stream stream, ccai_pool_kind pool, bool shared,
                                ccai_segment **out) {
    cca_status st = ccai_cap_room(a, size);
    if (st != CCA_OK)
        return st;
    ccai_segment *s;
    st = ccai_segment_new(a, stream, pool, shared, 0, &s);
    if (st != CCA_OK)
        return st;
    void *base = NULL;
    st = cca_upstream_alloc(ccai_upstream_op(a), size, &base);
    if (st != CCA_OK) {
        ccai_segment_discard(a, s);
        return st;
    }
    ccai_segment_link(a, s, (uintptr_t)base, size);
    ccai_count_reserved(a, s, size, true);
    if (a->history)
        ccai_history_record(a->history, CCAI_EV_SEGMENT_ALLOC, (uintptr_t)base, size, stream);
    *out = s;
    return CCA_OK;
}

static cca_status classic_release(cca_allocator *a, ccai_segment *s) {
    ccai_assert(ccai_segment_empty(s) && s->first->size == s->size);
    cca_status st = cca_upstream_free(ccai_upstream_op(a), (void *)s->base, s->size);
    if (st != CCA_OK)
        return st; /* the segment stays, fully indexed: state intact */
    if (a->history)
        ccai_history_record(a->history, CCAI_EV_SEGMENT_FREE, s->base, s->size, s->stream);
    ccai_count_reserved(a, s, s->size, false);
    ccai_segment_unlink(a, s);
    return CCA_OK;
}

/* Step 5b: a new segment, preferred size then least; its one free block. */
static cca_status classic_grow(cca_allocator *a, size_t rounded, cca_stream stream, ccai_pool_kind pool,
                               ccai_device_room *room, ccai_block **b) {
    (void)room; /* a segment is asked of the upstream, which knows its free memory */
    size_t want, least;
    ccai_segment_sizes(a, rounded, pool, &want, &least);
    ccai_segment *s = NULL;
    cca_status st = classic_reserve(a, want, stream, pool, false, &s);
    if (st == CCA_ERR_OUT_OF_MEMORY && least < want)
        st = classic_reserve(a, least, stream, pool, false, &s);
    *b = st == CCA_OK ? s->first : NULL; /* a fresh segment is always used */
    return st;
}

static size_t classic_least(const cca_allocator *a, size_t rounded, ccai_pool_kind pool) {
    size_t want, least;
    ccai_segment_sizes(a, rounded, pool, &want, &least);
    return least;
}

static size_t classic_whole(const cca_allocator *a, size_t bytes) {
    (void)a;
    return bytes;
}

static cca_status classic_fit_arena(cca_allocator *a, size_t *size) {
    (void)a, (void)size;
    return CCA_OK;
}

/* ---- release: whole free segments, largest first --------------------------- */

/* Larger first; equal sizes: the lower address first. */
static bool larger(const void *x, const void *y) {
    const ccai_segment *a = x, *b = y;
    return a->size != b->size ? a->size > b->size : a->base < b->base;
}

/* The free segments, chained through sorted_next and sorted largest first
 * (no host memory: the same order with none to spare), released until
 * reserved <= keep. */
static cca_status release_free_segments(cca_allocator *a, size_t keep, size_t *bytes_out, size_t *count_out) {
    ccai_segment *chain = NULL, **tail = &chain;
    for (ccai_segment *s = a->segments; s; s = s->next)
        if (ccai_segment_empty(s)) {
            *tail = s;
            tail = &s->sorted_next;
        }
    *tail = NULL;
    size_t refused = 0;
    cca_status first_error = CCA_OK;
    char why[256] = "";
    for (ccai_segment *seg = ccai_chain_sort(chain, offsetof(ccai_segment, sorted_next), larger), *next;
         seg && a->c.reserved > keep; seg = next) {
        next = seg->sorted_next; /* read before the release frees seg */
        size_t size = seg->size;
        cca_status st = classic_release(a, seg);
        if (st == CCA_OK) {
            *bytes_out += size;
            ++*count_out;
        } else if (refused++ == 0) {
            first_error = st;
            snprintf(why, sizeof why, "%s", cca_last_error());
        }
    }
    if (first_error != CCA_OK)
        return cca_set_error(CCA_ERR_UPSTREAM, "the upstream refused to take back %zu segment(s) (kept, still cached): %s",
                             refused, why);
    return CCA_OK;
}

static cca_status classic_release_cached(cca_allocator *a, size_t keep, unsigned flags, cca_release_report *r) {
    (void)flags;
    return release_free_segments(a, keep, &r->bytes_released, &r->segments_released);
}

static size_t classic_reserved(const ccai_segment *s) {
    return s->size;
}

static size_t classic_releasable(const ccai_segment *s) {
    return ccai_segment_empty(s) ? s->size : 0;
}

static size_t classic_trapped(const ccai_segment *s) {
    (void)s;
    return 0;
}

static void classic_destroy(cca_allocator *a, ccai_segment *s, bool keep_mapped, cca_status *result) {
    (void)keep_mapped; /* freeing a segment waits for the device by itself */
    if (cca_upstream_free(ccai_upstream_op(a), (void *)s->base, s->size) != CCA_OK)
        *result = CCA_ERR_UPSTREAM;
}

static ccai_broken classic_check(const ccai_segment *s) {
    (void)s;
    return CCAI_HOLDS;
}

const ccai_kind ccai_kind_classic = {
    .name = "classic",
    .medium_pool = true,
    .quiesce = NULL,
    .max_range = SIZE_MAX,
    .seg_flags = 0,
    .start = NULL,
    .grow = classic_grow,
    .reserve = classic_reserve,
    .back = NULL,
    .usable = NULL,
    .gap = NULL,
    .whole = classic_whole,
    .least = classic_least,
    .shortfall = classic_least,
    .new_bytes = NULL,
    .fit_arena = classic_fit_arena,
    .release_cached = classic_release_cached,
    .reserved = classic_reserved,
    .releasable = classic_releasable,
    .trapped = classic_trapped,
    .release = classic_release,
    .destroy = classic_destroy,
    .check = classic_check,
};
