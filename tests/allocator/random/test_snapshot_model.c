/*
 * test_snapshot_model.c — allocator/src/observe/stats.c: the allocator's reports held to one another and
 * to what it holds, in every state a seeded random sequence of public calls
 * reaches: cca_write_snapshot_json (parsed with cJSON),
 * cca_write_snapshot_torch (parsed with tests/support/pickle_read.c), cca_get_stats,
 * cca_get_domain_stats, the release reports of cca_trim / cca_empty_cache /
 * cca_domain_release, and the history ring in the pickle's device trace.
 *
 * Configurations: classic, expandable, greedy and greedy over expandable
 * segments (expandable:0 / expandable:1 in every configuration); growth
 * ones with memory domains and footprint arenas; history rings large
 * enough to hold every event, and small ones that wrap. The device is the
 * simulated one with the pages backing (CCA_VM_PAGES: any run of pages
 * unmaps) behind tu_faulty: events held NOT READY on
 * demand (frees of blocks used on another stream stay pending), and an
 * upstream call of any kind refused now and then (the k-th from now).
 *
 * After every step:
 *   - JSON: its stats equal cca_get_stats; its segments (address order, no
 *     overlap) tile with blocks, their mapped runs add up to mapped_bytes,
 *     and the blocks give allocated, requested, active, pending, cached
 *     blocks and bytes, the largest free block and the fragmentation; its
 *     domains equal cca_get_domain_stats and add up to the allocator; every
 *     block the test holds is there, live, with its requested size and
 *     domain; every pending block is one the test freed while events were
 *     held;
 *   - pickle: well-formed (only the writer's opcodes, valid UTF-8), its
 *     segments exactly the JSON's as PyTorch shows them (an expandable
 *     segment as one segment per mapped run, free blocks cut at the runs'
 *     ends), with per-segment sums, pool ids in domain order, streams;
 *     "ccalloc" and the settings (PYTORCH_CUDA_ALLOC_CONF the config's
 *     printed lines joined by commas); the device trace holds min(recorded,
 *     entries) events in time order, and REPLAYS: undone from the newest
 *     event back to the oldest held, starting from the snapshot's own
 *     segments and blocks, every event finds the state it implies (an
 *     alloc its live block, a free_requested its pending one, a segment
 *     event its memory mapped or not, no block outside mapped memory), and
 *     a ring that never wrapped replays back to nothing at all;
 *   - the events since the last step: one alloc per successful allocation,
 *     one free_requested per free, one oom per OOM, one segment_map /
 *     segment_unmap per map / unmap call and their pages;
 *   - release reports: bytes and segments released, pages unmapped, bytes
 *     still reserved, segments kept and pinned, live bytes pinning, free
 *     bytes pinned and trapped, all from the snapshots before and after.
 *
 * Seeds: a fixed list; CCA_RANDOM_SEED replays one.
 *
 * Then the writers' failures and inputs:
 *   - every writer (both snapshots, the domain stats, the stats as JSON and
 *     text, the config) into a FILE that refuses its bytes from offset k
 *     on, for every k and three bufferings: CCA_ERR_IO naming the writer
 *     (CCA_OK, the message untouched, once k reaches the output's length),
 *     the bytes that got through the output's first k, and both snapshots
 *     byte for byte as before;
 *   - hostile upstream names (every byte value, quotes, backslashes,
 *     controls, malformed and cut UTF-8, 70000 bytes): both snapshots show
 *     the same text, well-formed UTF-8, the name's first 31 bytes;
 *   - allocator_settings.max_split_size for max_split off, set, and above
 *     INT64_MAX;
 *   - domains sharing a name: each JSON segment's domain_index is its
 *     domain's, and the pickle's segment_pool_id;
 *   - integers at every edge of the pickle's opcodes (BININT's sign bit,
 *     LONG1's trimmed and ninth bytes): streams down to INT64_MIN,
 *     requested sizes across 2^31 and 2^32, addresses at and above 2^63
 *     (an upstream handing out made-up addresses), each read back exact.
 */
#include "alloc_test_util.h"
#include "ccai_utf8.h"
#include "pages_rule.h"
#include "pickle_read.h"

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PG ((size_t)64 * KiB)
#define S1 ((cca_stream)0x1000)
#define S2 ((cca_stream)(uintptr_t)0xfffffffffff0e000ull) /* negative as PyTorch's int64 */
#define SLOTS 48
#define DOMAINS 3
#define MAX_SEGS 512
#define MAX_BLOCKS 4096

/* ============================================================================ */
/* Both snapshots of one moment, parsed                                         */
/* ============================================================================ */

typedef struct snaps {
    char *json;
    size_t json_len;
    unsigned char *pk;
    size_t pk_len;
    cJSON *js;
    pr_value *pv;
} snaps;

static void take_snaps(const cca_allocator *a, snaps *s, const char *what) {
    memset(s, 0, sizeof *s);
    FILE *m = open_memstream(&s->json, &s->json_len);
    cr_assert_not_null(m);
    cr_assert_eq(cca_write_snapshot_json(a, m), CCA_OK, "%s: snapshot json: %s", what, cca_last_error());
    fclose(m);
    m = open_memstream((char **)&s->pk, &s->pk_len);
    cr_assert_not_null(m);
    cr_assert_eq(cca_write_snapshot_torch(a, 0, m), CCA_OK, "%s: snapshot torch: %s", what, cca_last_error());
    fclose(m);
    s->js = cJSON_ParseWithLength(s->json, s->json_len);
    cr_assert_not_null(s->js, "%s: the JSON snapshot does not parse:\n%s", what, s->json);
    char why[256];
    s->pv = pr_read(s->pk, s->pk_len, why, sizeof why);
    cr_assert_not_null(s->pv, "%s: the pickle does not decode: %s", what, why);
}

static void free_snaps(snaps *s) {
    cJSON_Delete(s->js);
    pr_free(s->pv);
    free(s->json);
    free(s->pk);
}

static const cJSON *jget(const cJSON *o, const char *key, const char *what) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    cr_assert_not_null(v, "%s: JSON key '%s' missing", what, key);
    return v;
}

static uint64_t jnum(const cJSON *o, const char *key, const char *what) {
    const cJSON *v = jget(o, key, what);
    cr_assert(cJSON_IsNumber(v) && v->valuedouble >= 0, "%s: JSON '%s' is not a count", what, key);
    return (uint64_t)v->valuedouble;
}

static const char *jstr(const cJSON *o, const char *key, const char *what) {
    const cJSON *v = jget(o, key, what);
    cr_assert(cJSON_IsString(v), "%s: JSON '%s' is not a string", what, key);
    return v->valuestring;
}

static const pr_value *pget(const pr_value *d, const char *key, pr_kind kind, const char *what) {
    const pr_value *v = pr_get(d, key);
    cr_assert_not_null(v, "%s: pickle key '%s' missing", what, key);
    cr_assert_eq(v->kind, kind, "%s: pickle '%s' has kind %d, expected %d", what, key, v->kind, kind);
    return v;
}

static int64_t pint(const pr_value *d, const char *key, const char *what) {
    return (int64_t)pget(d, key, PR_INT, what)->i;
}

/* ============================================================================ */
/* What the JSON snapshot says, gathered                                        */
/* ============================================================================ */

typedef struct jblock {
    uintptr_t addr;
    size_t size, requested;
    char state; /* 'L' live, 'P' pending, 'F' free */
    int seg;
} jblock;

typedef struct jseg {
    uintptr_t base;
    size_t size, mapped, live_blocks;
    bool expandable, small;
    int domain; /* index in the JSON's domains array */
    uintptr_t stream;
    size_t runs[256][2]; /* mapped runs: offset, bytes */
    size_t nruns;
    size_t first_block, nblocks;
} jseg;

typedef struct view {
    jseg segs[MAX_SEGS];
    size_t nsegs;
    jblock blocks[MAX_BLOCKS];
    size_t nblocks;
    char domains[DOMAINS + 1][CCA_DOMAIN_NAME_MAX + 1];
    size_t ndomains;
} view;

/* Bytes of [lo, hi) (segment offsets) that lie in mapped runs of g; with
 * `longest`, the longest stretch of them inside one run instead. */
static size_t mapped_in_runs(const jseg *g, size_t lo, size_t hi, bool longest) {
    if (!g->expandable)
        return hi - lo;
    size_t n = 0;
    for (size_t i = 0; i < g->nruns; i++) {
        size_t s = g->runs[i][0] > lo ? g->runs[i][0] : lo, e = g->runs[i][0] + g->runs[i][1];
        size_t part = (e < hi ? e : hi) > s ? (e < hi ? e : hi) - s : 0;
        n = longest ? (part > n ? part : n) : n + part;
    }
    return n;
}

static size_t mapped_in(const jseg *g, size_t lo, size_t hi) {
    return mapped_in_runs(g, lo, hi, false);
}

static size_t longest_mapped(const jseg *g, size_t lo, size_t hi) {
    return mapped_in_runs(g, lo, hi, true);
}

static bool page_mapped(const jseg *g, size_t page, size_t pg) {
    return mapped_in(g, page * pg, (page + 1) * pg) == pg;
}

/* Parse the JSON's segments and domains into v, checking the structure:
 * address order without overlap, blocks tiling each segment, no two free
 * neighbours, free blocks with nothing requested, live and pending blocks
 * on mapped pages, maximal mapped runs inside the range. */
static void gather(const cJSON *js, view *v, size_t page, const char *what) {
    memset(v, 0, sizeof *v);
    const cJSON *doms = jget(js, "domains", what), *d;
    cJSON_ArrayForEach(d, doms) {
        cr_assert_lt(v->ndomains, DOMAINS + 1, "%s: too many domains", what);
        snprintf(v->domains[v->ndomains++], CCA_DOMAIN_NAME_MAX + 1, "%s", jstr(d, "name", what));
    }
    const cJSON *segs = jget(js, "segments", what), *s;
    uintptr_t prev_end = 0;
    cJSON_ArrayForEach(s, segs) {
        cr_assert_lt(v->nsegs, MAX_SEGS);
        jseg *g = &v->segs[v->nsegs];
        g->base = (uintptr_t)strtoull(jstr(s, "address", what), NULL, 16);
        g->size = jnum(s, "size", what);
        cr_assert_geq(g->base, prev_end, "%s: segments out of address order or overlapping at %#lx", what,
                      (unsigned long)g->base);
        prev_end = g->base + g->size;
        g->live_blocks = jnum(s, "live_blocks", what);
        const char *pool = jstr(s, "pool", what);
        g->small = strcmp(pool, "small") == 0;
        const char *stream = jstr(s, "stream", what);
        g->stream = strcmp(stream, "(nil)") == 0 ? 0 : (uintptr_t)strtoull(stream, NULL, 16);
        const char *dom = jstr(s, "domain", what);
        g->domain = (int)jnum(s, "domain_index", what);
        cr_assert(g->domain < (int)v->ndomains && strcmp(v->domains[g->domain], dom) == 0,
                  "%s: segment of domain '%s', index %d", what, dom, g->domain);
        const cJSON *ex = cJSON_GetObjectItemCaseSensitive(s, "expandable");
        g->expandable = cJSON_IsTrue(ex);
        if (g->expandable) {
            cr_assert_eq(jnum(s, "page", what), page, "%s: segment page", what);
            const cJSON *run;
            size_t end = 0, sum = 0;
            cJSON_ArrayForEach(run, jget(s, "mapped", what)) {
                cr_assert_lt(g->nruns, sizeof g->runs / sizeof g->runs[0]);
                size_t off = (size_t)cJSON_GetArrayItem(run, 0)->valuedouble;
                size_t n = (size_t)cJSON_GetArrayItem(run, 1)->valuedouble;
                cr_assert(n > 0 && off % page == 0 && n % page == 0 && off + n <= g->size, "%s: mapped run", what);
                cr_assert(g->nruns == 0 || off > end, "%s: mapped runs not maximal and ordered", what);
                end = off + n;
                sum += n;
                g->runs[g->nruns][0] = off;
                g->runs[g->nruns][1] = n;
                g->nruns++;
            }
            g->mapped = jnum(s, "mapped_bytes", what);
            cr_assert_eq(g->mapped, sum, "%s: mapped_bytes %zu, runs add up to %zu", what, g->mapped, sum);
        } else {
            g->mapped = g->size;
        }
        g->first_block = v->nblocks;
        size_t off = 0, nonfree = 0;
        char prev = 0;
        const cJSON *b;
        cJSON_ArrayForEach(b, jget(s, "blocks", what)) {
            cr_assert_lt(v->nblocks, MAX_BLOCKS);
            jblock *k = &v->blocks[v->nblocks++];
            cr_assert_eq(jnum(b, "offset", what), off, "%s: blocks do not tile segment %#lx", what,
                         (unsigned long)g->base);
            k->addr = g->base + off;
            k->size = jnum(b, "size", what);
            k->requested = jnum(b, "requested", what);
            k->seg = (int)v->nsegs;
            const char *st = jstr(b, "state", what);
            k->state = strcmp(st, "live") == 0 ? 'L' : strcmp(st, "pending") == 0 ? 'P' : 'F';
            cr_assert(k->state != 'F' || strcmp(st, "free") == 0, "%s: block state '%s'", what, st);
            cr_assert(k->size > 0 && k->size % CCA_GRANULARITY == 0, "%s: block size %zu", what, k->size);
            if (k->state == 'F') {
                cr_assert_eq(k->requested, 0, "%s: free block at %#lx with %zu requested", what,
                             (unsigned long)k->addr, k->requested);
                cr_assert_neq(prev, 'F', "%s: two free neighbours at %#lx", what, (unsigned long)k->addr);
            } else {
                nonfree++;
                cr_assert(k->requested > 0 && k->requested <= k->size, "%s: block %#lx requests %zu of %zu", what,
                          (unsigned long)k->addr, k->requested, k->size);
                cr_assert_eq(mapped_in(g, off, off + k->size), k->size, "%s: %s block %#lx on unmapped pages", what,
                             st, (unsigned long)k->addr);
            }
            prev = k->state;
            off += k->size;
        }
        cr_assert_eq(off, g->size, "%s: segment %#lx: blocks cover %zu of %zu bytes", what, (unsigned long)g->base,
                     off, g->size);
        g->nblocks = v->nblocks - g->first_block;
        cr_assert_eq(g->live_blocks, nonfree, "%s: live_blocks", what);
        v->nsegs++;
    }
}

/* ============================================================================ */
/* The pickle's device trace, undone event by event                             */
/* ============================================================================ */

typedef struct ivals { /* disjoint, sorted, maximal [lo, hi) */
    uintptr_t r[MAX_SEGS * 4][2];
    size_t n;
} ivals;

static bool iv_covers(const ivals *m, uintptr_t lo, uintptr_t hi) {
    for (size_t i = 0; i < m->n; i++)
        if (m->r[i][0] <= lo && hi <= m->r[i][1])
            return true;
    return lo == hi;
}

static bool iv_overlaps(const ivals *m, uintptr_t lo, uintptr_t hi) {
    for (size_t i = 0; i < m->n; i++)
        if (m->r[i][0] < hi && lo < m->r[i][1])
            return true;
    return false;
}

static void iv_add(ivals *m, uintptr_t lo, uintptr_t hi) {
    size_t i = 0;
    while (i < m->n && m->r[i][1] < lo)
        i++;
    /* merge every interval touching [lo, hi) */
    size_t j = i;
    while (j < m->n && m->r[j][0] <= hi) {
        lo = m->r[j][0] < lo ? m->r[j][0] : lo;
        hi = m->r[j][1] > hi ? m->r[j][1] : hi;
        j++;
    }
    cr_assert_lt(m->n - (j - i) + 1, sizeof m->r / sizeof m->r[0]);
    memmove(&m->r[i + 1], &m->r[j], (m->n - j) * sizeof m->r[0]);
    m->n = m->n - (j - i) + 1;
    m->r[i][0] = lo;
    m->r[i][1] = hi;
}

static void iv_remove(ivals *m, uintptr_t lo, uintptr_t hi) { /* [lo, hi) lies in one interval */
    for (size_t i = 0; i < m->n; i++) {
        if (!(m->r[i][0] <= lo && hi <= m->r[i][1]))
            continue;
        uintptr_t a = m->r[i][0], b = m->r[i][1];
        memmove(&m->r[i], &m->r[i + 1], (m->n - i - 1) * sizeof m->r[0]);
        m->n--;
        if (a < lo)
            iv_add(m, a, lo);
        if (hi < b)
            iv_add(m, hi, b);
        return;
    }
}

typedef struct rblock {
    uintptr_t addr;
    size_t requested;
    bool pending, completed_only; /* completed_only: re-added by undoing a free_completed */
} rblock;

typedef struct replay {
    ivals mem;
    rblock b[MAX_BLOCKS];
    size_t nb;
} replay;

static rblock *r_find(replay *r, uintptr_t addr) {
    for (size_t i = 0; i < r->nb; i++)
        if (r->b[i].addr == addr)
            return &r->b[i];
    return NULL;
}

static bool r_block_in(const replay *r, uintptr_t lo, uintptr_t hi) {
    for (size_t i = 0; i < r->nb; i++)
        if (r->b[i].addr < hi && lo < r->b[i].addr + r->b[i].requested)
            return true;
    return false;
}

/* Undo the trace from its newest event to its oldest, from the snapshot's
 * state: every event must find what it implies. A ring holding every event
 * ever recorded undoes to an allocator holding nothing. */
static void check_trace(const pr_value *trace, const view *v, bool whole, size_t capacity, const char *what) {
    static replay r; /* large: not on the stack */
    memset(&r, 0, sizeof r);
    for (size_t i = 0; i < v->nsegs; i++) {
        const jseg *g = &v->segs[i];
        if (!g->expandable)
            iv_add(&r.mem, g->base, g->base + g->size);
        for (size_t k = 0; k < g->nruns; k++)
            iv_add(&r.mem, g->base + g->runs[k][0], g->base + g->runs[k][0] + g->runs[k][1]);
    }
    for (size_t i = 0; i < v->nblocks; i++)
        if (v->blocks[i].state != 'F')
            r.b[r.nb++] = (rblock){v->blocks[i].addr, v->blocks[i].requested, v->blocks[i].state == 'P', false};
    uint64_t later = UINT64_MAX;
    for (size_t i = trace->count; i-- > 0;) {
        const pr_value *e = trace->items[i];
        char at[96];
        snprintf(at, sizeof at, "%s: trace event %zu of %zu", what, i, trace->count);
        const char *action = pget(e, "action", PR_STR, at)->s;
        bool oom = strcmp(action, "oom") == 0;
        uintptr_t addr = (uintptr_t)pint(e, oom ? "device_free" : "addr", at);
        size_t size = (size_t)pint(e, "size", at);
        uint64_t t = (uint64_t)pint(e, "time_us", at);
        cr_assert_leq(t, later, "%s: time goes back", at);
        later = t;
        pint(e, "stream", at);
        cr_assert_eq(pget(e, "frames", PR_LIST, at)->count, 0);
        rblock *b = r_find(&r, addr);
        if (strcmp(action, "alloc") == 0) {
            cr_assert(b && (!b->pending || b->completed_only) && b->requested == size,
                      "%s: alloc of %#lx (%zu B): the block is %s", at, (unsigned long)addr, size,
                      !b ? "not there" : b->pending ? "pending" : "of another size");
            *b = r.b[--r.nb];
        } else if (strcmp(action, "free_requested") == 0) {
            cr_assert(b && b->pending && b->requested == size, "%s: free_requested of %#lx: the block is %s", at,
                      (unsigned long)addr, !b ? "not there" : !b->pending ? "not pending" : "of another size");
            b->pending = b->completed_only = false;
        } else if (strcmp(action, "free_completed") == 0) {
            cr_assert(!r_block_in(&r, addr, addr + size), "%s: free_completed of %#lx: a block is still there", at,
                      (unsigned long)addr);
            cr_assert(iv_covers(&r.mem, addr, addr + size), "%s: free_completed of %#lx outside mapped memory", at,
                      (unsigned long)addr);
            cr_assert_lt(r.nb, MAX_BLOCKS);
            r.b[r.nb++] = (rblock){addr, size, true, true};
        } else if (strcmp(action, "segment_alloc") == 0 || strcmp(action, "segment_map") == 0) {
            cr_assert(size > 0 && iv_covers(&r.mem, addr, addr + size), "%s: %s of [%#lx, +%zu) not mapped after it",
                      at, action, (unsigned long)addr, size);
            cr_assert(!r_block_in(&r, addr, addr + size), "%s: %s: a block lay there before it", at, action);
            iv_remove(&r.mem, addr, addr + size);
        } else if (strcmp(action, "segment_free") == 0 || strcmp(action, "segment_unmap") == 0) {
            cr_assert(size > 0 && !iv_overlaps(&r.mem, addr, addr + size), "%s: %s of [%#lx, +%zu) mapped after it",
                      at, action, (unsigned long)addr, size);
            iv_add(&r.mem, addr, addr + size);
        } else {
            cr_assert(oom, "%s: unknown action '%s'", at, action);
            cr_assert_leq(addr, capacity, "%s: oom with %zu free bytes on a %zu-byte device", at, (size_t)addr,
                          capacity);
        }
        for (size_t k = 0; k < r.nb; k++) /* I7 at every step */
            cr_assert(iv_covers(&r.mem, r.b[k].addr, r.b[k].addr + r.b[k].requested),
                      "%s (%s): block %#lx lies outside mapped memory", at, action, (unsigned long)r.b[k].addr);
    }
    if (whole) {
        cr_assert_eq(r.nb, 0, "%s: the whole trace undone, %zu blocks remain (first %#lx)", what, r.nb,
                     r.nb ? (unsigned long)r.b[0].addr : 0ul);
        cr_assert_eq(r.mem.n, 0, "%s: the whole trace undone, memory remains at %#lx", what,
                     r.mem.n ? (unsigned long)r.mem.r[0][0] : 0ul);
    }
}

/* ============================================================================ */
/* The audit: both snapshots against the stats, each other and the model       */
/* ============================================================================ */

typedef struct slot {
    void *p;
    size_t req;
    int dom; /* -1: the default domain */
} slot;

typedef struct model {
    cca_allocator *a;
    cca_upstream *u, *dev;
    tu_faulty f;
    size_t capacity;
    const char *upstream_name; /* as the snapshots must show it */
    cca_domain *d[DOMAINS];
    char names[DOMAINS][CCA_DOMAIN_NAME_MAX + 1];
    slot s[SLOTS];
    uintptr_t maybe_pending[4 * SLOTS]; /* freed while events were held */
    size_t nmaybe;
    /* at the last audit, for the events of one step */
    cca_stats last;
    uint64_t last_recorded;
    view v; /* the last audit's view */
} model;

/* The counts of each event kind among the trace's events [from, count). */
typedef struct event_counts {
    uint64_t alloc, free_requested, oom, seg_alloc, seg_free, map, unmap, map_bytes, unmap_bytes;
} event_counts;

static event_counts count_events(const pr_value *trace, size_t from) {
    event_counts c = {0};
    for (size_t i = from; i < trace->count; i++) {
        const char *act = pr_get(trace->items[i], "action")->s;
        size_t size = (size_t)pr_get(trace->items[i], "size")->i;
        c.alloc += strcmp(act, "alloc") == 0;
        c.free_requested += strcmp(act, "free_requested") == 0;
        c.oom += strcmp(act, "oom") == 0;
        c.seg_alloc += strcmp(act, "segment_alloc") == 0;
        c.seg_free += strcmp(act, "segment_free") == 0;
        if (strcmp(act, "segment_map") == 0)
            c.map++, c.map_bytes += size;
        if (strcmp(act, "segment_unmap") == 0)
            c.unmap++, c.unmap_bytes += size;
    }
    return c;
}

static void check_json_stats(const cJSON *j, const cca_stats *s, const char *what) {
#define EQ(field) cr_assert_eq(jnum(j, #field, what), (uint64_t)s->field, "%s: JSON " #field " %" PRIu64 ", stats %" PRIu64, \
                               what, jnum(j, #field, what), (uint64_t)s->field)
    EQ(allocated_bytes);
    EQ(allocated_bytes_peak);
    EQ(requested_bytes);
    EQ(requested_bytes_peak);
    EQ(reserved_bytes);
    EQ(reserved_bytes_peak);
    EQ(active_blocks);
    EQ(active_blocks_peak);
    EQ(pending_blocks);
    EQ(cached_blocks);
    EQ(cached_bytes);
    EQ(segments);
    EQ(segments_peak);
    EQ(largest_free_block);
    EQ(alloc_calls);
    EQ(free_calls);
    EQ(upstream_allocs);
    EQ(upstream_frees);
    EQ(alloc_retries);
    EQ(ooms);
    EQ(splits);
    EQ(merges);
    EQ(page_size);
    EQ(expandable_segments);
    EQ(address_space_bytes);
    EQ(mapped_bytes);
    EQ(vm_maps);
    EQ(vm_unmaps);
    EQ(pages_mapped);
    EQ(pages_unmapped);
#undef EQ
    double fr = jget(j, "fragmentation", what)->valuedouble;
    cr_assert(fr > s->fragmentation - 1e-6 && fr < s->fragmentation + 1e-6, "%s: fragmentation", what);
}

/* The JSON's segments against the stats, derived figure by derived figure. */
static void check_totals(const view *v, const cca_stats *s, const char *what) {
    size_t reserved = 0, mapped = 0, space = 0, nexp = 0, allocated = 0, requested = 0, active = 0, pending = 0;
    size_t free_blocks = 0, free_bytes = 0, largest = 0;
    for (size_t i = 0; i < v->nsegs; i++) {
        const jseg *g = &v->segs[i];
        reserved += g->mapped;
        if (g->expandable) {
            mapped += g->mapped;
            space += g->size;
            nexp++;
        }
        for (size_t k = g->first_block; k < g->first_block + g->nblocks; k++) {
            const jblock *b = &v->blocks[k];
            if (b->state == 'F') {
                free_blocks++;
                free_bytes += b->size;
                size_t off = b->addr - g->base, l = longest_mapped(g, off, off + b->size);
                largest = l > largest ? l : largest;
                continue;
            }
            allocated += b->size;
            active++;
            pending += b->state == 'P';
            requested += b->state == 'L' ? b->requested : 0;
        }
    }
#define EQ(field, value) \
    cr_assert_eq((size_t)s->field, (size_t)(value), "%s: stats " #field " %zu, the snapshot's segments give %zu", what, \
                 (size_t)s->field, (size_t)(value))
    EQ(segments, v->nsegs);
    EQ(reserved_bytes, reserved);
    EQ(mapped_bytes, mapped);
    EQ(address_space_bytes, space);
    EQ(expandable_segments, nexp);
    EQ(allocated_bytes, allocated);
    EQ(requested_bytes, requested);
    EQ(active_blocks, active);
    EQ(pending_blocks, pending);
    EQ(cached_blocks, free_blocks);
    EQ(cached_bytes, nexp ? reserved - allocated : free_bytes);
    EQ(largest_free_block, largest);
#undef EQ
}

static void check_domains(const model *m, const cJSON *js, const view *v, const cca_stats *s, const char *what) {
    const cJSON *jd;
    size_t i = 0, reserved_sum = 0, allocated_sum = 0;
    cJSON_ArrayForEach(jd, jget(js, "domains", what)) {
        /* the domain in the allocator's list order: the default, then the live handles in creation order */
        const cca_domain *d = NULL;
        if (i > 0) {
            for (int k = 0; k < DOMAINS && !d; k++)
                if (m->d[k] && strcmp(m->names[k], v->domains[i]) == 0)
                    d = m->d[k];
            cr_assert_not_null(d, "%s: JSON domain '%s' is not one the test holds", what, v->domains[i]);
        }
        cca_domain_stats ds;
        cr_assert_eq(cca_get_domain_stats(m->a, d, &ds), CCA_OK);
        char dw[128];
        snprintf(dw, sizeof dw, "%s: domain '%s'", what, ds.name);
        cr_assert_str_eq(ds.name, v->domains[i], "%s", dw);
        cr_assert_eq(jnum(jd, "allocated_bytes", dw), ds.allocated_bytes, "%s: allocated", dw);
        cr_assert_eq(jnum(jd, "requested_bytes", dw), ds.requested_bytes, "%s: requested", dw);
        cr_assert_eq(jnum(jd, "reserved_bytes", dw), ds.reserved_bytes, "%s: reserved", dw);
        cr_assert_eq(jnum(jd, "active_blocks", dw), ds.active_blocks, "%s: active", dw);
        cr_assert_eq(jnum(jd, "segments", dw), ds.segments, "%s: segments", dw);
        cr_assert_eq(jnum(jd, "largest_free_block", dw), ds.largest_free_block, "%s: largest", dw);
        /* and the snapshot's segments of that domain */
        size_t res = 0, alloc = 0, req = 0, act = 0, segs = 0, largest = 0;
        for (size_t k = 0; k < v->nsegs; k++) {
            const jseg *g = &v->segs[k];
            if (g->domain != (int)i)
                continue;
            segs++;
            res += g->mapped;
            for (size_t b = g->first_block; b < g->first_block + g->nblocks; b++) {
                const jblock *k = &v->blocks[b];
                if (k->state == 'F') {
                    size_t l = longest_mapped(g, k->addr - g->base, k->addr - g->base + k->size);
                    largest = l > largest ? l : largest;
                    continue;
                }
                alloc += k->size;
                act++;
                req += k->state == 'L' ? k->requested : 0;
            }
        }
        cr_assert_eq(ds.reserved_bytes, res, "%s: reserved %zu, its segments hold %zu", dw, ds.reserved_bytes, res);
        cr_assert_eq(ds.segments, segs, "%s: %zu segments, the snapshot lists %zu", dw, ds.segments, segs);
        cr_assert_eq(ds.allocated_bytes, alloc, "%s: allocated %zu, its blocks %zu", dw, ds.allocated_bytes, alloc);
        cr_assert_eq(ds.requested_bytes, req, "%s: requested %zu, its live blocks %zu", dw, ds.requested_bytes, req);
        cr_assert_eq(ds.active_blocks, act, "%s: active %zu, its blocks %zu", dw, ds.active_blocks, act);
        cr_assert_eq(ds.cached_bytes, res - alloc, "%s: cached", dw);
        cr_assert_eq(ds.largest_free_block, largest, "%s: largest free block %zu, its blocks give %zu", dw,
                     ds.largest_free_block, largest);
        reserved_sum += ds.reserved_bytes;
        allocated_sum += ds.allocated_bytes;
        i++;
    }
    cr_assert_eq(i, v->ndomains);
    cr_assert_eq(reserved_sum, s->reserved_bytes, "%s: the domains reserve %zu, the allocator %zu", what, reserved_sum,
                 s->reserved_bytes);
    cr_assert_eq(allocated_sum, s->allocated_bytes, "%s: domains' allocated", what);
}

static void check_model(const model *m, const view *v, const char *what) {
    size_t live = 0;
    for (int i = 0; i < SLOTS; i++) {
        const slot *sl = &m->s[i];
        if (!sl->p)
            continue;
        live++;
        const jblock *b = NULL;
        for (size_t k = 0; k < v->nblocks && !b; k++)
            if (v->blocks[k].addr == (uintptr_t)sl->p)
                b = &v->blocks[k];
        cr_assert(b && b->state == 'L', "%s: the test's block %p is %s in the snapshot", what, sl->p,
                  !b ? "not" : "not live");
        cr_assert_eq(b->requested, sl->req, "%s: block %p requested %zu, the test asked %zu", what, sl->p,
                     b->requested, sl->req);
        const char *dom = sl->dom < 0 ? "default" : m->names[sl->dom];
        cr_assert_str_eq(v->domains[v->segs[b->seg].domain], dom, "%s: block %p in domain '%s', expected '%s'", what,
                         sl->p, v->domains[v->segs[b->seg].domain], dom);
    }
    size_t jlive = 0;
    for (size_t k = 0; k < v->nblocks; k++) {
        jlive += v->blocks[k].state == 'L';
        if (v->blocks[k].state != 'P')
            continue;
        bool known = false;
        for (size_t j = 0; j < m->nmaybe && !known; j++)
            known = m->maybe_pending[j] == v->blocks[k].addr;
        cr_assert(known, "%s: block %#lx is pending, but the test never freed it with events held", what,
                  (unsigned long)v->blocks[k].addr);
    }
    cr_assert_eq(jlive, live, "%s: %zu live blocks in the snapshot, the test holds %zu", what, jlive, live);
}

/* The pickle's segments: the JSON's as PyTorch shows them. */
static void check_pickle_segments(const pr_value *segs, const view *v, const char *what) {
    size_t n = 0;
    for (size_t i = 0; i < v->nsegs; i++) {
        const jseg *g = &v->segs[i];
        size_t runs = g->expandable ? g->nruns : 1;
        for (size_t r = 0; r < runs; r++, n++) {
            size_t lo = g->expandable ? g->runs[r][0] : 0, hi = g->expandable ? lo + g->runs[r][1] : g->size;
            char at[96];
            snprintf(at, sizeof at, "%s: pickle segment %zu", what, n);
            cr_assert_lt(n, segs->count, "%s: missing", at);
            const pr_value *p = segs->items[n];
            cr_assert_eq(pint(p, "device", at), 0);
            cr_assert_eq((uintptr_t)pint(p, "address", at), g->base + lo, "%s: address", at);
            cr_assert_eq((size_t)pint(p, "total_size", at), hi - lo, "%s: total_size", at);
            cr_assert_eq((uintptr_t)pint(p, "stream", at), g->stream, "%s: stream", at);
            cr_assert_str_eq(pget(p, "segment_type", PR_STR, at)->s, g->small ? "small" : "large", "%s", at);
            cr_assert_eq(pget(p, "is_expandable", PR_BOOL, at)->i, g->expandable, "%s", at);
            const pr_value *pool = pget(p, "segment_pool_id", PR_TUPLE, at);
            cr_assert(pool->count == 2 && pool->items[0]->i == 0 && pool->items[1]->i == g->domain,
                      "%s: segment_pool_id (0, %d) expected", at, g->domain);
            cr_assert_eq(pget(p, "frames", PR_LIST, at)->count, 0);
            const pr_value *blocks = pget(p, "blocks", PR_LIST, at);
            size_t bi = 0, allocated = 0, active = 0, requested = 0;
            for (size_t k = g->first_block; k < g->first_block + g->nblocks; k++) {
                const jblock *b = &v->blocks[k];
                size_t s = b->addr - g->base > lo ? b->addr - g->base : lo;
                size_t e = b->addr - g->base + b->size < hi ? b->addr - g->base + b->size : hi;
                if (s >= e)
                    continue;
                cr_assert_lt(bi, blocks->count, "%s: block %zu missing", at, bi);
                const pr_value *pb = blocks->items[bi++];
                cr_assert_eq((uintptr_t)pint(pb, "address", at), g->base + s, "%s: block address", at);
                cr_assert_eq((size_t)pint(pb, "size", at), e - s, "%s: block size", at);
                cr_assert_eq((size_t)pint(pb, "requested_size", at), b->requested, "%s: requested_size", at);
                const char *st = pget(pb, "state", PR_STR, at)->s;
                cr_assert_str_eq(st,
                                 b->state == 'L'   ? "active_allocated"
                                 : b->state == 'P' ? "active_pending_free"
                                                   : "inactive",
                                 "%s: block state", at);
                cr_assert_eq(pget(pb, "frames", PR_LIST, at)->count, 0);
                if (b->state != 'F') {
                    cr_assert_eq(e - s, b->size, "%s: a live block cut by a run", at);
                    active += b->size;
                    requested += b->requested;
                    allocated += b->state == 'L' ? b->size : 0;
                }
            }
            cr_assert_eq(bi, blocks->count, "%s: %zu blocks, expected %zu", at, blocks->count, bi);
            cr_assert_eq((size_t)pint(p, "allocated_size", at), allocated, "%s: allocated_size", at);
            cr_assert_eq((size_t)pint(p, "active_size", at), active, "%s: active_size", at);
            cr_assert_eq((size_t)pint(p, "requested_size", at), requested, "%s: requested_size", at);
        }
    }
    cr_assert_eq(segs->count, n, "%s: the pickle lists %zu segments, expected %zu", what, segs->count, n);
}

static void audit(model *m, const char *what) {
    tu_check(m->a);
    cca_stats st = tu_stats(m->a);
    snaps s;
    take_snaps(m->a, &s, what);
    check_json_stats(jget(s.js, "stats", what), &st, what);
    cr_assert_str_eq(jstr(s.js, "upstream", what), m->upstream_name, "%s: JSON upstream name (%zu bytes, expected %zu)", what, strlen(jstr(s.js, "upstream", what)), strlen(m->upstream_name));
    view *v = &m->v;
    gather(s.js, v, st.page_size, what);
    check_totals(v, &st, what);
    check_domains(m, s.js, v, &st, what);
    check_model(m, v, what);

    const pr_value *root = s.pv;
    check_pickle_segments(pget(root, "segments", PR_LIST, what), v, what);
    const pr_value *cc = pget(root, "ccalloc", PR_DICT, what);
    cr_assert_str_eq(pget(cc, "upstream", PR_STR, what)->s, m->upstream_name, "%s: pickle upstream name", what);
    cca_config c;
    cca_get_config(m->a, &c);
    cr_assert_str_eq(pget(cc, "policy", PR_STR, what)->s, c.policy == CCA_POLICY_GREEDY ? "greedy" : "growth");
    cr_assert_eq((size_t)pint(cc, "history_entries", what), c.history);
    uint64_t recorded = (uint64_t)pint(cc, "history_recorded", what);
    const pr_value *settings = pget(root, "allocator_settings", PR_DICT, what);
    cr_assert_eq(pget(settings, "expandable_segments", PR_BOOL, what)->i, st.page_size != 0);
    /* PYTORCH_CUDA_ALLOC_CONF: cca_config_print's lines joined by commas,
     * none after the last */
    char *conf = NULL;
    size_t conf_len = 0;
    FILE *cm = open_memstream(&conf, &conf_len);
    cr_assert_not_null(cm);
    cr_assert_eq(cca_config_print(&c, cm, 0), CCA_OK);
    fclose(cm);
    cr_assert(conf_len > 0 && conf[conf_len - 1] == '\n');
    conf[conf_len - 1] = '\0';
    for (char *nl = strchr(conf, '\n'); nl; nl = strchr(nl, '\n'))
        *nl = ',';
    cr_assert_str_eq(pget(settings, "PYTORCH_CUDA_ALLOC_CONF", PR_STR, what)->s, conf, "%s: PYTORCH_CUDA_ALLOC_CONF",
                     what);
    free(conf);
    const pr_value *traces = pget(root, "device_traces", PR_LIST, what);
    cr_assert_eq(traces->count, 1, "%s: device 0: one trace", what);
    const pr_value *trace = traces->items[0];
    cr_assert_eq(trace->kind, PR_LIST);
    size_t held = recorded < c.history ? (size_t)recorded : c.history;
    cr_assert_eq(trace->count, held, "%s: %zu events in the trace, %" PRIu64 " recorded in a ring of %zu", what,
                 trace->count, recorded, c.history);
    check_trace(trace, v, c.history && recorded == held, m->capacity, what);

    /* this step's events against this step's counters */
    uint64_t added = recorded - m->last_recorded;
    if (c.history && added <= held) {
        event_counts e = count_events(trace, held - (size_t)added);
        cr_assert_eq(e.alloc, st.alloc_calls - m->last.alloc_calls, "%s: alloc events", what);
        cr_assert_eq(e.free_requested, st.free_calls - m->last.free_calls, "%s: free_requested events", what);
        cr_assert_eq(e.oom, st.ooms - m->last.ooms, "%s: oom events", what);
        cr_assert_eq(e.map, st.vm_maps - m->last.vm_maps, "%s: segment_map events", what);
        cr_assert_eq(e.unmap, st.vm_unmaps - m->last.vm_unmaps, "%s: segment_unmap events", what);
        if (st.page_size) {
            cr_assert_eq(e.map_bytes, (st.pages_mapped - m->last.pages_mapped) * st.page_size, "%s: mapped", what);
            cr_assert_eq(e.unmap_bytes, (st.pages_unmapped - m->last.pages_unmapped) * st.page_size, "%s: unmapped",
                         what);
        } else {
            cr_assert_eq(e.seg_alloc, st.upstream_allocs - m->last.upstream_allocs, "%s: segment_alloc events", what);
            cr_assert_eq(e.seg_free, st.upstream_frees - m->last.upstream_frees, "%s: segment_free events", what);
        }
    }
    m->last = st;
    m->last_recorded = recorded;
    free_snaps(&s);
}

/* ============================================================================ */
/* Release reports from the views before and after                             */
/* ============================================================================ */

static size_t trapped_in(const view *v) {
    size_t t = 0;
    for (size_t i = 0; i < v->nsegs; i++) {
        const jseg *g = &v->segs[i];
        if (!g->expandable)
            continue;
        for (size_t k = g->first_block; k < g->first_block + g->nblocks; k++) {
            const jblock *b = &v->blocks[k];
            if (b->state != 'F')
                continue;
            size_t page = PG, off = b->addr - g->base, end = off + b->size;
            size_t first = off / page, last = (end - 1) / page;
            if (off % page && page_mapped(g, first, page))
                t += (first == last ? end : (first + 1) * page) - off;
            if (end % page && page_mapped(g, last, page) && (first != last || off % page == 0))
                t += end - (first == last ? off : last * page);
        }
    }
    return t;
}

static void check_release_report(const model *m, const cca_release_report *r, const cca_stats *before,
                                 const cca_stats *after, const char *what) {
    const view *v = &m->v; /* audited after the call */
    cr_assert_eq(r->bytes_still_reserved, after->reserved_bytes, "%s: bytes_still_reserved", what);
    cr_assert_eq(r->bytes_released, before->reserved_bytes - after->reserved_bytes,
                 "%s: bytes_released %zu, reserved went %zu -> %zu", what, r->bytes_released, before->reserved_bytes,
                 after->reserved_bytes);
    cr_assert_eq(r->segments_released, before->segments - after->segments, "%s: segments_released", what);
    cr_assert_eq(r->pages_unmapped, after->pages_unmapped - before->pages_unmapped, "%s: pages_unmapped", what);
    cr_assert_eq(r->bytes_unmapped, r->pages_unmapped * after->page_size, "%s: bytes_unmapped", what);
    size_t kept = 0, pinned = 0, live = 0, free_pinned = 0;
    for (size_t i = 0; i < v->nsegs; i++) {
        const jseg *g = &v->segs[i];
        size_t lb = 0;
        for (size_t k = g->first_block; k < g->first_block + g->nblocks; k++)
            lb += v->blocks[k].state != 'F' ? v->blocks[k].size : 0;
        if (g->live_blocks) {
            pinned++;
            live += lb;
            free_pinned += g->mapped - lb;
        } else {
            kept++;
        }
    }
    cr_assert_eq(r->segments_kept, kept, "%s: segments_kept %zu, expected %zu", what, r->segments_kept, kept);
    cr_assert_eq(r->segments_pinned, pinned, "%s: segments_pinned", what);
    cr_assert_eq(r->live_bytes_pinning, live, "%s: live_bytes_pinning", what);
    cr_assert_eq(r->free_bytes_pinned, free_pinned, "%s: free_bytes_pinned %zu, expected %zu", what,
                 r->free_bytes_pinned, free_pinned);
    cr_assert_eq(r->free_bytes_trapped, trapped_in(v), "%s: free_bytes_trapped %zu, expected %zu", what,
                 r->free_bytes_trapped, trapped_in(v));
}

/* ============================================================================ */
/* The random driver                                                            */
/* ============================================================================ */

typedef struct run_cfg {
    const char *name, *conf;
    bool greedy, domains;
    bool no_events; /* an upstream without events: cca_free synchronizes instead (and may fail to) */
    bool no_least;  /* expandable: the growth rule's least step 0 and the ahead's cap 64 MiB (the test hook,
                       pages_rule.h): a tail maps what it needs plus expandable_ahead of what is mapped */
} run_cfg;

static const char *const NAMES[DOMAINS] = {
    "model:a/b", "~!@#$%^&*()_+-=[]{}|;'<>?./ `",
    "d123456789012345678901234567890123456789012345678901234567890ab"}; /* 63 characters */

static void model_open(model *m, const run_cfg *cfg, const char *upstream_name, const char *shown_name) {
    memset(m, 0, sizeof *m);
    m->capacity = 96 * MiB;
    /* pages backing: the trapped bytes of a release report are counted page
     * by page (trapped_in) */
    cca_host_options o = {.capacity = m->capacity, .vm_granularity = PG, .vm_backing = CCA_VM_PAGES};
    cr_assert_eq(cca_upstream_host_create_with(&o, &m->dev), CCA_OK, "%s", cca_last_error());
    m->u = tu_faulty_create(&m->f, m->dev, upstream_name, !cfg->no_events);
    m->upstream_name = shown_name;
    char conf[256];
    snprintf(conf, sizeof conf, "log_oom:0,%s", cfg->conf);
    m->a = tu_allocator(m->u, conf);
    if (cfg->no_least)
        ccai_pages_rule_set(m->a, 0, 64 * MiB, 128 * MiB);
    audit(m, "created");
}

static void model_close(model *m) {
    tu_faulty_faults_off(&m->f);
    m->f.hold_events = m->f.sync_keeps_events = false;
    m->f.events_done = m->f.events_recorded;
    for (int i = 0; i < SLOTS; i++)
        if (m->s[i].p) {
            tu_free(m->a, m->s[i].p);
            m->s[i].p = NULL;
        }
    cr_assert_eq(cca_empty_cache(m->a, NULL), CCA_OK, "%s", cca_last_error());
    audit(m, "emptied");
    for (int k = 0; k < DOMAINS; k++)
        if (m->d[k])
            cr_assert_eq(cca_domain_destroy(m->a, m->d[k], 0, NULL), CCA_OK, "%s", cca_last_error());
    cca_stats st = tu_stats(m->a);
    cr_assert_eq(st.reserved_bytes, 0);
    cr_assert_eq(cca_destroy(m->a), CCA_OK, "%s", cca_last_error());
    cca_upstream_destroy(m->u);
    cca_upstream_destroy(m->dev);
}

static size_t pick_size(uint64_t *rng) {
    uint64_t r = tu_rand(rng) % 100;
    if (r < 45)
        return 1 + tu_rand(rng) % (8 * KiB);
    if (r < 75)
        return 1 + tu_rand(rng) % MiB;
    if (r < 95)
        return MiB + tu_rand(rng) % (11 * MiB);
    return 12 * MiB + tu_rand(rng) % (20 * MiB);
}

static void note_maybe_pending(model *m, uintptr_t addr) {
    if (m->nmaybe == sizeof m->maybe_pending / sizeof m->maybe_pending[0])
        m->nmaybe = 0; /* forget the oldest ones: they completed long ago or the check is lenient */
    m->maybe_pending[m->nmaybe++] = addr;
}

static void forget_maybe_pending(model *m, uintptr_t addr) {
    for (size_t j = 0; j < m->nmaybe; j++)
        if (m->maybe_pending[j] == addr)
            m->maybe_pending[j] = 0;
}

static int domain_index(const model *m, int k) {
    return k >= 0 && m->d[k] ? k : -1;
}

/* The first slot from a random one on that is held (want) or empty (!want); -1: none. */
static int pick_slot(const model *m, uint64_t *rng, bool want) {
    int start = (int)(tu_rand(rng) % SLOTS);
    for (int k = 0; k < SLOTS; k++) {
        int i = (start + k) % SLOTS;
        if ((m->s[i].p != NULL) == want)
            return i;
    }
    return -1;
}

static void op_alloc(model *m, uint64_t *rng, const run_cfg *cfg, const char *what) {
    int i = pick_slot(m, rng, false);
    if (i < 0)
        return;
    int dom = cfg->domains ? domain_index(m, (int)(tu_rand(rng) % (DOMAINS + 1)) - 1) : -1;
    size_t size = tu_rand(rng) % 20 == 0 ? m->capacity + 1 : pick_size(rng);
    cca_stream streams[3] = {NULL, S1, S2};
    cca_stream s = streams[tu_rand(rng) % 3];
    void *p = (void *)1;
    cca_status st = dom < 0 ? cca_alloc(m->a, size, s, &p) : cca_alloc_in(m->a, m->d[dom], size, s, &p);
    cr_assert(st == CCA_OK || st == CCA_ERR_OUT_OF_MEMORY || st == CCA_ERR_UPSTREAM, "%s: alloc: %s", what,
              cca_last_error());
    cr_assert(st == CCA_OK ? p != NULL : p == NULL, "%s: *out", what);
    if (st == CCA_OK) {
        forget_maybe_pending(m, (uintptr_t)p);
        m->s[i] = (slot){p, size, dom};
    }
}

static void op_free(model *m, uint64_t *rng, const char *what) {
    int i = pick_slot(m, rng, true);
    if (i < 0)
        return;
    cca_status st = cca_free(m->a, m->s[i].p);
    cr_assert(st == CCA_OK || st == CCA_ERR_UPSTREAM, "%s: free: %s", what, cca_last_error());
    note_maybe_pending(m, (uintptr_t)m->s[i].p);
    m->s[i].p = NULL;
}

static void op_record(model *m, uint64_t *rng, const char *what) {
    int i = pick_slot(m, rng, true);
    if (i < 0)
        return;
    cr_assert_eq(cca_record_stream(m->a, m->s[i].p, tu_rand(rng) % 2 ? S1 : S2), CCA_OK, "%s: %s", what,
                 cca_last_error());
}

static void op_trim(model *m, uint64_t *rng, const char *what) {
    cca_stats before = tu_stats(m->a);
    size_t keep = tu_rand(rng) % 3 == 0 ? 0 : (size_t)(tu_rand(rng) % (before.reserved_bytes + 1));
    cca_release_report r;
    memset(&r, 0xa5, sizeof r);
    cca_status st = keep ? cca_trim(m->a, keep, &r) : cca_empty_cache(m->a, &r);
    cr_assert(st == CCA_OK || st == CCA_ERR_UPSTREAM || st == CCA_ERR_NOT_READY, "%s: trim: %s", what,
              cca_last_error());
    audit(m, what);
    cca_stats after = tu_stats(m->a);
    check_release_report(m, &r, &before, &after, what);
}

static void op_domain_reserve(model *m, uint64_t *rng, const char *what) {
    int k = (int)(tu_rand(rng) % DOMAINS);
    if (!m->d[k])
        return;
    cca_status st = cca_domain_reserve(m->a, m->d[k], 1 + tu_rand(rng) % (16 * MiB));
    cr_assert(st == CCA_OK || st == CCA_ERR_OUT_OF_MEMORY || st == CCA_ERR_INVALID_ARGUMENT || st == CCA_ERR_UPSTREAM,
              "%s: reserve: %s", what, cca_last_error());
}

static void op_domain_release(model *m, uint64_t *rng, const char *what) {
    int k = (int)(tu_rand(rng) % (DOMAINS + 1)) - 1;
    if (k >= 0 && !m->d[k])
        return;
    cca_domain *d = k < 0 ? NULL : m->d[k];
    bool destroy = k >= 0 && tu_rand(rng) % 3 == 0;
    unsigned flags = tu_rand(rng) % 2 ? CCA_DOMAIN_FORCE : 0;
    cca_domain_stats before;
    cr_assert_eq(cca_get_domain_stats(m->a, d, &before), CCA_OK);
    size_t live = 0, live_bytes = 0;
    for (int i = 0; i < SLOTS; i++)
        if (m->s[i].p && m->s[i].dom == k) {
            live++;
            live_bytes += tu_block_size(m->a, m->s[i].p);
        }
    cca_live_block leaks[8];
    cca_domain_report r = {.leaks = leaks, .leaks_cap = 8};
    cca_status st = destroy ? cca_domain_destroy(m->a, d, flags, &r) : cca_domain_release(m->a, d, flags, &r);
    cr_assert(st == CCA_OK || st == CCA_ERR_LIVE_BLOCKS || st == CCA_ERR_UPSTREAM, "%s: release: %s", what,
              cca_last_error());
    bool sync_failed = st != CCA_OK && strstr(cca_last_error(), "synchronize failed, nothing released");
    /* the test's blocks the release took (FORCE) */
    for (int i = 0; i < SLOTS; i++) {
        if (!m->s[i].p || m->s[i].dom != k)
            continue;
        size_t sz;
        cca_status q = cca_block_size(m->a, m->s[i].p, &sz);
        cr_assert(q == CCA_OK || q == CCA_ERR_INVALID_POINTER);
        if (q == CCA_ERR_INVALID_POINTER) {
            cr_assert(flags & CCA_DOMAIN_FORCE, "%s: a live block went without FORCE", what);
            m->s[i].p = NULL;
        }
    }
    if (st == CCA_OK && destroy)
        m->d[k] = NULL;
    audit(m, what);
    if (sync_failed)
        return; /* nothing released, nothing found */
    /* found: the test's live blocks, and the pending ones still waiting (they stay) */
    size_t pending = 0, pending_bytes = 0;
    const char *name = k < 0 ? "default" : m->names[k];
    for (size_t b = 0; b < m->v.nblocks && (k < 0 || m->d[k]); b++) {
        const jblock *jb = &m->v.blocks[b];
        if (jb->state == 'P' && strcmp(m->v.domains[m->v.segs[jb->seg].domain], name) == 0) {
            pending++;
            pending_bytes += jb->size;
        }
    }
    cr_assert_eq(r.live_blocks, live + pending, "%s: live_blocks %zu, expected %zu live + %zu pending", what,
                 r.live_blocks, live, pending);
    cr_assert_eq(r.live_bytes, live_bytes + pending_bytes, "%s: live_bytes", what);
    cr_assert_eq(r.leaks_written, r.live_blocks < 8 ? r.live_blocks : 8, "%s: leaks_written", what);
    cca_domain_stats after;
    if (k >= 0 && !m->d[k]) {
        memset(&after, 0, sizeof after);
    } else {
        cr_assert_eq(cca_get_domain_stats(m->a, d, &after), CCA_OK);
    }
    cr_assert_eq(r.bytes_still_reserved, after.reserved_bytes, "%s: bytes_still_reserved %zu, the domain holds %zu",
                 what, r.bytes_still_reserved, after.reserved_bytes);
    cr_assert_eq(r.bytes_released, before.reserved_bytes - after.reserved_bytes,
                 "%s: bytes_released %zu, the domain went %zu -> %zu", what, r.bytes_released, before.reserved_bytes,
                 after.reserved_bytes);
    cr_assert_eq(r.segments_released, before.segments - after.segments, "%s: segments_released", what);
}

static void op_domain_create(model *m, uint64_t *rng, const char *what) {
    int k = (int)(tu_rand(rng) % DOMAINS);
    if (m->d[k])
        return;
    snprintf(m->names[k], sizeof m->names[k], "%s", NAMES[k]);
    cr_assert_eq(cca_domain_create(m->a, m->names[k], &m->d[k]), CCA_OK, "%s: %s", what, cca_last_error());
}

/* Faults for one step: each kind, with odds 1 in 3, refuses its first or
 * second call from now, once or (odds 1 in 2) from then on. */
static void arm_fault(model *m, uint64_t *rng) {
    for (int k = 0; k < TU_FAULT_KINDS; k++) {
        if (tu_rand(rng) % 3)
            continue;
        m->f.fail_at[k] = m->f.calls[k] + 1 + tu_rand(rng) % 2;
        m->f.sticky[k] = tu_rand(rng) % 2;
    }
}

static void run_random(const run_cfg *cfg, uint64_t seed, int steps) {
    model *m = calloc(1, sizeof *m);
    cr_assert_not_null(m);
    model_open(m, cfg, "sx", "sx");
    uint64_t rng = seed;
    for (int step = 0; step < steps; step++) {
        char what[160];
        uint64_t op = tu_rand(&rng) % 100;
        snprintf(what, sizeof what, "%s seed %#" PRIx64 " step %d (op %" PRIu64 ")", cfg->name, seed, step, op);
        bool fault = tu_rand(&rng) % 4 == 0;
        if (fault)
            arm_fault(m, &rng);
        if (op < 34)
            op_alloc(m, &rng, cfg, what);
        else if (op < 60)
            op_free(m, &rng, what);
        else if (op < 68)
            op_record(m, &rng, what);
        else if (op < 72)
            m->f.hold_events = !m->f.hold_events;
        else if (op < 76)
            m->f.events_done = m->f.events_recorded;
        else if (op < 78)
            m->f.sync_keeps_events = !m->f.sync_keeps_events;
        else if (op < 86)
            op_trim(m, &rng, what);
        else if (op < 88)
            cca_reset_peak_stats(m->a);
        else if (cfg->domains && op < 92)
            op_domain_create(m, &rng, what);
        else if (cfg->domains && op < 95)
            op_domain_reserve(m, &rng, what);
        else if (cfg->domains)
            op_domain_release(m, &rng, what);
        tu_faulty_faults_off(&m->f);
        audit(m, what);
    }
    model_close(m);
    free(m);
}

static const run_cfg CONFIGS[] = {
    {"classic", "expandable:0,history:100000", false, true, false, false},
    {"classic-wrap", "expandable:0,history:53", false, true, false, false},
    {"expandable", "expandable:1,history:100000", false, true, false, false},
    {"expandable-wrap", "expandable:1,history:41", false, true, false, false},
    {"greedy", "expandable:0,policy:greedy,greedy_bytes:40M,history:100000", true, false, false, false},
    {"greedy-wrap", "expandable:0,policy:greedy,greedy_bytes:40M,history:29", true, false, false, false},
    {"greedy-expandable", "policy:greedy,greedy_bytes:40M,expandable:1,history:100000", true, false, false, false},
    {"greedy-expandable-wrap", "policy:greedy,greedy_bytes:40M,expandable:1,history:31", true, false, false, false},
    {"classic-no-history", "expandable:0", false, true, false, false},
    {"classic-no-events", "expandable:0,history:61", false, true, true, false},
    {"greedy-expandable-no-events", "policy:greedy,greedy_bytes:40M,expandable:1,history:100000", true, false, true,
     false},
    {"expandable-eager", "expandable:1,expandable_ahead:0.5,history:1", false, true, false, true},
    {"classic-capped", "expandable:0,max_reserved:40M,history:7", false, true, false, false},
    {"expandable-capped", "expandable:1,max_reserved:40M,history:5000", false, true, false, false},
    {"one-pool", "expandable:0,small_pool:0,medium_pool:0,max_split:24M,history:3000", false, true, false, false},
};

static uint64_t seed_or(uint64_t fixed) {
    const char *env = getenv("CCA_RANDOM_SEED");
    return env && *env ? strtoull(env, NULL, 0) : fixed;
}

#define CONFIG_TEST(idx, id)                                                        \
    Test(snapshot_model, id) {                                                      \
        static const uint64_t seeds[] = {0x5eed0001, 0xdecafbad};                   \
        for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++)                 \
            run_random(&CONFIGS[idx], seed_or(seeds[i] + (uint64_t)(idx)), 250);    \
    }

CONFIG_TEST(0, classic)
CONFIG_TEST(1, classic_wrapped_history)
CONFIG_TEST(2, expandable)
CONFIG_TEST(3, expandable_wrapped_history)
CONFIG_TEST(4, greedy)
CONFIG_TEST(5, greedy_wrapped_history)
CONFIG_TEST(6, greedy_expandable)
CONFIG_TEST(7, greedy_expandable_wrapped_history)
CONFIG_TEST(8, classic_without_history)
CONFIG_TEST(9, classic_without_events)
CONFIG_TEST(10, greedy_expandable_without_events)
CONFIG_TEST(11, expandable_mapping_little_ahead_history_1)
CONFIG_TEST(12, classic_max_reserved)
CONFIG_TEST(13, expandable_max_reserved)
CONFIG_TEST(14, one_pool_max_split)

/* ============================================================================ */
/* A FILE that fails at every byte offset                                       */
/* ============================================================================ */

/* A stream that takes `room` bytes into `got` and refuses the rest (a full
 * disk at that offset): the write that crosses it is short, later ones fail.
 * A refused write returns 0, never -1: fopencookie(3) says a write function
 * must not return a negative value, and glibc's fwrite, given -1 by a write
 * straight from the caller's buffer (an unbuffered stream, or one larger
 * than the stream's buffer), counts it as SIZE_MAX bytes written and copies
 * from past the end of the caller's buffer (valgrind: invalid reads in
 * _IO_default_xsputn behind the writers' fwrite of their whole text). */
typedef struct cut_sink {
    char *got;
    size_t len, room;
} cut_sink;

static ssize_t cut_write(void *cookie, const char *buf, size_t n) {
    cut_sink *c = cookie;
    size_t take = c->room - c->len < n ? c->room - c->len : n;
    memcpy(c->got + c->len, buf, take);
    c->len += take;
    if (take == 0)
        errno = ENOSPC;
    return (ssize_t)take;
}

static FILE *cut_open(cut_sink *c, char *got, size_t room, int mode, char *buf) {
    *c = (cut_sink){got, 0, room};
    FILE *f = fopencookie(c, "w", (cookie_io_functions_t){.write = cut_write});
    cr_assert_not_null(f);
    if (mode == 1)
        setvbuf(f, NULL, _IONBF, 0);
    else if (mode == 2)
        setvbuf(f, buf, _IOFBF, 7); /* a buffer smaller than most writes */
    return f;
}

typedef enum writer_kind { W_JSON, W_TORCH, W_DOMAINS, W_STATS_JSON, W_STATS_TEXT, W_CONFIG, W_KINDS } writer_kind;
static const char *const WRITER_NAMES[W_KINDS] = {"cca_write_snapshot_json",     "cca_write_snapshot_torch",
                                                  "cca_domain_stats_write_json", "cca_stats_write_json",
                                                  "cca_stats_print",             "cca_config_print"};

static cca_status write_with(writer_kind w, const cca_allocator *a, const cca_stats *s, const cca_config *c,
                             FILE *f) {
    switch (w) {
    case W_JSON:
        return cca_write_snapshot_json(a, f);
    case W_TORCH:
        return cca_write_snapshot_torch(a, 2, f);
    case W_DOMAINS:
        return cca_domain_stats_write_json(a, f);
    case W_STATS_JSON:
        return cca_stats_write_json(s, f);
    case W_STATS_TEXT:
        return cca_stats_print(s, f);
    default:
        return cca_config_print(c, f, 1);
    }
}

static char *written(writer_kind w, const cca_allocator *a, const cca_stats *s, const cca_config *c, size_t *len) {
    char *buf = NULL;
    FILE *m = open_memstream(&buf, len);
    cr_assert_not_null(m);
    cr_assert_eq(write_with(w, a, s, c, m), CCA_OK, "%s: %s", WRITER_NAMES[w], cca_last_error());
    fclose(m);
    return buf;
}

/* A state with a bit of everything: expandable segments in two domains and
 * a footprint arena, pages trimmed between live blocks, a pending free, an
 * OOM, a ring that wrapped; the blocks in the model's slots. */
static void rich_state(model *m) {
    static const run_cfg cfg = {"rich", "expandable:1,history:23", false, true, false, false};
    model_open(m, &cfg, "rich\"\\\n\xff", "rich\"\\\n?");
    for (int k = 0; k < 2; k++) {
        snprintf(m->names[k], sizeof m->names[k], "%s", NAMES[k]);
        cr_assert_eq(cca_domain_create(m->a, m->names[k], &m->d[k]), CCA_OK);
    }
    cr_assert_eq(cca_domain_reserve(m->a, m->d[1], 3 * MiB), CCA_OK, "%s", cca_last_error());
    for (int i = 0; i < 8; i++) { /* domains: the default (odd), 'a' and the arena's */
        slot *sl = &m->s[i];
        sl->req = (size_t)(i + 1) * 300 * KiB;
        sl->dom = i % 2 ? -1 : i % 4 ? 1 : 0;
        cca_domain *d = sl->dom < 0 ? NULL : m->d[sl->dom];
        cr_assert_eq(cca_alloc_in(m->a, d, sl->req, i % 2 ? S1 : NULL, &sl->p), CCA_OK, "%s", cca_last_error());
    }
    void *q;
    cr_assert_eq(cca_alloc(m->a, m->capacity * 2, NULL, &q), CCA_ERR_OUT_OF_MEMORY);
    for (int i = 3; i <= 4; i++) {
        tu_free(m->a, m->s[i].p);
        m->s[i].p = NULL;
    }
    cr_assert_eq(cca_trim(m->a, 0, NULL), CCA_OK, "%s", cca_last_error());
    m->f.hold_events = true;
    cr_assert_eq(cca_record_stream(m->a, m->s[5].p, S2), CCA_OK);
    tu_free(m->a, m->s[5].p);
    note_maybe_pending(m, (uintptr_t)m->s[5].p);
    m->s[5].p = NULL;
    cr_assert_eq(tu_stats(m->a).pending_blocks, 1);
    audit(m, "the rich state");
}

Test(snapshot_model, every_writer_fails_at_every_byte_offset_and_changes_nothing) {
    model *m = calloc(1, sizeof *m);
    rich_state(m);
    cca_stats s = tu_stats(m->a);
    cca_config c;
    cca_get_config(m->a, &c);
    size_t ref_len, ref_pk_len;
    char *ref = written(W_JSON, m->a, &s, &c, &ref_len);
    char *ref_pk = written(W_TORCH, m->a, &s, &c, &ref_pk_len);
    for (writer_kind w = 0; w < W_KINDS; w++) {
        size_t len;
        char *full = written(w, m->a, &s, &c, &len);
        char *got = malloc(len + 1);
        for (int mode = 0; mode < 3; mode++) {
            for (size_t room = 0; room <= len; room++) {
                cut_sink sink;
                char vbuf[8];
                FILE *f = cut_open(&sink, got, room, mode, vbuf);
                cca_set_error(CCA_ERR_INVARIANT, "before");
                cca_status st = write_with(w, m->a, &s, &c, f);
                cr_assert_eq(st, room < len ? CCA_ERR_IO : CCA_OK,
                             "%s, buffering %d, room for %zu of %zu bytes: %s (%s)", WRITER_NAMES[w], mode, room, len,
                             cca_status_string(st), cca_last_error());
                if (st == CCA_OK)
                    cr_assert_str_eq(cca_last_error(), "before", "%s: a success replaced the message", WRITER_NAMES[w]);
                else
                    cr_assert(strstr(cca_last_error(), WRITER_NAMES[w]) != NULL, "%s: message '%s'",
                              WRITER_NAMES[w], cca_last_error());
                fclose(f);
                cr_assert(sink.len == room && memcmp(got, full, room) == 0,
                          "%s, buffering %d: the %zu bytes written are not the output's first bytes",
                          WRITER_NAMES[w], mode, sink.len);
            }
        }
        free(got);
        free(full);
        /* nothing changed: both snapshots as before, byte for byte */
        size_t now_len, now_pk_len;
        char *now = written(W_JSON, m->a, &s, &c, &now_len);
        char *now_pk = written(W_TORCH, m->a, &s, &c, &now_pk_len);
        cr_assert(now_len == ref_len && memcmp(now, ref, ref_len) == 0, "%s: the JSON snapshot changed",
                  WRITER_NAMES[w]);
        cr_assert(now_pk_len == ref_pk_len && memcmp(now_pk, ref_pk, ref_pk_len) == 0, "%s: the pickle changed",
                  WRITER_NAMES[w]);
        free(now);
        free(now_pk);
        tu_check(m->a);
    }
    free(ref);
    free(ref_pk);
    audit(m, "after the failed writes");
    model_close(m);
    free(m);
}

/* ============================================================================ */
/* Hostile upstream names                                                       */
/* ============================================================================ */

/* name as both snapshots must show it: well-formed UTF-8 kept, every other
 * byte '?' (ccalloc.h, snapshot_torch.c). */
static char *shown(const char *name) {
    size_t n = strlen(name);
    char *out = malloc(n + 1), *o = out;
    for (const unsigned char *p = (const unsigned char *)name; *p;) {
        unsigned k = ccai_utf8_len(p);
        if (!k) {
            *o++ = '?';
            p++;
            continue;
        }
        memcpy(o, p, k);
        o += k;
        p += k;
    }
    *o = '\0';
    return out;
}

Test(snapshot_model, hostile_upstream_names_are_shown_alike_in_both_snapshots) {
    static const run_cfg cfg = {"names", "history:8", false, false, false, false};
    char names[300][16];
    size_t n = 0;
    for (int c = 1; c < 256; c++) /* every byte between two letters */
        snprintf(names[n++], sizeof names[0], "a%cb", c);
    static const char *const cases[] = {"",
                                        "\"\\/\b\f\n\r\t",
                                        "\xc3\xa9\xe2\x82\xac\xf0\x9d\x84\x9e",
                                        "\xe2\x82",
                                        "\xe2\x82x",
                                        "\xc0\xaf\xc1\xbf",
                                        "\xed\xa0\x80",
                                        "\xf4\x90\x80\x80",
                                        "\xf0\x9d\x84",
                                        "\xff\xfe\xfd",
                                        "\x80\xbf"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        snprintf(names[n++], sizeof names[0], "%s", cases[i]);
    size_t long_len = 70000;
    char *longname = malloc(long_len + 1);
    for (size_t i = 0; i < long_len; i++)
        longname[i] = "\"\\\x01\xe2\x82\xac\xff"[i % 7];
    longname[long_len] = '\0';
    for (size_t i = 0; i <= n; i++) {
        const char *name = i < n ? names[i] : longname;
        /* a name is kept to its first 31 bytes (ccalloc.h): here four
         * whole patterns and three bytes of the fifth */
        char *want = i < n ? shown(name) : strdup("\"\\\x01\xe2\x82\xac?\"\\\x01\xe2\x82\xac?\"\\\x01\xe2\x82\xac?"
                                                 "\"\\\x01\xe2\x82\xac?\"\\\x01");
        model *m = calloc(1, sizeof *m);
        model_open(m, &cfg, name, want); /* audits: both snapshots show `want` */
        m->s[0].req = 1000;
        m->s[0].dom = -1;
        m->s[0].p = tu_alloc(m->a, 1000, NULL);
        audit(m, "with a block");
        model_close(m);
        free(m);
        free(want);
    }
    free(longname);
}

/* ============================================================================ */
/* allocator_settings.max_split_size                                            */
/* ============================================================================ */

/* PyTorch's max_split_size is an int64 with -1 for "none" (SIZE_MAX cast);
 * ccalloc's max_split is a size_t up to SIZE_MAX. A value that fits is
 * written as it is; off, and any value above INT64_MAX (no block can be
 * that large: the same as none), as -1, never as a negative number of
 * bytes nor as a 9-byte integer (the web viewer reads at most 8). */
Test(snapshot_model, max_split_size_is_the_config_value_or_minus_one) {
    static const struct {
        const char *conf;
        int64_t want;
    } cases[] = {
        {"expandable:0,max_split:0", -1},
        {"expandable:0,max_split:24M", 24 << 20},
        {"expandable:0,max_split:9223372036854775807", INT64_MAX},
        {"expandable:0,max_split:9223372036854775808", -1},
        {"expandable:0,max_split:18446744073709551615", -1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cca_upstream *u;
        cca_allocator *a;
        tu_host_allocator(64 * MiB, cases[i].conf, &u, &a);
        snaps s;
        take_snaps(a, &s, cases[i].conf);
        const pr_value *settings = pget(s.pv, "allocator_settings", PR_DICT, cases[i].conf);
        cr_assert_eq(pint(settings, "max_split_size", cases[i].conf), cases[i].want,
                     "%s: max_split_size %" PRId64 ", expected %" PRId64, cases[i].conf,
                     pint(settings, "max_split_size", cases[i].conf), cases[i].want);
        free_snaps(&s);
        tu_teardown(a, u);
    }
}

/* ============================================================================ */
/* Integers at the opcodes' edges                                               */
/* ============================================================================ */

/* An upstream of made-up addresses from 2^63 up, 64 GiB apart (the
 * allocator never touches device memory): the pickle's addresses need
 * LONG1's ninth, zero byte to stay positive. */
static cca_status high_alloc(void *ctx, size_t size, void **ptr) {
    (void)size;
    uint64_t *k = ctx;
    *ptr = (void *)(uintptr_t)(((uint64_t)1 << 63) + (*k)++ * ((uint64_t)64 << 30));
    return CCA_OK;
}
static cca_status high_free(void *ctx, void *ptr, size_t size) {
    (void)ctx, (void)ptr, (void)size;
    return CCA_OK;
}

/* Streams are int64 (negative: BININT down to INT32_MIN, LONG1 below it,
 * its 0xff bytes trimmed only while the sign stays); sizes and addresses
 * unsigned (BININT up to INT32_MAX, LONG1 above it). Each segment, its
 * block and its alloc event read back as written. */
Test(snapshot_model, integers_at_every_opcode_edge_read_back_exact) {
    static const struct {
        int64_t stream;
        size_t requested;
    } cases[] = {
        {INT32_MIN, 0x7fffffff},
        {(int64_t)INT32_MIN - 1, 0x80000000},
        {-((int64_t)1 << 32), 0xffffffff},
        {INT64_MIN, (size_t)1 << 32},
        {INT64_MAX, 1000},
        {0x80000000, 3000},
        {0xffffffff, 0x7fffff00},
    };
    enum { N = sizeof cases / sizeof cases[0] };
    uint64_t next = 0;
    cca_upstream_ops ops = {.alloc = high_alloc, .free = high_free, .name = "high"};
    cca_upstream *u;
    cr_assert_eq(cca_upstream_custom_create(&ops, &next, &u), CCA_OK, "%s", cca_last_error());
    cca_allocator *a = tu_allocator(u, "expandable:0,history:64");
    void *p[N];
    for (size_t i = 0; i < N; i++) /* a segment each: one per stream */
        cr_assert_eq(cca_alloc(a, cases[i].requested, (cca_stream)(intptr_t)cases[i].stream, &p[i]), CCA_OK, "%s",
                     cca_last_error());
    snaps s;
    take_snaps(a, &s, "edges");
    const pr_value *segs = pget(s.pv, "segments", PR_LIST, "edges");
    cr_assert_eq(segs->count, N);
    const pr_value *trace = pget(s.pv, "device_traces", PR_LIST, "edges")->items[0];
    size_t ev = 0;
    for (size_t i = 0; i < N; i++) {
        char at[64];
        snprintf(at, sizeof at, "edges: segment %zu", i);
        __int128 base = (__int128)(((uint64_t)1 << 63) + i * ((uint64_t)64 << 30));
        const pr_value *g = segs->items[i];
        cr_assert(pget(g, "address", PR_INT, at)->i == base, "%s: address", at);
        cr_assert(pget(g, "stream", PR_INT, at)->i == cases[i].stream, "%s: stream %" PRId64, at, cases[i].stream);
        cr_assert(pget(g, "requested_size", PR_INT, at)->i == cases[i].requested, "%s: requested_size %zu", at,
                  cases[i].requested);
        const pr_value *b = pget(g, "blocks", PR_LIST, at)->items[0];
        cr_assert(pget(b, "address", PR_INT, at)->i == base && (void *)(uintptr_t)base == p[i], "%s: block", at);
        cr_assert(pget(b, "requested_size", PR_INT, at)->i == cases[i].requested, "%s: block requested_size", at);
        while (ev < trace->count && strcmp(pget(trace->items[ev], "action", PR_STR, at)->s, "alloc") != 0)
            ev++;
        cr_assert_lt(ev, trace->count, "%s: its alloc event", at);
        const pr_value *e = trace->items[ev++];
        cr_assert(pget(e, "addr", PR_INT, at)->i == base, "%s: event addr", at);
        cr_assert(pget(e, "size", PR_INT, at)->i == cases[i].requested, "%s: event size", at);
        cr_assert(pget(e, "stream", PR_INT, at)->i == cases[i].stream, "%s: event stream", at);
    }
    free_snaps(&s);
    for (size_t i = 0; i < N; i++)
        tu_free(a, p[i]);
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    cca_upstream_destroy(u);
}

/* ============================================================================ */
/* Domains with the same name                                                   */
/* ============================================================================ */

/* Names need not be unique (ccalloc.h), so a segment's domain name alone
 * cannot say whose it is: each JSON segment carries "domain_index", the
 * position of its domain in "domains" (the default first, then in creation
 * order), which is the pickle's segment_pool_id (0, k). */
Test(snapshot_model, segments_of_domains_with_one_name_are_told_apart) {
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(256 * MiB, NULL, &u, &a);
    cca_domain *d[3];
    const char *names[3] = {"twin", "twin", "default"};
    for (int k = 0; k < 3; k++)
        cr_assert_eq(cca_domain_create(a, names[k], &d[k]), CCA_OK);
    void *p[4];
    for (int k = 0; k < 4; k++) /* (k + 1) MiB each: the default domain, then d[0..2] */
        cr_assert_eq(cca_alloc_in(a, k ? d[k - 1] : NULL, (size_t)(k + 1) * MiB, NULL, &p[k]), CCA_OK);
    snaps s;
    take_snaps(a, &s, "twins");
    const cJSON *segs = jget(s.js, "segments", "twins"), *g;
    const pr_value *psegs = pget(s.pv, "segments", PR_LIST, "twins");
    cr_assert_eq((size_t)cJSON_GetArraySize(segs), psegs->count, "classic segments: one pickle segment each");
    size_t i = 0, seen = 0;
    cJSON_ArrayForEach(g, segs) {
        uint64_t k = jnum(g, "domain_index", "twins");
        cr_assert_lt(k, 4);
        const char *want = k == 0 ? "default" : names[k - 1];
        cr_assert_str_eq(jstr(g, "domain", "twins"), want);
        const pr_value *pool = pget(psegs->items[i++], "segment_pool_id", PR_TUPLE, "twins");
        cr_assert_eq(pool->items[1]->i, (__int128)k, "the pickle's pool id and the JSON's domain_index differ");
        /* the segment holds the block of that domain: (k + 1) MiB live */
        const cJSON *b;
        cJSON_ArrayForEach(b, jget(g, "blocks", "twins")) {
            if (strcmp(jstr(b, "state", "twins"), "live") == 0) {
                cr_assert_eq(jnum(b, "requested", "twins"), (k + 1) * MiB, "segment of domain %" PRIu64, k);
                seen |= (size_t)1 << k;
            }
        }
    }
    cr_assert_eq(seen, 0xf, "every domain's block found under its own index");
    free_snaps(&s);
    for (int k = 0; k < 4; k++)
        tu_free(a, p[k]);
    tu_teardown(a, u);
}

/* A domain's number (its position in "domains", the pickle's pool id) is
 * kept per domain and made again only after a destroy that moved others
 * (domain.c, ccai_domain_number): after every create and every destroy,
 * first, middle or last, each segment names its own domain's position,
 * in the JSON and in the pickle. Each domain's one block has a size of its
 * own, so the block says whose segment it is. */
static void check_numbers(const cca_allocator *a, int order[], int n, const char *what) {
    snaps s;
    take_snaps(a, &s, what);
    const cJSON *segs = jget(s.js, "segments", what), *doms = jget(s.js, "domains", what), *g;
    const pr_value *psegs = pget(s.pv, "segments", PR_LIST, what);
    cr_assert_eq(cJSON_GetArraySize(doms), n + 1, "%s: the default domain and %d others", what, n);
    size_t i = 0, seen = 0;
    cJSON_ArrayForEach(g, segs) {
        uint64_t k = jnum(g, "domain_index", what);
        const pr_value *pool = pget(psegs->items[i++], "segment_pool_id", PR_TUPLE, what);
        cr_assert_eq(pool->items[1]->i, (__int128)k, "%s: the pickle's pool id and the JSON's domain_index differ",
                     what);
        const cJSON *b;
        cJSON_ArrayForEach(b, jget(g, "blocks", what)) {
            if (strcmp(jstr(b, "state", what), "live") != 0)
                continue;
            int id = (int)(jnum(b, "requested", what) / MiB) - 1; /* domain id + 1 MiB */
            int at = 0;
            while (at < n && order[at] != id)
                at++;
            cr_assert_lt(at, n, "%s: a block of domain %d, destroyed", what, id);
            cr_assert_eq(k, (uint64_t)at + 1, "%s: domain %d is number %d, its segment says %" PRIu64, what, id, at + 1,
                         k);
            seen++;
        }
    }
    cr_assert_eq(seen, (size_t)n, "%s: every domain's block found", what);
    free_snaps(&s);
}

/* each: a snapshot after every step; else after the last one only, so
 * that creates and destroys follow a destroy that marked the numbers stale
 * (the invariant walk after each step holds every number kept fresh) */
static void numbers_run(bool each) {
    enum { MAX = 12 };
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(512 * MiB, "expandable:0", &u, &a);
    cca_domain *d[MAX];
    void *p[MAX];
    int order[MAX], n = 0, next = 0; /* ids of the live domains, in creation order */
    /* + create, digit: destroy the domain at that position (0 first) */
    const char *steps[] = {"+", "+", "+", "+", "+", "1", "3", "+", "0", "+", "+", "4", "+", "2", "0", "+"};
    for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
        if (steps[s][0] == '+') {
            int id = next++;
            char name[16];
            snprintf(name, sizeof name, "m%d", id);
            cr_assert_eq(cca_domain_create(a, name, &d[id]), CCA_OK);
            cr_assert_eq(cca_alloc_in(a, d[id], (size_t)(id + 1) * MiB, NULL, &p[id]), CCA_OK);
            order[n++] = id;
        } else {
            int at = steps[s][0] - '0', id = order[at];
            tu_free(a, p[id]);
            cr_assert_eq(cca_domain_destroy(a, d[id], 0, NULL), CCA_OK, "%s", cca_last_error());
            memmove(&order[at], &order[at + 1], (size_t)(n - at - 1) * sizeof order[0]);
            n--;
        }
        char what[32];
        snprintf(what, sizeof what, "step %zu (%s)", s, steps[s]);
        tu_check(a);
        if (each || s + 1 == sizeof steps / sizeof steps[0])
            check_numbers(a, order, n, what);
    }
    for (int k = 0; k < n; k++)
        tu_free(a, p[order[k]]);
    tu_teardown(a, u);
}

Test(snapshot_model, domain_numbers_follow_creates_and_destroys) {
    numbers_run(true);
}
Test(snapshot_model, domain_numbers_made_again_after_destroys_and_creates) {
    numbers_run(false);
}
