/*
 * domain.h — what domain.c gives the rest of the library: the default
 * domain's set-up and teardown (allocator.c), a handle's record, the
 * domains' stats and numbers (the reports). Every function runs under the allocator's lock,
 * but ccai_domain_check, which takes it.
 */
#ifndef CCA_DOMAIN_H
#define CCA_DOMAIN_H

#include "core/internal.h"

/* Set up / tear down the default domain (cca_create, cca_destroy), and
 * free every other domain's record (cca_destroy, after the segments). */
void ccai_domain_init_root(cca_allocator *a);
void ccai_domain_destroy_all(cca_allocator *a);
/* The domain record a caller's handle names: NULL names the default domain
 * (&a->root); NULL is returned for a handle that is not one of a's live
 * domains (another allocator's, destroyed, garbage). The caller holds the
 * lock. O(1) expected; the handle is never read. */
struct cca_domain *ccai_domain_lookup(const cca_allocator *a, const cca_domain *handle);
/* CCA_OK if `handle` names one of a's live domains (NULL: the default
 * domain, always); else CCA_ERR_INVALID_ARGUMENT with the message naming
 * `who` (another allocator's, destroyed, garbage). Takes a's lock (plug.c:
 * cca_plug_set_domain). O(1) expected; the handle is never read. */
cca_status ccai_domain_check(cca_allocator *a, const cca_domain *handle, const char *who);
/* What the caller is given for record d (NULL for the default domain). */
static inline cca_domain *ccai_domain_handle(const struct cca_domain *d) {
    return (cca_domain *)d->handle;
}
/* Is record d one of a's domains? (check.c) */
bool ccai_domain_valid(const cca_allocator *a, const struct cca_domain *d);
/* d's sleep record becomes rec (NULL: awake), and d joins or leaves
 * a->asleep with it, so sums over sleeping domains walk those only. O(1). */
void ccai_domain_set_sleep(cca_allocator *a, struct cca_domain *d, struct ccai_sleep *rec);
/* Every domain's stats as a JSON array (snapshot; the caller holds the lock). */
void ccai_domain_stats_json(const cca_allocator *a, FILE *f);
/* d's position in the allocator's list: 0 the default domain, then in
 * creation order; its index in the snapshots' domain arrays and PyTorch's
 * segment_pool_id (0, k). The caller holds the lock. O(1); the first call
 * after a destroy that moved domains numbers them all, O(domains). */
unsigned ccai_domain_number(const cca_allocator *a, const struct cca_domain *d);

/* ---- sleep.c: sleep and wake (cca_domain_sleep) ----------------------- */

/* cca_alloc / cca_alloc_in in sleeping domain d: CCA_ERR_ASLEEP, naming it. */
cca_status ccai_sleep_refuse(cca_allocator *a, struct cca_domain *d);
/* Drop d's sleep record and give its host memory back (a refusal is
 * logged). mark: d's segments are still there, and their free blocks get
 * the `unmapped` mark (a block freed while asleep lost it); false at
 * cca_destroy, whose segments are gone. No-op for a domain awake. */
void ccai_sleep_forget(cca_allocator *a, struct cca_domain *d, bool mark);
/* cca_free of live block b of a sleeping domain: its copy dropped, and its
 * host chunk given back once every block in it is freed. */
void ccai_sleep_drop(cca_allocator *a, const ccai_block *b);
/* Host bytes d's copy holds (0: awake, or asleep with DISCARD). */
size_t ccai_sleep_host_bytes(const struct cca_domain *d);
/* I10 for sleeping domain d: its record names every live block of d. */
ccai_broken ccai_sleep_check(const cca_allocator *a, const struct cca_domain *d);

#endif /* CCA_DOMAIN_H */
