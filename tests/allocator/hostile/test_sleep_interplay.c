/*
 * test_sleep_interplay.c — allocator/src/sleep.c against the rest of the
 * allocator: what the other calls do while a domain sleeps, each a case
 * the random programs of test_sleep_hostile.c do not reach.
 *
 *   report     cca_trim / cca_empty_cache's release report while a domain
 *              sleeps with live blocks: its figures are the device's
 *              (free_bytes_pinned no more than what stays reserved).
 *   hold_peak  a sleeping domain's live bytes are on the host: another
 *              domain's request is held at the peak exactly as when no
 *              domain sleeps (the cache goes back before the peak rises).
 *   stats      a sleeping domain whose unmap was refused (a free run left
 *              mapped) reports no cached byte and no free block.
 *   snapshot   the torch snapshot after a refused unmap over whole maps
 *              left half of a live block mapped: no segment holds more
 *              allocated, active or requested bytes than its size, no
 *              block more requested.
 *   arenas     a footprint arena woken maps what it serves; one freed
 *              while asleep goes with empty-cache and can be reserved
 *              again; greedy's arena freed while asleep, emptied, woken.
 *   pending    a block freed while asleep with its events held: a release
 *              refused leaves the domain asleep, the wake maps its pages;
 *              a pending block at sleep refuses it with no stat changed.
 *   refusals   a wake refused by max_reserved changes no stat, and goes
 *              ahead once empty-cache made room.
 *   queries    the writers, cca_block_size and cca_domain_of while asleep.
 *   fork       a child wakes its copy of a sleeping domain, then the parent
 *              wakes its own: both find the bytes.
 *   all        cca_sleep then cca_wake over three domains with one call of
 *              each kind failing in turn (pages and whole maps): all or
 *              nothing each (cca_wake: those before the refusal awake),
 *              every byte intact, no host byte left, the device empty.
 *   discard    an upstream without the copy ops: a domain slept with
 *              DISCARD sleeps again without it as the no-op ccalloc.h says;
 *              cca_sleep without it refuses an awake domain, not them.
 *   wake       a wake refused at a map whose unmap of what it mapped is
 *              refused too: asleep, the host copy intact, the pages left
 *              mapped counted, and the next sleep gives them back.
 *
 * Every test can fail: each names what it expected.
 */
#include <criterion/criterion.h>

#include "alloc_test_util.h"
#include "pickle_read.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- report ------------------------------------------------------------------------------ */

Test(sleep_interplay, release_report_while_asleep_counts_the_device) {
    cca_upstream *u = tu_vm_device(256 * MiB, 0);
    cca_allocator *a = tu_allocator(u, NULL);
    cca_domain *A;
    cr_assert_eq(cca_domain_create(a, "A", &A), CCA_OK);
    void *p = tu_alloc(a, 1 * MiB, NULL), *q = NULL;
    cr_assert_eq(cca_alloc_in(a, A, 30 * MiB, NULL, &q), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_domain_sleep(a, A, 0, NULL), CCA_OK, "%s", cca_last_error());
    tu_check(a);
    cca_release_report r;
    cr_assert_eq(cca_trim(a, 0, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_leq(r.free_bytes_pinned, r.bytes_still_reserved,
                  "free bytes pinned %zu, but only %zu bytes stay reserved", r.free_bytes_pinned,
                  r.bytes_still_reserved);
    cr_assert_eq(cca_empty_cache(a, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_leq(r.free_bytes_pinned, r.bytes_still_reserved,
                  "free bytes pinned %zu, but only %zu bytes stay reserved", r.free_bytes_pinned,
                  r.bytes_still_reserved);
    cr_assert_eq(r.asleep_domains, 1);
    cr_assert_eq(cca_domain_wake(a, A, NULL), CCA_OK, "%s", cca_last_error());
    tu_free(a, q);
    tu_free(a, p);
    tu_teardown(a, u);
}

/* ---- hold_peak --------------------------------------------------------------------------- */

/* B: two 64 MiB blocks, the first freed (cached, mapped), then 96 MiB that
 * the cache cannot serve. Held at the peak, the cached 64 MiB go back
 * first: B ends with 64 + 96 MiB reserved, not 64 + 64 + 96. Returns B's
 * reserved bytes afterwards. */
static size_t hold_run(bool sleep_a) {
    cca_upstream *u = tu_vm_device(1024 * MiB, 0);
    cca_allocator *a = tu_allocator(u, "hold_peak:1,expandable_ahead:0");
    cca_domain *A, *B;
    cr_assert_eq(cca_domain_create(a, "A", &A), CCA_OK);
    cr_assert_eq(cca_domain_create(a, "B", &B), CCA_OK);
    void *pa = NULL, *x = NULL, *y = NULL, *z = NULL;
    cr_assert_eq(cca_alloc_in(a, A, 200 * MiB, NULL, &pa), CCA_OK, "%s", cca_last_error());
    if (sleep_a)
        cr_assert_eq(cca_domain_sleep(a, A, 0, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_alloc_in(a, B, 64 * MiB, NULL, &x), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_alloc_in(a, B, 64 * MiB, NULL, &y), CCA_OK, "%s", cca_last_error());
    tu_free(a, x);
    cca_reset_peak_stats(a);
    cr_assert_eq(cca_alloc_in(a, B, 96 * MiB, NULL, &z), CCA_OK, "%s", cca_last_error());
    tu_check(a);
    cca_domain_stats s;
    cr_assert_eq(cca_get_domain_stats(a, B, &s), CCA_OK);
    tu_free(a, z);
    tu_free(a, y);
    if (sleep_a)
        cr_assert_eq(cca_domain_wake(a, A, NULL), CCA_OK, "%s", cca_last_error());
    tu_free(a, pa);
    tu_teardown(a, u);
    return s.reserved_bytes;
}

Test(sleep_interplay, hold_peak_holds_beside_a_sleeping_domain) {
    size_t awake = hold_run(false), asleep = hold_run(true);
    cr_assert_eq(awake, 160 * MiB, "awake: B holds %zu MiB (the cache went back first)", awake / MiB);
    cr_assert_eq(asleep, awake, "A asleep: B holds %zu MiB, %zu MiB with A awake (the cache kept)", asleep / MiB,
                 awake / MiB);
}

/* ---- probes ------------------------------------------------------------------------------ */

Test(sleep_interplay, footprint_arena_after_a_wake_maps_what_it_serves) {
    cca_upstream *u = tu_vm_device(512 * MiB, 0);
    cca_allocator *a = tu_allocator(u, NULL);
    cca_domain *A;
    cr_assert_eq(cca_domain_create(a, "A", &A), CCA_OK);
    cr_assert_eq(cca_domain_reserve(a, A, 64 * MiB), CCA_OK, "%s", cca_last_error());
    void *p = NULL, *q = NULL;
    cr_assert_eq(cca_alloc_in(a, A, 8 * MiB, NULL, &p), CCA_OK, "%s", cca_last_error());
    tu_fill(p, 8 * MiB, 1);
    cr_assert_eq(cca_domain_sleep(a, A, 0, NULL), CCA_OK, "%s", cca_last_error());
    tu_check(a);
    cr_assert_eq(cca_domain_wake(a, A, NULL), CCA_OK, "%s", cca_last_error());
    tu_check(a);
    cr_assert_eq(cca_alloc_in(a, A, 16 * MiB, NULL, &q), CCA_OK, "%s", cca_last_error());
    tu_check(a);
    TU_ASSERT_READABLE(q);
    TU_ASSERT_READABLE((char *)q + 16 * MiB - 1);
    tu_fill(q, 16 * MiB, 2);
    cr_assert(tu_check_fill(p, 8 * MiB, 1));
    tu_free(a, q);
    tu_free(a, p);
    tu_teardown(a, u);
}

Test(sleep_interplay, greedy_arena_freed_while_asleep_then_emptied) {
    cca_upstream *u = tu_vm_device(256 * MiB, 0);
    cca_allocator *a = tu_allocator(u, "policy:greedy,greedy_bytes:96M");
    void *p = tu_alloc(a, 10 * MiB, NULL);
    cr_assert_eq(cca_sleep(a, 0, NULL), CCA_OK, "%s", cca_last_error());
    tu_free(a, p);
    tu_check(a);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s", cca_last_error());
    tu_check(a);
    cr_assert_eq(cca_wake(a, NULL), CCA_OK, "%s", cca_last_error());
    tu_check(a);
    void *q = NULL;
    cr_assert_eq(cca_alloc(a, 20 * MiB, NULL, &q), CCA_OK, "%s", cca_last_error());
    tu_fill(q, 20 * MiB, 3);
    tu_free(a, q);
    tu_check(a);
    tu_teardown(a, u);
}

Test(sleep_interplay, pending_freed_while_asleep_then_wake) {
    tu_faulty f;
    cca_upstream *inner = tu_vm_device(256 * MiB, 0);
    cca_upstream *u = tu_faulty_create_streams(&f, inner, "fx", true);
    cca_allocator *a = tu_allocator(u, NULL);
    cca_domain *A;
    cr_assert_eq(cca_domain_create(a, "A", &A), CCA_OK);
    void *p = NULL, *q = NULL, *r = NULL;
    cr_assert_eq(cca_alloc_in(a, A, 3 * MiB, NULL, &p), CCA_OK);
    cr_assert_eq(cca_alloc_in(a, A, 5 * MiB + 512, NULL, &q), CCA_OK);
    cr_assert_eq(cca_alloc_in(a, A, 700, NULL, &r), CCA_OK);
    tu_fill(q, 5 * MiB + 512, 4);
    cr_assert_eq(cca_domain_sleep(a, A, 0, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_record_stream(a, p, (cca_stream)0x55), CCA_OK, "%s", cca_last_error());
    f.hold_events = true;
    f.sync_keeps_events = true;
    tu_free(a, p);
    tu_free(a, r);
    tu_check(a);
    cr_assert_eq(tu_stats(a).pending_blocks, 1);
    (void)cca_trim(a, 0, NULL); /* the pending block's events are held: reported, it stays */
    tu_check(a);
    cca_domain_report dr = {0};
    cr_assert_eq(cca_domain_release(a, A, CCA_DOMAIN_FORCE, &dr), CCA_ERR_LIVE_BLOCKS);
    tu_check(a);
    cr_assert_eq(tu_stats(a).asleep_domains, 1, "a refused release leaves it asleep");
    cr_assert_eq(cca_domain_wake(a, A, NULL), CCA_OK, "%s", cca_last_error());
    tu_check(a);
    cr_assert(tu_check_fill(q, 5 * MiB + 512, 4));
    f.hold_events = false;
    f.sync_keeps_events = false;
    f.events_done = f.events_recorded;
    cr_assert_eq(cca_trim(a, 0, NULL), CCA_OK, "%s", cca_last_error());
    tu_check(a);
    cr_assert_eq(tu_stats(a).pending_blocks, 0);
    tu_free(a, q);
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    cca_upstream_destroy(u);
    cca_upstream_stats us = tu_upstream_stats(inner);
    cr_assert_eq(us.bytes_in_use + us.vm_reserved_bytes + us.host_bytes_in_use, 0);
    cca_upstream_destroy(inner);
}

Test(sleep_interplay, refused_calls_change_no_stat) {
    cca_upstream *u = tu_vm_device(256 * MiB, 0);
    cca_allocator *a = tu_allocator(u, "max_reserved:64M");
    cca_domain *A, *B;
    cr_assert_eq(cca_domain_create(a, "A", &A), CCA_OK);
    cr_assert_eq(cca_domain_create(a, "B", &B), CCA_OK);
    void *p = NULL, *q = NULL;
    cr_assert_eq(cca_alloc_in(a, A, 40 * MiB, NULL, &p), CCA_OK, "%s", cca_last_error());
    tu_fill(p, 40 * MiB, 8);
    cr_assert_eq(cca_domain_sleep(a, A, 0, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_alloc_in(a, B, 40 * MiB, NULL, &q), CCA_OK, "%s", cca_last_error());
    /* B's block live: releasing its cache cannot make room under the cap, so nothing is released */
    cca_stats before = tu_stats(a);
    cr_assert_eq(cca_domain_wake(a, A, NULL), CCA_ERR_OUT_OF_MEMORY);
    tu_check(a);
    cca_stats after = tu_stats(a);
    tu_assert_stats_equal(&before, &after, "a wake refused by max_reserved");
    cr_assert_eq(cca_wake(a, NULL), CCA_ERR_OUT_OF_MEMORY);
    after = tu_stats(a);
    tu_assert_stats_equal(&before, &after, "cca_wake refused by max_reserved");
    tu_free(a, q); /* cached now: the wake releases it, as an allocation's OOM retry would */
    cr_assert_eq(cca_domain_wake(a, A, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert(tu_check_fill(p, 40 * MiB, 8));
    tu_free(a, p);
    tu_teardown(a, u);
}

Test(sleep_interplay, writers_while_asleep) {
    cca_upstream *u = tu_vm_device(256 * MiB, 0);
    cca_allocator *a = tu_allocator(u, "history:64");
    cca_domain *A;
    cr_assert_eq(cca_domain_create(a, "A", &A), CCA_OK);
    void *p = NULL;
    cr_assert_eq(cca_alloc_in(a, A, 3 * MiB, NULL, &p), CCA_OK, "%s", cca_last_error());
    void *z = tu_alloc(a, 1 * MiB, NULL);
    cr_assert_eq(cca_domain_sleep(a, A, 0, NULL), CCA_OK, "%s", cca_last_error());
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_eq(cca_write_snapshot_torch(a, 0, f), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_write_snapshot_json(a, f), CCA_OK, "%s", cca_last_error());
    fclose(f);
    free(buf);
    cr_assert_eq(tu_block_size(a, p), 3 * MiB);
    cca_domain *o = NULL;
    cr_assert_eq(cca_domain_of(a, p, &o), CCA_OK);
    cr_assert_eq(o, A);
    cr_assert_eq(cca_domain_wake(a, A, NULL), CCA_OK, "%s", cca_last_error());
    tu_free(a, p);
    tu_free(a, z);
    tu_teardown(a, u);
}

Test(sleep_interplay, arena_freed_while_asleep_goes_with_empty_cache) {
    cca_upstream *u = tu_vm_device(512 * MiB, 0);
    cca_allocator *a = tu_allocator(u, NULL);
    cca_domain *A;
    cr_assert_eq(cca_domain_create(a, "A", &A), CCA_OK);
    cr_assert_eq(cca_domain_reserve(a, A, 64 * MiB), CCA_OK, "%s", cca_last_error());
    void *p = NULL, *q = NULL;
    cr_assert_eq(cca_alloc_in(a, A, 8 * MiB, NULL, &p), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_domain_sleep(a, A, 0, NULL), CCA_OK, "%s", cca_last_error());
    tu_free(a, p);
    tu_check(a);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s", cca_last_error());
    tu_check(a);
    cr_assert_eq(cca_domain_wake(a, A, NULL), CCA_OK, "%s", cca_last_error());
    tu_check(a);
    cr_assert_eq(cca_alloc_in(a, A, 16 * MiB, NULL, &q), CCA_OK, "%s", cca_last_error());
    tu_fill(q, 16 * MiB, 2);
    tu_free(a, q);
    cr_assert_eq(cca_domain_reserve(a, A, 32 * MiB), CCA_OK, "%s", cca_last_error());
    tu_check(a);
    tu_teardown(a, u);
}

Test(sleep_interplay, not_ready_sleep_changes_nothing) {
    tu_faulty f;
    cca_upstream *inner = tu_vm_device(256 * MiB, 0);
    cca_upstream *u = tu_faulty_create_streams(&f, inner, "fx", true);
    cca_allocator *a = tu_allocator(u, NULL);
    cca_domain *A;
    cr_assert_eq(cca_domain_create(a, "A", &A), CCA_OK);
    void *p = NULL, *q = NULL;
    cr_assert_eq(cca_alloc_in(a, A, 3 * MiB, NULL, &p), CCA_OK);
    cr_assert_eq(cca_alloc_in(a, A, 5 * MiB, NULL, &q), CCA_OK);
    cr_assert_eq(cca_record_stream(a, p, (cca_stream)0x55), CCA_OK, "%s", cca_last_error());
    f.hold_events = true;
    f.sync_keeps_events = true;
    tu_free(a, p);
    cca_stats before = tu_stats(a);
    cca_sleep_report r;
    cr_assert_eq(cca_domain_sleep(a, A, 0, &r), CCA_ERR_NOT_READY);
    tu_check(a);
    cca_stats after = tu_stats(a);
    tu_assert_stats_equal(&before, &after, "a sleep refused for a pending block");
    cr_assert_eq(cca_sleep(a, 0, &r), CCA_ERR_NOT_READY);
    after = tu_stats(a);
    tu_assert_stats_equal(&before, &after, "cca_sleep refused for a pending block");
    cr_assert_eq(tu_upstream_stats(inner).host_bytes_in_use, 0);
    f.hold_events = false;
    f.sync_keeps_events = false;
    f.events_done = f.events_recorded;
    cr_assert_eq(cca_domain_sleep(a, A, 0, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_domain_wake(a, A, &r), CCA_OK, "%s", cca_last_error());
    tu_free(a, q);
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    cca_upstream_destroy(u);
    cca_upstream_destroy(inner);
}

static int child_wakes(cca_allocator *a, cca_domain *A, void *p) {
    if (cca_domain_wake(a, A, NULL) != CCA_OK)
        return 1;
    if (!tu_check_fill(p, 6 * MiB, 5))
        return 2;
    if (cca_check_invariants(a) != CCA_OK)
        return 3;
    if (cca_free(a, p) != CCA_OK)
        return 4;
    if (cca_empty_cache(a, NULL) != CCA_OK)
        return 5;
    return 0;
}

Test(sleep_interplay, fork_while_asleep_each_side_wakes) {
    cca_upstream *u = tu_vm_device(256 * MiB, 0);
    cca_allocator *a = tu_allocator(u, NULL);
    cca_domain *A;
    cr_assert_eq(cca_domain_create(a, "A", &A), CCA_OK);
    void *p = NULL;
    cr_assert_eq(cca_alloc_in(a, A, 6 * MiB, NULL, &p), CCA_OK);
    tu_fill(p, 6 * MiB, 5);
    cr_assert_eq(cca_domain_sleep(a, A, 0, NULL), CCA_OK, "%s", cca_last_error());
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        alarm(10);
        _exit(child_wakes(a, A, p));
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: status %d", status);
    cr_assert_eq(cca_domain_wake(a, A, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert(tu_check_fill(p, 6 * MiB, 5));
    tu_free(a, p);
    tu_teardown(a, u);
}

Test(sleep_interplay, refused_unmap_leaves_no_cached_bytes) {
    tu_faulty f;
    cca_upstream *inner = tu_vm_device(256 * MiB, 0);
    cca_upstream *u = tu_faulty_create(&f, inner, "fx", true);
    cca_allocator *a = tu_allocator(u, "expandable_ahead:0");
    cca_domain *A;
    cr_assert_eq(cca_domain_create(a, "A", &A), CCA_OK);
    void *p = NULL, *q = NULL;
    cr_assert_eq(cca_alloc_in(a, A, 1 * MiB, NULL, &p), CCA_OK);
    cr_assert_eq(cca_alloc_in(a, A, 60 * MiB, NULL, &q), CCA_OK);
    tu_free(a, q);
    f.fail_at[TU_FAULT_UNMAP] = f.calls[TU_FAULT_UNMAP] + 1;
    f.sticky[TU_FAULT_UNMAP] = true;
    cr_assert_eq(cca_domain_sleep(a, A, 0, NULL), CCA_ERR_UPSTREAM);
    tu_faulty_faults_off(&f);
    tu_check(a);
    cca_domain_stats s;
    cr_assert_eq(cca_get_domain_stats(a, A, &s), CCA_OK);
    cr_assert_eq(s.asleep, 1);
    cr_assert_gt(s.reserved_bytes, 0);
    cr_assert_eq(s.cached_bytes, 0, "asleep: cached %zu of %zu reserved", s.cached_bytes, s.reserved_bytes);
    cr_assert_eq(s.largest_free_block, 0, "asleep: a free block of %zu bytes to serve", s.largest_free_block);
    cr_assert_eq(s.fragmentation, 0.0);
    cca_stats g = tu_stats(a); /* the allocator's figures leave them out as well: A is the only domain with bytes */
    cr_assert_eq(g.reserved_bytes, s.reserved_bytes);
    cr_assert_eq(g.cached_bytes, 0, "asleep: the allocator counts %zu cached", g.cached_bytes);
    cr_assert_eq(g.largest_free_block, 0, "asleep: the allocator's largest free block %zu", g.largest_free_block);
    cr_assert_eq(g.fragmentation, 0.0);
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    cr_assert_eq(cca_write_snapshot_torch(a, 0, fp), CCA_OK, "%s", cca_last_error());
    fclose(fp);
    free(buf);
    cr_assert_eq(cca_domain_sleep(a, A, 0, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_domain_wake(a, A, NULL), CCA_OK, "%s", cca_last_error());
    tu_free(a, p);
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    cca_upstream_destroy(u);
    cca_upstream_destroy(inner);
}

/* Whole maps: a 200 MiB block lies over two maps; the sleep's unmap of the
 * lower one refused: the torch snapshot's segment (that map) holds no more
 * allocated, active or requested bytes than its size. */
Test(sleep_interplay, torch_snapshot_after_a_refused_unmap_over_whole_maps) {
    tu_faulty f;
    cca_upstream *inner = tu_vm_device_backed(512 * MiB, 0, CCA_VM_WHOLE_MAPS);
    cca_upstream *u = tu_faulty_create(&f, inner, "fx", true);
    cca_allocator *a = tu_allocator(u, "expandable_ahead:0");
    cca_domain *A;
    cr_assert_eq(cca_domain_create(a, "A", &A), CCA_OK);
    void *p = NULL;
    cr_assert_eq(cca_alloc_in(a, A, 200 * MiB, NULL, &p), CCA_OK);
    cr_assert_eq(tu_stats(a).vm_maps, 2, "two maps");
    f.fail_at[TU_FAULT_UNMAP] = f.calls[TU_FAULT_UNMAP] + 2;
    cr_assert_eq(cca_domain_sleep(a, A, 0, NULL), CCA_ERR_UPSTREAM);
    tu_faulty_faults_off(&f);
    tu_check(a);
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    cr_assert_eq(cca_write_snapshot_torch(a, 0, fp), CCA_OK, "%s", cca_last_error());
    fclose(fp);
    char why[256];
    pr_value *v = pr_read((const unsigned char *)buf, len, why, sizeof why);
    cr_assert_not_null(v, "%s", why);
    const pr_value *segs = pr_get(v, "segments");
    cr_assert_not_null(segs);
    for (size_t i = 0; i < segs->count; i++) {
        const pr_value *s = segs->items[i];
        __int128 total = pr_get(s, "total_size")->i, alloc = pr_get(s, "allocated_size")->i;
        cr_assert_leq(alloc, total, "segment %zu: allocated %lld of total %lld", i, (long long)alloc,
                      (long long)total);
        const pr_value *blocks = pr_get(s, "blocks");
        __int128 sum = 0;
        for (size_t k = 0; k < blocks->count; k++) {
            __int128 size = pr_get(blocks->items[k], "size")->i, req = pr_get(blocks->items[k], "requested_size")->i;
            cr_assert_leq(req, size, "segment %zu block %zu: requested %lld of %lld", i, k, (long long)req,
                          (long long)size);
            sum += size;
        }
        cr_assert_eq(sum, total, "segment %zu: blocks sum to %lld of %lld", i, (long long)sum, (long long)total);
    }
    /* exactly: the one map kept (the growth rule's first, 128 MiB) is one
     * segment whose one block is the part of the 200 MiB block in it, all
     * of it allocated, active and requested */
    cr_assert_eq(segs->count, 1, "%zu segments", segs->count);
    const pr_value *s0 = segs->items[0], *b0 = pr_get(s0, "blocks")->items[0];
    const char *keys[] = {"total_size", "allocated_size", "active_size", "requested_size"};
    for (int k = 0; k < 4; k++)
        cr_assert(pr_get(s0, keys[k])->i == 128 * MiB, "%s %lld, expected 128 MiB", keys[k],
                  (long long)pr_get(s0, keys[k])->i);
    cr_assert(pr_get(b0, "size")->i == 128 * MiB && pr_get(b0, "requested_size")->i == 128 * MiB,
              "the block: %lld bytes, %lld requested", (long long)pr_get(b0, "size")->i,
              (long long)pr_get(b0, "requested_size")->i);
    pr_free(v);
    free(buf);
    cr_assert_eq(cca_domain_sleep(a, A, 0, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_domain_wake(a, A, NULL), CCA_OK, "%s", cca_last_error());
    tu_free(a, p);
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    cca_upstream_destroy(u);
    cca_upstream_destroy(inner);
}

/* ---- cca_sleep, a fault at every call ------------------------------------------------------ */

typedef struct three {
    tu_faulty f;
    cca_upstream *inner, *u;
    cca_allocator *a;
    cca_domain *d[3]; /* d[0] NULL: the default domain */
    void *p[3][4];
} three;

static const size_t THREE_SIZES[4] = {700, 3 * MiB, 17 * MiB, 5 * MiB + 512};

static void three_make(three *t, int backing) {
    t->inner = tu_vm_device_backed(256 * MiB, 0, backing);
    t->u = tu_faulty_create_streams(&t->f, t->inner, "fx", true);
    t->a = tu_allocator(t->u, NULL);
    t->d[0] = NULL;
    cr_assert_eq(cca_domain_create(t->a, "A", &t->d[1]), CCA_OK);
    cr_assert_eq(cca_domain_create(t->a, "B", &t->d[2]), CCA_OK);
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 4; k++) {
            cr_assert_eq(cca_alloc_in(t->a, t->d[i], THREE_SIZES[k], (cca_stream)(uintptr_t)k, &t->p[i][k]), CCA_OK,
                         "%s", cca_last_error());
            tu_fill(t->p[i][k], THREE_SIZES[k], (uint64_t)(10 * i + k));
        }
    tu_free(t->a, t->p[1][1]); /* free space in A */
    t->p[1][1] = NULL;
}

static int three_asleep(three *t) {
    int n = 0;
    for (int i = 0; i < 3; i++) {
        cca_domain_stats s;
        cr_assert_eq(cca_get_domain_stats(t->a, t->d[i], &s), CCA_OK);
        n += s.asleep;
    }
    return n;
}

static void three_end(three *t, const char *when) {
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 4; k++)
            if (t->p[i][k]) {
                cr_assert(tu_check_fill(t->p[i][k], THREE_SIZES[k], (uint64_t)(10 * i + k)), "%s: domain %d block %d",
                          when, i, k);
                tu_free(t->a, t->p[i][k]);
            }
    tu_check(t->a);
    cr_assert_eq(cca_empty_cache(t->a, NULL), CCA_OK, "%s: %s", when, cca_last_error());
    cr_assert_eq(cca_destroy(t->a), CCA_OK, "%s: %s", when, cca_last_error());
    cca_upstream_destroy(t->u);
    cca_upstream_stats us = tu_upstream_stats(t->inner);
    cr_assert_eq(us.bytes_in_use + us.vm_reserved_bytes, 0, "%s: the device holds something", when);
    cca_upstream_destroy(t->inner);
}

/* One cca_sleep with call k of `kind` failing (0: none); then cca_wake with
 * call k of `wkind` failing. All or nothing each: after cca_sleep every
 * domain asleep (CCA_OK, or CCA_ERR_UPSTREAM for a refused unmap) or none
 * (unless the message says one could not be woken again); after a refused
 * cca_wake, the domains before the one named awake, the rest asleep. */
static void sleep_all_run(int backing, tu_fault_kind kind, uint64_t k, tu_fault_kind wkind, uint64_t kw, uint64_t *ns,
                          uint64_t *nw) {
    three t;
    three_make(&t, backing);
    char when[128];
    snprintf(when, sizeof when, "%s: cca_sleep, %s call %llu failing; cca_wake, %s call %llu",
             backing == CCA_VM_PAGES ? "pages" : "whole maps", tu_fault_names[kind], (unsigned long long)k,
             tu_fault_names[wkind], (unsigned long long)kw);
    uint64_t c0 = t.f.calls[kind];
    t.f.fail_at[kind] = k ? c0 + k : 0;
    cca_stats before = tu_stats(t.a);
    cca_sleep_report r;
    cca_status st = cca_sleep(t.a, 0, &r);
    *ns = t.f.calls[kind] - c0;
    tu_faulty_faults_off(&t.f);
    tu_check(t.a);
    int n = three_asleep(&t);
    if (st == CCA_OK) {
        cr_assert_eq(n, 3, "%s: %d asleep", when, n);
    } else if (n == 3) {
        cr_assert_eq(st, CCA_ERR_UPSTREAM, "%s: %s", when, cca_last_error());
        cr_assert(strstr(cca_last_error(), "unmap"), "%s: %s", when, cca_last_error());
    } else if (n > 0) {
        cr_assert(strstr(cca_last_error(), "could not be"), "%s: %d asleep after a refusal: %s", when, n,
                  cca_last_error());
    } else {
        cr_assert_eq(r.blocks + r.bytes_copied + r.host_bytes + r.bytes_unmapped, 0, "%s: a report", when);
        cca_stats after = tu_stats(t.a);
        cr_assert_eq(after.allocated_bytes, before.allocated_bytes, "%s", when);
        cr_assert_eq(after.host_bytes, 0, "%s", when);
        cr_assert_eq(tu_upstream_stats(t.inner).host_bytes_in_use, 0, "%s", when);
    }
    if (n) {
        uint64_t w0 = t.f.calls[wkind];
        t.f.fail_at[wkind] = kw ? w0 + kw : 0;
        st = cca_wake(t.a, &r);
        *nw = t.f.calls[wkind] - w0;
        tu_faulty_faults_off(&t.f);
        tu_check(t.a);
        if (st != CCA_OK) {
            cr_assert(three_asleep(&t) > 0, "%s: a refused cca_wake with everything awake: %s", when,
                      cca_last_error());
            cr_assert_eq(cca_wake(t.a, &r), CCA_OK, "%s: %s", when, cca_last_error());
        }
        cr_assert_eq(three_asleep(&t), 0, "%s", when);
    } else {
        *nw = 0;
    }
    cr_assert_eq(tu_upstream_stats(t.inner).host_bytes_in_use, 0, "%s: host bytes left", when);
    three_end(&t, when);
}

static void sleep_all_sweep(int backing) {
    static const tu_fault_kind kinds[] = {TU_FAULT_STREAM_SYNC, TU_FAULT_HOST_ALLOC, TU_FAULT_COPY,
                                          TU_FAULT_COPY_WAIT,   TU_FAULT_UNMAP,      TU_FAULT_MAP};
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
        uint64_t ns, nw;
        sleep_all_run(backing, kinds[i], 0, kinds[i], 0, &ns, &nw);
        cr_assert_gt(ns + nw, 0, "cca_sleep and cca_wake never call %s", tu_fault_names[kinds[i]]);
        for (uint64_t k = 1; k <= ns; k++)
            sleep_all_run(backing, kinds[i], k, kinds[i], 0, &(uint64_t){0}, &(uint64_t){0});
        for (uint64_t k = 1; k <= nw; k++)
            sleep_all_run(backing, kinds[i], 0, kinds[i], k, &(uint64_t){0}, &(uint64_t){0});
    }
}

Test(sleep_interplay, sleep_and_wake_everything_with_a_fault_at_each_call_over_pages, .timeout = 120) {
    sleep_all_sweep(CCA_VM_PAGES);
}

Test(sleep_interplay, sleep_and_wake_everything_with_a_fault_at_each_call_over_whole_maps, .timeout = 120) {
    sleep_all_sweep(CCA_VM_WHOLE_MAPS);
}

/* ---- an upstream without the copy ops ------------------------------------------------------ */

/* The simulated device's vm ops, forwarded; no host or copy ops: only
 * CCA_SLEEP_DISCARD can sleep. */
static cca_status fw_alloc(void *c, size_t n, void **p) { return cca_upstream_alloc(c, n, p); }
static cca_status fw_free(void *c, void *p, size_t n) { return cca_upstream_free(c, p, n); }
static cca_status fw_mem_info(void *c, size_t *f, size_t *t) { return cca_upstream_mem_info(c, f, t); }
static cca_status fw_sync(void *c) { return cca_upstream_synchronize(c); }
static cca_status fw_gran(void *c, size_t *g) { return cca_upstream_vm_granularity(c, g); }
static cca_status fw_reserve(void *c, size_t n, void **b) { return cca_upstream_vm_reserve(c, n, b); }
static cca_status fw_release(void *c, void *b, size_t n) { return cca_upstream_vm_release(c, b, n); }
static cca_status fw_map(void *c, void *p, size_t n) { return cca_upstream_vm_map(c, p, n); }
static cca_status fw_unmap(void *c, void *p, size_t n) { return cca_upstream_vm_unmap(c, p, n); }

Test(sleep_interplay, discard_only_upstream_a_second_sleep_is_a_no_op) {
    cca_upstream *inner = tu_vm_device(256 * MiB, 0), *u = NULL;
    cca_upstream_ops ops = {.alloc = fw_alloc, .free = fw_free, .mem_info = fw_mem_info, .synchronize = fw_sync,
                            .vm_granularity = fw_gran, .vm_reserve = fw_reserve, .vm_release = fw_release,
                            .vm_map = fw_map, .vm_unmap = fw_unmap};
    cr_assert_eq(cca_upstream_custom_create(&ops, inner, &u), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_has_copy(u), 0);
    cca_allocator *a = tu_allocator(u, NULL);
    cca_domain *A;
    cr_assert_eq(cca_domain_create(a, "A", &A), CCA_OK);
    void *p = NULL;
    cr_assert_eq(cca_alloc_in(a, A, 3 * MiB, NULL, &p), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_domain_sleep(a, A, 0, NULL), CCA_ERR_UPSTREAM, "no copy ops: only DISCARD sleeps");
    cr_assert_eq(cca_domain_sleep(a, A, CCA_SLEEP_DISCARD, NULL), CCA_OK, "%s", cca_last_error());
    /* ccalloc.h: "A domain asleep already: CCA_OK, nothing copied (flags ignored)" */
    cr_assert_eq(cca_domain_sleep(a, A, 0, NULL), CCA_OK, "asleep already: %s", cca_last_error());
    /* cca_sleep without DISCARD: the default domain, awake, refuses; A stays asleep */
    cr_assert_eq(cca_sleep(a, 0, NULL), CCA_ERR_UPSTREAM);
    cr_assert_eq(tu_stats(a).asleep_domains, 1, "%s", cca_last_error());
    cr_assert_eq(cca_sleep(a, CCA_SLEEP_DISCARD, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_sleep(a, 0, NULL), CCA_OK, "every domain asleep already: %s", cca_last_error());
    tu_check(a);
    cr_assert_eq(cca_wake(a, NULL), CCA_OK, "%s", cca_last_error());
    tu_free(a, p);
    tu_check(a);
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    cca_upstream_destroy(u);
    cca_upstream_destroy(inner);
}

/* ---- a refused wake whose unmap is refused too ------------------------------------------------ */

Test(sleep_interplay, refused_wake_whose_unmap_is_refused_leaves_it_asleep_and_counted) {
    tu_faulty f;
    cca_upstream *inner = tu_vm_device(256 * MiB, 0);
    cca_upstream *u = tu_faulty_create(&f, inner, "fx", true);
    cca_allocator *a = tu_allocator(u, NULL);
    cca_domain *A;
    cr_assert_eq(cca_domain_create(a, "A", &A), CCA_OK);
    void *p = NULL, *q = NULL;
    cr_assert_eq(cca_alloc_in(a, A, 3 * MiB, (cca_stream)1, &p), CCA_OK);
    cr_assert_eq(cca_alloc_in(a, A, 5 * MiB, (cca_stream)2, &q), CCA_OK);
    tu_fill(p, 3 * MiB, 1);
    tu_fill(q, 5 * MiB, 2);
    cr_assert_eq(cca_domain_sleep(a, A, 0, NULL), CCA_OK, "%s", cca_last_error());
    size_t host = tu_upstream_stats(inner).host_bytes_in_use;
    f.fail_at[TU_FAULT_MAP] = f.calls[TU_FAULT_MAP] + 2;
    f.fail_at[TU_FAULT_UNMAP] = f.calls[TU_FAULT_UNMAP] + 1;
    cr_assert_eq(cca_domain_wake(a, A, NULL), CCA_ERR_OUT_OF_MEMORY);
    tu_faulty_faults_off(&f);
    tu_check(a);
    cca_domain_stats s;
    cr_assert_eq(cca_get_domain_stats(a, A, &s), CCA_OK);
    cr_assert_eq(s.asleep, 1);
    cr_assert_eq(tu_upstream_stats(inner).host_bytes_in_use, host, "the host copy intact");
    cr_assert_eq(s.reserved_bytes, tu_upstream_stats(inner).vm_mapped_bytes, "what stays mapped is counted");
    cr_assert_gt(s.reserved_bytes, 0, "the refused unmap left pages mapped");
    cr_assert_eq(cca_domain_sleep(a, A, 0, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(tu_upstream_stats(inner).vm_mapped_bytes, 0, "a second sleep gives it back");
    cr_assert_eq(cca_domain_wake(a, A, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert(tu_check_fill(p, 3 * MiB, 1));
    cr_assert(tu_check_fill(q, 5 * MiB, 2));
    tu_free(a, p);
    tu_free(a, q);
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    cca_upstream_destroy(u);
    cca_upstream_destroy(inner);
}

/* ---- a wake short of room: pending frees -------------------------------------------------- */

/* The wake tests' start: a 96 MiB device behind tu_faulty (with_streams:
 * its stream_synchronize and events), domains A and B, A's 40 MiB block
 * filled with `fill` and A asleep. */
typedef struct beside {
    tu_faulty f;
    cca_upstream *inner, *u;
    cca_allocator *a;
    cca_domain *A, *B;
    void *p;
} beside;

static void beside_open(beside *t, bool with_streams, int fill) {
    t->inner = tu_vm_device(96 * MiB, 0);
    t->u = with_streams ? tu_faulty_create_streams(&t->f, t->inner, "fx", true)
                        : tu_faulty_create(&t->f, t->inner, "fx", false);
    t->a = tu_allocator(t->u, NULL);
    cr_assert_eq(cca_domain_create(t->a, "A", &t->A), CCA_OK);
    cr_assert_eq(cca_domain_create(t->a, "B", &t->B), CCA_OK);
    t->p = NULL;
    cr_assert_eq(cca_alloc_in(t->a, t->A, 40 * MiB, NULL, &t->p), CCA_OK, "%s", cca_last_error());
    tu_fill(t->p, 40 * MiB, fill);
    cr_assert_eq(cca_domain_sleep(t->a, t->A, 0, NULL), CCA_OK, "%s", cca_last_error());
}

/* A's bytes back (awake now), then everything given back. */
static void beside_close(beside *t, int fill) {
    cr_assert(tu_check_fill(t->p, 40 * MiB, fill), "A's bytes back");
    tu_free(t->a, t->p);
    cr_assert_eq(cca_destroy(t->a), CCA_OK, "%s", cca_last_error());
    cca_upstream_destroy(t->u);
    cca_upstream_destroy(t->inner);
}

/* Another domain's blocks freed on a stream whose events are still
 * incomplete (pending): an allocation in this state waits for them (the
 * OOM retry's step 2) and takes their room; a wake short of room releases
 * the cache "as the OOM retry does", so it waits for them too. */
static void wake_after_pending_frees(bool whole_call) {
    beside t;
    beside_open(&t, true, 6);
    void *q = NULL, *r = NULL;
    cr_assert_eq(cca_alloc_in(t.a, t.B, 30 * MiB, NULL, &q), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_alloc_in(t.a, t.B, 30 * MiB, NULL, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_record_stream(t.a, q, (cca_stream)0x55), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_record_stream(t.a, r, (cca_stream)0x55), CCA_OK, "%s", cca_last_error());
    t.f.hold_events = true; /* incomplete until a stream synchronize: the frees are pending */
    tu_free(t.a, q);
    tu_free(t.a, r);
    cr_assert_eq(tu_stats(t.a).pending_blocks, 2);
    cca_status st = whole_call ? cca_wake(t.a, NULL) : cca_domain_wake(t.a, t.A, NULL);
    cr_assert_eq(st, CCA_OK, "%s: a wake short of room with B's frees pending: %s",
                 whole_call ? "cca_wake" : "cca_domain_wake", cca_last_error());
    tu_check(t.a);
    t.f.hold_events = false;
    beside_close(&t, 6);
}

Test(sleep_interplay, a_wake_short_of_room_waits_for_pending_frees) {
    wake_after_pending_frees(false);
    wake_after_pending_frees(true);
}

/* The same with the wait refused (every stream synchronize fails): the
 * cache cannot be released, the wake is refused with the bytes missing and
 * says why the cache was kept; nothing changes; once the wait succeeds the
 * wake goes ahead. */
Test(sleep_interplay, a_wake_whose_wait_for_the_cache_fails_says_so) {
    beside t;
    beside_open(&t, true, 7);
    void *q = NULL;
    cr_assert_eq(cca_alloc_in(t.a, t.B, 60 * MiB, NULL, &q), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_record_stream(t.a, q, (cca_stream)0x55), CCA_OK, "%s", cca_last_error());
    t.f.hold_events = true;
    tu_free(t.a, q); /* pending on 0x55 */
    t.f.fail_at[TU_FAULT_STREAM_SYNC] = t.f.calls[TU_FAULT_STREAM_SYNC] + 1;
    t.f.sticky[TU_FAULT_STREAM_SYNC] = true;
    t.f.fail_at[TU_FAULT_SYNC] = t.f.calls[TU_FAULT_SYNC] + 1;
    t.f.sticky[TU_FAULT_SYNC] = true;
    for (int whole = 0; whole < 2; whole++) {
        cca_stats before = tu_stats(t.a);
        cca_status st = whole ? cca_wake(t.a, NULL) : cca_domain_wake(t.a, t.A, NULL);
        cr_assert_eq(st, CCA_ERR_OUT_OF_MEMORY, "%s", cca_last_error());
        cr_assert(strstr(cca_last_error(), "bytes missing") && strstr(cca_last_error(), "the cache was kept: "),
                  "%s: the message says why the cache stayed: %s", whole ? "cca_wake" : "cca_domain_wake",
                  cca_last_error());
        tu_check(t.a);
        cca_stats after = tu_stats(t.a);
        tu_assert_stats_equal(&before, &after, "a wake whose wait failed");
    }
    tu_faulty_faults_off(&t.f);
    t.f.hold_events = false;
    cr_assert_eq(cca_domain_wake(t.a, t.A, NULL), CCA_OK, "%s", cca_last_error());
    beside_close(&t, 7);
}

/* ccalloc.h's cost of a wake: one mem_info; short, each pass of the
 * release adds what it says (counted by the wrapper). A wake with room
 * asks once; one short of room whose first release makes room asks the
 * number the header states for one pass. */
Test(sleep_interplay, a_wake_short_of_room_asks_mem_info_as_the_header_says) {
    beside t;
    beside_open(&t, false, 3);
    uint64_t before = t.f.mem_info_calls;
    cr_assert_eq(cca_domain_wake(t.a, t.A, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(t.f.mem_info_calls - before, 1, "a wake with room: one mem_info, not %llu",
                 (unsigned long long)(t.f.mem_info_calls - before));
    cr_assert_eq(cca_domain_sleep(t.a, t.A, 0, NULL), CCA_OK, "%s", cca_last_error());
    void *q = NULL, *r = NULL;
    cr_assert_eq(cca_alloc_in(t.a, t.B, 30 * MiB, NULL, &q), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_alloc_in(t.a, t.B, 30 * MiB, NULL, &r), CCA_OK, "%s", cca_last_error());
    tu_free(t.a, q);
    tu_free(t.a, r);
    before = t.f.mem_info_calls;
    cr_assert_eq(cca_domain_wake(t.a, t.A, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert(tu_stats(t.a).cached_bytes > 0, "only the shortfall went: one pass");
    cr_assert_eq(t.f.mem_info_calls - before, 3,
                 "short, one pass: the first mem_info, can_help's, and the one asked again: not %llu",
                 (unsigned long long)(t.f.mem_info_calls - before));
    beside_close(&t, 3);
}
