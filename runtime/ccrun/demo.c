/*
 * demo.c — `ccrun --demo`: the whole story in five acts on one device.
 *
 *   Act 1  greedy + --keep-cache (TensorFlow's default): the allocator takes
 *          90% of the device at creation; after model A is unloaded the idle
 *          process still holds it, a second tenant on the same device is
 *          refused, and model B only fits because it reuses A's cache.
 *   Act 2  growth over classic segments (expandable:0, PyTorch's default):
 *          reserved follows need; a small model run with changing batch
 *          sizes splits cached blocks; the fragmentation figure and what
 *          cca_trim recovers (and what live weights pin).
 *   Act 2x the same over expandable segments, the allocator's default
 *          (pages mapped as a segment grows, given back map by map).
 *   Act 3  explicit release: A, B, C one after another, each followed by
 *          ccr_engine_release; the device's free memory is back at its
 *          starting value every time.
 *   Act 4  memory domains: a resident model R stays loaded while model A
 *          is unloaded; without domains A's memory is trapped in segments
 *          R's blocks share, with one domain per model it all goes back at
 *          the unload; A's second load reserves its remembered footprint and
 *          makes no upstream call (details above act4()).
 *   Act 5  sleep and wake: A put to sleep (the device's free memory back at
 *          its baseline while A stays loaded), B (too large beside A awake)
 *          run, A woken with bit-identical outputs; A out and back by sleep
 *          + wake beside unload + reload from a file and a process per
 *          model, all three measured (details above act5()).
 *
 * A step that cannot run (a device too small for the models: a load, a
 * batch refused or failed, a release) is said under its row, nothing is
 * shown as if it had run, and the demo exits 1 (step_failed).
 *
 * Acts 1-3 run with the engine's memory domains off: they tell the story of
 * one shared pool (what a framework's caching allocator does), which act 4
 * then compares with domains; act 5 needs them (a model sleeps alone in its
 * own domain).
 *
 * Sizing: the three synthetic models hold ~60% of the device's free memory
 * each (so two never fit side by side), with different shapes. The act-2
 * model is small and wide so that large batches stay cheap on 2 CPU cores.
 * One device (a cca_upstream) is shared by every act's engine, so the
 * second tenant of act 1 is a real competitor (cca_upstream_alloc).
 * It is --device's, or ccrun_options.upstream when a test gives one
 * (borrowed, not destroyed): a double that corrupts the wake's copy makes
 * act 5's compare of A's outputs fire (tests/runtime/test_ccrun_sleep.c).
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ccai_config_items.h" /* common/: a key of --conf, found as cca_config_parse finds it */
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
    summary sum[24];
    size_t n_sum;
    int failed;          /* a step failed (said under its row): exit 1 */
    size_t steps_failed; /* how many                                   */
    char why[512];       /* the last failure's message, for the summary */
    size_t live_at_end;  /* live bytes of the acts' allocators at their end */
    size_t greedy_held;  /* act 1's arena, idle (0: act 1 did not run)    */
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

/* A step failed: "          -> WHAT<the last error>" under the row it is
 * about (the message may quote --conf, so it is escaped), kept for the
 * summary, and the demo exits 1: an act that could not run is not shown
 * as if it had. */
static void step_failed(demo *d, const char *what) {
    ccai_fprintf_escaped(stdout, "          -> %s%s", what, ccr_last_error());
    putchar('\n');
    snprintf(d->why, sizeof d->why, "%s", ccr_last_error());
    d->failed = 1;
    d->steps_failed++;
}

/* The device's free bytes now into *f: 1; or 0 when the device refused to
 * say: a failed step (step_failed, its message prefixed "the device's free
 * memory could not be read"), as the demo's figures are the device's own
 * count and one it cannot read is none. */
static int device_free_now(demo *d, size_t *f) {
    if (ccrun_device_free(d->dev, f))
        return 1;
    cca_error_prefix(CCA_ERR_UPSTREAM, "the device's free memory could not be read");
    step_failed(d, "");
    return 0;
}

/* ccr_engine_release; its failure is a failed step. */
static void release(demo *d, ccr_engine *e, ccr_release_info *r) {
    if (ccr_engine_release(e, r) != CCR_OK)
        step_failed(d, "release failed: ");
}

/* The end of an act's engine: a trace the allocator could not write
 * (CCALLOC_TRACE) is a failed step; what its allocator still holds live (0,
 * or a bug said at the end of the demo); then destroy. */
static void close_act(demo *d, ccr_engine *e) {
    if (ccr_engine_trace_status(e) != CCR_OK)
        step_failed(d, "");
    cca_stats s;
    cca_get_stats(ccr_engine_allocator(e), &s);
    d->live_at_end += s.allocated_bytes;
    ccr_engine_destroy(e);
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

static ccr_engine *engine(demo *d, const char *policy, int domains) {
    char *conf = ccrun_alloc_conf(d->o, policy);
    if (!conf) {
        ccrun_say("demo: out of host memory");
        d->failed = 1;
        return NULL;
    }
    ccr_engine_options eo;
    ccr_engine_options_default(&eo);
    eo.upstream = d->dev;
    eo.alloc_conf = conf;
    eo.timeline = d->tl;
    eo.domains = domains;
    if (isatty(STDOUT_FILENO))
        eo.progress = ccrun_progress;
    ccr_engine *e = NULL;
    ccr_status st = ccr_engine_create(&eo, &e);
    free(conf);
    if (st != CCR_OK) {
        ccrun_say("demo: %s", ccr_last_error());
        d->failed = 1;
        return NULL;
    }
    return e;
}

/* d->iters batches of `batch` rows through m, the batch checked against the
 * device before host memory is taken for it (a --batch the device can never
 * hold is refused), each failure a failed step. 1 when every pass ran;
 * *hash (may be NULL) gets a hash of every output byte. */
static int run_batches(demo *d, ccr_model *m, size_t batch, unsigned long long *hash) {
    const ccr_arch *a = ccr_model_arch(m);
    size_t in = a->layers[0].in, out = a->layers[a->n_layers - 1].out;
    if (ccr_model_check_batch(m, batch, NULL) != CCR_OK) {
        step_failed(d, "run refused: ");
        return 0;
    }
    float *x = malloc(batch * in * sizeof(float)), *y = malloc(batch * out * sizeof(float));
    int ok = x && y;
    if (!ok) {
        cca_set_error(CCA_ERR_OUT_OF_MEMORY, "out of host memory for a batch of %zu", batch);
        step_failed(d, "run failed: ");
    }
    unsigned long long h = CCRUN_FNV_BASIS;
    for (size_t i = 0; ok && i < d->iters; i++) {
        ccrun_fill_input(x, batch * in, d->o->seed + i);
        ok = ccr_model_run(m, x, batch, y) == CCR_OK;
        if (ok)
            h = ccrun_fnv1a(h, y, batch * out * sizeof(float));
        else
            step_failed(d, "run failed: ");
    }
    free(x);
    free(y);
    if (hash)
        *hash = h;
    return ok;
}

/* Load, run d->iters batches of `batch`, print rows. Returns the model or NULL. */
static ccr_model *load_run(demo *d, ccr_engine *e, const char *label, const char *spec, size_t batch) {
    char b0[32];
    ccr_model *m = NULL;
    double t = ccrun_now_ms();
    if (ccr_model_load_spec(e, spec, &m) != CCR_OK) {
        ccrun_phase(&d->rep, e, "load", label, ccrun_now_ms() - t, "FAILED");
        step_failed(d, "");
        return NULL;
    }
    ccrun_phase(&d->rep, e, "load", label, ccrun_now_ms() - t, "%s of weights",
                cca_format_bytes(ccr_arch_param_bytes(ccr_model_arch(m)), b0, sizeof b0));
    t = ccrun_now_ms();
    if (!run_batches(d, m, batch, NULL)) {
        ccr_model_unload(m);
        return NULL;
    }
    ccrun_phase(&d->rep, e, "run", label, ccrun_now_ms() - t, "%zu x batch %zu", d->iters, batch);
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
static ccr_engine *begin_act(demo *d, const char *title, const char *policy, int domains, const char *note) {
    printf("\n== %s ==\n", title);
    ccrun_table_header(&d->rep);
    ccr_engine *e = engine(d, policy, domains);
    if (e)
        ccrun_phase(&d->rep, e, "create", "", 0, "%s", note);
    return e;
}

static double pct(size_t part, size_t whole) {
    return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

static void act1(demo *d, const char *spec_a, const char *spec_b) {
    char b0[32], b2[32];
    ccr_engine *e = begin_act(d, "Act 1: greedy + --keep-cache (TensorFlow's default): memory stays with the process",
                              "greedy", 0, "greedy arena reserved at creation");
    if (!e)
        return;
    ccr_model *a = load_run(d, e, "A", spec_a, d->batch);
    if (a)
        unload(d, e, a, "A");
    size_t held = reserved(e);
    d->greedy_held = held;
    ccrun_phase(&d->rep, e, "idle", "", 0, "no model loaded: process holds %.0f%% of the device", pct(held, d->total));
    add_summary(d, "1", "idle greedy process (no model) holds", "%s = %.0f%% of the device",
                cca_format_bytes(held, b0, sizeof b0), pct(held, d->total));

    /* the second tenant: plain allocation on the same device */
    size_t want = d->free0 * 3 / 10 / 512 * 512, free_now = 0;
    char free_text[32] = "unknown";
    if (device_free_now(d, &free_now))
        cca_format_bytes(free_now, free_text, sizeof free_text);
    void *p = NULL;
    cca_status cs = cca_upstream_alloc(d->dev, want, &p);
    if (cs == CCA_OK) {
        printf("  second tenant asks for %s: granted (device had %s free)\n", cca_format_bytes(want, b0, sizeof b0),
               free_text);
        add_summary(d, "1", "second tenant asking 30% of the device", "granted (unexpected: greedy left room)");
        cca_upstream_free(d->dev, p, want);
    } else {
        printf("  second tenant asks for %s: REFUSED (%s): only %s free, while this idle process caches %s\n",
               cca_format_bytes(want, b0, sizeof b0), cca_status_string(cs), free_text,
               cca_format_bytes(held, b2, sizeof b2));
        add_summary(d, "1", "second tenant asking 30% of the device", "refused: %s free, %s idle in our cache",
                    free_text, cca_format_bytes(held, b2, sizeof b2));
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
        add_summary(d, "1", "model B after A (keep-cache)", "did not fit: %.100s", d->why);
    }
    ccr_release_info r;
    release(d, e, &r);
    ccrun_phase(&d->rep, e, "release", "", 0, "end of act (a keep-cache process would have to exit)");
    close_act(d, e);
}

/* Act 2, run twice on the same device: classic segments
 * ("growth,expandable:0"), then expandable ones ("growth,expandable:1", the
 * default), act "2" and "2x". */
static void act2(demo *d, const char *spec_a, const char *spec_d, const char *policy, const char *act,
                 const char *title) {
    char b0[32], b1[32] = "unknown: act 1 did not run", b2[32];
    ccr_engine *e = begin_act(d, title, policy, 0, "nothing reserved yet");
    if (!e)
        return;
    cca_stats st0;
    cca_get_stats(ccr_engine_allocator(e), &st0);
    bool pages = st0.page_size != 0;
    ccr_model *a = load_run(d, e, "A", spec_a, d->batch);
    if (a) {
        size_t r = reserved(e);
        add_summary(d, act,
                    pages ? "expandable: reserved with model A loaded" : "classic: reserved with model A loaded",
                    "%s (greedy held %s)", cca_format_bytes(r, b0, sizeof b0),
                    d->greedy_held ? cca_format_bytes(d->greedy_held, b1, sizeof b1) : b1);
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
        close_act(d, e);
        return;
    }
    static const size_t batches[] = {512, 96, 1024, 40, 700, 8, 300, 1000, 24};
    const ccr_arch *arch = ccr_model_arch(m);
    size_t in = arch->layers[0].in, out = arch->layers[arch->n_layers - 1].out, maxb = 1024;
    float *x = malloc(maxb * in * sizeof(float)), *y = malloc(maxb * out * sizeof(float));
    if (!x || !y) {
        cca_set_error(CCA_ERR_OUT_OF_MEMORY, "out of host memory for batches of %zu", maxb);
        step_failed(d, "");
    }
    /* the row names the batches that ran, and those that failed (each said
     * above it): its figures are what the runs that happened left */
    char ran[64] = "", lost[64] = "";
    size_t n_lost = 0, n = sizeof batches / sizeof batches[0];
    cca_stats s;
    t = ccrun_now_ms();
    for (size_t i = 0; i < n; i++) {
        int ok = x && y;
        if (ok) {
            ccrun_fill_input(x, batches[i] * in, i);
            ok = ccr_model_run(m, x, batches[i], y) == CCR_OK;
            if (!ok)
                step_failed(d, "");
        }
        char *list = ok ? ran : lost;
        size_t len = strlen(list);
        snprintf(list + len, sizeof ran - len, "%s%zu", len ? "," : "", batches[i]);
        n_lost += !ok;
    }
    free(x);
    free(y);
    cca_get_stats(ccr_engine_allocator(e), &s);
    if (n_lost)
        ccrun_phase(&d->rep, e, "run", "D", ccrun_now_ms() - t, "batches %s ran, %s FAILED (%zu of %zu): %llu splits",
                    *ran ? ran : "none", lost, n_lost, n, (unsigned long long)s.splits);
    else
        ccrun_phase(&d->rep, e, "run", "D", ccrun_now_ms() - t, "batches %s: %llu splits", ran,
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
        const char *unit = st0.vm_backing == CCA_VM_WHOLE_MAPS ? "maps" : "pages";
        printf("  trim(0) with D loaded: released %s (%zu pages of %s unmapped around the live weights); %s of "
               "live weights keep %s of free space mapped in the %s they share\n",
               cca_format_bytes(rr.bytes_released, b0, sizeof b0), rr.pages_unmapped,
               cca_format_bytes(st0.page_size, b3, sizeof b3), cca_format_bytes(rr.live_bytes_pinning, b1, sizeof b1),
               cca_format_bytes(rr.free_bytes_trapped, b2, sizeof b2), unit);
        add_summary(d, act, "fragmentation after changing batches", "%.3f%s; trim released %s, %s trapped", frag,
                    n_lost ? " (batches failed)" : "", cca_format_bytes(rr.bytes_released, b0, sizeof b0),
                    cca_format_bytes(rr.free_bytes_trapped, b1, sizeof b1));
    } else {
        printf("  trim(0) with D loaded: released %s in %zu segments; %zu segments pinned by %s of live weights, "
               "trapping %s of free space\n",
               cca_format_bytes(rr.bytes_released, b0, sizeof b0), rr.segments_released, rr.segments_pinned,
               cca_format_bytes(rr.live_bytes_pinning, b1, sizeof b1),
               cca_format_bytes(rr.free_bytes_pinned, b2, sizeof b2));
        add_summary(d, act, "fragmentation after changing batches", "%.3f%s; trim released %s, %s trapped", frag,
                    n_lost ? " (batches failed)" : "", cca_format_bytes(rr.bytes_released, b0, sizeof b0),
                    cca_format_bytes(rr.free_bytes_pinned, b1, sizeof b1));
    }
    unload(d, e, m, "D");
    ccr_release_info r;
    release(d, e, &r);
    char note[64];
    ccrun_phase(&d->rep, e, "release", "", 0, "%s", ccrun_baseline_note(&r, note, sizeof note));
    close_act(d, e);
}

static void act3(demo *d, const char **specs, const char **labels) {
    char b0[32], b1[32];
    ccr_engine *e =
        begin_act(d, "Act 3: explicit release after every model", "growth", 0, "baseline = device free now");
    if (!e)
        return;
    ccr_device_info info;
    ccr_engine_device_info(e, &info);
    int all_equal = 1, all_loaded = 1, all_read = 1;
    for (int k = 0; k < 3; k++) {
        ccr_model *m = load_run(d, e, labels[k], specs[k], d->batch);
        if (m)
            unload(d, e, m, labels[k]);
        else
            all_loaded = 0;
        ccr_release_info r;
        double t = ccrun_now_ms();
        release(d, e, &r);
        all_equal &= r.device_free_after == r.device_free_baseline;
        all_read &= r.device_free_read;
        char note[64];
        ccrun_phase(&d->rep, e, "release", labels[k], ccrun_now_ms() - t, "released %s; %s",
                    cca_format_bytes(r.cache.bytes_released, b0, sizeof b0),
                    ccrun_baseline_note(&r, note, sizeof note));
    }
    if (!all_read) /* the failed release said why */
        add_summary(d, "3", "device free after each of 3 releases", "unknown after a release (mem_info refused)");
    else
        add_summary(d, "3", "device free after each of 3 releases", "%s baseline %s every time%s",
                    all_equal ? "==" : "!=", cca_format_bytes(info.free_baseline, b1, sizeof b1),
                    all_loaded ? "" : " (a model failed to load)");
    if (!all_equal)
        d->failed = 1;
    close_act(d, e);
}

/* ---- Act 4: memory domains -------------------------------------------------
 *
 * A resident model R and a swapped model A on one device, the same sequence
 * twice: A loaded and run; R loaded (it stays) and run; A unloaded; R run
 * again. First without domains (one shared pool, as in every framework's
 * caching allocator), then with one domain per model (the engine's default).
 *
 * The shapes show how sharing traps memory: A's 8 layers of 1344x1344
 * floats (6.89 MiB each) are medium requests, two to a 20 MiB medium
 * segment, which leaves 6.2 MiB free at the end of each; R's 1144x1144
 * layers (4.99 MiB) are best-fitted into exactly those tails. Without
 * domains, unloading A frees its blocks, but each of A's segments now holds
 * one of R's: even cca_empty_cache gives back little of A. With domains, R's
 * blocks live in R's segments, and unloading A returns all A reserved, at
 * once, while R keeps running; R's outputs are compared byte for byte (a
 * hash) across the sequence.
 *
 * Then, with domains, A is loaded a second time: the engine remembered its
 * footprint (its domain's peak reserved bytes) at the first unload and
 * reserves it in one upstream call before the first tensor; the load and
 * its runs make none, and the peak is no higher than the first time.
 */

static unsigned long long upstream_allocs(demo *d) {
    cca_upstream_stats us;
    cca_upstream_get_stats(d->dev, &us);
    return (unsigned long long)(us.alloc_calls + us.vm_map_calls);
}

/* d->iters batches through m and a row; *hash gets a hash of every output byte. */
static int run_hashed(demo *d, ccr_engine *e, ccr_model *m, const char *label, unsigned long long *hash,
                      const char *role) {
    double t = ccrun_now_ms();
    int ok = run_batches(d, m, d->batch, hash);
    if (ok)
        ccrun_phase(&d->rep, e, "run", label, ccrun_now_ms() - t, "%zu x batch %zu; outputs %016llx%s", d->iters,
                    d->batch, *hash, role);
    return ok;
}

/* What one half of act 4 measured. */
typedef struct act4_half {
    int ok;                             /* A, R, A's unload, R again: all ran      */
    int again;                          /* A's second load and runs ran (domains)  */
    char why[512];                      /* the failure, when a step did not run    */
    size_t a_reserved;                  /* what A held before its unload           */
    size_t rise;                        /* device free: + at A's unload (and trim) */
    int rise_read;                      /* both counts of rise were read            */
    size_t trapped;                     /* free bytes in segments R's blocks pin   */
    size_t pinned;                      /* such segments                           */
    unsigned long long r_hash;          /* R's outputs, first run                  */
    int r_same;                         /* R's outputs the same after A's unload   */
    size_t a_peak;                      /* A's domain peak at its first unload     */
    size_t foot, foot_calls, foot_peak; /* A's second load (domains)      */
    unsigned long long foot_during;     /* upstream calls after the footprint */
} act4_half;

static void act4_half_run(demo *d, int domains, const char *spec_a, const char *spec_r, act4_half *h) {
    char b0[32], b1[32], b2[32];
    memset(h, 0, sizeof *h);
    ccr_engine *e =
        begin_act(d,
                  domains ? "Act 4b: the same with one memory domain per model (the engine's default)"
                          : "Act 4a: resident model R, swapped model A, no memory domains (one shared pool)",
                  "growth", domains, domains ? "domains on" : "domains off");
    if (!e)
        return;
    ccr_model *a = load_run(d, e, "A", spec_a, d->batch), *r = NULL;
    h->a_reserved = reserved(e); /* all A's: nothing else is loaded yet */
    double t = ccrun_now_ms();
    if (a && ccr_model_load_spec(e, spec_r, &r) != CCR_OK) {
        step_failed(d, "");
        r = NULL;
    }
    if (r) {
        ccrun_phase(&d->rep, e, "load", "R", ccrun_now_ms() - t, "resident from here: %s of weights, %s",
                    cca_format_bytes(ccr_arch_param_bytes(ccr_model_arch(r)), b0, sizeof b0),
                    domains ? "in its own domain" : "best fit into the free ends of A's segments");
        h->ok = run_hashed(d, e, r, "R", &h->r_hash, " (R's first run)");
    }
    if (!h->ok) {
        snprintf(h->why, sizeof h->why, "%s", d->why);
        ccr_model_unload(a);
        ccr_model_unload(r);
        close_act(d, e);
        return;
    }
    size_t free0 = 0, free_after = 0;
    int read0 = device_free_now(d, &free0);
    char rise[64];
    t = ccrun_now_ms();
    ccr_unload_info u;
    if (ccr_model_release(a, &u) != CCR_OK)
        step_failed(d, "unload failed: ");
    if (domains) {
        h->a_peak = u.reserved_peak;
        h->a_reserved = u.reserved_at_unload; /* the same figure, from A's domain */
        h->rise_read = read0 && device_free_now(d, &free_after);
        h->rise = h->rise_read && free_after > free0 ? free_after - free0 : 0;
        ccrun_phase(&d->rep, e, "unload", "A", ccrun_now_ms() - t, "A's domain released: device free %s of its %s",
                    ccrun_rise_text(h->rise_read, free0, free_after, rise, sizeof rise),
                    cca_format_bytes(h->a_reserved, b1, sizeof b1));
    } else {
        ccrun_phase(&d->rep, e, "unload", "A", ccrun_now_ms() - t, "device free +0 B: A's memory stays cached");
        cca_release_report rr;
        ccr_engine_mark(e, "trim", "A");
        t = ccrun_now_ms();
        cca_empty_cache(ccr_engine_allocator(e), &rr);
        h->rise_read = read0 && device_free_now(d, &free_after);
        h->rise = h->rise_read && free_after > free0 ? free_after - free0 : 0;
        h->trapped = rr.free_bytes_pinned; /* free_bytes_trapped is part of it (ccalloc.h) */
        h->pinned = rr.segments_pinned;
        ccrun_phase(&d->rep, e, "trim", "", ccrun_now_ms() - t,
                    "empty-cache with R loaded: released %s; %s free but trapped in %zu segments pinned by R",
                    cca_format_bytes(rr.bytes_released, b0, sizeof b0), cca_format_bytes(h->trapped, b1, sizeof b1),
                    h->pinned);
    }
    unsigned long long again = 0;
    h->ok = run_hashed(d, e, r, "R", &again, "");
    h->r_same = h->ok && again == h->r_hash;
    if (h->ok && !h->r_same)
        printf("  R's outputs CHANGED after A's unload (%016llx, first %016llx)\n", again, h->r_hash);
    if (!h->ok)
        snprintf(h->why, sizeof h->why, "%s", d->why);

    if (domains && h->ok) { /* A again: its footprint remembered at the unload above */
        unsigned long long c0 = upstream_allocs(d);
        ccr_model *a2 = load_run(d, e, "A", spec_a, d->batch);
        if (a2) {
            h->again = 1;
            h->foot = ccr_model_footprint(a2);
            h->foot_calls = (size_t)(upstream_allocs(d) - c0);
            h->foot_during = h->foot_calls - (h->foot ? 1 : 0);
            if (h->foot)
                printf("  A loaded again: its footprint of %s reserved up front; upstream calls during the load and "
                       "%zu runs: %zu in all, %llu besides the footprint's\n",
                       cca_format_bytes(h->foot, b0, sizeof b0), d->iters, h->foot_calls, h->foot_during);
            else /* the device is fuller than at A's first load: the engine's warning said why */
                printf("  A loaded again: its footprint was NOT reserved up front (see the warning); upstream calls "
                       "during the load and %zu runs: %zu\n",
                       d->iters, h->foot_calls);
            t = ccrun_now_ms();
            if (ccr_model_release(a2, &u) != CCR_OK)
                step_failed(d, "unload failed: ");
            h->foot_peak = u.reserved_peak;
            ccrun_phase(&d->rep, e, "unload", "A", ccrun_now_ms() - t, "peak %s (first load: %s); returned %s",
                        cca_format_bytes(u.reserved_peak, b0, sizeof b0), cca_format_bytes(h->a_peak, b1, sizeof b1),
                        cca_format_bytes(u.bytes_released, b2, sizeof b2));
        } else {
            snprintf(h->why, sizeof h->why, "%s", d->why);
        }
    }
    size_t free1 = 0;
    int read1 = device_free_now(d, &free1);
    t = ccrun_now_ms();
    if (ccr_model_release(r, &u) != CCR_OK)
        step_failed(d, "unload failed: ");
    read1 = read1 && device_free_now(d, &free_after);
    ccrun_phase(&d->rep, e, "unload", "R", ccrun_now_ms() - t, "%sdevice free %s",
                domains ? "R's domain released: " : "", ccrun_rise_text(read1, free1, free_after, rise, sizeof rise));
    ccr_release_info ri;
    release(d, e, &ri);
    char note[64];
    ccrun_phase(&d->rep, e, "release", "", 0, "%s", ccrun_baseline_note(&ri, note, sizeof note));
    close_act(d, e);
}

static void act4(demo *d) {
    char b0[32], b1[32], b2[32];
    char spec_a[256], spec_r[256];
    /* 8 layers of 1344x1344 and a 10-way head; 4 of 1144x1144 and a head */
    snprintf(spec_a, sizeof spec_a, "mlp:1344x1344x1344x1344x1344x1344x1344x1344x1344x10:relu:softmax:seed=5");
    snprintf(spec_r, sizeof spec_r, "mlp:1144x1144x1144x1144x1144x10:relu:softmax:seed=6");
    printf("\nAct 4 models: A = %s\n              R = %s\n", spec_a, spec_r);
    act4_half off, on;
    act4_half_run(d, 0, spec_a, spec_r, &off);
    act4_half_run(d, 1, spec_a, spec_r, &on);
    char rise[64];
    if (off.ok)
        add_summary(d, "4", "no domains: A unloaded + empty-cache",
                    "device free %s of A's %s; %s trapped in %zu segments pinned by R",
                    ccrun_rise_text(off.rise_read, 0, off.rise, rise, sizeof rise),
                    cca_format_bytes(off.a_reserved, b2, sizeof b2), cca_format_bytes(off.trapped, b1, sizeof b1),
                    off.pinned);
    else
        add_summary(d, "4", "no domains: A unloaded + empty-cache", "did not run: %.100s", off.why);
    if (on.ok && !on.rise_read)
        add_summary(d, "4", "domains: A unloaded while R runs", "device free unknown (mem_info refused)");
    else if (on.ok)
        add_summary(d, "4", "domains: A unloaded while R runs", "device free +%s = %s A's whole reservation",
                    cca_format_bytes(on.rise, b0, sizeof b0), on.rise == on.a_reserved ? "exactly" : "NOT");
    else
        add_summary(d, "4", "domains: A unloaded while R runs", "did not run: %.100s", on.why);
    if (off.ok && on.ok)
        add_summary(d, "4", "R's outputs as A came and went", "%s (hash %016llx)",
                    off.r_same && on.r_same && off.r_hash == on.r_hash ? "bit-identical in both sequences" : "CHANGED",
                    on.r_hash);
    if (on.again && on.foot)
        add_summary(d, "4", "A loaded again: remembered footprint",
                    "%s reserved in 1 upstream call, then %llu in load + %zu runs; peak %s %s first %s",
                    cca_format_bytes(on.foot, b0, sizeof b0), on.foot_during, d->iters,
                    cca_format_bytes(on.foot_peak, b1, sizeof b1), on.foot_peak <= on.a_peak ? "<=" : ">",
                    cca_format_bytes(on.a_peak, b2, sizeof b2));
    else if (on.again)
        add_summary(d, "4", "A loaded again: remembered footprint", "NOT reserved up front; %zu upstream calls",
                    on.foot_calls);
    else if (on.ok)
        add_summary(d, "4", "A loaded again: remembered footprint", "did not run: %.100s", on.why);
    /* exact on the simulated device: a miss there is a bug */
    if (on.ok && off.ok &&
        ((d->simulated && on.rise != on.a_reserved) || !off.r_same || !on.r_same || off.r_hash != on.r_hash))
        d->failed = 1;
}

/* ---- Act 5: sleep and wake -------------------------------------------------
 *
 * Two of the demo's models that do not fit side by side (A and B, ~60% of
 * the device each), on one engine with domains: A loaded and run; A put to
 * sleep (ccr_model_sleep: its weights to host memory, every page of its
 * domain unmapped): the device's free memory is back at its baseline while
 * A stays loaded, exactly on the simulated device (a miss there fails the
 * demo); B loaded, run, unloaded; A woken: its outputs bit-identical to
 * before its sleep (a miss fails the demo). Then what putting A aside and
 * getting it back costs, three ways, each measured here:
 *   sleep + wake       the two calls above;
 *   unload + reload    ccr_model_release, then ccr_model_load_file of A
 *                      saved (ccr_model_save, not counted) to a temporary
 *                      safetensors file; its outputs are checked again;
 *   process per model  a child `ccrun --json --iters 1 --batch 1 FILE`
 *                      (its --device and --capacity the demo's; child.c),
 *                      spawn to reap, less its run phase:
 *                      exec, engine and device creation, the load from the
 *                      file, unload, release and exit. It runs while A is
 *                      unloaded, so that on a GPU it has the room A had.
 *                      It records no CCALLOC_TRACE (child.c): the file
 *                      is this process's.
 *                      `ccbench switch` measures the same over sequences.
 */

/* The path of this ccrun, for the child (NULL with errno when unknown). */
static const char *self_path(char *buf, size_t len) {
    ssize_t n = readlink("/proc/self/exe", buf, len);
    if (n >= 0 && (size_t)n >= len)
        errno = ENAMETOOLONG;
    if (n <= 0 || (size_t)n >= len)
        return NULL;
    buf[n] = '\0';
    return buf;
}

/* What act 5 measured, in ms (negative: did not run). */
typedef struct act5_costs {
    double sleep, wake, unload, reload, process;
} act5_costs;

/* A out and back by unload + reload from a file (a temporary one in
 * $TMPDIR, else /tmp; a relative $TMPDIR as "./DIR", so that the child
 * ccrun reads the path as a MODEL file, never as an option, "-x", or a
 * spec, "mlp:..."), with the process-per-model figure measured in
 * between; A (the handle) is gone afterwards. 1 when the reload's outputs
 * are `want`. */
static int act5_reload(demo *d, ccr_engine *e, ccr_model *a, unsigned long long want, act5_costs *c) {
    char path[4096], exe[4096], cap[32];
    const char *dir = getenv("TMPDIR"); /* where POSIX says temporary files go */
    if (!dir || !*dir)
        dir = "/tmp";
    int n = snprintf(path, sizeof path, "%s%s/ccrun-demo-XXXXXX", dir[0] == '/' ? "" : "./", dir);
    int fd = n >= 0 && (size_t)n < sizeof path ? mkstemp(path) : (errno = ENAMETOOLONG, -1);
    if (fd < 0) {
        int err = errno;
        cca_set_error(CCA_ERR_IO, "cannot create a temporary file in %s: %s", dir, strerror(err));
        step_failed(d, "save skipped: ");
        ccr_model_unload(a);
        return 1;
    }
    close(fd);
    double t = ccrun_now_ms();
    int saved = ccr_model_save(a, path) == CCR_OK;
    if (saved)
        ccrun_phase(&d->rep, e, "save", "A", ccrun_now_ms() - t, "A written to %s (not counted)", path);
    else
        step_failed(d, "save failed: ");
    t = ccrun_now_ms();
    if (ccr_model_release(a, NULL) != CCR_OK)
        step_failed(d, "unload failed: ");
    c->unload = ccrun_now_ms() - t;
    ccrun_phase(&d->rep, e, "unload", "A", c->unload, "A unloaded: its domain released");
    int same = 1;
    if (saved) {
        snprintf(cap, sizeof cap, "%zu", d->o->capacity);
        const char *self = d->o->child_ccrun ? d->o->child_ccrun : self_path(exe, sizeof exe);
        char *argv[] = {(char *)self, "--json", "--device", d->simulated ? "host" : "cuda",
                        "--capacity", cap,      "--iters",  "1",
                        "--batch",    "1",      path,       NULL};
        double wall = 0, run = 0;
        int rc = self ? ccrun_time_child(argv, &wall, &run)
                      : (cca_set_error(CCA_ERR_IO, "this program's own path is unknown (/proc/self/exe: %s)",
                                       strerror(errno)),
                         -1);
        if (rc == 0) {
            c->process = wall - run;
            ccrun_phase(&d->rep, e, "process", "A", c->process,
                        "a child ccrun loaded A from the file: %.1f ms spawn to exit, less its run %.1f ms", wall, run);
        } else {
            /* -1: none ran to its exit or its output was lost, the message says why (child.c) */
            char why[512];
            snprintf(why, sizeof why, "%s", rc < 0 ? cca_last_error() : "");
            if (rc > 0)
                cca_set_error(CCA_ERR_IO, "the child ccrun on %s exited %d", path, rc);
            else
                cca_set_error(CCA_ERR_IO, "the child ccrun on %s: %s", path, why);
            step_failed(d, "process per model: ");
        }
        ccr_model *b = NULL;
        t = ccrun_now_ms();
        if (ccr_model_load_file(e, path, &b) == CCR_OK) {
            c->reload = ccrun_now_ms() - t;
            ccrun_phase(&d->rep, e, "load", "A", c->reload, "A again, from the file");
            unsigned long long h = 0;
            same = run_hashed(d, e, b, "A", &h, " (reloaded)") && h == want;
            if (!same)
                printf("  A's outputs after the reload CHANGED (%016llx, before %016llx)\n", h, want);
            ccr_model_unload(b);
        } else {
            step_failed(d, "reload failed: ");
        }
    }
    unlink(path);
    return same;
}

static void act5(demo *d, const char *spec_a, const char *spec_b) {
    char b0[32], b1[32], b2[32];
    act5_costs c = {-1, -1, -1, -1, -1};
    ccr_engine *e = begin_act(d, "Act 5: sleep and wake: A put aside while B runs, then back at the same addresses",
                              "growth", 1, "domains on");
    if (!e)
        return;
    ccr_device_info info;
    ccr_engine_device_info(e, &info);
    size_t base = info.free_baseline;
    ccr_model *a = NULL;
    unsigned long long h0 = 0, h1 = 0;
    double t = ccrun_now_ms();
    if (ccr_model_load_spec(e, spec_a, &a) != CCR_OK) {
        ccrun_phase(&d->rep, e, "load", "A", ccrun_now_ms() - t, "FAILED");
        step_failed(d, "");
        add_summary(d, "5", "A asleep, B run, A woken", "did not run: %.100s", d->why);
        close_act(d, e);
        return;
    }
    ccrun_phase(&d->rep, e, "load", "A", ccrun_now_ms() - t, "%s of weights",
                cca_format_bytes(ccr_arch_param_bytes(ccr_model_arch(a)), b0, sizeof b0));
    int ran = run_hashed(d, e, a, "A", &h0, " (A's first outputs)");
    size_t held = reserved(e);
    ccr_sleep_info s, w;
    if (!ran || ccr_model_sleep(a, &s) != CCR_OK) {
        if (ran)
            step_failed(d, "sleep failed: ");
        add_summary(d, "5", "A asleep, B run, A woken", "did not run: %.100s", d->why);
        ccr_model_unload(a);
        close_act(d, e);
        return;
    }
    c.sleep = s.ms;
    size_t asleep_free = 0;
    int known = device_free_now(d, &asleep_free), at_base = known && asleep_free == base;
    char rise[64];
    ccrun_rise_text(s.device_free_read, s.device_free_before, s.device_free_after, rise, sizeof rise);
    if (known)
        ccrun_phase(&d->rep, e, "sleep", "A", s.ms,
                    "A asleep, still loaded: device free %s (all it held), %s baseline; %s on the host", rise,
                    at_base ? "==" : "!=", cca_format_bytes(s.host_bytes, b1, sizeof b1));
    else
        ccrun_phase(&d->rep, e, "sleep", "A", s.ms,
                    "A asleep, still loaded: device free %s (all it held), unknown now; %s on the host", rise,
                    cca_format_bytes(s.host_bytes, b1, sizeof b1));
    if (!known)
        add_summary(d, "5", "A asleep (loaded, weights on the host)", "device free unknown (mem_info refused)");
    else
        add_summary(d, "5", "A asleep (loaded, weights on the host)", "device free %s baseline %s%s",
                    at_base ? "==" : "!=", cca_format_bytes(base, b0, sizeof b0),
                    at_base && d->simulated ? " exactly" : "");
    size_t b_bytes = 0;
    ccr_model *b = load_run(d, e, "B", spec_b, d->batch);
    if (b) {
        b_bytes = ccr_arch_param_bytes(ccr_model_arch(b));
        printf("  B ran while A slept: A held %s awake, B has %s of weights: %s the device's %s\n",
               cca_format_bytes(held, b0, sizeof b0), cca_format_bytes(b_bytes, b1, sizeof b1),
               held + b_bytes > d->total ? "together more than" : "together within",
               cca_format_bytes(d->total, b2, sizeof b2));
        unload(d, e, b, "B");
        add_summary(d, "5", "B, too large beside A awake, ran", "A's %s + B's %s %s device %s",
                    cca_format_bytes(held, b0, sizeof b0), cca_format_bytes(b_bytes, b1, sizeof b1),
                    held + b_bytes > d->total ? ">" : "<=", cca_format_bytes(d->total, b2, sizeof b2));
    } else {
        add_summary(d, "5", "B, too large beside A awake, ran", "did not run: %.100s", d->why);
    }
    int same = 0;
    if (ccr_model_wake(a, &w) != CCR_OK) {
        step_failed(d, "wake failed: ");
        add_summary(d, "5", "A woken: its outputs", "did not wake: %.100s", d->why);
        ccr_model_unload(a);
    } else {
        c.wake = w.ms;
        ccrun_phase(&d->rep, e, "wake", "A", w.ms, "A woken: %s mapped again, %s copied back, same addresses",
                    cca_format_bytes(w.device_bytes, b0, sizeof b0), cca_format_bytes(w.bytes_copied, b1, sizeof b1));
        same = run_hashed(d, e, a, "A", &h1, " (after the wake)") && h1 == h0;
        add_summary(d, "5", "A woken: its outputs", "%s (hash %016llx)",
                    same ? "bit-identical to before its sleep" : "CHANGED", h1);
        if (!act5_reload(d, e, a, h0, &c))
            same = 0;
    }
    if (c.sleep >= 0 && c.wake >= 0)
        add_summary(d, "5", "A out and back: sleep + wake", "%.1f ms (sleep %.1f + wake %.1f)", c.sleep + c.wake,
                    c.sleep, c.wake);
    if (c.unload >= 0 && c.reload >= 0)
        add_summary(d, "5", "A out and back: unload + reload (file)", "%.1f ms (unload %.1f + load %.1f)",
                    c.unload + c.reload, c.unload, c.reload);
    if (c.process >= 0)
        add_summary(d, "5", "A out and back: a process per model", "%.1f ms (child ccrun: start, load from file, exit)",
                    c.process);
    ccr_release_info ri;
    release(d, e, &ri);
    char note[64];
    ccrun_phase(&d->rep, e, "release", "", 0, "%s", ccrun_baseline_note(&ri, note, sizeof note));
    close_act(d, e);
    /* exact on the simulated device: a miss there is a bug; changed outputs anywhere */
    if ((d->simulated && !at_base) || !same)
        d->failed = 1;
}

int ccrun_demo(const ccrun_options *o) {
    demo d;
    memset(&d, 0, sizeof d);
    d.o = o;
    d.rep.out = stdout;
    d.batch = o->batch_set ? o->batch : 2;
    d.iters = o->iters_set ? o->iters : 2;
    /* the acts choose the policy and the segments themselves: a key of
     * --conf would follow their choice and win (act 2 titled classic ran
     * greedy) */
    for (size_t k = 0; o->conf && k < 2; k++) {
        const char *key = k ? "expandable" : "policy";
        if (ccai_config_names(o->conf, key)) {
            ccrun_say("--demo takes no %s in --conf: its acts choose it themselves", key);
            return CCRUN_ERR_USAGE;
        }
    }
    /* --conf behind each act's own choice, checked once here, as ccrun
     * MODEL... does: a rejected config is a usage error (exit 2), not
     * failed acts (exit 1; hold_peak:1 is refused under greedy) */
    static const char *const acts[] = {"greedy", "growth,expandable:0", "growth,expandable:1", "growth"};
    for (size_t k = 0; k < sizeof acts / sizeof acts[0]; k++) {
        cca_config cfg;
        char *conf = ccrun_alloc_conf(o, acts[k]);
        if (!conf) {
            ccrun_say("out of host memory");
            return CCRUN_ERR_MODEL;
        }
        cca_config_default(&cfg);
        if (cca_config_parse(&cfg, conf) != CCA_OK) {
            ccrun_say("allocator config '%s': %s", conf, cca_last_error());
            free(conf);
            return CCRUN_ERR_USAGE;
        }
        free(conf);
    }
    ccr_device_options dopt = {o->device, 0, o->capacity, o->vm_granularity, o->vm_backing};
    ccr_status st = CCR_OK;
    if (o->upstream) { /* a test's device, borrowed; CUDA when it names itself "cuda:N" (the engine's rule) */
        d.dev = o->upstream;
        d.simulated = !ccr_device_name_cuda(cca_upstream_name(d.dev), NULL);
    } else {
        st = ccr_device_open_with(&dopt, &d.dev, &d.simulated);
    }
    if (st != CCR_OK) { /* no such device: exit 1, as for ccrun MODEL... */
        ccrun_say("%s", ccr_last_error());
        return st == CCR_ERR_INVALID_ARGUMENT ? CCRUN_ERR_USAGE : CCRUN_ERR_MODEL;
    }
    if (o->timeline_path && ccr_timeline_open(o->timeline_path, &d.tl) != CCR_OK) {
        ccrun_say("error: --timeline %s", ccr_last_error()); /* as its write failures are said */
        if (!o->upstream)
            cca_upstream_destroy(d.dev);
        return CCRUN_ERR_MODEL; /* an output that cannot be made: 1, as for MODEL runs */
    }
    if (cca_upstream_mem_info(d.dev, &d.free0, &d.total) != CCA_OK) { /* the models are sized from it */
        ccrun_say("error: cannot read the device's free memory: %s", cca_last_error());
        ccr_timeline_close(d.tl);
        if (!o->upstream)
            cca_upstream_destroy(d.dev);
        return CCRUN_ERR_MODEL;
    }
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
    act2(&d, sa, sd, "growth,expandable:0", "2",
         "Act 2: growth over classic segments: reserved follows need; changing batch sizes, fragmentation, trim");
    act2(&d, sa, sd, "growth,expandable:1", "2x",
         "Act 2x: the same over expandable segments, the default: pages mapped as it grows, given back by trim");
    const char *specs[3] = {sa, sb, sc}, *labels[3] = {"A", "B", "C"};
    act3(&d, specs, labels);
    act4(&d);
    act5(&d, sa, sb);

    printf("\n== Summary (device %s: %s, %s) ==\n", cca_upstream_name(d.dev),
           d.simulated ? "SIMULATED on host memory" : "real GPU", cca_format_bytes(d.total, b0, sizeof b0));
    printf("%-4s %-40s %s\n", "act", "what", "result");
    for (size_t i = 0; i < d.n_sum; i++) { /* a result may quote an error message: escaped */
        printf("%-4s %-40s ", d.sum[i].act, d.sum[i].what);
        ccr_fputs_escaped(d.sum[i].result, stdout);
        putchar('\n');
    }
    printf("demo took %.1f s\n", (ccrun_now_ms() - t0) / 1e3);
    if (ccr_timeline_close(d.tl) != CCR_OK) {
        ccrun_say("error: --timeline %s", ccr_last_error());
        d.failed = 1;
    }
    int rc = d.failed ? CCRUN_ERR_MODEL : CCRUN_OK;
    if (d.steps_failed) /* each said under its row, in the table */
        ccrun_say("error: the demo did not run whole: %zu step(s) failed (the last: %s)", d.steps_failed, d.why);
    if (d.live_at_end != 0) {
        ccrun_say("BUG: %zu bytes of device memory still allocated at the end of the acts", d.live_at_end);
        rc = CCRUN_ERR_LEAK;
    } else if (d.failed) {
        ccrun_say("after the errors every act's allocator holds 0 live bytes at its end");
    }
    cca_upstream_stats us;
    cca_upstream_get_stats(d.dev, &us);
    if (us.bytes_in_use != 0) {
        ccrun_say("BUG: the device still holds %zu bytes at the end of the demo", us.bytes_in_use);
        rc = CCRUN_ERR_LEAK;
    }
    if (!o->upstream)
        cca_upstream_destroy(d.dev);
    return rc;
}
