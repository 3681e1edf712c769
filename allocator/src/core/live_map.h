/*
 * live_map.h — the live map (live_map.c): its table and the inline operations of the
 * cached path.
 */
#ifndef CCA_LIVE_MAP_H
#define CCA_LIVE_MAP_H

#include "types.h"
#include "../support/support.h"

/* ------------------------------------------------------------------------ */
/* live_map.c: address -> LIVE or PENDING block                             */
/* ------------------------------------------------------------------------ */

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

/* The cached path's operations are inline (one multiply to hash, then the
 * chain): cca_alloc inserts, cca_free finds and unlinks. */

/* Fibonacci hashing: the top bits of addr x 2^64/phi. Block addresses
 * (multiples of 512, often evenly spaced) spread over the buckets because
 * the product's top bits depend on every bit of the address. */
static inline size_t ccai_live_map_bucket(const ccai_live_map *m, uintptr_t addr) {
    return (size_t)(((uint64_t)addr * 0x9e3779b97f4a7c15ull) >> m->shift);
}

/* Grows at load factor 1 first; never fails (a table that cannot grow only
 * makes chains longer). */
static inline void ccai_live_map_insert(ccai_live_map *m, ccai_block *b) {
    if (m->count >= m->bucket_count)
        ccai_live_map_grow(m);
    size_t k = ccai_live_map_bucket(m, b->addr);
    b->hash_next = m->buckets[k];
    m->buckets[k] = b;
    m->count++;
}

static inline ccai_block *ccai_live_map_find(const ccai_live_map *m, uintptr_t addr) {
    ccai_block *b = m->buckets[ccai_live_map_bucket(m, addr)];
    while (b && b->addr != addr)
        b = b->hash_next;
    return b;
}

/* The link that holds (or would hold) addr's block: *link is the block or
 * NULL. cca_free finds and removes with one hash and one chain walk. */
static inline ccai_block **ccai_live_map_link(ccai_live_map *m, uintptr_t addr) {
    ccai_block **link = &m->buckets[ccai_live_map_bucket(m, addr)];
    while (*link && (*link)->addr != addr)
        link = &(*link)->hash_next;
    return link;
}

static inline void ccai_live_map_unlink(ccai_live_map *m, ccai_block **link) { /* *link != NULL */
    ccai_block *b = *link;
    *link = b->hash_next;
    b->hash_next = NULL;
    m->count--;
}

#endif /* CCA_LIVE_MAP_H */
