/*
 * pages_rule.h — the growth rule's test hook (allocator/src/kinds/pages.h),
 * for suites that follow expandable segments page by page: the rule's
 * fixed parts (a tail map's least step, the ahead's cap, the largest map
 * over whole maps) set to other values before an allocator's first
 * request. Suites linking ccalloc_static only.
 */
#ifndef CCA_TEST_PAGES_RULE_H
#define CCA_TEST_PAGES_RULE_H

#include "ccalloc.h"

#include <stddef.h>

/* least, cap, map_bytes in bytes (map_bytes 0: one map per run); nothing
 * for an allocator of classic segments. A greedy arena mapped by
 * cca_create keeps its maps; reserved again after cca_empty_cache, it
 * follows the rule set here. */
void ccai_pages_rule_set(cca_allocator *a, size_t least, size_t cap, size_t map_bytes);

#endif
