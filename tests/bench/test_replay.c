/*
 * test_replay.c — bench/replay.c: ccbench on real work (bench/replay.c, ideal.c, trace.c v2,
 * strategy*.c): blocks of 0 and 1 bytes on every strategy, figures that do
 * not depend on what ran before in the process, release events applied by
 * every strategy with its own call and reported at checkpoints, the driver's
 * cost in the "with driver" times, the ideal arena against a brute-force
 * model, and the v2 format (marks, release events, gzip, strict fields).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "ccalloc.h"
#include "ccbench.h"
#include "replay_under.h" /* tests/support */

#define MiB ((size_t)1 << 20)

static const ccb_replay_options opts = {.device_bytes = (size_t)4 << 30, .reps = 1, .timeline_points = 50};

static int read_text(ccb_trace *t, const char *text, char *err, size_t errlen) {
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    cr_assert_not_null(f);
    ccb_trace_init(t, "text");
    int rc = ccb_trace_read(t, f, err, errlen);
    fclose(f);
    return rc;
}


/* ---- tiny blocks ------------------------------------------------------------------- */

Test(replay, blocks_of_zero_and_one_byte_replay_on_every_strategy) {
    /* what PyTorch's boolean scalars and the recorder's cca_alloc(a, 1) give */
    ccb_trace t;
    cr_assert_eq(read_text(&t,
                           "seq,op,id,size,stream\n"
                           "0,alloc,1,1,0\n1,alloc,2,0,0\n2,alloc,3,2,0\n3,alloc,4,1,1\n4,alloc,5,513,0\n"
                           "5,free,2,0,0\n6,free,1,1,0\n7,alloc,6,1,0\n8,free,3,2,0\n9,free,4,1,1\n"
                           "10,free,6,1,0\n",
                           NULL, 0),
                 0);
    cr_assert_eq(t.peak_requested, 1 + 0 + 2 + 1 + 513);
    for (size_t i = 0; i < ccb_preset_count; i++) {
        ccb_result r;
        int rc = ccb_replay(&t, ccb_presets[i].name, &opts, &r);
        cr_assert_eq(rc, 0, "%s: %s", ccb_presets[i].name, r.why);
        if (!r.skipped) {
            /* host pointers are tag-checked; device pointers (a GPU run) cannot be */
            const ccb_strategy_ops *ops = ccb_strategy_base(ccb_presets[i].base);
            cr_assert_not_null(ops, "%s", ccb_presets[i].name);
            cr_assert_eq(r.checked, ops->host_pointers, "%s: checked %d, host pointers %d", ccb_presets[i].name,
                         r.checked, ops->host_pointers);
            cr_assert_eq(r.ooms, 0, "%s", ccb_presets[i].name);
            cr_assert_eq(r.peak_requested, 517, "%s", ccb_presets[i].name);
            if (!strcmp(ccb_presets[i].name, "device-malloc")) {
                /* one device call per request and per free, none for the
                 * 0-byte block (as cudaMalloc(0)): 5 of 6 allocs, 4 of 5
                 * frees (the 513-byte block stays live); a page per block */
                cr_assert_eq(r.upstream_allocs, 5, "%llu", (unsigned long long)r.upstream_allocs);
                cr_assert_eq(r.upstream_frees, 4, "%llu", (unsigned long long)r.upstream_frees);
                cr_assert_eq(r.peak_reserved, (size_t)4 * (size_t)sysconf(_SC_PAGESIZE));
            }
        } else {
            cr_assert(ccb_presets[i].base[0] == 'c' && strstr(r.why, "GPU"), "%s skipped: %s", ccb_presets[i].name,
                      r.why);
        }
        ccb_result_free(&r);
    }
    ccb_trace_free(&t);
}

/* The timeline: the maximum over each window of `stride` events (events /
 * points + 1), then one point after the final empty-cache. 6 events, 3
 * points: stride 3, windows [0, 2] and [3, 5], the last at x = 6. */
Test(replay, the_timeline_has_one_point_per_window_and_the_end) {
    ccb_trace t;
    cr_assert_eq(read_text(&t,
                           "seq,op,id,size,stream\n"
                           "0,alloc,1,1024,0\n1,alloc,2,2048,0\n2,alloc,3,4096,0\n"
                           "3,free,1,1024,0\n4,free,2,2048,0\n5,free,3,4096,0\n",
                           NULL, 0),
                 0);
    ccb_replay_options o = opts;
    o.timeline_points = 3;
    ccb_result r;
    cr_assert_eq(ccb_replay(&t, "malloc", &o, &r), 0, "%s", r.why);
    cr_assert_eq(r.timeline_n, 3);
    static const struct {
        uint64_t op;
        size_t requested;
    } want[] = {{2, 7168}, {5, 6144}, {6, 0}};
    for (size_t i = 0; i < 3; i++) {
        cr_assert_eq(r.timeline[i].op, want[i].op, "point %zu: x %llu", i, (unsigned long long)r.timeline[i].op);
        cr_assert_eq(r.timeline[i].requested, want[i].requested, "point %zu: %zu requested", i,
                     r.timeline[i].requested);
    }
    ccb_result_free(&r);
    ccb_trace_free(&t);
}

Test(replay, tags_of_tiny_blocks_still_catch_an_overlap) {
    /* the tag of a 1-byte block is its only byte: a second block given the
     * same byte overwrites it, and the check at the free sees it */
    unsigned char buf[8] = {0};
    ccb_tag_block(buf, 1, 0);
    cr_assert(ccb_tag_ok(buf, 1, 0));
    ccb_tag_block(buf, 1, 1); /* another live block on the same byte */
    cr_assert_not(ccb_tag_ok(buf, 1, 0));
    ccb_tag_block(buf, 2, 5); /* two bytes: tag and its inverse */
    cr_assert(ccb_tag_ok(buf, 2, 5));
    buf[1] ^= 1;
    cr_assert_not(ccb_tag_ok(buf, 2, 5));
    ccb_tag_block(NULL, 0, 3); /* 0 bytes: nothing written, nothing to check */
    cr_assert(ccb_tag_ok(NULL, 0, 3));
}

/* ---- determinism --------------------------------------------------------------------- */

static void expect_same_memory(const ccb_result *a, const ccb_result *b) {
    cr_assert_eq(a->peak_reserved, b->peak_reserved, "%s peak reserved", a->strategy);
    cr_assert_eq(a->peak_allocated, b->peak_allocated, "%s peak allocated", a->strategy);
    cr_assert_eq(a->reserved_after_trace, b->reserved_after_trace, "%s", a->strategy);
    cr_assert_eq(a->reserved_after_empty, b->reserved_after_empty, "%s after empty-cache", a->strategy);
    cr_assert_eq(a->device_free_after, b->device_free_after, "%s", a->strategy);
    cr_assert_eq(a->upstream_allocs, b->upstream_allocs, "%s", a->strategy);
    cr_assert_eq(a->upstream_frees, b->upstream_frees, "%s", a->strategy);
    cr_assert_eq(a->ooms, b->ooms, "%s", a->strategy);
    cr_assert(a->frag_at_peak == b->frag_at_peak, "%s fragmentation at peak", a->strategy);
    cr_assert_eq(a->timeline_n, b->timeline_n);
    cr_assert_eq(memcmp(a->timeline, b->timeline, a->timeline_n * sizeof *a->timeline), 0, "%s timeline",
                 a->strategy);
    cr_assert_eq(a->checkpoints_n, b->checkpoints_n);
    cr_assert_eq(memcmp(a->checkpoints, b->checkpoints, a->checkpoints_n * sizeof *a->checkpoints), 0,
                 "%s checkpoints", a->strategy);
}

Test(replay, the_same_trace_gives_the_same_figures_whatever_ran_before) {
    /* with the device's addresses from aligned_alloc (before one reserved
     * range), exactly this case gave 726 MiB peak reserved alone and 728 MiB
     * after the other two traces (ccalloc-onelarge): best fit breaks ties by
     * address */
    ccb_gen_params p = {7, 0.3};
    ccb_trace x, y, z;
    cr_assert_eq(ccb_generate("lognormal", &p, &x), 0);
    cr_assert_eq(ccb_generate("adversarial", &p, &y), 0);
    cr_assert_eq(ccb_generate("models", &p, &z), 0);
    static const char *const specs[] = {"ccalloc-onelarge", "ccalloc-growth", "device-malloc"};
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++) {
        ccb_result alone, other, after;
        cr_assert_eq(ccb_replay(&x, specs[s], &opts, &alone), 0, "%s", alone.why);
        /* other work in the process: other traces, and host memory churn
         * that moves where malloc would put things */
        cr_assert_eq(ccb_replay(&y, specs[s], &opts, &other), 0);
        ccb_result_free(&other);
        void *junk[64];
        for (int i = 0; i < 64; i++)
            junk[i] = malloc((size_t)(i + 1) * 100000);
        cr_assert_eq(ccb_replay(&z, specs[s], &opts, &other), 0);
        ccb_result_free(&other);
        cr_assert_eq(ccb_replay(&x, specs[s], &opts, &after), 0);
        for (int i = 0; i < 64; i += 2)
            free(junk[i]);
        expect_same_memory(&alone, &after);
        ccb_result_free(&alone);
        ccb_result_free(&after);
        for (int i = 1; i < 64; i += 2)
            free(junk[i]);
    }
    ccb_trace_free(&x);
    ccb_trace_free(&y);
    ccb_trace_free(&z);
}

/* ---- release events -------------------------------------------------------------------- */

/* Model A (30 MiB weights + a 1 KiB scalar kept), empty-cache, model B. */
static const char *const two_models = "# ccalloc trace v2\n"
                                      "seq,op,id,size,stream,name\n"
                                      "0,mark,0,0,0,load:a\n"
                                      "1,alloc,1,31457280,0\n"
                                      "2,alloc,2,1024,0\n"
                                      "3,alloc,3,4194304,0\n"
                                      "4,free,3,4194304,0\n"
                                      "5,mark,0,0,0,unload:a\n"
                                      "6,free,1,31457280,0\n"
                                      "7,empty_cache,0,0,0\n"
                                      "8,mark,0,0,0,load:b\n"
                                      "9,alloc,4,8388608,0\n"
                                      "10,free,4,8388608,0\n"
                                      "11,trim,0,1048576,0\n";

Test(replay, release_events_apply_each_strategys_own_call_at_checkpoints) {
    ccb_trace t;
    char err[256] = "";
    cr_assert_eq(read_text(&t, two_models, err, sizeof err), 0, "%s", err);
    cr_assert_eq(t.nmarks, 3);
    cr_assert_eq(t.releases, 2);
    cr_assert_str_eq(t.marks[1], "unload:a");

    ccb_result r;
    cr_assert_eq(ccb_replay(&t, "ccalloc-growth", &opts, &r), 0, "%s", r.why);
    cr_assert_eq(r.checkpoints_n, 5);
    const ccb_checkpoint *c = r.checkpoints;
    cr_assert_eq(c[0].op, CCB_MARK);
    cr_assert_eq(c[0].event, 0);
    cr_assert_eq(c[0].reserved, 0);
    cr_assert_eq(c[1].op, CCB_MARK);
    cr_assert_eq(c[1].mark, 1);
    cr_assert_eq(c[1].requested, 31457280 + 1024);
    /* 30 MiB large segment, 2 MiB small (the scalar), 20 MiB medium (4 MiB) */
    cr_assert_eq(c[1].reserved, 30 * MiB + 2 * MiB + 20 * MiB);
    cr_assert_eq(c[2].op, CCB_EMPTY_CACHE);
    cr_assert_eq(c[2].requested, 1024);
    cr_assert_eq(c[2].reserved, 2 * MiB, "empty-cache leaves the scalar's small segment alone");
    cr_assert_eq(c[3].op, CCB_MARK);
    cr_assert_eq(c[4].op, CCB_TRIM);
    cr_assert_eq(c[4].keep, 1 * MiB);
    cr_assert_eq(c[4].reserved, 2 * MiB, "trim to 1 MiB returns the 20 MiB medium segment of model b");
    cr_assert_eq(r.reserved_after_trace, 2 * MiB);
    ccb_result_free(&r);

    /* nothing cached: reserved is what live blocks hold (the device's page) */
    cr_assert_eq(ccb_replay(&t, "device-malloc", &opts, &r), 0, "%s", r.why);
    long page = sysconf(_SC_PAGESIZE);
    cr_assert_eq(r.checkpoints[2].reserved, (size_t)page);
    cr_assert_eq(r.checkpoints[1].reserved, 31457280 + (size_t)page);
    cr_assert_eq(r.upstream_allocs, 4);
    ccb_result_free(&r);

    /* the malloc floor has no device: reserved unknown at every checkpoint */
    cr_assert_eq(ccb_replay(&t, "malloc", &opts, &r), 0, "%s", r.why);
    cr_assert_eq(r.checkpoints_n, 5);
    cr_assert_eq(r.checkpoints[2].reserved, CCB_UNKNOWN);
    cr_assert_eq(r.checkpoints[2].requested, 1024);
    ccb_result_free(&r);
    ccb_trace_free(&t);
}

Test(replay, greedy_keeps_its_arena_while_one_block_pins_it) {
    ccb_trace t;
    cr_assert_eq(read_text(&t, two_models, NULL, 0), 0);
    ccb_result r;
    cr_assert_eq(ccb_replay(&t, "ccalloc-greedy", &opts, &r), 0, "%s", r.why);
    size_t arena = r.checkpoints[0].reserved;
    cr_assert_eq(arena, (size_t)(0.9 * (double)((size_t)4 << 30)) / 512 * 512, "0.9 x 4 GiB up front");
    cr_assert_eq(r.checkpoints[2].reserved, arena, "the 1 KiB scalar pins the one arena segment");
    ccb_result_free(&r);
    ccb_trace_free(&t);
    /* the same without the scalar: the empty-cache event returns everything */
    char text[1024];
    snprintf(text, sizeof text, "%s", two_models);
    char *line = strstr(text, "2,alloc,2,1024,0\n");
    memmove(line, line + strlen("2,alloc,2,1024,0\n"), strlen(line + strlen("2,alloc,2,1024,0\n")) + 1);
    cr_assert_eq(read_text(&t, text, NULL, 0), 0);
    cr_assert_eq(ccb_replay(&t, "ccalloc-greedy", &opts, &r), 0, "%s", r.why);
    cr_assert_eq(r.checkpoints[2].op, CCB_EMPTY_CACHE);
    cr_assert_eq(r.checkpoints[2].reserved, 0);
    cr_assert_eq(r.checkpoints[3].reserved, 0, "re-reserved only at the next allocation");
    cr_assert_eq(r.upstream_allocs, 2, "the arena, and again for b after the empty-cache");
    cr_assert_eq(r.checkpoints[4].reserved, 0, "a trim below the arena's size returns it whole");
    ccb_result_free(&r);
    ccb_trace_free(&t);
}

Test(replay, without_release_events_the_cache_stays_and_the_checkpoints_say_so) {
    ccb_trace t;
    cr_assert_eq(read_text(&t, two_models, NULL, 0), 0);
    ccb_replay_options o = opts;
    o.ignore_releases = 1;
    ccb_result r;
    cr_assert_eq(ccb_replay(&t, "ccalloc-growth", &o, &r), 0, "%s", r.why);
    cr_assert_eq(r.checkpoints_n, 5, "release events are still checkpoints");
    cr_assert_eq(r.checkpoints[2].op, CCB_EMPTY_CACHE);
    cr_assert_eq(r.checkpoints[2].reserved, 30 * MiB + 2 * MiB + 20 * MiB, "nothing was released");
    cr_assert_eq(r.checkpoints[4].reserved, 30 * MiB + 2 * MiB + 20 * MiB, "b reused the cached 20 MiB segment");
    cr_assert_eq(r.upstream_frees, 0);
    ccb_result_free(&r);
    ccb_trace_free(&t);
}

/* ---- the driver's cost ------------------------------------------------------------------- */

/* The figures whose upper bounds tu_replay_under (tests/support) checks. */
static double total_ms(const ccb_result *r) {
    return r->total_ms;
}
static double driver_ms(const ccb_result *r) {
    return r->driver_total_ms;
}

Test(replay, times_with_the_driver_pay_each_upstream_call) {
    ccb_trace t;
    cr_assert_eq(read_text(&t, two_models, NULL, 0), 0);
    ccb_replay_options o = opts;
    o.alloc_latency_ns = 2000000; /* 2 ms: far above the bookkeeping */
    o.free_latency_ns = 3000000;
    o.reps = 5; /* the bookkeeping's bound holds for the median: one pass preempted on a busy machine cannot fail it */
    ccb_result r;
    tu_replay_under(&t, "device-malloc", &o, &r, total_ms, 4 * 2.0);
    cr_assert_eq(r.driver, CCB_DRIVER_MODEL);
    /* 4 device allocs and 3 device frees during the trace (the scalar stays) */
    cr_assert_geq(r.driver_total_ms, 4 * 2.0 + 3 * 3.0, "%f", r.driver_total_ms);
    cr_assert_lt(r.total_ms, 4 * 2.0, "bookkeeping alone pays no latency: %f", r.total_ms);
    ccb_result_free(&r);

    cr_assert_eq(ccb_replay(&t, "ccalloc-growth", &o, &r), 0, "%s", r.why);
    /* segments: large 30, small 2, medium 20 at first; the empty-cache frees
     * 30 + 20; b's 8 MiB takes a new 20 MiB medium segment, the trim frees it */
    cr_assert_eq(r.upstream_allocs, 4);
    cr_assert_eq(r.upstream_frees, 3);
    cr_assert_geq(r.driver_total_ms, 4 * 2.0 + 3 * 3.0, "%f", r.driver_total_ms);
    ccb_result_free(&r);

    cr_assert_eq(ccb_replay(&t, "malloc", &o, &r), 0, "%s", r.why);
    cr_assert_eq(r.driver, CCB_DRIVER_NONE);
    cr_assert(isnan(r.driver_total_ms), "the malloc floor has no driver");
    ccb_result_free(&r);
    ccb_trace_free(&t);
}

/* --driver-reps: the pass with the driver's cost runs that many times,
 * whatever --reps says. 20 passes of one device alloc and free at 5 ms
 * each take 200 ms at least; one pass (--reps 1) would take 10. */
Test(replay, the_driver_pass_runs_driver_reps_times) {
    ccb_trace t;
    cr_assert_eq(read_text(&t, "seq,op,id,size,stream\n0,alloc,1,4096,0\n1,free,1,4096,0\n", NULL, 0), 0);
    ccb_replay_options o = opts;
    o.reps = 1;
    o.driver_reps = 20;
    o.alloc_latency_ns = o.free_latency_ns = 5000000;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    ccb_result r;
    cr_assert_eq(ccb_replay(&t, "device-malloc", &o, &r), 0, "%s", r.why);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
    cr_assert_geq(s, 20 * 0.010, "20 driver passes of 10 ms took %.3f s", s);
    cr_assert_eq(r.reps, 1, "the passes without the driver: --reps");
    cr_assert_geq(r.driver_total_ms, 10.0, "%f", r.driver_total_ms);
    ccb_result_free(&r);
    ccb_trace_free(&t);
}

/* --vm-latency alone: the pass with the driver's cost runs, and an
 * expandable segment over pages (--vm-backing pages) pays per granule it
 * maps: at least its peak's granules (2 MiB, the simulated device's
 * default) x the map latency. Whole maps are charged per map instead
 * (the_driver_charges_each_physical_allocation_once). */
Test(replay, times_with_the_driver_pay_each_granule_mapped) {
    ccb_trace t;
    cr_assert_eq(read_text(&t, two_models, NULL, 0), 0);
    ccb_replay_options o = opts;
    o.map_granule_ns = 1000000; /* 1 ms per granule mapped */
    o.unmap_granule_ns = 1000000;
    o.vm_backing = CCA_VM_PAGES;
    o.reps = 5; /* the bookkeeping's bound: of the median, as above */
    ccb_result r;
    tu_replay_under(&t, "ccalloc-expandable", &o, &r, total_ms, 26 * 1.0);
    cr_assert_eq(r.driver, CCB_DRIVER_MODEL);
    cr_assert(!isnan(r.driver_total_ms), "a vm latency alone makes a pass with the driver's cost");
    double granules = (double)(r.peak_reserved / (2 * MiB));
    cr_assert_geq(granules, 26, "the peak is at least 52 MiB");
    cr_assert_geq(r.driver_total_ms, granules * 1.0, "%f ms for %.0f granules", r.driver_total_ms, granules);
    cr_assert_lt(r.total_ms, granules * 1.0, "bookkeeping alone pays no latency: %f", r.total_ms);
    ccb_result_free(&r);
    ccb_trace_free(&t);
}

/* The driver's cost per PHYSICAL ALLOCATION (the simulated device,
 * cca_host_options): a map is charged once per physical allocation it
 * makes and an unmap once per one it gives back; over pages each page is
 * one, over whole maps each map, whatever its size. One 8 MiB block in an
 * expandable segment maps 20 MiB in one call (the growth rule's least
 * step): 10 pages of 2 MiB, or one whole map; the trace's empty_cache
 * unmaps them in one call. No per-call latency, 20 ms per allocation mapped and 10 ms per
 * one unmapped: the pass with the driver's cost takes 10 x 30 ms over
 * pages and 30 ms over whole maps, plus bookkeeping. The bound is midway
 * between the right count and the nearest wrong one (each charged twice:
 * 1.5x; per page over whole maps: 10x), so a busy machine's bookkeeping
 * (12-15 ms seen with five jobs on two cores) cannot fail it and a wrong
 * count always does (the median of three passes). */
Test(replay, the_driver_charges_each_physical_allocation_once) {
    ccb_trace t;
    cr_assert_eq(read_text(&t,
                           "seq,op,id,size,stream,name\n0,alloc,1,8388608,0\n1,free,1,8388608,0\n"
                           "2,empty_cache,0,0,0\n",
                           NULL, 0),
                 0);
    ccb_replay_options o = opts;
    o.map_granule_ns = 20000000;
    o.unmap_granule_ns = 10000000;
    o.driver_reps = 3;
    const int backing[] = {CCA_VM_PAGES, CCA_VM_WHOLE_MAPS};
    const double want_ms[] = {10 * 30.0, 30.0};
    /* both replays' figures first, then the results and the trace freed,
     * then the asserts: a failed one ends the test, and would leave them
     * to a leak check */
    size_t peak[2], returned[2], allocs[2];
    double ms[2];
    for (size_t i = 0; i < 2; i++) {
        o.vm_backing = backing[i];
        ccb_result r;
        tu_replay_under(&t, "ccalloc-expandable", &o, &r, driver_ms, want_ms[i] * 1.5);
        peak[i] = r.peak_reserved, returned[i] = r.checkpoints[0].returned;
        allocs[i] = (size_t)r.upstream_allocs, ms[i] = r.driver_total_ms;
        ccb_result_free(&r);
    }
    ccb_trace_free(&t);
    for (size_t i = 0; i < 2; i++) {
        cr_assert_eq(peak[i], 20 * MiB, "%zu", peak[i]);
        cr_assert_eq(allocs[i], 2, "a range and ONE map of 20 MiB");
        cr_assert_eq(returned[i], 20 * MiB, "the empty_cache unmaps it all");
        cr_assert_geq(ms[i], want_ms[i], "backing %d: %.1f ms", backing[i], ms[i]);
        cr_assert_lt(ms[i], want_ms[i] * 1.5, "backing %d: %.1f ms, charged more than once per physical allocation",
                     backing[i], ms[i]);
    }
}

/* --vm-call-latency: a vm_map / vm_unmap costs its own call latency (not the
 * device alloc's / free's) once per call, beside its physical allocations;
 * a call latency of 0 charges the device alloc's / free's latency instead
 * (docs/benchmarks.md, "What a page costs": the model before the option).
 * 30 ms right, 60 charged twice, 300 per page: the bound is 45, midway
 * (the test above says why). */
Test(replay, a_vm_call_costs_its_own_latency_once) {
    ccb_trace t;
    cr_assert_eq(read_text(&t,
                           "seq,op,id,size,stream,name\n0,alloc,1,8388608,0\n1,free,1,8388608,0\n"
                           "2,empty_cache,0,0,0\n",
                           NULL, 0),
                 0);
    /* {alloc, free, map call, unmap call}: 20 ms a map, 10 ms an unmap either way */
    const uint64_t ns[2][4] = {{1, 1, 20000000, 10000000}, {20000000, 10000000, 0, 0}};
    size_t allocs[2];
    double ms[2];
    for (size_t i = 0; i < 2; i++) { /* the figures, everything freed, then the asserts (the test above) */
        ccb_replay_options o = opts;
        o.alloc_latency_ns = ns[i][0];
        o.free_latency_ns = ns[i][1];
        o.map_call_ns = ns[i][2];
        o.unmap_call_ns = ns[i][3];
        o.driver_reps = 3;
        o.vm_backing = CCA_VM_PAGES;
        ccb_result r;
        tu_replay_under(&t, "ccalloc-expandable", &o, &r, driver_ms, 45.0);
        allocs[i] = (size_t)r.upstream_allocs, ms[i] = r.driver_total_ms;
        ccb_result_free(&r);
    }
    ccb_trace_free(&t);
    for (size_t i = 0; i < 2; i++) {
        cr_assert_eq(allocs[i], 2, "a range and ONE map (ten pages)");
        cr_assert_geq(ms[i], 30.0, "case %zu: one map call and one unmap call: %.1f ms", i, ms[i]);
        cr_assert_lt(ms[i], 45.0, "case %zu: %.1f ms: a call charged per page, or twice", i, ms[i]);
    }
}

/* ---- the ideal arena --------------------------------------------------------------------- */

/* Brute force: free extents in an array, scanned for best fit (ties: lowest
 * address), merged on free, the tail returned to `top`. */
static size_t ideal_brute(const ccb_trace *t) {
    enum { MAXF = 4096 };
    static uint64_t fo[MAXF], fl[MAXF];
    size_t nf = 0;
    uint64_t top = 0, peak = 0;
    uint64_t *off = calloc(t->slots + 1, 8), *len = calloc(t->slots + 1, 8);
    for (size_t i = 0; i < t->n; i++) {
        const ccb_event *e = &t->ev[i];
        if (e->op == CCB_ALLOC) {
            uint64_t need = (e->size + 511) / 512 * 512;
            len[e->slot] = need;
            if (!need)
                continue;
            size_t best = nf;
            for (size_t k = 0; k < nf; k++)
                if (fl[k] >= need && (best == nf || fl[k] < fl[best] || (fl[k] == fl[best] && fo[k] < fo[best])))
                    best = k;
            if (best < nf) {
                off[e->slot] = fo[best];
                fo[best] += need;
                fl[best] -= need;
                if (!fl[best]) {
                    fo[best] = fo[nf - 1];
                    fl[best] = fl[nf - 1];
                    nf--;
                }
            } else {
                off[e->slot] = top;
                top += need;
                peak = top > peak ? top : peak;
            }
        } else if (e->op == CCB_FREE && len[e->slot]) {
            uint64_t o = off[e->slot], l = len[e->slot];
            for (int merged = 1; merged;) {
                merged = 0;
                for (size_t k = 0; k < nf; k++)
                    if (fo[k] + fl[k] == o || o + l == fo[k]) {
                        o = fo[k] < o ? fo[k] : o;
                        l += fl[k];
                        fo[k] = fo[nf - 1];
                        fl[k] = fl[nf - 1];
                        nf--;
                        merged = 1;
                        break;
                    }
            }
            if (o + l == top)
                top = o;
            else {
                cr_assert_lt(nf, MAXF);
                fo[nf] = o;
                fl[nf++] = l;
            }
        }
    }
    free(off);
    free(len);
    return (size_t)peak;
}

Test(ideal, exact_on_hand_made_traces) {
    ccb_trace t;
    /* 1000 -> 1024; the hole of a (1024) takes c (600 -> 1024): peak 1536 */
    cr_assert_eq(read_text(&t, "seq,op,id,size,stream\n0,alloc,1,1000,0\n1,alloc,2,512,0\n2,free,1,1000,0\n"
                               "3,alloc,3,600,0\n",
                           NULL, 0),
                 0);
    cr_assert_eq(t.ideal_peak, 1536);
    cr_assert_eq(t.peak_requested, 1512);
    ccb_trace_free(&t);
    /* a hole too small for c: c goes to the top (1024 + 1024 + 2048) */
    cr_assert_eq(read_text(&t, "seq,op,id,size,stream\n0,alloc,1,1024,0\n1,alloc,2,1024,0\n2,free,1,1024,0\n"
                               "3,alloc,3,2048,0\n",
                           NULL, 0),
                 0);
    cr_assert_eq(t.ideal_peak, 4096);
    ccb_trace_free(&t);
    /* freed neighbours merge: a and b free make 2048, which c fits exactly */
    cr_assert_eq(read_text(&t, "seq,op,id,size,stream\n0,alloc,1,1024,0\n1,alloc,2,1024,0\n2,alloc,4,512,0\n"
                               "3,free,1,1024,0\n4,free,2,1024,0\n5,alloc,3,2048,0\n",
                           NULL, 0),
                 0);
    cr_assert_eq(t.ideal_peak, 2560);
    ccb_trace_free(&t);
    /* best fit, not first fit: the 1024 hole serves 1024, the 4096 hole stays whole for 4096 */
    cr_assert_eq(read_text(&t, "seq,op,id,size,stream\n0,alloc,1,4096,0\n1,alloc,2,512,0\n2,alloc,3,1024,0\n"
                               "3,alloc,4,512,0\n4,free,1,4096,0\n5,free,3,1024,0\n6,alloc,5,1024,0\n"
                               "7,alloc,6,4096,0\n",
                           NULL, 0),
                 0);
    cr_assert_eq(t.ideal_peak, 4096 + 512 + 1024 + 512);
    ccb_trace_free(&t);
}

Test(ideal, agrees_with_a_brute_force_model_on_generated_traces) {
    static const char *const gens[] = {"uniform", "lognormal", "mlp", "models", "adversarial"};
    for (size_t g = 0; g < sizeof gens / sizeof gens[0]; g++)
        for (uint64_t seed = 1; seed <= 3; seed++) {
            ccb_gen_params p = {seed, 0.02};
            ccb_trace t;
            cr_assert_eq(ccb_generate(gens[g], &p, &t), 0);
            size_t want = ideal_brute(&t);
            cr_assert_eq(t.ideal_peak, want, "%s seed %llu: %zu vs brute force %zu", gens[g],
                         (unsigned long long)seed, t.ideal_peak, want);
            cr_assert_geq(t.ideal_peak, t.peak_rounded, "never below the rounded lower bound");
            ccb_trace_free(&t);
        }
}

/* ---- format v2 ---------------------------------------------------------------------------- */

/* A v2 file reads, and is written back as v3 (domain 0 everywhere), which
 * reads back to the same events and writes itself unchanged. */
Test(format_v2, round_trips_every_op) {
    static const char *const two_models_v3 = "# ccalloc trace v3\n"
                                             "seq,op,id,size,stream,domain,name\n"
                                             "0,mark,0,0,0,0,load:a\n"
                                             "1,alloc,1,31457280,0,0\n"
                                             "2,alloc,2,1024,0,0\n"
                                             "3,alloc,3,4194304,0,0\n"
                                             "4,free,3,4194304,0,0\n"
                                             "5,mark,0,0,0,0,unload:a\n"
                                             "6,free,1,31457280,0,0\n"
                                             "7,empty_cache,0,0,0,0\n"
                                             "8,mark,0,0,0,0,load:b\n"
                                             "9,alloc,4,8388608,0,0\n"
                                             "10,free,4,8388608,0,0\n"
                                             "11,trim,0,1048576,0,0\n";
    ccb_trace t;
    cr_assert_eq(read_text(&t, two_models, NULL, 0), 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_eq(ccb_trace_write(&t, f), 0);
    fclose(f);
    cr_assert_str_eq(buf, two_models_v3);
    ccb_trace back;
    cr_assert_eq(read_text(&back, buf, NULL, 0), 0);
    cr_assert_eq(back.n, t.n);
    cr_assert_eq(memcmp(back.ev, t.ev, t.n * sizeof *t.ev), 0, "the same events");
    ccb_trace_free(&back);
    free(buf);
    ccb_trace_free(&t);
}

static void expect_error(const char *text, const char *needle) {
    ccb_trace t;
    char err[256] = "";
    cr_assert_eq(read_text(&t, text, err, sizeof err), -1, "accepted: %s", text);
    cr_assert(strstr(err, needle) != NULL, "error '%s' should mention '%s'", err, needle);
    cr_assert_null(t.ev);
    cr_assert_null(t.marks);
}

/* The same for `body` after a column header. */
static void expect_error_after(const char *header, const char *body, const char *needle) {
    char text[512];
    snprintf(text, sizeof text, "%s%s", header, body);
    expect_error(text, needle);
}

Test(format_v2, hostile_lines_are_refused_with_their_line) {
    const char *v2 = "seq,op,id,size,stream,name\n";
#define BAD(body, needle) expect_error_after(v2, body, needle)
    BAD("0,alloc,,1,4096\n", "line 2: bad number");         /* an empty field is not skipped */
    BAD("0,alloc,1,4096,\n", "line 2: bad number");
    BAD("0,alloc,1,4096,0,\n", "line 2: expected 5 fields"); /* a name on an alloc */
    BAD("0,mark,0,0,0\n", "line 2: expected 6 fields");
    BAD("0,mark\n", "line 2: expected 6 fields"); /* two fields: still a mark, told its own count */
    BAD("0,mark,0,0,0,\n", "line 2: mark name");
    BAD("0,mark,0,0,0,a\"b\n", "line 2: mark name");
    BAD("0,mark,0,0,0,x,y\n", "line 2: expected 6 fields");
    BAD("0,mark,0,0,0,aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n", "mark name"); /* 64 */
    BAD("0,mark,1,0,0,x\n", "line 2: mark takes id 0, stream 0 and size 0");
    BAD("0,empty_cache,0,5,0\n", "line 2: empty_cache takes id 0, stream 0 and size 0");
    BAD("0,trim,0,5,1\n", "line 2: trim takes id 0, stream 0");
    BAD("0,alloc,1, 4096,0\n", "bad number");
    BAD("0,alloc,1,+4096,0\n", "bad number");
    BAD("0,alloc,1,0x10,0\n", "bad number");
    BAD("0,alloc,1,1152921504606846977,0\n", "bad number"); /* 2^60 + 1 */
    BAD("0,alloc,1,4096,0\n1,free,1,4096,3\n", "line 3: free of id 1 with size 4096"); /* wrong stream */
    /* v1 sections hold alloc and free only */
    expect_error("seq,op,id,size,stream\n0,empty_cache,0,0,0\n", "(a v1 section)");
    expect_error("seq,op,id,size,stream\n0,mark,0,0,0,x\n", "(a v1 section)");
    expect_error("0,alloc,1,4096,0\n", "line 1: an event before the column header");
#undef BAD
}

Test(format_v2, running_sums_that_would_overflow_are_refused) {
    /* 16 live blocks of 2^60 bytes: 2^64 does not fit */
    char text[2048] = "seq,op,id,size,stream,name\n";
    for (int i = 0; i < 16; i++) {
        char line[64];
        snprintf(line, sizeof line, "%d,alloc,%d,1152921504606846976,0\n", i, i + 1);
        strcat(text, line);
    }
    expect_error(text, "live bytes overflow");
    /* ... but a freed block leaves the sum: 20 blocks of 2^60 - 512 bytes
     * (20 x that is no multiple of 2^64), each freed before the next, hold
     * 2^60 - 512 at most and read */
    snprintf(text, sizeof text, "seq,op,id,size,stream,name\n");
    for (int i = 0; i < 20; i++) {
        char line[96];
        snprintf(line, sizeof line, "%d,alloc,%d,1152921504606846464,0\n%d,free,%d,1152921504606846464,0\n", 2 * i,
                 i + 1, 2 * i + 1, i + 1);
        strcat(text, line);
    }
    ccb_trace t;
    char err[256] = "";
    cr_assert_eq(read_text(&t, text, err, sizeof err), 0, "%s", err);
    cr_assert_eq(t.allocs, 20);
    cr_assert_eq(t.peak_requested, ((size_t)1 << 60) - 512);
    ccb_trace_free(&t);
}

Test(format_v2, a_mark_name_is_checked_when_built_too) {
    ccb_trace t;
    ccb_trace_init(&t, "m");
    cr_assert_eq(ccb_trace_mark(&t, "load:resnet50 (batch 16)"), 0);
    cr_assert_eq(ccb_trace_mark(&t, "a,b"), -1);
    cr_assert_eq(ccb_trace_mark(&t, ""), -1);
    cr_assert_eq(ccb_trace_mark(&t, "tab\there"), -1);
    cr_assert_eq(ccb_trace_mark(&t, "\xc3\xa9"), -1, "ASCII only");
    cr_assert_eq(t.nmarks, 1);
    cr_assert_eq(t.n, 1);
    ccb_trace_free(&t);
}

Test(format_v2, gzip_files_read_like_plain_ones) {
    char plain[] = "/tmp/ccb_plain_XXXXXX", gz[] = "/tmp/ccb_gz_XXXXXX";
    int fd = mkstemp(plain);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, two_models, strlen(two_models)), (ssize_t)strlen(two_models));
    close(fd);
    fd = mkstemp(gz);
    cr_assert(fd >= 0);
    gzFile g = gzdopen(fd, "wb");
    cr_assert_not_null(g);
    cr_assert_eq(gzwrite(g, two_models, (unsigned)strlen(two_models)), (int)strlen(two_models));
    cr_assert_eq(gzclose(g), Z_OK);
    ccb_trace a, b;
    char err[256] = "";
    cr_assert_eq(ccb_trace_load(&a, plain, err, sizeof err), 0, "%s", err);
    cr_assert_eq(ccb_trace_load(&b, gz, err, sizeof err), 0, "%s", err);
    cr_assert_eq(a.n, b.n);
    cr_assert_eq(memcmp(a.ev, b.ev, a.n * sizeof *a.ev), 0);
    cr_assert_eq(a.nmarks, b.nmarks);
    cr_assert_eq(memcmp(a.marks, b.marks, a.nmarks * sizeof *a.marks), 0);
    ccb_trace_free(&a);
    ccb_trace_free(&b);
    /* a truncated gzip stream is an error, not a shorter trace */
    FILE *f = fopen(gz, "r+");
    cr_assert_not_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    cr_assert_eq(ftruncate(fileno(f), n - 12), 0);
    fclose(f);
    cr_assert_eq(ccb_trace_load(&b, gz, err, sizeof err), -1);
    cr_assert(strstr(err, gz), "%s", err);
    cr_assert_eq(ccb_trace_load(&b, "/nonexistent/trace.csv.gz", err, sizeof err), -1);
    cr_assert(strstr(err, "cannot open"), "%s", err);
    unlink(plain);
    unlink(gz);
}

/* ---- format v3: domains ------------------------------------------------------------------ */

/* Two models as two domains: a's large block and small scalar, b's small
 * scalar (in the same small segment as a's when domains are ignored) and a
 * medium block; a released while b is live, then the program empties its
 * cache, then b is released. */
static const char *const two_domains = "# ccalloc trace v3\n"
                                       "seq,op,id,size,stream,domain,name\n"
                                       "0,domain,0,0,0,1,model a\n"
                                       "1,domain,0,0,0,2,model b\n"
                                       "2,alloc,1,31457280,0,1\n"
                                       "3,alloc,2,1024,0,2\n"
                                       "4,alloc,3,8388608,0,2\n"
                                       "5,alloc,4,1024,0,1\n"
                                       "6,free,1,31457280,0,1\n"
                                       "7,free,4,1024,0,1\n"
                                       "8,domain_release,0,0,0,1\n"
                                       "9,empty_cache,0,0,0,0\n"
                                       "10,free,2,1024,0,2\n"
                                       "11,free,3,8388608,0,2\n"
                                       "12,domain_release,0,0,0,2\n";

Test(format_v3, reads_domains_and_writes_itself_unchanged) {
    ccb_trace t;
    char err[256] = "";
    cr_assert_eq(read_text(&t, two_domains, err, sizeof err), 0, "%s", err);
    cr_assert_eq(t.ndomains, 3, "the default domain and two declared");
    cr_assert_str_eq(ccb_domain_name(&t, 0), "default");
    cr_assert_str_eq(ccb_domain_name(&t, 1), "model a");
    cr_assert_str_eq(ccb_domain_name(&t, 2), "model b");
    cr_assert_str_eq(ccb_domain_name(&t, 3), "?");
    cr_assert_eq(t.domain_releases, 2);
    cr_assert_eq(t.releases, 1, "empty_cache; domain releases counted apart");
    cr_assert_eq(t.domains[1].allocs, 2);
    cr_assert_eq(t.domains[1].peak_requested, 31457280 + 1024);
    cr_assert_eq(t.domains[2].peak_requested, 8388608 + 1024);
    cr_assert_eq(t.domains[1].releases, 1);
    cr_assert_eq(t.domains[0].allocs, 0);
    cr_assert_eq(t.ev[2].domain, 1);
    cr_assert_eq(t.ev[3].domain, 2);
    cr_assert_eq(t.ev[8].op, CCB_DOMAIN_RELEASE);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_eq(ccb_trace_write(&t, f), 0);
    fclose(f);
    cr_assert_str_eq(buf, two_domains);
    free(buf);
    ccb_trace_free(&t);
}

/* Each section numbers its domains from 1; the reader numbers them across
 * the file, and a section cannot name another section's domain. */
Test(format_v3, sections_renumber_their_domains) {
    const char *text = "seq,op,id,size,stream,domain,name\n"
                       "0,domain,0,0,0,1,x\n"
                       "1,alloc,1,100,0,1\n"
                       "seq,op,id,size,stream,domain,name\n"
                       "0,domain,0,0,0,1,y\n"
                       "1,alloc,1,200,0,1\n"
                       "2,free,1,200,0,1\n"
                       "3,domain_release,0,0,0,1\n"
                       "seq,op,id,size,stream,name\n"
                       "0,alloc,1,300,0\n";
    ccb_trace t;
    char err[256] = "";
    cr_assert_eq(read_text(&t, text, err, sizeof err), 0, "%s", err);
    cr_assert_eq(t.ndomains, 3);
    cr_assert_str_eq(ccb_domain_name(&t, 1), "x");
    cr_assert_str_eq(ccb_domain_name(&t, 2), "y");
    size_t k = 0;
    uint16_t want[] = {1, 2, 2, 0}; /* the allocs and the free, in order */
    for (size_t i = 0; i < t.n; i++)
        if (t.ev[i].op <= CCB_FREE)
            cr_assert_eq(t.ev[i].domain, want[k++], "event %zu", i);
    cr_assert_eq(k, 4);
    cr_assert_eq(t.domains[1].allocs, 1);
    cr_assert_eq(t.domains[2].releases, 1);
    cr_assert_eq(t.final_live, 2, "x's block and the v2 section's");
    ccb_trace_free(&t);
}

Test(format_v3, hostile_lines_are_refused_with_their_line) {
    const char *v3 = "seq,op,id,size,stream,domain,name\n";
#define BAD3(body, needle) expect_error_after(v3, body, needle)
    BAD3("0,alloc,1,8,0\n", "line 2: expected 6 fields");
    BAD3("0,alloc,1,8,0,0,x\n", "line 2: expected 6 fields");
    BAD3("0,mark,0,0,0,x\n", "line 2: expected 7 fields");
    BAD3("0,domain,0,0,0,1\n", "line 2: expected 7 fields");
    BAD3("0,domain\n", "line 2: expected 7 fields");
    BAD3("0,mark\n", "line 2: expected 7 fields");
    BAD3("0,alloc,1,8,0,1\n", "line 2: domain 1 is not declared");
    BAD3("0,domain,0,0,0,2,a\n", "line 2: domain 2 declared out of order (next is 1)");
    BAD3("0,domain,0,0,0,0,a\n", "declared out of order");
    BAD3("0,domain,0,0,0,1,a\n1,domain,0,0,0,1,b\n", "line 3: domain 1 declared out of order (next is 2)");
    BAD3("0,domain,0,0,0,1,a\"b\n", "line 2: a domain name");
    BAD3("0,domain,0,0,0,1,a\\b\n", "line 2: a domain name");
    BAD3("0,domain,0,0,0,1,caf\xc3\xa9\n", "line 2: a domain name");
    BAD3("0,domain,1,0,0,1,a\n", "line 2: domain takes id 0");
    BAD3("0,domain,0,5,0,1,a\n", "line 2: domain takes id 0, stream 0 and size 0");
    BAD3("0,domain,0,0,0,1,a\n1,alloc,1,8,0,1\n2,free,1,8,0,0\n", "line 4: free of id 1 in domain 0, allocated in another");
    BAD3("0,domain,0,0,0,1,a\n1,alloc,1,8,0,1\n2,domain_release,0,0,0,1\n",
         "line 4: release of domain 1 (a) with 1 live blocks");
    BAD3("0,alloc,1,8,0,0\n1,domain_release,0,0,0,0\n", "line 3: release of domain 0 (default) with 1 live blocks");
    BAD3("0,domain_release,0,0,0,3\n", "line 2: domain 3 is not declared");
    BAD3("0,domain_reserve,0,0,0,0\n", "line 2: domain_reserve takes id 0, stream 0 and a size of 1 byte or more");
    BAD3("0,domain_release,0,8,0,0\n", "line 2: domain_release takes id 0, stream 0 and size 0");
    BAD3("0,domain_release,0,0,1,0\n", "line 2: domain_release takes id 0");
    BAD3("0,mark,0,0,0,1,x\n", "line 2: mark takes id 0, stream 0, domain 0");
    BAD3("0,empty_cache,0,0,0,2\n", "line 2: empty_cache takes id 0, stream 0, domain 0");
    BAD3("0,alloc,1,8,0,65535\n", "line 2: bad number");
    BAD3("0,alloc,1,8,0,-1\n", "line 2: bad number");
    BAD3("0,alloc,1,8,0,\n", "line 2: bad number");
    BAD3("0,domains,0,0,0,0\n", "line 2: op 'domains' is not one of alloc, free, mark, empty_cache, trim, domain");
#undef BAD3
    /* v2 sections know no domain events */
    expect_error("seq,op,id,size,stream,name\n0,domain_release,0,0,0\n", "line 2: op 'domain_release' is not one of");
    expect_error("seq,op,id,size,stream,name\n0,domain,0,0,0,a\n", "line 2: expected 5 fields");
    /* a domain of an earlier section is not this one's */
    expect_error("seq,op,id,size,stream,domain,name\n0,domain,0,0,0,1,a\n"
                 "seq,op,id,size,stream,domain,name\n0,alloc,1,8,0,1\n",
                 "line 4: domain 1 is not declared in this section");
}

Test(format_v3, builders_and_analysis_check_domains) {
    ccb_trace t;
    ccb_trace_init(&t, "built");
    cr_assert_eq(ccb_trace_domain(&t, ""), -1);
    cr_assert_eq(ccb_trace_domain(&t, "a,b"), -1, "a comma would split the field");
    cr_assert_eq(ccb_trace_domain_release(&t, 1), -1, "not declared");
    cr_assert_eq(ccb_trace_domain_reserve(&t, 0, 0), -1, "0 bytes");
    cr_assert_eq(ccb_trace_domain_reserve(&t, 0, CCB_SIZE_MAX + 1), -1);
    cr_assert_eq(t.n, 0, "refusals append nothing");
    int d = ccb_trace_domain(&t, "m");
    cr_assert_eq(d, 1);
    uint32_t s = ccb_trace_alloc_in(&t, 4096, 1, (unsigned)d);
    cr_assert_eq(ccb_trace_domain_reserve(&t, (unsigned)d, 1 << 20), 0);
    ccb_trace_release(&t, s); /* size, stream and domain come from the alloc */
    cr_assert_eq(ccb_trace_domain_release(&t, (unsigned)d), 0);
    char err[256] = "";
    cr_assert_eq(ccb_trace_analyze(&t, err, sizeof err), 0, "%s", err);
    cr_assert_eq(t.ev[3].domain, 1);
    cr_assert_eq(t.ev[3].size, 4096);
    cr_assert_eq(t.ev[3].stream, 1);
    cr_assert_eq(t.domains[1].reserves, 1);
    /* a release while a block of the domain is live */
    uint32_t s2 = ccb_trace_alloc_in(&t, 10, 0, (unsigned)d);
    cr_assert_eq(ccb_trace_domain_release(&t, (unsigned)d), 0);
    cr_assert_eq(ccb_trace_analyze(&t, err, sizeof err), -1);
    cr_assert(strstr(err, "event 6: release of domain 1 (m) with 1 live blocks"), "%s", err);
    (void)s2;
    ccb_trace_free(&t);
    /* an event naming a domain beyond the declared ones (built by hand) */
    ccb_trace_init(&t, "hand");
    ccb_trace_alloc_in(&t, 8, 0, 3);
    cr_assert_eq(ccb_trace_analyze(&t, err, sizeof err), -1);
    cr_assert(strstr(err, "event 0: domain 3 is not declared"), "%s", err);
    ccb_result r;
    cr_assert_eq(ccb_replay(&t, "ccalloc-growth", &opts, &r), -1, "replay refuses it before running");
    ccb_trace_free(&t);
    /* a declaration of a domain the trace does not name (built by hand) */
    ccb_trace_init(&t, "hand");
    ccb_trace_empty_cache(&t);
    t.ev[0] = (ccb_event){.op = CCB_DOMAIN, .domain = 1};
    cr_assert_eq(ccb_trace_analyze(&t, err, sizeof err), -1);
    cr_assert(strstr(err, "event 0: domain 1 declared out of order (next is 1)"), "%s", err);
    ccb_trace_free(&t);
    /* ... a domain named whose declaration is gone */
    ccb_trace_init(&t, "hand");
    cr_assert_eq(ccb_trace_domain(&t, "m"), 1);
    t.ev[0].op = CCB_EMPTY_CACHE;
    cr_assert_eq(ccb_trace_analyze(&t, err, sizeof err), -1);
    cr_assert(strstr(err, "1 domains named, 0 declared by events"), "%s", err);
    ccb_trace_free(&t);
    /* ... and a reservation of 0 bytes, which the builder refuses */
    ccb_trace_init(&t, "hand");
    cr_assert_eq(ccb_trace_domain_reserve(&t, 0, 8), 0);
    t.ev[0].size = 0;
    cr_assert_eq(ccb_trace_analyze(&t, err, sizeof err), -1);
    cr_assert(strstr(err, "event 0: a reservation of 0 bytes (1..2^60)"), "%s", err);
    ccb_trace_free(&t);
}

/* A domain's name holds 1..63 characters (CCB_DOMAIN_NAME_MAX), as a mark's:
 * the builder and the reader take 63 and refuse 64. */
Test(format_v3, domain_name_length_bounds) {
    char n63[64], n64[65], text[256], err[256] = "";
    memset(n63, 'a', 63);
    n63[63] = '\0';
    memset(n64, 'b', 64);
    n64[64] = '\0';
    cr_assert_eq(ccb_domain_name_ok(n63), 1);
    cr_assert_eq(ccb_domain_name_ok(n64), 0);
    ccb_trace t;
    ccb_trace_init(&t, "built");
    cr_assert_eq(ccb_trace_domain(&t, n64), -1);
    cr_assert_eq(t.n, 0, "a refused domain appends nothing");
    cr_assert_eq(ccb_trace_domain(&t, n63), 1);
    ccb_trace_free(&t);
    snprintf(text, sizeof text, "seq,op,id,size,stream,domain,name\n0,domain,0,0,0,1,%s\n", n63);
    cr_assert_eq(read_text(&t, text, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(ccb_domain_name(&t, 1), n63);
    ccb_trace_free(&t);
    snprintf(text, sizeof text, "seq,op,id,size,stream,domain,name\n0,domain,0,0,0,1,%s\n", n64);
    expect_error(text, "line 2: a domain name is 1..63 printable ASCII characters");
}

/* The reserved bytes of each domain, the sequence run directly on the
 * allocator: what a domain release must give back exactly. */
static void direct_domain_reserved(size_t *ra, size_t *rb) {
    cca_upstream *u;
    cca_allocator *a;
    cr_assert_eq(cca_upstream_host_create((size_t)4 << 30, &u), CCA_OK);
    cr_assert_eq(cca_create(NULL, u, &a), CCA_OK);
    cca_domain *da, *db;
    cr_assert_eq(cca_domain_create(a, "model a", &da), CCA_OK);
    cr_assert_eq(cca_domain_create(a, "model b", &db), CCA_OK);
    void *p[4];
    cr_assert_eq(cca_alloc_in(a, da, 31457280, NULL, &p[0]), CCA_OK);
    cr_assert_eq(cca_alloc_in(a, db, 1024, NULL, &p[1]), CCA_OK);
    cr_assert_eq(cca_alloc_in(a, db, 8388608, NULL, &p[2]), CCA_OK);
    cr_assert_eq(cca_alloc_in(a, da, 1024, NULL, &p[3]), CCA_OK);
    cca_domain_stats s;
    cr_assert_eq(cca_get_domain_stats(a, da, &s), CCA_OK);
    *ra = s.reserved_bytes;
    cr_assert_eq(cca_get_domain_stats(a, db, &s), CCA_OK);
    *rb = s.reserved_bytes;
    for (int i = 0; i < 4; i++)
        cca_free(a, p[i]);
    cca_destroy(a);
    cca_upstream_destroy(u);
}

Test(replay_domains, a_domain_release_returns_exactly_that_domains_reservation) {
    size_t ra, rb;
    direct_domain_reserved(&ra, &rb);
    cr_assert_eq(ra, 30 * MiB + 2 * MiB, "a: its 30 MiB large segment and its own small segment");
    ccb_trace t;
    char err[256] = "";
    cr_assert_eq(read_text(&t, two_domains, err, sizeof err), 0, "%s", err);
    ccb_result g, sh, gr, m;
    cr_assert_eq(ccb_replay(&t, "ccalloc-growth", &opts, &g), 0, "%s", g.why);
    cr_assert_eq(ccb_replay(&t, "ccalloc-shared", &opts, &sh), 0, "%s", sh.why);
    cr_assert_eq(ccb_replay(&t, "ccalloc-greedy", &opts, &gr), 0, "%s", gr.why);
    cr_assert_eq(ccb_replay(&t, "malloc", &opts, &m), 0, "%s", m.why);
    cr_assert_eq(g.checkpoints_n, 3);
    cr_assert_eq(sh.checkpoints_n, 3);
    const ccb_checkpoint *c = g.checkpoints;
    cr_assert_eq(c[0].op, CCB_DOMAIN_RELEASE);
    cr_assert_eq(c[0].mark, 1, "the domain released");
    cr_assert_eq(c[0].event, 8);
    cr_assert_eq(c[0].returned, ra, "domains: a's whole reservation back while b is live");
    cr_assert_eq(c[0].reserved, rb, "b's alone left");
    cr_assert_eq(c[1].op, CCB_EMPTY_CACHE);
    cr_assert_eq(c[1].returned, 0, "nothing of a left to return");
    cr_assert_eq(c[2].mark, 2);
    cr_assert_eq(c[2].returned, rb);
    cr_assert_eq(c[2].reserved, 0);
    /* shared segments: the release does nothing, empty_cache returns a's
     * large segment but the small segment stays, pinned by b's scalar */
    c = sh.checkpoints;
    cr_assert_eq(c[0].returned, 0);
    cr_assert_eq(c[0].reserved, g.checkpoints[0].reserved + ra - 2 * MiB, "a's and b's, sharing one small segment");
    cr_assert_eq(c[1].returned, 30 * MiB);
    cr_assert_eq(c[1].reserved, g.checkpoints[1].reserved, "a's small block shared b's segment");
    cr_assert_eq(c[2].returned, 0, "shared: no domain release");
    cr_assert_eq(sh.reserved_after_empty, 0, "what it kept went back at the end");
    /* greedy refuses domains: one arena, the events change nothing */
    cr_assert_eq(gr.checkpoints[0].returned, 0);
    cr_assert_eq(gr.checkpoints[2].returned, 0);
    /* no device: unknown */
    cr_assert_eq(m.checkpoints[0].returned, CCB_UNKNOWN);
    cr_assert_eq(m.checkpoints[0].reserved, CCB_UNKNOWN);
    ccb_result_free(&g);
    ccb_result_free(&sh);
    ccb_result_free(&gr);
    ccb_result_free(&m);
    ccb_trace_free(&t);
}

Test(replay_domains, a_footprint_reservation_serves_the_domain_without_upstream_calls) {
    const char *text = "seq,op,id,size,stream,domain,name\n"
                       "0,domain,0,0,0,1,m\n"
                       "1,domain_reserve,0,41943040,0,1\n"
                       "2,alloc,1,8388608,0,1\n"
                       "3,alloc,2,1024,0,1\n"
                       "4,alloc,3,31457280,0,1\n"
                       "5,free,1,8388608,0,1\n"
                       "6,free,2,1024,0,1\n"
                       "7,free,3,31457280,0,1\n"
                       "8,domain_release,0,0,0,1\n";
    ccb_trace t;
    char err[256] = "";
    cr_assert_eq(read_text(&t, text, err, sizeof err), 0, "%s", err);
    ccb_result g, sh, d;
    cr_assert_eq(ccb_replay(&t, "ccalloc-growth", &opts, &g), 0, "%s", g.why);
    cr_assert_eq(ccb_replay(&t, "ccalloc-shared", &opts, &sh), 0, "%s", sh.why);
    cr_assert_eq(g.upstream_allocs, 1, "the arena, and nothing else");
    cr_assert_eq(g.peak_reserved, 40 * MiB);
    cr_assert_eq(g.checkpoints[0].returned, 40 * MiB);
    cr_assert_gt(sh.upstream_allocs, 1, "without domains: no footprint, a segment per pool");
    /* the default, expandable segments: the footprint is one range, mapped once */
    cr_assert_eq(ccb_replay(&t, "ccalloc-default", &opts, &d), 0, "%s", d.why);
    cr_assert_eq(d.upstream_allocs, 2, "the footprint's range and its map, and nothing else");
    cr_assert_eq(d.peak_reserved, 40 * MiB);
    cr_assert_eq(d.checkpoints[0].returned, 40 * MiB);
    ccb_result_free(&g);
    ccb_result_free(&sh);
    ccb_result_free(&d);
    ccb_trace_free(&t);
}

/* Domain 0 is the default domain: its footprint is cca_domain_reserve of
 * the default domain (one arena serves the blocks), its release
 * cca_domain_release (the arena goes back), as for a declared domain. */
Test(replay_domains, the_default_domain_reserves_and_releases_as_a_declared_one) {
    const char *text = "seq,op,id,size,stream,domain,name\n"
                       "0,domain_reserve,0,41943040,0,0\n"
                       "1,alloc,1,31457280,0,0\n"
                       "2,alloc,2,1024,0,0\n"
                       "3,free,1,31457280,0,0\n"
                       "4,free,2,1024,0,0\n"
                       "5,domain_release,0,0,0,0\n";
    ccb_trace t;
    char err[256] = "";
    cr_assert_eq(read_text(&t, text, err, sizeof err), 0, "%s", err);
    ccb_result g;
    cr_assert_eq(ccb_replay(&t, "ccalloc-growth", &opts, &g), 0, "%s", g.why);
    cr_assert_eq(g.upstream_allocs, 1, "the arena, and nothing else");
    cr_assert_eq(g.peak_reserved, 40 * MiB);
    cr_assert_eq(g.checkpoints_n, 1);
    cr_assert_eq(g.checkpoints[0].op, CCB_DOMAIN_RELEASE);
    cr_assert_eq(g.checkpoints[0].returned, 40 * MiB, "the arena, cached, back");
    cr_assert_eq(g.checkpoints[0].reserved, 0);
    ccb_result_free(&g);
    ccb_trace_free(&t);
}

/* A refused config is quoted whole characters only: cut at 200 bytes
 * between UTF-8 sequences (common/ccai_utf8.h), marked "..." when cut. */
Test(replay_domains, a_long_refused_config_is_cut_between_characters) {
    ccb_trace t;
    cr_assert_eq(read_text(&t, two_domains, NULL, 0), 0);
    char strategy[400] = "ccalloc=domains:2,history:0,", *p = strategy + strlen(strategy);
    size_t head = strlen("domains:2,history:0,");
    while (head < 199) { /* "é" (c3 a9) across byte 200 of the config */
        *p++ = 'x';
        head++;
    }
    strcpy(p, "\xc3\xa9\xc3\xa9:1");
    ccb_result r;
    cr_assert_eq(ccb_replay(&t, strategy, &opts, &r), -1);
    cr_assert(strstr(r.why, "domains takes 0 or 1"), "%s", r.why);
    const char *q = strstr(r.why, "...'");
    cr_assert_not_null(q, "the cut is marked: %s", r.why);
    cr_assert_eq((unsigned char)q[-1], 'x', "the cut falls before the character, not inside it: %s", r.why);
    ccb_result_free(&r);
    ccb_trace_free(&t);
}

Test(replay_domains, domains_zero_or_one_only) {
    ccb_trace t;
    cr_assert_eq(read_text(&t, two_domains, NULL, 0), 0);
    ccb_result r;
    cr_assert_eq(ccb_replay(&t, "ccalloc=domains:2", &opts, &r), -1);
    cr_assert(strstr(r.why, "domains takes 0 or 1"), "%s", r.why);
    ccb_result_free(&r);
    cr_assert_eq(ccb_replay(&t, "ccalloc=domains:", &opts, &r), -1);
    ccb_result_free(&r);
    /* max_split needs classic segments: expandable:0 beside it */
    cr_assert_eq(ccb_replay(&t, "ccalloc=max_split:64M,domains:0,expandable:0", &opts, &r), 0, "%s", r.why);
    cr_assert_eq(r.checkpoints[0].returned, 0, "domains:0 anywhere in the config");
    ccb_result_free(&r);
    cr_assert_eq(ccb_replay(&t, "ccalloc=expandable:0,domains:1,max_split:64M", &opts, &r), 0, "%s", r.why);
    cr_assert_eq(r.checkpoints[0].returned, 32 * MiB);
    ccb_result_free(&r);
    ccb_trace_free(&t);
}
