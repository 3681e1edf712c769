/*
 * release.c — giving cached memory back: the release step of cca_trim and
 * cca_empty_cache (trim.c), of the OOM retry and of the hold.
 *
 * - ccai_release(keep) gives back through the kind (pages: 1, 3, 4;
 *   classic: 2) until reserved <= keep:
 *     1. the free pages at each pages segment's tail;
 *     2. whole free classic segments, largest first;
 *     3. the other free pages (newest segment first, blocks by address, highest pages first);
 *     4. (trim, empty-cache) empty ranges: their address space goes back.
 * - Classic segments go back only WHOLE: one live block PINS its segment.
 *   Pages go back around live blocks; the free bytes of a page a live
 *   block shares stay (trapped).
 *
 *     segment 20 MiB:  [ free 9 MiB | live 512 B | free ~11 MiB ]  -> pinned
 *
 * - Pages are unmapped only after the kind's quiesce (their streams): a
 *   failed wait skips 1 and 3 (no CCAI_RELEASE_UNMAP). Pending blocks
 *   (I6) are never released.
 * - A retry releases nothing when that cannot help (ccai_release_can_help):
 *   nothing cached (or all of it pinned: the message says how much); the
 *   cap refuses even with all cached released; the device's free memory
 *   plus all cached is short of the need.
 * - A segment the upstream refuses to take back stays, cached and
 *   indexed; the others still go, and the call returns CCA_ERR_UPSTREAM.
 * - Cost: O(S log S) in segments (the sort), pages O(blocks); one upstream
 *   call per release; can_help one mem_info.
 */
#include "internal.h"

cca_status ccai_release(cca_allocator *a, size_t keep, unsigned flags, cca_release_report *r) {
    cca_release_report local = {0};
    uint64_t frees = a->c.upstream_frees;
    cca_status st = a->kind->release_cached(a, keep, flags, &local);
    local.bytes_released += local.bytes_unmapped;
    a->release_frees += a->c.upstream_frees - frees;
    if (r) /* what went; trim.c adds what stays (stats.c) */
        *r = local;
    return st == CCA_OK
               ? CCA_OK
               : cca_error_prefix(CCA_ERR_UPSTREAM, "the upstream refused to take memory back (kept, still cached)");
}

size_t ccai_releasable(const cca_allocator *a) {
    size_t n = 0;
    for (const ccai_segment *s = a->segments; s; s = s->next)
        n += a->kind->releasable(s);
    return n;
}

cca_status ccai_release_can_help(cca_allocator *a, size_t need, size_t *free_b) {
    *free_b = 0;
    size_t releasable = ccai_releasable(a), total = 0, cached = ccai_cached_bytes(a);
    if (releasable == 0) /* cached but all pinned: how much */
        return cached ? cca_set_error(CCA_ERR_OUT_OF_MEMORY,
                                      "nothing cached to release: the %zu cached bytes all "
                                      "share a segment, page or map with a live or pending block",
                                      cached)
                      : cca_set_error(CCA_ERR_OUT_OF_MEMORY, "nothing cached to release");
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

size_t ccai_cached_bytes(const cca_allocator *a) {
    size_t allocated = a->c.allocated, reserved = a->c.reserved;
    /* before the first domain is created the default one holds every block */
    for (const cca_domain *d = a->asleep; d; d = d->snext) {
        allocated -= a->domains_tracked ? d->c.allocated : a->c.allocated;
        reserved -= a->domains_tracked ? d->c.reserved : a->c.reserved;
    }
    return reserved - allocated;
}
