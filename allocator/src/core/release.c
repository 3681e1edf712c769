/*
 * release.c — giving memory back: cca_trim, cca_empty_cache, and the release
 * step of the OOM retry.
 *
 * Classic segments go back only WHOLE: the upstream (cudaFree) takes back
 * exactly what it handed out. A segment with even one live block is PINNED,
 * and every free byte around that block stays reserved:
 *
 *   segment 20 MiB:  [ free 9 MiB | live 512 B | free ~11 MiB ]  -> pinned
 *
 * That is how a few long-lived small tensors keep gigabytes reserved; the
 * report says so (segments_pinned, live_bytes_pinning, free_bytes_pinned)
 * instead of leaving users to guess.
 *
 * trim(keep): synchronize the device and complete every pending free; then
 * release free segments largest first until reserved <= keep. A pending
 * block that could not complete stays reserved, and the call says so after
 * releasing what it could: the synchronize's failure, or CCA_ERR_NOT_READY
 * when the device synchronized but an event still reads incomplete. Largest first
 * reaches the budget with the fewest upstream calls and keeps the small
 * segments that serve the common small requests. Cost: O(S log S) in the
 * number of segments.
 *
 * Expandable segments (kinds/pages.c) go back PAGE by page: every page lying
 * wholly inside a free block can be unmapped, live neighbours or not. The
 * order of ccai_release, until reserved <= keep:
 *   1. the free pages at the growing end (tail) of each expandable segment:
 *      mapped ahead by the growth rule and never used, or the last freed;
 *   2. whole free classic segments, largest first;
 *   3. every other free page of expandable segments, in address order;
 *   4. (trim and empty-cache) expandable segments left empty, with nothing
 *      mapped: their address range goes back (one more call).
 * Pages are unmapped only after the device synchronized (unmapping does not
 * wait for queued kernels, unlike cudaFree): trim skips steps 1 and 3 when
 * its synchronize failed, and says so.
 *
 * empty_cache = trim(0): with no live blocks, reserved_bytes becomes 0 and the
 * upstream's own count of what this allocator holds is zero. With live
 * blocks in expandable segments, what stays is the live bytes plus, at each
 * end of a run of live blocks, the free part of the page it shares with a
 * free block (the report's free_bytes_trapped).
 *
 * Whether releasing can help (ccai_releasable, ccai_release_can_help):
 * the OOM retry and cca_domain_reserve's retry release nothing (and
 * synchronize only to complete pending frees) when nothing is cached, when
 * max_reserved would refuse the request even with everything cached
 * released, or when the device's free memory plus everything cached is
 * short of it. What a full release gives back (ccai_releasable) is, for
 * classic segments, the wholly free ones; for expandable ones, every
 * mapped page no live or pending block touches (the pages they touch stay,
 * trapped bytes included). O(S) for classic segments, O(blocks) for
 * expandable ones (only on the OOM path), plus one mem_info. Over
 * expandable segments (an allocator with them has no classic segment) a
 * retry whose synchronize failed can release nothing at all — no page may
 * be unmapped, no pending free completed — so it ends there
 * (ccai_release_unsynced), the synchronize's failure named as the cause.
 *
 * Errors: a segment the upstream refuses to take back stays, fully cached and
 * indexed (state intact), the others are still released, the report is
 * filled, and the call returns CCA_ERR_UPSTREAM naming the first refusal.
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
