/*
 * test_chain_sort.c — allocator/src/support/chain_sort.c: a chain sorted in
 * place is the stable sort of its nodes.
 *
 * Every chain of 0 to 9 nodes over keys 0..3 (ties in every arrangement),
 * and seeded random chains of up to 5,000 nodes over few and over many
 * keys, each against an insertion sort of the same nodes (stable by
 * construction): the same nodes in the same order, the last link NULL.
 * The link is not a node's first field, so the offset is exercised.
 */
#include "../../../allocator/src/support/chain_sort.h"
#include "ccai_rng.h" /* common/ */

#include <criterion/criterion.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct node {
    unsigned key;
    unsigned id; /* its place in the chain before the sort */
    struct node *next;
} node;

static bool before(const void *x, const void *y) {
    return ((const node *)x)->key < ((const node *)y)->key;
}

/* keys[0..n) chained in order, sorted; checked against a stable reference. */
static void check(const unsigned *keys, size_t n, const char *what) {
    node *v = calloc(n ? n : 1, sizeof *v);
    const node **ref = calloc(n ? n : 1, sizeof *ref);
    cr_assert(v && ref);
    for (size_t i = 0; i < n; i++) {
        v[i] = (node){keys[i], (unsigned)i, i + 1 < n ? &v[i + 1] : NULL};
        size_t j = i; /* insertion: after every node of a key <= keys[i] */
        while (j > 0 && ref[j - 1]->key > keys[i]) {
            ref[j] = ref[j - 1];
            j--;
        }
        ref[j] = &v[i];
    }
    node *at = ccai_chain_sort(n ? &v[0] : NULL, offsetof(node, next), before);
    for (size_t i = 0; i < n; i++, at = at->next) {
        cr_assert_not_null(at, "%s: the chain ends after %zu of %zu nodes", what, i, n);
        cr_assert_eq(at, ref[i], "%s, place %zu: node %u (key %u), the stable order has node %u (key %u)", what, i,
                     at->id, at->key, ref[i]->id, ref[i]->key);
    }
    cr_assert_null(at, "%s: the chain runs past its %zu nodes", what, n);
    free(v);
    free(ref);
}

Test(chain_sort, every_short_chain_over_four_keys) {
    unsigned keys[9];
    for (size_t n = 0; n <= 9; n++) {
        size_t total = (size_t)1 << (2 * n); /* 4^n arrangements */
        for (size_t code = 0; code < total; code++) {
            for (size_t i = 0; i < n; i++)
                keys[i] = (unsigned)(code >> (2 * i)) & 3;
            char what[48];
            snprintf(what, sizeof what, "n %zu, arrangement %zu", n, code);
            check(keys, n, what);
        }
    }
}

Test(chain_sort, long_random_chains_sorted_and_reversed) {
    ccai_rng r;
    ccai_rng_seed(&r, 20261202);
    static unsigned keys[5000];
    const size_t sizes[] = {10, 31, 32, 33, 100, 1000, 4097, 5000};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        for (unsigned span = 2; span <= 1u << 20; span <<= 9) { /* few keys (many ties), then many */
            for (size_t i = 0; i < n; i++)
                keys[i] = (unsigned)ccai_rng_below(&r, span);
            char what[64];
            snprintf(what, sizeof what, "n %zu, keys below %u", n, span);
            check(keys, n, what);
        }
        for (size_t i = 0; i < n; i++)
            keys[i] = (unsigned)(n - i); /* reversed: every merge takes from the right */
        check(keys, n, "reversed");
        for (size_t i = 0; i < n; i++)
            keys[i] = (unsigned)i;
        check(keys, n, "sorted already");
    }
}
