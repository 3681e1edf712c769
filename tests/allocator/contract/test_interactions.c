/*
 * test_interactions.c — allocator/src/alloc.c: where the allocator's features meet, held to the
 * documented semantics as exact numbers: the greedy arena over pages and
 * the sizes it refuses, request sizes at the edge of what can be rounded,
 * max_reserved with the ahead mapping and footprint arenas, trim's budget
 * and its report over expandable ranges, empty-cache's bound with live
 * blocks, and seeded random sequences of all of it against a model of
 * the mapped pages.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_test_util.h"
#include "pages_rule.h"

#define PG (2 * MiB)
#define S1 ((cca_stream)0x51)

/* The simulated device behind the fault wrapper (vm ops, events held on
 * demand). */
static cca_upstream *fx_device(tu_faulty *f, size_t capacity, bool with_events) {
    return tu_faulty_create(f, tu_vm_device(capacity, PG), "fx", with_events);
}

/* No live block left: empty-cache gives everything back (reserved 0, no
 * range, nothing in use on the device), then cca_destroy. */
static void finish(cca_allocator *a, cca_upstream *u) {
    tu_empty_all(a, u);
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    cca_upstream_destroy(u);
}

static void fx_finish(cca_allocator *a, cca_upstream *u, tu_faulty *f) {
    tu_faulty_faults_off(f);
    f->fail_mem_info = false;
    f->hold_events = false;
    finish(a, u);
    cca_upstream_destroy(f->inner);
}

/* ---- the greedy arena over pages ---------------------------------------- */

/* greedy_bytes:7M over 2 MiB pages is an 8 MiB arena (whole pages, rounded
 * up). A request of up to 8 MiB fits it: after an empty-cache released the
 * arena, the request reserves it again and is served. */
Test(interactions, greedy_pages_arena_serves_up_to_its_rounded_size_after_empty_cache) {
    cca_upstream *u = tu_vm_device(256 * MiB, PG);
    cca_allocator *a = tu_allocator(u, "policy:greedy,greedy_bytes:7M,expandable:1,log_oom:0");
    cr_assert_eq(tu_stats(a).reserved_bytes, 8 * MiB);
    cca_release_report r;
    cr_assert_eq(cca_empty_cache(a, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(tu_stats(a).reserved_bytes, 0);
    cr_assert_eq(tu_stats(a).segments, 0, "the arena's empty range went back");
    void *p = NULL;
    cr_assert_eq(cca_alloc(a, 8 * MiB, NULL, &p), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(tu_stats(a).reserved_bytes, 8 * MiB);
    cr_assert_eq(tu_stats(a).ooms, 0);
    tu_free(a, p);
    tu_check(a);
    finish(a, u);
}

/* The same arena full of a pending block (its event held): a request that
 * fits the 8 MiB arena but not greedy_bytes waits for the pending free (a
 * synchronize) as any full arena does, and is served. */
Test(interactions, greedy_pages_arena_completes_pending_frees_for_requests_over_greedy_bytes) {
    tu_faulty f;
    cca_upstream *u = fx_device(&f, 256 * MiB, true);
    cca_allocator *a = tu_allocator(u, "policy:greedy,greedy_bytes:7M,expandable:1,log_oom:0");
    f.hold_events = true;
    void *p = tu_alloc(a, 7 * MiB + 512 * KiB, S1);
    tu_free(a, p); /* pending: allocated on S1 in the shared arena */
    cr_assert_eq(tu_stats(a).pending_blocks, 1);
    uint64_t syncs = f.calls[TU_FAULT_SYNC];
    void *q = NULL;
    cr_assert_eq(cca_alloc(a, 7 * MiB + 512 * KiB, NULL, &q), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(q, p, "best fit: the only block of that size, the arena's first");
    cr_assert_eq(f.calls[TU_FAULT_SYNC], syncs + 1, "one synchronize completed the pending free");
    cr_assert_eq(tu_stats(a).ooms, 0);
    tu_free(a, q);
    fx_finish(a, u, &f);
}

/* ---- sizes at the edge of rounding --------------------------------------- */

/* A size that rounds to 512 but whose pages would pass SIZE_MAX (pages
 * larger than segment_round), on a device whose size is unknown (mem_info
 * refused) and no max_reserved, so that no ceiling stops it: a size whose
 * rounding would overflow, CCA_ERR_INVALID_ARGUMENT with nothing touched
 * (no upstream call), as with classic segments. The largest size whose
 * pages are representable is an OOM. */
Test(interactions, request_whose_pages_overflow_with_an_unknown_device) {
    tu_faulty f;
    cca_upstream *u = fx_device(&f, 256 * MiB, false);
    f.fail_mem_info = true;
    cca_allocator *a = tu_allocator(u, "expandable:1,segment_round:512,log_oom:0");
    void *keep = tu_alloc(a, 4096, NULL);
    cca_stats before = tu_stats(a);
    const size_t sizes[] = {SIZE_MAX, SIZE_MAX - 1024, SIZE_MAX - 1024 - 511, SIZE_MAX - PG, SIZE_MAX - PG - 511};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        uint64_t calls = f.order_count;
        void *p = (void *)1;
        cca_status st = cca_alloc(a, sizes[i], NULL, &p);
        cr_assert_eq(st, CCA_ERR_INVALID_ARGUMENT, "size %zu: %s", sizes[i], cca_status_string(st));
        cr_assert_null(p);
        cr_assert_eq(f.order_count, calls, "size %zu reached the upstream", sizes[i]);
        tu_assert_intact(a, &before, "a size whose pages overflow");
    }
    void *p = (void *)1;
    cr_assert_eq(cca_alloc(a, SIZE_MAX - PG - 512, NULL, &p), CCA_ERR_OUT_OF_MEMORY, "%s", cca_last_error());
    cr_assert_null(p);
    cr_assert_eq(tu_stats(a).allocated_bytes, before.allocated_bytes);
    tu_check(a);
    tu_free(a, keep);
    fx_finish(a, u, &f);
}

/* ---- seeded random sequences against a model ----------------------------- *
 *
 * Allocations of sizes at every edge of the pool and rounding tables (and
 * a few no device could hold), frees, record_stream, events held and let
 * go, trims with random budgets, empty-caches, footprint arenas and domain
 * releases, in three domains, over classic segments (the test double
 * upstream, whose list of allocations is the list of segments) or
 * expandable ones (the simulated device behind the fault wrapper). After
 * every step the invariants hold and the allocator agrees with the
 * device; after every trim, what was released is exactly what the model
 * says:
 *   classic     free segments go largest first (ties: lowest address)
 *               until reserved <= keep; the report's fields follow;
 *   expandable  every mapped page that no live block touches can go, page
 *               by page, until reserved <= keep: reserved becomes
 *               max(touched pages, reserved - ceil((reserved - keep) /
 *               page) pages); after an empty-cache every page left is
 *               touched by a live block and every free byte left is
 *               trapped.
 * An impossible request (over the device or max_reserved) is an OOM that
 * touches nothing: no upstream call, no synchronize, the stats as before
 * but ooms. */

#define R_LIVE 512
/* seeds per config and steps per sequence (-DR_SEEDS=40 -DR_STEPS=800 for
 * a longer search; these keep the suite within seconds under ASan) */
#ifndef R_SEEDS
#define R_SEEDS 3
#define R_STEPS 300
#endif
#define S2 ((cca_stream)0x52)

typedef struct r_block {
    unsigned char *p;
    size_t held;
    uint64_t seed;
} r_block;

/* The growth rule's least step and ahead cap, set through the test hook
 * (pages_rule.h) where a config asks for other than its own. */
typedef struct r_rule {
    size_t least, cap;
} r_rule;

typedef struct r_run {
    bool pages;
    const char *conf; /* the config, and the hook's rule if any */
    char label[200];
    cca_config cfg;
    size_t capacity, ceiling;
    cca_allocator *a;
    cca_upstream *u;
    tu_upstream t;
    tu_faulty f;
    cca_domain *dom[3];
    r_block live[R_LIVE];
    size_t n;
    uint64_t rng;
    size_t step;
} r_run;

static uint64_t r_upstream_calls(const r_run *r) {
    if (r->pages)
        return r->f.order_count;
    return r->t.alloc_calls + r->t.free_calls + r->t.sync_calls;
}

static void r_hold(r_run *r, bool on) {
    if (r->pages)
        r->f.hold_events = on;
    else
        r->t.hold_events = on;
}

static size_t r_pick(size_t n, uint64_t *rng) {
    return (size_t)(tu_rand(rng) % n);
}

/* A size at an edge of the tables of r's config, or anywhere. */
static size_t r_size(r_run *r) {
    const cca_config *c = &r->cfg;
    long d = (long)r_pick(5, &r->rng) - 2; /* -2..2 */
    long fine[] = {-512, -1, 0, 1, 512};
    size_t k = 1 + r_pick(8, &r->rng), base;
    switch (r_pick(10, &r->rng)) {
    case 0: return 1 + r_pick(4096, &r->rng);
    case 1: base = c->small_max; break;
    case 2: base = c->large_min; break;
    case 3: base = c->medium_segment; break;
    case 4: base = k * c->segment_round; break;
    case 5: base = k * PG; break;
    case 6: base = c->small_segment; break;
    case 7: return 1 + r_pick(24 * MiB, &r->rng);
    case 8: return 1 + r_pick(2 * MiB, &r->rng);
    default:
        if (r_pick(4, &r->rng))
            return 1 + r_pick(512 * KiB, &r->rng);
        return r->ceiling + 1 + r_pick(4 * MiB, &r->rng); /* can never succeed */
    }
    long s = (long)base + fine[d + 2];
    return s > 0 ? (size_t)s : 1;
}

static void r_stamp(r_block *b) {
    memcpy(b->p, &b->seed, sizeof b->seed);
    memcpy(b->p + b->held - sizeof b->seed, &b->seed, sizeof b->seed);
}

static void r_check_stamps(const r_run *r) {
    for (size_t i = 0; i < r->n; i++) {
        const r_block *b = &r->live[i];
        uint64_t x, y;
        memcpy(&x, b->p, sizeof x);
        memcpy(&y, b->p + b->held - sizeof y, sizeof y);
        cr_assert(x == b->seed && y == b->seed, "step %zu: block %p lost its contents", r->step, (void *)b->p);
    }
}

static size_t r_allocated(const r_run *r) {
    size_t sum = 0;
    for (size_t i = 0; i < r->n; i++)
        sum += r->live[i].held;
    return sum;
}

/* The allocator agrees with the device, and the invariants hold. */
static void r_agree(const r_run *r) {
    cca_status st = cca_check_invariants(r->a);
    cr_assert_eq(st, CCA_OK, "step %zu (%s): %s", r->step, r->conf, cca_last_error());
    cca_stats s = tu_stats(r->a);
    cr_assert_geq(s.allocated_bytes, r_allocated(r), "step %zu", r->step);
    if (r->pages) {
        cca_upstream_stats in = tu_upstream_stats(r->f.inner);
        cr_assert_eq(s.reserved_bytes, in.vm_mapped_bytes, "step %zu: reserved %zu, device maps %zu", r->step,
                     s.reserved_bytes, in.vm_mapped_bytes);
        cr_assert_eq(s.address_space_bytes, in.vm_reserved_bytes, "step %zu", r->step);
    } else {
        cr_assert_eq(s.reserved_bytes, r->t.used, "step %zu: reserved %zu, device holds %zu", r->step,
                     s.reserved_bytes, r->t.used);
        cr_assert_eq(s.segments, r->t.live_count, "step %zu", r->step);
    }
    if (r->cfg.max_reserved)
        cr_assert_leq(s.reserved_bytes, r->cfg.max_reserved, "step %zu: over max_reserved", r->step);
}

/* Pages (of PG bytes, by address: ranges are page-aligned) that live
 * blocks touch. */
static size_t r_touched_pages(const r_run *r) {
    uintptr_t *pages = malloc(R_LIVE * 64 * sizeof *pages);
    size_t n = 0;
    for (size_t i = 0; i < r->n; i++) {
        uintptr_t lo = (uintptr_t)r->live[i].p / PG, hi = ((uintptr_t)r->live[i].p + r->live[i].held - 1) / PG;
        for (uintptr_t p = lo; p <= hi; p++) {
            size_t j = 0;
            while (j < n && pages[j] != p)
                j++;
            if (j == n) {
                cr_assert_lt(n, R_LIVE * 64);
                pages[n++] = p;
            }
        }
    }
    free(pages);
    return n;
}

/* Classic: the test double's allocations are the segments. */
static bool r_segment_live(const r_run *r, const tu_live *seg) {
    for (size_t i = 0; i < r->n; i++)
        if ((uintptr_t)r->live[i].p >= (uintptr_t)seg->ptr &&
            (uintptr_t)r->live[i].p < (uintptr_t)seg->ptr + seg->size)
            return true;
    return false;
}

static int r_by_size_desc(const void *x, const void *y) {
    const tu_live *a = x, *b = y;
    if (a->size != b->size)
        return a->size < b->size ? 1 : -1;
    return (uintptr_t)a->ptr < (uintptr_t)b->ptr ? -1 : (uintptr_t)a->ptr > (uintptr_t)b->ptr;
}

static void r_trim(r_run *r, size_t keep) {
    cca_stats before = tu_stats(r->a);
    cca_release_report rep;
    tu_live expect_gone[TU_MAX_LIVE];
    size_t gone = 0, kept_free = 0, pinned = 0, pinned_bytes = 0, expect_reserved = before.reserved_bytes;
    if (!r->pages) {
        tu_live segs[TU_MAX_LIVE], empty[TU_MAX_LIVE];
        size_t ns = r->t.live_count, ne = 0;
        memcpy(segs, r->t.live, ns * sizeof *segs);
        for (size_t i = 0; i < ns; i++) {
            if (r_segment_live(r, &segs[i])) {
                pinned++;
                pinned_bytes += segs[i].size;
            } else {
                empty[ne++] = segs[i];
            }
        }
        qsort(empty, ne, sizeof *empty, r_by_size_desc);
        for (size_t i = 0; i < ne; i++) {
            if (expect_reserved > keep) {
                expect_gone[gone++] = empty[i];
                expect_reserved -= empty[i].size;
            } else {
                kept_free++;
            }
        }
    } else {
        size_t touched = r_touched_pages(r) * PG;
        if (expect_reserved > keep) {
            size_t cut = (expect_reserved - keep + PG - 1) / PG * PG;
            expect_reserved = expect_reserved - cut > touched ? expect_reserved - cut : touched;
        }
    }
    cca_status st = keep ? cca_trim(r->a, keep, &rep) : cca_empty_cache(r->a, &rep);
    cr_assert_eq(st, CCA_OK, "step %zu: trim(%zu): %s", r->step, keep, cca_last_error());
    cca_stats s = tu_stats(r->a);
    size_t allocated = r_allocated(r);
    cr_assert_eq(s.pending_blocks, 0, "step %zu: the synchronize completed every pending free", r->step);
    cr_assert_eq(s.allocated_bytes, allocated, "step %zu", r->step);
    cr_assert_eq(s.reserved_bytes, expect_reserved, "step %zu (%s): trim(%zu) from %zu left %zu, model %zu", r->step,
                 r->conf, keep, before.reserved_bytes, s.reserved_bytes, expect_reserved);
    cr_assert_eq(rep.bytes_still_reserved, s.reserved_bytes, "step %zu", r->step);
    cr_assert_eq(rep.bytes_released, before.reserved_bytes - s.reserved_bytes, "step %zu", r->step);
    cr_assert_eq(rep.segments_released, before.segments - s.segments, "step %zu", r->step);
    cr_assert_eq(rep.segments_pinned + rep.segments_kept, s.segments, "step %zu", r->step);
    cr_assert_eq(rep.live_bytes_pinning, allocated, "step %zu", r->step);
    if (!r->pages) {
        cr_assert_eq(rep.segments_released, gone, "step %zu", r->step);
        for (size_t i = 0; i < gone; i++)
            for (size_t j = 0; j < r->t.live_count; j++)
                cr_assert_neq(r->t.live[j].ptr, expect_gone[i].ptr, "step %zu: trim(%zu) kept the %zu-byte segment %p",
                              r->step, keep, expect_gone[i].size, expect_gone[i].ptr);
        cr_assert_eq(rep.segments_kept, kept_free, "step %zu", r->step);
        cr_assert_eq(rep.segments_pinned, pinned, "step %zu", r->step);
        cr_assert_eq(rep.free_bytes_pinned, pinned_bytes - allocated, "step %zu", r->step);
        cr_assert_eq(rep.pages_unmapped + rep.bytes_unmapped + rep.free_bytes_trapped, 0, "step %zu", r->step);
    } else {
        cr_assert_eq(rep.bytes_unmapped, rep.bytes_released, "step %zu", r->step);
        cr_assert_eq(rep.pages_unmapped * PG, rep.bytes_unmapped, "step %zu", r->step);
        if (!keep) {
            cr_assert_eq(rep.segments_kept, 0, "step %zu", r->step);
            cr_assert_eq(rep.free_bytes_trapped, s.reserved_bytes - allocated, "step %zu", r->step);
            cr_assert_eq(rep.free_bytes_pinned, s.reserved_bytes - allocated, "step %zu", r->step);
        }
    }
    r_check_stamps(r);
}

static void r_alloc(r_run *r) {
    size_t size = r_size(r);
    int d = (int)r_pick(3, &r->rng);
    cca_stream s = r_pick(3, &r->rng) ? NULL : S1;
    cca_stats before = tu_stats(r->a);
    uint64_t calls = r_upstream_calls(r);
    void *p = (void *)1;
    cca_status st = cca_alloc_in(r->a, r->dom[d], size, s, &p);
    size_t rounded = (size + 511) / 512 * 512;
    if (rounded > r->ceiling) { /* can never succeed */
        cr_assert_eq(st, CCA_ERR_OUT_OF_MEMORY, "step %zu: %zu bytes over a ceiling of %zu: %s", r->step, size,
                     r->ceiling, cca_status_string(st));
        cr_assert_eq(r_upstream_calls(r), calls, "step %zu: an impossible %zu bytes reached the upstream", r->step, size);
        cca_stats s2 = tu_stats(r->a);
        before.ooms++;
        if (before.pending_blocks == 0) {
            tu_assert_intact(r->a, &before, "an impossible request");
        } else { /* step 3 ran: pending frees whose events completed rejoined the pool */
            cr_assert_eq(s2.ooms, before.ooms, "step %zu", r->step);
            cr_assert_eq(s2.alloc_retries, before.alloc_retries, "step %zu", r->step);
            cr_assert_eq(s2.reserved_bytes, before.reserved_bytes, "step %zu", r->step);
            cr_assert_eq(s2.segments, before.segments, "step %zu", r->step);
        }
        return;
    }
    if (st != CCA_OK) {
        cr_assert_eq(st, CCA_ERR_OUT_OF_MEMORY, "step %zu: %zu bytes: %s", r->step, size, cca_last_error());
        cr_assert_null(p);
        cca_stats s2 = tu_stats(r->a);
        cr_assert_eq(s2.ooms, before.ooms + 1, "step %zu", r->step);
        /* live blocks unchanged (the retry may complete pending frees) */
        cr_assert(s2.allocated_bytes <= before.allocated_bytes && s2.allocated_bytes >= r_allocated(r),
                  "step %zu: a failed request changed live blocks", r->step);
        r_check_stamps(r);
        return;
    }
    cr_assert_not_null(p);
    if (r->n == R_LIVE) {
        tu_free(r->a, p);
        return;
    }
    r_block *b = &r->live[r->n++];
    b->p = p;
    b->held = tu_block_size(r->a, p);
    cr_assert_geq(b->held, rounded, "step %zu", r->step);
    b->seed = tu_rand(&r->rng);
    r_stamp(b);
}

static void r_free(r_run *r) {
    if (!r->n)
        return;
    size_t i = r_pick(r->n, &r->rng);
    if (r_pick(8, &r->rng) == 0)
        cr_assert_eq(cca_record_stream(r->a, r->live[i].p, S2), CCA_OK, "%s", cca_last_error());
    tu_free(r->a, r->live[i].p);
    r->live[i] = r->live[--r->n];
}

static void r_domain_release(r_run *r) {
    int d = 1 + (int)r_pick(2, &r->rng);
    bool holds = false;
    for (size_t i = 0; i < r->n && !holds; i++) {
        cca_domain *of = NULL;
        cr_assert_eq(cca_domain_of(r->a, r->live[i].p, &of), CCA_OK);
        holds = of == r->dom[d];
    }
    cca_domain_report rep;
    memset(&rep, 0, sizeof rep);
    cca_status st = cca_domain_release(r->a, r->dom[d], 0, &rep);
    if (holds) {
        cr_assert_eq(st, CCA_ERR_LIVE_BLOCKS, "step %zu: %s", r->step, cca_status_string(st));
        return;
    }
    cr_assert_eq(st, CCA_OK, "step %zu: %s", r->step, cca_last_error());
    cca_domain_stats ds;
    cr_assert_eq(cca_get_domain_stats(r->a, r->dom[d], &ds), CCA_OK);
    cr_assert_eq(ds.reserved_bytes, 0, "step %zu", r->step);
    cr_assert_eq(ds.segments, 0, "step %zu", r->step);
}

static void r_reserve(r_run *r) {
    int d = 1 + (int)r_pick(2, &r->rng);
    size_t bytes = 1 + r_pick(40 * MiB, &r->rng);
    size_t rounded = (bytes + 511) / 512 * 512;
    if (r->pages)
        rounded = (rounded + PG - 1) / PG * PG;
    cca_stats before = tu_stats(r->a);
    cca_status st = cca_domain_reserve(r->a, r->dom[d], bytes);
    if (rounded > r->ceiling) {
        cr_assert(st == CCA_ERR_OUT_OF_MEMORY || st == CCA_ERR_INVALID_ARGUMENT, "step %zu: %s", r->step,
                  cca_status_string(st));
        tu_assert_intact(r->a, &before, "an arena over the ceiling");
        return;
    }
    cr_assert(st == CCA_OK || st == CCA_ERR_OUT_OF_MEMORY || st == CCA_ERR_INVALID_ARGUMENT, "step %zu: %s",
              r->step, cca_last_error());
    if (st == CCA_ERR_INVALID_ARGUMENT)
        tu_assert_intact(r->a, &before, "a second arena");
}

static void r_sequence(bool pages, const char *conf, const r_rule *rule, size_t capacity, uint64_t seed, size_t steps) {
    r_run *r = calloc(1, sizeof *r);
    cr_assert_not_null(r);
    r->pages = pages;
    if (rule)
        snprintf(r->label, sizeof r->label, "%s, least step %zu, cap %zu", conf, rule->least, rule->cap);
    else
        snprintf(r->label, sizeof r->label, "%s", conf);
    r->conf = r->label;
    r->capacity = capacity;
    r->rng = seed;
    r->u = pages ? fx_device(&r->f, capacity, true) : tu_upstream_create(&r->t, capacity, true);
    r->a = tu_allocator(r->u, conf);
    if (rule)
        ccai_pages_rule_set(r->a, rule->least, rule->cap, 128 * MiB);
    cr_assert_eq(cca_get_config(r->a, &r->cfg), CCA_OK);
    r->ceiling = r->cfg.max_reserved && r->cfg.max_reserved < capacity ? r->cfg.max_reserved : capacity;
    bool greedy = r->cfg.policy == CCA_POLICY_GREEDY;
    if (!greedy) {
        cr_assert_eq(cca_domain_create(r->a, "one", &r->dom[1]), CCA_OK);
        cr_assert_eq(cca_domain_create(r->a, "two", &r->dom[2]), CCA_OK);
    }
    for (r->step = 0; r->step < steps; r->step++) {
        unsigned op = (unsigned)r_pick(100, &r->rng);
        if (op < 45)
            r_alloc(r);
        else if (op < 78)
            r_free(r);
        else if (op < 84)
            r_hold(r, r_pick(2, &r->rng));
        else if (op < 91)
            r_trim(r, r_pick(4, &r->rng) ? r_pick(r->capacity / 512, &r->rng) * 512 : 0);
        else if (op < 95 && !greedy)
            r_reserve(r);
        else if (!greedy)
            r_domain_release(r);
        r_agree(r);
    }
    while (r->n)
        r_free(r);
    r_hold(r, false);
    r_trim(r, 0);
    if (pages) {
        fx_finish(r->a, r->u, &r->f);
    } else {
        tu_teardown(r->a, r->u);
    }
    free(r);
}

static const char *const r_classic_confs[] = {
    "expandable:0,log_oom:0",
    "expandable:0,log_oom:0,max_reserved:96M",
    "expandable:0,log_oom:0,medium_pool:0",
    "expandable:0,log_oom:0,small_pool:0,max_reserved:64M",
    "expandable:0,log_oom:0,max_split:22M",
    "expandable:0,log_oom:0,max_split:21M,medium_pool:0,segment_round:512,large_min:3M",
    "expandable:0,log_oom:0,policy:greedy,greedy_bytes:100M",
};

static const struct {
    const char *conf;
    const r_rule *rule; /* NULL: the config's own */
} r_pages_confs[] = {
    {"expandable:1,log_oom:0", NULL},
    {"expandable:1,log_oom:0,max_reserved:72M", NULL},
    {"expandable:1,log_oom:0,small_pool:0", &(const r_rule){0, 64 * MiB}},
    {"expandable:1,log_oom:0,max_reserved:50M,expandable_ahead:1", &(const r_rule){20 * MiB, 8 * MiB}},
    {"expandable:1,log_oom:0,expandable_ahead:0,segment_round:512,small_max:1000", NULL},
    {"expandable:1,log_oom:0,policy:greedy,greedy_bytes:70M", NULL},
    {"expandable:1,log_oom:0,policy:greedy,greedy_bytes:7M,max_reserved:100M", NULL},
};

Test(interactions, random_classic_sequences_release_what_the_model_says) {
    for (size_t c = 0; c < sizeof r_classic_confs / sizeof *r_classic_confs; c++)
        for (uint64_t seed = 1; seed <= R_SEEDS; seed++)
            r_sequence(false, r_classic_confs[c], NULL, 160 * MiB, seed * 7919 + c, R_STEPS);
}

Test(interactions, random_expandable_sequences_release_what_the_model_says) {
    for (size_t c = 0; c < sizeof r_pages_confs / sizeof *r_pages_confs; c++)
        for (uint64_t seed = 1; seed <= R_SEEDS; seed++)
            r_sequence(true, r_pages_confs[c].conf, r_pages_confs[c].rule, 128 * MiB, seed * 104729 + c, R_STEPS);
}

/* ---- the order of a trim over pages --------------------------------------- */

/* One range, no ahead pages: A live [0, 4M), H free [4M, 10M), B live
 * [10M, 12M), T free [12M, 20M) at the tail. Trim's budget takes the
 * tail's pages first, highest first, then the hole's, highest first; the
 * pages a live block touches never go. */
Test(interactions, trim_budget_takes_the_tail_then_the_holes_highest_first) {
    cca_upstream *u = tu_vm_device(64 * MiB, PG);
    cca_allocator *a = tu_allocator(u, "expandable:1,expandable_ahead:0,log_oom:0");
    unsigned char *A = tu_alloc(a, 4 * MiB, NULL), *H = tu_alloc(a, 6 * MiB, NULL);
    unsigned char *B = tu_alloc(a, 2 * MiB, NULL), *T = tu_alloc(a, 8 * MiB, NULL);
    cr_assert(H == A + 4 * MiB && B == A + 10 * MiB && T == A + 12 * MiB, "one range, in address order");
    cr_assert_eq(tu_stats(a).reserved_bytes, 20 * MiB);
    tu_free(a, H);
    tu_free(a, T);
    struct {
        size_t keep, pages; /* pages unmapped by this trim */
        size_t mapped[10];  /* page i of the range: 1 mapped */
    } steps[] = {
        {17 * MiB, 2, {1, 1, 1, 1, 1, 1, 1, 1, 0, 0}}, /* 20M -> 16M: one page would leave 18M */
        {12 * MiB, 2, {1, 1, 1, 1, 1, 1, 0, 0, 0, 0}}, /* the tail is gone */
        {10 * MiB, 1, {1, 1, 1, 1, 0, 1, 0, 0, 0, 0}}, /* the hole's highest page */
        {0, 2, {1, 1, 0, 0, 0, 1, 0, 0, 0, 0}},        /* the rest of the hole; A's and B's stay */
    };
    for (size_t i = 0; i < sizeof steps / sizeof *steps; i++) {
        cca_release_report r;
        size_t before = tu_stats(a).reserved_bytes;
        cr_assert_eq(cca_trim(a, steps[i].keep, &r), CCA_OK, "%s", cca_last_error());
        cr_assert_eq(r.pages_unmapped, steps[i].pages, "trim(%zu): %zu pages", steps[i].keep, r.pages_unmapped);
        cr_assert_eq(r.bytes_released, steps[i].pages * PG);
        cr_assert_eq(tu_stats(a).reserved_bytes, before - steps[i].pages * PG);
        cr_assert_eq(r.segments_released, 0);
        cr_assert_eq(r.segments_pinned, 1);
        for (size_t p = 0; p < 10; p++) {
            if (steps[i].mapped[p])
                TU_ASSERT_READABLE(A + p * PG);
            else
                TU_ASSERT_FAULTS(A + p * PG);
        }
        tu_check(a);
    }
    /* every block ends on a page boundary: nothing is trapped, nothing
     * more can go */
    cca_release_report r;
    cr_assert_eq(cca_empty_cache(a, &r), CCA_OK);
    cr_assert_eq(r.pages_unmapped, 0);
    cr_assert_eq(r.free_bytes_trapped, 0, "the hole starts on a page boundary: %zu", r.free_bytes_trapped);
    tu_free(a, A);
    tu_free(a, B);
    finish(a, u);
}

/* ---- pools at the edges of small_max and large_min ------------------------ */

/* The pool is chosen by the request rounded up to 512 bytes (step 1, then
 * step 2): with small_max:1000 a 1000-byte request is a 1024-byte block,
 * over small_max, and goes to the medium pool (a 20 MiB segment); with the
 * default large_min (10 MiB) a request of 10 MiB - 1 rounds to 10 MiB and
 * gets a segment of its own (10 MiB), while 10 MiB - 512 is medium. Each
 * case on a fresh allocator with classic segments: the segment reserved
 * says the pool. */
Test(interactions, pool_edges_are_decided_on_the_rounded_size) {
    struct {
        const char *conf;
        size_t size, reserved, held;
    } cases[] = {
        {"expandable:0,small_max:1000", 512, 2 * MiB, 512},
        {"expandable:0,small_max:1000", 513, 20 * MiB, 1024},
        {"expandable:0,small_max:1000", 1000, 20 * MiB, 1024},
        {"expandable:0", 1 * MiB, 2 * MiB, 1 * MiB},
        {"expandable:0", 1 * MiB + 1, 20 * MiB, 1 * MiB + 512},
        {"expandable:0", 10 * MiB - 512, 20 * MiB, 10 * MiB - 512},
        {"expandable:0", 10 * MiB - 511, 10 * MiB, 10 * MiB},
        {"expandable:0", 10 * MiB - 1, 10 * MiB, 10 * MiB},
        {"expandable:0", 10 * MiB, 10 * MiB, 10 * MiB},
        {"expandable:0", 10 * MiB + 1, 12 * MiB, 10 * MiB + 512}, /* remainder 2M - 512 > small_max: split */
        {"expandable:0,large_min:3M,segment_round:512", 3 * MiB - 1, 3 * MiB, 3 * MiB},
        {"expandable:0,large_min:3M,segment_round:512", 3 * MiB - 512, 20 * MiB, 3 * MiB - 512},
        {"expandable:0,small_pool:0", 512, 20 * MiB, 512},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        cca_upstream *u;
        cca_allocator *a;
        tu_host_allocator(256 * MiB, cases[i].conf, &u, &a);
        void *p = tu_alloc(a, cases[i].size, NULL);
        cca_stats s = tu_stats(a);
        cr_assert_eq(s.reserved_bytes, cases[i].reserved, "%s, %zu bytes: reserved %zu", cases[i].conf,
                     cases[i].size, s.reserved_bytes);
        cr_assert_eq(tu_block_size(a, p), cases[i].held, "%s, %zu bytes: held %zu", cases[i].conf, cases[i].size,
                     tu_block_size(a, p));
        tu_free(a, p);
        tu_teardown(a, u);
    }
}
