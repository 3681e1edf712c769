/*
 * softmax.cu — row-wise softmax on the GPU, five numbered versions.
 *
 * Layout: x, y are rows × cols float32, row-major (row r at x + r*cols); any
 * cols >= 1, rows need not be aligned. y may equal x (each element is read by
 * the thread that later writes it, and only after the row's statistics are
 * known); any other overlap is refused before launch (cuda_api.c), since
 * another block could overwrite a row before it is read. Every version computes
 *
 *     y[j] = exp(x[j] - m) / sum_k exp(x[k] - m),   m = max_k x[k]
 *
 * Standalone build of this file's kernels happens through the library
 * (kernels/CMakeLists.txt); to compare versions run the benchmark:
 *
 *     cmake --build build --target cck_bench && ./build/bench/kernels/cck_bench --sweep
 *
 * Softmax is memory-bound: a few flops per element against 8 bytes of
 * compulsory traffic (read x, write y). The yardstick is therefore a
 * device-to-device copy of the same bytes; each version moves closer to it.
 *
 * Which version runs: cck_softmax_cuda asks the dispatch table
 * (softmax_dispatch.c) for the version and block size measured fastest at
 * the nearest measured shape. No single version is fastest everywhere: on
 * the one GPU measured so far (H100, bench/results/2026-11-23-h100) v2 won
 * at 128, 512 and 1024 columns, v4 at 1000, v3 from 1025 on. Version 5 has
 * no GPU figure yet, so the table does not choose it.
 *
 * version 1: one thread per row. Three loops (max, sum, write) over the row,
 *   the naive CPU code moved to the GPU. Neighbouring threads read addresses
 *   cols*4 bytes apart, so every warp load touches 32 different cache lines
 *   (uncoalesced), and with 4096 rows there are only 4096 threads: most of
 *   the GPU idles. Correct and slow; the baseline.
 *
 * version 2: one warp per row. The 32 lanes stride through the row together,
 *   so each warp load is one contiguous 128-byte line (coalesced), and the
 *   max and the sum are combined across lanes with __shfl_xor_sync (a
 *   butterfly: 5 steps, registers only, no shared memory, no __syncthreads).
 *   32x more threads than version 1 and full-width memory transactions. Long
 *   rows (32768 columns) leave each lane 1024 sequential elements: one warp
 *   cannot keep enough loads in flight, which version 3 fixes. Its
 *   per-thread loops are in softmax_strided.h (shared with version 3 and
 *   with the CPU emulation in tests/kernels/test_kernels_emulated.c).
 *
 * version 3: one block per row, reductions with cub::BlockReduce. Up to 1024
 *   threads share a row (more loads in flight per row, every SM busy even
 *   for few long rows). CUB's BlockReduce does warp shuffles and then one
 *   shared-memory step across warps; the result is broadcast through shared
 *   memory. Still three passes over x (max, sum, write): 2 reads of x and
 *   1 write beyond the compulsory read, the second and third mostly from L2.
 *
 * version 4: single-pass online normaliser (Milakov & Gimelshein 2018,
 *   "Online normalizer calculation for softmax") with 16-byte loads. Each
 *   thread keeps a running pair (m, d): on a new element x,
 *       m' = max(m, x),   d' = d * exp(m - m') + exp(x - m')
 *   and two pairs merge the same way, so the max and the sum come out of ONE
 *   read of the row and ONE reduction (of pairs) instead of two. Then one
 *   more read (from L2) computes and writes y. Loads and stores are float4
 *   (LDG.128/STG.128: 4x fewer instructions, full sectors per request) on the
 *   16-byte-aligned middle of each row; a scalar head reaches the first
 *   aligned address and a scalar tail takes cols % 4 leftovers, so any cols
 *   and any row offset work (cols = 1 is all head). Stores of y use the
 *   streaming hint (__stcs) so y does not evict x from L2 before it is
 *   re-read. Rows of <= 1024 columns use one warp per row (shuffle merge of
 *   pairs, several rows per block); longer rows one block per row with
 *   cub::BlockReduce over pairs. Its per-thread code is in softmax_online.h,
 *   which tests/kernels/test_kernels_emulated.c also runs on the CPU, thread
 *   by thread, with the merges emulated. Measured on the H100 it was the
 *   fastest version at 1000 columns only. Likely causes, not measured
 *   (no profiler counters): its per-element update costs two dependent exps,
 *   and its second read of x goes to L2 or, for rows of 128 KiB, perhaps
 *   back to memory. Version 5 removes both.
 *
 * version 5: online softmax with the row kept in registers. One warp per
 *   row up to 1024 columns (several rows per block), one block per row
 *   beyond. Each thread issues all its 16-byte loads of the row at once (up
 *   to 8 float4, i.e. 32 floats: a warp holds 1024 columns, a 1024-thread
 *   block 32768), takes the maximum of its registers, then ONE exp per
 *   element for its sum: its pair (m, d) comes from registers, not from a
 *   per-element running update. The pairs merge online across the warp
 *   (butterfly) or block (each warp's butterfly, one shared-memory step,
 *   every warp merging the warps' pairs again: no second barrier, and every
 *   thread ends with the same floats). Then y is computed from the
 *   registers: x is read from memory exactly once, y written once, the
 *   8 bytes per element of a copy. Rows longer than the registers hold
 *   (cols/4 > 8·block: from 32772 columns at 1024 threads) are taken in
 *   chunks of the same shape, the pair merged chunk by chunk, and re-read
 *   for the output as in version 4. The same head/body/tail split as version 4: float4 loads on
 *   the aligned body, scalars for the head and the cols % 4 tail, scalar
 *   stores where y is aligned differently from x. Per-thread code in
 *   softmax_v5.h, emulated on the CPU like version 4's. It has no GPU
 *   figure yet: `cck_bench --sweep` on a GPU measures it at every block
 *   size and prints the dispatch-table rows the run implies.
 *
 * NaN and infinity: as the double reference in softmax_host.c and as
 * torch.softmax. The maximum skips NaN (fmaxf), but exp(NaN - m) = NaN enters
 * the sum, so a row with a NaN is all NaN; a +inf makes the row all NaN
 * (exp(inf - inf)); -inf elements give 0; a row of only -inf is all NaN. In
 * version 4 a running pair with m = -inf holds a sum of zeros (or NaN), so
 * its rescale factor is defined as 0 rather than exp(-inf - -inf) = NaN; that
 * keeps rows like [-inf, 1] finite while NaN still propagates (NaN * 0 = NaN).
 * Version 5 adds 0 for a -inf value directly (softmax_v5.h), to the same
 * effect.
 *
 * Accuracy: float arithmetic, expf (not __expf); v1 sums its row
 * sequentially in double (a float sum that long drifts), the others sum
 * short per-thread runs in float and then combine them as a tree. Tests check
 * |y - ref| <= (1e-5 + 4·sqrt(cols)·2^-24)·|ref| + 1e-37.
 *
 * Block sizes (threads per block, 0 = default): v1 and v2 take any multiple
 * of 32 up to 1024 (v2: block/32 rows per block); v3, v4 and v5 powers of
 * two from 32 to 1024 (CUB's BlockReduce and v5's register tiles are
 * templates on the block size). In warp mode (v4, v5: cols <= 1024) a block
 * of b threads runs b/32 rows.
 */
#include <cub/block/block_reduce.cuh>
#include <stdint.h>

#include "cck_cuda.cuh"
#include "softmax_online.h"
#include "softmax_strided.h"
#include "softmax_v5.h"

// ---------------------------------------------------------------------------
// shared device helpers

struct max_op {
    __device__ __forceinline__ float operator()(float a, float b) const {
        return fmaxf(a, b);
    }
};
struct sum_op {
    __device__ __forceinline__ float operator()(float a, float b) const {
        return a + b;
    }
};

__device__ __forceinline__ float warp_max(float v) {
    for (int off = 16; off > 0; off >>= 1) {
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    }
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int off = 16; off > 0; off >>= 1) {
        v += __shfl_xor_sync(0xffffffffu, v, off);
    }
    return v;
}

// Reduce `v` over the block with CUB and give every thread the result.
template <int BLOCK, typename T, typename Op> __device__ __forceinline__ T block_all_reduce(T v, Op op) {
    using reduce_t = cub::BlockReduce<T, BLOCK>;
    __shared__ typename reduce_t::TempStorage tmp;
    __shared__ T result;
    T r = reduce_t(tmp).Reduce(v, op); // valid in thread 0 only
    if (threadIdx.x == 0) {
        result = r;
    }
    __syncthreads();
    r = result;
    __syncthreads(); // tmp and result may be reused by the next call
    return r;
}

// ---------------------------------------------------------------------------
// version 1: one thread per row

__global__ void softmax_kernel1(const float *x, float *y, int rows, int cols) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) {
        return;
    }
    const float *xr = x + (size_t)row * cols;
    float *yr = y + (size_t)row * cols;
    float m = -INFINITY;
    for (int j = 0; j < cols; j++) {
        m = fmaxf(m, xr[j]);
    }
    // One running sum over the whole row: in float, every term below half an
    // ulp of the sum would be dropped, a bias that grows with cols (emulated:
    // 1e-4 relative at 131072 columns). A double sum, as in softmax_host.c,
    // removes it; v1 is bound by its uncoalesced loads, not by this add.
    double s = 0.0;
    for (int j = 0; j < cols; j++) {
        s += expf(xr[j] - m);
    }
    float inv = (float)(1.0 / s);
    for (int j = 0; j < cols; j++) {
        yr[j] = expf(xr[j] - m) * inv;
    }
}

// ---------------------------------------------------------------------------
// version 2: one warp per row, shuffle reductions

__global__ void softmax_kernel2(const float *x, float *y, int rows, int cols) {
    int lane = threadIdx.x % 32;
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= rows) {
        return; // the whole warp leaves together: the shuffles stay full-mask
    }
    const float *xr = x + (size_t)row * cols;
    float m = warp_max(cck_strided_max(xr, cols, lane, 32));
    float inv = 1.0f / warp_sum(cck_strided_sum(xr, cols, lane, 32, m));
    cck_strided_write(xr, y + (size_t)row * cols, cols, lane, 32, m, inv);
}

// ---------------------------------------------------------------------------
// version 3: one block per row, cub::BlockReduce

template <int BLOCK> __global__ void __launch_bounds__(BLOCK) softmax_kernel3(const float *x, float *y, int cols) {
    const float *xr = x + (size_t)blockIdx.x * cols;
    float m = block_all_reduce<BLOCK>(cck_strided_max(xr, cols, threadIdx.x, BLOCK), max_op());
    float inv = 1.0f / block_all_reduce<BLOCK>(cck_strided_sum(xr, cols, threadIdx.x, BLOCK, m), sum_op());
    cck_strided_write(xr, y + (size_t)blockIdx.x * cols, cols, threadIdx.x, BLOCK, m, inv);
}

// ---------------------------------------------------------------------------
// version 4: online softmax, float4 loads, warp or block per row

// The per-thread work (running pairs, the head/body/tail split, both passes)
// is in softmax_online.h, shared with a CPU emulation of this version that
// the host tests run; only the merge across threads is here.

struct md_merge_op {
    __device__ __forceinline__ cck_md_pair operator()(cck_md_pair a, cck_md_pair b) const {
        return cck_md_merge(a, b);
    }
};

// Butterfly over the warp: after 5 steps every lane holds the merge of all
// 32 pairs (the same m in every lane; d may differ in its last bits, as
// nvcc contracts the merge into an FMA: see cck_md_merge).
__device__ __forceinline__ cck_md_pair warp_md(cck_md_pair p) {
    for (int off = 16; off > 0; off >>= 1) {
        cck_md_pair o = {__shfl_xor_sync(0xffffffffu, p.m, off), __shfl_xor_sync(0xffffffffu, p.d, off)};
        p = cck_md_merge(p, o);
    }
    return p;
}

// Rows of <= CCK_V4_WARP_COLS columns: one warp per row.
#define CCK_V4_WARP_COLS 1024

__global__ void softmax_kernel4_warp(const float *x, float *y, int rows, int cols) {
    int lane = threadIdx.x % 32;
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= rows) {
        return;
    }
    const float *xr = x + (size_t)row * cols;
    cck_row_split s = cck_split_row(xr, cols);
    cck_md_pair p = warp_md(cck_row_pair(xr, cols, s, lane, 32));
    cck_row_write(xr, y + (size_t)row * cols, cols, s, lane, 32, p.m, 1.0f / p.d);
}

template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) softmax_kernel4_block(const float *x, float *y, int cols) {
    const float *xr = x + (size_t)blockIdx.x * cols;
    cck_row_split s = cck_split_row(xr, cols);
    cck_md_pair p = block_all_reduce<BLOCK>(cck_row_pair(xr, cols, s, threadIdx.x, BLOCK), md_merge_op());
    cck_row_write(xr, y + (size_t)blockIdx.x * cols, cols, s, threadIdx.x, BLOCK, p.m, 1.0f / p.d);
}

// ---------------------------------------------------------------------------
// version 5: online softmax, the row in registers, warp or block per row

// The per-thread work (loads into registers, the pair of a chunk, both
// passes) is in softmax_v5.h, shared with the CPU emulation; here are the
// merges across threads and the kernels' shapes.

// Butterfly over the warp with v5's bitwise-commutative merge: after 5
// steps every lane holds the same pair.
__device__ __forceinline__ cck_md_pair warp_md5(cck_md_pair p) {
    for (int off = 16; off > 0; off >>= 1) {
        cck_md_pair o = {__shfl_xor_sync(0xffffffffu, p.m, off), __shfl_xor_sync(0xffffffffu, p.d, off)};
        p = cck_v5_merge(p, o);
    }
    return p;
}

// Over the block: each warp's butterfly; lane 0 of each warp writes its
// pair to shared memory; after one barrier every warp loads the NW pairs
// (lanes >= NW the empty pair, which merges as nothing) and runs the same
// butterfly on them, so every thread of the block ends with the same floats
// and shared memory is never written again (no second barrier).
template <int BLOCK> __device__ __forceinline__ cck_md_pair block_md5(cck_md_pair p) {
    constexpr int NW = BLOCK / 32;
    p = warp_md5(p);
    if (NW == 1) {
        return p;
    }
    __shared__ cck_md_pair part[NW];
    int lane = threadIdx.x % 32;
    if (lane == 0) {
        part[threadIdx.x / 32] = p;
    }
    __syncthreads();
    cck_md_pair q = {-INFINITY, 0.0f};
    if (lane < NW) {
        q = part[lane];
    }
    return warp_md5(q);
}

// Rows of <= CCK_V5_WARP_COLS columns: one warp per row, VPT float4 per
// lane (32·4·VPT >= the row's body: always resident).
#define CCK_V5_WARP_COLS 1024

template <int VPT>
__global__ void __launch_bounds__(1024) softmax_kernel5_warp(const float *x, float *y, int rows, int cols) {
    int lane = threadIdx.x % 32;
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= rows) {
        return; // the whole warp leaves together: the shuffles stay full-mask
    }
    const float *xr = x + (size_t)row * cols;
    cck_row_split s = cck_split_row(xr, cols);
    cck_float4 v[VPT];
    float head, tail;
    cck_md_pair p = warp_md5(cck_v5_pass1(xr, cols, s, lane, 32, VPT, 1, v, &head, &tail));
    cck_v5_pass2(xr, y + (size_t)row * cols, cols, s, lane, 32, VPT, 1, v, head, tail, p.m, 1.0f / p.d);
}

// Longer rows: one block per row. RESIDENT: the body fits BLOCK·VPT groups
// and stays in registers; else it is taken in chunks of BLOCK·VPT groups
// and re-read for the output.
template <int BLOCK, int VPT, bool RESIDENT>
__global__ void __launch_bounds__(BLOCK) softmax_kernel5_block(const float *x, float *y, int cols) {
    const float *xr = x + (size_t)blockIdx.x * cols;
    cck_row_split s = cck_split_row(xr, cols);
    cck_float4 v[VPT];
    float head, tail;
    cck_md_pair p = block_md5<BLOCK>(cck_v5_pass1(xr, cols, s, threadIdx.x, BLOCK, VPT, RESIDENT, v, &head, &tail));
    cck_v5_pass2(xr, y + (size_t)blockIdx.x * cols, cols, s, threadIdx.x, BLOCK, VPT, RESIDENT, v, head, tail, p.m,
                 1.0f / p.d);
}

// ---------------------------------------------------------------------------
// launchers

#define CCK_BLOCK_SWITCH(bs, KERNEL, grid, stream, ...)                                                                \
    switch (bs) {                                                                                                      \
    case 32: KERNEL<32><<<grid, 32, 0, stream>>>(__VA_ARGS__); break;                                                  \
    case 64: KERNEL<64><<<grid, 64, 0, stream>>>(__VA_ARGS__); break;                                                  \
    case 128: KERNEL<128><<<grid, 128, 0, stream>>>(__VA_ARGS__); break;                                               \
    case 256: KERNEL<256><<<grid, 256, 0, stream>>>(__VA_ARGS__); break;                                               \
    case 512: KERNEL<512><<<grid, 512, 0, stream>>>(__VA_ARGS__); break;                                               \
    case 1024: KERNEL<1024><<<grid, 1024, 0, stream>>>(__VA_ARGS__); break;                                            \
    default: return CCK_ERR_UNSUPPORTED;                                                                               \
    }                                                                                                                  \
    CCK_LAUNCH_TRY()

// Version 4's default block: warp mode 256 threads (8 rows per block); block
// mode enough threads for about 8 float4 each, between 128 and 1024.
static int v4_default_block(int cols) {
    if (cols <= CCK_V4_WARP_COLS) {
        return 256;
    }
    int bs = 128;
    while (bs < 1024 && bs * 4 * 8 < cols) {
        bs *= 2;
    }
    return bs;
}

// Version 5's default block: warp mode 256 threads (8 rows per block: with
// few rows, more SMs get one); block mode enough threads that 8 float4 each
// hold the row (32 floats per thread), between 128 and 1024: so rows up to
// 32768 columns stay resident. Neither is measured yet (cck_bench --sweep
// times every block).
static int v5_default_block(int cols) {
    if (cols <= CCK_V5_WARP_COLS) {
        return 256;
    }
    int bs = 128;
    while (bs < 1024 && bs * CCK_V5_MAX_VPT < cols / 4) {
        bs *= 2;
    }
    return bs;
}

static unsigned ceil_div(int a, int b) {
    return (unsigned)((a + (long long)b - 1) / b);
}

// Version 5, block mode, BLOCK threads per row, the tile cck_v5_pick_tile
// chooses (softmax_v5.h: the smallest that holds the row, else chunks).
template <int BLOCK> static cck_status launch_v5_block(const float *x, float *y, int rows, int cols, cudaStream_t st) {
    cck_v5_tile t = cck_v5_pick_tile(cols, BLOCK, 0);
    if (!t.resident) {
        softmax_kernel5_block<BLOCK, CCK_V5_MAX_VPT, false><<<(unsigned)rows, BLOCK, 0, st>>>(x, y, cols);
    } else if (t.vpt == 2) {
        softmax_kernel5_block<BLOCK, 2, true><<<(unsigned)rows, BLOCK, 0, st>>>(x, y, cols);
    } else if (t.vpt == 4) {
        softmax_kernel5_block<BLOCK, 4, true><<<(unsigned)rows, BLOCK, 0, st>>>(x, y, cols);
    } else {
        softmax_kernel5_block<BLOCK, CCK_V5_MAX_VPT, true><<<(unsigned)rows, BLOCK, 0, st>>>(x, y, cols);
    }
    return cck_cu_launch_status();
}

// Version 5, warp mode: block/32 rows per block (cols <= 1024: at most 256
// groups, so a tile of at most 8 always holds the row).
static cck_status launch_v5_warp(const float *x, float *y, int rows, int cols, int bs, cudaStream_t st) {
    unsigned grid = ceil_div(rows, bs / 32);
    switch (cck_v5_pick_tile(cols, 32, 1).vpt) {
    case 1: softmax_kernel5_warp<1><<<grid, bs, 0, st>>>(x, y, rows, cols); break;
    case 2: softmax_kernel5_warp<2><<<grid, bs, 0, st>>>(x, y, rows, cols); break;
    case 4: softmax_kernel5_warp<4><<<grid, bs, 0, st>>>(x, y, rows, cols); break;
    default: softmax_kernel5_warp<CCK_V5_MAX_VPT><<<grid, bs, 0, st>>>(x, y, rows, cols); break;
    }
    return cck_cu_launch_status();
}

static cck_status launch_v5(const float *x, float *y, int rows, int cols, int bs, cudaStream_t st) {
    if (cols <= CCK_V5_WARP_COLS) {
        return launch_v5_warp(x, y, rows, cols, bs, st);
    }
    switch (bs) {
    case 32: return launch_v5_block<32>(x, y, rows, cols, st);
    case 64: return launch_v5_block<64>(x, y, rows, cols, st);
    case 128: return launch_v5_block<128>(x, y, rows, cols, st);
    case 256: return launch_v5_block<256>(x, y, rows, cols, st);
    case 512: return launch_v5_block<512>(x, y, rows, cols, st);
    case 1024: return launch_v5_block<1024>(x, y, rows, cols, st);
    default: return CCK_ERR_UNSUPPORTED;
    }
}

// One numbered version with a block size (0 = its default). The choice of
// version for cck_softmax_cuda is made before this, in softmax_dispatch.c.
extern "C" cck_status cck_cu_softmax(cck_cuda_context *ctx, int version, int block_size, const float *x, float *y,
                                     size_t rows_, size_t cols_) {
    int rows = (int)rows_, cols = (int)cols_; // <= INT_MAX, checked by cuda_api.c
    cudaStream_t st = ctx->stream;
    CCK_USE_DEVICE(ctx->device); // the caller's device is restored on return
    // every launch is followed by CCK_LAUNCH_TRY (inside CCK_BLOCK_SWITCH too),
    // so a bad configuration is reported by the call that launched it
    switch (version) {
    case 1: {
        int bs = block_size ? block_size : 128;
        softmax_kernel1<<<ceil_div(rows, bs), bs, 0, st>>>(x, y, rows, cols);
        CCK_LAUNCH_TRY();
        break;
    }
    case 2: {
        int bs = block_size ? block_size : 256;
        softmax_kernel2<<<ceil_div(rows, bs / 32), bs, 0, st>>>(x, y, rows, cols);
        CCK_LAUNCH_TRY();
        break;
    }
    case 3: {
        int bs = block_size ? block_size : 256;
        CCK_BLOCK_SWITCH(bs, softmax_kernel3, (unsigned)rows, st, x, y, cols);
        break;
    }
    case 4: {
        int bs = block_size ? block_size : v4_default_block(cols);
        if (cols <= CCK_V4_WARP_COLS) {
            softmax_kernel4_warp<<<ceil_div(rows, bs / 32), bs, 0, st>>>(x, y, rows, cols);
            CCK_LAUNCH_TRY();
        } else {
            CCK_BLOCK_SWITCH(bs, softmax_kernel4_block, (unsigned)rows, st, x, y, cols);
        }
        break;
    }
    case 5: return launch_v5(x, y, rows, cols, block_size ? block_size : v5_default_block(cols), st);
    default: return CCK_ERR_INVALID_ARGUMENT;
    }
    return CCK_OK;
}
