/*
 * suite.c — `ccbench --all [--out DIR] [--quick] [--traces DIR | TRACE...]`:
 * the standard suite, in bounded time (< 2 min on 2 cores; --quick, for
 * tests, in seconds).
 *
 *   1. traces: every generator (gen:NAME at --scale, 0.02 with --quick), then
 *      every *.csv and *.csv.gz in bench/traces (--traces DIR: in DIR), by
 *      name (those at their own size, --quick included); a trace that does
 *      not read is left out with its message. TRACE operands replace that
 *      set (--traces with them is bad usage, exit 2): the suite runs on them
 *      (files or gen:NAME, in their order), and one that does not read stops
 *      the suite before anything runs (exit 2), as replay does. Traces of
 *      one name are told apart (ccb_name_traces: t, t-2);
 *   2. README.md opens with the machine, the exact command and the device;
 *   3. the micro-benchmark (cmd_micro.c), its table copied into README.md;
 *   4. every trace through every strategy (cmd_replay.c): the files of
 *      report.c, and the traces, results and checkpoints in README.md;
 *   5. not with --quick: model switching (switch.c, through ccrun), its
 *      switch.md copied into README.md ("skipped" without ccrun, "failed"
 *      when switch failed);
 *   6. the suite's wall time, last.
 * --quick also means one timed pass (--reps 1, --driver-reps 1) and 2000
 * micro pairs unless --pairs says otherwise. Exit status 1 when any step
 * failed (every step runs anyway) or any output could not be written
 * whole, as for replay: an --out that cannot be made a directory stops the
 * suite before step 2, a README.md that cannot be written (opened, or
 * closed whole) is said, and "wrote DIR/README.md" only follows a README.md
 * that was written. 2 is for usage (a TRACE operand that does not read).
 */
#include "ccbench.h"

#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "ccai_escape.h" /* common/: text from outside, escaped for a person */

static int has_suffix(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void apply_quick(ccb_options *o) {
    if (!o->quick)
        return;
    o->scale = 0.02;
    o->reps = 1;
    if (o->pairs == 200000) /* the default */
        o->pairs = 2000;
}

/* Step 1 with TRACE operands: all of them, or -1 (said) and none. */
static int load_operands(const ccb_options *o, ccb_trace *traces, size_t *nt) {
    for (*nt = 0; *nt < o->nargs; ++*nt) {
        if (ccb_load_trace(o->args[*nt], o, &traces[*nt]) != 0) {
            while (*nt)
                ccb_trace_free(&traces[--*nt]);
            return -1;
        }
    }
    return 0;
}

/* Step 1 without: the generators' traces, then bench/traces/ (--traces DIR)
 * in name order. */
static size_t load_traces(const ccb_options *o, ccb_trace *traces, size_t max) {
    size_t nt = 0;
    for (size_t i = 0; i < ccb_generator_count && nt < max; i++) {
        char name[80];
        snprintf(name, sizeof name, "gen:%s", ccb_generators[i].name);
        if (ccb_load_trace(name, o, &traces[nt]) == 0)
            nt++;
    }
    char dir[PATH_MAX];
    int len = o->traces_dir ? snprintf(dir, sizeof dir, "%s", o->traces_dir)
                            : snprintf(dir, sizeof dir, "%s/../traces", ccb_default_script_dir());
    DIR *d = len >= 0 && (size_t)len < sizeof dir ? opendir(dir) : NULL;
    if (!d)
        return nt;
    char *names[CCB_MAX_TRACES];
    size_t nn = 0;
    struct dirent *e;
    while ((e = readdir(d)) && nn < CCB_MAX_TRACES)
        if (has_suffix(e->d_name, ".csv") || has_suffix(e->d_name, ".csv.gz"))
            if ((names[nn] = strdup(e->d_name)))
                nn++;
    closedir(d);
    qsort(names, nn, sizeof *names, by_name); /* readdir's order is the file system's */
    for (size_t i = 0; i < nn; i++) {
        char path[PATH_MAX];
        len = snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (len >= 0 && (size_t)len < sizeof path && nt < max && ccb_load_trace(path, o, &traces[nt]) == 0)
            nt++;
        free(names[i]);
    }
    return nt;
}

/* Step 5: `ccbench switch --out DIR`, and its switch.md into the README. */
static int switch_section(const ccb_options *o, FILE *readme) {
    fprintf(readme, "\n## Model switching: in-process release vs a process per model\n\n");
    fflush(readme);
    char *sargv[] = {"switch", "--out", (char *)o->out, NULL};
    int rc = ccb_cmd_switch(3, sargv) != 0;
    char path[PATH_MAX];
    int len = snprintf(path, sizeof path, "%s/switch.md", o->out);
    FILE *sw = !rc && len >= 0 && (size_t)len < sizeof path ? fopen(path, "r") : NULL;
    if (!sw) {
        fprintf(readme, rc ? "failed: switch.md was not written (ccbench switch said why on stderr).\n"
                           : "skipped: ccrun not found (configure with -DCCA_BUILD_RUNTIME=ON).\n");
        return rc;
    }
    char line[1024];
    while (fgets(line, sizeof line, sw))
        fputs(line, readme);
    fclose(sw);
    return rc;
}

int ccb_cmd_all(ccb_options *o) {
    if (!o->out)
        o->out = "ccbench-results";
    apply_quick(o);
    if (o->traces_dir && o->nargs)
        return ccb_usage_error(NULL, "--traces and TRACE operands: the operands replace the directory's traces");
    uint64_t t0 = ccb_now_ns();
    ccb_trace traces[CCB_MAX_TRACES]; /* o->nargs <= CCB_MAX_TRACES (cli.c) */
    size_t nt = 0;
    if (o->nargs && load_operands(o, traces, &nt) != 0)
        return 2; /* said by ccb_load_trace; nothing has run */
    if (!o->nargs)
        nt = load_traces(o, traces, CCB_MAX_TRACES);
    ccb_name_traces(traces, nt, o->nargs ? o->args : NULL); /* x.csv and x.csv.gz are both "x" */
    if (ccb_mkdir_p(o->out)) {
        while (nt)
            ccb_trace_free(&traces[--nt]);
        return 1; /* said and counted by ccb_mkdir_p: an output failure, as for replay */
    }

    FILE *readme = ccb_open_out(o->out, "README.md");
    int rc = 0;
    ccb_result *r = NULL;
    if (!readme) {
        rc = 1; /* said and counted by ccb_open_out */
        goto out;
    }
    fprintf(readme, "# ccbench results%s\n\n", o->quick ? " (quick)" : "");
    ccb_write_machine_md(readme);
    ccb_write_command_md(readme, o->command_line);
    fprintf(readme,
            "- simulated device: %zu bytes of host memory (ccalloc strategies); "
            "all ccalloc figures here are on the SIMULATED device\n\n",
            o->device_bytes);

    fprintf(readme, "## Cached-path micro-benchmark (simulated device)\n\n");
    fflush(readme);
    rc |= ccb_run_micro(o, readme);

    rc |= ccb_run_replays(o, traces, nt, &r) != 0;
    if (r) {
        ccb_outdir d = {o->out, o->script_dir, o->no_plots};
        ccb_write_replay_files(&d, traces, nt, r, o->nspecs);
        ccb_device cost = {o->device_bytes,    o->alloc_latency_ns, o->free_latency_ns,
                           o->map_granule_ns, o->unmap_granule_ns, o->vm_granularity, o->vm_backing,
                           o->map_call_ns,    o->unmap_call_ns};
        ccb_write_replay_readme(readme, &d, traces, nt, r, o->nspecs, &cost);
        for (size_t i = 0; i < nt * o->nspecs; i++)
            ccb_result_free(&r[i]);
        free(r);
    }

    if (!o->quick)
        rc |= switch_section(o, readme);
    fprintf(readme, "\nWall time of the suite: %.1f s.\n", (double)(ccb_now_ns() - t0) / 1e9);
    if (ccb_close_out(readme, o->out, "README.md") != 0) /* said and counted */
        rc = 1;
    else
        ccai_fprintf_escaped(stderr, "ccbench: wrote %s/README.md (%.1f s)\n", o->out,
                             (double)(ccb_now_ns() - t0) / 1e9);
out:
    for (size_t i = 0; i < nt; i++)
        ccb_trace_free(&traces[i]);
    return rc; /* 0, or 1: a step failed or an output could not be written whole */
}
