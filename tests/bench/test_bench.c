/*
 * test_bench.c — bench/: the ccbench harness: generators are deterministic
 * per seed and make what bench/gen.c documents (sizes, budgets, the order
 * of each request's events, a digest per seed), replay reproduces a trace's peaks exactly, strategies behave as
 * documented (GPU ones skip with a reason without a GPU), reports are well
 * formed, and a tiny suite runs on the host strategies.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <ctype.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc_test_util.h"
#include "ccai_capture.h" /* common/: ccai_run_capture */
#include "ccai_rng.h"
#include "read_text.h" /* tests/support */
#include "ccalloc.h"
#include "ccbench.h"

static const ccb_replay_options tiny = {.device_bytes = (size_t)8 << 30, .reps = 1, .timeline_points = 50};

static void gen(const char *name, uint64_t seed, ccb_trace *t) {
    ccb_gen_params p = {seed, 0.03};
    cr_assert_eq(ccb_generate(name, &p, t), 0, "generator %s", name);
}

Test(bench_gen, deterministic_per_seed) {
    for (size_t g = 0; g < ccb_generator_count; g++) {
        ccb_trace a, b, c;
        gen(ccb_generators[g].name, 11, &a);
        gen(ccb_generators[g].name, 11, &b);
        gen(ccb_generators[g].name, 12, &c);
        cr_assert_eq(a.n, b.n);
        cr_assert_eq(memcmp(a.ev, b.ev, a.n * sizeof *a.ev), 0, "%s: same seed, same trace", ccb_generators[g].name);
        cr_assert_gt(a.n, 0);
        cr_assert_eq(a.allocs, a.slots);
        if (strcmp(ccb_generators[g].name, "adversarial") != 0) /* its sizes are fixed; only temporaries vary */
            cr_assert(a.n != c.n || memcmp(a.ev, c.ev, a.n * sizeof *a.ev) != 0, "%s: seeds 11 and 12 agree",
                      ccb_generators[g].name);
        ccb_trace_free(&a);
        ccb_trace_free(&b);
        ccb_trace_free(&c);
    }
}

/* ---- each generator makes what bench/gen.c's opening comment says ---------------- */

static void gen_at(const char *name, uint64_t seed, double scale, ccb_trace *t) {
    ccb_gen_params p = {seed, scale};
    cr_assert_eq(ccb_generate(name, &p, t), 0, "generator %s", name);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* uniform: 20k x scale allocs of [256 B, 8 MiB], under a 1 GiB live budget
 * it reaches (each step allocates with p = 0.55); lognormal: median 64 KiB,
 * clipped to [256 B, 256 MiB] (about 0.3% of draws fall below 256 B). */
Test(bench_gen, random_sizes_and_budgets_are_the_documented_ones) {
    ccb_trace t;
    gen_at("uniform", 1, 0.2, &t);
    cr_assert_eq(t.allocs, 4000);
    cr_assert_eq(t.final_live, 0, "everything freed at the end");
    for (size_t i = 0; i < t.n; i++)
        if (t.ev[i].op == CCB_ALLOC)
            cr_assert(t.ev[i].size >= 256 && t.ev[i].size <= 8 * MiB, "uniform size %llu",
                      (unsigned long long)t.ev[i].size);
    cr_assert_leq(t.peak_requested, 1 * GiB, "the 1 GiB live budget");
    cr_assert_gt(t.peak_requested, 1 * GiB - 8 * MiB, "the budget is reached: %zu", t.peak_requested);
    ccb_trace_free(&t);

    gen_at("lognormal", 1, 0.2, &t);
    cr_assert_eq(t.allocs, 4000);
    uint64_t *sz = malloc(t.allocs * sizeof *sz);
    size_t k = 0, at_floor = 0;
    for (size_t i = 0; i < t.n; i++)
        if (t.ev[i].op == CCB_ALLOC) {
            cr_assert(t.ev[i].size >= 256 && t.ev[i].size <= 256 * MiB, "lognormal size %llu",
                      (unsigned long long)t.ev[i].size);
            at_floor += t.ev[i].size == 256;
            sz[k++] = t.ev[i].size;
        }
    qsort(sz, k, sizeof *sz, cmp_u64);
    cr_assert(sz[k / 2] > 56 * KiB && sz[k / 2] < 72 * KiB, "median %llu, not about 64 KiB",
              (unsigned long long)sz[k / 2]);
    cr_assert_gt(at_floor, 0, "draws below 256 B are clipped to 256 B");
    cr_assert_leq(t.peak_requested, 2 * GiB);
    free(sz);
    ccb_trace_free(&t);
}

/* One inference request of a model of `hidden` x `layers` at event *i:
 * its batch (1..max_batch), every size and the order of its events. */
static uint64_t expect_request(const ccb_trace *t, size_t *i, uint64_t hidden, unsigned layers, uint64_t max_batch) {
    const ccb_event *e = &t->ev[*i];
    cr_assert_eq(e[0].op, CCB_ALLOC, "event %zu: the input", *i);
    uint64_t act = e[0].size, batch = act / (hidden * 4);
    cr_assert(act % (hidden * 4) == 0 && batch >= 1 && batch <= max_batch, "event %zu: activation %llu", *i,
              (unsigned long long)act);
    size_t j = 1;
    uint32_t x = e[0].slot;
    for (unsigned l = 0; l < layers; l++, j += 4) {
        cr_assert(e[j].op == CCB_ALLOC && e[j].size == act, "event %zu: layer %u's output", *i + j, l);
        cr_assert(e[j + 1].op == CCB_ALLOC && e[j + 1].size == 2 * act + 256, "event %zu: workspace", *i + j + 1);
        cr_assert(e[j + 2].op == CCB_FREE && e[j + 2].slot == e[j + 1].slot, "event %zu: workspace freed", *i + j + 2);
        cr_assert(e[j + 3].op == CCB_FREE && e[j + 3].slot == x, "event %zu: previous activation freed", *i + j + 3);
        x = e[j].slot;
    }
    cr_assert(e[j].op == CCB_ALLOC && e[j].size == batch * 4 * 1000, "event %zu: logits", *i + j);
    cr_assert(e[j + 1].op == CCB_FREE && e[j + 1].slot == x, "event %zu", *i + j + 1);
    cr_assert(e[j + 2].op == CCB_FREE && e[j + 2].slot == e[j].slot, "event %zu", *i + j + 2);
    *i += j + 3;
    return batch;
}

/* A model's weights at event *i: per layer hidden^2 fp32 then hidden fp32. */
static void expect_weights(const ccb_trace *t, size_t *i, uint64_t hidden, unsigned layers) {
    for (unsigned l = 0; l < layers; l++, *i += 2) {
        cr_assert(t->ev[*i].op == CCB_ALLOC && t->ev[*i].size == hidden * hidden * 4, "event %zu: weight", *i);
        cr_assert(t->ev[*i + 1].op == CCB_ALLOC && t->ev[*i + 1].size == hidden * 4, "event %zu: bias", *i + 1);
    }
}

/* mlp: 8 layers of 4096 x 4096 weights, 1500 x scale requests of batch
 * 1..256 (every batch size comes up at scale 1), the weights freed last. */
Test(bench_gen, mlp_is_the_engines_loop) {
    ccb_trace t;
    gen_at("mlp", 1, 1.0, &t);
    size_t i = 0;
    expect_weights(&t, &i, 4096, 8);
    uint8_t seen[257] = {0};
    for (int r = 0; r < 1500; r++)
        seen[expect_request(&t, &i, 4096, 8, 256)] = 1;
    cr_assert(seen[1] && seen[256], "batches 1 and 256 both drawn");
    cr_assert_eq(t.n - i, 16, "then the 16 weights freed");
    cr_assert_eq(t.final_live, 0);
    ccb_trace_free(&t);
}

/* models: the six shapes, each once, in an order shuffled per seed (over
 * seeds, every model comes first somewhere: a uniform shuffle), 200 x scale
 * requests of batch 1..128 each, unloaded before the next. */
Test(bench_gen, models_run_the_six_shapes_in_a_shuffled_order) {
    static const uint64_t hidden[] = {1024, 2048, 4096, 3072, 1536, 5120};
    static const unsigned layers[] = {24, 12, 8, 16, 20, 6};
    unsigned first_seen = 0, in_place = 0;
    for (uint64_t seed = 1; seed <= 24; seed++) {
        ccb_trace t;
        gen_at("models", seed, 0.05, &t);
        size_t i = 0;
        unsigned used = 0;
        for (int m = 0; m < 6; m++) {
            int k = 0;
            while (k < 6 && t.ev[i].size != hidden[k] * hidden[k] * 4)
                k++;
            cr_assert_lt(k, 6, "seed %llu: model %d is none of the six", (unsigned long long)seed, m);
            cr_assert_eq(used & 1u << k, 0, "seed %llu: shape %d twice", (unsigned long long)seed, k);
            used |= 1u << k;
            in_place += k == m;
            if (m == 0)
                first_seen |= 1u << k;
            expect_weights(&t, &i, hidden[k], layers[k]);
            for (int r = 0; r < 10; r++)
                expect_request(&t, &i, hidden[k], layers[k], 128);
            for (unsigned w = 0; w < 2 * layers[k]; w++, i++)
                cr_assert_eq(t.ev[i].op, CCB_FREE, "seed %llu: the weights unloaded", (unsigned long long)seed);
        }
        cr_assert_eq(i, t.n);
        ccb_trace_free(&t);
    }
    cr_assert_eq(first_seen, 0x3f, "every model comes first for some seed: %#x", first_seen);
    cr_assert_gt(in_place, 0, "a uniform shuffle leaves a model in its place now and then");
}

/* adversarial: 40 x scale steps of a large tensor (64 MiB + 2i MiB + 4 KiB),
 * three temporaries of [256 KiB, 768 KiB), a 1.5 MiB pin kept live to the
 * end, the large one freed. */
Test(bench_gen, adversarial_pins_each_large_segments_tail) {
    ccb_trace t;
    gen_at("adversarial", 1, 1.0, &t);
    cr_assert_eq(t.n, 40 * 9);
    for (size_t s = 0; s < 40; s++) {
        const ccb_event *e = &t.ev[9 * s];
        cr_assert(e[0].op == CCB_ALLOC && e[0].size == 64 * MiB + 2 * MiB * s + 4 * KiB, "step %zu: large", s);
        for (int k = 0; k < 3; k++) {
            cr_assert(e[1 + 2 * k].op == CCB_ALLOC && e[1 + 2 * k].size >= 256 * KiB && e[1 + 2 * k].size < 768 * KiB,
                      "step %zu: temporary %d", s, k);
            cr_assert(e[2 + 2 * k].op == CCB_FREE && e[2 + 2 * k].slot == e[1 + 2 * k].slot);
        }
        cr_assert(e[7].op == CCB_ALLOC && e[7].size == 1536 * KiB, "step %zu: pin", s);
        cr_assert(e[8].op == CCB_FREE && e[8].slot == e[0].slot, "step %zu: large freed", s);
    }
    cr_assert_eq(t.final_live, 40, "the pins outlive the trace");
    cr_assert_eq(t.final_requested, 40 * 1536 * KiB);
    ccb_trace_free(&t);
    /* the smallest scales keep 4 steps, and the random generators 50 allocs */
    gen_at("adversarial", 1, 0.01, &t);
    cr_assert_eq(t.final_live, 4);
    ccb_trace_free(&t);
    gen_at("uniform", 1, 0.001, &t);
    cr_assert_eq(t.allocs, 50);
    ccb_trace_free(&t);
}

/* Same seed and scale, same trace on every machine (bench/gen.c): the
 * random generators' events at seed 1, scale 0.05, pinned by a digest
 * (FNV-1a over op, slot and size). A change of a probability, a range or a
 * distribution changes it. */
static uint64_t trace_digest(const ccb_trace *t) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < t->n; i++) {
        uint64_t v[3] = {t->ev[i].op, t->ev[i].slot, t->ev[i].size};
        for (int k = 0; k < 3; k++)
            for (int b = 0; b < 8; b++) {
                h ^= (v[k] >> (8 * b)) & 0xff;
                h *= 0x100000001b3ull;
            }
    }
    return h;
}

Test(bench_gen, the_same_seed_gives_the_same_trace_on_every_machine) {
    static const struct {
        const char *name;
        size_t n;
        uint64_t digest;
    } want[] = {
        {"uniform", 2000, 0xbdc770f83af58385ull},
        {"lognormal", 2000, 0xce9f83cef88695bdull},
        {"models", 4024, 0xc629495b269110b1ull},
    };
    for (size_t g = 0; g < sizeof want / sizeof want[0]; g++) {
        ccb_trace t;
        gen_at(want[g].name, 1, 0.05, &t);
        cr_assert_eq(t.n, want[g].n, "%s: %zu events", want[g].name, t.n);
        cr_assert_eq(trace_digest(&t), want[g].digest, "%s: digest %#llx", want[g].name,
                     (unsigned long long)trace_digest(&t));
        ccb_trace_free(&t);
    }
}

Test(bench_gen, rng_is_xoshiro256starstar) {
    /* reference outputs from Vigna's splitmix64.c and xoshiro256starstar.c
     * (prng.di.unimi.it), the state seeded with splitmix64's first four */
    uint64_t sm = 0;
    cr_assert_eq(ccai_splitmix64_next(&sm), 0xe220a8397b1dcdafull);
    cr_assert_eq(ccai_splitmix64_next(&sm), 0x6e789e6aa1b965f4ull);
    cr_assert_eq(ccai_splitmix64_at(0, 2), 0x6e789e6aa1b965f4ull, "output k without the ones before it");
    ccai_rng r;
    ccai_rng_seed(&r, 0);
    cr_assert_eq(ccai_rng_next(&r), 0x99ec5f36cb75f2b4ull);
    cr_assert_eq(ccai_rng_next(&r), 0xbf6e1f784956452aull);
    cr_assert_eq(ccai_rng_next(&r), 0x1a5f849d4933e6e0ull);
    ccai_rng_seed(&r, 42);
    cr_assert_eq(ccai_rng_next(&r), 0x15780b2e0c2ec716ull);
    cr_assert_eq(ccai_rng_next(&r), 0x6104d9866d113a7eull);
    cr_assert_eq(ccai_rng_next(&r), 0xae17533239e499a1ull);
    for (int i = 0; i < 1000; i++) {
        double u = ccai_rng_uniform(&r);
        cr_assert(u >= 0 && u < 1);
        cr_assert_lt(ccai_rng_below(&r, 7), 7);
    }
    cr_assert_eq(ccai_rng_below(&r, 0), 0);
}

/* --scale is bounded because a generated trace is held in memory: every
 * generator stays within CCB_GEN_MAX_EVENTS at CCB_GEN_MAX_SCALE (counts grow
 * at most linearly with the scale, so scale 1 x the bound is an upper bound),
 * and a larger scale is refused before anything is generated. */
Test(bench_gen, scale_is_bounded_by_the_event_count) {
    for (size_t g = 0; g < ccb_generator_count; g++) {
        ccb_trace t;
        ccb_gen_params p = {1, 1.0};
        cr_assert_eq(ccb_generate(ccb_generators[g].name, &p, &t), 0);
        cr_assert_leq((double)t.n * CCB_GEN_MAX_SCALE, (double)CCB_GEN_MAX_EVENTS, "%s: %zu events at scale 1",
                      ccb_generators[g].name, t.n);
        ccb_trace_free(&t);
    }
    ccb_trace at; /* the bound itself is a scale (adversarial: the cheapest at it) */
    ccb_gen_params most = {1, CCB_GEN_MAX_SCALE};
    cr_assert_eq(ccb_generate("adversarial", &most, &at), 0, "scale %g taken", CCB_GEN_MAX_SCALE);
    cr_assert_eq(at.final_live, (size_t)(40 * CCB_GEN_MAX_SCALE), "40 x scale steps");
    ccb_trace_free(&at);
    const double bad[] = {CCB_GEN_MAX_SCALE * 1.0001, 1e6, 0, -1, NAN, INFINITY};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ccb_trace t = {.n = 12345};
        ccb_gen_params p = {1, bad[i]};
        cr_assert_eq(ccb_generate("uniform", &p, &t), -1, "scale %g refused", bad[i]);
        cr_assert_eq(t.n, 12345, "scale %g: the trace is untouched", bad[i]);
    }
}

Test(bench_replay, peak_requested_is_reproduced_exactly) {
    const char *specs[] = {"ccalloc-growth",   "ccalloc-greedy",  "ccalloc-nosmall",
                           "ccalloc-maxsplit", "ccalloc-default", "malloc"};
    for (size_t g = 0; g < ccb_generator_count; g++) {
        ccb_trace t;
        gen(ccb_generators[g].name, 3, &t);
        for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
            ccb_result r;
            cr_assert_eq(ccb_replay(&t, specs[s], &tiny, &r), 0, "%s on %s: %s", specs[s], t.name, r.why);
            cr_assert_eq(r.skipped, 0);
            cr_assert_eq(r.ooms, 0, "%s on %s", specs[s], t.name);
            cr_assert_eq(r.peak_requested, t.peak_requested, "%s on %s", specs[s], t.name);
            cr_assert(r.checked, "host pointers are pattern-checked");
            if (strncmp(specs[s], "ccalloc", 7) == 0) {
                cr_assert_eq(r.strategy_requested_peak, t.peak_requested,
                             "%s on %s: cca_stats.requested_bytes_peak %zu, trace %zu", specs[s], t.name,
                             r.strategy_requested_peak, t.peak_requested);
                cr_assert_geq(r.peak_allocated, t.peak_rounded, "%s on %s", specs[s], t.name);
                cr_assert_geq(r.peak_reserved, r.peak_allocated);
                cr_assert_geq(r.reserved_after_trace, r.reserved_after_empty);
                cr_assert(!isnan(r.median_ns) && r.median_ns >= 0);
            } else {
                cr_assert_eq(r.peak_allocated, t.peak_requested);
                cr_assert_eq(r.peak_reserved, CCB_UNKNOWN);
            }
            if (strcmp(specs[s], "ccalloc-greedy") == 0) /* the arena always splits at 512 B */
                cr_assert_eq(r.peak_allocated, t.peak_rounded, "greedy on %s: %zu vs predicted %zu", t.name,
                             r.peak_allocated, t.peak_rounded);
            cr_assert_gt(r.timeline_n, 0);
            ccb_result_free(&r);
        }
        ccb_trace_free(&t);
    }
}

Test(bench_replay, small_pool_only_trace_predicts_allocated_peak) {
    /* every size <= 1 MiB: the small pool splits at 512 B, so allocated = rounded */
    ccb_trace t;
    ccb_trace_init(&t, "small");
    ccai_rng r;
    ccai_rng_seed(&r, 5);
    uint32_t live[64];
    size_t n = 0;
    for (int i = 0; i < 2000; i++) {
        if (n < 64 && (n == 0 || ccai_rng_uniform(&r) < 0.6))
            live[n++] = ccb_trace_alloc(&t, 1 + ccai_rng_below(&r, 1 << 20), 0);
        else {
            size_t k = ccai_rng_below(&r, n);
            ccb_trace_release(&t, live[k]);
            live[k] = live[--n];
        }
    }
    while (n)
        ccb_trace_release(&t, live[--n]);
    cr_assert_eq(ccb_trace_analyze(&t, NULL, 0), 0);
    ccb_result res;
    cr_assert_eq(ccb_replay(&t, "ccalloc-growth", &tiny, &res), 0, "%s", res.why);
    cr_assert_eq(res.peak_allocated, t.peak_rounded);
    cr_assert_eq(res.strategy_requested_peak, t.peak_requested);
    cr_assert_eq(res.reserved_after_empty, 0, "nothing is live at the end");
    ccb_result_free(&res);
    ccb_trace_free(&t);
}

/* A trace over all three pools where ccalloc's documented rules
 * (docs/allocator.md, "the life of one alloc") fix every block's size:
 *   - small (<= small_max, 1 MiB): any size; the small pool splits whenever
 *     the remainder is >= 512 B, so a block is the size rounded up to 512 B;
 *   - medium (< large_min, 10 MiB) and large: multiples of 2 MiB only. Medium
 *     segments are 20 MiB and large ones the request rounded up to 2 MiB, so
 *     every block and free block in those pools is a multiple of 2 MiB; any
 *     best fit then leaves 0 or >= 2 MiB (> small_max, so it is cut), and the
 *     block is exactly the request, fresh segment or reused one alike.
 * So allocated_bytes is always the sum of the 512-rounded live sizes, and its
 * peak is computed here from the trace alone. Reserved bytes depend on
 * packing and are not predicted. */
Test(bench_replay, three_pool_trace_reproduces_peaks_exactly) {
    const size_t mib = (size_t)1 << 20;
    ccb_trace t;
    ccb_trace_init(&t, "three-pools");
    ccai_rng r;
    ccai_rng_seed(&r, 17);
    uint32_t live[48];
    uint64_t live_size[48];
    size_t n = 0, requested = 0, rounded = 0, peak_requested = 0, peak_rounded = 0;
    int seen[3] = {0, 0, 0};
    for (int i = 0; i < 3000; i++) {
        if (n < 48 && (n == 0 || ccai_rng_uniform(&r) < 0.55)) {
            uint64_t size;
            int pool = (int)ccai_rng_below(&r, 3);
            if (pool == 0)
                size = 1 + ccai_rng_below(&r, mib); /* small: 1 B .. 1 MiB */
            else if (pool == 1)
                size = 2 * mib * (1 + ccai_rng_below(&r, 4)); /* medium: 2, 4, 6, 8 MiB */
            else
                size = 2 * mib * (5 + ccai_rng_below(&r, 12)); /* large: 10 .. 32 MiB */
            seen[pool]++;
            live_size[n] = size;
            live[n++] = ccb_trace_alloc(&t, size, 0);
            requested += size;
            rounded += (size + CCA_GRANULARITY - 1) / CCA_GRANULARITY * CCA_GRANULARITY;
        } else {
            size_t k = ccai_rng_below(&r, n);
            ccb_trace_release(&t, live[k]);
            requested -= live_size[k];
            rounded -= (live_size[k] + CCA_GRANULARITY - 1) / CCA_GRANULARITY * CCA_GRANULARITY;
            live[k] = live[--n];
            live_size[k] = live_size[n];
        }
        peak_requested = requested > peak_requested ? requested : peak_requested;
        peak_rounded = rounded > peak_rounded ? rounded : peak_rounded;
    }
    while (n)
        ccb_trace_release(&t, live[--n]);
    cr_assert(seen[0] > 100 && seen[1] > 100 && seen[2] > 100, "every pool is exercised");
    cr_assert_eq(ccb_trace_analyze(&t, NULL, 0), 0);
    cr_assert_eq(t.peak_requested, peak_requested, "the trace's own analysis agrees");
    cr_assert_eq(t.peak_rounded, peak_rounded);

    ccb_result res;
    cr_assert_eq(ccb_replay(&t, "ccalloc-growth", &tiny, &res), 0, "%s", res.why);
    cr_assert_eq(res.ooms, 0);
    cr_assert_eq(res.peak_requested, peak_requested, "replay %zu, trace %zu", res.peak_requested, peak_requested);
    cr_assert_eq(res.strategy_requested_peak, peak_requested, "cca_stats %zu, trace %zu", res.strategy_requested_peak,
                 peak_requested);
    cr_assert_eq(res.peak_allocated, peak_rounded, "replay %zu, predicted %zu", res.peak_allocated, peak_rounded);
    cr_assert_geq(res.peak_reserved, res.peak_allocated);
    cr_assert_eq(res.reserved_after_empty, 0, "nothing is live at the end");
    ccb_result_free(&res);
    ccb_trace_free(&t);
}

Test(bench_replay, leftovers_pin_what_empty_cache_cannot_return) {
    ccb_trace t;
    gen("adversarial", 1, &t);
    cr_assert_gt(t.final_live, 0, "the pinning tensors outlive the trace");
    ccb_result r;
    cr_assert_eq(ccb_replay(&t, "ccalloc-growth", &tiny, &r), 0, "%s", r.why);
    cr_assert_geq(r.reserved_after_empty, t.final_requested);
    cr_assert_eq(r.device_free_before, tiny.device_bytes);
    cr_assert_eq(r.device_free_after, tiny.device_bytes - r.reserved_after_empty);
    ccb_result_free(&r);
    ccb_trace_free(&t);
}

Test(bench_replay, ooms_are_counted_and_replay_goes_on) {
    ccb_trace t;
    ccb_trace_init(&t, "too-big");
    uint32_t a = ccb_trace_alloc(&t, 48 << 20, 0);
    uint32_t b = ccb_trace_alloc(&t, 48 << 20, 0); /* does not fit a 64 MiB device */
    uint32_t c = ccb_trace_alloc(&t, 4096, 0);
    ccb_trace_release(&t, a);
    ccb_trace_release(&t, b);
    ccb_trace_release(&t, c);
    cr_assert_eq(ccb_trace_analyze(&t, NULL, 0), 0);
    ccb_replay_options o = {.device_bytes = 64 << 20, .reps = 1, .timeline_points = 10};
    ccb_result r;
    cr_assert_eq(ccb_replay(&t, "ccalloc-growth", &o, &r), 0, "%s", r.why);
    cr_assert_eq(r.ooms, 1);
    cr_assert_eq(r.peak_requested, (48 << 20) + 4096);
    ccb_result_free(&r);
    ccb_trace_free(&t);
}

Test(bench_strategy, specs_resolve_and_gpu_ones_skip_with_a_reason) {
    const ccb_strategy_ops *ops;
    const char *config;
    char label[64];
    cr_assert_eq(ccb_strategy_resolve("ccalloc-greedy", &ops, &config, label, sizeof label), 0);
    cr_assert_str_eq(ops->base, "ccalloc");
    cr_assert_str_eq(config, "policy:greedy,expandable:0", "greedy's classic arena, whatever the default");
    cr_assert_eq(ccb_strategy_resolve("ccalloc-growth", &ops, &config, label, sizeof label), 0);
    cr_assert_str_eq(config, "policy:growth,expandable:0", "classic growth, whatever the default");
    cr_assert_eq(ccb_strategy_resolve("ccalloc-default", &ops, &config, label, sizeof label), 0);
    cr_assert_str_eq(ops->base, "ccalloc");
    cr_assert_str_eq(config, "", "the allocator's default: no key at all");
    cr_assert_eq(ccb_strategy_resolve("ccalloc=small_pool:0,max_split:128M", &ops, &config, label, sizeof label), 0);
    cr_assert_str_eq(config, "small_pool:0,max_split:128M");
    cr_assert_eq(ccb_strategy_resolve("nonesuch", &ops, &config, label, sizeof label), -1);
    for (size_t i = 0; i < ccb_preset_count; i++)
        cr_assert_eq(ccb_strategy_resolve(ccb_presets[i].name, &ops, &config, label, sizeof label), 0);

    ccb_trace t;
    gen("mlp", 1, &t);
    const char *gpu[] = {"ccalloc-cuda", "ccalloc-cuda-expandable", "cuda-malloc", "cuda-async-t0", "cuda-async-tmax",
                         "cub"};
    int have_gpu = strcmp(ccb_gpu_unavailable_reason(), "ok") == 0;
    for (size_t i = 0; i < sizeof gpu / sizeof *gpu; i++) {
        ccb_result r;
        cr_assert_eq(ccb_replay(&t, gpu[i], &tiny, &r), 0, "%s: %s", gpu[i], r.why);
        if (have_gpu) {
            cr_assert_eq(r.skipped, 0, "%s skipped on a GPU: %s", gpu[i], r.why);
        } else {
            cr_assert_eq(r.skipped, 1, "%s ran without a GPU?", gpu[i]);
            cr_assert(strstr(r.why, "no GPU") != NULL, "%s: reason '%s'", gpu[i], r.why);
        }
        ccb_result_free(&r);
    }
    ccb_result r;
    cr_assert_eq(ccb_replay(&t, "ccalloc=no_such_key:1", &tiny, &r), -1);
    cr_assert(strstr(r.why, "no_such_key") != NULL, "config errors name the key: %s", r.why);
    ccb_result_free(&r);
    /* ... and so is a GPU strategy's, with a GPU or without: open checks it
     * too, for a caller that did not (the command line checks it first) */
    const char *bad[] = {"cuda-async=release_threshold:lots", "cub=bin_growth:1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cr_assert_eq(ccb_replay(&t, bad[i], &tiny, &r), -1, "%s: %s", bad[i], r.why);
        cr_assert_eq(r.skipped, 0, "%s skipped: %s", bad[i], r.why);
        cr_assert(strstr(r.why, bad[i] + 1 + strcspn(bad[i], "=")) != NULL, "%s: %s", bad[i], r.why);
        ccb_result_free(&r);
    }
    ccb_trace_free(&t);
}

/* A ccalloc strategy asking for expandable:1 over an upstream without vm
 * ops (ccalloc-cuda-expandable on a GPU without VMM) is refused with the
 * upstream's reason, not measured as classic segments under the
 * expandable name; the same upstream with expandable:0 opens, and so does
 * one whose config leaves expandable at its default (1): the allocator
 * falls back to classic segments there, as it would in any program. */
Test(bench_strategy, an_expandable_strategy_without_vm_ops_is_refused) {
    tu_upstream t; /* the test double: no vm ops */
    ccb_strategy s = {.ops = &ccb_strategy_ccalloc_host};
    char why[512] = "";
    cca_upstream *u = tu_upstream_create(&t, 64 << 20, false);
    cr_assert_eq(ccb_ccalloc_open_on(&s, u, "policy:growth,expandable:1", why, sizeof why), -1); /* u destroyed */
    cr_assert_null(s.impl);
    cr_assert(strstr(why, "expandable:1") && strstr(why, "upstream 'test' has no virtual-memory operations"), "%s",
              why);
    u = tu_upstream_create(&t, 64 << 20, false);
    cr_assert_eq(ccb_ccalloc_open_on(&s, u, "policy:growth,expandable:0", why, sizeof why), 0, "%s", why);
    cr_assert_not_null(s.impl);
    s.ops->close(&s);
    u = tu_upstream_create(&t, 64 << 20, false);
    cr_assert_eq(ccb_ccalloc_open_on(&s, u, "policy:growth", why, sizeof why), 0, "the default: %s", why);
    cr_assert_not_null(s.impl);
    s.ops->close(&s);
}

static size_t csv_fields(const char *line) {
    size_t n = 1;
    int quoted = 0;
    for (; *line && *line != '\n'; line++) {
        if (*line == '"')
            quoted = !quoted;
        else if (*line == ',' && !quoted)
            n++;
    }
    return n;
}

Test(bench_suite, tiny_suite_on_host_strategies_writes_consistent_reports) {
    const char *specs[] = {"ccalloc-growth", "ccalloc-greedy", "malloc", "cub"};
    size_t ns = sizeof specs / sizeof *specs, n = 0;
    ccb_result r[32];
    for (size_t g = 0; g < ccb_generator_count; g++) {
        ccb_trace t;
        gen(ccb_generators[g].name, 1, &t);
        for (size_t s = 0; s < ns; s++)
            cr_assert_eq(ccb_replay(&t, specs[s], &tiny, &r[n++]), 0);
        ccb_trace_free(&t);
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ccb_write_results_csv(f, r, n);
    fclose(f);
    size_t lines = 0, header = csv_fields(buf);
    cr_assert_eq(header, 33);
    for (char *l = buf; *l; l = strchr(l, '\n') + 1) {
        cr_assert_eq(csv_fields(l), header, "CSV line %zu has %zu fields", lines, csv_fields(l));
        lines++;
    }
    cr_assert_eq(lines, n + 1);
    free(buf);
    f = open_memstream(&buf, &len);
    ccb_write_results_md(f, r, n);
    fclose(f);
    cr_assert(strstr(buf, "| mlp | ccalloc-growth |") != NULL);
    free(buf);
    for (size_t i = 0; i < n; i++)
        ccb_result_free(&r[i]);

    const char *mspecs[] = {"ccalloc-growth", "malloc"};
    size_t lives[] = {10, 100};
    ccb_micro_row *rows;
    size_t nrows;
    cr_assert_eq(ccb_micro(mspecs, 2, lives, 2, 500, 1, &rows, &nrows), 0);
    cr_assert_eq(nrows, 8);
    for (size_t i = 0; i < nrows; i++) {
        cr_assert(!isnan(rows[i].median_ns), "%s live %zu: %s", rows[i].strategy, rows[i].live, rows[i].why);
        cr_assert_leq(rows[i].median_ns, rows[i].p99_ns);
    }
    free(rows);
}

/* A cell's timed pairs stop at the budget (glibc malloc with 100k holes
 * costs ~0.6 ms a pair: 200k pairs would take minutes): with a budget of
 * 1 ns every cell stops at its first check, after CCB_MICRO_BUDGET_CHECK
 * pairs, says so in `pairs`, and still has its three figures; the default
 * budget is back after. */
Test(bench_stats, micro_cells_stop_at_the_time_budget) {
    const char *mspecs[] = {"ccalloc-growth", "malloc"};
    size_t lives[] = {10};
    ccb_micro_row *rows;
    size_t nrows;
    uint64_t was = ccb_micro_budget_ns;
    cr_assert_eq(was, CCB_MICRO_BUDGET_NS);
    ccb_micro_budget_ns = 1;
    cr_assert_eq(ccb_micro(mspecs, 2, lives, 1, 100000, 1, &rows, &nrows), 0);
    ccb_micro_budget_ns = was;
    cr_assert_eq(nrows, 4);
    for (size_t i = 0; i < nrows; i++) {
        cr_assert_eq(rows[i].pairs, CCB_MICRO_BUDGET_CHECK, "%s: %zu pairs", rows[i].strategy, rows[i].pairs);
        cr_assert(!isnan(rows[i].median_ns) && !isnan(rows[i].p99_ns) && !isnan(rows[i].mean_ns), "%s: %s",
                  rows[i].strategy, rows[i].why);
    }
    free(rows);
    cr_assert_eq(ccb_micro(mspecs, 1, lives, 1, 300, 1, &rows, &nrows), 0);
    cr_assert_eq(rows[0].pairs, 300, "under the budget every pair asked for runs");
    free(rows);
}

/* A cell whose blocks the device cannot hold (the 100k cells on an 80 GB
 * GPU) is said, not failed: the helper decides (unknown room: never), the
 * table and CSV say "does not fit" / "unfit", and a run whose only
 * non-results are such cells is not a failure (ccb_micro's rc ignores them,
 * as it ignores skipped strategies: checked here on the rows' own flag). */
Test(bench_stats, micro_cells_the_device_cannot_hold_are_said) {
    char why[160] = "";
    cr_assert_eq(ccb_micro_unfit(10, 100, CCB_UNKNOWN, why, sizeof why), 0);
    cr_assert_eq(ccb_micro_unfit(10, 100, 100, why, sizeof why), 0, "exactly the room fits");
    cr_assert_eq(ccb_micro_unfit(200000, (size_t)160 << 30, (size_t)79 << 30, why, sizeof why), 1);
    cr_assert_str_eq(why, "200000 blocks need 160.00 GiB, the device has 79.00 GiB free");
    ccb_micro_row r[2] = {{.strategy = "ccalloc-cuda", .live = 100000, .holes = 1, .unfit = 1},
                          {.strategy = "ccalloc-cuda", .live = 100000, .holes = 0}};
    snprintf(r[0].why, sizeof r[0].why, "%s", why);
    snprintf(r[1].why, sizeof r[1].why, "set-up alloc 3 of 4096 failed");
    r[0].median_ns = r[0].p99_ns = r[0].mean_ns = r[1].median_ns = r[1].p99_ns = r[1].mean_ns = NAN;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ccb_micro_write_md(f, r, 2, 10.0);
    ccb_micro_write_csv(f, r, 2);
    fclose(f);
    cr_assert(strstr(buf, "| ccalloc-cuda | 100000 | holes | | does not fit: 200000 blocks need 160.00 GiB"), "%s", buf);
    cr_assert(strstr(buf, "| ccalloc-cuda | 100000 | packed | | failed: set-up alloc 3 of 4096 failed"), "%s", buf);
    cr_assert(strstr(buf, ",unfit,"), "%s", buf);
    cr_assert(strstr(buf, ",failed,"), "%s", buf);
    free(buf);
}

/* micro's live counts without --live are the ones --help states: the
 * whole table, and its first CCB_MICRO_QUICK_NLIVES with --quick */
Test(bench_stats, micro_default_lives_are_the_documented_ones) {
    char *help = NULL, all[128] = "(default ", quick[128] = "";
    size_t len = 0;
    FILE *f = open_memstream(&help, &len);
    ccb_usage(f);
    fclose(f);
    for (size_t i = 0; i < CCB_MICRO_DEFAULT_NLIVES; i++) {
        size_t n = strlen(all), q = strlen(quick);
        snprintf(all + n, sizeof all - n, "%s%zu", i ? "," : "", ccb_micro_default_lives[i]);
        if (i < CCB_MICRO_QUICK_NLIVES)
            snprintf(quick + q, sizeof quick - q, "%s%zu", i ? "," : "", ccb_micro_default_lives[i]);
    }
    strcat(all, ";");
    strcat(quick, " with --quick)");
    cr_assert(strstr(help, all) && strstr(help, quick), "--help says neither '%s' nor '%s'", all, quick);
    free(help);
}

Test(bench_stats, quantiles_are_nearest_rank) {
    double v[] = {5, 1, 4, 2, 3};
    cr_assert_eq(ccb_quantile(v, 5, 0.5), 3);
    cr_assert_eq(ccb_quantile(v, 5, 0.99), 5);
    cr_assert_eq(ccb_quantile(v, 5, 0.0), 1);
    cr_assert(isnan(ccb_quantile(v, 0, 0.5)));
    cr_assert_geq(ccb_timer_overhead_ns(), 0);
}

Test(bench_report, csv_quotes_names_that_hold_a_comma) {
    /* -s 'ccalloc=max_split:64M,small_pool:0,expandable:0' is a legal
     * strategy (max_split needs classic segments): its label must stay one
     * field in results.csv and micro.csv */
    ccb_trace t;
    gen("uniform", 1, &t);
    ccb_result r;
    const char *spec = "ccalloc=max_split:64M,small_pool:0,expandable:0";
    cr_assert_eq(ccb_replay(&t, spec, &tiny, &r), 0, "%s", r.why);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ccb_write_results_csv(f, &r, 1);
    fclose(f);
    cr_assert(strstr(buf, "\nuniform,\"ccalloc=max_split:64M,small_pool:0,expandable:0\","
                          "\"max_split:64M,small_pool:0,expandable:0\",ok,"),
              "%s", buf);
    free(buf);
    ccb_micro_row m;
    memset(&m, 0, sizeof m);
    snprintf(m.strategy, sizeof m.strategy, "%s", spec);
    m.live = 10;
    m.pairs = 5;
    m.median_ns = m.p99_ns = m.mean_ns = 1;
    buf = NULL;
    f = open_memstream(&buf, &len);
    ccb_micro_write_csv(f, &m, 1);
    fclose(f);
    cr_assert(strstr(buf, "\n\"ccalloc=max_split:64M,small_pool:0,expandable:0\",10,packed,5,"), "%s", buf);
    free(buf);
    ccb_result_free(&r);
    ccb_trace_free(&t);
}

/* ---- the clock (bench/clock.c) ------------------------------------------------ */

/* An interval read in ticks agrees with CLOCK_MONOTONIC's (a loose bound:
 * the test asserts the conversion, not the machine's speed). */
static void clock_measures_an_interval(void) {
    ccb_clock_init();
    uint64_t n0 = ccb_now_ns(), t0 = ccb_ticks();
    struct timespec ts = {0, 30 * 1000 * 1000};
    nanosleep(&ts, NULL);
    uint64_t t1 = ccb_ticks(), n1 = ccb_now_ns();
    double ticks = ccb_ticks_ns(t0, t1), mono = (double)(n1 - n0);
    cr_assert_geq(ticks, 29e6, "a 30 ms sleep measured %.0f ns", ticks);
    cr_assert(fabs(ticks - mono) <= 0.02 * mono + 1000, "ticks %.0f ns, CLOCK_MONOTONIC %.0f ns", ticks, mono);
    double read = ccb_timer_overhead_ns();
    cr_assert(read >= 0 && read < 10000, "a read costs %.1f ns", read);
    cr_assert_lt(ccb_ticks_ns(t1, t0), 0, "an interval backwards is negative");
}

Test(bench_clock, clock_gettime_when_asked) {
    setenv("CCBENCH_CLOCK", "clock_gettime", 1); /* each Criterion test is a process: read at first use */
    cr_assert_str_eq(ccb_clock_name(), "clock_gettime(CLOCK_MONOTONIC)");
    clock_measures_an_interval();
}

Test(bench_clock, tsc_when_asked_and_invariant) {
    setenv("CCBENCH_CLOCK", "tsc", 1);
    const char *name = ccb_clock_name();
#if defined(__x86_64__)
    bool tsc = strstr(name, "TSC") != NULL;
    cr_assert(tsc || strcmp(name, "clock_gettime(CLOCK_MONOTONIC)") == 0, "clock: %s", name);
    if (!tsc)
        cr_log_warn("no invariant TSC here: the choice fell back to clock_gettime");
#else
    cr_assert_str_eq(name, "clock_gettime(CLOCK_MONOTONIC)", "no TSC off x86-64");
#endif
    clock_measures_an_interval();
}

Test(bench_clock, an_unknown_choice_is_the_default_choice) {
    setenv("CCBENCH_CLOCK", "sundial\x01;rm -rf", 1);
    const char *name = ccb_clock_name();
    cr_assert(strstr(name, "TSC") || strcmp(name, "clock_gettime(CLOCK_MONOTONIC)") == 0, "clock: %s", name);
    clock_measures_an_interval();
}

Test(bench_clock, default_choice_measures_right) {
    unsetenv("CCBENCH_CLOCK");
    cr_assert_gt(strlen(ccb_clock_name()), 0);
    clock_measures_an_interval();
}

/* A row that could not be measured says why and is never a row of zeros
 * (an unknown strategy); a trace without allocations replays, and its row
 * says "—" for what it could not time, not "failed" without a reason. */
Test(bench_replay, unmeasured_rows_fail_with_a_reason) {
    ccb_trace t;
    gen("mlp", 1, &t);
    ccb_result r;
    cr_assert_eq(ccb_replay(&t, "no-such-strategy", &tiny, &r), -1);
    cr_assert(isnan(r.median_ns) && isnan(r.ratio), "an unknown strategy's figures are unknown");
    cr_assert_not_null(strstr(r.why, "unknown strategy"), "%s", r.why);
    ccb_trace_free(&t);
    ccb_trace empty;
    memset(&empty, 0, sizeof empty);
    snprintf(empty.name, sizeof empty.name, "empty");
    cr_assert_eq(ccb_replay(&empty, "malloc", &tiny, &r), 0, "%s", r.why);
    cr_assert(isnan(r.median_ns));
    char *md = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&md, &len);
    ccb_write_results_md(f, &r, 1);
    fclose(f);
    cr_assert_null(strstr(md, "failed"), "%s", md);
    cr_assert_not_null(strstr(md, "| empty | malloc | —"), "%s", md);
    free(md);
    f = open_memstream(&md, &len);
    ccb_write_results_csv(f, &r, 1);
    fclose(f);
    cr_assert_not_null(strstr(md, "\nempty,malloc,\"\",ok,0,0,0,1,,,"), "the CSV agrees: not failed, times empty\n%s",
                       md);
    free(md);
    ccb_result_free(&r);
}

/* No figure of a row is ever printed as nan or inf: an unknown one is "—"
 * in markdown and an empty field in CSV, whatever a strategy or a clock
 * handed back. */
static int has_nan_or_inf(const char *s) {
    for (const char *p = s; *p; p++)
        if ((p == s || !isalpha((unsigned char)p[-1])) &&
            (!strncasecmp(p, "nan", 3) || !strncasecmp(p, "inf", 3) || !strncasecmp(p, "-nan", 4)))
            return 1;
    return 0;
}

Test(bench_report, rows_never_print_nan_or_inf) {
    ccb_trace t;
    gen("uniform", 1, &t);
    ccb_result r[2];
    cr_assert_eq(ccb_replay(&t, "ccalloc-growth", &tiny, &r[0]), 0, "%s", r[0].why);
    cr_assert_eq(ccb_replay(&t, "malloc", &tiny, &r[1]), 0, "%s", r[1].why);
    r[0].median_ns = r[0].ratio_requested = INFINITY;
    r[0].driver_total_ms = r[0].frag_at_peak = -INFINITY;
    r[1].p99_ns = r[1].ratio = r[1].ratio_ideal = INFINITY;
    for (int fmt = 0; fmt < 2; fmt++) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        if (fmt)
            ccb_write_results_csv(f, r, 2);
        else
            ccb_write_results_md(f, r, 2);
        fclose(f);
        cr_assert(!has_nan_or_inf(buf), "%s", buf);
        free(buf);
    }
    ccb_micro_row m = {.strategy = "malloc", .live = 10, .pairs = 5, .median_ns = 1, .p99_ns = INFINITY, .mean_ns = 1};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ccb_micro_write_md(f, &m, 1, 0);
    ccb_micro_write_csv(f, &m, 1);
    fclose(f);
    cr_assert(!has_nan_or_inf(buf), "%s", buf);
    free(buf);
    ccb_result_free(&r[0]);
    ccb_result_free(&r[1]);
    ccb_trace_free(&t);
}

/* A file this run wrote and then read as a trace is, from the read on, a
 * trace read, as if noted first as one: a recording (CCALLOC_TRACE) over
 * it is refused (ccb_recording_reads) as over any trace the run reads. */
Test(bench_report, a_file_written_then_read_is_a_trace_read) {
    char dir[] = "/tmp/ccb_notesXXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    FILE *f = ccb_open_out(dir, "t.csv");
    cr_assert_not_null(f);
    fputs("# ccalloc trace v3\nseq,op,id,size,stream,domain,name\n0,alloc,1,512,0,0\n1,free,1,512,0,0\n", f);
    ccb_close_out(f, dir, "t.csv");
    char path[64];
    snprintf(path, sizeof path, "%s/t.csv", dir);
    ccb_trace t;
    char err[256] = "";
    cr_assert_eq(ccb_trace_load(&t, path, err, sizeof err), 0, "%s", err);
    ccb_trace_free(&t);
    setenv("CCALLOC_TRACE", path, 1);
    int reads = ccb_recording_reads();
    unsetenv("CCALLOC_TRACE");
    cr_assert_eq(reads, 1, "a recording over a trace this run read was not refused");
    unlink(path);
    rmdir(dir);
}

/* The guard against writing over a trace holds each file once, by identity:
 * a file read again (the same path, another name for it, a trace loaded
 * twice) adds no note, so a process that reads one file over and over (the
 * trace fuzzer, an input at a time) holds one; a second file is a second
 * note; a noted file, by any of its names, is still not written over. */
Test(bench_report, a_file_read_again_is_noted_once) {
    char dir[] = "/tmp/ccb_notesXXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char a[64], link_a[64], b[64];
    snprintf(a, sizeof a, "%s/a.csv", dir);
    snprintf(link_a, sizeof link_a, "%s/also_a.csv", dir);
    snprintf(b, sizeof b, "%s/b.csv", dir);
    FILE *f = fopen(a, "w");
    cr_assert_not_null(f);
    fputs("# ccalloc trace v3\nseq,op,id,size,stream,domain,name\n0,alloc,1,512,0,0\n1,free,1,512,0,0\n", f);
    fclose(f);
    cr_assert_eq(link(a, link_a), 0);
    f = fopen(b, "w");
    cr_assert_not_null(f);
    fclose(f);
    size_t before = ccb_noted_files();
    int fd = open(a, O_RDONLY);
    cr_assert_geq(fd, 0);
    cr_assert_eq(ccb_note_input(fd, a), 0);
    cr_assert_eq(ccb_noted_files(), before + 1);
    cr_assert_eq(ccb_note_input(fd, a), 0);
    close(fd);
    fd = open(link_a, O_RDONLY);
    cr_assert_geq(fd, 0);
    cr_assert_eq(ccb_note_input(fd, link_a), 0);
    close(fd);
    for (int i = 0; i < 3; i++) {
        ccb_trace t;
        char err[256] = "";
        cr_assert_eq(ccb_trace_load(&t, a, err, sizeof err), 0, "%s", err);
        ccb_trace_free(&t);
    }
    cr_assert_eq(ccb_noted_files(), before + 1, "one file, however often read: %zu notes", ccb_noted_files() - before);
    fd = open(b, O_RDONLY);
    cr_assert_geq(fd, 0);
    cr_assert_eq(ccb_note_input(fd, b), 0);
    close(fd);
    cr_assert_eq(ccb_noted_files(), before + 2);
    unsigned failures = ccb_out_failures();
    cr_assert_null(ccb_open_out(dir, "also_a.csv"), "a noted file is not written over");
    cr_assert_eq(ccb_out_failures(), failures + 1);
    unlink(a);
    unlink(link_a);
    unlink(b);
    rmdir(dir);
}

/* A trace read, then deleted (by someone else: ccbench deletes none),
 * gives its inode number to the next file made; that file is not the
 * trace, and an output over it is not refused as "the trace this command
 * reads" where the file system keeps birth times (this one's does, or the
 * test skips). Its note is the new file's from then on: written once,
 * it is guarded as an output, and the list did not grow. */
Test(bench_report, a_deleted_traces_inode_number_carries_no_note) {
    char dir[] = "/tmp/ccb_reuseXXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char a[64], b[64];
    snprintf(a, sizeof a, "%s/a.csv", dir);
    FILE *f = fopen(a, "w");
    cr_assert_not_null(f);
    fputs("# ccalloc trace v3\nseq,op,id,size,stream,domain,name\n0,alloc,1,512,0,0\n1,free,1,512,0,0\n", f);
    fclose(f);
    struct statx sx;
    cr_assert_eq(statx(AT_FDCWD, a, 0, STATX_INO | STATX_BTIME, &sx), 0);
    if (!(sx.stx_mask & STATX_BTIME)) {
        unlink(a);
        rmdir(dir);
        cr_skip_test("the file system under /tmp keeps no birth times");
    }
    ccb_trace t;
    char err[256] = "";
    cr_assert_eq(ccb_trace_load(&t, a, err, sizeof err), 0, "%s", err);
    ccb_trace_free(&t);
    size_t notes = ccb_noted_files();
    /* files made until one is born in a later tick of the file system's
     * clock than the trace (1-10 ms before Linux 6.13: two born in one tick
     * with one number are one file to the guard), all kept, so that none
     * gives its number back */
    int made = 0, reused = -1;
    for (bool later = false; !later; made++) {
        cr_assert_lt(made, 100000, "the file system's clock never moved");
        snprintf(b, sizeof b, "%s/b%d.csv", dir, made);
        int fd = open(b, O_CREAT | O_WRONLY | O_EXCL | O_CLOEXEC, 0644);
        cr_assert_geq(fd, 0);
        struct statx bx;
        cr_assert_eq(statx(fd, "", AT_EMPTY_PATH, STATX_BTIME, &bx), 0);
        close(fd);
        later = bx.stx_btime.tv_sec != sx.stx_btime.tv_sec || bx.stx_btime.tv_nsec != sx.stx_btime.tv_nsec;
    }
    cr_assert_eq(unlink(a), 0);
    /* files made until one gets the deleted one's number (kept meanwhile,
     * so none gives its own back) */
    for (int tries = 0; tries < 256 && reused < 0; tries++, made++) {
        snprintf(b, sizeof b, "%s/b%d.csv", dir, made);
        int fd = open(b, O_CREAT | O_WRONLY | O_EXCL | O_CLOEXEC, 0644);
        cr_assert_geq(fd, 0);
        struct stat st;
        cr_assert_eq(fstat(fd, &st), 0);
        close(fd);
        if (st.st_ino == sx.stx_ino)
            reused = made;
    }
    if (reused >= 0) {
        char name[32];
        snprintf(name, sizeof name, "b%d.csv", reused);
        unsigned failures = ccb_out_failures();
        f = ccb_open_out(dir, name);
        cr_expect_not_null(f, "a new file with a deleted trace's number was refused as that trace");
        if (f)
            ccb_close_out(f, dir, name);
        cr_expect_eq(ccb_out_failures(), failures);
        cr_expect_eq(ccb_noted_files(), notes, "the deleted file's note was not taken over");
        cr_expect_null(ccb_open_out(dir, name), "the file written is guarded as an output");
        cr_expect_eq(ccb_out_failures(), failures + 1);
    }
    for (int i = 0; i < made; i++) {
        snprintf(b, sizeof b, "%s/b%d.csv", dir, i);
        unlink(b);
    }
    rmdir(dir);
    if (reused < 0)
        cr_skip_test("no file of %d made got the deleted one's inode number", made);
}

/* Make statx fail with `err` in this process from now on (a container
 * whose seccomp profile predates it: EPERM, or a kernel without it:
 * ENOSYS); false when the filter could not be installed. */
static bool refuse_statx(int err) {
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_statx, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (unsigned)err),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof code / sizeof code[0], code};
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

/* Where the statx system call is refused (EPERM, EACCES: by a seccomp
 * profile older than it; ENOSYS: glibc then answers from fstatat, without
 * birth times), the guard still holds by st_dev/st_ino: a trace read is
 * not written over (EACCES left it off). */
ParameterizedTestParameters(bench_report, the_guard_holds_without_statx) {
    static int errs[] = {ENOSYS, EPERM, EACCES};
    return cr_make_param_array(int, errs, 3);
}

ParameterizedTest(int *err, bench_report, the_guard_holds_without_statx) {
    if (!refuse_statx(*err))
        cr_skip_test("a seccomp filter could not be installed: %s", strerror(errno));
    struct statx sx; /* the system call's answer (glibc answers ENOSYS with fstatat's, no birth time) */
    cr_assert_neq(syscall(__NR_statx, AT_FDCWD, "/", 0, STATX_INO, &sx), 0, "statx is refused");
    char dir[] = "/tmp/ccb_nostatxXXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char a[64];
    snprintf(a, sizeof a, "%s/a.csv", dir);
    FILE *f = fopen(a, "w");
    cr_assert_not_null(f);
    fputs("# ccalloc trace v3\nseq,op,id,size,stream,domain,name\n0,alloc,1,512,0,0\n1,free,1,512,0,0\n", f);
    fclose(f);
    ccb_trace t;
    char err_text[256] = "";
    cr_assert_eq(ccb_trace_load(&t, a, err_text, sizeof err_text), 0, "%s", err_text);
    ccb_trace_free(&t);
    unsigned failures = ccb_out_failures();
    f = ccb_open_out(dir, "a.csv");
    cr_expect_null(f, "the trace read was written over");
    if (f)
        fclose(f);
    cr_expect_eq(ccb_out_failures(), failures + 1);
    unlink(a);
    rmdir(dir);
}

/* A path that moves between a trace read and a file not made yet (a
 * symlink renamed over it by another thread, flipping as fast as it can)
 * never leads an output over the trace: the guard asks the file the open
 * reached, and empties it only then (a check of the path, then an open
 * that emptied, let the flip in between empty the trace). */
typedef struct flip {
    char dir[64], trace[96];
    _Atomic bool stop;
    unsigned flips;
} flip;

static void *flipper(void *arg) {
    flip *f = arg;
    char tmp[96], out[96], fresh[96];
    snprintf(tmp, sizeof tmp, "%s/link", f->dir);
    snprintf(out, sizeof out, "%s/out.csv", f->dir);
    for (unsigned i = 0; !atomic_load(&f->stop); i++) {
        snprintf(fresh, sizeof fresh, "%s/new%u.csv", f->dir, i / 2); /* made by the open that reaches it */
        unlink(tmp);
        if (symlink(i % 2 ? f->trace : fresh, tmp) == 0 && rename(tmp, out) == 0)
            f->flips++;
    }
    return NULL;
}

Test(bench_report, a_path_that_moves_under_the_guard_never_reaches_a_trace) {
    static flip f;
    snprintf(f.dir, sizeof f.dir, "/tmp/ccb_flipXXXXXX");
    cr_assert_not_null(mkdtemp(f.dir));
    snprintf(f.trace, sizeof f.trace, "%s/trace.csv", f.dir);
    const char *text = "# ccalloc trace v3\nseq,op,id,size,stream,domain,name\n0,alloc,1,512,0,0\n1,free,1,512,0,0\n";
    FILE *t = fopen(f.trace, "w");
    cr_assert_not_null(t);
    fputs(text, t);
    cr_assert_eq(fclose(t), 0);
    ccb_trace tr;
    char err[256] = "";
    cr_assert_eq(ccb_trace_load(&tr, f.trace, err, sizeof err), 0, "%s", err);
    ccb_trace_free(&tr);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, flipper, &f), 0);
    fflush(stderr);
    int err_fd = dup(STDERR_FILENO), null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    cr_assert(err_fd >= 0 && null_fd >= 0 && dup2(null_fd, STDERR_FILENO) == STDERR_FILENO);
    close(null_fd); /* thousands of refusals, each said: not into the test's log */
    unsigned opened = 0, refused = 0;
    struct stat st;
    for (int i = 0; i < 4000 && stat(f.trace, &st) == 0 && (size_t)st.st_size == strlen(text); i++) {
        unsigned failures = ccb_out_failures();
        FILE *o = ccb_open_out(f.dir, "out.csv");
        if (o) {
            opened++;
            ccb_close_out(o, f.dir, "out.csv");
        } else {
            refused += ccb_out_failures() - failures;
        }
    }
    atomic_store(&f.stop, true);
    pthread_join(th, NULL);
    fflush(stderr);
    cr_assert_eq(dup2(err_fd, STDERR_FILENO), STDERR_FILENO);
    close(err_fd);
    cr_assert_eq(stat(f.trace, &st), 0);
    cr_expect_eq((size_t)st.st_size, strlen(text), "the trace was emptied through a path that moved");
    char rm[128];
    snprintf(rm, sizeof rm, "rm -rf '%s'", f.dir);
    cr_assert_eq(system(rm), 0);
    cr_log_info("%u flips, %u outputs opened, %u refused", f.flips, opened, refused);
}

/* An output refused as the CCALLOC_TRACE recording is refused unopened: the
 * recorder holds an fcntl write lock on it (trace.c), and closing any
 * descriptor of the file drops every lock this process holds on it (a
 * refusal that opened and closed the file let another process in). */
Test(bench_report, a_refused_recording_keeps_the_recorders_lock) {
    char dir[] = "/tmp/ccb_lockXXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char rec[64];
    snprintf(rec, sizeof rec, "%s/rec.csv", dir);
    int fd = open(rec, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    cr_assert_geq(fd, 0);
    struct flock lk = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    cr_assert_eq(fcntl(fd, F_SETLK, &lk), 0);
    cr_assert_eq(setenv("CCALLOC_TRACE", rec, 1), 0);
    unsigned failures = ccb_out_failures();
    cr_expect_null(ccb_open_out(dir, "rec.csv"), "the recording was opened as an output");
    cr_expect_eq(ccb_out_failures(), failures + 1);
    unsetenv("CCALLOC_TRACE");
    pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) { /* another process asks who holds the lock */
        int cfd = open(rec, O_RDWR | O_CLOEXEC);
        struct flock q = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        _exit(cfd >= 0 && fcntl(cfd, F_GETLK, &q) == 0 && q.l_type == F_WRLCK && q.l_pid == getppid() ? 0 : 1);
    }
    int status = 0;
    cr_assert_eq(waitpid(child, &status, 0), child);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the recorder's lock was dropped by the refusal");
    close(fd);
    unlink(rec);
    rmdir(dir);
}

/* Outputs that cannot be made are said and counted (ccbench then exits 1):
 * a path too long is refused whole, never cut to another name; a file where
 * a directory should be is not a directory. */
Test(bench_report, outputs_that_cannot_be_made_are_counted_never_cut) {
    unsigned before = ccb_out_failures();
    char dir[5000];
    memset(dir, 'a', sizeof dir - 1);
    dir[0] = '/';
    dir[sizeof dir - 1] = '\0';
    cr_assert_eq(ccb_mkdir_p(dir), -1);
    cr_assert_null(ccb_open_out(dir, "results.md"));
    cr_assert_eq(ccb_out_failures(), before + 2);
    char tmpl[] = "/tmp/ccb_outXXXXXX";
    int fd = mkstemp(tmpl);
    cr_assert_geq(fd, 0);
    close(fd);
    cr_assert_eq(ccb_mkdir_p(tmpl), -1, "a file is not a directory");
    cr_assert_null(ccb_open_out(tmpl, "micro.md"));
    cr_assert_eq(ccb_out_failures(), before + 4);
    unlink(tmpl);
    char okdir[] = "/tmp/ccb_okXXXXXX";
    cr_assert_not_null(mkdtemp(okdir));
    cr_assert_eq(ccb_mkdir_p(okdir), 0);
    FILE *f = ccb_open_out(okdir, "x.md");
    cr_assert_not_null(f);
    fclose(f);
    cr_assert_eq(ccb_out_failures(), before + 4);
    char path[64];
    snprintf(path, sizeof path, "%s/x.md", okdir);
    unlink(path);
    rmdir(okdir);
}

/* docs/benchmarks.md, "Reproducing parts": in file names `/`, `=`, `,`,
 * `:`, `"`, `#`, spaces and control bytes become `_`, and nothing else
 * does: a bidi character (U+202E) and a byte that is not UTF-8 stay. */
Test(bench_report, file_names_replace_exactly_the_documented_bytes) {
    char out[64];
    ccb_file_name("a/b=c,d:e\"f#g h\x01i\x1bj\x7fk\nl", out, sizeof out);
    cr_assert_str_eq(out, "a_b_c_d_e_f_g_h_i_j_k_l");
    ccb_file_name("bad\xff\xe2\x80\xaete[x]-2.csv~", out, sizeof out);
    cr_assert_str_eq(out, "bad\xff\xe2\x80\xaete[x]-2.csv~");
}

/* The cells of one markdown line: its '|' that are not escaped ("\|" is a
 * '|' inside a cell, GitHub's rule), less one. */
static int md_cells(const char *line, size_t len) {
    int bars = 0;
    for (size_t i = 0; i < len; i++)
        bars += line[i] == '|' && (i == 0 || line[i - 1] != '\\');
    return bars - 1;
}

/* Every table of text: each row has its header's number of cells. */
static void assert_tables_keep_their_columns(const char *md) {
    int want = -1;
    for (const char *line = md; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (len && line[0] == '|') {
            int got = md_cells(line, len);
            if (want < 0)
                want = got; /* the header */
            cr_assert_eq(got, want, "a row of %d cells under a header of %d: %.*s\n%s", got, want, (int)len, line, md);
        } else {
            want = -1; /* a table ends at its first line that is not a row */
        }
        line += len + (end != NULL);
    }
}

/* A text from outside the program in a table cell: a trace's file name, a
 * mark's or a domain's name (the trace format allows '|' in both), a
 * strategy, a reason. A bare '|' in it ended the cell: "| 1 | load|a | 0 B
 * | 0 B |" put "a" under "live requested" and every figure after it one
 * column right, under another header. Each is written "\|", in every
 * markdown table, and the rows keep their header's columns. */
Test(bench_report, a_pipe_in_a_name_stays_in_its_cell) {
    static const char text[] = "seq,op,id,size,stream,domain,name\n"
                               "0,domain,0,0,0,1,d|b\n"
                               "1,mark,0,0,0,0,load|a\n"
                               "2,alloc,1,4096,0,1\n"
                               "3,free,1,4096,0,1\n"
                               "4,domain_release,0,0,0,1\n";
    ccb_trace t;
    ccb_trace_init(&t, "t|x");
    FILE *in = fmemopen((void *)text, sizeof text - 1, "r");
    char err[256] = "";
    cr_assert_eq(ccb_trace_read(&t, in, err, sizeof err), 0, "%s", err);
    fclose(in);
    ccb_result r[2];
    cr_assert_eq(ccb_replay(&t, "ccalloc-growth", &tiny, &r[0]), 0, "%s", r[0].why);
    snprintf(r[0].strategy, sizeof r[0].strategy, "s|y");
    memset(&r[1], 0, sizeof r[1]);
    snprintf(r[1].trace, sizeof r[1].trace, "t|x");
    snprintf(r[1].strategy, sizeof r[1].strategy, "f|g");
    snprintf(r[1].why, sizeof r[1].why, "a|b");
    r[1].failed = 1;
    ccb_micro_row m[2];
    memset(m, 0, sizeof m);
    snprintf(m[0].strategy, sizeof m[0].strategy, "s|y");
    m[0].live = m[0].pairs = 10;
    m[0].median_ns = m[0].p99_ns = m[0].mean_ns = 1;
    snprintf(m[1].strategy, sizeof m[1].strategy, "s|z");
    snprintf(m[1].why, sizeof m[1].why, "w|x");
    m[1].skipped = 1;
    m[0].streams = m[1].streams = 3;

    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ccb_write_results_md(f, r, 2);
    fputc('\n', f);
    ccb_write_iterations_md(f, r, 2);
    fputc('\n', f);
    ccb_write_checkpoints_md(f, &t, r, 2);
    fputc('\n', f);
    ccb_write_domains_md(f, &t, r, 2);
    fputc('\n', f);
    cr_assert_eq(ccb_write_traces_md(f, &t, 1), 0);
    fputc('\n', f);
    ccb_micro_write_md(f, m, 2, 20);
    fclose(f);
    assert_tables_keep_their_columns(buf);
    cr_assert_not_null(strstr(buf, "\n| 1 | load\\|a | 0 B | 0 B |\n"), "%s", buf);
    cr_assert_not_null(strstr(buf, "\n| 4 | **release domain d\\|b** | 0 B | 0 B (−2.00 MiB) |\n"), "%s", buf);
    cr_assert_not_null(strstr(buf, "\n| d\\|b | 1 | 4.00 KiB | 1 | 2.00 MiB |\n"), "%s", buf);
    cr_assert_not_null(strstr(buf, "\n| t\\|x | f\\|g | failed: a\\|b |"), "%s", buf);
    cr_assert_not_null(strstr(buf, "| event | checkpoint | live requested | s\\|y |\n"), "%s", buf);
    cr_assert_not_null(strstr(buf, "\n| s\\|z | all | | | skipped: w\\|x | | | 3 |\n"), "%s", buf);
    free(buf);
    ccb_result_free(&r[0]);
    ccb_trace_free(&t);
}

/* Traces of one name (a/t.csv and b/t.csv, the same trace twice) or of one
 * file name ('a b' and 'a_b' are both a_b in file names) get distinct names,
 * so every per-trace output of a replay (timeline/T__S.csv, timeline_T.png,
 * README sections) is its own; a name at its longest keeps its suffix. */
Test(bench_report, traces_of_one_name_get_distinct_names_and_files) {
    const char *names[] = {"t", "t", "t", "a b", "a_b", "t-2"};
    enum { N = sizeof names / sizeof *names };
    ccb_trace t[N + 1];
    for (size_t i = 0; i < N; i++) {
        ccb_trace_init(&t[i], names[i]);
        ccb_trace_alloc(&t[i], 4096, 0);
        ccb_trace_release(&t[i], 0);
        cr_assert_eq(ccb_trace_analyze(&t[i], NULL, 0), 0);
    }
    char longname[64];
    memset(longname, 'x', 63);
    longname[63] = '\0';
    ccb_trace_init(&t[N], longname);
    ccb_trace_analyze(&t[N], NULL, 0);
    ccb_name_traces(t, N, NULL);
    const char *want[] = {"t", "t-2", "t-3", "a b", "a_b-2", "t-2-2"};
    for (size_t i = 0; i < N; i++)
        cr_assert_str_eq(t[i].name, want[i], "trace %zu", i);
    ccb_trace two[2] = {t[N], t[N]};
    ccb_name_traces(two, 2, NULL);
    cr_assert_eq(strlen(two[1].name), 63);
    cr_assert_str_eq(two[1].name + 61, "-2", "%s", two[1].name);
    ccb_result r[N];
    for (size_t i = 0; i < N; i++)
        cr_assert_eq(ccb_replay(&t[i], "malloc", &tiny, &r[i]), 0, "%s", r[i].why);
    char dir[] = "/tmp/ccb_namesXXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    ccb_outdir d = {dir, NULL, 1};
    ccb_write_replay_files(&d, t, N, r, 1);
    for (size_t i = 0; i < N; i++) {
        char safe[64], path[256];
        ccb_file_name(want[i], safe, sizeof safe);
        snprintf(path, sizeof path, "%s/timeline/%s__malloc.csv", dir, safe);
        cr_assert_eq(access(path, F_OK), 0, "%s", path);
        unlink(path);
        ccb_result_free(&r[i]);
        ccb_trace_free(&t[i]);
    }
    ccb_trace_free(&t[N]);
    const char *files[] = {"results.md", "results.csv", "traces.md", "checkpoints.csv", "ratios.dat"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char path[256];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    char path[256];
    snprintf(path, sizeof path, "%s/timeline", dir);
    cr_assert_eq(rmdir(path), 0, "only the timelines named above were written");
    cr_assert_eq(rmdir(dir), 0);
}

/* A file that opens but cannot be written whole (a full device: the error
 * shows only when the buffer is flushed) is said and counted at its close. */
Test(bench_report, a_file_written_short_is_counted_at_its_close) {
    unsigned before = ccb_out_failures();
    FILE *f = ccb_open_out("/dev", "full");
    cr_assert_not_null(f, "/dev/full opens for writing");
    fprintf(f, "| a table |\n");
    cr_assert_eq(ccb_close_out(f, "/dev", "full"), -1, "the lost table is an error");
    cr_assert_eq(ccb_out_failures(), before + 1);
    cr_assert_eq(ccb_close_out(NULL, "/dev", "none"), -1, "a file that never opened: counted at its open");
    cr_assert_eq(ccb_out_failures(), before + 1);
    char okdir[] = "/tmp/ccb_okXXXXXX";
    cr_assert_not_null(mkdtemp(okdir));
    cr_assert_not_null((f = ccb_open_out(okdir, "y.md")));
    fprintf(f, "fine\n");
    cr_assert_eq(ccb_close_out(f, okdir, "y.md"), 0);
    cr_assert_eq(ccb_out_failures(), before + 1);
    char path[64];
    snprintf(path, sizeof path, "%s/y.md", okdir);
    unlink(path);
    rmdir(okdir);
}

/* ---- driver_vm.c: the vm ops timed (ccbench driver), on the simulated device ---- */

/* Per-granule latencies the simulated device waits over pages (the backing
 * `ccbench driver` measures this table on): every map of n granules must
 * time at least n x the map latency, every unmap n x the unmap one (a
 * busy-wait never ends early), the rows say what was measured, and the
 * upstream holds nothing after. */
Test(bench_driver, vm_rows_time_each_call_and_leave_nothing) {
    const size_t G = 64 << 10;
    cca_host_options ho = {.capacity = 64 * G,
                           .vm_granularity = G,
                           .vm_map_granule_latency_ns = 200000,
                           .vm_unmap_granule_latency_ns = 300000,
                           .vm_backing = CCA_VM_PAGES};
    cca_upstream *u = NULL;
    cr_assert_eq(cca_upstream_host_create_with(&ho, &u), CCA_OK, "%s", cca_last_error());
    const size_t granules[] = {1, 4, 16};
    ccb_driver_vm_row rows[3];
    char why[256] = "";
    cr_assert_eq(ccb_driver_vm_measure(u, granules, 3, 5, rows, why, sizeof why), 0, "%s", why);
    for (size_t i = 0; i < 3; i++) {
        cr_assert_eq(rows[i].granules, granules[i]);
        cr_assert_eq(rows[i].bytes, granules[i] * G);
        cr_assert_eq(rows[i].reps, 5);
        cr_assert_geq(rows[i].map_median_us, 200.0 * (double)granules[i], "map of %zu: %.1f us", granules[i],
                      rows[i].map_median_us);
        cr_assert_geq(rows[i].unmap_median_us, 300.0 * (double)granules[i], "unmap of %zu: %.1f us", granules[i],
                      rows[i].unmap_median_us);
        cr_assert_geq(rows[i].map_p99_us, rows[i].map_median_us);
        cr_assert_geq(rows[i].unmap_p99_us, rows[i].unmap_median_us);
    }
    cca_upstream_stats st = tu_upstream_stats(u);
    cr_assert_eq(st.vm_reserved_bytes, 0);
    cr_assert_eq(st.vm_mapped_bytes, 0);
    cr_assert_eq(st.vm_map_calls, 3 * 6, "one untimed pair and 5 timed per size");
    cr_assert_eq(st.vm_unmap_calls, 3 * 6);
    /* the table: per-granule medians, and a skipped section says why */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ccb_write_driver_vm_md(f, "host-simulated", rows, 3, "");
    ccb_write_driver_vm_md(f, "CUDA (GPU 0)", NULL, 0, "no GPU here");
    fclose(f);
    cr_assert(strstr(buf, "| 64.00 KiB | 1.00 MiB | 16 |"), "the page, then the size: %s", buf);
    cr_assert(strstr(buf, "host-simulated upstream's vm_map"), "%s", buf);
    cr_assert(strstr(buf, "skipped: no GPU here\n"), "%s", buf);
    free(buf);
    cca_upstream_destroy(u);
}

/* Refusals: no vm ops (skipped, with the reason); a size the device cannot
 * hold (its row says so, naming the call; the other rows are measured, the
 * range released, nothing mapped); a granule count 0 or that overflows, and
 * no repetitions (errors before any call). */
Test(bench_driver, vm_measure_refuses_what_it_cannot_time) {
    tu_upstream t; /* the test double: no vm ops */
    cca_upstream *plain = tu_upstream_create(&t, 64 << 20, false);
    const size_t one = 1;
    ccb_driver_vm_row row;
    char why[256] = "";
    cr_assert_eq(ccb_driver_vm_measure(plain, &one, 1, 3, &row, why, sizeof why), 1);
    cr_assert(strstr(why, "no virtual-memory ops"), "%s", why);
    cca_upstream_destroy(plain);

    const size_t G = 64 << 10;
    cca_host_options ho = {.capacity = 8 * G, .vm_granularity = G};
    cca_upstream *u = NULL;
    cr_assert_eq(cca_upstream_host_create_with(&ho, &u), CCA_OK, "%s", cca_last_error());
    const size_t sizes[] = {2, 9, 4}; /* 9 granules: more than the device */
    ccb_driver_vm_row rows[3];
    cr_assert_eq(ccb_driver_vm_measure(u, sizes, 3, 3, rows, why, sizeof why), 0, "%s", why);
    cr_assert(!rows[0].unfit && rows[0].granules == 2 && rows[0].reps == 3);
    cr_assert(rows[1].unfit, "9 granules do not fit in 8");
    cr_assert_eq(rows[1].granules, 9);
    cr_assert_eq(rows[1].bytes, 9 * G);
    cr_assert_eq(rows[1].reps, 0, "nothing timed");
    cr_assert(strstr(rows[1].why, "vm_map of 576.00 KiB: "), "%s", rows[1].why);
    cr_assert(!rows[2].unfit && rows[2].granules == 4 && rows[2].reps == 3, "the sizes after it are measured");
    cca_upstream_stats st = tu_upstream_stats(u);
    cr_assert_eq(st.vm_reserved_bytes, 0);
    cr_assert_eq(st.vm_mapped_bytes, 0);
    cr_assert_eq(st.vm_failed_maps, 1, "one refused map: the size is not tried again");
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ccb_write_driver_vm_md(f, "host-simulated", rows, 3, "");
    ccb_write_driver_vm_csv(f, rows, 3);
    fclose(f);
    cr_assert(strstr(buf, "| 64.00 KiB | 576.00 KiB | 9 | does not fit: vm_map of 576.00 KiB: "), "%s", buf);
    cr_assert(strstr(buf, "granule,bytes,granules,reps,map_median_us,map_p99_us,unmap_median_us,unmap_p99_us,status\n"),
              "%s", buf);
    cr_assert(strstr(buf, "\n65536,589824,9,0,,,,,unfit\n"), "%s", buf);
    cr_assert(strstr(buf, ",ok\n"), "%s", buf);
    free(buf);
    const size_t bad[] = {0, SIZE_MAX / 2};
    for (size_t i = 0; i < 2; i++) {
        uint64_t maps = tu_upstream_stats(u).vm_map_calls;
        cr_assert_eq(ccb_driver_vm_measure(u, &bad[i], 1, 3, &row, why, sizeof why), -1, "%zu granules", bad[i]);
        cr_assert(strstr(why, "not a size"), "%s", why);
        cr_assert_eq(tu_upstream_stats(u).vm_map_calls, maps);
    }
    cr_assert_eq(ccb_driver_vm_measure(u, &one, 1, 0, &row, why, sizeof why), -1);
    cca_upstream_destroy(u);
}

/* Sizes become granule counts, rounded down, a size below the granule one
 * granule; sizes of one count are one row; at most CCB_DRIVER_MAX_SIZES. */
Test(bench_driver, sizes_of_one_granule_count_are_one_row) {
    const size_t G = 64 << 10;
    cca_host_options ho = {.capacity = 64 * G, .vm_granularity = G};
    cca_upstream *u = NULL;
    cr_assert_eq(cca_upstream_host_create_with(&ho, &u), CCA_OK, "%s", cca_last_error());
    const size_t sizes[] = {G / 4, G / 2, G, 2 * G + G / 2, 3 * G};
    size_t granules[5] = {0}, g = 0;
    cr_assert_eq(ccb_driver_vm_granules(u, sizes, 5, granules, &g), 3);
    cr_assert_eq(g, G);
    cr_assert(granules[0] == 1 && granules[1] == 2 && granules[2] == 3, "%zu %zu %zu", granules[0], granules[1],
              granules[2]);
    cca_upstream_destroy(u);
    /* whole maps take 1 to CCB_DRIVER_MAX_SIZES sizes, the most included */
    ho.vm_backing = CCA_VM_WHOLE_MAPS;
    cr_assert_eq(cca_upstream_host_create_with(&ho, &u), CCA_OK, "%s", cca_last_error());
    size_t many[CCB_DRIVER_MAX_SIZES + 1], n = 0;
    for (size_t i = 0; i <= CCB_DRIVER_MAX_SIZES; i++)
        many[i] = G;
    ccb_driver_vm_row rows[CCB_DRIVER_MAX_SIZES];
    char why[256] = "";
    cr_assert_eq(ccb_driver_vm_whole_maps(u, many, CCB_DRIVER_MAX_SIZES, 1, rows, &n, why, sizeof why), 0, "%s", why);
    cr_assert_eq(n, 1, "one size, one row");
    cr_assert_eq(ccb_driver_vm_whole_maps(u, many, CCB_DRIVER_MAX_SIZES + 1, 1, rows, &n, why, sizeof why), -1);
    cr_assert(strstr(why, "sizes: 1 to"), "%s", why);
    cca_upstream_destroy(u);
}

/* A vm_map refused in the timed pairs (the size fits: its untimed map
 * passed) fails the measure naming the call, and the range reserved for it
 * is released all the same: the device holds nothing after. */
Test(bench_driver, a_failed_timed_map_releases_the_range) {
    cca_upstream *inner = tu_vm_device_backed(64 * MiB, 0, CCA_VM_PAGES);
    tu_faulty f;
    cca_upstream *u = tu_faulty_create(&f, inner, "vx", false);
    f.fail_at[TU_FAULT_MAP] = 2; /* the first timed map */
    const size_t one = 1;
    ccb_driver_vm_row row;
    char why[256] = "";
    cr_assert_eq(ccb_driver_vm_measure(u, &one, 1, 3, &row, why, sizeof why), -1);
    cr_assert(strstr(why, "vm_map: ") == why && strstr(why, "vx: injected"), "%s", why);
    cr_assert_eq(f.calls[TU_FAULT_RELEASE], 1, "the range released");
    cca_upstream_stats st = tu_upstream_stats(inner);
    cr_assert_eq(st.vm_mapped_bytes, 0);
    cr_assert_eq(st.vm_reserved_bytes, 0);
    tu_faulty_destroy_clean(u, inner);
}

/* Whole maps on the simulated device, whose per-granule latencies a whole
 * map pays once (cca_host_options.vm_backing): a map of 16 granules waits at
 * least one map latency, where the same map over pages waits 16 (lower
 * bounds only: a busy-wait never ends early). Sizes in bytes become granules
 * (one row per size, a size below the granule one granule); a size the device
 * cannot hold is a row that says so; every size is one vm_map per timed
 * pair, one physical allocation. */
Test(bench_driver, whole_map_charged_once_where_pages_are_charged_per_granule) {
    const size_t G = 64 << 10;
    const uint64_t MAP = 2000000, UNMAP = 3000000; /* 2 and 3 ms per granule (whole maps: per map) */
    cca_host_options ho = {.capacity = 32 * G,
                           .vm_granularity = G,
                           .vm_map_granule_latency_ns = MAP,
                           .vm_unmap_granule_latency_ns = UNMAP,
                           .vm_backing = CCA_VM_WHOLE_MAPS};
    cca_upstream *whole = NULL, *pages = NULL;
    cr_assert_eq(cca_upstream_host_create_with(&ho, &whole), CCA_OK, "%s", cca_last_error());
    ho.vm_backing = CCA_VM_PAGES;
    cr_assert_eq(cca_upstream_host_create_with(&ho, &pages), CCA_OK, "%s", cca_last_error());
    const size_t sizes[] = {G / 2, 16 * G, 64 * G}; /* half a granule: one granule; 64: more than the device */
    ccb_driver_vm_row rows[3];
    size_t n = 0;
    char why[256] = "";
    cr_assert_eq(ccb_driver_vm_whole_maps(whole, sizes, 3, 3, rows, &n, why, sizeof why), 0, "%s", why);
    cr_assert_eq(n, 3);
    cr_assert(!rows[0].unfit && rows[0].granules == 1 && rows[0].bytes == G && rows[0].reps == 3);
    cr_assert(!rows[1].unfit && rows[1].granules == 16 && rows[1].bytes == 16 * G && rows[1].reps == 3);
    cr_assert(rows[2].unfit && rows[2].granules == 64 && rows[2].bytes == 64 * G, "%s", rows[2].why);
    for (size_t i = 0; i < 2; i++) {
        cr_assert_geq(rows[i].map_median_us, MAP / 1e3, "charged once: %.1f us", rows[i].map_median_us);
        cr_assert_geq(rows[i].unmap_median_us, UNMAP / 1e3, "charged once: %.1f us", rows[i].unmap_median_us);
    }
    cca_upstream_stats st = tu_upstream_stats(whole);
    cr_assert_eq(st.vm_map_calls, 2 * 4, "one map per pair, untimed pair included: one physical allocation");
    cr_assert_eq(st.vm_unmap_calls, 2 * 4);
    cr_assert_eq(st.vm_failed_maps, 1);
    cr_assert_eq(st.vm_mapped_bytes, 0);
    cr_assert_eq(st.vm_reserved_bytes, 0);
    /* the same 16 granules over pages: each granule charged */
    const size_t sixteen = 16;
    ccb_driver_vm_row prow;
    cr_assert_eq(ccb_driver_vm_measure(pages, &sixteen, 1, 3, &prow, why, sizeof why), 0, "%s", why);
    cr_assert_geq(prow.map_median_us, 16 * MAP / 1e3, "charged per granule: %.1f us", prow.map_median_us);
    cr_assert_geq(prow.unmap_median_us, 16 * UNMAP / 1e3, "charged per granule: %.1f us", prow.unmap_median_us);
    /* a pages upstream is not measured as whole maps */
    n = 7;
    cr_assert_eq(ccb_driver_vm_whole_maps(pages, sizes, 3, 3, rows, &n, why, sizeof why), -1);
    cr_assert(strstr(why, "pages (CCA_VM_PAGES), not whole maps"), "%s", why);
    cr_assert_eq(n, 0);
    cr_assert_eq(tu_upstream_stats(pages).vm_map_calls, 4, "nothing mapped");

    /* the table: cudaMalloc / cudaFree next to the sizes it has figures for */
    ccb_driver_row mrows[2] = {{.size = 16 * G, .reps = 3, .alloc_median_us = 41.25, .free_median_us = 30.5},
                               {.size = 2 * G, .reps = 3, .alloc_median_us = 1, .free_median_us = 1}};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ccb_write_driver_whole_maps_md(f, "host-simulated", rows, 3, mrows, 2, "");
    ccb_write_driver_whole_maps_md(f, "CUDA (GPU 0)", NULL, 0, NULL, 0, "no GPU here");
    ccb_write_driver_whole_maps_csv(f, rows, 3, mrows, 2);
    fclose(f);
    const char *want[] = {
        "\n## Whole maps: one physical allocation per map\n\n",
        "The host-simulated upstream made with vm_backing CCA_VM_WHOLE_MAPS",
        "| size | granules | vm_map median µs | p99 | vm_unmap median µs | p99 | cudaMalloc median µs | "
        "cudaFree median µs |\n",
        "\n| 64.00 KiB | 1 | ",
        " | — | — |\n| 1.00 MiB | 16 | ", /* no cudaMalloc figure at 64 KiB */
        " | 41.2 | 30.5 |\n",             /* the 1 MiB row has cudaMalloc's */
        "\n| 4.00 MiB | 64 | does not fit: vm_map of 4.00 MiB: ",
        "skipped: no GPU here\n",
        "bytes,granules,reps,map_median_us,map_p99_us,unmap_median_us,unmap_p99_us,cuda_malloc_median_us,"
        "cuda_free_median_us,status\n",
        ",41.250,30.500,ok\n",
        "\n4194304,64,0,,,,,,,unfit\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_assert(strstr(buf, want[i]), "no \"%s\" in:\n%s", want[i], buf);
    fputs(buf, stderr); /* the table, for whoever reads the log */
    free(buf);
    cca_upstream_destroy(whole);
    cca_upstream_destroy(pages);
}

/* `ccbench driver --vm-backing`: which virtual-memory tables are measured
 * (pages: the page tables; whole-maps: the whole-maps table; neither: both). */
Test(bench_driver, vm_backing_selects_the_tables) {
    const char *cases[][3] = {{"", NULL, NULL}, {"--vm-backing", "pages", NULL}, {"--vm-backing", "whole-maps", NULL}};
    const int want[] = {CCB_DRIVER_PAGES | CCB_DRIVER_WHOLE_MAPS, CCB_DRIVER_PAGES, CCB_DRIVER_WHOLE_MAPS};
    for (int i = 0; i < 3; i++) {
        char *argv[] = {"ccbench", "driver", (char *)cases[i][0], (char *)cases[i][1], NULL};
        int argc = cases[i][1] ? 4 : 2;
        ccb_options o;
        ccb_options_init(&o, "ccbench driver");
        cr_assert_eq(ccb_options_parse(&o, argc, argv), 0);
        cr_assert_eq(ccb_driver_tables(&o), want[i], "case %d", i);
    }
}

/* One private writable mapping larger than the machine's memory and swap,
 * never touched: what the malloc floor's micro cells at 100,000 live blocks
 * leave in ccbench's heap (166 GB of it on a 24 GB machine). Built from
 * 1 GiB steps made writable one after the other, which the kernel charges
 * one by one and merges into one mapping. NULL (and *len 0) where the
 * kernel is not in its default overcommit mode or refuses a step. */
static void *larger_than_memory(size_t *len) {
    *len = 0;
    FILE *f = fopen("/proc/sys/vm/overcommit_memory", "r");
    bool guess = f && fgetc(f) == '0'; /* 0: the heuristic, the default */
    if (f)
        fclose(f);
    struct sysinfo si;
    if (!guess || sysinfo(&si) != 0)
        return NULL;
    const size_t step = (size_t)1 << 30;
    size_t want = ((size_t)si.totalram + si.totalswap) * si.mem_unit / step * step + 2 * step;
    char *p = mmap(NULL, want, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    for (size_t at = 0; at < want; at += step)
        if (mprotect(p + at, step, PROT_READ | PROT_WRITE) != 0) {
            munmap(p, want);
            return NULL;
        }
    *len = want;
    return p;
}

/* The children ccbench starts, gnuplot for every plot and ccrun for the
 * model switch, start from a process whose heap is larger than the
 * machine's memory. fork() charges such a mapping whole to the child and
 * is refused (ENOMEM) under the default overcommit heuristic: `ccbench
 * --all` after its micro cells drew no plot and ran no switch on a 24 GB
 * machine ("gnuplot failed", "in-process ccrun could not be run: Cannot
 * allocate memory", exit 1). */
Test(bench_report, children_start_from_a_process_larger_than_memory, .timeout = 60) {
    size_t len;
    void *big = larger_than_memory(&len);
    if (!big)
        cr_skip_test("the kernel is not in its default overcommit mode, or refused the mapping");
    /* ccrun's way: ccai_run_capture, its output kept, one variable unset */
    setenv("CCB_TEST_UNSET", "seen", 1);
    char *argv[] = {"/bin/sh", "-c", "echo \"[$CCB_TEST_UNSET]\" ok", NULL};
    char *out = NULL;
    double wall;
    int signo = 0, status = 0;
    int rc = ccai_run_capture(argv, "CCB_TEST_UNSET", &out, &wall, &signo, &status);
    cr_expect_eq(rc, 0, "ccai_run_capture: %d (%s)", rc, strerror(errno));
    cr_expect_str_eq(out ? out : "(none)", "[] ok\n");
    free(out);
    /* gnuplot's way: ccb_gnuplot, in the directory it is given */
    char dir[] = "/tmp/ccb_spawn_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char script[sizeof dir + 16];
    snprintf(script, sizeof script, "%s/print.gp", dir);
    FILE *f = fopen(script, "w");
    cr_assert_not_null(f);
    fputs("set print \"printed.txt\"\nprint ARG1\n", f);
    fclose(f);
    const char *args[] = {"hello"};
    int g = ccb_gnuplot(dir, "print.gp", dir, args, 1);
    munmap(big, len);
    char printed[sizeof dir + 16];
    snprintf(printed, sizeof printed, "%s/printed.txt", dir);
    if (g == 1)
        cr_log_warn("gnuplot is not installed: ccb_gnuplot not checked");
    else {
        cr_expect_eq(g, 0, "ccb_gnuplot: %d", g);
        if (g == 0) {
            char *text = tu_read_text(printed, NULL);
            cr_expect_str_eq(text, "hello\n");
            free(text);
        }
    }
    remove(printed);
    remove(script);
    rmdir(dir);
}
