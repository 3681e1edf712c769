/*
 * tsan_stress.c — allocator/src/support/lock.c: the allocator under ThreadSanitizer.
 *
 * Criterion's runner cannot start under TSan (its shared arena mapping), so
 * this is a plain program, built and run only in the TSan configuration
 * (scripts/test.sh, cmake -DCCA_TSAN=ON). Four threads share one allocator
 * and mix alloc/free on 16 streams (NULL, all-ones and handles whose hashes
 * share a probe chain in the free index's table of streams, which their
 * segments join and leave as trims release them), record_stream,
 * get_stats and trim,
 * with CCALLOC_TRACE recording to a file, so every lock (allocator, upstream,
 * trace, log) is exercised. Where the policy allows domains, the blocks of a
 * thread go to three domains: the default one, one shared by all threads,
 * and the thread's own, which it reserves a footprint arena in, releases
 * (after freeing its blocks there) every 2500 steps, reads the stats of, and
 * destroys at the end, while the others keep allocating. TSan reports races; the program checks that the
 * end state is exact: nothing live, nothing reserved, invariants intact, and
 * the upstream holding nothing.
 * The runs reach the 1 GiB device's edge (reserved peaks at all of it, the
 * retry runs hundreds of times): a refusal there is an outcome, not a
 * failure, when the free bytes all share a page or map with live blocks
 * (over whole maps a live block holds its map, up to 20 MiB mapped ahead,
 * in each of up to 192 (domain, stream, pool) segments). So a refused
 * request leaves its slot empty and is counted; the run fails when the
 * count is not cca_stats.ooms or passes one per REFUSED_PER_REQUEST_MAX
 * requests (a broken retry refuses thousands). Three runs: classic segments, expandable
 * ones (trim unmapping pages under the other threads), and the greedy arena
 * as an expandable segment. Exit status 0 = clean.
 */
#include <ccalloc.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "ccai_rng.h"

#define THREADS 4
#define STEPS 20000
#define SLOTS 64

static cca_allocator *shared;
static atomic_uint refused;          /* requests refused with CCA_ERR_OUT_OF_MEMORY in this run */
#define REFUSED_PER_REQUEST_MAX 1000 /* at most one refusal per 1000 requests */

/* Stream i of 16: NULL, all-ones, then handles whose Fibonacci hashes
 * (free_index.c) share their top 16 bits. */
#define NSTREAMS 16
static cca_stream stream_at(unsigned i) {
    if (i < 2)
        return i == 0 ? NULL : (cca_stream)UINTPTR_MAX;
    uint64_t phi = 0x9e3779b97f4a7c15ull, inv = phi; /* its inverse mod 2^64 */
    for (int n = 0; n < 6; n++)
        inv *= 2 - phi * inv;
    return (cca_stream)(uintptr_t)((0x5a5aull << 48 | (uint64_t)i << 12) * inv);
}
static cca_domain *common; /* shared by every thread; NULL: no domains (greedy) */

static void *worker(void *arg) {
    ccai_rng rng;
    ccai_rng_seed(&rng, (uint64_t)(size_t)arg);
    void *slot[SLOTS] = {0};
    cca_domain *own = NULL;
    if (common) {
        char name[32];
        snprintf(name, sizeof name, "thread %zu", (size_t)arg);
        if (cca_domain_create(shared, name, &own) != CCA_OK || cca_domain_reserve(shared, own, 8u << 20) != CCA_OK)
            return (void *)1;
    }
    /* slot k's domain: k % 3 = 0 the default, 1 the thread's own, 2 the common one */
    cca_domain *dom[3] = {NULL, own, common};
    for (int i = 0; i < STEPS; i++) {
        int k = (int)ccai_rng_below(&rng, SLOTS);
        if (slot[k]) {
            if (cca_free(shared, slot[k]) != CCA_OK)
                return (void *)1;
            slot[k] = NULL;
        } else {
            size_t size = (size_t)ccai_rng_below(&rng, 3 << 20) + 1;
            cca_stream stream = stream_at((unsigned)ccai_rng_below(&rng, NSTREAMS));
            cca_status st = cca_alloc_in(shared, dom[k % 3], size, stream, &slot[k]);
            if (st == CCA_ERR_OUT_OF_MEMORY && slot[k] == NULL) { /* at the device's edge: counted, bounded in run */
                atomic_fetch_add(&refused, 1);
                continue;
            }
            if (st != CCA_OK)
                return (void *)1;
            if (i % 97 == 0 && cca_record_stream(shared, slot[k], (cca_stream)9) != CCA_OK)
                return (void *)1;
        }
        if (i % 1000 == 0) {
            cca_stats s;
            cca_get_stats(shared, &s);
            if (cca_trim(shared, 64u << 20, NULL) != CCA_OK)
                return (void *)1;
        }
        if (own && i % 2500 == 2499) { /* the thread's own model unloaded: all of its memory back */
            for (int j = 1; j < SLOTS; j += 3)
                if (slot[j] && cca_free(shared, slot[j]) != CCA_OK)
                    return (void *)1;
            for (int j = 1; j < SLOTS; j += 3)
                slot[j] = NULL;
            cca_domain_report rep = {0}; /* on entry its leaks and leaks_cap are read */
            cca_domain_stats ds;
            if (cca_domain_release(shared, own, 0, &rep) != CCA_OK || cca_get_domain_stats(shared, own, &ds) != CCA_OK ||
                ds.reserved_bytes != 0 || cca_get_domain_stats(shared, common, &ds) != CCA_OK)
                return (void *)1;
        }
    }
    for (int k = 0; k < SLOTS; k++)
        if (slot[k] && cca_free(shared, slot[k]) != CCA_OK)
            return (void *)1;
    if (own && cca_domain_destroy(shared, own, 0, NULL) != CCA_OK)
        return (void *)1;
    return NULL;
}

/* One run over a fresh device and allocator; conf NULL = the defaults. */
static int run(const char *conf) {
    cca_upstream *device;
    cca_config cfg;
    cca_config_default(&cfg);
    if (cca_config_parse(&cfg, conf) != CCA_OK || cca_upstream_host_create((size_t)1 << 30, &device) != CCA_OK ||
        cca_create(&cfg, device, &shared) != CCA_OK) {
        fprintf(stderr, "tsan_stress: setup failed: %s\n", cca_last_error());
        return 1;
    }
    common = NULL;
    if (cfg.policy != CCA_POLICY_GREEDY && cca_domain_create(shared, "common", &common) != CCA_OK) {
        fprintf(stderr, "tsan_stress: domain: %s\n", cca_last_error());
        return 1;
    }
    atomic_store(&refused, 0);
    pthread_t threads[THREADS];
    for (size_t i = 0; i < THREADS; i++)
        pthread_create(&threads[i], NULL, worker, (void *)(i + 1));
    int failed = 0;
    for (int i = 0; i < THREADS; i++) {
        void *result;
        pthread_join(threads[i], &result);
        failed |= result != NULL;
    }
    if (common)
        failed |= cca_domain_destroy(shared, common, 0, NULL) != CCA_OK;
    cca_release_report r;
    failed |= cca_empty_cache(shared, &r) != CCA_OK;
    cca_stats s;
    cca_get_stats(shared, &s);
    failed |= s.active_blocks != 0 || s.reserved_bytes != 0 || s.allocated_bytes != 0;
    failed |= cca_check_invariants(shared) != CCA_OK;
    unsigned no = atomic_load(&refused); /* a retry that released nothing would refuse thousands */
    failed |= s.ooms != no || (uint64_t)no * REFUSED_PER_REQUEST_MAX > s.alloc_calls + no;
    failed |= cca_destroy(shared) != CCA_OK;
    cca_upstream_stats us;
    cca_upstream_get_stats(device, &us);
    failed |= us.bytes_in_use != 0 || us.allocations != 0 || us.vm_reserved_bytes != 0 || us.vm_mapped_bytes != 0;
    cca_upstream_destroy(device);
    printf("tsan_stress [%s]: %d threads x %d steps: %s (%llu allocs, %u refused, %llu upstream allocs)\n",
           conf ? conf : "defaults", THREADS, STEPS, failed ? "FAILED" : "clean end state",
           (unsigned long long)s.alloc_calls, no, (unsigned long long)s.upstream_allocs);
    return failed;
}

int main(void) {
    return run("expandable:0") | run("expandable:1") | run("policy:greedy,greedy_bytes:960M,expandable:1");
}
