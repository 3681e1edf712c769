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
 *   - glibc's expf is a scalar call (a few ns); cck_exp_nonpositive
 *     (exp_host.h) is the same function for arguments <= 0 as straight-line
 *     arithmetic that GCC vectorizes (Cody-Waite range reduction, a degree-6
 *     polynomial, 2^n built in the exponent bits; < 1 ulp);
 *   - the sum is a SIMD reduction in double: it costs little and keeps long
 *     rows (32768 columns) as accurate as short ones.
 * The file is compiled with -fno-trapping-math (see exp_host.h). Without
 * OpenMP the pragmas are ignored and the same code runs scalar. The row
 * function is built twice, for AVX2 and for the baseline, and the CPU picks
 * (CCK_VECTOR_CLONES in cck_internal.h): 8 lanes instead of 4.
 *
 * y may equal x (in place): every pass reads element j before it writes
 * element j, and no pass reads an element another iteration wrote. Any
 * other overlap of y with x (y = x + 1, or y starting in x's next row) would
 * read elements already overwritten, and is refused with
 * CCK_ERR_INVALID_ARGUMENT (cck_softmax_args_ok, common.c). With
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

#include "cck_internal.h"
#include "exp_host.h"

static inline float row_max(const float *xr, size_t cols) {
    float m = -INFINITY;
    CCK_SIMD(reduction(max : m))
    for (size_t j = 0; j < cols; j++) {
        m = xr[j] > m ? xr[j] : m; /* false for NaN: NaN is skipped */
    }
    return m;
}

/* One row, the four passes; built for AVX2 and for the baseline. */
CCK_VECTOR_CLONES static void softmax_row(const float *xr, float *yr, size_t cols) {
    float m = row_max(xr, cols);
    CCK_SIMD()
    for (size_t j = 0; j < cols; j++) {
        yr[j] = cck_exp_nonpositive(xr[j] - m); /* x - m <= 0 or NaN: the max skipped NaN */
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

cck_status cck_softmax_host(const float *x, float *y, size_t rows, size_t cols) {
    if (!cck_softmax_args_ok(x, y, rows, cols)) {
        return CCK_ERR_INVALID_ARGUMENT;
    }
    CCK_PARALLEL_FOR(rows * cols >= CCK_PARALLEL_MIN_ELEMS)
    for (size_t r = 0; r < rows; r++) {
        softmax_row(x + r * cols, y + r * cols, cols);
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
