/*
 * test_ccrun_sleep.c — runtime/ccrun/run.c (`ccrun --sleep A B A B`) and
 * demo.c (act 5): the compare of a woken model's outputs with its first run
 * fires, and only when it should.
 *
 * - ccrun's own code runs on a device the test made: the simulated device
 *   wrapped in tu_faulty (ccrun_double.h).
 * - Only a wake copies to the device through the upstream (a load writes
 *   the weights itself), so copy 1 to the device is the first wake's: A's.
 *   The double inverts byte 2 of it (in A's first live block, a layer-0
 *   parameter: an exponent bit and the high mantissa bits of a float, a
 *   finite number about twice or half the old one).
 * - A is a gelu model: every unit passes a change on. With relu the same
 *   byte left A's outputs bit-identical (a unit off for the whole batch
 *   hides it): the hash compares outputs, not weights.
 * - Clean: exit 0, each woken run "= its first run" (the demo's with act
 *   5's file in a relative $TMPDIR named like an option, "-tmp": the child
 *   ccrun read it as an option, exit 2). Corrupted: exit 1, the
 *   woken run's row CHANGED, the error naming the model and both hashes
 *   (the first run's as its row showed it); the demo's act 5 says CHANGED
 *   with the woken hash in its summary and exits 1.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ccrun_double.h"

#define SPEC_A "mlp:64x256x256x10:gelu:softmax:seed=1"
#define SPEC_B "mlp:64x256x256x256x10:relu:softmax:seed=2"

/* The 16 hex digits after `key` in the first line of `text` holding both
 * `line_has` and key; asserts there is one. */
static unsigned long long hash_after(const char *text, const char *line_has, const char *key) {
    for (const char *p = text; p && *p;) {
        const char *end = strchr(p, '\n');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        char line[1024];
        snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line ? n : sizeof line - 1), p);
        const char *k = strstr(line, key);
        unsigned long long h;
        if (strstr(line, line_has) && k && sscanf(k + strlen(key), "%16llx", &h) == 1)
            return h;
        p = end ? end + 1 : NULL;
    }
    cr_assert_fail("no line with '%s' and '%s':\n%s", line_has, key, text);
    return 0;
}

/* A corrupted run: one byte inverted, exit 1, and *first (A's first run,
 * the row holding first_has) differs from *woken (the row holding
 * woken_has). */
static void expect_changed(const tu_faulty *f, const ccrun_result *r, const char *first_has, const char *woken_has,
                           unsigned long long *first, unsigned long long *woken) {
    cr_expect_eq(f->corrupted, 1, "the double inverted one byte of A's wake");
    cr_expect_eq(r->rc, CCRUN_ERR_MODEL, "changed outputs exit 1; stdout:\n%s\nstderr:\n%s", r->out, r->err);
    *first = hash_after(r->out, first_has, "outputs ");
    *woken = hash_after(r->out, woken_has, "outputs ");
    cr_expect_neq(*woken, *first);
}

static char *sleep_argv[] = {"ccrun", "--device", "host", "--iters", "2", "--sleep", SPEC_A, SPEC_B, SPEC_A, SPEC_B,
                             NULL};

Test(ccrun_sleep, clean_wakes_are_the_first_runs) {
    tu_faulty f;
    ccrun_result r = ccrun_on_double(&f, &(ccrun_setup){.capacity = 256 * MiB}, 10, sleep_argv);
    cr_assert_eq(r.rc, CCRUN_OK, "exit 0; stdout:\n%s\nstderr:\n%s", r.out, r.err);
    cr_expect_eq(tu_count(r.out, "(its first run)"), 2, "A's and B's first runs:\n%s", r.out);
    cr_expect_eq(tu_count(r.out, " = its first run"), 2, "both woken runs the same:\n%s", r.out);
    cr_expect_eq(tu_count(r.out, "CHANGED"), 0, "%s", r.out);
    cr_expect_eq(r.err[0], '\0', "nothing on stderr: %s", r.err);
    cr_expect_gt(f.copies_in, 0, "the wakes copied through the double");
    cr_expect_eq(f.corrupted, 0);
    ccrun_result_free(&r);
}

Test(ccrun_sleep, corrupted_wake_changes_the_hash) {
    tu_faulty f;
    ccrun_result r = ccrun_on_double(&f, &(ccrun_setup){.capacity = 256 * MiB, .corrupt_in_at = 1}, 10, sleep_argv);
    unsigned long long first, woken;
    expect_changed(&f, &r, "(its first run)", " CHANGED", &first, &woken);
    char want[256];
    snprintf(want, sizeof want,
             "ccrun: error: woken model '" SPEC_A "': outputs changed (hash %016llx, first run %016llx)\n", woken,
             first);
    cr_expect_not_null(strstr(r.err, want), "stderr says '%s':\n%s", want, r.err);
    cr_expect_not_null(strstr(r.err, "ccrun: after the error the allocator holds 0 live bytes\n"), "%s", r.err);
    cr_expect_eq(tu_count(r.out, "\nwake "), 1, "the sequence stops at A's changed run: B is not woken:\n%s", r.out);
    ccrun_result_free(&r);
}

static char *demo_argv[] = {"ccrun", "--demo", "--device", "host", "--capacity", "128M", NULL};

#define WOKEN "A woken: its outputs                     "

/* Clean, and with act 5's file in a relative $TMPDIR that reads like an
 * option ("-tmp"): the child ccrun must take that file's path as a MODEL
 * file all the same, and A goes out and back all three ways. */
Test(ccrun_sleep, demo_act5_clean) {
    char dir[] = "/tmp/ccrun_sleep_XXXXXX";
    cr_assert_not_null(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
    cr_assert_eq(chdir(dir), 0, "chdir: %s", strerror(errno)); /* this test's own process */
    cr_assert_eq(mkdir("-tmp", 0700), 0, "mkdir: %s", strerror(errno));
    setenv("TMPDIR", "-tmp", 1);
    tu_faulty f;
    ccrun_result r = ccrun_on_double(&f, &(ccrun_setup){.capacity = 128 * MiB}, 6, demo_argv);
    rmdir("-tmp");
    rmdir(dir);
    cr_assert_eq(r.rc, CCRUN_OK, "exit 0; stdout:\n%s\nstderr:\n%s", r.out, r.err);
    cr_expect_not_null(strstr(r.out, "a child ccrun loaded A from the file"), "%s", r.out);
    unsigned long long h0 = hash_after(r.out, "(A's first outputs)", "outputs ");
    unsigned long long h1 = hash_after(r.out, "5    " WOKEN "bit-identical to before its sleep", "(hash ");
    cr_expect_eq(h1, h0, "the summary's hash is A's first");
    cr_expect_eq(tu_count(r.out, "CHANGED"), 0, "%s", r.out);
    cr_expect_gt(f.copies_in, 0);
    cr_expect_eq(f.corrupted, 0);
    ccrun_result_free(&r);
}

Test(ccrun_sleep, demo_act5_corrupted_wake_fails) {
    tu_faulty f;
    ccrun_result r = ccrun_on_double(&f, &(ccrun_setup){.capacity = 128 * MiB, .corrupt_in_at = 1}, 6,
                                     demo_argv); /* act 5's wake: the demo's only one */
    unsigned long long h0, h1;
    expect_changed(&f, &r, "(A's first outputs)", "(after the wake)", &h0, &h1);
    char want[160];
    snprintf(want, sizeof want, "\n5    " WOKEN "CHANGED (hash %016llx)\n", h1);
    cr_expect_not_null(strstr(r.out, want), "the summary says '%s':\n%s", want, r.out);
    /* A saved after the wake carries the corrupted byte: its reload differs too */
    snprintf(want, sizeof want, "  A's outputs after the reload CHANGED (%016llx, before %016llx)\n", h1, h0);
    cr_expect_not_null(strstr(r.out, want), "'%s':\n%s", want, r.out);
    cr_expect_null(strstr(r.err, "did not run whole"), "every step ran: %s", r.err);
    cr_expect_not_null(strstr(r.err, "ccrun: after the errors every act's allocator holds 0 live bytes at its end\n"),
                       "%s", r.err);
    ccrun_result_free(&r);
}

/* The demo's checks against the device's own count fire: on a device that
 * keeps 64 KiB at every unmap (its free count short of the baseline after
 * a release or a sleep), act 3's releases and act 5's sleep say "!=" and
 * the demo exits 1; where only act 5's sleep keeps memory, act 3 still says
 * "==" and act 5 alone fails the demo. */
#define ACT3 "\n3    device free after each of 3 releases     "
#define ACT5 "\n5    A asleep (loaded, weights on the host)   "

Test(ccrun_sleep, demo_fails_on_a_device_that_keeps_memory) {
    tu_faulty f;
    ccrun_setup s = {.capacity = 128 * MiB, .keep_per_unmap = 64 << 10};
    ccrun_result r = ccrun_on_double(&f, &s, 6, demo_argv);
    cr_expect_gt(f.kept, 0);
    cr_expect_eq(r.rc, CCRUN_ERR_MODEL, "exit 1; stdout:\n%s\nstderr:\n%s", r.out, r.err);
    cr_expect_not_null(strstr(r.out, ACT3 "!= baseline "), "act 3 says the device is short:\n%s", r.out);
    cr_expect_not_null(strstr(r.out, ACT5 "device free != baseline "), "act 5 too:\n%s", r.out);
    cr_expect_null(strstr(r.err, "did not run whole"), "every step ran: %s", r.err);
    ccrun_result_free(&r);
}

Test(ccrun_sleep, demo_act5_fails_when_its_sleep_does_not_give_all_back) {
    tu_faulty f;
    ccrun_setup s = {.capacity = 128 * MiB, .keep_per_unmap = 64 << 10, .keep_after_host_alloc = true};
    ccrun_result r = ccrun_on_double(&f, &s, 6, demo_argv);
    cr_expect_gt(f.kept, 0);
    cr_expect_eq(r.rc, CCRUN_ERR_MODEL, "exit 1; stdout:\n%s\nstderr:\n%s", r.out, r.err);
    cr_expect_not_null(strstr(r.out, ACT3 "== baseline "), "act 3 ran before any sleep:\n%s", r.out);
    cr_expect_not_null(strstr(r.out, ACT5 "device free != baseline "), "act 5's sleep is short:\n%s", r.out);
    cr_expect_not_null(strstr(r.out, WOKEN "bit-identical to before its sleep"), "A's outputs are intact:\n%s", r.out);
    ccrun_result_free(&r);
}
