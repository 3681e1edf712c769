/*
 * domain.h — what domain.c gives the rest of the library besides the
 * public domain calls: every domain's teardown (allocator.c) and a
 * handle's check that takes the lock (plug.c).
 */
#ifndef CCA_DOMAIN_H
#define CCA_DOMAIN_H

#include "domain_set.h"

/* Free every domain's record but the default's, and the set (cca_destroy,
 * after the segments). The caller holds the lock. */
void ccai_domain_destroy_all(cca_allocator *a);
/* CCA_OK if `handle` names one of a's live domains (NULL: the default
 * domain, always); else CCA_ERR_INVALID_ARGUMENT with the message naming
 * `who` (another allocator's, destroyed, garbage). Takes a's lock (plug.c:
 * cca_plug_set_domain). O(1) expected; the handle is never read. */
cca_status ccai_domain_check(cca_allocator *a, const cca_domain *handle, const char *who);

#endif /* CCA_DOMAIN_H */
