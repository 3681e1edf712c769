/*
 * pages.c — the pages kind (expandable:1): a segment is a reserved address
 * range whose pages are mapped as it grows and unmapped when free,
 * wherever live blocks sit.
 *
 * - A segment is a range of ADDRESS SPACE (vm_reserve, nothing behind it)
 *   cut into pages of the upstream's granularity; a page holds memory only
 *   while MAPPED. Blocks tile the range (I1): best fit, split and coalesce
 *   are the core's. A bitmap per segment says which pages are mapped.
 *
 *     pages   |##|##|##|##|  |  |##|##|##|  |  |  | ....................... |
 *     blocks  [A live |B free   |C live |D free (the tail, to the range's end) ]
 *             ##: mapped. B's middle pages were unmapped by a trim; the pages
 *             B shares with A and C stay: their free bytes are "trapped".
 *
 * - I7: every page under a LIVE or PENDING block is mapped, and under a
 *   free block without the `unmapped` mark; reserved_bytes counts mapped
 *   pages, not address space. Only a marked block gets the page test.
 * - Allocation: map the chosen block's missing pages, one vm_map per run
 *   (ccai_expandable_map). From the tail, a request that maps pages also
 *   maps AHEAD (a->rule, set by pages_start): mapped x F (expandable_ahead,
 *   default 1/16), raised so that the call maps at least 20 MiB (in the
 *   small pool small_segment), then capped at F x 1 GiB, in whole pages
 *   rounded down; F = 0: none. An ahead map refused is
 *   retried without the ahead pages, when they added any. The device is
 *   asked first when the map is several calls (runs, or over whole maps
 *   maps of one run). A map refused part-way unmaps what the call mapped:
 *   a failed allocation changes nothing.
 * - Which segment: one per (domain, stream, pool), grown at its end; two
 *   pools (small; everything else); a new range only when no free block of one
 *   fits and max_reserved and the device's free memory (ccai_device_room_for)
 *   have room for the request's pages; else a small request spills to the
 *   smallest mapped free block of the large range (spill_to_large).
 * - Release (release.c): a page wholly inside a free block, tail pages
 *   first, the newest range first, blocks in address order, each block's
 *   highest pages first; only after pages_quiesce waited (unmapping does
 *   not wait for queued work); never by cca_free; a refused unmap leaves
 *   the run mapped and counted.
 * - The greedy arena and a domain's footprint arena: one range mapped whole
 *   at creation; a refused map gives the range back, and a refused release
 *   of it keeps an empty segment (a domain's: keep_range, its large pool).
 * - Whole maps (vm_backing CCA_VM_WHOLE_MAPS: one physical allocation per
 *   map, unmapped only whole): a second bitmap, `starts`, marks each map's
 *   first page; runs are mapped in maps of at most 128 MiB
 *   (a->rule.map_pages), released highest map first (unmap_range); trapped
 *   and held bytes count maps (I9).
 *
 *     pages   |##|##|##|##|##|##|##|  |  |##|##|  ....
 *     starts   ^           ^                ^          maps [0,4) [4,7) [9,11)
 *
 * - Cost: a marked block's test is one compare inside the mapped prefix
 *   (mapped_end), else O(pages / 64); map and unmap scan the block's pages
 *   plus one upstream call per run; nothing at or above pages_hi is mapped,
 *   so searches stop there; a bitmap is npages / 8 bytes (x2 whole maps).
 *
 * docs/allocator.md, "Pages, not segments", has the rules in full.
 */
#include "pages.h"
#include "../core/block.h" /* worth a block */
#include "../core/fit.h"   /* best fit */

/* Keep the first failure of a walk that goes on (its status and message). */
static inline void ccai_note_error(cca_status st, cca_status *first, char *why, size_t len) {
    if (st != CCA_OK && *first == CCA_OK) {
        *first = st;
        snprintf(why, len, "%s", cca_last_error());
    }
}

#include <stdlib.h>
#include <string.h>


/* ---- the page bitmap ----------------------------------------------------- */

static bool page_is_mapped(const ccai_segment *s, size_t i) {
    return (s->mapped[i / 64] >> (i % 64)) & 1;
}

static void set_pages(ccai_segment *s, size_t i, size_t n, bool on) {
    if (on && i + n > s->pages_hi)
        s->pages_hi = i + n;
    for (size_t k = i; k < i + n; k++) {
        uint64_t bit = (uint64_t)1 << (k % 64);
        if (on)
            s->mapped[k / 64] |= bit;
        else
            s->mapped[k / 64] &= ~bit;
    }
    size_t prefix = (s->mapped_end - s->base) >> s->page_shift;
    if (!on && i < prefix)
        prefix = i;
    else if (on && i <= prefix) /* the prefix grows, perhaps into pages mapped before */
        prefix = ccai_pages_prefix(s, prefix);
    s->mapped_end = s->base + (prefix << s->page_shift);
}

/* The first page in [k, end) that is mapped (want) or unmapped (!want),
 * else end: a word of 64 pages per step, the page found by counting zeros.
 * No page at or above pages_hi is mapped, so neither search goes past it
 * (a range of billions of pages costs the words it has used). */
static size_t find_page(const ccai_segment *s, size_t k, size_t end, bool want) {
    if (end > s->pages_hi) {
        if (!want) /* page max(k, pages_hi) is unmapped */
            return k < end ? (k > s->pages_hi ? k : find_page(s, k, s->pages_hi, false)) : end;
        size_t found = find_page(s, k, s->pages_hi, true);
        return found < s->pages_hi ? found : end;
    }
    for (; k < end; k += 64 - k % 64) {
        uint64_t w = want ? s->mapped[k / 64] : ~s->mapped[k / 64];
        w >>= k % 64; /* bit 0: page k */
        if (w) {
            size_t first = k + (size_t)__builtin_ctzll(w);
            return first < end ? first : end;
        }
    }
    return end;
}

/* find_page backwards: one past the last page in [lo, end) that is mapped
 * (want) or unmapped (!want), else lo; a word of 64 pages per step. */
static size_t find_page_back(const ccai_segment *s, size_t lo, size_t end, bool want) {
    if (end > s->pages_hi && end > lo) { /* pages from pages_hi up are unmapped */
        if (!want)
            return end;
        end = lo > s->pages_hi ? lo : s->pages_hi;
    }
    while (end > lo) {
        size_t k = end - 1, bit = k % 64; /* page k, and the pages below it in its word */
        uint64_t w = want ? s->mapped[k / 64] : ~s->mapped[k / 64];
        if (bit < 63)
            w &= ((uint64_t)1 << (bit + 1)) - 1;
        if (w) {
            size_t last = k - bit + 63 - (size_t)__builtin_clzll(w);
            return last >= lo ? last + 1 : lo;
        }
        end = k - bit;
    }
    return lo;
}

size_t ccai_pages_prefix(const ccai_segment *s, size_t from) {
    return find_page(s, from, s->npages, false);
}

/* The next run of pages in [*i, end) that are all mapped (want) or all
 * unmapped (!want): true with the run [*first, *first + *n) and *i moved
 * past it; false when none is left. Both ends are found a word of 64 pages
 * at a time (find_page): O(run / 64 + 1). */
static bool next_run(const ccai_segment *s, size_t *i, size_t end, bool want, size_t *first, size_t *n) {
    size_t k = find_page(s, *i, end, want);
    if (k >= end)
        return *i = end, false;
    size_t j = find_page(s, k, end, !want);
    *first = k;
    *n = j - k;
    *i = j;
    return true;
}

bool ccai_next_mapped_run(const ccai_segment *s, size_t *i, size_t end, size_t *first, size_t *n) {
    return next_run(s, i, end, true, first, n);
}

/* ---- whole maps: where each map starts ----------------------------------- */

static void set_starts(ccai_segment *s, size_t i, size_t n, bool on) {
    for (size_t k = i; k < i + n; k++) {
        uint64_t bit = (uint64_t)1 << (k % 64);
        if (on)
            s->starts[k / 64] |= bit;
        else
            s->starts[k / 64] &= ~bit;
    }
}

/* The first page in [k, end) where a map begins or nothing is mapped (so
 * the map holding page k - 1, if any, has ended), else end: a word of 64
 * pages per step. */
static size_t map_boundary(const ccai_segment *s, size_t k, size_t end) {
    for (; k < end; k += 64 - k % 64) {
        uint64_t w = (s->starts[k / 64] | ~s->mapped[k / 64]) >> (k % 64);
        if (w) {
            size_t first = k + (size_t)__builtin_ctzll(w);
            return first < end ? first : end;
        }
    }
    return end;
}

/* The first page of the map holding mapped page p: the last start bit at
 * or below p (I9: there is one), a word of 64 pages per step. */
static size_t map_first(const ccai_segment *s, size_t p) {
    for (size_t k = p;; k -= k % 64 + 1) {
        uint64_t w = s->starts[k / 64];
        if (k % 64 < 63)
            w &= ((uint64_t)1 << (k % 64 + 1)) - 1;
        if (w)
            return k - k % 64 + 63 - (size_t)__builtin_clzll(w);
        ccai_assert(k >= 64);
    }
}

/* One past the last page of the map holding mapped page p. */
static size_t map_end(const ccai_segment *s, size_t p) {
    return map_boundary(s, p + 1, s->npages);
}

/* ---- counted upstream calls ---------------------------------------------- */

/* One vm_map call: pages [first, first + n), counted; over whole maps, one
 * map (its start bit set). */
static cca_status map_one(cca_allocator *a, ccai_segment *s, size_t first, size_t n) {
    size_t bytes = n * s->page;
    cca_status st = ccai_cap_room(a, bytes);
    if (st != CCA_OK)
        return st;
    st = cca_upstream_vm_map(ccai_upstream_op(a), (void *)(s->base + first * s->page), bytes);
    if (st != CCA_OK)
        return st;
    set_pages(s, first, n, true);
    if (s->starts)
        set_starts(s, first, 1, true);
    s->mapped_pages += n;
    a->c.mapped += bytes;
    ccai_count_reserved(a, s, bytes, true);
    a->c.vm_maps++;
    a->c.pages_mapped += n;
    a->c.upstream_allocs++;
    s->domain->c.upstream_allocs++;
    if (a->history)
        ccai_history_record(a->history, CCAI_EV_SEGMENT_MAP, s->base + first * s->page, bytes, s->stream);
    return CCA_OK;
}

/* One vm_unmap call: pages [first, first + n), counted; over whole maps,
 * whole maps only (the caller's care). */
static cca_status unmap_one(cca_allocator *a, ccai_segment *s, size_t first, size_t n) {
    size_t bytes = n * s->page;
    cca_status st = cca_upstream_vm_unmap(ccai_upstream_op(a), (void *)(s->base + first * s->page), bytes);
    if (st != CCA_OK)
        return st; /* still mapped and counted */
    set_pages(s, first, n, false);
    if (s->starts)
        set_starts(s, first, n, false);
    ccai_assert(s->mapped_pages >= n && a->c.mapped >= bytes);
    s->mapped_pages -= n;
    a->c.mapped -= bytes;
    ccai_count_reserved(a, s, bytes, false);
    a->c.vm_unmaps++;
    a->c.pages_unmapped += n;
    a->c.upstream_frees++;
    s->domain->c.upstream_frees++;
    if (a->history)
        ccai_history_record(a->history, CCAI_EV_SEGMENT_UNMAP, s->base + first * s->page, bytes, s->stream);
    return CCA_OK;
}

/* Unmap pages [first, first + n): one call, or over whole maps (the run
 * is whole maps) one call per map, lowest first, so that the calls counted
 * are the driver's physical allocations given back. A refusal stops there:
 * the maps before it stay unmapped and counted as such. */
static cca_status unmap_run(cca_allocator *a, ccai_segment *s, size_t first, size_t n) {
    if (!s->starts)
        return unmap_one(a, s, first, n);
    for (size_t j = first, end = first + n; j < end;) {
        size_t e = map_boundary(s, j + 1, end);
        cca_status st = unmap_one(a, s, j, e - j);
        if (st != CCA_OK)
            return st;
        j = e;
    }
    return CCA_OK;
}

/* Map pages [first, first + n), all unmapped: one call, or over whole maps
 * one call per map of at most s->map_pages pages (0: one), from the run's
 * start. A refusal unmaps the maps this call made before it and returns
 * the refusal (its message kept): nothing changed, unless that unmap is
 * refused too (then they stay mapped and counted). */
static cca_status map_run(cca_allocator *a, ccai_segment *s, size_t first, size_t n) {
    if (!s->starts)
        return map_one(a, s, first, n);
    for (size_t done = 0; done < n;) {
        size_t k = s->map_pages && n - done > s->map_pages ? s->map_pages : n - done;
        cca_status st = map_one(a, s, first + done, k);
        if (st != CCA_OK) {
            if (done) {
                char why[CCAI_ERROR_CAP];
                snprintf(why, sizeof why, "%s", cca_last_error());
                (void)unmap_run(a, s, first, done);
                st = cca_set_error(st, "%s", why);
            }
            return st;
        }
        done += k;
    }
    return CCA_OK;
}

/* ---- the device's free memory -------------------------------------------- */

cca_status ccai_device_room_for(cca_allocator *a, ccai_device_room *room, size_t bytes, const char *what) {
    if (!room->asked) {
        char saved[CCAI_ERROR_CAP];
        size_t total = 0;
        ccai_error_save(saved);
        room->asked = true;
        if (cca_upstream_mem_info(ccai_upstream_op(a), &room->free, &total) != CCA_OK) {
            room->free = SIZE_MAX; /* unknown: the upstream decides, as without asking */
            ccai_error_restore(saved);
        }
    }
    if (room->free >= bytes)
        return CCA_OK;
    return cca_set_error(CCA_ERR_OUT_OF_MEMORY,
                     "the device has %zu bytes free, %zu needed for %s; nothing was reserved or mapped", room->free,
                     bytes, what);
}

/* ---- segments ------------------------------------------------------------ */

static void link_range(cca_allocator *a, ccai_segment *s, size_t va) {
    ccai_segment_link(a, s, s->base, va); /* counts the reservation as an upstream call */
    a->c.expandable_segments++;
    a->c.address_space += va;
}

/* A domain's footprint arena whose range could be neither mapped nor
 * released is kept as an ordinary range of the domain's large pool (stream
 * NULL), not in its arena pool: once the domain has a real arena, requests
 * take best fit over the whole arena pool (fit.h, ccai_arena_fit), and a range
 * left there would serve them outside the arena that was reserved. In the
 * large pool it is the domain's own address space like any other range:
 * growth may map pages in it, and trim, empty-cache, the domain's release or
 * cca_destroy gives it back. `ix` was attached for stream NULL beforehand;
 * the arena pool's attachment is dropped. */
static void keep_range(cca_allocator *a, ccai_segment *s, ccai_free_index *ix) {
    ccai_free_index_detach(s->index, s->stream);
    s->index = ix;
    s->pool = CCAI_POOL_LARGE;
    s->shared = false;
    s->first->seg = ccai_segment_flags(a, s);
}

cca_status ccai_expandable_reserve(cca_allocator *a, size_t va, cca_stream stream, ccai_pool_kind pool, bool shared,
                                   ccai_segment **out) {
    size_t page = a->page;
    if (va > CCAI_ADDRESS_BUDGET) /* before its bitmap: va / page / 8 bytes of host memory */
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "expandable segment of %zu bytes: more than the %zu-byte address budget",
                         va, CCAI_ADDRESS_BUDGET);
    va = (va + page - 1) / page * page;
    size_t npages = va / page;
    /* an arena is mapped whole: a map the cap or the device's free memory
     * refuses is refused before the range is reserved (and released again)
     * for nothing */
    ccai_device_room room = {false, 0};
    cca_status st = shared ? ccai_cap_room(a, va) : CCA_OK;
    if (st == CCA_OK && shared)
        st = ccai_device_room_for(a, &room, va, "the arena's pages");
    if (st != CCA_OK)
        return st;
    ccai_segment *s;
    size_t words = (npages + 63) / 64;
    st = ccai_segment_new(a, stream, pool, shared, a->whole_maps ? 2 * words : words, &s);
    if (st != CCA_OK)
        return st;
    if (a->whole_maps) { /* the start bits: the same allocation, after the mapped bits */
        s->starts = s->mapped + words;
        s->map_pages = a->rule.map_pages;
    }
    /* a domain's arena that might have to be kept empty goes to the large
     * pool then (keep_range): its bins there are made now, so that keeping
     * it cannot fail once the upstream has refused */
    bool domain_arena = pool == CCAI_POOL_ARENA;
    ccai_free_index *keep_ix = &a->serving->pools[CCAI_POOL_LARGE];
    if (domain_arena && ccai_free_index_attach(keep_ix, NULL) != CCA_OK) {
        ccai_segment_discard(a, s);
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "host malloc failed for segment bookkeeping");
    }
    void *base = NULL;
    st = cca_upstream_vm_reserve(ccai_upstream_op(a), va, &base);
    if (st != CCA_OK) {
        if (domain_arena)
            ccai_free_index_detach(keep_ix, NULL);
        ccai_segment_discard(a, s);
        return st;
    }
    s->expandable = true;
    s->first->seg = ccai_segment_flags(a, s);
    s->page = page;
    s->page_shift = (unsigned)__builtin_ctzll(page); /* a power of two: upstream.c checks */
    s->npages = npages;
    s->base = (uintptr_t)base;
    s->mapped_end = s->base; /* nothing mapped yet */
    s->first->unmapped = true;
    if (shared) { /* an arena (greedy, or a domain's footprint): mapped whole, up front */
        st = map_run(a, s, 0, npages);
        if (st == CCA_OK) {
            s->first->unmapped = false;
        } else {
            char why[CCAI_ERROR_CAP];
            snprintf(why, sizeof why, "%s", cca_last_error());
            if (cca_upstream_vm_release(ccai_upstream_op(a), base, va) != CCA_OK) {
                /* the range stays reserved: kept as an empty segment with
                 * nothing mapped, as a refused release keeps any range, so
                 * that trim, empty-cache, its domain's release or
                 * cca_destroy gives it back later (and it is counted) */
                if (domain_arena)
                    keep_range(a, s, keep_ix);
                link_range(a, s, va);
                return cca_set_error(st, "%s (and the range's release was refused: kept, empty)", why);
            }
            if (domain_arena)
                ccai_free_index_detach(keep_ix, NULL);
            a->c.upstream_allocs++; /* the reservation and its release were calls too */
            a->c.upstream_frees++;
            s->domain->c.upstream_allocs++;
            s->domain->c.upstream_frees++;
            ccai_segment_discard(a, s);
            return cca_set_error(st, "%s", why);
        }
    }
    if (domain_arena)
        ccai_free_index_detach(keep_ix, NULL);
    link_range(a, s, va);
    *out = s;
    return CCA_OK;
}

/* Unmap every mapped run of [lo, hi), highest first, while reserved > keep
 * (the last run only partly, its highest pages, when that reaches keep).
 * Runs are found a word of 64 pages at a time (find_page_back): a range
 * of billions of pages (a device of unknown size, small pages) costs
 * O(pages / 64), not a bit test per page. */
static cca_status unmap_range(cca_allocator *a, ccai_segment *s, size_t lo, size_t hi, size_t keep, size_t *pages,
                              size_t *bytes) {
    if (s->starts) { /* whole maps: only those lying wholly in [lo, hi) */
        lo = map_boundary(s, lo, hi);
        if (hi < s->npages && page_is_mapped(s, hi) && !((s->starts[hi / 64] >> (hi % 64)) & 1))
            hi = map_first(s, hi) > lo ? map_first(s, hi) : lo; /* the map holding page hi goes on past it */
    }
    size_t i = hi;
    while (i > lo && a->c.reserved > keep) {
        size_t end = find_page_back(s, lo, i, true); /* one past the highest mapped page */
        i = find_page_back(s, lo, end, false);      /* the run's first page */
        if (end == i)
            break;
        size_t n = end - i, need = (a->c.reserved - keep + s->page - 1) / s->page;
        if (s->starts) /* the highest map of the run, whole (it may take reserved below keep) */
            n = end - map_first(s, end - 1);
        else if (n > need)
            n = need;
        i = end - n;
        cca_status st = unmap_run(a, s, end - n, n);
        if (st != CCA_OK)
            return st;
        if (pages)
            *pages += n;
        if (bytes)
            *bytes += n * s->page;
    }
    return CCA_OK;
}

cca_status ccai_expandable_release(cca_allocator *a, ccai_segment *s) {
    ccai_assert(s->expandable && ccai_segment_empty(s));
    s->first->unmapped = true; /* should the release below fail, the range stays, unmapped */
    cca_status st = unmap_range(a, s, 0, s->npages, 0, NULL, NULL);
    if (st != CCA_OK)
        return st;
    st = cca_upstream_vm_release(ccai_upstream_op(a), (void *)s->base, s->size);
    if (st != CCA_OK)
        return st; /* every page unmapped; the empty range stays, indexed */
    ccai_assert(a->c.expandable_segments > 0 && a->c.address_space >= s->size);
    a->c.expandable_segments--;
    a->c.address_space -= s->size;
    ccai_segment_unlink(a, s);
    return CCA_OK;
}

void ccai_expandable_destroy(cca_allocator *a, ccai_segment *s, bool keep_mapped, cca_status *result) {
    if (keep_mapped && s->mapped_pages) { /* queued work may use them: left mapped, the range reserved */
        free(s->mapped);
        return;
    }
    size_t first, n;
    for (size_t i = 0; next_run(s, &i, s->npages, true, &first, &n);)
        for (size_t j = first, end = first + n; j < end;) { /* whole maps: one call per map */
            size_t e = s->starts ? map_boundary(s, j + 1, end) : end;
            if (cca_upstream_vm_unmap(ccai_upstream_op(a), (void *)(s->base + j * s->page), (e - j) * s->page) !=
                CCA_OK)
                *result = CCA_ERR_UPSTREAM;
            j = e;
        }
    if (cca_upstream_vm_release(ccai_upstream_op(a), (void *)s->base, s->size) != CCA_OK)
        *result = CCA_ERR_UPSTREAM;
    free(s->mapped);
}

/* ---- mapping for a request ----------------------------------------------- */

/* The runs one ccai_expandable_map call mapped, to undo them exactly if a
 * later run is refused: runs are found in address order, each a stretch of
 * pages that were unmapped before the call. */
typedef struct run_list {
    size_t n, cap;
    size_t *at; /* pairs (first page, count) */
    size_t local[32];
} run_list;

static bool run_push(run_list *r, size_t first, size_t n) {
    if (2 * r->n == r->cap) {
        size_t *bigger = malloc(2 * r->cap * sizeof *bigger);
        if (!bigger)
            return false;
        memcpy(bigger, r->at, 2 * r->n * sizeof *bigger);
        if (r->at != r->local)
            free(r->at);
        r->at = bigger;
        r->cap *= 2;
    }
    r->at[2 * r->n] = first;
    r->at[2 * r->n + 1] = n;
    r->n++;
    return true;
}

/* Pages of [lo, hi) that are not mapped, and how many vm_map calls they
 * take (calls may be NULL): one per run, over whole maps one per map of at
 * most map_pages (map_run). */
static size_t unmapped_pages(const ccai_segment *s, size_t lo, size_t hi, size_t *calls) {
    size_t pages = 0, count = 0, first, n;
    for (size_t i = lo; next_run(s, &i, hi, false, &first, &n);) {
        pages += n;
        count += s->starts && s->map_pages ? (n + s->map_pages - 1) / s->map_pages : 1;
    }
    if (calls)
        *calls = count;
    return pages;
}

/* Map every unmapped page of [lo, hi), one call per run (whole maps: per
 * map); on failure unmap what this call mapped and return the failure
 * (nothing changed). The cap and, for several calls (several runs, or over
 * whole maps a run of more than one map), the device's free memory are
 * asked once for all of them, before the first: asked call by call, a
 * refusal at a later call would map the earlier ones only to unmap them
 * (and raise reserved_bytes_peak on the way). One call needs no question
 * (the upstream refuses it whole, itself: the CUDA upstream by its own
 * cudaMemGetInfo) unless the answer is known already (room->asked). */
static cca_status map_missing(cca_allocator *a, ccai_segment *s, size_t lo, size_t hi, ccai_device_room *room) {
    size_t calls = 0, bytes = unmapped_pages(s, lo, hi, &calls) * s->page;
    cca_status st = ccai_cap_room(a, bytes);
    if (st == CCA_OK && (calls > 1 || room->asked))
        st = ccai_device_room_for(a, room, bytes, "the pages the block lacks");
    if (st != CCA_OK)
        return st;
    run_list runs = {0, 32, NULL, {0}};
    runs.at = runs.local;
    size_t start, n;
    for (size_t i = lo; st == CCA_OK && next_run(s, &i, hi, false, &start, &n);) {
        st = map_run(a, s, start, n);
        if (st == CCA_OK && !run_push(&runs, start, n)) {
            (void)unmap_run(a, s, start, n);
            st = cca_set_error(CCA_ERR_OUT_OF_MEMORY, "host malloc failed while mapping pages");
        }
    }
    if (st != CCA_OK) {
        char why[CCAI_ERROR_CAP];
        snprintf(why, sizeof why, "%s", cca_last_error());
        for (size_t r = runs.n; r-- > 0;)
            (void)unmap_run(a, s, runs.at[2 * r], runs.at[2 * r + 1]);
        st = cca_set_error(st, "%s", why);
    }
    if (runs.at != runs.local)
        free(runs.at);
    return st;
}

cca_status ccai_expandable_map(cca_allocator *a, ccai_block *b, size_t rounded, ccai_device_room *room) {
    ccai_segment *s = b->segment;
    size_t lo = (b->addr - s->base) / s->page;
    size_t hi = (b->addr + rounded - 1 - s->base) / s->page + 1;
    size_t ahead = 0;
    if (b->next == NULL && !s->shared && !a->peak_rising) { /* the tail block: the segment grows */
        const cca_config *c = &a->config;
        double want = (double)s->mapped_pages * (double)s->page * c->expandable_ahead;
        size_t cap = a->rule.cap;
        /* the least step: rule.least of new pages, the request's included */
        size_t least = a->rule.least, step = unmapped_pages(s, lo, hi, NULL) * s->page;
        if (s->pool == CCAI_POOL_SMALL && least > c->small_segment)
            least = c->small_segment;
        if (least > step && want < (double)(least - step))
            want = (double)(least - step);
        ahead = (want < (double)cap ? (size_t)want : cap) / s->page;
        if (ahead > s->npages - hi)
            ahead = s->npages - hi;
    }
    size_t before = s->mapped_pages;
    cca_status st = map_missing(a, s, lo, hi + ahead, room);
    /* no room for the ahead pages: only what the request needs (the same
     * map when the ahead pages are mapped already: it would be refused again) */
    if (st == CCA_ERR_OUT_OF_MEMORY && ahead && unmapped_pages(s, hi, hi + ahead, NULL))
        st = map_missing(a, s, lo, hi, room);
    /* after a failure nothing this call mapped stays, unless the upstream
     * refused to unmap it again: then it stays mapped and counted */
    ccai_assert(st == CCA_OK || s->mapped_pages >= before);
    (void)before;
    return st;
}

/* ---- sleep and wake (sleep.c) ------------------------------------------- */

size_t ccai_expandable_missing(const ccai_segment *s, size_t lo, size_t hi) {
    return unmapped_pages(s, lo, hi, NULL);
}

cca_status ccai_expandable_map_pages(cca_allocator *a, ccai_segment *s, size_t lo, size_t hi, ccai_device_room *room) {
    return map_missing(a, s, lo, hi, room);
}

cca_status ccai_expandable_unmap_pages(cca_allocator *a, ccai_segment *s, size_t lo, size_t hi, size_t *bytes) {
    return unmap_range(a, s, lo, hi, 0, NULL, bytes);
}

/* ---- release ------------------------------------------------------------- */

cca_status ccai_expandable_unmap_free(cca_allocator *a, ccai_block *b, size_t keep, size_t *pages, size_t *bytes) {
    ccai_segment *s = b->segment;
    size_t off = b->addr - s->base;
    size_t lo = (off + s->page - 1) / s->page;  /* first page wholly inside */
    size_t hi = (off + b->size) / s->page;      /* one past the last */
    if (hi <= lo)
        return CCA_OK;
    b->unmapped = true; /* marked before any page goes: a refusal part-way leaves it right */
    return unmap_range(a, s, lo, hi, keep, pages, bytes);
}

/* Whole maps: the maps holding free block b's first and last page that
 * reach past b (so a live or pending neighbour holds them whole: free
 * blocks never touch), as page ranges [lo, hi) into out[0..n); maps
 * between them lie wholly inside b. What trapped bytes and the retry's
 * kept pages are both counted from. */
static size_t shared_end_maps(const ccai_block *b, size_t out[2][2]) {
    const ccai_segment *s = b->segment;
    size_t off = b->addr - s->base, end = off + b->size, page = s->page;
    size_t ends[2] = {off / page, (end - 1) / page}, n = 0, left_end = 0;
    for (int k = 0; k < 2; k++) {
        size_t p = ends[k];
        if (!page_is_mapped(s, p) || (k == 1 && p < left_end)) /* not mapped, or the first's map again */
            continue;
        size_t lo = map_first(s, p), hi = map_end(s, p);
        left_end = hi;
        if (lo * page < off || hi * page > end) {
            out[n][0] = lo;
            out[n][1] = hi;
            n++;
        }
    }
    return n;
}

/* The free bytes of b inside the maps it shares with a neighbour. */
static size_t trapped_in_maps(const ccai_block *b) {
    const ccai_segment *s = b->segment;
    size_t off = b->addr - s->base, end = off + b->size, m[2][2], trapped = 0;
    for (size_t i = 0, n = shared_end_maps(b, m); i < n; i++) {
        size_t lo = m[i][0] * s->page, hi = m[i][1] * s->page;
        trapped += (hi < end ? hi : end) - (lo > off ? lo : off);
    }
    return trapped;
}

/* The pages of those maps in [first, last]: a request's new pages in b
 * are its pages less these (pages_new_bytes, the retry's need: grow.c's
 * ccai_grow_need). Over pages a neighbour
 * keeps at most one page at each end; here a map it shares may reach any
 * number of pages into b. */
size_t ccai_expandable_kept_pages(const ccai_block *b, size_t first, size_t last) {
    size_t m[2][2], kept = 0;
    for (size_t i = 0, n = shared_end_maps(b, m); i < n; i++) {
        size_t lo = m[i][0] > first ? m[i][0] : first, hi = m[i][1] < last + 1 ? m[i][1] : last + 1;
        kept += hi > lo ? hi - lo : 0;
    }
    return kept;
}

size_t ccai_expandable_trapped(const ccai_block *b) {
    if (b->segment->starts)
        return trapped_in_maps(b);
    const ccai_segment *s = b->segment;
    size_t off = b->addr - s->base, end = off + b->size, page = s->page;
    size_t first = off / page, last = (end - 1) / page;
    size_t trapped = 0;
    if (off % page && page_is_mapped(s, first)) /* the page shared with the block before */
        trapped += (first == last ? end : (first + 1) * page) - off;
    if (end % page && page_is_mapped(s, last) && (first != last || off % page == 0))
        trapped += end - (first == last ? off : last * page); /* shared with the block after */
    return trapped;
}

size_t ccai_expandable_largest_mapped(const ccai_block *b) {
    const ccai_segment *s = b->segment;
    size_t off = b->addr - s->base, end = off + b->size, page = s->page;
    size_t best = 0, first, n;
    for (size_t i = off / page; next_run(s, &i, (end - 1) / page + 1, true, &first, &n);) {
        size_t lo = first * page > off ? first * page : off, hi = (first + n) * page < end ? (first + n) * page : end;
        best = hi - lo > best ? hi - lo : best;
    }
    return best;
}

size_t ccai_expandable_held(const ccai_segment *s) {
    if (s->domain->sleep) /* asleep (sleep.c): what a refused unmap left mapped waits for the next sleep call */
        return s->mapped_pages * s->page;
    size_t pages = 0, last = 0; /* pages [0, last) counted already (blocks are in address order) */
    for (const ccai_block *b = s->first; b; b = b->next) {
        if (b->state == CCAI_FREE)
            continue;
        size_t lo = (b->addr - s->base) >> s->page_shift, hi = ((b->addr + b->size - 1 - s->base) >> s->page_shift) + 1;
        if (s->starts) { /* whole maps: every map the block touches (its pages are mapped, I7) */
            lo = map_first(s, lo);
            hi = map_end(s, hi - 1);
        }
        if (lo < last)
            lo = last;
        if (lo < hi) {
            pages += hi - lo;
            last = hi;
        }
    }
    return pages * s->page;
}

/* I9's checks: NULL, or the detail of the broken one (pages_check gives it
 * its id). */
const char *ccai_expandable_check_maps(const ccai_segment *s) {
    if (!s->starts)
        return NULL;
    /* one pass below pages_hi (no page above it was ever mapped, and a
     * start is set only with its page), a word of 64 pages at a time, each
     * map its own length (map_end) */
    size_t words = (s->pages_hi + 63) / 64;
    for (size_t w = 0; w < words; w++) {
        uint64_t m = s->mapped[w], st = s->starts[w];
        if (!(m | st))
            continue;
        uint64_t after_hole = m & ~((m << 1) | (w ? s->mapped[w - 1] >> 63 : 0));
        if (st & ~m)
            return "a map starts on a page that is not mapped";
        if (after_hole & ~st)
            return "a run of mapped pages does not begin with a map's start";
        for (; s->map_pages && st; st &= st - 1) {
            size_t i = w * 64 + (size_t)__builtin_ctzll(st);
            if (map_end(s, i) - i > s->map_pages)
                return "a map holds more pages than the growth rule's largest map";
        }
    }
    return NULL;
}

/* ---- the seam (kind.h) ------------------------------------------------------ */

static bool pages_usable(ccai_block *b, size_t held);

/* A small request whose own range cannot grow (the device or max_reserved
 * has no room for a new range's first pages): a free block of the large
 * range whose bytes it would hold are mapped already, the smallest that
 * fits (ties: the lowest address), so that memory already mapped serves it
 * rather than an OOM: a walk of the large pool's free blocks, O(free
 * blocks), only when the device or the cap is full. (Best fit alone would
 * find a smaller block whose pages are not mapped, and refuse.) It splits
 * that block as the small pool would (block.h): its remainder stays free
 * for the next one. */
typedef struct spill_pick {
    cca_allocator *a;
    cca_stream key;
    size_t rounded;
    ccai_block *best;
} spill_pick;

static bool spill_visit(void *user, const ccai_block *b) {
    spill_pick *p = user;
    ccai_block *l = (ccai_block *)b; /* the index's own record: pages_usable reads it */
    if (l->stream == p->key && l->size >= p->rounded && ccai_better_fit(l, p->best) &&
        (!l->unmapped || pages_usable(l, ccai_block_held(p->a, l, p->rounded))))
        p->best = l;
    return true;
}

static ccai_block *spill_to_large(cca_allocator *a, size_t rounded, cca_stream key) {
    spill_pick p = {a, key, rounded, NULL};
    (void)ccai_free_index_walk(&a->serving->pools[CCAI_POOL_LARGE], spill_visit, &p);
    return p.best;
}

/* Step 5b: best fit, or the tail of a new range for (key, pool) when no
 * block is large enough (first use, or address space used up) and both
 * max_reserved and the device's free memory have room for the request's
 * pages; without room, a small request takes mapped memory of the large
 * range (spill_to_large). The core then maps what the block lacks
 * (kind.h, back). */
static cca_status pages_grow(cca_allocator *a, size_t rounded, cca_stream key, ccai_pool_kind pool,
                             ccai_device_room *room, ccai_block **b) {
    *b = ccai_best_fit(a, pool, key, rounded);
    if (!*b) {
        if (a->config.policy == CCA_POLICY_GREEDY)
            return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "the greedy arena has no free block of %zu bytes", rounded);
        /* the device's or max_reserved's size; unknown: the default range,
         * or the request's pages if they need more (get_block checked that
         * they fit the ceiling and do not overflow) */
        size_t va = ccai_segment_ceiling(a);
        if (va == SIZE_MAX) {
            size_t pages = ccai_round_up(rounded, a->page);
            va = pages > CCAI_EXPANDABLE_DEFAULT_RANGE ? pages : CCAI_EXPANDABLE_DEFAULT_RANGE;
        }
        /* Address space is finite too: every (domain, stream, pool) has a
         * range of its own, and ~1,600 ranges of an 80 GiB device would
         * fill a 47-bit space. A range takes at most half of what is left
         * of the allocator's budget (CCAI_ADDRESS_BUDGET), so ranges keep
         * the device's size until the budget is nearly spent, then halve,
         * never below the request's own pages; a reservation the upstream
         * refuses is tried again at half the size, down to those pages. */
        size_t least = ccai_round_up(rounded, a->page);
        /* a new range's first block starts on a page: its map is at least
         * the request's pages, all new, so a map the cap or the device
         * refuses is refused before any range is reserved (one would stay
         * behind, empty). The device's free memory costs one mem_info per
         * new range; its answer then spares the map ahead pages it cannot
         * hold. Stale, it errs either way: memory freed by another tenant
         * since is found by the retry's own question; memory taken since,
         * by the map's refusal (the range then stays, as without asking). */
        cca_status st = ccai_cap_room(a, least);
        if (st == CCA_OK)
            st = ccai_device_room_for(a, room, least, "a new range's first pages");
        if (st == CCA_ERR_OUT_OF_MEMORY && pool == CCAI_POOL_SMALL && (*b = spill_to_large(a, rounded, key)) != NULL)
            return CCA_OK;
        if (st != CCA_OK)
            return st;
        size_t held = a->c.address_space;
        size_t left = held < CCAI_ADDRESS_BUDGET ? (CCAI_ADDRESS_BUDGET - held) / 2 : 0;
        if (va > left)
            va = left > least ? left : least;
        ccai_segment *s = NULL;
        while ((st = ccai_expandable_reserve(a, va, key, pool, false, &s)) == CCA_ERR_OUT_OF_MEMORY && va / 2 >= least)
            va /= 2;
        if (st != CCA_OK)
            return st;
        *b = s->first;
        ccai_assert((*b)->size >= rounded);
    }
    return CCA_OK; /* the core maps what the request holds (grow.c, take) */
}

/* Expandable: the bytes of new pages a request of `rounded` would map in
 * block b once every free page is unmapped: the pages under what it holds
 * of b, less the first and the last when a live or pending neighbour
 * (free neighbours merge, I2) keeps them mapped (whole maps: less every
 * page of the maps such a neighbour shares with b). */
static size_t pages_new_bytes(const cca_allocator *a, const ccai_block *b, size_t rounded) {
    const ccai_segment *s = b->segment;
    size_t page = s->page, off = b->addr - s->base, end = off + b->size;
    /* what it holds: its slack too, unless that reaches a page no live or
     * pending neighbour keeps (then unmapped, so split off: worth_splitting) */
    size_t held = rounded;
    if (!ccai_block_worth_a_block(a, b, rounded)) {
        size_t req_last = (off + rounded - 1) / page, blk_last = (end - 1) / page;
        bool kept = end % page && b->next; /* b's last page, held by the next block */
        if (blk_last - req_last <= (size_t)kept)
            held = b->size;
    }
    size_t first = off / page, last = (off + held - 1) / page, n = last - first + 1;
    /* whole maps: a neighbour holds every page of a map it shares with b,
     * and that map may reach many pages into b; those are neither new nor
     * releasable (ccai_releasable leaves them out): counted here too, the
     * retry would ask the device and max_reserved for them twice */
    if (s->starts)
        return (n - ccai_expandable_kept_pages(b, first, last)) * page;
    bool head = off % page && b->prev, tail = end % page && b->next && last == (end - 1) / page;
    n -= head;
    if (tail && !(head && first == last))
        n--;
    return n * page;
}

static size_t pages_whole(const cca_allocator *a, size_t bytes) {
    if (bytes % a->page == 0)
        return bytes;
    return bytes > SIZE_MAX - a->page ? SIZE_MAX : ccai_round_up(bytes, a->page);
}

/* its pages at least (a block that starts on a page boundary) */
static size_t pages_least(const cca_allocator *a, size_t rounded, ccai_pool_kind pool) {
    (void)pool;
    return rounded > SIZE_MAX - a->page ? SIZE_MAX : ccai_round_up(rounded, a->page);
}

static size_t pages_shortfall(const cca_allocator *a, size_t rounded, ccai_pool_kind pool) {
    (void)pool;
    return rounded + a->page;
}

/* The greedy arena in whole pages: up, unless that passes max_reserved or
 * the device's free memory (when it says: a refused mem_info is no
 * failure, its message goes); then down. */
static cca_status pages_fit_arena(cca_allocator *a, size_t *size) {
    size_t want = *size;
    if (want % a->page) {
        size_t free_b = 0, total_b = 0, limit = a->config.max_reserved ? a->config.max_reserved : SIZE_MAX;
        char saved[CCAI_ERROR_CAP];
        ccai_error_save(saved);
        if (cca_upstream_mem_info(ccai_upstream_op(a), &free_b, &total_b) != CCA_OK)
            ccai_error_restore(saved);
        else if (free_b < limit)
            limit = free_b;
        size_t down = want / a->page * a->page;
        want = limit >= a->page && down <= limit - a->page ? down + a->page : down;
        if (!want)
            return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "greedy: the arena is smaller than one page of %zu bytes",
                             a->page);
    }
    *size = want;
    return CCA_OK;
}

static ccai_block *tail_block(const ccai_segment *s) {
    ccai_block *b = s->first;
    while (b->next)
        b = b->next;
    return b;
}

/* release.c's order within pages: the tails' free pages (mapped ahead,
 * never used), then every other free page (newest segment first, blocks in
 * address order, each block's highest pages first), then (trim,
 * empty-cache) the ranges left empty with nothing mapped. Pages go only
 * with CCAI_RELEASE_UNMAP (their streams waited for). */
static cca_status pages_release_cached(cca_allocator *a, size_t keep, unsigned flags, cca_release_report *r) {
    cca_status first = CCA_OK;
    char why[CCAI_ERROR_CAP] = "";
    bool unmap = flags & CCAI_RELEASE_UNMAP;
    for (ccai_segment *s = a->segments; s && unmap && a->c.reserved > keep; s = s->next) {
        ccai_block *t = tail_block(s);
        if (t->state == CCAI_FREE)
            ccai_note_error(ccai_expandable_unmap_free(a, t, keep, &r->pages_unmapped, &r->bytes_unmapped), &first,
                            why, sizeof why);
    }
    for (ccai_segment *s = a->segments; s && unmap && a->c.reserved > keep; s = s->next)
        for (ccai_block *b = s->first; b && a->c.reserved > keep; b = b->next)
            if (b->state == CCAI_FREE)
                ccai_note_error(ccai_expandable_unmap_free(a, b, keep, &r->pages_unmapped, &r->bytes_unmapped),
                                &first, why, sizeof why);
    if (flags & CCAI_RELEASE_RANGES) {
        for (ccai_segment *s = a->segments, *next; s; s = next) {
            next = s->next;
            if (ccai_segment_empty(s) && s->mapped_pages == 0) {
                cca_status st = ccai_expandable_release(a, s);
                ccai_note_error(st, &first, why, sizeof why);
                r->segments_released += st == CCA_OK;
            }
        }
    }
    return first == CCA_OK ? CCA_OK : cca_set_error(first, "%s", why);
}

static size_t pages_reserved(const ccai_segment *s) {
    return s->mapped_pages * s->page;
}

static size_t pages_releasable(const ccai_segment *s) {
    return s->mapped_pages * s->page - ccai_expandable_held(s);
}

static size_t pages_trapped(const ccai_segment *s) {
    if (s->domain->sleep) /* asleep (sleep.c): no live block needs a page; what a refused unmap left is pinned */
        return 0;
    size_t n = 0;
    for (const ccai_block *b = s->first; b; b = b->next)
        if (b->state == CCAI_FREE)
            n += ccai_expandable_trapped(b);
    return n;
}

/* An expandable segment's bitmap: its count, and no bit past npages (I7);
 * whole maps: its start bits (I9). */
static ccai_broken pages_check(const ccai_segment *s) {
    size_t words = (s->npages + 63) / 64, count = 0;
    if (!s->page || ((size_t)1 << s->page_shift) != s->page || s->size != s->npages * s->page || s->base % s->page)
        return ccai_broke(CCAI_INV_MAPPED, "an expandable segment's range is not whole pages");
    if (s->mapped_end != s->base + (ccai_pages_prefix(s, 0) << s->page_shift))
        return ccai_broke(CCAI_INV_MAPPED, "an expandable segment's mapped prefix is not its first unmapped page");
    if (s->pages_hi > s->npages)
        return ccai_broke(CCAI_INV_MAPPED, "a segment's highest mapped page is past its end");
    /* the words below pages_hi: set_pages raises it with every bit it
     * sets, so none is set above (a device of unknown size with small
     * pages has ranges of billions of pages, walked after every call at
     * CCA_DEBUG=2) */
    for (size_t w = 0, used = (s->pages_hi + 63) / 64; w < used; w++)
        if (s->mapped[w]) /* without -mpopcnt, a call into libgcc per word */
            count += (size_t)__builtin_popcountll(s->mapped[w]);
    if (s->npages % 64 && (s->mapped[words - 1] >> (s->npages % 64)))
        return ccai_broke(CCAI_INV_MAPPED, "a page beyond the segment's end is marked mapped");
    if (count != s->mapped_pages)
        return ccai_broke(CCAI_INV_MAPPED, "a segment's mapped_pages disagrees with its bitmap");
    const char *maps = ccai_expandable_check_maps(s);
    return maps ? ccai_broke(CCAI_INV_WHOLE_MAPS, maps) : CCAI_HOLDS;
}

/* Add s to the streams to wait for, once; false when the list is full. */
static bool wait_for(cca_stream *list, size_t *n, size_t cap, cca_stream s) {
    for (size_t i = 0; i < *n; i++)
        if (list[i] == s)
            return true;
    if (*n == cap)
        return false;
    list[(*n)++] = s;
    return true;
}

/* Before free pages are unmapped: wait for the streams whose queued work
 * may still touch them, one stream_synchronize each, never the whole
 * device: the key stream of every segment (not an arena: its frees waited
 * for their users' events) with free mapped pages, and every stream a
 * pending free waits on. Then the pending frees complete. An upstream
 * without stream_synchronize, blocks no event could be recorded for, or
 * more than 16 such streams: one device synchronize instead, as before.
 * O(segments + blocks). */
static cca_status pages_quiesce(cca_allocator *a) {
    cca_stream streams[16];
    size_t n = 0;
    bool fits = a->sync_head == NULL;
    for (const ccai_segment *s = a->segments; s && fits; s = s->next)
        if (!s->shared && pages_releasable(s) > 0)
            fits = wait_for(streams, &n, 16, s->stream);
    for (const ccai_pending_queue *q = a->queues; q && fits; q = q->next)
        fits = wait_for(streams, &n, 16, q->stream);
    if (!fits || !ccai_upstream_has_stream_sync(a->upstream))
        return ccai_stream_sync_device(a);
    for (size_t i = 0; i < n; i++) {
        cca_status st = cca_upstream_stream_synchronize(ccai_upstream_op(a), streams[i]);
        if (st != CCA_OK)
            return cca_set_error(st, "synchronize of stream %p failed; %zu frees stay pending: %s", streams[i],
                                 a->c.pending, cca_last_error());
    }
    ccai_stream_complete_all(a);
    return CCA_OK;
}

static cca_status pages_start(cca_allocator *a) {
    cca_status st = cca_upstream_vm_granularity(a->upstream, &a->page);
    if (st != CCA_OK)
        return cca_error_prefix(st, "expandable:1 needs the upstream's granularity");
    a->expandable = true;
    a->whole_maps = cca_upstream_vm_backing(a->upstream) == CCA_VM_WHOLE_MAPS;
    double f = a->config.expandable_ahead;
    ccai_pages_rule_set(a, f > 0 ? CCAI_AHEAD_LEAST : 0, (size_t)(f * (double)CCAI_AHEAD_CAP_PER_UNIT),
                        CCAI_MAP_CHUNK);
    return CCA_OK;
}

void ccai_pages_rule_set(cca_allocator *a, size_t least, size_t cap, size_t map_bytes) {
    if (!a->expandable) /* classic segments: no rule */
        return;
    a->rule.least = least;
    a->rule.cap = cap;
    a->rule.map_pages = map_bytes == 0 ? 0 : map_bytes / a->page ? map_bytes / a->page : 1;
}

static bool pages_usable(ccai_block *b, size_t held) {
    return ccai_block_pages_mapped(b, held);
}

static bool pages_gap(const ccai_block *b, size_t rounded) {
    const ccai_segment *s = b->segment;
    size_t from = ccai_round_up(b->addr + rounded - s->base, s->page);
    size_t to = ccai_round_up(b->addr + b->size - s->base, s->page);
    return from < to && !ccai_pages_mapped(s, s->base + from, to - from);
}

const ccai_kind ccai_kind_pages = {
    .name = "pages",
    .medium_pool = false,
    .quiesce = pages_quiesce,
    .max_range = CCAI_ADDRESS_BUDGET,
    .seg_flags = CCAI_SEG_EXPANDABLE,
    .start = pages_start,
    .grow = pages_grow,
    .reserve = ccai_expandable_reserve,
    .back = ccai_expandable_map,
    .usable = pages_usable,
    .gap = pages_gap,
    .whole = pages_whole,
    .least = pages_least,
    .shortfall = pages_shortfall,
    .new_bytes = pages_new_bytes,
    .fit_arena = pages_fit_arena,
    .release_cached = pages_release_cached,
    .reserved = pages_reserved,
    .releasable = pages_releasable,
    .trapped = pages_trapped,
    .release = ccai_expandable_release,
    .destroy = ccai_expandable_destroy,
    .check = pages_check,
};
