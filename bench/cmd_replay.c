/*
 * cmd_replay.c — `ccbench replay [-s STRATEGY]... [--out DIR] TRACE...`:
 * every trace through every strategy (replay.c), the results table on
 * stdout, and with --out the files of report.c and a README.md that names
 * the machine, the exact command and every table.
 *
 * Strategies default to the host suite followed by the GPU suite; the GPU
 * ones say "skipped: no GPU" without one. All traces are read before the
 * first replay, so a bad file stops the command before any time is spent;
 * two of one name are then told apart (ccb_name_traces: t, t-2).
 */
#include "ccbench.h"

#include <stdlib.h>

#include "ccai_escape.h" /* common/: text from outside, escaped for a person */

static const char *const host_suite[] = {"ccalloc-growth",     "ccalloc-greedy",
                                         "ccalloc-nosmall",    "ccalloc-maxsplit",
                                         "ccalloc-onelarge",   "ccalloc-expandable",
                                         "ccalloc-expandable-greedy", "device-malloc",
                                         "malloc"};
static const char *const gpu_suite[] = {"ccalloc-cuda",  "ccalloc-cuda-expandable", "cuda-malloc",
                                        "cuda-async-t0", "cuda-async-tmax",         "cub"};

void ccb_default_specs(ccb_options *o) {
    if (o->nspecs)
        return;
    for (size_t i = 0; i < sizeof host_suite / sizeof *host_suite; i++)
        o->specs[o->nspecs++] = host_suite[i];
    for (size_t i = 0; i < sizeof gpu_suite / sizeof *gpu_suite; i++)
        o->specs[o->nspecs++] = gpu_suite[i];
}

int ccb_run_replays(ccb_options *o, const ccb_trace *traces, size_t ntraces, ccb_result **out) {
    ccb_default_specs(o);
    ccb_result *r = calloc(ntraces * o->nspecs + 1, sizeof *r);
    *out = r;
    if (!r) {
        fprintf(stderr, "ccbench: out of host memory for the results of %zu replays\n", ntraces * o->nspecs);
        return -1;
    }
    ccb_replay_options ro = {o->device_bytes,    o->reps,        600, o->alloc_latency_ns, o->free_latency_ns,
                             o->driver_reps, o->ignore_releases, o->map_granule_ns, o->unmap_granule_ns, o->vm_granularity,
                             o->vm_backing, o->iterations,  o->map_call_ns,     o->unmap_call_ns};
    int failed = 0;
    for (size_t t = 0; t < ntraces; t++) {
        for (size_t s = 0; s < o->nspecs; s++) {
            ccb_result *x = &r[t * o->nspecs + s];
            uint64_t t0 = ccb_now_ns();
            if (ccb_replay(&traces[t], o->specs[s], &ro, x) != 0) {
                failed = 1;
                ccai_fprintf_escaped(stderr, "ccbench: %s on %s FAILED: %s\n", o->specs[s], traces[t].name, x->why);
            } else {
                ccai_fprintf_escaped(stderr, "  replay %-12s %-18s %s (%.1f s)\n", traces[t].name, o->specs[s],
                                     x->skipped ? "skipped" : "done", (double)(ccb_now_ns() - t0) / 1e9);
            }
        }
    }
    return failed ? -1 : 0;
}

static void free_traces(ccb_trace *traces, size_t n) {
    for (size_t i = 0; i < n; i++)
        ccb_trace_free(&traces[i]);
    free(traces);
}

static void write_out_dir(const ccb_options *o, const ccb_trace *traces, const ccb_result *r) {
    ccb_outdir d = {o->out, o->script_dir, o->no_plots}; /* o->out: made before anything ran */
    ccb_write_replay_files(&d, traces, o->nargs, r, o->nspecs);
    FILE *readme = ccb_open_out(o->out, "README.md");
    if (!readme)
        return;
    fprintf(readme, "# ccbench replay\n\n");
    ccb_write_machine_md(readme);
    int bad = ccb_write_command_md(readme, o->command_line);
    fprintf(readme, "- simulated device: %zu bytes of host memory\n", o->device_bytes);
    ccb_device cost = {o->device_bytes,    o->alloc_latency_ns, o->free_latency_ns,
                       o->map_granule_ns, o->unmap_granule_ns, o->vm_granularity, o->vm_backing,
                       o->map_call_ns,    o->unmap_call_ns};
    bad |= ccb_write_replay_readme(readme, &d, traces, o->nargs, r, o->nspecs, &cost);
    ccb_out_formatted(bad, o->out, "README.md");
    ccb_close_out(readme, o->out, "README.md"); /* said, and counted */
}

int ccb_cmd_replay(ccb_options *o) {
    if (!o->nargs) {
        fprintf(stderr, "ccbench replay: name at least one trace (file or gen:NAME)\n");
        return 2;
    }
    ccb_trace *traces = calloc(o->nargs, sizeof *traces);
    if (!traces) {
        fprintf(stderr, "ccbench replay: out of host memory for %zu traces\n", o->nargs);
        return 1;
    }
    for (size_t i = 0; i < o->nargs; i++) {
        if (ccb_load_trace(o->args[i], o, &traces[i])) {
            free_traces(traces, i); /* the ones already read */
            return 2;
        }
    }
    if (ccb_recording_reads()) { /* said: before the first allocator empties it */
        free_traces(traces, o->nargs);
        return 2;
    }
    ccb_name_traces(traces, o->nargs, o->args);
    if (o->out && ccb_mkdir_p(o->out)) { /* said and counted: before anything runs */
        free_traces(traces, o->nargs);
        return 1;
    }
    ccb_result *r;
    int rc = ccb_run_replays(o, traces, o->nargs, &r);
    if (!r) { /* said */
        free_traces(traces, o->nargs);
        return 1;
    }
    int bad = ccb_write_results_md(stdout, r, o->nargs * o->nspecs);
    if (ccb_results_iterations(r, o->nargs * o->nspecs) > 1) {
        printf("\nIterations (first, later):\n\n");
        bad |= ccb_write_iterations_md(stdout, r, o->nargs * o->nspecs);
    }
    ccb_out_formatted(bad, NULL, "standard output"); /* counted: exit 1 */
    if (o->out)
        write_out_dir(o, traces, r);
    for (size_t i = 0; i < o->nargs * o->nspecs; i++)
        ccb_result_free(&r[i]);
    free(r);
    free_traces(traces, o->nargs);
    return rc ? 1 : 0;
}
