#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>
/* dependent random loads over a working set of N bytes (one 64 B line each) */
int main(int argc, char **argv) {
    size_t bytes = strtoull(argv[1], 0, 10), n = bytes / 64;
    size_t *perm = malloc(n * sizeof *perm); char *buf = aligned_alloc(64, n * 64);
    for (size_t i = 0; i < n; i++) perm[i] = i;
    uint64_t s = 88172645463325252ull;
    for (size_t i = n - 1; i > 0; i--) { s ^= s << 13; s ^= s >> 7; s ^= s << 17; size_t j = s % (i + 1); size_t t = perm[i]; perm[i] = perm[j]; perm[j] = t; }
    for (size_t i = 0; i < n; i++) *(void **)(buf + perm[i] * 64) = buf + perm[(i + 1) % n] * 64;
    void *p = buf; size_t steps = 20000000;
    struct timespec t0, t1; clock_gettime(CLOCK_MONOTONIC, &t0);
    for (size_t k = 0; k < steps; k++) p = *(void **)p;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%zu KiB: %.1f ns/load (%p)\n", bytes >> 10, ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / steps, p);
}
