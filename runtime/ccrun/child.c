/*
 * child.c — ccrun run as a child process and timed: what a switch costs
 * with a process per model, measured for the demo's act 5.
 *
 * Rules:
 * - Owns ccrun_time_child: argv (ccrun with --json) run by
 *   ccai_run_capture (common/ccai_capture.h, shared with ccbench switch):
 *   its standard output through a pipe, the wall time from the spawn to the
 *   reap.
 * - The child records no CCALLOC_TRACE (the variable is taken out of its
 *   environment): the file is this process's, which holds it (its lock)
 *   while the child runs, so the child would be refused it and, as any
 *   ccrun refused its trace, exit 1; nor is a trace's cost in the figure.
 * - The child's own "run" phases are taken out of the figure by the caller
 *   (the work is the same either way): *run_ms is the sum of the
 *   "time_ms" of every phase named "run" in its JSON, found by text (the
 *   document is report.c's, one phase object per line).
 * - Errors: -1 when no child ran to its exit or its output was lost, the
 *   reason in words in the message (ccr_last_error), as ccbench switch
 *   says it (ccai_capture_failure): "ARGV0 could not be run: REASON"
 *   (pipe, spawn: no descriptor left, RLIMIT_NPROC, an exec refused), "ARGV0 was killed by
 *   signal N (NAME)", or "ARGV0 ran (exit N), but its output could not be
 *   kept: REASON" (host memory short for it, the child reaped all the
 *   same); else the child's exit status, the message untouched.
 * - Costs: one spawn (vfork + exec), its output read once, one text scan of it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ccai_capture.h" /* common/: spawn, exec, the output through a pipe, timed */
#include "ccrun.h"

/* Sum of "time_ms" of the phases named "run" in a ccrun --json document. */
static double run_time(const char *doc) {
    double sum = 0;
    for (const char *p = strstr(doc, "{\"phase\": \"run\""); p; p = strstr(p + 1, "{\"phase\": \"run\"")) {
        const char *t = strstr(p, "\"time_ms\": ");
        const char *end = strchr(p, '}');
        if (t && (!end || t < end))
            sum += strtod(t + 11, NULL);
    }
    return sum;
}

int ccrun_time_child(char *const argv[], double *wall_ms, double *run_ms) {
    *run_ms = 0;
    char *out = NULL, how[160];
    int signo, status = 0;
    int rc = ccai_run_capture(argv, "CCALLOC_TRACE", &out, wall_ms, &signo, &status), err = errno;
    if (out)
        *run_ms = run_time(out);
    free(out);
    if (rc < 0) {
        cca_set_error(CCA_ERR_IO, "%s %s", argv[0], ccai_capture_failure(rc, signo, status, err, how, sizeof how));
        return -1;
    }
    return rc;
}
