/*
 * suite.c — `ccbench --all [--out DIR] [--quick] [--traces DIR | TRACE...]`:
 * the standard suite, in bounded time (minutes on 2 cores, most of them
 * the malloc floor's micro cells at 100,000 live blocks, whose warm-up
 * passes the cell's time budget does not bound; --quick, for tests, in
 * seconds).
 *
 * Traces left out (step 1 without TRACE operands):
 *   - a trace the suite meant to run and could not is "left out": one line
 *     on stderr naming it and why ("ccbench: --all: trace T left out: WHY"),
 *     a line under README.md's "Traces left out", and exit status 1; the
 *     traces that loaded still run, and nothing else in README.md names the
 *     ones left out;
 *   - what leaves one out: its generator failing; its file not reading (the
 *     reader's reason); DIR/NAME past PATH_MAX (never cut); no host memory
 *     for its name; being past CCB_MAX_TRACES (64 in all: the generators,
 *     then the files by name);
 *   - a traces directory that cannot be read leaves all its traces out, in
 *     one line ("cannot read the traces directory DIR: WHY"): a file, no
 *     permission, no descriptor left, a path past PATH_MAX, and missing too
 *     (ccbench has no install: it reads bench/traces of the source tree it
 *     was built from, as bench/scripts, so a missing one is a broken tree;
 *     --traces an empty directory runs the generators alone). A read error
 *     part-way leaves out the names it did not list;
 *   - an empty directory, or one without *.csv and *.csv.gz, is no error.
 *
 *   1. traces: every generator (gen:NAME at --scale, 0.02 with --quick), then
 *      every *.csv and *.csv.gz in bench/traces (--traces DIR: in DIR), by
 *      name (those at their own size, --quick included), less those left
 *      out. TRACE operands replace that set (--traces with them is bad
 *      usage, exit 2): the suite runs on them (files or gen:NAME, in their
 *      order), and one that does not read stops the suite before anything
 *      runs (exit 2), as replay does. Traces of one name are told apart
 *      (ccb_name_traces: t, t-2);
 *   2. README.md opens with the machine, the exact command and the device,
 *      and the traces left out, if any;
 *   3. the micro-benchmark (cmd_micro.c), its table copied into README.md;
 *   4. every trace through every strategy (cmd_replay.c): the files of
 *      report.c, and the traces, results and checkpoints in README.md;
 *   5. not with --quick: model switching (switch.c, through ccrun), its
 *      switch.md copied into README.md ("skipped" without ccrun, "failed"
 *      when switch failed);
 *   6. the suite's wall time, last.
 * --quick also means one timed pass (--reps 1, --driver-reps 1) and 2000
 * micro pairs unless --pairs says otherwise. Exit status 1 when a trace
 * was left out, any step failed (every step runs anyway) or any output
 * could not be written whole, as for replay: an --out that cannot be made
 * a directory stops the suite before step 2; every other output (README.md,
 * micro.*, the replay files, switch's) that cannot be written (opened, or
 * closed whole) is said naming it and the reason, and the steps go on: a
 * README.md that cannot be opened loses only what goes into it (steps 3-5
 * still run and write their own files), and "wrote DIR/README.md" only
 * follows a README.md that was written. 2 is for usage (a TRACE operand
 * that does not read, --traces with TRACE operands, an --out that is the
 * traces directory: its CSVs would be the next run's traces).
 */
#include "ccbench.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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
    if (!o->pairs_given) /* --pairs 200000, the default, given is kept too */
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

/* The traces step 1 meant to run (without operands) and could not: each
 * said on stderr as it is found, naming it and why, and kept as a line for
 * README.md's "Traces left out"; count has them all, those whose line found
 * no host memory too. Any of them makes the run exit 1. */
typedef struct left_out {
    char **lines; /* "TRACE: why", malloc'd */
    size_t n, cap, count;
} left_out;

static void keep_line(left_out *lo, const char *trace, const char *name, const char *why) {
    lo->count++;
    if (lo->n == lo->cap) {
        size_t cap = lo->cap ? 2 * lo->cap : 16;
        char **grown = realloc(lo->lines, cap * sizeof *grown);
        if (!grown)
            return;
        lo->lines = grown;
        lo->cap = cap;
    }
    size_t len = strlen(trace) + (name ? 1 + strlen(name) : 0) + 2 + strlen(why) + 1;
    char *line = malloc(len);
    if (line) {
        snprintf(line, len, "%s%s%s: %s", trace, name ? "/" : "", name ? name : "", why);
        lo->lines[lo->n++] = line;
    }
}

/* Trace dir/name (dir alone when name is NULL: gen:NAME) left out, and why. */
static void leave_out(left_out *lo, const char *dir, const char *name, const char *why) {
    ccai_fprintf_escaped(stderr, "ccbench: --all: trace %s%s%s left out: %s\n", dir, name ? "/" : "", name ? name : "",
                         why); /* a path, a field of the file */
    keep_line(lo, dir, name, why);
}

/* The traces directory cannot be read (at all, or to its end: what it
 * listed still runs). */
static void unreadable_dir(left_out *lo, const char *dir, const char *why, int at_all) {
    const char *which = at_all ? "its traces" : "the traces it did not list";
    ccai_fprintf_escaped(stderr, "ccbench: --all: cannot read the traces directory %s: %s (%s are left out)\n", dir,
                         why, which);
    char line[512];
    snprintf(line, sizeof line, "the traces directory could not be read%s (%s): %s are left out",
             at_all ? "" : " to its end", why, which);
    keep_line(lo, dir, NULL, line);
}

/* The *.csv and *.csv.gz names in dir, sorted (readdir's order is the file
 * system's), malloc'd; a directory that cannot be read, or a name without
 * host memory, is left out (said, kept in lo). */
static char **list_traces(const char *dir, size_t *nn, left_out *lo) {
    char **names = NULL;
    size_t cap = 0;
    *nn = 0;
    DIR *d = opendir(dir);
    if (!d) {
        unreadable_dir(lo, dir, strerror(errno), 1);
        return NULL;
    }
    struct dirent *e;
    for (errno = 0; (e = readdir(d)); errno = 0) {
        if (!has_suffix(e->d_name, ".csv") && !has_suffix(e->d_name, ".csv.gz"))
            continue;
        if (*nn == cap) {
            char **grown = realloc(names, (cap ? 2 * cap : 64) * sizeof *grown);
            if (grown) {
                names = grown;
                cap = cap ? 2 * cap : 64;
            }
        }
        if (*nn < cap && (names[*nn] = strdup(e->d_name)))
            ++*nn;
        else
            leave_out(lo, dir, e->d_name, "out of host memory for its name");
    }
    if (errno)
        unreadable_dir(lo, dir, strerror(errno), 0);
    closedir(d);
    if (*nn)
        qsort(names, *nn, sizeof *names, by_name);
    return names;
}

/* Step 1 without operands: the generators' traces, then those of the traces
 * directory (bench/traces, or --traces DIR) in name order, at most max in
 * all; every trace it meant to run and could not is left out (lo). */
static size_t load_traces(const ccb_options *o, ccb_trace *traces, size_t max, left_out *lo) {
    char too_many[64];
    snprintf(too_many, sizeof too_many, "more than %d traces in one run", CCB_MAX_TRACES);
    size_t nt = 0;
    for (size_t i = 0; i < ccb_generator_count; i++) {
        char name[80];
        snprintf(name, sizeof name, "gen:%s", ccb_generators[i].name);
        if (nt == max)
            leave_out(lo, name, NULL, too_many);
        else if (ccb_load_trace(name, o, &traces[nt]) == 0) /* says why not */
            nt++;
        else
            leave_out(lo, name, NULL, "the generator failed (said above)");
    }
    const char *given = o->traces_dir ? o->traces_dir : ccb_default_traces_dir(); /* read and named: one string */
    char dir[PATH_MAX];
    int len = snprintf(dir, sizeof dir, "%s", given);
    if (len < 0 || (size_t)len >= sizeof dir) {
        unreadable_dir(lo, given, "path too long", 1);
        return nt;
    }
    size_t nn;
    char **names = list_traces(dir, &nn, lo);
    for (size_t i = 0; i < nn; i++) {
        char path[PATH_MAX], err[256];
        len = snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (len < 0 || (size_t)len >= sizeof path) {
            snprintf(err, sizeof err, "path too long (%d bytes; at most %zu)", len, sizeof path - 1);
            leave_out(lo, dir, names[i], err);
        } else if (nt == max) {
            leave_out(lo, dir, names[i], too_many);
        } else if (ccb_trace_load(&traces[nt], path, err, sizeof err) == 0) {
            nt++;
        } else {
            leave_out(lo, dir, names[i], err);
        }
        free(names[i]);
    }
    free(names);
    return nt;
}

/* README.md's "Traces left out", when any was. */
static void write_left_out(FILE *readme, const left_out *lo) {
    if (!lo->count)
        return;
    fprintf(readme, "## Traces left out\n\n"
                    "The suite meant to run these and could not (each said on stderr; the run exits 1). "
                    "Nothing below is about them.\n\n");
    for (size_t i = 0; i < lo->n; i++)
        ccai_fprintf_escaped(readme, "- %s\n", lo->lines[i]);
    if (lo->n < lo->count)
        fprintf(readme, "- and %zu more, named on stderr (no host memory to name them here)\n", lo->count - lo->n);
    fprintf(readme, "\n");
}

static void left_out_free(left_out *lo) {
    for (size_t i = 0; i < lo->n; i++)
        free(lo->lines[i]);
    free(lo->lines);
}

/* Step 5: `ccbench switch --out DIR`, and its switch.md into the README
 * (readme NULL: it could not be opened, switch runs all the same). */
static int switch_section(const ccb_options *o, FILE *readme) {
    if (readme) {
        fprintf(readme, "\n## Model switching: in-process release vs a process per model\n\n");
        fflush(readme);
    }
    char *sargv[] = {"switch", "--out", (char *)o->out, NULL};
    int rc = ccb_cmd_switch(3, sargv) != 0;
    if (!readme)
        return rc;
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

/* 1 when --out is the traces directory the suite reads (both there, one
 * st_dev/st_ino): its CSVs would be traces to the next run. */
static int out_is_traces_dir(const ccb_options *o) {
    const char *traces = o->traces_dir ? o->traces_dir : ccb_default_traces_dir();
    struct stat a, b;
    return !o->nargs && stat(o->out, &a) == 0 && stat(traces, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

int ccb_cmd_all(ccb_options *o) {
    if (!o->out)
        o->out = "ccbench-results";
    apply_quick(o);
    if (o->traces_dir && o->nargs)
        return ccb_usage_error(NULL, "--traces and TRACE operands: the operands replace the directory's traces");
    if (out_is_traces_dir(o))
        return ccb_usage_error(NULL,
                               "--out '%s' is the --traces directory '%s': its results' CSVs would be read as traces "
                               "by the next run",
                               o->out, o->traces_dir ? o->traces_dir : ccb_default_traces_dir());
    uint64_t t0 = ccb_now_ns();
    ccb_trace traces[CCB_MAX_TRACES]; /* o->nargs <= CCB_MAX_TRACES (cli.c) */
    size_t nt = 0;
    left_out lo = {0};
    if (o->nargs && load_operands(o, traces, &nt) != 0)
        return 2; /* said by ccb_load_trace; nothing has run */
    if (!o->nargs)
        nt = load_traces(o, traces, CCB_MAX_TRACES, &lo);
    ccb_name_traces(traces, nt, o->nargs ? o->args : NULL); /* x.csv and x.csv.gz are both "x" */
    /* a trace left out (said) fails the run; those that loaded run all the same */
    int rc = lo.count != 0;
    ccb_result *r = NULL;
    FILE *readme = NULL;
    if (ccb_recording_reads()) {
        rc = 2; /* said: CCALLOC_TRACE names a trace read; nothing has run */
        goto out;
    }
    if (ccb_mkdir_p(o->out)) {
        rc = 1; /* said and counted by ccb_mkdir_p: an output failure, as for replay */
        goto out;
    }

    /* NULL: said and counted by ccb_open_out; every other step still runs
     * and writes its own files, only what goes into README.md is lost */
    readme = ccb_open_out(o->out, "README.md");
    if (readme) {
        fprintf(readme, "# ccbench results%s\n\n", o->quick ? " (quick)" : "");
        ccb_write_machine_md(readme);
        ccb_out_formatted(ccb_write_command_md(readme, o->command_line), o->out, "README.md");
        fprintf(readme,
                "- simulated device: %zu bytes of host memory (ccalloc strategies); "
                "all ccalloc figures here are on the SIMULATED device\n\n",
                o->device_bytes);
        write_left_out(readme, &lo);
        fprintf(readme, "## Cached-path micro-benchmark (simulated device)\n\n");
        fflush(readme);
    }
    rc |= ccb_run_micro(o, readme);

    rc |= ccb_run_replays(o, traces, nt, &r) != 0;
    if (r) {
        ccb_outdir d = {o->out, o->script_dir, o->no_plots};
        ccb_write_replay_files(&d, traces, nt, r, o->nspecs);
        ccb_device cost = {o->device_bytes,    o->alloc_latency_ns, o->free_latency_ns,
                           o->map_granule_ns, o->unmap_granule_ns, o->vm_granularity, o->vm_backing,
                           o->map_call_ns,    o->unmap_call_ns};
        if (readme)
            ccb_out_formatted(ccb_write_replay_readme(readme, &d, traces, nt, r, o->nspecs, &cost), o->out,
                              "README.md");
        for (size_t i = 0; i < nt * o->nspecs; i++)
            ccb_result_free(&r[i]);
        free(r);
    }

    if (!o->quick)
        rc |= switch_section(o, readme);
    if (readme)
        fprintf(readme, "\nWall time of the suite: %.1f s.\n", (double)(ccb_now_ns() - t0) / 1e9);
    if (!readme || ccb_close_out(readme, o->out, "README.md") != 0) /* said and counted */
        rc = 1;
    else
        ccai_fprintf_escaped(stderr, "ccbench: wrote %s/README.md (%.1f s)\n", o->out,
                             (double)(ccb_now_ns() - t0) / 1e9);
out:
    for (size_t i = 0; i < nt; i++)
        ccb_trace_free(&traces[i]);
    left_out_free(&lo);
    return rc; /* 0; 1: a trace left out, a step failed, or an output not written whole; 2: above */
}
