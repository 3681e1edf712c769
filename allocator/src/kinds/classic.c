/*
 * classic.c — classic segments (kind.h): one upstream allocation each (one
 * cudaMalloc), of the sizes in segment.c's table.
 *
 * - A segment goes back only when wholly free: one live block pins it.
 *   Release: free segments, largest first (newest first with no host memory to sort), until reserved <= keep.
 * - Every byte is usable at once: no block is ever marked unmapped.
 * - Cost: grow is one upstream alloc (two when the preferred size is
 *   refused); release sorts the free segments, O(s log s).
 */
#include "../core/internal.h"

#include <stdlib.h>
#include <string.h>

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

static int by_size_desc(const void *x, const void *y) {
    const ccai_segment *a = *(ccai_segment *const *)x, *b = *(ccai_segment *const *)y;
    if (a->size != b->size)
        return a->size < b->size ? 1 : -1;
    return a->base < b->base ? -1 : (a->base > b->base);
}

/* The next free segment from *cursor on; *cursor moves past it (before a
 * release frees it). */
static ccai_segment *next_free(ccai_segment **cursor) {
    ccai_segment *s = *cursor;
    while (s && !ccai_segment_empty(s))
        s = s->next;
    *cursor = s ? s->next : NULL;
    return s;
}

/* Largest first needs a sorted list; without host memory for it, the free
 * segments go in list order rather than not at all. */
static cca_status release_free_segments(cca_allocator *a, size_t keep, size_t *bytes_out, size_t *count_out) {
    size_t n = 0, refused = 0;
    for (ccai_segment *s = a->segments; s; s = s->next)
        n += ccai_segment_empty(s);
    ccai_segment **list = n ? malloc(n * sizeof *list) : NULL, *cursor = a->segments;
    for (size_t k = 0; list && cursor; cursor = cursor->next)
        if (ccai_segment_empty(cursor))
            list[k++] = cursor;
    if (list && n > 1)
        qsort(list, n, sizeof *list, by_size_desc);
    cca_status first_error = CCA_OK;
    char why[256] = "";
    for (size_t i = 0; i < n && a->c.reserved > keep; i++) {
        ccai_segment *seg = list ? list[i] : next_free(&cursor);
        if (!seg)
            break;
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
    free(list);
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
