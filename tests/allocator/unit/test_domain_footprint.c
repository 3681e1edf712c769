/*
 * test_domain_footprint.c — allocator/src/domain.c: footprints
 * (cca_domain_reserve), and the cached memory of domains released by trim,
 * empty-cache and the OOM retry.
 * Most tests run twice (TEST_BOTH, domain_suite.h): with classic segments
 * and with expandable segments (expandable:1 over the simulated device's
 * vm ops, 64 KiB pages).
 *
 *   footprint   cca_domain_reserve: refusals (0, absurd sizes, a second
 *               arena, max_reserved), rounding, the arena first at any size
 *               (even before an exact fit cached in growth), and a second
 *               run of a recorded workload with zero upstream calls.
 *   cache       trim, empty-cache and the OOM retry release every domain's
 *               cached memory; releasing a greedy allocator's default
 *               domain gives its arena back and it still serves.
 *
 * The other suites of domain.c: test_domain_lifecycle.c, test_domain_stats.c,
 * test_domain_release.c.
 */
#include "domain_suite.h"

/* ---- footprint: cca_domain_reserve --------------------------------------------------- */

TEST_BOTH(reserve_refuses_bad_sizes_and_a_second_arena) {
    cca_upstream *u = device(256 * MiB);
    cca_allocator *a = make(m, u, NULL);
    cca_domain *Y = dom(a, "Y");
    cca_domain *doms[] = {Y};
    size_t unit = m->expandable ? PG : CCA_GRANULARITY;
    cca_stats before = tu_stats(a);
    cca_upstream_stats us = tu_upstream_stats(u);
    cr_assert_eq(cca_domain_reserve(a, Y, 0), CCA_ERR_INVALID_ARGUMENT, "0 bytes");
    cr_assert_eq(cca_domain_reserve(NULL, Y, MiB), CCA_ERR_INVALID_ARGUMENT, "NULL allocator");
    const size_t absurd[] = {SIZE_MAX, SIZE_MAX - CCA_GRANULARITY + 2, SIZE_MAX / 2 + 1, (size_t)1 << 62,
                             256 * MiB + 1, 1 * GiB};
    for (size_t i = 0; i < sizeof absurd / sizeof absurd[0]; i++) {
        cca_status st = cca_domain_reserve(a, Y, absurd[i]);
        cr_assert(st == CCA_ERR_INVALID_ARGUMENT || st == CCA_ERR_OUT_OF_MEMORY, "reserve(%zu): %s", absurd[i],
                  cca_status_string(st));
        tu_assert_intact(a, &before, "refused reserve");
        cr_assert_eq(dst(a, Y).reserved_bytes, 0);
    }
    cr_assert_eq(tu_upstream_stats(u).bytes_in_use, us.bytes_in_use);
    /* refusals leave the domain free to take an arena */
    size_t ask = 5 * MiB + 1, got = round_up(ask, unit);
    cr_assert_eq(cca_domain_reserve(a, Y, ask), CCA_OK, "%s", cca_last_error());
    cca_domain_stats sY = dst(a, Y);
    cr_assert_eq(sY.reserved_bytes, got, "%zu bytes rounded to %zu: reserved %zu", ask, got, sY.reserved_bytes);
    cr_assert_eq(sY.segments, 1, "one arena");
    cr_assert_eq(sY.allocated_bytes, 0);
    cr_assert_eq(tu_upstream_stats(u).bytes_in_use, us.bytes_in_use + got);
    cr_assert_eq(tu_stats(a).reserved_bytes, before.reserved_bytes + got);
    agree(a, u, doms, 1, "arena");
    before = tu_stats(a);
    cr_assert_eq(cca_domain_reserve(a, Y, MiB), CCA_ERR_INVALID_ARGUMENT, "a second arena");
    cr_assert_eq(cca_domain_reserve(a, Y, ask), CCA_ERR_INVALID_ARGUMENT, "a second arena of the same size");
    tu_assert_intact(a, &before, "refused second arena");
    /* a request in Y is served from the arena: no upstream call */
    cca_domain_stats s1 = dst(a, Y);
    blk b = mk(a, Y, 1 * MiB, S0, 5, true);
    blk c = mk(a, Y, 2 * MiB, S1, 6, true);
    cca_domain_stats s2 = dst(a, Y);
    cr_assert_eq(s2.upstream_allocs, s1.upstream_allocs, "served from the arena");
    cr_assert_eq(s2.reserved_bytes, got);
    if (!m->expandable) { /* classic: a partly used arena is not released (expandable may unmap free pages) */
        cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
        cr_assert_eq(dst(a, Y).reserved_bytes, got, "a live block keeps the arena");
    }
    ASSERT_INTACT(b, true, "arena block");
    ASSERT_INTACT(c, true, "arena block");
    tu_free(a, b.p), tu_free(a, c.p);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(dst(a, Y).reserved_bytes, 0, "a wholly free arena goes with empty-cache");
    agree(a, u, doms, 1, "arena emptied");
    /* and with the domain's release */
    cca_domain *Z = dom(a, "Z");
    cca_domain *doms2[] = {Y, Z};
    cr_assert_eq(cca_domain_reserve(a, Z, 3 * MiB), CCA_OK, "%s", cca_last_error());
    void *p = in(a, Z, 100, S0);
    tu_free(a, p);
    us = tu_upstream_stats(u);
    cca_domain_report r;
    memset(&r, 0, sizeof r);
    cr_assert_eq(cca_domain_release(a, Z, 0, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_geq(r.bytes_released, 3 * MiB);
    cr_assert_eq(dst(a, Z).reserved_bytes, 0);
    cr_assert_eq(tu_upstream_stats(u).bytes_in_use, us.bytes_in_use - r.bytes_released);
    agree(a, u, doms2, 2, "arena released with its domain");
    finish(a, u);
}

TEST_BOTH(reserve_and_growth_respect_max_reserved) {
    cca_upstream *u = device(256 * MiB);
    cca_allocator *a = make(m, u, "max_reserved:16M");
    cca_domain *Y = dom(a, "Y"), *Z = dom(a, "Z");
    cca_domain *doms[] = {Y, Z};
    cca_status st = cca_domain_reserve(a, Y, 20 * MiB);
    cr_assert(st == CCA_ERR_OUT_OF_MEMORY || st == CCA_ERR_INVALID_ARGUMENT, "above max_reserved: %s",
              cca_status_string(st));
    cr_assert_eq(tu_stats(a).reserved_bytes, 0);
    cr_assert_eq(cca_domain_reserve(a, Y, 8 * MiB), CCA_OK, "%s", cca_last_error());
    void *p[40];
    int n = 0;
    for (; n < 40; n++) {
        void *x = NULL;
        st = cca_alloc_in(a, Z, 512 * KiB, S0, &x);
        cr_assert_leq(tu_stats(a).reserved_bytes, 16 * MiB, "max_reserved crossed: %zu", tu_stats(a).reserved_bytes);
        agree(a, u, doms, 2, "under the cap");
        if (st != CCA_OK) {
            cr_assert_eq(st, CCA_ERR_OUT_OF_MEMORY, "%s", cca_status_string(st));
            break;
        }
        p[n] = x;
    }
    cr_assert_lt(n, 40, "the cap was reached");
    cr_assert_eq(dst(a, Z).alloc_calls, (uint64_t)n, "a refused request is no alloc call");
    cr_assert_eq(dst(a, Z).active_blocks, (size_t)n);
    for (int i = 0; i < n; i++)
        tu_free(a, p[i]);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    finish(a, u);
}

/* "Requests in d are served from the arena first (best fit at any size, any
 * stream), then from growth": a tiny and a large request both come from
 * the arena, and an arena block wins over an exact fit cached in growth. */
TEST_BOTH(the_arena_serves_first_at_any_size) {
    cca_upstream *u = device(256 * MiB);
    cca_allocator *a = make(m, u, NULL);
    cca_domain *Y = dom(a, "Y");
    cca_domain *doms[] = {Y};
    cr_assert_eq(cca_domain_reserve(a, Y, 16 * MiB), CCA_OK, "%s", cca_last_error());
    uint64_t ups = dst(a, Y).upstream_allocs;
    void *t = in(a, Y, 100, S0);
    void *base = t;
    tu_free(a, t);
    void *big = in(a, Y, 12 * MiB, S1); /* above large_min: still the arena */
    cr_assert_eq(big, base, "a large request from the (wholly free) arena");
    tu_free(a, big);
    cr_assert_eq(dst(a, Y).upstream_allocs, ups, "tiny and large requests served by the arena");
    /* an exact 2 MiB fit cached in a growth segment, and a free arena */
    void *fill = in(a, Y, 16 * MiB, S0);
    cr_assert_eq(fill, base);
    void *g = in(a, Y, 2 * MiB, S0), *g2 = in(a, Y, 2 * MiB, S0);
    cr_assert_gt(dst(a, Y).upstream_allocs, ups, "the full arena sends requests to growth");
    tu_free(a, g);
    tu_free(a, fill);
    agree(a, u, doms, 1, "arena free, growth block cached");
    ups = dst(a, Y).upstream_allocs;
    void *x = in(a, Y, 2 * MiB, S0);
    cr_assert_eq(x, base, "the arena first, before growth's cached blocks (got %p, arena at %p, growth block %p)", x,
                 base, g);
    cr_assert_eq(dst(a, Y).upstream_allocs, ups);
    tu_free(a, x), tu_free(a, g2);
    cr_assert_eq(cca_domain_release(a, Y, 0, NULL), CCA_OK, "%s", cca_last_error());
    agree(a, u, doms, 1, "released");
    finish(a, u);
}

/* A greedy allocator has no domains but its default one; releasing that
 * gives the arena back, and the domain stays usable ("the domain stays
 * usable, empty"). */
Test(domain, greedy_default_domain_release_gives_the_arena_back) {
    cca_upstream *u = device(64 * MiB);
    cca_allocator *a = tu_allocator(u, "policy:greedy,greedy_bytes:16M,log_oom:0");
    void *p = tu_alloc(a, 4096, S0);
    cca_domain_report r;
    memset(&r, 0, sizeof r);
    cr_assert_eq(cca_domain_release(a, NULL, 0, &r), CCA_ERR_LIVE_BLOCKS);
    tu_free(a, p);
    cr_assert_eq(cca_domain_release(a, NULL, 0, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(r.bytes_released, 16 * MiB);
    cr_assert_eq(tu_stats(a).reserved_bytes, 0);
    cr_assert_eq(tu_upstream_stats(u).bytes_in_use, 0);
    agree(a, u, NULL, 0, "greedy released");
    void *q = NULL;
    cca_status st = cca_alloc(a, 4096, S0, &q);
    cr_assert_eq(st, CCA_OK, "the default domain stays usable after its release: %s / %s", cca_status_string(st),
                 cca_last_error());
    tu_free(a, q);
    agree(a, u, NULL, 0, "greedy again");
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    finish(a, u);
}

/* A model's load, three steps on two streams, a partial reload, unload. */
static const struct {
    int alloc; /* 1: alloc slot of size on stream; 0: free slot */
    int slot;
    size_t size;
    int stream;
} workload[] = {
    {1, 0, 4 * MiB, 0},   {1, 1, 6 * MiB + 100, 0}, {1, 2, 2 * MiB + 512 * KiB, 0}, {1, 3, 300 * KiB, 0},
    {1, 4, 300 * KiB, 0}, {1, 5, 12 * MiB, 0},      {1, 6, 70 * KiB, 0},
    {1, 7, 1 * MiB, 1},   {1, 8, 700 * KiB, 0},     {1, 9, 64 * KiB, 1},            {0, 8, 0, 0},
    {1, 10, 3 * MiB, 0},  {0, 7, 0, 0},             {0, 9, 0, 0},                   {0, 10, 0, 0},
    {1, 7, 5 * MiB, 0},   {1, 8, 900 * KiB, 1},     {0, 7, 0, 0},                   {1, 9, 2 * MiB, 1},
    {0, 8, 0, 0},         {0, 9, 0, 0},
    {0, 5, 0, 0},         {1, 5, 11 * MiB, 0},      {0, 3, 0, 0},                   {1, 3, 200 * KiB, 1},
    {1, 7, 1 * MiB, 1},   {1, 8, 1 * MiB, 0},       {0, 7, 0, 0},                   {0, 8, 0, 0},
    {0, 0, 0, 0},         {0, 1, 0, 0},             {0, 2, 0, 0},                   {0, 3, 0, 0},
    {0, 4, 0, 0},         {0, 5, 0, 0},             {0, 6, 0, 0},
};
enum { WL = sizeof workload / sizeof workload[0], WSLOTS = 11 };

static void run_workload(cca_allocator *a, cca_domain *d, bool check_data) {
    blk slot[WSLOTS];
    memset(slot, 0, sizeof slot);
    for (int i = 0; i < WL; i++) {
        int k = workload[i].slot;
        if (workload[i].alloc) {
            cr_assert_null(slot[k].p);
            slot[k] = mk(a, d, workload[i].size, workload[i].stream ? S1 : S0, (uint64_t)(i + 1), check_data);
        } else {
            cr_assert_not_null(slot[k].p);
            if (check_data)
                ASSERT_INTACT(slot[k], true, "workload");
            tu_free(a, slot[k].p);
            slot[k].p = NULL;
        }
    }
    for (int k = 0; k < WSLOTS; k++)
        cr_assert_null(slot[k].p);
}

TEST_BOTH(a_reserved_footprint_runs_the_workload_without_upstream_calls) {
    cca_upstream *u = device(256 * MiB);
    cca_allocator *a = make(m, u, NULL);
    cca_domain *X = dom(a, "first load");
    run_workload(a, X, false);
    cca_domain_stats sX = dst(a, X);
    size_t peak = sX.reserved_bytes_peak;
    cr_assert_gt(peak, 0);
    uint64_t frees = tu_stats(a).upstream_frees;
    cr_assert_eq(cca_domain_destroy(a, X, 0, NULL), CCA_OK, "%s", cca_last_error());
    retired ret = {.alloc_calls = sX.alloc_calls,
                   .upstream_allocs = sX.upstream_allocs,
                   .upstream_frees = sX.upstream_frees + (tu_stats(a).upstream_frees - frees)};
    cca_domain *Y = dom(a, "second load");
    cca_domain *doms[] = {Y};
    cr_assert_eq(cca_domain_reserve(a, Y, peak), CCA_OK, "%s", cca_last_error());
    cca_domain_stats s0 = dst(a, Y);
    cca_stats a0 = tu_stats(a);
    cca_upstream_stats u0 = tu_upstream_stats(u);
    run_workload(a, Y, true);
    cca_domain_stats s1 = dst(a, Y);
    cca_stats a1 = tu_stats(a);
    cca_upstream_stats u1 = tu_upstream_stats(u);
    cr_assert_eq(s1.upstream_allocs, s0.upstream_allocs, "upstream allocations during the second run: %llu",
                 (unsigned long long)(s1.upstream_allocs - s0.upstream_allocs));
    cr_assert_eq(s1.upstream_frees, s0.upstream_frees);
    cr_assert_eq(a1.upstream_allocs, a0.upstream_allocs);
    cr_assert_eq(a1.upstream_frees, a0.upstream_frees);
    cr_assert_eq(u1.alloc_calls, u0.alloc_calls);
    cr_assert_eq(u1.free_calls, u0.free_calls);
    cr_assert_eq(u1.vm_map_calls, u0.vm_map_calls);
    cr_assert_eq(u1.vm_unmap_calls, u0.vm_unmap_calls);
    cr_assert_leq(s1.reserved_bytes_peak, peak, "second run peak %zu > first run peak %zu", s1.reserved_bytes_peak,
                  peak);
    cr_assert_eq(s1.alloc_calls, sX.alloc_calls, "the same workload");
    cr_assert_eq(s1.allocated_bytes_peak, sX.allocated_bytes_peak, "the same blocks");
    agree_r(a, u, doms, 1, &ret, "second run");
    cr_assert_eq(cca_domain_release(a, Y, 0, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(dst(a, Y).reserved_bytes, 0);
    finish(a, u);
}

/* ---- cached memory is the allocator's ------------------------------------------------ */

/* Expandable: over pages (CCA_VM_PAGES), so that a live block keeps its
 * page alone mapped and everything around it goes back. */
TEST_BOTH(trim_empty_cache_and_the_oom_retry_release_every_domain) {
    cca_upstream *u = m->expandable ? tu_vm_device(48 * MiB, PG) : device(48 * MiB);
    cca_allocator *a = make(m, u, NULL);
    cca_domain *A = dom(a, "A"), *B = dom(a, "B");
    cca_domain *doms[] = {A, B};
    /* the OOM retry takes A's cache for B */
    void *x = in(a, A, 30 * MiB, S0);
    tu_free(a, x);
    cca_domain_stats sA = dst(a, A);
    cr_assert_geq(sA.reserved_bytes, 30 * MiB);
    blk y = mk(a, B, 30 * MiB, S0, 1, false);
    cca_domain_stats nA = dst(a, A);
    cr_assert_eq(tu_stats(a).alloc_retries, 1);
    /* classic: A's one segment; expandable: as many of A's free pages as needed */
    if (!m->expandable)
        cr_assert_eq(nA.reserved_bytes, 0, "the retry released A's cached segment: %zu left", nA.reserved_bytes);
    cr_assert_leq(nA.reserved_bytes, 48 * MiB - 30 * MiB, "the retry released A's cached memory: %zu left",
                  nA.reserved_bytes);
    cr_assert_gt(nA.upstream_frees, sA.upstream_frees, "counted as A's");
    agree(a, u, doms, 2, "retry");
    ASSERT_INTACT(y, false, "B");
    tu_free(a, y.p);
    /* empty_cache: every domain's free memory; a live block pins its own */
    blk p = mk(a, A, 4096, S0, 2, true);
    void *q = in(a, B, 5 * MiB, S1);
    void *z = in(a, NULL, 3 * MiB, S0);
    tu_free(a, q), tu_free(a, z);
    cca_release_report r;
    cr_assert_eq(cca_empty_cache(a, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(dst(a, B).reserved_bytes, 0);
    cr_assert_eq(dst(a, NULL).reserved_bytes, 0);
    cr_assert_eq(dst(a, A).reserved_bytes, m->expandable ? PG : 2 * MiB,
                 "A keeps the segment (expandable: the page) of its live block: %zu", dst(a, A).reserved_bytes);
    cr_assert_eq(r.bytes_still_reserved, dst(a, A).reserved_bytes);
    agree(a, u, doms, 2, "empty_cache");
    ASSERT_INTACT(p, true, "A's live block");
    /* trim with a budget takes cached memory of any domain too */
    q = in(a, B, 5 * MiB, S1);
    z = in(a, A, 6 * MiB, S0);
    tu_free(a, q), tu_free(a, z);
    cr_assert_eq(cca_trim(a, 0, NULL), CCA_OK);
    cr_assert_eq(dst(a, B).reserved_bytes, 0);
    cr_assert_eq(dst(a, A).reserved_bytes, m->expandable ? PG : 2 * MiB);
    agree(a, u, doms, 2, "trim");
    tu_free(a, p.p);
    cr_assert_eq(cca_trim(a, 0, NULL), CCA_OK);
    agree(a, u, doms, 2, "all trimmed");
    finish(a, u);
}

/* A wholly free footprint arena and the OOM retry (docs/allocator.md,
 * "Cached memory is the allocator's"): classic, its segment goes and the
 * domain may reserve again; expandable, its pages go and its range stays
 * the domain's arena (its next request maps pages there again, at the
 * same address; a second reserve is refused) until a trim gives the range
 * back. */
TEST_BOTH(a_free_arena_after_the_retry_is_gone_or_kept_by_the_kind) {
    cca_upstream *u = m->expandable ? tu_vm_device(48 * MiB, PG) : device(48 * MiB);
    cca_allocator *a = make(m, u, NULL);
    cca_domain *D = dom(a, "D"), *B = dom(a, "B");
    cr_assert_eq(cca_domain_reserve(a, D, 16 * MiB), CCA_OK, "%s", cca_last_error());
    void *x = in(a, D, 1 * MiB, S0); /* the arena's first block: its base */
    tu_free(a, x);
    void *y = in(a, B, 48 * MiB, S0); /* the whole device: room only with all of the arena back */
    cr_assert_eq(tu_stats(a).alloc_retries, 1);
    cca_domain_stats sD = dst(a, D);
    cr_assert_eq(sD.reserved_bytes, 0, "the retry released the free arena: %zu left", sD.reserved_bytes);
    cr_assert_eq(sD.segments, m->expandable ? 1u : 0u, "classic: the segment goes; expandable: the range stays");
    tu_free(a, y);
    if (m->expandable) {
        cr_assert_eq(cca_domain_reserve(a, D, 8 * MiB), CCA_ERR_INVALID_ARGUMENT);
        cr_assert(strstr(cca_last_error(), "the domain has an arena already"), "%s", cca_last_error());
        void *z = in(a, D, 1 * MiB, S0);
        cr_assert_eq(z, x, "the arena serves again, its pages mapped again");
        tu_free(a, z);
        cr_assert_eq(cca_trim(a, 0, NULL), CCA_OK, "%s", cca_last_error());
        cr_assert_eq(dst(a, D).segments, 0, "a trim gives the empty range back");
    }
    cr_assert_eq(cca_domain_reserve(a, D, 8 * MiB), CCA_OK, "a new arena: %s", cca_last_error());
    cr_assert_eq(dst(a, D).reserved_bytes, 8 * MiB);
    finish(a, u);
}

/* Domain D's 8 MiB arena over 2 MiB pages, x (1 MiB) live at its start
 * and the rest unmapped by a trim: only x's page stays mapped. */
static cca_allocator *pinned_arena(cca_upstream *u, cca_domain **D, void **x) {
    cca_allocator *a = tu_allocator(u, "expandable_ahead:0,log_oom:0");
    cr_assert_eq(cca_domain_create(a, "D", D), CCA_OK);
    cr_assert_eq(cca_domain_reserve(a, *D, 8 * MiB), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_alloc_in(a, *D, 1 * MiB, NULL, x), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(tu_stats(a).reserved_bytes, 2 * MiB, "the arena's page under x stays");
    return a;
}

/* Another tenant takes all but 1 MiB of the device: less than a page. */
static size_t take_all_but_a_mib(cca_upstream *u, void **tenant) {
    size_t free_b, total_b;
    cr_assert_eq(cca_upstream_mem_info(u, &free_b, &total_b), CCA_OK);
    cr_assert_eq(cca_upstream_alloc(u, free_b - 1 * MiB, tenant), CCA_OK, "%s", cca_last_error());
    return free_b - 1 * MiB;
}

/* The OOM retry asks for the fewer new bytes of the domain's arena block
 * and the pools' best fit (grow.c, ccai_grow_need): X pins the arena's
 * first page, a trim unmapped the rest, and a 3 MiB request in the arena
 * needs one new page (2 MiB), not its 4 MiB of pages. The device has less
 * than one page free and 2 MiB are cached: asked for 4 MiB, the retry
 * would find releasing cannot help; asked for 2 MiB, it releases the
 * cache and maps the arena's page. */
Test(domain, the_retry_asks_for_the_arena_blocks_new_pages_only) {
    cca_upstream *u = tu_vm_device_backed(16 * MiB, 2 * MiB, CCA_VM_PAGES);
    cca_domain *D;
    void *x = NULL, *z = NULL, *tenant = NULL;
    cca_allocator *a = pinned_arena(u, &D, &x);
    tu_free(a, tu_alloc(a, 2 * MiB, NULL)); /* 2 MiB cached in the default domain */
    size_t taken = take_all_but_a_mib(u, &tenant);
    cr_assert_eq(cca_alloc_in(a, D, 3 * MiB, NULL, &z), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(z, (char *)x + 1 * MiB, "the arena's free block serves it");
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.alloc_retries, 1);
    cr_assert_eq(s.reserved_bytes, 4 * MiB, "the arena's first two pages; the cache went back");
    cr_assert_eq(s.cached_bytes, 0);
    tu_check(a);
    cr_assert_eq(cca_upstream_free(u, tenant, taken), CCA_OK);
    tu_free(a, x);
    tu_free(a, z);
    tu_teardown(a, u);
}

/* A block of the domain's arena whose pages cannot be mapped is no reason
 * to skip the take (alloc.c, step 4's `refused`): new memory comes from
 * the domain's pools, where its freed 8 MiB block waits mapped, with no
 * retry and nothing released. */
Test(domain, an_arena_block_refused_its_pages_falls_back_to_the_pools) {
    cca_upstream *u = tu_vm_device_backed(32 * MiB, 2 * MiB, CCA_VM_PAGES);
    cca_domain *D;
    void *x = NULL, *w = NULL, *z = NULL, *tenant = NULL;
    cca_allocator *a = pinned_arena(u, &D, &x);
    cr_assert_eq(cca_alloc_in(a, D, 8 * MiB, NULL, &w), CCA_OK, "%s", cca_last_error()); /* past the arena */
    tu_free(a, w);
    size_t taken = take_all_but_a_mib(u, &tenant);
    cca_stats before = tu_stats(a);
    cr_assert_eq(cca_alloc_in(a, D, 3 * MiB, NULL, &z), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(z, w, "the pools' cached block serves it");
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.alloc_retries, before.alloc_retries, "no retry");
    cr_assert_eq(s.upstream_frees, before.upstream_frees, "nothing released");
    cr_assert_eq(s.reserved_bytes, before.reserved_bytes);
    tu_check(a);
    cr_assert_eq(cca_upstream_free(u, tenant, taken), CCA_OK);
    tu_free(a, x);
    tu_free(a, z);
    tu_teardown(a, u);
}
