/*
 * test_release.c — allocator/src/core/release.c: cca_trim and cca_empty_cache.
 *
 * Only whole free segments go back, largest first (ties: lowest base), until
 * reserved <= keep; a segment with a live block is pinned. The report's
 * fields are checked exactly, and the upstream's own accounting (the test
 * double's list of live allocations, or cca_upstream_get_stats) must agree.
 */
#include "alloc_test_util.h"

#include <criterion/criterion.h>
#include <string.h>

static tu_upstream t;
static cca_upstream *u;
static cca_allocator *a;

static void setup(void) {
    u = tu_upstream_create(&t, 1 * GiB, true);
    a = tu_allocator(u, NULL);
}
static void teardown(void) {
    tu_fixture_teardown(a, u);
}

TestSuite(release, .init = setup, .fini = teardown);

/* Segments of 14M (13M request), 12M (12M), 20M (4M) and 2M (small), all
 * free. The big ones come first: a later 12M would fit a 20M segment's tail. */
static void four_free_segments(void) {
    void *p[4] = {tu_alloc(a, 13 * MiB, NULL), tu_alloc(a, 12 * MiB, NULL), tu_alloc(a, 4 * MiB, NULL),
                  tu_alloc(a, 4096, NULL)};
    for (int i = 0; i < 4; i++)
        tu_free(a, p[i]);
    cr_assert_eq(tu_stats(a).reserved_bytes, 48 * MiB);
}

Test(release, trim_releases_largest_first_until_under_keep) {
    four_free_segments();
    cca_release_report r;
    memset(&r, 0xff, sizeof r);
    cr_assert_eq(cca_trim(a, 20 * MiB, &r), CCA_OK);
    /* 48 -> release 20 (28 > 20) -> release 14 (14 <= 20): stop */
    cr_assert_eq(t.freed_count, 2);
    cr_assert_eq(t.freed_sizes[0], 20 * MiB);
    cr_assert_eq(t.freed_sizes[1], 14 * MiB);
    cr_assert_eq(r.bytes_released, 34 * MiB);
    cr_assert_eq(r.segments_released, 2);
    cr_assert_eq(r.bytes_still_reserved, 14 * MiB);
    cr_assert_eq(r.segments_kept, 2);
    cr_assert_eq(r.segments_pinned, 0);
    cr_assert_eq(r.live_bytes_pinning, 0);
    cr_assert_eq(r.free_bytes_pinned, 0);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.reserved_bytes, 14 * MiB);
    cr_assert_eq(s.reserved_bytes_peak, 48 * MiB, "trim does not touch peaks");
    cr_assert_eq(s.segments, 2);
    cr_assert_eq(s.upstream_frees, 2);
    cr_assert_eq(t.used, 14 * MiB);
    tu_check(a);
    /* the rest, still largest first */
    cr_assert_eq(cca_trim(a, 0, &r), CCA_OK);
    cr_assert_eq(t.freed_count, 4);
    cr_assert_eq(t.freed_sizes[2], 12 * MiB);
    cr_assert_eq(t.freed_sizes[3], 2 * MiB);
    cr_assert_eq(r.bytes_released, 14 * MiB);
    cr_assert_eq(r.bytes_still_reserved, 0);
}

Test(release, trim_with_keep_above_reserved_releases_nothing) {
    four_free_segments();
    cca_stats before = tu_stats(a);
    cca_release_report r;
    cr_assert_eq(cca_trim(a, 48 * MiB, &r), CCA_OK);
    cr_assert_eq(r.bytes_released, 0);
    cr_assert_eq(r.segments_released, 0);
    cr_assert_eq(r.bytes_still_reserved, 48 * MiB);
    cr_assert_eq(r.segments_kept, 4);
    tu_assert_intact(a, &before, "trim(keep >= reserved)");
    cr_assert_eq(t.free_calls, 0);
    cr_assert_eq(cca_trim(a, 47 * MiB, NULL), CCA_OK, "report may be NULL");
    cr_assert_eq(t.freed_count, 1);
    cr_assert_eq(t.freed_sizes[0], 20 * MiB, "one segment is enough, and it is the largest");
}

Test(release, trim_keeps_the_segment_a_live_block_pins) {
    void *other = tu_alloc(a, 12 * MiB, NULL); /* 12M */
    void *big = tu_alloc(a, 4 * MiB, NULL);    /* 20M */
    void *pin = tu_alloc(a, 512, NULL);        /* 2M small segment */
    tu_free(a, big);
    tu_free(a, other);
    cca_release_report r;
    cr_assert_eq(cca_empty_cache(a, &r), CCA_OK);
    cr_assert_eq(r.bytes_released, 32 * MiB);
    cr_assert_eq(r.segments_released, 2);
    cr_assert_eq(r.bytes_still_reserved, 2 * MiB);
    cr_assert_eq(r.segments_kept, 0);
    cr_assert_eq(r.segments_pinned, 1);
    cr_assert_eq(r.live_bytes_pinning, 512);
    cr_assert_eq(r.free_bytes_pinned, 2 * MiB - 512);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.reserved_bytes, 2 * MiB);
    cr_assert_eq(s.segments, 1);
    cr_assert_eq(s.allocated_bytes, 512);
    cr_assert_eq(t.used, 2 * MiB);
    cr_assert_eq(t.live_count, 1);
    tu_check(a);
    /* the pinned segment still serves, and goes once its block does */
    void *more = tu_alloc(a, 4096, NULL);
    cr_assert_eq(more, (char *)pin + 512);
    tu_free(a, more);
    tu_free(a, pin);
    cr_assert_eq(cca_empty_cache(a, &r), CCA_OK);
    cr_assert_eq(r.bytes_released, 2 * MiB);
    cr_assert_eq(r.segments_pinned, 0);
}

Test(release, pinned_report_sums_over_segments) {
    void *a1 = tu_alloc(a, 4 * MiB, NULL), *a2 = tu_alloc(a, 1 * MiB + 512, NULL); /* same 20M segment */
    void *s1 = tu_alloc(a, 8 * KiB, NULL);
    cca_release_report r;
    cr_assert_eq(cca_empty_cache(a, &r), CCA_OK);
    cr_assert_eq(r.bytes_released, 0);
    cr_assert_eq(r.segments_pinned, 2);
    cr_assert_eq(r.live_bytes_pinning, 5 * MiB + 512 + 8 * KiB);
    cr_assert_eq(r.free_bytes_pinned, 22 * MiB - (5 * MiB + 512 + 8 * KiB));
    cr_assert_eq(r.bytes_still_reserved, 22 * MiB);
    tu_free(a, a1), tu_free(a, a2), tu_free(a, s1);
}

Test(release, equal_segments_go_lowest_base_first) {
    void *p = tu_alloc(a, 8 * MiB, NULL), *x = tu_alloc(a, 8 * MiB, NULL); /* one 20M medium segment */
    void *y = tu_alloc(a, 8 * MiB, NULL), *z = tu_alloc(a, 8 * MiB, NULL); /* 4M tail too small: another */
    tu_free(a, p), tu_free(a, x), tu_free(a, y), tu_free(a, z);
    cr_assert_eq(tu_stats(a).segments, 2);
    uintptr_t low = (uintptr_t)p < (uintptr_t)y ? (uintptr_t)p : (uintptr_t)y;
    cr_assert_eq(cca_trim(a, 20 * MiB, NULL), CCA_OK);
    cr_assert_eq(t.live_count, 1);
    cr_assert_neq((uintptr_t)t.live[0].ptr, low, "the lower base went first");
}

Test(release, empty_cache_leaves_the_upstream_holding_nothing) {
    cca_upstream *host;
    cca_allocator *h;
    tu_host_allocator(256 * MiB, NULL, &host, &h);
    void *p[6];
    const size_t sizes[] = {100, 300 * KiB, 2 * MiB, 9 * MiB, 30 * MiB, 64 * MiB};
    for (int i = 0; i < 6; i++)
        p[i] = tu_alloc(h, sizes[i], NULL);
    size_t free_b, total_b;
    cr_assert_eq(cca_upstream_mem_info(host, &free_b, &total_b), CCA_OK);
    cr_assert_eq(free_b, 256 * MiB - tu_stats(h).reserved_bytes);
    for (int i = 0; i < 6; i++)
        tu_free(h, p[i]);
    cca_release_report r;
    size_t reserved = tu_stats(h).reserved_bytes;
    cr_assert_eq(cca_empty_cache(h, &r), CCA_OK);
    cr_assert_eq(r.bytes_released, reserved);
    cr_assert_eq(r.bytes_still_reserved, 0);
    cr_assert_eq(r.segments_kept + r.segments_pinned, 0);
    cca_stats s = tu_stats(h);
    cr_assert_eq(s.reserved_bytes, 0);
    cr_assert_eq(s.segments, 0);
    cr_assert_eq(s.cached_bytes, 0);
    cr_assert_eq(s.upstream_allocs, s.upstream_frees);
    cca_upstream_stats us = tu_upstream_stats(host);
    cr_assert_eq(us.bytes_in_use, 0);
    cr_assert_eq(us.allocations, 0);
    cr_assert_eq(cca_upstream_mem_info(host, &free_b, &total_b), CCA_OK);
    cr_assert_eq(free_b, 256 * MiB);
    /* and it serves again */
    void *again = tu_alloc(h, 4096, NULL);
    tu_free(h, again);
    tu_teardown(h, host);
}

Test(release, trim_synchronizes_first) {
    void *p = tu_alloc(a, 4096, NULL);
    tu_free(a, p);
    uint64_t syncs = t.sync_calls;
    cr_assert_eq(cca_trim(a, 1 * GiB, NULL), CCA_OK);
    cr_assert_eq(t.sync_calls, syncs + 1, "once, even when nothing is released");
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    cr_assert_eq(t.sync_calls, syncs + 2);
}

Test(release, a_refused_free_keeps_the_segment_and_state_intact) {
    void *q = tu_alloc(a, 12 * MiB, NULL), *p = tu_alloc(a, 4 * MiB, NULL);
    tu_free(a, p), tu_free(a, q);
    t.fail_at = t.calls + 1; /* the next upstream call: freeing the 20M segment */
    cca_release_report r;
    cr_assert_eq(cca_empty_cache(a, &r), CCA_ERR_UPSTREAM, "a refused free is an error, and the report says what");
    cr_assert_not_null(strstr(cca_last_error(), "refused"), "%s", cca_last_error());
    cr_assert_eq(t.failures, 1);
    cr_assert_eq(r.bytes_released, 12 * MiB);
    cr_assert_eq(r.segments_released, 1);
    cr_assert_eq(r.bytes_still_reserved, 20 * MiB);
    cr_assert_eq(r.segments_kept, 1);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.reserved_bytes, 20 * MiB);
    cr_assert_eq(s.cached_bytes, 20 * MiB);
    cr_assert_eq(t.used, 20 * MiB, "the allocator and the upstream agree");
    tu_check(a);
    /* the kept segment still serves, and the next empty-cache returns it */
    void *again = tu_alloc(a, 4 * MiB, NULL);
    tu_free(a, again);
    cr_assert_eq(cca_empty_cache(a, &r), CCA_OK);
    cr_assert_eq(r.bytes_released, 20 * MiB);
    cr_assert_eq(t.used, 0);
}

Test(release, trim_reports_pending_blocks_it_could_not_complete) {
    /* the device synchronizes, yet the event of a pending free still reads
     * incomplete: the block stays reserved, and trim must say so */
    void *p = tu_alloc(a, 4096, (cca_stream)0x1000);
    cr_assert_eq(cca_record_stream(a, p, (cca_stream)0x2000), CCA_OK);
    t.hold_events = true;
    t.sync_keeps_events = true;
    tu_free(a, p);
    cr_assert_eq(tu_stats(a).pending_blocks, 1);
    cca_release_report r;
    cr_assert_eq(cca_trim(a, 0, &r), CCA_ERR_NOT_READY, "%s", cca_last_error());
    cr_assert(strstr(cca_last_error(), "1 pending") != NULL, "%s", cca_last_error());
    cr_assert_eq(r.segments_pinned, 1, "the pending block pins its segment");
    cr_assert_eq(tu_stats(a).pending_blocks, 1);
    /* a failing synchronize is reported too, and keeps the block */
    t.fail_sync = true;
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_ERR_UPSTREAM);
    cr_assert(strstr(cca_last_error(), "synchronize failed") != NULL, "%s", cca_last_error());
    cr_assert_eq(tu_stats(a).pending_blocks, 1);
    t.fail_sync = false;
    t.sync_keeps_events = false;
    cr_assert_eq(cca_empty_cache(a, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(tu_stats(a).pending_blocks, 0);
    cr_assert_eq(tu_stats(a).reserved_bytes, 0);
    t.hold_events = false;
}
