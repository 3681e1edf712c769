/*
 * test_random_relations.c — allocator/src/observe/stats.c, sleep.c, domain.c: the documented
 * relations between the allocator's stats, its domains' stats, its
 * reports, its JSON writers and the upstream's own counts, checked after
 * EVERY public call of seeded random sequences that mix every feature at
 * once.
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
 *     counts the domains that say asleep; the domains' alloc calls,
 *     upstream allocs and frees at most the allocator's (a destroyed
 *     domain's stay there);
 *   - each awake domain's cached bytes are its reserved minus allocated, an
 *     asleep one's 0 (its largest free block and fragmentation too), and the
 *     allocator's cached bytes are their sum, its largest free block their
 *     largest;
 *   - requested <= allocated, both 0 exactly when no block is active
 *     (allocator and domains); peaks at least the current values;
 *   - largest free block <= cached bytes, fragmentation as defined
 *     (allocator and awake domains); cached bytes lie in cached blocks;
 *     peak_holds 0 without hold_peak;
 *   - classic segments: every expandable field 0, vm_backing CCA_VM_PAGES;
 *     expandable: every segment one, the page size the device's granule,
 *     vm_backing the device's, mapped == reserved <= address space, and
 *     (pages mapped - pages unmapped) x page == mapped;
 *   - the upstream (a wrapper only this allocator uses) holds exactly the
 *     reserved bytes, its mapped bytes are mapped_bytes, its reserved
 *     address space address_space_bytes, its maps and unmaps vm_maps and
 *     vm_unmaps, and its host memory the allocator's host_bytes (plus what
 *     a refused host_free left with it, documented);
 *   - the writers (check_writers): cca_write_snapshot_json's "stats" and
 *     cca_stats_write_json are every field of cca_get_stats, its "domains"
 *     and cca_domain_stats_write_json every field of each domain's stats
 *     (the default first, then in creation order), its segments add up to
 *     the segments, reserved, address space, mapped, active, pending,
 *     allocated and requested bytes and free blocks of the stats, and per
 *     domain to its reserved bytes and segments. Their cost is the rest of
 *     the suite's: after every call of one fixed seed per configuration,
 *     in turn, and of a CCA_RANDOM_SEED replay.
 * After each call, what its report says:
 *   - a trim's (check_release_report, and do_trim) agrees with the stats'
 *     change (bytes, segments and pages released) and with the stats after
 *     it: still reserved, asleep domains and host bytes; every segment
 *     kept or pinned; the live bytes pinning are the allocated bytes; the
 *     free bytes pinned at most the cached bytes plus what sleeping domains
 *     still reserve, exactly the cached bytes when nothing is kept or
 *     asleep; trapped bytes within the pinned and the cached ones, none
 *     with classic segments (nor pages unmapped); a trim that stops above
 *     its keep_bytes leaves only pinned free bytes cached, an empty-cache
 *     that succeeds with no block active nothing reserved;
 *   - a domain release's (check_domain_report), whatever its status: bytes
 *     and segments released are the stats' change (OK, or the upstream
 *     refused part), what is still reserved is the domain's (0 destroyed),
 *     live blocks at most the domain's, leaks_written min(live, cap), each
 *     leak one of its blocks with its bytes, their sum live_bytes when all
 *     are listed; refused for live blocks, nothing released; released
 *     whole, nothing reserved, nothing live;
 *   - a sleep's and a wake's (check_sleep_report, check_sleep_blocks) with
 *     the pages they unmapped or mapped and the host bytes they took or
 *     gave back, the domain asleep (nothing reserved) or awake (no host
 *     bytes); a sleep's blocks the live blocks of the domains it put to
 *     sleep, a wake's those recorded then (freed since or not), the bytes
 *     copied the live blocks' requested bytes rounded up to
 *     CCA_GRANULARITY (none for a sleep with DISCARD, nor for the wake
 *     after one); a sleep's exactly the host bytes it took, a wake's at
 *     most those it gave back;
 *   - the counters of calls never fall; alloc_calls and ooms move only in
 *     an alloc, free_calls only in a free, alloc_retries only in an alloc
 *     or a footprint reserve, by one at most (check_counters);
 *   - after cca_reset_peak_stats every peak is its value; a failed alloc
 *     leaves *out NULL and no live block changes; ooms rises by one
 *     exactly when an alloc says CCA_ERR_OUT_OF_MEMORY, alloc_calls when
 *     one succeeds, free_calls when a free does.
 * Each relation was seen to fail on a mutated allocator.
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
#include <stddef.h>
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
    size_t size; /* requested */
    int dom;
} blk;

typedef struct world {
    const char *conf;
    bool greedy, classic, hold;
    bool writers; /* check_writers after every call too */
    int backing;
    uint64_t seed, rng;
    cca_upstream *dev, *u;
    tu_faulty f;
    cca_allocator *a;
    cca_domain *dom[ND]; /* NULL past slot 0: no domain there */
    bool used[ND];
    bool discarded[ND]; /* asleep with CCA_SLEEP_DISCARD: its wake copies nothing */
    size_t recorded[ND]; /* asleep: its live blocks when it fell asleep (the wake's count) */
    uint64_t born[ND]; /* creation order: the writers list domains in it */
    uint64_t births;
    cca_domain_stats ds[ND]; /* check_relations': the used domains' stats */
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

/* ccalloc.h: a call that succeeds leaves the thread's message as it was, a
 * refusal met inside it and recovered from included. KEEPS(w, call): the
 * mark (alloc_test_util.h) set, the call made (its status), and the mark
 * found again when it returned CCA_OK. */
#define KEEPS(w, call)                                                                                                 \
    ({                                                                                                                 \
        cca_set_error(CCA_ERR_IO, TU_MARK);                                                                            \
        cca_status keeps_ = (call);                                                                                    \
        HOLD((w), keeps_ != CCA_OK || strcmp(cca_last_error(), TU_MARK) == 0, "%s succeeded but left '%s'", (w)->what, \
             cca_last_error());                                                                                        \
        keeps_;                                                                                                        \
    })

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

/* requested <= allocated (rounded sizes), both 0 exactly when no block is
 * live; dom -1: the allocator's. */
static void check_live_bytes(world *w, int dom, size_t requested, size_t allocated, size_t active) {
    HOLD(w, requested <= allocated && (active == 0) == (allocated == 0),
         "domain %d: requested %zu, allocated %zu, %zu active blocks", dom, requested, allocated, active);
}

/* The expandable-segment fields: all 0 with classic ones (vm_backing
 * CCA_VM_PAGES: nothing is mapped); with expandable ones every segment is
 * one, what is reserved is what is mapped, and that is the pages mapped
 * less those unmapped. */
static void check_kind_stats(world *w, const cca_stats *s) {
    if (w->classic) {
        HOLD(w,
             s->page_size == 0 && s->expandable_segments == 0 && s->address_space_bytes == 0 && s->mapped_bytes == 0 &&
                 s->vm_maps == 0 && s->vm_unmaps == 0 && s->pages_mapped == 0 && s->pages_unmapped == 0 &&
                 s->vm_backing == CCA_VM_PAGES,
             "classic segments with expandable fields: page %zu, %zu segments, %zu mapped, backing %d", s->page_size,
             s->expandable_segments, s->mapped_bytes, s->vm_backing);
        return;
    }
    HOLD(w, s->page_size == PG && s->vm_backing == w->backing && s->expandable_segments == s->segments,
         "expandable: page %zu, backing %d, %zu of %zu segments", s->page_size, s->vm_backing, s->expandable_segments,
         s->segments);
    HOLD(w, s->mapped_bytes == s->reserved_bytes && s->mapped_bytes <= s->address_space_bytes,
         "expandable: mapped %zu, reserved %zu, address space %zu", s->mapped_bytes, s->reserved_bytes,
         s->address_space_bytes);
    HOLD(w, s->pages_mapped >= s->pages_unmapped && (s->pages_mapped - s->pages_unmapped) * PG == s->mapped_bytes,
         "%llu pages mapped, %llu unmapped, %zu bytes mapped", (unsigned long long)s->pages_mapped,
         (unsigned long long)s->pages_unmapped, s->mapped_bytes);
}

/* ---- the writers: their figures are the stats' at the same moment ---- */

/* A field of cca_stats or cca_domain_stats as the JSON writers name it. */
typedef enum { F_SIZE, F_U64, F_DOUBLE, F_FLAG, F_BACKING } ftype;
typedef struct field {
    const char *name;
    size_t off;
    ftype type;
} field;

#define SF(f, t)                                                                                                       \
    { #f, offsetof(cca_stats, f), t }
static const field STATS_FIELDS[] = {
    SF(allocated_bytes, F_SIZE),
    SF(allocated_bytes_peak, F_SIZE),
    SF(requested_bytes, F_SIZE),
    SF(requested_bytes_peak, F_SIZE),
    SF(reserved_bytes, F_SIZE),
    SF(reserved_bytes_peak, F_SIZE),
    SF(active_blocks, F_SIZE),
    SF(active_blocks_peak, F_SIZE),
    SF(pending_blocks, F_SIZE),
    SF(cached_blocks, F_SIZE),
    SF(cached_bytes, F_SIZE),
    SF(segments, F_SIZE),
    SF(segments_peak, F_SIZE),
    SF(largest_free_block, F_SIZE),
    SF(alloc_calls, F_U64),
    SF(free_calls, F_U64),
    SF(upstream_allocs, F_U64),
    SF(upstream_frees, F_U64),
    SF(alloc_retries, F_U64),
    SF(ooms, F_U64),
    SF(splits, F_U64),
    SF(merges, F_U64),
    SF(fragmentation, F_DOUBLE),
    SF(page_size, F_SIZE),
    SF(expandable_segments, F_SIZE),
    SF(address_space_bytes, F_SIZE),
    SF(mapped_bytes, F_SIZE),
    SF(vm_maps, F_U64),
    SF(vm_unmaps, F_U64),
    SF(pages_mapped, F_U64),
    SF(pages_unmapped, F_U64),
    SF(vm_backing, F_BACKING),
    SF(peak_holds, F_U64),
    SF(asleep_domains, F_SIZE),
    SF(host_bytes, F_SIZE),
};
#undef SF
#define DF(f, t)                                                                                                       \
    { #f, offsetof(cca_domain_stats, f), t }
static const field DOMAIN_FIELDS[] = {
    DF(allocated_bytes, F_SIZE), DF(allocated_bytes_peak, F_SIZE),
    DF(requested_bytes, F_SIZE), DF(requested_bytes_peak, F_SIZE),
    DF(reserved_bytes, F_SIZE),  DF(reserved_bytes_peak, F_SIZE),
    DF(active_blocks, F_SIZE),   DF(active_blocks_peak, F_SIZE),
    DF(cached_bytes, F_SIZE),    DF(largest_free_block, F_SIZE),
    DF(segments, F_SIZE),        DF(alloc_calls, F_U64),
    DF(upstream_allocs, F_U64),  DF(upstream_frees, F_U64),
    DF(fragmentation, F_DOUBLE), DF(asleep, F_FLAG),
    DF(host_bytes, F_SIZE),
};
#undef DF

/* The writers' JSON read without a parser (one per call would cost more
 * than the rest of the suite): their layout is fixed, objects of the
 * stats and the domains are flat, so a key's value is found by name
 * between an object's braces. The value after "key": (or "key": ) in
 * [from, end), or NULL. */
static const char *jval(const char *from, const char *end, const char *key) {
    size_t n = strlen(key);
    for (const char *p = from; p < end && (p = memchr(p, '"', (size_t)(end - p))) != NULL; p++)
        if (p + n + 2 < end && p[n + 1] == '"' && p[n + 2] == ':' && strncmp(p + 1, key, n) == 0)
            return p + n + 3 + (p[n + 3] == ' ');
    return NULL;
}

static bool jsize(const char *from, const char *end, const char *key, size_t *out) {
    const char *v = jval(from, end, key);
    if (!v || *v < '0' || *v > '9')
        return false;
    *out = (size_t)strtoull(v, NULL, 10);
    return true;
}

/* Every field of the flat object [o, end) against the struct at s, in
 * the table's order (the writers'). */
static void check_fields(world *w, const char *writer, const char *o, const char *end, const void *s, const field *fs,
                         size_t n) {
    for (size_t i = 0; i < n; i++) {
        const char *v = jval(o, end, fs[i].name), *at = (const char *)s + fs[i].off;
        o = v ? v : o;
        bool same = v != NULL;
        char *stop = NULL;
        switch (fs[i].type) {
        case F_SIZE: same = same && strtoull(v, &stop, 10) == *(const size_t *)at; break;
        case F_U64: same = same && strtoull(v, &stop, 10) == *(const uint64_t *)at; break;
        case F_DOUBLE: same = same && fabs(strtod(v, &stop) - *(const double *)at) < 1e-6; break;
        case F_FLAG: same = same && strncmp(v, *(const int *)at ? "true" : "false", 4) == 0; break;
        case F_BACKING:
            same = same && strncmp(v, *(const int *)at == CCA_VM_WHOLE_MAPS ? "\"whole_maps\"" : "\"pages\"", 7) == 0;
            break;
        }
        HOLD(w, same && (!stop || stop > v), "%s: \"%s\" is not the stats' value (%.40s)", writer, fs[i].name,
             v ? v : "missing, or out of order");
    }
}

/* A domains array from `[`: the default domain, then the others in
 * creation order, each with its stats; past the array's `]`. */
static const char *check_domain_array(world *w, const char *writer, const char *p, const char *end) {
    int order[ND], n = 0;
    for (int i = 0; i < ND; i++)
        if (w->used[i]) {
            int k = n++;
            for (; k > 0 && w->born[order[k - 1]] > w->born[i]; k--)
                order[k] = order[k - 1];
            order[k] = i;
        }
    HOLD(w, p && *p == '[', "%s: no domains array", writer);
    for (int k = 0; k < n; k++) {
        const char *o = memchr(p, '{', (size_t)(end - p)), *c = o ? memchr(o, '}', (size_t)(end - o)) : NULL;
        HOLD(w, c != NULL, "%s: %d domains listed, the test holds %d", writer, k, n);
        const cca_domain_stats *d = &w->ds[order[k]];
        const char *name = jval(o, c, "name");
        size_t len = strlen(d->name);
        HOLD(w, name && *name == '"' && strncmp(name + 1, d->name, len) == 0 && name[len + 1] == '"',
             "%s: domain %d is not '%s'", writer, k, d->name);
        check_fields(w, writer, o, c, d, DOMAIN_FIELDS, sizeof DOMAIN_FIELDS / sizeof DOMAIN_FIELDS[0]);
        p = c + 1;
    }
    HOLD(w, *p == ']', "%s: more domains than the test holds %d", writer, n);
    return p + 1;
}

/* The snapshot's segments from `[` add up to the stats: segments, reserved
 * (a classic segment's size, an expandable one's mapped bytes), address
 * space, mapped bytes, live and pending blocks, their bytes, the live ones'
 * requested bytes, free blocks; and per domain its reserved bytes and
 * segments. Each segment: address, size, domain, domain_index, ...,
 * [mapped_bytes,] blocks [{offset, size, state, requested}, ...]. */
static void check_snapshot_segments(world *w, const char *p, const char *end, const cca_stats *s) {
    size_t n = 0, reserved = 0, space = 0, mapped = 0, allocated = 0, requested = 0, active = 0, pending = 0, nfree = 0;
    size_t dres[ND] = {0}, dsegs[ND] = {0};
    const char *g;
    while ((g = jval(p, end, "address")) != NULL) {
        const char *blocks = jval(g, end, "blocks"), *close = blocks ? memchr(blocks, ']', (size_t)(end - blocks)) : 0;
        size_t size = 0, held = 0, di = ND, bs = 0, rq = 0;
        HOLD(w, close && jsize(g, blocks, "size", &size) && jsize(g, blocks, "domain_index", &di) && di < ND,
             "snapshot: segment %zu unreadable (%.60s)", n, g);
        bool expandable = jsize(g, blocks, "mapped_bytes", &held);
        held = expandable ? held : size;
        n++;
        reserved += held;
        space += expandable ? size : 0;
        mapped += expandable ? held : 0;
        dres[di] += held;
        dsegs[di]++;
        for (const char *b = jval(blocks, close, "offset"); b; b = jval(b, close, "offset")) {
            const char *state = jval(b, close, "state");
            HOLD(w, state && jsize(b, close, "size", &bs) && jsize(b, close, "requested", &rq), "snapshot: a block");
            if (strncmp(state, "\"free\"", 6) == 0) {
                nfree++;
                continue;
            }
            active++;
            allocated += bs;
            pending += strncmp(state, "\"pending\"", 9) == 0;
            requested += strncmp(state, "\"live\"", 6) == 0 ? rq : 0;
        }
        p = close;
    }
    HOLD(w,
         n == s->segments && reserved == s->reserved_bytes && space == s->address_space_bytes &&
             mapped == s->mapped_bytes,
         "snapshot: %zu segments, %zu reserved, %zu address space, %zu mapped; stats %zu, %zu, %zu, %zu", n, reserved,
         space, mapped, s->segments, s->reserved_bytes, s->address_space_bytes, s->mapped_bytes);
    HOLD(w,
         active == s->active_blocks && pending == s->pending_blocks && allocated == s->allocated_bytes &&
             requested == s->requested_bytes && nfree == s->cached_blocks,
         "snapshot: %zu active, %zu pending, %zu allocated, %zu requested, %zu free blocks; stats %zu, %zu, %zu, %zu, "
         "%zu",
         active, pending, allocated, requested, nfree, s->active_blocks, s->pending_blocks, s->allocated_bytes,
         s->requested_bytes, s->cached_blocks);
    for (int i = 0; i < ND; i++)
        if (w->used[i]) {
            int pos = 0; /* its index: the domains born before it, the default first */
            for (int j = 0; j < ND; j++)
                pos += w->used[j] && j != i && (j == 0 || (i != 0 && w->born[j] < w->born[i]));
            HOLD(w, dres[pos] == w->ds[i].reserved_bytes && dsegs[pos] == w->ds[i].segments,
                 "snapshot: domain %d (index %d) holds %zu bytes in %zu segments; its stats %zu, %zu", i, pos,
                 dres[pos], dsegs[pos], w->ds[i].reserved_bytes, w->ds[i].segments);
        }
}

/* What writer wrote into f (then closed), in *buf (the caller frees). */
static const char *written(world *w, const char *writer, cca_status st, FILE *f, char **buf, size_t *len) {
    HOLD(w, st == CCA_OK && fclose(f) == 0 && *buf, "%s: %s", writer, cca_last_error());
    return *buf + *len;
}

/* cca_write_snapshot_json, cca_domain_stats_write_json and
 * cca_stats_write_json against s, the stats of the same moment. */
static void check_writers(world *w, const cca_stats *s) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    HOLD(w, f != NULL, "open_memstream");
    const char *end = written(w, "cca_write_snapshot_json", cca_write_snapshot_json(w->a, f), f, &buf, &len);
    const char *st = jval(buf, end, "stats"), *st_end = st ? memchr(st, '}', (size_t)(end - st)) : NULL;
    HOLD(w, st_end != NULL, "snapshot: no stats");
    check_fields(w, "snapshot stats", st, st_end, s, STATS_FIELDS, sizeof STATS_FIELDS / sizeof STATS_FIELDS[0]);
    const char *segs = check_domain_array(w, "snapshot domains", jval(st_end, end, "domains"), end);
    check_snapshot_segments(w, jval(segs, end, "segments"), end, s);
    free(buf);
    f = open_memstream(&buf, &len);
    HOLD(w, f != NULL, "open_memstream");
    end = written(w, "cca_domain_stats_write_json", cca_domain_stats_write_json(w->a, f), f, &buf, &len);
    check_domain_array(w, "cca_domain_stats_write_json", buf, end);
    free(buf);
    f = open_memstream(&buf, &len);
    HOLD(w, f != NULL, "open_memstream");
    end = written(w, "cca_stats_write_json", cca_stats_write_json(s, f), f, &buf, &len);
    check_fields(w, "cca_stats_write_json", buf, end, s, STATS_FIELDS, sizeof STATS_FIELDS / sizeof STATS_FIELDS[0]);
    free(buf);
}

/* Every relation of the header's, after one call. */
static void check_relations(world *w) {
    if (cca_check_invariants(w->a) != CCA_OK)
        FAIL(w, cca_last_error());
    cca_stats s;
    cca_get_stats(w->a, &s);
    size_t reserved = 0, allocated = 0, requested = 0, active = 0, segments = 0, host = 0, cached = 0, asleep = 0;
    size_t largest = 0;
    uint64_t calls = 0, uallocs = 0, ufrees = 0;
    for (int i = 0; i < ND; i++) {
        if (!w->used[i])
            continue;
        cca_domain_stats d = w->ds[i] = dstats(w, i);
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
        check_live_bytes(w, i, d.requested_bytes, d.allocated_bytes, d.active_blocks);
        calls += d.alloc_calls;
        uallocs += d.upstream_allocs;
        ufrees += d.upstream_frees;
        if (d.asleep) {
            HOLD(w, d.cached_bytes == 0 && d.largest_free_block == 0 && d.fragmentation == 0,
                 "domain %d asleep: cached %zu, largest free %zu", i, d.cached_bytes, d.largest_free_block);
        } else {
            HOLD(w, d.host_bytes == 0, "domain %d awake with %zu host bytes", i, d.host_bytes);
            HOLD(w, d.reserved_bytes >= d.allocated_bytes && d.cached_bytes == d.reserved_bytes - d.allocated_bytes,
                 "domain %d: cached %zu, reserved %zu, allocated %zu", i, d.cached_bytes, d.reserved_bytes,
                 d.allocated_bytes);
            cached += d.cached_bytes;
            double dfrag = d.cached_bytes ? 1.0 - (double)d.largest_free_block / (double)d.cached_bytes : 0.0;
            HOLD(w, fabs(d.fragmentation - dfrag) < 1e-9, "domain %d: fragmentation %g, expected %g", i,
                 d.fragmentation, dfrag);
            largest = d.largest_free_block > largest ? d.largest_free_block : largest;
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
    HOLD(w, s.largest_free_block == largest, "largest free %zu, the awake domains' largest %zu", s.largest_free_block,
         largest);
    /* a destroyed domain's counts stay in the allocator's */
    HOLD(w, calls <= s.alloc_calls && uallocs <= s.upstream_allocs && ufrees <= s.upstream_frees,
         "the domains' alloc calls, upstream allocs, frees %llu, %llu, %llu; the allocator's %llu, %llu, %llu",
         (unsigned long long)calls, (unsigned long long)uallocs, (unsigned long long)ufrees,
         (unsigned long long)s.alloc_calls, (unsigned long long)s.upstream_allocs,
         (unsigned long long)s.upstream_frees);
    check_live_bytes(w, -1, s.requested_bytes, s.allocated_bytes, s.active_blocks);
    HOLD(w, !s.cached_bytes || s.cached_blocks, "%zu cached bytes in no cached block", s.cached_bytes);
    HOLD(w, w->hold || s.peak_holds == 0, "%llu peak holds without hold_peak", (unsigned long long)s.peak_holds);
    check_kind_stats(w, &s);
    if (w->writers)
        check_writers(w, &s);
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
    cca_status st = KEEPS(w, cca_alloc_in(w->a, di ? w->dom[di] : NULL, size, s, &p));
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
    w->b[w->nb++] = (blk){p, size, di};
}

static void do_free(world *w) {
    if (!w->nb)
        return;
    size_t i = rnd(w, w->nb);
    cca_stats before;
    cca_get_stats(w->a, &before);
    w->what = "free";
    cca_status st = KEEPS(w, cca_free(w->a, w->b[i].p));
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
    cca_status st = KEEPS(w, cca_record_stream(w->a, w->b[rnd(w, w->nb)].p, (cca_stream)(uintptr_t)rnd(w, 3)));
    HOLD(w, st == CCA_OK, "record_stream: %s", cca_last_error());
}

static void do_domain_create(world *w) {
    for (int i = 1; i < ND; i++)
        if (!w->used[i]) {
            w->what = "domain_create";
            cca_domain *d = NULL;
            cca_status st = KEEPS(w, cca_domain_create(w->a, "m", &d));
            if (w->greedy) {
                HOLD(w, st == CCA_ERR_INVALID_ARGUMENT && d == NULL, "domain_create under greedy: %s",
                     cca_status_string(st));
                return;
            }
            HOLD(w, st == CCA_OK, "domain_create: %s", cca_last_error());
            w->dom[i] = d;
            w->used[i] = true;
            w->born[i] = ++w->births;
            return;
        }
}

/* A domain release's report, whatever its status: what is still reserved
 * is the domain's (0 once destroyed); the live blocks it found are at
 * most those it had, the first leaks_cap of them listed, each one of ours
 * in that domain (or one we freed, pending) with its bytes; refused for
 * live blocks, nothing released. */
static void check_domain_report(world *w, int i, bool destroy, cca_status st, const cca_domain_report *r,
                                const cca_domain_stats *dbefore, const cca_stats *before, const cca_stats *after) {
    if (st == CCA_ERR_INVALID_ARGUMENT)
        return;
    size_t still = destroy && st == CCA_OK ? 0 : dstats(w, i).reserved_bytes;
    HOLD(w, r->bytes_still_reserved == still, "domain %d report (%s): %zu still reserved, the domain %zu", i,
         cca_status_string(st), r->bytes_still_reserved, still);
    HOLD(w, r->live_bytes <= dbefore->allocated_bytes && (r->live_blocks == 0) == (r->live_bytes == 0),
         "domain %d report: %zu live blocks, %zu live bytes of %zu", i, r->live_blocks, r->live_bytes,
         dbefore->allocated_bytes);
    size_t want = r->live_blocks < r->leaks_cap ? r->live_blocks : r->leaks_cap, listed = 0;
    HOLD(w, r->leaks_written == want, "domain %d report: %zu leaks written of %zu, cap %zu", i, r->leaks_written,
         r->live_blocks, r->leaks_cap);
    for (size_t k = 0; k < r->leaks_written; k++) {
        const cca_live_block *l = &r->leaks[k];
        listed += l->size;
        bool ours = l->pending;
        for (size_t j = 0; j < w->nb && !ours; j++)
            ours = w->b[j].p == l->ptr && w->b[j].dom == i;
        HOLD(w, ours && l->requested <= l->size && l->size % CCA_GRANULARITY == 0,
             "domain %d report: leak %p (%zu bytes, %zu requested, pending %d) is no live block of it", i, l->ptr,
             l->size, l->requested, l->pending);
    }
    HOLD(w, r->leaks_written == r->live_blocks ? listed == r->live_bytes : listed <= r->live_bytes,
         "domain %d report: leaks listed hold %zu bytes, live_bytes %zu", i, listed, r->live_bytes);
    if (st == CCA_ERR_LIVE_BLOCKS)
        HOLD(w,
             r->live_blocks > 0 && r->bytes_released == 0 && r->segments_released == 0 &&
                 after->reserved_bytes == before->reserved_bytes && after->segments == before->segments,
             "domain %d refused for live blocks: %zu live, %zu released, reserved %zu -> %zu", i, r->live_blocks,
             r->bytes_released, before->reserved_bytes, after->reserved_bytes);
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
    cca_status st = KEEPS(w, destroy ? cca_domain_destroy(w->a, w->dom[i], flags, &r)
                                     : cca_domain_release(w->a, i ? w->dom[i] : NULL, flags, &r));
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
    check_domain_report(w, i, destroy, st, &r, &dbefore, &before, &after);
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
    (void)KEEPS(w, cca_domain_reserve(w->a, i ? w->dom[i] : NULL, 512 * KiB + rnd(w, 6 * MiB)));
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

/* The blocks a sleep or wake that succeeded moved (ccalloc.h,
 * cca_sleep_report): a sleep's, the live blocks (not pending, not freed) of
 * the domains it put to sleep; a wake's, the blocks recorded when they fell
 * asleep (those freed since too). The bytes copied: each live block's
 * requested bytes rounded up to CCA_GRANULARITY (none for a sleep with
 * DISCARD, nor for the wake after one); a sleep's exactly the host memory
 * it took, a wake's no more than it gave back. */
static void check_sleep_blocks(world *w, cca_status st, const cca_sleep_report *r, const bool was_asleep[ND], bool wake,
                               bool discard) {
    if (st != CCA_OK)
        return;
    size_t blocks = 0, bytes = 0;
    for (int i = 0; i < ND; i++)
        blocks += wake && w->used[i] && was_asleep[i] ? w->recorded[i] : 0;
    for (size_t k = 0; k < w->nb; k++) { /* a domain the call changed (others are asleep or awake already) */
        int i = w->b[k].dom;
        if (w->used[i] && was_asleep[i] == wake) {
            blocks += !wake;
            bytes += (wake ? w->discarded[i] : discard)
                         ? 0
                         : (w->b[k].size + CCA_GRANULARITY - 1) / CCA_GRANULARITY * CCA_GRANULARITY;
        }
    }
    HOLD(w, r->blocks == blocks && r->bytes_copied == bytes,
         "%s report: %zu blocks, %zu bytes copied; the domains it changed hold %zu, %zu bytes to copy",
         wake ? "wake" : "sleep", r->blocks, r->bytes_copied, blocks, bytes);
    if (wake)
        HOLD(w, r->bytes_copied <= r->host_bytes, "wake report: %zu bytes copied back from %zu host bytes",
             r->bytes_copied, r->host_bytes);
    else
        HOLD(w, r->bytes_copied == r->host_bytes && (!discard || r->host_bytes == 0),
             "sleep report (discard %d): %zu bytes copied into %zu host bytes", discard, r->bytes_copied,
             r->host_bytes);
}

/* Each domain's state before a sleep or wake. */
static void note_asleep(world *w, bool asleep[ND]) {
    for (int i = 0; i < ND; i++)
        asleep[i] = w->used[i] && dstats(w, i).asleep;
}

/* cca_sleep / cca_wake (every domain) or one domain's; the checks after. */
static void do_sleep_or_wake(world *w, bool wake) {
    cca_sleep_report r;
    bool discard = !wake && rnd(w, 3) == 0, was_asleep[ND];
    note_asleep(w, was_asleep);
    cca_stats before = stats(w);
    cca_status st;
    if (rnd(w, 4) == 0) {
        w->what = wake ? "cca_wake" : "cca_sleep";
        st = KEEPS(w, wake ? cca_wake(w->a, &r) : cca_sleep(w->a, discard ? CCA_SLEEP_DISCARD : 0, &r));
        for (int i = 0; i < ND; i++)
            if (w->used[i])
                check_asleep(w, i, st, !wake);
    } else {
        int i = pick_domain(w);
        cca_domain *d = i ? w->dom[i] : NULL;
        w->what = wake ? "domain_wake" : "domain_sleep";
        st = KEEPS(w, wake ? cca_domain_wake(w->a, d, &r)
                           : cca_domain_sleep(w->a, d, discard ? CCA_SLEEP_DISCARD : 0, &r));
        check_asleep(w, i, st, !wake);
        for (int k = 0; k < ND; k++) /* only domain i can change */
            if (k != i)
                was_asleep[k] = !wake;
    }
    check_sleep_report(w, st, &r, &before, wake);
    check_sleep_blocks(w, st, &r, was_asleep, wake, discard);
    for (int i = 0; i < ND; i++) /* put to sleep by this call (a refused unmap too): copied or not, its blocks */
        if (!wake && w->used[i] && !was_asleep[i] && dstats(w, i).asleep) {
            w->discarded[i] = discard;
            w->recorded[i] = 0;
            for (size_t k = 0; k < w->nb; k++)
                w->recorded[i] += w->b[k].dom == i;
        }
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

/* A release report against the stats after it: every segment kept or
 * pinned; every live byte pinning; the free bytes pinned are the awake
 * domains' cached bytes in segments with live blocks plus the pages a
 * refused unmap left in sleeping ones; trapped bytes are some of the
 * former (classic segments: none). */
static void check_release_report(world *w, const cca_release_report *r, const cca_stats *s) {
    size_t asleep_reserved = 0;
    for (int i = 0; i < ND; i++)
        if (w->used[i]) {
            cca_domain_stats d = dstats(w, i);
            asleep_reserved += d.asleep ? d.reserved_bytes : 0;
        }
    HOLD(w, r->segments_kept + r->segments_pinned == s->segments, "report: %zu kept + %zu pinned, %zu segments",
         r->segments_kept, r->segments_pinned, s->segments);
    HOLD(w, r->live_bytes_pinning == s->allocated_bytes, "report: %zu live bytes pinning, allocated %zu",
         r->live_bytes_pinning, s->allocated_bytes);
    HOLD(w, r->free_bytes_pinned <= s->cached_bytes + asleep_reserved,
         "report: %zu free bytes pinned, %zu cached + %zu reserved asleep", r->free_bytes_pinned, s->cached_bytes,
         asleep_reserved);
    HOLD(w, r->segments_kept || s->asleep_domains || r->free_bytes_pinned == s->cached_bytes,
         "report: no segment kept, none asleep: %zu free bytes pinned, %zu cached", r->free_bytes_pinned,
         s->cached_bytes);
    HOLD(w, r->free_bytes_trapped <= r->free_bytes_pinned && r->free_bytes_trapped <= s->cached_bytes,
         "report: %zu trapped, %zu pinned, %zu cached", r->free_bytes_trapped, r->free_bytes_pinned, s->cached_bytes);
    HOLD(w, !w->classic || (r->free_bytes_trapped == 0 && r->pages_unmapped == 0),
         "classic segments: %zu trapped, %zu pages unmapped", r->free_bytes_trapped, r->pages_unmapped);
}

static void do_trim(world *w) {
    cca_release_report r;
    memset(&r, 0xa5, sizeof r);
    bool empty = rnd(w, 3) == 0;
    w->what = empty ? "empty_cache" : "trim";
    cca_stats before = stats(w);
    size_t keep = empty ? 0 : rnd(w, 16 * MiB);
    cca_status st = KEEPS(w, empty ? cca_empty_cache(w->a, &r) : cca_trim(w->a, keep, &r));
    (void)st;
    cca_stats s = stats(w);
    uint64_t page = s.page_size ? s.page_size : 1;
    HOLD(w, before.reserved_bytes - s.reserved_bytes == r.bytes_released, "report: %zu released; reserved %zu -> %zu",
         r.bytes_released, before.reserved_bytes, s.reserved_bytes);
    HOLD(w, s.pages_unmapped - before.pages_unmapped == r.pages_unmapped && r.pages_unmapped * page == r.bytes_unmapped,
         "report: %zu pages (%zu bytes) unmapped; stats %llu pages", r.pages_unmapped, r.bytes_unmapped,
         (unsigned long long)(s.pages_unmapped - before.pages_unmapped));
    check_release_report(w, &r, &s);
    /* "until reserved <= keep_bytes or nothing free is left": what stays
     * cached then is pinned (classic: in segments with live blocks;
     * expandable: sharing a page with one), none kept for keep_bytes */
    if (st == CCA_OK && s.reserved_bytes > keep && s.asleep_domains == 0)
        HOLD(w, r.segments_kept == 0 && r.free_bytes_pinned == s.cached_bytes,
             "trim to %zu left %zu reserved: %zu cached, %zu of them pinned, %zu segments kept", keep, s.reserved_bytes,
             s.cached_bytes, r.free_bytes_pinned, r.segments_kept);
    HOLD(w, !empty || st != CCA_OK || s.active_blocks || s.reserved_bytes == 0,
         "empty_cache with no live block left %zu reserved", s.reserved_bytes);
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

/* The counters of calls never fall; alloc_calls and ooms move only in an
 * alloc, free_calls only in a free (do_alloc and do_free check by how
 * much), alloc_retries only in an alloc or a footprint reserve, by one at
 * most (one retry per call, ccalloc.h); peak_holds only under hold_peak. */
static void check_counters(world *w, const cca_stats *b, const char *call) {
    cca_stats a = stats(w);
    HOLD(w,
         a.alloc_calls >= b->alloc_calls && a.free_calls >= b->free_calls && a.upstream_allocs >= b->upstream_allocs &&
             a.upstream_frees >= b->upstream_frees && a.alloc_retries >= b->alloc_retries && a.ooms >= b->ooms &&
             a.splits >= b->splits && a.merges >= b->merges && a.vm_maps >= b->vm_maps && a.vm_unmaps >= b->vm_unmaps &&
             a.pages_mapped >= b->pages_mapped && a.pages_unmapped >= b->pages_unmapped &&
             a.peak_holds >= b->peak_holds,
         "a counter fell");
    bool alloc = strcmp(call, "alloc") == 0;
    HOLD(w, alloc || (a.alloc_calls == b->alloc_calls && a.ooms == b->ooms),
         "alloc_calls %llu -> %llu, ooms %llu -> %llu", (unsigned long long)b->alloc_calls,
         (unsigned long long)a.alloc_calls, (unsigned long long)b->ooms, (unsigned long long)a.ooms);
    HOLD(w, strcmp(call, "free") == 0 || a.free_calls == b->free_calls, "free_calls %llu -> %llu",
         (unsigned long long)b->free_calls, (unsigned long long)a.free_calls);
    HOLD(w, a.alloc_retries - b->alloc_retries <= (alloc || strcmp(call, "reserve") == 0), "alloc_retries %llu -> %llu",
         (unsigned long long)b->alloc_retries, (unsigned long long)a.alloc_retries);
}

static void one_step(world *w) {
    bool faulty = rnd(w, 3) == 0;
    if (faulty)
        arm_fault(w);
    uint64_t host_free_fails = w->f.calls[TU_FAULT_HOST_FREE] - w->f.ok[TU_FAULT_HOST_FREE];
    cca_stats before = stats(w);
    int call = (int)rnd(w, 20);
    switch (call) {
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
    case 15: do_sleep_or_wake(w, false); break;
    case 16:
    case 17: do_sleep_or_wake(w, true); break;
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
    check_counters(w, &before, call <= 6 ? "alloc" : call <= 10 ? "free" : call == 14 ? "reserve" : "");
    check_relations(w);
    /* events: held, or completed up to now */
    if (rnd(w, 4) == 0)
        w->f.hold_events = !w->f.hold_events;
    if (rnd(w, 3) == 0)
        w->f.events_done = w->f.events_recorded;
}

static void run(const char *conf, int backing, uint64_t seed, bool writers) {
    world *w = calloc(1, sizeof *w);
    cr_assert_not_null(w);
    w->conf = conf;
    w->seed = w->rng = seed;
    w->greedy = strstr(conf, "greedy") != NULL;
    w->classic = strstr(conf, "expandable:0") != NULL;
    w->hold = strstr(conf, "hold_peak:1") != NULL;
    w->backing = backing;
    w->writers = writers;
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
            /* the writers cost as much as the rest: in turn, one fixed seed of each configuration */
            run(configs[c].conf, configs[c].backing, seeds[i], nseeds == 1 || i == c % 3);
        }
}
