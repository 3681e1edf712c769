/*
 * budget.c — what loading a trace may hold in host memory at once.
 *
 * The cap on a trace (CCB_TRACE_MAX_BYTES) bounds the decompressed text AND
 * the memory loading holds: a gzip file of short lines once expanded to
 * three times the cap in the reader's doubled arrays, its id table and the
 * analysis. So every array of a load is counted against one BUDGET
 * (trace.c's reader and analysis, ideal.c's arena):
 *
 *   held  bytes of the arrays alive now, at their capacity (not their use);
 *   grow  an array from `old` to `new` elements needs held + new bytes for
 *         the moment realloc copies (old and new block both alive), so a
 *         growth is allowed only when held + new <= cap; doubling is tried
 *         first, then the largest capacity that still fits, then the load
 *         fails (over) — the cap holds for the peak, whatever realloc does;
 *   take  a block allocated whole (a table, the analysis' arrays) is taken
 *         before it is allocated and given back when freed.
 *
 * Costs: O(1) per call; arrays still double, so a load does O(log n)
 * reallocations. Without a budget (NULL: generators, and ccb_trace_read on
 * a caller's FILE) the same calls just double, and host OOM aborts, as
 * before: the harness cannot go on without memory.
 */
#include "ccbench.h"

#include <stdlib.h>

size_t ccb_grow_to(ccb_budget *b, size_t cap, size_t elem, size_t need, size_t first) {
    size_t want = cap ? (cap > SIZE_MAX / 2 ? SIZE_MAX : 2 * cap) : first;
    want = want < need ? need : want;
    if (!b)
        return want <= SIZE_MAX / elem ? want : 0;
    size_t room = b->held < b->cap ? (b->cap - b->held) / elem : 0; /* the new block, the old still held */
    want = want < room ? want : room;
    if (want < need || want <= cap) {
        b->over = 1;
        return 0;
    }
    if (b->held + want * elem > b->peak)
        b->peak = b->held + want * elem;
    return want;
}

void *ccb_grow(ccb_budget *b, void *p, size_t *cap, size_t elem, size_t need, size_t first) {
    size_t n = ccb_grow_to(b, *cap, elem, need, first);
    void *q = n ? realloc(p, n * elem) : NULL;
    if (!q && !b) {
        fprintf(stderr, "ccbench: out of host memory (%zu elements of %zu bytes)\n", n, elem);
        abort(); /* the harness itself cannot go on; never library code */
    }
    if (!q) {
        b->oom |= n != 0;
        return NULL;
    }
    if (b)
        b->held += (n - *cap) * elem;
    *cap = n;
    return q;
}

int ccb_budget_take(ccb_budget *b, size_t bytes) {
    if (!b)
        return 0;
    if (bytes > b->cap || b->held > b->cap - bytes) {
        b->over = 1;
        return -1;
    }
    b->held += bytes;
    if (b->held > b->peak)
        b->peak = b->held;
    return 0;
}

void ccb_budget_give(ccb_budget *b, size_t bytes) {
    if (b)
        b->held -= bytes < b->held ? bytes : b->held;
}
