/*
 * cuda_api.c — the public CUDA entry points of cck.h, in plain C.
 *
 * Each function checks its arguments (pure checks, no device touched) and
 * then calls a cck_cu_* launcher from softmax.cu / dense.cu / context.cu, or
 * from cuda_stub.c when the library is built without CUDA. The order of the
 * checks is fixed and documented so callers and tests can rely on it:
 *
 *     NULL or misaligned (not 4-byte) pointers, zero or overflowing
 *     dimensions, y overlapping x (other than softmax's y == x) or W or b,
 *     bad version, bad block size, bad activation
 *                                 -> CCK_ERR_INVALID_ARGUMENT (common.c)
 *     a block size this version cannot use (96 for a power-of-two version)
 *                                 -> CCK_ERR_UNSUPPORTED
 *     ctx == NULL                 -> CCK_ERR_INVALID_ARGUMENT
 *     a dimension past the kernels' int range (softmax: within 1024 of
 *     INT_MAX; dense: past INT_MAX, cuBLAS's int)
 *                                 -> CCK_ERR_UNSUPPORTED
 *     then the device: no GPU     -> CCK_ERR_NO_DEVICE, CUDA or cuBLAS errors.
 *
 * cck_softmax_cuda checks ctx with the pointers, then asks the dispatch
 * table (softmax_dispatch.c), which answers CCK_ERR_UNSUPPORTED past the
 * int range; it takes no version or block, so it has no checks of them.
 *
 * A context can only exist on a machine with a GPU, so with no GPU every call
 * that gets past its argument checks answers CCK_ERR_NO_DEVICE.
 */
#include <limits.h>

#include "cck_internal.h"

cck_status cck_cuda_device_count(int *count) {
    if (count == NULL) {
        return CCK_ERR_INVALID_ARGUMENT;
    }
    *count = 0;
    return cck_cu_device_count(count);
}

cck_status cck_cublas_workspace_size(int device, size_t *bytes) {
    if (bytes == NULL || device < 0) {
        return CCK_ERR_INVALID_ARGUMENT;
    }
    *bytes = 0;
    return cck_cu_workspace_size(device, bytes);
}

cck_status cck_cuda_context_create(int device, void *stream, void *workspace, size_t workspace_bytes, int use_tf32,
                                   cck_cuda_context **out) {
    if (out == NULL) {
        return CCK_ERR_INVALID_ARGUMENT;
    }
    *out = NULL;
    /* workspace and its size come together: both set, or NULL with 0 */
    if (device < 0 || (workspace == NULL) != (workspace_bytes == 0)) {
        return CCK_ERR_INVALID_ARGUMENT;
    }
    return cck_cu_context_create(device, stream, workspace, workspace_bytes, use_tf32 != 0, out);
}

cck_status cck_cuda_context_destroy(cck_cuda_context *ctx) {
    if (ctx == NULL) {
        return CCK_ERR_INVALID_ARGUMENT;
    }
    return cck_cu_context_destroy(ctx);
}

/* 0 = the version's default; else a multiple of 32 in [32, 1024]. */
static cck_status check_block(int version, int block_size) {
    if (block_size == 0) {
        return CCK_OK;
    }
    if (block_size < 32 || block_size > CCK_MAX_BLOCK || block_size % 32 != 0) {
        return CCK_ERR_INVALID_ARGUMENT;
    }
    if (version >= 3 && (block_size & (block_size - 1)) != 0) {
        return CCK_ERR_UNSUPPORTED;
    }
    return CCK_OK;
}

cck_status cck_softmax_cuda_version(cck_cuda_context *ctx, int version, int block_size, const float *x, float *y,
                                    size_t rows, size_t cols) {
    if (!cck_softmax_args_ok(x, y, rows, cols)) {
        return CCK_ERR_INVALID_ARGUMENT;
    }
    if (version < 1 || version > CCK_SOFTMAX_VERSIONS) {
        return CCK_ERR_INVALID_ARGUMENT;
    }
    cck_status st = check_block(version, block_size);
    if (st != CCK_OK) {
        return st;
    }
    if (ctx == NULL) {
        return CCK_ERR_INVALID_ARGUMENT;
    }
    /* rows or columns within CCK_MAX_BLOCK of INT_MAX (8 GiB and more of
     * floats): the kernels index with int (cck_softmax_fits_int, common.c) */
    if (!cck_softmax_fits_int(rows, cols)) {
        return CCK_ERR_UNSUPPORTED;
    }
    return cck_cu_softmax(ctx, version, block_size, x, y, rows, cols);
}

cck_status cck_softmax_cuda(cck_cuda_context *ctx, const float *x, float *y, size_t rows, size_t cols) {
    if (!cck_softmax_args_ok(x, y, rows, cols) || ctx == NULL) {
        return CCK_ERR_INVALID_ARGUMENT;
    }
    /* the version and block measured fastest nearest this shape
     * (softmax_dispatch.c); CCK_ERR_UNSUPPORTED past the kernels' int range */
    cck_softmax_choice c;
    cck_status st = cck_softmax_dispatch(rows, cols, &c);
    if (st != CCK_OK) {
        return st;
    }
    return cck_cu_softmax(ctx, c.version, c.block_size, x, y, rows, cols);
}

cck_status cck_dense_cuda(cck_cuda_context *ctx, const float *x, const float *w, const float *b, float *y, size_t batch,
                          size_t in, size_t out, cck_activation act) {
    if (!cck_dense_args_ok(x, w, b, y, batch, in, out, act)) {
        return CCK_ERR_INVALID_ARGUMENT;
    }
    if (ctx == NULL) {
        return CCK_ERR_INVALID_ARGUMENT;
    }
    if (batch > INT_MAX || in > INT_MAX || out > INT_MAX) {
        return CCK_ERR_UNSUPPORTED; /* cublasSgemm takes int dimensions */
    }
    return cck_cu_dense(ctx, x, w, b, y, batch, in, out, act);
}

static cck_status copy(cck_cuda_context *ctx, void *dst, const void *src, size_t bytes, int to_device) {
    if (ctx == NULL || ((dst == NULL || src == NULL) && bytes != 0)) {
        return CCK_ERR_INVALID_ARGUMENT;
    }
    if (bytes == 0) {
        return CCK_OK;
    }
    return cck_cu_copy(ctx, dst, src, bytes, to_device);
}

cck_status cck_copy_to_device(cck_cuda_context *ctx, void *dst, const void *src, size_t bytes) {
    return copy(ctx, dst, src, bytes, 1);
}

cck_status cck_copy_to_host(cck_cuda_context *ctx, void *dst, const void *src, size_t bytes) {
    return copy(ctx, dst, src, bytes, 0);
}

cck_status cck_cuda_synchronize(cck_cuda_context *ctx) {
    if (ctx == NULL) {
        return CCK_ERR_INVALID_ARGUMENT;
    }
    return cck_cu_synchronize(ctx);
}
