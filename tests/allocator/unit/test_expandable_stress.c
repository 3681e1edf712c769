/*
 * test_expandable_stress.c — allocator/src/kinds/pages.c: expandable segments
 * under a fault at every upstream call, seeded random sequences and threads.
 * How the tests run: expandable_suite.h.
 *
 *   faults       a wrapper upstream fails the N-th call of each kind (once,
 *                or from then on) over a scripted sequence: invariants, the
 *                accounts, live data and, once the faults stop, a clean
 *                empty-cache hold for every N; with and without events. A
 *                map refused part-way whose rollback unmap is refused too.
 *   random       20000 seeded steps on two streams, invariants and
 *                accounts after each.
 *   threads      six threads allocating, freeing and trimming at once.
 *
 * The other suites of pages.c: test_expandable_pages.c,
 * test_expandable_limits.c.
 */
#include "expandable_suite.h"

/* ---- faults -------------------------------------------------------------- */

/* The scripted sequence: allocations on two streams and both pools, a
 * record_stream, frees, trims, an empty-cache, and a request that needs
 * the retry (24 MiB device). */
typedef enum { OP_ALLOC, OP_FREE, OP_RECORD, OP_TRIM } op_kind;
typedef struct op {
    op_kind kind;
    int slot;
    size_t size; /* alloc: bytes; trim: keep (SIZE_MAX: empty_cache) */
    cca_stream stream;
} op;

static const op script[] = {
    {OP_ALLOC, 0, 100 * KiB, S0},
    {OP_ALLOC, 1, 3 * MiB, S0},
    {OP_ALLOC, 2, 5 * MiB + 7 * KiB, S1},
    {OP_ALLOC, 3, 2 * MiB, S0},
    {OP_RECORD, 3, 0, S1},
    {OP_FREE, 1, 0, NULL},
    {OP_TRIM, 0, 6 * MiB, NULL},
    {OP_ALLOC, 4, 1 * MiB + 512, S0},
    {OP_FREE, 3, 0, NULL},
    {OP_ALLOC, 5, 16 * MiB, S1},
    {OP_FREE, 2, 0, NULL},
    {OP_TRIM, 0, SIZE_MAX, NULL},
    {OP_ALLOC, 6, 200 * KiB, S1},
    {OP_ALLOC, 7, 5 * MiB, S0},
    {OP_FREE, 0, 0, NULL},
    {OP_FREE, 4, 0, NULL},
    {OP_TRIM, 0, 0, NULL},
    {OP_FREE, 5, 0, NULL},
    {OP_ALLOC, 8, 3 * MiB, S1},
    {OP_FREE, 6, 0, NULL},
    {OP_FREE, 7, 0, NULL},
    {OP_TRIM, 0, 4 * MiB, NULL},
    {OP_FREE, 8, 0, NULL},
    {OP_TRIM, 0, SIZE_MAX, NULL},
};
enum { SCRIPT_LEN = sizeof script / sizeof script[0], SLOTS = 9 };

typedef struct fx_run {
    tu_fault_kind kind;
    uint64_t at; /* 0: no fault */
    bool sticky;
    uint64_t calls[TU_FAULT_KINDS]; /* out */
    uint64_t retries;         /* out */
    uint64_t holds;           /* out: peak_holds */
} fx_run;

static void run_script(fx_run *run, bool with_events) {
    tu_faulty f;
    cca_upstream *u = fx_create(&f, 24 * MiB, with_events);
    cca_allocator *a = exp_allocator(u, NULL);
    if (run->at) {
        f.fail_at[run->kind] = run->at;
        f.sticky[run->kind] = run->sticky;
    }
    char what[160];
    struct {
        char *p;
        size_t size;
    } slot[SLOTS] = {{0}};
    for (int i = 0; i < SCRIPT_LEN; i++) {
        const op *o = &script[i];
        snprintf(what, sizeof what, "%s N=%llu%s, step %d", tu_fault_names[run->kind], (unsigned long long)run->at,
                 run->sticky ? " (sticky)" : "", i);
        uint64_t failures = f.failures;
        cca_stats before = tu_stats(a);
        cca_status st = CCA_OK;
        switch (o->kind) {
        case OP_ALLOC: {
            void *p = (void *)1;
            st = cca_alloc(a, o->size, o->stream, &p);
            if (st == CCA_OK) {
                slot[o->slot].p = p;
                slot[o->slot].size = o->size;
                tu_fill(p, o->size, (uint64_t)(i + 1));
            } else {
                cr_assert_eq(st, CCA_ERR_OUT_OF_MEMORY, "%s: alloc: %s", what, cca_status_string(st));
                cr_assert(run->at && f.failures > 0, "%s: OOM without a fault: %s", what, cca_last_error());
                cr_assert_null(p);
                cca_stats s = tu_stats(a);
                cr_assert_eq(s.allocated_bytes, before.allocated_bytes, "%s", what);
                cr_assert_eq(s.active_blocks, before.active_blocks, "%s", what);
            }
            break;
        }
        case OP_FREE:
            if (!slot[o->slot].p)
                break;
            st = cca_free(a, slot[o->slot].p);
            /* consumed either way; a failed synchronize holds the block */
            cr_assert(st == CCA_OK || (st == CCA_ERR_UPSTREAM && run->kind == TU_FAULT_SYNC && f.failures > failures),
                      "%s: free: %s", what, cca_status_string(st));
            slot[o->slot].p = NULL;
            break;
        case OP_RECORD:
            if (slot[o->slot].p)
                cr_assert_eq(cca_record_stream(a, slot[o->slot].p, o->stream), CCA_OK, "%s", what);
            break;
        case OP_TRIM: {
            cca_release_report r;
            st = o->size == SIZE_MAX ? cca_empty_cache(a, &r) : cca_trim(a, o->size, &r);
            cr_assert(st == CCA_OK || (st == CCA_ERR_UPSTREAM && f.failures > failures), "%s: trim: %s / %s", what,
                      cca_status_string(st), cca_last_error());
            cr_assert_eq(r.bytes_still_reserved, tu_stats(a).reserved_bytes, "%s", what);
            break;
        }
        }
        fx_agree(a, u, &f, what);
        for (int k = 0; k < SLOTS; k++)
            if (slot[k].p) {
                int seed = 0; /* the step that allocated it */
                for (int j = 0; j < SCRIPT_LEN; j++)
                    if (script[j].kind == OP_ALLOC && script[j].slot == k && j <= i)
                        seed = j + 1;
                cr_assert(tu_check_fill(slot[k].p, slot[k].size, (uint64_t)seed), "%s: slot %d overwritten", what, k);
            }
        if (!run->at && o->kind == OP_ALLOC)
            cr_assert_eq(st, CCA_OK, "the script must succeed without faults: step %d: %s", i, cca_last_error());
    }
    if (run->at && run->at <= run->calls[run->kind]) /* the baseline made that call */
        cr_assert_geq(f.failures, 1, "%s: the fault never fired", what);
    memcpy(run->calls, f.calls, sizeof f.calls);
    run->retries = tu_stats(a).alloc_retries;
    run->holds = tu_stats(a).peak_holds;
    /* faults off: whatever is left goes back, and nothing was lost */
    tu_faulty_faults_off(&f);
    for (int k = 0; k < SLOTS; k++)
        if (slot[k].p)
            cr_assert_eq(cca_free(a, slot[k].p), CCA_OK);
    cca_release_report r;
    cr_assert_eq(cca_empty_cache(a, &r), CCA_OK, "%s: final empty_cache: %s", what, cca_last_error());
    fx_agree(a, u, &f, "final");
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.reserved_bytes, 0, "%s: %zu bytes still reserved", what, s.reserved_bytes);
    cr_assert_eq(s.segments, 0, "%s", what);
    cca_upstream_stats inner = tu_upstream_stats(f.inner);
    cr_assert_eq(inner.vm_mapped_bytes, 0, "%s: the device still maps %zu bytes", what, inner.vm_mapped_bytes);
    cr_assert_eq(inner.vm_reserved_bytes, 0, "%s: the device still reserves %zu bytes", what, inner.vm_reserved_bytes);
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(f.events_live, 0, "%s: events leaked", what);
    cca_upstream_destroy(u);
    cca_upstream_destroy(f.inner);
}

static void fault_sweep(bool with_events) {
    fx_run base = {.kind = TU_FAULT_MAP};
    run_script(&base, with_events);
    if (extra_conf) /* hold_peak: the releases happen in holds, before the device refuses */
        cr_assert_geq(base.holds, 1, "the script exercises the hold");
    else
        cr_assert_geq(base.retries, 1, "the script exercises the retry");
    cr_assert_geq(base.calls[TU_FAULT_UNMAP], 4);
    cr_assert_geq(base.calls[TU_FAULT_RELEASE], 2);
    cr_assert_geq(base.calls[TU_FAULT_SYNC], 4);
    cr_assert_eq(base.calls[TU_FAULT_ALLOC], 0);
    const tu_fault_kind kinds[] = {TU_FAULT_RESERVE, TU_FAULT_MAP,   TU_FAULT_UNMAP,
                                   TU_FAULT_RELEASE, TU_FAULT_ALLOC, TU_FAULT_SYNC};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (uint64_t at = 1; at <= base.calls[kinds[k]] + 1; at++)
            for (int sticky = 0; sticky < 2; sticky++) {
                fx_run run = {.kind = kinds[k], .at = at, .sticky = sticky};
                memcpy(run.calls, base.calls, sizeof run.calls);
                run_script(&run, with_events);
            }
}

Test(expandable, every_upstream_call_of_the_script_fails_once_and_for_good, .timeout = 60) {
    fault_sweep(false); /* no events: cross-stream frees synchronize */
}

Test(expandable, fault_sweep_with_events, .timeout = 60) {
    fault_sweep(true);
}

/* The same over whole maps: every map, one physical allocation, unmapped
 * only whole (the device refuses a cut, so any unmap the allocator makes of
 * part of a map fails the sweep). */
Test(expandable, fault_sweep_over_whole_maps, .timeout = 60) {
    backing = CCA_VM_WHOLE_MAPS;
    whole_chunk = 2 * MiB;
    fault_sweep(false);
    fault_sweep(true);
}

/* hold_peak:1: the script's requests that meet the peak release free
 * pages first (a synchronize, unmaps), and every such call fails in turn */
Test(expandable, fault_sweep_holding_the_peak, .timeout = 60) {
    extra_conf = "hold_peak:1";
    fault_sweep(false);
    fault_sweep(true);
}

/* A map refused part-way through a request whose rollback unmap is refused
 * too: kinds/pages.c's header says a refused unmap "leaves that run mapped
 * and counted (state intact)", so the request should fail cleanly (or
 * succeed on the retry) with the accounts exact. */
Test(expandable, a_refused_rollback_unmap_leaves_the_state_intact) {
    tu_faulty f;
    cca_upstream *u = fx_create(&f, 32 * MiB, true);
    cca_allocator *a = exp_allocator(u, "small_pool:0");
    char *A = tu_alloc(a, 4 * MiB, S0);       /* pages [0,64)                */
    char *B = tu_alloc(a, 2 * MiB, S0);       /* [64,96), ahead to 100       */
    char *C = tu_alloc(a, 2 * MiB, S0);       /* [96,128), ahead to 134      */
    char *D = tu_alloc(a, 1 * MiB + 512, S0); /* keeps C off the tail      */
    cr_assert_eq(B, A + 4 * MiB);
    cr_assert_eq(C, A + 6 * MiB);
    tu_free(a, A), tu_free(a, C);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    tu_free(a, B); /* one free block [0, 8 MiB), only B's pages [64,96) mapped */
    fx_agree(a, u, &f, "island");
    TU_ASSERT_FAULTS(A);
    TU_ASSERT_READABLE(B);
    /* 8 MiB takes that block: two runs, [0,64) and [96,128); the second map
     * is refused, and so is the unmap of the first */
    f.fail_at[TU_FAULT_MAP] = f.calls[TU_FAULT_MAP] + 2;
    f.fail_at[TU_FAULT_UNMAP] = f.calls[TU_FAULT_UNMAP] + 1;
    void *p = (void *)1;
    cca_status st = cca_alloc(a, 8 * MiB, S0, &p);
    fx_agree(a, u, &f, "after the double fault");
    cr_assert_eq(f.failures, 2);
    cr_assert(st == CCA_OK || st == CCA_ERR_OUT_OF_MEMORY, "%s", cca_status_string(st));
    if (st == CCA_OK) {
        cr_assert_eq(p, (void *)A);
        tu_fill(p, 8 * MiB, 5);
        cr_assert(tu_check_fill(p, 8 * MiB, 5));
        tu_free(a, p);
    }
    tu_faulty_faults_off(&f);
    tu_free(a, D);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    fx_agree(a, u, &f, "end");
    cr_assert_eq(tu_upstream_stats(f.inner).vm_mapped_bytes, 0);
    cr_assert_eq(cca_destroy(a), CCA_OK);
    cca_upstream_destroy(u);
    cca_upstream_destroy(f.inner);
}

/* The greedy arena is mapped whole, so its one free block needs no page
 * test and carries no `unmapped` mark. Empty-cache unmaps every page and
 * then has the range released; if the release is refused, the range stays
 * with its one block over unmapped pages: that block must be marked, or the
 * next request would be handed unmapped memory (a fault when touched). */
Test(expandable, an_arena_whose_release_is_refused_maps_its_pages_again) {
    tu_faulty f;
    cca_upstream *u = fx_create(&f, 32 * MiB, false);
    cca_allocator *a = exp_allocator(u, "policy:greedy,greedy_bytes:8M");
    char *A = tu_alloc(a, 1 * MiB, S0);
    cr_assert_eq(tu_stats(a).vm_maps, 1, "the arena, mapped whole");
    tu_free(a, A);
    fx_agree(a, u, &f, "arena free");
    f.fail_at[TU_FAULT_RELEASE] = f.calls[TU_FAULT_RELEASE] + 1;
    cca_release_report r;
    cr_assert_eq(cca_empty_cache(a, &r), CCA_ERR_UPSTREAM, "the refused release is reported");
    cr_assert_eq(f.failures, 1);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.mapped_bytes, 0, "every page went");
    cr_assert_eq(s.segments, 1, "the range stays");
    fx_agree(a, u, &f, "release refused");
    TU_ASSERT_FAULTS(A);
    char *B = tu_alloc(a, 1 * MiB, S0); /* the same block: its pages are mapped again */
    cr_assert_eq(B, A);
    cr_assert_eq(tu_stats(a).vm_maps, 2);
    tu_fill(B, 1 * MiB, 7);
    cr_assert(tu_check_fill(B, 1 * MiB, 7));
    fx_agree(a, u, &f, "taken again");
    tu_free(a, B);
    tu_faulty_faults_off(&f);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s", cca_last_error());
    fx_agree(a, u, &f, "end");
    cr_assert_eq(tu_upstream_stats(f.inner).vm_reserved_bytes, 0);
    cr_assert_eq(cca_destroy(a), CCA_OK);
    cca_upstream_destroy(u);
    cca_upstream_destroy(f.inner);
}

/* ---- random -------------------------------------------------------------- */

#define RAND_SLOTS 48

typedef struct rslot {
    uint64_t *p;
    size_t size;
    uint64_t tag;
} rslot;

static void tag_block(rslot *s) {
    s->p[0] = s->tag;
    if (s->size >= 16)
        memcpy((char *)s->p + s->size - 8, &s->tag, 8);
}

static bool tag_intact(const rslot *s) {
    uint64_t end = s->tag;
    if (s->size >= 16)
        memcpy(&end, (const char *)s->p + s->size - 8, 8);
    return s->p[0] == s->tag && end == s->tag;
}

/* Log-uniform in [1, 8 MiB]. */
static size_t random_size(uint64_t *rng) {
    unsigned bits = (unsigned)(tu_rand(rng) % 24); /* 2^0 .. 2^23 */
    size_t lo = (size_t)1 << bits;
    return lo + (size_t)(tu_rand(rng) % lo);
}

/* unit: what a trim gives back at a time (a page; over whole maps, up to
 * a map), so how far under keep it may go */
static void random_sequence(size_t unit) {
    const size_t cap = 64 * MiB;
    cca_upstream *u = vm_device(cap, PG);
    cca_allocator *a = exp_allocator(u, NULL);
    /* a fixed seed; CCA_RANDOM_SEED replays another (as test_random.c) */
    const char *env = getenv("CCA_RANDOM_SEED");
    uint64_t seed = env && *env ? strtoull(env, NULL, 0) : 0xe7a2dab1e5ull, rng = seed;
    rslot slots[RAND_SLOTS] = {{0}};
    cca_stream streams[2] = {S0, S1};
    size_t ooms = 0, trims = 0;
    for (int step = 0; step < 20000; step++) {
        uint64_t r = tu_rand(&rng) % 1000;
        int k = (int)(tu_rand(&rng) % RAND_SLOTS);
        char what[64];
        snprintf(what, sizeof what, "seed %llu step %d", (unsigned long long)seed, step);
        if (r < 5) { /* trim to a random keep */
            cca_stats before = tu_stats(a);
            size_t keep = before.reserved_bytes ? (size_t)(tu_rand(&rng) % (before.reserved_bytes + 1)) : 0;
            cca_release_report rep;
            cr_assert_eq(cca_trim(a, keep, &rep), CCA_OK, "%s: %s", what, cca_last_error());
            cca_stats s = tu_stats(a);
            cr_assert_eq(rep.bytes_still_reserved, s.reserved_bytes);
            cr_assert_eq(rep.bytes_released, before.reserved_bytes - s.reserved_bytes, "%s", what);
            cr_assert_eq(rep.bytes_unmapped, rep.bytes_released, "%s", what);
            if (before.reserved_bytes > keep) /* down to keep, less than a page under it, or all it could */
                cr_assert((s.reserved_bytes <= keep && s.reserved_bytes + unit > keep) ||
                              s.reserved_bytes == s.allocated_bytes + rep.free_bytes_trapped,
                          "%s: trim(%zu) left %zu (allocated %zu, trapped %zu)", what, keep, s.reserved_bytes,
                          s.allocated_bytes, rep.free_bytes_trapped);
            trims++;
        } else if (r < 6) { /* empty-cache */
            cca_release_report rep;
            cr_assert_eq(cca_empty_cache(a, &rep), CCA_OK, "%s", what);
            cca_stats s = tu_stats(a);
            cr_assert_eq(s.reserved_bytes, s.allocated_bytes + rep.free_bytes_trapped, "%s", what);
            trims++;
        } else if (r < 40) { /* record a second stream */
            if (slots[k].p)
                cr_assert_eq(cca_record_stream(a, slots[k].p, streams[tu_rand(&rng) % 2]), CCA_OK);
        } else if (!slots[k].p) {
            size_t size = random_size(&rng);
            cca_stream s = streams[tu_rand(&rng) % 2];
            void *p = (void *)1;
            cca_status st = cca_alloc(a, size, s, &p);
            if (st == CCA_OK) {
                slots[k] = (rslot){p, size, tu_rand(&rng)};
                tag_block(&slots[k]);
            } else {
                cr_assert_eq(st, CCA_ERR_OUT_OF_MEMORY, "%s: %s", what, cca_status_string(st));
                cca_stats after = tu_stats(a);
                /* only when the device could not hold it, whatever was unmapped */
                cr_assert_gt(after.mapped_bytes + rnd(size) + 2 * unit, cap,
                             "%s: OOM for %zu bytes with %zu mapped of %zu", what, size, after.mapped_bytes, cap);
                ooms++;
            }
        } else {
            cr_assert(tag_intact(&slots[k]), "%s: block %p (%zu bytes) overwritten", what, (void *)slots[k].p,
                      slots[k].size);
            tu_free(a, slots[k].p);
            slots[k].p = NULL;
        }
        agree(a, u, PG, cap, what);
    }
    cr_assert_gt(trims, 50);
    for (int k = 0; k < RAND_SLOTS; k++)
        if (slots[k].p) {
            cr_assert(tag_intact(&slots[k]));
            tu_free(a, slots[k].p);
        }
    cca_stats s = tu_stats(a);
    cr_assert_gt(s.vm_unmaps, 0);
    cr_log_info("random: %zu OOMs, %llu retries, %llu maps, %llu unmaps", ooms, (unsigned long long)s.alloc_retries,
                (unsigned long long)s.vm_maps, (unsigned long long)s.vm_unmaps);
    finish(a, u);
}

Test(expandable, seeded_random_sequence_keeps_every_account, .timeout = 60) {
    random_sequence(PG);
}

Test(expandable, seeded_random_sequence_holding_the_peak, .timeout = 60) {
    extra_conf = "hold_peak:1";
    random_sequence(PG);
    backing = CCA_VM_WHOLE_MAPS;
    random_sequence(whole_chunk);
}

Test(expandable, seeded_random_sequence_over_whole_maps, .timeout = 60) {
    backing = CCA_VM_WHOLE_MAPS;
    random_sequence(whole_chunk);
}

/* ---- threads ------------------------------------------------------------- */

#define THREADS 6

typedef struct worker {
    cca_allocator *a;
    int id;
    int failures; /* data or status problems, reported by the main thread */
    size_t ooms;
} worker;

static void *worker_main(void *arg) {
    worker *w = arg;
    uint64_t rng = 0x7157ull * (uint64_t)(w->id + 1);
    rslot slots[24] = {{0}};
    cca_stream mine = (cca_stream)(uintptr_t)(0x1000 * (w->id + 1));
    for (int i = 0; i < 3000; i++) {
        uint64_t r = tu_rand(&rng) % 1000;
        int k = (int)(tu_rand(&rng) % 24);
        if (r < 4) {
            if (cca_trim(w->a, (size_t)(tu_rand(&rng) % (64 * MiB)), NULL) != CCA_OK)
                w->failures++;
        } else if (r < 5) {
            if (cca_empty_cache(w->a, NULL) != CCA_OK)
                w->failures++;
        } else if (!slots[k].p) {
            size_t size = 512 + (size_t)(tu_rand(&rng) % (2 * MiB));
            void *p = NULL;
            cca_status st = cca_alloc(w->a, size, mine, &p);
            if (st == CCA_OK) {
                slots[k] = (rslot){p, size, tu_rand(&rng)};
                tag_block(&slots[k]);
                if (r % 7 == 0 && cca_record_stream(w->a, p, (cca_stream)0x99) != CCA_OK)
                    w->failures++;
            } else if (st == CCA_ERR_OUT_OF_MEMORY) {
                w->ooms++;
            } else {
                w->failures++;
            }
        } else {
            if (!tag_intact(&slots[k]))
                w->failures++;
            if (cca_free(w->a, slots[k].p) != CCA_OK)
                w->failures++;
            slots[k].p = NULL;
        }
    }
    for (int k = 0; k < 24; k++)
        if (slots[k].p) {
            if (!tag_intact(&slots[k]))
                w->failures++;
            if (cca_free(w->a, slots[k].p) != CCA_OK)
                w->failures++;
        }
    return NULL;
}

static void threads_at_once(void) {
    const size_t cap = 256 * MiB;
    cca_upstream *u = vm_device(cap, PG);
    cca_allocator *a = exp_allocator(u, NULL);
    pthread_t th[THREADS];
    worker w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker){a, i, 0, 0};
        cr_assert_eq(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        cr_assert_eq(pthread_join(th[i], NULL), 0);
    for (int i = 0; i < THREADS; i++)
        cr_assert_eq(w[i].failures, 0, "thread %d: %d failures", i, w[i].failures);
    agree(a, u, PG, cap, "threads joined");
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.active_blocks, 0);
    cr_assert_eq(s.allocated_bytes, 0);
    cr_assert_gt(s.vm_unmaps, 0);
    finish(a, u);
}

Test(expandable, threads_allocate_free_and_trim_at_once, .timeout = 60) {
    threads_at_once();
}

Test(expandable, threads_over_whole_maps, .timeout = 60) {
    backing = CCA_VM_WHOLE_MAPS;
    threads_at_once();
}
