/*
 * activation.h — the dense layer's activations, one scalar definition for
 * the CUDA epilogue (dense.cu), the host epilogue (dense_host.c) and the
 * tests that run the GPU's version on the CPU (test_kernels_emulated.c).
 *
 * ReLU keeps NaN (as torch.relu): v > 0 or NaN gives v, anything else +0.
 * Written as a select, so loops over it vectorize on the CPU.
 *
 * GELU is the tanh approximation (Hendrycks & Gimpel), as in GPT-2:
 *
 *     gelu(v) = 0.5·v·(1 + tanh(u)),   u = sqrt(2/pi)·(v + 0.044715·v³)
 *
 * evaluated without tanh. With e = exp(-2|u|) in [0, 1],
 * tanh|u| = (1 - e) / (1 + e), so
 *
 *     1 + tanh(u) = 2 / (1 + e)      for u >= 0
 *                 = 2e / (1 + e)     for u < 0
 *
 * and gelu(v) = v·(u >= 0 ? 1 : e) / (1 + e). The same function, but one exp
 * of a non-positive argument, no cancellation (1 + e is in [1, 2]; the
 * textbook 1 + tanh(u) loses every digit for u < -9 and is exactly 0 in
 * float there), and exact limits: v for large positive v, -0 for large
 * negative v (e underflows), NaN for NaN and for -inf (-inf·0), as the
 * double reference in dense_host.c gives.
 *
 * The exp is the caller's: cck_gelu_finish takes e. The GPU passes CUDA's
 * expf (<= 2 ulp), the host its vectorizable polynomial cck_exp_nonpositive
 * (< 1 ulp, exp_host.h), so both sides share every other operation.
 */
#ifndef CCK_ACTIVATION_H
#define CCK_ACTIVATION_H

#include <math.h>

#include "hostdevice.h"

CCK_HD float cck_relu(float v) {
    return v > 0.0f || v != v ? v : 0.0f;
}

/* GELU's tanh argument u. */
CCK_HD float cck_gelu_arg(float v) {
    const float k = 0.7978845608028654f; /* sqrt(2/pi) */
    return k * (v + 0.044715f * v * v * v);
}

/* The exp GELU needs: e = exp(exp_arg), exp_arg = -2|u| <= 0. */
CCK_HD float cck_gelu_exp_arg(float u) {
    return -2.0f * fabsf(u);
}

/* GELU from v, its u and e = exp(-2|u|). */
CCK_HD float cck_gelu_finish(float v, float u, float e) {
    return v * (u >= 0.0f ? 1.0f : e) / (1.0f + e);
}

/* GELU with libm's / CUDA's expf: the GPU epilogue's activation. */
CCK_HD float cck_gelu_expf(float v) {
    float u = cck_gelu_arg(v);
    return cck_gelu_finish(v, u, expf(cck_gelu_exp_arg(u)));
}

#endif /* CCK_ACTIVATION_H */
