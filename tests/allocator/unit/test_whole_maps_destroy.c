/*
 * test_whole_maps_destroy.c — allocator/src/kinds/pages.c: cca_destroy over whole maps (vm_backing
 * CCA_VM_WHOLE_MAPS) with maps still mapped: one vm_unmap per map, each
 * whole, then the range's release; a refused unmap leaves exactly that map
 * (and so its range) on the device, every other map given back; a refused
 * synchronize leaves every map mapped (queued work may still use them).
 *
 *   pages   [0  1  2][3  4  5][6  7  8][9]      maps of 3 pages at most (the
 *                                               test hook, pages_rule.h)
 *   blocks  X (10 pages), freed: the maps cached, the range empty
 */
#include "alloc_test_util.h"
#include "pages_rule.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>

#define PG ((size_t)64 * KiB)
#define S0 ((cca_stream)0x100)

typedef struct scene {
    tu_faulty f;
    cca_upstream *inner, *u;
    cca_allocator *a;
    char *x;            /* the range's base: X's address */
    uint64_t unmaps;    /* vm_unmap calls before the destroy */
} scene;

static void ten_pages_cached(scene *sc) {
    sc->inner = tu_vm_device_backed(64 * MiB, PG, CCA_VM_WHOLE_MAPS);
    sc->u = tu_faulty_create(&sc->f, sc->inner, "dx", false);
    sc->a = tu_allocator(sc->u, "expandable:1,log_oom:0,expandable_ahead:0,small_pool:0");
    ccai_pages_rule_set(sc->a, 0, 0, 192 * KiB); /* maps of 3 pages at most */
    sc->x = tu_alloc(sc->a, 10 * PG, S0);
    tu_free(sc->a, sc->x);
    cca_stats s = tu_stats(sc->a);
    cr_assert_eq(s.vm_maps, 4, "10 pages in maps of 3: 3 + 3 + 3 + 1");
    cr_assert_eq(s.mapped_bytes, 10 * PG);
    sc->unmaps = sc->f.calls[TU_FAULT_UNMAP];
}

/* What the allocator left on the device given back by hand (the caller's
 * cleanup): the maps of `maps` (first page, pages), then the range. */
static void clean_up(scene *sc, const size_t (*maps)[2], size_t n) {
    size_t reserved = tu_upstream_stats(sc->inner).vm_reserved_bytes;
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(cca_upstream_vm_unmap(sc->inner, sc->x + maps[i][0] * PG, maps[i][1] * PG), CCA_OK,
                     "pages [%zu, +%zu): %s", maps[i][0], maps[i][1], cca_last_error());
    if (reserved)
        cr_assert_eq(cca_upstream_vm_release(sc->inner, sc->x, reserved), CCA_OK, "%s", cca_last_error());
    cca_upstream_stats us = tu_upstream_stats(sc->inner);
    cr_assert_eq(us.vm_mapped_bytes + us.vm_reserved_bytes, 0, "the device holds nothing");
    cca_upstream_destroy(sc->u);
    cca_upstream_destroy(sc->inner);
}

Test(whole_maps_destroy, every_map_unmapped_whole_then_the_range_released) {
    scene sc;
    ten_pages_cached(&sc);
    cr_assert_eq(cca_destroy(sc.a), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(sc.f.calls[TU_FAULT_UNMAP] - sc.unmaps, 4, "one vm_unmap per map");
    cr_assert_eq(sc.f.ok[TU_FAULT_UNMAP] - sc.unmaps, 4, "each whole: the device granted all");
    cr_assert_eq(sc.f.ok[TU_FAULT_RELEASE], 1);
    clean_up(&sc, NULL, 0);
}

/* The second map's unmap refused: the three others go, that one stays
 * (mapped, 3 pages), and its range with it (a range is released only
 * with nothing mapped in it). */
Test(whole_maps_destroy, a_refused_unmap_leaves_that_map_alone) {
    scene sc;
    ten_pages_cached(&sc);
    sc.f.fail_at[TU_FAULT_UNMAP] = sc.unmaps + 2;
    cr_assert_eq(cca_destroy(sc.a), CCA_ERR_UPSTREAM);
    cca_upstream_stats us = tu_upstream_stats(sc.inner);
    cr_assert_eq(us.vm_mapped_bytes, 3 * PG, "the refused map, whole; the others given back");
    cr_assert_gt(us.vm_reserved_bytes, 0, "its range stays");
    TU_ASSERT_FAULTS(sc.x);
    TU_ASSERT_READABLE(sc.x + 3 * PG);
    TU_ASSERT_FAULTS(sc.x + 6 * PG);
    const size_t left[][2] = {{3, 3}};
    clean_up(&sc, left, 1);
}

/* A refused synchronize: queued work may still use the maps, so none is
 * unmapped and no range released. */
Test(whole_maps_destroy, a_refused_synchronize_unmaps_nothing) {
    scene sc;
    ten_pages_cached(&sc);
    sc.f.fail_at[TU_FAULT_SYNC] = sc.f.calls[TU_FAULT_SYNC] + 1;
    sc.f.sticky[TU_FAULT_SYNC] = true;
    cr_assert_neq(cca_destroy(sc.a), CCA_OK, "the synchronize failed: said so");
    cr_assert_eq(sc.f.calls[TU_FAULT_UNMAP], sc.unmaps, "no unmap");
    cr_assert_eq(tu_upstream_stats(sc.inner).vm_mapped_bytes, 10 * PG);
    TU_ASSERT_READABLE(sc.x + 9 * PG);
    const size_t maps[][2] = {{0, 3}, {3, 3}, {6, 3}, {9, 1}};
    clean_up(&sc, maps, 4);
}
