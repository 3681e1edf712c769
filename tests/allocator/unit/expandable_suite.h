/*
 * expandable_suite.h — what the suites of expandable segments
 * (test_expandable_*.c, all of allocator/src/kinds/pages.c with
 * core/release.c's page release and alloc.c's mapping) share.
 *
 * An expandable segment is a range of address space (vm_reserve) as large
 * as the device, one per (stream, pool), whose pages are mapped as blocks
 * need them and unmapped by trim, empty-cache and the OOM retry when they
 * lie wholly inside a free block. The tests run on the simulated device
 * (cca_upstream_host_create_with) with a 64 KiB granularity (2 MiB where
 * the GPU figure matters), so that many pages fit in a few MiB.
 *
 * Here: the simulated device and its vm_backing, the allocator with
 * expandable:1 and its growth rule's fixed parts (least step, ahead cap,
 * largest map) set through the test hook of tests/support/pages_rule.h,
 * agree() (the accounts against the device's own count),
 * finish(), the growth rule as a model (growth, take), and the
 * fault-injecting wrapper over the device (fx_create, fx_agree).
 */
#ifndef EXPANDABLE_SUITE_H
#define EXPANDABLE_SUITE_H

#include "alloc_test_util.h"
#include "ccai_rng.h"
#include "internal.h"
#include "pages_rule.h"     /* the growth rule's fixed parts, set per test */
#include "../kinds/pages.h" /* the page bitmap, the address budget */

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

static inline size_t round_to(size_t v, size_t to) {
    return (v + to - 1) / to * to;
}

static size_t rnd(size_t size) { /* what the allocator makes of a request */
    return round_to(size, CCA_GRANULARITY);
}

/* The device's vm_backing in this test: CCA_VM_PAGES, but the whole-maps
 * twins of the fault sweep, the random sequence and the threads set
 * CCA_VM_WHOLE_MAPS, and their allocators cut maps at whole_chunk (the
 * hook's largest map, map_bytes(); three
 * pages: runs are cut, and a trim frees a map only whole; 2 MiB for the
 * sweep, which fails every call of its script in turn: a few maps per
 * request keep it to seconds). */
static int backing = CCA_VM_PAGES;
static size_t whole_chunk = 3 * PG;
/* More config for the allocators of exp_allocator (the hold_peak twins of
 * the fault sweep and the random sequence); NULL: none. */
static const char *extra_conf;

static inline cca_upstream *vm_device(size_t capacity, size_t gran) {
    return tu_vm_device_backed(capacity, gran, backing);
}

/* Device memory held by another tenant (classic cca_upstream_alloc), which
 * agree() leaves out of the device's count. */
static size_t tenant_bytes;

/* Another tenant takes `bytes` of device u (one classic allocation, at
 * most one at a time), and gives them back. */
static inline void *tenant_take(cca_upstream *u, size_t bytes) {
    void *t = NULL;
    cr_assert_eq(cca_upstream_alloc(u, bytes, &t), CCA_OK, "%s", cca_last_error());
    tenant_bytes = bytes;
    return t;
}

static inline void tenant_give_back(cca_upstream *u, void *t) {
    cr_assert_eq(cca_upstream_free(u, t, tenant_bytes), CCA_OK, "%s", cca_last_error());
    tenant_bytes = 0;
}

/* Bytes the device says are used (capacity - free). */
static inline size_t device_used(cca_upstream *u) {
    size_t free_b = 0, total_b = 0;
    cr_assert_eq(cca_upstream_mem_info(u, &free_b, &total_b), CCA_OK);
    return total_b - free_b;
}

/* The accounts of an allocator alone on host device u agree: mapped bytes
 * = the upstream's = what the device reports used = reserved bytes (no
 * classic segment); address space = the upstream's reserved ranges =
 * segments * `range` (0: not checked); the call counts agree too. */
static inline void agree(const cca_allocator *a, cca_upstream *u, size_t page, size_t range, const char *what) {
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
static inline void finish(cca_allocator *a, cca_upstream *u) {
    tu_empty_all(a, u);
    cr_assert_eq(device_used(u), 0);
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    cca_upstream_destroy(u);
}

/* The largest map this test's allocators make: whole_chunk over whole
 * maps; over pages the default 128 MiB, which pages ignore. */
static inline size_t map_bytes(void) {
    return backing == CCA_VM_WHOLE_MAPS ? whole_chunk : 128 * MiB;
}

/* An allocator of config `conf` whose growth rule's fixed parts are set
 * through the test hook (tests/support/pages_rule.h) right after
 * cca_create, before its first request: a tail map's least step `least`,
 * the ahead's cap `cap`, maps of at most map_bytes(). */
static inline cca_allocator *rule_allocator(cca_upstream *u, const char *conf, size_t least, size_t cap) {
    cca_allocator *a = tu_allocator(u, conf);
    ccai_pages_rule_set(a, least, cap, map_bytes());
    return a;
}

/* The ahead's cap a config implies: expandable_ahead x 1 GiB (64 MiB at
 * the default 1/16; 0 with the ahead off). */
static inline size_t implied_cap(const char *conf) {
    cca_config c;
    cca_config_default(&c);
    cr_assert_eq(cca_config_parse(&c, conf), CCA_OK, "%s: %s", conf, cca_last_error());
    return (size_t)(c.expandable_ahead * (double)GiB);
}

/* expandable:1, log_oom:0, then `extra` and extra_conf (either may be
 * NULL). The least step is off (least 0): these tests follow the
 * fractional rule page by page; the_least_step_... turns it on. The cap is
 * the one the config implies. */
static inline cca_allocator *exp_allocator(cca_upstream *u, const char *extra) {
    char conf[256];
    snprintf(conf, sizeof conf, "expandable:1,log_oom:0%s%s%s%s", extra ? "," : "", extra ? extra : "",
             extra_conf ? "," : "", extra_conf ? extra_conf : "");
    return rule_allocator(u, conf, 0, implied_cap(conf));
}

/* The growth rule for blocks taken one after another from the tail of one
 * segment, every page below the tail mapped: a request that needs pages
 * beyond `end` maps them plus min(max(mapped x ahead, least - its new
 * pages), ahead_max) more (whole pages, not past the range; defaults 1/16,
 * 20 MiB and 64 MiB, the cap being expandable_ahead x 1 GiB; least 0 in
 * most tests) in one vm_map call. */
typedef struct growth {
    size_t page, npages;
    size_t off;  /* where the next block starts */
    size_t end;  /* pages mapped: [0, end)     */
    size_t maps; /* vm_map calls               */
    double ahead;
    size_t ahead_max; /* the rule's cap, in bytes */
    size_t least;     /* the rule's least step, in bytes */
    uintptr_t base;
} growth;

static inline void growth_init(growth *g, size_t page, size_t range) {
    memset(g, 0, sizeof *g);
    g->page = page;
    g->npages = range / page;
    g->ahead = 1.0 / 16;
    g->ahead_max = 64 * MiB;
}

/* The offset of a block of `size` bytes (its pages mapped as the rule says). */
static inline size_t growth_take(growth *g, size_t size) {
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
static inline void *take(cca_allocator *a, growth *g, size_t size, cca_stream s) {
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

/* ---- the fault-injecting wrapper ----------------------------------------- */

/* The fault-injecting wrapper (tu_faulty, alloc_test_util.h) over a new host
 * device of `capacity` bytes, granularity PG: call number fail_at[k] of kind
 * k fails (once, or from then on: sticky); calls[k] counts every call of k,
 * ok[k] those the device granted. Events (when asked for) are the wrapper's
 * own tokens, complete when recorded unless held; synchronize completes them
 * unless told not to. */
static inline cca_upstream *fx_create(tu_faulty *f, size_t capacity, bool with_events) {
    cca_upstream *u = tu_faulty_create(f, vm_device(capacity, PG), "fx", with_events);
    cr_assert_eq(cca_upstream_has_vm(u), 1);
    return u;
}

/* The allocator's accounts agree with the wrapper's counts and the inner
 * device's: mapped, reserved address space, map and unmap calls. */
static inline void fx_agree(const cca_allocator *a, cca_upstream *u, const tu_faulty *f, const char *what) {
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

#endif
