/*
 * cck_cuda.cuh — what the .cu files of kernels/src share: the context struct
 * and the error-mapping macros. Not public; includes CUDA headers.
 */
#ifndef CCK_CUDA_CUH
#define CCK_CUDA_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "cck_internal.h"

struct cck_cuda_context {
    int device;
    cudaStream_t stream;   /* borrowed; NULL = legacy default stream       */
    cublasHandle_t blas;   /* owned; workspace = the caller's memory       */
    void *workspace;       /* borrowed                                     */
    size_t workspace_bytes;
    int use_tf32;
    int sm_count;          /* for grid sizing of grid-stride kernels       */
};

/* Return CCK_ERR_CUDA from the enclosing function when a CUDA call fails. */
#define CCK_CUDA_TRY(call)                                                                              \
    do {                                                                                                \
        if ((call) != cudaSuccess) {                                                                    \
            return CCK_ERR_CUDA;                                                                        \
        }                                                                                               \
    } while (0)

#define CCK_CUBLAS_TRY(call)                                                                            \
    do {                                                                                                \
        if ((call) != CUBLAS_STATUS_SUCCESS) {                                                          \
            return CCK_ERR_CUBLAS;                                                                      \
        }                                                                                               \
    } while (0)

/* After a kernel launch: a bad configuration shows up here, not at the call. */
static inline cck_status cck_cu_launch_status(void)
{
    return cudaGetLastError() == cudaSuccess ? CCK_OK : CCK_ERR_CUDA;
}

#endif /* CCK_CUDA_CUH */
