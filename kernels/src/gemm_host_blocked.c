/*
 * gemm_host_blocked.c — y = x · Wᵀ on the CPU in plain C11: the built-in GEMM.
 *
 * cck_dense_host (dense_host.c) uses a real BLAS (OpenBLAS) when the library
 * is built with one; this loop is what it uses otherwise, and it stays in the
 * library as the teaching version of a cache-blocked GEMM (the benchmark
 * prints both, and the tests check both against the double reference).
 *
 * Layout (row-major float32, PyTorch nn.Linear):
 *     x[batch][in], W[out][in], y[batch][out]
 * so y[r][o] is the dot product of row r of x with row o of W.
 *
 *     for each panel of NR = 8 outputs  o0..o0+7
 *       for each slice of KC = 256 inputs k0..k0+255
 *         pack P[k][j] = W[o0+j][k0+k]            KC×NR floats = 8 KiB, L1
 *         for each group of MR = 4 batch rows r0..r0+3
 *           acc[4][8] (+)= x[r0..r0+3][k0..] · P   the micro-kernel
 *
 *          P (KC × NR, packed)            acc (MR × NR) lives in registers:
 *         k → +--------+                  for each k, 4 broadcasts of x
 *             |  8 W   |   x rows  ---->  times one row of P (8 floats),
 *             | columns|   r0..r0+3       32 multiply-adds, no reduction
 *             +--------+                  across lanes, so the compiler
 *                                         vectorizes it without -ffast-math.
 *
 * Packing makes the inner loop read W contiguously (W rows are long and
 * strided by `in` otherwise); 32 accumulators fit the 16 SSE registers of
 * baseline x86-64 with room for the operands. Partial sums live in y between
 * K slices, so no scratch memory is allocated (the packed panel is on the
 * stack). Cost: 2·batch·in·out flops; memory: W is read once per call, x once
 * per 8 outputs (from cache when batch·in floats fit L2). With OpenMP the
 * output panels are shared among threads (each packs its own panel; the
 * panels write disjoint columns of y), once batch·in·out >= CCK_PARALLEL_MIN_MACS.
 *
 * What it leaves on the table, and why OpenBLAS is ~15x faster on the same
 * two cores (docs/kernels.md has the measured table): one fixed register
 * tile for baseline SSE where OpenBLAS picks AVX2 or AVX-512 kernels at run
 * time for the CPU it finds; no packing of x (OpenBLAS packs both operands
 * into L2-sized blocks); no prefetching.
 *
 * Accuracy: each y is a float sum of `in` products, summed in slices of 256;
 * its error against the double reference is bounded by a small multiple of
 * in·2⁻²⁴·Σ|x·w| and is typically √in·2⁻²⁴·Σ|x·w|.
 */
#include <assert.h>
#include <string.h>

#include "cck_internal.h"

#define MR 4
#define NR 8
#define KC 256

/* acc[MR][NR] (+)= x[MR rows][kc] · P[kc][NR]; mr <= MR rows, nr <= NR cols
 * valid. Rows beyond mr read row 0 again (harmless, never stored). */
static void micro_kernel(size_t kc, const float *x, size_t ldx, size_t mr, const float *p, float *y, size_t ldy,
                         size_t nr, int first) {
    float acc[MR][NR];
    const float *xr[MR];
    for (size_t i = 0; i < MR; i++) {
        xr[i] = x + (i < mr ? i : 0) * ldx;
        for (size_t j = 0; j < NR; j++) {
            acc[i][j] = (!first && i < mr && j < nr) ? y[i * ldy + j] : 0.0f;
        }
    }
    for (size_t k = 0; k < kc; k++) {
        const float *pk = p + k * NR;
        const float a0 = xr[0][k], a1 = xr[1][k], a2 = xr[2][k], a3 = xr[3][k];
        for (size_t j = 0; j < NR; j++) {
            acc[0][j] += a0 * pk[j];
            acc[1][j] += a1 * pk[j];
            acc[2][j] += a2 * pk[j];
            acc[3][j] += a3 * pk[j];
        }
    }
    for (size_t i = 0; i < mr; i++) {
        memcpy(y + i * ldy, acc[i], nr * sizeof(float));
    }
}

void cck_gemm_host_blocked(const float *x, const float *w, float *y, size_t batch, size_t in, size_t out) {
    static_assert(MR == 4, "micro_kernel is written for 4 rows");
    CCK_PARALLEL_FOR(batch * in * out >= CCK_PARALLEL_MIN_MACS)
    for (size_t o0 = 0; o0 < out; o0 += NR) {
        float panel[KC * NR]; /* one per thread */
        size_t nr = out - o0 < NR ? out - o0 : NR;
        for (size_t k0 = 0; k0 < in; k0 += KC) {
            size_t kc = in - k0 < KC ? in - k0 : KC;
            for (size_t j = 0; j < NR; j++) { /* pack, zero-padding missing outputs */
                const float *wr = w + (o0 + (j < nr ? j : 0)) * in + k0;
                for (size_t k = 0; k < kc; k++) {
                    panel[k * NR + j] = j < nr ? wr[k] : 0.0f;
                }
            }
            for (size_t r0 = 0; r0 < batch; r0 += MR) {
                size_t mr = batch - r0 < MR ? batch - r0 : MR;
                micro_kernel(kc, x + r0 * in + k0, in, mr, panel, y + r0 * out + o0, out, nr, k0 == 0);
            }
        }
    }
}
