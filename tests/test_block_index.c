/*
 * test_block_index.c — block_index.c against a brute-force model.
 *
 * The free index must return the exact best fit (smallest size >= request on
 * the request's stream, lowest address among equal sizes, none above
 * max_size) and the exact largest free block, whatever the mix of sizes and
 * streams. A random sequence of inserts, removes and queries is checked
 * step by step against a linear scan of the same set.
 */
#include "internal.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <time.h>

#define N_BLOCKS 3000

static uint64_t rng_state;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Sizes over the whole range: exact classes, TLSF rows, huge, and many ties. */
static size_t random_size(void) {
    switch (rnd() % 4) {
    case 0: return (1 + rnd() % 63) * CCA_GRANULARITY;
    case 1: return (1 + rnd() % 4096) * CCA_GRANULARITY;
    case 2: return ((size_t)1 << (20 + rnd() % 20)) + (rnd() % 1024) * CCA_GRANULARITY;
    default: return (size_t)(1 + rnd() % 8) * 4096;
    }
}

static ccai_block *brute_best(ccai_block *blocks, const bool *in, cca_stream s, size_t size, size_t max_size) {
    ccai_block *best = NULL;
    for (int i = 0; i < N_BLOCKS; i++) {
        ccai_block *b = &blocks[i];
        if (!in[i] || b->stream != s || b->size < size || b->size > max_size)
            continue;
        if (!best || b->size < best->size || (b->size == best->size && b->addr < best->addr))
            best = b;
    }
    return best;
}

static void run(uint64_t seed) {
    rng_state = seed;
    cr_log_info("block_index random sequence, seed %llu", (unsigned long long)seed);
    ccai_free_index ix = {0};
    cca_stream streams[3] = {NULL, (cca_stream)0x10, (cca_stream)0x20};
    for (int s = 0; s < 3; s++)
        cr_assert_eq(ccai_free_index_attach(&ix, streams[s]), CCA_OK);
    ccai_block *blocks = calloc(N_BLOCKS, sizeof *blocks);
    bool *in = calloc(N_BLOCKS, sizeof *in);
    for (int i = 0; i < N_BLOCKS; i++) {
        blocks[i].addr = (uintptr_t)(i + 1) * 4096 * 256; /* distinct, aligned */
        blocks[i].stream = streams[rnd() % 3];
    }
    size_t count = 0, bytes = 0;
    for (int step = 0; step < 20000; step++) {
        int i = (int)(rnd() % N_BLOCKS);
        if (!in[i]) {
            blocks[i].size = random_size();
            ccai_free_index_insert(&ix, &blocks[i]);
            in[i] = true;
            count++;
            bytes += blocks[i].size;
        } else if (rnd() % 2) {
            ccai_free_index_remove(&ix, &blocks[i]);
            in[i] = false;
            count--;
            bytes -= blocks[i].size;
        }
        cca_stream s = streams[rnd() % 3];
        size_t want = random_size(), max_size = rnd() % 4 ? SIZE_MAX : random_size();
        ccai_block *got = ccai_free_index_best_fit(&ix, s, want, max_size);
        ccai_block *expect = brute_best(blocks, in, s, want, max_size);
        cr_assert_eq(got, expect, "step %d: best fit for %zu on stream %p (max %zu): got %p size %zu, want %p size %zu",
                     step, want, s, max_size, (void *)got, got ? got->size : 0, (void *)expect,
                     expect ? expect->size : 0);
        if (got && rnd() % 2) { /* what cca_alloc does: take the block just found */
            ccai_free_index_remove(&ix, got);
            in[got - blocks] = false;
            count--;
            bytes -= got->size;
        }
        size_t largest = 0;
        for (int k = 0; k < N_BLOCKS; k++)
            if (in[k] && blocks[k].size > largest)
                largest = blocks[k].size;
        cr_assert_eq(ccai_free_index_largest(&ix), largest, "step %d: largest", step);
        cr_assert_eq(ix.count, count);
        cr_assert_eq(ix.bytes, bytes);
    }
    ccai_free_index_destroy(&ix);
    free(blocks);
    free(in);
}

static bool count_block(void *user, const ccai_block *b) {
    (void)b;
    ++*(size_t *)user;
    return true;
}

Test(block_index, best_fit_matches_brute_force_fixed_seeds) {
    run(1);
    run(0x9e3779b97f4a7c15ull);
}

Test(block_index, best_fit_matches_brute_force_fresh_seed) {
    uint64_t seed = (uint64_t)time(NULL) * 2654435761u | 1;
    run(seed);
}

Test(block_index, empty_and_unknown_stream) {
    ccai_free_index ix = {0};
    cr_assert_null(ccai_free_index_best_fit(&ix, NULL, 512, SIZE_MAX));
    cr_assert_eq(ccai_free_index_largest(&ix), 0);
    cr_assert_eq(ccai_free_index_attach(&ix, NULL), CCA_OK);
    ccai_block b = {.addr = 4096, .size = 1024, .stream = NULL};
    ccai_free_index_insert(&ix, &b);
    cr_assert_null(ccai_free_index_best_fit(&ix, (cca_stream)0x1, 512, SIZE_MAX), "other stream sees nothing");
    cr_assert_eq(ccai_free_index_best_fit(&ix, NULL, 512, SIZE_MAX), &b);
    cr_assert_eq(ccai_free_index_best_fit(&ix, NULL, 1024, SIZE_MAX), &b);
    cr_assert_null(ccai_free_index_best_fit(&ix, NULL, 1536, SIZE_MAX));
    cr_assert_null(ccai_free_index_best_fit(&ix, NULL, 512, 512), "above max_size");
    ccai_free_index_remove(&ix, &b);
    cr_assert_null(ccai_free_index_best_fit(&ix, NULL, 512, SIZE_MAX));
    ccai_free_index_destroy(&ix);
}

/* The cached pair's fused operations: split takes the allocated block out
 * and indexes its remainder as the recent block (the block it displaces goes
 * to a treap); swap_recent lets the freed block take the slot of the
 * remainder it absorbs. Counts, bytes and best fit stay exact throughout. */
Test(block_index, split_and_swap_recent_keep_counts_and_best_fit) {
    ccai_free_index ix = {0};
    cr_assert_eq(ccai_free_index_attach(&ix, NULL), CCA_OK);
    ccai_block a = {.addr = 0x10000, .size = 4096, .state = CCAI_FREE};
    ccai_block b = {.addr = 0x20000, .size = 8192, .state = CCAI_FREE};
    ccai_block c = {.addr = 0x30000, .size = 2048, .state = CCAI_FREE};
    ccai_free_index_insert(&ix, &a);
    ccai_free_index_insert(&ix, &b);
    ccai_free_index_insert(&ix, &c); /* c is the recent block */
    cr_assert_eq(ix.count, 3);
    cr_assert_eq(ix.bytes, 4096 + 8192 + 2048);

    /* allocate 3 KiB: best fit is a; its 1 KiB remainder r is indexed */
    cr_assert_eq(ccai_free_index_best_fit(&ix, NULL, 3072, SIZE_MAX), &a);
    ccai_block r = {.addr = 0x10000 + 3072, .size = 1024, .state = CCAI_FREE};
    ccai_free_index_split(&ix, &a, &r);
    a.size = 3072;
    a.state = CCAI_LIVE;
    cr_assert_eq(ix.count, 3, "a out, r in");
    cr_assert_eq(ix.bytes, 1024 + 8192 + 2048);
    cr_assert_eq(ccai_free_index_best_fit(&ix, NULL, 512, SIZE_MAX), &r);
    cr_assert_eq(ccai_free_index_best_fit(&ix, NULL, 1536, SIZE_MAX), &c, "c, displaced into its treap, is found");
    cr_assert_eq(ccai_free_index_best_fit(&ix, NULL, 4096, SIZE_MAX), &b);
    cr_assert_eq(ccai_free_index_largest(&ix), 8192);

    /* swap_recent refuses a block that is not the recent one, changing nothing */
    a.state = CCAI_FREE;
    cr_assert_not(ccai_free_index_swap_recent(&ix, &c, &a));
    cr_assert_eq(ix.count, 3);
    cr_assert_eq(ix.bytes, 1024 + 8192 + 2048);

    /* free a: it takes r's slot, then absorbs r (what absorb_next does) */
    cr_assert(ccai_free_index_swap_recent(&ix, &r, &a));
    a.size += r.size;
    cr_assert_eq(ix.count, 3, "r's place is a's");
    cr_assert_eq(ix.bytes, 4096 + 8192 + 2048);
    cr_assert_eq(ccai_free_index_best_fit(&ix, NULL, 3072, SIZE_MAX), &a);
    cr_assert_eq(ccai_free_index_best_fit(&ix, NULL, 512, SIZE_MAX), &c, "r is gone");

    size_t seen = 0;
    cr_assert(ccai_free_index_walk(&ix, count_block, &seen));
    cr_assert_eq(seen, 3);
    ccai_free_index_remove(&ix, &a);
    ccai_free_index_remove(&ix, &b);
    ccai_free_index_remove(&ix, &c);
    cr_assert_eq(ix.count, 0);
    cr_assert_eq(ix.bytes, 0);
    cr_assert_null(ccai_free_index_best_fit(&ix, NULL, 512, SIZE_MAX));
    ccai_free_index_detach(&ix, NULL);
    ccai_free_index_destroy(&ix);
}

/* The live map: insert/find/remove across growth. */
Test(block_index, live_map_grows_and_finds) {
    ccai_live_map m;
    cr_assert_eq(ccai_live_map_init(&m), CCA_OK);
    enum { N = 5000 };
    ccai_block *bs = calloc(N, sizeof *bs);
    for (int i = 0; i < N; i++) {
        bs[i].addr = (uintptr_t)(i + 1) * 256;
        ccai_live_map_insert(&m, &bs[i]);
    }
    cr_assert_eq(m.count, N);
    cr_assert_geq(m.bucket_count, N);
    for (int i = 0; i < N; i++)
        cr_assert_eq(ccai_live_map_find(&m, bs[i].addr), &bs[i]);
    cr_assert_null(ccai_live_map_find(&m, (uintptr_t)(N + 5) * 256));
    for (int i = 0; i < N; i += 2)
        ccai_live_map_remove(&m, &bs[i]);
    for (int i = 0; i < N; i++)
        cr_assert_eq(ccai_live_map_find(&m, bs[i].addr), i % 2 ? &bs[i] : NULL);
    cr_assert_eq(m.count, N / 2);
    ccai_live_map_destroy(&m);
    free(bs);
}

/* A stream's bins live exactly as long as it has segments in the pool. */
Test(block_index, stream_bins_follow_their_segments) {
    ccai_free_index ix = {0};
    cca_stream s1 = (cca_stream)0x1, s2 = (cca_stream)0x2;
    cr_assert_eq(ccai_free_index_attach(&ix, s1), CCA_OK);
    cr_assert_eq(ccai_free_index_attach(&ix, s1), CCA_OK);
    cr_assert_eq(ccai_free_index_attach(&ix, s2), CCA_OK);
    int n = 0;
    for (ccai_stream_bins *sb = ix.streams; sb; sb = sb->next)
        n++;
    cr_assert_eq(n, 2);
    ccai_free_index_detach(&ix, s1);
    cr_assert_not_null(ix.streams->next, "s1 still has a segment");
    ccai_free_index_detach(&ix, s1);
    cr_assert_eq(ix.streams->stream, s2);
    cr_assert_null(ix.streams->next, "s1's bins are gone with its last segment");
    ccai_free_index_detach(&ix, s2);
    cr_assert_null(ix.streams);
    ccai_free_index_destroy(&ix);
}
