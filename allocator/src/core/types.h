/*
 * types.h — the allocator's records: blocks, segments, the streams that use a
 * block. Every core file reads them; nothing here calls anything.
 */
#ifndef CCA_TYPES_H
#define CCA_TYPES_H

#include "ccalloc.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
    bool expandable; /* pages of a reserved address range (kinds/pages.c) */
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

/* The device's free memory, asked of the upstream (mem_info; CUDA:
 * cudaMemGetInfo) at most once per step that needs it, and only by those
 * that would otherwise cost calls for memory the device cannot give
 * (kinds/pages.c, "the device's free memory"). Start with {false, 0}. */
typedef struct ccai_device_room {
    bool asked;  /* mem_info was asked */
    size_t free; /* its free bytes; SIZE_MAX when unknown (no mem_info, or it failed) */
} ccai_device_room;

#endif /* CCA_TYPES_H */
