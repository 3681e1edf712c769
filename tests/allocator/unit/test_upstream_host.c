/*
 * test_upstream_host.c — allocator/src/upstream/host.c, the simulated device,
 * held to its contract exactly:
 *
 *   placement   one reserved range; first fit by address over the free
 *               extents, neighbours merged on free; exact offsets (in host
 *               pages from the first allocation of a fresh device, which sits
 *               at the start of the range), checked case by case and against
 *               a reference first-fit model over a random sequence; the same
 *               calls give the same offsets on another device whatever the
 *               process did in between.
 *   rounding    sizes rounded up to the host page and counted so by mem_info.
 *   refusal     fragmentation refuses with a message and changes nothing.
 *   memory      pages exist only while allocated: freeing gives them back to
 *               the OS (resident memory drops), a later touch faults (probed
 *               with write(2) -> EFAULT, and once with a real SIGSEGV), a new
 *               allocation reads as zeros; also while the kernel refuses
 *               every new mapping (RLIMIT_AS below the address space); a
 *               free that can give them back neither way (mlocked pages
 *               too) is CCA_ERR_UPSTREAM with the reason and changes
 *               nothing, the block still readable and writable; an
 *               allocation of whole 2 MiB pages is huge (smaps), no other
 *               is, and the hint cuts no mapping.
 *   bad frees   anything that is not exactly an allocation of the device is
 *               refused with CCA_ERR_UPSTREAM and changes nothing.
 *   latency     busy-waits per alloc (granted or refused) and per free; only
 *               lower bounds are asserted.
 *   creation    argument checks; its cost in host allocations (ccalloc.h).
 *   tenants     an allocator over the device gives everything back (classic
 *               segments: the range is whole again; expandable: nothing
 *               mapped or reserved is left); four threads sharing the
 *               device never get overlapping memory.
 *
 * Calls go through the wrapper (upstream.c): sizes are positive multiples of
 * CCA_GRANULARITY.
 */
#include "alloc_test_util.h"
#include "malloc_fault.h" /* tu_malloc_calls: what a creation costs */

#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define TU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TU_ASAN 1
#endif
#endif

/* ---- helpers --------------------------------------------------------------- */

static cca_upstream *make_device(size_t capacity) {
    cca_upstream *u = NULL;
    cca_status st = cca_upstream_host_create(capacity, &u);
    cr_assert_eq(st, CCA_OK, "cca_upstream_host_create(%zu): %s", capacity, cca_last_error());
    cr_assert_not_null(u);
    return u;
}

static char *dev_alloc(cca_upstream *u, size_t size) {
    void *p = NULL;
    cca_status st = cca_upstream_alloc(u, size, &p);
    cr_assert_eq(st, CCA_OK, "alloc of %zu bytes returned %d: %s", size, (int)st, cca_last_error());
    cr_assert_not_null(p);
    return p;
}

static void dev_free(cca_upstream *u, void *p, size_t size) {
    cca_status st = cca_upstream_free(u, p, size);
    cr_assert_eq(st, CCA_OK, "free of %p (%zu bytes) returned %d: %s", p, size, (int)st, cca_last_error());
}

static void expect_oom(cca_upstream *u, size_t size) {
    void *p = (void *)1;
    cca_status st = cca_upstream_alloc(u, size, &p);
    cr_assert_eq(st, CCA_ERR_OUT_OF_MEMORY, "alloc of %zu bytes: expected OOM, got %d", size, (int)st);
    cr_assert_null(p);
}

static size_t free_bytes(cca_upstream *u) {
    size_t f = 0, t = 0;
    cr_assert_eq(cca_upstream_mem_info(u, &f, &t), CCA_OK);
    return f;
}

static size_t total_bytes(cca_upstream *u) {
    size_t f = 0, t = 0;
    cr_assert_eq(cca_upstream_mem_info(u, &f, &t), CCA_OK);
    return t;
}

/* Offset of p from base in host pages; p must lie at or above base on a page
 * boundary. */
static size_t pages_from(const void *base, const void *p) {
    uintptr_t b = (uintptr_t)base, q = (uintptr_t)p;
    cr_assert_geq(q, b, "%p lies below the start of the range %p", p, base);
    cr_assert_eq((q - b) % tu_page_size(), 0, "%p is not on a page boundary from %p", p, base);
    return (q - b) / tu_page_size();
}

#define ASSERT_AT(base, p, expected_pages)                                                                        \
    do {                                                                                                          \
        size_t at_ = pages_from((base), (p));                                                                     \
        cr_assert_eq(at_, (size_t)(expected_pages), "%s placed at page %zu, first fit says page %zu", #p, at_,    \
                     (size_t)(expected_pages));                                                                   \
    } while (0)

#define ASSERT_FREE_PAGES(u, pages)                                                                               \
    do {                                                                                                          \
        size_t f_ = free_bytes(u), want_ = (size_t)(pages) * tu_page_size();                                         \
        cr_assert_eq(f_, want_, "mem_info free = %zu bytes, expected %zu", f_, want_);                           \
    } while (0)

static void assert_ustats_equal(const cca_upstream_stats *a, const cca_upstream_stats *b, const char *what) {
    cr_assert_eq(a->bytes_in_use, b->bytes_in_use, "%s: bytes_in_use %zu -> %zu", what, a->bytes_in_use,
                 b->bytes_in_use);
    cr_assert_eq(a->bytes_in_use_peak, b->bytes_in_use_peak, "%s: bytes_in_use_peak changed", what);
    cr_assert_eq(a->allocations, b->allocations, "%s: allocations %zu -> %zu", what, a->allocations, b->allocations);
    cr_assert_eq(a->alloc_calls, b->alloc_calls, "%s: alloc_calls changed", what);
    cr_assert_eq(a->free_calls, b->free_calls, "%s: free_calls changed", what);
    cr_assert_eq(a->failed_allocs, b->failed_allocs, "%s: failed_allocs changed", what);
}

/* 0 when one byte at p can be read by the kernel, else the errno (EFAULT for
 * an inaccessible page). No signal is involved, so it works under ASan. */
/* ---- placement: first fit by address ---------------------------------------- */

Test(upstream_host, first_fit_takes_the_lowest_hole_not_the_best_one) {
    size_t P = tu_page_size();
    cca_upstream *u = make_device(16 * P);
    char *h1 = dev_alloc(u, 4 * P); /* [0,4)  */
    char *s1 = dev_alloc(u, 1 * P); /* [4,5)  */
    char *h2 = dev_alloc(u, 2 * P); /* [5,7)  */
    char *s2 = dev_alloc(u, 1 * P); /* [7,8)  */
    char *base = h1;
    ASSERT_AT(base, s1, 4);
    ASSERT_AT(base, h2, 5);
    ASSERT_AT(base, s2, 7);
    ASSERT_FREE_PAGES(u, 8);
    dev_free(u, h1, 4 * P); /* holes [0,4) [5,7), tail [8,16) */
    dev_free(u, h2, 2 * P);
    ASSERT_FREE_PAGES(u, 14);
    char *a = dev_alloc(u, 2 * P); /* best fit would take [5,7) */
    ASSERT_AT(base, a, 0);
    char *b = dev_alloc(u, 2 * P);
    ASSERT_AT(base, b, 2);
    char *c = dev_alloc(u, 2 * P);
    ASSERT_AT(base, c, 5);
    char *d = dev_alloc(u, 3 * P); /* no hole left: the tail */
    ASSERT_AT(base, d, 8);
    char *e = dev_alloc(u, 5 * P); /* exactly the rest of the range */
    ASSERT_AT(base, e, 11);
    ASSERT_FREE_PAGES(u, 0);
    expect_oom(u, 512);
    dev_free(u, a, 2 * P);
    dev_free(u, b, 2 * P);
    dev_free(u, c, 2 * P);
    dev_free(u, d, 3 * P);
    dev_free(u, e, 5 * P);
    dev_free(u, s1, 1 * P);
    dev_free(u, s2, 1 * P);
    ASSERT_FREE_PAGES(u, 16);
    char *all = dev_alloc(u, 16 * P); /* everything merged back into one extent */
    ASSERT_AT(base, all, 0);
    dev_free(u, all, 16 * P);
    cca_upstream_destroy(u);
}

Test(upstream_host, freeing_the_middle_of_three_then_smaller_reuses_the_hole_start) {
    size_t P = tu_page_size();
    cca_upstream *u = make_device(32 * P);
    char *a = dev_alloc(u, 2 * P);
    char *b = dev_alloc(u, 3 * P);
    char *c = dev_alloc(u, 2 * P);
    ASSERT_AT(a, b, 2);
    ASSERT_AT(a, c, 5);
    dev_free(u, b, 3 * P);
    ASSERT_FREE_PAGES(u, 32 - 4);
    char *x = dev_alloc(u, 1 * P);
    ASSERT_AT(a, x, 2); /* the hole's start */
    char *y = dev_alloc(u, 2 * P);
    ASSERT_AT(a, y, 3); /* the rest of the hole */
    char *z = dev_alloc(u, 1 * P);
    ASSERT_AT(a, z, 7); /* hole full: after c */
    ASSERT_FREE_PAGES(u, 32 - 8);
    dev_free(u, x, P);
    dev_free(u, y, 2 * P);
    dev_free(u, z, P);
    dev_free(u, a, 2 * P);
    dev_free(u, c, 2 * P);
    ASSERT_FREE_PAGES(u, 32);
    cca_upstream_destroy(u);
}

/* A full device of 8 one-page allocations, slot[i] at page i. */
static cca_upstream *full_of_pages(char *slot[8]) {
    size_t P = tu_page_size();
    cca_upstream *u = make_device(8 * P);
    for (int i = 0; i < 8; i++) {
        slot[i] = dev_alloc(u, P);
        ASSERT_AT(slot[0], slot[i], i);
    }
    ASSERT_FREE_PAGES(u, 0);
    return u;
}

static void free_slots_except(cca_upstream *u, char *slot[8], unsigned skip_mask) {
    for (int i = 0; i < 8; i++)
        if (!(skip_mask & (1u << i)))
            dev_free(u, slot[i], tu_page_size());
}

Test(upstream_host, free_merges_with_the_left_neighbour) {
    size_t P = tu_page_size();
    char *s[8];
    cca_upstream *u = full_of_pages(s);
    dev_free(u, s[3], P);
    dev_free(u, s[4], P); /* joins [3,4) on its left */
    char *p = dev_alloc(u, 2 * P);
    ASSERT_AT(s[0], p, 3);
    ASSERT_FREE_PAGES(u, 0);
    dev_free(u, p, 2 * P);
    free_slots_except(u, s, 1u << 3 | 1u << 4);
    cca_upstream_destroy(u);
}

Test(upstream_host, free_merges_with_the_right_neighbour) {
    size_t P = tu_page_size();
    char *s[8];
    cca_upstream *u = full_of_pages(s);
    dev_free(u, s[4], P);
    dev_free(u, s[3], P); /* joins [4,5) on its right */
    char *p = dev_alloc(u, 2 * P);
    ASSERT_AT(s[0], p, 3);
    ASSERT_FREE_PAGES(u, 0);
    dev_free(u, p, 2 * P);
    free_slots_except(u, s, 1u << 3 | 1u << 4);
    cca_upstream_destroy(u);
}

Test(upstream_host, free_merges_with_both_neighbours) {
    size_t P = tu_page_size();
    char *s[8];
    cca_upstream *u = full_of_pages(s);
    dev_free(u, s[3], P);
    dev_free(u, s[5], P);
    expect_oom(u, 2 * P); /* two separate one-page holes */
    dev_free(u, s[4], P); /* joins both: [3,6) */
    char *p = dev_alloc(u, 3 * P);
    ASSERT_AT(s[0], p, 3);
    ASSERT_FREE_PAGES(u, 0);
    dev_free(u, p, 3 * P);
    free_slots_except(u, s, 1u << 3 | 1u << 4 | 1u << 5);
    cca_upstream_destroy(u);
}

Test(upstream_host, merges_at_both_ends_of_the_range_and_in_any_free_order) {
    size_t P = tu_page_size();
    enum { N = 32 };
    cca_upstream *u = make_device(N * P);
    char *s[N];
    for (int i = 0; i < N; i++)
        s[i] = dev_alloc(u, P);
    /* first and last extents of the range */
    dev_free(u, s[1], P);
    dev_free(u, s[0], P);
    dev_free(u, s[N - 2], P);
    dev_free(u, s[N - 1], P);
    char *head = dev_alloc(u, 2 * P), *tail = dev_alloc(u, 2 * P);
    ASSERT_AT(s[0], head, 0);
    ASSERT_AT(s[0], tail, N - 2);
    dev_free(u, head, 2 * P);
    dev_free(u, tail, 2 * P);
    /* free the rest in a shuffled order: one extent again */
    int order[N - 4];
    for (int i = 0; i < N - 4; i++)
        order[i] = i + 2;
    uint64_t rng = 7;
    for (int i = N - 5; i > 0; i--) {
        int j = (int)(tu_rand(&rng) % (uint64_t)(i + 1));
        int t = order[i];
        order[i] = order[j], order[j] = t;
    }
    for (int i = 0; i < N - 4; i++)
        dev_free(u, s[order[i]], P);
    ASSERT_FREE_PAGES(u, N);
    char *all = dev_alloc(u, N * P);
    ASSERT_AT(s[0], all, 0);
    dev_free(u, all, N * P);
    cca_upstream_destroy(u);
}

/* A reference first fit over a page map, and a random sequence run on the
 * device and on the model side by side: every offset, every refusal and every
 * mem_info figure must agree. Returns the offsets (pages from the first
 * allocation; SIZE_MAX for a refusal) in out[]. */
enum { MODEL_PAGES = 64, MODEL_OPS = 400 };

static void run_model_sequence(uint64_t seed, size_t out[MODEL_OPS]) {
    size_t P = tu_page_size();
    cca_upstream *u = make_device(MODEL_PAGES * P);
    bool used[MODEL_PAGES] = {0};
    struct {
        char *p;
        size_t at, pages, size;
    } live[MODEL_PAGES];
    int n = 0;
    size_t used_pages = 0;
    char *base = NULL;
    uint64_t rng = seed;
    for (int op = 0; op < MODEL_OPS; op++) {
        out[op] = SIZE_MAX - 1; /* a free */
        if (n == 0 || tu_rand(&rng) % 100 < 55) {
            size_t pages = 1 + tu_rand(&rng) % 6;
            /* a size that rounds up to `pages` pages, not always a page multiple */
            size_t size = pages * P - (tu_rand(&rng) % 2 ? 512 : 0);
            size_t at = SIZE_MAX;
            for (size_t i = 0; i + pages <= MODEL_PAGES && at == SIZE_MAX; i++) {
                size_t k = 0;
                while (k < pages && !used[i + k])
                    k++;
                if (k == pages)
                    at = i;
            }
            void *p = (void *)1;
            cca_status st = cca_upstream_alloc(u, size, &p);
            if (at == SIZE_MAX) {
                cr_assert_eq(st, CCA_ERR_OUT_OF_MEMORY, "op %d: %zu pages: the model has no room, device said %d", op,
                             pages, (int)st);
                cr_assert_null(p);
                out[op] = SIZE_MAX;
            } else {
                cr_assert_eq(st, CCA_OK, "op %d: %zu pages: the model places it at page %zu, device said %d (%s)", op,
                             pages, at, (int)st, cca_last_error());
                if (!base) {
                    cr_assert_eq(at, 0);
                    base = p;
                }
                size_t got = pages_from(base, p);
                cr_assert_eq(got, at, "op %d: %zu pages placed at page %zu, first fit says %zu", op, pages, got, at);
                for (size_t k = 0; k < pages; k++)
                    used[at + k] = true;
                used_pages += pages;
                live[n].p = p, live[n].at = at, live[n].pages = pages, live[n].size = size;
                n++;
                out[op] = at;
            }
        } else {
            int i = (int)(tu_rand(&rng) % (uint64_t)n);
            dev_free(u, live[i].p, live[i].size);
            for (size_t k = 0; k < live[i].pages; k++)
                used[live[i].at + k] = false;
            used_pages -= live[i].pages;
            live[i] = live[--n];
        }
        size_t f = free_bytes(u);
        cr_assert_eq(f, (MODEL_PAGES - used_pages) * P, "op %d: mem_info free %zu, expected %zu", op, f,
                     (MODEL_PAGES - used_pages) * P);
    }
    while (n > 0) {
        n--;
        dev_free(u, live[n].p, live[n].size);
    }
    ASSERT_FREE_PAGES(u, MODEL_PAGES);
    cca_upstream_destroy(u);
}

Test(upstream_host, a_random_sequence_matches_a_reference_first_fit) {
    size_t offsets[MODEL_OPS];
    run_model_sequence(42, offsets);
    size_t refusals = 0, placed_above_zero = 0;
    for (int i = 0; i < MODEL_OPS; i++) {
        refusals += offsets[i] == SIZE_MAX;
        placed_above_zero += offsets[i] != SIZE_MAX && offsets[i] != SIZE_MAX - 1 && offsets[i] > 0;
    }
    /* the sequence does reach the interesting cases */
    cr_assert_gt(refusals, 0, "the sequence never filled the device");
    cr_assert_gt(placed_above_zero, 50);
}

/* The same calls on a second device give the same offsets, whatever the
 * process did in between (malloc and mmap churn, another live device). */
Test(upstream_host, same_calls_same_offsets_on_another_device_after_unrelated_churn) {
    size_t first[MODEL_OPS], second[MODEL_OPS], third[MODEL_OPS];
    run_model_sequence(99, first);

    void *keep[64];
    for (int i = 0; i < 64; i++) {
        keep[i] = malloc((size_t)(i + 1) * 3001 + (i % 8 == 0 ? 300 * KiB : 0));
        cr_assert_not_null(keep[i]);
        memset(keep[i], i, 16);
    }
    for (int i = 0; i < 64; i += 3)
        free(keep[i]), keep[i] = NULL;
    void *m1 = mmap(NULL, 5 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    void *m2 = mmap(NULL, 3 * tu_page_size(), PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(m1, MAP_FAILED);
    cr_assert_neq(m2, MAP_FAILED);
    memset(m1, 1, 5 * MiB);
    /* another device, live and used, while the sequence runs again */
    cca_upstream *other = make_device(3 * MiB);
    char *op = dev_alloc(other, 512);
    run_model_sequence(99, second);

    munmap(m1, 5 * MiB);
    dev_free(other, op, 512);
    cca_upstream_destroy(other);
    run_model_sequence(99, third);

    for (int i = 0; i < MODEL_OPS; i++) {
        cr_assert_eq(first[i], second[i], "op %d: offset %zu on the first device, %zu on the second", i, first[i],
                     second[i]);
        cr_assert_eq(first[i], third[i], "op %d: offset %zu on the first device, %zu on the third", i, first[i],
                     third[i]);
    }
    munmap(m2, 3 * tu_page_size());
    for (int i = 0; i < 64; i++)
        free(keep[i]);
}

/* ---- rounding to the host page --------------------------------------------- */

Test(upstream_host, every_alloc_takes_whole_pages_and_mem_info_counts_them) {
    size_t P = tu_page_size();
    cca_upstream *u = make_device(10 * P);
    cr_assert_eq(total_bytes(u), 10 * P);
    ASSERT_FREE_PAGES(u, 10);
    char *p[10];
    for (int i = 0; i < 10; i++) {
        p[i] = dev_alloc(u, 512);
        ASSERT_AT(p[0], p[i], i);
        ASSERT_FREE_PAGES(u, 10 - (i + 1));
        cr_assert_eq(total_bytes(u), 10 * P);
    }
    expect_oom(u, 512); /* the 11th: 10 * 512 bytes asked, but 10 pages taken */
    ASSERT_FREE_PAGES(u, 0);
    /* the whole page is usable memory */
    memset(p[3], 0xab, P);
    cr_assert_eq((unsigned char)p[3][P - 1], 0xab);
    cr_assert_eq((unsigned char)p[4][0], 0);
    for (int i = 0; i < 10; i += 2)
        dev_free(u, p[i], 512);
    ASSERT_FREE_PAGES(u, 5);
    /* a page and a bit takes two pages: no two-page hole among single ones */
    expect_oom(u, P + 512);
    ASSERT_FREE_PAGES(u, 5);
    for (int i = 1; i < 10; i += 2)
        dev_free(u, p[i], 512);
    ASSERT_FREE_PAGES(u, 10);
    char *q = dev_alloc(u, P + 512);
    ASSERT_FREE_PAGES(u, 8);
    char *r = dev_alloc(u, 512);
    ASSERT_AT(q, r, 2);
    dev_free(u, q, P + 512);
    dev_free(u, r, 512);
    ASSERT_FREE_PAGES(u, 10);
    cca_upstream_destroy(u);
}

Test(upstream_host, a_capacity_that_is_not_a_page_multiple) {
    size_t P = tu_page_size();
    size_t cap = 10 * P + 512;
    cca_upstream *u = make_device(cap);
    cr_assert_eq(total_bytes(u), cap);
    cr_assert_eq(free_bytes(u), cap);
    /* rounded up to 11 pages, more than the capacity */
    expect_oom(u, cap);
    char *p[10];
    for (int i = 0; i < 10; i++) {
        p[i] = dev_alloc(u, P);
        ASSERT_AT(p[0], p[i], i);
        cr_assert_eq(free_bytes(u), cap - (size_t)(i + 1) * P);
    }
    cr_assert_eq(free_bytes(u), 512);
    expect_oom(u, 512); /* 512 bytes free, but a page is needed */
    cr_assert_eq(free_bytes(u), 512);
    for (int i = 0; i < 10; i++)
        dev_free(u, p[i], P);
    cr_assert_eq(free_bytes(u), cap);
    char *all = dev_alloc(u, 10 * P);
    ASSERT_AT(p[0], all, 0);
    dev_free(u, all, 10 * P);
    cca_upstream_destroy(u);
}

/* A device holds whole host pages: one of less than a page could never
 * hold anything (every alloc, every map would be an OOM), so it is refused
 * at creation, naming the least capacity; one page is the smallest device,
 * and holds that page. */
Test(upstream_host, a_capacity_below_one_page_is_refused) {
    size_t P = tu_page_size();
    char least[64];
    snprintf(least, sizeof least, "below the %zu-byte host page", P);
    size_t small[] = {1, 512, P / 2, P - 1};
    for (size_t i = 0; i < sizeof small / sizeof small[0]; i++) {
        cca_upstream *u = (cca_upstream *)1;
        cr_assert_eq(cca_upstream_host_create(small[i], &u), CCA_ERR_INVALID_ARGUMENT, "capacity %zu accepted",
                     small[i]);
        cr_assert_null(u);
        cr_assert_not_null(strstr(cca_last_error(), least), "capacity %zu: %s", small[i], cca_last_error());
        cca_host_options o = {.capacity = small[i], .vm_granularity = P};
        u = (cca_upstream *)1;
        cr_assert_eq(cca_upstream_host_create_with(&o, &u), CCA_ERR_INVALID_ARGUMENT, "capacity %zu accepted",
                     small[i]);
        cr_assert_null(u);
        cr_assert_not_null(strstr(cca_last_error(), "cca_upstream_host_create_with"), "%s", cca_last_error());
        cr_assert_not_null(strstr(cca_last_error(), least), "capacity %zu: %s", small[i], cca_last_error());
    }
    cca_upstream *u = make_device(P);
    cr_assert_eq(total_bytes(u), P);
    char *p = dev_alloc(u, 512);
    cr_assert_eq(free_bytes(u), 0);
    dev_free(u, p, 512);
    cca_upstream_destroy(u);
}

/* ---- refusals ----------------------------------------------------------------- */

Test(upstream_host, fragmented_free_space_is_refused_and_changes_nothing) {
    size_t P = tu_page_size();
    char *s[8];
    cca_upstream *u = full_of_pages(s);
    for (int i = 0; i < 8; i += 2)
        dev_free(u, s[i], P);
    ASSERT_FREE_PAGES(u, 4);
    cca_upstream_stats before = tu_upstream_stats(u);
    void *p = (void *)1;
    cr_assert_eq(cca_upstream_alloc(u, 2 * P, &p), CCA_ERR_OUT_OF_MEMORY, "4 pages free but no 2 in a row");
    cr_assert_null(p);
    const char *msg = cca_last_error();
    cr_assert_not_null(msg);
    cr_assert_neq(strstr(msg, "fragmented"), NULL, "message does not say why: '%s'", msg);
    char want[64];
    snprintf(want, sizeof want, "%zu of %zu free", 4 * P, 8 * P);
    cr_assert_neq(strstr(msg, want), NULL, "message '%s' does not say '%s'", msg, want);
    cca_upstream_stats after = tu_upstream_stats(u);
    before.failed_allocs++;
    assert_ustats_equal(&before, &after, "refused alloc");
    ASSERT_FREE_PAGES(u, 4);
    /* the holes are still where they were */
    char *base = s[1] - P;
    for (int i = 0; i < 8; i += 2) {
        s[i] = dev_alloc(u, P);
        ASSERT_AT(base, s[i], i);
    }
    ASSERT_FREE_PAGES(u, 0);
    /* a plain OOM (more than is free) does not claim fragmentation */
    expect_oom(u, P);
    cr_assert_eq(strstr(cca_last_error(), "fragmented"), NULL, "'%s'", cca_last_error());
    free_slots_except(u, s, 0);
    ASSERT_FREE_PAGES(u, 8);
    cca_upstream_destroy(u);
}

/* Three live two-page allocations a [0,2), b [2,4), c [4,6) and the free tail
 * [6,16) of a 16-page device. */
typedef struct trio {
    cca_upstream *u;
    char *a, *b, *c;
    cca_upstream_stats stats;
} trio;

static trio make_trio(void) {
    size_t P = tu_page_size();
    trio t;
    t.u = make_device(16 * P);
    t.a = dev_alloc(t.u, 2 * P);
    t.b = dev_alloc(t.u, 2 * P);
    t.c = dev_alloc(t.u, 2 * P);
    ASSERT_AT(t.a, t.b, 2);
    ASSERT_AT(t.a, t.c, 4);
    memset(t.a, 'a', 2 * P);
    memset(t.b, 'b', 2 * P);
    memset(t.c, 'c', 2 * P);
    t.stats = tu_upstream_stats(t.u);
    return t;
}

/* A free that must be refused: CCA_ERR_UPSTREAM, upstream stats and mem_info
 * unchanged, every live page still there with its contents. */
static void expect_refused_free(trio *t, void *p, size_t size, const char *what) {
    size_t P = tu_page_size();
    size_t f = free_bytes(t->u);
    cca_status st = cca_upstream_free(t->u, p, size);
    cr_assert_eq(st, CCA_ERR_UPSTREAM, "%s: free(%p, %zu) returned %d, expected CCA_ERR_UPSTREAM", what, p, size,
                 (int)st);
    cca_upstream_stats now = tu_upstream_stats(t->u);
    assert_ustats_equal(&t->stats, &now, what);
    cr_assert_eq(free_bytes(t->u), f, "%s: mem_info changed", what);
    char *live[3] = {t->a, t->b, t->c};
    for (int i = 0; i < 3; i++) {
        if (!live[i])
            continue;
        for (size_t k = 0; k < 2; k++) {
            char *pg = live[i] + k * P;
            cr_assert_eq(tu_probe(pg), 0, "%s: page %zu of the live allocation %c was unmapped", what, k, 'a' + i);
            cr_assert_eq(pg[0], 'a' + i, "%s: allocation %c lost its contents", what, 'a' + i);
            cr_assert_eq(pg[P - 1], 'a' + i);
        }
    }
}

/* The device still works: the live ones free exactly, then the whole range
 * is one extent again. */
static void finish_trio(trio *t) {
    size_t P = tu_page_size();
    char *base = t->a ? t->a : t->b ? t->b - 2 * P : t->c - 4 * P;
    if (t->a)
        dev_free(t->u, t->a, 2 * P);
    if (t->b)
        dev_free(t->u, t->b, 2 * P);
    if (t->c)
        dev_free(t->u, t->c, 2 * P);
    ASSERT_FREE_PAGES(t->u, 16);
    char *all = dev_alloc(t->u, 16 * P);
    ASSERT_AT(base, all, 0);
    dev_free(t->u, all, 16 * P);
    ASSERT_FREE_PAGES(t->u, 16);
    cca_upstream_destroy(t->u);
}

Test(upstream_host, refuses_a_double_free) {
    size_t P = tu_page_size();
    trio t = make_trio();
    dev_free(t.u, t.b, 2 * P);
    char *b = t.b;
    t.b = NULL;
    t.stats = tu_upstream_stats(t.u);
    expect_refused_free(&t, b, 2 * P, "double free");
    dev_free(t.u, t.c, 2 * P); /* b's extent now touches the tail */
    char *c = t.c;
    t.c = NULL;
    t.stats = tu_upstream_stats(t.u);
    expect_refused_free(&t, c, 2 * P, "double free next to the tail");
    expect_refused_free(&t, b, 2 * P, "double free again");
    finish_trio(&t);
}

Test(upstream_host, refuses_a_free_bigger_than_the_allocation_into_free_space) {
    size_t P = tu_page_size();
    trio t = make_trio();
    expect_refused_free(&t, t.c, 3 * P, "c freed with 3 pages (reaching into the free tail)");
    expect_refused_free(&t, t.c, 2 * P + 512, "c freed with 2 pages + 512");
    finish_trio(&t);
}

Test(upstream_host, refuses_a_free_bigger_than_the_allocation_over_a_live_neighbour) {
    size_t P = tu_page_size();
    trio t = make_trio();
    expect_refused_free(&t, t.a, 4 * P, "a freed with 4 pages (a and all of b)");
    expect_refused_free(&t, t.a, 3 * P, "a freed with 3 pages (a and half of b)");
    finish_trio(&t);
}

Test(upstream_host, refuses_a_free_smaller_than_the_allocation) {
    size_t P = tu_page_size();
    trio t = make_trio();
    expect_refused_free(&t, t.a, P, "a (2 pages) freed with 1 page");
    expect_refused_free(&t, t.c, P, "c (2 pages, before the free tail) freed with 1 page");
    finish_trio(&t);
}

Test(upstream_host, refuses_a_page_aligned_pointer_inside_an_allocation) {
    size_t P = tu_page_size();
    trio t = make_trio();
    expect_refused_free(&t, t.b + P, P, "second page of b");
    expect_refused_free(&t, t.a + P, 2 * P, "from inside a across into b");
    finish_trio(&t);
}

Test(upstream_host, refuses_a_size_that_rounds_to_the_same_pages_but_is_not_the_allocations) {
    /* alloc(512) freed with 1024: the same page, but not the pair alloc returned;
     * accepting it makes the wrapper's bytes_in_use wrap below zero. */
    size_t P = tu_page_size();
    trio t = make_trio();
    dev_free(t.u, t.c, 2 * P);
    t.c = dev_alloc(t.u, 512);
    ASSERT_AT(t.a, t.c, 4);
    t.stats = tu_upstream_stats(t.u);
    size_t f = free_bytes(t.u);
    cca_status st = cca_upstream_free(t.u, t.c, 1024);
    cca_upstream_stats now = tu_upstream_stats(t.u);
    cr_assert_eq(st, CCA_ERR_UPSTREAM, "free(p, 1024) of an alloc(512) returned %d (bytes_in_use now %zu)", (int)st,
                 now.bytes_in_use);
    assert_ustats_equal(&t.stats, &now, "wrong size within one page");
    cr_assert_eq(free_bytes(t.u), f);
    dev_free(t.u, t.c, 512);
    t.c = NULL;
    finish_trio(&t);
}

Test(upstream_host, refuses_pointers_outside_the_range) {
    size_t P = tu_page_size();
    trio t = make_trio();
    int on_stack;
    char *heap = malloc(4 * P);
    cr_assert_not_null(heap);
    expect_refused_free(&t, &on_stack, 512, "a stack address");
    expect_refused_free(&t, heap, 512, "a malloc'd address");
    expect_refused_free(&t, t.a - P, P, "the page below the range");
    expect_refused_free(&t, t.a - P, 2 * P, "from below the range into a");
    expect_refused_free(&t, t.a + 16 * P, P, "the page just past the range");
    expect_refused_free(&t, t.a + 15 * P, 2 * P, "the last page of the range and one past it");
    /* another device's allocation */
    cca_upstream *other = make_device(4 * P);
    char *o = dev_alloc(other, P);
    expect_refused_free(&t, o, P, "another device's allocation");
    dev_free(other, o, P);
    cca_upstream_destroy(other);
    free(heap);
    finish_trio(&t);
}

Test(upstream_host, refuses_misaligned_pointers_inside_the_range) {
    size_t P = tu_page_size();
    trio t = make_trio();
    expect_refused_free(&t, t.a + 512, 2 * P - 512, "a + 512");
    expect_refused_free(&t, t.a + 256, P, "a + 256");
    expect_refused_free(&t, t.b + 1, 512, "b + 1");
    expect_refused_free(&t, t.c + P / 2, P, "half a page into c");
    /* a misaligned pointer in the free tail */
    expect_refused_free(&t, t.c + 2 * P + 512, P, "inside the free tail, unaligned");
    expect_refused_free(&t, t.c + 2 * P, P, "the free tail, aligned (never allocated)");
    finish_trio(&t);
}

/* ---- pages live only while allocated ------------------------------------------ */

Test(upstream_host, freed_pages_go_back_to_the_os_and_come_back_zeroed) {
    size_t P = tu_page_size();
    size_t size = 64 * MiB;
    cca_upstream *u = make_device(128 * MiB);
    size_t r0 = tu_resident_bytes();
    char *p = dev_alloc(u, size);
    for (size_t i = 0; i < size; i += P)
        p[i] = (char)(1 + i / P % 251);
    p[size - 1] = 1;
    size_t r1 = tu_resident_bytes();
    cr_assert_geq(r1, r0 + 60 * MiB, "touching 64 MiB raised resident memory only from %zu to %zu", r0, r1);
    dev_free(u, p, size);
    size_t r2 = tu_resident_bytes();
    cr_assert_leq(r2 + 60 * MiB, r1, "freeing 64 MiB lowered resident memory only from %zu to %zu", r1, r2);
    TU_ASSERT_FAULTS(p);
    TU_ASSERT_FAULTS(p + size - 1);
    char *q = dev_alloc(u, size);
    cr_assert_eq(q, p, "first fit places it where the freed one was");
    for (size_t i = 0; i < size; i += P)
        cr_assert_eq(q[i], 0, "byte %zu of the new allocation reads %d, not 0", i, q[i]);
    cr_assert_eq(q[size - 1], 0);
    /* reading zero pages costs no memory */
    size_t r3 = tu_resident_bytes();
    cr_assert_leq(r3, r2 + 8 * MiB, "reading fresh pages raised resident memory from %zu to %zu", r2, r3);
    dev_free(u, q, size);
    cca_upstream_destroy(u);
}

/* The kernel's transparent huge page mode, when it is "[madvise]" (huge
 * pages only where asked) and not turned off for this process: NULL, else
 * why the hint cannot be seen ("[always]": every aligned page may be huge,
 * asked or not; "[never]": none). */
static const char *not_madvise_mode(void) {
    char mode[128] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f)
        return "no /sys/kernel/mm/transparent_hugepage/enabled: the kernel has no transparent huge pages";
    if (!fgets(mode, sizeof mode, f))
        mode[0] = 0;
    fclose(f);
    if (!strstr(mode, "[madvise]"))
        return "transparent huge pages are not in madvise mode: a hint is not what makes a page huge";
    if (prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0) == 1)
        return "transparent huge pages are off for this process (PR_SET_THP_DISABLE)";
    return NULL;
}

/* A counter of /proc/vmstat (0 when absent). */
static unsigned long vmstat(const char *name) {
    FILE *f = fopen("/proc/vmstat", "r");
    cr_assert_not_null(f, "/proc/vmstat: %s", strerror(errno));
    char key[64];
    unsigned long v, found = 0;
    while (fscanf(f, "%63s %lu", key, &v) == 2)
        if (strcmp(key, name) == 0)
            found = v;
    fclose(f);
    return found;
}

/* Of the mappings that meet [lo, hi) (smaps): how many, and their bytes in
 * huge pages (AnonHugePages). One that crosses an end is the range's
 * PROT_NONE rest merged with a neighbour of the same kind: no pages. */
static size_t mappings_in(uintptr_t lo, uintptr_t hi, size_t *huge) {
    FILE *f = fopen("/proc/self/smaps", "r");
    cr_assert_not_null(f, "/proc/self/smaps: %s", strerror(errno));
    char line[512];
    bool in = false;
    size_t kib = 0, n = 0;
    *huge = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long a, b;
        if (sscanf(line, "%lx-%lx ", &a, &b) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            in = a < hi && b > lo;
            n += in;
        } else if (in && sscanf(line, "AnonHugePages: %zu kB", &kib) == 1) {
            *huge += kib * 1024;
        }
    }
    fclose(f);
    return n;
}

static size_t huge_bytes_in(uintptr_t lo, uintptr_t hi) {
    size_t huge;
    mappings_in(lo, hi, &huge);
    return huge;
}

/* Touches [p, p + len) page by page; false when the kernel had no huge page
 * for one of the faults meanwhile (thp_fault_fallback, system-wide). */
static bool touch_had_huge_pages(char *p, size_t len) {
    unsigned long fallback = vmstat("thp_fault_fallback");
    for (size_t i = 0; i < len; i += tu_page_size())
        p[i] = 1;
    return vmstat("thp_fault_fallback") == fallback;
}

/* An allocation of whole 2 MiB pages is asked to be huge, as a GPU's
 * pages; any other allocation is not (the range is 2 MiB-aligned, so the
 * first allocation starts a page):
 *     MiB   0     2     4     6     8    10
 *           [ a: 4 MiB  ][ b: 3   ][c][ d ]
 *           [HUGE][HUGE ][ small pages][HUGE]   6 MiB huge
 * a freed: resident memory falls by its 4 MiB at once, d stays huge. */
Test(upstream_host, an_allocation_of_whole_2_mib_pages_is_huge_and_goes_back_at_once) {
    const char *why = not_madvise_mode();
    if (why)
        cr_skip_test("%s", why);
    cca_upstream *u = make_device(64 * MiB);
    char *a = dev_alloc(u, 4 * MiB), *b = dev_alloc(u, 3 * MiB), *c = dev_alloc(u, 1 * MiB);
    char *d = dev_alloc(u, 2 * MiB);
    cr_assert_eq((uintptr_t)a % (2 * MiB), 0, "the range starts at %p, off a 2 MiB page", (void *)a);
    cr_assert_eq(d, a + 8 * MiB);
    uintptr_t lo = (uintptr_t)a, hi = lo + 64 * MiB;
    if (!touch_had_huge_pages(a, 10 * MiB))
        cr_skip_test("the kernel had no huge page for a fault meanwhile (thp_fault_fallback)");
    cr_assert_eq(huge_bytes_in(lo, hi), 6 * MiB, "huge bytes: a's 4 MiB and d's 2, not b's or c's");
    size_t r1 = tu_resident_bytes();
    dev_free(u, a, 4 * MiB);
    size_t r2 = tu_resident_bytes();
    /* all 4 MiB (a huge page kept would be 2 MiB short), give or take the
     * few pages the reading of statm itself may touch (ASan's malloc) */
    cr_assert_leq(r2 + 4 * MiB, r1 + 64 * KiB, "freeing a's 4 MiB lowered resident memory only from %zu to %zu", r1,
                  r2);
    cr_assert_eq(huge_bytes_in(lo, hi), 2 * MiB, "d's");
    TU_ASSERT_FAULTS(a + 3 * MiB);
    cr_assert_eq(b[0], 1, "b keeps its data");
    dev_free(u, b, 3 * MiB);
    dev_free(u, c, 1 * MiB);
    dev_free(u, d, 2 * MiB);
    cca_upstream_destroy(u);
}

/* host_pages CCA_HOST_PAGES_SMALL: no hint anywhere, so every page is
 * 4 KiB in madvise mode: an allocation, a map and a host allocation of whole
 * 2 MiB pages, each touched throughout, hold no huge page; the same on a
 * default device holds 2 + 2 + 2 MiB of them (where the kernel has one for
 * each fault). */
Test(upstream_host, a_device_of_small_pages_asks_for_no_huge_page) {
    const char *why = not_madvise_mode();
    if (why)
        cr_skip_test("%s", why);
    for (int small = 1; small >= 0; small--) {
        cca_host_options o = {.capacity = 64 * MiB, .host_pages = small ? CCA_HOST_PAGES_SMALL : CCA_HOST_PAGES_HUGE};
        cca_upstream *u = NULL;
        cr_assert_eq(cca_upstream_host_create_with(&o, &u), CCA_OK, "%s", cca_last_error());
        char *a = dev_alloc(u, 2 * MiB), *m = NULL, *h = NULL;
        cr_assert_eq(cca_upstream_vm_reserve(u, 4 * MiB, (void **)&m), CCA_OK, "%s", cca_last_error());
        cr_assert_eq(cca_upstream_vm_map(u, m, 2 * MiB), CCA_OK, "%s", cca_last_error());
        cr_assert_eq(cca_upstream_host_alloc(u, 2 * MiB, (void **)&h), CCA_OK, "%s", cca_last_error());
        bool had = touch_had_huge_pages(a, 2 * MiB);
        had &= touch_had_huge_pages(m, 2 * MiB);
        had &= touch_had_huge_pages(h, 2 * MiB);
        size_t huge = huge_bytes_in((uintptr_t)a, (uintptr_t)a + 2 * MiB) +
                      huge_bytes_in((uintptr_t)m, (uintptr_t)m + 2 * MiB) +
                      huge_bytes_in((uintptr_t)h, (uintptr_t)h + 2 * MiB);
        if (small)
            cr_assert_eq(huge, 0, "a device of small pages holds %zu bytes of huge pages", huge);
        else if (had)
            cr_assert_eq(huge, 6 * MiB, "the default device: the allocation, map and host allocation are huge");
        cr_assert_eq(cca_upstream_host_free(u, h, 2 * MiB), CCA_OK, "%s", cca_last_error());
        cr_assert_eq(cca_upstream_vm_unmap(u, m, 2 * MiB), CCA_OK, "%s", cca_last_error());
        cr_assert_eq(cca_upstream_vm_release(u, m, 4 * MiB), CCA_OK, "%s", cca_last_error());
        dev_free(u, a, 2 * MiB);
        cca_upstream_destroy(u);
    }
}

/* The hint cuts no mapping: allocations of whole 2 MiB pages side by side
 * are one mapping, and so are allocations of any other size (a process has
 * vm.max_map_count mappings; a hint over part of each allocation cost two
 * more apiece). The rest of the range is one more. */
Test(upstream_host, hints_cut_no_mapping) {
    cca_upstream *u = make_device(256 * MiB);
    enum { N = 40 };
    char *p[N], *q[N];
    for (int i = 0; i < N; i++)
        p[i] = dev_alloc(u, 2 * MiB);
    uintptr_t lo = (uintptr_t)p[0], hi = lo + 256 * MiB;
    size_t huge;
    cr_assert_eq(mappings_in(lo, hi, &huge), 2, "%d allocations of 2 MiB, then the rest of the range", N);
    for (int i = 0; i < N; i++)
        q[i] = dev_alloc(u, 3 * MiB + 4096);
    size_t n = mappings_in(lo, hi, &huge); /* 2 where the kernel refuses the hint */
    cr_assert(n == 3 || n == 2, "then %d of 3 MiB + 4 KiB (no hint): at most one more mapping, not %zu", N, n);
    for (int i = 0; i < N; i++) {
        dev_free(u, p[i], 2 * MiB);
        dev_free(u, q[i], 3 * MiB + 4096);
    }
    cr_assert_eq(mappings_in(lo, hi, &huge), 1, "all freed: the range is one mapping again");
    cca_upstream_destroy(u);
}

/* A device whose range fits the address space but not the 2 MiB it is
 * aligned with (RLIMIT_AS) is made all the same, unaligned. */
Test(upstream_host, a_device_without_room_to_align_is_made_unaligned) {
    cca_upstream *u = make_device(64 * MiB); /* what a creation needs besides its range, once */
    cca_upstream_destroy(u);
    struct rlimit old;
    cr_assert_eq(getrlimit(RLIMIT_AS, &old), 0);
    FILE *f = fopen("/proc/self/statm", "r");
    cr_assert_not_null(f);
    unsigned long pages = 0;
    cr_assert_eq(fscanf(f, "%lu", &pages), 1);
    fclose(f);
    struct rlimit low = old;
    low.rlim_cur = (rlim_t)(pages * tu_page_size() + 64 * MiB + 1 * MiB); /* the range, not range + 2 MiB */
    cr_assert_eq(setrlimit(RLIMIT_AS, &low), 0, "setrlimit: %s", strerror(errno));
    cca_status st = cca_upstream_host_create(64 * MiB, &u);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", cca_last_error());
    void *p = NULL;
    cca_status sa = st == CCA_OK ? cca_upstream_alloc(u, 64 * MiB, &p) : st;
    tu_as_limit_lift(&old);
    cr_assert_eq(st, CCA_OK, "create under the limit: %s: %s", cca_status_string(st), msg);
    cr_assert_eq(sa, CCA_OK, "the whole capacity: %s", cca_status_string(sa));
    dev_free(u, p, 64 * MiB);
    cca_upstream_destroy(u);
}

/* A free made in place (new mappings refused) turns the hint off over its
 * pages: later allocations there that are not whole 2 MiB pages share no
 * huge page, as anywhere else. */
Test(upstream_host, a_free_in_place_takes_the_hint_off) {
    const char *why = not_madvise_mode();
    if (why)
        cr_skip_test("%s", why);
    cca_upstream *u = make_device(64 * MiB);
    char *p = dev_alloc(u, 8 * MiB);
    uintptr_t lo = (uintptr_t)p, hi = lo + 64 * MiB;
    memset(p, 0x5a, 8 * MiB);
    struct rlimit old = tu_as_limit_below_now();
    cca_status st = cca_upstream_free(u, p, 8 * MiB);
    tu_as_limit_lift(&old);
    cr_assert_eq(st, CCA_OK, "the free in place");
    char *x = dev_alloc(u, 1 * MiB), *y = dev_alloc(u, 3 * MiB);
    cr_assert_eq(x, p);
    if (!touch_had_huge_pages(x, 4 * MiB))
        cr_skip_test("the kernel had no huge page for a fault meanwhile (thp_fault_fallback)");
    cr_assert_eq(huge_bytes_in(lo, hi), 0, "no huge page under x and y, which share [0, 2 MiB)");
    dev_free(u, x, 1 * MiB);
    dev_free(u, y, 3 * MiB);
    cca_upstream_destroy(u);
}

/* A free while the kernel refuses every new mapping (the address space
 * above RLIMIT_AS: even fresh pages over old ones of the same size) still
 * gives the pages back: they go back in place (mprotect, MADV_DONTNEED),
 * a touch faults, the neighbour keeps its data, and the hole is allocated
 * again as zeros once the limit is lifted. */
Test(upstream_host, a_free_while_new_mappings_are_refused_still_gives_the_pages_back) {
    size_t P = tu_page_size(), size = 64 * MiB;
    cca_upstream *u = make_device(128 * MiB);
    char *p = dev_alloc(u, size);
    char *n = dev_alloc(u, P);
    memset(p, 0x5a, size);
    n[0] = 3;
    size_t r1 = tu_resident_bytes();
    struct rlimit old = tu_as_limit_below_now();
    cca_status st = cca_upstream_free(u, p, size);
    char why[512];
    snprintf(why, sizeof why, "%s", cca_last_error());
    tu_as_limit_lift(&old);
    cr_assert_eq(st, CCA_OK, "free under the limit: %s: %s", cca_status_string(st), why);
    size_t r2 = tu_resident_bytes();
    cr_assert_leq(r2 + 60 * MiB, r1, "freeing 64 MiB lowered resident memory only from %zu to %zu", r1, r2);
    cr_assert_eq(free_bytes(u), 128 * MiB - P);
    TU_ASSERT_FAULTS(p);
    TU_ASSERT_FAULTS(p + size - 1);
    cr_assert_eq(n[0], 3, "the neighbour lost its data");
    char *q = dev_alloc(u, size);
    cr_assert_eq(q, p);
    cr_assert_eq(q[0], 0, "fresh pages, not the old contents");
    cr_assert_eq(q[size - 1], 0);
    dev_free(u, q, size);
    dev_free(u, n, P);
    cca_upstream_destroy(u);
}

/* A free that can give the pages back neither way (new mappings refused,
 * RLIMIT_AS; the block mlocked, so MADV_DONTNEED refuses with EINVAL) is
 * CCA_ERR_UPSTREAM naming the reason and changes nothing: the block stays
 * allocated, readable and writable with its data (give_back's PROT_NONE
 * undone), and frees once the pages can go (fresh pages over locked ones). */
Test(upstream_host, a_free_that_cannot_give_the_pages_back_changes_nothing) {
    size_t P = tu_page_size();
    cca_upstream *u = make_device(16 * MiB);
    char *p = dev_alloc(u, 2 * P);
    memset(p, 0x5a, 2 * P);
    char why_not[160];
    if (!tu_mlock(p, 2 * P, why_not, sizeof why_not))
        cr_skip_test("%s", why_not);
    size_t free_before = free_bytes(u);
    struct rlimit old = tu_as_limit_below_now();
    cca_status st = cca_upstream_free(u, p, 2 * P);
    char why[512];
    snprintf(why, sizeof why, "%s", cca_last_error());
    tu_as_limit_lift(&old);
    cr_assert_eq(st, CCA_ERR_UPSTREAM, "free of locked pages under the limit: %s: %s", cca_status_string(st), why);
    char want[256];
    snprintf(want, sizeof want, "host device: unmapping %zu bytes failed: %s", 2 * P, strerror(EINVAL));
    cr_assert_str_eq(why, want);
    cr_assert_eq(free_bytes(u), free_before);
    TU_ASSERT_READABLE(p);
    TU_ASSERT_READABLE(p + 2 * P - 1);
    cr_assert_eq(p[0], 0x5a, "the block lost its data");
    cr_assert_eq(p[2 * P - 1], 0x5a);
    p[P] = 1;              /* still writable */
    dev_free(u, p, 2 * P); /* fresh pages replace locked ones too */
    TU_ASSERT_FAULTS(p);
    cr_assert_eq(free_bytes(u), 16 * MiB);
    cca_upstream_destroy(u);
}

Test(upstream_host, freed_pages_fault_and_neighbours_do_not) {
    size_t P = tu_page_size();
    cca_upstream *u = make_device(16 * P);
    char *a = dev_alloc(u, P);
    char *b = dev_alloc(u, 3 * P);
    char *c = dev_alloc(u, P);
    /* the part of the range never allocated faults */
    TU_ASSERT_FAULTS(c + P);
    TU_ASSERT_FAULTS(a + 15 * P);
    for (size_t k = 0; k < 3; k++) {
        TU_ASSERT_READABLE(b + k * P);
        TU_ASSERT_READABLE(b + k * P + P - 1);
    }
    memset(b, 0x77, 3 * P);
    a[P - 1] = 1;
    c[0] = 2;
    dev_free(u, b, 3 * P);
    for (size_t k = 0; k < 3; k++) {
        TU_ASSERT_FAULTS(b + k * P);
        TU_ASSERT_FAULTS(b + k * P + P - 1);
    }
    /* the neighbours keep their pages and contents */
    TU_ASSERT_READABLE(a + P - 1);
    TU_ASSERT_READABLE(c);
    cr_assert_eq(a[P - 1], 1);
    cr_assert_eq(c[0], 2);
    /* a smaller alloc reuses the hole's start: only its own page is back */
    char *d = dev_alloc(u, 512);
    cr_assert_eq(d, b);
    TU_ASSERT_READABLE(d);
    TU_ASSERT_READABLE(d + P - 1);
    cr_assert_eq(d[0], 0, "fresh page, not the old contents");
    TU_ASSERT_FAULTS(d + P);
    TU_ASSERT_FAULTS(d + 2 * P + P - 1);
    dev_free(u, a, P);
    dev_free(u, c, P);
    dev_free(u, d, 512);
    TU_ASSERT_FAULTS(a);
    TU_ASSERT_FAULTS(c);
    TU_ASSERT_FAULTS(d);
    cca_upstream_destroy(u);
}

#if !defined(TU_ASAN)
/* ASan turns a SIGSEGV into its own report and an exit: probed with write(2)
 * above instead. */
Test(upstream_host, touching_freed_memory_raises_sigsegv, .signal = SIGSEGV) {
    size_t P = tu_page_size();
    cca_upstream *u = make_device(4 * P);
    char *p = dev_alloc(u, 2 * P);
    volatile char *v = p;
    v[P] = 1;
    cr_assert_eq(v[P], 1);
    dev_free(u, p, 2 * P);
    v[P] = 2; /* faults */
    cca_upstream_destroy(u);
}
#endif

/* ---- driver latencies ---------------------------------------------------------- */

Test(upstream_host, alloc_and_free_latencies_are_waited_granted_or_refused) {
    size_t P = tu_page_size();
    const uint64_t ms = 1000000;
    cca_host_options o = {.capacity = 4 * P, .alloc_latency_ns = 2 * ms, .free_latency_ns = 3 * ms};
    cca_upstream *u = NULL;
    cr_assert_eq(cca_upstream_host_create_with(&o, &u), CCA_OK, "%s", cca_last_error());
    uint64_t t0 = tu_now_ns();
    char *p = dev_alloc(u, P);
    uint64_t t1 = tu_now_ns();
    cr_assert_geq(t1 - t0, 2 * ms, "alloc took %llu ns", (unsigned long long)(t1 - t0));
    expect_oom(u, 4 * P);
    uint64_t t2 = tu_now_ns();
    cr_assert_geq(t2 - t1, 2 * ms, "a refused alloc took %llu ns", (unsigned long long)(t2 - t1));
    dev_free(u, p, P);
    uint64_t t3 = tu_now_ns();
    cr_assert_geq(t3 - t2, 3 * ms, "free took %llu ns", (unsigned long long)(t3 - t2));
    cr_assert_eq(cca_upstream_free(u, p, P), CCA_ERR_UPSTREAM);
    uint64_t t4 = tu_now_ns();
    cr_assert_geq(t4 - t3, 3 * ms, "a refused free took %llu ns", (unsigned long long)(t4 - t3));
    /* mem_info is not a driver call that waits: nothing asserted on it but
     * that the figures are exact */
    ASSERT_FREE_PAGES(u, 4);
    cca_upstream_destroy(u);
}

/* ccalloc.h: "Cost: one mmap ... and three host mallocs" (the device's
 * record, its array of free extents, the wrapper's record). */
Test(upstream_host, creation_costs_three_host_mallocs) {
    cca_upstream *u = NULL;
    long n = tu_malloc_calls();
    cr_assert_eq(cca_upstream_host_create(MiB, &u), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(tu_malloc_calls() - n, 3);
    cca_upstream_destroy(u);
}

Test(upstream_host, creation_checks_its_arguments) {
    cca_upstream *u = (cca_upstream *)1;
    cca_host_options o = {.capacity = MiB};
    cr_assert_eq(cca_upstream_host_create_with(NULL, &u), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_null(u);
    cr_assert_eq(cca_upstream_host_create_with(&o, NULL), CCA_ERR_INVALID_ARGUMENT);
    u = (cca_upstream *)1;
    o.capacity = 0;
    cr_assert_eq(cca_upstream_host_create_with(&o, &u), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_null(u);
    /* 0 is below the host page like any such capacity, and its message says so
     * (ccalloc.h: "0 included ... the message names the page") */
    char least[160];
    snprintf(least, sizeof least, "capacity 0 is below the %zu-byte host page", tu_page_size());
    cr_assert(strstr(cca_last_error(), least), "%s", cca_last_error());
    u = (cca_upstream *)1;
    cr_assert_eq(cca_upstream_host_create(0, &u), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_null(u);
    cr_assert(strstr(cca_last_error(), least), "%s", cca_last_error());
    u = (cca_upstream *)1;
    o.capacity = SIZE_MAX / 2 + 1;
    cr_assert_eq(cca_upstream_host_create_with(&o, &u), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_null(u);
    u = (cca_upstream *)1;
    cr_assert_eq(cca_upstream_host_create(SIZE_MAX, &u), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_null(u);
    u = (cca_upstream *)1;
    cr_assert_eq(cca_upstream_host_create(SIZE_MAX / 2 + 1, &u), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_null(u);

    o.capacity = MiB;
    o.alloc_latency_ns = CCA_HOST_MAX_LATENCY_NS + 1;
    u = (cca_upstream *)1;
    cr_assert_eq(cca_upstream_host_create_with(&o, &u), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_null(u);
    o.alloc_latency_ns = 0;
    o.free_latency_ns = CCA_HOST_MAX_LATENCY_NS + 1;
    u = (cca_upstream *)1;
    cr_assert_eq(cca_upstream_host_create_with(&o, &u), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_null(u);
    /* the maximum itself is allowed (nothing is allocated: it would wait 1 s) */
    o.alloc_latency_ns = CCA_HOST_MAX_LATENCY_NS;
    o.free_latency_ns = CCA_HOST_MAX_LATENCY_NS;
    cr_assert_eq(cca_upstream_host_create_with(&o, &u), CCA_OK, "%s", cca_last_error());
    cr_assert_not_null(u);
    cr_assert_eq(total_bytes(u), MiB);
    cca_upstream_destroy(u);

    /* a large device costs no memory: only address space is reserved */
    size_t r0 = tu_resident_bytes();
    u = make_device(64 * GiB);
    cr_assert_eq(total_bytes(u), 64 * GiB);
    cr_assert_eq(free_bytes(u), 64 * GiB);
    cr_assert_leq(tu_resident_bytes(), r0 + 4 * MiB);
    char *p = dev_alloc(u, 256 * MiB);
    cr_assert_eq(free_bytes(u), 64 * GiB - 256 * MiB);
    dev_free(u, p, 256 * MiB);
    cca_upstream_destroy(u);
}

/* ---- tenants ------------------------------------------------------------------- */

/* Mixed sizes allocated, freed in two passes and emptied: the device's free
 * memory is exact throughout and comes back whole. Classic segments are the
 * device's allocations, so their addresses lie in its range and a new
 * allocation of the whole capacity covers them, zeroed; expandable segments
 * are vm ranges (their pages maps), given back with nothing mapped or
 * reserved left. */
static void gives_everything_back(bool classic) {
    size_t cap = 64 * MiB;
    cca_upstream *u = make_device(cap);
    cca_allocator *a = tu_allocator(u, classic ? "expandable:0" : "expandable:1");
    size_t sizes[] = {1 * KiB, 100 * KiB, 3 * MiB, 12 * MiB, 512, 24 * MiB, 7 * KiB};
    enum { NS = sizeof sizes / sizeof sizes[0] };
    char *p[NS];
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < NS; i++) {
        p[i] = tu_alloc(a, sizes[i], NULL);
        memset(p[i], 0x40 + i, sizes[i]);
        if ((uintptr_t)p[i] < lo)
            lo = (uintptr_t)p[i];
        if ((uintptr_t)p[i] + sizes[i] > hi)
            hi = (uintptr_t)p[i] + sizes[i];
    }
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.expandable_segments == 0, classic, "%zu expandable segments", s.expandable_segments);
    cr_assert_eq(free_bytes(u), cap - s.reserved_bytes, "mem_info free %zu, capacity %zu, reserved %zu",
                 free_bytes(u), cap, s.reserved_bytes);
    for (int i = 0; i < NS; i += 2)
        tu_free(a, p[i]);
    for (int i = 1; i < NS; i += 2)
        tu_free(a, p[i]);
    cca_release_report r;
    cr_assert_eq(cca_empty_cache(a, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(r.bytes_still_reserved, 0);
    cr_assert_eq(free_bytes(u), cap);
    cca_upstream_stats us = tu_upstream_stats(u);
    cr_assert_eq(us.bytes_in_use, 0);
    cr_assert_eq(us.allocations, 0);
    cr_assert_eq(us.vm_mapped_bytes, 0);
    cr_assert_eq(us.vm_reserved_bytes, 0);
    for (int i = 0; i < NS; i++)
        TU_ASSERT_FAULTS(p[i]);
    tu_destroy_clean(a, u);
    /* the whole capacity in one piece, over every address classic segments had */
    char *all = dev_alloc(u, cap);
    if (classic) {
        cr_assert_leq((uintptr_t)all, lo);
        cr_assert_leq(hi, (uintptr_t)all + cap);
        for (int i = 0; i < NS; i++) {
            cr_assert_eq(p[i][0], 0, "block %d's old contents are back", i);
            cr_assert_eq(p[i][sizes[i] - 1], 0);
        }
    }
    dev_free(u, all, cap);
    cr_assert_eq(free_bytes(u), cap);
    cca_upstream_destroy(u);
}

Test(upstream_host, an_allocator_gives_everything_back_and_the_range_is_whole_again) {
    gives_everything_back(true);
}

Test(upstream_host, an_expandable_allocator_gives_everything_back) {
    gives_everything_back(false);
}

enum { THREADS = 4, THREAD_OPS = 2000, THREAD_LIVE = 16, THREAD_MAX_PAGES = 8, SHARED_PAGES = 256 };

typedef struct registry {
    pthread_mutex_t lock;
    struct {
        uintptr_t lo, hi;
    } live[THREADS * THREAD_LIVE];
    int n;
} registry;

typedef struct worker {
    cca_upstream *u;
    registry *reg;
    uintptr_t base;
    int id;
    uint64_t allocs, frees, ooms;
    char error[160]; /* asserting off the main thread is not allowed */
} worker;

static uint64_t stamp(int id, uint64_t serial, size_t page) {
    return (uint64_t)id << 56 ^ serial << 16 ^ (uint64_t)page;
}

static void *work(void *arg) {
    worker *w = arg;
    size_t P = tu_page_size();
    uint64_t rng = 0x5eed + (uint64_t)w->id;
    struct {
        char *p;
        size_t len;
        uint64_t serial;
    } live[THREAD_LIVE];
    int n = 0;
    uint64_t serial = 0;
    for (int op = 0; op < THREAD_OPS && !w->error[0]; op++) {
        if (n == 0 || (n < THREAD_LIVE && tu_rand(&rng) % 2)) {
            size_t len = (1 + tu_rand(&rng) % THREAD_MAX_PAGES) * P;
            void *p = NULL;
            cca_status st = cca_upstream_alloc(w->u, len, &p);
            if (st == CCA_ERR_OUT_OF_MEMORY) {
                w->ooms++;
                continue;
            }
            if (st != CCA_OK || !p) {
                snprintf(w->error, sizeof w->error, "alloc of %zu returned %d", len, (int)st);
                break;
            }
            uintptr_t lo = (uintptr_t)p, hi = lo + len;
            if (lo < w->base || hi > w->base + SHARED_PAGES * P || (lo - w->base) % P) {
                snprintf(w->error, sizeof w->error, "%p (+%zu) is not a page of the range", p, len);
                break;
            }
            pthread_mutex_lock(&w->reg->lock);
            for (int i = 0; i < w->reg->n && !w->error[0]; i++)
                if (lo < w->reg->live[i].hi && w->reg->live[i].lo < hi)
                    snprintf(w->error, sizeof w->error, "[%#lx,%#lx) overlaps the live [%#lx,%#lx)",
                             (unsigned long)lo, (unsigned long)hi, (unsigned long)w->reg->live[i].lo,
                             (unsigned long)w->reg->live[i].hi);
            w->reg->live[w->reg->n].lo = lo, w->reg->live[w->reg->n].hi = hi;
            w->reg->n++;
            pthread_mutex_unlock(&w->reg->lock);
            serial++;
            for (size_t k = 0; k < len; k += P) {
                uint64_t v = stamp(w->id, serial, k / P);
                memcpy((char *)p + k, &v, sizeof v);
                memcpy((char *)p + k + P - sizeof v, &v, sizeof v);
            }
            live[n].p = p, live[n].len = len, live[n].serial = serial;
            n++;
            w->allocs++;
        } else {
            int i = (int)(tu_rand(&rng) % (uint64_t)n);
            for (size_t k = 0; k < live[i].len && !w->error[0]; k += P) {
                uint64_t v = stamp(w->id, live[i].serial, k / P), head, tail;
                memcpy(&head, live[i].p + k, sizeof head);
                memcpy(&tail, live[i].p + k + P - sizeof tail, sizeof tail);
                if (head != v || tail != v)
                    snprintf(w->error, sizeof w->error, "page %zu of %p was written by someone else", k / P,
                             (void *)live[i].p);
            }
            /* out of the registry first: once freed, another thread may get it */
            pthread_mutex_lock(&w->reg->lock);
            for (int j = 0; j < w->reg->n; j++)
                if (w->reg->live[j].lo == (uintptr_t)live[i].p) {
                    w->reg->live[j] = w->reg->live[--w->reg->n];
                    break;
                }
            pthread_mutex_unlock(&w->reg->lock);
            cca_status st = cca_upstream_free(w->u, live[i].p, live[i].len);
            if (st != CCA_OK) {
                snprintf(w->error, sizeof w->error, "free of %p (%zu) returned %d", (void *)live[i].p, live[i].len,
                         (int)st);
                break;
            }
            live[i] = live[--n];
            w->frees++;
        }
    }
    while (n > 0) {
        n--;
        pthread_mutex_lock(&w->reg->lock);
        for (int j = 0; j < w->reg->n; j++)
            if (w->reg->live[j].lo == (uintptr_t)live[n].p) {
                w->reg->live[j] = w->reg->live[--w->reg->n];
                break;
            }
        pthread_mutex_unlock(&w->reg->lock);
        if (cca_upstream_free(w->u, live[n].p, live[n].len) != CCA_OK && !w->error[0])
            snprintf(w->error, sizeof w->error, "final free of %p failed", (void *)live[n].p);
        w->frees++;
    }
    return NULL;
}

Test(upstream_host, four_threads_on_one_device_never_share_memory) {
    size_t P = tu_page_size();
    cca_upstream *u = make_device(SHARED_PAGES * P);
    char *base = dev_alloc(u, SHARED_PAGES * P); /* the range's start */
    dev_free(u, base, SHARED_PAGES * P);
    static registry reg;
    memset(&reg, 0, sizeof reg);
    pthread_mutex_init(&reg.lock, NULL);
    worker w[THREADS];
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].u = u, w[i].reg = &reg, w[i].base = (uintptr_t)base, w[i].id = i + 1;
        cr_assert_eq(pthread_create(&th[i], NULL, work, &w[i]), 0);
    }
    uint64_t allocs = 0, frees = 0, ooms = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        cr_assert_eq(w[i].error[0], 0, "thread %d: %s", i, w[i].error);
        allocs += w[i].allocs, frees += w[i].frees, ooms += w[i].ooms;
        cr_assert_gt(w[i].allocs, THREAD_OPS / 4, "thread %d did little (%llu allocs)", i,
                     (unsigned long long)w[i].allocs);
    }
    cr_assert_eq(reg.n, 0);
    cr_assert_eq(allocs, frees);
    ASSERT_FREE_PAGES(u, SHARED_PAGES);
    cca_upstream_stats s = tu_upstream_stats(u);
    cr_assert_eq(s.bytes_in_use, 0);
    cr_assert_eq(s.allocations, 0);
    cr_assert_eq(s.alloc_calls, allocs + 1);
    cr_assert_eq(s.free_calls, frees + 1);
    cr_assert_eq(s.failed_allocs, ooms);
    /* the peak counts what the device held at some moment: never more than
     * it has, though a free and another thread's alloc overlap */
    cr_assert_leq(s.bytes_in_use_peak, SHARED_PAGES * P);
    /* one extent again, at the same place */
    char *all = dev_alloc(u, SHARED_PAGES * P);
    cr_assert_eq(all, base);
    dev_free(u, all, SHARED_PAGES * P);
    pthread_mutex_destroy(&reg.lock);
    cca_upstream_destroy(u);
}
