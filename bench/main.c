/*
 * main.c — ccbench, the allocation-strategy benchmark: command line, the
 * standard suite (--all) and the files it writes.
 *
 *   ccbench gen NAME [-o FILE]          write a generated trace
 *   ccbench info TRACE...               what a trace holds (peaks, counts)
 *   ccbench replay [opts] TRACE...      strategies x traces -> table, CSV, plots
 *   ccbench micro [opts]                cached alloc+free pair cost
 *   ccbench switch [opts]               model switching: in-process vs process
 *   ccbench --all [--out DIR]           all of the above, bounded time
 *
 * A TRACE argument is a file in the recorder's format or gen:NAME for a
 * generated one (seed and scale from --seed/--scale).
 *
 * Output directory layout (replay and --all):
 *   README.md              machine, date, exact command, every table
 *   results.md/.csv        one row per strategy x trace
 *   micro.md/.csv          the micro-benchmark
 *   timeline/T__S.csv      allocated/reserved over trace T under strategy S
 *   timeline_T.png         one panel per strategy (gnuplot, scripts/timeline.gp)
 *   ratios.dat/.png        peak reserved / peak allocated per trace x strategy
 */
#include "ccbench.h"

#include <dirent.h>
#include <limits.h>
#include <malloc.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ccalloc.h"

#define MAX_SPECS 32
#define MAX_TRACES 64

static const char *const host_suite[] = {"ccalloc-growth",   "ccalloc-greedy",   "ccalloc-nosmall",
                                         "ccalloc-maxsplit", "ccalloc-onelarge", "device-malloc", "malloc"};
static const char *const gpu_suite[] = {"ccalloc-cuda", "cuda-malloc", "cuda-async-t0", "cuda-async-tmax", "cub"};

typedef struct options {
    const char *specs[MAX_SPECS];
    size_t nspecs;
    const char *traces[MAX_TRACES];
    size_t ntraces;
    const char *out;
    const char *script_dir;
    const char *output_file;
    uint64_t seed;
    double scale;
    int reps;
    size_t device_bytes;
    uint64_t alloc_latency_ns, free_latency_ns;
    int driver_reps;
    int reps_given;
    int ignore_releases;
    size_t pairs;
    size_t lives[8];
    size_t nlives;
    int no_plots;
    int quick;
} options;

static char command_line[4096];

static void usage(FILE *f) {
    fprintf(f,
            "ccbench — allocation strategies compared on the same traces (ccalloc benchmark harness)\n"
            "\n"
            "usage:\n"
            "  ccbench --all [--out DIR] [--quick]   the standard suite: micro, every generator and every trace\n"
            "                                        in bench/traces through every strategy, plots; < 2 min\n"
            "  ccbench gen NAME [-o FILE] [--seed N] [--scale X]   write a generated trace (stdout by default)\n"
            "  ccbench info TRACE...                 events, peaks and streams of traces\n"
            "  ccbench replay [-s STRATEGY]... [--out DIR] TRACE...   replay traces through strategies\n"
            "  ccbench micro [-s STRATEGY]... [--live N,N,..] [--pairs N] [--out DIR]\n"
            "                                        cost of a cached alloc+free pair with N blocks live\n"
            "  ccbench switch [--help]               model switching: in-process release vs a process per model\n"
            "  ccbench driver [--reps N] [--out DIR] the GPU driver's real cudaMalloc/cudaFree cost by size\n"
            "                                        (the figures the simulated device's latencies model)\n"
            "  ccbench --list                        strategies and generators\n"
            "\n"
            "TRACE: a CSV file (seq,op,id,size,stream; written by CCALLOC_TRACE=path or `ccbench gen`)\n"
            "       or gen:NAME for a generated trace.\n"
            "\n"
            "options:\n"
            "  -s, --strategy S     preset name, BASE, or BASE=CONFIG (repeatable; default: the host suite\n"
            "                       plus the GPU suite, GPU ones report \"skipped: no GPU\" without one)\n"
            "  --out DIR            write README.md, results/micro md+csv, timelines and plots into DIR\n"
            "  --seed N             generator seed (default 1)\n"
            "  --scale X            generator event-count scale (default 1)\n"
            "  --reps N             timed passes per strategy x trace (default 3)\n"
            "  --device-bytes B     simulated device capacity, K/M/G suffixes (default 8G)\n"
            "  --upstream-latency A[,F]  the driver's cost per device alloc [and free] in the \"with driver\"\n"
            "                       passes: a duration with ns/us/ms (default 35us,35us; 0: no such pass)\n"
            "  --driver-reps N      timed passes with the driver's cost (default: --reps; 1 with --quick)\n"
            "  --no-release-events  replay as if the program never emptied or trimmed its cache (the trace's\n"
            "                       empty_cache and trim events are reported at their checkpoints, not applied)\n"
            "  --pairs N            micro: timed pairs per cell (default 200000)\n"
            "  --live N,N,...       micro: live block counts (default 10,1000,10000)\n"
            "  --scripts DIR        gnuplot scripts (default %s)\n"
            "  --no-plots           do not run gnuplot\n"
            "  --quick              --all at a tiny scale (tests, CI)\n"
            "  -o FILE              gen: output file\n"
            "\n",
            ccb_default_script_dir());
    fprintf(f, "strategies:\n");
    ccb_strategy_list(f);
    fprintf(f, "generators (gen:NAME):\n");
    for (size_t i = 0; i < ccb_generator_count; i++)
        fprintf(f, "    %-18s %s\n", ccb_generators[i].name, ccb_generators[i].doc);
    fprintf(f, "\nResults on the simulated device (host memory) are labelled simulated; GPU strategies need a GPU.\n");
}

static int parse_size(const char *s, size_t *out) {
    return cca_parse_size(s, out) == CCA_OK ? 0 : -1;
}

/* A plain decimal number in [lo, hi]: no sign, no blanks, no trailing text,
 * no overflow (strtoull/atoi alone take "-1", "abc" as 0, "1e9" as 1). */
static int parse_uint(const char *s, unsigned long long lo, unsigned long long hi, unsigned long long *out) {
    if (!s || *s < '0' || *s > '9')
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno == ERANGE || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* A duration: decimal integer with unit ns, us or ms (no unit: us), at most
 * CCA_HOST_MAX_LATENCY_NS. */
static int parse_duration_ns(const char *s, uint64_t *out) {
    if (!s || *s < '0' || *s > '9')
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    unsigned long long mult = !*end || !strcmp(end, "us") ? 1000 : !strcmp(end, "ns") ? 1 : !strcmp(end, "ms") ? 1000000 : 0;
    if (errno || !mult || v > CCA_HOST_MAX_LATENCY_NS / mult)
        return -1;
    *out = v * mult;
    return 0;
}

static int parse_options(int argc, char **argv, int first, options *o) {
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_ARG()                                                                                                     \
    do {                                                                                                               \
        if (!next) {                                                                                                   \
            fprintf(stderr, "ccbench: %s needs an argument\n", a);                                                     \
            return -1;                                                                                                 \
        }                                                                                                              \
        i++;                                                                                                           \
    } while (0)
#define BAD_VALUE(what)                                                                                                \
    do {                                                                                                               \
        fprintf(stderr, "ccbench: %s '%s' is not %s\n", a, next, what);                                                \
        return -1;                                                                                                     \
    } while (0)
        unsigned long long v;
        if (!strcmp(a, "-s") || !strcmp(a, "--strategy")) {
            NEED_ARG();
            if (o->nspecs == MAX_SPECS) {
                fprintf(stderr, "ccbench: more than %d strategies\n", MAX_SPECS);
                return -1;
            }
            o->specs[o->nspecs++] = next;
        } else if (!strcmp(a, "--out")) {
            NEED_ARG();
            o->out = next;
        } else if (!strcmp(a, "-o")) {
            NEED_ARG();
            o->output_file = next;
        } else if (!strcmp(a, "--seed")) {
            NEED_ARG();
            if (parse_uint(next, 0, ULLONG_MAX, &v))
                BAD_VALUE("a number in 0..2^64-1");
            o->seed = v;
        } else if (!strcmp(a, "--scale")) {
            NEED_ARG();
            char *end;
            o->scale = strtod(next, &end);
            if (*end || !(o->scale > 0) || !isfinite(o->scale) || o->scale > 1e6) {
                fprintf(stderr, "ccbench: --scale must be a number > 0 and <= 1e6, not '%s'\n", next);
                return -1;
            }
        } else if (!strcmp(a, "--reps")) {
            NEED_ARG();
            if (parse_uint(next, 1, 1000, &v))
                BAD_VALUE("a count in 1..1000");
            o->reps = (int)v;
            o->reps_given = 1;
        } else if (!strcmp(a, "--device-bytes")) {
            NEED_ARG();
            if (parse_size(next, &o->device_bytes) || !o->device_bytes) {
                fprintf(stderr, "ccbench: bad --device-bytes '%s'\n", next);
                return -1;
            }
        } else if (!strcmp(a, "--upstream-latency")) {
            NEED_ARG();
            char buf[64];
            if (strlen(next) >= sizeof buf)
                BAD_VALUE("a duration or two separated by a comma");
            snprintf(buf, sizeof buf, "%s", next);
            char *comma = strchr(buf, ',');
            if (comma)
                *comma = '\0';
            if (parse_duration_ns(buf, &o->alloc_latency_ns) ||
                parse_duration_ns(comma ? comma + 1 : buf, &o->free_latency_ns))
                BAD_VALUE("a duration (ns, us, ms; at most 1 s) or two separated by a comma");
        } else if (!strcmp(a, "--no-release-events")) {
            o->ignore_releases = 1;
        } else if (!strcmp(a, "--driver-reps")) {
            NEED_ARG();
            if (parse_uint(next, 1, 1000, &v))
                BAD_VALUE("a count in 1..1000");
            o->driver_reps = (int)v;
        } else if (!strcmp(a, "--pairs")) {
            NEED_ARG();
            if (parse_uint(next, 1, (1ull << 32), &v))
                BAD_VALUE("a count in 1..2^32");
            o->pairs = (size_t)v;
        } else if (!strcmp(a, "--live")) {
            NEED_ARG();
            o->nlives = 0;
            char buf[256];
            snprintf(buf, sizeof buf, "%s", next);
            char *save;
            for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                if (o->nlives == 8 || parse_uint(t, 1, 1000000, &v))
                    BAD_VALUE("at most 8 counts in 1..1000000 separated by commas");
                o->lives[o->nlives++] = (size_t)v;
            }
            if (!o->nlives)
                BAD_VALUE("a list of counts");
        } else if (!strcmp(a, "--scripts")) {
            NEED_ARG();
            o->script_dir = next;
        } else if (!strcmp(a, "--no-plots")) {
            o->no_plots = 1;
        } else if (!strcmp(a, "--quick")) {
            o->quick = 1;
        } else if (!strcmp(a, "--all")) {
            /* handled by main */
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "ccbench: unknown option '%s' (ccbench --help)\n", a);
            return -1;
        } else if (o->ntraces < MAX_TRACES) {
            o->traces[o->ntraces++] = a;
        } else {
            fprintf(stderr, "ccbench: more than %d traces\n", MAX_TRACES);
            return -1;
        }
#undef NEED_ARG
#undef BAD_VALUE
    }
    return 0;
}

static int load_trace(const char *arg, const options *o, ccb_trace *t) {
    char err[256];
    if (!strncmp(arg, "gen:", 4)) {
        ccb_gen_params p = {o->seed, o->scale};
        if (ccb_generate(arg + 4, &p, t) != 0) {
            fprintf(stderr, "ccbench: unknown generator '%s' (ccbench --list)\n", arg + 4);
            return -1;
        }
        return 0;
    }
    if (ccb_trace_load(t, arg, err, sizeof err) != 0) {
        fprintf(stderr, "ccbench: %s: %s\n", arg, err);
        return -1;
    }
    return 0;
}

static int mkdir_p(const char *path) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0755) && errno != EEXIST)
                return -1;
            *p = '/';
        }
    }
    return mkdir(buf, 0755) && errno != EEXIST ? -1 : 0;
}

static FILE *open_out(const char *dir, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        fprintf(stderr, "ccbench: cannot write %s: %s\n", path, strerror(errno));
    return f;
}

/* ---- gen / info ---------------------------------------------------------------- */

static int cmd_gen(const options *o) {
    if (o->ntraces != 1) {
        fprintf(stderr, "ccbench gen: name one generator (ccbench --list)\n");
        return 2;
    }
    ccb_trace t;
    char name[80];
    snprintf(name, sizeof name, "gen:%s", o->traces[0]);
    if (load_trace(name, o, &t))
        return 2;
    int rc = o->output_file ? ccb_trace_save(&t, o->output_file) : ccb_trace_write(&t, stdout);
    ccb_trace_free(&t);
    return rc ? 1 : 0;
}

static int cmd_info(const options *o) {
    for (size_t i = 0; i < o->ntraces; i++) {
        ccb_trace t;
        if (load_trace(o->traces[i], o, &t))
            return 2;
        if (i == 0)
            ccb_write_traces_md(stdout, &t, 1);
        else { /* the rows alone: one table */
            char *buf = NULL;
            size_t len = 0;
            FILE *m = open_memstream(&buf, &len);
            if (m) {
                ccb_write_traces_md(m, &t, 1);
                fclose(m);
                const char *row = buf;
                for (int k = 0; k < 2 && row; k++) /* skip the header and its rule */
                    row = strchr(row, '\n') ? strchr(row, '\n') + 1 : NULL;
                fputs(row ? row : "", stdout);
                free(buf);
            }
        }
        ccb_trace_free(&t);
    }
    return 0;
}

/* ---- replay -------------------------------------------------------------------- */

static void default_specs(options *o) {
    if (o->nspecs)
        return;
    for (size_t i = 0; i < sizeof host_suite / sizeof *host_suite; i++)
        o->specs[o->nspecs++] = host_suite[i];
    for (size_t i = 0; i < sizeof gpu_suite / sizeof *gpu_suite; i++)
        o->specs[o->nspecs++] = gpu_suite[i];
}

static void safe_name(const char *in, char *out, size_t len) {
    size_t k = 0;
    for (; *in && k + 1 < len; in++)
        out[k++] = (*in == '/' || *in == '=' || *in == ',' || *in == ':' || *in == ' ') ? '_' : *in;
    out[k] = '\0';
}

/* Timeline plot of one trace: one panel per strategy that ran. */
static void plot_trace(const options *o, const ccb_result *r, size_t n) {
    char files[4096] = "", labels[2048] = "";
    size_t panels = 0;
    for (size_t i = 0; i < n; i++) {
        if (r[i].skipped || isnan(r[i].median_ns) || !r[i].timeline_n)
            continue;
        char st[64], tr[64], rel[256], path[1024];
        safe_name(r[i].strategy, st, sizeof st);
        safe_name(r[i].trace, tr, sizeof tr);
        snprintf(rel, sizeof rel, "timeline/%s__%s.csv", tr, st);
        snprintf(path, sizeof path, "%s/%s", o->out, rel);
        if (ccb_write_timeline_csv(path, &r[i]) != 0)
            continue;
        snprintf(files + strlen(files), sizeof files - strlen(files), "%s%s", panels ? " " : "", path);
        snprintf(labels + strlen(labels), sizeof labels - strlen(labels), "%s%s", panels ? " " : "", st);
        panels++;
    }
    if (!panels || o->no_plots)
        return;
    char png[1024], title[256], tr[64];
    safe_name(r[0].trace, tr, sizeof tr);
    snprintf(png, sizeof png, "%s/timeline_%s.png", o->out, tr);
    snprintf(title, sizeof title,
             "%s: allocated vs reserved (simulated device for ccalloc; MiB; last step: empty-cache, live blocks kept)",
             r[0].trace);
    const char *args[] = {png, title, files, labels};
    int rc = ccb_gnuplot(o->script_dir, "timeline.gp", args, 4);
    if (rc == 1)
        fprintf(stderr, "ccbench: gnuplot not found: no plots (apt-get install gnuplot)\n");
    else if (rc != 0)
        fprintf(stderr, "ccbench: gnuplot failed on %s\n", png);
}

static void plot_ratios(const options *o, const ccb_result *r, size_t n, size_t ntraces, size_t nspecs) {
    char dat[1024];
    snprintf(dat, sizeof dat, "%s/ratios.dat", o->out);
    FILE *f = fopen(dat, "w");
    if (!f)
        return;
    /* columns: only strategies that know their reserved bytes on at least one trace */
    int keep[MAX_SPECS] = {0};
    size_t kept = 0;
    for (size_t s = 0; s < nspecs; s++) {
        for (size_t t = 0; t < ntraces; t++)
            if (!isnan(r[t * nspecs + s].ratio))
                keep[s] = 1;
        kept += keep[s];
    }
    fprintf(f, "# peak reserved / peak allocated; NaN = unknown or skipped\ntrace");
    for (size_t s = 0; s < nspecs; s++)
        if (keep[s])
            fprintf(f, " %s", r[s].strategy);
    fprintf(f, "\n");
    for (size_t t = 0; t < ntraces; t++) {
        fprintf(f, "%s", r[t * nspecs].trace);
        for (size_t s = 0; s < nspecs; s++)
            if (keep[s])
                fprintf(f, " %.4f", r[t * nspecs + s].ratio);
        fprintf(f, "\n");
    }
    fclose(f);
    (void)n;
    if (o->no_plots || !kept)
        return;
    char png[1024], cols[16];
    snprintf(png, sizeof png, "%s/ratios.png", o->out);
    snprintf(cols, sizeof cols, "%zu", kept + 1);
    const char *args[] = {dat, png, cols};
    if (ccb_gnuplot(o->script_dir, "ratios.gp", args, 3) != 0)
        fprintf(stderr, "ccbench: no ratio plot (gnuplot missing or failed)\n");
}

/* Replay every trace through every strategy; results in trace-major order. */
static int run_replays(options *o, ccb_trace *traces, size_t ntraces, ccb_result **out) {
    default_specs(o);
    ccb_result *r = calloc(ntraces * o->nspecs, sizeof *r);
    if (!r)
        return -1;
    ccb_replay_options ro = {o->device_bytes,    o->reps,        600, o->alloc_latency_ns, o->free_latency_ns,
                             o->driver_reps, o->ignore_releases};
    int failed = 0;
    for (size_t t = 0; t < ntraces; t++) {
        for (size_t s = 0; s < o->nspecs; s++) {
            ccb_result *x = &r[t * o->nspecs + s];
            uint64_t t0 = ccb_now_ns();
            if (ccb_replay(&traces[t], o->specs[s], &ro, x) != 0) {
                failed = 1;
                fprintf(stderr, "ccbench: %s on %s FAILED: %s\n", o->specs[s], traces[t].name, x->why);
            } else {
                fprintf(stderr, "  replay %-12s %-18s %s (%.1f s)\n", traces[t].name, o->specs[s],
                        x->skipped ? "skipped" : "done", (double)(ccb_now_ns() - t0) / 1e9);
            }
        }
    }
    *out = r;
    return failed ? -1 : 0;
}

static void write_replay_outputs(const options *o, ccb_trace *traces, size_t ntraces, ccb_result *r) {
    size_t n = ntraces * o->nspecs;
    char tl[1024];
    snprintf(tl, sizeof tl, "%s/timeline", o->out);
    mkdir_p(tl);
    FILE *f = open_out(o->out, "results.md");
    if (f) {
        ccb_write_results_md(f, r, n);
        fclose(f);
    }
    if ((f = open_out(o->out, "results.csv"))) {
        ccb_write_results_csv(f, r, n);
        fclose(f);
    }
    if ((f = open_out(o->out, "traces.md"))) {
        ccb_write_traces_md(f, traces, ntraces);
        fclose(f);
    }
    if ((f = open_out(o->out, "checkpoints.csv"))) {
        for (size_t t = 0; t < ntraces; t++)
            ccb_write_checkpoints_csv(f, &traces[t], &r[t * o->nspecs], o->nspecs, t == 0);
        fclose(f);
    }
    for (size_t t = 0; t < ntraces; t++)
        plot_trace(o, &r[t * o->nspecs], o->nspecs);
    plot_ratios(o, r, n, ntraces, o->nspecs);
}

/* What README.md says about replays, for `replay --out` and `--all` alike:
 * the traces with their lower bound and ideal arena, the strategies x traces
 * table, and each trace's phases and release events. */
static void write_replay_readme(const options *o, FILE *readme, const ccb_trace *traces, size_t nt,
                                const ccb_result *r) {
    fprintf(readme, "\n## Traces\n\n");
    ccb_write_traces_md(readme, traces, nt);
    fprintf(readme,
            "\nLower bound: the peak of live requested bytes. Ideal arena: one contiguous best-fit arena with "
            "immediate coalescing, sizes rounded to 512 B (computed by ccbench).\n");
    fprintf(readme, "\n## Strategies x traces\n\n");
    fprintf(readme,
            "Host strategies run on the SIMULATED device. Times per alloc/free op are bookkeeping alone; "
            "\"total ms with driver\" replays again on a device that charges %.1f us per device alloc and %.1f us "
            "per device free (the driver's cost; \"(real)\": a GPU strategy, whose times already include its "
            "driver). × lower bound and × ideal arena: peak reserved over each.\n\n",
            (double)o->alloc_latency_ns / 1e3, (double)o->free_latency_ns / 1e3);
    ccb_write_results_md(readme, r, nt * o->nspecs);
    int any = 0;
    for (size_t t = 0; t < nt; t++) {
        if (!traces[t].nmarks && !traces[t].releases)
            continue;
        if (!any++)
            fprintf(readme, "\n## Phases and release events\n\nReserved bytes at each mark of a trace and right "
                            "after each of its release events (every strategy applies its own release call).\n");
        fprintf(readme, "\n### %s\n\n", traces[t].name);
        ccb_write_checkpoints_md(readme, &traces[t], &r[t * o->nspecs], o->nspecs);
    }
    fprintf(readme, "\nPlots: ");
    for (size_t t = 0; t < nt; t++) {
        char tr[64];
        safe_name(traces[t].name, tr, sizeof tr);
        fprintf(readme, "[%s](timeline_%s.png) · ", tr, tr);
    }
    fprintf(readme, "[ratios](ratios.png). CSV: results.csv, checkpoints.csv, timeline/*.csv.\n");
}

static int cmd_replay(options *o) {
    if (!o->ntraces) {
        fprintf(stderr, "ccbench replay: name at least one trace (file or gen:NAME)\n");
        return 2;
    }
    ccb_trace *traces = calloc(o->ntraces, sizeof *traces);
    if (!traces)
        return 1;
    for (size_t i = 0; i < o->ntraces; i++) {
        if (load_trace(o->traces[i], o, &traces[i])) {
            for (size_t j = 0; j < i; j++) /* the ones already read */
                ccb_trace_free(&traces[j]);
            free(traces);
            return 2;
        }
    }
    ccb_result *r;
    int rc = run_replays(o, traces, o->ntraces, &r);
    ccb_write_results_md(stdout, r, o->ntraces * o->nspecs);
    if (o->out) {
        mkdir_p(o->out);
        write_replay_outputs(o, traces, o->ntraces, r);
        FILE *readme = open_out(o->out, "README.md");
        if (readme) {
            fprintf(readme, "# ccbench replay\n\n");
            ccb_write_machine_md(readme);
            fprintf(readme, "- command: `%s`\n- simulated device: %zu bytes of host memory\n", command_line,
                    o->device_bytes);
            write_replay_readme(o, readme, traces, o->ntraces, r);
            fclose(readme);
        }
    }
    for (size_t i = 0; i < o->ntraces * o->nspecs; i++)
        ccb_result_free(&r[i]);
    for (size_t i = 0; i < o->ntraces; i++)
        ccb_trace_free(&traces[i]);
    free(r);
    free(traces);
    return rc ? 1 : 0;
}

/* ---- the driver's real costs (GPU) ----------------------------------------------- */

static int cmd_driver(options *o) {
    static const size_t sizes[] = {(size_t)2 << 20, (size_t)20 << 20, (size_t)64 << 20, (size_t)256 << 20,
                                   (size_t)1 << 30};
    enum { N = sizeof sizes / sizeof sizes[0] };
    int reps = o->reps_given ? o->reps : 50;
    ccb_driver_row rows[N];
    char why[256] = "";
    for (size_t i = 0; i < N; i++) {
        int rc = ccb_driver_measure(sizes[i], reps, &rows[i], why, sizeof why);
        if (rc == 1) {
            printf("skipped: %s\n", why);
            return 0;
        }
        if (rc != 0) {
            fprintf(stderr, "ccbench driver: %s\n", why);
            return 1;
        }
    }
    FILE *csv = NULL, *md = stdout;
    if (o->out) {
        mkdir_p(o->out);
        csv = open_out(o->out, "driver.csv");
        md = open_out(o->out, "driver.md");
        if (!md)
            md = stdout;
    }
    fprintf(md, "cudaMalloc / cudaFree timed alone, device idle, %d pairs per size; GPU: %s\n\n", reps,
            ccb_gpu_unavailable_reason());
    fprintf(md, "| size | cudaMalloc median µs | p99 | cudaFree median µs | p99 | pair median µs |\n"
                "|--:|--:|--:|--:|--:|--:|\n");
    if (csv)
        fprintf(csv, "size,reps,alloc_median_us,alloc_p99_us,free_median_us,free_p99_us\n");
    for (size_t i = 0; i < N; i++) {
        char b[32];
        ccb_format_bytes(rows[i].size, b, sizeof b);
        fprintf(md, "| %s | %.1f | %.1f | %.1f | %.1f | %.1f |\n", b, rows[i].alloc_median_us, rows[i].alloc_p99_us,
                rows[i].free_median_us, rows[i].free_p99_us, rows[i].alloc_median_us + rows[i].free_median_us);
        if (csv)
            fprintf(csv, "%zu,%d,%.3f,%.3f,%.3f,%.3f\n", rows[i].size, rows[i].reps, rows[i].alloc_median_us,
                    rows[i].alloc_p99_us, rows[i].free_median_us, rows[i].free_p99_us);
    }
    if (csv)
        fclose(csv);
    if (md != stdout)
        fclose(md);
    return 0;
}

/* ---- micro --------------------------------------------------------------------- */

static int run_micro(options *o, FILE *md) {
    const char *specs[MAX_SPECS];
    size_t nspecs = 0;
    if (o->nspecs) {
        for (size_t i = 0; i < o->nspecs; i++)
            specs[nspecs++] = o->specs[i];
    } else {
        const char *d[] = {"ccalloc-growth", "malloc", "ccalloc-cuda", "cuda-async-tmax", "cub"};
        for (size_t i = 0; i < sizeof d / sizeof *d; i++)
            specs[nspecs++] = d[i];
    }
    if (!o->nlives) {
        o->lives[0] = 10;
        o->lives[1] = 1000;
        o->lives[2] = 10000;
        o->nlives = 3;
    }
    ccb_micro_row *rows;
    size_t nrows;
    int rc = ccb_micro(specs, nspecs, o->lives, o->nlives, o->pairs, &rows, &nrows);
    ccb_micro_write_md(stdout, rows, nrows, ccb_timer_overhead_ns());
    if (md)
        ccb_micro_write_md(md, rows, nrows, ccb_timer_overhead_ns());
    if (o->out) {
        mkdir_p(o->out);
        FILE *f = open_out(o->out, "micro.csv");
        if (f) {
            ccb_micro_write_csv(f, rows, nrows);
            fclose(f);
        }
        if ((f = open_out(o->out, "micro.md"))) {
            ccb_micro_write_md(f, rows, nrows, ccb_timer_overhead_ns());
            fclose(f);
        }
    }
    free(rows);
    return rc ? 1 : 0;
}

/* ---- the standard suite ---------------------------------------------------------- */

static int has_suffix(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static int cmd_all(options *o) {
    if (!o->out)
        o->out = "ccbench-results";
    if (mkdir_p(o->out)) {
        fprintf(stderr, "ccbench: cannot create %s\n", o->out);
        return 2;
    }
    if (o->quick) {
        o->scale = 0.02;
        o->reps = 1;
        if (!o->pairs || o->pairs == 200000)
            o->pairs = 2000;
    }
    uint64_t t0 = ccb_now_ns();
    /* traces: every generator, then the committed traces in bench/traces */
    ccb_trace traces[MAX_TRACES];
    size_t nt = 0;
    for (size_t i = 0; i < ccb_generator_count; i++) {
        char name[80];
        snprintf(name, sizeof name, "gen:%s", ccb_generators[i].name);
        if (load_trace(name, o, &traces[nt]) == 0)
            nt++;
    }
    char tdir[1024];
    snprintf(tdir, sizeof tdir, "%s/../traces", ccb_default_script_dir());
    DIR *d = opendir(tdir); /* real traces are replayed by --quick too, at their size */
    if (d) {
        struct dirent *e;
        char *names[MAX_TRACES];
        size_t nn = 0;
        while ((e = readdir(d)) && nn < MAX_TRACES)
            if (has_suffix(e->d_name, ".csv") || has_suffix(e->d_name, ".csv.gz"))
                names[nn++] = strdup(e->d_name);
        closedir(d);
        for (size_t i = 0; i < nn; i++) { /* stable order */
            for (size_t j = i + 1; j < nn; j++)
                if (strcmp(names[j], names[i]) < 0) {
                    char *x = names[i];
                    names[i] = names[j];
                    names[j] = x;
                }
        }
        for (size_t i = 0; i < nn; i++) {
            char path[2048];
            snprintf(path, sizeof path, "%s/%s", tdir, names[i]);
            if (nt < MAX_TRACES && load_trace(path, o, &traces[nt]) == 0)
                nt++;
            free(names[i]);
        }
    }
    FILE *readme = open_out(o->out, "README.md");
    if (!readme)
        return 2;
    fprintf(readme, "# ccbench results%s\n\n", o->quick ? " (quick)" : "");
    ccb_write_machine_md(readme);
    fprintf(readme,
            "- command: `%s`\n- simulated device: %zu bytes of host memory (ccalloc strategies); "
            "all ccalloc figures here are on the SIMULATED device\n\n",
            command_line, o->device_bytes);
    fprintf(readme, "## Cached-path micro-benchmark (simulated device)\n\n");
    fflush(readme);
    int rc = 0;
    size_t saved_nspecs = o->nspecs;
    rc |= run_micro(o, readme);
    o->nspecs = saved_nspecs;
    ccb_result *r;
    rc |= run_replays(o, traces, nt, &r);
    write_replay_outputs(o, traces, nt, r);
    write_replay_readme(o, readme, traces, nt, r);
    if (!o->quick) { /* model switching through ccrun (skipped when ccrun is not built) */
        fprintf(readme, "\n## Model switching: in-process release vs a process per model\n\n");
        fflush(readme);
        char *sargv[] = {"switch", "--out", (char *)o->out, NULL};
        rc |= ccb_switch_main(3, sargv) != 0;
        char path[1024];
        snprintf(path, sizeof path, "%s/switch.md", o->out);
        FILE *sw = fopen(path, "r");
        if (sw) {
            char line[1024];
            while (fgets(line, sizeof line, sw))
                fputs(line, readme);
            fclose(sw);
        } else {
            fprintf(readme, "skipped: ccrun not found (configure with -DCCA_BUILD_RUNTIME=ON).\n");
        }
    }
    fprintf(readme, "\nWall time of the suite: %.1f s.\n", (double)(ccb_now_ns() - t0) / 1e9);
    fclose(readme);
    for (size_t i = 0; i < nt * o->nspecs; i++)
        ccb_result_free(&r[i]);
    free(r);
    for (size_t i = 0; i < nt; i++)
        ccb_trace_free(&traces[i]);
    fprintf(stderr, "ccbench: wrote %s/README.md (%.1f s)\n", o->out, (double)(ccb_now_ns() - t0) / 1e9);
    return rc ? 1 : 0;
}

static void silence(void *user, const char *line) {
    (void)user;
    (void)line; /* OOM lines are counted in the results instead */
}

int main(int argc, char **argv) {
    size_t k = 0;
    for (int i = 0; i < argc && k + 2 < sizeof command_line; i++)
        k += (size_t)snprintf(command_line + k, sizeof command_line - k, "%s%s", i ? " " : "", argv[i]);
    cca_set_log_callback(silence, NULL);
    /* glibc: no heap trimming and a fixed 32 MiB mmap threshold, so that the
     * malloc floor (and the simulated device's aligned_alloc) measure
     * bookkeeping rather than mmap/munmap/brk system calls. */
    mallopt(M_TRIM_THRESHOLD, INT_MAX);
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    options o = {.seed = 1,
                 .scale = 1.0,
                 .reps = 3,
                 .device_bytes = (size_t)8 << 30,
                 .alloc_latency_ns = CCB_DEFAULT_ALLOC_LATENCY_NS,
                 .free_latency_ns = CCB_DEFAULT_FREE_LATENCY_NS,
                 .pairs = 200000};
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--list")) {
        ccb_strategy_list(stdout);
        for (size_t i = 0; i < ccb_generator_count; i++)
            printf("    gen:%-14s %s\n", ccb_generators[i].name, ccb_generators[i].doc);
        return 0;
    }
    if (!strcmp(argv[1], "switch"))
        return ccb_switch_main(argc - 1, argv + 1);
    int all = 0;
    for (int i = 1; i < argc; i++)
        all |= !strcmp(argv[i], "--all");
    const char *cmd = all ? "--all" : argv[1];
    if (parse_options(argc, argv, all ? 1 : 2, &o))
        return 2;
    if (o.quick && !o.driver_reps)
        o.driver_reps = 1;
    if (all)
        return cmd_all(&o);
    if (!strcmp(cmd, "gen"))
        return cmd_gen(&o);
    if (!strcmp(cmd, "info"))
        return cmd_info(&o);
    if (!strcmp(cmd, "driver"))
        return cmd_driver(&o);
    if (!strcmp(cmd, "replay"))
        return cmd_replay(&o);
    if (!strcmp(cmd, "micro"))
        return run_micro(&o, NULL);
    fprintf(stderr, "ccbench: unknown command '%s' (ccbench --help)\n", cmd);
    return 2;
}
