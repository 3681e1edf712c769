/*
 * chain_sort.c — the merge sort of chain_sort.h.
 *
 * - A pass cuts the chain into runs of `run` nodes, merges them in pairs
 *   and joins the results; the run doubles until one pass made one merge.
 * - A merge takes from the right run only when its node goes strictly
 *   before the left's: ties stay in chain order.
 */
#include "chain_sort.h"

static void **link_of(void *node, size_t link) {
    return (void **)((char *)node + link);
}

/* The chain from node on, cut after at most n nodes: what follows. */
static void *cut_after(void *node, size_t n, size_t link) {
    for (size_t i = 1; node && i < n; i++)
        node = *link_of(node, link);
    if (!node)
        return NULL;
    void *rest = *link_of(node, link);
    *link_of(node, link) = NULL;
    return rest;
}

/* x and y (each sorted) as one, appended at *tail; the new tail's link. */
static void **merge(void *x, void *y, void **tail, size_t link, bool (*before)(const void *, const void *)) {
    while (x && y) {
        void **from = before(y, x) ? &y : &x;
        *tail = *from;
        tail = link_of(*from, link);
        *from = *tail;
    }
    *tail = x ? x : y;
    while (*tail)
        tail = link_of(*tail, link);
    return tail;
}

void *ccai_chain_sort(void *head, size_t link, bool (*before)(const void *x, const void *y)) {
    for (size_t run = 1;; run *= 2) {
        void *rest = head, **tail = &head;
        size_t merges = 0;
        while (rest) {
            void *x = rest, *y = cut_after(x, run, link);
            rest = cut_after(y, run, link);
            tail = merge(x, y, tail, link, before);
            merges++;
        }
        if (merges <= 1)
            return head;
    }
}
