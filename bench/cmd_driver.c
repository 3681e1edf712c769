/*
 * cmd_driver.c — `ccbench driver [--reps N] [--out DIR]`: what the GPU
 * driver really charges, on an idle device, N pairs per size (default 50):
 *   - cudaMalloc and cudaFree of 2 MiB .. 1 GiB timed alone
 *     (strategy_cuda.cu): what a classic segment costs, the figures the
 *     simulated device's --upstream-latency models;
 *   - the CUDA upstream's vm_map and vm_unmap of 1 .. 512 granules (the same
 *     sizes at 2 MiB granules; driver_vm.c): what an expandable segment
 *     costs instead, the figures --vm-latency models. Skipped, with the
 *     reason in its section, where the device or driver has no VMM.
 * Without a GPU: "skipped: REASON" and exit 0. Tables on stdout, or
 * driver.md, driver.csv and driver_vm.csv into --out.
 */
#include "ccalloc.h"
#include "ccbench.h"

static const size_t sizes[] = {(size_t)2 << 20, (size_t)20 << 20, (size_t)64 << 20, (size_t)256 << 20,
                               (size_t)1 << 30};
static const size_t granules[] = {1, 10, 32, 128, 512};
enum { NSIZES = sizeof sizes / sizeof sizes[0] };

/* The vm rows of the CUDA upstream on GPU 0: 0 measured, 1 skipped, -1 error (why says which). */
static int measure_vm(int reps, ccb_driver_vm_row *rows, char *why, size_t whylen) {
    cca_upstream *u = NULL;
    if (cca_upstream_cuda_create(0, &u) != CCA_OK) {
        snprintf(why, whylen, "%s", cca_last_error());
        return 1;
    }
    int rc = ccb_driver_vm_measure(u, granules, NSIZES, reps, rows, why, whylen);
    cca_upstream_destroy(u);
    return rc;
}

int ccb_cmd_driver(ccb_options *o) {
    int reps = o->reps_given ? o->reps : 50;
    ccb_driver_row rows[NSIZES];
    ccb_driver_vm_row vrows[NSIZES];
    char why[256] = "", vwhy[512] = "";
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
    int vrc = measure_vm(reps, vrows, vwhy, sizeof vwhy);
    if (vrc < 0)
        fprintf(stderr, "ccbench driver: virtual memory: %s\n", vwhy);
    const ccb_driver_vm_row *vr = vrc == 0 ? vrows : NULL;
    if (!o->out) {
        ccb_write_driver_md(stdout, rows, NSIZES, reps);
        ccb_write_driver_vm_md(stdout, "CUDA (GPU 0)", vr, NSIZES, vwhy);
        return vrc < 0;
    }
    if (ccb_mkdir_p(o->out))
        return 1; /* said by ccb_mkdir_p */
    FILE *md = ccb_open_out(o->out, "driver.md"), *csv = ccb_open_out(o->out, "driver.csv");
    FILE *vcsv = vr ? ccb_open_out(o->out, "driver_vm.csv") : NULL;
    ccb_write_driver_md(md ? md : stdout, rows, NSIZES, reps);
    ccb_write_driver_vm_md(md ? md : stdout, "CUDA (GPU 0)", vr, NSIZES, vwhy);
    if (csv)
        ccb_write_driver_csv(csv, rows, NSIZES);
    if (vcsv)
        ccb_write_driver_vm_csv(vcsv, vrows, NSIZES);
    int bad = ccb_close_out(csv, o->out, "driver.csv") != 0;
    bad |= vr && ccb_close_out(vcsv, o->out, "driver_vm.csv") != 0;
    bad |= md && ccb_close_out(md, o->out, "driver.md") != 0;
    return md && csv && (!vr || vcsv) && !bad && vrc >= 0 ? 0 : 1;
}
