/*
 * test_cap.c — allocator/src/alloc.c: max_reserved and the OOM retry under attack, across the
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
 *     when even everything cached released would leave too little room
 *     under the cap (what stays reserved — the segments live and pending
 *     blocks pin, or the pages they touch — plus what the request adds is
 *     over it) or on the device, nothing is released, unmapped or
 *     synchronized for nothing, and no segment, range or map is asked of
 *     the upstream for memory the cap refuses: the cache stays for the
 *     requests that fit;
 *   - a request that fits under the cap once the cache is released does
 *     succeed;
 *   - stats are exact against what the upstream double counts, the
 *     invariants hold, and after cca_destroy the upstream holds nothing.
 *
 * The scenes are written once for both kinds of segment (TEST_BOTH, over
 * a `rig`): classic segments run over tu_upstream (its own list of
 * allocations and call counts), expandable ones over the simulated device
 * with 2 MiB pages behind tu_faulty (its counts of every vm call and
 * synchronize). Then caps at the edges (under one small segment or page,
 * exactly one, just above), and seeded random sequences over caps, ahead
 * mapping and segment sizes at their bounds, greedy arenas, domains and
 * held events, checked after every step (the properties are listed above
 * q_run).
 */
#include "alloc_test_util.h"
#include "pages_rule.h"

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

/* How the expandable double answers mem_info. */
typedef enum rig_info { INFO_OK, INFO_FAILS, INFO_NONE } rig_info;

/* An allocator with `conf` (plus expandable:1 for pages, else
 * expandable:0) over a double of `capacity` bytes with events; pages: the
 * simulated device (CCA_VM_PAGES) whose mem_info answers, fails
 * (fail_mem_info) or is no op at all. */
static void rig_open_with(rig *r, bool pages, const char *conf, size_t capacity, rig_info info) {
    memset(r, 0, sizeof *r);
    r->pages = pages;
    char full[256];
    snprintf(full, sizeof full, "%s%s", pages ? "expandable:1," : "expandable:0,", conf);
    if (pages && info == INFO_NONE)
        r->u = tu_faulty_create_without_mem_info(&r->f, tu_vm_device(capacity, PG), "fx", true);
    else if (pages)
        r->u = tu_faulty_create(&r->f, tu_vm_device(capacity, PG), "fx", true);
    else
        r->u = tu_upstream_create(&r->t, capacity, true);
    r->f.fail_mem_info = info == INFO_FAILS;
    r->a = tu_allocator(r->u, full);
}

static void rig_open_on(rig *r, bool pages, const char *conf, size_t capacity) {
    rig_open_with(r, pages, conf, capacity, INFO_OK);
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
 * 20 MiB medium segment, or 20 MiB of S2's range mapped: the growth rule's
 * least step), max_reserved 64 MiB: 60 MiB reserved. 30 MiB on
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
    uint64_t back = rig_gives_back(&r), syncs = rig_syncs(&r), asks = rig_asks(&r), info = r.f.mem_info_calls;
    cca_status st = cca_domain_reserve(r.a, d, 30 * MiB);
    cr_assert_eq(st, CCA_ERR_OUT_OF_MEMORY, "%s", cca_last_error());
    const char *m = cca_last_error();
    cr_assert(strstr(m, device ? "device's free memory" : "max_reserved") && strstr(m, "nothing was released"),
              "message '%s'", m);
    before.alloc_retries++;
    /* the try the device refused: classic, an alloc; pages, nothing (the
     * device's free memory, asked first, cannot hold the arena: no range
     * is reserved, mapped and released again) */
    asks += device && !pages;
    cca_stats now = tu_stats(r.a);
    cr_assert_eq(now.reserved_bytes, before.reserved_bytes, "the cache was released for nothing");
    cr_assert_eq(now.segments, before.segments);
    cr_assert_eq(now.alloc_retries, before.alloc_retries);
    if (!device)
        tu_assert_intact(r.a, &before, "a refused arena");
    cr_assert_eq(rig_asks(&r), asks, "the upstream asked for nothing more");
    cr_assert_eq(rig_gives_back(&r), back, "memory given back for nothing");
    cr_assert_eq(rig_syncs(&r), syncs, "nothing pending, nothing to unmap: no synchronize");
    if (pages) /* the device: before the range, and the retry's test; the cap refuses before asking */
        cr_assert_eq(r.f.mem_info_calls - info, device ? 2 : 0, "%llu mem_info calls",
                     (unsigned long long)(r.f.mem_info_calls - info));
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
    rig_open(&r, true, "max_reserved:20M,expandable_ahead:0,log_oom:0");
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
    three_tenants(&r, "max_reserved:6M,small_pool:0,expandable_ahead:0,log_oom:0", 2 * MiB, 1 * MiB, 2 * MiB, &x, &y);
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

/* ---- the device's refusals over pages ------------------------------------------ *
 *
 * What the device cannot hold is found before it costs an address range or
 * a map: a new range is reserved only when the device's free memory (one
 * mem_info) holds the request's pages. Counted: every vm call and mem_info
 * of the double (tu_faulty), and the stats. */

typedef struct rig_calls {
    uint64_t k[TU_FAULT_KINDS], mem_info;
} rig_calls;

static rig_calls rig_count(const rig *r) {
    rig_calls c;
    memcpy(c.k, r->f.calls, sizeof c.k);
    c.mem_info = r->f.mem_info_calls;
    return c;
}

/* Since `was`: exactly `reserve` vm_reserve, `map` vm_map, `unmap` vm_unmap
 * and `info` mem_info calls, no vm_release, alloc or free. */
static void expect_calls(const rig *r, rig_calls was, uint64_t reserve, uint64_t map, uint64_t unmap, uint64_t info,
                         const char *what) {
    const uint64_t want[TU_FAULT_KINDS] = {
        [TU_FAULT_RESERVE] = reserve, [TU_FAULT_MAP] = map, [TU_FAULT_UNMAP] = unmap};
    for (int k = 0; k < TU_FAULT_KINDS; k++)
        if (k != TU_FAULT_SYNC)
            cr_assert_eq(r->f.calls[k] - was.k[k], want[k], "%s: %llu %s calls, expected %llu", what,
                         (unsigned long long)(r->f.calls[k] - was.k[k]), tu_fault_names[k],
                         (unsigned long long)want[k]);
    cr_assert_eq(r->f.mem_info_calls - was.mem_info, info, "%s: %llu mem_info calls, expected %llu", what,
                 (unsigned long long)(r->f.mem_info_calls - was.mem_info), (unsigned long long)info);
}

/* A request served: `reserved` bytes reserved now, `retries` more retries
 * than `before`, no OOM, the device agreeing; the stats, for more checks. */
static cca_stats expect_served(const rig *r, cca_stats before, size_t reserved, uint64_t retries, const char *what) {
    cca_stats s = tu_stats(r->a);
    cr_assert_eq(s.reserved_bytes, reserved, "%s: reserved %zu, expected %zu", what, s.reserved_bytes, reserved);
    cr_assert_eq(s.alloc_retries, before.alloc_retries + retries, "%s: alloc_retries", what);
    cr_assert_eq(s.ooms, before.ooms, "%s: ooms", what);
    rig_agree(r, what);
    return s;
}

/* Nothing cached, a 64 MiB device: 40 MiB live on S1, 24 MiB free. 30 MiB
 * on another stream or in a fresh domain needs a new range whose pages the
 * device cannot hold: refused after one mem_info, no range reserved and no
 * map asked (a range was reserved, its map refused, and it stayed behind,
 * empty: one more segment, upstream call and 64 MiB of address space for
 * each such refusal). 24 MiB, exactly what is free, is then served by one
 * range and one map. */
Test(cap, expandable_device_refusal_on_a_new_range_reserves_nothing) {
    rig r;
    rig_open_on(&r, true, "log_oom:0", 64 * MiB);
    void *live = tu_alloc(r.a, 40 * MiB, S1);
    cca_domain *d;
    cr_assert_eq(cca_domain_create(r.a, "fresh", &d), CCA_OK);
    cca_stats before = tu_stats(r.a);
    uint64_t syncs = rig_syncs(&r);
    const struct {
        cca_domain *d;
        cca_stream s;
    } where[] = {{NULL, S2}, {NULL, S3}, {d, S1}, {d, NULL}};
    for (size_t i = 0; i < sizeof where / sizeof *where; i++) {
        rig_calls was = rig_count(&r);
        expect_oom_in(r.a, where[i].d, 30 * MiB, where[i].s, "30 MiB with 24 MiB free, nothing cached");
        before.ooms++;
        before.alloc_retries++;
        tu_assert_intact(r.a, &before, "a new range the device cannot map"); /* segments, address space */
        expect_calls(&r, was, 0, 0, 0, 1, "a new range the device cannot map");
        cr_assert_eq(rig_syncs(&r), syncs);
        rig_agree(&r, "a new range the device cannot map");
    }
    rig_calls was = rig_count(&r);
    void *q = alloc_in(r.a, d, 24 * MiB, S2);
    expect_calls(&r, was, 1, 1, 0, 1, "24 MiB, exactly what is free");
    cca_stats s = expect_served(&r, before, 64 * MiB, 0, "24 MiB in the fresh domain");
    cr_assert_eq(s.expandable_segments, before.expandable_segments + 1);
    tu_free(r.a, q);
    tu_free(r.a, live);
    rig_close(&r);
}

/* The scene on a 64 MiB device (4 MiB free, S2's 20 MiB of pages cached):
 * 24 MiB on S3 needs a new range, which the device holds once S2's pages
 * are unmapped. The retry serves it with one range and one map, and the
 * range is not reserved before there is room for its pages (it was, its
 * map refused, then mapped by the retry's take: two maps for one). */
Test(cap, expandable_new_range_the_retry_makes_room_for_is_reserved_once) {
    rig r;
    rig_open_on(&r, true, "log_oom:0", 64 * MiB);
    void *live = scene(&r);
    cca_stats before = tu_stats(r.a);
    rig_calls was = rig_count(&r);
    uint64_t syncs = rig_syncs(&r);
    void *q = tu_alloc(r.a, 24 * MiB, S3);
    /* mem_info: before the first take; the retry's test; the take after
     * S2's pages went */
    expect_calls(&r, was, 1, 1, 1, 3, "24 MiB on a new range once S2's pages went");
    cr_assert_eq(rig_syncs(&r), syncs + 1);
    cca_stats s = expect_served(&r, before, 64 * MiB, 1, "24 MiB on S3");
    cr_assert_eq(s.expandable_segments, before.expandable_segments + 1);
    cr_assert_eq(s.address_space_bytes, before.address_space_bytes + 64 * MiB);
    tu_free(r.a, q);
    tu_free(r.a, live);
    rig_close(&r);
}

/* A block lacking several runs of pages (a trim unmapped pages on both
 * sides of one still mapped) is mapped only when the device's free memory
 * holds all the pages it lacks, asked once before the first run: else the
 * runs before the refused one were mapped and unmapped again. The scene of
 * expandable_map_over_the_cap_in_several_runs_calls_nothing with the
 * device the limit: no cap, no ahead pages, a `capacity` device (ranges of
 * its size); on the default stream A live [0, 2M), H [2M, 10M), B
 * [10M, 12M), T [12M, capacity); H and T freed and their pages unmapped
 * by an empty-cache; X 2 MiB live on S1; `cached` freed on S2 (its pages
 * cached); B freed. */
static void runs_scene(rig *r, size_t capacity, size_t cached, rig_info info, unsigned char **A, void **X) {
    rig_open_with(r, true, "expandable_ahead:0,log_oom:0", capacity, info);
    *A = tu_alloc(r->a, 2 * MiB, NULL);
    unsigned char *H = tu_alloc(r->a, 8 * MiB, NULL), *B = tu_alloc(r->a, 2 * MiB, NULL);
    unsigned char *T = tu_alloc(r->a, capacity - 12 * MiB, NULL);
    cr_assert(H == *A + 2 * MiB && B == *A + 10 * MiB && T == *A + 12 * MiB, "one range, in address order");
    tu_free(r->a, H);
    tu_free(r->a, T);
    cr_assert_eq(cca_empty_cache(r->a, NULL), CCA_OK, "%s", cca_last_error());
    *X = tu_alloc(r->a, 2 * MiB, S1);
    if (cached)
        tu_free(r->a, tu_alloc(r->a, cached, S2));
    tu_free(r->a, B);
    cr_assert_eq(tu_stats(r->a).reserved_bytes, 6 * MiB + cached);
}

/* q (served in the scene), X and A freed; everything goes back. */
static void runs_finish(rig *r, void *q, unsigned char *A, void *X) {
    tu_free(r->a, q);
    tu_free(r->a, X);
    tu_free(r->a, A);
    rig_close(r);
}

/* A 20 MiB device, 14 MiB free: 18 MiB at A + 2M lacks 16 MiB of pages in
 * two runs, and with 4 MiB live 4 + 18 > 20 whatever is released: refused
 * with no vm call (it mapped [2M, 10M), met the device's refusal at
 * [12M, 20M) and unmapped [2M, 10M) again, in step 4 and again in step
 * 5's take: two maps and one unmap each), after one mem_info in step 4
 * and one in the retry's test. 16 MiB there lacks 14 MiB, exactly what is
 * free: one map per run. */
Test(cap, expandable_map_the_device_refuses_in_several_runs_calls_nothing) {
    rig r;
    unsigned char *A;
    void *X;
    runs_scene(&r, 20 * MiB, 0, INFO_OK, &A, &X);
    cca_stats before = tu_stats(r.a);
    rig_calls was = rig_count(&r);
    uint64_t syncs = rig_syncs(&r);
    expect_oom_in(r.a, NULL, 18 * MiB, NULL, "18 MiB over two unmapped runs");
    device_refusal_message("18 MiB over two runs");
    before.ooms++;
    before.alloc_retries++;
    tu_assert_intact(r.a, &before, "a map in two runs the device cannot hold");
    expect_calls(&r, was, 0, 0, 0, 2, "a map in two runs the device cannot hold");
    cr_assert_eq(rig_syncs(&r), syncs, "nothing pending, nothing to unmap: no synchronize");
    rig_agree(&r, "a map in two runs the device cannot hold");
    was = rig_count(&r);
    void *q = tu_alloc(r.a, 16 * MiB, NULL);
    cr_assert_eq(q, A + 2 * MiB);
    cr_assert_eq(tu_stats(r.a).reserved_bytes, 20 * MiB);
    expect_calls(&r, was, 0, 2, 0, 1, "16 MiB, exactly what is free: one map per run");
    rig_agree(&r, "16 MiB, exactly the device");
    runs_finish(&r, q, A, X);
}

/* The other side: a request the device holds once the retry has unmapped
 * cached pages is served. A 22 MiB device, B's page and 2 MiB on S2
 * cached, 14 MiB free: 18 MiB at A + 2M lacks 16 MiB in two runs, refused
 * by the device's free memory; the retry (14 free + 4 cached >= the 18 MiB
 * of pages the block needs once B's page is unmapped too) unmaps B's page
 * and S2's, and the block's 9 pages, now one run, are mapped by one call. */
Test(cap, expandable_map_in_several_runs_the_retry_makes_room_for_is_served) {
    rig r;
    unsigned char *A;
    void *X;
    runs_scene(&r, 22 * MiB, 2 * MiB, INFO_OK, &A, &X);
    cca_stats before = tu_stats(r.a);
    rig_calls was = rig_count(&r);
    void *q = tu_alloc(r.a, 18 * MiB, NULL);
    cr_assert_eq(q, A + 2 * MiB);
    /* mem_info: step 4's map and the retry's test; its take after the
     * release maps one run, for which the device is not asked */
    expect_calls(&r, was, 0, 1, 2, 2, "18 MiB served once the retry unmapped B's and S2's pages");
    expect_served(&r, before, 22 * MiB, 1, "18 MiB in two runs once the retry made room");
    runs_finish(&r, q, A, X);
}

/* Over pages the retry releases only by unmapping, which needs an idle
 * device: when its synchronize fails, nothing can be unmapped and no
 * pending free completes, so the retry ends there, CCA_ERR_OUT_OF_MEMORY
 * with the synchronize's failure as the cause, nothing released and
 * nothing more asked of the upstream (it took again, released nothing and
 * took twice more, and the message was the last take's). The scene on a
 * 64 MiB device: 24 MiB on S3 fits once S2's cached pages go, as does a
 * 24 MiB arena; `pending`: the 40 MiB was freed while in use on S2 (its
 * event held), so the retry synchronizes before asking what releasing can
 * do. */
static void failed_synchronize_ends_the_retry(bool pending) {
    rig r;
    rig_open_on(&r, true, "log_oom:0", 64 * MiB);
    cca_domain *d;
    cr_assert_eq(cca_domain_create(r.a, "model", &d), CCA_OK);
    void *live = NULL;
    if (pending)
        pending_scene(&r, false);
    else
        live = scene(&r);
    for (int arena = 0; arena < 2; arena++) {
        cca_stats before = tu_stats(r.a);
        rig_calls was = rig_count(&r);
        r.f.fail_at[TU_FAULT_SYNC] = r.f.calls[TU_FAULT_SYNC] + 1;
        const char *what = arena ? "a 24 MiB arena" : "24 MiB on S3";
        if (arena) {
            cr_assert_eq(cca_domain_reserve(r.a, d, 24 * MiB), CCA_ERR_OUT_OF_MEMORY, "%s", cca_last_error());
        } else {
            expect_oom_in(r.a, NULL, 24 * MiB, S3, what);
            before.ooms++;
        }
        const char *m = cca_last_error();
        cr_assert(strstr(m, "injected synchronize failure") && strstr(m, "nothing was released"),
                  "%s: the cause is not the synchronize: '%s'", what, m);
        before.alloc_retries++;
        tu_assert_intact(r.a, &before, what);
        /* mem_info: before the range (the first take or the arena), and the
         * retry's test unless it waits for the synchronize to ask it */
        expect_calls(&r, was, 0, 0, 0, pending ? 1 : 2, what);
        cr_assert_eq(rig_syncs(&r), was.k[TU_FAULT_SYNC] + 1, "%s: one synchronize", what);
        rig_agree(&r, what);
    }
    /* the synchronize works again: served by the retry (pending: the 40 MiB
     * completed, and 11 of its 20 pages go, enough) */
    tu_faulty_faults_off(&r.f);
    cca_stats before = tu_stats(r.a);
    void *q = tu_alloc(r.a, 24 * MiB, S3);
    expect_served(&r, before, pending ? 62 * MiB : 64 * MiB, 1, "24 MiB once synchronizing works");
    tu_free(r.a, q);
    tu_free(r.a, live);
    rig_close(&r);
}

Test(cap, expandable_failed_synchronize_ends_the_retry) {
    failed_synchronize_ends_the_retry(false);
}

Test(cap, expandable_failed_synchronize_ends_the_retry_with_frees_pending) {
    failed_synchronize_ends_the_retry(true);
}

/* The upstream calls made since r->f.order_count was `from`, one letter
 * each (A alloc, F free, R vm_reserve, M vm_map, U vm_unmap, L vm_release,
 * S synchronize): an exact sequence reads well in a failure. */
static const char *rig_order(const rig *r, size_t from) {
    static char seq[TU_FAULTY_ORDER + 1];
    size_t n = 0;
    for (size_t i = from; i < r->f.order_count && i < TU_FAULTY_ORDER; i++)
        seq[n++] = "AFRMULS"[r->f.order[i]];
    seq[n] = '\0';
    return seq;
}

/* With no free pending, the retry's synchronize completes nothing: it is
 * there for the unmapping, so the take after it would repeat the refused
 * one. The scene on a 64 MiB device: 24 MiB on S1 is its range's 24 MiB
 * tail, unmapped (one run, so the device's free memory is not asked):
 * refused in step 4 (and, before step 5 went straight to the retry, in
 * step 5's take); the retry (4 free + 20 cached >= 24) synchronizes,
 * unmaps S2's pages and maps the tail. The take between the synchronize
 * and the release mapped for nothing: a refused vm_map (over CUDA, a
 * cudaMemGetInfo under the upstream's lock). */
Test(cap, expandable_retry_takes_again_after_its_synchronize_only_for_completed_frees) {
    rig r;
    rig_open_on(&r, true, "log_oom:0", 64 * MiB);
    unsigned char *live = scene(&r);
    cca_stats before = tu_stats(r.a);
    size_t mark = r.f.order_count;
    rig_calls was = rig_count(&r);
    unsigned char *q = tu_alloc(r.a, 24 * MiB, S1);
    cr_assert_eq(q, live + 40 * MiB, "S1's tail");
    cr_assert_str_eq(rig_order(&r, mark), "MSUM", "calls: %s", rig_order(&r, mark));
    expect_calls(&r, was, 0, 2, 1, 1, "24 MiB on S1's tail once S2's pages went");
    expect_served(&r, before, 64 * MiB, 1, "24 MiB on S1's tail");
    tu_free(r.a, q);
    tu_free(r.a, live);
    rig_close(&r);
}

/* Step 4's best fit, its pages refused, goes to the retry: step 5's take
 * (growth) or the greedy arena's best fit would find the same block and
 * ask the same map again. A greedy arena of 32 MiB over pages on a 64 MiB
 * device, used whole, freed and trimmed to 16 MiB (its upper 8 pages
 * unmapped); another tenant holds 40 MiB of the device, 8 MiB free. 28 MiB
 * lacks 6 pages (12 MiB, one run): one refused map (there were two), and
 * the retry, the device's 8 free + the arena's 16 cached short of the
 * 28 MiB its block needs once they are unmapped, releases nothing and does
 * not synchronize. The growth case is the scene of the test above. */
Test(cap, expandable_block_whose_map_step_4_met_refused_goes_to_the_retry) {
    rig r;
    rig_open_on(&r, true, "policy:greedy,greedy_bytes:32M,log_oom:0", 64 * MiB);
    tu_free(r.a, tu_alloc(r.a, 32 * MiB, NULL));
    cr_assert_eq(cca_trim(r.a, 16 * MiB, NULL), CCA_OK, "%s", cca_last_error());
    void *tenant = NULL;
    cr_assert_eq(cca_upstream_alloc(r.f.inner, 40 * MiB, &tenant), CCA_OK, "%s", cca_last_error());
    cca_stats before = tu_stats(r.a);
    cr_assert_eq(before.reserved_bytes, 16 * MiB);
    size_t mark = r.f.order_count;
    rig_calls was = rig_count(&r);
    expect_oom_in(r.a, NULL, 28 * MiB, NULL, "28 MiB of a trimmed arena, 8 MiB free");
    device_refusal_message("28 MiB of a trimmed arena");
    cr_assert_str_eq(rig_order(&r, mark), "M", "calls: %s", rig_order(&r, mark));
    /* mem_info: the device's total (asked once, on the allocator's first
     * step 5) and the retry's test */
    expect_calls(&r, was, 0, 1, 0, 2, "28 MiB of a trimmed arena");
    before.ooms++;
    before.alloc_retries++;
    tu_assert_intact(r.a, &before, "28 MiB of a trimmed arena");
    rig_agree(&r, "28 MiB of a trimmed arena");
    cr_assert_eq(cca_upstream_free(r.f.inner, tenant, 40 * MiB), CCA_OK, "%s", cca_last_error());
    rig_close(&r);
}

/* An upstream that cannot say its free memory (no mem_info op, or one that
 * fails) is not asked: the upstream decides, as before. A 64 MiB device,
 * 40 MiB live on S1: 30 MiB on S2 reserves a range (the default 64 GiB:
 * the device's size is unknown too), its map is refused, and the range
 * stays, empty, for S2's next request; the message is the refusal's, not
 * mem_info's. 24 MiB on S3 is served by one range and one map; so is, in
 * the scene of several runs on a 20 MiB device, 16 MiB over two runs
 * (exactly what is free): one map per run. A mem_info that fails is
 * asked by every step that needs an answer (the device's size at step 5a,
 * and for a new range's size; its free memory): three calls for a new
 * range, two for a block mapped again; none without the op. */
Test(cap, expandable_device_without_mem_info_decides_by_refusing) {
    for (int bare = 0; bare < 2; bare++) {
        rig r;
        rig_open_with(&r, true, "log_oom:0", 64 * MiB, bare ? INFO_NONE : INFO_FAILS);
        void *live = tu_alloc(r.a, 40 * MiB, S1);
        cca_stats before = tu_stats(r.a);
        rig_calls was = rig_count(&r);
        expect_oom_in(r.a, NULL, 30 * MiB, S2, "30 MiB with 24 MiB free, mem_info unknown");
        const char *m = cca_last_error();
        cr_assert(!strstr(m, "mem_info") && !strstr(m, "memory info"), "the message is mem_info's: '%s'", m);
        expect_calls(&r, was, 1, 1, 0, bare ? 0 : 3, "a refusal the upstream decided");
        cca_stats s = tu_stats(r.a);
        cr_assert_eq(s.ooms, before.ooms + 1);
        cr_assert_eq(s.expandable_segments, before.expandable_segments + 1, "S2's range stays, empty");
        cr_assert_eq(s.address_space_bytes, before.address_space_bytes + 64 * GiB);
        cr_assert_eq(s.reserved_bytes, before.reserved_bytes);
        rig_agree(&r, "a refusal the upstream decided");
        was = rig_count(&r);
        void *q = tu_alloc(r.a, 24 * MiB, S3);
        expect_calls(&r, was, 1, 1, 0, bare ? 0 : 3, "24 MiB, exactly what is free");
        cr_assert_eq(tu_stats(r.a).reserved_bytes, 64 * MiB);
        rig_agree(&r, "24 MiB on S3");
        tu_free(r.a, q);
        tu_free(r.a, live);
        rig_close(&r);

        unsigned char *A;
        void *X;
        runs_scene(&r, 20 * MiB, 0, bare ? INFO_NONE : INFO_FAILS, &A, &X);
        was = rig_count(&r);
        q = tu_alloc(r.a, 16 * MiB, NULL);
        cr_assert_eq(q, A + 2 * MiB);
        expect_calls(&r, was, 0, 2, 0, bare ? 0 : 2, "16 MiB over two runs, exactly what is free");
        rig_agree(&r, "16 MiB over two runs");
        runs_finish(&r, q, A, X);
    }
}

/* A 64 MiB device behind tu_faulty whose mem_info refuses (until the test
 * says otherwise), an allocator over it: classic or expandable. */
static cca_allocator *size_refused(bool pages, tu_faulty *f, cca_upstream **inner, cca_upstream **u) {
    *inner = tu_vm_device(64 * MiB, PG);
    *u = tu_faulty_create(f, *inner, "fx", true);
    f->fail_mem_info = true;
    return tu_allocator(*u, pages ? "expandable:1,log_oom:0" : "expandable:0,log_oom:0");
}

/* Calls asking the device for memory: allocs, range reservations, maps. */
static uint64_t memory_asks(const tu_faulty *f) {
    return f->calls[TU_FAULT_ALLOC] + f->calls[TU_FAULT_RESERVE] + f->calls[TU_FAULT_MAP];
}

/* A refused mem_info leaves the device's size unknown until the next
 * request that needs memory asks again (not for the allocator's life): a
 * device that refused once, at the first growth, answers at the second
 * (another stream's), and a request over the device is then refused at
 * once, "can never succeed": nothing released, synchronized, reserved or
 * mapped for it, the cache kept, and mem_info not asked again. With the
 * size never learnt, that request went to the upstream, whose refusal
 * sent it to the retry, which gave the whole cache back for nothing. */
TEST_BOTH(a_refused_mem_info_is_asked_again_at_the_next_growth) {
    tu_faulty f;
    cca_upstream *inner, *u;
    cca_allocator *a = size_refused(pages, &f, &inner, &u);
    void *p = tu_alloc(a, 1 * MiB, S1);
    uint64_t refused = f.mem_info_calls;
    cr_assert_geq(refused, 1, "the first growth asked the device's size");
    f.fail_mem_info = false;
    void *q = tu_alloc(a, 1 * MiB, S2);
    cr_assert_gt(f.mem_info_calls, refused, "the second growth did not ask again");
    tu_free(a, p);
    tu_free(a, q);
    cca_stats before = tu_stats(a);
    cr_assert_gt(before.reserved_bytes, 0);
    uint64_t asked = f.mem_info_calls, syncs = f.calls[TU_FAULT_SYNC];
    uint64_t asks = memory_asks(&f);
    uint64_t gives = f.calls[TU_FAULT_FREE] + f.calls[TU_FAULT_UNMAP] + f.calls[TU_FAULT_RELEASE];
    expect_oom_in(a, NULL, 128 * MiB, S1, "128 MiB on a 64 MiB device");
    cr_assert(strstr(cca_last_error(), "can never succeed"), "'%s'", cca_last_error());
    before.ooms++;
    tu_assert_intact(a, &before, "a request over the device");
    cr_assert_eq(f.mem_info_calls, asked, "the size, once answered, was asked again");
    cr_assert_eq(f.calls[TU_FAULT_SYNC], syncs);
    cr_assert_eq(memory_asks(&f), asks);
    cr_assert_eq(f.calls[TU_FAULT_FREE] + f.calls[TU_FAULT_UNMAP] + f.calls[TU_FAULT_RELEASE], gives);
    tu_destroy_clean(a, u);
    tu_faulty_destroy_clean(u, inner);
}

/* The same through cca_domain_reserve, the first call to need the size:
 * refused there, the arena is reserved all the same (the upstream decides)
 * and the call keeps the caller's message; the next reserve asks again,
 * and one over the device is then refused at once, nothing asked of the
 * upstream but that mem_info, the arena already reserved left as it was. */
TEST_BOTH(a_refused_mem_info_at_a_reserve_is_asked_again) {
    tu_faulty f;
    cca_upstream *inner, *u;
    cca_allocator *a = size_refused(pages, &f, &inner, &u);
    cca_domain *d1, *d2;
    cr_assert_eq(cca_domain_create(a, "d1", &d1), CCA_OK);
    cr_assert_eq(cca_domain_create(a, "d2", &d2), CCA_OK);
    cca_set_error(CCA_ERR_CONFIG, "the caller's message");
    cr_assert_eq(cca_domain_reserve(a, d1, 4 * MiB), CCA_OK, "%s", cca_last_error());
    cr_assert_str_eq(cca_last_error(), "the caller's message");
    uint64_t refused = f.mem_info_calls;
    cr_assert_geq(refused, 1, "the reserve asked the device's size");
    f.fail_mem_info = false;
    cca_stats before = tu_stats(a);
    uint64_t asks = memory_asks(&f);
    cr_assert_eq(cca_domain_reserve(a, d2, 128 * MiB), CCA_ERR_OUT_OF_MEMORY);
    cr_assert(strstr(cca_last_error(), "exceed the device"), "'%s'", cca_last_error());
    cr_assert_eq(f.mem_info_calls, refused + 1, "the size was not asked again, once");
    cr_assert_eq(memory_asks(&f), asks);
    tu_assert_intact(a, &before, "a reserve over the device");
    cr_assert_eq(cca_domain_destroy(a, d1, 0, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_domain_destroy(a, d2, 0, NULL), CCA_OK, "%s", cca_last_error());
    tu_destroy_clean(a, u);
    tu_faulty_destroy_clean(u, inner);
}

/* ---- caps at the edges of a segment and a page -------------------------------- */

/* max_reserved below one page (expandable): no request can ever be served,
 * and each fails at once — "can never succeed", no retry, no upstream
 * call, no synchronize — whatever its size and stream, in a domain too; an
 * arena of pages cannot fit either. Below one small segment (classic) the
 * same holds for every request over the cap; those under it are served
 * from a segment of the cap (the tests at the end of this file). */
TEST_BOTH(cap_below_one_segment_or_page_refuses_everything_at_once) {
    rig r;
    rig_open(&r, pages, "max_reserved:1M,log_oom:0");
    cca_domain *d;
    cr_assert_eq(cca_domain_create(r.a, "d", &d), CCA_OK);
    cca_stats before = tu_stats(r.a);
    uint64_t asks = rig_asks(&r), syncs = rig_syncs(&r);
    const size_t sizes[] = {1, 512, 4096, 1 * MiB - 1, 1 * MiB, 1 * MiB + 1, 2 * MiB, 20 * MiB};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        if (!pages && sizes[i] <= 1 * MiB)
            continue; /* a segment of the cap holds it */
        expect_oom_in(r.a, i % 2 ? d : NULL, sizes[i], i % 3 ? S1 : NULL, "under one segment or page");
        cr_assert(strstr(cca_last_error(), "can never succeed"), "%zu bytes: '%s'", sizes[i], cca_last_error());
        before.ooms++;
        tu_assert_intact(r.a, &before, "a request under a cap below one segment or page");
    }
    if (pages) { /* an arena of pages is at least a page */
        cr_assert_eq(cca_domain_reserve(r.a, d, 1), CCA_ERR_OUT_OF_MEMORY);
        tu_assert_intact(r.a, &before, "an arena of a page over the cap");
    }
    cr_assert_eq(rig_asks(&r), asks, "the upstream was asked");
    cr_assert_eq(rig_syncs(&r), syncs);
    rig_agree(&r, "under one segment or page");
    rig_close(&r);
}

/* max_reserved of exactly one small segment or page: the first small
 * request takes it all (expandable: the small pool's least step is
 * small_segment, one page); a request on another stream needs another and
 * is refused, with the first one live, releasing nothing; once the first
 * is freed, the retry gives its segment or page back and serves the
 * other stream, a small request or one of 1.5 MiB (its least segment, or
 * its page, is the cap). A cap a little above (2 MiB + 512) is the same:
 * no segment or page fits in the 512 bytes. */
static void one_segment_or_page(bool pages, const char *conf) {
    rig r;
    rig_open(&r, pages, conf);
    void *p = tu_alloc(r.a, 4096, NULL);
    cr_assert_eq(tu_stats(r.a).reserved_bytes, 2 * MiB);
    rig_agree(&r, "one small request");
    cca_stats before = tu_stats(r.a);
    uint64_t back = rig_gives_back(&r), syncs = rig_syncs(&r);
    expect_oom_in(r.a, NULL, 4096, S1, "a second segment or page under the cap");
    cr_assert(strstr(cca_last_error(), "nothing was released") || strstr(cca_last_error(), "nothing cached"), "'%s'",
              cca_last_error());
    before.ooms++;
    before.alloc_retries++;
    tu_assert_intact(r.a, &before, "a second segment or page under the cap");
    cr_assert_eq(rig_gives_back(&r), back);
    cr_assert_eq(rig_syncs(&r), syncs, "a synchronize for nothing");
    tu_free(r.a, p);
    const size_t sizes[] = {4096, 1 * MiB + MiB / 2};
    for (size_t i = 0; i < 2; i++) {
        before = tu_stats(r.a);
        back = rig_gives_back(&r);
        void *q = tu_alloc(r.a, sizes[i], i ? S2 : S1);
        cca_stats s = tu_stats(r.a);
        cr_assert_eq(s.reserved_bytes, 2 * MiB);
        cr_assert_eq(s.alloc_retries, before.alloc_retries + 1);
        cr_assert_gt(rig_gives_back(&r), back, "the other stream's segment or page went back");
        rig_agree(&r, "served once the cache went back");
        tu_free(r.a, q);
    }
    rig_close(&r);
}

TEST_BOTH(cap_of_one_segment_or_page) {
    one_segment_or_page(pages, "max_reserved:2M,log_oom:0");
    one_segment_or_page(pages, "max_reserved:2097664,log_oom:0");
}

/* ---- seeded random sequences against the properties ------------------------ *
 *
 * Allocations at the edges of the config's tables and of the room left
 * under the cap, in three domains and three streams, frees, frees pending
 * on held events, events completed or kept by a synchronize, trims,
 * empty-caches, footprint arenas and domain releases; after every step the
 * invariants hold, the device holds exactly what the allocator says,
 * reserved and its peak are within the cap, and after every step that may
 * release, every live block keeps its contents. Every refused request is CCA_ERR_OUT_OF_MEMORY with a
 * message and changes no live block, and, growth policy:
 *   NOTHING FOR NOTHING  classic (any device: the test double has no
 *                        fragmentation), and expandable under a cap with
 *                        the device ample: the retry gave nothing back
 *                        (had it released, the request would have fit:
 *                        what stays plus what it needs is under the cap),
 *                        and with no free pending it did not synchronize;
 *   NO REFUSAL TOO SOON  empty-cache then the same request: refused again
 *                        (the retry releases what empty-cache releases,
 *                        pending frees included: a request that fits once
 *                        the cache is released must have been served).
 * The same also runs with no cap on a 48 MiB device, the device the limit
 * (tu_upstream has no fragmentation: the retry must serve whatever fits
 * once released, and classic segments give nothing back for nothing), and
 * with a 40 MiB cap on a 56 MiB device, both limits.
 */

#define Q_LIVE 256

/* What the sequences met, so that a change that makes them meet nothing
 * (every request served, say) fails instead of passing vacuously. */
static struct { size_t refusals, kept, released, again; } q_met;
/* seeds per config and steps per sequence (-DQ_SEEDS=25 -DQ_STEPS=600 for
 * a longer search: about a minute under ASan) */
#ifndef Q_SEEDS
#define Q_SEEDS 3
#define Q_STEPS 250
#endif

typedef struct q_block {
    unsigned char *p;
    size_t held;
    int dom;
    uint64_t seed;
} q_block;

typedef struct q_run {
    rig r;
    const char *conf;
    cca_config cfg;
    size_t capacity, ceiling;
    bool greedy, cap_only; /* cap_only: max_reserved set, the device far larger */
    cca_domain *dom[3];
    q_block live[Q_LIVE];
    size_t n;
    uint64_t rng;
    size_t step;
} q_run;

static size_t q_pick(q_run *q, size_t n) {
    return n ? (size_t)(tu_rand(&q->rng) % n) : 0;
}

/* A block's contents: its first and last 4 KiB (all of it when smaller),
 * each from its own seed — cheap, and a page unmapped under either end
 * faults. */
#define Q_END 4096
static bool q_fill(const q_block *b, bool check) {
    size_t head = b->held < 2 * Q_END ? b->held : Q_END;
    if (!check) {
        tu_fill(b->p, head, b->seed);
        if (head < b->held)
            tu_fill(b->p + b->held - Q_END, Q_END, ~b->seed);
        return true;
    }
    return tu_check_fill(b->p, head, b->seed) &&
           (head == b->held || tu_check_fill(b->p + b->held - Q_END, Q_END, ~b->seed));
}

static void q_check_stamps(const q_run *q) {
    for (size_t i = 0; i < q->n; i++)
        cr_assert(q_fill(&q->live[i], true), "step %zu (%s): block %p lost its contents", q->step, q->conf,
                  (void *)q->live[i].p);
}

static size_t q_allocated(const q_run *q) {
    size_t sum = 0;
    for (size_t i = 0; i < q->n; i++)
        sum += q->live[i].held;
    return sum;
}

/* A size at an edge of the config's tables or of the room under the cap. */
static size_t q_size(q_run *q) {
    const cca_config *c = &q->cfg;
    static const long fine[] = {-512, -1, 0, 1, 512};
    long d = fine[q_pick(q, 5)];
    size_t reserved = tu_stats(q->r.a).reserved_bytes, base;
    size_t cap = c->max_reserved ? c->max_reserved : q->capacity;
    switch (q_pick(q, 12)) {
    case 0: return 1 + q_pick(q, 4096);
    case 1: base = c->small_max; break;
    case 2: base = c->large_min; break;
    case 3: base = c->medium_segment; break;
    case 4: base = c->small_segment; break;
    case 5: base = (1 + q_pick(q, 8)) * PG; break;
    case 6: base = cap > reserved ? cap - reserved : 512; break;             /* the room left */
    case 7: base = cap > q_allocated(q) ? cap - q_allocated(q) : 512; break; /* the room once released */
    case 8: base = cap / 2; break;
    case 9: return 1 + q_pick(q, cap + 4 * MiB);
    case 10: return q->ceiling + 1 + q_pick(q, 4 * MiB); /* can never succeed */
    default: return 1 + q_pick(q, 2 * MiB);
    }
    long s = (long)base + d;
    return s > 0 ? (size_t)s : 1;
}

/* After every step; the live blocks' contents after every step that may
 * release. */
static void q_agree(q_run *q, const char *what) {
    rig_agree(&q->r, what);
    cca_stats s = tu_stats(q->r.a);
    cr_assert_geq(s.allocated_bytes, q_allocated(q), "step %zu (%s): %s", q->step, q->conf, what);
}

static void q_agree_contents(q_run *q, const char *what) {
    q_agree(q, what);
    q_check_stamps(q);
}

static void q_keep(q_run *q, void *p, int dom) {
    if (q->n == Q_LIVE) {
        tu_free(q->r.a, p);
        return;
    }
    q_block *b = &q->live[q->n++];
    b->p = p;
    b->held = tu_block_size(q->r.a, p);
    b->dom = dom;
    b->seed = tu_rand(&q->rng);
    q_fill(b, false);
}

/* A refused request: the properties above. */
static void q_refused(q_run *q, cca_status st, void *p, size_t size, int dom, cca_stream s, const cca_stats *before,
                      uint64_t back, uint64_t syncs) {
    cr_assert_eq(st, CCA_ERR_OUT_OF_MEMORY, "step %zu (%s): %zu bytes: %s (%s)", q->step, q->conf, size,
                 cca_status_string(st), cca_last_error());
    cr_assert_null(p);
    cr_assert_neq(cca_last_error()[0], '\0', "step %zu: no message", q->step);
    cca_stats now = tu_stats(q->r.a);
    cr_assert_eq(now.ooms, before->ooms + 1, "step %zu", q->step);
    cr_assert_eq(now.alloc_calls, before->alloc_calls, "step %zu", q->step);
    cr_assert_eq(now.requested_bytes, before->requested_bytes, "step %zu", q->step);
    q_agree_contents(q, "a refusal");
    size_t rounded = (size + 511) / 512 * 512;
    if (q->greedy || rounded > q->ceiling)
        return;
    q_met.refusals++;
    if (rig_gives_back(&q->r) == back)
        q_met.kept++;
    else
        q_met.released++;
    if (!q->r.pages || q->cap_only) {
        cr_assert_eq(rig_gives_back(&q->r), back, "step %zu (%s): %zu bytes refused after giving %zu bytes back",
                     q->step, q->conf, size, before->reserved_bytes - now.reserved_bytes);
        if (before->pending_blocks == 0)
            cr_assert_eq(rig_syncs(&q->r), syncs, "step %zu (%s): a synchronize for nothing", q->step, q->conf);
    }
    /* no refusal too soon: once everything is released, refused again */
    if (q_pick(q, 3))
        return;
    cca_status e = cca_empty_cache(q->r.a, NULL);
    cr_assert(e == CCA_OK || e == CCA_ERR_NOT_READY, "step %zu: empty_cache: %s", q->step, cca_last_error());
    q_agree_contents(q, "empty-cache after a refusal");
    q_met.again++;
    void *again = (void *)1;
    st = cca_alloc_in(q->r.a, q->dom[dom], size, s, &again);
    cr_assert_eq(st, CCA_ERR_OUT_OF_MEMORY,
                 "step %zu (%s): %zu bytes on stream %p in domain %d were refused, yet fit once the cache was "
                 "released (%s)",
                 q->step, q->conf, size, (void *)s, dom, cca_status_string(st));
    q_agree_contents(q, "the same request after empty-cache");
}

static void q_alloc(q_run *q) {
    static const cca_stream streams[] = {NULL, S1, S2};
    size_t size = q_size(q);
    int dom = q->greedy ? 0 : (int)q_pick(q, 3);
    cca_stream s = streams[q_pick(q, 3)];
    cca_stats before = tu_stats(q->r.a);
    uint64_t back = rig_gives_back(&q->r), syncs = rig_syncs(&q->r);
    void *p = (void *)1;
    cca_status st = cca_alloc_in(q->r.a, q->dom[dom], size, s, &p);
    if (st != CCA_OK) {
        q_refused(q, st, p, size, dom, s, &before, back, syncs);
        return;
    }
    cr_assert_not_null(p);
    q_keep(q, p, dom);
    q_agree(q, "an allocation");
}

static void q_free(q_run *q) {
    if (!q->n)
        return;
    size_t i = q_pick(q, q->n);
    if (q_pick(q, 4) == 0)
        cr_assert_eq(cca_record_stream(q->r.a, q->live[i].p, S3), CCA_OK, "%s", cca_last_error());
    tu_free(q->r.a, q->live[i].p);
    q->live[i] = q->live[--q->n];
    q_agree(q, "a free");
}

static void q_events(q_run *q) {
    switch (q_pick(q, 4)) {
    case 0: rig_events(&q->r, false, false); break;
    case 1: rig_events(&q->r, true, false); break;
    case 2: rig_events(&q->r, true, true); break;
    default: /* the device finishes what it had: every event so far completes */
        if (q->r.pages)
            q->r.f.events_done = q->r.f.events_recorded;
        else
            tu_upstream_release_events(&q->r.t);
    }
}

static void q_trim(q_run *q) {
    size_t cap = q->cfg.max_reserved ? q->cfg.max_reserved : q->capacity;
    size_t keep = q_pick(q, 3) ? q_pick(q, cap / 512 + 1) * 512 : 0;
    cca_status st = cca_trim(q->r.a, keep, NULL);
    cr_assert(st == CCA_OK || st == CCA_ERR_NOT_READY, "step %zu: trim: %s", q->step, cca_last_error());
    q_agree_contents(q, "a trim");
}

/* A footprint arena: within the cap or refused; refused, the same after
 * empty-cache (the retry released what empty-cache would). */
static void q_reserve(q_run *q) {
    int d = 1 + (int)q_pick(q, 2);
    size_t cap = q->cfg.max_reserved ? q->cfg.max_reserved : q->capacity;
    size_t bytes = 1 + q_pick(q, cap);
    uint64_t back = rig_gives_back(&q->r);
    cca_stats before = tu_stats(q->r.a);
    cca_status st = cca_domain_reserve(q->r.a, q->dom[d], bytes);
    q_agree_contents(q, "a footprint arena");
    if (st != CCA_ERR_OUT_OF_MEMORY) {
        cr_assert(st == CCA_OK || st == CCA_ERR_INVALID_ARGUMENT, "step %zu: %s", q->step, cca_last_error());
        return;
    }
    if (!q->r.pages)
        cr_assert_eq(rig_gives_back(&q->r), back, "step %zu (%s): a %zu-byte arena refused after releasing %zu bytes",
                     q->step, q->conf, bytes, before.reserved_bytes - tu_stats(q->r.a).reserved_bytes);
    if (q_pick(q, 2))
        return;
    cca_status e = cca_empty_cache(q->r.a, NULL);
    cr_assert(e == CCA_OK || e == CCA_ERR_NOT_READY, "step %zu: empty_cache: %s", q->step, cca_last_error());
    st = cca_domain_reserve(q->r.a, q->dom[d], bytes);
    cr_assert(st == CCA_ERR_OUT_OF_MEMORY || st == CCA_ERR_INVALID_ARGUMENT,
              "step %zu (%s): a %zu-byte arena was refused, yet fit once the cache was released", q->step, q->conf,
              bytes);
    q_agree_contents(q, "the same arena after empty-cache");
}

static void q_domain_release(q_run *q) {
    int d = 1 + (int)q_pick(q, 2);
    bool holds = false;
    for (size_t i = 0; i < q->n; i++)
        holds |= q->live[i].dom == d;
    cca_domain_report rep;
    memset(&rep, 0, sizeof rep);
    cca_status st = cca_domain_release(q->r.a, q->dom[d], 0, &rep);
    if (holds)
        cr_assert_eq(st, CCA_ERR_LIVE_BLOCKS, "step %zu: %s", q->step, cca_status_string(st));
    else
        cr_assert(st == CCA_OK || st == CCA_ERR_LIVE_BLOCKS, "step %zu: %s", q->step, cca_last_error()); /* pending */
    q_agree_contents(q, "a domain release");
}

/* The growth rule's fixed parts set through the test hook (pages_rule.h)
 * before the first request: the least step and the ahead's cap; maps of
 * the default 128 MiB. */
typedef struct q_rule {
    size_t least, cap;
} q_rule;

/* `rule`: NULL for the rule expandable_ahead sets. */
static void q_sequence(bool pages, const char *conf, const q_rule *rule, size_t capacity, uint64_t seed) {
    q_run *q = calloc(1, sizeof *q);
    cr_assert_not_null(q);
    q->conf = conf;
    q->capacity = capacity;
    q->rng = seed;
    rig_open_on(&q->r, pages, conf, capacity);
    if (rule)
        ccai_pages_rule_set(q->r.a, rule->least, rule->cap, 128 * MiB);
    cr_assert_eq(cca_get_config(q->r.a, &q->cfg), CCA_OK);
    q->greedy = q->cfg.policy == CCA_POLICY_GREEDY;
    q->cap_only = q->cfg.max_reserved && q->cfg.max_reserved <= capacity / 4;
    q->ceiling = q->cfg.max_reserved && q->cfg.max_reserved < capacity ? q->cfg.max_reserved : capacity;
    if (!q->greedy) {
        cr_assert_eq(cca_domain_create(q->r.a, "one", &q->dom[1]), CCA_OK);
        cr_assert_eq(cca_domain_create(q->r.a, "two", &q->dom[2]), CCA_OK);
    }
    q_agree(q, "creation");
    for (q->step = 0; q->step < Q_STEPS; q->step++) {
        unsigned op = (unsigned)q_pick(q, 100);
        if (op < 50)
            q_alloc(q);
        else if (op < 80)
            q_free(q);
        else if (op < 88)
            q_events(q);
        else if (op < 93)
            q_trim(q);
        else if (op < 97 && !q->greedy)
            q_reserve(q);
        else if (!q->greedy)
            q_domain_release(q);
    }
    while (q->n)
        q_free(q);
    for (int d = 1; d < 3 && !q->greedy; d++) {
        rig_events(&q->r, false, false);
        cr_assert_eq(cca_domain_destroy(q->r.a, q->dom[d], 0, NULL), CCA_OK, "%s", cca_last_error());
    }
    rig_close(&q->r);
    free(q);
}

/* Caps at the edges: under one small segment or page, one, just above one,
 * not a multiple of any size; the ahead mapping at 0 and at its maximum;
 * segment sizes at their bounds. */
static const char *const q_classic_confs[] = {
    "log_oom:0,max_reserved:64M",
    "log_oom:0,max_reserved:2M",
    "log_oom:0,max_reserved:2097664",
    "log_oom:0,max_reserved:45M,medium_pool:0",
    "log_oom:0,max_reserved:30M,small_pool:0,segment_round:512",
    "log_oom:0,max_reserved:24M,small_segment:64K,small_max:64K,medium_segment:64K,large_min:64K",
    "log_oom:0,max_reserved:40M,small_segment:1G",
    "log_oom:0,max_reserved:41M,max_split:21M",
    "log_oom:0,policy:greedy,greedy_bytes:40M,max_reserved:24M",
    "log_oom:0,policy:greedy,greedy_fraction:1,max_reserved:20971521",
};

/* The ahead at its maximum: all of what is mapped (no cap, no least step);
 * a least step with no bound (every tail map takes the ahead's 64 MiB cap,
 * in the small pool small_segment); an ahead capped (8 MiB) below the
 * least step. */
static const q_rule q_ahead_all = {0, SIZE_MAX}, q_least_all = {SIZE_MAX, 64 * MiB}, q_capped = {20 * MiB, 8 * MiB};

static const struct {
    const char *conf;
    const q_rule *rule;
} q_pages_confs[] = {
    {"log_oom:0,max_reserved:64M", NULL},
    {"log_oom:0,max_reserved:2M", NULL},
    {"log_oom:0,max_reserved:3M", NULL},
    {"log_oom:0,max_reserved:33M,expandable_ahead:1", &q_ahead_all},
    {"log_oom:0,max_reserved:40M", &q_least_all},
    {"log_oom:0,max_reserved:40M,expandable_ahead:0", NULL},
    {"log_oom:0,max_reserved:24M,small_segment:64K,small_max:64K,segment_round:512", NULL},
    {"log_oom:0,max_reserved:50M,small_pool:0,expandable_ahead:1", &q_capped},
    {"log_oom:0,policy:greedy,greedy_bytes:7M,max_reserved:100M", NULL},
    {"log_oom:0,policy:greedy,max_reserved:5M", NULL},
};

static void q_report(const char *what) {
    cr_log_info("%s: %zu refusals (%zu with the cache kept, %zu after a release), %zu asked again after "
                "empty-cache",
                what, q_met.refusals, q_met.kept, q_met.released, q_met.again);
    cr_assert_gt(q_met.kept, 20, "%s: too few refusals with the cache kept to mean anything", what);
    cr_assert_gt(q_met.again, 20, "%s: too few refusals asked again", what);
}

Test(cap, random_classic_sequences_hold_the_cap_and_release_only_to_serve, .timeout = 240) {
    for (size_t c = 0; c < sizeof q_classic_confs / sizeof *q_classic_confs; c++)
        for (uint64_t seed = 1; seed <= Q_SEEDS; seed++)
            q_sequence(false, q_classic_confs[c], NULL, 1 * GiB, seed * 7919 + c);
    for (uint64_t seed = 1; seed <= Q_SEEDS; seed++) { /* the device the limit, then both */
        q_sequence(false, "log_oom:0", NULL, 48 * MiB, seed * 31 + 5);
        q_sequence(false, "log_oom:0,max_reserved:40M", NULL, 56 * MiB, seed * 31 + 7);
    }
    q_report("classic");
}

Test(cap, random_expandable_sequences_hold_the_cap_and_release_only_to_serve, .timeout = 240) {
    for (size_t c = 0; c < sizeof q_pages_confs / sizeof *q_pages_confs; c++)
        for (uint64_t seed = 1; seed <= Q_SEEDS; seed++)
            q_sequence(true, q_pages_confs[c].conf, q_pages_confs[c].rule, 1 * GiB, seed * 104729 + c);
    for (uint64_t seed = 1; seed <= Q_SEEDS; seed++) {
        q_sequence(true, "log_oom:0", NULL, 48 * MiB, seed * 37 + 3);
        q_sequence(true, "log_oom:0,max_reserved:40M", NULL, 56 * MiB, seed * 37 + 9);
    }
    q_report("expandable");
}

/* ---- a ceiling below a request's least segment ---------------------------------- */

/* A ceiling (max_reserved, or the device's total) below the least segment
 * a request would reserve — small_segment for a small request, a medium
 * request rounded up to segment_round — is accepted by
 * cca_config_validate, and the segment shrinks to the ceiling (rounded
 * down to 512 bytes), never below the request: small requests share one
 * segment of the cap. Only a request over the ceiling can never succeed,
 * and only it is told so. Classic segments (expandable:0). */
Test(cap, a_cap_below_small_segment_serves_small_requests_in_a_segment_of_the_cap) {
    cca_config c;
    cca_config_default(&c);
    cr_assert_eq(cca_config_parse(&c, "max_reserved:1M"), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_config_validate(&c), CCA_OK, "%s", cca_last_error());
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(1 * GiB, "expandable:0,max_reserved:1000000,log_oom:0", &u, &a);
    void *p = tu_alloc(a, 4096, NULL), *q = tu_alloc(a, 100 * KiB, NULL);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.reserved_bytes, 999936, "one segment of the cap rounded down to 512 bytes: %zu", s.reserved_bytes);
    cr_assert_eq(s.segments, 1);
    void *r = NULL;
    cr_assert_eq(cca_alloc(a, 900000, NULL, &r), CCA_ERR_OUT_OF_MEMORY, "it does not fit beside p and q");
    cr_assert_null(strstr(cca_last_error(), "can never succeed"), "it can, once they are freed: '%s'",
                   cca_last_error());
    tu_free(a, p);
    tu_free(a, q);
    r = tu_alloc(a, 900000, NULL);
    cr_assert_eq(tu_stats(a).reserved_bytes, 999936);
    void *big = NULL;
    cr_assert_eq(cca_alloc(a, 999937, NULL, &big), CCA_ERR_OUT_OF_MEMORY, "1000448 bytes once rounded: over the cap");
    cr_assert(strstr(cca_last_error(), "can never succeed"), "'%s'", cca_last_error());
    tu_free(a, r);
    tu_check(a);
    tu_teardown(a, u);
}

Test(cap, a_cap_below_a_medium_requests_rounded_segment_serves_it) {
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(1 * GiB, "expandable:0,max_reserved:1536K,log_oom:0", &u, &a);
    void *p = tu_alloc(a, 1200 * KiB, NULL); /* medium: its least segment, 2 MiB, is over the cap */
    cr_assert_eq(tu_stats(a).reserved_bytes, 1536 * KiB);
    tu_free(a, p);
    tu_check(a);
    tu_teardown(a, u);
}

Test(cap, a_device_below_small_segment_serves_small_requests) {
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(1 * MiB, "expandable:0,log_oom:0", &u, &a);
    void *p = tu_alloc(a, 4096, NULL), *q = tu_alloc(a, 64, NULL);
    cr_assert_eq(tu_stats(a).reserved_bytes, 1 * MiB, "one segment of the whole device");
    tu_free(a, p);
    tu_free(a, q);
    tu_teardown(a, u);
}
