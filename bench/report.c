/*
 * report.c — what a person reads (markdown) and what a plot reads (CSV),
 * for every table ccbench makes (replay results, checkpoints, traces, micro,
 * driver), the machine description every result carries, the output
 * directory's files and the gnuplot plots drawn from them.
 *
 * Units: bytes in the CSV (exact, for plots and diffs), binary units in the
 * markdown (readable). An unknown value (a figure a strategy cannot know, or
 * one the trace gives nothing to measure: any NaN, infinity or negative
 * double) is an empty CSV field and "—" in markdown, never "nan" or "inf"
 * (cell.c, whose cells every table here is made of);
 * README.md says what "—" stands for; a skipped or failed cell keeps its row
 * and says why. (ratios.dat and the timeline CSVs are gnuplot's input: NaN
 * there is gnuplot's missing value, as their header lines say.)
 *
 * Output directory (replay --out, --all; micro and driver write theirs too):
 *   README.md              machine, date, exact command, every table (the commands write it)
 *   results.md/.csv        one row per strategy x trace
 *   traces.md              the traces with their lower bound and ideal arena
 *   checkpoints.csv        reserved bytes at each mark and release event
 *   iterations.md/.csv     --iterations N > 1 only: first and later iterations apart (iterations.c)
 *   micro.md/.csv          the micro-benchmark
 *   driver.md/.csv         `ccbench driver`
 *   timeline/T__S.csv      allocated/reserved over trace T under strategy S
 *   timeline_T.png         one panel per strategy (gnuplot, scripts/timeline.gp)
 *   ratios.dat/.png        peak reserved / peak allocated per trace x strategy
 * Output files are opened and closed through outputs.c (refusals, the
 * failure count); plots need gnuplot and are skipped, with a message,
 * without it.
 * - A plot is kept only whole (plot_kept): gnuplot does not notice a write
 *   that failed (a full disk, a file-size limit: it exits 0 with the PNG
 *   cut short), so the PNG must end with its IEND chunk, else it is an
 *   output failure (ccb_out_failed, outputs.c); a gnuplot that failed ("gnuplot failed", not
 *   counted) or was not found leaves no PNG either. README.md links only
 *   the plots there, so never one cut short.
 * - A table row that host memory could not format (a reason over 1 KiB:
 *   ccai_escape.h writes "(out of host memory for the message)" instead),
 *   or a per-domain table it could not sum, leaves its file or standard
 *   output not whole: every markdown writer with text from outside returns
 *   -1 then, and its caller counts an output failure (ccb_out_formatted,
 *   outputs.c), exit 1.
 */
#include "ccbench.h"

#include <ccalloc.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ccai_escape.h" /* common/: text from outside, escaped for a person */

#ifndef CCB_SCRIPT_DIR
#define CCB_SCRIPT_DIR "bench/scripts"
#endif

const char *ccb_default_script_dir(void) {
    return CCB_SCRIPT_DIR;
}

#ifndef CCB_TRACES_DIR
#define CCB_TRACES_DIR "bench/traces"
#endif

const char *ccb_default_traces_dir(void) {
    return CCB_TRACES_DIR;
}

static const char *driver_label(const ccb_result *x) {
    return x->driver == CCB_DRIVER_REAL ? " (real)" : "";
}

int ccb_write_results_md(FILE *f, const ccb_result *r, size_t n) {
    int bad = 0;
    fprintf(f, "| trace | strategy | median ns/op | p99 ns/op | total ms | total ms with driver | peak reserved | "
               "× lower bound | × ideal arena | frag. at peak | upstream allocs+frees | OOMs | reserved after trace | "
               "after empty-cache (leftovers live) | device free before → after |\n");
    fprintf(f, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    for (size_t i = 0; i < n; i++) {
        const ccb_result *x = &r[i];
        /* a failure always has its reason; a trace without allocations or
         * frees (releases only, or nothing) has no per-op figures: "—" */
        if (!ccb_result_reported(x)) {
            bad |= ccb_fprintf_row(f, "| %s | %s | %s: %s | | | | | | | | | | | | |\n", CCB_MD(x->trace),
                                   CCB_MD(x->strategy), x->skipped ? "skipped" : "failed", CCB_MD(x->why));
            continue;
        }
        char med[32], p99[32], tot[32], drv[48], pr[32], rlb[32], rid[32], frag[32], calls[48], rat[32], rae[32],
            dfb[32], dfa[32];
        ccb_fmt_num(x->median_ns, "%.0f", med, sizeof med);
        ccb_fmt_num(x->p99_ns, "%.0f", p99, sizeof p99);
        ccb_fmt_num(x->total_ms, "%.2f", tot, sizeof tot);
        ccb_fmt_num(x->driver_total_ms, "%.2f", drv, sizeof drv);
        if (ccb_known(x->driver_total_ms))
            strncat(drv, driver_label(x), sizeof drv - strlen(drv) - 1);
        ccb_format_bytes(x->peak_reserved, pr, sizeof pr);
        ccb_fmt_num(x->ratio_requested, "%.3f", rlb, sizeof rlb);
        ccb_fmt_num(x->ratio_ideal, "%.3f", rid, sizeof rid);
        ccb_fmt_num(x->frag_at_peak, "%.3f", frag, sizeof frag);
        ccb_fmt_calls(x->upstream_allocs, x->upstream_frees, calls, sizeof calls);
        ccb_format_bytes(x->reserved_after_trace, rat, sizeof rat);
        ccb_format_bytes(x->reserved_after_empty, rae, sizeof rae);
        ccb_format_bytes(x->device_free_before, dfb, sizeof dfb);
        ccb_format_bytes(x->device_free_after, dfa, sizeof dfa);
        bad |=
            ccb_fprintf_row(f, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %llu | %s | %s | %s → %s |\n",
                            CCB_MD(x->trace), CCB_MD(x->strategy), med, p99, tot, drv, pr, rlb, rid, frag, calls,
                            (unsigned long long)x->ooms, rat, rae, dfb, dfa);
    }
    return bad ? -1 : 0;
}

/* "load:resnet50", "empty_cache", "trim 1.00 MiB", "release domain resnet50":
 * a markdown cell (a name's '|' escaped) */
static void checkpoint_label(const ccb_trace *t, const ccb_checkpoint *c, char *buf, size_t len) {
    if (c->op == CCB_MARK)
        snprintf(buf, len, "%s", CCB_MD(c->mark < t->nmarks ? t->marks[c->mark] : "?"));
    else if (c->op == CCB_DOMAIN_RELEASE)
        snprintf(buf, len, "**release domain %s**", CCB_MD(ccb_domain_name(t, c->mark)));
    else if (c->op == CCB_TRIM) {
        char k[32];
        ccb_format_bytes(c->keep > SIZE_MAX - 1 ? SIZE_MAX - 1 : (size_t)c->keep, k, sizeof k);
        snprintf(buf, len, "**trim to %s**", k);
    } else
        snprintf(buf, len, "**empty_cache**");
}

int ccb_write_checkpoints_md(FILE *f, const ccb_trace *t, const ccb_result *r, size_t nspecs) {
    /* the reference for the trace's own column (live requested bytes at
     * each checkpoint): the first strategy that ran and served every
     * allocation; one with OOMs held less than the trace, so when every
     * strategy had some the column is headed "live requested (served)" */
    const ccb_result *ref = NULL;
    for (int pass = 0; pass < 2 && !ref; pass++)
        for (size_t s = 0; s < nspecs && !ref; s++)
            if (ccb_result_reported(&r[s]) && r[s].checkpoints_n && (pass == 1 || r[s].ooms == 0))
                ref = &r[s];
    if (!ref)
        return 0;
    int bad = 0;
    fprintf(f, "| event | checkpoint | %s |", ref->ooms ? "live requested (served)" : "live requested");
    size_t cols = 0;
    for (size_t s = 0; s < nspecs; s++)
        if (ccb_result_reported(&r[s]) && r[s].checkpoints_n == ref->checkpoints_n &&
            r[s].peak_reserved != CCB_UNKNOWN) {
            bad |= ccb_fprintf_row(f, " %s |", CCB_MD(r[s].strategy));
            cols++;
        }
    fprintf(f, "\n|--:|---|--:|");
    for (size_t k = 0; k < cols; k++)
        fprintf(f, "--:|");
    fprintf(f, "\n");
    for (size_t i = 0; i < ref->checkpoints_n; i++) {
        const ccb_checkpoint *c = &ref->checkpoints[i];
        char label[2 * CCB_MARK_MAX + 64], req[32]; /* a name, each character doubled at most */
        checkpoint_label(t, c, label, sizeof label);
        ccb_format_bytes(c->requested, req, sizeof req);
        bad |= ccb_fprintf_row(f, "| %llu | %s | %s |", (unsigned long long)c->event, label, req);
        for (size_t s = 0; s < nspecs; s++) {
            if (!ccb_result_reported(&r[s]) || r[s].checkpoints_n != ref->checkpoints_n ||
                r[s].peak_reserved == CCB_UNKNOWN)
                continue;
            char res[32], back[32];
            const ccb_checkpoint *x = &r[s].checkpoints[i];
            ccb_format_bytes(x->reserved, res, sizeof res);
            if (x->op != CCB_MARK && x->returned != CCB_UNKNOWN && x->returned > 0) {
                ccb_format_bytes(x->returned, back, sizeof back);
                fprintf(f, " %s (−%s) |", res, back);
            } else {
                fprintf(f, " %s |", res);
            }
        }
        fprintf(f, "\n");
    }
    return bad ? -1 : 0;
}

void ccb_write_checkpoints_csv(FILE *f, const ccb_trace *t, const ccb_result *r, size_t nspecs, int header) {
    if (header)
        fprintf(f, "trace,strategy,event,op,name,keep,requested,allocated,reserved,returned\n");
    for (size_t s = 0; s < nspecs; s++) {
        const ccb_result *x = &r[s];
        for (size_t i = 0; ccb_result_reported(x) && i < x->checkpoints_n; i++) {
            const ccb_checkpoint *c = &x->checkpoints[i];
            ccb_csv_field(f, x->trace);
            fputc(',', f);
            ccb_csv_field(f, x->strategy);
            fprintf(f, ",%llu,%s,", (unsigned long long)c->event, ccb_op_name(c->op));
            ccb_csv_field(f, c->op == CCB_MARK             ? (c->mark < t->nmarks ? t->marks[c->mark] : "")
                             : c->op == CCB_DOMAIN_RELEASE ? ccb_domain_name(t, c->mark)
                                                           : "");
            fprintf(f, ",%llu,%zu,", (unsigned long long)c->keep, c->requested);
            if (c->allocated != CCB_UNKNOWN)
                fprintf(f, "%zu", c->allocated);
            fputc(',', f);
            if (c->reserved != CCB_UNKNOWN)
                fprintf(f, "%zu", c->reserved);
            fputc(',', f);
            if (c->returned != CCB_UNKNOWN)
                fprintf(f, "%zu", c->returned);
            fputc('\n', f);
        }
    }
}

/* A trace's domains: what the trace says of each (allocs, its own peak of
 * live requested bytes) and, per strategy that knows its reserved bytes,
 * what its releases of the domain gave back (the checkpoints' sum). */
int ccb_write_domains_md(FILE *f, const ccb_trace *t, const ccb_result *r, size_t nspecs) {
    int bad = 0;
    fprintf(f, "| domain | allocs | peak requested | releases |");
    for (size_t s = 0; s < nspecs; s++)
        if (ccb_result_reported(&r[s]) && r[s].peak_reserved != CCB_UNKNOWN)
            bad |= ccb_fprintf_row(f, " %s: returned at its releases |", CCB_MD(r[s].strategy));
    fprintf(f, "\n|---|--:|--:|--:|");
    for (size_t s = 0; s < nspecs; s++)
        if (ccb_result_reported(&r[s]) && r[s].peak_reserved != CCB_UNKNOWN)
            fprintf(f, "--:|");
    fprintf(f, "\n");
    /* what each strategy returned at each domain's releases, summed in one
     * pass over its checkpoints: O(domains x strategies + checkpoints), not
     * their product (a trace may hold 65,535 domains) */
    size_t nd = t->ndomains;
    size_t *sum = nd && nspecs ? calloc(nspecs * nd, sizeof *sum) : NULL;
    if (nd && nspecs && !sum) {
        fprintf(f, "(host memory short: no per-domain table)\n");
        return -1;
    }
    for (size_t s = 0; s < nspecs; s++)
        for (size_t i = 0; i < r[s].checkpoints_n; i++) {
            const ccb_checkpoint *c = &r[s].checkpoints[i];
            if (c->op != CCB_DOMAIN_RELEASE || c->mark >= nd)
                continue;
            size_t *v = &sum[s * nd + c->mark];
            *v = c->returned == CCB_UNKNOWN || *v == CCB_UNKNOWN ? CCB_UNKNOWN : *v + c->returned;
        }
    for (size_t d = 0; d < nd; d++) {
        const ccb_domain_info *di = &t->domains[d];
        char pr[32];
        ccb_format_bytes(di->peak_requested, pr, sizeof pr);
        bad |= ccb_fprintf_row(f, "| %s | %llu | %s | %llu |", CCB_MD(di->name), (unsigned long long)di->allocs, pr,
                               (unsigned long long)di->releases);
        for (size_t s = 0; s < nspecs; s++) {
            if (!ccb_result_reported(&r[s]) || r[s].peak_reserved == CCB_UNKNOWN)
                continue;
            char b[32];
            ccb_format_bytes(sum[s * nd + d], b, sizeof b);
            fprintf(f, " %s |", !di->releases ? "—" : sum[s * nd + d] == CCB_UNKNOWN ? "?" : b);
        }
        fprintf(f, "\n");
    }
    free(sum);
    return bad ? -1 : 0;
}

int ccb_write_traces_md(FILE *f, const ccb_trace *t, size_t n) {
    int bad = 0;
    fprintf(f, "| trace | events | allocs | frees | lower bound (peak requested) | peak rounded (512 B) | ideal arena | "
               "peak live blocks | largest | live at end | bytes live at end | streams | marks | release events | "
               "domains (released) |\n"
               "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    for (size_t i = 0; i < n; i++) {
        char pr[32], pg[32], id[32], fr[32], mx[32];
        ccb_format_bytes(t[i].peak_requested, pr, sizeof pr);
        ccb_format_bytes(t[i].peak_rounded, pg, sizeof pg);
        ccb_format_bytes(t[i].ideal_peak, id, sizeof id);
        ccb_format_bytes(t[i].final_requested, fr, sizeof fr);
        ccb_format_bytes(t[i].max_size, mx, sizeof mx);
        bad |= ccb_fprintf_row(
            f, "| %s | %zu | %llu | %llu | %s | %s | %s | %zu | %s | %zu | %s | %u | %zu | %llu | %zu (%llu) |\n",
            CCB_MD(t[i].name), t[i].n, (unsigned long long)t[i].allocs, (unsigned long long)t[i].frees, pr, pg, id,
            t[i].peak_live, mx, t[i].final_live, fr, t[i].streams, t[i].nmarks, (unsigned long long)t[i].releases,
            t[i].ndomains ? t[i].ndomains - 1 : 0, (unsigned long long)t[i].domain_releases);
    }
    return bad ? -1 : 0;
}

void ccb_write_results_csv(FILE *f, const ccb_result *r, size_t n) {
    fprintf(f, "trace,strategy,config,status,ops,allocs,frees,reps,median_ns,p99_ns,total_ms,timer_ns,"
               "driver,driver_median_ns,driver_total_ms,lower_bound,ideal_peak,"
               "peak_requested,peak_allocated,peak_reserved,ratio,ratio_requested,ratio_ideal,frag_at_peak,"
               "upstream_allocs,upstream_frees,ooms,reserved_after_trace,reserved_after_empty,device_free_before,"
               "device_free_after,checked,why\n");
    for (size_t i = 0; i < n; i++) {
        const ccb_result *x = &r[i];
        /* as in markdown: a failure has its reason; a trace without allocs or frees has no per-op figures */
        int ok = ccb_result_reported(x);
        /* a strategy label is what -s said: 'ccalloc=a:1,b:2' has a comma */
        ccb_csv_field(f, x->trace);
        fputc(',', f);
        ccb_csv_field(f, x->strategy);
        fputc(',', f);
        ccb_csv_quoted(f, x->config);
        fprintf(f, ",%s,", x->skipped ? "skipped" : ok ? "ok" : "failed");
        if (!ok) {
            fprintf(f, "%s", ",,,,,,,,,,,,,,,,,,,,,,,,,,,,"); /* 28 empty fields: ops .. checked */
            ccb_csv_quoted(f, x->why);
            fputc('\n', f);
            continue;
        }
        fprintf(f, "%llu,%llu,%llu,%d,", (unsigned long long)x->ops, (unsigned long long)x->allocs,
                (unsigned long long)x->frees, x->reps);
        ccb_csv_double(f, x->median_ns, "%.1f");
        ccb_csv_double(f, x->p99_ns, "%.1f");
        ccb_csv_double(f, x->total_ms, "%.3f");
        ccb_csv_double(f, x->timer_ns, "%.1f");
        fprintf(f, "%s,", x->driver == CCB_DRIVER_REAL ? "real" : x->driver == CCB_DRIVER_MODEL ? "model" : "none");
        ccb_csv_double(f, x->driver_median_ns, "%.1f");
        ccb_csv_double(f, x->driver_total_ms, "%.3f");
        ccb_csv_size(f, x->lower_bound);
        ccb_csv_size(f, x->ideal_peak);
        ccb_csv_size(f, x->peak_requested);
        ccb_csv_size(f, x->peak_allocated);
        ccb_csv_size(f, x->peak_reserved);
        ccb_csv_double(f, x->ratio, "%.4f");
        ccb_csv_double(f, x->ratio_requested, "%.4f");
        ccb_csv_double(f, x->ratio_ideal, "%.4f");
        ccb_csv_double(f, x->frag_at_peak, "%.4f");
        ccb_csv_u64(f, x->upstream_allocs);
        ccb_csv_u64(f, x->upstream_frees);
        fprintf(f, "%llu,", (unsigned long long)x->ooms);
        ccb_csv_size(f, x->reserved_after_trace);
        ccb_csv_size(f, x->reserved_after_empty);
        ccb_csv_size(f, x->device_free_before);
        ccb_csv_size(f, x->device_free_after);
        fprintf(f, "%d,", x->checked);
        ccb_csv_quoted(f, x->why);
        fputc('\n', f);
    }
}

int ccb_write_timeline_csv(const char *path, const ccb_result *r) {
    FILE *f = ccb_open_out(NULL, path);
    if (!f)
        return -1;
    fprintf(f, "# %s on %s: maximum over each window of events; MiB\nop,requested_mib,allocated_mib,reserved_mib\n",
            r->strategy, r->trace);
    for (size_t i = 0; i < r->timeline_n; i++) {
        const ccb_timeline_point *p = &r->timeline[i];
        fprintf(f, "%llu,%.3f,%.3f,", (unsigned long long)p->op, p->requested / 1048576.0, p->allocated / 1048576.0);
        if (r->peak_reserved == CCB_UNKNOWN)
            fprintf(f, "NaN\n");
        else
            fprintf(f, "%.3f\n", p->reserved / 1048576.0);
    }
    return ccb_close_out(f, NULL, path);
}

/* ---- micro and driver tables --------------------------------------------------- */

int ccb_micro_write_md(FILE *f, const ccb_micro_row *r, size_t n, double timer_ns) {
    int bad = 0;
    fprintf(f, "| strategy | live blocks | layout | pairs | median ns/pair | p99 ns/pair | mean ns/pair | streams |\n");
    fprintf(f, "|---|--:|---|--:|--:|--:|--:|--:|\n");
    for (size_t i = 0; i < n; i++) {
        const char *layout = r[i].holes ? "holes" : "packed";
        if (r[i].skipped)
            bad |= ccb_fprintf_row(f, "| %s | all | | | skipped: %s | | | %u |\n", CCB_MD(r[i].strategy),
                                   CCB_MD(r[i].why), r[i].streams);
        else if (isnan(r[i].median_ns))
            bad |= ccb_fprintf_row(f, "| %s | %zu | %s | | %s: %s | | | %u |\n", CCB_MD(r[i].strategy), r[i].live,
                                   layout, r[i].unfit ? "does not fit" : "failed", CCB_MD(r[i].why), r[i].streams);
        else {
            char med[32], p99[32], mean[32];
            ccb_fmt_num(r[i].median_ns, "%.0f", med, sizeof med);
            ccb_fmt_num(r[i].p99_ns, "%.0f", p99, sizeof p99);
            ccb_fmt_num(r[i].mean_ns, "%.1f", mean, sizeof mean);
            bad |= ccb_fprintf_row(f, "| %s | %zu | %s | %zu | %s | %s | %s | %u |\n", CCB_MD(r[i].strategy), r[i].live,
                                   layout, r[i].pairs, med, p99, mean, r[i].streams);
        }
    }
    fprintf(f,
            "\nEach pair timed alone between two reads of %s; the median read (%.1f ns) is subtracted. A cell's "
            "timed pairs stop after %.0f s (\"pairs\" says how many ran).\n",
            ccb_clock_name(), timer_ns, (double)ccb_micro_budget_ns / 1e9);
    return bad ? -1 : 0;
}

void ccb_micro_write_csv(FILE *f, const ccb_micro_row *r, size_t n) {
    fprintf(f, "strategy,live,layout,pairs,median_ns,p99_ns,mean_ns,status,why,streams\n");
    for (size_t i = 0; i < n; i++) {
        const char *layout = r[i].holes ? "holes" : "packed";
        ccb_csv_field(f, r[i].strategy); /* -s 'ccalloc=a:1,b:2' has a comma */
        if (isnan(r[i].median_ns)) {
            if (r[i].skipped) /* every cell of the strategy: live and layout empty (micro.md's "all") */
                fprintf(f, ",,,,,,,skipped,");
            else
                fprintf(f, ",%zu,%s,,,,,%s,", r[i].live, layout, r[i].unfit ? "unfit" : "failed");
            ccb_csv_quoted(f, r[i].why); /* always quoted, as before */
            fprintf(f, ",%u\n", r[i].streams);
        } else {
            fprintf(f, ",%zu,%s,%zu,", r[i].live, layout, r[i].pairs);
            ccb_csv_double(f, r[i].median_ns, "%.1f");
            ccb_csv_double(f, r[i].p99_ns, "%.1f");
            ccb_csv_double(f, r[i].mean_ns, "%.2f");
            fprintf(f, "ok,,%u\n", r[i].streams);
        }
    }
}

void ccb_write_driver_md(FILE *f, const ccb_driver_row *rows, size_t n, int reps) {
    fprintf(f, "cudaMalloc / cudaFree timed alone, device idle, %d pairs per size; GPU: %s\n\n", reps,
            ccb_gpu_unavailable_reason());
    fprintf(f, "| size | cudaMalloc median µs | p99 | cudaFree median µs | p99 | pair median µs |\n"
               "|--:|--:|--:|--:|--:|--:|\n");
    for (size_t i = 0; i < n; i++) {
        char b[32];
        ccb_format_bytes(rows[i].size, b, sizeof b);
        fprintf(f, "| %s | %.1f | %.1f | %.1f | %.1f | %.1f |\n", b, rows[i].alloc_median_us, rows[i].alloc_p99_us,
                rows[i].free_median_us, rows[i].free_p99_us, rows[i].pair_median_us);
    }
}

void ccb_write_driver_csv(FILE *f, const ccb_driver_row *rows, size_t n) {
    fprintf(f, "size,reps,alloc_median_us,alloc_p99_us,free_median_us,free_p99_us,pair_median_us\n");
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%zu,%d,%.3f,%.3f,%.3f,%.3f,%.3f\n", rows[i].size, rows[i].reps, rows[i].alloc_median_us,
                rows[i].alloc_p99_us, rows[i].free_median_us, rows[i].free_p99_us, rows[i].pair_median_us);
}

int ccb_write_driver_vm_md(FILE *f, const char *upstream, const ccb_driver_vm_row *rows, size_t n, const char *why) {
    fprintf(f, "\n## Virtual memory: what an expandable segment pays instead\n\n");
    if (!rows)
        return ccb_fprintf_row(f, "skipped: %s\n", why);
    int bad = 0;
    fprintf(f,
            "The %s upstream's vm_map and vm_unmap of the first n granules of one reserved range, each call "
            "timed alone, %d pairs per size (on the CUDA upstream a map is one cudaMemGetInfo, cuMemCreate + "
            "cuMemMap per granule and one cuMemSetAccess; an unmap, cuMemUnmap per granule). Per granule: the "
            "median over n, what `--vm-latency` models.\n\n",
            upstream, n ? rows[0].reps : 0);
    fprintf(f, "| granule | size | granules | vm_map median µs | p99 | vm_unmap median µs | p99 | map µs per granule | "
               "unmap µs per granule |\n|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    for (size_t i = 0; i < n; i++) {
        char b[32], g[32];
        ccb_format_bytes(rows[i].bytes, b, sizeof b);
        ccb_format_bytes(rows[i].granules ? rows[i].bytes / rows[i].granules : 0, g, sizeof g);
        if (rows[i].unfit) {
            bad |= ccb_fprintf_row(f, "| %s | %s | %zu | does not fit: %s | | | | | |\n", g, b, rows[i].granules,
                                   CCB_MD(rows[i].why));
            continue;
        }
        fprintf(f, "| %s | %s | %zu | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f |\n", g, b, rows[i].granules,
                rows[i].map_median_us, rows[i].map_p99_us, rows[i].unmap_median_us, rows[i].unmap_p99_us,
                rows[i].map_median_us / (double)rows[i].granules, rows[i].unmap_median_us / (double)rows[i].granules);
    }
    return bad ? -1 : 0;
}

/* A vm row's timed columns, "reps,map_median_us,map_p99_us,unmap_median_us,
 * unmap_p99_us" (a row that did not fit: reps 0, the figures empty). */
static void vm_row_csv(FILE *f, const ccb_driver_vm_row *r) {
    if (r->unfit)
        fprintf(f, "0,,,,");
    else
        fprintf(f, "%d,%.3f,%.3f,%.3f,%.3f", r->reps, r->map_median_us, r->map_p99_us, r->unmap_median_us,
                r->unmap_p99_us);
}

void ccb_write_driver_vm_csv(FILE *f, const ccb_driver_vm_row *rows, size_t n) {
    fprintf(f, "granule,bytes,granules,reps,map_median_us,map_p99_us,unmap_median_us,unmap_p99_us,status\n");
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "%zu,%zu,%zu,", rows[i].granules ? rows[i].bytes / rows[i].granules : 0, rows[i].bytes,
                rows[i].granules);
        vm_row_csv(f, &rows[i]);
        fprintf(f, ",%s\n", rows[i].unfit ? "unfit" : "ok");
    }
}

/* The row of mrows with this size and a measurement, or NULL. */
static const ccb_driver_row *malloc_row(const ccb_driver_row *mrows, size_t nm, size_t size) {
    for (size_t i = 0; i < nm; i++)
        if (mrows[i].size == size && mrows[i].reps > 0)
            return &mrows[i];
    return NULL;
}

int ccb_write_driver_whole_maps_md(FILE *f, const char *upstream, const ccb_driver_vm_row *rows, size_t n,
                                   const ccb_driver_row *mrows, size_t nm, const char *why) {
    fprintf(f, "\n## Whole maps: one physical allocation per map\n\n");
    if (!rows)
        return ccb_fprintf_row(f, "skipped: %s\n", why);
    int bad = 0;
    int reps = 0;
    for (size_t i = 0; i < n && !reps; i++)
        reps = rows[i].reps;
    fprintf(f,
            "The %s upstream made with vm_backing CCA_VM_WHOLE_MAPS: vm_map and vm_unmap of one map of each size "
            "at the start of one reserved range, each call timed alone, %d pairs per size (on the CUDA upstream a "
            "map is one cudaMemGetInfo, ONE cuMemCreate of the map's size, one cuMemMap and one cuMemSetAccess; an "
            "unmap, one cuMemUnmap), next to cudaMalloc and cudaFree of the same size (\"—\": no such figure). A "
            "size the device cannot hold says so.\n\n",
            upstream, reps);
    fprintf(f, "| size | granules | vm_map median µs | p99 | vm_unmap median µs | p99 | cudaMalloc median µs | "
               "cudaFree median µs |\n|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    for (size_t i = 0; i < n; i++) {
        char b[32];
        ccb_format_bytes(rows[i].bytes, b, sizeof b);
        if (rows[i].unfit) {
            bad |= ccb_fprintf_row(f, "| %s | %zu | does not fit: %s | | | | | |\n", b, rows[i].granules,
                                   CCB_MD(rows[i].why));
            continue;
        }
        fprintf(f, "| %s | %zu | %.1f | %.1f | %.1f | %.1f | ", b, rows[i].granules, rows[i].map_median_us,
                rows[i].map_p99_us, rows[i].unmap_median_us, rows[i].unmap_p99_us);
        const ccb_driver_row *m = malloc_row(mrows, nm, rows[i].bytes);
        if (m)
            fprintf(f, "%.1f | %.1f |\n", m->alloc_median_us, m->free_median_us);
        else
            fprintf(f, "— | — |\n");
    }
    return bad ? -1 : 0;
}

void ccb_write_driver_whole_maps_csv(FILE *f, const ccb_driver_vm_row *rows, size_t n, const ccb_driver_row *mrows,
                                     size_t nm) {
    fprintf(f, "bytes,granules,reps,map_median_us,map_p99_us,unmap_median_us,unmap_p99_us,cuda_malloc_median_us,"
               "cuda_free_median_us,status\n");
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "%zu,%zu,", rows[i].bytes, rows[i].granules);
        vm_row_csv(f, &rows[i]);
        const ccb_driver_row *m = rows[i].unfit ? NULL : malloc_row(mrows, nm, rows[i].bytes);
        if (m)
            fprintf(f, ",%.3f,%.3f", m->alloc_median_us, m->free_median_us);
        else
            fprintf(f, ",,");
        fprintf(f, ",%s\n", rows[i].unfit ? "unfit" : "ok");
    }
}

/* ---- the machine ------------------------------------------------------------------ */

static void cpu_model(char *buf, size_t len) {
    snprintf(buf, len, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *c = strchr(line, ':');
            if (c) {
                c++;
                while (*c == ' ' || *c == '\t')
                    c++;
                c[strcspn(c, "\n")] = '\0';
                snprintf(buf, len, "%s", c);
            }
            break;
        }
    }
    fclose(f);
}

void ccb_write_machine_md(FILE *f) {
    /* the kernel's own answer (uname(2)), never a `uname` found on PATH */
    char uname_line[1200] = "unknown", cpu[256];
    struct utsname u;
    if (uname(&u) == 0)
        snprintf(uname_line, sizeof uname_line, "%s %s %s %s %s", u.sysname, u.nodename, u.release, u.version,
                 u.machine);
    cpu_model(cpu, sizeof cpu);
    char date[64];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S UTC", gmtime(&now));
    fprintf(f, "- machine: `%s`\n- CPU: %s, %ld online cores\n- GPU: %s\n- date: %s\n", uname_line, cpu,
            sysconf(_SC_NPROCESSORS_ONLN), ccb_gpu_unavailable_reason(), date);
}

int ccb_gnuplot(const char *script_dir, const char *script, const char *cwd, const char *const *args, size_t nargs) {
    char rel[4096], path[PATH_MAX];
    int n = snprintf(rel, sizeof rel, "%s/%s", script_dir ? script_dir : ccb_default_script_dir(), script);
    /* absolute: the child may change directory before it runs gnuplot */
    if (n < 0 || (size_t)n >= sizeof rel || !realpath(rel, path))
        return -1;
    const char *argv[24];
    size_t k = 0;
    argv[k++] = "gnuplot";
    argv[k++] = "-c";
    argv[k++] = path;
    for (size_t i = 0; i < nargs && k < 23; i++)
        argv[k++] = args[i];
    argv[k] = NULL;
    /* started by posix_spawn, never fork(): see ccai_capture.h (ccbench's
     * heap outgrows the machine's memory in the micro cells, and fork is
     * then refused); a cwd that cannot be entered is a failure, so that
     * ENOENT from the spawn says gnuplot is missing */
    if (cwd) {
        int dirfd = open(cwd, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dirfd < 0)
            return -1;
        close(dirfd);
    }
    posix_spawn_file_actions_t fa;
    if (posix_spawn_file_actions_init(&fa) != 0)
        return -1;
    int err = cwd ? posix_spawn_file_actions_addchdir_np(&fa, cwd) : 0;
    fflush(NULL);
    pid_t pid;
    if (!err)
        err = posix_spawnp(&pid, "gnuplot", &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (err)
        return err == ENOENT ? 1 : -1;
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

int ccb_write_command_md(FILE *f, const char *command_line) {
    /* a code span's fence is one backtick more than the longest run inside
     * it, padded with spaces when the text starts or ends with one */
    size_t run = 0, longest = 0;
    for (const char *c = command_line; *c; c++) {
        run = *c == '`' ? run + 1 : 0;
        longest = run > longest ? run : longest;
    }
    /* a character the escaper rewrites (a control, a byte that is not
     * UTF-8, ...) is shown as \xNN, which a shell reads as four other
     * characters: the line is then for reading, and says so */
    bool escaped = false;
    for (const unsigned char *c = (const unsigned char *)command_line; *c && !escaped;) {
        uint32_t cp = 0;
        size_t n = ccai_utf8_decode(c, &cp);
        escaped = !n || !ccai_shown_as_is(cp);
        c += n ? n : 1;
    }
    const char *pad = longest ? " " : "";
    fprintf(f, "- command: ");
    for (size_t i = 0; i <= longest; i++)
        fputc('`', f);
    int bad = ccb_fprintf_row(f, "%s%s%s", pad, command_line, pad); /* paths as given: escaped */
    for (size_t i = 0; i <= longest; i++)
        fputc('`', f);
    if (escaped)
        fputs(" (characters shown as \\xNN: not runnable as written)", f);
    fputc('\n', f);
    return bad;
}

void ccb_file_name(const char *in, char *out, size_t len) {
    size_t k = 0;
    for (; *in && k + 1 < len; in++) {
        unsigned char c = (unsigned char)*in;
        out[k++] = (c < 0x20 || c == 0x7f || c == '/' || c == '=' || c == ',' || c == ':' || c == ' ' || c == '"' ||
                    c == '#')
                       ? '_'
                       : *in;
    }
    out[k] = '\0';
}

/* Whether the file at path is a whole PNG: its signature first and its
 * IEND chunk last (a PNG's end; one cut short lacks it). */
static bool png_whole(const char *path) {
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    static const unsigned char iend[12] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xae, 0x42, 0x60, 0x82};
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return false;
    unsigned char head[8], tail[12];
    struct stat st;
    bool whole = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= 20 &&
                 pread(fd, head, sizeof head, 0) == (ssize_t)sizeof head &&
                 pread(fd, tail, sizeof tail, st.st_size - (off_t)sizeof tail) == (ssize_t)sizeof tail &&
                 !memcmp(head, sig, sizeof sig) && !memcmp(tail, iend, sizeof iend);
    close(fd);
    return whole;
}

/* After gnuplot (ccb_gnuplot's rc) drew dir/png: true when the PNG is
 * there whole. Else none is left (README.md then links none): gnuplot not
 * found or failed, as the caller says; cut short while gnuplot succeeded
 * (it does not notice a failed write), an output failure said here. */
static bool plot_kept(int rc, const char *dir, const char *png) {
    char path[PATH_MAX];
    if (ccb_out_path(dir, png, path, sizeof path) != 0)
        return false;
    if (rc == 0 && png_whole(path))
        return true;
    unlink(path);
    if (rc == 0)
        ccb_out_failed("write", path,
                       "cut short (gnuplot could not write it whole: a full disk or a file-size limit?)");
    return false;
}

/* One trace's timeline CSVs, and its plot: one panel per strategy that ran.
 * Each strategy's CSV has a name of its own: two specs that make the same
 * file name (they differ only in characters ccb_file_name replaces, or
 * beyond its length) get -2, -3, ... appended, so no CSV overwrites another.
 * gnuplot runs inside the output directory and is given the CSVs by their
 * relative names (timeline/T__S.csv: no spaces), since its word list splits
 * at spaces that the directory's own path may contain. */
static void plot_trace(const ccb_outdir *d, const ccb_result *r, size_t n) {
    char files[CCB_MAX_SPECS * 160] = "", labels[CCB_MAX_SPECS * 72] = "";
    char used[CCB_MAX_SPECS][64];
    size_t panels = 0;
    for (size_t i = 0; i < n && panels < CCB_MAX_SPECS; i++) {
        if (!ccb_result_reported(&r[i]) || isnan(r[i].median_ns) || !r[i].timeline_n)
            continue;
        char st[64], base[56], tr[64], rel[160], path[PATH_MAX];
        ccb_file_name(r[i].strategy, base, sizeof base);
        snprintf(st, sizeof st, "%s", base);
        for (unsigned k = 2;; k++) { /* a name no earlier panel of this trace has */
            size_t j = 0;
            while (j < panels && strcmp(used[j], st) != 0)
                j++;
            if (j == panels)
                break;
            snprintf(st, sizeof st, "%s-%u", base, k);
        }
        ccb_file_name(r[i].trace, tr, sizeof tr);
        snprintf(rel, sizeof rel, "timeline/%s__%s.csv", tr, st); /* fits: 9 + 63 + 2 + 63 + 4 < 160 */
        if (ccb_out_path(d->path, rel, path, sizeof path) != 0 || ccb_write_timeline_csv(path, &r[i]) != 0)
            continue;
        snprintf(used[panels], sizeof used[panels], "%s", st);
        snprintf(files + strlen(files), sizeof files - strlen(files), "%s%s", panels ? " " : "", rel);
        snprintf(labels + strlen(labels), sizeof labels - strlen(labels), "%s%s", panels ? " " : "", st);
        panels++;
    }
    if (!panels || d->no_plots)
        return;
    char png[128], title[256], tr[64];
    ccb_file_name(r[0].trace, tr, sizeof tr);
    snprintf(png, sizeof png, "timeline_%s.png", tr); /* in d->path, where gnuplot runs */
    snprintf(title, sizeof title,
             "%s: allocated vs reserved (simulated device for ccalloc; MiB; last step: empty-cache, live blocks kept)",
             r[0].trace);
    const char *args[] = {png, title, files, labels};
    int rc = ccb_gnuplot(d->script_dir, "timeline.gp", d->path, args, 4);
    if (plot_kept(rc, d->path, png))
        return;
    if (rc == 1)
        fprintf(stderr, "ccbench: gnuplot not found: no plots (apt-get install gnuplot)\n");
    else if (rc != 0)
        ccai_fprintf_escaped(stderr, "ccbench: gnuplot failed on %s/%s\n", d->path, png);
}

/* ratios.dat (peak reserved / peak allocated, trace x strategy) and its plot. */
static void plot_ratios(const ccb_outdir *d, const ccb_result *r, size_t ntraces, size_t nspecs) {
    char dat[PATH_MAX], png[PATH_MAX], cols[16];
    if (ccb_out_path(d->path, "ratios.dat", dat, sizeof dat) != 0)
        return;
    FILE *f = ccb_open_out(NULL, dat);
    if (!f)
        return;
    /* columns: only strategies that know their reserved bytes on at least one trace */
    int keep[CCB_MAX_SPECS] = {0};
    size_t kept = 0;
    for (size_t s = 0; s < nspecs && s < CCB_MAX_SPECS; s++) {
        for (size_t t = 0; t < ntraces; t++)
            if (!isnan(r[t * nspecs + s].ratio))
                keep[s] = 1;
        kept += keep[s];
    }
    fprintf(f, "# peak reserved / peak allocated; NaN = unknown or skipped\ntrace");
    char word[128]; /* names as gnuplot words: no spaces, controls or quotes */
    for (size_t s = 0; s < nspecs && s < CCB_MAX_SPECS; s++)
        if (keep[s]) {
            ccb_file_name(r[s].strategy, word, sizeof word);
            fprintf(f, " %s", word);
        }
    fprintf(f, "\n");
    for (size_t t = 0; t < ntraces; t++) {
        ccb_file_name(r[t * nspecs].trace, word, sizeof word);
        fprintf(f, "%s", word);
        for (size_t s = 0; s < nspecs && s < CCB_MAX_SPECS; s++)
            if (keep[s])
                fprintf(f, " %.4f", r[t * nspecs + s].ratio);
        fprintf(f, "\n");
    }
    if (ccb_close_out(f, NULL, dat) != 0)
        return;
    if (d->no_plots || !kept || ccb_out_path(d->path, "ratios.png", png, sizeof png) != 0)
        return;
    snprintf(cols, sizeof cols, "%zu", kept + 1);
    const char *args[] = {dat, png, cols};
    int rc = ccb_gnuplot(d->script_dir, "ratios.gp", NULL, args, 3);
    if (!plot_kept(rc, NULL, png) && rc != 0)
        fprintf(stderr, "ccbench: no ratio plot (gnuplot missing or failed)\n");
}

void ccb_write_replay_files(const ccb_outdir *d, const ccb_trace *traces, size_t ntraces, const ccb_result *r,
                            size_t nspecs) {
    size_t n = ntraces * nspecs;
    char tl[PATH_MAX];
    if (ccb_out_path(d->path, "timeline", tl, sizeof tl) == 0)
        ccb_mkdir_p(tl); /* either failure said and counted; the CSVs then fail too */
    FILE *f = ccb_open_out(d->path, "results.md");
    if (f)
        ccb_out_formatted(ccb_write_results_md(f, r, n), d->path, "results.md");
    ccb_close_out(f, d->path, "results.md");
    if ((f = ccb_open_out(d->path, "results.csv")))
        ccb_write_results_csv(f, r, n);
    ccb_close_out(f, d->path, "results.csv");
    if ((f = ccb_open_out(d->path, "traces.md")))
        ccb_out_formatted(ccb_write_traces_md(f, traces, ntraces), d->path, "traces.md");
    ccb_close_out(f, d->path, "traces.md");
    if ((f = ccb_open_out(d->path, "checkpoints.csv")))
        for (size_t t = 0; t < ntraces; t++)
            ccb_write_checkpoints_csv(f, &traces[t], &r[t * nspecs], nspecs, t == 0);
    ccb_close_out(f, d->path, "checkpoints.csv");
    if (ccb_results_iterations(r, n) > 1) { /* --iterations: written only then (iterations.c) */
        if ((f = ccb_open_out(d->path, "iterations.md")))
            ccb_out_formatted(ccb_write_iterations_md(f, r, n), d->path, "iterations.md");
        ccb_close_out(f, d->path, "iterations.md");
        if ((f = ccb_open_out(d->path, "iterations.csv")))
            ccb_write_iterations_csv(f, r, n);
        ccb_close_out(f, d->path, "iterations.csv");
    }
    for (size_t t = 0; t < ntraces; t++)
        plot_trace(d, &r[t * nspecs], nspecs);
    plot_ratios(d, r, ntraces, nspecs);
}

/* The --vm-backing line, in every replay's README (the default, whole maps,
 * included, so that a README says which backing its figures had): what was
 * asked, and what a simulated device made with these options
 * reports (cca_upstream_vm_backing), so that a library whose device did not
 * take it says so instead of being taken at its word. */
static void write_backing(FILE *readme, const ccb_device *driver) {
    cca_host_options ho = {.capacity = (size_t)64 << 20, .vm_granularity = driver->vm_granularity,
                           .vm_backing = driver->vm_backing};
    cca_upstream *u = NULL;
    int got = -1;
    if (cca_upstream_host_create_with(&ho, &u) == CCA_OK) {
        got = cca_upstream_vm_backing(u);
        cca_upstream_destroy(u);
    }
    int whole = driver->vm_backing == CCA_VM_WHOLE_MAPS;
    if (whole)
        fprintf(readme, "Backing of virtual-memory maps (`--vm-backing`): whole maps (the default: one physical "
                        "allocation per map, given back whole), on the simulated device and over CUDA; ");
    else
        fprintf(readme, "Backing of virtual-memory maps (`--vm-backing`): pages (one physical allocation per page, any "
                        "run of pages given back), on the simulated device and over CUDA; ");
    if (got == driver->vm_backing)
        fprintf(readme, "the simulated device reports %s.\n\n", whole ? "whole maps" : "pages");
    else if (got == CCA_VM_PAGES || got == CCA_VM_WHOLE_MAPS)
        fprintf(readme, "but the simulated device reports %s: this library's simulated device does not take "
                        "vm_backing.\n\n",
                got == CCA_VM_PAGES ? "pages" : "whole maps");
    else
        fprintf(readme, "a simulated device with these options could not be made to ask (%s).\n\n", cca_last_error());
}

/* Whether the replays make the "with driver" pass: some latency is set
 * (replay.c's rule; all of them 0, the column is "—"). */
static int driver_pass(const ccb_device *d) {
    return d->alloc_latency_ns || d->free_latency_ns || d->map_granule_ns || d->unmap_granule_ns || d->map_call_ns ||
           d->unmap_call_ns;
}

int ccb_write_replay_readme(FILE *readme, const ccb_outdir *d, const ccb_trace *traces, size_t nt, const ccb_result *r,
                            size_t nspecs, const ccb_device *driver) {
    int bad = 0; /* a table not whole: README.md is counted once */
    fprintf(readme, "\n## Traces\n\n");
    bad |= ccb_write_traces_md(readme, traces, nt);
    fprintf(readme,
            "\nLower bound: the peak of live requested bytes. Ideal arena: one contiguous best-fit arena with "
            "immediate coalescing, sizes rounded to 512 B (computed by ccbench).\n");
    fprintf(readme, "\n## Strategies x traces\n\n");
    if (!driver_pass(driver))
        fprintf(readme, "Host strategies run on the SIMULATED device. Times per alloc/free op are bookkeeping alone; "
                        "\"total ms with driver\": no such pass here, every driver latency being 0 (\"—\" but for "
                        "GPU strategies, \"(real)\": their times already include their driver).");
    else
        fprintf(readme,
                "Host strategies run on the SIMULATED device. Times per alloc/free op are bookkeeping alone; "
                "\"total ms with driver\" replays again on a device that charges %.1f us per device alloc and %.1f us "
                "per device free, and %.1f us per physical allocation mapped and %.1f us per one unmapped (a whole "
                "map with whole-maps backing, or a page with pages backing) on top of a virtual-memory map's or "
                "unmap's own, %.1f and %.1f us a call (the driver's cost; \"(real)\": a GPU strategy, whose times "
                "already include its driver).",
                (double)driver->alloc_latency_ns / 1e3, (double)driver->free_latency_ns / 1e3,
                (double)driver->map_granule_ns / 1e3, (double)driver->unmap_granule_ns / 1e3,
                (double)(driver->map_call_ns ? driver->map_call_ns : driver->alloc_latency_ns) / 1e3,
                (double)(driver->unmap_call_ns ? driver->unmap_call_ns : driver->free_latency_ns) / 1e3);
    fprintf(readme,
            " × lower bound and × ideal arena: peak reserved over each. \"—\": a figure the strategy "
            "cannot know (reserved bytes, upstream calls and fragmentation of the malloc floor, which has no device "
            "and no driver time either), the trace gives nothing to measure (per-op times of a trace without "
            "allocs or frees), or a ratio of a strategy with OOMs (it held less than the trace the references "
            "describe).\n\n");
    if (driver->vm_granularity) {
        char g[32];
        ccb_format_bytes(driver->vm_granularity, g, sizeof g);
        fprintf(readme, "Pages of expandable segments (`--vm-granularity`): %s, on the simulated device and over CUDA.\n\n",
                g);
    }
    write_backing(readme, driver);
    bad |= ccb_write_results_md(readme, r, nt * nspecs);
    bad |= ccb_write_iterations_readme(readme, r, nt * nspecs); /* nothing without --iterations */
    int any = 0;
    for (size_t t = 0; t < nt; t++) {
        if (!traces[t].nmarks && !traces[t].releases && !traces[t].domain_releases)
            continue;
        if (!any++)
            fprintf(readme, "\n## Phases and release events\n\nReserved bytes at each mark of a trace and right "
                            "after each of its release events (every strategy applies its own release call).\n");
        bad |= ccb_fprintf_row(readme, "\n### %s\n\n", traces[t].name);
        bad |= ccb_write_checkpoints_md(readme, &traces[t], &r[t * nspecs], nspecs);
    }
    any = 0;
    for (size_t t = 0; t < nt; t++) {
        if (traces[t].ndomains < 2)
            continue;
        if (!any++)
            fprintf(readme, "\n## Domains\n\nEach memory domain of a trace (a model, in a recording of ccrun): its "
                            "allocations, its own peak of live requested bytes, and what each strategy's release of "
                            "the domain gave back (its reserved bytes just before minus just after; strategies "
                            "without domains give nothing back there).\n");
        bad |= ccb_fprintf_row(readme, "\n### %s\n\n", traces[t].name);
        bad |= ccb_write_domains_md(readme, &traces[t], &r[t * nspecs], nspecs);
    }
    /* A plot is linked only when it is there: --no-plots, no gnuplot or a
     * failed one make none, and a link to a missing file is a broken page. */
    fprintf(readme, "\n");
    size_t linked = 0;
    for (size_t t = 0; t <= nt; t++) {
        char tr[64], png[128], path[PATH_MAX];
        if (t < nt) {
            ccb_file_name(traces[t].name, tr, sizeof tr);
            snprintf(png, sizeof png, "timeline_%s.png", tr);
        } else {
            snprintf(tr, sizeof tr, "ratios");
            snprintf(png, sizeof png, "ratios.png");
        }
        if (d->no_plots || snprintf(path, sizeof path, "%s/%s", d->path, png) >= (int)sizeof path ||
            access(path, F_OK) != 0)
            continue;
        fprintf(readme, "%s[%s](%s)", linked++ ? " · " : "Plots: ", tr, png);
    }
    fprintf(readme, "%sCSV: results.csv, checkpoints.csv, %stimeline/*.csv.\n", linked ? ". " : "",
            ccb_results_iterations(r, nt * nspecs) > 1 ? "iterations.csv, " : "");
    return bad;
}
