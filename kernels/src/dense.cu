/*
 * dense.cu — y = act(x · Wᵀ + b) on the GPU: cuBLAS SGEMM, then our own
 * bias + activation epilogue kernel.
 *
 * Layout (row-major, as nn.Linear): x[batch][in], W[out][in], b[out] or NULL,
 * y[batch][out]. cuBLAS is column-major; a row-major matrix is its transpose
 * read column-major, so the GEMM is asked for yᵀ (out × batch, ld = out):
 *
 *     yᵀ = W · xᵀ      W   = (buffer w read column-major as in×out)ᵀ  -> op T, lda = in
 *                      xᵀ  =  buffer x read column-major as in×batch  -> op N, ldb = in
 *     cublasSgemm(T, N, m = out, n = batch, k = in, w, in, x, in, y, out)
 *
 * and the column-major yᵀ is exactly the row-major y: no copy, no transpose.
 *
 * The epilogue is one elementwise pass over y (read + write 8 bytes per
 * element) while the GEMM does 2·in flops per element, so for in >= a few
 * hundred its cost is a few per cent of the GEMM (the benchmark measures it;
 * target <= 10%). It is a grid-stride loop, templated on the activation and
 * on whether there is a bias so the inner loop has no branches, with float4
 * loads and stores when out % 4 == 0 and y, b are 16-byte aligned. With no
 * bias and no activation it is not launched at all. cublasLt could fuse the
 * epilogue into the GEMM; this file keeps it separate on purpose, as the
 * teaching example of "library GEMM + own epilogue".
 *
 * Memory: the GEMM's workspace is the caller's (cublasSetWorkspace in
 * context.cu); the epilogue works in place on y. Nothing here allocates.
 *
 * Accuracy: FP32 SGEMM (default math mode) differs from the double reference
 * by about sqrt(in)·2^-24·Σ|x·w|; tests allow 1.2·1e-5·(Σ|x·w| + |b|)
 * + 1e-30 (tests/kernels/kernels_check.h: the 1.2 covers the activation
 * stretching an error, GELU's slope is <= 1.13). With use_tf32 the tensor
 * cores round x and W to TF32 (10 mantissa bits, relative error <= 2^-11
 * per operand), so errors grow to about 1e-3·Σ|x·w|; tests allow
 * 1.2·4e-3·(Σ|x·w| + |b|) + 1e-30. TF32 is off by default.
 * GELU is the tanh form computed without tanh, v·(u >= 0 ? 1 : e)/(1 + e)
 * with e = expf(-2|u|) (activation.h, shared with dense_host.c, whose only
 * difference is its own exp): no cancellation, and exact limits (v for large
 * v, -0 for very negative v) where 0.5·v·(1 + tanhf(u)) rounds to 0 for
 * u < -9 or so. tests/kernels/test_kernels_emulated.c checks this very function on
 * the CPU against the double reference.
 */
#include <stdint.h>

#include "activation.h"
#include "cck_cuda.cuh"

template <cck_activation ACT> __device__ __forceinline__ float activate(float v) {
    if (ACT == CCK_ACT_RELU) {
        return cck_relu(v); // NaN stays NaN, as torch.relu
    }
    if (ACT == CCK_ACT_GELU) {
        return cck_gelu_expf(v);
    }
    return v;
}

// Scalar path: any out, any alignment.
template <cck_activation ACT, bool BIAS> __global__ void bias_act_kernel(float *y, const float *b, size_t n, int out) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float v = y[i];
        if (BIAS) {
            v += b[i % out];
        }
        y[i] = activate<ACT>(v);
    }
}

// float4 path: out % 4 == 0, y and b 16-byte aligned; n4 = n / 4.
template <cck_activation ACT, bool BIAS>
__global__ void bias_act_kernel4(float4 *y, const float4 *b, size_t n4, int out4) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x) {
        float4 v = y[i];
        if (BIAS) {
            float4 c = b[i % out4];
            v.x += c.x, v.y += c.y, v.z += c.z, v.w += c.w;
        }
        y[i] = make_float4(activate<ACT>(v.x), activate<ACT>(v.y), activate<ACT>(v.z), activate<ACT>(v.w));
    }
}

template <cck_activation ACT, bool BIAS>
static cck_status launch_epilogue(cck_cuda_context *ctx, float *y, const float *b, size_t n, int out) {
    const int bs = 256;
    bool vec = out % 4 == 0 && ((uintptr_t)y & 15u) == 0 && (!BIAS || ((uintptr_t)b & 15u) == 0);
    size_t items = vec ? n / 4 : n;
    // enough blocks to fill the GPU a few times over; the loop covers the rest
    size_t cap = (size_t)ctx->sm_count * 16;
    size_t blocks = (items + bs - 1) / bs;
    unsigned grid = (unsigned)(blocks < cap ? blocks : cap);
    if (vec) {
        bias_act_kernel4<ACT, BIAS><<<grid, bs, 0, ctx->stream>>>((float4 *)y, (const float4 *)b, items, out / 4);
    } else {
        bias_act_kernel<ACT, BIAS><<<grid, bs, 0, ctx->stream>>>(y, b, items, out);
    }
    return cck_cu_launch_status(); // right after the launch: its error, not a later call's
}

template <cck_activation ACT>
static cck_status epilogue(cck_cuda_context *ctx, float *y, const float *b, size_t n, int out) {
    return b ? launch_epilogue<ACT, true>(ctx, y, b, n, out) : launch_epilogue<ACT, false>(ctx, y, b, n, out);
}

extern "C" cck_status cck_cu_dense(cck_cuda_context *ctx, const float *x, const float *w, const float *b, float *y,
                                   size_t batch, size_t in, size_t out, cck_activation act) {
    const float one = 1.0f, zero = 0.0f;
    CCK_USE_DEVICE(ctx->device); // the handle's device; the caller's is restored on return
    CCK_CUBLAS_TRY(ctx->lib->cublasSgemm_v2(ctx->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)out, (int)batch, (int)in, &one, w,
                                            (int)in, x, (int)in, &zero, y, (int)out));
    size_t n = batch * out;
    switch (act) {
    case CCK_ACT_NONE:
        if (b == NULL) {
            return CCK_OK; // nothing to add: the GEMM is the whole layer
        }
        return epilogue<CCK_ACT_NONE>(ctx, y, b, n, (int)out);
    case CCK_ACT_RELU: return epilogue<CCK_ACT_RELU>(ctx, y, b, n, (int)out);
    case CCK_ACT_GELU: return epilogue<CCK_ACT_GELU>(ctx, y, b, n, (int)out);
    }
    return CCK_ERR_INVALID_ARGUMENT; // unreachable: cuda_api.c checked act
}
