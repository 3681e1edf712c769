/*
 * cmd_driver.c — `ccbench driver [--reps N] [--vm-granularity B] [--out DIR]`:
 * what the GPU driver really charges, on an idle device, N pairs per size
 * (default 50):
 *   - cudaMalloc and cudaFree of 2 MiB .. 1 GiB timed alone
 *     (strategy_cuda.cu): what a classic segment costs, the figures the
 *     simulated device's --upstream-latency models;
 *   - the CUDA upstream's vm_map and vm_unmap of the same sizes in granules
 *     (driver_vm.c): what an expandable segment costs instead, the figures
 *     --vm-latency models. One table per granule: the driver's minimum (2
 *     MiB on current GPUs) and 4 and 16 times it (cca_upstream_cuda_create_with's
 *     vm_granularity: one physical allocation per granule, so the calls per
 *     byte fall as it grows), or only the one --vm-granularity names; a size
 *     below the granule is measured as one granule. Skipped, with the
 *     reason in its section, where the device or driver has no VMM.
 * Without a GPU: "skipped: REASON" and exit 0. Tables on stdout, or
 * driver.md, driver.csv and driver_vm.csv into --out.
 */
#include "ccalloc.h"
#include "ccbench.h"

static const size_t sizes[] = {(size_t)2 << 20, (size_t)20 << 20, (size_t)64 << 20, (size_t)256 << 20,
                               (size_t)1 << 30};
enum { NSIZES = sizeof sizes / sizeof sizes[0], NPAGES = 3 };
static const size_t times_min[NPAGES] = {1, 4, 16}; /* granules measured, in the driver's minimum */

/* The vm rows of the CUDA upstream on GPU 0 with granule `page` (0: the
 * driver's minimum), appended at rows + *n: 0 measured, 1 skipped, -1
 * error (why says which). *page_out: the granule used. */
static int measure_vm(size_t page, int reps, ccb_driver_vm_row *rows, size_t *n, size_t *page_out, char *why,
                      size_t whylen) {
    cca_upstream *u = NULL;
    cca_cuda_options co = {0, page, CCA_VM_PAGES};
    cca_status st = cca_upstream_cuda_create_with(&co, &u);
    if (st != CCA_OK) {
        snprintf(why, whylen, "%s", cca_last_error());
        return st == CCA_ERR_INVALID_ARGUMENT ? -1 : 1;
    }
    size_t g = 0, granules[NSIZES] = {1}, k = 0;
    if (cca_upstream_has_vm(u) && cca_upstream_vm_granularity(u, &g) == CCA_OK)
        for (size_t i = 0; i < NSIZES; i++) {
            size_t c = sizes[i] > g ? sizes[i] / g : 1;
            if (!k || granules[k - 1] != c) /* sizes below the granule: one row */
                granules[k++] = c;
        }
    *page_out = g;
    int rc = ccb_driver_vm_measure(u, granules, k ? k : 1, reps, rows + *n, why, whylen);
    if (rc == 0)
        *n += k;
    cca_upstream_destroy(u);
    return rc;
}

int ccb_cmd_driver(ccb_options *o) {
    int reps = o->reps_given ? o->reps : 50;
    ccb_driver_row rows[NSIZES];
    ccb_driver_vm_row vrows[NPAGES * NSIZES];
    size_t nv = 0;
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
    size_t min = 0, used = 0;
    int vrc = measure_vm(o->vm_granularity, reps, vrows, &nv, &min, vwhy, sizeof vwhy);
    /* larger pages only up to the CUDA upstream's largest (a device whose
     * minimum is above 64 MiB measures fewer tables, not none) */
    for (size_t p = 1; p < NPAGES && vrc == 0 && !o->vm_granularity && min <= CCA_CUDA_MAX_VM_GRANULARITY / times_min[p];
         p++)
        vrc = measure_vm(min * times_min[p], reps, vrows, &nv, &used, vwhy, sizeof vwhy);
    if (vrc < 0)
        fprintf(stderr, "ccbench driver: virtual memory: %s\n", vwhy);
    const ccb_driver_vm_row *vr = vrc == 0 ? vrows : NULL;
    if (!o->out) {
        ccb_write_driver_md(stdout, rows, NSIZES, reps);
        ccb_write_driver_vm_md(stdout, "CUDA (GPU 0)", vr, nv, vwhy);
        return vrc < 0;
    }
    if (ccb_mkdir_p(o->out))
        return 1; /* said by ccb_mkdir_p */
    FILE *md = ccb_open_out(o->out, "driver.md"), *csv = ccb_open_out(o->out, "driver.csv");
    FILE *vcsv = vr ? ccb_open_out(o->out, "driver_vm.csv") : NULL;
    ccb_write_driver_md(md ? md : stdout, rows, NSIZES, reps);
    ccb_write_driver_vm_md(md ? md : stdout, "CUDA (GPU 0)", vr, nv, vwhy);
    if (csv)
        ccb_write_driver_csv(csv, rows, NSIZES);
    if (vcsv)
        ccb_write_driver_vm_csv(vcsv, vrows, nv);
    int bad = ccb_close_out(csv, o->out, "driver.csv") != 0;
    bad |= vr && ccb_close_out(vcsv, o->out, "driver_vm.csv") != 0;
    bad |= md && ccb_close_out(md, o->out, "driver.md") != 0;
    return md && csv && (!vr || vcsv) && !bad && vrc >= 0 ? 0 : 1;
}
