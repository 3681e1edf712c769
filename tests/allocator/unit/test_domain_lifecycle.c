/*
 * test_domain_lifecycle.c — allocator/src/domain.c: a domain from creation
 * to destruction, held to the contract in ccalloc.h ("Memory domains").
 * Most tests run twice (TEST_BOTH, domain_suite.h): with classic segments
 * and with expandable segments (expandable:1 over the simulated device's
 * vm ops, 64 KiB pages).
 *
 *   create      bad names (NULL, empty, > CCA_DOMAIN_NAME_MAX, control and
 *               non-ASCII bytes, '"', '\\') and NULL arguments refused with
 *               CCA_ERR_INVALID_ARGUMENT, nothing added; edge names kept
 *               verbatim; duplicate names; a greedy allocator refuses.
 *   domain_of   blocks from cca_alloc_in name their domain, the default
 *               domain is NULL; interior, freed and foreign pointers are
 *               refused.
 *   isolation   a domain's blocks share no segment (expandable: no page)
 *               with another's: releasing a domain whose blocks are all
 *               free gives back exactly its reserved bytes, to the device's
 *               own count, while the other domains' data stay intact.
 *   live        a release with live blocks releases nothing (every stat
 *               and the device unchanged) and lists them: ptr, held size,
 *               requested, stream, age, pending; leaks_cap below the count,
 *               0, leaks NULL; cca_domain_destroy refuses likewise. The
 *               default domain's report is as exact, with no domain ever
 *               created and for blocks made before the first domain.
 *   force       CCA_DOMAIN_FORCE releases live blocks: their pointers are
 *               invalid afterwards, the allocator's totals drop by exactly
 *               the domain's.
 *   destroy     the default domain cannot be; a destroyed domain's memory
 *               goes back; domains left to cca_destroy are freed (ASan).
 *
 * Readings of the contract where it leaves room (noted at each test):
 *   - age = successful allocations in the allocator made after the block
 *     ("allocations since it was made"): 0 for the latest block;
 *   - a forced release that released everything returns CCA_OK (the header
 *     keeps CCA_ERR_LIVE_BLOCKS for blocks that were not released);
 *   - cca_domain_of on a pointer that is not live: CCA_ERR_INVALID_POINTER,
 *     the status the header gives unknown and interior pointers.
 *
 * The other suites of domain.c: test_domain_stats.c, test_domain_release.c,
 * test_domain_footprint.c.
 */
#include "domain_suite.h"

/* ---- create --------------------------------------------------------------------- */

Test(domain, create_refuses_bad_names_and_arguments) {
    cca_upstream *u = device(64 * MiB);
    cca_allocator *a = make(&CLASSIC, u, NULL);
    char n64[CCA_DOMAIN_NAME_MAX + 2], n63[CCA_DOMAIN_NAME_MAX + 1], n200[201];
    memset(n64, 'n', CCA_DOMAIN_NAME_MAX + 1), n64[CCA_DOMAIN_NAME_MAX + 1] = '\0';
    memset(n63, 'm', CCA_DOMAIN_NAME_MAX), n63[CCA_DOMAIN_NAME_MAX] = '\0';
    memset(n200, 'x', 200), n200[200] = '\0';
    const char *bad[] = {"",      n64,           n200,         "\x01",        "tab\there", "new\nline", "del\x7f",
                         "\x1f",  "caf\xc3\xa9", "hi\x80",     "quo\"te",     "\"",        "back\\slash", "\\",
                         "end\\", "a\rb",        "\xff",      "com,ma",      ","};
    cca_stats before = tu_stats(a);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cca_domain *d = NULL;
        cca_clear_error();
        cca_status st = cca_domain_create(a, bad[i], &d);
        cr_assert_eq(st, CCA_ERR_INVALID_ARGUMENT, "name %zu (\"%s\"): %s", i, bad[i], cca_status_string(st));
        cr_assert_neq(cca_last_error()[0], '\0', "name %zu: a refusal says why", i);
    }
    cca_domain *d = NULL;
    cr_assert_eq(cca_domain_create(a, NULL, &d), CCA_ERR_INVALID_ARGUMENT, "NULL name");
    cr_assert_eq(cca_domain_create(NULL, "x", &d), CCA_ERR_INVALID_ARGUMENT, "NULL allocator");
    cr_assert_eq(cca_domain_create(a, "x", NULL), CCA_ERR_INVALID_ARGUMENT, "NULL out");
    cJSON *json = domains_json(a);
    cr_assert_eq(cJSON_GetArraySize(json), 1, "refused creations add no domain");
    cJSON_Delete(json);
    tu_assert_intact(a, &before, "refused creations");

    /* the edges of the allowed set, kept verbatim; duplicates allowed */
    const char *good[] = {n63, " ", "~", "a b/c:d{}[]'!#$%&()*+-.;<=>?@^_`|", "model", "model"};
    cca_domain *g[6];
    for (int i = 0; i < 6; i++) {
        g[i] = dom(a, good[i]);
        cca_domain_stats s = dst(a, g[i]);
        cr_assert_str_eq(s.name, good[i]);
        cr_assert_eq(s.allocated_bytes + s.allocated_bytes_peak + s.requested_bytes + s.requested_bytes_peak +
                         s.reserved_bytes + s.reserved_bytes_peak + s.active_blocks + s.active_blocks_peak +
                         s.cached_bytes + s.largest_free_block + s.segments + s.alloc_calls + s.upstream_allocs +
                         s.upstream_frees,
                     0, "a new domain is empty");
        cr_assert_eq(s.fragmentation, 0.0);
        for (int j = 0; j < i; j++)
            cr_assert_neq(g[i], g[j], "every domain is a handle of its own, whatever its name");
    }
    tu_assert_intact(a, &before, "a domain holds no memory until something is allocated in it");
    cr_assert_eq(tu_upstream_stats(u).alloc_calls, 0);
    /* NULL arguments of the queries */
    cca_domain_stats s;
    cr_assert_eq(cca_get_domain_stats(NULL, g[0], &s), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_get_domain_stats(a, g[0], NULL), CCA_ERR_INVALID_ARGUMENT);
    FILE *f = fopen("/dev/null", "w");
    cr_assert_not_null(f);
    cr_assert_eq(cca_domain_stats_write_json(NULL, f), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_domain_stats_write_json(a, NULL), CCA_ERR_INVALID_ARGUMENT);
    fclose(f);
    finish(a, u);
}

Test(domain, a_greedy_allocator_refuses_domains) {
    cca_upstream *u = device(64 * MiB);
    cca_allocator *a = tu_allocator(u, "policy:greedy,greedy_bytes:16M,log_oom:0");
    cca_stats before = tu_stats(a);
    cca_domain *d = NULL;
    cr_assert_eq(cca_domain_create(a, "model", &d), CCA_ERR_INVALID_ARGUMENT, "%s", cca_last_error());
    tu_assert_intact(a, &before, "refused creation");
    cJSON *json = domains_json(a);
    cr_assert_eq(cJSON_GetArraySize(json), 1);
    cJSON_Delete(json);
    /* the default domain works as ever */
    void *p = NULL;
    cr_assert_eq(cca_alloc_in(a, NULL, 4096, NULL, &p), CCA_OK);
    cr_assert_eq(owner(a, p), NULL);
    tu_free(a, p);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    finish(a, u);
}

/* ---- alloc_in and domain_of -------------------------------------------------------- */

TEST_BOTH(alloc_in_and_domain_of) {
    cca_upstream *u = device(256 * MiB);
    cca_allocator *a = make(m, u, NULL);
    cca_domain *A = dom(a, "A"), *B = dom(a, "B");
    cca_domain *doms[] = {A, B};
    const size_t sizes[] = {1000, 4096, 300 * KiB, 3 * MiB, 12 * MiB};
    void *pa[5], *pb[5], *pd[5], *pn[5];
    for (int i = 0; i < 5; i++) {
        pa[i] = in(a, A, sizes[i], S0);
        pb[i] = in(a, B, sizes[i], S0);
        pd[i] = tu_alloc(a, sizes[i], S0); /* cca_alloc: the default domain */
        cr_assert_null(owner(a, pd[i]), "a cca_alloc block is the default domain's (NULL)");
        pn[i] = in(a, NULL, sizes[i], S0);
        cr_assert_null(owner(a, pn[i]));
    }
    agree(a, u, doms, 2, "allocated");
    cca_domain_stats sA = dst(a, A);
    cr_assert_eq(sA.alloc_calls, 5);
    cr_assert_eq(dst(a, NULL).alloc_calls, 10, "cca_alloc and cca_alloc_in(NULL) both count in the default domain");
    /* size 0: OK, NULL, nothing counted */
    void *z = (void *)1;
    cr_assert_eq(cca_alloc_in(a, A, 0, S0, &z), CCA_OK);
    cr_assert_null(z);
    dstats_unchanged(a, A, &sA, "alloc_in of 0 bytes");
    /* a request that can never succeed: OOM at once, nothing counted in A */
    cca_stats sb = tu_stats(a);
    z = (void *)1;
    cr_assert_eq(cca_alloc_in(a, A, 1 * GiB, S0, &z), CCA_ERR_OUT_OF_MEMORY);
    cr_assert_null(z, "*out is NULL on failure");
    dstats_unchanged(a, A, &sA, "impossible request");
    cr_assert_eq(tu_stats(a).ooms, sb.ooms + 1);
    /* argument errors */
    z = (void *)1;
    cr_assert_eq(cca_alloc_in(NULL, A, 64, S0, &z), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_alloc_in(a, A, 64, S0, NULL), CCA_ERR_INVALID_ARGUMENT);
    cca_domain *d = NULL;
    cr_assert_eq(cca_domain_of(NULL, pa[0], &d), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_domain_of(a, pa[0], NULL), CCA_ERR_INVALID_ARGUMENT);
    d = (cca_domain *)1;
    cca_status st = cca_domain_of(a, NULL, &d); /* ccalloc.h: ptr NULL is CCA_ERR_INVALID_ARGUMENT */
    cr_assert_eq(st, CCA_ERR_INVALID_ARGUMENT, "NULL pointer: %s", cca_status_string(st));
    cr_assert_null(d);
    /* pointers that are not live blocks */
    int local;
    const void *bad[] = {(char *)pa[0] + 256, (char *)pa[3] + 4096, (char *)pb[4] + CCA_ALIGNMENT, &local,
                         (void *)0x1000};
    for (int i = 0; i < 5; i++) {
        st = cca_domain_of(a, bad[i], &d);
        cr_assert_eq(st, CCA_ERR_INVALID_POINTER, "bad pointer %d (%p): %s", i, bad[i], cca_status_string(st));
    }
    /* blocks of different domains never overlap */
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 5; j++) {
            uintptr_t x = (uintptr_t)pa[i], y = (uintptr_t)pb[j];
            cr_assert(x + sizes[i] <= y || y + sizes[j] <= x, "A's %p and B's %p overlap", pa[i], pb[j]);
        }
    /* a freed A block is A's cache: B's next request of its size gets B's
     * memory, and A's stats do not move */
    tu_free(a, pa[1]);
    st = cca_domain_of(a, pa[1], &d);
    cr_assert_eq(st, CCA_ERR_INVALID_POINTER, "a freed pointer: %s", cca_status_string(st));
    sA = dst(a, A);
    void *q = in(a, B, sizes[1], S0);
    cr_assert_neq(q, pa[1], "B got A's cached block");
    dstats_unchanged(a, A, &sA, "B's allocation");
    void *r = in(a, A, sizes[1], S0);
    cr_assert_eq(r, pa[1], "A's own cached block serves A (best fit, same stream)");
    tu_free(a, q), tu_free(a, r);
    for (int i = 0; i < 5; i++) {
        if (i != 1)
            tu_free(a, pa[i]);
        tu_free(a, pb[i]), tu_free(a, pd[i]), tu_free(a, pn[i]);
    }
    agree(a, u, doms, 2, "all freed");
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    agree(a, u, doms, 2, "empty_cache");
    finish(a, u);
}

/* ---- isolation -------------------------------------------------------------------- */

/* Whether two blocks share a page (expandable) or overlap. */
static bool share_page(const blk *x, const blk *y, size_t page) {
    uintptr_t x0 = (uintptr_t)x->p / page, x1 = ((uintptr_t)x->p + x->held - 1) / page;
    uintptr_t y0 = (uintptr_t)y->p / page, y1 = ((uintptr_t)y->p + y->held - 1) / page;
    return !(x1 < y0 || y1 < x0);
}

TEST_BOTH(releasing_a_domain_returns_exactly_its_memory) {
    cca_upstream *u = device(512 * MiB);
    cca_allocator *a = make(m, u, NULL);
    cca_domain *A = dom(a, "A"), *B = dom(a, "B");
    cca_domain *doms[] = {A, B};
    /* interleaved: every kind of segment (small, medium, large; two streams)
     * would be shared if domains did not keep them apart */
    const size_t sizes[] = {700, 64 * KiB, 900 * KiB, 3 * MiB, 5 * MiB + 7 * KiB, 12 * MiB, 2048, 1 * MiB};
    enum { N = 8 };
    blk ba[N], bb[N], bd[N];
    for (int i = 0; i < N; i++) {
        cca_stream s = i % 2 ? S1 : S0;
        ba[i] = mk(a, A, sizes[i], s, 100 + i, true);
        bb[i] = mk(a, B, sizes[i], s, 200 + i, true);
        bd[i] = mk(a, NULL, sizes[i], s, 300 + i, true);
    }
    /* a free with another stream recorded (host events complete at once) */
    cr_assert_eq(cca_record_stream(a, ba[2].p, S1), CCA_OK);
    agree(a, u, doms, 2, "allocated");
    if (m->expandable)
        for (int i = 0; i < N; i++)
            for (int j = 0; j < N; j++) {
                cr_assert(!share_page(&ba[i], &bb[j], PG), "A's %p and B's %p share a page", ba[i].p, bb[j].p);
                cr_assert(!share_page(&ba[i], &bd[j], PG), "A's %p and the default's %p share a page", ba[i].p,
                          bd[j].p);
                cr_assert(!share_page(&bb[i], &bd[j], PG), "B's %p and the default's %p share a page", bb[i].p,
                          bd[j].p);
            }
    for (int i = 0; i < N; i++)
        tu_free(a, ba[i].p);
    tu_free(a, bb[3].p), tu_free(a, bd[4].p); /* the others have cached memory too */
    cca_domain_stats sA = dst(a, A), sB = dst(a, B), sD = dst(a, NULL);
    cr_assert_eq(sA.allocated_bytes, 0);
    cr_assert_eq(sA.active_blocks, 0, "the pending free was completed or counted: %zu", sA.active_blocks);
    cr_assert_gt(sA.reserved_bytes, 0);
    cca_upstream_stats us = tu_upstream_stats(u);
    cca_domain_report r;
    memset(&r, 0xab, sizeof r);
    r.leaks = NULL, r.leaks_cap = 0;
    cca_status st = cca_domain_release(a, A, 0, &r);
    cr_assert_eq(st, CCA_OK, "%s", cca_last_error());
    cr_assert_eq(r.bytes_released, sA.reserved_bytes, "report: released %zu of %zu", r.bytes_released,
                 sA.reserved_bytes);
    cr_assert_eq(r.segments_released, sA.segments);
    cr_assert_eq(r.bytes_still_reserved, 0);
    cr_assert_eq(r.live_blocks, 0);
    cr_assert_eq(r.live_bytes, 0);
    cr_assert_eq(r.leaks_written, 0);
    cca_upstream_stats us2 = tu_upstream_stats(u);
    cr_assert_eq(us2.bytes_in_use, us.bytes_in_use - sA.reserved_bytes,
                 "the device's own count fell by %zu, A held %zu", us.bytes_in_use - us2.bytes_in_use,
                 sA.reserved_bytes);
    cr_assert_eq(tu_stats(a).reserved_bytes, sB.reserved_bytes + sD.reserved_bytes);
    agree(a, u, doms, 2, "A released");
    /* A: empty, peaks and counters kept; upstream frees counted */
    cca_domain_stats nA = dst(a, A);
    cr_assert_eq(nA.reserved_bytes + nA.segments + nA.allocated_bytes + nA.active_blocks + nA.cached_bytes +
                     nA.largest_free_block + nA.requested_bytes,
                 0, "A is empty");
    cr_assert_eq(nA.fragmentation, 0.0);
    cr_assert_eq(nA.allocated_bytes_peak, sA.allocated_bytes_peak, "peaks survive a release");
    cr_assert_eq(nA.requested_bytes_peak, sA.requested_bytes_peak);
    cr_assert_eq(nA.reserved_bytes_peak, sA.reserved_bytes_peak);
    cr_assert_eq(nA.active_blocks_peak, sA.active_blocks_peak);
    cr_assert_eq(nA.alloc_calls, sA.alloc_calls);
    cr_assert_eq(nA.upstream_allocs, sA.upstream_allocs);
    cr_assert_geq(nA.upstream_frees, sA.upstream_frees + sA.segments);
    /* the others are untouched, their data intact; A's memory is gone */
    dstats_unchanged(a, B, &sB, "B after A's release");
    dstats_unchanged(a, NULL, &sD, "default after A's release");
    for (int i = 0; i < N; i++) {
        if (i != 3)
            ASSERT_INTACT(bb[i], true, "B after A's release");
        if (i != 4)
            ASSERT_INTACT(bd[i], true, "default after A's release");
        TU_ASSERT_FAULTS(ba[i].p);
    }
    /* A serves again, in new memory of its own */
    blk again = mk(a, A, 5 * MiB, S0, 7, true);
    ASSERT_INTACT(again, true, "A again");
    tu_free(a, again.p);
    agree(a, u, doms, 2, "A again");
    cr_assert_eq(cca_domain_release(a, A, 0, NULL), CCA_OK, "report may be NULL");
    cr_assert_eq(dst(a, A).reserved_bytes, 0);
    /* the default domain (NULL) is released the same way: refused while it
     * has live blocks, whole once they are free */
    sD = dst(a, NULL);
    cca_stats before = tu_stats(a);
    cr_assert_eq(cca_domain_release(a, NULL, 0, &r), CCA_ERR_LIVE_BLOCKS);
    cr_assert_eq(r.live_blocks, N - 1);
    tu_assert_intact(a, &before, "refused release of the default domain");
    for (int i = 0; i < N; i++)
        if (i != 4)
            tu_free(a, bd[i].p);
    sD = dst(a, NULL);
    us = tu_upstream_stats(u);
    cr_assert_eq(cca_domain_release(a, NULL, 0, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(r.bytes_released, sD.reserved_bytes);
    cr_assert_eq(tu_upstream_stats(u).bytes_in_use, us.bytes_in_use - sD.reserved_bytes);
    cr_assert_eq(dst(a, NULL).reserved_bytes, 0);
    cr_assert_eq(tu_stats(a).reserved_bytes, sB.reserved_bytes);
    dstats_unchanged(a, B, &sB, "B after the default's release");
    agree(a, u, doms, 2, "default released");
    for (int i = 0; i < N; i++)
        if (i != 3) {
            ASSERT_INTACT(bb[i], true, "B at the end");
            tu_free(a, bb[i].p);
        }
    cr_assert_eq(cca_domain_release(a, B, 0, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(r.bytes_released, sB.reserved_bytes);
    agree(a, u, doms, 2, "all released");
    cr_assert_eq(tu_stats(a).reserved_bytes, 0);
    cr_assert_eq(tu_upstream_stats(u).bytes_in_use, 0);
    cr_assert_eq(tu_upstream_stats(u).vm_reserved_bytes, 0);
    finish(a, u);
}

/* ---- live blocks: refused, listed ------------------------------------------------ */

/* Domain A's five live blocks (three small ones sharing a segment on S0, a
 * medium one on S1, a large one on S0) and one free cached segment, with B's
 * allocations in between (they count in the ages). */
typedef struct leak_setup {
    blk L[5], other[3];
} leak_setup;

static void make_leaks(cca_allocator *a, cca_domain *A, cca_domain *B, leak_setup *x) {
    x->L[0] = mk(a, A, 1000, S0, 1, true);
    x->other[0] = mk(a, B, 5000, S0, 11, true);
    x->L[1] = mk(a, A, 4097, S0, 2, true);
    x->L[2] = mk(a, A, 70000, S0, 3, true);
    x->L[3] = mk(a, A, 3 * MiB + 5, S1, 4, true);
    x->other[1] = mk(a, B, 2 * MiB, S1, 12, true);
    x->L[4] = mk(a, A, 12 * MiB, S0, 5, true);
    void *c = in(a, A, 14 * MiB, S1);
    tu_free(a, c);
    x->other[2] = mk(a, NULL, 100, S0, 13, true);
}

/* The written entries are distinct blocks of x->L with exact fields; the
 * three small ones (one segment) appear in address order. */
static void check_leaks(cca_allocator *a, const leak_setup *x, const cca_live_block *leaks, size_t n, int pending_of,
                        const char *what) {
    uint64_t now = tu_stats(a).alloc_calls;
    int seen[5] = {0};
    int pos[5] = {-1, -1, -1, -1, -1};
    for (size_t i = 0; i < n; i++) {
        int k = -1;
        for (int j = 0; j < 5; j++)
            if (leaks[i].ptr == x->L[j].p)
                k = j;
        cr_assert_geq(k, 0, "%s: leak %zu (%p) is not one of the domain's live blocks", what, i, leaks[i].ptr);
        cr_assert_eq(seen[k]++, 0, "%s: block %p listed twice", what, leaks[i].ptr);
        pos[k] = (int)i;
        const blk *b = &x->L[k];
        cr_assert_eq(leaks[i].size, b->held, "%s: %p size %zu, held %zu", what, b->p, leaks[i].size, b->held);
        cr_assert_eq(leaks[i].requested, b->size, "%s: %p requested %zu, asked %zu", what, b->p, leaks[i].requested,
                     b->size);
        cr_assert_eq(leaks[i].stream, b->s, "%s: %p stream", what, b->p);
        cr_assert_eq(leaks[i].age, now - b->stamp, "%s: %p age %llu, %llu allocations were made after it", what, b->p,
                     (unsigned long long)leaks[i].age, (unsigned long long)(now - b->stamp));
        cr_assert_eq(leaks[i].pending, k == pending_of ? 1 : 0, "%s: %p pending %d", what, b->p, leaks[i].pending);
    }
    for (int j = 0; j < 3; j++)
        for (int k = j + 1; k < 3; k++)
            if (pos[j] >= 0 && pos[k] >= 0)
                cr_assert_eq(pos[j] < pos[k], (uintptr_t)x->L[j].p < (uintptr_t)x->L[k].p,
                             "%s: blocks of one segment not in address order", what);
}

static size_t live_bytes_of(const leak_setup *x) {
    size_t sum = 0;
    for (int j = 0; j < 5; j++)
        sum += x->L[j].held;
    return sum;
}

static bool untouched(const cca_live_block *l) {
    const unsigned char *c = (const unsigned char *)l;
    for (size_t i = 0; i < sizeof *l; i++)
        if (c[i] != CANARY)
            return false;
    return true;
}

TEST_BOTH(release_with_live_blocks_releases_nothing_and_lists_them) {
    cca_upstream *u = device(256 * MiB);
    cca_allocator *a = make(m, u, NULL);
    cca_domain *A = dom(a, "A"), *B = dom(a, "B");
    cca_domain *doms[] = {A, B};
    leak_setup x;
    make_leaks(a, A, B, &x);
    agree(a, u, doms, 2, "setup");
    cca_stats before = tu_stats(a);
    cca_domain_stats sA = dst(a, A), sB = dst(a, B);
    cca_upstream_stats us = tu_upstream_stats(u);
    cr_assert_eq(sA.active_blocks, 5);
    cr_assert_gt(sA.cached_bytes, 14 * MiB - 1, "A has a free cached segment too");

    cca_live_block leaks[8];
    memset(leaks, CANARY, sizeof leaks);
    cca_domain_report r;
    memset(&r, 0xcd, sizeof r); /* only leaks and leaks_cap are read on entry */
    r.leaks = leaks, r.leaks_cap = 8;
    cca_clear_error();
    cca_status st = cca_domain_release(a, A, 0, &r);
    cr_assert_eq(st, CCA_ERR_LIVE_BLOCKS, "%s", cca_status_string(st));
    cr_assert_neq(cca_last_error()[0], '\0');
    /* nothing released: not even the free segment */
    tu_assert_intact(a, &before, "refused release");
    dstats_unchanged(a, A, &sA, "refused release");
    dstats_unchanged(a, B, &sB, "refused release");
    cca_upstream_stats us2 = tu_upstream_stats(u);
    cr_assert_eq(us2.bytes_in_use, us.bytes_in_use);
    cr_assert_eq(us2.free_calls, us.free_calls);
    cr_assert_eq(us2.vm_unmap_calls, us.vm_unmap_calls);
    cr_assert_eq(us2.vm_reserved_bytes, us.vm_reserved_bytes);
    cr_assert_eq(r.bytes_released, 0);
    cr_assert_eq(r.segments_released, 0);
    cr_assert_eq(r.bytes_still_reserved, sA.reserved_bytes);
    cr_assert_eq(r.live_blocks, 5);
    cr_assert_eq(r.live_bytes, live_bytes_of(&x));
    cr_assert_eq(r.live_bytes, sA.allocated_bytes);
    cr_assert_eq(r.leaks_written, 5);
    check_leaks(a, &x, leaks, 5, -1, "cap 8");
    for (int i = 5; i < 8; i++)
        cr_assert(untouched(&leaks[i]), "leaks[%d] written past leaks_written", i);
    for (int j = 0; j < 5; j++)
        ASSERT_INTACT(x.L[j], true, "after the refused release");

    /* a cap below the count: every block counted, cap written */
    memset(leaks, CANARY, sizeof leaks);
    memset(&r, 0xcd, sizeof r);
    r.leaks = leaks, r.leaks_cap = 2;
    cr_assert_eq(cca_domain_release(a, A, 0, &r), CCA_ERR_LIVE_BLOCKS);
    cr_assert_eq(r.live_blocks, 5, "live_blocks counts all, even beyond leaks_cap");
    cr_assert_eq(r.live_bytes, live_bytes_of(&x));
    cr_assert_eq(r.leaks_written, 2);
    check_leaks(a, &x, leaks, 2, -1, "cap 2");
    cr_assert(untouched(&leaks[2]), "written past leaks_cap");
    /* cap 0 with an array, and no array */
    memset(leaks, CANARY, sizeof leaks);
    memset(&r, 0xcd, sizeof r);
    r.leaks = leaks, r.leaks_cap = 0;
    cr_assert_eq(cca_domain_release(a, A, 0, &r), CCA_ERR_LIVE_BLOCKS);
    cr_assert_eq(r.live_blocks, 5);
    cr_assert_eq(r.leaks_written, 0);
    cr_assert(untouched(&leaks[0]));
    memset(&r, 0xcd, sizeof r);
    r.leaks = NULL, r.leaks_cap = 0;
    cr_assert_eq(cca_domain_release(a, A, 0, &r), CCA_ERR_LIVE_BLOCKS);
    cr_assert_eq(r.live_blocks, 5);
    cr_assert_eq(r.live_bytes, live_bytes_of(&x));
    cr_assert_eq(r.leaks_written, 0);
    cr_assert_eq(r.bytes_still_reserved, sA.reserved_bytes);
    cr_assert_eq(cca_domain_release(a, A, 0, NULL), CCA_ERR_LIVE_BLOCKS, "report NULL");
    tu_assert_intact(a, &before, "four more refused releases");
    dstats_unchanged(a, A, &sA, "four more refused releases");

    /* destroy refuses the same way, and the domain stays usable */
    memset(&r, 0xcd, sizeof r);
    r.leaks = leaks, r.leaks_cap = 8;
    cr_assert_eq(cca_domain_destroy(a, A, 0, &r), CCA_ERR_LIVE_BLOCKS);
    cr_assert_eq(r.live_blocks, 5);
    cr_assert_eq(r.leaks_written, 5);
    check_leaks(a, &x, leaks, 5, -1, "destroy");
    tu_assert_intact(a, &before, "refused destroy");
    void *more = in(a, A, 8192, S0);
    tu_free(a, more);
    agree(a, u, doms, 2, "A after the refused destroy");

    /* the default domain's leaks are reported the same way */
    memset(&r, 0xcd, sizeof r);
    r.leaks = leaks, r.leaks_cap = 8;
    cr_assert_eq(cca_domain_release(a, NULL, 0, &r), CCA_ERR_LIVE_BLOCKS);
    cr_assert_eq(r.live_blocks, 1);
    cr_assert_eq(r.leaks_written, 1);
    cr_assert_eq(leaks[0].ptr, x.other[2].p);
    cr_assert_eq(leaks[0].requested, 100);

    for (int j = 0; j < 5; j++)
        tu_free(a, x.L[j].p);
    sA = dst(a, A);
    cr_assert_eq(cca_domain_release(a, A, 0, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(r.live_blocks, 0);
    cr_assert_eq(r.leaks_written, 0);
    cr_assert_eq(r.bytes_released, sA.reserved_bytes);
    agree(a, u, doms, 2, "A freed and released");
    for (int i = 0; i < 3; i++) {
        ASSERT_INTACT(x.other[i], true, "others");
        tu_free(a, x.other[i].p);
    }
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    finish(a, u);
}

/* The default domain of an allocator where no domain was ever created, and
 * blocks made before the first domain: their leak reports and ages are as
 * exact as any other's ("age: allocations (in this allocator) since it was
 * made"). */
TEST_BOTH(default_domain_leaks_and_ages_without_any_domain) {
    cca_upstream *u = device(128 * MiB);
    cca_allocator *a = make(m, u, NULL);
    blk b[4];
    b[0] = mk(a, NULL, 1000, S0, 1, true);
    b[1] = mk(a, NULL, 3 * MiB, S1, 2, true);
    void *gone = tu_alloc(a, 64 * KiB, S0);
    tu_free(a, gone);
    b[2] = mk(a, NULL, 5000, S0, 3, true);
    cca_live_block leaks[4];
    cca_domain_report r;
    memset(&r, 0xcd, sizeof r);
    r.leaks = leaks, r.leaks_cap = 4;
    cca_stats before = tu_stats(a);
    cca_domain_stats sD = dst(a, NULL);
    cr_assert_eq(sD.allocated_bytes, before.allocated_bytes);
    cr_assert_eq(sD.reserved_bytes, before.reserved_bytes);
    cr_assert_eq(sD.alloc_calls, before.alloc_calls);
    cr_assert_eq(cca_domain_release(a, NULL, 0, &r), CCA_ERR_LIVE_BLOCKS);
    tu_assert_intact(a, &before, "refused, no domain ever created");
    cr_assert_eq(r.live_blocks, 3);
    cr_assert_eq(r.leaks_written, 3);
    cr_assert_eq(r.bytes_still_reserved, before.reserved_bytes);
    uint64_t now = before.alloc_calls;
    for (size_t i = 0; i < 3; i++) {
        int k = leaks[i].ptr == b[0].p ? 0 : leaks[i].ptr == b[1].p ? 1 : leaks[i].ptr == b[2].p ? 2 : -1;
        cr_assert_geq(k, 0, "leak %zu: %p", i, leaks[i].ptr);
        cr_assert_eq(leaks[i].requested, b[k].size);
        cr_assert_eq(leaks[i].size, b[k].held);
        cr_assert_eq(leaks[i].stream, b[k].s);
        cr_assert_eq(leaks[i].age, now - b[k].stamp, "no domain yet: block %d age %llu, expected %llu", k,
                     (unsigned long long)leaks[i].age, (unsigned long long)(now - b[k].stamp));
    }
    for (int k = 0; k < 3; k++)
        tu_free(a, b[k].p);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    finish(a, u);
}

TEST_BOTH(ages_of_blocks_made_before_the_first_domain) {
    cca_upstream *u = device(128 * MiB);
    cca_allocator *a = make(m, u, NULL);
    blk b[4];
    b[0] = mk(a, NULL, 1000, S0, 1, true);
    b[1] = mk(a, NULL, 3 * MiB, S1, 2, true);
    void *gone = tu_alloc(a, 64 * KiB, S0);
    tu_free(a, gone);
    b[2] = mk(a, NULL, 5000, S0, 3, true);
    cca_live_block leaks[4];
    cca_domain_report r;
    uint64_t now;
    /* a domain appears; the old blocks keep their true ages */
    cca_domain *A = dom(a, "A");
    cca_domain *doms[] = {A};
    b[3] = mk(a, A, 2048, S0, 4, true);
    agree(a, u, doms, 1, "after the first domain");
    memset(&r, 0xcd, sizeof r);
    r.leaks = leaks, r.leaks_cap = 4;
    cr_assert_eq(cca_domain_release(a, NULL, 0, &r), CCA_ERR_LIVE_BLOCKS);
    cr_assert_eq(r.live_blocks, 3);
    now = tu_stats(a).alloc_calls;
    for (size_t i = 0; i < 3; i++) {
        int k = leaks[i].ptr == b[0].p ? 0 : leaks[i].ptr == b[1].p ? 1 : leaks[i].ptr == b[2].p ? 2 : -1;
        cr_assert_geq(k, 0);
        cr_assert_eq(leaks[i].age, now - b[k].stamp, "made before the first domain: block %d age %llu, expected %llu",
                     k, (unsigned long long)leaks[i].age, (unsigned long long)(now - b[k].stamp));
    }
    for (int k = 0; k < 4; k++) {
        ASSERT_INTACT(b[k], true, "end");
        tu_free(a, b[k].p);
    }
    cca_domain_stats sD = dst(a, NULL);
    cr_assert_eq(cca_domain_release(a, NULL, 0, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(r.bytes_released, sD.reserved_bytes);
    cr_assert_eq(dst(a, NULL).reserved_bytes, 0);
    agree(a, u, doms, 1, "end");
    finish(a, u);
}

/* The same without ever creating a domain: release(NULL) of a free cache. */
TEST_BOTH(default_domain_release_without_any_domain) {
    cca_upstream *u = device(128 * MiB);
    cca_allocator *a = make(m, u, NULL);
    void *p = tu_alloc(a, 3 * MiB, S0), *q = tu_alloc(a, 100, S1), *big = tu_alloc(a, 12 * MiB, S0);
    tu_free(a, p), tu_free(a, q), tu_free(a, big);
    cca_stats before = tu_stats(a);
    cca_domain_stats sD = dst(a, NULL);
    cr_assert_eq(sD.reserved_bytes, before.reserved_bytes);
    cr_assert_eq(sD.segments, before.segments);
    cr_assert_eq(sD.upstream_allocs, before.upstream_allocs);
    cca_upstream_stats us = tu_upstream_stats(u);
    cca_domain_report r;
    memset(&r, 0xcd, sizeof r);
    r.leaks = NULL, r.leaks_cap = 0;
    cr_assert_eq(cca_domain_release(a, NULL, 0, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(r.bytes_released, before.reserved_bytes);
    cr_assert_eq(r.segments_released, before.segments);
    cr_assert_eq(r.bytes_still_reserved, 0);
    cr_assert_eq(tu_upstream_stats(u).bytes_in_use, us.bytes_in_use - before.reserved_bytes);
    agree(a, u, NULL, 0, "released");
    sD = dst(a, NULL);
    cr_assert_eq(sD.reserved_bytes_peak, before.reserved_bytes_peak);
    cr_assert_eq(sD.upstream_frees, tu_stats(a).upstream_frees);
    finish(a, u);
}

/* cca_destroy with live blocks in domains: CCA_ERR_LIVE_BLOCKS, everything
 * released, every handle freed (ASan). */
TEST_BOTH(allocator_destroy_with_live_domain_blocks_releases_everything) {
    cca_upstream *u = device(128 * MiB);
    cca_allocator *a = make(m, u, NULL);
    cca_domain *A = dom(a, "A"), *B = dom(a, "B");
    in(a, A, 4096, S0);
    in(a, A, 3 * MiB, S1);
    void *q = in(a, B, 12 * MiB, S0);
    tu_free(a, q);
    cr_assert_eq(cca_domain_reserve(a, B, 2 * MiB), CCA_OK);
    in(a, B, 1000, S1);
    cr_assert_eq(cca_destroy(a), CCA_ERR_LIVE_BLOCKS);
    cca_upstream_stats us = tu_upstream_stats(u);
    cr_assert_eq(us.bytes_in_use, 0, "the device still holds %zu bytes", us.bytes_in_use);
    cr_assert_eq(us.vm_reserved_bytes, 0);
    cca_upstream_destroy(u);
}

/* ---- force ----------------------------------------------------------------------- */

TEST_BOTH(forced_release_takes_live_blocks_and_invalidates_their_pointers) {
    cca_upstream *u = device(256 * MiB);
    cca_allocator *a = make(m, u, NULL);
    cca_domain *A = dom(a, "A"), *B = dom(a, "B");
    cca_domain *doms[] = {A, B};
    leak_setup x;
    make_leaks(a, A, B, &x);
    agree(a, u, doms, 2, "setup");
    cca_stats before = tu_stats(a);
    cca_domain_stats sA = dst(a, A), sB = dst(a, B), sD = dst(a, NULL);
    cca_upstream_stats us = tu_upstream_stats(u);
    cca_live_block leaks[8];
    memset(leaks, CANARY, sizeof leaks);
    cca_domain_report r;
    memset(&r, 0xcd, sizeof r);
    r.leaks = leaks, r.leaks_cap = 8;
    cca_status st = cca_domain_release(a, A, CCA_DOMAIN_FORCE, &r);
    cr_assert_eq(st, CCA_OK, "a forced release that released everything: %s / %s", cca_status_string(st),
                 cca_last_error());
    cr_assert_eq(r.live_blocks, 5, "the live blocks found are reported");
    cr_assert_eq(r.live_bytes, live_bytes_of(&x));
    cr_assert_eq(r.leaks_written, 5);
    check_leaks(a, &x, leaks, 5, -1, "forced");
    cr_assert_eq(r.bytes_released, sA.reserved_bytes);
    cr_assert_eq(r.segments_released, sA.segments);
    cr_assert_eq(r.bytes_still_reserved, 0);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.allocated_bytes, before.allocated_bytes - sA.allocated_bytes);
    cr_assert_eq(s.requested_bytes, before.requested_bytes - sA.requested_bytes);
    cr_assert_eq(s.active_blocks, before.active_blocks - 5);
    cr_assert_eq(s.reserved_bytes, before.reserved_bytes - sA.reserved_bytes);
    cr_assert_eq(s.reserved_bytes, sB.reserved_bytes + sD.reserved_bytes);
    cr_assert_eq(s.segments, before.segments - sA.segments);
    cr_assert_eq(s.alloc_calls, before.alloc_calls);
    cr_assert_eq(s.pending_blocks, 0);
    cr_assert_eq(s.allocated_bytes_peak, before.allocated_bytes_peak);
    cr_assert_eq(tu_upstream_stats(u).bytes_in_use, us.bytes_in_use - sA.reserved_bytes);
    agree(a, u, doms, 2, "forced release");
    cca_domain_stats nA = dst(a, A);
    cr_assert_eq(nA.allocated_bytes + nA.requested_bytes + nA.active_blocks + nA.reserved_bytes + nA.segments, 0);
    cr_assert_eq(nA.allocated_bytes_peak, sA.allocated_bytes_peak);
    cr_assert_eq(nA.active_blocks_peak, sA.active_blocks_peak);
    dstats_unchanged(a, B, &sB, "B after A's forced release");
    dstats_unchanged(a, NULL, &sD, "default after A's forced release");
    /* the released pointers are invalid everywhere, and refusing them changes nothing */
    before = tu_stats(a);
    for (int j = 0; j < 5; j++) {
        st = cca_free(a, x.L[j].p);
        cr_assert_eq(st, CCA_ERR_INVALID_POINTER, "cca_free of released %p: %s", x.L[j].p, cca_status_string(st));
        cca_domain *d = NULL;
        cr_assert_eq(cca_domain_of(a, x.L[j].p, &d), CCA_ERR_INVALID_POINTER);
        size_t size = 0;
        cr_assert_eq(cca_block_size(a, x.L[j].p, &size), CCA_ERR_INVALID_POINTER);
        cr_assert_eq(cca_record_stream(a, x.L[j].p, S1), CCA_ERR_INVALID_POINTER);
        TU_ASSERT_FAULTS(x.L[j].p);
    }
    tu_assert_intact(a, &before, "frees of released pointers");
    for (int i = 0; i < 3; i++)
        ASSERT_INTACT(x.other[i], true, "others after the forced release");
    /* A serves again */
    blk again = mk(a, A, 3 * MiB, S0, 9, true);
    ASSERT_INTACT(again, true, "A again");
    agree(a, u, doms, 2, "A again");
    /* forced release of the default domain (NULL) */
    sD = dst(a, NULL);
    cr_assert_eq(cca_domain_release(a, NULL, CCA_DOMAIN_FORCE, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(r.live_blocks, 1);
    cr_assert_eq(r.bytes_released, sD.reserved_bytes);
    cr_assert_eq(cca_free(a, x.other[2].p), CCA_ERR_INVALID_POINTER);
    agree(a, u, doms, 2, "default forced");
    ASSERT_INTACT(again, true, "A after the default's release");
    ASSERT_INTACT(x.other[0], true, "B after the default's release");
    tu_free(a, again.p);
    tu_free(a, x.other[0].p), tu_free(a, x.other[1].p);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    agree(a, u, doms, 2, "end");
    finish(a, u);
}

/* ---- destroy ---------------------------------------------------------------------- */

/* Many domains: the handle set (grown from 16 slots to 1024, entries
 * shifted back on every erase), each domain's segment list and the list of
 * domains that hold memory stay exact while domains are destroyed in random
 * order, released, and made again (malloc may hand a new domain a destroyed
 * one's address: such a handle is valid again, and is skipped below). A
 * destroyed handle is refused by every call that takes one; the allocator's
 * cached bytes and largest free block are the sums and maximum over the
 * domains; the invariants hold (I8 checks the lists and the set). */
static bool handle_live(cca_domain *const *live, int n, const cca_domain *d) {
    for (int i = 0; i < n; i++)
        if (live[i] == d)
            return true;
    return false;
}

static void sums_agree(cca_allocator *a, cca_domain *const *live, int n, const char *what) {
    cca_stats t = tu_stats(a);
    cca_domain_stats r = dst(a, NULL);
    size_t cached = r.cached_bytes, largest = r.largest_free_block;
    for (int i = 0; i < n; i++) {
        cca_domain_stats s = dst(a, live[i]);
        cached += s.cached_bytes;
        largest = s.largest_free_block > largest ? s.largest_free_block : largest;
    }
    cr_assert_eq(t.cached_bytes, cached, "%s: cached %zu, the domains' sum %zu", what, t.cached_bytes, cached);
    cr_assert_eq(t.largest_free_block, largest, "%s: largest free %zu, the domains' %zu", what,
                 t.largest_free_block, largest);
    tu_check(a);
}

TEST_BOTH(many_domains_keep_handles_lists_and_sums_exact) {
    enum { N = 300 }; /* under CCA_DEBUG=2 every call checks every domain: N^2 */
    cca_upstream *u = device(2 * GiB);
    cca_allocator *a = make(m, u, "small_max:64K,small_segment:64K");
    cca_domain *live[N], *gone[N];
    void *blk[N];
    int n = 0, ngone = 0;
    uint64_t rng = 0x5eed0dd;
    char name[32];
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "d%d", i);
        live[n] = dom(a, name);
        blk[n++] = in(a, live[i], 512 + (i % 7) * 4096, i % 3 ? S0 : S1);
    }
    sums_agree(a, live, n, "all made");
    for (int step = 0; n > N / 4; step++) {
        int k = (int)(tu_rand(&rng) % (uint64_t)n);
        cca_domain *d = live[k];
        cca_domain_report r = {0}; /* on entry leaks and leaks_cap are read: none here */
        if (step % 3 == 0) { /* released first, then destroyed */
            tu_free(a, blk[k]);
            cr_assert_eq(cca_domain_release(a, d, 0, &r), CCA_OK, "%s", cca_last_error());
            cr_assert_eq(dst(a, d).reserved_bytes, 0);
            cr_assert_eq(cca_domain_destroy(a, d, 0, &r), CCA_OK, "%s", cca_last_error());
        } else { /* destroyed with its block live, by force */
            cr_assert_eq(cca_domain_destroy(a, d, 0, &r), CCA_ERR_LIVE_BLOCKS);
            cr_assert_eq(cca_domain_destroy(a, d, CCA_DOMAIN_FORCE, &r), CCA_OK, "%s", cca_last_error());
            cr_assert_eq(r.live_blocks, 1);
        }
        gone[ngone++] = d;
        live[k] = live[n - 1], blk[k] = blk[n - 1], n--;
        if (step % 60 == 0) {
            for (int g = 0; g < ngone; g++) {
                if (handle_live(live, n, gone[g]))
                    continue;
                cca_domain_stats s;
                void *p = NULL;
                cr_assert_eq(cca_get_domain_stats(a, gone[g], &s), CCA_ERR_INVALID_ARGUMENT, "destroyed handle %d", g);
                cr_assert_eq(cca_alloc_in(a, gone[g], 512, S0, &p), CCA_ERR_INVALID_ARGUMENT);
                cr_assert_null(p);
                cr_assert_eq(cca_domain_release(a, gone[g], 0, NULL), CCA_ERR_INVALID_ARGUMENT);
                cr_assert_eq(cca_domain_destroy(a, gone[g], 0, NULL), CCA_ERR_INVALID_ARGUMENT);
                cr_assert_eq(cca_domain_reserve(a, gone[g], 4096), CCA_ERR_INVALID_ARGUMENT);
            }
            for (int i = 0; i < n; i++) /* every survivor's handle still works */
                cr_assert_eq(owner(a, blk[i]), live[i]);
            snprintf(name, sizeof name, "after %d destroys", ngone);
            sums_agree(a, live, n, name);
        }
        if (step % 4 == 0) { /* a new domain now and then, holding memory */
            snprintf(name, sizeof name, "new%d", step);
            live[n] = dom(a, name);
            blk[n] = in(a, live[n], 4096, S0);
            n++;
        }
    }
    /* domains that hold nothing stay valid and count nothing */
    for (int i = 0; i < n; i++) {
        tu_free(a, blk[i]);
        cr_assert_eq(cca_domain_release(a, live[i], 0, NULL), CCA_OK, "%s", cca_last_error());
    }
    sums_agree(a, live, n, "all released");
    cca_stats t = tu_stats(a);
    cr_assert_eq(t.reserved_bytes, 0);
    cr_assert_eq(t.segments, 0);
    for (int i = 0; i < n; i++)
        blk[i] = in(a, live[i], 512, S0); /* and serve again */
    sums_agree(a, live, n, "serving again");
    for (int i = 0; i < n; i++)
        tu_free(a, blk[i]);
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error()); /* frees the domains left */
    cca_upstream_destroy(u);
}

TEST_BOTH(destroy_frees_the_domain_and_its_memory) {
    cca_upstream *u = device(128 * MiB);
    cca_allocator *a = make(m, u, NULL);
    cca_domain_report r;
    memset(&r, 0xcd, sizeof r); /* on entry only leaks and leaks_cap are read: the rest must be written */
    r.leaks = NULL, r.leaks_cap = 0;
    cr_assert_eq(cca_domain_destroy(a, NULL, 0, &r), CCA_ERR_INVALID_ARGUMENT, "the default domain");
    cr_assert_eq(cca_domain_destroy(a, NULL, CCA_DOMAIN_FORCE, NULL), CCA_ERR_INVALID_ARGUMENT);
    cca_domain *E = dom(a, "empty");
    cr_assert_eq(cca_domain_destroy(NULL, E, 0, NULL), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_domain_release(NULL, E, 0, NULL), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_domain_destroy(a, E, 0, &r), CCA_OK, "a domain that never held memory: %s", cca_last_error());
    cr_assert_eq(r.bytes_released, 0);

    cca_domain *C = dom(a, "cached");
    void *p = in(a, C, 5 * MiB, S0);
    void *q = in(a, C, 512, S1);
    tu_free(a, p), tu_free(a, q);
    cca_domain_stats sC = dst(a, C);
    cca_upstream_stats us = tu_upstream_stats(u);
    retired ret = {.alloc_calls = sC.alloc_calls, .upstream_allocs = sC.upstream_allocs};
    uint64_t frees_before = tu_stats(a).upstream_frees;
    cr_assert_eq(cca_domain_destroy(a, C, 0, &r), CCA_OK, "%s", cca_last_error());
    ret.upstream_frees = sC.upstream_frees + (tu_stats(a).upstream_frees - frees_before);
    cr_assert_eq(r.bytes_released, sC.reserved_bytes);
    cr_assert_eq(r.segments_released, sC.segments);
    cr_assert_eq(r.bytes_still_reserved, 0);
    cr_assert_eq(tu_upstream_stats(u).bytes_in_use, us.bytes_in_use - sC.reserved_bytes);
    agree_r(a, u, NULL, 0, &ret, "cached domain destroyed");

    cca_domain *L = dom(a, "live"), *K = dom(a, "kept");
    cca_domain *doms[] = {L, K};
    void *l1 = in(a, L, 4096, S0);
    memset(&r, 0xcd, sizeof r);
    r.leaks = NULL, r.leaks_cap = 0;
    cr_assert_eq(cca_domain_destroy(a, L, 0, &r), CCA_ERR_LIVE_BLOCKS);
    cr_assert_eq(r.live_blocks, 1);
    cr_assert_eq(r.bytes_released, 0);
    /* still a domain: stats, allocation, JSON */
    cr_assert_eq(dst(a, L).active_blocks, 1);
    void *l2 = in(a, L, 8 * KiB, S1);
    void *k1 = in(a, K, 2 * MiB, S0);
    tu_free(a, k1); /* K keeps cached memory, left to cca_destroy */
    cJSON *json = domains_json(a);
    cr_assert_eq(cJSON_GetArraySize(json), 3);
    cJSON_Delete(json);
    agree_r(a, u, doms, 2, &ret, "live domain kept");
    cca_domain_stats sL = dst(a, L);
    frees_before = tu_stats(a).upstream_frees;
    cr_assert_eq(cca_domain_destroy(a, L, CCA_DOMAIN_FORCE, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(r.live_blocks, 2);
    cr_assert_eq(r.bytes_released, sL.reserved_bytes);
    ret.alloc_calls += sL.alloc_calls, ret.upstream_allocs += sL.upstream_allocs;
    ret.upstream_frees += sL.upstream_frees + (tu_stats(a).upstream_frees - frees_before);
    cr_assert_eq(cca_free(a, l1), CCA_ERR_INVALID_POINTER);
    cr_assert_eq(cca_free(a, l2), CCA_ERR_INVALID_POINTER);
    agree_r(a, u, &K, 1, &ret, "live domain destroyed by force");
    json = domains_json(a);
    cr_assert_eq(cJSON_GetArraySize(json), 2, "default and kept");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(json, 1), "name");
    cr_assert(cJSON_IsString(name) && strcmp(name->valuestring, "kept") == 0);
    cJSON_Delete(json);
    cr_assert_eq(tu_stats(a).reserved_bytes, dst(a, K).reserved_bytes + dst(a, NULL).reserved_bytes);
    cr_assert_gt(dst(a, K).reserved_bytes, 0);
    /* K (with cached memory) and an empty domain are left to cca_destroy:
     * ASan's leak check sees their handles freed */
    dom(a, "never used");
    finish(a, u);
}
