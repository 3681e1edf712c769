/*
 * demo.c — `ccrun --demo`: the whole story in three acts on one device.
 *
 *   Act 1  greedy + --keep-cache (TensorFlow's default): the allocator takes
 *          90% of the device at creation; after model A is unloaded the idle
 *          process still holds it, a second tenant on the same device is
 *          refused, and model B only fits because it reuses A's cache.
 *   Act 2  growth (PyTorch-like): reserved follows need; a small model run
 *          with changing batch sizes splits cached blocks; the fragmentation
 *          figure and what cca_trim recovers (and what live weights pin).
 *   Act 2x the same over expandable segments (expandable:1): trim with the
 *          model still loaded unmaps the free pages around its weights, where
 *          classic segments pinned by them give back nothing.
 *   Act 3  explicit release: A, B, C one after another, each followed by
 *          ccr_engine_release; the device's free memory is back at its
 *          starting value every time.
 *
 * Sizing: the three synthetic models hold ~60% of the device's free memory
 * each (so two never fit side by side), with different shapes. The act-2
 * model is small and wide so that large batches stay cheap on 2 CPU cores.
 * One device (a cca_upstream) is shared by every act's engine, so the
 * second tenant of act 1 is a real competitor (cca_upstream_alloc).
 */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ccrun.h"

typedef struct summary {
    char act[4], what[64], result[160];
} summary;

typedef struct demo {
    const ccrun_options *o;
    cca_upstream *dev;
    int simulated;
    size_t total, free0;
    size_t batch, iters;
    ccr_timeline *tl;
    ccrun_report rep;
    summary sum[16];
    size_t n_sum;
    int failed;
} demo;

static void add_summary(demo *d, const char *act, const char *what, const char *fmt, ...) {
    if (d->n_sum == sizeof d->sum / sizeof d->sum[0])
        return;
    summary *s = &d->sum[d->n_sum++];
    snprintf(s->act, sizeof s->act, "%s", act);
    snprintf(s->what, sizeof s->what, "%s", what);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->result, sizeof s->result, fmt, ap);
    va_end(ap);
}

/* A spec of `layers` square W×W layers plus a 10-way softmax head, ~target
 * bytes. Stays inside the spec grammar's limits (CCR_MAX_LAYERS layers, each
 * matrix <= 2^31 elements, so W <= 46336): on a very large device the model
 * is smaller than `target`, never a malformed spec or a write past buf. */
static void make_spec(char *buf, size_t len, size_t target, size_t layers, unsigned seed) {
    double floats = (double)target / 4.0;
    while (floats / (double)layers > (double)(1u << 30) && layers < CCR_MAX_LAYERS - 1)
        layers++;
    double side = sqrt(floats / (double)layers);
    size_t w = side > 46336.0 ? 46336 : (size_t)side;
    w = w > 64 ? w / 64 * 64 : 64;
    size_t pos = 0;
    int n = snprintf(buf, len, "mlp:%zu", w);
    pos += n > 0 ? (size_t)n : 0;
    for (size_t i = 0; i < layers && pos < len; i++) {
        n = snprintf(buf + pos, len - pos, "x%zu", w);
        pos += n > 0 ? (size_t)n : 0;
    }
    if (pos < len)
        snprintf(buf + pos, len - pos, "x10:relu:softmax:seed=%u", seed);
}

static ccr_engine *engine(demo *d, const char *policy) {
    char *conf = ccrun_alloc_conf(d->o, policy);
    if (!conf) {
        fprintf(stderr, "ccrun: demo: out of host memory\n");
        d->failed = 1;
        return NULL;
    }
    ccr_engine_options eo;
    ccr_engine_options_default(&eo);
    eo.upstream = d->dev;
    eo.alloc_conf = conf;
    eo.timeline = d->tl;
    if (isatty(STDOUT_FILENO))
        eo.progress = ccrun_progress;
    ccr_engine *e = NULL;
    ccr_status st = ccr_engine_create(&eo, &e);
    free(conf);
    if (st != CCR_OK) {
        fprintf(stderr, "ccrun: demo: %s\n", ccr_last_error());
        d->failed = 1;
        return NULL;
    }
    return e;
}

/* Load, run d->iters batches of `batch`, print rows. Returns the model or NULL. */
static ccr_model *load_run(demo *d, ccr_engine *e, const char *label, const char *spec, size_t batch) {
    char b0[32];
    ccr_model *m = NULL;
    double t = ccrun_now_ms();
    if (ccr_model_load_spec(e, spec, &m) != CCR_OK) {
        ccrun_phase(&d->rep, e, "load", label, ccrun_now_ms() - t, "FAILED");
        printf("          -> %s\n", ccr_last_error());
        return NULL;
    }
    ccrun_phase(&d->rep, e, "load", label, ccrun_now_ms() - t, "%s of weights",
                cca_format_bytes(ccr_arch_param_bytes(ccr_model_arch(m)), b0, sizeof b0));
    const ccr_arch *a = ccr_model_arch(m);
    size_t in = a->layers[0].in, out = a->layers[a->n_layers - 1].out;
    /* a --batch the device can never hold is refused before host memory is taken */
    int fits = ccr_model_check_batch(m, batch, NULL) == CCR_OK;
    if (!fits)
        printf("          -> run refused: %s\n", ccr_last_error());
    float *x = fits ? malloc(batch * in * sizeof(float)) : NULL;
    float *y = fits ? malloc(batch * out * sizeof(float)) : NULL;
    t = ccrun_now_ms();
    int ok = x && y;
    for (size_t i = 0; ok && i < d->iters; i++) {
        ccrun_fill_input(x, batch * in, d->o->seed + i);
        if (ccr_model_run(m, x, batch, y) != CCR_OK) {
            printf("          -> run failed: %s\n", ccr_last_error());
            ok = 0;
        }
    }
    if (ok)
        ccrun_phase(&d->rep, e, "run", label, ccrun_now_ms() - t, "%zu x batch %zu", d->iters, batch);
    free(x);
    free(y);
    if (!ok) {
        ccr_model_unload(m);
        return NULL;
    }
    return m;
}

static void unload(demo *d, ccr_engine *e, ccr_model *m, const char *label) {
    double t = ccrun_now_ms();
    ccr_model_unload(m);
    ccrun_phase(&d->rep, e, "unload", label, ccrun_now_ms() - t, "");
}

static size_t reserved(ccr_engine *e) {
    cca_stats s;
    cca_get_stats(ccr_engine_allocator(e), &s);
    return s.reserved_bytes;
}

/* Print the act's title and table header, create its engine, show it. */
static ccr_engine *begin_act(demo *d, const char *title, const char *policy, const char *note) {
    printf("\n== %s ==\n", title);
    ccrun_table_header(&d->rep);
    ccr_engine *e = engine(d, policy);
    if (e)
        ccrun_phase(&d->rep, e, "create", "", 0, "%s", note);
    return e;
}

static double pct(size_t part, size_t whole) {
    return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

static void act1(demo *d, const char *spec_a, const char *spec_b) {
    char b0[32], b1[32], b2[32];
    ccr_engine *e = begin_act(d, "Act 1: greedy + --keep-cache (TensorFlow's default): memory stays with the process",
                              "greedy", "greedy arena reserved at creation");
    if (!e)
        return;
    ccr_model *a = load_run(d, e, "A", spec_a, d->batch);
    if (a)
        unload(d, e, a, "A");
    size_t held = reserved(e);
    ccrun_phase(&d->rep, e, "idle", "", 0, "no model loaded: process holds %.0f%% of the device", pct(held, d->total));
    add_summary(d, "1", "idle greedy process (no model) holds", "%s = %.0f%% of the device",
                cca_format_bytes(held, b0, sizeof b0), pct(held, d->total));

    /* the second tenant: plain allocation on the same device */
    size_t want = d->free0 * 3 / 10 / 512 * 512, free_now = 0, total = 0;
    cca_upstream_mem_info(d->dev, &free_now, &total);
    void *p = NULL;
    cca_status cs = cca_upstream_alloc(d->dev, want, &p);
    if (cs == CCA_OK) {
        printf("  second tenant asks for %s: granted (device had %s free)\n", cca_format_bytes(want, b0, sizeof b0),
               cca_format_bytes(free_now, b1, sizeof b1));
        add_summary(d, "1", "second tenant asking 30% of the device", "granted (unexpected: greedy left room)");
        cca_upstream_free(d->dev, p, want);
    } else {
        printf("  second tenant asks for %s: REFUSED (%s): only %s free, while this idle process caches %s\n",
               cca_format_bytes(want, b0, sizeof b0), cca_status_string(cs), cca_format_bytes(free_now, b1, sizeof b1),
               cca_format_bytes(held, b2, sizeof b2));
        add_summary(d, "1", "second tenant asking 30% of the device", "refused: %s free, %s idle in our cache",
                    cca_format_bytes(free_now, b1, sizeof b1), cca_format_bytes(held, b2, sizeof b2));
    }

    cca_stats s0, s1;
    cca_get_stats(ccr_engine_allocator(e), &s0);
    ccr_model *b = load_run(d, e, "B", spec_b, d->batch);
    cca_get_stats(ccr_engine_allocator(e), &s1);
    if (b) {
        printf("  B fits only because it reuses A's cache: %llu new upstream allocations, reserved unchanged at %s\n",
               (unsigned long long)(s1.upstream_allocs - s0.upstream_allocs),
               cca_format_bytes(s1.reserved_bytes, b0, sizeof b0));
        add_summary(d, "1", "model B after A (keep-cache)", "fits by reusing A's cache (%llu new upstream allocs)",
                    (unsigned long long)(s1.upstream_allocs - s0.upstream_allocs));
        unload(d, e, b, "B");
    } else {
        add_summary(d, "1", "model B after A (keep-cache)", "did not fit: %.100s", ccr_last_error());
    }
    ccr_release_info r;
    ccr_engine_release(e, &r);
    ccrun_phase(&d->rep, e, "release", "", 0, "end of act (a keep-cache process would have to exit)");
    ccr_engine_destroy(e);
}

/* Act 2, run twice on the same device: classic segments (policy "growth"),
 * then expandable ones ("growth,expandable:1"), act "2" and "2x". */
static void act2(demo *d, const char *spec_a, const char *spec_d, size_t greedy_held, const char *policy,
                 const char *act, const char *title) {
    char b0[32], b1[32], b2[32];
    ccr_engine *e = begin_act(d, title, policy, "nothing reserved yet");
    if (!e)
        return;
    cca_stats st0;
    cca_get_stats(ccr_engine_allocator(e), &st0);
    bool pages = st0.page_size != 0;
    ccr_model *a = load_run(d, e, "A", spec_a, d->batch);
    if (a) {
        size_t r = reserved(e);
        add_summary(d, act, pages ? "expandable: reserved with model A loaded" : "growth: reserved with model A loaded",
                    "%s (greedy held %s)",
                    cca_format_bytes(r, b0, sizeof b0), cca_format_bytes(greedy_held, b1, sizeof b1));
        unload(d, e, a, "A");
    }
    cca_release_report rr;
    ccr_engine_mark(e, "trim", "");
    double t = ccrun_now_ms();
    cca_trim(ccr_engine_allocator(e), 0, &rr);
    ccrun_phase(&d->rep, e, "trim", "", ccrun_now_ms() - t, "released %s in %zu segments",
                cca_format_bytes(rr.bytes_released, b0, sizeof b0), rr.segments_released);

    ccr_model *m = load_run(d, e, "D", spec_d, 64);
    if (!m) {
        ccr_engine_destroy(e);
        return;
    }
    static const size_t batches[] = {512, 96, 1024, 40, 700, 8, 300, 1000, 24};
    const ccr_arch *arch = ccr_model_arch(m);
    size_t in = arch->layers[0].in, out = arch->layers[arch->n_layers - 1].out, maxb = 1024;
    float *x = malloc(maxb * in * sizeof(float)), *y = malloc(maxb * out * sizeof(float));
    cca_stats s;
    t = ccrun_now_ms();
    for (size_t i = 0; x && y && i < sizeof batches / sizeof batches[0]; i++) {
        ccrun_fill_input(x, batches[i] * in, i);
        if (ccr_model_run(m, x, batches[i], y) != CCR_OK)
            printf("          -> %s\n", ccr_last_error());
    }
    free(x);
    free(y);
    cca_get_stats(ccr_engine_allocator(e), &s);
    ccrun_phase(&d->rep, e, "run", "D", ccrun_now_ms() - t, "batches 512,96,1024,40,700,8,300,1000,24: %llu splits",
                (unsigned long long)s.splits);
    printf("  after the runs: %zu cached free blocks holding %s, largest %s -> fragmentation %.3f\n"
           "  (inside a pass it is higher: --timeline records it at every alloc/free)\n",
           s.cached_blocks, cca_format_bytes(s.cached_bytes, b0, sizeof b0),
           cca_format_bytes(s.largest_free_block, b1, sizeof b1), s.fragmentation);
    double frag = s.fragmentation;
    ccr_engine_mark(e, "trim", "D");
    t = ccrun_now_ms();
    cca_trim(ccr_engine_allocator(e), 0, &rr);
    ccrun_phase(&d->rep, e, "trim", "D", ccrun_now_ms() - t, "D still loaded");
    if (pages) {
        char b3[32];
        printf("  trim(0) with D loaded: released %s (%zu pages of %s unmapped around the live weights); %s of "
               "live weights keep %s of free space mapped in the pages they share\n",
               cca_format_bytes(rr.bytes_released, b0, sizeof b0), rr.pages_unmapped,
               cca_format_bytes(st0.page_size, b3, sizeof b3), cca_format_bytes(rr.live_bytes_pinning, b1, sizeof b1),
               cca_format_bytes(rr.free_bytes_trapped, b2, sizeof b2));
        add_summary(d, act, "fragmentation after changing batches", "%.3f; trim released %s, %s trapped", frag,
                    cca_format_bytes(rr.bytes_released, b0, sizeof b0),
                    cca_format_bytes(rr.free_bytes_trapped, b1, sizeof b1));
    } else {
        printf("  trim(0) with D loaded: released %s in %zu segments; %zu segments pinned by %s of live weights, "
               "trapping %s of free space\n",
               cca_format_bytes(rr.bytes_released, b0, sizeof b0), rr.segments_released, rr.segments_pinned,
               cca_format_bytes(rr.live_bytes_pinning, b1, sizeof b1),
               cca_format_bytes(rr.free_bytes_pinned, b2, sizeof b2));
        add_summary(d, act, "fragmentation after changing batches", "%.3f; trim released %s, %s trapped", frag,
                    cca_format_bytes(rr.bytes_released, b0, sizeof b0),
                    cca_format_bytes(rr.free_bytes_pinned, b1, sizeof b1));
    }
    unload(d, e, m, "D");
    ccr_release_info r;
    ccr_engine_release(e, &r);
    char note[64];
    ccrun_phase(&d->rep, e, "release", "", 0, "%s", ccrun_baseline_note(&r, note, sizeof note));
    ccr_engine_destroy(e);
}

static void act3(demo *d, const char **specs, const char **labels) {
    char b0[32], b1[32];
    ccr_engine *e = begin_act(d, "Act 3: explicit release after every model", "growth", "baseline = device free now");
    if (!e)
        return;
    ccr_device_info info;
    ccr_engine_device_info(e, &info);
    int all_equal = 1, all_loaded = 1;
    for (int k = 0; k < 3; k++) {
        ccr_model *m = load_run(d, e, labels[k], specs[k], d->batch);
        if (m)
            unload(d, e, m, labels[k]);
        else
            all_loaded = 0;
        ccr_release_info r;
        double t = ccrun_now_ms();
        ccr_engine_release(e, &r);
        all_equal &= r.device_free_after == r.device_free_baseline;
        char note[64];
        ccrun_phase(&d->rep, e, "release", labels[k], ccrun_now_ms() - t, "released %s; %s",
                    cca_format_bytes(r.cache.bytes_released, b0, sizeof b0), ccrun_baseline_note(&r, note, sizeof note));
    }
    add_summary(d, "3", "device free after each of 3 releases", "%s baseline %s every time%s",
                all_equal ? "==" : "!=", cca_format_bytes(info.free_baseline, b1, sizeof b1),
                all_loaded ? "" : " (a model failed to load)");
    if (!all_equal)
        d->failed = 1;
    ccr_engine_destroy(e);
}

int ccrun_demo(const ccrun_options *o) {
    demo d;
    memset(&d, 0, sizeof d);
    d.o = o;
    d.rep.out = stdout;
    d.batch = o->batch_set ? o->batch : 2;
    d.iters = o->iters_set ? o->iters : 2;
    /* --conf is checked once here, as ccrun MODEL... does: a rejected config
     * is a usage error (exit 2), not three failed acts (exit 1) */
    cca_config cfg;
    char *conf = ccrun_alloc_conf(o, NULL);
    if (!conf) {
        fprintf(stderr, "ccrun: out of host memory\n");
        return CCRUN_ERR_MODEL;
    }
    cca_config_default(&cfg);
    if (*conf && cca_config_parse(&cfg, conf) != CCA_OK) {
        fprintf(stderr, "ccrun: allocator config '%s': %s\n", conf, cca_last_error());
        free(conf);
        return CCRUN_ERR_USAGE;
    }
    free(conf);
    ccr_status st = ccr_device_open(o->device, 0, o->capacity, &d.dev, &d.simulated);
    if (st != CCR_OK) { /* no such device: exit 1, as for ccrun MODEL... */
        fprintf(stderr, "ccrun: %s\n", ccr_last_error());
        return st == CCR_ERR_INVALID_ARGUMENT ? CCRUN_ERR_USAGE : CCRUN_ERR_MODEL;
    }
    if (o->timeline_path && ccr_timeline_open(o->timeline_path, &d.tl) != CCR_OK) {
        fprintf(stderr, "ccrun: %s\n", ccr_last_error());
        cca_upstream_destroy(d.dev);
        return CCRUN_ERR_USAGE;
    }
    cca_upstream_mem_info(d.dev, &d.free0, &d.total);
    char b0[32], b1[32], sa[512], sb[512], sc[512], sd[256];
    size_t target = d.free0 / 10 * 6;
    make_spec(sa, sizeof sa, target, 3, 1);
    make_spec(sb, sizeof sb, target, 4, 2);
    make_spec(sc, sizeof sc, target, 2, 3);
    snprintf(sd, sizeof sd, "mlp:1024x1024x1024x1024x10:relu:softmax:seed=4");
    printf("ccrun --demo on %s: %s (%s total, %s free)\n", cca_upstream_name(d.dev),
           d.simulated ? "SIMULATED device over host memory (no GPU used)" : "real GPU",
           cca_format_bytes(d.total, b0, sizeof b0), cca_format_bytes(d.free0, b1, sizeof b1));
    printf("models (~60%% of free memory each, so two never fit side by side):\n  A = %s\n  B = %s\n  C = %s\n"
           "  D = %s (act 2, small and wide)\n",
           sa, sb, sc, sd);
    double t0 = ccrun_now_ms();

    act1(&d, sa, sb);
    cca_config_default(&cfg);
    size_t greedy_held = (size_t)((double)d.free0 * cfg.greedy_fraction);
    act2(&d, sa, sd, greedy_held, "growth", "2",
         "Act 2: growth: reserved follows need; changing batch sizes, fragmentation, trim");
    act2(&d, sa, sd, greedy_held, "growth,expandable:1", "2x",
         "Act 2x: the same over expandable segments: trim unmaps free pages around the live weights");
    const char *specs[3] = {sa, sb, sc}, *labels[3] = {"A", "B", "C"};
    act3(&d, specs, labels);

    printf("\n== Summary (device %s: %s, %s) ==\n", cca_upstream_name(d.dev),
           d.simulated ? "SIMULATED on host memory" : "real GPU", cca_format_bytes(d.total, b0, sizeof b0));
    printf("%-4s %-40s %s\n", "act", "what", "result");
    for (size_t i = 0; i < d.n_sum; i++)
        printf("%-4s %-40s %s\n", d.sum[i].act, d.sum[i].what, d.sum[i].result);
    printf("demo took %.1f s\n", (ccrun_now_ms() - t0) / 1e3);
    ccr_timeline_close(d.tl);
    cca_upstream_stats us;
    cca_upstream_get_stats(d.dev, &us);
    if (us.bytes_in_use != 0) {
        fprintf(stderr, "ccrun: BUG: the device still holds %zu bytes at the end of the demo\n", us.bytes_in_use);
        d.failed = 1;
    }
    cca_upstream_destroy(d.dev);
    return d.failed ? CCRUN_ERR_MODEL : CCRUN_OK;
}
