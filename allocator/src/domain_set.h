/*
 * domain_set.h — what domain_set.c gives the rest of the library: the
 * default domain's record, a handle's record, the domains' list and
 * numbers, the sleeping list. Every function runs under the allocator's
 * lock; none takes it.
 */
#ifndef CCA_DOMAIN_SET_H
#define CCA_DOMAIN_SET_H

#include "core/internal.h"

/* Set up the default domain and an empty set (cca_create). */
void ccai_domain_init_root(cca_allocator *a);
/* A handle never given before, by any allocator of the process. */
uintptr_t ccai_domain_new_handle(void);
/* Room for one more, before d is added: the only step of cca_domain_create
 * that can fail once the record is made (CCA_ERR_OUT_OF_MEMORY). */
cca_status ccai_domain_set_reserve(cca_allocator *a);
/* d joins the set (room reserved) and the list, last, with the next
 * number; the first one starts the per-domain block counts. */
void ccai_domain_set_add(cca_allocator *a, struct cca_domain *d);
/* d leaves the set and the list (its record is the caller's to free). */
void ccai_domain_set_remove(cca_allocator *a, struct cca_domain *d);
/* The domain record a caller's handle names: NULL names the default domain
 * (&a->root); NULL is returned for a handle that is not one of a's live
 * domains (another allocator's, destroyed, garbage). O(1) expected; the
 * handle is never read. */
struct cca_domain *ccai_domain_lookup(const cca_allocator *a, const cca_domain *handle);
/* ccai_domain_lookup for public call fn: not one of a's, *d = NULL and
 * CCA_ERR_INVALID_ARGUMENT, "fn: domain %p is not one of this allocator's". */
cca_status ccai_domain_find(const cca_allocator *a, const cca_domain *handle, const char *fn, struct cca_domain **d);
/* What the caller is given for record d (NULL for the default domain). */
static inline cca_domain *ccai_domain_handle(const struct cca_domain *d) {
    return (cca_domain *)d->handle;
}
/* Is record d one of a's domains? (check.c) */
bool ccai_domain_valid(const cca_allocator *a, const struct cca_domain *d);
/* d's position in the allocator's list: 0 the default domain, then in
 * creation order; its index in the snapshots' domain arrays and PyTorch's
 * segment_pool_id (0, k). O(1); the first call after a removal that moved
 * domains numbers them all, O(domains). */
unsigned ccai_domain_number(const cca_allocator *a, const struct cca_domain *d);
/* d's sleep record becomes rec (NULL: awake), and d joins or leaves
 * a->asleep with it, so sums over sleeping domains walk those only. O(1). */
void ccai_domain_set_sleep(cca_allocator *a, struct cca_domain *d, struct ccai_sleep *rec);
/* The counts kept only while domains are tracked, from the allocator's:
 * before the first domain, the default domain holds every block. */
void ccai_domain_copy_block_counts(ccai_domain_counters *to, const ccai_counters *from);

#endif /* CCA_DOMAIN_SET_H */
