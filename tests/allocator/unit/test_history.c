/*
 * test_history.c — allocator/src/support/history.c: the ring of recent events and
 * the pickle writer's argument and error paths (allocator/src/
 * snapshot_torch.c; its structure is checked field by field by
 * tests/python/test_snapshot_torch.py).
 *
 * Every event kind is checked with its exact address, size and stream:
 * alloc / free_requested / free_completed on the cached path, a deferred
 * stream free (completed only when its event completes), a forced domain
 * release (completed without a request), classic segment_alloc /
 * segment_free, expandable segment_map / segment_unmap, oom with the
 * device's free bytes (0 when mem_info fails); off = nothing recorded; the ring's wraparound keeps
 * the newest `history` events in order.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "alloc_test_util.h"
#include "internal.h"
#include "pages_rule.h"

#define S1 ((cca_stream)0x1000)
#define S2 ((cca_stream)0x2000)

typedef struct want {
    ccai_event_kind kind;
    uintptr_t addr;
    size_t size;
    cca_stream stream;
} want;

/* The held events are exactly `w` (n of them), oldest first, with times
 * that never decrease. */
static void expect_events(const cca_allocator *a, const want *w, size_t n, const char *what) {
    const ccai_history *h = a->history;
    cr_assert_not_null(h, "%s: history is on", what);
    cr_assert_eq(ccai_history_held(h), n, "%s: %zu events held, expected %zu", what, ccai_history_held(h), n);
    uint64_t last = 0;
    for (size_t i = 0; i < n; i++) {
        const ccai_event *e = ccai_history_at(h, i);
        cr_assert_eq(e->kind, w[i].kind, "%s: event %zu is %s, expected %s", what, i, ccai_event_name(e->kind),
                     ccai_event_name(w[i].kind));
        cr_assert_eq(e->addr, w[i].addr, "%s: event %zu (%s) addr %#lx, expected %#lx", what, i,
                     ccai_event_name(e->kind), (unsigned long)e->addr, (unsigned long)w[i].addr);
        cr_assert_eq(e->size, w[i].size, "%s: event %zu (%s) size %zu, expected %zu", what, i, ccai_event_name(e->kind),
                     e->size, w[i].size);
        cr_assert_eq(e->stream, w[i].stream, "%s: event %zu (%s) stream", what, i, ccai_event_name(e->kind));
        cr_assert_geq(e->time_us, last, "%s: event %zu goes back in time", what, i);
        cr_assert_gt(e->time_us, 1600000000000000ull, "%s: time_us is microseconds since the epoch", what);
        last = e->time_us;
    }
}

/* The one segment of a (there must be one): its base. */
static uintptr_t only_segment_base(const cca_allocator *a) {
    cr_assert_not_null(a->segments);
    cr_assert_null(a->segments->next, "one segment");
    return a->segments->base;
}

Test(history, off_by_default_and_with_history_0_nothing_is_recorded) {
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(256 * MiB, NULL, &u, &a);
    cr_assert_null(a->history, "the default is off");
    cca_config c;
    cca_get_config(a, &c);
    cr_assert_eq(c.history, 0);
    void *p = tu_alloc(a, 1000, NULL);
    tu_free(a, p);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    cr_assert_null(a->history, "still nothing after alloc, free, release");
    /* the pickle has one empty trace for the device */
    char buf[4096];
    FILE *f = fmemopen(buf, sizeof buf, "wb");
    cr_assert_eq(cca_write_snapshot_torch(a, 0, f), CCA_OK, "%s", cca_last_error());
    long n = ftell(f);
    fclose(f);
    cr_assert(memmem(buf, (size_t)n, "device_traces", 13) != NULL);
    cr_assert(memmem(buf, (size_t)n, "time_us", 7) == NULL, "no events in the pickle");
    tu_teardown(a, u);
}

Test(history, cached_path_and_classic_segments_exact) {
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(256 * MiB, "expandable:0,history:100", &u, &a);
    cr_assert_eq(a->history->cap, 100);
    void *p = tu_alloc(a, 1000, S1); /* small pool: a 2 MiB segment */
    uintptr_t base = only_segment_base(a);
    cr_assert_eq((uintptr_t)p, base);
    void *q = tu_alloc(a, 3000, S1); /* split from the same segment */
    tu_free(a, p);
    tu_free(a, q);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    /* clang-format off */
    const want w[] = {
        {CCAI_EV_SEGMENT_ALLOC, base, 2 * MiB, S1},
        {CCAI_EV_ALLOC, base, 1000, S1},
        {CCAI_EV_ALLOC, base + 1024, 3000, S1}, /* 1000 rounds to 1024 */
        {CCAI_EV_FREE_REQUESTED, base, 1000, S1},
        {CCAI_EV_FREE_COMPLETED, base, 1000, S1},
        {CCAI_EV_FREE_REQUESTED, base + 1024, 3000, S1},
        {CCAI_EV_FREE_COMPLETED, base + 1024, 3000, S1},
        {CCAI_EV_SEGMENT_FREE, base, 2 * MiB, S1},
    };
    /* clang-format on */
    expect_events(a, w, sizeof w / sizeof w[0], "cached path");
    cr_assert_eq(a->history->total, 8);
    tu_teardown(a, u);
}

Test(history, a_deferred_stream_free_completes_when_its_event_does) {
    tu_upstream t;
    cca_upstream *u = tu_upstream_create(&t, 1 * GiB, true);
    cca_allocator *a = tu_allocator(u, "history:64");
    void *p = tu_alloc(a, 64 * KiB, S1);
    uintptr_t base = only_segment_base(a);
    cr_assert_eq(cca_record_stream(a, p, S2), CCA_OK);
    t.hold_events = true;
    tu_free(a, p);
    cr_assert_eq(tu_stats(a).pending_blocks, 1);
    /* clang-format off */
    const want before[] = {
        {CCAI_EV_SEGMENT_ALLOC, base, 2 * MiB, S1},
        {CCAI_EV_ALLOC, base, 64 * KiB, S1},
        {CCAI_EV_FREE_REQUESTED, base, 64 * KiB, S1},
    };
    /* clang-format on */
    expect_events(a, before, 3, "pending: requested, not completed");
    void *q = tu_alloc(a, 64 * KiB, S1); /* polls: the event is still held */
    cr_assert_neq(q, p);
    t.hold_events = false;
    tu_upstream_release_events(&t);
    void *r = tu_alloc(a, 128 * KiB, S1); /* polls: p completes, then r */
    /* clang-format off */
    const want after[] = {
        {CCAI_EV_SEGMENT_ALLOC, base, 2 * MiB, S1},
        {CCAI_EV_ALLOC, base, 64 * KiB, S1},
        {CCAI_EV_FREE_REQUESTED, base, 64 * KiB, S1},
        {CCAI_EV_ALLOC, base + 64 * KiB, 64 * KiB, S1},
        {CCAI_EV_FREE_COMPLETED, base, 64 * KiB, S1},
        {CCAI_EV_ALLOC, (uintptr_t)r, 128 * KiB, S1},
    };
    /* clang-format on */
    expect_events(a, after, 6, "the free completed at the poll");
    tu_free(a, q);
    tu_free(a, r);
    tu_destroy_clean(a, u);
    cca_upstream_destroy(u);
}

Test(history, a_forced_domain_release_completes_without_a_request) {
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(256 * MiB, "expandable:0,history:64", &u, &a); /* classic: segment events */
    cca_domain *d;
    cr_assert_eq(cca_domain_create(a, "model", &d), CCA_OK);
    void *p;
    cr_assert_eq(cca_alloc_in(a, d, 5000, S1, &p), CCA_OK);
    uintptr_t base = only_segment_base(a);
    cr_assert_eq(cca_domain_release(a, d, CCA_DOMAIN_FORCE, NULL), CCA_OK, "%s", cca_last_error());
    /* clang-format off */
    const want w[] = {
        {CCAI_EV_SEGMENT_ALLOC, base, 2 * MiB, S1},
        {CCAI_EV_ALLOC, (uintptr_t)p, 5000, S1},
        {CCAI_EV_FREE_COMPLETED, (uintptr_t)p, 5000, S1},
        {CCAI_EV_SEGMENT_FREE, base, 2 * MiB, S1},
    };
    /* clang-format on */
    expect_events(a, w, 4, "forced release");
    cr_assert_eq(cca_domain_destroy(a, d, 0, NULL), CCA_OK);
    tu_teardown(a, u);
}

Test(history, expandable_segments_record_maps_and_unmaps) {
    /* no least step (the test hook; the cap the default 64 MiB), so that
     * the second request maps a run of its own; a device of pages
     * (CCA_VM_PAGES), so that one unmap spans both maps */
    cca_upstream *u = tu_vm_device(256 * MiB, 0);
    cca_allocator *a = tu_allocator(u, "expandable:1,history:64");
    ccai_pages_rule_set(a, 0, 64 * MiB, 128 * MiB);
    void *p = tu_alloc(a, 3 * MiB, S1); /* large range: 2 pages of 2 MiB, nothing ahead yet */
    uintptr_t base = only_segment_base(a);
    cr_assert_eq((uintptr_t)p, base);
    void *q = tu_alloc(a, 3 * MiB, S1); /* at base + 3M: page 1 is mapped, pages 2 and 3 are not */
    cr_assert_eq((uintptr_t)q, base + 3 * MiB);
    tu_free(a, p);
    tu_free(a, q);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    cr_assert_null(a->segments, "the range is released too (not an event)");
    /* clang-format off */
    const want w[] = {
        {CCAI_EV_SEGMENT_MAP, base, 4 * MiB, S1},
        {CCAI_EV_ALLOC, base, 3 * MiB, S1},
        {CCAI_EV_SEGMENT_MAP, base + 4 * MiB, 2 * MiB, S1}, /* page 2; ahead: 4M/16 < a page */
        {CCAI_EV_ALLOC, base + 3 * MiB, 3 * MiB, S1},
        {CCAI_EV_FREE_REQUESTED, base, 3 * MiB, S1},
        {CCAI_EV_FREE_COMPLETED, base, 3 * MiB, S1},
        {CCAI_EV_FREE_REQUESTED, base + 3 * MiB, 3 * MiB, S1},
        {CCAI_EV_FREE_COMPLETED, base + 3 * MiB, 3 * MiB, S1},
        {CCAI_EV_SEGMENT_UNMAP, base, 6 * MiB, S1}, /* one run across both maps */
    };
    /* clang-format on */
    expect_events(a, w, sizeof w / sizeof w[0], "expandable");
    tu_teardown(a, u);
}

Test(history, oom_records_the_request_and_the_device_free_bytes) {
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(64 * MiB, "history:8,log_oom:0", &u, &a);
    void *p = tu_alloc(a, 20 * MiB, S1); /* a 20 MiB large segment */
    size_t free_b, total_b;
    cr_assert_eq(cca_upstream_mem_info(u, &free_b, &total_b), CCA_OK);
    void *q;
    cr_assert_eq(cca_alloc(a, 50 * MiB, S1, &q), CCA_ERR_OUT_OF_MEMORY);
    cr_assert_eq(free_b, 44 * MiB);
    const ccai_history *h = a->history;
    const ccai_event *e = ccai_history_at(h, ccai_history_held(h) - 1);
    cr_assert_eq(e->kind, CCAI_EV_OOM);
    cr_assert_eq(e->size, 50 * MiB, "the requested bytes");
    cr_assert_eq(e->addr, 44 * MiB, "the device's free bytes");
    cr_assert_eq(e->stream, S1);
    cr_assert_str_eq(ccai_event_name(e->kind), "oom");
    tu_free(a, p);
    tu_teardown(a, u);
}

/* A device whose mem_info fails after writing its out-parameters (what
 * they hold then is unspecified: ccalloc.h, cca_upstream_mem_info). */
static cca_status lying_alloc(void *ctx, size_t size, void **p) {
    return cca_upstream_alloc(ctx, size, p);
}
static cca_status lying_free(void *ctx, void *p, size_t size) {
    return cca_upstream_free(ctx, p, size);
}
static cca_status lying_mem_info(void *ctx, size_t *free_bytes, size_t *total_bytes) {
    (void)ctx;
    *free_bytes = 12345 * 512;
    *total_bytes = 67890 * 512;
    return cca_set_error(CCA_ERR_UPSTREAM, "lying: mem_info refused after writing");
}

/* history.c: an oom's address is the device's free bytes, "0 if unknown":
 * a failed mem_info's leftovers are not taken for them. */
Test(history, oom_records_0_free_bytes_when_mem_info_fails) {
    cca_upstream *inner, *u;
    cr_assert_eq(cca_upstream_host_create(64 * MiB, &inner), CCA_OK);
    cca_upstream_ops ops = {.alloc = lying_alloc, .free = lying_free, .mem_info = lying_mem_info, .name = "lying"};
    cr_assert_eq(cca_upstream_custom_create(&ops, inner, &u), CCA_OK);
    cca_allocator *a = tu_allocator(u, "history:8,log_oom:0");
    void *p = tu_alloc(a, 20 * MiB, S1);
    void *q;
    cr_assert_eq(cca_alloc(a, 50 * MiB, S1, &q), CCA_ERR_OUT_OF_MEMORY);
    const ccai_event *e = ccai_history_at(a->history, ccai_history_held(a->history) - 1);
    cr_assert_eq(e->kind, CCAI_EV_OOM);
    cr_assert_eq(e->size, 50 * MiB);
    cr_assert_eq(e->addr, 0, "free bytes unknown: 0, not mem_info's leftover %zu", (size_t)e->addr);
    tu_free(a, p);
    tu_teardown(a, u);
    cca_upstream_destroy(inner);
}

Test(history, the_ring_keeps_the_newest_events_in_order) {
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(256 * MiB, "history:4", &u, &a);
    void *p[3];
    for (int i = 0; i < 3; i++) {
        p[i] = tu_alloc(a, 1000u * (unsigned)(i + 1), NULL);
        tu_free(a, p[i]);
    }
    /* 1 segment_alloc + 3 x (alloc, free_requested, free_completed) = 10 */
    cr_assert_eq(a->history->total, 10);
    uintptr_t base = only_segment_base(a);
    /* clang-format off */
    const want w[] = {
        {CCAI_EV_FREE_COMPLETED, base, 2000, NULL},
        {CCAI_EV_ALLOC, base, 3000, NULL},
        {CCAI_EV_FREE_REQUESTED, base, 3000, NULL},
        {CCAI_EV_FREE_COMPLETED, base, 3000, NULL},
    };
    /* clang-format on */
    expect_events(a, w, 4, "after wrapping twice");
    /* one more: the oldest held drops out */
    tu_free(a, tu_alloc(a, 512, NULL));
    cr_assert_eq(ccai_history_at(a->history, 0)->kind, CCAI_EV_FREE_COMPLETED, "3000's completion is now oldest");
    cr_assert_eq(ccai_history_at(a->history, 0)->size, 3000);
    cr_assert_eq(ccai_history_at(a->history, 3)->size, 512);
    tu_teardown(a, u);
}

Test(history, the_option_parses_counts_and_is_bounded) {
    cca_config c;
    cca_config_default(&c);
    cr_assert_eq(cca_config_parse(&c, "history:64K"), CCA_OK);
    cr_assert_eq(c.history, 65536);
    cr_assert_eq(cca_config_parse(&c, "history:16M"), CCA_OK);
    cr_assert_eq(c.history, (size_t)16 << 20);
    cr_assert_eq(cca_config_parse(&c, "history:16777217"), CCA_ERR_CONFIG);
    cr_assert(strstr(cca_last_error(), "out-of-range value for key 'history'") != NULL, "%s", cca_last_error());
    cr_assert_eq(c.history, (size_t)16 << 20, "unchanged by the refused value");
}

/* The ring's own bounds: 1 .. CCAI_HISTORY_MAX entries (the option's
 * range), both ends made; 0 and one more refused. */
Test(history, the_ring_is_made_for_every_count_the_option_allows) {
    ccai_history *h = (ccai_history *)1;
    cr_assert_eq(ccai_history_create(0, &h), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_null(h);
    cr_assert_eq(ccai_history_create(CCAI_HISTORY_MAX + 1, &h), CCA_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(cca_last_error(), "not in [1, 16777216]"), "%s", cca_last_error());
    const size_t ok[2] = {1, CCAI_HISTORY_MAX};
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(ccai_history_create(ok[i], &h), CCA_OK, "%zu: %s", ok[i], cca_last_error());
        cr_assert_eq(h->cap, ok[i]);
        cr_assert_eq(ccai_history_held(h), 0);
        ccai_history_destroy(h);
    }
}

/* time_us is CLOCK_REALTIME in microseconds: between two reads of that
 * clock around the event; each kind has PyTorch's name, and a kind out of
 * range is "unknown". */
Test(history, times_are_realtime_microseconds_and_names_are_pytorchs) {
    ccai_history *h = NULL;
    cr_assert_eq(ccai_history_create(4, &h), CCA_OK);
    struct timespec t0, t1;
    clock_gettime(CLOCK_REALTIME, &t0);
    ccai_history_record(h, CCAI_EV_ALLOC, 0x1000, 512, NULL);
    ccai_history_free(h, 0x1000, 512, NULL, false);
    clock_gettime(CLOCK_REALTIME, &t1);
    uint64_t lo = (uint64_t)t0.tv_sec * 1000000u + (uint64_t)t0.tv_nsec / 1000u;
    uint64_t hi = (uint64_t)t1.tv_sec * 1000000u + (uint64_t)t1.tv_nsec / 1000u;
    cr_assert_eq(ccai_history_held(h), 3);
    for (size_t i = 0; i < 3; i++) {
        uint64_t t = ccai_history_at(h, i)->time_us;
        cr_assert(t >= lo && t <= hi, "event %zu at %llu, not in [%llu, %llu]", i, (unsigned long long)t,
                  (unsigned long long)lo, (unsigned long long)hi);
    }
    ccai_history_destroy(h);
    const char *names[] = {"alloc",        "free_requested", "free_completed", "segment_alloc",
                           "segment_free", "segment_map",    "segment_unmap",  "oom"};
    for (int k = 0; k <= CCAI_EV_OOM; k++)
        cr_assert_str_eq(ccai_event_name((ccai_event_kind)k), names[k]);
    cr_assert_str_eq(ccai_event_name((ccai_event_kind)(CCAI_EV_OOM + 1)), "unknown");
    cr_assert_str_eq(ccai_event_name((ccai_event_kind)255), "unknown");
}

/* ---- cca_write_snapshot_torch: arguments and write failures ---------------- */

Test(snapshot_torch, bad_arguments_write_nothing) {
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(64 * MiB, "history:16", &u, &a);
    char buf[64] = {0};
    FILE *f = fmemopen(buf, sizeof buf, "wb");
    cr_assert_eq(cca_write_snapshot_torch(NULL, 0, f), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_write_snapshot_torch(a, 0, NULL), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_write_snapshot_torch(a, -1, f), CCA_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(cca_last_error(), "device -1") != NULL, "%s", cca_last_error());
    cr_assert_eq(cca_write_snapshot_torch(a, CCA_SNAPSHOT_MAX_DEVICE + 1, f), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ftell(f), 0, "nothing written");
    fclose(f);
    tu_teardown(a, u);
}

Test(snapshot_torch, a_failed_write_is_ccA_ERR_IO_and_the_allocator_stays_usable) {
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(64 * MiB, "history:16", &u, &a);
    void *p = tu_alloc(a, 4096, NULL);
    /* a buffer too small for the pickle */
    char small[32];
    FILE *f = fmemopen(small, sizeof small, "wb");
    setvbuf(f, NULL, _IONBF, 0);
    cr_assert_eq(cca_write_snapshot_torch(a, 0, f), CCA_ERR_IO);
    cr_assert(strstr(cca_last_error(), "write failed") != NULL, "%s", cca_last_error());
    fclose(f);
    /* a device that is full: the failure shows at the flush */
    FILE *full = fopen("/dev/full", "wb");
    if (full) {
        cr_assert_eq(cca_write_snapshot_torch(a, 0, full), CCA_ERR_IO);
        fclose(full);
    }
    /* a stream open for reading only */
    FILE *ro = fopen("/dev/null", "rb");
    cr_assert_eq(cca_write_snapshot_torch(a, 0, ro), CCA_ERR_IO);
    fclose(ro);
    /* the lock was released and the allocator is intact */
    tu_check(a);
    char *big = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&big, &len);
    cr_assert_eq(cca_write_snapshot_torch(a, 3, m), CCA_OK, "%s", cca_last_error());
    fclose(m);
    cr_assert_gt(len, 100);
    cr_assert_eq((unsigned char)big[0], 0x80, "PROTO");
    cr_assert_eq(big[1], 2, "protocol 2");
    cr_assert_eq(big[len - 1], '.', "STOP");
    free(big);
    tu_free(a, p);
    tu_teardown(a, u);
}
