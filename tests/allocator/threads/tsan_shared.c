/*
 * tsan_shared.c — allocator/src/support/lock.c, fork.c: shared allocators, held events and everything around them
 * at once, under ThreadSanitizer (and checked exactly in every build).
 *
 * What tsan_stress and threads_api leave out, and this program adds:
 *   - events that are really held: the simulated device completes an event
 *     the moment it is recorded, so no freed block ever waits there. Here a
 *     custom upstream wraps the simulated device and holds each event until
 *     a "device" thread completes it (an epoch counter it advances every
 *     few hundred microseconds, as a GPU finishes queued work); synchronize
 *     completes everything recorded before it. Pending frees, their
 *     completion on the next alloc, trim's NOT_READY and domain releases
 *     finding pending blocks all race the other calls;
 *   - every byte of every block: each block is filled whole with a pattern
 *     of its own (thread, slot, generation) and read back whole before it is
 *     freed, so two threads handed overlapping memory, or a block released
 *     under its owner, fail the check even where TSan sees no race (the
 *     allocator's locks order the accesses, not the owners');
 *   - two allocators on one upstream (tenants) while a third thread creates
 *     and destroys more allocators on it, each with blocks of its own, and
 *     a max_reserved cap that puts every allocator into the OOM retry path
 *     concurrently (the device is small too);
 *   - every writer into open_memstream (cca_write_snapshot_json,
 *     cca_write_snapshot_torch, cca_stats_write_json,
 *     cca_domain_stats_write_json), the result checked for its frame;
 *   - cca_set_log_callback swapped by one thread while the others log OOM
 *     lines; each OOM logs one line to whichever sink is in place;
 *   - cca_plug_alloc / cca_plug_free from every worker on two plug devices,
 *     each worker now and then with a current domain of its own on one of
 *     them (cca_plug_set_domain), made, set, set back and destroyed while
 *     the others allocate in theirs: each block checked to be in the
 *     thread's domain, the domain's counts exact;
 *   - fork() every 20 ms while all of that runs; the child allocates and
 *     frees on each tenant and a plug device, checks the invariants, and
 *     exits 0 when every call held.
 * Three runs: classic segments, expandable segments over pages, and over
 * whole maps (each map one allocation, unmapped whole, cut at 6 MiB: the
 * growth rule's largest map, set through its test hook, pages_rule.h).
 * Each run ends exact: nothing live or pending, nothing reserved, the
 * counters equal what the threads counted, invariants intact, every event
 * destroyed, and the device holding nothing. Exit status 0 = every check
 * held.
 */
#include <ccalloc.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ccai_rng.h"
#include "../../support/pages_rule.h" /* the growth rule's test hook */

#define WORKERS 6
#define TENANTS 2
#define STEPS 1500
#define SLOTS 16
#define PLUG_SLOTS 3
#define MIB ((size_t)1 << 20)

#define THREAD_CHECK_NAME "tsan_shared"
#include "thread_check.h"

/* ---- the device: the simulated one, with events that are held ------------------------------ */

/* An event is its epoch: complete once done >= epoch. */
typedef struct held_device {
    cca_upstream *host;
    atomic_uint_fast64_t recorded, done;
    atomic_long events_live;
    atomic_uint_fast64_t queries_not_ready;
} held_device;

static held_device dev;

static cca_status d_alloc(void *c, size_t size, void **p) {
    return cca_upstream_alloc(((held_device *)c)->host, size, p);
}
static cca_status d_free(void *c, void *p, size_t size) {
    return cca_upstream_free(((held_device *)c)->host, p, size);
}
static cca_status d_mem_info(void *c, size_t *f, size_t *t) {
    return cca_upstream_mem_info(((held_device *)c)->host, f, t);
}
static cca_status d_synchronize(void *c) {
    held_device *d = c;
    atomic_store(&d->done, atomic_load(&d->recorded)); /* every event recorded so far completes */
    return CCA_OK;
}
static cca_status d_event_record(void *c, cca_stream s, void **ev) {
    (void)s;
    held_device *d = c;
    uint64_t *e = malloc(sizeof *e);
    if (!e)
        return CCA_ERR_OUT_OF_MEMORY;
    *e = atomic_fetch_add(&d->recorded, 1) + 1;
    atomic_fetch_add(&d->events_live, 1);
    *ev = e;
    return CCA_OK;
}
static cca_status d_event_query(void *c, void *ev) {
    held_device *d = c;
    if (*(uint64_t *)ev <= atomic_load(&d->done))
        return CCA_OK;
    atomic_fetch_add(&d->queries_not_ready, 1);
    return CCA_ERR_NOT_READY;
}
static cca_status d_event_destroy(void *c, void *ev) {
    atomic_fetch_sub(&((held_device *)c)->events_live, 1);
    free(ev);
    return CCA_OK;
}
static cca_status d_vm_granularity(void *c, size_t *b) {
    return cca_upstream_vm_granularity(((held_device *)c)->host, b);
}
static cca_status d_vm_reserve(void *c, size_t size, void **base) {
    return cca_upstream_vm_reserve(((held_device *)c)->host, size, base);
}
static cca_status d_vm_release(void *c, void *base, size_t size) {
    return cca_upstream_vm_release(((held_device *)c)->host, base, size);
}
static cca_status d_vm_map(void *c, void *addr, size_t size) {
    return cca_upstream_vm_map(((held_device *)c)->host, addr, size);
}
static cca_status d_vm_unmap(void *c, void *addr, size_t size) {
    return cca_upstream_vm_unmap(((held_device *)c)->host, addr, size);
}

static const cca_upstream_ops held_ops = {
    .alloc = d_alloc,
    .free = d_free,
    .mem_info = d_mem_info,
    .synchronize = d_synchronize,
    .event_record = d_event_record,
    .event_query = d_event_query,
    .event_destroy = d_event_destroy,
    .name = "held-events",
    .vm_granularity = d_vm_granularity,
    .vm_reserve = d_vm_reserve,
    .vm_release = d_vm_release,
    .vm_map = d_vm_map,
    .vm_unmap = d_vm_unmap,
};

static atomic_bool stop;
static uint64_t total_ooms; /* every run's, main thread only */

static void nap(long ns) {
    struct timespec t = {0, ns};
    nanosleep(&t, NULL);
}

/* The GPU: completes, every 300 us, the events recorded a period earlier. */
static void *device_main(void *arg) {
    (void)arg;
    uint64_t before = 0;
    while (!atomic_load(&stop)) {
        nap(300000);
        uint64_t now = atomic_load(&dev.recorded);
        if (atomic_load(&dev.done) < before)
            atomic_store(&dev.done, before); /* a synchronize may have gone further: never back */
        before = now;
    }
    return NULL;
}

/* ---- the log sinks --------------------------------------------------------------------------- */

typedef struct sink {
    atomic_bool retired;
    atomic_ulong oom_lines;
} sink;

#define SINKS 256
static sink sinks[SINKS];
static atomic_ulong late_calls;

static void sink_line(void *user, const char *line) {
    sink *s = user;
    if (atomic_load(&s->retired))
        atomic_fetch_add(&late_calls, 1);
    if (strncmp(line, "out of memory: ", 15) == 0)
        atomic_fetch_add(&s->oom_lines, 1);
}

static int sinks_used = 1; /* the logger thread's, read after it joined */

static void *logger_main(void *arg) {
    (void)arg;
    while (!atomic_load(&stop) && sinks_used < SINKS) {
        nap(200000);
        cca_set_log_callback(sink_line, &sinks[sinks_used]);
        atomic_store(&sinks[sinks_used - 1].retired, true); /* replaced: never called again */
        sinks_used++;
    }
    return NULL;
}

static unsigned long oom_lines(void) {
    unsigned long n = 0;
    for (int i = 0; i < SINKS; i++)
        n += atomic_load(&sinks[i].oom_lines);
    return n;
}

/* ---- blocks, filled whole ------------------------------------------------------------------- */

static unsigned char pattern_of(int thread, int slot, uint64_t gen) {
    return (unsigned char)(ccai_splitmix64_mix(((uint64_t)thread << 40) ^ ((uint64_t)slot << 32) ^ gen) | 1);
}

/* ref[b]: the byte b repeated, written once before any thread starts; a
 * block is compared against it a page at a time. */
static unsigned char ref[256][4096];

/* ---- the workers ---------------------------------------------------------------------------- */

typedef struct slot {
    unsigned char *p;
    size_t size;
    int dom; /* 0 default, 1 common, 2 own */
    unsigned char pat;
} slot;

typedef struct worker {
    int id;
    cca_allocator *a;
    cca_domain *common;
    cca_domain *own;
    int own_gen;
    ccai_rng rng;
    slot s[SLOTS];
    slot plug[PLUG_SLOTS];
    int plug_dev[PLUG_SLOTS];
    bool plug_in_dom[PLUG_SLOTS]; /* the block is in this thread's domain on its device */
    cca_domain *plug_dom[2];      /* this thread's current domain on plug device 0 / 1 (NULL: the default) */
    size_t plug_dom_requested[2]; /* bytes this thread asked for in it, live */
    uint64_t plug_dom_allocs[2];  /* its allocations there */
    uint64_t gen, allocs, frees, ooms, own_allocs;
    size_t own_requested;
} worker;

static struct {
    const char *name;
    cca_config cfg;
    size_t map_bytes; /* whole maps: the largest map (0: the rule's own) */
    cca_upstream *up;
    cca_allocator *a[TENANTS];
    cca_domain *common[TENANTS];
    worker w[WORKERS];
    uint64_t churn_allocs, churn_ooms, churn_creates, forks;
} run;

/* An allocator of the run's config on the run's device, its maps cut at
 * run.map_bytes (the default rule's least step and ahead cap kept). */
static cca_status make_allocator(const cca_config *cfg, cca_allocator **a) {
    cca_status st = cca_create(cfg, run.up, a);
    if (st == CCA_OK && run.map_bytes)
        ccai_pages_rule_set(*a, 20 * MIB, 64 * MIB, run.map_bytes);
    return st;
}

static size_t draw_size(ccai_rng *r) {
    uint64_t k = ccai_rng_below(r, 100);
    if (k < 80)
        return 1 + (size_t)ccai_rng_below(r, 64 * 1024);
    if (k < 95)
        return 64 * 1024 + (size_t)ccai_rng_below(r, MIB);
    return MIB + (size_t)ccai_rng_below(r, 6 * MIB);
}

static cca_domain *domain_of(worker *w, int dom) {
    return dom == 0 ? NULL : dom == 1 ? w->common : w->own;
}

static void fill(worker *w, slot *s, int k, unsigned char *p, size_t size, int dom) {
    s->p = p;
    s->size = size;
    s->dom = dom;
    s->pat = pattern_of(w->id, k, ++w->gen);
    memset(p, s->pat, size);
}

static bool intact(const slot *s) {
    for (size_t off = 0; off < s->size; off += sizeof ref[0]) {
        size_t len = s->size - off < sizeof ref[0] ? s->size - off : sizeof ref[0];
        if (memcmp(s->p + off, ref[s->pat], len) != 0)
            return false;
    }
    return true;
}

static void free_slot(worker *w, slot *s) {
    CHECK(intact(s), "%s: thread %d: a block of %zu bytes at %p was overwritten", run.name, w->id, s->size,
          (void *)s->p);
    cca_domain *d = (cca_domain *)1;
    cca_status st = cca_domain_of(w->a, s->p, &d);
    CHECK(st == CCA_OK && d == domain_of(w, s->dom), "%s: thread %d: a block's domain changed (%s)", run.name, w->id,
          cca_status_string(st));
    st = cca_free(w->a, s->p);
    CHECK(st == CCA_OK, "%s: thread %d: cca_free: %s (%s)", run.name, w->id, cca_status_string(st), cca_last_error());
    w->frees++;
    if (s->dom == 2)
        w->own_requested -= s->size;
    s->p = NULL;
}

static void own_create(worker *w) {
    char name[32];
    snprintf(name, sizeof name, "w%d.%d", w->id, ++w->own_gen);
    cca_status st = cca_domain_create(w->a, name, &w->own);
    CHECK(st == CCA_OK, "%s: thread %d: cca_domain_create: %s", run.name, w->id, cca_status_string(st));
    w->own_allocs = 0;
    st = cca_domain_reserve(w->a, w->own, 2 * MIB + ccai_rng_below(&w->rng, 4 * MIB));
    CHECK(st == CCA_OK || st == CCA_ERR_OUT_OF_MEMORY, "%s: thread %d: cca_domain_reserve: %s (%s)", run.name, w->id,
          cca_status_string(st), cca_last_error());
}

/* Free the own domain's blocks, then release it (destroy: and make a new
 * one). Blocks freed on another stream may still wait for their events:
 * then the release finds them, and they must be exactly those, pending. */
static void own_release(worker *w, bool destroy) {
    for (int k = 0; k < SLOTS; k++)
        if (w->s[k].p && w->s[k].dom == 2)
            free_slot(w, &w->s[k]);
    cca_live_block leaks[SLOTS * 2];
    cca_domain_report rep = {.leaks = leaks, .leaks_cap = SLOTS * 2};
    cca_status st = destroy ? cca_domain_destroy(w->a, w->own, 0, &rep) : cca_domain_release(w->a, w->own, 0, &rep);
    if (st == CCA_ERR_LIVE_BLOCKS) {
        CHECK(rep.live_blocks > 0 && rep.leaks_written == rep.live_blocks, "%s: thread %d: LIVE_BLOCKS with %zu listed",
              run.name, w->id, rep.live_blocks);
        for (size_t i = 0; i < rep.leaks_written; i++)
            CHECK(leaks[i].pending, "%s: thread %d: its emptied domain holds a live block of %zu bytes", run.name,
                  w->id, leaks[i].size);
        return; /* still there; a later release finds the events complete */
    }
    CHECK(st == CCA_OK, "%s: thread %d: domain release: %s (%s)", run.name, w->id, cca_status_string(st),
          cca_last_error());
    if (st != CCA_OK)
        return;
    if (destroy) {
        w->own = NULL;
        own_create(w);
        return;
    }
    cca_domain_stats ds;
    st = cca_get_domain_stats(w->a, w->own, &ds);
    CHECK(st == CCA_OK && ds.reserved_bytes == 0 && ds.allocated_bytes == 0 && ds.active_blocks == 0,
          "%s: thread %d: a released domain holds %zu bytes", run.name, w->id, ds.reserved_bytes);
}

static void step_alloc(worker *w, slot *s, int k) {
    size_t size = draw_size(&w->rng);
    cca_stream stream = (cca_stream)(uintptr_t)ccai_rng_below(&w->rng, 4);
    int dom = (int)ccai_rng_below(&w->rng, 3);
    void *p = NULL;
    cca_status st = cca_alloc_in(w->a, domain_of(w, dom), size, stream, &p);
    if (st == CCA_ERR_OUT_OF_MEMORY) {
        CHECK(p == NULL, "%s: an OOM with a pointer", run.name);
        w->ooms++;
        return;
    }
    CHECK(st == CCA_OK && p, "%s: thread %d: cca_alloc_in %zu: %s (%s)", run.name, w->id, size, cca_status_string(st),
          cca_last_error());
    if (st != CCA_OK || !p)
        return;
    size_t held = 0;
    CHECK(cca_block_size(w->a, p, &held) == CCA_OK && held >= size, "%s: a block of %zu for %zu", run.name, held,
          size);
    w->allocs++;
    if (dom == 2) {
        w->own_allocs++;
        w->own_requested += size;
    }
    fill(w, s, k, p, size, dom);
}

/* The text a writer left in a memstream: status OK, and the frame whole. */
static void check_text(worker *w, cca_status st, char *buf, size_t len, char open, char close, const char *what) {
    size_t n = len;
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        n--;
    CHECK(st == CCA_OK && n >= 2 && buf[0] == open && buf[n - 1] == close, "%s: thread %d: %s: %s, %zu bytes",
          run.name, w->id, what, cca_status_string(st), len);
}

static void step_writers(worker *w) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        fail("open_memstream");
        return;
    }
    cca_status st;
    switch (ccai_rng_below(&w->rng, 4)) {
    case 0:
        st = cca_write_snapshot_json(w->a, f);
        fflush(f);
        check_text(w, st, buf, len, '{', '}', "cca_write_snapshot_json");
        break;
    case 1:
        st = cca_write_snapshot_torch(w->a, w->id % 2, f);
        fflush(f);
        /* a pickle: PROTO first, STOP last */
        CHECK(st == CCA_OK && len > 2 && (unsigned char)buf[0] == 0x80 && buf[len - 1] == '.',
              "%s: thread %d: cca_write_snapshot_torch: %s, %zu bytes", run.name, w->id, cca_status_string(st), len);
        break;
    case 2: {
        cca_stats s;
        cca_get_stats(w->a, &s);
        st = cca_stats_write_json(&s, f);
        fflush(f);
        check_text(w, st, buf, len, '{', '}', "cca_stats_write_json");
        break;
    }
    default:
        st = cca_domain_stats_write_json(w->a, f);
        fflush(f);
        check_text(w, st, buf, len, '[', ']', "cca_domain_stats_write_json");
    }
    fclose(f);
    free(buf);
}

/* This thread's current domain on a plug device (cca_plug_set_domain):
 * made and set when there is none; else set back to the default and
 * destroyed, or (blocks of this thread live in it) kept and set again.
 * Other threads set theirs, allocate in them and destroy them on the same
 * two allocators meanwhile; only this thread allocates in its domain, so
 * the domain's counts are exact. */
static void toggle_plug_domain(worker *w, int device) {
    cca_allocator *a = NULL;
    CHECK(cca_plug_get_allocator(device, &a) == CCA_OK, "%s: plug allocator %d: %s", run.name, device,
          cca_last_error());
    cca_domain *prev = (cca_domain *)1, *now = NULL;
    if (!w->plug_dom[device]) {
        char name[32];
        snprintf(name, sizeof name, "plug-w%d-d%d", w->id, device);
        CHECK(cca_domain_create(a, name, &w->plug_dom[device]) == CCA_OK, "%s: plug domain: %s", run.name,
              cca_last_error());
        CHECK(cca_plug_set_domain(device, w->plug_dom[device], &prev) == CCA_OK && prev == NULL,
              "%s: thread %d: set_domain(%d): %s", run.name, w->id, device, cca_last_error());
        w->plug_dom_requested[device] = 0;
        w->plug_dom_allocs[device] = 0;
    } else {
        CHECK(cca_plug_set_domain(device, NULL, &prev) == CCA_OK && prev == w->plug_dom[device],
              "%s: thread %d: set_domain(%d, NULL) gave back %p, not %p", run.name, w->id, device, (void *)prev,
              (void *)w->plug_dom[device]);
        cca_status st = cca_domain_destroy(a, w->plug_dom[device], 0, NULL);
        if (st == CCA_OK)
            w->plug_dom[device] = NULL;
        else
            CHECK(st == CCA_ERR_LIVE_BLOCKS && cca_plug_set_domain(device, w->plug_dom[device], NULL) == CCA_OK,
                  "%s: thread %d: plug domain destroy: %s (%s)", run.name, w->id, cca_status_string(st),
                  cca_last_error());
    }
    CHECK(cca_plug_get_domain(device, &now) == CCA_OK && now == w->plug_dom[device],
          "%s: thread %d: get_domain(%d) is %p, not %p", run.name, w->id, device, (void *)now,
          (void *)w->plug_dom[device]);
}

static void step_plug(worker *w) {
    int k = (int)ccai_rng_below(&w->rng, PLUG_SLOTS);
    slot *s = &w->plug[k];
    if (ccai_rng_below(&w->rng, 8) == 0) {
        toggle_plug_domain(w, (int)ccai_rng_below(&w->rng, 2));
        return;
    }
    if (s->p) {
        CHECK(intact(s), "%s: thread %d: a plug block was overwritten", run.name, w->id);
        cca_plug_free(s->p, s->size, w->plug_dev[k], NULL);
        if (w->plug_in_dom[k])
            w->plug_dom_requested[w->plug_dev[k]] -= s->size;
        s->p = NULL;
        return;
    }
    size_t size = 1 + (size_t)ccai_rng_below(&w->rng, 512 * 1024);
    int device = (int)ccai_rng_below(&w->rng, 2);
    void *p = cca_plug_alloc(size, device, NULL);
    CHECK(p != NULL, "%s: thread %d: cca_plug_alloc %zu on %d: %s", run.name, w->id, size, device, cca_last_error());
    if (!p)
        return;
    w->plug_dev[k] = device;
    fill(w, s, 100 + k, p, size, 0);
    cca_domain *d = w->plug_dom[device];
    w->plug_in_dom[k] = d != NULL;
    if (d) { /* the block is in this thread's domain, and only this thread allocates there */
        cca_allocator *a = NULL;
        cca_domain *in = (cca_domain *)1;
        cca_domain_stats ds = {0};
        w->plug_dom_requested[device] += size;
        w->plug_dom_allocs[device]++;
        CHECK(cca_plug_get_allocator(device, &a) == CCA_OK && cca_domain_of(a, p, &in) == CCA_OK && in == d &&
                  cca_get_domain_stats(a, d, &ds) == CCA_OK && ds.requested_bytes == w->plug_dom_requested[device] &&
                  ds.alloc_calls == w->plug_dom_allocs[device],
              "%s: thread %d: a plug block of device %d is in %p, not its domain %p, or the domain holds %zu "
              "requested in %" PRIu64 " allocs; it made %zu in %" PRIu64,
              run.name, w->id, device, (void *)in, (void *)d, ds.requested_bytes, ds.alloc_calls,
              w->plug_dom_requested[device], w->plug_dom_allocs[device]);
    }
}

static void step(worker *w, int i) {
    int k = (int)ccai_rng_below(&w->rng, SLOTS);
    slot *s = &w->s[k];
    uint64_t op = ccai_rng_below(&w->rng, 100);
    cca_status st;
    if (op < 50) {
        if (s->p)
            free_slot(w, s);
        else
            step_alloc(w, s, k);
    } else if (op < 55) {
        if (s->p)
            CHECK(cca_record_stream(w->a, s->p, (cca_stream)(uintptr_t)(5 + ccai_rng_below(&w->rng, 2))) == CCA_OK,
                  "%s: cca_record_stream: %s", run.name, cca_last_error());
    } else if (op < 58) {
        static const size_t keeps[] = {0, 4 * MIB, 16 * MIB, SIZE_MAX};
        cca_release_report r;
        st = cca_trim(w->a, keeps[ccai_rng_below(&w->rng, 4)], &r);
        CHECK(st == CCA_OK || st == CCA_ERR_NOT_READY, "%s: cca_trim: %s (%s)", run.name, cca_status_string(st),
              cca_last_error());
    } else if (op < 59) {
        st = cca_empty_cache(w->a, NULL);
        CHECK(st == CCA_OK || st == CCA_ERR_NOT_READY, "%s: cca_empty_cache: %s (%s)", run.name,
              cca_status_string(st), cca_last_error());
    } else if (op < 64) {
        cca_stats s2;
        cca_get_stats(w->a, &s2);
        CHECK(s2.allocated_bytes <= s2.reserved_bytes && s2.allocated_bytes <= s2.allocated_bytes_peak &&
                  s2.reserved_bytes <= s2.reserved_bytes_peak && s2.active_blocks <= s2.active_blocks_peak &&
                  s2.pending_blocks <= s2.active_blocks && s2.reserved_bytes <= run.cfg.max_reserved &&
                  s2.mapped_bytes <= s2.reserved_bytes,
              "%s: an inconsistent stats snapshot (allocated %zu reserved %zu cap %zu)", run.name, s2.allocated_bytes,
              s2.reserved_bytes, run.cfg.max_reserved);
    } else if (op < 65) {
        cca_reset_peak_stats(w->a);
    } else if (op < 68) {
        step_writers(w);
    } else if (op < 70) {
        st = cca_check_invariants(w->a);
        CHECK(st == CCA_OK, "%s: cca_check_invariants: %s", run.name, cca_last_error());
    } else if (op < 73) {
        cca_domain_stats ds;
        st = cca_get_domain_stats(w->a, w->own, &ds);
        /* only this thread allocates there: exact */
        CHECK(st == CCA_OK && ds.requested_bytes == w->own_requested && ds.alloc_calls == w->own_allocs,
              "%s: thread %d: its domain holds %zu requested in %" PRIu64 " allocs; it made %zu in %" PRIu64, run.name,
              w->id, ds.requested_bytes, ds.alloc_calls, w->own_requested, w->own_allocs);
        st = cca_get_domain_stats(w->a, w->common, &ds);
        CHECK(st == CCA_OK && ds.allocated_bytes <= ds.reserved_bytes, "%s: the common domain's stats", run.name);
    } else if (op < 75) {
        char name[32];
        snprintf(name, sizeof name, "w%d:%d", w->id, i);
        CHECK(cca_trace_mark(w->a, name) == CCA_OK, "%s: cca_trace_mark: %s", run.name, cca_last_error());
    } else if (op < 77) {
        own_release(w, ccai_rng_below(&w->rng, 2));
    } else if (op < 85) {
        step_plug(w);
    } else if (!s->p) {
        step_alloc(w, s, k);
    }
}

static void *worker_main(void *arg) {
    worker *w = arg;
    own_create(w);
    for (int i = 0; i < STEPS; i++)
        step(w, i);
    for (int k = 0; k < SLOTS; k++)
        if (w->s[k].p)
            free_slot(w, &w->s[k]);
    for (int k = 0; k < PLUG_SLOTS; k++)
        if (w->plug[k].p) {
            CHECK(intact(&w->plug[k]), "%s: thread %d: a plug block was overwritten", run.name, w->id);
            cca_plug_free(w->plug[k].p, w->plug[k].size, w->plug_dev[k], NULL);
            if (w->plug_in_dom[k])
                w->plug_dom_requested[w->plug_dev[k]] -= w->plug[k].size;
            w->plug[k].p = NULL;
        }
    for (int device = 0; device < 2; device++)
        if (w->plug_dom[device])
            toggle_plug_domain(w, device); /* nothing of this thread's lives there now: destroyed */
    for (int device = 0; device < 2; device++)
        CHECK(!w->plug_dom[device], "%s: thread %d: its plug domain on device %d stayed", run.name, w->id, device);
    /* its pending frees may still wait: the destroy synchronizes once it is the last chance */
    cca_status st = cca_domain_destroy(w->a, w->own, 0, NULL);
    if (st == CCA_ERR_LIVE_BLOCKS) {
        CHECK(cca_trim(w->a, SIZE_MAX, NULL) == CCA_OK, "%s: trim to complete: %s", run.name, cca_last_error());
        st = cca_domain_destroy(w->a, w->own, 0, NULL);
    }
    CHECK(st == CCA_OK, "%s: thread %d: cca_domain_destroy: %s (%s)", run.name, w->id, cca_status_string(st),
          cca_last_error());
    return NULL;
}

/* Allocators that come and go on the same device, with blocks of their own. */
static void *churn_main(void *arg) {
    (void)arg;
    ccai_rng rng;
    ccai_rng_seed(&rng, 777);
    cca_config cfg = run.cfg;
    cfg.max_reserved = 8 * MIB;
    while (!atomic_load(&stop)) {
        cca_allocator *a = NULL;
        cca_status st = make_allocator(&cfg, &a);
        CHECK(st == CCA_OK, "%s: churn: cca_create: %s (%s)", run.name, cca_status_string(st), cca_last_error());
        if (st != CCA_OK)
            return NULL;
        run.churn_creates++;
        unsigned char *p[4] = {0};
        size_t size[4];
        uint64_t ooms = 0;
        for (int j = 0; j < 4; j++) {
            size[j] = 1 + (size_t)ccai_rng_below(&rng, 3 * MIB);
            st = cca_alloc(a, size[j], (cca_stream)(uintptr_t)ccai_rng_below(&rng, 3), (void **)&p[j]);
            if (st == CCA_ERR_OUT_OF_MEMORY) {
                ooms++;
                continue;
            }
            CHECK(st == CCA_OK, "%s: churn: cca_alloc: %s", run.name, cca_status_string(st));
            run.churn_allocs++;
            memset(p[j], 0x5a ^ j, size[j]);
        }
        for (int j = 0; j < 4; j++) {
            if (!p[j])
                continue;
            CHECK(p[j][0] == (0x5a ^ j) && p[j][size[j] - 1] == (0x5a ^ j), "%s: churn: a block was overwritten",
                  run.name);
            CHECK(cca_free(a, p[j]) == CCA_OK, "%s: churn: cca_free: %s", run.name, cca_last_error());
        }
        cca_stats s;
        cca_get_stats(a, &s);
        run.churn_ooms += ooms;
        CHECK(s.allocated_bytes == 0 && s.active_blocks == 0 && s.ooms == ooms && s.reserved_bytes <= cfg.max_reserved,
              "%s: churn: %zu allocated, %" PRIu64 " ooms of %" PRIu64 " counted", run.name, s.allocated_bytes, s.ooms,
              ooms);
        st = cca_destroy(a);
        CHECK(st == CCA_OK, "%s: churn: cca_destroy: %s (%s)", run.name, cca_status_string(st), cca_last_error());
    }
    return NULL;
}

/* fork() while the workers run: the child gets every allocator as a call
 * left it, its locks free (fork.c), and uses them: a block of each tenant,
 * filled and freed, the invariants, a plug block. Exit 0 = all of it held.
 * The child starts no thread (the device thread is not in it: its
 * synchronize completes every event). */
static void *forker_main(void *arg) {
    (void)arg;
    while (!atomic_load(&stop)) {
        nap(20 * 1000 * 1000);
        if (atomic_load(&stop))
            break;
        pid_t pid = fork();
        if (pid < 0) {
            fail("%s: fork failed", run.name);
            return NULL;
        }
        if (pid == 0) {
            int bad = 0;
            for (int n = 0; n < TENANTS; n++) {
                void *p = NULL;
                cca_status st = cca_alloc(run.a[n], 4096, NULL, &p);
                if (st == CCA_OK) {
                    /* written: the child's own copy of the device's memory
                     * (fork.c: the simulated device's MAP_SHARED maps made
                     * the child's own), so a block free in the child's copy
                     * of the allocator is no parent block's memory */
                    memset(p, 0x5c, 4096);
                    bad |= cca_free(run.a[n], p) != CCA_OK;
                } else {
                    bad |= st != CCA_ERR_OUT_OF_MEMORY;
                }
                bad |= cca_check_invariants(run.a[n]) != CCA_OK;
                cca_stats s;
                cca_get_stats(run.a[n], &s);
                bad |= s.allocated_bytes > s.reserved_bytes;
            }
            void *q = cca_plug_alloc(1000, 0, NULL);
            bad |= q == NULL;
            cca_plug_free(q, 1000, 0, NULL);
            _exit(bad);
        }
        int status = 0;
        CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "%s: a forked child failed (status %#x)", run.name, status);
        run.forks++;
    }
    return NULL;
}

/* ---- one run --------------------------------------------------------------------------------- */

/* backing: the simulated device's vm_backing, the held-events device's too
 * (whole maps: the allocator cuts maps at map_bytes, 0 for the rule's own,
 * and unmaps them whole while the other threads race it) */
static void run_one(const char *name, const char *conf, size_t capacity, uint64_t seed, int backing, size_t map_bytes) {
    memset(&run, 0, sizeof run);
    run.name = name;
    run.map_bytes = map_bytes;
    cca_config_default(&run.cfg);
    cca_upstream *host = NULL;
    atomic_store(&dev.recorded, 0);
    atomic_store(&dev.done, 0);
    atomic_store(&dev.queries_not_ready, 0);
    cca_host_options ho = {.capacity = capacity, .vm_backing = backing};
    if (cca_config_parse(&run.cfg, conf) != CCA_OK || cca_upstream_host_create_with(&ho, &host) != CCA_OK) {
        fail("%s: setup: %s", name, cca_last_error());
        return;
    }
    dev.host = host;
    cca_upstream_ops ops = held_ops;
    ops.vm_backing = backing;
    if (cca_upstream_custom_create(&ops, &dev, &run.up) != CCA_OK) {
        fail("%s: the held-events device: %s", name, cca_last_error());
        return;
    }
    for (int n = 0; n < TENANTS; n++)
        if (make_allocator(&run.cfg, &run.a[n]) != CCA_OK ||
            cca_domain_create(run.a[n], "common", &run.common[n]) != CCA_OK) {
            fail("%s: setup: %s", name, cca_last_error());
            return;
        }
    atomic_store(&stop, false);
    pthread_t dev_th, log_th, churn_th, fork_th, th[WORKERS];
    pthread_create(&dev_th, NULL, device_main, NULL);
    pthread_create(&log_th, NULL, logger_main, NULL);
    pthread_create(&churn_th, NULL, churn_main, NULL);
    pthread_create(&fork_th, NULL, forker_main, NULL);
    for (int t = 0; t < WORKERS; t++) {
        worker *w = &run.w[t];
        w->id = t;
        w->a = run.a[t % TENANTS];
        w->common = run.common[t % TENANTS];
        ccai_rng_seed(&w->rng, seed * 100 + (uint64_t)t);
        pthread_create(&th[t], NULL, worker_main, w);
    }
    for (int t = 0; t < WORKERS; t++)
        pthread_join(th[t], NULL);
    atomic_store(&stop, true);
    pthread_join(churn_th, NULL);
    pthread_join(fork_th, NULL);
    pthread_join(log_th, NULL);
    pthread_join(dev_th, NULL);

    uint64_t allocs = 0, ooms = run.churn_ooms, counted_ooms = run.churn_ooms, not_ready = 0;
    for (int n = 0; n < TENANTS; n++) {
        cca_allocator *a = run.a[n];
        uint64_t mine = 0, frees = 0, my_ooms = 0;
        for (int t = n; t < WORKERS; t += TENANTS)
            mine += run.w[t].allocs, frees += run.w[t].frees, my_ooms += run.w[t].ooms;
        allocs += mine, ooms += my_ooms;
        CHECK(cca_domain_destroy(a, run.common[n], 0, NULL) == CCA_OK, "%s: the common domain: %s", name,
              cca_last_error());
        CHECK(cca_empty_cache(a, NULL) == CCA_OK, "%s: empty cache: %s", name, cca_last_error());
        cca_stats s;
        cca_get_stats(a, &s);
        CHECK(s.active_blocks == 0 && s.pending_blocks == 0 && s.allocated_bytes == 0 && s.requested_bytes == 0 &&
                  s.reserved_bytes == 0 && s.segments == 0,
              "%s: tenant %d after the threads: %zu blocks (%zu pending), %zu allocated, %zu reserved", name, n,
              s.active_blocks, s.pending_blocks, s.allocated_bytes, s.reserved_bytes);
        CHECK(s.alloc_calls == mine && s.free_calls == frees && s.ooms == my_ooms,
              "%s: tenant %d: %" PRIu64 " allocs, %" PRIu64 " frees, %" PRIu64 " ooms counted; the threads made %" PRIu64
              ", %" PRIu64 ", %" PRIu64,
              name, n, s.alloc_calls, s.free_calls, s.ooms, mine, frees, my_ooms);
        CHECK(cca_check_invariants(a) == CCA_OK, "%s: %s", name, cca_last_error());
        counted_ooms += s.ooms;
        CHECK(cca_destroy(a) == CCA_OK, "%s: destroy: %s", name, cca_last_error());
    }
    (void)counted_ooms;
    not_ready = atomic_load(&dev.queries_not_ready);
    CHECK(atomic_load(&dev.events_live) == 0, "%s: %ld events never destroyed", name, atomic_load(&dev.events_live));
    cca_upstream_stats us;
    cca_upstream_get_stats(host, &us);
    CHECK(us.bytes_in_use == 0 && us.allocations == 0 && us.vm_mapped_bytes == 0 && us.vm_reserved_bytes == 0,
          "%s: the device still holds %zu bytes (%zu allocations, %zu address space)", name, us.bytes_in_use,
          us.allocations, us.vm_reserved_bytes);
    CHECK(us.bytes_in_use_peak <= capacity, "%s: the device's peak %zu exceeds its %zu bytes", name,
          us.bytes_in_use_peak, capacity);
    cca_upstream_destroy(run.up);
    cca_upstream_destroy(host);
    printf("tsan_shared [%s]: %d threads x %d steps, %" PRIu64 " allocs, %" PRIu64 " ooms, %" PRIu64
           " allocators created and destroyed, %" PRIu64 " forks, %" PRIu64 " events, %" PRIu64 " queried not ready\n",
           name, WORKERS, STEPS, allocs, ooms, run.churn_creates, run.forks, (uint64_t)atomic_load(&dev.recorded), not_ready);
    total_ooms += ooms;
}

int main(void) {
    for (int b = 0; b < 256; b++)
        memset(ref[b], b, sizeof ref[b]);
    cca_set_log_callback(sink_line, &sinks[0]);
    setenv("CCALLOC_PLUG_UPSTREAM", "host:64M:2", 1);
    unsetenv("CCALLOC_CONF");
    run_one("classic, max_reserved", "expandable:0,max_reserved:24M,history:32", 80 * MIB, 1, CCA_VM_PAGES, 0);
    run_one("expandable, max_reserved", "expandable:1,max_reserved:24M,history:32", 80 * MIB, 2, CCA_VM_PAGES, 0);
    run_one("expandable over whole maps, max_reserved", "expandable:1,max_reserved:24M,history:32", 80 * MIB, 3,
            CCA_VM_WHOLE_MAPS, 6 * MIB);
    cca_status st = cca_plug_reset();
    CHECK(st == CCA_OK, "cca_plug_reset: %s (%s)", cca_status_string(st), cca_last_error());
    CHECK(oom_lines() == total_ooms, "%lu OOM lines logged for %" PRIu64 " OOMs", oom_lines(), total_ooms);
    CHECK(atomic_load(&late_calls) == 0, "a replaced sink was called %lu times", atomic_load(&late_calls));
    cca_set_log_callback(NULL, NULL);
    if (failures)
        fprintf(stderr, "tsan_shared: %d checks failed\n", failures);
    return failures != 0;
}
