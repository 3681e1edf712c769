/*
 * test_random.c — allocator/src/alloc.c: seeded randomized sequences over the whole allocator.
 *
 * Each run does STEPS operations drawn from a splitmix64 stream: allocations
 * of mixed sizes (small, medium, large) on three streams, frees of random
 * live blocks, record_stream, trims to a random budget and empty-caches, on a
 * simulated device small enough that OOMs happen. Every block is filled with
 * a pattern at allocation and checked at free (overlaps and stray writes
 * show up there); cca_check_invariants runs after every step, and the stats
 * are compared with the test's own bookkeeping and with the upstream's.
 *
 * Each config runs twice: with the default kind (expandable segments, over
 * the simulated device's whole maps) and with classic segments
 * (expandable:0); max_split, an option of classic segments, runs classic.
 *
 * Seeds: a fixed list plus one from time(), all printed, so a failure names
 * the seed and step to replay (set CCA_RANDOM_SEED to run just one).
 *
 * The stream is tu_rand, i.e. the project's one generator (common/
 * ccai_rng.h); random.rng_is_splitmix64 pins it to reference outputs, and to
 * the counter mix the runtime's seeded weights were computed with, so a
 * change there cannot silently change the weights or these sequences.
 */
#include "alloc_test_util.h"
#include "ccai_rng.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STEPS 3000
#define MAX_LIVE 400

typedef struct live_block {
    void *p;
    size_t size;
    uint64_t seed;
} live_block;

static size_t random_size(uint64_t *rng) {
    uint64_t r = tu_rand(rng) % 100;
    if (r < 60)
        return 1 + tu_rand(rng) % (64 * KiB);
    if (r < 85)
        return 64 * KiB + tu_rand(rng) % (1 * MiB);
    if (r < 97)
        return 1 * MiB + tu_rand(rng) % (9 * MiB);
    return 10 * MiB + tu_rand(rng) % (30 * MiB);
}

static void run(uint64_t seed, const char *conf) {
    fprintf(stderr, "test_random: seed %llu, config '%s'\n", (unsigned long long)seed, conf);
    cca_upstream *u;
    cr_assert_eq(cca_upstream_host_create(160 * MiB, &u), CCA_OK);
    cca_config cfg;
    cca_config_default(&cfg);
    cr_assert_eq(cca_config_parse(&cfg, conf), CCA_OK, "%s", cca_last_error());
    cfg.log_oom = 0;
    cca_allocator *a;
    cr_assert_eq(cca_create(&cfg, u, &a), CCA_OK, "%s", cca_last_error());
    static const cca_stream streams[] = {NULL, (cca_stream)0x1000, (cca_stream)0x2000};
    live_block live[MAX_LIVE];
    size_t n = 0, requested = 0;
    uint64_t rng = seed, allocs = 0, frees = 0, ooms = 0;
    for (int step = 0; step < STEPS; step++) {
        uint64_t r = tu_rand(&rng) % 100;
        const char *what;
        if ((r < 50 && n < MAX_LIVE) || n == 0) {
            what = "alloc";
            size_t size = random_size(&rng);
            cca_stream s = streams[tu_rand(&rng) % 3];
            void *p = NULL;
            cca_status st = cca_alloc(a, size, s, &p);
            if (st == CCA_ERR_OUT_OF_MEMORY) {
                cr_assert_null(p);
                ooms++;
            } else {
                cr_assert_eq(st, CCA_OK, "seed %llu step %d: alloc(%zu): %s", (unsigned long long)seed, step, size,
                             cca_last_error());
                cr_assert_eq((uintptr_t)p % CCA_ALIGNMENT, 0);
                uint64_t pattern = tu_rand(&rng);
                tu_fill(p, size, pattern);
                live[n++] = (live_block){p, size, pattern};
                requested += size;
                allocs++;
                if (tu_rand(&rng) % 10 == 0)
                    cr_assert_eq(cca_record_stream(a, p, streams[tu_rand(&rng) % 3]), CCA_OK);
            }
        } else if (r < 95) {
            what = "free";
            size_t i = tu_rand(&rng) % n;
            cr_assert(tu_check_fill(live[i].p, live[i].size, live[i].seed),
                      "seed %llu step %d: block %p of %zu bytes was overwritten", (unsigned long long)seed, step,
                      live[i].p, live[i].size);
            cr_assert_eq(cca_free(a, live[i].p), CCA_OK, "seed %llu step %d: %s", (unsigned long long)seed, step,
                         cca_last_error());
            requested -= live[i].size;
            live[i] = live[--n];
            frees++;
        } else if (r < 99) {
            what = "trim";
            size_t keep = (size_t)(tu_rand(&rng) % (tu_stats(a).reserved_bytes + 1));
            cca_release_report rep;
            cr_assert_eq(cca_trim(a, keep, &rep), CCA_OK);
            cr_assert(rep.bytes_still_reserved <= keep || rep.segments_kept == 0,
                      "seed %llu step %d: trim(%zu) kept %zu free segments with %zu reserved", (unsigned long long)seed,
                      step, keep, rep.segments_kept, rep.bytes_still_reserved);
        } else {
            what = "empty_cache";
            cca_release_report rep;
            cr_assert_eq(cca_empty_cache(a, &rep), CCA_OK);
            cr_assert_eq(rep.segments_kept, 0);
            cr_assert_eq(rep.bytes_still_reserved, tu_stats(a).reserved_bytes);
            cr_assert_eq(tu_stats(a).pending_blocks, 0, "empty_cache completes pending frees");
        }
        cca_status st = cca_check_invariants(a);
        cr_assert_eq(st, CCA_OK, "seed %llu step %d (%s): %s", (unsigned long long)seed, step, what, cca_last_error());
        cca_stats s = tu_stats(a);
        cr_assert_eq(s.active_blocks - s.pending_blocks, n, "seed %llu step %d", (unsigned long long)seed, step);
        cr_assert_eq(s.requested_bytes, requested, "seed %llu step %d", (unsigned long long)seed, step);
        cr_assert_eq(s.alloc_calls, allocs);
        cr_assert_eq(s.free_calls, frees);
        cr_assert_eq(s.ooms, ooms);
        cr_assert_eq(s.cached_bytes + s.allocated_bytes, s.reserved_bytes);
        cr_assert_eq(tu_upstream_stats(u).bytes_in_use, s.reserved_bytes, "seed %llu step %d", (unsigned long long)seed,
                     step);
        if (cfg.max_reserved)
            cr_assert_leq(s.reserved_bytes, cfg.max_reserved);
    }
    while (n) {
        cr_assert(tu_check_fill(live[n - 1].p, live[n - 1].size, live[n - 1].seed), "seed %llu: final free",
                  (unsigned long long)seed);
        tu_free(a, live[--n].p);
    }
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.reserved_bytes, 0, "seed %llu", (unsigned long long)seed);
    cr_assert_eq(s.active_blocks, 0);
    cr_assert_eq(s.allocated_bytes, 0);
    cr_assert_eq(cca_destroy(a), CCA_OK);
    cr_assert_eq(tu_upstream_stats(u).bytes_in_use, 0);
    cca_upstream_destroy(u);
}

static void run_seeds(const char *conf) {
    const char *only = getenv("CCA_RANDOM_SEED");
    if (only && *only) {
        run(strtoull(only, NULL, 0), conf);
        return;
    }
    const uint64_t seeds[] = {1, 42, 0xdeadbeef, 20240601};
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++)
        run(seeds[i], conf);
    run((uint64_t)time(NULL), conf);
}

/* `conf` with the default kind, then with classic segments. */
static void run_both_kinds(const char *conf) {
    run_seeds(conf);
    char classic[256];
    snprintf(classic, sizeof classic, "expandable:0%s%s", *conf ? "," : "", conf);
    run_seeds(classic);
}

Test(random, growth) {
    run_both_kinds("");
}
Test(random, growth_with_a_cap) {
    run_both_kinds("max_reserved:96M");
}
Test(random, growth_without_small_pool) {
    run_both_kinds("small_pool:0");
}
Test(random, growth_with_max_split) {
    run_seeds("expandable:0,max_split:24M");
}
Test(random, growth_holding_the_peak) {
    run_both_kinds("hold_peak:1");
}
Test(random, growth_holding_the_peak_with_a_cap) {
    run_both_kinds("hold_peak:1,max_reserved:96M");
}
Test(random, greedy) {
    run_both_kinds("policy:greedy,greedy_bytes:128M");
}

/* The splitmix64 counter mix exactly as runtime/src/model.c wrote it before it
 * used ccai_splitmix64_at: the weights must stay bit-identical. */
static uint64_t weight_mix_reference(uint64_t seed, size_t i) {
    uint64_t z = seed + (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

Test(random, rng_is_splitmix64) {
    uint64_t state = 0; /* Vigna's splitmix64.c from x = 0 */
    cr_assert_eq(tu_rand(&state), 0xe220a8397b1dcdafull);
    cr_assert_eq(tu_rand(&state), 0x6e789e6aa1b965f4ull);
    const uint64_t seeds[] = {0, 1, 42, 0xdeadbeef, UINT64_MAX};
    for (size_t k = 0; k < sizeof seeds / sizeof seeds[0]; k++) {
        uint64_t stream = seeds[k];
        for (size_t i = 0; i < 10000; i++) {
            uint64_t w = weight_mix_reference(seeds[k], i);
            cr_assert_eq(ccai_splitmix64_at(seeds[k], (uint64_t)i + 1), w, "seed %llu, element %zu",
                         (unsigned long long)seeds[k], i);
            cr_assert_eq(tu_rand(&stream), w, "the stream's output i + 1 is the counter's");
        }
    }
}

/* The fill every suite checks blocks with (tests/support): a check passes
 * only with the seed that filled, and fails on a changed byte anywhere it
 * looks, whether the block is aligned (a word at a time) or not (a byte at
 * a time), and the two ways write the same bytes. */
Test(random, the_fill_finds_a_changed_byte_where_it_looks) {
    enum { ROOM = 3 * MiB };
    unsigned char *buf = malloc(ROOM), *copy = malloc(ROOM);
    cr_assert(buf && copy);
    const size_t sizes[] = {1, 7, 8, 9, 255, 4099, 64 * KiB, 64 * KiB + 1, 2 * MiB + 5};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        for (size_t off = 0; off < 4; off += 3) { /* 0: words; 3: bytes */
            size_t n = sizes[k];
            unsigned char *p = buf + off;
            memset(buf, 0, n + off);
            tu_fill(p, n, 77 + k);
            cr_assert(tu_check_fill(p, n, 77 + k), "%zu bytes at offset %zu", n, off);
            cr_assert_not(tu_check_fill(p, n, 78 + k), "%zu bytes: another seed's check passed", n);
            unsigned char *moved = copy + (off ? 0 : 5); /* the other way reads the same bytes */
            memcpy(moved, p, n);
            cr_assert(tu_check_fill(moved, n, 77 + k), "%zu bytes: moved from offset %zu", n, off);
            /* the first and last byte, and for a large block the word it reads in its second page */
            size_t at[3] = {0, n - 1, n > 64 * KiB ? 256 + 4096 + 3 : n / 2};
            for (int j = 0; j < 3; j++) {
                p[at[j]] ^= 0x10;
                cr_assert_not(tu_check_fill(p, n, 77 + k), "%zu bytes at %zu: byte %zu changed, unseen", n, off, at[j]);
                p[at[j]] ^= 0x10;
            }
            cr_assert(tu_check_fill(p, n, 77 + k));
        }
    free(buf), free(copy);
}

/* tu_bytes_not counts the bytes that differ, wherever they are. */
Test(random, bytes_not_counts_every_changed_byte) {
    enum { N = 300000 };
    unsigned char *b = malloc(N);
    cr_assert(b);
    memset(b, 0x5a, N);
    cr_assert_eq(tu_bytes_not(b, 0, 0x11), 0);
    cr_assert_eq(tu_bytes_not(b, 1, 0x5a), 0);
    cr_assert_eq(tu_bytes_not(b, 1, 0x11), 1);
    cr_assert_eq(tu_bytes_not(b, N, 0x5a), 0);
    cr_assert_eq(tu_bytes_not(b, N, 0x11), N);
    const size_t at[] = {0, 1, N / 2, N - 1};
    for (size_t k = 0; k < 4; k++) {
        b[at[k]] = 0;
        cr_assert_eq(tu_bytes_not(b, N, 0x5a), 1, "one byte changed at %zu", at[k]);
        b[N - 1 - at[k] / 2] = 0;
        cr_assert_eq(tu_bytes_not(b, N, 0x5a), at[k] / 2 == N - 1 - at[k] ? 1 : 2, "at %zu", at[k]);
        memset(b, 0x5a, N);
    }
    free(b);
}
