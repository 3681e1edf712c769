/*
 * cudart.h — the CUDA runtime functions the CUDA upstream (cuda.c) calls,
 * as one table, reached two ways (CMake's CCA_CUDA_RUNTIME, cudart.c):
 *
 * - link (the default build): libcudart.so is a link dependency of
 *   libccalloc; the table holds the functions themselves.
 * - dlopen (CCA_CUDA_DLOPEN, the Python wheel): libccalloc has no CUDA
 *   dependency and loads on any machine; the runtime is found on the first
 *   cca_upstream_cuda_create. No runtime is CCA_ERR_NO_DEVICE, whose
 *   message says what to install.
 *
 * The members carry the functions' own names and types (__typeof__ of the
 * header's declarations), so cuda.c reads `rt->cudaMalloc(...)` and a
 * signature that changes in a new toolkit fails to compile instead of
 * being called with the wrong arguments.
 */
#ifndef CCA_CUDART_H
#define CCA_CUDART_H

#include "../support/support.h"

#include <cuda_runtime.h>

/* Every runtime function cuda.c calls, in one list (X-macro): the table's
 * members, the linked table and the dlsym loop are made from it. */
#define CCAI_CUDART_FUNCTIONS(X)                                                                                       \
    X(cudaGetDeviceCount)                                                                                              \
    X(cudaGetDriverEntryPointByVersion)                                                                                \
    X(cudaGetErrorString)                                                                                              \
    X(cudaGetLastError)                                                                                                \
    X(cudaPeekAtLastError)                                                                                             \
    X(cudaMalloc)                                                                                                      \
    X(cudaFree)                                                                                                        \
    X(cudaMemGetInfo)                                                                                                  \
    X(cudaDeviceSynchronize)                                                                                           \
    X(cudaStreamSynchronize)                                                                                           \
    X(cudaEventCreateWithFlags)                                                                                        \
    X(cudaEventRecord)                                                                                                 \
    X(cudaEventQuery)                                                                                                  \
    X(cudaEventDestroy)                                                                                                \
    X(cudaMallocHost)                                                                                                  \
    X(cudaFreeHost)                                                                                                    \
    X(cudaHostRegister)                                                                                                \
    X(cudaHostUnregister)                                                                                              \
    X(cudaMemcpyAsync)                                                                                                 \
    X(cudaStreamCreateWithFlags)                                                                                       \
    X(cudaStreamDestroy)

#define CCAI_CUDART_MEMBER(fn) __typeof__(&fn) fn;
typedef struct ccai_cudart {
    CCAI_CUDART_FUNCTIONS(CCAI_CUDART_MEMBER)
    char path[256]; /* the file the functions come from (for messages) */
} ccai_cudart;
#undef CCAI_CUDART_MEMBER

/* The table, found once per process (cudart.c). CCA_OK and *out set, or
 * CCA_ERR_NO_DEVICE with a message naming every place tried and what to
 * install (dlopen builds only: a linked runtime is always there). */
cca_status ccai_cudart_get(const ccai_cudart **out);

#endif
