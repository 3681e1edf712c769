/*
 * pair_loop.c — the cached alloc+free pair alone, for instruction, cache
 * and branch counts under cachegrind (no clock reads, no latency sort).
 *
 * usage: pair_loop L HOLES PAIRS [CONFIG]
 *   L live blocks (HOLES=1: 2L allocated, every other one freed), sizes
 *   log-uniform in [512 B, 8 MiB] as in `ccbench micro`; one warm-up pair per
 *   size of a 4096-size sequence; then PAIRS timed pairs over the sequence.
 * Per-pair counts: a run with PAIRS = 50000 minus a run with PAIRS = 0:
 *   cc -O2 -I allocator/include pair_loop.c build/allocator/libccalloc.a -lm -lpthread -o pair_loop
 *   valgrind --tool=cachegrind --cache-sim=yes --branch-sim=yes ./pair_loop 1000 1 50000
 */
#include <ccalloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>
static uint64_t st = 88172645463325252ull;
static double u01(void) { st ^= st << 13; st ^= st >> 7; st ^= st << 17; return (st >> 11) * (1.0 / 9007199254740992.0); }
static size_t msize(void) { double lo = log(512.0), hi = log(8.0 * 1048576.0); return (size_t)exp(lo + (hi - lo) * u01()); }
int main(int argc, char **argv) {
    size_t L = strtoull(argv[1], 0, 10); int holes = atoi(argv[2]); size_t pairs = strtoull(argv[3], 0, 10);
    const char *conf = argc > 4 ? argv[4] : "";
    size_t n = holes ? 2 * L : L;
    size_t *hs = malloc(n * sizeof *hs); void **hp = malloc(n * sizeof *hp); size_t sum = 0;
    for (size_t i = 0; i < n; i++) sum += hs[i] = msize();
    size_t seq[4096]; for (int i = 0; i < 4096; i++) seq[i] = msize();
    size_t dev = 2 * sum + ((size_t)4 << 30); if (dev < ((size_t)32 << 30)) dev = (size_t)32 << 30;
    cca_upstream *u; if (cca_upstream_host_create(dev, &u)) return 1;
    cca_config c; cca_config_default(&c); if (cca_config_parse(&c, conf)) return 2;
    cca_allocator *a; if (cca_create(&c, u, &a)) return 3;
    for (size_t i = 0; i < n; i++) if (cca_alloc(a, hs[i], NULL, &hp[i])) return 4;
    for (size_t i = 1; holes && i < n; i += 2) cca_free(a, hp[i]);
    for (int i = 0; i < 4096; i++) { void *p; if (cca_alloc(a, seq[i], NULL, &p)) return 5; cca_free(a, p); }
    struct timespec t0, t1; clock_gettime(CLOCK_MONOTONIC, &t0);
    for (size_t k = 0; k < pairs; k++) { void *p; cca_alloc(a, seq[k & 4095], NULL, &p); cca_free(a, p); }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (pairs) printf("%.1f ns/pair\n", ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / pairs);
    return 0;
}
