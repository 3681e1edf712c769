/*
 * oom.c — the report of a request that failed for memory (cca_alloc's
 * step 5 gave no block, or step 6 no record for its remainder): the OOM
 * counted, an event in the history, and with log_oom one log line of what
 * the allocator and the device held.
 *
 * - The line is formatted under the lock and written after the unlock
 *   (ccai_deferred_log): no log line is written while a lock is held.
 * - largest free block as cca_get_stats counts it (pages: the mapped part;
 *   sleeping domains left out).
 * - The thread's message (why the request failed) is left as it was.
 * - Cost: one mem_info call (two with the history), a walk of the domains
 *   that hold memory.
 */
#include "../core/internal.h"
#include "oom.h"
#include "stats.h" /* the largest free block */

static void report(cca_allocator *a, size_t size, size_t rounded, cca_stream stream, ccai_deferred_log *log) {
    a->c.ooms++;
    if (a->history) {
        size_t free_now = 0, total_now = 0; /* a failed mem_info's leftovers are no figure: 0, unknown */
        if (cca_upstream_mem_info(ccai_upstream_op(a), &free_now, &total_now) != CCA_OK)
            free_now = 0;
        ccai_history_record(a->history, CCAI_EV_OOM, free_now, size, stream);
    }
    if (!a->config.log_oom)
        return;
    char req[32], res[32], alloc[32], largest[32], devfree[32] = "unknown", total[32] = "?";
    size_t free_b, total_b, big = 0;
    for (const cca_domain *d = a->holding; d; d = d->hnext) /* a domain without segments has nothing free */
        if (!d->sleep) /* as cca_get_stats: asleep, it serves nothing until its wake */
            big = ccai_domain_largest_free(d, big);
    if (cca_upstream_mem_info(ccai_upstream_op(a), &free_b, &total_b) == CCA_OK) {
        cca_format_bytes(free_b, devfree, sizeof devfree);
        cca_format_bytes(total_b, total, sizeof total);
    }
    snprintf(log->line, sizeof log->line,
             "out of memory: requested %s (%zu B rounded to %zu) on stream %p; reserved %s, allocated %s, "
             "largest free block %s, device free %s of %s (policy %s%s)",
             cca_format_bytes(size, req, sizeof req), size, rounded, stream,
             cca_format_bytes(a->c.reserved, res, sizeof res), cca_format_bytes(a->c.allocated, alloc, sizeof alloc),
             cca_format_bytes(big, largest, sizeof largest), devfree, total, a->policy->name,
             a->config.max_reserved ? ", max_reserved set" : "");
    log->set = true;
}

void ccai_oom_report(cca_allocator *a, size_t size, size_t rounded, cca_stream stream, ccai_deferred_log *log) {
    char why[CCAI_ERROR_CAP];
    ccai_error_save(why);
    report(a, size, rounded, stream, log);
    ccai_error_restore(why);
}
