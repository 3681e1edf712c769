/*
 * test_bench_sleep.c — bench/sleep.c: the check `ccbench sleep` makes after
 * every wake fires, and only when it should.
 *
 * - The command's own code runs (ccb_cmd_sleep_on: the options, the mix,
 *   the pattern, the passes, the report) on a device the test made: the
 *   simulated device wrapped in tu_faulty (tests/support/alloc_test_util.h).
 * - The mix of 1 MiB (seed 1) is one block, so the copies to the device
 *   are numbered: 1 the pattern, then per pass 3 (the wake's, the plain
 *   copy in, the copy in to fresh pages); copy 5 is the second wake's.
 * - Clean: exit 0, the table, no mismatch. The second wake's copy with one
 *   byte inverted: exit 1, the message naming the wake, the domain, the
 *   block and the 8-byte word, and no table. The read-back after the wake
 *   refused: exit 1, the message naming the read-back and the reason.
 * - The host memory a sleep takes, timed alone: three host_allocs per pass
 *   (sleep's, the plain copy's, the timed chunks) and its column; that one
 *   refused: exit 1, the message naming it, everything given back.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "alloc_test_util.h"
#include "capture.h"
#include "ccbench.h"

typedef struct sleep_run {
    int rc;
    char *out, *err; /* what the command wrote on stdout and stderr */
} sleep_run;

/* `ccbench sleep --sizes 1M --reps 2` on the simulated device wrapped in
 * f, whose faults the caller sets through `arm` after the wrapper is made. */
static sleep_run run_sleep(tu_faulty *f, void (*arm)(tu_faulty *)) {
    cca_upstream *inner = tu_vm_device_backed(64 * MiB, 0, CCA_VM_WHOLE_MAPS);
    cca_upstream *u = tu_faulty_create(f, inner, "sx", false);
    if (arm)
        arm(f);
    char *argv[] = {"sleep", "--sizes", "1M", "--reps", "2", NULL};
    tu_capture_std c;
    tu_capture_std_begin(&c);
    sleep_run r = {ccb_cmd_sleep_on(5, argv, "ccbench sleep --sizes 1M --reps 2", u), NULL, NULL};
    tu_capture_std_end(&c, &r.out, &r.err);
    tu_faulty_destroy_clean(u, inner);
    return r;
}

static void sleep_run_free(sleep_run *r) {
    free(r->out);
    free(r->err);
}

Test(bench_sleep, clean_device_passes) {
    tu_faulty f;
    sleep_run r = run_sleep(&f, NULL);
    cr_assert_eq(r.rc, 0, "exit 0; stderr:\n%s", r.err);
    cr_expect_eq(r.err[0], '\0', "nothing on stderr: %s", r.err);
    cr_expect_not_null(strstr(r.out, "\n| 1.00 MiB | 1 | "), "the table's row, one block:\n%s", r.out);
    cr_expect_eq(f.copies_in, 7, "the pattern, then 3 copies to the device per pass");
    cr_expect_eq(f.corrupted, 0);
    cr_expect_eq(f.calls[TU_FAULT_HOST_ALLOC], 7, "the staging buffer, then 3 host_allocs per pass");
    cr_expect_not_null(strstr(r.out, "host_alloc, sleep's chunks GiB/s | the same by cudaHostRegister GiB/s |"),
                       "the columns:\n%s", r.out);
    cr_expect_not_null(strstr(r.out, " | n/a |\n"), "no cudaHostRegister on the simulated device:\n%s", r.out);
    sleep_run_free(&r);
}

/* A run whose device refused one call (armed by `arm`): exit 1, one failure,
 * stderr naming the step (`what`) and the injected reason, no mismatch said
 * and no table printed; run_sleep checks that nothing stays held. */
static void expect_refused(void (*arm)(tu_faulty *), const char *what, const char *injected) {
    tu_faulty f;
    sleep_run r = run_sleep(&f, arm);
    cr_expect_eq(f.failures, 1);
    cr_expect_eq(r.rc, 1, "a refused call exits 1; stderr:\n%s", r.err);
    cr_expect_not_null(strstr(r.err, what), "%s", r.err);
    cr_expect_not_null(strstr(r.err, injected), "%s", r.err);
    cr_expect_null(strstr(r.err, "MISMATCH"), "%s", r.err);
    cr_expect_null(strstr(r.out, "MiB |"), "no table after a failure:\n%s", r.out);
    sleep_run_free(&r);
}

static void corrupt_second_wake(tu_faulty *f) {
    f->corrupt_in_at = 5;
    f->corrupt_byte = 4100; /* in the 8-byte word at byte 4096 */
}

Test(bench_sleep, corrupted_wake_is_a_mismatch) {
    tu_faulty f;
    sleep_run r = run_sleep(&f, corrupt_second_wake);
    cr_expect_eq(f.corrupted, 1, "the double inverted one byte");
    cr_expect_eq(r.rc, 1, "a mismatch exits 1; stderr:\n%s", r.err);
    cr_expect_str_eq(r.err,
                     "ccbench sleep: MISMATCH after wake 2 of the 1048576-byte domain: block 0 (1048576 bytes) "
                     "differs at byte 4096\n");
    cr_expect_eq(f.copies_in, 5, "the pass stops at the mismatch: no plain copy after it");
    cr_expect_null(strstr(r.out, "MiB |"), "no table after a mismatch:\n%s", r.out);
    sleep_run_free(&r);
}

/* The first wake's copy (copy 2 to the device) with the block's last byte
 * inverted: the check reads every word, the last one too. */
static void corrupt_last_word(tu_faulty *f) {
    f->corrupt_in_at = 2;
    f->corrupt_byte = MiB - 1; /* in the 8-byte word at byte 1048568 */
}

Test(bench_sleep, a_mismatch_in_the_last_word_is_seen) {
    tu_faulty f;
    sleep_run r = run_sleep(&f, corrupt_last_word);
    cr_expect_eq(f.corrupted, 1, "the double inverted one byte");
    cr_expect_eq(r.rc, 1, "a mismatch exits 1; stderr:\n%s", r.err);
    cr_expect_str_eq(r.err, "ccbench sleep: MISMATCH after wake 1 of the 1048576-byte domain: block 0 (1048576 bytes) "
                            "differs at byte 1048568\n");
    cr_expect_null(strstr(r.out, "MiB |"), "no table after a mismatch:\n%s", r.out);
    sleep_run_free(&r);
}

/* Copies, both ways: 1 the pattern, 2 sleep's, 3 wake's, 4 the first read-back. */
static void refuse_first_read_back(tu_faulty *f) {
    f->fail_at[TU_FAULT_COPY] = 4;
}

Test(bench_sleep, failed_read_back_fails) {
    expect_refused(refuse_first_read_back, "ccbench sleep: reading a block back: ", "sx: injected copy failure");
}

/* host_alloc calls: 1 the staging buffer, then per pass 3 (sleep's one
 * chunk, the plain copy's buffer, the timed chunks of sleep's host memory
 * alone); call 4 is the first pass's timed one. */
static void refuse_timed_host_alloc(tu_faulty *f) {
    f->fail_at[TU_FAULT_HOST_ALLOC] = 4;
}

Test(bench_sleep, failed_timed_host_alloc_fails_and_gives_everything_back) {
    expect_refused(refuse_timed_host_alloc, "ccbench sleep: host_alloc (sleep's chunks): ",
                   "sx: injected host_alloc failure");
}
