/*
 * test_random_relations.c — allocator/src/support/stats.c, sleep.c, domain.c: the documented
 * relations between the allocator's stats, its domains' stats and the
 * upstream's own counts, checked after EVERY public call of seeded random
 * sequences that mix every feature at once.
 *
 * The other random suites hold one feature to a model (test_random.c one
 * pool, test_random_domains.c domains, test_random_streams.c deferred
 * frees); none puts sleep and wake, the hold and the caps in the same
 * sequence as domains, arenas, streams and upstream faults. This suite needs
 * no model: what it checks is what ccalloc.h states of any state.
 *
 * The calls: cca_alloc / cca_alloc_in on random domains and three streams,
 * cca_free, cca_record_stream, cca_domain_create / release / destroy
 * (forced or not), cca_domain_reserve, cca_domain_sleep (copy or discard) /
 * wake, cca_sleep / cca_wake, cca_trim, cca_empty_cache,
 * cca_reset_peak_stats; events held or completed at random; and at random
 * steps the k-th upstream call of a random kind refused (every kind
 * tu_faulty has: alloc, free, the four vm ops, both synchronizes, host
 * memory and copies), once or for the whole step. Configurations: expandable
 * segments over whole maps and over pages, classic segments, hold_peak, caps
 * (max_reserved), greedy.
 *
 * After every call (check_relations):
 *   - cca_check_invariants;
 *   - the allocator's reserved, allocated, requested, active blocks,
 *     segments and host bytes are the sums of its domains'; asleep_domains
 *     counts the domains that say asleep;
 *   - each awake domain's cached bytes are its reserved minus allocated, an
 *     asleep one's 0, and the allocator's cached bytes are their sum;
 *   - peaks are at least the current values (allocator and domains);
 *   - largest free block <= cached bytes, fragmentation as defined;
 *   - the upstream (a wrapper only this allocator uses) holds exactly the
 *     reserved bytes, its mapped bytes are mapped_bytes, its reserved
 *     address space address_space_bytes, its maps and unmaps vm_maps and
 *     vm_unmaps, and its host memory the allocator's host_bytes (plus what
 *     a refused host_free left with it, documented);
 *   - a trim's report agrees with the stats' change (bytes, segments and
 *     pages released) and with the stats after it (a trim that stops above
 *     its keep_bytes leaves only pinned free bytes cached), a domain release's
 *     likewise (also when the upstream refused part); a sleep's and a
 *     wake's with the pages they unmapped or mapped and the host bytes they
 *     took or gave back, the domain asleep (nothing reserved) or awake (no
 *     host bytes); a domain released holds nothing; after
 *     cca_reset_peak_stats every peak is its value; a failed alloc leaves
 *     *out NULL and no live block changes; ooms rises by one exactly when
 *     an alloc says CCA_ERR_OUT_OF_MEMORY, alloc_calls when one succeeds,
 *     free_calls when a free does.
 * At the end everything is woken, freed and destroyed, and the upstream
 * holds nothing (device, address space, host memory beyond the refused
 * host_free's).
 *
 * Seeds: a fixed list plus one from time(), each printed; CCA_RANDOM_SEED
 * replays one.
 */
#include "alloc_test_util.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PG ((size_t)64 * KiB)
#define ND 4    /* domain slots: 0 the default domain */
#define MAXB 64 /* live blocks at most */
#define STEPS 1000

typedef struct blk {
    void *p;
    int dom;
} blk;

typedef struct world {
    const char *conf;
    bool greedy, classic;
    uint64_t seed, rng;
    cca_upstream *dev, *u;
    tu_faulty f;
    cca_allocator *a;
    cca_domain *dom[ND]; /* NULL past slot 0: no domain there */
    bool used[ND];
    blk b[MAXB];
    size_t nb;
    size_t host_leaked; /* refused host_free: stays with the upstream (ccalloc.h) */
    int step;
    const char *what;
} world;

static uint64_t rnd(world *w, uint64_t n) {
    return tu_rand(&w->rng) % n;
}

#define FAIL(w, ...)                                                                                                   \
    cr_assert_fail("%s seed %llu step %d (%s): %s", (w)->conf, (unsigned long long)(w)->seed, (w)->step, (w)->what,    \
                   __VA_ARGS__)
#define HOLD(w, cond, ...)                                                                                             \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            char m_[512];                                                                                              \
            snprintf(m_, sizeof m_, __VA_ARGS__);                                                                      \
            FAIL(w, m_);                                                                                               \
        }                                                                                                              \
    } while (0)

static cca_domain_stats dstats(world *w, int i) {
    cca_domain_stats d;
    cca_status st = cca_get_domain_stats(w->a, i ? w->dom[i] : NULL, &d);
    HOLD(w, st == CCA_OK, "domain %d stats: %s", i, cca_last_error());
    return d;
}

static cca_stats stats(world *w) {
    cca_stats s;
    cca_get_stats(w->a, &s);
    return s;
}

/* Every relation of the header's, after one call. */
static void check_relations(world *w) {
    if (cca_check_invariants(w->a) != CCA_OK)
        FAIL(w, cca_last_error());
    cca_stats s;
    cca_get_stats(w->a, &s);
    size_t reserved = 0, allocated = 0, requested = 0, active = 0, segments = 0, host = 0, cached = 0, asleep = 0;
    for (int i = 0; i < ND; i++) {
        if (!w->used[i])
            continue;
        cca_domain_stats d = dstats(w, i);
        reserved += d.reserved_bytes;
        allocated += d.allocated_bytes;
        requested += d.requested_bytes;
        active += d.active_blocks;
        segments += d.segments;
        host += d.host_bytes;
        asleep += d.asleep != 0;
        HOLD(w,
             d.allocated_bytes_peak >= d.allocated_bytes && d.requested_bytes_peak >= d.requested_bytes &&
                 d.reserved_bytes_peak >= d.reserved_bytes && d.active_blocks_peak >= d.active_blocks,
             "domain %d: a peak below its value", i);
        if (d.asleep) {
            HOLD(w, d.cached_bytes == 0 && d.largest_free_block == 0 && d.fragmentation == 0,
                 "domain %d asleep: cached %zu, largest free %zu", i, d.cached_bytes, d.largest_free_block);
        } else {
            HOLD(w, d.host_bytes == 0, "domain %d awake with %zu host bytes", i, d.host_bytes);
            HOLD(w, d.reserved_bytes >= d.allocated_bytes && d.cached_bytes == d.reserved_bytes - d.allocated_bytes,
                 "domain %d: cached %zu, reserved %zu, allocated %zu", i, d.cached_bytes, d.reserved_bytes,
                 d.allocated_bytes);
            cached += d.cached_bytes;
        }
        HOLD(w, d.largest_free_block <= d.cached_bytes, "domain %d: largest free %zu > cached %zu", i,
             d.largest_free_block, d.cached_bytes);
    }
    HOLD(w, s.reserved_bytes == reserved, "reserved %zu, domains' sum %zu", s.reserved_bytes, reserved);
    HOLD(w, s.allocated_bytes == allocated, "allocated %zu, domains' sum %zu", s.allocated_bytes, allocated);
    HOLD(w, s.requested_bytes == requested, "requested %zu, domains' sum %zu", s.requested_bytes, requested);
    HOLD(w, s.active_blocks == active, "active %zu, domains' sum %zu", s.active_blocks, active);
    HOLD(w, s.segments == segments, "segments %zu, domains' sum %zu", s.segments, segments);
    HOLD(w, s.host_bytes == host, "host bytes %zu, domains' sum %zu", s.host_bytes, host);
    HOLD(w, s.asleep_domains == asleep, "asleep_domains %zu, domains asleep %zu", s.asleep_domains, asleep);
    HOLD(w, s.cached_bytes == cached, "cached %zu, awake domains' sum %zu", s.cached_bytes, cached);
    HOLD(w,
         s.allocated_bytes_peak >= s.allocated_bytes && s.reserved_bytes_peak >= s.reserved_bytes &&
             s.requested_bytes_peak >= s.requested_bytes && s.active_blocks_peak >= s.active_blocks &&
             s.segments_peak >= s.segments,
         "a peak below its value");
    HOLD(w, s.pending_blocks <= s.active_blocks, "pending %zu > active %zu", s.pending_blocks, s.active_blocks);
    HOLD(w, s.largest_free_block <= s.cached_bytes, "largest free %zu > cached %zu", s.largest_free_block,
         s.cached_bytes);
    double frag = s.cached_bytes ? 1.0 - (double)s.largest_free_block / (double)s.cached_bytes : 0.0;
    HOLD(w, fabs(s.fragmentation - frag) < 1e-9, "fragmentation %g, expected %g", s.fragmentation, frag);
    cca_config cfg;
    HOLD(w, cca_get_config(w->a, &cfg) == CCA_OK, "cca_get_config: %s", cca_last_error());
    HOLD(w, !cfg.max_reserved || s.reserved_bytes <= cfg.max_reserved, "reserved %zu above max_reserved %zu",
         s.reserved_bytes, cfg.max_reserved);
    HOLD(w, !cfg.max_reserved || s.reserved_bytes_peak <= cfg.max_reserved, "reserved peak %zu above max_reserved %zu",
         s.reserved_bytes_peak, cfg.max_reserved);
    HOLD(w, s.mapped_bytes <= s.reserved_bytes, "mapped %zu > reserved %zu", s.mapped_bytes, s.reserved_bytes);

    cca_upstream_stats us = tu_upstream_stats(w->u);
    HOLD(w, us.bytes_in_use == s.reserved_bytes, "upstream holds %zu, reserved %zu", us.bytes_in_use, s.reserved_bytes);
    HOLD(w, us.vm_mapped_bytes == s.mapped_bytes, "upstream maps %zu, mapped_bytes %zu", us.vm_mapped_bytes,
         s.mapped_bytes);
    HOLD(w, us.vm_reserved_bytes == s.address_space_bytes, "upstream reserves %zu, address_space_bytes %zu",
         us.vm_reserved_bytes, s.address_space_bytes);
    HOLD(w, us.vm_map_calls == s.vm_maps && us.vm_unmap_calls == s.vm_unmaps,
         "upstream maps/unmaps %llu/%llu, stats %llu/%llu", (unsigned long long)us.vm_map_calls,
         (unsigned long long)us.vm_unmap_calls, (unsigned long long)s.vm_maps, (unsigned long long)s.vm_unmaps);
    /* upstream_allocs counts the maps (ccalloc.h) and the reservations of
     * address space too: at least the upstream's allocs and maps */
    HOLD(w, us.alloc_calls + us.vm_map_calls <= s.upstream_allocs, "upstream allocs + maps %llu, upstream_allocs %llu",
         (unsigned long long)(us.alloc_calls + us.vm_map_calls), (unsigned long long)s.upstream_allocs);
    HOLD(w, us.free_calls + us.vm_unmap_calls <= s.upstream_frees, "upstream frees + unmaps %llu, upstream_frees %llu",
         (unsigned long long)(us.free_calls + us.vm_unmap_calls), (unsigned long long)s.upstream_frees);
    HOLD(w, us.host_bytes_in_use == s.host_bytes + w->host_leaked,
         "upstream host memory %zu, host_bytes %zu + %zu a refused host_free left", us.host_bytes_in_use, s.host_bytes,
         w->host_leaked);
}

/* ---- the calls ---- */

static void drop_block(world *w, size_t i) {
    w->b[i] = w->b[--w->nb];
}

/* After a call that may have released live blocks (FORCE): keep the ones
 * still live, each in the domain it was in. */
static void resync_blocks(world *w) {
    for (size_t i = 0; i < w->nb;) {
        cca_domain *d = (cca_domain *)1;
        cca_status st = cca_domain_of(w->a, w->b[i].p, &d);
        if (st == CCA_ERR_INVALID_POINTER) {
            drop_block(w, i);
            continue;
        }
        HOLD(w, st == CCA_OK, "domain_of a live block: %s", cca_last_error());
        HOLD(w, d == (w->b[i].dom ? w->dom[w->b[i].dom] : NULL), "a block changed domain");
        i++;
    }
}

static int pick_domain(world *w) {
    for (int tries = 0; tries < 8; tries++) {
        int i = (int)rnd(w, ND);
        if (w->used[i])
            return i;
    }
    return 0;
}

static size_t pick_size(world *w) {
    switch (rnd(w, 4)) {
    case 0: return 1 + rnd(w, 4096);
    case 1: return 1 + rnd(w, 1 * MiB);
    case 2: return 1 * MiB + rnd(w, 3 * MiB);
    default: return rnd(w, 8) == 0 ? 12 * MiB + rnd(w, 8 * MiB) : 100 + rnd(w, 200 * KiB);
    }
}

static void do_alloc(world *w) {
    if (w->nb == MAXB)
        return;
    int di = pick_domain(w);
    size_t size = pick_size(w);
    cca_stream s = (cca_stream)(uintptr_t)rnd(w, 3);
    cca_stats before;
    cca_get_stats(w->a, &before);
    void *p = (void *)1;
    w->what = "alloc";
    cca_status st = cca_alloc_in(w->a, di ? w->dom[di] : NULL, size, s, &p);
    cca_stats after;
    cca_get_stats(w->a, &after);
    HOLD(w, after.ooms == before.ooms + (st == CCA_ERR_OUT_OF_MEMORY), "ooms %llu -> %llu after %s",
         (unsigned long long)before.ooms, (unsigned long long)after.ooms, cca_status_string(st));
    HOLD(w, after.alloc_calls == before.alloc_calls + (st == CCA_OK), "alloc_calls %llu -> %llu after %s",
         (unsigned long long)before.alloc_calls, (unsigned long long)after.alloc_calls, cca_status_string(st));
    if (st != CCA_OK) {
        HOLD(w, p == NULL, "a failed alloc (%s) left *out %p", cca_status_string(st), p);
        /* pending blocks may complete (the retry's synchronize); live ones stay */
        HOLD(w, after.active_blocks - after.pending_blocks == before.active_blocks - before.pending_blocks,
             "a failed alloc (%s) changed the live blocks: %zu live, %zu pending -> %zu live, %zu pending",
             cca_status_string(st), before.active_blocks - before.pending_blocks, before.pending_blocks,
             after.active_blocks - after.pending_blocks, after.pending_blocks);
        return;
    }
    HOLD(w, p != NULL, "alloc OK with NULL");
    w->b[w->nb++] = (blk){p, di};
}

static void do_free(world *w) {
    if (!w->nb)
        return;
    size_t i = rnd(w, w->nb);
    cca_stats before;
    cca_get_stats(w->a, &before);
    w->what = "free";
    cca_status st = cca_free(w->a, w->b[i].p);
    cca_stats after;
    cca_get_stats(w->a, &after);
    HOLD(w, st != CCA_ERR_INVALID_POINTER, "free of a live block: %s", cca_last_error());
    /* a refused synchronize still consumes the pointer (ccalloc.h) */
    drop_block(w, i);
    HOLD(w, after.free_calls == before.free_calls + (st == CCA_OK), "free_calls %llu -> %llu after %s",
         (unsigned long long)before.free_calls, (unsigned long long)after.free_calls, cca_status_string(st));
}

static void do_record(world *w) {
    if (!w->nb)
        return;
    w->what = "record_stream";
    cca_status st = cca_record_stream(w->a, w->b[rnd(w, w->nb)].p, (cca_stream)(uintptr_t)rnd(w, 3));
    HOLD(w, st == CCA_OK, "record_stream: %s", cca_last_error());
}

static void do_domain_create(world *w) {
    for (int i = 1; i < ND; i++)
        if (!w->used[i]) {
            w->what = "domain_create";
            cca_domain *d = NULL;
            cca_status st = cca_domain_create(w->a, "m", &d);
            if (w->greedy) {
                HOLD(w, st == CCA_ERR_INVALID_ARGUMENT && d == NULL, "domain_create under greedy: %s",
                     cca_status_string(st));
                return;
            }
            HOLD(w, st == CCA_OK, "domain_create: %s", cca_last_error());
            w->dom[i] = d;
            w->used[i] = true;
            return;
        }
}

static void do_domain_release(world *w, bool destroy) {
    int i = pick_domain(w);
    if (destroy && i == 0)
        return;
    unsigned flags = rnd(w, 3) == 0 ? CCA_DOMAIN_FORCE : 0;
    cca_live_block leaks[4];
    cca_domain_report r = {.leaks = leaks, .leaks_cap = 4};
    w->what = destroy ? "domain_destroy" : "domain_release";
    cca_domain_stats dbefore = dstats(w, i);
    cca_stats before = stats(w);
    cca_status st = destroy ? cca_domain_destroy(w->a, w->dom[i], flags, &r)
                            : cca_domain_release(w->a, i ? w->dom[i] : NULL, flags, &r);
    cca_stats after = stats(w);
    if (st == CCA_OK || st == CCA_ERR_UPSTREAM) {
        HOLD(w,
             before.reserved_bytes - after.reserved_bytes == r.bytes_released &&
                 before.segments - after.segments == r.segments_released,
             "domain %d report: %zu bytes, %zu segments released; reserved %zu -> %zu, segments %zu -> %zu", i,
             r.bytes_released, r.segments_released, before.reserved_bytes, after.reserved_bytes, before.segments,
             after.segments);
        HOLD(w, r.live_blocks <= dbefore.active_blocks, "domain %d report: %zu live blocks of %zu", i, r.live_blocks,
             dbefore.active_blocks);
    }
    if (destroy && st == CCA_OK) {
        w->used[i] = false;
        w->dom[i] = NULL;
    }
    resync_blocks(w);
    if (st == CCA_OK && !destroy) { /* released whole: nothing reserved, nothing live */
        cca_domain_stats d = dstats(w, i);
        HOLD(w, r.bytes_still_reserved == 0 && d.reserved_bytes == 0 && d.active_blocks == 0 && d.segments == 0,
             "domain %d released: report %zu still reserved; stats %zu reserved, %zu blocks, %zu segments", i,
             r.bytes_still_reserved, d.reserved_bytes, d.active_blocks, d.segments);
    }
}

static void do_reserve(world *w) {
    int i = pick_domain(w);
    w->what = "domain_reserve";
    (void)cca_domain_reserve(w->a, i ? w->dom[i] : NULL, 512 * KiB + rnd(w, 6 * MiB));
}

/* A sleep or wake that succeeded: its report against the stats' change.
 * A wake may first release cached memory (unmaps, never maps), so its
 * mapped bytes are the pages mapped since; a sleep only unmaps d's. */
static void check_sleep_report(world *w, cca_status st, const cca_sleep_report *r, const cca_stats *before, bool wake) {
    if (st != CCA_OK)
        return;
    cca_stats after = stats(w);
    uint64_t page = after.page_size ? after.page_size : 1;
    if (wake) {
        HOLD(w, (after.pages_mapped - before->pages_mapped) * page == r->bytes_mapped,
             "wake: %llu pages mapped, report mapped %zu",
             (unsigned long long)(after.pages_mapped - before->pages_mapped), r->bytes_mapped);
        HOLD(w, before->host_bytes == after.host_bytes + r->host_bytes, "wake: host %zu -> %zu, report %zu",
             before->host_bytes, after.host_bytes, r->host_bytes);
    } else {
        HOLD(w, before->reserved_bytes == after.reserved_bytes + r->bytes_unmapped,
             "sleep: reserved %zu -> %zu, report unmapped %zu", before->reserved_bytes, after.reserved_bytes,
             r->bytes_unmapped);
        HOLD(w, (after.pages_unmapped - before->pages_unmapped) * page == r->bytes_unmapped,
             "sleep: %llu pages unmapped, report unmapped %zu",
             (unsigned long long)(after.pages_unmapped - before->pages_unmapped), r->bytes_unmapped);
        HOLD(w, after.host_bytes == before->host_bytes + r->host_bytes, "sleep: host %zu -> %zu, report %zu",
             before->host_bytes, after.host_bytes, r->host_bytes);
    }
}

static void check_asleep(world *w, int i, cca_status st, bool asleep) {
    if (st != CCA_OK)
        return;
    cca_domain_stats d = dstats(w, i);
    HOLD(w, (d.asleep != 0) == asleep, "domain %d: asleep %d after a %s that succeeded", i, d.asleep,
         asleep ? "sleep" : "wake");
    HOLD(w, asleep ? d.reserved_bytes == 0 : d.host_bytes == 0, "domain %d: %zu reserved, %zu host bytes", i,
         d.reserved_bytes, d.host_bytes);
}

static void do_sleep(world *w) {
    cca_sleep_report r;
    unsigned flags = rnd(w, 3) == 0 ? CCA_SLEEP_DISCARD : 0;
    cca_stats before = stats(w);
    cca_status st;
    if (rnd(w, 4) == 0) {
        w->what = "cca_sleep";
        st = cca_sleep(w->a, flags, &r);
        for (int i = 0; i < ND; i++)
            if (w->used[i])
                check_asleep(w, i, st, true);
    } else {
        int i = pick_domain(w);
        w->what = "domain_sleep";
        st = cca_domain_sleep(w->a, i ? w->dom[i] : NULL, flags, &r);
        check_asleep(w, i, st, true);
    }
    check_sleep_report(w, st, &r, &before, false);
}

static void do_wake(world *w) {
    cca_sleep_report r;
    cca_stats before = stats(w);
    cca_status st;
    if (rnd(w, 4) == 0) {
        w->what = "cca_wake";
        st = cca_wake(w->a, &r);
        for (int i = 0; i < ND; i++)
            if (w->used[i])
                check_asleep(w, i, st, false);
    } else {
        int i = pick_domain(w);
        w->what = "domain_wake";
        st = cca_domain_wake(w->a, i ? w->dom[i] : NULL, &r);
        check_asleep(w, i, st, false);
    }
    check_sleep_report(w, st, &r, &before, true);
}

/* cca_reset_peak_stats: every peak is its value now, the domains' too */
static void do_reset_peaks(world *w) {
    w->what = "reset_peak_stats";
    cca_reset_peak_stats(w->a);
    cca_stats s = stats(w);
    HOLD(w,
         s.allocated_bytes_peak == s.allocated_bytes && s.requested_bytes_peak == s.requested_bytes &&
             s.reserved_bytes_peak == s.reserved_bytes && s.active_blocks_peak == s.active_blocks &&
             s.segments_peak == s.segments,
         "a peak not reset");
    for (int i = 0; i < ND; i++) {
        if (!w->used[i])
            continue;
        cca_domain_stats d = dstats(w, i);
        HOLD(w,
             d.allocated_bytes_peak == d.allocated_bytes && d.requested_bytes_peak == d.requested_bytes &&
                 d.reserved_bytes_peak == d.reserved_bytes && d.active_blocks_peak == d.active_blocks,
             "domain %d: a peak not reset", i);
    }
}

static void do_trim(world *w) {
    cca_release_report r;
    memset(&r, 0xa5, sizeof r);
    bool empty = rnd(w, 3) == 0;
    w->what = empty ? "empty_cache" : "trim";
    cca_stats before = stats(w);
    size_t keep = empty ? 0 : rnd(w, 16 * MiB);
    cca_status st = empty ? cca_empty_cache(w->a, &r) : cca_trim(w->a, keep, &r);
    (void)st;
    cca_stats s = stats(w);
    uint64_t page = s.page_size ? s.page_size : 1;
    HOLD(w, before.reserved_bytes - s.reserved_bytes == r.bytes_released, "report: %zu released; reserved %zu -> %zu",
         r.bytes_released, before.reserved_bytes, s.reserved_bytes);
    HOLD(w, s.pages_unmapped - before.pages_unmapped == r.pages_unmapped && r.pages_unmapped * page == r.bytes_unmapped,
         "report: %zu pages (%zu bytes) unmapped; stats %llu pages", r.pages_unmapped, r.bytes_unmapped,
         (unsigned long long)(s.pages_unmapped - before.pages_unmapped));
    /* "until reserved <= keep_bytes or nothing free is left": what stays
     * cached then is pinned (classic: in segments with live blocks;
     * expandable: sharing a page with one), none kept for keep_bytes */
    if (st == CCA_OK && s.reserved_bytes > keep && s.asleep_domains == 0)
        HOLD(w, r.segments_kept == 0 && r.free_bytes_pinned == s.cached_bytes,
             "trim to %zu left %zu reserved: %zu cached, %zu of them pinned, %zu segments kept", keep, s.reserved_bytes,
             s.cached_bytes, r.free_bytes_pinned, r.segments_kept);
    HOLD(w, r.free_bytes_trapped <= s.cached_bytes, "report: %zu trapped, %zu cached", r.free_bytes_trapped,
         s.cached_bytes);
    HOLD(w, before.segments - s.segments == r.segments_released, "report: %zu segments released; segments %zu -> %zu",
         r.segments_released, before.segments, s.segments);
    HOLD(w, r.bytes_still_reserved == s.reserved_bytes, "report: %zu still reserved, stats %zu", r.bytes_still_reserved,
         s.reserved_bytes);
    HOLD(w, r.asleep_domains == s.asleep_domains && r.host_bytes == s.host_bytes,
         "report: %zu asleep, %zu host bytes; stats %zu, %zu", r.asleep_domains, r.host_bytes, s.asleep_domains,
         s.host_bytes);
}

/* A fault for this step: the k-th next call of a random kind, once or
 * sticky; off again after the call. */
static void arm_fault(world *w) {
    tu_fault_kind k = (tu_fault_kind)rnd(w, TU_FAULT_KINDS);
    w->f.fail_at[k] = w->f.calls[k] + 1 + (rnd(w, 2) ? 0 : rnd(w, 3));
    w->f.sticky[k] = rnd(w, 2) == 0;
}

static void one_step(world *w) {
    bool faulty = rnd(w, 3) == 0;
    if (faulty)
        arm_fault(w);
    uint64_t host_free_fails = w->f.calls[TU_FAULT_HOST_FREE] - w->f.ok[TU_FAULT_HOST_FREE];
    switch (rnd(w, 20)) {
    case 0:
    case 1:
    case 2:
    case 3:
    case 4:
    case 5:
    case 6: do_alloc(w); break;
    case 7:
    case 8:
    case 9:
    case 10: do_free(w); break;
    case 11: do_record(w); break;
    case 12: do_domain_create(w); break;
    case 13: do_domain_release(w, rnd(w, 2) == 0); break;
    case 14: do_reserve(w); break;
    case 15: do_sleep(w); break;
    case 16:
    case 17: do_wake(w); break;
    case 18: do_trim(w); break;
    default: do_reset_peaks(w); break;
    }
    tu_faulty_faults_off(&w->f);
    /* a refused host_free leaves its bytes with the upstream for good */
    if (w->f.calls[TU_FAULT_HOST_FREE] - w->f.ok[TU_FAULT_HOST_FREE] > host_free_fails) {
        cca_stats s;
        cca_get_stats(w->a, &s);
        size_t held = tu_upstream_stats(w->u).host_bytes_in_use;
        HOLD(w, held >= s.host_bytes + w->host_leaked, "a refused host_free: upstream host memory %zu, host_bytes %zu",
             held, s.host_bytes);
        w->host_leaked = held - s.host_bytes;
    }
    check_relations(w);
    /* events: held, or completed up to now */
    if (rnd(w, 4) == 0)
        w->f.hold_events = !w->f.hold_events;
    if (rnd(w, 3) == 0)
        w->f.events_done = w->f.events_recorded;
}

static void run(const char *conf, int backing, uint64_t seed) {
    world *w = calloc(1, sizeof *w);
    cr_assert_not_null(w);
    w->conf = conf;
    w->seed = w->rng = seed;
    w->greedy = strstr(conf, "greedy") != NULL;
    cca_host_options o = {.capacity = 96 * MiB, .vm_granularity = PG, .vm_backing = backing};
    cr_assert_eq(cca_upstream_host_create_with(&o, &w->dev), CCA_OK, "%s", cca_last_error());
    w->u = tu_faulty_create_streams(&w->f, w->dev, "rel", true);
    w->a = tu_allocator(w->u, conf);
    w->used[0] = true;
    for (w->step = 0; w->step < STEPS; w->step++)
        one_step(w);
    /* the end: everything woken, freed, destroyed */
    w->what = "the end";
    w->f.hold_events = false;
    w->f.events_done = w->f.events_recorded;
    while (w->nb) { /* a sleeping domain's blocks too (ccalloc.h) */
        HOLD(w, cca_free(w->a, w->b[0].p) == CCA_OK, "final free: %s", cca_last_error());
        drop_block(w, 0);
    }
    check_relations(w);
    cca_status st = cca_wake(w->a, NULL);
    HOLD(w, st == CCA_OK, "final wake: %s", cca_last_error());
    check_relations(w);
    for (int i = 1; i < ND; i++)
        if (w->used[i]) {
            HOLD(w, cca_domain_destroy(w->a, w->dom[i], 0, NULL) == CCA_OK, "final domain_destroy: %s",
                 cca_last_error());
            w->used[i] = false;
        }
    check_relations(w);
    HOLD(w, cca_empty_cache(w->a, NULL) == CCA_OK, "final empty_cache: %s", cca_last_error());
    check_relations(w);
    HOLD(w, cca_destroy(w->a) == CCA_OK, "destroy: %s", cca_last_error());
    cca_upstream_stats us = tu_upstream_stats(w->u);
    HOLD(w, us.bytes_in_use == 0 && us.vm_reserved_bytes == 0 && us.allocations == 0,
         "after destroy the upstream holds %zu bytes, %zu of address space, %zu allocations", us.bytes_in_use,
         us.vm_reserved_bytes, us.allocations);
    HOLD(w, us.host_bytes_in_use == w->host_leaked, "after destroy %zu host bytes, %zu left by refused host_free",
         us.host_bytes_in_use, w->host_leaked);
    cca_upstream_destroy(w->u);
    cca_upstream_destroy(w->dev);
    free(w);
}

static const struct {
    const char *conf;
    int backing;
} configs[] = {
    {"log_oom:0", CCA_VM_WHOLE_MAPS},
    {"log_oom:0,expandable_ahead:0", CCA_VM_PAGES},
    {"log_oom:0,hold_peak:1,max_reserved:40M", CCA_VM_WHOLE_MAPS},
    {"log_oom:0,max_reserved:24M,expandable_ahead:0.5", CCA_VM_PAGES},
    {"log_oom:0,expandable:0", CCA_VM_WHOLE_MAPS},
    {"log_oom:0,expandable:0,hold_peak:1,max_reserved:48M", CCA_VM_WHOLE_MAPS},
    {"log_oom:0,policy:greedy,greedy_bytes:32M", CCA_VM_WHOLE_MAPS},
    {"log_oom:0,policy:greedy,greedy_bytes:32M,expandable:0", CCA_VM_WHOLE_MAPS},
    {"log_oom:0,policy:greedy,greedy_bytes:64M,max_reserved:20M", CCA_VM_PAGES},
    {"log_oom:0,expandable:0,max_reserved:20M,small_segment:1M,small_max:64K", CCA_VM_WHOLE_MAPS},
};

Test(random_relations, every_documented_relation_after_every_call, .timeout = 600) {
    uint64_t seeds[] = {1, 2, 3, 0, 0};
    size_t nseeds = sizeof seeds / sizeof seeds[0];
    seeds[nseeds - 1] = (uint64_t)time(NULL);
    const char *only = getenv("CCA_RANDOM_SEED");
    if (only) {
        seeds[0] = strtoull(only, NULL, 10);
        nseeds = 1;
    }
    for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++)
        for (size_t i = 0; i < nseeds; i++) {
            if (seeds[i] == 0)
                continue;
            fprintf(stderr, "test_random_relations: %s, seed %llu (CCA_RANDOM_SEED=%llu replays it)\n", configs[c].conf,
                    (unsigned long long)seeds[i], (unsigned long long)seeds[i]);
            run(configs[c].conf, configs[c].backing, seeds[i]);
        }
}
