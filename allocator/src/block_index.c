/*
 * block_index.c — the two indexes over blocks.
 *
 * 1. The free index: every FREE block of a pool, in a treap ordered by the
 *    key (stream, size, address). A best-fit lookup is a lower bound on
 *    (stream, request, 0): the first node at or after it is the smallest free
 *    block of that stream that fits, and among equal sizes the lowest address,
 *    which is exactly the rule documented in ccalloc.h. Insert, remove and
 *    lookup cost O(log n) expected in the number n of free blocks.
 *
 *    Why a treap: a balanced search tree is needed for best fit with a
 *    deterministic tie-break (size classes alone would give "good fit"), and
 *    the treap's split/merge formulation is the shortest correct one to read.
 *    Priorities are a hash of the block's address, so the shape of the tree
 *    (and every benchmark) is reproducible run to run.
 *
 *    Each node also keeps `max_size`, the largest block in its subtree, so the
 *    largest free block of a pool (for the fragmentation figure) is read at
 *    the root in O(1).
 *
 *             (s0, 4K, 0x..200)                key order: stream, size, addr
 *              /            \
 *     (s0, 1K, 0x..a00)   (s0, 2M, 0x..000)    heap order: priority
 *
 * 2. The live map: address -> LIVE/PENDING block, a chained hash table with
 *    the chain link inside the block (no extra allocation per entry). It grows
 *    by doubling at load factor 1, so cca_free finds its block in O(1).
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static uint64_t mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Compare block b with key (stream, size, addr). */
static int key_cmp(const ccai_block *b, uintptr_t stream, size_t size, uintptr_t addr) {
    uintptr_t bs = (uintptr_t)b->stream;
    if (bs != stream)
        return bs < stream ? -1 : 1;
    if (b->size != size)
        return b->size < size ? -1 : 1;
    if (b->addr != addr)
        return b->addr < addr ? -1 : 1;
    return 0;
}

static size_t subtree_max(const ccai_block *n) { return n ? n->max_size : 0; }

static void update(ccai_block *n) {
    size_t m = n->size, l = subtree_max(n->left), r = subtree_max(n->right);
    if (l > m)
        m = l;
    if (r > m)
        m = r;
    n->max_size = m;
}

/* Split t into l (keys < key) and r (keys >= key). */
static void split(ccai_block *t, const ccai_block *key, ccai_block **l, ccai_block **r) {
    if (!t) {
        *l = *r = NULL;
        return;
    }
    if (key_cmp(t, (uintptr_t)key->stream, key->size, key->addr) < 0) {
        split(t->right, key, &t->right, r);
        *l = t;
    } else {
        split(t->left, key, l, &t->left);
        *r = t;
    }
    update(t);
}

/* Merge l and r where every key of l is below every key of r. */
static ccai_block *merge(ccai_block *l, ccai_block *r) {
    if (!l)
        return r;
    if (!r)
        return l;
    if (l->priority > r->priority) {
        l->right = merge(l->right, r);
        update(l);
        return l;
    }
    r->left = merge(l, r->left);
    update(r);
    return r;
}

static ccai_block *insert(ccai_block *t, ccai_block *b) {
    if (!t)
        return b;
    if (b->priority > t->priority) {
        split(t, b, &b->left, &b->right);
        update(b);
        return b;
    }
    if (key_cmp(b, (uintptr_t)t->stream, t->size, t->addr) < 0)
        t->left = insert(t->left, b);
    else
        t->right = insert(t->right, b);
    update(t);
    return t;
}

static ccai_block *erase(ccai_block *t, ccai_block *b) {
    if (!t)
        return NULL; /* not present: callers guarantee it is (I3) */
    if (t == b)
        return merge(t->left, t->right);
    if (key_cmp(b, (uintptr_t)t->stream, t->size, t->addr) < 0)
        t->left = erase(t->left, b);
    else
        t->right = erase(t->right, b);
    update(t);
    return t;
}

void ccai_free_index_insert(ccai_free_index *ix, ccai_block *b) {
    b->left = b->right = NULL;
    b->max_size = b->size;
    b->priority = mix64((uint64_t)b->addr);
    ix->root = insert(ix->root, b);
    ix->count++;
    ix->bytes += b->size;
}

void ccai_free_index_remove(ccai_free_index *ix, ccai_block *b) {
    ix->root = erase(ix->root, b);
    b->left = b->right = NULL;
    ix->count--;
    ix->bytes -= b->size;
}

ccai_block *ccai_free_index_best_fit(const ccai_free_index *ix, cca_stream stream, size_t size, size_t max_size) {
    ccai_block *best = NULL;
    for (ccai_block *n = ix->root; n;) {
        if (key_cmp(n, (uintptr_t)stream, size, 0) >= 0) {
            best = n;
            n = n->left;
        } else {
            n = n->right;
        }
    }
    if (!best || best->stream != stream || best->size > max_size)
        return NULL;
    return best;
}

size_t ccai_free_index_largest(const ccai_free_index *ix) { return subtree_max(ix->root); }

static bool walk(const ccai_block *n, bool (*fn)(void *, const ccai_block *), void *user) {
    if (!n)
        return true;
    return walk(n->left, fn, user) && fn(user, n) && walk(n->right, fn, user);
}

bool ccai_free_index_walk(const ccai_free_index *ix, bool (*fn)(void *user, const ccai_block *b), void *user) {
    return walk(ix->root, fn, user);
}

/* ---- live map -------------------------------------------------------------- */

static size_t bucket_of(uintptr_t addr, size_t bucket_count) {
    return (size_t)(mix64((uint64_t)addr) & (bucket_count - 1));
}

cca_status ccai_live_map_init(ccai_live_map *m) {
    m->bucket_count = 256;
    m->count = 0;
    m->buckets = calloc(m->bucket_count, sizeof *m->buckets);
    return m->buckets ? CCA_OK : ccai_fail(CCA_ERR_OUT_OF_MEMORY, "live map: host malloc failed");
}

void ccai_live_map_destroy(ccai_live_map *m) {
    free(m->buckets);
    m->buckets = NULL;
    m->bucket_count = m->count = 0;
}

static void grow(ccai_live_map *m) {
    size_t n = m->bucket_count * 2;
    ccai_block **nb = calloc(n, sizeof *nb);
    if (!nb)
        return; /* keep the old table: lookups stay correct, only slower */
    for (size_t i = 0; i < m->bucket_count; i++) {
        for (ccai_block *b = m->buckets[i], *next; b; b = next) {
            next = b->hash_next;
            size_t k = bucket_of(b->addr, n);
            b->hash_next = nb[k];
            nb[k] = b;
        }
    }
    free(m->buckets);
    m->buckets = nb;
    m->bucket_count = n;
}

cca_status ccai_live_map_insert(ccai_live_map *m, ccai_block *b) {
    if (m->count >= m->bucket_count)
        grow(m);
    size_t k = bucket_of(b->addr, m->bucket_count);
    b->hash_next = m->buckets[k];
    m->buckets[k] = b;
    m->count++;
    return CCA_OK;
}

ccai_block *ccai_live_map_find(const ccai_live_map *m, uintptr_t addr) {
    for (ccai_block *b = m->buckets[bucket_of(addr, m->bucket_count)]; b; b = b->hash_next)
        if (b->addr == addr)
            return b;
    return NULL;
}

void ccai_live_map_remove(ccai_live_map *m, ccai_block *b) {
    ccai_block **link = &m->buckets[bucket_of(b->addr, m->bucket_count)];
    while (*link && *link != b)
        link = &(*link)->hash_next;
    if (*link) {
        *link = b->hash_next;
        m->count--;
    }
    b->hash_next = NULL;
}
