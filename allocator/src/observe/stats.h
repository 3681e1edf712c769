/*
 * stats.h — what stats.c gives the rest of the library besides the public
 * stats calls: the counters' copy, a release report's account of what
 * stays (trim.c), a domain's largest free block (the OOM report). Every
 * function runs under the allocator's lock.
 */
#ifndef CCA_STATS_H
#define CCA_STATS_H

#include "../core/internal.h"

void ccai_fill_stats(const cca_allocator *a, cca_stats *s);
/* A release report's account of what stays (ccai_release): reserved
 * afterwards, segments kept empty or pinned by live blocks and their
 * bytes, trapped bytes, sleeping domains and their host bytes. */
void ccai_release_report_fill(const cca_allocator *a, cca_release_report *r);
/* largest_free_block of domain d, or `floor` when that is larger: over d's
 * free blocks, the longest stretch on mapped pages (pages) or the size
 * (classic). From d's free index, largest blocks first
 * (ccai_free_index_largest_run): O(pools x streams) plus a page test of
 * each block larger than the best run found before it. */
size_t ccai_domain_largest_free(const struct cca_domain *d, size_t floor);
/* The allocator's segments in address order, the first returned and each
 * next in its sorted_next: a merge sort of the list through that field
 * (support/chain_sort.h), so it needs no host memory. O(segments x log
 * segments); the order holds until the lock is let go. */
ccai_segment *ccai_segments_by_address(const cca_allocator *a);

#endif /* CCA_STATS_H */
