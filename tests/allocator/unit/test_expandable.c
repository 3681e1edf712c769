/*
 * test_expandable.c — allocator/src/expandable.c: expandable segments
 * (expandable:1), with release.c's page release and pool.c's mapping.
 *
 * An expandable segment is a range of address space (vm_reserve) as large
 * as the device, one per (stream, pool), whose pages are mapped as blocks
 * need them and unmapped by trim, empty-cache and the OOM retry when they
 * lie wholly inside a free block. The tests run on the simulated device
 * (cca_upstream_host_create_with) with a 64 KiB granularity (2 MiB where
 * the GPU figure matters), so that many pages fit in a few MiB:
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
 *                it calls vm_map far less often than cca_alloc; an ahead map
 *                the device refuses is retried without the ahead pages.
 *   OOM          a request above the device fails at once; a request on
 *                one stream unmaps the cached pages of another stream's
 *                segment through the retry.
 *   faults       a wrapper upstream fails the N-th call of each kind (once,
 *                or from then on) over a scripted sequence: invariants, the
 *                accounts, live data and, once the faults stop, a clean
 *                empty-cache hold for every N; with and without events. A
 *                map refused part-way whose rollback unmap is refused too.
 *   pending      a block waiting on another stream's event keeps its pages
 *                through a trim.
 *   random       20000 seeded steps on two streams, invariants and
 *                accounts after each.
 *   threads      six threads allocating, freeing and trimming at once.
 *   greedy       the arena over an expandable segment: mapped whole at
 *                creation, trimmed page by page, mapped again on demand.
 *   config       expandable:1 with max_split is refused; CCALLOC_CONF.
 *   bitmap       the page bitmap's runs and mapped prefix (internal.h),
 *                read a word at a time, against a page-by-page reading.
 *   snapshot     "segment_kind":"expandable" and each segment's mapped runs.
 */
#include "alloc_test_util.h"
#include "ccai_rng.h"
#include "internal.h"

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PG ((size_t)64 * KiB) /* the granularity of most tests */
#define S0 ((cca_stream)0x100)
#define S1 ((cca_stream)0x200)

/* ---- helpers ------------------------------------------------------------- */

static size_t round_to(size_t v, size_t to) {
    return (v + to - 1) / to * to;
}

static size_t rnd(size_t size) { /* what the allocator makes of a request */
    return round_to(size, CCA_GRANULARITY);
}

/* The device's vm_backing in this test: CCA_VM_PAGES, but the whole-maps
 * twins of the fault sweep, the random sequence and the threads set
 * CCA_VM_WHOLE_MAPS, and their allocators cut maps at whole_chunk (three
 * pages: runs are cut, and a trim frees a map only whole; 2 MiB for the
 * sweep, which fails every call of its script in turn: a few maps per
 * request keep it to seconds). */
static int backing = CCA_VM_PAGES;
static size_t whole_chunk = 3 * PG;
/* More config for the allocators of exp_allocator (the hold_peak twins of
 * the fault sweep and the random sequence); NULL: none. */
static const char *extra_conf;

static cca_upstream *vm_device(size_t capacity, size_t gran) {
    return tu_vm_device_backed(capacity, gran, backing);
}

/* Device memory held by another tenant (classic cca_upstream_alloc), which
 * agree() leaves out of the device's count. */
static size_t tenant_bytes;

/* Bytes the device says are used (capacity - free). */
static size_t device_used(cca_upstream *u) {
    size_t free_b = 0, total_b = 0;
    cr_assert_eq(cca_upstream_mem_info(u, &free_b, &total_b), CCA_OK);
    return total_b - free_b;
}

/* The accounts of an allocator alone on host device u agree: mapped bytes
 * = the upstream's = what the device reports used = reserved bytes (no
 * classic segment); address space = the upstream's reserved ranges =
 * segments * `range` (0: not checked); the call counts agree too. */
static void agree(const cca_allocator *a, cca_upstream *u, size_t page, size_t range, const char *what) {
    cca_status st = cca_check_invariants(a);
    cr_assert_eq(st, CCA_OK, "%s: invariants: %s", what, cca_last_error());
    cca_stats s = tu_stats(a);
    cca_upstream_stats us = tu_upstream_stats(u);
    cr_assert_eq(s.page_size, page, "%s: page_size %zu", what, s.page_size);
    cr_assert_eq(s.mapped_bytes, us.vm_mapped_bytes, "%s: mapped %zu, upstream says %zu", what, s.mapped_bytes,
                 us.vm_mapped_bytes);
    cr_assert_eq(s.mapped_bytes + tenant_bytes, device_used(u), "%s: mapped %zu, device uses %zu", what, s.mapped_bytes,
                 device_used(u));
    cr_assert_eq(s.reserved_bytes, s.mapped_bytes, "%s: reserved %zu != mapped %zu", what, s.reserved_bytes,
                 s.mapped_bytes);
    cr_assert_eq(s.address_space_bytes, us.vm_reserved_bytes, "%s: address space %zu, upstream %zu", what,
                 s.address_space_bytes, us.vm_reserved_bytes);
    cr_assert_eq(s.segments, s.expandable_segments, "%s: a classic segment", what);
    if (range)
        cr_assert_eq(s.address_space_bytes, s.expandable_segments * range, "%s: %zu segments, %zu bytes of space", what,
                     s.expandable_segments, s.address_space_bytes);
    cr_assert_eq(s.cached_bytes, s.reserved_bytes - s.allocated_bytes, "%s: cached %zu", what, s.cached_bytes);
    cr_assert_eq(s.vm_maps, us.vm_map_calls, "%s: vm_maps %llu, upstream %llu", what, (unsigned long long)s.vm_maps,
                 (unsigned long long)us.vm_map_calls);
    cr_assert_eq(s.vm_unmaps, us.vm_unmap_calls, "%s", what);
    cr_assert_eq((s.pages_mapped - s.pages_unmapped) * page, s.mapped_bytes, "%s: page counters", what);
    cr_assert_eq(us.alloc_calls, tenant_bytes ? 1 : 0, "%s: a classic upstream allocation", what);
}

/* Empty the cache (nothing live): everything goes back, to the upstream's
 * own count; then destroy both. */
static void finish(cca_allocator *a, cca_upstream *u) {
    tu_empty_all(a, u);
    cr_assert_eq(device_used(u), 0);
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    cca_upstream_destroy(u);
}

/* The least step is off here (expandable_ahead_min:0): these tests follow
 * the fractional rule page by page; the_least_step_... turns it on. */
static cca_allocator *exp_allocator(cca_upstream *u, const char *extra) {
    char conf[256], chunk[64] = "";
    if (backing == CCA_VM_WHOLE_MAPS)
        snprintf(chunk, sizeof chunk, ",expandable_chunk:%zu", whole_chunk);
    snprintf(conf, sizeof conf, "expandable:1,log_oom:0,expandable_ahead_min:0%s%s%s%s%s", extra ? "," : "",
             extra ? extra : "", chunk, extra_conf ? "," : "", extra_conf ? extra_conf : "");
    return tu_allocator(u, conf);
}

/* The growth rule for blocks taken one after another from the tail of one
 * segment, every page below the tail mapped: a request that needs pages
 * beyond `end` maps them plus min(max(mapped x ahead, least - its new
 * pages), ahead_max) more (whole pages, not past the range; defaults 1/16,
 * 20 MiB and 64 MiB; least 0 in most tests) in one vm_map call. */
typedef struct growth {
    size_t page, npages;
    size_t off;  /* where the next block starts */
    size_t end;  /* pages mapped: [0, end)     */
    size_t maps; /* vm_map calls               */
    double ahead;
    size_t ahead_max;
    size_t least; /* expandable_ahead_min, in bytes */
    uintptr_t base;
} growth;

static void growth_init(growth *g, size_t page, size_t range) {
    memset(g, 0, sizeof *g);
    g->page = page;
    g->npages = range / page;
    g->ahead = 1.0 / 16;
    g->ahead_max = 64 * MiB;
}

/* The offset of a block of `size` bytes (its pages mapped as the rule says). */
static size_t growth_take(growth *g, size_t size) {
    size_t at = g->off, r = rnd(size);
    size_t hi = round_to(at + r, g->page) / g->page;
    if (hi > g->end) {
        double want = (double)(g->end * g->page) * g->ahead;
        size_t step = (hi - g->end) * g->page; /* the request's new pages */
        if (g->least > step && want < (double)(g->least - step))
            want = (double)(g->least - step);
        size_t ahead = (want < (double)g->ahead_max ? (size_t)want : g->ahead_max) / g->page;
        if (ahead > g->npages - hi)
            ahead = g->npages - hi;
        g->end = hi + ahead;
        g->maps++;
    }
    g->off = at + r;
    return at;
}

/* Allocate from the model's segment and check the pointer: the first block
 * of a segment starts its (page-aligned) range, the next ones follow. */
static void *take(cca_allocator *a, growth *g, size_t size, cca_stream s) {
    size_t off = growth_take(g, size);
    void *p = tu_alloc(a, size, s);
    if (off == 0) {
        cr_assert_eq((uintptr_t)p % g->page, 0, "a range starts on a page: %p", p);
        g->base = (uintptr_t)p;
    }
    cr_assert_eq((uintptr_t)p, g->base + off, "block of %zu at %p, expected base + %zu", size, p, off);
    return p;
}

#define PAGE_AT(base, i) ((const char *)(base) + (i)*PG)

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

/* expandable_ahead and expandable_ahead_max set the growth rule: the same
 * 120 tail requests map exactly what the model says for each setting
 * (pointers, vm_map calls, mapped bytes), from one map per request with the
 * ahead off to a few with half of what is mapped mapped ahead. */
/* n (<= 120) requests of a page and 512 B, one after another from the tail
 * of one segment of an allocator configured by conf, checked against the
 * model g (pointers, maps, mapped bytes, the device's count); then freed
 * and emptied. *c: the allocator's config. Returns the model's maps. */
static size_t grow_like_the_model(const char *conf, growth *g, size_t cap, size_t n, cca_config *c) {
    cca_upstream *u = vm_device(cap, PG);
    cca_allocator *a = exp_allocator(u, conf);
    cr_assert_eq(cca_get_config(a, c), CCA_OK);
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

Test(expandable, the_ahead_options_set_the_growth_rule) {
    const size_t cap = 512 * MiB, n = 120;
    static const struct {
        const char *conf;
        double ahead;
        size_t ahead_max;
    } cases[] = {
        {"expandable_ahead_max:0", 0.0625, 0},
        {"expandable_ahead:0.0625", 0.0625, 64 * MiB},
        {"expandable_ahead:0.5,expandable_ahead_max:1G", 0.5, 1024 * MiB},
        {"expandable_ahead:1,expandable_ahead_max:24M", 1.0, 24 * MiB},
    };
    size_t maps[4];
    for (size_t k = 0; k < 4; k++) {
        char conf[128];
        snprintf(conf, sizeof conf, "small_pool:0,%s", cases[k].conf);
        growth g;
        growth_init(&g, PG, cap);
        g.ahead = cases[k].ahead;
        g.ahead_max = cases[k].ahead_max;
        cca_config c;
        maps[k] = grow_like_the_model(conf, &g, cap, n, &c);
        cr_assert_eq(c.expandable_ahead, cases[k].ahead, "%s", conf);
        cr_assert_eq(c.expandable_ahead_max, cases[k].ahead_max, "%s", conf);
    }
    cr_assert_eq(maps[0], 120, "no ahead: one map per request that crosses into a new page");
    cr_assert_lt(maps[2], maps[1], "mapping more ahead makes fewer calls");
    cr_assert_lt(maps[1], maps[0]);
}

/* expandable_ahead_min: while little is mapped, 1/16 of it is less than a
 * page, and each request crossing into a new page would be a call of its
 * own; a step maps at least expandable_ahead_min instead (the request's new
 * pages included), in the small pool's range at most small_segment, and
 * never more than expandable_ahead_max beyond the request. */
Test(expandable, the_least_step_cuts_calls_while_a_segment_starts_out) {
    const size_t cap = 512 * MiB, n = 120;
    const size_t leasts[] = {0, 1 * MiB, 4 * MiB};
    size_t maps[3];
    for (size_t k = 0; k < 3; k++) {
        char conf[128];
        snprintf(conf, sizeof conf, "small_pool:0,expandable_ahead_min:%zu", leasts[k]);
        growth g;
        growth_init(&g, PG, cap);
        g.least = leasts[k];
        cca_config c;
        maps[k] = grow_like_the_model(conf, &g, cap, n, &c);
        cr_assert_eq(c.expandable_ahead_min, leasts[k], "%s", conf);
    }
    /* the model's numbers, 120 requests of a page and 512 B (121 pages):
     * without a least step, 1/16 ahead is under a page until 16 pages are
     * mapped, and each of the first 16 requests is a call */
    cr_assert_eq(maps[0], 42);
    cr_assert_eq(maps[1], 8);
    cr_assert_eq(maps[2], 2);

    /* defaults (20 MiB) on 2 MiB pages: the first small request maps
     * small_segment (2 MiB) of the small range, the first large one 20 MiB
     * of the large range; expandable_ahead_max caps the step, 0 turns it off */
    static const struct {
        const char *conf;
        size_t small, large; /* bytes mapped in each range after the two requests */
    } cases[] = {
        {"", 2 * MiB, 20 * MiB},
        {"expandable_ahead_max:2M", 2 * MiB, 6 * MiB},
        {"expandable_ahead_max:0", 2 * MiB, 4 * MiB},
        {"expandable_ahead_min:0", 2 * MiB, 4 * MiB},
        {"expandable_ahead_min:64M,small_segment:8M", 8 * MiB, 64 * MiB},
        /* the largest step: the whole range (the device), which the small
         * range's 2 MiB leave no room for: refused, retried without ahead */
        {"expandable_ahead_min:18446744073709551615,expandable_ahead_max:18446744073709551615", 2 * MiB, 4 * MiB},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char conf[200];
        snprintf(conf, sizeof conf, "expandable:1,log_oom:0%s%s", cases[k].conf[0] ? "," : "", cases[k].conf);
        cca_upstream *u = vm_device(cap, 2 * MiB);
        cca_allocator *a = tu_allocator(u, conf);
        void *small = tu_alloc(a, 4 * KiB, S0);
        cca_stats s = tu_stats(a);
        cr_assert_eq(s.mapped_bytes, cases[k].small, "%s: small range %zu", conf, s.mapped_bytes);
        void *large = tu_alloc(a, 3 * MiB, S0);
        s = tu_stats(a);
        cr_assert_eq(s.mapped_bytes - cases[k].small, cases[k].large, "%s: large range %zu", conf,
                     s.mapped_bytes - cases[k].small);
        cr_assert_eq(s.vm_maps, 2, "%s: one map per range", conf);
        agree(a, u, 2 * MiB, 0, conf);
        tu_free(a, small);
        tu_free(a, large);
        finish(a, u);
    }
}

Test(expandable, an_ahead_map_the_device_refuses_is_retried_without_it) {
    /* 8 MiB device, 4.5 MiB held by another tenant: 56 pages for maps */
    const size_t cap = 8 * MiB;
    cca_upstream *u = vm_device(cap, PG);
    void *tenant = NULL;
    cr_assert_eq(cca_upstream_alloc(u, 4 * MiB + 512 * KiB, &tenant), CCA_OK);
    tenant_bytes = 4 * MiB + 512 * KiB;
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
    cr_assert_eq(cca_upstream_free(u, tenant, 4 * MiB + 512 * KiB), CCA_OK);
    tenant_bytes = 0;
    finish(a, u);
}

/* ---- OOM ----------------------------------------------------------------- */

Test(expandable, a_request_above_the_device_fails_without_upstream_calls) {
    const size_t cap = 16 * MiB;
    cca_upstream *u = vm_device(cap, PG);
    cca_allocator *a = exp_allocator(u, NULL);
    void *keep = tu_alloc(a, 2 * MiB, S0);
    cca_stats before = tu_stats(a);
    cca_upstream_stats ub = tu_upstream_stats(u);
    void *p = (void *)1;
    cr_assert_eq(cca_alloc(a, cap + 1, S0, &p), CCA_ERR_OUT_OF_MEMORY);
    cr_assert_null(p);
    cr_assert_eq(cca_alloc(a, cap + 1, S1, &p), CCA_ERR_OUT_OF_MEMORY, "a stream with no segment yet");
    cca_stats s = tu_stats(a);
    cca_upstream_stats us = tu_upstream_stats(u);
    cr_assert_eq(s.ooms, before.ooms + 2);
    cr_assert_eq(s.alloc_retries, before.alloc_retries, "no retry: it can never succeed");
    cr_assert_eq(s.vm_maps, before.vm_maps);
    cr_assert_eq(s.upstream_allocs, before.upstream_allocs);
    cr_assert_eq(s.segments, before.segments);
    cr_assert_eq(us.vm_map_calls, ub.vm_map_calls);
    cr_assert_eq(us.vm_failed_maps, ub.vm_failed_maps);
    cr_assert_eq(us.vm_reserved_bytes, ub.vm_reserved_bytes);
    agree(a, u, PG, cap, "refused");
    tu_free(a, keep);
    finish(a, u);
}

Test(expandable, the_retry_unmaps_another_streams_cached_pages) {
    const size_t cap = 16 * MiB;
    cca_upstream *u = vm_device(cap, PG);
    cca_allocator *a = exp_allocator(u, NULL);
    char *x = tu_alloc(a, 14 * MiB, S0); /* 224 pages, none ahead (first map) */
    tu_free(a, x);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.mapped_bytes, 14 * MiB, "cached: mapped, free");
    /* 8 MiB on S1: its own range; 2 MiB free on the device: refused, then
     * the retry unmaps S0's pages, highest first, just enough:
     * shortfall = 8 MiB + one page - 2 MiB = 97 pages. No map is refused:
     * the device's free memory is asked before S1's range is reserved */
    char *y = tu_alloc(a, 8 * MiB, S1);
    cr_assert_eq((uintptr_t)y % PG, 0);
    s = tu_stats(a);
    cr_assert_eq(s.alloc_retries, 1);
    cr_assert_eq(s.ooms, 0);
    cr_assert_eq(s.vm_unmaps, 1);
    cr_assert_eq(s.pages_unmapped, 97);
    cr_assert_eq(s.mapped_bytes, 16 * MiB - PG);
    cr_assert_eq(s.expandable_segments, 2);
    cr_assert_eq(tu_upstream_stats(u).vm_failed_maps, 0, "a map the device's free memory could not hold");
    agree(a, u, PG, cap, "after the retry");
    TU_ASSERT_READABLE(x + 14 * MiB - 97 * PG - 1);
    TU_ASSERT_FAULTS(x + 14 * MiB - 97 * PG);
    tu_fill(y, 8 * MiB, 9);
    cr_assert(tu_check_fill(y, 8 * MiB, 9));
    /* 14 MiB on S0 again: 97 of its pages are missing and the device has
     * one page left; S1's 128 cached pages are enough room */
    tu_free(a, y);
    char *x2 = tu_alloc(a, 14 * MiB, S0);
    cr_assert_eq(x2, x, "S0's range again");
    s = tu_stats(a);
    cr_assert_eq(s.alloc_retries, 2);
    cr_assert_eq(s.ooms, 0);
    agree(a, u, PG, cap, "S0 again");
    TU_ASSERT_FAULTS(y); /* S1's cached pages went back */
    TU_ASSERT_FAULTS(y + 8 * MiB - 1);
    tu_fill(x2, 14 * MiB, 10);
    cr_assert(tu_check_fill(x2, 14 * MiB, 10));
    tu_free(a, x2);
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
    cr_assert_eq(c.expandable, 0, "off by default");
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

    /* CCALLOC_CONF, when cca_create gets no config */
    cr_assert_eq(setenv("CCALLOC_CONF", "expandable:1", 1), 0);
    cca_config_default(&c);
    cr_assert_eq(cca_config_apply_env(&c), CCA_OK);
    cr_assert_eq(c.expandable, 1);
    cr_assert_eq(cca_create(NULL, u, &a), CCA_OK, "%s", cca_last_error());
    void *p = tu_alloc(a, 1000, NULL);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.page_size, PG);
    cr_assert_eq(s.expandable_segments, 1);
    tu_free(a, p);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    cr_assert_eq(cca_destroy(a), CCA_OK);
    /* a refused combination in the environment: logged, the defaults used */
    tu_log_capture log = {0};
    cca_set_log_callback(tu_capture_log, &log);
    cr_assert_eq(setenv("CCALLOC_CONF", "expandable:1,max_split:64M", 1), 0);
    cr_assert_eq(cca_create(NULL, u, &a), CCA_OK, "%s", cca_last_error());
    cca_set_log_callback(NULL, NULL);
    cr_assert_eq(log.lines, 1);
    cr_assert(strstr(log.last, "max_split"), "%s", log.last);
    p = tu_alloc(a, 1000, NULL);
    s = tu_stats(a);
    cr_assert_eq(s.page_size, 0);
    cr_assert_eq(s.expandable_segments, 0);
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
    cca_allocator *a = exp_allocator(u, "log_oom:1,expandable_ahead_max:0");
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

/* ---- faults -------------------------------------------------------------- */

/* The fault-injecting wrapper (tu_faulty, alloc_test_util.h) over a new host
 * device of `capacity` bytes, granularity PG: call number fail_at[k] of kind
 * k fails (once, or from then on: sticky); calls[k] counts every call of k,
 * ok[k] those the device granted. Events (when asked for) are the wrapper's
 * own tokens, complete when recorded unless held; synchronize completes them
 * unless told not to. */
static cca_upstream *fx_create(tu_faulty *f, size_t capacity, bool with_events) {
    cca_upstream *u = tu_faulty_create(f, vm_device(capacity, PG), "fx", with_events);
    cr_assert_eq(cca_upstream_has_vm(u), 1);
    return u;
}

/* The allocator's accounts agree with the wrapper's counts and the inner
 * device's: mapped, reserved address space, map and unmap calls. */
static void fx_agree(const cca_allocator *a, cca_upstream *u, const tu_faulty *f, const char *what) {
    cca_status st = cca_check_invariants(a);
    cr_assert_eq(st, CCA_OK, "%s: invariants: %s", what, cca_last_error());
    cca_stats s = tu_stats(a);
    cca_upstream_stats inner = tu_upstream_stats(f->inner), outer = tu_upstream_stats(u);
    cr_assert_eq(s.mapped_bytes, inner.vm_mapped_bytes, "%s: mapped %zu, device %zu", what, s.mapped_bytes,
                 inner.vm_mapped_bytes);
    cr_assert_eq(s.mapped_bytes, outer.vm_mapped_bytes, "%s", what);
    cr_assert_eq(s.address_space_bytes, inner.vm_reserved_bytes, "%s: address space %zu, device %zu", what,
                 s.address_space_bytes, inner.vm_reserved_bytes);
    cr_assert_eq(s.reserved_bytes, s.mapped_bytes, "%s", what);
    cr_assert_eq(s.segments, s.expandable_segments, "%s", what);
    cr_assert_eq(s.vm_maps, f->ok[TU_FAULT_MAP], "%s: vm_maps %llu, granted %llu", what, (unsigned long long)s.vm_maps,
                 (unsigned long long)f->ok[TU_FAULT_MAP]);
    cr_assert_eq(s.vm_unmaps, f->ok[TU_FAULT_UNMAP], "%s: vm_unmaps %llu, granted %llu", what,
                 (unsigned long long)s.vm_unmaps, (unsigned long long)f->ok[TU_FAULT_UNMAP]);
    cr_assert_eq(s.upstream_allocs, f->ok[TU_FAULT_RESERVE] + f->ok[TU_FAULT_MAP], "%s: upstream_allocs", what);
    cr_assert_eq(s.upstream_frees, f->ok[TU_FAULT_UNMAP] + f->ok[TU_FAULT_RELEASE], "%s: upstream_frees", what);
    cr_assert_eq(f->calls[TU_FAULT_ALLOC] + f->calls[TU_FAULT_FREE], 0, "%s: classic calls with expandable:1", what);
}

/* The scripted sequence: allocations on two streams and both pools, a
 * record_stream, frees, trims, an empty-cache, and a request that needs
 * the retry (24 MiB device). */
typedef enum { OP_ALLOC, OP_FREE, OP_RECORD, OP_TRIM } op_kind;
typedef struct op {
    op_kind kind;
    int slot;
    size_t size; /* alloc: bytes; trim: keep (SIZE_MAX: empty_cache) */
    cca_stream stream;
} op;

static const op script[] = {
    {OP_ALLOC, 0, 100 * KiB, S0},
    {OP_ALLOC, 1, 3 * MiB, S0},
    {OP_ALLOC, 2, 5 * MiB + 7 * KiB, S1},
    {OP_ALLOC, 3, 2 * MiB, S0},
    {OP_RECORD, 3, 0, S1},
    {OP_FREE, 1, 0, NULL},
    {OP_TRIM, 0, 6 * MiB, NULL},
    {OP_ALLOC, 4, 1 * MiB + 512, S0},
    {OP_FREE, 3, 0, NULL},
    {OP_ALLOC, 5, 16 * MiB, S1},
    {OP_FREE, 2, 0, NULL},
    {OP_TRIM, 0, SIZE_MAX, NULL},
    {OP_ALLOC, 6, 200 * KiB, S1},
    {OP_ALLOC, 7, 5 * MiB, S0},
    {OP_FREE, 0, 0, NULL},
    {OP_FREE, 4, 0, NULL},
    {OP_TRIM, 0, 0, NULL},
    {OP_FREE, 5, 0, NULL},
    {OP_ALLOC, 8, 3 * MiB, S1},
    {OP_FREE, 6, 0, NULL},
    {OP_FREE, 7, 0, NULL},
    {OP_TRIM, 0, 4 * MiB, NULL},
    {OP_FREE, 8, 0, NULL},
    {OP_TRIM, 0, SIZE_MAX, NULL},
};
enum { SCRIPT_LEN = sizeof script / sizeof script[0], SLOTS = 9 };

typedef struct fx_run {
    tu_fault_kind kind;
    uint64_t at; /* 0: no fault */
    bool sticky;
    uint64_t calls[TU_FAULT_KINDS]; /* out */
    uint64_t retries;         /* out */
    uint64_t holds;           /* out: peak_holds */
} fx_run;

static void run_script(fx_run *run, bool with_events) {
    tu_faulty f;
    cca_upstream *u = fx_create(&f, 24 * MiB, with_events);
    cca_allocator *a = exp_allocator(u, NULL);
    if (run->at) {
        f.fail_at[run->kind] = run->at;
        f.sticky[run->kind] = run->sticky;
    }
    char what[160];
    struct {
        char *p;
        size_t size;
    } slot[SLOTS] = {{0}};
    for (int i = 0; i < SCRIPT_LEN; i++) {
        const op *o = &script[i];
        snprintf(what, sizeof what, "%s N=%llu%s, step %d", tu_fault_names[run->kind], (unsigned long long)run->at,
                 run->sticky ? " (sticky)" : "", i);
        uint64_t failures = f.failures;
        cca_stats before = tu_stats(a);
        cca_status st = CCA_OK;
        switch (o->kind) {
        case OP_ALLOC: {
            void *p = (void *)1;
            st = cca_alloc(a, o->size, o->stream, &p);
            if (st == CCA_OK) {
                slot[o->slot].p = p;
                slot[o->slot].size = o->size;
                tu_fill(p, o->size, (uint64_t)(i + 1));
            } else {
                cr_assert_eq(st, CCA_ERR_OUT_OF_MEMORY, "%s: alloc: %s", what, cca_status_string(st));
                cr_assert(run->at && f.failures > 0, "%s: OOM without a fault: %s", what, cca_last_error());
                cr_assert_null(p);
                cca_stats s = tu_stats(a);
                cr_assert_eq(s.allocated_bytes, before.allocated_bytes, "%s", what);
                cr_assert_eq(s.active_blocks, before.active_blocks, "%s", what);
            }
            break;
        }
        case OP_FREE:
            if (!slot[o->slot].p)
                break;
            st = cca_free(a, slot[o->slot].p);
            /* consumed either way; a failed synchronize holds the block */
            cr_assert(st == CCA_OK || (st == CCA_ERR_UPSTREAM && run->kind == TU_FAULT_SYNC && f.failures > failures),
                      "%s: free: %s", what, cca_status_string(st));
            slot[o->slot].p = NULL;
            break;
        case OP_RECORD:
            if (slot[o->slot].p)
                cr_assert_eq(cca_record_stream(a, slot[o->slot].p, o->stream), CCA_OK, "%s", what);
            break;
        case OP_TRIM: {
            cca_release_report r;
            st = o->size == SIZE_MAX ? cca_empty_cache(a, &r) : cca_trim(a, o->size, &r);
            cr_assert(st == CCA_OK || (st == CCA_ERR_UPSTREAM && f.failures > failures), "%s: trim: %s / %s", what,
                      cca_status_string(st), cca_last_error());
            cr_assert_eq(r.bytes_still_reserved, tu_stats(a).reserved_bytes, "%s", what);
            break;
        }
        }
        fx_agree(a, u, &f, what);
        for (int k = 0; k < SLOTS; k++)
            if (slot[k].p) {
                int seed = 0; /* the step that allocated it */
                for (int j = 0; j < SCRIPT_LEN; j++)
                    if (script[j].kind == OP_ALLOC && script[j].slot == k && j <= i)
                        seed = j + 1;
                cr_assert(tu_check_fill(slot[k].p, slot[k].size, (uint64_t)seed), "%s: slot %d overwritten", what, k);
            }
        if (!run->at && o->kind == OP_ALLOC)
            cr_assert_eq(st, CCA_OK, "the script must succeed without faults: step %d: %s", i, cca_last_error());
    }
    if (run->at && run->at <= run->calls[run->kind]) /* the baseline made that call */
        cr_assert_geq(f.failures, 1, "%s: the fault never fired", what);
    memcpy(run->calls, f.calls, sizeof f.calls);
    run->retries = tu_stats(a).alloc_retries;
    run->holds = tu_stats(a).peak_holds;
    /* faults off: whatever is left goes back, and nothing was lost */
    tu_faulty_faults_off(&f);
    for (int k = 0; k < SLOTS; k++)
        if (slot[k].p)
            cr_assert_eq(cca_free(a, slot[k].p), CCA_OK);
    cca_release_report r;
    cr_assert_eq(cca_empty_cache(a, &r), CCA_OK, "%s: final empty_cache: %s", what, cca_last_error());
    fx_agree(a, u, &f, "final");
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.reserved_bytes, 0, "%s: %zu bytes still reserved", what, s.reserved_bytes);
    cr_assert_eq(s.segments, 0, "%s", what);
    cca_upstream_stats inner = tu_upstream_stats(f.inner);
    cr_assert_eq(inner.vm_mapped_bytes, 0, "%s: the device still maps %zu bytes", what, inner.vm_mapped_bytes);
    cr_assert_eq(inner.vm_reserved_bytes, 0, "%s: the device still reserves %zu bytes", what, inner.vm_reserved_bytes);
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(f.events_live, 0, "%s: events leaked", what);
    cca_upstream_destroy(u);
    cca_upstream_destroy(f.inner);
}

static void fault_sweep(bool with_events) {
    fx_run base = {.kind = TU_FAULT_MAP};
    run_script(&base, with_events);
    if (extra_conf) /* hold_peak: the releases happen in holds, before the device refuses */
        cr_assert_geq(base.holds, 1, "the script exercises the hold");
    else
        cr_assert_geq(base.retries, 1, "the script exercises the retry");
    cr_assert_geq(base.calls[TU_FAULT_UNMAP], 4);
    cr_assert_geq(base.calls[TU_FAULT_RELEASE], 2);
    cr_assert_geq(base.calls[TU_FAULT_SYNC], 4);
    cr_assert_eq(base.calls[TU_FAULT_ALLOC], 0);
    const tu_fault_kind kinds[] = {TU_FAULT_RESERVE, TU_FAULT_MAP,   TU_FAULT_UNMAP,
                                   TU_FAULT_RELEASE, TU_FAULT_ALLOC, TU_FAULT_SYNC};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (uint64_t at = 1; at <= base.calls[kinds[k]] + 1; at++)
            for (int sticky = 0; sticky < 2; sticky++) {
                fx_run run = {.kind = kinds[k], .at = at, .sticky = sticky};
                memcpy(run.calls, base.calls, sizeof run.calls);
                run_script(&run, with_events);
            }
}

Test(expandable, every_upstream_call_of_the_script_fails_once_and_for_good, .timeout = 60) {
    fault_sweep(false); /* no events: cross-stream frees synchronize */
}

Test(expandable, fault_sweep_with_events, .timeout = 60) {
    fault_sweep(true);
}

/* The same over whole maps: every map, one physical allocation, unmapped
 * only whole (the device refuses a cut, so any unmap the allocator makes of
 * part of a map fails the sweep). */
Test(expandable, fault_sweep_over_whole_maps, .timeout = 60) {
    backing = CCA_VM_WHOLE_MAPS;
    whole_chunk = 2 * MiB;
    fault_sweep(false);
    fault_sweep(true);
}

/* hold_peak:1: the script's requests that meet the peak release free
 * pages first (a synchronize, unmaps), and every such call fails in turn */
Test(expandable, fault_sweep_holding_the_peak, .timeout = 60) {
    extra_conf = "hold_peak:1";
    fault_sweep(false);
    fault_sweep(true);
}

/* A map refused part-way through a request whose rollback unmap is refused
 * too: expandable.c's header says a refused unmap "leaves that run mapped
 * and counted (state intact)", so the request should fail cleanly (or
 * succeed on the retry) with the accounts exact. */
Test(expandable, a_refused_rollback_unmap_leaves_the_state_intact) {
    tu_faulty f;
    cca_upstream *u = fx_create(&f, 32 * MiB, true);
    cca_allocator *a = exp_allocator(u, "small_pool:0");
    char *A = tu_alloc(a, 4 * MiB, S0);       /* pages [0,64)                */
    char *B = tu_alloc(a, 2 * MiB, S0);       /* [64,96), ahead to 100       */
    char *C = tu_alloc(a, 2 * MiB, S0);       /* [96,128), ahead to 134      */
    char *D = tu_alloc(a, 1 * MiB + 512, S0); /* keeps C off the tail      */
    cr_assert_eq(B, A + 4 * MiB);
    cr_assert_eq(C, A + 6 * MiB);
    tu_free(a, A), tu_free(a, C);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    tu_free(a, B); /* one free block [0, 8 MiB), only B's pages [64,96) mapped */
    fx_agree(a, u, &f, "island");
    TU_ASSERT_FAULTS(A);
    TU_ASSERT_READABLE(B);
    /* 8 MiB takes that block: two runs, [0,64) and [96,128); the second map
     * is refused, and so is the unmap of the first */
    f.fail_at[TU_FAULT_MAP] = f.calls[TU_FAULT_MAP] + 2;
    f.fail_at[TU_FAULT_UNMAP] = f.calls[TU_FAULT_UNMAP] + 1;
    void *p = (void *)1;
    cca_status st = cca_alloc(a, 8 * MiB, S0, &p);
    fx_agree(a, u, &f, "after the double fault");
    cr_assert_eq(f.failures, 2);
    cr_assert(st == CCA_OK || st == CCA_ERR_OUT_OF_MEMORY, "%s", cca_status_string(st));
    if (st == CCA_OK) {
        cr_assert_eq(p, (void *)A);
        tu_fill(p, 8 * MiB, 5);
        cr_assert(tu_check_fill(p, 8 * MiB, 5));
        tu_free(a, p);
    }
    tu_faulty_faults_off(&f);
    tu_free(a, D);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    fx_agree(a, u, &f, "end");
    cr_assert_eq(tu_upstream_stats(f.inner).vm_mapped_bytes, 0);
    cr_assert_eq(cca_destroy(a), CCA_OK);
    cca_upstream_destroy(u);
    cca_upstream_destroy(f.inner);
}

/* The greedy arena is mapped whole, so its one free block needs no page
 * test and carries no `unmapped` mark. Empty-cache unmaps every page and
 * then has the range released; if the release is refused, the range stays
 * with its one block over unmapped pages: that block must be marked, or the
 * next request would be handed unmapped memory (a fault when touched). */
Test(expandable, an_arena_whose_release_is_refused_maps_its_pages_again) {
    tu_faulty f;
    cca_upstream *u = fx_create(&f, 32 * MiB, false);
    cca_allocator *a = exp_allocator(u, "policy:greedy,greedy_bytes:8M");
    char *A = tu_alloc(a, 1 * MiB, S0);
    cr_assert_eq(tu_stats(a).vm_maps, 1, "the arena, mapped whole");
    tu_free(a, A);
    fx_agree(a, u, &f, "arena free");
    f.fail_at[TU_FAULT_RELEASE] = f.calls[TU_FAULT_RELEASE] + 1;
    cca_release_report r;
    cr_assert_eq(cca_empty_cache(a, &r), CCA_ERR_UPSTREAM, "the refused release is reported");
    cr_assert_eq(f.failures, 1);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.mapped_bytes, 0, "every page went");
    cr_assert_eq(s.segments, 1, "the range stays");
    fx_agree(a, u, &f, "release refused");
    TU_ASSERT_FAULTS(A);
    char *B = tu_alloc(a, 1 * MiB, S0); /* the same block: its pages are mapped again */
    cr_assert_eq(B, A);
    cr_assert_eq(tu_stats(a).vm_maps, 2);
    tu_fill(B, 1 * MiB, 7);
    cr_assert(tu_check_fill(B, 1 * MiB, 7));
    fx_agree(a, u, &f, "taken again");
    tu_free(a, B);
    tu_faulty_faults_off(&f);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s", cca_last_error());
    fx_agree(a, u, &f, "end");
    cr_assert_eq(tu_upstream_stats(f.inner).vm_reserved_bytes, 0);
    cr_assert_eq(cca_destroy(a), CCA_OK);
    cca_upstream_destroy(u);
    cca_upstream_destroy(f.inner);
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

/* ---- random -------------------------------------------------------------- */

#define RAND_SLOTS 48

typedef struct rslot {
    uint64_t *p;
    size_t size;
    uint64_t tag;
} rslot;

static void tag_block(rslot *s) {
    s->p[0] = s->tag;
    if (s->size >= 16)
        memcpy((char *)s->p + s->size - 8, &s->tag, 8);
}

static bool tag_intact(const rslot *s) {
    uint64_t end = s->tag;
    if (s->size >= 16)
        memcpy(&end, (const char *)s->p + s->size - 8, 8);
    return s->p[0] == s->tag && end == s->tag;
}

/* Log-uniform in [1, 8 MiB]. */
static size_t random_size(uint64_t *rng) {
    unsigned bits = (unsigned)(tu_rand(rng) % 24); /* 2^0 .. 2^23 */
    size_t lo = (size_t)1 << bits;
    return lo + (size_t)(tu_rand(rng) % lo);
}

/* unit: what a trim gives back at a time (a page; over whole maps, up to
 * a map), so how far under keep it may go */
static void random_sequence(size_t unit) {
    const size_t cap = 64 * MiB;
    cca_upstream *u = vm_device(cap, PG);
    cca_allocator *a = exp_allocator(u, NULL);
    /* a fixed seed; CCA_RANDOM_SEED replays another (as test_random.c) */
    const char *env = getenv("CCA_RANDOM_SEED");
    uint64_t seed = env && *env ? strtoull(env, NULL, 0) : 0xe7a2dab1e5ull, rng = seed;
    rslot slots[RAND_SLOTS] = {{0}};
    cca_stream streams[2] = {S0, S1};
    size_t ooms = 0, trims = 0;
    for (int step = 0; step < 20000; step++) {
        uint64_t r = tu_rand(&rng) % 1000;
        int k = (int)(tu_rand(&rng) % RAND_SLOTS);
        char what[64];
        snprintf(what, sizeof what, "seed %llu step %d", (unsigned long long)seed, step);
        if (r < 5) { /* trim to a random keep */
            cca_stats before = tu_stats(a);
            size_t keep = before.reserved_bytes ? (size_t)(tu_rand(&rng) % (before.reserved_bytes + 1)) : 0;
            cca_release_report rep;
            cr_assert_eq(cca_trim(a, keep, &rep), CCA_OK, "%s: %s", what, cca_last_error());
            cca_stats s = tu_stats(a);
            cr_assert_eq(rep.bytes_still_reserved, s.reserved_bytes);
            cr_assert_eq(rep.bytes_released, before.reserved_bytes - s.reserved_bytes, "%s", what);
            cr_assert_eq(rep.bytes_unmapped, rep.bytes_released, "%s", what);
            if (before.reserved_bytes > keep) /* down to keep, less than a page under it, or all it could */
                cr_assert((s.reserved_bytes <= keep && s.reserved_bytes + unit > keep) ||
                              s.reserved_bytes == s.allocated_bytes + rep.free_bytes_trapped,
                          "%s: trim(%zu) left %zu (allocated %zu, trapped %zu)", what, keep, s.reserved_bytes,
                          s.allocated_bytes, rep.free_bytes_trapped);
            trims++;
        } else if (r < 6) { /* empty-cache */
            cca_release_report rep;
            cr_assert_eq(cca_empty_cache(a, &rep), CCA_OK, "%s", what);
            cca_stats s = tu_stats(a);
            cr_assert_eq(s.reserved_bytes, s.allocated_bytes + rep.free_bytes_trapped, "%s", what);
            trims++;
        } else if (r < 40) { /* record a second stream */
            if (slots[k].p)
                cr_assert_eq(cca_record_stream(a, slots[k].p, streams[tu_rand(&rng) % 2]), CCA_OK);
        } else if (!slots[k].p) {
            size_t size = random_size(&rng);
            cca_stream s = streams[tu_rand(&rng) % 2];
            void *p = (void *)1;
            cca_status st = cca_alloc(a, size, s, &p);
            if (st == CCA_OK) {
                slots[k] = (rslot){p, size, tu_rand(&rng)};
                tag_block(&slots[k]);
            } else {
                cr_assert_eq(st, CCA_ERR_OUT_OF_MEMORY, "%s: %s", what, cca_status_string(st));
                cca_stats after = tu_stats(a);
                /* only when the device could not hold it, whatever was unmapped */
                cr_assert_gt(after.mapped_bytes + rnd(size) + 2 * unit, cap,
                             "%s: OOM for %zu bytes with %zu mapped of %zu", what, size, after.mapped_bytes, cap);
                ooms++;
            }
        } else {
            cr_assert(tag_intact(&slots[k]), "%s: block %p (%zu bytes) overwritten", what, (void *)slots[k].p,
                      slots[k].size);
            tu_free(a, slots[k].p);
            slots[k].p = NULL;
        }
        agree(a, u, PG, cap, what);
    }
    cr_assert_gt(trims, 50);
    for (int k = 0; k < RAND_SLOTS; k++)
        if (slots[k].p) {
            cr_assert(tag_intact(&slots[k]));
            tu_free(a, slots[k].p);
        }
    cca_stats s = tu_stats(a);
    cr_assert_gt(s.vm_unmaps, 0);
    cr_log_info("random: %zu OOMs, %llu retries, %llu maps, %llu unmaps", ooms, (unsigned long long)s.alloc_retries,
                (unsigned long long)s.vm_maps, (unsigned long long)s.vm_unmaps);
    finish(a, u);
}

Test(expandable, seeded_random_sequence_keeps_every_account, .timeout = 60) {
    random_sequence(PG);
}

Test(expandable, seeded_random_sequence_holding_the_peak, .timeout = 60) {
    extra_conf = "hold_peak:1";
    random_sequence(PG);
    backing = CCA_VM_WHOLE_MAPS;
    random_sequence(whole_chunk);
}

Test(expandable, seeded_random_sequence_over_whole_maps, .timeout = 60) {
    backing = CCA_VM_WHOLE_MAPS;
    random_sequence(whole_chunk);
}

/* ---- threads ------------------------------------------------------------- */

#define THREADS 6

typedef struct worker {
    cca_allocator *a;
    int id;
    int failures; /* data or status problems, reported by the main thread */
    size_t ooms;
} worker;

static void *worker_main(void *arg) {
    worker *w = arg;
    uint64_t rng = 0x7157ull * (uint64_t)(w->id + 1);
    rslot slots[24] = {{0}};
    cca_stream mine = (cca_stream)(uintptr_t)(0x1000 * (w->id + 1));
    for (int i = 0; i < 3000; i++) {
        uint64_t r = tu_rand(&rng) % 1000;
        int k = (int)(tu_rand(&rng) % 24);
        if (r < 4) {
            if (cca_trim(w->a, (size_t)(tu_rand(&rng) % (64 * MiB)), NULL) != CCA_OK)
                w->failures++;
        } else if (r < 5) {
            if (cca_empty_cache(w->a, NULL) != CCA_OK)
                w->failures++;
        } else if (!slots[k].p) {
            size_t size = 512 + (size_t)(tu_rand(&rng) % (2 * MiB));
            void *p = NULL;
            cca_status st = cca_alloc(w->a, size, mine, &p);
            if (st == CCA_OK) {
                slots[k] = (rslot){p, size, tu_rand(&rng)};
                tag_block(&slots[k]);
                if (r % 7 == 0 && cca_record_stream(w->a, p, (cca_stream)0x99) != CCA_OK)
                    w->failures++;
            } else if (st == CCA_ERR_OUT_OF_MEMORY) {
                w->ooms++;
            } else {
                w->failures++;
            }
        } else {
            if (!tag_intact(&slots[k]))
                w->failures++;
            if (cca_free(w->a, slots[k].p) != CCA_OK)
                w->failures++;
            slots[k].p = NULL;
        }
    }
    for (int k = 0; k < 24; k++)
        if (slots[k].p) {
            if (!tag_intact(&slots[k]))
                w->failures++;
            if (cca_free(w->a, slots[k].p) != CCA_OK)
                w->failures++;
        }
    return NULL;
}

static void threads_at_once(void) {
    const size_t cap = 256 * MiB;
    cca_upstream *u = vm_device(cap, PG);
    cca_allocator *a = exp_allocator(u, NULL);
    pthread_t th[THREADS];
    worker w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker){a, i, 0, 0};
        cr_assert_eq(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        cr_assert_eq(pthread_join(th[i], NULL), 0);
    for (int i = 0; i < THREADS; i++)
        cr_assert_eq(w[i].failures, 0, "thread %d: %d failures", i, w[i].failures);
    agree(a, u, PG, cap, "threads joined");
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.active_blocks, 0);
    cr_assert_eq(s.allocated_bytes, 0);
    cr_assert_gt(s.vm_unmaps, 0);
    finish(a, u);
}

Test(expandable, threads_allocate_free_and_trim_at_once, .timeout = 60) {
    threads_at_once();
}

Test(expandable, threads_over_whole_maps, .timeout = 60) {
    backing = CCA_VM_WHOLE_MAPS;
    threads_at_once();
}

/* ---- requests that can never succeed, the retry's synchronize, greedy's arena ---------- */

static void fx_finish(cca_allocator *a, cca_upstream *u, tu_faulty *f) {
    finish(a, u);
    cca_upstream_destroy(f->inner);
}

static uint64_t fx_calls(const tu_faulty *f) {
    uint64_t n = 0;
    for (int k = 0; k < TU_FAULT_KINDS; k++)
        n += f->calls[k];
    return n;
}

/* A device whose size the allocator cannot learn (mem_info refused) and a
 * request larger than the default address range: the range is sized for
 * the request, and the map the device refuses is an OOM with nothing kept. */
Test(expandable, request_beyond_the_default_range_with_an_unknown_device) {
    tu_faulty f;
    cca_upstream *u = fx_create(&f, 256 * MiB, false);
    f.fail_mem_info = true;
    cca_allocator *a = tu_allocator(u, "expandable:1,log_oom:0");
    size_t sizes[] = {((size_t)64 << 30) + 1, (size_t)100 << 30, (size_t)1 << 46};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        void *p = (void *)1;
        cr_assert_eq(cca_alloc(a, sizes[i], NULL, &p), CCA_ERR_OUT_OF_MEMORY, "%zu bytes: %s", sizes[i],
                     cca_last_error());
        cr_assert_null(p);
        fx_agree(a, u, &f, "after the refused request");
        cr_assert_eq(tu_stats(a).allocated_bytes, 0);
    }
    void *p = tu_alloc(a, 3 * MiB, NULL); /* the device still serves what fits */
    tu_free(a, p);
    fx_agree(a, u, &f, "after a fitting request");
    f.fail_mem_info = false;
    fx_finish(a, u, &f);
}

/* A 64 MiB device whose pages are 40 MiB of S0's free block: the next
 * 40 MiB elsewhere needs them unmapped. No ahead pages. */
static cca_allocator *s0_freed_40m(tu_faulty *f, cca_upstream **u) {
    *u = fx_create(f, 64 * MiB, false);
    cca_allocator *a = tu_allocator(*u, "expandable:1,expandable_ahead_min:0,expandable_ahead_max:0,log_oom:0");
    tu_free(a, tu_alloc(a, 40 * MiB, S0)); /* free at once: S0 is the block's own stream */
    cr_assert_eq(tu_stats(a).pending_blocks, 0);
    return a;
}

/* The retry unmaps free pages only after the device synchronized, even
 * with no free pending: the stream that freed them may still have work
 * queued on them. A synchronize that fails unmaps nothing. */
Test(expandable, retry_synchronizes_before_it_unmaps) {
    for (int fail = 0; fail < 2; fail++) {
        tu_faulty f;
        cca_upstream *u;
        cca_allocator *a = s0_freed_40m(&f, &u);
        uint64_t syncs = f.calls[TU_FAULT_SYNC], unmaps = f.calls[TU_FAULT_UNMAP];
        if (fail)
            f.fail_at[TU_FAULT_SYNC] = syncs + 1;
        void *p = NULL;
        cca_status st = cca_alloc(a, 40 * MiB, S1, &p); /* another stream's segment: needs S0's pages */
        cr_assert_eq(tu_stats(a).alloc_retries, 1);
        cr_assert_eq(f.calls[TU_FAULT_SYNC], syncs + 1, "the retry synchronizes once");
        if (fail) {
            cr_assert_eq(st, CCA_ERR_OUT_OF_MEMORY, "%s", cca_last_error());
            cr_assert_eq(f.calls[TU_FAULT_UNMAP], unmaps, "nothing unmapped after a failed synchronize");
        } else {
            cr_assert_eq(st, CCA_OK, "%s", cca_last_error());
            cr_assert_gt(f.calls[TU_FAULT_UNMAP], unmaps);
            tu_free(a, p);
        }
        fx_agree(a, u, &f, fail ? "synchronize refused" : "synchronized");
        fx_finish(a, u, &f);
    }
}

/* cca_domain_reserve's retry too. */
Test(expandable, domain_reserve_retry_synchronizes_before_it_unmaps) {
    tu_faulty f;
    cca_upstream *u;
    cca_allocator *a = s0_freed_40m(&f, &u);
    uint64_t syncs = f.calls[TU_FAULT_SYNC];
    cca_domain *d = NULL;
    cr_assert_eq(cca_domain_create(a, "model", &d), CCA_OK);
    cr_assert_eq(cca_domain_reserve(a, d, 40 * MiB), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(f.calls[TU_FAULT_SYNC], syncs + 1, "the retry synchronizes before unmapping");
    fx_agree(a, u, &f, "domain reserved");
    cr_assert_eq(cca_domain_destroy(a, d, 0, NULL), CCA_OK, "%s", cca_last_error());
    fx_finish(a, u, &f);
}

/* A range the upstream refuses is asked for again at half the size, down to
 * the request's own pages (address space runs out before device memory when
 * many domains each hold a range): one refusal, and the request is served
 * from a range of half the device; refusals all the way down, and it is an
 * OOM after one attempt per halving, nothing held (the OOM retry, with
 * nothing cached to release, tries nothing again and synchronizes nothing). */
Test(expandable, a_refused_range_is_asked_for_again_at_half_the_size) {
    for (int sticky = 0; sticky < 2; sticky++) {
        tu_faulty f;
        cca_upstream *u = fx_create(&f, 64 * MiB, false);
        cca_allocator *a = tu_allocator(u, "expandable:1,log_oom:0");
        f.fail_at[TU_FAULT_RESERVE] = f.calls[TU_FAULT_RESERVE] + 1;
        f.sticky[TU_FAULT_RESERVE] = sticky;
        void *p = NULL;
        cca_status st = cca_alloc(a, 1 * MiB, S0, &p);
        cca_stats s = tu_stats(a);
        if (!sticky) {
            cr_assert_eq(st, CCA_OK, "%s", cca_last_error());
            cr_assert_eq(f.calls[TU_FAULT_RESERVE], 2, "64 MiB refused, then 32 MiB");
            cr_assert_eq(s.address_space_bytes, 32 * MiB);
            tu_free(a, p);
        } else {
            cr_assert_eq(st, CCA_ERR_OUT_OF_MEMORY, "%s", cca_last_error());
            /* the message names the refusal, then why the retry released nothing */
            cr_assert(strstr(cca_last_error(), "injected") && strstr(cca_last_error(), "nothing cached to release"),
                      "%s", cca_last_error());
            cr_assert_null(p);
            /* 64, 32, 16, 8, 4, 2 and 1 MiB, each refused once */
            cr_assert_eq(f.calls[TU_FAULT_RESERVE], 7, "%llu reservations tried",
                         (unsigned long long)f.calls[TU_FAULT_RESERVE]);
            cr_assert_eq(f.calls[TU_FAULT_SYNC], 0, "nothing cached: no synchronize");
            cr_assert_eq(s.alloc_retries, 1);
            cr_assert_eq(s.address_space_bytes, 0);
            cr_assert_eq(s.reserved_bytes, 0);
        }
        tu_faulty_faults_off(&f);
        fx_finish(a, u, &f);
    }
}

/* cca_destroy unmaps pages only after the device synchronized, even with
 * no free pending: a block freed on its own stream is free at once while
 * that stream may still have work queued on it, and unmapping does not
 * wait. A synchronize that fails unmaps nothing and releases no range that
 * has pages mapped: destroy returns the synchronize's failure, says how
 * much it left mapped, and the upstream still counts it (its own destroy
 * gives the simulated device's memory back). */
Test(expandable, destroy_synchronizes_before_it_unmaps) {
    for (int fail = 0; fail < 2; fail++) {
        tu_faulty f;
        cca_upstream *u = fx_create(&f, 64 * MiB, true);
        cca_allocator *a = tu_allocator(u, "expandable:1");
        void *live = tu_alloc(a, 3 * MiB, S1);
        tu_free(a, tu_alloc(a, 8 * MiB, S0)); /* S0 is the block's own stream: free at once */
        tu_free(a, live);
        cca_stats s = tu_stats(a);
        cr_assert_eq(s.pending_blocks, 0, "nothing pending: no free waits for an event");
        cr_assert_gt(s.mapped_bytes, 0);
        size_t mark = f.order_count;
        uint64_t unmaps = f.calls[TU_FAULT_UNMAP], releases = f.calls[TU_FAULT_RELEASE];
        if (fail)
            f.fail_at[TU_FAULT_SYNC] = f.calls[TU_FAULT_SYNC] + 1;
        cca_status st = cca_destroy(a);
        size_t sync_at = tu_faulty_first(&f, TU_FAULT_SYNC, mark), unmap_at = tu_faulty_first(&f, TU_FAULT_UNMAP, mark);
        cr_assert_neq(sync_at, SIZE_MAX, "destroy synchronized (fail %d)", fail);
        cca_upstream_stats us = tu_upstream_stats(u);
        if (!fail) {
            cr_assert_eq(st, CCA_OK, "%s", cca_last_error());
            cr_assert_neq(unmap_at, SIZE_MAX, "destroy unmapped the pages");
            cr_assert_lt(sync_at, unmap_at, "the synchronize came before the first unmap");
            cr_assert_eq(us.vm_mapped_bytes, 0);
            cr_assert_eq(us.vm_reserved_bytes, 0);
        } else {
            cr_assert_eq(st, CCA_ERR_UPSTREAM, "the synchronize's failure: %s", cca_last_error());
            cr_assert_eq(f.calls[TU_FAULT_UNMAP], unmaps, "nothing unmapped after a failed synchronize");
            cr_assert_eq(f.calls[TU_FAULT_RELEASE], releases, "no range with pages in it released");
            cr_assert_not_null(strstr(cca_last_error(), "left mapped"), "%s", cca_last_error());
            cr_assert_not_null(strstr(cca_last_error(), "injected synchronize failure"), "%s", cca_last_error());
            cr_assert_eq(us.vm_mapped_bytes, s.mapped_bytes, "the upstream still counts the pages");
            cr_assert_eq(us.vm_reserved_bytes, s.address_space_bytes);
        }
        cca_upstream_destroy(u);
        cca_upstream_destroy(f.inner);
    }
}

/* A greedy arena over pages: a request no free block of the arena can hold
 * is an OOM at once, with no retry and no upstream call (nothing unmapped). */
Test(expandable, greedy_request_the_arena_cannot_hold_is_refused_without_a_retry) {
    tu_faulty f;
    cca_upstream *u = fx_create(&f, 128 * MiB, false);
    cca_allocator *a = tu_allocator(u, "policy:greedy,greedy_bytes:64M,expandable:1,log_oom:0");
    void *p = tu_alloc(a, 40 * MiB, NULL);
    cca_stats before = tu_stats(a);
    uint64_t calls = fx_calls(&f);
    void *q = NULL;
    cr_assert_eq(cca_alloc(a, 40 * MiB, NULL, &q), CCA_ERR_OUT_OF_MEMORY);
    cca_stats after = tu_stats(a);
    cr_assert_eq(fx_calls(&f), calls, "no upstream call");
    cr_assert_eq(after.alloc_retries, before.alloc_retries, "no retry");
    cr_assert_eq(after.reserved_bytes, before.reserved_bytes);
    cr_assert_eq(after.mapped_bytes, 64 * MiB);
    tu_free(a, p);
    fx_agree(a, u, &f, "greedy");
    fx_finish(a, u, &f);
}

/* A request of `size` in domain d on stream st that can never succeed:
 * CCA_ERR_OUT_OF_MEMORY saying so, *out NULL, no upstream call, no retry,
 * nothing changed but ooms. */
static void assert_never_at_once(cca_allocator *a, cca_domain *d, const tu_faulty *f, size_t size, cca_stream st,
                                 const char *what) {
    cca_stats before = tu_stats(a);
    uint64_t calls = fx_calls(f);
    void *p = (void *)1;
    cr_assert_eq(cca_alloc_in(a, d, size, st, &p), CCA_ERR_OUT_OF_MEMORY, "%s: %zu bytes: %s", what, size,
                 cca_last_error());
    cr_assert_null(p, "%s", what);
    cr_assert_not_null(strstr(cca_last_error(), "never"), "%s: %s", what, cca_last_error());
    cr_assert_eq(fx_calls(f), calls, "%s: %zu bytes: no upstream call (%" PRIu64 " maps in all)", what, size,
                 f->calls[TU_FAULT_MAP]);
    cca_stats after = tu_stats(a);
    cr_assert_eq(after.alloc_retries, before.alloc_retries, "%s: no retry", what);
    before.ooms++; /* the one thing that changes */
    tu_assert_stats_equal(&before, &after, what);
}

/* With pages, a request needs whole pages: one whose pages exceed
 * max_reserved fails at once, touching neither the cache nor the upstream. */
Test(expandable, request_whose_pages_exceed_max_reserved_fails_at_once) {
    tu_faulty f;
    cca_upstream *u = tu_faulty_create(&f, vm_device(256 * MiB, 2 * MiB), "fx", false);
    cca_allocator *a = tu_allocator(u, "expandable:1,max_reserved:5M,expandable_ahead_min:0,log_oom:0");
    tu_free(a, tu_alloc(a, 1 * MiB, NULL));
    cr_assert_eq(tu_stats(a).reserved_bytes, 2 * MiB);
    assert_never_at_once(a, NULL, &f, 5 * MiB, NULL, "3 pages: 6 MiB > 5 MiB");
    cr_assert_eq(tu_stats(a).alloc_retries, 0);
    void *p = tu_alloc(a, 4 * MiB, NULL); /* 2 pages: fits */
    tu_free(a, p);
    fx_finish(a, u, &f);
}

/* The same when the ceiling is the device's size and that is not a whole
 * number of pages (found by allocator/fuzz/fuzz_api.c): the range cached by
 * an earlier request spans the ceiling rounded up to the page, so its free
 * block "fits" a request whose pages the device can never hold. That
 * request must still fail at once, before step 4's block is mapped: no
 * vm_map refused by the device, no upstream call, nothing counted but the
 * OOM. */
Test(expandable, request_whose_pages_exceed_the_device_fails_at_once) {
    tu_faulty f;
    cca_upstream *u = tu_faulty_create(&f, vm_device(5 * MiB, 2 * MiB), "fx", false);
    cca_allocator *a = tu_allocator(u, "expandable:1,expandable_ahead_min:0,small_max:512,log_oom:0");
    tu_free(a, tu_alloc(a, 1 * MiB, NULL)); /* a range of the large pool on NULL, one page mapped, free */
    cr_assert_eq(tu_stats(a).reserved_bytes, 2 * MiB);
    assert_never_at_once(a, NULL, &f, 5 * MiB, NULL, "3 pages: 6 MiB > a 5 MiB device");
    tu_free(a, tu_alloc(a, 4 * MiB, NULL)); /* 2 pages: fits */
    fx_finish(a, u, &f);
}

/* The class: whatever the ceiling (a device size or max_reserved that is
 * not a whole number of pages), the page size, the stream and the domain
 * whose range is cached, every request whose pages exceed the ceiling fails
 * at once without an upstream call, and every request whose pages fit it
 * is served. */
Test(expandable, requests_over_the_ceiling_in_pages_never_reach_the_upstream) {
    static const struct {
        size_t capacity, page;
        const char *conf;
    } cases[] = {
        {5 * MiB, 2 * MiB, ""},
        {3 * MiB + 28 * KiB, 64 * KiB, ""},
        {9 * MiB + 4 * KiB, 4 * MiB, ""},
        {64 * MiB, 2 * MiB, ",max_reserved:7M"},
        {64 * MiB, 1 * MiB, ",max_reserved:3.5M"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        for (int use_domain = 0; use_domain < 2; use_domain++) {
            tu_faulty f;
            cca_upstream *u = tu_faulty_create(&f, vm_device(cases[c].capacity, cases[c].page), "fx", false);
            char conf[160];
            /* one pool for every request here: the cached range is the one step 4 finds */
            snprintf(conf, sizeof conf, "expandable:1,small_max:512,large_min:20M,log_oom:0%s", cases[c].conf);
            cca_allocator *a = tu_allocator(u, conf);
            cca_config cfg;
            cca_get_config(a, &cfg);
            size_t ceiling = cfg.max_reserved ? cfg.max_reserved : cases[c].capacity;
            size_t pg = cases[c].page, fit = ceiling / pg * pg; /* the most whole pages under the ceiling */
            cca_domain *d = NULL;
            if (use_domain)
                cr_assert_eq(cca_domain_create(a, "m", &d), CCA_OK);
            cca_stream streams[] = {NULL, S1};
            for (int si = 0; si < 2; si++) {
                void *q = NULL;
                cr_assert_eq(cca_alloc_in(a, d, 4096, streams[si], &q), CCA_OK, "%s", cca_last_error());
                tu_free(a, q); /* a range of this domain and stream, cached */
                size_t over[] = {fit + 1, ceiling, fit + pg - CCA_GRANULARITY};
                for (size_t i = 0; i < sizeof over / sizeof *over; i++) {
                    char what[96];
                    snprintf(what, sizeof what, "case %zu: over a ceiling of %zu in %zu-byte pages", c, ceiling, pg);
                    if (over[i] > fit)
                        assert_never_at_once(a, d, &f, over[i], streams[si], what);
                }
                void *p = NULL; /* still usable (whether `fit` bytes fit depends on the slack rule) */
                cr_assert_eq(cca_alloc_in(a, d, pg, streams[si], &p), CCA_OK, "case %zu: %zu bytes: %s", c, pg,
                             cca_last_error());
                tu_free(a, p);
                cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
                tu_check(a);
            }
            if (d)
                cr_assert_eq(cca_domain_destroy(a, d, 0, NULL), CCA_OK);
            fx_finish(a, u, &f);
        }
    }
}

/* A device whose size the allocator cannot learn (no mem_info answer) and a
 * request larger than the address space an allocator's ranges may hold
 * (CCAI_ADDRESS_BUDGET, 32 TiB; found by allocator/fuzz/fuzz_api.c): it can
 * never succeed, so it fails at once, as one over the device would. It
 * used to size a range for it and calloc the range's page bitmap first,
 * va / page / 8 bytes before the upstream was asked (2^45 bytes for a
 * request near SIZE_MAX: an ASan abort; elsewhere "host malloc failed"). */
Test(expandable, request_over_the_address_budget_fails_at_once_on_an_unknown_device) {
    tu_faulty f;
    cca_upstream *u = fx_create(&f, 256 * MiB, false);
    f.fail_mem_info = true;
    cca_allocator *a = tu_allocator(u, "expandable:1,log_oom:0");
    tu_free(a, tu_alloc(a, 3 * MiB, NULL)); /* something cached: nothing may be released for the request */
    size_t sizes[] = {CCAI_ADDRESS_BUDGET + 1, (size_t)1 << 50, (size_t)1 << 62, SIZE_MAX / 2 + 1,
                      SIZE_MAX - 3 * MiB};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        assert_never_at_once(a, NULL, &f, sizes[i], NULL, "over the address budget");
    tu_free(a, tu_alloc(a, 3 * MiB, NULL)); /* the device still serves what fits */
    f.fail_mem_info = false;
    fx_finish(a, u, &f);
}

/* The class: every expandable reservation sized by the caller, on a device
 * of unknown size, is refused before any bookkeeping when it is over the
 * budget: cca_alloc on every stream and pool, a domain's arena
 * (cca_domain_reserve: CCA_ERR_OUT_OF_MEMORY, nothing changes) and the
 * greedy arena of cca_create (CCA_ERR_OUT_OF_MEMORY, nothing held). */
Test(expandable, reservations_over_the_address_budget_are_refused_before_bookkeeping) {
    size_t pages[] = {4 * KiB, PG, 2 * MiB};
    for (size_t k = 0; k < sizeof pages / sizeof *pages; k++) {
        tu_faulty f;
        cca_upstream *u = tu_faulty_create(&f, vm_device(256 * MiB, pages[k]), "fx", false);
        f.fail_mem_info = true;
        cca_allocator *a = tu_allocator(u, "expandable:1,log_oom:0");
        cca_domain *d = NULL;
        cr_assert_eq(cca_domain_create(a, "m", &d), CCA_OK);
        size_t over[] = {CCAI_ADDRESS_BUDGET + 1, CCAI_ADDRESS_BUDGET + pages[k], (size_t)1 << 55, SIZE_MAX / 2};
        cca_stream streams[] = {NULL, S0};
        for (size_t i = 0; i < sizeof over / sizeof *over; i++) {
            for (int si = 0; si < 2; si++) {
                uint64_t calls = fx_calls(&f);
                void *p = (void *)1;
                cr_assert_eq(cca_alloc_in(a, si ? d : NULL, over[i], streams[si], &p), CCA_ERR_OUT_OF_MEMORY,
                             "page %zu, %zu bytes: %s", pages[k], over[i], cca_last_error());
                cr_assert_eq(fx_calls(&f), calls, "page %zu, %zu bytes: no upstream call", pages[k], over[i]);
            }
            cca_stats before = tu_stats(a);
            uint64_t calls = fx_calls(&f);
            cr_assert_eq(cca_domain_reserve(a, d, over[i]), CCA_ERR_OUT_OF_MEMORY, "page %zu, arena of %zu: %s",
                         pages[k], over[i], cca_last_error());
            cr_assert_eq(fx_calls(&f), calls, "page %zu, arena of %zu bytes: no upstream call", pages[k], over[i]);
            cca_stats after = tu_stats(a);
            tu_assert_stats_equal(&before, &after, "a refused arena changes nothing");
        }
        cr_assert_eq(cca_domain_reserve(a, d, 4 * MiB), CCA_OK, "%s", cca_last_error()); /* one that fits */
        cr_assert_eq(cca_domain_destroy(a, d, 0, NULL), CCA_OK, "%s", cca_last_error());
        f.fail_mem_info = false;
        fx_finish(a, u, &f);
    }
    /* the greedy arena */
    tu_faulty f;
    cca_upstream *u = tu_faulty_create(&f, vm_device(256 * MiB, PG), "fx", false);
    f.fail_mem_info = true;
    cca_config c;
    cca_config_default(&c);
    c.policy = CCA_POLICY_GREEDY;
    c.expandable = 1;
    c.log_oom = 0;
    c.greedy_bytes = (size_t)1 << 60;
    cca_allocator *a = (cca_allocator *)1;
    cr_assert_eq(cca_create(&c, u, &a), CCA_ERR_OUT_OF_MEMORY, "%s", cca_last_error());
    cr_assert_null(a);
    cca_upstream_stats us = tu_upstream_stats(u);
    cr_assert_eq(us.bytes_in_use + us.vm_reserved_bytes, 0, "a refused cca_create holds nothing");
    cca_upstream_destroy(u);
    cca_upstream_destroy(f.inner);
}

/* A device of unknown size (mem_info refused) in 4 KiB pages, an allocator
 * capped at 8 TiB (so its range is 8 TiB: 2^31 pages) and one live 1 MiB
 * block at the range's start (*live). No ahead pages. */
static cca_allocator *huge_range(tu_faulty *f, cca_upstream **u, void **live);

/* The cost of one word-by-word walk of the range's bitmap, the unit these
 * tests measure in (builds differ by 10x: ASan, optimization): a popcount
 * of each word of the largest range's bitmap, here in the test (the
 * invariant walk stops at the highest page ever mapped, so it no longer
 * walks the whole range); the best of three, in seconds of the thread's
 * CPU time (so that another program taking the core does not count). */
static double word_walk_seconds(const cca_allocator *a) {
    const ccai_segment *big = NULL; /* the largest range's bitmap: a popcount per word, as a walk costs */
    for (const ccai_segment *s = a->segments; s; s = s->next)
        if (s->expandable && (!big || s->npages > big->npages))
            big = s;
    cr_assert_not_null(big);
    double best = 1e9;
    for (int i = 0; i < 3; i++) {
        uint64_t t0 = tu_thread_cpu_ns();
        size_t count = 0;
        for (size_t w = 0; w < (big->npages + 63) / 64; w++)
            count += (size_t)__builtin_popcountll(((volatile const uint64_t *)big->mapped)[w]);
        cr_assert_eq(count, big->mapped_pages);
        double s = (double)(tu_thread_cpu_ns() - t0) / 1e9;
        best = s < best ? s : best;
    }
    return best;
}

static cca_allocator *huge_range(tu_faulty *f, cca_upstream **u, void **live) {
    *u = tu_faulty_create(f, vm_device(64 * MiB, 4 * KiB), "fx", false);
    f->fail_mem_info = true;
    cca_allocator *a =
        tu_allocator(*u, "expandable:1,max_reserved:8T,expandable_ahead_min:0,expandable_ahead_max:0,log_oom:0");
    *live = tu_alloc(a, 1 * MiB, NULL);
    return a;
}

/* The most one release call over the range may cost, in word walks of its
 * bitmap: its own walks for mapped runs, the invariant walk after it at
 * CCA_DEBUG=2, and room for the machine. Measured (thread CPU time): 0.6-4.2
 * in Release, 2.2-5.6 under ASan at CCA_DEBUG=2; with a bit test per page
 * (the defect) 80-111 for a trim to 0 or an OOM retry, 20 for a trim that
 * stops at its keep. */
#define WALKS_PER_RELEASE 15

/* The thread CPU time of cca_trim(a, keep), in word walks. */
static double trim_walks(cca_allocator *a, size_t keep, double unit, cca_release_report *r) {
    uint64_t t0 = tu_thread_cpu_ns();
    cr_assert_eq(cca_trim(a, keep, r), CCA_OK, "%s", cca_last_error());
    return (double)(tu_thread_cpu_ns() - t0) / 1e9 / unit;
}

/* Giving pages back costs a word of 64 pages per step, not a bit test per
 * page (found by allocator/fuzz/fuzz_api.c: an OOM retry that ran for
 * minutes over a range sized for a huge request on a device of unknown
 * size). A range is as large as max_reserved when the device's size is
 * unknown: here 8 TiB of 4 KiB pages (2^31 pages), one live block at its
 * start, and each trim walks the free rest of it for mapped runs. Bit by
 * bit that is seconds per trim; word by word a few tens of milliseconds.
 * Each trim alone is timed, in word walks of the same bitmap. */
Test(expandable, trim_of_a_range_of_billions_of_pages_is_word_by_word) {
    tu_faulty f;
    cca_upstream *u;
    void *live;
    cca_allocator *a = huge_range(&f, &u, &live);
    double unit = word_walk_seconds(a);
    cr_assert_eq(tu_stats(a).address_space_bytes, (size_t)8 << 40, "one 8 TiB range: %zu",
                 tu_stats(a).address_space_bytes);
    for (int i = 0; i < 8; i++) {
        void *q = tu_alloc(a, 2 * MiB, NULL); /* pages mapped above the live block, freed, trimmed */
        tu_free(a, q);
        cca_release_report r;
        double walks = trim_walks(a, 0, unit, &r);
        cr_assert_eq(r.bytes_unmapped, 2 * MiB, "the 2 MiB freed above the live block: %zu", r.bytes_unmapped);
        cr_assert_lt(walks, WALKS_PER_RELEASE, "trim %d of a 2^31-page range cost %.1f word walks", i, walks);
    }
    tu_free(a, live);
    f.fail_mem_info = false;
    fx_finish(a, u, &f);
}

/* The class: every path that gives free pages back walks the bitmap a word
 * at a time: the OOM retry (a request the device refuses), trim with a
 * keep that stops part-way, and the empty-cache that releases the range. */
Test(expandable, every_page_release_of_a_huge_range_is_word_by_word) {
    tu_faulty f;
    cca_upstream *u;
    void *live;
    cca_allocator *a = huge_range(&f, &u, &live);
    double unit = word_walk_seconds(a);
    for (int i = 0; i < 4; i++) {
        void *q = tu_alloc(a, 8 * MiB, NULL);
        tu_free(a, q);
        void *p = NULL; /* more than the device: refused, the retry unmaps the 8 MiB and is refused again */
        uint64_t t0 = tu_thread_cpu_ns();
        cr_assert_eq(cca_alloc(a, 100 * MiB, NULL, &p), CCA_ERR_OUT_OF_MEMORY, "%s", cca_last_error());
        double walks = (double)(tu_thread_cpu_ns() - t0) / 1e9 / unit;
        cr_assert_eq(tu_stats(a).reserved_bytes, 1 * MiB, "the retry gave the free pages back");
        cr_assert_lt(walks, WALKS_PER_RELEASE, "OOM retry %d over a 2^31-page range cost %.1f word walks", i, walks);
        q = tu_alloc(a, 8 * MiB, NULL);
        tu_free(a, q);
        cca_release_report r;
        walks = trim_walks(a, 5 * MiB, unit, &r);
        cr_assert_eq(tu_stats(a).reserved_bytes, 5 * MiB, "trim stops at its keep, part-way through the run");
        cr_assert_lt(walks, WALKS_PER_RELEASE, "trim %d to a keep cost %.1f word walks", i, walks);
    }
    tu_free(a, live);
    uint64_t t0 = tu_thread_cpu_ns();
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s", cca_last_error());
    double walks = (double)(tu_thread_cpu_ns() - t0) / 1e9 / unit;
    cr_assert_eq(tu_stats(a).address_space_bytes, 0);
    cr_assert_lt(walks, WALKS_PER_RELEASE, "empty-cache of a 2^31-page range cost %.1f word walks", walks);
    f.fail_mem_info = false;
    fx_finish(a, u, &f);
}

/* A greedy arena over pages is whole pages: its size rounded up, unless
 * that passes max_reserved or the device's free memory; then down. */
Test(expandable, greedy_arena_rounds_down_to_whole_pages) {
    struct {
        size_t capacity;
        const char *conf;
        size_t arena;
    } cases[] = {
        {256 * MiB, "policy:greedy,max_reserved:3M,expandable:1", 2 * MiB},
        {101 * MiB, "policy:greedy,greedy_fraction:1,expandable:1", 100 * MiB},
        {256 * MiB, "policy:greedy,greedy_bytes:7M,expandable:1", 8 * MiB},
        {256 * MiB, "policy:greedy,greedy_bytes:7M,max_reserved:7M,expandable:1", 6 * MiB},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        cca_upstream *u = vm_device(cases[i].capacity, 2 * MiB);
        cca_allocator *a = NULL;
        cca_config c;
        cca_config_default(&c);
        cr_assert_eq(cca_config_parse(&c, cases[i].conf), CCA_OK);
        cr_assert_eq(cca_create(&c, u, &a), CCA_OK, "%s: %s", cases[i].conf, cca_last_error());
        cr_assert_eq(tu_stats(a).reserved_bytes, cases[i].arena, "%s: arena %zu", cases[i].conf,
                     tu_stats(a).reserved_bytes);
        void *p = tu_alloc(a, cases[i].arena, NULL);
        tu_free(a, p);
        tu_check(a);
        cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
        cr_assert_eq(tu_upstream_stats(u).bytes_in_use, 0);
        cr_assert_eq(tu_upstream_stats(u).vm_reserved_bytes, 0);
        cca_upstream_destroy(u);
    }
    /* less than one page: refused, with the reason */
    cca_upstream *u = vm_device(256 * MiB, 2 * MiB);
    cca_config c;
    cca_config_default(&c);
    cr_assert_eq(cca_config_parse(&c, "policy:greedy,max_reserved:1M,expandable:1"), CCA_OK);
    cca_allocator *a = NULL;
    cr_assert_eq(cca_create(&c, u, &a), CCA_ERR_OUT_OF_MEMORY);
    cr_assert_null(a);
    cr_assert_not_null(strstr(cca_last_error(), "page"), "%s", cca_last_error());
    cr_assert_eq(tu_upstream_stats(u).bytes_in_use, 0);
    cca_upstream_destroy(u);
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
    cca_allocator *a = exp_allocator(u, "expandable_ahead_max:0");
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
    cca_allocator *a = exp_allocator(u, "expandable_ahead_max:0");
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
