/*
 * context.cu — devices, the cuBLAS handle, copies.
 *
 * A cck_cuda_context binds one device, one stream (borrowed) and one cuBLAS
 * handle (owned). The handle's workspace is memory the caller passes in —
 * in the engine, a block from the ccalloc allocator — installed with
 * cublasSetWorkspace, so cuBLAS allocates no workspace of its own and a full
 * release of the allocator really returns every device byte the GEMM used.
 *
 * Order matters: cublasSetStream resets the workspace to cuBLAS's internal
 * pool, so the stream is set first and the workspace after it (cuBLAS docs,
 * "cublasSetStream"). cublasCreate itself still takes a small fixed amount of
 * device memory for the handle; that is cuBLAS's, not the allocator's, and is
 * freed by cck_cuda_context_destroy.
 *
 * Without a GPU, cudaGetDeviceCount fails (cudaErrorNoDevice or
 * cudaErrorInsufficientDriver); every function then answers
 * CCK_ERR_NO_DEVICE and clears the runtime's last-error state so nothing
 * leaks into later calls. Costs: creation is milliseconds (driver and cuBLAS
 * initialisation); copies are synchronous on the context's stream.
 */
#include <stdlib.h>

#include "cck_cuda.cuh"

extern "C" cck_status cck_cu_device_count(int *count)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n <= 0) {
        (void)cudaGetLastError();
        *count = 0;
        return CCK_ERR_NO_DEVICE;
    }
    *count = n;
    return CCK_OK;
}

static cck_status check_device(int device)
{
    int n = 0;
    cck_status st = cck_cu_device_count(&n);
    if (st != CCK_OK) {
        return st;
    }
    return device < n ? CCK_OK : CCK_ERR_INVALID_ARGUMENT;
}

extern "C" cck_status cck_cu_workspace_size(int device, size_t *bytes)
{
    cck_status st = check_device(device);
    if (st != CCK_OK) {
        return st;
    }
    int major = 0;
    CCK_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    /* cuBLAS's recommendation: 32 MiB from Hopper (sm_90) on, 4 MiB before */
    *bytes = (major >= 9 ? 32u : 4u) << 20;
    return CCK_OK;
}

extern "C" cck_status cck_cu_context_create(int device, void *stream, void *workspace,
                                            size_t workspace_bytes, int use_tf32, cck_cuda_context **out)
{
    cck_status st = check_device(device);
    if (st != CCK_OK) {
        return st;
    }
    CCK_CUDA_TRY(cudaSetDevice(device));
    cck_cuda_context *ctx = (cck_cuda_context *)calloc(1, sizeof *ctx);
    if (ctx == NULL) {
        return CCK_ERR_CUDA; /* host out of memory; no closer code in cck_status */
    }
    ctx->device = device;
    ctx->stream = (cudaStream_t)stream;
    ctx->workspace = workspace;
    ctx->workspace_bytes = workspace_bytes;
    ctx->use_tf32 = use_tf32;
    if (cudaDeviceGetAttribute(&ctx->sm_count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
        free(ctx);
        return CCK_ERR_CUDA;
    }
    if (cublasCreate(&ctx->blas) != CUBLAS_STATUS_SUCCESS) {
        free(ctx);
        return CCK_ERR_CUBLAS;
    }
    /* stream first: cublasSetStream resets the workspace */
    if (cublasSetStream(ctx->blas, ctx->stream) != CUBLAS_STATUS_SUCCESS ||
        cublasSetWorkspace(ctx->blas, workspace, workspace_bytes) != CUBLAS_STATUS_SUCCESS ||
        cublasSetMathMode(ctx->blas, use_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH) !=
            CUBLAS_STATUS_SUCCESS) {
        cublasDestroy(ctx->blas);
        free(ctx);
        return CCK_ERR_CUBLAS;
    }
    *out = ctx;
    return CCK_OK;
}

extern "C" cck_status cck_cu_context_destroy(cck_cuda_context *ctx)
{
    /* finish queued work that may still use the workspace before the caller
     * frees it */
    cudaError_t e = ctx->stream ? cudaStreamSynchronize(ctx->stream) : cudaDeviceSynchronize();
    cublasStatus_t b = cublasDestroy(ctx->blas);
    free(ctx);
    if (e != cudaSuccess) {
        return CCK_ERR_CUDA;
    }
    return b == CUBLAS_STATUS_SUCCESS ? CCK_OK : CCK_ERR_CUBLAS;
}

extern "C" cck_status cck_cu_copy(cck_cuda_context *ctx, void *dst, const void *src, size_t bytes,
                                  int to_device)
{
    CCK_CUDA_TRY(cudaSetDevice(ctx->device));
    (void)to_device; /* cudaMemcpyDefault: unified addressing knows both sides */
    CCK_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, ctx->stream));
    CCK_CUDA_TRY(cudaStreamSynchronize(ctx->stream));
    return CCK_OK;
}

extern "C" cck_status cck_cu_synchronize(cck_cuda_context *ctx)
{
    CCK_CUDA_TRY(cudaSetDevice(ctx->device));
    CCK_CUDA_TRY(cudaStreamSynchronize(ctx->stream));
    return CCK_OK;
}
