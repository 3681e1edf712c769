/*
 * chain_sort.h — a singly linked chain sorted in place: a stable merge sort
 * that needs no memory.
 *
 * - The chain: nodes linked through the pointer at byte offset `link` of
 *   each (offsetof(node, field)); the last node's link is NULL.
 * - before(x, y): x must go before y; nodes for which neither holds keep
 *   their order in the chain (stable).
 * - Cost: O(n log n) calls of before, bottom up (runs of 1, 2, 4, ...
 *   merged, one pass of the chain each): no recursion, no allocation, so a
 *   caller short of host memory sorts as any other.
 */
#ifndef CCAI_CHAIN_SORT_H
#define CCAI_CHAIN_SORT_H

#include <stdbool.h>
#include <stddef.h>

/* The sorted chain's first node (NULL for an empty chain). */
void *ccai_chain_sort(void *head, size_t link, bool (*before)(const void *x, const void *y));

#endif /* CCAI_CHAIN_SORT_H */
