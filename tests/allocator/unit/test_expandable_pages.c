/*
 * test_expandable_pages.c — allocator/src/kinds/pages.c: expandable segments
 * (expandable:1) mapping pages as blocks need them, and core/release.c's
 * page release giving them back.
 * How the tests run: expandable_suite.h.
 *
 *   accounting   mapped bytes = the upstream's count = what mem_info says
 *                is used = reserved bytes, after every step; page size,
 *                address space (device rounded to pages, per segment), exact
 *                pointers and exact map counts from a model of the growth
 *                rule; cca_free never unmaps.
 *   fallback     expandable:1 over an upstream without vm ops: classic
 *                segments, page_size 0.
 *   release      trim unmaps the pages lying wholly inside a free block
 *                between live ones; the report's pages, bytes and trapped
 *                bytes are exact; live data survives; unmapped pages fault;
 *                resident memory falls; the ahead pages at the tail go
 *                first; an empty segment gives its range back; a block
 *                taken whole (its remainder not split off) is mapped to its
 *                end (I7).
 *   growth       a growing segment maps ahead (1/16 of what is mapped), so
 *                it calls vm_map far less often than cca_alloc; the rule's
 *                least step and cap, expandable_ahead:0 turning both off;
 *                an ahead map the device refuses is retried without the
 *                ahead pages, and not at all when they were mapped already.
 *   greedy       the arena over an expandable segment: mapped whole at
 *                creation, trimmed page by page, mapped again on demand.
 *   config       on by default; expandable:1 with max_split is refused;
 *                CCALLOC_CONF turns it off, a refused one leaves the
 *                defaults.
 *   bitmap       the page bitmap's runs and mapped prefix (internal.h),
 *                read a word at a time, against a page-by-page reading.
 *   snapshot     "segment_kind":"expandable" and each segment's mapped runs.
 *   pending      a block waiting on another stream's event keeps its pages
 *                through a trim.
 *   slack        a remainder too small to be a block, lying over pages that
 *                are not mapped, is split off rather than mapped, also when
 *                the retry's take maps ahead pages over it.
 *
 * The other suites of pages.c: test_expandable_limits.c (requests that
 * cannot be served, the OOM retry), test_expandable_stress.c (faults,
 * random sequences, threads).
 */
#include "expandable_suite.h"

/* ---- accounting ---------------------------------------------------------- */

Test(expandable, page_accounting_is_exact_after_every_step) {
    const size_t cap = 48 * MiB + 96 * KiB; /* not whole pages: the range rounds up */
    const size_t range = round_to(cap, PG);
    cca_upstream *u = vm_device(cap, PG);
    cca_allocator *a = exp_allocator(u, NULL);
    agree(a, u, PG, range, "created");
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.segments, 0, "nothing is reserved before the first request");
    cr_assert_eq(s.vm_maps, 0);
    /* one model per (stream, pool): small <= 1 MiB, the rest share the large range */
    growth small0, large0, small1, large1;
    growth_init(&small0, PG, range), growth_init(&large0, PG, range);
    growth_init(&small1, PG, range), growth_init(&large1, PG, range);
    struct {
        growth *g;
        size_t size;
        cca_stream s;
    } steps[] = {
        {&small0, 1000, S0},           {&large0, 3 * MiB + 1, S0}, {&small0, 70000, S0},       {&large1, 5 * MiB, S1},
        {&small1, 4 * KiB, S1},        {&small0, 300 * KiB, S0},   {&large0, 1536 * KiB, S0},  {&small1, 900 * KiB, S1},
        {&large0, 2 * MiB + 512, S0},  {&small0, 4096, S0},        {&large1, 7 * MiB + 3, S1}, {&small1, 1 * MiB, S1},
        {&large0, 6 * MiB + 1234, S0}, {&small0, 1 * MiB, S0},
    };
    enum { N = sizeof steps / sizeof steps[0] };
    void *p[N];
    size_t segments = 0;
    for (int i = 0; i < N; i++) {
        segments += steps[i].g->off == 0;
        p[i] = take(a, steps[i].g, steps[i].size, steps[i].s);
        tu_fill(p[i], steps[i].size, (uint64_t)i);
        char what[64];
        snprintf(what, sizeof what, "alloc %d (%zu bytes)", i, steps[i].size);
        agree(a, u, PG, range, what);
        s = tu_stats(a);
        size_t mapped = (small0.end + large0.end + small1.end + large1.end) * PG;
        cr_assert_eq(s.mapped_bytes, mapped, "%s: mapped %zu, the growth rule says %zu", what, s.mapped_bytes, mapped);
        cr_assert_eq(s.vm_maps, small0.maps + large0.maps + small1.maps + large1.maps, "%s: vm_maps %llu", what,
                     (unsigned long long)s.vm_maps);
        cr_assert_eq(s.expandable_segments, segments, "%s", what);
        cr_assert_eq(s.vm_unmaps, 0);
        cr_assert_eq(s.upstream_allocs, s.vm_maps + segments, "%s: a reserve and the maps", what);
    }
    /* cca_free never unmaps: the pages stay cached */
    size_t mapped = tu_stats(a).mapped_bytes;
    for (int i = 0; i < N; i++) {
        cr_assert(tu_check_fill(p[i], steps[i].size, (uint64_t)i), "block %d overwritten", i);
        tu_free(a, p[i]);
        agree(a, u, PG, range, "free");
        s = tu_stats(a);
        cr_assert_eq(s.mapped_bytes, mapped);
        cr_assert_eq(s.vm_unmaps, 0);
    }
    cr_assert_eq(s.cached_bytes, mapped);
    finish(a, u);
}

/* ---- fallback ------------------------------------------------------------ */

Test(expandable, upstream_without_vm_ops_falls_back_to_classic_segments) {
    tu_upstream t;
    cca_upstream *u = tu_upstream_create(&t, 256 * MiB, true);
    cr_assert_eq(cca_upstream_has_vm(u), 0);
    cca_allocator *a = tu_allocator(u, "expandable:1");
    cca_config cfg;
    cr_assert_eq(cca_get_config(a, &cfg), CCA_OK);
    cr_assert_eq(cfg.expandable, 1, "the option stays as asked");
    void *p = tu_alloc(a, 4096, NULL), *q = tu_alloc(a, 12 * MiB, NULL), *r = tu_alloc(a, 3 * MiB, NULL);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.page_size, 0);
    cr_assert_eq(s.expandable_segments, 0);
    cr_assert_eq(s.address_space_bytes, 0);
    cr_assert_eq(s.mapped_bytes, 0);
    cr_assert_eq(s.vm_maps, 0);
    /* classic sizes: a 2 MiB small segment, a 12 MiB large one, a 20 MiB medium one */
    cr_assert_eq(s.segments, 3);
    cr_assert_eq(s.reserved_bytes, 34 * MiB);
    cr_assert_eq(t.used, 34 * MiB);
    cr_assert_eq(t.live_count, 3);
    tu_free(a, p), tu_free(a, q), tu_free(a, r);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    cr_assert_eq(t.used, 0);
    tu_teardown(a, u);
}

/* ---- release ------------------------------------------------------------- */

/* A, B, C of several pages each, one after another in one range, and what
 * the growth rule maps for them (model below). */
typedef struct abc {
    growth g;
    char *A, *B, *C;
    size_t rA, rB, rC, endB, endC;
} abc;

static void alloc_abc(cca_allocator *a, abc *x, size_t range) {
    growth_init(&x->g, PG, range);
    const size_t sa = 1 * MiB + 100 * KiB, sb = 3 * MiB, sc = 2 * MiB + 3 * KiB;
    x->A = take(a, &x->g, sa, S0);
    x->B = take(a, &x->g, sb, S0);
    x->C = take(a, &x->g, sc, S0);
    x->rA = rnd(sa), x->rB = rnd(sb), x->rC = rnd(sc);
    x->endB = x->rA + x->rB, x->endC = x->endB + x->rC;
    /* the model's numbers, for the reader: A maps [0,18); B [18,67), one
     * page ahead (18/16); C [67,102), four ahead (67/16) */
    cr_assert_eq(x->g.end, 102);
    cr_assert_eq(x->g.maps, 3);
    tu_fill(x->A, x->rA, 1);
    tu_fill(x->B, x->rB, 2);
    tu_fill(x->C, x->rC, 3);
}

Test(expandable, trim_unmaps_the_free_pages_between_live_blocks) {
    const size_t cap = 64 * MiB;
    cca_upstream *u = vm_device(cap, PG);
    cca_allocator *a = exp_allocator(u, NULL);
    abc x;
    alloc_abc(a, &x, cap);
    agree(a, u, PG, cap, "A B C");
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.mapped_bytes, 102 * PG);
    tu_free(a, x.B);
    agree(a, u, PG, cap, "free B");
    s = tu_stats(a);
    cr_assert_eq(s.mapped_bytes, 102 * PG, "cca_free unmaps nothing");
    cr_assert_eq(s.largest_free_block, x.rB, "B is the longest mapped free stretch");

    cca_release_report r;
    memset(&r, 0xff, sizeof r);
    cr_assert_eq(cca_empty_cache(a, &r), CCA_OK, "%s", cca_last_error());
    agree(a, u, PG, cap, "empty_cache with A and C live");
    /* the tail's whole pages first: [98,102) (C ends inside page 97); then
     * B's whole pages: from ceil(rA/P) = 18 to floor(endB/P) = 65 */
    size_t lo = round_to(x.rA, PG) / PG, hi = x.endB / PG, tail = round_to(x.endC, PG) / PG;
    cr_assert_eq(lo, 18);
    cr_assert_eq(hi, 65);
    cr_assert_eq(tail, 98);
    size_t pages = (102 - tail) + (hi - lo);
    size_t trapped = (lo * PG - x.rA) + (x.endB - hi * PG) + (tail * PG - x.endC);
    cr_assert_eq(r.pages_unmapped, pages, "pages_unmapped %zu, expected %zu", r.pages_unmapped, pages);
    cr_assert_eq(r.bytes_unmapped, pages * PG);
    cr_assert_eq(r.bytes_released, pages * PG);
    cr_assert_eq(r.segments_released, 0, "the range stays: A and C live in it");
    cr_assert_eq(r.bytes_still_reserved, (102 - pages) * PG);
    cr_assert_eq(r.segments_pinned, 1);
    cr_assert_eq(r.segments_kept, 0);
    cr_assert_eq(r.live_bytes_pinning, x.rA + x.rC);
    cr_assert_eq(r.free_bytes_trapped, trapped, "trapped %zu, expected %zu", r.free_bytes_trapped, trapped);
    cr_assert_eq(r.free_bytes_pinned, trapped, "every mapped free byte is trapped");
    s = tu_stats(a);
    cr_assert_eq(s.reserved_bytes, s.allocated_bytes + trapped, "what stays: live bytes and the trapped ones");
    /* at most one page trapped at each end of a run of live blocks (A, C) */
    cr_assert_lt(s.reserved_bytes, s.allocated_bytes + 2 * 2 * PG);
    cr_assert_eq(s.vm_unmaps, 2, "one call per run");
    cr_assert_eq(s.pages_unmapped, pages);
    size_t largest = lo * PG - x.rA;
    if (x.endB - hi * PG > largest)
        largest = x.endB - hi * PG;
    if (tail * PG - x.endC > largest)
        largest = tail * PG - x.endC;
    cr_assert_eq(s.largest_free_block, largest);
    /* live data intact; the trapped edges of B still readable; its whole
     * pages and the ahead pages gone: a touch faults */
    cr_assert(tu_check_fill(x.A, x.rA, 1), "A overwritten");
    cr_assert(tu_check_fill(x.C, x.rC, 3), "C overwritten");
    const char *base = x.A;
    TU_ASSERT_READABLE(x.B);
    TU_ASSERT_READABLE(PAGE_AT(base, lo) - 1);
    TU_ASSERT_FAULTS(PAGE_AT(base, lo));
    TU_ASSERT_FAULTS(PAGE_AT(base, (lo + hi) / 2));
    TU_ASSERT_FAULTS(PAGE_AT(base, hi) - 1);
    TU_ASSERT_READABLE(PAGE_AT(base, hi));
    TU_ASSERT_READABLE(x.C + x.rC);        /* the tail's trapped part */
    TU_ASSERT_FAULTS(PAGE_AT(base, tail)); /* ahead pages gone */
    TU_ASSERT_FAULTS(PAGE_AT(base, 101));

    /* B's size again: best fit is B's old block (the tail is larger); its
     * missing pages come back in one call, nothing ahead (not the tail) */
    void *b2 = tu_alloc(a, 3 * MiB, S0);
    cr_assert_eq(b2, (void *)x.B);
    s = tu_stats(a);
    cr_assert_eq(s.vm_maps, 4);
    cr_assert_eq(s.mapped_bytes, tail * PG);
    agree(a, u, PG, cap, "B again");
    TU_ASSERT_READABLE(PAGE_AT(base, lo));
    tu_fill(b2, x.rB, 4);
    cr_assert(tu_check_fill(x.A, x.rA, 1) && tu_check_fill(x.C, x.rC, 3) && tu_check_fill(b2, x.rB, 4));
    tu_free(a, b2), tu_free(a, x.A), tu_free(a, x.C);
    finish(a, u);
}

Test(expandable, trim_returns_resident_memory_with_2mib_pages) {
    const size_t P2 = 2 * MiB, cap = 128 * MiB;
    cca_upstream *u = vm_device(cap, P2);
    cca_allocator *a = exp_allocator(u, NULL);
    growth g;
    growth_init(&g, P2, cap);
    char *A = take(a, &g, 3 * MiB, S0), *B = take(a, &g, 40 * MiB, S0), *C = take(a, &g, 3 * MiB, S0);
    /* A [0,2); B [2,22); C [22,24): one page ahead (22/16) */
    cr_assert_eq(g.end, 24);
    agree(a, u, P2, cap, "A B C");
    memset(A, 0xa1, 3 * MiB);
    memset(B, 0xb2, 40 * MiB); /* 40 MiB resident */
    memset(C, 0xc3, 3 * MiB);
    tu_free(a, B);
    size_t before = tu_resident_bytes();
    cca_release_report r;
    cr_assert_eq(cca_trim(a, 0, &r), CCA_OK, "%s", cca_last_error());
    size_t after = tu_resident_bytes();
    /* B's whole pages [2,21) and the ahead page 23 */
    cr_assert_eq(r.pages_unmapped, 20);
    cr_assert_eq(r.bytes_unmapped, 40 * MiB);
    cr_assert_eq(tu_stats(a).reserved_bytes, 4 * P2);
    cr_assert_geq(before, after + 37 * MiB, "resident memory fell by %zu bytes only (of 38 MiB unmapped)",
                  before > after ? before - after : 0);
    agree(a, u, P2, cap, "trim");
    TU_ASSERT_FAULTS(B + MiB);
    TU_ASSERT_FAULTS(B + 20 * MiB);
    TU_ASSERT_READABLE(B); /* B's first MiB shares page 1 with A */
    for (size_t i = 0; i < 3 * MiB; i += 4096)
        cr_assert(A[i] == (char)0xa1 && C[i] == (char)0xc3, "live data lost at %zu", i);
    tu_free(a, A), tu_free(a, C);
    finish(a, u);
}

/* A block taken whole because its remainder is not worth a split (large
 * range: remainder <= small_max) holds the slack too (cca_block_size says
 * so): every page under it must be mapped (I7), not only the request's.
 * Unless the slack reaches pages that are not mapped: then it is split off
 * and stays unmapped (slack_over_unmapped_pages_is_split_off, below). */
Test(expandable, an_unsplit_block_is_mapped_to_its_end) {
    const size_t cap = 64 * MiB;
    cca_upstream *u = vm_device(cap, PG);
    cca_allocator *a = exp_allocator(u, NULL);
    char *A = tu_alloc(a, 2 * MiB, S0), *B = tu_alloc(a, 3 * MiB, S0), *C = tu_alloc(a, 2 * MiB, S0);
    cr_assert_eq(B, A + 2 * MiB);
    tu_free(a, B);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK); /* B's pages [32, 80) unmapped */
    TU_ASSERT_FAULTS(B);
    /* 2.5 MiB in B's 3 MiB block: the 0.5 MiB left lies on unmapped pages,
     * so it is split off and stays unmapped */
    char *p = tu_alloc(a, 2 * MiB + 512 * KiB, S0);
    cr_assert_eq(p, B);
    cr_assert_eq(tu_block_size(a, p), 2 * MiB + 512 * KiB, "the unmapped remainder is split off");
    agree(a, u, PG, cap, "split block"); /* I7 */
    TU_ASSERT_READABLE(p + 2 * MiB + 512 * KiB - 1);
    TU_ASSERT_FAULTS(p + 2 * MiB + 512 * KiB);
    tu_free(a, p);
    /* B whole (its pages all mapped again), freed, then 2.5 MiB of it: the
     * remainder is on mapped pages and stays as slack, mapped to its end */
    tu_free(a, tu_alloc(a, 3 * MiB, S0));
    p = tu_alloc(a, 2 * MiB + 512 * KiB, S0);
    cr_assert_eq(p, B);
    size_t held = tu_block_size(a, p);
    cr_assert_eq(held, 3 * MiB, "the slack stays with the block");
    agree(a, u, PG, cap, "unsplit block"); /* I7 */
    TU_ASSERT_READABLE(p + held - 1);
    tu_free(a, p), tu_free(a, A), tu_free(a, C);
    finish(a, u);
}

/* ---- empty segments ------------------------------------------------------ */

Test(expandable, empty_segments_give_their_ranges_back) {
    const size_t cap = 32 * MiB;
    cca_upstream *u = vm_device(cap, PG);
    cca_allocator *a = exp_allocator(u, NULL);
    void *p[6] = {tu_alloc(a, 5 * MiB, S0), tu_alloc(a, 100 * KiB, S0), tu_alloc(a, 3 * MiB, S1),
                  tu_alloc(a, 1000, S1),    tu_alloc(a, 2 * MiB, S0),   tu_alloc(a, 512 * KiB, S1)};
    agree(a, u, PG, cap, "six blocks");
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.expandable_segments, 4, "(S0, S1) x (small, large)");
    for (int i = 0; i < 6; i++)
        tu_free(a, p[i]);
    s = tu_stats(a);
    size_t mapped = s.mapped_bytes;

    /* trim to one page: the ranges left with nothing mapped go back */
    cca_release_report r;
    cr_assert_eq(cca_trim(a, PG, &r), CCA_OK, "%s", cca_last_error());
    agree(a, u, PG, cap, "trim(one page)");
    s = tu_stats(a);
    cr_assert_eq(s.reserved_bytes, PG, "exactly keep: whole pages, highest first");
    cr_assert_eq(s.expandable_segments, 1);
    cr_assert_eq(r.segments_released, 3);
    cr_assert_eq(r.pages_unmapped, mapped / PG - 1);
    cr_assert_eq(r.bytes_released, mapped - PG);
    cr_assert_eq(r.segments_kept, 1);

    cr_assert_eq(cca_empty_cache(a, &r), CCA_OK, "%s", cca_last_error());
    s = tu_stats(a);
    cr_assert_eq(s.reserved_bytes, 0);
    cr_assert_eq(s.segments, 0);
    cr_assert_eq(s.expandable_segments, 0);
    cr_assert_eq(s.address_space_bytes, 0);
    cr_assert_eq(r.segments_released, 1);
    cr_assert_eq(r.pages_unmapped, 1);
    cca_upstream_stats us = tu_upstream_stats(u);
    cr_assert_eq(us.vm_reserved_bytes, 0);
    cr_assert_eq(us.vm_mapped_bytes, 0);
    agree(a, u, PG, cap, "empty");
    /* every range reserved was released: reserves = upstream_allocs - maps, releases = upstream_frees - unmaps */
    cr_assert_eq(s.upstream_allocs - s.vm_maps, s.upstream_frees - s.vm_unmaps, "every range reserved went back");
    cr_assert_eq(s.upstream_allocs - s.vm_maps, 4);

    /* and it starts again from nothing */
    void *q = tu_alloc(a, 1 * MiB + 512, S0);
    s = tu_stats(a);
    cr_assert_eq(s.expandable_segments, 1);
    cr_assert_eq(s.mapped_bytes, round_to(rnd(1 * MiB + 512), PG));
    tu_free(a, q);
    finish(a, u);
}

/* ---- growth -------------------------------------------------------------- */

Test(expandable, growth_maps_ahead_and_trim_releases_the_ahead_pages_first) {
    const size_t cap = 256 * MiB, n = 200, size = PG + 512;
    cca_upstream *u = vm_device(cap, PG);
    cca_allocator *a = exp_allocator(u, "small_pool:0");
    growth g;
    growth_init(&g, PG, cap);
    char *p[201];
    for (size_t i = 0; i < n; i++)
        p[i] = take(a, &g, size, S0);
    agree(a, u, PG, cap, "200 blocks");
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.vm_maps, g.maps);
    cr_assert_eq(g.maps, 50, "the model: 50 maps for 200 requests");
    cr_assert_lt(s.vm_maps * 3, n, "vm_map called %llu times for %zu requests", (unsigned long long)s.vm_maps, n);
    /* a larger block at the tail: 12 pages ahead (203 mapped / 16) */
    p[n] = take(a, &g, 1 * MiB + 512, S0);
    size_t used = round_to(g.off, PG) / PG; /* pages under blocks: [0, used) */
    size_t ahead = g.end - used;
    cr_assert_eq(g.end, 230);
    cr_assert_eq(ahead, 12);
    s = tu_stats(a);
    cr_assert_eq(s.mapped_bytes, g.end * PG);
    agree(a, u, PG, cap, "201 blocks");
    /* free 50..59: one free block with whole pages [51, 60) */
    for (size_t i = 50; i < 60; i++)
        tu_free(a, p[i]);
    size_t flo = round_to(50 * rnd(size), PG) / PG, fhi = 60 * rnd(size) / PG;
    cr_assert_eq(flo, 51);
    cr_assert_eq(fhi, 60);
    const char *base = p[0];

    /* keep = all but the ahead pages: exactly those go, highest first */
    cca_release_report r;
    cr_assert_eq(cca_trim(a, s.reserved_bytes - ahead * PG, &r), CCA_OK);
    cr_assert_eq(r.pages_unmapped, ahead);
    cr_assert_eq(tu_stats(a).mapped_bytes, used * PG);
    for (size_t i = flo; i < fhi; i++)
        TU_ASSERT_READABLE(PAGE_AT(base, i)); /* the free block in the middle: untouched */
    TU_ASSERT_FAULTS(PAGE_AT(base, used));
    TU_ASSERT_FAULTS(PAGE_AT(base, g.end - 1));
    TU_ASSERT_READABLE(PAGE_AT(base, used) - 1); /* shared with the last block */
    agree(a, u, PG, cap, "trim the ahead pages");

    /* two pages more: nothing whole is left at the tail, so the free block's
     * highest pages */
    cr_assert_eq(cca_trim(a, (used - 2) * PG, &r), CCA_OK);
    cr_assert_eq(r.pages_unmapped, 2);
    TU_ASSERT_FAULTS(PAGE_AT(base, fhi - 1));
    TU_ASSERT_FAULTS(PAGE_AT(base, fhi - 2));
    TU_ASSERT_READABLE(PAGE_AT(base, fhi - 3));
    agree(a, u, PG, cap, "trim two pages");
    cr_assert_eq(cca_empty_cache(a, &r), CCA_OK);
    cr_assert_eq(r.pages_unmapped, fhi - flo - 2);
    TU_ASSERT_FAULTS(PAGE_AT(base, flo));
    agree(a, u, PG, cap, "empty_cache");
    for (size_t i = 0; i <= n; i++)
        if (i < 50 || i >= 60)
            tu_free(a, p[i]);
    finish(a, u);
}

/* n (<= 120) requests of a page and 512 B, one after another from the tail
 * of one segment of an allocator of expandable:1,log_oom:0 and conf,
 * checked against the model g (pointers, maps, mapped bytes, the device's
 * count); then freed and emptied. hook: the model's least step and cap are
 * set through the test hook; else they are the config's own, and the rule
 * in force (a->rule) must be the model's either way. Returns the model's
 * maps. */
static size_t grow_like_the_model(const char *conf, growth *g, size_t cap, size_t n, bool hook) {
    char full[200];
    snprintf(full, sizeof full, "expandable:1,log_oom:0,%s", conf);
    cca_upstream *u = vm_device(cap, PG);
    cca_allocator *a = hook ? rule_allocator(u, full, g->least, g->ahead_max) : tu_allocator(u, full);
    cca_config c;
    cr_assert_eq(cca_get_config(a, &c), CCA_OK);
    cr_assert_eq(c.expandable_ahead, g->ahead, "%s", conf);
    cr_assert_eq(a->config.expandable_ahead, g->ahead, "%s", conf);
    cr_assert_eq(a->rule.least, g->least, "%s: least step %zu, the model %zu", conf, a->rule.least, g->least);
    cr_assert_eq(a->rule.cap, g->ahead_max, "%s: cap %zu, the model %zu", conf, a->rule.cap, g->ahead_max);
    void *p[120];
    cr_assert_leq(n, 120);
    for (size_t i = 0; i < n; i++)
        p[i] = take(a, g, PG + 512, S0);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.vm_maps, g->maps, "%s: %llu maps, the model %zu", conf, (unsigned long long)s.vm_maps, g->maps);
    cr_assert_eq(s.mapped_bytes, g->end * PG, "%s", conf);
    agree(a, u, PG, cap, conf);
    for (size_t i = 0; i < n; i++)
        tu_free(a, p[i]);
    finish(a, u);
    return g->maps;
}

/* expandable_ahead sets the growth rule: the same 120 tail requests map
 * exactly what the model says for each setting (pointers, vm_map calls,
 * mapped bytes), from one map per request with the ahead off
 * (expandable_ahead:0: neither ahead nor least step) to a few with half of
 * what is mapped mapped ahead. The config's own rule is a least step of
 * 20 MiB and a cap of expandable_ahead x 1 GiB; the hook sets others (no
 * least step, a cap that binds) to follow the fraction page by page. */
Test(expandable, the_ahead_option_sets_the_growth_rule) {
    const size_t cap = 512 * MiB, n = 120;
    static const struct {
        const char *conf;
        bool hook; /* least and ahead_max set through the hook; else the config's own */
        double ahead;
        size_t least, ahead_max;
    } cases[] = {
        {"expandable_ahead:0", false, 0, 0, 0},
        {"expandable_ahead:0.0625", true, 0.0625, 0, 64 * MiB},
        {"expandable_ahead:0.5", true, 0.5, 0, 1024 * MiB},
        {"expandable_ahead:1", true, 1.0, 0, 24 * MiB},
        {"expandable_ahead:0.0625", false, 0.0625, 20 * MiB, 64 * MiB},
        {"expandable_ahead:0.5", false, 0.5, 20 * MiB, 512 * MiB},
        {"expandable_ahead:1", false, 1.0, 20 * MiB, 1024 * MiB},
    };
    enum { CASES = sizeof cases / sizeof cases[0] };
    size_t maps[CASES];
    for (size_t k = 0; k < CASES; k++) {
        char conf[128];
        snprintf(conf, sizeof conf, "small_pool:0,%s", cases[k].conf);
        growth g;
        growth_init(&g, PG, cap);
        g.ahead = cases[k].ahead;
        g.least = cases[k].least;
        g.ahead_max = cases[k].ahead_max;
        maps[k] = grow_like_the_model(conf, &g, cap, n, cases[k].hook);
    }
    cr_assert_eq(maps[0], 120, "no ahead: one map per request that crosses into a new page");
    cr_assert_lt(maps[2], maps[1], "mapping more ahead makes fewer calls");
    cr_assert_lt(maps[1], maps[0]);
    for (size_t k = 4; k < CASES; k++) /* 121 pages, under the least step */
        cr_assert_eq(maps[k], 1, "%s: the first step of 20 MiB holds every request", cases[k].conf);
}

/* The least step: while little is mapped, 1/16 of it is less than a
 * page, and each request crossing into a new page would be a call of its
 * own; a step maps at least the least step instead (20 MiB; the request's
 * new pages included), in the small pool's range at most small_segment,
 * and never more than the cap beyond the request. Other least steps and
 * caps through the test hook. */
Test(expandable, the_least_step_cuts_calls_while_a_segment_starts_out) {
    const size_t cap = 512 * MiB, n = 120;
    const size_t leasts[] = {0, 1 * MiB, 4 * MiB};
    size_t maps[3];
    for (size_t k = 0; k < 3; k++) {
        growth g;
        growth_init(&g, PG, cap);
        g.least = leasts[k];
        maps[k] = grow_like_the_model("small_pool:0", &g, cap, n, true);
    }
    /* the model's numbers, 120 requests of a page and 512 B (121 pages):
     * without a least step, 1/16 ahead is under a page until 16 pages are
     * mapped, and each of the first 16 requests is a call */
    cr_assert_eq(maps[0], 42);
    cr_assert_eq(maps[1], 8);
    cr_assert_eq(maps[2], 2);

    /* defaults (20 MiB) on 2 MiB pages: the first small request maps
     * small_segment (2 MiB) of the small range, the first large one 20 MiB
     * of the large range; the cap caps the step (expandable_ahead 2^-9:
     * 2 MiB), expandable_ahead:0 turns both off */
    static const struct {
        const char *conf;
        bool hook; /* least and ahead_max set through the hook */
        size_t least, ahead_max;
        size_t small, large; /* bytes mapped in each range after the two requests */
    } cases[] = {
        {"", false, 0, 0, 2 * MiB, 20 * MiB},
        {"", true, 20 * MiB, 2 * MiB, 2 * MiB, 6 * MiB},
        {"expandable_ahead:0.001953125", false, 0, 0, 2 * MiB, 6 * MiB},
        {"expandable_ahead:0", false, 0, 0, 2 * MiB, 4 * MiB},
        {"", true, 0, 64 * MiB, 2 * MiB, 4 * MiB},
        {"small_segment:8M", true, 64 * MiB, 64 * MiB, 8 * MiB, 64 * MiB},
        /* the largest step: the whole range (the device), which the small
         * range's 2 MiB leave no room for: refused, retried without ahead */
        {"", true, SIZE_MAX, SIZE_MAX, 2 * MiB, 4 * MiB},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char conf[200];
        snprintf(conf, sizeof conf, "expandable:1,log_oom:0%s%s", cases[k].conf[0] ? "," : "", cases[k].conf);
        char what[300];
        snprintf(what, sizeof what, "%s%s", conf, cases[k].hook ? " and the hook's rule" : "");
        cca_upstream *u = vm_device(cap, 2 * MiB);
        cca_allocator *a =
            cases[k].hook ? rule_allocator(u, conf, cases[k].least, cases[k].ahead_max) : tu_allocator(u, conf);
        void *small = tu_alloc(a, 4 * KiB, S0);
        cca_stats s = tu_stats(a);
        cr_assert_eq(s.mapped_bytes, cases[k].small, "%s: small range %zu", what, s.mapped_bytes);
        void *large = tu_alloc(a, 3 * MiB, S0);
        s = tu_stats(a);
        cr_assert_eq(s.mapped_bytes - cases[k].small, cases[k].large, "%s: large range %zu", what,
                     s.mapped_bytes - cases[k].small);
        cr_assert_eq(s.vm_maps, 2, "%s: one map per range", what);
        agree(a, u, 2 * MiB, 0, what);
        tu_free(a, small);
        tu_free(a, large);
        finish(a, u);
    }
}

Test(expandable, an_ahead_map_the_device_refuses_is_retried_without_it) {
    /* 8 MiB device, 4.5 MiB held by another tenant: 56 pages for maps */
    const size_t cap = 8 * MiB;
    cca_upstream *u = vm_device(cap, PG);
    void *tenant = tenant_take(u, 4 * MiB + 512 * KiB);
    cca_allocator *a = exp_allocator(u, "small_pool:0");
    growth g;
    growth_init(&g, PG, cap);
    char *p[6];
    p[0] = take(a, &g, 2 * MiB, S0);    /* [0,32) */
    p[1] = take(a, &g, 1280 * KiB, S0); /* [32,52) + 2 ahead: 54 */
    p[2] = take(a, &g, 128 * KiB, S0);  /* inside the ahead pages: no call */
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.vm_maps, 2);
    cr_assert_eq(s.mapped_bytes, 54 * PG);
    /* [54,55) + 3 ahead = 58 pages > 56: refused, then [54,55) alone */
    p[3] = tu_alloc(a, 64 * KiB, S0);
    cr_assert_eq((char *)p[3], p[0] + 54 * PG);
    s = tu_stats(a);
    cr_assert_eq(s.vm_maps, 3);
    cr_assert_eq(s.mapped_bytes, 55 * PG);
    cr_assert_eq(s.alloc_retries, 0, "not a retry: the request's own pages fit");
    cr_assert_eq(tu_upstream_stats(u).vm_failed_maps, 1);
    p[4] = tu_alloc(a, 64 * KiB, S0);
    s = tu_stats(a);
    cr_assert_eq(s.mapped_bytes, 56 * PG);
    cr_assert_eq(tu_upstream_stats(u).vm_failed_maps, 2);
    /* full: nothing cached to unmap, an OOM that changes nothing */
    cca_stats before = tu_stats(a);
    void *q = (void *)1;
    cr_assert_eq(cca_alloc(a, 64 * KiB, S0, &q), CCA_ERR_OUT_OF_MEMORY);
    cr_assert_null(q);
    s = tu_stats(a);
    cr_assert_eq(s.ooms, before.ooms + 1);
    cr_assert_eq(s.alloc_retries, before.alloc_retries + 1);
    cr_assert_eq(s.mapped_bytes, 56 * PG);
    cr_assert_eq(s.allocated_bytes, before.allocated_bytes);
    cr_assert_eq(s.vm_unmaps, 0);
    agree(a, u, PG, cap, "after the OOM");
    for (int i = 0; i < 5; i++)
        tu_free(a, p[i]);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    tenant_give_back(u, tenant);
    finish(a, u);
}

/* ---- greedy over expandable ---------------------------------------------- */

Test(expandable, greedy_arena_is_mapped_whole_and_trimmed_page_by_page) {
    const size_t cap = 64 * MiB, X = 8 * MiB + 100 * KiB, XP = round_to(X, PG);
    cca_upstream *u = vm_device(cap, PG);
    char conf[128];
    snprintf(conf, sizeof conf, "policy:greedy,greedy_bytes:%zu", X);
    cca_allocator *a = exp_allocator(u, conf);
    cca_stats s = tu_stats(a);
    cr_assert_eq(XP, 130 * PG);
    cr_assert_eq(s.mapped_bytes, XP, "mapped whole at creation");
    cr_assert_eq(s.vm_maps, 1);
    cr_assert_eq(s.address_space_bytes, XP);
    cr_assert_eq(s.segments, 1);
    agree(a, u, PG, XP, "created");
    char *A = tu_alloc(a, 1 * MiB, S0), *B = tu_alloc(a, 3 * MiB, S1), *C = tu_alloc(a, 1 * MiB + 1000, S0);
    cr_assert_eq(B, A + 1 * MiB);
    cr_assert_eq(C, A + 4 * MiB);
    cr_assert_eq(tu_stats(a).vm_maps, 1, "no call: everything is mapped");
    tu_fill(A, 1 * MiB, 1), tu_fill(C, 1 * MiB + 1000, 3);
    tu_free(a, B);
    /* the tail's whole pages [81,130) and B's [16,64) */
    cca_release_report r;
    cr_assert_eq(cca_trim(a, 0, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(r.pages_unmapped, 49 + 48);
    s = tu_stats(a);
    cr_assert_eq(s.reserved_bytes, 33 * PG);
    cr_assert_eq(r.free_bytes_trapped, 81 * PG - rnd(5 * MiB + 1000));
    cr_assert_eq(s.segments, 1, "the arena stays");
    agree(a, u, PG, XP, "trimmed arena");
    cr_assert(tu_check_fill(A, 1 * MiB, 1) && tu_check_fill(C, 1 * MiB + 1000, 3), "live data lost");
    TU_ASSERT_FAULTS(B);
    TU_ASSERT_FAULTS(A + XP - 1);
    /* B's size again: B's block, mapped again in one call; then 2 MiB from the tail */
    char *B2 = tu_alloc(a, 3 * MiB, S0);
    cr_assert_eq(B2, B);
    cr_assert_eq(tu_stats(a).vm_maps, 2);
    char *D = tu_alloc(a, 2 * MiB, S1);
    cr_assert_eq(D, C + rnd(1 * MiB + 1000));
    s = tu_stats(a);
    cr_assert_eq(s.vm_maps, 3);
    cr_assert_eq(s.mapped_bytes, (33 + 48 + 32) * PG, "no pages ahead in the arena");
    agree(a, u, PG, XP, "mapped again");
    /* a request above the arena fails at once */
    cca_stats before = tu_stats(a);
    void *q = (void *)1;
    cr_assert_eq(cca_alloc(a, X + 512, S0, &q), CCA_ERR_OUT_OF_MEMORY);
    cr_assert_eq(tu_stats(a).vm_maps, before.vm_maps);
    tu_free(a, A), tu_free(a, B2), tu_free(a, C), tu_free(a, D);
    cr_assert_eq(cca_empty_cache(a, &r), CCA_OK);
    s = tu_stats(a);
    cr_assert_eq(s.reserved_bytes, 0);
    cr_assert_eq(s.segments, 0, "the arena's range goes back too");
    cr_assert_eq(tu_upstream_stats(u).vm_reserved_bytes, 0);
    /* the next request reserves the arena again, mapped whole */
    char *E = tu_alloc(a, 512, S0);
    s = tu_stats(a);
    cr_assert_eq(s.mapped_bytes, XP);
    cr_assert_eq(s.vm_maps, 4);
    cr_assert_eq((uintptr_t)E % PG, 0);
    agree(a, u, PG, XP, "arena again");
    tu_free(a, E);
    finish(a, u);
}

/* ---- config -------------------------------------------------------------- */

Test(expandable, config_refuses_max_split_and_reads_ccalloc_conf) {
    cca_config c, before;
    cca_config_default(&c);
    cr_assert_eq(c.expandable, 1, "on by default");
    before = c;
    cr_assert_eq(cca_config_parse(&c, "expandable:1,max_split:64M"), CCA_ERR_CONFIG);
    cr_assert(strstr(cca_last_error(), "max_split") && strstr(cca_last_error(), "expandable"), "%s", cca_last_error());
    cr_assert_eq(memcmp(&c, &before, sizeof c), 0, "left unchanged");
    c.expandable = 1;
    c.max_split = 64 * MiB;
    cr_assert_eq(cca_config_validate(&c), CCA_ERR_CONFIG);
    cca_upstream *u = vm_device(16 * MiB, PG);
    cca_allocator *a = (cca_allocator *)1;
    cr_assert_eq(cca_create(&c, u, &a), CCA_ERR_CONFIG);
    cr_assert_null(a);
    cca_config_default(&c);
    cr_assert_eq(cca_config_parse(&c, "expandable:true"), CCA_OK);
    cr_assert_eq(c.expandable, 1);
    cr_assert_eq(cca_config_parse(&c, "expandable:off"), CCA_OK);
    cr_assert_eq(c.expandable, 0);
    cr_assert_eq(cca_config_parse(&c, "expandable:2"), CCA_ERR_CONFIG);
    cr_assert(strstr(cca_last_error(), "expandable"), "%s", cca_last_error());

    /* CCALLOC_CONF, when cca_create gets no config: here it turns them off */
    cr_assert_eq(setenv("CCALLOC_CONF", "expandable:0", 1), 0);
    cca_config_default(&c);
    cr_assert_eq(cca_config_apply_env(&c), CCA_OK);
    cr_assert_eq(c.expandable, 0);
    cr_assert_eq(cca_create(NULL, u, &a), CCA_OK, "%s", cca_last_error());
    void *p = tu_alloc(a, 1000, NULL);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.page_size, 0);
    cr_assert_eq(s.expandable_segments, 0);
    tu_free(a, p);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    cr_assert_eq(cca_destroy(a), CCA_OK);
    /* a refused combination in the environment: logged, the defaults used
     * (expandable segments; none of the string applied, small_pool:0 neither) */
    tu_log_capture log = {0};
    cca_set_log_callback(tu_capture_log, &log);
    cr_assert_eq(setenv("CCALLOC_CONF", "small_pool:0,expandable:1,max_split:64M", 1), 0);
    cr_assert_eq(cca_create(NULL, u, &a), CCA_OK, "%s", cca_last_error());
    cca_set_log_callback(NULL, NULL);
    cr_assert_eq(log.lines, 1);
    cr_assert(strstr(log.last, "max_split"), "%s", log.last);
    cr_assert_eq(cca_get_config(a, &c), CCA_OK);
    cr_assert_eq(c.small_pool, 1);
    cr_assert_eq(c.max_split, 0);
    cr_assert_eq(c.expandable, 1);
    p = tu_alloc(a, 1000, NULL);
    s = tu_stats(a);
    cr_assert_eq(s.page_size, PG);
    cr_assert_eq(s.expandable_segments, 1);
    tu_free(a, p);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    cr_assert_eq(cca_destroy(a), CCA_OK);
    unsetenv("CCALLOC_CONF");
    cca_upstream_destroy(u);
}

/* The OOM line names the largest free block as cca_get_stats does: its
 * mapped part. A range's unmapped tail is a free block too, as large as the
 * address space left, which no request can have while the device is full;
 * the line named it (about 56 MiB here, the device's whole capacity on a
 * GPU) before the stats' figure was used. */
Test(expandable, the_oom_line_names_the_largest_mapped_free_block) {
    size_t cap = 64 * MiB;
    cca_upstream *u = vm_device(cap, PG);
    cca_allocator *a = exp_allocator(u, "log_oom:1,expandable_ahead:0");
    void *p = tu_alloc(a, 8 * MiB, NULL), *q = tu_alloc(a, 4 * MiB, NULL);
    tu_free(a, p); /* 8 MiB mapped and free, then q, then the range's unmapped tail */
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.largest_free_block, 8 * MiB);
    tu_log_capture log = {0};
    cca_set_log_callback(tu_capture_log, &log);
    void *r = NULL;
    cr_assert_eq(cca_alloc(a, cap, NULL, &r), CCA_ERR_OUT_OF_MEMORY);
    cca_set_log_callback(NULL, NULL);
    cr_assert_eq(log.lines, 1);
    cr_assert(strstr(log.last, "largest free block 8.00 MiB,"), "%s", log.last);
    tu_free(a, q);
    finish(a, u);
}

/* ---- the page bitmap's runs (internal) ------------------------------------ */

/* ccai_next_mapped_run and ccai_pages_prefix read the bitmap a 64-page word
 * at a time: against a page-by-page reading of random bitmaps whose length
 * is no multiple of 64 (the last word part used), runs that cross words or
 * fill them, and bounds inside a word, at every start and end. */
Test(expandable, page_runs_match_a_page_by_page_reading) {
    uint64_t rng = 12345;
    for (int round = 0; round < 400; round++) {
        size_t npages = 1 + (size_t)(ccai_splitmix64_next(&rng) % 300);
        uint64_t words[5] = {0};
        int density = (int)(ccai_splitmix64_next(&rng) % 4); /* sparse, half, dense, runs of whole words */
        for (size_t i = 0; i < npages; i++) {
            uint64_t r = ccai_splitmix64_next(&rng) % 8;
            bool on = density == 0 ? r == 0 : density == 1 ? r < 4 : density == 2 ? r != 0 : (i / 64) % 2 == 0;
            if (on)
                words[i / 64] |= (uint64_t)1 << (i % 64);
        }
        /* pages_hi: one past the highest mapped page, or anywhere above it
         * (it never falls when pages are unmapped): the searches stop there */
        size_t top = 0;
        for (size_t i = 0; i < npages; i++)
            if (words[i / 64] >> (i % 64) & 1)
                top = i + 1;
        size_t pages_hi = top + (size_t)(ccai_splitmix64_next(&rng) % (npages - top + 1));
        ccai_segment s = {.npages = npages, .mapped = words, .pages_hi = pages_hi};
        size_t prefix = 0;
        while (prefix < npages && (words[prefix / 64] >> (prefix % 64) & 1))
            prefix++;
        cr_assert_eq(ccai_pages_prefix(&s, 0), prefix, "round %d: prefix", round);
        size_t from = (size_t)(ccai_splitmix64_next(&rng) % npages);
        size_t want = from;
        while (want < npages && (words[want / 64] >> (want % 64) & 1))
            want++;
        cr_assert_eq(ccai_pages_prefix(&s, from), want, "round %d: first unmapped from %zu", round, from);
        size_t lo = (size_t)(ccai_splitmix64_next(&rng) % npages),
               hi = lo + (size_t)(ccai_splitmix64_next(&rng) % (npages - lo + 1));
        size_t i = lo, first, n, runs = 0;
        size_t k = lo; /* the page-by-page reading */
        for (;;) {
            while (k < hi && !(words[k / 64] >> (k % 64) & 1))
                k++;
            size_t j = k;
            while (j < hi && (words[j / 64] >> (j % 64) & 1))
                j++;
            bool more = ccai_next_mapped_run(&s, &i, hi, &first, &n);
            if (k >= hi) {
                cr_assert_not(more, "round %d: a run after the last in [%zu, %zu)", round, lo, hi);
                cr_assert_eq(i, hi);
                break;
            }
            cr_assert(more, "round %d: run %zu of [%zu, %zu) missed", round, runs, lo, hi);
            cr_assert_eq(first, k, "round %d: run %zu starts at %zu, expected %zu", round, runs, first, k);
            cr_assert_eq(n, j - k, "round %d: run %zu at %zu is %zu pages, expected %zu", round, runs, k, n, j - k);
            cr_assert_eq(i, j);
            k = j;
            runs++;
        }
    }
}

/* ---- snapshot ------------------------------------------------------------ */

static double json_number(const cJSON *obj, const char *key) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
    cr_assert(cJSON_IsNumber(item), "JSON key '%s' missing or not a number", key);
    return item->valuedouble;
}

static char *snapshot(const cca_allocator *a) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    cr_assert_eq(cca_write_snapshot_json(a, f), CCA_OK, "%s", cca_last_error());
    fclose(f);
    return buf;
}

/* Runs: sorted, page-aligned, inside the segment, not touching (one pair
 * per run); their sum the segment's mapped_bytes; every live block inside
 * one run (I7). Returns the segment's mapped bytes. */
static size_t check_segment_json(const cJSON *seg, size_t page) {
    const cJSON *exp = cJSON_GetObjectItemCaseSensitive(seg, "expandable");
    cr_assert(cJSON_IsTrue(exp), "segment without \"expandable\":true");
    cr_assert_eq((size_t)json_number(seg, "page"), page);
    size_t size = (size_t)json_number(seg, "size"), mapped = (size_t)json_number(seg, "mapped_bytes");
    const cJSON *runs = cJSON_GetObjectItemCaseSensitive(seg, "mapped");
    cr_assert(cJSON_IsArray(runs), "no \"mapped\" array");
    size_t sum = 0, prev_end = 0, n = 0, lo[64], hi[64];
    const cJSON *run;
    cJSON_ArrayForEach(run, runs) {
        cr_assert(cJSON_IsArray(run) && cJSON_GetArraySize(run) == 2, "a run is [offset, bytes]");
        size_t off = (size_t)cJSON_GetArrayItem(run, 0)->valuedouble;
        size_t bytes = (size_t)cJSON_GetArrayItem(run, 1)->valuedouble;
        cr_assert(bytes > 0 && off % page == 0 && bytes % page == 0, "run [%zu, %zu] not whole pages", off, bytes);
        cr_assert(n == 0 || off > prev_end, "runs out of order or touching: %zu after %zu", off, prev_end);
        cr_assert_leq(off + bytes, size);
        cr_assert_lt(n, 64);
        lo[n] = off, hi[n] = off + bytes, n++;
        prev_end = off + bytes;
        sum += bytes;
    }
    cr_assert_eq(sum, mapped, "runs sum to %zu, mapped_bytes says %zu", sum, mapped);
    const cJSON *b;
    size_t at = 0;
    cJSON_ArrayForEach(b, cJSON_GetObjectItemCaseSensitive(seg, "blocks")) {
        size_t off = (size_t)json_number(b, "offset"), bs = (size_t)json_number(b, "size");
        cr_assert_eq(off, at, "blocks tile the range");
        at += bs;
        const cJSON *state = cJSON_GetObjectItemCaseSensitive(b, "state");
        if (strcmp(state->valuestring, "free") == 0)
            continue;
        bool inside = false;
        for (size_t i = 0; i < n; i++)
            inside |= lo[i] <= off && off + bs <= hi[i];
        cr_assert(inside, "live block [%zu, +%zu) not in a mapped run", off, bs);
    }
    cr_assert_eq(at, size);
    return mapped;
}

Test(expandable, snapshot_shows_segment_kind_and_mapped_runs) {
    const size_t cap = 64 * MiB;
    cca_upstream *u = vm_device(cap, PG);
    cca_allocator *a = exp_allocator(u, NULL);
    abc x;
    alloc_abc(a, &x, cap);
    void *small = tu_alloc(a, 4096, S1);
    tu_free(a, x.B);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    cca_stats s = tu_stats(a);
    char *text = snapshot(a);
    cJSON *json = cJSON_Parse(text);
    cr_assert_not_null(json, "not JSON: %s", text);
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(json, "segment_kind");
    cr_assert(cJSON_IsString(kind) && strcmp(kind->valuestring, "expandable") == 0, "segment_kind");
    cr_assert_eq(json_number(cJSON_GetObjectItemCaseSensitive(json, "config"), "expandable"), 1);
    const cJSON *stats = cJSON_GetObjectItemCaseSensitive(json, "stats");
    cr_assert_eq((size_t)json_number(stats, "mapped_bytes"), s.mapped_bytes);
    cr_assert_eq((size_t)json_number(stats, "page_size"), PG);
    cr_assert_eq((size_t)json_number(stats, "address_space_bytes"), s.address_space_bytes);
    const cJSON *segments = cJSON_GetObjectItemCaseSensitive(json, "segments");
    cr_assert_eq(cJSON_GetArraySize(segments), (int)s.segments);
    size_t mapped = 0;
    bool found_abc = false;
    const cJSON *seg;
    cJSON_ArrayForEach(seg, segments) {
        mapped += check_segment_json(seg, PG);
        if ((size_t)json_number(seg, "live_blocks") == 2) { /* A and C: runs [0,18) and [65,98) */
            found_abc = true;
            const cJSON *runs = cJSON_GetObjectItemCaseSensitive(seg, "mapped");
            cr_assert_eq(cJSON_GetArraySize(runs), 2);
            cr_assert_eq(cJSON_GetArrayItem(cJSON_GetArrayItem(runs, 0), 0)->valuedouble, 0);
            cr_assert_eq(cJSON_GetArrayItem(cJSON_GetArrayItem(runs, 0), 1)->valuedouble, (double)(18 * PG));
            cr_assert_eq(cJSON_GetArrayItem(cJSON_GetArrayItem(runs, 1), 0)->valuedouble, (double)(65 * PG));
            cr_assert_eq(cJSON_GetArrayItem(cJSON_GetArrayItem(runs, 1), 1)->valuedouble, (double)(33 * PG));
        }
    }
    cr_assert(found_abc);
    cr_assert_eq(mapped, s.mapped_bytes);
    cJSON_Delete(json);
    free(text);
    tu_free(a, x.A), tu_free(a, x.C), tu_free(a, small);

    /* classic segments say so */
    tu_upstream t;
    cca_upstream *cu = tu_upstream_create(&t, 64 * MiB, true);
    cca_allocator *ca = tu_allocator(cu, "expandable:1");
    void *p = tu_alloc(ca, 4096, NULL);
    text = snapshot(ca);
    json = cJSON_Parse(text);
    cr_assert_not_null(json);
    kind = cJSON_GetObjectItemCaseSensitive(json, "segment_kind");
    cr_assert(cJSON_IsString(kind) && strcmp(kind->valuestring, "classic") == 0);
    cJSON_Delete(json);
    free(text);
    tu_free(ca, p);
    tu_teardown(ca, cu);
    finish(a, u);
}

/* ---- pending blocks ------------------------------------------------------ */

Test(expandable, a_pending_block_keeps_its_pages_through_trim) {
    tu_faulty f;
    cca_upstream *u = fx_create(&f, 32 * MiB, true);
    cca_allocator *a = exp_allocator(u, NULL);
    char *x = tu_alloc(a, 3 * MiB, S0), *y = tu_alloc(a, 2 * MiB, S0);
    tu_fill(y, 2 * MiB, 7);
    cr_assert_eq(cca_record_stream(a, x, S1), CCA_OK);
    f.hold_events = true;
    f.sync_keeps_events = true;
    tu_free(a, x);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.pending_blocks, 1);
    cca_release_report r;
    cr_assert_eq(cca_empty_cache(a, &r), CCA_ERR_NOT_READY, "the event is still incomplete");
    fx_agree(a, u, &f, "trim with a pending block");
    TU_ASSERT_READABLE(x);
    TU_ASSERT_READABLE(x + 3 * MiB - 1);
    s = tu_stats(a);
    cr_assert_eq(s.pending_blocks, 1);
    cr_assert_geq(s.mapped_bytes, 5 * MiB);
    cr_assert(tu_check_fill(y, 2 * MiB, 7));
    f.events_done = f.events_recorded; /* the other stream finished */
    cr_assert_eq(cca_empty_cache(a, &r), CCA_OK, "%s", cca_last_error());
    s = tu_stats(a);
    cr_assert_eq(s.pending_blocks, 0);
    TU_ASSERT_FAULTS(x);
    TU_ASSERT_READABLE(y);
    cr_assert_eq(s.reserved_bytes, s.allocated_bytes + r.free_bytes_trapped);
    fx_agree(a, u, &f, "after the event");
    tu_free(a, y);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    fx_agree(a, u, &f, "end");
    cr_assert_eq(tu_stats(a).segments, 0);
    cr_assert_eq(cca_destroy(a), CCA_OK);
    cr_assert_eq(f.events_live, 0);
    cca_upstream_destroy(u);
    cca_upstream_destroy(f.inner);
}

/* ---- slack over unmapped pages ------------------------------------------------- */

/* A block's remainder too small to be a block of its own (<= small_max in
 * the medium and large pools) stays with it as slack, and every byte of a
 * live block is mapped (I7). Where that slack lies in pages that are not
 * mapped, keeping it would map pages the request does not need: it is
 * split off instead, a free block over unmapped pages. Found by
 * allocator/fuzz/fuzz_api.c: on a device whose size is not a whole number
 * of pages, a request a little under the device's size failed, since its
 * range (the device's size rounded up to the page) left it a slack whose
 * last page the device cannot hold. */
Test(expandable, slack_past_the_device_is_not_mapped) {
    cca_upstream *u = vm_device(3 * MiB + 28 * KiB, PG);
    cca_allocator *a = exp_allocator(u, "expandable_ahead:0");
    void *p = NULL;
    cr_assert_eq(cca_alloc(a, 3 * MiB, NULL, &p), CCA_OK, "3 MiB on a 3 MiB + 28 KiB device: %s", cca_last_error());
    cr_assert_eq(tu_block_size(a, p), 3 * MiB, "the 64 KiB remainder split off, not slack");
    cr_assert_eq(tu_upstream_stats(u).vm_mapped_bytes, 3 * MiB, "the request's pages alone");
    tu_check(a);
    tu_free(a, p);
    finish(a, u);
}

/* The class: a block whose slack would reach pages that are not mapped,
 * wherever it lies (here a hole trim unmapped): the
 * request maps its own pages and no more, the remainder is a free block,
 * and it merges back when the block is freed (the range's unmapped tail is
 * the test above). Slack in pages already
 * mapped stays slack (it costs nothing, and a block of its own there would
 * only wait for its neighbour to be freed). */
Test(expandable, slack_over_unmapped_pages_is_split_off) {
    cca_upstream *u = vm_device(256 * MiB, PG);
    cca_allocator *a = exp_allocator(u, "expandable_ahead:0");
    /* a hole: B's 4 MiB between two live blocks, unmapped by trim */
    void *A = tu_alloc(a, 4 * MiB, NULL), *B = tu_alloc(a, 4 * MiB, NULL), *C = tu_alloc(a, 4 * MiB, NULL);
    tu_free(a, B);
    cr_assert_eq(cca_trim(a, 0, NULL), CCA_OK, "%s", cca_last_error());
    size_t mapped = tu_upstream_stats(u).vm_mapped_bytes;
    void *p = tu_alloc(a, 4 * MiB - 512 * KiB, NULL); /* best fit: B's hole, a 512 KiB remainder */
    cr_assert_eq((uintptr_t)p, (uintptr_t)B, "best fit takes the hole");
    cr_assert_eq(tu_block_size(a, p), 4 * MiB - 512 * KiB, "the unmapped remainder is split off");
    cr_assert_eq(tu_upstream_stats(u).vm_mapped_bytes - mapped, 4 * MiB - 512 * KiB, "its pages alone mapped");
    tu_check(a);
    tu_free(a, p); /* merges with the remainder: B's hole again */
    tu_check(a);
    /* slack in mapped pages stays slack: B's pages mapped again, then a
     * request 512 KiB short of them */
    void *full = tu_alloc(a, 4 * MiB, NULL);
    cr_assert_eq((uintptr_t)full, (uintptr_t)B);
    tu_free(a, full);
    void *r = tu_alloc(a, 4 * MiB - 512 * KiB, NULL);
    cr_assert_eq((uintptr_t)r, (uintptr_t)B);
    cr_assert_eq(tu_block_size(a, r), 4 * MiB, "mapped slack stays with the block, as in a classic segment");
    tu_free(a, r);
    tu_free(a, A);
    tu_free(a, C);
    tu_check(a);
    finish(a, u);
}

/* A tail map the device refuses is tried again without its ahead pages
 * only when they added pages: ahead pages mapped already leave the same
 * map, which the device would refuse again (before, a second vm_map of
 * the same pages, refused). Ahead = 1 page (expandable_ahead:1, the hook's
 * cap one page, no least step). */
Test(expandable, a_refused_tail_map_whose_ahead_pages_are_mapped_is_not_asked_twice) {
    const size_t cap = 8 * PG;
    cca_upstream *u = vm_device(cap, PG);
    cca_allocator *a = rule_allocator(u, "expandable:1,log_oom:0,small_pool:0,expandable_ahead:1", 0, PG);
    char *x = tu_alloc(a, PG, S0); /* page 0 */
    char *y = tu_alloc(a, PG, S0); /* page 1, and page 2 ahead */
    char *z = tu_alloc(a, PG, S0); /* page 2: mapped */
    cr_assert_eq(tu_stats(a).mapped_bytes, 3 * PG);
    tu_free(a, x);
    cr_assert_eq(cca_trim(a, 0, NULL), CCA_OK, "%s", cca_last_error()); /* page 0 goes */
    tu_free(a, y);
    tu_free(a, z);                               /* the tail is the whole range: page 0 unmapped, 1 and 2 mapped */
    void *tenant = tenant_take(u, cap - 2 * PG); /* the device is full */
    /* page 0 and its ahead page 1 (mapped): one map of page 0, refused;
     * then the retry unmaps pages 1 and 2 and maps page 0 */
    char *p = tu_alloc(a, PG, S0);
    cr_assert_eq(p, x);
    cr_assert_eq(tu_upstream_stats(u).vm_failed_maps, 1, "the refused map was not asked again");
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.alloc_retries, 1);
    cr_assert_eq(s.mapped_bytes, PG);
    agree(a, u, PG, 0, "after the retry");
    tu_free(a, p);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    tenant_give_back(u, tenant);
    finish(a, u);
}

/* The split is decided before the block's pages are mapped (step 6: a
 * remainder that reaches an unmapped page is cut off), also when the block
 * comes from the retry's take: the ahead page that take maps over the
 * remainder does not turn the remainder into slack (before, the block held
 * it: 16 pages for a 15-page request). Ahead = 1 page, as above. */
Test(expandable, a_split_decided_before_the_map_holds_through_the_retry) {
    const size_t cap = 32 * PG;
    cca_upstream *u = vm_device(cap, PG);
    cca_allocator *a =
        rule_allocator(u, "expandable:1,log_oom:0,small_pool:0,small_max:65536,expandable_ahead:1", 0, PG);
    char *x = tu_alloc(a, 8 * PG, S0);     /* [0,8) */
    char *y = tu_alloc(a, 8 * PG, S0);     /* [8,16), page 16 ahead */
    tu_free(a, x);                         /* [0,8) free, mapped */
    void *tenant = tenant_take(u, 7 * PG); /* 8 pages left */
    /* 15 pages at the tail [16,32): its remainder, page 31, is unmapped:
     * cut off. Pages 17..30 and page 31 ahead are refused (8 pages free);
     * the retry unmaps page 16 and 7 of x's pages, then maps [16,32) */
    char *p = tu_alloc(a, 15 * PG, S0);
    cr_assert_eq(p, y + 8 * PG);
    cr_assert_eq(tu_block_size(a, p), 15 * PG, "the remainder stays a free block");
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.alloc_retries, 1);
    cr_assert_eq(s.allocated_bytes, 23 * PG);
    cr_assert_eq(s.mapped_bytes, 25 * PG, "x's last page, y, the request and the ahead page");
    cr_assert_eq(s.cached_bytes, 2 * PG);
    agree(a, u, PG, 0, "after the retry");
    tu_free(a, p);
    tu_free(a, y);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    tenant_give_back(u, tenant);
    finish(a, u);
}
