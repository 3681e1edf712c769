/*
 * internal.h — the allocator and its domains, and the prototypes the core's
 * files share, under a banner naming the file that defines them.
 * Names: public cca_*; shared ccai_*; private `static`. Invariants: one
 * table, support/invariants.h.
 *
 *   allocator
 *    ├─ kind and policy, chosen once (kind.h, policy.h)         allocator.c
 *    ├─ segments, newest first; each tiled by blocks in address
 *    │    order:  [ A live | B free | C live ]        segment.c, block.c
 *    ├─ domains, each with a free index per pool      domain_set.c, free_index*.c
 *    ├─ live map: address -> block, for cca_free      live_map.c
 *    └─ pending queues: per stream, the frees waiting  stream.c
 */
#ifndef CCA_INTERNAL_H
#define CCA_INTERNAL_H

#include "ccalloc.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../support/support.h"   /* assertions, status, log */
#include "../upstream/upstream.h" /* the upstream (no allocator type) */
#include "types.h"
#include "free_index.h"
#include "free_index_v1.h"
#include "live_map.h"
#include "list.h" /* intrusive lists: segments, domains */
#include "../support/lock.h"
#include "../support/history.h"

/* ---- the allocator -------------------------------------------------------- */

typedef struct ccai_counters {
    size_t allocated, allocated_peak;
    size_t requested, requested_peak;
    size_t reserved, reserved_peak;
    size_t active, active_peak;
    size_t pending;
    size_t segments, segments_peak;
    size_t address_space, mapped, expandable_segments; /* pages segments */
    uint64_t alloc_calls, free_calls, upstream_allocs, upstream_frees;
    uint64_t vm_maps, vm_unmaps, pages_mapped, pages_unmapped;
    uint64_t retries, ooms, splits, merges;
    uint64_t peak_holds; /* policies/hold.c */
} ccai_counters;

/* The allocator's counters restricted to one domain; they sum to the
 * allocator's (I8). Block counts only while a->domains_tracked. */
typedef struct ccai_domain_counters {
    size_t allocated, allocated_peak;
    size_t requested, requested_peak;
    size_t reserved, reserved_peak;
    size_t active, active_peak;
    size_t segments;
    uint64_t alloc_calls, upstream_allocs, upstream_frees;
} ccai_domain_counters;

/* An owner of segments (domain.c), its own pools (best fit never crosses domains); root: a->root. */
struct cca_domain {
    struct cca_domain *prev, *next;
    struct cca_domain *hprev, *hnext, *sprev, *snext; /* a->holding while segs; a->asleep while sleep */
    struct ccai_segment *segs;        /* its segments (dnext) */
    char name[CCA_DOMAIN_NAME_MAX + 1];
    ccai_free_index pools[CCAI_POOL_COUNT];
    ccai_domain_counters c;
    struct ccai_segment *arena; /* cca_domain_reserve's arena, or NULL */
    unsigned trace_no, number;  /* its numbers (0: default): in the trace; in the list (domain_set.c) */
    uintptr_t handle;           /* what the caller holds (0: default) */
    struct ccai_sleep *sleep;   /* asleep: its host copy (sleep.c); else NULL */
};

/* The waits of pending frees on one stream, in order (stream.c). */
typedef struct ccai_pending_queue {
    struct ccai_pending_queue *next;
    cca_stream stream;
    ccai_wait *head, *tail;
} ccai_pending_queue;

struct cca_allocator {
    ccai_mutex lock;
    cca_config config;
    cca_upstream *upstream;
    const struct ccai_kind *kind;     /* chosen by cca_create, never changed */
    const struct ccai_policy *policy; /* the same */
    bool medium_pool;        /* config.medium_pool and the kind has the pool */
    bool expandable, whole_maps; /* pages, for the reports; over whole maps */
    size_t page;             /* pages: the upstream's granularity; else 0 */
    bool peak_hold;          /* a held request grows: the peak is a cap (policies/hold.c) */
    bool peak_rising;        /* that request raises the peak: no ahead pages (kinds/pages.c) */
    bool held_split;         /* step 5's block was mapped for a split: step 6 keeps it (grow.c) */
    struct { size_t least, cap, map_pages; } rule; /* pages' growth rule, with config.expandable_ahead (kinds/pages.c) */
    uint64_t release_frees;  /* upstream frees made by ccai_release (the hold's count) */
    size_t max_request;      /* larger: their rounding would overflow */
    size_t device_total;     /* 0 = unknown; asked until answered (segment.c) */
    bool device_total_known;
    ccai_segment *segments;  /* list head */
    struct cca_domain root;  /* the default domain, head of the domain list */
    struct cca_domain *serving; /* the call in progress serves it: new segments are its */
    const char *allocating;     /* that call's name, for its messages */
    bool domains_tracked, numbers_stale; /* block counts per domain from the first on; stale: domain_set.c */
    struct cca_domain *last;    /* the domain list's tail (root when alone) */
    struct cca_domain *holding, *asleep; /* domains that own segments (segment.c); those asleep (domain_set.c) */
    struct {                             /* the other domains by handle (domain_set.c) */
        struct cca_domain **slot;
        size_t cap, count; /* cap: 0 or a power of two, count <= cap / 2 */
    } domain_set;
    ccai_live_map live;
    ccai_pending_queue *queues; /* pending waits by stream (stream.c) */
    ccai_block *sync_head;      /* pending blocks waiting for a synchronize */
    ccai_block *spare_blocks;   /* recycled block records */
    struct ccai_block_slab *slabs; /* where they live (block.c) */
    ccai_counters c;
    struct ccai_trace *trace;
    struct ccai_history *history;    /* NULL: off */
    ccai_fork_mutex fork;            /* the lock on fork.c's registry */
    bool trace_refused;              /* trace.c: CCALLOC_TRACE's opening refused */
};

#include "kind.h"   /* the segment-kind seam: classic.c, pages.c */
#include "policy.h" /* the growth-policy seam: grow.c, greedy.c */

/* segment.c */
/* A segment's fixed properties as its blocks carry them (b->seg). */
static inline uint8_t ccai_segment_flags(const cca_allocator *a, const ccai_segment *s) {
    return (uint8_t)(a->kind->seg_flags | (s->shared ? CCAI_SEG_SHARED : 0) |
                     (s->domain == &a->root ? CCAI_SEG_ROOT : 0) | ((unsigned)s->pool << CCAI_SEG_POOL_SHIFT));
}
static inline ccai_pool_kind ccai_block_pool(const ccai_block *b) {
    return (ccai_pool_kind)((b->seg >> CCAI_SEG_POOL_SHIFT) & 3);
}
/* b->segment->index, without loading the segment for the root domain's. */
static inline struct ccai_free_index *ccai_block_index(cca_allocator *a, const ccai_block *b) {
    return b->seg & CCAI_SEG_ROOT ? &a->root.pools[ccai_block_pool(b)] : b->segment->index;
}
/* No live or pending block in s: one free block (I2). */
static inline bool ccai_segment_empty(const ccai_segment *s) {
    return s->first->state == CCAI_FREE && !s->first->next;
}
/* Live and pending blocks of s and their bytes: a walk, for the reports. */
void ccai_segment_live(const ccai_segment *s, size_t *blocks, size_t *bytes);

/* Preferred and least segment sizes for a request (the table: segment.c). */
void ccai_segment_sizes(const cca_allocator *a, size_t rounded, ccai_pool_kind pool, size_t *want, size_t *least);
/* `bytes` more fit under the cap now; else CCA_ERR_OUT_OF_MEMORY, "N would
 * be exceeded". Asked before any upstream call for memory. */
cca_status ccai_cap_room(const cca_allocator *a, size_t bytes);
/* The cap on reserved bytes now (0 = none): max_reserved, or the lower of
 * it and the reserved peak while a request is held. */
static inline size_t ccai_cap(const cca_allocator *a) {
    size_t cap = a->config.max_reserved, peak = a->c.reserved_peak;
    return a->peak_hold && (!cap || peak < cap) ? peak : cap;
}
/* "max_reserved (N)" or "the reserved peak (N, hold_peak)". */
const char *ccai_cap_name(const cca_allocator *a, char *buf, size_t len);
/* For every kind: new = the bookkeeping before the upstream call (discard
 * undoes it); link = after it granted [base, base + size); unlink = after
 * the upstream took the segment back (frees it). */
cca_status ccai_segment_new(cca_allocator *a, cca_stream stream, ccai_pool_kind pool, bool shared, size_t words,
                            ccai_segment **out);
void ccai_segment_discard(cca_allocator *a, ccai_segment *s);
void ccai_segment_link(cca_allocator *a, ccai_segment *s, uintptr_t base, size_t size);
void ccai_segment_unlink(cca_allocator *a, ccai_segment *s);
/* The largest segment that could ever be reserved: min(device total,
 * max_reserved), SIZE_MAX when neither is known; for a request or an
 * arena, also at most the kind's max_range. */
size_t ccai_segment_ceiling(cca_allocator *a);
size_t ccai_request_ceiling(cca_allocator *a);

/* stream.c */
/* At cca_free: true = b is now PENDING, false = reuse it now. *st: the
 * waits failed and so did a synchronize (b held until one succeeds). */
bool ccai_stream_defer_free(cca_allocator *a, ccai_block *b, cca_status *st);
/* Complete the pending frees whose events finished. */
void ccai_stream_poll_queues(cca_allocator *a);
/* Synchronize and complete every pending free (wait_all: only when some
 * are pending; sync_device: always). Failed: nothing completed. */
cca_status ccai_stream_wait_all(cca_allocator *a);
cca_status ccai_stream_sync_device(cca_allocator *a);
void ccai_stream_complete_all(cca_allocator *a);
cca_status ccai_stream_record(ccai_block *b, cca_stream s);
/* Free a block's stream-use record and events. */
void ccai_stream_use_free(cca_allocator *a, ccai_block *b);
void ccai_stream_destroy(cca_allocator *a);

/* grow.c: growth's slow path, and the one retry every policy shares */
/* A retry's request: a block, or a domain's footprint arena (arena). */
typedef struct ccai_grow_req {
    size_t rounded;
    cca_stream stream;
    ccai_pool_kind pool;
    bool arena;
} ccai_grow_req;
/* The one retry (counted in alloc_retries). *b: the block (not an arena's). */
cca_status ccai_grow_retry(cca_allocator *a, const ccai_grow_req *q, ccai_block **b);
/* For the hold: the retry uncounted; a request's least need once the cache
 * is released; a take from the domain's arena, else new memory. */
cca_status ccai_grow_release_and_take(cca_allocator *a, const ccai_grow_req *q, ccai_block **b);
size_t ccai_grow_need(cca_allocator *a, size_t rounded, cca_stream stream, ccai_pool_kind pool);
cca_status ccai_grow_take_again(cca_allocator *a, size_t rounded, cca_stream stream, ccai_pool_kind pool,
                                ccai_block **b);
/* The bytes of *b a request holds made usable (kind.h, back); refused: *b = NULL. */
cca_status ccai_grow_map_held(cca_allocator *a, size_t rounded, ccai_block **b, ccai_device_room *room);

/* Step 2: which pool serves a request of `rounded` bytes (sizes: segment.c). */
static inline ccai_pool_kind ccai_pool_of(const cca_allocator *a, size_t rounded) {
    const cca_config *c = &a->config;
    if (c->policy == CCA_POLICY_GREEDY) /* one arena (policies/greedy.c) */
        return CCAI_POOL_LARGE;
    if (c->small_pool && rounded <= c->small_max)
        return CCAI_POOL_SMALL;
    if (a->medium_pool && rounded < c->large_min)
        return CCAI_POOL_MEDIUM; /* pages: medium requests share the large range (kind.h) */
    return CCAI_POOL_LARGE;
}
/* block.c: a new slab of records (block.h takes one); all slabs freed. */
ccai_block *ccai_block_new_slab(cca_allocator *a);
void ccai_block_free_slabs(cca_allocator *a);
/* A LIVE or PENDING block rejoins its pool, merging with free neighbours
 * (_unlinked: out of the live map already). Its stream-use record went first. */
void ccai_pool_return(cca_allocator *a, ccai_block *b);
void ccai_pool_return_unlinked(cca_allocator *a, ccai_block *b);

/* release.c */
/* Give cached memory back until reserved <= keep; CCA_ERR_UPSTREAM if the
 * upstream refused something (it stays), the rest still released. */
#define CCAI_RELEASE_UNMAP 1u  /* the streams waited for: pages may be unmapped */
#define CCAI_RELEASE_RANGES 2u /* give back empty ranges */
cca_status ccai_release(cca_allocator *a, size_t keep, unsigned flags, cca_release_report *r);
/* What a full release would give back now (kind.h, releasable). */
size_t ccai_releasable(const cca_allocator *a);
/* Can releasing make room for `need` more bytes (release.c)? Else
 * CCA_ERR_OUT_OF_MEMORY, why. *free_b: the device's free bytes (0: unknown). */
cca_status ccai_release_can_help(cca_allocator *a, size_t need, size_t *free_b);
/* Reserved less the device's (free_b free) or the cap's shortfall for `need`. */
size_t ccai_release_keep(const cca_allocator *a, size_t need, size_t free_b);
/* All cached released if that can help `need`, after quiesce (hold.c step 2). */
void ccai_release_all_for(cca_allocator *a, size_t need);
/* A retry whose needed synchronize failed: CCA_ERR_OUT_OF_MEMORY, the cause. */
cca_status ccai_release_unsynced(void);
/* Reserved minus allocated bytes of the awake domains: what they cache. A
 * sleeping domain's blocks count in a->c.allocated, their bytes on the
 * host; the pages a refused unmap left it count in a->c.reserved and serve
 * nothing until its wake (no release finds them). O(domains asleep). */
size_t ccai_cached_bytes(const cca_allocator *a);

/* ---- arithmetic, the lock, counting ------------------------------------ */

static inline size_t ccai_round_up(size_t v, size_t to) {
    return (v + to - 1) / to * to;
}
/* A counter and its peak up; a counter down (never below zero). */
static inline void ccai_raise(size_t *cur, size_t *peak, size_t by) {
    *cur += by;
    if (*cur > *peak)
        *peak = *cur;
}
static inline void ccai_lower(size_t *cur, size_t by) {
    ccai_assert(*cur >= by);
    *cur -= by;
}

/* lock.c: public call `fn` made from inside one of a's own upstream ops:
 * CCA_ERR_INVALID_ARGUMENT, nothing taken. Its unlock: ccai_unlock
 * (observe/check.h: the invariant walk first, at CCA_DEBUG >= 2). */
cca_status ccai_lock_refused(const char *fn);
static inline cca_status ccai_lock(cca_allocator *a, const char *fn) {
    return __builtin_expect(ccai_mutex_lock(&a->lock), 1) ? CCA_OK : ccai_lock_refused(fn);
}

/* a's upstream, for an op called under a's lock: an op may log, so the
 * thread's log is held until the unlock (the cached path never pays). */
static inline cca_upstream *ccai_upstream_op(cca_allocator *a) {
    ccai_mutex_hold_log(&a->lock);
    return a->upstream;
}

/* A block handed out in, or returned to, a domain: its counts (kept only
 * while a->domains_tracked; the allocator's own are counted apart). */
static inline void ccai_domain_count_alloc(ccai_domain_counters *d, const ccai_block *b, size_t size) {
    ccai_raise(&d->allocated, &d->allocated_peak, b->size);
    ccai_raise(&d->requested, &d->requested_peak, size);
    ccai_raise(&d->active, &d->active_peak, 1);
    d->alloc_calls++;
}
static inline void ccai_domain_count_return(ccai_domain_counters *d, const ccai_block *b) {
    ccai_lower(&d->allocated, b->size);
    ccai_lower(&d->active, 1);
}
/* Count bytes reserved (+) or released (-) by segment s, in the allocator
 * and in s's domain (peaks follow). */
static inline void ccai_count_reserved(cca_allocator *a, const ccai_segment *s, size_t bytes, bool up) {
    ccai_domain_counters *d = &s->domain->c;
    if (up) {
        ccai_raise(&a->c.reserved, &a->c.reserved_peak, bytes);
        ccai_raise(&d->reserved, &d->reserved_peak, bytes);
    } else {
        ccai_lower(&a->c.reserved, bytes);
        ccai_lower(&d->reserved, bytes);
    }
}

#endif /* CCA_INTERNAL_H */
