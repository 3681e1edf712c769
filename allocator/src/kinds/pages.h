/*
 * pages.h — the pages kind's own operations (pages.c), for the kind itself,
 * the reports that show pages (stats.c, snapshot_torch.c) and the tests.
 * The core reaches pages only through kind.h's table.
 */
#ifndef CCA_PAGES_H
#define CCA_PAGES_H

#include "../core/internal.h"

/* Are the pages under [addr, addr + len) all mapped? (len > 0) A block
 * under 64 pages that starts in the right place needs one bitmap word. */
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
 * pages? When the whole block is, the mark is dropped (a mark is
 * conservative: a split remainder inherits it, a merge ORs it), so the
 * block's next allocation skips the test. Held bytes inside the mapped
 * prefix answer with two compares: the common case is the tail, marked for
 * good (it reaches the range's unmapped end), serving a request from the
 * pages mapped ahead; a block that reaches past the prefix holds the
 * unmapped page at mapped_end, so its mark stays. */
static inline bool ccai_block_pages_mapped(ccai_block *b, size_t held) {
    const ccai_segment *s = b->segment;
    if (b->addr + held <= s->mapped_end) {
        if (b->addr + b->size <= s->mapped_end)
            b->unmapped = false;
        return true;
    }
    if (ccai_pages_mapped(s, b->addr, b->size)) {
        b->unmapped = false;
        return true;
    }
    return ccai_pages_mapped(s, b->addr, held);
}

/* CCA_OK when the device's free memory (asked now unless room->asked) is
 * unknown or holds `bytes`; else CCA_ERR_OUT_OF_MEMORY, "the device has F
 * bytes free, N needed for <what>; nothing was reserved or mapped". A
 * mem_info that fails leaves the thread's message as it was. */
cca_status ccai_device_room_for(cca_allocator *a, ccai_device_room *room, size_t bytes, const char *what);

/* The address range of a growth segment is the ceiling (device total or
 * max_reserved); when neither is known, this. */
#define CCAI_EXPANDABLE_DEFAULT_RANGE ((size_t)64 << 30)
/* The address space an allocator's growth ranges may hold before new ranges
 * shrink (pages_grow, pages.c): a quarter of a 47-bit user space, so
 * that ranges for many (domain, stream, pool) never starve the rest of the
 * process (malloc, thread stacks, other allocators) of addresses. Also the
 * kind's max_range: no one range is larger, so a request or an arena whose
 * pages pass it can never succeed (ccai_request_ceiling), and
 * ccai_expandable_reserve refuses it before its bookkeeping, whose page
 * bitmap alone is va / page / 8 bytes of host memory (2^45 for a range near
 * SIZE_MAX in 64 KiB pages). */
#define CCAI_ADDRESS_BUDGET ((size_t)32 << 40)
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

/* The growth rule's fixed parts (docs/allocator.md, "Pages, not segments"):
 * a tail map maps at least CCAI_AHEAD_LEAST, its request included; the
 * ahead is at most expandable_ahead x CCAI_AHEAD_CAP_PER_UNIT (64 MiB at
 * the default 1/16); over whole maps one map holds at most CCAI_MAP_CHUNK. */
#define CCAI_AHEAD_LEAST ((size_t)20 << 20)
#define CCAI_AHEAD_CAP_PER_UNIT ((size_t)1 << 30)
#define CCAI_MAP_CHUNK ((size_t)128 << 20)
/* Set a->rule's least step, ahead cap and largest map (bytes; rounded down
 * to pages, at least one; 0: no limit); nothing for classic segments.
 * cca_create sets them from the constants above; a test may set others
 * before the allocator's first request, to follow the rule page by page
 * (tests/support/pages_rule.h). What cca_create mapped (a greedy arena)
 * keeps its maps; a range reserved later (the arena again after
 * cca_empty_cache) follows the new rule. */
void ccai_pages_rule_set(cca_allocator *a, size_t least, size_t cap, size_t map_bytes);

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

/* Sleep and wake (sleep.c). The unmapped pages of [lo, hi); map them, one
 * call per run, all or nothing (map_missing's rule: the cap, and for
 * several runs the device's free memory, asked first); unmap every mapped
 * page of [lo, hi) (whole maps: the maps wholly inside), counting the
 * bytes into *bytes (may be NULL). Live blocks' pages too: the caller
 * holds their bytes elsewhere. */
size_t ccai_expandable_missing(const ccai_segment *s, size_t lo, size_t hi);
cca_status ccai_expandable_map_pages(cca_allocator *a, ccai_segment *s, size_t lo, size_t hi, ccai_device_room *room);
cca_status ccai_expandable_unmap_pages(cca_allocator *a, ccai_segment *s, size_t lo, size_t hi, size_t *bytes);

#endif /* CCA_PAGES_H */
