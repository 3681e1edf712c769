/*
 * test_fault_injection.c — allocator/src/alloc.c: every upstream call of a fixed sequence fails once.
 *
 * The sequence (allocations, frees, a trim, an empty-cache, destroy) is run
 * first without faults to count its upstream calls n; then once for each k in
 * 1..n with the test upstream failing its k-th alloc/free call. After every
 * step: invariants hold, the allocator's reserved bytes and segments equal
 * the test upstream's own list of live allocations (and the wrapper's
 * accounting), and blocks keep their contents. At the end nothing leaks: the
 * upstream holds nothing, except a segment whose free was refused inside
 * cca_destroy, which must then return CCA_ERR_UPSTREAM.
 */
#include "alloc_test_util.h"

#include <criterion/criterion.h>
#include <string.h>

#define S1 ((cca_stream)0x1000)

static void assert_accounts_agree(cca_allocator *a, cca_upstream *u, tu_upstream *t, const char *step, uint64_t k) {
    cca_status st = cca_check_invariants(a);
    cr_assert_eq(st, CCA_OK, "k=%llu after %s: %s", (unsigned long long)k, step, cca_last_error());
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.reserved_bytes, t->used, "k=%llu after %s: reserved %zu, upstream holds %zu", (unsigned long long)k,
                 step, s.reserved_bytes, t->used);
    cr_assert_eq(s.segments, t->live_count, "k=%llu after %s", (unsigned long long)k, step);
    cr_assert_eq(s.upstream_allocs - s.upstream_frees, t->live_count, "k=%llu after %s", (unsigned long long)k, step);
    cca_upstream_stats us = tu_upstream_stats(u);
    cr_assert_eq(us.bytes_in_use, t->used, "k=%llu after %s", (unsigned long long)k, step);
    cr_assert_eq(us.allocations, t->live_count, "k=%llu after %s", (unsigned long long)k, step);
}

typedef struct slot {
    void *p;
    size_t size;
} slot;

/* alloc: CCA_OK, or the injected failure's status (OOM after the retry, or
 * the upstream's own error), with NULL out and nothing changed. */
static void step_alloc(cca_allocator *a, slot *s, size_t size, cca_stream stream, uint64_t k, cca_status failure) {
    cca_stats before = tu_stats(a);
    void *p = (void *)1;
    cca_status st = cca_alloc(a, size, stream, &p);
    s->p = NULL;
    if (st == CCA_OK) {
        cr_assert_not_null(p);
        s->p = p;
        s->size = size;
        tu_fill(p, size, (uint64_t)size);
        return;
    }
    /* the injected failure, or a genuine OOM of a layout the failure changed */
    cr_assert(st == failure || st == CCA_ERR_OUT_OF_MEMORY, "k=%llu alloc(%zu): %s", (unsigned long long)k, size,
              cca_status_string(st));
    cr_assert_null(p);
    cca_stats after = tu_stats(a);
    cr_assert_eq(after.allocated_bytes, before.allocated_bytes);
    cr_assert_eq(after.active_blocks, before.active_blocks);
    cr_assert_eq(after.alloc_calls, before.alloc_calls);
}

static void step_free(cca_allocator *a, slot *s, uint64_t k) {
    if (!s->p)
        return;
    cr_assert(tu_check_fill(s->p, s->size, (uint64_t)s->size), "k=%llu: block of %zu overwritten",
              (unsigned long long)k, s->size);
    cr_assert_eq(cca_free(a, s->p), CCA_OK, "k=%llu: %s", (unsigned long long)k, cca_last_error());
    s->p = NULL;
}

static uint64_t last_failures; /* faults that fired in the last run */
static uint64_t last_holds;    /* its peak_holds before cca_destroy */

/* Runs the sequence; returns the number of upstream alloc/free calls made. */
static uint64_t run_sequence(const char *conf, uint64_t k, cca_status alloc_error) {
    tu_upstream t;
    cca_upstream *u = tu_upstream_create(&t, 64 * MiB, true);
    cca_config cfg;
    cca_config_default(&cfg);
    cr_assert_eq(cca_config_parse(&cfg, conf), CCA_OK);
    cfg.log_oom = 0;
    t.fail_at = k;
    t.alloc_error = alloc_error;
    cca_allocator *a = NULL;
    cca_status st = cca_create(&cfg, u, &a);
    if (st != CCA_OK) { /* the greedy arena's reservation failed */
        cr_assert_eq(st, alloc_error, "k=%llu create: %s", (unsigned long long)k, cca_status_string(st));
        cr_assert_null(a);
        cr_assert_eq(t.live_count, 0);
        last_failures = t.failures;
        cca_upstream_destroy(u);
        return t.calls;
    }
    assert_accounts_agree(a, u, &t, "create", k);
    slot s[8] = {{0}};
    step_alloc(a, &s[0], 4096, NULL, k, alloc_error);
    assert_accounts_agree(a, u, &t, "alloc 4K", k);
    step_alloc(a, &s[1], 4 * MiB, NULL, k, alloc_error);
    assert_accounts_agree(a, u, &t, "alloc 4M", k);
    step_alloc(a, &s[2], 12 * MiB, S1, k, alloc_error);
    assert_accounts_agree(a, u, &t, "alloc 12M", k);
    if (s[2].p)
        cr_assert_eq(cca_record_stream(a, s[2].p, NULL), CCA_OK);
    step_free(a, &s[1], k);
    assert_accounts_agree(a, u, &t, "free 4M", k);
    step_alloc(a, &s[3], 30 * MiB, NULL, k, alloc_error); /* may need the retry */
    assert_accounts_agree(a, u, &t, "alloc 30M", k);
    step_free(a, &s[2], k);
    assert_accounts_agree(a, u, &t, "free 12M", k);
    cca_release_report r;
    uint64_t failures = t.failures;
    st = cca_trim(a, 32 * MiB, &r);
    /* a refused free or sync inside trim is reported; anything else is OK */
    cr_assert_eq(st != CCA_OK, t.failures > failures, "k=%d: trim returned %s", k, cca_status_string(st));
    cr_assert_eq(r.bytes_still_reserved, t.used);
    assert_accounts_agree(a, u, &t, "trim", k);
    step_alloc(a, &s[4], 24 * MiB, NULL, k, alloc_error);
    assert_accounts_agree(a, u, &t, "alloc 24M", k);
    step_alloc(a, &s[5], 700 * KiB, S1, k, alloc_error);
    assert_accounts_agree(a, u, &t, "alloc 700K", k);
    for (int i = 0; i < 6; i++)
        step_free(a, &s[i], k);
    assert_accounts_agree(a, u, &t, "free all", k);
    failures = t.failures;
    st = cca_empty_cache(a, &r);
    cr_assert_eq(st != CCA_OK, t.failures > failures, "k=%d: empty_cache returned %s", k, cca_status_string(st));
    assert_accounts_agree(a, u, &t, "empty_cache", k);
    step_alloc(a, &s[6], 100 * KiB, NULL, k, alloc_error);
    assert_accounts_agree(a, u, &t, "alloc 100K", k);
    step_free(a, &s[6], k);

    uint64_t frees_before = t.free_calls, failures_before = t.failures;
    size_t segments = tu_stats(a).segments;
    last_holds = tu_stats(a).peak_holds;
    st = cca_destroy(a);
    bool refused_in_destroy = t.failures > failures_before;
    if (refused_in_destroy) {
        cr_assert_eq(st, CCA_ERR_UPSTREAM, "k=%llu: a refused free in destroy must be reported", (unsigned long long)k);
        cr_assert_eq(t.live_count, 1, "k=%llu: only the refused segment is left", (unsigned long long)k);
        tu_upstream_free_leftovers(&t);
    } else {
        cr_assert_eq(st, CCA_OK, "k=%llu destroy: %s", (unsigned long long)k, cca_last_error());
        cr_assert_eq(t.live_count, 0, "k=%llu: %zu segments leaked", (unsigned long long)k, t.live_count);
        cr_assert_eq(t.free_calls - frees_before, segments);
    }
    cr_assert_eq(t.events_live, 0, "k=%llu: events leaked", (unsigned long long)k);
    uint64_t calls = t.calls;
    last_failures = t.failures;
    cca_upstream_destroy(u);
    return calls;
}

static void every_k(const char *conf, cca_status alloc_error) {
    uint64_t n = run_sequence(conf, 0, alloc_error);
    cr_assert_geq(n, 4, "the sequence makes several upstream calls (%llu)", (unsigned long long)n);
    for (uint64_t k = 1; k <= n + 1; k++) {
        run_sequence(conf, k, alloc_error);
        cr_assert_eq(last_failures, k <= n ? 1 : 0, "k=%llu of %llu: the fault %s", (unsigned long long)k,
                     (unsigned long long)n, k <= n ? "never fired" : "fired past the end");
    }
}

Test(fault_injection, growth_every_call_fails_once_with_oom) {
    every_k("", CCA_ERR_OUT_OF_MEMORY);
}

Test(fault_injection, growth_every_call_fails_once_with_an_upstream_error) {
    every_k("", CCA_ERR_UPSTREAM);
}

Test(fault_injection, growth_with_a_cap_every_call_fails_once) {
    every_k("max_reserved:48M", CCA_ERR_OUT_OF_MEMORY);
}

/* hold_peak:1: the 30M request meets the peak with 4M cached (the hold's
 * release), and every release and take of a hold fails in turn */
Test(fault_injection, growth_holding_the_peak_every_call_fails_once) {
    run_sequence("hold_peak:1", 0, CCA_ERR_OUT_OF_MEMORY);
    cr_assert_geq(last_holds, 1, "the sequence meets the peak with memory cached");
    every_k("hold_peak:1", CCA_ERR_OUT_OF_MEMORY);
    every_k("hold_peak:1", CCA_ERR_UPSTREAM);
}

Test(fault_injection, greedy_every_call_fails_once) {
    every_k("policy:greedy,greedy_bytes:40M", CCA_ERR_OUT_OF_MEMORY);
}
