/*
 * live_map.c — the live map: address -> LIVE or PENDING block (I3).
 *
 * - A chained hash table, the link inside the block record: no allocation
 *   per entry. One multiply to hash; insert, find, unlink inline (.h).
 * - Doubles at load factor 1; a table that cannot grow keeps working with
 *   longer chains. O(1) expected.
 */
#include "live_map.h"

#include <stdlib.h>
#include <string.h>

cca_status ccai_live_map_init(ccai_live_map *m) {
    m->bucket_count = 256;
    m->shift = 64 - 8;
    m->count = 0;
    m->buckets = calloc(m->bucket_count, sizeof *m->buckets);
    return m->buckets ? CCA_OK : cca_set_error(CCA_ERR_OUT_OF_MEMORY, "live map: host malloc failed");
}

void ccai_live_map_destroy(ccai_live_map *m) {
    free(m->buckets);
    m->buckets = NULL;
    m->bucket_count = m->count = 0;
}

void ccai_live_map_grow(ccai_live_map *m) {
    if (m->shift == 1)
        return; /* 2^63 buckets: cannot happen before host memory runs out */
    ccai_live_map bigger = {.bucket_count = m->bucket_count * 2, .shift = m->shift - 1, .count = m->count};
    bigger.buckets = calloc(bigger.bucket_count, sizeof *bigger.buckets);
    if (!bigger.buckets)
        return; /* keep the old table: lookups stay correct, only slower */
    for (size_t i = 0; i < m->bucket_count; i++) {
        for (ccai_block *b = m->buckets[i], *next; b; b = next) {
            next = b->hash_next;
            size_t k = ccai_live_map_bucket(&bigger, b->addr);
            b->hash_next = bigger.buckets[k];
            bigger.buckets[k] = b;
        }
    }
    free(m->buckets);
    *m = bigger;
}

void ccai_live_map_remove(ccai_live_map *m, ccai_block *b) {
    ccai_block **link = ccai_live_map_link(m, b->addr); /* one block an address */
    if (*link == b)
        ccai_live_map_unlink(m, link);
    b->hash_next = NULL;
}
