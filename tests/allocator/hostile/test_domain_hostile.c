/*
 * test_domain_hostile.c — allocator/src/domain.c: memory domains and the virtual-memory record under
 * attack: what the contract in ccalloc.h ("Memory domains") must survive.
 *
 *   host OOM     host malloc fails at every allocation of a 40-domain
 *                workload (create, reserve, alloc, free, trim, stats, JSON,
 *                release, destroy), once and from then on, classic and
 *                expandable: every call OK or CCA_ERR_OUT_OF_MEMORY, the
 *                invariants hold, nothing leaks; a create refused there is
 *                not in CCALLOC_TRACE and takes no domain number.
 *   churn        thousands of domains created and destroyed in random order
 *                (the handle set's growth, wraparound and backward shifts):
 *                live handles work, destroyed ones are refused, JSON counts
 *                exact.
 *   faults       an upstream fault at every call of a workload with arenas,
 *                the OOM retry across domains, trim, release, destroy and
 *                cca_destroy.
 *   destroy      cca_destroy with domains, arenas, live blocks and a failing
 *                synchronize.
 *   threads      8 threads creating, destroying, reserving, allocating,
 *                trimming and writing JSON.
 *   address      2,000 domains of one 4 KiB block each with expandable
 *                segments fit an 80 GiB simulated device (each range used
 *                to be the device's size: address space ran out first).
 *   vm_ranges    the record against a model over random operations; edges
 *                and overflow; unaligned or empty runs refused.
 *   handles      another allocator's, destroyed, garbage, stack and interior
 *                handles refused by every call without being read.
 *   sleep        host malloc fails at each allocation of cca_domain_sleep,
 *                cca_domain_wake and cca_sleep: CCA_ERR_OUT_OF_MEMORY,
 *                nothing changed (cca_sleep: its domains woken again), no
 *                live byte lost.
 *
 * Host malloc failures are injected with the linker's --wrap (see
 * tests/allocator/allocator.cmake): every malloc/calloc/realloc/aligned_alloc of the
 * library (static archive) and of this suite goes through __wrap_*
 * (tests/support/malloc_fault.c), which fails the N-th call once armed.
 */
#include "alloc_test_util.h"
#include "internal.h"
#include "malloc_fault.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* host malloc failures: tu_malloc_arm / tu_malloc_disarm (malloc_fault.h) */

#define PG ((size_t)64 * KiB)
#define S0 ((cca_stream)0x100)
#define S1 ((cca_stream)0x200)

static cca_upstream *device(size_t capacity) {
    cca_host_options o = {.capacity = capacity, .vm_granularity = PG};
    cca_upstream *u = NULL;
    cr_assert_eq(cca_upstream_host_create_with(&o, &u), CCA_OK, "%s", cca_last_error());
    return u;
}

static cca_allocator *make(cca_upstream *u, bool expandable, const char *extra) {
    char conf[256];
    snprintf(conf, sizeof conf, "log_oom:0%s%s%s", expandable ? ",expandable:1" : ",expandable:0", extra ? "," : "",
             extra ? extra : "");
    return tu_allocator(u, conf);
}

static size_t json_domains(const cca_allocator *a) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    cr_assert_eq(cca_domain_stats_write_json(a, f), CCA_OK, "%s", cca_last_error());
    fclose(f);
    size_t n = 0;
    for (const char *p = buf; (p = strstr(p, "\"name\"")); p++)
        n++;
    free(buf);
    return n;
}

/* ============================================================================ */
/* 1. host OOM at every allocation of a domain workload                         */
/* ============================================================================ */

#define HW_DOMS 40
#define HW_BLKS 4

typedef struct hw_state {
    cca_domain *d[HW_DOMS];
    void *p[HW_DOMS][HW_BLKS];
    int ndoms;
    long ops_failed;
} hw_state;

static void hw_workload(cca_allocator *a, hw_state *w) {
    char name[32];
    for (int i = 0; i < HW_DOMS; i++) {
        snprintf(name, sizeof name, "h%d", i);
        cca_domain *d = (cca_domain *)0x1;
        cca_status st = cca_domain_create(a, name, &d);
        if (st != CCA_OK) {
            cr_assert_eq(st, CCA_ERR_OUT_OF_MEMORY, "create %d: %s", i, cca_last_error());
            cr_assert_null(d);
            w->ops_failed++;
            continue;
        }
        w->d[w->ndoms++] = d;
    }
    for (int i = 0; i < w->ndoms; i++) {
        if (i % 5 == 0 && cca_domain_reserve(a, w->d[i], 256 * KiB) != CCA_OK)
            w->ops_failed++;
        for (int k = 0; k < HW_BLKS; k++) {
            void *p = NULL;
            cca_status st = cca_alloc_in(a, w->d[i], 1000 + (size_t)k * 70 * KiB, k % 2 ? S1 : S0, &p);
            if (st == CCA_OK)
                w->p[i][k] = p;
            else
                w->ops_failed++;
        }
    }
    for (int i = 0; i < w->ndoms; i += 3) /* free some, then release / destroy those domains */
        for (int k = 0; k < HW_BLKS; k++)
            if (w->p[i][k] && cca_free(a, w->p[i][k]) == CCA_OK)
                w->p[i][k] = NULL;
    (void)cca_trim(a, 0, NULL);
    cca_stats s;
    (void)cca_get_stats(a, &s);
    FILE *devnull = fopen("/dev/null", "w");
    if (devnull) {
        (void)cca_domain_stats_write_json(a, devnull);
        fclose(devnull);
    }
    for (int i = 0; i < w->ndoms; i += 3) {
        cca_status st = i % 2 ? cca_domain_release(a, w->d[i], 0, NULL) : cca_domain_destroy(a, w->d[i], 0, NULL);
        if (st == CCA_OK && i % 2 == 0)
            w->d[i] = NULL;
        else if (st != CCA_OK)
            w->ops_failed++;
    }
}

static void hw_cleanup(cca_allocator *a, cca_upstream *u, hw_state *w) {
    cr_assert_eq(cca_check_invariants(a), CCA_OK, "%s", cca_last_error());
    for (int i = 0; i < w->ndoms; i++)
        for (int k = 0; k < HW_BLKS; k++)
            if (w->p[i][k])
                cr_assert_eq(cca_free(a, w->p[i][k]), CCA_OK, "%s", cca_last_error());
    for (int i = 0; i < w->ndoms; i++)
        if (w->d[i])
            cr_assert_eq(cca_domain_destroy(a, w->d[i], 0, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(json_domains(a), 1, "only the default domain is left");
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(tu_upstream_stats(u).bytes_in_use, 0);
    cca_upstream_destroy(u);
}

static void host_oom_sweep(bool expandable, bool sticky) {
    long injected_total = 0;
    for (long n = 1;; n++) {
        cca_upstream *u = device(512 * MiB);
        cca_allocator *a = make(u, expandable, NULL);
        hw_state w;
        memset(&w, 0, sizeof w);
        tu_malloc_arm(n, sticky);
        hw_workload(a, &w);
        long got = tu_malloc_disarm();
        hw_cleanup(a, u, &w);
        injected_total += got;
        if (!got)
            break;
        cr_assert_lt(n, 20000, "runaway");
    }
    cr_assert_gt(injected_total, 10);
}

Test(domain_hostile, host_oom_at_every_allocation_classic, .timeout = 300) {
    host_oom_sweep(false, false);
}
Test(domain_hostile, host_oom_at_every_allocation_expandable, .timeout = 300) {
    host_oom_sweep(true, false);
}
Test(domain_hostile, host_oom_sticky_classic, .timeout = 300) {
    host_oom_sweep(false, true);
}
Test(domain_hostile, host_oom_sticky_expandable, .timeout = 300) {
    host_oom_sweep(true, true);
}

/* A handle destroyed and then a new domain made at once, as a program that
 * unloads one model and loads the next does: malloc tends to hand the new
 * domain the old one's memory, and a handle that were that address would
 * make the stale handle work on the new domain (allocating into it,
 * releasing it, destroying it). Every call must refuse the stale handle,
 * whatever the host allocator does. */
static void all_refuse(cca_allocator *a, cca_domain *bad, const char *what);

Test(domain_hostile, a_destroyed_handle_never_names_a_later_domain) {
    for (int e = 0; e < 2; e++) {
        cca_upstream *u = device(256 * MiB);
        cca_allocator *a = make(u, e, NULL);
        enum { ROUNDS = 300 };
        static cca_domain *seen[ROUNDS];
        cca_domain *cur = NULL;
        cr_assert_eq(cca_domain_create(a, "model", &cur), CCA_OK);
        for (int i = 0; i < ROUNDS; i++) {
            void *p = NULL;
            cr_assert_eq(cca_alloc_in(a, cur, 4096, S0, &p), CCA_OK, "%s", cca_last_error());
            tu_free(a, p);
            seen[i] = cur;
            cr_assert_eq(cca_domain_destroy(a, cur, 0, NULL), CCA_OK, "%s", cca_last_error());
            cr_assert_eq(cca_domain_create(a, "model", &cur), CCA_OK);
            for (int k = 0; k <= i; k++)
                cr_assert_neq(cur, seen[k], "round %d: the new domain has the handle destroyed in round %d", i, k);
            all_refuse(a, seen[i], "destroyed, a new domain made since");
            cca_domain_stats s;
            cr_assert_eq(cca_get_domain_stats(a, cur, &s), CCA_OK);
            cr_assert_eq(s.alloc_calls, 0, "the new domain was used through the stale handle");
        }
        cr_assert_eq(cca_domain_destroy(a, cur, 0, NULL), CCA_OK);
        cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
        cca_upstream_destroy(u);
    }
}

/* ============================================================================ */
/* 2. thousands of domains: create/destroy churn, handle validity               */
/* ============================================================================ */

/* A shadow of live handles and of destroyed ones: a handle is never given
 * twice (not even when malloc hands a destroyed domain's memory to a new
 * one), so every destroyed handle stays refused. */
static bool in_list(cca_domain *const *v, int n, const cca_domain *d) {
    for (int i = 0; i < n; i++)
        if (v[i] == d)
            return true;
    return false;
}

static void churn(bool expandable, int total, int keep_max, uint64_t seed) {
    cca_upstream *u = device(4 * GiB);
    cca_allocator *a = make(u, expandable, "small_max:64K,small_segment:64K");
    cca_domain **live = calloc((size_t)total, sizeof *live), **gone = calloc((size_t)total, sizeof *gone);
    void **blk = calloc((size_t)total, sizeof *blk);
    int n = 0, ng = 0, made = 0;
    uint64_t rng = seed;
    char name[32];
    while (made < total || n > 0) {
        uint64_t r = tu_rand(&rng) % 100;
        if (made < total && (n < keep_max && (r < 55 || n == 0))) {
            snprintf(name, sizeof name, "c%d", made++);
            cca_domain *d = NULL;
            cr_assert_eq(cca_domain_create(a, name, &d), CCA_OK, "%s", cca_last_error());
            cr_assert(!in_list(live, n, d), "a new handle equals a live one");
            cr_assert(!in_list(gone, ng, d), "a new handle equals a destroyed one");
            live[n] = d;
            blk[n] = NULL;
            if (r % 3 == 0)
                cr_assert_eq(cca_alloc_in(a, d, 512 + r * 64, r % 2 ? S0 : S1, &blk[n]), CCA_OK, "%s",
                             cca_last_error());
            n++;
        } else if (n > 0) {
            int k = (int)(tu_rand(&rng) % (uint64_t)n);
            cca_domain_report rep;
            memset(&rep, 0, sizeof rep);
            cca_status st = cca_domain_destroy(a, live[k], blk[k] ? CCA_DOMAIN_FORCE : 0, &rep);
            cr_assert_eq(st, CCA_OK, "%s", cca_last_error());
            cr_assert_eq(rep.live_blocks, blk[k] ? 1u : 0u);
            gone[ng++] = live[k];
            live[k] = live[n - 1], blk[k] = blk[n - 1], n--;
        }
        if ((made + ng) % 97 == 0) { /* every live handle works; every destroyed one (not reused) is refused */
            for (int i = 0; i < n; i++) {
                cca_domain_stats s;
                cr_assert_eq(cca_get_domain_stats(a, live[i], &s), CCA_OK, "live handle %d: %s", i, cca_last_error());
                if (blk[i]) {
                    cca_domain *o = NULL;
                    cr_assert_eq(cca_domain_of(a, blk[i], &o), CCA_OK);
                    cr_assert_eq(o, live[i]);
                }
            }
            for (int g = 0; g < ng; g++) {
                cca_domain_stats s;
                cr_assert_eq(cca_get_domain_stats(a, gone[g], &s), CCA_ERR_INVALID_ARGUMENT, "destroyed handle");
            }
            if (tu_rand(&rng) % 4 == 0)
                cr_assert_eq(cca_trim(a, 0, NULL), CCA_OK, "%s", cca_last_error());
            cr_assert_eq(json_domains(a), (size_t)n + 1);
        }
    }
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.active_blocks, 0);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    cr_assert_eq(tu_stats(a).reserved_bytes, 0);
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    cca_upstream_destroy(u);
    free(live), free(gone), free(blk);
}

Test(domain_hostile, churn_thousands_of_domains_classic, .timeout = 300) {
    churn(false, 2500, 600, 11);
}
Test(domain_hostile, churn_thousands_of_domains_expandable, .timeout = 300) {
    churn(true, 1200, 300, 12);
}
/* few live at once (the set stays small but wraps around at its end many times) */
Test(domain_hostile, churn_small_set_many_wraps, .timeout = 300) {
    churn(false, 8000, 9, 13);
}

/* ============================================================================ */
/* 3. upstream faults at every call of a multi-domain workload (arenas, OOM      */
/*    retry across domains, trim, release, destroy, cca_destroy)                */
/* ============================================================================ */

#define FW_DOMS 4
#define FW_BLKS 8
typedef struct fw {
    cca_domain *d[FW_DOMS];
    void *p[FW_DOMS + 1][FW_BLKS]; /* [FW_DOMS]: the default domain */
} fw;

static cca_status fw_alloc(cca_allocator *a, fw *w, int di, int k, size_t size, cca_stream s) {
    void *p = NULL;
    cca_status st = cca_alloc_in(a, di < FW_DOMS ? w->d[di] : NULL, size, s, &p);
    if (st == CCA_OK)
        w->p[di][k] = p;
    else
        cr_assert(st == CCA_ERR_OUT_OF_MEMORY || st == CCA_ERR_UPSTREAM, "alloc: %s / %s", cca_status_string(st),
                  cca_last_error());
    return st;
}

static void fw_free(cca_allocator *a, fw *w, int di, int k) {
    if (!w->p[di][k])
        return;
    cca_status st = cca_free(a, w->p[di][k]);
    cr_assert_eq(st, CCA_OK, "free [%d][%d] %p: %s", di, k, w->p[di][k], cca_last_error());
    w->p[di][k] = NULL;
}

static void fw_workload(cca_allocator *a, fw *w, tu_faulty *f) {
    char name[16];
    for (int i = 0; i < FW_DOMS; i++) {
        snprintf(name, sizeof name, "f%d", i);
        cr_assert_eq(cca_domain_create(a, name, &w->d[i]), CCA_OK);
    }
    (void)cca_domain_reserve(a, w->d[0], 3 * MiB);
    (void)cca_domain_reserve(a, w->d[1], 2 * MiB);
    (void)cca_domain_reserve(a, NULL, 1 * MiB);
    for (int k = 0; k < 4; k++)
        for (int di = 0; di <= FW_DOMS; di++)
            (void)fw_alloc(a, w, di, k, (size_t)(k + 1) * 512 * KiB + 1000 * (size_t)di, k % 2 ? S1 : S0);
    f->hold_events = true;
    if (w->p[2][1])
        (void)cca_record_stream(a, w->p[2][1], S0);
    for (int di = 0; di <= FW_DOMS; di++) /* everything of d0, d1 (arenas wholly free); half of the others */
        for (int k = 0; k < 4; k++)
            if (di < 2 || k % 2)
                fw_free(a, w, di, k);
    f->hold_events = false;
    /* a request the device can only serve after the retry releases other domains' cache (arenas included) */
    (void)fw_alloc(a, w, 3, 5, 20 * MiB, S0);
    (void)fw_alloc(a, w, 0, 5, 700 * KiB, S0); /* d0 again: its arena may be gone */
    (void)cca_trim(a, 1 * MiB, NULL);
    cca_domain_report r;
    memset(&r, 0, sizeof r);
    (void)cca_domain_release(a, w->d[1], 0, &r);
    (void)cca_domain_reserve(a, w->d[1], 1 * MiB);
    (void)fw_alloc(a, w, 1, 6, 300 * KiB, S1);
    cca_status st = cca_domain_destroy(a, w->d[2], CCA_DOMAIN_FORCE, &r);
    if (st == CCA_OK || r.live_blocks) { /* FORCE: the live blocks are gone even when a segment stays */
        w->d[2] = NULL;
        memset(w->p[2], 0, sizeof w->p[2]);
    }
    (void)cca_empty_cache(a, NULL);
}

typedef struct fw_run {
    bool expandable;
    tu_fault_kind kind;
    uint64_t at;
    bool sticky, faults_in_destroy;
    uint64_t calls[TU_FAULT_KINDS]; /* out */
} fw_run;

static void fw_one(fw_run *run) {
    tu_faulty f;
    cca_upstream *inner = device(40 * MiB);
    cca_upstream *u = tu_faulty_create(&f, inner, "fw", true);
    cca_allocator *a = make(u, run->expandable, NULL);
    if (run->at) {
        f.fail_at[run->kind] = run->at;
        f.sticky[run->kind] = run->sticky;
    }
    fw w;
    memset(&w, 0, sizeof w);
    fw_workload(a, &w, &f);
    cr_assert_eq(cca_check_invariants(a), CCA_OK, "%s", cca_last_error());
    if (run->faults_in_destroy) {
        /* cca_destroy meets the faults too: whatever it returns, the device's
         * count must match what it says it left behind */
        for (int di = 0; di <= FW_DOMS; di++)
            for (int k = 0; k < FW_BLKS; k++)
                fw_free(a, &w, di, k);
        cca_status dst = cca_destroy(a);
        tu_faulty_faults_off(&f);
        cca_upstream_stats us = tu_upstream_stats(inner);
        if (dst == CCA_OK)
            cr_assert(us.bytes_in_use == 0 && us.vm_reserved_bytes == 0,
                      "cca_destroy said OK (%s at %llu%s) but the device holds %zu bytes, %zu reserved",
                      tu_fault_names[run->kind], (unsigned long long)run->at, run->sticky ? " sticky" : "",
                      us.bytes_in_use, us.vm_reserved_bytes);
        cr_assert_eq(f.events_live, 0, "events leaked by cca_destroy");
        cca_upstream_destroy(u);
        cca_upstream_destroy(inner);
        memcpy(run->calls, f.calls, sizeof run->calls);
        return;
    }
    tu_faulty_faults_off(&f);
    for (int di = 0; di <= FW_DOMS; di++)
        for (int k = 0; k < FW_BLKS; k++)
            fw_free(a, &w, di, k);
    for (int i = 0; i < FW_DOMS; i++)
        if (w.d[i])
            cr_assert_eq(cca_domain_destroy(a, w.d[i], 0, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s", cca_last_error());
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.reserved_bytes, 0);
    cr_assert_eq(s.segments, 0, "segments left after empty_cache with no faults");
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(f.events_live, 0, "events leaked");
    cca_upstream_stats us = tu_upstream_stats(inner);
    cr_assert_eq(us.bytes_in_use, 0, "device still holds %zu", us.bytes_in_use);
    cr_assert_eq(us.vm_reserved_bytes, 0);
    memcpy(run->calls, f.calls, sizeof run->calls);
    cca_upstream_destroy(u);
    cca_upstream_destroy(inner);
}

static void fw_sweep(bool expandable, bool in_destroy) {
    fw_run base = {.expandable = expandable};
    fw_one(&base);
    uint64_t total = 0;
    for (int k = 0; k < TU_FAULT_KINDS; k++) {
        total += base.calls[k];
        for (uint64_t at = 1; at <= base.calls[k] + 1; at++)
            for (int sticky = 0; sticky < 2; sticky++) {
                fw_run run = {.expandable = expandable, .kind = (tu_fault_kind)k, .at = at, .sticky = sticky,
                              .faults_in_destroy = in_destroy};
                fw_one(&run);
            }
    }
    cr_assert_gt(total, 10);
}

Test(domain_hostile, upstream_fault_sweep_classic, .timeout = 600) {
    fw_sweep(false, false);
}
Test(domain_hostile, upstream_fault_sweep_expandable, .timeout = 600) {
    fw_sweep(true, false);
}
Test(domain_hostile, upstream_fault_sweep_into_destroy_classic, .timeout = 600) {
    fw_sweep(false, true);
}
Test(domain_hostile, upstream_fault_sweep_into_destroy_expandable, .timeout = 600) {
    fw_sweep(true, true);
}

/* ============================================================================ */
/* 4. cca_destroy with domains, arenas, expandable segments, failed synchronize */
/* ============================================================================ */

static void destroy_with_domains(bool expandable, bool fail_sync, bool live) {
    tu_faulty f;
    cca_upstream *inner = device(256 * MiB);
    cca_upstream *u = tu_faulty_create(&f, inner, "dd", true);
    cca_allocator *a = make(u, expandable, NULL);
    cca_domain *d[6];
    char name[8];
    void *keep = NULL;
    for (int i = 0; i < 6; i++) {
        snprintf(name, sizeof name, "x%d", i);
        cr_assert_eq(cca_domain_create(a, name, &d[i]), CCA_OK);
        if (i % 2 == 0)
            cr_assert_eq(cca_domain_reserve(a, d[i], (size_t)(i + 1) * MiB), CCA_OK, "%s", cca_last_error());
        void *p = NULL;
        cr_assert_eq(cca_alloc_in(a, d[i], (size_t)(i + 1) * 700 * KiB, i % 3 ? S1 : S0, &p), CCA_OK);
        if (live && i == 3)
            keep = p;
        else
            tu_free(a, p);
    }
    /* a domain whose memory went back, one destroyed */
    cr_assert_eq(cca_domain_release(a, d[1], 0, NULL), CCA_OK);
    cr_assert_eq(cca_domain_destroy(a, d[5], 0, NULL), CCA_OK);
    cr_assert_eq(cca_trim(a, 4 * MiB, NULL), CCA_OK);
    cca_stats s = tu_stats(a);
    if (fail_sync)
        f.fail_at[TU_FAULT_SYNC] = f.calls[TU_FAULT_SYNC] + 1, f.sticky[TU_FAULT_SYNC] = true;
    uint64_t unmaps = f.calls[TU_FAULT_UNMAP];
    cca_status st = cca_destroy(a);
    (void)keep;
    tu_faulty_faults_off(&f);
    cca_upstream_stats us = tu_upstream_stats(inner);
    if (!fail_sync) {
        cr_assert_eq(st, live ? CCA_ERR_LIVE_BLOCKS : CCA_OK, "%s", cca_last_error());
        cr_assert_eq(us.bytes_in_use, 0);
        cr_assert_eq(us.vm_reserved_bytes, 0);
    } else {
        cr_assert_eq(st, live ? CCA_ERR_LIVE_BLOCKS : (s.mapped_bytes ? CCA_ERR_UPSTREAM : CCA_OK), "%s / %s",
                     cca_status_string(st), cca_last_error());
        if (expandable) {
            cr_assert_eq(f.calls[TU_FAULT_UNMAP], unmaps, "no unmap after a failed synchronize");
            cr_assert_eq(us.vm_mapped_bytes, s.mapped_bytes, "pages left mapped: the upstream counts them");
            cr_assert_leq(us.vm_reserved_bytes, s.address_space_bytes);
            if (s.mapped_bytes)
                cr_assert(strstr(cca_last_error(), "left mapped"), "%s", cca_last_error());
        } else {
            cr_assert_eq(us.bytes_in_use, 0, "classic segments are freed all the same");
        }
    }
    cr_assert_eq(f.events_live, 0);
    cca_upstream_destroy(u);
    cca_upstream_destroy(inner);
}

Test(domain_hostile, destroy_with_domains_classic) {
    destroy_with_domains(false, false, false);
    destroy_with_domains(false, false, true);
    destroy_with_domains(false, true, false);
    destroy_with_domains(false, true, true);
}
Test(domain_hostile, destroy_with_domains_expandable) {
    destroy_with_domains(true, false, false);
    destroy_with_domains(true, false, true);
    destroy_with_domains(true, true, false);
    destroy_with_domains(true, true, true);
}

/* ============================================================================ */
/* 5. threads: 8 threads create / destroy domains and allocate at once          */
/* ============================================================================ */

#define TT 8
#define TT_OPS 3000
typedef struct tt {
    cca_allocator *a;
    int id;
    cca_domain *shared; /* every thread allocates in it too */
    char error[256];
} tt;

static void tt_fail(tt *w, const char *what, cca_status st) {
    if (!w->error[0])
        snprintf(w->error, sizeof w->error, "thread %d: %s: %s / %s", w->id, what, cca_status_string(st),
                 cca_last_error());
}

static void *tt_main(void *arg) {
    tt *w = arg;
    uint64_t rng = 0xabc0 + (uint64_t)w->id;
    cca_domain *mine[8] = {0};
    void *blk[8][4] = {{0}};
    void *sh[16] = {0};
    char name[32];
    cca_stream own = (cca_stream)(uintptr_t)(0x1000 * (w->id + 1));
    for (int op = 0; op < TT_OPS && !w->error[0]; op++) {
        uint64_t r = tu_rand(&rng) % 100;
        int k = (int)(tu_rand(&rng) % 8), j = (int)(tu_rand(&rng) % 4);
        cca_status st = CCA_OK;
        if (r < 15) {
            if (!mine[k]) {
                snprintf(name, sizeof name, "t%d.%d", w->id, op);
                st = cca_domain_create(w->a, name, &mine[k]);
                if (st != CCA_OK)
                    tt_fail(w, "create", st);
                if (r < 3 && st == CCA_OK && (st = cca_domain_reserve(w->a, mine[k], 256 * KiB)) != CCA_OK)
                    tt_fail(w, "reserve", st);
            } else {
                cca_domain_report rep;
                memset(&rep, 0, sizeof rep);
                st = cca_domain_destroy(w->a, mine[k], CCA_DOMAIN_FORCE, &rep);
                if (st != CCA_OK)
                    tt_fail(w, "destroy", st);
                mine[k] = NULL;
                memset(blk[k], 0, sizeof blk[k]);
            }
        } else if (r < 60) {
            if (mine[k] && !blk[k][j]) {
                size_t size = 256 + tu_rand(&rng) % (r < 20 ? 3 * MiB : 64 * KiB);
                st = cca_alloc_in(w->a, mine[k], size, r % 2 ? own : NULL, &blk[k][j]);
                if (st != CCA_OK)
                    tt_fail(w, "alloc_in", st);
                cca_domain *o = NULL;
                if (cca_domain_of(w->a, blk[k][j], &o) != CCA_OK || o != mine[k])
                    tt_fail(w, "domain_of", CCA_OK);
            } else if (mine[k] && blk[k][j]) {
                if ((st = cca_free(w->a, blk[k][j])) != CCA_OK)
                    tt_fail(w, "free", st);
                blk[k][j] = NULL;
            }
        } else if (r < 85) {
            int i = (int)(tu_rand(&rng) % 16);
            if (sh[i]) {
                if ((st = cca_free(w->a, sh[i])) != CCA_OK)
                    tt_fail(w, "free shared", st);
                sh[i] = NULL;
            } else if ((st = cca_alloc_in(w->a, i % 2 ? w->shared : NULL, 512 + (size_t)i * 4096, own, &sh[i])) !=
                       CCA_OK) {
                tt_fail(w, "alloc shared", st);
            }
        } else if (r < 90) {
            if ((st = cca_trim(w->a, 0, NULL)) != CCA_OK)
                tt_fail(w, "trim", st);
        } else if (r < 95) {
            cca_stats s;
            cca_get_stats(w->a, &s);
            if (s.cached_bytes > s.reserved_bytes)
                tt_fail(w, "stats: cached > reserved", CCA_OK);
        } else if (r < 97) {
            if (mine[k]) {
                st = cca_domain_release(w->a, mine[k], CCA_DOMAIN_FORCE, NULL);
                if (st != CCA_OK)
                    tt_fail(w, "release", st);
                memset(blk[k], 0, sizeof blk[k]);
            }
        } else {
            FILE *f = fopen("/dev/null", "w");
            if ((st = cca_domain_stats_write_json(w->a, f)) != CCA_OK)
                tt_fail(w, "json", st);
            fclose(f);
        }
    }
    for (int k = 0; k < 8; k++)
        if (mine[k] && cca_domain_destroy(w->a, mine[k], CCA_DOMAIN_FORCE, NULL) != CCA_OK)
            tt_fail(w, "final destroy", CCA_OK);
    for (int i = 0; i < 16; i++)
        if (sh[i])
            (void)cca_free(w->a, sh[i]);
    return NULL;
}

static void threads_run(bool expandable) {
    cca_upstream *u = device(2 * GiB);
    cca_allocator *a = make(u, expandable, NULL);
    cca_domain *shared = NULL;
    cr_assert_eq(cca_domain_create(a, "shared", &shared), CCA_OK);
    tt w[TT];
    pthread_t th[TT];
    for (int i = 0; i < TT; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].a = a, w[i].id = i, w[i].shared = shared;
        cr_assert_eq(pthread_create(&th[i], NULL, tt_main, &w[i]), 0);
    }
    for (int i = 0; i < TT; i++)
        cr_assert_eq(pthread_join(th[i], NULL), 0);
    for (int i = 0; i < TT; i++)
        cr_assert_eq(w[i].error[0], '\0', "%s", w[i].error);
    cr_assert_eq(cca_check_invariants(a), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(json_domains(a), 2);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.active_blocks, 0);
    cr_assert_eq(cca_domain_destroy(a, shared, 0, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(tu_upstream_stats(u).bytes_in_use, 0);
    cca_upstream_destroy(u);
}

Test(domain_hostile, threads_create_destroy_and_allocate_classic, .timeout = 300) {
    threads_run(false);
}
Test(domain_hostile, threads_create_destroy_and_allocate_expandable, .timeout = 300) {
    threads_run(true);
}

/* ============================================================================ */
/* 6. a cca_domain_create that fails on host memory is in the trace all the     */
/*    same (the line is written before the handle set's growth can fail)        */
/* ============================================================================ */

static size_t count_lines_with(const char *path, const char *needle) {
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    char line[512];
    size_t n = 0;
    while (fgets(line, sizeof line, f))
        n += strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

Test(domain_hostile, failed_domain_create_is_not_traced) {
    char path[] = "/tmp/rev1_traceXXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    cr_assert_eq(setenv("CCALLOC_TRACE", path, 1), 0);
    cca_upstream *u = device(64 * MiB);
    cca_allocator *a = make(u, false, NULL);
    void *p = tu_alloc(a, 4096, S0); /* the trace file's buffer exists from here on */
    tu_free(a, p);
    /* the first domain: calloc(domain) is host allocation 1, the handle set's
     * first table (16 slots) allocation 2 */
    cca_domain *d = (cca_domain *)0x1;
    tu_malloc_arm(2, false);
    cca_status st = cca_domain_create(a, "phantom", &d);
    long injected = tu_malloc_disarm();
    cr_assert_eq(injected, 1);
    cr_assert_eq(st, CCA_ERR_OUT_OF_MEMORY, "%s / %s", cca_status_string(st), cca_last_error());
    cr_assert_null(d);
    cr_assert_eq(json_domains(a), 1, "no domain was made");
    cca_domain *real = NULL;
    cr_assert_eq(cca_domain_create(a, "real", &real), CCA_OK);
    p = NULL;
    cr_assert_eq(cca_alloc_in(a, real, 4096, S0, &p), CCA_OK);
    tu_free(a, p);
    cr_assert_eq(cca_domain_destroy(a, real, 0, NULL), CCA_OK);
    tu_teardown(a, u);
    unsetenv("CCALLOC_TRACE");
    size_t phantom = count_lines_with(path, ",domain,0,0,0,1,phantom");
    size_t real_no = count_lines_with(path, ",domain,0,0,0,1,real");
    unlink(path);
    cr_assert_eq(phantom, 0, "a cca_domain_create that returned CCA_ERR_OUT_OF_MEMORY was recorded as domain 1");
    cr_assert_eq(real_no, 1, "the first domain made is domain 1 of the trace");
}

/* Sleep and wake with host memory short (sleep.c; ccalloc.h, "Sleep"):
 * each host allocation of cca_domain_sleep, cca_domain_wake and cca_sleep
 * refused in turn (k = 1, 2, ... until a call makes fewer than k). A
 * refused call returns CCA_ERR_OUT_OF_MEMORY with nothing changed: the
 * stats and invariants as before, the domain as it was (awake, or asleep
 * with its host copy), every live byte kept; cca_sleep, all or nothing,
 * wakes the domains it put to sleep (their cached pages gone: the live
 * bytes as before). A call that succeeds anyway is undone and the next k
 * tried. streams 2: blocks of both pools on two streams; more: one small
 * block on each stream, so the domain holds exactly `streams` segments
 * (the sleep record's address index keeps up to 8 segments' spans on the
 * stack, more in a host allocation of their own). */
typedef enum sleep_call { SLEEP_ONE, WAKE_ONE, SLEEP_ALL } sleep_call;

static bool asleep(cca_allocator *a, cca_domain *d) {
    void *p = NULL;
    cca_status st = cca_alloc_in(a, d, 512, S0, &p);
    cr_assert(st == CCA_OK || st == CCA_ERR_ASLEEP, "%s", cca_last_error());
    if (p)
        tu_free(a, p);
    return st == CCA_ERR_ASLEEP;
}

static void sleep_host_oom(sleep_call call, int streams) {
    static const size_t mixed[] = {100 * KiB, 3 * MiB, 300 * KiB, 20 * MiB, 4 * KiB, 18 * MiB};
    enum { MAX = 16 };
    size_t sizes[MAX];
    int N = streams == 2 ? (int)(sizeof mixed / sizeof mixed[0]) : streams;
    cr_assert_leq(N, MAX);
    for (int i = 0; i < N; i++)
        sizes[i] = streams == 2 ? mixed[i] : (size_t)(i + 1) * 32 * KiB; /* more streams: small blocks only */
    cca_upstream *u = device(256 * MiB);
    cca_allocator *a = make(u, true, NULL);
    cca_domain *d, *e;
    cr_assert_eq(cca_domain_create(a, "m", &d), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_domain_create(a, "n", &e), CCA_OK, "%s", cca_last_error());
    void *p[MAX], *q = NULL;
    for (int i = 0; i < N; i++) { /* streams 2: S1, S0, S1, ... */
        cca_stream s = (cca_stream)(uintptr_t)(0x100 * (1 + (i + 1) % streams));
        cr_assert_eq(cca_alloc_in(a, d, sizes[i], s, &p[i]), CCA_OK, "%s", cca_last_error());
        tu_fill(p[i], sizes[i], (uint64_t)i);
    }
    if (streams > 2) {
        cca_domain_stats ds;
        cr_assert_eq(cca_get_domain_stats(a, d, &ds), CCA_OK, "%s", cca_last_error());
        cr_assert_eq(ds.segments, (size_t)streams, "one segment per stream");
    }
    cr_assert_eq(cca_alloc_in(a, e, 5 * MiB, S0, &q), CCA_OK, "%s", cca_last_error());
    tu_fill(q, 5 * MiB, 99);
    long k = 1, refused = 0;
    for (;; k++) {
        bool was = call == WAKE_ONE;
        if (was)
            cr_assert_eq(cca_domain_sleep(a, d, 0, NULL), CCA_OK, "%s", cca_last_error());
        cca_stats before = tu_stats(a);
        tu_malloc_arm(k, false);
        cca_status st = call == SLEEP_ONE  ? cca_domain_sleep(a, d, 0, NULL)
                        : call == WAKE_ONE ? cca_domain_wake(a, d, NULL)
                                           : cca_sleep(a, 0, NULL);
        long injected = tu_malloc_disarm();
        char why[512];
        snprintf(why, sizeof why, "allocation %ld refused: %s", k, cca_last_error());
        if (st != CCA_OK) {
            cr_assert_eq(injected, 1, "%s", why);
            cr_assert_eq(st, CCA_ERR_OUT_OF_MEMORY, "%s", why);
            if (call == SLEEP_ALL) { /* the domains put to sleep were woken: their cached pages went */
                tu_check(a);
                cr_assert_eq(tu_stats(a).allocated_bytes, before.allocated_bytes, "%s", why);
                cr_assert_leq(tu_stats(a).reserved_bytes, before.reserved_bytes, "%s: more mapped than before", why);
                cr_assert_not(asleep(a, e), "%s: the other domain is asleep", why);
            } else {
                tu_assert_intact(a, &before, why);
            }
            cr_assert_eq(asleep(a, d), was, "%s: the domain changed", why);
            refused++;
        }
        if (st == CCA_OK) {
            cr_assert_eq(asleep(a, d), !was, "allocation %ld refused, the call succeeded, yet did nothing", k);
            if (call == SLEEP_ALL)
                cr_assert(asleep(a, e), "allocation %ld refused: cca_sleep succeeded, not every domain asleep", k);
        }
        if (call == SLEEP_ALL && st == CCA_OK)
            cr_assert_eq(cca_wake(a, NULL), CCA_OK, "%s", cca_last_error());
        else if (call == SLEEP_ONE && st == CCA_OK)
            cr_assert_eq(cca_domain_wake(a, d, NULL), CCA_OK, "%s", cca_last_error());
        else if (call == WAKE_ONE && st != CCA_OK)
            cr_assert_eq(cca_domain_wake(a, d, NULL), CCA_OK, "%s", cca_last_error());
        for (int i = 0; i < N; i++)
            cr_assert(tu_check_fill(p[i], sizes[i], (uint64_t)i), "%s: block %d lost its bytes", why, i);
        cr_assert(tu_check_fill(q, 5 * MiB, 99), "%s: the other domain's block lost its bytes", why);
        if (injected == 0)
            break;
    }
    cr_assert_geq(refused, 1, "some host allocation of the call was refused");
    for (int i = 0; i < N; i++)
        tu_free(a, p[i]);
    tu_free(a, q);
    tu_teardown(a, u);
}

Test(domain_hostile, sleep_with_host_memory_short_changes_nothing) {
    sleep_host_oom(SLEEP_ONE, 2);
}
Test(domain_hostile, wake_with_host_memory_short_stays_asleep) {
    sleep_host_oom(WAKE_ONE, 2);
}
Test(domain_hostile, sleep_all_with_host_memory_short_changes_nothing) {
    sleep_host_oom(SLEEP_ALL, 2);
}
Test(domain_hostile, sleep_of_8_and_9_segments_with_host_memory_short_changes_nothing) {
    sleep_host_oom(SLEEP_ONE, 8); /* the spans on the stack, full */
    sleep_host_oom(SLEEP_ONE, 9); /* one more: the spans in a host allocation */
    sleep_host_oom(SLEEP_ALL, 9);
}

/* ============================================================================ */
/* 7. vm_ranges.c: hostile map / unmap / release sequences                      */
/* ============================================================================ */

#define VG ((size_t)2 << 20)

static ccai_vm_ranges vr_fresh(void) {
    ccai_vm_ranges rs = {.head = NULL, .granule = VG, .who = "cuda:9"};
    return rs;
}

/* Sequences that follow the rules, with the record kept as the CUDA upstream
 * keeps it (bits set / cleared after each allowed call), against a model. */
Test(domain_hostile, vm_ranges_random_sequences_match_a_model) {
    enum { R = 5, MAXG = 300 };
    ccai_vm_ranges rs = vr_fresh();
    uintptr_t base[R];
    size_t gr[R];
    bool model[R][MAXG];
    bool present[R];
    memset(model, 0, sizeof model);
    uint64_t rng = 77;
    for (int i = 0; i < R; i++) {
        base[i] = (uintptr_t)0x7e0000000000 + (uintptr_t)i * 1024 * VG; /* apart */
        gr[i] = 1 + (size_t)(tu_rand(&rng) % MAXG);
        cr_assert_eq(ccai_vm_ranges_add(&rs, base[i], gr[i] * VG), CCA_OK);
        present[i] = true;
    }
    for (int step = 0; step < 20000; step++) {
        int i = (int)(tu_rand(&rng) % R);
        if (!present[i])
            continue;
        size_t first = (size_t)(tu_rand(&rng) % (gr[i] + 2)), n = 1 + (size_t)(tu_rand(&rng) % 70);
        int op = (int)(tu_rand(&rng) % 3);
        ccai_vm_range *r = NULL;
        size_t f = SIZE_MAX;
        bool inside = first + n <= gr[i];
        bool all0 = inside, all1 = inside;
        for (size_t g = first; inside && g < first + n; g++)
            all0 &= !model[i][g], all1 &= model[i][g];
        if (op == 0) {
            cca_status st = ccai_vm_check_map(&rs, base[i] + first * VG, n * VG, &r, &f);
            cr_assert_eq(st == CCA_OK, all0, "step %d: map [%zu,+%zu) of range %d (%zu granules): %s", step, first, n,
                         i, gr[i], cca_last_error());
            if (st == CCA_OK) {
                cr_assert_eq(r->base, base[i]);
                cr_assert_eq(f, first);
                for (size_t g = first; g < first + n; g++)
                    ccai_vm_range_set(r, g, true), model[i][g] = true;
            }
        } else if (op == 1) {
            cca_status st = ccai_vm_check_unmap(&rs, base[i] + first * VG, n * VG, &r, &f);
            cr_assert_eq(st == CCA_OK, all1, "step %d: unmap [%zu,+%zu) of range %d: %s", step, first, n, i,
                         cca_last_error());
            if (st == CCA_OK)
                for (size_t g = first; g < first + n; g++)
                    ccai_vm_range_set(r, g, false), model[i][g] = false;
        } else {
            bool any = false;
            for (size_t g = 0; g < gr[i]; g++)
                any |= model[i][g];
            cca_status st = ccai_vm_check_release(&rs, base[i], gr[i] * VG, &r);
            cr_assert_eq(st == CCA_OK, !any, "step %d: release of range %d: %s", step, i, cca_last_error());
            if (st == CCA_OK) {
                ccai_vm_ranges_remove(&rs, r);
                present[i] = false;
                cr_assert_neq(ccai_vm_check_map(&rs, base[i], VG, &r, &f), CCA_OK, "a released range is gone");
                /* reserved again (same place, another size) */
                gr[i] = 1 + (size_t)(tu_rand(&rng) % MAXG);
                memset(model[i], 0, sizeof model[i]);
                cr_assert_eq(ccai_vm_ranges_add(&rs, base[i], gr[i] * VG), CCA_OK);
                present[i] = true;
            }
        }
    }
    ccai_vm_ranges_free(&rs);
    cr_assert_null(rs.head);
}

/* Edges: size 0, the last granule, a run past the end by one byte, a huge
 * size that wraps, the top of the address space, a range of 0 bytes. */
Test(domain_hostile, vm_ranges_edges_and_overflow) {
    ccai_vm_ranges rs = vr_fresh();
    const uintptr_t A = 0x7f0000000000;
    ccai_vm_range *r = NULL;
    size_t f = 0;
    cr_assert_eq(ccai_vm_ranges_add(&rs, A, 64 * VG), CCA_OK);
    cr_assert_eq(ccai_vm_check_map(&rs, A + 63 * VG, VG, &r, &f), CCA_OK);
    cr_assert_eq(f, 63);
    cr_assert_eq(ccai_vm_check_map(&rs, A + 63 * VG, VG + 1, &r, &f), CCA_ERR_UPSTREAM, "one byte past the end");
    cr_assert_eq(ccai_vm_check_map(&rs, A, SIZE_MAX, &r, &f), CCA_ERR_UPSTREAM, "SIZE_MAX");
    cr_assert_eq(ccai_vm_check_map(&rs, A + VG, SIZE_MAX - VG + 2, &r, &f), CCA_ERR_UPSTREAM, "wraps");
    cr_assert_eq(ccai_vm_check_map(&rs, A + 64 * VG, VG, &r, &f), CCA_ERR_UPSTREAM, "just past the range");
    cr_assert_eq(ccai_vm_check_unmap(&rs, A, 65 * VG, &r, &f), CCA_ERR_UPSTREAM);
    /* the top of the address space */
    const uintptr_t T = UINTPTR_MAX - 4 * VG + 1;
    cr_assert_eq(ccai_vm_ranges_add(&rs, T, 4 * VG), CCA_OK);
    cr_assert_eq(ccai_vm_check_map(&rs, T + 3 * VG, VG, &r, &f), CCA_OK);
    cr_assert_eq(f, 3);
    cr_assert_eq(ccai_vm_check_map(&rs, T + 3 * VG, 2 * VG, &r, &f), CCA_ERR_UPSTREAM);
    ccai_vm_range_set(r, 3, true);
    cr_assert_eq(ccai_vm_check_release(&rs, T, 4 * VG, &r), CCA_ERR_UPSTREAM);
    cr_assert(strstr(cca_last_error(), "granule 3 is still mapped"), "%s", cca_last_error());
    /* a release with the right base but another size, or the right size elsewhere */
    cr_assert_eq(ccai_vm_check_release(&rs, A, 63 * VG, &r), CCA_ERR_UPSTREAM);
    cr_assert_eq(ccai_vm_check_release(&rs, A + VG, 64 * VG, &r), CCA_ERR_UPSTREAM);
    /* remove of a range not in the record: nothing happens */
    ccai_vm_range bogus = {0};
    ccai_vm_ranges_remove(&rs, &bogus);
    cr_assert_eq(ccai_vm_check_release(&rs, A, 64 * VG, &r), CCA_OK);
    ccai_vm_ranges_free(&rs);
}

/* Calls that break the granularity (the wrapper refuses them before the CUDA
 * upstream is reached, so only a caller of vm_ranges.c other than
 * cca_upstream_vm_* meets these): a map whose address is not on a granule, or
 * whose size is not whole granules, is checked on the granules it starts in,
 * not the ones it touches: it is accepted over a mapped granule. */
Test(domain_hostile, vm_ranges_unaligned_map_over_a_mapped_granule_is_refused) {
    ccai_vm_ranges rs = vr_fresh();
    const uintptr_t A = 0x7f0000000000;
    ccai_vm_range *r = NULL;
    size_t f = 0;
    cr_assert_eq(ccai_vm_ranges_add(&rs, A, 8 * VG), CCA_OK);
    r = rs.head;
    ccai_vm_range_set(r, 1, true); /* granule 1 mapped */
    /* [A + VG/2, A + 3VG/2) overlaps granule 1 */
    cca_status st1 = ccai_vm_check_map(&rs, A + VG / 2, VG, &r, &f);
    /* [A, A + VG + 4096) overlaps granule 1 */
    cca_status st2 = ccai_vm_check_map(&rs, A, VG + 4096, &r, &f);
    /* size 0: maps nothing, yet is "allowed" */
    cca_status st3 = ccai_vm_check_map(&rs, A + VG, 0, &r, &f);
    ccai_vm_ranges_free(&rs);
    cr_assert_neq(st1, CCA_OK, "an unaligned map overlapping mapped granule 1 passed the check");
    cr_assert_neq(st2, CCA_OK, "a map of a partial granule overlapping mapped granule 1 passed the check");
    cr_assert_neq(st3, CCA_OK, "a map of 0 bytes passed the check");
}

/* ============================================================================ */
/* 8. thousands of domains with expandable segments: each domain's first block  */
/*    reserves a range of the device's whole size, so address space runs out    */
/*    long before memory does                                                   */
/* ============================================================================ */

Test(domain_hostile, expandable_two_thousand_domains_of_4k_each_fit_an_80g_device, .timeout = 300) {
    cca_host_options o = {.capacity = (size_t)80 << 30, .vm_granularity = 2 * MiB};
    cca_upstream *u = NULL;
    cr_assert_eq(cca_upstream_host_create_with(&o, &u), CCA_OK, "%s", cca_last_error());
    cca_allocator *a = make(u, true, NULL);
    enum { N = 2000 };
    cca_domain **d = calloc(N, sizeof *d);
    void **p = calloc(N, sizeof *p);
    int failed_at = -1;
    char why[512] = "";
    for (int i = 0; i < N; i++) {
        char name[16];
        snprintf(name, sizeof name, "m%d", i);
        cr_assert_eq(cca_domain_create(a, name, &d[i]), CCA_OK);
        cca_status st = cca_alloc_in(a, d[i], 4096, NULL, &p[i]);
        if (st != CCA_OK) {
            failed_at = i;
            snprintf(why, sizeof why, "%s", cca_last_error());
            break;
        }
    }
    cca_stats s = tu_stats(a);
    size_t free_b = 0, total_b = 0;
    cr_assert_eq(cca_upstream_mem_info(u, &free_b, &total_b), CCA_OK);
    for (int i = 0; i < N && d[i]; i++) {
        if (p[i])
            tu_free(a, p[i]);
        cr_assert_eq(cca_domain_destroy(a, d[i], 0, NULL), CCA_OK, "%s", cca_last_error());
    }
    tu_teardown(a, u);
    free(d), free(p);
    cr_assert_eq(failed_at, -1,
                 "domain %d could not allocate 4 KiB: %s (the device had %zu of %zu bytes free; the allocator held "
                 "%zu bytes of address space)",
                 failed_at, why, free_b, total_b, s.address_space_bytes);
}

/* ============================================================================ */
/* 9. hostile handles: another allocator's, destroyed, garbage, freed memory    */
/* ============================================================================ */

static void all_refuse(cca_allocator *a, cca_domain *bad, const char *what) {
    void *p = (void *)0x1;
    cca_domain_stats s;
    cca_domain_report r;
    memset(&r, 0, sizeof r);
    cr_assert_eq(cca_alloc_in(a, bad, 4096, S0, &p), CCA_ERR_INVALID_ARGUMENT, "%s: alloc_in", what);
    cr_assert_null(p);
    cr_assert_eq(cca_get_domain_stats(a, bad, &s), CCA_ERR_INVALID_ARGUMENT, "%s: stats", what);
    cr_assert_eq(cca_domain_release(a, bad, 0, &r), CCA_ERR_INVALID_ARGUMENT, "%s: release", what);
    cr_assert_eq(cca_domain_release(a, bad, CCA_DOMAIN_FORCE, NULL), CCA_ERR_INVALID_ARGUMENT, "%s", what);
    cr_assert_eq(cca_domain_destroy(a, bad, CCA_DOMAIN_FORCE, &r), CCA_ERR_INVALID_ARGUMENT, "%s: destroy", what);
    cr_assert_eq(cca_domain_reserve(a, bad, MiB), CCA_ERR_INVALID_ARGUMENT, "%s: reserve", what);
    cr_assert_eq(cca_check_invariants(a), CCA_OK);
}

Test(domain_hostile, hostile_handles_are_refused_without_being_read) {
    for (int e = 0; e < 2; e++) {
        cca_upstream *u = device(256 * MiB);
        cca_allocator *a = make(u, e, NULL), *b = make(u, e, NULL);
        cca_domain *mine[40], *theirs = NULL;
        char name[16];
        for (int i = 0; i < 40; i++) {
            snprintf(name, sizeof name, "a%d", i);
            cr_assert_eq(cca_domain_create(a, name, &mine[i]), CCA_OK);
        }
        cr_assert_eq(cca_domain_create(b, "b", &theirs), CCA_OK);
        void *q = NULL;
        cr_assert_eq(cca_alloc_in(b, theirs, 4096, S0, &q), CCA_OK);
        all_refuse(a, theirs, "another allocator's");
        /* a destroyed handle whose memory malloc gave to something else */
        cca_domain *gone = mine[7];
        cr_assert_eq(cca_domain_destroy(a, gone, 0, NULL), CCA_OK);
        mine[7] = NULL;
        void *reuse[64];
        for (int i = 0; i < 64; i++) {
            reuse[i] = malloc(sizeof(struct cca_domain));
            memset(reuse[i], 0xff, sizeof(struct cca_domain));
        }
        all_refuse(a, gone, "destroyed (memory reused)");
        for (int i = 0; i < 64; i++)
            free(reuse[i]);
        all_refuse(a, (cca_domain *)(uintptr_t)1, "garbage");
        all_refuse(a, (cca_domain *)(uintptr_t)0xdeadbeefdeadbeefull, "garbage");
        all_refuse(a, (cca_domain *)&name, "the stack");
        all_refuse(a, (cca_domain *)((char *)mine[3] + 8), "inside a live domain");
        all_refuse(a, (cca_domain *)a, "the allocator itself");
        for (int i = 0; i < 40; i++)
            if (mine[i])
                cr_assert_eq(cca_domain_destroy(a, mine[i], 0, NULL), CCA_OK);
        tu_free(b, q);
        cr_assert_eq(cca_destroy(a), CCA_OK);
        cr_assert_eq(cca_empty_cache(b, NULL), CCA_OK);
        cr_assert_eq(cca_destroy(b), CCA_OK);
        cca_upstream_destroy(u);
    }
}
