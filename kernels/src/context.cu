/*
 * context.cu — devices, the cuBLAS handle, copies.
 *
 * A cck_cuda_context binds one device, one stream (borrowed) and one cuBLAS
 * handle (owned), from the cuBLAS that cublas.c loads at the first context
 * (a machine without a GPU never loads it). The handle's workspace is memory
 * the caller passes in — in the engine, a block from the ccalloc allocator —
 * installed with cublasSetWorkspace, so cuBLAS allocates no workspace of its
 * own and a full release of the allocator really returns every device byte
 * the GEMM used.
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
 *
 * Every function that needs the context's device selects it with
 * CCK_USE_DEVICE (cck_cuda.cuh) and gives the caller's current device back
 * on return, error paths included: the current device is the calling
 * thread's state, not ours.
 */
#include <stdlib.h>

#include "cck_cuda.cuh"

extern "C" cck_status cck_cu_device_count(int *count) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n <= 0) {
        (void)cudaGetLastError();
        *count = 0;
        return CCK_ERR_NO_DEVICE;
    }
    *count = n;
    return CCK_OK;
}

static cck_status check_device(int device) {
    int n = 0;
    cck_status st = cck_cu_device_count(&n);
    if (st != CCK_OK) {
        return st;
    }
    return device < n ? CCK_OK : CCK_ERR_INVALID_ARGUMENT;
}

extern "C" cck_status cck_cu_workspace_size(int device, size_t *bytes) {
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

extern "C" cck_status cck_cu_context_create(int device, void *stream, void *workspace, size_t workspace_bytes,
                                            int use_tf32, cck_cuda_context **out) {
    cck_status st = check_device(device);
    if (st != CCK_OK) {
        return st;
    }
    CCK_USE_DEVICE(device); /* cublasCreate binds the handle to the current device */
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
        (void)cudaGetLastError();
        free(ctx);
        return CCK_ERR_CUDA;
    }
    /* cuBLAS is loaded here, on the first context of the process */
    if (cck_cublas_get(&ctx->lib) != CCK_OK || ctx->lib->cublasCreate_v2(&ctx->blas) != CUBLAS_STATUS_SUCCESS) {
        (void)cudaGetLastError();
        free(ctx);
        return CCK_ERR_CUBLAS;
    }
    const cck_cublas *lib = ctx->lib;
    /* stream first: cublasSetStream resets the workspace */
    if (lib->cublasSetStream_v2(ctx->blas, ctx->stream) != CUBLAS_STATUS_SUCCESS ||
        lib->cublasSetWorkspace_v2(ctx->blas, workspace, workspace_bytes) != CUBLAS_STATUS_SUCCESS ||
        lib->cublasSetMathMode(ctx->blas, use_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH) !=
            CUBLAS_STATUS_SUCCESS) {
        lib->cublasDestroy_v2(ctx->blas);
        (void)cudaGetLastError();
        free(ctx);
        return CCK_ERR_CUBLAS;
    }
    *out = ctx;
    return CCK_OK;
}

/* Always consumes ctx (the handle is destroyed and the struct freed). The
 * status says whether the queued work finished: anything but CCK_OK means the
 * caller must not reuse the workspace, since a kernel may still be using it. */
extern "C" cck_status cck_cu_context_destroy(cck_cuda_context *ctx) {
    /* the handle and the device-wide sync both act on the current device */
    cck_device_scope dev(ctx->device);
    cck_status st = CCK_OK;
    if (dev.status != cudaSuccess) {
        st = CCK_ERR_CUDA; /* cannot select the device: completion unknown */
    } else {
        /* finish queued work that may still use the workspace before the
         * caller frees it */
        cudaError_t e = ctx->stream ? cudaStreamSynchronize(ctx->stream) : cudaDeviceSynchronize();
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            st = CCK_ERR_CUDA;
        }
    }
    /* destroyed in every case: the context is consumed, even when the
     * synchronisation failed (cublasDestroy synchronises again itself) */
    if (ctx->lib->cublasDestroy_v2(ctx->blas) != CUBLAS_STATUS_SUCCESS) {
        (void)cudaGetLastError();
        if (st == CCK_OK) {
            st = CCK_ERR_CUBLAS;
        }
    }
    free(ctx);
    return st;
}

extern "C" cck_status cck_cu_copy(cck_cuda_context *ctx, void *dst, const void *src, size_t bytes, int to_device) {
    CCK_USE_DEVICE(ctx->device);
    (void)to_device; /* cudaMemcpyDefault: unified addressing knows both sides */
    CCK_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, ctx->stream));
    CCK_CUDA_TRY(cudaStreamSynchronize(ctx->stream));
    return CCK_OK;
}

extern "C" cck_status cck_cu_synchronize(cck_cuda_context *ctx) {
    CCK_USE_DEVICE(ctx->device);
    CCK_CUDA_TRY(cudaStreamSynchronize(ctx->stream));
    return CCK_OK;
}
