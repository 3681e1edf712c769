/*
 * fit.h — step 4, best fit over a domain's pools, inline (every cca_alloc).
 *
 * - The smallest free block of the key stream with size >= rounded, the
 *   lowest address on ties; a large request also looks in the medium pool.
 * - max_split: a request below it never takes a block above it; one at or
 *   above it takes a block less than medium_segment larger.
 * - The domain's footprint arena is asked first. Cost: one search per index
 *   asked, at most three (the arena, the pool, the medium pool).
 */
#ifndef CCA_FIT_H
#define CCA_FIT_H

#include "internal.h"

static inline bool ccai_better_fit(const ccai_block *x, const ccai_block *than) {
    return x && (!than || x->size < than->size || (x->size == than->size && x->addr < than->addr));
}

/* Step 4 among one domain's `pools`. */
static inline ccai_block *ccai_best_fit_in(cca_allocator *a, ccai_free_index *pools, ccai_pool_kind pool, cca_stream key,
                                      size_t rounded) {
    const cca_config *c = &a->config;
    size_t max_size = SIZE_MAX;
    if (c->max_split) {
        if (rounded < c->max_split)
            max_size = c->max_split;
        else if (rounded <= SIZE_MAX - c->medium_segment)
            max_size = rounded + c->medium_segment - 1; /* slack < medium_segment */
    }
    ccai_block *b = ccai_free_index_best_fit(&pools[pool], key, rounded, max_size);
    if (pool == CCAI_POOL_LARGE && a->medium_pool && c->policy == CCA_POLICY_GROWTH && rounded <= c->medium_segment) {
        ccai_block *m = ccai_free_index_best_fit(&pools[CCAI_POOL_MEDIUM], key, rounded, max_size);
        if (ccai_better_fit(m, b))
            b = m;
    }
    return b;
}

/* The same in the domain the call serves. */
static inline ccai_block *ccai_best_fit(cca_allocator *a, ccai_pool_kind pool, cca_stream key, size_t rounded) {
    return ccai_best_fit_in(a, a->serving->pools, pool, key, rounded);
}

/* The serving domain's footprint arena (any stream); NULL without one. */
static inline ccai_block *ccai_arena_fit(cca_allocator *a, size_t rounded) {
    struct cca_domain *d = a->serving;
    return d->arena ? ccai_free_index_best_fit(&d->pools[CCAI_POOL_ARENA], NULL, rounded, SIZE_MAX) : NULL;
}

#endif /* CCA_FIT_H */
