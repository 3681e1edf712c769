/*
 * upstream_cuda.c — device memory from the CUDA runtime.
 *
 * alloc/free are cudaMalloc/cudaFree (256-byte aligned, synchronous w.r.t.
 * the device), mem_info is cudaMemGetInfo (the driver's own free count, used
 * to verify that a release really returned memory), synchronize is
 * cudaDeviceSynchronize, and stream events are cudaEvent_t created with
 * cudaEventDisableTiming (cheap to record and query).
 *
 * Every call makes `device` current for its duration and then restores the
 * caller's current device, so one process can hold upstreams on several GPUs
 * without an allocation moving the program's own work to another device. Compiled everywhere the toolkit exists
 * (CCA_HAVE_CUDA); without a GPU, cca_upstream_cuda_create returns CCA_ERR_NO_DEVICE with the driver's reason. Built
 * without the toolkit, it says so.
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

/* Run `call` with d->device current, then give the caller back its own
 * current device: an allocator call must not move the program's kernels. */
#define ON_DEVICE(d, call, what)                                                                                       \
    do {                                                                                                               \
        int previous_ = -1;                                                                                            \
        CUDA_TRY(cudaGetDevice(&previous_), "cudaGetDevice");                                                          \
        if (previous_ != (d)->device)                                                                                  \
            CUDA_TRY(cudaSetDevice((d)->device), "cudaSetDevice");                                                     \
        cudaError_t e_call_ = (call);                                                                                  \
        if (previous_ != (d)->device)                                                                                  \
            (void)cudaSetDevice(previous_);                                                                            \
        if (e_call_ != cudaSuccess)                                                                                    \
            return cuda_error(e_call_, what);                                                                          \
    } while (0)

static cca_status cuda_alloc(void *ctx, size_t size, void **ptr) {
    cuda_device *d = ctx;
    ON_DEVICE(d, cudaMalloc(ptr, size), "cudaMalloc");
    return CCA_OK;
}

static cca_status cuda_free(void *ctx, void *ptr, size_t size) {
    cuda_device *d = ctx;
    (void)size;
    ON_DEVICE(d, cudaFree(ptr), "cudaFree");
    return CCA_OK;
}

static cca_status cuda_mem_info(void *ctx, size_t *free_bytes, size_t *total_bytes) {
    cuda_device *d = ctx;
    ON_DEVICE(d, cudaMemGetInfo(free_bytes, total_bytes), "cudaMemGetInfo");
    return CCA_OK;
}

static cca_status cuda_synchronize(void *ctx) {
    cuda_device *d = ctx;
    ON_DEVICE(d, cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    return CCA_OK;
}

/* Create an event on the device and record it on `stream` (one call, so that
 * ON_DEVICE brackets both). */
static cudaError_t create_and_record(cudaEvent_t *ev, cudaStream_t stream) {
    cudaError_t e = cudaEventCreateWithFlags(ev, cudaEventDisableTiming);
    if (e != cudaSuccess)
        return e;
    e = cudaEventRecord(*ev, stream);
    if (e != cudaSuccess)
        cudaEventDestroy(*ev);
    return e;
}

static cca_status cuda_event_record(void *ctx, cca_stream stream, void **event) {
    cuda_device *d = ctx;
    cudaEvent_t ev;
    ON_DEVICE(d, create_and_record(&ev, (cudaStream_t)stream), "cudaEventRecord");
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

static void cuda_destroy(void *ctx) {
    free(ctx);
}

/* Create the device's context now, not inside the first allocation. */
static cca_status create_context(cuda_device *d) {
    ON_DEVICE(d, cudaFree(NULL), "context creation");
    return CCA_OK;
}

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
        return ccai_fail(count ? CCA_ERR_INVALID_ARGUMENT : CCA_ERR_NO_DEVICE, "cuda: device %d not in [0, %d)", device,
                         count);
    cuda_device *d = calloc(1, sizeof *d);
    if (!d)
        return ccai_fail(CCA_ERR_OUT_OF_MEMORY, "cca_upstream_cuda_create: host malloc failed");
    d->device = device;
    cca_status st_ctx = create_context(d);
    if (st_ctx != CCA_OK) {
        free(d);
        return st_ctx;
    }
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
