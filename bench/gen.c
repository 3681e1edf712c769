/*
 * gen.c — seeded trace generators. Same seed and scale, same trace, byte for
 * byte, on every machine (integer PRNG, no libm in the choice of events
 * except log/exp/sqrt on doubles, which are correctly rounded in glibc).
 *
 * PRNG: the project's one generator, xoshiro256** seeded through splitmix64
 * (common/ccai_rng.h): fast, 2^256 period, no bad seeds.
 *
 * Generators (sizes in bytes; `scale` multiplies the number of events, never
 * the sizes, so peak figures stay comparable between a test run and --all;
 * it is at most CCB_GEN_MAX_SCALE, which keeps every trace within
 * CCB_GEN_MAX_EVENTS events, since the whole trace is built in memory; a
 * count scaled below its generator's least is that least, as --help says):
 *
 *   uniform      RMM's random_allocations: each step allocates (p = 0.55,
 *                while under a 1 GiB live budget) a size uniform in
 *                [256 B, 8 MiB], or frees a random live block. 20k allocs.
 *   lognormal    the same with log-normal sizes, median 64 KiB, sigma 2.0,
 *                clipped to [256 B, 256 MiB], budget 2 GiB: many small
 *                blocks and a heavy tail, like real tensor mixes.
 *   mlp          the engine's inference loop: 8 layers of 4096x4096 fp32
 *                weights loaded once, then 1500 requests whose batch size
 *                changes at random (1..256): per layer an activation and a
 *                workspace, the previous activation freed.
 *   models       six models of different shapes in sequence (load weights,
 *                200 requests, unload): a cache that keeps the last model's
 *                block sizes serves the next one badly.
 *   adversarial  40 steps of: a large tensor L_i (64 MiB + 2i MiB + 4 KiB,
 *                so its 2 MiB-rounded segment has a ~2 MiB tail), three
 *                short-lived temporaries of 256-768 KiB (as a real step
 *                has), a long-lived 1.5 MiB tensor (best fit puts it in
 *                that tail), free L_i. L_{i+1} never fits the hole L_i left, so every large
 *                segment ends up pinned by one small block: gigabytes
 *                reserved for ~60 MiB live. This is the pattern behind
 *                PyTorch's "14 GiB reserved, 266 MiB allocated" reports.
 *                The small tensors stay live at the end of the trace, so
 *                empty-cache can show what it cannot return.
 */
#include "ccbench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ccai_escape.h" /* common/: text from outside, escaped for a person */
#include "ccai_rng.h"

/* ---- PRNG: xoshiro256** (common/ccai_rng.h) plus a normal deviate ------------ */

static double rng_normal(ccai_rng *r) { /* Box-Muller, one value per call */
    double u1 = ccai_rng_uniform(r), u2 = ccai_rng_uniform(r);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* ---- a live set with random removal ------------------------------------------ */

typedef struct liveset {
    uint32_t *slot;
    uint64_t *size;
    size_t n, cap;
    uint64_t bytes;
} liveset;

static void live_add(liveset *l, uint32_t slot, uint64_t size) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 256;
        l->slot = realloc(l->slot, l->cap * sizeof *l->slot);
        l->size = realloc(l->size, l->cap * sizeof *l->size);
        if (!l->slot || !l->size)
            abort();
    }
    l->slot[l->n] = slot;
    l->size[l->n++] = size;
    l->bytes += size;
}

static void live_free_at(ccb_trace *t, liveset *l, size_t i) {
    ccb_trace_release(t, l->slot[i]);
    l->bytes -= l->size[i];
    l->slot[i] = l->slot[--l->n];
    l->size[i] = l->size[l->n];
}

static void live_free_all(ccb_trace *t, liveset *l) {
    while (l->n)
        live_free_at(t, l, l->n - 1);
    free(l->slot);
    free(l->size);
    memset(l, 0, sizeof *l);
}

static size_t scaled(double base, const ccb_gen_params *p, size_t least) {
    double v = base * p->scale;
    return v < (double)least ? least : (size_t)v;
}

#define KiB ((uint64_t)1 << 10)
#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)

/* ---- random (RMM-style) ------------------------------------------------------ */

static void random_trace(ccb_trace *t, const ccb_gen_params *p, int lognormal) {
    ccai_rng r;
    ccai_rng_seed(&r, p->seed);
    uint64_t budget = lognormal ? 2 * GiB : 1 * GiB;
    size_t allocs = scaled(20000, p, 50), done = 0;
    liveset l = {0};
    while (done < allocs) {
        uint64_t size;
        if (lognormal) {
            double v = exp(log(64.0 * KiB) + 2.0 * rng_normal(&r));
            size = v < 256 ? 256 : v > 256.0 * MiB ? 256 * MiB : (uint64_t)v;
        } else {
            size = 256 + ccai_rng_below(&r, 8 * MiB - 256 + 1);
        }
        int want_alloc = l.n == 0 || ccai_rng_uniform(&r) < 0.55;
        if (want_alloc && l.bytes + size <= budget) {
            live_add(&l, ccb_trace_alloc(t, size, 0), size);
            done++;
        } else if (l.n) {
            live_free_at(t, &l, ccai_rng_below(&r, l.n));
        }
    }
    live_free_all(t, &l);
}

static void gen_uniform(ccb_trace *t, const ccb_gen_params *p) {
    random_trace(t, p, 0);
}
static void gen_lognormal(ccb_trace *t, const ccb_gen_params *p) {
    random_trace(t, p, 1);
}

/* ---- inference: one model, changing batch sizes ------------------------------ */

typedef struct model_shape {
    uint64_t hidden;
    unsigned layers;
} model_shape;

static void load_weights(ccb_trace *t, const model_shape *m, liveset *w) {
    for (unsigned i = 0; i < m->layers; i++) {
        uint64_t wsize = m->hidden * m->hidden * 4, bsize = m->hidden * 4;
        live_add(w, ccb_trace_alloc(t, wsize, 0), wsize);
        live_add(w, ccb_trace_alloc(t, bsize, 0), bsize);
    }
}

static void run_request(ccb_trace *t, const model_shape *m, uint64_t batch) {
    uint64_t act = batch * m->hidden * 4;
    uint32_t x = ccb_trace_alloc(t, act, 0); /* input copied in */
    for (unsigned i = 0; i < m->layers; i++) {
        uint32_t y = ccb_trace_alloc(t, act, 0);
        uint32_t ws = ccb_trace_alloc(t, 2 * act + 256, 0); /* GEMM + activation scratch */
        ccb_trace_release(t, ws);
        ccb_trace_release(t, x);
        x = y;
    }
    uint32_t out = ccb_trace_alloc(t, batch * 4 * 1000, 0); /* logits */
    ccb_trace_release(t, x);
    ccb_trace_release(t, out);
}

static void gen_mlp(ccb_trace *t, const ccb_gen_params *p) {
    ccai_rng r;
    ccai_rng_seed(&r, p->seed);
    model_shape m = {4096, 8};
    liveset w = {0};
    load_weights(t, &m, &w);
    size_t requests = scaled(1500, p, 10);
    for (size_t i = 0; i < requests; i++)
        run_request(t, &m, 1 + ccai_rng_below(&r, 256));
    live_free_all(t, &w);
}

static void gen_models(ccb_trace *t, const ccb_gen_params *p) {
    static const model_shape shapes[] = {{1024, 24}, {2048, 12}, {4096, 8}, {3072, 16}, {1536, 20}, {5120, 6}};
    ccai_rng r;
    ccai_rng_seed(&r, p->seed);
    enum { N = sizeof shapes / sizeof shapes[0] };
    size_t order[N];
    for (size_t k = 0; k < N; k++)
        order[k] = k;
    for (size_t k = N - 1; k > 0; k--) { /* the order of models is shuffled per seed */
        size_t j = ccai_rng_below(&r, k + 1), tmp = order[k];
        order[k] = order[j];
        order[j] = tmp;
    }
    size_t requests = scaled(200, p, 4);
    for (size_t k = 0; k < N; k++) {
        const model_shape *m = &shapes[order[k]];
        liveset w = {0};
        load_weights(t, m, &w);
        for (size_t i = 0; i < requests; i++)
            run_request(t, m, 1 + ccai_rng_below(&r, 128));
        live_free_all(t, &w);
    }
}

/* ---- adversarial fragmentation ----------------------------------------------- */

static void gen_adversarial(ccb_trace *t, const ccb_gen_params *p) {
    ccai_rng r;
    ccai_rng_seed(&r, p->seed);
    size_t steps = scaled(40, p, 4);
    liveset pins = {0};
    for (size_t i = 0; i < steps; i++) {
        uint64_t large = 64 * MiB + 2 * MiB * i + 4 * KiB;
        uint32_t l = ccb_trace_alloc(t, large, 0);
        /* a few short-lived mid-size temporaries, as a real step has */
        for (int k = 0; k < 3; k++) {
            uint64_t tmp = 256 * KiB + ccai_rng_below(&r, 512 * KiB);
            ccb_trace_release(t, ccb_trace_alloc(t, tmp, 0));
        }
        uint64_t pin = 1536 * KiB;
        live_add(&pins, ccb_trace_alloc(t, pin, 0), pin);
        ccb_trace_release(t, l);
    }
    /* the pinning tensors outlive the trace: free them in a replay's cleanup */
    free(pins.slot);
    free(pins.size);
}

/* ---- registry ----------------------------------------------------------------- */

const ccb_generator ccb_generators[] = {
    {"uniform", "RMM-style random alloc/free, sizes uniform in [256 B, 8 MiB], 1 GiB live budget", gen_uniform},
    {"lognormal", "RMM-style random alloc/free, log-normal sizes (median 64 KiB, sigma 2), 2 GiB budget",
     gen_lognormal},
    {"mlp", "MLP inference: 8 layers of 4096x4096 fp32 weights, 1500 requests with batch sizes changing in 1..256", gen_mlp},
    {"models", "six models of different shapes in sequence: load, 200 requests, unload", gen_models},
    {"adversarial", "growing large tensors whose segment tails get pinned by long-lived 1.5 MiB tensors",
     gen_adversarial},
};
const size_t ccb_generator_count = sizeof ccb_generators / sizeof ccb_generators[0];

const ccb_generator *ccb_generator_find(const char *name) {
    for (size_t i = 0; i < ccb_generator_count; i++)
        if (strcmp(ccb_generators[i].name, name) == 0)
            return &ccb_generators[i];
    return NULL;
}

int ccb_generate(const char *name, const ccb_gen_params *p, ccb_trace *t) {
    const ccb_generator *g = ccb_generator_find(name);
    if (!g)
        return -1;
    /* checked before generating: a trace is held in memory, 16 bytes an event */
    if (!(p->scale > 0) || p->scale > CCB_GEN_MAX_SCALE) {
        fprintf(stderr, "ccbench: scale %g out of (0, %g]: a generated trace is limited to %.0f events\n", p->scale,
                CCB_GEN_MAX_SCALE, CCB_GEN_MAX_EVENTS);
        return -1;
    }
    ccb_trace_init(t, name);
    ccb_trace_comment(t, "generator: %s seed=%llu scale=%g (ccbench gen)", name, (unsigned long long)p->seed, p->scale);
    ccb_trace_comment(t, "%s", g->doc);
    g->generate(t, p);
    char err[256];
    if (ccb_trace_analyze(t, err, sizeof err) != 0) {
        ccai_fprintf_escaped(stderr, "ccbench: generator %s produced a bad trace: %s\n", name, err);
        return -1;
    }
    return 0;
}
