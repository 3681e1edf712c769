/*
 * trim.c — the public release: cca_trim(keep) and cca_empty_cache (trim(0)).
 *
 * - One call: the lock; the trace's record, before the effect; the kind's
 *   quiesce (pages: their streams), else a device synchronize; every
 *   pending free completed; ccai_release (core/release.c) down to keep,
 *   empty ranges included; the report's account of what stays
 *   (observe/stats.c: segments pinned by live blocks, bytes trapped).
 * - A failed synchronize still releases free classic segments and empty
 *   ranges, unmaps no page, and says so with the pending count; pending
 *   blocks whose events stay incomplete: CCA_ERR_NOT_READY. A refused
 *   upstream free: CCA_ERR_UPSTREAM, the rest still released.
 * - Cost: one synchronize (or quiesce) and ccai_release's walk.
 */
#include "core/internal.h"
#include "observe/check.h" /* the unlock */
#include "observe/stats.h" /* the report's fill */
#include "observe/trace.h"

/* cca_trim and cca_empty_cache; fn names the call in messages. */
static cca_status trim(cca_allocator *a, size_t keep_bytes, cca_release_report *report, const char *fn) {
    if (!a)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "%s: allocator is NULL", fn);
    cca_status refused = ccai_lock(a, fn);
    if (refused != CCA_OK)
        return refused;
    if (a->trace) /* the call, in the trace before its effect */
        ccai_trace_release(a->trace, keep_bytes);
    /* queued work done, pending frees complete: the kind's quiesce, else the device */
    cca_status sync = a->kind->quiesce ? a->kind->quiesce(a) : cca_upstream_synchronize(ccai_upstream_op(a));
    char why[256] = "";
    if (sync != CCA_OK)
        snprintf(why, sizeof why, "synchronize failed: %s", cca_last_error());
    else
        ccai_stream_complete_all(a);
    unsigned flags = CCAI_RELEASE_RANGES | (sync == CCA_OK ? CCAI_RELEASE_UNMAP : 0u);
    cca_status st = ccai_release(a, keep_bytes, flags, report);
    if (report)
        ccai_release_report_fill(a, report); /* stats.c: what stays, and why */
    size_t pending = a->c.pending;
    ccai_unlock(a);
    if (st != CCA_OK)
        return cca_error_prefix(st, "%s", fn);
    if (sync != CCA_OK)
        return cca_set_error(sync,
                             "%s: %s (free classic segments and empty ranges were still released; no page was "
                             "unmapped; %zu pending blocks stay reserved)",
                             fn, why, pending);
    if (pending)
        return cca_set_error(CCA_ERR_NOT_READY,
                             "%s: the wait completed but the events of %zu pending blocks are still "
                             "incomplete; they stay reserved",
                             fn, pending);
    return CCA_OK;
}

cca_status cca_trim(cca_allocator *a, size_t keep_bytes, cca_release_report *report) {
    return trim(a, keep_bytes, report, "cca_trim");
}

cca_status cca_empty_cache(cca_allocator *a, cca_release_report *report) {
    return trim(a, 0, report, "cca_empty_cache");
}
