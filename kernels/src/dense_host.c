/*
 * dense_host.c — y = act(x · Wᵀ + b) on the CPU, and its double reference.
 *
 * Layout (row-major float32, PyTorch nn.Linear):
 *     x[batch][in], W[out][in], b[out] (or NULL), y[batch][out]
 *
 * The layer is built like its GPU twin in dense.cu: a library GEMM, then our
 * own epilogue pass over y.
 *
 *     GEMM       y = x · Wᵀ           OpenBLAS cblas_sgemm when the library is
 *                                     built with it (CCK_HAVE_OPENBLAS), else
 *                                     the blocked C loop of gemm_host_blocked.c
 *     epilogue   y = act(y + b)       one vectorized pass (epilogue_row, built
 *                                     for AVX2 and the baseline), rows shared
 *                                     among OpenMP threads
 *
 * Why a real BLAS: the engine runs every model on the simulated device with
 * these kernels, and the hand-written loop reaches ~15 GFLOP/s on two cores
 * where OpenBLAS, which picks AVX2 or AVX-512 kernels for the CPU it finds at
 * run time, reaches ~200-300 (docs/kernels.md, measured). Row-major x·Wᵀ is
 * one cblas_sgemm(RowMajor, NoTrans, Trans, batch, out, in) with lda = ldb =
 * in and ldc = out; beta = 0, so y is written, never read, and NaN in x or W
 * reaches y as it does in the blocked loop. BLAS takes int dimensions: a call
 * with a dimension above INT_MAX runs the blocked loop instead.
 * cck_dense_host_blocked always runs the blocked loop, so tests and the
 * benchmark can check and time both on a machine that has OpenBLAS.
 *
 * Address space: OpenBLAS (before 0.3.31) retries forever a work buffer it
 * cannot map, 128 MiB and a header on x86-64, taken at a caller's first
 * GEMM (blas_memory_alloc), so under an address-space limit (ulimit -v,
 * RLIMIT_AS) with less room the process hangs there. Until one cblas_sgemm
 * has returned, each call first maps and unmaps BLAS_BUFFER_PROBE bytes of
 * address space itself (PROT_NONE: nothing is touched); refused, the
 * blocked loop runs instead (same results within the stated tolerance,
 * slower). After one has returned the buffer is OpenBLAS's own and is
 * reused, so no call probes again. Only a GEMM of more than
 * BLAS_SMALL_MAX multiply-adds counts as having taken the buffer: on
 * AVX-512 CPUs OpenBLAS runs small ones through kernels that take none
 * (its small-matrix path, up to about 10^6), so a tiny first layer must
 * not switch the probe off. Not covered: two GEMMs running at once need
 * two buffers, and the probe only ever asks for room for one. The hang
 * OpenBLAS's own start-up can meet, before main, is not this file's
 * (docs/engine.md, "Address-space limits").
 *
 * The epilogue is a separate pass (the GEMM has finished with y): batch·out
 * reads and writes against 2·batch·in·out flops, so its share shrinks as `in`
 * grows; the benchmark reports it as a percentage over the GEMM alone.
 * The activations are activation.h's, the CUDA epilogue's too: GELU is the
 * tanh form, as in GPT-2, computed through an exp of a non-positive argument.
 *
 * Accuracy: each y is a float sum of `in` products (OpenBLAS: FMA chains in
 * its own order); its error against the double reference is bounded by a
 * small multiple of in·2⁻²⁴·Σ|x·w| and is typically √in·2⁻²⁴·Σ|x·w| (the
 * tests check 1.2·1e-5·(Σ|x·w| + |b|) + 1e-30 for both GEMMs,
 * tests/kernels/kernels_check.h).
 */
#include <limits.h>
#include <math.h>

#include "activation.h"
#include "cck_internal.h"
#include "exp_host.h"

#ifdef CCK_HAVE_OPENBLAS
#include <cblas.h>
#include <stdatomic.h>
#include <sys/mman.h>
#endif

/* The activations are activation.h's, shared with the CUDA epilogue; GELU's
 * exp here is the vectorizable polynomial (glibc's expf and tanhf are scalar
 * calls, several times slower). */
static inline float gelu(float v) {
    float u = cck_gelu_arg(v);
    return cck_gelu_finish(v, u, cck_exp_nonpositive(cck_gelu_exp_arg(u)));
}

/* One row of y: y[o] = act(y[o] + b[o]). Each activation gets its own
 * branch-free loop, one with bias and one without (a `b ? b[o] : 0` inside
 * the loop is a load that may not happen, which stops GCC from vectorizing
 * GELU's); built for AVX2 and for the baseline. */
#define identity(v) (v)
#define ACT_LOOPS(F)                                                                                                   \
    do {                                                                                                               \
        if (b != NULL) {                                                                                               \
            CCK_SIMD()                                                                                                 \
            for (size_t o = 0; o < out; o++) {                                                                         \
                yr[o] = F(yr[o] + b[o]);                                                                               \
            }                                                                                                          \
        } else {                                                                                                       \
            CCK_SIMD()                                                                                                 \
            for (size_t o = 0; o < out; o++) {                                                                         \
                yr[o] = F(yr[o]);                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
    } while (0)

CCK_VECTOR_CLONES static void epilogue_row(float *yr, const float *b, size_t out, cck_activation act) {
    switch (act) {
    case CCK_ACT_NONE: ACT_LOOPS(identity); break; /* only called with a bias: see epilogue */
    case CCK_ACT_RELU: ACT_LOOPS(cck_relu); break;
    case CCK_ACT_GELU: ACT_LOOPS(gelu); break;
    }
}

/* y[r][o] = act(y[r][o] + b[o]) for every row; nothing to do without either.
 * GELU computes an exp per element, so it is worth a second thread much
 * sooner than the others. */
static void epilogue(float *y, const float *b, size_t batch, size_t out, cck_activation act) {
    if (b == NULL && act == CCK_ACT_NONE) {
        return;
    }
    size_t n = batch * out;
    int threaded = act == CCK_ACT_GELU ? n >= CCK_PARALLEL_MIN_ELEMS / 8 : n >= CCK_PARALLEL_MIN_ELEMS * 4;
    (void)threaded; /* unused without OpenMP */
    CCK_PARALLEL_FOR(threaded)
    for (size_t r = 0; r < batch; r++) {
        epilogue_row(y + r * out, b, out, act);
    }
}

#ifdef CCK_HAVE_OPENBLAS
static int blas_dims_ok(size_t batch, size_t in, size_t out) {
    return batch <= INT_MAX && in <= INT_MAX && out <= INT_MAX;
}

/* OpenBLAS's work buffer (128 MiB on x86-64) and its header, rounded up. */
#define BLAS_BUFFER_PROBE ((size_t)136 << 20)
#define BLAS_SMALL_MAX ((double)(1u << 24)) /* batch·in·out; OpenBLAS's small path ends near 10^6 */
static atomic_int blas_returned;            /* a cblas_sgemm above BLAS_SMALL_MAX has returned: its buffer exists */

/* Whether OpenBLAS can map its buffer now (see the top of the file). */
static int blas_buffer_fits(void) {
    if (atomic_load_explicit(&blas_returned, memory_order_relaxed))
        return 1;
    void *p = mmap(NULL, BLAS_BUFFER_PROBE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return 0;
    munmap(p, BLAS_BUFFER_PROBE);
    return 1;
}
#endif

const char *cck_host_gemm_name(void) {
#ifdef CCK_HAVE_OPENBLAS
    return openblas_get_config(); /* e.g. "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY SkylakeX MAX_THREADS=64" */
#else
    return "blocked C loop (built without OpenBLAS)";
#endif
}

/* Both entry points: the GEMM (OpenBLAS when built with it, allowed, the
 * dimensions fit its ints and its buffer fits the address space; else the
 * blocked loop), then the epilogue. */
static cck_status dense(const float *x, const float *w, const float *b, float *y, size_t batch, size_t in, size_t out,
                        cck_activation act, int allow_blas) {
    if (!cck_dense_args_ok(x, w, b, y, batch, in, out, act)) {
        return CCK_ERR_INVALID_ARGUMENT;
    }
#ifdef CCK_HAVE_OPENBLAS
    if (allow_blas && blas_dims_ok(batch, in, out) && blas_buffer_fits()) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)batch, (int)out, (int)in, 1.0f, x, (int)in, w,
                    (int)in, 0.0f, y, (int)out);
        if ((double)batch * (double)in * (double)out > BLAS_SMALL_MAX)
            atomic_store_explicit(&blas_returned, 1, memory_order_relaxed);
    } else {
        cck_gemm_host_blocked(x, w, y, batch, in, out);
    }
#else
    (void)allow_blas;
    cck_gemm_host_blocked(x, w, y, batch, in, out);
#endif
    epilogue(y, b, batch, out, act);
    return CCK_OK;
}

cck_status cck_dense_host(const float *x, const float *w, const float *b, float *y, size_t batch, size_t in, size_t out,
                          cck_activation act) {
    return dense(x, w, b, y, batch, in, out, act, 1);
}

cck_status cck_dense_host_blocked(const float *x, const float *w, const float *b, float *y, size_t batch, size_t in,
                                  size_t out, cck_activation act) {
    return dense(x, w, b, y, batch, in, out, act, 0);
}

/* The same GELU in double, written without cancellation: the textbook
 * 0.5·v·(1 + tanh u) loses everything for u < -19 (1 + tanh u rounds to 0
 * in double although the true value is ~2e^(2u)), which would make the
 * reference less accurate than the float kernels it checks. */
static double gelu_reference(double v) {
    const double k = 0.79788456080286535588; /* sqrt(2/pi) */
    double u = k * (v + 0.044715 * v * v * v);
    double e = exp(-2.0 * fabs(u));
    return v * (u >= 0.0 ? 1.0 : e) / (1.0 + e);
}

void cck_dense_reference(const float *x, const float *w, const float *b, double *y, size_t batch, size_t in, size_t out,
                         cck_activation act) {
    if (x == NULL || w == NULL || y == NULL || !cck_dims_ok(batch, in) || !cck_dims_ok(out, in) ||
        !cck_dims_ok(batch, out)) {
        return;
    }
    for (size_t r = 0; r < batch; r++) {
        for (size_t o = 0; o < out; o++) {
            double s = b ? (double)b[o] : 0.0;
            for (size_t k = 0; k < in; k++) {
                s += (double)x[r * in + k] * (double)w[o * in + k];
            }
            if (act == CCK_ACT_RELU) {
                s = s > 0.0 ? s : (s == s ? 0.0 : s);
            } else if (act == CCK_ACT_GELU) {
                s = gelu_reference(s);
            }
            y[r * out + o] = s;
        }
    }
}
