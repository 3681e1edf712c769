/*
 * test_pages_oracle.c — expandable segments (expandable:1, the default;
 * kinds/pages.c) under the growth policy held, pointer for pointer and page
 * for page, to a reference model written from the docs (pages_model.c),
 * over seeded random programs. test_classic_oracle.c does the same for
 * classic segments.
 *
 * - Scope: policy:growth, one stream (NULL), no domains, on the simulated
 *   device over whole maps and over pages: granularities from 64 KiB to
 *   2 MiB, capacities that are no whole number of pages, small ones where
 *   OOMs, the retry and the small request's spill happen, a device below
 *   one 2 MiB page, max_reserved caps (one no multiple of the page),
 *   expandable_ahead 0, 0.005 (its cap under the 20 MiB least step) and
 *   0.25, an odd small-pool geometry, small_pool:0, and hold_peak:1 (with
 *   pages, whole maps and a cap, a small device).
 * - Ops: cca_alloc of sizes at every documented boundary (pages, the pool
 *   limit, the 20 MiB least map, the device and the cap, each +-1 and
 *   +-512; the overflow bound), sizes relative to a free block the model
 *   holds, random ones; cca_free; frees the allocator must refuse (double,
 *   interior) and of NULL; cca_trim to a random keep; cca_empty_cache.
 * - Checked after every op: the status (every OOM exactly where the model
 *   predicts it, with the message the docs quote for its reason), the exact
 *   pointer (the range's base, learned from its first block, plus the
 *   model's offset), cca_block_size, reserved / allocated / cached /
 *   requested bytes and their peaks, mapped bytes, address space, the
 *   largest mapped free stretch and fragmentation, block and segment
 *   counts, upstream allocs and frees, vm maps and unmaps and their pages,
 *   retries and OOMs, one log line per OOM (its figures), the device's free
 *   bytes and the upstream's own counts (maps, unmaps, refused maps, mapped
 *   and reserved bytes), and every field of each trim or empty-cache report.
 * - Seeds: 1, 2, 3 and one from time(), each printed; CCA_RANDOM_SEED runs
 *   just that one, CCA_ORACLE_CONFIG=i only the i-th configuration,
 *   CCA_ORACLE_TRACE=1 prints every step (oracle_harness.c). The programs
 *   must reach every rule that decides something (pm_reach_name). Cost:
 *   STEPS ops per seed and configuration, about 2.5 s in all under ASan.
 *
 * The rules the model encodes (docs/allocator.md unless named):
 *  P1  size rounds up to 512; size 0 is CCA_OK and NULL; a size above
 *      SIZE_MAX - 512 - max(segment_round, page) is CCA_ERR_INVALID_ARGUMENT;
 *      a request whose whole pages pass the device's total or max_reserved
 *      is an OOM at once, "it can never succeed" ("The life of one
 *      cca_alloc", steps 1 and 5a; ccalloc.h, cca_alloc). A range is the
 *      device (or max_reserved, if smaller) rounded up to the page
 *      ("Pages, not segments", opening; "Fuzzing the API").
 *  P2  two pools: small requests (<= small_max, small_pool:1) their own
 *      range, every other request the large one; best fit over a pool's
 *      free blocks, mapped or not (blocks tile the range), the smallest,
 *      the lowest address on a tie ("Pages, not segments", "Which
 *      segment"; step 4).
 *  P3  split: a small-range block when the remainder is at least 512, a
 *      large-range one when it is larger than small_max; also any remainder
 *      that reaches an unmapped page the request does not touch, decided
 *      before the pages are mapped (also through the retry); slack on
 *      mapped pages stays slack (step 6).
 *  P4  the pages a block lacks are mapped, one vm_map per run; a block
 *      lacking several runs (over whole maps, or one run of several maps)
 *      is mapped only when max_reserved and the device's free bytes (one
 *      mem_info, no map call) have room for all of them, and the answer
 *      serves the rest of the step; one call is not asked about: the
 *      device refuses it ("Pages, not segments", "Allocation", "The
 *      device's free memory"; "Whole maps", "Mapping").
 *  P5  a block at a range's tail whose request maps pages also maps ahead:
 *      expandable_ahead F times the range's mapped bytes, raised so the
 *      call maps at least 20 MiB with the request (small range:
 *      small_segment), capped at F x 1 GiB, whole pages rounded down; ahead
 *      pages the cap or the device refuses are left out and the request's
 *      pages mapped alone, when they added pages ("Allocation"; "Options",
 *      expandable_ahead; ccalloc.h, cca_config).
 *  P6  a new range only when no free block of the pool fits, and only when
 *      max_reserved and the device's free bytes have room for the request's
 *      pages (else the retry, nothing reserved); its first map leaves the
 *      ahead pages out at once when the device cannot hold them ("Which
 *      segment", "Allocation").
 *  P7  a page a live block touches stays mapped (over whole maps, every
 *      map such a page is in); its free bytes are trapped ("What it cannot
 *      return"; "Whole maps", "Release").
 *  P8  a small request whose range cannot start (no room for its pages)
 *      takes the smallest free block of the large range whose bytes it uses
 *      are mapped, split by the small pool's rule ("Which segment").
 *  P9  over whole maps a run is cut from its start into maps of at most
 *      128 MiB, one vm_map each, and only a whole map is unmapped ("Whole
 *      maps").
 *  P10 trim, empty-cache and the retry unmap the pages lying wholly inside
 *      free blocks (whole maps: the maps), the tails' first, then the other
 *      free pages, the newest range first, blocks in address order, each
 *      block's highest pages first, until reserved <= keep (pages: page by
 *      page, one call per run; whole maps: map by map); trim then releases
 *      the ranges left empty, whatever keep ("Pages, not segments",
 *      "Release"; ccalloc.h, cca_trim).
 *  P11 the retry: (b) releasable is every mapped page no live block keeps,
 *      need the request's block's pages that would stay unmapped (no block:
 *      a new range's pages); stop when nothing is releasable ("nothing
 *      cached to release"), the device plus it cannot hold the need, or the
 *      cap would be passed; (c) release the shortfall of the request's bytes
 *      plus a page, take; (d) release everything, take (step 5, "Retry",
 *      "The retry with expandable segments").
 *  P12 counters: reserved = mapped bytes, cached = reserved - allocated,
 *      largest_free_block the longest mapped stretch of a free block, a
 *      reservation or a map an upstream alloc, an unmap or a release an
 *      upstream free ("Pages, not segments", "Counting"; ccalloc.h,
 *      cca_stats, cca_release_report).
 *  P13 hold_peak:1: a request that needs new memory (no block, or its
 *      block's pages not all mapped) while something is cached is taken,
 *      then retried ((b) to (d), not counted in alloc_retries) with the
 *      reserved peak as the cap beside max_reserved, ahead pages left out
 *      where they would cross it; still short, everything cached is
 *      released when that can make room with the peak lifted, and the
 *      request is taken with its own pages only; refused by the device
 *      then, the retry (counted); peak_holds counts the requests that
 *      released (step 5, "Hold"; "Holding the peak"; "Ahead pages under
 *      hold_peak").
 */
#include "oracle_harness.h"
#include "pages_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

_Static_assert((int)PM_OOM_NEVER == ORACLE_OOM_NEVER && (int)PM_OOM_NOTHING_CACHED == ORACLE_OOM_NOTHING_CACHED &&
                   (int)PM_OOM_OTHER == ORACLE_OOM_OTHER,
               "the model names the reasons in the harness's order");

#define STEPS 2000

/* A size relative to a free block the model holds (not a range's tail):
 * the block, less 512 or small_max (the split thresholds), less a page,
 * jittered. */
static size_t near_free_block(uint64_t *rng, const pm_model *m) {
    size_t total = 0;
    for (size_t i = 0; i < m->nranges; i++)
        for (size_t j = 0; j + 1 < m->ranges[i].bl.n; j++)
            total += !m->ranges[i].bl.at[j].live;
    if (total == 0)
        return 0;
    size_t pick = tu_rand(rng) % total, bsize = 0;
    for (size_t i = 0; i < m->nranges; i++)
        for (size_t j = 0; j + 1 < m->ranges[i].bl.n; j++)
            if (!m->ranges[i].bl.at[j].live && pick-- == 0)
                bsize = m->ranges[i].bl.at[j].size;
    size_t less[] = {0, 512, m->c.small_max, m->c.small_max + 512, m->c.page};
    size_t l = less[tu_rand(rng) % 5];
    return oracle_jitter(rng, bsize > l ? bsize - l : bsize);
}

static size_t draw_size(uint64_t *rng, const pm_model *m) {
    const pm_config *c = &m->c;
    uint64_t r = tu_rand(rng) % 100;
    if (r < 2)
        return 0;
    if (r < 3) { /* near SIZE_MAX: the roundings overflow, or not */
        size_t bound = SIZE_MAX - 512 - (c->segment_round > c->page ? c->segment_round : c->page);
        size_t huge[] = {SIZE_MAX, SIZE_MAX - 511, bound + 1, bound, bound - 512, SIZE_MAX / 2};
        return huge[tu_rand(rng) % (sizeof huge / sizeof huge[0])];
    }
    size_t ceil = c->max_reserved && c->max_reserved < c->capacity ? c->max_reserved : c->capacity;
    if (r < 30) { /* the documented boundaries, +-1 and +-512 */
        size_t edges[] = {1,
                          512,
                          c->small_max,
                          c->page,
                          2 * c->page,
                          3 * c->page - 512,
                          20u << 20,
                          c->small_segment,
                          ceil,
                          ceil / 2,
                          ceil / 3,
                          ceil - c->page,
                          ceil / c->page * c->page};
        return oracle_jitter(rng, edges[tu_rand(rng) % (sizeof edges / sizeof edges[0])]);
    }
    if (r < 50) {
        size_t s = near_free_block(rng, m);
        if (s)
            return s;
    }
    r = tu_rand(rng) % 100;
    if (r < 50)
        return 1 + tu_rand(rng) % c->small_max;
    if (r < 85)
        return c->small_max + tu_rand(rng) % (4 * c->page + 1);
    return 1 + tu_rand(rng) % (ceil / 3 + 1);
}

typedef struct pages_ctx {
    pm_model *m;
    cca_allocator *a;
    cca_upstream *u;
} pages_ctx;

/* The model's figures for the harness's checks. */
static oracle_figures figures(const pm_model *m) {
    pm_stats w;
    pm_stats_get(m, &w);
    return (oracle_figures){w.reserved,         w.allocated,       w.cached,         w.largest_free,
                            w.segments,         w.active_blocks,   w.cached_blocks,  pm_device_free(m),
                            m->upstream_allocs, m->upstream_frees, m->alloc_retries, m->ooms};
}

static void check_state(void *ctx, oracle_run *r) {
    pages_ctx *x = ctx;
    const pm_model *m = x->m;
    cca_stats s;
    pm_stats w;
    pm_stats_get(m, &w);
    oracle_figures f = figures(m);
    oracle_check_stats(r, x->a, x->u, &f, &s);
    CHECK_EQ(r, s.vm_maps, m->vm_maps, "vm_maps");
    CHECK_EQ(r, s.vm_unmaps, m->vm_unmaps, "vm_unmaps");
    CHECK_EQ(r, s.pages_mapped, m->pages_mapped, "pages_mapped");
    CHECK_EQ(r, s.pages_unmapped, m->pages_unmapped, "pages_unmapped");
    CHECK_EQ(r, s.expandable_segments, w.segments, "expandable_segments");
    CHECK_EQ(r, s.address_space_bytes, w.address_space, "address_space_bytes");
    CHECK_EQ(r, s.mapped_bytes, w.reserved, "mapped_bytes");
    CHECK_EQ(r, s.page_size, m->c.page, "page_size");
    CHECK_EQ(r, s.vm_backing, m->c.whole_maps ? CCA_VM_WHOLE_MAPS : CCA_VM_PAGES, "vm_backing");
    CHECK_EQ(r, s.peak_holds, m->peak_holds, "peak_holds");
    cca_upstream_stats us;
    cr_assert_eq(cca_upstream_get_stats(x->u, &us), CCA_OK);
    CHECK_EQ(r, us.vm_map_calls, m->vm_maps, "the upstream's vm_map_calls");
    CHECK_EQ(r, us.vm_unmap_calls, m->vm_unmaps, "the upstream's vm_unmap_calls");
    CHECK_EQ(r, us.vm_failed_maps, m->failed_maps, "the upstream's vm_failed_maps");
    CHECK_EQ(r, us.vm_mapped_bytes, w.reserved, "the upstream's vm_mapped_bytes");
    CHECK_EQ(r, us.vm_reserved_bytes, w.address_space, "the upstream's vm_reserved_bytes");
    CHECK_EQ(r, us.bytes_in_use, w.reserved, "the upstream's bytes_in_use");
}

static void do_alloc(void *ctx, oracle_run *r, uint64_t *rng) {
    pages_ctx *x = ctx;
    pm_model *m = x->m;
    size_t size = draw_size(rng, m);
    pm_alloc_result want = pm_alloc(m, size);
    void *p = (void *)1;
    cca_status st = cca_alloc(x->a, size, NULL, &p);
    if (r->trace)
        fprintf(stderr, "  step %d: alloc(%zu) -> %s %p; model %s, range %llu + %zu, block %zu\n", r->step, size,
                cca_status_string(st), p, cca_status_string(want.status), (unsigned long long)want.range_id, want.off,
                want.size);
    oracle_figures f = figures(m);
    if (!oracle_alloc_status(r, size, st, p, want.status, want.oom, &f))
        return;
    pm_range *rg = pm_range_by_id(m, want.range_id);
    if (!rg->base) /* the range's first block: where the upstream put it */
        pm_set_base(m, want.range_id, (uintptr_t)p - want.off);
    cr_assert_eq((uintptr_t)p, rg->base + want.off,
                 "alloc(%zu): real at range offset %td, model range %llu + %zu" WHERE, size,
                 (ptrdiff_t)((uintptr_t)p - rg->base), (unsigned long long)want.range_id, want.off, WHERE_ARGS(r));
    oracle_keep(r, x->a, p, size, want.size, want.range_id, want.off);
}

static void do_free(void *ctx, oracle_run *r, size_t i) {
    pages_ctx *x = ctx;
    cr_assert(pm_free(x->m, r->live[i].id, r->live[i].off), "the model has no live block there" WHERE, WHERE_ARGS(r));
}

static int live_at(void *ctx, const void *p) {
    return pm_live_at(((pages_ctx *)ctx)->m, (uintptr_t)p);
}

static void do_trim(void *ctx, oracle_run *r, uint64_t *rng, int empty) {
    pages_ctx *x = ctx;
    pm_model *m = x->m;
    pm_stats w;
    pm_stats_get(m, &w);
    size_t keep = 0;
    if (!empty) {
        uint64_t k = tu_rand(rng) % 4;
        keep = k == 0 ? 0 : k == 1 ? w.reserved : tu_rand(rng) % (w.reserved + 4 * m->c.page);
        keep = k == 3 ? keep / m->c.page * m->c.page : keep; /* exactly at a page boundary, often */
    }
    cca_release_report want;
    pm_trim(m, keep, &want);
    oracle_release(r, x->a, keep, empty, &want);
}

static const oracle_ops pages_ops = {do_alloc, do_free, live_at, do_trim, check_state};

static uint64_t reach[PM_REACH_N];

/* A device and a configuration: the option string the allocator gets, and
 * the same values spelled out for the model (0: the default). */
typedef struct oracle_config {
    const char *name;
    size_t capacity, page; /* page 0: the device's default */
    int pages_backing;
    const char *conf;
    size_t small_max, small_segment, max_reserved;
    int no_small_pool;
    double ahead; /* < 0: the default */
    int hold;     /* hold_peak:1 */
} oracle_config;

static const oracle_config configs[] = {
    {.name = "64 MiB, 2 MiB pages, whole maps", .capacity = 64 * MiB, .conf = "", .ahead = -1},
    {.name = "64 MiB, 2 MiB pages, pages", .capacity = 64 * MiB, .pages_backing = 1, .conf = "", .ahead = -1},
    {.name = "44 MiB + 12 KiB, pages", .capacity = 44 * MiB + 12 * KiB, .pages_backing = 1, .conf = "", .ahead = -1},
    {.name = "44 MiB + 12 KiB, whole maps", .capacity = 44 * MiB + 12 * KiB, .conf = "", .ahead = -1},
    {.name = "48 MiB, 64 KiB pages, pages",
     .capacity = 48 * MiB,
     .page = 64 * KiB,
     .pages_backing = 1,
     .conf = "",
     .ahead = -1},
    {.name = "96 MiB, 256 KiB pages, whole maps, max_reserved 37 MiB + 512",
     .capacity = 96 * MiB,
     .page = 256 * KiB,
     .conf = "max_reserved:38797824",
     .max_reserved = 38797824,
     .ahead = -1},
    {.name = "64 MiB, pages, max_reserved 9 MiB",
     .capacity = 64 * MiB,
     .pages_backing = 1,
     .conf = "max_reserved:9M",
     .max_reserved = 9 * MiB,
     .ahead = -1},
    {.name = "1 MiB + 20 KiB (1 MiB pages), pages",
     .capacity = 1 * MiB + 20 * KiB,
     .pages_backing = 1,
     .conf = "",
     .ahead = -1},
    {.name = "3 MiB + 28 KiB, whole maps", .capacity = 3 * MiB + 28 * KiB, .conf = "", .ahead = -1},
    {.name = "320 MiB, 1 MiB pages, whole maps", .capacity = 320 * MiB, .page = 1 * MiB, .conf = "", .ahead = -1},
    {.name = "48 MiB, pages, expandable_ahead 0",
     .capacity = 48 * MiB,
     .pages_backing = 1,
     .conf = "expandable_ahead:0",
     .ahead = 0},
    {.name = "80 MiB, 512 KiB pages, expandable_ahead 0.25, odd small pool",
     .capacity = 80 * MiB,
     .page = 512 * KiB,
     .pages_backing = 1,
     .conf = "expandable_ahead:0.25,small_max:1000,small_segment:66048",
     .small_max = 1000,
     .small_segment = 66048,
     .ahead = 0.25},
    {.name = "64 MiB, 1 MiB pages, pages, expandable_ahead 0.005 (capped at 5 MiB)",
     .capacity = 64 * MiB,
     .page = 1 * MiB,
     .pages_backing = 1,
     .conf = "expandable_ahead:0.005",
     .ahead = 0.005},
    {.name = "48 MiB, pages, hold_peak:1",
     .capacity = 48 * MiB,
     .pages_backing = 1,
     .conf = "hold_peak:1",
     .ahead = -1,
     .hold = 1},
    {.name = "64 MiB, 256 KiB pages, whole maps, hold_peak:1, max_reserved 37 MiB + 512",
     .capacity = 64 * MiB,
     .page = 256 * KiB,
     .conf = "hold_peak:1,max_reserved:38797824",
     .max_reserved = 38797824,
     .ahead = -1,
     .hold = 1},
    {.name = "20 MiB + 12 KiB, 128 KiB pages, pages, hold_peak:1, expandable_ahead 0.25",
     .capacity = 20 * MiB + 12 * KiB,
     .page = 128 * KiB,
     .pages_backing = 1,
     .conf = "hold_peak:1,expandable_ahead:0.25",
     .ahead = 0.25,
     .hold = 1},
    {.name = "48 MiB, whole maps, small_pool:0",
     .capacity = 48 * MiB,
     .conf = "small_pool:0",
     .no_small_pool = 1,
     .ahead = -1},
};

static void run(size_t config, uint64_t seed, int trace) {
    const oracle_config *oc = &configs[config];
    char conf[256];
    snprintf(conf, sizeof conf, "expandable:1,policy:growth,log_oom:1%s%s", oc->conf[0] ? "," : "", oc->conf);
    cca_upstream *u = tu_vm_device_backed(oc->capacity, oc->page, oc->pages_backing ? CCA_VM_PAGES : CCA_VM_WHOLE_MAPS);
    cca_allocator *a = tu_allocator(u, conf);
    size_t page;
    cr_assert_eq(cca_upstream_vm_granularity(u, &page), CCA_OK);
    pm_config c;
    pm_config_default(&c, oc->capacity, page, !oc->pages_backing);
    c.small_max = oc->small_max ? oc->small_max : c.small_max;
    c.small_segment = oc->small_segment ? oc->small_segment : c.small_segment;
    c.max_reserved = oc->max_reserved;
    c.small_pool = !oc->no_small_pool;
    c.ahead = oc->ahead >= 0 ? oc->ahead : c.ahead;
    c.hold = oc->hold;
    pm_model m;
    pm_init(&m, &c);
    pages_ctx x = {&m, a, u};
    oracle_program("test_pages_oracle", oc->name, seed, trace, a, STEPS, &pages_ops, &x);
    oracle_reached(m.reach, reach, PM_REACH_N, pm_reach_name);
    pm_fini(&m);
    tu_teardown(a, u);
}

Test(pages_oracle, exact_pointers_pages_and_counts_against_the_documented_rules, .timeout = 300) {
    oracle_seeds(sizeof configs / sizeof configs[0], run, reach, PM_REACH_N, pm_reach_name);
}
