/*
 * test_threads.c — allocator/src/support/lock.c: every function is safe to call concurrently on one
 * allocator (one lock per allocator: support/lock.c).
 *
 * THREADS workers each run OPS random alloc/free operations (own stream or
 * the shared default stream, pattern-filled blocks checked at free), with
 * record_stream, trims, stats reads and invariant checks mixed in, on one
 * allocator. Afterwards the stats must add up exactly: every call counted,
 * nothing live, and empty-cache leaves the upstream holding nothing.
 */
#include "alloc_test_util.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>

#define THREADS 4
#define OPS 3000
#define LIVE 64

typedef struct worker {
    cca_allocator *a;
    int id;
    uint64_t allocs, frees, ooms;
    const char *error; /* first failure; asserting off the main thread is not allowed */
} worker;

static void *work(void *arg) {
    worker *w = arg;
    uint64_t rng = 1000 + (uint64_t)w->id;
    cca_stream own = w->id % 2 ? (cca_stream)(uintptr_t)(0x1000 * (w->id + 1)) : NULL;
    struct {
        void *p;
        size_t size;
        uint64_t seed;
    } live[LIVE];
    int n = 0;
    for (int op = 0; op < OPS && !w->error; op++) {
        uint64_t r = tu_rand(&rng) % 100;
        if ((r < 50 && n < LIVE) || n == 0) {
            size_t size = tu_rand(&rng) % 8 == 0 ? 1 * MiB + tu_rand(&rng) % (4 * MiB) : 1 + tu_rand(&rng) % (96 * KiB);
            void *p;
            cca_status st = cca_alloc(w->a, size, own, &p);
            if (st == CCA_ERR_OUT_OF_MEMORY) {
                w->ooms++;
                continue;
            }
            if (st != CCA_OK || !p) {
                w->error = "cca_alloc failed";
                break;
            }
            uint64_t seed = tu_rand(&rng);
            tu_fill(p, size, seed);
            live[n].p = p, live[n].size = size, live[n].seed = seed;
            n++;
            w->allocs++;
            if (r % 16 == 0 && cca_record_stream(w->a, p, (cca_stream)0x7000) != CCA_OK)
                w->error = "cca_record_stream failed";
        } else if (r < 94) {
            int i = (int)(tu_rand(&rng) % (uint64_t)n);
            if (!tu_check_fill(live[i].p, live[i].size, live[i].seed))
                w->error = "a block was overwritten by another thread";
            else if (cca_free(w->a, live[i].p) != CCA_OK)
                w->error = "cca_free failed";
            live[i] = live[--n];
            w->frees++;
        } else if (r < 96) {
            if (cca_trim(w->a, 64 * MiB, NULL) != CCA_OK)
                w->error = "cca_trim failed";
        } else if (r < 98) {
            cca_stats s;
            cca_get_stats(w->a, &s);
            if (s.allocated_bytes > s.reserved_bytes || s.allocated_bytes > s.allocated_bytes_peak)
                w->error = "inconsistent stats snapshot";
        } else if (cca_check_invariants(w->a) != CCA_OK) {
            w->error = "invariants broken under concurrency";
        }
    }
    while (n > 0 && !w->error) {
        n--;
        if (!tu_check_fill(live[n].p, live[n].size, live[n].seed))
            w->error = "a block was overwritten by another thread";
        else if (cca_free(w->a, live[n].p) != CCA_OK)
            w->error = "cca_free failed";
        w->frees++;
    }
    return NULL;
}

/* latency_ns > 0: every device alloc and free busy-waits that long under
 * the allocator's lock, so that the other threads spin out and sleep in the
 * kernel (lock.c's slow path) and must be woken by the unlocks. */
static void stress(const char *conf, uint64_t latency_ns) {
    cca_upstream *u;
    cca_allocator *a;
    cca_host_options o = {.capacity = 512 * MiB, .alloc_latency_ns = latency_ns, .free_latency_ns = latency_ns};
    cr_assert_eq(cca_upstream_host_create_with(&o, &u), CCA_OK, "%s", cca_last_error());
    a = tu_allocator(u, conf);
    pthread_t th[THREADS];
    worker w[THREADS] = {{0}};
    for (int i = 0; i < THREADS; i++) {
        w[i].a = a;
        w[i].id = i;
        cr_assert_eq(pthread_create(&th[i], NULL, work, &w[i]), 0);
    }
    uint64_t allocs = 0, frees = 0, ooms = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        cr_assert_null(w[i].error, "thread %d: %s (%s)", i, w[i].error, cca_last_error());
        allocs += w[i].allocs, frees += w[i].frees, ooms += w[i].ooms;
    }
    tu_check(a);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.alloc_calls, allocs);
    cr_assert_eq(s.free_calls, frees);
    cr_assert_eq(allocs, frees);
    cr_assert_eq(s.ooms, ooms);
    cr_assert_eq(s.requested_bytes, 0);
    cr_assert_eq(s.active_blocks, s.pending_blocks, "only pending frees may remain");
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    s = tu_stats(a);
    cr_assert_eq(s.active_blocks, 0);
    cr_assert_eq(s.allocated_bytes, 0);
    cr_assert_eq(s.reserved_bytes, 0);
    cr_assert_eq(s.segments, 0);
    cca_upstream_stats us = tu_upstream_stats(u); /* the device agrees: it holds nothing */
    cr_assert_eq(us.bytes_in_use, 0);
    cr_assert_eq(us.allocations, 0);
    cr_assert_eq(us.vm_reserved_bytes, 0);
    if (us.vm_map_calls == 0) /* classic segments: one free per reserve (an unmap may cover several maps) */
        cr_assert_eq(s.upstream_allocs, s.upstream_frees);
    cr_assert_gt(s.allocated_bytes_peak, 0);
    tu_teardown(a, u);
}

Test(threads, growth_stress_then_exact_stats) {
    stress(NULL, 0);
}

Test(threads, greedy_stress_then_exact_stats) {
    stress("policy:greedy,greedy_bytes:256M", 0);
}

/* classic segments; the defaults (expandable) above and below */
Test(threads, growth_stress_on_a_slow_device_then_exact_stats, .timeout = 120) {
    stress("expandable:0", 200 * 1000);
}

Test(threads, expandable_stress_on_a_slow_device_then_exact_stats, .timeout = 120) {
    stress("expandable:1", 200 * 1000);
}
