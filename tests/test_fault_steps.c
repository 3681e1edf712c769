/*
 * test_fault_steps.c — a failure at every step of the newer allocator
 * paths: expandable segments (page bitmaps), memory domains and their
 * footprint arenas, the history ring, snapshots (JSON and PyTorch's
 * pickle), the trace recorder, stream bookkeeping (record_stream's use
 * lists, the waits of a deferred free), release reports with leak lists and
 * the stats writers.
 *
 * Kept ranges: a domain's footprint arena over expandable segments whose
 * map and then the release of its range are both refused keeps the range,
 * empty, for a later release; a later arena of the domain (and
 * cca_alloc_in) serves only from the arena it reserved.
 */
#include "alloc_test_util.h"
#include "malloc_fault.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PG ((size_t)64 * KiB)

/* A simulated device of `capacity` bytes with 64 KiB pages, wrapped by a
 * tu_faulty (with events). */
static cca_upstream *faulty_device(size_t capacity, tu_faulty *f, cca_upstream **inner) {
    cca_host_options o = {.capacity = capacity, .vm_granularity = PG};
    cr_assert_eq(cca_upstream_host_create_with(&o, inner), CCA_OK, "%s", cca_last_error());
    return tu_faulty_create(f, *inner, "fx", true);
}

/* ============================================================================ */
/* Kept ranges of a refused domain arena                                        */
/* ============================================================================ */

Test(fault_steps, kept_arena_range_serves_no_later_arena_request) {
    tu_faulty f;
    cca_upstream *dev, *u = faulty_device(64 * MiB, &f, &dev);
    cca_allocator *a = tu_allocator(u, "log_oom:0,expandable:1");
    cca_domain *d;
    cr_assert_eq(cca_domain_create(a, "m", &d), CCA_OK, "%s", cca_last_error());

    /* every map and every release refused: the first try and the retry each
     * keep their range, empty: smaller than the arena below, so that best
     * fit over the arena pool would prefer them */
    f.fail_at[TU_FAULT_MAP] = f.calls[TU_FAULT_MAP] + 1;
    f.sticky[TU_FAULT_MAP] = true;
    f.fail_at[TU_FAULT_RELEASE] = f.calls[TU_FAULT_RELEASE] + 1;
    f.sticky[TU_FAULT_RELEASE] = true;
    cr_assert_eq(cca_domain_reserve(a, d, 512 * KiB), CCA_ERR_OUT_OF_MEMORY);
    tu_faulty_faults_off(&f);
    tu_check(a);
    cca_stats kept = tu_stats(a);
    cr_assert_eq(kept.reserved_bytes, 0, "nothing mapped");
    cr_assert_gt(kept.expandable_segments, 0, "the refused releases keep their ranges");

    /* a real arena now: mapped whole, so a request in it calls no upstream */
    cr_assert_eq(cca_domain_reserve(a, d, 1 * MiB), CCA_OK, "%s", cca_last_error());
    cca_stats armed = tu_stats(a);
    cr_assert_eq(armed.reserved_bytes, 1 * MiB);
    uint64_t calls = f.ok[TU_FAULT_MAP] + f.ok[TU_FAULT_RESERVE] + f.ok[TU_FAULT_ALLOC];
    void *p = NULL;
    cr_assert_eq(cca_alloc_in(a, d, 256 * KiB, NULL, &p), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(f.ok[TU_FAULT_MAP] + f.ok[TU_FAULT_RESERVE] + f.ok[TU_FAULT_ALLOC], calls,
                 "a request in the domain's arena called the upstream (served from a kept range)");
    cca_stats after = tu_stats(a);
    cr_assert_eq(after.reserved_bytes, 1 * MiB, "served outside the arena: %zu bytes reserved",
                 after.reserved_bytes);
    cr_assert_eq(after.vm_maps, armed.vm_maps);
    tu_check(a);
    tu_free(a, p);
    cr_assert_eq(cca_domain_destroy(a, d, 0, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(tu_stats(a).address_space_bytes, 0, "the kept ranges went back with the domain");
    tu_destroy_clean(a, u);
    cca_upstream_destroy(u);
    cca_upstream_stats ds = tu_upstream_stats(dev);
    cr_assert_eq(ds.vm_reserved_bytes, 0);
    cr_assert_eq(ds.bytes_in_use, 0);
    cca_upstream_destroy(dev);
}
