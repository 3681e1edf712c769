/*
 * test_ccrun_parts.c — runtime/ccrun/report.c and child.c, the parts whose
 * figures test_ccrun.sh cannot pin from the outside:
 *
 * - ccrun_baseline_note: "device free == baseline", else the exact
 *   difference "below" or "above" it (ccrun's own runs always come back to
 *   the baseline on the simulated device, so only a call shows the others).
 * - ccrun_alloc_conf: "policy:X" and --conf joined by one comma, none when
 *   either is missing or empty.
 * - ccrun_time_child: *run_ms is the sum of the "time_ms" of every phase
 *   named "run" in the child's JSON (demo act 5 takes it out of a process
 *   per model's cost), other phases not counted; the child's exit status
 *   returned. The child here is /bin/sh printing a fixed document.
 * - ccrun_time_child when no child ran to its exit (-1): the message says
 *   why in words, as ccbench switch does (demo act 5 prefixes the file and
 *   prints it; it said "exited -1"): no descriptor left for the pipe
 *   (RLIMIT_NOFILE lowered to the lowest free descriptor, put back before
 *   any assert) is "could not be run: Too many open files"; a child killed
 *   by a signal is "was killed by signal 9 (Killed)"; a program that
 *   cannot be executed is "could not be run: No such file or directory".
 * - ccrun_time_child when host memory is short (each host allocation
 *   refused in turn, malloc_fault.h): -1; one refused before the spawn
 *   (the environment's list, the spawn's own) is "could not be run", one
 *   after it (the output's buffer) says the child ran and its output was
 *   lost, not that it "could not be run".
 * - ccrun_phase when host memory is short for a row (each host allocation
 *   of two rows refused in turn, in a child process that then closes its
 *   standard output as ccrun's main does): a row, its note or its place in
 *   the --json document that could not be kept is a report lost, as a
 *   failed write is: "standard output" named on stderr and exit 1, never a
 *   document that looks whole without it.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ccrun.h"
#include "malloc_fault.h" /* tests/support/ */

Test(ccrun_parts, baseline_note_says_equal_below_or_above_exactly) {
    char buf[96];
    ccr_release_info r = {.device_free_baseline = 64u << 20, .device_free_after = 64u << 20, .device_free_read = 1};
    cr_assert_str_eq(ccrun_baseline_note(&r, buf, sizeof buf), "device free == baseline");
    r.device_free_after = (64u << 20) - (3u << 20);
    cr_assert_str_eq(ccrun_baseline_note(&r, buf, sizeof buf), "device free 3.00 MiB below baseline");
    r.device_free_after = (64u << 20) + 512;
    cr_assert_str_eq(ccrun_baseline_note(&r, buf, sizeof buf), "device free 512 B above baseline");
    r.device_free_read = 0; /* the release could not read the device: no figure */
    r.device_free_after = 0;
    cr_assert_str_eq(ccrun_baseline_note(&r, buf, sizeof buf), "device free unknown (mem_info refused)");
}

Test(ccrun_parts, a_rise_is_said_unknown_when_a_count_was_not_read) {
    char buf[64];
    cr_assert_str_eq(ccrun_rise_text(1, 1u << 20, 3u << 20, buf, sizeof buf), "+2.00 MiB");
    cr_assert_str_eq(ccrun_rise_text(1, 3u << 20, 1u << 20, buf, sizeof buf), "+0 B", "a fall is no rise");
    cr_assert_str_eq(ccrun_rise_text(0, 0, 3u << 20, buf, sizeof buf), "unknown (mem_info refused)");
    cr_assert_str_eq(ccrun_rise_text(0, 1u << 20, 0, buf, sizeof buf), "unknown (mem_info refused)");
}

Test(ccrun_parts, alloc_conf_joins_policy_and_conf_with_one_comma) {
    ccrun_options o = {0};
    char *s = ccrun_alloc_conf(&o, NULL);
    cr_assert_str_eq(s, "");
    free(s);
    o.policy = "growth";
    o.conf = "";
    cr_assert_str_eq(s = ccrun_alloc_conf(&o, NULL), "policy:growth", "an empty --conf adds no comma");
    free(s);
    o.conf = "history:8";
    cr_assert_str_eq(s = ccrun_alloc_conf(&o, NULL), "policy:growth,history:8");
    free(s);
    cr_assert_str_eq(s = ccrun_alloc_conf(&o, "greedy"), "policy:greedy,history:8", "the argument overrides --policy");
    free(s);
    o.policy = NULL;
    cr_assert_str_eq(s = ccrun_alloc_conf(&o, NULL), "history:8");
    free(s);
}

Test(ccrun_parts, a_childs_run_phases_are_summed_and_no_other) {
    /* report.c's document: one phase object per line */
    char *argv[] = {"/bin/sh", "-c",
                    "printf '%s\\n' '{' '  \"phases\": [' "
                    "'    {\"phase\": \"load\", \"model\": \"A\", \"time_ms\": 100.000, \"note\": \"\"},' "
                    "'    {\"phase\": \"run\", \"model\": \"A\", \"time_ms\": 1.500, \"note\": \"\"},' "
                    "'    {\"phase\": \"run\", \"model\": \"A\", \"time_ms\": 2.250, \"note\": \"\"},' "
                    "'    {\"phase\": \"unload\", \"model\": \"A\", \"time_ms\": 40.000, \"note\": \"\"}' "
                    "'  ]' '}'; exit 3",
                    NULL};
    double wall = -1, run = -1;
    cr_assert_eq(ccrun_time_child(argv, &wall, &run), 3, "the child's exit status");
    cr_assert_eq(run, 3.75, "run phases: 1.5 + 2.25, got %.3f", run);
    cr_assert_geq(wall, 0.0);
}

Test(ccrun_parts, a_child_that_cannot_start_says_why) {
    int lowest = open("/dev/null", O_RDONLY); /* the pipe's first descriptor would be this one */
    cr_assert_geq(lowest, 0, "open: %s", strerror(errno));
    close(lowest);
    struct rlimit old, low;
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
    low = old;
    low.rlim_cur = (rlim_t)lowest; /* no descriptor left: pipe() fails with EMFILE */
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &low), 0, "setrlimit: %s", strerror(errno));
    char *argv[] = {"/bin/sh", "-c", "exit 0", NULL};
    double wall = -1, run = -1;
    cca_clear_error();
    int rc = ccrun_time_child(argv, &wall, &run);
    int set_back = setrlimit(RLIMIT_NOFILE, &old);
    cr_assert_eq(set_back, 0, "setrlimit back: %s", strerror(errno));
    cr_assert_eq(rc, -1, "no child ran");
    cr_assert_eq(run, 0.0);
    char want[256];
    snprintf(want, sizeof want, "/bin/sh could not be run: %s", strerror(EMFILE));
    cr_assert_str_eq(ccr_last_error(), want);
}

/* A program that cannot be executed is no child that ran: -1 and the
 * reason, never an exit status 127 (ccrun.h said 127) */
Test(ccrun_parts, a_child_whose_exec_fails_is_not_run) {
    char *argv[] = {"/nonexistent/ccrun", "--json", NULL};
    double wall = -1, run = -1;
    cr_assert_eq(ccrun_time_child(argv, &wall, &run), -1, "no exit status");
    char want[256];
    snprintf(want, sizeof want, "/nonexistent/ccrun could not be run: %s", strerror(ENOENT));
    cr_assert_str_eq(ccr_last_error(), want);
}

Test(ccrun_parts, a_child_killed_by_a_signal_says_which) {
    char *argv[] = {"/bin/sh", "-c", "kill -9 $$", NULL};
    double wall = -1, run = -1;
    cca_clear_error();
    cr_assert_eq(ccrun_time_child(argv, &wall, &run), -1, "no exit status");
    char want[256];
    snprintf(want, sizeof want, "/bin/sh was killed by signal 9 (%s)", strsignal(9));
    cr_assert_str_eq(ccr_last_error(), want);
}

Test(ccrun_parts, a_child_whose_output_could_not_be_kept_says_it_ran) {
    /* the n-th allocation refused, for each n until one is refused after
     * the spawn (the output's buffer): before it, nothing ran ("could not
     * be run", the environment's list or the spawn's own); from it, the
     * child ran to its exit and its output is lost */
    char *argv[] = {"/bin/sh", "-c", "echo '{}'; exit 0", NULL};
    char not_run[256], lost[256];
    snprintf(not_run, sizeof not_run, "/bin/sh could not be run: %s", strerror(ENOMEM));
    snprintf(lost, sizeof lost, "/bin/sh ran (exit 0), but its output could not be kept: %s", strerror(ENOMEM));
    bool ran = false;
    for (long n = 1; n <= 32 && !ran; n++) {
        double wall = -1, run = -1;
        cca_clear_error();
        tu_malloc_arm(n, false);
        int rc = ccrun_time_child(argv, &wall, &run);
        long injected = tu_malloc_disarm();
        if (!injected)
            break; /* no n-th allocation: the run went through whole */
        cr_assert_eq(rc, -1, "allocation %ld refused: no figure", n);
        cr_assert_eq(run, 0.0);
        ran = strcmp(ccr_last_error(), lost) == 0;
        if (!ran)
            cr_assert_str_eq(ccr_last_error(), not_run, "allocation %ld refused", n);
    }
    cr_assert(ran, "no refused allocation came after the spawn");
}

/* ccrun_parse_options reads its argv whole at every call, not from where
 * an earlier call's getopt stopped: the tests parse many command lines in
 * one process. */
Test(ccrun_parts, each_parse_starts_from_the_first_argument) {
    for (int i = 0; i < 3; i++) {
        char *argv[] = {"ccrun", "--device", "host", "--iters", "5", "--json", "--sleep", "mlp:8x8:relu", NULL};
        ccrun_options o;
        cr_assert_eq(ccrun_parse_options(8, argv, &o), 0, "parse %d", i);
        cr_expect_eq(o.device, CCR_DEVICE_HOST, "parse %d", i);
        cr_expect_eq(o.iters, 5, "parse %d", i);
        cr_expect(o.json && o.sleep, "parse %d", i);
        cr_expect_eq(o.n_models, 1, "parse %d", i);
    }
}

/* One child: an engine, a --json report, host allocation k of two rows
 * refused; then the document and ccrun_close_stdout, whose code it exits
 * with (stderr: the test's file). *refused: whether one was refused. */
static int rows_with_allocation_refused(long k, const char *err_path, bool *refused) {
    int pipefd[2];
    cr_assert_eq(pipe(pipefd), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(pipefd[0]);
        int fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, STDERR_FILENO);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, STDOUT_FILENO);
        ccr_engine_options eo;
        ccr_engine_options_default(&eo);
        eo.device = CCR_DEVICE_HOST;
        eo.host_capacity = 64 << 20;
        ccr_engine *e = NULL;
        if (ccr_engine_create(&eo, &e) != CCR_OK)
            _exit(90);
        ccrun_report rep = {.out = stdout, .json = 1};
        tu_malloc_arm(k, false);
        ccrun_phase(&rep, e, "start", "", 0, "a note of %d bytes", 20);
        ccrun_phase(&rep, e, "load", "mlp:8x8", 1.5, "another note");
        char hit = tu_malloc_disarm() > 0;
        ccrun_json_document(&rep, e, NULL, 0);
        ccrun_report_free(&rep);
        ccr_engine_destroy(e);
        (void)!write(pipefd[1], &hit, 1);
        _exit(ccrun_close_stdout(CCRUN_OK));
    }
    close(pipefd[1]);
    char hit = 0;
    cr_assert_eq(read(pipefd[0], &hit, 1), 1, "the child reported");
    close(pipefd[0]);
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status), "the child exited");
    *refused = hit;
    return WEXITSTATUS(status);
}

Test(ccrun_parts, a_row_host_memory_could_not_keep_is_a_lost_report) {
    char err_path[] = "/tmp/ccrun_parts_err_XXXXXX";
    int fd = mkstemp(err_path);
    cr_assert_geq(fd, 0);
    close(fd);
    long refusals = 0;
    for (long k = 1; k < 20; k++) {
        bool refused = false;
        int rc = rows_with_allocation_refused(k, err_path, &refused);
        char err[1024] = "";
        FILE *f = fopen(err_path, "r");
        cr_assert_not_null(f);
        size_t n = fread(err, 1, sizeof err - 1, f);
        err[n] = '\0';
        fclose(f);
        if (!refused) {
            cr_expect_eq(rc, CCRUN_OK, "k=%ld: nothing refused: exit 0; stderr: %s", k, err);
            break;
        }
        refusals++;
        cr_expect_eq(rc, CCRUN_ERR_MODEL, "k=%ld: a row lost is a report lost: exit 1; stderr: %s", k, err);
        cr_expect_not_null(strstr(err, "standard output"), "k=%ld: stderr names the output: %s", k, err);
    }
    cr_expect_geq(refusals, 2, "the rows' note and place were refused in turn");
    unlink(err_path);
}
