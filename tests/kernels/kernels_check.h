/*
 * kernels_check.h — what test_kernels_host.c and test_kernels_cuda.c share:
 * a seeded random generator (fresh seed per test, printed, or CCK_SEED from
 * the environment to replay one), and the comparisons against the double
 * references with their stated tolerances.
 *
 *   softmax:  |y - ref| <= (1e-5 + 4·sqrt(cols)·2^-24)·|ref| + 1e-37
 *             (float exp and a float sum of cols terms; 1e-37 covers
 *             results in the subnormal range)
 *   dense:    |y - ref| <= rtol·(Σ|x·w| + |b|)·1.2 + 1e-30
 *             (rtol 1e-5 for FP32, 4e-3 for TF32; 1.2 bounds how much the
 *             activation can stretch an error, GELU's slope is <= 1.13)
 *   NaN:      ref NaN <=> y NaN; a NaN where the reference has a number
 *             never passes (outputs are poisoned with NaN before GPU runs).
 */
#ifndef KERNELS_CHECK_H
#define KERNELS_CHECK_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "ccai_rng.h"
#include "cck.h"

typedef struct rng {
    uint64_t s;
} rng;

/* A fresh seed (time, pid, a counter) unless CCK_SEED is set; printed so a
 * failure can be replayed with CCK_SEED=<seed>. */
static inline rng rng_fresh(const char *test) {
    static uint64_t counter;
    const char *env = getenv("CCK_SEED");
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t seed = env ? strtoull(env, NULL, 0)
                        : ((uint64_t)ts.tv_nsec * CCAI_SPLITMIX64_GAMMA) ^ ((uint64_t)getpid() << 32) ^
                              (uint64_t)ts.tv_sec ^ ++counter;
    fprintf(stderr, "[%s] seed=%llu (replay: CCK_SEED=%llu)\n", test, (unsigned long long)seed,
            (unsigned long long)seed);
    return (rng){seed};
}

/* the splitmix64 stream from the seed (common/ccai_rng.h) */
static inline uint64_t rng_next(rng *r) {
    return ccai_splitmix64_next(&r->s);
}

/* uniform in [-scale, scale) */
static inline float rng_uniform(rng *r, float scale) {
    return (float)((ccai_unit_double(rng_next(r)) * 2.0 - 1.0) * scale);
}

static inline size_t rng_below(rng *r, size_t n) {
    return (size_t)(rng_next(r) % n);
}

static inline void fill_uniform(rng *r, float *a, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) {
        a[i] = rng_uniform(r, scale);
    }
}

static inline void *xmalloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    cr_assert_not_null(p, "malloc(%zu)", bytes);
    return p;
}

/* Compare y to ref element by element under `tol(ref, i)`; every element is
 * checked. Returns the largest relative error seen (|y-ref|/scale over
 * results of magnitude >= 1e-30) and fails the test on the first element out of tolerance. */
static inline double check_close(const char *what, const float *y, const double *ref, const double *scale, size_t n,
                                 double rtol, double atol) {
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double r = ref[i], v = y[i];
        if (isnan(r) || isnan(v)) {
            cr_assert(isnan(r) && isnan(v), "%s: element %zu is %g, reference %g", what, i, v, r);
            continue;
        }
        double s = scale ? scale[i] : fabs(r);
        double err = fabs(v - r);
        cr_assert(err <= rtol * s + atol, "%s: element %zu is %.9g, reference %.9g (error %.3g > %.3g)", what, i, v, r,
                  err, rtol * s + atol);
        if (s >= 1e-30 && err / s > worst) { /* relative error of normal-range results */
            worst = err / s;
        }
    }
    return worst;
}

/* Row lengths at and past every vector width and tiling boundary: 4 SSE and
 * 8 AVX2 lanes on the host, the GPU rows' 16-byte split, warp (32) and block
 * sizes. Use as `static const size_t cols[] = KERNELS_BOUNDARY_COLS;`. */
#define KERNELS_BOUNDARY_COLS                                                                                          \
    {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 255, 256, 257, 4095, 4096, 4097}

/* Values that break a naive softmax or activation, for the sweeps. */
#define KERNELS_SPECIAL_VALUES {NAN, INFINITY, -INFINITY, FLT_MAX, -FLT_MAX, 1e38f, -1e38f, 1e-45f, -0.0f}

static inline double softmax_rtol(size_t cols) {
    return 1e-5 + 4.0 * sqrt((double)cols) * 0x1.0p-24;
}

static inline double check_softmax(const char *what, const float *y, const float *x, size_t rows, size_t cols) {
    double *ref = xmalloc(rows * cols * sizeof *ref);
    cck_softmax_reference(x, ref, rows, cols);
    double worst = check_close(what, y, ref, NULL, rows * cols, softmax_rtol(cols), 1e-37);
    free(ref);
    return worst;
}

/* Dense: the error scale of each output is Σ|x·w| + |b|, which is the
 * reference layer run on absolute values with no activation. */
static inline double check_dense(const char *what, const float *y, const float *x, const float *w, const float *b,
                                 size_t batch, size_t in, size_t out, cck_activation act, double rtol) {
    double *ref = xmalloc(batch * out * sizeof *ref);
    double *scale = xmalloc(batch * out * sizeof *scale);
    float *ax = xmalloc(batch * in * sizeof *ax), *aw = xmalloc(out * in * sizeof *aw);
    float *ab = b ? xmalloc(out * sizeof *ab) : NULL;
    for (size_t i = 0; i < batch * in; i++)
        ax[i] = fabsf(x[i]);
    for (size_t i = 0; i < out * in; i++)
        aw[i] = fabsf(w[i]);
    for (size_t i = 0; b && i < out; i++)
        ab[i] = fabsf(b[i]);
    cck_dense_reference(x, w, b, ref, batch, in, out, act);
    cck_dense_reference(ax, aw, ab, scale, batch, in, out, CCK_ACT_NONE);
    double worst = check_close(what, y, ref, scale, batch * out, rtol * 1.2, 1e-30);
    free(ref), free(scale), free(ax), free(aw), free(ab);
    return worst;
}

/* GELU over its whole range: a grid from -30 to 30 (step 0.01), where the
 * exp argument -2|u| covers [-87, 0] and beyond, then six special inputs.
 * gelu_grid_check compares y = gelu(x) with the double reference to `ulps`
 * float ulps times GELU's condition number, which for v < 0 is about
 * 1 + 2|u| (the float rounding of u is amplified by exp(-2|u|)), and checks
 * the limits exactly: huge inputs give v (positive) and -0 (negative), +inf
 * gives +inf, -inf and NaN give NaN, -0 gives 0. Returns the largest
 * relative error divided by the condition number. */
enum { GELU_GRID_POINTS = 6001, GELU_GRID_LEN = GELU_GRID_POINTS + 6 };

static inline void gelu_grid_fill(float *x) {
    for (int i = 0; i < GELU_GRID_POINTS; i++)
        x[i] = -30.0f + 0.01f * (float)i;
    const float special[6] = {1e20f, -1e20f, INFINITY, -INFINITY, NAN, -0.0f};
    for (int i = 0; i < 6; i++)
        x[GELU_GRID_POINTS + i] = special[i];
}

static inline double gelu_grid_check(const char *what, const float *x, const float *y, double ulps) {
    enum { N = GELU_GRID_POINTS };
    const float w = 1.0f;
    double *ref = xmalloc(N * sizeof *ref), rel = 0.0;
    cck_dense_reference(x, &w, NULL, ref, N, 1, 1, CCK_ACT_GELU);
    for (int i = 0; i < N; i++) {
        double v = x[i], u = 0.7978845608028654 * (v + 0.044715 * v * v * v);
        double cond = 1.0 + 2.0 * fabs(u), err = fabs((double)y[i] - ref[i]);
        cr_assert(err <= ulps * 0x1.0p-24 * cond * fabs(ref[i]) + 1e-30, "%s: gelu(%.9g) = %.9g, reference %.9g", what,
                  x[i], y[i], ref[i]);
        if (fabs(ref[i]) > 1e-30)
            rel = fmax(rel, err / (cond * fabs(ref[i])));
    }
    free(ref);
    cr_assert_eq(y[N], 1e20f, "%s: gelu(1e20) = %g", what, y[N]);
    cr_assert(y[N + 1] == 0.0f && !isnan(y[N + 1]), "%s: gelu(-1e20) = %g", what, y[N + 1]);
    cr_assert(isinf(y[N + 2]) && y[N + 2] > 0, "%s: gelu(inf) = %g", what, y[N + 2]);
    cr_assert(isnan(y[N + 3]) && isnan(y[N + 4]), "%s: gelu(-inf) = %g, gelu(NaN) = %g", what, y[N + 3], y[N + 4]);
    cr_assert(y[N + 5] == 0.0f, "%s: gelu(-0) = %g", what, y[N + 5]);
    fprintf(stderr, "%s: GELU grid, largest relative error / condition number %.3g\n", what, rel);
    return rel;
}

#endif /* KERNELS_CHECK_H */
