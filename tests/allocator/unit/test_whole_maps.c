/*
 * test_whole_maps.c — allocator/src/kinds/pages.c: expandable segments over an upstream whose maps are
 * WHOLE (vm_backing CCA_VM_WHOLE_MAPS): each vm_map one physical
 * allocation, unmapped only whole, as the CUDA upstream makes them with
 * one cuMemCreate per map.
 *
 *   device      the simulated device's rule: an unmap names whole maps
 *               (one, or a run of adjacent ones), a cut at either end is
 *               refused and changes nothing; an unmapped map's pages
 *               fault; bad vm_backing values refused everywhere.
 *   growth      a run of pages is mapped in maps of at most 128 MiB, or
 *               of the largest map the test hook sets (tests/support/
 *               pages_rule.h; 0: one map per run; less than a page: one
 *               page per map), exact calls and layout; a run of several
 *               maps the device cannot hold is refused before any map.
 *   release     trim and empty-cache unmap only maps lying wholly in free
 *               blocks; the free bytes of a map a live block shares are
 *               trapped (the report, exactly); trim(keep) takes the
 *               highest maps whole, so it may end under keep by less than
 *               a map; what stays after empty-cache is the maps live
 *               blocks touch.
 *   greedy      the arena mapped at creation in maps of 128 MiB, trimmed
 *               map by map, mapped again in maps of 128 MiB.
 *   retry       the OOM retry unmaps another stream's whole maps.
 *   invariant   I9 (check.c via kinds/pages.c) catches a start bit on an
 *               unmapped page, a run without a start, a map over the
 *               largest (the hook's, and the rule's 128 MiB).
 * The same allocator paths under faults, a random sequence and threads:
 * test_expandable_stress.c's *_over_whole_maps twins.
 */
#include "alloc_test_util.h"
#include "internal.h"
#include "pages_rule.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#define PG ((size_t)64 * KiB)
#define S0 ((cca_stream)0x100)
#define S1 ((cca_stream)0x200)

static cca_upstream *whole_device(size_t capacity) {
    return tu_vm_device_backed(capacity, PG, CCA_VM_WHOLE_MAPS);
}

/* No ahead pages, no least step (expandable_ahead:0): each request maps
 * exactly the pages it lacks, so layouts follow from the requests alone.
 * Maps of at most map_bytes (the test hook, before the first request; 0:
 * one map per run); more config in `extra` ("" for none). */
static cca_allocator *whole_allocator(cca_upstream *u, size_t map_bytes, const char *extra) {
    char conf[200];
    snprintf(conf, sizeof conf, "expandable:1,log_oom:0,expandable_ahead:0,small_pool:0%s", extra);
    cca_allocator *a = tu_allocator(u, conf);
    ccai_pages_rule_set(a, 0, 0, map_bytes);
    return a;
}

static void agree(const cca_allocator *a, cca_upstream *u, const char *what) {
    cr_assert_eq(cca_check_invariants(a), CCA_OK, "%s: %s", what, cca_last_error());
    cca_stats s = tu_stats(a);
    cca_upstream_stats us = tu_upstream_stats(u);
    cr_assert_eq(s.mapped_bytes, us.vm_mapped_bytes, "%s: mapped %zu, device %zu", what, s.mapped_bytes,
                 us.vm_mapped_bytes);
    cr_assert_eq(s.vm_maps, us.vm_map_calls, "%s", what);
    cr_assert_eq(s.vm_unmaps, us.vm_unmap_calls, "%s", what);
    cr_assert_eq(s.reserved_bytes, s.mapped_bytes, "%s", what);
}

static void finish(cca_allocator *a, cca_upstream *u) {
    tu_empty_all(a, u);
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    cca_upstream_destroy(u);
}

#define AT(base, page) ((char *)(base) + (page)*PG)

/* ---- the device ---------------------------------------------------------- */

Test(whole_maps, the_device_unmaps_whole_maps_only) {
    cca_upstream *u = whole_device(4 * MiB);
    cr_assert_eq(cca_upstream_vm_backing(u), CCA_VM_WHOLE_MAPS);
    void *base = NULL;
    cr_assert_eq(cca_upstream_vm_reserve(u, 16 * PG, &base), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_map(u, AT(base, 0), 3 * PG), CCA_OK);
    cr_assert_eq(cca_upstream_vm_map(u, AT(base, 3), 2 * PG), CCA_OK);
    cr_assert_eq(cca_upstream_vm_map(u, AT(base, 6), 2 * PG), CCA_OK);
    for (size_t p = 0; p < 8; p++)
        if (p != 5) /* not mapped */
            memset(AT(base, p), 7, PG);
    /* refused, nothing changed: a cut at the start, at the end, inside, across a hole */
    static const size_t bad[][2] = {{1, 2}, {0, 2}, {3, 1}, {4, 1}, {1, 4}, {0, 4}, {3, 3}, {5, 1}, {6, 1}, {7, 1}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cca_status st = cca_upstream_vm_unmap(u, AT(base, bad[i][0]), bad[i][1] * PG);
        cr_assert_eq(st, CCA_ERR_UPSTREAM, "unmap of pages [%zu, %zu) should be refused", bad[i][0],
                     bad[i][0] + bad[i][1]);
        cr_assert_eq(tu_upstream_stats(u).vm_mapped_bytes, 7 * PG, "a refused unmap changed what is mapped");
    }
    cr_assert_eq(cca_upstream_vm_unmap(u, AT(base, 3), 1 * PG), CCA_ERR_UPSTREAM);
    cr_assert(strstr(cca_last_error(), "whole") != NULL, "the message names the rule: %s", cca_last_error());
    for (size_t p = 0; p < 8; p++)
        if (p != 5)
            cr_assert_eq(*AT(base, p), 7, "page %zu lost its contents", p);
    /* a run of two adjacent maps in one call; then the last alone */
    cr_assert_eq(cca_upstream_vm_unmap(u, AT(base, 0), 5 * PG), CCA_OK, "%s", cca_last_error());
    TU_ASSERT_FAULTS(AT(base, 0));
    TU_ASSERT_FAULTS(AT(base, 4));
    TU_ASSERT_READABLE(AT(base, 6));
    cr_assert_eq(cca_upstream_vm_unmap(u, AT(base, 6), 2 * PG), CCA_OK, "%s", cca_last_error());
    TU_ASSERT_FAULTS(AT(base, 7));
    cca_upstream_stats us = tu_upstream_stats(u);
    cr_assert_eq(us.vm_mapped_bytes, 0);
    cr_assert_eq(us.vm_map_calls, 3);
    cr_assert_eq(us.vm_unmap_calls, 2);
    cr_assert_eq(cca_upstream_vm_release(u, base, 16 * PG), CCA_OK);
    cca_upstream_destroy(u);
}

/* A map's memory goes back to the OS with its unmap. */
Test(whole_maps, an_unmapped_map_leaves_resident_memory) {
    cca_upstream *u = tu_vm_device_backed(256 * MiB, 2 * MiB, CCA_VM_WHOLE_MAPS);
    void *base = NULL;
    cr_assert_eq(cca_upstream_vm_reserve(u, 128 * MiB, &base), CCA_OK);
    cr_assert_eq(cca_upstream_vm_map(u, base, 64 * MiB), CCA_OK);
    cr_assert_eq(cca_upstream_vm_map(u, (char *)base + 64 * MiB, 64 * MiB), CCA_OK);
    memset(base, 1, 128 * MiB);
    size_t before = tu_resident_bytes();
    cr_assert_eq(cca_upstream_vm_unmap(u, (char *)base + 64 * MiB, 64 * MiB), CCA_OK);
    size_t after = tu_resident_bytes();
    cr_assert_geq(before - after, 60 * MiB, "resident %zu -> %zu", before, after);
    cr_assert_eq(cca_upstream_vm_unmap(u, base, 64 * MiB), CCA_OK);
    cr_assert_eq(cca_upstream_vm_release(u, base, 128 * MiB), CCA_OK);
    cca_upstream_destroy(u);
}

static cca_status noop_alloc(void *ctx, size_t size, void **ptr) {
    (void)ctx, (void)size, (void)ptr;
    return CCA_ERR_OUT_OF_MEMORY;
}
static cca_status noop_free(void *ctx, void *ptr, size_t size) {
    (void)ctx, (void)ptr, (void)size;
    return CCA_OK;
}

Test(whole_maps, bad_backings_are_refused_everywhere) {
    static const int bad[] = {2, -1, 3, 1 << 30, -2147483647 - 1};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cca_host_options o = {.capacity = 64 * MiB, .vm_backing = bad[i]};
        cca_upstream *u = (cca_upstream *)1;
        cr_assert_eq(cca_upstream_host_create_with(&o, &u), CCA_ERR_INVALID_ARGUMENT, "vm_backing %d", bad[i]);
        cr_assert_null(u);
        cr_assert(strstr(cca_last_error(), "vm_backing") != NULL, "%s", cca_last_error());
        cca_upstream_ops ops = {.alloc = noop_alloc, .free = noop_free, .vm_backing = bad[i]};
        u = (cca_upstream *)1;
        cr_assert_eq(cca_upstream_custom_create(&ops, NULL, &u), CCA_ERR_INVALID_ARGUMENT, "vm_backing %d", bad[i]);
        cr_assert_null(u);
    }
    /* what the query answers: the table's value with vm ops, pages without, and for NULL */
    cca_upstream_ops ops = {.alloc = noop_alloc, .free = noop_free, .vm_backing = CCA_VM_WHOLE_MAPS};
    cca_upstream *u = NULL;
    cr_assert_eq(cca_upstream_custom_create(&ops, NULL, &u), CCA_OK);
    cr_assert_eq(cca_upstream_vm_backing(u), CCA_VM_PAGES, "no vm ops: no whole maps");
    cca_upstream_destroy(u);
    cr_assert_eq(cca_upstream_vm_backing(NULL), CCA_VM_PAGES);
    u = tu_vm_device(64 * MiB, PG);
    cr_assert_eq(cca_upstream_vm_backing(u), CCA_VM_PAGES);
    cca_upstream_destroy(u);
}

/* ---- growth -------------------------------------------------------------- */

Test(whole_maps, runs_are_mapped_in_maps_of_the_largest_map) {
    cca_upstream *u = whole_device(64 * MiB);
    cca_allocator *a = whole_allocator(u, 256 * KiB, ""); /* 4 pages */
    char *x = tu_alloc(a, 16 * PG, S0);
    cr_assert_eq((uintptr_t)x % PG, 0);
    agree(a, u, "16 pages");
    cr_assert_eq(tu_stats(a).vm_maps, 4, "16 pages in maps of 4");
    char *y = tu_alloc(a, 6 * PG, S0);
    cr_assert_eq(y, x + 16 * PG);
    cr_assert_eq(tu_stats(a).vm_maps, 6, "6 more pages: a map of 4 and one of 2");
    char *z = tu_alloc(a, PG + 512, S0);
    cr_assert_eq(z, y + 6 * PG);
    cr_assert_eq(tu_stats(a).vm_maps, 7, "two pages: one map");
    agree(a, u, "three blocks");
    /* the layout: the device refuses any unmap that cuts [16, 20) */
    cr_assert_eq(cca_upstream_vm_unmap(u, x + 17 * PG, PG), CCA_ERR_UPSTREAM);
    tu_free(a, x);
    tu_free(a, y);
    tu_free(a, z);
    finish(a, u);

    u = whole_device(64 * MiB);
    a = whole_allocator(u, 0, ""); /* one map per run */
    x = tu_alloc(a, 40 * PG, S0);
    cr_assert_eq(tu_stats(a).vm_maps, 1);
    tu_free(a, x);
    finish(a, u);

    u = whole_device(64 * MiB);
    a = whole_allocator(u, SIZE_MAX, ""); /* the largest size: no cut either */
    x = tu_alloc(a, 40 * PG, S0);
    cr_assert_eq(tu_stats(a).vm_maps, 1);
    agree(a, u, "the largest map SIZE_MAX");
    tu_free(a, x);
    finish(a, u);

    u = whole_device(64 * MiB);
    a = whole_allocator(u, 1, ""); /* under a page: a page per map */
    x = tu_alloc(a, 5 * PG, S0);
    cr_assert_eq(tu_stats(a).vm_maps, 5);
    agree(a, u, "a page per map");
    tu_free(a, x);
    finish(a, u);

    /* without the hook: the rule's 128 MiB, 64 pages of 2 MiB */
    u = tu_vm_device_backed(512 * MiB, 2 * MiB, CCA_VM_WHOLE_MAPS);
    a = tu_allocator(u, "expandable:1,log_oom:0,expandable_ahead:0,small_pool:0");
    x = tu_alloc(a, 130 * 2 * MiB, S0);
    cr_assert_eq(tu_stats(a).vm_maps, 3, "130 pages in maps of 64: 64 + 64 + 2");
    agree(a, u, "maps of 128 MiB");
    cr_assert_eq(cca_upstream_vm_unmap(u, x + 64 * 2 * MiB, 2 * MiB), CCA_ERR_UPSTREAM, "[64,128) is one map");
    tu_free(a, x);
    finish(a, u);
}

/* A run the largest map cuts into several maps is several calls: the
 * device's free memory is asked first, as for several runs, so a run it
 * cannot hold maps nothing (before, the first maps were made, the last
 * refused and the others unmapped again, raising reserved_bytes_peak). */
Test(whole_maps, a_run_of_several_maps_the_device_cannot_hold_maps_nothing) {
    const size_t cap = 16 * PG;
    cca_upstream *u = whole_device(cap);
    cca_allocator *a = whole_allocator(u, 3 * PG, "");
    char *x = tu_alloc(a, PG, S0); /* page 0 */
    void *tenant = NULL;
    cr_assert_eq(cca_upstream_alloc(u, 11 * PG, &tenant), CCA_OK); /* 4 pages left */
    void *p = (void *)1;
    cr_assert_eq(cca_alloc(a, 5 * PG, S0, &p), CCA_ERR_OUT_OF_MEMORY, "5 pages, maps of 3 and 2");
    cr_assert_null(p);
    cca_stats s = tu_stats(a);
    cca_upstream_stats us = tu_upstream_stats(u);
    cr_assert_eq(us.vm_failed_maps, 0, "asked before any map");
    cr_assert_eq(s.vm_maps, 1);
    cr_assert_eq(s.vm_unmaps, 0);
    cr_assert_eq(s.reserved_bytes_peak, PG, "the peak never saw the maps");
    agree(a, u, "after the OOM");
    tu_free(a, x);
    cr_assert_eq(cca_upstream_free(u, tenant, 11 * PG), CCA_OK);
    finish(a, u);
}

/* ---- release ------------------------------------------------------------- */

/* Y0 (1 page), Y1 (2 pages), Y2 (6 pages) from one segment whose first
 * 8 pages were mapped for X (two maps of 4) and freed:
 *     maps    [0      4)[4       8)[8)
 *     blocks  Y0|Y1 |Y2 .............|tail
 * Freeing Y1 frees pages 1-2 of map [0,4): nothing can go (trapped). */
Test(whole_maps, trim_unmaps_only_maps_wholly_free_and_reports_the_rest_trapped) {
    cca_upstream *u = whole_device(64 * MiB);
    cca_allocator *a = whole_allocator(u, 256 * KiB, "");
    char *x = tu_alloc(a, 8 * PG, S0);
    tu_free(a, x);
    char *y0 = tu_alloc(a, PG, S0), *y1 = tu_alloc(a, 2 * PG, S0), *y2 = tu_alloc(a, 6 * PG, S0);
    cr_assert_eq(y0, x);
    cr_assert_eq(y1, x + PG);
    cr_assert_eq(y2, x + 3 * PG);
    cr_assert_eq(tu_stats(a).vm_maps, 3, "page 8: one map more");
    tu_fill(y0, PG, 1);
    tu_fill(y2, 6 * PG, 3);
    tu_free(a, y1);
    cca_release_report r;
    cr_assert_eq(cca_empty_cache(a, &r), CCA_OK, "%s", cca_last_error());
    agree(a, u, "Y1 free");
    cr_assert_eq(r.pages_unmapped, 0, "pages 1-2 share map [0,4) with Y0 and Y2");
    cr_assert_eq(r.free_bytes_trapped, 2 * PG);
    cr_assert_eq(tu_stats(a).mapped_bytes, 9 * PG);

    tu_free(a, y2); /* free from page 1 to the range's end */
    memset(&r, 0xff, sizeof r);
    cr_assert_eq(cca_empty_cache(a, &r), CCA_OK, "%s", cca_last_error());
    agree(a, u, "Y0 alone");
    cr_assert_eq(r.pages_unmapped, 5, "maps [4,8) and [8,9) whole; [0,4) holds Y0");
    cr_assert_eq(r.bytes_unmapped, 5 * PG);
    cr_assert_eq(r.bytes_released, 5 * PG);
    cr_assert_eq(r.free_bytes_trapped, 3 * PG, "pages 1-3 of Y0's map");
    cr_assert_eq(r.segments_released, 0);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.reserved_bytes, 4 * PG, "what stays: the map Y0 touches");
    cr_assert_eq(s.vm_unmaps, 2, "one call per map");
    cr_assert(tu_check_fill(y0, PG, 1), "Y0 overwritten");
    TU_ASSERT_READABLE(x + 3 * PG);
    TU_ASSERT_FAULTS(x + 4 * PG);
    TU_ASSERT_FAULTS(x + 8 * PG);
    tu_free(a, y0);
    finish(a, u);
}

/* The same requests over pages: every free page goes (the contrast). */
Test(whole_maps, over_pages_the_same_requests_free_every_free_page) {
    cca_upstream *u = tu_vm_device(64 * MiB, PG);
    cca_allocator *a = whole_allocator(u, 256 * KiB, "");
    char *x = tu_alloc(a, 8 * PG, S0);
    tu_free(a, x);
    char *y0 = tu_alloc(a, PG, S0), *y1 = tu_alloc(a, 2 * PG, S0), *y2 = tu_alloc(a, 6 * PG, S0);
    cr_assert_eq(tu_stats(a).vm_maps, 2, "over pages the largest map changes nothing");
    tu_free(a, y1);
    tu_free(a, y2);
    cca_release_report r;
    cr_assert_eq(cca_empty_cache(a, &r), CCA_OK);
    cr_assert_eq(r.pages_unmapped, 8);
    cr_assert_eq(r.free_bytes_trapped, 0);
    tu_free(a, y0);
    finish(a, u);
}

/* trim(keep) gives back the highest maps whole: it may end under keep by
 * less than a map, never over it while a whole free map is left. */
Test(whole_maps, trim_takes_the_highest_maps_whole) {
    cca_upstream *u = whole_device(64 * MiB);
    cca_allocator *a = whole_allocator(u, 256 * KiB, "");
    char *x = tu_alloc(a, 12 * PG, S0); /* maps [0,4) [4,8) [8,12) */
    tu_free(a, x);
    cca_release_report r;
    cr_assert_eq(cca_trim(a, 10 * PG, &r), CCA_OK);
    agree(a, u, "trim to 10 pages");
    cr_assert_eq(tu_stats(a).reserved_bytes, 8 * PG, "[8,12) whole");
    cr_assert_eq(r.pages_unmapped, 4);
    cr_assert_eq(cca_trim(a, 8 * PG, &r), CCA_OK);
    cr_assert_eq(tu_stats(a).reserved_bytes, 8 * PG, "at keep already: nothing");
    cr_assert_eq(r.pages_unmapped, 0);
    cr_assert_eq(cca_trim(a, 5 * PG, &r), CCA_OK);
    cr_assert_eq(tu_stats(a).reserved_bytes, 4 * PG);
    cr_assert_eq(cca_trim(a, 0, &r), CCA_OK);
    agree(a, u, "trim to 0");
    cr_assert_eq(tu_stats(a).reserved_bytes, 0);
    cr_assert_eq(tu_stats(a).vm_unmaps, 3);
    finish(a, u);
}

/* A block reusing part of a map, mapped again after a trim: only the
 * pages it lacks, in maps of the largest map. */
Test(whole_maps, pages_a_trim_unmapped_are_mapped_again_in_chunks) {
    cca_upstream *u = whole_device(64 * MiB);
    cca_allocator *a = whole_allocator(u, 256 * KiB, "");
    char *x = tu_alloc(a, 2 * PG, S0);
    char *big = tu_alloc(a, 10 * PG, S0); /* maps [2,6) [6,10) [10,12) */
    char *z = tu_alloc(a, PG, S0);         /* [12,13) */
    tu_free(a, big);
    cca_release_report r;
    cr_assert_eq(cca_empty_cache(a, &r), CCA_OK);
    cr_assert_eq(r.pages_unmapped, 10);
    cr_assert_eq(r.free_bytes_trapped, 0, "each map of the hole lies in it whole");
    uint64_t maps = tu_stats(a).vm_maps;
    char *w = tu_alloc(a, 9 * PG, S0);
    cr_assert_eq(w, big, "best fit: the hole");
    cr_assert_eq(tu_stats(a).vm_maps, maps + 3, "9 pages: 4 + 4 + 1");
    agree(a, u, "mapped again");
    tu_free(a, w);
    tu_free(a, x);
    tu_free(a, z);
    finish(a, u);
}

/* ---- greedy -------------------------------------------------------------- */

/* The arena is mapped at cca_create, before the test hook could set
 * another largest map: in maps of the rule's 128 MiB. 320 MiB of 2 MiB
 * pages is maps [0,64) [64,128) [128,160); Y live in page 0 holds map
 * [0,64) whole through a trim; mapped again, in maps of 128 MiB too. */
Test(whole_maps, greedy_arena_is_mapped_in_maps_of_128_mib_and_trimmed_map_by_map) {
    const size_t P2 = 2 * MiB;
    cca_upstream *u = tu_vm_device_backed(512 * MiB, P2, CCA_VM_WHOLE_MAPS);
    cca_allocator *a = tu_allocator(u, "expandable:1,policy:greedy,greedy_bytes:320M,log_oom:0");
    agree(a, u, "arena");
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.mapped_bytes, 160 * P2);
    cr_assert_eq(s.vm_maps, 3, "the arena: maps of 64, 64 and 32 pages");
    char *y = tu_alloc(a, P2, S0);
    cca_release_report r;
    cr_assert_eq(cca_trim(a, 0, &r), CCA_OK);
    agree(a, u, "trimmed");
    cr_assert_eq(r.pages_unmapped, 96);
    cr_assert_eq(r.free_bytes_trapped, 63 * P2);
    cr_assert_eq(tu_stats(a).reserved_bytes, 64 * P2);
    char *w = tu_alloc(a, 130 * P2, S0);
    cr_assert_eq(w, y + P2);
    cr_assert_eq(tu_stats(a).vm_maps, 5, "pages [64,131): a map of 64 and one of 3");
    agree(a, u, "mapped again");
    tu_free(a, w);
    tu_free(a, y);
    cr_assert_eq(cca_trim(a, 0, &r), CCA_OK);
    agree(a, u, "all free");
    cr_assert_eq(tu_stats(a).mapped_bytes, 0);
    cr_assert_eq(cca_destroy(a), CCA_OK);
    cr_assert_eq(tu_upstream_stats(u).vm_reserved_bytes, 0);
    cca_upstream_destroy(u);
}

/* ---- the OOM retry ------------------------------------------------------- */

Test(whole_maps, the_retry_unmaps_another_streams_whole_maps) {
    cca_upstream *u = whole_device(16 * PG);
    cca_allocator *a = whole_allocator(u, 256 * KiB, "");
    char *x = tu_alloc(a, 12 * PG, S0);
    tu_free(a, x);
    char *y = tu_alloc(a, 12 * PG, S1); /* 4 pages free on the device: S0's maps must go */
    cr_assert_not_null(y);
    agree(a, u, "after the retry");
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.alloc_retries, 1);
    cr_assert_eq(s.mapped_bytes, 12 * PG);
    tu_free(a, y);
    finish(a, u);
}

/* ---- I9 ------------------------------------------------------------------ */

static ccai_segment *only_segment(cca_allocator *a) {
    cr_assert_not_null(a->segments);
    cr_assert_null(a->segments->next);
    cr_assert_not_null(a->segments->starts);
    return a->segments;
}

Test(whole_maps, invariant_i9_catches_broken_start_bits) {
    cca_upstream *u = whole_device(64 * MiB);
    cca_allocator *a = whole_allocator(u, 256 * KiB, "");
    char *x = tu_alloc(a, 6 * PG, S0); /* maps [0,4) [4,6) */
    ccai_segment *s = only_segment(a);
    cr_assert_eq(s->starts[0], (1u << 0) | (1u << 4));
    s->starts[0] |= 1u << 9; /* a start on an unmapped page */
    cr_assert_eq(cca_check_invariants(a), CCA_ERR_INVARIANT);
    cr_assert(strstr(cca_last_error(), "I9") != NULL, "%s", cca_last_error());
    s->starts[0] = 1u << 4; /* the run [0,6) without its start */
    cr_assert_eq(cca_check_invariants(a), CCA_ERR_INVARIANT);
    cr_assert(strstr(cca_last_error(), "I9") != NULL, "%s", cca_last_error());
    s->starts[0] = 1u << 0; /* one map of 6 pages, over the largest of 4 */
    cr_assert_eq(cca_check_invariants(a), CCA_ERR_INVARIANT);
    cr_assert(strstr(cca_last_error(), "I9") != NULL, "%s", cca_last_error());
    cr_assert(strstr(cca_last_error(), "a map holds more pages than") != NULL, "%s", cca_last_error());
    s->starts[0] = (1u << 0) | (1u << 4);
    cr_assert_eq(cca_check_invariants(a), CCA_OK, "%s", cca_last_error());
    tu_free(a, x);
    finish(a, u);

    /* the rule's own largest map: 128 MiB, 64 pages of 2 MiB; a run of 66
     * pages is maps [0,64) [64,66), and one map of 66 is over it */
    u = tu_vm_device_backed(256 * MiB, 2 * MiB, CCA_VM_WHOLE_MAPS);
    a = tu_allocator(u, "expandable:1,log_oom:0,expandable_ahead:0,small_pool:0");
    x = tu_alloc(a, 66 * 2 * MiB, S0);
    s = only_segment(a);
    cr_assert_eq(tu_stats(a).vm_maps, 2);
    cr_assert_eq(s->starts[0], 1u);
    cr_assert_eq(s->starts[1], 1u);
    cr_assert_eq(cca_check_invariants(a), CCA_OK, "%s", cca_last_error());
    s->starts[1] = 0;
    cr_assert_eq(cca_check_invariants(a), CCA_ERR_INVARIANT);
    cr_assert(strstr(cca_last_error(), "I9") != NULL, "%s", cca_last_error());
    cr_assert(strstr(cca_last_error(), "a map holds more pages than the growth rule's largest map") != NULL, "%s",
              cca_last_error());
    s->starts[1] = 1u;
    cr_assert_eq(cca_check_invariants(a), CCA_OK, "%s", cca_last_error());
    tu_free(a, x);
    finish(a, u);
}

/* What a release could give back counts whole maps only: with Y0 live in
 * map [0,4), its three free pages are not releasable, so a request that
 * max_reserved refuses is refused at once ("nothing cached"), where over
 * pages the retry would first try to unmap them. */
Test(whole_maps, free_pages_of_a_held_map_are_not_counted_releasable) {
    cca_upstream *u = whole_device(64 * MiB);
    char conf[64];
    snprintf(conf, sizeof conf, ",max_reserved:%zu", 6 * PG);
    cca_allocator *a = whole_allocator(u, 256 * KiB, conf);
    char *x = tu_alloc(a, 4 * PG, S0);
    tu_free(a, x);
    char *y0 = tu_alloc(a, PG, S0);
    cr_assert_eq(y0, x);
    void *p = (void *)1;
    cr_assert_eq(cca_alloc(a, 4 * PG, S1, &p), CCA_ERR_OUT_OF_MEMORY);
    cr_assert_null(p);
    char pinned[96]; /* the three free pages of Y0's map: cached, all pinned */
    snprintf(pinned, sizeof pinned, "nothing cached to release: the %zu cached bytes all share", 3 * PG);
    cr_assert(strstr(cca_last_error(), pinned) != NULL, "%s", cca_last_error());
    agree(a, u, "refused");
    cr_assert_eq(tu_stats(a).reserved_bytes, 4 * PG);
    tu_free(a, y0);
    finish(a, u);
}

/* Stats say which backing: vm_backing in the struct, the JSON and the
 * printed line; pages elsewhere. */
Test(whole_maps, stats_say_whole_maps) {
    cca_upstream *u = whole_device(64 * MiB);
    cca_allocator *a = whole_allocator(u, 256 * KiB, "");
    cr_assert_eq(tu_stats(a).vm_backing, CCA_VM_WHOLE_MAPS);
    char buf[2048] = {0};
    FILE *f = fmemopen(buf, sizeof buf - 1, "w");
    cca_stats s = tu_stats(a);
    cr_assert_eq(cca_stats_print(&s, f), CCA_OK);
    cr_assert_eq(cca_stats_write_json(&s, f), CCA_OK);
    fclose(f);
    cr_assert(strstr(buf, "page=64.00 KiB (whole maps)") != NULL, "%s", buf);
    cr_assert(strstr(buf, "\"vm_backing\":\"whole_maps\"") != NULL, "%s", buf);
    finish(a, u);
    u = tu_vm_device(64 * MiB, PG);
    a = whole_allocator(u, 256 * KiB, "");
    cr_assert_eq(tu_stats(a).vm_backing, CCA_VM_PAGES);
    finish(a, u);
    u = whole_device(64 * MiB);
    a = tu_allocator(u, "expandable:0");
    cr_assert_eq(tu_stats(a).vm_backing, CCA_VM_PAGES, "classic segments: no maps at all");
    finish(a, u);
}
