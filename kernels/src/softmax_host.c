/*
 * softmax_host.c — row-wise softmax on the CPU, and its double reference.
 *
 * Layout: x and y are rows × cols float32, row-major; row r starts at
 * x + r*cols. Each row is independent:
 *
 *     m    = max_j x[j]                       (pass 1: read the row)
 *     y[j] = exp(x[j] - m),  s = sum_j y[j]   (pass 2: read x, write y)
 *     y[j] = y[j] * (1/s)                     (pass 3: read and write y)
 *
 * Subtracting the row maximum makes every exponent <= 0, so exp never
 * overflows and the largest term is exactly 1 (the "safe" softmax). Costs per
 * row: cols expf calls (the bulk of the time: glibc's scalar expf is a few ns),
 * 3 streaming passes over a row that usually stays in L1/L2. y may equal x
 * (in place): every pass reads element j before it writes element j. The sum
 * is kept in double: it costs nothing next to expf and keeps long rows
 * (32768 columns) as accurate as short ones. With OpenMP, rows are shared
 * among threads (CCK_PARALLEL_FOR in cck_internal.h) once a call has at least
 * CCK_PARALLEL_MIN_ELEMS elements.
 *
 * NaN and infinity (the reference and every CUDA version behave the same,
 * and this is what torch.softmax does):
 *   - the maximum skips NaN (fmax semantics), then exp(NaN - m) = NaN enters
 *     the sum, so a row containing a NaN comes out all NaN;
 *   - a +inf makes m = +inf and exp(inf - inf) = NaN: the row is all NaN;
 *   - -inf elements give exactly 0 when the row has a finite element;
 *   - a row of only -inf has m = -inf and exp(-inf + inf) = NaN: all NaN.
 *
 * The reference (cck_softmax_reference) is the same three passes with every
 * operation in double, for tests. Versions for the GPU are in softmax.cu.
 */
#include <math.h>

#include "cck_internal.h"

cck_status cck_softmax_host(const float *x, float *y, size_t rows, size_t cols) {
    if (x == NULL || y == NULL || !cck_dims_ok(rows, cols)) {
        return CCK_ERR_INVALID_ARGUMENT;
    }
    CCK_PARALLEL_FOR(rows * cols >= CCK_PARALLEL_MIN_ELEMS)
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        float m = -INFINITY;
        for (size_t j = 0; j < cols; j++) {
            m = xr[j] > m ? xr[j] : m; /* false for NaN: NaN is skipped, like fmaxf */
        }
        double s = 0.0;
        for (size_t j = 0; j < cols; j++) {
            float e = expf(xr[j] - m);
            yr[j] = e;
            s += e;
        }
        float inv = (float)(1.0 / s);
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
