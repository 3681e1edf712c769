/*
 * test_cuda_double_whole_maps.c — allocator/src/upstream/cuda.c: the CUDA upstream's whole-maps backing
 * (cca_cuda_options.vm_backing = CCA_VM_WHOLE_MAPS, the default; upstream/cuda.c) on the
 * driver double (cuda_double.c): each vm_map is ONE cuMemCreate of its
 * size, one cuMemMap and one cuMemSetAccess, whatever its granules; an
 * unmap names whole maps (one, or a run of adjacent ones, one cuMemUnmap
 * each, in address order) and one that would cut a map, or spans a granule
 * not mapped, is refused before any driver call with nothing changed; every
 * driver call of a map and an unmap failing in turn leaves the driver and
 * the upstream's record agreeing, and nothing behind in the end.
 *
 * The double counts a VIOLATION for any call that breaks a documented
 * driver rule (an unmap of part of an allocation among them); every test
 * ends with none. It is not a GPU.
 */
#include "alloc_test_util.h"
#include "cuda_double.h"

#include <criterion/criterion.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <string.h>

static cca_upstream *whole(size_t page) {
    cca_upstream *u = NULL;
    cca_cuda_options o = {.device = 0, .vm_granularity = page, .vm_backing = CCA_VM_WHOLE_MAPS};
    cr_assert_eq(cca_upstream_cuda_create_with(&o, &u), CCA_OK, "%s", cca_last_error());
    cr_assert(cca_upstream_has_vm(u), "%s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_backing(u), CCA_VM_WHOLE_MAPS);
    return u;
}

/* A whole-maps upstream on device 0 (the driver's page) with a range of
 * `granules` reserved at *base; *g the page. */
static cca_upstream *whole_range(size_t granules, size_t *g, void **base) {
    cca_upstream *u = whole(0);
    cr_assert_eq(cca_upstream_vm_granularity(u, g), CCA_OK);
    cr_assert_eq(cca_upstream_vm_reserve(u, granules * *g, base), CCA_OK, "%s", cca_last_error());
    return u;
}

/* Map [start[m], end[m]) of the range at p for each m < n, one call each. */
static void map_runs(cca_upstream *u, char *p, size_t g, const size_t *start, const size_t *end, size_t n) {
    for (size_t m = 0; m < n; m++)
        cr_assert_eq(cca_upstream_vm_map(u, p + start[m] * g, (end[m] - start[m]) * g), CCA_OK, "map %zu: %s", m,
                     cca_last_error());
}

static void assert_no_violation(void) {
    cuda_double_stats s = cuda_double_get_stats();
    cr_assert_eq(s.violations, 0, "the upstream broke a driver rule: %s", s.last_violation);
    cr_assert_eq(s.implicit_contexts, 0, "a runtime call ran on a thread with no context");
}

static cca_upstream_stats ustats(cca_upstream *u) {
    cca_upstream_stats s;
    cr_assert_eq(cca_upstream_get_stats(u, &s), CCA_OK);
    return s;
}

/* The driver holds `maps` allocations, `granules` granules of g mapped and
 * accessible, and the upstream counts the same. */
static void expect_driver(cca_upstream *u, size_t g, size_t granules, size_t maps, const char *when) {
    cuda_double_stats s = cuda_double_get_stats();
    cr_assert_eq(s.mapped_bytes, granules * g, "%s: %zu bytes mapped, not %zu", when, s.mapped_bytes, granules * g);
    cr_assert_eq(s.accessible_bytes, granules * g, "%s: %zu accessible", when, s.accessible_bytes);
    cr_assert_eq(s.physical_bytes[0], granules * g, "%s: %zu physical", when, s.physical_bytes[0]);
    cr_assert_eq(s.handles, maps, "%s: %zu physical allocations, not %zu", when, s.handles, maps);
    cr_assert_eq(ustats(u).vm_mapped_bytes, granules * g, "%s: the upstream counts %zu", when,
                 ustats(u).vm_mapped_bytes);
}

/* The calls of the VMM functions since `before` (index order of names). */
static const char *const counted[] = {"cuMemCreate",    "cuMemMap",   "cuMemRelease",
                                      "cuMemSetAccess", "cuMemUnmap", "cudaMemGetInfo"};
#define NCOUNTED (sizeof counted / sizeof *counted)
static void calls_now(unsigned long *n) {
    for (size_t i = 0; i < NCOUNTED; i++)
        n[i] = cuda_double_calls(counted[i]);
}
static void expect_calls(const unsigned long *before, const unsigned long *want, const char *when) {
    unsigned long now[NCOUNTED];
    calls_now(now);
    for (size_t i = 0; i < NCOUNTED; i++)
        cr_assert_eq(now[i] - before[i], want[i], "%s: %lu calls of %s, not %lu", when, now[i] - before[i],
                     counted[i], want[i]);
}

/* ---- options ---------------------------------------------------------------------- */

/* vm_backing other than 0 / 1 is refused before any device is touched. */
Test(cuda_whole_maps, other_backings_are_refused_before_any_device_is_touched) {
    static const int bad[] = {2, -1, 100};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cca_upstream *u = (cca_upstream *)1;
        cca_cuda_options o = {.device = 0, .vm_backing = bad[i]};
        cr_assert_eq(cca_upstream_cuda_create_with(&o, &u), CCA_ERR_INVALID_ARGUMENT, "vm_backing %d", bad[i]);
        cr_assert_null(u);
        char want[64];
        snprintf(want, sizeof want, "vm_backing %d", bad[i]);
        cr_assert(strstr(cca_last_error(), want), "the message names it: %s", cca_last_error());
    }
    cr_assert_eq(cuda_double_calls("cudaGetDeviceCount"), 0, "a device was asked");
    cr_assert_eq(cuda_double_calls("cuDevicePrimaryCtxRetain"), 0, "a context was made");
}

/* Whole maps are the default (zeroed options, and cca_upstream_cuda_create)
 * and say so; the pages backing says so. */
Test(cuda_whole_maps, the_ops_table_says_its_backing) {
    cca_upstream *u = NULL;
    cca_cuda_options o = {.device = 0};
    cr_assert_eq(cca_upstream_cuda_create_with(&o, &u), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_backing(u), CCA_VM_WHOLE_MAPS);
    cca_upstream_destroy(u);
    cr_assert_eq(cca_upstream_cuda_create(0, &u), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_backing(u), CCA_VM_WHOLE_MAPS);
    cca_upstream_destroy(u);
    o.vm_backing = CCA_VM_PAGES;
    cr_assert_eq(cca_upstream_cuda_create_with(&o, &u), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_backing(u), CCA_VM_PAGES);
    cca_upstream_destroy(u);
    u = whole(0);
    cca_upstream_destroy(u);
    assert_no_violation();
}

/* ---- one physical allocation per map ------------------------------------------- */

/* Maps of 1, 2, 3, 5 and 8 pages side by side, in pages of the driver's
 * minimum and of 4 of them: each map is one cuMemCreate, one cuMemMap, one
 * cuMemRelease, one cuMemSetAccess and one cudaMemGetInfo; each unmap of
 * one map one cuMemUnmap. */
Test(cuda_whole_maps, one_create_map_and_set_access_per_map_whatever_its_size) {
    static const size_t pages[] = {0, 8 * MiB};
    static const size_t sizes[] = {1, 2, 3, 5, 8};
    enum { N = sizeof sizes / sizeof *sizes, TOTAL = 19 };
    for (size_t p = 0; p < sizeof pages / sizeof *pages; p++) {
        cca_upstream *u = whole(pages[p]);
        size_t g = 0;
        void *base = NULL;
        cr_assert_eq(cca_upstream_vm_granularity(u, &g), CCA_OK);
        cr_assert_eq(g, pages[p] ? pages[p] : 2 * MiB);
        cr_assert_eq(cca_upstream_vm_reserve(u, TOTAL * g, &base), CCA_OK, "%s", cca_last_error());
        char *at = base;
        size_t mapped = 0;
        for (size_t i = 0; i < N; i++) {
            unsigned long before[NCOUNTED];
            calls_now(before);
            cr_assert_eq(cca_upstream_vm_map(u, at, sizes[i] * g), CCA_OK, "%s", cca_last_error());
            static const unsigned long one_map[NCOUNTED] = {1, 1, 1, 1, 0, 1};
            char when[64];
            snprintf(when, sizeof when, "page %zu, a map of %zu", g, sizes[i]);
            expect_calls(before, one_map, when);
            mapped += sizes[i];
            expect_driver(u, g, mapped, i + 1, when);
            at += sizes[i] * g;
        }
        cr_assert_eq(cudaSetDevice(0), cudaSuccess);
        cr_assert_eq(cudaMemset(base, 1, TOTAL * g), cudaSuccess, "every byte mapped and accessible");
        at = base;
        for (size_t i = 0; i < N; i++) {
            unsigned long before[NCOUNTED];
            calls_now(before);
            cr_assert_eq(cca_upstream_vm_unmap(u, at, sizes[i] * g), CCA_OK, "%s", cca_last_error());
            static const unsigned long one_unmap[NCOUNTED] = {0, 0, 0, 0, 1, 0};
            expect_calls(before, one_unmap, "an unmap of one map");
            mapped -= sizes[i];
            expect_driver(u, g, mapped, N - 1 - i, "an unmap of one map");
            at += sizes[i] * g;
        }
        cr_assert_eq(cca_upstream_vm_release(u, base, TOTAL * g), CCA_OK, "%s", cca_last_error());
        cca_upstream_stats us = ustats(u);
        cr_assert_eq(us.vm_map_calls, N);
        cr_assert_eq(us.vm_unmap_calls, N);
        cca_upstream_destroy(u);
    }
    assert_no_violation();
}

/* The same map in page mode: a create and a map per granule (unchanged). */
Test(cuda_whole_maps, page_mode_still_makes_one_allocation_per_granule) {
    cca_upstream *u = NULL;
    cca_cuda_options o = {.device = 0, .vm_backing = CCA_VM_PAGES};
    cr_assert_eq(cca_upstream_cuda_create_with(&o, &u), CCA_OK, "%s", cca_last_error());
    size_t g = 0;
    void *base = NULL;
    cr_assert_eq(cca_upstream_vm_granularity(u, &g), CCA_OK);
    cr_assert_eq(cca_upstream_vm_reserve(u, 8 * g, &base), CCA_OK, "%s", cca_last_error());
    unsigned long before[NCOUNTED];
    calls_now(before);
    cr_assert_eq(cca_upstream_vm_map(u, base, 5 * g), CCA_OK, "%s", cca_last_error());
    static const unsigned long five[NCOUNTED] = {5, 5, 5, 1, 0, 1};
    expect_calls(before, five, "a map of 5 granules in page mode");
    expect_driver(u, g, 5, 5, "a map of 5 granules in page mode");
    cr_assert_eq(cca_upstream_vm_unmap(u, (char *)base + g, 2 * g), CCA_OK, "part of a map: %s", cca_last_error());
    expect_driver(u, g, 3, 3, "part of a map unmapped");
    cr_assert_eq(cca_upstream_vm_unmap(u, base, g), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_unmap(u, (char *)base + 3 * g, 2 * g), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_release(u, base, 8 * g), CCA_OK, "%s", cca_last_error());
    cca_upstream_destroy(u);
    assert_no_violation();
}

/* ---- whole unmaps only ------------------------------------------------------------ */

/* Maps A = [0, 4), B = [4, 6), C = [6, 7) of a range of 9 granules, 7 and 8
 * not mapped. An unmap that starts or ends inside a map, or spans granule
 * 7, is refused before any driver call: nothing changed, the message
 * names the map it would cut. Then whole maps unmap: A alone, B and C by
 * one call (one cuMemUnmap each). */
Test(cuda_whole_maps, an_unmap_cutting_a_map_is_refused_and_changes_nothing) {
    size_t g = 0;
    void *base = NULL;
    cca_upstream *u = whole_range(9, &g, &base);
    char *p = base;
    cr_assert_eq(cca_upstream_vm_map(u, p, 4 * g), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_map(u, p + 4 * g, 2 * g), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_map(u, p + 6 * g, g), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cudaSetDevice(0), cudaSuccess);
    cr_assert_eq(cudaMemset(p, 0x5a, 7 * g), cudaSuccess);
    static const struct {
        size_t first, n;
        const char *says; /* in the message */
    } refused[] = {
        {1, 3, "would cut the map of granules [0, 4)"}, /* starts inside A */
        {0, 3, "would cut the map of granules [0, 4)"}, /* ends inside A */
        {1, 1, "would cut the map of granules [0, 4)"}, /* the middle of A */
        {0, 5, "would cut the map of granules [4, 6)"}, /* A whole, ends inside B */
        {2, 4, "would cut the map of granules [0, 4)"}, /* starts inside A, ends at B's end */
        {5, 2, "would cut the map of granules [4, 6)"}, /* starts inside B */
        {3, 1, "would cut the map of granules [0, 4)"}, /* A's last granule */
        {6, 2, "granule 7 of the range"},               /* C whole, then granule 7 not mapped */
        {4, 4, "granule 7 of the range"},               /* B, C, 7 */
        {0, 9, "granule 7 of the range"},               /* everything */
        {7, 1, "granule 7 of the range"},               /* never mapped */
    };
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        unsigned long unmaps = cuda_double_calls("cuMemUnmap");
        cr_assert_eq(cca_upstream_vm_unmap(u, p + refused[i].first * g, refused[i].n * g), CCA_ERR_UPSTREAM,
                     "[%zu, +%zu)", refused[i].first, refused[i].n);
        cr_assert(strstr(cca_last_error(), refused[i].says), "[%zu, +%zu): the message says '%s': %s",
                  refused[i].first, refused[i].n, refused[i].says, cca_last_error());
        cr_assert(strstr(cca_last_error(), "nothing changed"), "%s", cca_last_error());
        cr_assert_eq(cuda_double_calls("cuMemUnmap"), unmaps, "[%zu, +%zu): the driver was asked", refused[i].first,
                     refused[i].n);
        expect_driver(u, g, 7, 3, "a refused unmap");
    }
    cr_assert(strstr(cca_last_error(), "not mapped"), "%s", cca_last_error());
    char host[64];
    cr_assert_eq(cudaMemcpy(host, p + 7 * g - sizeof host, sizeof host, cudaMemcpyDeviceToHost), cudaSuccess);
    for (size_t i = 0; i < sizeof host; i++)
        cr_assert_eq(host[i], 0x5a, "byte %zu: the contents stay", i);
    unsigned long unmaps = cuda_double_calls("cuMemUnmap");
    cr_assert_eq(cca_upstream_vm_unmap(u, p, 4 * g), CCA_OK, "A whole: %s", cca_last_error());
    cr_assert_eq(cuda_double_calls("cuMemUnmap"), unmaps + 1);
    expect_driver(u, g, 3, 2, "A unmapped");
    cr_assert_eq(cca_upstream_vm_unmap(u, p + 4 * g, 3 * g), CCA_OK, "B and C: %s", cca_last_error());
    cr_assert_eq(cuda_double_calls("cuMemUnmap"), unmaps + 3, "one cuMemUnmap per map");
    expect_driver(u, g, 0, 0, "B and C unmapped");
    /* mapped again in other cuts: the record follows the new maps */
    cr_assert_eq(cca_upstream_vm_map(u, p, 6 * g), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_unmap(u, p, 4 * g), CCA_ERR_UPSTREAM, "the old map A is gone: [0, 6) is one");
    cr_assert(strstr(cca_last_error(), "[0, 6)"), "%s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_unmap(u, p, 6 * g), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_release(u, base, 9 * g), CCA_OK, "%s", cca_last_error());
    cca_upstream_stats us = ustats(u);
    cr_assert_eq(us.vm_map_calls, 4);
    cr_assert_eq(us.vm_unmap_calls, 3);
    cca_upstream_destroy(u);
    assert_no_violation();
}

/* A map at the end of the range: the granule after it is the range's end. */
Test(cuda_whole_maps, a_map_at_the_end_of_its_range_unmaps) {
    size_t g = 0;
    void *base = NULL;
    cca_upstream *u = whole_range(4, &g, &base);
    char *p = base;
    cr_assert_eq(cca_upstream_vm_map(u, p + 2 * g, 2 * g), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_map(u, p, 2 * g), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_unmap(u, p + 3 * g, g), CCA_ERR_UPSTREAM, "the end of the last map");
    cr_assert_eq(cca_upstream_vm_unmap(u, p + 2 * g, 2 * g), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_unmap(u, p, 2 * g), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_release(u, base, 4 * g), CCA_OK, "%s", cca_last_error());
    expect_driver(u, g, 0, 0, "the end");
    cca_upstream_destroy(u);
    assert_no_violation();
}

/* ---- a run of maps: one cuMemUnmap each, in address order ---------------------------- */

/* Maps of 1, 2 and 3 granules side by side, made in reverse order; one
 * unmap of all six granules: three cuMemUnmap calls, lowest address first
 * (the second refused, with its undo refused too: the first map, and only
 * it, is then gone). */
Test(cuda_whole_maps, a_run_of_maps_unmaps_one_cuMemUnmap_each_in_address_order) {
    size_t g = 0;
    void *base = NULL;
    cca_upstream *u = whole_range(6, &g, &base);
    char *p = base;
    cr_assert_eq(cca_upstream_vm_map(u, p + 3 * g, 3 * g), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_map(u, p + g, 2 * g), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_map(u, p, g), CCA_OK, "%s", cca_last_error());
    unsigned long unmaps = cuda_double_calls("cuMemUnmap");
    cr_assert_eq(cca_upstream_vm_unmap(u, p, 6 * g), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cuda_double_calls("cuMemUnmap"), unmaps + 3);
    expect_driver(u, g, 0, 0, "the run unmapped");
    /* the order: the same maps, the second cuMemUnmap refused and the map back of the first too */
    cr_assert_eq(cca_upstream_vm_map(u, p + 3 * g, 3 * g), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_map(u, p + g, 2 * g), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_map(u, p, g), CCA_OK, "%s", cca_last_error());
    cuda_double_fail("cuMemUnmap", 2, CUDA_ERROR_UNKNOWN, false);
    cuda_double_fail("cuMemCreate", 1, CUDA_ERROR_OUT_OF_MEMORY, false);
    cr_assert_eq(cca_upstream_vm_unmap(u, p, 6 * g), CCA_ERR_UPSTREAM);
    cuda_double_clear_faults();
    cr_assert(strstr(cca_last_error(), "cuMemUnmap of map 1 (granule 1)"), "%s", cca_last_error());
    cr_assert(strstr(cca_last_error(), "they stay unmapped"), "%s", cca_last_error());
    cuda_double_stats s = cuda_double_get_stats();
    cr_assert_eq(s.mapped_bytes, 5 * g, "the lowest map went first");
    cr_assert_eq(s.handles, 2);
    cr_assert_eq(cca_upstream_vm_unmap(u, p, 6 * g), CCA_ERR_UPSTREAM, "granule 0 is not mapped: the record knows");
    cr_assert_eq(cca_upstream_vm_unmap(u, p + g, 5 * g), CCA_OK, "%s", cca_last_error());
    s = cuda_double_get_stats();
    cr_assert_eq(s.mapped_bytes + s.physical_bytes[0] + s.handles, 0);
    cr_assert_eq(cca_upstream_vm_release(u, base, 6 * g), CCA_OK, "%s", cca_last_error());
    cca_upstream_destroy(u);
    assert_no_violation();
}

/* ---- failures ------------------------------------------------------------------------ */

/* Each driver step of a map of 8 granules failing (with OOM, then another
 * error): nothing stays mapped or allocated, OOM for
 * CUDA_ERROR_OUT_OF_MEMORY else UPSTREAM, the message names the step; the
 * same map then succeeds as one allocation. */
Test(cuda_whole_maps, every_step_of_a_map_failing_leaves_nothing_behind) {
    size_t g = 0;
    void *base = NULL;
    cca_upstream *u = whole_range(8, &g, &base);
    static const char *const steps[] = {"cuMemCreate", "cuMemMap", "cuMemSetAccess"};
    static const int codes[] = {CUDA_ERROR_OUT_OF_MEMORY, CUDA_ERROR_UNKNOWN};
    for (size_t i = 0; i < 3; i++)
        for (size_t c = 0; c < 2; c++) {
            char what[96];
            snprintf(what, sizeof what, "%s failing with %d", steps[i], codes[c]);
            cuda_double_fail(steps[i], 1, codes[c], false);
            cca_status st = cca_upstream_vm_map(u, base, 8 * g);
            cuda_double_clear_faults();
            cr_assert_eq(st, codes[c] == CUDA_ERROR_OUT_OF_MEMORY ? CCA_ERR_OUT_OF_MEMORY : CCA_ERR_UPSTREAM,
                         "%s: status %d", what, st);
            cr_assert(strstr(cca_last_error(), steps[i]), "%s: %s", what, cca_last_error());
            cr_assert(strstr(cca_last_error(), "one map"), "%s: %s", what, cca_last_error());
            expect_driver(u, g, 0, 0, what);
            cr_assert_eq(cca_upstream_vm_map(u, base, 8 * g), CCA_OK, "%s, then: %s", what, cca_last_error());
            expect_driver(u, g, 8, 1, what);
            cr_assert_eq(cca_upstream_vm_unmap(u, base, 8 * g), CCA_OK, "%s", cca_last_error());
        }
    cr_assert_eq(cca_upstream_vm_release(u, base, 8 * g), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(ustats(u).vm_failed_maps, 6);
    cca_upstream_destroy(u);
    assert_no_violation();
}

/* cuMemSetAccess refused and the undo's cuMemUnmap refused too: the map
 * stays mapped (the message says so), the record keeps it (a release is
 * refused, a map over it too), and its whole unmap later gives it back. */
Test(cuda_whole_maps, a_map_whose_undo_is_refused_stays_recorded_until_unmapped) {
    size_t g = 0;
    void *base = NULL;
    cca_upstream *u = whole_range(8, &g, &base);
    cuda_double_fail("cuMemSetAccess", 1, CUDA_ERROR_UNKNOWN, false);
    cuda_double_fail("cuMemUnmap", 1, CUDA_ERROR_UNKNOWN, false);
    cr_assert_eq(cca_upstream_vm_map(u, base, 8 * g), CCA_ERR_UPSTREAM);
    cuda_double_clear_faults();
    cr_assert(strstr(cca_last_error(), "the map could not be unmapped again and stays mapped"), "%s",
              cca_last_error());
    cuda_double_stats s = cuda_double_get_stats();
    cr_assert_eq(s.mapped_bytes, 8 * g);
    cr_assert_eq(s.handles, 1);
    cr_assert_eq(cca_upstream_vm_release(u, base, 8 * g), CCA_ERR_UPSTREAM, "still mapped");
    cr_assert_eq(cca_upstream_vm_map(u, base, g), CCA_ERR_UPSTREAM, "already mapped");
    cr_assert_eq(cca_upstream_vm_unmap(u, base, 4 * g), CCA_ERR_UPSTREAM, "part of the stuck map");
    cr_assert_eq(cca_upstream_vm_unmap(u, base, 8 * g), CCA_OK, "%s", cca_last_error());
    s = cuda_double_get_stats();
    cr_assert_eq(s.mapped_bytes + s.physical_bytes[0] + s.handles, 0);
    cr_assert_eq(cca_upstream_vm_release(u, base, 8 * g), CCA_OK, "%s", cca_last_error());
    cca_upstream_destroy(u);
    assert_no_violation();
}

/* Maps A = [0, 2), B = [2, 3), C = [3, 5), D = [5, 8); one unmap of all,
 * refused at D's cuMemUnmap; the map back of A, B, C refused at C's
 * cuMemCreate; and the undo of that map back refused for A or B: that map
 * stays mapped. The message counts maps; the record follows the driver. */
Test(cuda_whole_maps, an_unmap_whose_undo_cannot_be_undone_says_what_stays_mapped) {
    static const size_t start[] = {0, 2, 3, 5}, end[] = {2, 3, 5, 8};
    for (unsigned long j = 0; j < 2; j++) {
        size_t g = 0;
        void *base = NULL;
        cca_upstream *u = whole_range(8, &g, &base);
        char *p = base;
        map_runs(u, p, g, start, end, 4);
        cuda_double_fail("cuMemUnmap", 4, CUDA_ERROR_UNKNOWN, false);        /* A, B, C go, D is refused */
        cuda_double_fail("cuMemCreate", 3, CUDA_ERROR_OUT_OF_MEMORY, false); /* A and B mapped back, C not */
        cuda_double_fail("cuMemUnmap", 5 + j, CUDA_ERROR_UNKNOWN, false);    /* the undo of A or B refused */
        cr_assert_eq(cca_upstream_vm_unmap(u, p, 8 * g), CCA_ERR_UPSTREAM);
        cuda_double_clear_faults();
        const char *says = "vm_unmap of %p (8 granules in 4 maps): cuMemUnmap of map 3 (granule 5), and mapping the "
                           "3 before it again failed too (cuMemCreate): 1 of them stays mapped (mapped again, and "
                           "its undo refused), the other 2 stay unmapped";
        char want[512];
        snprintf(want, sizeof want, says, base);
        cr_assert(strstr(cca_last_error(), want), "map %lu: the message says: %s", j, cca_last_error());
        cuda_double_stats s = cuda_double_get_stats();
        size_t stays = end[j] - start[j];
        cr_assert_eq(s.mapped_bytes, (3 + stays) * g, "map %lu: %zu bytes mapped", j, s.mapped_bytes);
        cr_assert_eq(s.handles, 2);
        unsigned long before = cuda_double_calls("cuMemUnmap");
        cr_assert_eq(cca_upstream_vm_unmap(u, p, 8 * g), CCA_ERR_UPSTREAM);
        cr_assert_eq(cuda_double_calls("cuMemUnmap"), before, "refused by the record");
        cr_assert_eq(cca_upstream_vm_unmap(u, p + start[j] * g, stays * g), CCA_OK, "%s", cca_last_error());
        cr_assert_eq(cca_upstream_vm_unmap(u, p + 5 * g, 3 * g), CCA_OK, "%s", cca_last_error());
        s = cuda_double_get_stats();
        cr_assert_eq(s.mapped_bytes + s.physical_bytes[0] + s.handles, 0);
        cr_assert_eq(cca_upstream_vm_release(u, base, 8 * g), CCA_OK, "%s", cca_last_error());
        cca_upstream_destroy(u);
        assert_no_violation();
    }
}

/* An unmap of a run of maps refused at its k-th cuMemUnmap: the maps
 * before it are mapped again, each as one new allocation, so what is
 * mapped is unchanged (contents lost) and accessible; the call fails. */
Test(cuda_whole_maps, an_unmap_refused_part_way_maps_the_maps_before_it_back_whole) {
    static const size_t start[] = {0, 2, 3, 5}, end[] = {2, 3, 5, 8};
    size_t g = 0;
    void *base = NULL;
    cca_upstream *u = whole_range(8, &g, &base);
    char *p = base;
    map_runs(u, p, g, start, end, 4);
    for (unsigned long k = 1; k <= 4; k++) {
        unsigned long creates = cuda_double_calls("cuMemCreate"), access = cuda_double_calls("cuMemSetAccess");
        cuda_double_fail("cuMemUnmap", k, CUDA_ERROR_UNKNOWN, false);
        cr_assert_eq(cca_upstream_vm_unmap(u, p, 8 * g), CCA_ERR_UPSTREAM, "cuMemUnmap failing at %lu", k);
        cuda_double_clear_faults();
        cr_assert(strstr(cca_last_error(), "contents lost: what is mapped is unchanged"), "%s", cca_last_error());
        cr_assert_eq(cuda_double_calls("cuMemCreate") - creates, k - 1, "one create per map mapped back");
        cr_assert_eq(cuda_double_calls("cuMemSetAccess") - access, k > 1, "one cuMemSetAccess over them");
        expect_driver(u, g, 8, 4, "an unmap refused part-way");
        for (size_t m = 0; m < 4; m++) /* the maps are where they were: each unmaps whole, and only whole */
            if (end[m] - start[m] > 1)
                cr_assert_eq(cca_upstream_vm_unmap(u, p + start[m] * g, g), CCA_ERR_UPSTREAM);
    }
    cr_assert_eq(cca_upstream_vm_unmap(u, p, 8 * g), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_release(u, base, 8 * g), CCA_OK, "%s", cca_last_error());
    expect_driver(u, g, 0, 0, "after the last unmap");
    cca_upstream_destroy(u);
    assert_no_violation();
}

/* ---- every driver call of a sequence failing in turn -------------------------------- */

/* The sequence: reserve 12 granules, map [0, 3), [3, 5), [5, 9), [10, 12)
 * by four calls, unmap [3, 9) (two maps, one call), map [3, 10) again,
 * unmap everything in one call, release. With the k-th call of `fn`
 * failing once: each failed step (the record and the driver agreeing
 * after it) is tried again and succeeds, the maps the upstream counts are
 * the driver's allocations after every step, and nothing is left in the
 * end. Returns how many calls of `fn` the run made. */
typedef struct step {
    bool map;
    size_t first, n;
    size_t maps_after, granules_after;
} step;

static unsigned long sequence(const char *fn, unsigned long k) {
    static const step steps[] = {
        {true, 0, 3, 1, 3},  {true, 3, 2, 2, 5},   {true, 5, 4, 3, 9},   {true, 10, 2, 4, 11},
        {false, 3, 6, 2, 5}, {true, 3, 7, 3, 12}, {false, 0, 12, 0, 0},
    };
    cca_upstream *u = whole(0);
    size_t g = 0;
    void *base = NULL;
    cr_assert_eq(cca_upstream_vm_granularity(u, &g), CCA_OK);
    unsigned long before = cuda_double_calls(fn);
    int code = strncmp(fn, "cuda", 4) == 0          ? (int)cudaErrorUnknown
               : strcmp(fn, "cuMemCreate") == 0 ? CUDA_ERROR_OUT_OF_MEMORY
                                                : CUDA_ERROR_UNKNOWN;
    cuda_double_fail(fn, k, code, false);
    cca_status st = cca_upstream_vm_reserve(u, 12 * g, &base);
    if (st != CCA_OK)
        cr_assert_eq(cca_upstream_vm_reserve(u, 12 * g, &base), CCA_OK, "%s", cca_last_error());
    char *p = base;
    size_t failures = st != CCA_OK;
    for (size_t i = 0; i < sizeof steps / sizeof *steps; i++) {
        char when[128];
        snprintf(when, sizeof when, "%s failing at call %lu, step %zu", fn, k, i);
        const step *s = &steps[i];
        cca_status (*op)(cca_upstream *, void *, size_t) = s->map ? cca_upstream_vm_map : cca_upstream_vm_unmap;
        st = op(u, p + s->first * g, s->n * g);
        if (st != CCA_OK) {
            failures++;
            cr_assert(st == CCA_ERR_UPSTREAM || st == CCA_ERR_OUT_OF_MEMORY, "%s: %d", when, st);
            size_t maps = i ? steps[i - 1].maps_after : 0, granules = i ? steps[i - 1].granules_after : 0;
            expect_driver(u, g, granules, maps, when); /* as it was */
            st = op(u, p + s->first * g, s->n * g);
            cr_assert_eq(st, CCA_OK, "%s, tried again: %s", when, cca_last_error());
        }
        expect_driver(u, g, s->granules_after, s->maps_after, when);
        cr_assert_null(cuda_double_current(), "%s: a context left current on a thread that had none", when);
    }
    st = cca_upstream_vm_release(u, base, 12 * g);
    if (st != CCA_OK) {
        failures++;
        st = cca_upstream_vm_release(u, base, 12 * g);
    }
    cr_assert_eq(st, CCA_OK, "%s failing at %lu: %s", fn, k, cca_last_error());
    cuda_double_clear_faults();
    unsigned long made = cuda_double_calls(fn) - before;
    cr_assert_leq(failures, 1, "%s failing once at %lu: %zu calls failed", fn, k, failures);
    cca_upstream_destroy(u);
    cuda_double_stats s = cuda_double_get_stats();
    cr_assert_eq(s.mapped_bytes + s.physical_bytes[0] + s.reservations + s.handles, 0, "%s at %lu: left behind", fn,
                 k);
    assert_no_violation();
    return made;
}

static void sweep(const char *fn, unsigned long want_calls) {
    unsigned long calls = sequence(fn, 1000000); /* counted, never fired */
    cr_assert_eq(calls, want_calls, "the clean sequence calls %s %lu times", fn, calls);
    for (unsigned long k = 1; k <= calls; k++)
        sequence(fn, k);
}

/* Five maps and two unmaps of 2 + 3 maps: one create, map, release and
 * set-access per map, one cuMemUnmap per map unmapped. */
Test(cuda_whole_maps, sweep_cuMemCreate) { sweep("cuMemCreate", 5); }
Test(cuda_whole_maps, sweep_cuMemMap) { sweep("cuMemMap", 5); }
Test(cuda_whole_maps, sweep_cuMemSetAccess) { sweep("cuMemSetAccess", 5); }
Test(cuda_whole_maps, sweep_cuMemUnmap) { sweep("cuMemUnmap", 5); }
Test(cuda_whole_maps, sweep_cudaMemGetInfo) { sweep("cudaMemGetInfo", 5); }
Test(cuda_whole_maps, sweep_cuCtxGetCurrent) { sweep("cuCtxGetCurrent", 9); }
Test(cuda_whole_maps, sweep_cuMemAddressReserve) { sweep("cuMemAddressReserve", 1); }
Test(cuda_whole_maps, sweep_cuMemAddressFree) { sweep("cuMemAddressFree", 1); }

/* ---- the plug's upstream text ------------------------------------------------------- */

/* "cuda:vm_backing=whole_maps" (alone, or with a page) reaches the driver:
 * under a block of 7 MiB, each of the upstream's vm_map calls is one
 * physical allocation; "cuda:vm_backing=pages" keeps one per page. (How
 * the allocator cuts what it maps is not this file's concern.) */
Test(cuda_whole_maps, the_plug_text_reaches_the_driver) {
    static const struct {
        const char *text;
        int backing;
        size_t page;
    } cases[] = {{"cuda:vm_backing=whole_maps", CCA_VM_WHOLE_MAPS, 2 * MiB},
                 {"cuda:vm_granularity=4M,vm_backing=whole_maps", CCA_VM_WHOLE_MAPS, 4 * MiB},
                 {"cuda:vm_backing=pages", CCA_VM_PAGES, 2 * MiB},
                 {"cuda:vm_backing=pages,vm_granularity=4M", CCA_VM_PAGES, 4 * MiB}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        cr_assert_eq(cca_plug_configure(cases[i].text, "expandable:1,log_oom:0"), CCA_OK, "%s", cca_last_error());
        cca_upstream *u = NULL;
        cr_assert_eq(cca_plug_get_upstream(0, &u), CCA_OK, "%s: %s", cases[i].text, cca_last_error());
        cr_assert_eq(cca_upstream_vm_backing(u), cases[i].backing, "%s", cases[i].text);
        size_t g = 0;
        cr_assert_eq(cca_upstream_vm_granularity(u, &g), CCA_OK);
        cr_assert_eq(g, cases[i].page, "%s", cases[i].text);
        unsigned long creates = cuda_double_calls("cuMemCreate");
        void *p = cca_plug_alloc(7 * MiB, 0, NULL);
        cr_assert_not_null(p, "%s: %s", cases[i].text, cca_last_error());
        cuda_double_stats s = cuda_double_get_stats();
        cca_upstream_stats us = ustats(u);
        cr_assert_geq(s.mapped_bytes, 7 * MiB, "%s", cases[i].text);
        cr_assert_eq(s.mapped_bytes, us.vm_mapped_bytes, "%s", cases[i].text);
        size_t want = cases[i].backing == CCA_VM_WHOLE_MAPS ? us.vm_map_calls : s.mapped_bytes / g;
        cr_assert_eq(s.handles, want, "%s: %zu physical allocations, not %zu", cases[i].text, s.handles, want);
        cr_assert_eq(cuda_double_calls("cuMemCreate") - creates, want, "%s", cases[i].text);
        cca_plug_free(p, 7 * MiB, 0, NULL);
        cr_assert_eq(cca_plug_reset(), CCA_OK, "%s", cca_last_error());
        s = cuda_double_get_stats();
        cr_assert_eq(s.physical_bytes[0] + s.mapped_bytes + s.reservations + s.handles, 0, "%s", cases[i].text);
    }
    assert_no_violation();
}

/* "cuda:host_memory=registered" reaches the driver: a sleep of the plug's
 * default domain pins its copy by cudaHostRegister (no cudaMallocHost),
 * the wake unregisters it; "host_memory=pinned" and no key use
 * cudaMallocHost and cudaFreeHost. */
Test(cuda_whole_maps, the_plug_host_memory_reaches_the_driver) {
    static const struct {
        const char *text;
        bool registered;
    } cases[] = {{"cuda", false},
                 {"cuda:host_memory=pinned", false},
                 {"cuda:host_memory=registered", true},
                 {"cuda:vm_backing=pages,host_memory=registered,vm_granularity=4M", true}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        cr_assert_eq(cca_plug_configure(cases[i].text, "expandable:1,log_oom:0"), CCA_OK, "%s", cca_last_error());
        cca_allocator *a = NULL;
        cr_assert_eq(cca_plug_get_allocator(0, &a), CCA_OK, "%s: %s", cases[i].text, cca_last_error());
        unsigned char *p = cca_plug_alloc(3 * MiB, 0, NULL);
        cr_assert_not_null(p, "%s: %s", cases[i].text, cca_last_error());
        memset(p, 0x6b, 3 * MiB);
        unsigned long reg = cuda_double_calls("cudaHostRegister"), unreg = cuda_double_calls("cudaHostUnregister");
        unsigned long mh = cuda_double_calls("cudaMallocHost"), fh = cuda_double_calls("cudaFreeHost");
        cr_assert_eq(cca_domain_sleep(a, NULL, 0, NULL), CCA_OK, "%s: %s", cases[i].text, cca_last_error());
        cr_assert_eq(cuda_double_get_stats().mapped_bytes, 0, "%s: asleep, nothing mapped", cases[i].text);
        cr_assert_eq(cca_domain_wake(a, NULL, NULL), CCA_OK, "%s: %s", cases[i].text, cca_last_error());
        cr_assert(p[0] == 0x6b && p[3 * MiB - 1] == 0x6b, "%s: the block's bytes came back", cases[i].text);
        unsigned long n_reg = cuda_double_calls("cudaHostRegister") - reg;
        unsigned long n_unreg = cuda_double_calls("cudaHostUnregister") - unreg;
        unsigned long n_mh = cuda_double_calls("cudaMallocHost") - mh, n_fh = cuda_double_calls("cudaFreeHost") - fh;
        if (cases[i].registered)
            cr_assert(n_reg == 1 && n_unreg == 1 && n_mh == 0 && n_fh == 0,
                      "%s: register %lu, unregister %lu, "
                      "cudaMallocHost %lu, cudaFreeHost %lu",
                      cases[i].text, n_reg, n_unreg, n_mh, n_fh);
        else
            cr_assert(n_reg == 0 && n_unreg == 0 && n_mh == 1 && n_fh == 1,
                      "%s: register %lu, unregister %lu, "
                      "cudaMallocHost %lu, cudaFreeHost %lu",
                      cases[i].text, n_reg, n_unreg, n_mh, n_fh);
        cr_assert_eq(cuda_double_get_stats().pinned_bytes, 0, "%s", cases[i].text);
        cca_plug_free(p, 3 * MiB, 0, NULL);
        cr_assert_eq(cca_plug_reset(), CCA_OK, "%s", cca_last_error());
    }
    assert_no_violation();
}

/* Registered host memory at the edges of its size, through the wrapper:
 * 1 byte and 2 MiB + 1 (not multiples of the huge page) register a whole
 * number of huge pages whose bytes are all writable and come back whole;
 * sizes whose rounding to 2 MiB passes SIZE_MAX are refused with
 * CCA_ERR_OUT_OF_MEMORY, nothing registered, and the message names the
 * size asked for (not a wrapped 0). */
Test(cuda_whole_maps, registered_host_memory_at_the_edges_of_its_size) {
    cca_upstream *u = NULL;
    cca_cuda_options o = {.device = 0, .vm_backing = CCA_VM_WHOLE_MAPS, .host_memory = CCA_HOST_MEMORY_REGISTERED};
    cr_assert_eq(cca_upstream_cuda_create_with(&o, &u), CCA_OK, "%s", cca_last_error());
    const size_t ok[] = {1, 2 * MiB - 1, 2 * MiB, 2 * MiB + 1};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        unsigned char *p = NULL;
        cr_assert_eq(cca_upstream_host_alloc(u, ok[i], (void **)&p), CCA_OK, "%zu: %s", ok[i], cca_last_error());
        p[0] = 1;
        p[ok[i] - 1] = 2;
        size_t whole = (ok[i] + 2 * MiB - 1) / (2 * MiB) * (2 * MiB);
        cr_assert_eq(cuda_double_get_stats().pinned_bytes, whole, "%zu: %zu registered", ok[i],
                     cuda_double_get_stats().pinned_bytes);
        cr_assert_eq((uintptr_t)p % (2 * MiB), 0, "%zu: huge-page aligned", ok[i]);
        cr_assert_eq(cca_upstream_host_free(u, p, ok[i]), CCA_OK, "%zu: %s", ok[i], cca_last_error());
        cr_assert_eq(cuda_double_get_stats().pinned_bytes, 0);
    }
    const size_t refused[] = {SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 2 * MiB + 2, SIZE_MAX - 2 * MiB};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        void *p = (void *)1;
        cr_assert_eq(cca_upstream_host_alloc(u, refused[i], &p), CCA_ERR_OUT_OF_MEMORY, "%zu", refused[i]);
        cr_assert_null(p);
        char want[32];
        snprintf(want, sizeof want, "%zu", refused[i]);
        cr_assert(strstr(cca_last_error(), want), "%zu: the message names the size: %s", refused[i],
                  cca_last_error());
        cr_assert_eq(cuda_double_get_stats().pinned_bytes, 0);
    }
    cr_assert_eq(ustats(u).host_bytes_in_use, 0);
    cca_upstream_destroy(u);
    assert_no_violation();
}
