/*
 * block.c — block records and the coalescing of a freed block (the split
 * is block.h's).
 *
 * - A segment is tiled by blocks in address order (prev/next, I1); no two
 *   neighbours are both FREE (I2): a block that becomes free merges at once.
 * - Records come from 64-aligned slabs of 128, recycled, freed only by
 *   cca_destroy; taking one is O(1).
 * - Coalesce (ccai_pool_return): a LIVE or PENDING block turns FREE and
 *   absorbs its free neighbours. O(1) plus at most two index removals.
 *
 *   before free(C):  [A free 6M][C live 2M][D free 8M]
 *   after:           [A free 16M                    ]   merges += 2
 */
#include "block.h" /* the split, block records */

#include <stdlib.h>
#include <string.h>

#define SLAB_BLOCKS 128

typedef struct ccai_block_slab {
    struct ccai_block_slab *next;
    _Alignas(64) ccai_block blocks[]; /* each record on two whole cache lines */
} ccai_block_slab;

void ccai_block_free_slabs(cca_allocator *a) {
    while (a->slabs) {
        ccai_block_slab *next = a->slabs->next;
        free(a->slabs);
        a->slabs = next;
    }
}

/* ---- block records ------------------------------------------------------ */

ccai_block *ccai_block_new_slab(cca_allocator *a) {
    ccai_block_slab *slab = aligned_alloc(64, sizeof *slab + SLAB_BLOCKS * sizeof(ccai_block));
    if (!slab)
        return NULL;
    memset(slab, 0, sizeof *slab + SLAB_BLOCKS * sizeof(ccai_block));
    slab->next = a->slabs;
    a->slabs = slab;
    for (size_t i = 0; i < SLAB_BLOCKS; i++) {
        slab->blocks[i].next = a->spare_blocks;
        a->spare_blocks = &slab->blocks[i];
    }
    return ccai_block_new(a);
}

/* ---- coalesce ----------------------------------------------------------- */

static void absorb_next(cca_allocator *a, ccai_block *b) {
    ccai_block *n = b->next;
    b->size += n->size;
    if (n->unmapped) /* pages of either may be unmapped (a branch: classic blocks never are) */
        b->unmapped = true;
    b->next = n->next;
    if (n->next)
        n->next->prev = b;
    ccai_block_recycle(a, n);
    a->c.merges++;
}

void ccai_pool_return(cca_allocator *a, ccai_block *b) {
    if (a->history) /* a deferred free completes, or a forced domain release */
        ccai_history_record(a->history, CCAI_EV_FREE_COMPLETED, b->addr, b->requested, b->alloc_stream);
    ccai_live_map_remove(&a->live, b);
    ccai_pool_return_unlinked(a, b);
}

void ccai_pool_return_unlinked(cca_allocator *a, ccai_block *b) {
    ccai_free_index *ix = ccai_block_index(a, b);
    ccai_assert(b->state != CCAI_FREE && !b->needs_sync && ix == b->segment->index);
    ccai_assert(!b->uses); /* its stream-use record went first (stream.c, the callers) */
    ccai_lower(&a->c.allocated, b->size);
    ccai_lower(&a->c.active, 1);
    if (a->domains_tracked)
        ccai_domain_count_return(&b->segment->domain->c, b);
    b->requested = 0;
    b->alloc_stream = NULL;
    b->state = CCAI_FREE;
    b->unmapped = false; /* its pages are mapped (I7); one 16-bit store with state */
    if (b->prev && b->prev->state == CCAI_FREE) {
        ccai_block *p = b->prev;
        ccai_free_index_remove(ix, p);
        absorb_next(a, p);
        b = p;
    }
    ccai_block *n = b->next;
    if (n && n->state == CCAI_FREE) {
        if (ccai_free_index_swap_recent(ix, n, b)) { /* the remainder of b's split */
            absorb_next(a, b);
            return;
        }
        ccai_free_index_remove(ix, n);
        absorb_next(a, b);
    }
    ccai_free_index_insert(ix, b);
}
