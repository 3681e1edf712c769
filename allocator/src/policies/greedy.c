/*
 * greedy.c — the greedy policy (policy.h): one arena reserved up front,
 * every request served from it (TensorFlow BFC's default reservation).
 *
 * - The arena is one shared segment (key stream NULL) of the allocator's
 *   kind: greedy_bytes, or greedy_fraction of the device's free memory,
 *   capped by max_reserved, made whole by the kind (pages: whole pages).
 * - Reserved at cca_create; released only by trim or empty-cache, and
 *   reserved again, the same way, by the next request that needs it.
 * - A request no arena block fits waits for pending frees (one
 *   synchronize) and fails: the arena never grows. Over pages, a block
 *   whose trimmed pages the device refuses gets the one retry (grow.c).
 * - Every pool is "large" (ccai_pool_of), and a free block goes to any
 *   stream after an event on its last user (stream.c).
 * - Cost: finding the arena walks the segment list (slow path only).
 */
#include "../core/internal.h"
#include "../core/fit.h" /* best fit */

static ccai_segment *arena_find(const cca_allocator *a) {
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

static cca_status arena_reserve(cca_allocator *a) {
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

/* Step 5a: impossible whatever arena an empty-cache would leave behind:
 * over greedy_bytes (over pages: rounded up to the page, which the arena
 * may be), or over the device's total or max_reserved (the arena is never
 * larger). Refused before re-reserving anything. */
static cca_status greedy_never(cca_allocator *a, size_t size, size_t rounded, ccai_pool_kind pool) {
    (void)pool;
    size_t ceiling = ccai_request_ceiling(a);
    size_t fixed = a->kind->whole(a, a->config.greedy_bytes / CCA_GRANULARITY * CCA_GRANULARITY);
    if (fixed && fixed < ceiling)
        ceiling = fixed;
    if (rounded > ceiling)
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "%s: %zu bytes can never fit a greedy arena of at most %zu bytes",
                             a->allocating, size, ceiling);
    return CCA_OK;
}

static cca_status greedy_grow(cca_allocator *a, size_t size, size_t rounded, cca_stream key, ccai_pool_kind pool,
                              bool refused, ccai_block **b) {
    (void)key;
    cca_status st = greedy_never(a, size, rounded, pool);
    if (st != CCA_OK)
        return st;
    ccai_segment *arena = arena_find(a);
    if (!arena) { /* released by empty-cache: reserve it again */
        st = arena_reserve(a);
        if (st != CCA_OK) /* the message names the call made, as every failure of the path */
            return cca_error_prefix(st, "%s", a->allocating);
        arena = arena_find(a);
        if ((*b = ccai_best_fit(a, pool, NULL, rounded)) != NULL)
            return CCA_OK;
    }
    if (rounded > arena->size)
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "%s: %zu bytes can never fit the %zu-byte greedy arena",
                             a->allocating, size, arena->size);
    /* A full arena: pending frees complete once the device is synchronized,
     * and one of them may fit (both kinds of segment). */
    if (!(*b = ccai_best_fit(a, pool, NULL, rounded)) && a->c.pending && ccai_stream_wait_all(a) == CCA_OK)
        *b = ccai_best_fit(a, pool, NULL, rounded);
    if (!*b) /* no block that fits: an OOM, no retry */
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "%s: the greedy arena has no free block of %zu bytes",
                             a->allocating, size);
    /* over pages, a free block that fits may have trimmed pages the device
     * would not map: the retry frees other free pages of the arena (nothing
     * to map: CCA_OK at once) */
    ccai_device_room room = {false, 0};
    st = refused ? CCA_ERR_OUT_OF_MEMORY : ccai_grow_map_held(a, rounded, b, &room);
    if (st == CCA_ERR_OUT_OF_MEMORY)
        st = a->policy->retry(a, &(ccai_grow_req){rounded, NULL, pool, false}, b);
    return st == CCA_OK ? st : cca_error_prefix(st, "%s", a->allocating);
}

const ccai_policy ccai_policy_greedy = {
    .name = "greedy",
    .start = arena_reserve,
    .never = greedy_never,
    .grow = greedy_grow,
    .begin = NULL,
    .retry = ccai_grow_retry,
};
