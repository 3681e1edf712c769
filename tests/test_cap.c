/*
 * test_cap.c — max_reserved and the OOM retry under attack, across the
 * policies (growth, greedy), the kinds of segment (classic, expandable),
 * memory domains and their footprint arenas, and streams whose events are
 * held back (pending frees).
 *
 * What every test holds the allocator to (docs/allocator.md, "The life of
 * one cca_alloc", step 5; docs/tuning.md, "max_reserved"):
 *   - reserved_bytes, and its peak, never exceed max_reserved;
 *   - a refused request is CCA_ERR_OUT_OF_MEMORY with a message, *out
 *     NULL, no live block changed (contents included), ooms counted;
 *   - the retry releases cached memory only when releasing can make room:
 *     when the cap refuses and even everything cached released would
 *     leave too little room under it (what stays reserved — live blocks,
 *     pinned segments, pending frees — plus the request is over the cap),
 *     nothing is released, unmapped or synchronized for nothing: the
 *     cache stays for the requests that fit;
 *   - a request that fits under the cap once the cache is released does
 *     succeed;
 *   - stats are exact against what the upstream double counts, the
 *     invariants hold, and after cca_destroy the upstream holds nothing.
 *
 * Classic segments run over tu_upstream (its own list of allocations and
 * call counts); expandable ones over the simulated device with 2 MiB pages
 * behind tu_faulty (its counts of every vm call and synchronize).
 */
#include "alloc_test_util.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#define PG (2 * MiB)
#define S1 ((cca_stream)0x51)
#define S2 ((cca_stream)0x52)
#define S3 ((cca_stream)0x53)

/* ---- a rig: the allocator over either double ------------------------------ */

typedef struct rig {
    bool pages;    /* expandable:1 over tu_faulty, else classic over tu_upstream */
    tu_upstream t; /* classic */
    tu_faulty f;   /* expandable */
    cca_upstream *u;
    cca_allocator *a;
} rig;

/* An allocator with `conf` (plus expandable:1 for pages) over a double of
 * `capacity` bytes with events. */
static void rig_open_on(rig *r, bool pages, const char *conf, size_t capacity) {
    memset(r, 0, sizeof *r);
    r->pages = pages;
    char full[256];
    snprintf(full, sizeof full, "%s%s", pages ? "expandable:1," : "", conf);
    if (pages)
        r->u = tu_faulty_create(&r->f, tu_vm_device(capacity, PG), "fx", true);
    else
        r->u = tu_upstream_create(&r->t, capacity, true);
    r->a = tu_allocator(r->u, full);
}

/* The same over 1 GiB: the cap is the only limit of the tests below. */
static void rig_open(rig *r, bool pages, const char *conf) {
    rig_open_on(r, pages, conf, 1 * GiB);
}

static uint64_t rig_syncs(const rig *r) {
    return r->pages ? r->f.calls[TU_FAULT_SYNC] : r->t.sync_calls;
}

/* Calls that give memory back: frees, or unmaps and range releases. */
static uint64_t rig_gives_back(const rig *r) {
    return r->pages ? r->f.calls[TU_FAULT_UNMAP] + r->f.calls[TU_FAULT_RELEASE] : r->t.free_calls;
}

/* Calls that ask for memory: allocs, or maps and range reservations. */
static uint64_t rig_asks(const rig *r) {
    return r->pages ? r->f.calls[TU_FAULT_MAP] + r->f.calls[TU_FAULT_RESERVE] : r->t.alloc_calls;
}

/* What the device holds for the allocator, by its own count. */
static size_t rig_held(const rig *r) {
    return r->pages ? tu_upstream_stats(r->f.inner).vm_mapped_bytes : r->t.used;
}

/* Events recorded from now on stay incomplete (hold); a synchronize
 * completes them unless keep. */
static void rig_events(rig *r, bool hold, bool keep) {
    if (r->pages) {
        r->f.hold_events = hold;
        r->f.sync_keeps_events = keep;
    } else {
        r->t.hold_events = hold;
        r->t.sync_keeps_events = keep;
    }
}

/* The device holds what the allocator says it reserved, within the cap. */
static void rig_agree(const rig *r, const char *what) {
    tu_check(r->a);
    cca_stats s = tu_stats(r->a);
    cr_assert_eq(s.reserved_bytes, rig_held(r), "%s: reserved %zu, the device holds %zu", what, s.reserved_bytes,
                 rig_held(r));
    cca_config c;
    cr_assert_eq(cca_get_config(r->a, &c), CCA_OK);
    if (c.max_reserved) {
        cr_assert_leq(s.reserved_bytes, c.max_reserved, "%s: over max_reserved", what);
        cr_assert_leq(s.reserved_bytes_peak, c.max_reserved, "%s: peak over max_reserved", what);
    }
}

/* No live block left: everything goes back; after cca_destroy the device
 * holds nothing. */
static void rig_close(rig *r) {
    if (r->pages) {
        tu_faulty_faults_off(&r->f);
        r->f.fail_mem_info = false;
    }
    rig_events(r, false, false);
    if (r->pages)
        r->f.events_done = r->f.events_recorded;
    else
        tu_upstream_release_events(&r->t);
    tu_empty_all(r->a, r->u);
    tu_destroy_clean(r->a, r->u);
    cca_upstream_destroy(r->u);
    if (r->pages) {
        cca_upstream_stats in = tu_upstream_stats(r->f.inner);
        cr_assert_eq(in.bytes_in_use, 0, "the device holds %zu bytes after cca_destroy", in.bytes_in_use);
        cr_assert_eq(in.vm_reserved_bytes, 0);
        cca_upstream_destroy(r->f.inner);
    } else {
        cr_assert_eq(r->t.used, 0, "the device holds %zu bytes after cca_destroy", r->t.used);
        cr_assert_eq(r->t.live_count, 0);
    }
}

/* Both kinds of segment for one scenario: NAME_classic and NAME_expandable. */
#define TEST_BOTH(name)                                                                                                \
    static void name(bool pages);                                                                                      \
    Test(cap, name##_classic) {                                                                                        \
        name(false);                                                                                                   \
    }                                                                                                                  \
    Test(cap, name##_expandable) {                                                                                     \
        name(true);                                                                                                    \
    }                                                                                                                  \
    static void name(bool pages)

/* ---- refusals -------------------------------------------------------------- */

static void expect_oom_in(cca_allocator *a, cca_domain *d, size_t size, cca_stream s, const char *what) {
    void *p = (void *)1;
    cca_status st = cca_alloc_in(a, d, size, s, &p);
    cr_assert_eq(st, CCA_ERR_OUT_OF_MEMORY, "%s: %s (%s)", what, cca_status_string(st), cca_last_error());
    cr_assert_null(p, "%s: *out is not NULL after a refusal", what);
    cr_assert_neq(cca_last_error()[0], '\0', "%s: no message", what);
}

static void *alloc_in(cca_allocator *a, cca_domain *d, size_t size, cca_stream s) {
    void *p = NULL;
    cca_status st = cca_alloc_in(a, d, size, s, &p);
    cr_assert_eq(st, CCA_OK, "cca_alloc_in(%zu): %s", size, cca_last_error());
    cr_assert_not_null(p);
    return p;
}

/* The message of a refusal the cap decided without releasing anything. */
static void expect_cap_message(const char *what) {
    const char *m = cca_last_error();
    cr_assert(strstr(m, "max_reserved") && strstr(m, "nothing was released"), "%s: message '%s'", what, m);
}

/* A request in d (NULL: the default domain) that the cap refuses however
 * much is released: CCA_ERR_OUT_OF_MEMORY saying so, the stats `before`
 * but one more OOM and one more retry, nothing given back. */
static void expect_kept(rig *r, cca_domain *d, size_t size, cca_stream s, cca_stats before, const char *what) {
    uint64_t back = rig_gives_back(r);
    expect_oom_in(r->a, d, size, s, what);
    expect_cap_message(what);
    before.ooms++;
    before.alloc_retries++;
    tu_assert_intact(r->a, &before, what);
    cr_assert_eq(rig_gives_back(r), back, "%s: memory given back for nothing", what);
    rig_agree(r, what);
}

/* ---- the retry releases nothing when releasing cannot make room ------------ *
 *
 * The scene, both kinds: 40 MiB live on S1 (a 40 MiB segment, or 40 MiB of
 * S1's range mapped), then 4 MiB allocated and freed on S2 (a cached
 * 20 MiB medium segment, or 20 MiB of S2's range mapped: the least step,
 * expandable_ahead_min), max_reserved 64 MiB: 60 MiB reserved. 30 MiB on
 * S2 needs 30 MiB more (a segment, or the pages under its bytes) and
 * 40 + 30 > 64 whatever is released; 24 MiB on S3 fits once S2's cache
 * is released (40 + 24 = 64). */

static void *scene(rig *r) {
    void *live = tu_alloc(r->a, 40 * MiB, S1);
    tu_free(r->a, tu_alloc(r->a, 4 * MiB, S2));
    cr_assert_eq(tu_stats(r->a).reserved_bytes, 60 * MiB);
    rig_agree(r, "the scene");
    return live;
}

/* 24 MiB on S3 fits once the cache is released: served by the one retry,
 * exactly at the cap. */
static void fits_once_released(rig *r, cca_stats before) {
    void *q = tu_alloc(r->a, 24 * MiB, S3);
    cca_stats s = tu_stats(r->a);
    cr_assert_eq(s.reserved_bytes, 64 * MiB);
    cr_assert_eq(s.reserved_bytes_peak, 64 * MiB);
    cr_assert_eq(s.alloc_retries, before.alloc_retries + 1);
    cr_assert_eq(s.ooms, before.ooms);
    cr_assert_gt(rig_gives_back(r), 0);
    rig_agree(r, "24 MiB once the cache is released");
    tu_free(r->a, q);
}

TEST_BOTH(refusal_no_release_could_help_keeps_the_cache) {
    rig r;
    rig_open(&r, pages, "max_reserved:64M,log_oom:0");
    void *live = scene(&r);
    cca_stats before = tu_stats(r.a);
    uint64_t asks = rig_asks(&r), syncs = rig_syncs(&r);
    expect_kept(&r, NULL, 30 * MiB, S2, before, "30 MiB over 40 MiB live under 64 MiB");
    cr_assert_eq(rig_asks(&r), asks, "the cap refuses before the upstream is asked");
    cr_assert_eq(rig_syncs(&r), syncs, "nothing pending, nothing to unmap: no synchronize");
    before = tu_stats(r.a);
    void *m = tu_alloc(r.a, 4 * MiB, S2);
    cr_assert_eq(rig_asks(&r), asks, "the cache served it");
    tu_free(r.a, m);
    fits_once_released(&r, tu_stats(r.a));
    tu_free(r.a, live);
    rig_close(&r);
}

/* Nothing cached: 40 MiB live on S1, 30 MiB on S2 is over the 64 MiB cap.
 * The refusal changes nothing but ooms and alloc_retries: no segment, and
 * with pages no address range either, is reserved for a request whose
 * memory the cap refuses (a range reserved before its map was refused
 * stayed behind, empty: one more segment and upstream call, 64 MiB more
 * address space, for each such refusal on a new stream or domain); no
 * upstream call at all. */
TEST_BOTH(refusal_with_nothing_cached_changes_nothing) {
    rig r;
    rig_open(&r, pages, "max_reserved:64M,log_oom:0");
    void *live = tu_alloc(r.a, 40 * MiB, S1);
    cca_domain *d;
    cr_assert_eq(cca_domain_create(r.a, "fresh", &d), CCA_OK);
    cca_stats before = tu_stats(r.a);
    uint64_t asks = rig_asks(&r), syncs = rig_syncs(&r), back = rig_gives_back(&r);
    const struct {
        cca_domain *d;
        cca_stream s;
    } where[] = {{NULL, S2}, {NULL, S3}, {d, S1}, {d, NULL}};
    for (size_t i = 0; i < sizeof where / sizeof *where; i++) {
        expect_oom_in(r.a, where[i].d, 30 * MiB, where[i].s, "30 MiB over 40 MiB live under 64 MiB");
        before.ooms++;
        before.alloc_retries++;
        tu_assert_intact(r.a, &before, "a refusal with nothing cached");
        cr_assert_eq(rig_asks(&r), asks, "the upstream was asked for memory the cap refuses");
        cr_assert_eq(rig_syncs(&r), syncs);
        cr_assert_eq(rig_gives_back(&r), back);
        cr_assert_eq(tu_stats(r.a).address_space_bytes, before.address_space_bytes, "a range left behind");
        rig_agree(&r, "a refusal with nothing cached");
    }
    void *q = alloc_in(r.a, d, 24 * MiB, S2); /* exactly the cap */
    cr_assert_eq(tu_stats(r.a).reserved_bytes, 64 * MiB);
    rig_agree(&r, "24 MiB in the fresh domain");
    tu_free(r.a, q);
    tu_free(r.a, live);
    rig_close(&r);
}

/* A pending free counts as live until its event completes: 40 MiB freed on
 * S1 but used on S2 (events held). The retry must synchronize, which
 * completes it; then 30 MiB fits. */
static void pending_scene(rig *r, bool keep) {
    rig_events(r, true, keep);
    void *p = tu_alloc(r->a, 40 * MiB, S1);
    cr_assert_eq(cca_record_stream(r->a, p, S2), CCA_OK);
    tu_free(r->a, p);
    tu_free(r->a, tu_alloc(r->a, 4 * MiB, S2));
    cr_assert_eq(tu_stats(r->a).pending_blocks, 1);
    cr_assert_eq(tu_stats(r->a).reserved_bytes, 60 * MiB);
}

TEST_BOTH(pending_free_that_completes_makes_room) {
    rig r;
    rig_open(&r, pages, "max_reserved:64M,log_oom:0");
    pending_scene(&r, false);
    uint64_t syncs = rig_syncs(&r);
    void *q = tu_alloc(r.a, 30 * MiB, S2);
    cca_stats s = tu_stats(r.a);
    cr_assert_eq(rig_syncs(&r), syncs + 1, "one synchronize");
    cr_assert_eq(s.pending_blocks, 0);
    cr_assert_eq(s.alloc_retries, 1);
    cr_assert_eq(s.ooms, 0);
    rig_agree(&r, "30 MiB once the pending free completed");
    tu_free(r.a, q);
    rig_close(&r);
}

/* The same, but the synchronize leaves the event incomplete: the pending
 * 40 MiB stay reserved, 40 + 30 > 64: nothing is released (the one
 * synchronize was needed to learn that). Once the event completes, the
 * request fits. */
TEST_BOTH(pending_free_that_stays_pending_keeps_the_cache) {
    rig r;
    rig_open(&r, pages, "max_reserved:64M,log_oom:0");
    pending_scene(&r, true);
    cca_stats before = tu_stats(r.a);
    uint64_t syncs = rig_syncs(&r);
    expect_kept(&r, NULL, 30 * MiB, S2, before, "30 MiB over a pending 40 MiB");
    cr_assert_eq(rig_syncs(&r), syncs + 1, "one synchronize, to complete what it could");
    rig_events(&r, true, false);
    void *q = tu_alloc(r.a, 30 * MiB, S2);
    cr_assert_eq(tu_stats(r.a).pending_blocks, 0);
    rig_agree(&r, "30 MiB once the event completed");
    tu_free(r.a, q);
    rig_close(&r);
}

/* Domains: the retry of a request in one domain may release every
 * domain's cache, but not for nothing. The scene's live block in domain
 * A, its cache in domain B: 30 MiB in A is refused with B's cache kept,
 * which still serves B; 24 MiB in A fits once B's cache goes. */
TEST_BOTH(domain_refusal_keeps_other_domains_cache) {
    rig r;
    rig_open(&r, pages, "max_reserved:64M,log_oom:0");
    cca_domain *da, *db;
    cr_assert_eq(cca_domain_create(r.a, "A", &da), CCA_OK);
    cr_assert_eq(cca_domain_create(r.a, "B", &db), CCA_OK);
    void *live = alloc_in(r.a, da, 40 * MiB, S1);
    tu_free(r.a, alloc_in(r.a, db, 4 * MiB, S2));
    cca_stats before = tu_stats(r.a);
    cr_assert_eq(before.reserved_bytes, 60 * MiB);
    expect_kept(&r, da, 30 * MiB, S2, before, "30 MiB in A, B's cache kept");
    cca_domain_stats ds;
    cr_assert_eq(cca_get_domain_stats(r.a, db, &ds), CCA_OK);
    cr_assert_eq(ds.reserved_bytes, 20 * MiB);
    uint64_t asks = rig_asks(&r);
    tu_free(r.a, alloc_in(r.a, db, 4 * MiB, S2));
    cr_assert_eq(rig_asks(&r), asks, "B's cache served B");
    before = tu_stats(r.a);
    void *big = alloc_in(r.a, da, 24 * MiB, S3); /* fits once B's cache goes */
    cr_assert_eq(tu_stats(r.a).reserved_bytes, 64 * MiB);
    cr_assert_eq(tu_stats(r.a).alloc_retries, before.alloc_retries + 1);
    cr_assert_eq(cca_get_domain_stats(r.a, db, &ds), CCA_OK);
    cr_assert_eq(ds.reserved_bytes, 0);
    rig_agree(&r, "24 MiB in A");
    tu_free(r.a, big);
    tu_free(r.a, live);
    rig_close(&r);
}

/* cca_domain_reserve's retry: an arena that cannot fit even with every
 * cached byte released (under the cap, or on the device: `device`) keeps
 * the cache, with no synchronize; one that fits once it is released
 * (24 MiB) is reserved. */
static void arena_refusal_keeps_the_cache(bool pages, bool device) {
    rig r;
    if (device)
        rig_open_on(&r, pages, "log_oom:0", 64 * MiB);
    else
        rig_open(&r, pages, "max_reserved:64M,log_oom:0");
    cca_domain *d;
    cr_assert_eq(cca_domain_create(r.a, "model", &d), CCA_OK);
    void *live = scene(&r);
    cca_stats before = tu_stats(r.a);
    uint64_t back = rig_gives_back(&r), syncs = rig_syncs(&r), asks = rig_asks(&r);
    cca_status st = cca_domain_reserve(r.a, d, 30 * MiB);
    cr_assert_eq(st, CCA_ERR_OUT_OF_MEMORY, "%s", cca_last_error());
    const char *m = cca_last_error();
    cr_assert(strstr(m, device ? "device's free memory" : "max_reserved") && strstr(m, "nothing was released"),
              "message '%s'", m);
    before.alloc_retries++;
    if (device) { /* the try the device refused: an alloc, or a range, its map and its release */
        asks += pages ? 2 : 1;
        back += pages;
    }
    cca_stats now = tu_stats(r.a);
    cr_assert_eq(now.reserved_bytes, before.reserved_bytes, "the cache was released for nothing");
    cr_assert_eq(now.segments, before.segments);
    cr_assert_eq(now.alloc_retries, before.alloc_retries);
    if (!device)
        tu_assert_intact(r.a, &before, "a refused arena");
    cr_assert_eq(rig_asks(&r), asks, "the upstream asked for nothing more");
    cr_assert_eq(rig_gives_back(&r), back, "memory given back for nothing");
    cr_assert_eq(rig_syncs(&r), syncs, "nothing pending, nothing to unmap: no synchronize");
    rig_agree(&r, "a refused arena");
    cr_assert_eq(cca_domain_reserve(r.a, d, 24 * MiB), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(tu_stats(r.a).reserved_bytes, 64 * MiB);
    rig_agree(&r, "a 24 MiB arena");
    tu_free(r.a, live);
    cr_assert_eq(cca_domain_destroy(r.a, d, 0, NULL), CCA_OK, "%s", cca_last_error());
    rig_close(&r);
}

TEST_BOTH(domain_reserve_refusal_no_release_could_help_keeps_the_cache) {
    arena_refusal_keeps_the_cache(pages, false);
}

/* ---- a map in several runs ----------------------------------------------------- */

/* No ahead pages, max_reserved 20 MiB, so a range is 20 MiB: on the
 * default stream A live [0, 2M), H [2M, 10M), B [10M, 12M), T [12M, 20M);
 * H and T freed and their pages unmapped by an empty-cache, X 2 MiB live
 * in S1's range, then B freed: 6 MiB reserved, one free block [2M, 20M)
 * whose pages [2M, 10M) and [12M, 20M) are unmapped. 18 MiB there needs
 * both runs, 16 MiB: 6 + 16 > 20. The cap refuses before the first run is
 * mapped (it used to map [2M, 10M), meet the cap at the second run and
 * unmap the first again: two upstream calls for nothing), and with 4 MiB
 * live 4 + 18 > 20 whatever is released, so nothing is unmapped either.
 * 16 MiB fits (6 + 8 + 6 = 20). */
Test(cap, expandable_map_over_the_cap_in_several_runs_calls_nothing) {
    rig r;
    rig_open(&r, true, "max_reserved:20M,expandable_ahead_min:0,expandable_ahead_max:0,log_oom:0");
    unsigned char *A = tu_alloc(r.a, 2 * MiB, NULL), *H = tu_alloc(r.a, 8 * MiB, NULL);
    unsigned char *B = tu_alloc(r.a, 2 * MiB, NULL), *T = tu_alloc(r.a, 8 * MiB, NULL);
    cr_assert(H == A + 2 * MiB && B == A + 10 * MiB && T == A + 12 * MiB, "one range, in address order");
    tu_free(r.a, H);
    tu_free(r.a, T);
    cr_assert_eq(cca_empty_cache(r.a, NULL), CCA_OK, "%s", cca_last_error());
    void *X = tu_alloc(r.a, 2 * MiB, S1);
    tu_free(r.a, B);
    cca_stats before = tu_stats(r.a);
    cr_assert_eq(before.reserved_bytes, 6 * MiB);
    uint64_t calls[TU_FAULT_KINDS];
    memcpy(calls, r.f.calls, sizeof calls);
    expect_oom_in(r.a, NULL, 18 * MiB, NULL, "18 MiB over two unmapped runs");
    before.ooms++;
    before.alloc_retries++;
    tu_assert_intact(r.a, &before, "a map in two runs over the cap");
    for (int k = 0; k < TU_FAULT_KINDS; k++)
        cr_assert_eq(r.f.calls[k], calls[k], "%s called %llu times for nothing", tu_fault_names[k],
                     (unsigned long long)(r.f.calls[k] - calls[k]));
    rig_agree(&r, "a map in two runs over the cap");
    void *q = tu_alloc(r.a, 16 * MiB, NULL);
    cr_assert_eq(q, A + 2 * MiB);
    cr_assert_eq(tu_stats(r.a).reserved_bytes, 20 * MiB);
    cr_assert_eq(r.f.calls[TU_FAULT_MAP], calls[TU_FAULT_MAP] + 2, "one map per run");
    rig_agree(&r, "16 MiB, exactly the cap");
    tu_free(r.a, q);
    tu_free(r.a, X);
    tu_free(r.a, A);
    rig_close(&r);
}

/* ---- pages a free block shares with a live one --------------------------------- *
 *
 * With pages, what stays reserved once everything cached is released is
 * the pages live and pending blocks touch, not their bytes, and what a
 * request adds is the new pages its block needs, not its bytes. Both
 * scenes: `x` live on S1, `y` live on the default stream, `c` allocated
 * and freed on S2 (its pages cached). */

static void three_tenants(rig *r, const char *conf, size_t x, size_t y, size_t c, void **px, void **py) {
    rig_open(r, true, conf);
    *px = tu_alloc(r->a, x, S1);
    *py = tu_alloc(r->a, y, NULL);
    tu_free(r->a, tu_alloc(r->a, c, S2));
}

/* A 4 KiB block keeps its whole page: 40 MiB on S1, 4 KiB on the default
 * stream (its small range maps one page), 20 MiB of free pages on S2:
 * 62 MiB under a 64 MiB cap. 23 MiB on S3 needs a new range's 12 pages
 * (24 MiB) and 40 + 2 + 24 > 64 whatever is released: refused with S2's
 * pages kept and no synchronize (counting bytes, 40 MiB + 4 KiB + 23 MiB,
 * the retry synchronized, unmapped S2's pages, and failed). 22 MiB fits
 * once they go. */
Test(cap, expandable_refusal_counts_the_pages_live_blocks_keep) {
    rig r;
    void *x, *y;
    three_tenants(&r, "max_reserved:64M,log_oom:0", 40 * MiB, 4 * KiB, 4 * MiB, &x, &y);
    cca_stats before = tu_stats(r.a);
    cr_assert_eq(before.reserved_bytes, 62 * MiB);
    uint64_t syncs = rig_syncs(&r);
    expect_kept(&r, NULL, 23 * MiB, S3, before, "23 MiB over 42 MiB of pages kept");
    cr_assert_eq(rig_syncs(&r), syncs, "a synchronize for nothing");
    void *q = tu_alloc(r.a, 22 * MiB, S3); /* 40 + 2 + 22 = 64 */
    cr_assert_eq(tu_stats(r.a).reserved_bytes, 64 * MiB);
    rig_agree(&r, "22 MiB once S2's pages went");
    tu_free(r.a, q);
    tu_free(r.a, y);
    tu_free(r.a, x);
    rig_close(&r);
}

/* A page a live block keeps is no new page: one pool (small_pool:0), no
 * ahead pages, a 6 MiB cap (ranges of 6 MiB), 2 MiB on S1, 1 MiB at the
 * start of the default stream's range (page 0), a free page on S2: 6 MiB.
 * 3 MiB on the default stream goes right after the 1 MiB block, over
 * pages 0 and 1; only page 1 is new, and 2 + 2 + 2 = 6 once S2's page is
 * gone: served by the retry. */
Test(cap, expandable_request_on_a_page_a_live_block_keeps_is_served) {
    rig r;
    void *x, *y;
    three_tenants(&r, "max_reserved:6M,small_pool:0,expandable_ahead_min:0,expandable_ahead_max:0,log_oom:0",
                  2 * MiB, 1 * MiB, 2 * MiB, &x, &y);
    cca_stats before = tu_stats(r.a);
    cr_assert_eq(before.reserved_bytes, 6 * MiB);
    unsigned char *q = tu_alloc(r.a, 3 * MiB, NULL);
    cr_assert_eq(q, (unsigned char *)y + 1 * MiB);
    cca_stats s = tu_stats(r.a);
    cr_assert_eq(s.reserved_bytes, 6 * MiB);
    cr_assert_eq(s.alloc_retries, before.alloc_retries + 1);
    cr_assert_eq(s.ooms, before.ooms);
    rig_agree(&r, "3 MiB over the 1 MiB block's page");
    tu_free(r.a, q);
    tu_free(r.a, y);
    tu_free(r.a, x);
    rig_close(&r);
}

/* ---- the same when the device is the limit ----------------------------------- *
 *
 * No cap, a 64 MiB device: the scene leaves 4 MiB free. 30 MiB cannot fit
 * even with the 20 MiB cache released (4 + 20 < 30): a request or an
 * arena is refused with the cache kept and, nothing pending, no
 * synchronize; 24 MiB fits once it is released (4 + 20 = 24). */

static void device_refusal_message(const char *what) {
    const char *m = cca_last_error();
    cr_assert(strstr(m, "device's free memory") && strstr(m, "nothing was released"), "%s: message '%s'", what, m);
}

TEST_BOTH(device_refusal_no_release_could_help_keeps_the_cache) {
    rig r;
    rig_open_on(&r, pages, "log_oom:0", 64 * MiB);
    void *live = scene(&r);
    cca_stats before = tu_stats(r.a);
    uint64_t back = rig_gives_back(&r), syncs = rig_syncs(&r);
    expect_oom_in(r.a, NULL, 30 * MiB, S2, "30 MiB with 4 MiB free and 20 MiB cached");
    device_refusal_message("30 MiB");
    cca_stats now = tu_stats(r.a);
    cr_assert_eq(now.reserved_bytes, before.reserved_bytes);
    cr_assert_eq(now.upstream_frees, before.upstream_frees);
    cr_assert_eq(now.alloc_retries, before.alloc_retries + 1);
    cr_assert_eq(rig_gives_back(&r), back, "memory given back for nothing");
    cr_assert_eq(rig_syncs(&r), syncs, "nothing pending, nothing to unmap: no synchronize");
    rig_agree(&r, "a refusal the device decided");
    void *q = tu_alloc(r.a, 24 * MiB, S3);
    cr_assert_eq(tu_stats(r.a).reserved_bytes, 64 * MiB);
    cr_assert_eq(tu_stats(r.a).alloc_retries, before.alloc_retries + 2);
    rig_agree(&r, "24 MiB once the cache is released");
    tu_free(r.a, q);
    tu_free(r.a, live);
    rig_close(&r);
}

TEST_BOTH(domain_reserve_the_device_cannot_hold_keeps_the_cache) {
    arena_refusal_keeps_the_cache(pages, true);
}
