/*
 * test_iterations.c — `ccbench replay --iterations N` (bench/replay.c's
 * iterations, bench/iterations.c's tables), on tiny traces whose figures
 * are known exactly:
 *   - a trace that repeats its work: ccalloc-growth (classic segments) and
 *     ccalloc-default (expandable ones) call upstream only in the first
 *     iteration, whose figures are those of a replay without --iterations
 *     (N = 1), and the whole run's peak is the first's;
 *   - blocks left live at the end are freed between iterations (never N
 *     copies of them): device-malloc's calls counted one by one;
 *   - a trace that releases its cache pays again in every iteration;
 *   - a domain is declared once; checkpoints carry their run position;
 *   - the times apart, with the driver's cost;
 *   - N out of 1..CCB_MAX_ITERATIONS refused; the tables, and no table
 *     (nor file) without --iterations.
 * The command line's refusals of bad values are in tests/bench/bench.cmake.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ccbench.h"
#include "replay_under.h" /* tests/support */

#define MiB ((size_t)1 << 20)

static const ccb_replay_options opts = {.device_bytes = (size_t)1 << 30, .reps = 1, .timeline_points = 50};

static void read_text(ccb_trace *t, const char *name, const char *text) {
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    cr_assert_not_null(f);
    ccb_trace_init(t, name);
    char err[256] = "";
    cr_assert_eq(ccb_trace_read(t, f, err, sizeof err), 0, "%s", err);
    fclose(f);
}

static void replay_n(const ccb_trace *t, const char *spec, ccb_replay_options o, int n, ccb_result *r) {
    o.iterations = n;
    cr_assert_eq(ccb_replay(t, spec, &o, r), 0, "%s x%d: %s", spec, n, r->why);
    cr_assert(!r->skipped, "%s: %s", spec, r->why);
}

/* A step that frees all it allocates: 8 MiB (a medium segment) and 4 KiB
 * (a small one). */
static const char repeats[] = "seq,op,id,size,stream\n"
                              "0,alloc,1,8388608,0\n1,alloc,2,4096,0\n2,free,1,8388608,0\n3,free,2,4096,0\n";

/* ---- a trace that repeats its work ----------------------------------------------- */

Test(iterations, a_repeating_trace_calls_upstream_only_in_the_first_iteration) {
    ccb_trace t;
    read_text(&t, "repeats", repeats);
    ccb_result one, five;
    replay_n(&t, "ccalloc-growth", opts, 1, &one);
    replay_n(&t, "ccalloc-growth", opts, 5, &five);
    cr_assert_eq(one.iterations, 1);
    cr_assert_eq(five.iterations, 5);
    cr_assert_eq(one.upstream_allocs, 2, "a medium and a small segment");
    cr_assert_eq(one.upstream_frees, 0);
    /* the first iteration is what N = 1 measures */
    cr_assert_eq(five.first_peak_reserved, one.peak_reserved, "%zu vs %zu", five.first_peak_reserved,
                 one.peak_reserved);
    cr_assert_eq(five.first_upstream_allocs, one.upstream_allocs);
    cr_assert_eq(five.first_upstream_frees, one.upstream_frees);
    /* the later ones reuse the cache: no call, the same peak */
    cr_assert_eq(five.later_upstream_allocs, 0);
    cr_assert_eq(five.later_upstream_frees, 0);
    cr_assert_eq(five.later_peak_reserved, one.peak_reserved);
    /* the whole run: the peak is the first's, the calls the first's, the
     * events five times the trace's */
    cr_assert_eq(five.peak_reserved, one.peak_reserved);
    cr_assert_eq(five.upstream_allocs, 2);
    cr_assert_eq(five.peak_requested, t.peak_requested);
    cr_assert_eq(five.ops, 5 * t.n);
    cr_assert_eq(five.allocs, 10);
    cr_assert_eq(five.frees, 10);
    cr_assert_eq(five.timeline[five.timeline_n - 1].op, 5 * t.n, "the last point is the run's end");
    /* N = 1 reports nothing apart */
    cr_assert_eq(one.first_peak_reserved, CCB_UNKNOWN);
    cr_assert_eq(one.later_upstream_allocs, UINT64_MAX);
    cr_assert(isnan(one.first_total_ms));
    cr_assert(isfinite(five.first_total_ms) && isfinite(five.later_total_ms));
    ccb_result_free(&one);
    ccb_result_free(&five);
    /* the allocator's default, expandable segments: the same steady state */
    replay_n(&t, "ccalloc-default", opts, 1, &one);
    replay_n(&t, "ccalloc-default", opts, 5, &five);
    cr_assert_eq(one.upstream_allocs, 4, "a medium and a small range, one map each");
    cr_assert_eq(one.upstream_frees, 0);
    cr_assert_eq(five.first_upstream_allocs, one.upstream_allocs);
    cr_assert_eq(five.first_peak_reserved, one.peak_reserved);
    cr_assert_eq(five.later_upstream_allocs, 0);
    cr_assert_eq(five.later_upstream_frees, 0);
    cr_assert_eq(five.later_peak_reserved, one.peak_reserved);
    cr_assert_eq(five.peak_reserved, one.peak_reserved);
    ccb_result_free(&one);
    ccb_result_free(&five);
    ccb_trace_free(&t);
}

/* ---- blocks left live at the end ------------------------------------------------- */

/* 8 MiB freed, 4 MiB left live: each later iteration first frees the
 * 4 MiB block the one before left, so the run never holds two of them. */
static const char leaves[] = "seq,op,id,size,stream\n"
                             "0,alloc,1,8388608,0\n1,alloc,2,4194304,0\n2,free,1,8388608,0\n";

Test(iterations, blocks_left_live_are_freed_between_iterations) {
    ccb_trace t;
    read_text(&t, "leaves", leaves);
    cr_assert_eq(t.final_live, 1);
    ccb_result r;
    /* device-malloc: one device call per alloc and per free, counted exactly */
    replay_n(&t, "device-malloc", opts, 5, &r);
    cr_assert_eq(r.first_upstream_allocs, 2);
    cr_assert_eq(r.first_upstream_frees, 1, "the 4 MiB block is still live");
    cr_assert_eq(r.later_upstream_allocs, 4 * 2);
    cr_assert_eq(r.later_upstream_frees, 4 * (1 + 1), "each later iteration: the leftover, then the trace's free");
    cr_assert_eq(r.peak_requested, 12 * MiB, "never two 4 MiB blocks live: %zu", r.peak_requested);
    cr_assert_eq(r.later_peak_reserved, r.first_peak_reserved);
    ccb_result_free(&r);
    /* ccalloc-growth: the freed block's memory is cached, nothing more asked */
    replay_n(&t, "ccalloc-growth", opts, 5, &r);
    cr_assert_eq(r.later_upstream_allocs, 0);
    cr_assert_eq(r.later_upstream_frees, 0);
    cr_assert_eq(r.later_peak_reserved, r.first_peak_reserved);
    cr_assert_eq(r.peak_reserved, r.first_peak_reserved);
    ccb_result_free(&r);
    ccb_trace_free(&t);
}

/* ---- a trace that releases -------------------------------------------------------- */

Test(iterations, a_trace_that_empties_its_cache_pays_again_each_iteration) {
    ccb_trace t;
    read_text(&t, "releases",
              "seq,op,id,size,stream,name\n0,alloc,1,8388608,0\n1,free,1,8388608,0\n2,empty_cache,0,0,0\n");
    ccb_result r;
    replay_n(&t, "ccalloc-growth", opts, 4, &r);
    cr_assert_eq(r.first_upstream_allocs, 1);
    cr_assert_eq(r.first_upstream_frees, 1);
    cr_assert_eq(r.later_upstream_allocs, 3);
    cr_assert_eq(r.later_upstream_frees, 3);
    /* a checkpoint per iteration, at its position in the run (k x 3 + 2) */
    cr_assert_eq(r.checkpoints_n, 4);
    for (size_t k = 0; k < 4; k++) {
        cr_assert_eq(r.checkpoints[k].event, k * 3 + 2);
        cr_assert_eq(r.checkpoints[k].op, CCB_EMPTY_CACHE);
        cr_assert_eq(r.checkpoints[k].returned, 20 * MiB, "the medium segment, each time");
    }
    ccb_result_free(&r);
    ccb_trace_free(&t);
}

/* ---- domains ------------------------------------------------------------------------ */

/* A domain declared once in the trace is declared once in the run: each
 * later iteration's block goes to it again, so each release gives back
 * its segment (served by the default domain, the release would give back
 * nothing). */
Test(iterations, a_domain_is_declared_once_and_released_each_iteration) {
    ccb_trace t;
    read_text(&t, "dom",
              "# ccalloc trace v3\nseq,op,id,size,stream,domain,name\n"
              "0,domain,0,0,0,1,m\n1,alloc,1,8388608,0,1\n2,free,1,8388608,0,1\n3,domain_release,0,0,0,1\n");
    ccb_result r;
    replay_n(&t, "ccalloc-growth", opts, 3, &r);
    cr_assert_eq(r.checkpoints_n, 3);
    for (size_t k = 0; k < 3; k++) {
        cr_assert_eq(r.checkpoints[k].event, k * 4 + 3);
        cr_assert_eq(r.checkpoints[k].op, CCB_DOMAIN_RELEASE);
        cr_assert_gt(r.checkpoints[k].returned, 0, "iteration %zu: the domain's segment back", k + 1);
    }
    cr_assert_eq(r.later_upstream_allocs, 2 * r.first_upstream_allocs);
    ccb_result_free(&r);
    ccb_trace_free(&t);
    /* without the release, the later iterations reuse the domain's cached
     * segment (a domain declared again would be a new one, which cannot) */
    read_text(&t, "dom-kept",
              "# ccalloc trace v3\nseq,op,id,size,stream,domain,name\n"
              "0,domain,0,0,0,1,m\n1,alloc,1,8388608,0,1\n2,free,1,8388608,0,1\n");
    replay_n(&t, "ccalloc-growth", opts, 3, &r);
    cr_assert_eq(r.first_upstream_allocs, 1);
    cr_assert_eq(r.later_upstream_allocs, 0);
    cr_assert_eq(r.later_peak_reserved, r.first_peak_reserved);
    ccb_result_free(&r);
    ccb_trace_free(&t);
}

/* ---- times ------------------------------------------------------------------------- */

/* The figures whose upper bounds tu_replay_under (tests/support) checks. */
static double later_ms(const ccb_result *r) {
    return r->later_total_ms;
}
static double later_driver_ms(const ccb_result *r) {
    return r->later_driver_total_ms;
}

/* With 2 ms per device alloc and 3 ms per free, each part's time with the
 * driver holds at least its calls' cost, and ccalloc-growth's later
 * iterations, which call nothing, hold less than one call's. */
Test(iterations, times_with_the_driver_apart) {
    ccb_trace t;
    read_text(&t, "repeats", repeats);
    ccb_replay_options o = opts;
    o.alloc_latency_ns = 2000000;
    o.free_latency_ns = 3000000;
    o.iterations = 3;
    ccb_result r;
    tu_replay_under(&t, "device-malloc", &o, &r, later_ms, 2.0);
    cr_assert_eq(r.first_upstream_allocs, 2);
    cr_assert_eq(r.later_upstream_allocs, 4);
    cr_assert_geq(r.first_driver_total_ms, 2 * 2.0 + 2 * 3.0, "%f", r.first_driver_total_ms);
    cr_assert_geq(r.later_driver_total_ms, 4 * 2.0 + 4 * 3.0, "%f", r.later_driver_total_ms);
    cr_assert_geq(r.driver_total_ms, 6 * 2.0 + 6 * 3.0, "%f", r.driver_total_ms);
    cr_assert_lt(r.later_total_ms, 2.0, "bookkeeping alone pays no latency: %f", r.later_total_ms);
    ccb_result_free(&r);
    tu_replay_under(&t, "ccalloc-growth", &o, &r, later_driver_ms, 2.0);
    cr_assert_geq(r.first_driver_total_ms, 2 * 2.0, "two segments: %f", r.first_driver_total_ms);
    cr_assert_lt(r.later_driver_total_ms, 2.0, "no upstream call after the first iteration: %f",
                 r.later_driver_total_ms);
    ccb_result_free(&r);
    replay_n(&t, "malloc", o, 3, &r);
    cr_assert(isnan(r.first_driver_total_ms) && isnan(r.later_driver_total_ms), "the malloc floor has no driver");
    cr_assert(isfinite(r.later_total_ms));
    ccb_result_free(&r);
    ccb_trace_free(&t);
}

/* ---- bad counts ------------------------------------------------------------------------ */

Test(iterations, counts_out_of_range_are_refused_before_anything_runs) {
    ccb_trace t;
    read_text(&t, "repeats", repeats);
    const int bad[] = {-1, CCB_MAX_ITERATIONS + 1, 1 << 30};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ccb_replay_options o = opts;
        o.iterations = bad[i];
        ccb_result r;
        cr_assert_eq(ccb_replay(&t, "ccalloc-growth", &o, &r), -1, "%d", bad[i]);
        cr_assert(r.failed);
        cr_assert(strstr(r.why, "iterations: not in 1..100"), "%s", r.why);
        cr_assert_null(r.timeline, "nothing ran");
    }
    ccb_result r; /* 0, as an options struct without the field: one iteration */
    replay_n(&t, "ccalloc-growth", opts, 0, &r);
    cr_assert_eq(r.iterations, 1);
    ccb_result_free(&r);
    /* the bound itself runs: 100 iterations, 100 times the trace's allocs */
    replay_n(&t, "ccalloc-growth", opts, CCB_MAX_ITERATIONS, &r);
    cr_assert_eq(r.iterations, CCB_MAX_ITERATIONS);
    cr_assert_eq(r.allocs, (uint64_t)CCB_MAX_ITERATIONS * t.allocs);
    ccb_result_free(&r);
    ccb_trace_free(&t);
}

/* ---- the tables ------------------------------------------------------------------------ */

/* What a writer wrote, every line of it formatted (status 0). */
static char *written(int (*write)(FILE *, const ccb_result *, size_t), const ccb_result *r, size_t n) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    cr_assert_eq(write(f, r, n), 0);
    fclose(f);
    return buf;
}

static int write_csv(FILE *f, const ccb_result *r, size_t n) {
    ccb_write_iterations_csv(f, r, n);
    return 0;
}

Test(iterations, the_tables_say_first_and_later_apart) {
    ccb_trace t;
    read_text(&t, "repeats", repeats);
    ccb_result r[3];
    replay_n(&t, "ccalloc-growth", opts, 5, &r[0]);
    replay_n(&t, "malloc", opts, 5, &r[1]);
    ccb_replay_options o = opts;
    o.iterations = 5;
    cr_assert_eq(ccb_replay(&t, "no-such-strategy", &o, &r[2]), -1);
    cr_assert_eq(ccb_results_iterations(r, 3), 5);
    char *md = written(ccb_write_iterations_md, r, 3);
    char want[256];
    snprintf(want, sizeof want, "| repeats | ccalloc-growth | 5 | 22.00 MiB | 22.00 MiB | 2+0 | 0+0 | ");
    cr_assert(strstr(md, want), "%s", md);
    cr_assert(strstr(md, "| repeats | malloc | 5 | — | — | — | — | — | — | — |\n"), "%s", md);
    cr_assert(strstr(md, "| repeats | no-such-strategy | failed: unknown strategy"), "%s", md);
    free(md);
    char *csv = written(write_csv, r, 3);
    cr_assert(strstr(csv, "trace,strategy,config,status,iterations,first_peak_reserved,later_peak_reserved,"
                          "first_upstream_allocs,first_upstream_frees,later_upstream_allocs,later_upstream_frees,"
                          "first_total_ms,later_total_ms,total_ms,driver,first_driver_total_ms,"
                          "later_driver_total_ms,driver_total_ms,why\n"),
              "%s", csv);
    cr_assert(strstr(csv, "\nrepeats,ccalloc-growth,\"policy:growth,expandable:0\",ok,5,23068672,23068672,2,0,0,0,"),
              "%s", csv);
    cr_assert(strstr(csv, ",model,,,,\"\"\n"), "no driver pass without a latency: %s", csv);
    cr_assert(strstr(csv, "\nrepeats,malloc,\"\",ok,5,,,,,,,"), "%s", csv);
    cr_assert(strstr(csv, "\nrepeats,no-such-strategy,\"\",failed,5,,,,,,,,,,,,,,\"unknown strategy"), "%s", csv);
    free(csv);
    char *readme = written(ccb_write_iterations_readme, r, 3);
    cr_assert(strstr(readme, "\n## Iterations\n\n`--iterations 5`: "), "%s", readme);
    free(readme);
    for (size_t i = 0; i < 3; i++)
        ccb_result_free(&r[i]);
    ccb_trace_free(&t);
}

/* Each column is its own field: a row whose figures all differ, written
 * exactly (a skipped row says why, in both tables). */
Test(iterations, every_column_is_its_own_figure) {
    ccb_result r[2];
    memset(r, 0, sizeof r);
    snprintf(r[0].trace, sizeof r[0].trace, "t");
    snprintf(r[0].strategy, sizeof r[0].strategy, "s");
    snprintf(r[0].config, sizeof r[0].config, "c");
    r[0].iterations = 3;
    r[0].first_peak_reserved = (size_t)1 << 20;
    r[0].later_peak_reserved = (size_t)2 << 20;
    r[0].first_upstream_allocs = 3;
    r[0].first_upstream_frees = 4;
    r[0].later_upstream_allocs = 5;
    r[0].later_upstream_frees = 6;
    r[0].first_total_ms = 1.5;
    r[0].later_total_ms = 2.5;
    r[0].total_ms = 4.25;
    r[0].driver = CCB_DRIVER_MODEL;
    r[0].first_driver_total_ms = 7.5;
    r[0].later_driver_total_ms = 8.5;
    r[0].driver_total_ms = 16.25;
    r[1] = r[0];
    snprintf(r[1].strategy, sizeof r[1].strategy, "gpu");
    r[1].skipped = 1;
    snprintf(r[1].why, sizeof r[1].why, "no GPU");
    char *md = written(ccb_write_iterations_md, r, 2);
    cr_assert(strstr(md, "\n| t | s | 3 | 1.00 MiB | 2.00 MiB | 3+4 | 5+6 | 7.50 | 8.50 | 16.25 |\n"), "%s", md);
    cr_assert(strstr(md, "\n| t | gpu | skipped: no GPU | | | | | | | |\n"), "%s", md);
    free(md);
    char *csv = written(write_csv, r, 2);
    cr_assert(strstr(csv, "\nt,s,\"c\",ok,3,1048576,2097152,3,4,5,6,1.500,2.500,4.250,model,7.500,8.500,16.250,\"\"\n"),
              "%s", csv);
    cr_assert(strstr(csv, "\nt,gpu,\"c\",skipped,3,,,,,,,,,,,,,,\"no GPU\"\n"), "%s", csv);
    free(csv);
}

/* Without --iterations (N = 1) no section, and no iterations file in the
 * output directory: a run writes exactly what it wrote before. With N > 1
 * both files are there. */
Test(iterations, files_only_with_more_than_one_iteration) {
    ccb_trace t;
    read_text(&t, "repeats", repeats);
    char dir[] = "/tmp/ccb-iterations-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    for (int n = 1; n <= 2; n++) {
        ccb_result r;
        replay_n(&t, "ccalloc-growth", opts, n, &r);
        char *readme = written(ccb_write_iterations_readme, &r, 1);
        cr_assert_eq(strlen(readme) == 0, n == 1, "N = %d: %s", n, readme);
        free(readme);
        ccb_outdir d = {dir, NULL, 1};
        ccb_write_replay_files(&d, &t, 1, &r, 1);
        char path[256];
        snprintf(path, sizeof path, "%s/results.csv", dir);
        cr_assert_eq(access(path, F_OK), 0);
        const char *files[] = {"iterations.md", "iterations.csv"};
        for (size_t i = 0; i < 2; i++) {
            snprintf(path, sizeof path, "%s/%s", dir, files[i]);
            cr_assert_eq(access(path, F_OK) == 0, n > 1, "N = %d: %s", n, files[i]);
        }
        ccb_result_free(&r);
    }
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
    ccb_trace_free(&t);
}
