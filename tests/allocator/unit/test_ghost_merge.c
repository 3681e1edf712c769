/*
 * test_ghost_merge.c — allocator/src/core/free_index.c: the free index's deferred removal (the GHOST,
 * core/free_index.c) when the ghost block is freed into the recent slot and
 * then merged away by the free of the block before it.
 *
 * cca_alloc taking a block whole from a tree leaves its tree entry in
 * place as the ghost; a free that returns the block with the same key
 * forgets the ghost, any other tree operation first drops the entry. Two
 * frees touch no tree (ccai_free_index_swap_recent): a freed block whose
 * successor is the recent block takes the recent slot and absorbs it. So:
 *
 *   blocks   P | G | X | R          G free in its tree, R: the recent block
 *   alloc    G taken whole from its tree: G is the ghost (entry kept)
 *   free X   X takes R's slot and absorbs R
 *   free G   G takes X's slot and absorbs X: the ghost is FREE, recent
 *   free P   P takes G's slot and absorbs G: G's block goes back to the
 *            slab while the index still records it as the ghost, its
 *            tree entry pointing at a recycled block
 * After each call the invariants must hold (at CCA_DEBUG=2 the allocator
 * checks them itself as each call returns), and the segment, all free
 * again, must serve and release as one block.
 */
#include "alloc_test_util.h"

#include <criterion/criterion.h>

#define S0 ((cca_stream)0x100)

static void check(const cca_allocator *a, const char *what) {
    cr_assert_eq(cca_check_invariants(a), CCA_OK, "%s: %s", what, cca_last_error());
}

/* One small-pool segment (classic, 2 MiB); 512-byte blocks side by side. */
static void ghost_merged_away(cca_allocator *a) {
    char *p = tu_alloc(a, 512, S0), *g = tu_alloc(a, 512, S0), *x = tu_alloc(a, 512, S0);
    cr_assert_eq(g, p + 512);
    cr_assert_eq(x, g + 512);
    tu_free(a, g);                   /* G recent, the tail into its tree */
    char *y = tu_alloc(a, 1024, S0); /* the tail split: Y, its remainder recent, G into its tree */
    cr_assert_eq(y, x + 512);
    char *g2 = tu_alloc(a, 512, S0); /* G, whole, from its tree: the ghost */
    cr_assert_eq(g2, g, "best fit: G, exactly 512 bytes");
    check(a, "G taken");
    tu_free(a, y); /* Y takes the remainder's slot: R = Y + the tail, recent */
    check(a, "R recent");
    tu_free(a, x);
    check(a, "X freed into the slot");
    tu_free(a, g2);
    check(a, "G freed into the slot");
    tu_free(a, p);
    check(a, "P freed: G merged into it");
    /* one free block: a request of half the segment takes its start */
    char *half = tu_alloc(a, 1 * MiB, S0);
    cr_assert_eq(half, p, "the segment, one free block again");
    check(a, "half the segment");
    tu_free(a, half);
}

/* One small-pool segment (classic, 2 MiB); 512-byte blocks side by side. */
Test(ghost_merge, the_ghost_freed_into_the_slot_then_merged_away) {
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(64 * MiB, "log_oom:0", &u, &a);
    ghost_merged_away(a);
    tu_teardown(a, u);
}

/* The same over an expandable segment's small-pool range. */
Test(ghost_merge, the_same_over_pages) {
    cca_upstream *u = tu_vm_device(64 * MiB, 64 * KiB);
    cca_allocator *a = tu_allocator(u, "expandable:1,log_oom:0");
    ghost_merged_away(a);
    tu_empty_all(a, u);
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    cca_upstream_destroy(u);
}
