/*
 * test_domain.c — allocator/src/domain.c: memory domains, held to the
 * contract in ccalloc.h ("Memory domains"). Most tests run twice
 * (TEST_BOTH): with classic segments, and with expandable segments
 * (expandable:1 over the simulated device's vm ops, 64 KiB pages).
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
 *   stats       a seeded random sequence over the default domain and three
 *               others (an arena in one; releases, forced releases, domains
 *               destroyed and created again, trims, peak resets): every
 *               domain's counters and peaks equal a model, and the sums
 *               over domains the allocator's totals, after every step.
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
 *   footprint   cca_domain_reserve: refusals (0, absurd sizes, a second
 *               arena, max_reserved), rounding, the arena first at any size
 *               (even before an exact fit cached in growth), and a second
 *               run of a recorded workload with zero upstream calls.
 *   cache       trim, empty-cache and the OOM retry release every domain's
 *               cached memory; releasing a greedy allocator's default
 *               domain gives its arena back and it still serves.
 *   threads     six threads, five domains (one shared by two threads),
 *               releases, short-lived domains and JSON while the others
 *               run; totals exact afterwards.
 *   json        cca_domain_stats_write_json parses; names and numbers match
 *               cca_get_domain_stats, default first, then creation order.
 *
 * Readings of the contract where it leaves room (noted at each test):
 *   - age = successful allocations in the allocator made after the block
 *     ("allocations since it was made"): 0 for the latest block;
 *   - a forced release that released everything returns CCA_OK (the header
 *     keeps CCA_ERR_LIVE_BLOCKS for blocks that were not released);
 *   - cca_domain_of on a pointer that is not live: CCA_ERR_INVALID_POINTER,
 *     the status the header gives unknown and interior pointers;
 *   - the JSON keys are the cca_domain_stats field names.
 */
#include "alloc_test_util.h"

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PG ((size_t)64 * KiB) /* the simulated device's granularity here */
#define S0 ((cca_stream)0x100)
#define S1 ((cca_stream)0x200)

/* ---- modes: classic or expandable segments ---------------------------------- */

typedef struct mode {
    const char *name;
    bool expandable;
} mode;
static const mode CLASSIC = {"classic", false};
static const mode EXPANDABLE = {"expandable", true};

#define TEST_BOTH(fn)                                                                                                  \
    static void fn(const mode *m);                                                                                     \
    Test(domain, fn##_classic, .timeout = 60) {                                                                        \
        fn(&CLASSIC);                                                                                                  \
    }                                                                                                                  \
    Test(domain, fn##_expandable, .timeout = 60) {                                                                     \
        fn(&EXPANDABLE);                                                                                               \
    }                                                                                                                  \
    static void fn(const mode *m)

static size_t round_up(size_t v, size_t to) {
    return (v + to - 1) / to * to;
}

/* A simulated device of `capacity` bytes with 64 KiB pages. */
static cca_upstream *device(size_t capacity) {
    cca_host_options o = {.capacity = capacity, .vm_granularity = PG};
    cca_upstream *u = NULL;
    cca_status st = cca_upstream_host_create_with(&o, &u);
    cr_assert_eq(st, CCA_OK, "host device of %zu bytes: %s", capacity, cca_last_error());
    return u;
}

static cca_allocator *make(const mode *m, cca_upstream *u, const char *extra) {
    char conf[256];
    snprintf(conf, sizeof conf, "log_oom:0%s%s%s", m->expandable ? ",expandable:1" : "", extra ? "," : "",
             extra ? extra : "");
    return tu_allocator(u, conf);
}

/* ---- domain short-hands -------------------------------------------------------- */

static cca_domain *dom(cca_allocator *a, const char *name) {
    cca_domain *d = NULL;
    cca_status st = cca_domain_create(a, name, &d);
    cr_assert_eq(st, CCA_OK, "cca_domain_create(\"%s\"): %s / %s", name, cca_status_string(st), cca_last_error());
    cr_assert_not_null(d);
    return d;
}

static cca_domain_stats dst(const cca_allocator *a, const cca_domain *d) {
    cca_domain_stats s;
    memset(&s, 0, sizeof s);
    cca_status st = cca_get_domain_stats(a, d, &s);
    cr_assert_eq(st, CCA_OK, "cca_get_domain_stats: %s / %s", cca_status_string(st), cca_last_error());
    return s;
}

static cca_domain *owner(cca_allocator *a, const void *p) {
    cca_domain *d = (cca_domain *)&d;
    cca_status st = cca_domain_of(a, p, &d);
    cr_assert_eq(st, CCA_OK, "cca_domain_of(%p): %s / %s", p, cca_status_string(st), cca_last_error());
    return d;
}

/* cca_alloc_in asserting success, alignment and cca_domain_of. */
static void *in(cca_allocator *a, cca_domain *d, size_t size, cca_stream s) {
    void *p = (void *)1;
    cca_status st = cca_alloc_in(a, d, size, s, &p);
    cr_assert_eq(st, CCA_OK, "cca_alloc_in(%s, %zu): %s / %s", dst(a, d).name, size, cca_status_string(st),
                 cca_last_error());
    cr_assert_not_null(p, "cca_alloc_in(%zu) returned NULL", size);
    cr_assert_eq((uintptr_t)p % CCA_ALIGNMENT, 0, "%p is not %u-aligned", p, CCA_ALIGNMENT);
    cr_assert_eq(owner(a, p), d, "cca_domain_of(%p) names another domain", p);
    return p;
}

#define DFIELD_EQ(f)                                                                                                   \
    cr_assert_eq((uint64_t)e->f, (uint64_t)g->f, "%s: domain '%s' " #f " is %llu, expected %llu", what, e->name,      \
                 (unsigned long long)g->f, (unsigned long long)e->f)

static void dstats_equal(const cca_domain_stats *e, const cca_domain_stats *g, const char *what) {
    cr_assert_str_eq(e->name, g->name, "%s: name", what);
    DFIELD_EQ(allocated_bytes);
    DFIELD_EQ(allocated_bytes_peak);
    DFIELD_EQ(requested_bytes);
    DFIELD_EQ(requested_bytes_peak);
    DFIELD_EQ(reserved_bytes);
    DFIELD_EQ(reserved_bytes_peak);
    DFIELD_EQ(active_blocks);
    DFIELD_EQ(active_blocks_peak);
    DFIELD_EQ(cached_bytes);
    DFIELD_EQ(largest_free_block);
    DFIELD_EQ(segments);
    DFIELD_EQ(alloc_calls);
    DFIELD_EQ(upstream_allocs);
    DFIELD_EQ(upstream_frees);
    cr_assert_eq(e->fragmentation, g->fragmentation, "%s: fragmentation", what);
}

static void dstats_unchanged(const cca_allocator *a, const cca_domain *d, const cca_domain_stats *before,
                             const char *what) {
    cca_domain_stats now = dst(a, d);
    dstats_equal(before, &now, what);
}

/* Counters of domains destroyed so far: the sums over the living domains
 * then fall short of the allocator's totals by exactly these. */
typedef struct retired {
    uint64_t alloc_calls, upstream_allocs, upstream_frees;
    bool unknown; /* destroyed by other threads: counter sums not checked */
} retired;

/* The accounts agree: invariants; every domain's cached = reserved -
 * allocated, its fragmentation from its largest free block, peaks >= now
 * (classic: upstream allocs - frees = segments); the sums over the default
 * domain and doms[0..n) equal the allocator's totals (counters: plus the
 * retired ones), the largest free block is the largest domain's; and the
 * allocator's reserved bytes and address space are the device's own count
 * (dev: the simulated device, NULL to skip). */
static void agree_r(const cca_allocator *a, cca_upstream *dev, cca_domain *const *doms, int n, const retired *ret,
                    const char *what) {
    cca_status st = cca_check_invariants(a);
    cr_assert_eq(st, CCA_OK, "%s: invariants: %s", what, cca_last_error());
    cca_stats s = tu_stats(a);
    size_t alloc = 0, req = 0, res = 0, act = 0, segs = 0, cached = 0, lfb = 0;
    uint64_t calls = ret ? ret->alloc_calls : 0, ups = ret ? ret->upstream_allocs : 0,
             downs = ret ? ret->upstream_frees : 0;
    for (int i = -1; i < n; i++) {
        cca_domain_stats d = dst(a, i < 0 ? NULL : doms[i]);
        cr_assert_leq(d.allocated_bytes, d.reserved_bytes, "%s: '%s' allocated %zu > reserved %zu", what, d.name,
                      d.allocated_bytes, d.reserved_bytes);
        cr_assert_eq(d.cached_bytes, d.reserved_bytes - d.allocated_bytes, "%s: '%s' cached %zu", what, d.name,
                     d.cached_bytes);
        cr_assert_leq(d.largest_free_block, d.cached_bytes, "%s: '%s' largest free block", what, d.name);
        double frag = d.cached_bytes ? 1.0 - (double)d.largest_free_block / (double)d.cached_bytes : 0.0;
        cr_assert_float_eq(d.fragmentation, frag, 1e-9, "%s: '%s' fragmentation %g, expected %g", what, d.name,
                           d.fragmentation, frag);
        cr_assert_geq(d.allocated_bytes_peak, d.allocated_bytes, "%s: '%s'", what, d.name);
        cr_assert_geq(d.requested_bytes_peak, d.requested_bytes, "%s: '%s'", what, d.name);
        cr_assert_geq(d.reserved_bytes_peak, d.reserved_bytes, "%s: '%s'", what, d.name);
        cr_assert_geq(d.active_blocks_peak, d.active_blocks, "%s: '%s'", what, d.name);
        cr_assert_leq(d.requested_bytes, d.allocated_bytes, "%s: '%s'", what, d.name);
        if (s.page_size == 0)
            cr_assert_eq(d.upstream_allocs - d.upstream_frees, d.segments,
                         "%s: '%s' %llu upstream allocs - %llu frees, %zu segments", what, d.name,
                         (unsigned long long)d.upstream_allocs, (unsigned long long)d.upstream_frees, d.segments);
        alloc += d.allocated_bytes, req += d.requested_bytes, res += d.reserved_bytes, act += d.active_blocks;
        segs += d.segments, cached += d.cached_bytes;
        calls += d.alloc_calls, ups += d.upstream_allocs, downs += d.upstream_frees;
        if (d.largest_free_block > lfb)
            lfb = d.largest_free_block;
    }
#define SUM_EQ(sum, f)                                                                                                 \
    cr_assert_eq((uint64_t)(sum), (uint64_t)s.f, "%s: sum over domains of " #f " is %llu, the allocator says %llu",   \
                 what, (unsigned long long)(sum), (unsigned long long)s.f)
    SUM_EQ(alloc, allocated_bytes);
    SUM_EQ(req, requested_bytes);
    SUM_EQ(res, reserved_bytes);
    SUM_EQ(act, active_blocks);
    SUM_EQ(segs, segments);
    SUM_EQ(cached, cached_bytes);
    if (!ret || !ret->unknown) {
        SUM_EQ(calls, alloc_calls);
        SUM_EQ(ups, upstream_allocs);
        SUM_EQ(downs, upstream_frees);
    }
    SUM_EQ(lfb, largest_free_block);
#undef SUM_EQ
    if (dev) {
        cca_upstream_stats us = tu_upstream_stats(dev);
        cr_assert_eq(us.bytes_in_use, s.reserved_bytes, "%s: the device holds %zu bytes for us, reserved says %zu",
                     what, us.bytes_in_use, s.reserved_bytes);
        cr_assert_eq(us.vm_reserved_bytes, s.address_space_bytes, "%s: the device reserves %zu bytes of space, %zu",
                     what, us.vm_reserved_bytes, s.address_space_bytes);
    }
}

static void agree(const cca_allocator *a, cca_upstream *dev, cca_domain *const *doms, int n, const char *what) {
    agree_r(a, dev, doms, n, NULL, what);
}

/* Nothing live; cca_destroy succeeds and the device then holds nothing (no
 * memory, no address space); destroy it too. (tu_teardown counts classic
 * upstream allocations, which expandable segments do not make.) */
static void finish(cca_allocator *a, cca_upstream *u) {
    tu_check(a);
    cr_assert_eq(tu_stats(a).active_blocks, 0, "blocks still live at the end");
    cr_assert_eq(cca_destroy(a), CCA_OK, "cca_destroy: %s", cca_last_error());
    cca_upstream_stats us = tu_upstream_stats(u);
    cr_assert_eq(us.bytes_in_use, 0, "the device still holds %zu bytes after cca_destroy", us.bytes_in_use);
    cr_assert_eq(us.vm_reserved_bytes, 0, "the device still reserves %zu bytes", us.vm_reserved_bytes);
    cr_assert_eq(us.vm_mapped_bytes, 0);
    cr_assert_eq(us.allocations, 0);
    cca_upstream_destroy(u);
}

/* ---- blocks with contents -------------------------------------------------------- */

typedef struct blk {
    char *p;
    size_t size, held;
    cca_stream s;
    cca_domain *d;
    uint64_t seed;
    uint64_t stamp; /* the allocator's alloc_calls right after this block was made */
} blk;

/* A block in d, filled with tu_fill (full = true) or tagged at its ends. */
static blk mk(cca_allocator *a, cca_domain *d, size_t size, cca_stream s, uint64_t seed, bool full) {
    blk b = {.size = size, .s = s, .d = d, .seed = seed};
    b.p = in(a, d, size, s);
    b.held = tu_block_size(a, b.p);
    cr_assert_geq(b.held, size);
    b.stamp = tu_stats(a).alloc_calls;
    if (full) {
        tu_fill(b.p, size, seed);
    } else {
        memcpy(b.p, &seed, sizeof seed);
        memcpy(b.p + size - sizeof seed, &seed, sizeof seed);
    }
    return b;
}

static bool intact(const blk *b, bool full) {
    if (full)
        return tu_check_fill(b->p, b->size, b->seed);
    uint64_t head, tail;
    memcpy(&head, b->p, sizeof head);
    memcpy(&tail, b->p + b->size - sizeof tail, sizeof tail);
    return head == b->seed && tail == b->seed;
}

#define ASSERT_INTACT(b, full, what)                                                                                   \
    cr_assert(intact(&(b), full), "%s: block %p of %zu bytes overwritten", what, (void *)(b).p, (b).size)

/* ---- JSON ----------------------------------------------------------------------- */

static cJSON *domains_json(const cca_allocator *a) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    cca_status st = cca_domain_stats_write_json(a, f);
    cr_assert_eq(st, CCA_OK, "cca_domain_stats_write_json: %s", cca_last_error());
    fclose(f);
    cJSON *json = cJSON_Parse(buf);
    cr_assert_not_null(json, "not JSON: %s", buf);
    cr_assert(cJSON_IsArray(json), "not a JSON array: %s", buf);
    free(buf);
    return json;
}

static double json_number(const cJSON *obj, const char *key) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
    cr_assert(cJSON_IsNumber(item), "JSON key '%s' missing or not a number", key);
    return item->valuedouble;
}

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
    cca_status st = cca_domain_of(a, NULL, &d);
    cr_assert(st == CCA_ERR_INVALID_ARGUMENT || st == CCA_ERR_INVALID_POINTER, "NULL pointer: %s",
              cca_status_string(st));
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

#define CANARY 0x5a

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
        cca_domain_report r;
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

/* ---- per-domain statistics: a seeded random sequence -------------------------------- */

enum { RD = 4, RMAX = 40 };

typedef struct dmodel {
    size_t alloc, alloc_peak, req, req_peak, act, act_peak, res_peak;
    uint64_t calls;
} dmodel;

static void model_add(dmodel *d, size_t held, size_t req) {
    d->alloc += held, d->req += req, d->act++, d->calls++;
    if (d->alloc > d->alloc_peak)
        d->alloc_peak = d->alloc;
    if (d->req > d->req_peak)
        d->req_peak = d->req;
    if (d->act > d->act_peak)
        d->act_peak = d->act;
}

static void model_drop(dmodel *d, size_t held, size_t req) {
    cr_assert(d->alloc >= held && d->req >= req && d->act > 0, "model underflow");
    d->alloc -= held, d->req -= req, d->act--;
}

typedef struct rstate {
    cca_allocator *a;
    cca_upstream *u;
    cca_domain *D[RD]; /* D[0] = NULL: the default domain */
    dmodel M[RD];
    blk live[RMAX];
    int dk[RMAX]; /* the domain index of each live block */
    int n;
    retired ret;
} rstate;

/* Every domain's stats equal the model; every account agrees. */
static void rcheck(rstate *x, const char *what) {
    agree_r(x->a, x->u, x->D + 1, x->D[1] ? RD - 1 : 0, &x->ret, what);
    cca_stats s = tu_stats(x->a);
    cr_assert_eq(s.pending_blocks, 0, "%s", what);
    size_t total = 0;
    for (int k = 0; k < (x->D[1] ? RD : 1); k++) {
        cca_domain_stats d = dst(x->a, x->D[k]);
        dmodel *mo = &x->M[k];
        if (d.reserved_bytes > mo->res_peak)
            mo->res_peak = d.reserved_bytes;
#define MEQ(f, v)                                                                                                      \
    cr_assert_eq((uint64_t)d.f, (uint64_t)(v), "%s: domain %d '%s' " #f " %llu, expected %llu", what, k, d.name,      \
                 (unsigned long long)d.f, (unsigned long long)(v))
        MEQ(allocated_bytes, mo->alloc);
        MEQ(allocated_bytes_peak, mo->alloc_peak);
        MEQ(requested_bytes, mo->req);
        MEQ(requested_bytes_peak, mo->req_peak);
        MEQ(active_blocks, mo->act);
        MEQ(active_blocks_peak, mo->act_peak);
        MEQ(alloc_calls, mo->calls);
        MEQ(reserved_bytes_peak, mo->res_peak);
#undef MEQ
        total += mo->alloc;
    }
    cr_assert_eq(s.allocated_bytes, total, "%s: the model itself", what);
}

static void rpush(rstate *x, int k, blk b) {
    cr_assert_lt(x->n, RMAX);
    x->live[x->n] = b;
    x->dk[x->n] = k;
    x->n++;
    model_add(&x->M[k], b.held, b.size);
}

static void rremove(rstate *x, int i) {
    x->live[i] = x->live[x->n - 1];
    x->dk[i] = x->dk[x->n - 1];
    x->n--;
}

/* Drop every live block of domain k from the list and the model (a forced
 * release took them); returns one of their pointers (or NULL). */
static void *rforget(rstate *x, int k) {
    void *one = NULL;
    for (int i = 0; i < x->n;)
        if (x->dk[i] == k) {
            one = x->live[i].p;
            model_drop(&x->M[k], x->live[i].held, x->live[i].size);
            rremove(x, i);
        } else {
            i++;
        }
    return one;
}

static size_t rsize(uint64_t *rng) {
    uint64_t r = tu_rand(rng) % 100;
    if (r < 60)
        return 16 + tu_rand(rng) % (256 * KiB);
    if (r < 92)
        return 512 * KiB + tu_rand(rng) % (4 * MiB);
    return 10 * MiB + tu_rand(rng) % (2 * MiB);
}

static void random_sequence(const mode *m, uint64_t seed, int steps) {
    rstate x;
    memset(&x, 0, sizeof x);
    x.u = device(1 * GiB);
    x.a = make(m, x.u, NULL);
    cca_allocator *a = x.a;
    uint64_t rng = seed;
    char what[128];
    /* the default domain's blocks from before any domain exists count */
    for (int i = 0; i < 3; i++)
        rpush(&x, 0, mk(a, NULL, rsize(&rng), i ? S0 : NULL, tu_rand(&rng), false));
    tu_free(a, x.live[1].p);
    model_drop(&x.M[0], x.live[1].held, x.live[1].size);
    rremove(&x, 1);
    rcheck(&x, "before domains");
    static const char *const names[RD] = {NULL, "r1", "r2", "r3"};
    for (int k = 1; k < RD; k++)
        x.D[k] = dom(a, names[k]);
    rcheck(&x, "domains created");
    cr_assert_eq(cca_domain_reserve(a, x.D[3], 6 * MiB), CCA_OK, "%s", cca_last_error());
    rcheck(&x, "arena reserved");
    const cca_stream streams[3] = {NULL, S0, S1};
    for (int step = 0; step < steps; step++) {
        uint64_t r = tu_rand(&rng) % 100;
        int k = (int)(tu_rand(&rng) % RD);
        cca_status st;
        snprintf(what, sizeof what, "%s seed %llu step %d (op %llu, domain %d)", m->name, (unsigned long long)seed,
                 step, (unsigned long long)r, k);
        if ((r < 44 && x.n < RMAX) || x.n == 0) {
            blk b = mk(a, x.D[k], rsize(&rng), streams[tu_rand(&rng) % 3], tu_rand(&rng), false);
            rpush(&x, k, b);
        } else if (r < 80) {
            int i = (int)(tu_rand(&rng) % (uint64_t)x.n);
            ASSERT_INTACT(x.live[i], false, what);
            tu_free(a, x.live[i].p);
            model_drop(&x.M[x.dk[i]], x.live[i].held, x.live[i].size);
            rremove(&x, i);
            if (tu_stats(a).pending_blocks) { /* host events complete at once: a synchronize finishes them */
                cr_assert_eq(cca_trim(a, SIZE_MAX, NULL), CCA_OK, "%s: %s", what, cca_last_error());
                cr_assert_eq(tu_stats(a).pending_blocks, 0, "%s", what);
            }
        } else if (r < 83) {
            int i = (int)(tu_rand(&rng) % (uint64_t)x.n);
            cr_assert_eq(cca_record_stream(a, x.live[i].p, x.live[i].s == S1 ? S0 : S1), CCA_OK, "%s", what);
        } else if (r < 86) {
            cr_assert_eq(cca_trim(a, (size_t)(tu_rand(&rng) % 64) * MiB, NULL), CCA_OK, "%s: %s", what,
                         cca_last_error());
        } else if (r < 87) {
            cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s: %s", what, cca_last_error());
        } else if (r < 93) {
            cca_domain_stats before = dst(a, x.D[k]);
            cca_stats sb = tu_stats(a);
            cca_domain_report rep;
            memset(&rep, 0, sizeof rep);
            st = cca_domain_release(a, x.D[k], 0, &rep);
            if (x.M[k].act) {
                cr_assert_eq(st, CCA_ERR_LIVE_BLOCKS, "%s: %s", what, cca_status_string(st));
                cr_assert_eq(rep.live_blocks, x.M[k].act, "%s", what);
                cr_assert_eq(rep.live_bytes, x.M[k].alloc, "%s", what);
                cr_assert_eq(rep.bytes_released, 0, "%s", what);
                dstats_unchanged(a, x.D[k], &before, what);
                tu_assert_intact(a, &sb, what);
            } else {
                cr_assert_eq(st, CCA_OK, "%s: %s", what, cca_last_error());
                cr_assert_eq(rep.bytes_released, before.reserved_bytes, "%s", what);
                cr_assert_eq(dst(a, x.D[k]).reserved_bytes, 0, "%s", what);
                cr_assert_eq(dst(a, x.D[k]).segments, 0, "%s", what);
            }
        } else if (r < 95) {
            cca_domain_report rep;
            memset(&rep, 0, sizeof rep);
            size_t act = x.M[k].act, bytes = x.M[k].alloc;
            st = cca_domain_release(a, x.D[k], CCA_DOMAIN_FORCE, &rep);
            cr_assert_eq(st, CCA_OK, "%s: forced: %s", what, cca_last_error());
            cr_assert_eq(rep.live_blocks, act, "%s", what);
            cr_assert_eq(rep.live_bytes, bytes, "%s", what);
            void *gone = rforget(&x, k);
            if (gone)
                cr_assert_eq(cca_free(a, gone), CCA_ERR_INVALID_POINTER, "%s", what);
            cr_assert_eq(dst(a, x.D[k]).reserved_bytes, 0, "%s", what);
        } else if (r < 97) {
            cca_reset_peak_stats(a);
            for (int j = 0; j < RD; j++) {
                dmodel *mo = &x.M[j];
                mo->alloc_peak = mo->alloc, mo->req_peak = mo->req, mo->act_peak = mo->act, mo->res_peak = 0;
            }
        } else if (k > 0) { /* destroy (forced) and create again */
            cca_domain_stats before = dst(a, x.D[k]);
            uint64_t frees = tu_stats(a).upstream_frees;
            st = cca_domain_destroy(a, x.D[k], CCA_DOMAIN_FORCE, NULL);
            cr_assert_eq(st, CCA_OK, "%s: destroy: %s", what, cca_last_error());
            x.ret.alloc_calls += before.alloc_calls;
            x.ret.upstream_allocs += before.upstream_allocs;
            x.ret.upstream_frees += before.upstream_frees + (tu_stats(a).upstream_frees - frees);
            rforget(&x, k);
            memset(&x.M[k], 0, sizeof x.M[k]);
            x.D[k] = dom(a, names[k]);
            if (k == 3)
                cr_assert_eq(cca_domain_reserve(a, x.D[3], 6 * MiB), CCA_OK, "%s", cca_last_error());
        }
        rcheck(&x, what);
    }
    for (int i = 0; i < x.n; i++) {
        ASSERT_INTACT(x.live[i], false, "end");
        tu_free(a, x.live[i].p);
    }
    for (int k = 0; k < RD; k++)
        cr_assert_eq(cca_domain_release(a, x.D[k], 0, NULL), CCA_OK, "final release of %d: %s", k, cca_last_error());
    agree_r(a, x.u, x.D + 1, RD - 1, &x.ret, "end");
    cr_assert_eq(tu_stats(a).reserved_bytes, 0);
    finish(a, x.u);
}

TEST_BOTH(per_domain_stats_match_a_model_and_sum_to_the_totals) {
    random_sequence(m, 0xd0a1, 700);
    random_sequence(m, 7, 300);
}

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
 * release, stays empty. */
Test(domain, the_retry_maps_the_arena_again_after_its_release_expandable, .timeout = 60) {
    cca_upstream *u = device(64 * MiB);
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

/* ---- footprint: cca_domain_reserve --------------------------------------------------- */

TEST_BOTH(reserve_refuses_bad_sizes_and_a_second_arena) {
    cca_upstream *u = device(256 * MiB);
    cca_allocator *a = make(m, u, NULL);
    cca_domain *Y = dom(a, "Y");
    cca_domain *doms[] = {Y};
    size_t unit = m->expandable ? PG : CCA_GRANULARITY;
    cca_stats before = tu_stats(a);
    cca_upstream_stats us = tu_upstream_stats(u);
    cr_assert_eq(cca_domain_reserve(a, Y, 0), CCA_ERR_INVALID_ARGUMENT, "0 bytes");
    cr_assert_eq(cca_domain_reserve(NULL, Y, MiB), CCA_ERR_INVALID_ARGUMENT, "NULL allocator");
    const size_t absurd[] = {SIZE_MAX, SIZE_MAX - CCA_GRANULARITY + 2, SIZE_MAX / 2 + 1, (size_t)1 << 62,
                             256 * MiB + 1, 1 * GiB};
    for (size_t i = 0; i < sizeof absurd / sizeof absurd[0]; i++) {
        cca_status st = cca_domain_reserve(a, Y, absurd[i]);
        cr_assert(st == CCA_ERR_INVALID_ARGUMENT || st == CCA_ERR_OUT_OF_MEMORY, "reserve(%zu): %s", absurd[i],
                  cca_status_string(st));
        tu_assert_intact(a, &before, "refused reserve");
        cr_assert_eq(dst(a, Y).reserved_bytes, 0);
    }
    cr_assert_eq(tu_upstream_stats(u).bytes_in_use, us.bytes_in_use);
    /* refusals leave the domain free to take an arena */
    size_t ask = 5 * MiB + 1, got = round_up(ask, unit);
    cr_assert_eq(cca_domain_reserve(a, Y, ask), CCA_OK, "%s", cca_last_error());
    cca_domain_stats sY = dst(a, Y);
    cr_assert_eq(sY.reserved_bytes, got, "%zu bytes rounded to %zu: reserved %zu", ask, got, sY.reserved_bytes);
    cr_assert_eq(sY.segments, 1, "one arena");
    cr_assert_eq(sY.allocated_bytes, 0);
    cr_assert_eq(tu_upstream_stats(u).bytes_in_use, us.bytes_in_use + got);
    cr_assert_eq(tu_stats(a).reserved_bytes, before.reserved_bytes + got);
    agree(a, u, doms, 1, "arena");
    before = tu_stats(a);
    cr_assert_eq(cca_domain_reserve(a, Y, MiB), CCA_ERR_INVALID_ARGUMENT, "a second arena");
    cr_assert_eq(cca_domain_reserve(a, Y, ask), CCA_ERR_INVALID_ARGUMENT, "a second arena of the same size");
    tu_assert_intact(a, &before, "refused second arena");
    /* a request in Y is served from the arena: no upstream call */
    cca_domain_stats s1 = dst(a, Y);
    blk b = mk(a, Y, 1 * MiB, S0, 5, true);
    blk c = mk(a, Y, 2 * MiB, S1, 6, true);
    cca_domain_stats s2 = dst(a, Y);
    cr_assert_eq(s2.upstream_allocs, s1.upstream_allocs, "served from the arena");
    cr_assert_eq(s2.reserved_bytes, got);
    if (!m->expandable) { /* classic: a partly used arena is not released (expandable may unmap free pages) */
        cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
        cr_assert_eq(dst(a, Y).reserved_bytes, got, "a live block keeps the arena");
    }
    ASSERT_INTACT(b, true, "arena block");
    ASSERT_INTACT(c, true, "arena block");
    tu_free(a, b.p), tu_free(a, c.p);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(dst(a, Y).reserved_bytes, 0, "a wholly free arena goes with empty-cache");
    agree(a, u, doms, 1, "arena emptied");
    /* and with the domain's release */
    cca_domain *Z = dom(a, "Z");
    cca_domain *doms2[] = {Y, Z};
    cr_assert_eq(cca_domain_reserve(a, Z, 3 * MiB), CCA_OK, "%s", cca_last_error());
    void *p = in(a, Z, 100, S0);
    tu_free(a, p);
    us = tu_upstream_stats(u);
    cca_domain_report r;
    memset(&r, 0, sizeof r);
    cr_assert_eq(cca_domain_release(a, Z, 0, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_geq(r.bytes_released, 3 * MiB);
    cr_assert_eq(dst(a, Z).reserved_bytes, 0);
    cr_assert_eq(tu_upstream_stats(u).bytes_in_use, us.bytes_in_use - r.bytes_released);
    agree(a, u, doms2, 2, "arena released with its domain");
    finish(a, u);
}

TEST_BOTH(reserve_and_growth_respect_max_reserved) {
    cca_upstream *u = device(256 * MiB);
    cca_allocator *a = make(m, u, "max_reserved:16M");
    cca_domain *Y = dom(a, "Y"), *Z = dom(a, "Z");
    cca_domain *doms[] = {Y, Z};
    cca_status st = cca_domain_reserve(a, Y, 20 * MiB);
    cr_assert(st == CCA_ERR_OUT_OF_MEMORY || st == CCA_ERR_INVALID_ARGUMENT, "above max_reserved: %s",
              cca_status_string(st));
    cr_assert_eq(tu_stats(a).reserved_bytes, 0);
    cr_assert_eq(cca_domain_reserve(a, Y, 8 * MiB), CCA_OK, "%s", cca_last_error());
    void *p[40];
    int n = 0;
    for (; n < 40; n++) {
        void *x = NULL;
        st = cca_alloc_in(a, Z, 512 * KiB, S0, &x);
        cr_assert_leq(tu_stats(a).reserved_bytes, 16 * MiB, "max_reserved crossed: %zu", tu_stats(a).reserved_bytes);
        agree(a, u, doms, 2, "under the cap");
        if (st != CCA_OK) {
            cr_assert_eq(st, CCA_ERR_OUT_OF_MEMORY, "%s", cca_status_string(st));
            break;
        }
        p[n] = x;
    }
    cr_assert_lt(n, 40, "the cap was reached");
    cr_assert_eq(dst(a, Z).alloc_calls, (uint64_t)n, "a refused request is no alloc call");
    cr_assert_eq(dst(a, Z).active_blocks, (size_t)n);
    for (int i = 0; i < n; i++)
        tu_free(a, p[i]);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    finish(a, u);
}

/* "Requests in d are served from the arena first (best fit at any size, any
 * stream), then from growth": a tiny and a large request both come from
 * the arena, and an arena block wins over an exact fit cached in growth. */
TEST_BOTH(the_arena_serves_first_at_any_size) {
    cca_upstream *u = device(256 * MiB);
    cca_allocator *a = make(m, u, NULL);
    cca_domain *Y = dom(a, "Y");
    cca_domain *doms[] = {Y};
    cr_assert_eq(cca_domain_reserve(a, Y, 16 * MiB), CCA_OK, "%s", cca_last_error());
    uint64_t ups = dst(a, Y).upstream_allocs;
    void *t = in(a, Y, 100, S0);
    void *base = t;
    tu_free(a, t);
    void *big = in(a, Y, 12 * MiB, S1); /* above large_min: still the arena */
    cr_assert_eq(big, base, "a large request from the (wholly free) arena");
    tu_free(a, big);
    cr_assert_eq(dst(a, Y).upstream_allocs, ups, "tiny and large requests served by the arena");
    /* an exact 2 MiB fit cached in a growth segment, and a free arena */
    void *fill = in(a, Y, 16 * MiB, S0);
    cr_assert_eq(fill, base);
    void *g = in(a, Y, 2 * MiB, S0), *g2 = in(a, Y, 2 * MiB, S0);
    cr_assert_gt(dst(a, Y).upstream_allocs, ups, "the full arena sends requests to growth");
    tu_free(a, g);
    tu_free(a, fill);
    agree(a, u, doms, 1, "arena free, growth block cached");
    ups = dst(a, Y).upstream_allocs;
    void *x = in(a, Y, 2 * MiB, S0);
    cr_assert_eq(x, base, "the arena first, before growth's cached blocks (got %p, arena at %p, growth block %p)", x,
                 base, g);
    cr_assert_eq(dst(a, Y).upstream_allocs, ups);
    tu_free(a, x), tu_free(a, g2);
    cr_assert_eq(cca_domain_release(a, Y, 0, NULL), CCA_OK, "%s", cca_last_error());
    agree(a, u, doms, 1, "released");
    finish(a, u);
}

/* A greedy allocator has no domains but its default one; releasing that
 * gives the arena back, and the domain stays usable ("the domain stays
 * usable, empty"). */
Test(domain, greedy_default_domain_release_gives_the_arena_back) {
    cca_upstream *u = device(64 * MiB);
    cca_allocator *a = tu_allocator(u, "policy:greedy,greedy_bytes:16M,log_oom:0");
    void *p = tu_alloc(a, 4096, S0);
    cca_domain_report r;
    memset(&r, 0, sizeof r);
    cr_assert_eq(cca_domain_release(a, NULL, 0, &r), CCA_ERR_LIVE_BLOCKS);
    tu_free(a, p);
    cr_assert_eq(cca_domain_release(a, NULL, 0, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(r.bytes_released, 16 * MiB);
    cr_assert_eq(tu_stats(a).reserved_bytes, 0);
    cr_assert_eq(tu_upstream_stats(u).bytes_in_use, 0);
    agree(a, u, NULL, 0, "greedy released");
    void *q = NULL;
    cca_status st = cca_alloc(a, 4096, S0, &q);
    cr_assert_eq(st, CCA_OK, "the default domain stays usable after its release: %s / %s", cca_status_string(st),
                 cca_last_error());
    tu_free(a, q);
    agree(a, u, NULL, 0, "greedy again");
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    finish(a, u);
}

/* A model's load, three steps on two streams, a partial reload, unload. */
static const struct {
    int alloc; /* 1: alloc slot of size on stream; 0: free slot */
    int slot;
    size_t size;
    int stream;
} workload[] = {
    {1, 0, 4 * MiB, 0},   {1, 1, 6 * MiB + 100, 0}, {1, 2, 2 * MiB + 512 * KiB, 0}, {1, 3, 300 * KiB, 0},
    {1, 4, 300 * KiB, 0}, {1, 5, 12 * MiB, 0},      {1, 6, 70 * KiB, 0},
    {1, 7, 1 * MiB, 1},   {1, 8, 700 * KiB, 0},     {1, 9, 64 * KiB, 1},            {0, 8, 0, 0},
    {1, 10, 3 * MiB, 0},  {0, 7, 0, 0},             {0, 9, 0, 0},                   {0, 10, 0, 0},
    {1, 7, 5 * MiB, 0},   {1, 8, 900 * KiB, 1},     {0, 7, 0, 0},                   {1, 9, 2 * MiB, 1},
    {0, 8, 0, 0},         {0, 9, 0, 0},
    {0, 5, 0, 0},         {1, 5, 11 * MiB, 0},      {0, 3, 0, 0},                   {1, 3, 200 * KiB, 1},
    {1, 7, 1 * MiB, 1},   {1, 8, 1 * MiB, 0},       {0, 7, 0, 0},                   {0, 8, 0, 0},
    {0, 0, 0, 0},         {0, 1, 0, 0},             {0, 2, 0, 0},                   {0, 3, 0, 0},
    {0, 4, 0, 0},         {0, 5, 0, 0},             {0, 6, 0, 0},
};
enum { WL = sizeof workload / sizeof workload[0], WSLOTS = 11 };

static void run_workload(cca_allocator *a, cca_domain *d, bool check_data) {
    blk slot[WSLOTS];
    memset(slot, 0, sizeof slot);
    for (int i = 0; i < WL; i++) {
        int k = workload[i].slot;
        if (workload[i].alloc) {
            cr_assert_null(slot[k].p);
            slot[k] = mk(a, d, workload[i].size, workload[i].stream ? S1 : S0, (uint64_t)(i + 1), check_data);
        } else {
            cr_assert_not_null(slot[k].p);
            if (check_data)
                ASSERT_INTACT(slot[k], true, "workload");
            tu_free(a, slot[k].p);
            slot[k].p = NULL;
        }
    }
    for (int k = 0; k < WSLOTS; k++)
        cr_assert_null(slot[k].p);
}

TEST_BOTH(a_reserved_footprint_runs_the_workload_without_upstream_calls) {
    cca_upstream *u = device(256 * MiB);
    cca_allocator *a = make(m, u, NULL);
    cca_domain *X = dom(a, "first load");
    run_workload(a, X, false);
    cca_domain_stats sX = dst(a, X);
    size_t peak = sX.reserved_bytes_peak;
    cr_assert_gt(peak, 0);
    uint64_t frees = tu_stats(a).upstream_frees;
    cr_assert_eq(cca_domain_destroy(a, X, 0, NULL), CCA_OK, "%s", cca_last_error());
    retired ret = {.alloc_calls = sX.alloc_calls,
                   .upstream_allocs = sX.upstream_allocs,
                   .upstream_frees = sX.upstream_frees + (tu_stats(a).upstream_frees - frees)};
    cca_domain *Y = dom(a, "second load");
    cca_domain *doms[] = {Y};
    cr_assert_eq(cca_domain_reserve(a, Y, peak), CCA_OK, "%s", cca_last_error());
    cca_domain_stats s0 = dst(a, Y);
    cca_stats a0 = tu_stats(a);
    cca_upstream_stats u0 = tu_upstream_stats(u);
    run_workload(a, Y, true);
    cca_domain_stats s1 = dst(a, Y);
    cca_stats a1 = tu_stats(a);
    cca_upstream_stats u1 = tu_upstream_stats(u);
    cr_assert_eq(s1.upstream_allocs, s0.upstream_allocs, "upstream allocations during the second run: %llu",
                 (unsigned long long)(s1.upstream_allocs - s0.upstream_allocs));
    cr_assert_eq(s1.upstream_frees, s0.upstream_frees);
    cr_assert_eq(a1.upstream_allocs, a0.upstream_allocs);
    cr_assert_eq(a1.upstream_frees, a0.upstream_frees);
    cr_assert_eq(u1.alloc_calls, u0.alloc_calls);
    cr_assert_eq(u1.free_calls, u0.free_calls);
    cr_assert_eq(u1.vm_map_calls, u0.vm_map_calls);
    cr_assert_eq(u1.vm_unmap_calls, u0.vm_unmap_calls);
    cr_assert_leq(s1.reserved_bytes_peak, peak, "second run peak %zu > first run peak %zu", s1.reserved_bytes_peak,
                  peak);
    cr_assert_eq(s1.alloc_calls, sX.alloc_calls, "the same workload");
    cr_assert_eq(s1.allocated_bytes_peak, sX.allocated_bytes_peak, "the same blocks");
    agree_r(a, u, doms, 1, &ret, "second run");
    cr_assert_eq(cca_domain_release(a, Y, 0, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(dst(a, Y).reserved_bytes, 0);
    finish(a, u);
}

/* ---- cached memory is the allocator's ------------------------------------------------ */

TEST_BOTH(trim_empty_cache_and_the_oom_retry_release_every_domain) {
    cca_upstream *u = device(48 * MiB);
    cca_allocator *a = make(m, u, NULL);
    cca_domain *A = dom(a, "A"), *B = dom(a, "B");
    cca_domain *doms[] = {A, B};
    /* the OOM retry takes A's cache for B */
    void *x = in(a, A, 30 * MiB, S0);
    tu_free(a, x);
    cca_domain_stats sA = dst(a, A);
    cr_assert_geq(sA.reserved_bytes, 30 * MiB);
    blk y = mk(a, B, 30 * MiB, S0, 1, false);
    cca_domain_stats nA = dst(a, A);
    cr_assert_eq(tu_stats(a).alloc_retries, 1);
    /* classic: A's one segment; expandable: as many of A's free pages as needed */
    if (!m->expandable)
        cr_assert_eq(nA.reserved_bytes, 0, "the retry released A's cached segment: %zu left", nA.reserved_bytes);
    cr_assert_leq(nA.reserved_bytes, 48 * MiB - 30 * MiB, "the retry released A's cached memory: %zu left",
                  nA.reserved_bytes);
    cr_assert_gt(nA.upstream_frees, sA.upstream_frees, "counted as A's");
    agree(a, u, doms, 2, "retry");
    ASSERT_INTACT(y, false, "B");
    tu_free(a, y.p);
    /* empty_cache: every domain's free memory; a live block pins its own */
    blk p = mk(a, A, 4096, S0, 2, true);
    void *q = in(a, B, 5 * MiB, S1);
    void *z = in(a, NULL, 3 * MiB, S0);
    tu_free(a, q), tu_free(a, z);
    cca_release_report r;
    cr_assert_eq(cca_empty_cache(a, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(dst(a, B).reserved_bytes, 0);
    cr_assert_eq(dst(a, NULL).reserved_bytes, 0);
    cr_assert_eq(dst(a, A).reserved_bytes, m->expandable ? PG : 2 * MiB,
                 "A keeps the segment (expandable: the page) of its live block: %zu", dst(a, A).reserved_bytes);
    cr_assert_eq(r.bytes_still_reserved, dst(a, A).reserved_bytes);
    agree(a, u, doms, 2, "empty_cache");
    ASSERT_INTACT(p, true, "A's live block");
    /* trim with a budget takes cached memory of any domain too */
    q = in(a, B, 5 * MiB, S1);
    z = in(a, A, 6 * MiB, S0);
    tu_free(a, q), tu_free(a, z);
    cr_assert_eq(cca_trim(a, 0, NULL), CCA_OK);
    cr_assert_eq(dst(a, B).reserved_bytes, 0);
    cr_assert_eq(dst(a, A).reserved_bytes, m->expandable ? PG : 2 * MiB);
    agree(a, u, doms, 2, "trim");
    tu_free(a, p.p);
    cr_assert_eq(cca_trim(a, 0, NULL), CCA_OK);
    agree(a, u, doms, 2, "all trimmed");
    finish(a, u);
}

/* ---- threads --------------------------------------------------------------------------- */

enum { TH = 6, TH_OPS = 700, TH_LIVE = 24 };

typedef struct tw {
    cca_allocator *a;
    cca_domain *d;
    int id;
    bool exclusive;
    uint64_t allocs, frees, releases_ok, releases_refused;
    uint64_t tmp_allocs; /* in short-lived domains of its own (counted in allocs too) */
    FILE *sink;          /* /dev/null, for JSON written while the others run */
    char error[256]; /* first failure; no asserting off the main thread */
} tw;

static void tw_fail(tw *w, const char *what, cca_status st) {
    if (!w->error[0])
        snprintf(w->error, sizeof w->error, "thread %d: %s: %s / %s", w->id, what, cca_status_string(st),
                 cca_last_error());
}

static void tw_free(tw *w, blk *b) {
    if (!intact(b, false))
        tw_fail(w, "block overwritten", CCA_OK);
    cca_status st = cca_free(w->a, b->p);
    if (st != CCA_OK)
        tw_fail(w, "cca_free", st);
    w->frees++;
}

static void *tw_main(void *arg) {
    tw *w = arg;
    uint64_t rng = 0x7700 + (uint64_t)w->id;
    cca_stream own = (cca_stream)(uintptr_t)(0x1000 * (w->id + 1));
    blk live[TH_LIVE];
    int n = 0;
    for (int op = 0; op < TH_OPS && !w->error[0]; op++) {
        uint64_t r = tu_rand(&rng) % 100;
        if ((r < 50 && n < TH_LIVE) || n == 0) {
            size_t size = tu_rand(&rng) % 10 == 0 ? 1 * MiB + tu_rand(&rng) % (3 * MiB) : 16 + tu_rand(&rng) % (64 * KiB);
            cca_stream s = tu_rand(&rng) % 2 ? own : NULL;
            void *p = NULL;
            cca_status st = cca_alloc_in(w->a, w->d, size, s, &p);
            if (st != CCA_OK || !p) {
                tw_fail(w, "cca_alloc_in", st);
                break;
            }
            cca_domain *d = NULL;
            st = cca_domain_of(w->a, p, &d);
            if (st != CCA_OK || d != w->d)
                tw_fail(w, "cca_domain_of names another domain", st);
            uint64_t seed = tu_rand(&rng);
            live[n] = (blk){.p = p, .size = size, .s = s, .d = w->d, .seed = seed};
            memcpy(live[n].p, &seed, sizeof seed);
            memcpy(live[n].p + size - sizeof seed, &seed, sizeof seed);
            n++;
            w->allocs++;
        } else if (r < 96) {
            int i = (int)(tu_rand(&rng) % (uint64_t)n);
            tw_free(w, &live[i]);
            live[i] = live[--n];
        } else if (r < 97) {
            cca_domain_stats s;
            cca_status st = cca_get_domain_stats(w->a, w->d, &s);
            if (st != CCA_OK || s.cached_bytes != s.reserved_bytes - s.allocated_bytes)
                tw_fail(w, "inconsistent domain stats", st);
            st = cca_domain_stats_write_json(w->a, w->sink);
            if (st != CCA_OK)
                tw_fail(w, "cca_domain_stats_write_json", st);
        } else if (r < 98) { /* a short-lived domain: created, used, destroyed while the others run */
            char name[32];
            snprintf(name, sizeof name, "tmp%d.%d", w->id, op);
            cca_domain *t = NULL;
            cca_status st = cca_domain_create(w->a, name, &t);
            if (st != CCA_OK) {
                tw_fail(w, "cca_domain_create", st);
                break;
            }
            void *x = NULL, *y = NULL;
            st = cca_alloc_in(w->a, t, 4096, own, &x);
            if (st == CCA_OK)
                st = cca_alloc_in(w->a, t, 2 * MiB, NULL, &y);
            if (st != CCA_OK)
                tw_fail(w, "cca_alloc_in(tmp)", st);
            w->allocs += 2, w->tmp_allocs += 2;
            cca_domain *d = NULL;
            if (cca_domain_of(w->a, y, &d) != CCA_OK || d != t)
                tw_fail(w, "cca_domain_of(tmp)", CCA_OK);
            if (cca_free(w->a, x) != CCA_OK || cca_free(w->a, y) != CCA_OK)
                tw_fail(w, "cca_free(tmp)", CCA_OK);
            w->frees += 2;
            st = cca_domain_destroy(w->a, t, 0, NULL);
            if (st != CCA_OK)
                tw_fail(w, "cca_domain_destroy(tmp)", st);
        } else { /* unload: free everything, release the domain */
            while (n > 0)
                tw_free(w, &live[--n]);
            cca_domain_report rep;
            memset(&rep, 0, sizeof rep);
            cca_status st = cca_domain_release(w->a, w->d, 0, &rep);
            if (st == CCA_OK && rep.live_blocks == 0)
                w->releases_ok++;
            else if (st == CCA_ERR_LIVE_BLOCKS && !w->exclusive)
                w->releases_refused++; /* the other thread of the shared domain has blocks */
            else
                tw_fail(w, "cca_domain_release", st);
        }
    }
    while (n > 0)
        tw_free(w, &live[--n]);
    return NULL;
}

TEST_BOTH(threads_allocate_and_release_their_domains_at_once) {
    cca_upstream *u = device(1 * GiB);
    cca_allocator *a = make(m, u, NULL);
    cca_domain *D[5];
    for (int k = 0; k < 5; k++) {
        char name[16];
        snprintf(name, sizeof name, "t%d", k);
        D[k] = dom(a, name);
    }
    tw w[TH];
    pthread_t th[TH];
    for (int i = 0; i < TH; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].a = a, w[i].id = i;
        w[i].d = D[i < 4 ? i : 4]; /* threads 4 and 5 share a domain */
        w[i].exclusive = i < 4;
        w[i].sink = fopen("/dev/null", "w");
        cr_assert_not_null(w[i].sink);
        cr_assert_eq(pthread_create(&th[i], NULL, tw_main, &w[i]), 0);
    }
    for (int i = 0; i < TH; i++) {
        cr_assert_eq(pthread_join(th[i], NULL), 0);
        fclose(w[i].sink);
    }
    uint64_t allocs = 0, frees = 0, releases = 0, tmp = 0;
    for (int i = 0; i < TH; i++) {
        cr_assert_eq(w[i].error[0], '\0', "%s", w[i].error);
        allocs += w[i].allocs, frees += w[i].frees, releases += w[i].releases_ok, tmp += w[i].tmp_allocs;
    }
    cr_assert_gt(tmp, 0, "short-lived domains came and went");
    cr_assert_gt(releases, 4, "releases ran while other threads allocated");
    /* the short-lived domains are gone: their calls are in the allocator's
     * totals only (their memory was released by their destroy) */
    cca_stats st0 = tu_stats(a);
    uint64_t in_domains = 0;
    for (int k = 0; k < 5; k++)
        in_domains += dst(a, D[k]).alloc_calls;
    cr_assert_eq(in_domains + dst(a, NULL).alloc_calls + tmp, st0.alloc_calls);
    cJSON *json = domains_json(a);
    cr_assert_eq(cJSON_GetArraySize(json), 6, "default and t0..t4 only");
    cJSON_Delete(json);
    const retired gone = {.unknown = true};
    agree_r(a, u, D, 5, &gone, "after the threads");
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.alloc_calls, allocs);
    cr_assert_eq(s.free_calls, frees);
    cr_assert_eq(s.active_blocks, 0);
    for (int k = 0; k < 5; k++) {
        cca_domain_stats d = dst(a, D[k]);
        uint64_t mine = k < 4 ? w[k].allocs - w[k].tmp_allocs
                              : w[4].allocs - w[4].tmp_allocs + w[5].allocs - w[5].tmp_allocs;
        cr_assert_eq(d.alloc_calls, mine, "domain %d: %llu alloc calls, its threads made %llu", k,
                     (unsigned long long)d.alloc_calls, (unsigned long long)mine);
        cr_assert_eq(d.active_blocks, 0);
        cr_assert_eq(d.allocated_bytes, 0);
        cca_domain_report r;
        memset(&r, 0, sizeof r);
        cr_assert_eq(cca_domain_release(a, D[k], 0, &r), CCA_OK, "%s", cca_last_error());
        cr_assert_eq(r.bytes_released, d.reserved_bytes);
    }
    agree_r(a, u, D, 5, &gone, "released");
    cr_assert_eq(tu_stats(a).reserved_bytes, 0);
    cr_assert_eq(tu_upstream_stats(u).bytes_in_use, 0);
    cr_assert_eq(dst(a, NULL).alloc_calls, 0);
    for (int k = 0; k < 5; k++)
        cr_assert_eq(cca_domain_destroy(a, D[k], 0, NULL), CCA_OK);
    finish(a, u);
}

/* ---- JSON ------------------------------------------------------------------------------ */

static void check_json_domain(const cJSON *obj, const cca_domain_stats *s) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(obj, "name");
    cr_assert(cJSON_IsString(name), "\"name\" missing");
    cr_assert_str_eq(name->valuestring, s->name);
#define KEY(f) cr_assert_eq(json_number(obj, #f), (double)s->f, "'%s' " #f, s->name)
    KEY(allocated_bytes);
    KEY(allocated_bytes_peak);
    KEY(requested_bytes);
    KEY(requested_bytes_peak);
    KEY(reserved_bytes);
    KEY(reserved_bytes_peak);
    KEY(active_blocks);
    KEY(active_blocks_peak);
    KEY(cached_bytes);
    KEY(largest_free_block);
    KEY(segments);
    KEY(alloc_calls);
    KEY(upstream_allocs);
    KEY(upstream_frees);
#undef KEY
    cr_assert_float_eq(json_number(obj, "fragmentation"), s->fragmentation, 1e-6);
}

TEST_BOTH(json_names_every_domain_in_creation_order) {
    cca_upstream *u = device(128 * MiB);
    cca_allocator *a = make(m, u, NULL);
    char n63[CCA_DOMAIN_NAME_MAX + 1];
    memset(n63, 'q', CCA_DOMAIN_NAME_MAX), n63[CCA_DOMAIN_NAME_MAX] = '\0';
    const char *names[] = {"alpha", "beta gamma", "alpha", "~!#$%&'()*+-./:;<=>?@[]^_`{|}", n63};
    enum { ND = 5 };
    cca_domain *D[ND];
    for (int k = 0; k < ND; k++)
        D[k] = dom(a, names[k]);
    void *keep0 = in(a, D[0], 4096, S0);
    void *f1 = in(a, D[1], 3 * MiB, S1);
    void *keep3 = in(a, D[3], 12 * MiB, S0);
    void *keepd = tu_alloc(a, 1000, S0);
    tu_free(a, f1);
    cca_domain_reserve(a, D[4], 2 * MiB);
    cJSON *json = domains_json(a);
    cr_assert_eq(cJSON_GetArraySize(json), 1 + ND);
    cca_domain_stats s = dst(a, NULL);
    check_json_domain(cJSON_GetArrayItem(json, 0), &s);
    for (int k = 0; k < ND; k++) {
        s = dst(a, D[k]);
        cr_assert_str_eq(s.name, names[k]);
        check_json_domain(cJSON_GetArrayItem(json, 1 + k), &s);
    }
    cJSON_Delete(json);
    /* destroyed domains leave the list, the order stays */
    cr_assert_eq(cca_domain_destroy(a, D[1], 0, NULL), CCA_OK, "%s", cca_last_error());
    json = domains_json(a);
    cr_assert_eq(cJSON_GetArraySize(json), ND);
    const int order[] = {0, 2, 3, 4};
    for (int i = 0; i < 4; i++) {
        s = dst(a, D[order[i]]);
        check_json_domain(cJSON_GetArrayItem(json, 1 + i), &s);
    }
    cJSON_Delete(json);
    /* the snapshot names the domains too, and stays JSON */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    cr_assert_eq(cca_write_snapshot_json(a, f), CCA_OK, "%s", cca_last_error());
    fclose(f);
    json = cJSON_Parse(buf);
    cr_assert_not_null(json, "snapshot with domains is not JSON: %s", buf);
    cJSON_Delete(json);
    free(buf);
    tu_free(a, keep0), tu_free(a, keep3), tu_free(a, keepd);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    finish(a, u);
}
