/*
 * cublas_double.c — a stand-in for libcublas.so for test_cublas_load.c:
 * the six functions kernels/src/cublas.c looks up (each answers "not
 * initialised": nothing here is ever meant to run a GEMM) and
 * cublasGetProperty, whose major version is CCK_DOUBLE_MAJOR. Built under
 * the soname libcublas.so.<major> (tests/kernels/kernels.cmake), so a copy
 * already loaded is what cuBLAS's own soname finds. With CCK_DOUBLE_PARTIAL
 * only cublasCreate_v2 is there: a library that is not all of cuBLAS.
 */
#include <library_types.h>

typedef int status; /* cublasStatus_t: 0 success, 1 not initialised */
#define NOT_INITIALIZED 1

status cublasCreate_v2(void **handle) {
    (void)handle;
    return NOT_INITIALIZED;
}

#ifndef CCK_DOUBLE_PARTIAL
status cublasDestroy_v2(void *handle) {
    (void)handle;
    return NOT_INITIALIZED;
}

status cublasSetStream_v2(void *handle, void *stream) {
    (void)handle, (void)stream;
    return NOT_INITIALIZED;
}

status cublasSetWorkspace_v2(void *handle, void *workspace, unsigned long bytes) {
    (void)handle, (void)workspace, (void)bytes;
    return NOT_INITIALIZED;
}

status cublasSetMathMode(void *handle, int mode) {
    (void)handle, (void)mode;
    return NOT_INITIALIZED;
}

status cublasSgemm_v2(void) {
    return NOT_INITIALIZED;
}

status cublasGetProperty(libraryPropertyType type, int *value) {
    *value = type == MAJOR_VERSION ? CCK_DOUBLE_MAJOR : 0;
    return 0;
}
#endif
