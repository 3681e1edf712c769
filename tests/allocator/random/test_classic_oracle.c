/*
 * test_classic_oracle.c — classic segments under the growth policy held,
 * pointer for pointer, to a reference model written from the docs
 * (classic_model.c), over seeded random programs.
 *
 * - Scope: expandable:0, policy:growth, one stream (NULL), no domains, no
 *   hold, on the simulated device: a large capacity, small ones where OOMs
 *   and the retry happen (one no whole number of 2 MiB, one no whole number
 *   of host pages, one below small_segment), two max_reserved caps (one no
 *   multiple of 512), an odd pool geometry, small_pool:0, medium_pool:0 and
 *   max_split.
 * - Ops: cca_alloc of sizes at every documented boundary of the geometry
 *   (pool limits, segment sizes, the split thresholds of the blocks the
 *   model holds free, each +-1 and +-512; the overflow bound; the device),
 *   random ones in each pool; cca_free; frees the allocator must refuse
 *   (double, interior) and of NULL; cca_trim to a random keep;
 *   cca_empty_cache.
 * - Checked after every op: the status (every OOM exactly where the model
 *   predicts it, with the message the docs quote for its reason), the exact
 *   pointer (the model's segment, by creation order, placed where the
 *   device's first fit puts it, plus the block's offset), cca_block_size,
 *   reserved / allocated / cached / requested bytes and their peaks, the
 *   largest free block and fragmentation, block and segment counts and
 *   peaks, call, retry and OOM counts, one log line per OOM, the device's
 *   free bytes and the upstream's own counts (refused allocs included), and
 *   every field of each trim or empty-cache report.
 * - Seeds: 1, 2, 3 and one from time(), each printed; CCA_RANDOM_SEED runs
 *   just that one, CCA_ORACLE_CONFIG=i only the i-th configuration,
 *   CCA_ORACLE_TRACE=1 prints every step (oracle_harness.c: the loop and
 *   the checks both oracles share). Cost: STEPS ops per seed and
 *   configuration, about 2 s in all under ASan.
 *
 * The rules the model encodes (docs/allocator.md unless named):
 *  R1  size rounds up to 512 (CCA_GRANULARITY); size 0 is CCA_OK and NULL;
 *      a size above SIZE_MAX - 512 - segment_round is
 *      CCA_ERR_INVALID_ARGUMENT ("The life of one cca_alloc", step 1;
 *      ccalloc.h, cca_alloc).
 *  R2  pools by the rounded size: <= small_max (1 MiB) small, < large_min
 *      (10 MiB) medium, else large; small_pool:0 serves small requests from
 *      the medium pool (step 2; "Options").
 *  R3  a small request takes only small-pool blocks, a medium one only
 *      medium ones (medium_pool:0: large ones too), a large one a large or a
 *      medium block (step 2; "Options", medium_pool).
 *  R4  best fit: the smallest free block that fits, the lowest address
 *      among equal sizes (step 4; ccalloc.h, cca_alloc), the block taken
 *      from its start ("Reading the code": the remainder is split off).
 *  R5  a free merges the block with its free neighbours in its segment
 *      (cca_free, after step 7; invariant I2). A pointer that starts no
 *      live block is CCA_ERR_INVALID_POINTER, nothing changed; NULL is a
 *      no-op (ccalloc.h, cca_free).
 *  R6  split: a small-pool block when the remainder is at least 512 bytes,
 *      a medium or large one when it is larger than small_max; else the
 *      remainder stays as slack in the block, counted in allocated_bytes and
 *      in cca_block_size (step 6; ccalloc.h, cca_block_size).
 *  R7  growth: a new segment of small_segment (2 MiB), medium_segment
 *      (20 MiB) then, if that does not fit under the cap or on the device,
 *      the request rounded up to segment_round (2 MiB), or for a large
 *      request that rounding; a least segment over the device's total or
 *      max_reserved shrinks to it rounded down to 512, never below the
 *      request (medium_segment itself does not shrink: it is no least
 *      segment); a request whose least segment is still over it is an OOM
 *      at once, "it can never succeed", nothing released; a new segment
 *      serves the request that reserved it; over the cap the device is not
 *      asked (step 5, "Grow" and "(5a) impossible").
 *  R8  the one retry when new memory is refused: nothing pending on one
 *      stream, so (a) is empty; (b) stop if no free segment is cached
 *      ("nothing cached to release"), if the device's free bytes plus every
 *      free segment cannot hold the least segment, or if what stays reserved
 *      plus it passes max_reserved; (c) the shortfall (what the device's
 *      free bytes lack, or what would pass max_reserved, the larger),
 *      released largest first until reserved_bytes has fallen by it, then a
 *      take, skipped when the shortfall is all that is reserved; (d) release
 *      every other free segment, take once more, also when nothing was
 *      released; else OOM, what was released staying released (step 5,
 *      "Retry", "Out of memory"). alloc_retries
 *      counts each retry begun, ooms each OOM, each with one log line.
 *  R9  cca_trim(keep) releases wholly free segments largest first, equal
 *      sizes lowest address first, until reserved_bytes <= keep; the retry
 *      releases in the same order; cca_empty_cache is trim(0) ("Giving
 *      memory back"; ccalloc.h, cca_trim).
 *  R10 the report: bytes and segments released, reserved afterwards, free
 *      segments kept, segments pinned by live blocks with their live and
 *      free bytes, nothing of pages or sleep (ccalloc.h, cca_release_report).
 *  R11 the simulated device places each allocation first fit by address in
 *      one range of its capacity, sizes rounded up to the host page, and
 *      mem_info's free bytes are the capacity less those ("Upstreams",
 *      host-simulated; ccalloc.h, cca_upstream_host_create).
 *  R12 the counters as ccalloc.h's cca_stats defines them: peaks are the
 *      highest value seen, requested_bytes what callers asked for,
 *      fragmentation 1 - largest_free_block / cached_bytes (0 if none).
 *  R13 max_split: a free block above it is never cut; a request below it
 *      never takes one, a request of at least it only when the block is
 *      less than medium_segment larger (step 6; "Options", max_split).
 */
#include "classic_model.h"
#include "oracle_harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

_Static_assert((int)CM_OOM_NEVER == ORACLE_OOM_NEVER && (int)CM_OOM_NOTHING_CACHED == ORACLE_OOM_NOTHING_CACHED &&
                   (int)CM_OOM_OTHER == ORACLE_OOM_OTHER,
               "the model names the reasons in the harness's order");

#define STEPS 4000

/* A size relative to a free block the model holds: the block itself, and
 * its split thresholds (remainder 512, small_max) +-512 and +-1. */
static size_t near_free_block(uint64_t *rng, const cm_model *m) {
    size_t total = 0;
    for (size_t i = 0; i < m->nsegs; i++)
        for (size_t j = 0; j < m->segs[i].bl.n; j++)
            total += !m->segs[i].bl.at[j].live;
    if (total == 0)
        return 0;
    size_t pick = tu_rand(rng) % total, bsize = 0;
    for (size_t i = 0; i < m->nsegs; i++)
        for (size_t j = 0; j < m->segs[i].bl.n; j++)
            if (!m->segs[i].bl.at[j].live && pick-- == 0)
                bsize = m->segs[i].bl.at[j].size;
    static const size_t less[] = {0, 512, 1 * MiB, 1 * MiB + 512, 1 * MiB - 512};
    size_t l = less[tu_rand(rng) % 5];
    return oracle_jitter(rng, bsize > l ? bsize - l : bsize);
}

static size_t draw_size(uint64_t *rng, const cm_model *m) {
    uint64_t r = tu_rand(rng) % 100;
    if (r < 2)
        return 0;
    if (r < 3) { /* near SIZE_MAX: the roundings to 512 and to a segment overflow, or not */
        size_t bound = SIZE_MAX - 512 - m->c.segment_round;
        size_t huge[] = {SIZE_MAX,    SIZE_MAX - 511, SIZE_MAX - 2 * MiB + 1, bound + 1, bound, bound - 1,
                         bound - 512, SIZE_MAX / 2};
        return huge[tu_rand(rng) % (sizeof huge / sizeof huge[0])];
    }
    if (r < 4)
        return oracle_jitter(rng, m->c.capacity);
    if (r < 30) { /* the documented boundaries of this geometry, +-1 and +-512 */
        const cm_config *c = &m->c;
        size_t ceil = c->max_reserved && c->max_reserved < c->capacity ? c->max_reserved : c->capacity;
        size_t edges[] = {1,
                          512,
                          c->small_max,
                          c->small_segment,
                          c->small_segment - c->small_max,
                          c->medium_segment - c->small_max,
                          c->medium_segment,
                          c->large_min,
                          c->segment_round,
                          c->large_min + c->segment_round,
                          (c->large_min / c->segment_round + 2) * c->segment_round - c->small_max,
                          ceil,
                          ceil / 2,
                          c->max_split ? c->max_split : 512,
                          c->max_split + c->medium_segment,
                          c->max_split + 3 * c->segment_round / 2};
        return oracle_jitter(rng, edges[tu_rand(rng) % (sizeof edges / sizeof edges[0])]);
    }
    if (r < 55) {
        size_t s = near_free_block(rng, m);
        if (s)
            return s;
    }
    r = tu_rand(rng) % 100;
    if (r < 45) /* each pool */
        return 1 + tu_rand(rng) % m->c.small_max;
    if (r < 80)
        return m->c.small_max + tu_rand(rng) % (m->c.large_min - m->c.small_max);
    return m->c.large_min + tu_rand(rng) % (m->c.capacity / 3);
}

typedef struct classic_ctx {
    cm_model *m;
    cca_allocator *a;
    cca_upstream *u;
    uintptr_t base; /* where the device's range starts: learned from its first block */
} classic_ctx;

/* The model's figures for the harness's checks. */
static oracle_figures figures(const cm_model *m) {
    cm_stats w;
    cm_stats_get(m, &w);
    return (oracle_figures){w.reserved,         w.allocated,       w.cached,         w.largest_free,
                            w.segments,         w.active_blocks,   w.cached_blocks,  m->c.capacity - cm_device_used(m),
                            m->upstream_allocs, m->upstream_frees, m->alloc_retries, m->ooms};
}

static void check_state(void *ctx, oracle_run *r) {
    classic_ctx *x = ctx;
    const cm_model *m = x->m;
    cca_stats s;
    oracle_figures f = figures(m);
    oracle_check_stats(r, x->a, x->u, &f, &s);
    cca_upstream_stats us;
    cr_assert_eq(cca_upstream_get_stats(x->u, &us), CCA_OK);
    CHECK_EQ(r, us.alloc_calls, m->upstream_allocs, "the upstream's alloc_calls");
    CHECK_EQ(r, us.failed_allocs, m->device_refusals, "the upstream's failed_allocs");
    CHECK_EQ(r, us.free_calls, m->upstream_frees, "the upstream's free_calls");
    CHECK_EQ(r, us.allocations, f.segments, "the upstream's allocations");
}

static void do_alloc(void *ctx, oracle_run *r, uint64_t *rng) {
    classic_ctx *x = ctx;
    cm_model *m = x->m;
    size_t size = draw_size(rng, m);
    cm_alloc_result want = cm_alloc(m, size);
    void *p = (void *)1;
    cca_status st = cca_alloc(x->a, size, NULL, &p);
    if (r->trace)
        fprintf(stderr, "  step %d: alloc(%zu) -> %s at %zu; model %s, segment %llu + %zu (device %zu), block %zu\n",
                r->step, size, cca_status_string(st), p && x->base ? (size_t)((uintptr_t)p - x->base) : 0,
                cca_status_string(want.status), (unsigned long long)want.seg_id, want.off, want.dev_addr, want.size);
    oracle_figures f = figures(m);
    if (!oracle_alloc_status(r, size, st, p, want.status, want.oom, &f))
        return;
    if (x->base == 0) /* the first block the device ever placed: where its range starts */
        x->base = (uintptr_t)p - want.dev_addr;
    cr_assert_eq((uintptr_t)p, x->base + want.dev_addr,
                 "alloc(%zu): real at device offset %zu, model segment %llu (device offset %zu) + %zu" WHERE, size,
                 (size_t)((uintptr_t)p - x->base), (unsigned long long)want.seg_id,
                 cm_segment_by_id(m, want.seg_id)->dev_off, want.off, WHERE_ARGS(r));
    oracle_keep(r, x->a, p, size, want.size, want.seg_id, want.off);
}

static void do_free(void *ctx, oracle_run *r, size_t i) {
    classic_ctx *x = ctx;
    cr_assert(cm_free(x->m, r->live[i].id, r->live[i].off), "the model has no live block there" WHERE, WHERE_ARGS(r));
}

static int live_at(void *ctx, const void *p) {
    classic_ctx *x = ctx;
    return cm_live_at(x->m, (size_t)((uintptr_t)p - x->base));
}

static void do_trim(void *ctx, oracle_run *r, uint64_t *rng, int empty) {
    classic_ctx *x = ctx;
    cm_stats w;
    cm_stats_get(x->m, &w);
    size_t keep = 0;
    if (!empty) {
        uint64_t k = tu_rand(rng) % 4;
        keep = k == 0 ? 0 : k == 1 ? w.reserved : tu_rand(rng) % (w.reserved + 4 * MiB);
        keep = k == 3 ? keep / (2 * MiB) * (2 * MiB) : keep; /* exactly at a segment boundary, often */
    }
    cca_release_report want;
    cm_trim(x->m, keep, &want); /* nothing of expandable segments or sleeping domains: zeros */
    oracle_release(r, x->a, keep, empty, &want);
}

static const oracle_ops classic_ops = {do_alloc, do_free, live_at, do_trim, check_state};

/* Over the fixed seeds, how often each rule decided (cm_model's order). */
static uint64_t reach[CM_REACH_N];

/* A device and a pool geometry: the option string the allocator gets, and
 * the same values spelled out for the model (0: the default). */
typedef struct oracle_config {
    const char *name;
    size_t capacity;
    const char *conf;
    size_t small_max, small_segment, medium_segment, large_min, segment_round, max_reserved;
    int no_small_pool, no_medium_pool;
    size_t max_split;
} oracle_config;

/* 256 MiB: OOMs only at the far end; 48 MiB: the retry often; 44 MiB + 12
 * KiB: no whole number of 2 MiB segments, so least segments shrink; then a
 * geometry of odd sizes: a small_max that is no multiple of 512, segments
 * that are no whole number of host pages (the device rounds them up). */
static const oracle_config configs[] = {
    {.name = "256 MiB", .capacity = 256 * MiB, .conf = ""},
    {.name = "48 MiB", .capacity = 48 * MiB, .conf = ""},
    {.name = "44 MiB + 12 KiB", .capacity = 44 * MiB + 12 * KiB, .conf = ""},
    {.name = "128 MiB, max_reserved 37 MiB + 512",
     .capacity = 128 * MiB,
     .conf = "max_reserved:38797824",
     .max_reserved = 38797824},
    {.name = "1 MiB + 20 KiB", .capacity = 1 * MiB + 20 * KiB, .conf = ""},
    {.name = "44 MiB + 13.5 KiB", .capacity = 44 * MiB + 13 * KiB + 512, .conf = ""},
    {.name = "64 MiB, max_reserved 3 MiB + 700",
     .capacity = 64 * MiB,
     .conf = "max_reserved:3146428",
     .max_reserved = 3146428},
    {.name = "40 MiB, odd geometry",
     .capacity = 40 * MiB,
     .conf = "small_max:1000,small_segment:66048,medium_segment:3146240,large_min:1049088,segment_round:1049088",
     .small_max = 1000,
     .small_segment = 66048,
     .medium_segment = 3146240,
     .large_min = 1049088,
     .segment_round = 1049088},
    {.name = "48 MiB, small_pool:0", .capacity = 48 * MiB, .conf = "small_pool:0", .no_small_pool = 1},
    {.name = "48 MiB, medium_pool:0", .capacity = 48 * MiB, .conf = "medium_pool:0", .no_medium_pool = 1},
    {.name = "96 MiB, max_split 24 MiB", .capacity = 96 * MiB, .conf = "max_split:24M", .max_split = 24 * MiB},
    {.name = "160 MiB, max_split 21 MiB + 512",
     .capacity = 160 * MiB,
     .conf = "max_split:22020608",
     .max_split = 22020608},
    {.name = "64 MiB, both pools off",
     .capacity = 64 * MiB,
     .conf = "small_pool:0,medium_pool:0",
     .no_small_pool = 1,
     .no_medium_pool = 1},
};

static void run(size_t config, uint64_t seed, int trace) {
    const oracle_config *oc = &configs[config];
    char conf[256];
    snprintf(conf, sizeof conf, "expandable:0,policy:growth,log_oom:1%s%s", oc->conf[0] ? "," : "", oc->conf);
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(oc->capacity, conf, &u, &a);
    cm_config c;
    cm_config_default(&c, oc->capacity, (size_t)sysconf(_SC_PAGESIZE));
    c.small_max = oc->small_max ? oc->small_max : c.small_max;
    c.small_segment = oc->small_segment ? oc->small_segment : c.small_segment;
    c.medium_segment = oc->medium_segment ? oc->medium_segment : c.medium_segment;
    c.large_min = oc->large_min ? oc->large_min : c.large_min;
    c.segment_round = oc->segment_round ? oc->segment_round : c.segment_round;
    c.max_reserved = oc->max_reserved;
    c.small_pool = !oc->no_small_pool;
    c.medium_pool = !oc->no_medium_pool;
    c.max_split = oc->max_split;
    cm_model m;
    cm_init(&m, &c);
    classic_ctx x = {&m, a, u, 0};
    oracle_program("test_classic_oracle", oc->name, seed, trace, a, STEPS, &classic_ops, &x);
    oracle_reached(m.reach, reach, CM_REACH_N, cm_reach_name);
    cm_fini(&m);
    tu_teardown(a, u);
}

Test(classic_oracle, exact_pointers_and_counts_against_the_documented_rules, .timeout = 300) {
    oracle_seeds(sizeof configs / sizeof configs[0], run, reach, CM_REACH_N, cm_reach_name);
}
