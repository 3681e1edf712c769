/*
 * threads_plug.c — allocator/src/plug.c: the framework entry points from
 * eight threads while their calls fail, checked exactly.
 *
 * A plain program (no Criterion: its runner cannot start under TSan), built
 * in every configuration as threads_faults.c is; the TSan stage runs it too.
 * Exit status 0 = every check held.
 *
 * - The devices: cca_plug_configure("host:24M:2", conf), two simulated
 *   devices of 24 MiB each (the plug makes its own upstreams: no fault
 *   wrapper goes under them; the host malloc wrapper cannot run under
 *   TSan). What fails: a device's memory (requests up to 14 MiB on it:
 *   the OOM and its retry), device 2 (past the devices: its creation
 *   fails, sticky), devices -1 and 64 (out of range), a thread's current
 *   domain destroyed while set, frees on the wrong device, a configure
 *   after the devices were made, a reset with live blocks.
 * - The threads race the devices' creation (no call before theirs), then
 *   each, with its seeded generator, mixes cca_plug_alloc (size 0 too),
 *   cca_plug_free (a quarter first on the other device, or on device 2 or
 *   -1: ignored), cca_plug_set_domain (its own domain on that device, the
 *   default, a destroyed domain, the other device's domain),
 *   cca_plug_get_domain, cca_domain_destroy of its own domain (FORCE half
 *   the time: its blocks go with it; the domain may stay set),
 *   cca_plug_get_allocator / cca_plug_get_upstream, cca_plug_configure,
 *   cca_trim, cca_empty_cache and cca_check_invariants on a device's
 *   allocator.
 * - Each answer as ccalloc.h says: cca_plug_alloc NULL only for an OOM (the
 *   allocator's message, its OOM counted), a destroyed current domain ("not one of this
 *   allocator's"), size 0 (no message), a device out of range or failed
 *   (device 2: the same message every time, on every thread); a success
 *   and size 0 leave the thread's message; every refusal sets one of its
 *   own; a set_domain refused leaves *previous and the current domain; the
 *   current domain per thread and device as set (the other threads' sets
 *   change nothing); every thread sees the same allocator and upstream per
 *   device; a configure after the creation CCA_ERR_INVALID_ARGUMENT. A
 *   block's first and last bytes, written at its alloc, read at its free.
 * - Every ROUND steps all threads meet and one checks, the others
 *   stopped: each device's stats exact (active blocks, requested bytes,
 *   alloc_calls, free_calls, ooms = the threads' counts), each own
 *   domain's requested bytes, cca_check_invariants OK, the device's bytes
 *   in use = the allocator's reserved; the log lines = one per refusal
 *   that logs (an OOM, a device out of range, a destroyed domain's alloc,
 *   an ignored free) plus one for device 2's creation; cca_plug_reset
 *   refused (CCA_ERR_LIVE_BLOCKS naming the first device with blocks),
 *   the allocators kept.
 * - At the end every block freed, each thread's own domain on device 0
 *   set; one thread empties the caches (the devices hold nothing) and
 *   calls cca_plug_reset: CCA_OK; every thread's current domains are the
 *   default again; then a configure is taken (nothing made since the
 *   reset), device 2 exists under "host:24M:3", and a last reset.
 *
 * `threads_plug [--seed N]`: the runs' seeds start from N (default SEED).
 */
#include <ccalloc.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccai_rng.h"

#define THREADS 8
#define STEPS 4000
#define ROUND 500
#define SLOTS 16
#define DEVICES 2 /* the good ones: 0 and 1; 2 fails */
#define MIB ((size_t)1 << 20)
#define SEED 5

#define THREAD_CHECK_NAME "threads_plug"
#include "thread_check.h"

typedef struct pslot {
    unsigned char *p;
    size_t size;
    int dev;
    cca_domain *dom; /* the domain it went to (NULL: default) */
} pslot;

typedef struct pworker {
    int id;
    ccai_rng rng;
    pslot s[SLOTS];
    cca_domain *own[DEVICES];  /* its live domain on each device (NULL: none) */
    cca_domain *cur[DEVICES];  /* its current domain as set */
    cca_domain *dead[DEVICES]; /* a domain of its, destroyed (NULL: none yet) */
    bool tried;                /* it called on device 2 */
    uint64_t allocs[DEVICES], frees[DEVICES], ooms[DEVICES], lines, dead_allocs;
} pworker;

static struct {
    const char *name, *conf;
    uint64_t seed;
    pthread_barrier_t meet;
    _Atomic(cca_allocator *) a[DEVICES];
    _Atomic(cca_upstream *) u[DEVICES];
    pthread_mutex_t lock; /* over failed_msg */
    char failed_msg[512]; /* device 2's message, as the first thread saw it */
    pworker w[THREADS];
} run = {.lock = PTHREAD_MUTEX_INITIALIZER};

static atomic_ulong lines; /* the log lines */

static void sink_line(void *user, const char *line) {
    (void)user, (void)line;
    atomic_fetch_add(&lines, 1);
}

static void tag(pworker *w, int step, char *buf, size_t len) {
    snprintf(buf, len, "tag: thread %d step %d", w->id, step);
    cca_set_error(CCA_OK, "%s", buf);
}

/* The message holds `want` (NULL: is still the tag); then the tag again. */
static void said(pworker *w, const char *tagged, const char *want, const char *what) {
    const char *msg = cca_last_error();
    if (want)
        CHECK(strstr(msg, want) && !strstr(msg, "tag: "), "%s: thread %d: %s: '%s', not '%s'", run.name, w->id, what,
              msg, want);
    else
        CHECK(strcmp(msg, tagged) == 0, "%s: thread %d: %s left the message '%s'", run.name, w->id, what, msg);
    cca_set_error(CCA_OK, "%s", tagged);
}

static size_t draw_size(ccai_rng *r) {
    uint64_t k = ccai_rng_below(r, 100);
    if (k < 70)
        return 2 + (size_t)ccai_rng_below(r, 256 * 1024);
    if (k < 95)
        return MIB + (size_t)ccai_rng_below(r, 3 * MIB);
    return 6 * MIB + (size_t)ccai_rng_below(r, 8 * MIB);
}

static cca_allocator *dev_allocator(int dev) {
    return atomic_load(&run.a[dev]);
}

/* The device's allocator and upstream: the same on every thread. */
static void see_device(pworker *w, int dev, const char *tagged) {
    cca_allocator *a = NULL;
    cca_upstream *u = NULL;
    cca_status st = cca_plug_get_allocator(dev, &a);
    CHECK(st == CCA_OK && a, "%s: thread %d: cca_plug_get_allocator(%d): %s", run.name, w->id, dev, cca_last_error());
    st = cca_plug_get_upstream(dev, &u);
    CHECK(st == CCA_OK && u, "%s: thread %d: cca_plug_get_upstream(%d): %s", run.name, w->id, dev, cca_last_error());
    cca_allocator *none = NULL;
    cca_upstream *no = NULL;
    if (!atomic_compare_exchange_strong(&run.a[dev], &none, a))
        CHECK(none == a, "%s: thread %d: device %d: allocator %p, another thread got %p", run.name, w->id, dev,
              (void *)a, (void *)none);
    if (!atomic_compare_exchange_strong(&run.u[dev], &no, u))
        CHECK(no == u, "%s: thread %d: device %d: upstream %p, another thread got %p", run.name, w->id, dev, (void *)u,
              (void *)no);
    said(w, tagged, NULL, "cca_plug_get_allocator");
}

/* Device 2: its creation failed; the same status and message every time. */
static void failed_device(pworker *w, const char *tagged) {
    w->tried = true;
    void *p = cca_plug_alloc(64, DEVICES, NULL);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", cca_last_error());
    CHECK(!p && strstr(msg, "not in [0, 2)"), "%s: thread %d: device 2: %p '%s'", run.name, w->id, p, msg);
    pthread_mutex_lock(&run.lock);
    if (!run.failed_msg[0])
        snprintf(run.failed_msg, sizeof run.failed_msg, "%s", msg);
    CHECK(strcmp(run.failed_msg, msg) == 0, "%s: thread %d: device 2 says '%s', before '%s'", run.name, w->id, msg,
          run.failed_msg);
    pthread_mutex_unlock(&run.lock);
    cca_allocator *a = (cca_allocator *)1;
    CHECK(cca_plug_get_allocator(DEVICES, &a) == CCA_ERR_INVALID_ARGUMENT && !a,
          "%s: thread %d: cca_plug_get_allocator(2): %p", run.name, w->id, (void *)a);
    cca_set_error(CCA_OK, "%s", tagged);
}

static void plug_alloc(pworker *w, pslot *s, int k, const char *tagged) {
    int dev = (int)ccai_rng_below(&w->rng, DEVICES);
    size_t size = draw_size(&w->rng);
    bool dead = w->cur[dev] && w->cur[dev] != w->own[dev]; /* destroyed since set */
    unsigned char *p = cca_plug_alloc(size, dev, (void *)(uintptr_t)ccai_rng_below(&w->rng, 3));
    if (dead) {
        CHECK(!p, "%s: thread %d: an alloc in a destroyed domain gave %p", run.name, w->id, (void *)p);
        said(w, tagged, "not one of this allocator's", "cca_plug_alloc in a destroyed domain");
        w->lines++, w->dead_allocs++;
        if (p)
            cca_plug_free(p, size, dev, NULL);
        return;
    }
    if (!p) {
        said(w, tagged, "cca_alloc", "cca_plug_alloc"); /* an OOM: counted at the audit */
        w->ooms[dev]++, w->lines++;
        return;
    }
    said(w, tagged, NULL, "cca_plug_alloc");
    w->allocs[dev]++;
    *s = (pslot){.p = p, .size = size, .dev = dev, .dom = w->cur[dev]};
    p[0] = (unsigned char)w->id, p[size - 1] = (unsigned char)k;
}

/* A quarter of the time a free that is ignored first: on the other device
 * (not its block), on device 2 (no allocator), on device -1. */
static void plug_free(pworker *w, pslot *s, int k, const char *tagged) {
    CHECK(s->p[0] == (unsigned char)w->id && s->p[s->size - 1] == (unsigned char)k,
          "%s: thread %d: block %p of %zu bytes lost its bytes", run.name, w->id, (void *)s->p, s->size);
    if (ccai_rng_below(&w->rng, 4) == 0) {
        int bad = (int)ccai_rng_below(&w->rng, 3);
        int dev = bad == 0 ? 1 - s->dev : bad == 1 ? DEVICES : -1;
        cca_plug_free(s->p, s->size, dev, NULL);
        said(w, tagged,
             bad == 0   ? "cca_plug_free on device"
             : bad == 1 ? "has no allocator, so not ours; ignored"
                        : "not in [0, 64); ignored",
             "cca_plug_free on a wrong device");
        w->lines++;
    }
    cca_plug_free(s->p, s->size, s->dev, NULL);
    said(w, tagged, NULL, "cca_plug_free");
    w->frees[s->dev]++;
    s->p = NULL;
}

/* Set the current domain of a device: its own (made if none), the
 * default, a destroyed one or the other device's (refused: nothing
 * changes, *previous not written). */
static void set_domain(pworker *w, const char *tagged) {
    int dev = (int)ccai_rng_below(&w->rng, DEVICES), how = (int)ccai_rng_below(&w->rng, 4);
    cca_domain *d = NULL, *prev = (cca_domain *)&prev, *got = NULL;
    if (how == 0 && !w->own[dev]) {
        char name[32];
        snprintf(name, sizeof name, "t%d on %d", w->id, dev);
        CHECK(cca_domain_create(dev_allocator(dev), name, &w->own[dev]) == CCA_OK, "%s: thread %d: domain: %s",
              run.name, w->id, cca_last_error());
        said(w, tagged, NULL, "cca_domain_create");
    }
    d = how == 0 ? w->own[dev] : how == 1 ? NULL : how == 2 ? w->dead[dev] : w->own[1 - dev];
    bool refused = how >= 2 && d;
    cca_status st = cca_plug_set_domain(dev, d, &prev);
    if (refused) {
        CHECK(st == CCA_ERR_INVALID_ARGUMENT && prev == (cca_domain *)&prev,
              "%s: thread %d: set_domain(%d, %s domain): %s, previous %s", run.name, w->id, dev,
              how == 2 ? "a destroyed" : "the other device's", cca_status_string(st),
              prev == (cca_domain *)&prev ? "kept" : "written");
        said(w, tagged, "not one of this allocator's", "cca_plug_set_domain refused");
    } else {
        CHECK(st == CCA_OK && prev == w->cur[dev], "%s: thread %d: set_domain(%d): %s, previous %p, not %p", run.name,
              w->id, dev, cca_status_string(st), (void *)prev, (void *)w->cur[dev]);
        said(w, tagged, NULL, "cca_plug_set_domain");
        w->cur[dev] = d;
    }
    for (int e = 0; e < DEVICES; e++) {
        CHECK(cca_plug_get_domain(e, &got) == CCA_OK && got == w->cur[e],
              "%s: thread %d: device %d: current domain %p, set %p", run.name, w->id, e, (void *)got,
              (void *)w->cur[e]);
    }
    got = (cca_domain *)&got;
    CHECK(cca_plug_get_domain(-1, &got) == CCA_ERR_INVALID_ARGUMENT && !got, "%s: thread %d: get_domain(-1)", run.name,
          w->id);
    cca_set_error(CCA_OK, "%s", tagged);
}

/* Destroy its own domain on a device: its blocks freed first, or (FORCE)
 * gone with it; a current domain destroyed stays set. */
static void destroy_domain(pworker *w, const char *tagged) {
    int dev = (int)ccai_rng_below(&w->rng, DEVICES);
    cca_domain *d = w->own[dev];
    if (!d)
        return;
    bool force = ccai_rng_below(&w->rng, 2);
    for (int k = 0; k < SLOTS; k++)
        if (w->s[k].p && w->s[k].dom == d && w->s[k].dev == dev) {
            if (force)
                w->s[k].p = NULL; /* released with the domain */
            else
                plug_free(w, &w->s[k], k, tagged);
        }
    cca_domain_report rep = {0};
    cca_status st = cca_domain_destroy(dev_allocator(dev), d, force ? CCA_DOMAIN_FORCE : 0, &rep);
    CHECK(st == CCA_OK, "%s: thread %d: cca_domain_destroy: %s", run.name, w->id, cca_last_error());
    said(w, tagged, NULL, "cca_domain_destroy");
    w->dead[dev] = d, w->own[dev] = NULL;
}

static void step(pworker *w, int i) {
    uint64_t op = ccai_rng_below(&w->rng, 100);
    int k = (int)ccai_rng_below(&w->rng, SLOTS), dev = (int)ccai_rng_below(&w->rng, DEVICES);
    pslot *s = &w->s[k];
    char tagged[64];
    tag(w, i, tagged, sizeof tagged);
    if (op < 45 && s->p) {
        plug_free(w, s, k, tagged);
    } else if (op < 45) {
        plug_alloc(w, s, k, tagged);
    } else if (op < 48) {
        CHECK(!cca_plug_alloc(0, dev, NULL), "%s: thread %d: size 0 gave a block", run.name, w->id);
        said(w, tagged, NULL, "cca_plug_alloc of 0 bytes");
    } else if (op < 51) {
        int bad = ccai_rng_below(&w->rng, 2) ? -1 : CCA_PLUG_MAX_DEVICES;
        CHECK(!cca_plug_alloc(64, bad, NULL), "%s: thread %d: device %d gave a block", run.name, w->id, bad);
        said(w, tagged, "not in [0, 64)", "cca_plug_alloc out of range");
        w->lines++;
    } else if (op < 54) {
        failed_device(w, tagged);
    } else if (op < 64) {
        set_domain(w, tagged);
    } else if (op < 68) {
        destroy_domain(w, tagged);
    } else if (op < 71) {
        see_device(w, dev, tagged);
    } else if (op < 73) {
        CHECK(cca_plug_configure("host:24M:3", NULL) == CCA_ERR_INVALID_ARGUMENT,
              "%s: thread %d: configure after the devices were made: '%s'", run.name, w->id, cca_last_error());
        cca_set_error(CCA_OK, "%s", tagged);
    } else if (op < 76) {
        CHECK(cca_trim(dev_allocator(dev), (size_t)ccai_rng_below(&w->rng, 16 * MIB), NULL) == CCA_OK,
              "%s: thread %d: trim: %s", run.name, w->id, cca_last_error());
        said(w, tagged, NULL, "cca_trim");
    } else if (op < 78) {
        CHECK(cca_empty_cache(dev_allocator(dev), NULL) == CCA_OK, "%s: thread %d: empty cache: %s", run.name, w->id,
              cca_last_error());
        said(w, tagged, NULL, "cca_empty_cache");
    } else if (op < 80) {
        CHECK(cca_check_invariants(dev_allocator(dev)) == CCA_OK, "%s: thread %d: %s", run.name, w->id,
              cca_last_error());
    } else if (!s->p) {
        plug_alloc(w, s, k, tagged);
    }
}

/* ---- the audit, every thread stopped --------------------------------------------------------- */

static void audit(int round) {
    int first = -1; /* the first device with live blocks */
    uint64_t want_lines = 0;
    for (int t = 0; t < THREADS; t++)
        want_lines += run.w[t].lines;
    for (int t = 0; t < THREADS; t++)
        if (run.w[t].tried) { /* device 2's creation: once */
            want_lines++;
            break;
        }
    for (int dev = 0; dev < DEVICES; dev++) {
        cca_allocator *a = dev_allocator(dev);
        size_t live = 0, req = 0;
        uint64_t allocs = 0, frees = 0, ooms = 0;
        for (int t = 0; t < THREADS; t++) {
            pworker *w = &run.w[t];
            allocs += w->allocs[dev], frees += w->frees[dev], ooms += w->ooms[dev];
            size_t own_req = 0;
            for (int k = 0; k < SLOTS; k++)
                if (w->s[k].p && w->s[k].dev == dev) {
                    live++, req += w->s[k].size;
                    own_req += w->s[k].dom && w->s[k].dom == w->own[dev] ? w->s[k].size : 0;
                }
            if (w->own[dev]) {
                cca_domain_stats ds;
                CHECK(cca_get_domain_stats(a, w->own[dev], &ds) == CCA_OK && ds.requested_bytes == own_req,
                      "%s: round %d: thread %d's domain on device %d holds %zu requested, not %zu", run.name, round, t,
                      dev, ds.requested_bytes, own_req);
            }
        }
        first = first < 0 && live ? dev : first;
        CHECK(cca_trim(a, SIZE_MAX, NULL) == CCA_OK, "%s: round %d: trim: %s", run.name, round, cca_last_error());
        cca_stats st;
        cca_get_stats(a, &st);
        CHECK(st.active_blocks == live && st.requested_bytes == req && st.alloc_calls == allocs &&
                  st.free_calls == frees && st.ooms == ooms,
              "%s: round %d: device %d: %zu blocks, %zu requested, %" PRIu64 " allocs, %" PRIu64 " frees, %" PRIu64
              " ooms; the threads %zu, %zu, %" PRIu64 ", %" PRIu64 ", %" PRIu64,
              run.name, round, dev, st.active_blocks, st.requested_bytes, st.alloc_calls, st.free_calls, st.ooms, live,
              req, allocs, frees, ooms);
        CHECK(cca_check_invariants(a) == CCA_OK, "%s: round %d: %s", run.name, round, cca_last_error());
        cca_upstream_stats us;
        cca_upstream_get_stats(atomic_load(&run.u[dev]), &us);
        CHECK(us.bytes_in_use == st.reserved_bytes, "%s: round %d: device %d holds %zu bytes, the allocator %zu",
              run.name, round, dev, us.bytes_in_use, st.reserved_bytes);
    }
    CHECK(atomic_load(&lines) == want_lines, "%s: round %d: %lu log lines, %" PRIu64 " expected", run.name, round,
          atomic_load(&lines), want_lines);
    if (first < 0)
        return;
    char want[64];
    snprintf(want, sizeof want, "device %d has", first);
    CHECK(cca_plug_reset() == CCA_ERR_LIVE_BLOCKS && strstr(cca_last_error(), want),
          "%s: round %d: a reset with live blocks: '%s'", run.name, round, cca_last_error());
    for (int dev = 0; dev < DEVICES; dev++) {
        cca_allocator *a = NULL;
        CHECK(cca_plug_get_allocator(dev, &a) == CCA_OK && a == dev_allocator(dev),
              "%s: round %d: device %d's allocator changed by a refused reset", run.name, round, dev);
    }
}

/* Every thread stopped, its blocks freed: the devices hold nothing once
 * the caches are emptied, and the reset is taken. */
static void finish_audit(void) {
    for (int dev = 0; dev < DEVICES; dev++) {
        cca_allocator *a = dev_allocator(dev);
        CHECK(cca_empty_cache(a, NULL) == CCA_OK, "%s: empty cache: %s", run.name, cca_last_error());
        cca_stats st;
        cca_get_stats(a, &st);
        cca_upstream_stats us;
        cca_upstream_get_stats(atomic_load(&run.u[dev]), &us);
        CHECK(st.active_blocks == 0 && st.reserved_bytes == 0 && us.bytes_in_use == 0 && us.allocations == 0,
              "%s: at the end device %d: %zu blocks, %zu reserved; the device %zu bytes", run.name, dev,
              st.active_blocks, st.reserved_bytes, us.bytes_in_use);
        CHECK(cca_check_invariants(a) == CCA_OK, "%s: %s", run.name, cca_last_error());
    }
    CHECK(cca_plug_reset() == CCA_OK, "%s: reset: %s", run.name, cca_last_error());
}

/* Every block freed, its own domain on device 0 set: the reset takes it. */
static void worker_finish(pworker *w) {
    char tagged[64];
    tag(w, STEPS, tagged, sizeof tagged);
    for (int k = 0; k < SLOTS; k++)
        if (w->s[k].p)
            plug_free(w, &w->s[k], k, tagged);
    if (!w->own[0])
        CHECK(cca_domain_create(dev_allocator(0), "last", &w->own[0]) == CCA_OK, "%s: thread %d: domain: %s", run.name,
              w->id, cca_last_error());
    CHECK(cca_plug_set_domain(0, w->own[0], NULL) == CCA_OK, "%s: thread %d: set_domain: %s", run.name, w->id,
          cca_last_error());
}

static void *worker_main(void *arg) {
    pworker *w = arg;
    char tagged[64];
    ccai_rng_seed(&w->rng, run.seed * 100 + (uint64_t)w->id);
    tag(w, -1, tagged, sizeof tagged);
    for (int dev = 0; dev < DEVICES; dev++) /* the first calls race the creation */
        see_device(w, dev, tagged);
    for (int i = 0; i < STEPS; i++) {
        step(w, i);
        if (i % ROUND == ROUND - 1) {
            if (pthread_barrier_wait(&run.meet) == PTHREAD_BARRIER_SERIAL_THREAD)
                audit(i / ROUND);
            pthread_barrier_wait(&run.meet);
        }
    }
    worker_finish(w);
    if (pthread_barrier_wait(&run.meet) == PTHREAD_BARRIER_SERIAL_THREAD)
        finish_audit(); /* one thread resets */
    pthread_barrier_wait(&run.meet);
    for (int dev = 0; dev < DEVICES; dev++) {
        cca_domain *d = (cca_domain *)w;
        CHECK(cca_plug_get_domain(dev, &d) == CCA_OK && !d, "%s: thread %d: after the reset, device %d's domain %p",
              run.name, w->id, dev, (void *)d);
    }
    return NULL;
}

static void run_one(const char *name, const char *conf, uint64_t seed) {
    memset(run.w, 0, sizeof run.w);
    run.name = name, run.conf = conf, run.failed_msg[0] = 0;
    for (int dev = 0; dev < DEVICES; dev++)
        atomic_store(&run.a[dev], NULL), atomic_store(&run.u[dev], NULL);
    atomic_store(&lines, 0);
    CHECK(cca_plug_configure("host:24M:2", conf) == CCA_OK, "%s: configure: %s", name, cca_last_error());
    pthread_barrier_init(&run.meet, NULL, THREADS);
    pthread_t th[THREADS];
    run.seed = seed;
    for (int t = 0; t < THREADS; t++) /* each seeds its own generator */
        run.w[t].id = t, pthread_create(&th[t], NULL, worker_main, &run.w[t]);
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    pthread_barrier_destroy(&run.meet);
    uint64_t allocs = 0, ooms = 0, dead = 0;
    for (int t = 0; t < THREADS; t++) {
        dead += run.w[t].dead_allocs;
        for (int dev = 0; dev < DEVICES; dev++)
            allocs += run.w[t].allocs[dev], ooms += run.w[t].ooms[dev];
    }
    /* nothing left: a configure is taken, device 2 is made now */
    CHECK(cca_plug_configure("host:24M:3", conf) == CCA_OK, "%s: configure after the reset: %s", name,
          cca_last_error());
    cca_allocator *a = NULL;
    CHECK(cca_plug_get_allocator(DEVICES, &a) == CCA_OK && a, "%s: device 2 after the reset: %s", name,
          cca_last_error());
    cca_domain *d = (cca_domain *)&d;
    CHECK(cca_plug_get_domain(0, &d) == CCA_OK && !d, "%s: the main thread's domain %p", name, (void *)d);
    CHECK(cca_plug_reset() == CCA_OK, "%s: the last reset: %s", name, cca_last_error());
    printf("threads_plug [%s]: %" PRIu64 " allocs, %" PRIu64 " ooms, %" PRIu64
           " in a destroyed domain, %lu log lines\n",
           name, allocs, ooms, dead, atomic_load(&lines));
}

int main(int argc, char **argv) {
    uint64_t seed = SEED;
    char end;
    if (argc == 3 && strcmp(argv[1], "--seed") == 0 && sscanf(argv[2], "%" SCNu64 "%c", &seed, &end) == 1) {
    } else if (argc != 1) {
        fprintf(stderr, "usage: threads_plug [--seed N]\n");
        return 2;
    }
    cca_set_log_callback(sink_line, NULL);
    static const struct {
        const char *name, *conf;
    } runs[] = {
        {"classic", "expandable:0"},
        {"expandable", "expandable:1"},
        {"expandable, hold_peak", "expandable:1,hold_peak:1"},
    };
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++)
        run_one(runs[r].name, runs[r].conf, seed + r);
    cca_set_log_callback(NULL, NULL);
    if (failures)
        fprintf(stderr, "threads_plug: %d checks failed\n", failures);
    return failures != 0;
}
