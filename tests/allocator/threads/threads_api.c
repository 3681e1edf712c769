/*
 * threads_api.c — allocator/src/support/lock.c: every public call of the allocator at once, from eight
 * threads, checked exactly.
 *
 * A plain program (no Criterion: its runner cannot start under TSan), built
 * in every configuration: the TSan stage runs it for data races, the ASan
 * stage for memory errors, and every build checks what it asserts. Exit
 * status 0 = every check held.
 *
 * Part 1, one allocator per run (or two sharing the device, as two tenants
 * of one GPU, each thread using one), eight seeded threads mixing cca_alloc,
 * cca_alloc_in (the default, a common and the thread's own domain, which it
 * reserves an arena in, releases, destroys and creates again), cca_free,
 * cca_record_stream, cca_block_size, cca_trim, cca_empty_cache,
 * cca_get_stats, cca_reset_peak_stats, cca_stats_print,
 * cca_write_snapshot_json, cca_write_snapshot_torch, cca_check_invariants,
 * cca_get_domain_stats, cca_trace_mark, cca_domain_sleep and cca_domain_wake
 * of the thread's own domain, failing calls (an interior pointer,
 * a request no device holds) and, on thread 0, cca_set_log_callback. Runs:
 * classic, expandable, greedy and greedy-expandable, each on a 1 GiB device
 * and on a 48 MiB one, where OOMs and the OOM retry (which releases cached
 * memory) race with every other call; max_reserved; history rings; two
 * allocators on one small device, whose retries race each other's growth. Every ROUND steps all threads meet at
 * a barrier and one checks, with the others stopped:
 *   - stats exact: allocated_bytes = the sum of the live blocks' sizes
 *     (cca_block_size), requested_bytes and active_blocks likewise,
 *     alloc_calls, free_calls and ooms = what the threads counted;
 *   - each domain's requested bytes = its threads' live requests, and the
 *     domains' allocated bytes add up to the allocator's;
 *   - cca_check_invariants OK;
 *   - the device agrees: the upstream's bytes_in_use = the allocators'
 *     reserved_bytes, its mapped and reserved address space = theirs, its
 *     live allocations = their classic segments.
 * After the threads: everything freed and destroyed, the device holds
 * nothing. The log sink counts one OOM line per OOM, across sink changes,
 * and is never called once cca_set_log_callback replaced it.
 * The per-thread message: each step first sets a message of its own
 * (cca_set_error); a call that succeeds must leave it, one that fails must
 * replace it with its own, whatever the other threads do.
 *
 * Part 2, the framework entry points: eight threads race the first calls of
 * four devices (CCALLOC_PLUG_UPSTREAM) while one of them calls
 * cca_plug_configure until it is refused; bad device numbers and frees on
 * the wrong device mixed in. Afterwards: one allocator per device, created
 * with the last configuration that was accepted, stats exact; reset; the
 * same again with the environment alone.
 *
 * `threads_api --part K/N` (1 <= K <= N <= 12) runs part 1's runs r with
 * r % N == K - 1, part 2 only when K is 1, and part 3 on its own trace: the
 * TSan stage runs the program as three processes side by side (under TSan
 * one process kept less than one core busy: the runs are serialized by the
 * allocator's lock and by TSan's range checks of sleep's copies).
 *
 * Part 3, with CCALLOC_TRACE set: the recording is read back and must agree
 * with what happened: seq dense, every free pairs with a live alloc of the
 * same size and domain, domains declared before use and released with none
 * of their blocks live, every section ends with nothing live, and the
 * counts of allocs, frees and marks equal the stats. (ctest then replays
 * the file with ccbench where the benchmarks are built.)
 */
#include <ccalloc.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccai_rng.h"

#define THREADS 8
#define STEPS 2400
#define ROUND 600
#define SLOTS 24
#define MIB ((size_t)1 << 20)

#define THREAD_CHECK_NAME "threads_api"
#include "thread_check.h"
#include "thread_audit.h" /* slot, the barrier's sums and checks */

/* ---- the log sink -------------------------------------------------------------------------- */

typedef struct sink {
    atomic_bool retired; /* set once cca_set_log_callback replaced it */
    atomic_ulong lines, oom_lines;
} sink;

static sink sinks[64];
static atomic_ulong late_calls; /* a sink called after it was replaced */

static void sink_line(void *user, const char *line) {
    sink *s = user;
    if (atomic_load(&s->retired))
        atomic_fetch_add(&late_calls, 1);
    atomic_fetch_add(&s->lines, 1);
    if (strncmp(line, "out of memory: ", 15) == 0)
        atomic_fetch_add(&s->oom_lines, 1);
}

static int sink_next; /* thread 0 only */

static void sink_swap(void) {
    int old = sink_next;
    if (sink_next + 1 >= (int)(sizeof sinks / sizeof sinks[0]))
        return;
    sink_next++;
    cca_set_log_callback(sink_line, &sinks[sink_next]);
    atomic_store(&sinks[old].retired, true);
}

static unsigned long oom_lines_logged(void) {
    unsigned long n = 0;
    for (int i = 0; i <= sink_next; i++)
        n += atomic_load(&sinks[i].oom_lines);
    return n;
}

/* ---- part 1: one allocator, every call ----------------------------------------------------- */

typedef struct worker {
    int id;
    cca_allocator *a;   /* the run's allocator this thread uses */
    cca_domain *common; /* that allocator's common domain; NULL: greedy, no domains */
    ccai_rng rng;
    slot s[SLOTS];
    cca_domain *own;
    int own_gen;
    uint64_t allocs, frees, ooms, marks, own_allocs;
    FILE *devnull;
} worker;

static struct {
    int tenants; /* allocators sharing the device; thread t uses a[t % tenants] */
    cca_allocator *a[2];
    cca_upstream *u;
    cca_domain *common[2]; /* NULL: greedy, no domains */
    bool greedy, expandable;
    size_t capacity;
    pthread_barrier_t meet;
    worker w[THREADS];
    const char *name;
} run;

static uint64_t trace_allocs, trace_frees, trace_marks; /* what a recording must hold */

static size_t draw_size(ccai_rng *r, size_t capacity) {
    uint64_t k = ccai_rng_below(r, 100);
    if (k < 70)
        return 2 + (size_t)ccai_rng_below(r, 256 * 1024); /* two bytes at least: ta_mark */
    if (k < 90)
        return MIB + (size_t)ccai_rng_below(r, 7 * MIB);
    size_t big = capacity < 256 * MIB ? 12 * MIB : 20 * MIB;
    return 10 * MIB + (size_t)ccai_rng_below(r, big);
}

/* Under TSan every byte sleep and wake copy is checked: a thread's own domain
 * (the one it sleeps) gets blocks of at most 2 MiB there, so that a sleep
 * copies a few MiB, not 48 MiB on average (the 1 GiB expandable run took 89 s
 * of the TSan stage's 119). The same calls race; only their volume is less. */
#if defined(__SANITIZE_THREAD__)
#define OWN_BLOCK_MAX (2 * MIB)
#else
#define OWN_BLOCK_MAX SIZE_MAX
#endif

static size_t round512(size_t v) {
    return (v + CCA_GRANULARITY - 1) / CCA_GRANULARITY * CCA_GRANULARITY;
}

static cca_domain *domain_of(worker *w, int dom) {
    return dom == 0 ? NULL : dom == 1 ? w->common : w->own;
}

/* Its own message before every step: a call that succeeds leaves it. */
static void tag(worker *w, int step, char *buf, size_t len) {
    snprintf(buf, len, "thread %d step %d", w->id, step);
    cca_set_error(CCA_OK, "%s", buf);
}

static void expect_ok(worker *w, cca_status st, const char *tagged, const char *what) {
    if (st != CCA_OK)
        fail("%s: thread %d: %s: %s (%s)", run.name, w->id, what, cca_status_string(st), cca_last_error());
    else if (strcmp(cca_last_error(), tagged) != 0)
        fail("%s: thread %d: %s succeeded but the message changed to '%s'", run.name, w->id, what, cca_last_error());
}

static void expect_fail(worker *w, cca_status st, cca_status want, const char *tagged, const char *what) {
    if (st != want)
        fail("%s: thread %d: %s: %s where %s was due", run.name, w->id, what, cca_status_string(st),
             cca_status_string(want));
    else if (!cca_last_error()[0] || strcmp(cca_last_error(), tagged) == 0)
        fail("%s: thread %d: %s failed without a message of its own ('%s')", run.name, w->id, what, cca_last_error());
}

static void free_slot(worker *w, slot *s, const char *tagged) {
    if (!ta_marked(s, w->id, (int)(s - w->s)))
        fail("%s: thread %d: block %p was overwritten", run.name, w->id, (void *)s->p);
    expect_ok(w, cca_free(w->a, s->p), tagged, "cca_free");
    w->frees++;
    s->p = NULL;
}

static void own_domain_create(worker *w, const char *tagged) {
    char name[32];
    snprintf(name, sizeof name, "thread %d gen %d", w->id, ++w->own_gen);
    expect_ok(w, cca_domain_create(w->a, name, &w->own), tagged, "cca_domain_create");
    w->own_allocs = 0;
    /* an arena of its own; on the small device the retry may find none */
    cca_status st = cca_domain_reserve(w->a, w->own, 4 * MIB);
    if (st == CCA_ERR_OUT_OF_MEMORY)
        cca_set_error(CCA_OK, "%s", tagged);
    else
        expect_ok(w, st, tagged, "cca_domain_reserve");
}

/* Free the blocks of the own domain, then release it (destroy: and make a new one). */
static void own_domain_release(worker *w, bool destroy, const char *tagged) {
    for (int k = 0; k < SLOTS; k++)
        if (w->s[k].p && w->s[k].dom == 2)
            free_slot(w, &w->s[k], tagged);
    cca_domain_report rep = {0}; /* on entry its leaks and leaks_cap are read */
    if (!destroy) {
        expect_ok(w, cca_domain_release(w->a, w->own, 0, &rep), tagged, "cca_domain_release");
        cca_domain_stats ds;
        expect_ok(w, cca_get_domain_stats(w->a, w->own, &ds), tagged, "cca_get_domain_stats");
        CHECK(ds.reserved_bytes == 0 && ds.allocated_bytes == 0 && rep.live_blocks == 0,
              "%s: thread %d: a released domain holds %zu bytes", run.name, w->id, ds.reserved_bytes);
        return;
    }
    expect_ok(w, cca_domain_destroy(w->a, w->own, 0, &rep), tagged, "cca_domain_destroy");
    w->own = NULL;
    own_domain_create(w, tagged);
}

/* Sleep the own domain and wake it again (cca_domain_sleep, cca_domain_wake),
 * while the other threads allocate: its blocks' first and last bytes come
 * back. Classic segments refuse the sleep. A wake the device has no room
 * for (the small devices) leaves it asleep: its blocks are freed (their
 * copies dropped, never touched), and the wake, with nothing to map, holds. */
static void step_sleep(worker *w, bool expandable, const char *tagged) {
    cca_sleep_report r;
    cca_status st = cca_domain_sleep(w->a, w->own, 0, &r);
    if (!expandable) {
        expect_fail(w, st, CCA_ERR_UPSTREAM, tagged, "cca_domain_sleep over classic segments");
        return;
    }
    expect_ok(w, st, tagged, "cca_domain_sleep");
    if (st != CCA_OK)
        return;
    st = cca_domain_wake(w->a, w->own, &r);
    if (st == CCA_ERR_OUT_OF_MEMORY) {
        cca_set_error(CCA_OK, "%s", tagged);
        for (int k = 0; k < SLOTS; k++)
            if (w->s[k].p && w->s[k].dom == 2) {
                expect_ok(w, cca_free(w->a, w->s[k].p), tagged, "cca_free while asleep");
                w->frees++;
                w->s[k].p = NULL;
            }
        st = cca_domain_wake(w->a, w->own, &r);
        CHECK(st != CCA_OK || r.bytes_mapped == 0, "%s: an empty domain's wake mapped %zu bytes", run.name,
              r.bytes_mapped);
    }
    expect_ok(w, st, tagged, "cca_domain_wake");
    for (int k = 0; k < SLOTS; k++)
        if (w->s[k].p && w->s[k].dom == 2)
            CHECK(ta_marked(&w->s[k], w->id, k), "%s: thread %d: block %p lost its bytes in sleep and wake", run.name,
                  w->id, (void *)w->s[k].p);
}

static void step_alloc(worker *w, slot *s, int k, const char *tagged) {
    slot drawn = {.size = draw_size(&w->rng, run.capacity)};
    void *p;
    cca_status st = ta_alloc(&w->rng, w->a, (cca_domain *const[3]){NULL, w->common, w->own}, OWN_BLOCK_MAX, &drawn, &p);
    int dom = drawn.dom;
    size_t size = drawn.size;
    if (st == CCA_ERR_OUT_OF_MEMORY) {
        w->ooms++;
        CHECK(p == NULL, "%s: an OOM with a pointer", run.name);
        CHECK(strcmp(cca_last_error(), tagged) != 0, "%s: an OOM without a message", run.name);
        return;
    }
    expect_ok(w, st, tagged, "cca_alloc");
    if (st != CCA_OK || !p)
        return;
    w->allocs++;
    w->own_allocs += dom == 2;
    s->p = p;
    s->size = size;
    s->dom = dom;
    expect_ok(w, cca_block_size(w->a, p, &s->held), tagged, "cca_block_size");
    CHECK(s->held >= round512(size), "%s: a block of %zu for %zu bytes", run.name, s->held, size);
    ta_mark(s, w->id, k);
}

static void step(worker *w, int i) {
    char tagged[64];
    tag(w, i, tagged, sizeof tagged);
    int k = (int)ccai_rng_below(&w->rng, SLOTS);
    slot *s = &w->s[k];
    uint64_t op = ccai_rng_below(&w->rng, 100);
    if (op < 45) {
        if (s->p)
            free_slot(w, s, tagged);
        else
            step_alloc(w, s, k, tagged);
    } else if (op < 48) {
        if (s->p)
            expect_ok(w, cca_record_stream(w->a, s->p, (cca_stream)7), tagged, "cca_record_stream");
    } else if (op < 50) {
        expect_ok(w, cca_trim(w->a, (size_t)ccai_rng_below(&w->rng, 64 * MIB), NULL), tagged, "cca_trim");
    } else if (op < 51) {
        cca_release_report r;
        expect_ok(w, cca_empty_cache(w->a, &r), tagged, "cca_empty_cache");
    } else if (op < 55) {
        cca_stats st;
        cca_get_stats(w->a, &st);
        /* a sleeping domain's live blocks stay allocated while its pages are unmapped */
        CHECK((st.allocated_bytes <= st.reserved_bytes || st.asleep_domains > 0) &&
                  st.allocated_bytes <= st.allocated_bytes_peak &&
                  st.reserved_bytes <= st.reserved_bytes_peak && st.active_blocks <= st.active_blocks_peak &&
                  st.reserved_bytes <= run.capacity,
              "%s: an inconsistent stats snapshot", run.name);
    } else if (op < 56) {
        cca_reset_peak_stats(w->a);
    } else if (op < 58) {
        cca_stats st;
        cca_get_stats(w->a, &st);
        expect_ok(w, cca_stats_print(&st, w->devnull), tagged, "cca_stats_print");
    } else if (op < 59) {
        expect_ok(w, cca_write_snapshot_json(w->a, w->devnull), tagged, "cca_write_snapshot_json");
    } else if (op < 60) {
        expect_ok(w, cca_write_snapshot_torch(w->a, w->id % 4, w->devnull), tagged, "cca_write_snapshot_torch");
    } else if (op < 62) {
        expect_ok(w, cca_check_invariants(w->a), tagged, "cca_check_invariants");
    } else if (op < 64) {
        cca_domain_stats ds;
        int dom = w->common ? (int)ccai_rng_below(&w->rng, 3) : 0;
        expect_ok(w, cca_get_domain_stats(w->a, domain_of(w, dom), &ds), tagged, "cca_get_domain_stats");
        if (dom == 2) { /* only this thread allocates there */
            size_t req = 0;
            for (int j = 0; j < SLOTS; j++)
                req += w->s[j].p && w->s[j].dom == 2 ? w->s[j].size : 0;
            CHECK(ds.requested_bytes == req && ds.alloc_calls == w->own_allocs,
                  "%s: thread %d: its domain holds %zu requested bytes in %" PRIu64 " allocs, it made %zu in %" PRIu64,
                  run.name, w->id, ds.requested_bytes, ds.alloc_calls, req, w->own_allocs);
        }
    } else if (op < 66) {
        char name[40];
        snprintf(name, sizeof name, "t%d:%d", w->id, i);
        expect_ok(w, cca_trace_mark(w->a, name), tagged, "cca_trace_mark");
        w->marks++;
    } else if (op < 67 && w->common) {
        own_domain_release(w, ccai_rng_below(&w->rng, 2), tagged);
    } else if (op < 68 && run.greedy) {
        cca_domain *d = (cca_domain *)1;
        expect_fail(w, cca_domain_create(w->a, "no", &d), CCA_ERR_INVALID_ARGUMENT, tagged, "greedy domain");
        CHECK(d == NULL, "%s: a refused domain was returned", run.name);
    } else if (op < 70) {
        if (s->p && s->held > CCA_ALIGNMENT)
            expect_fail(w, cca_free(w->a, s->p + CCA_ALIGNMENT), CCA_ERR_INVALID_POINTER, tagged, "interior free");
    } else if (op < 71) {
        void *p = (void *)1;
        expect_fail(w, cca_alloc(w->a, (size_t)1 << 50, NULL, &p), CCA_ERR_OUT_OF_MEMORY, tagged, "2^50 bytes");
        CHECK(p == NULL, "%s: an OOM with a pointer", run.name);
        w->ooms++;
    } else if (op < 72 && w->id == 0) {
        sink_swap();
    } else if (op < 73 && w->common) {
        step_sleep(w, run.expandable, tagged);
    } else if (!s->p) {
        step_alloc(w, s, k, tagged);
    }
}

/* With every thread stopped at the barrier: the exact accounts of allocator
 * n (its threads: t % tenants == n). Returns its stats. */
static cca_stats audit_tenant(int n, int round) {
    cca_stats st; /* pending frees (blocks used on stream 7) complete: ta_check_stats trims */
    TA_AUDIT(st, run.name, round, run.a[n], run.common[n], run.w, n, run.tenants);
    return st;
}

/* Every allocator's accounts, then the device's: what they reserve together. */
static void audit(int round) {
    ta_held h = {0};
    for (int n = 0; n < run.tenants; n++) {
        cca_stats st = audit_tenant(n, round);
        ta_hold(&h, &st);
    }
    cca_upstream_stats us;
    cca_upstream_get_stats(run.u, &us);
    ta_check_device(run.name, round, &us, &h);
}

static void *worker_main(void *arg) {
    worker *w = arg;
    w->devnull = fopen("/dev/null", "w");
    char tagged[64];
    tag(w, -1, tagged, sizeof tagged);
    if (w->common)
        own_domain_create(w, tagged);
    for (int i = 0; i < STEPS; i++) {
        step(w, i);
        ta_meet(&run.meet, i, ROUND, audit);
    }
    tag(w, STEPS, tagged, sizeof tagged);
    for (int k = 0; k < SLOTS; k++)
        if (w->s[k].p)
            free_slot(w, &w->s[k], tagged);
    if (w->own)
        expect_ok(w, cca_domain_destroy(w->a, w->own, 0, NULL), tagged, "cca_domain_destroy");
    fclose(w->devnull);
    return NULL;
}

static void run_one(const char *name, const char *conf, size_t capacity, int tenants, uint64_t seed) {
    cca_config cfg;
    cca_config_default(&cfg);
    memset(&run, 0, sizeof run);
    run.name = name;
    run.capacity = capacity;
    run.tenants = tenants;
    if (cca_config_parse(&cfg, conf) != CCA_OK || cca_upstream_host_create(capacity, &run.u) != CCA_OK) {
        fail("%s: setup: %s", name, cca_last_error());
        return;
    }
    run.greedy = cfg.policy == CCA_POLICY_GREEDY;
    run.expandable = cfg.expandable != 0;
    for (int n = 0; n < tenants; n++) {
        if (cca_create(&cfg, run.u, &run.a[n]) != CCA_OK)
            fail("%s: setup: %s", name, cca_last_error());
        if (!run.greedy && cca_domain_create(run.a[n], "common", &run.common[n]) != CCA_OK)
            fail("%s: common domain: %s", name, cca_last_error());
    }
    if (failures)
        return;
    pthread_barrier_init(&run.meet, NULL, THREADS);
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) {
        run.w[t].id = t;
        run.w[t].a = run.a[t % tenants];
        run.w[t].common = run.common[t % tenants];
        ccai_rng_seed(&run.w[t].rng, seed * 100 + (uint64_t)t);
        pthread_create(&th[t], NULL, worker_main, &run.w[t]);
    }
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    pthread_barrier_destroy(&run.meet);
    uint64_t allocs = 0, ooms = 0, retries = 0;
    for (int t = 0; t < THREADS; t++) {
        allocs += run.w[t].allocs, ooms += run.w[t].ooms;
        trace_marks += run.w[t].marks;
    }
    cca_stats st;
    uint64_t counted_ooms = 0;
    for (int n = 0; n < tenants; n++) {
        cca_allocator *a = run.a[n];
        if (run.common[n] && cca_domain_destroy(a, run.common[n], 0, NULL) != CCA_OK)
            fail("%s: destroying the common domain: %s", name, cca_last_error());
        CHECK(cca_empty_cache(a, NULL) == CCA_OK, "%s: empty cache: %s", name, cca_last_error());
        cca_get_stats(a, &st);
        CHECK(st.active_blocks == 0 && st.allocated_bytes == 0 && st.reserved_bytes == 0 && st.segments == 0,
              "%s: after the threads: %zu blocks, %zu reserved", name, st.active_blocks, st.reserved_bytes);
        CHECK(cca_check_invariants(a) == CCA_OK, "%s: %s", name, cca_last_error());
        counted_ooms += st.ooms;
        retries += st.alloc_retries;
        trace_allocs += st.alloc_calls;
        trace_frees += st.free_calls;
        CHECK(cca_destroy(a) == CCA_OK, "%s: destroy: %s", name, cca_last_error());
    }
    CHECK(counted_ooms == ooms, "%s: %" PRIu64 " ooms counted, %" PRIu64 " seen", name, counted_ooms, ooms);
    cca_upstream_stats us;
    cca_upstream_get_stats(run.u, &us);
    CHECK(us.bytes_in_use == 0 && us.allocations == 0 && us.vm_mapped_bytes == 0 && us.vm_reserved_bytes == 0,
          "%s: the device still holds %zu bytes after destroy", name, us.bytes_in_use);
    CHECK(us.bytes_in_use_peak <= capacity, "%s: the device's peak %zu exceeds its %zu bytes", name,
          us.bytes_in_use_peak, capacity);
    cca_upstream_destroy(run.u);
    printf("threads_api [%s]: %d threads x %d steps, %" PRIu64 " allocs, %" PRIu64 " ooms, %" PRIu64 " retries\n", name,
           THREADS, STEPS, allocs, ooms, retries);
}

/* ---- part 2: the framework entry points ----------------------------------------------------- */

#define PLUG_DEVICES 4
#define PLUG_STEPS 1500

typedef struct plugger {
    int id;
    pthread_barrier_t *go;
    atomic_int *configured; /* NULL, or the others start once one configure was accepted */
    uint64_t allocs[PLUG_DEVICES];
    int last_configured; /* the configuring thread: the last k accepted, -1 none */
    cca_allocator *seen[PLUG_DEVICES];
} plugger;

static void *plug_main(void *arg) {
    plugger *p = arg;
    pthread_barrier_wait(p->go);
    if (p->id == THREADS - 1) { /* configure until a creation refuses it */
        p->last_configured = -1;
        for (int k = 0; k < 100000; k++) {
            char conf[40];
            snprintf(conf, sizeof conf, "max_reserved:%dM", 40 + k % 1000);
            cca_status st = cca_plug_configure("host:48M:4", conf);
            if (st != CCA_OK) {
                CHECK(st == CCA_ERR_INVALID_ARGUMENT && strstr(cca_last_error(), "already in use"),
                      "plug: configure: %s (%s)", cca_status_string(st), cca_last_error());
                break;
            }
            p->last_configured = k;
            if (p->configured)
                atomic_store(p->configured, 1);
        }
        return NULL;
    }
    while (p->configured && !atomic_load(p->configured))
        ;
    ccai_rng r;
    ccai_rng_seed(&r, 7000 + (uint64_t)p->id);
    void *held[8] = {0};
    size_t held_size[8] = {0};
    int held_dev[8] = {0};
    for (int i = 0; i < PLUG_STEPS; i++) {
        int k = (int)ccai_rng_below(&r, 8);
        int dev = (p->id + i) % PLUG_DEVICES;
        if (i % 97 == 0) { /* bad device numbers: NULL, the message names the number */
            static const int bad[] = {-1, CCA_PLUG_MAX_DEVICES, 1 << 30, -2147483647 - 1};
            int b = bad[(i / 97) % 4];
            char want[48];
            snprintf(want, sizeof want, "device %d not in [0, %d)", b, CCA_PLUG_MAX_DEVICES);
            CHECK(cca_plug_alloc(4096, b, NULL) == NULL && strstr(cca_last_error(), want), "plug: device %d: '%s'", b,
                  cca_last_error());
            cca_allocator *a = (cca_allocator *)1;
            CHECK(cca_plug_get_allocator(b, &a) == CCA_ERR_INVALID_ARGUMENT && a == NULL, "plug: get_allocator(%d)", b);
        }
        if (held[k]) {
            if (i % 13 == 0) { /* the wrong device first: refused, nothing changes */
                int other = (held_dev[k] + 1) % PLUG_DEVICES;
                cca_plug_free(held[k], held_size[k], other, NULL);
                CHECK(strstr(cca_last_error(), "cca_plug_free") != NULL, "plug: a free on the wrong device: '%s'",
                      cca_last_error());
            }
            cca_plug_free(held[k], held_size[k], held_dev[k], NULL);
            held[k] = NULL;
            continue;
        }
        size_t size = 1 + (size_t)ccai_rng_below(&r, ccai_rng_below(&r, 10) ? 512 * 1024 : 6 * MIB);
        char tagged[48];
        snprintf(tagged, sizeof tagged, "plug thread %d step %d", p->id, i);
        cca_set_error(CCA_OK, "%s", tagged);
        void *q = cca_plug_alloc(size, dev, (void *)(uintptr_t)(p->id % 3));
        if (!q)
            continue; /* out of memory on a small device: logged by the allocator */
        CHECK(strcmp(cca_last_error(), tagged) == 0, "plug: a cca_plug_alloc that succeeded left '%s'",
              cca_last_error());
        held[k] = q, held_size[k] = size, held_dev[k] = dev;
        p->allocs[dev]++;
        cca_allocator *a = NULL;
        CHECK(cca_plug_get_allocator(dev, &a) == CCA_OK, "plug: get_allocator(%d): %s", dev, cca_last_error());
        if (!p->seen[dev])
            p->seen[dev] = a;
        CHECK(a == p->seen[dev], "plug: device %d changed allocator", dev);
    }
    for (int k = 0; k < 8; k++)
        if (held[k])
            cca_plug_free(held[k], held_size[k], held_dev[k], NULL);
    return NULL;
}

static void plug_round(const char *name, bool configure_first) {
    atomic_int configured = 0;
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, THREADS);
    plugger p[THREADS];
    pthread_t th[THREADS];
    memset(p, 0, sizeof p);
    for (int t = 0; t < THREADS; t++) {
        p[t].id = t;
        p[t].go = &go;
        p[t].configured = configure_first ? &configured : NULL;
        pthread_create(&th[t], NULL, plug_main, &p[t]);
    }
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    pthread_barrier_destroy(&go);
    int k = p[THREADS - 1].last_configured;
    for (int d = 0; d < PLUG_DEVICES; d++) {
        cca_allocator *a = NULL;
        cca_upstream *u = NULL;
        if (cca_plug_get_allocator(d, &a) != CCA_OK || cca_plug_get_upstream(d, &u) != CCA_OK) {
            fail("%s: device %d: %s", name, d, cca_last_error());
            continue;
        }
        uint64_t allocs = 0;
        for (int t = 0; t < THREADS; t++) {
            allocs += p[t].allocs[d];
            CHECK(!p[t].seen[d] || p[t].seen[d] == a, "%s: device %d had two allocators", name, d);
        }
        cca_stats st;
        cca_get_stats(a, &st);
        CHECK(st.alloc_calls == allocs && st.free_calls == allocs && st.allocated_bytes == 0,
              "%s: device %d: %" PRIu64 " allocs, %" PRIu64 " frees counted; the threads made %" PRIu64, name, d,
              st.alloc_calls, st.free_calls, allocs);
        CHECK(cca_check_invariants(a) == CCA_OK, "%s: device %d: %s", name, d, cca_last_error());
        cca_config c;
        cca_get_config(a, &c);
        size_t free_b = 0, total = 0;
        cca_upstream_mem_info(u, &free_b, &total);
        /* created with the last configuration accepted, or the environment's */
        size_t want_max = k >= 0 ? (size_t)(40 + k % 1000) * MIB : 0, want_total = k >= 0 ? 48 * MIB : 64 * MIB;
        CHECK(c.max_reserved == want_max && total == want_total,
              "%s: device %d: max_reserved %zu on %zu bytes; the configuration accepted last (%d) says %zu on %zu",
              name, d, c.max_reserved, total, k, want_max, want_total);
        cca_upstream_stats us;
        cca_upstream_get_stats(u, &us);
        CHECK(us.bytes_in_use == st.reserved_bytes, "%s: device %d: the device holds %zu, the allocator %zu", name, d,
              us.bytes_in_use, st.reserved_bytes);
        trace_allocs += st.alloc_calls;
        trace_frees += st.free_calls;
    }
    CHECK(cca_plug_reset() == CCA_OK, "%s: reset: %s", name, cca_last_error());
    printf("threads_api [%s]: %d threads, configure accepted %d times before the first creation\n", name, THREADS,
           k + 1);
}

/* ---- part 3: the recording reads back ------------------------------------------------------ */

typedef struct live_id {
    uint64_t id, size, domain;
} live_id;

static void check_trace(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fail("trace: cannot open %s", path);
        return;
    }
    size_t cap = 1 << 16, n = 0;
    live_id *live = calloc(cap, sizeof *live);
    char line[256];
    uint64_t seq = 0, allocs = 0, frees = 0, marks = 0, domains = 0, lineno = 0;
    bool in_section = false;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (line[0] == '#')
            continue;
        if (strncmp(line, "seq,", 4) == 0) {
            CHECK(!in_section || n == 0, "trace line %" PRIu64 ": a section ends with %zu blocks live", lineno, n);
            in_section = true;
            seq = 0, domains = 0, n = 0;
            continue;
        }
        unsigned long long sq, id, size, stream, domain;
        char op[20];
        if (sscanf(line, "%llu,%19[a-z_],%llu,%llu,%llu,%llu", &sq, op, &id, &size, &stream, &domain) != 6) {
            fail("trace line %" PRIu64 ": malformed: %s", lineno, line);
            continue;
        }
        CHECK(sq == seq, "trace line %" PRIu64 ": seq %llu where %" PRIu64 " was due", lineno, sq, seq);
        seq = sq + 1;
        CHECK(domain <= domains || !strcmp(op, "domain"), "trace line %" PRIu64 ": domain %llu before it was declared",
              lineno, domain);
        if (!strcmp(op, "alloc")) {
            if (n == cap)
                live = realloc(live, (cap *= 2) * sizeof *live);
            live[n++] = (live_id){id, size, domain};
            allocs++;
        } else if (!strcmp(op, "free")) {
            size_t j = 0;
            while (j < n && live[j].id != id)
                j++;
            if (j == n) {
                fail("trace line %" PRIu64 ": free of id %llu, not live", lineno, id);
                continue;
            }
            CHECK(live[j].size == size && live[j].domain == domain,
                  "trace line %" PRIu64 ": free of id %llu as %llu bytes in domain %llu, allocated as %" PRIu64
                  " in %" PRIu64,
                  lineno, id, size, domain, live[j].size, live[j].domain);
            live[j] = live[--n];
            frees++;
        } else if (!strcmp(op, "domain")) {
            CHECK(domain == domains + 1, "trace line %" PRIu64 ": domain %llu declared after %" PRIu64, lineno, domain,
                  domains);
            domains = domain;
        } else if (!strcmp(op, "domain_release")) {
            for (size_t j = 0; j < n; j++)
                CHECK(live[j].domain != domain, "trace line %" PRIu64 ": domain %llu released with id %" PRIu64 " live",
                      lineno, domain, live[j].id);
        } else if (!strcmp(op, "mark")) {
            marks++;
        } else if (strcmp(op, "trim") && strcmp(op, "empty_cache") && strcmp(op, "domain_reserve")) {
            fail("trace line %" PRIu64 ": unknown op %s", lineno, op);
        }
    }
    fclose(f);
    CHECK(n == 0, "trace: the last section ends with %zu blocks live", n);
    CHECK(allocs == trace_allocs && frees == trace_frees && marks == trace_marks,
          "trace: %" PRIu64 " allocs, %" PRIu64 " frees, %" PRIu64 " marks recorded; %" PRIu64 ", %" PRIu64 ", %" PRIu64
          " made",
          allocs, frees, marks, trace_allocs, trace_frees, trace_marks);
    free(live);
    printf("threads_api: the trace %s agrees: %" PRIu64 " allocs, %" PRIu64 " frees, %" PRIu64 " marks\n", path, allocs,
           frees, marks);
}

/* `--part K/N`: this process's share of part 1 (K of N), and whether it runs part 2 (K = 1). */
static bool parse_part(int argc, char **argv, unsigned *k, unsigned *n) {
    *k = 1, *n = 1;
    if (argc == 1)
        return true;
    char end;
    if (argc != 3 || strcmp(argv[1], "--part") != 0 || sscanf(argv[2], "%u/%u%c", k, n, &end) != 2 ||
        !(argv[2][0] >= '1' && argv[2][0] <= '9') || strspn(argv[2], "0123456789/") != strlen(argv[2]) || *k < 1 ||
        *k > *n || *n > 12) {
        fprintf(stderr, "usage: threads_api [--part K/N] (1 <= K <= N <= 12)\n");
        return false;
    }
    return true;
}

int main(int argc, char **argv) {
    unsigned part, parts;
    if (!parse_part(argc, argv, &part, &parts))
        return 2;
    cca_set_log_callback(sink_line, &sinks[0]);
    static const struct {
        const char *name, *conf;
        size_t capacity;
        int tenants;
    } runs[] = {
        {"classic", "expandable:0", 1024 * MIB, 1},
        {"expandable", "expandable:1,history:64", 1024 * MIB, 1},
        {"greedy", "expandable:0,policy:greedy,greedy_bytes:256M", 1024 * MIB, 1},
        {"greedy-expandable", "policy:greedy,greedy_bytes:256M,expandable:1", 1024 * MIB, 1},
        {"classic, max_reserved", "expandable:0,max_reserved:40M,history:64", 1024 * MIB, 1},
        {"classic, small device", "expandable:0", 48 * MIB, 1},
        {"expandable, small device", "expandable:1", 48 * MIB, 1},
        {"greedy, small device", "expandable:0,policy:greedy,greedy_bytes:40M", 48 * MIB, 1},
        {"greedy-expandable, small device", "policy:greedy,greedy_bytes:40M,expandable:1", 48 * MIB, 1},
        {"classic, two tenants of a small device", "expandable:0", 64 * MIB, 2},
        {"expandable, two tenants of a small device", "expandable:1", 64 * MIB, 2},
        {"greedy-expandable, two tenants of a device", "policy:greedy,greedy_bytes:100M,expandable:1", 256 * MIB, 2},
    };
    uint64_t ooms_before = 0;
    for (size_t r = part - 1; r < sizeof runs / sizeof runs[0]; r += parts) {
        run_one(runs[r].name, runs[r].conf, runs[r].capacity, runs[r].tenants, r + 1);
        for (int t = 0; t < THREADS; t++)
            ooms_before += run.w[t].ooms;
    }
    /* every OOM logged one line (log_oom:1), to whichever sink was in place */
    CHECK(oom_lines_logged() == ooms_before, "%lu OOM lines logged for %" PRIu64 " OOMs", oom_lines_logged(),
          ooms_before);
    CHECK(atomic_load(&late_calls) == 0, "a replaced sink was called %lu times", atomic_load(&late_calls));

    if (part == 1) {
        setenv("CCALLOC_PLUG_UPSTREAM", "host:64M:4", 1);
        unsetenv("CCALLOC_CONF");
        plug_round("plug, configure, then racing the first calls", true);
        setenv("CCALLOC_CONF", "no_such_option:1", 1); /* logged at each creation the environment makes */
        plug_round("plug, after reset: configure racing the first calls", false);
        unsetenv("CCALLOC_CONF");
    }
    cca_set_log_callback(NULL, NULL);

    const char *trace = getenv("CCALLOC_TRACE");
    if (trace && *trace)
        check_trace(trace);
    if (failures)
        fprintf(stderr, "threads_api: %d checks failed\n", failures);
    return failures != 0;
}
