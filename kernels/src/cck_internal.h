/*
 * cck_internal.h — names shared between the files of kernels/src, not public.
 *
 * The public CUDA entry points (cck_softmax_cuda_version, cck_dense_cuda, ...)
 * live in cuda_api.c: plain C that checks every argument and only then calls
 * the launchers below. The launchers are defined by the .cu files when the
 * library is built with CUDA, and by cuda_stub.c (all CCK_ERR_NO_DEVICE)
 * otherwise. So argument errors read the same with and without a GPU, and the
 * host tests can check them on any machine.
 */
#ifndef CCK_INTERNAL_H
#define CCK_INTERNAL_H

#include "cck.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Block sizes: every version (1..CCK_SOFTMAX_VERSIONS, cck.h) takes a
 * multiple of 32 in [32, 1024] (0 = its default); versions 3, 4 and 5 need a
 * power of two (CUB's BlockReduce and v5's register tiles are templates on
 * the block size, and only those are instantiated). */
#define CCK_MAX_BLOCK 1024

/* --- defined in context.cu (or cuda_stub.c) --- */
cck_status cck_cu_device_count(int *count);
cck_status cck_cu_workspace_size(int device, size_t *bytes);
cck_status cck_cu_context_create(int device, void *stream, void *workspace, size_t workspace_bytes, int use_tf32,
                                 cck_cuda_context **out);
cck_status cck_cu_context_destroy(cck_cuda_context *ctx);
cck_status cck_cu_copy(cck_cuda_context *ctx, void *dst, const void *src, size_t bytes, int to_device);
cck_status cck_cu_synchronize(cck_cuda_context *ctx);

/* --- defined in softmax.cu (or cuda_stub.c); arguments already checked --- */
cck_status cck_cu_softmax(cck_cuda_context *ctx, int version, int block_size, const float *x, float *y, size_t rows,
                          size_t cols);

/* --- defined in dense.cu (or cuda_stub.c); arguments already checked --- */
cck_status cck_cu_dense(cck_cuda_context *ctx, const float *x, const float *w, const float *b, float *y, size_t batch,
                        size_t in, size_t out, cck_activation act);

/* Host kernels share their outer loop among OpenMP threads when the library
 * is built with OpenMP and the call is big enough: at least
 * CCK_PARALLEL_MIN_ELEMS softmax elements (~2 ms of work) or
 * CCK_PARALLEL_MIN_MACS dense multiply-adds (~0.7 ms); the dense layer's
 * epilogue pass (dense_host.c) at CCK_PARALLEL_MIN_ELEMS / 8 elements of y
 * with GELU (an exp each), 4 * CCK_PARALLEL_MIN_ELEMS otherwise. Below that, waking a
 * second thread costs more than it saves, and on a loaded machine it can
 * cost a scheduler time slice (measured: 8 ms for a 512x128 softmax).
 * CCK_SIMD(clause) marks a loop for OpenMP SIMD vectorization (a reduction
 * clause, or none); without OpenMP both macros expand to nothing. */
#define CCK_PARALLEL_MIN_ELEMS ((size_t)1 << 18)
#define CCK_PARALLEL_MIN_MACS ((size_t)1 << 22)
#ifdef _OPENMP
#define CCK_PRAGMA(x) _Pragma(#x)
#define CCK_PARALLEL_FOR(cond) CCK_PRAGMA(omp parallel for schedule(static) if (cond))
#define CCK_SIMD(clause) CCK_PRAGMA(omp simd clause)
#else
#define CCK_PARALLEL_FOR(cond)
#define CCK_SIMD(clause)
#endif

/* CCK_VECTOR_CLONES on a host function with vector loops: GCC compiles it
 * twice, for x86-64-v3 (AVX2 + FMA: 8 floats per instruction) and for the
 * baseline (SSE2: 4), and an ifunc picks one when the library loads (GCC's
 * function multiversioning). Measured on the softmax, 1.6-1.8x; results can
 * differ in the last bits between the two (FMA contracts a·b + c). Only GCC
 * on x86-64 Linux; elsewhere, or with -DCCK_NO_CLONES, the baseline alone.
 * Apply it to functions without OpenMP regions (call them from one). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && !defined(CCK_NO_CLONES)
#define CCK_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define CCK_VECTOR_CLONES
#endif

/* --- defined in softmax_dispatch.c --- */
/* One measured shape and its fastest configuration. */
typedef struct cck_softmax_entry {
    size_t rows, cols;  /* the shape measured (<= INT_MAX each)        */
    int version, block; /* the fastest version there, its block size   */
} cck_softmax_entry;
/* The table cck_softmax_dispatch uses (sorted by rows, then cols), and the
 * results file (relative to the source tree) its rows come from. */
extern const cck_softmax_entry cck_softmax_table[];
extern const size_t cck_softmax_table_len;
extern const char cck_softmax_table_source[];
/* The dispatch rule over any table (sorted by rows, then cols): the nearest
 * row count on a log scale, then among its entries the nearest row length
 * (ties to the smaller). Status codes as cck_softmax_dispatch, and
 * CCK_ERR_INVALID_ARGUMENT for a NULL or empty table. */
cck_status cck_softmax_lookup(const cck_softmax_entry *table, size_t n, size_t rows, size_t cols,
                              cck_softmax_choice *out);

/* --- defined in gemm_host_blocked.c --- */
/* y = x·Wᵀ (row-major, no bias, no activation) with the built-in blocked
 * loop; arguments already checked by the caller. */
void cck_gemm_host_blocked(const float *x, const float *w, float *y, size_t batch, size_t in, size_t out);

/* --- defined in common.c --- */
/* rows * cols elements fit a size_t and their bytes too: 1, else 0. */
int cck_dims_ok(size_t rows, size_t cols);
/* The softmax's arguments (host and CUDA alike): x, y set, no zero or
 * overflowing dimension, y equal to x (in place) or overlapping none of its
 * floats: 1, else 0. */
int cck_softmax_args_ok(const float *x, const float *y, size_t rows, size_t cols);
/* The CUDA softmax kernels index rows and columns with int: a thread's row
 * index runs up to rows + CCK_MAX_BLOCK - 1 (the last block's spare
 * threads) and a loop counter up to cols + CCK_MAX_BLOCK - 1 before its test
 * fails, and neither may wrap. 1 when both stay below INT_MAX, else 0 (the
 * caller answers CCK_ERR_UNSUPPORTED). */
int cck_softmax_fits_int(size_t rows, size_t cols);
/* The dense layer's arguments (host and CUDA alike): x, w, y set, no zero or
 * overflowing dimension, y's floats overlapping none of x's, W's or b's (b
 * may be NULL), a known activation: 1, else 0. */
int cck_dense_args_ok(const float *x, const float *w, const float *b, const float *y, size_t batch, size_t in,
                      size_t out, cck_activation act);

#ifdef __cplusplus
}
#endif

#endif /* CCK_INTERNAL_H */
