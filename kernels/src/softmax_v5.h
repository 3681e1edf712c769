/*
 * softmax_v5.h — the per-thread part of softmax version 5 (softmax.cu),
 * written once for the GPU and for a CPU emulation of it.
 *
 * Version 5 reads every element of x from memory once and writes y once:
 * the row waits in the registers of the threads that share it (a warp for
 * rows of <= 1024 columns, a block for longer ones) while its maximum and
 * sum are merged. A row is split as in version 4 (softmax_online.h): a
 * scalar head up to the first 16-byte boundary, a body of n4 groups of 4
 * floats, a scalar tail of the < 4 floats left. Thread t of nt holds, for
 * chunk c of the row:
 *
 *     v[i], i < vpt:  body group  g = c·nt·vpt + i·nt + t   (-inf when g >= n4)
 *     head:           x[t]               if c = 0 and t < head   (else -inf)
 *     tail:           x[tail_start + t]  if c = 0 and t < #tail  (else -inf)
 *
 *     row:   [h h h][g0 g1 g2 ... g(nt-1)][g(nt) ... g(2nt-1)] ... [t t]
 *     slot:           v[0] of threads 0..nt-1  v[1] of threads 0..nt-1
 *
 * so slot i of a warp is one contiguous run of 512 bytes (a coalesced
 * 16-byte load per lane), and every thread issues all vpt loads of a chunk
 * before it uses any: vpt·16 bytes in flight per thread.
 *
 * Pass 1, maximum and sum together (online softmax, Milakov & Gimelshein
 * 2018): for each chunk, the pair of the thread's registers
 *
 *     m_c = max of its values (fmaxf: NaN skipped),   d_c = Σ exp(value - m_c)
 *
 * merged into the thread's running pair with the rule of softmax_online.h,
 * (m, d) ∘ (m_c, d_c) = (M, d·exp(m - M) + d_c·exp(m_c - M)), M = max(m, m_c).
 * The maximum of a chunk is taken over registers before any exp, so there is
 * one exp per element, where version 4's per-element update has two (and a
 * chain of dependent exps through the running pair).
 *
 * Pass 2, the output: y = exp(x - m)·(1/d). When the whole row is one chunk
 * (n4 <= nt·vpt: "resident", always so in a warp) the values are still in
 * v, head and tail; otherwise ("streaming", rows too long for the
 * registers) each chunk is loaded again, from L2 mostly, as version 4 does.
 *
 * The merge across threads is in softmax.cu (shuffles, one shared-memory
 * step); tests/kernels/test_kernels_emulated.c runs these functions for
 * every thread in turn and emulates that merge in the same order.
 *
 * Rules the tests check:
 * - -inf adds 0 to a sum (cck_v5_exp), also in a chunk whose values are all
 *   -inf, where exp(-inf - -inf) would be NaN; so [-inf, 1] stays finite.
 *   NaN still reaches the sum (exp(NaN - m) = NaN, even when m = -inf),
 *   and +inf makes it NaN (exp(inf - inf)): as the reference and v1-v4.
 * - the merge is commutative to the bit: cck_v5_merge multiplies with
 *   cck_mul_rn, which on the device is __fmul_rn and so never contracted into
 *   an FMA with the add (a·b + c·d contracted to fma(a, b, c·d) rounds
 *   differently from fma(c, d, a·b)). So after a butterfly every lane holds
 *   the same pair and every thread of a row scales by the same 1/d.
 * - each element is read and written by one thread, and in a resident row
 *   every read comes before the merge, every write after: y may equal x.
 *
 * Under nvcc every function is CCK_HD; the kernels pass vpt and resident as
 * template constants, so after inlining the CCK_UNROLL loops unroll fully
 * and v[] is registers (kernel_resources.sh checks: no stack frame).
 */
#ifndef CCK_SOFTMAX_V5_H
#define CCK_SOFTMAX_V5_H

#include "softmax_online.h"

/* The largest vpt the kernels instantiate (32 floats of a row per thread). */
#define CCK_V5_MAX_VPT 8

/* The register tile of a launch: vpt float4 per thread, and whether the
 * row stays resident. */
typedef struct cck_v5_tile {
    int vpt, resident;
} cck_v5_tile;

/* The tile softmax.cu launches for rows of cols columns shared by nt
 * threads (warp: nt = 32, cols <= 1024): the smallest vpt of 1, 2, 4, 8
 * (warp) or 2, 4, 8 (block) whose nt·vpt groups hold the longest body a row
 * can have, cols/4 groups whatever the row's alignment; when even 8 does not
 * (block mode only), chunks of 8 and resident = 0. */
CCK_HD cck_v5_tile cck_v5_pick_tile(int cols, int nt, int warp) {
    int n4 = cols / 4;
    cck_v5_tile tile = {CCK_V5_MAX_VPT, 1};
    for (int vpt = warp ? 1 : 2; vpt < CCK_V5_MAX_VPT; vpt *= 2) {
        if (n4 <= nt * vpt) {
            tile.vpt = vpt;
            return tile;
        }
    }
    tile.resident = n4 <= nt * CCK_V5_MAX_VPT;
    return tile;
}

/* a·b rounded, never fused with a neighbouring add into an FMA. */
CCK_HD float cck_mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b; /* C11 (-std=c11) does not contract across statements or here */
#endif
}

/* The online merge of two pairs, commutative to the bit (see above). An
 * empty pair (-inf, 0) merges as nothing: merge(p, empty) == p exactly. */
CCK_HD cck_md_pair cck_v5_merge(cck_md_pair a, cck_md_pair b) {
    float m = fmaxf(a.m, b.m);
    cck_md_pair r = {m, cck_mul_rn(a.d, cck_md_rescale(a.m, m)) + cck_mul_rn(b.d, cck_md_rescale(b.m, m))};
    return r;
}

/* exp(v - m) for a value v whose chunk has maximum m; -inf adds 0. */
CCK_HD float cck_v5_exp(float v, float m) {
    return v == -INFINITY ? 0.0f : expf(v - m);
}

/* Chunks of nt·vpt groups in a body of n4 groups; at least 1, since chunk
 * 0 also carries the head and the tail. */
CCK_HD int cck_v5_chunks(int n4, int nt, int vpt) {
    int per = nt * vpt;
    return n4 <= per ? 1 : (n4 - 1) / per + 1;
}

/* Load chunk c of thread t into v[0..vpt), and for c = 0 its head and tail
 * scalars (-inf where the thread has none). */
CCK_HD void cck_v5_load(const float *xr, int cols, cck_row_split s, int c, int t, int nt, int vpt, cck_float4 *v,
                        float *head, float *tail) {
    const float *body = xr + s.head;
    int first = c * nt * vpt + t;
    CCK_UNROLL
    for (int i = 0; i < vpt; i++) {
        int g = first + i * nt;
        if (g < s.n4) {
            v[i] = cck_load4(body + 4 * g);
        } else {
            cck_float4 none = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
            v[i] = none;
        }
    }
    *head = c == 0 && t < s.head ? xr[t] : -INFINITY;
    *tail = c == 0 && s.tail_start + t < cols ? xr[s.tail_start + t] : -INFINITY;
}

/* The pair of the thread's registers: the maximum (NaN skipped), then the
 * sum of exp(value - max). */
CCK_HD cck_md_pair cck_v5_pair(const cck_float4 *v, int vpt, float head, float tail) {
    float m = fmaxf(head, tail);
    CCK_UNROLL
    for (int i = 0; i < vpt; i++) {
        m = fmaxf(m, fmaxf(fmaxf(v[i].x, v[i].y), fmaxf(v[i].z, v[i].w)));
    }
    float d = cck_v5_exp(head, m) + cck_v5_exp(tail, m);
    CCK_UNROLL
    for (int i = 0; i < vpt; i++) {
        d += (cck_v5_exp(v[i].x, m) + cck_v5_exp(v[i].y, m)) + (cck_v5_exp(v[i].z, m) + cck_v5_exp(v[i].w, m));
    }
    cck_md_pair p = {m, d};
    return p;
}

/* Pass 1 of thread t of nt: its running pair over every chunk of the row.
 * resident (the caller guarantees n4 <= nt·vpt): one chunk, which stays in
 * v, head and tail for pass 2. */
CCK_HD cck_md_pair cck_v5_pass1(const float *xr, int cols, cck_row_split s, int t, int nt, int vpt, int resident,
                                cck_float4 *v, float *head, float *tail) {
    cck_md_pair p = {-INFINITY, 0.0f};
    int chunks = resident ? 1 : cck_v5_chunks(s.n4, nt, vpt);
    for (int c = 0; c < chunks; c++) {
        cck_v5_load(xr, cols, s, c, t, nt, vpt, v, head, tail);
        p = cck_v5_merge(p, cck_v5_pair(v, vpt, *head, *tail));
    }
    return p;
}

/* Pass 2 of thread t: y = exp(x - m)·inv over its elements, from the
 * registers when resident, else chunk by chunk from x again. y's rows may
 * be aligned differently from x's (y = x + 1 row of odd length): then the
 * body is stored as scalars. Stores stream (__stcs), as in version 4. */
CCK_HD void cck_v5_pass2(const float *xr, float *yr, int cols, cck_row_split s, int t, int nt, int vpt, int resident,
                         cck_float4 *v, float head, float tail, float m, float inv) {
    float *yb = yr + s.head;
    int y_aligned = ((uintptr_t)yb & 15u) == 0;
    int chunks = resident ? 1 : cck_v5_chunks(s.n4, nt, vpt);
    for (int c = 0; c < chunks; c++) {
        if (!resident) {
            cck_v5_load(xr, cols, s, c, t, nt, vpt, v, &head, &tail);
        }
        int first = c * nt * vpt + t;
        CCK_UNROLL
        for (int i = 0; i < vpt; i++) {
            int g = first + i * nt;
            if (g < s.n4) {
                cck_float4 o = {expf(v[i].x - m) * inv, expf(v[i].y - m) * inv, expf(v[i].z - m) * inv,
                                expf(v[i].w - m) * inv};
                cck_store_group_cs(yb, g, o, y_aligned);
            }
        }
        if (c == 0 && t < s.head) {
            cck_store_cs(yr + t, expf(head - m) * inv);
        }
        if (c == 0 && s.tail_start + t < cols) {
            cck_store_cs(yr + s.tail_start + t, expf(tail - m) * inv);
        }
    }
}

#endif /* CCK_SOFTMAX_V5_H */
