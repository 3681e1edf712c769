/*
 * cck_cuda.cuh — what the .cu files of kernels/src share: the context struct,
 * the error-mapping macros and the device scope guard. Not public; includes
 * CUDA headers; C++ (the .cu files are compiled as CUDA C++).
 */
#ifndef CCK_CUDA_CUH
#define CCK_CUDA_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "cck_internal.h"
#include "cublas.h"

struct cck_cuda_context {
    int device;
    cudaStream_t stream; /* borrowed; NULL = legacy default stream       */
    const cck_cublas *lib; /* the loaded cuBLAS (cublas.c)            */
    cublasHandle_t blas; /* owned; workspace = the caller's memory       */
    void *workspace;     /* borrowed                                     */
    size_t workspace_bytes;
    int use_tf32;
    int sm_count; /* for grid sizing of grid-stride kernels       */
};

/* Error handling. Every failing CUDA/cuBLAS call is mapped to a cck_status
 * and the runtime's last-error slot is cleared (cudaGetLastError), so a
 * failure here never resurfaces later as the "last error" of an unrelated,
 * successful call. Sticky errors (a kernel fault) cannot be cleared; every
 * later call reports them anyway. */

/* Return CCK_ERR_CUDA from the enclosing function when a CUDA call fails. */
#define CCK_CUDA_TRY(call)                                                                                             \
    do {                                                                                                               \
        if ((call) != cudaSuccess) {                                                                                   \
            (void)cudaGetLastError();                                                                                  \
            return CCK_ERR_CUDA;                                                                                       \
        }                                                                                                              \
    } while (0)

/* A cuBLAS failure may come from a CUDA call inside cuBLAS that left the
 * last-error slot set: clear it too. */
#define CCK_CUBLAS_TRY(call)                                                                                           \
    do {                                                                                                               \
        if ((call) != CUBLAS_STATUS_SUCCESS) {                                                                         \
            (void)cudaGetLastError();                                                                                  \
            return CCK_ERR_CUBLAS;                                                                                     \
        }                                                                                                              \
    } while (0)

/* Call right after each kernel launch: a bad configuration shows up here, not
 * at the <<<>>> itself. cudaGetLastError reads and clears the slot, so the
 * error is attributed to this launch and not carried into the next call. */
static inline cck_status cck_cu_launch_status(void) {
    return cudaGetLastError() == cudaSuccess ? CCK_OK : CCK_ERR_CUDA;
}

#define CCK_LAUNCH_TRY()                                                                                               \
    do {                                                                                                               \
        if (cck_cu_launch_status() != CCK_OK) {                                                                        \
            return CCK_ERR_CUDA;                                                                                       \
        }                                                                                                              \
    } while (0)

/* The current device is per host thread and belongs to the caller. An entry
 * point that needs the context's device declares one of these: it remembers
 * the caller's device (cudaGetDevice), switches only when it differs, and
 * switches back when the scope ends, on every return path. */
struct cck_device_scope {
    int previous;
    bool switched;
    cudaError_t status; /* cudaSuccess: `device` is current for the scope */

    explicit cck_device_scope(int device) : previous(0), switched(false), status(cudaSuccess) {
        // An error the caller left pending (a failed launch of its own it did
        // not check) is not ours: clear it, so that the launch checks below
        // report only this call's launches. Sticky errors stay regardless.
        (void)cudaGetLastError();
        status = cudaGetDevice(&previous);
        if (status == cudaSuccess && previous != device) {
            status = cudaSetDevice(device);
            switched = status == cudaSuccess;
        }
        if (status != cudaSuccess) {
            (void)cudaGetLastError();
        }
    }
    ~cck_device_scope() {
        if (switched && cudaSetDevice(previous) != cudaSuccess) {
            (void)cudaGetLastError(); /* nothing to report to from a destructor */
        }
    }
    cck_device_scope(const cck_device_scope &) = delete;
    cck_device_scope &operator=(const cck_device_scope &) = delete;
};

/* Make `device` current until the end of the enclosing block; return
 * CCK_ERR_CUDA from the enclosing function if it cannot be selected. */
#define CCK_USE_DEVICE(device)                                                                                         \
    cck_device_scope cck_device_scope_((device));                                                                      \
    do {                                                                                                               \
        if (cck_device_scope_.status != cudaSuccess) {                                                                 \
            return CCK_ERR_CUDA;                                                                                       \
        }                                                                                                              \
    } while (0)

#endif /* CCK_CUDA_CUH */
