/*
 * cli.c — ccbench's command line: one table of options drives the parser
 * (getopt_long) and the --help text, and each value is checked when it is
 * read.
 *
 * Conventions (the same as ccrun's, runtime/ccrun/options.c):
 *   - every option has a long name; -s, -o and -h are short forms;
 *   - a value is given as "--opt value" or "--opt=value" ("-s X", "-sX");
 *   - options and operands mix in any order; "--" ends the options;
 *   - --help (-h) anywhere among the options prints the usage and exits 0,
 *     whatever else is there, bad values and unknown options included, and
 *     before a command too (a first getopt pass looks for it alone:
 *     ccb_help_wanted, ccb_options_help_wanted for main.c); a "--help"
 *     that is an option's value (-s --help) or follows "--" is not one;
 *   - --all anywhere among the options runs the suite, whatever command is
 *     named before it (ccb_options_all_wanted, the same pass for main.c);
 *     an "--all" that is an option's value or follows "--" is not one;
 *   - a bad value, a missing value, a value given to a flag or an unknown
 *     option is one line on stderr, "ccbench: MESSAGE (see ccbench --help)",
 *     and exit status 2; nothing has run by then.
 * Values are strict: counts and seeds are plain decimal (no sign, no blanks,
 * no trailing text, no overflow; strtoull alone takes "-1" and "1e9"), the
 * scale is a decimal number (ccai_decimal.h: strtod alone takes " 1", "+1"
 * and "0x10"), lists split at every comma (an empty item is an error), sizes
 * go through cca_parse_size (K/M/G/T suffixes), durations take ns/us/ms.
 * switch (switch.c) has its own table, parsed the same way.
 *
 * Also here: what a TRACE operand means (a file, or gen:NAME generated with
 * --seed and --scale), since every command that takes one reads it so, and
 * the names of the traces of one run: two of one name (a/t.csv and b/t.csv,
 * or the same trace twice) would write the same timeline files, so the
 * later one is renamed t-2 (t-3, ...), its name cut to make room between
 * UTF-8 characters, and the rename is said.
 */
#include "ccbench.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ccai_decimal.h" /* common/: the grammars of --scale and of counts */
#include "ccai_escape.h" /* common/: text from outside, escaped for a person */
#include "ccai_utf8.h"   /* common/: ccai_utf8_head, a name cut between characters */
#include "ccalloc.h"

enum {
    O_STRATEGY = 's',
    O_OUTPUT = 'o',
    O_HELP = 'h',
    O_OUT = 256, /* long-only options: values above any character */
    O_SEED,
    O_SCALE,
    O_REPS,
    O_DEVICE_BYTES,
    O_UPSTREAM_LATENCY,
    O_VM_LATENCY,
    O_VM_CALL_LATENCY,
    O_VM_GRANULARITY,
    O_VM_BACKING,
    O_DRIVER_REPS,
    O_ITERATIONS,
    O_NO_RELEASE_EVENTS,
    O_PAIRS,
    O_STREAMS,
    O_LIVE,
    O_SCRIPTS,
    O_NO_PLOTS,
    O_QUICK,
    O_ALL,
    O_TRACES,
};

typedef struct cli_option {
    const char *name; /* long name                            */
    int id;           /* O_*: the short name when it has one   */
    int has_arg;      /* no_argument or required_argument      */
    const char *arg;  /* the value's name in --help            */
    const char *doc;  /* --help text; '\n' starts another line */
} cli_option;

/* The --help order. */
static const cli_option options[] = {
    {"strategy", O_STRATEGY, required_argument, "S",
     "preset name, BASE, or BASE=CONFIG (repeatable; default: the host suite\n"
     "plus the GPU suite, GPU ones report \"skipped: no GPU\" without one)"},
    {"out", O_OUT, required_argument, "DIR",
     "write README.md, results/micro md+csv, timelines and plots into DIR\n"
     "(replay, micro, driver, --all; not gen or info: bad usage, exit 2)"},
    {"seed", O_SEED, required_argument, "N", "generator seed (default 1)"},
    {"scale", O_SCALE, required_argument, "X",
     "generator event-count scale, > 0 and at most 100 (default 1; a generated\n"
     "trace is held in memory: scale 100 is up to ~7.4M events, ~120 MB); below a\n"
     "generator's least events it gives that least (uniform, lognormal: 50 allocs;\n"
     "mlp: 10 requests; models: 4 per model; adversarial: 4 steps)"},
    {"reps", O_REPS, required_argument, "N", "timed passes per strategy x trace, 1..1000 (default 3; driver: 50)"},
    {"device-bytes", O_DEVICE_BYTES, required_argument, "B",
     "simulated device capacity, > 0, K/M/G/T suffixes (default 8G):\n"
     "the simulated device's strategies need one host page (4K on x86-64)\n"
     "and fail below it; the malloc floor takes any size"},
    {"upstream-latency", O_UPSTREAM_LATENCY, required_argument, "A[,F]",
     "the driver's cost per device alloc [and free] in the \"with driver\"\n"
     "passes: a duration in ns, us or ms (no unit: us), at most 1 s (default\n"
     "35us,35us; 0: none. The pass is left out only when the two latencies\n"
     "below are 0 too)"},
    {"vm-latency", O_VM_LATENCY, required_argument, "M[,U]",
     "and per physical allocation mapped [and unmapped] by a virtual-memory\n"
     "map [unmap] (expandable segments: a map whatever its size, or with\n"
     "--vm-backing pages a page), on top of the call's own: as --upstream-latency\n"
     "(default 36us,30us: measured on H100s in proportion to the default pair;\n"
     "`ccbench driver` measures it)"},
    {"vm-call-latency", O_VM_CALL_LATENCY, required_argument, "C[,D]",
     "a virtual-memory map's [and unmap's] own cost per call, in place of the\n"
     "device alloc's [free's]: as --upstream-latency (default 15us,4us: the\n"
     "H100s' one-allocation times less their per-allocation slopes, in\n"
     "proportion to the default pair; 0: as the device alloc's and free's)"},
    {"vm-granularity", O_VM_GRANULARITY, required_argument, "B",
     "the page of virtual-memory maps (expandable segments): the simulated\n"
     "device's granularity, and the CUDA upstream's for the ccalloc-cuda\n"
     "strategies and `ccbench driver`'s virtual-memory tables; a power of two\n"
     "from 4K to 1G, K/M/G suffixes (default: 2M on the simulated device, the\n"
     "driver's minimum on a GPU)"},
    {"vm-backing", O_VM_BACKING, required_argument, "pages|whole-maps",
     "how the memory behind each virtual-memory map is kept, on the simulated\n"
     "device and on the CUDA upstream of the ccalloc-cuda strategies:\n"
     "whole-maps (default: one physical allocation per map, given back whole)\n"
     "or pages (one physical allocation per page, any run of pages given\n"
     "back); driver: only that virtual-memory table (default: both)"},
    {"driver-reps", O_DRIVER_REPS, required_argument, "N",
     "timed passes with the driver's cost, 1..1000 (default: --reps; 1 with --quick)"},
    {"iterations", O_ITERATIONS, required_argument, "N",
     "replay: each trace N times back to back in one strategy, 1..100 (default\n"
     "1); the blocks it leaves live are freed between iterations, nothing is\n"
     "released; the first iteration and the later ones reported apart\n"
     "(iterations.md/.csv)"},
    {"no-release-events", O_NO_RELEASE_EVENTS, no_argument, NULL,
     "replay as if the program never emptied or trimmed its cache (the trace's\n"
     "empty_cache, trim and domain_release events are reported at their checkpoints,\n"
     "not applied)"},
    {"pairs", O_PAIRS, required_argument, "N", "micro: timed pairs per cell, 1..2^32 (default 200000)"},
    {"streams", O_STREAMS, required_argument, "N",
     "micro: the pairs (and their warm-up) take streams 0..N-1 in turn, 1..255\n"
     "(default 1): what a program that works on N streams pays per pair"},
    {"live", O_LIVE, required_argument, "N,N,...",
     "micro: live block counts, at most 8 in 1..1000000 (default 10,1000,10000,100000;\n"
     "10,1000 with --quick); every count runs packed and with holes. These three\n"
     "are micro's (--all's too): another command refuses them, exit 2"},
    {"scripts", O_SCRIPTS, required_argument, "DIR", "gnuplot scripts (default: bench/scripts of the source tree)"},
    {"no-plots", O_NO_PLOTS, no_argument, NULL, "do not run gnuplot"},
    {"quick", O_QUICK, no_argument, NULL, "--all at a tiny scale (tests, CI)"},
    {"traces", O_TRACES, required_argument, "DIR",
     "--all without TRACE operands: the directory whose *.csv and *.csv.gz it\n"
     "replays after the generators (default: bench/traces of the source tree)"},
    {"all", O_ALL, no_argument, NULL, "the standard suite (as `ccbench --all`)"},
    {"output", O_OUTPUT, required_argument, "FILE",
     "gen: output file (default stdout); any other command: bad usage, exit 2"},
    {"help", O_HELP, no_argument, NULL, "this text"},
};
enum { NOPTIONS = sizeof options / sizeof options[0] };

void ccb_usage(FILE *f) {
    fprintf(f, "ccbench — allocation strategies compared on the same traces (ccalloc benchmark harness)\n"
               "\n"
               "usage:\n"
               "  ccbench --all [--out DIR] [--quick] [--traces DIR | TRACE...]\n"
               "                                        the standard suite: micro, every generator and every\n"
               "                                        trace in bench/traces (--traces DIR) through every\n"
               "                                        strategy, plots; minutes (on 2 cores most of them the\n"
               "                                        malloc floor's cells with 100000 blocks live); a trace of\n"
               "                                        those it cannot run is said with why, the rest run, exit\n"
               "                                        1. TRACEs given: the suite on them instead (one that does\n"
               "                                        not read stops it before anything runs, exit 2)\n"
               "  ccbench gen NAME [-o FILE] [--seed N] [--scale X]   write a generated trace (stdout by default)\n"
               "  ccbench info TRACE...                 events, peaks and streams of traces\n"
               "  ccbench replay [-s STRATEGY]... [--out DIR] TRACE...   replay traces through strategies\n"
               "  ccbench micro [-s STRATEGY]... [--live N,N,..] [--pairs N] [--streams N] [--out DIR]\n"
               "                                        cost of a cached alloc+free pair with N blocks live\n"
               "  ccbench switch [--help]               model switching: in-process release vs a process per model\n"
               "  ccbench sleep [--help]                a domain's sleep and wake against the plain copy of its bytes\n"
               "  ccbench driver [--reps N] [--vm-backing pages|whole-maps] [--out DIR]\n"
               "                                        the GPU driver's real cudaMalloc/cudaFree cost by size\n"
               "                                        (the figures the simulated device's latencies model),\n"
               "                                        and of its virtual-memory maps, over pages and whole maps\n"
               "  ccbench --list                        strategies and generators\n"
               "\n"
               "TRACE: a CSV file (seq,op,id,size,stream,domain,name; written by CCALLOC_TRACE=path or\n"
               "       `ccbench gen`; v1 and v2 files too) or gen:NAME for a generated trace. A trace's\n"
               "       memory domains are replayed as domains by the ccalloc strategies (domains:0 in a\n"
               "       ccalloc config, or the ccalloc-shared preset: one pool, as without domains).\n"
               "\n"
               "options (\"--opt value\" or \"--opt=value\"; any order, operands too):\n");
    for (size_t i = 0; i < NOPTIONS; i++) {
        const cli_option *c = &options[i];
        char left[64];
        int n = c->id < 256 ? snprintf(left, sizeof left, "  -%c, --%s", c->id, c->name)
                            : snprintf(left, sizeof left, "  --%s", c->name);
        if (c->arg)
            snprintf(left + n, sizeof left - (size_t)n, " %s", c->arg);
        fprintf(f, "%-21s  ", left); /* docs start at column 24, or after a long name */
        for (const char *d = c->doc; *d; d++) {
            fputc(*d, f);
            if (*d == '\n')
                fprintf(f, "%23s", "");
        }
        fputc('\n', f);
    }
    fprintf(f, "  (scripts: %s)\n\n", ccb_default_script_dir());
    fprintf(f, "strategies:\n");
    ccb_strategy_list(f);
    fprintf(f, "generators (gen:NAME):\n");
    for (size_t i = 0; i < ccb_generator_count; i++)
        fprintf(f, "    %-18s %s\n", ccb_generators[i].name, ccb_generators[i].doc);
    fprintf(f, "\nResults on the simulated device (host memory) are labelled simulated; GPU strategies need a GPU.\n"
               "Exit status: 0 ok; 1 a run failed (--all: a trace left out too), or an output (a file, or\n"
               "standard output: `> /dev/full`) could not be written whole, said on stderr naming it (the rest\n"
               "still runs and writes its own files, --all without its README.md too; an --out that cannot be\n"
               "made stops the command before anything runs); an output file that is a TRACE read, the\n"
               "CCALLOC_TRACE file or where standard output or error goes is not written, likewise; 2 bad\n"
               "usage, or a CCALLOC_TRACE that names a TRACE of replay or --all (refused before anything runs).\n");
}

/* One argument as a POSIX shell word: as it is when every byte is one a
 * shell leaves alone, else in single quotes, each ' written '\'' (close,
 * an escaped quote, reopen). Returns the bytes written, or would write when
 * out is NULL. */
static size_t shell_word(const char *arg, char *out) {
    static const char plain[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-";
    size_t n = strlen(arg);
    bool quote = n == 0 || strspn(arg, plain) != n;
    size_t k = 0;
    if (quote && out)
        out[k] = '\'';
    k += quote;
    for (size_t i = 0; i < n; i++) {
        if (arg[i] == '\'' && quote) {
            if (out)
                memcpy(out + k, "'\\''", 4);
            k += 4;
        } else {
            if (out)
                out[k] = arg[i];
            k++;
        }
    }
    if (quote && out)
        out[k] = '\'';
    return k + quote;
}

char *ccb_command_line(int argc, char **argv) {
    size_t len = 1; /* the NUL */
    for (int i = 0; i < argc; i++) {
        size_t w = shell_word(argv[i], NULL) + (i > 0);
        if (w > SIZE_MAX - len)
            return NULL;
        len += w;
    }
    char *line = malloc(len), *at = line;
    if (!line)
        return NULL;
    for (int i = 0; i < argc; i++) {
        if (i)
            *at++ = ' ';
        at += shell_word(argv[i], at);
    }
    *at = '\0';
    return line;
}

void ccb_options_init(ccb_options *o, const char *command_line) {
    memset(o, 0, sizeof *o);
    o->seed = 1;
    o->scale = 1.0;
    o->reps = 3;
    o->device_bytes = (size_t)8 << 30;
    o->alloc_latency_ns = CCB_DEFAULT_ALLOC_LATENCY_NS;
    o->free_latency_ns = CCB_DEFAULT_FREE_LATENCY_NS;
    o->map_granule_ns = CCB_DEFAULT_MAP_GRANULE_NS;
    o->unmap_granule_ns = CCB_DEFAULT_UNMAP_GRANULE_NS;
    o->map_call_ns = CCB_DEFAULT_MAP_CALL_NS;
    o->unmap_call_ns = CCB_DEFAULT_UNMAP_CALL_NS;
    o->pairs = 200000;
    o->streams = 1;
    o->iterations = 1;
    o->command_line = command_line ? command_line : "";
}

/* ---- values ---------------------------------------------------------------------- */

int ccb_usage_error(const char *command, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ccbench%s%s: ", command ? " " : "", command ? command : "");
    ccai_vfprintf_escaped(stderr, fmt, ap); /* values from the command line, escaped */
    fprintf(stderr, " (see ccbench%s%s --help)\n", command ? " " : "", command ? command : "");
    va_end(ap);
    return 2;
}
#define usage_error(...) ccb_usage_error(NULL, __VA_ARGS__)

/* Whether getopt meets option id or id2 as an option: not as another
 * option's value, not after "--". Silent on what it does not know. */
static int getopt_finds(int argc, char **argv, const char *shortopts, const struct option *longopts, int id, int id2) {
    opterr = 0;
    optind = 0; /* GNU: start afresh; the parse proper starts afresh again */
    int c;
    while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1)
        if (c == id || c == id2)
            return 1;
    return 0;
}

int ccb_help_wanted(int argc, char **argv, const char *shortopts, const struct option *longopts, int help_id) {
    return getopt_finds(argc, argv, shortopts, longopts, 'h', help_id);
}

int ccb_getopt_error(const char *command, int c, char **argv) {
    if (c == ':')
        return ccb_usage_error(command, "option '%s' needs a value", argv[optind - 1]);
    if (optopt >= 256)
        return ccb_usage_error(command, "option '%s' takes no value", argv[optind - 1]);
    if (optopt)
        return ccb_usage_error(command, "unknown option '-%c'", optopt);
    return ccb_usage_error(command, "unknown option '%s'", argv[optind - 1]);
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

/* "A" or "A,F": the same cost for both, or alloc and free costs. */
static int parse_latencies(const char *s, uint64_t *alloc_ns, uint64_t *free_ns) {
    char buf[64];
    if (strlen(s) >= sizeof buf)
        return -1;
    snprintf(buf, sizeof buf, "%s", s);
    char *comma = strchr(buf, ',');
    if (comma)
        *comma = '\0';
    return parse_duration_ns(buf, alloc_ns) || parse_duration_ns(comma ? comma + 1 : buf, free_ns) ? -1 : 0;
}

/* A decimal number (ccai_decimal.h: no sign, blanks, hex or inf) in
 * (0, CCB_GEN_MAX_SCALE]. */
static int parse_scale(const char *s, double *out) {
    if (!ccai_decimal_number(s))
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end || errno == ERANGE || !(v > 0) || !isfinite(v) || v > CCB_GEN_MAX_SCALE)
        return -1;
    *out = v;
    return 0;
}

/* "N,N,...": 1..CCB_MAX_LIVES counts in 1..1000000. Split at every comma
 * (strtok would merge "10,,1000" into two counts and drop a trailing one's
 * empty field): an empty count is an error, as in a trace's fields. */
static int parse_lives(const char *s, size_t *lives, size_t *n) {
    char buf[256];
    if (strlen(s) >= sizeof buf)
        return -1;
    snprintf(buf, sizeof buf, "%s", s);
    size_t k = 0;
    unsigned long long v;
    for (char *t = buf, *comma; t; t = comma ? comma + 1 : NULL) {
        comma = strchr(t, ',');
        if (comma)
            *comma = '\0';
        if (k == CCB_MAX_LIVES || ccai_decimal_uint(t, 1, 1000000, &v))
            return -1;
        lives[k++] = (size_t)v;
    }
    *n = k;
    return 0;
}

/* ---- the parser ------------------------------------------------------------------- */

/* One option with its value (NULL for a flag); 0 or an exit status. */
static int take(ccb_options *o, int id, const char *v) {
    unsigned long long u;
    switch (id) {
    case O_STRATEGY: {
        const ccb_strategy_ops *ops;
        const char *config;
        char label[128];
        if (o->nspecs == CCB_MAX_SPECS)
            return usage_error("more than %d strategies", CCB_MAX_SPECS);
        char why[CCB_WHY_MAX];
        if (ccb_strategy_resolve(v, &ops, &config, label, sizeof label) != 0)
            return usage_error("unknown strategy '%s': ccbench --list names them", v);
        if (ops->check && ops->check(config, why, sizeof why) != 0) /* what needs the device: at open */
            return usage_error("strategy '%s': %s", v, why);
        o->specs[o->nspecs++] = v;
        return 0;
    }
    case O_OUT: o->out = v; return 0;
    case O_OUTPUT: o->output_file = v; return 0;
    case O_SCRIPTS: o->script_dir = v; return 0;
    case O_TRACES: o->traces_dir = v; return 0;
    case O_SEED:
        if (ccai_decimal_uint(v, 0, ULLONG_MAX, &u))
            return usage_error("--seed '%s' is not a number in 0..2^64-1", v);
        o->seed = u;
        return 0;
    case O_SCALE:
        if (parse_scale(v, &o->scale))
            return usage_error("--scale '%s' is not a number > 0 and <= %g", v, CCB_GEN_MAX_SCALE);
        return 0;
    case O_REPS:
        if (ccai_decimal_uint(v, 1, 1000, &u))
            return usage_error("--reps '%s' is not a count in 1..1000", v);
        o->reps = (int)u;
        o->reps_given = 1;
        return 0;
    case O_DEVICE_BYTES:
        if (cca_parse_size(v, &o->device_bytes) != CCA_OK || !o->device_bytes)
            return usage_error("--device-bytes '%s' is not a size > 0 (K/M/G/T suffixes)", v);
        return 0;
    case O_UPSTREAM_LATENCY:
        if (parse_latencies(v, &o->alloc_latency_ns, &o->free_latency_ns))
            return usage_error("--upstream-latency '%s' is not a duration (ns, us, ms; at most 1 s) or two "
                               "separated by a comma",
                               v);
        return 0;
    case O_VM_LATENCY:
        if (parse_latencies(v, &o->map_granule_ns, &o->unmap_granule_ns))
            return usage_error("--vm-latency '%s' is not a duration (ns, us, ms; at most 1 s) or two separated by "
                               "a comma",
                               v);
        return 0;
    case O_VM_CALL_LATENCY:
        if (parse_latencies(v, &o->map_call_ns, &o->unmap_call_ns))
            return usage_error("--vm-call-latency '%s' is not a duration (ns, us, ms; at most 1 s) or two "
                               "separated by a comma",
                               v);
        return 0;
    case O_VM_GRANULARITY:
        if (cca_parse_size_exact(v, &o->vm_granularity) != CCA_OK || o->vm_granularity < 4096 ||
            o->vm_granularity > ((size_t)1 << 30) || (o->vm_granularity & (o->vm_granularity - 1)))
            return usage_error("--vm-granularity '%s' is not a power of two from 4K to 1G", v);
        return 0;
    case O_VM_BACKING:
        if (strcmp(v, "pages") == 0)
            o->vm_backing = CCA_VM_PAGES;
        else if (strcmp(v, "whole-maps") == 0)
            o->vm_backing = CCA_VM_WHOLE_MAPS;
        else
            return usage_error("--vm-backing '%s' is neither pages nor whole-maps", v);
        o->vm_backing_given = 1;
        return 0;
    case O_DRIVER_REPS:
        if (ccai_decimal_uint(v, 1, 1000, &u))
            return usage_error("--driver-reps '%s' is not a count in 1..1000", v);
        o->driver_reps = (int)u;
        return 0;
    case O_ITERATIONS:
        if (ccai_decimal_uint(v, 1, CCB_MAX_ITERATIONS, &u))
            return usage_error("--iterations '%s' is not a count in 1..%d", v, CCB_MAX_ITERATIONS);
        o->iterations = (int)u;
        return 0;
    case O_PAIRS:
        if (ccai_decimal_uint(v, 1, 1ull << 32, &u))
            return usage_error("--pairs '%s' is not a count in 1..2^32", v);
        o->pairs = (size_t)u;
        o->pairs_given = 1;
        return 0;
    case O_STREAMS:
        if (ccai_decimal_uint(v, 1, CCB_MICRO_MAX_STREAMS, &u))
            return usage_error("--streams '%s' is not a count in 1..%d", v, CCB_MICRO_MAX_STREAMS);
        o->streams = (unsigned)u;
        return 0;
    case O_LIVE:
        if (parse_lives(v, o->lives, &o->nlives))
            return usage_error("--live '%s' is not a list of at most %d counts in 1..1000000 separated by commas", v,
                               CCB_MAX_LIVES);
        return 0;
    case O_NO_RELEASE_EVENTS: o->ignore_releases = 1; return 0;
    case O_NO_PLOTS: o->no_plots = 1; return 0;
    case O_QUICK: o->quick = 1; return 0;
    case O_ALL: o->all = 1; return 0;
    }
    return usage_error("internal: option %d has no handler", id);
}

/* getopt_long's tables from options[]. */
static void getopt_tables(struct option longopts[NOPTIONS + 1], char shortopts[3 * NOPTIONS + 2]) {
    size_t k = 0;
    shortopts[k++] = ':'; /* a missing value is reported as such */
    for (size_t i = 0; i < NOPTIONS; i++) {
        longopts[i] = (struct option){options[i].name, options[i].has_arg, NULL, options[i].id};
        if (options[i].id < 256) {
            shortopts[k++] = (char)options[i].id;
            if (options[i].has_arg == required_argument)
                shortopts[k++] = ':';
        }
    }
    shortopts[k] = '\0';
    longopts[NOPTIONS] = (struct option){0, 0, 0, 0};
}

/* ccbench's own options (the table above) looked for by getopt_finds. */
static int options_find(int argc, char **argv, int id, int id2) {
    struct option longopts[NOPTIONS + 1];
    char shortopts[3 * NOPTIONS + 2];
    getopt_tables(longopts, shortopts);
    return getopt_finds(argc, argv, shortopts, longopts, id, id2);
}

int ccb_no_operands(const ccb_options *o, const char *command) {
    return o->nargs ? ccb_usage_error(command, "unexpected operand '%s'", o->args[0]) : 0;
}

int ccb_options_help_wanted(int argc, char **argv) {
    return options_find(argc, argv, 'h', O_HELP);
}

int ccb_options_all_wanted(int argc, char **argv) {
    return options_find(argc, argv, O_ALL, O_ALL);
}

int ccb_options_parse(ccb_options *o, int argc, char **argv) {
    struct option longopts[NOPTIONS + 1];
    char shortopts[3 * NOPTIONS + 2];
    getopt_tables(longopts, shortopts);
    if (ccb_help_wanted(argc, argv, shortopts, longopts, O_HELP)) {
        ccb_usage(stdout);
        return 1;
    }
    opterr = 0;
    optind = 0; /* GNU: start afresh (a process may parse more than once) */
    int c;
    while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
        if (c == ':' || c == '?')
            return ccb_getopt_error(NULL, c, argv);
        int rc = take(o, c, optarg);
        if (rc)
            return rc;
        if (!o->micro_option && (c == O_PAIRS || c == O_STREAMS || c == O_LIVE))
            o->micro_option = c == O_PAIRS ? "--pairs" : c == O_STREAMS ? "--streams" : "--live";
    }
    for (int i = optind; i < argc; i++) {
        if (o->nargs == CCB_MAX_TRACES)
            return usage_error("more than %d traces", CCB_MAX_TRACES);
        o->args[o->nargs++] = argv[i];
    }
    if (o->quick && !o->driver_reps)
        o->driver_reps = 1;
    return 0;
}

/* ---- TRACE operands --------------------------------------------------------------- */

int ccb_load_trace(const char *arg, const ccb_options *o, ccb_trace *t) {
    char err[256];
    if (!strncmp(arg, "gen:", 4)) {
        if (!ccb_generator_find(arg + 4)) {
            ccai_fprintf_escaped(stderr, "ccbench: unknown generator '%s' (ccbench --list)\n", arg + 4);
            return -1;
        }
        ccb_gen_params p = {o->seed, o->scale};
        return ccb_generate(arg + 4, &p, t) == 0 ? 0 : -1;
    }
    if (ccb_trace_load(t, arg, err, sizeof err) != 0) {
        ccai_fprintf_escaped(stderr, "ccbench: %s: %s\n", arg, err); /* a path, a field of the file */
        return -1;
    }
    return 0;
}

/* 1 if trace i's file name is the file name of one of the traces before it. */
static int name_taken(const ccb_trace *t, size_t i) {
    char a[sizeof t->name], b[sizeof t->name];
    ccb_file_name(t[i].name, a, sizeof a);
    for (size_t j = 0; j < i; j++) {
        ccb_file_name(t[j].name, b, sizeof b);
        if (!strcmp(a, b))
            return 1;
    }
    return 0;
}

void ccb_name_traces(ccb_trace *t, size_t n, const char *const *args) {
    for (size_t i = 1; i < n; i++) {
        char base[sizeof t->name];
        memcpy(base, t[i].name, sizeof base);
        for (unsigned k = 2; name_taken(t, i); k++) {
            char suffix[16];
            int sl = snprintf(suffix, sizeof suffix, "-%u", k);
            snprintf(t[i].name, sizeof t[i].name, "%.*s%s",
                     ccai_utf8_head(base, strlen(base), sizeof t[i].name - 1 - (size_t)sl), base, suffix);
        }
        if (strcmp(base, t[i].name))
            ccai_fprintf_escaped(stderr,
                                 "ccbench: trace '%s' is called '%s' in the results (another trace is called '%s')\n",
                                 args ? args[i] : base, t[i].name, base);
    }
}
