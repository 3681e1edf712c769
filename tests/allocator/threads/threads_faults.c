/*
 * threads_faults.c — allocator/src/core/grow.c, core/release.c, sleep.c and
 * domain.c: the upstream's refusals while eight threads are inside the
 * allocator, checked exactly.
 *
 * A plain program (no Criterion: its runner cannot start under TSan), built
 * in every configuration as threads_api.c is; the TSan stage runs it too.
 * Exit status 0 = every check held.
 *
 * - The device: the simulated one (cca_upstream_host_create_with) behind
 *   `fx`, a fault wrapper of this file that every thread calls at once
 *   (safe so: atomic counters, each thread its own seeded generator, a
 *   mutex over the one list it keeps). While faults are on, each call
 *   of every kind an op can fail (alloc, free, mem_info, synchronize,
 *   stream_synchronize, the three event ops, vm_reserve, vm_release,
 *   vm_map, vm_unmap, host_alloc, host_free, copy, copy_wait) made on a
 *   worker thread fails with probability P / 1000 (--permille), without
 *   reaching the device: CCA_ERR_OUT_OF_MEMORY for alloc, vm_reserve,
 *   vm_map and host_alloc, CCA_ERR_UPSTREAM for the others, the message
 *   "fx: injected <op> failure (thread <id>)" naming the calling thread.
 *   A failed copy_wait has waited for the copies all the same, a failed
 *   event_destroy has freed its event (the ops' contracts); a refused
 *   host_free's chunk is kept here (the allocator leaves it with the
 *   upstream, ccalloc.h) and freed after the run. vm_granularity is asked
 *   once, at creation: passed through. Events are the wrapper's own
 *   tokens, complete at once.
 * - The threads: eight, each with a seeded generator, mixing cca_alloc,
 *   cca_alloc_in (default, a common domain, the thread's own), cca_free,
 *   cca_record_stream, cca_trim, cca_empty_cache, cca_get_stats,
 *   cca_check_invariants, cca_get_domain_stats, cca_domain_release and
 *   cca_domain_destroy of the own domain, with FORCE a third of the time
 *   (then a new one, with an arena: cca_domain_reserve; a released one
 *   may reserve again), cca_domain_sleep and cca_domain_wake of it (and
 *   sleep again while asleep: what a refused unmap left goes).
 *   Runs: classic, expandable (whole maps and pages), greedy (classic and
 *   expandable), hold_peak, on a 1 GiB device and on small ones (where
 *   OOMs and the retry race the faults), and two tenants of one small
 *   device. cca_alloc's answers: a block, or CCA_ERR_OUT_OF_MEMORY (this
 *   device refuses no alloc or map otherwise), or CCA_ERR_ASLEEP in the
 *   thread's own domain while asleep.
 * - Each call's answer: one of the statuses its contract allows under
 *   these refusals (ccalloc.h; a free consumes its pointer whatever it
 *   returns); a success leaves the thread's own message; a failure sets a
 *   message of its own: not empty, not the thread's tag, no other
 *   thread's injected failure in it. A sleep that succeeded leaves the
 *   domain asleep, one that failed awake but for a refused unmap
 *   (CCA_ERR_UPSTREAM); a wake that succeeded leaves it awake, one that
 *   failed asleep; the blocks' first and last bytes survive both. A
 *   whole op (under the write lock): the default and common domains as
 *   the last whole op left them before it, and after it as ccalloc.h says
 *   (step_whole's comment).
 * - Every ROUND steps all threads meet at a barrier and one checks, faults
 *   off and the others stopped: stats exact (allocated, requested and
 *   active blocks = the threads' live blocks; alloc_calls, free_calls,
 *   ooms = what they counted); each own domain's requested bytes and sleep
 *   state as its thread knows them (learned here when a whole op came
 *   since it last looked), the default and common domains' states as the
 *   whole ops left them, the domains' allocated bytes adding up
 *   to the allocator's; cca_check_invariants OK; the device agrees (its
 *   bytes in use, mapped and reserved address space, live allocations =
 *   the allocators' reserved, mapped, address space and classic segments;
 *   its host bytes = the sleeping domains' copies plus the chunks a
 *   refused host_free kept); the wrapper's own counts agree with the
 *   device's.
 * - After the threads, faults off: everything freed, woken (the own
 *   domains, then cca_wake: CCA_OK) and destroyed,
 *   the kept chunks freed: the device holds nothing, device nor host. One
 *   OOM log line per OOM returned; every line (OOMs, refused host_frees
 *   and event queries) reaches the sink with no lock held: the sink's
 *   cca_get_stats of each allocator is not refused and leaves the
 *   thread's message.
 *
 * `threads_faults [--seed N] [--permille P]`: the runs' seeds start from N
 * (default SEED), each call fails with probability P / 1000 (default
 * FX_PERMILLE, at most 1000).
 */
#include <ccalloc.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccai_rng.h"

#define THREADS 8
#define STEPS 1600
#define ROUND 400
#define SLOTS 16
#define MIB ((size_t)1 << 20)
#define FX_PERMILLE 30 /* the default; --permille */
#define WHOLE_ONE_IN 4 /* a whole op: one step in 100 x WHOLE_ONE_IN */
#define SEED 17        /* the default; --seed (17: a first mem_info refused inside cca_domain_reserve) */

#define THREAD_CHECK_NAME "threads_faults"
#include "thread_check.h"
#include "thread_audit.h" /* slot, the barrier's sums and checks */

/* ---- the faulty device --------------------------------------------------------------------- */

typedef enum fx_kind {
    FX_ALLOC,
    FX_FREE,
    FX_MEM_INFO,
    FX_SYNC,
    FX_STREAM_SYNC,
    FX_EVENT_RECORD,
    FX_EVENT_QUERY,
    FX_EVENT_DESTROY,
    FX_RESERVE,
    FX_RELEASE,
    FX_MAP,
    FX_UNMAP,
    FX_HOST_ALLOC,
    FX_HOST_FREE,
    FX_COPY,
    FX_COPY_WAIT,
    FX_KINDS
} fx_kind;

static const char *const fx_names[FX_KINDS] = {
    "alloc",         "free",       "mem_info",   "synchronize", "stream_synchronize", "event_record", "event_query",
    "event_destroy", "vm_reserve", "vm_release", "vm_map",      "vm_unmap",           "host_alloc",   "host_free",
    "copy",          "copy_wait"};

#define FX_KEPT_MAX 1024

static struct {
    cca_upstream *inner;
    atomic_bool on;
    atomic_ulong calls[FX_KINDS], injected[FX_KINDS];
    pthread_mutex_t lock; /* over kept */
    struct {
        void *p;
        size_t size;
    } kept[FX_KEPT_MAX]; /* chunks a refused host_free left with the device */
    size_t nkept, kept_bytes;
} fx = {.lock = PTHREAD_MUTEX_INITIALIZER};

static unsigned fx_permille = FX_PERMILLE;
static _Thread_local int fx_thread = -1; /* the worker calling: -1 main, never failed */
static _Thread_local ccai_rng fx_rng;

static bool fx_fails(fx_kind k) {
    atomic_fetch_add(&fx.calls[k], 1);
    if (fx_thread < 0 || !atomic_load(&fx.on) || ccai_rng_below(&fx_rng, 1000) >= fx_permille)
        return false;
    atomic_fetch_add(&fx.injected[k], 1);
    return true;
}

static cca_status fx_injected(fx_kind k, cca_status st) {
    return cca_set_error(st, "fx: injected %s failure (thread %d)", fx_names[k], fx_thread);
}

static cca_status fx_alloc(void *ctx, size_t size, void **ptr) {
    (void)ctx;
    return fx_fails(FX_ALLOC) ? fx_injected(FX_ALLOC, CCA_ERR_OUT_OF_MEMORY) : cca_upstream_alloc(fx.inner, size, ptr);
}
static cca_status fx_free(void *ctx, void *ptr, size_t size) {
    (void)ctx;
    return fx_fails(FX_FREE) ? fx_injected(FX_FREE, CCA_ERR_UPSTREAM) : cca_upstream_free(fx.inner, ptr, size);
}
static cca_status fx_mem_info(void *ctx, size_t *free_bytes, size_t *total) {
    (void)ctx;
    return fx_fails(FX_MEM_INFO) ? fx_injected(FX_MEM_INFO, CCA_ERR_UPSTREAM)
                                 : cca_upstream_mem_info(fx.inner, free_bytes, total);
}
static cca_status fx_sync(void *ctx) {
    (void)ctx;
    return fx_fails(FX_SYNC) ? fx_injected(FX_SYNC, CCA_ERR_UPSTREAM) : cca_upstream_synchronize(fx.inner);
}
static cca_status fx_stream_sync(void *ctx, cca_stream s) {
    (void)ctx;
    return fx_fails(FX_STREAM_SYNC) ? fx_injected(FX_STREAM_SYNC, CCA_ERR_UPSTREAM)
                                    : cca_upstream_stream_synchronize(fx.inner, s);
}
static cca_status fx_event_record(void *ctx, cca_stream s, void **event) {
    (void)ctx, (void)s;
    if (fx_fails(FX_EVENT_RECORD))
        return fx_injected(FX_EVENT_RECORD, CCA_ERR_UPSTREAM);
    *event = malloc(1); /* a token of its own, complete at once */
    return *event ? CCA_OK : cca_set_error(CCA_ERR_OUT_OF_MEMORY, "fx: no host memory for an event");
}
static cca_status fx_event_query(void *ctx, void *event) {
    (void)ctx, (void)event;
    return fx_fails(FX_EVENT_QUERY) ? fx_injected(FX_EVENT_QUERY, CCA_ERR_UPSTREAM) : CCA_OK;
}
static cca_status fx_event_destroy(void *ctx, void *event) {
    (void)ctx;
    free(event); /* never asked about again, refused or not */
    return fx_fails(FX_EVENT_DESTROY) ? fx_injected(FX_EVENT_DESTROY, CCA_ERR_UPSTREAM) : CCA_OK;
}
static cca_status fx_vm_granularity(void *ctx, size_t *bytes) {
    (void)ctx;
    return cca_upstream_vm_granularity(fx.inner, bytes);
}
static cca_status fx_vm_reserve(void *ctx, size_t size, void **base) {
    (void)ctx;
    return fx_fails(FX_RESERVE) ? fx_injected(FX_RESERVE, CCA_ERR_OUT_OF_MEMORY)
                                : cca_upstream_vm_reserve(fx.inner, size, base);
}
static cca_status fx_vm_release(void *ctx, void *base, size_t size) {
    (void)ctx;
    return fx_fails(FX_RELEASE) ? fx_injected(FX_RELEASE, CCA_ERR_UPSTREAM)
                                : cca_upstream_vm_release(fx.inner, base, size);
}
static cca_status fx_vm_map(void *ctx, void *addr, size_t size) {
    (void)ctx;
    return fx_fails(FX_MAP) ? fx_injected(FX_MAP, CCA_ERR_OUT_OF_MEMORY) : cca_upstream_vm_map(fx.inner, addr, size);
}
static cca_status fx_vm_unmap(void *ctx, void *addr, size_t size) {
    (void)ctx;
    return fx_fails(FX_UNMAP) ? fx_injected(FX_UNMAP, CCA_ERR_UPSTREAM) : cca_upstream_vm_unmap(fx.inner, addr, size);
}
static cca_status fx_host_alloc(void *ctx, size_t size, void **ptr) {
    (void)ctx;
    return fx_fails(FX_HOST_ALLOC) ? fx_injected(FX_HOST_ALLOC, CCA_ERR_OUT_OF_MEMORY)
                                   : cca_upstream_host_alloc(fx.inner, size, ptr);
}
static cca_status fx_host_free(void *ctx, void *ptr, size_t size) {
    (void)ctx;
    if (!fx_fails(FX_HOST_FREE))
        return cca_upstream_host_free(fx.inner, ptr, size);
    pthread_mutex_lock(&fx.lock);
    if (fx.nkept < FX_KEPT_MAX) {
        fx.kept[fx.nkept].p = ptr, fx.kept[fx.nkept].size = size;
        fx.nkept++, fx.kept_bytes += size;
    } else {
        fail("fx: more than %d host chunks kept", FX_KEPT_MAX);
    }
    pthread_mutex_unlock(&fx.lock);
    return fx_injected(FX_HOST_FREE, CCA_ERR_UPSTREAM);
}
static cca_status fx_copy(void *ctx, void *dst, const void *src, size_t size, int to_host) {
    (void)ctx;
    return fx_fails(FX_COPY) ? fx_injected(FX_COPY, CCA_ERR_UPSTREAM)
                             : cca_upstream_copy(fx.inner, dst, src, size, to_host);
}
static cca_status fx_copy_wait(void *ctx) {
    (void)ctx;
    cca_status st = cca_upstream_copy_wait(fx.inner); /* a failed wait has waited too */
    return fx_fails(FX_COPY_WAIT) ? fx_injected(FX_COPY_WAIT, CCA_ERR_UPSTREAM) : st;
}

static cca_upstream *fx_create(size_t capacity, int backing) {
    cca_host_options o = {.capacity = capacity, .vm_backing = backing};
    cca_upstream *u = NULL;
    if (cca_upstream_host_create_with(&o, &fx.inner) != CCA_OK)
        return NULL;
    cca_upstream_ops ops = {
        .alloc = fx_alloc,
        .free = fx_free,
        .mem_info = fx_mem_info,
        .synchronize = fx_sync,
        .event_record = fx_event_record,
        .event_query = fx_event_query,
        .event_destroy = fx_event_destroy,
        .name = "fx",
        .vm_granularity = fx_vm_granularity,
        .vm_reserve = fx_vm_reserve,
        .vm_release = fx_vm_release,
        .vm_map = fx_vm_map,
        .vm_unmap = fx_vm_unmap,
        .vm_backing = backing,
        .stream_synchronize = fx_stream_sync,
        .host_alloc = fx_host_alloc,
        .host_free = fx_host_free,
        .copy = fx_copy,
        .copy_wait = fx_copy_wait,
    };
    if (cca_upstream_custom_create(&ops, NULL, &u) != CCA_OK) {
        cca_upstream_destroy(fx.inner);
        return NULL;
    }
    return u;
}

/* ---- the threads ----------------------------------------------------------------------------- */

typedef struct worker {
    int id;
    cca_allocator *a;
    cca_domain *common; /* NULL: greedy, no domains */
    ccai_rng rng;
    slot s[SLOTS];
    cca_domain *own;
    bool asleep;         /* own is asleep, as of whole op number known_gen */
    unsigned known_gen;  /* run.gen when `asleep` was learned (~0u: never) */
    size_t recorded;     /* ... with this many live blocks recorded (a wake reports them, freed or not) */
    bool recorded_known; /* ... by its own sleep, no whole op since */
    unsigned discards;   /* run.discards when its slots were last unmarked */
    uint32_t unmarked;   /* slots whose bytes are not marked (their domain asleep since the alloc) */
    int own_gen;
    uint64_t allocs, frees, ooms, own_allocs, wholes, wholes_ok;
} worker;

static struct {
    int tenants;
    cca_allocator *a[2];
    cca_upstream *u;
    cca_domain *common[2];
    bool expandable;
    size_t capacity;
    pthread_barrier_t meet;
    /* The whole ops (cca_sleep, cca_wake) hold `whole` to write; a thread
     * holds it to read while it touches a block's bytes or reads what it
     * knows of a domain's state. Under the write lock: gen counts the
     * whole ops, asleep[n] is tenant n's default and common domains' state
     * (only whole ops change them), discards the whole sleeps with
     * CCA_SLEEP_DISCARD. */
    pthread_rwlock_t whole;
    unsigned gen, discards;
    bool asleep[2][2];
    worker w[THREADS];
    const char *name;
} run;

/* ---- the log sink: one line per OOM ---------------------------------------------------------- */

static atomic_ulong oom_lines;
static atomic_bool sink_calls; /* while the threads run: the sink calls into the allocators */

/* A line reaches the sink with no ccalloc lock held, and the sink may call
 * the library (ccalloc.h, cca_set_log_callback): a call back into each
 * allocator succeeds, and leaves the thread's message as it was. */
static void sink_line(void *user, const char *line) {
    (void)user;
    if (strncmp(line, "out of memory: ", 15) == 0)
        atomic_fetch_add(&oom_lines, 1);
    for (int n = 0; atomic_load(&sink_calls) && n < run.tenants; n++) {
        char before[512];
        snprintf(before, sizeof before, "%s", cca_last_error());
        cca_stats st;
        cca_get_stats(run.a[n], &st); /* refused (zeros, a message) if a lock were held */
        CHECK(strcmp(cca_last_error(), before) == 0, "%s: the sink's call into allocator %d: '%s' (the line: %s)",
              run.name, n, cca_last_error(), line);
    }
}

/* Under TSan every byte sleep and wake copy is checked: small own blocks. */
#if defined(__SANITIZE_THREAD__)
#define OWN_BLOCK_MAX (1 * MIB)
#else
#define OWN_BLOCK_MAX (8 * MIB)
#endif

#define ST(x) (1u << (x))

static size_t draw_size(ccai_rng *r, size_t capacity) {
    uint64_t k = ccai_rng_below(r, 100);
    if (k < 70)
        return 2 + (size_t)ccai_rng_below(r, 256 * 1024); /* two bytes at least: the first and the last checked */
    if (k < 92)
        return MIB + (size_t)ccai_rng_below(r, 7 * MIB);
    return 8 * MIB + (size_t)ccai_rng_below(r, capacity < 256 * MIB ? 12 * MIB : 40 * MIB);
}

static void tag(worker *w, int step, char *buf, size_t len) {
    snprintf(buf, len, "tag: thread %d step %d", w->id, step);
    cca_set_error(CCA_OK, "%s", buf);
}

/* st is one of `allowed`; a success kept the tag, a failure says its own. */
static bool answer(worker *w, cca_status st, unsigned allowed, const char *tagged, const char *what) {
    const char *msg = cca_last_error();
    if (!(ST(st) & allowed)) {
        fail("%s: thread %d: %s: %s (%s)", run.name, w->id, what, cca_status_string(st), msg);
        return false;
    }
    if (st == CCA_OK) {
        CHECK(strcmp(msg, tagged) == 0, "%s: thread %d: %s succeeded but the message changed to '%s'", run.name, w->id,
              what, msg);
        return true;
    }
    CHECK(msg[0] && !strstr(msg, "tag: "), "%s: thread %d: %s: %s without a message of its own ('%s')", run.name, w->id,
          what, cca_status_string(st), msg);
    for (int t = 0; t < THREADS; t++) {
        char other[40];
        snprintf(other, sizeof other, "failure (thread %d)", t);
        CHECK(t == w->id || !strstr(msg, other), "%s: thread %d: %s failed with thread %d's message: '%s'", run.name,
              w->id, what, t, msg);
    }
    cca_set_error(CCA_OK, "%s", tagged);
    return true;
}

/* Whether slot s's domain is asleep, as w knows it (hold: read lock). */
static bool slot_asleep(const worker *w, const slot *s) {
    return s->dom == 2 ? w->asleep : run.asleep[w->id % run.tenants][s->dom];
}

/* Under hold: a marked block of an awake domain has its bytes (an asleep
 * domain's pages are unmapped: a touch faults). */
static void check_bytes(worker *w, slot *s, const char *what) {
    int k = (int)(s - w->s);
    if (s->p && !(w->unmarked & (1u << k)) && !slot_asleep(w, s))
        CHECK(ta_marked(s, w->id, k), "%s: thread %d: block %p of %zu bytes lost its bytes (%s)", run.name, w->id,
              (void *)s->p, s->size, what);
}

/* Under hold: mark the unmarked blocks of awake domains. */
static void remark(worker *w) {
    for (int k = 0; k < SLOTS; k++)
        if ((w->unmarked & (1u << k)) && w->s[k].p && !slot_asleep(w, &w->s[k])) {
            ta_mark(&w->s[k], w->id, k);
            w->unmarked &= ~(1u << k);
        }
}

/* The read lock; what w knew of its own domain is learned again when a
 * whole op came since (its bytes unmarked when one discarded). Returns the
 * whole op count: the same at the next hold, no whole op came between. */
static unsigned hold(worker *w) {
    pthread_rwlock_rdlock(&run.whole);
    if (w->known_gen != run.gen && w->own) { /* the thread's message kept for the answer to come */
        char msg[512];
        snprintf(msg, sizeof msg, "%s", cca_last_error());
        cca_domain_stats ds = {0};
        CHECK(cca_get_domain_stats(w->a, w->own, &ds) == CCA_OK, "%s: thread %d: cca_get_domain_stats: %s", run.name,
              w->id, cca_last_error());
        cca_set_error(CCA_OK, "%s", msg);
        w->asleep = ds.asleep;
    }
    if (w->known_gen != run.gen) {
        w->known_gen = run.gen;
        w->recorded_known = false;
    }
    if (w->discards != run.discards) { /* contents undefined after the wake: mark again */
        for (int k = 0; k < SLOTS; k++)
            w->unmarked |= w->s[k].p ? 1u << k : 0;
        w->discards = run.discards;
    }
    remark(w);
    return run.gen;
}

static void unhold(void) {
    pthread_rwlock_unlock(&run.whole);
}

static void free_slot(worker *w, slot *s, const char *tagged) {
    hold(w);
    check_bytes(w, s, "at its free");
    unhold();
    /* the fallback synchronize may fail: the pointer is consumed all the same */
    answer(w, cca_free(w->a, s->p), ST(CCA_OK) | ST(CCA_ERR_UPSTREAM), tagged, "cca_free");
    w->frees++;
    w->unmarked &= ~(1u << (s - w->s));
    s->p = NULL;
}

/* The requested bytes of the thread's live blocks in its own domain. */
static size_t own_requested(const worker *w) {
    size_t req = 0;
    for (int k = 0; k < SLOTS; k++)
        req += w->s[k].p && w->s[k].dom == 2 ? w->s[k].size : 0;
    return req;
}

static cca_domain_stats own_stats(worker *w, const char *tagged) {
    cca_domain_stats ds = {0};
    answer(w, cca_get_domain_stats(w->a, w->own, &ds), ST(CCA_OK), tagged, "cca_get_domain_stats");
    return ds;
}

/* A new own domain, awake, with an arena: refused as asleep only when a
 * whole sleep came between (it sleeps every domain there is). */
static void own_domain_create(worker *w, const char *tagged) {
    char name[32];
    snprintf(name, sizeof name, "t%d gen %d", w->id, ++w->own_gen);
    unsigned gen = hold(w);
    unhold();
    answer(w, cca_domain_create(w->a, name, &w->own), ST(CCA_OK), tagged, "cca_domain_create");
    w->own_allocs = 0;
    w->known_gen = ~0u; /* a new domain: learned at the next hold */
    cca_status st = cca_domain_reserve(w->a, w->own, 4 * MIB);
    bool exact = hold(w) == gen;
    answer(w, st, ST(CCA_OK) | ST(CCA_ERR_OUT_OF_MEMORY) | ST(CCA_ERR_UPSTREAM) | (exact ? 0 : ST(CCA_ERR_ASLEEP)),
           tagged, "cca_domain_reserve");
    CHECK(!exact || !w->asleep, "%s: thread %d: a new domain asleep with no whole sleep", run.name, w->id);
    unhold();
}

/* Free the own domain's blocks (FORCE: or leave them to the release),
 * then release it or destroy it (and make a new one, with an arena); a
 * released one may get an arena again. A refusal keeps the domain, as it
 * was but for what went: with FORCE its blocks went when its requested
 * bytes did (a synchronize refused first released nothing). */
static void own_domain_release(worker *w, bool destroy, bool force, const char *tagged) {
    for (int k = 0; k < SLOTS && !force; k++)
        if (w->s[k].p && w->s[k].dom == 2)
            free_slot(w, &w->s[k], tagged);
    unsigned allowed = ST(CCA_OK) | ST(CCA_ERR_UPSTREAM) | ST(CCA_ERR_LIVE_BLOCKS),
             flags = force ? CCA_DOMAIN_FORCE : 0;
    cca_domain_report rep = {0};
    unsigned gen = hold(w);
    unhold();
    cca_status st =
        destroy ? cca_domain_destroy(w->a, w->own, flags, &rep) : cca_domain_release(w->a, w->own, flags, &rep);
    answer(w, st, allowed, tagged, destroy ? "cca_domain_destroy" : "cca_domain_release");
    bool dropped = st == CCA_OK;
    if (!dropped) {
        cca_domain_stats ds = own_stats(w, tagged);
        dropped = ds.requested_bytes == 0;
    }
    for (int k = 0; k < SLOTS && dropped; k++)
        if (w->s[k].p && w->s[k].dom == 2)
            w->s[k].p = NULL, w->unmarked &= ~(1u << k); /* released with the domain: no free */
    if (st == CCA_OK && destroy) {
        w->own = NULL;
        own_domain_create(w, tagged);
        return;
    }
    /* a released domain is awake, unless a whole sleep came since */
    w->known_gen = ~0u;
    bool exact = hold(w) == gen;
    cca_domain_stats ds = own_stats(w, tagged);
    CHECK(st != CCA_OK || !exact || (ds.reserved_bytes == 0 && ds.allocated_bytes == 0 && !ds.asleep),
          "%s: thread %d: a released domain holds %zu bytes (asleep %d)", run.name, w->id, ds.reserved_bytes,
          ds.asleep);
    size_t req = own_requested(w);
    CHECK(ds.requested_bytes == req, "%s: thread %d: after %s, its domain holds %zu requested bytes, not %zu", run.name,
          w->id, cca_status_string(st), ds.requested_bytes, req);
    bool asleep = w->asleep;
    unhold();
    if (st == CCA_OK && ccai_rng_below(&w->rng, 2)) {
        st = cca_domain_reserve(w->a, w->own, 2 * MIB);
        exact = hold(w) == gen;
        unhold();
        answer(w, st,
               ST(CCA_OK) | ST(CCA_ERR_OUT_OF_MEMORY) | ST(CCA_ERR_UPSTREAM) |
                   (exact && !asleep ? 0 : ST(CCA_ERR_ASLEEP)),
               tagged, "cca_domain_reserve again");
    }
}

/* Sleep the own domain (awake), or sleep it again or wake it (asleep): its
 * state afterwards as the answer says, its host copy as large as its live
 * bytes (rounded to CCA_GRANULARITY) while asleep and gone once awake, its
 * live blocks as they were, their bytes back once awake. A whole op that
 * came between (exact false) may have slept or woken it on its own: the
 * answer is one of the same, the state learned. */
static void step_sleep(worker *w, const char *tagged) {
    cca_sleep_report r;
    size_t blocks = 0, copied = 0; /* the live blocks a sleep copies, and their bytes */
    for (int k = 0; k < SLOTS; k++)
        if (w->s[k].p && w->s[k].dom == 2)
            blocks++, copied += (w->s[k].size + CCA_GRANULARITY - 1) / CCA_GRANULARITY * CCA_GRANULARITY;
    unsigned gen = hold(w);
    cca_domain_stats before = own_stats(w, tagged), after;
    bool was = w->asleep, recorded = w->recorded_known, again = was && ccai_rng_below(&w->rng, 3) == 0;
    unhold();
    cca_status st = !was    ? cca_domain_sleep(w->a, w->own, 0, &r)
                    : again ? cca_domain_sleep(w->a, w->own, CCA_SLEEP_DISCARD, &r)
                            : cca_domain_wake(w->a, w->own, &r);
    w->known_gen = ~0u;          /* learned at the hold */
    bool exact = hold(w) == gen; /* before the answer: a whole op between widens what it may be */
    if (!was && !run.expandable)
        answer(w, st, ST(CCA_ERR_UPSTREAM), tagged, "cca_domain_sleep over classic segments");
    else if (!was)
        answer(w, st, ST(CCA_OK) | ST(CCA_ERR_UPSTREAM) | ST(CCA_ERR_OUT_OF_MEMORY) | ST(CCA_ERR_NOT_READY), tagged,
               "cca_domain_sleep");
    else if (again) /* asleep already: CCA_OK, or a refused unmap again; a whole wake between: a sleep's answers */
        answer(w, st,
               ST(CCA_OK) | ST(CCA_ERR_UPSTREAM) | (exact ? 0 : ST(CCA_ERR_OUT_OF_MEMORY) | ST(CCA_ERR_NOT_READY)),
               tagged, "cca_domain_sleep, asleep");
    else
        answer(w, st, ST(CCA_OK) | ST(CCA_ERR_UPSTREAM) | ST(CCA_ERR_OUT_OF_MEMORY), tagged, "cca_domain_wake");
    after = own_stats(w, tagged);
    if (!was) {
        if (!run.expandable) {
            unhold();
            return;
        }
        CHECK(!exact || w->asleep == (st == CCA_OK) || (w->asleep && st == CCA_ERR_UPSTREAM),
              "%s: thread %d: cca_domain_sleep answered %s and left the domain %s", run.name, w->id,
              cca_status_string(st), w->asleep ? "asleep" : "awake");
        w->recorded = blocks;
        w->recorded_known = exact && st == CCA_OK;
        CHECK(!exact || (w->asleep ? after.host_bytes >= copied &&
                                         (st != CCA_OK || (r.bytes_copied == copied && r.blocks == blocks))
                                   : after.host_bytes == 0),
              "%s: thread %d: cca_domain_sleep (%s): %zu host bytes, %zu copied, for %zu live bytes", run.name, w->id,
              cca_status_string(st), after.host_bytes, r.bytes_copied, copied);
    } else if (again) {
        for (int k = 0; k < SLOTS && !exact; k++) /* a whole wake came first: it discarded an awake domain */
            w->unmarked |= w->s[k].p && w->s[k].dom == 2 ? 1u << k : 0;
        remark(w);
        CHECK(!exact ||
                  (after.asleep && after.host_bytes == before.host_bytes && r.bytes_copied == 0 && r.host_bytes == 0),
              "%s: thread %d: a sleep of an asleep domain: asleep %d, %zu host bytes (%zu before), %zu copied",
              run.name, w->id, after.asleep, after.host_bytes, before.host_bytes, r.bytes_copied);
        w->recorded_known = exact && recorded;
    } else {
        CHECK(!exact || w->asleep == (st != CCA_OK),
              "%s: thread %d: cca_domain_wake answered %s and left the domain %s", run.name, w->id,
              cca_status_string(st), w->asleep ? "asleep" : "awake");
        /* the copy and the blocks recorded known when its own sleep put it
         * to sleep (a whole sleep may have discarded) */
        CHECK(!exact || (st == CCA_OK ? after.host_bytes == 0 &&
                                            (!recorded || (r.bytes_copied == copied && r.blocks == w->recorded))
                                      : after.host_bytes == before.host_bytes),
              "%s: thread %d: cca_domain_wake (%s): %zu host bytes (%zu before), %zu bytes copied back of %zu, %zu "
              "blocks woken of %zu recorded",
              run.name, w->id, cca_status_string(st), after.host_bytes, before.host_bytes, r.bytes_copied, copied,
              r.blocks, w->recorded);
        w->recorded_known = exact && recorded && st != CCA_OK;
        for (int k = 0; k < SLOTS; k++)
            if (w->s[k].dom == 2)
                check_bytes(w, &w->s[k], "after sleep and wake");
    }
    unhold();
    /* whatever the answer, the domain's live blocks are what they were (its
     * pending frees may have completed; a whole op changes no block) */
    CHECK(after.requested_bytes == before.requested_bytes && after.allocated_bytes <= before.allocated_bytes &&
              after.active_blocks <= before.active_blocks,
          "%s: thread %d: sleep or wake changed the domain's blocks: %zu requested, %zu allocated in %zu; was %zu, %zu "
          "in %zu",
          run.name, w->id, after.requested_bytes, after.allocated_bytes, after.active_blocks, before.requested_bytes,
          before.allocated_bytes, before.active_blocks);
}

/* The default and the common domain of w's allocator: asleep or not. */
static void whole_states(worker *w, bool out[2], const char *tagged) {
    cca_domain *const d[2] = {NULL, w->common};
    for (int j = 0; j < 2; j++) {
        cca_domain_stats ds = {0};
        if (j == 0 || w->common)
            answer(w, cca_get_domain_stats(w->a, d[j], &ds), ST(CCA_OK), tagged, "cca_get_domain_stats");
        out[j] = ds.asleep;
    }
}

/* cca_sleep (flags 0, or CCA_SLEEP_DISCARD a quarter of the time) while
 * the default domain is awake, else cca_wake (a quarter of the time the
 * other one), under the write lock: no thread touches a block meanwhile,
 * while the others' allocs, frees, sleeps and wakes of their own domains
 * run on. The default and common domains change only here: their states
 * before are as known, and after (ccalloc.h):
 *  - cca_sleep CCA_OK: both asleep; any answer: asleep before, asleep
 *    after; a refusal that woke again what it had put to sleep ("woken
 *    again", the report zeros): as before, unless "could not be";
 *    classic segments: CCA_ERR_UPSTREAM, nothing changed;
 *  - cca_wake CCA_OK: both awake; any answer: awake before, awake after;
 *    a refusal woke in order: the default still asleep, the common too.
 * Own domains may be slept or woken: each thread learns its own at its
 * next hold. */
static void step_whole(worker *w, const char *tagged) {
    const int n = w->id % run.tenants;
    bool before[2], after[2];
    cca_sleep_report r;
    pthread_rwlock_wrlock(&run.whole);
    whole_states(w, before, tagged);
    CHECK(before[0] == run.asleep[n][0] && before[1] == run.asleep[n][1],
          "%s: thread %d: default asleep %d, common %d; the whole ops left %d, %d", run.name, w->id, before[0],
          before[1], run.asleep[n][0], run.asleep[n][1]);
    bool sleep = !before[0] != (ccai_rng_below(&w->rng, 4) == 0);
    unsigned flags = ccai_rng_below(&w->rng, 4) == 0 ? CCA_SLEEP_DISCARD : 0;
    run.gen++;
    cca_status st = sleep ? cca_sleep(w->a, flags, &r) : cca_wake(w->a, &r);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", cca_last_error());
    unsigned allowed = !run.expandable ? (sleep ? ST(CCA_ERR_UPSTREAM) : ST(CCA_OK))
                       : sleep ? ST(CCA_OK) | ST(CCA_ERR_UPSTREAM) | ST(CCA_ERR_OUT_OF_MEMORY) | ST(CCA_ERR_NOT_READY)
                               : ST(CCA_OK) | ST(CCA_ERR_UPSTREAM) | ST(CCA_ERR_OUT_OF_MEMORY);
    answer(w, st, allowed, tagged, sleep ? "cca_sleep" : "cca_wake");
    whole_states(w, after, tagged);
    bool undone = sleep && st != CCA_OK && strstr(msg, "were woken again") && !strstr(msg, "could not be");
    for (int j = 0; j < (w->common ? 2 : 1); j++) {
        const char *name = j ? "common" : "default";
        if (sleep)
            CHECK((st != CCA_OK || after[j]) && (!before[j] || after[j]) && (!undone || after[j] == before[j]) &&
                      (run.expandable || after[j] == before[j]),
                  "%s: thread %d: cca_sleep (%s, flags %u) left the %s domain %s (%s before): '%s'", run.name, w->id,
                  cca_status_string(st), flags, name, after[j] ? "asleep" : "awake", before[j] ? "asleep" : "awake",
                  msg);
        else
            CHECK((st != CCA_OK || !after[j]) && (before[j] || !after[j]),
                  "%s: thread %d: cca_wake (%s) left the %s domain %s (%s before): '%s'", run.name, w->id,
                  cca_status_string(st), name, after[j] ? "asleep" : "awake", before[j] ? "asleep" : "awake", msg);
    }
    CHECK(sleep || st == CCA_OK || !(before[0] && after[0]) || after[1] == before[1],
          "%s: thread %d: cca_wake (%s) woke the common domain, not the default before it: '%s'", run.name, w->id,
          cca_status_string(st), msg);
    CHECK(!undone || (r.blocks == 0 && r.bytes_copied == 0 && r.bytes_unmapped == 0 && r.host_bytes == 0),
          "%s: thread %d: a refused cca_sleep reports %zu blocks, %zu bytes unmapped", run.name, w->id, r.blocks,
          r.bytes_unmapped);
    run.asleep[n][0] = after[0], run.asleep[n][1] = after[1];
    run.discards += sleep && (flags & CCA_SLEEP_DISCARD);
    w->wholes++;
    w->wholes_ok += st == CCA_OK;
    pthread_rwlock_unlock(&run.whole);
}

/* A request into slot k: its answer as the domain's state allows. */
static void step_alloc(worker *w, slot *s, int k, const char *tagged) {
    slot got = {.size = draw_size(&w->rng, run.capacity)};
    void *p;
    unsigned gen = hold(w);
    const int n = w->id % run.tenants;
    const bool known[3] = {run.asleep[n][0], run.asleep[n][1], w->asleep}; /* each domain's state */
    unhold();
    cca_status st = ta_alloc(&w->rng, w->a, (cca_domain *const[3]){NULL, w->common, w->own}, OWN_BLOCK_MAX, &got, &p);
    got.p = p;
    bool exact = hold(w) == gen, asleep = known[got.dom];
    unhold();
    unsigned allowed = !exact   ? ST(CCA_OK) | ST(CCA_ERR_OUT_OF_MEMORY) | ST(CCA_ERR_ASLEEP)
                       : asleep ? ST(CCA_ERR_ASLEEP)
                                : ST(CCA_OK) | ST(CCA_ERR_OUT_OF_MEMORY);
    if (!answer(w, st, allowed, tagged, exact && asleep ? "cca_alloc_in an asleep domain" : "cca_alloc"))
        return;
    CHECK((st == CCA_OK) == (got.p != NULL), "%s: thread %d: %s with pointer %p", run.name, w->id,
          cca_status_string(st), (void *)got.p);
    w->ooms += st == CCA_ERR_OUT_OF_MEMORY;
    if (st != CCA_OK || !got.p)
        return;
    w->allocs++;
    w->own_allocs += got.dom == 2;
    *s = got;
    answer(w, cca_block_size(w->a, s->p, &s->held), ST(CCA_OK), tagged, "cca_block_size");
    w->unmarked |= 1u << k; /* marked at the hold, its domain awake (now, or at a later hold) */
    hold(w);
    unhold();
}

static void step(worker *w, int i) {
    uint64_t op = ccai_rng_below(&w->rng, 100);
    int k = (int)ccai_rng_below(&w->rng, SLOTS);
    slot *s = &w->s[k];
    char tagged[64];
    tag(w, i, tagged, sizeof tagged);
    unsigned released = ST(CCA_OK) | ST(CCA_ERR_UPSTREAM) | ST(CCA_ERR_NOT_READY);
    if (op < 50 && s->p) {
        free_slot(w, s, tagged);
    } else if (op < 50) {
        step_alloc(w, s, k, tagged);
    } else if (op < 54 && s->p) {
        answer(w, cca_record_stream(w->a, s->p, (cca_stream)7), ST(CCA_OK), tagged, "cca_record_stream");
    } else if (op < 58) {
        answer(w, cca_trim(w->a, (size_t)ccai_rng_below(&w->rng, 64 * MIB), NULL), released, tagged, "cca_trim");
    } else if (op < 61) {
        cca_release_report r;
        answer(w, cca_empty_cache(w->a, &r), released, tagged, "cca_empty_cache");
    } else if (op < 64) {
        cca_stats st;
        cca_get_stats(w->a, &st);
        CHECK((st.allocated_bytes <= st.reserved_bytes || st.asleep_domains > 0) && st.reserved_bytes <= run.capacity &&
                  st.allocated_bytes <= st.allocated_bytes_peak,
              "%s: an inconsistent stats snapshot", run.name);
    } else if (op < 66) {
        answer(w, cca_check_invariants(w->a), ST(CCA_OK), tagged, "cca_check_invariants");
    } else if (op < 69 && w->common) {
        hold(w); /* no whole op while it looks */
        cca_domain_stats ds = own_stats(w, tagged);
        size_t req = own_requested(w);
        CHECK(ds.requested_bytes == req && ds.alloc_calls == w->own_allocs && (bool)ds.asleep == w->asleep,
              "%s: thread %d: its domain holds %zu requested bytes in %" PRIu64 " allocs (asleep %d); it made %zu in "
              "%" PRIu64 " (asleep %d)",
              run.name, w->id, ds.requested_bytes, ds.alloc_calls, ds.asleep, req, w->own_allocs, w->asleep);
        unhold();
    } else if (op < 71 && w->common) {
        own_domain_release(w, ccai_rng_below(&w->rng, 2), ccai_rng_below(&w->rng, 3) == 0, tagged);
    } else if (op < 76 && w->common) {
        step_sleep(w, tagged);
    } else if (op == 76 && ccai_rng_below(&w->rng, WHOLE_ONE_IN) == 0) {
        step_whole(w, tagged);
    } else if (!s->p) {
        step_alloc(w, s, k, tagged);
    }
}

/* ---- the audit, faults off, every thread stopped --------------------------------------------- */

static cca_stats audit_tenant(int n, int round) {
    cca_stats st;
    TA_AUDIT(st, run.name, round, run.a[n], run.common[n], run.w, n, run.tenants);
    if (!run.common[n])
        return st;
    for (int t = n; t < THREADS; t += run.tenants) { /* each own domain as its thread knows it */
        worker *w = &run.w[t];
        cca_domain_stats ds;
        cca_get_domain_stats(run.a[n], w->own, &ds);
        size_t own_req = own_requested(w);
        if (w->known_gen != run.gen) /* a whole op since it last looked: its state unknown to it */
            w->asleep = ds.asleep, w->known_gen = run.gen, w->recorded_known = false;
        CHECK(ds.requested_bytes == own_req && (bool)ds.asleep == w->asleep,
              "%s: round %d: thread %d's domain holds %zu requested (asleep %d), not %zu (asleep %d)", run.name, round,
              t, ds.requested_bytes, ds.asleep, own_req, w->asleep);
    }
    cca_domain *const d[2] = {NULL, run.common[n]};
    for (int j = 0; j < (run.common[n] ? 2 : 1); j++) { /* the default and common domains as the whole ops left them */
        cca_domain_stats ds;
        cca_get_domain_stats(run.a[n], d[j], &ds);
        CHECK((bool)ds.asleep == run.asleep[n][j], "%s: round %d: the %s domain of allocator %d asleep %d, not %d",
              run.name, round, j ? "common" : "default", n, ds.asleep, run.asleep[n][j]);
    }
    return st;
}

/* Faults off: every allocator's accounts, the device's, and its host
 * memory: the sleeping domains' copies plus the chunks refused host_frees
 * kept; the wrapper counts as the device does. Faults back on but after
 * the last round. */
static void audit(int round) {
    atomic_store(&fx.on, false);
    ta_held h = {0};
    size_t host = 0;
    for (int n = 0; n < run.tenants; n++) {
        cca_stats st = audit_tenant(n, round);
        ta_hold(&h, &st);
        host += st.host_bytes;
    }
    cca_upstream_stats us, ws;
    cca_upstream_get_stats(fx.inner, &us);
    cca_upstream_get_stats(run.u, &ws);
    ta_check_device(run.name, round, &us, &h);
    pthread_mutex_lock(&fx.lock);
    size_t kept = fx.kept_bytes;
    pthread_mutex_unlock(&fx.lock);
    CHECK(us.host_bytes_in_use == host + kept,
          "%s: round %d: the device holds %zu host bytes; the allocators %zu, refused host_frees kept %zu", run.name,
          round, us.host_bytes_in_use, host, kept);
    CHECK(ws.bytes_in_use == us.bytes_in_use && ws.vm_mapped_bytes == us.vm_mapped_bytes &&
              ws.vm_reserved_bytes == us.vm_reserved_bytes && ws.allocations == us.allocations,
          "%s: round %d: the wrapper counts %zu bytes in use, the device %zu", run.name, round, ws.bytes_in_use,
          us.bytes_in_use);
    atomic_store(&fx.on, (round + 1) * ROUND < STEPS); /* off for the threads' last frees */
}

/* With faults off: wake the own domain (on a small device, with its blocks
 * freed first if need be), free everything, destroy the domain. */
static void worker_finish(worker *w) {
    char tagged[64];
    tag(w, STEPS, tagged, sizeof tagged);
    hold(w); /* the whole ops are over: what it knows is exact */
    unhold();
    if (w->asleep) {
        cca_sleep_report r;
        cca_status st = cca_domain_wake(w->a, w->own, &r);
        if (st == CCA_ERR_OUT_OF_MEMORY) {
            cca_set_error(CCA_OK, "%s", tagged);
            for (int k = 0; k < SLOTS; k++)
                if (w->s[k].p && w->s[k].dom == 2)
                    free_slot(w, &w->s[k], tagged);
            st = cca_domain_wake(w->a, w->own, &r);
        }
        answer(w, st, ST(CCA_OK), tagged, "cca_domain_wake, faults off");
        w->asleep = false;
    }
    for (int k = 0; k < SLOTS; k++)
        if (w->s[k].p)
            free_slot(w, &w->s[k], tagged);
    if (w->own)
        answer(w, cca_domain_destroy(w->a, w->own, 0, NULL), ST(CCA_OK), tagged, "cca_domain_destroy, faults off");
}

static void *worker_main(void *arg) {
    worker *w = arg;
    char tagged[64];
    tag(w, -1, tagged, sizeof tagged);
    fx_thread = w->id; /* its calls may fail from now on */
    ccai_rng_seed(&fx_rng, ccai_rng_next(&w->rng));
    if (w->common)
        own_domain_create(w, tagged);
    for (int i = 0; i < STEPS; i++) {
        step(w, i);
        ta_meet(&run.meet, i, ROUND, audit);
    }
    worker_finish(w);
    return NULL;
}

static void run_one(const char *name, const char *conf, size_t capacity, int backing, int tenants, uint64_t seed) {
    int failed_before = atomic_load(&failures);
    cca_config cfg;
    cca_config_default(&cfg);
    memset(&run, 0, sizeof run);
    for (int k = 0; k < FX_KINDS; k++)
        atomic_store(&fx.calls[k], 0), atomic_store(&fx.injected[k], 0);
    fx.nkept = fx.kept_bytes = 0;
    atomic_store(&fx.on, false);
    run.name = name, run.capacity = capacity, run.tenants = tenants;
    if (cca_config_parse(&cfg, conf) != CCA_OK || !(run.u = fx_create(capacity, backing))) {
        fail("%s: setup: %s", name, cca_last_error());
        return;
    }
    run.expandable = cfg.expandable != 0;
    bool greedy = cfg.policy == CCA_POLICY_GREEDY;
    for (int n = 0; n < tenants; n++) {
        if (cca_create(&cfg, run.u, &run.a[n]) != CCA_OK)
            fail("%s: setup: %s", name, cca_last_error());
        else if (!greedy && cca_domain_create(run.a[n], "common", &run.common[n]) != CCA_OK)
            fail("%s: common domain: %s", name, cca_last_error());
    }
    if (atomic_load(&failures) != failed_before)
        return; /* setup failed */
    atomic_store(&fx.on, true);
    pthread_barrier_init(&run.meet, NULL, THREADS);
    pthread_rwlockattr_t rwa; /* a whole op waits for the holds in progress only */
    pthread_rwlockattr_init(&rwa);
    pthread_rwlockattr_setkind_np(&rwa, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&run.whole, &rwa);
    pthread_rwlockattr_destroy(&rwa);
    atomic_store(&sink_calls, true);
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) { /* thread t uses allocator t % tenants */
        worker *w = &run.w[t];
        *w = (worker){.id = t, .a = run.a[t % tenants], .common = run.common[t % tenants], .known_gen = ~0u};
        ccai_rng_seed(&w->rng, seed * 100 + (uint64_t)t);
        pthread_create(&th[t], NULL, worker_main, w);
    }
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    pthread_barrier_destroy(&run.meet);
    pthread_rwlock_destroy(&run.whole);
    atomic_store(&sink_calls, false);
    atomic_store(&fx.on, false);
    uint64_t allocs = 0, ooms = 0, counted_ooms = 0, injected = 0, wholes = 0, wholes_ok = 0;
    for (int t = 0; t < THREADS; t++)
        allocs += run.w[t].allocs, ooms += run.w[t].ooms, wholes += run.w[t].wholes, wholes_ok += run.w[t].wholes_ok;
    for (int n = 0; n < tenants; n++) {
        cca_allocator *a = run.a[n];
        /* every block freed: a whole sleep's default and common domains wake with nothing to map */
        CHECK(cca_wake(a, NULL) == CCA_OK, "%s: the last wake: %s", name, cca_last_error());
        if (run.common[n] && cca_domain_destroy(a, run.common[n], 0, NULL) != CCA_OK)
            fail("%s: destroying the common domain: %s", name, cca_last_error());
        CHECK(cca_empty_cache(a, NULL) == CCA_OK, "%s: empty cache: %s", name, cca_last_error());
        cca_stats st;
        cca_get_stats(a, &st);
        CHECK(st.active_blocks == 0 && st.allocated_bytes == 0 && st.reserved_bytes == 0 && st.segments == 0 &&
                  st.host_bytes == 0,
              "%s: after the threads: %zu blocks, %zu reserved, %zu host bytes", name, st.active_blocks,
              st.reserved_bytes, st.host_bytes);
        CHECK(cca_check_invariants(a) == CCA_OK, "%s: %s", name, cca_last_error());
        counted_ooms += st.ooms;
        CHECK(cca_destroy(a) == CCA_OK, "%s: destroy: %s", name, cca_last_error());
    }
    CHECK(counted_ooms == ooms, "%s: %" PRIu64 " ooms counted, %" PRIu64 " seen", name, counted_ooms, ooms);
    for (size_t k = 0; k < fx.nkept; k++)
        CHECK(cca_upstream_host_free(fx.inner, fx.kept[k].p, fx.kept[k].size) == CCA_OK,
              "%s: a chunk a refused host_free kept: %s", name, cca_last_error());
    cca_upstream_stats us;
    cca_upstream_get_stats(fx.inner, &us);
    CHECK(us.bytes_in_use == 0 && us.allocations == 0 && us.vm_mapped_bytes == 0 && us.vm_reserved_bytes == 0 &&
              us.host_bytes_in_use == 0,
          "%s: the device still holds %zu bytes (%zu address space, %zu host) after destroy", name, us.bytes_in_use,
          us.vm_reserved_bytes, us.host_bytes_in_use);
    char counts[512];
    size_t used = 0;
    for (int k = 0; k < FX_KINDS; k++) {
        unsigned long n = atomic_load(&fx.injected[k]);
        injected += n;
        if (n && used < sizeof counts)
            used += (size_t)snprintf(counts + used, sizeof counts - used, " %s %lu/%lu", fx_names[k], n,
                                     atomic_load(&fx.calls[k]));
    }
    cca_upstream_destroy(run.u);
    cca_upstream_destroy(fx.inner);
    printf("threads_faults [%s]: %" PRIu64 " allocs, %" PRIu64 " ooms, %" PRIu64 " whole sleeps and wakes (%" PRIu64
           " CCA_OK), %" PRIu64 " injected:%s\n",
           name, allocs, ooms, wholes, wholes_ok, injected, used ? counts : " none");
}

int main(int argc, char **argv) {
    uint64_t seed = SEED;
    for (int i = 1; i < argc; i += 2) {
        char end;
        bool ok = i + 1 < argc;
        if (ok && strcmp(argv[i], "--seed") == 0)
            ok = sscanf(argv[i + 1], "%" SCNu64 "%c", &seed, &end) == 1;
        else if (ok && strcmp(argv[i], "--permille") == 0)
            ok = sscanf(argv[i + 1], "%u%c", &fx_permille, &end) == 1 && fx_permille <= 1000;
        else
            ok = false;
        if (!ok) {
            fprintf(stderr, "usage: threads_faults [--seed N] [--permille P]\n");
            return 2;
        }
    }
    cca_set_log_callback(sink_line, NULL);
    static const struct {
        const char *name, *conf;
        size_t capacity;
        int backing, tenants;
    } runs[] = {
        {"classic", "expandable:0", 1024 * MIB, CCA_VM_WHOLE_MAPS, 1},
        {"expandable", "expandable:1", 1024 * MIB, CCA_VM_WHOLE_MAPS, 1},
        {"classic, small device", "expandable:0", 48 * MIB, CCA_VM_WHOLE_MAPS, 1},
        {"expandable, small device", "expandable:1", 48 * MIB, CCA_VM_WHOLE_MAPS, 1},
        {"expandable over pages, small device", "expandable:1", 48 * MIB, CCA_VM_PAGES, 1},
        {"expandable, hold_peak, small device", "expandable:1,hold_peak:1", 48 * MIB, CCA_VM_WHOLE_MAPS, 1},
        {"greedy, small device", "policy:greedy,greedy_bytes:40M,expandable:0", 48 * MIB, CCA_VM_WHOLE_MAPS, 1},
        {"greedy-expandable, small device", "policy:greedy,greedy_bytes:40M,expandable:1", 48 * MIB, CCA_VM_WHOLE_MAPS,
         1},
        {"expandable, two tenants of a small device", "expandable:1", 64 * MIB, CCA_VM_PAGES, 2},
    };
    uint64_t ooms = 0;
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        run_one(runs[r].name, runs[r].conf, runs[r].capacity, runs[r].backing, runs[r].tenants, seed + r);
        for (int t = 0; t < THREADS; t++)
            ooms += run.w[t].ooms;
    }
    CHECK(atomic_load(&oom_lines) == ooms, "%lu OOM lines logged for %" PRIu64 " OOMs", atomic_load(&oom_lines), ooms);
    cca_set_log_callback(NULL, NULL);
    if (failures)
        fprintf(stderr, "threads_faults: %d checks failed\n", failures);
    return failures != 0;
}
