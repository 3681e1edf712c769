/*
 * test_kernels_host.c — kernels/src/ (host side): the host kernels (softmax_host.c, dense_host.c,
 * gemm_host_blocked.c) against the double references, the vocabulary of
 * common.c, and the argument checks of every CUDA entry point (cuda_api.c),
 * which run the same with or without a GPU. The blocked GEMM is also checked
 * for what a tolerance cannot see: cck_dense_host_blocked is its loop bit for
 * bit (never OpenBLAS), and it reads no row of x past the batch (a guard
 * page after x).
 *
 * Inputs are random with a fresh seed per test, printed to stderr
 * ("seed=..."); CCK_SEED=<seed> replays a run. Tolerances are those of
 * kernels_check.h; each test prints the largest relative error it saw.
 *
 * The dense layer under an address-space limit (RLIMIT_AS) that leaves the
 * process 64 MiB: it returns, with the blocked loop's bytes (OpenBLAS
 * before 0.3.31 retried its 128 MiB buffer forever at the process's first
 * GEMM: the test hung until its timeout).
 */
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cck_internal.h"
#include "exp_host.h"

#include "kernels_check.h"

/* ---- status and activation names -------------------------------------- */

Test(kernels_common, status_strings_name_every_code) {
    for (int s = CCK_OK; s <= CCK_ERR_UNSUPPORTED; s++) {
        const char *str = cck_status_string((cck_status)s);
        cr_assert(strncmp(str, "CCK_", 4) == 0, "code %d: %s", s, str);
        for (int t = CCK_OK; t < s; t++) {
            cr_assert_str_neq(str, cck_status_string((cck_status)t));
        }
    }
    int outside[] = {-1, CCK_ERR_UNSUPPORTED + 1, 99, INT_MIN, INT_MAX};
    for (size_t i = 0; i < sizeof outside / sizeof outside[0]; i++)
        cr_assert_str_eq(cck_status_string((cck_status)outside[i]), "CCK_ERR_?: unknown status code", "%d", outside[i]);
}

Test(kernels_common, activation_names_round_trip) {
    for (int a = CCK_ACT_NONE; a <= CCK_ACT_GELU; a++) {
        cck_activation back = CCK_ACT_NONE;
        cr_assert_eq(cck_activation_parse(cck_activation_name((cck_activation)a), &back), CCK_OK);
        cr_assert_eq((int)back, a);
    }
    cr_assert_str_eq(cck_activation_name(CCK_ACT_GELU), "gelu");
    int outside[] = {3, 7, -1, INT_MIN, INT_MAX};
    for (size_t i = 0; i < sizeof outside / sizeof outside[0]; i++)
        cr_assert_str_eq(cck_activation_name((cck_activation)outside[i]), "?", "%d", outside[i]);
}

Test(kernels_common, activation_parse_rejects_bad_names) {
    /* exact lower-case names only: no case folding, no blanks, no prefix */
    static char lots[10001]; /* "relu" 2500 times */
    for (size_t i = 0; i < 2500; i++)
        memcpy(lots + 4 * i, "relu", 4);
    const char *bad[] = {"",       "RELU", "Gelu",  "gelu_erf", "none ", " relu", "sigmoid", "?",
                         "relu\n", "rel",  "nonee", "\trelu",   "re lu", "\xff",  lots};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cck_activation a = CCK_ACT_RELU;
        cr_assert_eq(cck_activation_parse(bad[i], &a), CCK_ERR_INVALID_ARGUMENT, "'%s'", bad[i]);
        cr_assert_eq(a, CCK_ACT_RELU, "'%s' changed the output", bad[i]);
    }
    cck_activation a;
    cr_assert_eq(cck_activation_parse(NULL, &a), CCK_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cck_activation_parse("relu", NULL), CCK_ERR_INVALID_ARGUMENT);
}

/* Dimensions are refused when the elements or the bytes (4 per float)
 * overflow a size_t, at the exact bound. */
Test(kernels_common, dims_bound_the_bytes_not_only_the_elements) {
    cr_expect(cck_dims_ok(SIZE_MAX / 16, 4));
    cr_expect_not(cck_dims_ok(SIZE_MAX / 16 + 1, 4), "4 x (SIZE_MAX/16 + 1) floats fit, their bytes do not");
    cr_expect(cck_dims_ok(1, SIZE_MAX / 4));
    cr_expect_not(cck_dims_ok(1, SIZE_MAX / 4 + 1));
    cr_expect_not(cck_dims_ok(0, 4));
    cr_expect_not(cck_dims_ok(4, 0));
}

/* Each of a dense layer's three products is bounded: here x (batch·in) and
 * W (out·in) fit and only y (batch·out) overflows. The pointers are only
 * compared (y below x and W, so no overlap decides it), never read. */
Test(kernels_common, dense_args_bound_the_output_too) {
    const float *x = (const float *)(uintptr_t)0x10000, *w = (const float *)(uintptr_t)0x100000;
    float *y = (float *)(uintptr_t)0x1000;
    size_t big = (size_t)1 << 32;
    cr_expect(cck_dense_args_ok(x, w, NULL, y, 4, 1, 4, CCK_ACT_NONE));
    cr_expect_not(cck_dense_args_ok(x, w, NULL, y, big, 1, big, CCK_ACT_NONE));
}

/* ---- softmax ------------------------------------------------------------- */

static double softmax_case(rng *r, size_t rows, size_t cols, float scale, int in_place) {
    float *x = xmalloc(rows * cols * sizeof *x), *y = xmalloc(rows * cols * sizeof *y);
    fill_uniform(r, x, rows * cols, scale);
    float *keep = xmalloc(rows * cols * sizeof *keep);
    memcpy(keep, x, rows * cols * sizeof *x);
    float *out = in_place ? x : y;
    cr_assert_eq(cck_softmax_host(x, out, rows, cols), CCK_OK);
    char what[96];
    snprintf(what, sizeof what, "softmax_host %zux%zu scale %g%s", rows, cols, scale, in_place ? " in place" : "");
    double worst = check_softmax(what, out, keep, rows, cols);
    for (size_t i = 0; i < rows; i++) { /* every row sums to 1 */
        double s = 0.0;
        for (size_t j = 0; j < cols; j++)
            s += out[i * cols + j];
        cr_assert(fabs(s - 1.0) <= 1e-5 * (1.0 + sqrt((double)cols) / 16), "%s: row %zu sums to %.9g", what, i, s);
    }
    free(x), free(y), free(keep);
    return worst;
}

Test(softmax_host, matches_reference_on_many_shapes) {
    rng r = rng_fresh("softmax_host.matches_reference_on_many_shapes");
    static const size_t shapes[][2] = {{1, 1},    {1, 2},   {3, 1},    {1, 7},    {5, 31},   {7, 32},    {7, 33},
                                       {13, 127}, {4, 128}, {9, 1000}, {3, 1023}, {2, 4097}, {2, 32768}, {64, 128}};
    const float scales[] = {1.0f, 10.0f, 60.0f};
    double worst = 0.0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        for (size_t k = 0; k < 3; k++) {
            worst = fmax(worst, softmax_case(&r, shapes[s][0], shapes[s][1], scales[k], 0));
        }
    }
    for (int t = 0; t < 20; t++) { /* random odd shapes */
        worst = fmax(worst, softmax_case(&r, 1 + rng_below(&r, 40), 1 + rng_below(&r, 3000), 8.0f, 0));
    }
    fprintf(stderr, "softmax_host: largest relative error %.3g (tolerance %.3g at cols=1, %.3g at 32768)\n", worst,
            softmax_rtol(1), softmax_rtol(32768));
}

Test(softmax_host, in_place) {
    rng r = rng_fresh("softmax_host.in_place");
    softmax_case(&r, 7, 1000, 10.0f, 1);
    softmax_case(&r, 3, 1, 10.0f, 1);
}

Test(softmax_host, one_column_is_one) {
    float x[4] = {-3.0f, 0.0f, 1e30f, -FLT_MAX}, y[4];
    cr_assert_eq(cck_softmax_host(x, y, 4, 1), CCK_OK);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(y[i], 1.0f, "row %d: %g", i, y[i]);
}

/* Every exponent the host exp meets, on a fine grid: rows {0, d} with d from
 * 0 down to -104 (past -87.34, where its results flush to 0 and expf's
 * become subnormal), in 0.0037 steps so every range-reduction interval is hit
 * many times. y[1] = exp(d) / (1 + exp(d)) is checked against the double
 * reference like every other output, then to 4 ulp, and y[0] + y[1] rounds
 * to 1. This is the vectorized code the library runs; the test below checks
 * the exp alone, compiled in this file. */
Test(softmax_host, every_exponent_on_a_grid) {
    enum { N = 28108 };
    float *x = xmalloc(2 * N * sizeof *x), *y = xmalloc(2 * N * sizeof *y);
    for (int i = 0; i < N; i++) {
        x[2 * i] = 0.0f;
        x[2 * i + 1] = -0.0037f * (float)i;
    }
    cr_assert_eq(cck_softmax_host(x, y, N, 2), CCK_OK);
    double worst = check_softmax("softmax_host exponent grid", y, x, N, 2);
    /* and tighter than the general tolerance: the softmax's own path through
     * the (vectorized, possibly AVX2) exp stays within 4 ulp of exp(d)/(1+exp(d)) */
    double tight = 0.0;
    for (int i = 0; i < N; i++) {
        cr_assert(fabsf(y[2 * i] + y[2 * i + 1] - 1.0f) <= 2.4e-7f, "row %d: %g + %g", i, y[2 * i], y[2 * i + 1]);
        double e = exp((double)x[2 * i + 1]), want = e / (1.0 + e), err = fabs((double)y[2 * i + 1] - want);
        cr_assert(err <= 4.0 * 0x1.0p-24 * want + 1e-37, "exp(%.9g): y = %.9g, want %.17g", x[2 * i + 1], y[2 * i + 1],
                  want);
        if (want > 1e-37)
            tight = fmax(tight, err / want);
    }
    fprintf(stderr, "softmax_host exponent grid: largest relative error %.3g (%.3g on the exp's row entry)\n", worst,
            tight);
    free(x), free(y);
}

/* The vectorized exp itself (exp_host.h), against double exp: every 97th
 * float in [-87.33, 0] (about 11 million), plus the edges. The bound is the
 * header's claim rounded up: 1.5 ulp of the result. */
Test(softmax_host, exp_nonpositive_within_1_5_ulp) {
    double worst = 0.0;
    uint32_t hi;
    float lo = -87.33f, zero = -0.0f;
    memcpy(&hi, &lo, sizeof hi); /* negative floats: larger bits = more negative */
    uint32_t from;
    memcpy(&from, &zero, sizeof from);
    for (uint32_t bits = from; bits <= hi; bits += 97) {
        float d;
        memcpy(&d, &bits, sizeof d);
        float got = cck_exp_nonpositive(d);
        double want = exp((double)d);
        double ulp = ldexp(1.0, ilogb(want) - 23);
        double err = fabs((double)got - want) / ulp;
        worst = fmax(worst, err);
        cr_assert(err <= 1.5, "exp(%.9g) = %.9g, want %.17g (%.2f ulp)", d, got, want, err);
    }
    cr_assert_eq(cck_exp_nonpositive(0.0f), 1.0f);
    cr_assert_eq(cck_exp_nonpositive(-0.0f), 1.0f);
    cr_assert_eq(cck_exp_nonpositive(-INFINITY), 0.0f);
    cr_assert_eq(cck_exp_nonpositive(-88.0f), 0.0f); /* below FLT_MIN: flushed */
    cr_assert(cck_exp_nonpositive(-87.33654f) >= FLT_MIN);
    cr_assert(isnan(cck_exp_nonpositive(NAN)));
    fprintf(stderr, "cck_exp_nonpositive: largest error %.3f ulp\n", worst);
}

Test(softmax_host, large_magnitudes_do_not_overflow) {
    float x[6] = {FLT_MAX, FLT_MAX, -FLT_MAX, 1e30f, 1e30f - 1e24f, -1e30f};
    float y[6];
    cr_assert_eq(cck_softmax_host(x, y, 2, 3), CCK_OK);
    check_softmax("softmax_host large", y, x, 2, 3);
    cr_assert_eq(y[0], 0.5f);
    cr_assert_eq(y[2], 0.0f);
}

/* NaN and infinity, row by row, as documented in softmax_host.c: the host
 * kernel and the reference agree, and the reference says what torch does. */
Test(softmax_host, nan_and_inf_follow_the_reference) {
    const float nan = NAN, inf = INFINITY;
    float x[7][4] = {
        {1.0f, nan, 2.0f, 3.0f},  /* NaN anywhere: row all NaN          */
        {1.0f, inf, 2.0f, 3.0f},  /* +inf: all NaN                       */
        {-inf, 0.0f, -inf, 0.0f}, /* -inf elements: exactly 0            */
        {-inf, -inf, -inf, -inf}, /* only -inf: all NaN                  */
        {nan, nan, nan, nan},     /* only NaN: all NaN                   */
        {-inf, 5.0f, -inf, -inf}, /* one finite: it gets 1               */
        {inf, -inf, 1.0f, nan},   /* everything at once                  */
    };
    float y[7][4];
    cr_assert_eq(cck_softmax_host(&x[0][0], &y[0][0], 7, 4), CCK_OK);
    check_softmax("softmax_host nan/inf", &y[0][0], &x[0][0], 7, 4);
    for (int j = 0; j < 4; j++) {
        cr_assert(isnan(y[0][j]) && isnan(y[1][j]) && isnan(y[3][j]) && isnan(y[4][j]) && isnan(y[6][j]));
    }
    cr_assert(y[2][0] == 0.0f && y[2][1] == 0.5f && y[2][2] == 0.0f && y[2][3] == 0.5f);
    cr_assert(y[5][0] == 0.0f && y[5][1] == 1.0f && y[5][3] == 0.0f);
}

Test(softmax_host, bad_arguments) {
    float x[4] = {0}, y[4];
    cr_assert_eq(cck_softmax_host(NULL, y, 1, 4), CCK_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cck_softmax_host(x, NULL, 1, 4), CCK_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cck_softmax_host(x, y, 0, 4), CCK_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cck_softmax_host(x, y, 1, 0), CCK_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cck_softmax_host(x, y, SIZE_MAX / 2, 4), CCK_ERR_INVALID_ARGUMENT); /* overflows */
    cck_softmax_reference(NULL, NULL, 1, 1);                                         /* no crash */
}

/* y may equal x; any other overlap would read elements an earlier row (or
 * an earlier pass) already overwrote, so it is refused and nothing is
 * written. The CUDA entry points check the same before the device. */
Test(softmax_host, partial_overlap_is_refused) {
    float buf[24];
    for (int i = 0; i < 24; i++)
        buf[i] = (float)i;
    const size_t offsets[] = {1, 3, 4, 7}; /* 2x4: y starts inside x's 8 floats */
    for (size_t k = 0; k < 4; k++) {
        cr_assert_eq(cck_softmax_host(buf + 8, buf + 8 + offsets[k], 2, 4), CCK_ERR_INVALID_ARGUMENT, "y = x + %zu",
                     offsets[k]);
        cr_assert_eq(cck_softmax_host(buf + 8, buf + 8 - offsets[k], 2, 4), CCK_ERR_INVALID_ARGUMENT, "y = x - %zu",
                     offsets[k]);
        cr_assert_eq(cck_softmax_cuda_version(NULL, 4, 0, buf + 8, buf + 8 + offsets[k], 2, 4),
                     CCK_ERR_INVALID_ARGUMENT);
    }
    for (int i = 0; i < 24; i++)
        cr_assert_eq(buf[i], (float)i, "a refused call wrote element %d", i);
    /* adjacent ranges and y == x are fine */
    cr_assert_eq(cck_softmax_host(buf + 8, buf + 16, 2, 4), CCK_OK);
    cr_assert_eq(cck_softmax_host(buf + 8, buf, 2, 4), CCK_OK);
    cr_assert_eq(cck_softmax_host(buf + 8, buf + 8, 2, 4), CCK_OK);
    for (int i = 0; i < 8; i++)
        cr_assert_eq(buf[i], buf[16 + i], "out of place and in place agree at %d", i);
}

/* A pointer that is no float's address (not 4-byte aligned) is refused by
 * every entry point before anything is written: on a GPU it would fault and
 * leave the CUDA context unusable. */
Test(kernels_host, misaligned_pointers_are_refused) {
    float buf[64];
    for (int i = 0; i < 64; i++)
        buf[i] = (float)i;
    char *raw = (char *)buf;
    for (size_t off = 1; off < sizeof(float); off++) {
        float *m = (float *)(void *)(raw + 32 * sizeof(float) + off);
        cr_assert_eq(cck_softmax_host(m, buf, 2, 4), CCK_ERR_INVALID_ARGUMENT, "x + %zu bytes", off);
        cr_assert_eq(cck_softmax_host(buf, m, 2, 4), CCK_ERR_INVALID_ARGUMENT, "y + %zu bytes", off);
        cr_assert_eq(cck_softmax_cuda_version(NULL, 4, 0, m, buf, 2, 4), CCK_ERR_INVALID_ARGUMENT);
        /* dense: x 2x2, W 2x2, b 2, y 2x2, each misaligned in turn */
        const float *x = buf, *w = buf + 4, *b = buf + 8;
        float *y = buf + 16;
        cr_assert_eq(cck_dense_host(m, w, b, y, 2, 2, 2, CCK_ACT_NONE), CCK_ERR_INVALID_ARGUMENT, "dense x");
        cr_assert_eq(cck_dense_host(x, m, b, y, 2, 2, 2, CCK_ACT_NONE), CCK_ERR_INVALID_ARGUMENT, "dense W");
        cr_assert_eq(cck_dense_host(x, w, m, y, 2, 2, 2, CCK_ACT_NONE), CCK_ERR_INVALID_ARGUMENT, "dense b");
        cr_assert_eq(cck_dense_host(x, w, b, m, 2, 2, 2, CCK_ACT_NONE), CCK_ERR_INVALID_ARGUMENT, "dense y");
        cr_assert_eq(cck_dense_host_blocked(x, w, b, m, 2, 2, 2, CCK_ACT_NONE), CCK_ERR_INVALID_ARGUMENT);
    }
    for (int i = 0; i < 64; i++)
        cr_assert_eq(buf[i], (float)i, "a refused call wrote element %d", i);
}

/* Column counts at and past every vector width and tiling boundary (4 SSE
 * lanes, 8 AVX2, the 16-byte split of the GPU rows, OpenMP's threshold),
 * each row holding one special value at its first, middle or last element,
 * with finite neighbours: the host kernel equals the reference element by
 * element (NaN where it is NaN) and the documented rule holds exactly. */
static const size_t boundary_cols[] = KERNELS_BOUNDARY_COLS;
#define N_BOUNDARY_COLS (sizeof boundary_cols / sizeof boundary_cols[0])

Test(softmax_host, special_values_at_every_width_and_position) {
    rng r = rng_fresh("softmax_host.special_values_at_every_width_and_position");
    const float special[] = KERNELS_SPECIAL_VALUES;
    enum { NS = sizeof special / sizeof special[0] };
    for (size_t c = 0; c < N_BOUNDARY_COLS; c++) {
        size_t cols = boundary_cols[c], rows = 3 * NS + 2;
        float *x = xmalloc(rows * cols * sizeof *x), *y = xmalloc(rows * cols * sizeof *y);
        fill_uniform(&r, x, rows * cols, 5.0f);
        for (size_t s = 0; s < NS; s++) {
            const size_t pos[3] = {0, cols / 2, cols - 1};
            for (int p = 0; p < 3; p++)
                x[(3 * s + (size_t)p) * cols + pos[p]] = special[s];
        }
        for (size_t j = 0; j < cols; j++) { /* the last two rows: all -inf, all NaN */
            x[(rows - 2) * cols + j] = -INFINITY;
            x[(rows - 1) * cols + j] = NAN;
        }
        cr_assert_eq(cck_softmax_host(x, y, rows, cols), CCK_OK);
        char what[64];
        snprintf(what, sizeof what, "softmax_host specials cols=%zu", cols);
        check_softmax(what, y, x, rows, cols);
        for (size_t row = 0; row < rows; row++) {
            const float v = row < 3 * NS ? special[row / 3] : NAN;
            const float *yr = y + row * cols;
            int all_nan = isnan(v) || v == INFINITY || (v == -INFINITY && cols == 1) || row == rows - 2;
            for (size_t j = 0; j < cols; j++) {
                if (all_nan)
                    cr_assert(isnan(yr[j]), "%s row %zu (%g): y[%zu] = %g, want NaN", what, row, v, j, yr[j]);
                else
                    cr_assert(yr[j] >= 0.0f && yr[j] <= 1.0f, "%s row %zu (%g): y[%zu] = %g", what, row, v, j, yr[j]);
            }
        }
        free(x), free(y);
    }
}

/* The same rows twice, and in place: bit for bit the same (the OpenMP split
 * gives each row to one thread; nothing depends on the thread count). */
Test(softmax_host, deterministic_at_every_width) {
    rng r = rng_fresh("softmax_host.deterministic_at_every_width");
    for (size_t c = 0; c < N_BOUNDARY_COLS; c++) {
        size_t cols = boundary_cols[c], rows = (CCK_PARALLEL_MIN_ELEMS + cols - 1) / cols;
        float *x = xmalloc(rows * cols * sizeof *x), *y1 = xmalloc(rows * cols * sizeof *y1),
              *y2 = xmalloc(rows * cols * sizeof *y2);
        fill_uniform(&r, x, rows * cols, 30.0f);
        cr_assert_eq(cck_softmax_host(x, y1, rows, cols), CCK_OK);
        cr_assert_eq(cck_softmax_host(x, y2, rows, cols), CCK_OK);
        cr_assert(memcmp(y1, y2, rows * cols * sizeof *y1) == 0, "cols=%zu: two runs differ", cols);
        cr_assert_eq(cck_softmax_host(x, x, rows, cols), CCK_OK);
        cr_assert(memcmp(y1, x, rows * cols * sizeof *y1) == 0, "cols=%zu: in place differs", cols);
        free(x), free(y1), free(y2);
    }
}

/* The thread count changes no bit of the softmax nor of the blocked dense
 * layer (each row, each output panel, is one thread's); cck_dense_host's
 * OpenBLAS may sum in another order per thread count, within the
 * tolerance. Shapes above both thresholds, so that two threads do split
 * the work; one and two threads are asked of OpenMP in turn. */
#ifdef _OPENMP
#include <omp.h>
Test(kernels_host, the_thread_count_changes_no_bit) {
    rng r = rng_fresh("kernels_host.the_thread_count_changes_no_bit");
    int threads_before = omp_get_max_threads();
    size_t rows = 257, cols = 1031;         /* 264967 elements >= CCK_PARALLEL_MIN_ELEMS */
    size_t batch = 67, in = 129, out = 517; /* 4.47M MACs >= CCK_PARALLEL_MIN_MACS */
    cr_assert_geq(rows * cols, CCK_PARALLEL_MIN_ELEMS);
    cr_assert_geq(batch * in * out, CCK_PARALLEL_MIN_MACS);
    float *x = xmalloc(rows * cols * sizeof *x), *w = xmalloc(out * in * sizeof *w), *b = xmalloc(out * sizeof *b);
    float *y[2][5];
    fill_uniform(&r, x, rows * cols, 30.0f);
    fill_uniform(&r, w, out * in, 1.0f / sqrtf((float)in));
    fill_uniform(&r, b, out, 0.5f);
    for (int t = 0; t < 2; t++) {
        omp_set_num_threads(t + 1);
        cr_assert_eq(cck_host_threads(), t + 1);
        y[t][0] = xmalloc(rows * cols * sizeof(float));
        cr_assert_eq(cck_softmax_host(x, y[t][0], rows, cols), CCK_OK);
        for (int act = CCK_ACT_NONE; act <= CCK_ACT_GELU; act++) {
            y[t][1 + act] = xmalloc(batch * out * sizeof(float));
            cr_assert_eq(cck_dense_host_blocked(x, w, b, y[t][1 + act], batch, in, out, (cck_activation)act), CCK_OK);
        }
        y[t][4] = xmalloc(batch * out * sizeof(float));
        cr_assert_eq(cck_dense_host(x, w, b, y[t][4], batch, in, out, CCK_ACT_GELU), CCK_OK);
        check_dense("dense_host, threads", y[t][4], x, w, b, batch, in, out, CCK_ACT_GELU, 1e-5);
    }
    omp_set_num_threads(threads_before);
    cr_assert(memcmp(y[0][0], y[1][0], rows * cols * sizeof(float)) == 0, "softmax: 1 and 2 threads differ");
    for (int act = CCK_ACT_NONE; act <= CCK_ACT_GELU; act++)
        cr_assert(memcmp(y[0][1 + act], y[1][1 + act], batch * out * sizeof(float)) == 0,
                  "blocked dense %s: 1 and 2 threads differ", cck_activation_name((cck_activation)act));
    for (int t = 0; t < 2; t++)
        for (int k = 0; k < 5; k++)
            free(y[t][k]);
    free(x), free(w), free(b);
}
#endif

/* ---- dense ---------------------------------------------------------------- */

/* Both host GEMMs are checked: cck_dense_host (OpenBLAS when the library is
 * built with it) and cck_dense_host_blocked (the built-in loop, always). */
typedef cck_status (*dense_fn)(const float *, const float *, const float *, float *, size_t, size_t, size_t,
                               cck_activation);
static const struct {
    const char *name;
    dense_fn fn;
} dense_impls[] = {{"dense_host", cck_dense_host}, {"dense_host_blocked", cck_dense_host_blocked}};
#define N_DENSE_IMPLS (sizeof dense_impls / sizeof dense_impls[0])

static double dense_case(size_t impl, rng *r, size_t batch, size_t in, size_t out, int bias, cck_activation act) {
    float *x = xmalloc(batch * in * sizeof *x), *w = xmalloc(out * in * sizeof *w);
    float *b = bias ? xmalloc(out * sizeof *b) : NULL, *y = xmalloc(batch * out * sizeof *y);
    fill_uniform(r, x, batch * in, 1.0f);
    fill_uniform(r, w, out * in, 1.0f / sqrtf((float)in));
    if (b)
        fill_uniform(r, b, out, 0.5f);
    for (size_t i = 0; i < batch * out; i++)
        y[i] = NAN; /* poison */
    cr_assert_eq(dense_impls[impl].fn(x, w, b, y, batch, in, out, act), CCK_OK);
    char what[96];
    snprintf(what, sizeof what, "%s %zux%zux%zu %s%s", dense_impls[impl].name, batch, in, out, cck_activation_name(act),
             bias ? " +bias" : "");
    double worst = check_dense(what, y, x, w, b, batch, in, out, act, 1e-5);
    free(x), free(w), free(b), free(y);
    return worst;
}

Test(dense_host, matches_reference_on_many_shapes) {
    rng r = rng_fresh("dense_host.matches_reference_on_many_shapes");
    /* small and odd shapes, then ones above CCK_PARALLEL_MIN_MACS (threaded)
     * and large enough for OpenBLAS's blocked, multi-threaded paths */
    static const size_t shapes[][3] = {{1, 1, 1},      {1, 3, 5},        {4, 8, 8},      {5, 7, 9},     {3, 1, 17},
                                       {17, 33, 1},    {8, 256, 8},      {9, 257, 15},   {33, 513, 65}, {64, 1024, 96},
                                       {1, 2048, 777}, {130, 1031, 257}, {256, 768, 384}};
    for (size_t impl = 0; impl < N_DENSE_IMPLS; impl++) {
        double worst = 0.0;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            for (int act = CCK_ACT_NONE; act <= CCK_ACT_GELU; act++) {
                for (int bias = 0; bias < 2; bias++) {
                    worst = fmax(worst, dense_case(impl, &r, shapes[s][0], shapes[s][1], shapes[s][2], bias,
                                                   (cck_activation)act));
                }
            }
        }
        for (int t = 0; t < 12; t++) {
            worst =
                fmax(worst, dense_case(impl, &r, 1 + rng_below(&r, 40), 1 + rng_below(&r, 700), 1 + rng_below(&r, 70),
                                       (int)rng_below(&r, 2), (cck_activation)rng_below(&r, 3)));
        }
        fprintf(stderr, "%s: largest error %.3g of sum|x*w|+|b| (tolerance 1.2e-5)\n", dense_impls[impl].name, worst);
    }
}

/* cck_dense_host_blocked runs the built-in loop, never OpenBLAS: without a
 * bias or an activation its output is cck_gemm_host_blocked's, bit for bit
 * (a sum in another order, OpenBLAS's, differs in the last bits). */
Test(dense_host, the_blocked_entry_point_runs_the_blocked_loop) {
    rng r = rng_fresh("dense_host.the_blocked_entry_point_runs_the_blocked_loop");
    static const size_t shapes[][3] = {{9, 257, 15}, {33, 513, 65}, {64, 1024, 96}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        size_t batch = shapes[s][0], in = shapes[s][1], out = shapes[s][2];
        float *x = xmalloc(batch * in * sizeof *x), *w = xmalloc(out * in * sizeof *w);
        float *y1 = xmalloc(batch * out * sizeof *y1), *y2 = xmalloc(batch * out * sizeof *y2);
        fill_uniform(&r, x, batch * in, 1.0f);
        fill_uniform(&r, w, out * in, 1.0f / sqrtf((float)in));
        cr_assert_eq(cck_dense_host_blocked(x, w, NULL, y1, batch, in, out, CCK_ACT_NONE), CCK_OK);
        cck_gemm_host_blocked(x, w, y2, batch, in, out);
        cr_expect(memcmp(y1, y2, batch * out * sizeof *y1) == 0, "%zux%zux%zu: not the blocked loop's bits", batch, in,
                  out);
        free(x), free(w), free(y1), free(y2);
    }
}

/* The blocked GEMM works on 4 rows of x at a time; for the last rows of a
 * batch that is not a multiple of 4 it must read none past the batch: x
 * ends right before a page that cannot be read. */
Test(dense_host, the_blocked_gemm_reads_no_row_past_the_batch) {
    static const size_t shapes[][3] = {{1, 16, 8}, {5, 9, 3}, {7, 300, 9}};
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        size_t batch = shapes[s][0], in = shapes[s][1], out = shapes[s][2], bytes = batch * in * sizeof(float);
        size_t span = (bytes + page - 1) / page * page;
        unsigned char *map = mmap(NULL, span + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        cr_assert_neq(map, MAP_FAILED);
        cr_assert_eq(mprotect(map + span, page, PROT_NONE), 0);
        float *x = (float *)(map + span - bytes), *w = xmalloc(out * in * sizeof *w);
        float *y = xmalloc(batch * out * sizeof *y);
        for (size_t i = 0; i < batch * in; i++)
            x[i] = (float)(i % 7) - 3.0f;
        for (size_t i = 0; i < out * in; i++)
            w[i] = (float)(i % 5) - 2.0f;
        cck_gemm_host_blocked(x, w, y, batch, in, out); /* a read past x faults here */
        for (size_t r = 0; r < batch; r++)
            for (size_t o = 0; o < out; o++) {
                float want = 0.0f; /* small integers: exact in any order */
                for (size_t k = 0; k < in; k++)
                    want += x[r * in + k] * w[o * in + k];
                cr_expect_eq(y[r * out + o], want, "%zux%zux%zu y[%zu][%zu]", batch, in, out, r, o);
            }
        free(w), free(y);
        munmap(map, span + page);
    }
}

Test(dense_host, gemm_is_named) {
    const char *name = cck_host_gemm_name();
    cr_assert(name != NULL && name[0] != '\0');
#ifdef CCK_EXPECT_OPENBLAS
    cr_assert(strncmp(name, "OpenBLAS", 8) == 0, "a build with OpenBLAS names '%s'", name);
#else
    cr_assert(strstr(name, "blocked") != NULL, "a build without OpenBLAS names '%s'", name);
#endif
    fprintf(stderr, "host GEMM: %s\n", name);
}

Test(dense_host, activations_by_value) {
    for (size_t impl = 0; impl < N_DENSE_IMPLS; impl++) {
        /* 1x1x1 layers: y = act(x*w + b) */
        dense_fn dense = dense_impls[impl].fn;
        float x = 1.0f, w = 2.0f, b = -3.0f, y;
        cr_assert_eq(dense(&x, &w, &b, &y, 1, 1, 1, CCK_ACT_NONE), CCK_OK);
        cr_assert_eq(y, -1.0f);
        cr_assert_eq(dense(&x, &w, &b, &y, 1, 1, 1, CCK_ACT_RELU), CCK_OK);
        cr_assert_eq(y, 0.0f);
        cr_assert_eq(dense(&x, &w, NULL, &y, 1, 1, 1, CCK_ACT_GELU), CCK_OK);
        /* gelu_tanh(2) = 1.9545977 */
        cr_assert(fabsf(y - 1.9545977f) < 1e-6f, "%s: gelu(2) = %.9g", dense_impls[impl].name, y);
    }
}

/* GELU over its whole range (kernels_check.h's grid), through 1x1 layers
 * (w = 1, no bias): within 4 ulp times its condition number, exact limits,
 * and within the dense tolerance of |v| too. */
Test(dense_host, gelu_over_its_range) {
    float *x = xmalloc(GELU_GRID_LEN * sizeof *x), *y = xmalloc(GELU_GRID_LEN * sizeof *y), w = 1.0f;
    gelu_grid_fill(x);
    for (size_t impl = 0; impl < N_DENSE_IMPLS; impl++) {
        cr_assert_eq(dense_impls[impl].fn(x, &w, NULL, y, GELU_GRID_LEN, 1, 1, CCK_ACT_GELU), CCK_OK);
        double worst = check_dense(dense_impls[impl].name, y, x, &w, NULL, GELU_GRID_POINTS, 1, 1, CCK_ACT_GELU, 1e-5);
        gelu_grid_check(dense_impls[impl].name, x, y, 4.0);
        fprintf(stderr, "%s gelu grid: largest error %.3g of |v|\n", dense_impls[impl].name, worst);
    }
    free(x), free(y);
}

/* A NaN in x poisons its row of y; a NaN in W poisons its column. */
Test(dense_host, nan_propagates_to_its_row_and_column) {
    for (size_t impl = 0; impl < N_DENSE_IMPLS; impl++) {
        const char *name = dense_impls[impl].name;
        float x[2][3] = {{1, NAN, 2}, {1, 2, 3}}, w[2][3] = {{1, 1, 1}, {0, 1, 0}}, y[2][2];
        for (int act = CCK_ACT_NONE; act <= CCK_ACT_GELU; act++) {
            cr_assert_eq(dense_impls[impl].fn(&x[0][0], &w[0][0], NULL, &y[0][0], 2, 3, 2, (cck_activation)act),
                         CCK_OK);
            cr_assert(isnan(y[0][0]) && isnan(y[0][1]), "%s %s: relu/gelu keep NaN", name, cck_activation_name(act));
            cr_assert(!isnan(y[1][0]) && !isnan(y[1][1]), "%s", name);
        }
        float x2[2][3] = {{1, 2, 3}, {4, 5, 6}}, w2[3][3] = {{1, 0, 0}, {0, NAN, 0}, {0, 0, 1}}, y2[2][3];
        cr_assert_eq(dense_impls[impl].fn(&x2[0][0], &w2[0][0], NULL, &y2[0][0], 2, 3, 3, CCK_ACT_RELU), CCK_OK);
        for (int row = 0; row < 2; row++) {
            cr_assert(isnan(y2[row][1]), "%s: NaN weight, row %d", name, row);
            cr_assert_eq(y2[row][0], x2[row][0], "%s", name);
            cr_assert_eq(y2[row][2], x2[row][2], "%s", name);
        }
    }
}

/* y against the double reference rounded to float: the same class when
 * either is not finite (NaN with NaN, an infinity with the same one, an
 * overflow to inf included), else within rtol of it (plus 1e-30 for
 * results flushed or rounded in the subnormal range). */
static void check_epilogue_value(const char *what, size_t o, float in, float y, double ref, double rtol) {
    float rf = (float)ref;
    if (!isfinite(rf) || !isfinite(y)) {
        cr_assert((isnan(rf) && isnan(y)) || rf == y, "%s: out %zu, act(%g) = %g, reference %g", what, o, in, y, rf);
    } else {
        cr_assert(fabs((double)y - ref) <= rtol * fabs(ref) + 1e-30, "%s: out %zu, act(%.9g) = %.9g, reference %.9g",
                  what, o, in, y, ref);
    }
}

/* The epilogue's vector loops (4 or 8 lanes, a scalar tail) at every width
 * around their boundaries, with special values in every lane: 1 x 1 x out
 * layers with x = 1, so y[o] = act(w[o]) or act(1 + b[o]). ReLU keeps NaN
 * and gives +0 for -0 and negatives (activation.h); GELU's limits are the
 * reference's; all within 1e-5 of the reference, exactly when not finite. */
Test(dense_host, activations_of_special_values_at_every_width) {
    const float special[] = {NAN,    INFINITY, -INFINITY, FLT_MAX, -FLT_MAX, 1e38f, -1e38f, 1e-45f, -1e-45f, -0.0f,
                             0.0f,   1.0f,     -1.0f,     3.0f,    -3.0f,    20.0f, -20.0f, 1e-40f, -1e-40f};
    enum { NS = sizeof special / sizeof special[0] };
    for (size_t impl = 0; impl < N_DENSE_IMPLS; impl++) {
        for (size_t c = 0; c < N_BOUNDARY_COLS; c++) {
            size_t out = boundary_cols[c];
            float x = 1.0f, *w = xmalloc(out * sizeof *w), *b = xmalloc(out * sizeof *b), *y = xmalloc(out * sizeof *y);
            double *ref = xmalloc(out * sizeof *ref);
            for (int act = CCK_ACT_NONE; act <= CCK_ACT_GELU; act++) {
                for (int mode = 0; mode < 3; mode++) { /* special w, no bias; special w, bias; w = 1, special b */
                    for (size_t shift = 0; shift < NS; shift += out > NS ? NS : 1) {
                        for (size_t o = 0; o < out; o++) {
                            float v = special[(o + shift) % NS];
                            w[o] = mode == 2 ? 0.0f : v;
                            b[o] = mode == 2 ? v : 0.25f;
                        }
                        const float *bias = mode == 0 ? NULL : b;
                        cr_assert_eq(dense_impls[impl].fn(&x, w, bias, y, 1, 1, out, (cck_activation)act), CCK_OK);
                        cck_dense_reference(&x, w, bias, ref, 1, 1, out, (cck_activation)act);
                        char what[96];
                        snprintf(what, sizeof what, "%s out=%zu %s mode %d", dense_impls[impl].name, out,
                                 cck_activation_name((cck_activation)act), mode);
                        for (size_t o = 0; o < out; o++) {
                            float in = mode == 2 ? b[o] : w[o] + (bias ? 0.25f : 0.0f);
                            check_epilogue_value(what, o, in, y[o], ref[o], 1e-5);
                            if (act == CCK_ACT_RELU && !isnan(y[o]))
                                cr_assert(!signbit(y[o]), "%s: relu(%g) = %g, want +0 or positive", what, in, y[o]);
                        }
                        if (out == 1 && shift + 1 >= NS)
                            break;
                    }
                }
            }
            free(w), free(b), free(y), free(ref);
        }
    }
}

Test(dense_host, bad_arguments) {
    for (size_t impl = 0; impl < N_DENSE_IMPLS; impl++) {
        dense_fn dense = dense_impls[impl].fn;
        /* w has room for the 1x2x3 layers below (out·in = 6 floats) */
        float x[4] = {0}, w[6] = {0}, b[3] = {0}, y[4] = {7, 7, 7, 7};
        const cck_status bad = CCK_ERR_INVALID_ARGUMENT;
        cr_assert_eq(dense(NULL, w, b, y, 2, 2, 2, CCK_ACT_NONE), bad);
        cr_assert_eq(dense(x, NULL, b, y, 2, 2, 2, CCK_ACT_NONE), bad);
        cr_assert_eq(dense(x, w, b, NULL, 2, 2, 2, CCK_ACT_NONE), bad);
        cr_assert_eq(dense(x, w, b, y, 0, 2, 2, CCK_ACT_NONE), bad);
        cr_assert_eq(dense(x, w, b, y, 2, 0, 2, CCK_ACT_NONE), bad);
        cr_assert_eq(dense(x, w, b, y, 2, 2, 0, CCK_ACT_NONE), bad);
        cr_assert_eq(dense(x, w, b, y, 2, 2, 2, (cck_activation)3), bad);
        cr_assert_eq(dense(x, w, b, y, 2, 2, 2, (cck_activation)-1), bad);
        cr_assert_eq(dense(x, w, b, x, 2, 2, 2, CCK_ACT_NONE), bad); /* y aliases x */
        cr_assert_eq(dense(x, w, b, w, 2, 2, 2, CCK_ACT_NONE), bad); /* y aliases w */
        cr_assert_eq(dense(x, w, b, b, 1, 2, 2, CCK_ACT_NONE), bad); /* y aliases b */
        float big[16] = {0};
        cr_assert_eq(dense(big, w, b, big + 3, 2, 2, 2, CCK_ACT_NONE), bad);     /* y's first float is x[3] */
        cr_assert_eq(dense(x, big + 4, b, big + 1, 2, 2, 2, CCK_ACT_NONE), bad); /* y's last float is W[0] */
        cr_assert_eq(dense(x, w, big + 4, big + 2, 1, 2, 3, CCK_ACT_RELU), bad); /* y's last float is b[0] */
        cr_assert_eq(dense(x, w, big + 1, big + 3, 1, 2, 3, CCK_ACT_RELU), bad); /* b's last float is y[0] */
        /* adjacent but disjoint ranges are fine: x = big[0..3], y = big[4..7] */
        cr_assert_eq(dense(big, w, b, big + 4, 2, 2, 2, CCK_ACT_NONE), CCK_OK);
        cr_assert_eq(dense(x, w, big + 12, big + 8, 2, 2, 2, CCK_ACT_NONE), CCK_OK);
        cr_assert_eq(dense(x, w, b, y, SIZE_MAX / 2, 4, 2, CCK_ACT_NONE), bad);
        for (int i = 0; i < 4; i++)
            cr_assert_eq(y[i], 7.0f, "%s: a refused call wrote y", dense_impls[impl].name);
    }
    cck_dense_reference(NULL, NULL, NULL, NULL, 2, 2, 2, CCK_ACT_NONE); /* no crash */
}

/* ---- CUDA entry points: argument checks, with or without a GPU ---------- */

Test(kernels_cuda_api, device_count_reports_no_device_here) {
    int n = -1;
    cr_assert_eq(cck_cuda_device_count(NULL), CCK_ERR_INVALID_ARGUMENT);
    cck_status st = cck_cuda_device_count(&n);
    if (st == CCK_OK) {
        cr_assert_gt(n, 0);
        cr_skip_test("a GPU is present (%d); the no-device answers are not checked", n);
    }
    cr_assert_eq(st, CCK_ERR_NO_DEVICE);
    cr_assert_eq(n, 0);
    size_t ws = 1;
    cr_assert_eq(cck_cublas_workspace_size(0, &ws), CCK_ERR_NO_DEVICE);
    cck_cuda_context *ctx = (cck_cuda_context *)&n;
    cr_assert_eq(cck_cuda_context_create(0, NULL, NULL, 0, 0, &ctx), CCK_ERR_NO_DEVICE);
    cr_assert_null(ctx);
}

Test(kernels_cuda_api, bad_arguments_are_caught_before_the_device) {
    float buf[8];
    const float *x = buf;
    float *y = buf;
    cck_cuda_context *ctx = NULL;
    const cck_status bad = CCK_ERR_INVALID_ARGUMENT;
    size_t ws;
    cr_assert_eq(cck_cublas_workspace_size(0, NULL), bad);
    cr_assert_eq(cck_cublas_workspace_size(-1, &ws), bad);
    cr_assert_eq(cck_cuda_context_create(0, NULL, NULL, 0, 0, NULL), bad);
    cr_assert_eq(cck_cuda_context_create(-1, NULL, NULL, 0, 0, &ctx), bad);
    cr_assert_eq(cck_cuda_context_create(0, NULL, NULL, 4096, 0, &ctx), bad); /* size without memory */
    cr_assert_eq(cck_cuda_context_create(0, NULL, buf, 0, 0, &ctx), bad);     /* memory without size */
    cr_assert_eq(cck_cuda_context_destroy(NULL), bad);

    /* softmax: pointers, dimensions, version, block size, then the context */
    cr_assert_eq(cck_softmax_cuda(NULL, x, y, 1, 1), bad);
    cr_assert_eq(cck_softmax_cuda_version(NULL, 4, 0, NULL, y, 1, 1), bad);
    cr_assert_eq(cck_softmax_cuda_version(NULL, 4, 0, x, NULL, 1, 1), bad);
    cr_assert_eq(cck_softmax_cuda_version(NULL, 4, 0, x, y, 0, 1), bad);
    cr_assert_eq(cck_softmax_cuda_version(NULL, 4, 0, x, y, 1, 0), bad);
    int versions[] = {0, -1, 6, 100};
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(cck_softmax_cuda_version(NULL, versions[i], 0, x, y, 1, 8), bad, "version %d", versions[i]);
    }
    /* not 0 and not a multiple of 32 in [32, 1024]: invalid for every version,
     * the power-of-two versions included (48 and 1000 are not UNSUPPORTED) */
    int blocks[] = {INT_MIN, -32, -1, 1, 31, 33, 48, 1000, 1056, 2048, INT_MAX};
    for (int v = 1; v <= 5; v++) {
        for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++) {
            cr_assert_eq(cck_softmax_cuda_version(NULL, v, blocks[i], x, y, 1, 8), bad, "v%d block %d", v, blocks[i]);
        }
    }
    /* 96 and 992 are multiples of 32 but not powers of two: only v1 and v2 */
    cr_assert_eq(cck_softmax_cuda_version(NULL, 3, 96, x, y, 1, 8), CCK_ERR_UNSUPPORTED);
    cr_assert_eq(cck_softmax_cuda_version(NULL, 4, 992, x, y, 1, 8), CCK_ERR_UNSUPPORTED);
    cr_assert_eq(cck_softmax_cuda_version(NULL, 5, 96, x, y, 1, 8), CCK_ERR_UNSUPPORTED);
    cr_assert_eq(cck_softmax_cuda_version(NULL, 1, 96, x, y, 1, 8), bad); /* valid; NULL context */
    cr_assert_eq(cck_softmax_cuda_version(NULL, 2, 992, x, y, 1, 8), bad);

    /* dense */
    cr_assert_eq(cck_dense_cuda(NULL, x, x, NULL, y + 4, 1, 1, 1, CCK_ACT_NONE), bad);
    cr_assert_eq(cck_dense_cuda(NULL, NULL, x, NULL, y + 4, 1, 1, 1, CCK_ACT_NONE), bad);
    cr_assert_eq(cck_dense_cuda(NULL, x, NULL, NULL, y + 4, 1, 1, 1, CCK_ACT_NONE), bad);
    cr_assert_eq(cck_dense_cuda(NULL, x, x + 1, NULL, NULL, 1, 1, 1, CCK_ACT_NONE), bad);
    cr_assert_eq(cck_dense_cuda(NULL, x, x + 1, NULL, y + 4, 0, 1, 1, CCK_ACT_NONE), bad);
    cr_assert_eq(cck_dense_cuda(NULL, x, x + 1, NULL, y + 4, 1, 0, 1, CCK_ACT_NONE), bad);
    cr_assert_eq(cck_dense_cuda(NULL, x, x + 1, NULL, y + 4, 1, 1, 0, CCK_ACT_NONE), bad);
    cr_assert_eq(cck_dense_cuda(NULL, x, x + 1, NULL, y + 4, 1, 1, 1, (cck_activation)3), bad);
    cr_assert_eq(cck_dense_cuda(NULL, x, x + 1, NULL, y, 1, 1, 1, CCK_ACT_NONE), bad); /* y aliases x */

    /* copies and sync */
    cr_assert_eq(cck_copy_to_device(NULL, y, x, 4), bad);
    cr_assert_eq(cck_copy_to_host(NULL, y, x, 4), bad);
    cr_assert_eq(cck_cuda_synchronize(NULL), bad);
}

/* After the context come the kernels' int range and empty copies, still
 * before the device (cuda_api.c's order): a context that is not NULL and
 * is never touched, and pointers that are never dereferenced, must get
 * CCK_ERR_UNSUPPORTED for a dimension past the int range, and CCK_OK for a
 * copy of 0 bytes, with or without a GPU. */
Test(kernels_cuda_api, the_int_range_and_empty_copies_come_before_the_device) {
    cck_cuda_context *ctx = (cck_cuda_context *)(uintptr_t)0x1000; /* never dereferenced */
    float *x = (float *)(uintptr_t)0x10000;
    float *far = (float *)((uintptr_t)1 << 44); /* past every range below */
    const size_t past = (size_t)INT_MAX - CCK_MAX_BLOCK + 1;
    /* softmax: the version's own default block (0), then the int range */
    cr_assert_eq(cck_softmax_cuda_version(ctx, 3, 0, x, x, past, 1), CCK_ERR_UNSUPPORTED);
    cr_assert_eq(cck_softmax_cuda_version(ctx, 1, 96, x, x, 1, past), CCK_ERR_UNSUPPORTED);
    cr_assert_eq(cck_softmax_cuda(ctx, x, x, past, 1), CCK_ERR_UNSUPPORTED); /* the dispatch table says so */
    cr_assert_eq(cck_softmax_cuda(ctx, x, x, 1, past), CCK_ERR_UNSUPPORTED);
    /* dense: cuBLAS's int dimensions */
    const size_t big = (size_t)INT_MAX + 1;
    cr_assert_eq(cck_dense_cuda(ctx, x, x, NULL, far, big, 1, 1, CCK_ACT_NONE), CCK_ERR_UNSUPPORTED);
    cr_assert_eq(cck_dense_cuda(ctx, x, x, NULL, far, 1, big, 1, CCK_ACT_NONE), CCK_ERR_UNSUPPORTED);
    cr_assert_eq(cck_dense_cuda(ctx, x, x, NULL, far, 1, 1, big, CCK_ACT_NONE), CCK_ERR_UNSUPPORTED);
    /* a copy of nothing is done at once, NULL pointers included */
    cr_assert_eq(cck_copy_to_device(ctx, x, far, 0), CCK_OK);
    cr_assert_eq(cck_copy_to_host(ctx, NULL, NULL, 0), CCK_OK);
    cr_assert_eq(cck_copy_to_device(ctx, NULL, far, 4), CCK_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cck_copy_to_host(ctx, x, NULL, 4), CCK_ERR_INVALID_ARGUMENT);
}

/* ---- the dense layer under an address-space limit --------------------- */

/* The process's address space now, in bytes (/proc/self/statm's first field). */
static size_t address_space_bytes(void) {
    unsigned long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    cr_assert_not_null(f);
    cr_assert_eq(fscanf(f, "%lu", &pages), 1);
    fclose(f);
    return (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
}

Test(kernels_host, dense_returns_under_an_address_space_limit, .timeout = 10) {
    enum { BATCH = 8, IN = 16, OUT = 8 };
    static float x[BATCH * IN], w[OUT * IN], b[OUT], y[BATCH * OUT], want[BATCH * OUT];
    for (size_t i = 0; i < BATCH * IN; i++)
        x[i] = (float)(i % 7) - 3.0f;
    for (size_t i = 0; i < OUT * IN; i++)
        w[i] = (float)(i % 5) * 0.25f;
    for (size_t i = 0; i < OUT; i++)
        b[i] = (float)i;
    cr_assert_eq(cck_dense_host_blocked(x, w, b, want, BATCH, IN, OUT, CCK_ACT_RELU), CCK_OK);
    struct rlimit old, low;
    cr_assert_eq(getrlimit(RLIMIT_AS, &old), 0);
    low = old;
    low.rlim_cur = (rlim_t)(address_space_bytes() + (64u << 20)); /* room for 64 MiB more, not 128 */
    cr_assert_eq(setrlimit(RLIMIT_AS, &low), 0, "setrlimit: %s", strerror(errno));
    cck_status st = cck_dense_host(x, w, b, y, BATCH, IN, OUT, CCK_ACT_RELU);
    int set_back = setrlimit(RLIMIT_AS, &old);
    cr_assert_eq(set_back, 0, "setrlimit back: %s", strerror(errno));
    cr_assert_eq(st, CCK_OK);
    for (size_t i = 0; i < BATCH * OUT; i++)
        cr_assert_eq(y[i], want[i], "y[%zu] = %g, want %g (exact: small integers and quarters)", i, y[i], want[i]);
}
