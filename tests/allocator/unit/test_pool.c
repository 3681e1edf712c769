/*
 * test_pool.c — allocator/src/alloc.c and segment.c: best fit, split and
 * coalesce, the segment rules of growth, the greedy arena, the OOM path
 * (impossible requests, the retry, the log line), max_reserved, max_split,
 * and every bad input. Streams are test_stream.c's.
 *
 * Every allocator here has classic segments (CLASSIC, expandable:0, heads
 * each config: the rules below are theirs; expandable segments have suites
 * of their own), otherwise the default config. Expected numbers follow the
 * rules at the top of alloc.c and core/segment.c: requests round to 512 B;
 * <= 1 MiB -> small pool of 2 MiB segments (remainders >= 512 B split off);
 * < 10 MiB -> medium pool of 20 MiB segments (falling back to the request
 * rounded to 2 MiB when the 20 MiB one is refused); larger -> large pool, a
 * segment of the request rounded up to 2 MiB; a medium- or large-pool
 * remainder splits off only when it is > 1 MiB. A large request may take a
 * medium block.
 */
#include "alloc_test_util.h"
#include "malloc_fault.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#define S1 ((cca_stream)0x1000)
#define S2 ((cca_stream)0x2000)
#define CLASSIC "expandable:0"

static cca_upstream *u;
static cca_allocator *a;

static void host_1g(void) {
    tu_host_allocator(1 * GiB, CLASSIC, &u, &a);
}
static void teardown(void) {
    tu_fixture_teardown(a, u);
}

TestSuite(pool, .init = host_1g, .fini = teardown);

/* ---- sizes, alignment, exact stats ---------------------------------------------- */

Test(pool, rounding_alignment_and_contiguous_small_blocks) {
    const size_t sizes[] = {1, 511, 512, 513, 1000, 4096, 100000, 1 * MiB};
    enum { N = sizeof sizes / sizeof sizes[0] };
    void *p[N];
    size_t allocated = 0, requested = 0;
    for (int i = 0; i < N; i++) {
        p[i] = tu_alloc(a, sizes[i], NULL);
        size_t rounded = (sizes[i] + 511) / 512 * 512;
        cr_assert_eq(tu_block_size(a, p[i]), rounded, "size %zu", sizes[i]);
        /* one small segment; best fit always takes its free tail, so blocks follow each other */
        if (i > 0)
            cr_assert_eq((char *)p[i], (char *)p[i - 1] + (sizes[i - 1] + 511) / 512 * 512, "block %d", i);
        allocated += rounded;
        requested += sizes[i];
    }
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.allocated_bytes, allocated);
    cr_assert_eq(s.allocated_bytes_peak, allocated);
    cr_assert_eq(s.requested_bytes, requested);
    cr_assert_eq(s.reserved_bytes, 2 * MiB);
    cr_assert_eq(s.segments, 1);
    cr_assert_eq(s.upstream_allocs, 1);
    cr_assert_eq(s.active_blocks, N);
    cr_assert_eq(s.cached_blocks, 1);
    cr_assert_eq(s.cached_bytes, 2 * MiB - allocated);
    cr_assert_eq(s.splits, N);
    tu_check(a);
    for (int i = 0; i < N; i++)
        tu_free(a, p[i]);
    s = tu_stats(a);
    cr_assert_eq(s.allocated_bytes, 0);
    cr_assert_eq(s.requested_bytes, 0);
    cr_assert_eq(s.allocated_bytes_peak, allocated);
    cr_assert_eq(s.cached_blocks, 1);
    cr_assert_eq(s.cached_bytes, 2 * MiB);
    cr_assert_eq(s.largest_free_block, 2 * MiB);
    cr_assert_eq(s.fragmentation, 0.0);
}

static int by_address(const void *x, const void *y) {
    uintptr_t a1 = *(const uintptr_t *)x, a2 = *(const uintptr_t *)y;
    return (a1 > a2) - (a1 < a2);
}

Test(pool, exact_stats_many_sizes_distinct_non_overlapping) {
    enum { SMALL = 100, MEDIUM = 3, N = SMALL + MEDIUM + 1 };
    void *p[N];
    size_t req[N];
    for (int i = 0; i < SMALL; i++)
        req[i] = 4 * KiB;
    for (int i = 0; i < MEDIUM; i++)
        req[SMALL + i] = 5 * MiB;
    req[N - 1] = 12 * MiB + 1; /* rounds to 12M+512 in a 14M segment; a 2M-512 tail splits off */
    for (int i = 0; i < N; i++) {
        p[i] = tu_alloc(a, req[i], NULL);
        tu_fill(p[i], req[i], (uint64_t)i);
    }
    cca_stats s = tu_stats(a);
    size_t allocated = SMALL * 4 * KiB + MEDIUM * 5 * MiB + 12 * MiB + 512;
    cr_assert_eq(s.reserved_bytes, 2 * MiB + 20 * MiB + 14 * MiB);
    cr_assert_eq(s.segments, 3);
    cr_assert_eq(s.allocated_bytes, allocated);
    cr_assert_eq(s.allocated_bytes_peak, allocated);
    cr_assert_eq(s.requested_bytes, allocated - 511);
    cr_assert_eq(s.active_blocks, N);
    cr_assert_eq(s.cached_blocks, 3);
    cr_assert_eq(s.cached_bytes, s.reserved_bytes - allocated);
    cr_assert_eq(s.largest_free_block, 5 * MiB);
    cr_assert_eq(tu_block_size(a, p[N - 1]), 12 * MiB + 512);

    uintptr_t sorted[N][2];
    for (int i = 0; i < N; i++) {
        sorted[i][0] = (uintptr_t)p[i];
        sorted[i][1] = tu_block_size(a, p[i]);
    }
    qsort(sorted, N, sizeof sorted[0], by_address);
    for (int i = 1; i < N; i++)
        cr_assert_leq(sorted[i - 1][0] + sorted[i - 1][1], sorted[i][0], "blocks overlap");
    for (int i = 0; i < N; i++) {
        cr_assert(tu_check_fill(p[i], req[i], (uint64_t)i), "block %d was overwritten", i);
        tu_free(a, p[i]);
    }
    s = tu_stats(a);
    cr_assert_eq(s.allocated_bytes, 0);
    cr_assert_eq(s.allocated_bytes_peak, allocated);
    cr_assert_eq(s.active_blocks, 0);
    cr_assert_eq(s.cached_blocks, 3, "every segment coalesced into one free block");
    cr_assert_eq(s.cached_bytes, 36 * MiB);
    cr_assert_eq(s.largest_free_block, 20 * MiB);
    cr_assert_eq(s.fragmentation, 1.0 - 20.0 / 36.0);
}

Test(pool, size_zero_gives_null_and_changes_nothing) {
    cca_stats before = tu_stats(a);
    void *p = (void *)0x1;
    cr_assert_eq(cca_alloc(a, 0, NULL, &p), CCA_OK);
    cr_assert_null(p);
    tu_assert_intact(a, &before, "size 0");
    cr_assert_eq(cca_free(a, NULL), CCA_OK);
    tu_assert_intact(a, &before, "free(NULL)");
}

/* ---- best fit ------------------------------------------------------------------ */

Test(pool, best_fit_takes_the_smallest_block_that_fits) {
    /* [A 64K][x][B 16K][y][C 32K][z][tail] with x, y, z 512 B live separators */
    void *A = tu_alloc(a, 64 * KiB, NULL), *x = tu_alloc(a, 512, NULL);
    void *B = tu_alloc(a, 16 * KiB, NULL), *y = tu_alloc(a, 512, NULL);
    void *C = tu_alloc(a, 32 * KiB, NULL), *z = tu_alloc(a, 512, NULL);
    void *tail = (char *)z + 512;
    tu_free(a, A);
    tu_free(a, B);
    tu_free(a, C);
    cr_assert_eq(tu_stats(a).cached_blocks, 4);
    cr_assert_eq(tu_alloc(a, 20 * KiB, NULL), C, "20K: the 32K block is the smallest that fits");
    cr_assert_eq(tu_alloc(a, 16 * KiB, NULL), B, "16K: exact fit");
    cr_assert_eq(tu_alloc(a, 60 * KiB, NULL), A, "60K: the 64K block");
    cr_assert_eq(tu_alloc(a, 100 * KiB, NULL), tail, "100K: only the tail fits");
    cr_assert_eq(tu_alloc(a, 12 * KiB, NULL), (char *)C + 20 * KiB, "12K: the 12K remainder of C");
    cr_assert_eq(tu_alloc(a, 4 * KiB, NULL), (char *)A + 60 * KiB, "4K: the 4K remainder of A");
    tu_check(a);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.active_blocks, 9);
    cr_assert_eq(s.segments, 1);
    /* free everything: one free block, the segment's first address again */
    void *all[] = {x, y, z};
    for (int i = 0; i < 3; i++)
        tu_free(a, all[i]);
    tu_free(a, C), tu_free(a, B), tu_free(a, A), tu_free(a, tail);
    tu_free(a, (char *)C + 20 * KiB), tu_free(a, (char *)A + 60 * KiB);
    cr_assert_eq(tu_stats(a).cached_blocks, 1);
    void *first = tu_alloc(a, 1 * MiB, NULL);
    cr_assert_eq(first, A, "after freeing everything the first address comes back");
    tu_free(a, first);
}

Test(pool, best_fit_ties_go_to_the_lowest_address) {
    /* two full small segments of four 512K blocks; free the second block of
     * each: two equal free blocks in different segments */
    void *p[8];
    for (int i = 0; i < 8; i++)
        p[i] = tu_alloc(a, 512 * KiB, NULL);
    cr_assert_eq(tu_stats(a).segments, 2);
    tu_free(a, p[1]);
    tu_free(a, p[5]);
    void *low = p[1] < p[5] ? p[1] : p[5], *high = p[1] < p[5] ? p[5] : p[1];
    cr_assert_eq(tu_alloc(a, 512 * KiB, NULL), low);
    cr_assert_eq(tu_alloc(a, 512 * KiB, NULL), high);
    /* within one segment: equal holes at A and C, A first */
    void *q[5];
    for (int i = 0; i < 5; i++)
        q[i] = tu_alloc(a, 64 * KiB, NULL);
    tu_free(a, q[3]);
    tu_free(a, q[1]);
    cr_assert_eq(tu_alloc(a, 64 * KiB, NULL), q[1]);
    cr_assert_eq(tu_alloc(a, 64 * KiB, NULL), q[3]);
    tu_check(a);
    for (int i = 0; i < 8; i++)
        tu_free(a, p[i]);
    for (int i = 0; i < 5; i++)
        tu_free(a, q[i]);
}

/* The cached pair calls no upstream, and its host memory is a block record
 * for a remainder (from the spare records here), a tree node (none here:
 * each remainder is the recent block the next request takes) and the live
 * map's doubling (alloc.c): 256 live blocks fill its first table, and the
 * 257th, served from the cache, doubles it: one allocation. */
Test(pool, a_cached_alloc_allocates_only_when_the_live_map_doubles) {
    enum { N = 257 };
    void *p[N];
    for (int i = 0; i < N - 1; i++)
        p[i] = tu_alloc(a, 512, S1); /* one small segment, the table full */
    for (int i = 0; i < N - 1; i++)
        tu_free(a, p[i]);
    cca_stats before = tu_stats(a);
    long n = tu_malloc_calls();
    for (int i = 0; i < N - 1; i++)
        p[i] = tu_alloc(a, 512, S1);
    long cached = tu_malloc_calls() - n;
    n = tu_malloc_calls();
    p[N - 1] = tu_alloc(a, 512, S1);
    long doubling = tu_malloc_calls() - n;
    cca_stats after = tu_stats(a);
    for (int i = 0; i < N; i++)
        tu_free(a, p[i]);
    cr_assert_eq(cached, 0, "%ld host allocations in 256 cached allocs", cached);
    cr_assert_eq(doubling, 1, "the 257th live block doubles the live map: %ld", doubling);
    cr_assert_eq(after.upstream_allocs, before.upstream_allocs, "a cached alloc called the upstream");
}

/* ---- split and coalesce --------------------------------------------------------- */

Test(pool, free_coalesces_with_both_neighbours) {
    void *A = tu_alloc(a, 8 * KiB, NULL), *B = tu_alloc(a, 8 * KiB, NULL), *C = tu_alloc(a, 8 * KiB, NULL);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.splits, 3);
    cr_assert_eq(s.cached_blocks, 1);
    tu_free(a, A);
    s = tu_stats(a);
    cr_assert_eq(s.cached_blocks, 2);
    cr_assert_eq(s.merges, 0);
    tu_free(a, C); /* merges with the tail */
    s = tu_stats(a);
    cr_assert_eq(s.cached_blocks, 2);
    cr_assert_eq(s.merges, 1);
    cr_assert_eq(s.largest_free_block, 2 * MiB - 16 * KiB);
    tu_free(a, B); /* merges with A before it and C+tail after it */
    s = tu_stats(a);
    cr_assert_eq(s.cached_blocks, 1);
    cr_assert_eq(s.merges, 3);
    cr_assert_eq(s.largest_free_block, 2 * MiB);
    cr_assert_eq(tu_alloc(a, 8 * KiB, NULL), A, "the first address comes back");
    tu_free(a, A);
}

/* After the first round every segment is one free block, so every later
 * round starts from the same state and must produce the same addresses (the
 * first round may differ: it saw segments appear one at a time). */
Test(pool, rounds_of_alloc_and_free_give_the_same_addresses_and_peaks) {
    enum { N = 40, ROUNDS = 5 };
    size_t sizes[N];
    void *first[N], *p[N];
    uint64_t rng = 7;
    for (int i = 0; i < N; i++)
        sizes[i] = 1 + tu_rand(&rng) % (i % 4 == 0 ? 6 * MiB : 200 * KiB);
    cca_stats after_first = {0};
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < N; i++) {
            p[i] = tu_alloc(a, sizes[i], NULL);
            if (round == 1)
                first[i] = p[i];
            else if (round > 1)
                cr_assert_eq(p[i], first[i], "round %d block %d", round, i);
        }
        /* free in a scrambled order */
        for (int k = 0; k < N; k++)
            tu_free(a, p[(k * 17) % N]);
        tu_check(a);
        cca_stats s = tu_stats(a);
        cr_assert_eq(s.allocated_bytes, 0);
        cr_assert_eq(s.cached_blocks, s.segments, "round %d: one free block per segment", round);
        cr_assert_eq(s.cached_bytes, s.reserved_bytes);
        if (round == 0) {
            after_first = s;
        } else {
            cr_assert_eq(s.reserved_bytes_peak, after_first.reserved_bytes_peak);
            cr_assert_eq(s.allocated_bytes_peak, after_first.allocated_bytes_peak);
            cr_assert_eq(s.upstream_allocs, after_first.upstream_allocs, "no new segment after round 1");
            cr_assert_eq(s.segments, after_first.segments);
        }
    }
}

Test(pool, large_pool_keeps_small_remainders_as_slack) {
    void *p = tu_alloc(a, 9 * MiB + 512 * KiB, NULL); /* medium: 20M segment, 10.5M free tail */
    cr_assert_eq(tu_block_size(a, p), 9 * MiB + 512 * KiB);
    cr_assert_eq(tu_stats(a).cached_bytes, 10 * MiB + 512 * KiB);
    void *q = tu_alloc(a, 9 * MiB + 768 * KiB, NULL); /* takes the 10.5M block, 768K tail is slack */
    cr_assert_eq(q, (char *)p + 9 * MiB + 512 * KiB);
    cr_assert_eq(tu_block_size(a, q), 10 * MiB + 512 * KiB);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.segments, 1);
    cr_assert_eq(s.allocated_bytes, 20 * MiB);
    cr_assert_eq(s.requested_bytes, 19 * MiB + 256 * KiB);
    cr_assert_eq(s.cached_blocks, 0);
    void *r = tu_alloc(a, 19 * MiB + 512 * KiB, NULL); /* >= 10M: own segment rounded to 2M */
    cr_assert_eq(tu_block_size(a, r), 20 * MiB);
    /* exactly 1 MiB + 512 more than requested is split off (remainder > 1 MiB) */
    void *t = tu_alloc(a, 10 * MiB - 1 * MiB - 512, NULL); /* new 20M segment */
    cr_assert_eq(tu_block_size(a, t), 9 * MiB - 512);
    void *v = tu_alloc(a, 9 * MiB + 512, NULL); /* 11M+512 free -> remainder 2M > 1M: split */
    cr_assert_eq(tu_block_size(a, v), 9 * MiB + 512);
    cr_assert_eq(v, (char *)t + 9 * MiB - 512);
    void *w = tu_alloc(a, 1 * MiB + 512, NULL); /* 2M free, remainder 1M - 512: slack */
    cr_assert_eq(tu_block_size(a, w), 2 * MiB);
    s = tu_stats(a);
    cr_assert_eq(s.segments, 3);
    cr_assert_eq(s.cached_bytes, 0);
    tu_free(a, p), tu_free(a, q), tu_free(a, r), tu_free(a, t), tu_free(a, v), tu_free(a, w);
}

Test(pool, small_pool_splits_down_to_512_bytes) {
    void *p = tu_alloc(a, 1 * MiB, NULL);
    void *q = tu_alloc(a, 1 * MiB - 512, NULL);
    void *r = tu_alloc(a, 1, NULL);
    cr_assert_eq(q, (char *)p + 1 * MiB);
    cr_assert_eq(r, (char *)q + 1 * MiB - 512);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.segments, 1);
    cr_assert_eq(s.cached_blocks, 0);
    cr_assert_eq(s.allocated_bytes, 2 * MiB);
    tu_free(a, p), tu_free(a, q), tu_free(a, r);
}

Test(pool, small_pool_off_serves_small_requests_from_the_large_pool) {
    cca_allocator *b = tu_allocator(u, CLASSIC ",small_pool:0");
    void *p = tu_alloc(b, 512, NULL);
    cca_stats s = tu_stats(b);
    cr_assert_eq(s.reserved_bytes, 20 * MiB);
    cr_assert_eq(tu_block_size(b, p), 512);
    tu_free(b, p);
    tu_destroy_clean(b, u);
}

/* ---- growth ------------------------------------------------------------------- */

Test(pool, growth_reserves_segments_on_demand_with_documented_rounding) {
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.reserved_bytes, 0);
    cr_assert_eq(tu_upstream_stats(u).alloc_calls, 0);
    struct {
        size_t request, reserved_after;
    } steps[] = {
        {100, 2 * MiB},             /* small: a 2M segment */
        {1 * MiB, 2 * MiB},         /* fits the 2M-512 tail */
        {1 * MiB, 4 * MiB},         /* 1M-512 left: a new small segment */
        {12 * MiB, 16 * MiB},       /* >= 10M: its own 12M segment */
        {11 * MiB + 1, 28 * MiB},   /* >= 10M: rounded up to 12M, 1M-512 slack */
        {10 * MiB, 38 * MiB},       /* large_min exactly: its own 10M segment */
        {1 * MiB + 1, 58 * MiB},    /* large < 10M: a 20M segment, 19M-512 left */
        {10 * MiB - 512, 58 * MiB}, /* served from the 20M segment's tail, 9M left */
        {10 * MiB - 512, 78 * MiB}, /* 9M does not fit: a new 20M segment */
    };
    enum { N = sizeof steps / sizeof steps[0] };
    void *p[N];
    for (int i = 0; i < N; i++) {
        p[i] = tu_alloc(a, steps[i].request, NULL);
        s = tu_stats(a);
        cr_assert_eq(s.reserved_bytes, steps[i].reserved_after, "step %d: reserved %zu", i, s.reserved_bytes);
        cca_upstream_stats us = tu_upstream_stats(u);
        cr_assert_eq(us.bytes_in_use, s.reserved_bytes);
        cr_assert_eq(us.alloc_calls, s.upstream_allocs);
        cr_assert_eq(us.allocations, s.segments);
    }
    cr_assert_eq(s.segments, 7);
    cr_assert_eq(tu_block_size(a, p[4]), 12 * MiB, "a 1M-512 remainder stays with the block");
    for (int i = 0; i < N; i++)
        tu_free(a, p[i]);
}

Test(pool, growth_falls_back_to_a_tight_segment_when_20M_is_refused) {
    cca_upstream *small;
    cca_allocator *b;
    tu_host_allocator(10 * MiB, CLASSIC, &small, &b);
    void *p = tu_alloc(b, 4 * MiB, NULL);
    cca_stats s = tu_stats(b);
    cr_assert_eq(s.reserved_bytes, 4 * MiB, "rounded to segment_round, not 20M");
    cr_assert_eq(s.alloc_retries, 0);
    cr_assert_eq(s.ooms, 0);
    cca_upstream_stats us = tu_upstream_stats(small);
    cr_assert_eq(us.failed_allocs, 1, "the 20M attempt");
    cr_assert_eq(us.alloc_calls, 1);
    tu_free(b, p);
    tu_teardown(b, small);
}

/* docs/allocator.md, step 5, "Grow": the fallback is the request rounded up to
 * segment_round (2 MiB), not to 512 bytes. */
Test(pool, the_tight_segment_is_rounded_to_segment_round) {
    cca_upstream *small;
    cca_allocator *b;
    tu_host_allocator(10 * MiB, CLASSIC, &small, &b);
    void *p = tu_alloc(b, 3 * MiB + 512, NULL);
    cr_assert_eq(tu_stats(b).reserved_bytes, 4 * MiB);
    tu_free(b, p);
    tu_teardown(b, small);
}

/* ---- greedy ---------------------------------------------------------------------- */

Test(pool, greedy_reserves_once_and_never_calls_the_upstream_again) {
    cca_allocator *g = tu_allocator(u, CLASSIC ",policy:greedy,greedy_bytes:64M");
    cca_stats s = tu_stats(g);
    cr_assert_eq(s.reserved_bytes, 64 * MiB);
    cr_assert_eq(s.segments, 1);
    cr_assert_eq(s.upstream_allocs, 1);
    void *base = tu_alloc(g, 1, NULL);
    tu_free(g, base);
    enum { N = 300 };
    void *p[N];
    uint64_t rng = 11;
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < N; i++)
            p[i] = tu_alloc(g, 1 + tu_rand(&rng) % (100 * KiB), NULL);
        for (int i = N - 1; i >= 0; i--)
            tu_free(g, p[i]);
    }
    /* 512 B split rule in the arena: two blocks that fill it exactly */
    void *x = tu_alloc(g, 64 * MiB - 512, NULL), *y = tu_alloc(g, 512, NULL);
    cr_assert_eq(x, base);
    cr_assert_eq(y, (char *)base + 64 * MiB - 512);
    cca_stats before = tu_stats(g);
    void *z = (void *)1;
    cr_assert_eq(cca_alloc(g, 512, NULL, &z), CCA_ERR_OUT_OF_MEMORY, "a full arena is an OOM");
    cr_assert_null(z);
    before.ooms++;
    tu_assert_intact(g, &before, "greedy OOM");
    cr_assert_eq(tu_stats(g).alloc_retries, 0);
    tu_free(g, x), tu_free(g, y);
    cr_assert_eq(tu_alloc(g, 64 * MiB, NULL), base, "the whole arena, first address");
    cr_assert_eq(cca_alloc(g, 1, NULL, &z), CCA_ERR_OUT_OF_MEMORY);
    tu_free(g, base);
    s = tu_stats(g);
    cr_assert_eq(s.upstream_allocs, 1);
    cr_assert_eq(s.reserved_bytes_peak, 64 * MiB);
    cca_upstream_stats us = tu_upstream_stats(u);
    cr_assert_eq(us.alloc_calls, 1, "the upstream was called once, at creation");
    cr_assert_eq(us.failed_allocs, 0);
    tu_destroy_clean(g, u);
}

Test(pool, greedy_arena_from_fraction_and_capped_by_max_reserved) {
    cca_upstream *dev;
    cca_allocator *g;
    tu_host_allocator(100 * MiB, CLASSIC ",policy:greedy,greedy_fraction:0.5", &dev, &g);
    cr_assert_eq(tu_stats(g).reserved_bytes, 50 * MiB);
    cca_allocator *h = tu_allocator(dev, CLASSIC ",policy:greedy,greedy_fraction:0.25");
    cr_assert_eq(tu_stats(h).reserved_bytes, (50 * MiB) / 4, "a quarter of what the first tenant left");
    tu_destroy_clean(h, dev);
    cca_allocator *d = tu_allocator(dev, CLASSIC ",policy:greedy"); /* default fraction 0.9 */
    size_t expect = (size_t)((double)(50 * MiB) * 0.9) / 512 * 512;
    cr_assert_eq(tu_stats(d).reserved_bytes, expect);
    tu_destroy_clean(d, dev);
    cca_allocator *c = tu_allocator(dev, CLASSIC ",policy:greedy,greedy_bytes:40M,max_reserved:16M");
    cr_assert_eq(tu_stats(c).reserved_bytes, 16 * MiB);
    tu_destroy_clean(c, dev);
    tu_teardown(g, dev);
}

Test(pool, greedy_reserves_again_after_empty_cache) {
    cca_allocator *g = tu_allocator(u, CLASSIC ",policy:greedy,greedy_bytes:8M");
    void *p = tu_alloc(g, 1 * MiB, NULL);
    tu_free(g, p);
    cca_release_report r;
    cr_assert_eq(cca_empty_cache(g, &r), CCA_OK);
    cr_assert_eq(r.bytes_released, 8 * MiB);
    cca_stats s = tu_stats(g);
    cr_assert_eq(s.reserved_bytes, 0);
    cr_assert_eq(s.segments, 0);
    cr_assert_eq(tu_upstream_stats(u).bytes_in_use, 0);
    p = tu_alloc(g, 1 * MiB, NULL);
    s = tu_stats(g);
    cr_assert_eq(s.reserved_bytes, 8 * MiB);
    cr_assert_eq(s.upstream_allocs, 2);
    cr_assert_eq(s.upstream_frees, 1);
    cr_assert_eq(tu_upstream_stats(u).alloc_calls, 2);
    tu_free(g, p);
    tu_destroy_clean(g, u);
}

/* After an empty-cache the arena is gone; a request that can never fit it
 * (over greedy_bytes, or over the device's total) fails without reserving
 * the arena again only to refuse the request. */
Test(pool, greedy_impossible_request_after_empty_cache_touches_nothing) {
    cca_allocator *g = tu_allocator(u, CLASSIC ",policy:greedy,greedy_bytes:8M");
    cr_assert_eq(cca_empty_cache(g, NULL), CCA_OK);
    cca_stats before = tu_stats(g);
    cca_upstream_stats ub = tu_upstream_stats(u);
    size_t sizes[] = {9 * MiB, (size_t)1 << 50};
    for (int i = 0; i < 2; i++) {
        void *q = (void *)1;
        cr_assert_eq(cca_alloc(g, sizes[i], NULL, &q), CCA_ERR_OUT_OF_MEMORY);
        cr_assert_null(q);
        cr_assert(strstr(cca_last_error(), "can never") != NULL, "%s", cca_last_error());
        before.ooms++;
        tu_assert_intact(g, &before, "impossible greedy request");
        cca_upstream_stats ua = tu_upstream_stats(u);
        cr_assert_eq(ua.alloc_calls + ua.failed_allocs, ub.alloc_calls + ub.failed_allocs,
                     "%zu bytes: the arena was reserved again", sizes[i]);
    }
    void *p = tu_alloc(g, 8 * MiB, NULL); /* what fits still gets the arena back */
    cr_assert_eq(tu_stats(g).reserved_bytes, 8 * MiB);
    tu_free(g, p);
    tu_destroy_clean(g, u);
}

Test(pool, greedy_create_fails_cleanly_when_the_arena_is_refused) {
    cca_upstream *dev;
    cr_assert_eq(cca_upstream_host_create(10 * MiB, &dev), CCA_OK);
    cca_config cfg;
    cca_config_default(&cfg);
    cr_assert_eq(cca_config_parse(&cfg, CLASSIC ",policy:greedy,greedy_bytes:20M"), CCA_OK);
    cca_allocator *g = (cca_allocator *)1;
    cr_assert_eq(cca_create(&cfg, dev, &g), CCA_ERR_OUT_OF_MEMORY);
    cr_assert_null(g);
    cr_assert(strstr(cca_last_error(), "greedy") != NULL, "message: %s", cca_last_error());
    cca_upstream_stats us = tu_upstream_stats(dev);
    cr_assert_eq(us.bytes_in_use, 0);
    cr_assert_eq(us.failed_allocs, 1);
    cca_upstream_destroy(dev);
}

/* ---- streams ------------------------------------------------------------------- */

Test(pool, growth_reuses_a_free_block_only_on_its_own_stream) {
    void *p = tu_alloc(a, 64 * KiB, S1);
    tu_free(a, p);
    cr_assert_eq(tu_stats(a).pending_blocks, 0, "a block used only on its own stream is free at once");
    void *q = tu_alloc(a, 64 * KiB, S2);
    cr_assert_neq(q, p, "another stream must not get S1's cached block");
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.segments, 2);
    void *r = tu_alloc(a, 64 * KiB, S1);
    cr_assert_eq(r, p, "S1 gets its own block back");
    void *n = tu_alloc(a, 64 * KiB, NULL);
    cr_assert_eq(tu_stats(a).segments, 3, "the default stream is a stream of its own");
    tu_free(a, q), tu_free(a, r), tu_free(a, n);
}

Test(pool, record_stream_defers_reuse_until_the_events_complete) {
    tu_upstream t;
    cca_upstream *tu = tu_upstream_create(&t, 1 * GiB, true);
    cca_allocator *b = tu_allocator(tu, CLASSIC);
    t.hold_events = true;
    t.sync_keeps_events = true;
    void *p = tu_alloc(b, 64 * KiB, S1);
    cr_assert_eq(cca_record_stream(b, p, S2), CCA_OK);
    cr_assert_eq(cca_record_stream(b, p, S2), CCA_OK, "recording twice is one stream");
    cr_assert_eq(cca_record_stream(b, p, S1), CCA_OK, "its own stream: nothing to wait for");
    tu_free(b, p);
    cca_stats s = tu_stats(b);
    cr_assert_eq(s.pending_blocks, 1);
    cr_assert_eq(s.active_blocks, 1, "pending blocks count as active");
    cr_assert_eq(s.allocated_bytes, 64 * KiB);
    cr_assert_eq(s.requested_bytes, 0);
    cr_assert_eq(s.free_calls, 1);
    cr_assert_eq(t.event_records, 1, "one event, for S2");
    tu_check(b);
    /* a pending block is not a live one */
    cca_stats before = tu_stats(b);
    cr_assert_eq(cca_free(b, p), CCA_ERR_INVALID_POINTER);
    cr_assert(strstr(cca_last_error(), "double free") != NULL, "%s", cca_last_error());
    cr_assert_eq(cca_record_stream(b, p, S2), CCA_ERR_INVALID_POINTER);
    size_t sz;
    cr_assert_eq(cca_block_size(b, p, &sz), CCA_ERR_INVALID_POINTER);
    tu_assert_intact(b, &before, "free of a pending block");

    void *q = tu_alloc(b, 64 * KiB, S1);
    cr_assert_neq(q, p, "still pending: not reused");
    cr_assert_eq(tu_stats(b).pending_blocks, 1);
    tu_upstream_release_events(&t);
    void *r = tu_alloc(b, 64 * KiB, S1);
    cr_assert_eq(r, p, "events completed: the block is back in S1's pool");
    s = tu_stats(b);
    cr_assert_eq(s.pending_blocks, 0);
    cr_assert_eq(s.active_blocks, 2);
    cr_assert_eq(t.events_live, 0, "the event was destroyed");
    tu_free(b, q), tu_free(b, r);
    tu_destroy_clean(b, tu);
    cca_upstream_destroy(tu);
}

Test(pool, empty_cache_and_oom_retry_wait_for_pending_frees) {
    tu_upstream t;
    cca_upstream *tu = tu_upstream_create(&t, 24 * MiB, true);
    cca_allocator *b = tu_allocator(tu, CLASSIC);
    t.hold_events = true;                /* synchronize completes them */
    void *p = tu_alloc(b, 19 * MiB, S1); /* a 20M segment of its own, all of it */
    cr_assert_eq(tu_block_size(b, p), 20 * MiB);
    cr_assert_eq(cca_record_stream(b, p, S2), CCA_OK);
    tu_free(b, p);
    cr_assert_eq(tu_stats(b).pending_blocks, 1);
    /* 12M needs its own segment; 20M + 12M > 24M: the retry synchronizes,
     * the pending block completes, and the request fits in its block (split):
     * nothing is released, no second reserve */
    uint64_t syncs = t.sync_calls, allocs = t.alloc_calls;
    void *q = tu_alloc(b, 12 * MiB, S1);
    cca_stats s = tu_stats(b);
    cr_assert_eq(q, p);
    cr_assert_eq(s.alloc_retries, 1);
    cr_assert_eq(s.pending_blocks, 0);
    cr_assert_eq(s.reserved_bytes, 20 * MiB);
    cr_assert_eq(s.upstream_frees, 0);
    cr_assert_eq(t.alloc_calls, allocs + 1, "the refused 12M segment only");
    cr_assert_eq(t.sync_calls, syncs + 1, "one synchronize, for the pending free");
    /* empty-cache does the same for a pending block */
    cr_assert_eq(cca_record_stream(b, q, S2), CCA_OK);
    tu_free(b, q);
    cr_assert_eq(tu_stats(b).pending_blocks, 1);
    cca_release_report r;
    cr_assert_eq(cca_empty_cache(b, &r), CCA_OK);
    cr_assert_eq(r.bytes_released, 20 * MiB);
    cr_assert_eq(r.segments_pinned, 0);
    s = tu_stats(b);
    cr_assert_eq(s.reserved_bytes, 0);
    cr_assert_eq(s.active_blocks, 0);
    cr_assert_eq(t.used, 0);
    cr_assert_eq(t.events_live, 0);
    tu_destroy_clean(b, tu);
    cca_upstream_destroy(tu);
}

Test(pool, greedy_arena_shared_by_streams_defers_every_free) {
    tu_upstream t;
    cca_upstream *tu = tu_upstream_create(&t, 1 * GiB, true);
    cca_allocator *g = tu_allocator(tu, CLASSIC ",policy:greedy,greedy_bytes:4M");
    t.hold_events = true;
    void *p = tu_alloc(g, 2 * MiB, S1);
    void *q = tu_alloc(g, 2 * MiB, S2);
    cr_assert_eq(q, (char *)p + 2 * MiB, "one arena for all streams");
    tu_free(g, p);
    cr_assert_eq(tu_stats(g).pending_blocks, 1, "S1's work may still use it");
    /* the arena is full but for the pending block: the allocator waits (synchronize) */
    void *r = tu_alloc(g, 2 * MiB, S2);
    cr_assert_eq(r, p);
    cr_assert_eq(tu_stats(g).pending_blocks, 0);
    tu_free(g, q), tu_free(g, r);
    tu_upstream_release_events(&t);
    void *n = tu_alloc(g, 512, NULL);
    cr_assert_eq(n, p, "all frees completed and coalesced: the arena's first address");
    tu_free(g, n);
    cr_assert_eq(tu_stats(g).pending_blocks, 1, "a default-stream block waits too: no stream is ordered against it");
    tu_upstream_release_events(&t);
    cr_assert_eq(cca_trim(g, SIZE_MAX, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(tu_stats(g).pending_blocks, 0);
    tu_destroy_clean(g, tu);
    cca_upstream_destroy(tu);
}

/* Greedy's upstream calls after cca_create (ccalloc.h, cca_alloc's cost;
 * docs/allocator.md, "Greedy"): memory only for the arena again after
 * cca_empty_cache; besides, a request no cached block serves asks the
 * device's total once (mem_info, step 5a's ceiling) and a full arena with
 * frees pending synchronizes before its best fit again. */
Test(pool, greedy_calls_the_upstream_for_the_ceiling_a_wait_and_a_new_arena) {
    tu_faulty f;
    cca_upstream *inner = tu_vm_device(64 * MiB, 0);
    cca_upstream *fu = tu_faulty_create(&f, inner, "fx", true);
    cca_allocator *g = tu_allocator(fu, CLASSIC ",policy:greedy,greedy_bytes:16M,log_oom:0");
    cr_assert_eq(f.calls[TU_FAULT_ALLOC], 1, "the arena");
    uint64_t info = f.mem_info_calls, syncs = f.calls[TU_FAULT_SYNC];
    void *x = tu_alloc(g, 16 * MiB, S1), *z = NULL;
    cr_assert_eq(f.mem_info_calls, info, "a cached alloc asks nothing");
    cr_assert_eq(cca_alloc(g, 512, S1, &z), CCA_ERR_OUT_OF_MEMORY, "a full arena");
    cr_assert_eq(f.mem_info_calls, info + 1, "the device's total, for the ceiling");
    cr_assert_eq(cca_alloc(g, 512, S1, &z), CCA_ERR_OUT_OF_MEMORY);
    cr_assert_eq(f.mem_info_calls, info + 1, "asked once");
    f.hold_events = true;
    tu_free(g, x); /* an arena block: pending until its event completes */
    cr_assert_eq(tu_stats(g).pending_blocks, 1);
    cr_assert_eq(f.calls[TU_FAULT_SYNC], syncs);
    void *y = tu_alloc(g, 16 * MiB, S1);
    cr_assert_eq(y, x, "served once the pending free completed");
    cr_assert_eq(f.calls[TU_FAULT_SYNC], syncs + 1, "one synchronize");
    f.hold_events = false;
    tu_free(g, y);
    cr_assert_eq(cca_empty_cache(g, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(tu_stats(g).reserved_bytes, 0);
    y = tu_alloc(g, 512, S1);
    cr_assert_eq(f.calls[TU_FAULT_ALLOC], 2, "the arena again");
    cr_assert_eq(f.mem_info_calls, info + 1);
    tu_free(g, y);
    cr_assert_eq(tu_stats(g).upstream_allocs, 2);
    tu_destroy_clean(g, fu);
    tu_faulty_destroy_clean(fu, inner);
}

Test(pool, record_stream_without_events_synchronizes_instead) {
    tu_upstream t;
    cca_upstream *tu = tu_upstream_create(&t, 1 * GiB, false);
    cca_allocator *b = tu_allocator(tu, CLASSIC);
    void *p = tu_alloc(b, 4096, S1);
    cr_assert_eq(cca_record_stream(b, p, S2), CCA_OK);
    uint64_t syncs = t.sync_calls;
    tu_free(b, p);
    cr_assert_eq(t.sync_calls, syncs + 1);
    cca_stats s = tu_stats(b);
    cr_assert_eq(s.pending_blocks, 0);
    cr_assert_eq(s.active_blocks, 0);
    cr_assert_eq(tu_alloc(b, 4096, S1), p);
    cca_free(b, p);
    tu_destroy_clean(b, tu);
    cca_upstream_destroy(tu);
}

/* ---- OOM, retry, max_reserved -------------------------------------------------------- */

Test(pool, oom_is_reported_once_and_the_allocator_recovers) {
    cca_upstream *dev;
    cca_allocator *b;
    tu_host_allocator(8 * MiB, CLASSIC, &dev, &b);
    tu_log_capture log = {0};
    cca_set_log_callback(tu_capture_log, &log);
    void *small = tu_alloc(b, 4096, NULL);
    cca_stats before = tu_stats(b);
    void *p = (void *)1;
    cr_assert_eq(cca_alloc(b, 16 * MiB, NULL, &p), CCA_ERR_OUT_OF_MEMORY);
    cr_assert_null(p);
    cr_assert(strstr(cca_last_error(), "16777216") != NULL, "%s", cca_last_error());
    cr_assert_eq(log.lines, 1, "one log line per OOM");
    cr_assert(strstr(log.last, "out of memory") && strstr(log.last, "requested") && strstr(log.last, "reserved") &&
                  strstr(log.last, "allocated") && strstr(log.last, "largest free") && strstr(log.last, "device free"),
              "log line: %s", log.last);
    cr_assert(strstr(cca_last_error(), "can never succeed") != NULL, "%s", cca_last_error());
    cca_stats s = tu_stats(b);
    cr_assert_eq(s.ooms, 1);
    cr_assert_eq(s.alloc_retries, 0, "more than the device holds: failed at once, no retry");
    cr_assert_eq(s.upstream_allocs, before.upstream_allocs, "never asked of the upstream");
    cr_assert_eq(s.reserved_bytes, 2 * MiB, "the pinned small segment stays");
    cr_assert_eq(s.allocated_bytes, before.allocated_bytes);
    cr_assert_eq(s.alloc_calls, before.alloc_calls);
    tu_check(b);
    /* still fully usable */
    void *q = tu_alloc(b, 4 * MiB, NULL);
    void *r = tu_alloc(b, 4096, NULL);
    cr_assert_eq(r, (char *)small + 4096);
    tu_free(b, q), tu_free(b, r), tu_free(b, small);
    cca_set_log_callback(NULL, NULL);
    tu_teardown(b, dev);
}

Test(pool, log_oom_off_stays_silent) {
    cca_allocator *b = tu_allocator(u, CLASSIC ",log_oom:0,max_reserved:2M");
    tu_log_capture log = {0};
    cca_set_log_callback(tu_capture_log, &log);
    void *p;
    cr_assert_eq(cca_alloc(b, 4 * MiB, NULL, &p), CCA_ERR_OUT_OF_MEMORY);
    cr_assert_eq(log.lines, 0);
    cr_assert_eq(tu_stats(b).ooms, 1);
    cca_set_log_callback(NULL, NULL);
    tu_destroy_clean(b, u);
}

/* Cached bytes that share a segment with a live block cannot go back: the
 * retry releases nothing, and its message says how many bytes are pinned,
 * not that the cache is empty. */
Test(pool, a_retry_with_every_cached_byte_pinned_says_how_many) {
    cca_upstream *dev;
    cca_allocator *b;
    tu_host_allocator(22 * MiB, CLASSIC, &dev, &b);
    void *p = tu_alloc(b, 4 * MiB, NULL); /* a 20M segment, 16M of it cached and pinned by p */
    cca_stats before = tu_stats(b);
    void *q = (void *)1;
    cr_assert_eq(cca_alloc(b, 4 * MiB, S1, &q), CCA_ERR_OUT_OF_MEMORY); /* another stream: p's segment is not its */
    cr_assert_null(q);
    cr_assert(strstr(cca_last_error(), "nothing cached to release: the 16777216 cached bytes all share a segment, "
                                       "page or map with a live or pending block") != NULL,
              "%s", cca_last_error());
    cca_stats s = tu_stats(b);
    cr_assert_eq(s.upstream_frees, before.upstream_frees, "nothing released");
    cr_assert_eq(s.reserved_bytes, 20 * MiB);
    tu_free(b, p);
    cr_assert_eq(cca_empty_cache(b, NULL), CCA_OK);
    p = tu_alloc(b, 20 * MiB, NULL); /* its segment wholly live: nothing cached at all, the plain message */
    q = (void *)1;
    cr_assert_eq(cca_alloc(b, 4 * MiB, S1, &q), CCA_ERR_OUT_OF_MEMORY);
    cr_assert_null(q);
    cr_assert(strstr(cca_last_error(), "nothing cached to release") != NULL, "%s", cca_last_error());
    cr_assert(strstr(cca_last_error(), "cached bytes") == NULL, "%s", cca_last_error());
    tu_free(b, p);
    tu_teardown(b, dev);
}

Test(pool, retry_releases_the_cache_and_succeeds) {
    cca_upstream *dev;
    cca_allocator *b;
    tu_host_allocator(30 * MiB, CLASSIC, &dev, &b);
    void *p = tu_alloc(b, 4 * MiB, NULL);
    void *s1 = tu_alloc(b, 100 * KiB, NULL);
    tu_free(b, p); /* a cached free 20M segment */
    tu_free(b, s1);
    cr_assert_eq(tu_stats(b).reserved_bytes, 22 * MiB);
    /* a 22M segment: 22M + 22M > 30M: refused; the device has 8M free, so the
     * retry releases free segments largest first until 14M are back (the 20M
     * one, at [0, 20M)) and reserves again: refused too, since the small
     * segment at [20M, 22M) splits the device's 28M free into 20M + 8M; so it
     * releases the rest and the third reserve fits */
    void *q = tu_alloc(b, 21 * MiB, NULL);
    cca_stats s = tu_stats(b);
    cr_assert_eq(s.alloc_retries, 1);
    cr_assert_eq(s.ooms, 0);
    cr_assert_eq(s.reserved_bytes, 22 * MiB, "every free segment went back, small one included");
    cr_assert_eq(s.upstream_frees, 2);
    cr_assert_eq(s.upstream_allocs, 3);
    cr_assert_eq(tu_upstream_stats(dev).bytes_in_use, 22 * MiB);
    cr_assert_eq(tu_upstream_stats(dev).failed_allocs, 2);
    tu_check(b);
    tu_free(b, q);
    tu_teardown(b, dev);
}

Test(pool, max_reserved_caps_reserved_bytes) {
    cca_allocator *b = tu_allocator(u, CLASSIC ",max_reserved:30M");
    void *p = tu_alloc(b, 4 * MiB, NULL); /* 20M */
    cca_stats before = tu_stats(b);
    void *q = (void *)1;
    /* 17M needs an 18M segment: 38M > 30M, and the 20M one is pinned by p */
    cr_assert_eq(cca_alloc(b, 17 * MiB, NULL, &q), CCA_ERR_OUT_OF_MEMORY);
    cr_assert_null(q);
    before.ooms++;
    before.alloc_retries++;
    tu_assert_intact(b, &before, "max_reserved OOM");
    cr_assert_eq(tu_upstream_stats(u).failed_allocs, 0, "the cap refuses before the upstream is asked");
    void *r1 = tu_alloc(b, 9 * MiB, NULL); /* medium: from p's 16M tail */
    cr_assert_eq(tu_stats(b).reserved_bytes, 20 * MiB);
    void *r2 = tu_alloc(b, 10 * MiB, NULL); /* a 10M segment: 30M, exactly the cap */
    cr_assert_eq(tu_stats(b).reserved_bytes, 30 * MiB);
    tu_free(b, r1), tu_free(b, r2), tu_free(b, p);
    void *big = tu_alloc(b, 24 * MiB, NULL); /* both segments cached: retry releases them */
    cca_stats s = tu_stats(b);
    cr_assert_eq(s.reserved_bytes, 24 * MiB);
    cr_assert_eq(s.alloc_retries, 2);
    cr_assert_eq(s.reserved_bytes_peak, 30 * MiB);
    tu_free(b, big);
    cca_allocator *c = tu_allocator(u, CLASSIC ",max_reserved:8M");
    void *m = tu_alloc(c, 4 * MiB, NULL); /* 20M would cross the cap: 4M segment */
    cr_assert_eq(tu_stats(c).reserved_bytes, 4 * MiB);
    cr_assert_eq(tu_stats(c).alloc_retries, 0);
    tu_free(c, m);
    tu_destroy_clean(c, u);
    tu_destroy_clean(b, u);
}

/* ---- bad input --------------------------------------------------------------------- */

Test(pool, null_handles_are_invalid_arguments) {
    void *p = (void *)1;
    cr_assert_eq(cca_alloc(NULL, 16, NULL, &p), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_null(p, "*out is NULL on failure");
    cr_assert_eq(cca_alloc(a, 16, NULL, NULL), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_free(NULL, (void *)0x1000), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_record_stream(NULL, (void *)0x1000, S1), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_record_stream(a, NULL, S1), CCA_ERR_INVALID_ARGUMENT);
    size_t sz;
    cr_assert_eq(cca_block_size(NULL, (void *)0x1000, &sz), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_block_size(a, NULL, &sz), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_trim(NULL, 0, NULL), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_empty_cache(NULL, NULL), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_destroy(NULL), CCA_ERR_INVALID_ARGUMENT);
    cca_config cfg;
    cr_assert_eq(cca_get_config(NULL, &cfg), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_get_config(a, NULL), CCA_ERR_INVALID_ARGUMENT);
    cca_allocator *b = (cca_allocator *)1;
    cr_assert_eq(cca_create(NULL, NULL, &b), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_null(b);
    cr_assert_eq(cca_create(NULL, u, NULL), CCA_ERR_INVALID_ARGUMENT);
    cca_get_stats(NULL, NULL);
    cca_reset_peak_stats(NULL);
    cca_stats s;
    memset(&s, 0xab, sizeof s);
    cca_stats copy = s;
    cca_get_stats(NULL, &s);
    cr_assert(memcmp(&s, &copy, sizeof s) == 0, "get_stats(NULL) writes nothing");
    cr_assert_eq(tu_upstream_stats(u).alloc_calls, 0);
}

Test(pool, bad_config_struct_is_rejected_by_create) {
    cca_config cfg;
    cca_config_default(&cfg);
    cfg.greedy_fraction = 1.5;
    cca_allocator *b = (cca_allocator *)1;
    cr_assert_eq(cca_create(&cfg, u, &b), CCA_ERR_CONFIG);
    cr_assert_null(b);
    cr_assert(strstr(cca_last_error(), "greedy_fraction") != NULL, "%s", cca_last_error());
    cr_assert_eq(tu_upstream_stats(u).alloc_calls, 0);
}

Test(pool, double_free_foreign_and_interior_pointers_change_nothing) {
    void *p = tu_alloc(a, 8 * KiB, NULL);
    void *q = tu_alloc(a, 8 * KiB, NULL);
    void *big = tu_alloc(a, 4 * MiB, NULL);
    cca_allocator *other = tu_allocator(u, CLASSIC);
    void *theirs = tu_alloc(other, 8 * KiB, NULL);
    tu_free(a, p);
    cca_stats before = tu_stats(a);
    int on_stack = 0;
    void *heap = malloc(64);
    struct {
        void *ptr;
        const char *what, *message;
    } cases[] = {
        {p, "double free", "double free"},
        {(char *)q + 512, "interior pointer", "interior pointer"},
        {(char *)q + 1, "unaligned interior pointer", "interior pointer"},
        {(char *)big + 2 * MiB, "interior of a large block", "interior pointer"},
        {(char *)p + 4096, "inside a free block", "free block"},
        {(char *)big + 4 * MiB + 1 * MiB, "inside the free tail", "free block"},
        {&on_stack, "a stack address", "not in this allocator's memory"},
        {heap, "a malloc pointer", "not in this allocator's memory"},
        {theirs, "another allocator's block", "not in this allocator's memory"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_assert_eq(cca_free(a, cases[i].ptr), CCA_ERR_INVALID_POINTER, "%s", cases[i].what);
        cr_assert(strstr(cca_last_error(), cases[i].message) != NULL, "%s: message '%s'", cases[i].what,
                  cca_last_error());
        tu_assert_intact(a, &before, cases[i].what);
        cr_assert_eq(cca_record_stream(a, cases[i].ptr, S1), CCA_ERR_INVALID_POINTER, "%s", cases[i].what);
        size_t sz = 7;
        cr_assert_eq(cca_block_size(a, cases[i].ptr, &sz), CCA_ERR_INVALID_POINTER, "%s", cases[i].what);
        cr_assert_eq(sz, 7);
        tu_assert_intact(a, &before, cases[i].what);
    }
    free(heap);
    /* the other allocator was not touched either */
    cr_assert_eq(tu_stats(other).active_blocks, 1);
    tu_free(other, theirs);
    tu_destroy_clean(other, u);
    tu_free(a, q);
    tu_free(a, big);
    /* the freed blocks coalesced: q's start is now inside a free block */
    before = tu_stats(a);
    cr_assert_eq(cca_free(a, q), CCA_ERR_INVALID_POINTER);
    tu_assert_intact(a, &before, "double free after coalescing");
}

Test(pool, sizes_whose_rounding_overflows_never_reach_the_upstream) {
    tu_upstream t;
    cca_upstream *tu = tu_upstream_create(&t, 1 * GiB, true);
    cca_allocator *b = tu_allocator(tu, CLASSIC);
    void *keep = tu_alloc(b, 4096, NULL);
    cca_stats before = tu_stats(b);
    uint64_t calls = t.alloc_calls;
    const size_t sizes[] = {SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 511, SIZE_MAX - 2 * MiB, SIZE_MAX - 2 * MiB - 511};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        void *p = (void *)1;
        cca_status st = cca_alloc(b, sizes[i], NULL, &p);
        cr_assert_eq(st, CCA_ERR_INVALID_ARGUMENT, "size %zu: %s", sizes[i], cca_status_string(st));
        cr_assert_null(p);
        cr_assert_eq(t.alloc_calls, calls, "size %zu reached the upstream", sizes[i]);
        tu_assert_intact(b, &before, "overflowing size");
    }
    /* huge but representable: more than the device holds, an OOM at once,
     * never asked of the upstream */
    void *p = (void *)1;
    cr_assert_eq(cca_alloc(b, SIZE_MAX / 2, NULL, &p), CCA_ERR_OUT_OF_MEMORY);
    cr_assert_null(p);
    cr_assert_eq(t.alloc_calls, calls, "an impossible size reached the upstream");
    before.ooms++;
    tu_assert_intact(b, &before, "huge size");
    tu_free(b, keep);
    tu_destroy_clean(b, tu);
    cca_upstream_destroy(tu);
}

Test(pool, destroy_with_live_blocks_reports_and_still_returns_everything) {
    cca_allocator *b = tu_allocator(u, CLASSIC);
    tu_alloc(b, 4096, NULL);
    tu_alloc(b, 4 * MiB, NULL);
    cr_assert_eq(cca_destroy(b), CCA_ERR_LIVE_BLOCKS);
    cr_assert(strstr(cca_last_error(), "2 blocks") != NULL, "%s", cca_last_error());
    cca_upstream_stats us = tu_upstream_stats(u);
    cr_assert_eq(us.bytes_in_use, 0);
    cr_assert_eq(us.allocations, 0);
}

Test(pool, get_config_returns_the_config_in_force) {
    cca_allocator *b = tu_allocator(u, CLASSIC ",max_reserved:3G,small_max:512K");
    cca_config c;
    cr_assert_eq(cca_get_config(b, &c), CCA_OK);
    cr_assert_eq(c.max_reserved, 3 * GiB);
    cr_assert_eq(c.small_max, 512 * KiB);
    cr_assert_eq(c.policy, CCA_POLICY_GROWTH);
    tu_destroy_clean(b, u);
}

/* ---- max_split ------------------------------------------------------------------- */

Test(pool, max_split_keeps_big_free_blocks_whole) {
    cca_allocator *b = tu_allocator(u, CLASSIC ",max_split:30M");
    void *big = tu_alloc(b, 40 * MiB, NULL);
    tu_free(b, big);
    /* 4M < max_split: the 40M free block is not used for it; a 20M segment is */
    void *p = tu_alloc(b, 4 * MiB, NULL);
    cr_assert_neq(p, big);
    cca_stats s = tu_stats(b);
    cr_assert_eq(s.segments, 2);
    cr_assert_eq(s.reserved_bytes, 60 * MiB);
    cr_assert_eq(tu_block_size(b, p), 4 * MiB, "a 20M block (<= max_split) still splits");
    /* 36M >= max_split may use the 40M block, which is then not split */
    void *q = tu_alloc(b, 36 * MiB, NULL);
    cr_assert_eq(q, big);
    cr_assert_eq(tu_block_size(b, q), 40 * MiB);
    cr_assert_eq(tu_stats(b).segments, 2);
    tu_free(b, p), tu_free(b, q);
    tu_destroy_clean(b, u);
}

/* max_split at or below medium_segment is rejected by validation (a segment
 * must be splittable); a fresh segment larger than max_split (a request just
 * under max_split rounded up to segment_round) is still used by the request
 * that reserved it, unsplit. */
Test(pool, max_split_below_the_segment_size_still_serves) {
    cca_config cfg;
    cca_config_default(&cfg);
    cca_status st = cca_config_parse(&cfg, CLASSIC ",max_split:8M");
    if (st == CCA_ERR_CONFIG) {
        cr_assert(strstr(cca_last_error(), "max_split") != NULL, "%s", cca_last_error());
        return;
    }
    cca_allocator *b = tu_allocator(u, CLASSIC ",max_split:8M");
    void *p = NULL, *q = NULL;
    st = cca_alloc(b, 4 * MiB, NULL, &p);
    cr_assert_eq(st, CCA_OK, "%s: %s", cca_status_string(st), cca_last_error());
    st = cca_alloc(b, 4096, NULL, &q);
    cr_assert_eq(st, CCA_OK, "%s: %s", cca_status_string(st), cca_last_error());
    tu_free(b, p), tu_free(b, q);
    tu_destroy_clean(b, u);
}

Test(pool, fresh_segment_above_max_split_serves_its_request) {
    cca_allocator *b = tu_allocator(u, CLASSIC ",max_split:21M");
    void *p = NULL;
    size_t want = 20 * MiB + MiB / 2; /* < max_split, own segment of 22M > max_split */
    cca_status st = cca_alloc(b, want, NULL, &p);
    cr_assert_eq(st, CCA_OK, "%s: %s", cca_status_string(st), cca_last_error());
    cr_assert_eq(tu_block_size(b, p), 22 * MiB, "an oversize block is not split");
    cr_assert_eq(tu_stats(b).segments, 1);
    cr_assert_eq(tu_stats(b).upstream_allocs, 1);
    tu_free(b, p);
    tu_destroy_clean(b, u);
}

/* The medium pool: a request below large_min never carves the segment of a
 * large request, so a long-lived mid-size block cannot pin it (the pattern
 * behind PyTorch's "GiBs reserved for MiBs allocated"). With medium_pool:0
 * the two share one pool, as in PyTorch, and the pin lands in the big
 * segment's tail. */
static void pin_after_large(const char *conf, bool expect_pinned) {
    cca_allocator *b = tu_allocator(u, conf);
    void *big = tu_alloc(b, 64 * MiB + 4 * KiB, NULL); /* own 66M segment, ~2M tail split off */
    cr_assert_eq(tu_block_size(b, big), 64 * MiB + 4 * KiB);
    void *pin = tu_alloc(b, 1536 * KiB, NULL);
    bool in_big = (char *)pin == (char *)big + 64 * MiB + 4 * KiB;
    cr_assert_eq(in_big, expect_pinned, "%s: the pin %s the big segment's tail", conf,
                 in_big ? "took" : "did not take");
    tu_free(b, big);
    cca_release_report r;
    cr_assert_eq(cca_empty_cache(b, &r), CCA_OK);
    if (expect_pinned) {
        cr_assert_eq(r.segments_pinned, 1);
        cr_assert_eq(r.bytes_still_reserved, 66 * MiB, "66M held for a 1.5M block");
    } else {
        cr_assert_eq(r.bytes_released, 66 * MiB, "the big segment goes back whole");
        cr_assert_eq(r.bytes_still_reserved, 20 * MiB, "only the pin's medium segment stays");
    }
    cr_assert_eq(cca_check_invariants(b), CCA_OK, "%s", cca_last_error());
    tu_free(b, pin);
    tu_destroy_clean(b, u);
}

Test(pool, medium_requests_never_pin_large_segments) {
    pin_after_large(CLASSIC ",medium_pool:1", false);
}

Test(pool, without_the_medium_pool_a_pin_takes_the_large_tail) {
    pin_after_large(CLASSIC ",medium_pool:0", true);
}

/* The rule is one-way: a large request may take space in a medium segment
 * (the most it can pin is that one medium segment), when it is the best fit. */
Test(pool, large_requests_may_use_medium_space) {
    void *m = tu_alloc(a, 1 * MiB + 512, NULL); /* medium: 20M segment, 19M - 512 free */
    void *l = tu_alloc(a, 12 * MiB, NULL);      /* large: best fit is that free block */
    cr_assert_eq(l, (char *)m + 1 * MiB + 512);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.segments, 1);
    cr_assert_eq(s.reserved_bytes, 20 * MiB);
    cr_assert_eq(tu_block_size(a, l), 12 * MiB, "remainder 7M - 512 > 1M: split");
    void *l2 = tu_alloc(a, 12 * MiB, NULL); /* 7M left: a segment of its own */
    cr_assert_eq(tu_stats(a).segments, 2);
    cr_assert_eq(tu_stats(a).reserved_bytes, 32 * MiB);
    tu_free(a, l);
    void *m2 = tu_alloc(a, 2 * MiB, NULL); /* medium: back in the medium segment, after m */
    cr_assert_eq(m2, (char *)m + 1 * MiB + 512);
    tu_free(a, m), tu_free(a, m2), tu_free(a, l2);
}

/* ---- error paths that do what the docs say ------------------------------------------- */

static cca_allocator *reentrant_target;
static int reentrant_calls;

static void log_that_reads_stats(void *user, const char *line) {
    (void)user, (void)line;
    cca_stats s;
    cca_get_stats(reentrant_target, &s); /* deadlocks if the allocator lock is held while logging */
    reentrant_calls++;
}

Test(pool, a_log_callback_may_call_back_into_the_allocator, .timeout = 20) {
    cca_upstream *dev;
    tu_host_allocator(8 * MiB, CLASSIC ",max_reserved:4M", &dev, &reentrant_target);
    cca_set_log_callback(log_that_reads_stats, NULL);
    void *p;
    cr_assert_eq(cca_alloc(reentrant_target, 6 * MiB, NULL, &p), CCA_ERR_OUT_OF_MEMORY);
    cca_set_log_callback(NULL, NULL);
    cr_assert_eq(reentrant_calls, 1);
    cr_assert_eq(tu_stats(reentrant_target).ooms, 1);
    tu_teardown(reentrant_target, dev);
}

Test(pool, max_split_bounds_the_slack_a_request_takes) {
    cca_upstream *dev;
    cca_allocator *b;
    tu_host_allocator(2 * GiB, CLASSIC ",max_split:64M", &dev, &b);
    void *big = tu_alloc(b, 1 * GiB, NULL);
    tu_free(b, big);
    /* 64M >= max_split: it may take an unsplittable block only if that block
     * is less than medium_segment (20M) larger; the 1G block is not */
    void *p = tu_alloc(b, 64 * MiB, NULL);
    cca_stats s = tu_stats(b);
    cr_assert_eq(s.allocated_bytes, 64 * MiB, "handed %zu bytes for a 64M request", s.allocated_bytes);
    cr_assert_neq(p, big);
    cr_assert_eq(s.reserved_bytes, 1 * GiB + 64 * MiB);
    tu_free(b, p);
    /* a 70M block serves a 64M request (6M of slack, under the bound) */
    cr_assert_eq(cca_empty_cache(b, NULL), CCA_OK);
    void *q = tu_alloc(b, 70 * MiB, NULL);
    tu_free(b, q);
    void *r = tu_alloc(b, 64 * MiB, NULL);
    cr_assert_eq(r, q);
    cr_assert_eq(tu_block_size(b, r), 70 * MiB, "blocks above max_split are never split");
    tu_free(b, r);
    tu_teardown(b, dev);
}

Test(pool, max_split_is_refused_with_the_greedy_policy) {
    cca_config c;
    cca_config_default(&c);
    cr_assert_eq(cca_config_parse(&c, CLASSIC ",policy:greedy,max_split:64M"), CCA_ERR_CONFIG);
    cr_assert(strstr(cca_last_error(), "greedy") != NULL, "%s", cca_last_error());
    c.policy = CCA_POLICY_GREEDY;
    c.max_split = 64 * MiB;
    c.expandable = 0;
    cca_allocator *b = (cca_allocator *)1;
    cr_assert_eq(cca_create(&c, u, &b), CCA_ERR_CONFIG);
    cr_assert_null(b);
}

Test(pool, retry_releases_only_what_the_request_needs) {
    cca_upstream *dev;
    cca_allocator *b;
    tu_host_allocator(30 * MiB, CLASSIC, &dev, &b);
    void *s1 = tu_alloc(b, 100 * KiB, NULL); /* small segment at [0, 2M) */
    void *p = tu_alloc(b, 4 * MiB, NULL);    /* medium segment at [2M, 22M) */
    tu_free(b, p), tu_free(b, s1);
    /* 21M needs 22M; 8M free on the device: releasing the 20M segment gives
     * 28M contiguous; the small segment is not needed and stays cached */
    void *q = tu_alloc(b, 21 * MiB, NULL);
    cca_stats s = tu_stats(b);
    cr_assert_eq(s.alloc_retries, 1);
    cr_assert_eq(s.upstream_frees, 1);
    cr_assert_eq(s.reserved_bytes, 24 * MiB);
    cr_assert_eq(tu_upstream_stats(dev).failed_allocs, 1);
    void *again = tu_alloc(b, 100 * KiB, NULL);
    cr_assert_eq(again, s1, "the small segment is still cached");
    tu_free(b, again), tu_free(b, q);
    tu_teardown(b, dev);
}

/* docs/allocator.md, step 5, (a): classic segments synchronize in the retry
 * only when frees are pending (cudaFree waits for the device by itself). */
Test(pool, classic_retry_synchronizes_only_with_frees_pending) {
    tu_faulty f;
    cca_upstream *inner = tu_vm_device(30 * MiB, 0);
    cca_upstream *u = tu_faulty_create(&f, inner, "fx", true);
    cca_allocator *b = tu_allocator(u, CLASSIC);
    void *p = tu_alloc(b, 4 * MiB, NULL); /* a 20M medium segment */
    tu_free(b, p);
    uint64_t syncs = f.calls[TU_FAULT_SYNC];
    void *q = tu_alloc(b, 21 * MiB, NULL); /* 22M + 20M cached > 30M: the retry */
    cr_assert_eq(tu_stats(b).alloc_retries, 1);
    cr_assert_eq(f.calls[TU_FAULT_SYNC], syncs, "no frees pending: the retry does not synchronize");
    tu_free(b, q);
    /* a pending free (another stream's event held): the retry's one synchronize */
    p = tu_alloc(b, 4 * MiB, NULL);
    cr_assert_eq(cca_record_stream(b, p, (cca_stream)0x51), CCA_OK);
    f.hold_events = true;
    tu_free(b, p);
    cr_assert_eq(tu_stats(b).pending_blocks, 1);
    syncs = f.calls[TU_FAULT_SYNC];
    q = tu_alloc(b, 25 * MiB, NULL); /* 26M + 22M cached > 30M */
    cr_assert_eq(tu_stats(b).alloc_retries, 2);
    cr_assert_eq(f.calls[TU_FAULT_SYNC], syncs + 1, "frees pending: one synchronize");
    cr_assert_eq(tu_stats(b).pending_blocks, 0);
    tu_free(b, q);
    tu_check(b);
    cca_destroy(b);
    tu_faulty_destroy_clean(u, inner);
}

Test(pool, a_request_that_can_never_fit_touches_nothing) {
    cca_allocator *b = tu_allocator(u, CLASSIC ",max_reserved:64M");
    void *p = tu_alloc(b, 4 * MiB, NULL);
    tu_free(b, p); /* a cached 20M segment */
    cca_stats before = tu_stats(b);
    cca_upstream_stats ub = tu_upstream_stats(u);
    void *q = (void *)1;
    cr_assert_eq(cca_alloc(b, 65 * MiB, NULL, &q), CCA_ERR_OUT_OF_MEMORY);
    cr_assert_null(q);
    cr_assert(strstr(cca_last_error(), "can never succeed") != NULL, "%s", cca_last_error());
    before.ooms++;
    tu_assert_intact(b, &before, "impossible request");
    cca_upstream_stats ua = tu_upstream_stats(u);
    cr_assert_eq(ua.alloc_calls + ua.failed_allocs, ub.alloc_calls + ub.failed_allocs, "the upstream was not asked");
    cr_assert_eq(ua.free_calls, ub.free_calls, "nothing was released");
    tu_destroy_clean(b, u);
}

/* "The message of the last failing call": a cca_alloc that succeeds after
 * its retry (which failed inside) leaves the caller's message as it was. */
Test(pool, a_successful_alloc_after_a_retry_keeps_the_callers_message) {
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(64 * MiB, CLASSIC ",max_reserved:40M,log_oom:0", &u, &a);
    tu_free(a, tu_alloc(a, 30 * MiB, NULL)); /* a cached 30 MiB segment */
    cca_set_error(CCA_ERR_IO, "the caller's own earlier failure");
    void *q = tu_alloc(a, 12 * MiB, (cca_stream)1); /* another stream: the cache must go first */
    cr_assert_eq(tu_stats(a).alloc_retries, 1);
    cr_assert_str_eq(cca_last_error(), "the caller's own earlier failure");
    tu_free(a, q);
    tu_teardown(a, u);
}
