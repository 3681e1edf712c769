/*
 * fuzz_api.c — a coverage-guided ACTION fuzzer for the allocator's public API
 * (libFuzzer; built with -DCCA_BUILD_FUZZ=ON, run by scripts/fuzz.sh api).
 *
 * An input is a small program. Its first bytes choose a CONFIGURATION:
 * policy (growth / greedy), expandable segments, pool geometry (small_max,
 * small_segment, medium_segment, large_min, segment_round, max_split, the
 * small and medium pools on or off), a max_reserved cap, the simulated
 * device's capacity (tiny and odd ones included), mapping granularity and
 * backing (pages, or whole maps cut at one of four largest-map sizes, set
 * through the growth rule's test hook, ccai_pages_rule_set), the ahead
 * (expandable_ahead 1/16, or 0),
 * hold_peak (half the growth configurations),
 * whether the device has events at all, whether its events complete at once
 * or are held until the program completes them, and an ERROR MODE that lets
 * the program pass bad pointers. The rest is a sequence of ACTIONS, one per
 * opcode byte: cca_alloc / cca_alloc_in (sizes from 0 to near SIZE_MAX, on
 * four streams), cca_free, cca_record_stream, cca_trim (several keeps),
 * cca_empty_cache, stats and peak resets, the JSON and pickle writers into
 * a memory stream, domains (create with fuzzed names, release, force,
 * destroy, reserve an arena), cca_trace_mark with fuzzed names (every
 * allocator records a CCALLOC_TRACE to /dev/null), completing
 * held events, arming upstream FAULTs, SLEEP AND WAKE (cca_domain_sleep
 * of the default or a created domain with flags 0, CCA_SLEEP_DISCARD or an
 * unknown one, cca_domain_wake, cca_sleep, cca_wake; every other action
 * also runs while domains sleep), and in error mode double frees,
 * interior and unknown pointers, and domain handles that are not the
 * allocator's (destroyed, a stack byte, a block's address).
 *
 * The device is the host upstream (upstream/host.c) behind a wrapper made
 * with cca_upstream_custom_create that (a) refuses the call a FAULT action
 * chose (alloc, free, mem_info, synchronize, event_record, vm_reserve,
 * vm_map, vm_unmap, vm_release, and sleep's host_alloc, host_free, copy,
 * copy_wait, stream_synchronize; once or until disarmed; a quarter of the
 * configurations have no host and copy ops, half no stream_synchronize),
 * counting the host memory outstanding (a refused host_free: kept, freed
 * at the end), and (b) simulates stream events: an event records (stream,
 * sequence number) and is complete once its stream's watermark passed it
 * (a COMPLETE action or a successful synchronize, or its stream's, moves
 * it), so the allocator's pending frees really wait.
 *
 * THE MODEL, checked after every action (any mismatch aborts = a finding):
 *   - cca_check_invariants is CCA_OK;
 *   - every live block: aligned to CCA_ALIGNMENT, cca_block_size >= the
 *     request rounded to CCA_GRANULARITY, no overlap with any other live
 *     block nor with a freed block whose events are not complete yet (a
 *     block reused before its stream work finished), its byte pattern
 *     intact (head, tail and one word per 64 KiB: catches overlap and
 *     memory unmapped under a live block; a sleeping domain's blocks are
 *     not read: unmapped);
 *   - stats: allocated / requested bytes and active blocks equal the sums
 *     over live blocks plus the pending ones (exactly when the number of
 *     pending blocks is known, bounded otherwise), peaks >= current values,
 *     reserved >= the awake domains' allocated, reserved <= max_reserved
 *     when set, the per-domain stats sum to the totals; the wrapper's own
 *     upstream counters (cca_upstream_get_stats) equal reserved_bytes,
 *     address_space_bytes and mapped_bytes, and its host bytes the stats'
 *     host_bytes plus what a refused host_free left;
 *   - sleep: each domain's asleep as the model's, asleep_domains and
 *     host_bytes their sums; a sleeping domain has cached and largest free
 *     0, reserved 0 unless an unmap was refused; an awake one cached =
 *     reserved - allocated and no host bytes; cached_bytes the awake sum;
 *   - a sleep: classic segments refused (UPSTREAM), an unknown flag
 *     INVALID_ARGUMENT, every other failure explained by a fault or no copy
 *     ops; refused: nothing changed (awake, reserved and host bytes kept);
 *     asleep after an error only for a refused unmap; the report counts the
 *     model's live blocks and rounded bytes (0 copied with DISCARD),
 *     unmapped = reserved before - after; a sleeping domain: nothing copied;
 *   - a wake: refused leaves it asleep, its host bytes kept, nothing mapped
 *     (but a refused unmap's pages); OK: every block keeps its address,
 *     size and domain, and its bytes unless DISCARD (then new bytes); an
 *     awake domain: nothing done;
 *   - cca_sleep: all asleep, or refused with every domain it put to sleep
 *     woken again (unless the message says one could not be; DISCARD's
 *     "contents are undefined": new bytes); cca_wake: in order, the domains
 *     woken, then the one refused and the rest asleep, host bytes kept;
 *   - while asleep: alloc / alloc_in in it CCA_ERR_ASLEEP with no upstream
 *     call (size 0: OK, NULL), domain_reserve ASLEEP, free and
 *     record_stream OK, a release that goes ahead frees its host memory,
 *     trim's report says asleep_domains and host_bytes;
 *   - every call returns a status the header documents for that call; a
 *     failed alloc leaves *out NULL; a request larger than the device (or
 *     max_reserved) fails with CCA_ERR_OUT_OF_MEMORY calling no upstream op
 *     and changing no counter but ooms; a bad pointer is
 *     CCA_ERR_INVALID_POINTER and changes nothing; empty-cache with nothing
 *     live returns reserved to 0; JSON output parses;
 *   - cca_destroy at the end (faults disarmed) returns CCA_ERR_LIVE_BLOCKS
 *     exactly when blocks are live (sleeping ones too), and leaves the
 *     upstream holding nothing: no memory, no address space, no host
 *     allocation but those a refused host_free left.
 *
 * Only what ccalloc.h promises is asserted. Costs per action: O(live
 * blocks) for the checks (at most FZ_MAX_LIVE of them), plus the
 * invariant walk.
 */
#include "ccalloc.h"
/* kinds/pages.h's test hook (linked from ccalloc_static): the growth rule's
 * fixed parts, set before the first request */
void ccai_pages_rule_set(cca_allocator *a, size_t least, size_t cap, size_t map_bytes);

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#define FZ_STREAMS 4
#define FZ_MAX_LIVE 128
#define FZ_MAX_PENDING 512
#define FZ_MAX_FREED 64
#define FZ_MAX_DOMAINS 4
#define FZ_MAX_EVENTS_PER_FREE 8
#define KiB ((size_t)1024)
#define MiB (1024 * KiB)

#define FZ_CHECK(cond, ...)                                                                                            \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            fprintf(stderr, "FUZZ CHECK FAILED %s:%d: %s\n  ", __FILE__, __LINE__, #cond);                             \
            fprintf(stderr, __VA_ARGS__);                                                                              \
            fprintf(stderr, "\n  last error: %s\n", cca_last_error());                                                 \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

/* ---- the input reader ------------------------------------------------------- */

typedef struct fz_in {
    const uint8_t *p;
    size_t n;
} fz_in;

static uint8_t in_u8(fz_in *in) {
    if (!in->n)
        return 0;
    in->n--;
    return *in->p++;
}

static uint32_t in_u32(fz_in *in) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v = v << 8 | in_u8(in);
    return v;
}

/* ---- the device wrapper: faults and held events ----------------------------- */

enum {
    FK_NONE,
    FK_ALLOC,
    FK_FREE,
    FK_MEMINFO,
    FK_SYNC,
    FK_EVREC,
    FK_VMRES,
    FK_VMMAP,
    FK_VMUNMAP,
    FK_VMREL,
    FK_HOSTALLOC,
    FK_HOSTFREE,
    FK_COPY,
    FK_COPYWAIT,
    FK_STREAMSYNC,
    FK_N
};

typedef struct fz_event {
    int stream;
    uint64_t seq;
} fz_event;

typedef struct fz_kept {
    void *p;
    size_t n;
} fz_kept;

typedef struct fz_dev {
    cca_upstream *host;
    /* per kind (several may be armed at once: an event record and the
     * synchronize that replaces it, say) */
    bool armed[FK_N];
    unsigned countdown[FK_N]; /* calls of that kind to let through first */
    bool sticky[FK_N];        /* fail every later call too, until disarmed */
    cca_status fault_st;      /* what alloc / vm_reserve / vm_map fail with (others: UPSTREAM) */
    uint64_t fired;          /* faults injected so far */
    uint64_t fired_kind[FK_N];
    bool meminfo_refused;    /* the allocator may not know the device's size yet
                                (segment.c asks until answered): no bound */
    uint64_t mutating_calls; /* alloc, free, sync and vm calls, granted or not */
    bool hold_events;
    uint64_t seq, done[FZ_STREAMS];
    uint64_t syncs_ok;
    long events_live;
    /* the events recorded since the log was last cleared (one free's) */
    fz_event log[FZ_MAX_EVENTS_PER_FREE];
    int log_n, log_lost;
    /* host memory (sleep's copies): what the upstream holds, and what the
     * allocator gave up on (a refused host_free: it stays with the upstream,
     * freed at the end of the input) */
    size_t host_bytes, host_allocs;
    fz_kept *kept;
    size_t nkept, kept_bytes;
} fz_dev;

static int stream_index(cca_stream s) {
    uintptr_t v = (uintptr_t)s / 0x1000;
    return v < FZ_STREAMS ? (int)v : 0;
}

static cca_stream stream_of(int i) { return (cca_stream)(uintptr_t)(0x1000u * (unsigned)i); }

/* FZ_TRACE=1 in the environment: every upstream call and action on stderr
 * (to read a finding; off while fuzzing). */
static int tracing = -1;
#define TRACE(...)                                                                                                     \
    do {                                                                                                               \
        if (tracing < 0)                                                                                               \
            tracing = getenv("FZ_TRACE") != NULL;                                                                      \
        if (tracing)                                                                                                   \
            fprintf(stderr, __VA_ARGS__);                                                                              \
    } while (0)

static const char *const kind_names[FK_N] = {"none",         "alloc",      "free",   "mem_info",  "synchronize",
                                             "event_record", "vm_reserve", "vm_map", "vm_unmap",  "vm_release",
                                             "host_alloc",   "host_free",  "copy",   "copy_wait", "stream_synchronize"};

static bool fault(fz_dev *d, int kind) {
    TRACE("  upstream %s\n", kind_names[kind]);
    if (!d->armed[kind])
        return false;
    if (d->countdown[kind]) {
        d->countdown[kind]--;
        return false;
    }
    if (!d->sticky[kind])
        d->armed[kind] = false;
    d->fired++;
    d->fired_kind[kind]++;
    d->meminfo_refused |= kind == FK_MEMINFO;
    return true;
}

/* A call that takes or gives memory (counted): CCA_OK to pass it on, else
 * the injected failure (memory takers fail with fault_st, host_alloc with
 * CCA_ERR_OUT_OF_MEMORY, its only documented failure, others with
 * CCA_ERR_UPSTREAM), its message naming the op. */
static cca_status refused(fz_dev *d, int kind) {
    d->mutating_calls++;
    if (!fault(d, kind))
        return CCA_OK;
    bool taker = kind == FK_ALLOC || kind == FK_VMRES || kind == FK_VMMAP;
    cca_status st = kind == FK_HOSTALLOC ? CCA_ERR_OUT_OF_MEMORY : taker ? d->fault_st : CCA_ERR_UPSTREAM;
    return cca_set_error(st, "fuzz: %s refused", kind_names[kind]);
}

static cca_status w_alloc(void *ctx, size_t size, void **ptr) {
    fz_dev *d = ctx;
    cca_status st = refused(d, FK_ALLOC);
    return st != CCA_OK ? st : cca_upstream_alloc(d->host, size, ptr);
}
static cca_status w_free(void *ctx, void *ptr, size_t size) {
    fz_dev *d = ctx;
    cca_status st = refused(d, FK_FREE);
    return st != CCA_OK ? st : cca_upstream_free(d->host, ptr, size);
}
static cca_status w_mem_info(void *ctx, size_t *f, size_t *t) {
    fz_dev *d = ctx;
    if (fault(d, FK_MEMINFO))
        return cca_set_error(CCA_ERR_UPSTREAM, "fuzz: mem_info refused");
    return cca_upstream_mem_info(d->host, f, t);
}
static cca_status w_sync(void *ctx) {
    fz_dev *d = ctx;
    cca_status st = refused(d, FK_SYNC);
    if (st != CCA_OK)
        return st;
    for (int i = 0; i < FZ_STREAMS; i++)
        d->done[i] = d->seq;
    d->syncs_ok++;
    return CCA_OK;
}
/* One stream's work done. Counted as a synchronize for the frees whose
 * own synchronize failed: the model then only asks less of the allocator. */
static cca_status w_stream_sync(void *ctx, cca_stream s) {
    fz_dev *d = ctx;
    cca_status st = refused(d, FK_STREAMSYNC);
    if (st != CCA_OK)
        return st;
    d->done[stream_index(s)] = d->seq;
    d->syncs_ok++;
    return CCA_OK;
}
static cca_status w_event_record(void *ctx, cca_stream s, void **event) {
    fz_dev *d = ctx;
    if (fault(d, FK_EVREC)) {
        *event = (void *)(uintptr_t)0xdead; /* must be ignored */
        return cca_set_error(CCA_ERR_UPSTREAM, "fuzz: event_record refused");
    }
    fz_event *e = malloc(sizeof *e);
    if (!e)
        return CCA_ERR_OUT_OF_MEMORY;
    e->stream = stream_index(s);
    e->seq = ++d->seq;
    if (!d->hold_events)
        d->done[e->stream] = e->seq;
    if (d->log_n < FZ_MAX_EVENTS_PER_FREE)
        d->log[d->log_n++] = *e;
    else
        d->log_lost = 1;
    d->events_live++;
    *event = e;
    return CCA_OK;
}
static bool event_done(const fz_dev *d, const fz_event *e) { return d->done[e->stream] >= e->seq; }
static cca_status w_event_query(void *ctx, void *event) {
    FZ_CHECK(event != (void *)(uintptr_t)0xdead, "a failed event_record's event was queried");
    return event_done(ctx, event) ? CCA_OK : CCA_ERR_NOT_READY;
}
static cca_status w_event_destroy(void *ctx, void *event) {
    fz_dev *d = ctx;
    FZ_CHECK(event != (void *)(uintptr_t)0xdead, "a failed event_record's event was destroyed");
    d->events_live--;
    free(event);
    return CCA_OK;
}
static cca_status w_vm_gran(void *ctx, size_t *b) { return cca_upstream_vm_granularity(((fz_dev *)ctx)->host, b); }
static cca_status w_vm_reserve(void *ctx, size_t size, void **base) {
    fz_dev *d = ctx;
    cca_status st = refused(d, FK_VMRES);
    return st != CCA_OK ? st : cca_upstream_vm_reserve(d->host, size, base);
}
static cca_status w_vm_release(void *ctx, void *base, size_t size) {
    fz_dev *d = ctx;
    cca_status st = refused(d, FK_VMREL);
    return st != CCA_OK ? st : cca_upstream_vm_release(d->host, base, size);
}
static cca_status w_vm_map(void *ctx, void *addr, size_t size) {
    fz_dev *d = ctx;
    cca_status st = refused(d, FK_VMMAP);
    return st != CCA_OK ? st : cca_upstream_vm_map(d->host, addr, size);
}
static cca_status w_vm_unmap(void *ctx, void *addr, size_t size) {
    fz_dev *d = ctx;
    cca_status st = refused(d, FK_VMUNMAP);
    return st != CCA_OK ? st : cca_upstream_vm_unmap(d->host, addr, size);
}

static cca_status w_host_alloc(void *ctx, size_t size, void **ptr) {
    fz_dev *d = ctx;
    cca_status st = refused(d, FK_HOSTALLOC);
    if (st == CCA_OK && (st = cca_upstream_host_alloc(d->host, size, ptr)) == CCA_OK) {
        d->host_bytes += size;
        d->host_allocs++;
    }
    return st;
}
static cca_status w_host_free(void *ctx, void *ptr, size_t size) {
    fz_dev *d = ctx;
    cca_status st = refused(d, FK_HOSTFREE);
    if (st != CCA_OK) { /* the allocator gives it up: the upstream keeps it */
        void *more = realloc(d->kept, (d->nkept + 1) * sizeof d->kept[0]);
        FZ_CHECK(more != NULL, "host malloc for the kept host memory");
        d->kept = more;
        d->kept[d->nkept].p = ptr;
        d->kept[d->nkept++].n = size;
        d->kept_bytes += size;
        return st;
    }
    if ((st = cca_upstream_host_free(d->host, ptr, size)) == CCA_OK) {
        d->host_bytes -= size;
        d->host_allocs--;
    }
    return st;
}
static cca_status w_copy(void *ctx, void *dst, const void *src, size_t size, int to_host) {
    fz_dev *d = ctx;
    if (fault(d, FK_COPY))
        return cca_set_error(CCA_ERR_UPSTREAM, "fuzz: copy refused");
    return cca_upstream_copy(d->host, dst, src, size, to_host);
}
static cca_status w_copy_wait(void *ctx) {
    fz_dev *d = ctx;
    cca_status st = cca_upstream_copy_wait(d->host); /* a refusal too returns once no copy runs */
    if (st == CCA_OK && fault(d, FK_COPYWAIT))
        st = cca_set_error(CCA_ERR_UPSTREAM, "fuzz: copy_wait refused");
    return st;
}

/* ---- the model ------------------------------------------------------------ */

typedef struct fz_block {
    uint8_t *ptr;
    size_t req, size; /* requested; held (cca_block_size) */
    uint64_t seed;
    int dom; /* -1: the default domain, else an index into domains[] */
    int alloc_stream;
} fz_block;

typedef struct fz_pending {
    uint8_t *ptr;
    size_t req, size;
    int dom;
    fz_event ev[FZ_MAX_EVENTS_PER_FREE];
    int nev;
    bool needs_sync; /* free's fallback synchronize failed */
    uint64_t syncs_at_free;
} fz_pending;

typedef struct fz_world {
    fz_dev dev;
    cca_upstream *up;
    cca_allocator *a;
    cca_config cfg;
    size_t capacity;
    size_t chunk; /* over whole maps: the largest map (the growth rule's test hook) */
    bool error_mode, expandable, has_mem_info, has_copy;
    fz_block live[FZ_MAX_LIVE];
    int nlive;
    fz_pending pend[FZ_MAX_PENDING];
    int npend;
    void *freed[FZ_MAX_FREED]; /* pointers freed earlier: double-free candidates */
    int nfreed;
    cca_domain *domains[FZ_MAX_DOMAINS];
    unsigned born[FZ_MAX_DOMAINS], nborn; /* creation order (cca_sleep's and cca_wake's) */
    /* per domain, the default first (index dom + 1): asleep, and put to
     * sleep with CCA_SLEEP_DISCARD (its contents undefined after the wake) */
    bool asleep[FZ_MAX_DOMAINS + 1], discarded[FZ_MAX_DOMAINS + 1];
    cca_domain *dead[8]; /* destroyed handles: foreign from then on (error mode) */
    int ndead;
    uint64_t seed;
    FILE *mem;
    char *membuf;
    size_t memlen;
} fz_world;

static size_t round_up(size_t v, size_t m) { return (v + m - 1) / m * m; }

static uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* The pattern: the first and last 64 bytes, and one byte per 64 KiB. */
static void pattern(uint8_t *p, size_t size, uint64_t seed, bool check) {
    size_t head = size < 64 ? size : 64;
    for (size_t i = 0; i < head; i++) {
        uint8_t v = (uint8_t)mix(seed + i);
        if (check)
            FZ_CHECK(p[i] == v, "block %p (%zu bytes) corrupted at offset %zu", (void *)p, size, i);
        else
            p[i] = v;
    }
    for (size_t i = size > 64 ? size - 64 : size; i < size; i++) {
        uint8_t v = (uint8_t)mix(seed + i);
        if (check)
            FZ_CHECK(p[i] == v, "block %p (%zu bytes) corrupted at offset %zu", (void *)p, size, i);
        else
            p[i] = v;
    }
    for (size_t i = 64 * KiB; i + 64 < size; i += 64 * KiB) { /* clear of the tail */
        uint8_t v = (uint8_t)mix(seed ^ i);
        if (check)
            FZ_CHECK(p[i] == v, "block %p (%zu bytes) corrupted at offset %zu", (void *)p, size, i);
        else
            p[i] = v;
    }
}

static bool pending_done(const fz_world *w, const fz_pending *p) {
    if (p->needs_sync && w->dev.syncs_ok <= p->syncs_at_free)
        return false;
    for (int i = 0; i < p->nev; i++)
        if (!event_done(&w->dev, &p->ev[i]))
            return false;
    return true;
}

static bool overlaps(const uint8_t *a, size_t an, const uint8_t *b, size_t bn) { return a < b + bn && b < a + an; }

static void remember_freed(fz_world *w, void *p) {
    if (w->nfreed < FZ_MAX_FREED)
        w->freed[w->nfreed++] = p;
    else
        w->freed[mix(w->seed++) % FZ_MAX_FREED] = p;
}

/* ---- the checks after every step -------------------------------------------- */

static void check_world(fz_world *w) {
    cca_status st = cca_check_invariants(w->a);
    FZ_CHECK(st == CCA_OK, "cca_check_invariants: %s", cca_status_string(st));
    cca_stats s;
    cca_get_stats(w->a, &s);
    size_t live_alloc = 0, live_req = 0;
    for (int i = 0; i < w->nlive; i++) {
        fz_block *b = &w->live[i];
        live_alloc += b->size;
        live_req += b->req;
        if (!w->asleep[b->dom + 1]) /* asleep: unmapped, a touch faults */
            pattern(b->ptr, b->req, b->seed, true);
        size_t held = 0;
        FZ_CHECK(cca_block_size(w->a, b->ptr, &held) == CCA_OK && held == b->size, "live block %p: size %zu, was %zu",
                 (void *)b->ptr, held, b->size);
    }
    /* pending blocks: a block the model holds pending whose events are not
     * complete must still be pending in the allocator */
    size_t p_all = 0, p_must = 0;
    int n_must = 0;
    for (int i = 0; i < w->npend; i++) {
        p_all += w->pend[i].size;
        if (!pending_done(w, &w->pend[i])) {
            p_must += w->pend[i].size;
            n_must++;
        }
    }
    FZ_CHECK((size_t)n_must <= s.pending_blocks && s.pending_blocks <= (size_t)w->npend,
             "pending_blocks %zu, the model: %d not complete, %d in all", s.pending_blocks, n_must, w->npend);
    if (s.pending_blocks == 0) {
        w->npend = 0;
        p_all = p_must = 0;
    }
    if (s.pending_blocks == (size_t)w->npend) {
        FZ_CHECK(s.allocated_bytes == live_alloc + p_all, "allocated_bytes %zu, model %zu + pending %zu",
                 s.allocated_bytes, live_alloc, p_all);
    } else {
        FZ_CHECK(s.allocated_bytes >= live_alloc + p_must && s.allocated_bytes <= live_alloc + p_all,
                 "allocated_bytes %zu outside [%zu, %zu]", s.allocated_bytes, live_alloc + p_must, live_alloc + p_all);
    }
    /* requested bytes are the live blocks' only: a free uncounts them at once (alloc.c) */
    FZ_CHECK(s.requested_bytes == live_req, "requested_bytes %zu, model %zu", s.requested_bytes, live_req);
    FZ_CHECK(s.active_blocks == (size_t)w->nlive + s.pending_blocks, "active_blocks %zu, live %d + pending %zu",
             s.active_blocks, w->nlive, s.pending_blocks);
    FZ_CHECK(s.allocated_bytes_peak >= s.allocated_bytes && s.reserved_bytes_peak >= s.reserved_bytes &&
                 s.requested_bytes_peak >= s.requested_bytes && s.active_blocks_peak >= s.active_blocks &&
                 s.segments_peak >= s.segments,
             "a peak below its current value");
    if (w->cfg.max_reserved)
        FZ_CHECK(s.reserved_bytes <= w->cfg.max_reserved, "reserved %zu over max_reserved %zu", s.reserved_bytes,
                 w->cfg.max_reserved);
    cca_upstream_stats us;
    FZ_CHECK(cca_upstream_get_stats(w->up, &us) == CCA_OK, "upstream stats");
    FZ_CHECK(us.bytes_in_use == s.reserved_bytes, "upstream bytes_in_use %zu != reserved %zu", us.bytes_in_use,
             s.reserved_bytes);
    FZ_CHECK(us.vm_reserved_bytes == s.address_space_bytes, "upstream vm_reserved %zu != address_space %zu",
             us.vm_reserved_bytes, s.address_space_bytes);
    FZ_CHECK(us.vm_mapped_bytes == s.mapped_bytes, "upstream vm_mapped %zu != mapped %zu", us.vm_mapped_bytes,
             s.mapped_bytes);
    /* the domains add up; a sleeping one's live bytes are on the host: it
     * counts in allocated, not in reserved nor cached */
    size_t d_alloc = 0, d_res = 0, d_active = 0, awake_alloc = 0, awake_cached = 0, asleep = 0, host = 0;
    for (int i = -1; i < FZ_MAX_DOMAINS; i++) {
        if (i >= 0 && !w->domains[i])
            continue;
        cca_domain_stats ds;
        st = cca_get_domain_stats(w->a, i < 0 ? NULL : w->domains[i], &ds);
        FZ_CHECK(st == CCA_OK, "cca_get_domain_stats: %s", cca_status_string(st));
        d_alloc += ds.allocated_bytes;
        d_res += ds.reserved_bytes;
        d_active += ds.active_blocks;
        host += ds.host_bytes;
        FZ_CHECK(ds.asleep == w->asleep[i + 1], "domain %d: asleep %d, the model %d", i, ds.asleep, w->asleep[i + 1]);
        if (ds.asleep) {
            asleep++;
            FZ_CHECK(ds.cached_bytes == 0 && ds.largest_free_block == 0 && ds.fragmentation == 0,
                     "sleeping domain %d: cached %zu, largest free %zu", i, ds.cached_bytes, ds.largest_free_block);
            FZ_CHECK(ds.reserved_bytes == 0 || w->dev.fired_kind[FK_VMUNMAP],
                     "sleeping domain %d holds %zu bytes with no unmap refused", i, ds.reserved_bytes);
        } else {
            FZ_CHECK(ds.reserved_bytes >= ds.allocated_bytes, "domain %d: reserved < allocated", i);
            FZ_CHECK(ds.cached_bytes == ds.reserved_bytes - ds.allocated_bytes && ds.host_bytes == 0,
                     "domain %d: cached %zu, reserved %zu, allocated %zu, host %zu", i, ds.cached_bytes,
                     ds.reserved_bytes, ds.allocated_bytes, ds.host_bytes);
            awake_alloc += ds.allocated_bytes;
            awake_cached += ds.cached_bytes;
        }
        if (s.pending_blocks == 0) {
            size_t m = 0;
            for (int k = 0; k < w->nlive; k++)
                if (w->live[k].dom == i)
                    m += w->live[k].size;
            FZ_CHECK(ds.allocated_bytes == m, "domain %d: allocated_bytes %zu, model %zu", i, ds.allocated_bytes, m);
        }
    }
    FZ_CHECK(d_alloc == s.allocated_bytes && d_res == s.reserved_bytes && d_active == s.active_blocks,
             "the domains' stats do not add up to the allocator's");
    FZ_CHECK(s.reserved_bytes >= awake_alloc, "reserved %zu < the awake domains' allocated %zu", s.reserved_bytes,
             awake_alloc);
    FZ_CHECK(s.cached_bytes == awake_cached, "cached %zu, the awake domains' %zu", s.cached_bytes, awake_cached);
    FZ_CHECK(s.asleep_domains == asleep && s.host_bytes == host,
             "asleep_domains %zu (model %zu), host_bytes %zu (domains %zu)", s.asleep_domains, asleep, s.host_bytes,
             host);
    FZ_CHECK(us.host_bytes_in_use == w->dev.host_bytes && w->dev.host_bytes == s.host_bytes + w->dev.kept_bytes,
             "host memory: upstream %zu, wrapper %zu, allocator %zu + given up %zu", us.host_bytes_in_use,
             w->dev.host_bytes, s.host_bytes, w->dev.kept_bytes);
}

static void forget_live(fz_world *w, int i) { w->live[i] = w->live[--w->nlive]; }

static void add_pending(fz_world *w, const fz_block *b, bool needs_sync) {
    FZ_CHECK(w->npend < FZ_MAX_PENDING, "the model's pending list is full"); /* > the steps of an input */
    fz_pending *p = &w->pend[w->npend++];
    p->ptr = b->ptr;
    p->req = b->req;
    p->size = b->size;
    p->dom = b->dom;
    p->nev = w->dev.log_n;
    memcpy(p->ev, w->dev.log, sizeof p->ev[0] * (size_t)p->nev);
    p->needs_sync = needs_sync;
    p->syncs_at_free = w->dev.syncs_ok;
}

/* ---- actions ------------------------------------------------------------------ */

static size_t pick_size(fz_world *w, fz_in *in) {
    uint8_t k = in_u8(in);
    switch (k % 16) {
    case 0: return 0;
    case 1: return 1 + in_u8(in);
    case 2: return 512u * (1 + in_u8(in) % 8) + (size_t)(in_u8(in) % 3) - 1;
    case 3: return 1 + (in_u32(in) % (64 * KiB));
    case 4: return 1 + (in_u32(in) % (2 * MiB));
    case 5: return 1 + (in_u32(in) % (12 * MiB));
    case 6: return w->capacity - (in_u8(in) % 2 ? 0 : 4096);
    case 7: return w->capacity + 1 + in_u8(in);
    case 8: return SIZE_MAX - in_u8(in);
    case 9: return SIZE_MAX - 512 * (size_t)in_u8(in) - 3 * MiB;
    case 10: return SIZE_MAX / 2 + in_u8(in) - 128;
    case 11: {
        /* On a device of unknown size a range is as large as its request,
         * and every walk of its page bitmap costs pages / 64 word reads
         * (seconds under this instrumentation for 2^33 pages): kept to
         * 2^36 there, so that one input runs in well under a second. */
        unsigned shift = 20 + in_u8(in) % 44;
        if (w->expandable && (!w->has_mem_info || w->dev.meminfo_refused) && shift > 36)
            shift = 36;
        return (size_t)1 << shift;
    }
    case 12: return w->cfg.small_max + in_u8(in) % 3 - 1;
    case 13: return w->cfg.large_min + in_u8(in) % 3 - 1;
    case 14: return w->cfg.small_segment + in_u8(in) % 3 - 1;
    default: return 1 + in_u32(in) % (w->capacity / 2 + 1);
    }
}

static bool stats_equal(const cca_stats *x, const cca_stats *y) {
    return x->allocated_bytes == y->allocated_bytes && x->requested_bytes == y->requested_bytes &&
           x->reserved_bytes == y->reserved_bytes && x->active_blocks == y->active_blocks &&
           x->pending_blocks == y->pending_blocks && x->cached_blocks == y->cached_blocks &&
           x->cached_bytes == y->cached_bytes && x->segments == y->segments && x->alloc_calls == y->alloc_calls &&
           x->free_calls == y->free_calls && x->upstream_allocs == y->upstream_allocs &&
           x->upstream_frees == y->upstream_frees && x->alloc_retries == y->alloc_retries && x->splits == y->splits &&
           x->merges == y->merges && x->mapped_bytes == y->mapped_bytes &&
           x->address_space_bytes == y->address_space_bytes && x->largest_free_block == y->largest_free_block &&
           x->allocated_bytes_peak == y->allocated_bytes_peak && x->reserved_bytes_peak == y->reserved_bytes_peak;
}

static void act_alloc(fz_world *w, fz_in *in, bool in_domain) {
    size_t size = pick_size(w, in);
    int si = in_u8(in) % FZ_STREAMS;
    int dom = -1;
    cca_domain *d = NULL;
    if (in_domain) {
        dom = in_u8(in) % (FZ_MAX_DOMAINS + 1) - 1;
        if (dom >= 0 && !(d = w->domains[dom]))
            dom = -1;
    }
    bool asleep = w->asleep[dom + 1];
    cca_stats before;
    cca_get_stats(w->a, &before);
    uint64_t calls_before = w->dev.mutating_calls, fired_before = w->dev.fired;
    void *p = (void *)(uintptr_t)1;
    cca_status st = in_domain ? cca_alloc_in(w->a, d, size, stream_of(si), &p) : cca_alloc(w->a, size, stream_of(si), &p);
    TRACE("  alloc%s(%zu, stream %d, domain %d) = %s %p\n", in_domain ? "_in" : "", size, si, dom,
          cca_status_string(st), p);
    if (st != CCA_OK) {
        FZ_CHECK(p == NULL, "a failed alloc left *out %p", p);
        FZ_CHECK(st == CCA_ERR_OUT_OF_MEMORY || st == CCA_ERR_INVALID_ARGUMENT || st == CCA_ERR_UPSTREAM ||
                     (st == CCA_ERR_ASLEEP && asleep),
                 "alloc(%zu): undocumented status %s", size, cca_status_string(st));
        if (st == CCA_ERR_INVALID_ARGUMENT)
            FZ_CHECK(size > SIZE_MAX / 2, "alloc(%zu) refused as an invalid argument", size);
        if (st == CCA_ERR_UPSTREAM)
            FZ_CHECK(w->dev.fired != fired_before, "alloc(%zu): CCA_ERR_UPSTREAM with no fault injected", size);
    } else if (size == 0) {
        FZ_CHECK(p == NULL, "alloc(0) gave %p", p);
    } else {
        FZ_CHECK(p != NULL, "alloc(%zu) OK with NULL", size);
    }
    if (asleep && !size)
        FZ_CHECK(st == CCA_OK, "alloc(0) in sleeping domain %d: %s", dom, cca_status_string(st));
    if (asleep && size) { /* refused, nothing done */
        FZ_CHECK(st == CCA_ERR_ASLEEP || (st == CCA_ERR_INVALID_ARGUMENT && size > SIZE_MAX / 2),
                 "alloc(%zu) in sleeping domain %d: %s", size, dom, cca_status_string(st));
        FZ_CHECK(w->dev.mutating_calls == calls_before, "alloc in a sleeping domain called the upstream");
        return;
    }
    if (size > SIZE_MAX - CCA_GRANULARITY)
        FZ_CHECK(st == CCA_ERR_INVALID_ARGUMENT, "alloc(%zu) whose rounding overflows: %s", size,
                 cca_status_string(st));
    /* a request that can never succeed: OOM at once, nothing touched (the
     * device's total is known through mem_info only) */
    size_t bound = w->has_mem_info && !w->dev.meminfo_refused ? w->capacity : SIZE_MAX;
    if (w->expandable && bound > ((size_t)32 << 40)) /* no range over the address budget */
        bound = (size_t)32 << 40;
    if (w->cfg.max_reserved && w->cfg.max_reserved < bound)
        bound = w->cfg.max_reserved;
    if (size > bound && size <= SIZE_MAX / 2) {
        FZ_CHECK(st == CCA_ERR_OUT_OF_MEMORY, "alloc(%zu) over the device/cap (%zu): %s", size, bound,
                 cca_status_string(st));
        FZ_CHECK(w->dev.mutating_calls == calls_before, "alloc(%zu) that can never succeed called the upstream",
                 size);
        cca_stats after;
        cca_get_stats(w->a, &after);
        FZ_CHECK(after.ooms == before.ooms + 1, "ooms not counted");
        /* step 3 of every alloc (completing pending frees whose events
         * finished) runs first: with frees pending, the counters may move */
        if (!before.pending_blocks)
            FZ_CHECK(stats_equal(&before, &after), "alloc(%zu) that can never succeed changed the allocator", size);
    }
    if (st != CCA_OK || !p)
        return;
    uint8_t *q = p;
    FZ_CHECK((uintptr_t)q % CCA_ALIGNMENT == 0, "%p not aligned", p);
    size_t held = 0;
    FZ_CHECK(cca_block_size(w->a, p, &held) == CCA_OK, "cca_block_size of a new block");
    FZ_CHECK(held >= round_up(size, CCA_GRANULARITY) && held % CCA_GRANULARITY == 0, "held %zu for %zu", held, size);
    cca_domain *got = (cca_domain *)(uintptr_t)1;
    FZ_CHECK(cca_domain_of(w->a, p, &got) == CCA_OK && got == d, "cca_domain_of a new block");
    for (int i = 0; i < w->nlive; i++)
        FZ_CHECK(!overlaps(q, held, w->live[i].ptr, w->live[i].size), "%p+%zu overlaps live %p+%zu", p, held,
                 (void *)w->live[i].ptr, w->live[i].size);
    for (int i = 0; i < w->npend; i++) {
        if (!overlaps(q, held, w->pend[i].ptr, w->pend[i].size))
            continue;
        FZ_CHECK(pending_done(w, &w->pend[i]), "%p+%zu reuses %p+%zu before its stream events completed", p, held,
                 (void *)w->pend[i].ptr, w->pend[i].size);
        w->pend[i--] = w->pend[--w->npend]; /* retired */
    }
    if (w->nlive == FZ_MAX_LIVE) { /* the model is full: give it straight back */
        FZ_CHECK(cca_free(w->a, p) == CCA_OK, "free of a new block");
        remember_freed(w, p);
        return;
    }
    fz_block *b = &w->live[w->nlive++];
    *b = (fz_block){q, size, held, mix(w->seed++), dom, si};
    pattern(q, size, b->seed, false);
}

static void act_free(fz_world *w, fz_in *in) {
    if (!w->nlive) {
        FZ_CHECK(cca_free(w->a, NULL) == CCA_OK, "free(NULL)");
        return;
    }
    int i = in_u8(in) % w->nlive;
    fz_block b = w->live[i];
    if (!w->asleep[b.dom + 1])
        pattern(b.ptr, b.req, b.seed, true);
    w->dev.log_n = 0;
    w->dev.log_lost = 0;
    uint64_t syncs = w->dev.syncs_ok;
    cca_status st = cca_free(w->a, b.ptr);
    TRACE("  free(%p, %zu bytes, stream %d) = %s\n", (void *)b.ptr, b.size, b.alloc_stream, cca_status_string(st));
    FZ_CHECK(st != CCA_ERR_INVALID_POINTER && st != CCA_ERR_INVALID_ARGUMENT, "free of a live block: %s",
             cca_status_string(st));
    forget_live(w, i);
    remember_freed(w, b.ptr);
    bool any_open = w->dev.log_lost != 0;
    for (int k = 0; k < w->dev.log_n; k++)
        if (!event_done(&w->dev, &w->dev.log[k]))
            any_open = true;
    if (st != CCA_OK) /* the fallback synchronize failed: consumed, pending until a synchronize */
        add_pending(w, &b, true);
    else if (w->dev.log_n || any_open || w->dev.syncs_ok != syncs)
        add_pending(w, &b, false); /* pending until the allocator polls its events */
}

static void act_record(fz_world *w, fz_in *in) {
    if (!w->nlive)
        return;
    fz_block *b = &w->live[in_u8(in) % w->nlive];
    int si = in_u8(in) % FZ_STREAMS;
    cca_status st = cca_record_stream(w->a, b->ptr, stream_of(si));
    TRACE("  record_stream(%p, %d) = %s\n", (void *)b->ptr, si, cca_status_string(st));
    FZ_CHECK(st == CCA_OK, "record_stream of a live block: %s", cca_status_string(st));
}

static void act_trim(fz_world *w, fz_in *in, bool empty) {
    static const size_t keeps[] = {0, 1, 511, 2 * MiB, 4 * MiB + 512, 20 * MiB, SIZE_MAX};
    size_t keep = keeps[in_u8(in) % (sizeof keeps / sizeof keeps[0])];
    cca_release_report r;
    memset(&r, 0xab, sizeof r);
    cca_stats s0;
    cca_get_stats(w->a, &s0);
    cca_status st = empty ? cca_empty_cache(w->a, &r) : cca_trim(w->a, keep, &r);
    TRACE("  %s(%zu) = %s\n", empty ? "empty_cache" : "trim", keep, cca_status_string(st));
    FZ_CHECK(st == CCA_OK || st == CCA_ERR_UPSTREAM || st == CCA_ERR_NOT_READY, "trim: undocumented %s",
             cca_status_string(st));
    cca_stats s;
    cca_get_stats(w->a, &s);
    FZ_CHECK(r.bytes_still_reserved == s.reserved_bytes, "report says %zu still reserved, stats %zu",
             r.bytes_still_reserved, s.reserved_bytes);
    FZ_CHECK(r.asleep_domains == s.asleep_domains && r.host_bytes == s.host_bytes,
             "report: %zu asleep, %zu host bytes; stats %zu, %zu", r.asleep_domains, r.host_bytes, s.asleep_domains,
             s.host_bytes);
    FZ_CHECK(r.bytes_released == s0.reserved_bytes - s.reserved_bytes, "report: %zu released, reserved %zu -> %zu",
             r.bytes_released, s0.reserved_bytes, s.reserved_bytes);
    FZ_CHECK(r.bytes_unmapped <= r.bytes_released || !w->expandable, "report: %zu unmapped, %zu released",
             r.bytes_unmapped, r.bytes_released);
    if (st == CCA_OK && (empty || keep == 0) && w->nlive == 0 && s.pending_blocks == 0)
        FZ_CHECK(s.reserved_bytes == 0 && s.segments == 0 && s.address_space_bytes == 0,
                 "empty-cache with nothing live left reserved %zu, %zu segments, %zu address space", s.reserved_bytes,
                 s.segments, s.address_space_bytes);
    if (st == CCA_OK && !empty && s.reserved_bytes > keep && !s.asleep_domains) /* asleep: on the host */
        FZ_CHECK(s.reserved_bytes >= s.allocated_bytes, "trim");
}

static void act_write(fz_world *w, fz_in *in) {
    rewind(w->mem);
    uint8_t k = in_u8(in) % 4;
    cca_status st;
    if (k == 0) {
        st = cca_write_snapshot_json(w->a, w->mem);
    } else if (k == 1) {
        cca_stats s;
        cca_get_stats(w->a, &s);
        st = cca_stats_write_json(&s, w->mem);
    } else if (k == 2) {
        st = cca_domain_stats_write_json(w->a, w->mem);
    } else {
        st = cca_write_snapshot_torch(w->a, in_u8(in) % 3, w->mem);
        FZ_CHECK(st == CCA_OK || st == CCA_ERR_OUT_OF_MEMORY, "snapshot_torch: %s", cca_status_string(st));
        return;
    }
    FZ_CHECK(st == CCA_OK, "writer %d: %s", k, cca_status_string(st));
    long len = ftell(w->mem);
    FZ_CHECK(len >= 0 && (size_t)len <= w->memlen, "memstream length");
    cJSON *j = cJSON_ParseWithLength(w->membuf, (size_t)len);
    FZ_CHECK(j != NULL, "writer %d wrote invalid JSON: %.*s", k, (int)(len > 2000 ? 2000 : len), w->membuf);
    cJSON_Delete(j);
}

static bool name_valid(const char *s, size_t max, bool backslash_ok) {
    size_t n = strlen(s);
    if (n < 1 || n > max)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c > 0x7e || c == '"' || c == ',' || (!backslash_ok && c == '\\'))
            return false;
    }
    return true;
}

static void read_name(fz_in *in, char *buf, size_t cap) {
    size_t n = in_u8(in) % 70;
    if (n >= cap)
        n = cap - 1;
    for (size_t i = 0; i < n; i++) {
        uint8_t c = in_u8(in);
        buf[i] = c & 0x80 ? (char)('a' + (c & 0xf)) : (char)(c ? c : 'z'); /* mostly printable */
    }
    buf[n] = 0;
}

static void act_mark(fz_world *w, fz_in *in) {
    char name[80];
    read_name(in, name, sizeof name);
    cca_status st = cca_trace_mark(w->a, name);
    bool ok = name_valid(name, CCA_MARK_MAX, true);
    FZ_CHECK(ok ? st == CCA_OK : st == CCA_ERR_INVALID_ARGUMENT, "trace_mark('%s'): %s", name, cca_status_string(st));
}

static void act_domain_create(fz_world *w, fz_in *in) {
    char name[80];
    read_name(in, name, sizeof name);
    int slot = -1;
    for (int i = 0; i < FZ_MAX_DOMAINS; i++)
        if (!w->domains[i])
            slot = i;
    if (slot < 0)
        return;
    cca_domain *d = NULL;
    cca_status st = cca_domain_create(w->a, name, &d);
    bool ok = name_valid(name, CCA_DOMAIN_NAME_MAX, false) && w->cfg.policy == CCA_POLICY_GROWTH;
    if (ok)
        FZ_CHECK(st == CCA_OK || st == CCA_ERR_OUT_OF_MEMORY, "domain_create('%s'): %s", name, cca_status_string(st));
    else
        FZ_CHECK(st == CCA_ERR_INVALID_ARGUMENT, "domain_create('%s') with a bad name or greedy: %s", name,
                 cca_status_string(st));
    if (st == CCA_OK) {
        w->domains[slot] = d;
        w->born[slot] = w->nborn++;
    }
}

/* After a release: blocks of domain `dom` the allocator no longer knows are gone. */
static void reconcile_domain(fz_world *w, int dom, bool may_go) {
    for (int i = 0; i < w->nlive; i++) {
        if (w->live[i].dom != dom)
            continue;
        size_t held = 0;
        cca_status st = cca_block_size(w->a, w->live[i].ptr, &held);
        if (st == CCA_OK) {
            FZ_CHECK(held == w->live[i].size, "a live block changed size in a release");
            continue;
        }
        FZ_CHECK(may_go && st == CCA_ERR_INVALID_POINTER, "a live block vanished in a release: %s",
                 cca_status_string(st));
        remember_freed(w, w->live[i].ptr);
        forget_live(w, i--);
    }
}

static void act_domain_release(fz_world *w, fz_in *in, bool destroy) {
    int dom = in_u8(in) % (FZ_MAX_DOMAINS + 1) - 1;
    cca_domain *d = dom >= 0 ? w->domains[dom] : NULL;
    if (dom >= 0 && !d)
        return;
    unsigned flags = in_u8(in) % 2 ? CCA_DOMAIN_FORCE : 0;
    cca_live_block leaks[4];
    cca_domain_report r = {.leaks = leaks, .leaks_cap = in_u8(in) % 5};
    int live_here = 0;
    for (int i = 0; i < w->nlive; i++)
        live_here += w->live[i].dom == dom;
    cca_domain_stats ds0;
    FZ_CHECK(cca_get_domain_stats(w->a, d, &ds0) == CCA_OK, "domain stats before a release");
    cca_status st = destroy ? cca_domain_destroy(w->a, d, flags, &r) : cca_domain_release(w->a, d, flags, &r);
    if (destroy && !d) {
        FZ_CHECK(st == CCA_ERR_INVALID_ARGUMENT, "destroying the default domain: %s", cca_status_string(st));
        return;
    }
    FZ_CHECK(st == CCA_OK || st == CCA_ERR_LIVE_BLOCKS || st == CCA_ERR_UPSTREAM, "domain release: undocumented %s",
             cca_status_string(st));
    FZ_CHECK(r.leaks_written <= r.leaks_cap && r.leaks_written <= r.live_blocks, "report leaks_written");
    if (st != CCA_ERR_INVALID_ARGUMENT && !(destroy && st == CCA_OK)) {
        cca_domain_stats ds1;
        FZ_CHECK(cca_get_domain_stats(w->a, d, &ds1) == CCA_OK, "domain stats after a release");
        FZ_CHECK(r.bytes_released == ds0.reserved_bytes - ds1.reserved_bytes &&
                     r.bytes_still_reserved == ds1.reserved_bytes,
                 "domain report: %zu released, %zu still reserved; stats %zu -> %zu", r.bytes_released,
                 r.bytes_still_reserved, ds0.reserved_bytes, ds1.reserved_bytes);
    }
    if (!flags && live_here) {
        FZ_CHECK(st != CCA_OK, "domain release without force and %d live blocks: OK", live_here);
    }
    if (st == CCA_ERR_LIVE_BLOCKS)
        FZ_CHECK(r.live_blocks >= (size_t)(flags ? 0 : live_here), "report: %zu live, model %d", r.live_blocks,
                 live_here);
    reconcile_domain(w, dom, flags != 0);
    if (w->asleep[dom + 1] && !(destroy && st == CCA_OK)) { /* went ahead: its host memory went */
        cca_domain_stats ds;
        FZ_CHECK(cca_get_domain_stats(w->a, d, &ds) == CCA_OK, "domain stats after a release");
        FZ_CHECK(st != CCA_OK || ds.host_bytes == 0, "a sleeping domain released keeps %zu host bytes", ds.host_bytes);
        for (int i = 0; i < w->nlive && !ds.asleep; i++)
            FZ_CHECK(w->live[i].dom != dom, "a released sleeping domain woke with live blocks");
        w->asleep[dom + 1] = ds.asleep;
    }
    if (st == CCA_OK && !(destroy && d)) { /* released whole: the domain stays, empty */
        cca_domain_stats ds;
        FZ_CHECK(cca_get_domain_stats(w->a, d, &ds) == CCA_OK, "domain stats after a release");
        FZ_CHECK(ds.reserved_bytes == 0 && ds.segments == 0 && ds.active_blocks == 0,
                 "a released domain holds %zu bytes in %zu segments, %zu blocks", ds.reserved_bytes, ds.segments,
                 ds.active_blocks);
        FZ_CHECK(r.bytes_still_reserved == 0, "report: %zu still reserved", r.bytes_still_reserved);
    }
    if (destroy && st == CCA_OK) {
        FZ_CHECK(!flags ? live_here == 0 : true, "destroyed with live blocks");
        for (int i = 0; i < w->nlive; i++)
            FZ_CHECK(w->live[i].dom != dom, "a block of a destroyed domain is still live");
        w->dead[w->ndead++ % 8] = w->domains[dom];
        w->domains[dom] = NULL;
        w->asleep[dom + 1] = w->discarded[dom + 1] = false;
    }
}

static void act_domain_reserve(fz_world *w, fz_in *in) {
    int dom = in_u8(in) % (FZ_MAX_DOMAINS + 1) - 1;
    cca_domain *d = dom >= 0 ? w->domains[dom] : NULL;
    if (dom >= 0 && !d)
        return;
    size_t bytes = in_u8(in) % 8 == 0 ? 0 : pick_size(w, in);
    cca_status st = cca_domain_reserve(w->a, d, bytes);
    FZ_CHECK(st == CCA_OK || st == CCA_ERR_INVALID_ARGUMENT || st == CCA_ERR_OUT_OF_MEMORY || st == CCA_ERR_UPSTREAM ||
                 (st == CCA_ERR_ASLEEP && w->asleep[dom + 1]),
             "domain_reserve(%zu): undocumented %s", bytes, cca_status_string(st));
    if (w->asleep[dom + 1])
        FZ_CHECK(st == CCA_ERR_ASLEEP || st == CCA_ERR_INVALID_ARGUMENT, "domain_reserve in a sleeping domain: %s",
                 cca_status_string(st));
    if (bytes == 0 || bytes > SIZE_MAX / 2 || w->cfg.policy == CCA_POLICY_GREEDY)
        FZ_CHECK(st == CCA_ERR_INVALID_ARGUMENT, "domain_reserve(%zu): %s", bytes, cca_status_string(st));
}

static void act_fault(fz_world *w, fz_in *in) {
    uint8_t k = in_u8(in);
    int kind = 1 + k % (FK_N - 1);
    w->dev.armed[kind] = true;
    w->dev.countdown[kind] = in_u8(in) % 4;
    w->dev.sticky[kind] = (k & 0x80) != 0;
    w->dev.fault_st = k & 0x40 ? CCA_ERR_UPSTREAM : CCA_ERR_OUT_OF_MEMORY;
}

static void act_complete(fz_world *w, fz_in *in) {
    uint8_t k = in_u8(in);
    if (k % (FZ_STREAMS + 1) == FZ_STREAMS)
        for (int i = 0; i < FZ_STREAMS; i++)
            w->dev.done[i] = w->dev.seq;
    else
        w->dev.done[k % (FZ_STREAMS + 1)] = w->dev.seq;
}

/* Error mode: a domain handle that is not one of the allocator's (a
 * destroyed one, a host stack byte, a block's address) is refused by
 * cca_alloc_in and cca_domain_reserve with CCA_ERR_INVALID_ARGUMENT,
 * without being read (ASan would see a read of the stack byte). */
static void act_bad_domain(fz_world *w, fz_in *in) {
    uint8_t k = in_u8(in);
    cca_domain *d;
    switch (k % 3) {
    case 0:
        if (!w->ndead)
            return;
        d = w->dead[in_u8(in) % (w->ndead < 8 ? w->ndead : 8)];
        break;
    case 1: d = (cca_domain *)&k; break;
    default:
        if (!w->nlive)
            return;
        d = (cca_domain *)w->live[in_u8(in) % w->nlive].ptr;
        break;
    }
    for (int i = 0; i < FZ_MAX_DOMAINS; i++)
        if (w->domains[i] == d)
            return; /* a handle's address given to a new domain: valid */
    cca_stats before, after;
    cca_get_stats(w->a, &before);
    uint64_t calls = w->dev.mutating_calls;
    cca_status st;
    if (k & 0x80) {
        st = cca_domain_reserve(w->a, d, 1 + in_u32(in) % (4 * MiB));
    } else {
        void *p = (void *)1;
        st = cca_alloc_in(w->a, d, in_u8(in) % 2 ? 0 : 1 + in_u32(in) % MiB, NULL, &p);
        FZ_CHECK(p == NULL, "alloc_in with a foreign domain left *out");
    }
    FZ_CHECK(st == CCA_ERR_INVALID_ARGUMENT, "a foreign domain handle: %s", cca_status_string(st));
    cca_get_stats(w->a, &after);
    FZ_CHECK(stats_equal(&before, &after) && calls == w->dev.mutating_calls, "a foreign domain changed something");
}

/* Error mode: bad pointers must be refused and change nothing. */
static void act_bad_pointer(fz_world *w, fz_in *in) {
    uint8_t k = in_u8(in);
    if (k % 5 == 4) {
        act_bad_domain(w, in);
        return;
    }
    uint8_t *p = NULL;
    switch (k % 5) {
    case 0: /* double free / freed pointer */
        if (!w->nfreed)
            return;
        p = w->freed[in_u8(in) % w->nfreed];
        break;
    case 1: /* interior */
        if (!w->nlive)
            return;
        {
            fz_block *b = &w->live[in_u8(in) % w->nlive];
            p = b->ptr + 1 + in_u32(in) % (b->size - 1);
        }
        break;
    case 2: p = (uint8_t *)&k; break; /* a host pointer */
    default: p = (uint8_t *)(uintptr_t)(in_u32(in) | 1); break;
    }
    for (int i = 0; i < w->nlive; i++)
        if (w->live[i].ptr == p)
            return; /* the address was handed out again: valid */
    cca_stats before, after;
    cca_get_stats(w->a, &before);
    uint64_t calls = w->dev.mutating_calls;
    cca_status st;
    const char *what;
    switch (in_u8(in) % 4) {
    case 0: what = "free"; st = cca_free(w->a, p); break;
    case 1: what = "record_stream"; st = cca_record_stream(w->a, p, stream_of(1)); break;
    case 2: {
        size_t sz = 12345;
        what = "block_size";
        st = cca_block_size(w->a, p, &sz);
        FZ_CHECK(sz == 12345, "cca_block_size wrote *size on failure");
        break;
    }
    default: {
        cca_domain *d = (cca_domain *)(uintptr_t)1;
        what = "domain_of";
        st = cca_domain_of(w->a, p, &d);
        FZ_CHECK(d == NULL, "cca_domain_of left *d on failure");
        break;
    }
    }
    FZ_CHECK(st == CCA_ERR_INVALID_POINTER, "%s(%p) bad pointer: %s", what, (void *)p, cca_status_string(st));
    cca_get_stats(w->a, &after);
    FZ_CHECK(stats_equal(&before, &after) && calls == w->dev.mutating_calls, "%s of a bad pointer changed something",
             what);
}

/* ---- sleep and wake ----------------------------------------------------------- */

static cca_domain *handle(const fz_world *w, int dom) {
    return dom < 0 ? NULL : w->domains[dom];
}

static void domain_stats(const fz_world *w, int dom, cca_domain_stats *ds) {
    FZ_CHECK(cca_get_domain_stats(w->a, handle(w, dom), ds) == CCA_OK, "domain stats of %d", dom);
}

/* The live blocks of domain dom; *bytes: what a sleep copies of them (each
 * one's request rounded up to CCA_GRANULARITY). */
static size_t live_in(const fz_world *w, int dom, size_t *bytes) {
    size_t n = 0;
    *bytes = 0;
    for (int i = 0; i < w->nlive; i++)
        if (w->live[i].dom == dom) {
            n++;
            *bytes += round_up(w->live[i].req, CCA_GRANULARITY);
        }
    return n;
}

/* Domain dom is awake again: every block kept its address, size and domain
 * (check_world reads their bytes); after a DISCARD sleep the contents are
 * undefined, so they get a new pattern. */
static void woke(fz_world *w, int dom) {
    for (int i = 0; i < w->nlive; i++) {
        fz_block *b = &w->live[i];
        if (b->dom != dom)
            continue;
        cca_domain *got = (cca_domain *)(uintptr_t)1;
        size_t held = 0;
        FZ_CHECK(cca_block_size(w->a, b->ptr, &held) == CCA_OK && held == b->size &&
                     cca_domain_of(w->a, b->ptr, &got) == CCA_OK && got == handle(w, dom),
                 "block %p of domain %d changed in the sleep (size %zu, was %zu)", (void *)b->ptr, dom, held, b->size);
        if (w->discarded[dom + 1]) {
            b->seed = mix(w->seed++);
            pattern(b->ptr, b->req, b->seed, false);
        }
    }
    w->asleep[dom + 1] = w->discarded[dom + 1] = false;
}

/* A sleep's status is documented, and each failure has its cause: a fault
 * injected, classic segments, or no copy ops for a sleep that copies. */
static void check_sleep_status(const fz_world *w, cca_status st, unsigned flags, uint64_t fired, const char *what) {
    if (flags & ~CCA_SLEEP_DISCARD) {
        FZ_CHECK(st == CCA_ERR_INVALID_ARGUMENT, "%s with flags 0x%x: %s", what, flags, cca_status_string(st));
        return;
    }
    if (!w->expandable) {
        FZ_CHECK(st == CCA_ERR_UPSTREAM, "%s with classic segments: %s", what, cca_status_string(st));
        return;
    }
    FZ_CHECK(st == CCA_OK || st == CCA_ERR_UPSTREAM || st == CCA_ERR_OUT_OF_MEMORY || st == CCA_ERR_NOT_READY,
             "%s: undocumented %s", what, cca_status_string(st));
    bool no_copy = !w->has_copy && !(flags & CCA_SLEEP_DISCARD) && st == CCA_ERR_UPSTREAM;
    FZ_CHECK(st == CCA_OK || st == CCA_ERR_NOT_READY || no_copy || w->dev.fired != fired, "%s: %s with no fault", what,
             cca_status_string(st));
}

/* dom in [-1, FZ_MAX_DOMAINS): the default domain or a live one; else -2 */
static int pick_domain(const fz_world *w, fz_in *in) {
    int dom = in_u8(in) % (FZ_MAX_DOMAINS + 1) - 1;
    return dom >= 0 && !w->domains[dom] ? -2 : dom;
}

static void act_domain_sleep(fz_world *w, fz_in *in, unsigned flags) {
    int dom = pick_domain(w, in);
    if (dom < -1)
        return;
    bool was = w->asleep[dom + 1];
    size_t bytes, n = live_in(w, dom, &bytes);
    cca_domain_stats d0, d1;
    domain_stats(w, dom, &d0);
    uint64_t fired = w->dev.fired, unmaps_refused = w->dev.fired_kind[FK_VMUNMAP];
    cca_sleep_report r;
    memset(&r, 0xab, sizeof r);
    cca_status st = cca_domain_sleep(w->a, handle(w, dom), flags, &r);
    TRACE("  domain_sleep(%d, 0x%x) = %s\n", dom, flags, cca_status_string(st));
    check_sleep_status(w, st, flags, fired, "domain_sleep");
    domain_stats(w, dom, &d1);
    if (st == CCA_ERR_INVALID_ARGUMENT || (st != CCA_OK && !d1.asleep)) { /* refused: nothing changed */
        FZ_CHECK(d1.asleep == was && d1.reserved_bytes == d0.reserved_bytes && d1.host_bytes == d0.host_bytes,
                 "a refused sleep changed domain %d: asleep %d, reserved %zu -> %zu, host %zu -> %zu", dom, d1.asleep,
                 d0.reserved_bytes, d1.reserved_bytes, d0.host_bytes, d1.host_bytes);
        return;
    }
    /* asleep: with CCA_OK, or CCA_ERR_UPSTREAM for an unmap refused (those pages stay counted) */
    FZ_CHECK(d1.asleep, "sleep OK, domain %d awake", dom);
    if (st != CCA_OK)
        FZ_CHECK(st == CCA_ERR_UPSTREAM && w->dev.fired_kind[FK_VMUNMAP] != unmaps_refused && d1.reserved_bytes,
                 "domain %d asleep after %s with no unmap refused (%zu bytes mapped)", dom, cca_status_string(st),
                 d1.reserved_bytes);
    else
        FZ_CHECK(d1.reserved_bytes == 0, "domain %d asleep with %zu bytes reserved", dom, d1.reserved_bytes);
    FZ_CHECK(d0.reserved_bytes == d1.reserved_bytes + r.bytes_unmapped, "report: %zu unmapped, reserved %zu -> %zu",
             r.bytes_unmapped, d0.reserved_bytes, d1.reserved_bytes);
    if (was) {
        FZ_CHECK(r.blocks == 0 && r.bytes_copied == 0 && r.host_bytes == 0 && d1.host_bytes == d0.host_bytes,
                 "a sleep of a sleeping domain copied %zu bytes", r.bytes_copied);
        return;
    }
    FZ_CHECK(r.blocks == n && r.bytes_copied == (flags ? 0 : bytes) && r.host_bytes == d1.host_bytes &&
                 d1.host_bytes >= r.bytes_copied,
             "sleep report: %zu blocks, %zu bytes copied, %zu host bytes (domain %zu); model %zu blocks, %zu bytes",
             r.blocks, r.bytes_copied, r.host_bytes, d1.host_bytes, n, bytes);
    w->asleep[dom + 1] = true;
    w->discarded[dom + 1] = flags != 0;
}

static void act_domain_wake(fz_world *w, fz_in *in) {
    int dom = pick_domain(w, in);
    if (dom < -1)
        return;
    bool was = w->asleep[dom + 1];
    size_t bytes;
    live_in(w, dom, &bytes);
    cca_domain_stats d0, d1;
    domain_stats(w, dom, &d0);
    uint64_t fired = w->dev.fired, unmaps_refused = w->dev.fired_kind[FK_VMUNMAP];
    cca_sleep_report r;
    memset(&r, 0xab, sizeof r);
    cca_status st = cca_domain_wake(w->a, handle(w, dom), &r);
    TRACE("  domain_wake(%d) = %s\n", dom, cca_status_string(st));
    FZ_CHECK(st == CCA_OK || st == CCA_ERR_OUT_OF_MEMORY || st == CCA_ERR_UPSTREAM, "domain_wake: undocumented %s",
             cca_status_string(st));
    FZ_CHECK(st != CCA_ERR_UPSTREAM || w->dev.fired != fired, "domain_wake: CCA_ERR_UPSTREAM with no fault");
    domain_stats(w, dom, &d1);
    if (st != CCA_OK) { /* asleep, its host copy intact, nothing of this call mapped */
        FZ_CHECK(was && d1.asleep && d1.host_bytes == d0.host_bytes,
                 "a refused wake of domain %d: asleep %d (was %d), host %zu -> %zu", dom, d1.asleep, was, d0.host_bytes,
                 d1.host_bytes);
        /* (pages a refused unmap had left may go with the call's own) */
        FZ_CHECK(d1.reserved_bytes <= d0.reserved_bytes || w->dev.fired_kind[FK_VMUNMAP] != unmaps_refused,
                 "a refused wake left %zu bytes mapped (was %zu)", d1.reserved_bytes, d0.reserved_bytes);
        return;
    }
    FZ_CHECK(!d1.asleep && d1.host_bytes == 0, "wake OK, domain %d asleep %d, %zu host bytes", dom, d1.asleep,
             d1.host_bytes);
    if (!was) {
        FZ_CHECK(r.blocks == 0 && r.bytes_copied == 0 && r.bytes_mapped == 0 && r.host_bytes == 0,
                 "a wake of an awake domain did something");
        return;
    }
    FZ_CHECK(r.bytes_copied == (w->discarded[dom + 1] ? 0 : bytes) && r.host_bytes == d0.host_bytes,
             "wake report: %zu bytes copied, %zu host bytes; model %zu, domain %zu", r.bytes_copied, r.host_bytes,
             bytes, d0.host_bytes);
    woke(w, dom);
}

/* The domains in cca_sleep's and cca_wake's order: the default, then by
 * creation; returns how many. */
static int in_order(const fz_world *w, int order[FZ_MAX_DOMAINS + 1]) {
    int n = 0;
    order[n++] = -1;
    for (unsigned next = 0; next < w->nborn; next++)
        for (int i = 0; i < FZ_MAX_DOMAINS; i++)
            if (w->domains[i] && w->born[i] == next)
                order[n++] = i;
    return n;
}

static void act_sleep_all(fz_world *w, unsigned flags) {
    int order[FZ_MAX_DOMAINS + 1], n = in_order(w, order);
    bool was[FZ_MAX_DOMAINS + 1];
    size_t blocks = 0, bytes = 0;
    for (int k = 0; k < n; k++) {
        size_t b, c = live_in(w, order[k], &b);
        was[k] = w->asleep[order[k] + 1];
        blocks += was[k] ? 0 : c;
        bytes += was[k] ? 0 : b;
    }
    uint64_t fired = w->dev.fired, unmaps_refused = w->dev.fired_kind[FK_VMUNMAP];
    cca_sleep_report r;
    memset(&r, 0xab, sizeof r);
    cca_status st = cca_sleep(w->a, flags, &r);
    TRACE("  sleep(0x%x) = %s\n", flags, cca_status_string(st));
    check_sleep_status(w, st, flags, fired, "cca_sleep");
    const char *msg = cca_last_error();
    bool unmap = w->dev.fired_kind[FK_VMUNMAP] != unmaps_refused, stuck = strstr(msg, "could not be") != NULL;
    bool undefined = strstr(msg, "contents are undefined") != NULL, all = true, some = false;
    cca_domain_stats ds[FZ_MAX_DOMAINS + 1];
    for (int k = 0; k < n; k++) {
        domain_stats(w, order[k], &ds[k]);
        all &= ds[k].asleep != 0;
        some |= ds[k].asleep && !was[k];
        FZ_CHECK(ds[k].asleep || !was[k], "cca_sleep woke domain %d", order[k]);
    }
    if (st == CCA_OK || (st == CCA_ERR_UPSTREAM && unmap && all)) { /* all asleep (an unmap refused: pages kept) */
        FZ_CHECK(all, "cca_sleep: %s, a domain awake", cca_status_string(st));
        if (st == CCA_OK)
            FZ_CHECK(r.blocks == blocks && r.bytes_copied == (flags ? 0 : bytes),
                     "cca_sleep report: %zu blocks, %zu bytes copied; model %zu, %zu", r.blocks, r.bytes_copied, blocks,
                     bytes);
    } else { /* refused: every domain this call put to sleep woken again, unless one could not be */
        FZ_CHECK(!some || stuck, "a refused cca_sleep (%s) left a domain it put to sleep asleep: %s",
                 cca_status_string(st), msg);
    }
    for (int k = 0; k < n; k++) {
        int dom = order[k];
        if (was[k])
            continue;
        if (ds[k].asleep) {
            w->asleep[dom + 1] = true;
            w->discarded[dom + 1] = flags != 0;
        } else if (undefined) { /* put to sleep with DISCARD, then woken again */
            w->asleep[dom + 1] = w->discarded[dom + 1] = true;
            woke(w, dom);
        }
    }
}

static void act_wake_all(fz_world *w) {
    int order[FZ_MAX_DOMAINS + 1], n = in_order(w, order);
    bool was[FZ_MAX_DOMAINS + 1];
    cca_domain_stats d0[FZ_MAX_DOMAINS + 1];
    for (int k = 0; k < n; k++) {
        was[k] = w->asleep[order[k] + 1];
        domain_stats(w, order[k], &d0[k]);
    }
    uint64_t fired = w->dev.fired;
    cca_sleep_report r;
    memset(&r, 0xab, sizeof r);
    cca_status st = cca_wake(w->a, &r);
    TRACE("  wake() = %s\n", cca_status_string(st));
    FZ_CHECK(st == CCA_OK || st == CCA_ERR_OUT_OF_MEMORY || st == CCA_ERR_UPSTREAM, "cca_wake: undocumented %s",
             cca_status_string(st));
    FZ_CHECK(st != CCA_ERR_UPSTREAM || w->dev.fired != fired, "cca_wake: CCA_ERR_UPSTREAM with no fault");
    /* in order: the domains woken, then (a refusal) the one refused and the rest, asleep with their copies */
    bool stopped = false;
    for (int k = 0; k < n; k++) {
        cca_domain_stats ds;
        domain_stats(w, order[k], &ds);
        FZ_CHECK(was[k] || !ds.asleep, "cca_wake put domain %d to sleep", order[k]);
        if (!was[k])
            continue;
        FZ_CHECK(st != CCA_OK || !ds.asleep, "cca_wake OK, domain %d asleep", order[k]);
        if (ds.asleep) {
            FZ_CHECK(ds.host_bytes == d0[k].host_bytes, "cca_wake refused: domain %d host %zu -> %zu", order[k],
                     d0[k].host_bytes, ds.host_bytes);
            stopped = true;
            continue;
        }
        FZ_CHECK(!stopped, "cca_wake woke domain %d after one it stopped at", order[k]);
        woke(w, order[k]);
    }
}

static void act_sleep(fz_world *w, fz_in *in) {
    uint8_t k = in_u8(in);
    unsigned flags = k & 1 ? CCA_SLEEP_DISCARD : 0;
    if ((k & 0x70) == 0x70)
        flags |= 2; /* unknown: refused */
    switch (k >> 1 & 3) {
    case 0: act_domain_sleep(w, in, flags); break;
    case 1: act_domain_wake(w, in); break;
    case 2: act_sleep_all(w, flags); break;
    default: act_wake_all(w); break;
    }
}

/* ---- configuration ------------------------------------------------------------ */

static bool configure(fz_world *w, fz_in *in) {
    uint8_t mode = in_u8(in), geo = in_u8(in), devb = in_u8(in), flags = in_u8(in);
    cca_config *c = &w->cfg;
    cca_config_default(c);
    c->log_oom = 0;
    c->history = flags & 0x10 ? 16 : 0;
    switch (mode % 6) {
    case 0: break;                                           /* classic growth */
    case 1: c->policy = CCA_POLICY_GREEDY; break;            /* greedy */
    case 2: c->expandable = 1; break;                        /* expandable */
    case 3: c->policy = CCA_POLICY_GREEDY; c->expandable = 1; break;
    case 4: c->max_split = 24 * MiB; break;                  /* max_split */
    default: c->small_pool = 0; c->medium_pool = 0; break;
    }
    if (c->policy == CCA_POLICY_GREEDY) {
        static const size_t g[] = {0, 512, 4 * MiB, 6 * MiB + 512, 32 * MiB};
        c->greedy_bytes = g[(mode >> 3) % 5];
        c->greedy_fraction = (mode >> 6) % 2 ? 0.5 : 0.9;
    }
    switch (geo % 4) {
    case 0: break;
    case 1: /* small pool settings */
        c->small_max = 4 * KiB;
        c->small_segment = 64 * KiB;
        c->medium_segment = 256 * KiB;
        c->large_min = 128 * KiB;
        c->segment_round = 64 * KiB;
        break;
    case 2:
        c->small_max = 512;
        c->small_segment = 64 * KiB;
        c->medium_segment = 1 * MiB + 512;
        c->large_min = 1 * MiB;
        c->segment_round = 512;
        break;
    default:
        c->small_max = 1 * MiB;
        c->small_segment = 1 * MiB;
        c->medium_segment = 4 * MiB;
        c->large_min = 4 * MiB;
        c->segment_round = 4 * MiB;
        break;
    }
    if (c->max_split && c->max_split <= c->medium_segment)
        c->max_split = c->medium_segment + 512 * (1 + (geo >> 4));
    static const size_t caps[] = {0, 0, 3 * MiB, 8 * MiB + 512, 20 * MiB};
    c->max_reserved = caps[(geo >> 2) % 5];
    c->expandable_ahead = (geo >> 5) % 2 ? 0 : 0.0625;
    /* over whole maps (flags 0x40): maps of the default 128 MiB, one per run,
     * a page each, or three 64 KiB pages (w->chunk, set after cca_create) */
    static const size_t chunks[] = {128 * MiB, 0, 1, 192 * KiB};
    w->chunk = chunks[(flags >> 7) | ((geo >> 7) << 1)];
    /* hold_peak on half the growth configurations (greedy refuses it): every
     * request that meets the peak with memory cached releases first */
    c->hold_peak = c->policy == CCA_POLICY_GROWTH && ((geo ^ devb ^ flags) & 2);
    if (cca_config_validate(c) != CCA_OK)
        return false;
    static const size_t capacities[] = {64 * MiB, 32 * MiB, 8 * MiB, 4096, 3 * MiB + 4096 * 7, 24 * MiB + 512 * 3};
    /* pages from the host page to 32 MiB: the large ones (8 and 32 MiB, what
     * a GPU wants for speed) a large share of these small devices, so a few
     * pages hold everything and slack, trapped bytes and refusals are pages */
    static const size_t grans[] = {0, 4096, 64 * KiB, 1 * MiB, 8 * MiB, 32 * MiB};
    cca_host_options o = {0};
    o.capacity = w->capacity = capacities[devb % 6];
    o.vm_granularity = grans[(devb >> 3) % 6];
    o.vm_backing = flags & 0x40 ? CCA_VM_WHOLE_MAPS : CCA_VM_PAGES;
    if (cca_upstream_host_create_with(&o, &w->dev.host) != CCA_OK)
        return false;
    w->error_mode = flags & 1;
    w->has_mem_info = !(flags & 0x20);
    w->dev.hold_events = flags & 2;
    cca_upstream_ops ops = {
        .alloc = w_alloc,
        .free = w_free,
        .mem_info = flags & 0x20 ? NULL : w_mem_info,
        .synchronize = w_sync,
        .name = "fuzz",
        .vm_granularity = w_vm_gran,
        .vm_reserve = w_vm_reserve,
        .vm_release = w_vm_release,
        .vm_map = w_vm_map,
        .vm_unmap = w_vm_unmap,
        .vm_backing = o.vm_backing, /* the device's rule is the allocator's */
    };
    if (!(flags & 4)) {
        ops.event_record = w_event_record;
        ops.event_query = w_event_query;
        ops.event_destroy = w_event_destroy;
    }
    w->has_copy = (mode & 0xc0) != 0xc0; /* a quarter without: only CCA_SLEEP_DISCARD sleeps */
    if (w->has_copy) {
        ops.host_alloc = w_host_alloc;
        ops.host_free = w_host_free;
        ops.copy = w_copy;
        ops.copy_wait = w_copy_wait;
    }
    if (mode & 0x20) /* half: sleep and trim wait stream by stream */
        ops.stream_synchronize = w_stream_sync;
    if (flags & 8) /* no virtual memory: expandable:1 falls back to classic segments */
        ops.vm_granularity = NULL, ops.vm_reserve = NULL, ops.vm_release = NULL, ops.vm_map = NULL,
        ops.vm_unmap = NULL;
    FZ_CHECK(cca_upstream_custom_create(&ops, &w->dev, &w->up) == CCA_OK, "custom upstream");
    cca_status st = cca_create(c, w->up, &w->a);
    if (st != CCA_OK) {
        FZ_CHECK(w->a == NULL, "a failed cca_create left *out");
        FZ_CHECK(st == CCA_ERR_OUT_OF_MEMORY || st == CCA_ERR_UPSTREAM, "cca_create: %s", cca_status_string(st));
        cca_upstream_stats us;
        cca_upstream_get_stats(w->up, &us);
        FZ_CHECK(us.bytes_in_use == 0 && us.vm_reserved_bytes == 0, "a failed cca_create holds memory");
        cca_upstream_destroy(w->up);
        cca_upstream_destroy(w->dev.host);
        return false;
    }
    FZ_CHECK(cca_get_config(w->a, &w->cfg) == CCA_OK, "get_config");
    ccai_pages_rule_set(w->a, w->cfg.expandable_ahead > 0 ? 20 * MiB : 0,
                        (size_t)(w->cfg.expandable_ahead * (double)(1024 * MiB)), w->chunk);
    w->expandable = w->cfg.expandable && !(flags & 8);
    return true;
}

/* Every allocator records a CCALLOC_TRACE (to /dev/null), so trace.c runs
 * with every call and cca_trace_mark flushes a real recording.
 * Transparent huge pages off for the process: the host device asks for them
 * (MADV_HUGEPAGE), and then the pattern's one byte per 64 KiB faults in and
 * zeroes 2 MiB each, 32 times the bytes it touches (on a kernel with THP
 * "always" most of the run's time); with small pages each touch zeroes 4
 * KiB. The same bytes are written and checked; no allocator path sees the
 * host's page size. */
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    setenv("CCALLOC_TRACE", "/dev/null", 0);
    (void)prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0); /* refused (an old kernel): only slower */
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static fz_world world;
    fz_world *w = &world;
    memset(w, 0, sizeof *w);
    fz_in in = {data, size};
    if (!configure(w, &in))
        return 0;
    w->mem = open_memstream(&w->membuf, &w->memlen);
    FZ_CHECK(w->mem != NULL, "open_memstream");
    check_world(w);
    for (int steps = 0; in.n && steps < 400; steps++) {
        uint8_t op = in_u8(&in);
        TRACE("step %d: op %d\n", steps, op % 20);
        switch (op % 20) {
        case 0: case 1: case 2: case 3: act_alloc(w, &in, false); break;
        case 4: case 5: case 6: act_free(w, &in); break;
        case 7: act_alloc(w, &in, true); break;
        case 8: act_record(w, &in); break;
        case 9: act_trim(w, &in, false); break;
        case 10: act_trim(w, &in, true); break;
        case 11:
            if (op & 0x80)
                cca_reset_peak_stats(w->a);
            else
                act_write(w, &in);
            break;
        case 12: act_domain_create(w, &in); break;
        case 13: act_domain_release(w, &in, op & 0x80); break;
        case 14: act_domain_reserve(w, &in); break;
        case 15: act_mark(w, &in); break;
        case 16: act_fault(w, &in); break;
        case 17: act_complete(w, &in); break;
        case 18:
            if (w->error_mode)
                act_bad_pointer(w, &in);
            else
                act_alloc(w, &in, false);
            break;
        default:
            if (op / 20 % 2)
                act_sleep(w, &in);
            else
                memset(w->dev.armed, 0, sizeof w->dev.armed);
            break;
        }
        check_world(w);
        if (op % 20 == 11 && (op & 0x80)) {
            cca_stats s;
            cca_get_stats(w->a, &s);
            FZ_CHECK(s.allocated_bytes_peak == s.allocated_bytes && s.reserved_bytes_peak == s.reserved_bytes &&
                         s.active_blocks_peak == s.active_blocks && s.segments_peak == s.segments,
                     "peaks not reset");
        }
    }
    /* the end: every awake block still intact, then destroy with the live
     * and the sleeping ones */
    memset(w->dev.armed, 0, sizeof w->dev.armed);
    for (int i = 0; i < w->nlive; i++)
        if (!w->asleep[w->live[i].dom + 1])
            pattern(w->live[i].ptr, w->live[i].req, w->live[i].seed, true);
    cca_status st = cca_destroy(w->a);
    FZ_CHECK(st == (w->nlive ? CCA_ERR_LIVE_BLOCKS : CCA_OK), "cca_destroy with %d live: %s", w->nlive,
             cca_status_string(st));
    cca_upstream_stats us, hs;
    cca_upstream_get_stats(w->up, &us);
    cca_upstream_get_stats(w->dev.host, &hs);
    FZ_CHECK(us.bytes_in_use == 0 && us.allocations == 0 && us.vm_reserved_bytes == 0 && us.vm_mapped_bytes == 0,
             "after cca_destroy the upstream holds %zu bytes, %zu allocations, %zu address space", us.bytes_in_use,
             us.allocations, us.vm_reserved_bytes);
    FZ_CHECK(hs.bytes_in_use == 0 && hs.vm_reserved_bytes == 0, "after cca_destroy the device holds memory");
    FZ_CHECK(w->dev.events_live == 0, "%ld events never destroyed", w->dev.events_live);
    /* host memory: only what the allocator gave up on (a refused host_free) */
    FZ_CHECK(w->dev.host_allocs == w->dev.nkept && w->dev.host_bytes == w->dev.kept_bytes &&
                 us.host_bytes_in_use == w->dev.kept_bytes,
             "after cca_destroy the upstream holds %zu host allocations (%zu bytes), %zu given up", w->dev.host_allocs,
             w->dev.host_bytes, w->dev.nkept);
    for (size_t i = 0; i < w->dev.nkept; i++)
        FZ_CHECK(cca_upstream_host_free(w->dev.host, w->dev.kept[i].p, w->dev.kept[i].n) == CCA_OK,
                 "host_free of given-up host memory");
    free(w->dev.kept);
    cca_upstream_get_stats(w->dev.host, &hs);
    FZ_CHECK(hs.host_bytes_in_use == 0, "the device holds %zu bytes of host memory", hs.host_bytes_in_use);
    cca_upstream_destroy(w->up);
    cca_upstream_destroy(w->dev.host);
    fclose(w->mem);
    free(w->membuf);
    return 0;
}
