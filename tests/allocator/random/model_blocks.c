/*
 * model_blocks.c — the oracle models' block arrays (model_blocks.h).
 */
#include "model_blocks.h"

#include <stdlib.h>
#include <string.h>

void *mb_xrealloc(void *p, size_t n) {
    void *q = realloc(p, n);
    if (!q)
        abort();
    return q;
}

void mb_insert(mb_blocks *bs, size_t i, mb_block b) {
    if (bs->n == bs->cap) {
        bs->cap = bs->cap ? 2 * bs->cap : 8;
        bs->at = mb_xrealloc(bs->at, bs->cap * sizeof *bs->at);
    }
    memmove(&bs->at[i + 1], &bs->at[i], (bs->n - i) * sizeof *bs->at);
    bs->at[i] = b;
    bs->n++;
}

static void erase(mb_blocks *bs, size_t i) {
    memmove(&bs->at[i], &bs->at[i + 1], (bs->n - i - 1) * sizeof *bs->at);
    bs->n--;
}

void mb_split(mb_blocks *bs, size_t i, size_t rounded) {
    size_t rest = bs->at[i].size - rounded;
    bs->at[i].size = rounded;
    mb_insert(bs, i + 1, (mb_block){bs->at[i].off + rounded, rest, 0});
}

int mb_free(mb_blocks *bs, size_t off) {
    for (size_t j = 0; j < bs->n; j++) {
        if (bs->at[j].off != off || !bs->at[j].live)
            continue;
        bs->at[j].live = 0;
        if (j + 1 < bs->n && !bs->at[j + 1].live) {
            bs->at[j].size += bs->at[j + 1].size;
            erase(bs, j + 1);
        }
        if (j > 0 && !bs->at[j - 1].live) {
            bs->at[j - 1].size += bs->at[j].size;
            erase(bs, j);
        }
        return 1;
    }
    return 0;
}

int mb_live_at(const mb_blocks *bs, size_t off) {
    for (size_t j = 0; j < bs->n; j++)
        if (bs->at[j].live && bs->at[j].off == off)
            return 1;
    return 0;
}
