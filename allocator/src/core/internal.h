/*
 * internal.h — the allocator and its domains, and the prototypes the core's
 * files share, under a banner naming the file that defines them.
 *
 * Names: public cca_*; shared between files ccai_*; private `static`.
 * The records are in types.h; each index has its header (free_index.h,
 * free_index_v1.h, live_map.h); the seam is kind.h; support/ and upstream/
 * have theirs. allocator/src/README.md lists every file in reading order.
 *
 * The picture (growth policy):
 *
 *   allocator
 *    ├─ kind: classic or pages, chosen once (kind.h)            allocator.c
 *    ├─ segments (doubly linked, newest first)                  segment.c
 *    │    segment 0 [ base ............................................ size )
 *    │               ├─ block A live ─┼─ block B free ─┼─ block C live ─┤
 *    │               blocks of a segment form an address-ordered chain
 *    │               (prev/next) that tiles the segment exactly. block.c
 *    ├─ domains, each with a free index per pool (small, medium, large,
 *    │    arena; greedy uses "large")                           domain.c
 *    │    per key stream, size classes each holding a B+-tree ordered by
 *    │    (size, address), and a bitmap of the non-empty classes. free_index.c
 *    ├─ live map: hash table address -> block, for cca_free in O(1). live_map.c
 *    └─ pending queues: per stream, the events pending frees wait on.  stream.c
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

#include "types.h"         /* blocks and segments */
#include "free_index.h"    /* the free index, version 2 */
#include "free_index_v1.h" /* and version 1 */
#include "live_map.h"      /* address -> live block */
#include "../support/lock.h"    /* the allocator's lock */
#include "../support/trace.h"   /* CCALLOC_TRACE */
#include "../support/history.h" /* the ring of recent events */

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
    uint64_t peak_holds; /* growth requests held under the reserved peak (hold_peak, grow.c) */
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
    size_t page;             /* the upstream's granularity with the pages kind; else 0 */
    bool peak_hold;          /* one request of hold_peak:1 grows: reserved_peak is a
                                cap beside max_reserved (ccai_cap; alloc.c, alloc_locked) */
    bool peak_rising;        /* that request raises the peak: no ahead pages (kinds/pages.c) */
    uint64_t release_frees;  /* upstream frees (segments, unmaps) made by ccai_release:
                                what a hold gave back of the cache, told apart from a
                                refused map's undo, also an unmap (grow.c, hold) */
    bool whole_maps;         /* expandable over CCA_VM_WHOLE_MAPS (kinds/pages.c) */
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

#include "kind.h" /* the segment-kind seam: classic.c, pages.c */

/* segment.c */
ccai_block *ccai_block_new_slab(cca_allocator *a); /* block.c: a new slab, then as below */

/* A segment's fixed properties as its blocks carry them (b->seg). */
static inline uint8_t ccai_segment_flags(const cca_allocator *a, const ccai_segment *s) {
    return (uint8_t)(a->kind->seg_flags | (s->shared ? CCAI_SEG_SHARED : 0) |
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
 * segments also no range over CCAI_ADDRESS_BUDGET (kinds/pages.h), whatever
 * the device's size, known or not. */
size_t ccai_request_ceiling(cca_allocator *a);
cca_status ccai_arena_reserve(cca_allocator *a);
ccai_segment *ccai_arena_find(const cca_allocator *a);

/* kinds/pages.c: what the core reads of a pages segment (the rest: kinds/pages.h) */
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
/* CCA_OK when the device's free memory (asked now unless room->asked) is
 * unknown or holds `bytes`; else CCA_ERR_OUT_OF_MEMORY, "the device has F
 * bytes free, N needed for <what>; nothing was reserved or mapped". A
 * mem_info that fails leaves the thread's message as it was. */
cca_status ccai_device_room_for(cca_allocator *a, ccai_device_room *room, size_t bytes, const char *what);

/* stream.c */
/* At cca_free: true = b is now PENDING (or waits for a synchronize), false =
 * reuse it now. *st is set when the waits could not be set up and a fallback
 * synchronize failed: b is then held until a later synchronize succeeds. */
bool ccai_stream_defer_free(cca_allocator *a, ccai_block *b, cca_status *st);
/* Complete pending frees whose events finished, in bounded work: one query
 * per stream with pending frees plus one per completed wait. */
void ccai_stream_poll_queues(cca_allocator *a);
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

/* Step 2: which pool serves a request of `rounded` bytes (docs/allocator.md,
 * "The life of one cca_alloc", step 2; each pool's segment sizes:
 * ccai_segment_sizes, segment.c). */
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
/* block.c: a LIVE or PENDING block rejoins its pool, coalescing with free
 * neighbours (ccai_pool_return removes it from the live map; _unlinked:
 * done already). Its stream-use record is gone first (ccai_stream_use_free,
 * by the caller: block.c calls nothing above it). */
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

#endif /* CCA_INTERNAL_H */
