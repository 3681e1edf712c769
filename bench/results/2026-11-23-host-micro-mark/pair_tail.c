/*
 * pair_tail.c — where the holes pair's tail comes from: the pair loop of
 * pair_loop.c (same sizes, same set-up), each pair timed alone with rdtscp,
 * the 4,096-size sequence run CYCLES times. Prints the percentiles of all
 * pairs (the first cycle left out: it follows the set-up), then, per
 * power-of-two size bucket, the median over the sequence's sizes of each
 * size's median over the cycles: a size that is slow in every cycle is slow
 * by its work, not by the machine's noise.
 *
 * usage: pair_tail L HOLES CYCLES [CONFIG]     (x86-64, invariant TSC)
 *   cc -O2 -I allocator/include pair_tail.c build/allocator/libccalloc.a -lm -lpthread -o pair_tail
 *   ./pair_tail 100000 1 40
 */
#include <ccalloc.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <x86intrin.h>

static uint64_t st = 88172645463325252ull;
static double u01(void) { st ^= st << 13; st ^= st >> 7; st ^= st << 17; return (st >> 11) * (1.0 / 9007199254740992.0); }
static size_t msize(void) { double lo = log(512.0), hi = log(8.0 * 1048576.0); return (size_t)exp(lo + (hi - lo) * u01()); }
static double now_ns(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
static double quantile(double *v, size_t n, double q) { qsort(v, n, sizeof *v, cmp); return v[(size_t)(q * (n - 1))]; }

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: pair_tail L HOLES CYCLES [CONFIG]\n"); return 2; }
    size_t L = strtoull(argv[1], 0, 10), cycles = strtoull(argv[3], 0, 10);
    int holes = atoi(argv[2]);
    const char *conf = argc > 4 ? argv[4] : "";
    if (cycles < 2) { fprintf(stderr, "CYCLES >= 2\n"); return 2; }
    /* the TSC's rate, before anything is warm */
    double t0 = now_ns(); uint64_t c0 = __rdtsc(); while (now_ns() - t0 < 2e8) {} double ghz = (double)(__rdtsc() - c0) / (now_ns() - t0);
    unsigned aux; uint64_t over = ~0ull;
    for (int i = 0; i < 1000; i++) { uint64_t x = __rdtscp(&aux), y = __rdtscp(&aux); if (y - x < over) over = y - x; }
    size_t n = holes ? 2 * L : L, sum = 0;
    size_t *hs = malloc(n * sizeof *hs); void **hp = malloc(n * sizeof *hp);
    for (size_t i = 0; i < n; i++) sum += hs[i] = msize();
    size_t seq[4096]; for (int i = 0; i < 4096; i++) seq[i] = msize();
    size_t dev = 2 * sum + ((size_t)4 << 30); if (dev < ((size_t)32 << 30)) dev = (size_t)32 << 30;
    cca_upstream *u; if (cca_upstream_host_create(dev, &u)) return 1;
    cca_config c; cca_config_default(&c); if (cca_config_parse(&c, conf)) return 1;
    cca_allocator *a; if (cca_create(&c, u, &a)) return 1;
    for (size_t i = 0; i < n; i++) if (cca_alloc(a, hs[i], NULL, &hp[i])) return 1;
    for (size_t i = 1; holes && i < n; i += 2) cca_free(a, hp[i]);
    for (int i = 0; i < 4096; i++) { void *p; if (cca_alloc(a, seq[i], NULL, &p)) return 1; cca_free(a, p); }
    double *lat = malloc(4096 * cycles * sizeof *lat);
    for (size_t k = 0; k < cycles; k++)
        for (int i = 0; i < 4096; i++) {
            void *p;
            uint64_t x = __rdtscp(&aux);
            cca_alloc(a, seq[i], NULL, &p);
            cca_free(a, p);
            uint64_t y = __rdtscp(&aux);
            lat[k * 4096 + i] = (double)(y - x - over) / ghz;
        }
    size_t m = 4096 * (cycles - 1);
    double *all = malloc(m * sizeof *all), *med = malloc(4096 * sizeof *med), *col = malloc(cycles * sizeof *col);
    for (size_t j = 0; j < m; j++) all[j] = lat[4096 + j];
    printf("L=%zu %s [%s], %zu cycles of 4096 pairs (first left out), TSC %.3f GHz\n", L, holes ? "holes" : "packed", conf, cycles, ghz);
    printf("all pairs: median %.0f ns, p90 %.0f, p99 %.0f, p99.9 %.0f\n", quantile(all, m, 0.5), quantile(all, m, 0.9),
           quantile(all, m, 0.99), quantile(all, m, 0.999));
    for (int i = 0; i < 4096; i++) {
        for (size_t k = 1; k < cycles; k++) col[k - 1] = lat[k * 4096 + i];
        med[i] = quantile(col, cycles - 1, 0.5);
    }
    printf("| size bucket | sizes | median of per-size medians, ns | share of sizes over 100 ns |\n|---|--:|--:|--:|\n");
    for (int b = 9; b < 23; b++) {
        double v[4096]; size_t k = 0, slow = 0;
        for (int i = 0; i < 4096; i++)
            if (seq[i] >= ((size_t)1 << b) && seq[i] < ((size_t)2 << b)) { v[k++] = med[i]; slow += med[i] > 100; }
        if (k) printf("| [2^%d, 2^%d) | %zu | %.0f | %.2f |\n", b, b + 1, k, quantile(v, k, 0.5), (double)slow / k);
    }
    cca_destroy(a);
    cca_upstream_destroy(u);
    return 0;
}
