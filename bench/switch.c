/*
 * switch.c — model switching: in-process release, sleep and wake, and a
 * fresh process per model, measured through the engine's own tool, ccrun.
 *
 * The usual workaround for frameworks that never give memory back is one
 * process per model. ccalloc makes the alternative possible: unload the
 * model, cca_empty_cache, load the next one in the same process.
 *
 *   (a) in-process: ONE `ccrun --json M1 M2 ... Mn` (models repeated
 *       --rounds times). ccrun reports every phase with its wall time; a
 *       SWITCH is unload + release of the model that ends. The memory the
 *       next model can have is the device's free memory after the release
 *       (ccrun's "release" row), compared with the baseline at start.
 *   (b) process per model: one `ccrun --json Mi` per model, spawned in
 *       sequence. A SWITCH is the child's whole wall time (spawn to reaped)
 *       minus its own load and run phases: exec, dynamic linking, engine and
 *       device (CUDA context) creation, unload, release and exit. The memory
 *       for the next model is the next child's device free at its start.
 *   (c) sleep and wake: ONE `ccrun --json --sleep M1 M2 ... Mn`. A SWITCH
 *       is the sleep of the model that ends plus the wake of the next
 *       ("sleep-wake"), or, at the first turn of the next model, the sleep
 *       alone ("sleep-load": its load is excluded, as in (a) and (b)). The
 *       memory the next model can have is the device's free memory after
 *       the sleep (ccrun's "sleep" row): a sleeping model holds none.
 *   All three exclude load and run, which are the same work either way;
 *   but (a) and (b) load the next model at every switch, (c) only at its
 *   first turn, so the report also gives (a)'s median load.
 *
 * On the simulated device every process gets a fresh simulated device and
 * there is no CUDA context to create, so (b) is cheap there and the figures
 * are labelled SIMULATED; on a GPU (ccrun --device auto finds it) they are
 * the headline: target (a) >= 25x faster than (b) with the same memory.
 *
 * ccrun is --ccrun PATH when given (a PATH that is not an executable file, or
 * is too long for PATH_MAX, is an error, exit 1: the user named it; it is
 * run whole, never cut), else it is searched for in the build
 * tree (CCB_CCRUN_PATH), next to ccbench (../runtime/ccrun), then $PATH; not
 * found there: "skipped", exit 0. --device cuda without a GPU (no CUDA
 * device, or a build without CUDA): "skipped: no GPU: REASON", exit 0.
 *
 * Steps of ccb_cmd_switch: parse the options (getopt_long, the conventions
 * of cli.c), find ccrun, lay out the sequence of models, (a), (b), (c),
 * then the report: switch.md (a table a person reads) and switch.csv (one row per
 * switch) into --out, or the table on stdout.
 *
 * The ccruns it times record no CCALLOC_TRACE (taken out of each one's
 * environment, as ccrun's own timed child does: common/ccai_capture.h),
 * said once on stderr when it is set: a trace's cost would be in every
 * figure, and one file for every ccrun, each emptying it at its start,
 * kept only the last one's trace. A model's trace: CCALLOC_TRACE=FILE
 * ccrun MODEL.
 *
 * Every figure is measured or the run fails with the reason: a sequence of
 * one model (no switch to time) is a usage error; a number missing from
 * ccrun's JSON, a process's start phase missing (the next model's free
 * memory), or fewer switches than the sequence has, fails the run
 * (exit 1); an in-process switch of 0.000 ms (below ccrun's resolution) is
 * reported as such, with no speed-up figure, never as "infx faster".
 */
#include "ccbench.h"
#include "ccalloc.h"
#include "ccai_escape.h" /* common/: text from outside, escaped for a person */
#include "ccai_decimal.h" /* common/: ccai_decimal_uint */
#include "ccai_capture.h" /* common/: ccai_run_capture */

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_MODELS 16

static const char *const default_models[] = {
    "mlp:1024x4096x4096x1024:relu",
    "mlp:784x2048x2048x2048x10:relu:softmax",
    "mlp:512x8192x512:gelu",
    "mlp:2048x2048x2048x2048x2048:relu",
};

typedef struct switch_options {
    const char *ccrun; /* --ccrun, or NULL: search */
    const char *device, *capacity, *iters, *batch, *out;
    int rounds;
    const char *models[MAX_MODELS];
    size_t nm;
} switch_options;

/* ---- step 1: the options ------------------------------------------------------------ */

static void usage(FILE *f) {
    fprintf(f,
            "usage: ccbench switch [--ccrun PATH] [--device auto|host|cuda] [--capacity SIZE]\n"
            "                      [--rounds N] [--iters N] [--batch N] [--out DIR] [MODEL...]\n"
            "  Models run in sequence (default four mlp:... specs of different shapes, repeated\n"
            "  --rounds times, 1..1000, default 3): (a) in one ccrun process with unload + release\n"
            "  between them, (b) one ccrun process per model, (c) in one ccrun --sleep process, each\n"
            "  model put to sleep at the end of its turn and woken at its next. The sequence needs two\n"
            "  models or more (MODELs x --rounds): one has no switch to time. Reports time per switch\n"
            "  and the device memory free for the next model. --device host (simulated) is the\n"
            "  default without a GPU.\n"
            "  --device, --capacity (default 2G), --iters (default 1) and --batch (default 8) are\n"
            "  passed to ccrun, which checks them. At most %d models. Options take \"--opt value\"\n"
            "  or \"--opt=value\", in any order with the models.\n"
            "  ccrun: --ccrun PATH (an error if PATH is not an executable file or is PATH_MAX bytes\n"
            "  or longer; used whole), else searched for in the build tree, next to ccbench and in\n"
            "  $PATH (\"skipped\" if not found there).\n"
            "  CCALLOC_TRACE is not passed to the ccrun processes (its cost would be in the\n"
            "  figures); record a model with CCALLOC_TRACE=FILE ccrun MODEL.\n",
            MAX_MODELS);
}

#define usage_error(...) ccb_usage_error("switch", __VA_ARGS__)

/* 0 ok; 1 --help printed; 2 a usage error printed. */
static int parse_options(int argc, char **argv, switch_options *so) {
    enum { O_CCRUN = 256, O_DEVICE, O_CAPACITY, O_ROUNDS, O_ITERS, O_BATCH, O_OUT, O_HELP };
    static const struct option longopts[] = {
        {"ccrun", required_argument, 0, O_CCRUN}, {"device", required_argument, 0, O_DEVICE},
        {"capacity", required_argument, 0, O_CAPACITY}, {"rounds", required_argument, 0, O_ROUNDS},
        {"iters", required_argument, 0, O_ITERS}, {"batch", required_argument, 0, O_BATCH},
        {"out", required_argument, 0, O_OUT}, {"help", no_argument, 0, O_HELP},
        {0, 0, 0, 0}};
    *so = (switch_options){.device = "auto", .capacity = "2G", .iters = "1", .batch = "8", .rounds = 3};
    if (ccb_help_wanted(argc, argv, ":h", longopts, O_HELP)) { /* anywhere, whatever else is there */
        usage(stdout);
        return 1;
    }
    opterr = 0;
    optind = 0; /* GNU: start afresh (--all calls this after its own parse) */
    int c;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case O_CCRUN: so->ccrun = optarg; break;
        case O_DEVICE: so->device = optarg; break;
        case O_CAPACITY: so->capacity = optarg; break;
        case O_ITERS: so->iters = optarg; break;
        case O_BATCH: so->batch = optarg; break;
        case O_OUT: so->out = optarg; break;
        case O_ROUNDS: {
            unsigned long long r;
            if (ccai_decimal_uint(optarg, 1, 1000, &r))
                return usage_error("--rounds '%s' is not a count in 1..1000", optarg);
            so->rounds = (int)r;
            break;
        }
        case 'h':
        case O_HELP: usage(stdout); return 1;
        default: return ccb_getopt_error("switch", c, argv);
        }
    }
    for (int i = optind; i < argc; i++) {
        if (so->nm == MAX_MODELS)
            return usage_error("more than %d models", MAX_MODELS);
        so->models[so->nm++] = argv[i];
    }
    if (!so->nm)
        for (; so->nm < sizeof default_models / sizeof *default_models; so->nm++)
            so->models[so->nm] = default_models[so->nm];
    if (so->nm * (size_t)so->rounds < 2)
        return usage_error("a switch needs two models in the sequence: name two MODELs or more, or give --rounds "
                           "2 or more (got 1 model x 1 round: nothing to time)");
    return 0;
}

/* An executable regular file: 1, or 0 with errno saying why not (EISDIR for
 * a directory; access(2) runs a directory, so it is asked last). */
static int executable(const char *p) {
    struct stat st;
    if (stat(p, &st) != 0)
        return 0;
    if (!S_ISREG(st.st_mode)) {
        errno = S_ISDIR(st.st_mode) ? EISDIR : EACCES;
        return 0;
    }
    return access(p, X_OK) == 0;
}

/* --ccrun PATH: named by the user, so it must be there, and it is run
 * whole: a PATH that does not fit a PATH_MAX buffer is refused, never cut
 * (a cut one named another file, or none). 0, or 1 said. */
static int check_given_ccrun(const char *given) {
    if (!given)
        return 0;
    if (strlen(given) >= PATH_MAX) {
        ccai_fprintf_escaped(stderr, "ccbench switch: --ccrun '%s' is too long (%zu bytes; at most %d)\n", given,
                             strlen(given), PATH_MAX - 1);
        return 1;
    }
    if (executable(given))
        return 0;
    ccai_fprintf_escaped(stderr, "ccbench switch: --ccrun '%s' is not an executable file: %s\n", given,
                         strerror(errno));
    return 1;
}

#ifndef CCB_HAVE_CJSON
int ccb_cmd_switch(int argc, char **argv) {
    switch_options so;
    int rc = parse_options(argc, argv, &so);
    if (rc)
        return rc == 1 ? 0 : rc;
    if (check_given_ccrun(so.ccrun))
        return 1;
    printf("skipped: ccbench was built without libcjson (apt-get install libcjson-dev), needed to read ccrun --json\n");
    return 0;
}
#else
#include <cjson/cJSON.h>

typedef struct switch_row {
    char mode[16];
    const char *from, *to; /* the models as given (the sequence's), whole */
    double switch_ms;
    size_t free_for_next, baseline;
} switch_row;

/* One measurement: the sequence, the ccrun command line, the rows. */
typedef struct switch_run {
    const switch_options *so;
    const char **seq; /* models x rounds, in order */
    size_t seq_n;
    char **argv; /* ccrun and its fixed options from argv[0], then (run_ccrun) --sleep or not, "--", the models */
    size_t nfixed;
    switch_row *rows; /* (a)'s, (b)'s, then (c)'s */
    size_t nrows;
    double *loads; /* (a)'s load phases, ms */
    size_t nloads;
    char devname[128];
    int simulated;
    double inproc_wall, proc_wall, sleep_wall; /* ms, the whole sequence */
} switch_run;

/* ---- step 2: ccrun ------------------------------------------------------------------- */

/* out = a "/" b (b alone when a is NULL) when it fits len: 0; else -1 and
 * out is not a path (a cut one would name another file). */
static int path_join(char *out, size_t len, const char *a, const char *b) {
    int n = a ? snprintf(out, len, "%s/%s", a, b) : snprintf(out, len, "%s", b);
    return n >= 0 && (size_t)n < len ? 0 : -1;
}

/* 1 when a, b joined fit out and name an executable file there. */
static int found(char *out, size_t len, const char *a, const char *b) {
    return path_join(out, len, a, b) == 0 && executable(out);
}

/* --ccrun (checked already: it fits), or the search, whose candidates are
 * tried whole or not at all; -1: not found. */
static int find_ccrun(const char *given, char *out, size_t len) {
    if (given)
        return found(out, len, NULL, given) ? 0 : -1;
#ifdef CCB_CCRUN_PATH
    if (found(out, len, NULL, CCB_CCRUN_PATH))
        return 0;
#endif
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self);
    if (n > 0 && (size_t)n < sizeof self) { /* n == sizeof self: cut */
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = '\0';
            if (found(out, len, self, "../runtime/ccrun"))
                return 0;
        }
    }
    char *path = strdup(getenv("PATH") ? getenv("PATH") : "");
    char *save = NULL;
    int rc = -1;
    for (char *d = path ? strtok_r(path, ":", &save) : NULL; d && rc; d = strtok_r(NULL, ":", &save))
        if (found(out, len, d, "ccrun"))
            rc = 0;
    free(path);
    return rc;
}

/* Run ccrun on models [first, first + n) of the sequence, with --sleep when
 * `sleep`, the models after "--" (one named "-x" is a MODEL to ccrun too);
 * its JSON document, or NULL with the reason on stderr. */
static cJSON *run_ccrun(switch_run *w, size_t first, size_t n, int sleep, double *wall_ms) {
    size_t at = w->nfixed;
    if (sleep)
        w->argv[at++] = "--sleep";
    w->argv[at++] = "--";
    for (size_t i = 0; i < n; i++)
        w->argv[at + i] = (char *)w->seq[first + i];
    w->argv[at + n] = NULL;
    char *text;
    int signo, status = 0;
    int rc = ccai_run_capture(w->argv, "CCALLOC_TRACE", &text, wall_ms, &signo, &status); /* wall: spawn to reaped */
    int err = errno;
    errno = 0; /* malloc's ENOMEM: cJSON says only that it failed */
    cJSON *doc = text ? cJSON_Parse(text) : NULL;
    int short_of_memory = text && !doc && errno == ENOMEM;
    if (rc != 0 || !doc) {
        char how[160];
        if (rc < 0)
            ccai_capture_failure(rc, signo, status, err, how, sizeof how);
        else if (rc == 0 && short_of_memory)
            snprintf(how, sizeof how, "exited 0, but its output (%zu bytes) could not be read: out of host memory",
                     strlen(text));
        else if (rc == 0)
            snprintf(how, sizeof how, "exited 0, but its output is not one JSON document");
        else
            snprintf(how, sizeof how, "failed (exit %d)", rc);
        if (n == 1)
            ccai_fprintf_escaped(stderr, "ccbench switch: ccrun %s %s\n", w->seq[first], how);
        else if (sleep)
            ccai_fprintf_escaped(stderr, "ccbench switch: ccrun --sleep %s\n", how);
        else
            ccai_fprintf_escaped(stderr, "ccbench switch: in-process ccrun %s\n", how);
        if (!(rc == 0 && short_of_memory))
            ccai_fputs_escaped_lines(text, stderr); /* what it printed, escaped line by line */
        cJSON_Delete(doc);
        doc = NULL;
    }
    free(text);
    return doc;
}

/* A figure of ccrun's JSON: a finite number >= 0 under `key` of object o
 * (`what` names o in the message), else -1 with the reason on stderr. */
static int num(const cJSON *o, const char *key, const char *what, double *v) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble) || x->valuedouble < 0 || x->valuedouble >= 0x1p64) {
        ccai_fprintf_escaped(stderr, "ccbench switch: ccrun --json gave no number >= 0 for '%s' in its %s\n", key,
                             what);
        return -1;
    }
    *v = x->valuedouble;
    return 0;
}

/* The same, as bytes. */
static int bytes(const cJSON *o, const char *key, const char *what, size_t *b) {
    double v;
    if (num(o, key, what, &v))
        return -1;
    *b = (size_t)v;
    return 0;
}

static const char *str(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static switch_row *add_row(switch_run *w, const char *mode, size_t from, size_t to) {
    switch_row *r = &w->rows[w->nrows++];
    snprintf(r->mode, sizeof r->mode, "%s", mode);
    r->from = w->seq[from];
    r->to = w->seq[to];
    return r;
}

/* ---- step 3: the sequence and ccrun's command line ----------------------------------- */

static int lay_out(switch_run *w, const switch_options *so, const char *ccrun) {
    memset(w, 0, sizeof *w);
    w->so = so;
    w->seq_n = so->nm * (size_t)so->rounds;
    const char *fixed[] = {ccrun,        "--json",  "--device", so->device, "--capacity",
                           so->capacity, "--iters", so->iters,  "--batch",  so->batch};
    w->nfixed = sizeof fixed / sizeof *fixed;
    w->seq = calloc(w->seq_n, sizeof *w->seq);
    w->rows = calloc(3 * w->seq_n, sizeof *w->rows);
    w->loads = calloc(w->seq_n, sizeof *w->loads);
    w->argv = calloc(w->nfixed + 2 + w->seq_n + 1, sizeof *w->argv); /* + --sleep, -- */
    if (!w->seq || !w->rows || !w->loads || !w->argv)
        return -1;
    for (size_t i = 0; i < w->seq_n; i++)
        w->seq[i] = so->models[i % so->nm];
    for (size_t i = 0; i < w->nfixed; i++)
        w->argv[i] = (char *)fixed[i];
    return 0;
}

static void release_run(switch_run *w) {
    free(w->seq);
    free(w->rows);
    free(w->loads);
    free(w->argv);
}

/* ---- step 4: (a) one process, all models ---------------------------------------------- */

static int in_process(switch_run *w) {
    cJSON *doc = run_ccrun(w, 0, w->seq_n, 0, &w->inproc_wall);
    if (!doc)
        return -1;
    const cJSON *dev = cJSON_GetObjectItemCaseSensitive(doc, "device");
    w->simulated = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(dev, "simulated"));
    snprintf(w->devname, sizeof w->devname, "%s", str(dev, "name"));
    size_t baseline = 0; /* set by bytes() when rc is 0, read only then */
    int rc = bytes(dev, "free_baseline", "device", &baseline);
    const cJSON *ph;
    double unload_ms = 0, release_ms = 0;
    size_t k = 0;     /* the model that ends at the next release */
    int unloaded = 0; /* unload_ms is the ending model's own, read since its last release */
    cJSON_ArrayForEach(ph, cJSON_GetObjectItemCaseSensitive(doc, "phases")) {
        const char *p = str(ph, "phase");
        if (rc == 0 && !strcmp(p, "unload")) {
            rc = num(ph, "time_ms", "unload phase", &unload_ms);
            unloaded = rc == 0;
        } else if (rc == 0 && !strcmp(p, "load") && w->nloads < w->seq_n) {
            rc = num(ph, "time_ms", "load phase", &w->loads[w->nloads++]);
        } else if (rc == 0 && !strcmp(p, "release")) {
            if (k + 1 < w->seq_n && !unloaded) {
                ccai_fprintf_escaped(stderr,
                                     "ccbench switch: in-process ccrun --json has no unload phase before the release "
                                     "of %s\n",
                                     w->seq[k]);
                rc = -1;
            } else if (k + 1 < w->seq_n) { /* a switch to the next model */
                switch_row *r = add_row(w, "in-process", k, k + 1);
                rc = num(ph, "time_ms", "release phase", &release_ms);
                rc = rc ? rc : bytes(ph, "device_free_bytes", "release phase", &r->free_for_next);
                r->switch_ms = unload_ms + release_ms;
                r->baseline = baseline;
            }
            unloaded = 0;
            k++;
        }
    }
    cJSON_Delete(doc);
    return rc;
}

/* ---- step 5: (b) one process per model ------------------------------------------------- */

static int process_per_model(switch_run *w) {
    double prev_cost = 0; /* set by model 0, used from model 1 on */
    for (size_t i = 0; i < w->seq_n; i++) {
        double wall;
        cJSON *doc = run_ccrun(w, i, 1, 0, &wall);
        if (!doc)
            return -1;
        w->proc_wall += wall;
        double load_run = 0, ms = 0;
        size_t start_free = 0;
        int rc = 0, started = 0; /* start_free read: the next model's memory is a figure only then */
        int loaded = 0, ran = 0; /* both taken out of the child's wall time, or the switch is not one */
        const cJSON *ph;
        cJSON_ArrayForEach(ph, cJSON_GetObjectItemCaseSensitive(doc, "phases")) {
            const char *p = str(ph, "phase");
            if (rc == 0 && (!strcmp(p, "load") || !strcmp(p, "run"))) {
                rc = num(ph, "time_ms", !strcmp(p, "load") ? "load phase" : "run phase", &ms);
                load_run += ms;
                loaded |= rc == 0 && !strcmp(p, "load");
                ran |= rc == 0 && !strcmp(p, "run");
            } else if (rc == 0 && !strcmp(p, "start")) {
                rc = bytes(ph, "device_free_bytes", "start phase", &start_free);
                started = rc == 0;
            }
        }
        if (rc == 0 && (!loaded || !ran)) {
            ccai_fprintf_escaped(stderr,
                                 "ccbench switch: ccrun %s gave no load or no run phase in its --json (a switch is "
                                 "its wall time less both)\n",
                                 w->seq[i]);
            rc = -1;
        }
        if (rc == 0 && i > 0 && !started) {
            ccai_fprintf_escaped(stderr,
                                 "ccbench switch: ccrun %s gave no start phase in its --json (the device's "
                                 "free memory at its start)\n",
                                 w->seq[i]);
            rc = -1;
        }
        if (rc == 0 && i > 0) { /* the switch into model i: previous process's cost, this one's memory */
            switch_row *r = add_row(w, "process", i - 1, i);
            r->switch_ms = prev_cost;
            r->free_for_next = start_free;
            rc = bytes(cJSON_GetObjectItemCaseSensitive(doc, "device"), "free_baseline", "device", &r->baseline);
        }
        prev_cost = wall - load_run;
        cJSON_Delete(doc);
        if (rc)
            return -1;
    }
    return 0;
}

/* ---- step 6: (c) sleep and wake, one process ------------------------------------------ */

/* A switch is complete at the phase after a sleep: a wake (sleep + wake) or
 * the next model's first load (the sleep alone). */
static int sleep_and_wake(switch_run *w) {
    cJSON *doc = run_ccrun(w, 0, w->seq_n, 1, &w->sleep_wall);
    if (!doc)
        return -1;
    size_t baseline = 0;
    int rc = bytes(cJSON_GetObjectItemCaseSensitive(doc, "device"), "free_baseline", "device", &baseline);
    const cJSON *ph;
    double sleep_ms = 0, wake_ms = 0;
    size_t free_after = 0, k = 0; /* k: the model whose turn the sleep ended */
    int pending = 0;
    cJSON_ArrayForEach(ph, cJSON_GetObjectItemCaseSensitive(doc, "phases")) {
        const char *p = str(ph, "phase");
        int wake = !strcmp(p, "wake");
        if (rc == 0 && !strcmp(p, "sleep")) {
            rc = num(ph, "time_ms", "sleep phase", &sleep_ms);
            rc = rc ? rc : bytes(ph, "device_free_bytes", "sleep phase", &free_after);
            pending = 1;
        } else if (rc == 0 && pending && (wake || !strcmp(p, "load")) && k + 1 < w->seq_n) {
            wake_ms = 0;
            rc = wake ? num(ph, "time_ms", "wake phase", &wake_ms) : 0;
            switch_row *r = add_row(w, wake ? "sleep-wake" : "sleep-load", k, k + 1);
            r->switch_ms = sleep_ms + wake_ms;
            r->free_for_next = free_after;
            r->baseline = baseline;
            pending = 0;
            k++;
        }
    }
    cJSON_Delete(doc);
    return rc;
}

/* ---- step 7: the report --------------------------------------------------------------- */

/* One mode's switch times, sorted (by the median's sort), how many
 * switches left the next model the baseline free memory, and the largest
 * shortfall (bytes under the baseline; on a GPU the CUDA runtime keeps some
 * after its first kernels, constant from then on). */
typedef struct mode_summary {
    double *ms;
    size_t n, full, short_max;
    double median;
} mode_summary;

static void summarize(const switch_run *w, const char *mode, mode_summary *m) {
    m->ms = calloc(w->nrows + 1, sizeof *m->ms);
    m->n = m->full = m->short_max = 0;
    for (size_t i = 0; m->ms && i < w->nrows; i++) {
        const switch_row *r = &w->rows[i];
        if (strcmp(r->mode, mode))
            continue;
        m->ms[m->n++] = r->switch_ms;
        m->full += r->free_for_next >= r->baseline;
        if (r->free_for_next < r->baseline && r->baseline - r->free_for_next > m->short_max)
            m->short_max = r->baseline - r->free_for_next;
    }
    m->median = m->ms && m->n ? ccb_quantile(m->ms, m->n, 0.5) : 0; /* n >= 1 once report checked it */
}

/* One table row: a mode's switches, sorted (n >= 1). */
static void md_row(FILE *md, const char *label, const mode_summary *m) {
    char sb[32];
    fprintf(md, "| %s | %zu | %.3f | %.3f | %.3f | %zu of %zu | %s |\n", label, m->n, m->median, m->ms[0],
            m->ms[m->n - 1], m->full, m->n, cca_format_bytes(m->short_max, sb, sizeof sb));
}

/* "WHAT: X.Yx faster than THAN (median). ", or below ccrun's resolution
 * (it reports ms with 3 decimals): no speed-up figure. */
static void md_speedup(FILE *md, const char *what, double median, const char *than, double other) {
    if (median > 0)
        fprintf(md, "%s: %.1fx %s %s (median). ", what, median < other ? other / median : median / other,
                median < other ? "faster than" : "slower than", than);
    else
        fprintf(md, "%s: %.3f ms (median), below ccrun's resolution of 0.001 ms: no speed-up figure. ", what, median);
}

/* 0, or -1 when its first line, the options as given, could not be
 * formatted (ccb_fprintf_row: over 1 KiB without host memory). */
static int write_md(FILE *md, const switch_run *w, const mode_summary *a, const mode_summary *b, const mode_summary *c,
                    const mode_summary *c1) {
    const switch_options *so = w->so;
    int bad = ccb_fprintf_row(
        md, "Model switching on %s (%s), %zu models x %d rounds, ccrun --device %s --iters %s --batch %s%s%s\n\n",
        w->devname,
        w->simulated ? "SIMULATED device: no CUDA context to create, figures are not GPU figures" : "real GPU", so->nm,
        so->rounds, so->device, so->iters, so->batch, w->simulated ? " --capacity " : "",
        w->simulated ? so->capacity : "");
    fprintf(md, "| mode | switches | median ms/switch | min | max | next model gets the baseline free memory | "
                "largest shortfall |\n");
    fprintf(md, "|---|--:|--:|--:|--:|--:|--:|\n");
    /* (a) and (b) have n >= 1 switches, (c) n + c1 n >= 1, sorted (report checked it) */
    md_row(md, "in-process (unload + release)", a);
    md_row(md, "process per model (start-up + unload + exit)", b);
    if (c->n)
        md_row(md, "sleep + wake in one process (sleep of the ending model + wake of the next)", c);
    if (c1->n)
        md_row(md, "sleep + first load (the sleep alone; the load excluded, as above)", c1);
    fprintf(md, "\n");
    md_speedup(md, "In-process switch", a->median, "a process per model", b->median);
    if (c->n)
        md_speedup(md, "Sleep + wake", c->median, "a process per model", b->median);
    if (c->n && c->median > 0 && a->median > 0)
        md_speedup(md, "Sleep + wake", c->median, "unload + release", a->median);
    double loads = w->nloads ? ccb_quantile(w->loads, w->nloads, 0.5) : 0;
    fprintf(md,
            "(a) and (b) also load the next model at every switch (median load %.3f ms in (a), excluded above); "
            "(c) loads each model once and wakes it after.",
            loads);
    fprintf(md,
            " Wall time of the whole sequence: %.1f ms in one process, %.1f ms with a process per model, %.1f ms "
            "with sleep and wake.\n",
            w->inproc_wall, w->proc_wall, w->sleep_wall);
    return bad;
}

static void write_csv(FILE *csv, const switch_run *w) {
    fprintf(csv, "mode,from,to,switch_ms,device_free_for_next,baseline_free,simulated\n");
    for (size_t i = 0; i < w->nrows; i++) {
        const switch_row *r = &w->rows[i];
        fprintf(csv, "%s,", r->mode);
        ccb_csv_field(csv, r->from); /* a model's name or path: quoted when it has a comma */
        fputc(',', csv);
        ccb_csv_field(csv, r->to);
        fprintf(csv, ",%.3f,%zu,%zu,%d\n", r->switch_ms, r->free_for_next, r->baseline, w->simulated);
    }
}

static int report(switch_run *w) {
    mode_summary a, b, c, c1;
    summarize(w, "in-process", &a);
    summarize(w, "process", &b);
    summarize(w, "sleep-wake", &c);
    summarize(w, "sleep-load", &c1);
    int rc = 0;
    const char *out = w->so->out;
    if (!a.ms || !b.ms || !c.ms || !c1.ms) {
        fprintf(stderr, "ccbench switch: out of host memory\n");
        rc = 1;
    } else if (a.n != w->seq_n - 1 || b.n != w->seq_n - 1 || c.n + c1.n != w->seq_n - 1) {
        fprintf(stderr,
                "ccbench switch: ccrun reported %zu switches in one process, %zu with a process per model and %zu "
                "by sleep and wake; the sequence of %zu models has %zu (a release, or a sleep, phase per model is "
                "missing from its JSON)\n",
                a.n, b.n, c.n + c1.n, w->seq_n, w->seq_n - 1);
        rc = 1;
    } else if (!out) {
        rc = ccb_out_formatted(write_md(stdout, w, &a, &b, &c, &c1), NULL, "standard output") != 0;
    } else { /* out: made before anything ran */
        FILE *md = ccb_open_out(out, "switch.md"), *csv = ccb_open_out(out, "switch.csv");
        int bad = 0;
        if (md && csv) {
            bad = ccb_out_formatted(write_md(md, w, &a, &b, &c, &c1), out, "switch.md") != 0;
            write_csv(csv, w);
        }
        bad |= ccb_close_out(md, out, "switch.md") != 0;
        bad |= ccb_close_out(csv, out, "switch.csv") != 0;
        if (bad) {
            ccai_fprintf_escaped(stderr, "ccbench switch: cannot write into %s\n", out);
            rc = 1;
        } else {
            char wake[48] = ""; /* c.n == 0 with --rounds 1: no median of none */
            if (c.n)
                snprintf(wake, sizeof wake, ", sleep + wake %.3f ms", c.median);
            ccai_fprintf_escaped(stdout,
                                 "ccbench switch: in-process %.3f ms, process %.3f ms%s per switch (median, %s)%s; "
                                 "wrote %s/switch.md\n",
                                 a.median, b.median, wake, w->simulated ? "simulated device" : "GPU",
                                 c.n ? "" : ", no sleep + wake switch: no model woken (--rounds 1)", out);
        }
    }
    free(a.ms);
    free(b.ms);
    free(c.ms);
    free(c1.ms);
    return rc;
}

int ccb_cmd_switch(int argc, char **argv) {
    switch_options so;
    int rc = parse_options(argc, argv, &so);
    if (rc)
        return rc == 1 ? 0 : rc;
    if (check_given_ccrun(so.ccrun))
        return 1;
    char ccrun[PATH_MAX];
    if (find_ccrun(so.ccrun, ccrun, sizeof ccrun) != 0) {
        printf("skipped: ccrun not found (build target ccrun with -DCCA_BUILD_RUNTIME=ON, or pass --ccrun PATH)\n");
        return 0;
    }
    if (so.out && ccb_mkdir_p(so.out))
        return 1; /* said and counted: before anything runs, a skip for no GPU included */
    const char *trace = getenv("CCALLOC_TRACE");
    if (trace && *trace)
        fprintf(stderr, "ccbench switch: CCALLOC_TRACE is not passed to the ccrun processes it times (its cost "
                        "would be in the figures); record a model with CCALLOC_TRACE=FILE ccrun MODEL\n");
    if (strcmp(so.device, "cuda") == 0) { /* asked for a GPU: without one, skipped, as ccbench sleep and driver */
        cca_upstream *u = NULL;
        cca_status st = cca_upstream_cuda_create(0, &u);
        if (st == CCA_ERR_NO_DEVICE) {
            ccai_fprintf_escaped(stdout, "skipped: no GPU: %s\n", cca_last_error());
            return 0;
        }
        if (st == CCA_OK)
            cca_upstream_destroy(u);
    }
    switch_run w;
    if (lay_out(&w, &so, ccrun) != 0) {
        fprintf(stderr, "ccbench switch: out of host memory\n");
        rc = 1;
    } else if (in_process(&w) != 0 || process_per_model(&w) != 0 || sleep_and_wake(&w) != 0) {
        rc = 1;
    } else {
        rc = report(&w);
    }
    release_run(&w);
    return rc;
}
#endif /* CCB_HAVE_CJSON */
