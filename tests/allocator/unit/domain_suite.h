/*
 * domain_suite.h — what the memory-domain suites (test_domain_*.c, one
 * concern each, all of allocator/src/domain.c) share: the two modes and
 * TEST_BOTH, which runs a test with classic segments (expandable:0) and
 * again with expandable segments (expandable:1 over the simulated device's
 * vm ops, 64 KiB pages, whole maps, the device's default backing; a test
 * that unmaps part of a map makes its device with CCA_VM_PAGES,
 * tu_vm_device); short-hands that assert; agree_r, the accounts of every
 * domain against the allocator's totals and the device's own count; blocks
 * with contents; the JSON form.
 */
#ifndef DOMAIN_SUITE_H
#define DOMAIN_SUITE_H

#include "alloc_test_util.h"

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#define PG ((size_t)64 * KiB) /* the simulated device's granularity here */
#define S0 ((cca_stream)0x100)
#define S1 ((cca_stream)0x200)

/* ---- modes: classic or expandable segments ---------------------------------- */

typedef struct mode {
    const char *name;
    bool expandable;
} mode;
static const mode CLASSIC = {"classic", false};
static const mode EXPANDABLE = {"expandable", true};

#define TEST_BOTH(fn)                                                                                                  \
    static void fn(const mode *m);                                                                                     \
    Test(domain, fn##_classic, .timeout = 60) {                                                                        \
        fn(&CLASSIC);                                                                                                  \
    }                                                                                                                  \
    Test(domain, fn##_expandable, .timeout = 60) {                                                                     \
        fn(&EXPANDABLE);                                                                                               \
    }                                                                                                                  \
    static void fn(const mode *m)

static inline size_t round_up(size_t v, size_t to) {
    return (v + to - 1) / to * to;
}

/* A simulated device of `capacity` bytes with 64 KiB pages. */
static inline cca_upstream *device(size_t capacity) {
    cca_host_options o = {.capacity = capacity, .vm_granularity = PG};
    cca_upstream *u = NULL;
    cca_status st = cca_upstream_host_create_with(&o, &u);
    cr_assert_eq(st, CCA_OK, "host device of %zu bytes: %s", capacity, cca_last_error());
    return u;
}

static inline cca_allocator *make(const mode *m, cca_upstream *u, const char *extra) {
    char conf[256];
    snprintf(conf, sizeof conf, "log_oom:0%s%s%s", m->expandable ? ",expandable:1" : ",expandable:0",
             extra ? "," : "", extra ? extra : "");
    return tu_allocator(u, conf);
}

/* ---- domain short-hands -------------------------------------------------------- */

static inline cca_domain *dom(cca_allocator *a, const char *name) {
    cca_domain *d = NULL;
    cca_status st = cca_domain_create(a, name, &d);
    cr_assert_eq(st, CCA_OK, "cca_domain_create(\"%s\"): %s / %s", name, cca_status_string(st), cca_last_error());
    cr_assert_not_null(d);
    return d;
}

static inline cca_domain_stats dst(const cca_allocator *a, const cca_domain *d) {
    cca_domain_stats s;
    memset(&s, 0, sizeof s);
    cca_status st = cca_get_domain_stats(a, d, &s);
    cr_assert_eq(st, CCA_OK, "cca_get_domain_stats: %s / %s", cca_status_string(st), cca_last_error());
    return s;
}

static inline cca_domain *owner(cca_allocator *a, const void *p) {
    cca_domain *d = (cca_domain *)&d;
    cca_status st = cca_domain_of(a, p, &d);
    cr_assert_eq(st, CCA_OK, "cca_domain_of(%p): %s / %s", p, cca_status_string(st), cca_last_error());
    return d;
}

/* cca_alloc_in asserting success, alignment and cca_domain_of. */
static inline void *in(cca_allocator *a, cca_domain *d, size_t size, cca_stream s) {
    void *p = (void *)1;
    cca_status st = cca_alloc_in(a, d, size, s, &p);
    cr_assert_eq(st, CCA_OK, "cca_alloc_in(%s, %zu): %s / %s", dst(a, d).name, size, cca_status_string(st),
                 cca_last_error());
    cr_assert_not_null(p, "cca_alloc_in(%zu) returned NULL", size);
    cr_assert_eq((uintptr_t)p % CCA_ALIGNMENT, 0, "%p is not %u-aligned", p, CCA_ALIGNMENT);
    cr_assert_eq(owner(a, p), d, "cca_domain_of(%p) names another domain", p);
    return p;
}

#define DFIELD_EQ(f)                                                                                                   \
    cr_assert_eq((uint64_t)e->f, (uint64_t)g->f, "%s: domain '%s' " #f " is %llu, expected %llu", what, e->name,      \
                 (unsigned long long)g->f, (unsigned long long)e->f)

static inline void dstats_equal(const cca_domain_stats *e, const cca_domain_stats *g, const char *what) {
    cr_assert_str_eq(e->name, g->name, "%s: name", what);
    DFIELD_EQ(allocated_bytes);
    DFIELD_EQ(allocated_bytes_peak);
    DFIELD_EQ(requested_bytes);
    DFIELD_EQ(requested_bytes_peak);
    DFIELD_EQ(reserved_bytes);
    DFIELD_EQ(reserved_bytes_peak);
    DFIELD_EQ(active_blocks);
    DFIELD_EQ(active_blocks_peak);
    DFIELD_EQ(cached_bytes);
    DFIELD_EQ(largest_free_block);
    DFIELD_EQ(segments);
    DFIELD_EQ(alloc_calls);
    DFIELD_EQ(upstream_allocs);
    DFIELD_EQ(upstream_frees);
    cr_assert_eq(e->fragmentation, g->fragmentation, "%s: fragmentation", what);
}

static inline void dstats_unchanged(const cca_allocator *a, const cca_domain *d, const cca_domain_stats *before,
                             const char *what) {
    cca_domain_stats now = dst(a, d);
    dstats_equal(before, &now, what);
}

/* Counters of domains destroyed so far: the sums over the living domains
 * then fall short of the allocator's totals by exactly these. */
typedef struct retired {
    uint64_t alloc_calls, upstream_allocs, upstream_frees;
    bool unknown; /* destroyed by other threads: counter sums not checked */
} retired;

/* The accounts agree: invariants; every domain's cached = reserved -
 * allocated, its fragmentation from its largest free block, peaks >= now
 * (classic: upstream allocs - frees = segments); the sums over the default
 * domain and doms[0..n) equal the allocator's totals (counters: plus the
 * retired ones), the largest free block is the largest domain's; and the
 * allocator's reserved bytes and address space are the device's own count
 * (dev: the simulated device, NULL to skip). */
static inline void agree_r(const cca_allocator *a, cca_upstream *dev, cca_domain *const *doms, int n, const retired *ret,
                    const char *what) {
    cca_status st = cca_check_invariants(a);
    cr_assert_eq(st, CCA_OK, "%s: invariants: %s", what, cca_last_error());
    cca_stats s = tu_stats(a);
    size_t alloc = 0, req = 0, res = 0, act = 0, segs = 0, cached = 0, lfb = 0;
    uint64_t calls = ret ? ret->alloc_calls : 0, ups = ret ? ret->upstream_allocs : 0,
             downs = ret ? ret->upstream_frees : 0;
    for (int i = -1; i < n; i++) {
        cca_domain_stats d = dst(a, i < 0 ? NULL : doms[i]);
        cr_assert_leq(d.allocated_bytes, d.reserved_bytes, "%s: '%s' allocated %zu > reserved %zu", what, d.name,
                      d.allocated_bytes, d.reserved_bytes);
        cr_assert_eq(d.cached_bytes, d.reserved_bytes - d.allocated_bytes, "%s: '%s' cached %zu", what, d.name,
                     d.cached_bytes);
        cr_assert_leq(d.largest_free_block, d.cached_bytes, "%s: '%s' largest free block", what, d.name);
        double frag = d.cached_bytes ? 1.0 - (double)d.largest_free_block / (double)d.cached_bytes : 0.0;
        cr_assert_float_eq(d.fragmentation, frag, 1e-9, "%s: '%s' fragmentation %g, expected %g", what, d.name,
                           d.fragmentation, frag);
        cr_assert_geq(d.allocated_bytes_peak, d.allocated_bytes, "%s: '%s'", what, d.name);
        cr_assert_geq(d.requested_bytes_peak, d.requested_bytes, "%s: '%s'", what, d.name);
        cr_assert_geq(d.reserved_bytes_peak, d.reserved_bytes, "%s: '%s'", what, d.name);
        cr_assert_geq(d.active_blocks_peak, d.active_blocks, "%s: '%s'", what, d.name);
        cr_assert_leq(d.requested_bytes, d.allocated_bytes, "%s: '%s'", what, d.name);
        if (s.page_size == 0)
            cr_assert_eq(d.upstream_allocs - d.upstream_frees, d.segments,
                         "%s: '%s' %llu upstream allocs - %llu frees, %zu segments", what, d.name,
                         (unsigned long long)d.upstream_allocs, (unsigned long long)d.upstream_frees, d.segments);
        alloc += d.allocated_bytes, req += d.requested_bytes, res += d.reserved_bytes, act += d.active_blocks;
        segs += d.segments, cached += d.cached_bytes;
        calls += d.alloc_calls, ups += d.upstream_allocs, downs += d.upstream_frees;
        if (d.largest_free_block > lfb)
            lfb = d.largest_free_block;
    }
#define SUM_EQ(sum, f)                                                                                                 \
    cr_assert_eq((uint64_t)(sum), (uint64_t)s.f, "%s: sum over domains of " #f " is %llu, the allocator says %llu",   \
                 what, (unsigned long long)(sum), (unsigned long long)s.f)
    SUM_EQ(alloc, allocated_bytes);
    SUM_EQ(req, requested_bytes);
    SUM_EQ(res, reserved_bytes);
    SUM_EQ(act, active_blocks);
    SUM_EQ(segs, segments);
    SUM_EQ(cached, cached_bytes);
    if (!ret || !ret->unknown) {
        SUM_EQ(calls, alloc_calls);
        SUM_EQ(ups, upstream_allocs);
        SUM_EQ(downs, upstream_frees);
    }
    SUM_EQ(lfb, largest_free_block);
#undef SUM_EQ
    if (dev) {
        cca_upstream_stats us = tu_upstream_stats(dev);
        cr_assert_eq(us.bytes_in_use, s.reserved_bytes, "%s: the device holds %zu bytes for us, reserved says %zu",
                     what, us.bytes_in_use, s.reserved_bytes);
        cr_assert_eq(us.vm_reserved_bytes, s.address_space_bytes, "%s: the device reserves %zu bytes of space, %zu",
                     what, us.vm_reserved_bytes, s.address_space_bytes);
    }
}

static inline void agree(const cca_allocator *a, cca_upstream *dev, cca_domain *const *doms, int n, const char *what) {
    agree_r(a, dev, doms, n, NULL, what);
}

/* Nothing live; cca_destroy succeeds and the device then holds nothing (no
 * memory, no address space); destroy it too. (tu_teardown counts classic
 * upstream allocations, which expandable segments do not make.) */
static inline void finish(cca_allocator *a, cca_upstream *u) {
    tu_check(a);
    cr_assert_eq(tu_stats(a).active_blocks, 0, "blocks still live at the end");
    cr_assert_eq(cca_destroy(a), CCA_OK, "cca_destroy: %s", cca_last_error());
    cca_upstream_stats us = tu_upstream_stats(u);
    cr_assert_eq(us.bytes_in_use, 0, "the device still holds %zu bytes after cca_destroy", us.bytes_in_use);
    cr_assert_eq(us.vm_reserved_bytes, 0, "the device still reserves %zu bytes", us.vm_reserved_bytes);
    cr_assert_eq(us.vm_mapped_bytes, 0);
    cr_assert_eq(us.allocations, 0);
    cca_upstream_destroy(u);
}

/* ---- blocks with contents -------------------------------------------------------- */

typedef struct blk {
    char *p;
    size_t size, held;
    cca_stream s;
    cca_domain *d;
    uint64_t seed;
    uint64_t stamp; /* the allocator's alloc_calls right after this block was made */
} blk;

/* A block in d, filled with tu_fill (full = true) or tagged at its ends. */
static inline blk mk(cca_allocator *a, cca_domain *d, size_t size, cca_stream s, uint64_t seed, bool full) {
    blk b = {.size = size, .s = s, .d = d, .seed = seed};
    b.p = in(a, d, size, s);
    b.held = tu_block_size(a, b.p);
    cr_assert_geq(b.held, size);
    b.stamp = tu_stats(a).alloc_calls;
    if (full) {
        tu_fill(b.p, size, seed);
    } else {
        memcpy(b.p, &seed, sizeof seed);
        memcpy(b.p + size - sizeof seed, &seed, sizeof seed);
    }
    return b;
}

static inline bool intact(const blk *b, bool full) {
    if (full)
        return tu_check_fill(b->p, b->size, b->seed);
    uint64_t head, tail;
    memcpy(&head, b->p, sizeof head);
    memcpy(&tail, b->p + b->size - sizeof tail, sizeof tail);
    return head == b->seed && tail == b->seed;
}

#define ASSERT_INTACT(b, full, what)                                                                                   \
    cr_assert(intact(&(b), full), "%s: block %p of %zu bytes overwritten", what, (void *)(b).p, (b).size)

/* ---- JSON ----------------------------------------------------------------------- */

static inline cJSON *domains_json(const cca_allocator *a) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    cca_status st = cca_domain_stats_write_json(a, f);
    cr_assert_eq(st, CCA_OK, "cca_domain_stats_write_json: %s", cca_last_error());
    fclose(f);
    cJSON *json = cJSON_Parse(buf);
    cr_assert_not_null(json, "not JSON: %s", buf);
    cr_assert(cJSON_IsArray(json), "not a JSON array: %s", buf);
    free(buf);
    return json;
}

static inline double json_number(const cJSON *obj, const char *key) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
    cr_assert(cJSON_IsNumber(item), "JSON key '%s' missing or not a number", key);
    return item->valuedouble;
}

/* The byte that fills a cca_live_block array before a call, so that the
 * entries the call did not write can be told apart. */
#define CANARY 0x5a

#endif
