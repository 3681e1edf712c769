/*
 * test_domain_release.c — allocator/src/domain.c: a domain release (and
 * destroy) meeting pending blocks, events that never complete, and upstream
 * calls that fail.
 * Most tests run twice (TEST_BOTH, domain_suite.h): with classic segments
 * and with expandable segments (expandable:1 over the simulated device's
 * vm ops, 64 KiB pages).
 *
 *   streams     a pending block is completed by the release's synchronize;
 *               one whose event never completes blocks the release, even
 *               forced (pending=1), and keeps its memory, but another
 *               domain's stuck block does not; a failing synchronize
 *               releases nothing; arena blocks wait for an event, those used
 *               on the default stream too.
 *   faults      every free / unmap / range release / synchronize made by a
 *               domain release (or destroy) fails once, or from then on,
 *               forced or not: OK or CCA_ERR_UPSTREAM, one refusal keeps
 *               one segment and releases the rest, the accounts agree with
 *               the device's, nothing is lost, a refused destroy keeps the
 *               domain, a second call is clean.
 *
 * The other suites of domain.c: test_domain_lifecycle.c, test_domain_stats.c,
 * test_domain_footprint.c.
 */
#include "domain_suite.h"

/* ---- streams --------------------------------------------------------------------- */

/* The fault-injecting wrapper (tu_faulty, alloc_test_util.h) over a new
 * simulated device of `capacity` bytes, with events: call number fail_at[k]
 * of kind k fails (once, or from then on: sticky), calls[k] counts every
 * call of k; its events are complete when recorded unless held, and a
 * synchronize completes them unless told not to. */
static cca_upstream *dx_create(tu_faulty *f, size_t capacity) {
    return tu_faulty_create(f, device(capacity), "dx", true);
}

static void dx_destroy(tu_faulty *f, cca_allocator *a, cca_upstream *u) {
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(f->events_live, 0, "events leaked");
    cca_upstream_stats us = tu_upstream_stats(f->inner);
    cr_assert_eq(us.bytes_in_use, 0, "the device still holds %zu bytes", us.bytes_in_use);
    cr_assert_eq(us.vm_reserved_bytes, 0);
    cca_upstream_destroy(u);
    cca_upstream_destroy(f->inner);
}

TEST_BOTH(release_completes_pending_blocks_and_never_takes_a_stuck_one) {
    tu_faulty f;
    cca_upstream *u = dx_create(&f, 128 * MiB);
    cca_allocator *a = make(m, u, NULL);
    cca_domain *A = dom(a, "A"), *B = dom(a, "B");
    cca_domain *doms[] = {A, B};
    blk keep = mk(a, B, 64 * KiB, S0, 1, true);

    /* a pending block whose event completes at the release's synchronize */
    f.hold_events = true;
    blk b = mk(a, A, 64 * KiB, S0, 2, true);
    cr_assert_eq(cca_record_stream(a, b.p, S1), CCA_OK);
    tu_free(a, b.p);
    cr_assert_eq(tu_stats(a).pending_blocks, 1);
    cr_assert_eq(dst(a, A).active_blocks, 1, "a pending block is active");
    cr_assert_eq(dst(a, A).allocated_bytes, b.held);
    agree(a, f.inner, doms, 2, "pending");
    uint64_t syncs = f.calls[TU_FAULT_SYNC];
    cca_domain_report r;
    memset(&r, 0xcd, sizeof r);
    r.leaks = NULL, r.leaks_cap = 0;
    cca_status st = cca_domain_release(a, A, 0, &r);
    cr_assert_eq(st, CCA_OK, "the synchronize completes the pending block: %s", cca_last_error());
    cr_assert_gt(f.calls[TU_FAULT_SYNC], syncs, "release synchronizes");
    cr_assert_eq(r.live_blocks, 0);
    cr_assert_eq(tu_stats(a).pending_blocks, 0);
    cr_assert_eq(dst(a, A).reserved_bytes, 0);
    cr_assert_eq(dst(a, A).active_blocks, 0);
    cr_assert_eq(f.events_live, 0, "its event destroyed");
    agree(a, f.inner, doms, 2, "pending completed and released");

    /* a pending block whose event never completes: refused, forced or not */
    f.sync_keeps_events = true;
    b = mk(a, A, 64 * KiB, S0, 3, true);
    void *c = in(a, A, 3 * MiB, S0);
    tu_free(a, c); /* A has free cached memory besides */
    cr_assert_eq(cca_record_stream(a, b.p, S1), CCA_OK);
    tu_free(a, b.p);
    cr_assert_eq(tu_stats(a).pending_blocks, 1);
    cca_stats before = tu_stats(a);
    cca_domain_stats sA = dst(a, A);
    cca_live_block leaks[4];
    memset(leaks, CANARY, sizeof leaks);
    r.leaks = leaks, r.leaks_cap = 4;
    st = cca_domain_release(a, A, 0, &r);
    cr_assert_eq(st, CCA_ERR_LIVE_BLOCKS, "%s", cca_status_string(st));
    cr_assert_eq(r.live_blocks, 1);
    cr_assert_eq(r.live_bytes, b.held);
    cr_assert_eq(r.leaks_written, 1);
    cr_assert_eq(leaks[0].ptr, b.p);
    cr_assert_eq(leaks[0].pending, 1, "reported as pending");
    cr_assert_eq(leaks[0].size, b.held);
    cr_assert_eq(leaks[0].requested, b.size);
    cr_assert_eq(leaks[0].stream, S0);
    cr_assert_eq(r.bytes_released, 0);
    tu_assert_intact(a, &before, "stuck pending: refused");
    dstats_unchanged(a, A, &sA, "stuck pending: refused");
    memset(leaks, CANARY, sizeof leaks);
    r.leaks = leaks, r.leaks_cap = 4;
    st = cca_domain_release(a, A, CCA_DOMAIN_FORCE, &r);
    cr_assert_eq(st, CCA_ERR_LIVE_BLOCKS, "FORCE never releases a pending block: %s", cca_status_string(st));
    cr_assert_eq(r.live_blocks, 1);
    cr_assert_eq(r.leaks_written, 1);
    cr_assert_eq(leaks[0].pending, 1);
    cr_assert_eq(leaks[0].ptr, b.p);
    agree(a, f.inner, doms, 2, "stuck pending: forced");
    cr_assert_eq(tu_stats(a).pending_blocks, 1);
    cr_assert_geq(dst(a, A).reserved_bytes, b.held, "the pending block's memory stays");
    cr_assert_eq(dst(a, A).active_blocks, 1);
    cr_assert_eq(r.bytes_still_reserved, dst(a, A).reserved_bytes);
    TU_ASSERT_READABLE(b.p);
    ASSERT_INTACT(b, true, "another stream may still use it");
    st = cca_domain_destroy(a, A, CCA_DOMAIN_FORCE, &r);
    cr_assert_eq(st, CCA_ERR_LIVE_BLOCKS, "destroy: %s", cca_status_string(st));
    cr_assert_eq(dst(a, A).active_blocks, 1, "the domain stays");
    void *d2 = in(a, A, 4096, S0);
    tu_free(a, d2);
    /* the events complete: released */
    f.sync_keeps_events = false;
    f.hold_events = false;
    st = cca_domain_release(a, A, 0, &r);
    cr_assert_eq(st, CCA_OK, "%s", cca_last_error());
    cr_assert_eq(tu_stats(a).pending_blocks, 0);
    cr_assert_eq(dst(a, A).reserved_bytes, 0);
    agree(a, f.inner, doms, 2, "stuck pending completed");

    /* a failing synchronize: nothing released, its status returned */
    c = in(a, A, 3 * MiB, S0);
    tu_free(a, c);
    before = tu_stats(a);
    sA = dst(a, A);
    f.fail_at[TU_FAULT_SYNC] = f.calls[TU_FAULT_SYNC] + 1;
    memset(&r, 0, sizeof r);
    st = cca_domain_release(a, A, 0, &r);
    cr_assert_eq(st, CCA_ERR_UPSTREAM, "%s", cca_status_string(st));
    cr_assert_eq(f.failures, 1);
    tu_assert_intact(a, &before, "failed synchronize");
    dstats_unchanged(a, A, &sA, "failed synchronize");
    cr_assert_eq(r.bytes_released, 0);
    agree(a, f.inner, doms, 2, "failed synchronize");
    tu_faulty_faults_off(&f);
    cr_assert_eq(cca_domain_release(a, A, 0, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(r.bytes_released, sA.reserved_bytes);
    ASSERT_INTACT(keep, true, "B");
    tu_free(a, keep.p);
    dx_destroy(&f, a, u);
}

/* A release whose upstream call is refused keeps the segment, cached and
 * usable: the footprint arena stays the domain's, and its next request gets
 * memory it can write. Expandable: the arena is mapped whole at reserve, so
 * its free block needs no page test until the release unmaps its pages;
 * the refused range release must leave that block marked as unmapped, or
 * the next request would be handed unmapped pages (a fault here). */
TEST_BOTH(a_refused_release_leaves_the_arena_usable) {
    tu_faulty f;
    cca_upstream *u = dx_create(&f, 128 * MiB);
    cca_allocator *a = make(m, u, NULL);
    cca_domain *A = dom(a, "A");
    cca_domain *doms[] = {A};
    cr_assert_eq(cca_domain_reserve(a, A, 4 * MiB), CCA_OK, "%s", cca_last_error());
    void *p = in(a, A, 1 * MiB, S0);
    tu_fill(p, 1 * MiB, 1);
    tu_free(a, p);
    tu_fault_kind k = m->expandable ? TU_FAULT_RELEASE : TU_FAULT_FREE;
    f.fail_at[k] = f.calls[k] + 1;
    cca_domain_report r;
    memset(&r, 0, sizeof r);
    cr_assert_eq(cca_domain_release(a, A, 0, &r), CCA_ERR_UPSTREAM, "%s", cca_last_error());
    cr_assert_eq(f.failures, 1);
    cr_assert_eq(r.segments_released, 0);
    cr_assert_eq(dst(a, A).segments, 1, "the arena stays");
    agree(a, f.inner, doms, 1, "release refused");
    void *q = in(a, A, 1 * MiB, S0);
    cr_assert_eq(q, p, "the arena's first block again");
    tu_fill(q, 1 * MiB, 2);
    cr_assert(tu_check_fill(q, 1 * MiB, 2));
    agree(a, f.inner, doms, 1, "arena used again");
    tu_free(a, q);
    tu_faulty_faults_off(&f);
    cr_assert_eq(cca_domain_release(a, A, 0, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(dst(a, A).segments, 0);
    dx_destroy(&f, a, u);
}

/* Only d's own pending blocks hold d's release: another domain's stuck
 * block does not, and a forced release of a live block that was used on
 * another stream leaves no event behind. */
TEST_BOTH(another_domains_stuck_block_does_not_hold_a_release) {
    tu_faulty f;
    cca_upstream *u = dx_create(&f, 128 * MiB);
    cca_allocator *a = make(m, u, NULL);
    cca_domain *A = dom(a, "A"), *B = dom(a, "B");
    cca_domain *doms[] = {A, B};
    f.hold_events = true;
    f.sync_keeps_events = true;
    blk sb = mk(a, B, 64 * KiB, S0, 1, true);
    cr_assert_eq(cca_record_stream(a, sb.p, S1), CCA_OK);
    tu_free(a, sb.p); /* B's block: stuck */
    void *c = in(a, A, 3 * MiB, S0);
    tu_free(a, c);
    blk l = mk(a, A, 100 * KiB, S0, 2, true);
    cr_assert_eq(cca_record_stream(a, l.p, S1), CCA_OK);
    cca_live_block leaks[2];
    cca_domain_report r;
    memset(&r, 0xcd, sizeof r);
    r.leaks = leaks, r.leaks_cap = 2;
    cr_assert_eq(cca_domain_release(a, A, 0, &r), CCA_ERR_LIVE_BLOCKS);
    cr_assert_eq(r.live_blocks, 1, "A's live block only, not B's pending one");
    cr_assert_eq(leaks[0].ptr, l.p);
    cr_assert_eq(leaks[0].pending, 0);
    cca_domain_stats sA = dst(a, A);
    cr_assert_eq(cca_domain_release(a, A, CCA_DOMAIN_FORCE, &r), CCA_OK, "B's stuck block is not A's: %s",
                 cca_last_error());
    cr_assert_eq(r.live_blocks, 1);
    cr_assert_eq(r.bytes_released, sA.reserved_bytes);
    cr_assert_eq(dst(a, A).reserved_bytes, 0);
    cr_assert_eq(tu_stats(a).pending_blocks, 1, "B's block still waits");
    cr_assert_eq(cca_free(a, l.p), CCA_ERR_INVALID_POINTER);
    agree(a, f.inner, doms, 2, "A forced, B stuck");
    TU_ASSERT_READABLE(sb.p);
    ASSERT_INTACT(sb, true, "B's pending block");
    f.hold_events = f.sync_keeps_events = false;
    cr_assert_eq(cca_domain_release(a, B, 0, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(tu_stats(a).pending_blocks, 0);
    agree(a, f.inner, doms, 2, "end");
    dx_destroy(&f, a, u);
}

/* Arena blocks wait for an event before reuse, as in the greedy arena, on
 * the default stream (NULL) too: an arena's block goes to any stream, and
 * no stream is ordered against another. */
TEST_BOTH(arena_blocks_used_on_another_stream_wait_for_an_event) {
    tu_faulty f;
    cca_upstream *u = dx_create(&f, 128 * MiB);
    cca_allocator *a = make(m, u, NULL);
    cca_domain *Y = dom(a, "Y");
    cca_domain *doms[] = {Y};
    cr_assert_eq(cca_domain_reserve(a, Y, 4 * MiB), CCA_OK, "%s", cca_last_error());
    cca_domain_stats s0 = dst(a, Y);
    f.hold_events = true;
    blk p = mk(a, Y, 1 * MiB, S1, 1, true);
    uint64_t records = f.events_recorded;
    tu_free(a, p.p);
    cr_assert_gt(f.events_recorded, records, "an event on S1");
    cr_assert_eq(tu_stats(a).pending_blocks, 1);
    void *q = in(a, Y, 1 * MiB, S1);
    cr_assert_neq(q, (void *)p.p, "reused before its event completed");
    void *w = in(a, Y, 1 * MiB, NULL);
    cr_assert(w != (void *)p.p, "reused before its event completed");
    records = f.events_recorded;
    tu_free(a, w);
    cr_assert_eq(f.events_recorded, records + 1, "the default stream needs an event too");
    cr_assert_eq(dst(a, Y).upstream_allocs, s0.upstream_allocs, "all served from the arena");
    cr_assert_eq(dst(a, Y).reserved_bytes, s0.reserved_bytes);
    f.hold_events = false;
    f.events_done = f.events_recorded;
    tu_free(a, q);
    void *again = in(a, Y, 1 * MiB, S0);
    cr_assert_eq(again, (void *)p.p, "once the events completed, the lowest free block is p's");
    tu_free(a, again);
    agree(a, f.inner, doms, 1, "arena");
    dx_destroy(&f, a, u);
}

/* The OOM retry completes pending frees; a block it completes in the
 * requesting domain's arena serves the request, as a free arena block
 * always does ("from the arena first"), instead of the arena being
 * released as wholly free and a new segment reserved for the request. */
TEST_BOTH(the_retry_serves_from_the_arena_what_it_completed) {
    tu_faulty f;
    cca_upstream *u = dx_create(&f, 64 * MiB);
    cca_allocator *a = make(m, u, NULL);
    cca_domain *Y = dom(a, "Y");
    cca_domain *doms[] = {Y};
    cr_assert_eq(cca_domain_reserve(a, Y, 32 * MiB), CCA_OK, "%s", cca_last_error());
    cca_domain_stats s0 = dst(a, Y);
    f.hold_events = true;
    void *p = in(a, Y, 32 * MiB, S1); /* the whole arena, used on S1: its free waits for an event */
    tu_free(a, p);
    cr_assert_eq(tu_stats(a).pending_blocks, 1);
    void *r = tu_alloc(a, 28 * MiB, NULL); /* the default domain: the device is then nearly full */
    uint64_t retries = tu_stats(a).alloc_retries;
    void *q = in(a, Y, 16 * MiB, S1); /* no room on the device: the retry synchronizes, p completes */
    cr_assert_eq(tu_stats(a).alloc_retries, retries + 1, "the request went through the retry");
    cr_assert((uintptr_t)q >= (uintptr_t)p && (uintptr_t)q < (uintptr_t)p + 32 * MiB,
              "served at %p, outside the arena [%p, +32 MiB)", q, p);
    cca_domain_stats s1 = dst(a, Y);
    cr_assert_eq(s1.reserved_bytes, s0.reserved_bytes, "the arena was released and memory reserved instead");
    cr_assert_eq(s1.segments, s0.segments,
                 "segments %zu -> %zu (expandable: no growth range is reserved while the device cannot hold its "
                 "pages)",
                 s0.segments, s1.segments);
    f.hold_events = false;
    f.events_done = f.events_recorded;
    tu_free(a, q);
    void *whole = in(a, Y, 32 * MiB, NULL);
    cr_assert_eq(whole, p, "the arena is still there, whole");
    tu_free(a, whole);
    tu_free(a, r);
    agree(a, f.inner, doms, 1, "after the retry");
    dx_destroy(&f, a, u);
}

/* Expandable: an arena block whose pages were trimmed, on a device full of
 * cached pages elsewhere. The retry's release makes room; the request is
 * then served from the arena (its pages mapped again), as step 4 would,
 * not from a new range of the domain while the arena, unmapped by the same
 * release, stays empty. The device keeps each page apart (CCA_VM_PAGES), so
 * that the trim unmaps half the arena; over whole maps it would unmap the
 * arena's one map, and the arena, wholly free, would go with it. */
Test(domain, the_retry_maps_the_arena_again_after_its_release_expandable, .timeout = 60) {
    cca_upstream *u = tu_vm_device(64 * MiB, PG);
    cca_allocator *a = make(&EXPANDABLE, u, NULL);
    cca_domain *Y = dom(a, "Y");
    cca_domain *doms[] = {Y};
    cr_assert_eq(cca_domain_reserve(a, Y, 32 * MiB), CCA_OK, "%s", cca_last_error());
    void *base = in(a, Y, 32 * MiB, NULL);
    tu_free(a, base);
    cr_assert_eq(cca_trim(a, 16 * MiB, NULL), CCA_OK, "%s", cca_last_error()); /* half the arena unmapped */
    void *x = tu_alloc(a, 40 * MiB, NULL);
    void *c = tu_alloc(a, 8 * MiB, NULL);
    tu_free(a, c); /* the device is full: 16 of the arena, 40 live, 8 cached */
    cca_domain_stats s0 = dst(a, Y);
    uint64_t retries = tu_stats(a).alloc_retries;
    void *q = in(a, Y, 24 * MiB, NULL);
    cr_assert_eq(tu_stats(a).alloc_retries, retries + 1, "the request went through the retry");
    cr_assert((uintptr_t)q >= (uintptr_t)base && (uintptr_t)q < (uintptr_t)base + 32 * MiB,
              "served at %p, outside the arena [%p, +32 MiB)", q, base);
    cca_domain_stats s1 = dst(a, Y);
    cr_assert_eq(s1.segments, s0.segments,
                 "segments %zu -> %zu (no growth range is reserved while the device cannot hold its pages)",
                 s0.segments, s1.segments);
    tu_free(a, q);
    tu_free(a, x);
    agree(a, u, doms, 1, "after the retry");
    finish(a, u);
}

/* ---- faults during a domain release ------------------------------------------------- */

typedef struct frun {
    tu_fault_kind kind;
    uint64_t at; /* the at-th call of `kind` made by the release fails; 0: none */
    bool sticky, force;
    bool destroy;             /* cca_domain_destroy instead of cca_domain_release */
    uint64_t calls[TU_FAULT_KINDS]; /* baseline (at = 0): calls the release made */
} frun;

static const struct {
    size_t size;
    int stream;
} fplan[] = {{1000, 0},        {200 * KiB, 0},         {300 * KiB, 1},  {3 * MiB, 0},
             {5 * MiB + 7 * KiB, 1}, {12 * MiB, 0}, {11 * MiB, 1}, {700 * KiB, 0}};
enum { FN = sizeof fplan / sizeof fplan[0] };

static bool kept_live(int i) { /* with force: these stay live in A */
    return i == 0 || i == 5 || i == 6;
}

static bool freed_early(int i) { /* before the trim that makes holes */
    return i == 1 || i == 3;
}

static void release_under_fault(const mode *m, frun *run) {
    tu_faulty f;
    cca_upstream *u = dx_create(&f, 256 * MiB);
    cca_allocator *a = make(m, u, NULL);
    cca_domain *A = dom(a, "A"), *B = dom(a, "B");
    cca_domain *doms[] = {A, B};
    char what[160];
    snprintf(what, sizeof what, "%s: %s N=%llu%s%s%s", m->name, tu_fault_names[run->kind], (unsigned long long)run->at,
             run->sticky ? " sticky" : "", run->force ? " forced" : "", run->destroy ? " destroy" : "");
    blk ab[FN], bb[FN / 2];
    for (int i = 0; i < FN; i++) {
        ab[i] = mk(a, A, fplan[i].size, fplan[i].stream ? S1 : S0, 10 + i, false);
        if (i % 2)
            bb[i / 2] = mk(a, B, fplan[i].size, fplan[i].stream ? S1 : S0, 50 + i, false);
    }
    blk bd = mk(a, NULL, 100 * KiB, S0, 99, false);
    /* some of A's blocks go first and a trim releases what it can (classic:
     * nothing of A's; expandable: the free pages between live blocks), so
     * that A's segments have holes; then the rest */
    for (int i = 0; i < FN; i++)
        if (freed_early(i))
            tu_free(a, ab[i].p);
    cr_assert_eq(cca_trim(a, 0, NULL), CCA_OK, "%s", cca_last_error());
    for (int i = 0; i < FN; i++)
        if ((!run->force || !kept_live(i)) && !freed_early(i))
            tu_free(a, ab[i].p);
    agree(a, f.inner, doms, 2, what);
    cca_stats s0 = tu_stats(a);
    cca_domain_stats sA = dst(a, A), sB = dst(a, B), sD = dst(a, NULL);
    uint64_t before[TU_FAULT_KINDS];
    memcpy(before, f.calls, sizeof before);
    if (run->at) {
        f.fail_at[run->kind] = f.calls[run->kind] + run->at;
        f.sticky[run->kind] = run->sticky;
    }
    unsigned flags = run->force ? CCA_DOMAIN_FORCE : 0;
    cca_domain_report r;
    memset(&r, 0xcd, sizeof r);
    r.leaks = NULL, r.leaks_cap = 0;
    cca_status st = run->destroy ? cca_domain_destroy(a, A, flags, &r) : cca_domain_release(a, A, flags, &r);
    bool gone = run->destroy && st == CCA_OK;
    if (!run->at)
        for (int k = 0; k < TU_FAULT_KINDS; k++)
            run->calls[k] = f.calls[k] - before[k];
    bool fired = f.failures > 0;
    cr_assert_eq(fired, run->at && run->at <= run->calls[run->kind], "%s: the fault %s", what,
                 fired ? "fired past the release's calls" : "never fired");
    if (fired && run->kind == TU_FAULT_SYNC) {
        cr_assert_eq(st, CCA_ERR_UPSTREAM, "%s: %s", what, cca_status_string(st));
        tu_assert_intact(a, &s0, what);
        dstats_unchanged(a, A, &sA, what);
    } else if (gone) { /* destroyed: everything went back */
        cr_assert(!fired, "%s: destroyed although the device refused something", what);
        cr_assert_eq(r.bytes_still_reserved, 0, "%s", what);
        cr_assert_eq(r.bytes_released, sA.reserved_bytes, "%s", what);
        cr_assert_eq(r.segments_released, sA.segments, "%s", what);
    } else {
        cr_assert_eq(st, fired ? CCA_ERR_UPSTREAM : CCA_OK, "%s: %s / %s", what, cca_status_string(st),
                     cca_last_error());
        cca_domain_stats nA = dst(a, A); /* destroy refused: the domain stays */
        cr_assert_eq(r.segments_released, sA.segments - nA.segments, "%s: report says %zu segments released", what,
                     r.segments_released);
        if (fired && !run->sticky) /* one refusal: the rest is released */
            cr_assert_eq(nA.segments, 1, "%s: %zu segments left after one refused call", what, nA.segments);
        cr_assert_eq(r.bytes_still_reserved, nA.reserved_bytes, "%s", what);
        cr_assert_eq(r.bytes_released, sA.reserved_bytes - nA.reserved_bytes, "%s: report %zu, released %zu", what,
                     r.bytes_released, sA.reserved_bytes - nA.reserved_bytes);
        cr_assert_eq(r.live_blocks, run->force ? 3 : 0, "%s", what);
        cr_assert_eq(nA.allocated_bytes, 0, "%s: forced blocks are gone even from kept segments", what);
        cr_assert_eq(nA.active_blocks, 0, "%s", what);
        if (fired) { /* a refused free or unmap keeps memory; a refused range release keeps address space */
            cr_assert_gt(nA.segments, 0, "%s: what the device refused stays in A", what);
            if (run->kind != TU_FAULT_RELEASE)
                cr_assert_gt(nA.reserved_bytes, 0, "%s: what the device refused stays in A", what);
        } else {
            cr_assert_eq(nA.reserved_bytes, 0, "%s", what);
            cr_assert_eq(nA.segments, 0, "%s", what);
        }
    }
    retired ret = {0};
    if (gone) {
        ret.alloc_calls = sA.alloc_calls, ret.upstream_allocs = sA.upstream_allocs;
        ret.upstream_frees = sA.upstream_frees + (tu_stats(a).upstream_frees - s0.upstream_frees);
    }
    agree_r(a, f.inner, gone ? doms + 1 : doms, gone ? 1 : 2, &ret, what);
    if (gone) {
        tu_faulty_faults_off(&f);
        cr_assert_eq(tu_upstream_stats(f.inner).bytes_in_use, sB.reserved_bytes + sD.reserved_bytes, "%s", what);
        for (int i = 0; i < FN / 2; i++)
            tu_free(a, bb[i].p);
        tu_free(a, bd.p);
        dx_destroy(&f, a, u);
        return;
    }
    dstats_unchanged(a, B, &sB, what);
    dstats_unchanged(a, NULL, &sD, what);
    for (int i = 0; i < FN / 2; i++)
        ASSERT_INTACT(bb[i], false, what);
    ASSERT_INTACT(bd, false, what);
    if (fired && run->kind != TU_FAULT_SYNC) { /* the kept memory is cached and indexed: it serves A */
        void *q = in(a, A, 1000, S0);
        tu_free(a, q);
        agree(a, f.inner, doms, 2, what);
    }
    /* faults off: a second release returns everything */
    tu_faulty_faults_off(&f);
    memset(&r, 0xcd, sizeof r);
    r.leaks = NULL, r.leaks_cap = 0;
    st = run->destroy ? cca_domain_destroy(a, A, flags, &r) : cca_domain_release(a, A, flags, &r);
    cr_assert_eq(st, CCA_OK, "%s: second release: %s", what, cca_last_error());
    if (run->destroy) { /* gone now */
        cr_assert_eq(r.bytes_still_reserved, 0, "%s", what);
        cr_assert_eq(tu_upstream_stats(f.inner).bytes_in_use, sB.reserved_bytes + sD.reserved_bytes, "%s", what);
        cr_assert_eq(tu_stats(a).reserved_bytes, sB.reserved_bytes + sD.reserved_bytes, "%s", what);
        tu_check(a);
        for (int i = 0; i < FN / 2; i++)
            tu_free(a, bb[i].p);
        tu_free(a, bd.p);
        dx_destroy(&f, a, u);
        return;
    }
    cr_assert_eq(r.bytes_still_reserved, 0, "%s", what);
    cca_domain_stats nA = dst(a, A);
    cr_assert_eq(nA.reserved_bytes, 0, "%s: %zu bytes left in A", what, nA.reserved_bytes);
    cr_assert_eq(nA.segments, 0, "%s", what);
    agree(a, f.inner, doms, 2, what);
    cr_assert_eq(tu_upstream_stats(f.inner).bytes_in_use, sB.reserved_bytes + sD.reserved_bytes, "%s", what);
    for (int i = 0; i < FN / 2; i++) {
        ASSERT_INTACT(bb[i], false, what);
        tu_free(a, bb[i].p);
    }
    tu_free(a, bd.p);
    dx_destroy(&f, a, u);
}

static void fault_sweep(const mode *m, bool force, bool destroy) {
    frun base = {.kind = TU_FAULT_SYNC, .force = force, .destroy = destroy};
    release_under_fault(m, &base);
    if (!destroy)
        fprintf(stderr, "%s%s: a release makes %llu frees, %llu unmaps, %llu range releases\n", m->name,
                force ? " (forced)" : "", (unsigned long long)base.calls[TU_FAULT_FREE],
                (unsigned long long)base.calls[TU_FAULT_UNMAP], (unsigned long long)base.calls[TU_FAULT_RELEASE]);
    cr_assert_eq(base.calls[TU_FAULT_SYNC], 1, "one synchronize");
    if (m->expandable) {
        cr_assert_geq(base.calls[TU_FAULT_UNMAP], 3, "%llu unmaps", (unsigned long long)base.calls[TU_FAULT_UNMAP]);
        cr_assert_geq(base.calls[TU_FAULT_RELEASE], 3, "%llu range releases",
                      (unsigned long long)base.calls[TU_FAULT_RELEASE]);
        cr_assert_eq(base.calls[TU_FAULT_FREE], 0);
    } else {
        cr_assert_geq(base.calls[TU_FAULT_FREE], 4, "%llu frees", (unsigned long long)base.calls[TU_FAULT_FREE]);
    }
    const tu_fault_kind kinds[] = {TU_FAULT_FREE, TU_FAULT_UNMAP, TU_FAULT_RELEASE, TU_FAULT_SYNC};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        if (base.calls[kinds[k]] == 0)
            continue;
        for (uint64_t at = 1; at <= base.calls[kinds[k]] + 1; at++)
            for (int sticky = 0; sticky < 2; sticky++) {
                frun run = {.kind = kinds[k], .at = at, .sticky = sticky, .force = force, .destroy = destroy};
                memcpy(run.calls, base.calls, sizeof run.calls);
                release_under_fault(m, &run);
            }
    }
}

TEST_BOTH(every_upstream_call_of_a_release_fails_once_and_for_good) {
    fault_sweep(m, false, false);
}

TEST_BOTH(every_upstream_call_of_a_forced_release_fails_once_and_for_good) {
    fault_sweep(m, true, false);
}

/* cca_domain_destroy under the same faults: the handle goes only when
 * everything went back; otherwise the domain stays, usable, with what the
 * device refused, and the status is the release's. */
TEST_BOTH(every_upstream_call_of_a_destroy_fails_once_and_for_good) {
    fault_sweep(m, true, true);
}
