/*
 * test_release_bound.c — what cca_empty_cache leaves behind, as a property
 * of random programs (allocator/src/core/release.c, kinds/pages.c,
 * kinds/classic.c; docs/allocator.md, "What it cannot return").
 *
 * - The claim: after cca_empty_cache returns CCA_OK, every unit of device
 *   memory the allocator still holds touches a live block of an awake
 *   domain, where a unit is what the upstream can take back on its own:
 *     classic segments   one upstream alloc
 *     whole maps         one vm_map (the default backing)
 *     pages              one granule
 *   and so the free bytes left mapped are all "trapped"
 *   (free_bytes_trapped == reserved - the awake live blocks' bytes); with
 *   pages, at most one page at each end of a run of live blocks; with no
 *   live block, nothing at all (ccalloc.h, cca_empty_cache).
 * - Checked against the device's side of the books: tu_faulty's book
 *   (alloc_test_util.h) records every alloc and map (a map carved by the
 *   unmaps that name part of it, with pages), and its events complete at
 *   a synchronize, so frees on other streams wait (pending) until
 *   empty_cache waits for them.
 * - The programs: alloc / free / record_stream over three streams and
 *   three domains (the default included), sleep (copy or discard) and wake
 *   of a domain, trim(keep), empty_cache; in some, footprint arenas
 *   (cca_domain_reserve) too; the check after every
 *   empty_cache and every trim that stopped above its keep (nothing more
 *   could go), the invariant walker after every step.
 * - Power (checked by breaking pages.c on purpose): leaving one map whose
 *   first page starts a free block fails every whole-maps program; leaving
 *   free blocks between two live ones fails the pages programs and greedy.
 * CCA_RANDOM_SEED replays another seed.
 */
#include "alloc_test_util.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 40
/* The device and its book: tu_faulty (no fault armed) over the simulated
 * device, keeping every segment and map it grants (tu_book), its events
 * held until a synchronize. */
typedef struct rec {
    tu_faulty f;
    tu_book book;
    cca_upstream *inner;
    int backing;
    size_t gran;
} rec;

static cca_upstream *rec_create(rec *r, size_t capacity, size_t gran, int backing) {
    r->inner = tu_vm_device_backed(capacity, gran, backing);
    r->backing = backing;
    cr_assert_eq(cca_upstream_vm_granularity(r->inner, &r->gran), CCA_OK);
    cca_upstream *u = tu_faulty_create_streams(&r->f, r->inner, "rec", true);
    memset(&r->book, 0, sizeof r->book);
    r->f.book = &r->book;
    r->f.hold_events = true; /* a free on another stream stays pending until a synchronize */
    return u;
}

typedef struct slot {
    char *p;
    size_t size; /* requested */
    int dom;     /* index into the program's domains */
} slot;

typedef struct program {
    const char *conf;
    int backing;     /* with expandable:1 */
    size_t gran;     /* 0: the device's 2 MiB */
    bool one_domain; /* the default alone (greedy has no other domains) */
    bool reserve;    /* footprint arenas too: cca_domain_reserve of d1 or d2 now and then */
} program;

typedef struct world {
    cca_allocator *a;
    rec *r;
    slot slots[SLOTS];
    cca_domain *doms[3]; /* [0] NULL: the default */
    bool asleep[3];
    bool classic;
    char where[200];
} world;

/* A live block's extent, [p, p + its block's size). */
typedef struct extent {
    uintptr_t lo, hi;
} extent;

static int by_lo(const void *x, const void *y) {
    uintptr_t a = ((const extent *)x)->lo, b = ((const extent *)y)->lo;
    return a < b ? -1 : a > b;
}

static size_t awake_extents(world *w, extent *out) {
    size_t n = 0;
    for (int i = 0; i < SLOTS; i++) {
        if (!w->slots[i].p || w->asleep[w->slots[i].dom])
            continue;
        size_t bs = 0;
        cr_assert_eq(cca_block_size(w->a, w->slots[i].p, &bs), CCA_OK, "%s: %s", w->where, cca_last_error());
        cr_assert_geq(bs, w->slots[i].size, "%s", w->where);
        out[n++] = (extent){(uintptr_t)w->slots[i].p, (uintptr_t)w->slots[i].p + bs};
    }
    qsort(out, n, sizeof *out, by_lo);
    return n;
}

static bool touches(const extent *e, size_t n, uintptr_t lo, uintptr_t hi) {
    for (size_t i = 0; i < n; i++)
        if (e[i].lo < hi && e[i].hi > lo)
            return true;
    return false;
}

/* After a release call that returned CCA_OK: every unit held touches an awake live block; `emptied`: the call was
 * empty_cache (else a trim that ended above its keep, which must then have found nothing more to give). */
static void check_left(world *w, const cca_release_report *rep) {
    extent e[SLOTS];
    size_t n = awake_extents(w, e);
    rec *r = w->r;
    size_t held = 0, live = 0;
    for (size_t i = 0; i < n; i++)
        live += e[i].hi - e[i].lo;
    for (size_t i = 0; i < r->book.nsegs; i++) {
        held += r->book.segs[i].hi - r->book.segs[i].lo;
        cr_assert(touches(e, n, r->book.segs[i].lo, r->book.segs[i].hi),
                  "%s: segment [%#lx, %#lx) holds no live block and stayed", w->where, (unsigned long)r->book.segs[i].lo,
                  (unsigned long)r->book.segs[i].hi);
    }
    for (size_t i = 0; i < r->book.nmaps; i++) {
        tu_piece p = r->book.maps[i];
        held += p.hi - p.lo;
        size_t unit = r->backing == CCA_VM_PAGES ? r->gran : p.hi - p.lo;
        for (uintptr_t lo = p.lo; lo < p.hi; lo += unit)
            cr_assert(touches(e, n, lo, lo + unit), "%s: %s [%#lx, %#lx) holds no live block and stayed", w->where,
                      r->backing == CCA_VM_PAGES ? "page" : "map", (unsigned long)lo, (unsigned long)(lo + unit));
    }
    cca_stats s = tu_stats(w->a);
    cr_assert_eq(s.reserved_bytes, held, "%s: reserved %zu, the device holds %zu", w->where, s.reserved_bytes, held);
    cr_assert_eq(rep->bytes_still_reserved, held, "%s", w->where);
    if (n == 0)
        cr_assert_eq(held, 0, "%s: no live block awake, %zu bytes left", w->where, held);
    if (!w->classic) {
        cr_assert_eq(rep->free_bytes_trapped, held - live, "%s: trapped %zu, free bytes left mapped %zu", w->where,
                     rep->free_bytes_trapped, held - live);
        if (r->backing == CCA_VM_PAGES) { /* at most a page at each end of a run of live blocks */
            size_t runs = 0;
            for (size_t i = 0; i < n; i++)
                runs += i == 0 || e[i].lo != e[i - 1].hi;
            cr_assert_leq(held - live, 2 * runs * r->gran, "%s: %zu free bytes left around %zu runs of %zu-byte pages",
                          w->where, held - live, runs, r->gran);
        }
    }
}

static size_t rsize(uint64_t *rng, unsigned max_bits) {
    unsigned bits = (unsigned)(tu_rand(rng) % (max_bits + 1));
    size_t lo = (size_t)1 << bits;
    return lo + (size_t)(tu_rand(rng) % lo);
}

static uint64_t seed_from_env(uint64_t fallback) {
    const char *env = getenv("CCA_RANDOM_SEED");
    return env && *env ? strtoull(env, NULL, 0) : fallback;
}

static const cca_stream streams[3] = {NULL, (cca_stream)0x100, (cca_stream)0x200};

static void run(const program *pg, uint64_t seed, int steps) {
    static rec r; /* large: not on the stack */
    const size_t capacity = 1 * GiB;
    bool classic = strstr(pg->conf, "expandable:0") != NULL;
    cca_upstream *u = rec_create(&r, capacity, pg->gran, pg->backing);
    char conf[200];
    snprintf(conf, sizeof conf, "log_oom:0,%s", pg->conf);
    world w = {.a = tu_allocator(u, conf), .r = &r, .classic = classic};
    cca_config cfg;
    cr_assert_eq(cca_get_config(w.a, &cfg), CCA_OK);
    bool can_sleep = !classic;
    int ndoms = pg->one_domain ? 1 : 3;
    for (int i = 1; i < ndoms; i++)
        cr_assert_eq(cca_domain_create(w.a, i == 1 ? "d1" : "d2", &w.doms[i]), CCA_OK, "%s", cca_last_error());
    uint64_t rng = seed;
    int checks = 0, sleeps = 0, reserves = 0;
    for (int step = 0; step < steps; step++) {
        snprintf(w.where, sizeof w.where, "%s (pages %zu, %s) seed %llu step %d", pg->conf, r.gran,
                 pg->backing == CCA_VM_PAGES ? "pages" : "whole maps", (unsigned long long)seed, step);
        uint64_t op = tu_rand(&rng) % 100;
        int k = (int)(tu_rand(&rng) % SLOTS);
        int d = (int)(tu_rand(&rng) % (uint64_t)ndoms);
        if (op < 8) {
            cca_release_report rep;
            memset(&rep, 0, sizeof rep);
            cr_assert_eq(cca_empty_cache(w.a, &rep), CCA_OK, "%s: empty_cache: %s", w.where, cca_last_error());
            check_left(&w, &rep);
            checks++;
        } else if (op < 12) {
            size_t reserved = tu_stats(w.a).reserved_bytes;
            size_t keep = reserved ? (size_t)(tu_rand(&rng) % reserved) : 0;
            cca_release_report rep;
            memset(&rep, 0, sizeof rep);
            cr_assert_eq(cca_trim(w.a, keep, &rep), CCA_OK, "%s: trim: %s", w.where, cca_last_error());
            if (rep.bytes_still_reserved > keep) { /* it stopped short of keep: nothing more could go */
                check_left(&w, &rep);
                checks++;
            }
        } else if (op < 17 && can_sleep) {
            cca_sleep_report srep;
            cca_status st;
            if (!w.asleep[d]) {
                st = cca_domain_sleep(w.a, w.doms[d], tu_rand(&rng) % 4 == 0 ? CCA_SLEEP_DISCARD : 0, &srep);
                cr_assert_eq(st, CCA_OK, "%s: sleep: %s", w.where, cca_last_error());
                w.asleep[d] = true;
                sleeps++;
            } else {
                st = cca_domain_wake(w.a, w.doms[d], &srep);
                cr_assert(st == CCA_OK || st == CCA_ERR_OUT_OF_MEMORY, "%s: wake: %s", w.where, cca_last_error());
                if (st == CCA_OK)
                    w.asleep[d] = false;
            }
        } else if (op < 25) {
            if (pg->reserve && op >= 22 && d > 0 && !w.asleep[d]) { /* a footprint arena (refused when one is there) */
                cca_status st = cca_domain_reserve(w.a, w.doms[d], rsize(&rng, 25));
                cr_assert(st == CCA_OK || st == CCA_ERR_OUT_OF_MEMORY || st == CCA_ERR_INVALID_ARGUMENT,
                          "%s: reserve: %s", w.where, cca_last_error());
                reserves += st == CCA_OK;
            } else
            if (w.slots[k].p && !w.asleep[w.slots[k].dom])
                cr_assert_eq(cca_record_stream(w.a, w.slots[k].p, streams[tu_rand(&rng) % 3]), CCA_OK, "%s", w.where);
        } else if (!w.slots[k].p) {
            uint64_t kind = tu_rand(&rng) % 8; /* mostly under 2 MiB, some up to 16 and 128 MiB */
            size_t size = rsize(&rng, kind == 0 ? 26 : kind < 3 ? 23 : 20);
            void *p = NULL;
            cca_status st = cca_alloc_in(w.a, w.doms[d], size, streams[tu_rand(&rng) % 3], &p);
            if (st == CCA_OK)
                w.slots[k] = (slot){p, size, d};
            else
                cr_assert(st == CCA_ERR_OUT_OF_MEMORY || (st == CCA_ERR_ASLEEP && w.asleep[d]), "%s: alloc %zu: %s",
                          w.where, size, cca_last_error());
        } else {
            cr_assert_eq(cca_free(w.a, w.slots[k].p), CCA_OK, "%s: free: %s", w.where, cca_last_error());
            w.slots[k].p = NULL;
        }
        cr_assert_eq(cca_check_invariants(w.a), CCA_OK, "%s: invariants: %s", w.where, cca_last_error());
    }
    cca_stats end = tu_stats(w.a);
    cr_log_info("%s seed %llu: %d checks, %d sleeps, %llu maps, %llu unmaps, %llu allocs", pg->conf,
                (unsigned long long)seed, checks, sleeps, (unsigned long long)end.vm_maps,
                (unsigned long long)end.vm_unmaps, (unsigned long long)end.upstream_allocs);
    cr_assert_geq(checks, steps / 25, "%s: only %d checks", pg->conf, checks);
    if (can_sleep)
        cr_assert_geq(sleeps, 5, "%s: only %d sleeps", pg->conf, sleeps);
    if (pg->reserve)
        cr_assert_geq(reserves, 1, "%s: only %d footprint arenas", pg->conf, reserves);
    /* the end: every block freed, every domain woken, one empty_cache: nothing left anywhere */
    for (int i = 0; i < SLOTS; i++)
        if (w.slots[i].p)
            cr_assert_eq(cca_free(w.a, w.slots[i].p), CCA_OK, "%s", cca_last_error());
    memset(w.slots, 0, sizeof w.slots);
    if (can_sleep)
        cr_assert_eq(cca_wake(w.a, NULL), CCA_OK, "%s", cca_last_error());
    memset(w.asleep, 0, sizeof w.asleep);
    cca_release_report rep;
    snprintf(w.where, sizeof w.where, "%s seed %llu: the end", pg->conf, (unsigned long long)seed);
    cr_assert_eq(cca_empty_cache(w.a, &rep), CCA_OK, "%s", cca_last_error());
    check_left(&w, &rep);
    cr_assert_eq(r.book.nmaps + r.book.nsegs, 0, "%s", w.where);
    for (int i = 1; i < ndoms; i++)
        cr_assert_eq(cca_domain_destroy(w.a, w.doms[i], 0, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_destroy(w.a), CCA_OK, "%s", cca_last_error());
    cca_upstream_stats us = tu_upstream_stats(r.inner);
    cr_assert_eq(us.vm_mapped_bytes + us.vm_reserved_bytes + us.bytes_in_use, 0, "%s", w.where);
    cr_assert_eq(r.f.events_recorded, r.f.events_done, "%s: an event never completed", w.where);
    cr_assert_eq(r.f.events_live, 0, "%s: an event never destroyed", w.where);
    cca_upstream_destroy(u);
    cca_upstream_destroy(r.inner);
}

static void run_seeds(const program *pg) {
    uint64_t base = seed_from_env(0x5eed0000u + (uint64_t)strlen(pg->conf) * 131u + (uint64_t)pg->backing);
    for (uint64_t i = 0; i < 4; i++)
        run(pg, base + i, 1000);
}

Test(release_bound, default_whole_maps) {
    run_seeds(&(program){.conf = "", .backing = CCA_VM_WHOLE_MAPS, .gran = 0});
}
Test(release_bound, pages) {
    run_seeds(&(program){.conf = "", .backing = CCA_VM_PAGES, .gran = 0});
}
Test(release_bound, pages_of_64k) {
    run_seeds(&(program){.conf = "", .backing = CCA_VM_PAGES, .gran = 64 * KiB});
}
Test(release_bound, whole_maps_no_ahead) {
    run_seeds(&(program){.conf = "expandable_ahead:0", .backing = CCA_VM_WHOLE_MAPS, .gran = 0});
}
Test(release_bound, whole_maps_capped) {
    run_seeds(&(program){.conf = "max_reserved:200M", .backing = CCA_VM_WHOLE_MAPS, .gran = 0});
}
Test(release_bound, hold_peak) {
    run_seeds(&(program){.conf = "hold_peak:1", .backing = CCA_VM_WHOLE_MAPS, .gran = 0});
}
Test(release_bound, greedy) {
    run_seeds(&(program){
        .conf = "policy:greedy,greedy_bytes:256M", .backing = CCA_VM_WHOLE_MAPS, .gran = 0, .one_domain = true});
}
Test(release_bound, classic) {
    run_seeds(&(program){.conf = "expandable:0", .backing = CCA_VM_WHOLE_MAPS, .gran = 0});
}
Test(release_bound, pages_of_4k) {
    run_seeds(&(program){.conf = "", .backing = CCA_VM_PAGES, .gran = 4 * KiB});
}
Test(release_bound, small_cap_small_segment) {
    run_seeds(&(program){.conf = "max_reserved:24M,small_segment:512K,small_max:256K",
                         .backing = CCA_VM_PAGES,
                         .gran = 64 * KiB});
}
Test(release_bound, footprint_arenas) {
    run_seeds(&(program){.conf = "", .backing = CCA_VM_WHOLE_MAPS, .gran = 0, .reserve = true});
}
Test(release_bound, footprint_arenas_classic_no_medium_pool) {
    run_seeds(&(program){.conf = "expandable:0,medium_pool:0", .backing = CCA_VM_WHOLE_MAPS, .gran = 0, .reserve = true});
}
