/*
 * free_index.h — the free index, version 2 (free_index.c): its types and operations.
 */
#ifndef CCA_FREE_INDEX_H
#define CCA_FREE_INDEX_H

#include "types.h"
#include "../support/support.h"

/* ------------------------------------------------------------------------ */
/* free_index.c: the free-block index (version 2)                          */
/* ------------------------------------------------------------------------ */

/* Segregated classes: sizes in units of 512 B; units < 512 map to their
 * own class (exact sizes up to 256 KiB), larger sizes to 512 sub-classes per
 * power of two (TLSF-style, at most 1/512 = 0.2% apart): small trees, see
 * free_index.c. */
#define CCAI_CLASS_SUB_BITS 9
#define CCAI_CLASS_SUB (1u << CCAI_CLASS_SUB_BITS)
/* row 0: the exact sizes below CCAI_CLASS_SUB units; row r >= 1: the power
 * of two 2^(r + SUB_BITS - 1) units; sizes are below 2^55 units */
#define CCAI_CLASS_ROWS (56 - CCAI_CLASS_SUB_BITS)
#define CCAI_CLASSES (CCAI_CLASS_ROWS * CCAI_CLASS_SUB)
#define CCAI_CLASS_WORDS (CCAI_CLASSES / 64)           /* the class bitmap   */
#define CCAI_CLASS_SUMMARY ((CCAI_CLASS_WORDS + 63) / 64) /* its non-empty words */
_Static_assert(CCAI_CLASS_SUMMARY <= 64, "the top word has a bit per summary word");
#define CCAI_CLASS_OVERFLOW 0xffffu /* b->cls of a block in the overflow list */
_Static_assert(CCAI_CLASSES < CCAI_CLASS_OVERFLOW, "a block keeps its class in 16 bits");

/* A node of a class's B+-tree (free_index.c). A leaf holds up to
 * CCAI_BT_MAX free blocks sorted by (size, address), with the keys inline so
 * that a search reads them without touching the blocks; an internal node
 * holds up to CCAI_BT_MAX children and, at 1..n-1, the separators: every key
 * under child[i-1] < (e[i].size, e[i].addr) <= every key under child[i].
 * An entry keeps its key and its block or child together: a small node's
 * entries share the header's cache line. */
#define CCAI_BT_MAX 16
typedef struct ccai_bentry {
    size_t size;
    uintptr_t addr;
    union {
        struct ccai_block *blk;   /* leaf     */
        struct ccai_bnode *child; /* internal */
    };
} ccai_bentry;
typedef struct ccai_bnode {
    uint16_t n; /* entries (leaf) or children (internal) */
    bool leaf;
    struct ccai_bnode *next; /* leaf: the next leaf of its tree; spare list */
    ccai_bentry e[CCAI_BT_MAX];
} ccai_bnode;

/* The free blocks of one stream in one pool: a B+-tree per size class, and
 * a three-level bitmap of the non-empty classes. */
typedef struct ccai_stream_bins {
    struct ccai_stream_bins *next; /* the index's list, newest first */
    cca_stream stream;
    size_t segments;                  /* segments of this stream in the pool  */
    uint64_t top;                      /* bit r: rows[r] != 0                 */
    uint64_t rows[CCAI_CLASS_SUMMARY]; /* bit w%64 of rows[w/64]: bitmap[w] != 0 */
    uint64_t bitmap[CCAI_CLASS_WORDS]; /* bit c%64 of bitmap[c/64]: class c non-empty */
    size_t trees;                      /* classes whose root is not NULL, counted
                                          where roots change (the check compares
                                          it with the bitmap)                  */
    ccai_bnode *roots[CCAI_CLASSES];
    ccai_block *recent;   /* the last block inserted, held outside the trees */
    ccai_block *overflow; /* blocks no tree node could be had for (host OOM) */
} ccai_stream_bins;

/* One slot of the streams' hash table: the key beside its bins, so that a
 * probe reads no bins it does not return. */
typedef struct ccai_stream_slot {
    cca_stream stream;
    ccai_stream_bins *bins; /* NULL: empty */
} ccai_stream_slot;

typedef struct ccai_free_index {
    ccai_stream_bins *streams; /* every stream's bins, newest first      */
    ccai_stream_bins *last;    /* the bins used last: the cached path's  */
    ccai_stream_slot *table;   /* stream -> bins, open addressing        */
    unsigned table_bits;       /* 2^table_bits slots, at most half full  */
    size_t nstreams;
    size_t count;
    size_t bytes;
    /* The last best fit found in a tree, its leaf and position, so that
     * taking it (remove) needs no second descent; NULL after any change to
     * the index. */
    ccai_block *hint;
    ccai_bnode *hint_leaf;
    unsigned hint_pos;
    /* The DEFERRED removal (the ghost): the block the last take found
     * through the hint, still in its leaf at ghost_pos under its old key
     * (ghost_size, ghost_addr), although it is no longer free and no longer
     * counted. The next operation that reads or changes a tree drops the
     * entry first (settles); a free that brings the same block back with the
     * same key (the cached pair) only forgets the ghost. NULL when none. */
    ccai_block *ghost;
    ccai_bnode *ghost_leaf;
    unsigned ghost_pos;
    unsigned ghost_cls;
    size_t ghost_size;
    uintptr_t ghost_addr;
    ccai_stream_bins *ghost_sb;
    ccai_bnode *spare; /* nodes kept for reuse, linked by next */
    size_t spare_count;
} ccai_free_index;

/* A segment of `stream` joins (attach) or leaves (detach) the pool: the
 * stream's bins exist while it has segments here, so inserting a free block
 * never allocates, and a stream's bins are freed with its last segment.
 * Cost: O(1) but for attach's table growth (doubling, so O(1) amortized)
 * and the last detach of a stream (O(streams): the list). Attach fails
 * (CCA_ERR_OUT_OF_MEMORY, nothing changed) when host memory is short. */
cca_status ccai_free_index_attach(ccai_free_index *ix, cca_stream stream);
void ccai_free_index_detach(ccai_free_index *ix, cca_stream stream);
void ccai_free_index_destroy(ccai_free_index *ix);
/* Insert b, FREE; if b is the index's ghost under the same key (the block
 * of the last take, back unchanged), its tree entry is simply kept. */
void ccai_free_index_insert(ccai_free_index *ix, ccai_block *b);
void ccai_free_index_remove(ccai_free_index *ix, ccai_block *b);
/* cca_alloc takes b, found by the last best fit on ix, whole: as remove,
 * but the tree entry's removal may be deferred (the ghost). */
void ccai_free_index_take(ccai_free_index *ix, ccai_block *b);
/* The cached pair's allocation: b (indexed, its size not yet reduced) leaves
 * the index (its entry possibly deferred, as in take) and rest, its free
 * remainder, enters it as the recent block. */
void ccai_free_index_split(ccai_free_index *ix, ccai_block *b, ccai_block *rest);
/* The cached pair's free: b (not in the index) is about to absorb its
 * successor n (in the index). If n is its stream's recent block, n leaves
 * the slot and true is returned: b returns to its deferred tree entry when
 * it is the ghost and b + n is the ghost's key, else b takes the slot; no
 * tree entry is added or dropped, and b is counted with n's bytes, which it
 * absorbs next. Otherwise nothing changes. */
bool ccai_free_index_swap_recent(ccai_free_index *ix, ccai_block *n, ccai_block *b);
/* Smallest block of `stream` with size >= size (ties: lowest address) whose
 * size is <= max_size; NULL if none. */
ccai_block *ccai_free_index_best_fit(ccai_free_index *ix, cca_stream stream, size_t size, size_t max_size);
size_t ccai_free_index_largest(const ccai_free_index *ix);
/* The largest run(b) over the free blocks b of ix, or `floor` when none is
 * larger, for a run() with run(b) <= b->size (stats.c: a block's longest
 * mapped stretch). Per stream: the recent block and the overflow list, then
 * the blocks largest first, stopping at the first one no larger than the
 * best run so far. Cost: per stream, the class bitmap's summary words and a
 * descent to the last leaf; then run() on each block visited: those larger
 * than the best run found before them (all the blocks larger than the
 * result, and ties on the way), plus one key read to stop. */
size_t ccai_free_index_largest_run(const ccai_free_index *ix, size_t (*run)(const ccai_block *b), size_t floor);
/* Walk every free block (for invariant checks; a ghost's entry is not one);
 * stops when fn returns false. */
bool ccai_free_index_walk(const ccai_free_index *ix, bool (*fn)(void *user, const ccai_block *b), void *user);
/* The index's own structure (trees ordered, filled and linked, bitmap and
 * classes consistent): NULL, or what is broken. check.c runs it. */
const char *ccai_free_index_check(const ccai_free_index *ix);

#endif /* CCA_FREE_INDEX_H */
