/*
 * test_random_streams.c — allocator/src/core/stream.c: deferred frees against pages, checked against a
 * model after every step: seeded random sequences of alloc / free /
 * record_stream on three streams whose events the test holds NOT READY or
 * lets complete (stream by stream, in order, as a GPU completes them),
 * trims to random budgets, empty-cache and, with the growth policy, memory
 * domains (release and destroy, forced or not, footprint arenas); classic
 * and expandable segments (over pages and over whole maps, cut at several
 * chunks, under max_reserved caps that are no multiple of the page; the
 * growth rule's least step and largest map set through its test hook,
 * pages_rule.h),
 * growth and greedy; peaks reset at random. Upstream calls fail on
 * demand: the k-th call from now, of any kind (alloc, free, vm_reserve,
 * vm_map, vm_unmap, vm_release, synchronize, event_record), once or for
 * the rest of the step; one test replays a fixed sequence once per call
 * index k, failing exactly the k-th call of the whole run.
 *
 * The device side is the test's wrapper (tb, device_books.h) over the simulated
 * device: every range it granted, a bit per granule mapped, the streams'
 * events (numbered per stream; complete when the stream's progress reached
 * them; a stream marked idle completes its events as they are recorded; a
 * synchronize completes them all unless the test says the device keeps
 * them incomplete). The wrapper checks, at the moment of the call:
 *   - no vm_unmap and no classic free touches a live block, or a pending
 *     block that is not yet safe: safe once every event it waits on is
 *     complete and, for a block whose event record and fallback
 *     synchronize failed, once a synchronize succeeded after its free;
 *   - a vm_unmap follows a synchronize that succeeded in the same API call
 *     (unmapping does not wait for queued work), unless it undoes pages
 *     mapped in that same call;
 *   - after an unmap, touching the granules faults (EFAULT);
 *   - during a trim, memory is given back only while the device holds more
 *     than the budget (nothing beyond "until reserved <= keep").
 * The model (blocks, independent of the allocator's counters) predicts
 * from the wrapper's log of each call: which frees defer (the streams that
 * used a block other than its key stream: its own stream; in an arena,
 * every stream that used it, NULL included: the streams are independent,
 * as CUDA's non-blocking ones, NULL ordered against none), the events
 * recorded and in which order, the fallback
 * synchronize when a record fails, cca_free's status, when pending blocks
 * rejoin the pool (an allocation polls; a successful synchronize in any
 * call but cca_free completes everything complete), and each call's
 * status and report. After every step: cca_check_invariants; the stats
 * (allocated, requested, active and pending blocks, reserved, mapped,
 * address space, segments, upstream calls, maps, unmaps, pages, OOMs)
 * equal the model and the device; every live and pending block lies on
 * mapped granules with its contents intact (a pending block is never
 * handed out again); events alive equal the pending blocks' waits; per
 * domain, allocated, requested, active, reserved and segments, and the
 * peaks of the first three (since the domain was made or the last
 * cca_reset_peak_stats, after which every reserved peak equals its
 * value); reserved never over max_reserved. Every
 * release report is exact: bytes and segments released and pages
 * unmapped as the device saw them, bytes still reserved, segments pinned
 * and kept, live bytes pinning, free bytes pinned, and free bytes trapped
 * (the free bytes of mapped granules that a live or pending block
 * touches; over whole maps, of the maps it touches). At the end every
 * event completes, everything is freed, the cache emptied: the device
 * holds nothing.
 *
 * Seeds: a fixed list plus one from time(), each printed; CCA_RANDOM_SEED
 * replays one.
 */
#include "alloc_test_util.h"
#include "device_books.h"
#include "pages_rule.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PG ((size_t)64 * KiB)   /* the simulated device's mapping granularity here */
#define CAPACITY ((size_t)48 * MiB)
#define NG (CAPACITY / PG)      /* granules in the largest range */
#define NS 3                    /* streams */
#define ND 3                    /* domain slots: 0 = the default domain */
#define MAXB 64                 /* live + pending blocks at most */
#define NR 256                  /* ranges at most */
#define SMALL_MAX ((size_t)1 * MiB)

static const cca_stream streams[NS] = {NULL, (cca_stream)0x100, (cca_stream)0x200};

/* ---- the model's blocks ---------------------------------------------------- */

typedef struct mblk {
    char *p;
    size_t size, held;
    int k;             /* domain slot */
    int s;             /* stream of the allocation */
    int rec[NS], nrec; /* streams named by cca_record_stream, in order, once each */
    bool key_null;     /* in an arena: the key stream is NULL */
    bool pending;
    bool needs_sync;   /* its event record and the fallback synchronize failed */
    bool synced;       /* needs_sync: a synchronize succeeded since its free */
    uint64_t ev[NS];   /* pending: the event it waits on, per stream (0 none) */
    int waits;         /* events alive for it */
    bool doomed;       /* live, in a domain a forced release may drop */
    uint64_t seed;
} mblk;

typedef struct world world;
static world *W; /* the run under way, for the wrapper's guard */
static bool safe(const world *w, const mblk *b);
static void guard(void *user, const char *what, uintptr_t lo, uintptr_t hi);

/* ---- the world --------------------------------------------------------------- */

typedef struct mdom {
    bool exists;
    cca_domain *h;
    size_t alloc_peak, req_peak, act_peak; /* since its creation or the last cca_reset_peak_stats */
} mdom;

struct world {
    const char *mode;
    bool expandable, greedy, events;
    bool whole;          /* the device's maps are whole (CCA_VM_WHOLE_MAPS) */
    size_t max_reserved; /* the config's cap (0: none) */
    uint64_t seed;
    int step;
    const char *op;
    tb x;
    cca_upstream *dev, *u;
    cca_allocator *a;
    mdom D[ND];
    mblk B[MAXB];
    int nb;
    size_t alloc_peak, req_peak, act_peak;
    uint64_t calls, frees, ooms;
    int created;
    struct {
        uint64_t pending, held_syncs, record_failures, not_ready, oom, trims, refused, leak_checks, forced;
    } seen;
};

#define WHERE "%s seed %llu step %d (%s)"
#define WARGS W->mode, (unsigned long long)W->seed, W->step, W->op

static bool overlaps(const mblk *b, uintptr_t lo, uintptr_t hi) {
    return (uintptr_t)b->p < hi && lo < (uintptr_t)b->p + b->held;
}

/* A pending block may be handed out, unmapped or freed once every event it
 * waits on is complete and, held for a failed synchronize, once one
 * succeeded. */
static bool safe(const world *w, const mblk *b) {
    if (b->needs_sync && !b->synced && !w->x.call.syncs_ok) /* this call's synchronize counts at once */
        return false;
    for (int s = 0; s < NS; s++)
        if (b->ev[s] && b->ev[s] > w->x.done[s])
            return false;
    return true;
}

static void guard(void *user, const char *what, uintptr_t lo, uintptr_t hi) {
    (void)user;
    for (int i = 0; i < W->nb; i++) {
        const mblk *b = &W->B[i];
        if (!overlaps(b, lo, hi) || b->doomed || (b->pending && safe(W, b)))
            continue;
        cr_assert_fail(WHERE ": %s of [%p, %p) touches %s block %p (%zu bytes)%s", WARGS, what, (void *)lo, (void *)hi,
                       b->pending ? "the pending" : "the live", (void *)b->p, b->held,
                       b->pending && b->needs_sync ? ", held for a failed synchronize" : "");
    }
}

/* The rules for pending blocks rejoining the pool, after a call: an
 * allocation polls (every block whose events are complete and that is not
 * held for a synchronize); a synchronize that succeeded, in any call but
 * cca_free, completes every block whose events are complete. */
static void settle(world *w, bool polled, bool is_free) {
    bool synced = w->x.call.syncs_ok > 0;
    for (int i = 0; i < w->nb; i++) /* a held block may go once a synchronize worked */
        if (w->B[i].pending && w->B[i].needs_sync && synced)
            w->B[i].synced = true;
    if (is_free || (!polled && !synced))
        return;
    for (int i = 0; i < w->nb; i++) /* each complete event is destroyed when polled */
        for (int s = 0; s < NS; s++)
            if (w->B[i].pending && w->B[i].ev[s] && w->B[i].ev[s] <= w->x.done[s]) {
                w->B[i].ev[s] = 0;
                w->B[i].waits--;
            }
    for (int i = 0; i < w->nb;) {
        mblk *b = &w->B[i];
        bool go = b->pending && safe(w, b) && (synced || !b->needs_sync);
        if (go)
            w->B[i] = w->B[--w->nb];
        else
            i++;
    }
}

static int model_pending(const world *w) {
    int n = 0;
    for (int i = 0; i < w->nb; i++)
        n += w->B[i].pending;
    return n;
}

#define MEQ(name, got, want)                                                                                           \
    cr_assert_eq((uint64_t)(got), (uint64_t)(want), WHERE ": %s is %llu, the model says %llu", WARGS, name,            \
                 (unsigned long long)(got), (unsigned long long)(want))

/* The blocks over [lo, hi): bytes covered by live or pending blocks. */
static size_t busy_bytes(const world *w, uintptr_t lo, uintptr_t hi) {
    size_t sum = 0;
    for (int i = 0; i < w->nb; i++) {
        const mblk *b = &w->B[i];
        uintptr_t a = (uintptr_t)b->p > lo ? (uintptr_t)b->p : lo;
        uintptr_t e = (uintptr_t)b->p + b->held < hi ? (uintptr_t)b->p + b->held : hi;
        sum += e > a ? e - a : 0;
    }
    return sum;
}

static void check_block(const world *w, const mblk *b) {
    uintptr_t lo = (uintptr_t)b->p, hi = lo + b->held;
    int r = tb_find(&w->x, lo, hi, w->expandable);
    cr_assert(r >= 0, WHERE ": block %p (%zu) lies in no range of the device", WARGS, (void *)b->p, b->held);
    if (w->expandable) {
        const tb_range *g = &w->x.r[r];
        for (size_t k = (lo - g->base) / PG; k <= (hi - 1 - g->base) / PG; k++)
            cr_assert(tb_mapped(&w->x, r, k), WHERE ": %s block %p: granule %zu is not mapped", WARGS,
                      b->pending ? "pending" : "live", (void *)b->p, k);
    }
    cr_assert(tu_check_fill(b->p, b->size, b->seed), WHERE ": %s block %p of %zu bytes was overwritten", WARGS,
              b->pending ? "pending" : "live", (void *)b->p, b->size);
}

static void check_world(world *w) {
    cr_assert_eq(cca_check_invariants(w->a), CCA_OK, WHERE ": invariants: %s", WARGS, cca_last_error());
    cca_stats s = tu_stats(w->a);
    size_t alloc = 0, req = 0, act = 0, waits = 0;
    size_t d_alloc[ND] = {0}, d_req[ND] = {0}, d_act[ND] = {0};
    for (int i = 0; i < w->nb; i++) {
        const mblk *b = &w->B[i];
        alloc += b->held, act++;
        d_alloc[b->k] += b->held, d_act[b->k]++;
        if (!b->pending)
            req += b->size, d_req[b->k] += b->size;
        waits += (size_t)b->waits;
        check_block(w, b);
    }
    if (alloc > w->alloc_peak)
        w->alloc_peak = alloc;
    if (req > w->req_peak)
        w->req_peak = req;
    if (act > w->act_peak)
        w->act_peak = act;
    for (int k = 0; k < ND; k++) {
        mdom *m = &w->D[k];
        m->alloc_peak = d_alloc[k] > m->alloc_peak ? d_alloc[k] : m->alloc_peak;
        m->req_peak = d_req[k] > m->req_peak ? d_req[k] : m->req_peak;
        m->act_peak = d_act[k] > m->act_peak ? d_act[k] : m->act_peak;
    }
    const tb *x = &w->x;
    size_t mapped = 0, space = 0;
    for (int i = 0; i < x->nr; i++)
        if (x->r[i].vm)
            mapped += x->r[i].mapped, space += x->r[i].size;
    MEQ("allocated_bytes", s.allocated_bytes, alloc);
    MEQ("allocated_bytes_peak", s.allocated_bytes_peak, w->alloc_peak);
    MEQ("requested_bytes", s.requested_bytes, req);
    MEQ("requested_bytes_peak", s.requested_bytes_peak, w->req_peak);
    MEQ("active_blocks", s.active_blocks, act);
    MEQ("active_blocks_peak", s.active_blocks_peak, w->act_peak);
    MEQ("pending_blocks", s.pending_blocks, model_pending(w));
    MEQ("alloc_calls", s.alloc_calls, w->calls);
    MEQ("free_calls", s.free_calls, w->frees);
    MEQ("ooms", s.ooms, w->ooms);
    MEQ("reserved_bytes", s.reserved_bytes, tb_reserved(x, -1));
    MEQ("cached_bytes", s.cached_bytes, s.reserved_bytes - alloc);
    MEQ("mapped_bytes", s.mapped_bytes, mapped);
    MEQ("address_space_bytes", s.address_space_bytes, space);
    MEQ("segments", s.segments, x->nr);
    MEQ("upstream_allocs", s.upstream_allocs, x->ok[TU_FAULT_ALLOC] + x->ok[TU_FAULT_RESERVE] + x->ok[TU_FAULT_MAP]);
    MEQ("upstream_frees", s.upstream_frees, x->ok[TU_FAULT_FREE] + x->ok[TU_FAULT_UNMAP] + x->ok[TU_FAULT_RELEASE]);
    MEQ("vm_maps", s.vm_maps, x->ok[TU_FAULT_MAP]);
    MEQ("vm_unmaps", s.vm_unmaps, x->ok[TU_FAULT_UNMAP]);
    MEQ("pages_mapped", s.pages_mapped, x->granules_mapped);
    MEQ("pages_unmapped", s.pages_unmapped, x->granules_unmapped);
    MEQ("events alive", x->events_live, waits);
    cca_upstream_stats us = tu_upstream_stats(w->u);
    MEQ("the upstream's bytes_in_use", us.bytes_in_use, s.reserved_bytes);
    MEQ("the upstream's vm_mapped_bytes", us.vm_mapped_bytes, mapped);
    for (int k = 0; k < ND; k++) {
        if (!w->D[k].exists)
            continue;
        cca_domain_stats d;
        cr_assert_eq(cca_get_domain_stats(w->a, w->D[k].h, &d), CCA_OK, WHERE ": %s", WARGS, cca_last_error());
        size_t segs = 0;
        for (int i = 0; i < x->nr; i++)
            segs += x->r[i].owner == k;
        MEQ("a domain's allocated_bytes", d.allocated_bytes, d_alloc[k]);
        MEQ("a domain's requested_bytes", d.requested_bytes, d_req[k]);
        MEQ("a domain's active_blocks", d.active_blocks, d_act[k]);
        MEQ("a domain's reserved_bytes", d.reserved_bytes, tb_reserved(x, k));
        MEQ("a domain's segments", d.segments, segs);
        MEQ("a domain's allocated_bytes_peak", d.allocated_bytes_peak, w->D[k].alloc_peak);
        MEQ("a domain's requested_bytes_peak", d.requested_bytes_peak, w->D[k].req_peak);
        MEQ("a domain's active_blocks_peak", d.active_blocks_peak, w->D[k].act_peak);
        cr_assert_geq(d.reserved_bytes_peak, d.reserved_bytes, WHERE ": a domain's reserved peak under its reserved",
                      WARGS);
    }
    cr_assert_geq(s.reserved_bytes_peak, s.reserved_bytes, WHERE, WARGS);
    cr_assert_geq(s.segments_peak, s.segments, WHERE, WARGS);
    if (w->max_reserved)
        cr_assert_leq(s.reserved_bytes, w->max_reserved, WHERE ": reserved %zu over max_reserved %zu", WARGS,
                      s.reserved_bytes, w->max_reserved);
}

/* ---- operations ----------------------------------------------------------------- */

static size_t random_size(uint64_t *rng) {
    uint64_t r = tu_rand(rng) % 100;
    if (r < 45)
        return 1 + tu_rand(rng) % (256 * KiB);
    if (r < 85)
        return 256 * KiB + tu_rand(rng) % (3 * MiB);
    return 10 * MiB + tu_rand(rng) % (4 * MiB);
}

static int random_domain(world *w, uint64_t *rng) {
    for (;;) {
        int k = (int)(tu_rand(rng) % ND);
        if (w->D[k].exists)
            return k;
    }
}

static void op_alloc(world *w, uint64_t *rng) {
    int k = random_domain(w, rng);
    size_t size = random_size(rng);
    int si = (int)(tu_rand(rng) % NS);
    void *p = (void *)1;
    tb_call_begin(&w->x);
    w->x.serving = k;
    cca_status st = TU_KEEPS_MESSAGE(k == 0 ? cca_alloc(w->a, size, streams[si], &p)
                                            : cca_alloc_in(w->a, w->D[k].h, size, streams[si], &p),
                                     "alloc");
    w->x.serving = -1;
    settle(w, true, false);
    if (st == CCA_ERR_OUT_OF_MEMORY) {
        cr_assert_null(p, WHERE ": a failed alloc sets *out to NULL", WARGS);
        w->ooms++;
        w->seen.oom++;
        return;
    }
    cr_assert_eq(st, CCA_OK, WHERE ": alloc(%zu): %s / %s", WARGS, size, cca_status_string(st), cca_last_error());
    cr_assert_eq((uintptr_t)p % CCA_ALIGNMENT, 0);
    mblk b = {.p = p, .size = size, .k = k, .s = si, .seed = tu_rand(rng)};
    cr_assert_eq(cca_block_size(w->a, p, &b.held), CCA_OK);
    int r = tb_find(&w->x, (uintptr_t)p, (uintptr_t)p + b.held, w->expandable);
    cr_assert(r >= 0, WHERE ": %p lies in no range", WARGS, p);
    b.key_null = w->greedy || w->x.r[r].arena;
    cr_assert_eq(w->x.r[r].owner, k, WHERE ": %p is in another domain's range", WARGS, p);
    size_t rounded = (size + CCA_GRANULARITY - 1) / CCA_GRANULARITY * CCA_GRANULARITY;
    cr_assert(b.held >= rounded && b.held - rounded <= SMALL_MAX, WHERE ": %zu bytes hold %zu", WARGS, size, b.held);
    for (int i = 0; i < w->nb; i++) /* never a byte of a live block, nor of a pending one */
        cr_assert(!overlaps(&w->B[i], (uintptr_t)p, (uintptr_t)p + b.held),
                  WHERE ": %p (%zu) overlaps the %s block %p (%zu)%s", WARGS, p, b.held,
                  w->B[i].pending ? "pending" : "live", (void *)w->B[i].p, w->B[i].held,
                  w->B[i].needs_sync ? " held for a failed synchronize" : "");
    tu_fill(p, size, b.seed);
    w->B[w->nb++] = b;
    w->calls++;
}

/* cca_free of the model's block i, its outcome predicted from what the
 * wrapper saw: the users other than the key stream each get an event, in
 * order (the allocation's stream, then record_stream's); in an arena, whose
 * blocks go to any stream, every user does, NULL included (no stream is
 * ordered against another); a refused record falls back to a synchronize;
 * a failed one holds the block. */
static void free_block(world *w, int i) {
    mblk *b = &w->B[i];
    check_block(w, b);
    int users[NS], n = 0;
    if (b->key_null) /* else the allocation's stream is the key */
        users[n++] = b->s;
    for (int j = 0; j < b->nrec; j++) /* never b->s (op_record) */
        users[n++] = b->rec[j];
    tb_call_begin(&w->x);
    uint64_t live_before = w->x.events_live;
    cca_status st = TU_KEEPS_MESSAGE(cca_free(w->a, b->p), "free");
    const tb *x = &w->x;
    settle(w, false, true);
    w->frees++;
    bool refused = x->call.records_failed > 0 || (n && !w->events); /* no event: a synchronize instead */
    cr_assert_leq(x->call.nrec, n, WHERE ": %d events recorded for %d other users", WARGS, x->call.nrec, n);
    for (int j = 0; j < x->call.nrec; j++)
        cr_assert_eq(x->call.rec_stream[j], users[j], WHERE ": event %d recorded on stream %d, not %d", WARGS, j,
                     x->call.rec_stream[j], users[j]);
    cr_assert_eq(x->call.nrec, refused ? x->call.nrec : n, WHERE, WARGS);
    if (refused)
        cr_assert_eq(x->call.syncs_ok + x->call.syncs_failed, 1, WHERE ": a refused record synchronizes once", WARGS);
    else
        cr_assert_eq(x->call.syncs_ok + x->call.syncs_failed, 0, WHERE ": cca_free synchronized", WARGS);
    bool complete = true, now_pending = false;
    for (int j = 0; j < x->call.nrec; j++)
        complete &= x->call.rec_seq[j] && x->call.rec_seq[j] <= x->done[x->call.rec_stream[j]];
    if (refused && x->call.syncs_failed) { /* held until a synchronize succeeds */
        cr_assert_eq(st, CCA_ERR_UPSTREAM, WHERE ": free: %s", WARGS, cca_status_string(st));
        cr_assert(strstr(cca_last_error(), "held until a synchronize succeeds"), WHERE ": %s", WARGS, cca_last_error());
        b->pending = b->needs_sync = true;
        b->waits = 0;
        w->seen.held_syncs++;
    } else if (n == 0 || refused || complete) { /* free at once */
        cr_assert_eq(st, CCA_OK, WHERE ": free: %s / %s", WARGS, cca_status_string(st), cca_last_error());
        w->seen.record_failures += refused;
        w->B[i] = w->B[--w->nb];
    } else {
        cr_assert_eq(st, CCA_OK, WHERE ": free: %s / %s", WARGS, cca_status_string(st), cca_last_error());
        b->pending = now_pending = true;
        b->waits = n;
        for (int j = 0; j < n; j++)
            b->ev[x->call.rec_stream[j]] = x->call.rec_seq[j];
        w->seen.pending++;
    }
    /* the events of a block that does not wait are destroyed at once */
    MEQ("events alive after the free", x->events_live, live_before + (now_pending ? (uint64_t)n : 0));
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
    int s = (int)(tu_rand(rng) % NS);
    cca_status st = TU_KEEPS_MESSAGE(cca_record_stream(w->a, b->p, streams[s]), "record_stream");
    if (b->pending) {
        cr_assert_eq(st, CCA_ERR_INVALID_POINTER, WHERE ": record_stream on a pending block: %s", WARGS,
                     cca_status_string(st));
        return;
    }
    cr_assert_eq(st, CCA_OK, WHERE ": record_stream: %s", WARGS, cca_last_error());
    for (int j = 0; j < b->nrec; j++)
        if (b->rec[j] == s)
            return;
    if (s != b->s)
        b->rec[b->nrec++] = s;
}

/* The streams' work: one stream runs ahead (all, or part, of its events
 * complete, in order), goes idle or busy; or the device starts (or stops)
 * keeping events incomplete through a synchronize. */
static void op_streams(world *w, uint64_t *rng) {
    tb *x = &w->x;
    int s = (int)(tu_rand(rng) % NS);
    switch (tu_rand(rng) % 6) {
    case 0:
    case 1: x->done[s] = x->recorded[s]; break;
    case 2: x->done[s] += (x->recorded[s] - x->done[s]) / 2; break;
    case 3: x->busy[s] = !x->busy[s]; break;
    case 4: x->busy[s] = true; break;
    default: x->sync_keeps = tu_rand(rng) % 4 == 0; break;
    }
}

/* The report of a trim, figure by figure, from the device and the model. */
static void check_report(world *w, const cca_release_report *r) {
    const tb *x = &w->x;
    size_t pinned = 0, kept = 0, live = 0, free_pinned = 0, trapped = 0;
    for (int i = 0; i < x->nr; i++) {
        const tb_range *g = &x->r[i];
        size_t busy = busy_bytes(w, g->base, g->base + g->size);
        if (busy) {
            pinned++;
            live += busy;
            free_pinned += (g->vm ? g->mapped : g->size) - busy;
        } else {
            kept++;
        }
        for (size_t k = 0, n = 1; g->vm && k < g->size / PG; k += n) { /* a page, or over whole maps a map */
            size_t first = k, end = k + 1;
            if (w->whole && tb_map_of(x, i, k, &first, &end))
                cr_assert_eq(first, k, WHERE, WARGS);
            n = end - first;
            size_t used = busy_bytes(w, g->base + k * PG, g->base + end * PG);
            if (tb_mapped(x, i, k) && used)
                trapped += n * PG - used;
        }
    }
    MEQ("report bytes_released", r->bytes_released, x->call.given_bytes);
    MEQ("report segments_released", r->segments_released, x->call.segments_released);
    MEQ("report pages_unmapped", r->pages_unmapped, x->call.given_pages);
    MEQ("report bytes_unmapped", r->bytes_unmapped, x->call.given_pages * PG);
    MEQ("report bytes_still_reserved", r->bytes_still_reserved, tb_reserved(x, -1));
    MEQ("report segments_pinned", r->segments_pinned, pinned);
    MEQ("report segments_kept", r->segments_kept, kept);
    MEQ("report live_bytes_pinning", r->live_bytes_pinning, live);
    MEQ("report free_bytes_pinned", r->free_bytes_pinned, free_pinned);
    MEQ("report free_bytes_trapped", r->free_bytes_trapped, trapped);
}

static void op_trim(world *w, uint64_t *rng, bool empty) {
    size_t before = tb_reserved(&w->x, -1);
    size_t keep = empty ? 0 : (size_t)(tu_rand(rng) % (before + 4 * MiB + 1));
    tb_call_begin(&w->x);
    w->x.call.trimming = true;
    w->x.call.keep = keep;
    uint64_t injected = w->x.injected;
    cca_release_report rep;
    memset(&rep, 0xab, sizeof rep);
    cca_status st = TU_KEEPS_MESSAGE(empty ? cca_empty_cache(w->a, &rep) : cca_trim(w->a, keep, &rep), "release");
    w->x.call.trimming = false;
    settle(w, false, false);
    w->seen.trims++;
    const tb *x = &w->x;
    cr_assert_eq(x->call.syncs_ok + x->call.syncs_failed, 1, WHERE ": a trim synchronizes once", WARGS);
    if (x->call.syncs_failed)
        cr_assert_eq(x->call.given_pages, 0, WHERE ": pages unmapped after a failed synchronize", WARGS);
    check_report(w, &rep);
    /* a fault in a trim is its synchronize or a refused give-back: either
     * is the call's failure */
    int pending = model_pending(w);
    if (x->injected > injected) {
        cr_assert_eq(st, CCA_ERR_UPSTREAM, WHERE ": trim under a fault: %s", WARGS, cca_status_string(st));
        w->seen.refused++;
        return;
    }
    if (pending) {
        cr_assert_eq(st, CCA_ERR_NOT_READY, WHERE ": trim with %d blocks still pending: %s", WARGS, pending,
                     cca_status_string(st));
        w->seen.not_ready++;
    } else {
        cr_assert_eq(st, CCA_OK, WHERE ": trim(%zu): %s / %s", WARGS, keep, cca_status_string(st), cca_last_error());
    }
    /* an empty range with nothing mapped goes back whatever the budget;
     * above the budget nothing free is left: every range still held has a
     * live or pending block, every mapped granule a byte of one */
    bool over = tb_reserved(x, -1) > keep;
    for (int i = 0; i < x->nr; i++) {
        const tb_range *g = &x->r[i];
        bool used = busy_bytes(w, g->base, g->base + g->size) > 0;
        cr_assert(used || (!over && (!g->vm || g->mapped)), WHERE ": trim(%zu) kept a free %s of %zu bytes (%zu mapped)",
                  WARGS, keep, g->vm ? "range" : "segment", g->size, g->mapped);
        for (size_t k = 0; over && g->vm && k < g->size / PG; k++) { /* over whole maps: a map with none */
            size_t first = k, end = k + 1;
            if (w->whole)
                tb_map_of(x, i, k, &first, &end);
            cr_assert(!tb_mapped(x, i, k) || busy_bytes(w, g->base + first * PG, g->base + end * PG),
                      WHERE ": trim(%zu) kept free granule %zu of %p mapped", WARGS, keep, k, (void *)g->base);
        }
    }
}

static void op_domain_release(world *w, uint64_t *rng, bool destroy) {
    int k = destroy ? 1 + (int)(tu_rand(rng) % (ND - 1)) : random_domain(w, rng);
    if (!w->D[k].exists)
        return;
    unsigned flags = tu_rand(rng) % 3 == 0 ? CCA_DOMAIN_FORCE : 0;
    size_t before = tb_reserved(&w->x, k);
    int ranges = 0;
    for (int i = 0; i < w->x.nr; i++)
        ranges += w->x.r[i].owner == k;
    for (int i = 0; i < w->nb; i++)
        w->B[i].doomed = (flags & CCA_DOMAIN_FORCE) && w->B[i].k == k && !w->B[i].pending;
    tb_call_begin(&w->x);
    uint64_t injected = w->x.injected;
    cca_domain_report rep;
    memset(&rep, 0, sizeof rep);
    cca_status st = TU_KEEPS_MESSAGE(destroy ? cca_domain_destroy(w->a, w->D[k].h, flags, &rep)
                                             : cca_domain_release(w->a, w->D[k].h, flags, &rep),
                                     "domain release");
    settle(w, false, false);
    const tb *x = &w->x;
    size_t live = 0, live_bytes = 0, pending = 0;
    for (int i = 0; i < w->nb; i++)
        if (w->B[i].k == k)
            live++, live_bytes += w->B[i].held, pending += w->B[i].pending;
    for (int i = 0; i < w->nb; i++)
        w->B[i].doomed = false;
    if (x->call.syncs_failed) {
        cr_assert_eq(st, CCA_ERR_UPSTREAM, WHERE ": release after a failed synchronize: %s", WARGS,
                     cca_status_string(st));
        cr_assert_eq(x->call.given_bytes + x->call.segments_released, 0, WHERE ": released after a failed synchronize",
                     WARGS);
        return;
    }
    cr_assert_eq(x->call.syncs_ok, 1, WHERE, WARGS);
    if (pending || (live && !(flags & CCA_DOMAIN_FORCE))) {
        cr_assert_eq(st, CCA_ERR_LIVE_BLOCKS, WHERE ": release with %zu live, %zu pending: %s", WARGS, live, pending,
                     cca_status_string(st));
        cr_assert_eq(x->call.given_bytes + x->call.segments_released, 0, WHERE ": a refused release gave back", WARGS);
        MEQ("report live_blocks", rep.live_blocks, live);
        MEQ("report live_bytes", rep.live_bytes, live_bytes);
        MEQ("report bytes_released", rep.bytes_released, 0);
        MEQ("report bytes_still_reserved", rep.bytes_still_reserved, before);
        w->seen.leak_checks++;
        return;
    }
    MEQ("report live_blocks", rep.live_blocks, live);
    void *gone = NULL;
    for (int i = 0; i < w->nb;) { /* forced: the domain's live blocks are gone */
        if (w->B[i].k == k) {
            gone = w->B[i].p;
            w->B[i] = w->B[--w->nb];
            w->seen.forced++;
        } else {
            i++;
        }
    }
    MEQ("report bytes_released", rep.bytes_released, x->call.given_bytes);
    MEQ("report bytes_released (the domain's)", rep.bytes_released, before - tb_reserved(x, k));
    MEQ("report segments_released", rep.segments_released, x->call.segments_released);
    MEQ("report bytes_still_reserved", rep.bytes_still_reserved, tb_reserved(x, k));
    if (st == CCA_OK) {
        MEQ("ranges left in a released domain", rep.segments_released, ranges);
        for (int i = 0; i < x->nr; i++)
            cr_assert_neq(x->r[i].owner, k, WHERE ": an OK release left a range", WARGS);
        if (destroy) {
            w->D[k].exists = false;
            cca_domain_stats d;
            cr_assert_eq(cca_get_domain_stats(w->a, w->D[k].h, &d), CCA_ERR_INVALID_ARGUMENT, WHERE, WARGS);
        }
    } else {
        cr_assert_eq(st, CCA_ERR_UPSTREAM, WHERE ": release: %s / %s", WARGS, cca_status_string(st), cca_last_error());
        cr_assert_gt(x->injected, injected, WHERE ": a refusal with no fault injected", WARGS);
        w->seen.refused++;
    }
    if (gone) /* checked at once: a later allocation may hand the address out again */
        cr_assert_eq(cca_free(w->a, gone), CCA_ERR_INVALID_POINTER, WHERE ": freed a forced-out pointer", WARGS);
}

static void op_create(world *w) {
    for (int k = 1; k < ND; k++) {
        if (w->D[k].exists)
            continue;
        char name[32];
        snprintf(name, sizeof name, "d%d", ++w->created);
        cca_domain *h = NULL;
        cr_assert_eq(cca_domain_create(w->a, name, &h), CCA_OK, WHERE ": %s", WARGS, cca_last_error());
        w->D[k] = (mdom){.exists = true, .h = h};
        return;
    }
}

static void op_reserve(world *w, uint64_t *rng) {
    int k = random_domain(w, rng);
    size_t bytes = 1 + (size_t)(tu_rand(rng) % (8 * MiB));
    uint64_t grants = w->x.grants;
    tb_call_begin(&w->x);
    w->x.serving = k;
    cca_status st = TU_KEEPS_MESSAGE(cca_domain_reserve(w->a, w->D[k].h, bytes), "domain_reserve");
    w->x.serving = -1;
    settle(w, false, false);
    /* only a reserve that succeeds makes an arena: the range it made that is
     * mapped whole. A range whose map and release were both refused stays
     * (what its map's undo could not unmap still mapped) as an ordinary
     * range of the domain's large pool, stream NULL (pages.c, keep_range):
     * not an arena, its blocks keyed by NULL like a growth segment's, in a
     * failed call or before the retry of one that succeeds. Classic: a
     * refused reservation leaves no range. */
    for (int i = 0; i < w->x.nr; i++)
        w->x.r[i].arena |=
            st == CCA_OK && w->x.r[i].id > grants && (!w->x.r[i].vm || w->x.r[i].mapped == w->x.r[i].size);
    cr_assert(st == CCA_OK || st == CCA_ERR_OUT_OF_MEMORY || st == CCA_ERR_INVALID_ARGUMENT,
              WHERE ": reserve: %s / %s", WARGS, cca_status_string(st), cca_last_error());
}

/* cca_reset_peak_stats: every peak, the domains' too, is its current value. */
static void op_reset_peaks(world *w) {
    cca_reset_peak_stats(w->a);
    size_t alloc = 0, req = 0, act = 0;
    for (int k = 0; k < ND; k++)
        w->D[k].alloc_peak = w->D[k].req_peak = w->D[k].act_peak = 0;
    for (int i = 0; i < w->nb; i++) {
        const mblk *b = &w->B[i];
        alloc += b->held, act++;
        w->D[b->k].alloc_peak += b->held, w->D[b->k].act_peak++;
        if (!b->pending)
            req += b->size, w->D[b->k].req_peak += b->size;
    }
    w->alloc_peak = alloc, w->req_peak = req, w->act_peak = act;
    cca_stats s = tu_stats(w->a);
    MEQ("reserved_bytes_peak after a reset", s.reserved_bytes_peak, s.reserved_bytes);
    MEQ("segments_peak after a reset", s.segments_peak, s.segments);
    for (int k = 0; k < ND; k++) {
        cca_domain_stats d;
        if (!w->D[k].exists)
            continue;
        cr_assert_eq(cca_get_domain_stats(w->a, w->D[k].h, &d), CCA_OK, WHERE ": %s", WARGS, cca_last_error());
        MEQ("a domain's reserved_bytes_peak after a reset", d.reserved_bytes_peak, d.reserved_bytes);
    }
}

/* ---- one run ------------------------------------------------------------------------ */

typedef struct plan {
    bool expandable, greedy, events;
    bool whole;       /* expandable over whole maps */
    const char *conf; /* more options (NULL: none) */
    /* expandable: the growth rule's fixed parts (the test hook, pages_rule.h, before the first request; the ahead's
     * cap is 64 MiB, and with expandable_ahead:0 there is neither ahead nor least step) */
    size_t least;        /* the least step; 0: 1 MiB for odd seeds, 20 MiB for even; NO_LEAST: none */
    size_t map_bytes;    /* over whole maps the largest map; 0: the rule's 128 MiB; ONE_MAP: one map per run */
    size_t max_reserved; /* the cap in conf, checked after every step */
    uint64_t seed;
    int steps;
    unsigned fault_pct; /* the share of steps with a fault armed */
    uint64_t fail_at;   /* or: exactly this call of the run fails (0: none) */
    bool sticky;        /* and every later one of its step */
} plan;

#define NO_LEAST SIZE_MAX
#define ONE_MAP SIZE_MAX

static const char *const modes[2][2] = {{"classic growth", "classic greedy"}, {"expandable growth", "expandable greedy"}};

/* The plan's rule, set before the first request. Odd seeds run with
 * expandable_ahead:0.25 (in the config) and a least step of 1 MiB. */
static void set_rule(cca_allocator *a, const plan *pl) {
    cca_config c;
    cr_assert_eq(cca_get_config(a, &c), CCA_OK);
    bool on = c.expandable_ahead > 0;
    size_t least = pl->least == NO_LEAST ? 0 : pl->least ? pl->least : pl->seed % 2 ? 1 * MiB : 20 * MiB;
    size_t map = pl->map_bytes == ONE_MAP ? 0 : pl->map_bytes ? pl->map_bytes : 128 * MiB;
    ccai_pages_rule_set(a, on ? least : 0, on ? 64 * MiB : 0, map);
}

/* The plan's options and rule in a message. */
static const char *plan_name(const plan *pl, char *buf, size_t len) {
    char least[48] = "", map[48] = "";
    if (pl->least)
        snprintf(least, sizeof least, ", least step %zu", pl->least == NO_LEAST ? 0 : pl->least);
    if (pl->map_bytes)
        snprintf(map, sizeof map, ", maps of %zu", pl->map_bytes == ONE_MAP ? 0 : pl->map_bytes);
    snprintf(buf, len, "%s%s%s", pl->conf ? pl->conf : "", least, map);
    return buf;
}

static void end_by_empty_cache(world *w);
static void end_by_destroy(world *w, uint64_t *rng);

/* The run's upstream calls, for the sweep. */
static uint64_t run(const plan *pl) {
    world *w = calloc(1, sizeof *w);
    cr_assert_not_null(w);
    W = w;
    w->mode = pl->whole ? (pl->greedy ? "whole maps greedy" : "whole maps growth") : modes[pl->expandable][pl->greedy];
    w->whole = pl->whole;
    w->max_reserved = pl->max_reserved;
    w->expandable = pl->expandable;
    w->greedy = pl->greedy;
    w->events = pl->events;
    w->seed = pl->seed;
    w->step = -1;
    w->op = "setup";
    cca_host_options o = {.capacity = CAPACITY, .vm_granularity = PG,
                          .vm_backing = pl->whole ? CCA_VM_WHOLE_MAPS : CCA_VM_PAGES};
    cr_assert_eq(cca_upstream_host_create_with(&o, &w->dev), CCA_OK, "%s", cca_last_error());
    w->u = tb_create(&w->x, w->dev, "sx", PG, streams, pl->events ? NS : 0);
    cr_assert_eq(w->x.whole, pl->whole);
    w->x.check_calls = true;
    w->x.guard = guard;
    char conf[320];
    snprintf(conf, sizeof conf, "log_oom:0%s%s%s%s%s", pl->expandable ? ",expandable:1" : ",expandable:0",
             pl->greedy ? ",policy:greedy,greedy_bytes:40M" : "",
             pl->expandable && pl->seed % 2 ? ",expandable_ahead:0.25" : "", pl->conf ? "," : "",
             pl->conf ? pl->conf : "");
    w->x.serving = 0;
    w->a = tu_allocator(w->u, conf);
    w->x.serving = -1;
    if (pl->expandable)
        set_rule(w->a, pl);
    if (pl->greedy && pl->map_bytes) {
        /* the arena was mapped at creation in the rule's 128 MiB maps: released, it is reserved again by the
         * first request, in the plan's maps */
        w->op = "setup: the arena released";
        op_trim(w, NULL, true);
        cr_assert_eq(tb_reserved(&w->x, -1), 0, WHERE ": the arena stayed", WARGS);
        w->op = "setup";
    }
    w->D[0].exists = true;
    if (!pl->greedy)
        op_create(w);
    w->x.fail_call = pl->fail_at;
    check_world(w);
    uint64_t rng = pl->seed;
    char what[64];
    for (w->step = 0; w->step < pl->steps; w->step++) {
        const char *fault = NULL;
        if (!pl->fail_at && tu_rand(&rng) % 100 < pl->fault_pct) {
            w->x.fail_call = w->x.call_no + 1 + tu_rand(&rng) % 4;
            w->x.sticky_call = tu_rand(&rng) % 3 == 0;
            fault = "a fault armed";
        }
        if (pl->fail_at)
            w->x.sticky_call = pl->sticky && w->x.call_no < pl->fail_at;
        uint64_t r = tu_rand(&rng) % 1000;
        const char *op;
        if (w->greedy && r >= 800)
            r = r % 800; /* no domains in a greedy allocator */
        if ((r < 330 && w->nb < MAXB) || w->nb == 0)
            op = "alloc", w->op = op, op_alloc(w, &rng);
        else if (r < 560)
            op = "free", w->op = op, op_free(w, &rng);
        else if (r < 650)
            op = "record_stream", w->op = op, op_record(w, &rng);
        else if (r < 730)
            op = "streams", w->op = op, op_streams(w, &rng);
        else if (r < 780)
            op = "trim", w->op = op, op_trim(w, &rng, false);
        else if (r < 792)
            op = "empty_cache", w->op = op, op_trim(w, &rng, true);
        else if (r < 800)
            op = "reset_peak_stats", w->op = op, op_reset_peaks(w);
        else if (r < 840)
            op = "domain release", w->op = op, op_domain_release(w, &rng, false);
        else if (r < 870)
            op = "domain destroy", w->op = op, op_domain_release(w, &rng, true);
        else if (r < 935)
            op = "domain create", w->op = op, op_create(w);
        else
            op = "domain reserve", w->op = op, op_reserve(w, &rng);
        snprintf(what, sizeof what, "%s%s%s", op, fault ? ", " : "", fault ? fault : "");
        w->op = what;
        if (!pl->fail_at)
            w->x.fail_call = 0;
        w->x.sticky_call = false;
        check_world(w);
    }
    uint64_t calls = w->x.call_no;
    if (tu_rand(&rng) % 3 == 0) {
        end_by_destroy(w, &rng);
    } else {
        end_by_empty_cache(w);
    }
    if (!pl->fail_at)
        fprintf(stderr,
                "  %s seed %llu: %llu calls, %llu faults, %llu pending frees, %llu held for a synchronize, "
                "%llu records refused, %llu trims NOT_READY, %llu OOMs, %llu refusals, %llu leak checks, "
                "%llu blocks forced out\n",
                w->mode, (unsigned long long)pl->seed, (unsigned long long)w->x.call_no,
                (unsigned long long)w->x.injected, (unsigned long long)w->seen.pending,
                (unsigned long long)w->seen.held_syncs, (unsigned long long)w->seen.record_failures,
                (unsigned long long)w->seen.not_ready, (unsigned long long)w->seen.oom,
                (unsigned long long)w->seen.refused, (unsigned long long)w->seen.leak_checks,
                (unsigned long long)w->seen.forced);
    W = NULL;
    free(w);
    return calls;
}

/* The end, one way: faults off, every event completes, everything is
 * freed, the cache emptied: the device holds nothing. */
static void end_by_empty_cache(world *w) {
    w->op = "end";
    w->x.fail_call = 0;
    w->x.sticky_call = w->x.sync_keeps = false;
    tb_progress_all(&w->x);
    for (int i = w->nb - 1; i >= 0; i--)
        if (!w->B[i].pending)
            free_block(w, i);
    for (int s = 0; s < NS; s++)
        w->x.busy[s] = false;
    check_world(w);
    cca_release_report rep;
    tb_call_begin(&w->x);
    cca_status st = TU_KEEPS_MESSAGE(cca_empty_cache(w->a, &rep), "empty_cache");
    settle(w, false, false);
    cr_assert_eq(st, CCA_OK, WHERE ": %s", WARGS, cca_last_error());
    cr_assert_eq(w->nb, 0, WHERE ": %d blocks left after every event completed", WARGS, w->nb);
    check_report(w, &rep);
    check_world(w);
    cr_assert_eq(w->x.nr, 0, WHERE ": %d ranges kept after empty-cache", WARGS, w->x.nr);
    cca_upstream_stats us = tu_upstream_stats(w->u);
    cr_assert_eq(us.bytes_in_use, 0);
    cr_assert_eq(us.vm_reserved_bytes, 0);
    cr_assert_eq(cca_destroy(w->a), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(w->x.events_live, 0, "end: %llu events not destroyed", (unsigned long long)w->x.events_live);
    cca_upstream_destroy(w->u);
    us = tu_upstream_stats(w->dev);
    cr_assert_eq(us.bytes_in_use, 0, "end: the device still holds %zu bytes", us.bytes_in_use);
    cr_assert_eq(us.vm_reserved_bytes, 0);
    cca_upstream_destroy(w->dev);
}

/* The end, the other way: cca_destroy with blocks live and pending, its
 * synchronize failing or not (ccalloc.h). Synchronized: everything goes
 * back. Not: classic segments go back, mapped pages stay mapped and their
 * ranges reserved (queued work may use them), every event is destroyed,
 * and the status says so. */
static void end_by_destroy(world *w, uint64_t *rng) {
    w->op = "end: cca_destroy";
    w->x.sticky_call = false;
    for (int i = 0; i < w->nb; i++)
        w->B[i].doomed = true; /* released with the allocator */
    size_t mapped = 0, vm_space = 0;
    for (int i = 0; i < w->x.nr; i++)
        if (w->x.r[i].vm && w->x.r[i].mapped)
            mapped += w->x.r[i].mapped, vm_space += w->x.r[i].size;
    bool must_sync = mapped || model_pending(w);
    bool fail = tu_rand(rng) % 2;
    w->x.fail_call = must_sync && fail ? w->x.call_no + 1 : 0; /* its first call: the synchronize */
    tb_call_begin(&w->x);
    cca_status st = TU_KEEPS_MESSAGE(cca_destroy(w->a), "destroy");
    const tb *x = &w->x;
    cr_assert_eq(x->call.syncs_ok + x->call.syncs_failed, must_sync, WHERE ": %zu mapped, %d pending: %llu synchronizes",
                 WARGS, mapped, model_pending(w), (unsigned long long)(x->call.syncs_ok + x->call.syncs_failed));
    bool failed = x->call.syncs_failed > 0;
    int live = 0; /* live blocks, and pending ones the synchronize left unsafe (ccalloc.h: counted live) */
    for (int i = 0; i < w->nb; i++)
        live += !w->B[i].pending || !safe(w, &w->B[i]);
    cca_status want = live ? CCA_ERR_LIVE_BLOCKS : failed ? CCA_ERR_UPSTREAM : CCA_OK;
    cr_assert_eq(st, want, WHERE ": cca_destroy with %d blocks (%d pending, %d counted live): %s / %s", WARGS, w->nb,
                 model_pending(w), live, cca_status_string(st), cca_last_error());
    if (failed && mapped)
        cr_assert(strstr(cca_last_error(), "left mapped"), WHERE ": %s", WARGS, cca_last_error());
    cr_assert_eq(x->events_live, 0, WHERE ": %llu events not destroyed", WARGS, (unsigned long long)x->events_live);
    size_t kept_mapped = 0, kept_space = 0;
    for (int i = 0; i < x->nr; i++) {
        cr_assert(x->r[i].vm && x->r[i].mapped, WHERE ": cca_destroy kept a %s with nothing mapped", WARGS,
                  x->r[i].vm ? "range" : "classic segment");
        kept_mapped += x->r[i].mapped, kept_space += x->r[i].size;
    }
    MEQ("bytes left mapped", kept_mapped, failed ? mapped : 0);
    MEQ("address space left reserved", kept_space, failed ? vm_space : 0);
    cca_upstream_stats us = tu_upstream_stats(w->u);
    MEQ("the upstream's bytes_in_use", us.bytes_in_use, kept_mapped);
    for (int i = w->x.nr - 1; i >= 0; i--) { /* the driver's cleanup: what the allocator had to leave */
        tb_range *g = &w->x.r[i];
        for (size_t k = 0; k < g->size / PG; k++) { /* page by page, or over whole maps map by map */
            size_t first = k, end = k + 1;
            if (w->whole && tb_map_of(x, i, k, &first, &end))
                cr_assert_eq(first, k);
            if (tb_mapped(x, i, k))
                cr_assert_eq(cca_upstream_vm_unmap(w->x.inner, (void *)(g->base + k * PG), (end - k) * PG), CCA_OK);
            k = end - 1;
        }
        cr_assert_eq(cca_upstream_vm_release(w->x.inner, (void *)g->base, g->size), CCA_OK);
    }
    cca_upstream_destroy(w->u);
    us = tu_upstream_stats(w->dev);
    cr_assert_eq(us.bytes_in_use, 0, "end: the device still holds %zu bytes", us.bytes_in_use);
    cr_assert_eq(us.vm_reserved_bytes, 0);
    cca_upstream_destroy(w->dev);
}

static void run_plan_seeds(plan pl);

static void run_seeds(bool expandable, bool greedy) {
    run_plan_seeds((plan){.expandable = expandable, .greedy = greedy, .events = true, .steps = 700, .fault_pct = 12});
}

static void run_plan_seeds(plan pl) {
    bool expandable = pl.expandable, greedy = pl.greedy;
    char name[200];
    const char *only = getenv("CCA_RANDOM_SEED");
    if (only && *only) {
        pl.seed = strtoull(only, NULL, 0); /* with events, then without */
        fprintf(stderr, "test_random_streams: %s%s %s, seed %llu\n", modes[expandable][greedy], pl.whole ? " (whole maps)" : "",
                plan_name(&pl, name, sizeof name), (unsigned long long)pl.seed);
        run(&pl);
        pl.events = false;
        run(&pl);
        return;
    }
    const uint64_t seeds[] = {1, 2, 0x5eed, (uint64_t)time(NULL)};
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        pl.seed = seeds[i];
        pl.events = i != 2; /* one run on an upstream without events */
        fprintf(stderr, "test_random_streams: %s%s %s%s, seed %llu (CCA_RANDOM_SEED=%llu replays it)\n",
                modes[expandable][greedy], pl.whole ? " (whole maps)" : "", plan_name(&pl, name, sizeof name),
                pl.events ? "" : ", no events", (unsigned long long)pl.seed,
                (unsigned long long)pl.seed);
        run(&pl);
    }
}

Test(random_streams, classic_growth, .timeout = 120) {
    run_seeds(false, false);
}

Test(random_streams, expandable_growth, .timeout = 120) {
    run_seeds(true, false);
}

Test(random_streams, classic_greedy, .timeout = 120) {
    run_seeds(false, true);
}

Test(random_streams, expandable_greedy, .timeout = 120) {
    run_seeds(true, true);
}

/* Whole maps (every map one allocation, unmapped whole), maps cut at
 * several chunks (map_bytes), under max_reserved caps that are no multiple
 * of the page or the chunk, with the ahead maps large against the cap. */
static void run_whole(bool greedy, const char *conf, size_t least, size_t map_bytes, size_t cap) {
    run_plan_seeds((plan){.expandable = true, .whole = true, .greedy = greedy, .events = true, .steps = 700,
                          .fault_pct = 12, .conf = conf, .least = least, .map_bytes = map_bytes, .max_reserved = cap});
}

Test(random_streams, whole_maps_growth, .timeout = 120) {
    run_whole(false, NULL, 0, 192 * KiB, 0);
    run_whole(false, NULL, NO_LEAST, ONE_MAP, 0);
}

/* The arena in maps of 3 MiB: released at the start and reserved again
 * after the rule is set (run). */
Test(random_streams, whole_maps_greedy, .timeout = 120) {
    run_whole(true, NULL, 0, 3 * MiB, 0);
}

Test(random_streams, whole_maps_under_max_reserved, .timeout = 120) {
    run_whole(false, "max_reserved:20700K,expandable_ahead:1", 6 * MiB, 192 * KiB, 20700 * KiB);
    run_whole(false, "max_reserved:13M,expandable_ahead:0", 0, ONE_MAP, 13 * MiB);
}

/* hold_peak:1: requests that meet the peak synchronize and release first,
 * with pending blocks, refused events and faults at any call among them */
Test(random_streams, holding_the_peak, .timeout = 120) {
    run_plan_seeds((plan){.expandable = true, .events = true, .steps = 700, .fault_pct = 12, .conf = "hold_peak:1"});
    run_plan_seeds((plan){.events = true, .steps = 700, .fault_pct = 12, .conf = "hold_peak:1"});
    run_plan_seeds((plan){.expandable = true, .whole = true, .events = true, .steps = 700, .fault_pct = 12,
                          .conf = "hold_peak:1", .map_bytes = 192 * KiB});
}

Test(random_streams, pages_under_max_reserved, .timeout = 120) {
    run_plan_seeds((plan){.expandable = true, .events = true, .steps = 700, .fault_pct = 12,
                          .conf = "max_reserved:20700K,expandable_ahead:1", .least = 6 * MiB,
                          .max_reserved = 20700 * KiB});
    run_plan_seeds((plan){.events = true, .steps = 700, .fault_pct = 12, .conf = "max_reserved:23M",
                          .max_reserved = 23 * MiB});
}

/* One fixed sequence, replayed once per upstream call k of its fault-free
 * run, with exactly call k failing (for every third k, every later call of
 * the same step too). */
static void sweep_plan(plan pl);

static void sweep(bool expandable, bool greedy, uint64_t seed) {
    sweep_plan((plan){.expandable = expandable, .greedy = greedy, .events = true, .seed = seed, .steps = 50});
}

static void sweep_plan(plan pl) {
    uint64_t calls = run(&pl);
    for (uint64_t k = 1; k <= calls; k++) {
        pl.fail_at = k;
        pl.sticky = k % 3 == 0; /* a third of them: every later call of the step too */
        run(&pl);
    }
}

Test(random_streams, a_fault_at_every_call_index, .timeout = 300) {
    for (int e = 0; e < 2; e++)
        for (int g = 0; g < 2; g++)
            sweep(e, g, 7 + (uint64_t)(2 * e + g));
}

Test(random_streams, whole_maps_a_fault_at_every_call_index, .timeout = 300) {
    const plan plans[] = {{.conf = "max_reserved:20700K,expandable_ahead:1", .least = 6 * MiB, .map_bytes = 1 * MiB,
                           .max_reserved = 20700 * KiB},
                          {.greedy = true, .map_bytes = 3 * MiB}}; /* the arena released and reserved again (run) */
    for (int g = 0; g < 2; g++) {
        plan pl = plans[g];
        pl.expandable = pl.whole = pl.events = true;
        pl.seed = 11 + (uint64_t)g;
        pl.steps = 30;
        sweep_plan(pl);
    }
}
