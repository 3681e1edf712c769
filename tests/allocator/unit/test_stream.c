/*
 * test_stream.c — allocator/src/core/stream.c: which streams own and use a block, and frees that wait
 * (allocator/src/core/stream.c): never reuse a block another stream may still
 * use, report every failure on the way, and poll pending frees in work
 * bounded by the number of streams, not of pending blocks.
 */
#include <criterion/criterion.h>

#include <string.h>

#include "alloc_test_util.h"
#include "malloc_fault.h"

#define S1 ((cca_stream)0x1000)
#define S2 ((cca_stream)0x2000)
#define S3 ((cca_stream)0x3000)

static tu_upstream t;
static cca_upstream *u;

static void setup(void) {
    u = tu_upstream_create(&t, 1 * GiB, true);
}

static void teardown(void) {
    cca_upstream_destroy(u);
}

TestSuite(stream, .init = setup, .fini = teardown);

Test(stream, a_free_whose_event_and_synchronize_fail_is_never_reused) {
    cca_allocator *a = tu_allocator(u, NULL);
    void *p = tu_alloc(a, 64 * KiB, S1);
    cr_assert_eq(cca_record_stream(a, p, S2), CCA_OK);
    t.fail_record = true; /* no event can be recorded ... */
    t.fail_sync = true;   /* ... and the fallback synchronize fails too */
    cr_assert_eq(cca_free(a, p), CCA_ERR_UPSTREAM, "the failure is reported");
    cr_assert(strstr(cca_last_error(), "held until a synchronize succeeds") != NULL, "%s", cca_last_error());
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.pending_blocks, 1);
    cr_assert_eq(s.allocated_bytes, 64 * KiB, "still reserved for S2's work");
    tu_check(a);
    void *q = tu_alloc(a, 64 * KiB, S1);
    cr_assert_neq(q, p, "S2 may still use p: it must not be handed out");
    cr_assert_eq(cca_free(a, p), CCA_ERR_INVALID_POINTER, "a second free of p is a double free");
    /* a synchronize that fails keeps it held; one that works releases it */
    cr_assert_eq(cca_trim(a, SIZE_MAX, NULL), CCA_ERR_UPSTREAM);
    cr_assert_eq(tu_stats(a).pending_blocks, 1);
    t.fail_sync = false;
    t.fail_record = false;
    cr_assert_eq(cca_trim(a, SIZE_MAX, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(tu_stats(a).pending_blocks, 0);
    void *r = tu_alloc(a, 64 * KiB, S1);
    cr_assert_eq(r, p, "after the synchronize, p is back in S1's pool");
    tu_free(a, q), tu_free(a, r);
    tu_destroy_clean(a, u);
}

Test(stream, a_failed_event_record_with_a_working_synchronize_frees_at_once) {
    cca_allocator *a = tu_allocator(u, NULL);
    void *p = tu_alloc(a, 64 * KiB, S1);
    cr_assert_eq(cca_record_stream(a, p, S2), CCA_OK);
    t.fail_record = true;
    uint64_t syncs = t.sync_calls;
    cr_assert_eq(cca_free(a, p), CCA_OK);
    cr_assert_eq(t.sync_calls, syncs + 1, "synchronized instead of an event");
    cr_assert_eq(tu_stats(a).pending_blocks, 0);
    cr_assert_eq(tu_alloc(a, 64 * KiB, S1), p);
    t.fail_record = false;
    tu_free(a, p);
    tu_destroy_clean(a, u);
}

Test(stream, polling_costs_one_query_per_busy_stream_not_per_pending_block) {
    cca_allocator *a = tu_allocator(u, NULL);
    enum { N = 2000 };
    static void *p[N];
    for (int i = 0; i < N; i++) {
        p[i] = tu_alloc(a, 4 * KiB, S1);
        cr_assert_eq(cca_record_stream(a, p[i], i % 2 ? S2 : S3), CCA_OK);
    }
    t.hold_events = true;
    for (int i = 0; i < N; i++)
        tu_free(a, p[i]);
    cr_assert_eq(tu_stats(a).pending_blocks, N);
    for (int k = 0; k < 10; k++) {
        uint64_t before = t.event_queries;
        void *q = tu_alloc(a, 4 * KiB, S1);
        cr_assert_leq(t.event_queries - before, 2, "alloc %d queried %llu events with 2 busy streams", k,
                      (unsigned long long)(t.event_queries - before));
        tu_free(a, q);
    }
    /* the events complete: the next alloc finishes them all, once each */
    tu_upstream_release_events(&t);
    uint64_t before = t.event_queries;
    void *q = tu_alloc(a, 4 * KiB, S1);
    cr_assert_leq(t.event_queries - before, N, "each completed wait is queried once");
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.pending_blocks, 0);
    cr_assert_eq(t.events_live, 0, "every event destroyed");
    cr_assert_eq(s.allocated_bytes, 4 * KiB, "every pending block is back in the pool");
    tu_check(a);
    tu_free(a, q);
    t.hold_events = false;
    tu_destroy_clean(a, u);
}

Test(stream, a_block_waits_for_every_user_stream) {
    cca_allocator *a = tu_allocator(u, NULL);
    void *p = tu_alloc(a, 64 * KiB, S1);
    cr_assert_eq(cca_record_stream(a, p, S2), CCA_OK);
    cr_assert_eq(cca_record_stream(a, p, S3), CCA_OK);
    cr_assert_eq(cca_record_stream(a, p, S1), CCA_OK, "its own stream: nothing to wait for");
    t.hold_events = true;
    uint64_t records = t.event_records;
    tu_free(a, p);
    cr_assert_eq(t.event_records, records + 2, "one event on S2, one on S3");
    cr_assert_eq(tu_stats(a).pending_blocks, 1);
    tu_check(a);
    /* complete the first event only (S2's): still pending */
    t.events_done = t.events_recorded - 1;
    void *q = tu_alloc(a, 64 * KiB, S1);
    cr_assert_neq(q, p);
    cr_assert_eq(tu_stats(a).pending_blocks, 1);
    tu_check(a);
    tu_upstream_release_events(&t);
    tu_free(a, q);
    void *r = tu_alloc(a, 64 * KiB, S1);
    cr_assert_eq(r, p);
    cr_assert_eq(tu_stats(a).pending_blocks, 0);
    t.hold_events = false;
    tu_free(a, r);
    tu_destroy_clean(a, u);
}

Test(stream, greedy_arena_waits_for_every_stream) {
    cca_allocator *a = tu_allocator(u, "policy:greedy,greedy_bytes:64M");
    t.hold_events = true;
    void *p = tu_alloc(a, 64 * KiB, NULL);
    uint64_t records = t.event_records;
    tu_free(a, p);
    cr_assert_eq(t.event_records, records + 1, "the default stream is ordered against no other: one event");
    tu_upstream_release_events(&t);
    cr_assert_eq(tu_alloc(a, 64 * KiB, S1), p, "the arena is shared by every stream");
    tu_free(a, p);
    cr_assert_eq(t.event_records, records + 2, "S1: one event");
    cr_assert_eq(tu_stats(a).pending_blocks, 1);
    tu_upstream_release_events(&t);
    cr_assert_eq(tu_alloc(a, 64 * KiB, S2), p);
    t.hold_events = false;
    tu_free(a, p);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    tu_destroy_clean(a, u);
}

Test(stream, destroy_with_pending_frees_destroys_their_events) {
    cca_allocator *a = tu_allocator(u, NULL);
    void *p = tu_alloc(a, 64 * KiB, S1);
    cr_assert_eq(cca_record_stream(a, p, S2), CCA_OK);
    t.hold_events = true;
    t.sync_keeps_events = true; /* even a synchronize leaves them incomplete */
    tu_free(a, p);
    cr_assert_eq(cca_destroy(a), CCA_ERR_LIVE_BLOCKS, "the pending block is reported as still live");
    cr_assert_eq(t.events_live, 0);
    cr_assert_eq(t.used, 0);
    t.hold_events = t.sync_keeps_events = false;
}

/* A greedy arena whose only block that fits is pending (freed after use on
 * a non-default stream, its event not complete yet): the allocation
 * synchronizes, completes the pending free and takes that block, over
 * classic and expandable segments alike ("a full arena is an OOM after
 * completing pending frees", docs/allocator.md). */
static void full_greedy_arena_waits_for_its_pending_block(const char *conf) {
    cca_host_options o = {.capacity = 64 * MiB, .vm_granularity = 64 * KiB};
    cca_upstream *dev = NULL;
    cr_assert_eq(cca_upstream_host_create_with(&o, &dev), CCA_OK, "%s", cca_last_error());
    tu_faulty f;
    cca_upstream *fu = tu_faulty_create(&f, dev, "gx", true);
    cca_allocator *a = tu_allocator(fu, conf);
    void *p = tu_alloc(a, 4 * MiB, S1);
    f.hold_events = true;
    tu_free(a, p);
    cr_assert_eq(tu_stats(a).pending_blocks, 1, "%s: S1 is not the arena's key stream: pending", conf);
    uint64_t syncs = f.ok[TU_FAULT_SYNC];
    void *q = NULL;
    cca_status st = cca_alloc(a, 4 * MiB, NULL, &q);
    cr_assert_eq(st, CCA_OK, "%s: the arena's only block is pending: %s", conf, cca_last_error());
    cr_assert_eq(q, p, "%s: the completed block is the one taken", conf);
    cr_assert_eq(f.ok[TU_FAULT_SYNC], syncs + 1, "%s: one synchronize completed it", conf);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.pending_blocks, 0);
    cr_assert_eq(s.ooms, 0);
    cr_assert_eq(f.events_live, 0, "%s: its event destroyed", conf);
    tu_check(a);
    f.hold_events = false;
    tu_free(a, q);
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    cca_upstream_stats us = tu_upstream_stats(fu);
    cr_assert_eq(us.bytes_in_use, 0, "%s: nothing lost", conf);
    cr_assert_eq(us.vm_reserved_bytes, 0, "%s", conf);
    cca_upstream_destroy(fu);
    cca_upstream_destroy(dev);
}

Test(stream, a_full_greedy_arena_waits_for_its_pending_block_classic) {
    full_greedy_arena_waits_for_its_pending_block("policy:greedy,greedy_bytes:4M,log_oom:0");
}

Test(stream, a_full_greedy_arena_waits_for_its_pending_block_expandable) {
    full_greedy_arena_waits_for_its_pending_block("policy:greedy,greedy_bytes:4M,expandable:1,log_oom:0");
}

/* cca_destroy with nothing pending over classic segments: CCA_OK, no
 * synchronize, even from a device whose synchronize fails. */
static void destroy_without_synchronize(cca_allocator *a) {
    uint64_t syncs = t.sync_calls;
    t.fail_sync = true;
    cr_assert_eq(cca_destroy(a), CCA_OK, "nothing pending, classic segments: %s", cca_last_error());
    cr_assert_eq(t.sync_calls, syncs, "no synchronize");
    cr_assert_eq(t.used, 0);
    t.fail_sync = false;
}

/* A free whose events were all complete when recorded (an idle stream)
 * leaves nothing pending: cca_destroy of classic segments then has nothing
 * to wait for and does not synchronize (ccalloc.h), so a device whose
 * synchronize fails cannot fail it. */
Test(stream, a_free_whose_events_completed_at_once_leaves_nothing_to_synchronize) {
    cca_allocator *a = tu_allocator(u, NULL);
    void *p = tu_alloc(a, 64 * KiB, S1);
    cr_assert_eq(cca_record_stream(a, p, S2), CCA_OK);
    uint64_t records = t.event_records;
    tu_free(a, p);
    cr_assert_eq(t.event_records, records + 1, "an event on S2, complete at once");
    cr_assert_eq(t.events_live, 0, "and destroyed");
    cr_assert_eq(tu_stats(a).pending_blocks, 0);
    destroy_without_synchronize(a);
}

/* Independent streams: no stream's work is ordered against another's, the
 * legacy default stream (NULL) included, as for CUDA's non-blocking
 * streams (cudaStreamNonBlocking: PyTorch's pool streams, CuPy's). A block
 * of a shared arena (policy:greedy's, a domain's footprint arena) goes to
 * any stream, so its free waits for every stream that used it, NULL too:
 * an event on NULL, the block pending until it completes; reused at once
 * when the event is already complete; a synchronize where no event can be
 * recorded. */
Test(stream, a_greedy_arena_block_used_on_null_waits_for_null) {
    cca_allocator *a = tu_allocator(u, "policy:greedy,greedy_bytes:64M");
    t.hold_events = true;
    void *p = tu_alloc(a, 64 * KiB, NULL);
    uint64_t records = t.event_records;
    tu_free(a, p);
    cr_assert_eq(t.event_records, records + 1, "NULL's work may still touch p: one event on NULL");
    cr_assert_eq(tu_stats(a).pending_blocks, 1);
    tu_check(a);
    void *q = tu_alloc(a, 64 * KiB, S1);
    cr_assert_neq(q, p, "S1 is not ordered after NULL: p must wait for NULL's event");
    void *r = tu_alloc(a, 64 * KiB, NULL);
    cr_assert(r != p && r != q, "pending until its event completes, for NULL too");
    tu_free(a, q);
    tu_free(a, r);
    tu_upstream_release_events(&t);
    cr_assert_eq(tu_alloc(a, 64 * KiB, S1), p, "once NULL's event completed, p is free for any stream");
    t.hold_events = false;
    tu_free(a, p);
    cr_assert_eq(tu_stats(a).pending_blocks, 0);
    cr_assert_eq(t.events_live, 0);
    tu_destroy_clean(a, u);
}

Test(stream, a_complete_event_frees_the_arena_block_at_once) {
    cca_allocator *a = tu_allocator(u, "policy:greedy,greedy_bytes:64M");
    void *p = tu_alloc(a, 64 * KiB, NULL);
    uint64_t records = t.event_records;
    tu_free(a, p);
    cr_assert_eq(t.event_records, records + 1, "an event on NULL");
    cr_assert_eq(tu_stats(a).pending_blocks, 0, "already complete: free at once");
    cr_assert_eq(t.events_live, 0, "its event destroyed");
    cr_assert_eq(tu_alloc(a, 64 * KiB, S1), p);
    tu_free(a, p);
    tu_destroy_clean(a, u);
}

Test(stream, without_events_an_arena_free_on_null_synchronizes) {
    tu_upstream t2;
    cca_upstream *u2 = tu_upstream_create(&t2, 1 * GiB, false);
    cca_allocator *a = tu_allocator(u2, "policy:greedy,greedy_bytes:64M");
    void *p = tu_alloc(a, 64 * KiB, NULL);
    uint64_t syncs = t2.sync_calls;
    tu_free(a, p);
    cr_assert_eq(t2.sync_calls, syncs + 1, "no event can be recorded: the device is synchronized");
    cr_assert_eq(tu_stats(a).pending_blocks, 0);
    cr_assert_eq(tu_alloc(a, 64 * KiB, S1), p);
    tu_free(a, p);
    tu_destroy_clean(a, u2);
    cca_upstream_destroy(u2);
}

Test(stream, a_footprint_arena_block_used_on_null_waits_for_null) {
    cca_allocator *a = tu_allocator(u, NULL);
    cca_domain *d = NULL;
    cr_assert_eq(cca_domain_create(a, "d", &d), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_domain_reserve(a, d, 4 * MiB), CCA_OK, "%s", cca_last_error());
    t.hold_events = true;
    void *p = NULL, *q = NULL;
    cr_assert_eq(cca_alloc_in(a, d, 1 * MiB, NULL, &p), CCA_OK, "%s", cca_last_error());
    uint64_t records = t.event_records;
    tu_free(a, p);
    cr_assert_eq(t.event_records, records + 1, "one event on NULL");
    cr_assert_eq(tu_stats(a).pending_blocks, 1);
    cr_assert_eq(cca_alloc_in(a, d, 1 * MiB, S1, &q), CCA_OK, "%s", cca_last_error());
    cr_assert_neq(q, p, "S1 is not ordered after NULL: p must wait for NULL's event");
    tu_check(a);
    tu_upstream_release_events(&t);
    t.hold_events = false;
    tu_free(a, q);
    cr_assert_eq(cca_domain_destroy(a, d, 0, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(tu_stats(a).pending_blocks, 0);
    tu_destroy_clean(a, u);
}

/* A pending free that a later alloc's poll completes leaves no pending
 * queue behind (empty queues are freed): cca_destroy of classic segments
 * then has nothing pending and does not synchronize (ccalloc.h), so a
 * device whose synchronize fails cannot fail it. */
Test(stream, a_pending_free_completed_by_a_poll_leaves_nothing_to_synchronize) {
    cca_allocator *a = tu_allocator(u, NULL);
    void *p = tu_alloc(a, 64 * KiB, S1);
    cr_assert_eq(cca_record_stream(a, p, S2), CCA_OK);
    t.hold_events = true;
    tu_free(a, p);
    cr_assert_eq(tu_stats(a).pending_blocks, 1);
    tu_upstream_release_events(&t);
    t.hold_events = false;
    void *q = tu_alloc(a, 64 * KiB, S1);
    cr_assert_eq(q, p, "the alloc's poll completed the free");
    cr_assert_eq(tu_stats(a).pending_blocks, 0);
    tu_free(a, q);
    destroy_without_synchronize(a);
}

/* A block held until a synchronize succeeds (its event and the fallback
 * synchronize failed) is a pending free: cca_destroy synchronizes first
 * (ccalloc.h), and once that works the block is no longer live. */
Test(stream, destroy_synchronizes_for_a_block_held_until_a_synchronize) {
    cca_allocator *a = tu_allocator(u, NULL);
    void *p = tu_alloc(a, 64 * KiB, S1);
    cr_assert_eq(cca_record_stream(a, p, S2), CCA_OK);
    t.fail_record = true;
    t.fail_sync = true;
    cr_assert_eq(cca_free(a, p), CCA_ERR_UPSTREAM);
    cr_assert_eq(tu_stats(a).pending_blocks, 1);
    t.fail_sync = false;
    uint64_t syncs = t.sync_calls;
    cr_assert_eq(cca_destroy(a), CCA_OK, "the synchronize releases the held block: %s", cca_last_error());
    cr_assert_eq(t.sync_calls, syncs + 1, "one synchronize");
    cr_assert_eq(t.used, 0);
    t.fail_record = false;
}

/* A call that succeeds leaves the thread's message as it was (ccalloc.h):
 * a free whose event could not be recorded but whose synchronize worked is
 * such a call, the refused record's message no part of it. */
Test(stream, a_free_that_synchronized_instead_of_an_event_keeps_the_message) {
    cca_allocator *a = tu_allocator(u, NULL);
    void *p = tu_alloc(a, 64 * KiB, S1);
    cr_assert_eq(cca_record_stream(a, p, S2), CCA_OK);
    t.fail_record = true;
    cca_set_error(CCA_ERR_CONFIG, "the caller's own message");
    cr_assert_eq(cca_free(a, p), CCA_OK);
    cr_assert_str_eq(cca_last_error(), "the caller's own message");
    t.fail_record = false;
    tu_destroy_clean(a, u);
}

/* A deferred free's host memory (stream.c's costs): the array of its
 * waits, the block's stream-use record when it has none (a block of an
 * arena), and a queue for a stream with no free pending on it. */
Test(stream, a_deferred_free_allocates_its_waits_its_record_and_new_queues) {
    t.hold_events = true;
    cca_allocator *a = tu_allocator(u, NULL);
    void *p = tu_alloc(a, 64 * KiB, S1), *q = tu_alloc(a, 64 * KiB, S1);
    cr_assert_eq(cca_record_stream(a, p, S2), CCA_OK); /* their records made here */
    cr_assert_eq(cca_record_stream(a, q, S2), CCA_OK);
    long n = tu_malloc_calls();
    cr_assert_eq(cca_free(a, p), CCA_OK);
    long first = tu_malloc_calls() - n;
    n = tu_malloc_calls();
    cr_assert_eq(cca_free(a, q), CCA_OK);
    long second = tu_malloc_calls() - n;
    cr_assert_eq(first, 2, "the waits and S2's queue: %ld", first);
    cr_assert_eq(second, 1, "the waits alone (S2's queue holds p's): %ld", second);
    cr_assert_eq(tu_stats(a).pending_blocks, 2);
    tu_upstream_release_events(&t);
    cr_assert_eq(cca_trim(a, SIZE_MAX, NULL), CCA_OK, "%s", cca_last_error());
    tu_destroy_clean(a, u);

    a = tu_allocator(u, "policy:greedy,greedy_bytes:16M");
    p = tu_alloc(a, 64 * KiB, S1); /* an arena block: every user waits, no record yet */
    n = tu_malloc_calls();
    cr_assert_eq(cca_free(a, p), CCA_OK);
    long arena = tu_malloc_calls() - n;
    cr_assert_eq(arena, 3, "its record, the waits and S1's queue: %ld", arena);
    tu_upstream_release_events(&t);
    cr_assert_eq(cca_trim(a, SIZE_MAX, NULL), CCA_OK, "%s", cca_last_error());
    tu_destroy_clean(a, u);
    t.hold_events = false;
}

/* No host memory for a deferred free's waits is as no event (stream.c):
 * the free synchronizes instead and the block is free at once. */
Test(stream, a_free_without_host_memory_for_its_waits_synchronizes_instead) {
    t.hold_events = true;
    cca_allocator *a = tu_allocator(u, NULL);
    void *p = tu_alloc(a, 64 * KiB, S1);
    cr_assert_eq(cca_record_stream(a, p, S2), CCA_OK);
    uint64_t syncs = t.sync_calls;
    tu_malloc_arm(1, true);
    cca_status st = cca_free(a, p);
    long refused = tu_malloc_disarm();
    cr_assert_eq(st, CCA_OK, "%s", cca_last_error());
    cr_assert_geq(refused, 1, "no allocation was refused");
    cr_assert_eq(t.sync_calls, syncs + 1, "synchronized instead");
    cr_assert_eq(tu_stats(a).pending_blocks, 0);
    cr_assert_eq(tu_alloc(a, 64 * KiB, S1), p, "free at once");
    tu_free(a, p);
    t.hold_events = false;
    tu_destroy_clean(a, u);
}
