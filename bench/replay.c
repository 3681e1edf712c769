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
    ccb_device dev = {o->device_bytes, 0, 0, 0, 0, o->vm_granularity, o->vm_backing};
    if (with_driver)
        dev = (ccb_device){o->device_bytes,      o->alloc_latency_ns, o->free_latency_ns, o->map_granule_ns,
                           o->unmap_granule_ns, o->vm_granularity,  o->vm_backing};
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

static int observe(const ccb_trace *t, const ccb_strategy_ops *ops, const char *config, const ccb_replay_options *o,
                   ccb_result *r) {
    ccb_strategy s;
    int rc = open_strategy(ops, config, o, 0, &s, r);
    if (rc != 0)
        return rc;
    void **ptr = calloc(t->slots ? t->slots : 1, sizeof *ptr);
    size_t ncp = 0;
    for (size_t i = 0; i < t->n; i++)
        ncp += ccb_op_is_checkpoint(t->ev[i].op);
    r->checkpoints = calloc(ncp ? ncp : 1, sizeof *r->checkpoints);
    size_t points = o->timeline_points ? o->timeline_points : 1000;
    size_t stride = t->n / points + 1;
    r->timeline = calloc(t->n / stride + 3, sizeof *r->timeline); /* + the empty-cache point */
    if (!ptr || !r->timeline || !r->checkpoints) {
        free(ptr);
        ops->close(&s);
        snprintf(r->why, sizeof r->why, "out of host memory");
        return -1;
    }
    ccb_mem m;
    ops->sample(&s, &m);
    size_t dev_free = ops->device_free(&s);
    r->device_free_before = s.device_free_at_open != CCB_UNKNOWN ? s.device_free_at_open
                            : dev_free == CCB_UNKNOWN           ? CCB_UNKNOWN
                                                                : dev_free + (m.reserved == CCB_UNKNOWN ? 0 : m.reserved);
    int reserved_known = m.reserved != CCB_UNKNOWN;
    size_t req = 0, peak_alloc = 0, peak_res = 0;
    r->frag_at_peak = -1;
    r->checked = ops->host_pointers;
    ccb_timeline_point *w = &r->timeline[0];
    rc = 0;
    for (size_t i = 0; i < t->n && rc == 0; i++) {
        const ccb_event *e = &t->ev[i];
        size_t reserved_before = m.reserved; /* the previous event's sample */
        if (e->op == CCB_ALLOC) {
            int a = alloc_one(ops, &s, e, &ptr[e->slot]);
            if (a == 1) {
                r->ooms++;
                ptr[e->slot] = NULL;
            } else if (a != 0 || (!ptr[e->slot] && e->size)) {
                snprintf(r->why, sizeof r->why, "event %zu: alloc of %llu bytes failed", i,
                         (unsigned long long)e->size);
                rc = -1;
                break;
            } else {
                req += e->size;
                if (ops->host_pointers && ptr[e->slot])
                    ccb_tag_block(ptr[e->slot], e->size, e->slot);
            }
        } else if (e->op == CCB_FREE) {
            if (ptr[e->slot] && ops->host_pointers && !ccb_tag_ok(ptr[e->slot], e->size, e->slot)) {
                snprintf(r->why, sizeof r->why, "event %zu: block of slot %u was overwritten (overlap?)", i, e->slot);
                rc = -1;
                break;
            }
            if (ptr[e->slot]) { /* NULL: refused (never counted) or 0 bytes */
                ops->release(&s, ptr[e->slot], e->size, e->stream);
                req -= e->size;
            }
            ptr[e->slot] = NULL;
        } else {
            other_event(t, ops, &s, e, o);
        }
        ops->sample(&s, &m);
        if (ccb_op_is_checkpoint(e->op)) { /* the state after the release (or at the mark), from the same sample */
            size_t returned = 0;
            if (e->op != CCB_MARK)
                returned = m.reserved == CCB_UNKNOWN || reserved_before == CCB_UNKNOWN ? CCB_UNKNOWN
                           : reserved_before > m.reserved                           ? reserved_before - m.reserved
                                                                                    : 0;
            r->checkpoints[r->checkpoints_n++] = (ccb_checkpoint){
                .event = i,
                .op = e->op,
                .mark = e->op == CCB_MARK ? e->slot : e->op == CCB_DOMAIN_RELEASE ? e->domain : 0,
                .keep = e->op == CCB_TRIM ? e->size : 0,
                .requested = req,
                .allocated = m.allocated,
                .reserved = m.reserved,
                .returned = returned};
        }
        if (req > r->peak_requested)
            r->peak_requested = req;
        if (m.allocated != CCB_UNKNOWN && m.allocated > peak_alloc) {
            peak_alloc = m.allocated;
            r->frag_at_peak = m.fragmentation;
        }
        if (m.reserved != CCB_UNKNOWN && m.reserved > peak_res)
            peak_res = m.reserved;
        if (i % stride == 0 && i) {
            w++;
            r->timeline_n++;
        }
        w->op = i;
        update_window(w, req, &m);
    }
    r->timeline_n++;
    ops->sample(&s, &m);
    r->strategy_requested_peak = m.requested_peak;
    r->upstream_allocs = m.upstream_allocs;
    r->upstream_frees = m.upstream_frees;
    r->reserved_after_trace = m.reserved;
    ops->empty_cache(&s);
    ops->sample(&s, &m);
    r->reserved_after_empty = m.reserved;
    /* one more timeline point, at x = n: what empty-cache left with the
     * trace's live blocks still allocated (the drop, or the pinned rest) */
    w = &r->timeline[r->timeline_n];
    memset(w, 0, sizeof *w);
    w->op = t->n;
    update_window(w, req, &m);
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
    ops->sample(&s, &m);
    if (rc == 0 && reserved_known && m.reserved != 0 && ops->gpu == 0) {
        snprintf(r->why, sizeof r->why, "after freeing everything, empty-cache left %zu bytes reserved", m.reserved);
        rc = -1;
    }
    if (ops->peaks) {
        size_t pa, pr;
        ops->peaks(&s, &pa, &pr);
        if (pa != CCB_UNKNOWN)
            peak_alloc = pa > peak_alloc ? pa : peak_alloc;
        if (pr != CCB_UNKNOWN)
            peak_res = pr > peak_res ? pr : peak_res;
    }
    r->peak_allocated = peak_alloc;
    r->peak_reserved = reserved_known ? peak_res : CCB_UNKNOWN;
    ops->close(&s);
    free(ptr);
    return rc;
}

/* `reps` timed passes; with_driver: on a device charging the driver's cost.
 * Fills median/p99 (per alloc/free op, pooled) and the median total. */
static int timed(const ccb_trace *t, const ccb_strategy_ops *ops, const char *config, const ccb_replay_options *o,
                 int with_driver, int reps, ccb_result *r, double *median_ns, double *p99_ns, double *total_ms) {
    double *lat = malloc((t->n ? t->n : 1) * (size_t)reps * sizeof *lat);
    double *totals = calloc((size_t)reps, sizeof *totals);
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
        for (size_t i = 0; i < t->n; i++) {
            const ccb_event *e = &t->ev[i];
            uint64_t t0, t1;
            int per_op = 1;
            if (e->op == CCB_ALLOC) {
                t0 = ccb_ticks();
                int a = alloc_one(ops, &s, e, &ptr[e->slot]);
                t1 = ccb_ticks();
                if (a != 0)
                    ptr[e->slot] = NULL;
            } else if (e->op == CCB_FREE) {
                if (!ptr[e->slot])
                    continue;
                t0 = ccb_ticks();
                ops->release(&s, ptr[e->slot], e->size, e->stream);
                t1 = ccb_ticks();
                ptr[e->slot] = NULL;
            } else if (e->op == CCB_DOMAIN) {
                other_event(t, ops, &s, e, o); /* a declaration: not an allocator call, untimed */
                continue;
            } else if (e->op != CCB_MARK && !(o->ignore_releases && e->op != CCB_DOMAIN_RESERVE)) {
                per_op = 0; /* release events and reservations: timed, not pooled */
                t0 = ccb_ticks();
                other_event(t, ops, &s, e, o);
                t1 = ccb_ticks();
            } else {
                continue; /* a mark costs nothing */
            }
            double d = ccb_ticks_ns(t0, t1) - timer;
            d = d < 0 ? 0 : d;
            if (per_op)
                lat[nl++] = d;
            sum += d;
        }
        totals[rep] = sum;
        for (size_t i = 0; i < t->n; i++) { /* leftovers, untimed */
            const ccb_event *e = &t->ev[i];
            if (e->op == CCB_ALLOC && ptr[e->slot]) {
                ops->release(&s, ptr[e->slot], e->size, e->stream);
                ptr[e->slot] = NULL;
            }
        }
        ops->empty_cache(&s);
        ops->close(&s);
    }
    if (rc == 0) {
        r->timer_ns = timer;
        *median_ns = ccb_quantile(lat, nl, 0.5);
        *p99_ns = ccb_quantile(lat, nl, 0.99);
        *total_ms = ccb_quantile(totals, (size_t)reps, 0.5) / 1e6;
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
    const ccb_strategy_ops *ops;
    const char *config;
    snprintf(r->trace, sizeof r->trace, "%s", t->name);
    if (ccb_strategy_resolve(spec, &ops, &config, r->strategy, sizeof r->strategy) != 0) {
        snprintf(r->strategy, sizeof r->strategy, "%s", spec);
        snprintf(r->why, sizeof r->why, "unknown strategy '%s' (ccbench --list)", spec);
        return -1;
    }
    snprintf(r->config, sizeof r->config, "%s", config);
    for (size_t i = 0; i < t->n; i++) { /* an unanalysed or corrupted trace never indexes past its arrays */
        const ccb_event *e = &t->ev[i];
        if (e->op >= CCB_OP_COUNT || (e->op <= CCB_FREE && e->slot >= t->slots) ||
            (e->op == CCB_MARK && e->slot >= t->nmarks) || (e->domain && e->domain >= t->ndomains)) {
            snprintf(r->why, sizeof r->why, "event %zu: op %u, slot %u out of range (trace not analysed?)", i,
                     (unsigned)e->op, e->slot);
            return -1;
        }
    }
    r->ops = t->n;
    r->allocs = t->allocs;
    r->frees = t->frees;
    r->driver = ops->driver;
    r->lower_bound = t->peak_requested;
    r->ideal_peak = t->ideal_peak;
    int rc = observe(t, ops, config, o, r);
    if (rc != 0)
        return rc == 1 ? 0 : -1;
    int reps = o->reps > 0 ? o->reps : 1;
    rc = timed(t, ops, config, o, 0, reps, r, &r->median_ns, &r->p99_ns, &r->total_ms);
    if (rc != 0)
        return rc == 1 ? 0 : -1;
    r->reps = reps;
    if (ops->driver == CCB_DRIVER_REAL) {
        r->driver_total_ms = r->total_ms;
        r->driver_median_ns = r->median_ns;
    } else if (ops->driver == CCB_DRIVER_MODEL &&
               (o->alloc_latency_ns || o->free_latency_ns || o->map_granule_ns || o->unmap_granule_ns)) {
        double p99;
        rc = timed(t, ops, config, o, 1, o->driver_reps > 0 ? o->driver_reps : reps, r, &r->driver_median_ns, &p99,
                   &r->driver_total_ms);
        if (rc != 0)
            return rc == 1 ? 0 : -1;
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
