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

/* The pools a request may come from (segment.c has the sizes); arena: a
 * domain's footprint arena (cca_domain_reserve), requests of any size. */
typedef enum ccai_pool_kind {
    CCAI_POOL_SMALL, CCAI_POOL_MEDIUM, CCAI_POOL_LARGE, CCAI_POOL_ARENA, CCAI_POOL_COUNT
} ccai_pool_kind;
_Static_assert(CCAI_POOL_COUNT <= 4, "a block keeps its pool kind in two bits (CCAI_SEG_POOL_SHIFT)");

/* A block's key stream and users, and the waits of a deferred free:
 * stream.c has the model. */
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
    size_t wait_count, outstanding; /* and those not complete yet         */
} ccai_stream_use;

/* b->seg: its segment's fixed properties, copied into every block so that
 * the cached pair never loads the segment record. */
enum {
    CCAI_SEG_EXPANDABLE = 1, /* the kind's seg_flags (kind.h): pages          */
    CCAI_SEG_SHARED = 2,     /* s->shared (an arena: greedy's, a footprint)    */
    CCAI_SEG_ROOT = 4,       /* s->domain is the root domain: s->index is
                                &a->root.pools[pool], found without s       */
    CCAI_SEG_POOL_SHIFT = 4  /* bits 4-5: s->pool                              */
};

typedef struct ccai_block {
    /* first cache line: what best fit, the cached pair and a merge read */
    size_t size; /* multiple of CCA_GRANULARITY */
    uintptr_t addr;
    struct ccai_segment *segment;
    struct ccai_block *prev, *next; /* address order within the segment     */
    cca_stream stream;              /* key stream (= segment->stream)       */
    size_t requested;               /* what the caller asked for (LIVE/PENDING) */
    uint16_t cls;                   /* FREE: size class of its tree, or
                                       CCAI_CLASS_OVERFLOW                  */
    uint8_t state;                  /* FREE / LIVE / PENDING               */
    bool unmapped;   /* FREE, pages only: some of its pages may be unmapped
                        (the kind's usable/gap decide); false: all mapped */
    bool needs_sync; /* PENDING: no event could be recorded and synchronize
                        failed; reused only after a synchronize succeeds  */
    uint8_t seg;     /* CCAI_SEG_*: its segment's fixed properties        */
    /* second line: written by an alloc, read by its free */
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
    cca_stream stream; /* its blocks' key stream (NULL: shared)          */
    bool shared;
    bool expandable; /* pages of a reserved address range (kinds/pages.c) */
    ccai_pool_kind pool;
    /* pages only (kinds/pages.c): bit i of mapped: [base + i*page, +page) */
    size_t page;         /* the upstream's granularity (a power of two)   */
    unsigned page_shift; /* log2(page): a page number is a shift, not a division */
    uintptr_t mapped_end; /* end of the mapped prefix (one compare for a
                             block inside it)                              */
    size_t npages;       /* size / page                                   */
    size_t pages_hi;     /* one past the highest page ever mapped: walks
                            stop there                                    */
    size_t mapped_pages; /* bits set                                      */
    uint64_t *mapped;    /* npages bits                                   */
    /* whole maps only, else NULL: bit i set when page i starts a map (I9);
     * the words after `mapped`                                            */
    uint64_t *starts;
    size_t map_pages;    /* whole maps: the most pages one map holds (a->rule's; 0: no limit) */

    struct cca_domain *domain; /* its owner (domain.c); never changes      */
    struct ccai_segment *dprev, *dnext; /* the owner's segments (segment.c) */
    struct ccai_free_index *index; /* = &domain->pools[pool]: where its free
                                  blocks are indexed (one load on free)   */
    ccai_block *first; /* lowest-address block                          */
    struct ccai_segment *prev, *next;
    struct ccai_segment *sorted_next; /* a sort's chain, under the lock (release, snapshots) */
} ccai_segment;

/* The device's free memory (mem_info), asked at most once per step that
 * needs it. Start with {false, 0}. */
typedef struct ccai_device_room {
    bool asked;  /* mem_info was asked */
    size_t free; /* its free bytes; SIZE_MAX when unknown (no mem_info, or it failed) */
} ccai_device_room;

#endif /* CCA_TYPES_H */
