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
 *     epilogue   y = act(y + b)       one pass, rows shared among OpenMP threads
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
 * The epilogue is a separate pass (the GEMM has finished with y): batch·out
 * reads and writes against 2·batch·in·out flops, so its share shrinks as `in`
 * grows; the benchmark reports it as a percentage over the GEMM alone.
 * GELU is the tanh form, as in GPT-2 and the CUDA epilogue.
 *
 * Accuracy: each y is a float sum of `in` products (OpenBLAS: FMA chains in
 * its own order); its error against the double reference is bounded by a
 * small multiple of in·2⁻²⁴·Σ|x·w| and is typically √in·2⁻²⁴·Σ|x·w| (the
 * tests check 1e-5·(Σ|x·w| + |b|) for both GEMMs).
 */
#include <limits.h>
#include <math.h>

#include "cck_internal.h"

#ifdef CCK_HAVE_OPENBLAS
#include <cblas.h>
#endif

/* The tanh approximation of GELU (Hendrycks & Gimpel), as in GPT-2:
 *     0.5·v·(1 + tanh(u)),  u = sqrt(2/pi)·(v + 0.044715·v³)
 * computed as v / (1 + exp(-2u)), the same function (1 + tanh(u) =
 * 2 / (1 + exp(-2u))), because glibc's expf is several times faster than its
 * tanhf and this pass is otherwise a visible share of the layer. Large
 * negative v: exp(-2u) overflows to inf and the result is -0, the limit;
 * large positive v: exp(-2u) -> 0 and the result is v. NaN stays NaN. */
static inline float gelu(float v) {
    const float k2 = 2.0f * 0.7978845608028654f; /* 2·sqrt(2/pi) */
    return v / (1.0f + expf(-k2 * (v + 0.044715f * v * v * v)));
}

/* ReLU with NaN kept (as torch.relu): a select, not a branch, so the loop
 * vectorizes and random signs cost no mispredictions. */
static inline float relu(float v) {
    return v > 0.0f || v != v ? v : 0.0f;
}

/* y[r][o] = act(y[r][o] + b[o]) for every row; nothing to do without either.
 * One loop per (activation, bias) so each inner loop is branch-free. GELU
 * calls expf per element, so it is worth a second thread much sooner. */
#define EPILOGUE_LOOP(threads_if, EXPR)                                                                                \
    do {                                                                                                               \
        CCK_PARALLEL_FOR(threads_if)                                                                                   \
        for (size_t r = 0; r < batch; r++) {                                                                           \
            float *yr = y + r * out;                                                                                   \
            for (size_t o = 0; o < out; o++) {                                                                         \
                float v = yr[o] + (b ? b[o] : 0.0f);                                                                   \
                yr[o] = EXPR;                                                                                          \
            }                                                                                                          \
        }                                                                                                              \
    } while (0)

static void epilogue(float *y, const float *b, size_t batch, size_t out, cck_activation act) {
    size_t n = batch * out;
    switch (act) {
    case CCK_ACT_NONE:
        if (b != NULL) {
            EPILOGUE_LOOP(n >= CCK_PARALLEL_MIN_ELEMS * 4, v);
        }
        break;
    case CCK_ACT_RELU: EPILOGUE_LOOP(n >= CCK_PARALLEL_MIN_ELEMS * 4, relu(v)); break;
    case CCK_ACT_GELU: EPILOGUE_LOOP(n >= CCK_PARALLEL_MIN_ELEMS / 8, gelu(v)); break;
    }
}

#ifdef CCK_HAVE_OPENBLAS
static int blas_dims_ok(size_t batch, size_t in, size_t out) {
    return batch <= INT_MAX && in <= INT_MAX && out <= INT_MAX;
}
#endif

const char *cck_host_gemm_name(void) {
#ifdef CCK_HAVE_OPENBLAS
    return openblas_get_config(); /* e.g. "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY SkylakeX MAX_THREADS=64" */
#else
    return "blocked C loop (built without OpenBLAS)";
#endif
}

cck_status cck_dense_host(const float *x, const float *w, const float *b, float *y, size_t batch, size_t in, size_t out,
                          cck_activation act) {
    if (!cck_dense_args_ok(x, w, b, y, batch, in, out, act)) {
        return CCK_ERR_INVALID_ARGUMENT;
    }
#ifdef CCK_HAVE_OPENBLAS
    if (blas_dims_ok(batch, in, out)) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)batch, (int)out, (int)in, 1.0f, x, (int)in, w,
                    (int)in, 0.0f, y, (int)out);
        epilogue(y, b, batch, out, act);
        return CCK_OK;
    }
#endif
    cck_gemm_host_blocked(x, w, y, batch, in, out);
    epilogue(y, b, batch, out, act);
    return CCK_OK;
}

cck_status cck_dense_host_blocked(const float *x, const float *w, const float *b, float *y, size_t batch, size_t in,
                                  size_t out, cck_activation act) {
    if (!cck_dense_args_ok(x, w, b, y, batch, in, out, act)) {
        return CCK_ERR_INVALID_ARGUMENT;
    }
    cck_gemm_host_blocked(x, w, y, batch, in, out);
    epilogue(y, b, batch, out, act);
    return CCK_OK;
}

static double gelu_reference(double v) {
    const double k = 0.79788456080286535588; /* sqrt(2/pi) */
    return 0.5 * v * (1.0 + tanh(k * (v + 0.044715 * v * v * v)));
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
