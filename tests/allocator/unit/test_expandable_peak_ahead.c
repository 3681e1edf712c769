/*
 * test_expandable_peak_ahead.c — kinds/pages.c's ahead past the peak: a
 * tail growth that takes reserved bytes past their peak maps its ahead
 * pages less the bytes already cached free (ahead_past_peak), so a peak
 * raised by where blocks landed is not raised again by pages mapped for
 * a stream of growth that is not there.
 *
 * Whole maps, 2 MiB pages, the default growth rule (ahead 1/16, at least
 * 20 MiB a step, the request included): the sequence below is issue 41's
 * resnet50 case in small: a freed block leaves a hole too small for the
 * next request, which grows the tail. The rule is expandable_ahead_cached:1
 * (default 0); the last test shows the default's ahead.
 */
#include "expandable_suite.h"

static void alloc_ok(cca_allocator *a, size_t size, void **p) {
    cr_assert_eq(cca_alloc(a, size, S0, p), CCA_OK, "%s", cca_last_error());
}

Test(expandable_peak_ahead, a_peak_raising_growth_maps_no_ahead_over_cached_bytes) {
    const size_t page = 2 * MiB;
    backing = CCA_VM_WHOLE_MAPS;
    cca_upstream *u = vm_device(1024 * MiB, page);
    cca_allocator *a = tu_allocator(u, "expandable:1,log_oom:0,expandable_ahead_cached:1");
    void *p1, *p2, *p3;
    for (int round = 0; round < 3; round++) { /* the same work three times */
        alloc_ok(a, 16 * MiB, &p1); /* round 0: nothing cached, the least step: 20 MiB, 4 of them ahead */
        alloc_ok(a, 4 * MiB, &p2);  /* in those ahead pages */
        cca_stats s = tu_stats(a);
        cr_assert_eq(s.reserved_bytes, round ? 38 * MiB : 20 * MiB, "round %d: reserved %zu", round, s.reserved_bytes);
        cr_assert_eq(s.vm_maps, round ? 2 : 1, "round %d: vm_maps %llu", round, (unsigned long long)s.vm_maps);
        cr_assert_eq(cca_free(a, p1), CCA_OK); /* a 16 MiB hole, mapped */
        /* 18 MiB: the hole is too small; the tail grows by 9 pages, past the
         * peak (20 MiB) while 16 MiB are cached free: no ahead (the rule
         * alone would map 20 MiB, the least step) */
        alloc_ok(a, 18 * MiB, &p3);
        s = tu_stats(a);
        cr_assert_eq(s.reserved_bytes, 38 * MiB, "round %d: reserved %zu (the rule alone: 40 MiB)", round, s.reserved_bytes);
        cr_assert_eq(s.reserved_bytes_peak, 38 * MiB);
        cr_assert_eq(s.pages_mapped, 19, "round %d: pages mapped %llu", round, (unsigned long long)s.pages_mapped);
        /* later rounds find every page mapped: no upstream call */
        cr_assert_eq(s.vm_maps, 2, "round %d: vm_maps %llu", round, (unsigned long long)s.vm_maps);
        cr_assert_eq(s.vm_unmaps, 0);
        agree(a, u, page, 0, "after the growth");
        cr_assert_eq(cca_free(a, p2), CCA_OK);
        cr_assert_eq(cca_free(a, p3), CCA_OK);
    }
    finish(a, u);
}

/* With nothing cached, a growth past the peak maps the rule's ahead. */
Test(expandable_peak_ahead, a_growth_with_nothing_cached_keeps_its_ahead) {
    const size_t page = 2 * MiB;
    backing = CCA_VM_WHOLE_MAPS;
    cca_upstream *u = vm_device(1024 * MiB, page);
    cca_allocator *a = tu_allocator(u, "expandable:1,log_oom:0,expandable_ahead_cached:1");
    void *p1, *p2;
    alloc_ok(a, 20 * MiB, &p1); /* the least step, all of it used: nothing cached */
    alloc_ok(a, 18 * MiB, &p2); /* past the peak: the least step maps 20 MiB, 2 of them ahead */
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.reserved_bytes, 40 * MiB, "reserved %zu", s.reserved_bytes);
    cr_assert_eq(s.vm_maps, 2);
    agree(a, u, page, 0, "after the growth");
    cr_assert_eq(cca_free(a, p1), CCA_OK);
    cr_assert_eq(cca_free(a, p2), CCA_OK);
    finish(a, u);
}

/* expandable_ahead_cached:0 (the default): the rule's ahead, cached or not. */
Test(expandable_peak_ahead, the_default_maps_the_rules_ahead) {
    backing = CCA_VM_WHOLE_MAPS;
    cca_upstream *u = vm_device(1024 * MiB, 2 * MiB);
    cca_allocator *a = tu_allocator(u, "expandable:1,log_oom:0");
    void *p1, *p2, *p3;
    alloc_ok(a, 16 * MiB, &p1);
    alloc_ok(a, 4 * MiB, &p2);
    cr_assert_eq(cca_free(a, p1), CCA_OK);
    alloc_ok(a, 18 * MiB, &p3); /* the least step: 20 MiB */
    cr_assert_eq(tu_stats(a).reserved_bytes, 40 * MiB);
    cr_assert_eq(cca_free(a, p2), CCA_OK);
    cr_assert_eq(cca_free(a, p3), CCA_OK);
    finish(a, u);
}
