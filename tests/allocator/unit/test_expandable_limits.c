/*
 * test_expandable_limits.c — allocator/src/kinds/pages.c: requests that
 * expandable segments cannot serve, the OOM retry over pages, and ranges of
 * billions of pages.
 * How the tests run: expandable_suite.h.
 *
 *   OOM          a request above the device fails at once; a small
 *                request on a full device takes the smallest mapped free
 *                block of the large range; a request on one stream unmaps
 *                the cached pages of another stream's segment through the
 *                retry.
 *   never        requests past the device, max_reserved, the address budget
 *                or the ceiling in pages fail at once, before any upstream
 *                call; a greedy arena too small refuses without a retry; a
 *                refused range is asked for again at half the size; the
 *                retry, the footprint retry and destroy synchronize before
 *                they unmap; a trim over billions of pages goes a word of
 *                the bitmap at a time.
 *
 * The other suites of pages.c: test_expandable_pages.c,
 * test_expandable_stress.c.
 */
#include "expandable_suite.h"

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

/* The defaults (whole maps): a 3 MiB request's map, with its ahead, takes
 * the whole 16 MiB device. A small request then cannot start a range of
 * its own (the device has no room for its first page): it takes the
 * large range's mapped free memory, the block right after the first,
 * with no map and no retry, where it used to be an OOM with 13 MiB free. */
Test(expandable, a_small_request_on_a_full_device_takes_the_large_ranges_mapped_memory) {
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(16 * MiB, "log_oom:0", &u, &a);
    char *big = tu_alloc(a, 3 * MiB, S0);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.page_size, 2 * MiB);
    cr_assert_eq(s.vm_backing, CCA_VM_WHOLE_MAPS);
    cr_assert_eq(s.mapped_bytes, 16 * MiB, "the request and its ahead fill the device");
    cr_assert_eq(s.vm_maps, 1);
    cr_assert_eq(device_used(u), 16 * MiB);
    for (size_t size = 512; size <= MiB; size *= 16) {
        char *p = tu_alloc(a, size, S0);
        cr_assert_eq(p, big + 3 * MiB, "%zu bytes: best fit in the large range, after the first block", size);
        cca_stats t = tu_stats(a);
        cr_assert_eq(t.vm_maps, 1, "%zu bytes: no map", size);
        cr_assert_eq(t.reserved_bytes, 16 * MiB);
        cr_assert_eq(t.expandable_segments, 1, "%zu bytes: no small range", size);
        cr_assert_eq(t.alloc_retries, 0);
        cr_assert_eq(t.ooms, 0);
        tu_check(a);
        tu_free(a, p);
    }
    tu_free(a, big);
    tu_empty_all(a, u);
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    cca_upstream_destroy(u);
}

/* A small request spilled to the large range holds its own bytes, as in
 * the small pool: the rest of the block it takes is a free block that the
 * next spilled request can use. Kept as slack (the large pool's rule, a
 * remainder above small_max), a 700 KiB request held a whole 1.5 MiB hole
 * and the next one was an OOM with the device full. */
Test(expandable, a_spilled_small_request_splits_its_block_as_the_small_pool_would) {
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(16 * MiB, "log_oom:0", &u, &a);
    char *big = tu_alloc(a, 3 * MiB, S0); /* the device mapped whole, in the large range */
    char *hole = tu_alloc(a, 3 * MiB / 2, S0);
    char *rest = tu_alloc(a, 16 * MiB - 3 * MiB - 3 * MiB / 2, S0);
    cr_assert_eq(hole, big + 3 * MiB);
    cr_assert_eq(rest, hole + 3 * MiB / 2);
    tu_free(a, hole); /* a 1.5 MiB free block between two live ones */
    const size_t small = 700 * KiB;
    char *p = tu_alloc(a, small, S0);
    cr_assert_eq(p, hole, "the smallest free block of the large range");
    size_t held = 0;
    cr_assert_eq(cca_block_size(a, p, &held), CCA_OK);
    cr_assert_eq(held, small, "a spilled small request holds its bytes, not the block's %zu", held);
    char *q = tu_alloc(a, small, S0);
    cr_assert_eq(q, hole + small, "the remainder serves the next spilled request");
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.allocated_bytes, 16 * MiB - 3 * MiB / 2 + 2 * small);
    cr_assert_eq(s.expandable_segments, 1, "no small range: the device is full");
    cr_assert_eq(s.ooms, 0);
    tu_check(a);
    tu_free(a, p);
    tu_free(a, q);
    tu_free(a, big);
    tu_free(a, rest);
    tu_empty_all(a, u);
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    cca_upstream_destroy(u);
}

/* The spill takes the smallest free block of the large range whose bytes
 * are mapped, not best fit's answer alone: a smaller free block over
 * unmapped pages does not send the request to the retry (before, it did:
 * the retry unmapped the mapped hole to start a small range in it). */
Test(expandable, a_spilled_small_request_passes_over_a_smaller_unmapped_block) {
    const size_t cap = 32 * PG;
    cca_upstream *u = vm_device(cap, PG);
    cca_allocator *a = exp_allocator(u, "expandable_ahead:0,small_max:65536");
    char *x = tu_alloc(a, 2 * PG, S0), *h1 = tu_alloc(a, 2 * PG, S0), *c = tu_alloc(a, 2 * PG, S0);
    char *h2 = tu_alloc(a, 5 * PG, S0), *e = tu_alloc(a, 2 * PG, S0);
    tu_free(a, h1);
    cr_assert_eq(cca_trim(a, 0, NULL), CCA_OK, "%s", cca_last_error()); /* h1's pages go */
    tu_free(a, h2);                                                     /* h2's stay */
    void *tenant = tenant_take(u, cap - 11 * PG);                       /* the device is full */
    cca_stats before = tu_stats(a);
    char *p = tu_alloc(a, 512, S0);
    cr_assert_eq(p, h2, "h1's block is smaller, but its pages are not mapped");
    cr_assert_eq(tu_block_size(a, p), 512, "split as the small pool would");
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.alloc_retries, before.alloc_retries, "no retry");
    cr_assert_eq(s.vm_maps, before.vm_maps, "no map");
    cr_assert_eq(s.vm_unmaps, before.vm_unmaps, "nothing unmapped");
    cr_assert_eq(s.expandable_segments, 1, "no small range");
    agree(a, u, PG, 0, "after the spill");
    tu_free(a, p);
    tu_free(a, x);
    tu_free(a, c);
    tu_free(a, e);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    tenant_give_back(u, tenant);
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
    cca_allocator *a = tu_allocator(*u, "expandable:1,expandable_ahead:0,log_oom:0");
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
    /* no least step: the first request maps its own page only */
    cca_allocator *a = rule_allocator(u, "expandable:1,max_reserved:5M,log_oom:0", 0, 64 * MiB);
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
    /* no least step: the first request maps its own page only */
    cca_allocator *a = rule_allocator(u, "expandable:1,small_max:512,log_oom:0", 0, 64 * MiB);
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
    cca_allocator *a = tu_allocator(*u, "expandable:1,max_reserved:8T,expandable_ahead:0,log_oom:0");
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
 * that passes max_reserved or the device's free memory; then down. A
 * device that does not say its free memory: up. */
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
    /* the device's free memory unknown (mem_info refused): up, the device
     * decides; the creation succeeds and leaves the caller's message */
    tu_faulty f;
    u = fx_create(&f, 256 * MiB, false);
    f.fail_mem_info = true;
    cca_config_default(&c);
    cr_assert_eq(cca_config_parse(&c, "policy:greedy,greedy_bytes:7169K,expandable:1"), CCA_OK); /* 7M + 1K */
    cca_set_error(CCA_OK, "the caller's");
    cr_assert_eq(cca_create(&c, u, &a), CCA_OK, "%s", cca_last_error());
    cr_assert_str_eq(cca_last_error(), "the caller's");
    cr_assert_eq(tu_stats(a).reserved_bytes, 7 * MiB + PG);
    f.fail_mem_info = false;
    fx_finish(a, u, &f);
}
