/*
 * hold.c — hold_peak:1, growth's option: reserved bytes do not rise above
 * their peak while releasing the cache could make room.
 *
 * - A request off the cached path is HELD (a->peak_hold) when something is
 *   cached or pending: the reserved peak is a cap beside max_reserved
 *   (ccai_cap, the lower of the two) for its step 5.
 * - Held and refused (by the peak or the device):
 *     1. the retry's release and take, with the peak as the cap (nothing
 *        released when even everything cached leaves it over the peak);
 *     2. the peak rises by the least: release everything cached (pages:
 *        after quiesce (kind.h); failed, nothing unmapped) and take with no
 *        cap; pages map no ahead pages (a->peak_rising). Nothing is
 *        released or synchronized when releasing cannot make room even
 *        without the peak (ccai_release_can_help): the take is refused;
 *     3. refused still: the ordinary retry, counted in alloc_retries.
 * - Counted in peak_holds when it released something cached.
 * - A domain's wake is held the same way (sleep.c, held_room): its pages
 *   are its request.
 * - Cost: a full release walks every block of pages segments, and each
 *   synchronize waits for the device: paid only by requests that raise
 *   the peak. docs/allocator.md, "Holding the peak".
 */
#include "../core/internal.h"

/* Off the cached path (a->policy->begin). */
static void hold_begin(cca_allocator *a) {
    /* cached: reserved above the live bytes in the awake domains (a
     * sleeping domain's are on the host: sleep.c) */
    if (ccai_cached_bytes(a) || a->c.pending)
        a->peak_hold = true; /* reserved > 0 here, so reserved_peak is too */
}

/* Step 5c (a->policy->retry): a held request's steps 1-3; one not held
 * (nothing cached or pending at its begin), the ordinary retry. */
static cca_status hold_retry(cca_allocator *a, const ccai_grow_req *q, ccai_block **b) {
    if (!a->peak_hold)
        return ccai_grow_retry(a, q, b);
    uint64_t frees = a->release_frees; /* not upstream_frees: a map refused part-way unmaps what it mapped */
    cca_status st = ccai_grow_release_and_take(a, q, b); /* 1 */
    a->peak_hold = false;
    if (st == CCA_ERR_OUT_OF_MEMORY) { /* 2 */
        ccai_release_all_for(a, ccai_grow_need(a, q->rounded, q->stream, q->pool));
        a->peak_rising = true;
        st = ccai_grow_take_again(a, q->rounded, q->stream, q->pool, b);
        a->peak_rising = false;
    }
    a->c.peak_holds += a->release_frees != frees; /* counted when it released something cached */
    return st == CCA_ERR_OUT_OF_MEMORY ? ccai_grow_retry(a, q, b) : st; /* 3 */
}

/* growth's table with the hold's begin and retry (cca_create, hold_peak:1). */
const ccai_policy ccai_policy_held = {
    .name = "growth",
    .start = NULL,
    .never = ccai_growth_never,
    .grow = ccai_growth_grow,
    .begin = hold_begin,
    .retry = hold_retry,
};
