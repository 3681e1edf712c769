/*
 * ideal.c — the IDEAL ARENA: what a single contiguous best-fit arena with
 * immediate coalescing would need for a trace. Every strategy's peak reserved
 * is read against two references: the LOWER BOUND (the peak of live requested
 * bytes: no allocator can do with less) and this one (what best fit itself
 * costs, with no segments, no pools, no caching policy in the way).
 *
 * The arena is one address range [0, top). Sizes are rounded up to
 * CCA_GRANULARITY (512 B), the unit of every device allocator here. A
 * request takes the smallest free extent that fits (ties: lowest address)
 * from its start; if none fits it is cut from the WILDERNESS at `top`, which
 * then grows. A free merges the extent with free neighbours at once; an
 * extent that ends at `top` returns to the wilderness (top shrinks). The
 * result is max(top) over the trace. Streams and release events are ignored:
 * the arena has one stream and caches nothing.
 *
 * Data structure: two treaps over one node pool (split/merge style, priorities
 * from the splitmix64 stream of a fixed seed, common/ccai_rng.h; keys are
 * unique, so the priorities shape the trees but never the result):
 *   by_size  key (len, off): best fit = the first key >= (need, 0)
 *   by_addr  key (off, 0):   the neighbours of a freed extent
 * Invariants: free extents never touch each other nor `top`; every node is in
 * both treaps. Cost: O(log F) expected per event, F = free extents; memory
 * 16 bytes per alloc of the trace (each slot's offset and rounded length,
 * held for the whole pass) plus a node per free extent (F <= peak live
 * blocks + 1), counted against the trace's load budget when it is being
 * loaded (budget.c; CCB_UNKNOWN when it does not fit).
 */
#include "ccbench.h"

#include <stdlib.h>
#include <string.h>

#include "ccai_rng.h"
#include "ccalloc.h"

typedef struct node {
    uint64_t off, len;
    uint32_t prio;
    int32_t l[2], r[2]; /* children in tree 0 (by_size) and tree 1 (by_addr) */
} node;

typedef struct arena {
    node *n;
    size_t cap, used;
    int32_t free_list; /* recycled nodes, chained through l[0] */
    int32_t root[2];
    uint64_t top, peak;
    uint64_t rng;
    ccb_budget *b; /* the load's, or an unbounded one */
} arena;

static int key_less(const node *a, int tree, uint64_t k1, uint64_t k2) {
    uint64_t a1 = tree == 0 ? a->len : a->off, a2 = tree == 0 ? a->off : 0;
    return a1 < k1 || (a1 == k1 && a2 < k2);
}

/* Split t into (< key) and (>= key). */
static void split(arena *A, int32_t t, int tree, uint64_t k1, uint64_t k2, int32_t *lo, int32_t *hi) {
    if (t < 0) {
        *lo = *hi = -1;
        return;
    }
    node *x = &A->n[t];
    if (key_less(x, tree, k1, k2)) {
        split(A, x->r[tree], tree, k1, k2, &x->r[tree], hi);
        *lo = t;
    } else {
        split(A, x->l[tree], tree, k1, k2, lo, &x->l[tree]);
        *hi = t;
    }
}

static int32_t merge(arena *A, int32_t a, int32_t b, int tree) {
    if (a < 0)
        return b;
    if (b < 0)
        return a;
    if (A->n[a].prio > A->n[b].prio) {
        A->n[a].r[tree] = merge(A, A->n[a].r[tree], b, tree);
        return a;
    }
    A->n[b].l[tree] = merge(A, a, A->n[b].l[tree], tree);
    return b;
}

static void keys(const node *x, int tree, uint64_t *k1, uint64_t *k2) {
    *k1 = tree == 0 ? x->len : x->off;
    *k2 = tree == 0 ? x->off : 0;
}

static void tree_insert(arena *A, int32_t id, int tree) {
    uint64_t k1, k2;
    keys(&A->n[id], tree, &k1, &k2);
    int32_t lo, hi;
    split(A, A->root[tree], tree, k1, k2, &lo, &hi);
    A->n[id].l[tree] = A->n[id].r[tree] = -1;
    A->root[tree] = merge(A, merge(A, lo, id, tree), hi, tree);
}

static void tree_erase(arena *A, int32_t id, int tree) {
    uint64_t k1, k2;
    keys(&A->n[id], tree, &k1, &k2);
    int32_t lo, mid, hi;
    split(A, A->root[tree], tree, k1, k2, &lo, &mid);
    /* mid starts with the node itself (keys are unique): cut it off */
    split(A, mid, tree, k1, k2 + 1, &mid, &hi);
    A->root[tree] = merge(A, lo, hi, tree);
}

/* First node with key >= (k1, k2), or -1. */
static int32_t lower_bound(const arena *A, int tree, uint64_t k1, uint64_t k2) {
    int32_t t = A->root[tree], best = -1;
    while (t >= 0) {
        if (key_less(&A->n[t], tree, k1, k2))
            t = A->n[t].r[tree];
        else {
            best = t;
            t = A->n[t].l[tree];
        }
    }
    return best;
}

/* Last extent with off < x, or -1. */
static int32_t before(const arena *A, uint64_t x) {
    int32_t t = A->root[1], best = -1;
    while (t >= 0) {
        if (A->n[t].off < x) {
            best = t;
            t = A->n[t].r[1];
        } else
            t = A->n[t].l[1];
    }
    return best;
}

static int32_t new_node(arena *A, uint64_t off, uint64_t len) {
    int32_t id;
    if (A->free_list >= 0) {
        id = A->free_list;
        A->free_list = A->n[id].l[0];
    } else {
        if (A->used == A->cap) {
            node *n = ccb_grow(A->b, A->n, &A->cap, sizeof *n, A->used + 1, 256);
            if (!n)
                return -1;
            A->n = n;
        }
        id = (int32_t)A->used++;
    }
    uint32_t prio = (uint32_t)(ccai_splitmix64_next(&A->rng) >> 32);
    A->n[id] = (node){.off = off, .len = len, .prio = prio, .l = {-1, -1}, .r = {-1, -1}};
    return id;
}

static void drop_node(arena *A, int32_t id) {
    tree_erase(A, id, 0);
    tree_erase(A, id, 1);
    A->n[id].l[0] = A->free_list;
    A->free_list = id;
}

static int add_free(arena *A, uint64_t off, uint64_t len) {
    int32_t left = before(A, off);
    if (left >= 0 && A->n[left].off + A->n[left].len == off) {
        off = A->n[left].off;
        len += A->n[left].len;
        drop_node(A, left);
    }
    int32_t right = lower_bound(A, 1, off + len, 0);
    if (right >= 0 && A->n[right].off == off + len) {
        len += A->n[right].len;
        drop_node(A, right);
    }
    if (off + len == A->top) { /* back to the wilderness */
        A->top = off;
        return 0;
    }
    int32_t id = new_node(A, off, len);
    if (id < 0)
        return -1;
    tree_insert(A, id, 0);
    tree_insert(A, id, 1);
    return 0;
}

size_t ccb_ideal_arena_peak(const ccb_trace *t) {
    ccb_budget unbounded = {.cap = SIZE_MAX}; /* not being loaded: host OOM is CCB_UNKNOWN, not an abort */
    arena A = {.free_list = -1, .root = {-1, -1}, .rng = 1, .b = t->budget ? t->budget : &unbounded};
    size_t ns = t->slots ? t->slots : 1, held = 2 * ns * sizeof(uint64_t);
    if (ccb_budget_take(A.b, held) != 0)
        return CCB_UNKNOWN;
    uint64_t *off = malloc(ns * sizeof *off);
    uint64_t *len = malloc(ns * sizeof *len);
    size_t result = CCB_UNKNOWN;
    if (!off || !len)
        goto out;
    for (size_t i = 0; i < t->n; i++) {
        const ccb_event *e = &t->ev[i];
        if (e->op == CCB_ALLOC) {
            uint64_t need = (e->size + CCA_GRANULARITY - 1) / CCA_GRANULARITY * CCA_GRANULARITY;
            len[e->slot] = need;
            if (need == 0) {
                off[e->slot] = A.top;
                continue;
            }
            int32_t b = lower_bound(&A, 0, need, 0);
            if (b >= 0) {
                uint64_t o = A.n[b].off, l = A.n[b].len;
                drop_node(&A, b);
                off[e->slot] = o;
                if (l > need) {
                    int32_t rest = new_node(&A, o + need, l - need);
                    if (rest < 0)
                        goto out;
                    tree_insert(&A, rest, 0);
                    tree_insert(&A, rest, 1);
                }
            } else {
                if (A.top > UINT64_MAX - need) /* a trace of sizes near 2^60 can wrap */
                    goto out;
                off[e->slot] = A.top;
                A.top += need;
                if (A.top > A.peak)
                    A.peak = A.top;
            }
        } else if (e->op == CCB_FREE && len[e->slot]) {
            if (add_free(&A, off[e->slot], len[e->slot]) != 0)
                goto out;
        }
    }
    result = (size_t)A.peak;
out:
    free(off);
    free(len);
    free(A.n);
    ccb_budget_give(A.b, held + A.cap * sizeof *A.n);
    return result;
}
