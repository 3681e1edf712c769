/*
 * upstream_cuda.c — device memory from the CUDA runtime.
 *
 * alloc/free are cudaMalloc/cudaFree (256-byte aligned, synchronous w.r.t.
 * the device), mem_info is cudaMemGetInfo (the driver's own free count, used
 * to verify that a release really returned memory), synchronize is
 * cudaDeviceSynchronize, and stream events are cudaEvent_t created with
 * cudaEventDisableTiming (cheap to record and query).
 *
 * Every call first makes `device` current, so one process can hold upstreams
 * on several GPUs. Compiled everywhere the toolkit exists (CCA_HAVE_CUDA);
 * without a GPU, cca_upstream_cuda_create returns CCA_ERR_NO_DEVICE with the
 * driver's reason. Built without the toolkit, it says so.
 */
#include "internal.h"

#include <stdlib.h>

#ifdef CCA_HAVE_CUDA
#include <cuda_runtime.h>

typedef struct cuda_device {
    int device;
    char name[32];
} cuda_device;

static cca_status cuda_error(cudaError_t e, const char *what) {
    cca_status st = e == cudaErrorMemoryAllocation ? CCA_ERR_OUT_OF_MEMORY : CCA_ERR_UPSTREAM;
    (void)cudaGetLastError(); /* clear the sticky-free error state */
    return ccai_fail(st, "cuda: %s failed: %s", what, cudaGetErrorString(e));
}

#define CUDA_TRY(call, what)                                                                                           \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess)                                                                                         \
            return cuda_error(e_, what);                                                                               \
    } while (0)

static cca_status cuda_alloc(void *ctx, size_t size, void **ptr) {
    cuda_device *d = ctx;
    CUDA_TRY(cudaSetDevice(d->device), "cudaSetDevice");
    CUDA_TRY(cudaMalloc(ptr, size), "cudaMalloc");
    return CCA_OK;
}

static cca_status cuda_free(void *ctx, void *ptr, size_t size) {
    cuda_device *d = ctx;
    (void)size;
    CUDA_TRY(cudaSetDevice(d->device), "cudaSetDevice");
    CUDA_TRY(cudaFree(ptr), "cudaFree");
    return CCA_OK;
}

static cca_status cuda_mem_info(void *ctx, size_t *free_bytes, size_t *total_bytes) {
    cuda_device *d = ctx;
    CUDA_TRY(cudaSetDevice(d->device), "cudaSetDevice");
    CUDA_TRY(cudaMemGetInfo(free_bytes, total_bytes), "cudaMemGetInfo");
    return CCA_OK;
}

static cca_status cuda_synchronize(void *ctx) {
    cuda_device *d = ctx;
    CUDA_TRY(cudaSetDevice(d->device), "cudaSetDevice");
    CUDA_TRY(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    return CCA_OK;
}

static cca_status cuda_event_record(void *ctx, cca_stream stream, void **event) {
    cuda_device *d = ctx;
    cudaEvent_t ev;
    CUDA_TRY(cudaSetDevice(d->device), "cudaSetDevice");
    CUDA_TRY(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreate");
    cudaError_t e = cudaEventRecord(ev, (cudaStream_t)stream);
    if (e != cudaSuccess) {
        cudaEventDestroy(ev);
        return cuda_error(e, "cudaEventRecord");
    }
    *event = ev;
    return CCA_OK;
}

static cca_status cuda_event_query(void *ctx, void *event) {
    (void)ctx;
    cudaError_t e = cudaEventQuery((cudaEvent_t)event);
    if (e == cudaErrorNotReady) {
        (void)cudaGetLastError();
        return CCA_ERR_NOT_READY;
    }
    CUDA_TRY(e, "cudaEventQuery");
    return CCA_OK;
}

static cca_status cuda_event_destroy(void *ctx, void *event) {
    (void)ctx;
    CUDA_TRY(cudaEventDestroy((cudaEvent_t)event), "cudaEventDestroy");
    return CCA_OK;
}

static void cuda_destroy(void *ctx) { free(ctx); }

cca_status cca_upstream_cuda_create(int device, cca_upstream **out) {
    if (!out)
        return ccai_fail(CCA_ERR_INVALID_ARGUMENT, "cca_upstream_cuda_create: out is NULL");
    *out = NULL;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return ccai_fail(CCA_ERR_NO_DEVICE, "cuda: no usable GPU (%s)", cudaGetErrorString(e));
    }
    if (device < 0 || device >= count)
        return ccai_fail(count ? CCA_ERR_INVALID_ARGUMENT : CCA_ERR_NO_DEVICE, "cuda: device %d not in [0, %d)",
                         device, count);
    CUDA_TRY(cudaSetDevice(device), "cudaSetDevice");
    CUDA_TRY(cudaFree(NULL), "context creation"); /* create the context now, not inside the first alloc */
    cuda_device *d = calloc(1, sizeof *d);
    if (!d)
        return ccai_fail(CCA_ERR_OUT_OF_MEMORY, "cca_upstream_cuda_create: host malloc failed");
    d->device = device;
    snprintf(d->name, sizeof d->name, "cuda:%d", device);
    cca_upstream_ops ops = {
        .alloc = cuda_alloc,
        .free = cuda_free,
        .mem_info = cuda_mem_info,
        .synchronize = cuda_synchronize,
        .event_record = cuda_event_record,
        .event_query = cuda_event_query,
        .event_destroy = cuda_event_destroy,
        .destroy = cuda_destroy,
        .name = d->name,
    };
    cca_status st = ccai_upstream_wrap(&ops, d, out);
    if (st != CCA_OK)
        free(d);
    return st;
}

#else /* !CCA_HAVE_CUDA */

cca_status cca_upstream_cuda_create(int device, cca_upstream **out) {
    (void)device;
    if (out)
        *out = NULL;
    return ccai_fail(CCA_ERR_NO_DEVICE, "cuda: libccalloc was built without the CUDA toolkit");
}

#endif
