/*
 * test_sleep.c — allocator/src/sleep.c: sleep and wake of a domain
 * (cca_domain_sleep, cca_domain_wake, cca_sleep, cca_wake) on the simulated
 * device, whose used memory is exact and whose unmapped pages fault.
 *
 *   figures     after a sleep the device's used memory falls by exactly the
 *               domain's reserved bytes, the host holds exactly its live
 *               bytes, every block's address faults; after the wake every
 *               byte and every address is what it was; the other domain
 *               untouched.
 *   asleep      an allocation refused (CCA_ERR_ASLEEP, naming the domain);
 *               a free allowed, its copy not brought back, its host chunk
 *               given back with the chunk's last block; a second sleep a
 *               no-op; a footprint refused; stats and JSON say asleep.
 *   wake        refused on a full device: still asleep, intact, the message
 *               says how many bytes are missing; succeeds once room is made.
 *   overlap     wake queues a span's copies before it maps the next span,
 *               and waits once.
 *   modes       DISCARD copies nothing; classic segments and a bad flag are
 *               refused, nothing changed; greedy's default domain sleeps.
 *   all         cca_sleep / cca_wake: all or nothing.
 *   waits       one stream_synchronize per stream of the domain, up to 16;
 *               past 16, one device synchronize instead.
 *   faults      every upstream call of a sleep and of a wake fails in turn:
 *               afterwards asleep with every byte on the host or awake with
 *               every byte on the device, the invariants hold, nothing leaks.
 *   lifetime    release, destroy and cca_destroy of a sleeping domain free
 *               its host memory.
 *   threads     allocations in another domain while one sleeps and wakes.
 */
#include <criterion/criterion.h>

#include "alloc_test_util.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>




/* A domain's blocks, each filled with its own pattern. */
typedef struct blocks {
    void *p[16];
    size_t size[16];
    int n;
} blocks;

static const size_t SIZES[] = {512, 3 * KiB, 70 * KiB, 1 * MiB, 3 * MiB + 512, 10 * MiB, 512 * KiB, 25 * MiB};

static void fill_domain(cca_allocator *a, cca_domain *d, blocks *b, uint64_t seed) {
    memset(b, 0, sizeof *b);
    for (size_t i = 0; i < sizeof SIZES / sizeof *SIZES; i++) {
        cr_assert_eq(cca_alloc_in(a, d, SIZES[i], NULL, &b->p[i]), CCA_OK, "%s", cca_last_error());
        b->size[i] = SIZES[i];
        tu_fill(b->p[i], SIZES[i], seed + i);
        b->n++;
    }
}

static void expect_intact(const blocks *b, uint64_t seed, const char *when) {
    for (int i = 0; i < b->n; i++)
        if (b->p[i])
            cr_assert(tu_check_fill(b->p[i], b->size[i], seed + (uint64_t)i), "%s: block %d (%zu bytes) changed", when,
                      i, b->size[i]);
}

/* The pattern again, after a DISCARD wake left the contents undefined. */
static void refill(blocks *b, uint64_t seed) {
    for (int i = 0; i < b->n; i++)
        if (b->p[i])
            tu_fill(b->p[i], b->size[i], seed + (uint64_t)i);
}

static size_t live_bytes(const blocks *b) {
    size_t n = 0;
    for (int i = 0; i < b->n; i++)
        if (b->p[i])
            n += (b->size[i] + 511) / 512 * 512;
    return n;
}

static size_t device_used(cca_upstream *u) {
    size_t f, t;
    cr_assert_eq(cca_upstream_mem_info(u, &f, &t), CCA_OK);
    return t - f;
}

static cca_domain_stats dstats(cca_allocator *a, cca_domain *d) {
    cca_domain_stats s;
    cr_assert_eq(cca_get_domain_stats(a, d, &s), CCA_OK, "%s", cca_last_error());
    return s;
}

/* What a refused call must leave as it was (its upstream calls are counted). */
static void expect_same_state(cca_allocator *a, const cca_stats *b, const char *when) {
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.reserved_bytes, b->reserved_bytes, "%s: reserved", when);
    cr_assert_eq(s.mapped_bytes, b->mapped_bytes, "%s: mapped", when);
    cr_assert_eq(s.allocated_bytes, b->allocated_bytes, "%s: allocated", when);
    cr_assert_eq(s.active_blocks, b->active_blocks, "%s: active", when);
    cr_assert_eq(s.segments, b->segments, "%s: segments", when);
    cr_assert_eq(s.asleep_domains, b->asleep_domains, "%s: asleep", when);
    cr_assert_eq(s.host_bytes, b->host_bytes, "%s: host bytes", when);
}

static void free_all(cca_allocator *a, blocks *b) {
    for (int i = 0; i < b->n; i++)
        if (b->p[i]) {
            tu_free(a, b->p[i]);
            b->p[i] = NULL;
        }
}

/* A 256 MiB simulated device, an allocator, one domain `name` filled. */
typedef struct one {
    cca_upstream *u;
    cca_allocator *a;
    cca_domain *d;
    blocks b;
} one;

static one one_domain(const char *name, uint64_t seed) {
    one o;
    o.u = tu_vm_device(256 * MiB, 0);
    o.a = tu_allocator(o.u, NULL);
    cr_assert_eq(cca_domain_create(o.a, name, &o.d), CCA_OK);
    fill_domain(o.a, o.d, &o.b, seed);
    return o;
}

/* ---- figures ------------------------------------------------------------------------ */

static void sleep_and_wake_figures(int backing) {
    cca_upstream *u = tu_vm_device_backed(512 * MiB, 0, backing);
    cca_allocator *a = tu_allocator(u, NULL);
    cca_domain *A, *B;
    cr_assert_eq(cca_domain_create(a, "A", &A), CCA_OK);
    cr_assert_eq(cca_domain_create(a, "B", &B), CCA_OK);
    blocks ba, bb;
    fill_domain(a, A, &ba, 100);
    fill_domain(a, B, &bb, 200);
    tu_free(a, ba.p[2]); /* free space inside A: not copied */
    ba.p[2] = NULL;
    tu_check(a);
    cca_domain_stats before = dstats(a, A), b_before = dstats(a, B);
    size_t used = device_used(u);
    cr_assert_gt(before.reserved_bytes, live_bytes(&ba), "A has free space to leave out");

    cca_sleep_report r;
    cr_assert_eq(cca_domain_sleep(a, A, 0, &r), CCA_OK, "%s", cca_last_error());
    tu_check(a);
    cr_assert_eq(used - device_used(u), before.reserved_bytes, "the device got back all of A's reserved bytes");
    cr_assert_eq(r.bytes_unmapped, before.reserved_bytes);
    cr_assert_eq(r.blocks, (size_t)ba.n - 1);
    cr_assert_eq(r.bytes_copied, live_bytes(&ba), "only live bytes are copied");
    cr_assert_eq(r.host_bytes, live_bytes(&ba));
    cr_assert_eq(tu_upstream_stats(u).host_bytes_in_use, live_bytes(&ba), "the host holds exactly A's live bytes");
    cca_domain_stats s = dstats(a, A);
    cr_assert_eq(s.asleep, 1);
    cr_assert_eq(s.host_bytes, live_bytes(&ba));
    cr_assert_eq(s.reserved_bytes, 0);
    cr_assert_eq(s.cached_bytes, 0);
    cr_assert_eq(s.allocated_bytes, before.allocated_bytes, "A's blocks stay live");
    cca_stats all = tu_stats(a);
    cr_assert_eq(all.asleep_domains, 1);
    cr_assert_eq(all.host_bytes, live_bytes(&ba));
    cr_assert_eq(all.reserved_bytes, b_before.reserved_bytes + dstats(a, NULL).reserved_bytes);
    for (int i = 0; i < ba.n; i++)
        if (ba.p[i]) {
            TU_ASSERT_FAULTS(ba.p[i]);
            TU_ASSERT_FAULTS((char *)ba.p[i] + ba.size[i] - 1);
        }
    cca_domain_stats bs = dstats(a, B);
    cr_assert_eq(bs.reserved_bytes, b_before.reserved_bytes, "B untouched");
    cr_assert_eq(bs.asleep, 0);
    expect_intact(&bb, 200, "B while A sleeps");

    void *addr[16];
    memcpy(addr, ba.p, sizeof addr);
    cr_assert_eq(cca_domain_wake(a, A, &r), CCA_OK, "%s", cca_last_error());
    tu_check(a);
    cr_assert_eq(r.bytes_copied, live_bytes(&ba));
    cr_assert_gt(r.bytes_mapped, 0);
    cr_assert_leq(r.bytes_mapped, before.reserved_bytes, "only the pages under live blocks are mapped");
    cr_assert_eq(device_used(u), used - before.reserved_bytes + r.bytes_mapped);
    cr_assert_eq(tu_upstream_stats(u).host_bytes_in_use, 0, "the host memory went back");
    cr_assert_eq(dstats(a, A).asleep, 0);
    expect_intact(&ba, 100, "A after the wake");
    expect_intact(&bb, 200, "B after the wake");
    for (int i = 0; i < ba.n; i++) {
        if (!ba.p[i])
            continue;
        cca_domain *owner = NULL;
        cr_assert_eq(cca_domain_of(a, addr[i], &owner), CCA_OK, "block %d: the same address is live", i);
        cr_assert_eq(owner, A);
    }
    /* A allocates again, in its free space too (its pages were unmapped) */
    void *q = NULL;
    cr_assert_eq(cca_alloc_in(a, A, 70 * KiB, NULL, &q), CCA_OK, "%s", cca_last_error());
    tu_fill(q, 70 * KiB, 7);
    cr_assert(tu_check_fill(q, 70 * KiB, 7));
    tu_free(a, q);
    free_all(a, &ba);
    free_all(a, &bb);
    tu_check(a);
    tu_teardown(a, u);
}

Test(sleep, figures_are_exact_over_whole_maps) {
    sleep_and_wake_figures(CCA_VM_WHOLE_MAPS);
}

Test(sleep, figures_are_exact_over_pages) {
    sleep_and_wake_figures(CCA_VM_PAGES);
}

/* ---- asleep ---------------------------------------------------------------------------- */

Test(sleep, asleep_refuses_allocations_and_allows_frees) {
    one o = one_domain("model-a", 1);
    cca_upstream *u = o.u;
    cca_allocator *a = o.a;
    cca_domain *A = o.d;
    blocks ba = o.b;
    cca_sleep_report r;
    cr_assert_eq(cca_domain_sleep(a, A, 0, &r), CCA_OK, "%s", cca_last_error());
    size_t host = r.host_bytes;
    void *p = (void *)1;
    cr_assert_eq(cca_alloc_in(a, A, 4096, NULL, &p), CCA_ERR_ASLEEP);
    cr_assert_null(p);
    cr_assert(strstr(cca_last_error(), "'model-a' is asleep"), "%s", cca_last_error());
    cr_assert_eq(cca_alloc_in(a, A, 0, NULL, &p), CCA_OK, "size 0 is still OK");
    cr_assert_eq(cca_domain_reserve(a, A, 8 * MiB), CCA_ERR_ASLEEP);
    /* a second sleep: a no-op */
    cr_assert_eq(cca_domain_sleep(a, A, 0, &r), CCA_OK);
    cr_assert_eq(r.bytes_copied + r.bytes_unmapped + r.host_bytes, 0);
    /* free while asleep: allowed, its copy not brought back */
    tu_free(a, ba.p[3]);
    tu_free(a, ba.p[4]);
    size_t dropped = ba.size[3] + ba.size[4];
    ba.p[3] = ba.p[4] = NULL;
    tu_check(a);
    size_t held = dstats(a, A).host_bytes; /* their chunks hold other blocks too: kept */
    cr_assert(held <= host && held >= host - dropped, "host bytes %zu of %zu after %zu bytes freed", held, host,
              dropped);
    cr_assert_eq(tu_upstream_stats(u).host_bytes_in_use, held);
    /* a block larger than a chunk has one of its own: freed, its host memory goes at once */
    cr_assert_eq(ba.size[7], 25 * MiB);
    tu_free(a, ba.p[7]);
    ba.p[7] = NULL;
    dropped += 25 * MiB;
    cr_assert_eq(dstats(a, A).host_bytes, held - 25 * MiB, "the 25 MiB block's copy is still held");
    cr_assert_eq(tu_upstream_stats(u).host_bytes_in_use, held - 25 * MiB);
    tu_check(a);
    /* trim and empty-cache find nothing of A to give back, and break nothing */
    cca_release_report rr;
    cr_assert_eq(cca_empty_cache(a, &rr), CCA_OK, "%s", cca_last_error());
    tu_check(a);
    cr_assert_eq(dstats(a, A).reserved_bytes, 0);
    cr_assert_eq(rr.asleep_domains, 1, "the release report says what is asleep");
    cr_assert_eq(rr.host_bytes, dstats(a, A).host_bytes);
    cr_assert_eq(rr.host_bytes, tu_upstream_stats(u).host_bytes_in_use);
    /* JSON says asleep */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_eq(cca_domain_stats_write_json(a, f), CCA_OK);
    fclose(f);
    cr_assert(strstr(buf, "\"name\": \"model-a\"") && strstr(buf, "\"asleep\": true"), "%s", buf);
    free(buf);
    cr_assert_eq(cca_domain_wake(a, A, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(r.bytes_copied, host - dropped, "the freed blocks' copies are dropped");
    tu_check(a);
    expect_intact(&ba, 1, "after the wake");
    /* the freed blocks' space serves requests again (pages mapped on demand) */
    void *q = NULL;
    cr_assert_eq(cca_alloc_in(a, A, 3 * MiB, NULL, &q), CCA_OK, "%s", cca_last_error());
    tu_fill(q, 3 * MiB, 9);
    cr_assert(tu_check_fill(q, 3 * MiB, 9));
    tu_free(a, q);
    cr_assert_eq(cca_domain_wake(a, A, &r), CCA_OK, "awake: a no-op");
    free_all(a, &ba);
    tu_teardown(a, u);
}

/* ccalloc.h, cca_domain_sleep's cost: one host_alloc per chunk, consecutive
 * blocks packed up to 16 MiB (inclusive), a larger block in one of its own. */
Test(sleep, one_host_alloc_per_chunk_of_up_to_16_MiB) {
    static const struct {
        size_t size;
        int n;
        uint64_t chunks;
    } cases[] = {{4 * MiB, 4, 1}, {4 * MiB, 5, 2}, {20 * MiB, 1, 1}, {10 * MiB, 3, 3}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        tu_faulty f;
        cca_upstream *inner = tu_vm_device(256 * MiB, 0);
        cca_upstream *u = tu_faulty_create(&f, inner, "fx", true);
        cca_allocator *a = tu_allocator(u, NULL);
        void *p[8];
        for (int i = 0; i < cases[c].n; i++) /* the default domain */
            p[i] = tu_alloc(a, cases[c].size, NULL);
        uint64_t h0 = f.calls[TU_FAULT_HOST_ALLOC];
        cca_sleep_report r;
        cr_assert_eq(cca_domain_sleep(a, NULL, 0, &r), CCA_OK, "%s", cca_last_error());
        cr_assert_eq(f.calls[TU_FAULT_HOST_ALLOC] - h0, cases[c].chunks, "%d blocks of %zu bytes: %llu chunks",
                     cases[c].n, cases[c].size, (unsigned long long)cases[c].chunks);
        cr_assert_eq(r.host_bytes, cases[c].n * cases[c].size);
        cr_assert_eq(cca_domain_wake(a, NULL, NULL), CCA_OK, "%s", cca_last_error());
        for (int i = 0; i < cases[c].n; i++)
            tu_free(a, p[i]);
        tu_check(a);
        cca_destroy(a);
        tu_faulty_destroy_clean(u, inner);
    }
}

Test(sleep, every_block_freed_while_asleep_then_trim_gives_the_ranges_back) {
    one o = one_domain("A", 1);
    cca_upstream *u = o.u;
    cca_allocator *a = o.a;
    cca_domain *A = o.d;
    blocks ba = o.b;
    cr_assert_eq(cca_domain_sleep(a, A, 0, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_gt(tu_upstream_stats(u).host_bytes_in_use, 0);
    free_all(a, &ba);
    tu_check(a);
    cr_assert_eq(tu_upstream_stats(u).host_bytes_in_use, 0, "every chunk goes with its last block");
    cr_assert_eq(dstats(a, A).host_bytes, 0);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s", cca_last_error());
    tu_check(a);
    cr_assert_eq(tu_stats(a).segments, 0, "the empty ranges went back");
    cr_assert_eq(cca_domain_wake(a, A, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(tu_upstream_stats(u).host_bytes_in_use, 0);
    tu_teardown(a, u);
}

/* A free while asleep finds its block's copy through the record's address
 * index, which sleep builds from the domain's segments in address order
 * (each segment's blocks are in address order already). With blocks in
 * segments of two pools and three streams, freed in turn: after each free the invariant walk
 * holds (the index in order, every live block with its copy, each chunk's
 * count of live copies), the blocks kept wake intact, and once every block
 * is freed asleep no host byte is held: each free dropped its own copy. */
Test(sleep, frees_while_asleep_find_their_copies_in_every_segment) {
    enum { N = 24 };
    static const size_t size[] = {4 * KiB, 2 * MiB + 512, 12 * MiB, 700 * KiB};
    cca_upstream *u = tu_vm_device(512 * MiB, 0);
    cca_allocator *a = tu_allocator(u, NULL);
    /* ranges for streams 0 and 1 around one given back, so that stream 2's,
     * the newest, may take its place: the domain's list (newest first) is
     * then out of address order whichever way the device hands ranges out */
    void *first = tu_alloc(a, 4 * KiB, NULL), *gone = tu_alloc(a, 4 * KiB, (cca_stream)0x9000),
         *second = tu_alloc(a, 4 * KiB, (cca_stream)((uintptr_t)1 << 12));
    tu_free(a, gone);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s", cca_last_error());
    void *p[N];
    for (int i = 0; i < N; i++) {
        p[i] = tu_alloc(a, size[i % 4], (cca_stream)((uintptr_t)(i % 3) << 12)); /* segments per stream */
        tu_fill(p[i], size[i % 4], 100 + (uint64_t)i);
    }
    cr_assert_eq(tu_stats(a).segments, 6, "a range per pool and stream");
    for (int round = 0; round < 2; round++) {
        cr_assert_eq(cca_domain_sleep(a, NULL, 0, NULL), CCA_OK, "%s", cca_last_error());
        tu_check(a);
        size_t host = dstats(a, NULL).host_bytes;
        for (int k = 0; k < N; k++) {
            int i = k * 7 % N; /* every block once, out of address order */
            if (!p[i] || (round == 0 && i % 3 == 0))
                continue; /* kept for the wake (first and second too) */
            tu_free(a, p[i]);
            p[i] = NULL;
            tu_check(a);
            size_t now = dstats(a, NULL).host_bytes;
            cr_assert_leq(now, host, "a free while asleep took host memory");
            host = now;
        }
        if (round == 1) {
            tu_free(a, first);
            tu_free(a, second);
            tu_check(a);
            cr_assert_eq(tu_upstream_stats(u).host_bytes_in_use, 0, "every copy dropped by its own free");
        }
        cr_assert_eq(cca_domain_wake(a, NULL, NULL), CCA_OK, "%s", cca_last_error());
        tu_check(a);
        for (int i = 0; i < N; i++)
            if (p[i])
                cr_assert(tu_check_fill(p[i], size[i % 4], 100 + (uint64_t)i), "block %d woke changed", i);
    }
    tu_teardown(a, u);
}

/* The allocator's sums over sleeping domains (cca_stats asleep_domains,
 * host_bytes, cached_bytes; the release report's asleep_domains and
 * host_bytes) walk the domains asleep only, never every domain made: after
 * each sleep, wake, free while asleep, forced release and destroy of a
 * sleeping domain, and cca_sleep / cca_wake of all, they equal the sums of
 * every domain's own stats. */
static void expect_asleep_sums(cca_allocator *a, cca_domain **d, int n, const char *when) {
    size_t asleep = 0, host = 0, cached = 0;
    for (int k = -1; k < n; k++) {
        if (k >= 0 && !d[k])
            continue;
        cca_domain_stats s = dstats(a, k < 0 ? NULL : d[k]);
        asleep += (size_t)s.asleep;
        host += s.host_bytes;
        cached += s.cached_bytes;
    }
    cca_stats st = tu_stats(a);
    cr_assert_eq(st.asleep_domains, asleep, "%s: asleep domains", when);
    cr_assert_eq(st.host_bytes, host, "%s: host bytes", when);
    cr_assert_eq(st.cached_bytes, cached, "%s: cached bytes", when);
    cca_release_report r;
    cr_assert_eq(cca_trim(a, SIZE_MAX, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(r.asleep_domains, asleep, "%s: the report's asleep domains", when);
    cr_assert_eq(r.host_bytes, host, "%s: the report's host bytes", when);
    tu_check(a);
}

Test(sleep, sums_over_sleeping_domains_follow_every_sleep_and_wake) {
    enum { N = 6 };
    cca_upstream *u = tu_vm_device(256 * MiB, 0);
    cca_allocator *a = tu_allocator(u, NULL);
    cca_domain *d[N];
    void *p[N][2];
    void *mine = tu_alloc(a, 8 * KiB, NULL); /* the default domain's */
    for (int k = 0; k < N; k++) {
        char name[8];
        snprintf(name, sizeof name, "m%d", k);
        cr_assert_eq(cca_domain_create(a, name, &d[k]), CCA_OK);
        for (int j = 0; j < 2; j++)
            cr_assert_eq(cca_alloc_in(a, d[k], (size_t)(k + 1) * 300 * KiB * (size_t)(j + 1), NULL, &p[k][j]), CCA_OK);
    }
    expect_asleep_sums(a, d, N, "all awake");
    int order[] = {1, 3, 5, 0};
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(cca_domain_sleep(a, d[order[i]], 0, NULL), CCA_OK, "%s", cca_last_error());
        expect_asleep_sums(a, d, N, "a sleep");
    }
    cr_assert_eq(cca_domain_wake(a, d[3], NULL), CCA_OK, "%s", cca_last_error());
    expect_asleep_sums(a, d, N, "a wake in the middle of the list");
    tu_free(a, p[1][0]);
    expect_asleep_sums(a, d, N, "a free while asleep");
    cr_assert_eq(cca_domain_destroy(a, d[5], CCA_DOMAIN_FORCE, NULL), CCA_OK, "%s", cca_last_error());
    d[5] = NULL;
    expect_asleep_sums(a, d, N, "a sleeping domain destroyed");
    cr_assert_eq(cca_domain_release(a, d[0], CCA_DOMAIN_FORCE, NULL), CCA_OK, "%s", cca_last_error());
    expect_asleep_sums(a, d, N, "a sleeping domain released");
    cr_assert_eq(cca_sleep(a, 0, NULL), CCA_OK, "%s", cca_last_error());
    expect_asleep_sums(a, d, N, "every domain asleep");
    cr_assert_eq(cca_wake(a, NULL), CCA_OK, "%s", cca_last_error());
    expect_asleep_sums(a, d, N, "every domain awake");
    cr_assert_eq(cca_domain_sleep(a, d[2], 0, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_domain_sleep(a, NULL, 0, NULL), CCA_OK, "%s", cca_last_error());
    expect_asleep_sums(a, d, N, "asleep at the end");
    (void)mine;
    (void)p;
    cca_destroy(a); /* frees the sleeping domains' host memory and the live blocks (ASan) */
    cca_upstream_destroy(u);
}

/* ---- wake refused ------------------------------------------------------------------------ */

Test(sleep, wake_on_a_full_device_stays_asleep_and_says_what_is_missing) {
    cca_upstream *u = tu_vm_device(128 * MiB, 0);
    cca_allocator *a = tu_allocator(u, NULL);
    cca_domain *A;
    cr_assert_eq(cca_domain_create(a, "A", &A), CCA_OK);
    void *p = NULL;
    cr_assert_eq(cca_alloc_in(a, A, 40 * MiB, NULL, &p), CCA_OK);
    tu_fill(p, 40 * MiB, 5);
    cr_assert_eq(cca_domain_sleep(a, A, 0, NULL), CCA_OK, "%s", cca_last_error());
    /* another tenant takes all but 30 MiB */
    size_t f, t;
    cr_assert_eq(cca_upstream_mem_info(u, &f, &t), CCA_OK);
    void *tenant = NULL;
    cr_assert_eq(cca_upstream_alloc(u, f - 30 * MiB, &tenant), CCA_OK, "%s", cca_last_error());
    cca_stats before = tu_stats(a);
    cca_sleep_report r;
    cr_assert_eq(cca_domain_wake(a, A, &r), CCA_ERR_OUT_OF_MEMORY);
    char want[128];
    snprintf(want, sizeof want, "%zu bytes missing", 40 * MiB - 30 * MiB);
    cr_assert(strstr(cca_last_error(), want), "%s", cca_last_error());
    cr_assert(strstr(cca_last_error(), "still asleep"), "%s", cca_last_error());
    tu_check(a);
    expect_same_state(a, &before, "a refused wake");
    cr_assert_eq(dstats(a, A).asleep, 1);
    TU_ASSERT_FAULTS(p);
    cr_assert_eq(cca_wake(a, &r), CCA_ERR_OUT_OF_MEMORY, "cca_wake too: nothing woken");
    cr_assert(strstr(cca_last_error(), want), "%s", cca_last_error());
    cr_assert_eq(dstats(a, A).asleep, 1);
    cr_assert_eq(cca_upstream_free(u, tenant, f - 30 * MiB), CCA_OK);
    cr_assert_eq(cca_domain_wake(a, A, &r), CCA_OK, "%s", cca_last_error());
    cr_assert(tu_check_fill(p, 40 * MiB, 5), "the host copy was kept intact");
    tu_free(a, p);
    tu_teardown(a, u);
}

/* A wake short of room releases the allocator's cached memory first, as an
 * allocation's OOM retry does: another domain's freed blocks, on a full
 * device (the device's free memory) and under max_reserved (the cap), for
 * cca_domain_wake and cca_wake; only the shortfall when that is enough.
 * When releasing cannot make room (a tenant holds the rest), nothing is
 * released and the wake is refused as before. */
static void wake_releases_the_cache(const char *conf, bool whole_call) {
    cca_upstream *u = tu_vm_device(conf ? 256 * MiB : 96 * MiB, 0);
    cca_allocator *a = tu_allocator(u, conf);
    cca_domain *A, *B;
    cr_assert_eq(cca_domain_create(a, "A", &A), CCA_OK);
    cr_assert_eq(cca_domain_create(a, "B", &B), CCA_OK);
    void *p = NULL, *q = NULL, *r = NULL;
    cr_assert_eq(cca_alloc_in(a, A, 40 * MiB, NULL, &p), CCA_OK, "%s", cca_last_error());
    tu_fill(p, 40 * MiB, 9);
    cr_assert_eq(cca_domain_sleep(a, A, 0, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_alloc_in(a, B, 30 * MiB, NULL, &q), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_alloc_in(a, B, 30 * MiB, NULL, &r), CCA_OK, "%s", cca_last_error());
    tu_free(a, q);
    tu_free(a, r); /* B: 60+ MiB cached, none live */
    size_t cached = tu_stats(a).cached_bytes;
    cr_assert_geq(cached, 60 * MiB);
    cca_sleep_report rep;
    (void)cca_set_error(CCA_ERR_CONFIG, "the caller's own message");
    cca_status st = whole_call ? cca_wake(a, &rep) : cca_domain_wake(a, A, &rep);
    cr_assert_eq(st, CCA_OK, "%s: %s", conf ? conf : "device", cca_last_error());
    cr_assert_str_eq(cca_last_error(), "the caller's own message", "a wake that released and succeeded keeps it");
    cr_assert_eq(dstats(a, A).asleep, 0);
    cr_assert(tu_check_fill(p, 40 * MiB, 9), "A's bytes back");
    cca_stats s = tu_stats(a);
    cr_assert_lt(s.cached_bytes, cached, "B's cache went first");
    cr_assert_gt(s.cached_bytes, 0, "only the shortfall: B keeps the rest of its cache");
    tu_check(a);
    tu_free(a, p);
    tu_teardown(a, u);
}

Test(sleep, a_wake_short_of_device_memory_releases_the_cache_first) {
    wake_releases_the_cache(NULL, false);
    wake_releases_the_cache(NULL, true);
}

Test(sleep, a_wake_short_under_max_reserved_releases_the_cache_first) {
    wake_releases_the_cache("max_reserved:96M", false);
    wake_releases_the_cache("max_reserved:96M", true);
}

/* A wake whose release of the shortfall is refused by the upstream
 * releases everything next (room_or_release's second pass): B's cache is
 * one free block below a live one in its range (so not a tail, tried
 * once per pass), its first vm_unmap fails once; the second pass unmaps
 * it and the wake succeeds. */
Test(sleep, a_wake_whose_shortfall_release_is_refused_releases_everything) {
    tu_faulty f;
    cca_upstream *inner = tu_vm_device_backed(96 * MiB, 0, CCA_VM_PAGES);
    cca_upstream *u = tu_faulty_create(&f, inner, "fx", true);
    cca_allocator *a = tu_allocator(u, "expandable_ahead:0");
    cca_domain *A, *B;
    cr_assert_eq(cca_domain_create(a, "A", &A), CCA_OK);
    cr_assert_eq(cca_domain_create(a, "B", &B), CCA_OK);
    void *p = NULL, *q = NULL, *r = NULL, *s = NULL;
    cr_assert_eq(cca_alloc_in(a, A, 40 * MiB, NULL, &p), CCA_OK, "%s", cca_last_error());
    tu_fill(p, 40 * MiB, 11);
    cr_assert_eq(cca_domain_sleep(a, A, 0, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_alloc_in(a, B, 30 * MiB, NULL, &q), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_alloc_in(a, B, 30 * MiB, NULL, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_alloc_in(a, B, 2 * MiB, NULL, &s), CCA_OK, "%s", cca_last_error());
    tu_free(a, q);
    tu_free(a, r); /* B: one free block of 60 MiB, mapped, below s */
    size_t free_b, total_b;
    cr_assert_eq(cca_upstream_mem_info(inner, &free_b, &total_b), CCA_OK);
    cr_assert_lt(free_b, 40 * MiB, "the wake is short of device memory (%zu free)", free_b);
    f.fail_at[TU_FAULT_UNMAP] = f.calls[TU_FAULT_UNMAP] + 1;
    cca_sleep_report rep;
    cr_assert_eq(cca_domain_wake(a, A, &rep), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(f.failures, 1, "the shortfall's unmap was refused");
    tu_faulty_faults_off(&f);
    cr_assert_eq(dstats(a, A).asleep, 0);
    cr_assert(tu_check_fill(p, 40 * MiB, 11), "A's bytes back");
    cr_assert_eq(tu_stats(a).cached_bytes, tu_stats(a).reserved_bytes - tu_stats(a).allocated_bytes);
    tu_check(a);
    tu_free(a, p);
    tu_free(a, s);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_destroy(a), CCA_OK);
    tu_faulty_destroy_clean(u, inner);
}

/* hold_peak:1 (policies/hold.c): reserved does not rise above its peak
 * while releasing the cache could make room; a wake is held like a
 * request. B's freed blocks are cached, A's wake would lift reserved over
 * the peak: the cache goes first, just enough, and the peak stays. When
 * even all of the cache cannot keep it under the peak, the peak rises by
 * the least: everything cached goes, then the wake maps. */
Test(sleep, a_wake_under_hold_peak_keeps_reserved_under_the_peak) {
    cca_upstream *u = tu_vm_device(256 * MiB, 0);
    cca_allocator *a = tu_allocator(u, "hold_peak:1");
    cca_domain *A, *B;
    cr_assert_eq(cca_domain_create(a, "A", &A), CCA_OK);
    cr_assert_eq(cca_domain_create(a, "B", &B), CCA_OK);
    void *p = NULL, *q = NULL;
    cr_assert_eq(cca_alloc_in(a, A, 40 * MiB, NULL, &p), CCA_OK, "%s", cca_last_error());
    tu_fill(p, 40 * MiB, 4);
    cr_assert_eq(cca_domain_sleep(a, A, 0, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_alloc_in(a, B, 60 * MiB, NULL, &q), CCA_OK, "%s", cca_last_error());
    tu_free(a, q); /* B: 60 MiB and more cached */
    cca_stats s = tu_stats(a);
    size_t peak = s.reserved_bytes_peak;
    cr_assert_gt(s.reserved_bytes + 40 * MiB, peak, "the wake would pass the peak");
    cr_assert_eq(cca_domain_wake(a, A, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert(tu_check_fill(p, 40 * MiB, 4), "A's bytes back");
    s = tu_stats(a);
    cr_assert_eq(s.reserved_bytes_peak, peak, "held: the peak did not rise (%zu, was %zu)", s.reserved_bytes_peak,
                 peak);
    cr_assert_gt(s.cached_bytes, 0, "only what the peak needed went");
    cr_assert_geq(s.peak_holds, 1, "counted as a hold");
    tu_check(a);
    /* the peak must rise: A (40 MiB) and B's new 100 MiB are more than the peak; B's cache goes first */
    cr_assert_eq(cca_domain_sleep(a, A, 0, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_alloc_in(a, B, 100 * MiB, NULL, &q), CCA_OK, "%s", cca_last_error());
    size_t live_b = tu_stats(a).allocated_bytes - 40 * MiB;
    cr_assert_eq(cca_domain_wake(a, A, NULL), CCA_OK, "%s", cca_last_error());
    s = tu_stats(a);
    cr_assert_eq(s.cached_bytes, s.reserved_bytes - s.allocated_bytes);
    cr_assert_eq(s.reserved_bytes, s.reserved_bytes_peak, "the peak rose to where reserved is now");
    cr_assert_leq(s.reserved_bytes, live_b + 40 * MiB + 4 * MiB, "by the least: the cache went first (%zu reserved)",
                  s.reserved_bytes);
    cr_assert(tu_check_fill(p, 40 * MiB, 4), "A's bytes back");
    tu_free(a, q);
    tu_free(a, p);
    tu_teardown(a, u);
}

/* ---- modes ------------------------------------------------------------------------------- */

Test(sleep, discard_copies_nothing) {
    one o = one_domain("A", 1);
    cca_upstream *u = o.u;
    cca_allocator *a = o.a;
    cca_domain *A = o.d;
    blocks ba = o.b;
    size_t used = device_used(u), reserved = dstats(a, A).reserved_bytes;
    cca_sleep_report r;
    cr_assert_eq(cca_domain_sleep(a, A, CCA_SLEEP_DISCARD, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(r.bytes_copied + r.host_bytes, 0);
    cr_assert_eq(r.blocks, (size_t)ba.n);
    cr_assert_eq(used - device_used(u), reserved);
    cr_assert_eq(tu_upstream_stats(u).copies, 0);
    cr_assert_eq(tu_upstream_stats(u).host_bytes_peak, 0);
    tu_check(a);
    cr_assert_eq(cca_domain_wake(a, A, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(r.bytes_copied, 0);
    for (int i = 0; i < ba.n; i++) { /* live at the same address, writable; contents undefined */
        tu_fill(ba.p[i], ba.size[i], 50);
        cr_assert(tu_check_fill(ba.p[i], ba.size[i], 50));
    }
    free_all(a, &ba);
    tu_teardown(a, u);
}

/* Wake queues the copies of a span's blocks as soon as the span is mapped,
 * before it maps the next (so the upstream copies one span while the next
 * is mapped), and waits once, after everything. Two pools, so two spans at
 * least; over whole maps and over pages. */
static void wake_overlaps(int backing) {
    tu_faulty f;
    cca_upstream *inner = tu_vm_device_backed(256 * MiB, 0, backing);
    cca_upstream *u = tu_faulty_create(&f, inner, "fx", true);
    cca_allocator *a = tu_allocator(u, NULL);
    cca_domain *A;
    cr_assert_eq(cca_domain_create(a, "A", &A), CCA_OK);
    blocks ba;
    fill_domain(a, A, &ba, 7);
    cr_assert_eq(cca_domain_sleep(a, A, 0, NULL), CCA_OK, "%s", cca_last_error());
    size_t from = f.order_count;
    cr_assert_eq(cca_domain_wake(a, A, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_leq(f.order_count, TU_FAULTY_ORDER, "the wake's calls are not all recorded");
    size_t first_copy = SIZE_MAX, last_map = 0, maps = 0, copies = 0, waits = 0, wait_at = 0;
    for (size_t i = from; i < f.order_count; i++) {
        tu_fault_kind k = f.order[i];
        if (k == TU_FAULT_MAP) {
            maps++;
            last_map = i;
        } else if (k == TU_FAULT_COPY) {
            copies++;
            first_copy = first_copy == SIZE_MAX ? i : first_copy;
        } else if (k == TU_FAULT_COPY_WAIT) {
            waits++;
            wait_at = i;
        }
    }
    cr_assert_geq(maps, 2, "the wake mapped %zu spans; this test needs two", maps);
    cr_assert_eq(copies, (size_t)ba.n, "one copy per live block");
    cr_assert_lt(first_copy, last_map, "every map came before the first copy: nothing overlaps");
    cr_assert_eq(waits, 1, "one copy_wait");
    cr_assert_gt(wait_at, last_map, "the copy_wait came before a map");
    expect_intact(&ba, 7, "after the wake");
    free_all(a, &ba);
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    cca_upstream_destroy(u);
    cca_upstream_destroy(inner);
}

Test(sleep, wake_copies_each_span_while_it_maps_the_next_over_whole_maps) {
    wake_overlaps(CCA_VM_WHOLE_MAPS);
}
Test(sleep, wake_copies_each_span_while_it_maps_the_next_over_pages) {
    wake_overlaps(CCA_VM_PAGES);
}

Test(sleep, classic_segments_and_bad_flags_are_refused_with_nothing_changed) {
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(128 * MiB, "expandable:0", &u, &a);
    void *p = tu_alloc(a, 5 * MiB, NULL);
    cca_stats before = tu_stats(a);
    cr_assert_eq(cca_domain_sleep(a, NULL, 0, NULL), CCA_ERR_UPSTREAM);
    cr_assert(strstr(cca_last_error(), "expandable"), "%s", cca_last_error());
    cr_assert_eq(cca_sleep(a, 0, NULL), CCA_ERR_UPSTREAM);
    tu_assert_intact(a, &before, "classic");
    cr_assert_eq(tu_upstream_stats(u).copies, 0);
    tu_free(a, p);
    tu_teardown(a, u);

    u = tu_vm_device(128 * MiB, 0);
    a = tu_allocator(u, NULL);
    p = tu_alloc(a, 5 * MiB, NULL);
    before = tu_stats(a);
    cr_assert_eq(cca_domain_sleep(a, NULL, 2u, NULL), CCA_ERR_INVALID_ARGUMENT);
    tu_assert_intact(a, &before, "bad flags");
    /* asleep already: DISCARD is ignored (nothing copied), other flags still refused */
    cr_assert_eq(cca_domain_sleep(a, NULL, 0, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_domain_sleep(a, NULL, 2u, NULL), CCA_ERR_INVALID_ARGUMENT);
    cca_sleep_report r;
    cr_assert_eq(cca_domain_sleep(a, NULL, CCA_SLEEP_DISCARD, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(r.bytes_copied + r.blocks + r.host_bytes, 0);
    cr_assert_eq(cca_domain_wake(a, NULL, NULL), CCA_OK, "%s", cca_last_error());
    tu_free(a, p);
    tu_teardown(a, u);
}

static cca_status no_alloc(void *c, size_t s, void **p) {
    (void)c, (void)s, (void)p;
    return CCA_ERR_OUT_OF_MEMORY;
}
static cca_status no_free(void *c, void *p, size_t s) {
    (void)c, (void)p, (void)s;
    return CCA_ERR_UPSTREAM;
}

Test(sleep, the_host_and_copy_ops_go_together) {
    cca_upstream_ops ops = {.alloc = no_alloc, .free = no_free, .host_alloc = no_alloc};
    cca_upstream *u = NULL;
    cr_assert_eq(cca_upstream_custom_create(&ops, NULL, &u), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_null(u);
    cr_assert(strstr(cca_last_error(), "copy_wait"), "%s", cca_last_error());
    ops.host_alloc = NULL;
    cr_assert_eq(cca_upstream_custom_create(&ops, NULL, &u), CCA_OK);
    cr_assert_eq(cca_upstream_has_copy(u), 0);
    void *h = (void *)1;
    cr_assert_eq(cca_upstream_host_alloc(u, 4096, &h), CCA_ERR_UPSTREAM);
    cr_assert_null(h);
    cca_upstream_destroy(u);
}

/* Hostile arguments: NULL allocator, another allocator's domain, a
 * destroyed handle, a stack address as a handle, bad flags for the whole
 * allocator; and the upstream wrappers' NULLs and zero sizes. Each refused
 * with CCA_ERR_INVALID_ARGUMENT, nothing changed, nothing copied; waking
 * an awake domain does nothing. */
Test(sleep, hostile_arguments_are_refused_with_nothing_changed) {
    cca_upstream *u = tu_vm_device(128 * MiB, 0);
    cca_allocator *a = tu_allocator(u, NULL), *b = tu_allocator(u, NULL);
    cca_domain *mine, *theirs, *gone;
    cr_assert_eq(cca_domain_create(a, "mine", &mine), CCA_OK);
    cr_assert_eq(cca_domain_create(b, "theirs", &theirs), CCA_OK);
    cr_assert_eq(cca_domain_create(a, "gone", &gone), CCA_OK);
    cr_assert_eq(cca_domain_destroy(a, gone, 0, NULL), CCA_OK);
    void *p = NULL;
    cr_assert_eq(cca_alloc_in(a, mine, 3 * MiB, NULL, &p), CCA_OK);
    cca_stats before = tu_stats(a);
    cca_sleep_report r;
    cr_assert_eq(cca_domain_sleep(NULL, NULL, 0, &r), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_domain_wake(NULL, NULL, &r), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_sleep(NULL, 0, &r), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_wake(NULL, &r), CCA_ERR_INVALID_ARGUMENT);
    cca_domain *stack = (cca_domain *)&r;
    cca_domain *bad[] = {theirs, gone, stack};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(cca_domain_sleep(a, bad[i], 0, &r), CCA_ERR_INVALID_ARGUMENT, "handle %zu", i);
        cr_assert_eq(cca_domain_wake(a, bad[i], &r), CCA_ERR_INVALID_ARGUMENT, "handle %zu", i);
    }
    cr_assert_eq(cca_sleep(a, 2u, &r), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_sleep(a, ~0u, &r), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_domain_wake(a, mine, &r), CCA_OK, "an awake domain: nothing to do");
    cr_assert_eq(r.bytes_mapped + r.bytes_copied + r.blocks, 0);
    tu_assert_intact(a, &before, "hostile arguments");
    cr_assert_eq(tu_upstream_stats(u).copies, 0);
    void *h = (void *)1;
    cr_assert_eq(cca_upstream_host_alloc(NULL, 4096, &h), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_upstream_host_alloc(u, 0, &h), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_null(h, "*ptr NULL after a failed host_alloc");
    cr_assert_eq(cca_upstream_host_alloc(u, 4096, NULL), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_upstream_copy(u, NULL, p, 512, 1), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_upstream_copy(u, p, p, 0, 1), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_upstream_host_free(u, NULL, 4096), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(tu_upstream_stats(u).copies, 0);
    tu_free(a, p);
    tu_destroy_clean(b, u);
    tu_teardown(a, u);
}

Test(sleep, greedy_default_domain_sleeps) {
    cca_upstream *u = tu_vm_device(256 * MiB, 0);
    cca_allocator *a = tu_allocator(u, "policy:greedy,greedy_bytes:96M");
    void *p = tu_alloc(a, 10 * MiB, NULL), *q = tu_alloc(a, 700, NULL);
    tu_fill(p, 10 * MiB, 1);
    tu_fill(q, 700, 2);
    size_t used = device_used(u), reserved = tu_stats(a).reserved_bytes;
    cca_sleep_report r;
    cr_assert_eq(cca_sleep(a, 0, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(used - device_used(u), reserved, "the whole arena went back");
    cr_assert_eq(tu_stats(a).reserved_bytes, 0);
    cr_assert_eq(tu_stats(a).asleep_domains, 1);
    void *x = (void *)1;
    cr_assert_eq(cca_alloc(a, 4096, NULL, &x), CCA_ERR_ASLEEP);
    cr_assert(strstr(cca_last_error(), "'default' is asleep"), "%s", cca_last_error());
    TU_ASSERT_FAULTS(p);
    tu_check(a);
    cr_assert_eq(cca_wake(a, &r), CCA_OK, "%s", cca_last_error());
    cr_assert(tu_check_fill(p, 10 * MiB, 1));
    cr_assert(tu_check_fill(q, 700, 2));
    void *z = tu_alloc(a, 20 * MiB, NULL); /* arena pages mapped again on demand */
    tu_fill(z, 20 * MiB, 3);
    tu_free(a, z);
    tu_free(a, p);
    tu_free(a, q);
    tu_check(a);
    tu_teardown(a, u);
}

/* ---- all domains ------------------------------------------------------------------------- */

/* The default domain and A and B, each filled (seeds 10, 20, 30), on a
 * 256 MiB simulated device wrapped in f. */
typedef struct trio {
    tu_faulty f;
    cca_upstream *inner, *u;
    cca_allocator *a;
    cca_domain *A, *B;
    blocks b0, ba, bb;
} trio;

static void trio_open(trio *t) {
    t->inner = tu_vm_device(256 * MiB, 0);
    t->u = tu_faulty_create(&t->f, t->inner, "fx", true);
    t->a = tu_allocator(t->u, NULL);
    cr_assert_eq(cca_domain_create(t->a, "A", &t->A), CCA_OK);
    cr_assert_eq(cca_domain_create(t->a, "B", &t->B), CCA_OK);
    fill_domain(t->a, NULL, &t->b0, 10);
    fill_domain(t->a, t->A, &t->ba, 20);
    fill_domain(t->a, t->B, &t->bb, 30);
}

/* Every block freed, then nothing left on the device. */
static void trio_close(trio *t) {
    free_all(t->a, &t->b0);
    free_all(t->a, &t->ba);
    free_all(t->a, &t->bb);
    tu_check(t->a);
    cr_assert_eq(cca_empty_cache(t->a, NULL), CCA_OK);
    cr_assert_eq(cca_destroy(t->a), CCA_OK);
    cca_upstream_destroy(t->u);
    cr_assert_eq(tu_upstream_stats(t->inner).bytes_in_use, 0);
    cca_upstream_destroy(t->inner);
}

/* CCA_SLEEP_DISCARD keeps no copy, so a domain it discarded cannot be woken
 * with its bytes: a cca_sleep(DISCARD) that a later domain's wait refuses
 * must discard nothing. B's synchronize fails (the default's and
 * A's counted first): every block keeps its bytes, nothing asleep. */
Test(sleep, a_refused_discard_sleep_discards_nothing) {
    trio t;
    trio_open(&t);
    for (int k = 0; k < 2; k++) { /* the sync of each domain in turn: the default's, then B's (after two) */
        uint64_t s0 = t.f.calls[TU_FAULT_SYNC];
        cr_assert_eq(cca_domain_sleep(t.a, NULL, CCA_SLEEP_DISCARD, NULL), CCA_OK, "%s", cca_last_error());
        cr_assert_eq(cca_domain_sleep(t.a, t.A, CCA_SLEEP_DISCARD, NULL), CCA_OK, "%s", cca_last_error());
        uint64_t before_b = t.f.calls[TU_FAULT_SYNC] - s0;
        cr_assert_eq(cca_wake(t.a, NULL), CCA_OK, "%s", cca_last_error());
        refill(&t.b0, 10);
        refill(&t.ba, 20);
        t.f.fail_at[TU_FAULT_SYNC] = t.f.calls[TU_FAULT_SYNC] + (k ? before_b : 0) + 1;
        cr_assert_neq(cca_sleep(t.a, CCA_SLEEP_DISCARD, NULL), CCA_OK);
        cr_assert_eq(t.f.failures, (uint64_t)k + 1, "the refusal was met");
        tu_check(t.a);
        cr_assert_eq(tu_stats(t.a).asleep_domains, 0, "%s", cca_last_error());
        expect_intact(&t.b0, 10, "default");
        expect_intact(&t.ba, 20, "A");
        expect_intact(&t.bb, 30, "B");
    }
    trio_close(&t);
}

Test(sleep, sleep_everything_is_all_or_nothing) {
    tu_faulty f;
    cca_upstream *inner = tu_vm_device(256 * MiB, 0);
    cca_upstream *u = tu_faulty_create(&f, inner, "fx", true);
    cca_allocator *a = tu_allocator(u, NULL);
    cca_domain *A, *B;
    cr_assert_eq(cca_domain_create(a, "A", &A), CCA_OK);
    cr_assert_eq(cca_domain_create(a, "B", &B), CCA_OK);
    blocks b0, ba, bb;
    fill_domain(a, NULL, &b0, 10);
    fill_domain(a, A, &ba, 20);
    fill_domain(a, B, &bb, 30);
    size_t used = device_used(inner);
    /* B's first host_alloc fails: count the default's and A's first */
    uint64_t h0 = f.calls[TU_FAULT_HOST_ALLOC];
    cr_assert_eq(cca_domain_sleep(a, NULL, 0, NULL), CCA_OK, "%s", cca_last_error());
    uint64_t before_a = f.calls[TU_FAULT_HOST_ALLOC] - h0;
    cr_assert_eq(cca_domain_sleep(a, A, 0, NULL), CCA_OK, "%s", cca_last_error());
    uint64_t before_b = f.calls[TU_FAULT_HOST_ALLOC] - h0;
    cr_assert_eq(cca_wake(a, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(device_used(inner), used);
    f.fail_at[TU_FAULT_HOST_ALLOC] = f.calls[TU_FAULT_HOST_ALLOC] + before_b + 1;
    cca_sleep_report r;
    cr_assert_eq(cca_sleep(a, 0, &r), CCA_ERR_OUT_OF_MEMORY);
    cr_assert(strstr(cca_last_error(), "cca_sleep(B)") && strstr(cca_last_error(), "woken again"), "%s",
              cca_last_error());
    tu_check(a);
    cr_assert_eq(tu_stats(a).asleep_domains, 0, "the two put to sleep were woken again");
    cr_assert_eq(r.host_bytes, 0);
    expect_intact(&b0, 10, "default");
    expect_intact(&ba, 20, "A");
    expect_intact(&bb, 30, "B");
    cr_assert_eq(tu_upstream_stats(inner).host_bytes_in_use, 0);
    /* A, asleep before the call, stays asleep: only the default domain is woken again */
    cr_assert_eq(cca_domain_sleep(a, A, 0, NULL), CCA_OK, "%s", cca_last_error());
    size_t a_host = tu_upstream_stats(inner).host_bytes_in_use;
    f.fail_at[TU_FAULT_HOST_ALLOC] = f.calls[TU_FAULT_HOST_ALLOC] + before_a + 1;
    cr_assert_eq(cca_sleep(a, 0, &r), CCA_ERR_OUT_OF_MEMORY);
    cr_assert(strstr(cca_last_error(), "the 1 domains this call had put to sleep were woken again"), "%s",
              cca_last_error());
    tu_check(a);
    cr_assert_eq(tu_stats(a).asleep_domains, 1, "A only");
    cr_assert_eq(dstats(a, A).asleep, 1, "A was asleep before the call");
    cr_assert_eq(tu_upstream_stats(inner).host_bytes_in_use, a_host, "A's copy only");
    expect_intact(&b0, 10, "default");
    expect_intact(&bb, 30, "B");
    cr_assert_eq(cca_domain_wake(a, A, NULL), CCA_OK, "%s", cca_last_error());
    expect_intact(&ba, 20, "A");
    cr_assert_eq(cca_sleep(a, 0, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(tu_stats(a).asleep_domains, 3);
    cr_assert_eq(device_used(inner), 0, "the whole allocator's memory went back: %zu of %zu", device_used(inner), used);
    cr_assert_eq(r.host_bytes, live_bytes(&b0) + live_bytes(&ba) + live_bytes(&bb));
    cr_assert_eq(cca_wake(a, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(tu_stats(a).asleep_domains, 0);
    expect_intact(&b0, 10, "default");
    expect_intact(&ba, 20, "A");
    expect_intact(&bb, 30, "B");
    free_all(a, &b0);
    free_all(a, &ba);
    free_all(a, &bb);
    tu_check(a);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    cr_assert_eq(cca_destroy(a), CCA_OK);
    cca_upstream_destroy(u);
    cr_assert_eq(tu_upstream_stats(inner).bytes_in_use, 0);
    cca_upstream_destroy(inner);
}

/* The sleep's wait (docs/allocator.md, "Sleep"): one stream_synchronize
 * per stream that may touch the domain's blocks, up to 16; past 16, one
 * device synchronize instead (pages_quiesce's rule). A domain of `streams`
 * blocks, each on a stream of its own (so each in a segment of its own). */
static void sleep_waits(uintptr_t streams, uint64_t stream_syncs, uint64_t device_syncs) {
    tu_faulty f;
    cca_upstream *inner = tu_vm_device_backed(256 * MiB, 64 * KiB, CCA_VM_PAGES);
    cca_upstream *u = tu_faulty_create_streams(&f, inner, "fx", true);
    cca_allocator *a = tu_allocator(u, "expandable_ahead:0");
    cca_domain *d;
    cr_assert_eq(cca_domain_create(a, "m", &d), CCA_OK, "%s", cca_last_error());
    void *p[17];
    for (uintptr_t k = 0; k < streams; k++) {
        cr_assert_eq(cca_alloc_in(a, d, 64 * KiB, (cca_stream)((k + 1) << 12), &p[k]), CCA_OK, "%s", cca_last_error());
        tu_fill(p[k], 64 * KiB, k);
    }
    uint64_t ss = f.calls[TU_FAULT_STREAM_SYNC], ds = f.calls[TU_FAULT_SYNC];
    cr_assert_eq(cca_domain_sleep(a, d, 0, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(f.calls[TU_FAULT_STREAM_SYNC] - ss, stream_syncs, "%zu streams: stream synchronizes", (size_t)streams);
    cr_assert_eq(f.calls[TU_FAULT_SYNC] - ds, device_syncs, "%zu streams: device synchronizes", (size_t)streams);
    for (uintptr_t k = 0; k < streams && stream_syncs; k++) { /* each stream once, in any order */
        int seen = 0;
        for (uint64_t i = ss; i < ss + stream_syncs; i++)
            seen += f.synced_streams[i] == (cca_stream)((k + 1) << 12);
        cr_assert_eq(seen, 1, "stream %zu waited for %d times", (size_t)k, seen);
    }
    cr_assert(dstats(a, d).asleep);
    cr_assert_eq(cca_domain_wake(a, d, NULL), CCA_OK, "%s", cca_last_error());
    for (uintptr_t k = 0; k < streams; k++) {
        cr_assert(tu_check_fill(p[k], 64 * KiB, k), "block %zu", (size_t)k);
        tu_free(a, p[k]);
    }
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    tu_faulty_destroy_clean(u, inner);
}

Test(sleep, sixteen_streams_are_waited_for_one_by_one) {
    sleep_waits(16, 16, 0);
}

Test(sleep, past_sixteen_streams_the_device_is_synchronized_instead) {
    sleep_waits(17, 0, 1);
}

/* ---- faults ------------------------------------------------------------------------------ */

/* One run: A filled, sleep with call `k` of kind `sleep_kind` failing,
 * then (if asleep) wake with call `k` of `wake_kind` failing; each result
 * checked. Returns the calls of the two kinds the run made. */
static void fault_run(tu_fault_kind sleep_kind, tu_fault_kind wake_kind, uint64_t ks, uint64_t kw, uint64_t *ns,
                      uint64_t *nw) {
    tu_faulty f;
    cca_upstream *inner = tu_vm_device_backed(256 * MiB, 0, CCA_VM_PAGES);
    cca_upstream *u = tu_faulty_create_streams(&f, inner, "fx", true);
    cca_allocator *a = tu_allocator(u, NULL);
    cca_domain *A, *B;
    cr_assert_eq(cca_domain_create(a, "A", &A), CCA_OK);
    cr_assert_eq(cca_domain_create(a, "B", &B), CCA_OK);
    blocks ba, bb;
    fill_domain(a, A, &ba, 100);
    fill_domain(a, B, &bb, 200);
    cr_assert_eq(cca_record_stream(a, ba.p[1], (cca_stream)0x77), CCA_OK);
    tu_free(a, ba.p[2]);
    ba.p[2] = NULL;
    /* split A's pages: a trim leaves holes, so the wake maps several runs */
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    uint64_t s0 = f.calls[sleep_kind], w0 = f.calls[wake_kind];
    f.fail_at[sleep_kind] = ks ? s0 + ks : 0;
    cca_status st = cca_domain_sleep(a, A, 0, NULL);
    *ns = f.calls[sleep_kind] - s0;
    tu_faulty_faults_off(&f);
    char when[96];
    snprintf(when, sizeof when, "sleep, %s call %llu failing", tu_fault_names[sleep_kind], (unsigned long long)ks);
    cr_assert(st == CCA_OK || st == CCA_ERR_UPSTREAM || st == CCA_ERR_OUT_OF_MEMORY, "%s: %d %s", when, st,
              cca_last_error());
    tu_check(a);
    bool asleep = dstats(a, A).asleep;
    if (st != CCA_OK && !asleep) { /* nothing changed: awake, every byte on the device */
        expect_intact(&ba, 100, when);
        cr_assert_eq(tu_upstream_stats(inner).host_bytes_in_use, 0, "%s", when);
        cr_assert_eq(cca_domain_sleep(a, A, 0, NULL), CCA_OK, "%s: %s", when, cca_last_error());
    } else if (st != CCA_OK) { /* asleep, an unmap refused: a second sleep gives the rest back */
        cr_assert_eq(sleep_kind, TU_FAULT_UNMAP, "%s", when);
        cr_assert_gt(dstats(a, A).reserved_bytes, 0, "%s", when);
        cr_assert_eq(cca_domain_sleep(a, A, 0, NULL), CCA_OK, "%s: %s", when, cca_last_error());
    }
    cr_assert_eq(dstats(a, A).reserved_bytes, 0, "%s", when);
    tu_check(a);
    w0 = f.calls[wake_kind];
    f.fail_at[wake_kind] = kw ? w0 + kw : 0;
    cca_stats before = tu_stats(a);
    size_t host = tu_upstream_stats(inner).host_bytes_in_use;
    st = cca_domain_wake(a, A, NULL);
    *nw = f.calls[wake_kind] - w0;
    tu_faulty_faults_off(&f);
    snprintf(when, sizeof when, "wake, %s call %llu failing", tu_fault_names[wake_kind], (unsigned long long)kw);
    tu_check(a);
    if (st != CCA_OK && dstats(a, A).asleep) { /* all or nothing: asleep, intact */
        cr_assert(st == CCA_ERR_OUT_OF_MEMORY || st == CCA_ERR_UPSTREAM, "%s: %d %s", when, st, cca_last_error());
        expect_same_state(a, &before, when);
        cr_assert_eq(tu_upstream_stats(inner).host_bytes_in_use, host, "%s", when);
        cr_assert_eq(cca_domain_wake(a, A, NULL), CCA_OK, "%s: %s", when, cca_last_error());
    } else {
        cr_assert_eq(st, CCA_OK, "%s: %s", when, cca_last_error()); /* a refused host_free is logged only */
    }
    /* a host_free refused at the wake leaves that one chunk with the device */
    size_t left = tu_upstream_stats(inner).host_bytes_in_use;
    if (wake_kind == TU_FAULT_HOST_FREE && kw)
        cr_assert(left > 0 && left < host, "%s: %zu of %zu host bytes left", when, left, host);
    else
        cr_assert_eq(left, 0, "%s", when);
    expect_intact(&ba, 100, when);
    expect_intact(&bb, 200, when);
    tu_check(a);
    free_all(a, &ba);
    free_all(a, &bb);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s: %s", when, cca_last_error());
    cca_upstream_destroy(u);
    cca_upstream_stats us = tu_upstream_stats(inner);
    cr_assert_eq(us.bytes_in_use + us.vm_reserved_bytes, 0, "%s: the device holds something", when);
    cr_assert_eq(us.host_bytes_in_use, left, "%s", when);
    cca_upstream_destroy(inner);
}

static void sweep(tu_fault_kind sk, tu_fault_kind wk) {
    uint64_t ns, nw;
    fault_run(sk, wk, 0, 0, &ns, &nw);
    cr_assert_gt(ns + nw, 0, "sleep and wake never call %s / %s", tu_fault_names[sk], tu_fault_names[wk]);
    for (uint64_t k = 1; k <= ns; k++)
        fault_run(sk, wk, k, 0, &(uint64_t){0}, &(uint64_t){0});
    for (uint64_t k = 1; k <= nw; k++)
        fault_run(sk, wk, 0, k, &(uint64_t){0}, &(uint64_t){0});
    cr_log_info("%s failed at each of sleep's %llu calls, %s at each of wake's %llu", tu_fault_names[sk],
                (unsigned long long)ns, tu_fault_names[wk], (unsigned long long)nw);
}

Test(sleep_faults, stream_synchronize_and_map, .timeout = 120) {
    sweep(TU_FAULT_STREAM_SYNC, TU_FAULT_MAP);
}
Test(sleep_faults, host_alloc_and_copy, .timeout = 120) {
    sweep(TU_FAULT_HOST_ALLOC, TU_FAULT_COPY);
}
Test(sleep_faults, copy_and_copy_wait, .timeout = 120) {
    sweep(TU_FAULT_COPY, TU_FAULT_COPY_WAIT);
}
Test(sleep_faults, copy_wait_and_host_free, .timeout = 120) {
    sweep(TU_FAULT_COPY_WAIT, TU_FAULT_HOST_FREE);
}
Test(sleep_faults, unmap_and_map, .timeout = 120) {
    sweep(TU_FAULT_UNMAP, TU_FAULT_MAP);
}

/* A host_free the upstream refuses is logged, not failed (the memory stays
 * with it, counted in cca_upstream_stats), once per run of refusals, as a
 * failing event_query is: every host_free refused (a lost device), the
 * wake of a domain whose copy is in six chunks logged six lines, and each
 * free of a sleeping domain's block that emptied a chunk one more. Now: one
 * line for A's wake, one for B's frees while asleep. */
Test(sleep_faults, refused_host_frees_are_logged_once_per_run) {
    tu_faulty f;
    cca_upstream *inner = tu_vm_device_backed(256 * MiB, 0, CCA_VM_PAGES);
    cca_upstream *u = tu_faulty_create_streams(&f, inner, "fx", true);
    cca_allocator *a = tu_allocator(u, NULL);
    cca_domain *A, *B;
    cr_assert_eq(cca_domain_create(a, "A", &A), CCA_OK);
    cr_assert_eq(cca_domain_create(a, "B", &B), CCA_OK);
    void *pa[6], *pb[6];
    for (int i = 0; i < 6; i++) { /* each above a chunk (16 MiB): a chunk each */
        cr_assert_eq(cca_alloc_in(a, A, 17 * MiB, NULL, &pa[i]), CCA_OK, "%s", cca_last_error());
        cr_assert_eq(cca_alloc_in(a, B, 17 * MiB, NULL, &pb[i]), CCA_OK, "%s", cca_last_error());
    }
    cr_assert_eq(cca_sleep(a, 0, NULL), CCA_OK, "%s", cca_last_error());
    size_t host = tu_upstream_stats(inner).host_bytes_in_use;
    cr_assert_geq(host, 12 * 17 * MiB);
    static tu_log_capture log;
    cca_set_log_callback(tu_capture_log, &log);
    f.fail_at[TU_FAULT_HOST_FREE] = f.calls[TU_FAULT_HOST_FREE] + 1;
    f.sticky[TU_FAULT_HOST_FREE] = true;
    cr_assert_eq(cca_domain_wake(a, A, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(log.lines, 1, "the wake's six refusals: %d lines, the last: %s", log.lines, log.last);
    cr_assert(strstr(log.last, "domain 'A': the upstream refused to take back") && strstr(log.last, "not logged"),
              "%s", log.last);
    for (int i = 0; i < 6; i++)
        tu_free(a, pb[i]); /* asleep: each empties its chunk, refused */
    cr_assert_eq(log.lines, 2, "B's six refusals: %d lines in all, the last: %s", log.lines, log.last);
    cr_assert(strstr(log.last, "domain 'B'"), "%s", log.last);
    cr_assert_eq(tu_upstream_stats(inner).host_bytes_in_use, host, "every chunk stays with the device");
    cca_set_log_callback(NULL, NULL);
    tu_faulty_faults_off(&f);
    for (int i = 0; i < 6; i++)
        tu_free(a, pa[i]);
    cr_assert_eq(cca_domain_wake(a, B, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    cca_upstream_destroy(u);
    cca_upstream_destroy(inner);
}

/* ---- lifetime ---------------------------------------------------------------------------- */

Test(sleep, release_destroy_and_cca_destroy_free_the_host_memory) {
    cca_upstream *u = tu_vm_device(256 * MiB, 0);
    cca_allocator *a = tu_allocator(u, NULL);
    cca_domain *A, *B;
    cr_assert_eq(cca_domain_create(a, "A", &A), CCA_OK);
    cr_assert_eq(cca_domain_create(a, "B", &B), CCA_OK);
    blocks ba, bb;
    fill_domain(a, A, &ba, 1);
    fill_domain(a, B, &bb, 2);
    cr_assert_eq(cca_sleep(a, 0, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_gt(tu_upstream_stats(u).host_bytes_in_use, 0);
    cca_domain_report dr = {0};
    cr_assert_eq(cca_domain_release(a, A, 0, &dr), CCA_ERR_LIVE_BLOCKS, "live blocks refuse it, asleep or not");
    cr_assert_eq(dstats(a, A).asleep, 1);
    cr_assert_eq(cca_domain_destroy(a, A, CCA_DOMAIN_FORCE, &dr), CCA_OK, "%s", cca_last_error());
    tu_check(a);
    cr_assert_eq(tu_upstream_stats(u).host_bytes_in_use, live_bytes(&bb), "A's copy went with it");
    /* B asleep at cca_destroy: its host memory goes too */
    cr_assert_eq(cca_destroy(a), CCA_ERR_LIVE_BLOCKS);
    cca_upstream_stats us = tu_upstream_stats(u);
    cr_assert_eq(us.host_bytes_in_use + us.bytes_in_use + us.vm_reserved_bytes, 0);
    cca_upstream_destroy(u);
}

/* ---- threads ----------------------------------------------------------------------------- */

typedef struct worker {
    cca_allocator *a;
    cca_domain *d;
    volatile int stop;
    unsigned long rounds;
} worker;

static void *work(void *arg) {
    worker *w = arg;
    uint64_t rng = 42;
    while (!w->stop) {
        size_t n = 512 + tu_rand(&rng) % (4 * MiB);
        void *p = NULL;
        if (cca_alloc_in(w->a, w->d, n, (cca_stream)(uintptr_t)(tu_rand(&rng) % 3), &p) != CCA_OK)
            continue;
        tu_fill(p, n, w->rounds);
        if (!tu_check_fill(p, n, w->rounds))
            abort();
        cca_free(w->a, p);
        w->rounds++;
    }
    return NULL;
}

Test(sleep, another_domain_allocates_while_one_sleeps_and_wakes, .timeout = 60) {
    cca_upstream *u = tu_vm_device(512 * MiB, 0);
    cca_allocator *a = tu_allocator(u, NULL);
    cca_domain *A, *B;
    cr_assert_eq(cca_domain_create(a, "A", &A), CCA_OK);
    cr_assert_eq(cca_domain_create(a, "B", &B), CCA_OK);
    blocks ba;
    fill_domain(a, A, &ba, 7);
    worker w = {a, B, 0, 0};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, work, &w), 0);
    for (int i = 0; i < 30; i++) {
        cr_assert_eq(cca_domain_sleep(a, A, 0, NULL), CCA_OK, "%s", cca_last_error());
        cr_assert_eq(cca_check_invariants(a), CCA_OK, "%s", cca_last_error());
        cr_assert_eq(cca_domain_wake(a, A, NULL), CCA_OK, "%s", cca_last_error());
        expect_intact(&ba, 7, "after a wake");
    }
    w.stop = 1;
    pthread_join(t, NULL);
    cr_assert_gt(w.rounds, 0);
    free_all(a, &ba);
    tu_check(a);
    tu_teardown(a, u);
}
