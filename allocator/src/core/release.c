/*
 * release.c — giving memory back: cca_trim, cca_empty_cache (trim(0)),
 * and the release step of the OOM retry and the hold.
 *
 * - Classic segments go back only WHOLE (cudaFree takes what cudaMalloc
 *   gave): one live block PINS its segment, and the report says so
 *   (segments_pinned, live_bytes_pinning, free_bytes_pinned).
 *
 *     segment 20 MiB:  [ free 9 MiB | live 512 B | free ~11 MiB ]  -> pinned
 *
 * - Pages (kinds/pages.c) go back page by page: every page wholly inside a
 *   free block, live neighbours or not; a page a live block shares stays,
 *   its free bytes "trapped" (free_bytes_trapped).
 * - trim(keep): synchronize, complete every pending free, then release in
 *   this order (ccai_release) until reserved <= keep:
 *     1. the free pages at each expandable segment's tail;
 *     2. whole free classic segments, largest first;
 *     3. the other free pages, in address order;
 *     4. (trim, empty-cache) empty ranges: their address space goes back.
 *   Pages are unmapped only after the device synchronized: a failed
 *   synchronize skips 1 and 3, and says so.
 * - Pending blocks are not free (I6): never released. One that could not
 *   complete stays reserved; the call says so after releasing what it
 *   could (the synchronize's failure, or CCA_ERR_NOT_READY).
 * - ccai_release_can_help: the retries release nothing when nothing is
 *   cached, when max_reserved (or the held peak) would refuse the need even
 *   with all cached released, or when the device's free memory plus all
 *   cached is short of it. Over pages, a retry whose synchronize failed
 *   ends (ccai_release_unsynced).
 * - Errors: a segment the upstream refuses to take back stays, fully
 *   cached and indexed; the others still go, the report is filled, and
 *   the call returns CCA_ERR_UPSTREAM naming the first refusal.
 * - Cost: O(S log S) in segments (the sort); can_help O(S) classic,
 *   O(blocks) pages, plus one mem_info; each release one upstream call.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>




static void fill_report(const cca_allocator *a, cca_release_report *r) {
    r->bytes_still_reserved = a->c.reserved;
    for (ccai_segment *s = a->segments; s; s = s->next) {
        if (ccai_segment_empty(s)) {
            r->segments_kept++;
        } else {
            size_t live_blocks, live_bytes;
            ccai_segment_live(s, &live_blocks, &live_bytes);
            r->segments_pinned++;
            r->live_bytes_pinning += live_bytes;
            r->free_bytes_pinned += a->kind->reserved(s) - live_bytes;
        }
        r->free_bytes_trapped += a->kind->trapped(s);
    }
}


cca_status ccai_release(cca_allocator *a, size_t keep, unsigned flags, cca_release_report *r) {
    cca_release_report local;
    memset(&local, 0, sizeof local);
    uint64_t frees = a->c.upstream_frees;
    cca_status st = a->kind->release_cached(a, keep, flags, &local);
    char why[CCAI_ERROR_CAP] = "";
    if (st != CCA_OK)
        snprintf(why, sizeof why, "%s", cca_last_error());
    local.bytes_released += local.bytes_unmapped;
    a->release_frees += a->c.upstream_frees - frees;
    if (r) {
        *r = local;
        fill_report(a, r);
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

cca_status ccai_release_unsynced(void) {
    return cca_set_error(CCA_ERR_OUT_OF_MEMORY,
                     "no free page can be unmapped without a synchronize, and it failed; nothing was released: %s",
                     cca_last_error());
}

/* cca_trim and cca_empty_cache; fn is the one called, which a failure's
 * message names. */
static cca_status trim(cca_allocator *a, size_t keep_bytes, cca_release_report *report, const char *fn) {
    if (!a)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "%s: allocator is NULL", fn);
    cca_status refused = ccai_lock(a, fn);
    if (refused != CCA_OK)
        return refused;
    if (a->trace) /* the program's release call, in the trace before its effect */
        ccai_trace_release(a->trace, keep_bytes);
    /* One synchronize: queued work finishes, so pending frees complete and
     * the memory the program released is really free on the device. */
    cca_status sync = cca_upstream_synchronize(ccai_upstream_op(a));
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
                         "%s: %s (free classic segments were still released; no page was unmapped; %zu "
                         "pending blocks stay reserved)",
                         fn, why, pending);
    if (pending)
        return cca_set_error(CCA_ERR_NOT_READY,
                         "%s: the device synchronized but the events of %zu pending blocks are still "
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
