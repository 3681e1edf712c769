/*
 * ccr_threads.c — the engine (runtime/src) from several threads at once, under
 * ThreadSanitizer (and checked exactly in every build). ccr.h: an engine and
 * its models are used from one thread at a time; engines of different
 * threads may share a device.
 *
 *   - four threads, each with an engine of its own, on ONE borrowed
 *     simulated device (tenants, as processes on one GPU), then on a device
 *     each: every thread loads its own spec model, runs it, puts it to
 *     sleep, wakes it, runs it again, unloads it, releases its engine, round
 *     after round, and every output is the same bytes as a one-thread run's;
 *   - each round also fails a load of its own (a spec naming the thread and
 *     round): the thread's message names that spec, whatever the others did
 *     meanwhile (the message is per thread);
 *   - at the end every engine is destroyed and every device holds nothing:
 *     no byte, no map, no host copy (cca_upstream_get_stats).
 * The models are small and the device large: no step may fail for memory.
 * Exit status 0 = every check held.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccr.h"

#define THREAD_CHECK_NAME "ccr_threads"
#include "../../allocator/threads/thread_check.h"

#define THREADS 4
#define ROUNDS 12
#define BATCH 3
#define MIB ((size_t)1 << 20)

/* Each thread's model: its own widths, so outputs tell the models apart. */
static void spec_of(int t, char *buf, size_t len) {
    snprintf(buf, len, "mlp:%dx%dx%dx10:relu:softmax:seed=%d", 16 + 8 * t, 64 + 32 * t, 48 + 16 * t, t + 1);
}

static float ref[THREADS][BATCH * 10];
static atomic_int runs_same; /* runs whose outputs were the reference's */

static void input(size_t n, float *x) {
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((i * 7919) % 1009) / 1009.0f - 0.5f;
}

static ccr_engine *engine_on(cca_upstream *up) {
    ccr_engine_options o;
    ccr_engine_options_default(&o);
    o.upstream = up;
    o.alloc_conf = "log_oom:0";
    ccr_engine *e = NULL;
    ccr_status st = ccr_engine_create(&o, &e);
    CHECK(st == CCR_OK, "engine: %s", ccr_last_error());
    return st == CCR_OK ? e : NULL;
}

/* One run of t's model into y; the status. */
static ccr_status run(ccr_model *m, int t, float *y) {
    float x[BATCH * 64];
    input(BATCH * (size_t)(16 + 8 * t), x);
    return ccr_model_run(m, x, BATCH, y);
}

typedef struct worker {
    int t;
    cca_upstream *up;
} worker;

static void *work(void *arg) {
    const worker *w = arg;
    int t = w->t;
    char spec[128], bad[128];
    spec_of(t, spec, sizeof spec);
    ccr_engine *e = engine_on(w->up);
    if (!e)
        return NULL;
    for (int r = 0; r < ROUNDS; r++) {
        ccr_model *m = NULL;
        ccr_status st = ccr_model_load_spec(e, spec, &m);
        CHECK(st == CCR_OK, "thread %d round %d: load: %s", t, r, ccr_last_error());
        if (st != CCR_OK)
            break;
        float y[BATCH * 10];
        st = run(m, t, y);
        CHECK(st == CCR_OK && !memcmp(y, ref[t], sizeof y), "thread %d round %d: run: %s", t, r, ccr_last_error());
        atomic_fetch_add(&runs_same, st == CCR_OK && !memcmp(y, ref[t], sizeof y));
        st = ccr_model_sleep(m, NULL);
        CHECK(st == CCR_OK && ccr_model_asleep(m), "thread %d round %d: sleep: %s", t, r, ccr_last_error());
        /* a failure of this thread's own: its message, whatever the others do */
        snprintf(bad, sizeof bad, "mlp:%dx0:thread%d_round%d", t + 1, t, r);
        ccr_model *none = (ccr_model *)1;
        CHECK(ccr_model_load_spec(e, bad, &none) == CCR_ERR_SPEC && none == NULL, "thread %d round %d: bad spec", t, r);
        CHECK(strstr(ccr_last_error(), bad) != NULL, "thread %d round %d: the message is not this thread's: %s", t, r,
              ccr_last_error());
        st = ccr_model_wake(m, NULL);
        CHECK(st == CCR_OK && !ccr_model_asleep(m), "thread %d round %d: wake: %s", t, r, ccr_last_error());
        memset(y, 0, sizeof y);
        st = run(m, t, y);
        CHECK(st == CCR_OK && !memcmp(y, ref[t], sizeof y), "thread %d round %d: run after the wake: %s", t, r,
              ccr_last_error());
        atomic_fetch_add(&runs_same, st == CCR_OK && !memcmp(y, ref[t], sizeof y));
        ccr_unload_info u;
        st = ccr_model_release(m, &u);
        CHECK(st == CCR_OK && u.bytes_released == u.reserved_at_unload, "thread %d round %d: unload: %s", t, r,
              ccr_last_error());
        if (r % 3 == 2) {
            ccr_release_info ri;
            st = ccr_engine_release(e, &ri);
            CHECK(st == CCR_OK && ri.live_bytes_after == 0, "thread %d round %d: release: %s", t, r, ccr_last_error());
        }
    }
    ccr_engine_destroy(e);
    return NULL;
}

static void expect_empty(cca_upstream *up, const char *what) {
    cca_upstream_stats s;
    CHECK(cca_upstream_get_stats(up, &s) == CCA_OK, "%s: stats", what);
    CHECK(s.bytes_in_use == 0 && s.vm_mapped_bytes == 0 && s.vm_reserved_bytes == 0 && s.host_bytes_in_use == 0,
          "%s: the device holds %zu bytes, %zu mapped, %zu reserved, %zu host bytes", what, s.bytes_in_use,
          s.vm_mapped_bytes, s.vm_reserved_bytes, s.host_bytes_in_use);
}

static cca_upstream *device(void) {
    cca_upstream *up = NULL;
    ccr_status st = ccr_device_open(CCR_DEVICE_HOST, 0, 256 * MIB, &up, NULL);
    CHECK(st == CCR_OK, "device: %s", ccr_last_error());
    return up;
}

int main(void) {
    /* the reference outputs, one thread */
    cca_upstream *up = device();
    if (!up)
        return 1;
    ccr_engine *e = engine_on(up);
    for (int t = 0; e && t < THREADS; t++) {
        char spec[128];
        spec_of(t, spec, sizeof spec);
        ccr_model *m = NULL;
        CHECK(ccr_model_load_spec(e, spec, &m) == CCR_OK, "reference %d: %s", t, ccr_last_error());
        if (m)
            CHECK(run(m, t, ref[t]) == CCR_OK, "reference %d: %s", t, ccr_last_error());
        ccr_model_unload(m);
    }
    ccr_engine_destroy(e);

    /* one shared device, then one device per thread */
    for (int shared = 1; shared >= 0; shared--) {
        cca_upstream *own[THREADS];
        pthread_t th[THREADS];
        worker w[THREADS];
        for (int t = 0; t < THREADS; t++) {
            own[t] = shared ? up : device();
            w[t] = (worker){t, own[t]};
            CHECK(pthread_create(&th[t], NULL, work, &w[t]) == 0, "pthread_create");
        }
        for (int t = 0; t < THREADS; t++)
            pthread_join(th[t], NULL);
        for (int t = 0; t < THREADS; t++) {
            expect_empty(own[t], shared ? "the shared device" : "a thread's device");
            if (!shared)
                cca_upstream_destroy(own[t]);
        }
    }
    cca_upstream_destroy(up);
    CHECK(atomic_load(&runs_same) == 2 * 2 * THREADS * ROUNDS, "%d runs gave the reference's bytes, not %d",
          atomic_load(&runs_same), 2 * 2 * THREADS * ROUNDS);
    printf("ccr_threads: %d runs on %d threads, every one the reference's bytes\n", atomic_load(&runs_same), THREADS);
    if (atomic_load(&failures))
        fprintf(stderr, "ccr_threads: %d check(s) failed\n", atomic_load(&failures));
    return atomic_load(&failures) != 0;
}
