/*
 * cuda_stub.c — the CUDA launchers for a build without CUDA
 * (CCA_WITH_CUDA off): every one answers CCK_ERR_NO_DEVICE, so the engine and
 * the tests run unchanged and take their host paths. Arguments were already
 * checked by cuda_api.c, so error codes for bad input are the same as in a
 * CUDA build. Nothing here allocates.
 */
#include "cck_internal.h"

cck_status cck_cu_device_count(int *count) {
    *count = 0;
    return CCK_ERR_NO_DEVICE;
}

cck_status cck_cu_workspace_size(int device, size_t *bytes) {
    (void)device;
    *bytes = 0;
    return CCK_ERR_NO_DEVICE;
}

cck_status cck_cu_context_create(int device, void *stream, void *workspace, size_t workspace_bytes, int use_tf32,
                                 cck_cuda_context **out) {
    (void)device, (void)stream, (void)workspace, (void)workspace_bytes, (void)use_tf32;
    *out = NULL;
    return CCK_ERR_NO_DEVICE;
}

cck_status cck_cu_context_destroy(cck_cuda_context *ctx) {
    (void)ctx;
    return CCK_ERR_NO_DEVICE;
}

cck_status cck_cu_copy(cck_cuda_context *ctx, void *dst, const void *src, size_t bytes, int to_device) {
    (void)ctx, (void)dst, (void)src, (void)bytes, (void)to_device;
    return CCK_ERR_NO_DEVICE;
}

cck_status cck_cu_synchronize(cck_cuda_context *ctx) {
    (void)ctx;
    return CCK_ERR_NO_DEVICE;
}

cck_status cck_cu_softmax(cck_cuda_context *ctx, int version, int block_size, const float *x, float *y, size_t rows,
                          size_t cols) {
    (void)ctx, (void)version, (void)block_size, (void)x, (void)y, (void)rows, (void)cols;
    return CCK_ERR_NO_DEVICE;
}

cck_status cck_cu_dense(cck_cuda_context *ctx, const float *x, const float *w, const float *b, float *y, size_t batch,
                        size_t in, size_t out, cck_activation act) {
    (void)ctx, (void)x, (void)w, (void)b, (void)y, (void)batch, (void)in, (void)out, (void)act;
    return CCK_ERR_NO_DEVICE;
}

cck_status cck_cublas_load(const char **where) {
    if (where)
        *where = "no cuBLAS: this build of the kernels has no CUDA (CCA_WITH_CUDA=OFF)";
    return CCK_ERR_NO_DEVICE;
}
