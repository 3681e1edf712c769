/*
 * ccai_rng.h — the project's one seeded random generator, header-only.
 *
 * Two pieces, both from Blackman & Vigna (prng.di.unimi.it), the usual choice
 * for reproducible simulations:
 *
 *   splitmix64   a 64-bit counter stepped by the golden gamma and a mixing
 *                function (xor-shift-multiply, three rounds):
 *                    output k of seed s = mix(s + k * gamma), k = 1, 2, ...
 *                Used directly where each number must depend on its index
 *                alone (the runtime's seeded weights: element i of a tensor
 *                is output i + 1, so any thread can compute any element), and
 *                as a plain stream (ccai_splitmix64_next) by the tests.
 *   xoshiro256** 256 bits of state seeded with four splitmix64 outputs (no
 *                seed is bad, not even 0); period 2^256 - 1. The generator of
 *                the benchmark's trace generators and micro-benchmark.
 *
 * Both are integer-only: the same seed gives the same numbers, bit for bit,
 * on every machine and compiler. Changing any line here changes the runtime's
 * random weights and every generated trace; tests/allocator/random/test_random.c and
 * tests/bench/test_bench.c pin reference outputs.
 *
 *   ccai_rng r;
 *   ccai_rng_seed(&r, 42);
 *   uint64_t x = ccai_rng_next(&r);        // 64 random bits
 *   double u = ccai_rng_uniform(&r);       // [0, 1), 53 bits
 *   uint64_t k = ccai_rng_below(&r, 10);   // 0..9 (modulo: bias < n / 2^64)
 *
 * Cost: a few integer operations per number; no allocation, no global state
 * (each user owns its state, so threads need no lock).
 */
#ifndef CCAI_RNG_H
#define CCAI_RNG_H

#include <stdint.h>

/* splitmix64's increment: 2^64 / golden ratio, odd. */
#define CCAI_SPLITMIX64_GAMMA 0x9e3779b97f4a7c15ull

/* splitmix64's output function: a bijection of 64-bit words. */
static inline uint64_t ccai_splitmix64_mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Output k (k >= 1) of the splitmix64 stream that starts at `seed`, without
 * stepping through the ones before it (counter-based use). */
static inline uint64_t ccai_splitmix64_at(uint64_t seed, uint64_t k) {
    return ccai_splitmix64_mix(seed + k * CCAI_SPLITMIX64_GAMMA);
}

/* The next output of the splitmix64 stream whose state is *state. */
static inline uint64_t ccai_splitmix64_next(uint64_t *state) {
    *state += CCAI_SPLITMIX64_GAMMA;
    return ccai_splitmix64_mix(*state);
}

/* The top 53 bits of x as a double in [0, 1), exactly (x >> 11) * 2^-53. */
static inline double ccai_unit_double(uint64_t x) {
    return (double)(x >> 11) * (1.0 / 9007199254740992.0);
}

/* ---- xoshiro256** ----------------------------------------------------------- */

typedef struct ccai_rng {
    uint64_t s[4];
} ccai_rng;

static inline void ccai_rng_seed(ccai_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++)
        r->s[i] = ccai_splitmix64_next(&seed);
}

static inline uint64_t ccai_rotl64(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

static inline uint64_t ccai_rng_next(ccai_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = ccai_rotl64(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = ccai_rotl64(s[3], 45);
    return result;
}

/* [0, 1) with 53 random bits. */
static inline double ccai_rng_uniform(ccai_rng *r) {
    return ccai_unit_double(ccai_rng_next(r));
}

/* 0..n-1 (next % n; 0 when n is 0). */
static inline uint64_t ccai_rng_below(ccai_rng *r, uint64_t n) {
    return n ? ccai_rng_next(r) % n : 0;
}

#endif /* CCAI_RNG_H */
