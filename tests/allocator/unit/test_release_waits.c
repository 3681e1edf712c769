/*
 * test_release_waits.c — what a release of pages waits for (kinds/pages.c,
 * pages_quiesce; core/release.c, core/grow.c, policies/hold.c): the
 * streams whose queued work may still touch the pages it unmaps, one
 * stream_synchronize each, never the whole device.
 *
 * - Waited for: the key stream of every segment (not an arena) with free
 *   mapped pages, and every stream a pending free waits on.
 * - The whole device instead: an upstream without stream_synchronize, more
 *   than 16 such streams, a block whose free could record no event; and
 *   classic segments (cudaFree waits by itself), as before.
 * - A refused stream_synchronize: nothing unmapped, the call says why.
 *
 * The simulated device (64 KiB pages) under the fault-injecting wrapper
 * (tu_faulty_create_streams), which counts both kinds of synchronize.
 */
#include "alloc_test_util.h"

#include <criterion/criterion.h>

#define PG ((size_t)64 * KiB)
#define S0 ((cca_stream)0x100)
#define S1 ((cca_stream)0x200)

static tu_faulty f;
static cca_upstream *inner, *u;
static cca_allocator *a;

/* Pages, no ahead pages: a segment whose blocks are live has no free page. */
static void setup(bool streams, bool events, const char *extra) {
    inner = tu_vm_device_backed(64 * MiB, PG, CCA_VM_PAGES);
    u = streams ? tu_faulty_create_streams(&f, inner, "fx", events) : tu_faulty_create(&f, inner, "fx", events);
    char conf[256];
    snprintf(conf, sizeof conf, "expandable:1,log_oom:0,expandable_ahead:0%s%s", extra ? "," : "", extra ? extra : "");
    a = tu_allocator(u, conf);
}

static void teardown(void) {
    cr_assert_eq(cca_check_invariants(a), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    cca_upstream_destroy(u);
    cca_upstream_destroy(inner);
}

static void *take(size_t size, cca_stream s) {
    void *p = NULL;
    cr_assert_eq(cca_alloc(a, size, s, &p), CCA_OK, "%s", cca_last_error());
    return p;
}

Test(release_waits, empty_cache_waits_for_the_stream_that_freed_only) {
    setup(true, true, NULL);
    void *x = take(4 * PG, S0), *y = take(4 * PG, S1);
    cr_assert_eq(cca_free(a, x), CCA_OK); /* on its own stream: free at once */
    cca_release_report r;
    cr_assert_eq(cca_empty_cache(a, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(f.calls[TU_FAULT_SYNC], 0, "the device was synchronized");
    cr_assert_eq(f.calls[TU_FAULT_STREAM_SYNC], 1);
    cr_assert_eq(f.synced_streams[0], S0, "S1's segment has no free page: no wait for it");
    cr_assert_eq(tu_stats(a).mapped_bytes, 4 * PG, "x's pages went back, y's stayed");
    cr_assert_eq(cca_free(a, y), CCA_OK);
    teardown();
}

Test(release_waits, a_pending_free_completes_by_its_streams_wait) {
    setup(true, true, NULL);
    f.hold_events = true;
    void *x = take(4 * PG, S0);
    cr_assert_eq(cca_record_stream(a, x, S1), CCA_OK);
    cr_assert_eq(cca_free(a, x), CCA_OK);
    cr_assert_eq(tu_stats(a).pending_blocks, 1, "S1's work is not done");
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(f.calls[TU_FAULT_SYNC], 0, "the device was synchronized");
    cr_assert_eq(f.calls[TU_FAULT_STREAM_SYNC], 1, "one wait: S1's, whose event x waited on");
    cr_assert_eq(f.synced_streams[0], S1);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.pending_blocks, 0);
    cr_assert_eq(s.reserved_bytes, 0, "x completed and went back");
    teardown();
}

Test(release_waits, the_oom_retry_waits_for_streams_not_the_device) {
    setup(true, true, NULL);
    void *x = take(40 * MiB, S0);
    cr_assert_eq(cca_free(a, x), CCA_OK); /* 40 MiB cached in S0's segment */
    void *y = take(40 * MiB, S1);        /* the device holds 64: S0's pages must go first */
    cr_assert_eq(f.calls[TU_FAULT_SYNC], 0, "the device was synchronized");
    cr_assert_geq(f.calls[TU_FAULT_STREAM_SYNC], 1);
    cr_assert_eq(f.synced_streams[0], S0);
    cr_assert_eq(tu_stats(a).alloc_retries, 1);
    cr_assert_eq(cca_free(a, y), CCA_OK);
    teardown();
}

/* The retry's cost (ccalloc.h, cca_alloc; docs/allocator.md, step 5's
 * table): with expandable segments and frees pending, (a)'s look for a
 * block once they complete is a take of its own, which maps pages: three
 * takes after (a)'s wait, (c)'s and (d)'s the other two. Every map refused:
 * step 4's map of the tail, then one per take. */
Test(release_waits, with_frees_pending_the_retry_takes_three_times) {
    setup(true, true, NULL);
    f.hold_events = true;
    void *x = take(2 * MiB, S0);
    cr_assert_eq(cca_record_stream(a, x, S1), CCA_OK);
    cr_assert_eq(cca_free(a, x), CCA_OK);
    cr_assert_eq(tu_stats(a).pending_blocks, 1);
    uint64_t maps = f.calls[TU_FAULT_MAP];
    f.fail_at[TU_FAULT_MAP] = maps + 1;
    f.sticky[TU_FAULT_MAP] = true;
    void *y = NULL;
    cr_assert_eq(cca_alloc(a, 4 * MiB, S0, &y), CCA_ERR_OUT_OF_MEMORY);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.alloc_retries, 1);
    cr_assert_eq(s.pending_blocks, 0, "(a) completed x");
    cr_assert_eq(f.calls[TU_FAULT_MAP] - maps, 4, "step 4's map and three takes: %llu maps",
                 (unsigned long long)(f.calls[TU_FAULT_MAP] - maps));
    tu_faulty_faults_off(&f);
    teardown();
}

Test(release_waits, a_refused_stream_wait_unmaps_nothing) {
    setup(true, true, NULL);
    void *x = take(4 * PG, S0);
    cr_assert_eq(cca_free(a, x), CCA_OK);
    f.fail_at[TU_FAULT_STREAM_SYNC] = f.calls[TU_FAULT_STREAM_SYNC] + 1;
    cca_status st = cca_empty_cache(a, NULL);
    cr_assert_eq(st, CCA_ERR_UPSTREAM, "%s", cca_status_string(st));
    cr_assert(strstr(cca_last_error(), "synchronize of stream"), "%s", cca_last_error());
    cr_assert(strstr(cca_last_error(), "no page was unmapped"), "%s", cca_last_error());
    cr_assert_eq(tu_stats(a).mapped_bytes, 4 * PG, "nothing unmapped");
    tu_faulty_faults_off(&f);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(tu_stats(a).mapped_bytes, 0);
    teardown();
}

Test(release_waits, without_stream_synchronize_the_device_waits) {
    setup(false, true, NULL);
    void *x = take(4 * PG, S0);
    cr_assert_eq(cca_free(a, x), CCA_OK);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(f.calls[TU_FAULT_SYNC], 1, "the fallback: one device synchronize");
    cr_assert_eq(f.calls[TU_FAULT_STREAM_SYNC], 0);
    cr_assert_eq(tu_stats(a).mapped_bytes, 0);
    teardown();
}

Test(release_waits, more_than_sixteen_streams_wait_for_the_device) {
    setup(true, true, NULL);
    for (uintptr_t k = 1; k <= 17; k++) {
        void *p = take(PG, (cca_stream)(k << 12));
        cr_assert_eq(cca_free(a, p), CCA_OK);
    }
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(f.calls[TU_FAULT_SYNC], 1, "17 streams: one device synchronize instead");
    cr_assert_eq(f.calls[TU_FAULT_STREAM_SYNC], 0);
    cr_assert_eq(tu_stats(a).mapped_bytes, 0);
    teardown();
}

Test(release_waits, classic_segments_still_synchronize_the_device) {
    inner = tu_vm_device_backed(64 * MiB, PG, CCA_VM_PAGES);
    u = tu_faulty_create_streams(&f, inner, "fx", true);
    a = tu_allocator(u, "expandable:0,log_oom:0");
    void *x = take(4 * MiB, S0);
    cr_assert_eq(cca_free(a, x), CCA_OK);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(f.calls[TU_FAULT_SYNC], 1);
    cr_assert_eq(f.calls[TU_FAULT_STREAM_SYNC], 0);
    cr_assert_eq(tu_stats(a).reserved_bytes, 0);
    teardown();
}
