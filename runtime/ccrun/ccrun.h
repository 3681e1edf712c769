/*
 * ccrun.h — what ccrun's files share: the options, the per-phase report
 * (text table or JSON), the demo, and the checks on its outputs; each group
 * of functions under a banner naming the file that defines it.
 */
#ifndef CCRUN_H
#define CCRUN_H

#include <stdarg.h>
#include <stdio.h>

#include "ccai_escape.h" /* common/: ccai_fprintf_escaped */
#include "ccr.h"

/* Exit codes: documented in --help. CCRUN_WARN_NONFINITE: every run
 * completed, but a model has NaN/Inf weights (its outputs are NaN); any
 * other failure's code takes precedence. */
enum { CCRUN_OK = 0, CCRUN_ERR_MODEL = 1, CCRUN_ERR_USAGE = 2, CCRUN_ERR_LEAK = 3, CCRUN_WARN_NONFINITE = 4 };

#if defined(__GNUC__)
#define CCRUN_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define CCRUN_PRINTF(f, a)
#endif

#define CCRUN_MAX_RESIDENT 8

typedef struct ccrun_options {
    ccr_device_kind device;
    size_t capacity;
    size_t vm_granularity; /* --vm-granularity; 0: the device's page */
    int vm_backing;        /* --vm-backing: CCA_VM_WHOLE_MAPS (default) or CCA_VM_PAGES */
    const char *policy; /* NULL = allocator default (growth) */
    const char *conf;
    size_t batch, iters;
    int batch_set, iters_set;
    int keep_cache, json, demo;
    const char *timeline_path;
    const char *save_path;
    unsigned long long seed;
    const char **models;
    size_t n_models;
    const char *resident[CCRUN_MAX_RESIDENT]; /* --resident: loaded first, kept */
    size_t n_resident;
    int no_domains;        /* --no-domains (--keep-cache implies it) */
    int footprint_sidecar; /* --footprint-sidecar */
    int sleep;             /* --sleep: a turn ends with a sleep, a return wakes */
    const char *snapshot_path; /* --snapshot: .pickle (PyTorch's format) or .json */
    /* Set by tests, never by the command line (ccrun_parse_options leaves
     * them NULL): */
    cca_upstream *upstream;  /* borrowed: the device instead of --device's (a double) */
    const char *child_ccrun; /* the ccrun demo act 5 starts as a child; NULL: this program */
} ccrun_options;

/* --snapshot FILE.pickle: the history ring ccrun asks for (config
 * `history`, before --conf, which may change it). */
#define CCRUN_SNAPSHOT_HISTORY 65536

/* One row of the per-phase table. */
typedef struct ccrun_row {
    char phase[16]; /* ccrun's own phase names */
    char *model;    /* malloc'd, whole (a path or spec as given)   */
    size_t allocated, reserved, device_free;
    int device_free_known; /* 0: the device refused mem_info: "unknown", JSON null */
    double fragmentation;
    double ms;
    char *note; /* malloc'd, whole */
} ccrun_row;

typedef struct ccrun_report {
    FILE *out;
    int json;
    size_t n, cap;
    ccrun_row *rows;
} ccrun_report;

/* ---- options.c: the command line ---- */

/* argv into *o (defaults first; the models point into argv): 0, -1 after
 * --help was printed, else an exit code (the message printed). */
int ccrun_parse_options(int argc, char **argv, ccrun_options *o);

/* ---- run.c: MODEL..., --resident, --sleep ---- */

/* Run what *o asks (not --demo) and return the exit code; the table or
 * JSON on stdout, messages on stderr. */
int ccrun_run(const ccrun_options *o);

/* ---- format.c: strings of the length they need ---- */

/* printf into a malloc'd string of the length it needs; NULL when out of
 * memory. ccrun never copies a user string into a fixed-size buffer. */
char *ccrun_format(const char *fmt, ...) CCRUN_PRINTF(1, 2);
char *ccrun_vformat(const char *fmt, va_list ap);
/* Whether s ends with suffix, after at least one byte of its own. */
int ccrun_ends_with(const char *s, const char *suffix);

/* ---- report.c: the per-phase table and its JSON form ---- */

/* "policy:X,<conf>" for the allocator, malloc'd (NULL: out of memory). */
char *ccrun_alloc_conf(const ccrun_options *o, const char *policy);

double ccrun_now_ms(void);
/* Take the engine's numbers now into a row and print it (text mode) or keep
 * it for the JSON document. */
void ccrun_phase(ccrun_report *r, ccr_engine *e, const char *phase, const char *model, double ms, const char *note_fmt,
                 ...);
void ccrun_table_header(ccrun_report *r);
void ccrun_report_free(ccrun_report *r);
/* The device's free bytes now into *free_b: 1, or 0 (and *free_b 0) when
 * the device refused to say (the reason in cca_last_error). */
int ccrun_device_free(cca_upstream *dev, size_t *free_b);
/* "+1.50 MiB": the device's free memory from before to after, "+0 B" when
 * it did not rise; "unknown (mem_info refused)" when `read` is 0 (either
 * count unread, as ccrun_device_free said). Into BUF; returns BUF. */
const char *ccrun_rise_text(int read, size_t before, size_t after, char *buf, size_t n);
/* Write {"device":..., "phases":[...], "result":...} */
void ccrun_json_document(ccrun_report *r, ccr_engine *e, const char *error, size_t live_bytes);
/* Fill a batch of inputs with deterministic numbers in [0, 1). */
void ccrun_fill_input(float *x, size_t n, unsigned long long seed);
/* Load progress on stderr when stdout is a terminal. */
void ccrun_progress(void *user, const char *model, size_t done, size_t total);

/* FNV-1a over n bytes, continuing from h (start: CCRUN_FNV_BASIS): how
 * ccrun shows that a resident model's outputs stay the same bytes. */
#define CCRUN_FNV_BASIS 0xcbf29ce484222325ull
unsigned long long ccrun_fnv1a(unsigned long long h, const void *p, size_t n);

/* "device free == baseline", or "device free N below baseline" (above):
 * the exact difference, formatted into BUF; "device free unknown (mem_info
 * refused)" when the release could not read it. Returns BUF. */
const char *ccrun_baseline_note(const ccr_release_info *r, char *buf, size_t n);

/* ---- child.c: ccrun as a timed child process ---- */

/* Run argv (a ccrun --json command line) as a child process: *wall_ms from
 * spawn to reap, *run_ms the sum of its "run" phases' time_ms. Returns its
 * exit status, or -1 when none ran to its exit or its output was lost, the
 * message (ccr_last_error) saying why: "ARGV0 could not be run: REASON"
 * (pipe, spawn, an exec refused, host memory), "ARGV0 was killed by signal
 * N (NAME)" or "ARGV0 ran (exit N), but its output could not be kept:
 * REASON" (child.c). */
int ccrun_time_child(char *const argv[], double *wall_ms, double *run_ms);

/* ---- demo.c ---- */

/* ccrun --demo */
int ccrun_demo(const ccrun_options *o);

/* ---- output.c: text for a person, and whether every output was written ---- */

/* printf to f with the text escaped for a terminal, for anything that may
 * quote a model file, a path or --conf: ccai_fprintf_escaped (common/
 * ccai_escape.h, included above). */
/* One message on stderr: "ccrun: " + the text, escaped, + newline. */
void ccrun_say(const char *fmt, ...) CCRUN_PRINTF(1, 2);

/* The exit code once an output could not be written: CCRUN_ERR_MODEL over
 * CCRUN_OK and CCRUN_WARN_NONFINITE, any other failure's code kept. */
int ccrun_output_failed(int rc);
/* Before the run: two outputs on one file (--timeline, --save, --snapshot,
 * footprint sidecars, stdout and stderr when they go to a regular file), or
 * an output on a MODEL or --resident file, are refused with a message
 * naming both. CCRUN_OK or CCRUN_ERR_USAGE. */
int ccrun_check_outputs(const ccrun_options *o);
/* fflush(f), keeping the reason of stdout's first failure for the close. */
void ccrun_flush(FILE *f);
/* A write to stdout failed with `err` (0: unknown): kept as its reason, as a
 * failed ccrun_flush keeps its, for ccrun_close_stdout to say. */
void ccrun_stdout_failed(int err);
/* Close standard output (the last thing ccrun does); a failure now or of an
 * earlier write is said on stderr. Returns rc, or ccrun_output_failed(rc). */
int ccrun_close_stdout(int rc);

#endif /* CCRUN_H */
