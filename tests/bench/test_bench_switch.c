/*
 * test_bench_switch.c — bench/switch.c called in the test process with the
 * stand-in ccrun (tests/fixtures/fake_ccrun.sh): what it says of a ccrun
 * document it could not read.
 *
 * - cJSON allocates through hooks (cJSON_InitHooks): a hook that refuses
 *   every allocation, as malloc does without host memory (NULL, errno
 *   ENOMEM), stands for host memory short while the document is parsed.
 * - ccbench's own allocations fail one at a time where a test arms
 *   tests/support/malloc_fault.h (cJSON is a shared library: its hooks
 *   stand for it instead).
 * - Built only where ccbench has cJSON (CCB_HAVE_CJSON: without it switch
 *   reports skipped).
 */
#include <criterion/criterion.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "capture.h" /* tests/support: standard output and error, kept */
#include "ccbench.h"
#include "malloc_fault.h" /* tests/support: tu_malloc_arm */
#include "source_dir.h"   /* tests/support: the fixtures */

static void *refuse(size_t n) {
    (void)n;
    errno = ENOMEM;
    return NULL;
}

/* A document host memory could not hold was said to be "not one JSON
 * document" (cJSON_Parse returns NULL for both): a valid one must not be
 * called invalid. */
Test(bench_switch, a_document_host_memory_cannot_parse_says_so) {
    char fake[4096];
    snprintf(fake, sizeof fake, "%s/tests/fixtures/fake_ccrun.sh", tu_source_dir());
    setenv("FAKE_CCRUN", "figures", 1);
    char *argv[] = {"switch", "--ccrun", fake, "a", "b", NULL};
    cJSON_Hooks hooks = {refuse, free};
    tu_capture c;
    tu_capture_begin(&c, 2);
    cJSON_InitHooks(&hooks);
    int rc = ccb_cmd_switch(5, argv);
    cJSON_InitHooks(NULL);
    char *err = tu_capture_end(&c);
    cr_assert_eq(rc, 1, "exit %d; stderr: %s", rc, err);
    cr_assert_null(strstr(err, "not one JSON document"), "a valid document called invalid: %s", err);
    cr_assert_not_null(strstr(err, "out of host memory"), "stderr: %s", err);
    free(err);
}

/* switch.md's first line names the options as given (--iters with 1,100
 * leading zeros is 1): over 1 KiB, host memory formats it, and without it
 * the line reads "(out of host memory for the message)". That is an output
 * not written whole, counted (exit 1), on standard output and in
 * switch.md alike; it exited 0. */
Test(bench_switch, a_line_host_memory_cannot_format_fails_the_output) {
    char fake[4096], iters[1200];
    snprintf(fake, sizeof fake, "%s/tests/fixtures/fake_ccrun.sh", tu_source_dir());
    memset(iters, '0', 1100);
    snprintf(iters + 1100, sizeof iters - 1100, "1");
    setenv("FAKE_CCRUN", "figures", 1);
    for (int to_file = 0; to_file < 2; to_file++) {
        int lost_seen = 0;
        /* a fresh directory per k (a file written once is not written
         * again), all kept until the sweep ends: a file removed at once
         * would give its identity (inode) to the next k's, noted already
         * (outputs.c), and that k would make fewer allocations and end the
         * sweep early */
        char root[] = "/tmp/ccbench_switchXXXXXX";
        cr_assert_not_null(mkdtemp(root));
        for (long k = 1;; k++) {
            char dir[64];
            snprintf(dir, sizeof dir, "%s/%ld", root, k);
            cr_assert_eq(mkdir(dir, 0700), 0);
            char *file_argv[] = {"switch", "--iters", iters, "--ccrun", fake, "--out", dir, "a", "b", NULL};
            char *stdout_argv[] = {"switch", "--iters", iters, "--ccrun", fake, "a", "b", NULL};
            unsigned before = ccb_out_failures();
            tu_capture_std c;
            tu_capture_std_begin(&c);
            tu_malloc_arm(k, false);
            int rc = to_file ? ccb_cmd_switch(9, file_argv) : ccb_cmd_switch(7, stdout_argv);
            long injected = tu_malloc_disarm();
            char *out, *err;
            tu_capture_std_end(&c, &out, &err);
            char md[8192] = "";
            if (to_file) {
                char path[256];
                snprintf(path, sizeof path, "%s/switch.md", dir);
                FILE *f = fopen(path, "r");
                if (f) {
                    md[fread(md, 1, sizeof md - 1, f)] = '\0';
                    fclose(f);
                }
            }
            if (strstr(to_file ? md : out, "(out of host memory for the message)")) {
                lost_seen = 1;
                cr_assert(rc != 0 && ccb_out_failures() > before, "%s, k %ld: a line lost and exit %d, %u counted",
                          to_file ? "switch.md" : "standard output", k, rc, ccb_out_failures() - before);
            }
            free(out);
            free(err);
            if (!injected)
                break;
        }
        char rm[300];
        snprintf(rm, sizeof rm, "rm -rf '%s'", root);
        cr_assert_eq(system(rm), 0);
        cr_assert(lost_seen, "the sweep never reached the line (%s)", to_file ? "switch.md" : "standard output");
    }
}
