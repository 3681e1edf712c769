/*
 * block.h — the split of a free block (step 6), inline: the cached path
 * runs it; block.c has the records and the coalescing.
 *
 * - A block handed out keeps `rounded` bytes; its remainder becomes a free
 *   block when worth one: >= 512 B in the small pool and arenas, and for a
 *   small request in another pool (one spilled to the large range on a full
 *   device: kinds/pages.c), > small_max in the others, never above
 *   max_split; and, in a pages segment, always when it reaches an unmapped
 *   page the request does not touch.
 * - A remainder kept as slack stays part of the block (and must be mapped).
 * - Cost: O(1), one free-index split (the remainder enters as the recent block).
 */
#ifndef CCA_BLOCK_H
#define CCA_BLOCK_H

#include "internal.h"

/* A zeroed block record from the spare list (a new slab when it is empty);
 * NULL: host malloc failed. */
static inline ccai_block *ccai_block_new(cca_allocator *a) {
    ccai_block *b = a->spare_blocks;
    if (!b)
        return ccai_block_new_slab(a);
    a->spare_blocks = b->next;
    memset(b, 0, sizeof *b);
    return b;
}

static inline void ccai_block_recycle(cca_allocator *a, ccai_block *b) {
    ccai_assert(b->uses == NULL);
    b->next = a->spare_blocks; /* cleared again by ccai_block_new */
    a->spare_blocks = b;
}

/* Is the remainder of b after `rounded` bytes worth a block of its own? */
static inline bool ccai_block_worth_a_block(const cca_allocator *a, const ccai_block *b, size_t rounded) {
    size_t remainder = b->size - rounded;
    if ((b->seg & CCAI_SEG_SHARED) || ccai_block_pool(b) == CCAI_POOL_SMALL)
        return remainder >= CCA_GRANULARITY;
    if (a->config.small_pool && rounded <= a->config.small_max) /* spilled (small_pool:0: the large pool's rule) */
        return remainder >= CCA_GRANULARITY;
    if (a->config.max_split && b->size > a->config.max_split)
        return false;
    return remainder > a->config.small_max;
}

/* Step 6: split b after `rounded` bytes? When the remainder is worth a
 * block, or when it reaches an unmapped page (kind.h, gap). */
static inline bool ccai_block_worth_splitting(const cca_allocator *a, const ccai_block *b, size_t rounded) {
    if (ccai_block_worth_a_block(a, b, rounded))
        return true;
    return b->unmapped && b->size != rounded && a->kind->gap(b, rounded);
}

/* The bytes of b a request of `rounded` will hold (slack included: all mapped, I7). */
static inline size_t ccai_block_held(const cca_allocator *a, const ccai_block *b, size_t rounded) {
    return ccai_block_worth_splitting(a, b, rounded) ? rounded : b->size;
}

/* Step 6: take b out of its segment's index, its remainder split off when
 * `split`. No block record for the remainder: a classic block is handed out
 * whole; a pages block cannot be (its remainder may lie on unmapped pages,
 * I7): CCA_ERR_OUT_OF_MEMORY, b untouched and still indexed. */
static inline cca_status ccai_block_take(cca_allocator *a, ccai_block *b, size_t rounded, bool split) {
    ccai_free_index *ix = ccai_block_index(a, b);
    ccai_block *rest = NULL;
    /* decided before pages were mapped: maybe more than needed, never less */
    ccai_assert(split || !ccai_block_worth_splitting(a, b, rounded));
    if (split) {
        rest = ccai_block_new(a);
        if (!rest && (b->seg & CCAI_SEG_EXPANDABLE))
            return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "%s: host malloc failed for a block record", a->allocating);
    }
    if (!rest) {
        ccai_free_index_take(ix, b);
        return CCA_OK;
    }
    rest->addr = b->addr + rounded;
    rest->size = b->size - rounded;
    rest->segment = b->segment;
    rest->seg = b->seg;
    rest->stream = b->stream;
    rest->state = CCAI_FREE;
    rest->unmapped = b->unmapped; /* what step 4 did not map stays as it was */
    ccai_free_index_split(ix, b, rest);
    rest->prev = b;
    rest->next = b->next;
    if (b->next)
        b->next->prev = rest;
    b->next = rest;
    b->size = rounded;
    a->c.splits++;
    return CCA_OK;
}

#endif /* CCA_BLOCK_H */
