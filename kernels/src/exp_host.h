/*
 * exp_host.h — exp(d) for d <= 0, as straight-line float arithmetic that the
 * compiler vectorizes; shared by the host softmax and the host GELU.
 *
 * Why not expf: glibc's expf is a scalar call of a few ns, and in a loop over
 * a row it is most of the time (the host softmax ran at 4 GB/s on it). The
 * same function written without calls or branches lets GCC process 4 (SSE)
 * floats per instruction:
 *
 *     exp(d) = 2^n · exp(r),   n = round(d / ln 2),   r = d - n·ln 2
 *
 *   - n: rounded by adding and subtracting 1.5·2^23 (the float's mantissa
 *     then has no room for a fraction), no call to roundf;
 *   - r: n·ln 2 is subtracted in two parts (Cody-Waite): ln2_hi has few
 *     enough bits that n·ln2_hi is exact for |n| <= 126, so r keeps its
 *     precision; |r| <= ln2/2;
 *   - exp(r): the degree-6 polynomial of Cephes' expf;
 *   - 2^n: written directly into the float's exponent field.
 * Error < 1 ulp over [-87.33, 0]: 0.99 ulp at worst against double exp over
 * every float of that range (an exhaustive scalar run, 31 s, not in CI;
 * tests/kernels/test_kernels_host.c checks every 97th float against a 1.5 ulp bound).
 *
 * Domain: d <= 0 or NaN. Both callers guarantee it (softmax: x - max <= 0;
 * GELU: -2|u|). Results below FLT_MIN (d < -87.34) are 0 where expf would
 * give a subnormal; -inf gives 0; NaN gives NaN.
 *
 * Files that use it are compiled with -fno-trapping-math
 * (kernels/CMakeLists.txt): the selects may then be evaluated on every lane,
 * which is what lets GCC vectorize them. No result changes, only FP
 * exception flags, which nothing here reads.
 */
#ifndef CCK_EXP_HOST_H
#define CCK_EXP_HOST_H

#include <stdint.h>
#include <string.h>

static inline float cck_exp_nonpositive(float d) {
    const float log2e = 1.44269504088896341f;
    const float ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f; /* ln2_hi + ln2_lo = ln 2 */
    const float lowest = -87.33654f;                             /* ln(FLT_MIN): 2^n stays a normal float */
    const float shifter = 12582912.0f;                           /* 1.5·2^23: (v + it) - it rounds v */
    /* The arithmetic runs on every lane, NaN lanes too, so it works on a copy
     * clamped to [lowest, 0] (d <= 0 by the precondition; NaN fails the `>`
     * and becomes lowest): n is then in [-126, 0] and its conversion to int
     * and the shift are defined. The selects at the end put 0 and NaN back. */
    float dc = d > lowest ? d : lowest;
    float n = (dc * log2e + shifter) - shifter;
    float r = dc - n * ln2_hi - n * ln2_lo;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23; /* 2^n, n in [-126, 0] */
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    float e = d < lowest ? 0.0f : p * scale;
    return d != d ? d : e; /* NaN stays NaN */
}

#endif /* CCK_EXP_HOST_H */
