/*
 * test_fault_steps.c — allocator/src/kinds/pages.c, domain.c: a failure at every step of the newer allocator
 * paths: expandable segments (page bitmaps), memory domains and their
 * footprint arenas, the history ring, snapshots (JSON and PyTorch's
 * pickle), the trace recorder, stream bookkeeping (record_stream's use
 * lists, the waits of a deferred free), release reports with leak lists and
 * the stats writers.
 *
 * Every step: scripted sequences of public calls in each configuration
 * (classic, expandable, greedy, greedy over expandable, domains with
 * history, traced), run once per k with the k-th host allocation failing
 * (once, and from then on), the k-th upstream call of each kind refused
 * (once, and from then on), and the k-th map refused with every release
 * refused; each call's status, the invariants, exact stats and the
 * device's own counts checked after every step (fs_script, below), and
 * a call that succeeds (a failure recovered from) leaves the caller's
 * message as it was.
 *
 * Kept ranges: a domain's footprint arena over expandable segments whose
 * map and then the release of its range are both refused keeps the range,
 * empty, for a later release; a later arena of the domain (and
 * cca_alloc_in) serves only from the arena it reserved.
 *
 * cca_destroy whose synchronize is refused: frees still waiting on stream
 * events count as live (ccalloc.h), their events destroyed all the same.
 *
 * Hostile stream handles (NULL, all-ones, handles whose hashes share one
 * probe chain of the free index's table of streams) allocating in two
 * domains and both pools, some leaving the pools and coming back, with the
 * k-th host allocation failing (once, and from then on): each refusal
 * CCA_ERR_OUT_OF_MEMORY with the stats and the device's books unchanged,
 * every stream served once host memory is back, nothing left on the device.
 *
 * A block lacking pages in more runs than pages.c's map_missing keeps on
 * its stack (16): one vm_map per run; its list's host memory refused, or
 * the 18th map refused: every run the call mapped is unmapped, then the
 * retry maps them all.
 */
#include "alloc_test_util.h"
#include "malloc_fault.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define PG ((size_t)64 * KiB)

/* A simulated device of `capacity` bytes with 64 KiB pages, wrapped by a
 * tu_faulty (with events). */
static cca_upstream *faulty_device(size_t capacity, tu_faulty *f, cca_upstream **inner) {
    cca_host_options o = {.capacity = capacity, .vm_granularity = PG};
    cr_assert_eq(cca_upstream_host_create_with(&o, inner), CCA_OK, "%s", cca_last_error());
    return tu_faulty_create(f, *inner, "fx", true);
}

/* ============================================================================ */
/* Kept ranges of a refused domain arena                                        */
/* ============================================================================ */

Test(fault_steps, kept_arena_range_serves_no_later_arena_request) {
    tu_faulty f;
    cca_upstream *dev, *u = faulty_device(64 * MiB, &f, &dev);
    cca_allocator *a = tu_allocator(u, "log_oom:0,expandable:1");
    cca_domain *d;
    cr_assert_eq(cca_domain_create(a, "m", &d), CCA_OK, "%s", cca_last_error());

    /* every map and every release refused: the first try and the retry each
     * keep their range, empty: smaller than the arena below, so that best
     * fit over the arena pool would prefer them */
    f.fail_at[TU_FAULT_MAP] = f.calls[TU_FAULT_MAP] + 1;
    f.sticky[TU_FAULT_MAP] = true;
    f.fail_at[TU_FAULT_RELEASE] = f.calls[TU_FAULT_RELEASE] + 1;
    f.sticky[TU_FAULT_RELEASE] = true;
    cr_assert_eq(cca_domain_reserve(a, d, 512 * KiB), CCA_ERR_OUT_OF_MEMORY);
    tu_faulty_faults_off(&f);
    tu_check(a);
    cca_stats kept = tu_stats(a);
    cr_assert_eq(kept.reserved_bytes, 0, "nothing mapped");
    cr_assert_gt(kept.expandable_segments, 0, "the refused releases keep their ranges");

    /* a real arena now: mapped whole, so a request in it calls no upstream */
    cr_assert_eq(cca_domain_reserve(a, d, 1 * MiB), CCA_OK, "%s", cca_last_error());
    cca_stats armed = tu_stats(a);
    cr_assert_eq(armed.reserved_bytes, 1 * MiB);
    uint64_t calls = f.ok[TU_FAULT_MAP] + f.ok[TU_FAULT_RESERVE] + f.ok[TU_FAULT_ALLOC];
    void *p = NULL;
    cr_assert_eq(cca_alloc_in(a, d, 256 * KiB, NULL, &p), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(f.ok[TU_FAULT_MAP] + f.ok[TU_FAULT_RESERVE] + f.ok[TU_FAULT_ALLOC], calls,
                 "a request in the domain's arena called the upstream (served from a kept range)");
    cca_stats after = tu_stats(a);
    cr_assert_eq(after.reserved_bytes, 1 * MiB, "served outside the arena: %zu bytes reserved",
                 after.reserved_bytes);
    cr_assert_eq(after.vm_maps, armed.vm_maps);
    tu_check(a);
    tu_free(a, p);
    cr_assert_eq(cca_domain_destroy(a, d, 0, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(tu_stats(a).address_space_bytes, 0, "the kept ranges went back with the domain");
    tu_destroy_clean(a, u);
    cca_upstream_destroy(u);
    cca_upstream_stats ds = tu_upstream_stats(dev);
    cr_assert_eq(ds.vm_reserved_bytes, 0);
    cr_assert_eq(ds.bytes_in_use, 0);
    cca_upstream_destroy(dev);
}

/* ============================================================================ */
/* cca_destroy after a refused synchronize: pending frees count as live         */
/* ============================================================================ */

/* A block freed while used on another stream waits on an event (held here);
 * cca_destroy's synchronize is refused, so that wait never completes: as
 * ccalloc.h says (and cca_domain_release does), it counts as live, with
 * the caller's own live blocks. */
static void destroy_with_pending(bool expandable, bool with_live) {
    tu_faulty f;
    cca_upstream *dev, *u = faulty_device(64 * MiB, &f, &dev);
    f.hold_events = true;
    cca_allocator *a = tu_allocator(u, expandable ? "log_oom:0,expandable:1" : "log_oom:0,expandable:0");
    void *p = tu_alloc(a, 1 * MiB, (cca_stream)0x100);
    cr_assert_eq(cca_record_stream(a, p, (cca_stream)0x200), CCA_OK, "%s", cca_last_error());
    size_t p_size = tu_block_size(a, p);
    tu_free(a, p);
    cr_assert_eq(tu_stats(a).pending_blocks, 1);
    void *q = with_live ? tu_alloc(a, 3000, NULL) : NULL;
    size_t q_size = q ? tu_block_size(a, q) : 0;
    f.fail_at[TU_FAULT_SYNC] = f.calls[TU_FAULT_SYNC] + 1;
    f.sticky[TU_FAULT_SYNC] = true;
    cca_status st = cca_destroy(a);
    char want[64];
    snprintf(want, sizeof want, "%d blocks (%zu bytes) were still live", with_live ? 2 : 1, p_size + q_size);
    cr_assert_eq(st, CCA_ERR_LIVE_BLOCKS, "%s (%s)", cca_status_string(st), cca_last_error());
    cr_assert_not_null(strstr(cca_last_error(), want), "'%s' does not say '%s'", cca_last_error(), want);
    cr_assert_not_null(strstr(cca_last_error(), "(1 of them freed, their streams' work never seen to complete)"),
                       "the message tells the freed block from the live ones: %s", cca_last_error());
    cr_assert_eq(f.events_live, 0, "cca_destroy destroys the events of pending frees");
    cca_upstream_stats ds = tu_upstream_stats(dev);
    cr_assert_eq(ds.allocations, 0, "classic segments go back even so");
    cr_assert_eq(ds.vm_mapped_bytes, expandable ? tu_upstream_stats(u).vm_mapped_bytes : 0);
    cca_upstream_destroy(u);
    cca_upstream_destroy(dev);
}

Test(fault_steps, destroy_with_pending_frees_and_failed_sync_classic) {
    destroy_with_pending(false, false);
}
Test(fault_steps, destroy_with_pending_frees_and_failed_sync_expandable) {
    destroy_with_pending(true, false);
}
Test(fault_steps, destroy_with_pending_and_live_and_failed_sync_classic) {
    destroy_with_pending(false, true);
}
Test(fault_steps, destroy_with_pending_and_live_and_failed_sync_expandable) {
    destroy_with_pending(true, true);
}

/* ============================================================================ */
/* A failure at every step                                                      */
/* ============================================================================ */

/* One run: a script of public calls on a fresh allocator over a tu_faulty
 * device, with one failure injected (the k-th host allocation of the run, or
 * the k-th upstream call of one kind), and a model of what succeeded:
 *
 *   each call   returns the status of a clean run, or (a failure injected
 *               during it) one that ccalloc.h documents for that failure;
 *   after each  cca_check_invariants; the stats exact against the model
 *               (allocated = live + the pending blocks among those freed,
 *               requested, active, alloc/free calls, ooms); the device's
 *               own counts (bytes in use, classic allocations, address
 *               space, mapped bytes) and the wrapper's granted calls equal
 *               the allocator's; a block recorded on another stream and
 *               freed with no failure is pending (events are held);
 *   at the end  cca_destroy, the device empty; the trace (with
 *               CCALLOC_TRACE) has a line for every allocation that
 *               succeeded. ASan's leak check runs at the test's exit.
 *
 * The script runs on after a failure: every later call works as in a clean
 * run (the allocator fully usable), the model saying which blocks exist. */

#define S0 ((cca_stream)0x100)
#define S1 ((cca_stream)0x200)
#define S2 ((cca_stream)0x300)
#define NBLK 12
#define FILLED(size) ((size) < 4 * KiB ? (size) : 4 * KiB) /* a block's head is written and read back */
#define NDOM 2

/* What fails: the k-th host allocation of the run (from then on: sticky);
 * the k-th upstream call of one kind (sticky: from then on); the k-th map
 * with every range's release refused (kept ranges). */
typedef enum fs_mode { FS_HOST, FS_HOST_STICKY, FS_UPSTREAM, FS_UPSTREAM_STICKY, FS_MAP_NO_RELEASE, FS_MODES } fs_mode;
static const char *const fs_mode_names[FS_MODES] = {"host malloc", "host malloc from then on", "upstream call",
                                                    "upstream call from then on", "map, no release"};

typedef struct fs_cfg {
    const char *name;
    const char *conf;
    bool domains, greedy, trace;
} fs_cfg;

typedef struct fs_blk {
    void *p;
    size_t size, req;
    int dom;              /* -1: the default domain */
    cca_stream alloc, rec; /* rec: a stream recorded with cca_record_stream (NULL: none) */
    bool live, freed;     /* freed: may be pending (in `cands`) */
} fs_blk;

typedef struct fs_run {
    const fs_cfg *cfg;
    fs_mode mode;
    tu_fault_kind kind;
    long k;
    tu_faulty f;
    cca_upstream *dev, *u;
    cca_allocator *a;
    cca_domain *d[NDOM];
    bool arena[NDOM]; /* the domain's footprint arena was reserved */
    fs_blk b[NBLK];
    int cands[NBLK], ncands; /* freed blocks that may still be pending */
    uint64_t allocs, frees, ooms;
    const char *step;
    long injected_before;
    uint64_t failures_before;
    bool failed_here; /* a failure was injected during the current step */
    cca_status destroy_st;
} fs_run;

#define FS_ASSERT(r, cond, ...)                                                                                        \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            char why_[512];                                                                                            \
            snprintf(why_, sizeof why_, __VA_ARGS__);                                                                  \
            cr_assert_fail("[%s, %s%s%s k=%ld, step %s] %s", (r)->cfg->name, fs_mode_names[(r)->mode],                 \
                           (r)->mode == FS_UPSTREAM || (r)->mode == FS_UPSTREAM_STICKY ? " " : "",                     \
                           (r)->mode == FS_UPSTREAM || (r)->mode == FS_UPSTREAM_STICKY ? tu_fault_names[(r)->kind]     \
                                                                                       : "",                          \
                           (r)->k, (r)->step, why_);                                                                   \
        }                                                                                                              \
    } while (0)

static void hold(bool on) {
    tu_malloc_hold(on);
}

static long injected(const fs_run *r) {
    return tu_malloc_injected() + (long)r->f.failures;
}

/* A step begins: the injector runs for the call only. */
static void begin(fs_run *r, const char *step) {
    r->step = step;
    r->injected_before = injected(r);
    cca_set_error(CCA_ERR_IO, TU_MARK); /* a call that succeeds leaves it (end) */
    hold(false);
}

/* The call returned st: it must be `want` unless a failure was injected
 * during it, and then `want` or one of the `n` documented alternatives. */
static void end(fs_run *r, cca_status st, cca_status want, int n, const cca_status *alt) {
    hold(true);
    r->failed_here = injected(r) != r->injected_before;
    bool ok = st == want;
    for (int i = 0; r->failed_here && i < n; i++)
        ok |= st == alt[i];
    FS_ASSERT(r, ok, "%s (%s), expected %s%s", cca_status_string(st), cca_last_error(), cca_status_string(want),
              r->failed_here ? " or a documented failure" : " (no failure injected)");
    FS_ASSERT(r, st != CCA_OK || strcmp(cca_last_error(), TU_MARK) == 0,
              "succeeded%s but left the message '%s' (ccalloc.h: a call that succeeds leaves it as it was)",
              r->failed_here ? " after a failure injected" : "", cca_last_error());
}
#define END(r, st, want, ...)                                                                                          \
    do {                                                                                                               \
        const cca_status alt_[] = {__VA_ARGS__};                                                                       \
        end((r), (st), (want), (int)(sizeof alt_ / sizeof alt_[0]), alt_);                                             \
    } while (0)

/* The pending blocks among the freed candidates: some subset whose count is
 * pending_blocks and whose sizes make up allocated - live. */
static bool pending_subset_fits(const fs_run *r, size_t pending, size_t bytes) {
    for (unsigned m = 0; m < (1u << r->ncands); m++) {
        size_t n = 0, sum = 0;
        for (int i = 0; i < r->ncands; i++)
            if (m >> i & 1)
                n++, sum += r->b[r->cands[i]].size;
        if (n == pending && sum == bytes)
            return true;
    }
    return false;
}

static void audit(fs_run *r) {
    cca_status inv = cca_check_invariants(r->a);
    FS_ASSERT(r, inv == CCA_OK, "invariants: %s", cca_last_error());
    cca_stats s = tu_stats(r->a);
    size_t live = 0, live_bytes = 0, req = 0;
    for (int i = 0; i < NBLK; i++)
        if (r->b[i].live)
            live++, live_bytes += r->b[i].size, req += r->b[i].req;
    if (s.pending_blocks == 0)
        r->ncands = 0; /* every freed block is back in the pool */
    FS_ASSERT(r, s.requested_bytes == req, "requested_bytes %zu, the live blocks asked for %zu", s.requested_bytes,
              req);
    FS_ASSERT(r, s.active_blocks == live + s.pending_blocks, "active_blocks %zu, live %zu + pending %zu",
              s.active_blocks, live, s.pending_blocks);
    FS_ASSERT(r, s.allocated_bytes >= live_bytes &&
                     pending_subset_fits(r, s.pending_blocks, s.allocated_bytes - live_bytes),
              "allocated_bytes %zu: live %zu bytes, %zu pending among %d freed", s.allocated_bytes, live_bytes,
              s.pending_blocks, r->ncands);
    FS_ASSERT(r, s.alloc_calls == r->allocs && s.free_calls == r->frees && s.ooms == r->ooms,
              "calls: alloc %llu (model %llu), free %llu (model %llu), ooms %llu (model %llu)",
              (unsigned long long)s.alloc_calls, (unsigned long long)r->allocs, (unsigned long long)s.free_calls,
              (unsigned long long)r->frees, (unsigned long long)s.ooms, (unsigned long long)r->ooms);
    /* the device's own books */
    cca_upstream_stats d = tu_upstream_stats(r->dev);
    FS_ASSERT(r, d.bytes_in_use == s.reserved_bytes, "device holds %zu bytes, reserved_bytes %zu", d.bytes_in_use,
              s.reserved_bytes);
    FS_ASSERT(r, d.allocations == s.segments - s.expandable_segments, "device: %zu allocations, %zu classic segments",
              d.allocations, s.segments - s.expandable_segments);
    FS_ASSERT(r, d.vm_reserved_bytes == s.address_space_bytes && d.vm_mapped_bytes == s.mapped_bytes,
              "device: %zu reserved, %zu mapped; allocator: %zu address space, %zu mapped", d.vm_reserved_bytes,
              d.vm_mapped_bytes, s.address_space_bytes, s.mapped_bytes);
    const uint64_t *ok = r->f.ok;
    FS_ASSERT(r, s.upstream_allocs == ok[TU_FAULT_ALLOC] + ok[TU_FAULT_RESERVE] + ok[TU_FAULT_MAP] &&
                     s.upstream_frees == ok[TU_FAULT_FREE] + ok[TU_FAULT_RELEASE] + ok[TU_FAULT_UNMAP] &&
                     s.vm_maps == ok[TU_FAULT_MAP] && s.vm_unmaps == ok[TU_FAULT_UNMAP],
              "upstream calls: allocator %llu up / %llu down (%llu maps, %llu unmaps), device granted %llu / %llu",
              (unsigned long long)s.upstream_allocs, (unsigned long long)s.upstream_frees,
              (unsigned long long)s.vm_maps, (unsigned long long)s.vm_unmaps,
              (unsigned long long)(ok[TU_FAULT_ALLOC] + ok[TU_FAULT_RESERVE] + ok[TU_FAULT_MAP]),
              (unsigned long long)(ok[TU_FAULT_FREE] + ok[TU_FAULT_RELEASE] + ok[TU_FAULT_UNMAP]));
    /* each domain's live blocks */
    for (int di = 0; di < NDOM; di++) {
        if (!r->d[di])
            continue;
        size_t dreq = 0;
        for (int i = 0; i < NBLK; i++)
            if (r->b[i].live && r->b[i].dom == di)
                dreq += r->b[i].req;
        cca_domain_stats ds;
        FS_ASSERT(r, cca_get_domain_stats(r->a, r->d[di], &ds) == CCA_OK, "%s", cca_last_error());
        FS_ASSERT(r, ds.requested_bytes == dreq, "domain %d: requested %zu, model %zu", di, ds.requested_bytes, dreq);
    }
}

static const cca_status OOM = CCA_ERR_OUT_OF_MEMORY, UPS = CCA_ERR_UPSTREAM;

static cca_domain *dom(const fs_run *r, int di) {
    return di < 0 ? NULL : r->d[di];
}

static void s_alloc(fs_run *r, int slot, int di, size_t size, cca_stream s) {
    if (di >= 0 && !r->d[di])
        return; /* its domain was never made */
    void *p = (void *)0x1;
    begin(r, "alloc");
    cca_status st = di >= 0 ? cca_alloc_in(r->a, r->d[di], size, s, &p) : cca_alloc(r->a, size, s, &p);
    END(r, st, CCA_OK, OOM);
    fs_blk *b = &r->b[slot];
    FS_ASSERT(r, !b->live, "slot %d in use", slot);
    if (st != CCA_OK) {
        FS_ASSERT(r, p == NULL, "a failed alloc left *out %p", p);
        r->ooms++;
    } else {
        memset(b, 0, sizeof *b);
        b->p = p;
        b->req = size;
        b->dom = di;
        b->alloc = s;
        b->live = true;
        FS_ASSERT(r, cca_block_size(r->a, p, &b->size) == CCA_OK, "%s", cca_last_error());
        cca_domain *owner = (cca_domain *)0x1;
        FS_ASSERT(r, cca_domain_of(r->a, p, &owner) == CCA_OK && owner == dom(r, di), "served in another domain");
        tu_fill(p, FILLED(size), (uint64_t)slot);
        r->allocs++;
    }
    audit(r);
}

static void s_record(fs_run *r, int slot, cca_stream s) {
    fs_blk *b = &r->b[slot];
    if (!b->live)
        return;
    begin(r, "record_stream");
    cca_status st = cca_record_stream(r->a, b->p, s);
    END(r, st, CCA_OK, OOM);
    if (st == CCA_OK)
        b->rec = s;
    audit(r);
}

static void s_free(fs_run *r, int slot) {
    fs_blk *b = &r->b[slot];
    if (!b->live)
        return;
    FS_ASSERT(r, tu_check_fill(b->p, FILLED(b->req), (uint64_t)slot), "block %d lost its contents", slot);
    size_t pending = tu_stats(r->a).pending_blocks;
    begin(r, "free");
    cca_status st = cca_free(r->a, b->p);
    /* a host malloc failure: the free synchronizes instead of waiting (OK);
     * an upstream refusal of that synchronize: its status, the pointer
     * consumed all the same */
    END(r, st, CCA_OK, UPS);
    b->live = false;
    b->freed = true;
    r->cands[r->ncands++] = slot;
    if (st == CCA_OK)
        r->frees++;
    /* recorded on a stream other than its key (events held): pending, unless
     * a failure made the free synchronize instead */
    cca_stream key = r->cfg->greedy || (b->dom >= 0 && r->arena[b->dom]) ? NULL : b->alloc; /* arenas: NULL */
    if (b->rec && b->rec != key && !r->failed_here)
        FS_ASSERT(r, tu_stats(r->a).pending_blocks == pending + 1,
                  "a block recorded on another stream was freed without waiting (the record was lost)");
    audit(r);
}

/* Every writer, into memory: OK with output, or (host malloc short, only
 * the PyTorch snapshot allocates) OOM with nothing written. */
static void s_writers(fs_run *r) {
    static const char *const names[] = {"stats_write_json", "snapshot_json", "snapshot_torch", "domain_stats_json",
                                        "stats_print", "trace_mark"};
    for (int w = 0; w < 6; w++) {
        char *buf = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&buf, &len); /* held: the test's own */
        FS_ASSERT(r, m != NULL, "open_memstream");
        cca_stats s = tu_stats(r->a);
        begin(r, names[w]);
        cca_status st = w == 0   ? cca_stats_write_json(&s, m)
                        : w == 1 ? cca_write_snapshot_json(r->a, m)
                        : w == 2 ? cca_write_snapshot_torch(r->a, 0, m)
                        : w == 3 ? cca_domain_stats_write_json(r->a, m)
                        : w == 4 ? cca_stats_print(&s, m)
                                 : cca_trace_mark(r->a, "phase:steps");
        END(r, st, CCA_OK, OOM);
        fclose(m);
        if (w < 5)
            FS_ASSERT(r, st == CCA_OK ? len > 0 : len == 0, "%s: %s with %zu bytes written", names[w],
                      cca_status_string(st), len);
        free(buf);
        audit(r);
    }
}

static void s_trim(fs_run *r, size_t keep, const char *what) {
    cca_release_report rep;
    begin(r, what);
    cca_status st = keep ? cca_trim(r->a, keep, &rep) : cca_empty_cache(r->a, &rep);
    END(r, st, CCA_OK, UPS, CCA_ERR_NOT_READY);
    FS_ASSERT(r, rep.bytes_still_reserved == tu_stats(r->a).reserved_bytes, "report: %zu still reserved",
              rep.bytes_still_reserved);
    audit(r);
}

static void s_domain_create(fs_run *r, int di, const char *name) {
    cca_domain *d = (cca_domain *)0x1;
    begin(r, "domain_create");
    cca_status st = cca_domain_create(r->a, name, &d);
    END(r, st, CCA_OK, OOM);
    FS_ASSERT(r, st == CCA_OK ? d != NULL : d == NULL, "*out %p after %s", (void *)d, cca_status_string(st));
    r->d[di] = d;
    audit(r);
}

static void s_domain_reserve(fs_run *r, int di, size_t bytes) {
    if (!r->d[di])
        return;
    begin(r, "domain_reserve");
    cca_status st = cca_domain_reserve(r->a, r->d[di], bytes);
    END(r, st, CCA_OK, OOM);
    r->arena[di] = st == CCA_OK;
    audit(r);
}

/* Release with live blocks: refused, the leak list exact (in address order
 * within each segment: compared as a set). */
static void s_domain_release_leaks(fs_run *r, int di) {
    if (!r->d[di])
        return;
    cca_live_block leaks[NBLK];
    cca_domain_report rep = {.leaks = leaks, .leaks_cap = NBLK};
    size_t n = 0;
    for (int i = 0; i < NBLK; i++)
        n += r->b[i].live && r->b[i].dom == di;
    begin(r, "domain_release");
    cca_status st = cca_domain_release(r->a, r->d[di], 0, &rep);
    END(r, st, n ? CCA_ERR_LIVE_BLOCKS : CCA_OK, UPS);
    if (st == CCA_ERR_LIVE_BLOCKS) {
        FS_ASSERT(r, rep.live_blocks == n && rep.leaks_written == n, "%zu leaks listed (%zu written), %zu live",
                  rep.live_blocks, rep.leaks_written, n);
        for (size_t j = 0; j < rep.leaks_written; j++) {
            bool found = false;
            for (int i = 0; i < NBLK; i++)
                found |= r->b[i].live && r->b[i].dom == di && r->b[i].p == leaks[j].ptr &&
                         r->b[i].size == leaks[j].size && r->b[i].req == leaks[j].requested && !leaks[j].pending;
            FS_ASSERT(r, found, "leak %p (%zu) is no live block of the domain", leaks[j].ptr, leaks[j].size);
        }
    }
    audit(r);
}

static void s_domain_destroy(fs_run *r, int di, unsigned flags) {
    if (!r->d[di])
        return;
    cca_domain_report rep = {0};
    begin(r, "domain_destroy");
    cca_status st = cca_domain_destroy(r->a, r->d[di], flags, &rep);
    END(r, st, CCA_OK, UPS);
    if (st == CCA_OK) {
        r->d[di] = NULL;
        for (int i = 0; i < NBLK; i++)
            if (r->b[i].live && r->b[i].dom == di) /* forced: gone */
                r->b[i].live = false;
    } else if (flags & CCA_DOMAIN_FORCE) {
        /* refused after the forced drop or before it: the blocks that are no
         * longer live are those the report counted */
        for (int i = 0; i < NBLK; i++)
            if (r->b[i].live && r->b[i].dom == di && cca_block_size(r->a, r->b[i].p, &(size_t){0}) != CCA_OK)
                r->b[i].live = false;
    }
    audit(r);
}

static size_t trace_allocs(const char *path) {
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    char line[256];
    size_t n = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "seq,", 4) == 0)
            n = 0; /* a new section: this run's */
        const char *c = strchr(line, ',');
        n += c && strncmp(c, ",alloc,", 7) == 0;
    }
    fclose(f);
    return n;
}

static void fs_script(fs_run *r) {
    const fs_cfg *c = r->cfg;
    begin(r, "create");
    r->a = (cca_allocator *)0x1;
    cca_config cfg;
    cca_config_default(&cfg);
    cr_assert_eq(cca_config_parse(&cfg, c->conf), CCA_OK, "%s", cca_last_error());
    cca_status st = cca_create(&cfg, r->u, &r->a);
    END(r, st, CCA_OK, OOM);
    if (st != CCA_OK) {
        FS_ASSERT(r, r->a == NULL, "a failed create left *out");
        cca_upstream_stats d = tu_upstream_stats(r->dev);
        const uint64_t *calls = r->f.calls, *ok = r->f.ok;
        bool refused = calls[TU_FAULT_FREE] + calls[TU_FAULT_UNMAP] + calls[TU_FAULT_RELEASE] !=
                       ok[TU_FAULT_FREE] + ok[TU_FAULT_UNMAP] + ok[TU_FAULT_RELEASE];
        FS_ASSERT(r, refused || (d.bytes_in_use == 0 && d.vm_reserved_bytes == 0),
                  "a failed create left device memory that the device would have taken back");
        r->destroy_st = st;
        return;
    }
    audit(r);
    if (c->domains) {
        s_domain_create(r, 0, "alpha");
        s_domain_create(r, 1, "beta");
        s_domain_reserve(r, 0, 1 * MiB);
    }
    s_alloc(r, 0, -1, 1000, NULL);
    s_alloc(r, 1, -1, 300 * KiB, S0);
    s_alloc(r, 2, -1, 3 * MiB, NULL);
    s_alloc(r, 3, c->domains ? 0 : -1, 200 * KiB, S0); /* in the arena */
    s_alloc(r, 4, c->domains ? 1 : -1, 12 * MiB, NULL);
    s_record(r, 1, S1);
    s_record(r, 1, S2); /* the use list grows */
    s_record(r, 2, S1);
    s_record(r, 4, S2);
    s_free(r, 1);
    s_free(r, 0);
    s_writers(r);
    s_trim(r, 1 * MiB, "trim");
    s_alloc(r, 5, -1, 5 * MiB, S1);
    s_alloc(r, 6, c->domains ? 1 : -1, 40 * KiB, S2);
    s_free(r, 2);
    if (c->domains) {
        s_domain_release_leaks(r, 1);
        s_domain_destroy(r, 1, CCA_DOMAIN_FORCE);
    }
    s_trim(r, 0, "empty_cache");
    for (int i = 0; i < NBLK; i++)
        s_free(r, i);
    if (c->domains)
        s_domain_destroy(r, 0, 0);
    /* fully usable: a fresh round */
    s_alloc(r, 7, -1, 64 * KiB, NULL);
    s_alloc(r, 8, -1, 11 * MiB, S0);
    s_writers(r);
    s_free(r, 7);
    s_free(r, 8);
    s_trim(r, 0, "empty_cache");
    /* frees that never complete (the synchronize refused) count as live */
    bool pending = tu_stats(r->a).pending_blocks > 0;
    uint64_t refused = r->f.calls[TU_FAULT_SYNC] - r->f.ok[TU_FAULT_SYNC];
    begin(r, "destroy");
    st = r->destroy_st = cca_destroy(r->a);
    END(r, st, CCA_OK, UPS, CCA_ERR_LIVE_BLOCKS);
    bool stuck = pending && r->f.calls[TU_FAULT_SYNC] - r->f.ok[TU_FAULT_SYNC] > refused;
    FS_ASSERT(r, (st == CCA_ERR_LIVE_BLOCKS) == stuck, "%s with pending frees %s", cca_status_string(st),
              stuck ? "that never completed" : "completed or none");
    r->a = NULL;
}

/* One run; true when the failure aimed at was injected (the sweep goes on). */
static cca_upstream *host_device(void) {
    cca_host_options o = {.capacity = 64 * MiB, .vm_granularity = PG};
    cca_upstream *dev = NULL;
    cr_assert_eq(cca_upstream_host_create_with(&o, &dev), CCA_OK, "%s", cca_last_error());
    return dev;
}

static bool fs_one(const fs_cfg *c, cca_upstream **devp, fs_mode mode, tu_fault_kind kind, long k, const char *trace) {
    fs_run *r = calloc(1, sizeof *r);
    cr_assert_not_null(r);
    r->cfg = c;
    r->mode = mode;
    r->k = k;
    hold(true);
    r->dev = *devp;
    r->u = tu_faulty_create(&r->f, r->dev, "fx", true);
    r->f.hold_events = true;
    r->kind = kind;
    bool host_mode = mode == FS_HOST || mode == FS_HOST_STICKY;
    if (host_mode) {
        tu_malloc_arm(k, mode == FS_HOST_STICKY);
    } else if (mode == FS_MAP_NO_RELEASE) {
        r->f.fail_at[TU_FAULT_MAP] = (uint64_t)k;
        r->f.fail_at[TU_FAULT_RELEASE] = 1;
        r->f.sticky[TU_FAULT_RELEASE] = true;
    } else {
        r->f.fail_at[kind] = (uint64_t)k;
        r->f.sticky[kind] = mode == FS_UPSTREAM_STICKY;
    }
    fs_script(r);
    long host = tu_malloc_disarm();
    bool hit = host_mode ? host > 0 : r->f.calls[mode == FS_MAP_NO_RELEASE ? TU_FAULT_MAP : kind] >= (uint64_t)k;
    if (r->a) /* the script stopped early: a failed create */
        cr_assert_fail("[%s k=%ld] allocator left", c->name, k);
    /* an allocator destroyed without a refusal leaves the device empty */
    cca_upstream_stats d = tu_upstream_stats(r->dev);
    bool empty = d.bytes_in_use == 0 && d.vm_reserved_bytes == 0 && d.allocations == 0;
    cr_assert(empty || r->destroy_st != CCA_OK, "[%s k=%ld] the device still holds %zu bytes, %zu of address space "
              "after cca_destroy", c->name, k, d.bytes_in_use, d.vm_reserved_bytes);
    if (trace && host == 0)
        cr_assert_eq(trace_allocs(trace), r->allocs, "[%s k=%ld] the trace lost allocations", c->name, k);
    cca_upstream_destroy(r->u);
    if (!empty) { /* what a refusal left there: a fresh device for the next run */
        cca_upstream_destroy(*devp);
        *devp = host_device();
    }
    free(r);
    hold(false);
    return hit;
}

static const fs_cfg CFG_CLASSIC = {"classic", "log_oom:0,expandable:0", false, false, false};
static const fs_cfg CFG_EXPANDABLE = {"expandable", "log_oom:0,expandable:1", false, false, false};
static const fs_cfg CFG_GREEDY = {"greedy", "log_oom:0,expandable:0,policy:greedy,greedy_bytes:40M", false, true,
                                  false};
static const fs_cfg CFG_GREEDY_EXP = {"greedy-expandable", "log_oom:0,policy:greedy,greedy_bytes:40M,expandable:1",
                                      false, true, false};
static const fs_cfg CFG_DOMAINS = {"domains", "log_oom:0,expandable:0,history:5", true, false, false};
static const fs_cfg CFG_DOMAINS_EXP = {"domains-expandable", "log_oom:0,expandable:1,history:5", true, false, false};
static const fs_cfg CFG_TRACED = {"traced-domains-expandable", "log_oom:0,expandable:1,history:3", true, false, true};

static void sweep(const fs_cfg *c) {
    char path[64] = "";
    static tu_log_capture cap;
    cca_set_log_callback(tu_capture_log, &cap);
    long runs = 0;
    /* one device for every run: each leaves it empty (checked) */
    cca_upstream *dev = host_device();
    if (c->trace) {
        snprintf(path, sizeof path, "/tmp/cca_fault_steps_%d.csv", (int)getpid());
        setenv("CCALLOC_TRACE", path, 1);
        /* the first opening, before any failure: it fixes the file; one
         * refused (host memory short) stops the recording for the process
         * (trace_stops_when_host_memory_is_short_at_the_first_opening) */
        cca_allocator *a = tu_allocator(dev, NULL);
        cr_assert_eq(cca_trace_status(a), CCA_OK, "%s", cca_last_error());
        cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    }
    for (int mode = 0; mode < FS_MODES; mode++) {
        bool per_kind = mode == FS_UPSTREAM || mode == FS_UPSTREAM_STICKY;
        for (int kind = 0; kind < (per_kind ? TU_FAULT_KINDS : 1); kind++)
            for (long k = 1; fs_one(c, &dev, (fs_mode)mode, (tu_fault_kind)kind, k, c->trace ? path : NULL); k++, runs++)
                cr_assert_lt(k, 5000, "runaway");
        if (getenv("FS_VERBOSE"))
            fprintf(stderr, "%s, %s: %ld runs so far\n", c->name, fs_mode_names[mode], runs);
    }
    cca_upstream_destroy(dev);
    cr_assert_gt(runs, 0, "the sweep injected nothing");
    if (c->trace) {
        unlink(path);
        unsetenv("CCALLOC_TRACE");
    }
    cca_set_log_callback(NULL, NULL);
}

/* In a child: CCALLOC_TRACE=<dir>/t.%p.csv and the k-th host allocation of
 * cca_create failing. 64: the failure missed the trace's first opening
 * (no "host memory short" line); 65: nothing was injected (k is past
 * cca_create's allocations). When it hit: the recording stops for the
 * process, as after any refused opening: an allocator created later,
 * CCALLOC_TRACE now naming `good`, records nothing and logs nothing, and
 * cca_trace_status says the refusal; bits of the exit status: 1 status,
 * 2 its message, 4 a second log line, 8 `good` created, 16 a call failed. */
static _Noreturn void trace_short_child(long k, const char *dir, const char *good) {
    char value[128];
    snprintf(value, sizeof value, "%s/t.%%p.csv", dir);
    setenv("CCALLOC_TRACE", value, 1);
    static tu_log_capture log;
    cca_set_log_callback(tu_capture_log, &log);
    cca_upstream *u;
    cca_allocator *a = NULL, *b;
    if (cca_upstream_host_create(64 * MiB, &u) != CCA_OK)
        _exit(16);
    tu_malloc_arm(k, false);
    cca_status st = cca_create(NULL, u, &a);
    long injected = tu_malloc_disarm();
    if (log.lines != 1 || !strstr(log.last, "host memory short"))
        _exit(injected ? 64 : 65);
    int rc = 0;
    if (st == CCA_OK)
        rc |= cca_trace_status(a) != CCA_ERR_IO;
    setenv("CCALLOC_TRACE", good, 1);
    void *p;
    if (cca_create(NULL, u, &b) != CCA_OK || cca_alloc(b, 100, NULL, &p) != CCA_OK || cca_free(b, p) != CCA_OK ||
        cca_trace_mark(b, "m") != CCA_OK)
        _exit(16);
    cca_clear_error();
    rc |= cca_trace_status(b) != CCA_ERR_IO;
    rc |= !strstr(cca_last_error(), "cca_trace_status: not tracing: host memory short") << 1;
    if (a)
        cca_destroy(a);
    cca_destroy(b);
    rc |= (log.lines != 1) << 2 | (access(good, F_OK) == 0) << 3;
    _exit(rc);
}

/* Host memory short at the trace's first opening (expanding %p, or making
 * the path absolute): refused, logged, and the recording stops for the
 * process as after any refused opening (ccalloc.h, cca_trace_status). A
 * later allocator started a trace that lacked the refused one's events,
 * which read as the process's whole. Each k in a child of its own (the
 * trace's state is the process's), until the failure hits the opening. */
Test(fault_steps, trace_stops_when_host_memory_is_short_at_the_first_opening) {
    char dir[64] = "/tmp/cca_trace_short_XXXXXX", good[96];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(good, sizeof good, "%s/good.csv", dir);
    int hits = 0;
    for (long k = 1; k < 200; k++) {
        fflush(NULL);
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0)
            trace_short_child(k, dir, good);
        int status;
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_assert(WIFEXITED(status), "k=%ld: the child did not exit", k);
        int rc = WEXITSTATUS(status);
        if (rc == 65)
            break;
        if (rc == 64)
            continue;
        cr_assert_eq(rc, 0, "k=%ld: %d (bits: 1 status, 2 message, 4 logged again, 8 file created, 16 a call)", k, rc);
        hits++;
    }
    cr_assert_gt(hits, 0, "no host allocation of cca_create was the trace's opening");
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

Test(fault_steps, every_step_classic) { sweep(&CFG_CLASSIC); }
Test(fault_steps, every_step_expandable) { sweep(&CFG_EXPANDABLE); }
Test(fault_steps, every_step_greedy) { sweep(&CFG_GREEDY); }
Test(fault_steps, every_step_greedy_expandable) { sweep(&CFG_GREEDY_EXP); }
Test(fault_steps, every_step_domains_history) { sweep(&CFG_DOMAINS); }
Test(fault_steps, every_step_domains_expandable_history) { sweep(&CFG_DOMAINS_EXP); }
Test(fault_steps, every_step_traced) { sweep(&CFG_TRACED); }

/* ============================================================================ */
/* A map of more runs than pages.c keeps on its stack                           */
/* ============================================================================ */

/* One cca_alloc whose block lacks the pages of RUNS separate stretches:
 * map_missing maps them one vm_map each and keeps the runs it mapped (to
 * undo them) in a list of 16 on the stack, then on the heap. Blocks of 17
 * pages (large pool) side by side; the odd ones freed and their pages
 * unmapped by a trim; the even ones freed: one free block whose pages are
 * mapped and unmapped in turn. Returns the allocator; *base the first
 * block's address. */
enum { RUNS = 20, RUN_BLOCKS = 2 * RUNS + 1 };
#define RUN_BLOCK (17 * PG)

static cca_allocator *striped(cca_upstream *u, uintptr_t *base) {
    cca_allocator *a = tu_allocator(u, "log_oom:0,expandable:1,expandable_ahead:0");
    void *p[RUN_BLOCKS];
    for (int i = 0; i < RUN_BLOCKS; i++) {
        p[i] = tu_alloc(a, RUN_BLOCK, NULL);
        cr_assert_eq((uintptr_t)p[i], (uintptr_t)p[0] + (size_t)i * RUN_BLOCK, "block %d side by side", i);
    }
    for (int i = 1; i < RUN_BLOCKS; i += 2)
        tu_free(a, p[i]);
    cca_release_report r;
    cr_assert_eq(cca_empty_cache(a, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(r.pages_unmapped, RUNS * (RUN_BLOCK / PG), "the odd blocks' pages, all of them");
    for (int i = 0; i < RUN_BLOCKS; i += 2)
        tu_free(a, p[i]);
    cr_assert_eq(tu_stats(a).mapped_bytes, (RUNS + 1) * RUN_BLOCK, "the even blocks' pages stay mapped");
    *base = (uintptr_t)p[0];
    return a;
}

/* The striped block q served: every byte of it usable; the device left
 * holding nothing. */
static void striped_end(cca_allocator *a, cca_upstream *u, cca_upstream *dev, void *q) {
    tu_fill(q, RUN_BLOCKS * RUN_BLOCK, 7);
    cr_assert(tu_check_fill(q, RUN_BLOCKS * RUN_BLOCK, 7));
    tu_check(a);
    tu_free(a, q);
    tu_destroy_clean(a, u);
    tu_faulty_destroy_clean(u, dev);
}

Test(fault_steps, a_block_lacking_pages_in_more_runs_than_kept_on_the_stack_maps_each) {
    tu_faulty f;
    cca_upstream *dev, *u = faulty_device(128 * MiB, &f, &dev);
    uintptr_t base;
    cca_allocator *a = striped(u, &base);
    cca_stats before = tu_stats(a);
    void *q = tu_alloc(a, RUN_BLOCKS * RUN_BLOCK, NULL);
    cca_stats s = tu_stats(a);
    cr_assert_eq((uintptr_t)q, base, "the striped free block is the best fit");
    cr_assert_eq(s.vm_maps - before.vm_maps, RUNS, "one map per missing run");
    cr_assert_eq(s.vm_unmaps, before.vm_unmaps);
    cr_assert_eq(s.mapped_bytes, RUN_BLOCKS * RUN_BLOCK);
    cr_assert_eq(s.alloc_retries, 0);
    striped_end(a, u, dev, q);
}

/* The same map refused part-way: with no host memory for the list past
 * 16 runs (list_refused), or at the 18th vm_map. Either way the runs the
 * call mapped (17: 16 in the stack's list, one more) are unmapped, the
 * device keeping none of them, and the request goes to the retry
 * (CCA_ERR_OUT_OF_MEMORY from the map), which maps the 20 runs again, the
 * refusal being once. */
static void many_runs_refused(bool list_refused) {
    tu_faulty f;
    cca_upstream *dev, *u = faulty_device(128 * MiB, &f, &dev);
    uintptr_t base;
    cca_allocator *a = striped(u, &base);
    cca_stats before = tu_stats(a);
    void *q = NULL;
    if (list_refused)
        tu_malloc_arm(1, false); /* the first host allocation of the call: the list's */
    else
        f.fail_at[TU_FAULT_MAP] = f.calls[TU_FAULT_MAP] + 18;
    cca_status st = cca_alloc(a, RUN_BLOCKS * RUN_BLOCK, NULL, &q);
    long injected = list_refused ? tu_malloc_disarm() : (long)f.failures;
    cr_assert_eq(st, CCA_OK, "%s", cca_last_error());
    cr_assert_eq(injected, 1);
    cca_stats s = tu_stats(a);
    cr_assert_eq((uintptr_t)q, base);
    cr_assert_eq(s.alloc_retries, before.alloc_retries + 1, "the refused map went to the retry");
    cr_assert_eq(s.vm_maps - before.vm_maps, 17 + RUNS, "17 runs mapped before the refusal, then all");
    cr_assert_eq(s.vm_unmaps - before.vm_unmaps, 17, "each run the refused call mapped, unmapped");
    cr_assert_eq(s.mapped_bytes, RUN_BLOCKS * RUN_BLOCK);
    cr_assert_eq(tu_upstream_stats(dev).vm_mapped_bytes, s.mapped_bytes, "the device agrees");
    striped_end(a, u, dev, q);
}

Test(fault_steps, a_map_of_many_runs_without_host_memory_undoes_every_run_it_mapped) {
    many_runs_refused(true);
}

Test(fault_steps, a_map_refused_past_the_stack_list_undoes_every_run_it_mapped) {
    many_runs_refused(false);
}

/* ============================================================================ */
/* Hostile stream handles in the free index's table of streams                  */
/* ============================================================================ */

/* Stream handles are any pointer value the caller picks. free_index.c finds
 * a stream's bins by the top bits of (handle * 0x9e3779b97f4a7c15): the
 * handles below share their top 16 bits, so every table up to 2^16 slots
 * puts them in one probe chain (inserts that wrap, deletions that shift
 * every later one back), with NULL and all-ones among them. */
#define HS_STREAMS 12
static cca_stream hostile_stream(unsigned i) {
    if (i < 2)
        return i == 0 ? NULL : (cca_stream)UINTPTR_MAX;
    uint64_t phi = 0x9e3779b97f4a7c15ull, inv = phi; /* phi is odd: its inverse mod 2^64 */
    for (int n = 0; n < 6; n++)
        inv *= 2 - phi * inv;
    return (cca_stream)(uintptr_t)((0x5a5aull << 48 | (uint64_t)i << 12) * inv);
}

typedef struct hs_run {
    cca_allocator *a;
    cca_upstream *dev;
    cca_domain *d;
    void *p[2][HS_STREAMS][2]; /* [default, domain][stream][small, large] */
    long k;
    long failures; /* allocations refused */
} hs_run;

/* One allocation: CCA_OK, or CCA_ERR_OUT_OF_MEMORY with NULL out, the
 * stats unchanged and the invariants holding. */
static void hs_alloc(hs_run *r, int in, unsigned s, int large) {
    hold(true);
    cca_stats before = tu_stats(r->a);
    hold(false);
    void *p = (void *)1;
    size_t size = large ? 3 * MiB : 4 * KiB;
    cca_status st =
        in ? cca_alloc_in(r->a, r->d, size, hostile_stream(s), &p) : cca_alloc(r->a, size, hostile_stream(s), &p);
    hold(true);
    if (st == CCA_OK) {
        cr_assert_not_null(p);
        r->p[in][s][large] = p;
        tu_fill(p, FILLED(size), s * 4 + in * 2 + large);
    } else {
        cr_assert_eq(st, CCA_ERR_OUT_OF_MEMORY, "[k=%ld] alloc on stream %u: %s", r->k, s, cca_status_string(st));
        cr_assert_null(p, "[k=%ld] a refused alloc's out", r->k);
        cca_stats after = tu_stats(r->a);
        cr_assert(after.allocated_bytes == before.allocated_bytes && after.requested_bytes == before.requested_bytes &&
                      after.active_blocks == before.active_blocks && after.alloc_calls == before.alloc_calls &&
                      after.ooms == before.ooms + 1,
                  "[k=%ld] a refused alloc on stream %u changed the stats", r->k, s);
        r->failures++;
    }
    tu_check(r->a);
    cca_stats now = tu_stats(r->a);
    cca_upstream_stats d = tu_upstream_stats(r->dev);
    cr_assert(d.bytes_in_use == now.reserved_bytes && d.vm_reserved_bytes == now.address_space_bytes,
              "[k=%ld] the device holds %zu bytes, %zu of address space; reserved_bytes %zu, address_space_bytes %zu",
              r->k, d.bytes_in_use, d.vm_reserved_bytes, now.reserved_bytes, now.address_space_bytes);
    hold(false);
}

static void hs_free(hs_run *r, int in, unsigned s, int large) {
    void *p = r->p[in][s][large];
    if (!p)
        return;
    hold(true);
    cr_assert(tu_check_fill(p, FILLED(large ? 3 * MiB : 4 * KiB), s * 4 + in * 2 + large),
              "[k=%ld] a block overwritten", r->k);
    hold(false);
    cr_assert_eq(cca_free(r->a, p), CCA_OK, "[k=%ld]: %s", r->k, cca_last_error());
    r->p[in][s][large] = NULL;
    hold(true);
    tu_check(r->a);
    hold(false);
}

/* Empty the cache (the segments of the streams without blocks go, their
 * bins with them: deletions from the middle of the chain). */
static void hs_empty(hs_run *r) {
    cca_status st = cca_empty_cache(r->a, NULL);
    cr_assert(st == CCA_OK || st == CCA_ERR_OUT_OF_MEMORY, "[k=%ld] empty_cache: %s", r->k, cca_status_string(st));
    hold(true);
    tu_check(r->a);
    hold(false);
}

/* Every stream allocates, default domain and the other, both pools; the odd
 * ones free and the cache empties; they allocate again; all free; the
 * domain and the allocator go. The k-th host allocation fails (once or from
 * then on): true when it was injected. */
static bool hs_one(const char *conf, long k, bool sticky) {
    hs_run r = {.k = k};
    cca_host_options o = {.capacity = 1024 * MiB, .vm_granularity = PG};
    cca_upstream *dev = NULL;
    cr_assert_eq(cca_upstream_host_create_with(&o, &dev), CCA_OK, "%s", cca_last_error());
    hold(true);
    r.dev = dev;
    r.a = tu_allocator(dev, conf);
    cr_assert_eq(cca_domain_create(r.a, "d", &r.d), CCA_OK, "%s", cca_last_error());
    hold(false);
    tu_malloc_arm(k, sticky);
    for (unsigned s = 0; s < HS_STREAMS; s++)
        for (int in = 0; in < 2; in++)
            for (int large = 0; large < 2; large++)
                hs_alloc(&r, in, s, large);
    for (unsigned s = 1; s < HS_STREAMS; s += 2)
        for (int in = 0; in < 2; in++)
            for (int large = 0; large < 2; large++)
                hs_free(&r, in, s, large);
    hs_empty(&r);
    for (unsigned s = 1; s < HS_STREAMS; s += 2)
        for (int in = 0; in < 2; in++)
            for (int large = 0; large < 2; large++)
                hs_alloc(&r, in, s, large);
    long injected = tu_malloc_disarm();
    /* host memory back: every stream allocates again where it had nothing */
    for (unsigned s = 0; s < HS_STREAMS; s++)
        for (int in = 0; in < 2; in++)
            for (int large = 0; large < 2; large++)
                if (!r.p[in][s][large])
                    hs_alloc(&r, in, s, large);
    cr_assert(r.failures == 0 || injected > 0, "[k=%ld] a refusal without a fault", k);
    for (unsigned s = 0; s < HS_STREAMS; s++)
        for (int in = 0; in < 2; in++)
            for (int large = 0; large < 2; large++) {
                cr_assert_not_null(r.p[in][s][large], "[k=%ld] stream %u not served with host memory back", k, s);
                hs_free(&r, in, s, large);
            }
    cr_assert_eq(cca_domain_destroy(r.a, r.d, 0, NULL), CCA_OK, "[k=%ld] %s", k, cca_last_error());
    cr_assert_eq(cca_destroy(r.a), CCA_OK, "[k=%ld] %s", k, cca_last_error());
    cca_upstream_stats d = tu_upstream_stats(dev);
    cr_assert_eq(d.bytes_in_use + d.vm_reserved_bytes, 0, "[k=%ld] the device still holds memory", k);
    cca_upstream_destroy(dev);
    return injected > 0;
}

static void hostile_streams(const char *conf) {
    /* the handles collide at every table size this test reaches */
    for (unsigned i = 2; i < HS_STREAMS; i++)
        cr_assert_eq((uint64_t)(uintptr_t)hostile_stream(i) * 0x9e3779b97f4a7c15ull >> 48, 0x5a5a);
    long runs = 0;
    for (int sticky = 0; sticky < 2; sticky++)
        for (long k = 1; hs_one(conf, k, sticky); k++, runs++)
            cr_assert_lt(k, 20000, "runaway");
    cr_assert_gt(runs, 0, "the sweep injected nothing");
}

Test(fault_steps, hostile_stream_handles_at_every_host_malloc_classic) {
    hostile_streams("log_oom:0,expandable:0");
}
Test(fault_steps, hostile_stream_handles_at_every_host_malloc_expandable) {
    hostile_streams("log_oom:0,expandable:1");
}
