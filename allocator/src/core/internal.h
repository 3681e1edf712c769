/*
 * internal.h — data structures shared between the allocator's source files.
 *
 * Names: public cca_*; shared between files ccai_*, declared here under a
 * banner naming the file that defines them; private `static`.
 *
 * The picture (growth policy):
 *
 *   allocator
 *    ├─ segments (doubly linked, newest first)                  segment.c
 *    │    segment 0 [ base ............................................ size )
 *    │               ├─ block A live ─┼─ block B free ─┼─ block C live ─┤
 *    │               blocks of a segment form an address-ordered chain
 *    │               (prev/next) that tiles the segment exactly.
 *    ├─ free index per pool (small, medium, large; greedy uses "large"):
 *    │    per key stream, size classes each holding a B+-tree ordered by
 *    │    (size, address), and a bitmap of the non-empty classes. block_index.c
 *    ├─ live map: hash table address -> block, for cca_free in O(1). block_index.c
 *    └─ pending queues: per stream, the events pending frees wait on.  stream.c
 *
 * Files: pool.c alloc/free, split and coalesce; segment.c block records,
 * segment sizes, reserving and releasing, the greedy arena; stream.c which
 * streams use a block and deferred frees; block_index.c the two indexes;
 * release.c trim and empty-cache; expandable.c segments of mapped pages;
 * check.c invariants, bad-pointer diagnosis and the assertion levels; stats.c counters and snapshots; config.c options;
 * status.c status codes, messages and the log; upstream*.c device memory;
 * trace.c recording; history.c the ring of recent events; snapshot_torch.c
 * the snapshot in PyTorch's format; lock.c the allocator's lock.
 *
 * Invariants: one table, support/invariants.h (id, statement, what it
 * applies to, where it is checked; the rows in invariants.c). The walker
 * (check.c: cca_check_invariants, and after every public call when built
 * with CCA_DEBUG=2) reports by its ids; docs/allocator.md holds its rows.
 */
#ifndef CCA_INTERNAL_H
#define CCA_INTERNAL_H

#include "ccalloc.h"

#include <locale.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ccai_utf8.h" /* common/: ccai_utf8_len, the snapshot writers' check on names */

#include "../support/support.h"   /* assertions, status, log, the fork registry's link */
#include "../upstream/upstream.h" /* the upstream wrapper and vm ranges (no allocator type) */

/* ------------------------------------------------------------------------ */
/* Blocks and segments                                                      */
/* ------------------------------------------------------------------------ */

typedef enum ccai_block_state { CCAI_FREE = 0, CCAI_LIVE = 1, CCAI_PENDING = 2 } ccai_block_state;

/* small: requests <= small_max in small_segment segments; medium: requests
 * < large_min in medium_segment segments; large: requests >= large_min, each
 * in a segment of its own (and the greedy arena); arena: a domain's
 * footprint arena (cca_domain_reserve, domain.c), requests of any size. */
typedef enum ccai_pool_kind {
    CCAI_POOL_SMALL = 0,
    CCAI_POOL_MEDIUM = 1,
    CCAI_POOL_LARGE = 2,
    CCAI_POOL_ARENA = 3,
    CCAI_POOL_COUNT = 4
} ccai_pool_kind;
_Static_assert(CCAI_POOL_COUNT <= 4, "a block keeps its pool kind in two bits (CCAI_SEG_POOL_SHIFT)");

struct ccai_segment;
struct ccai_block;

/* Which streams own and use a block: ONE model, described in full in
 * stream.c. In short:
 *   key    the stream whose free index holds the block while it is FREE:
 *          its segment's stream (NULL for the greedy arena, shared by all).
 *          b->stream is a copy of b->segment->stream, kept in the block
 *          because every index operation reads it.
 *   users  the streams whose queued work may still touch a LIVE block: the
 *          stream of the cca_alloc call (b->alloc_stream) and every stream
 *          named by cca_record_stream (uses->streams).
 * At cca_free a block is reused at once when every user is ordered before
 * the next user of its key (user == key, outside an arena: an arena's next
 * user may be any stream, and no two streams are ordered, NULL included);
 * otherwise an event is recorded on each other user and the block is
 * PENDING until all have completed. */
typedef struct ccai_wait {
    struct ccai_wait *next; /* FIFO of the stream's pending queue        */
    struct ccai_block *block;
    cca_stream stream;
    void *event;
} ccai_wait;

typedef struct ccai_stream_use {
    cca_stream *streams; /* users beyond alloc_stream (cca_record_stream) */
    size_t count, cap;
    ccai_wait *waits;     /* one per event recorded at free               */
    size_t wait_count;
    size_t outstanding;   /* waits whose events have not completed yet    */
} ccai_stream_use;

/* What a block knows of its segment without reading it (b->seg): the
 * segment's fixed properties, copied into every block of it, so that the
 * cached alloc+free pair never loads the segment record (a cache miss per
 * pair once thousands of segments are live: docs/allocator.md, "Speed"). */
enum {
    CCAI_SEG_EXPANDABLE = 1, /* s->expandable                                 */
    CCAI_SEG_SHARED = 2,     /* s->shared (the greedy arena)                   */
    CCAI_SEG_ROOT = 4,       /* s->domain is the root domain: s->index is
                                &a->root.pools[pool], found without s       */
    CCAI_SEG_POOL_SHIFT = 4  /* bits 4-5: s->pool                              */
};

typedef struct ccai_block {
    /* first cache line (records are 128 bytes, 64-aligned in their slabs):
     * everything best fit, a cached alloc+free pair and a neighbour's merge
     * check read; the second line is written by an alloc and read by a
     * free, never read before it */
    size_t size; /* multiple of CCA_GRANULARITY */
    uintptr_t addr;
    struct ccai_segment *segment;
    struct ccai_block *prev, *next; /* address order within the segment     */
    cca_stream stream;              /* key stream (= segment->stream)       */
    size_t requested;               /* what the caller asked for (LIVE/PENDING) */
    uint16_t cls;                   /* FREE: size class of its tree, or
                                       CCAI_CLASS_OVERFLOW                  */
    uint8_t state;                  /* FREE / LIVE / PENDING               */
    bool unmapped;   /* FREE, expandable segment: some of its pages may be
                        unmapped, so an allocation from it asks the page
                        bitmap; false: every page under it is mapped and no
                        page test is needed (I7). Meaningless while LIVE or
                        PENDING (those pages are mapped): cleared when the
                        block is freed, in the same store as `state`. Never
                        set in a classic segment. */
    bool needs_sync; /* PENDING: no event could be recorded and synchronize
                        failed; reused only after a synchronize succeeds  */
    uint8_t seg;     /* CCAI_SEG_*: its segment's fixed properties        */
    /* second line: the live map, streams, sequence numbers, rarer lists */
    cca_stream alloc_stream;                  /* stream of the cca_alloc call   */
    struct ccai_block *hash_next;             /* live map chain                 */
    ccai_stream_use *uses;                    /* NULL unless record_stream or a wait */
    uint64_t id;                              /* the trace's id of the allocation (tracing only) */
    uint64_t born;                            /* alloc_calls when it was handed out */
    struct ccai_block *over_prev, *over_next; /* free index overflow list    */
    struct ccai_block *sync_next;             /* list of blocks waiting on needs_sync */
} ccai_block;
_Static_assert(offsetof(ccai_block, alloc_stream) == 64, "a block's first cache line holds its hot fields");
_Static_assert(sizeof(ccai_block) == 128, "a block record is two cache lines");

typedef struct ccai_segment {
    uintptr_t base;
    size_t size; /* classic: bytes reserved; expandable: address space     */
    cca_stream stream; /* every block in it belongs to this stream; the
                          greedy arena is shared (shared = true)          */
    bool shared;
    bool expandable; /* pages of a reserved address range (expandable.c) */
    ccai_pool_kind pool;
    /* expandable only: which pages are mapped (bit i: [base + i*page, +page)) */
    size_t page;         /* the upstream's granularity (a power of two)   */
    unsigned page_shift; /* log2(page): a page number is a shift, not a division */
    uintptr_t mapped_end; /* the end of the mapped prefix: pages from base
                             to here are all mapped, the page here is not
                             (or it is base + size). The cached alloc's test
                             of its pages is one compare when they end
                             inside it                                      */
    size_t npages;       /* size / page                                   */
    size_t pages_hi;     /* one past the highest page ever mapped (never
                            falls): no bit is set above it, so the
                            invariant walks (check.c) stop there and a
                            range of billions of pages costs what it used */
    size_t mapped_pages; /* bits set                                      */
    uint64_t *mapped;    /* npages bits                                   */
    /* over whole maps (CCA_VM_WHOLE_MAPS) only, else NULL: bit i set when
     * page i is the first of a map (one vm_map call, one physical
     * allocation, unmapped only whole); the same allocation as `mapped`,
     * the words after it. A map runs from its start bit up to the next
     * start bit or unmapped page (I9, check.c)                            */
    uint64_t *starts;
    size_t map_pages;    /* whole maps: the most pages one map holds (expandable_chunk; 0: no limit) */

    struct cca_domain *domain; /* its owner (domain.c); never changes      */
    struct ccai_segment *dprev, *dnext; /* the owner's segments (domain.c) */
    struct ccai_free_index *index; /* = &domain->pools[pool]: where its free
                                  blocks are indexed (one load on free)   */
    ccai_block *first; /* lowest-address block                          */
    struct ccai_segment *prev, *next;
} ccai_segment;

/* ------------------------------------------------------------------------ */
/* free_index.c: the free-block index (version 2)                          */
/* ------------------------------------------------------------------------ */

/* Segregated classes: sizes in units of 512 B; units < 512 map to their
 * own class (exact sizes up to 256 KiB), larger sizes to 512 sub-classes per
 * power of two (TLSF-style, at most 1/512 = 0.2% apart): small trees, see
 * block_index.c. */
#define CCAI_CLASS_SUB_BITS 9
#define CCAI_CLASS_SUB (1u << CCAI_CLASS_SUB_BITS)
/* row 0: the exact sizes below CCAI_CLASS_SUB units; row r >= 1: the power
 * of two 2^(r + SUB_BITS - 1) units; sizes are below 2^55 units */
#define CCAI_CLASS_ROWS (56 - CCAI_CLASS_SUB_BITS)
#define CCAI_CLASSES (CCAI_CLASS_ROWS * CCAI_CLASS_SUB)
#define CCAI_CLASS_WORDS (CCAI_CLASSES / 64)           /* the class bitmap   */
#define CCAI_CLASS_SUMMARY ((CCAI_CLASS_WORDS + 63) / 64) /* its non-empty words */
#define CCAI_CLASS_OVERFLOW 0xffffu /* b->cls of a block in the overflow list */
_Static_assert(CCAI_CLASSES < CCAI_CLASS_OVERFLOW, "a block keeps its class in 16 bits");

/* A node of a class's B+-tree (block_index.c). A leaf holds up to
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
 * a two-level bitmap of the non-empty classes. */
typedef struct ccai_stream_bins {
    struct ccai_stream_bins *next;
    cca_stream stream;
    size_t segments;                  /* segments of this stream in the pool  */
    uint64_t rows[CCAI_CLASS_SUMMARY]; /* bit w%64 of rows[w/64]: bitmap[w] != 0 */
    uint64_t bitmap[CCAI_CLASS_WORDS]; /* bit c%64 of bitmap[c/64]: class c non-empty */
    size_t trees;                      /* classes whose root is not NULL, counted
                                          where roots change (the check compares
                                          it with the bitmap)                  */
    ccai_bnode *roots[CCAI_CLASSES];
    ccai_block *recent;   /* the last block inserted, held outside the trees */
    ccai_block *overflow; /* blocks no tree node could be had for (host OOM) */
} ccai_stream_bins;

typedef struct ccai_free_index {
    ccai_stream_bins *streams; /* most recently used first */
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
 * never allocates, and a stream's bins are freed with its last segment. */
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

/* ------------------------------------------------------------------------ */
/* free_index_v1.c: the free index, version 1 (sorted bins; read it first)  */
/* ------------------------------------------------------------------------ */

/* The same questions as ccai_free_index (version 2) over the same blocks,
 * answered from per-stream bins of sorted arrays; no block field is
 * written. Not on the allocator's path: the tests run it against v2. A
 * zeroed struct is an empty index. */
typedef struct ccai_v1_stream ccai_v1_stream; /* a stream's bins */
typedef struct ccai_free_index_v1 {
    ccai_v1_stream *streams;
    size_t count; /* blocks indexed */
    size_t bytes; /* their total size */
} ccai_free_index_v1;

cca_status ccai_free_index_v1_attach(ccai_free_index_v1 *ix, cca_stream stream);
void ccai_free_index_v1_detach(ccai_free_index_v1 *ix, cca_stream stream);
void ccai_free_index_v1_destroy(ccai_free_index_v1 *ix);
/* Insert and split fail (CCA_ERR_OUT_OF_MEMORY, nothing changed) when a
 * bin's array cannot grow; v2's never fail. */
cca_status ccai_free_index_v1_insert(ccai_free_index_v1 *ix, ccai_block *b);
void ccai_free_index_v1_remove(ccai_free_index_v1 *ix, ccai_block *b);
void ccai_free_index_v1_take(ccai_free_index_v1 *ix, ccai_block *b); /* = remove */
cca_status ccai_free_index_v1_split(ccai_free_index_v1 *ix, ccai_block *b, ccai_block *rest);
bool ccai_free_index_v1_swap_recent(ccai_free_index_v1 *ix, ccai_block *n, ccai_block *b); /* always false */
ccai_block *ccai_free_index_v1_best_fit(ccai_free_index_v1 *ix, cca_stream stream, size_t size, size_t max_size);
size_t ccai_free_index_v1_largest(const ccai_free_index_v1 *ix);
size_t ccai_free_index_v1_largest_run(const ccai_free_index_v1 *ix, size_t (*run)(const ccai_block *b), size_t floor);
bool ccai_free_index_v1_walk(const ccai_free_index_v1 *ix, bool (*fn)(void *user, const ccai_block *b), void *user);
const char *ccai_free_index_v1_check(const ccai_free_index_v1 *ix);

/* ------------------------------------------------------------------------ */
/* The allocator                                                            */
/* ------------------------------------------------------------------------ */

typedef struct ccai_block_slab {
    struct ccai_block_slab *next;
    _Alignas(64) ccai_block blocks[]; /* each record on two whole cache lines */
} ccai_block_slab;

typedef struct ccai_counters {
    size_t allocated, allocated_peak;
    size_t requested, requested_peak;
    size_t reserved, reserved_peak;
    size_t active, active_peak;
    size_t pending;
    size_t segments, segments_peak;
    size_t address_space; /* address space of expandable segments          */
    size_t mapped;        /* bytes mapped in expandable segments (in reserved) */
    size_t expandable_segments;
    uint64_t alloc_calls, free_calls, upstream_allocs, upstream_frees;
    uint64_t vm_maps, vm_unmaps, pages_mapped, pages_unmapped;
    uint64_t retries, ooms, splits, merges;
    uint64_t peak_holds; /* growth requests held under the reserved peak (hold_peak, pool.c) */
} ccai_counters;

struct ccai_trace;

/* What one domain holds (domain.c): the allocator's counters, restricted to
 * the domain's segments and blocks. Their sums over the domains are the
 * allocator's (checked by cca_check_invariants). allocated, requested,
 * active and alloc_calls only while a->domains_tracked. */
typedef struct ccai_domain_counters {
    size_t allocated, allocated_peak;
    size_t requested, requested_peak;
    size_t reserved, reserved_peak;
    size_t active, active_peak;
    size_t segments;
    uint64_t alloc_calls, upstream_allocs, upstream_frees;
} ccai_domain_counters;

/* A domain: an owner of segments (domain.c). Its free blocks are indexed in
 * its own pools, so best fit never crosses domains. The default domain is
 * embedded in the allocator (root); the others follow it in a list, in
 * creation order. A domain that owns segments is also on the allocator's
 * `holding` list, so what sums over domains (stats) costs the domains that
 * hold memory, not every domain ever made. */
struct cca_domain {
    struct cca_domain *prev, *next;
    struct cca_domain *hprev, *hnext; /* a->holding, while segs != NULL */
    struct ccai_segment *segs;        /* its segments, by dnext */
    char name[CCA_DOMAIN_NAME_MAX + 1];
    ccai_free_index pools[CCAI_POOL_COUNT];
    ccai_domain_counters c;
    struct ccai_segment *arena; /* cca_domain_reserve's arena, or NULL */
    unsigned trace_no;          /* its number in CCALLOC_TRACE's file (0: the default domain) */
    uintptr_t handle;           /* what the caller holds (domain.c); 0 for the default domain */
};

/* The events pending frees wait on, per stream, in the order recorded. Work
 * on one stream completes in order, so polling stops at the first event of a
 * queue that is not complete: cca_alloc does one query per stream that has
 * pending frees, plus one per wait that completed (stream.c). */
typedef struct ccai_pending_queue {
    struct ccai_pending_queue *next;
    cca_stream stream;
    ccai_wait *head, *tail;
} ccai_pending_queue;

/* The allocator lock (lock.c; fast paths inline below). Two protocols,
 * fixed when the lock is made:
 *   asymmetric: state 0 free, 1 held; `sleepers` counts waiters that may
 *               sleep in the kernel; unlock is a plain store;
 *   symmetric:  state 0 free, 1 held, 2 held with waiters sleeping in the
 *               kernel (Drepper's mutex 2); unlock is an atomic decrement. */
typedef struct ccai_mutex {
    _Atomic int state;
    _Atomic int sleepers; /* asymmetric only */
    bool asymmetric;      /* written once, before any thread can use the lock */
    /* How the holder unlocks, the one byte the unlock tests first:
     * CCAI_UNLOCK_STORE (asymmetric) or CCAI_UNLOCK_DECREMENT (symmetric),
     * set with `asymmetric`, plus CCAI_UNLOCK_LOG while the holder holds its
     * thread's log (ccai_mutex_hold_log), which sends the unlock out of line
     * to release it. Read and written by the holder only (and ccai_mutex_init). */
    uint8_t unlock;
    /* Re-entry: while the holder calls upstream ops (set with the log's
     * mark, cleared by its unlock), its thread's token (&ccai_this_thread),
     * else NULL. An op that calls back into the allocator on its own thread
     * takes the contended path, finds its own token here and is refused
     * instead of waiting for ever (ccai_mutex_lock). Written by the holder
     * only; a thread reads its own token here only while it holds the lock
     * itself, so relaxed accesses are enough. */
    _Atomic(const void *) owner;
} ccai_mutex;
enum { CCAI_UNLOCK_STORE = 0, CCAI_UNLOCK_DECREMENT = 1, CCAI_UNLOCK_LOG = 2 };

/* fork.c's registry: every allocator and upstream is on a list from its
 * creation to its destruction, so the fork handler can take its locks. */
void ccai_fork_register_allocator(cca_allocator *a);   /* cca_create, once it succeeds */
void ccai_fork_unregister_allocator(cca_allocator *a); /* cca_destroy, first; a no-op if never registered */
/* plug.c: its lock, taken first before a fork (a device's creation holds it
 * across cca_create) and released last after it. */
void ccai_plug_fork_lock(bool lock);

struct cca_allocator {
    ccai_mutex lock;
    cca_config config;
    cca_upstream *upstream;
    const struct ccai_kind *kind; /* its segments' kind (kind.h): chosen by cca_create, never changed */
    bool medium_pool;        /* config.medium_pool and the kind has the pool (ccai_pool_of) */
    bool expandable;         /* kind is pages (for the reports: stats, snapshots) */
    size_t page;             /* the upstream's granularity when expandable */
    bool peak_hold;          /* one request of hold_peak:1 grows: reserved_peak is a
                                cap beside max_reserved (ccai_cap; pool.c, alloc_locked) */
    bool peak_rising;        /* that request raises the peak: no ahead pages (expandable.c) */
    uint64_t release_frees;  /* upstream frees (segments, unmaps) made by ccai_release:
                                what a hold gave back of the cache, told apart from a
                                refused map's undo, also an unmap (pool.c, hold) */
    bool whole_maps;         /* expandable over CCA_VM_WHOLE_MAPS (expandable.c) */
    size_t max_request;      /* larger requests are CCA_ERR_INVALID_ARGUMENT: their rounding would overflow */
    size_t device_total;     /* upstream's total bytes; 0 = unknown (segment.c) */
    bool device_total_known; /* asked once */
    ccai_segment *segments;  /* list head */
    struct cca_domain root;  /* the default domain, head of the domain list */
    /* The domain the call in progress serves: set under the lock by
     * cca_alloc_in and cca_domain_reserve, root otherwise. New segments
     * belong to it and best fit looks in its pools. */
    struct cca_domain *serving;
    /* The public function in progress that allocates ("cca_alloc" or
     * "cca_alloc_in"), set with `serving`, for its failure messages. */
    const char *allocating;
    /* Per-domain allocated/requested/active counts are kept only from the
     * first cca_domain_create on (then the default domain's start as the
     * allocator's): a program without domains pays one branch per call.
     * Reserved bytes, segments and upstream calls are always counted. */
    bool domains_tracked;
    struct cca_domain *last;    /* the domain list's tail (root when alone) */
    struct cca_domain *holding; /* domains that own segments (domain.c) */
    /* The domains besides root, an open-addressing set keyed by their
     * handles (domain.c): a handle is looked up in O(1) without reading it. */
    struct {
        struct cca_domain **slot;
        size_t cap, count; /* cap: 0 or a power of two, count <= cap / 2 */
    } domain_set;
    ccai_live_map live;
    ccai_pending_queue *queues; /* pending waits by stream (stream.c) */
    ccai_block *sync_head;      /* pending blocks that need a synchronize */
    ccai_block *spare_blocks;   /* recycled block records */
    ccai_block_slab *slabs;
    ccai_counters c;
    struct ccai_trace *trace;
    struct ccai_history *history; /* recent events (history.c); NULL: off */
    ccai_fork_link fork;          /* fork.c's registry; under its lock */
    bool fork_locked;             /* fork.c's prepare took lock (not: the forking thread held it, in an op) */
};

/* segment.c */
ccai_block *ccai_block_new_slab(cca_allocator *a); /* block.c: a new slab, then as below */

/* A segment's fixed properties as its blocks carry them (b->seg). */
static inline uint8_t ccai_segment_flags(const cca_allocator *a, const ccai_segment *s) {
    return (uint8_t)((s->expandable ? CCAI_SEG_EXPANDABLE : 0) | (s->shared ? CCAI_SEG_SHARED : 0) |
                     (s->domain == &a->root ? CCAI_SEG_ROOT : 0) | ((unsigned)s->pool << CCAI_SEG_POOL_SHIFT));
}
static inline ccai_pool_kind ccai_block_pool(const ccai_block *b) {
    return (ccai_pool_kind)((b->seg >> CCAI_SEG_POOL_SHIFT) & 3);
}
/* The free index that holds b while it is free: = b->segment->index, found
 * without loading the segment record for blocks of the root domain. */
static inline struct ccai_free_index *ccai_block_index(cca_allocator *a, const ccai_block *b) {
    return b->seg & CCAI_SEG_ROOT ? &a->root.pools[ccai_block_pool(b)] : b->segment->index;
}
/* No live or pending block in s. Free neighbours always merge (I2), so an
 * empty segment is one free block. O(1). */
static inline bool ccai_segment_empty(const ccai_segment *s) {
    return s->first->state == CCAI_FREE && !s->first->next;
}
/* Live and pending blocks of s and their bytes: a walk of its blocks, for
 * the release report, snapshots and domain checks (the cached path keeps no
 * per-segment counter: it would load the segment record on every pair). */
void ccai_segment_live(const ccai_segment *s, size_t *blocks, size_t *bytes);

/* Preferred and least segment sizes for a growth-policy request; a least
 * size over the ceiling (as known) shrinks to it, never below `rounded`. */
void ccai_segment_sizes(const cca_allocator *a, size_t rounded, ccai_pool_kind pool, size_t *want, size_t *least);
/* CCA_OK when `bytes` more fit under max_reserved now (or there is no
 * cap); else CCA_ERR_OUT_OF_MEMORY, "max_reserved (N) would be exceeded".
 * Asked before any upstream call for memory the cap would refuse: a
 * segment, a map, and a range whose least map it would refuse. */
cca_status ccai_cap_room(const cca_allocator *a, size_t bytes);
/* The cap on reserved bytes now: max_reserved, or the reserved peak while a
 * request of hold_peak:1 is held under it (the lower of the two); 0 = none. */
static inline size_t ccai_cap(const cca_allocator *a) {
    size_t cap = a->config.max_reserved, peak = a->c.reserved_peak;
    return a->peak_hold && (!cap || peak < cap) ? peak : cap;
}
/* Names that cap for a message: "max_reserved (N)" or "the reserved peak (N, hold_peak)". */
const char *ccai_cap_name(const cca_allocator *a, char *buf, size_t len);
/* Shared by classic and expandable segments: new = the bookkeeping before
 * the upstream call (discard undoes it), link = after it granted [base,
 * base + size) (counts the call and the segment), unlink = after the
 * upstream took the segment back (frees it). */
cca_status ccai_segment_new(cca_allocator *a, cca_stream stream, ccai_pool_kind pool, bool shared, size_t words,
                            ccai_segment **out);
void ccai_segment_discard(cca_allocator *a, ccai_segment *s);
void ccai_segment_link(cca_allocator *a, ccai_segment *s, uintptr_t base, size_t size);
void ccai_segment_unlink(cca_allocator *a, ccai_segment *s);
/* The largest segment that could ever be reserved: min(device total,
 * max_reserved), SIZE_MAX when neither is known. */
size_t ccai_segment_ceiling(cca_allocator *a);
/* The same for what a request or an arena may ask: with expandable
 * segments also no range over CCAI_ADDRESS_BUDGET (expandable.c), whatever
 * the device's size, known or not. */
size_t ccai_request_ceiling(cca_allocator *a);
cca_status ccai_arena_reserve(cca_allocator *a);
ccai_segment *ccai_arena_find(const cca_allocator *a);

/* expandable.c: segments whose pages are mapped on demand */
/* The address range of a growth segment is the ceiling (device total or
 * max_reserved); when neither is known, this. */
#define CCAI_EXPANDABLE_DEFAULT_RANGE ((size_t)64 << 30)
/* The address space an allocator's growth ranges may hold before new ranges
 * shrink (pool.c, expandable_take): a quarter of a 47-bit user space, so
 * that ranges for many (domain, stream, pool) never starve the rest of the
 * process (malloc, thread stacks, other allocators) of addresses. */
#define CCAI_ADDRESS_BUDGET ((size_t)32 << 40)
/* No one range is larger: a request or an arena whose pages pass it can
 * never succeed (ccai_request_ceiling), and ccai_expandable_reserve refuses
 * it before its bookkeeping, whose page bitmap alone is va / page / 8 bytes
 * of host memory (2^45 for a range near SIZE_MAX in 64 KiB pages). */
/* A new expandable segment for (stream, pool): address space only, one free
 * block over all of it. greedy: the arena, every page mapped. */
cca_status ccai_expandable_reserve(cca_allocator *a, size_t va, cca_stream stream, ccai_pool_kind pool, bool shared,
                                   ccai_segment **out);
/* Unmap every page and give the address range back (it is empty). */
cca_status ccai_expandable_release(cca_allocator *a, ccai_segment *s);
/* The next run of mapped pages in [*i, end): true with [*first, *first +
 * *n) and *i past it; false when none is left. */
bool ccai_next_mapped_run(const ccai_segment *s, size_t *i, size_t end, size_t *first, size_t *n);
/* The first unmapped page at or after page `from` of pages all mapped from
 * `from` on (npages if none): a word at a time. */
size_t ccai_pages_prefix(const ccai_segment *s, size_t from);
/* Are the pages under [addr, addr + len) all mapped? (len > 0) Inline: an
 * expandable segment's cached alloc asks it once; a block under 64 pages
 * that starts in the right place needs one bitmap word. */
static inline bool ccai_pages_mapped(const ccai_segment *s, uintptr_t addr, size_t len) {
    if (addr + len <= s->mapped_end)
        return true;
    size_t p0 = (addr - s->base) >> s->page_shift, p1 = ((addr + len - 1 - s->base) >> s->page_shift) + 1;
    while (p0 < p1) { /* [p0, p1), a word at a time */
        size_t lo = p0 % 64, n = p1 - p0 < 64 - lo ? p1 - p0 : 64 - lo;
        uint64_t want = (~(uint64_t)0 >> (64 - n)) << lo;
        if ((s->mapped[p0 / 64] & want) != want)
            return false;
        p0 += n;
    }
    return true;
}
/* Are the first `held` bytes of free block b, marked b->unmapped, on mapped
 * pages? When the whole block is, the mark is dropped first (a mark is
 * conservative: a split remainder inherits it, a merge ORs it), so the
 * block's next allocation skips the test. */
static inline bool ccai_block_pages_mapped(ccai_block *b, size_t held) {
    if (ccai_pages_mapped(b->segment, b->addr, b->size)) {
        b->unmapped = false;
        return true;
    }
    return ccai_pages_mapped(b->segment, b->addr, held);
}
/* The device's free memory, asked of the upstream (mem_info; CUDA:
 * cudaMemGetInfo) at most once per step that needs it, and only by those
 * that would otherwise cost calls for memory the device cannot give
 * (expandable.c, "the device's free memory"). Start with {false, 0}. */
typedef struct ccai_device_room {
    bool asked;  /* mem_info was asked */
    size_t free; /* its free bytes; SIZE_MAX when unknown (no mem_info, or it failed) */
} ccai_device_room;
/* CCA_OK when the device's free memory (asked now unless room->asked) is
 * unknown or holds `bytes`; else CCA_ERR_OUT_OF_MEMORY, "the device has F
 * bytes free, N needed for <what>; nothing was reserved or mapped". A
 * mem_info that fails leaves the thread's message as it was. */
cca_status ccai_device_room_for(cca_allocator *a, ccai_device_room *room, size_t bytes, const char *what);

#include "kind.h" /* the segment-kind seam: classic.c, pages.c */
/* Map the pages a request of `rounded` bytes at free block b needs (and,
 * at the growing end, some ahead: the growth rule). `room`: the device's
 * free memory, asked already or not (it is asked here for a block that
 * lacks several runs of pages). OOM: nothing changed. */
cca_status ccai_expandable_map(cca_allocator *a, ccai_block *b, size_t rounded, ccai_device_room *room);
/* Unmap the pages lying wholly inside free block b, highest first, until
 * reserved <= keep; counts into pages and bytes. The caller synchronized. */
cca_status ccai_expandable_unmap_free(cca_allocator *a, ccai_block *b, size_t keep, size_t *pages, size_t *bytes);
/* Free bytes of b that sit in mapped pages it shares with a live block
 * (whole maps: in maps it shares with one). */
size_t ccai_expandable_trapped(const ccai_block *b);
/* Whole maps: how many of pages [first, last] of free block b stay mapped
 * once every free map is unmapped (those of the maps at b's two ends that
 * reach past b: a live or pending neighbour holds them whole). */
size_t ccai_expandable_kept_pages(const ccai_block *b, size_t first, size_t last);
/* I9 (whole maps; NULL when s has no start bits or holds): a message
 * naming the broken rule. O(pages_hi / 64 + maps). */
const char *ccai_expandable_check_maps(const ccai_segment *s);
/* The mapped bytes of s that no release can give back while its live and
 * pending blocks stay: the pages they touch (whole maps: the maps). */
size_t ccai_expandable_held(const ccai_segment *s);
/* The longest stretch of free block b that lies in mapped pages. */
size_t ccai_expandable_largest_mapped(const ccai_block *b);
/* cca_destroy's part: unmap s's pages and release its range (a refusal
 * sets *result to CCA_ERR_UPSTREAM), or, with keep_mapped (the device could
 * not be synchronized), touch no range that has pages mapped. Frees the
 * bitmap either way. */
void ccai_expandable_destroy(cca_allocator *a, ccai_segment *s, bool keep_mapped, cca_status *result);

/* stream.c */
/* At cca_free: true = b is now PENDING (or waits for a synchronize), false =
 * reuse it now. *st is set when the waits could not be set up and a fallback
 * synchronize failed: b is then held until a later synchronize succeeds. */
bool ccai_stream_defer_free(cca_allocator *a, ccai_block *b, cca_status *st);
/* Complete pending frees whose events finished, in bounded work: one query
 * per stream with pending frees plus one per completed wait. */
void ccai_stream_poll_queues(cca_allocator *a);
/* Step 3 of an allocation: complete the deferred frees whose events are done.
 * Inline so that the usual case, no queue at all, is one load. */
static inline void ccai_stream_poll(cca_allocator *a) {
    if (a->queues)
        ccai_stream_poll_queues(a);
}
/* Synchronize the device and complete every pending free that can be.
 * Returns the synchronize's status (pending blocks stay pending on failure). */
cca_status ccai_stream_wait_all(cca_allocator *a);
/* Synchronize the device even when no free is pending, then complete every
 * pending free: before free pages are unmapped, since work queued on the
 * stream that freed a block may still use its memory. A failure: the
 * thread's message set, nothing completed. */
cca_status ccai_stream_sync_device(cca_allocator *a);
/* After a successful synchronize: complete every pending free that can be. */
void ccai_stream_complete_all(cca_allocator *a);
cca_status ccai_stream_record(ccai_block *b, cca_stream s);
/* Free a block's stream-use record and events (destroy, or reuse). */
void ccai_stream_use_free(cca_allocator *a, ccai_block *b);
void ccai_stream_destroy(cca_allocator *a);

/* domain.c */
/* Set up / tear down the default domain (cca_create, cca_destroy), and
 * free every other domain's record (cca_destroy, after the segments). */
void ccai_domain_init_root(cca_allocator *a);
void ccai_domain_destroy_all(cca_allocator *a);
/* The domain record a caller's handle names: NULL names the default domain
 * (&a->root); NULL is returned for a handle that is not one of a's live
 * domains (another allocator's, destroyed, garbage). The caller holds the
 * lock. O(1) expected; the handle is never read. */
struct cca_domain *ccai_domain_lookup(const cca_allocator *a, const cca_domain *handle);
/* What the caller is given for record d (NULL for the default domain). */
static inline cca_domain *ccai_domain_handle(const struct cca_domain *d) {
    return (cca_domain *)d->handle;
}
/* Is record d one of a's domains? (check.c) */
bool ccai_domain_valid(const cca_allocator *a, const struct cca_domain *d);
/* A segment joins / leaves its domain's list (ccai_segment_link/unlink). */
void ccai_domain_add_segment(cca_allocator *a, struct ccai_segment *s);
void ccai_domain_remove_segment(cca_allocator *a, struct ccai_segment *s);
/* Every domain's stats as a JSON array (snapshot; the caller holds the lock). */
void ccai_domain_stats_json(const cca_allocator *a, FILE *f);
/* d's position in the allocator's list: 0 the default domain, then in
 * creation order; its index in the snapshots' domain arrays and PyTorch's
 * segment_pool_id (0, k). O(domains). */
unsigned ccai_domain_number(const cca_allocator *a, const struct cca_domain *d);

/* alloc.c: best fit, for the slow path (grow.c) and pages' grow */
/* In the serving domain's pools (a large request also looks in the medium
 * pool): the smallest block of `key` >= rounded, lowest address on ties. */
ccai_block *ccai_best_fit(cca_allocator *a, ccai_pool_kind pool, cca_stream key, size_t rounded);
/* The serving domain's footprint arena, which step 4 asks first: best fit
 * at any size and stream; NULL without an arena. */
static inline ccai_block *ccai_arena_fit(cca_allocator *a, size_t rounded) {
    struct cca_domain *d = a->serving;
    return d->arena ? ccai_free_index_best_fit(&d->pools[CCAI_POOL_ARENA], NULL, rounded, SIZE_MAX) : NULL;
}

/* grow.c: the slow path */
/* Step 5 of cca_alloc: a block for a request no cached block served
 * (`refused`: step 4's block could not get its pages); the chain 5a-5d. */
cca_status ccai_grow(cca_allocator *a, size_t size, size_t rounded, cca_stream stream, ccai_pool_kind pool,
                     bool refused, ccai_block **b);
/* Step 5a: CCA_ERR_OUT_OF_MEMORY for a request that can never succeed. */
cca_status ccai_grow_never_succeeds(cca_allocator *a, size_t size, size_t rounded, ccai_pool_kind pool);
/* One retry's request: a block (arena false), or a domain's footprint
 * arena of `rounded` bytes (arena true). */
typedef struct ccai_grow_req {
    size_t rounded;
    cca_stream stream;
    ccai_pool_kind pool;
    bool arena;
} ccai_grow_req;
/* The one retry (counted in alloc_retries): synchronize, release, take
 * again (grow.c has the steps). *b: the block (unset for an arena). */
cca_status ccai_grow_retry(cca_allocator *a, const ccai_grow_req *q, ccai_block **b);
/* Step 5d: counts the OOM, records it in the history, and formats the
 * log line written after the unlock. */
void ccai_grow_log_oom(cca_allocator *a, size_t size, size_t rounded, cca_stream stream, ccai_deferred_log *log);

/* Which pool serves a request of `rounded` bytes (segment.c has the table). */
static inline ccai_pool_kind ccai_pool_of(const cca_allocator *a, size_t rounded) {
    const cca_config *c = &a->config;
    if (c->policy == CCA_POLICY_GREEDY)
        return CCAI_POOL_LARGE;
    if (c->small_pool && rounded <= c->small_max)
        return CCAI_POOL_SMALL;
    if (a->medium_pool && rounded < c->large_min)
        return CCAI_POOL_MEDIUM; /* pages: medium requests share the large range (kind.h) */
    return CCAI_POOL_LARGE;
}
/* A LIVE or PENDING block rejoins its pool, coalescing with free neighbours
 * (ccai_pool_return removes it from the live map; _unlinked: done already). */
void ccai_pool_return(cca_allocator *a, ccai_block *b);
void ccai_pool_return_unlinked(cca_allocator *a, ccai_block *b);

/* check.c */
/* NULL when every invariant holds, else the first broken one (lock held). */
const char *ccai_check_locked(const cca_allocator *a);
/* Why is ptr not a live block? Sets the message (lock held). */
cca_status ccai_diagnose_pointer(cca_allocator *a, const void *ptr, const char *who);

/* release.c */
/* Keep the first failure of a walk that goes on (its status and message). */
static inline void ccai_note_error(cca_status st, cca_status *first, char *why, size_t len) {
    if (st != CCA_OK && *first == CCA_OK) {
        *first = st;
        snprintf(why, len, "%s", cca_last_error());
    }
}
/* Everything releasable, for trim and the OOM retry: the free pages at the
 * growing end of expandable segments, then whole free classic segments
 * largest first, then the other free pages of expandable segments, then
 * expandable segments left empty, until reserved <= keep. Pages are
 * unmapped only with CCAI_RELEASE_UNMAP (the device was synchronized:
 * unmapping does not wait for queued work). CCA_ERR_UPSTREAM if the upstream
 * refused something (it stays, counted); the rest is still released. The
 * upstream frees it made are added to a->release_frees. */
#define CCAI_RELEASE_UNMAP 1u  /* the device synchronized: pages may be unmapped */
#define CCAI_RELEASE_RANGES 2u /* give back empty expandable segments' ranges */
cca_status ccai_release(cca_allocator *a, size_t keep, unsigned flags, cca_release_report *r);
/* What ccai_release(a, 0, CCAI_RELEASE_UNMAP, ...) would give back now,
 * should the upstream take everything: classic, the wholly free segments;
 * expandable, every mapped page that no live or pending block touches.
 * Reserved minus it is what would stay. O(segments), expandable
 * O(blocks). */
size_t ccai_releasable(const cca_allocator *a);
/* Whether releasing cached memory can make room for `need` more bytes (the
 * least the caller's next reservation or map takes). CCA_ERR_OUT_OF_MEMORY,
 * with a message saying why and that nothing was released, when it cannot:
 * nothing is releasable; max_reserved is set and reserved - releasable +
 * need is over it; or the device's free memory plus what is releasable is
 * short of need. Else CCA_OK, the device's free bytes in *free_b (0 when
 * mem_info fails). The OOM retry and cca_domain_reserve's retry then
 * release nothing. One mem_info call. */
cca_status ccai_release_can_help(cca_allocator *a, size_t need, size_t *free_b);
/* The retries' end over expandable segments when their synchronize failed
 * (its message is the thread's): no page can be unmapped and no pending
 * free completed, and an expandable allocator has nothing else to release,
 * so nothing is released or tried again. CCA_ERR_OUT_OF_MEMORY, the
 * synchronize's failure named as the cause. */
cca_status ccai_release_unsynced(void);

/* stats.c */
void ccai_fill_stats(const cca_allocator *a, cca_stats *s); /* lock held */
/* largest_free_block of domain d, or `floor` when that is larger: over d's
 * free blocks, the longest stretch on mapped pages (expandable segments) or
 * the size (classic). From d's free index, largest blocks first
 * (ccai_free_index_largest_run): O(pools x streams) plus a page test of
 * each block larger than the best run found before it. Lock held. */
size_t ccai_domain_largest_free(const struct cca_domain *d, size_t floor);

/* ------------------------------------------------------------------------ */
/* Assertion levels (check.c) and the lock (lock.c)                                  */
/* ------------------------------------------------------------------------ */

/* Arithmetic shared by the core's files. */
static inline size_t ccai_round_up(size_t v, size_t to) {
    return (v + to - 1) / to * to;
}
/* A counter and its peak up, or a counter down (never below zero). */
static inline void ccai_raise(size_t *cur, size_t *peak, size_t by) {
    *cur += by;
    if (*cur > *peak)
        *peak = *cur;
}
static inline void ccai_lower(size_t *cur, size_t by) {
    ccai_assert(*cur >= by);
    *cur -= by;
}

/* block.c's records, inline (defined here, after ccai_assert) */
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

/* The lock: a futex mutex with a short spin before sleeping (lock.c has
 * the protocols and why they are correct). Uncontended, lock is one
 * compare-and-swap; unlock is a plain store (asymmetric protocol, where the
 * kernel offers process-private memory barriers) or one atomic decrement
 * (symmetric). A cached alloc+free pair takes two round trips, and on x86
 * each locked instruction also waits for every earlier store to reach the
 * cache, so the unlock's kind is a third of the pair's time at 1k live
 * blocks (docs/allocator.md, "Then the lock"). Critical sections are short
 * (tens of ns), so a waiter spins first: most contended acquisitions never
 * enter the kernel. C11 atomics, so ThreadSanitizer sees every acquire and
 * release. */
void ccai_mutex_init(ccai_mutex *m);                       /* asymmetric where the kernel allows */
void ccai_mutex_init_kind(ccai_mutex *m, bool asymmetric); /* asymmetric only if the kernel allows; tests */
extern _Atomic bool ccai_mutex_refuse_barrier;            /* tests: waiters act as if the kernel refused */
/* lock.c: the contended path; false, without taking m, when this thread
 * holds m itself inside an upstream op (m->owner) */
bool ccai_mutex_wait(ccai_mutex *m);
/* Its address identifies the calling thread (ccai_mutex.owner). */
extern _Thread_local char ccai_this_thread;
void ccai_mutex_wake(ccai_mutex *m);
/* In the child of a fork, release a lock the forking thread took before
 * the fork (plug.c's fork handler): the child has that one thread, so no
 * one is woken, and the parent's count of sleepers is forgotten. */
void ccai_mutex_unlock_in_child(ccai_mutex *m);

/* Take m; false (m not taken) when this thread holds it already, inside an
 * upstream op: a call back into the allocator from its own op, which would
 * otherwise wait for ever. */
static inline bool ccai_mutex_lock(ccai_mutex *m) {
    int expected = 0;
    if (!atomic_compare_exchange_strong_explicit(&m->state, &expected, 1, memory_order_acquire, memory_order_relaxed) &&
        !ccai_mutex_wait(m))
        return false;
#if CCA_DEBUG >= 1
    ccai_mutexes_held++;
#endif
    return true;
}

/* This thread holds m, inside an upstream op (a public call made from the
 * op: the ones that must refuse before ccai_mutex_lock would). */
static inline bool ccai_mutex_held_here(const ccai_mutex *m) {
    return atomic_load_explicit(&m->owner, memory_order_relaxed) == &ccai_this_thread;
}

/* The holder of m is about to call something that may log (an upstream
 * op): from now until m's unlock, this thread's lines are queued, and the
 * unlock writes them once m is free (lock.c, "The log"). Once per holding:
 * a second call finds the mark. */
static inline void ccai_mutex_hold_log(ccai_mutex *m) {
    ccai_assert(ccai_mutexes_held > 0);
    if (!(m->unlock & CCAI_UNLOCK_LOG)) {
        m->unlock |= CCAI_UNLOCK_LOG;
        atomic_store_explicit(&m->owner, &ccai_this_thread, memory_order_relaxed);
        ccai_log_hold();
    }
}

/* Free the lock word by its protocol (ccai_mutex_unlock, below, and
 * lock.c's unlock of a marked lock). */
static inline void ccai_mutex_release(ccai_mutex *m, bool asymmetric) {
#if CCA_DEBUG >= 1
    ccai_assert(ccai_mutexes_held > 0);
    ccai_mutexes_held--;
#endif
    if (asymmetric) {
        atomic_store_explicit(&m->state, 0, memory_order_release);
        /* keeps the compiler from reading sleepers before the store; the
         * processor may still, and the waiter's membarrier covers that */
        atomic_signal_fence(memory_order_seq_cst);
        if (atomic_load_explicit(&m->sleepers, memory_order_relaxed) != 0)
            ccai_mutex_wake(m);
    } else if (atomic_fetch_sub_explicit(&m->state, 1, memory_order_release) != 1) {
        ccai_mutex_wake(m); /* there were waiters (state was 2) */
    }
}

/* lock.c: the unlock of a marked lock, out of line: the mark cleared, the
 * word freed, then the lines held under it written. */
void ccai_mutex_unlock_and_log(ccai_mutex *m);

/* The protocol and the mark in one byte, read while m is still ours: the
 * asymmetric unlock of an unmarked lock costs what it cost without the
 * mark (one compare and branch), the symmetric one a compare more, and a
 * marked lock goes out of line. */
static inline void ccai_mutex_unlock(ccai_mutex *m) {
    if (__builtin_expect(m->unlock == CCAI_UNLOCK_STORE, 1))
        ccai_mutex_release(m, true);
    else if (m->unlock == CCAI_UNLOCK_DECREMENT)
        ccai_mutex_release(m, false);
    else
        ccai_mutex_unlock_and_log(m);
}

/* lock.c: the failure of a public call `fn` made from inside an upstream
 * op of the allocator it names (CCA_ERR_INVALID_ARGUMENT, saying so). */
cca_status ccai_lock_refused(const char *fn);

/* Take a's lock at the start of public call `fn`: CCA_OK, or its refusal
 * when the call comes from inside one of a's own upstream ops (nothing
 * taken, nothing to unlock). */
static inline cca_status ccai_lock(cca_allocator *a, const char *fn) {
    return __builtin_expect(ccai_mutex_lock(&a->lock), 1) ? CCA_OK : ccai_lock_refused(fn);
}

/* a's upstream, for an op the allocator calls under a's lock (every op it
 * calls is). An op may log (the CUDA upstream, when the driver refuses a
 * cleanup step), so the lock holds this thread's log until its unlock
 * (ccai_mutex_hold_log). Only the calls that reach the upstream pay for it;
 * the cached alloc/free path never does. */
static inline cca_upstream *ccai_upstream_op(cca_allocator *a) {
    ccai_mutex_hold_log(&a->lock);
    return a->upstream;
}

/* Release the lock at the end of a public call; at CCA_DEBUG >= 2, first
 * check every invariant. */
static inline void ccai_unlock(cca_allocator *a) {
#if CCA_DEBUG >= 2
    const char *broken = ccai_check_locked(a);
    if (broken)
        ccai_assert_fail(broken, __FILE__, __LINE__);
#endif
    ccai_mutex_unlock(&a->lock);
}

/* config.c: numbers as text in the C locale's format ("0.5"), whatever
 * locale the program has set (setlocale(LC_ALL, "") under de_DE makes
 * strtod and printf use a decimal comma). ccai_strtod reads one;
 * ccai_numeric_begin switches the calling thread to the C locale for the
 * printf calls of a writer (a JSON snapshot, a config text) and returns
 * what ccai_numeric_end puts back. Thread-local (uselocale): other threads'
 * formatting is untouched. */
double ccai_strtod(const char *s, char **end);
locale_t ccai_numeric_begin(void);
void ccai_numeric_end(locale_t previous);

/* trace.c: CCALLOC_TRACE recording (a no-op pointer check when unset). */
struct ccai_trace *ccai_trace_open_from_env(void);
/* Returns the trace id of the new allocation (unique in the process). */
uint64_t ccai_trace_alloc(struct ccai_trace *t, size_t size, cca_stream s, unsigned domain);
void ccai_trace_free(struct ccai_trace *t, uint64_t id, size_t size, cca_stream s, unsigned domain);
/* A domain's number in the trace (1..; 0 once the recording stopped at a
 * limit: nothing more is written), its declaration written; a
 * domain_release or (reserve) domain_reserve line. */
unsigned ccai_trace_domain(struct ccai_trace *t, const char *name);
void ccai_trace_domain_event(struct ccai_trace *t, bool reserve, size_t bytes, unsigned domain);
void ccai_trace_release(struct ccai_trace *t, size_t keep); /* keep 0: empty_cache */
bool ccai_mark_name_ok(const char *name);
void ccai_trace_close(struct ccai_trace *t);
/* plug.c's fork handler: the trace's lock, taken before a fork (after every
 * allocator lock: recording takes it under one), the file flushed, and
 * released after it. */
void ccai_trace_fork_lock(bool lock);
/* fork.c, in the child before the lock is released: the parent's file is
 * detached, nothing more written to it or opened (trace.c). */
void ccai_trace_fork_child(void);

/* history.c: the ring of recent events (config `history`; NULL when off). */
typedef enum ccai_event_kind {
    CCAI_EV_ALLOC = 0,
    CCAI_EV_FREE_REQUESTED,
    CCAI_EV_FREE_COMPLETED,
    CCAI_EV_SEGMENT_ALLOC,
    CCAI_EV_SEGMENT_FREE,
    CCAI_EV_SEGMENT_MAP,
    CCAI_EV_SEGMENT_UNMAP,
    CCAI_EV_OOM
} ccai_event_kind;
typedef struct ccai_event {
    uint64_t time_us; /* CLOCK_REALTIME, microseconds since the epoch */
    uintptr_t addr;   /* block or first page; oom: the device's free bytes */
    size_t size;      /* requested bytes (blocks, oom), bytes (segments, maps) */
    cca_stream stream;
    uint8_t kind; /* ccai_event_kind */
} ccai_event;
typedef struct ccai_history {
    size_t cap;     /* entries */
    uint64_t total; /* events ever recorded; event k is in ring[k % cap] */
    ccai_event ring[];
} ccai_history;
#define CCAI_HISTORY_MAX ((size_t)16 << 20) /* the config option's upper bound */
cca_status ccai_history_create(size_t cap, ccai_history **out);
void ccai_history_destroy(ccai_history *h);
void ccai_history_record(ccai_history *h, ccai_event_kind kind, uintptr_t addr, size_t size, cca_stream stream);
/* cca_free: free_requested, and free_completed unless the free is deferred. */
void ccai_history_free(ccai_history *h, uintptr_t addr, size_t requested, cca_stream stream, bool deferred);
size_t ccai_history_held(const ccai_history *h); /* min(total, cap) */
const ccai_event *ccai_history_at(const ccai_history *h, size_t i); /* 0 = oldest held */
const char *ccai_event_name(ccai_event_kind kind);                 /* PyTorch's action name */

/* Count bytes reserved (+) or released (-) by segment s, in the allocator
 * and in s's domain (peaks follow). */
static inline void ccai_count_reserved(cca_allocator *a, const ccai_segment *s, size_t bytes, bool up) {
    ccai_domain_counters *d = &s->domain->c;
    if (up) {
        a->c.reserved += bytes;
        if (a->c.reserved > a->c.reserved_peak)
            a->c.reserved_peak = a->c.reserved;
        d->reserved += bytes;
        if (d->reserved > d->reserved_peak)
            d->reserved_peak = d->reserved;
    } else {
        ccai_assert(a->c.reserved >= bytes && d->reserved >= bytes);
        a->c.reserved -= bytes;
        d->reserved -= bytes;
    }
}

#include "block.h" /* the split, inline */

#endif /* CCA_INTERNAL_H */
