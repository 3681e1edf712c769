/*
 * model_blocks.h — the block arrays the oracle models share
 * (classic_model.c, pages_model.c): a segment or range is an array of
 * blocks sorted by offset that tile it, a free block never beside another.
 *
 * - Slow and obvious on purpose: insert and erase move the tail, O(blocks).
 * - Out of host memory aborts: these are test models.
 */
#ifndef CCA_MODEL_BLOCKS_H
#define CCA_MODEL_BLOCKS_H

#include <stddef.h>

typedef struct mb_block {
    size_t off, size;
    int live;
} mb_block;

/* An array of blocks: a segment's or a range's. */
typedef struct mb_blocks {
    mb_block *at;
    size_t n, cap;
} mb_blocks;

/* realloc, or abort. */
void *mb_xrealloc(void *p, size_t n);
/* Insert b at position i (the blocks after it move up). */
void mb_insert(mb_blocks *bs, size_t i, mb_block b);
/* Cut block i at `rounded`: its remainder a free block after it. */
void mb_split(mb_blocks *bs, size_t i, size_t rounded);
/* Free the live block at `off` and merge it with its free neighbours; 0
 * if no live block starts there. */
int mb_free(mb_blocks *bs, size_t off);
/* 1 when a live block of bs starts at `off`. */
int mb_live_at(const mb_blocks *bs, size_t off);

#endif
