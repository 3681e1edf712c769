/*
 * test_whole_maps_destroy.c — cca_destroy over whole maps (vm_backing
 * CCA_VM_WHOLE_MAPS) with maps still mapped: one vm_unmap per map, each
 * whole, then the range's release; a refused unmap leaves exactly that map
 * (and so its range) on the device, every other map given back; a refused
 * synchronize leaves every map mapped (queued work may still use them).
 *
 *   pages   [0  1  2][3  4  5][6  7  8][9]      expandable_chunk: 3 pages
 *   blocks  X (10 pages), freed: the maps cached, the range empty
 */
#include "alloc_test_util.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>

#define PG ((size_t)64 * KiB)
#define S0 ((cca_stream)0x100)

static cca_allocator *ten_pages_cached(cca_upstream *u, char **x) {
    cca_allocator *a = tu_allocator(u, "expandable:1,log_oom:0,expandable_ahead_min:0,expandable_ahead_max:0,"
                                       "small_pool:0,expandable_chunk:192K");
    *x = tu_alloc(a, 10 * PG, S0);
    tu_free(a, *x);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.vm_maps, 4, "10 pages in maps of 3: 3 + 3 + 3 + 1");
    cr_assert_eq(s.mapped_bytes, 10 * PG);
    return a;
}

Test(whole_maps_destroy, every_map_unmapped_whole_then_the_range_released) {
    tu_faulty f;
    cca_upstream *inner = tu_vm_device_backed(64 * MiB, PG, CCA_VM_WHOLE_MAPS);
    cca_upstream *u = tu_faulty_create(&f, inner, "dx", false);
    char *x;
    cca_allocator *a = ten_pages_cached(u, &x);
    uint64_t unmaps = f.calls[TU_FAULT_UNMAP];
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(f.calls[TU_FAULT_UNMAP] - unmaps, 4, "one vm_unmap per map");
    cr_assert_eq(f.ok[TU_FAULT_UNMAP] - unmaps, 4, "each whole: the device granted all");
    cr_assert_eq(f.ok[TU_FAULT_RELEASE], 1);
    cca_upstream_stats us = tu_upstream_stats(inner);
    cr_assert_eq(us.vm_mapped_bytes + us.vm_reserved_bytes, 0, "the device holds nothing");
    cca_upstream_destroy(u);
    cca_upstream_destroy(inner);
}

/* The second map's unmap refused: the three others go, that one stays
 * (mapped, 3 pages), and its range with it (a range is released only
 * with nothing mapped in it). */
Test(whole_maps_destroy, a_refused_unmap_leaves_that_map_alone) {
    tu_faulty f;
    cca_upstream *inner = tu_vm_device_backed(64 * MiB, PG, CCA_VM_WHOLE_MAPS);
    cca_upstream *u = tu_faulty_create(&f, inner, "dx", false);
    char *x;
    cca_allocator *a = ten_pages_cached(u, &x);
    f.fail_at[TU_FAULT_UNMAP] = f.calls[TU_FAULT_UNMAP] + 2;
    cr_assert_eq(cca_destroy(a), CCA_ERR_UPSTREAM);
    cca_upstream_stats us = tu_upstream_stats(inner);
    cr_assert_eq(us.vm_mapped_bytes, 3 * PG, "the refused map, whole; the others given back");
    cr_assert_gt(us.vm_reserved_bytes, 0, "its range stays");
    cr_assert_eq(cca_upstream_vm_unmap(inner, x + 3 * PG, 3 * PG), CCA_OK, "pages [3,6): %s", cca_last_error());
    TU_ASSERT_FAULTS(x);
    TU_ASSERT_FAULTS(x + 6 * PG);
    cr_assert_eq(cca_upstream_vm_release(inner, x, us.vm_reserved_bytes), CCA_OK, "%s", cca_last_error());
    cca_upstream_destroy(u);
    cca_upstream_destroy(inner);
}

/* A refused synchronize: queued work may still use the maps, so none is
 * unmapped and no range released. */
Test(whole_maps_destroy, a_refused_synchronize_unmaps_nothing) {
    tu_faulty f;
    cca_upstream *inner = tu_vm_device_backed(64 * MiB, PG, CCA_VM_WHOLE_MAPS);
    cca_upstream *u = tu_faulty_create(&f, inner, "dx", false);
    char *x;
    cca_allocator *a = ten_pages_cached(u, &x);
    uint64_t unmaps = f.calls[TU_FAULT_UNMAP];
    f.fail_at[TU_FAULT_SYNC] = f.calls[TU_FAULT_SYNC] + 1;
    f.sticky[TU_FAULT_SYNC] = true;
    cca_status st = cca_destroy(a);
    cr_assert_neq(st, CCA_OK, "the synchronize failed: said so");
    cr_assert_eq(f.calls[TU_FAULT_UNMAP], unmaps, "no unmap");
    cca_upstream_stats us = tu_upstream_stats(inner);
    cr_assert_eq(us.vm_mapped_bytes, 10 * PG);
    TU_ASSERT_READABLE(x + 9 * PG);
    /* the caller's cleanup, map by map */
    const size_t maps[][2] = {{0, 3}, {3, 3}, {6, 3}, {9, 1}};
    for (size_t i = 0; i < 4; i++)
        cr_assert_eq(cca_upstream_vm_unmap(inner, x + maps[i][0] * PG, maps[i][1] * PG), CCA_OK, "%s",
                     cca_last_error());
    cr_assert_eq(cca_upstream_vm_release(inner, x, us.vm_reserved_bytes), CCA_OK, "%s", cca_last_error());
    cca_upstream_destroy(u);
    cca_upstream_destroy(inner);
}
