/* live_map.h — the live map (live_map.c): its table, and the cached path's
 * operations inline. */
#ifndef CCA_LIVE_MAP_H
#define CCA_LIVE_MAP_H

#include "types.h"
#include "../support/support.h"

typedef struct ccai_live_map {
    ccai_block **buckets;
    size_t bucket_count; /* power of two: 2^(64 - shift) */
    unsigned shift;      /* a bucket is the top (64 - shift) bits of the hash */
    size_t count;
} ccai_live_map;

cca_status ccai_live_map_init(ccai_live_map *m);
void ccai_live_map_destroy(ccai_live_map *m);
void ccai_live_map_grow(ccai_live_map *m); /* doubles; on host OOM keeps the table */
void ccai_live_map_remove(ccai_live_map *m, ccai_block *b);

/* Fibonacci hashing: the top bits of addr x 2^64/phi depend on every bit
 * of the address, so multiples of 512 spread over the buckets. */
static inline size_t ccai_live_map_bucket(const ccai_live_map *m, uintptr_t addr) {
    return (size_t)(((uint64_t)addr * 0x9e3779b97f4a7c15ull) >> m->shift);
}

/* Never fails: a table that cannot grow makes chains longer. */
static inline void ccai_live_map_insert(ccai_live_map *m, ccai_block *b) {
    if (m->count >= m->bucket_count)
        ccai_live_map_grow(m);
    size_t k = ccai_live_map_bucket(m, b->addr);
    b->hash_next = m->buckets[k];
    m->buckets[k] = b;
    m->count++;
}

/* The link that holds addr's block (or NULL): cca_free's one walk. */
static inline ccai_block **ccai_live_map_link(const ccai_live_map *m, uintptr_t addr) {
    ccai_block **link = &m->buckets[ccai_live_map_bucket(m, addr)];
    while (*link && (*link)->addr != addr)
        link = &(*link)->hash_next;
    return link;
}

static inline ccai_block *ccai_live_map_find(const ccai_live_map *m, uintptr_t addr) {
    return *ccai_live_map_link(m, addr);
}

static inline void ccai_live_map_unlink(ccai_live_map *m, ccai_block **link) { /* *link != NULL */
    ccai_block *b = *link;
    *link = b->hash_next;
    b->hash_next = NULL;
    m->count--;
}

#endif /* CCA_LIVE_MAP_H */
