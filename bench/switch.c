/*
 * switch.c — model switching: in-process release versus a fresh process per
 * model, measured through the engine's own tool, ccrun.
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
 *   (b) process per model: one `ccrun --json Mi` per model, fork/exec'd in
 *       sequence. A SWITCH is the child's whole wall time (fork to reaped)
 *       minus its own load and run phases: exec, dynamic linking, engine and
 *       device (CUDA context) creation, unload, release and exit. The memory
 *       for the next model is the next child's device free at its start.
 *   Both exclude load and run, which are the same work either way.
 *
 * On the simulated device every process gets a fresh simulated device and
 * there is no CUDA context to create, so (b) is cheap there and the figures
 * are labelled SIMULATED; on a GPU (ccrun --device auto finds it) they are
 * the headline: target (a) >= 25x faster than (b) with the same memory.
 *
 * ccrun is found through --ccrun PATH, then the build tree (CCB_CCRUN_PATH),
 * then next to ccbench (../runtime/ccrun), then $PATH. Without it: skipped.
 */
#include "ccbench.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CCB_HAVE_CJSON
int ccb_switch_main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    printf("skipped: ccbench was built without libcjson (apt-get install libcjson-dev), needed to read ccrun --json\n");
    return 0;
}
#else
#include <cjson/cJSON.h>

#define MAX_MODELS 16

static const char *const default_models[] = {
    "mlp:1024x4096x4096x1024:relu",
    "mlp:784x2048x2048x2048x10:relu:softmax",
    "mlp:512x8192x512:gelu",
    "mlp:2048x2048x2048x2048x2048:relu",
};

typedef struct switch_row {
    char mode[16];
    char from[96], to[96];
    double switch_ms;
    size_t free_for_next, baseline;
} switch_row;

static int executable(const char *p) {
    return access(p, X_OK) == 0;
}

static int find_ccrun(const char *given, char *out, size_t len) {
    if (given) {
        snprintf(out, len, "%s", given);
        return executable(out) ? 0 : -1;
    }
#ifdef CCB_CCRUN_PATH
    if (executable(CCB_CCRUN_PATH)) {
        snprintf(out, len, "%s", CCB_CCRUN_PATH);
        return 0;
    }
#endif
    char self[1024];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = '\0';
            char cand[sizeof self + 32];
            snprintf(cand, sizeof cand, "%s/../runtime/ccrun", self);
            if (strlen(cand) < len && executable(cand)) {
                memcpy(out, cand, strlen(cand) + 1);
                return 0;
            }
        }
    }
    const char *path = getenv("PATH");
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path ? path : "");
    char *save;
    for (char *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(out, len, "%s/ccrun", d);
        if (executable(out))
            return 0;
    }
    return -1;
}

/* Run argv, capture stdout; wall time from fork to reaped. */
static int run_capture(char *const argv[], char **out, double *wall_ms) {
    *out = NULL;
    *wall_ms = 0;
    int fd[2];
    if (pipe(fd))
        return -1;
    fflush(NULL);
    uint64_t t0 = ccb_now_ns();
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        return -1;
    }
    if (pid == 0) {
        dup2(fd[1], STDOUT_FILENO);
        close(fd[0]);
        close(fd[1]);
        execv(argv[0], argv);
        _exit(127);
    }
    close(fd[1]);
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (buf && len + 4096 > cap) {
            char *grown = realloc(buf, cap * 2);
            if (!grown)
                free(buf);
            buf = grown;
            cap *= 2;
        }
        if (!buf) { /* out of host memory: drain the pipe so the child can exit */
            char sink[4096];
            ssize_t k = read(fd[0], sink, sizeof sink);
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0)
                break;
            continue;
        }
        ssize_t k = read(fd[0], buf + len, cap - len - 1);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        len += (size_t)k;
    }
    close(fd[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    *wall_ms = (double)(ccb_now_ns() - t0) / 1e6;
    if (!buf)
        return -1;
    buf[len] = '\0';
    *out = buf;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static double num(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static const char *str(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static void usage(FILE *f) {
    fprintf(f, "usage: ccbench switch [--ccrun PATH] [--device auto|host|cuda] [--capacity SIZE]\n"
               "                      [--rounds N] [--iters N] [--batch N] [--out DIR] [MODEL...]\n"
               "  Models run in sequence (default four mlp:... specs of different shapes, repeated\n"
               "  --rounds times, default 3): (a) in one ccrun process with unload + release between\n"
               "  them, (b) one ccrun process per model. Reports time per switch and the device memory\n"
               "  free for the next model. --device host (simulated) is the default without a GPU.\n");
}

int ccb_switch_main(int argc, char **argv) {
    const char *ccrun_given = NULL, *device = "auto", *capacity = "2G", *out = NULL;
    const char *iters = "1", *batch = "8";
    const char *models[MAX_MODELS];
    size_t nm = 0;
    int rounds = 3;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (a[0] == '-' && !v) {
            fprintf(stderr, "ccbench switch: %s needs a value\n", a);
            return 2;
        }
        if (!strcmp(a, "--ccrun"))
            ccrun_given = argv[++i];
        else if (!strcmp(a, "--device"))
            device = argv[++i];
        else if (!strcmp(a, "--capacity"))
            capacity = argv[++i];
        else if (!strcmp(a, "--rounds")) {
            char *end;
            long r = strtol(argv[++i], &end, 10);
            if (*end || end == argv[i] || r < 1 || r > 1000) {
                fprintf(stderr, "ccbench switch: --rounds takes a whole number from 1 to 1000, got '%s'\n", argv[i]);
                return 2;
            }
            rounds = (int)r;
        } else if (!strcmp(a, "--iters"))
            iters = argv[++i];
        else if (!strcmp(a, "--batch"))
            batch = argv[++i];
        else if (!strcmp(a, "--out"))
            out = argv[++i];
        else if (a[0] == '-') {
            fprintf(stderr, "ccbench switch: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        } else if (nm < MAX_MODELS)
            models[nm++] = a;
    }
    if (!nm)
        for (; nm < sizeof default_models / sizeof *default_models; nm++)
            models[nm] = default_models[nm];
    char ccrun[1024];
    if (find_ccrun(ccrun_given, ccrun, sizeof ccrun) != 0) {
        printf("skipped: ccrun not found (build target ccrun with -DCCA_BUILD_RUNTIME=ON, or pass --ccrun PATH)\n");
        return 0;
    }
    size_t seq_n = nm * (size_t)rounds;
    const char **seq = calloc(seq_n, sizeof *seq);
    switch_row *rows = calloc(2 * seq_n, sizeof *rows);
    size_t nrows = 0;
    for (size_t i = 0; i < seq_n; i++)
        seq[i] = models[i % nm];
    const char *fixed[] = {ccrun,    "--json",  "--device", device,    "--capacity",
                           capacity, "--iters", iters,      "--batch", batch};
    size_t nfixed = sizeof fixed / sizeof *fixed;
    char **argv2 = calloc(nfixed + seq_n + 1, sizeof *argv2);
    if (!seq || !rows || !argv2) {
        fprintf(stderr, "ccbench switch: out of host memory\n");
        free(seq), free(rows), free(argv2);
        return 1;
    }
    for (size_t i = 0; i < nfixed; i++)
        argv2[i] = (char *)fixed[i];

    /* (a) one process, all models */
    for (size_t i = 0; i < seq_n; i++)
        argv2[nfixed + i] = (char *)seq[i];
    argv2[nfixed + seq_n] = NULL;
    char *text;
    double wall;
    int rc = run_capture(argv2, &text, &wall);
    cJSON *doc = text ? cJSON_Parse(text) : NULL;
    if (rc != 0 || !doc) {
        fprintf(stderr, "ccbench switch: in-process ccrun failed (exit %d)\n%s\n", rc, text ? text : "");
        free(text);
        cJSON_Delete(doc);
        free(seq), free(rows), free(argv2);
        return 1;
    }
    const cJSON *dev = cJSON_GetObjectItemCaseSensitive(doc, "device");
    int simulated = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(dev, "simulated"));
    char devname[128];
    snprintf(devname, sizeof devname, "%s", str(dev, "name"));
    size_t baseline = (size_t)num(dev, "free_baseline");
    const cJSON *ph;
    double unload_ms = 0;
    size_t k = 0;
    cJSON_ArrayForEach(ph, cJSON_GetObjectItemCaseSensitive(doc, "phases")) {
        const char *p = str(ph, "phase");
        if (!strcmp(p, "unload"))
            unload_ms = num(ph, "time_ms");
        else if (!strcmp(p, "release") && k + 1 < seq_n) { /* a switch to the next model */
            switch_row *r = &rows[nrows++];
            snprintf(r->mode, sizeof r->mode, "in-process");
            snprintf(r->from, sizeof r->from, "%s", seq[k]);
            snprintf(r->to, sizeof r->to, "%s", seq[k + 1]);
            r->switch_ms = unload_ms + num(ph, "time_ms");
            r->free_for_next = (size_t)num(ph, "device_free_bytes");
            r->baseline = baseline;
            k++;
        } else if (!strcmp(p, "release"))
            k++;
    }
    cJSON_Delete(doc);
    free(text);
    double inproc_wall = wall;

    /* (b) one process per model */
    double prev_cost = NAN;
    double proc_wall = 0;
    for (size_t i = 0; i < seq_n; i++) {
        argv2[nfixed] = (char *)seq[i];
        argv2[nfixed + 1] = NULL;
        rc = run_capture(argv2, &text, &wall);
        proc_wall += wall;
        doc = text ? cJSON_Parse(text) : NULL;
        if (rc != 0 || !doc) {
            fprintf(stderr, "ccbench switch: ccrun %s failed (exit %d)\n%s\n", seq[i], rc, text ? text : "");
            free(text);
            cJSON_Delete(doc);
            free(seq), free(rows), free(argv2);
            return 1;
        }
        double load_run = 0;
        size_t start_free = 0;
        cJSON_ArrayForEach(ph, cJSON_GetObjectItemCaseSensitive(doc, "phases")) {
            const char *p = str(ph, "phase");
            if (!strcmp(p, "load") || !strcmp(p, "run"))
                load_run += num(ph, "time_ms");
            else if (!strcmp(p, "start"))
                start_free = (size_t)num(ph, "device_free_bytes");
        }
        if (i > 0) { /* the switch into model i: previous process's cost, this one's memory */
            switch_row *r = &rows[nrows++];
            snprintf(r->mode, sizeof r->mode, "process");
            snprintf(r->from, sizeof r->from, "%s", seq[i - 1]);
            snprintf(r->to, sizeof r->to, "%s", seq[i]);
            r->switch_ms = prev_cost;
            r->free_for_next = start_free;
            r->baseline = (size_t)num(cJSON_GetObjectItemCaseSensitive(doc, "device"), "free_baseline");
        }
        prev_cost = wall - load_run;
        cJSON_Delete(doc);
        free(text);
    }

    /* summary */
    double *a = calloc(nrows + 1, sizeof *a), *b = calloc(nrows + 1, sizeof *b);
    size_t na = 0, nb = 0, a_full = 0, b_full = 0;
    for (size_t i = 0; i < nrows; i++) {
        if (!strcmp(rows[i].mode, "in-process")) {
            a[na++] = rows[i].switch_ms;
            a_full += rows[i].free_for_next == rows[i].baseline;
        } else {
            b[nb++] = rows[i].switch_ms;
            b_full += rows[i].free_for_next == rows[i].baseline;
        }
    }
    double ma = ccb_quantile(a, na, 0.5), mb = ccb_quantile(b, nb, 0.5);
    FILE *md = stdout, *csv = NULL;
    if (out) {
        mkdir(out, 0755);
        char path[1024];
        snprintf(path, sizeof path, "%s/switch.md", out);
        md = fopen(path, "w");
        snprintf(path, sizeof path, "%s/switch.csv", out);
        csv = fopen(path, "w");
        if (!md || !csv) {
            fprintf(stderr, "ccbench switch: cannot write into %s\n", out);
            return 1;
        }
    }
    fprintf(md, "Model switching on %s (%s), %zu models x %d rounds, ccrun %s --iters %s --batch %s%s%s\n\n", devname,
            simulated ? "SIMULATED device: no CUDA context to create, figures are not GPU figures" : "real GPU", nm,
            rounds, device, iters, batch, simulated ? " --capacity " : "", simulated ? capacity : "");
    fprintf(md, "| mode | switches | median ms/switch | min | max | next model gets the baseline free memory |\n");
    fprintf(md, "|---|--:|--:|--:|--:|--:|\n");
    fprintf(md, "| in-process (unload + release) | %zu | %.3f | %.3f | %.3f | %zu of %zu |\n", na, ma, na ? a[0] : NAN,
            na ? a[na - 1] : NAN, a_full, na);
    fprintf(md, "| process per model (start-up + unload + exit) | %zu | %.3f | %.3f | %.3f | %zu of %zu |\n", nb, mb,
            nb ? b[0] : NAN, nb ? b[nb - 1] : NAN, b_full, nb);
    fprintf(md,
            "\nIn-process switch is %.1fx faster (median). Wall time of the whole sequence: %.1f ms in one "
            "process, %.1f ms with a process per model.\n",
            mb / ma, inproc_wall, proc_wall);
    if (csv) {
        fprintf(csv, "mode,from,to,switch_ms,device_free_for_next,baseline_free,simulated\n");
        for (size_t i = 0; i < nrows; i++)
            fprintf(csv, "%s,%s,%s,%.3f,%zu,%zu,%d\n", rows[i].mode, rows[i].from, rows[i].to, rows[i].switch_ms,
                    rows[i].free_for_next, rows[i].baseline, simulated);
        fclose(csv);
        fclose(md);
        printf("ccbench switch: in-process %.3f ms, process %.3f ms per switch (median, %s); wrote %s/switch.md\n", ma,
               mb, simulated ? "simulated device" : "GPU", out);
    }
    free(a);
    free(b);
    free(rows);
    free(seq);
    free(argv2);
    return 0;
}
#endif /* CCB_HAVE_CJSON */
