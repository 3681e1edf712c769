/*
 * test_upstream_vm.c — allocator/src/upstream/host.c: the virtual-memory ops of the simulated device
 * (allocator/src/upstream/host.c, "Virtual memory") held to CUDA's rules,
 * through the public wrapper (cca_upstream_vm_*, upstream.c). Its devices
 * keep each granule's memory apart (vm_backing CCA_VM_PAGES), the backing
 * whose rules these are; whole maps, the default, are test_whole_maps.c's.
 *
 *   granularity  2 MiB by default, as configured otherwise; a granularity
 *                that is not a power of two >= the host page is refused at
 *                creation; ranges come back aligned to it.
 *   round trip   reserve, map, write, read, unmap, release with the stats
 *                (vm_*, bytes_in_use) and mem_info exact after every step;
 *                reserved address space alone costs no device memory.
 *   rules        every call that breaks one (alignment, no partial unmap of
 *                a granule: the wrapper; ranges, overlaps, unmaps of
 *                granules not mapped, releases: the device) returns the
 *                stated status, names the rule and changes nothing: stats
 *                (but the count of failed maps), mem_info, mapped contents.
 *   granules     release is granule by granule: the middle granule of a
 *                map unmaps alone and faults after while its neighbours
 *                keep their data; one unmap spans adjacent maps made apart;
 *                a range with one granule not mapped is refused whole; the
 *                pages of part of a map go back to the OS while the rest
 *                stays; seeded random maps and unmaps agree with a model
 *                of one bit per granule (status, stats, mem_info, faults,
 *                contents) after every step.
 *   capacity     maps fill the device exactly; classic allocations and maps
 *                share it.
 *   memory       unmapped memory goes back to the OS (resident memory falls,
 *                also when only part of a map goes) and faults when
 *                touched (a forked child dies of SIGSEGV); a map the OS
 *                refuses (RLIMIT_AS) is CCA_ERR_OUT_OF_MEMORY and leaves
 *                the range as it was, and an unmap then still gives the
 *                pages back (one that cannot, mlocked pages too, is
 *                CCA_ERR_UPSTREAM with the reason and changes nothing);
 *                maps made apart are one contiguous, usable run of addresses.
 *   latency      vm_map waits alloc_latency_ns and vm_unmap free_latency_ns,
 *                granted or refused (lower bounds only).
 *   tables       a custom upstream has all five vm ops or none.
 *   teardown     destroy with maps and ranges left gives everything back.
 *                Under ASan, LeakSanitizer is asked at the end of the tests
 *                that create, refuse and destroy (a leak found at the exit of
 *                Criterion's worker would not fail the test).
 *   threads      four threads mapping and unmapping on one device keep the
 *                stats exact.
 */
#include "alloc_test_util.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<sanitizer/lsan_interface.h>) && defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define HAVE_LSAN 1
#endif
#endif

/* ---- helpers --------------------------------------------------------------- */

/* A device of `capacity` bytes with mapping granularity `gran` (0 = default),
 * every granule its own memory. */
static cca_upstream *make_vm_device(size_t capacity, size_t gran) {
    cca_host_options o = {.capacity = capacity, .vm_granularity = gran, .vm_backing = CCA_VM_PAGES};
    cca_upstream *u = NULL;
    cca_status st = cca_upstream_host_create_with(&o, &u);
    cr_assert_eq(st, CCA_OK, "host device of %zu bytes, granularity %zu: %s", capacity, gran, cca_last_error());
    cr_assert_not_null(u);
    cr_assert_eq(cca_upstream_has_vm(u), 1);
    cr_assert_eq(cca_upstream_vm_backing(u), CCA_VM_PAGES);
    return u;
}

static size_t granularity(cca_upstream *u) {
    size_t g = 0;
    cca_status st = cca_upstream_vm_granularity(u, &g);
    cr_assert_eq(st, CCA_OK, "vm_granularity: %s", cca_last_error());
    return g;
}

static char *vm_reserve(cca_upstream *u, size_t size) {
    void *b = NULL;
    cca_status st = cca_upstream_vm_reserve(u, size, &b);
    cr_assert_eq(st, CCA_OK, "vm_reserve of %zu bytes returned %d: %s", size, (int)st, cca_last_error());
    cr_assert_not_null(b);
    cr_assert_eq((uintptr_t)b % granularity(u), 0, "range %p is not aligned to the granularity", b);
    return b;
}

static void vm_release(cca_upstream *u, void *base, size_t size) {
    cca_status st = cca_upstream_vm_release(u, base, size);
    cr_assert_eq(st, CCA_OK, "vm_release of %p (%zu bytes) returned %d: %s", base, size, (int)st, cca_last_error());
}

static void vm_map(cca_upstream *u, void *addr, size_t size) {
    cca_status st = cca_upstream_vm_map(u, addr, size);
    cr_assert_eq(st, CCA_OK, "vm_map of %p (%zu bytes) returned %d: %s", addr, size, (int)st, cca_last_error());
}

static void vm_unmap(cca_upstream *u, void *addr, size_t size) {
    cca_status st = cca_upstream_vm_unmap(u, addr, size);
    cr_assert_eq(st, CCA_OK, "vm_unmap of %p (%zu bytes) returned %d: %s", addr, size, (int)st, cca_last_error());
}

static size_t free_bytes(cca_upstream *u) {
    size_t f = 0, t = 0;
    cr_assert_eq(cca_upstream_mem_info(u, &f, &t), CCA_OK);
    return f;
}

/* Everything a refused call must leave as it was. */
typedef struct snapshot {
    cca_upstream_stats s;
    size_t free;
} snapshot;

static snapshot take(cca_upstream *u) {
    return (snapshot){tu_upstream_stats(u), free_bytes(u)};
}

/* Nothing changed since `before`, but vm_failed_maps, which grew by
 * `failed_maps` (a map refused by the device counts; one refused by the
 * wrapper's argument checks does not reach it). */
static void assert_unchanged(cca_upstream *u, const snapshot *before, uint64_t failed_maps, const char *what) {
    snapshot now = take(u);
    const cca_upstream_stats *a = &before->s, *b = &now.s;
    cr_assert_eq(now.free, before->free, "%s: mem_info free %zu -> %zu", what, before->free, now.free);
    cr_assert_eq(a->bytes_in_use, b->bytes_in_use, "%s: bytes_in_use %zu -> %zu", what, a->bytes_in_use,
                 b->bytes_in_use);
    cr_assert_eq(a->bytes_in_use_peak, b->bytes_in_use_peak, "%s: bytes_in_use_peak changed", what);
    cr_assert_eq(a->allocations, b->allocations, "%s: allocations changed", what);
    cr_assert_eq(a->alloc_calls, b->alloc_calls, "%s: alloc_calls changed", what);
    cr_assert_eq(a->free_calls, b->free_calls, "%s: free_calls changed", what);
    cr_assert_eq(a->failed_allocs, b->failed_allocs, "%s: failed_allocs changed", what);
    cr_assert_eq(a->vm_reserved_bytes, b->vm_reserved_bytes, "%s: vm_reserved_bytes %zu -> %zu", what,
                 a->vm_reserved_bytes, b->vm_reserved_bytes);
    cr_assert_eq(a->vm_mapped_bytes, b->vm_mapped_bytes, "%s: vm_mapped_bytes %zu -> %zu", what, a->vm_mapped_bytes,
                 b->vm_mapped_bytes);
    cr_assert_eq(a->vm_map_calls, b->vm_map_calls, "%s: vm_map_calls changed", what);
    cr_assert_eq(a->vm_unmap_calls, b->vm_unmap_calls, "%s: vm_unmap_calls changed", what);
    cr_assert_eq(b->vm_failed_maps, a->vm_failed_maps + failed_maps, "%s: vm_failed_maps %llu -> %llu, expected +%llu",
                 what, (unsigned long long)a->vm_failed_maps, (unsigned long long)b->vm_failed_maps,
                 (unsigned long long)failed_maps);
}

/* The call `expr` returns `status`, its message contains `words` (NULL: not
 * checked) and nothing changes but vm_failed_maps (+failed_maps). */
#define EXPECT_REFUSED(u, expr, status, words, failed_maps)                                                            \
    do {                                                                                                               \
        snapshot before_ = take(u);                                                                                    \
        cca_status st_ = (expr);                                                                                       \
        cr_assert_eq(st_, (status), "%s returned %s, expected %s (%s)", #expr, cca_status_string(st_),                 \
                     cca_status_string(status), cca_last_error());                                                     \
        const char *w_ = (words);                                                                                      \
        if (w_)                                                                                                        \
            cr_assert_not_null(strstr(cca_last_error(), w_), "%s: message \"%s\" does not say \"%s\"", #expr,          \
                               cca_last_error(), w_);                                                                  \
        assert_unchanged(u, &before_, (failed_maps), #expr);                                                           \
    } while (0)

#define ASSERT_VM_STATS(u, reserved, mapped, in_use, maps, unmaps, failed)                                             \
    do {                                                                                                               \
        cca_upstream_stats s_ = tu_upstream_stats(u);                                                                  \
        cr_assert_eq(s_.vm_reserved_bytes, (size_t)(reserved), "vm_reserved_bytes %zu, expected %zu",                  \
                     s_.vm_reserved_bytes, (size_t)(reserved));                                                        \
        cr_assert_eq(s_.vm_mapped_bytes, (size_t)(mapped), "vm_mapped_bytes %zu, expected %zu", s_.vm_mapped_bytes,    \
                     (size_t)(mapped));                                                                                \
        cr_assert_eq(s_.bytes_in_use, (size_t)(in_use), "bytes_in_use %zu, expected %zu", s_.bytes_in_use,             \
                     (size_t)(in_use));                                                                                \
        cr_assert_eq(s_.vm_map_calls, (uint64_t)(maps), "vm_map_calls %llu, expected %llu",                            \
                     (unsigned long long)s_.vm_map_calls, (unsigned long long)(maps));                                 \
        cr_assert_eq(s_.vm_unmap_calls, (uint64_t)(unmaps), "vm_unmap_calls %llu, expected %llu",                      \
                     (unsigned long long)s_.vm_unmap_calls, (unsigned long long)(unmaps));                             \
        cr_assert_eq(s_.vm_failed_maps, (uint64_t)(failed), "vm_failed_maps %llu, expected %llu",                      \
                     (unsigned long long)s_.vm_failed_maps, (unsigned long long)(failed));                             \
    } while (0)

#define ASSERT_FREE(u, bytes)                                                                                          \
    do {                                                                                                               \
        size_t f_ = free_bytes(u), want_ = (size_t)(bytes);                                                            \
        cr_assert_eq(f_, want_, "mem_info free = %zu bytes, expected %zu", f_, want_);                                 \
    } while (0)

/* 0 when one byte at p can be read by the kernel, else the errno (EFAULT for
 * an inaccessible page). No signal is involved, so it works under ASan. */
/* Nothing allocated and unreachable now (only under ASan). */
static void assert_no_leaks(void) {
#ifdef HAVE_LSAN
    cr_assert_eq(__lsan_do_recoverable_leak_check(), 0, "LeakSanitizer found leaks (see stderr)");
#endif
}

/* The byte at offset i of a pattern that differs page to page. */
static char pattern(size_t i, int seed) {
    return (char)(1 + (i / 4096 * 7 + i % 251 + (size_t)seed) % 253);
}

/* ---- granularity ------------------------------------------------------------- */

Test(upstream_vm, granularity_is_2_mib_by_default_as_configured_otherwise_and_checked_at_creation) {
    cca_upstream *u = make_vm_device(64 * MiB, 0);
    cr_assert_eq(granularity(u), 2 * MiB);
    char *r = vm_reserve(u, 6 * MiB);
    cr_assert_eq((uintptr_t)r % (2 * MiB), 0);
    vm_release(u, r, 6 * MiB);
    cca_upstream_destroy(u);

    u = make_vm_device(64 * MiB, 4 * MiB);
    cr_assert_eq(granularity(u), 4 * MiB);
    char *rs[4];
    for (int i = 0; i < 4; i++) {
        rs[i] = vm_reserve(u, 4 * MiB * (size_t)(i + 1));
        cr_assert_eq((uintptr_t)rs[i] % (4 * MiB), 0, "range %d at %p is not 4 MiB-aligned", i, (void *)rs[i]);
    }
    /* 2 MiB is not a multiple of this granularity */
    EXPECT_REFUSED(u, cca_upstream_vm_reserve(u, 2 * MiB, &(void *){NULL}), CCA_ERR_INVALID_ARGUMENT, "granularity", 0);
    EXPECT_REFUSED(u, cca_upstream_vm_map(u, rs[1] + 2 * MiB, 4 * MiB), CCA_ERR_INVALID_ARGUMENT, "granularity", 0);
    vm_map(u, rs[1] + 4 * MiB, 4 * MiB);
    vm_unmap(u, rs[1] + 4 * MiB, 4 * MiB);
    for (int i = 0; i < 4; i++)
        vm_release(u, rs[i], 4 * MiB * (size_t)(i + 1));
    cca_upstream_destroy(u);

    /* a granularity smaller than the kernel's huge-page alignment: mmap
     * alone gives page-aligned addresses, 1 in 16 of them 64 KiB-aligned */
    u = make_vm_device(64 * MiB, 64 * KiB);
    char *small[8];
    for (int i = 0; i < 8; i++) {
        small[i] = vm_reserve(u, 3 * 64 * KiB);
        cr_assert_eq((uintptr_t)small[i] % (64 * KiB), 0, "range %d at %p is not 64 KiB-aligned", i, (void *)small[i]);
    }
    for (int i = 0; i < 8; i++)
        vm_release(u, small[i], 3 * 64 * KiB);
    cca_upstream_destroy(u);

    /* a large granularity */
    u = make_vm_device(256 * MiB, 64 * MiB);
    char *big[3];
    for (int i = 0; i < 3; i++) {
        big[i] = vm_reserve(u, 64 * MiB * (size_t)(i + 1));
        cr_assert_eq((uintptr_t)big[i] % (64 * MiB), 0, "range %d at %p is not 64 MiB-aligned", i, (void *)big[i]);
    }
    vm_map(u, big[2] + 64 * MiB, 64 * MiB);
    big[2][64 * MiB] = 1;
    big[2][128 * MiB - 1] = 2;
    TU_ASSERT_FAULTS(big[2] + 64 * MiB - 1);
    TU_ASSERT_FAULTS(big[2] + 128 * MiB);
    vm_unmap(u, big[2] + 64 * MiB, 64 * MiB);
    for (int i = 0; i < 3; i++)
        vm_release(u, big[i], 64 * MiB * (size_t)(i + 1));
    cca_upstream_destroy(u);

    size_t P = tu_page_size();
    size_t bad[] = {3 * MiB, P / 2, P / 8, 3 * P, 2 * MiB + P, 1};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cca_host_options o = {.capacity = 64 * MiB, .vm_granularity = bad[i]};
        u = (cca_upstream *)1;
        cca_status st = cca_upstream_host_create_with(&o, &u);
        cr_assert_eq(st, CCA_ERR_INVALID_ARGUMENT, "granularity %zu accepted (%d)", bad[i], (int)st);
        cr_assert_null(u);
        cr_assert_not_null(strstr(cca_last_error(), "vm_granularity"), "message: %s", cca_last_error());
    }
    /* a page larger than the device: not one fits (it was taken, and every
     * map then refused); one of the whole device is taken */
    cca_host_options over = {.capacity = 64 * MiB, .vm_granularity = 128 * MiB};
    u = (cca_upstream *)1;
    cr_assert_eq(cca_upstream_host_create_with(&over, &u), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_null(u);
    cr_assert_not_null(strstr(cca_last_error(), "vm_granularity 134217728 is larger than the capacity 67108864"),
                       "message: %s", cca_last_error());
    over.vm_granularity = 64 * MiB;
    cr_assert_eq(cca_upstream_host_create_with(&over, &u), CCA_OK, "%s", cca_last_error());
    cca_upstream_destroy(u);
    /* the smallest allowed: the host page */
    u = make_vm_device(MiB, P);
    cr_assert_eq(granularity(u), P);
    char *r1 = vm_reserve(u, 3 * P);
    vm_map(u, r1 + P, P);
    r1[P] = 1;
    vm_unmap(u, r1 + P, P);
    vm_release(u, r1, 3 * P);
    cca_upstream_destroy(u);
    assert_no_leaks();
}

/* ---- round trip ----------------------------------------------------------------- */

Test(upstream_vm, reserve_map_write_read_unmap_release_with_exact_stats_at_every_step) {
    const size_t G = 2 * MiB, cap = 64 * MiB;
    cca_upstream *u = make_vm_device(cap, 0);
    ASSERT_VM_STATS(u, 0, 0, 0, 0, 0, 0);
    ASSERT_FREE(u, cap);

    /* address space only: more than the capacity, and mem_info does not move */
    char *big = vm_reserve(u, 4 * cap);
    ASSERT_VM_STATS(u, 4 * cap, 0, 0, 0, 0, 0);
    ASSERT_FREE(u, cap);
    vm_release(u, big, 4 * cap);
    ASSERT_VM_STATS(u, 0, 0, 0, 0, 0, 0);

    char *r = vm_reserve(u, 8 * G);
    ASSERT_VM_STATS(u, 8 * G, 0, 0, 0, 0, 0);
    ASSERT_FREE(u, cap);
    TU_ASSERT_FAULTS(r);
    TU_ASSERT_FAULTS(r + G);

    char *m = r + G;
    vm_map(u, m, 3 * G);
    ASSERT_VM_STATS(u, 8 * G, 3 * G, 3 * G, 1, 0, 0);
    cr_assert_eq(tu_upstream_stats(u).bytes_in_use_peak, 3 * G);
    cr_assert_eq(tu_upstream_stats(u).allocations, 0, "maps are not classic allocations");
    ASSERT_FREE(u, cap - 3 * G);
    /* only the map is accessible; it reads as zeros, then as written */
    TU_ASSERT_FAULTS(r);
    TU_ASSERT_FAULTS(m - 1);
    TU_ASSERT_FAULTS(m + 3 * G);
    TU_ASSERT_READABLE(m);
    TU_ASSERT_READABLE(m + 3 * G - 1);
    for (size_t i = 0; i < 3 * G; i += 4096)
        cr_assert_eq(m[i], 0, "fresh map reads %d at %zu", m[i], i);
    for (size_t i = 0; i < 3 * G; i++)
        m[i] = pattern(i, 1);
    for (size_t i = 0; i < 3 * G; i++)
        if (m[i] != pattern(i, 1))
            cr_assert_fail("byte %zu reads %d, wrote %d", i, m[i], pattern(i, 1));

    vm_map(u, r + 6 * G, 2 * G); /* up to the end of the range */
    ASSERT_VM_STATS(u, 8 * G, 5 * G, 5 * G, 2, 0, 0);
    ASSERT_FREE(u, cap - 5 * G);
    r[8 * G - 1] = 7;

    vm_unmap(u, m, 3 * G);
    ASSERT_VM_STATS(u, 8 * G, 2 * G, 2 * G, 2, 1, 0);
    ASSERT_FREE(u, cap - 2 * G);
    TU_ASSERT_FAULTS(m);
    TU_ASSERT_FAULTS(m + 3 * G - 1);
    cr_assert_eq(r[8 * G - 1], 7, "the other map keeps its contents");

    /* mapping the same place again gives new memory: zeros */
    vm_map(u, m, 3 * G);
    ASSERT_VM_STATS(u, 8 * G, 5 * G, 5 * G, 3, 1, 0);
    for (size_t i = 0; i < 3 * G; i += 4096)
        cr_assert_eq(m[i], 0, "a new map reads old contents (%d) at %zu", m[i], i);
    vm_unmap(u, m, 3 * G);
    vm_unmap(u, r + 6 * G, 2 * G);
    ASSERT_VM_STATS(u, 8 * G, 0, 0, 3, 3, 0);
    ASSERT_FREE(u, cap);
    cr_assert_eq(tu_upstream_stats(u).bytes_in_use_peak, 5 * G);

    vm_release(u, r, 8 * G);
    ASSERT_VM_STATS(u, 0, 0, 0, 3, 3, 0);
    ASSERT_FREE(u, cap);
    cca_upstream_destroy(u);
}

/* ---- rules ----------------------------------------------------------------------- */

Test(upstream_vm, every_broken_rule_is_refused_and_changes_nothing) {
    const size_t G = 2 * MiB;
    cca_upstream *u = make_vm_device(64 * MiB, 0);
    size_t P = tu_page_size();
    char *A = vm_reserve(u, 8 * G);
    char *B = vm_reserve(u, 8 * G);
    char *gone = vm_reserve(u, 4 * G);
    vm_release(u, gone, 4 * G);
    /* two maps in A: [1,3) and [3,4) granules; written, checked at the end */
    vm_map(u, A + G, 2 * G);
    vm_map(u, A + 3 * G, G);
    memset(A + G, 0x5a, 3 * G);
    void *out = NULL;

    /* alignment and size: the wrapper's checks, before the device */
    EXPECT_REFUSED(u, cca_upstream_vm_map(u, A + P, G), CCA_ERR_INVALID_ARGUMENT, "granularity", 0);
    EXPECT_REFUSED(u, cca_upstream_vm_map(u, A + 4 * G, G + CCA_GRANULARITY), CCA_ERR_INVALID_ARGUMENT, "granularity",
                   0);
    EXPECT_REFUSED(u, cca_upstream_vm_map(u, A + 4 * G, 0), CCA_ERR_INVALID_ARGUMENT, "granularity", 0);
    EXPECT_REFUSED(u, cca_upstream_vm_unmap(u, A + G + P, G), CCA_ERR_INVALID_ARGUMENT, "granularity", 0);
    EXPECT_REFUSED(u, cca_upstream_vm_unmap(u, A + G, G / 2), CCA_ERR_INVALID_ARGUMENT, "granularity", 0);
    EXPECT_REFUSED(u, cca_upstream_vm_reserve(u, G + P, &out), CCA_ERR_INVALID_ARGUMENT, "granularity", 0);
    cr_assert_null(out);
    EXPECT_REFUSED(u, cca_upstream_vm_release(u, B, 8 * G - P), CCA_ERR_INVALID_ARGUMENT, "granularity", 0);
    EXPECT_REFUSED(u, cca_upstream_vm_release(u, B + P, 7 * G), CCA_ERR_INVALID_ARGUMENT, "granularity", 0);

    /* a map lies inside one reserved range */
    EXPECT_REFUSED(u, cca_upstream_vm_map(u, gone, G), CCA_ERR_UPSTREAM, "not inside any reserved range", 1);
    EXPECT_REFUSED(u, cca_upstream_vm_map(u, gone + 2 * G, 2 * G), CCA_ERR_UPSTREAM, "not inside any reserved range",
                   1);
    EXPECT_REFUSED(u, cca_upstream_vm_map(u, A + 6 * G, 4 * G), CCA_ERR_UPSTREAM, "runs past the end", 1);
    EXPECT_REFUSED(u, cca_upstream_vm_map(u, B + 7 * G, 2 * G), CCA_ERR_UPSTREAM, "runs past the end", 1);
    EXPECT_REFUSED(u, cca_upstream_vm_map(u, A, 9 * G), CCA_ERR_UPSTREAM, "runs past the end", 1);
    /* from the last granule of the lower range, over whatever lies between
     * (nothing, or unreserved space), into the first of the higher one */
    char *lo = A < B ? A : B, *hi = A < B ? B : A;
    size_t across = (size_t)(hi - (lo + 7 * G)) + G;
    EXPECT_REFUSED(u, cca_upstream_vm_map(u, lo + 7 * G, across), CCA_ERR_UPSTREAM, "runs past the end", 1);

    /* maps never overlap */
    EXPECT_REFUSED(u, cca_upstream_vm_map(u, A + G, 2 * G), CCA_ERR_UPSTREAM, "overlaps the map", 1);     /* same */
    EXPECT_REFUSED(u, cca_upstream_vm_map(u, A, 2 * G), CCA_ERR_UPSTREAM, "overlaps the map", 1);         /* left */
    EXPECT_REFUSED(u, cca_upstream_vm_map(u, A + 3 * G, 2 * G), CCA_ERR_UPSTREAM, "overlaps the map", 1); /* right */
    EXPECT_REFUSED(u, cca_upstream_vm_map(u, A + 2 * G, G), CCA_ERR_UPSTREAM, "overlaps the map", 1);     /* inside */
    EXPECT_REFUSED(u, cca_upstream_vm_map(u, A, 8 * G), CCA_ERR_UPSTREAM, "overlaps the map", 1);         /* around */

    /* an unmap names only mapped granules (any run of them: see the
     * "granules" tests); one granule not mapped refuses the whole range */
    EXPECT_REFUSED(u, cca_upstream_vm_unmap(u, A, G), CCA_ERR_UPSTREAM, "nothing is mapped", 0);
    EXPECT_REFUSED(u, cca_upstream_vm_unmap(u, A, 2 * G), CCA_ERR_UPSTREAM, "nothing is mapped", 0);         /* head */
    EXPECT_REFUSED(u, cca_upstream_vm_unmap(u, A + 3 * G, 2 * G), CCA_ERR_UPSTREAM, "nothing is mapped", 0); /* tail */
    EXPECT_REFUSED(u, cca_upstream_vm_unmap(u, A, 8 * G), CCA_ERR_UPSTREAM, "nothing is mapped", 0); /* around */
    EXPECT_REFUSED(u, cca_upstream_vm_unmap(u, A + G, 4 * G), CCA_ERR_UPSTREAM, "only mapped granules", 0);
    EXPECT_REFUSED(u, cca_upstream_vm_unmap(u, A + 4 * G, G), CCA_ERR_UPSTREAM, "nothing is mapped", 0);
    EXPECT_REFUSED(u, cca_upstream_vm_unmap(u, B, G), CCA_ERR_UPSTREAM, "nothing is mapped", 0);
    EXPECT_REFUSED(u, cca_upstream_vm_unmap(u, gone, G), CCA_ERR_UPSTREAM, "nothing is mapped", 0);
    /* ...and it is a granule that is not mapped, not a map boundary: the
     * message says where the first one is */
    EXPECT_REFUSED(u, cca_upstream_vm_unmap(u, A + 2 * G, 3 * G), CCA_ERR_UPSTREAM, "(4194304 bytes in)", 0);

    /* a release names exactly one range, with nothing mapped in it */
    EXPECT_REFUSED(u, cca_upstream_vm_release(u, A, 8 * G), CCA_ERR_UPSTREAM, "still in it", 0);
    EXPECT_REFUSED(u, cca_upstream_vm_release(u, B, 4 * G), CCA_ERR_UPSTREAM, "is 16777216 bytes", 0);
    EXPECT_REFUSED(u, cca_upstream_vm_release(u, B + 2 * G, 6 * G), CCA_ERR_UPSTREAM, "no range reserved there", 0);
    EXPECT_REFUSED(u, cca_upstream_vm_release(u, B, 16 * G), CCA_ERR_UPSTREAM, "is 16777216 bytes", 0);
    EXPECT_REFUSED(u, cca_upstream_vm_release(u, gone, 4 * G), CCA_ERR_UPSTREAM, "no range reserved there", 0);

    /* the maps and their contents survived every refusal */
    for (size_t i = 0; i < 3 * G; i += P)
        cr_assert_eq(A[G + i], 0x5a, "byte %zu of the maps changed", i);
    TU_ASSERT_FAULTS(A);
    TU_ASSERT_FAULTS(A + 4 * G);
    TU_ASSERT_FAULTS(B);

    /* a range empties only when its last mapped granule is unmapped: the
     * head of the first map, then the rest of it with the second map */
    vm_unmap(u, A + G, G);
    EXPECT_REFUSED(u, cca_upstream_vm_release(u, A, 8 * G), CCA_ERR_UPSTREAM, "still in it", 0);
    EXPECT_REFUSED(u, cca_upstream_vm_unmap(u, A + G, 3 * G), CCA_ERR_UPSTREAM, "nothing is mapped", 0);
    vm_unmap(u, A + 2 * G, 2 * G);
    EXPECT_REFUSED(u, cca_upstream_vm_unmap(u, A + 3 * G, G), CCA_ERR_UPSTREAM, "nothing is mapped", 0);
    vm_release(u, A, 8 * G);
    vm_release(u, B, 8 * G);
    EXPECT_REFUSED(u, cca_upstream_vm_release(u, B, 8 * G), CCA_ERR_UPSTREAM, "no range reserved there", 0);
    EXPECT_REFUSED(u, cca_upstream_vm_map(u, A + G, G), CCA_ERR_UPSTREAM, "not inside any reserved range", 1);
    ASSERT_VM_STATS(u, 0, 0, 0, 2, 2, 12);
    ASSERT_FREE(u, 64 * MiB);
    cca_upstream_destroy(u);
    assert_no_leaks();
}

Test(upstream_vm, classic_addresses_are_not_vm_addresses_and_the_other_way_round) {
    const size_t G = 2 * MiB;
    cca_upstream *u = make_vm_device(32 * MiB, 0);
    void *p = NULL;
    cr_assert_eq(cca_upstream_alloc(u, 4 * G, &p), CCA_OK);
    char *c = (char *)(((uintptr_t)p + G - 1) & ~(uintptr_t)(G - 1)); /* an aligned address in the classic range */
    EXPECT_REFUSED(u, cca_upstream_vm_map(u, c, G), CCA_ERR_UPSTREAM, "not inside any reserved range", 1);
    EXPECT_REFUSED(u, cca_upstream_vm_unmap(u, c, G), CCA_ERR_UPSTREAM, "nothing is mapped", 0);
    EXPECT_REFUSED(u, cca_upstream_vm_release(u, c, G), CCA_ERR_UPSTREAM, "no range reserved there", 0);
    char *r = vm_reserve(u, 2 * G);
    vm_map(u, r, G);
    EXPECT_REFUSED(u, cca_upstream_free(u, r, G), CCA_ERR_UPSTREAM, "not an allocation", 0);
    vm_unmap(u, r, G);
    vm_release(u, r, 2 * G);
    cr_assert_eq(cca_upstream_free(u, p, 4 * G), CCA_OK);
    cca_upstream_destroy(u);
}

/* ---- granules: release granule by granule -------------------------------------- */

/* Every byte of [p, p + len) reads pattern(i + off, seed); one byte a page. */
static void assert_pattern(const char *p, size_t len, size_t off, int seed, const char *what) {
    for (size_t i = 0; i < len; i += 4096)
        if (p[i] != pattern(i + off, seed))
            cr_assert_fail("%s: byte %zu reads %d, wrote %d", what, i, p[i], pattern(i + off, seed));
    if (len && p[len - 1] != pattern(len - 1 + off, seed))
        cr_assert_fail("%s: the last byte reads %d, wrote %d", what, p[len - 1], pattern(len - 1 + off, seed));
}

static void fill_pattern(char *p, size_t len, size_t off, int seed) {
    for (size_t i = 0; i < len; i++)
        p[i] = pattern(i + off, seed);
}

Test(upstream_vm, the_middle_granule_of_a_map_unmaps_alone_and_its_neighbours_keep_their_data) {
    const size_t G = 2 * MiB, cap = 32 * MiB;
    cca_upstream *u = make_vm_device(cap, 0);
    char *r = vm_reserve(u, 8 * G);
    char *m = r + G; /* granules 1, 2, 3 of the range: one map */
    vm_map(u, m, 3 * G);
    fill_pattern(m, 3 * G, 0, 5);
    ASSERT_VM_STATS(u, 8 * G, 3 * G, 3 * G, 1, 0, 0);

    vm_unmap(u, m + G, G); /* the middle one */
    ASSERT_VM_STATS(u, 8 * G, 2 * G, 2 * G, 1, 1, 0);
    ASSERT_FREE(u, cap - 2 * G);
    TU_ASSERT_FAULTS(m + G);
    TU_ASSERT_FAULTS(m + G + G / 2);
    TU_ASSERT_FAULTS(m + 2 * G - 1);
    TU_ASSERT_READABLE(m + G - 1);
    TU_ASSERT_READABLE(m + 2 * G);
    assert_pattern(m, G, 0, 5, "the first granule");
    assert_pattern(m + 2 * G, G, 2 * G, 5, "the last granule");

    /* the hole is not mapped: unmapping it again, or the whole map, is
     * refused and changes nothing */
    EXPECT_REFUSED(u, cca_upstream_vm_unmap(u, m + G, G), CCA_ERR_UPSTREAM, "nothing is mapped", 0);
    EXPECT_REFUSED(u, cca_upstream_vm_unmap(u, m, 3 * G), CCA_ERR_UPSTREAM, "nothing is mapped", 0);
    /* what is left of the map is still mapped: a map over it is refused */
    EXPECT_REFUSED(u, cca_upstream_vm_map(u, m, 2 * G), CCA_ERR_UPSTREAM, "overlaps the map", 1);
    EXPECT_REFUSED(u, cca_upstream_vm_map(u, m + G, 2 * G), CCA_ERR_UPSTREAM, "overlaps the map", 1);
    assert_pattern(m, G, 0, 5, "the first granule after the refusals");
    assert_pattern(m + 2 * G, G, 2 * G, 5, "the last granule after the refusals");

    /* the hole maps again, with new memory (zeros); then all three granules
     * (three records now: head, new map, tail) unmap in one call */
    vm_map(u, m + G, G);
    ASSERT_VM_STATS(u, 8 * G, 3 * G, 3 * G, 2, 1, 2);
    for (size_t i = 0; i < G; i += 4096)
        cr_assert_eq(m[G + i], 0, "the new middle granule reads %d at %zu", m[G + i], i);
    assert_pattern(m, G, 0, 5, "the first granule after the new map");
    assert_pattern(m + 2 * G, G, 2 * G, 5, "the last granule after the new map");
    vm_unmap(u, m, 3 * G);
    ASSERT_VM_STATS(u, 8 * G, 0, 0, 2, 2, 2);
    ASSERT_FREE(u, cap);
    TU_ASSERT_FAULTS(m);
    TU_ASSERT_FAULTS(m + 3 * G - 1);

    /* the head and the tail of a map, each alone */
    vm_map(u, r, 4 * G);
    fill_pattern(r, 4 * G, 0, 6);
    vm_unmap(u, r, G);
    vm_unmap(u, r + 3 * G, G);
    ASSERT_VM_STATS(u, 8 * G, 2 * G, 2 * G, 3, 4, 2);
    ASSERT_FREE(u, cap - 2 * G);
    TU_ASSERT_FAULTS(r + G - 1);
    TU_ASSERT_FAULTS(r + 3 * G);
    assert_pattern(r + G, 2 * G, G, 6, "the middle of the map");
    vm_unmap(u, r + G, 2 * G);
    ASSERT_VM_STATS(u, 8 * G, 0, 0, 3, 5, 2);
    vm_release(u, r, 8 * G);
    ASSERT_FREE(u, cap);
    cca_upstream_destroy(u);
    assert_no_leaks();
}

Test(upstream_vm, one_unmap_spans_adjacent_maps_made_by_separate_calls) {
    const size_t G = 2 * MiB, cap = 32 * MiB;
    cca_upstream *u = make_vm_device(cap, 0);
    char *r = vm_reserve(u, 8 * G);
    /* granules [0,2), [2,3), [3,5), [5,6): four maps, one run */
    vm_map(u, r, 2 * G);
    vm_map(u, r + 2 * G, G);
    vm_map(u, r + 3 * G, 2 * G);
    vm_map(u, r + 5 * G, G);
    fill_pattern(r, 6 * G, 0, 7);
    ASSERT_VM_STATS(u, 8 * G, 6 * G, 6 * G, 4, 0, 0);

    /* [1,4): the tail of the first, all of the second, the head of the third */
    vm_unmap(u, r + G, 3 * G);
    ASSERT_VM_STATS(u, 8 * G, 3 * G, 3 * G, 4, 1, 0);
    ASSERT_FREE(u, cap - 3 * G);
    TU_ASSERT_FAULTS(r + G);
    TU_ASSERT_FAULTS(r + 2 * G);
    TU_ASSERT_FAULTS(r + 4 * G - 1);
    assert_pattern(r, G, 0, 7, "granule 0");
    assert_pattern(r + 4 * G, 2 * G, 4 * G, 7, "granules 4 and 5");

    /* [4,6): what was left of the third map with all of the fourth */
    vm_unmap(u, r + 4 * G, 2 * G);
    ASSERT_VM_STATS(u, 8 * G, G, G, 4, 2, 0);
    TU_ASSERT_FAULTS(r + 5 * G);
    assert_pattern(r, G, 0, 7, "granule 0");

    /* exactly one map, as before */
    vm_unmap(u, r, G);
    ASSERT_VM_STATS(u, 8 * G, 0, 0, 4, 3, 0);
    ASSERT_FREE(u, cap);
    vm_release(u, r, 8 * G);
    cca_upstream_destroy(u);
    assert_no_leaks();
}

Test(upstream_vm, a_range_with_one_unmapped_granule_is_refused_and_nothing_changes) {
    const size_t G = 2 * MiB, cap = 32 * MiB;
    cca_upstream *u = make_vm_device(cap, 0);
    char *r = vm_reserve(u, 8 * G);
    /* mapped: [0,2) and [3,6), then granule 4 unmapped out of the second:
     *   0 1 2 3 4 5 6 7
     *   # # . # . # . .   */
    vm_map(u, r, 2 * G);
    vm_map(u, r + 3 * G, 3 * G);
    fill_pattern(r, 2 * G, 0, 8);
    fill_pattern(r + 3 * G, 3 * G, 3 * G, 8);
    vm_unmap(u, r + 4 * G, G);
    ASSERT_VM_STATS(u, 8 * G, 4 * G, 4 * G, 2, 1, 0);
    struct {
        size_t from, n, hole;
    } bad[] = {
        {0, 3, 2}, /* both granules of a map and the gap after it */
        {1, 3, 2}, /* across the gap between two maps */
        {0, 6, 2}, /* everything mapped and both gaps */
        {3, 2, 4}, /* into the hole an unmap cut in a map */
        {3, 3, 4}, /* over that hole, from one piece of the map to the other */
        {5, 2, 6}, /* past the last mapped granule */
        {2, 1, 2}, /* the gap alone */
        {4, 1, 4}, /* the cut hole alone */
        {6, 2, 6}, /* never mapped */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char words[64];
        snprintf(words, sizeof words, "(%zu bytes in)", (bad[i].hole - bad[i].from) * G);
        EXPECT_REFUSED(u, cca_upstream_vm_unmap(u, r + bad[i].from * G, bad[i].n * G), CCA_ERR_UPSTREAM, words, 0);
        /* every mapped granule still mapped, with its data; holes fault */
        assert_pattern(r, 2 * G, 0, 8, "granules 0 and 1");
        assert_pattern(r + 3 * G, G, 3 * G, 8, "granule 3");
        assert_pattern(r + 5 * G, G, 5 * G, 8, "granule 5");
        TU_ASSERT_FAULTS(r + 2 * G);
        TU_ASSERT_FAULTS(r + 4 * G);
        TU_ASSERT_FAULTS(r + 6 * G);
    }
    ASSERT_VM_STATS(u, 8 * G, 4 * G, 4 * G, 2, 1, 0);
    ASSERT_FREE(u, cap - 4 * G);
    vm_unmap(u, r, 2 * G);
    vm_unmap(u, r + 3 * G, G);
    vm_unmap(u, r + 5 * G, G);
    ASSERT_VM_STATS(u, 8 * G, 0, 0, 2, 4, 0);
    vm_release(u, r, 8 * G);
    cca_upstream_destroy(u);
    assert_no_leaks();
}

/* The maps are private anonymous pages: replacing part of one by PROT_NONE
 * pages frees that part at once, which resident memory shows. */
Test(upstream_vm, part_of_a_map_unmapped_goes_back_to_the_os_while_the_rest_stays) {
    const size_t size = 64 * MiB, half = 32 * MiB, quarter = 16 * MiB;
    size_t P = tu_page_size();
    cca_upstream *u = make_vm_device(128 * MiB, 0);
    char *r = vm_reserve(u, size);
    vm_map(u, r, size);
    size_t r0 = tu_resident_bytes();
    for (size_t i = 0; i < size; i += P)
        r[i] = (char)(1 + i / P % 251);
    size_t r1 = tu_resident_bytes();
    cr_assert_geq(r1, r0 + 60 * MiB, "touching 64 MiB of a map raised resident memory only from %zu to %zu", r0, r1);
    /* the middle 32 MiB: the map stays mapped on both sides, yet its pages
     * under the hole are freed */
    vm_unmap(u, r + quarter, half);
    size_t r2 = tu_resident_bytes();
    cr_assert_leq(r2 + 28 * MiB, r1, "unmapping 32 MiB of a 64 MiB map lowered resident memory only from %zu to %zu",
                  r1, r2);
    ASSERT_VM_STATS(u, size, half, half, 1, 1, 0);
    ASSERT_FREE(u, 128 * MiB - half);
    TU_ASSERT_FAULTS(r + quarter);
    TU_ASSERT_FAULTS(r + quarter + half - 1);
    for (size_t i = 0; i < quarter; i += P)
        cr_assert_eq(r[i], (char)(1 + i / P % 251), "byte %zu of the head changed", i);
    for (size_t i = quarter + half; i < size; i += P)
        cr_assert_eq(r[i], (char)(1 + i / P % 251), "byte %zu of the tail changed", i);
    /* the head alone: its pages go too, the tail's stay */
    vm_unmap(u, r, quarter);
    size_t r3 = tu_resident_bytes();
    cr_assert_leq(r3 + 14 * MiB, r2, "unmapping the 16 MiB head lowered resident memory only from %zu to %zu", r2, r3);
    cr_assert_eq(r[size - P], (char)(1 + (size - P) / P % 251), "the tail lost its data");
    vm_unmap(u, r + quarter + half, quarter);
    size_t r4 = tu_resident_bytes();
    cr_assert_leq(r4 + 14 * MiB, r3, "unmapping the 16 MiB tail lowered resident memory only from %zu to %zu", r3, r4);
    ASSERT_VM_STATS(u, size, 0, 0, 1, 3, 0);
    vm_release(u, r, size);
    cca_upstream_destroy(u);
}

/* Seeded random maps and unmaps on one range against a model of one bit per
 * granule. Ranges are drawn at random (mostly refused) or grown from a
 * random granule over its run of mapped or unmapped neighbours (mostly
 * granted); the capacity is under the range, so OOM happens too. After
 * every step: the status the model predicts, the stats and mem_info from
 * the model, each granule faulting or readable as the model says, and each
 * mapped granule holding the stamp written when it was mapped (a new map
 * reads zeros first). */
#define MODEL_GRANULES 48
#define MODEL_CAP 24
#define MODEL_STEPS 1500

static void check_model(cca_upstream *u, char *r, size_t G, const bool *mapped, const char *stamp, uint64_t maps,
                        uint64_t unmaps, uint64_t failed, int step) {
    size_t n = 0;
    for (size_t i = 0; i < MODEL_GRANULES; i++) {
        n += mapped[i];
        if (mapped[i]) {
            cr_assert_eq(tu_probe(r + i * G), 0, "step %d: granule %zu is mapped but faults", step, i);
            cr_assert_eq(r[i * G], stamp[i], "step %d: granule %zu reads %d, stamped %d", step, i, r[i * G], stamp[i]);
            cr_assert_eq(r[i * G + G - 1], stamp[i], "step %d: granule %zu's last byte lost its stamp", step, i);
        } else {
            cr_assert_eq(tu_probe(r + i * G), EFAULT, "step %d: granule %zu is not mapped but readable", step, i);
        }
    }
    cca_upstream_stats s = tu_upstream_stats(u);
    cr_assert_eq(s.vm_mapped_bytes, n * G, "step %d: vm_mapped_bytes %zu, model %zu", step, s.vm_mapped_bytes, n * G);
    cr_assert_eq(s.bytes_in_use, n * G, "step %d: bytes_in_use %zu, model %zu", step, s.bytes_in_use, n * G);
    cr_assert_eq(s.vm_map_calls, maps, "step %d: vm_map_calls", step);
    cr_assert_eq(s.vm_unmap_calls, unmaps, "step %d: vm_unmap_calls", step);
    cr_assert_eq(s.vm_failed_maps, failed, "step %d: vm_failed_maps", step);
    cr_assert_eq(free_bytes(u), (MODEL_CAP - n) * G, "step %d: mem_info free %zu, model %zu", step, free_bytes(u),
                 (MODEL_CAP - n) * G);
}

Test(upstream_vm, random_maps_and_unmaps_agree_with_a_model_of_one_bit_per_granule) {
    const size_t G = 64 * KiB;
    for (uint64_t seed = 1; seed <= 4; seed++) {
        cca_upstream *u = make_vm_device(MODEL_CAP * G, G);
        char *r = vm_reserve(u, MODEL_GRANULES * G);
        bool mapped[MODEL_GRANULES] = {0};
        char stamp[MODEL_GRANULES] = {0};
        uint64_t rng = seed * 0x9e3779b97f4a7c15u, maps = 0, unmaps = 0, failed = 0;
        size_t granted[2] = {0, 0}, refused[2] = {0, 0}, ooms = 0;
        for (int step = 0; step < MODEL_STEPS; step++) {
            bool map = tu_rand(&rng) % 2 == 0;
            size_t from = tu_rand(&rng) % MODEL_GRANULES, n;
            if (tu_rand(&rng) % 4 == 0) { /* any range */
                n = 1 + tu_rand(&rng) % (MODEL_GRANULES - from);
            } else { /* within the run at `from` of granules that allow the call */
                size_t run = 0;
                while (from + run < MODEL_GRANULES && mapped[from + run] == !map)
                    run++;
                n = run ? 1 + tu_rand(&rng) % run : 1;
            }
            size_t now = 0, inside = 0;
            for (size_t i = 0; i < MODEL_GRANULES; i++)
                now += mapped[i];
            for (size_t i = from; i < from + n; i++)
                inside += mapped[i];
            cca_status want, st;
            if (map) {
                want = inside ? CCA_ERR_UPSTREAM : now + n > MODEL_CAP ? CCA_ERR_OUT_OF_MEMORY : CCA_OK;
                st = cca_upstream_vm_map(u, r + from * G, n * G);
            } else {
                want = inside == n ? CCA_OK : CCA_ERR_UPSTREAM;
                st = cca_upstream_vm_unmap(u, r + from * G, n * G);
            }
            cr_assert_eq(st, want, "seed %llu step %d: vm_%s of granules [%zu, %zu) returned %s, model %s (%s)",
                         (unsigned long long)seed, step, map ? "map" : "unmap", from, from + n, cca_status_string(st),
                         cca_status_string(want), cca_last_error());
            if (st == CCA_OK) {
                granted[map]++;
                if (map)
                    maps++;
                else
                    unmaps++;
                for (size_t i = from; i < from + n; i++) {
                    mapped[i] = map;
                    if (map) { /* new memory reads zeros; stamp it */
                        cr_assert_eq(r[i * G], 0, "seed %llu step %d: granule %zu of a new map is not zeroed",
                                     (unsigned long long)seed, step, i);
                        stamp[i] = (char)(1 + (step + (int)i) % 127);
                        r[i * G] = r[i * G + G - 1] = stamp[i];
                    }
                }
            } else {
                refused[map]++;
                ooms += st == CCA_ERR_OUT_OF_MEMORY;
                failed += map;
            }
            check_model(u, r, G, mapped, stamp, maps, unmaps, failed, step);
        }
        /* every path was taken */
        cr_log_info("seed %llu: maps %zu granted, %zu refused (%zu OOM); unmaps %zu granted, %zu refused",
                    (unsigned long long)seed, granted[1], refused[1], ooms, granted[0], refused[0]);
        cr_assert_gt(granted[0], 50, "seed %llu: only %zu unmaps granted", (unsigned long long)seed, granted[0]);
        cr_assert_gt(granted[1], 50, "seed %llu: only %zu maps granted", (unsigned long long)seed, granted[1]);
        cr_assert_gt(refused[0], 20, "seed %llu: only %zu unmaps refused", (unsigned long long)seed, refused[0]);
        cr_assert_gt(refused[1], 20, "seed %llu: only %zu maps refused", (unsigned long long)seed, refused[1]);
        cr_assert_gt(ooms, 0, "seed %llu: the device never filled", (unsigned long long)seed);
        /* unmapped run by run, then released */
        for (size_t i = 0; i < MODEL_GRANULES;) {
            size_t n = 0;
            while (i + n < MODEL_GRANULES && mapped[i + n])
                n++;
            if (n) {
                vm_unmap(u, r + i * G, n * G);
                unmaps++;
            }
            i += n ? n : 1;
        }
        ASSERT_VM_STATS(u, MODEL_GRANULES * G, 0, 0, maps, unmaps, failed);
        ASSERT_FREE(u, MODEL_CAP * G);
        vm_release(u, r, MODEL_GRANULES * G);
        cca_upstream_destroy(u);
    }
    assert_no_leaks();
}

/* ---- capacity ---------------------------------------------------------------------- */

Test(upstream_vm, maps_fill_the_capacity_exactly_and_share_it_with_allocations) {
    const size_t G = 2 * MiB, cap = 16 * MiB;
    cca_upstream *u = make_vm_device(cap, 0);
    char *r = vm_reserve(u, 2 * cap); /* address space beyond the capacity costs nothing */
    for (size_t i = 0; i < cap / G; i++) {
        vm_map(u, r + i * G, G);
        ASSERT_FREE(u, cap - (i + 1) * G);
    }
    EXPECT_REFUSED(u, cca_upstream_vm_map(u, r + cap, G), CCA_ERR_OUT_OF_MEMORY, "0 of 16777216 free", 1);
    /* the maps hold the whole device: a classic allocation is refused too */
    void *p = NULL;
    cr_assert_eq(cca_upstream_alloc(u, CCA_GRANULARITY, &p), CCA_ERR_OUT_OF_MEMORY);
    cr_assert_null(p);
    ASSERT_VM_STATS(u, 2 * cap, cap, cap, cap / G, 0, 1);
    cr_assert_eq(tu_upstream_stats(u).failed_allocs, 1);
    /* one granule back: exactly one granule fits again, anywhere in the range */
    vm_unmap(u, r + 3 * G, G);
    ASSERT_FREE(u, G);
    EXPECT_REFUSED(u, cca_upstream_vm_map(u, r + cap, 2 * G), CCA_ERR_OUT_OF_MEMORY, "2097152 of 16777216 free", 1);
    vm_map(u, r + cap + 5 * G, G);
    ASSERT_FREE(u, 0);
    vm_unmap(u, r + cap + 5 * G, G);
    for (size_t i = 0; i < cap / G; i++)
        if (i != 3)
            vm_unmap(u, r + i * G, G);
    ASSERT_FREE(u, cap);

    /* a classic allocation of capacity - one granule leaves room for one map */
    cr_assert_eq(cca_upstream_alloc(u, cap - G, &p), CCA_OK, "%s", cca_last_error());
    ASSERT_FREE(u, G);
    vm_map(u, r, G);
    ASSERT_FREE(u, 0);
    EXPECT_REFUSED(u, cca_upstream_vm_map(u, r + G, G), CCA_ERR_OUT_OF_MEMORY, "0 of 16777216 free", 1);
    cca_upstream_stats s = tu_upstream_stats(u);
    cr_assert_eq(s.bytes_in_use, cap, "classic and mapped bytes together");
    cr_assert_eq(s.vm_mapped_bytes, G);
    cr_assert_eq(s.allocations, 1);
    /* and a map leaves the allocation room for exactly what is left */
    cr_assert_eq(cca_upstream_free(u, p, cap - G), CCA_OK);
    p = NULL;
    cr_assert_eq(cca_upstream_alloc(u, cap - G + CCA_GRANULARITY, &p), CCA_ERR_OUT_OF_MEMORY);
    cr_assert_eq(cca_upstream_alloc(u, cap - G, &p), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_free(u, p, cap - G), CCA_OK);
    vm_unmap(u, r, G);
    vm_release(u, r, 2 * cap);
    ASSERT_FREE(u, cap);
    s = tu_upstream_stats(u);
    cr_assert_eq(s.bytes_in_use, 0);
    cr_assert_eq(s.bytes_in_use_peak, cap);
    cr_assert_eq(s.vm_failed_maps, 3);
    cca_upstream_destroy(u);
}

/* ---- memory -------------------------------------------------------------------------- */

Test(upstream_vm, unmapped_memory_goes_back_to_the_os) {
    const size_t size = 64 * MiB;
    size_t P = tu_page_size();
    cca_upstream *u = make_vm_device(128 * MiB, 0);
    char *r = vm_reserve(u, size);
    size_t r0 = tu_resident_bytes();
    vm_map(u, r, size);
    for (size_t i = 0; i < size; i += P)
        r[i] = (char)(1 + i / P % 251);
    r[size - 1] = 1;
    size_t r1 = tu_resident_bytes();
    cr_assert_geq(r1, r0 + 60 * MiB, "touching 64 MiB of a map raised resident memory only from %zu to %zu", r0, r1);
    vm_unmap(u, r, size);
    size_t r2 = tu_resident_bytes();
    cr_assert_leq(r2 + 60 * MiB, r1, "unmapping 64 MiB lowered resident memory only from %zu to %zu", r1, r2);
    TU_ASSERT_FAULTS(r);
    TU_ASSERT_FAULTS(r + size - 1);
    /* mapped again: zeros (a read of an untouched page may map the kernel's
     * shared zero page: nothing to assert on resident memory here) */
    vm_map(u, r, size);
    for (size_t i = 0; i < size; i += P)
        cr_assert_eq(r[i], 0, "byte %zu of the new map reads %d, not 0", i, r[i]);
    vm_unmap(u, r, size);
    size_t r3 = tu_resident_bytes();
    cr_assert_leq(r3, r2 + 4 * MiB, "after the second unmap resident memory is %zu, was %zu", r3, r2);
    vm_release(u, r, size);
    cca_upstream_destroy(u);
}

/* A map the OS refuses while the range stays as it was: the process's
 * address space above its RLIMIT_AS (lowered after the range was reserved),
 * where the kernel refuses even a mapping that replaces another of the same
 * size, and so would refuse putting the reserved pages back too. ENOMEM is
 * out of memory, not an upstream failure: the range is intact (a touch
 * still faults, the map made before keeps its data) and the same map
 * succeeds once the limit is lifted. Nothing between setrlimit and its
 * undoing allocates (Criterion's asserts may): the status and message are
 * kept and asserted after. */
Test(upstream_vm, a_map_the_os_refuses_is_out_of_memory_and_leaves_the_range_intact) {
    cca_upstream *u = make_vm_device(64 * MiB, 0);
    size_t g = granularity(u);
    char *r = vm_reserve(u, 4 * g);
    vm_map(u, r, g);
    r[0] = 7;
    snapshot before = take(u);
    struct rlimit old = tu_as_limit_below_now();
    cca_status st = cca_upstream_vm_map(u, r + 2 * g, g);
    char why[512];
    snprintf(why, sizeof why, "%s", cca_last_error());
    tu_as_limit_lift(&old);
    cr_assert_eq(st, CCA_ERR_OUT_OF_MEMORY, "vm_map under the limit: %s: %s", cca_status_string(st), why);
    char want[256];
    snprintf(want, sizeof want, "host device: vm_map of %p (%zu bytes): mmap: %s", (void *)(r + 2 * g), g,
             strerror(ENOMEM));
    cr_assert_str_eq(why, want);
    assert_unchanged(u, &before, 1, "a map the OS refused");
    TU_ASSERT_FAULTS(r + 2 * g);
    cr_assert_eq(r[0], 7, "the map made before lost its data");
    vm_map(u, r + 2 * g, g);
    cr_assert_eq(r[2 * g], 0);
    r[2 * g + g - 1] = 1;
    vm_unmap(u, r + 2 * g, g);
    vm_unmap(u, r, g);
    vm_release(u, r, 4 * g);
    cca_upstream_destroy(u);
}

/* An unmap while the kernel refuses every new mapping (RLIMIT_AS below the
 * address space) still gives the pages back, in place (mprotect,
 * MADV_DONTNEED): the middle of a map goes, a touch there faults, its two
 * ends keep their data, the stats are exact, and the hole maps again as
 * zeros once the limit is lifted. */
Test(upstream_vm, an_unmap_while_new_mappings_are_refused_still_gives_the_pages_back) {
    cca_upstream *u = make_vm_device(64 * MiB, 0);
    size_t g = granularity(u);
    char *r = vm_reserve(u, 8 * g);
    vm_map(u, r, 8 * g);
    memset(r, 0x5a, 8 * g);
    size_t r1 = tu_resident_bytes();
    struct rlimit old = tu_as_limit_below_now();
    cca_status st = cca_upstream_vm_unmap(u, r + 2 * g, 4 * g);
    char why[512];
    snprintf(why, sizeof why, "%s", cca_last_error());
    tu_as_limit_lift(&old);
    cr_assert_eq(st, CCA_OK, "unmap under the limit: %s: %s", cca_status_string(st), why);
    ASSERT_VM_STATS(u, 8 * g, 4 * g, 4 * g, 1, 1, 0);
    ASSERT_FREE(u, 64 * MiB - 4 * g);
    size_t r2 = tu_resident_bytes();
    cr_assert_leq(r2 + 4 * g - 2 * MiB, r1, "unmapping %zu bytes lowered resident memory only from %zu to %zu", 4 * g,
                  r1, r2);
    TU_ASSERT_FAULTS(r + 2 * g);
    TU_ASSERT_FAULTS(r + 6 * g - 1);
    cr_assert_eq(r[2 * g - 1], 0x5a);
    cr_assert_eq(r[6 * g], 0x5a);
    vm_map(u, r + 2 * g, 4 * g);
    cr_assert_eq(r[2 * g], 0, "fresh pages, not the old contents");
    cr_assert_eq(r[6 * g - 1], 0);
    vm_unmap(u, r, 8 * g);
    vm_release(u, r, 8 * g);
    cca_upstream_destroy(u);
}

/* An unmap that can give the pages back neither way (new mappings
 * refused, RLIMIT_AS; the granule mlocked, so MADV_DONTNEED refuses with
 * EINVAL) is CCA_ERR_UPSTREAM naming the reason and changes nothing: the
 * stats, and the granule still mapped, readable and writable with its data
 * (give_back's PROT_NONE undone); it unmaps once the pages can go (fresh pages over locked ones). */
Test(upstream_vm, an_unmap_that_cannot_give_the_pages_back_changes_nothing) {
    size_t P = tu_page_size();
    cca_upstream *u = make_vm_device(16 * MiB, P);
    char *r = vm_reserve(u, 4 * P);
    vm_map(u, r, 3 * P);
    memset(r, 0x5a, 3 * P);
    char why_not[160];
    if (!tu_mlock(r + P, P, why_not, sizeof why_not))
        cr_skip_test("%s", why_not);
    snapshot before = take(u);
    struct rlimit old = tu_as_limit_below_now();
    cca_status st = cca_upstream_vm_unmap(u, r + P, P);
    char why[512];
    snprintf(why, sizeof why, "%s", cca_last_error());
    tu_as_limit_lift(&old);
    cr_assert_eq(st, CCA_ERR_UPSTREAM, "unmap of a locked granule under the limit: %s: %s", cca_status_string(st), why);
    char want[256];
    snprintf(want, sizeof want, "host device: vm_unmap of %p (%zu bytes): giving the pages back failed: %s",
             (void *)(r + P), P, strerror(EINVAL));
    cr_assert_str_eq(why, want);
    assert_unchanged(u, &before, 0, "an unmap that could not give the pages back");
    TU_ASSERT_READABLE(r + P);
    TU_ASSERT_READABLE(r + 2 * P - 1);
    cr_assert_eq(r[P], 0x5a, "the granule lost its data");
    r[2 * P - 1] = 1;      /* still writable */
    vm_unmap(u, r + P, P); /* fresh pages replace locked ones too */
    TU_ASSERT_FAULTS(r + P);
    cr_assert_eq(r[0], 0x5a);
    cr_assert_eq(r[2 * P], 0x5a);
    vm_unmap(u, r, P);
    vm_unmap(u, r + 2 * P, P);
    vm_release(u, r, 4 * P);
    cca_upstream_destroy(u);
}

Test(upstream_vm, touching_unmapped_memory_kills_with_sigsegv) {
    const size_t G = 2 * MiB;
    cca_upstream *u = make_vm_device(16 * MiB, 0);
    char *r = vm_reserve(u, 4 * G);
    vm_map(u, r + G, 2 * G);
    volatile char *v = r + G;
    v[G] = 1; /* the second granule, in the child too */
    cr_assert_eq(v[G], 1);
    vm_unmap(u, r + G, 2 * G);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL); /* not ASan's handler, nor anyone's: die of it */
        v[G] = 2;
        _exit(0); /* survived: the parent fails the test */
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid, "waitpid: %s", strerror(errno));
    cr_assert(WIFSIGNALED(status), "the child was not killed by a signal (exit status %d)",
              WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    cr_assert_eq(WTERMSIG(status), SIGSEGV, "the child died of signal %d, not SIGSEGV", WTERMSIG(status));

    /* the same write into a map kills nobody */
    vm_map(u, r + G, 2 * G);
    fflush(NULL);
    pid = fork();
    cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL);
        v[G] = 2;
        _exit(v[G] == 2 ? 0 : 3);
    }
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a write into a map failed in the child");
    vm_unmap(u, r + G, 2 * G);
    vm_release(u, r, 4 * G);
    cca_upstream_destroy(u);
}

Test(upstream_vm, maps_made_apart_are_one_contiguous_usable_run) {
    const size_t G = 2 * MiB;
    size_t P = tu_page_size();
    cca_upstream *u = make_vm_device(16 * MiB, 0);
    char *r = vm_reserve(u, 4 * G);
    vm_map(u, r, G);
    vm_map(u, r + G, G);
    /* one memset, one check, across the boundary */
    memset(r + G - 3 * P, 0xab, 6 * P);
    for (size_t i = G - 3 * P; i < G + 3 * P; i++)
        cr_assert_eq((unsigned char)r[i], 0xab, "byte %zu across the boundary reads %d", i, r[i]);
    for (size_t i = 0; i < 2 * G; i++)
        r[i] = pattern(i, 3);
    for (size_t i = 0; i < 2 * G; i++)
        if (r[i] != pattern(i, 3))
            cr_assert_fail("byte %zu of the run reads %d, wrote %d", i, r[i], pattern(i, 3));
    char tmp[256];
    memcpy(tmp, r + G - 128, sizeof tmp); /* one copy straddling both maps */
    cr_assert_eq(memcmp(tmp, r + G - 128, sizeof tmp), 0);
    TU_ASSERT_FAULTS(r + 2 * G);
    /* unmapped one at a time: the other keeps its pages and contents */
    vm_unmap(u, r, G);
    TU_ASSERT_FAULTS(r);
    TU_ASSERT_FAULTS(r + G - 1);
    TU_ASSERT_READABLE(r + G);
    for (size_t i = G; i < 2 * G; i += P)
        cr_assert_eq(r[i], pattern(i, 3), "byte %zu of the second map changed", i);
    vm_unmap(u, r + G, G);
    TU_ASSERT_FAULTS(r + G);
    ASSERT_VM_STATS(u, 4 * G, 0, 0, 2, 2, 0);
    vm_release(u, r, 4 * G);
    cca_upstream_destroy(u);
}

/* ---- latency ------------------------------------------------------------------------- */

Test(upstream_vm, map_and_unmap_latencies_are_waited_granted_or_refused) {
    const uint64_t ms = 1000000;
    const size_t G = 2 * MiB;
    cca_host_options o = {.capacity = 2 * G, .alloc_latency_ns = 2 * ms, .free_latency_ns = 3 * ms};
    cca_upstream *u = NULL;
    cr_assert_eq(cca_upstream_host_create_with(&o, &u), CCA_OK, "%s", cca_last_error());
    char *r = vm_reserve(u, 4 * G);
    uint64_t t0 = tu_now_ns();
    vm_map(u, r, 2 * G);
    uint64_t t1 = tu_now_ns();
    cr_assert_geq(t1 - t0, 2 * ms, "map took %llu ns", (unsigned long long)(t1 - t0));
    cr_assert_eq(cca_upstream_vm_map(u, r + 2 * G, G), CCA_ERR_OUT_OF_MEMORY);
    uint64_t t2 = tu_now_ns();
    cr_assert_geq(t2 - t1, 2 * ms, "a refused map took %llu ns", (unsigned long long)(t2 - t1));
    vm_unmap(u, r, 2 * G);
    uint64_t t3 = tu_now_ns();
    cr_assert_geq(t3 - t2, 3 * ms, "unmap took %llu ns", (unsigned long long)(t3 - t2));
    cr_assert_eq(cca_upstream_vm_unmap(u, r, 2 * G), CCA_ERR_UPSTREAM);
    uint64_t t4 = tu_now_ns();
    cr_assert_geq(t4 - t3, 3 * ms, "a refused unmap took %llu ns", (unsigned long long)(t4 - t3));
    vm_release(u, r, 4 * G);
    cca_upstream_destroy(u);
}

/* Per granule: a granted map of n granules waits the call's latency plus n
 * times the map latency, an unmap of n granules n times the unmap latency;
 * a refused call only the call's. Lower bounds (a busy-wait never ends
 * early) and, for the refusals, an upper bound far above the call's own
 * charge and far below what a per-granule charge would add. */
Test(upstream_vm, granule_latencies_are_waited_per_granule_of_granted_calls) {
    const uint64_t ms = 1000000;
    const size_t G = 64 * KiB;
    cca_host_options o = {.capacity = 64 * G,
                          .vm_granularity = G,
                          .vm_map_granule_latency_ns = 5 * ms,
                          .vm_unmap_granule_latency_ns = 7 * ms,
                          .vm_backing = CCA_VM_PAGES}; /* whole maps charge once per map */
    cca_upstream *u = NULL;
    cr_assert_eq(cca_upstream_host_create_with(&o, &u), CCA_OK, "%s", cca_last_error());
    char *r = vm_reserve(u, 128 * G);
    uint64_t t0 = tu_now_ns();
    vm_map(u, r, 4 * G);
    uint64_t t1 = tu_now_ns();
    cr_assert_geq(t1 - t0, 4 * 5 * ms, "a map of 4 granules took %llu ns", (unsigned long long)(t1 - t0));
    vm_map(u, r + 4 * G, G);
    uint64_t t2 = tu_now_ns();
    cr_assert_geq(t2 - t1, 5 * ms, "a map of 1 granule took %llu ns", (unsigned long long)(t2 - t1));
    /* refused: overlapping (the rule), and more than the device holds */
    cr_assert_eq(cca_upstream_vm_map(u, r + 10 * G, 100 * G), CCA_ERR_OUT_OF_MEMORY);
    cr_assert_neq(cca_upstream_vm_map(u, r + 3 * G, 2 * G), CCA_OK);
    cr_assert_neq(cca_upstream_vm_unmap(u, r + 5 * G, 20 * G), CCA_OK);
    uint64_t t3 = tu_now_ns();
    cr_assert_lt(t3 - t2, 200 * 5 * ms, "refused calls were charged per granule (%llu ns)",
                 (unsigned long long)(t3 - t2));
    vm_unmap(u, r + G, 3 * G);
    uint64_t t4 = tu_now_ns();
    cr_assert_geq(t4 - t3, 3 * 7 * ms, "an unmap of 3 granules took %llu ns", (unsigned long long)(t4 - t3));
    vm_unmap(u, r, G);
    vm_unmap(u, r + 4 * G, G);
    uint64_t t5 = tu_now_ns();
    cr_assert_geq(t5 - t4, 2 * 7 * ms, "two unmaps of 1 granule took %llu ns", (unsigned long long)(t5 - t4));
    ASSERT_VM_STATS(u, 128 * G, 0, 0, 2, 3, 2);
    vm_release(u, r, 128 * G);
    cca_upstream_destroy(u);
}

/* ---- ops tables ---------------------------------------------------------------------- */

static cca_status stub_alloc(void *ctx, size_t size, void **ptr) {
    (void)ctx, (void)size, (void)ptr;
    return CCA_ERR_OUT_OF_MEMORY;
}
static cca_status stub_free(void *ctx, void *ptr, size_t size) {
    (void)ctx, (void)ptr, (void)size;
    return CCA_ERR_UPSTREAM;
}
static cca_status stub_mem_info(void *ctx, size_t *free_bytes, size_t *total_bytes) {
    (void)ctx;
    *free_bytes = *total_bytes = GiB;
    return CCA_OK;
}
static cca_status stub_granularity(void *ctx, size_t *bytes) {
    (void)ctx;
    *bytes = 2 * MiB;
    return CCA_OK;
}
static cca_status stub_reserve(void *ctx, size_t size, void **base) {
    (void)ctx, (void)size, (void)base;
    return CCA_ERR_OUT_OF_MEMORY;
}
static cca_status stub_span(void *ctx, void *addr, size_t size) {
    (void)ctx, (void)addr, (void)size;
    return CCA_ERR_UPSTREAM;
}

Test(upstream_vm, a_custom_upstream_has_all_five_vm_ops_or_none) {
    const cca_upstream_ops all = {.alloc = stub_alloc,
                                  .free = stub_free,
                                  .mem_info = stub_mem_info,
                                  .name = "stub",
                                  .vm_granularity = stub_granularity,
                                  .vm_reserve = stub_reserve,
                                  .vm_release = stub_span,
                                  .vm_map = stub_span,
                                  .vm_unmap = stub_span};
    for (int missing = 0; missing < 5; missing++) {
        cca_upstream_ops o = all;
        if (missing == 0)
            o.vm_granularity = NULL;
        if (missing == 1)
            o.vm_reserve = NULL;
        if (missing == 2)
            o.vm_release = NULL;
        if (missing == 3)
            o.vm_map = NULL;
        if (missing == 4)
            o.vm_unmap = NULL;
        cca_upstream *u = (cca_upstream *)1;
        cr_assert_eq(cca_upstream_custom_create(&o, NULL, &u), CCA_ERR_INVALID_ARGUMENT, "vm op %d missing: accepted",
                     missing);
        cr_assert_null(u);
        cr_assert_not_null(strstr(cca_last_error(), "vm_"), "message: %s", cca_last_error());
    }
    cca_upstream_ops only_map = {.alloc = stub_alloc, .free = stub_free, .vm_map = stub_span};
    cca_upstream *u = (cca_upstream *)1;
    cr_assert_eq(cca_upstream_custom_create(&only_map, NULL, &u), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_null(u);

    /* all five: accepted */
    cr_assert_eq(cca_upstream_custom_create(&all, NULL, &u), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_has_vm(u), 1);
    cr_assert_eq(granularity(u), 2 * MiB);
    cca_upstream_destroy(u);

    /* none: classic only, and every vm call says so */
    cca_upstream_ops none = {.alloc = stub_alloc, .free = stub_free, .mem_info = stub_mem_info, .name = "classic"};
    cr_assert_eq(cca_upstream_custom_create(&none, NULL, &u), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_has_vm(u), 0);
    static char somewhere[4096];
    size_t g = 1;
    void *b = (void *)1;
    cr_assert_eq(cca_upstream_vm_granularity(u, &g), CCA_ERR_UPSTREAM);
    cr_assert_eq(g, 0);
    cr_assert_eq(cca_upstream_vm_reserve(u, 2 * MiB, &b), CCA_ERR_UPSTREAM);
    cr_assert_null(b);
    EXPECT_REFUSED(u, cca_upstream_vm_map(u, somewhere, 2 * MiB), CCA_ERR_UPSTREAM, "no virtual-memory", 0);
    EXPECT_REFUSED(u, cca_upstream_vm_unmap(u, somewhere, 2 * MiB), CCA_ERR_UPSTREAM, "no virtual-memory", 0);
    EXPECT_REFUSED(u, cca_upstream_vm_release(u, somewhere, 2 * MiB), CCA_ERR_UPSTREAM, "no virtual-memory", 0);
    cca_upstream_destroy(u);
    assert_no_leaks();
}

/* ---- teardown ------------------------------------------------------------------------ */

Test(upstream_vm, destroy_with_maps_and_ranges_left_gives_everything_back) {
    const size_t G = 2 * MiB;
    size_t P = tu_page_size();
    cca_upstream *u = make_vm_device(128 * MiB, 0);
    char *r[6];
    for (int i = 0; i < 6; i++)
        r[i] = vm_reserve(u, 8 * G);
    /* 32 MiB touched in maps of three ranges, two more ranges empty, one
     * released; and a classic allocation */
    vm_map(u, r[0], 8 * G);
    vm_map(u, r[1] + G, 4 * G);
    vm_map(u, r[1] + 6 * G, G);
    vm_map(u, r[2] + 5 * G, 3 * G);
    vm_release(u, r[5], 8 * G);
    void *p = NULL;
    cr_assert_eq(cca_upstream_alloc(u, 4 * G, &p), CCA_OK);
    size_t r0 = tu_resident_bytes();
    memset(r[0], 1, 8 * G);
    memset(r[1] + G, 2, 4 * G);
    memset(r[1] + 6 * G, 3, G);
    memset(r[2] + 5 * G, 4, 3 * G);
    size_t r1 = tu_resident_bytes();
    cr_assert_geq(r1, r0 + 30 * MiB, "touching 32 MiB raised resident memory only from %zu to %zu", r0, r1);
    TU_ASSERT_FAULTS(r[3]); /* the probe's pipe exists before the destroy */
    cca_upstream_destroy(u);
    /* probed first: nothing else has had a chance to map those addresses */
    TU_ASSERT_FAULTS(r[0]);
    TU_ASSERT_FAULTS(r[1] + 6 * G + P);
    TU_ASSERT_FAULTS(r[2] + 8 * G - 1);
    size_t r2 = tu_resident_bytes();
    cr_assert_leq(r2 + 30 * MiB, r1, "destroy lowered resident memory only from %zu to %zu", r1, r2);
    assert_no_leaks();
}

/* ---- threads --------------------------------------------------------------------------- */

#define VM_THREADS 4
#define VM_ROUNDS 500
#define VM_GRANULES 8

typedef struct vm_worker {
    cca_upstream *u;
    size_t gran;
    int id;
    char error[256];
} vm_worker;

/* Reserve a range of VM_GRANULES granules; each round map one granule (the
 * capacity holds one per thread), stamp it, try a map over it (refused),
 * check the stamp, unmap it; release the range at the end. */
static void *vm_work(void *arg) {
    vm_worker *w = arg;
    size_t G = w->gran;
    void *base = NULL;
    cca_status st = cca_upstream_vm_reserve(w->u, VM_GRANULES * G, &base);
    if (st != CCA_OK) {
        snprintf(w->error, sizeof w->error, "vm_reserve returned %d: %s", (int)st, cca_last_error());
        return NULL;
    }
    char *r = base;
    for (int i = 0; i < VM_ROUNDS; i++) {
        char *m = r + (size_t)(i % VM_GRANULES) * G;
        st = cca_upstream_vm_map(w->u, m, G);
        if (st != CCA_OK) {
            snprintf(w->error, sizeof w->error, "round %d: vm_map returned %d: %s", i, (int)st, cca_last_error());
            return NULL;
        }
        if (m[0] != 0 || m[G - 1] != 0) {
            snprintf(w->error, sizeof w->error, "round %d: a fresh map is not zeroed", i);
            return NULL;
        }
        m[0] = (char)w->id, m[G - 1] = (char)i;
        st = cca_upstream_vm_map(w->u, m, G);
        if (st != CCA_ERR_UPSTREAM) {
            snprintf(w->error, sizeof w->error, "round %d: an overlapping vm_map returned %d", i, (int)st);
            return NULL;
        }
        if (m[0] != (char)w->id || m[G - 1] != (char)i) {
            snprintf(w->error, sizeof w->error, "round %d: the map was written by someone else", i);
            return NULL;
        }
        st = cca_upstream_vm_unmap(w->u, m, G);
        if (st != CCA_OK) {
            snprintf(w->error, sizeof w->error, "round %d: vm_unmap returned %d: %s", i, (int)st, cca_last_error());
            return NULL;
        }
    }
    st = cca_upstream_vm_release(w->u, r, VM_GRANULES * G);
    if (st != CCA_OK)
        snprintf(w->error, sizeof w->error, "vm_release returned %d: %s", (int)st, cca_last_error());
    return NULL;
}

Test(upstream_vm, four_threads_mapping_and_unmapping_keep_the_stats_exact) {
    const size_t G = 64 * KiB;
    cca_upstream *u = make_vm_device(VM_THREADS * G, G); /* exactly one granule per thread */
    vm_worker w[VM_THREADS];
    pthread_t th[VM_THREADS];
    for (int i = 0; i < VM_THREADS; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].u = u, w[i].gran = G, w[i].id = i + 1;
        cr_assert_eq(pthread_create(&th[i], NULL, vm_work, &w[i]), 0);
    }
    for (int i = 0; i < VM_THREADS; i++) {
        pthread_join(th[i], NULL);
        cr_assert_eq(w[i].error[0], 0, "thread %d: %s", i, w[i].error);
    }
    const uint64_t n = (uint64_t)VM_THREADS * VM_ROUNDS;
    ASSERT_VM_STATS(u, 0, 0, 0, n, n, n);
    cca_upstream_stats s = tu_upstream_stats(u);
    cr_assert_leq(s.bytes_in_use_peak, VM_THREADS * G);
    cr_assert_geq(s.bytes_in_use_peak, G);
    cr_assert_eq(s.allocations, 0);
    ASSERT_FREE(u, VM_THREADS * G);
    /* the whole capacity maps again */
    char *r = vm_reserve(u, VM_THREADS * G);
    vm_map(u, r, VM_THREADS * G);
    vm_unmap(u, r, VM_THREADS * G);
    vm_release(u, r, VM_THREADS * G);
    cca_upstream_destroy(u);
    assert_no_leaks();
}

/* ---- the wrapper around a custom table ------------------------------------------- */

typedef struct bad_vm {
    int released;
    bool refuse_release;
    char space[4 << 20];
} bad_vm;

static cca_status bad_alloc(void *ctx, size_t size, void **p) {
    (void)ctx, (void)size, (void)p;
    return CCA_ERR_OUT_OF_MEMORY;
}
static cca_status bad_free(void *ctx, void *p, size_t size) {
    (void)ctx, (void)p, (void)size;
    return CCA_OK;
}
static cca_status bad_gran(void *ctx, size_t *g) {
    (void)ctx;
    *g = 1 << 20;
    return CCA_OK;
}
static cca_status bad_reserve(void *ctx, size_t size, void **base) {
    (void)size;
    *base = ((bad_vm *)ctx)->space + 512; /* not aligned to the granularity */
    return CCA_OK;
}
static cca_status bad_release(void *ctx, void *base, size_t size) {
    (void)base, (void)size;
    ((bad_vm *)ctx)->released++;
    return ((bad_vm *)ctx)->refuse_release ? CCA_ERR_UPSTREAM : CCA_OK;
}
static cca_status bad_map(void *ctx, void *addr, size_t size) {
    (void)ctx, (void)addr, (void)size;
    return CCA_OK;
}

/* An upstream that answers vm_reserve with a misaligned range: the wrapper
 * refuses it, gives the range back (vm_release called once) and counts
 * nothing reserved. */
Test(upstream_vm, misaligned_reserve_is_refused_and_given_back) {
    static bad_vm ctx;
    cca_upstream_ops ops = {.alloc = bad_alloc, .free = bad_free, .vm_granularity = bad_gran,
                            .vm_reserve = bad_reserve, .vm_release = bad_release, .vm_map = bad_map,
                            .vm_unmap = bad_map, .name = "bad-vm"};
    cca_upstream *u = NULL;
    cr_assert_eq(cca_upstream_custom_create(&ops, &ctx, &u), CCA_OK, "%s", cca_last_error());
    void *base = (void *)1;
    cr_assert_eq(cca_upstream_vm_reserve(u, 2 << 20, &base), CCA_ERR_UPSTREAM);
    cr_assert_null(base);
    cr_assert(strstr(cca_last_error(), "not a 1048576-aligned") != NULL, "%s", cca_last_error());
    cr_assert(strstr(cca_last_error(), "(given back)") != NULL, "%s", cca_last_error());
    cr_assert_eq(ctx.released, 1, "the misaligned range was not given back");
    cca_upstream_stats s;
    cca_upstream_get_stats(u, &s);
    cr_assert_eq(s.vm_reserved_bytes, 0);
    /* the give-back refused: the message says the range stays reserved */
    ctx.refuse_release = true;
    cr_assert_eq(cca_upstream_vm_reserve(u, 2 << 20, &base), CCA_ERR_UPSTREAM);
    cr_assert_null(base);
    cr_assert(strstr(cca_last_error(), "its release was refused: the range stays reserved") != NULL, "%s",
              cca_last_error());
    cr_assert_eq(ctx.released, 2);
    cca_upstream_destroy(u);
}
