/*
 * kind.h — the segment-kind seam: how a segment gets device memory and
 * gives it back. The core (allocator.c, grow.c, release.c, domain.c) calls
 * these operations and never asks which kind it has.
 *
 * - One kind per allocator, chosen once by cca_create (a->kind, never
 *   changed): pages where expandable:1 and the upstream has virtual memory,
 *   else classic.
 * - classic (kinds/classic.c): a segment is one upstream allocation (one
 *   cudaMalloc), reserved whole and given back whole.
 * - pages (kinds/pages.c): a segment is a reserved address range; its pages
 *   are mapped as blocks need them and unmapped when free, around live
 *   blocks (I7). Only pages marks a free block `unmapped`, so the core's
 *   one test of that mark costs classic nothing.
 * - Greedy is a policy over either kind: its arena is a shared segment the
 *   kind reserves (reserve with shared = true), not a third path.
 * - Every operation runs under the allocator's lock; every upstream call
 *   goes through ccai_upstream_op (the log held until the unlock).
 *
 *     core ──grow / reserve / back──▶ kind ──alloc / vm_map──▶ upstream
 *          ◀── blocks and segments (segment.c: new, link, unlink) ──
 */
#ifndef CCA_KIND_H
#define CCA_KIND_H

#include "../support/invariants.h" /* ccai_broken: what a kind's check reports */

typedef struct ccai_kind {
    const char *name; /* "classic" or "pages": the snapshot's segment_kind */
    /* Requests below large_min get a pool of their own (classic); pages:
     * they share the large pool's range. */
    bool medium_pool;
    /* Memory goes back only while the device is idle (pages: unmapping
     * does not wait for queued work): the retry synchronizes even with no
     * free pending, and a failed synchronize ends it. */
    bool unmap_when_idle;
    /* No request or arena is larger (pages: the address budget). */
    size_t max_range;
    /* What every block of its segments carries of the kind (b->seg,
     * types.h): pages, CCAI_SEG_EXPANDABLE (a free remainder may lie on
     * unmapped pages); classic, nothing. */
    uint8_t seg_flags;

    /* Step 5b: a free block of at least `rounded` bytes for (key, pool)
     * from new memory (classic: a new segment, preferred then least size;
     * pages: best fit, else a new range's tail). Its bytes may still need
     * `back`. room: the device's free memory, asked at most once.
     * CCA_ERR_OUT_OF_MEMORY: nothing changed. */
    cca_status (*grow)(cca_allocator *a, size_t rounded, cca_stream key, ccai_pool_kind pool, ccai_device_room *room,
                       ccai_block **b);
    /* A segment of `size` bytes for (stream, pool), its one free block
     * indexed; shared: an arena (greedy, a domain's footprint), every byte
     * usable at once. */
    cca_status (*reserve)(cca_allocator *a, size_t size, cca_stream stream, ccai_pool_kind pool, bool shared,
                          ccai_segment **out);
    /* Make the first `held` bytes of free block b, marked unmapped, usable
     * (pages: map the missing pages). NULL where no block is ever marked. */
    cca_status (*back)(cca_allocator *a, ccai_block *b, size_t held, ccai_device_room *room);
    /* bytes rounded up to the kind's unit (pages: whole pages; saturates
     * at SIZE_MAX); classic: bytes. */
    size_t (*whole)(const cca_allocator *a, size_t bytes);
    /* The least a request of `rounded` bytes can add to reserved bytes:
     * classic, its least segment; pages, its pages. */
    size_t (*least)(const cca_allocator *a, size_t rounded, ccai_pool_kind pool);
    /* What the retry releases first for it (classic: the least segment;
     * pages: rounded plus one page, as its pages may straddle one more). */
    size_t (*shortfall)(const cca_allocator *a, size_t rounded, ccai_pool_kind pool);
    /* The new bytes a request would map in free block b once every free
     * page is unmapped; NULL: the kind cannot say (the retry uses least). */
    size_t (*new_bytes)(const cca_allocator *a, const ccai_block *b, size_t rounded);
    /* The greedy arena's size made whole (pages: whole pages, up unless
     * that passes max_reserved or the device's free memory). */
    cca_status (*fit_arena)(cca_allocator *a, size_t *size);

    /* Give cached memory back until reserved <= keep (release.c's order
     * within the kind: classic, whole free segments largest first; pages,
     * the tails' free pages, then the other free pages, then with
     * CCAI_RELEASE_RANGES the ranges left empty). Adds to the report's
     * released counts; a refusal is the thread's message, the rest still
     * released. */
    cca_status (*release_cached)(cca_allocator *a, size_t keep, unsigned flags, cca_release_report *r);
    /* Per segment: the bytes it holds of the device (reserved), those a
     * full release could give back with its live blocks staying
     * (releasable), and the free bytes its live blocks keep mapped
     * (trapped: classic 0). */
    size_t (*reserved)(const ccai_segment *s);
    size_t (*releasable)(const ccai_segment *s);
    size_t (*trapped)(const ccai_segment *s);
    /* Give back empty segment s (its domain's release); on a refusal s
     * stays, indexed. */
    cca_status (*release)(cca_allocator *a, ccai_segment *s);
    /* cca_destroy's part for s: give it back whatever its blocks;
     * keep_mapped: the device could not be synchronized (pages: touch no
     * range with pages mapped). A refusal sets *result. */
    void (*destroy)(cca_allocator *a, ccai_segment *s, bool keep_mapped, cca_status *result);
    /* The kind's own invariants of s (pages: I7, I9): CCAI_HOLDS or the
     * broken one (invariants.h). */
    ccai_broken (*check)(const ccai_segment *s);
} ccai_kind;

extern const ccai_kind ccai_kind_classic; /* kinds/classic.c */
extern const ccai_kind ccai_kind_pages;   /* kinds/pages.c   */

#endif /* CCA_KIND_H */
