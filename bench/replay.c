/*
 * replay.c — replaying a trace through a strategy, and the metrics of one
 * strategy x trace cell.
 *
 * Correctness before timing (STYLE rule 10): every replay first makes one
 * untimed OBSERVE pass, then TIMED passes, each on a fresh strategy.
 *
 *   observe  for every event: alloc or free through the strategy; on host
 *            pointers write a tag into the first and last byte of the block
 *            (one byte for a 1-byte block, nothing for 0 bytes) and check it
 *            at the free (catches overlapping or moved blocks); after every
 *            event sample the strategy (allocated, reserved, fragmentation)
 *            outside any timing, for the peaks, the fragmentation at the
 *            allocated peak and the timeline (the maximum over each window
 *            of n / timeline_points events, so no spike is lost). At a mark,
 *            and right after a release event (empty_cache / trim, applied
 *            through the strategy's own call), a CHECKPOINT: live requested,
 *            allocated, reserved. At the end: reserved after the trace, then
 *            empty-cache with the trace's leftovers still live (what release
 *            can really return, and the device's free memory then: what the
 *            next tenant could get), then free the leftovers, empty-cache
 *            again and require reserved == 0 (host strategies that know it).
 *   timed    each alloc and free alone between two clock reads (clock.c);
 *            the median cost of a read is subtracted. Latencies of all passes are
 *            pooled for the median and p99; total = median over passes of
 *            the summed latencies, release events included (timed the same
 *            way, not pooled in the per-op figures).
 *   driver   the timed passes again, on a simulated device that charges the
 *            driver's latency per upstream alloc and free (host strategies
 *            over a device; see ccb_strategy_ops.driver for the others).
 *
 * Iterations (--iterations N, default 1: the program's steady state). With
 * N > 1 every pass above replays the trace N times back to back in ONE
 * strategy, and its figures are the whole run's (a trace N times as long):
 *   - between iterations the blocks the trace left live are freed, in trace
 *     order (timed as frees in the timed passes, tag-checked in the observe
 *     pass), so a trace that ends with blocks live holds them once, not N
 *     times; nothing else: no empty-cache, no trim, unless the trace has one;
 *   - a domain declaration is applied once, in the first iteration (a
 *     domain is an object the program makes once); later iterations'
 *     allocations go to the same domains, their releases release them;
 *   - checkpoints and the timeline run over the whole run: an event's
 *     position is k x n + i (iteration k from 0, event i of n);
 *   - the first iteration alone (what N = 1 measures) and iterations 2..N
 *     together are reported apart: peak reserved (sampled after every
 *     event and each between-iterations free; the later one raised to the
 *     strategy's own peak where that rose after the first iteration),
 *     upstream calls (the strategy's counts at the first iteration's end,
 *     and what came after it up to the run's end), and the time alone and
 *     with the driver's cost (each the median over passes of that part's
 *     sum, so first + later need not equal the total's median).
 *
 * An alloc the strategy refuses (OOM) is counted and its free skipped; the
 * replay goes on, as a program that handles OOM would. A 0-byte alloc may
 * give NULL: its free is skipped too (cca_free(NULL) and cudaFree(NULL) do
 * nothing either).
 *
 * Live pointers sit in an array indexed by the trace's slot, so the harness
 * adds one array access per event to what is timed.
 */
#include "ccbench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double ccb_quantile(double *v, size_t n, double q) {
    if (!n)
        return NAN;
    qsort(v, n, sizeof *v, cmp_double);
    size_t k = (size_t)ceil(q * (double)n);
    k = k ? k - 1 : 0;
    return v[k < n ? k : n - 1];
}

/* First byte = tag, last byte = ~tag; a 1-byte block holds the tag alone
 * (first and last are the same byte), a 0-byte block nothing. */
void ccb_tag_block(void *p, size_t size, uint32_t slot) {
    unsigned char tag = (unsigned char)(slot * 31u + 7u);
    if (size >= 1)
        ((unsigned char *)p)[0] = tag;
    if (size >= 2)
        ((unsigned char *)p)[size - 1] = (unsigned char)~tag;
}

int ccb_tag_ok(const void *p, size_t size, uint32_t slot) {
    unsigned char tag = (unsigned char)(slot * 31u + 7u);
    const unsigned char *b = p;
    return (size < 1 || b[0] == tag) && (size < 2 || b[size - 1] == (unsigned char)~tag);
}

static int open_strategy(const ccb_strategy_ops *ops, const char *config, const ccb_replay_options *o, int with_driver,
                         ccb_strategy *s, ccb_result *r) {
    memset(s, 0, sizeof *s);
    s->ops = ops;
    s->device_free_at_open = CCB_UNKNOWN;
    ccb_device dev = {o->device_bytes, 0, 0, 0, 0, o->vm_granularity, o->vm_backing, 0, 0};
    if (with_driver)
        dev = (ccb_device){o->device_bytes,      o->alloc_latency_ns, o->free_latency_ns, o->map_granule_ns,
                           o->unmap_granule_ns, o->vm_granularity,  o->vm_backing,       o->map_call_ns,
                           o->unmap_call_ns};
    int rc = ops->open(s, config, &dev, r->why, sizeof r->why);
    if (rc == 1)
        r->skipped = 1;
    return rc;
}

/* An alloc into the event's domain: through the strategy's alloc_in where it
 * has domains, else from its one pool. */
static inline int alloc_one(const ccb_strategy_ops *ops, ccb_strategy *s, const ccb_event *e, void **ptr) {
    if (e->domain && ops->alloc_in)
        return ops->alloc_in(s, e->domain, e->size, e->stream, ptr);
    return ops->alloc(s, e->size, e->stream, ptr);
}

/* Every event but alloc and free: release events through the strategy's own
 * calls (not with ignore_releases), domain events where it has domains. */
static void other_event(const ccb_trace *t, const ccb_strategy_ops *ops, ccb_strategy *s, const ccb_event *e,
                        const ccb_replay_options *o) {
    switch (e->op) {
    case CCB_EMPTY_CACHE:
        if (!o->ignore_releases)
            ops->empty_cache(s);
        break;
    case CCB_TRIM:
        if (!o->ignore_releases)
            ops->trim(s, e->size > SIZE_MAX ? SIZE_MAX : (size_t)e->size);
        break;
    case CCB_DOMAIN:
        if (ops->domain_open)
            ops->domain_open(s, e->domain, ccb_domain_name(t, e->domain));
        break;
    case CCB_DOMAIN_RELEASE:
        if (ops->domain_release && !o->ignore_releases)
            ops->domain_release(s, e->domain);
        break;
    case CCB_DOMAIN_RESERVE:
        if (ops->domain_reserve)
            ops->domain_reserve(s, e->domain, e->size > SIZE_MAX ? SIZE_MAX : (size_t)e->size);
        break;
    default: /* a mark */
        break;
    }
}

static void update_window(ccb_timeline_point *w, size_t req, const ccb_mem *m) {
    if (req > w->requested)
        w->requested = req;
    if (m->allocated != CCB_UNKNOWN && m->allocated > w->allocated)
        w->allocated = m->allocated;
    if (m->reserved != CCB_UNKNOWN && m->reserved > w->reserved)
        w->reserved = m->reserved;
}

/* The run's length in iterations (o->iterations, 0 meaning 1). */
static size_t iterations_of(const ccb_replay_options *o) {
    return o->iterations > 1 ? (size_t)o->iterations : 1;
}

/* What the observe pass carries from one event to the next. */
typedef struct observe_run {
    const ccb_trace *t;
    const ccb_strategy_ops *ops;
    const ccb_replay_options *o;
    ccb_strategy *s;
    ccb_result *r;
    void **ptr;        /* live pointers by slot                      */
    ccb_mem m;         /* the latest sample                          */
    size_t req;        /* live requested bytes                       */
    size_t peak_alloc; /* sampled maxima over the run                */
    size_t peak_res;
    size_t iter_peak_res;  /* ... over the iteration being replayed      */
    size_t stride;         /* events per timeline window                 */
    ccb_timeline_point *w; /* the window being filled                    */
} observe_run;

/* The maxima after a sample. */
static void note_peaks(observe_run *x) {
    const ccb_mem *m = &x->m;
    if (m->allocated != CCB_UNKNOWN && m->allocated > x->peak_alloc) {
        x->peak_alloc = m->allocated;
        x->r->frag_at_peak = m->fragmentation;
    }
    if (m->reserved != CCB_UNKNOWN && m->reserved > x->peak_res)
        x->peak_res = m->reserved;
    if (m->reserved != CCB_UNKNOWN && m->reserved > x->iter_peak_res)
        x->iter_peak_res = m->reserved;
}

/* Event i of iteration k (0-based): the call, the tag check, the sample, a
 * checkpoint, the peaks and the timeline. Its position in the run, k x n +
 * i, is the checkpoint's event and the timeline's x. 0, or -1 (why says). */
static int observe_event(observe_run *x, size_t k, size_t i) {
    const ccb_trace *t = x->t;
    const ccb_strategy_ops *ops = x->ops;
    ccb_result *r = x->r;
    const ccb_event *e = &t->ev[i];
    size_t pos = k * t->n + i;
    char iter[32] = ""; /* named in a message from iteration 2 on */
    if (k)
        snprintf(iter, sizeof iter, " of iteration %zu", k + 1);
    size_t reserved_before = x->m.reserved; /* the previous event's sample */
    if (e->op == CCB_ALLOC) {
        int a = alloc_one(ops, x->s, e, &x->ptr[e->slot]);
        if (a == 1) {
            r->ooms++;
            x->ptr[e->slot] = NULL;
        } else if (a != 0 || (!x->ptr[e->slot] && e->size)) {
            snprintf(r->why, sizeof r->why, "event %zu%s: alloc of %llu bytes failed", i, iter,
                     (unsigned long long)e->size);
            return -1;
        } else {
            x->req += e->size;
            if (ops->host_pointers && x->ptr[e->slot])
                ccb_tag_block(x->ptr[e->slot], e->size, e->slot);
        }
    } else if (e->op == CCB_FREE) {
        void *p = x->ptr[e->slot];
        if (p && ops->host_pointers && !ccb_tag_ok(p, e->size, e->slot)) {
            snprintf(r->why, sizeof r->why, "event %zu%s: block of slot %u was overwritten (overlap?)", i, iter,
                     e->slot);
            return -1;
        }
        if (p) { /* NULL: refused (never counted) or 0 bytes */
            ops->release(x->s, p, e->size, e->stream);
            x->req -= e->size;
        }
        x->ptr[e->slot] = NULL;
    } else if (e->op != CCB_DOMAIN || k == 0) { /* a domain is declared once */
        other_event(t, ops, x->s, e, x->o);
    }
    ops->sample(x->s, &x->m);
    const ccb_mem *m = &x->m;
    if (ccb_op_is_checkpoint(e->op)) { /* the state after the release (or at the mark), from the same sample */
        size_t returned = 0;
        if (e->op != CCB_MARK)
            returned = m->reserved == CCB_UNKNOWN || reserved_before == CCB_UNKNOWN ? CCB_UNKNOWN
                       : reserved_before > m->reserved                              ? reserved_before - m->reserved
                                                                                    : 0;
        r->checkpoints[r->checkpoints_n++] = (ccb_checkpoint){.event = pos,
                                                              .op = e->op,
                                                              .mark = e->op == CCB_MARK             ? e->slot
                                                                      : e->op == CCB_DOMAIN_RELEASE ? e->domain
                                                                                                    : 0,
                                                              .keep = e->op == CCB_TRIM ? e->size : 0,
                                                              .requested = x->req,
                                                              .allocated = m->allocated,
                                                              .reserved = m->reserved,
                                                              .returned = returned};
    }
    if (x->req > r->peak_requested)
        r->peak_requested = x->req;
    note_peaks(x);
    if (pos % x->stride == 0 && pos) {
        x->w++;
        r->timeline_n++;
    }
    x->w->op = pos;
    update_window(x->w, x->req, m);
    return 0;
}

/* Before iteration k (k >= 1): free, in trace order, the blocks the
 * iteration before left live (tags checked first), then one sample. */
static int observe_leftovers(observe_run *x, size_t k) {
    const ccb_trace *t = x->t;
    for (size_t i = 0; i < t->n; i++) {
        const ccb_event *e = &t->ev[i];
        void *p = x->ptr[e->slot];
        if (e->op != CCB_ALLOC || !p)
            continue;
        if (x->ops->host_pointers && !ccb_tag_ok(p, e->size, e->slot)) {
            snprintf(x->r->why, sizeof x->r->why, "before iteration %zu: block of slot %u was overwritten (overlap?)",
                     k + 1, e->slot);
            return -1;
        }
        x->ops->release(x->s, p, e->size, e->stream);
        x->req -= e->size;
        x->ptr[e->slot] = NULL;
    }
    x->ops->sample(x->s, &x->m);
    note_peaks(x);
    return 0;
}

static int observe(const ccb_trace *t, const ccb_strategy_ops *ops, const char *config, const ccb_replay_options *o,
                   ccb_result *r) {
    ccb_strategy s;
    int rc = open_strategy(ops, config, o, 0, &s, r);
    if (rc != 0)
        return rc;
    size_t iters = iterations_of(o), events = t->n * iters; /* iters <= CCB_MAX_ITERATIONS: no overflow */
    void **ptr = calloc(t->slots ? t->slots : 1, sizeof *ptr);
    size_t ncp = 0;
    for (size_t i = 0; i < t->n; i++)
        ncp += ccb_op_is_checkpoint(t->ev[i].op);
    ncp *= iters;
    r->checkpoints = calloc(ncp ? ncp : 1, sizeof *r->checkpoints);
    size_t points = o->timeline_points ? o->timeline_points : 1000;
    size_t stride = events / points + 1;
    r->timeline = calloc(events / stride + 3, sizeof *r->timeline); /* + the empty-cache point */
    if (!ptr || !r->timeline || !r->checkpoints) {
        free(ptr);
        ops->close(&s);
        snprintf(r->why, sizeof r->why, "out of host memory");
        return -1;
    }
    observe_run x = {.t = t, .ops = ops, .o = o, .s = &s, .r = r, .ptr = ptr, .stride = stride, .w = &r->timeline[0]};
    ccb_mem *m = &x.m;
    ops->sample(&s, m);
    size_t dev_free = ops->device_free(&s);
    r->device_free_before = s.device_free_at_open != CCB_UNKNOWN ? s.device_free_at_open
                            : dev_free == CCB_UNKNOWN            ? CCB_UNKNOWN
                                                      : dev_free + (m->reserved == CCB_UNKNOWN ? 0 : m->reserved);
    int reserved_known = m->reserved != CCB_UNKNOWN;
    r->frag_at_peak = -1;
    r->checked = ops->host_pointers;
    rc = 0;
    for (size_t k = 0; k < iters && rc == 0; k++) {
        if (k > 0)
            rc = observe_leftovers(&x, k);
        for (size_t i = 0; i < t->n && rc == 0; i++)
            rc = observe_event(&x, k, i);
        if (k == 0 && iters > 1) { /* the first iteration's figures: its peak (the strategy's own too), its calls */
            size_t pa, pr = CCB_UNKNOWN;
            if (ops->peaks)
                ops->peaks(&s, &pa, &pr);
            r->first_peak_reserved = !reserved_known                             ? CCB_UNKNOWN
                                     : pr != CCB_UNKNOWN && pr > x.iter_peak_res ? pr
                                                                                 : x.iter_peak_res;
            r->first_upstream_allocs = m->upstream_allocs;
            r->first_upstream_frees = m->upstream_frees;
            x.iter_peak_res = 0; /* from here: the later iterations' */
        }
    }
    r->timeline_n++;
    ops->sample(&s, m);
    r->strategy_requested_peak = m->requested_peak;
    r->upstream_allocs = m->upstream_allocs;
    r->upstream_frees = m->upstream_frees;
    r->reserved_after_trace = m->reserved;
    ops->empty_cache(&s);
    ops->sample(&s, m);
    r->reserved_after_empty = m->reserved;
    /* one more timeline point, at x = the run's events: what empty-cache
     * left with the last iteration's live blocks still allocated (the drop,
     * or the pinned rest) */
    ccb_timeline_point *w = &r->timeline[r->timeline_n];
    memset(w, 0, sizeof *w);
    w->op = events;
    update_window(w, x.req, m);
    r->timeline_n++;
    r->device_free_after = ops->device_free(&s); /* what the next tenant could get now */
    /* free the trace's leftovers (their sizes come from their alloc events) */
    for (size_t i = 0; i < t->n; i++) {
        const ccb_event *e = &t->ev[i];
        if (e->op == CCB_ALLOC && ptr[e->slot]) {
            ops->release(&s, ptr[e->slot], e->size, e->stream);
            ptr[e->slot] = NULL;
        }
    }
    ops->empty_cache(&s);
    ops->sample(&s, m);
    if (rc == 0 && reserved_known && m->reserved != 0 && ops->gpu == 0) {
        snprintf(r->why, sizeof r->why, "after freeing everything, empty-cache left %zu bytes reserved", m->reserved);
        rc = -1;
    }
    size_t peak_alloc = x.peak_alloc, peak_res = x.peak_res, pr = CCB_UNKNOWN;
    if (ops->peaks) {
        size_t pa;
        ops->peaks(&s, &pa, &pr);
        if (pa != CCB_UNKNOWN)
            peak_alloc = pa > peak_alloc ? pa : peak_alloc;
        if (pr != CCB_UNKNOWN)
            peak_res = pr > peak_res ? pr : peak_res;
    }
    r->peak_allocated = peak_alloc;
    r->peak_reserved = reserved_known ? peak_res : CCB_UNKNOWN;
    if (iters > 1) { /* the later iterations: sampled, and the strategy's own peak when it rose after the first */
        size_t later = x.iter_peak_res;
        if (pr != CCB_UNKNOWN && r->first_peak_reserved != CCB_UNKNOWN && pr > r->first_peak_reserved && pr > later)
            later = pr;
        r->later_peak_reserved = reserved_known ? later : CCB_UNKNOWN;
        int calls_known = r->first_upstream_allocs != UINT64_MAX && r->upstream_allocs != UINT64_MAX;
        r->later_upstream_allocs = calls_known ? r->upstream_allocs - r->first_upstream_allocs : UINT64_MAX;
        r->later_upstream_frees = calls_known ? r->upstream_frees - r->first_upstream_frees : UINT64_MAX;
    }
    ops->close(&s);
    free(ptr);
    return rc;
}

/* One pass's figures (timed): per op (pooled), and totals, medians over the passes. */
typedef struct pass_times {
    double median_ns, p99_ns;
    double total_ms;           /* the whole run  */
    double first_ms, later_ms; /* its first iteration, its later ones */
} pass_times;

/* One event of a timed pass (iteration first or not): 1 with its latency
 * in *ns (*per_op: an alloc or a free, pooled for the per-op figures), 0
 * when nothing was timed. */
static int timed_event(const ccb_trace *t, const ccb_strategy_ops *ops, ccb_strategy *s, const ccb_event *e,
                       const ccb_replay_options *o, void **ptr, int first, double timer, double *ns, int *per_op) {
    uint64_t t0, t1;
    *per_op = 1;
    if (e->op == CCB_ALLOC) {
        t0 = ccb_ticks();
        int a = alloc_one(ops, s, e, &ptr[e->slot]);
        t1 = ccb_ticks();
        if (a != 0)
            ptr[e->slot] = NULL;
    } else if (e->op == CCB_FREE) {
        if (!ptr[e->slot])
            return 0;
        t0 = ccb_ticks();
        ops->release(s, ptr[e->slot], e->size, e->stream);
        t1 = ccb_ticks();
        ptr[e->slot] = NULL;
    } else if (e->op == CCB_DOMAIN) {
        if (first)
            other_event(t, ops, s, e, o); /* a declaration: not an allocator call, untimed; once */
        return 0;
    } else if (e->op != CCB_MARK && !(o->ignore_releases && e->op != CCB_DOMAIN_RESERVE)) {
        *per_op = 0; /* release events and reservations: timed, not pooled */
        t0 = ccb_ticks();
        other_event(t, ops, s, e, o);
        t1 = ccb_ticks();
    } else {
        return 0; /* a mark costs nothing */
    }
    double d = ccb_ticks_ns(t0, t1) - timer;
    *ns = d < 0 ? 0 : d;
    return 1;
}

/* The blocks left live, freed in trace order: timed (between iterations,
 * each latency into lat at *nl, their sum returned) or not (lat NULL: the
 * end of a pass). */
static double free_leftovers(const ccb_trace *t, const ccb_strategy_ops *ops, ccb_strategy *s, void **ptr, double timer,
                             double *lat, size_t *nl) {
    double sum = 0;
    for (size_t i = 0; i < t->n; i++) {
        const ccb_event *e = &t->ev[i];
        if (e->op != CCB_ALLOC || !ptr[e->slot])
            continue;
        uint64_t t0 = ccb_ticks();
        ops->release(s, ptr[e->slot], e->size, e->stream);
        uint64_t t1 = ccb_ticks();
        ptr[e->slot] = NULL;
        if (lat) {
            double d = ccb_ticks_ns(t0, t1) - timer;
            d = d < 0 ? 0 : d;
            lat[(*nl)++] = d;
            sum += d;
        }
    }
    return sum;
}

/* `reps` timed passes; with_driver: on a device charging the driver's cost.
 * Fills the per alloc/free op median/p99 (pooled over passes and
 * iterations) and the median totals. */
static int timed(const ccb_trace *t, const ccb_strategy_ops *ops, const char *config, const ccb_replay_options *o,
                 int with_driver, int reps, ccb_result *r, pass_times *out) {
    size_t iters = iterations_of(o);
    /* a latency per event and per block freed between iterations: at most
     * n + slots an iteration (iters <= CCB_MAX_ITERATIONS, reps <= 1000) */
    size_t per_rep = (t->n + (iters > 1 ? t->slots : 0)) * iters, nlat = per_rep * (size_t)reps;
    int overflow = per_rep / iters < t->n || nlat / (size_t)reps != per_rep || nlat > SIZE_MAX / sizeof(double);
    double *lat = overflow ? NULL : malloc((nlat ? nlat : 1) * sizeof *lat);
    double *totals = calloc(3 * (size_t)reps, sizeof *totals), *firsts = totals + reps, *laters = totals + 2 * reps;
    void **ptr = calloc(t->slots ? t->slots : 1, sizeof *ptr);
    if (!lat || !totals || !ptr) {
        free(lat);
        free(totals);
        free(ptr);
        snprintf(r->why, sizeof r->why, "out of host memory");
        return -1;
    }
    double timer = ccb_timer_overhead_ns();
    size_t nl = 0;
    int rc = 0;
    for (int rep = 0; rep < reps && rc == 0; rep++) {
        ccb_strategy s;
        if ((rc = open_strategy(ops, config, o, with_driver, &s, r)) != 0)
            break;
        double sum = 0;
        for (size_t k = 0; k < iters; k++) {
            if (k > 0)
                sum += free_leftovers(t, ops, &s, ptr, timer, lat, &nl);
            for (size_t i = 0; i < t->n; i++) {
                double d;
                int per_op;
                if (!timed_event(t, ops, &s, &t->ev[i], o, ptr, k == 0, timer, &d, &per_op))
                    continue;
                if (per_op)
                    lat[nl++] = d;
                sum += d;
            }
            if (k == 0)
                firsts[rep] = sum;
        }
        totals[rep] = sum;
        laters[rep] = sum - firsts[rep];
        free_leftovers(t, ops, &s, ptr, timer, NULL, NULL); /* untimed */
        ops->empty_cache(&s);
        ops->close(&s);
    }
    if (rc == 0) {
        r->timer_ns = timer;
        out->median_ns = ccb_quantile(lat, nl, 0.5);
        out->p99_ns = ccb_quantile(lat, nl, 0.99);
        out->total_ms = ccb_quantile(totals, (size_t)reps, 0.5) / 1e6;
        /* the parts apart only when there are parts */
        out->first_ms = iters > 1 ? ccb_quantile(firsts, (size_t)reps, 0.5) / 1e6 : NAN;
        out->later_ms = iters > 1 ? ccb_quantile(laters, (size_t)reps, 0.5) / 1e6 : NAN;
    }
    free(lat);
    free(totals);
    free(ptr);
    return rc;
}

static int replay(const ccb_trace *t, const char *spec, const ccb_replay_options *o, ccb_result *r) {
    memset(r, 0, sizeof *r);
    /* unknown until measured: a row that fails early says "failed", never 0s */
    r->peak_reserved = r->reserved_after_trace = r->reserved_after_empty = CCB_UNKNOWN;
    r->device_free_before = r->device_free_after = CCB_UNKNOWN;
    r->strategy_requested_peak = CCB_UNKNOWN;
    r->upstream_allocs = r->upstream_frees = UINT64_MAX;
    r->frag_at_peak = -1;
    r->ratio = r->ratio_requested = r->ratio_ideal = NAN;
    r->median_ns = r->p99_ns = r->total_ms = NAN;
    r->driver_total_ms = r->driver_median_ns = NAN;
    r->iterations = (int)iterations_of(o);
    r->first_peak_reserved = r->later_peak_reserved = CCB_UNKNOWN;
    r->first_upstream_allocs = r->first_upstream_frees = UINT64_MAX;
    r->later_upstream_allocs = r->later_upstream_frees = UINT64_MAX;
    r->first_total_ms = r->later_total_ms = r->first_driver_total_ms = r->later_driver_total_ms = NAN;
    const ccb_strategy_ops *ops;
    const char *config;
    snprintf(r->trace, sizeof r->trace, "%s", t->name);
    if (ccb_strategy_resolve(spec, &ops, &config, r->strategy, sizeof r->strategy) != 0) {
        snprintf(r->strategy, sizeof r->strategy, "%s", spec);
        snprintf(r->why, sizeof r->why, "unknown strategy '%s' (ccbench --list)", spec);
        return -1;
    }
    snprintf(r->config, sizeof r->config, "%s", config);
    if (o->iterations < 0 || o->iterations > CCB_MAX_ITERATIONS) {
        snprintf(r->why, sizeof r->why, "%d iterations: not in 1..%d", o->iterations, CCB_MAX_ITERATIONS);
        return -1;
    }
    for (size_t i = 0; i < t->n; i++) { /* an unanalysed or corrupted trace never indexes past its arrays */
        const ccb_event *e = &t->ev[i];
        if (e->op >= CCB_OP_COUNT || (e->op <= CCB_FREE && e->slot >= t->slots) ||
            (e->op == CCB_MARK && e->slot >= t->nmarks) || (e->domain && e->domain >= t->ndomains)) {
            snprintf(r->why, sizeof r->why, "event %zu: op %u, slot %u out of range (trace not analysed?)", i,
                     (unsigned)e->op, e->slot);
            return -1;
        }
    }
    r->ops = t->n * (size_t)r->iterations; /* the events replayed (not the frees between iterations) */
    r->allocs = t->allocs * (uint64_t)r->iterations;
    r->frees = t->frees * (uint64_t)r->iterations;
    r->driver = ops->driver;
    r->lower_bound = t->peak_requested;
    r->ideal_peak = t->ideal_peak;
    int rc = observe(t, ops, config, o, r);
    if (rc != 0)
        return rc == 1 ? 0 : -1;
    int reps = o->reps > 0 ? o->reps : 1;
    pass_times p;
    rc = timed(t, ops, config, o, 0, reps, r, &p);
    if (rc != 0)
        return rc == 1 ? 0 : -1;
    r->reps = reps;
    r->median_ns = p.median_ns;
    r->p99_ns = p.p99_ns;
    r->total_ms = p.total_ms;
    r->first_total_ms = p.first_ms;
    r->later_total_ms = p.later_ms;
    int model = ops->driver == CCB_DRIVER_MODEL &&
                (o->alloc_latency_ns || o->free_latency_ns || o->map_granule_ns || o->unmap_granule_ns ||
                 o->map_call_ns || o->unmap_call_ns);
    if (model) {
        rc = timed(t, ops, config, o, 1, o->driver_reps > 0 ? o->driver_reps : reps, r, &p);
        if (rc != 0)
            return rc == 1 ? 0 : -1;
    }
    if (model || ops->driver == CCB_DRIVER_REAL) { /* REAL: the timed passes' figures (p) already are */
        r->driver_median_ns = p.median_ns;
        r->driver_total_ms = p.total_ms;
        r->first_driver_total_ms = p.first_ms;
        r->later_driver_total_ms = p.later_ms;
    }
    if (r->peak_reserved != CCB_UNKNOWN && r->peak_allocated)
        r->ratio = (double)r->peak_reserved / (double)r->peak_allocated;
    /* the references are the whole trace's: a strategy that refused some of
     * its allocations held another trace, so its ratio to them (below 1 when
     * it refused a large block) is no figure of it: unknown */
    if (r->peak_reserved != CCB_UNKNOWN && r->lower_bound && !r->ooms)
        r->ratio_requested = (double)r->peak_reserved / (double)r->lower_bound;
    if (r->peak_reserved != CCB_UNKNOWN && r->ideal_peak && r->ideal_peak != CCB_UNKNOWN && !r->ooms)
        r->ratio_ideal = (double)r->peak_reserved / (double)r->ideal_peak;
    return 0;
}

int ccb_replay(const ccb_trace *t, const char *spec, const ccb_replay_options *o, ccb_result *r) {
    /* a failure in any pass fails the cell, the last pass (with the
     * driver's cost) included: what the passes before it measured is not
     * reported as a result */
    int rc = replay(t, spec, o, r);
    r->failed = rc != 0;
    return rc;
}

void ccb_result_free(ccb_result *r) {
    free(r->timeline);
    free(r->checkpoints);
    r->checkpoints = NULL;
    r->checkpoints_n = 0;
    r->timeline = NULL;
    r->timeline_n = 0;
}
