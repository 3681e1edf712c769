/*
 * iterations.c — the tables of `ccbench replay --iterations N` (N > 1): per
 * strategy x trace, the first iteration and the later ones apart.
 *
 * - What a row says (replay.c fills it): the run is the trace N times back
 *   to back in one strategy, the blocks left live freed between
 *   iterations, nothing released unless the trace does it. "first" is
 *   iteration 1 alone (what a replay without --iterations measures);
 *   "later" is iterations 2..N together.
 * - Columns: peak reserved (first, later), upstream calls as the harness
 *   counts them, allocs + frees (a ccalloc strategy's allocs include its
 *   reservations and maps, its frees its unmaps and range releases), the
 *   total ms with the driver's cost (first, later, and the whole run: each
 *   its own median over the passes, so first + later need not be the
 *   total), and the total ms of bookkeeping alone likewise (CSV).
 * - These tables are their own files (iterations.md, iterations.csv) and a
 *   section of README.md, written only when N > 1: results.csv keeps its
 *   columns (scripts read them by position: bench/scripts/identity.sh), and
 *   a run without --iterations writes exactly what it wrote before.
 *   results.md/.csv of such a run hold the whole run's figures.
 * - Unknown figures: "—" in markdown, an empty CSV field (cell.c's rule);
 *   a skipped or failed cell keeps its row and says why.
 */
#include "ccbench.h"

int ccb_results_iterations(const ccb_result *r, size_t n) {
    int most = 1;
    for (size_t i = 0; i < n; i++)
        if (r[i].iterations > most)
            most = r[i].iterations;
    return most;
}

int ccb_write_iterations_md(FILE *f, const ccb_result *r, size_t n) {
    int bad = 0;
    fprintf(f, "| trace | strategy | iterations | peak reserved, first | peak reserved, later | upstream allocs+frees, "
               "first | upstream allocs+frees, later | ms with driver, first | ms with driver, later | ms with "
               "driver, total |\n");
    fprintf(f, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    for (size_t i = 0; i < n; i++) {
        const ccb_result *x = &r[i];
        if (!ccb_result_reported(x)) {
            bad |= ccb_fprintf_row(f, "| %s | %s | %s: %s | | | | | | | |\n", CCB_MD(x->trace), CCB_MD(x->strategy),
                                   x->skipped ? "skipped" : "failed", CCB_MD(x->why));
            continue;
        }
        char pf[32], pl[32], cf[48], cl[48], df[32], dl[32], dt[32];
        ccb_format_bytes(x->first_peak_reserved, pf, sizeof pf);
        ccb_format_bytes(x->later_peak_reserved, pl, sizeof pl);
        ccb_fmt_calls(x->first_upstream_allocs, x->first_upstream_frees, cf, sizeof cf);
        ccb_fmt_calls(x->later_upstream_allocs, x->later_upstream_frees, cl, sizeof cl);
        ccb_fmt_num(x->first_driver_total_ms, "%.2f", df, sizeof df);
        ccb_fmt_num(x->later_driver_total_ms, "%.2f", dl, sizeof dl);
        ccb_fmt_num(x->driver_total_ms, "%.2f", dt, sizeof dt);
        bad |= ccb_fprintf_row(f, "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", CCB_MD(x->trace),
                               CCB_MD(x->strategy), x->iterations, pf, pl, cf, cl, df, dl, dt);
    }
    return bad;
}

void ccb_write_iterations_csv(FILE *f, const ccb_result *r, size_t n) {
    fprintf(f, "trace,strategy,config,status,iterations,first_peak_reserved,later_peak_reserved,"
               "first_upstream_allocs,first_upstream_frees,later_upstream_allocs,later_upstream_frees,"
               "first_total_ms,later_total_ms,total_ms,driver,first_driver_total_ms,later_driver_total_ms,"
               "driver_total_ms,why\n");
    for (size_t i = 0; i < n; i++) {
        const ccb_result *x = &r[i];
        int ok = ccb_result_reported(x);
        ccb_csv_field(f, x->trace); /* trace, strategy, config, status and why as in results.csv */
        fputc(',', f);
        ccb_csv_field(f, x->strategy);
        fputc(',', f);
        ccb_csv_quoted(f, x->config);
        fprintf(f, ",%s,%d,", x->skipped ? "skipped" : ok ? "ok" : "failed", x->iterations);
        if (!ok) {
            fprintf(f, "%s", ",,,,,,,,,,,,,"); /* 13 empty fields: first_peak_reserved .. driver_total_ms */
        } else {
            ccb_csv_size(f, x->first_peak_reserved);
            ccb_csv_size(f, x->later_peak_reserved);
            ccb_csv_u64(f, x->first_upstream_allocs);
            ccb_csv_u64(f, x->first_upstream_frees);
            ccb_csv_u64(f, x->later_upstream_allocs);
            ccb_csv_u64(f, x->later_upstream_frees);
            ccb_csv_double(f, x->first_total_ms, "%.3f");
            ccb_csv_double(f, x->later_total_ms, "%.3f");
            ccb_csv_double(f, x->total_ms, "%.3f");
            fprintf(f, "%s,", x->driver == CCB_DRIVER_REAL ? "real" : x->driver == CCB_DRIVER_MODEL ? "model" : "none");
            ccb_csv_double(f, x->first_driver_total_ms, "%.3f");
            ccb_csv_double(f, x->later_driver_total_ms, "%.3f");
            ccb_csv_double(f, x->driver_total_ms, "%.3f");
        }
        ccb_csv_quoted(f, x->why);
        fputc('\n', f);
    }
}

int ccb_write_iterations_readme(FILE *f, const ccb_result *r, size_t n) {
    int iters = ccb_results_iterations(r, n);
    if (iters < 2)
        return 0;
    fprintf(f,
            "\n## Iterations\n\n"
            "`--iterations %d`: each strategy replayed each trace %d times back to back in one allocator (the "
            "program's steady state). Between iterations the blocks the trace left live are freed (timed as "
            "frees) and nothing else happens: no empty-cache or trim unless the trace has one; a domain is "
            "declared once. Every figure of the table above is the whole run's. Here the first iteration "
            "(what a replay without `--iterations` measures) and iterations 2..%d together are apart: peak "
            "reserved, upstream allocs+frees as the harness counts them (a ccalloc strategy's allocs include "
            "its reservations and maps, its frees its unmaps), and the total ms with the driver's cost (each "
            "column its own median over the passes; \"—\": the malloc floor, which has no driver, or every row, "
            "without a driver pass). CSV: "
            "iterations.csv.\n\n",
            iters, iters, iters);
    return ccb_write_iterations_md(f, r, n);
}
