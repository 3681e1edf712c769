/*
 * policy.h — the growth-policy seam: where a request no cached block serves
 * finds memory (step 5). alloc.c calls it and never asks which it has.
 *
 * - One policy per allocator, chosen once by cca_create (a->policy): growth
 *   (core/grow.c), held (hold_peak:1, policies/hold.c) or greedy
 *   (policies/greedy.c), each over either kind; all share the one retry.
 * - The core calls a policy only through this table.
 */
#ifndef CCA_POLICY_H
#define CCA_POLICY_H

struct ccai_grow_req;

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
    /* Off the cached path, before step 5: the hold's (a->peak_hold); NULL: none. */
    void (*begin)(cca_allocator *a);
    /* Step 5c: the one retry (ccai_grow_retry); held, the hold's steps first. */
    cca_status (*retry)(cca_allocator *a, const struct ccai_grow_req *q, ccai_block **b);
} ccai_policy;

extern const ccai_policy ccai_policy_growth; /* core/grow.c        */
extern const ccai_policy ccai_policy_held;   /* policies/hold.c    */
extern const ccai_policy ccai_policy_greedy; /* policies/greedy.c  */

/* grow.c: growth's steps 5a and 5, the held table's too. */
cca_status ccai_growth_never(cca_allocator *a, size_t size, size_t rounded, ccai_pool_kind pool);
cca_status ccai_growth_grow(cca_allocator *a, size_t size, size_t rounded, cca_stream key, ccai_pool_kind pool,
                            bool refused, ccai_block **b);

#endif /* CCA_POLICY_H */
