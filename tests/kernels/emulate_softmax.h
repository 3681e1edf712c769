/*
 * emulate_softmax.h — the CUDA softmax versions 2-5 run on the CPU, thread
 * by thread, for test_kernels_emulated.c and test_softmax_dispatch.c.
 *
 * Each version's per-thread code is the kernels' own (kernels/src:
 * softmax_strided.h for v2 and v3, softmax_online.h for v4, softmax_v5.h
 * for v5, compiled here as plain C); what is CUDA-only is the merge across
 * threads, emulated here:
 *
 *   - a warp's butterfly (__shfl_xor_sync, offsets 16, 8, 4, 2, 1) lane by
 *     lane, every lane of every warp at once, exactly as the shuffle pairs
 *     them (v2, v4, v5, and the first step of every block merge);
 *   - v3 and v4 in block mode: CUB's BlockReduce, emulated as each warp's
 *     butterfly and then the warps' results merged in order. CUB's own
 *     order within a warp differs (a shuffle-down tree), so the GPU's sum may
 *     differ from this one in the last bits: the tolerance allows it;
 *   - v5 in block mode: exactly as block_md5 in softmax.cu (each warp's
 *     butterfly, the warps' pairs through "shared memory", then every warp's
 *     butterfly over them, lanes >= the warp count holding the empty pair).
 *
 * After each merge the emulation asserts that every thread of a row holds
 * the same floats (NaN with NaN). v5's threads do on the device too (its
 * merge is written so); v4's lanes only on the host, since on the device
 * nvcc fuses v4's merge into an FMA (cck_md_merge). Not emulated:
 * timing, coalescing, CUDA's expf (<= 2 ulp against glibc's < 1 here),
 * the FMA contractions of the device code.
 */
#ifndef EMULATE_SOFTMAX_H
#define EMULATE_SOFTMAX_H

#include <string.h>

#include "kernels_check.h"
#include "softmax_online.h"
#include "softmax_strided.h"
#include "softmax_v5.h"

/* Rows of more than this many columns use one block per row (v4, v5). */
#define EMU_WARP_COLS 1024

static inline int emu_same(float a, float b) {
    return a == b || (isnan(a) && isnan(b));
}

/* ---- v2 and v3: strided passes, max and sum merged separately ---------- */

typedef float (*emu_op)(float, float);
static inline float emu_max(float a, float b) {
    return fmaxf(a, b);
}
static inline float emu_add(float a, float b) {
    return a + b;
}

/* v[0..nt): each warp's butterfly, then (block) the warps' results in
 * order. Every v[t] ends equal to the result. */
static inline float emu_merge_floats(float *v, int nt, emu_op op) {
    float next[1024];
    for (int off = 16; off > 0; off >>= 1) {
        for (int t = 0; t < nt; t++)
            next[t] = op(v[t], v[t ^ off]);
        memcpy(v, next, (size_t)nt * sizeof *v);
    }
    for (int t = 0; t < nt; t++)
        cr_assert(emu_same(v[t], v[t & ~31]), "lane %d: %g, lane %d: %g after the butterfly", t, v[t], t & ~31,
                  v[t & ~31]);
    float r = v[0];
    for (int w = 32; w < nt; w += 32)
        r = op(r, v[w]);
    for (int t = 0; t < nt; t++)
        v[t] = r;
    return r;
}

/* One row through nt threads of version 2 (nt = 32) or 3 (nt = block). */
static inline void emulate_strided_row(const float *xr, float *yr, int cols, int nt) {
    float v[1024];
    for (int t = 0; t < nt; t++)
        v[t] = cck_strided_max(xr, cols, t, nt);
    float m = emu_merge_floats(v, nt, emu_max);
    for (int t = 0; t < nt; t++)
        v[t] = cck_strided_sum(xr, cols, t, nt, m);
    float inv = 1.0f / emu_merge_floats(v, nt, emu_add);
    for (int t = 0; t < nt; t++)
        cck_strided_write(xr, yr, cols, t, nt, m, inv);
}

/* ---- v4: running pairs ---------------------------------------------------- */

/* One row through nt threads of version 4: warp = 1 the butterfly of
 * warp_md (nt = 32); warp = 0 a block of nt threads. */
static inline void emulate_v4_row(const float *xr, float *yr, int cols, int nt, int warp) {
    cck_row_split s = cck_split_row(xr, cols);
    cck_md_pair p[1024], next[1024];
    for (int t = 0; t < nt; t++)
        p[t] = cck_row_pair(xr, cols, s, t, nt);
    for (int off = 16; off > 0; off >>= 1) { /* every warp at once, as the shuffle does */
        for (int t = 0; t < nt; t++)
            next[t] = cck_md_merge(p[t], p[t ^ off]);
        memcpy(p, next, (size_t)nt * sizeof *p);
    }
    for (int t = 0; t < nt; t++) /* after the butterfly, a warp's lanes agree exactly (NaN with NaN) */
        cr_assert(emu_same(p[t].m, p[t & ~31].m) && emu_same(p[t].d, p[t & ~31].d),
                  "lane %d: (%g, %g), lane %d: (%g, %g)", t, p[t].m, p[t].d, t & ~31, p[t & ~31].m, p[t & ~31].d);
    cck_md_pair all = p[0];
    if (!warp) {
        for (int w = 32; w < nt; w += 32)
            all = cck_md_merge(all, p[w]);
    }
    for (int t = 0; t < nt; t++)
        cck_row_write(xr, yr, cols, s, t, nt, all.m, 1.0f / all.d);
}

/* ---- v5: registers, pairs of chunks --------------------------------------- */

/* The butterfly of warp_md5 over every warp of p[0..nt) at once. */
static inline void emu_v5_butterfly(cck_md_pair *p, int nt) {
    cck_md_pair next[1024];
    for (int off = 16; off > 0; off >>= 1) {
        for (int t = 0; t < nt; t++)
            next[t] = cck_v5_merge(p[t], p[t ^ off]);
        memcpy(p, next, (size_t)nt * sizeof *p);
    }
}

/* One row through nt threads of version 5 with the tile the launcher picks
 * (cck_v5_pick_tile): warp = 1 for one warp (nt = 32), else a block. Every
 * thread's registers (v, head, tail) persist from pass 1 to pass 2, as on
 * the GPU. Returns the tile, for tests that want to know which path ran. */
static inline cck_v5_tile emulate_v5_row(const float *xr, float *yr, int cols, int nt, int warp) {
    cck_v5_tile tile = cck_v5_pick_tile(cols, nt, warp);
    cck_row_split s = cck_split_row(xr, cols);
    cck_float4 *v = xmalloc((size_t)nt * CCK_V5_MAX_VPT * sizeof *v);
    float head[1024], tail[1024];
    cck_md_pair p[1024];
    for (int t = 0; t < nt; t++)
        p[t] = cck_v5_pass1(xr, cols, s, t, nt, tile.vpt, tile.resident, v + (size_t)t * CCK_V5_MAX_VPT, &head[t],
                            &tail[t]);
    emu_v5_butterfly(p, nt);
    int nw = nt / 32;
    if (!warp && nw > 1) { /* block_md5: lane 0 of each warp to shared memory, then every warp again */
        cck_md_pair part[32];
        for (int w = 0; w < nw; w++)
            part[w] = p[32 * w];
        for (int t = 0; t < nt; t++) {
            int lane = t % 32;
            cck_md_pair empty = {-INFINITY, 0.0f};
            p[t] = lane < nw ? part[lane] : empty;
        }
        emu_v5_butterfly(p, nt);
    }
    int last = warp ? 32 : nt; /* a warp's lanes agree; in a block, every thread */
    for (int t = 0; t < nt; t++) {
        int ref = t / last * last;
        cr_assert(emu_same(p[t].m, p[ref].m) && emu_same(p[t].d, p[ref].d),
                  "v5 nt=%d cols=%d: thread %d holds (%g, %g), thread %d (%g, %g)", nt, cols, t, p[t].m, p[t].d, ref,
                  p[ref].m, p[ref].d);
    }
    for (int t = 0; t < nt; t++)
        cck_v5_pass2(xr, yr, cols, s, t, nt, tile.vpt, tile.resident, v + (size_t)t * CCK_V5_MAX_VPT, head[t], tail[t],
                     p[t].m, 1.0f / p[t].d);
    free(v);
    return tile;
}

/* ---- any version ------------------------------------------------------------ */

/* One row through version 2..5 with nt threads: warp = 1 for one warp per
 * row (nt = 32; version 2 always), warp = 0 for a block of nt. */
static inline void emulate_row(int version, const float *xr, float *yr, int cols, int nt, int warp) {
    switch (version) {
    case 2: emulate_strided_row(xr, yr, cols, 32); break;
    case 3: emulate_strided_row(xr, yr, cols, nt); break;
    case 4: emulate_v4_row(xr, yr, cols, nt, warp); break;
    case 5: (void)emulate_v5_row(xr, yr, cols, nt, warp); break;
    default: cr_assert_fail("no CPU emulation of softmax version %d", version);
    }
}

/* rows × cols as cck_softmax_cuda_version(version, block) launches it:
 * versions 4 and 5 one warp per row up to 1024 columns (the block then only
 * sets how many rows share one), else one block of `block` threads. */
static inline void emulate_version(int version, int block, const float *x, float *y, size_t rows, size_t cols) {
    int warp = version == 2 || ((version == 4 || version == 5) && cols <= EMU_WARP_COLS);
    cr_assert(block >= 32 && block <= 1024, "emulate_version: block %d", block);
    for (size_t r = 0; r < rows; r++)
        emulate_row(version, x + r * cols, y + r * cols, (int)cols, warp ? 32 : block, warp);
}

#endif /* EMULATE_SOFTMAX_H */
