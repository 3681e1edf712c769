/*
 * block.h — the split of a free block, inline: every cached allocation that
 * does not take a whole block runs it (block.c has the records and the
 * coalescing).
 *
 * - A block handed out keeps `rounded` bytes; its remainder becomes a free
 *   block when worth one: >= 512 B in the small pool and arenas, > small_max
 *   in the others, never above max_split; and, in a pages segment, always
 *   when it reaches an unmapped page the request does not touch.
 * - A remainder kept as slack stays part of the block (and must be mapped).
 * - Cost: O(1), one free-index split (the remainder enters as the recent block).
 */
#ifndef CCA_BLOCK_H
#define CCA_BLOCK_H

#include "internal.h"

/* block.c's records, inline: a split takes one on the cached path */
/* A zeroed block record from the spare list (a new slab when it is empty);
 * NULL: host malloc failed. Inline: a split takes one on the cached path. */
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

/* Step 6's rule for any segment: is the remainder of b after `rounded`
 * bytes worth a block of its own? */
static inline bool ccai_block_worth_a_block(const cca_allocator *a, const ccai_block *b, size_t rounded) {
    size_t remainder = b->size - rounded;
    if ((b->seg & CCAI_SEG_SHARED) || ccai_block_pool(b) == CCAI_POOL_SMALL)
        return remainder >= CCA_GRANULARITY;
    if (a->config.max_split && b->size > a->config.max_split)
        return false;
    return remainder > a->config.small_max;
}

/* Step 6: split b after `rounded` bytes? When the remainder is worth a
 * block; in an expandable segment also when it reaches a page the request
 * does not touch and that is not mapped: kept as slack it would have to be
 * mapped (I7), pages the request does not need (and, near a device that is
 * no whole number of pages, pages the device cannot hold); split off it
 * stays a free block over unmapped pages, merged back at the free. Only a
 * block marked unmapped can have such pages (the cached path's one test). */
static inline bool ccai_block_worth_splitting(const cca_allocator *a, const ccai_block *b, size_t rounded) {
    if (ccai_block_worth_a_block(a, b, rounded))
        return true;
    if (!b->unmapped || b->size == rounded)
        return false;
    const ccai_segment *s = b->segment;
    size_t from = ccai_round_up(b->addr + rounded - s->base, s->page), to = ccai_round_up(b->addr + b->size - s->base, s->page);
    return from < to && !ccai_pages_mapped(s, s->base + from, to - from);
}

/* The bytes of b a request of `rounded` will hold: all of b when the
 * remainder stays with it as slack. In an expandable segment they must all
 * be mapped (I7), slack included. */
static inline size_t ccai_block_held(const cca_allocator *a, const ccai_block *b, size_t rounded) {
    return ccai_block_worth_splitting(a, b, rounded) ? rounded : b->size;
}

/* Step 6: take b out of the free index, splitting off its remainder when
 * that is worth it (the remainder enters the index as its recent block).
 * The index is the one of b's segment: a large request may take a medium
 * block. CCA_ERR_OUT_OF_MEMORY, b untouched and still indexed, only when the
 * remainder needs a block record, host memory has none, and b lies in an
 * expandable segment: there the remainder's pages may be unmapped, so b
 * cannot be handed out whole (I7). A classic segment's block is handed out
 * unsplit instead. */
static inline cca_status ccai_block_take(cca_allocator *a, ccai_block *b, size_t rounded, bool split) {
    ccai_free_index *ix = ccai_block_index(a, b);
    ccai_block *rest = NULL;
    /* decided before step 4 or 5 mapped pages: a map ahead may since have
     * mapped the slack's pages, so "split" may now be more than needed, never
     * less (nothing is unmapped in between) */
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
