/*
 * test_whole_maps_random.c — allocator/src/kinds/pages.c: seeded random sequences over whole maps
 * (vm_backing CCA_VM_WHOLE_MAPS) under hostile configurations and faults.
 *
 *   faults        alloc (about one in 64 larger than max_reserved or the device
 *                 could ever hold: refused) / free / record_stream / trim(keep: 0, SIZE_MAX,
 *                 inside a map, random) / empty_cache over streams and
 *                 memory domains (arenas included), with a refusal
 *                 injected at a random upstream call of a random kind
 *                 (vm_map, vm_unmap, vm_reserve, vm_release, synchronize;
 *                 once or from then on) every few steps; after EVERY step:
 *                 invariants (I8 included), the allocator's mapped bytes,
 *                 maps and unmaps equal the device's, every live block
 *                 holds its data; at the end nothing is left anywhere.
 *   unmaps        what the program owed the device, counted by the test
 *                 (tu_faulty's book of maps), not a guessed figure: every
 *                 full release (empty_cache, trim(0)) that returns CCA_OK
 *                 and meets no refusal unmaps at least every map no live
 *                 block touched before it (ccalloc.h, cca_trim); a program
 *                 whose live blocks pin every map (one request the size of
 *                 the cap) owes none. Power: a pages.c that keeps a
 *                 segment's first idle map fails every run (greedy's at
 *                 its first empty_cache).
 *   chunks        the largest map (set with the growth rule's test hook,
 *                 pages_rule.h, before the first request) 0, 1, a page
 *                 less one, a page, a page and one, three pages, huge,
 *                 SIZE_MAX; granularities 4 KiB to 1 MiB; a capacity that
 *                 is no multiple of the chunk; max_reserved caps that are
 *                 no multiple of it either; the greedy arena in 3 MiB maps
 *                 (released at the start, reserved again under the hook's
 *                 rule).
 * CCA_RANDOM_SEED replays another seed.
 */
#include "alloc_test_util.h"
#include "pages_rule.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 48
#define S0 ((cca_stream)0x100)
#define S1 ((cca_stream)0x200)
#define S2 ((cca_stream)0x300)

typedef struct slot {
    char *p;
    size_t size;
    uint64_t tag;
} slot;

static uint64_t seed_from_env(uint64_t fallback) {
    const char *env = getenv("CCA_RANDOM_SEED");
    return env && *env ? strtoull(env, NULL, 0) : fallback;
}

static void tag(slot *s) {
    memcpy(s->p, &s->tag, s->size < 8 ? s->size : 8);
    if (s->size >= 16)
        memcpy(s->p + s->size - 8, &s->tag, 8);
    if (s->size >= 64 * KiB)
        memcpy(s->p + s->size / 2, &s->tag, 8);
}

static bool intact(const slot *s) {
    uint64_t v = 0;
    memcpy(&v, s->p, s->size < 8 ? s->size : 8);
    if (s->size < 8)
        return memcmp(&v, &s->tag, s->size) == 0;
    if (v != s->tag)
        return false;
    if (s->size >= 16 && (memcpy(&v, s->p + s->size - 8, 8), v != s->tag))
        return false;
    if (s->size >= 64 * KiB && (memcpy(&v, s->p + s->size / 2, 8), v != s->tag))
        return false;
    return true;
}

/* Log-uniform in [1, max]. */
static size_t rsize(uint64_t *rng, unsigned max_bits) {
    unsigned bits = (unsigned)(tu_rand(rng) % (max_bits + 1));
    size_t lo = (size_t)1 << bits;
    return lo + (size_t)(tu_rand(rng) % lo);
}

static void agree(const cca_allocator *a, cca_upstream *u, const tu_faulty *f, const char *what) {
    cr_assert_eq(cca_check_invariants(a), CCA_OK, "%s: invariants: %s", what, cca_last_error());
    cca_stats s = tu_stats(a);
    cca_upstream_stats inner = tu_upstream_stats(f->inner);
    (void)u;
    cr_assert_eq(s.mapped_bytes, inner.vm_mapped_bytes, "%s: mapped %zu, device %zu", what, s.mapped_bytes,
                 inner.vm_mapped_bytes);
    cr_assert_eq(s.address_space_bytes, inner.vm_reserved_bytes, "%s: address space %zu, device %zu", what,
                 s.address_space_bytes, inner.vm_reserved_bytes);
    cr_assert_eq(s.reserved_bytes, s.mapped_bytes, "%s", what);
    cr_assert_eq(s.vm_maps, f->ok[TU_FAULT_MAP], "%s: vm_maps", what);
    cr_assert_eq(s.vm_unmaps, f->ok[TU_FAULT_UNMAP], "%s: vm_unmaps", what);
}

/* The maps of the device's book that no live block touches (a block's extent: its pointer and cca_block_size). */
static size_t idle_maps(cca_allocator *a, const tu_book *b, const slot *slots) {
    uintptr_t lo[SLOTS], hi[SLOTS];
    int live = 0;
    for (int j = 0; j < SLOTS; j++)
        if (slots[j].p) {
            size_t bs = 0;
            cr_assert_eq(cca_block_size(a, slots[j].p, &bs), CCA_OK, "%s", cca_last_error());
            lo[live] = (uintptr_t)slots[j].p;
            hi[live++] = (uintptr_t)slots[j].p + bs;
        }
    size_t n = 0;
    for (size_t i = 0; i < b->nmaps; i++) {
        bool touched = false;
        for (int j = 0; j < live && !touched; j++)
            touched = lo[j] < b->maps[i].hi && hi[j] > b->maps[i].lo;
        n += !touched;
    }
    return n;
}

typedef struct config {
    size_t capacity, gran;
    const char *conf; /* on top of expandable:1,log_oom:0 */
    int steps;
    bool domains;
    /* the growth rule's fixed parts, through the test hook before the first request: the least step, the largest
     * map (0: one map per run); the ahead's cap 64 MiB; with expandable_ahead:0, neither ahead nor least step */
    size_t least, map_bytes;
} config;

#define LEAST ((size_t)20 * MiB) /* the rule's least step */

static void faulty_run(const config *c, uint64_t seed) {
    tu_faulty f;
    cca_upstream *inner = tu_vm_device_backed(c->capacity, c->gran, CCA_VM_WHOLE_MAPS);
    cca_upstream *u = tu_faulty_create(&f, inner, "wx", seed & 1);
    static tu_book book; /* every map the device holds: which ones a release owes it (large: not on the stack) */
    memset(&book, 0, sizeof book);
    f.book = &book;
    cr_assert_eq(cca_upstream_vm_backing(u), CCA_VM_WHOLE_MAPS, "the wrapper keeps the backing");
    char conf[256];
    snprintf(conf, sizeof conf, "expandable:1,log_oom:0,%s", c->conf);
    cca_allocator *a = tu_allocator(u, conf);
    cca_config cfg;
    cr_assert_eq(cca_get_config(a, &cfg), CCA_OK);
    bool ahead = cfg.expandable_ahead > 0;
    ccai_pages_rule_set(a, ahead ? c->least : 0, ahead ? 64 * MiB : 0, c->map_bytes);
    char name[160];
    snprintf(name, sizeof name, "%s; least step %zu, maps of %zu", c->conf, ahead ? c->least : 0, c->map_bytes);
    if (cfg.policy == CCA_POLICY_GREEDY) { /* the arena, mapped at creation in the rule's 128 MiB maps, goes back: the
                                              first request reserves it again in maps of map_bytes */
        cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s", cca_last_error());
        cr_assert_eq(tu_stats(a).reserved_bytes, 0, "%s: the arena stayed", name);
    }
    uint64_t rng = seed;
    slot slots[SLOTS] = {{0}};
    cca_domain *doms[3] = {NULL, NULL, NULL}; /* [0]: the default */
    cca_stream streams[3] = {S0, S1, S2};
    int fault_left = 0;
    uint64_t owed = 0; /* unmaps the full releases owed: the idle maps before each (see idle_maps) */
    /* requests up to a third of what may be reserved (log-uniform over powers of two to a sixth and the octave
     * above): no one request holds a whole cap, so maps come and go; about one in 64 is made larger than all of it,
     * a request that can never succeed (refused: OUT_OF_MEMORY, nothing left behind) */
    size_t room = cfg.max_reserved && cfg.max_reserved < c->capacity ? cfg.max_reserved : c->capacity;
    unsigned max_bits = 0;
    while (((size_t)2 << max_bits) <= room / 6)
        max_bits++;
    const tu_fault_kind kinds[] = {TU_FAULT_MAP, TU_FAULT_UNMAP, TU_FAULT_RESERVE, TU_FAULT_RELEASE, TU_FAULT_SYNC};
    for (int step = 0; step < c->steps; step++) {
        char what[200];
        snprintf(what, sizeof what, "%s seed %llu step %d", name, (unsigned long long)seed, step);
        if (fault_left > 0 && --fault_left == 0)
            tu_faulty_faults_off(&f);
        uint64_t r = tu_rand(&rng) % 1000;
        int k = (int)(tu_rand(&rng) % SLOTS);
        uint64_t failures = f.failures;
        if (r < 60 && fault_left == 0) { /* a refusal at one of the next calls of one kind */
            tu_fault_kind kind = kinds[tu_rand(&rng) % 5];
            f.fail_at[kind] = f.calls[kind] + 1 + tu_rand(&rng) % 3;
            f.sticky[kind] = tu_rand(&rng) % 3 == 0;
            fault_left = 5 + (int)(tu_rand(&rng) % 40); /* armed until then, fired or not */
        } else if (r < 60) {
            size_t reserved = tu_stats(a).reserved_bytes;
            size_t keep;
            switch (tu_rand(&rng) % 5) {
            case 0: keep = 0; break;
            case 1: keep = SIZE_MAX; break;
            case 2: keep = reserved ? reserved - 1 : 0; break; /* inside the highest map */
            default: keep = reserved ? (size_t)(tu_rand(&rng) % (reserved + 1)) : 0;
            }
            cca_release_report rep;
            bool empty = tu_rand(&rng) % 4 == 0;
            size_t idle = empty || keep == 0 ? idle_maps(a, &book, slots) : 0; /* a full release owes these */
            uint64_t unmaps = tu_stats(a).vm_unmaps;
            cca_status st = TU_KEEPS_MESSAGE(empty ? cca_empty_cache(a, &rep) : cca_trim(a, keep, &rep), what);
            cr_assert(st == CCA_OK || (st == CCA_ERR_UPSTREAM && f.failures > failures), "%s: release: %s", what,
                      cca_last_error());
            cr_assert_eq(rep.bytes_still_reserved, tu_stats(a).reserved_bytes, "%s", what);
            if (st == CCA_OK && f.failures == failures) { /* no refusal met: nothing excuses a map kept */
                uint64_t made = tu_stats(a).vm_unmaps - unmaps;
                cr_assert_geq(made, idle, "%s: %s: %zu maps no live block touched, %llu unmapped", what,
                              empty ? "empty_cache" : "trim(0)", idle, (unsigned long long)made);
                owed += idle;
            }
        } else if (r < 90 && c->domains) {
            int d = 1 + (int)(tu_rand(&rng) % 2);
            if (!doms[d]) {
                cr_assert_eq(cca_domain_create(a, d == 1 ? "d1" : "d2", &doms[d]), CCA_OK);
                if (tu_rand(&rng) % 2) {
                    cca_status st = TU_KEEPS_MESSAGE(cca_domain_reserve(a, doms[d], rsize(&rng, max_bits)), what);
                    cr_assert(st == CCA_OK || st == CCA_ERR_OUT_OF_MEMORY || (st == CCA_ERR_UPSTREAM && f.failures > failures),
                              "%s: domain_reserve: %s", what, cca_last_error());
                }
            } else { /* release or destroy it, FORCE or not */
                bool force = tu_rand(&rng) % 2, destroy = tu_rand(&rng) % 2;
                unsigned flags = force ? CCA_DOMAIN_FORCE : 0;
                cca_domain_report rep;
                memset(&rep, 0, sizeof rep);
                cca_status st = TU_KEEPS_MESSAGE(destroy ? cca_domain_destroy(a, doms[d], flags, &rep)
                                                         : cca_domain_release(a, doms[d], flags, &rep),
                                                 what);
                cr_assert(st == CCA_OK || (st == CCA_ERR_LIVE_BLOCKS && (rep.live_blocks || !force)) ||
                              (st == CCA_ERR_UPSTREAM && f.failures > failures),
                          "%s: domain %s: %s", what, destroy ? "destroy" : "release", cca_last_error());
                if (st == CCA_OK && destroy)
                    doms[d] = NULL;
                for (int j = 0; j < SLOTS; j++) { /* blocks FORCE dropped are no longer live */
                    cca_domain *of = NULL;
                    if (slots[j].p && cca_domain_of(a, slots[j].p, &of) == CCA_ERR_INVALID_POINTER)
                        slots[j].p = NULL;
                }
            }
        } else if (r < 120) {
            if (slots[k].p)
                cr_assert_eq(TU_KEEPS_MESSAGE(cca_record_stream(a, slots[k].p, streams[tu_rand(&rng) % 3]), what),
                             CCA_OK, "%s", what);
        } else if (!slots[k].p) {
            size_t size = rsize(&rng, max_bits);
            bool never = size % 64 == 0; /* no draw of its own: the seeds' sequences stay */
            if (never)
                size += room;
            cca_domain *d = c->domains ? doms[tu_rand(&rng) % 3] : NULL;
            void *p = (void *)1;
            cca_status st = TU_KEEPS_MESSAGE(cca_alloc_in(a, d, size, streams[tu_rand(&rng) % 3], &p), what);
            cr_assert(!never || st != CCA_OK, "%s: alloc %zu over the %zu that may ever be reserved: granted", what,
                      size, room);
            if (st == CCA_OK) {
                slots[k] = (slot){p, size, tu_rand(&rng)};
                tag(&slots[k]);
            } else {
                cr_assert(st == CCA_ERR_OUT_OF_MEMORY || (st == CCA_ERR_UPSTREAM && f.failures > failures),
                          "%s: alloc %zu: %s: %s", what, size, cca_status_string(st), cca_last_error());
                cr_assert_null(p, "%s", what);
            }
        } else {
            cr_assert(intact(&slots[k]), "%s: block %p (%zu) overwritten", what, (void *)slots[k].p, slots[k].size);
            cca_status st = TU_KEEPS_MESSAGE(cca_free(a, slots[k].p), what);
            cr_assert(st == CCA_OK || (st == CCA_ERR_UPSTREAM && f.failures > failures), "%s: free: %s", what,
                      cca_last_error());
            slots[k].p = NULL;
        }
        agree(a, u, &f, what);
        for (int j = 0; j < SLOTS; j++)
            if (slots[j].p)
                cr_assert(intact(&slots[j]), "%s: slot %d (%p, %zu bytes) overwritten", what, j, (void *)slots[j].p,
                          slots[j].size);
    }
    cca_stats end = tu_stats(a);
    cr_log_info("%s: %llu injected, %llu maps, %llu unmaps (%llu owed), %llu retries, %llu ooms", name,
                (unsigned long long)f.failures, (unsigned long long)end.vm_maps, (unsigned long long)end.vm_unmaps,
                (unsigned long long)owed, (unsigned long long)end.alloc_retries, (unsigned long long)end.ooms);
    /* the sequence did what it is for: refusals met (the unmaps it owed were checked at each release) */
    cr_assert_geq(f.failures, 3, "%s: only %llu refusals injected", name, (unsigned long long)f.failures);
    tu_faulty_faults_off(&f);
    for (int j = 0; j < SLOTS; j++)
        if (slots[j].p) {
            cr_assert(intact(&slots[j]));
            cr_assert_eq(cca_free(a, slots[j].p), CCA_OK, "%s", cca_last_error());
        }
    for (int d = 1; d < 3; d++)
        if (doms[d])
            cr_assert_eq(cca_domain_destroy(a, doms[d], 0, NULL), CCA_OK, "%s", cca_last_error());
    cca_release_report rep;
    cr_assert_eq(cca_empty_cache(a, &rep), CCA_OK, "final empty_cache: %s", cca_last_error());
    agree(a, u, &f, "final");
    cr_assert_eq(tu_stats(a).reserved_bytes, 0);
    cr_assert_eq(tu_stats(a).segments, 0);
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    cca_upstream_stats us = tu_upstream_stats(inner);
    cr_assert_eq(us.vm_mapped_bytes, 0);
    cr_assert_eq(us.vm_reserved_bytes, 0);
    cr_assert_eq(f.events_live, 0);
    cca_upstream_destroy(u);
    cca_upstream_destroy(inner);
}

Test(whole_maps_random, faults_with_every_kind_of_chunk, .timeout = 120) {
    const uint64_t seed = seed_from_env(0x51ab1e);
    const size_t pg = 64 * KiB;
    const size_t chunks[] = {0, 1, pg - 1, pg, pg + 1, 3 * pg, 1024 * pg, SIZE_MAX};
    for (size_t i = 0; i < sizeof chunks / sizeof chunks[0]; i++) {
        /* a capacity that is no multiple of 3 pages */
        config c = {40 * MiB + 3 * pg, pg, "", 1500, false, i % 2 ? 0 : 256 * KiB, chunks[i]};
        faulty_run(&c, seed + i);
    }
}

Test(whole_maps_random, faults_with_domains_and_arenas, .timeout = 120) {
    const uint64_t seed = seed_from_env(0xd0a1);
    const char *confs[] = {"", "", "small_pool:0"};
    const size_t chunks[] = {192 * KiB, 0, 64 * KiB};
    for (size_t i = 0; i < 3; i++) {
        config c = {48 * MiB, 64 * KiB, confs[i], 1500, true, LEAST, chunks[i]};
        faulty_run(&c, seed + 17 * i);
    }
}

Test(whole_maps_random, faults_on_every_granularity, .timeout = 120) {
    const uint64_t seed = seed_from_env(0x6a7);
    const size_t grans[] = {4 * KiB, 16 * KiB, 256 * KiB, 1 * MiB};
    for (size_t i = 0; i < 4; i++) {
        /* maps of two pages and a half: rounded down to 2 pages */
        config c = {32 * MiB + (i + 1) * grans[i], grans[i], "", 800, i % 2, LEAST, 5 * grans[i] / 2};
        faulty_run(&c, seed + i);
    }
}

/* max_reserved: under the device, and no multiple of the chunk. */
Test(whole_maps_random, faults_under_max_reserved, .timeout = 120) {
    const uint64_t seed = seed_from_env(0xcab);
    const char *confs[] = {"max_reserved:20M", "max_reserved:15M,expandable_ahead:0"};
    const size_t chunks[] = {192 * KiB, 0};
    for (size_t i = 0; i < 2; i++) {
        config c = {48 * MiB, 64 * KiB, confs[i], 1500, i == 0, LEAST, chunks[i]};
        faulty_run(&c, seed + i);
    }
}

Test(whole_maps_random, greedy_arena_under_faults, .timeout = 120) {
    const uint64_t seed = seed_from_env(0x9eed);
    config c = {64 * MiB, 64 * KiB, "policy:greedy,greedy_bytes:40M", 1500, false, LEAST, 3 * MiB};
    faulty_run(&c, seed);
}
