/*
 * pair_sim.c — the holes pair loop of pair_loop.c over a custom upstream
 * that hands out addresses without memory (a bump pointer, never touched),
 * so that 200k blocks of up to 8 MiB fit under valgrind, whose address
 * space the simulated device's reservation would exceed. mem_info reports
 * the capacity pair_loop.c's device would have. For cache counts per pair:
 *
 *   cc -O2 -g -I allocator/include pair_sim.c build/allocator/libccalloc.a -lm -lpthread -o pair_sim
 *   for P in 0 100000; do valgrind --tool=cachegrind --cache-sim=yes --D1=49152,12,64 \
 *       --LL=1048576,16,64 ./pair_sim 100000 1 $P; done      # (run P - run 0) / P
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
static uintptr_t bump = (uintptr_t)1 << 44;
static cca_status ualloc(void *c, size_t s, void **p) { (void)c; *p = (void *)bump; bump += (s + 4095) & ~(size_t)4095; return CCA_OK; }
static cca_status ufree(void *c, void *p, size_t s) { (void)c; (void)p; (void)s; return CCA_OK; }
static size_t dev_total;
static cca_status uinfo(void *c, size_t *f, size_t *t) { (void)c; *f = dev_total - (bump - ((uintptr_t)1 << 44)); *t = dev_total; return CCA_OK; }
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
int main(int argc, char **argv) {
    size_t L = strtoull(argv[1], 0, 10); int holes = atoi(argv[2]); size_t pairs = strtoull(argv[3], 0, 10);
    const char *conf = argc > 4 ? argv[4] : "";
    size_t n = holes ? 2 * L : L;
    size_t *hs = malloc(n * sizeof *hs); void **hp = malloc(n * sizeof *hp);
    size_t sum = 0; for (size_t i = 0; i < n; i++) sum += hs[i] = msize();
    dev_total = 2 * sum + ((size_t)4 << 30); if (dev_total < ((size_t)32 << 30)) dev_total = (size_t)32 << 30;
    size_t seq[4096]; for (int i = 0; i < 4096; i++) seq[i] = msize();
    cca_upstream_ops ops = {.alloc = ualloc, .free = ufree, .mem_info = uinfo, .name = "bump"};
    cca_upstream *u; if (cca_upstream_custom_create(&ops, NULL, &u)) return 1;
    cca_config c; cca_config_default(&c); if (cca_config_parse(&c, conf)) return 1;
    cca_allocator *a; if (cca_create(&c, u, &a)) return 1;
    for (size_t i = 0; i < n; i++) if (cca_alloc(a, hs[i], NULL, &hp[i])) return 1;
    for (size_t i = 1; holes && i < n; i += 2) cca_free(a, hp[i]);
    for (int i = 0; i < 4096; i++) { void *p; if (cca_alloc(a, seq[i], NULL, &p)) return 1; cca_free(a, p); }
    double t0 = now();
    for (size_t i = 0; i < pairs; i++) { void *p; if (cca_alloc(a, seq[i & 4095], NULL, &p)) return 1; cca_free(a, p); }
    double t1 = now();
    printf("%.1f ns/pair\n", pairs ? (t1 - t0) / pairs : 0.0);
    return 0;
}
