/*
 * cck.h — ccalloc's kernels: softmax and dense layers, on the CPU (plain C)
 * and on CUDA GPUs, each with a double-accumulating reference for tests.
 *
 * No CUDA type appears here: streams are `void *` (cudaStream_t), device
 * pointers are plain `float *`. Every function returns a cck_status.
 *
 * Layouts: matrices are float32, row-major. A dense layer computes
 *     y[batch][out] = act( x[batch][in] · W[out][in]ᵀ + b[out] )
 * which is the layout of a PyTorch nn.Linear weight (out_features × in_features).
 */
#ifndef CCK_H
#define CCK_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cck_status {
    CCK_OK = 0,
    CCK_ERR_INVALID_ARGUMENT, /* NULL or misaligned (not 4-byte) pointer, zero dimension, bad version/block */
    CCK_ERR_NO_DEVICE,        /* no GPU present, or built without CUDA          */
    CCK_ERR_CUDA,             /* a CUDA runtime call failed                     */
    CCK_ERR_CUBLAS,           /* a cuBLAS call failed                           */
    CCK_ERR_UNSUPPORTED       /* e.g. this version cannot use that block size   */
} cck_status;

const char *cck_status_string(cck_status s);

typedef enum cck_activation { CCK_ACT_NONE = 0, CCK_ACT_RELU = 1, CCK_ACT_GELU = 2 } cck_activation;

/* "none" / "relu" / "gelu" <-> enum. Parse returns CCK_ERR_INVALID_ARGUMENT
 * for any other name. */
const char *cck_activation_name(cck_activation a);
cck_status cck_activation_parse(const char *name, cck_activation *out);

/* ---- host (CPU) kernels: what the engine runs on the simulated device ---- */

/* Row-wise numerically stable softmax; y may equal x (in place), but must
 * not otherwise overlap it (CCK_ERR_INVALID_ARGUMENT, as for a pointer that
 * is not 4-byte aligned: no float's address). */
cck_status cck_softmax_host(const float *x, float *y, size_t rows, size_t cols);

/* y = act(x·Wᵀ + b); b may be NULL (no bias). y must not overlap x, W or b,
 * and every pointer must be 4-byte aligned (CCK_ERR_INVALID_ARGUMENT).
 * The GEMM is OpenBLAS's when the library is built with it (see
 * cck_host_gemm_name), else the built-in blocked loop; then one pass adds
 * the bias and applies the activation. */
cck_status cck_dense_host(const float *x, const float *w, const float *b, float *y, size_t batch, size_t in, size_t out,
                          cck_activation act);

/* The same layer with the library's own blocked GEMM loop, whatever the
 * build: the teaching version, and what cck_dense_host runs when the library
 * is built without OpenBLAS. For tests and benchmarks. */
cck_status cck_dense_host_blocked(const float *x, const float *w, const float *b, float *y, size_t batch, size_t in,
                                  size_t out, cck_activation act);

/* Which GEMM cck_dense_host uses, for reports: OpenBLAS's configuration
 * string (version, CPU kernel, threads) or "blocked C loop (...)". */
const char *cck_host_gemm_name(void);

/* Threads the host kernels use for a large call: OpenMP's maximum
 * (OMP_NUM_THREADS, default one per core) when built with OpenMP, else 1. */
int cck_host_threads(void);

/* ---- references: double accumulation, for tests ---- */
void cck_softmax_reference(const float *x, double *y, size_t rows, size_t cols);
void cck_dense_reference(const float *x, const float *w, const float *b, double *y, size_t batch, size_t in, size_t out,
                         cck_activation act);

/* ---- CUDA ---- */

/* Number of usable GPUs in *count (0 when none or built without CUDA; the
 * status is then CCK_ERR_NO_DEVICE). */
cck_status cck_cuda_device_count(int *count);

/* A cuBLAS handle bound to a device and stream whose workspace is memory the
 * caller provides (cublasSetWorkspace), so that every device byte the layer
 * uses comes from the caller's allocator. */
typedef struct cck_cuda_context cck_cuda_context;

/* Bytes of workspace cck_cuda_context_create wants on `device` (cuBLAS's
 * recommendation for it: 32 MiB from Hopper, compute capability 9, on;
 * 4 MiB before). CCK_ERR_INVALID_ARGUMENT for bytes NULL or a device that
 * is negative or past the last GPU; CCK_ERR_NO_DEVICE without a GPU. */
cck_status cck_cublas_workspace_size(int device, size_t *bytes);

/* workspace: device memory of workspace_bytes (may be NULL with 0 bytes:
 * cuBLAS then runs without workspace). stream NULL = default stream.
 * use_tf32: allow TF32 tensor-core math in the GEMM (off by default).
 * The first context that finds a GPU loads cuBLAS (cck_cublas_load); none
 * loadable is CCK_ERR_CUBLAS. */
cck_status cck_cuda_context_create(int device, void *stream, void *workspace, size_t workspace_bytes, int use_tf32,
                                   cck_cuda_context **out);
cck_status cck_cuda_context_destroy(cck_cuda_context *ctx);

/* cuBLAS is loaded, not linked, once per process: by the first
 * cck_cuda_context_create that finds a GPU, or by this call. The search, in
 * order, stops at the first library that has every function the kernels
 * call, from the cuBLAS major version the library was built with:
 *   1. CCALLOC_CUBLAS when set and not empty: a ':'-separated list of
 *      files or sonames, and nothing else (empty: the steps below);
 *   2. a cuBLAS already loaded in the process (e.g. PyTorch's);
 *   3. libcublas.so.MAJOR by soname (LD_LIBRARY_PATH, the loader's cache);
 *   4. that file in the CUDA toolkit the library was built against.
 * CCK_OK: *where names the file loaded. CCK_ERR_CUBLAS: *where says what to
 * install and, for each place tried, the loader's reason. Built without
 * CUDA: CCK_ERR_NO_DEVICE and a sentence saying so. The answer holds for
 * the process's life, as does the string; where may be NULL. */
cck_status cck_cublas_load(const char **where);

/* Softmax with the version and block size that cck_softmax_dispatch picks
 * for this shape; y and x as for cck_softmax_host (equal, or apart).
 * CCK_ERR_INVALID_ARGUMENT as for cck_softmax_host or for ctx == NULL;
 * CCK_ERR_UNSUPPORTED for rows or cols above INT_MAX - 1024. */
cck_status cck_softmax_cuda(cck_cuda_context *ctx, const float *x, float *y, size_t rows, size_t cols);

/* What cck_softmax_cuda runs for a rows × cols softmax. */
typedef struct cck_softmax_choice {
    int version;    /* 1..5, a version of softmax.cu        */
    int block_size; /* threads per block, as for _version    */
} cck_softmax_choice;

/* The dispatch: the (version, block size) measured fastest at the nearest
 * measured shape — the table and its source run are in softmax_dispatch.c;
 * nearest means the nearest measured row count, then the nearest measured
 * row length, both on a log scale (ties to the smaller). Pure arithmetic:
 * no device, the same answer on every machine. On failure *out is {0, 0}.
 *   CCK_ERR_INVALID_ARGUMENT: out NULL, rows or cols 0, rows·cols floats
 *                             overflowing size_t;
 *   CCK_ERR_UNSUPPORTED:      rows or cols above INT_MAX - 1024 (the
 *                             kernels index with int). */
cck_status cck_softmax_dispatch(size_t rows, size_t cols, cck_softmax_choice *out);

/* The CUDA softmax versions: 1..CCK_SOFTMAX_VERSIONS (softmax.cu). */
#define CCK_SOFTMAX_VERSIONS 5

/* One numbered version (1..5, see softmax.cu) with a given block size:
 * threads per block, 0 = the version's default, else a multiple of 32 in
 * [32, 1024]; versions 3-5 take powers of two only. For tests and benchmarks.
 * Checked in this order, before the device:
 *   CCK_ERR_INVALID_ARGUMENT: x and y as for cck_softmax_host, a version
 *                             outside 1..5, a block size that is not 0 or
 *                             a multiple of 32 in [32, 1024] (-32, 48, 2048);
 *   CCK_ERR_UNSUPPORTED:      a multiple of 32 that is not a power of two
 *                             for versions 3-5 (96, 992);
 *   CCK_ERR_INVALID_ARGUMENT: ctx == NULL;
 *   CCK_ERR_UNSUPPORTED:      rows or cols above INT_MAX - 1024. */
cck_status cck_softmax_cuda_version(cck_cuda_context *ctx, int version, int block_size, const float *x, float *y,
                                    size_t rows, size_t cols);

/* Dense layer: cuBLAS SGEMM then the hand-written bias+activation epilogue. */
cck_status cck_dense_cuda(cck_cuda_context *ctx, const float *x, const float *w, const float *b, float *y, size_t batch,
                          size_t in, size_t out, cck_activation act);

/* Copies and sync on the context's stream (synchronous for simplicity). */
cck_status cck_copy_to_device(cck_cuda_context *ctx, void *dst, const void *src, size_t bytes);
cck_status cck_copy_to_host(cck_cuda_context *ctx, void *dst, const void *src, size_t bytes);
cck_status cck_cuda_synchronize(cck_cuda_context *ctx);

#ifdef __cplusplus
}
#endif

#endif /* CCK_H */
