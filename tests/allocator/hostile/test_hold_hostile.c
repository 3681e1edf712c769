/*
 * test_hold_hostile.c — allocator/src/alloc.c: hold_peak:1 (hold) against what meets it:
 * max_reserved, memory domains and footprints, pending frees, failing
 * synchronizes and event records, upstream faults at every call of a hold
 * (pages and whole maps), and every way a configuration comes in.
 *
 * Where an outcome should not depend on the option (a request max_reserved
 * or the device dooms whatever is released), the case runs twice, with and
 * without it, and the two allocators must agree exactly. After every step:
 * the invariants, the allocator's account against the device's, the live
 * blocks' contents; at the end nothing is left in the upstream.
 */
#include "alloc_test_util.h"
#include "pages_rule.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PG ((size_t)64 * KiB)
#define S0 ((cca_stream)0x100)
#define S1 ((cca_stream)0x200)

/* The counters a hold may change, as one comparable record. */
typedef struct outcome {
    cca_status st;
    size_t reserved, peak, cached;
    uint64_t frees, allocs, retries, ooms, holds, unmapped, syncs;
} outcome;

static outcome outcome_of(const cca_allocator *a, cca_status st, uint64_t syncs) {
    cca_stats s = tu_stats(a);
    return (outcome){st, s.reserved_bytes, s.reserved_bytes_peak, s.cached_bytes, s.upstream_frees, s.upstream_allocs,
                     s.alloc_retries, s.ooms, s.peak_holds, s.pages_unmapped, syncs};
}

static void assert_same(const outcome *x, const outcome *y, const char *what) {
    cr_assert_eq(x->st, y->st, "%s: status %d against %d", what, x->st, y->st);
    cr_assert_eq(x->reserved, y->reserved, "%s: reserved %zu against %zu", what, x->reserved, y->reserved);
    cr_assert_eq(x->peak, y->peak, "%s: peak %zu against %zu", what, x->peak, y->peak);
    cr_assert_eq(x->cached, y->cached, "%s: cached %zu against %zu", what, x->cached, y->cached);
    cr_assert_eq(x->frees, y->frees, "%s: upstream frees %lu against %lu", what, (unsigned long)x->frees,
                 (unsigned long)y->frees);
    cr_assert_eq(x->allocs, y->allocs, "%s: upstream allocs %lu against %lu", what, (unsigned long)x->allocs,
                 (unsigned long)y->allocs);
    cr_assert_eq(x->retries, y->retries, "%s: retries", what);
    cr_assert_eq(x->ooms, y->ooms, "%s: ooms", what);
    cr_assert_eq(x->holds, y->holds, "%s: peak_holds %lu against %lu", what, (unsigned long)x->holds,
                 (unsigned long)y->holds);
    cr_assert_eq(x->unmapped, y->unmapped, "%s: pages unmapped", what);
    cr_assert_eq(x->syncs, y->syncs, "%s: synchronizes %lu against %lu", what, (unsigned long)x->syncs,
                 (unsigned long)y->syncs);
}

/* The allocator agrees with the device it maps on (expandable). */
static void agree(const cca_allocator *a, cca_upstream *dev) {
    tu_check(a);
    cca_stats s = tu_stats(a);
    cca_upstream_stats us = tu_upstream_stats(dev);
    cr_assert_eq(s.mapped_bytes, us.vm_mapped_bytes, "mapped %zu, the device says %zu", s.mapped_bytes,
                 us.vm_mapped_bytes);
    cr_assert_eq(s.reserved_bytes, s.mapped_bytes);
}

/* ---- max_reserved beside the peak ------------------------------------------ */

/* max_reserved dooms the request whatever is released: A's 12 MiB segment
 * pinned, 14 MiB more would pass the 24 MiB cap. The retry releases
 * nothing then (ccalloc.h: "Nothing is released ... when releasing cannot
 * make room"); a hold must not release the cache for a request it cannot
 * serve either: both allocators end the same, B's segment still cached,
 * and the message names max_reserved, not the peak. */
Test(hold_hostile, classic_a_request_max_reserved_dooms_releases_nothing) {
    outcome out[2];
    for (int hold = 0; hold < 2; hold++) {
        cca_upstream *u;
        cca_allocator *a;
        tu_host_allocator(256 * MiB,
                          hold ? "expandable:0,hold_peak:1,max_reserved:24M,log_oom:0"
                               : "expandable:0,max_reserved:24M,log_oom:0",
                          &u, &a);
        void *A = tu_alloc(a, 12 * MiB, NULL), *B = tu_alloc(a, 12 * MiB, NULL);
        tu_fill(A, 12 * MiB, 1);
        tu_free(a, B);
        void *C = (void *)1;
        cca_status st = cca_alloc(a, 14 * MiB, NULL, &C);
        cr_assert_null(C);
        out[hold] = outcome_of(a, st, 0);
        tu_check(a);
        cr_assert_eq(st, CCA_ERR_OUT_OF_MEMORY);
        cr_assert(strstr(cca_last_error(), "max_reserved (25165824) would be exceeded even with everything cached "
                                           "released") != NULL,
                  "hold %d: %s", hold, cca_last_error());
        cr_assert(strstr(cca_last_error(), "hold_peak") == NULL, "hold %d: the peak is not why: %s", hold,
                  cca_last_error());
        cr_assert(tu_check_fill(A, 12 * MiB, 1));
        cr_assert_eq(tu_upstream_stats(u).bytes_in_use, out[hold].reserved);
        tu_free(a, A);
        tu_teardown(a, u);
    }
    cr_assert_eq(out[1].reserved, 24 * MiB, "B's segment stays cached: %zu", out[1].reserved);
    assert_same(&out[0], &out[1], "without and with hold_peak");
}

/* Over pages: A and C keep 2 MiB mapped, B's 1 MiB is cached, and a
 * request of `size` is doomed whatever is unmapped (by `extra`'s cap or the
 * device's `capacity`). Nothing is synchronized (no free pending, releasing
 * cannot help) and B's pages stay mapped, with the option as without; the
 * message gives `why`. */
static void expandable_doomed(size_t capacity, const char *extra, size_t size, const char *why) {
    outcome out[2];
    for (int hold = 0; hold < 2; hold++) {
        cca_upstream *dev = tu_vm_device(capacity, PG);
        tu_faulty f;
        cca_upstream *u = tu_faulty_create(&f, dev, "fx", false);
        char conf[256];
        snprintf(conf, sizeof conf, "expandable:1,small_pool:0,expandable_ahead:0,log_oom:0%s%s", extra,
                 hold ? ",hold_peak:1" : "");
        cca_allocator *a = tu_allocator(u, conf);
        char *A = tu_alloc(a, 1 * MiB, NULL), *B = tu_alloc(a, 1 * MiB, NULL), *C = tu_alloc(a, 1 * MiB, NULL);
        tu_fill(A, 1 * MiB, 1);
        tu_fill(C, 1 * MiB, 3);
        tu_free(a, B);
        uint64_t syncs = f.calls[TU_FAULT_SYNC];
        void *D = (void *)1;
        cca_status st = cca_alloc(a, size, NULL, &D);
        cr_assert_null(D);
        out[hold] = outcome_of(a, st, f.calls[TU_FAULT_SYNC] - syncs);
        agree(a, dev);
        cr_assert_eq(st, CCA_ERR_OUT_OF_MEMORY);
        cr_assert(strstr(cca_last_error(), why) != NULL, "hold %d: %s", hold, cca_last_error());
        TU_ASSERT_READABLE(B);
        cr_assert(tu_check_fill(A, 1 * MiB, 1));
        cr_assert(tu_check_fill(C, 1 * MiB, 3));
        tu_free(a, A);
        tu_free(a, C);
        tu_empty_all(a, u);
        cr_assert_eq(cca_destroy(a), CCA_OK);
        cca_upstream_destroy(u);
        cca_upstream_destroy(dev);
    }
    cr_assert_eq(out[1].unmapped, 0, "B's pages stay mapped");
    assert_same(&out[0], &out[1], "without and with hold_peak");
}

/* D's 2 MiB at the tail would pass max_reserved (3 MiB). */
Test(hold_hostile, expandable_a_request_max_reserved_dooms_unmaps_nothing) {
    expandable_doomed(64 * MiB, ",max_reserved:3M", 2 * MiB,
                      "max_reserved (3145728) would be exceeded even with everything cached released");
}

/* A 4 MiB device: 3 MiB in a new range are more than its free memory plus
 * B's pages. */
Test(hold_hostile, expandable_a_request_the_device_dooms_unmaps_nothing) {
    expandable_doomed(4 * MiB, "", 3 * MiB, "the device's free memory plus everything cached is short");
}

/* max_reserved above the peak: the hold releases, then the peak rises by
 * the request's segment and stays under max_reserved; a second request
 * over max_reserved is refused naming max_reserved. */
Test(hold_hostile, classic_the_peak_rises_under_max_reserved_and_stops_there) {
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(256 * MiB, "expandable:0,hold_peak:1,max_reserved:30M,log_oom:0", &u, &a);
    void *A = tu_alloc(a, 12 * MiB, NULL), *B = tu_alloc(a, 12 * MiB, NULL);
    tu_free(a, A);
    void *C = tu_alloc(a, 14 * MiB, NULL); /* 12 + 14 passes the peak of 24: A goes, then the peak rises */
    cca_stats s = tu_stats(a);
    tu_check(a);
    cr_assert_eq(s.reserved_bytes, 26 * MiB, "%zu", s.reserved_bytes);
    cr_assert_eq(s.reserved_bytes_peak, 26 * MiB);
    cr_assert_eq(s.peak_holds, 1);
    cr_assert_eq(s.alloc_retries, 0);
    void *D = (void *)1;
    cr_assert_eq(cca_alloc(a, 6 * MiB, NULL, &D), CCA_ERR_OUT_OF_MEMORY, "26 + 6 passes max_reserved");
    cr_assert(strstr(cca_last_error(), "max_reserved (31457280)") != NULL, "%s", cca_last_error());
    s = tu_stats(a);
    cr_assert_eq(s.reserved_bytes, 26 * MiB);
    cr_assert_eq(s.peak_holds, 1, "nothing was cached: no hold");
    tu_free(a, B);
    tu_free(a, C);
    tu_teardown(a, u);
}

/* ---- what a hold counts ----------------------------------------------------- */

/* peak_holds counts holds that released cached memory. Here nothing can be
 * released (A's free remainder shares A's map: trapped, not releasable),
 * so the hold takes with no cap at once; the device refuses that take's
 * second map, and the first is unmapped again. That unmap undoes this
 * request's own map, it releases nothing cached: no hold is counted. */
Test(hold_hostile, an_undone_map_is_not_a_hold) {
    cca_upstream *dev = tu_vm_device_backed(64 * MiB, PG, CCA_VM_WHOLE_MAPS);
    tu_faulty f;
    cca_upstream *u = tu_faulty_create(&f, dev, "fx", false);
    cca_allocator *a = tu_allocator(u, "expandable:1,hold_peak:1,small_pool:0,expandable_ahead:0,log_oom:0");
    ccai_pages_rule_set(a, 0, 0, 128 * KiB); /* maps of at most two pages */
    char *A = tu_alloc(a, 96 * KiB, NULL);
    tu_fill(A, 96 * KiB, 1);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.reserved_bytes, 2 * PG);
    cr_assert_eq(s.cached_bytes, 32 * KiB, "trapped in A's map");
    f.fail_at[TU_FAULT_MAP] = f.calls[TU_FAULT_MAP] + 2; /* the second map of B's four */
    void *B = (void *)1;
    cr_assert_eq(cca_alloc(a, 512 * KiB, NULL, &B), CCA_ERR_OUT_OF_MEMORY);
    s = tu_stats(a);
    agree(a, dev);
    cr_assert_eq(f.ok[TU_FAULT_UNMAP], 1, "the first map was undone");
    cr_assert_eq(s.reserved_bytes, 2 * PG);
    cr_assert_eq(s.peak_holds, 0, "nothing cached was released, yet %lu holds counted", (unsigned long)s.peak_holds);
    B = tu_alloc(a, 512 * KiB, NULL); /* the device maps it now: the peak rises, nothing to release */
    s = tu_stats(a);
    cr_assert_eq(s.peak_holds, 0);
    cr_assert(tu_check_fill(A, 96 * KiB, 1));
    tu_free(a, A);
    tu_free(a, B);
    tu_empty_all(a, u);
    cr_assert_eq(cca_destroy(a), CCA_OK);
    cca_upstream_destroy(u);
    cca_upstream_destroy(dev);
}

/* ---- domains ------------------------------------------------------------------ */

static void domains_sum(const cca_allocator *a, cca_domain *const *ds, size_t n) {
    cca_stats s = tu_stats(a);
    size_t reserved = 0, allocated = 0;
    for (size_t i = 0; i < n; i++) {
        cca_domain_stats d;
        cr_assert_eq(cca_get_domain_stats(a, ds[i], &d), CCA_OK, "%s", cca_last_error());
        reserved += d.reserved_bytes;
        allocated += d.allocated_bytes;
    }
    cr_assert_eq(reserved, s.reserved_bytes, "domains hold %zu, the allocator %zu", reserved, s.reserved_bytes);
    cr_assert_eq(allocated, s.allocated_bytes);
}

/* Classic segments: a request in one domain is held by the allocator's
 * peak and releases the cached segments of another (ccalloc.h: a hold may release any domain's
 * cached memory, a reserved footprint included); each domain's counters
 * stay exact, and a forced release of a domain afterwards leaves the rest
 * intact. */
Test(hold_hostile, a_hold_in_one_domain_releases_another_domains_cache_and_footprint) {
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(256 * MiB, "expandable:0,hold_peak:1,log_oom:0", &u, &a);
    cca_domain *D, *E;
    cr_assert_eq(cca_domain_create(a, "d", &D), CCA_OK);
    cr_assert_eq(cca_domain_create(a, "e", &E), CCA_OK);
    cca_domain *all[] = {NULL, D, E};
    void *A = tu_alloc(a, 12 * MiB, NULL), *B = tu_alloc(a, 12 * MiB, NULL);
    tu_fill(A, 12 * MiB, 1);
    tu_free(a, B); /* root: 12 MiB cached, peak 24 */
    void *P = (void *)1;
    cr_assert_eq(cca_alloc_in(a, D, 12 * MiB, NULL, &P), CCA_OK, "%s", cca_last_error());
    tu_fill(P, 12 * MiB, 2);
    cca_stats s = tu_stats(a);
    domains_sum(a, all, 3);
    cr_assert_eq(s.reserved_bytes, 24 * MiB, "B's segment went back for D's: %zu", s.reserved_bytes);
    cr_assert_eq(s.peak_holds, 1);
    cca_domain_stats ds;
    cr_assert_eq(cca_get_domain_stats(a, NULL, &ds), CCA_OK);
    cr_assert_eq(ds.reserved_bytes, 12 * MiB);
    cr_assert_eq(ds.upstream_frees, 1);
    /* E's footprint, wholly free: cached memory the next hold releases */
    cr_assert_eq(cca_domain_reserve(a, E, 8 * MiB), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(tu_stats(a).reserved_bytes_peak, 32 * MiB, "a footprint raises the peak itself: no hold");
    void *Q = (void *)1;
    cr_assert_eq(cca_alloc_in(a, D, 12 * MiB, NULL, &Q), CCA_OK, "%s", cca_last_error());
    s = tu_stats(a);
    domains_sum(a, all, 3);
    cr_assert_eq(s.peak_holds, 2);
    cr_assert_eq(s.reserved_bytes, 36 * MiB, "E's arena went back first, then the peak rose by 4 MiB");
    cr_assert_eq(cca_get_domain_stats(a, E, &ds), CCA_OK);
    cr_assert_eq(ds.reserved_bytes, 0);
    /* D released by force, its blocks live: A's contents stay */
    cca_domain_report r = {0};
    cr_assert_eq(cca_domain_destroy(a, D, CCA_DOMAIN_FORCE, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(r.live_blocks, 2);
    all[1] = NULL;
    tu_check(a);
    cr_assert_eq(tu_stats(a).reserved_bytes, 12 * MiB);
    cr_assert(tu_check_fill(A, 12 * MiB, 1));
    tu_free(a, A);
    tu_teardown(a, u);
}

/* ---- pending frees, failing synchronizes and records ------------------------- */

/* A block freed on a stream whose work has not completed is pending: a hold
 * synchronizes (the events stay incomplete), cannot release it, and takes
 * with no cap; the pending block's pages are never unmapped, its contents
 * intact. Completed later, it is reused as usual. */
Test(hold_hostile, expandable_pending_pages_stay_mapped_through_a_hold) {
    cca_upstream *dev = tu_vm_device(64 * MiB, PG);
    tu_faulty f;
    cca_upstream *u = tu_faulty_create(&f, dev, "fx", true);
    cca_allocator *a = tu_allocator(u, "expandable:1,hold_peak:1,small_pool:0,expandable_ahead:0,log_oom:0");
    f.hold_events = true;
    f.sync_keeps_events = true;
    char *A = tu_alloc(a, 1 * MiB, S0), *B = tu_alloc(a, 1 * MiB, S0);
    tu_fill(A, 1 * MiB, 1);
    tu_fill(B, 1 * MiB, 2);
    cr_assert_eq(cca_record_stream(a, A, S1), CCA_OK);
    tu_free(a, A);
    cr_assert_eq(tu_stats(a).pending_blocks, 1);
    uint64_t syncs = f.calls[TU_FAULT_SYNC];
    char *C = tu_alloc(a, 2 * MiB, S0);
    agree(a, dev);
    cca_stats s = tu_stats(a);
    cr_assert_gt(f.calls[TU_FAULT_SYNC], syncs, "the hold synchronized for the pending free");
    cr_assert_eq(s.pending_blocks, 1);
    cr_assert_eq(s.pages_unmapped, 0);
    cr_assert_eq(s.peak_holds, 0, "nothing could be released");
    cr_assert_eq(s.reserved_bytes, 4 * MiB);
    cr_assert(tu_check_fill(A, 1 * MiB, 1), "a pending block's memory is never unmapped or reused");
    cr_assert(tu_check_fill(B, 1 * MiB, 2));
    f.events_done = f.events_recorded;
    tu_free(a, C);
    char *D = tu_alloc(a, 1 * MiB, S0); /* the completed free serves it */
    cr_assert_eq(D, A);
    cr_assert_eq(tu_stats(a).pending_blocks, 0);
    agree(a, dev);
    tu_free(a, B);
    tu_free(a, D);
    tu_empty_all(a, u);
    cr_assert_eq(cca_destroy(a), CCA_OK);
    cr_assert_eq(f.events_live, 0);
    cca_upstream_destroy(u);
    cca_upstream_destroy(dev);
}

/* The synchronize fails inside the hold: no page may be unmapped, so B's
 * cached pages stay mapped, and the peak rises by D's own pages (ccalloc.h:
 * "if that fails nothing is unmapped"). Nothing released: no hold counted. */
Test(hold_hostile, expandable_a_failing_synchronize_unmaps_nothing_and_the_peak_rises) {
    cca_upstream *dev = tu_vm_device(64 * MiB, PG);
    tu_faulty f;
    cca_upstream *u = tu_faulty_create(&f, dev, "fx", false);
    cca_allocator *a = tu_allocator(u, "expandable:1,hold_peak:1,small_pool:0,expandable_ahead:0,log_oom:0");
    char *A = tu_alloc(a, 1 * MiB, NULL), *B = tu_alloc(a, 1 * MiB, NULL), *C = tu_alloc(a, 1 * MiB, NULL);
    tu_fill(B, 1 * MiB, 2);
    tu_free(a, B);
    f.fail_at[TU_FAULT_SYNC] = f.calls[TU_FAULT_SYNC] + 1;
    f.sticky[TU_FAULT_SYNC] = true;
    char *D = tu_alloc(a, 2 * MiB, NULL);
    agree(a, dev);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.pages_unmapped, 0);
    TU_ASSERT_READABLE(B);
    cr_assert(tu_check_fill(B, 1 * MiB, 2), "B's cached pages were never unmapped");
    cr_assert_eq(s.reserved_bytes, 5 * MiB);
    cr_assert_eq(s.reserved_bytes_peak, 5 * MiB);
    cr_assert_eq(s.peak_holds, 0);
    tu_faulty_faults_off(&f);
    tu_free(a, A);
    tu_free(a, C);
    tu_free(a, D);
    tu_empty_all(a, u);
    cr_assert_eq(cca_destroy(a), CCA_OK);
    cca_upstream_destroy(u);
    cca_upstream_destroy(dev);
}

/* Classic: no event can be recorded and the fallback synchronize fails,
 * so A waits for a synchronize (needs_sync). The hold's synchronize fails
 * too: A's segment stays pinned, nothing is released, the peak rises by
 * C's segment. Once the device synchronizes, A completes. */
Test(hold_hostile, classic_a_free_waiting_for_a_synchronize_meets_a_hold) {
    tu_upstream t;
    cca_upstream *u = tu_upstream_create(&t, 256 * MiB, true);
    cca_allocator *a = tu_allocator(u, "expandable:0,hold_peak:1,log_oom:0");
    void *A = tu_alloc(a, 12 * MiB, S0), *B = tu_alloc(a, 12 * MiB, S0);
    tu_fill(A, 12 * MiB, 1);
    cr_assert_eq(cca_record_stream(a, A, S1), CCA_OK);
    t.fail_record = true;
    t.fail_sync = true;
    cr_assert_eq(cca_free(a, A), CCA_ERR_UPSTREAM);
    cr_assert_eq(tu_stats(a).pending_blocks, 1);
    void *C = tu_alloc(a, 12 * MiB, S0);
    cca_stats s = tu_stats(a);
    tu_check(a);
    cr_assert_neq(C, A);
    cr_assert_eq(s.pending_blocks, 1);
    cr_assert_eq(s.reserved_bytes, 36 * MiB);
    cr_assert_eq(s.peak_holds, 0);
    cr_assert(tu_check_fill(A, 12 * MiB, 1), "the pending block is untouched");
    t.fail_sync = false;
    t.fail_record = false;
    cr_assert_eq(cca_trim(a, SIZE_MAX, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(tu_stats(a).pending_blocks, 0);
    tu_free(a, B);
    tu_free(a, C);
    tu_destroy_clean(a, u);
    cr_assert_eq(t.used, 0);
    cca_upstream_destroy(u);
}

/* ---- upstream faults at every call of a hold ---------------------------------- */

/* The scene: [A 1M][B 1M free][C 1M][tail], D of 2 MiB passes the 3 MiB
 * peak, so its hold synchronizes, unmaps B's pages and maps D's; then E of
 * 1 MiB again (B's hole, D's tail pages unmapped). Every call of each kind
 * the two requests make fails in turn: whatever each returns, the
 * allocator agrees with the device, A and C keep their contents, and once
 * faults stop everything goes back. Over pages and over whole maps. */
static void fault_sweep(int backing, tu_fault_kind kind) {
    for (uint64_t n = 1;; n++) {
        cca_upstream *dev = tu_vm_device_backed(64 * MiB, PG, backing);
        tu_faulty f;
        cca_upstream *u = tu_faulty_create(&f, dev, "fx", false);
        cca_allocator *a = tu_allocator(u, "expandable:1,hold_peak:1,small_pool:0,expandable_ahead:0,log_oom:0");
        ccai_pages_rule_set(a, 0, 0, 256 * KiB); /* maps of at most four pages (over whole maps) */
        char *A = tu_alloc(a, 1 * MiB, NULL), *B = tu_alloc(a, 1 * MiB, NULL), *C = tu_alloc(a, 1 * MiB, NULL);
        tu_fill(A, 1 * MiB, 1);
        tu_fill(C, 1 * MiB, 3);
        tu_free(a, B);
        uint64_t first = f.calls[kind];
        f.fail_at[kind] = first + n;
        void *D = NULL, *E = NULL;
        cca_status sd = cca_alloc(a, 2 * MiB, NULL, &D);
        cr_assert(sd == CCA_OK || sd == CCA_ERR_OUT_OF_MEMORY || sd == CCA_ERR_UPSTREAM, "%s #%lu: D %s",
                  tu_fault_names[kind], (unsigned long)n, cca_status_string(sd));
        agree(a, dev);
        if (D) {
            tu_fill(D, 2 * MiB, 4);
            tu_free(a, D);
        }
        cca_status se = cca_alloc(a, 1 * MiB, NULL, &E);
        cr_assert(se == CCA_OK || se == CCA_ERR_OUT_OF_MEMORY || se == CCA_ERR_UPSTREAM, "%s #%lu: E %s",
                  tu_fault_names[kind], (unsigned long)n, cca_status_string(se));
        agree(a, dev);
        if (E)
            tu_fill(E, 1 * MiB, 5);
        cr_assert(tu_check_fill(A, 1 * MiB, 1), "%s #%lu", tu_fault_names[kind], (unsigned long)n);
        cr_assert(tu_check_fill(C, 1 * MiB, 3), "%s #%lu", tu_fault_names[kind], (unsigned long)n);
        if (E)
            cr_assert(tu_check_fill(E, 1 * MiB, 5));
        bool reached = f.calls[kind] >= first + n; /* the fault met a call of the two requests */
        tu_faulty_faults_off(&f);
        tu_free(a, A);
        tu_free(a, C);
        if (E)
            tu_free(a, E);
        tu_empty_all(a, u);
        cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
        cca_upstream_stats us = tu_upstream_stats(dev);
        cr_assert_eq(us.vm_mapped_bytes + us.vm_reserved_bytes + us.bytes_in_use, 0);
        cca_upstream_destroy(u);
        cca_upstream_destroy(dev);
        if (!reached)
            break;
        cr_assert_lt(n, 64, "the requests made no more than 64 calls of one kind");
    }
}

Test(hold_hostile, faults_at_every_call_of_a_hold_over_pages) {
    fault_sweep(CCA_VM_PAGES, TU_FAULT_MAP);
    fault_sweep(CCA_VM_PAGES, TU_FAULT_UNMAP);
    fault_sweep(CCA_VM_PAGES, TU_FAULT_SYNC);
    fault_sweep(CCA_VM_PAGES, TU_FAULT_RESERVE);
}

Test(hold_hostile, faults_at_every_call_of_a_hold_over_whole_maps) {
    fault_sweep(CCA_VM_WHOLE_MAPS, TU_FAULT_MAP);
    fault_sweep(CCA_VM_WHOLE_MAPS, TU_FAULT_UNMAP);
    fault_sweep(CCA_VM_WHOLE_MAPS, TU_FAULT_SYNC);
    fault_sweep(CCA_VM_WHOLE_MAPS, TU_FAULT_RESERVE);
}

/* Classic: every alloc and free call of a hold fails in turn (the test
 * double's fail_at counts both). */
Test(hold_hostile, classic_faults_at_every_call_of_a_hold) {
    for (uint64_t n = 1;; n++) {
        tu_upstream t;
        cca_upstream *u = tu_upstream_create(&t, 256 * MiB, false);
        cca_allocator *a = tu_allocator(u, "expandable:0,hold_peak:1,log_oom:0");
        void *A = tu_alloc(a, 12 * MiB, NULL), *B = tu_alloc(a, 12 * MiB, NULL), *C = tu_alloc(a, 12 * MiB, NULL);
        tu_fill(C, 12 * MiB, 3);
        tu_free(a, A);
        tu_free(a, B);
        t.fail_at = t.calls + n;
        t.alloc_error = CCA_ERR_OUT_OF_MEMORY;
        void *D = NULL;
        cca_status st = cca_alloc(a, 20 * MiB, NULL, &D);
        cr_assert(st == CCA_OK || st == CCA_ERR_OUT_OF_MEMORY || st == CCA_ERR_UPSTREAM, "#%lu: %s",
                  (unsigned long)n, cca_status_string(st));
        tu_check(a);
        cca_stats s = tu_stats(a);
        cr_assert_eq(t.used, s.reserved_bytes, "#%lu: the device holds %zu, reserved %zu", (unsigned long)n, t.used,
                     s.reserved_bytes);
        cr_assert(tu_check_fill(C, 12 * MiB, 3));
        bool reached = t.calls >= t.fail_at;
        t.fail_at = 0;
        tu_free(a, C);
        if (D)
            tu_free(a, D);
        cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s", cca_last_error());
        cr_assert_eq(cca_destroy(a), CCA_OK);
        cr_assert_eq(t.used, 0);
        cca_upstream_destroy(u);
        if (!reached)
            break;
        cr_assert_lt(n, 64);
    }
}

/* ---- configuration: greedy refuses it everywhere ------------------------------ */

Test(hold_hostile, greedy_refuses_hold_peak_in_any_order_and_from_the_environment) {
    cca_config c;
    cca_config_default(&c);
    const char *bad[] = {"hold_peak:1,policy:greedy", "policy:greedy,hold_peak:1", "hold_peak:1\npolicy:greedy",
                         "policy:greedy,hold_peak:0,hold_peak:1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(cca_config_parse(&c, bad[i]), CCA_ERR_CONFIG, "%s", bad[i]);
        cr_assert(strstr(cca_last_error(), "hold_peak") != NULL, "%s: %s", bad[i], cca_last_error());
        cr_assert_eq(c.policy, CCA_POLICY_GROWTH, "%s: nothing changed", bad[i]);
        cr_assert_eq(c.hold_peak, 0);
    }
    /* a key given twice takes its last value: the pair is no longer there */
    cr_assert_eq(cca_config_parse(&c, "hold_peak:1,policy:greedy,hold_peak:0"), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(c.policy, CCA_POLICY_GREEDY);
    cr_assert_eq(cca_config_parse(&c, "hold_peak:1"), CCA_ERR_CONFIG, "layered onto greedy");
    /* CCALLOC_CONF with the pair: logged, the defaults used (cca_create) */
    tu_log_capture cap = {0};
    cca_set_log_callback(tu_capture_log, &cap);
    cr_assert_eq(setenv("CCALLOC_CONF", "policy:greedy,hold_peak:1", 1), 0);
    cca_upstream *u;
    cr_assert_eq(cca_upstream_host_create(64 * MiB, &u), CCA_OK);
    cca_allocator *a = NULL;
    cr_assert_eq(cca_create(NULL, u, &a), CCA_OK, "%s", cca_last_error());
    unsetenv("CCALLOC_CONF");
    cca_set_log_callback(NULL, NULL);
    cr_assert_eq(cap.lines, 1);
    cr_assert(strstr(cap.last, "CCALLOC_CONF") && strstr(cap.last, "hold_peak"), "%s", cap.last);
    cr_assert_eq(cca_get_config(a, &c), CCA_OK);
    cr_assert_eq(c.policy, CCA_POLICY_GROWTH);
    cr_assert_eq(c.hold_peak, 0);
    cr_assert_eq(tu_upstream_stats(u).bytes_in_use, 0, "no greedy arena");
    tu_teardown(a, u);
}
