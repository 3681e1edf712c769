/*
 * cmd_driver.c — `ccbench driver [--reps N] [--out DIR]`: what the GPU
 * driver really charges, cudaMalloc and cudaFree of 2 MiB .. 1 GiB timed
 * alone on an idle device (strategy_cuda.cu), N pairs per size (default 50).
 * These are the figures the simulated device's --upstream-latency models.
 * Without a GPU: "skipped: REASON" and exit 0. Table on stdout, or
 * driver.md and driver.csv into --out.
 */
#include "ccbench.h"

static const size_t sizes[] = {(size_t)2 << 20, (size_t)20 << 20, (size_t)64 << 20, (size_t)256 << 20,
                               (size_t)1 << 30};
enum { NSIZES = sizeof sizes / sizeof sizes[0] };

int ccb_cmd_driver(ccb_options *o) {
    int reps = o->reps_given ? o->reps : 50;
    ccb_driver_row rows[NSIZES];
    char why[256] = "";
    for (size_t i = 0; i < NSIZES; i++) {
        int rc = ccb_driver_measure(sizes[i], reps, &rows[i], why, sizeof why);
        if (rc == 1) {
            printf("skipped: %s\n", why);
            return 0;
        }
        if (rc != 0) {
            fprintf(stderr, "ccbench driver: %s\n", why);
            return 1;
        }
    }
    if (!o->out) {
        ccb_write_driver_md(stdout, rows, NSIZES, reps);
        return 0;
    }
    if (ccb_mkdir_p(o->out))
        return 1; /* said by ccb_mkdir_p */
    FILE *md = ccb_open_out(o->out, "driver.md"), *csv = ccb_open_out(o->out, "driver.csv");
    ccb_write_driver_md(md ? md : stdout, rows, NSIZES, reps);
    if (csv)
        ccb_write_driver_csv(csv, rows, NSIZES);
    int bad = ccb_close_out(csv, o->out, "driver.csv") != 0;
    bad |= md && ccb_close_out(md, o->out, "driver.md") != 0;
    return md && !bad ? 0 : 1;
}
