/*
 * stats_cost.c — what one cca_get_stats (and one cca_get_domain_stats) call
 * costs with many live blocks on expandable segments, on the simulated
 * device. A standalone program over the public API, linked against the
 * library built before and after a change (README.md has the commands).
 *
 * Set-up, per layout (L live blocks, sizes log-uniform in [512 B, 8 MiB],
 * seeded: the same blocks as ccbench micro's, on stream NULL):
 *   packed   allocate L blocks and keep them;
 *   holes    allocate 2L, free every other one: L free blocks between the
 *            live ones, every page under them still mapped;
 *   trimmed  holes, then cca_empty_cache: the whole pages inside every
 *            hole are unmapped, so most large free blocks are mostly
 *            unmapped (the stats' largest free block is then a longest
 *            mapped stretch, not a block).
 * Check before timing: the layout's blocks are all live (active_blocks), and
 * the figures the stats derive (largest_free_block, cached_bytes,
 * fragmentation) are printed, so that runs of two builds can be compared
 * figure by figure: a change to how they are computed must not change them.
 * Timed: rounds of n calls between two clock reads (CLOCK_MONOTONIC), n
 * doubled until a round takes >= 20 ms; 7 rounds, median and least per call.
 *
 *   cc -O2 -std=c11 -D_GNU_SOURCE -I allocator/include stats_cost.c \
 *      BUILD/allocator/libccalloc.a -lpthread -lm -ldl -o stats_cost
 *   ./stats_cost [live blocks, default 100000]
 */
#include "ccalloc.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define ROUNDS 7
#define ROUND_NS 20000000.0 /* a round lasts at least this long */

static uint64_t rng = 0x5ca1ab1e0ddba11ull;

static uint64_t next(void) { /* splitmix64 */
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static size_t mixed_size(void) {
    double u = (double)(next() >> 11) / 9007199254740992.0, lo = log(512.0), hi = log(8.0 * 1048576.0);
    return (size_t)exp(lo + (hi - lo) * u);
}

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

typedef struct timing {
    double median, least;
    size_t calls;
} timing;

static const cca_allocator *timed_a;
static void call_stats(void) {
    cca_stats s;
    cca_get_stats(timed_a, &s);
}
static void call_domain_stats(void) {
    cca_domain_stats s;
    (void)cca_get_domain_stats(timed_a, NULL, &s);
}

static timing time_calls(void (*fn)(void)) {
    size_t n = 1;
    for (;;) { /* a round long enough to read with the clock */
        double t0 = now_ns();
        for (size_t i = 0; i < n; i++)
            fn();
        if (now_ns() - t0 >= ROUND_NS)
            break;
        n *= 2;
    }
    double per[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = now_ns();
        for (size_t i = 0; i < n; i++)
            fn();
        per[r] = (now_ns() - t0) / (double)n;
    }
    qsort(per, ROUNDS, sizeof per[0], cmp_double);
    return (timing){per[ROUNDS / 2], per[0], n * ROUNDS};
}

static int run(const char *layout, size_t live) {
    int holes = layout[0] != 'p', trimmed = layout[0] == 't';
    size_t n = holes ? 2 * live : live;
    size_t *sizes = malloc(n * sizeof *sizes);
    void **p = malloc(n * sizeof *p);
    if (!sizes || !p)
        return fprintf(stderr, "out of host memory\n"), 1;
    rng = 0x5ca1ab1e0ddba11ull;
    size_t sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += sizes[i] = mixed_size();
    size_t cap = 2 * sum + ((size_t)4 << 30);
    if (cap < ((size_t)32 << 30))
        cap = (size_t)32 << 30;
    cca_host_options o = {.capacity = cap};
    cca_upstream *u = NULL;
    cca_allocator *a = NULL;
    cca_config c;
    cca_config_default(&c);
    if (cca_upstream_host_create_with(&o, &u) != CCA_OK || cca_config_parse(&c, "expandable:1,log_oom:0") != CCA_OK ||
        cca_create(&c, u, &a) != CCA_OK)
        return fprintf(stderr, "set-up: %s\n", cca_last_error()), 1;
    for (size_t i = 0; i < n; i++)
        if (cca_alloc(a, sizes[i], NULL, &p[i]) != CCA_OK)
            return fprintf(stderr, "alloc %zu of %zu bytes: %s\n", i, sizes[i], cca_last_error()), 1;
    if (holes)
        for (size_t i = 0; i < n; i += 2)
            if (cca_free(a, p[i]) != CCA_OK)
                return fprintf(stderr, "free: %s\n", cca_last_error()), 1;
    if (trimmed && cca_empty_cache(a, NULL) != CCA_OK)
        return fprintf(stderr, "empty_cache: %s\n", cca_last_error()), 1;
    cca_stats s;
    cca_get_stats(a, &s);
    if (s.active_blocks != live || s.page_size == 0)
        return fprintf(stderr, "%s: %zu live blocks, page %zu: not the layout\n", layout, s.active_blocks,
                       s.page_size), 1;
    timed_a = a;
    timing ts = time_calls(call_stats), td = time_calls(call_domain_stats);
    printf("| %s | %zu | %zu | %zu | %zu | %.6f | %zu | %.0f | %.0f | %.0f | %.0f |\n", layout, s.active_blocks,
           s.cached_blocks, s.largest_free_block, s.cached_bytes, s.fragmentation, ts.calls, ts.median, ts.least,
           td.median, td.least);
    fflush(stdout);
    for (size_t i = holes ? 1 : 0; i < n; i += holes ? 2 : 1)
        (void)cca_free(a, p[i]);
    cca_status st = cca_destroy(a);
    cca_upstream_destroy(u);
    free(sizes);
    free(p);
    return st != CCA_OK;
}

int main(int argc, char **argv) {
    size_t live = argc > 1 ? strtoull(argv[1], NULL, 0) : 100000;
    printf("| layout | live blocks | free blocks | largest_free_block | cached_bytes | fragmentation | stats calls timed "
           "| cca_get_stats ns/call (median) | (least) | cca_get_domain_stats ns/call (median) | (least) |\n");
    printf("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    int bad = 0;
    bad |= run("packed", live);
    bad |= run("holes", live);
    bad |= run("trimmed", live);
    return bad;
}
