/*
 * pair_loop.c — the cached alloc+free pair alone, for instruction and cache
 * counts under callgrind or cachegrind (no clock read per pair, no sort).
 * Built as bench/ccb_pair_loop; CTest runs it (ccb_pair_loop_*).
 *
 *   ccb_pair_loop [--bump] L HOLES PAIRS [CONFIG]
 *
 * - L live blocks, sizes log-uniform in [512 B, 8 MiB] as in `ccbench
 *   micro`; HOLES=1 allocates 2L and frees every other one (the holes
 *   layout), HOLES=0 keeps them packed.
 * - Warm-up: one pair per size of a sequence of 4,096 sizes; then PAIRS
 *   pairs cycling through that sequence, timed as one batch (ns/pair on
 *   stdout). The generator is seeded, so two builds run the same requests.
 * - CONFIG goes to cca_config_parse ("expandable:0,max_reserved:8G", ...)
 *   on top of cca_config_default: expandable segments on the simulated
 *   device (whole maps, its default backing); "expandable:0" gives the
 *   classic segments that the results below measured.
 * - The device is the simulated one (cca_upstream_host_create), at least
 *   32 GiB and twice the live bytes plus 4 GiB. --bump uses instead an
 *   upstream that hands out addresses without memory (a bump pointer, never
 *   touched), so that 200k blocks of up to 8 MiB fit under valgrind, whose
 *   address space the simulated device's reservation would exceed; it has
 *   no virtual-memory ops, so its CONFIG goes on top of expandable:0:
 *   classic segments, as the allocator would fall back to, without the
 *   fallback's log line (an explicit expandable:1 still falls back, and
 *   cca_create says so on stderr).
 *
 * Per-pair counts: a run with PAIRS = N minus a run with PAIRS = 0, over N:
 *
 *   valgrind --tool=callgrind build/bench/ccb_pair_loop 1000 1 0
 *   valgrind --tool=callgrind build/bench/ccb_pair_loop 1000 1 50000
 *   valgrind --tool=cachegrind --cache-sim=yes --branch-sim=yes build/bench/ccb_pair_loop 1000 1 50000
 *
 * The results that used its earlier copies (bench/results/2026-11-23-host-
 * micro-ghost, -classes, -seg, -mark, -lock, -bounds; 2026-11-24-host-hold-
 * peak; 2026-11-29-core-route, -host-carve) ran the same sequence; their
 * runs without a CONFIG measured classic segments, the default then: add
 * CONFIG expandable:0 to compare with those. Exit
 * status: 0, or 1 with a message on stderr when an argument or an
 * allocator call fails.
 */
#include <ccalloc.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SEQ 4096

static uint64_t rng_state = 88172645463325252ull;

static double uniform01(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) * (1.0 / 9007199254740992.0);
}

/* log-uniform in [512 B, 8 MiB], as ccbench micro draws its sizes */
static size_t draw_size(void) {
    double lo = log(512.0), hi = log(8.0 * 1048576.0);
    return (size_t)exp(lo + (hi - lo) * uniform01());
}

/* ---- the bump upstream: addresses without memory ------------------------ */

static const uintptr_t bump_base = (uintptr_t)1 << 44;
static uintptr_t bump_next = (uintptr_t)1 << 44;
static size_t bump_total;

static cca_status bump_alloc(void *ctx, size_t size, void **ptr) {
    (void)ctx;
    *ptr = (void *)bump_next;
    bump_next += (size + 4095) & ~(size_t)4095;
    return CCA_OK;
}

static cca_status bump_free(void *ctx, void *ptr, size_t size) {
    (void)ctx;
    (void)ptr;
    (void)size;
    return CCA_OK;
}

static cca_status bump_mem_info(void *ctx, size_t *free_bytes, size_t *total_bytes) {
    (void)ctx;
    *free_bytes = bump_total - (size_t)(bump_next - bump_base);
    *total_bytes = bump_total;
    return CCA_OK;
}

static int fail(const char *what) {
    fprintf(stderr, "ccb_pair_loop: %s: %s\n", what, cca_last_error());
    return 1;
}

int main(int argc, char **argv) {
    int bump = argc > 1 && strcmp(argv[1], "--bump") == 0;
    char **arg = argv + bump;
    int args = argc - bump;
    if (args < 4 || args > 5) {
        fprintf(stderr, "usage: ccb_pair_loop [--bump] L HOLES PAIRS [CONFIG]\n");
        return 1;
    }
    size_t live = strtoull(arg[1], NULL, 10), pairs = strtoull(arg[3], NULL, 10);
    int holes = atoi(arg[2]);
    const char *conf = args == 5 ? arg[4] : "";
    size_t n = holes ? 2 * live : live, sum = 0;
    size_t *sizes = malloc((n ? n : 1) * sizeof *sizes);
    void **ptrs = malloc((n ? n : 1) * sizeof *ptrs);
    if (!sizes || !ptrs) {
        fprintf(stderr, "ccb_pair_loop: out of host memory\n");
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        sum += sizes[i] = draw_size();
    size_t seq[SEQ];
    for (int i = 0; i < SEQ; i++)
        seq[i] = draw_size();
    size_t device = 2 * sum + ((size_t)4 << 30);
    if (device < ((size_t)32 << 30))
        device = (size_t)32 << 30;

    cca_upstream *u;
    if (bump) {
        bump_total = device;
        cca_upstream_ops ops = {.alloc = bump_alloc, .free = bump_free, .mem_info = bump_mem_info, .name = "bump"};
        if (cca_upstream_custom_create(&ops, NULL, &u) != CCA_OK)
            return fail("the bump upstream");
    } else if (cca_upstream_host_create(device, &u) != CCA_OK) {
        return fail("the simulated device");
    }
    cca_config c;
    cca_config_default(&c);
    if (bump)
        c.expandable = 0;
    if (cca_config_parse(&c, conf) != CCA_OK)
        return fail("CONFIG");
    cca_allocator *a;
    if (cca_create(&c, u, &a) != CCA_OK)
        return fail("cca_create");
    for (size_t i = 0; i < n; i++)
        if (cca_alloc(a, sizes[i], NULL, &ptrs[i]) != CCA_OK)
            return fail("a live block");
    for (size_t i = 1; holes && i < n; i += 2)
        cca_free(a, ptrs[i]);
    for (int i = 0; i < SEQ; i++) {
        void *p;
        if (cca_alloc(a, seq[i], NULL, &p) != CCA_OK)
            return fail("the warm-up");
        cca_free(a, p);
    }

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (size_t k = 0; k < pairs; k++) {
        void *p;
        if (cca_alloc(a, seq[k & (SEQ - 1)], NULL, &p) != CCA_OK)
            return fail("a timed pair");
        cca_free(a, p);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (pairs)
        printf("%.1f ns/pair\n",
               ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / (double)pairs);

    for (size_t i = 0; i < n; i += holes ? 2 : 1)
        cca_free(a, ptrs[i]);
    cca_destroy(a);
    cca_upstream_destroy(u);
    free(ptrs);
    free(sizes);
    return 0;
}
