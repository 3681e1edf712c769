/*
 * softmax_strided.h — the per-thread part of softmax versions 2 and 3
 * (softmax.cu), written once for the GPU and for a CPU emulation of them.
 *
 * Both versions split a row among `nt` threads by striding: thread t of nt
 * takes elements t, t+nt, t+2nt, ... (a warp in version 2, nt = 32; a
 * block in version 3). Consecutive threads read consecutive floats, so each
 * warp-wide load is one contiguous run of 128 bytes (coalesced). Three
 * passes over the row, each of them a loop below:
 *
 *     m_t = max of the thread's elements   -> merged over the nt threads: m
 *     s_t = sum of exp(x - m)              -> merged over the nt threads: s
 *     y   = exp(x - m) · (1/s)             (each thread its own elements)
 *
 * Only the merges are CUDA-only (warp shuffles in version 2, CUB's
 * BlockReduce in version 3). tests/kernels/test_kernels_emulated.c runs these
 * functions for every thread in turn with the merges emulated, so the index
 * arithmetic and the NaN/inf behaviour of the two versions the dispatch
 * (softmax_dispatch.c) chooses most often are checked on every machine.
 *
 * Each element is read and then written by the same thread, after the row's
 * m and s are known: y may equal x.
 */
#ifndef CCK_SOFTMAX_STRIDED_H
#define CCK_SOFTMAX_STRIDED_H

#include <math.h>

#include "hostdevice.h"

/* Pass 1 of thread t of nt: the maximum of its elements (fmaxf skips NaN;
 * -inf for a thread with no element). */
CCK_HD float cck_strided_max(const float *xr, int cols, int t, int nt) {
    float m = -INFINITY;
    for (int j = t; j < cols; j += nt) {
        m = fmaxf(m, xr[j]);
    }
    return m;
}

/* Pass 2: the sum of exp(x - m) over its elements (NaN enters the sum). */
CCK_HD float cck_strided_sum(const float *xr, int cols, int t, int nt, float m) {
    float s = 0.0f;
    for (int j = t; j < cols; j += nt) {
        s += expf(xr[j] - m);
    }
    return s;
}

/* Pass 3: y = exp(x - m) * inv over its elements. */
CCK_HD void cck_strided_write(const float *xr, float *yr, int cols, int t, int nt, float m, float inv) {
    for (int j = t; j < cols; j += nt) {
        yr[j] = expf(xr[j] - m) * inv;
    }
}

#endif /* CCK_SOFTMAX_STRIDED_H */
