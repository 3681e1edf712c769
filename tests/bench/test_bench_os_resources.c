/*
 * test_bench_os_resources.c — bench/: what ccbench's in-process work takes
 * from the operating system, given back: descriptors, mappings and
 * threads (tests/support/os_counts.h), run after run.
 *
 * - The runs: a generated trace replayed through every preset a CPU runs
 *   (ccalloc's over the simulated device, with its driver-cost passes;
 *   malloc; device-malloc), its result freed; a trace written to a file
 *   and loaded back, plain and gzip, and a FIFO nobody writes and a
 *   directory refused as traces; the vm driver figures on a simulated
 *   device; `ccbench sleep`'s own code (ccb_cmd_sleep_on) on a simulated
 *   device, its copies on the copy engine's thread.
 * - Each is run once before the first count (the C library keeps a
 *   thread's stack and arena for reuse), then again and again: every
 *   count exactly the first's, and no signal's disposition, the thread's
 *   mask, a resource limit or the environment changed, not even by the
 *   first run.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "alloc_test_util.h"
#include "capture.h"
#include "ccbench.h"
#include "os_counts.h"

#define ROUNDS 6

/* ---- replay ------------------------------------------------------------------------ */

static void replay_run(void) {
    ccb_trace t;
    ccb_gen_params p = {.seed = 7, .scale = 0.002};
    cr_assert_eq(ccb_generate("lognormal", &p, &t), 0);
    ccb_replay_options o = {.device_bytes = 64 * MiB,
                            .reps = 1,
                            .timeline_points = 16,
                            .alloc_latency_ns = 1,
                            .free_latency_ns = 1,
                            .driver_reps = 1};
    for (size_t i = 0; i < ccb_preset_count; i++) {
        ccb_result r;
        cr_assert_eq(ccb_replay(&t, ccb_presets[i].name, &o, &r), 0, "%s: %s", ccb_presets[i].name, r.why);
        ccb_result_free(&r);
    }
    ccb_trace_free(&t);
}

Test(bench_os_resources, replays_leave_nothing) {
    tu_os_repeat(replay_run, ROUNDS, "a trace replayed through every preset");
}

/* ---- trace files --------------------------------------------------------------------- */

static char dir[64], plain[128], packed[128], fifo[128], sub[128];

static void setup(void) {
    snprintf(dir, sizeof dir, "/tmp/ccb_os_XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(plain, sizeof plain, "%s/t.csv", dir);
    snprintf(packed, sizeof packed, "%s/t.csv.gz", dir);
    snprintf(fifo, sizeof fifo, "%s/f.csv", dir);
    snprintf(sub, sizeof sub, "%s/d.csv", dir);
    ccb_trace t;
    ccb_gen_params p = {.seed = 3, .scale = 0.01};
    cr_assert_eq(ccb_generate("lognormal", &p, &t), 0);
    FILE *f = fopen(plain, "w");
    cr_assert_not_null(f);
    cr_assert_eq(ccb_trace_write(&t, f), 0);
    cr_assert_eq(fclose(f), 0);
    ccb_trace_free(&t);
    char *text = NULL;
    size_t len = 0;
    f = fopen(plain, "r");
    cr_assert_not_null(f);
    FILE *m = open_memstream(&text, &len);
    for (int c; (c = fgetc(f)) != EOF;)
        fputc(c, m);
    fclose(m);
    fclose(f);
    gzFile z = gzopen(packed, "wb");
    cr_assert_not_null(z);
    cr_assert_eq(gzwrite(z, text, (unsigned)len), (int)len);
    cr_assert_eq(gzclose(z), Z_OK);
    free(text);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    cr_assert_eq(mkdir(sub, 0700), 0);
}

static void teardown(void) {
    unlink(plain);
    unlink(packed);
    unlink(fifo);
    rmdir(sub);
    rmdir(dir);
}

static void load_run(void) {
    char err[512];
    const char *good[] = {plain, packed}, *bad[] = {fifo, sub};
    for (int i = 0; i < 2; i++) {
        ccb_trace t;
        cr_assert_eq(ccb_trace_load(&t, good[i], err, sizeof err), 0, "%s: %s", good[i], err);
        ccb_trace_free(&t);
        cr_assert_neq(ccb_trace_load(&t, bad[i], err, sizeof err), 0, "%s loaded as a trace", bad[i]);
        ccb_trace_free(&t);
    }
}

Test(bench_os_resources, trace_files_loaded_and_refused_leave_nothing, .init = setup, .fini = teardown) {
    tu_os_repeat(load_run, ROUNDS, "traces loaded, a FIFO and a directory refused");
}

/* ---- the vm driver figures and ccbench sleep ------------------------------------------- */

static void driver_vm_run(void) {
    cca_upstream *u = tu_vm_device_backed(64 * MiB, 0, CCA_VM_PAGES);
    size_t granules[] = {1, 4};
    ccb_driver_vm_row rows[2];
    char why[256];
    cr_assert_eq(ccb_driver_vm_measure(u, granules, 2, 2, rows, why, sizeof why), 0, "%s", why);
    cca_upstream_destroy(u);
}

Test(bench_os_resources, driver_vm_figures_leave_nothing) {
    tu_os_repeat(driver_vm_run, ROUNDS, "the vm driver figures");
}

static void sleep_run(void) {
    cca_upstream *u = tu_vm_device_backed(64 * MiB, 0, CCA_VM_WHOLE_MAPS);
    char *argv[] = {"sleep", "--sizes", "1M", "--reps", "2", NULL};
    tu_capture_std c;
    tu_capture_std_begin(&c);
    int rc = ccb_cmd_sleep_on(5, argv, "ccbench sleep --sizes 1M --reps 2", u);
    char *out = NULL, *err = NULL;
    tu_capture_std_end(&c, &out, &err);
    cr_assert_eq(rc, 0, "%s", err);
    free(out);
    free(err);
    cca_upstream_destroy(u);
}

Test(bench_os_resources, ccbench_sleep_leaves_nothing) {
    tu_os_repeat(sleep_run, ROUNDS, "ccbench sleep on the simulated device");
}
