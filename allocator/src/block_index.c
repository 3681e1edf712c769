/*
 * block_index.c — the two indexes over blocks.
 *
 * 1. The free index: every FREE block of a pool, found by BEST FIT: the
 *    smallest free block of the request's stream that fits, and among equal
 *    sizes the lowest address (the rule documented in ccalloc.h).
 *
 *    Per stream, blocks are segregated into size classes (sizes in units of
 *    512 B): units 1..63 have a class each (exact sizes up to 32 KiB, where
 *    most requests fall); from 64 units on, each power of two is cut into 64
 *    sub-classes (the TLSF layout: two classes are at most 1/64 apart).
 *    Classes partition sizes in order, so
 *
 *      best fit = lower bound of (size, 0) in the treap of the request's class
 *                 or, if that class has nothing large enough, the leftmost
 *                 (smallest, lowest-address) block of the next non-empty class,
 *
 *    which is still the exact best fit, not an approximation. The next
 *    non-empty class is found with a two-level bitmap (one word of rows, one
 *    word per row) and count-trailing-zeros: O(1). Each class holds its blocks
 *    in a treap ordered by (size, address), so the trees are small and
 *    shallow: O(log k) for k blocks in one class, instead of O(log n) over
 *    the whole pool, which matters because every level is a cache miss.
 *
 *      class:   1    2    3   ...  63 | 64..127 (32K..64K) | 128..191 | ...
 *      bitmap:  0    1    0   ...  1  |  0 1 0 0 ...        |   ...
 *      roots:  -   treap  -   ... treap
 *                  (size, addr)
 *
 *    Treap: the split/merge formulation, written as loops over "next link"
 *    pointers (no recursion, no per-node bookkeeping on the way back up);
 *    priorities are a hash of the address stored in the block, so the
 *    shapes, and every benchmark, are reproducible. The largest free block
 *    (stats, OOM message) is the rightmost node of the highest non-empty
 *    class: O(depth).
 *
 *    Two shortcuts save whole descents on the cached path, where cca_alloc
 *    splits a block and the matching cca_free merges the remainder back:
 *
 *    - the RECENT slot: the block inserted last waits in its stream's bins
 *      outside the treaps (the one it displaces is put into its treap then).
 *      A remainder that is merged back before the next insert, the usual
 *      alloc/free pair, never enters a treap. Best fit compares the slot's
 *      block with the treaps' answer by (size, address), so the result is
 *      still the exact best fit; largest and walk look at the slot too.
 *    - the HINT: best fit remembers the block it found in a treap and the
 *      link that points at it, so removing that block (what cca_alloc does
 *      next) unlinks it there instead of descending again. Any insert or
 *      remove clears the hint, as does freeing the bins it may point into.
 *
 *    and two fused operations do the pair's index work in one call each:
 *    ccai_free_index_split (the allocated block out, its remainder in as the
 *    recent block) and ccai_free_index_swap_recent (the freed block takes
 *    the slot of the remainder it absorbs). A cached pair thus costs one
 *    best-fit descent, and one treap insert for the block the remainder
 *    displaces from the slot. A block in a treap keeps its class (cls), so
 *    taking it out recomputes nothing.
 *
 *    Streams: a pool keeps one set of classes per stream (ccai_stream_bins),
 *    in a list with the most recently used first; programs use one or a few
 *    streams. Bins are created when the first segment of a stream is reserved
 *    in the pool (so inserting a free block never allocates) and freed when
 *    its last segment is released (so short-lived stream handles cost nothing
 *    once their memory is returned).
 *
 * 2. The live map: address -> LIVE/PENDING block, a chained hash table with
 *    the chain link inside the block (no extra allocation per entry). It grows
 *    by doubling at load factor 1, so cca_free finds its block in O(1). The
 *    hash is one multiply (Fibonacci hashing, internal.h), and insert, find
 *    and unlink are inline there: they are on the cached path.
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

/* ---- size classes ------------------------------------------------------------- */

static unsigned class_of(size_t size) {
    size_t units = size / CCA_GRANULARITY;
    if (units < 64)
        return (unsigned)units;
    unsigned fl = 63u - (unsigned)__builtin_clzll((unsigned long long)units); /* >= 6 */
    unsigned sl = (unsigned)(units >> (fl - 6)) & 63u;
    return (fl - 5) * 64 + sl;
}

static void mark(ccai_stream_bins *sb, unsigned c) {
    sb->bitmap[c / 64] |= 1ull << (c % 64);
    sb->rows |= 1ull << (c / 64);
}

static void unmark_if_empty(ccai_stream_bins *sb, unsigned c) {
    if (sb->roots[c])
        return;
    sb->bitmap[c / 64] &= ~(1ull << (c % 64));
    if (!sb->bitmap[c / 64])
        sb->rows &= ~(1ull << (c / 64));
}

/* First non-empty class strictly above c, or CCAI_CLASSES. */
static unsigned next_class(const ccai_stream_bins *sb, unsigned c) {
    unsigned row = c / 64, bit = c % 64;
    uint64_t in_row = bit == 63 ? 0 : sb->bitmap[row] & (~0ull << (bit + 1));
    if (in_row)
        return row * 64 + (unsigned)__builtin_ctzll(in_row);
    uint64_t rows = row == 63 ? 0 : sb->rows & (~0ull << (row + 1));
    if (!rows)
        return CCAI_CLASSES;
    row = (unsigned)__builtin_ctzll(rows);
    return row * 64 + (unsigned)__builtin_ctzll(sb->bitmap[row]);
}

/* ---- treap over (size, address) ----------------------------------------------- */

/* Heap order: a hash of the address, stored at insertion (a block's address
 * is fixed while it is in the index), so the shapes, and every benchmark,
 * are reproducible. */
static uint32_t priority_of(uintptr_t addr) {
    return (uint32_t)(mix64((uint64_t)addr) >> 32);
}

static int key_cmp(const ccai_block *b, size_t size, uintptr_t addr) {
    if (b->size != size)
        return b->size < size ? -1 : 1;
    if (b->addr != addr)
        return b->addr < addr ? -1 : 1;
    return 0;
}

/* Split t into l (keys < key) and r (keys >= key), iteratively: the left
 * and right results are built through two "next link" pointers. */
static void split(ccai_block *t, const ccai_block *key, ccai_block **l, ccai_block **r) {
    while (t) {
        if (key_cmp(t, key->size, key->addr) < 0) {
            *l = t;
            l = &t->right;
            t = t->right;
        } else {
            *r = t;
            r = &t->left;
            t = t->left;
        }
    }
    *l = *r = NULL;
}

/* Merge l and r where every key of l is below every key of r. */
static ccai_block *merge(ccai_block *l, ccai_block *r) {
    ccai_block *root = NULL, **link = &root;
    while (l && r) {
        if (l->priority > r->priority) {
            *link = l;
            link = &l->right;
            l = l->right;
        } else {
            *link = r;
            link = &r->left;
            r = r->left;
        }
    }
    *link = l ? l : r;
    return root;
}

/* Insert b below the first node of lower priority on its search path. */
static void insert(ccai_block **link, ccai_block *b) {
    ccai_block *t = *link;
    while (t && t->priority >= b->priority) {
        link = key_cmp(b, t->size, t->addr) < 0 ? &t->left : &t->right;
        t = *link;
    }
    split(t, b, &b->left, &b->right);
    *link = b;
}

/* Remove b (present: I3); false if it was not found (a broken invariant). */
static bool erase(ccai_block **link, ccai_block *b) {
    for (ccai_block *t = *link; t; t = *link) {
        if (t == b) {
            *link = merge(b->left, b->right);
            return true;
        }
        link = key_cmp(b, t->size, t->addr) < 0 ? &t->left : &t->right;
    }
    return false;
}

/* ---- the index ------------------------------------------------------------------- */

static ccai_stream_bins *bins_find(ccai_free_index *ix, cca_stream stream) {
    ccai_stream_bins **link = &ix->streams;
    for (ccai_stream_bins *sb = *link; sb; link = &sb->next, sb = sb->next) {
        if (sb->stream != stream)
            continue;
        if (link != &ix->streams) { /* move to front */
            *link = sb->next;
            sb->next = ix->streams;
            ix->streams = sb;
        }
        return sb;
    }
    return NULL;
}

/* The stream used last is at the front: one comparison on the cached path. */
static inline ccai_stream_bins *bins_of(ccai_free_index *ix, cca_stream stream) {
    ccai_stream_bins *sb = ix->streams;
    return sb && sb->stream == stream ? sb : bins_find(ix, stream);
}

cca_status ccai_free_index_attach(ccai_free_index *ix, cca_stream stream) {
    ccai_stream_bins *sb = bins_of(ix, stream);
    if (!sb) {
        sb = calloc(1, sizeof *sb);
        if (!sb)
            return ccai_fail(CCA_ERR_OUT_OF_MEMORY, "free index: host malloc failed");
        sb->stream = stream;
        sb->next = ix->streams;
        ix->streams = sb;
    }
    sb->segments++;
    return CCA_OK;
}

void ccai_free_index_detach(ccai_free_index *ix, cca_stream stream) {
    ccai_stream_bins *sb = bins_of(ix, stream); /* moved to the front */
    if (!sb || --sb->segments > 0)
        return;
    ccai_assert(!sb->recent && !sb->rows);
    ix->hint = NULL; /* its link may be one of the roots freed here */
    /* no segment of this stream is left in the pool, so no block either */
    ix->streams = sb->next;
    free(sb);
}

void ccai_free_index_destroy(ccai_free_index *ix) {
    while (ix->streams) {
        ccai_stream_bins *next = ix->streams->next;
        free(ix->streams);
        ix->streams = next;
    }
    ix->count = ix->bytes = 0;
    ix->hint = NULL;
}

/* Put b into its class's treap. */
static void treap_insert(ccai_stream_bins *sb, ccai_block *b) {
    unsigned c = class_of(b->size);
    b->cls = (uint16_t)c;
    b->left = b->right = NULL;
    b->priority = priority_of(b->addr);
    insert(&sb->roots[c], b);
    mark(sb, c);
}

void ccai_free_index_insert(ccai_free_index *ix, ccai_block *b) {
    ccai_stream_bins *sb = bins_of(ix, b->stream); /* exists: see attach */
    ccai_assert(sb != NULL && b->state == CCAI_FREE);
    ix->hint = NULL;
    /* b waits in the recent slot; the block it displaces goes to its treap */
    if (sb->recent)
        treap_insert(sb, sb->recent);
    b->left = b->right = NULL;
    sb->recent = b;
    ix->count++;
    ix->bytes += b->size;
}

/* Take b out of sb's recent slot or its treap; counts unchanged. */
static void unindex(ccai_free_index *ix, ccai_stream_bins *sb, ccai_block *b) {
    if (sb->recent == b) {
        sb->recent = NULL;
    } else {
        unsigned c = b->cls;                        /* = class_of(b->size): set by treap_insert */
        if (ix->hint == b && *ix->hint_link == b) { /* found by the last best fit */
            *ix->hint_link = merge(b->left, b->right);
        } else {
            bool found = erase(&sb->roots[c], b);
            ccai_assert(found);
            (void)found;
        }
        unmark_if_empty(sb, c);
    }
    ix->hint = NULL;
    b->left = b->right = NULL;
}

void ccai_free_index_remove(ccai_free_index *ix, ccai_block *b) {
    ccai_stream_bins *sb = bins_of(ix, b->stream);
    ccai_assert(sb != NULL);
    unindex(ix, sb, b);
    ix->count--;
    ix->bytes -= b->size;
}

void ccai_free_index_split(ccai_free_index *ix, ccai_block *b, ccai_block *rest) {
    ccai_stream_bins *sb = bins_of(ix, b->stream);
    ccai_assert(sb != NULL && rest->stream == b->stream && rest->state == CCAI_FREE);
    unindex(ix, sb, b);
    if (sb->recent) /* the block rest displaces goes to its treap */
        treap_insert(sb, sb->recent);
    rest->left = rest->right = NULL;
    sb->recent = rest;
    ix->bytes -= b->size - rest->size; /* one block out, one in: count unchanged */
}

bool ccai_free_index_swap_recent(ccai_free_index *ix, ccai_block *n, ccai_block *b) {
    ccai_stream_bins *sb = bins_of(ix, n->stream);
    if (sb->recent != n)
        return false;
    ccai_assert(b->stream == n->stream && b->state == CCAI_FREE);
    sb->recent = b; /* n's bytes stay counted: b absorbs them next */
    b->left = b->right = NULL;
    ix->hint = NULL;
    ix->bytes += b->size;
    return true;
}

ccai_block *ccai_free_index_best_fit(ccai_free_index *ix, cca_stream stream, size_t size, size_t max_size) {
    ccai_stream_bins *sb = bins_of(ix, stream);
    if (!sb)
        return NULL;
    unsigned c = class_of(size);
    ccai_block *best = NULL, **link = &sb->roots[c], **best_link = NULL;
    for (ccai_block *n = *link; n; n = *link) {
        if (key_cmp(n, size, 0) >= 0) {
            best = n;
            best_link = link;
            link = &n->left;
        } else {
            link = &n->right;
        }
    }
    if (!best) {
        unsigned next = next_class(sb, c);
        if (next != CCAI_CLASSES) {
            for (best_link = &sb->roots[next]; (*best_link)->left;)
                best_link = &(*best_link)->left;
            best = *best_link;
        }
    }
    ccai_block *r = sb->recent;
    if (r && r->size >= size && (!best || key_cmp(r, best->size, best->addr) < 0)) {
        ix->hint = NULL;
        return r->size <= max_size ? r : NULL;
    }
    if (!best || best->size > max_size)
        return NULL;
    ix->hint = best;
    ix->hint_link = best_link;
    return best;
}

size_t ccai_free_index_largest(const ccai_free_index *ix) {
    size_t largest = 0;
    for (const ccai_stream_bins *sb = ix->streams; sb; sb = sb->next) {
        if (!sb->rows)
            continue;
        unsigned row = 63u - (unsigned)__builtin_clzll(sb->rows);
        unsigned c = row * 64 + 63u - (unsigned)__builtin_clzll(sb->bitmap[row]);
        const ccai_block *n = sb->roots[c];
        while (n->right) /* ordered by size: the rightmost is the largest */
            n = n->right;
        if (n->size > largest)
            largest = n->size;
    }
    for (const ccai_stream_bins *sb = ix->streams; sb; sb = sb->next)
        if (sb->recent && sb->recent->size > largest)
            largest = sb->recent->size;
    return largest;
}

static bool walk(const ccai_block *n, bool (*fn)(void *, const ccai_block *), void *user) {
    if (!n)
        return true;
    return walk(n->left, fn, user) && fn(user, n) && walk(n->right, fn, user);
}

bool ccai_free_index_walk(const ccai_free_index *ix, bool (*fn)(void *user, const ccai_block *b), void *user) {
    for (const ccai_stream_bins *sb = ix->streams; sb; sb = sb->next) {
        if (sb->recent && !fn(user, sb->recent))
            return false;
        for (unsigned c = 0; c < CCAI_CLASSES; c++)
            if (!walk(sb->roots[c], fn, user))
                return false;
    }
    return true;
}

/* ---- live map -------------------------------------------------------------- */

cca_status ccai_live_map_init(ccai_live_map *m) {
    m->bucket_count = 256;
    m->shift = 64 - 8;
    m->count = 0;
    m->buckets = calloc(m->bucket_count, sizeof *m->buckets);
    return m->buckets ? CCA_OK : ccai_fail(CCA_ERR_OUT_OF_MEMORY, "live map: host malloc failed");
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
    ccai_block **link = &m->buckets[ccai_live_map_bucket(m, b->addr)];
    while (*link && *link != b)
        link = &(*link)->hash_next;
    if (*link) {
        *link = b->hash_next;
        m->count--;
    }
    b->hash_next = NULL;
}
