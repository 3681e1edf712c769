/*
 * test_random_domains.c — allocator/src/domain.c: seeded random sequences over memory domains,
 * checked against a model after every step, with upstream faults injected
 * at random steps.
 *
 * What test_random.c does for one pool and test_domain_stats.c's per-domain
 * sequence does without faults, this suite does for everything at once, in
 * one allocator: up to five domains (the default one included) created,
 * released and destroyed at random, forced or not, with live and pending
 * blocks; cca_alloc_in on random domains and three streams; frees;
 * record_stream then free (pending blocks, whose events the test completes
 * when it chooses); trims to random budgets; empty-cache; footprint arenas;
 * and, at random steps, the k-th upstream call of a chosen kind refused
 * (alloc, free, vm_reserve, vm_map, vm_unmap, vm_release, synchronize),
 * once or for the whole step. Classic segments, and expandable:1 ones over
 * whole maps (the device's default) and over pages, in separate runs.
 *
 * The model is independent of the allocator's counters:
 *   - blocks: each live or pending block with its domain, stream, held
 *     size (cca_block_size, checked against the documented rounding: the
 *     request rounded up to CCA_GRANULARITY, plus at most small_max of
 *     unsplit slack outside the small pool and the arenas), contents
 *     (tu_fill at alloc, checked at free and after every release), and
 *     whether it is pending (predicted at free from the streams that used
 *     it and the block's key stream: its own stream; in an arena, whose
 *     blocks go to any stream, none: the streams are independent, NULL
 *     included, so every stream that used it waits);
 *   - the device: the test's wrapper upstream (tb, device_books.h) records every
 *     range it granted, the domain the call served, and what is mapped in
 *     each range, so a domain's reserved bytes, segments and upstream calls
 *     are known from the device side.
 * After every step: cca_check_invariants; every domain's stats and the
 * allocator's totals equal the model (allocated, requested, active blocks,
 * their peaks, alloc calls, reserved, segments, upstream calls, pending
 * blocks, OOMs); reserved >= allocated; the wrapper's bytes_in_use equals
 * reserved. A failed call is held to what the docs say it leaves alone
 * (a refused release releases nothing or keeps exactly what was refused; a
 * failed alloc changes no live block). At the end everything is destroyed
 * and neither the wrapper nor the simulated device under it holds anything.
 *
 * A four-thread variant (each thread its own domain plus one shared one,
 * on the plain simulated device) checks that the end state is exact.
 *
 * Seeds: a fixed list plus one from time(), each printed; CCA_RANDOM_SEED
 * replays one.
 */
#include "alloc_test_util.h"
#include "device_books.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PG ((size_t)64 * KiB) /* the simulated device's mapping granularity here */
#define ND 5                  /* domain slots: 0 = the default domain, 1..4 created and destroyed */
#define MAXB 72               /* live + pending blocks at most */
#define NS 3                  /* streams */
#define CAPACITY ((size_t)128 * MiB)
#define SMALL_MAX ((size_t)1 * MiB) /* the default small_max */

static const cca_stream streams[NS] = {NULL, (cca_stream)0x100, (cca_stream)0x200};

static size_t round_up(size_t v, size_t to) {
    return (v + to - 1) / to * to;
}

/* ---- the device side: tb (device_books.h) ------------------------------------ *
 * The wrapper over the simulated device keeps the device side of the books:
 * every range granted (alloc, vm_reserve) with the domain slot it was granted
 * for (`serving`, set by the test before each call), the bytes mapped in
 * each range, and successful calls per domain slot; it fails the
 * fail_at[k]-th call of kind k (sticky: every later one too). Events are held
 * until the test (op_progress) or a synchronize completes them. tu_faulty
 * knows how many calls were granted, not which range each touched nor which
 * domain it served, and those give the per-domain books. Not locked: the
 * threaded test uses the plain simulated device. */

static int rx_arena_of(const tb *x, int k) { /* slot k's footprint arena, or -1 */
    for (int i = 0; i < x->nr; i++)
        if (x->r[i].arena && x->r[i].owner == k)
            return i;
    return -1;
}

/* ---- the model ---------------------------------------------------------------- */

typedef struct mblk {
    char *p;
    size_t size, held;
    int k;       /* domain slot */
    int s;       /* stream index */
    bool rec[NS]; /* streams named by cca_record_stream */
    bool arena;  /* lies in its domain's footprint arena: key stream NULL */
    bool pending;
    uint64_t last_event; /* pending: complete once events_done reaches it */
    uint64_t waits;      /* pending: its events (one per stream it waits for) */
    uint64_t seed;
} mblk;

typedef struct mdom {
    bool exists;
    cca_domain *h; /* NULL for slot 0 */
    size_t alloc, alloc_peak, req, req_peak, act, act_peak;
    uint64_t calls;
    uint64_t ups0, downs0; /* the wrapper's per-slot counts when this domain was made */
} mdom;

typedef struct world {
    const char *mode;
    bool expandable;
    uint64_t seed;
    int step;
    const char *op;
    tb x;
    cca_upstream *dev, *u;
    cca_allocator *a;
    mdom D[ND];
    mblk B[MAXB];
    int nb;
    size_t alloc, alloc_peak, req, req_peak, act, act_peak;
    uint64_t calls, frees, ooms;
    uint64_t retired_ups, retired_downs; /* upstream calls of destroyed domains */
    int created;
    /* what the run went through, printed at its end (a run that never met
     * a class of event proves nothing about it) */
    struct {
        uint64_t ooms, pending, arena_blocks, leak_checks, forced_live, refused_releases, failed_syncs, destroyed,
            trim_faults, arenas;
    } seen;
} world;

#define WHERE(w) "%s seed %llu step %d (%s)"
#define WARGS(w) (w)->mode, (unsigned long long)(w)->seed, (w)->step, (w)->op

static void model_add(world *w, const mblk *b) {
    mdom *d = &w->D[b->k];
    d->alloc += b->held, d->req += b->size, d->act++, d->calls++;
    if (d->alloc > d->alloc_peak)
        d->alloc_peak = d->alloc;
    if (d->req > d->req_peak)
        d->req_peak = d->req;
    if (d->act > d->act_peak)
        d->act_peak = d->act;
    w->alloc += b->held, w->req += b->size, w->act++, w->calls++;
    if (w->alloc > w->alloc_peak)
        w->alloc_peak = w->alloc;
    if (w->req > w->req_peak)
        w->req_peak = w->req;
    if (w->act > w->act_peak)
        w->act_peak = w->act;
}

/* The block leaves the requested count (at cca_free, or dropped by force). */
static void model_unrequest(world *w, const mblk *b) {
    w->D[b->k].req -= b->size;
    w->req -= b->size;
}

/* The block leaves the held counts (free completed, or dropped by force). */
static void model_unhold(world *w, const mblk *b) {
    w->D[b->k].alloc -= b->held, w->D[b->k].act--;
    w->alloc -= b->held, w->act--;
}

static void model_remove(world *w, int i) {
    w->B[i] = w->B[--w->nb];
}

/* Pending blocks whose events are done rejoin the pool: every one after a
 * successful synchronize, those at or below events_done at an allocation. */
static void model_complete(world *w, bool all) {
    for (int i = 0; i < w->nb;) {
        mblk *b = &w->B[i];
        if (b->pending && (all || b->last_event <= w->x.events_done)) {
            model_unhold(w, b);
            model_remove(w, i);
        } else {
            i++;
        }
    }
}

static int model_pending(const world *w) {
    int n = 0;
    for (int i = 0; i < w->nb; i++)
        n += w->B[i].pending;
    return n;
}

static size_t slot_live(const world *w, int k, size_t *bytes) {
    size_t n = 0, sum = 0;
    for (int i = 0; i < w->nb; i++)
        if (w->B[i].k == k && !w->B[i].pending)
            n++, sum += w->B[i].held;
    if (bytes)
        *bytes = sum;
    return n;
}

static void check_contents(const world *w, const mblk *b) {
    cr_assert(tu_check_fill(b->p, b->size, b->seed), WHERE(w) ": block %p of %zu bytes (domain %d) overwritten",
              WARGS(w), (void *)b->p, b->size, b->k);
}

static void check_all_contents(const world *w) {
    for (int i = 0; i < w->nb; i++)
        if (!w->B[i].pending)
            check_contents(w, &w->B[i]);
}

#define MEQ(name, got, want)                                                                                           \
    cr_assert_eq((uint64_t)(got), (uint64_t)(want), WHERE(w) ": %s is %llu, the model says %llu", WARGS(w), name,     \
                 (unsigned long long)(got), (unsigned long long)(want))

/* Every account against the model, after every step. */
static void check_world(world *w) {
    cca_status st = cca_check_invariants(w->a);
    cr_assert_eq(st, CCA_OK, WHERE(w) ": invariants: %s", WARGS(w), cca_last_error());
    cr_assert_eq(w->x.stray, 0, WHERE(w) ": the upstream granted memory to a call that serves no domain", WARGS(w));
    cca_stats s = tu_stats(w->a);
    char name[CCA_DOMAIN_NAME_MAX + 64]; /* "domain %d 'NAME' field" */
    for (int k = 0; k < ND; k++) {
        const mdom *m = &w->D[k];
        if (!m->exists) {
            cr_assert_eq(tb_segments(&w->x, k), 0, WHERE(w) ": a destroyed domain's slot %d holds ranges", WARGS(w), k);
            continue;
        }
        cca_domain_stats d;
        st = cca_get_domain_stats(w->a, m->h, &d);
        cr_assert_eq(st, CCA_OK, WHERE(w) ": stats of domain %d: %s", WARGS(w), k, cca_last_error());
#define DEQ(f, v)                                                                                                      \
    do {                                                                                                               \
        snprintf(name, sizeof name, "domain %d '%s' " #f, k, d.name);                                                 \
        MEQ(name, d.f, v);                                                                                             \
    } while (0)
        DEQ(allocated_bytes, m->alloc);
        DEQ(allocated_bytes_peak, m->alloc_peak);
        DEQ(requested_bytes, m->req);
        DEQ(requested_bytes_peak, m->req_peak);
        DEQ(active_blocks, m->act);
        DEQ(active_blocks_peak, m->act_peak);
        DEQ(alloc_calls, m->calls);
        DEQ(reserved_bytes, tb_reserved(&w->x, k));
        DEQ(segments, tb_segments(&w->x, k));
        DEQ(cached_bytes, d.reserved_bytes - d.allocated_bytes);
        DEQ(upstream_allocs, w->x.ups[k] - m->ups0);
        DEQ(upstream_frees, w->x.downs[k] - m->downs0);
#undef DEQ
        cr_assert_geq(d.reserved_bytes, d.allocated_bytes, WHERE(w) ": domain %d reserved < allocated", WARGS(w), k);
        cr_assert_geq(d.reserved_bytes_peak, d.reserved_bytes, WHERE(w), WARGS(w));
    }
    MEQ("allocated_bytes", s.allocated_bytes, w->alloc);
    MEQ("allocated_bytes_peak", s.allocated_bytes_peak, w->alloc_peak);
    MEQ("requested_bytes", s.requested_bytes, w->req);
    MEQ("requested_bytes_peak", s.requested_bytes_peak, w->req_peak);
    MEQ("active_blocks", s.active_blocks, w->act);
    MEQ("active_blocks_peak", s.active_blocks_peak, w->act_peak);
    MEQ("pending_blocks", s.pending_blocks, model_pending(w));
    MEQ("alloc_calls", s.alloc_calls, w->calls);
    MEQ("free_calls", s.free_calls, w->frees);
    MEQ("ooms", s.ooms, w->ooms);
    MEQ("reserved_bytes", s.reserved_bytes, tb_reserved(&w->x, -1));
    MEQ("segments", s.segments, tb_segments(&w->x, -1));
    MEQ("address_space_bytes", s.address_space_bytes, tb_space(&w->x));
    MEQ("cached_bytes", s.cached_bytes, s.reserved_bytes - s.allocated_bytes);
    MEQ("upstream_allocs", s.upstream_allocs,
        w->x.ok[TU_FAULT_ALLOC] + w->x.ok[TU_FAULT_RESERVE] + w->x.ok[TU_FAULT_MAP]);
    MEQ("upstream_frees", s.upstream_frees,
        w->x.ok[TU_FAULT_FREE] + w->x.ok[TU_FAULT_UNMAP] + w->x.ok[TU_FAULT_RELEASE]);
    cr_assert_geq(s.reserved_bytes, s.allocated_bytes, WHERE(w), WARGS(w));
    cca_upstream_stats us = tu_upstream_stats(w->u);
    MEQ("the wrapper's bytes_in_use", us.bytes_in_use, s.reserved_bytes);
    MEQ("the wrapper's vm_reserved_bytes", us.vm_reserved_bytes, s.address_space_bytes);
    uint64_t waits = 0;
    for (int i = 0; i < w->nb; i++)
        waits += w->B[i].pending ? w->B[i].waits : 0;
    MEQ("live events", w->x.events_live, waits);
}

/* ---- operations ---------------------------------------------------------------- */

static size_t random_size(uint64_t *rng) {
    uint64_t r = tu_rand(rng) % 100;
    if (r < 8)
        return 1 + tu_rand(rng) % 512;
    if (r < 62)
        return 1 + tu_rand(rng) % (256 * KiB);
    if (r < 90)
        return 256 * KiB + tu_rand(rng) % (4 * MiB);
    return 10 * MiB + tu_rand(rng) % (6 * MiB);
}

static int random_domain(world *w, uint64_t *rng) {
    for (;;) {
        int k = (int)(tu_rand(rng) % ND);
        if (w->D[k].exists)
            return k;
    }
}

/* The step made calls that may complete pending frees: after a successful
 * synchronize all of them (it completed every event), after an allocation
 * those whose events are done. */
static void settle(world *w, uint64_t syncs_before, bool allocated) {
    if (w->x.ok[TU_FAULT_SYNC] > syncs_before)
        model_complete(w, true);
    else if (allocated)
        model_complete(w, false);
}

static void op_alloc(world *w, uint64_t *rng) {
    int k = random_domain(w, rng);
    size_t size = random_size(rng);
    int si = (int)(tu_rand(rng) % NS);
    void *p = (void *)1;
    w->x.serving = k;
    uint64_t syncs = w->x.ok[TU_FAULT_SYNC];
    cca_status st =
        TU_KEEPS_MESSAGE((k == 0 && tu_rand(rng) % 2) ? cca_alloc(w->a, size, streams[si], &p)
                                                      : cca_alloc_in(w->a, w->D[k].h, size, streams[si], &p),
                         "alloc");
    w->x.serving = -1;
    settle(w, syncs, true);
    if (st == CCA_ERR_OUT_OF_MEMORY) {
        cr_assert_null(p, WHERE(w) ": a failed alloc sets *out to NULL", WARGS(w));
        w->ooms++;
        w->seen.ooms++;
        return;
    }
    cr_assert_eq(st, CCA_OK, WHERE(w) ": alloc_in(domain %d, %zu): %s / %s", WARGS(w), k, size,
                 cca_status_string(st), cca_last_error());
    cr_assert_not_null(p);
    cr_assert_eq((uintptr_t)p % CCA_ALIGNMENT, 0, WHERE(w) ": %p unaligned", WARGS(w), p);
    mblk b = {.p = p, .size = size, .k = k, .s = si, .seed = tu_rand(rng)};
    cr_assert_eq(cca_block_size(w->a, p, &b.held), CCA_OK);
    int ai = rx_arena_of(&w->x, k);
    b.arena = ai >= 0 && (uintptr_t)p >= w->x.r[ai].base && (uintptr_t)p + size <= w->x.r[ai].base + w->x.r[ai].size;
    size_t rounded = round_up(size, CCA_GRANULARITY);
    if (rounded <= SMALL_MAX || b.arena)
        cr_assert_eq(b.held, rounded, WHERE(w) ": %zu bytes (small pool or arena) hold %zu, not %zu", WARGS(w), size,
                     b.held, rounded);
    else
        cr_assert(b.held >= rounded && b.held - rounded <= SMALL_MAX,
                  WHERE(w) ": %zu bytes hold %zu: more than small_max of slack", WARGS(w), size, b.held);
    cca_domain *owner = (cca_domain *)&owner;
    cr_assert_eq(cca_domain_of(w->a, p, &owner), CCA_OK);
    cr_assert_eq(owner, w->D[k].h, WHERE(w) ": cca_domain_of names another domain", WARGS(w));
    for (int i = 0; i < w->nb; i++) /* no overlap with any block the model holds */
        cr_assert(b.p + b.held <= w->B[i].p || w->B[i].p + w->B[i].held <= b.p,
                  WHERE(w) ": %p (%zu) overlaps %p (%zu)", WARGS(w), (void *)b.p, b.held, (void *)w->B[i].p,
                  w->B[i].held);
    tu_fill(p, size, b.seed);
    w->seen.arena_blocks += b.arena;
    w->B[w->nb++] = b;
    model_add(w, &b);
}

/* cca_free of the model's block i: pending exactly when a stream that used
 * it is not its key stream, or it lies in an arena (one event recorded per
 * such stream: no stream is ordered against another, NULL included). */
static void free_block(world *w, int i) {
    mblk *b = &w->B[i];
    check_contents(w, b);
    uint64_t waits = 0;
    for (int s = 0; s < NS; s++)
        waits += (s == b->s || b->rec[s]) && (b->arena || s != b->s);
    uint64_t ev = w->x.events_recorded;
    cca_status st = TU_KEEPS_MESSAGE(cca_free(w->a, b->p), "free");
    cr_assert_eq(st, CCA_OK, WHERE(w) ": free(%p): %s", WARGS(w), (void *)b->p, cca_last_error());
    w->frees++;
    cr_assert_eq(w->x.events_recorded - ev, waits, WHERE(w) ": free of a block used on %llu other streams recorded %llu",
                 WARGS(w), (unsigned long long)waits, (unsigned long long)(w->x.events_recorded - ev));
    model_unrequest(w, b);
    if (waits) {
        b->pending = true;
        w->seen.pending++;
        b->waits = waits;
        b->last_event = w->x.events_recorded;
    } else {
        model_unhold(w, b);
        model_remove(w, i);
    }
}

static void op_free(world *w, uint64_t *rng) {
    int live[MAXB], n = 0;
    for (int i = 0; i < w->nb; i++)
        if (!w->B[i].pending)
            live[n++] = i;
    if (n)
        free_block(w, live[tu_rand(rng) % (uint64_t)n]);
}

static void op_record(world *w, uint64_t *rng) {
    if (!w->nb)
        return;
    mblk *b = &w->B[tu_rand(rng) % (uint64_t)w->nb];
    if (b->pending)
        return;
    int s = (int)(tu_rand(rng) % NS);
    cca_status st = TU_KEEPS_MESSAGE(cca_record_stream(w->a, b->p, streams[s]), "record_stream");
    cr_assert_eq(st, CCA_OK, WHERE(w) ": record_stream: %s", WARGS(w), cca_last_error());
    b->rec[s] = true;
}

/* The device finishes the work queued so far: every event recorded completes. */
static void op_progress(world *w) {
    tb_progress_all(&w->x);
}

static void op_trim(world *w, uint64_t *rng, bool empty) {
    cca_stats before = tu_stats(w->a);
    size_t keep = empty ? 0 : (size_t)(tu_rand(rng) % (before.reserved_bytes + 8 * MiB + 1));
    uint64_t syncs = w->x.ok[TU_FAULT_SYNC], injected = w->x.injected;
    uint64_t ups = w->x.ok[TU_FAULT_ALLOC] + w->x.ok[TU_FAULT_RESERVE] + w->x.ok[TU_FAULT_MAP];
    cca_release_report rep;
    memset(&rep, 0xab, sizeof rep);
    cca_status st = TU_KEEPS_MESSAGE(empty ? cca_empty_cache(w->a, &rep) : cca_trim(w->a, keep, &rep), "release");
    settle(w, syncs, false);
    bool synced = w->x.ok[TU_FAULT_SYNC] > syncs;
    cca_stats s = tu_stats(w->a);
    cr_assert_eq(w->x.ok[TU_FAULT_ALLOC] + w->x.ok[TU_FAULT_RESERVE] + w->x.ok[TU_FAULT_MAP], ups,
                 WHERE(w) ": a trim asked the upstream for memory", WARGS(w));
    if (w->x.injected == injected) {
        cr_assert_eq(st, CCA_OK, WHERE(w) ": trim(%zu) with no fault: %s", WARGS(w), keep, cca_last_error());
    } else {
        cr_assert(st == CCA_OK || st == CCA_ERR_UPSTREAM, WHERE(w) ": trim under a fault: %s", WARGS(w),
                  cca_status_string(st));
        cr_assert(st == CCA_ERR_UPSTREAM || synced, WHERE(w) ": a failed synchronize must be reported", WARGS(w));
        w->seen.trim_faults += st != CCA_OK;
    }
    cr_assert_eq(rep.bytes_still_reserved, s.reserved_bytes, WHERE(w), WARGS(w));
    cr_assert_eq(rep.bytes_released + rep.bytes_still_reserved, before.reserved_bytes,
                 WHERE(w) ": released %zu + still %zu != %zu before", WARGS(w), rep.bytes_released,
                 rep.bytes_still_reserved, before.reserved_bytes);
    if (st == CCA_OK && w->nb == 0) {
        if (empty || keep == 0) {
            cr_assert_eq(s.reserved_bytes, 0, WHERE(w) ": empty-cache with nothing live kept %zu", WARGS(w),
                         s.reserved_bytes);
        }
        if (empty)
            cr_assert_eq(s.address_space_bytes, 0, WHERE(w) ": empty-cache with nothing live kept %zu bytes of ranges",
                         WARGS(w), s.address_space_bytes);
    }
    if (st == CCA_OK && !w->expandable)
        cr_assert(s.reserved_bytes <= keep || rep.segments_kept == 0, WHERE(w) ": trim(%zu) kept %zu with %zu kept",
                  WARGS(w), keep, s.reserved_bytes, rep.segments_kept);
    check_all_contents(w);
}

/* Slot k's blocks after a forced release: gone from the model; their pointers
 * are refused. */
static void forget_domain_blocks(world *w, int k, void **gone, int *ngone) {
    for (int i = 0; i < w->nb;) {
        mblk *b = &w->B[i];
        if (b->k != k) {
            i++;
            continue;
        }
        cr_assert(!b->pending, WHERE(w) ": a pending block outlived the release's synchronize", WARGS(w));
        if (*ngone < MAXB)
            gone[(*ngone)++] = b->p;
        model_unrequest(w, b);
        model_unhold(w, b);
        model_remove(w, i);
    }
}

static void op_release(world *w, uint64_t *rng, bool destroy) {
    int k = destroy ? 1 + (int)(tu_rand(rng) % (ND - 1)) : random_domain(w, rng);
    if (!w->D[k].exists)
        return;
    unsigned flags = tu_rand(rng) % 3 == 0 ? CCA_DOMAIN_FORCE : 0;
    cca_domain *h = w->D[k].h;
    cca_domain_stats before;
    cr_assert_eq(cca_get_domain_stats(w->a, h, &before), CCA_OK);
    size_t live_bytes = 0, live = slot_live(w, k, &live_bytes);
    uint64_t syncs = w->x.ok[TU_FAULT_SYNC], injected = w->x.injected, downs = w->x.downs[k];
    cca_live_block leaks[8];
    cca_domain_report rep;
    memset(&rep, 0, sizeof rep);
    rep.leaks = leaks;
    rep.leaks_cap = tu_rand(rng) % 9;
    cca_status st =
        TU_KEEPS_MESSAGE(destroy ? cca_domain_destroy(w->a, h, flags, &rep) : cca_domain_release(w->a, h, flags, &rep),
                         "domain release");
    bool synced = w->x.ok[TU_FAULT_SYNC] > syncs;
    settle(w, syncs, false);
    if (!synced) { /* the synchronize failed: nothing released */
        cr_assert_eq(w->x.injected - injected, 1, WHERE(w), WARGS(w));
        cr_assert_eq(st, CCA_ERR_UPSTREAM, WHERE(w) ": release after a failed synchronize: %s", WARGS(w),
                     cca_status_string(st));
        cr_assert_eq(w->x.downs[k], downs, WHERE(w) ": released memory after a failed synchronize", WARGS(w));
        cr_assert_eq(rep.bytes_released, 0, WHERE(w), WARGS(w));
        w->seen.failed_syncs++;
        check_all_contents(w);
        return;
    }
    if (live && !(flags & CCA_DOMAIN_FORCE)) {
        /* a leak check: nothing released, every live block listed, all intact */
        cr_assert_eq(st, CCA_ERR_LIVE_BLOCKS, WHERE(w) ": release with %zu live: %s", WARGS(w), live,
                     cca_status_string(st));
        cr_assert_eq(w->x.downs[k], downs, WHERE(w) ": a refused release gave memory back", WARGS(w));
        cr_assert_eq(rep.bytes_released, 0, WHERE(w), WARGS(w));
        cr_assert_eq(rep.segments_released, 0, WHERE(w), WARGS(w));
        cr_assert_eq(rep.live_blocks, live, WHERE(w) ": report lists %zu live blocks, model %zu", WARGS(w),
                     rep.live_blocks, live);
        cr_assert_eq(rep.live_bytes, live_bytes, WHERE(w), WARGS(w));
        cr_assert_eq(rep.leaks_written, live < rep.leaks_cap ? live : rep.leaks_cap, WHERE(w), WARGS(w));
        cr_assert_eq(rep.bytes_still_reserved, before.reserved_bytes, WHERE(w), WARGS(w));
        for (size_t j = 0; j < rep.leaks_written; j++) {
            int found = -1;
            for (int i = 0; i < w->nb; i++)
                if (w->B[i].p == leaks[j].ptr)
                    found = i;
            cr_assert(found >= 0, WHERE(w) ": leak %p is not a block of the model", WARGS(w), leaks[j].ptr);
            const mblk *b = &w->B[found];
            cr_assert_eq(b->k, k, WHERE(w) ": leak %p belongs to domain %d", WARGS(w), leaks[j].ptr, b->k);
            cr_assert_eq(leaks[j].size, b->held, WHERE(w), WARGS(w));
            cr_assert_eq(leaks[j].requested, b->size, WHERE(w), WARGS(w));
            cr_assert_eq(leaks[j].stream, streams[b->s], WHERE(w), WARGS(w));
            cr_assert_eq(leaks[j].pending, 0, WHERE(w), WARGS(w));
        }
        w->seen.leak_checks++;
        check_all_contents(w);
        return;
    }
    void *gone[MAXB];
    int ngone = 0;
    forget_domain_blocks(w, k, gone, &ngone);
    w->seen.forced_live += ngone > 0;
    cr_assert_eq(rep.live_blocks, live, WHERE(w), WARGS(w));
    cr_assert_eq(rep.live_bytes, live_bytes, WHERE(w), WARGS(w));
    cca_domain_stats after;
    if (st == CCA_OK) {
        cr_assert_eq(tb_segments(&w->x, k), 0, WHERE(w) ": an OK release left ranges in the domain", WARGS(w));
        cr_assert_eq(rep.bytes_released, before.reserved_bytes, WHERE(w), WARGS(w));
        cr_assert_eq(rep.bytes_still_reserved, 0, WHERE(w), WARGS(w));
    } else {
        cr_assert_eq(st, CCA_ERR_UPSTREAM, WHERE(w) ": release: %s / %s", WARGS(w), cca_status_string(st),
                     cca_last_error());
        cr_assert_gt(w->x.injected, injected, WHERE(w) ": CCA_ERR_UPSTREAM with no fault injected", WARGS(w));
        cr_assert_gt(tb_segments(&w->x, k), 0, WHERE(w) ": a refused release keeps what was refused", WARGS(w));
        w->seen.refused_releases++;
        cr_assert_eq(rep.bytes_still_reserved, tb_reserved(&w->x, k), WHERE(w), WARGS(w));
        cr_assert_eq(rep.bytes_released, before.reserved_bytes - tb_reserved(&w->x, k), WHERE(w), WARGS(w));
    }
    if (destroy && st == CCA_OK) {
        w->retired_ups += w->x.ups[k] - w->D[k].ups0;
        w->retired_downs += w->x.downs[k] - w->D[k].downs0;
        memset(&w->D[k], 0, sizeof w->D[k]);
        w->seen.destroyed++;
        cr_assert_eq(cca_get_domain_stats(w->a, h, &after), CCA_ERR_INVALID_ARGUMENT,
                     WHERE(w) ": a destroyed handle is refused", WARGS(w));
    } else {
        cr_assert_eq(cca_get_domain_stats(w->a, h, &after), CCA_OK, WHERE(w) ": the domain stays usable", WARGS(w));
    }
    for (int j = 0; j < ngone; j++) { /* forced: the pointers are invalid now */
        cca_domain *o = NULL;
        cr_assert_eq(cca_free(w->a, gone[j]), CCA_ERR_INVALID_POINTER, WHERE(w) ": freed a forced-out pointer",
                     WARGS(w));
        cr_assert_eq(cca_domain_of(w->a, gone[j], &o), CCA_ERR_INVALID_POINTER, WHERE(w), WARGS(w));
    }
    check_all_contents(w);
}

static void op_create(world *w) {
    for (int k = 1; k < ND; k++) {
        if (w->D[k].exists)
            continue;
        char name[32];
        snprintf(name, sizeof name, "d%d", ++w->created);
        cca_domain *h = NULL;
        cr_assert_eq(cca_domain_create(w->a, name, &h), CCA_OK, WHERE(w) ": %s", WARGS(w), cca_last_error());
        w->D[k] = (mdom){.exists = true, .h = h, .ups0 = w->x.ups[k], .downs0 = w->x.downs[k]};
        return;
    }
}

static void op_reserve(world *w, uint64_t *rng) {
    int k = random_domain(w, rng);
    size_t bytes = 1 + (size_t)(tu_rand(rng) % (24 * MiB));
    bool had = rx_arena_of(&w->x, k) >= 0;
    w->x.serving = k;
    w->x.capturing = true;
    w->x.candidate = -1;
    uint64_t syncs = w->x.ok[TU_FAULT_SYNC];
    cca_status st = TU_KEEPS_MESSAGE(cca_domain_reserve(w->a, w->D[k].h, bytes), "domain_reserve");
    w->x.serving = -1;
    w->x.capturing = false;
    settle(w, syncs, false);
    if (had) {
        cr_assert_eq(st, CCA_ERR_INVALID_ARGUMENT, WHERE(w) ": a second arena: %s", WARGS(w), cca_status_string(st));
        return;
    }
    if (st != CCA_OK) {
        cr_assert_eq(st, CCA_ERR_OUT_OF_MEMORY, WHERE(w) ": reserve(%zu): %s / %s", WARGS(w), bytes,
                     cca_status_string(st), cca_last_error());
        return;
    }
    int c = w->x.candidate;
    cr_assert(c >= 0, WHERE(w) ": an arena with no upstream range", WARGS(w));
    size_t want = round_up(bytes, w->expandable ? PG : CCA_GRANULARITY);
    cr_assert_eq(w->x.r[c].size, want, WHERE(w) ": arena of %zu bytes is %zu", WARGS(w), bytes, w->x.r[c].size);
    if (w->expandable)
        cr_assert_eq(w->x.r[c].mapped, want, WHERE(w) ": an arena is mapped whole", WARGS(w));
    w->x.r[c].arena = true;
    w->seen.arenas++;
}

/* Arm a fault for this step: the n-th call from now of one kind fails,
 * sometimes every later one of the step too. */
static const char *arm_fault(world *w, uint64_t *rng) {
    static const tu_fault_kind classic_kinds[] = {TU_FAULT_ALLOC, TU_FAULT_FREE, TU_FAULT_SYNC};
    static const tu_fault_kind vm_kinds[] = {TU_FAULT_ALLOC,  TU_FAULT_FREE,    TU_FAULT_RESERVE, TU_FAULT_MAP,
                                             TU_FAULT_UNMAP, TU_FAULT_RELEASE, TU_FAULT_SYNC};
    tu_fault_kind k = w->expandable ? vm_kinds[tu_rand(rng) % 7] : classic_kinds[tu_rand(rng) % 3];
    w->x.fail_at[k] = w->x.calls[k] + 1 + tu_rand(rng) % 2;
    w->x.sticky[k] = tu_rand(rng) % 3 == 0;
    return tu_fault_names[k];
}

/* ---- one run ------------------------------------------------------------------- */

/* The segments of a run: classic, expandable over whole maps (the device's
 * default backing), expandable over pages (CCA_VM_PAGES). */
typedef enum run_kind { RUN_CLASSIC, RUN_EXPANDABLE, RUN_EXPANDABLE_PAGES } run_kind;

static void run(run_kind kind, uint64_t seed, int steps, unsigned fault_pct) {
    world *w = calloc(1, sizeof *w);
    cr_assert_not_null(w);
    bool expandable = kind != RUN_CLASSIC;
    w->mode = kind == RUN_CLASSIC ? "classic" : kind == RUN_EXPANDABLE ? "expandable" : "expandable, pages";
    w->expandable = expandable;
    w->seed = seed;
    w->step = -1;
    w->op = "setup";
    fprintf(stderr, "test_random_domains: %s, seed %llu (CCA_RANDOM_SEED=%llu replays it)\n", w->mode,
            (unsigned long long)seed, (unsigned long long)seed);
    cca_host_options o = {.capacity = CAPACITY,
                          .vm_granularity = PG,
                          .vm_backing = kind == RUN_EXPANDABLE_PAGES ? CCA_VM_PAGES : CCA_VM_WHOLE_MAPS};
    cr_assert_eq(cca_upstream_host_create_with(&o, &w->dev), CCA_OK, "%s", cca_last_error());
    w->u = tb_create(&w->x, w->dev, "rx", PG, streams, NS);
    w->x.serving = -1;
    w->a = tu_allocator(w->u, expandable ? "log_oom:0,expandable:1" : "log_oom:0,expandable:0");
    w->D[0].exists = true;
    for (int k = 1; k < ND - 1; k++)
        op_create(w);
    check_world(w);
    uint64_t rng = seed;
    char what[64];
    for (w->step = 0; w->step < steps; w->step++) {
        const char *fault = NULL;
        if (tu_rand(&rng) % 100 < fault_pct)
            fault = arm_fault(w, &rng);
        uint64_t r = tu_rand(&rng) % 1000;
        const char *op;
        if ((r < 380 && w->nb < MAXB) || w->nb == 0)
            op = "alloc", op_alloc(w, &rng);
        else if (r < 620)
            op = "free", op_free(w, &rng);
        else if (r < 690)
            op = "record_stream", op_record(w, &rng);
        else if (r < 740)
            op = "progress", op_progress(w);
        else if (r < 800)
            op = "trim", op_trim(w, &rng, false);
        else if (r < 815)
            op = "empty_cache", op_trim(w, &rng, true);
        else if (r < 880)
            op = "release", op_release(w, &rng, false);
        else if (r < 930)
            op = "destroy", op_release(w, &rng, true);
        else if (r < 960)
            op = "create", op_create(w);
        else
            op = "reserve", op_reserve(w, &rng);
        snprintf(what, sizeof what, "%s%s%s", op, fault ? ", fault: " : "", fault ? fault : "");
        w->op = what;
        tb_faults_off(&w->x);
        check_world(w);
    }
    fprintf(stderr,
            "  %s seed %llu: %llu faults injected, %llu OOMs, %llu pending frees, %llu arenas (%llu blocks in them), "
            "%llu leak checks, %llu forced with live blocks, %llu releases refused, %llu failed synchronizes, "
            "%llu trims failed, %llu domains destroyed\n",
            w->mode, (unsigned long long)seed, (unsigned long long)w->x.injected, (unsigned long long)w->seen.ooms,
            (unsigned long long)w->seen.pending, (unsigned long long)w->seen.arenas,
            (unsigned long long)w->seen.arena_blocks, (unsigned long long)w->seen.leak_checks,
            (unsigned long long)w->seen.forced_live, (unsigned long long)w->seen.refused_releases,
            (unsigned long long)w->seen.failed_syncs, (unsigned long long)w->seen.trim_faults,
            (unsigned long long)w->seen.destroyed);
    /* the end: free what is live, destroy the domains (some left to cca_destroy) */
    w->op = "end";
    check_all_contents(w);
    bool leave_live = tu_rand(&rng) % 2;
    for (int i = w->nb - 1; i >= 0; i--) /* a freed block moves the last one to i: already seen */
        if (!w->B[i].pending && !(leave_live && i == 0))
            free_block(w, i);
    check_world(w);
    for (int k = 1; k < ND; k++)
        if (w->D[k].exists && tu_rand(&rng) % 2) {
            size_t live = slot_live(w, k, NULL);
            uint64_t syncs = w->x.ok[TU_FAULT_SYNC];
            cca_status st = cca_domain_destroy(w->a, w->D[k].h, 0, NULL);
            settle(w, syncs, false);
            cr_assert_eq(st, live ? CCA_ERR_LIVE_BLOCKS : CCA_OK, "end: destroy: %s", cca_status_string(st));
            if (st == CCA_OK) {
                w->retired_ups += w->x.ups[k] - w->D[k].ups0;
                w->retired_downs += w->x.downs[k] - w->D[k].downs0;
                memset(&w->D[k], 0, sizeof w->D[k]);
            }
        }
    check_world(w);
    size_t live = 0;
    for (int i = 0; i < w->nb; i++)
        live += !w->B[i].pending;
    cca_status st = TU_KEEPS_MESSAGE(cca_destroy(w->a), "destroy");
    cr_assert_eq(st, live ? CCA_ERR_LIVE_BLOCKS : CCA_OK, "end: cca_destroy with %zu live: %s / %s", live,
                 cca_status_string(st), cca_last_error());
    cca_upstream_stats us = tu_upstream_stats(w->u);
    cr_assert_eq(us.bytes_in_use, 0, "end: the wrapper still holds %zu bytes", us.bytes_in_use);
    cr_assert_eq(us.vm_reserved_bytes, 0, "end: the wrapper still reserves %zu bytes", us.vm_reserved_bytes);
    cr_assert_eq(w->x.nr, 0, "end: %d ranges not given back", w->x.nr);
    cr_assert_eq(w->x.events_live, 0, "end: %llu events not destroyed", (unsigned long long)w->x.events_live);
    cca_upstream_destroy(w->u);
    us = tu_upstream_stats(w->dev);
    cr_assert_eq(us.bytes_in_use, 0, "end: the device still holds %zu bytes", us.bytes_in_use);
    cr_assert_eq(us.vm_reserved_bytes, 0);
    cr_assert_eq(us.allocations, 0);
    cca_upstream_destroy(w->dev);
    free(w);
}

/* fault_pct: the share of steps (in percent) with a fault armed. */
static void run_seeds(run_kind kind, int steps, unsigned fault_pct) {
    const char *only = getenv("CCA_RANDOM_SEED");
    if (only && *only) {
        run(kind, strtoull(only, NULL, 0), steps, fault_pct);
        return;
    }
    const uint64_t seeds[] = {1, 0xd0d0, 20261124};
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++)
        run(kind, seeds[i], steps, fault_pct);
    run(kind, (uint64_t)time(NULL), steps, fault_pct);
}

Test(random_domains, classic, .timeout = 120) {
    run_seeds(RUN_CLASSIC, 2500, 14);
}

Test(random_domains, expandable, .timeout = 120) {
    run_seeds(RUN_EXPANDABLE, 2500, 14);
}

Test(random_domains, expandable_pages, .timeout = 120) {
    run_seeds(RUN_EXPANDABLE_PAGES, 2500, 14);
}

/* Faults at most steps: refusals meet refusals (a trim's refused unmap after
 * a refused map, a release after a kept range). */
Test(random_domains, classic_faults_at_most_steps, .timeout = 120) {
    run_seeds(RUN_CLASSIC, 800, 60);
}

Test(random_domains, expandable_faults_at_most_steps, .timeout = 120) {
    run_seeds(RUN_EXPANDABLE, 800, 60);
}

Test(random_domains, expandable_pages_faults_at_most_steps, .timeout = 120) {
    run_seeds(RUN_EXPANDABLE_PAGES, 800, 60);
}

/* ---- four threads: each its own domain and one shared ------------------------- *
 * On the plain simulated device (thread-safe; its events complete at once, so
 * no free is pending). A thread alone touches its own domain, so it checks
 * that domain's counters against its model after every step, while the other
 * threads allocate, free, trim and release around it; the shared domain and
 * the totals are checked once every thread is done. */

enum { TT = 4, TSTEPS = 600, TMAX = 24 };

typedef struct tblk {
    char *p;
    size_t size, held;
    bool shared;
    uint64_t seed;
} tblk;

typedef struct tw {
    pthread_t th;
    int id;
    cca_allocator *a;
    cca_domain *own, *shared;
    uint64_t rng;
    tblk b[TMAX];
    int n;
    size_t alloc, alloc_peak, req, req_peak, act, act_peak; /* own domain */
    uint64_t calls;
    size_t s_alloc, s_req, s_act; /* this thread's part of the shared domain */
    uint64_t s_calls;
    char err[512];
} tw;

static bool tw_fail(tw *w, int step, const char *what, unsigned long long got, unsigned long long want) {
    snprintf(w->err, sizeof w->err, "thread %d step %d: %s is %llu, expected %llu (%s)", w->id, step, what, got, want,
             cca_last_error());
    return false;
}

static bool tw_step(tw *w, int step) {
    uint64_t r = tu_rand(&w->rng) % 100;
    cca_status st;
    if ((r < 45 && w->n < TMAX) || w->n == 0) {
        tblk b = {.size = 1 + (size_t)(tu_rand(&w->rng) % (2 * MiB)), .shared = tu_rand(&w->rng) % 3 == 0,
                  .seed = tu_rand(&w->rng)};
        void *p = NULL;
        st = cca_alloc_in(w->a, b.shared ? w->shared : w->own, b.size, streams[tu_rand(&w->rng) % NS], &p);
        if (st != CCA_OK || !p)
            return tw_fail(w, step, "alloc status", st, CCA_OK);
        b.p = p;
        if (cca_block_size(w->a, p, &b.held) != CCA_OK)
            return tw_fail(w, step, "block_size", 1, 0);
        tu_fill(p, b.size, b.seed);
        w->b[w->n++] = b;
        if (b.shared) {
            w->s_alloc += b.held, w->s_req += b.size, w->s_act++, w->s_calls++;
        } else {
            w->alloc += b.held, w->req += b.size, w->act++, w->calls++;
            w->alloc_peak = w->alloc > w->alloc_peak ? w->alloc : w->alloc_peak;
            w->req_peak = w->req > w->req_peak ? w->req : w->req_peak;
            w->act_peak = w->act > w->act_peak ? w->act : w->act_peak;
        }
    } else if (r < 85) {
        int i = (int)(tu_rand(&w->rng) % (uint64_t)w->n);
        tblk b = w->b[i];
        if (!tu_check_fill(b.p, b.size, b.seed))
            return tw_fail(w, step, "block contents intact", 0, 1);
        if ((st = cca_free(w->a, b.p)) != CCA_OK)
            return tw_fail(w, step, "free status", st, CCA_OK);
        w->b[i] = w->b[--w->n];
        if (b.shared)
            w->s_alloc -= b.held, w->s_req -= b.size, w->s_act--;
        else
            w->alloc -= b.held, w->req -= b.size, w->act--;
    } else if (r < 92) {
        tblk *b = &w->b[tu_rand(&w->rng) % (uint64_t)w->n];
        if ((st = cca_record_stream(w->a, b->p, streams[tu_rand(&w->rng) % NS])) != CCA_OK)
            return tw_fail(w, step, "record_stream status", st, CCA_OK);
    } else if (r < 96) {
        if ((st = cca_trim(w->a, (size_t)(tu_rand(&w->rng) % 64) * MiB, NULL)) != CCA_OK)
            return tw_fail(w, step, "trim status", st, CCA_OK);
    } else {
        cca_domain_report rep;
        memset(&rep, 0, sizeof rep);
        st = cca_domain_release(w->a, w->own, 0, &rep);
        if (st != (w->act ? CCA_ERR_LIVE_BLOCKS : CCA_OK))
            return tw_fail(w, step, "own release status", st, w->act ? CCA_ERR_LIVE_BLOCKS : CCA_OK);
        if (rep.live_blocks != w->act || rep.live_bytes != w->alloc)
            return tw_fail(w, step, "leak report's live bytes", rep.live_bytes, w->alloc);
    }
    cca_domain_stats d;
    if ((st = cca_get_domain_stats(w->a, w->own, &d)) != CCA_OK)
        return tw_fail(w, step, "domain stats status", st, CCA_OK);
#define TEQ(f, v)                                                                                                      \
    if ((uint64_t)d.f != (uint64_t)(v))                                                                                \
        return tw_fail(w, step, "own domain " #f, (unsigned long long)d.f, (unsigned long long)(v));
    TEQ(allocated_bytes, w->alloc);
    TEQ(allocated_bytes_peak, w->alloc_peak);
    TEQ(requested_bytes, w->req);
    TEQ(requested_bytes_peak, w->req_peak);
    TEQ(active_blocks, w->act);
    TEQ(active_blocks_peak, w->act_peak);
    TEQ(alloc_calls, w->calls);
#undef TEQ
    if (d.reserved_bytes < d.allocated_bytes)
        return tw_fail(w, step, "own reserved >= allocated", d.reserved_bytes, d.allocated_bytes);
    return true;
}

static void *tw_main(void *arg) {
    tw *w = arg;
    for (int step = 0; step < TSTEPS; step++)
        if (!tw_step(w, step))
            break;
    return NULL;
}

static void threads_run(bool expandable, uint64_t seed) {
    fprintf(stderr, "test_random_domains: threads, %s, seed %llu\n", expandable ? "expandable" : "classic",
            (unsigned long long)seed);
    cca_host_options o = {.capacity = 1 * GiB, .vm_granularity = PG};
    cca_upstream *u = NULL;
    cr_assert_eq(cca_upstream_host_create_with(&o, &u), CCA_OK, "%s", cca_last_error());
    cca_allocator *a = tu_allocator(u, expandable ? "log_oom:0,expandable:1" : "log_oom:0,expandable:0");
    cca_domain *shared = NULL;
    cr_assert_eq(cca_domain_create(a, "shared", &shared), CCA_OK);
    static tw w[TT];
    memset(w, 0, sizeof w);
    for (int t = 0; t < TT; t++) {
        char name[16];
        snprintf(name, sizeof name, "t%d", t);
        w[t] = (tw){.id = t, .a = a, .shared = shared, .rng = seed + (uint64_t)t * 0x9E3779B97F4A7C15ull};
        cr_assert_eq(cca_domain_create(a, name, &w[t].own), CCA_OK);
    }
    for (int t = 0; t < TT; t++)
        cr_assert_eq(pthread_create(&w[t].th, NULL, tw_main, &w[t]), 0);
    for (int t = 0; t < TT; t++)
        pthread_join(w[t].th, NULL);
    for (int t = 0; t < TT; t++)
        cr_assert_eq(w[t].err[0], 0, "seed %llu: %s", (unsigned long long)seed, w[t].err);
    /* the end state, exact */
    tu_check(a);
    size_t s_alloc = 0, s_req = 0, s_act = 0, alloc = 0, req = 0, act = 0;
    uint64_t s_calls = 0, calls = 0;
    for (int t = 0; t < TT; t++) {
        cca_domain_stats d;
        cr_assert_eq(cca_get_domain_stats(a, w[t].own, &d), CCA_OK);
        cr_assert_eq(d.allocated_bytes, w[t].alloc, "thread %d's domain", t);
        cr_assert_eq(d.requested_bytes, w[t].req);
        cr_assert_eq(d.active_blocks, w[t].act);
        cr_assert_eq(d.alloc_calls, w[t].calls);
        cr_assert_eq(d.allocated_bytes_peak, w[t].alloc_peak);
        s_alloc += w[t].s_alloc, s_req += w[t].s_req, s_act += w[t].s_act, s_calls += w[t].s_calls;
        alloc += w[t].alloc + w[t].s_alloc, req += w[t].req + w[t].s_req, act += w[t].act + w[t].s_act;
        calls += w[t].calls + w[t].s_calls;
    }
    cca_domain_stats d;
    cr_assert_eq(cca_get_domain_stats(a, shared, &d), CCA_OK);
    cr_assert_eq(d.allocated_bytes, s_alloc, "shared domain: %zu, the threads' sum %zu", d.allocated_bytes, s_alloc);
    cr_assert_eq(d.requested_bytes, s_req);
    cr_assert_eq(d.active_blocks, s_act);
    cr_assert_eq(d.alloc_calls, s_calls);
    cr_assert_eq(cca_get_domain_stats(a, NULL, &d), CCA_OK);
    cr_assert_eq(d.active_blocks, 0, "nothing in the default domain");
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.allocated_bytes, alloc);
    cr_assert_eq(s.requested_bytes, req);
    cr_assert_eq(s.active_blocks, act);
    cr_assert_eq(s.pending_blocks, 0);
    cr_assert_eq(s.alloc_calls, calls);
    cr_assert_eq(tu_upstream_stats(u).bytes_in_use, s.reserved_bytes);
    for (int t = 0; t < TT; t++) {
        for (int i = 0; i < w[t].n; i++) {
            cr_assert(tu_check_fill(w[t].b[i].p, w[t].b[i].size, w[t].b[i].seed), "thread %d block %d", t, i);
            tu_free(a, w[t].b[i].p);
        }
        cr_assert_eq(cca_domain_destroy(a, w[t].own, 0, NULL), CCA_OK, "%s", cca_last_error());
    }
    cr_assert_eq(cca_domain_destroy(a, shared, 0, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    s = tu_stats(a);
    cr_assert_eq(s.reserved_bytes, 0);
    cr_assert_eq(s.address_space_bytes, 0);
    cr_assert_eq(cca_destroy(a), CCA_OK);
    cca_upstream_stats us = tu_upstream_stats(u);
    cr_assert_eq(us.bytes_in_use, 0);
    cr_assert_eq(us.vm_reserved_bytes, 0);
    cca_upstream_destroy(u);
}

static uint64_t threads_seed(void) {
    const char *only = getenv("CCA_RANDOM_SEED");
    return only && *only ? strtoull(only, NULL, 0) : (uint64_t)time(NULL);
}

Test(random_domains, four_threads_classic, .timeout = 120) {
    threads_run(false, 7);
    threads_run(false, threads_seed());
}

Test(random_domains, four_threads_expandable, .timeout = 120) {
    threads_run(true, 7);
    threads_run(true, threads_seed());
}
