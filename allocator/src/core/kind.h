/*
 * kind.h — the segment-kind seam: how a segment gets device memory and
 * gives it back. The core never asks which kind it has.
 *
 * - One kind per allocator, chosen by cca_create: pages where expandable:1
 *   and the upstream has virtual memory, else classic (kinds/classic.c:
 *   one upstream allocation a segment, given back whole).
 * - pages (kinds/pages.c): a reserved address range whose pages are mapped
 *   as blocks need them and unmapped when free (I7). Only pages marks a
 *   block `unmapped`, so classic never pays for usable, gap and back.
 * - Every operation runs under the allocator's lock, but start (cca_create,
 *   before anyone else can reach the allocator).
 *
 *     core ──grow / reserve / back──▶ kind ──alloc / vm_map──▶ upstream
 *          ◀── segment records (segment.c: new, link, unlink) ──
 */
#ifndef CCA_KIND_H
#define CCA_KIND_H

#include "../support/invariants.h" /* ccai_broken: what a kind's check reports */

typedef struct ccai_kind {
    const char *name;     /* "classic" or "pages": the snapshot's segment_kind */
    bool medium_pool;     /* requests below large_min get a pool of their own */

    size_t max_range;     /* no request or arena is larger */
    uint8_t seg_flags;    /* what every block carries of the kind (b->seg) */

    /* Wait for the work that may touch what a release gives back and complete
     * the pending frees it covers (a failure ends the retry); NULL: classic,
     * whose cudaFree waits by itself. */
    cca_status (*quiesce)(cca_allocator *a);
    /* At cca_create (pages: the upstream's granularity); NULL: nothing. */
    cca_status (*start)(cca_allocator *a);
    /* Step 5b: a free block of at least `rounded` bytes for (key, pool) from
     * new memory; it may still need `back`. room: the device's free memory,
     * asked at most once. CCA_ERR_OUT_OF_MEMORY: nothing changed. */
    cca_status (*grow)(cca_allocator *a, size_t rounded, cca_stream key, ccai_pool_kind pool, ccai_device_room *room,
                       ccai_block **b);
    /* A segment of `size` bytes, its one free block indexed; shared: an
     * arena (greedy, a domain's footprint), every byte usable at once. */
    cca_status (*reserve)(cca_allocator *a, size_t size, cca_stream stream, ccai_pool_kind pool, bool shared,
                          ccai_segment **out);
    /* Of a free block b marked unmapped: make its first `held` bytes usable
     * (back); are they (usable; drops the mark when all of b is); does its
     * remainder after `rounded` reach an unmapped page the request does not
     * touch (gap: step 6 splits it off rather than map it as slack). */
    cca_status (*back)(cca_allocator *a, ccai_block *b, size_t held, ccai_device_room *room);
    bool (*usable)(ccai_block *b, size_t held);
    bool (*gap)(const ccai_block *b, size_t rounded);
    /* bytes in the kind's unit (pages: whole pages, saturating). */
    size_t (*whole)(const cca_allocator *a, size_t bytes);
    /* The least a request adds to reserved bytes (classic: its least segment;
     * pages: its pages); what the retry releases first for it (shortfall);
     * the new bytes it would map in free block b once every free page is
     * unmapped (new_bytes; NULL: the kind cannot say). */
    size_t (*least)(const cca_allocator *a, size_t rounded, ccai_pool_kind pool);
    size_t (*shortfall)(const cca_allocator *a, size_t rounded, ccai_pool_kind pool);
    size_t (*new_bytes)(const cca_allocator *a, const ccai_block *b, size_t rounded);
    /* The greedy arena's size made whole (pages: whole pages, within the cap
     * and the device's free memory). */
    cca_status (*fit_arena)(cca_allocator *a, size_t *size);

    /* Give cached memory back until reserved <= keep (release.c's order);
     * a refusal is the thread's message, the rest still released. */
    cca_status (*release_cached)(cca_allocator *a, size_t keep, unsigned flags, cca_release_report *r);
    /* Per segment: bytes held of the device; what a full release could give
     * back; free bytes its live blocks keep mapped (classic: 0). */
    size_t (*reserved)(const ccai_segment *s);
    size_t (*releasable)(const ccai_segment *s);
    size_t (*trapped)(const ccai_segment *s);
    /* Give back empty segment s (on a refusal it stays, indexed). */
    cca_status (*release)(cca_allocator *a, ccai_segment *s);
    /* cca_destroy's part; keep_mapped: not synchronized, touch no mapped page. */
    void (*destroy)(cca_allocator *a, ccai_segment *s, bool keep_mapped, cca_status *result);
    /* The kind's own invariants of s (pages: I7, I9). */
    ccai_broken (*check)(const ccai_segment *s);
} ccai_kind;

extern const ccai_kind ccai_kind_classic; /* kinds/classic.c */
extern const ccai_kind ccai_kind_pages;   /* kinds/pages.c   */

#endif /* CCA_KIND_H */
