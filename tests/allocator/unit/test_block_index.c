/*
 * test_block_index.c — allocator/src/core/free_index.c against a brute-force model.
 *
 * The free index must return the exact best fit (smallest size >= request on
 * the request's stream, lowest address among equal sizes, none above
 * max_size), the exact largest free block, and the exact largest run(b)
 * for a run() at most the block's size (ccai_free_index_largest_run, the
 * stats' longest mapped stretch: its early stop checked against a scan of
 * every free block, with runs that make the largest blocks lose), whatever
 * the mix of sizes and streams. A random sequence of inserts, removes and queries is checked
 * step by step against a linear scan of the same set, and the trees' own
 * structure (order, fill, separators, leaf chain, bitmap) with
 * ccai_free_index_check. Classes with thousands of blocks make trees of
 * several levels, so every split, borrow and merge runs; node allocation is
 * made to fail (the link wraps aligned_alloc, see block_index.cmake) to
 * check that the overflow list keeps the index exact and cca_free
 * infallible. Hundreds of streams are found through the streams' hash
 * table, attached and detached in any order, an attach refused host memory
 * (the link wraps calloc and ccai_host_zalloc) changing nothing; a stream's
 * bins are resident only where used (mincore).
 */
#include "alloc_test_util.h"
#include "internal.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

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

static ccai_block *brute_best(ccai_block *blocks, const bool *in, int n, cca_stream s, size_t size, size_t max_size) {
    ccai_block *best = NULL;
    for (int i = 0; i < n; i++) {
        ccai_block *b = &blocks[i];
        if (!in[i] || b->stream != s || b->size < size || b->size > max_size)
            continue;
        if (!best || b->size < best->size || (b->size == best->size && b->addr < best->addr))
            best = b;
    }
    return best;
}

/* ---- largest run -------------------------------------------------------------- */

/* The stats ask the index for the largest run(b) over its free blocks,
 * where run(b) <= b->size (a block's longest mapped stretch): largest
 * blocks first, stopping at the first block no larger than the best run
 * found. fake_run stands for the pages: a value fixed by the block's key and
 * run_salt, the whole size for some blocks and anything below it (0
 * included) for the others, so that the largest blocks often lose to
 * smaller ones and the walk must go on past them, across ties and classes.
 * It counts its calls, and the calls on a block that is not free (the
 * ghost's entry must be stepped over). Its own generator, so that the
 * suites' sequences stay what they were. */
static uint64_t run_salt, run_full, run_rng = 0x6a09e667f3bcc909ull;
static size_t run_calls, run_not_free;

static uint64_t run_rnd(void) {
    return tu_rand(&run_rng);
}

static size_t fake_run(const ccai_block *b) {
    run_calls++;
    run_not_free += b->state != CCAI_FREE;
    uint64_t h = ((uint64_t)b->addr ^ run_salt) * 0x9e3779b97f4a7c15ull ^ (uint64_t)b->size;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    if (h % 64 < run_full)
        return b->size;
    return (h >> 6) % 3 == 0 ? 0 : (size_t)((h >> 8) % (b->size + 1));
}

static size_t size_run(const ccai_block *b) { /* a classic segment's block */
    run_calls++;
    run_not_free += b->state != CCAI_FREE;
    return b->size;
}

/* ccai_free_index_largest_run against a scan of the model's free blocks
 * (in[k]), with a fresh salt, a share of wholly "mapped" blocks from none to
 * all, and a floor now and then; and with run = size, the largest block,
 * found with at most the recent block, the overflow list and one tree key
 * per stream. */
static void check_largest_run(const ccai_free_index *ix, const ccai_block *blocks, const bool *in, int n, int step) {
    run_salt = run_rnd();
    static const uint64_t shares[] = {0, 1, 4, 32, 64}; /* of 64 */
    run_full = shares[run_rnd() % 5];
    size_t expect = 0, largest = 0;
    for (int k = 0; k < n; k++)
        if (in[k]) {
            size_t r = fake_run(&blocks[k]);
            expect = r > expect ? r : expect;
            largest = blocks[k].size > largest ? blocks[k].size : largest;
        }
    size_t floor = run_rnd() % 4 == 0 ? (size_t)(run_rnd() % (largest + 1)) : 0;
    if (floor > expect)
        expect = floor;
    run_calls = run_not_free = 0;
    size_t got = ccai_free_index_largest_run(ix, fake_run, floor);
    cr_assert_eq(got, expect, "step %d: largest run %zu, expected %zu (floor %zu, %llu/64 whole)", step, got, expect,
                 floor, (unsigned long long)run_full);
    cr_assert_eq(run_not_free, 0, "step %d: run() asked of a block that is not free", step);
    size_t bound = 0;
    for (const ccai_stream_bins *sb = ix->streams; sb; sb = sb->next) {
        bound += 2;
        for (const ccai_block *o = sb->overflow; o; o = o->over_next)
            bound++;
    }
    run_calls = 0;
    cr_assert_eq(ccai_free_index_largest_run(ix, size_run, 0), largest, "step %d: largest by size", step);
    cr_assert_leq(run_calls, bound, "step %d: %zu blocks visited for the largest by size", step, run_calls);
    cr_assert_eq(run_not_free, 0, "step %d", step);
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
        ccai_block *expect = brute_best(blocks, in, N_BLOCKS, s, want, max_size);
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
        check_largest_run(&ix, blocks, in, N_BLOCKS, step);
        cr_assert_eq(ix.count, count);
        cr_assert_eq(ix.bytes, bytes);
        if (step % 64 == 0) {
            const char *err = ccai_free_index_check(&ix);
            cr_assert_null(err, "step %d: %s", step, err);
        }
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
 * to its tree); swap_recent lets the freed block take the slot of the
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
    cr_assert_eq(ccai_free_index_best_fit(&ix, NULL, 1536, SIZE_MAX), &c, "c, displaced into its tree, is found");
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

/* ---- many streams ------------------------------------------------------------- */

/* calloc (the streams' table) and ccai_host_zalloc (a stream's bins), as
 * the library sees them (block_index.cmake links with --wrap for both):
 * the calloc_fail_in-th call of either from now fails (0: none). */
static int calloc_fail_in;
static bool fail_next(void) {
    return calloc_fail_in > 0 && --calloc_fail_in == 0;
}
void *__real_calloc(size_t n, size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_calloc(size_t n, size_t size) {
    return fail_next() ? NULL : __real_calloc(n, size);
}
void *__real_ccai_host_zalloc(size_t size);
void *__wrap_ccai_host_zalloc(size_t size);
void *__wrap_ccai_host_zalloc(size_t size) {
    return fail_next() ? NULL : __real_ccai_host_zalloc(size);
}

#define MANY_STREAMS 700

/* Stream k's key: NULL (the default stream) for k = 0, else spread like
 * heap pointers, every one a multiple of 64 so that the low bits say nothing. */
static cca_stream many_stream(int k) {
    return k ? (cca_stream)(uintptr_t)(0x5500000000ull + (uint64_t)k * 64 * 37) : NULL;
}

/* Each attached stream's one block is what best fit finds on that stream,
 * and a detached stream finds nothing; the index's own check holds. */
static void many_check(ccai_free_index *ix, ccai_block *blocks, const bool *attached, const char *when) {
    const char *err = ccai_free_index_check(ix);
    cr_assert_null(err, "%s: %s", when, err);
    size_t n = 0;
    for (int k = 0; k < MANY_STREAMS; k++) {
        ccai_block *got = ccai_free_index_best_fit(ix, many_stream(k), CCA_GRANULARITY, SIZE_MAX);
        cr_assert_eq(got, attached[k] ? &blocks[k] : NULL, "%s: stream %d: got %p", when, k, (void *)got);
        n += attached[k];
    }
    cr_assert_eq(ix->nstreams, n, "%s", when);
}

/* Hundreds of streams, each with its own bins: found whatever the order
 * they were attached and detached in (the table grows from 8 slots to
 * 2048; a detach moves the slots after it back), and an attach that host
 * memory refuses, for the table or for the bins, changes nothing. */
Test(block_index, many_streams_each_find_their_own_blocks) {
    rng_state = 0x5eed5eedull;
    ccai_free_index ix = {0};
    ccai_block *blocks = calloc(MANY_STREAMS, sizeof *blocks);
    bool attached[MANY_STREAMS] = {0};
    int order[MANY_STREAMS];
    for (int k = 0; k < MANY_STREAMS; k++) {
        blocks[k] = (ccai_block){.addr = (uintptr_t)(k + 1) << 20,
                                 .size = (size_t)(k + 1) * CCA_GRANULARITY,
                                 .stream = many_stream(k),
                                 .state = CCAI_FREE};
        order[k] = k;
    }
    for (int round = 0; round < 3; round++) {
        for (int k = MANY_STREAMS - 1; k > 0; k--) { /* a new order each round */
            int j = (int)(rnd() % (uint64_t)(k + 1)), t = order[k];
            order[k] = order[j];
            order[j] = t;
        }
        for (int i = 0; i < MANY_STREAMS; i++) {
            int k = order[i];
            cr_assert_eq(ccai_free_index_attach(&ix, many_stream(k)), CCA_OK);
            ccai_free_index_insert(&ix, &blocks[k]);
            attached[k] = true;
            if (i % 97 == 0 || i < 20)
                many_check(&ix, blocks, attached, "attaching");
        }
        many_check(&ix, blocks, attached, "all attached");
        for (int i = MANY_STREAMS - 1; i >= 0; i--) { /* detached in another order */
            int k = order[(i * 3) % MANY_STREAMS];    /* 3: coprime to MANY_STREAMS */
            ccai_free_index_remove(&ix, &blocks[k]);
            ccai_free_index_detach(&ix, many_stream(k));
            attached[k] = false;
            if (i % 89 == 0 || i < 20)
                many_check(&ix, blocks, attached, "detaching");
        }
        cr_assert_null(ix.streams);
        cr_assert_eq(ix.table_bits, 11, "the table keeps its 2048 slots");
    }
    /* small tables, where probes wrap past the last slot: four random
     * streams in 8 slots, attached and detached in random orders */
    ccai_free_index_destroy(&ix);
    for (int trial = 0; trial < 3000; trial++) {
        ccai_block few[4];
        bool in[4] = {0};
        for (int k = 0; k < 4; k++) {
            cca_stream key = (cca_stream)(uintptr_t)((rnd() | 1) << 4);
            few[k] = (ccai_block){
                .addr = (uintptr_t)(k + 1) << 20, .size = CCA_GRANULARITY, .stream = key, .state = CCAI_FREE};
            cr_assert_eq(ccai_free_index_attach(&ix, key), CCA_OK);
            ccai_free_index_insert(&ix, &few[k]);
            in[k] = true;
        }
        for (int left = 4; left > 0; left--) {
            int k = (int)(rnd() % 4);
            while (!in[k])
                k = (k + 1) % 4;
            ccai_free_index_remove(&ix, &few[k]);
            ccai_free_index_detach(&ix, few[k].stream);
            in[k] = false;
            const char *err = ccai_free_index_check(&ix);
            cr_assert_null(err, "trial %d: %s", trial, err);
            for (int o = 0; o < 4; o++)
                cr_assert_eq(ccai_free_index_best_fit(&ix, few[o].stream, CCA_GRANULARITY, SIZE_MAX),
                             in[o] ? &few[o] : NULL, "trial %d: stream %d", trial, o);
        }
        ccai_free_index_destroy(&ix);
    }
    /* host memory short, on a new index: the 5th stream grows the table (8
     * slots, at most half full), then gets its bins; either refusal leaves
     * the index as it was */
    for (int k = 0; k < 4; k++) {
        cr_assert_eq(ccai_free_index_attach(&ix, many_stream(k)), CCA_OK);
        ccai_free_index_insert(&ix, &blocks[k]);
        attached[k] = true;
    }
    for (int fail = 1; fail <= 2; fail++) {
        calloc_fail_in = fail;
        cr_assert_eq(ccai_free_index_attach(&ix, many_stream(4)), CCA_ERR_OUT_OF_MEMORY, "calloc %d refused", fail);
        cr_assert_eq(calloc_fail_in, 0, "the refused calloc was the %d-th", fail);
        many_check(&ix, blocks, attached, "attach refused");
    }
    cr_assert_eq(ccai_free_index_attach(&ix, many_stream(4)), CCA_OK);
    ccai_free_index_insert(&ix, &blocks[4]);
    attached[4] = true;
    many_check(&ix, blocks, attached, "attached after the refusals");
    for (int k = 0; k <= 4; k++) {
        ccai_free_index_remove(&ix, &blocks[k]);
        ccai_free_index_detach(&ix, many_stream(k));
    }
    ccai_free_index_destroy(&ix);
    free(blocks);
}

/* A stream's bins are 196 KB of address space (a root per class), of
 * which a pool with a few free blocks touches a few pages: only those are
 * resident, also for the bins made after others were freed (glibc's malloc
 * raises its mmap threshold once such a chunk is freed, then serves the
 * next from its heap, and calloc zeroes all of it). Counted with mincore
 * over the record. */
static size_t resident_pages(const void *p, size_t size, size_t *pages) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = (uintptr_t)p & ~(page - 1), hi = ((uintptr_t)p + size + page - 1) & ~(page - 1);
    unsigned char vec[(sizeof(ccai_stream_bins) + 2 * 65536) / 4096];
    *pages = (hi - lo) / page;
    cr_assert_leq(*pages, sizeof vec);
    cr_assert_eq(mincore((void *)lo, hi - lo, vec), 0, "mincore: %s", strerror(errno));
    size_t n = 0;
    for (size_t i = 0; i < *pages; i++)
        n += vec[i] & 1;
    return n;
}

Test(block_index, bins_are_resident_only_where_used) {
    for (int round = 0; round < 3; round++) { /* the 2nd and 3rd come after a bins record was freed */
        ccai_free_index ix = {0};
        cr_assert_eq(ccai_free_index_attach(&ix, NULL), CCA_OK);
        ccai_block b = {.addr = 1 << 20, .size = 3 * CCA_GRANULARITY, .stream = NULL, .state = CCAI_FREE};
        ccai_free_index_insert(&ix, &b);
        size_t pages, resident = resident_pages(ix.streams, sizeof *ix.streams, &pages);
        cr_assert_leq(resident, 8, "round %d: %zu of the bins' %zu pages resident", round, resident, pages);
        ccai_free_index_remove(&ix, &b);
        ccai_free_index_detach(&ix, NULL);
        ccai_free_index_destroy(&ix);
    }
}

/* ---- deep trees ---------------------------------------------------------------- */

/* aligned_alloc, as the library sees it (block_index.cmake links with
 * --wrap=aligned_alloc): fails while node_alloc_fails is set. */
static bool node_alloc_fails;
static size_t node_alloc_refused;
void *__real_aligned_alloc(size_t alignment, size_t size);
void *__wrap_aligned_alloc(size_t alignment, size_t size);
void *__wrap_aligned_alloc(size_t alignment, size_t size) {
    if (node_alloc_fails && size == ((sizeof(ccai_bnode) + 63) & ~(size_t)63)) { /* not a record slab */
        node_alloc_refused++;
        return NULL;
    }
    return __real_aligned_alloc(alignment, size);
}

#define DEEP_N 8000

/* Few classes, thousands of blocks each, many equal sizes: trees of three
 * and four levels. */
static size_t deep_size(void) {
    switch (rnd() % 5) {
    case 0: return 512;                                              /* one exact class: ties only */
    case 1: return 4096;
    case 2: return ((size_t)1 << 30) + (rnd() % 32) * CCA_GRANULARITY; /* one TLSF class, 32 sizes */
    case 3: return ((size_t)1 << 30) + (rnd() % 2048) * CCA_GRANULARITY; /* its neighbours */
    default: return (1 + rnd() % 63) * CCA_GRANULARITY;
    }
}

typedef struct deep_model {
    ccai_free_index ix;
    ccai_block *blocks;
    bool *in;
    size_t count, bytes;
} deep_model;

static void deep_init(deep_model *m) {
    memset(m, 0, sizeof *m);
    cr_assert_eq(ccai_free_index_attach(&m->ix, NULL), CCA_OK);
    m->blocks = calloc(DEEP_N, sizeof *m->blocks);
    m->in = calloc(DEEP_N, sizeof *m->in);
    for (int i = 0; i < DEEP_N; i++)
        m->blocks[i].addr = (uintptr_t)(DEEP_N - i) * 4096 * 64; /* insert order differs from address order */
}

static void deep_fini(deep_model *m) {
    ccai_free_index_destroy(&m->ix);
    free(m->blocks);
    free(m->in);
}

static void deep_insert(deep_model *m, int i) {
    m->blocks[i].size = deep_size();
    m->blocks[i].state = CCAI_FREE;
    ccai_free_index_insert(&m->ix, &m->blocks[i]);
    m->in[i] = true;
    m->count++;
    m->bytes += m->blocks[i].size;
}

static void deep_remove(deep_model *m, int i) {
    ccai_free_index_remove(&m->ix, &m->blocks[i]);
    m->in[i] = false;
    m->count--;
    m->bytes -= m->blocks[i].size;
}

/* Best fit, largest, counts, walk and structure against the model. */
static void deep_verify(deep_model *m, int step) {
    size_t want = deep_size() - (rnd() % 2) * CCA_GRANULARITY;
    if (want == 0)
        want = CCA_GRANULARITY;
    ccai_block *got = ccai_free_index_best_fit(&m->ix, NULL, want, SIZE_MAX);
    ccai_block *expect = brute_best(m->blocks, m->in, DEEP_N, NULL, want, SIZE_MAX);
    cr_assert_eq(got, expect, "step %d: best fit for %zu: got %p, want %p", step, want, (void *)got, (void *)expect);
    size_t largest = 0;
    for (int k = 0; k < DEEP_N; k++)
        if (m->in[k] && m->blocks[k].size > largest)
            largest = m->blocks[k].size;
    cr_assert_eq(ccai_free_index_largest(&m->ix), largest, "step %d: largest", step);
    check_largest_run(&m->ix, m->blocks, m->in, DEEP_N, step);
    cr_assert_eq(m->ix.count, m->count, "step %d", step);
    cr_assert_eq(m->ix.bytes, m->bytes, "step %d", step);
    size_t seen = 0;
    cr_assert(ccai_free_index_walk(&m->ix, count_block, &seen));
    cr_assert_eq(seen, m->count, "step %d: walk", step);
    const char *err = ccai_free_index_check(&m->ix);
    cr_assert_null(err, "step %d: %s", step, err);
}

/* Saw-tooth fill and drain of 8000 blocks in a handful of classes: every
 * split, borrow and merge, at every level, checked against the model; then
 * everything removed, the trees gone. */
static int tree_height(const ccai_bnode *n) {
    int h = 1;
    for (; !n->leaf; n = n->e[0].child)
        h++;
    return h;
}

Test(block_index, deep_trees_match_brute_force) {
    rng_state = 0x2545f4914f6cdd1dull;
    deep_model m;
    deep_init(&m);
    int tallest = 0;
    for (int step = 0; step < 120000; step++) {
        bool filling = (step / 20000) % 2 == 0;
        int i = (int)(rnd() % DEEP_N);
        if (!m.in[i]) {
            if (filling || rnd() % 4 == 0)
                deep_insert(&m, i);
        } else if (!filling || rnd() % 4 == 0) {
            if (rnd() % 2) {
                deep_remove(&m, i);
            } else { /* what cca_alloc does: best fit, then take it (the hint) */
                ccai_block *b = ccai_free_index_best_fit(&m.ix, NULL, m.blocks[i].size, SIZE_MAX);
                cr_assert_not_null(b);
                deep_remove(&m, (int)(b - m.blocks));
            }
        }
        if (step % 16 == 0)
            deep_verify(&m, step);
        if (step % 1000 == 0)
            for (unsigned c = 0; c < CCAI_CLASSES; c++)
                if (m.ix.streams->roots[c] && tree_height(m.ix.streams->roots[c]) > tallest)
                    tallest = tree_height(m.ix.streams->roots[c]);
    }
    cr_assert_geq(tallest, 4, "trees four levels deep were exercised");
    for (int i = 0; i < DEEP_N; i++)
        if (m.in[i])
            deep_remove(&m, i);
    deep_verify(&m, -1);
    cr_assert_eq(m.ix.count, 0);
    for (ccai_stream_bins *sb = m.ix.streams; sb; sb = sb->next) {
        for (unsigned s = 0; s < CCAI_CLASS_SUMMARY; s++)
            cr_assert_eq(sb->rows[s], 0, "every tree is gone");
        for (unsigned c = 0; c < CCAI_CLASSES; c++)
            cr_assert_null(sb->roots[c]);
    }
    cr_assert_leq(m.ix.spare_count, 64, "spare nodes are bounded");
    ccai_free_index_detach(&m.ix, NULL);
    deep_fini(&m);
}

/* Node allocation fails part-way through growth: blocks that find no node
 * wait in the overflow list, best fit and largest stay exact, removal works
 * wherever a block sits, and once nodes can be had the next insert drains
 * the list into the trees. */
Test(block_index, node_allocation_failure_keeps_the_index_exact) {
    rng_state = 0x853c49e6748fea9bull;
    deep_model m;
    deep_init(&m);
    for (int i = 0; i < DEEP_N / 2; i++)
        deep_insert(&m, i);
    deep_verify(&m, 0);
    node_alloc_refused = 0;
    node_alloc_fails = true;
    for (int i = DEEP_N / 2; i < DEEP_N; i++) {
        deep_insert(&m, i);
        if (i % 97 == 0)
            deep_verify(&m, i);
    }
    deep_verify(&m, DEEP_N);
    cr_assert_gt(node_alloc_refused, 0, "some insert needed a node");
    size_t overflowed = 0;
    for (const ccai_block *o = m.ix.streams->overflow; o; o = o->over_next)
        overflowed++;
    cr_assert_gt(overflowed, 0, "some block waits in the overflow list");
    for (int k = 0; k < 3000; k++) { /* removes, hinted takes, from trees and the list alike */
        int i = (int)(rnd() % DEEP_N);
        if (!m.in[i])
            continue;
        if (rnd() % 2) {
            deep_remove(&m, i);
        } else {
            ccai_block *b = ccai_free_index_best_fit(&m.ix, NULL, m.blocks[i].size, SIZE_MAX);
            deep_remove(&m, (int)(b - m.blocks));
        }
        if (k % 101 == 0)
            deep_verify(&m, k);
    }
    node_alloc_fails = false;
    for (int i = 0; i < DEEP_N && m.ix.streams->overflow; i++)
        if (!m.in[i])
            deep_insert(&m, i);
    cr_assert_null(m.ix.streams->overflow, "drained once nodes could be had");
    deep_verify(&m, -1);
    deep_fini(&m);
}

/* Through the public API: with no host memory for tree nodes, cca_free still
 * returns CCA_OK for every block, nothing is lost, and the invariants hold;
 * the blocks are found again by later allocations. */
Test(block_index, frees_succeed_without_node_memory) {
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(512 * MiB, "", &u, &a);
    enum { N = 3000 };
    void **p = calloc(N, sizeof *p);
    for (int i = 0; i < N; i++)
        p[i] = tu_alloc(a, (size_t)(1 + i % 40) * 1024, NULL);
    cca_stats before = tu_stats(a);
    node_alloc_refused = 0;
    node_alloc_fails = true;
    for (int i = 0; i < N; i += 2) /* holes: no two neighbours merge */
        tu_free(a, p[i]);
    node_alloc_fails = false;
    cr_assert_gt(node_alloc_refused, 0, "some free needed a node");
    tu_check(a);
    cca_stats after = tu_stats(a);
    cr_assert_eq(after.reserved_bytes, before.reserved_bytes);
    cr_assert_eq(after.active_blocks, before.active_blocks - N / 2);
    cr_assert_eq(after.cached_bytes, before.cached_bytes + before.allocated_bytes - after.allocated_bytes);
    for (int i = 0; i < N; i += 2) { /* each size finds a hole of exactly its size again */
        p[i] = tu_alloc(a, (size_t)(1 + i % 40) * 1024, NULL);
        cr_assert_eq(tu_block_size(a, p[i]), (size_t)(1 + i % 40) * 1024);
    }
    cca_stats again = tu_stats(a);
    cr_assert_eq(again.reserved_bytes, before.reserved_bytes, "no new memory: the holes were found");
    cr_assert_eq(again.allocated_bytes, before.allocated_bytes);
    tu_check(a);
    for (int i = 0; i < N; i++)
        tu_free(a, p[i]);
    free(p);
    tu_teardown(a, u);
}

/* ---- the deferred removal (the ghost) ------------------------------------------ */

/* White box: what a cached pair leaves in the index. A take found by best
 * fit leaves the block's entry in its leaf (the ghost), uncounted, unseen by
 * walk, largest and best fit; its return with the same key keeps the entry
 * (no tree change: the leaf is the same, the block at the same place); a
 * return with another key, or any other operation, drops it first. */
Test(block_index, a_take_is_deferred_and_undone_by_the_same_free) {
    ccai_free_index ix = {0};
    cr_assert_eq(ccai_free_index_attach(&ix, NULL), CCA_OK);
    ccai_block b[4] = {{.addr = 0x10000, .size = 4096, .state = CCAI_FREE},
                       {.addr = 0x20000, .size = 8192, .state = CCAI_FREE},
                       {.addr = 0x30000, .size = 8192, .state = CCAI_FREE},
                       {.addr = 0x40000, .size = 2048, .state = CCAI_FREE}};
    for (int i = 0; i < 4; i++)
        ccai_free_index_insert(&ix, &b[i]);
    ccai_free_index_insert(&ix, &(ccai_block){.addr = 0x90000, .size = 512, .state = CCAI_FREE});
    ccai_free_index_remove(&ix, ix.streams->recent); /* every b[i] in a tree now */
    cr_assert_null(ix.streams->recent);
    size_t seen = 0;

    /* take b[2], the largest, whole: its entry stays as the ghost */
    cr_assert_eq(ccai_free_index_best_fit(&ix, NULL, 8193 - 512, SIZE_MAX), &b[1]);
    cr_assert_eq(ccai_free_index_best_fit(&ix, NULL, 8192, 8192), &b[1], "ties: lowest address");
    ccai_free_index_take(&ix, &b[1]);
    b[1].state = CCAI_LIVE;
    cr_assert_eq(ix.ghost, &b[1]);
    cr_assert_eq(ix.count, 3);
    cr_assert_eq(ix.bytes, 4096 + 8192 + 2048);
    cr_assert_null(ccai_free_index_check(&ix), "a consistent ghost");
    cr_assert(ccai_free_index_walk(&ix, count_block, &seen));
    cr_assert_eq(seen, 3, "walk skips the ghost");
    cr_assert_eq(ccai_free_index_largest(&ix), 8192, "b[2] is still there");
    const ccai_bnode *leaf = ix.ghost_leaf;
    unsigned pos = ix.ghost_pos;
    cr_assert_eq(leaf->e[pos].blk, &b[1]);

    /* freed unchanged: the same entry, nothing moved */
    b[1].state = CCAI_FREE;
    ccai_free_index_insert(&ix, &b[1]);
    cr_assert_null(ix.ghost);
    cr_assert_null(ix.streams->recent, "not the recent block: back in its tree");
    cr_assert_eq(leaf->e[pos].blk, &b[1]);
    cr_assert_eq(ix.count, 4);
    cr_assert_eq(ix.bytes, 4096 + 2 * 8192 + 2048);
    cr_assert_null(ccai_free_index_check(&ix));

    /* the ghost of the largest is not the largest; the next best fit settles it */
    cr_assert_eq(ccai_free_index_best_fit(&ix, NULL, 8192 + 512 - 511, SIZE_MAX), NULL);
    cr_assert_eq(ccai_free_index_best_fit(&ix, NULL, 8192, SIZE_MAX), &b[1]);
    ccai_free_index_take(&ix, &b[1]);
    b[1].state = CCAI_LIVE;
    cr_assert_eq(ccai_free_index_best_fit(&ix, NULL, 8192, SIZE_MAX), &b[2]);
    cr_assert_null(ix.ghost, "settled by the best fit");
    ccai_free_index_take(&ix, &b[2]);
    b[2].state = CCAI_LIVE;
    cr_assert_eq(ix.ghost, &b[2]);
    cr_assert_eq(ccai_free_index_largest(&ix), 4096, "neither 8 KiB block counts");
    seen = 0;
    cr_assert(ccai_free_index_walk(&ix, count_block, &seen));
    cr_assert_eq(seen, 2);

    /* b[2] comes back smaller (another key): the stale entry goes first */
    b[2].size = 6144;
    b[2].state = CCAI_FREE;
    ccai_free_index_insert(&ix, &b[2]);
    cr_assert_null(ix.ghost);
    cr_assert_eq(ix.streams->recent, &b[2]);
    cr_assert_null(ccai_free_index_check(&ix));
    cr_assert_eq(ccai_free_index_best_fit(&ix, NULL, 6144, SIZE_MAX), &b[2]);
    cr_assert_null(ccai_free_index_best_fit(&ix, NULL, 6656, SIZE_MAX), "no stale 8 KiB entry");

    /* the split pair: b[0] (4 KiB, in its tree) serves 1 KiB; its remainder
     * is the recent block (b[2], displaced, goes to its tree first) */
    cr_assert_eq(ccai_free_index_best_fit(&ix, NULL, 4096, SIZE_MAX), &b[0]);
    ccai_block r = {.addr = 0x10000 + 1024, .size = 3072, .state = CCAI_FREE};
    ccai_free_index_split(&ix, &b[0], &r);
    b[0].size = 1024;
    b[0].state = CCAI_LIVE;
    cr_assert_eq(ix.ghost, &b[0]);
    cr_assert_eq(ix.streams->recent, &r);
    cr_assert_eq(ix.count, 3);
    cr_assert_eq(ix.bytes, 3072 + 6144 + 2048);
    cr_assert_null(ccai_free_index_check(&ix));
    /* the free merges r back: the split is undone, r leaves the slot */
    b[0].state = CCAI_FREE;
    cr_assert(ccai_free_index_swap_recent(&ix, &r, &b[0]));
    b[0].size += r.size;
    cr_assert_null(ix.ghost);
    cr_assert_null(ix.streams->recent);
    cr_assert_eq(ix.count, 3);
    cr_assert_eq(ix.bytes, 4096 + 6144 + 2048);
    cr_assert_null(ccai_free_index_check(&ix));
    cr_assert_eq(ccai_free_index_best_fit(&ix, NULL, 3584, SIZE_MAX), &b[0]);

    /* split again, but the free merges r into a block of another size: b
     * takes the slot, the ghost stays until the next tree operation */
    ccai_free_index_split(&ix, &b[0], &r);
    b[0].size = 1024;
    cr_assert_eq(ix.ghost, &b[0]);
    b[0].size = 512; /* freed smaller than it was handed out (not a real case) */
    cr_assert(ccai_free_index_swap_recent(&ix, &r, &b[0]));
    b[0].size += r.size;
    cr_assert_eq(ix.ghost, &b[0], "3.5 KiB is not its old key");
    cr_assert_eq(ix.streams->recent, &b[0]);
    cr_assert_null(ccai_free_index_check(&ix), "a ghost whose block is the recent one");
    cr_assert_eq(ccai_free_index_largest(&ix), 6144);
    cr_assert_eq(ccai_free_index_best_fit(&ix, NULL, 3584, SIZE_MAX), &b[0]);
    cr_assert_null(ix.ghost);
    cr_assert_eq(ccai_free_index_best_fit(&ix, NULL, 4096, SIZE_MAX), &b[2], "the old 4 KiB entry is gone");
    cr_assert_null(ccai_free_index_check(&ix));
    b[1].state = CCAI_FREE;
    ccai_free_index_insert(&ix, &b[1]);
    ccai_free_index_destroy(&ix);
}

/* The block the remainder displaces from the recent slot enters its tree
 * before the split block leaves it: in the same leaf and before it, it moves
 * that block one place right, and the deferred removal must follow. Sizes
 * of 128 and 129 units share a class (64 KiB to 65 KiB). */
/* The class layout's edges: the last exact class and the first divided
 * one, classes far apart in the bitmap (next and previous non-empty class
 * across summary words, both directions), and the largest size a block can
 * have, whose class must be the last one. */
Test(block_index, class_edges_and_far_classes) {
    const size_t G = CCA_GRANULARITY, top = SIZE_MAX / G * G;
    const size_t sizes[] = {G, (CCAI_CLASS_SUB - 1) * G, CCAI_CLASS_SUB * G, (CCAI_CLASS_SUB + 1) * G,
                            (size_t)1 << 30, (size_t)1 << 50, top - G, top};
    enum { N = sizeof sizes / sizeof sizes[0] };
    ccai_free_index ix = {0};
    cr_assert_eq(ccai_free_index_attach(&ix, NULL), CCA_OK);
    ccai_block b[N + 1];
    memset(b, 0, sizeof b);
    for (int i = 0; i < N; i++) {
        b[i] = (ccai_block){.addr = (uintptr_t)(i + 1) << 30, .size = sizes[i], .state = CCAI_FREE};
        ccai_free_index_insert(&ix, &b[i]);
    }
    b[N] = (ccai_block){.addr = 0x100, .size = G, .state = CCAI_FREE}; /* pushes the last into its tree */
    ccai_free_index_insert(&ix, &b[N]);
    cr_assert_null(ccai_free_index_check(&ix));
    cr_assert_eq(b[N - 1].cls, CCAI_CLASSES - 1, "the largest size is in the last class");
    cr_assert_neq(b[1].cls, b[2].cls, "the last exact class and the first divided one differ");
    cr_assert_eq(ccai_free_index_largest(&ix), top);
    /* every request between two sizes gets the next size up: next_class
     * across empty words and summary words */
    cr_assert_eq(ccai_free_index_best_fit(&ix, NULL, G, SIZE_MAX), &b[N], "lowest address among ties");
    for (int i = 1; i < N; i++) {
        ccai_block *got = ccai_free_index_best_fit(&ix, NULL, sizes[i - 1] + G, SIZE_MAX);
        cr_assert_eq(got, &b[i], "request %zu: got size %zu", sizes[i - 1] + G, got ? got->size : 0);
    }
    /* largest after removing from the top: prev_class across summary words */
    for (int i = N - 1; i > 0; i--) {
        ccai_free_index_remove(&ix, &b[i]);
        cr_assert_null(ccai_free_index_check(&ix));
        cr_assert_eq(ccai_free_index_largest(&ix), sizes[i - 1]);
    }
    ccai_free_index_destroy(&ix);
}

/* An index whose one tree holds b (300 units) and whose recent slot holds
 * x (5000 units): the state the two bitmap tests below break. */
static ccai_stream_bins *one_tree(ccai_free_index *ix, ccai_block *b, ccai_block *x) {
    memset(ix, 0, sizeof *ix);
    cr_assert_eq(ccai_free_index_attach(ix, NULL), CCA_OK);
    *b = (ccai_block){.addr = 0x100000, .size = 300 * CCA_GRANULARITY, .state = CCAI_FREE};
    *x = (ccai_block){.addr = 0x200000, .size = 5000 * CCA_GRANULARITY, .state = CCAI_FREE};
    ccai_free_index_insert(ix, b);
    ccai_free_index_insert(ix, x); /* b to its tree, x recent */
    return ix->streams;
}

/* The check reads the marked classes only: a tree in an unmarked class, or
 * a mark over an empty class, is caught through the count of trees kept
 * where roots change, not by reading every root. */
Test(block_index, the_check_catches_a_class_bitmap_out_of_step) {
    ccai_free_index ix;
    ccai_block b, x;
    ccai_stream_bins *sb = one_tree(&ix, &b, &x);
    cr_assert_eq(sb->trees, 1);
    cr_assert_null(ccai_free_index_check(&ix));
    unsigned c = b.cls, w = c / 64;
    uint64_t bit = 1ull << (c % 64);
    sb->bitmap[w] &= ~bit; /* b's tree, unmarked */
    cr_assert_not_null(ccai_free_index_check(&ix));
    sb->bitmap[w] |= bit;
    unsigned e = (c + 1) % CCAI_CLASSES; /* an empty class, marked */
    cr_assert_null(sb->roots[e]);
    sb->bitmap[e / 64] |= 1ull << (e % 64);
    sb->rows[e / 64 / 64] |= 1ull << (e / 64 % 64);
    cr_assert_not_null(ccai_free_index_check(&ix));
    sb->bitmap[e / 64] &= ~(1ull << (e % 64));
    cr_assert_null(ccai_free_index_check(&ix));
    cr_assert_eq(ccai_free_index_best_fit(&ix, NULL, 300 * CCA_GRANULARITY, SIZE_MAX), &b);
    ccai_free_index_remove(&ix, &b);
    cr_assert_eq(sb->trees, 0, "its tree is gone");
    cr_assert_null(ccai_free_index_check(&ix));
    ccai_free_index_destroy(&ix);
}

/* The summary words (rows) alone out of step with the class bitmap: a row
 * bit cleared over a word that holds a tree would hide that tree from best
 * fit; a row bit set over an empty word sends searches into it. */
Test(block_index, the_check_catches_a_summary_word_out_of_step) {
    ccai_free_index ix;
    ccai_block b, x;
    ccai_stream_bins *sb = one_tree(&ix, &b, &x);
    cr_assert_null(ccai_free_index_check(&ix));
    unsigned w = b.cls / 64;
    uint64_t row = 1ull << (w % 64);
    cr_assert(sb->rows[w / 64] & row);
    sb->rows[w / 64] &= ~row; /* b's word, hidden */
    const char *err = ccai_free_index_check(&ix);
    cr_assert_not_null(err);
    cr_assert(strstr(err, "bitmap") != NULL, "%s", err);
    sb->rows[w / 64] |= row;
    cr_assert_null(ccai_free_index_check(&ix));
    unsigned e = (w + 1) % CCAI_CLASS_WORDS; /* an empty word, marked in its row */
    cr_assert_eq(sb->bitmap[e], 0);
    sb->rows[e / 64] |= 1ull << (e % 64);
    err = ccai_free_index_check(&ix);
    cr_assert_not_null(err);
    cr_assert(strstr(err, "row bitmap") != NULL, "%s", err);
    sb->rows[e / 64] &= ~(1ull << (e % 64));
    cr_assert_null(ccai_free_index_check(&ix));
    cr_assert_eq(ccai_free_index_best_fit(&ix, NULL, 300 * CCA_GRANULARITY, SIZE_MAX), &b);
    ccai_free_index_destroy(&ix);
}

/* The check reads a row the summary calls empty (an OR of its words,
 * free_index.c) rather than trusting the summary: a class bit set there,
 * in the first, a middle and the last word of an empty row and in the last
 * word of the last, shorter row, is caught, and the index is whole again
 * once it is cleared. */
Test(block_index, the_check_reads_the_rows_the_summary_calls_empty) {
    ccai_free_index ix;
    ccai_block b, x;
    ccai_stream_bins *sb = one_tree(&ix, &b, &x);
    unsigned own = b.cls / 64 / 64; /* b's row: marked */
    unsigned empty = (own + 1) % CCAI_CLASS_SUMMARY;
    unsigned last = empty * 64 + 63 < CCAI_CLASS_WORDS ? empty * 64 + 63 : CCAI_CLASS_WORDS - 1;
    unsigned words[] = {empty * 64, empty * 64 + 31, last, CCAI_CLASS_WORDS - 1};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        unsigned w = words[i];
        cr_assert_neq(w / 64, own, "word %u is in b's row", w);
        cr_assert_eq(sb->rows[w / 64], 0);
        sb->bitmap[w] |= 1ull << 63;
        const char *err = ccai_free_index_check(&ix);
        cr_assert_not_null(err, "a class bit in word %u of an empty row", w);
        cr_assert(strstr(err, "bitmap") != NULL, "%s", err);
        sb->bitmap[w] &= ~(1ull << 63);
        cr_assert_null(ccai_free_index_check(&ix));
    }
    ccai_free_index_destroy(&ix);
}

Test(block_index, the_hint_follows_its_block_past_the_displaced_insert) {
    ccai_free_index ix = {0};
    cr_assert_eq(ccai_free_index_attach(&ix, NULL), CCA_OK);
    /* K and K + 1 units share a size class whatever the classes' width */
    const size_t K = (size_t)1 << 20;
    ccai_block b = {.addr = 0x100000, .size = (K + 1) * CCA_GRANULARITY, .state = CCAI_FREE};
    ccai_block x = {.addr = 0x200000, .size = K * CCA_GRANULARITY, .state = CCAI_FREE};
    ccai_free_index_insert(&ix, &b);
    ccai_free_index_insert(&ix, &x); /* b to its tree, x recent */
    cr_assert_eq(ix.streams->recent, &x);
    cr_assert_eq(ccai_free_index_best_fit(&ix, NULL, (K + 1) * CCA_GRANULARITY, SIZE_MAX), &b);
    cr_assert_eq(ix.hint_pos, 0);
    ccai_block r = {.addr = b.addr + CCA_GRANULARITY, .size = K * CCA_GRANULARITY, .state = CCAI_FREE};
    ccai_free_index_split(&ix, &b, &r);
    b.size = CCA_GRANULARITY;
    b.state = CCAI_LIVE;
    cr_assert_eq(ix.ghost, &b);
    cr_assert_eq(ix.ghost_pos, 1, "x went in before it");
    cr_assert_eq(ix.ghost_leaf->e[0].blk, &x);
    cr_assert_eq(ix.ghost_leaf->e[1].blk, &b);
    cr_assert_eq(ix.count, 2);
    cr_assert_null(ccai_free_index_check(&ix));
    b.state = CCAI_FREE;
    cr_assert(ccai_free_index_swap_recent(&ix, &r, &b));
    b.size += r.size;
    cr_assert_null(ix.ghost, "the split undone");
    cr_assert_null(ix.streams->recent);
    cr_assert_eq(ix.count, 2);
    cr_assert_eq(ix.bytes, (2 * K + 1) * CCA_GRANULARITY);
    cr_assert_null(ccai_free_index_check(&ix));
    cr_assert_eq(ccai_free_index_best_fit(&ix, NULL, (K + 1) * CCA_GRANULARITY, SIZE_MAX), &b);
    cr_assert_eq(ccai_free_index_best_fit(&ix, NULL, K * CCA_GRANULARITY, SIZE_MAX), &x);
    ccai_free_index_destroy(&ix);
}

/* The same against the brute-force model, in trees of several levels: takes
 * (whole, and split with the remainder as the recent block) and their
 * returns (same key, another key, merged back through swap_recent) mixed
 * with inserts and removes; between them the index is checked with the
 * ghost outstanding (largest, walk, counts, structure) before a best fit
 * settles it. */
Test(block_index, deferred_takes_match_brute_force) {
    rng_state = 0xda3e39cb94b95bdbull;
    enum { N = DEEP_N, REST = DEEP_N }; /* blocks[REST]: the one remainder record */
    ccai_free_index ix = {0};
    cr_assert_eq(ccai_free_index_attach(&ix, NULL), CCA_OK);
    ccai_block *blocks = calloc(N + 1, sizeof *blocks);
    bool *in = calloc(N + 1, sizeof *in), *taken = calloc(N, sizeof *taken);
    size_t *old_size = calloc(N, sizeof *old_size);
    int split_of = -1; /* the block whose remainder blocks[REST] is */
    for (int i = 0; i < N; i++)
        blocks[i].addr = (uintptr_t)(N - i) * 4096 * 64;
    size_t resurrected = 0, deferred = 0;
    int last = -1; /* the block taken last: often freed next, as in a pair */
    for (int step = 0; step < 60000; step++) {
        int i = last >= 0 && rnd() % 2 ? last : (int)(rnd() % N);
        last = -1;
        unsigned op = (unsigned)(rnd() % 8);
        if (!in[i] && !taken[i] && op < 4) { /* a new free block */
            blocks[i].size = deep_size();
            blocks[i].state = CCAI_FREE;
            ccai_free_index_insert(&ix, &blocks[i]);
            in[i] = true;
        } else if (in[i] && op == 4) {
            ccai_free_index_remove(&ix, &blocks[i]);
            in[i] = false;
        } else if (taken[i]) { /* it returns */
            taken[i] = false;
            blocks[i].state = CCAI_FREE;
            bool was_ghost = ix.ghost == &blocks[i];
            if (i == split_of && in[REST] && rnd() % 4 != 0 &&
                ccai_free_index_swap_recent(&ix, &blocks[REST], &blocks[i])) {
                blocks[i].size += blocks[REST].size; /* absorbs it */
                in[REST] = false;
                resurrected += was_ghost && !ix.ghost;
            } else {
                if (rnd() % 4 == 0)
                    blocks[i].size = deep_size(); /* another key */
                else if (i != split_of)
                    blocks[i].size = old_size[i];
                resurrected += ix.ghost == &blocks[i] && blocks[i].size == ix.ghost_size;
                ccai_free_index_insert(&ix, &blocks[i]);
            }
            if (i == split_of)
                split_of = -1;
            in[i] = true;
        } else if (op >= 5) { /* cca_alloc: best fit, then take it whole or split */
            size_t want = deep_size();
            ccai_block *b = ccai_free_index_best_fit(&ix, NULL, want, SIZE_MAX);
            cr_assert_eq(b, brute_best(blocks, in, N + 1, NULL, want, SIZE_MAX), "step %d", step);
            if (b && b != &blocks[REST]) {
                int k = (int)(b - blocks);
                old_size[k] = b->size;
                size_t units = b->size / CCA_GRANULARITY;
                if (split_of < 0 && !in[REST] && units > 1 && rnd() % 2) {
                    size_t keep = 1 + rnd() % (units - 1 < 511 ? units - 1 : 511);
                    blocks[REST] = (ccai_block){.addr = b->addr + keep * CCA_GRANULARITY,
                                                .size = b->size - keep * CCA_GRANULARITY,
                                                .state = CCAI_FREE};
                    ccai_free_index_split(&ix, b, &blocks[REST]);
                    b->size = keep * CCA_GRANULARITY;
                    in[REST] = true;
                    split_of = k;
                } else {
                    ccai_free_index_take(&ix, b);
                }
                deferred += ix.ghost == b;
                b->state = CCAI_LIVE;
                in[k] = false;
                taken[k] = true;
                last = k;
            }
        }
        /* with any ghost still outstanding */
        size_t count = 0, bytes = 0, largest = 0;
        for (int k = 0; k <= N; k++)
            if (in[k]) {
                count++;
                bytes += blocks[k].size;
                largest = blocks[k].size > largest ? blocks[k].size : largest;
            }
        cr_assert_eq(ix.count, count, "step %d", step);
        cr_assert_eq(ix.bytes, bytes, "step %d", step);
        cr_assert_eq(ccai_free_index_largest(&ix), largest, "step %d: largest", step);
        if (step % 16 == 0) {
            check_largest_run(&ix, blocks, in, N + 1, step);
            size_t seen = 0;
            cr_assert(ccai_free_index_walk(&ix, count_block, &seen));
            cr_assert_eq(seen, count, "step %d: walk", step);
            const char *err = ccai_free_index_check(&ix);
            cr_assert_null(err, "step %d: %s", step, err);
        }
    }
    cr_assert_gt(deferred, 1000, "takes were deferred (%zu)", deferred);
    cr_assert_gt(resurrected, 1000, "and undone by their frees (%zu)", resurrected);
    ccai_free_index_destroy(&ix);
    free(blocks);
    free(in);
    free(taken);
    free(old_size);
}

/* The bins used last answer the cached path without a probe: bins that
 * are not the index's (left there after their stream's last detach) would
 * be read after their free. The check says so. */
Test(block_index, the_check_catches_last_bins_not_listed) {
    ccai_free_index ix = {0};
    cr_assert_eq(ccai_free_index_attach(&ix, (cca_stream)0x10), CCA_OK);
    cr_assert_eq(ccai_free_index_attach(&ix, (cca_stream)0x20), CCA_OK);
    cr_assert_null(ccai_free_index_check(&ix));
    ccai_stream_bins gone = {.stream = (cca_stream)0x30};
    ccai_stream_bins *kept = ix.last;
    ix.last = &gone;
    const char *err = ccai_free_index_check(&ix);
    cr_assert(err && strstr(err, "used last"), "check: %s", err ? err : "(clean)");
    ix.last = kept;
    cr_assert_null(ccai_free_index_check(&ix));
    ccai_free_index_detach(&ix, (cca_stream)0x10);
    ccai_free_index_detach(&ix, (cca_stream)0x20);
    cr_assert_null(ix.last, "the last detach leaves no bins used last");
    cr_assert_null(ccai_free_index_check(&ix));
    ccai_free_index_destroy(&ix);
}
