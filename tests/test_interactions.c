/*
 * test_interactions.c — where the allocator's features meet, held to the
 * documented semantics as exact numbers: the greedy arena over pages and
 * the sizes it refuses, request sizes at the edge of what can be rounded,
 * max_reserved with the ahead mapping and footprint arenas, trim's budget
 * and its report over expandable ranges, empty-cache's bound with live
 * blocks, and seeded random sequences of all of it against a model of
 * the mapped pages.
 */
#include <criterion/criterion.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_test_util.h"

#define PG (2 * MiB)
#define S1 ((cca_stream)0x51)

/* The simulated device behind the fault wrapper (vm ops, events held on
 * demand). */
static cca_upstream *fx_device(tu_faulty *f, size_t capacity, bool with_events) {
    return tu_faulty_create(f, tu_vm_device(capacity, PG), "fx", with_events);
}

/* No live block left: empty-cache gives everything back (reserved 0, no
 * range, nothing in use on the device), then cca_destroy. */
static void finish(cca_allocator *a, cca_upstream *u) {
    tu_empty_all(a, u);
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    cca_upstream_destroy(u);
}

static void fx_finish(cca_allocator *a, cca_upstream *u, tu_faulty *f) {
    tu_faulty_faults_off(f);
    f->fail_mem_info = false;
    f->hold_events = false;
    finish(a, u);
    cca_upstream_destroy(f->inner);
}

/* ---- the greedy arena over pages ---------------------------------------- */

/* greedy_bytes:7M over 2 MiB pages is an 8 MiB arena (whole pages, rounded
 * up). A request of up to 8 MiB fits it: after an empty-cache released the
 * arena, the request reserves it again and is served. */
Test(interactions, greedy_pages_arena_serves_up_to_its_rounded_size_after_empty_cache) {
    cca_upstream *u = tu_vm_device(256 * MiB, PG);
    cca_allocator *a = tu_allocator(u, "policy:greedy,greedy_bytes:7M,expandable:1,log_oom:0");
    cr_assert_eq(tu_stats(a).reserved_bytes, 8 * MiB);
    cca_release_report r;
    cr_assert_eq(cca_empty_cache(a, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(tu_stats(a).reserved_bytes, 0);
    cr_assert_eq(tu_stats(a).segments, 0, "the arena's empty range went back");
    void *p = NULL;
    cr_assert_eq(cca_alloc(a, 8 * MiB, NULL, &p), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(tu_stats(a).reserved_bytes, 8 * MiB);
    cr_assert_eq(tu_stats(a).ooms, 0);
    tu_free(a, p);
    tu_check(a);
    finish(a, u);
}

/* The same arena full of a pending block (its event held): a request that
 * fits the 8 MiB arena but not greedy_bytes waits for the pending free (a
 * synchronize) as any full arena does, and is served. */
Test(interactions, greedy_pages_arena_completes_pending_frees_for_requests_over_greedy_bytes) {
    tu_faulty f;
    cca_upstream *u = fx_device(&f, 256 * MiB, true);
    cca_allocator *a = tu_allocator(u, "policy:greedy,greedy_bytes:7M,expandable:1,log_oom:0");
    f.hold_events = true;
    void *p = tu_alloc(a, 7 * MiB + 512 * KiB, S1);
    tu_free(a, p); /* pending: allocated on S1 in the shared arena */
    cr_assert_eq(tu_stats(a).pending_blocks, 1);
    uint64_t syncs = f.calls[TU_FAULT_SYNC];
    void *q = NULL;
    cr_assert_eq(cca_alloc(a, 7 * MiB + 512 * KiB, NULL, &q), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(q, p, "best fit: the only block of that size, the arena's first");
    cr_assert_eq(f.calls[TU_FAULT_SYNC], syncs + 1, "one synchronize completed the pending free");
    cr_assert_eq(tu_stats(a).ooms, 0);
    tu_free(a, q);
    fx_finish(a, u, &f);
}

/* ---- sizes at the edge of rounding --------------------------------------- */

/* A size that rounds to 512 but whose pages would pass SIZE_MAX (pages
 * larger than segment_round), on a device whose size is unknown (mem_info
 * refused) and no max_reserved, so that no ceiling stops it: a size whose
 * rounding would overflow, CCA_ERR_INVALID_ARGUMENT with nothing touched
 * (no upstream call), as with classic segments. The largest size whose
 * pages are representable is an OOM. */
Test(interactions, request_whose_pages_overflow_with_an_unknown_device) {
    tu_faulty f;
    cca_upstream *u = fx_device(&f, 256 * MiB, false);
    f.fail_mem_info = true;
    cca_allocator *a = tu_allocator(u, "expandable:1,segment_round:512,log_oom:0");
    void *keep = tu_alloc(a, 4096, NULL);
    cca_stats before = tu_stats(a);
    const size_t sizes[] = {SIZE_MAX, SIZE_MAX - 1024, SIZE_MAX - 1024 - 511, SIZE_MAX - PG, SIZE_MAX - PG - 511};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        uint64_t calls = f.order_count;
        void *p = (void *)1;
        cca_status st = cca_alloc(a, sizes[i], NULL, &p);
        cr_assert_eq(st, CCA_ERR_INVALID_ARGUMENT, "size %zu: %s", sizes[i], cca_status_string(st));
        cr_assert_null(p);
        cr_assert_eq(f.order_count, calls, "size %zu reached the upstream", sizes[i]);
        tu_assert_intact(a, &before, "a size whose pages overflow");
    }
    void *p = (void *)1;
    cr_assert_eq(cca_alloc(a, SIZE_MAX - PG - 512, NULL, &p), CCA_ERR_OUT_OF_MEMORY, "%s", cca_last_error());
    cr_assert_null(p);
    cr_assert_eq(tu_stats(a).allocated_bytes, before.allocated_bytes);
    tu_check(a);
    tu_free(a, keep);
    fx_finish(a, u, &f);
}
