/*
 * policy.h — the growth-policy seam: where a request no cached block serves
 * finds memory (step 5). alloc.c calls it and never asks which it has.
 *
 * - One policy per allocator, chosen once by cca_create (a->policy).
 * - growth (core/grow.c, hold_peak: policies/hold.c) and greedy
 *   (policies/greedy.c), both over either kind, share the one retry.
 */
#ifndef CCA_POLICY_H
#define CCA_POLICY_H

typedef struct ccai_policy {
    const char *name; /* "growth" or "greedy": the OOM report's */
    /* At cca_create, under the lock (greedy: reserve the arena); NULL: none. */
    cca_status (*start)(cca_allocator *a);
    /* Step 5a: CCA_ERR_OUT_OF_MEMORY for a request that can never succeed
     * (also asked by step 4 before it maps a cached block's pages). */
    cca_status (*never)(cca_allocator *a, size_t size, size_t rounded, ccai_pool_kind pool);
    /* Step 5: a free block of at least `rounded` bytes (5a first), its
     * bytes usable. refused: step 4's block could not get its pages. */
    cca_status (*grow)(cca_allocator *a, size_t size, size_t rounded, cca_stream key, ccai_pool_kind pool,
                       bool refused, ccai_block **b);
} ccai_policy;

extern const ccai_policy ccai_policy_growth; /* core/grow.c        */
extern const ccai_policy ccai_policy_greedy; /* policies/greedy.c  */

/* policies/greedy.c: the arena (NULL when released by empty-cache). */
ccai_segment *ccai_arena_find(const cca_allocator *a);

/* policies/hold.c: hold_peak:1 */
/* Off the cached path: hold the request under the peak (a->peak_hold). */
void ccai_hold_begin(cca_allocator *a);
/* Step 5c of a held request (hold.c has the steps). */
cca_status ccai_hold_grow(cca_allocator *a, size_t rounded, cca_stream stream, ccai_pool_kind pool, ccai_block **b);

#endif /* CCA_POLICY_H */
