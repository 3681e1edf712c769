/*
 * check.h — what check.c gives the rest of the library: the invariant walk
 * (cca_check_invariants' too), run before every public call's unlock at
 * CCA_DEBUG >= 2, and a bad pointer's diagnosis. Every function runs under
 * the allocator's lock.
 */
#ifndef CCA_CHECK_H
#define CCA_CHECK_H

#include "../core/internal.h"

/* NULL when every invariant holds, else the first broken one. */
const char *ccai_check_locked(const cca_allocator *a);
/* Why is ptr not a live block? Sets the message. */
cca_status ccai_diagnose_pointer(cca_allocator *a, const void *ptr, const char *who);

/* A public call's unlock (its lock: ccai_lock, internal.h): at CCA_DEBUG
 * >= 2, every invariant is checked first. */
static inline void ccai_unlock(cca_allocator *a) {
#if CCA_DEBUG >= 2
    const char *broken = ccai_check_locked(a);
    if (broken)
        ccai_assert_fail(broken, __FILE__, __LINE__);
#endif
    ccai_mutex_unlock(&a->lock);
}

#endif /* CCA_CHECK_H */
