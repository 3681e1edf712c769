/*
 * test_adversarial_index.c — allocator/src/core/free_index.c: adversarial tests of the free index
 * (core/free_index.c) and of the public API around it.
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
#include "../domain.h" /* ccai_domain_* */

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- aligned_alloc, as the library sees it -------------------------------- */

static unsigned fail_pct;     /* percent of node allocations refused */
static uint64_t fail_rng = 1; /* its own stream: the op sequence stays the same */
static size_t refused;
void *__real_aligned_alloc(size_t alignment, size_t size);
void *__wrap_aligned_alloc(size_t alignment, size_t size);
/* Host allocation faults for the sweep below (adversarial.cmake also wraps
 * malloc, calloc and realloc): while armed, calls are counted from 1 and
 * call host_fail_at fails (with host_sticky, every later one too). */
static bool host_armed, host_sticky;
static uint64_t host_calls, host_fail_at, host_failed;
static bool host_fails(void) {
    if (!host_armed)
        return false;
    host_calls++;
    if (host_fail_at && (host_calls == host_fail_at || (host_sticky && host_calls > host_fail_at))) {
        host_failed++;
        return true;
    }
    return false;
}
void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);
void *__wrap_malloc(size_t size) {
    return host_fails() ? NULL : __real_malloc(size);
}
void *__wrap_calloc(size_t n, size_t size) {
    return host_fails() ? NULL : __real_calloc(n, size);
}
void *__wrap_realloc(void *p, size_t size) {
    return host_fails() ? NULL : __real_realloc(p, size);
}

void *__wrap_aligned_alloc(size_t alignment, size_t size) {
    if (host_fails())
        return NULL;
    /* tree nodes only: block-record slabs come from aligned_alloc too */
    if (fail_pct && size == ((sizeof(ccai_bnode) + 63) & ~(size_t)63) &&
        (fail_pct >= 100 || tu_rand(&fail_rng) % 100 < fail_pct)) {
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
    /* on stderr, not cr_log_warn: Criterion exits non-zero on a warning */
    fprintf(stderr, "adversarial_index: seed %llu (replay it with CCA_ADV_SEED=%llu)\n", (unsigned long long)seed,
            (unsigned long long)seed);
    run_random(seed, 500 + (int)(seed % 1500), 1 + (int)(seed % 7), 20000, seed % 2);
}

/* ---- the public API against a brute-force best fit ------------------------ */

/* The block cca_alloc(size, s) in domain d must hand out, found by scanning
 * every segment (alloc.c steps 2 and 4, max_split 0, no arena): the smallest
 * free block of the request's pool (and of the medium pool for a large
 * request that fits a medium segment), key stream and domain, lowest
 * address among equal sizes. */
static const ccai_block *api_expect(const cca_allocator *a, const cca_domain *d, size_t size, cca_stream s) {
    const cca_config *c = &a->config;
    size_t rounded = (size + CCA_GRANULARITY - 1) / CCA_GRANULARITY * CCA_GRANULARITY;
    ccai_pool_kind pool = ccai_pool_of(a, rounded);
    cca_stream key = c->policy == CCA_POLICY_GREEDY ? NULL : s;
    bool medium_too = pool == CCAI_POOL_LARGE && c->medium_pool && c->policy == CCA_POLICY_GROWTH && !a->expandable &&
                      rounded <= c->medium_segment;
    const ccai_block *best = NULL;
    for (const ccai_segment *g = a->segments; g; g = g->next) {
        if (g->domain != d || g->stream != key || (g->pool != pool && !(medium_too && g->pool == CCAI_POOL_MEDIUM)))
            continue;
        for (const ccai_block *b = g->first; b; b = b->next)
            if (b->state == CCAI_FREE && b->size >= rounded &&
                (!best || b->size < best->size || (b->size == best->size && b->addr < best->addr)))
                best = b;
    }
    return best;
}

typedef struct api_live {
    void *p;
    size_t size, held;
    cca_domain *d;
} api_live;

static size_t api_size(void) {
    switch (rnd() % 6) {
    case 0: return 32 * KiB; /* ties */
    case 1: return (60 + rnd() % 8) * CCA_GRANULARITY - rnd() % 2;
    case 2: return 1 + rnd() % (64 * KiB);
    case 3: return MiB + ((int)(rnd() % 3) - 1) * (ptrdiff_t)CCA_GRANULARITY; /* small_max edge */
    case 4: return 2 * MiB + rnd() % (8 * MiB);
    default: return (size_t)1 << (10 + rnd() % 14);
    }
}

static void run_api(uint64_t seed, const char *conf, int steps) {
    rs = seed;
    fail_rng = seed ^ 0xda942042e4dd58b5ull;
    cr_log_info("adversarial API sequence, seed %llu, config '%s'", (unsigned long long)seed, conf);
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(4 * GiB, conf, &u, &a);
    enum { MAXL = 600 };
    api_live *live = calloc(MAXL, sizeof *live);
    int nlive = 0;
    static const cca_stream streams[] = {NULL, (cca_stream)0x1000, (cca_stream)0x2000, (cca_stream)0x3000};
    cca_domain *doms[3] = {NULL, NULL, NULL};
    cr_assert_eq(cca_domain_create(a, "adv1", &doms[1]), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_domain_create(a, "adv2", &doms[2]), CCA_OK, "%s", cca_last_error());
    size_t node_refusals = refused = 0;
    static const unsigned phases[] = {0, 20, 100, 5, 0, 50};
    for (int step = 0; step < steps; step++) {
        fail_pct = phases[(step / 500) % (sizeof phases / sizeof phases[0])];
        int op = (int)(rnd() % 100);
        if ((op < 55 && nlive < MAXL) || nlive == 0) {
            size_t size = api_size();
            cca_stream s = streams[rnd() % 4];
            int dn = (int)(rnd() % 3);
            cca_domain *d = doms[dn];
            const ccai_block *exp = api_expect(a, ccai_domain_lookup(a, d), size, s);
            uintptr_t exp_addr = exp ? exp->addr : 0;
            size_t segs = tu_stats(a).segments;
            void *p = NULL;
            cca_status st = d ? cca_alloc_in(a, d, size, s, &p) : cca_alloc(a, size, s, &p);
            cr_assert_eq(st, CCA_OK, "step %d: alloc %zu: %s", step, size, cca_last_error());
            if (exp_addr)
                cr_assert_eq((uintptr_t)p, exp_addr, "step %d: alloc %zu on %p in domain %d: got %p, best fit is %#lx",
                             step, size, (void *)s, dn, p, (unsigned long)exp_addr);
            else
                cr_assert_gt(tu_stats(a).segments, segs, "step %d: no free block fitted, so a new segment", step);
            live[nlive++] = (api_live){p, size, tu_block_size(a, p), d};
        } else if (op < 90) {
            int k = (int)(rnd() % (uint64_t)nlive);
            tu_free(a, live[k].p);
            live[k] = live[--nlive];
        } else if (op < 94) {
            size_t keep = tu_stats(a).reserved_bytes / (1 + rnd() % 4);
            cr_assert_eq(cca_trim(a, keep, NULL), CCA_OK, "step %d: trim: %s", step, cca_last_error());
        } else if (op < 95) {
            cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s", cca_last_error());
        } else {
            cca_reset_peak_stats(a);
        }
        tu_check(a);
        cca_stats st = tu_stats(a);
        size_t held = 0;
        for (int k = 0; k < nlive; k++)
            held += live[k].held;
        cr_assert_eq(st.allocated_bytes, held, "step %d: allocated_bytes", step);
        cr_assert_eq(st.active_blocks, (size_t)nlive, "step %d: active_blocks", step);
        cr_assert_eq(st.allocated_bytes + st.cached_bytes, st.reserved_bytes, "step %d: allocated + cached", step);
        node_refusals = refused;
    }
    fail_pct = 0;
    cr_log_info("refused %zu node allocations", node_refusals);
    cr_assert_gt(node_refusals, 0);
    for (int k = 0; k < nlive; k++)
        tu_free(a, live[k].p);
    tu_check(a);
    cr_assert_eq(cca_domain_destroy(a, doms[1], 0, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_domain_destroy(a, doms[2], 0, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s", cca_last_error());
    cca_stats end = tu_stats(a);
    cr_assert_eq(end.reserved_bytes, 0);
    cr_assert_eq(end.segments, 0);
    free(live);
    tu_teardown(a, u);
}

Test(adversarial_api, best_fit_is_exact_with_node_failures_growth) {
    run_api(0xbe5466cf34e90c6cull, "expandable:0", 1500);
}

Test(adversarial_api, best_fit_is_exact_with_node_failures_no_medium_pool) {
    run_api(0xc0ac29b7c97c50ddull, "expandable:0,medium_pool:0", 1500);
}

Test(adversarial_api, best_fit_is_exact_with_node_failures_expandable) {
    run_api(0xbe5466cf34e90c6cull, "expandable:1", 1500);
}

/* ---- host allocation failing at every call of a script --------------------- */

#define HPG ((size_t)64 * KiB)

typedef struct hslot {
    void *p;
    size_t size;
    uint64_t seed;
} hslot;

/* The accounts after every step: invariants; reserved = what the upstream
 * holds for us; expandable: mapped = the upstream's mapped bytes, and
 * reserved = mapped + classic segments; allocated + cached = reserved. */
static void host_agree(cca_allocator *a, cca_upstream *u, const char *what, int step) {
    cca_status st = cca_check_invariants(a);
    cr_assert_eq(st, CCA_OK, "%s step %d (fail at %llu): invariants: %s", what, step,
                 (unsigned long long)host_fail_at, cca_last_error());
    cca_stats s = tu_stats(a);
    cca_upstream_stats us = tu_upstream_stats(u);
    cr_assert_eq(s.reserved_bytes, us.bytes_in_use, "%s step %d (fail at %llu): reserved %zu, upstream holds %zu",
                 what, step, (unsigned long long)host_fail_at, s.reserved_bytes, us.bytes_in_use);
    cr_assert_eq(s.mapped_bytes, us.vm_mapped_bytes, "%s step %d (fail at %llu): mapped %zu, upstream %zu", what,
                 step, (unsigned long long)host_fail_at, s.mapped_bytes, us.vm_mapped_bytes);
    cr_assert_eq(s.allocated_bytes + s.cached_bytes, s.reserved_bytes, "%s step %d", what, step);
    cr_assert_eq(s.address_space_bytes, us.vm_reserved_bytes, "%s step %d", what, step);
}

/* One run of the script; host allocation call host_fail_at fails (0: none).
 * Returns the host allocation calls the script made. */
static uint64_t host_script(const char *conf, uint64_t fail_at, bool sticky) {
    cca_host_options o = {.capacity = 256 * MiB, .vm_granularity = HPG};
    cca_upstream *u = NULL;
    cr_assert_eq(cca_upstream_host_create_with(&o, &u), CCA_OK);
    char full[160];
    snprintf(full, sizeof full, "log_oom:0%s%s", conf[0] ? "," : "", conf);
    cca_allocator *a = tu_allocator(u, full);
    static const struct {
        char op; /* a: alloc slot size stream; f: free slot; r: record slot stream; t: trim keep-from-top pages; e: empty; d: domain alloc */
        int slot;
        size_t size;
        uintptr_t stream;
    } script[] = {
        {'a', 0, 100 * KiB, 0}, {'a', 1, 3 * MiB, 0},    {'a', 2, 700 * KiB, 0x10}, {'r', 1, 0, 0x10},
        {'a', 3, 512, 0},       {'a', 4, 32 * KiB, 0},   {'f', 0, 0, 0},            {'a', 5, 50 * KiB, 0},
        {'d', 6, 2 * MiB, 0},   {'f', 2, 0, 0},          {'t', 0, 1, 0},            {'f', 1, 0, 0},
        {'a', 7, 5 * MiB, 0x10}, {'a', 0, 96 * KiB, 0},  {'f', 4, 0, 0},            {'t', 0, 3, 0},
        {'d', 8, 64 * KiB, 0x20}, {'a', 9, 40 * MiB, 0}, {'f', 3, 0, 0},            {'e', 0, 0, 0},
        {'f', 5, 0, 0},         {'f', 6, 0, 0},          {'a', 2, 1 * MiB, 0x20},   {'f', 7, 0, 0},
        {'f', 9, 0, 0},         {'t', 0, 0, 0},          {'f', 8, 0, 0},            {'f', 0, 0, 0},
        {'e', 0, 0, 0},
    };
    hslot slots[10] = {{0}};
    cca_domain *d = NULL;
    if (a->config.policy != CCA_POLICY_GREEDY) /* greedy: one arena, no domains */
        cr_assert_eq(cca_domain_create(a, "hd", &d), CCA_OK, "%s", cca_last_error());
    host_calls = host_failed = 0;
    host_fail_at = fail_at;
    host_sticky = sticky;
    char what[128];
    snprintf(what, sizeof what, "'%s'%s", conf, sticky ? " sticky" : "");
    for (int i = 0; i < (int)(sizeof script / sizeof script[0]); i++) {
        hslot *h = &slots[script[i].slot];
        cca_status st = CCA_OK;
        cca_stats before = tu_stats(a);
        switch (script[i].op) {
        case 'a':
        case 'd': {
            void *p = (void *)1;
            host_armed = true;
            st = script[i].op == 'a' || !d ? cca_alloc(a, script[i].size, (cca_stream)script[i].stream, &p)
                                     : cca_alloc_in(a, d, script[i].size, (cca_stream)script[i].stream, &p);
            host_armed = false;
            if (st == CCA_OK) {
                cr_assert(h->p == NULL);
                *h = (hslot){p, script[i].size, (uint64_t)i * 77 + 1};
                tu_fill(p, h->size, h->seed);
            } else {
                cr_assert_eq(st, CCA_ERR_OUT_OF_MEMORY, "%s step %d (fail at %llu): alloc: %s", what, i,
                             (unsigned long long)fail_at, cca_last_error());
                cr_assert_null(p);
                cca_stats after = tu_stats(a);
                cr_assert_eq(after.allocated_bytes, before.allocated_bytes, "%s step %d: a failed alloc", what, i);
                cr_assert_eq(after.active_blocks, before.active_blocks, "%s step %d", what, i);
            }
            break;
        }
        case 'f':
            if (!h->p)
                break;
            cr_assert(tu_check_fill(h->p, h->size, h->seed), "%s step %d: block overwritten", what, i);
            host_armed = true;
            st = cca_free(a, h->p);
            host_armed = false;
            cr_assert_eq(st, CCA_OK, "%s step %d (fail at %llu): free: %s", what, i, (unsigned long long)fail_at,
                         cca_last_error());
            h->p = NULL;
            break;
        case 'r':
            if (!h->p)
                break;
            host_armed = true;
            st = cca_record_stream(a, h->p, (cca_stream)script[i].stream);
            host_armed = false;
            cr_assert(st == CCA_OK || st == CCA_ERR_OUT_OF_MEMORY, "%s step %d: record: %s", what, i,
                      cca_last_error());
            break;
        case 't': {
            size_t keep = before.reserved_bytes > script[i].size * HPG ? before.reserved_bytes - script[i].size * HPG : 0;
            if (script[i].size == 0)
                keep = before.reserved_bytes / 2;
            cca_release_report rep;
            host_armed = true;
            st = cca_trim(a, keep, &rep);
            host_armed = false;
            cr_assert_eq(st, CCA_OK, "%s step %d (fail at %llu): trim: %s", what, i, (unsigned long long)fail_at,
                         cca_last_error());
            cca_stats after = tu_stats(a);
            cr_assert_eq(rep.bytes_still_reserved, after.reserved_bytes, "%s step %d", what, i);
            cr_assert_eq(rep.bytes_released, before.reserved_bytes - after.reserved_bytes, "%s step %d", what, i);
            break;
        }
        default: {
            cca_release_report rep;
            host_armed = true;
            st = cca_empty_cache(a, &rep);
            host_armed = false;
            cr_assert_eq(st, CCA_OK, "%s step %d (fail at %llu): empty_cache: %s", what, i,
                         (unsigned long long)fail_at, cca_last_error());
            cca_stats after = tu_stats(a);
            /* expandable: live bytes and the free parts of their shared pages;
             * classic: live bytes and the free bytes of pinned segments */
            size_t kept = a->expandable ? rep.free_bytes_trapped : rep.free_bytes_pinned;
            cr_assert_eq(after.reserved_bytes, after.allocated_bytes + kept,
                         "%s step %d (fail at %llu): empty_cache left %zu reserved, %zu allocated, %zu kept", what,
                         i, (unsigned long long)fail_at, after.reserved_bytes, after.allocated_bytes, kept);
            break;
        }
        }
        host_agree(a, u, what, i);
        for (int k = 0; k < 10; k++)
            if (slots[k].p)
                cr_assert(tu_check_fill(slots[k].p, slots[k].size, slots[k].seed), "%s step %d: slot %d overwritten",
                          what, i, k);
    }
    uint64_t calls = host_calls;
    host_fail_at = 0;
    for (int k = 0; k < 10; k++)
        if (slots[k].p)
            tu_free(a, slots[k].p);
    if (d)
        cr_assert_eq(cca_domain_destroy(a, d, 0, NULL), CCA_OK, "%s: %s", what, cca_last_error());
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    cca_stats end = tu_stats(a);
    cr_assert_eq(end.reserved_bytes, 0, "%s (fail at %llu): %zu bytes stay reserved", what,
                 (unsigned long long)fail_at, end.reserved_bytes);
    tu_teardown(a, u);
    return calls;
}

static void host_sweep(const char *conf) {
    uint64_t calls = host_script(conf, 0, false);
    cr_log_info("'%s': %llu host allocation calls", conf, (unsigned long long)calls);
    cr_assert_gt(calls, 0);
    for (uint64_t k = 1; k <= calls + 1; k++) {
        host_script(conf, k, false);
        host_script(conf, k, true);
    }
}

Test(adversarial_hostoom, every_host_allocation_fails_expandable, .timeout = 120) {
    host_sweep("expandable:1");
}

Test(adversarial_hostoom, every_host_allocation_fails_classic, .timeout = 120) {
    host_sweep("expandable:0");
}

Test(adversarial_hostoom, every_host_allocation_fails_greedy_expandable, .timeout = 120) {
    host_sweep("policy:greedy,greedy_bytes:96m,expandable:1");
}

/* No host memory at all while an expandable segment grows by small steps:
 * sooner or later a split finds no block record (the slab is used up).
 * Every failure is an OOM that leaves the live blocks, the accounts and the
 * invariants intact; once host memory is back, the same requests succeed
 * and nothing was lost. */
Test(adversarial_hostoom, expandable_split_without_block_records) {
    cca_host_options o = {.capacity = 512 * MiB, .vm_granularity = HPG};
    cca_upstream *u = NULL;
    cr_assert_eq(cca_upstream_host_create_with(&o, &u), CCA_OK);
    cca_allocator *a = tu_allocator(u, "expandable:1,log_oom:0");
    enum { N = 600 };
    void **p = calloc(N, sizeof *p);
    int n = 0, fails = 0;
    /* the segment (its bins, a slab of block records) exists first */
    /* ... with pages mapped (the simulated device needs host memory to map) */
    void *w1 = tu_alloc(a, 1 * MiB, NULL), *w2 = tu_alloc(a, 300 * MiB, NULL), *w3 = tu_alloc(a, 1 * MiB, NULL);
    for (size_t k = 0; k < 40; k++) /* a small range of 40 MiB, each 1 MiB mapped */
        p[k] = tu_alloc(a, 1 * MiB, NULL);
    for (size_t k = 0; k < 40; k++)
        tu_free(a, p[k]);
    tu_free(a, w1);
    tu_free(a, w2);
    tu_free(a, w3);
    cca_stats warm = tu_stats(a);
    host_calls = host_failed = 0;
    host_fail_at = 1;
    host_sticky = true;
    for (int i = 0; i < N; i++) {
        size_t size = (size_t)(1 + i % 5) * 40 * KiB + (i % 3) * 2 * MiB;
        cca_stats before = tu_stats(a);
        host_armed = true;
        cca_status st = cca_alloc(a, size, NULL, &p[n]);
        host_armed = false;
        if (st == CCA_OK) {
            for (int k = 0; k < n; k++)
                cr_assert_neq(p[k], p[n], "alloc %d (%zu bytes) returned %p, live since allocation %d", i, size, p[n],
                              k);
            tu_fill(p[n], size, (uint64_t)n);
            n++;
        } else {
            cr_assert_eq(st, CCA_ERR_OUT_OF_MEMORY, "alloc %d: %s", i, cca_last_error());
            cca_stats after = tu_stats(a);
            cr_assert_eq(after.allocated_bytes, before.allocated_bytes);
            cr_assert_eq(after.active_blocks, before.active_blocks);
            if (getenv("ADV_DEBUG"))
                fprintf(stderr, "alloc %d (%zu): %s\n", i, size, cca_last_error());
            fails++;
        }
        host_agree(a, u, "no host memory", i);
        for (int k = 0; k < n; k++) {
            size_t bs = 0;
            cr_assert_eq(cca_block_size(a, p[k], &bs), CCA_OK, "after alloc %d (%s): allocation %d (%p) is not live: %s",
                         i, st == CCA_OK ? "ok" : "failed", k, p[k], cca_last_error());
        }
    }
    cr_assert_gt(fails, 0, "some split found no block record");
    cr_assert_eq(tu_stats(a).reserved_bytes, warm.reserved_bytes, "no page was mapped or unmapped");
    cr_assert_gt(n, 60, "blocks records on hand were used: %d allocations succeeded", n);
    host_fail_at = 0;
    for (int k = 0; k < n; k++) {
        cca_status fs = cca_free(a, p[k]);
        cr_assert_eq(fs, CCA_OK, "free of allocation %d of %d (%p): %s", k, n, p[k], cca_last_error());
    }
    host_agree(a, u, "all freed", -1);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    cr_assert_eq(tu_stats(a).reserved_bytes, 0);
    free(p);
    tu_teardown(a, u);
}

/* ---- ties: thousands of blocks of one size ------------------------------- */

/* 3000 blocks of one size, inserted in a scrambled address order, with
 * neighbours one granule smaller and larger in the same and the adjacent
 * classes: best fit hands them out strictly by address (the hint path
 * drops entries from leaves without a descent), then, with a third removed
 * at random and reinserted, still by address. Sizes at class and power-of-
 * two boundaries. */
Test(adversarial_index, ties_come_out_by_address_at_class_boundaries) {
    static const size_t sizes[] = {63 * CCA_GRANULARITY, 64 * CCA_GRANULARITY, 65 * CCA_GRANULARITY,
                                   (1u << 20) - CCA_GRANULARITY, 1u << 20, (1u << 20) + CCA_GRANULARITY,
                                   (size_t)1 << 40};
    enum { T = 3000 };
    rs = 0x6a09e667f3bcc908ull;
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
        size_t S = sizes[z];
        model m;
        model_init(&m, T + 200, 1);
        for (int i = 0; i < T; i++) { /* addresses scrambled by model_init */
            m.blocks[i].size = S;
            m.blocks[i].state = CCAI_FREE;
            ccai_free_index_insert(&m.ix, &m.blocks[i]);
            m_in(&m, i);
        }
        for (int i = T; i < T + 200; i++) { /* smaller and larger neighbours */
            m.blocks[i].size = i % 2 ? S - CCA_GRANULARITY : S + CCA_GRANULARITY;
            m.blocks[i].state = CCAI_FREE;
            ccai_free_index_insert(&m.ix, &m.blocks[i]);
            m_in(&m, i);
        }
        verify_full(&m, 0);
        for (int round = 0; round < 2; round++) {
            uintptr_t last = 0;
            for (int k = 0; k < T / 2; k++) {
                ccai_block *b = ccai_free_index_best_fit(&m.ix, NULL, S, SIZE_MAX);
                ccai_block *e = brute(&m, NULL, S, SIZE_MAX);
                cr_assert_eq(b, e, "size %zu round %d take %d", S, round, k);
                cr_assert_eq(b->size, S);
                cr_assert_gt(b->addr, last, "size %zu: ascending addresses", S);
                last = b->addr;
                ccai_free_index_remove(&m.ix, b);
                m_out(&m, (int)(b - m.blocks));
                if (k % 97 == 0)
                    verify_full(&m, k);
            }
            /* put everything back, a third removed at random first */
            for (int i = 0; i < T; i++)
                if (m.in[i] && rnd() % 3 == 0) {
                    ccai_free_index_remove(&m.ix, &m.blocks[i]);
                    m_out(&m, i);
                }
            for (int i = 0; i < T; i++)
                if (!m.in[i]) {
                    ccai_free_index_insert(&m.ix, &m.blocks[i]);
                    m_in(&m, i);
                }
            verify_full(&m, -1);
        }
        /* a request one granule above S: the larger neighbours, lowest address first */
        ccai_block *up = ccai_free_index_best_fit(&m.ix, NULL, S + 1, SIZE_MAX);
        cr_assert_eq(up, brute(&m, NULL, S + 1, SIZE_MAX));
        cr_assert_eq(up->size, S + CCA_GRANULARITY);
        cr_assert_null(ccai_free_index_best_fit(&m.ix, NULL, S + 1, S), "above max_size");
        model_fini(&m);
    }
}

/* ---- expandable: trim at page boundaries ---------------------------------- */

/* Pages backing (CCA_VM_PAGES: any run of pages unmaps). Eight 2 MiB
 * blocks on page boundaries, three of them freed (holes of 32
 * pages, no page shared with a live block, tail fully used): trim(keep) for
 * keep at, one byte around and one page around page boundaries unmaps
 * exactly ceil((reserved - keep) / page) pages, never a live one. */
Test(adversarial_expandable, trim_keep_at_page_boundaries_is_exact) {
    const size_t X = 2 * MiB;
    const size_t keeps_from_top[][2] = {
        /* {pages, bytes}: keep = reserved - pages*page - bytes (bytes may be "negative": 1 = +1) */
        {0, 0}, {0, 1}, {1, 0}, {1, 1}, {2, 0}, {31, 0}, {32, 0}, {33, 0}, {95, 0}, {96, 0}, {97, 0}, {200, 0},
    };
    for (size_t t = 0; t < sizeof keeps_from_top / sizeof keeps_from_top[0]; t++) {
        for (int plus = 0; plus < 2; plus++) {
            cca_host_options o = {.capacity = 64 * MiB, .vm_granularity = HPG, .vm_backing = CCA_VM_PAGES};
            cca_upstream *u = NULL;
            cr_assert_eq(cca_upstream_host_create_with(&o, &u), CCA_OK);
            cca_allocator *a = tu_allocator(u, "expandable:1,expandable_ahead:0");
            void *p[8];
            for (int i = 0; i < 8; i++)
                p[i] = tu_alloc(a, X, NULL);
            tu_free(a, p[1]);
            tu_free(a, p[3]);
            tu_free(a, p[5]);
            cca_stats s0 = tu_stats(a);
            cr_assert_eq(s0.reserved_bytes, 8 * X, "no page mapped ahead");
            size_t drop = keeps_from_top[t][0] * HPG, keep;
            if (keeps_from_top[t][1] && plus) /* one byte above the boundary */
                keep = s0.reserved_bytes - drop + 1;
            else if (keeps_from_top[t][1]) /* one byte below it */
                keep = s0.reserved_bytes - drop - 1;
            else
                keep = s0.reserved_bytes > drop ? s0.reserved_bytes - drop : 0;
            size_t over = s0.reserved_bytes > keep ? s0.reserved_bytes - keep : 0;
            size_t pages = (over + HPG - 1) / HPG;
            if (pages > 96) /* only the three holes are free */
                pages = 96;
            cca_release_report rep;
            cr_assert_eq(cca_trim(a, keep, &rep), CCA_OK, "%s", cca_last_error());
            cca_stats s1 = tu_stats(a);
            cr_assert_eq(s1.reserved_bytes, s0.reserved_bytes - pages * HPG,
                         "keep %zu (reserved %zu): %zu left, want %zu pages unmapped", keep, s0.reserved_bytes,
                         s1.reserved_bytes, pages);
            cr_assert_eq(rep.pages_unmapped, pages);
            cr_assert_eq(rep.bytes_released, pages * HPG);
            cr_assert_eq(rep.free_bytes_trapped, 0, "nothing shares a page");
            cr_assert_eq(s1.allocated_bytes, 5 * X);
            host_agree(a, u, "trim", (int)t);
            /* the holes come back, mapped again as needed, at the same addresses */
            void *q1 = tu_alloc(a, X, NULL), *q3 = tu_alloc(a, X, NULL), *q5 = tu_alloc(a, X, NULL);
            cr_assert_eq(q1, p[1]);
            cr_assert_eq(q3, p[3]);
            cr_assert_eq(q5, p[5]);
            cr_assert_eq(tu_stats(a).reserved_bytes, 8 * X);
            for (int i = 0; i < 8; i++)
                if (i != 1 && i != 3 && i != 5)
                    tu_free(a, p[i]);
            tu_free(a, q1);
            tu_free(a, q3);
            tu_free(a, q5);
            cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
            cr_assert_eq(tu_stats(a).reserved_bytes, 0);
            tu_teardown(a, u);
        }
    }
}
