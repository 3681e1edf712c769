/*
 * softmax_online.h — the per-thread part of softmax version 4 (softmax.cu),
 * written once for the GPU and for a CPU emulation of it.
 *
 * Version 4 splits each row among `nt` threads (a warp, or a block). Each
 * thread walks its share of the row keeping a running pair (m, d): the
 * maximum so far and the sum of exp(x - m) so far (Milakov & Gimelshein 2018,
 * "Online normalizer calculation for softmax"):
 *
 *     add x:        m' = max(m, x),      d' = d·exp(m - m') + exp(x - m')
 *     merge (a, b): m  = max(a.m, b.m),  d  = a.d·exp(a.m - m) + b.d·exp(b.m - m)
 *
 * then the pairs of all threads are merged (warp shuffles or CUB's
 * BlockReduce, in softmax.cu: the only parts not in this file) and every
 * thread writes its share of y = exp(x - m) / d.
 *
 * A row is split for 16-byte accesses:
 *
 *     [head: scalars up to the first 16-byte boundary of the row]
 *     [body: n4 groups of 4 floats, 16-byte aligned]
 *     [tail: the cols - head - 4·n4 scalars left]
 *
 * so any cols (1 included: all head) and any row start work; thread t of nt
 * takes elements t, t+nt, ... of the head, groups t, t+nt, ... of the body,
 * and likewise of the tail. Pass 2 splits the row exactly as pass 1 did, so
 * each element is read and written by the same thread (y may equal x).
 *
 * Invariants the tests check on the CPU (tests/kernels/test_kernels_emulated.c runs
 * these functions with the warp's butterfly merge emulated lane by lane):
 * every element is in exactly one of head, body or tail; body groups start
 * 16-byte aligned; a pair whose m is -inf holds d = 0 (or NaN), so its
 * rescale factor is taken as 0 rather than exp(-inf - -inf) = NaN, which
 * keeps rows like [-inf, 1] finite while NaN still propagates (NaN·0 = NaN).
 *
 * Compiled by nvcc (softmax.cu) every function is CCK_HD (hostdevice.h): on the
 * device the body uses LDG.128 / STG.128 (the streaming __stcs store), on the
 * host plain loads and stores through memcpy. Compiled as C (the emulation
 * test), it is plain static inline C11.
 */
#ifndef CCK_SOFTMAX_ONLINE_H
#define CCK_SOFTMAX_ONLINE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "hostdevice.h"

/* Four floats: CUDA's float4 on the device, a plain struct on the host. */
#ifdef __CUDACC__
typedef float4 cck_float4;
#else
typedef struct cck_float4 {
    float x, y, z, w;
} cck_float4;
#endif

/* 16 bytes at p (16-byte aligned): one LDG.128 on the device. */
CCK_HD cck_float4 cck_load4(const float *p) {
#ifdef __CUDA_ARCH__
    return *(const float4 *)p;
#else
    cck_float4 v;
    memcpy(&v, p, sizeof v);
    return v;
#endif
}

/* Streaming stores (__stcs: "evict first"), so y does not push x out of L2
 * before its second read; plain stores on the host. */
CCK_HD void cck_store_cs(float *p, float v) {
#ifdef __CUDA_ARCH__
    __stcs(p, v);
#else
    *p = v;
#endif
}

CCK_HD void cck_store4_cs(float *p, cck_float4 v) {
#ifdef __CUDA_ARCH__
    __stcs((float4 *)p, v);
#else
    memcpy(p, &v, sizeof v);
#endif
}

/* Group g (floats 4g..4g+3) of a row body yb: one streaming 16-byte store
 * when yb is 16-byte aligned, else four streaming scalar stores (y's rows
 * may be aligned differently from x's: y = x + 1 row of odd length, say).
 * Version 5 calls it; version 4 (cck_row_write) keeps the same lines inline:
 * with the call, ptxas allocated softmax_kernel4_block<1024> for sm_80
 * differently and it spilled 4 bytes (kernel_resources.sh --check), and v4
 * is a measured kernel whose code should not move under its figures. */
CCK_HD void cck_store_group_cs(float *yb, int g, cck_float4 v, int aligned) {
    if (aligned) {
        cck_store4_cs(yb + 4 * g, v);
    } else {
        cck_store_cs(yb + 4 * g + 0, v.x);
        cck_store_cs(yb + 4 * g + 1, v.y);
        cck_store_cs(yb + 4 * g + 2, v.z);
        cck_store_cs(yb + 4 * g + 3, v.w);
    }
}

/* The running pair: maximum so far and sum of exp(x - m) so far. */
typedef struct cck_md_pair {
    float m;
    float d;
} cck_md_pair;

/* Factor taking a sum relative to m_old to one relative to m_new >= m_old;
 * 0 for m_old = -inf (see the invariants above). */
CCK_HD float cck_md_rescale(float m_old, float m_new) {
    return m_old == -INFINITY ? 0.0f : expf(m_old - m_new);
}

CCK_HD cck_md_pair cck_md_add(cck_md_pair p, float v) {
    float m = fmaxf(p.m, v);
    float e = v == -INFINITY ? 0.0f : expf(v - m);
    cck_md_pair r = {m, p.d * cck_md_rescale(p.m, m) + e};
    return r;
}

/* Commutative on the host: merge(a, b) and merge(b, a) give the same floats,
 * so after the emulated butterfly every lane holds the same pair. On the
 * device nvcc contracts a.d·ra + b.d·rb into an FMA (fma.rn.f32 in
 * softmax_kernel4_warp's PTX), which rounds differently with a and b
 * swapped: a warp's lanes may end with sums a few ulps apart, each scaling
 * its own elements by its own 1/d, within the tolerance. Version 5's merge
 * (softmax_v5.h) keeps the multiplies apart and the lanes equal. */
CCK_HD cck_md_pair cck_md_merge(cck_md_pair a, cck_md_pair b) {
    float m = fmaxf(a.m, b.m);
    cck_md_pair r = {m, a.d * cck_md_rescale(a.m, m) + b.d * cck_md_rescale(b.m, m)};
    return r;
}

typedef struct cck_row_split {
    int head, n4, tail_start;
} cck_row_split;

CCK_HD cck_row_split cck_split_row(const float *xr, int cols) {
    int head = (int)((16u - ((uintptr_t)xr & 15u)) & 15u) / 4;
    head = head < cols ? head : cols;
    int n4 = (cols - head) / 4;
    cck_row_split s = {head, n4, head + 4 * n4};
    return s;
}

/* Pass 1 for thread t of nt sharing the row: its running pair. */
CCK_HD cck_md_pair cck_row_pair(const float *xr, int cols, cck_row_split s, int t, int nt) {
    cck_md_pair p = {-INFINITY, 0.0f};
    for (int j = t; j < s.head; j += nt) {
        p = cck_md_add(p, xr[j]);
    }
    const float *body = xr + s.head;
    for (int i = t; i < s.n4; i += nt) {
        cck_float4 v = cck_load4(body + 4 * i);
        p = cck_md_add(cck_md_add(cck_md_add(cck_md_add(p, v.x), v.y), v.z), v.w);
    }
    for (int j = s.tail_start + t; j < cols; j += nt) {
        p = cck_md_add(p, xr[j]);
    }
    return p;
}

/* Pass 2 for thread t of nt: y = exp(x - m) * inv over the same elements.
 * y's rows may be aligned differently from x's (y = x + 1 row of odd
 * length, say); then the body is stored as scalars. */
CCK_HD void cck_row_write(const float *xr, float *yr, int cols, cck_row_split s, int t, int nt, float m, float inv) {
    for (int j = t; j < s.head; j += nt) {
        cck_store_cs(yr + j, expf(xr[j] - m) * inv);
    }
    const float *xb = xr + s.head;
    float *yb = yr + s.head;
    int y_aligned = ((uintptr_t)yb & 15u) == 0;
    for (int i = t; i < s.n4; i += nt) {
        cck_float4 v = cck_load4(xb + 4 * i);
        cck_float4 o = {expf(v.x - m) * inv, expf(v.y - m) * inv, expf(v.z - m) * inv, expf(v.w - m) * inv};
        if (y_aligned) {
            cck_store4_cs(yb + 4 * i, o);
        } else {
            cck_store_cs(yb + 4 * i + 0, o.x);
            cck_store_cs(yb + 4 * i + 1, o.y);
            cck_store_cs(yb + 4 * i + 2, o.z);
            cck_store_cs(yb + 4 * i + 3, o.w);
        }
    }
    for (int j = s.tail_start + t; j < cols; j += nt) {
        cck_store_cs(yr + j, expf(xr[j] - m) * inv);
    }
}

#endif /* CCK_SOFTMAX_ONLINE_H */
