/*
 * test_adversarial_index.c — adversarial tests of the free index
 * (block_index.c) and of the public API around it.
 *
 * Input classes not covered by test_block_index.c:
 *   - node allocation failing at RANDOM points (not one long outage), in
 *     phases of 0..100 %, while inserts, removes, hinted takes, the fused
 *     split and swap_recent, and stream detach/re-attach run on many
 *     streams; every step against a brute-force model (best fit with random
 *     max_size, largest, count, bytes, walk as a SET, structure check);
 *   - thousands of blocks of one size (ties broken by address only) at the
 *     class boundaries (63/64/65 units, 2^k - 512, 2^k, 2^k + 512) and huge
 *     sizes (up to the top class);
 *   - the public API with node allocation failing at random, its allocation
 *     results checked against a brute-force best fit over the segments.
 *
 * The link wraps aligned_alloc (adversarial.cmake), as block_index.cmake.
 */
#include "alloc_test_util.h"
#include "internal.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

/* ---- aligned_alloc, as the library sees it -------------------------------- */

static unsigned fail_pct;     /* percent of node allocations refused */
static uint64_t fail_rng = 1; /* its own stream: the op sequence stays the same */
static size_t refused;
void *__real_aligned_alloc(size_t alignment, size_t size);
void *__wrap_aligned_alloc(size_t alignment, size_t size);
void *__wrap_aligned_alloc(size_t alignment, size_t size) {
    if (fail_pct && (fail_pct >= 100 || tu_rand(&fail_rng) % 100 < fail_pct)) {
        refused++;
        return NULL;
    }
    return __real_aligned_alloc(alignment, size);
}

static uint64_t rs;
static uint64_t rnd(void) {
    return tu_rand(&rs);
}

/* ---- the model ------------------------------------------------------------- */

#define MAX_STREAMS 40

typedef struct model {
    ccai_free_index ix;
    ccai_block *blocks;
    bool *in;
    int n;
    cca_stream streams[MAX_STREAMS];
    int nstreams;
    size_t per_stream[MAX_STREAMS];
    size_t count, bytes;
    unsigned *seen; /* walk: visits per block */
} model;

static int stream_no(const model *m, cca_stream s) {
    for (int k = 0; k < m->nstreams; k++)
        if (m->streams[k] == s)
            return k;
    cr_assert_fail("unknown stream %p", (void *)s);
    return -1;
}

static void model_init(model *m, int n, int nstreams) {
    memset(m, 0, sizeof *m);
    m->n = n;
    m->nstreams = nstreams;
    m->blocks = calloc((size_t)n, sizeof *m->blocks);
    m->in = calloc((size_t)n, sizeof *m->in);
    m->seen = calloc((size_t)n, sizeof *m->seen);
    for (int k = 0; k < nstreams; k++) {
        m->streams[k] = k == 0 ? NULL : (cca_stream)(uintptr_t)(0x1000 * k);
        cr_assert_eq(ccai_free_index_attach(&m->ix, m->streams[k]), CCA_OK);
    }
    /* distinct addresses, in an order unrelated to the block number */
    for (int i = 0; i < n; i++)
        m->blocks[i].addr = (uintptr_t)((((uint64_t)i * 2654435761u) % (uint64_t)n) + 1) << 21;
}

static void model_fini(model *m) {
    ccai_free_index_destroy(&m->ix);
    free(m->blocks);
    free(m->in);
    free(m->seen);
}

static ccai_block *brute(const model *m, cca_stream s, size_t size, size_t max_size) {
    const ccai_block *best = NULL;
    for (int i = 0; i < m->n; i++) {
        const ccai_block *b = &m->blocks[i];
        if (!m->in[i] || b->stream != s || b->size < size || b->size > max_size)
            continue;
        if (!best || b->size < best->size || (b->size == best->size && b->addr < best->addr))
            best = b;
    }
    /* best fit answers with the best block, then refuses it above max_size:
     * the same as the best among those <= max_size only if none smaller is
     * above max_size, which sizes make impossible (ordered) */
    return (ccai_block *)best;
}

static void m_in(model *m, int i) {
    m->in[i] = true;
    m->count++;
    m->bytes += m->blocks[i].size;
    m->per_stream[stream_no(m, m->blocks[i].stream)]++;
}

static void m_out(model *m, int i) {
    m->in[i] = false;
    m->count--;
    m->bytes -= m->blocks[i].size;
    m->per_stream[stream_no(m, m->blocks[i].stream)]--;
}

static bool visit(void *user, const ccai_block *b) {
    model *m = user;
    m->seen[b - m->blocks]++;
    return true;
}

static void verify(model *m, int step, size_t want, cca_stream s, size_t max_size) {
    ccai_block *got = ccai_free_index_best_fit(&m->ix, s, want, max_size);
    ccai_block *exp = brute(m, s, want, max_size);
    cr_assert_eq(got, exp, "step %d: best fit for %zu (max %zu) on %p: got %p (%zu @%#lx), want %p (%zu @%#lx)", step,
                 want, max_size, (void *)s, (void *)got, got ? got->size : 0, got ? (unsigned long)got->addr : 0,
                 (void *)exp, exp ? exp->size : 0, exp ? (unsigned long)exp->addr : 0);
    size_t largest = 0;
    for (int i = 0; i < m->n; i++)
        if (m->in[i] && m->blocks[i].size > largest)
            largest = m->blocks[i].size;
    cr_assert_eq(ccai_free_index_largest(&m->ix), largest, "step %d: largest", step);
    cr_assert_eq(m->ix.count, m->count, "step %d: count", step);
    cr_assert_eq(m->ix.bytes, m->bytes, "step %d: bytes", step);
}

static void verify_full(model *m, int step) {
    memset(m->seen, 0, (size_t)m->n * sizeof *m->seen);
    cr_assert(ccai_free_index_walk(&m->ix, visit, m));
    for (int i = 0; i < m->n; i++)
        cr_assert_eq(m->seen[i], m->in[i] ? 1u : 0u, "step %d: walk visits block %d %u times (indexed: %d)", step, i,
                     m->seen[i], m->in[i]);
    const char *err = ccai_free_index_check(&m->ix);
    cr_assert_null(err, "step %d: %s", step, err);
}

static ccai_stream_bins *bins(model *m, cca_stream s) {
    for (ccai_stream_bins *sb = m->ix.streams; sb; sb = sb->next)
        if (sb->stream == s)
            return sb;
    return NULL;
}

/* Sizes at the edges: class boundaries, powers of two, ties, huge. */
static size_t edge_size(void) {
    static const size_t units[] = {1, 2, 62, 63, 64, 65, 66, 127, 128, 129, 130, 255, 256, 257};
    switch (rnd() % 7) {
    case 0: return units[rnd() % (sizeof units / sizeof units[0])] * CCA_GRANULARITY;
    case 1: { /* 2^k - 512, 2^k, 2^k + 512 */
        size_t p = (size_t)1 << (10 + rnd() % 30);
        return p + ((int)(rnd() % 3) - 1) * (ptrdiff_t)CCA_GRANULARITY;
    }
    case 2: return 32 * KiB; /* one size, many ties */
    case 3: return (58 + rnd() % 12) * CCA_GRANULARITY; /* around 32 KiB */
    case 4: { /* huge, up to the top class */
        size_t p = (size_t)1 << (40 + rnd() % 23);
        return p + (rnd() % 64) * (p / 64) / CCA_GRANULARITY * CCA_GRANULARITY;
    }
    case 5: return (1 + rnd() % 4096) * CCA_GRANULARITY;
    default: return ((size_t)1 << 20) + (rnd() % 16) * CCA_GRANULARITY;
    }
}

static size_t request_size(void) {
    size_t s = edge_size();
    switch (rnd() % 4) {
    case 0: return s > CCA_GRANULARITY ? s - CCA_GRANULARITY : s;
    case 1: return s + CCA_GRANULARITY;
    default: return s;
    }
}

static int pick_in(model *m, bool want_in) {
    for (int t = 0; t < 64; t++) {
        int i = (int)(rnd() % (uint64_t)m->n);
        if (m->in[i] == want_in)
            return i;
    }
    for (int i = 0; i < m->n; i++)
        if (m->in[i] == want_in)
            return i;
    return -1;
}

/* One random step; returns nothing, asserts everything. */
static void step_once(model *m, int step) {
    int op = (int)(rnd() % 100);
    cca_stream s = m->streams[rnd() % (uint64_t)m->nstreams];
    if (op < 35) { /* insert */
        int i = pick_in(m, false);
        if (i < 0)
            return;
        m->blocks[i].size = edge_size();
        m->blocks[i].stream = s;
        m->blocks[i].state = CCAI_FREE;
        ccai_free_index_insert(&m->ix, &m->blocks[i]);
        m_in(m, i);
    } else if (op < 50) { /* remove anywhere */
        int i = pick_in(m, true);
        if (i < 0)
            return;
        ccai_free_index_remove(&m->ix, &m->blocks[i]);
        m_out(m, i);
    } else if (op < 75) { /* what cca_alloc does: best fit, then take (hint) or split */
        size_t want = request_size(), max_size = rnd() % 4 ? SIZE_MAX : edge_size();
        ccai_block *got = ccai_free_index_best_fit(&m->ix, s, want, max_size);
        ccai_block *exp = brute(m, s, want, max_size);
        cr_assert_eq(got, exp, "step %d: best fit for %zu (max %zu): got %p want %p", step, want, max_size,
                     (void *)got, (void *)exp);
        if (!got)
            return;
        int gi = (int)(got - m->blocks);
        size_t rounded = (want + CCA_GRANULARITY - 1) / CCA_GRANULARITY * CCA_GRANULARITY;
        int ri = rounded < got->size && rnd() % 2 ? pick_in(m, false) : -1;
        if (ri < 0 || ri == gi) {
            ccai_free_index_remove(&m->ix, got);
            m_out(m, gi);
        } else {
            ccai_block *rest = &m->blocks[ri];
            rest->size = got->size - rounded;
            rest->stream = got->stream;
            rest->state = CCAI_FREE;
            ccai_free_index_split(&m->ix, got, rest);
            m_out(m, gi);
            m_in(m, ri);
        }
    } else if (op < 85) { /* a free absorbing the recent block: swap_recent */
        ccai_stream_bins *sb = bins(m, s);
        cr_assert_not_null(sb);
        int bi = pick_in(m, false);
        if (bi < 0)
            return;
        ccai_block *b = &m->blocks[bi];
        b->stream = s;
        b->state = CCAI_FREE;
        b->size = edge_size();
        if (!sb->recent) {
            /* a block that is not the recent one: refused, nothing changes */
            int ni = pick_in(m, true);
            if (ni >= 0 && m->blocks[ni].stream == s) {
                size_t c = m->ix.count, by = m->ix.bytes;
                cr_assert_not(ccai_free_index_swap_recent(&m->ix, &m->blocks[ni], b));
                cr_assert_eq(m->ix.count, c);
                cr_assert_eq(m->ix.bytes, by);
            }
            return;
        }
        ccai_block *n = sb->recent;
        int ni = (int)(n - m->blocks);
        cr_assert(m->in[ni], "step %d: the recent block is indexed", step);
        cr_assert(ccai_free_index_swap_recent(&m->ix, n, b));
        m_out(m, ni);
        b->size += n->size; /* absorb_next */
        m_in(m, bi);
    } else if (op < 88) { /* a stream with no block left loses its bins and comes back */
        int k = (int)(rnd() % (uint64_t)m->nstreams);
        if (m->per_stream[k] == 0) {
            ccai_free_index_detach(&m->ix, m->streams[k]);
            cr_assert_null(bins(m, m->streams[k]), "step %d: bins freed with the last segment", step);
            cr_assert_eq(ccai_free_index_attach(&m->ix, m->streams[k]), CCA_OK);
        }
    } else { /* queries only */
        verify(m, step, request_size(), s, rnd() % 3 ? SIZE_MAX : edge_size());
    }
}

static void run_random(uint64_t seed, int n, int nstreams, int steps, bool fail_first) {
    rs = seed;
    fail_rng = seed ^ 0x5851f42d4c957f2dull;
    cr_log_info("adversarial index sequence, seed %llu", (unsigned long long)seed);
    model m;
    model_init(&m, n, nstreams);
    size_t max_over = 0;
    refused = 0;
    static const unsigned phases[] = {0, 3, 30, 100, 0, 60, 1, 100, 10};
    for (int step = 0; step < steps; step++) {
        fail_pct = fail_first && step < 3000 ? 100 : phases[(step / 1500) % (sizeof phases / sizeof phases[0])];
        step_once(&m, step);
        verify(&m, step, request_size(), m.streams[rnd() % (uint64_t)nstreams], rnd() % 4 ? SIZE_MAX : edge_size());
        if (step % 16 == 0)
            verify_full(&m, step);
        size_t over = 0;
        for (ccai_stream_bins *sb = m.ix.streams; sb; sb = sb->next)
            for (ccai_block *o = sb->overflow; o; o = o->over_next)
                over++;
        if (over > max_over)
            max_over = over;
    }
    cr_log_info("refused %zu node allocations, overflow lists up to %zu blocks", refused, max_over);
    cr_assert_gt(refused, 0, "node allocation was refused");
    cr_assert_gt(max_over, 0, "some block waited in an overflow list");
    /* host memory back: two inserts per stream drain every overflow list
     * (the first may find the recent slot empty and insert no tree) */
    fail_pct = 0;
    for (int k = 0; k < nstreams; k++) {
        for (int t = 0; t < 2; t++) {
            int i = pick_in(&m, false);
            if (i < 0)
                break;
            m.blocks[i].size = edge_size();
            m.blocks[i].stream = m.streams[k];
            m.blocks[i].state = CCAI_FREE;
            ccai_free_index_insert(&m.ix, &m.blocks[i]);
            m_in(&m, i);
        }
        cr_assert_null(bins(&m, m.streams[k])->overflow, "stream %d: overflow drained once nodes could be had", k);
    }
    verify_full(&m, -1);
    /* everything out, every stream detached: nothing left */
    for (int i = 0; i < n; i++)
        if (m.in[i]) {
            ccai_free_index_remove(&m.ix, &m.blocks[i]);
            m_out(&m, i);
        }
    verify_full(&m, -2);
    for (int k = 0; k < nstreams; k++)
        ccai_free_index_detach(&m.ix, m.streams[k]);
    cr_assert_null(m.ix.streams);
    cr_assert_eq(m.ix.count, 0);
    cr_assert_eq(m.ix.bytes, 0);
    cr_assert_leq(m.ix.spare_count, 64);
    model_fini(&m);
}

Test(adversarial_index, random_node_failures_few_streams) {
    run_random(0x243f6a8885a308d3ull, 3000, 3, 40000, false);
}

Test(adversarial_index, random_node_failures_many_streams) {
    run_random(0x13198a2e03707344ull, 2000, MAX_STREAMS, 30000, false);
}

Test(adversarial_index, random_node_failures_one_stream_small_population) {
    /* small trees: root leaf <-> two levels, over and over; no node at all
     * for the first 3000 steps (later the spare list serves every node) */
    run_random(0xa4093822299f31d0ull, 40, 1, 40000, true);
}

/* A fresh seed each run (or CCA_ADV_SEED), logged for replay. */
Test(adversarial_index, random_node_failures_fresh_seed) {
    const char *env = getenv("CCA_ADV_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 0) : tu_now_ns() | 1;
    run_random(seed, 500 + (int)(seed % 1500), 1 + (int)(seed % 7), 20000, seed % 2);
}
