/*
 * release.c — giving memory back: cca_trim, cca_empty_cache (trim(0)),
 * and the release step of the OOM retry and the hold.
 *
 * - trim(keep): synchronize, complete every pending free, then release
 *   through the kind (pages: 1, 3, 4; classic: 2) until reserved <= keep:
 *     1. the free pages at each pages segment's tail;
 *     2. whole free classic segments, largest first;
 *     3. the other free pages (newest segment first, blocks by address, highest pages first);
 *     4. (trim, empty-cache) empty ranges: their address space goes back.
 * - Classic segments go back only WHOLE: one live block PINS its segment,
 *   and the report says so (segments_pinned, live_bytes_pinning,
 *   free_bytes_pinned). Pages go back around live blocks; the free bytes
 *   of a page a live block shares stay (free_bytes_trapped).
 *
 *     segment 20 MiB:  [ free 9 MiB | live 512 B | free ~11 MiB ]  -> pinned
 *
 * - Pages are unmapped only after the kind's quiesce (their streams): a
 *   failed wait skips 1 and 3, and says so. Pending blocks (I6) are never
 *   released; one that could not complete stays, and the call says so
 *   (the synchronize's failure, or CCA_ERR_NOT_READY).
 * - A retry releases nothing when that cannot help (ccai_release_can_help):
 *   nothing cached; the cap refuses even with all cached released; the
 *   device's free memory plus all cached is short of the need.
 * - A segment the upstream refuses to take back stays, cached and
 *   indexed; the others still go, and the call returns CCA_ERR_UPSTREAM.
 * - Cost: O(S log S) in segments (the sort), pages O(blocks); one upstream
 *   call per release; can_help one mem_info.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

cca_status ccai_release(cca_allocator *a, size_t keep, unsigned flags, cca_release_report *r) {
    cca_release_report local = {0};
    uint64_t frees = a->c.upstream_frees;
    cca_status st = a->kind->release_cached(a, keep, flags, &local);
    char why[CCAI_ERROR_CAP] = "";
    if (st != CCA_OK)
        snprintf(why, sizeof why, "%s", cca_last_error());
    local.bytes_released += local.bytes_unmapped;
    a->release_frees += a->c.upstream_frees - frees;
    if (r) {
        *r = local;
        ccai_release_report_fill(a, r); /* stats.c: what stays, and why */
    }
    if (st != CCA_OK)
        return cca_set_error(CCA_ERR_UPSTREAM, "the upstream refused to take memory back (kept, still cached): %s", why);
    return CCA_OK;
}

size_t ccai_releasable(const cca_allocator *a) {
    size_t n = 0;
    for (const ccai_segment *s = a->segments; s; s = s->next)
        n += a->kind->releasable(s);
    return n;
}

cca_status ccai_release_can_help(cca_allocator *a, size_t need, size_t *free_b) {
    *free_b = 0;
    size_t releasable = ccai_releasable(a), total = 0;
    if (releasable == 0)
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "nothing cached to release");
    size_t cap = ccai_cap(a), floor = a->c.reserved - releasable;
    char name[64];
    if (cap && (floor > cap || need > cap - floor))
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY,
                         "%s would be exceeded even with everything cached released: %zu bytes "
                         "stay reserved and %zu more are needed; nothing was released",
                         ccai_cap_name(a, name, sizeof name), floor, need);
    if (cca_upstream_mem_info(ccai_upstream_op(a), free_b, &total) != CCA_OK)
        *free_b = 0; /* unknown: the release may help */
    else if (*free_b < need && need - *free_b > releasable)
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY,
                         "the device's free memory plus everything cached is short of %zu bytes; nothing was "
                         "released",
                         need);
    return CCA_OK;
}

size_t ccai_release_keep(const cca_allocator *a, size_t need, size_t free_b) {
    size_t shortfall = free_b < need ? need - free_b : 0, cap = ccai_cap(a);
    if (cap && a->c.reserved + need > cap && a->c.reserved + need - cap > shortfall)
        shortfall = a->c.reserved + need - cap;
    return a->c.reserved > shortfall ? a->c.reserved - shortfall : 0;
}

void ccai_release_all_for(cca_allocator *a, size_t need) {
    size_t free_b = 0;
    bool idle = a->kind->quiesce != NULL;
    if (ccai_release_can_help(a, need, &free_b) == CCA_OK && (!idle || a->kind->quiesce(a) == CCA_OK))
        (void)ccai_release(a, 0, idle ? CCAI_RELEASE_UNMAP : 0, NULL); /* a refusal: less room */
}

cca_status ccai_release_unsynced(void) {
    return cca_set_error(CCA_ERR_OUT_OF_MEMORY,
                     "no free page can be unmapped without a synchronize, and it failed; nothing was released: %s",
                     cca_last_error());
}

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
