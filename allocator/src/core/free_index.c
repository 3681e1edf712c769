/*
 * free_index.c — the free index, version 2: the fast one, which the
 * allocator uses (free_index_v1.c has the same semantics; read it first).
 *
 * - Owns, per pool and key stream, every FREE block (I3), found by best fit:
 *   the smallest block >= size, the lowest address on ties (ccalloc.h).
 * - Size classes of 512-B units: 1..511 exact (up to 256 KiB), then 512 per
 *   power of two (TLSF, finer); a three-level bitmap marks the non-empty ones.
 *   Classes partition sizes in order, so best fit is exact:
 *     lower bound of (size, 0) in the request's class, else the first
 *     block of the next non-empty class (count-trailing-zeros).
 * - Each class is a B+-tree by (size, address), keys in the nodes: up to 16
 *   entries a node, at least 8 (BT_MIN) but the root; separators are lower
 *   bounds. A search touches no block record until it has its answer.
 * - Insert never fails: with no host memory for a node the block waits on
 *   its stream's OVERFLOW list (scanned by best fit, drained by the next
 *   insert that gets its nodes). Nodes come from a spare list (64 kept).
 * - The cached pair's shortcuts: the RECENT slot (the last block inserted
 *   waits outside the trees), the HINT (best fit's leaf and position), the
 *   GHOST (a taken block's entry stays until another tree operation; the
 *   free that brings it back with the same key forgets it). Largest, walk
 *   and check change nothing and step over the ghost.
 * - A stream's bins live from the first segment of the stream in the pool
 *   to its last (so an insert never allocates bins). They are found through
 *   the bins used last (one comparison), else a hash table of the streams
 *   (open addressing, at most half full: O(1) probes whatever the number of
 *   streams).
 * - Cost: the stream's bins, one comparison or a probe; best fit
 *   O(log8 k) in its class plus at most 5 bitmap words;
 *   insert and remove O(log8 k); the cached pair, one descent and no tree
 *   change; largest, the last entry of the top class's rightmost leaf, per
 *   stream; largest run visits blocks largest first until none can beat
 *   the best run. Bins: 196 KB of address space per
 *   (pool, stream), an anonymous mapping of their own (host_pages.c):
 *   resident only where classes are used.
 *
 *     class:   1    2    3   ... 511 | 512..1023 (256K..512K) | ...
 *     bitmap:  0    1    0   ...  1  |  0 1 0 0 ...           |   ...
 *     roots:   -   tree  -   ... tree
 *
 * docs/allocator.md, "The free index", has the details.
 */
#include "free_index.h"

#include <stdlib.h>
#include <string.h>

/* ---- size classes ------------------------------------------------------------- */

static unsigned class_of(size_t size) {
    size_t units = size / CCA_GRANULARITY;
    if (units < CCAI_CLASS_SUB)
        return (unsigned)units;
    unsigned fl = 63u - (unsigned)__builtin_clzll((unsigned long long)units); /* >= SUB_BITS */
    unsigned sl = (unsigned)(units >> (fl - CCAI_CLASS_SUB_BITS)) & (CCAI_CLASS_SUB - 1);
    return (fl - CCAI_CLASS_SUB_BITS + 1) * CCAI_CLASS_SUB + sl;
}

static void mark(ccai_stream_bins *sb, unsigned c) {
    sb->bitmap[c / 64] |= 1ull << (c % 64);
    sb->rows[c / 64 / 64] |= 1ull << (c / 64 % 64);
    sb->top |= 1ull << (c / 64 / 64);
}

static void unmark_if_empty(ccai_stream_bins *sb, unsigned c) {
    if (sb->roots[c])
        return;
    sb->bitmap[c / 64] &= ~(1ull << (c % 64));
    if (!sb->bitmap[c / 64]) {
        sb->rows[c / 64 / 64] &= ~(1ull << (c / 64 % 64));
        if (!sb->rows[c / 64 / 64])
            sb->top &= ~(1ull << (c / 64 / 64));
    }
}

static inline bool bins_empty(const ccai_stream_bins *sb) {
    return sb->top == 0;
}

/* First non-empty class strictly above c, or CCAI_CLASSES. */
static unsigned next_class(const ccai_stream_bins *sb, unsigned c) {
    unsigned w = c / 64, bit = c % 64;
    uint64_t in_word = bit == 63 ? 0 : sb->bitmap[w] & (~0ull << (bit + 1));
    if (in_word)
        return w * 64 + (unsigned)__builtin_ctzll(in_word);
    unsigned from = w + 1, s = from / 64; /* the next non-empty word at or after `from` */
    uint64_t m = s < CCAI_CLASS_SUMMARY ? sb->rows[s] & (~0ull << (from % 64)) : 0;
    if (!m) { /* none in row s: the next non-empty row, from the top word */
        uint64_t t = s + 1 < 64 ? sb->top & (~0ull << (s + 1)) : 0;
        if (!t)
            return CCAI_CLASSES;
        s = (unsigned)__builtin_ctzll(t);
        m = sb->rows[s];
    }
    w = s * 64 + (unsigned)__builtin_ctzll(m);
    return w * 64 + (unsigned)__builtin_ctzll(sb->bitmap[w]);
}

/* The lowest non-empty class, or CCAI_CLASSES. */
static unsigned first_class(const ccai_stream_bins *sb) {
    return sb->bitmap[0] & 1 ? 0 : next_class(sb, 0);
}

/* Highest non-empty class strictly below c (c <= CCAI_CLASSES), or
 * CCAI_CLASSES. */
static unsigned prev_class(const ccai_stream_bins *sb, unsigned c) {
    unsigned w = c / 64, bit = c % 64;
    uint64_t in_word = w < CCAI_CLASS_WORDS ? sb->bitmap[w] & ((1ull << bit) - 1) : 0;
    if (in_word)
        return w * 64 + 63u - (unsigned)__builtin_clzll(in_word);
    unsigned s = w / 64; /* the highest non-empty word below w */
    uint64_t m = s < CCAI_CLASS_SUMMARY ? sb->rows[s] & ((1ull << (w % 64)) - 1) : 0;
    if (!m) { /* none in row s: the highest non-empty row below it (s < 64: the top word) */
        uint64_t t = sb->top & ((1ull << s) - 1);
        if (!t)
            return CCAI_CLASSES;
        s = 63u - (unsigned)__builtin_clzll(t);
        m = sb->rows[s];
    }
    unsigned v = s * 64 + 63u - (unsigned)__builtin_clzll(m);
    return v * 64 + 63u - (unsigned)__builtin_clzll(sb->bitmap[v]);
}

/* ---- B+-tree over (size, address) ---------------------------------------- */

#define BT_MAX CCAI_BT_MAX
#define BT_MIN (BT_MAX / 2) /* fewest entries or children a non-root node has */
#define BT_DEPTH 48         /* far above any reachable height (BT_MIN^47)   */
#define SPARE_MAX 64        /* nodes kept for reuse per index                 */

static inline bool key_lt(size_t s1, uintptr_t a1, size_t s2, uintptr_t a2) {
    return s1 < s2 || (s1 == s2 && a1 < a2);
}

/* Internal node: the child whose range holds (size, addr) = the number of
 * separators <= the key. */
static inline unsigned child_for(const ccai_bnode *n, size_t size, uintptr_t addr) {
    unsigned i = 1;
    while (i < n->n && !key_lt(size, addr, n->e[i].size, n->e[i].addr))
        i++;
    return i - 1;
}

/* The same for the key (size, 0), below every block of that size: only
 * sizes are compared (a block's address is never 0). */
static inline unsigned child_for_size(const ccai_bnode *n, size_t size) {
    unsigned i = 1;
    while (i < n->n && n->e[i].size < size)
        i++;
    return i - 1;
}

/* Leaf: position of the first entry >= (size, addr). */
static inline unsigned leaf_pos(const ccai_bnode *n, size_t size, uintptr_t addr) {
    unsigned j = 0;
    while (j < n->n && key_lt(n->e[j].size, n->e[j].addr, size, addr))
        j++;
    return j;
}

static ccai_bnode *node_get(ccai_free_index *ix) {
    ccai_bnode *n = ix->spare;
    if (n) {
        ix->spare = n->next;
        ix->spare_count--;
        return n;
    }
    /* C11: the size must be a multiple of the alignment (ASan enforces it) */
    return aligned_alloc(64, (sizeof(ccai_bnode) + 63) & ~(size_t)63);
}

static void node_put(ccai_free_index *ix, ccai_bnode *n) {
    if (ix->spare_count >= SPARE_MAX) {
        free(n);
        return;
    }
    n->next = ix->spare;
    ix->spare = n;
    ix->spare_count++;
}

/* Move entries [from, from + count) of s to d at `to` (s == d: overlapping
 * is fine). A few entries are moved in a loop, more with memmove. */
static inline __attribute__((always_inline)) void move_keys(ccai_bnode *d, unsigned to, const ccai_bnode *s, unsigned from, unsigned count) {
    if (count > 4) {
        memmove(&d->e[to], &s->e[from], count * sizeof d->e[0]);
    } else if (d == s && to > from) {
        for (unsigned k = count; k-- > 0;)
            d->e[to + k] = s->e[from + k];
    } else {
        for (unsigned k = 0; k < count; k++)
            d->e[to + k] = s->e[from + k];
    }
}

static inline void set_key(ccai_bnode *n, unsigned i, size_t size, uintptr_t addr, void *item) {
    n->e[i].size = size;
    n->e[i].addr = addr;
    n->e[i].blk = item; /* a block (leaf) or a child (internal) */
}

/* Descend from n to the leaf whose range holds (s, a), recording each
 * internal node and the child taken in path/idx; returns the leaf, *depth
 * its depth. */
static ccai_bnode *descend(ccai_bnode *n, size_t s, uintptr_t a, ccai_bnode **path, unsigned *idx, int *depth) {
    int d = 0;
    while (!n->leaf) {
        unsigned i = child_for(n, s, a);
        path[d] = n;
        idx[d++] = i;
        n = n->e[i].child;
    }
    *depth = d;
    return n;
}

/* Insert b into a full leaf: splits bottom-up. False, the tree unchanged,
 * when a node it needs cannot be had. */
static __attribute__((noinline)) bool bt_insert_split(ccai_free_index *ix, ccai_bnode **root, ccai_block *b) {
    size_t s = b->size;
    uintptr_t a = b->addr;
    ccai_bnode *path[BT_DEPTH];
    unsigned idx[BT_DEPTH];
    int d;
    ccai_bnode *n = descend(*root, s, a, path, idx, &d);
    unsigned pos = leaf_pos(n, s, a);
    ccai_assert(n->n == BT_MAX);
    /* Splits: the leaf, every full ancestor above it, and a new root if they
     * all are. Every node is had first, so a failure changes nothing. */
    int need = 1;
    while (need <= d && path[d - need]->n == BT_MAX)
        need++;
    if (need == d + 1)
        need++;
    ccai_bnode *fresh[BT_DEPTH + 1];
    for (int k = 0; k < need; k++) {
        fresh[k] = node_get(ix);
        if (!fresh[k]) {
            while (k-- > 0)
                node_put(ix, fresh[k]);
            return false;
        }
    }
    /* The leaf: the upper half moves to r; b goes to whichever half holds
     * its position (at BT_MIN, the left: it is below r's first key). */
    ccai_bnode *r = fresh[--need];
    r->leaf = true;
    move_keys(r, 0, n, BT_MIN, BT_MAX - BT_MIN);
    r->n = BT_MAX - BT_MIN;
    n->n = BT_MIN;
    r->next = n->next;
    n->next = r;
    ccai_bnode *into = pos <= BT_MIN ? n : r;
    unsigned at = pos <= BT_MIN ? pos : pos - BT_MIN;
    move_keys(into, at + 1, into, at, into->n - at);
    set_key(into, at, s, a, b);
    into->n++;
    /* Up: insert (separator, right node) after the child that split. */
    size_t ks = r->e[0].size;
    uintptr_t ka = r->e[0].addr;
    ccai_bnode *right = r;
    for (int k = d - 1;; k--) {
        if (k < 0) { /* the root split: a new root over the two halves */
            ccai_bnode *nr = fresh[--need];
            nr->leaf = false;
            nr->n = 2;
            nr->next = NULL;
            set_key(nr, 0, 0, 0, *root);
            set_key(nr, 1, ks, ka, right);
            *root = nr;
            break;
        }
        ccai_bnode *p = path[k];
        unsigned i = idx[k] + 1;
        if (p->n < BT_MAX) {
            move_keys(p, i + 1, p, i, p->n - i);
            set_key(p, i, ks, ka, right);
            p->n++;
            break;
        }
        /* p splits: children BT_MIN.. move to q; the separator of q's first
         * child moves up. */
        ccai_bnode *q = fresh[--need];
        q->leaf = false;
        q->next = NULL;
        move_keys(q, 0, p, BT_MIN, BT_MAX - BT_MIN);
        q->n = BT_MAX - BT_MIN;
        p->n = BT_MIN;
        size_t up_s = q->e[0].size;
        uintptr_t up_a = q->e[0].addr;
        ccai_bnode *pin = i <= BT_MIN ? p : q;
        unsigned pat = i <= BT_MIN ? i : i - BT_MIN;
        move_keys(pin, pat + 1, pin, pat, pin->n - pat);
        set_key(pin, pat, ks, ka, right);
        pin->n++;
        ks = up_s;
        ka = up_a;
        right = q;
    }
    ccai_assert(need == 0);
    return true;
}

/* Insert b. False, the tree unchanged, when a node it needs cannot be had.
 * The usual case, a leaf with room, records no path. */
static inline bool bt_insert(ccai_free_index *ix, ccai_bnode **root, ccai_block *b) {
    size_t s = b->size;
    uintptr_t a = b->addr;
    ccai_bnode *n = *root;
    if (!n) {
        n = node_get(ix);
        if (!n)
            return false;
        n->leaf = true;
        n->n = 1;
        n->next = NULL;
        set_key(n, 0, s, a, b);
        *root = n;
        return true;
    }
    while (!n->leaf)
        n = n->e[child_for(n, s, a)].child;
    if (n->n == BT_MAX)
        return bt_insert_split(ix, root, b);
    unsigned pos = leaf_pos(n, s, a);
    move_keys(n, pos + 1, n, pos, n->n - pos);
    set_key(n, pos, s, a, b);
    n->n++;
    return true;
}

/* Remove entry or child i of n (shifting the rest left). */
static inline void drop_key(ccai_bnode *n, unsigned i) {
    move_keys(n, i, n, i + 1, n->n - i - 1);
    n->n--;
}

/* Rebalance after n, child i of p, fell below BT_MIN: borrow from a
 * sibling with more than BT_MIN, else merge with one. True when p lost a
 * child (and may itself be short now). */
static bool fix_short(ccai_free_index *ix, ccai_bnode *p, unsigned i, ccai_bnode *n) {
    ccai_bnode *l = i > 0 ? p->e[i - 1].child : NULL;
    ccai_bnode *r = i + 1 < p->n ? p->e[i + 1].child : NULL;
    if (l && l->n > BT_MIN) { /* l's last moves to n's front */
        move_keys(n, 1, n, 0, n->n);
        if (n->leaf) {
            move_keys(n, 0, l, l->n - 1, 1);
            p->e[i].size = n->e[0].size;
            p->e[i].addr = n->e[0].addr;
        } else { /* the old separator now bounds n's old first child */
            n->e[0].blk = l->e[l->n - 1].blk;
            n->e[1].size = p->e[i].size;
            n->e[1].addr = p->e[i].addr;
            p->e[i].size = l->e[l->n - 1].size;
            p->e[i].addr = l->e[l->n - 1].addr;
        }
        l->n--;
        n->n++;
        return false;
    }
    if (r && r->n > BT_MIN) { /* r's first moves to n's end */
        if (n->leaf) {
            move_keys(n, n->n, r, 0, 1);
            drop_key(r, 0);
            p->e[i + 1].size = r->e[0].size;
            p->e[i + 1].addr = r->e[0].addr;
        } else {
            set_key(n, n->n, p->e[i + 1].size, p->e[i + 1].addr, r->e[0].child);
            p->e[i + 1].size = r->e[1].size;
            p->e[i + 1].addr = r->e[1].addr;
            drop_key(r, 0);
        }
        n->n++;
        return false;
    }
    /* merge the right one of (l, n) or (n, r) into the left one */
    unsigned j = l ? i - 1 : i; /* the left one is child j */
    ccai_bnode *left = p->e[j].child, *right = p->e[j + 1].child;
    if (left->leaf) {
        move_keys(left, left->n, right, 0, right->n);
        left->next = right->next;
    } else {
        set_key(left, left->n, p->e[j + 1].size, p->e[j + 1].addr, right->e[0].child);
        move_keys(left, left->n + 1, right, 1, right->n - 1);
    }
    left->n += right->n;
    drop_key(p, j + 1);
    node_put(ix, right);
    return true;
}

/* After n (at depth d of path/idx, n == root when d == 0) lost an entry. */
static void rebalance(ccai_free_index *ix, ccai_bnode **root, ccai_bnode **path, const unsigned *idx, int d,
                      ccai_bnode *n) {
    for (int k = d - 1; k >= 0 && n->n < BT_MIN; k--) {
        if (!fix_short(ix, path[k], idx[k], n))
            return;
        n = path[k];
    }
    n = *root;
    if (n->leaf && n->n == 0) {
        node_put(ix, n);
        *root = NULL;
    } else if (!n->leaf && n->n == 1) { /* the root kept one child: it is the root now */
        *root = n->e[0].child;
        node_put(ix, n);
    }
}

/* Remove the entry (s, a) of block b (compared as a pointer only: b may no
 * longer be free); false if it is not in the tree (a broken invariant). */
static bool bt_erase(ccai_free_index *ix, ccai_bnode **root, size_t s, uintptr_t a, const ccai_block *b) {
    ccai_bnode *path[BT_DEPTH];
    unsigned idx[BT_DEPTH];
    int d;
    if (!*root)
        return false;
    ccai_bnode *n = descend(*root, s, a, path, idx, &d);
    unsigned pos = leaf_pos(n, s, a);
    if (pos == n->n || n->e[pos].blk != b)
        return false;
    drop_key(n, pos);
    rebalance(ix, root, path, idx, d, n);
    return true;
}

static ccai_bnode *leftmost_leaf(ccai_bnode *n) {
    while (!n->leaf)
        n = n->e[0].child;
    return n;
}

static void bt_destroy(ccai_free_index *ix, ccai_bnode *n) {
    if (!n->leaf)
        for (unsigned i = 0; i < n->n; i++)
            bt_destroy(ix, n->e[i].child);
    node_put(ix, n);
}

/* ---- the deferred removal (the ghost) ------------------------------------ */

/* Drop the ghost's entry from its tree: the removal its take deferred. */
static __attribute__((noinline)) void settle_ghost(ccai_free_index *ix) {
    ccai_stream_bins *sb = ix->ghost_sb;
    unsigned c = ix->ghost_cls;
    ccai_bnode *leaf = ix->ghost_leaf;
    unsigned pos = ix->ghost_pos;
    bool root = leaf == sb->roots[c];
    ccai_assert(pos < leaf->n && leaf->e[pos].blk == ix->ghost && leaf->e[pos].size == ix->ghost_size &&
                leaf->e[pos].addr == ix->ghost_addr);
    if (root || leaf->n > BT_MIN) { /* as the hint's drop: no descent */
        drop_key(leaf, pos);
        if (root && leaf->n == 0) {
            node_put(ix, leaf);
            sb->roots[c] = NULL;
        }
    } else {
        bool found = bt_erase(ix, &sb->roots[c], ix->ghost_size, ix->ghost_addr, ix->ghost);
        ccai_assert(found);
        (void)found;
    }
    sb->trees -= !sb->roots[c];
    unmark_if_empty(sb, c);
    ix->ghost = NULL;
    ix->hint = NULL;
}

/* Before any operation that reads or changes a tree. */
static inline void settle(ccai_free_index *ix) {
    if (ix->ghost)
        settle_ghost(ix);
}

/* Is b the ghost, back with the key it left its tree under? */
static inline bool is_ghost(const ccai_free_index *ix, const ccai_block *b, size_t size) {
    return ix->ghost == b && b->addr == ix->ghost_addr && size == ix->ghost_size;
}

/* b returns to the entry it never left: the take is undone. */
static inline void resurrect(ccai_free_index *ix, ccai_block *b) {
    b->cls = (uint16_t)ix->ghost_cls;
    ix->ghost = NULL;
    ix->hint = NULL;
}

/* ---- the index ------------------------------------------------------------------- */

/* A stream's bins: the ones used last (one comparison on the cached path),
 * else a probe of the hash table, linear from the stream's hash. */
static size_t slot_of(unsigned bits, cca_stream stream) {
    return (size_t)(((uint64_t)(uintptr_t)stream * 0x9e3779b97f4a7c15ull) >> (64 - bits));
}

static ccai_stream_bins *table_find(const ccai_free_index *ix, cca_stream stream) {
    if (!ix->table)
        return NULL;
    size_t mask = ((size_t)1 << ix->table_bits) - 1;
    for (size_t i = slot_of(ix->table_bits, stream);; i = (i + 1) & mask) {
        const ccai_stream_slot *t = &ix->table[i];
        if (!t->bins || t->stream == stream)
            return t->bins;
    }
}

/* Out of line: the cached path inlines only the comparison. */
__attribute__((noinline)) static ccai_stream_bins *bins_probe(ccai_free_index *ix, cca_stream stream) {
    ccai_stream_bins *sb = table_find(ix, stream);
    return sb ? ix->last = sb : NULL;
}

static inline ccai_stream_bins *bins_of(ccai_free_index *ix, cca_stream stream) {
    ccai_stream_bins *sb = ix->last;
    return sb && sb->stream == stream ? sb : bins_probe(ix, stream);
}

static void table_put(ccai_stream_slot *table, unsigned bits, ccai_stream_bins *sb) {
    size_t mask = ((size_t)1 << bits) - 1, i = slot_of(bits, sb->stream);
    while (table[i].bins)
        i = (i + 1) & mask;
    table[i].stream = sb->stream;
    table[i].bins = sb;
}

/* Room for one more stream, the table at most half full: doubled (from 8
 * slots) and every stream put again. Nothing changes when host memory is
 * short. The table never shrinks (16 bytes a slot) until the index is
 * destroyed. */
static cca_status table_reserve(ccai_free_index *ix) {
    if (ix->table && (ix->nstreams + 1) * 2 <= ((size_t)1 << ix->table_bits))
        return CCA_OK;
    unsigned bits = ix->table ? ix->table_bits + 1 : 3;
    ccai_stream_slot *t = calloc((size_t)1 << bits, sizeof *t);
    if (!t)
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "free index: host malloc failed");
    for (ccai_stream_bins *sb = ix->streams; sb; sb = sb->next)
        table_put(t, bits, sb);
    free(ix->table);
    ix->table = t;
    ix->table_bits = bits;
    return CCA_OK;
}

/* sb leaves the table: the slots after it that probed past it move back
 * (backward-shift deletion; no tombstones). */
static void table_drop(ccai_free_index *ix, const ccai_stream_bins *sb) {
    size_t mask = ((size_t)1 << ix->table_bits) - 1, i = slot_of(ix->table_bits, sb->stream);
    while (ix->table[i].bins != sb)
        i = (i + 1) & mask;
    for (size_t j = (i + 1) & mask; ix->table[j].bins; j = (j + 1) & mask) {
        size_t home = slot_of(ix->table_bits, ix->table[j].stream);
        /* j's entry stays when its home lies cyclically in (i, j] */
        bool stays = i < j ? (home > i && home <= j) : (home > i || home <= j);
        if (!stays) {
            ix->table[i] = ix->table[j];
            i = j;
        }
    }
    ix->table[i].bins = NULL;
    ix->table[i].stream = NULL;
}

cca_status ccai_free_index_attach(ccai_free_index *ix, cca_stream stream) {
    ccai_stream_bins *sb = bins_of(ix, stream);
    if (!sb) {
        cca_status st = table_reserve(ix);
        if (st != CCA_OK)
            return st;
        sb = ccai_host_zalloc(sizeof *sb); /* resident where touched: host_pages.c */
        if (!sb)
            return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "free index: host memory for a stream's bins refused");
        sb->stream = stream;
        sb->next = ix->streams;
        ix->streams = sb;
        table_put(ix->table, ix->table_bits, sb);
        ix->nstreams++;
    }
    sb->segments++;
    return CCA_OK;
}

static void bins_free(ccai_free_index *ix, ccai_stream_bins *sb) {
    for (unsigned c = first_class(sb); c != CCAI_CLASSES; c = next_class(sb, c))
        bt_destroy(ix, sb->roots[c]);
    ccai_host_zfree(sb, sizeof *sb);
}

void ccai_free_index_detach(ccai_free_index *ix, cca_stream stream) {
    settle(ix);
    ccai_stream_bins *sb = bins_of(ix, stream);
    if (!sb || --sb->segments > 0)
        return;
    ccai_assert(!sb->recent && bins_empty(sb) && !sb->overflow);
    ix->hint = NULL;
    /* no segment of this stream is left in the pool, so no block either */
    table_drop(ix, sb);
    ix->nstreams--;
    ccai_stream_bins **link = &ix->streams; /* O(streams), with the segment's release */
    while (*link != sb)
        link = &(*link)->next;
    *link = sb->next;
    if (ix->last == sb)
        ix->last = NULL;
    bins_free(ix, sb);
}

void ccai_free_index_destroy(ccai_free_index *ix) {
    ix->ghost = NULL; /* its node goes with the others */
    while (ix->streams) {
        ccai_stream_bins *next = ix->streams->next;
        bins_free(ix, ix->streams);
        ix->streams = next;
    }
    free(ix->table);
    ix->table = NULL;
    ix->table_bits = 0;
    ix->nstreams = 0;
    ix->last = NULL;
    while (ix->spare) {
        ccai_bnode *next = ix->spare->next;
        free(ix->spare);
        ix->spare = next;
    }
    ix->spare_count = 0;
    ix->count = ix->bytes = 0;
    ix->hint = NULL;
}

static void overflow_unlink(ccai_stream_bins *sb, ccai_block *b) {
    if (b->over_prev)
        b->over_prev->over_next = b->over_next;
    else
        sb->overflow = b->over_next;
    if (b->over_next)
        b->over_next->over_prev = b->over_prev;
    b->over_prev = b->over_next = NULL;
}

/* Put b into its class's tree; if host memory has no node for it, into the
 * overflow list, which best fit scans. Blocks wait there until a later
 * insert finds nodes again. */
static void tree_insert(ccai_free_index *ix, ccai_stream_bins *sb, ccai_block *b) {
    unsigned c = class_of(b->size);
    bool had = sb->roots[c] != NULL;
    if (!bt_insert(ix, &sb->roots[c], b)) {
        b->cls = CCAI_CLASS_OVERFLOW;
        b->over_prev = NULL;
        b->over_next = sb->overflow;
        if (sb->overflow)
            sb->overflow->over_prev = b;
        sb->overflow = b;
        return;
    }
    b->cls = (uint16_t)c;
    sb->trees += !had;
    mark(sb, c);
    while (sb->overflow) { /* nodes could be had again: drain */
        ccai_block *o = sb->overflow;
        unsigned oc = class_of(o->size);
        had = sb->roots[oc] != NULL;
        if (!bt_insert(ix, &sb->roots[oc], o))
            return;
        sb->trees += !had;
        overflow_unlink(sb, o);
        o->cls = (uint16_t)oc;
        mark(sb, oc);
    }
}

void ccai_free_index_insert(ccai_free_index *ix, ccai_block *b) {
    ccai_assert(b->state == CCAI_FREE);
    if (is_ghost(ix, b, b->size)) { /* taken whole and freed unchanged */
        resurrect(ix, b);
        ix->count++;
        ix->bytes += b->size;
        return;
    }
    settle(ix);
    ccai_stream_bins *sb = bins_of(ix, b->stream); /* exists: see attach */
    ccai_assert(sb != NULL);
    ix->hint = NULL;
    /* b waits in the recent slot; the block it displaces goes to its tree */
    if (sb->recent)
        tree_insert(ix, sb, sb->recent);
    b->over_prev = b->over_next = NULL;
    sb->recent = b;
    ix->count++;
    ix->bytes += b->size;
}

/* Take b out of sb's recent slot, its tree or the overflow list; counts
 * unchanged. `defer` (no ghost outstanding): when the last best fit found b
 * in a tree, leave its entry there as the ghost. */
static void unindex(ccai_free_index *ix, ccai_stream_bins *sb, ccai_block *b, bool defer) {
    if (defer && ix->hint == b) {
        ccai_assert(!ix->ghost && ix->hint_leaf->e[ix->hint_pos].blk == b);
        ix->ghost = b;
        ix->ghost_leaf = ix->hint_leaf;
        ix->ghost_pos = ix->hint_pos;
        ix->ghost_cls = b->cls;
        ix->ghost_size = b->size;
        ix->ghost_addr = b->addr;
        ix->ghost_sb = sb;
        ix->hint = NULL;
        return;
    }
    if (sb->recent == b) {
        sb->recent = NULL;
    } else if (b->cls == CCAI_CLASS_OVERFLOW) {
        overflow_unlink(sb, b);
    } else {
        unsigned c = b->cls; /* = class_of(b->size): set by tree_insert */
        ccai_bnode *leaf = ix->hint_leaf;
        bool root = leaf == sb->roots[c];
        if (ix->hint == b && (root || leaf->n > BT_MIN)) {
            /* found by the last best fit, and its leaf stays full enough (or
             * is the root): no descent; separators stay valid lower bounds */
            ccai_assert(leaf->e[ix->hint_pos].blk == b);
            drop_key(leaf, ix->hint_pos);
            if (root && leaf->n == 0) {
                node_put(ix, leaf);
                sb->roots[c] = NULL;
            }
        } else {
            bool found = bt_erase(ix, &sb->roots[c], b->size, b->addr, b);
            ccai_assert(found);
            (void)found;
        }
        sb->trees -= !sb->roots[c];
        unmark_if_empty(sb, c);
    }
    ix->hint = NULL;
}

static void remove_block(ccai_free_index *ix, ccai_block *b, bool defer) {
    settle(ix);
    ccai_stream_bins *sb = bins_of(ix, b->stream);
    ccai_assert(sb != NULL);
    unindex(ix, sb, b, defer);
    ix->count--;
    ix->bytes -= b->size;
}

void ccai_free_index_remove(ccai_free_index *ix, ccai_block *b) {
    remove_block(ix, b, false);
}

void ccai_free_index_take(ccai_free_index *ix, ccai_block *b) {
    remove_block(ix, b, true);
}

/* After a tree insert, is the hint's block still where the hint says? An
 * insert frees no node; it may shift b one place right in its leaf, or move
 * it to a new leaf (then the hint is dropped). */
static void rehint(ccai_free_index *ix, const ccai_block *b) {
    if (ix->hint != b)
        return;
    ccai_bnode *leaf = ix->hint_leaf;
    unsigned pos = ix->hint_pos;
    if (pos + 1 < leaf->n && leaf->e[pos + 1].blk == b)
        ix->hint_pos = pos + 1;
    else if (!(pos < leaf->n && leaf->e[pos].blk == b))
        ix->hint = NULL;
}

void ccai_free_index_split(ccai_free_index *ix, ccai_block *b, ccai_block *rest) {
    settle(ix);
    ccai_stream_bins *sb = bins_of(ix, b->stream);
    ccai_assert(sb != NULL && rest->stream == b->stream && rest->state == CCAI_FREE);
    if (sb->recent && sb->recent != b) { /* the block rest displaces goes to its tree first */
        tree_insert(ix, sb, sb->recent); /* leaves the hint alone: rehint checks it */
        sb->recent = NULL;
        rehint(ix, b);
    }
    unindex(ix, sb, b, true);
    rest->over_prev = rest->over_next = NULL;
    sb->recent = rest;
    ix->bytes -= b->size - rest->size; /* one block out, one in: count unchanged */
}

bool ccai_free_index_swap_recent(ccai_free_index *ix, ccai_block *n, ccai_block *b) {
    ccai_stream_bins *sb = bins_of(ix, n->stream);
    if (sb->recent != n)
        return false;
    ccai_assert(b->stream == n->stream && b->state == CCAI_FREE);
    /* n itself may be the ghost: taken whole, then freed into this slot by
     * an earlier swap (its entry kept, as a recent ghost may). n merges
     * into b next and its block is recycled, so its entry is dropped now,
     * the removal it stood for; left, the index would keep a recycled
     * block as its ghost. */
    if (ix->ghost == n)
        settle_ghost(ix);
    if (n->size <= SIZE_MAX - b->size && is_ghost(ix, b, b->size + n->size)) {
        sb->recent = NULL; /* the split undone: b returns to its entry */
        resurrect(ix, b);
        ix->bytes += b->size;
        return true;
    }
    sb->recent = b; /* n's bytes stay counted: b absorbs them next */
    b->over_prev = b->over_next = NULL;
    ix->hint = NULL;
    ix->bytes += b->size;
    return true;
}

static inline bool block_lt(const ccai_block *x, const ccai_block *y) {
    return key_lt(x->size, x->addr, y->size, y->addr);
}

ccai_block *ccai_free_index_best_fit(ccai_free_index *ix, cca_stream stream, size_t size, size_t max_size) {
    settle(ix);
    ccai_stream_bins *sb = bins_of(ix, stream);
    if (!sb)
        return NULL;
    unsigned c = class_of(size), j = 0;
    ccai_bnode *leaf = sb->roots[c];
    if (leaf) { /* lower bound of (size, 0) in the request's class */
        while (!leaf->leaf)
            leaf = leaf->e[child_for_size(leaf, size)].child;
        while (j < leaf->n && leaf->e[j].size < size)
            j++;
        if (j == leaf->n) { /* all below: the answer starts the next leaf */
            leaf = leaf->next;
            j = 0;
        }
    }
    if (!leaf) { /* nothing large enough there: the next class's smallest */
        unsigned next = next_class(sb, c);
        if (next != CCAI_CLASSES)
            leaf = leftmost_leaf(sb->roots[next]);
    }
    ccai_block *best = leaf ? leaf->e[j].blk : NULL, *tree_best = best;
    ccai_block *r = sb->recent;
    if (r && r->size >= size && (!best || key_lt(r->size, r->addr, leaf->e[j].size, leaf->e[j].addr)))
        best = r;
    for (ccai_block *o = sb->overflow; o; o = o->over_next)
        if (o->size >= size && (!best || block_lt(o, best)))
            best = o;
    ix->hint = NULL;
    if (!best || best->size > max_size)
        return NULL;
    if (best == tree_best) {
        ix->hint = best;
        ix->hint_leaf = leaf;
        ix->hint_pos = j;
    }
    return best;
}


/* Raise *best to run(b) for the keys under n, largest first (the ghost's
 * entry skipped: its block is not free). False as soon as a key is no
 * larger than *best: every key after it is no larger either, and run(b) <=
 * b->size, so none can raise *best. An internal node stops before child
 * i - 1 when separator i is no larger than *best: every key under that
 * child is below it. Recursion depth: the tree's height. */
static bool tree_largest_run(const ccai_free_index *ix, const ccai_bnode *n, size_t (*run)(const ccai_block *b),
                             size_t *best) {
    if (n->leaf) {
        for (unsigned j = n->n; j-- > 0;) {
            if (ix->ghost && n == ix->ghost_leaf && j == ix->ghost_pos)
                continue;
            if (n->e[j].size <= *best)
                return false;
            size_t r = run(n->e[j].blk);
            *best = r > *best ? r : *best;
        }
        return true;
    }
    for (unsigned i = n->n; i-- > 0;)
        if (!tree_largest_run(ix, n->e[i].child, run, best) || (i > 0 && n->e[i].size <= *best))
            return false;
    return true;
}

size_t ccai_free_index_largest_run(const ccai_free_index *ix, size_t (*run)(const ccai_block *b), size_t floor) {
    size_t best = floor;
    for (const ccai_stream_bins *sb = ix->streams; sb; sb = sb->next) {
        /* outside the trees first: the recent block is often the largest */
        if (sb->recent && sb->recent->size > best) {
            size_t r = run(sb->recent);
            best = r > best ? r : best;
        }
        for (const ccai_block *o = sb->overflow; o; o = o->over_next)
            if (o->size > best) {
                size_t r = run(o);
                best = r > best ? r : best;
            }
        /* classes partition sizes in order: from the top, until one stops */
        for (unsigned c = prev_class(sb, CCAI_CLASSES); c != CCAI_CLASSES; c = prev_class(sb, c))
            if (!tree_largest_run(ix, sb->roots[c], run, &best))
                break;
    }
    return best;
}

static size_t block_size(const ccai_block *b) {
    return b->size;
}

/* A block's run is at most its size: with the size as the run, the walk
 * stops at the first key it reads below the top of each stream. */
size_t ccai_free_index_largest(const ccai_free_index *ix) {
    return ccai_free_index_largest_run(ix, block_size, 0);
}

bool ccai_free_index_walk(const ccai_free_index *ix, bool (*fn)(void *user, const ccai_block *b), void *user) {
    for (const ccai_stream_bins *sb = ix->streams; sb; sb = sb->next) {
        if (sb->recent && !fn(user, sb->recent))
            return false;
        for (const ccai_block *o = sb->overflow; o; o = o->over_next)
            if (!fn(user, o))
                return false;
        for (unsigned c = first_class(sb); c != CCAI_CLASSES; c = next_class(sb, c)) {
            for (const ccai_bnode *n = leftmost_leaf(sb->roots[c]); n; n = n->next)
                for (unsigned j = 0; j < n->n; j++)
                    if (!(ix->ghost && n == ix->ghost_leaf && j == ix->ghost_pos) && !fn(user, n->e[j].blk))
                        return false;
        }
    }
    return true;
}

/* ---- structure check ---------------------------------------------------------- */

typedef struct bt_check {
    const ccai_bnode *prev_leaf; /* the leaf before, in order: its next must be this */
    size_t last_size;
    uintptr_t last_addr;
    bool any;
    int leaf_depth;
    unsigned cls;
    const ccai_stream_bins *sb;
    const ccai_free_index *ix;
    bool ghost_seen; /* the ghost's entry was met where the index says */
} bt_check;

/* Keys under n lie in [lo, hi) (has_lo / has_hi: bounds present). */
static const char *check_node(bt_check *k, const ccai_bnode *n, int depth, bool root, bool has_lo, size_t lo_s,
                              uintptr_t lo_a, bool has_hi, size_t hi_s, uintptr_t hi_a) {
    if (depth >= BT_DEPTH)
        return "free index: a tree is deeper than any reachable height";
    if (n->n > BT_MAX || n->n < (root ? (n->leaf ? 1u : 2u) : (unsigned)BT_MIN))
        return "free index: a tree node is over- or under-full";
    if (n->leaf) {
        if (k->leaf_depth < 0)
            k->leaf_depth = depth;
        else if (k->leaf_depth != depth)
            return "free index: a tree's leaves are at different depths";
        if (k->prev_leaf && k->prev_leaf->next != n)
            return "free index: a tree's leaf chain skips a leaf";
        k->prev_leaf = n;
        for (unsigned j = 0; j < n->n; j++) {
            const ccai_block *b = n->e[j].blk;
            size_t size = n->e[j].size;
            uintptr_t addr = n->e[j].addr;
            const ccai_free_index *ix = k->ix;
            if (ix->ghost && n == ix->ghost_leaf && j == ix->ghost_pos) {
                /* the deferred removal: its block is live now, its key old;
                 * or freed and merged with the recent block it split off,
                 * into a block of another size: then it is the recent one */
                if (b != ix->ghost || size != ix->ghost_size || addr != ix->ghost_addr || (b->state == CCAI_FREE && b != k->sb->recent) ||
                    k->sb != ix->ghost_sb || k->cls != ix->ghost_cls || class_of(size) != k->cls)
                return "free index: the deferred removal's entry differs from its record";
                k->ghost_seen = true;
            } else {
                if (!b || b->size != size || b->addr != addr)
                    return "free index: a tree key differs from its block";
                if (b->cls != k->cls || class_of(b->size) != k->cls || b->stream != k->sb->stream)
                    return "free index: a block is in the tree of another class or stream";
            }
            if (k->any && !key_lt(k->last_size, k->last_addr, size, addr))
                return "free index: a tree is not in (size, address) order";
            if ((has_lo && key_lt(size, addr, lo_s, lo_a)) || (has_hi && !key_lt(size, addr, hi_s, hi_a)))
                return "free index: a key lies outside its separators";
            k->any = true;
            k->last_size = size;
            k->last_addr = addr;
        }
        return NULL;
    }
    for (unsigned i = 0; i < n->n; i++) {
        bool cl = i > 0 ? true : has_lo, ch = i + 1 < n->n ? true : has_hi;
        size_t ls = i > 0 ? n->e[i].size : lo_s, hs = i + 1 < n->n ? n->e[i + 1].size : hi_s;
        uintptr_t la = i > 0 ? n->e[i].addr : lo_a, ha = i + 1 < n->n ? n->e[i + 1].addr : hi_a;
        if (!n->e[i].child)
            return "free index: a tree node has a NULL child";
        const char *err = check_node(k, n->e[i].child, depth + 1, false, cl, ls, la, ch, hs, ha);
        if (err)
            return err;
    }
    return NULL;
}

/* The OR of a class bitmap row's words: uninstrumented under ASan (its
 * bounds are the array's own, known at compile time), where the check
 * of each load made it most of a walk over thousands of domains. */
static __attribute__((no_sanitize_address)) uint64_t row_or(const uint64_t *w, unsigned n) {
    uint64_t any = 0;
    for (unsigned i = 0; i < n; i++)
        any |= w[i];
    return any;
}

const char *ccai_free_index_check(const ccai_free_index *ix) {
    size_t spare = 0;
    for (const ccai_bnode *n = ix->spare; n; n = n->next)
        if (++spare > ix->spare_count)
            break;
    if (spare != ix->spare_count)
        return "free index: the spare node count is wrong";
    /* the streams: each listed stream's bins where a probe finds them,
     * nothing else in the table; the bins used last among them */
    size_t listed = 0, slots = ix->table ? (size_t)1 << ix->table_bits : 0, filled = 0;
    bool last_seen = !ix->last;
    for (const ccai_stream_bins *sb = ix->streams; sb; sb = sb->next) {
        if (++listed > ix->nstreams)
            return "free index: more streams listed than counted";
        if (table_find(ix, sb->stream) != sb)
            return "free index: a stream's bins are not where the table says";
        last_seen |= sb == ix->last;
    }
    if (!last_seen)
        return "free index: the bins used last are not a listed stream's";
    for (size_t i = 0; i < slots; i++)
        filled += ix->table[i].bins != NULL;
    if (listed != ix->nstreams || filled != listed || filled * 2 > slots)
        return "free index: the streams' table and list disagree";
    bool ghost_seen = false;
    for (const ccai_stream_bins *sb = ix->streams; sb; sb = sb->next) {
        /* The summary against the bitmap: O(words), but a row the summary
         * calls empty is one OR over its words (a loop the compiler makes
         * vector code of; a memcmp against zeros was a third of a walk
         * under ASan, whose memcmp checks both buffers' shadow), and only
         * non-zero words are counted (the walk runs after every call at
         * CCA_DEBUG=2, over every domain's pools). Then the marked classes
         * only (O(non-empty classes)): each has a tree, and their number
         * is the count of roots kept where roots change, so a root in an
         * unmarked class is caught without reading every root. */
        uint64_t rows[CCAI_CLASS_SUMMARY] = {0};
        size_t marked = 0;
        for (unsigned r = 0; r < CCAI_CLASS_SUMMARY; r++) {
            unsigned w0 = r * 64, n = CCAI_CLASS_WORDS - w0 < 64 ? CCAI_CLASS_WORDS - w0 : 64;
            if (!sb->rows[r] && !row_or(&sb->bitmap[w0], n))
                continue; /* rows[r] stays 0, as the summary says */
            for (unsigned w = w0; w < w0 + n; w++)
                if (sb->bitmap[w]) {
                    rows[r] |= 1ull << (w % 64);
                    marked += (size_t)__builtin_popcountll(sb->bitmap[w]);
                }
        }
        if (marked != sb->trees)
            return "free index: the class bitmap disagrees with the trees";
        /* before the walk, which trusts the rows: a row bit over an empty
         * word would have next_class take the lowest bit of 0 */
        if (memcmp(rows, sb->rows, sizeof rows))
            return "free index: the row bitmap disagrees with the class bitmap";
        uint64_t top = 0;
        for (unsigned r = 0; r < CCAI_CLASS_SUMMARY; r++)
            top |= (uint64_t)(rows[r] != 0) << r;
        if (top != sb->top)
            return "free index: the top word disagrees with the row bitmap";
        for (unsigned c = first_class(sb); c != CCAI_CLASSES; c = next_class(sb, c)) {
            if (!sb->roots[c])
                return "free index: the class bitmap disagrees with the trees";
            bt_check k = {.leaf_depth = -1, .cls = c, .sb = sb, .ix = ix};
            const char *err = check_node(&k, sb->roots[c], 0, true, false, 0, 0, false, 0, 0);
            if (err)
                return err;
            ghost_seen |= k.ghost_seen;
            if (k.prev_leaf->next)
                return "free index: a tree's last leaf links to another";
        }
        size_t listed = 0;
        for (const ccai_block *o = sb->overflow; o; o = o->over_next)
            if (++listed > ix->count || o->cls != CCAI_CLASS_OVERFLOW ||
                (o->over_next && o->over_next->over_prev != o) || (o == sb->overflow && o->over_prev))
                return "free index: the overflow list is broken";
    }
    if (ix->ghost && !ghost_seen)
        return "free index: the deferred removal's entry is not in its tree";
    return NULL;
}
