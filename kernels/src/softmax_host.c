/*
 * softmax_host.c — row-wise softmax on the CPU, and its double reference.
 *
 * Layout: x and y are rows × cols float32, row-major; row r starts at
 * x + r*cols. Each row is independent:
 *
 *     m    = max_j x[j]                       (pass 1: read the row)
 *     y[j] = exp(x[j] - m)                    (pass 2: read x, write y)
 *     s    = sum_j y[j]  (in double)          (pass 3: read y)
 *     y[j] = y[j] * (1/s)                     (pass 4: read and write y)
 *
 * Subtracting the row maximum makes every exponent <= 0, so exp never
 * overflows and the largest term is exactly 1 (the "safe" softmax). A row
 * usually stays in L1/L2 across the passes, so what they cost is
 * instructions, and every pass is written to be vectorized:
 *
 *   - the maximum as `x > m ? x : m` is a data-dependent branch that random
 *     data mispredicts about half the time (measured while writing this: ~2.4
 *     ns per element, as much as the old scalar expf); as an OpenMP SIMD
 *     max-reduction it becomes MAXPS over 4 lanes;
 *   - glibc's expf is a scalar call (a few ns); exp_nonpositive below is the
 *     same function written as straight-line arithmetic that GCC vectorizes:
 *         exp(d) = 2^n · exp(r),   n = round(d / ln 2),   r = d - n·ln 2
 *     with n·ln 2 subtracted in two parts (Cody-Waite: ln2_hi has few enough
 *     bits that n·ln2_hi is exact, so r keeps its precision), |r| <= ln2/2,
 *     exp(r) from the degree-6 polynomial of Cephes' expf, and 2^n built
 *     directly in the float's exponent bits. Relative error <= 1.4 ulp over
 *     [-87.3, 0] (measured against double exp on a 0.001 grid);
 *   - the sum is a SIMD reduction in double: it costs little and keeps long
 *     rows (32768 columns) as accurate as short ones.
 * The file is compiled with -fno-trapping-math (kernels/CMakeLists.txt): the
 * selects in exp_nonpositive may then be evaluated for every lane, which is
 * what lets GCC vectorize them; no result changes, only FP exception flags,
 * which nothing here reads. Without OpenMP the pragmas are ignored and the
 * same code runs scalar.
 *
 * y may equal x (in place): every pass reads element j before it writes
 * element j, and no pass reads an element another iteration wrote. With
 * OpenMP, rows are shared among threads (CCK_PARALLEL_FOR in cck_internal.h)
 * once a call has at least CCK_PARALLEL_MIN_ELEMS elements.
 *
 * NaN and infinity (the reference and every CUDA version behave the same,
 * and this is what torch.softmax does):
 *   - the maximum skips NaN (`NaN > m` is false), then exp(NaN - m) = NaN
 *     enters the sum, so a row containing a NaN comes out all NaN;
 *   - a +inf makes m = +inf and exp(inf - inf) = NaN: the row is all NaN;
 *   - -inf elements give exactly 0 when the row has a finite element;
 *   - a row of only -inf has m = -inf and exp(-inf + inf) = NaN: all NaN.
 * Exponents below -87.34 (results under FLT_MIN, 1.2e-38) give 0 where expf
 * would give a subnormal: invisible next to the row's largest term, 1.
 *
 * The reference (cck_softmax_reference) is the same passes with every
 * operation in double, for tests. Versions for the GPU are in softmax.cu.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cck_internal.h"

#ifdef _OPENMP
#define CCK_SIMD(clause) CCK_PRAGMA(omp simd clause)
#else
#define CCK_SIMD(clause)
#endif

/* exp(d) for d <= 0 or NaN, the only arguments softmax makes: x - m with m
 * the maximum of the row's non-NaN values is <= 0 or NaN (float rounding is
 * monotonic, and inf - inf is NaN). See the file comment for the method. */
static inline float exp_nonpositive(float d) {
    const float log2e = 1.44269504088896341f;
    const float ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f; /* ln2_hi + ln2_lo = ln 2 */
    const float lowest = -87.33654f;                             /* ln(FLT_MIN): 2^n stays a normal float */
    const float shifter = 12582912.0f;                           /* 1.5·2^23: (v + it) - it rounds v */
    /* the arithmetic below runs on every lane, NaN lanes too, so it gets a
     * copy clamped to [lowest, 0] (d <= 0 by the precondition; NaN fails the
     * `>` and becomes lowest): n is then in [-126, 0] and its conversion to
     * int and the shift are defined. The selects at the end put 0 and NaN
     * back. */
    float dc = d > lowest ? d : lowest;
    float n = (dc * log2e + shifter) - shifter;
    float r = dc - n * ln2_hi - n * ln2_lo;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23; /* 2^n, n in [-126, 0] */
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    float e = d < lowest ? 0.0f : p * scale;
    return d != d ? d : e; /* NaN stays NaN */
}

static float row_max(const float *xr, size_t cols) {
    float m = -INFINITY;
    CCK_SIMD(reduction(max : m))
    for (size_t j = 0; j < cols; j++) {
        m = xr[j] > m ? xr[j] : m; /* false for NaN: NaN is skipped */
    }
    return m;
}

cck_status cck_softmax_host(const float *x, float *y, size_t rows, size_t cols) {
    if (x == NULL || y == NULL || !cck_dims_ok(rows, cols)) {
        return CCK_ERR_INVALID_ARGUMENT;
    }
    CCK_PARALLEL_FOR(rows * cols >= CCK_PARALLEL_MIN_ELEMS)
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        float m = row_max(xr, cols);
        CCK_SIMD()
        for (size_t j = 0; j < cols; j++) {
            yr[j] = exp_nonpositive(xr[j] - m);
        }
        double s = 0.0;
        CCK_SIMD(reduction(+ : s))
        for (size_t j = 0; j < cols; j++) {
            s += yr[j];
        }
        float inv = (float)(1.0 / s);
        CCK_SIMD()
        for (size_t j = 0; j < cols; j++) {
            yr[j] *= inv;
        }
    }
    return CCK_OK;
}

void cck_softmax_reference(const float *x, double *y, size_t rows, size_t cols) {
    if (x == NULL || y == NULL || !cck_dims_ok(rows, cols)) {
        return;
    }
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        double *yr = y + r * cols;
        double m = -INFINITY;
        for (size_t j = 0; j < cols; j++) {
            m = fmax(m, (double)xr[j]);
        }
        double s = 0.0;
        for (size_t j = 0; j < cols; j++) {
            yr[j] = exp((double)xr[j] - m);
            s += yr[j];
        }
        for (size_t j = 0; j < cols; j++) {
            yr[j] /= s;
        }
    }
}
