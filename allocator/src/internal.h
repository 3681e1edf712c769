/*
 * internal.h — data structures shared between the allocator's source files.
 *
 * Names: public cca_*, shared between files cca__* is avoided (no leading or
 * double underscores); shared internals use the prefix `ccai_` and are
 * declared here under a banner naming the file that defines them.
 *
 * The picture (growth policy, one stream):
 *
 *   allocator
 *    ├─ segments (doubly linked, creation order)
 *    │    segment 0 [ base ............................................ size )
 *    │               ├─ block A live ─┼─ block B free ─┼─ block C live ─┤
 *    │               blocks of a segment form an address-ordered chain
 *    │               (prev/next) that tiles the segment exactly.
 *    ├─ free index per pool (small, large; greedy uses "large" only):
 *    │    per stream, size classes each holding a treap ordered by
 *    │    (size, address), and a bitmap of the non-empty classes;
 *    │    best fit = lower bound in the request's class, else the smallest
 *    │    block of the next non-empty class.
 *    └─ live map: hash table address -> block, for cca_free in O(1).
 *
 * Invariants (checked by cca_check_invariants):
 *   I1 the blocks of a segment tile it: first starts at base, each next starts
 *      where the previous ends, the last ends at base + size.
 *   I2 no two neighbouring blocks are both FREE (frees coalesce at once).
 *   I3 a block is in the free index iff it is FREE; in the live map iff LIVE
 *      or PENDING.
 *   I4 allocated_bytes = sum of LIVE+PENDING block sizes; reserved_bytes = sum
 *      of segment sizes; cached_bytes = sum of FREE block sizes.
 *   I5 every block's address is CCA_ALIGNMENT aligned and its size a multiple
 *      of CCA_GRANULARITY.
 */
#ifndef CCA_INTERNAL_H
#define CCA_INTERNAL_H

#include "ccalloc.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* ------------------------------------------------------------------------ */
/* Blocks and segments                                                      */
/* ------------------------------------------------------------------------ */

typedef enum ccai_block_state { CCAI_FREE = 0, CCAI_LIVE = 1, CCAI_PENDING = 2 } ccai_block_state;

/* small: requests <= small_max in small_segment segments; medium: requests
 * < large_min in medium_segment segments; large: requests >= large_min, each
 * in a segment of its own (and the greedy arena). */
typedef enum ccai_pool_kind {
    CCAI_POOL_SMALL = 0,
    CCAI_POOL_MEDIUM = 1,
    CCAI_POOL_LARGE = 2,
    CCAI_POOL_COUNT = 3
} ccai_pool_kind;

struct ccai_segment;

/* A pending free: one event per extra stream the block was used on. */
typedef struct ccai_pending {
    void **events;
    size_t count;
} ccai_pending;

typedef struct ccai_block {
    /* first 64 bytes: everything a free-index descent or a neighbour check
     * touches (the treap priority is a hash of addr, computed not stored) */
    struct ccai_block *left, *right; /* free index (treap) links           */
    cca_stream stream;               /* the segment's stream: index key     */
    size_t size;                     /* multiple of CCA_GRANULARITY         */
    uintptr_t addr;
    size_t max_size;              /* largest size in the treap subtree   */
    struct ccai_block *hash_next; /* live map chain                      */
    uint8_t state;                /* FREE / LIVE / PENDING: read on every
                                     neighbour check, so it lives here   */
    /* the rest: chain, ownership, streams */
    struct ccai_segment *segment;
    struct ccai_block *prev, *next; /* address order within the segment     */
    size_t requested;               /* what the caller asked for (LIVE/PENDING) */
    uint64_t id;                    /* allocation sequence number (traces)  */
    cca_stream alloc_stream;        /* stream of the cca_alloc call         */
    cca_stream *used_on;            /* extra streams from cca_record_stream */
    size_t used_on_count, used_on_cap;
    struct ccai_block *pending_next; /* pending-free list link              */
    ccai_pending pending;
} ccai_block;

typedef struct ccai_segment {
    uintptr_t base;
    size_t size;
    cca_stream stream; /* every block in it belongs to this stream; the
                          greedy arena is shared (shared = true)          */
    bool shared;
    ccai_pool_kind pool;
    size_t live_blocks; /* LIVE + PENDING blocks in this segment          */
    size_t live_bytes;
    ccai_block *first; /* lowest-address block                          */
    struct ccai_segment *prev, *next;
} ccai_segment;

/* ------------------------------------------------------------------------ */
/* block_index.c: the free-block treap and the live-pointer hash map        */
/* ------------------------------------------------------------------------ */

/* Segregated classes: sizes in units of 512 B; units < 64 map to their own
 * class (exact sizes up to 32 KiB), larger sizes to 64 sub-classes per power
 * of two (TLSF-style, at most 1/64 = 1.6% apart). */
#define CCAI_CLASS_ROWS 60
#define CCAI_CLASSES (CCAI_CLASS_ROWS * 64)

/* The free blocks of one stream in one pool: a treap per size class, and a
 * two-level bitmap of the non-empty classes. */
typedef struct ccai_stream_bins {
    struct ccai_stream_bins *next;
    cca_stream stream;
    size_t segments;                  /* segments of this stream in the pool  */
    uint64_t rows;                    /* bit r: bitmap[r] != 0                 */
    uint64_t bitmap[CCAI_CLASS_ROWS]; /* bit c%64 of row c/64: class c non-empty */
    ccai_block *roots[CCAI_CLASSES];
} ccai_stream_bins;

typedef struct ccai_free_index {
    ccai_stream_bins *streams; /* most recently used first */
    size_t count;
    size_t bytes;
} ccai_free_index;

/* A segment of `stream` joins (attach) or leaves (detach) the pool: the
 * stream's bins exist while it has segments here, so inserting a free block
 * never allocates, and a stream's bins are freed with its last segment. */
cca_status ccai_free_index_attach(ccai_free_index *ix, cca_stream stream);
void ccai_free_index_detach(ccai_free_index *ix, cca_stream stream);
void ccai_free_index_destroy(ccai_free_index *ix);
void ccai_free_index_insert(ccai_free_index *ix, ccai_block *b);
void ccai_free_index_remove(ccai_free_index *ix, ccai_block *b);
/* Smallest block of `stream` with size >= size (ties: lowest address) whose
 * size is <= max_size; NULL if none. */
ccai_block *ccai_free_index_best_fit(ccai_free_index *ix, cca_stream stream, size_t size, size_t max_size);
size_t ccai_free_index_largest(const ccai_free_index *ix);
/* Walk every free block (for invariant checks); stops when fn returns false. */
bool ccai_free_index_walk(const ccai_free_index *ix, bool (*fn)(void *user, const ccai_block *b), void *user);

typedef struct ccai_live_map {
    ccai_block **buckets;
    size_t bucket_count; /* power of two */
    size_t count;
} ccai_live_map;

cca_status ccai_live_map_init(ccai_live_map *m);
void ccai_live_map_destroy(ccai_live_map *m);
cca_status ccai_live_map_insert(ccai_live_map *m, ccai_block *b); /* may grow */
ccai_block *ccai_live_map_find(const ccai_live_map *m, uintptr_t addr);
void ccai_live_map_remove(ccai_live_map *m, ccai_block *b);

/* ------------------------------------------------------------------------ */
/* The allocator                                                            */
/* ------------------------------------------------------------------------ */

typedef struct ccai_block_slab {
    struct ccai_block_slab *next;
    ccai_block blocks[];
} ccai_block_slab;

typedef struct ccai_counters {
    size_t allocated, allocated_peak;
    size_t requested, requested_peak;
    size_t reserved, reserved_peak;
    size_t active, active_peak;
    size_t pending;
    size_t segments, segments_peak;
    uint64_t alloc_calls, free_calls, upstream_allocs, upstream_frees;
    uint64_t retries, ooms, splits, merges;
} ccai_counters;

struct ccai_trace;

struct cca_allocator {
    pthread_mutex_t lock;
    cca_config config;
    cca_upstream *upstream;
    ccai_segment *segments; /* list head */
    ccai_free_index pools[CCAI_POOL_COUNT];
    ccai_live_map live;
    ccai_block *pending_head; /* freed blocks waiting on events */
    ccai_block *spare_blocks; /* recycled block records */
    ccai_block_slab *slabs;
    ccai_counters c;
    uint64_t alloc_sequence; /* ids for the trace */
    struct ccai_trace *trace;
};

/* pool.c */
ccai_block *ccai_block_new(cca_allocator *a);
void ccai_block_recycle(cca_allocator *a, ccai_block *b);
/* Return a fully free segment to the upstream (removes its block). */
cca_status ccai_segment_release(cca_allocator *a, ccai_segment *s);
/* Complete pending frees whose events finished; wait for all if `wait`. */
void ccai_process_pending(cca_allocator *a, bool wait);
ccai_pool_kind ccai_pool_of(const cca_allocator *a, size_t rounded);

/* release.c */
/* Release free segments largest first until reserved <= keep (lock held).
 * CCA_ERR_UPSTREAM if the upstream refused one (it stays cached). */
cca_status ccai_release_free_segments(cca_allocator *a, size_t keep, cca_release_report *r);

/* stats.c */
void ccai_fill_stats(const cca_allocator *a, cca_stats *s); /* lock held */

/* status.c */
cca_status ccai_fail(cca_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void ccai_log(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* upstream.c: the wrapper every upstream sits behind (accounting included). */
struct cca_upstream {
    cca_upstream_ops ops;
    void *ctx;
    pthread_mutex_t lock;
    cca_upstream_stats stats;
    char name[32];
};
bool ccai_upstream_has_events(const cca_upstream *u);
cca_status ccai_upstream_event_record(cca_upstream *u, cca_stream s, void **event);
cca_status ccai_upstream_event_query(cca_upstream *u, void *event);
void ccai_upstream_event_destroy(cca_upstream *u, void *event);

/* upstream_host.c / upstream_cuda.c build ops tables over a context. */
cca_status ccai_upstream_wrap(const cca_upstream_ops *ops, void *ctx, cca_upstream **out);

/* trace.c: CCALLOC_TRACE recording (a no-op pointer check when unset). */
struct ccai_trace *ccai_trace_open_from_env(void);
/* Returns the trace id of the new allocation (unique in the process). */
uint64_t ccai_trace_alloc(struct ccai_trace *t, size_t size, cca_stream s);
void ccai_trace_free(struct ccai_trace *t, uint64_t id, size_t size, cca_stream s);
void ccai_trace_release(struct ccai_trace *t, size_t keep); /* keep 0: empty_cache */
bool ccai_mark_name_ok(const char *name);
void ccai_trace_close(struct ccai_trace *t);

#endif /* CCA_INTERNAL_H */
