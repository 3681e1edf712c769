/*
 * cublas.h — the cuBLAS functions the CUDA kernels call, as one table that
 * cublas.c fills from a library loaded at the first context (dlopen).
 *
 * - Why loaded, not linked: libcublasLt alone is 640 MB of relocations; a
 *   linked cuBLAS cost every ccrun start ~100 ms and ~200 MB of address
 *   space, on machines that never run a GEMM on a GPU. Nothing loads until
 *   cck_cuda_context_create has found a GPU.
 * - The members carry the functions' exported names and their header types
 *   (__typeof__), so a signature that changes in a new toolkit fails to
 *   compile instead of being called with the wrong arguments.
 * - Found once per process; the table then never changes and the library is
 *   never closed, so a pointer to it stays valid for the process's life.
 */
#ifndef CCK_CUBLAS_H
#define CCK_CUBLAS_H

#include <cublas_v2.h>

#include "cck_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Every cuBLAS function kernels/src calls, by its exported (_v2) name. */
#define CCK_CUBLAS_FUNCTIONS(X)                                                                                        \
    X(cublasCreate_v2)                                                                                                 \
    X(cublasDestroy_v2)                                                                                                \
    X(cublasSetStream_v2)                                                                                              \
    X(cublasSetWorkspace_v2)                                                                                           \
    X(cublasSetMathMode)                                                                                               \
    X(cublasSgemm_v2)

#define CCK_CUBLAS_MEMBER(fn) __typeof__(&fn) fn;
typedef struct cck_cublas {
    CCK_CUBLAS_FUNCTIONS(CCK_CUBLAS_MEMBER)
} cck_cublas;
#undef CCK_CUBLAS_MEMBER

/* The table (loaded on the first call, once per process): CCK_OK and *out,
 * or CCK_ERR_CUBLAS with cck_cublas_load's message saying why. */
cck_status cck_cublas_get(const cck_cublas **out);

#ifdef __cplusplus
}
#endif

#endif
