/*
 * cmd_driver.c — `ccbench driver [--reps N] [--vm-granularity B]
 * [--vm-backing pages|whole-maps] [--out DIR]`: what the GPU driver really
 * charges, on an idle device, N pairs per size (default 50):
 *   - cudaMalloc and cudaFree of 2 MiB .. 1 GiB timed alone
 *     (strategy_cuda.cu): what a classic segment costs, the figures the
 *     simulated device's --upstream-latency models;
 *   - pages: the CUDA upstream's vm_map and vm_unmap of the same sizes in
 *     granules (driver_vm.c): what an expandable segment costs instead, the
 *     figures --vm-latency models. One table per granule: the driver's
 *     minimum (2 MiB on current GPUs) and 4 and 16 times it
 *     (cca_upstream_cuda_create_with's vm_granularity: one physical
 *     allocation per granule, so the calls per byte fall as it grows), or
 *     only the one --vm-granularity names; a size below the granule is
 *     measured as one granule;
 *   - whole maps: the CUDA upstream made with vm_backing CCA_VM_WHOLE_MAPS
 *     (granule: --vm-granularity, else the driver's minimum), one map +
 *     unmap of 2 MiB, 32 MiB, 128 MiB, 512 MiB and 1 GiB, each ONE
 *     physical allocation, next to cudaMalloc / cudaFree of the same size:
 *     the cudaMalloc table's row where it has the size, else measured here
 *     the same way for this table.
 * --vm-backing pages measures only the page tables, whole-maps only the
 * whole-maps table; without it, both (ccb_driver_tables). A virtual-memory
 * size the device cannot hold is a row saying so. Skipped, with the reason
 * in its section, where the device or driver has no VMM.
 * An operand is a usage error (exit 2), before anything runs.
 * Without a GPU: "skipped: REASON" and exit 0. Tables on stdout, or
 * driver.md, driver.csv, driver_vm.csv (pages) and driver_whole_maps.csv
 * into --out.
 */
#include "ccalloc.h"
#include "ccbench.h"

static const size_t sizes[] = {(size_t)2 << 20, (size_t)20 << 20, (size_t)64 << 20, (size_t)256 << 20,
                               (size_t)1 << 30};
static const size_t whole_sizes[] = {(size_t)2 << 20, (size_t)32 << 20, (size_t)128 << 20, (size_t)512 << 20,
                                     (size_t)1 << 30};
enum {
    NSIZES = sizeof sizes / sizeof sizes[0],
    NPAGES = 3,
    NWHOLE = sizeof whole_sizes / sizeof whole_sizes[0],
};
static const size_t times_min[NPAGES] = {1, 4, 16}; /* granules measured, in the driver's minimum */

int ccb_driver_tables(const ccb_options *o) {
    if (!o->vm_backing_given)
        return CCB_DRIVER_PAGES | CCB_DRIVER_WHOLE_MAPS;
    return o->vm_backing == CCA_VM_WHOLE_MAPS ? CCB_DRIVER_WHOLE_MAPS : CCB_DRIVER_PAGES;
}

/* The CUDA upstream on GPU 0 with granule `page` (0: the driver's minimum)
 * and vm_backing `backing`: 0 made, 1 none here (skipped), -1 refused
 * options (why says which). */
static int cuda_upstream(size_t page, int backing, cca_upstream **u, char *why, size_t whylen) {
    cca_cuda_options co = {.device = 0, .vm_granularity = page, .vm_backing = backing};
    cca_status st = cca_upstream_cuda_create_with(&co, u);
    if (st == CCA_OK)
        return 0;
    snprintf(why, whylen, "%s", cca_last_error());
    return st == CCA_ERR_INVALID_ARGUMENT ? -1 : 1;
}

/* The vm rows of the CUDA upstream on GPU 0 with granule `page` (0: the
 * driver's minimum), appended at rows + *n: 0 measured, 1 skipped, -1
 * error (why says which). *page_out: the granule used. */
static int measure_vm(size_t page, int reps, ccb_driver_vm_row *rows, size_t *n, size_t *page_out, char *why,
                      size_t whylen) {
    cca_upstream *u = NULL;
    int made = cuda_upstream(page, CCA_VM_PAGES, &u, why, whylen);
    if (made != 0)
        return made;
    size_t g = 0, granules[NSIZES] = {1};
    size_t k = ccb_driver_vm_granules(u, sizes, NSIZES, granules, &g);
    *page_out = g;
    int rc = ccb_driver_vm_measure(u, granules, k ? k : 1, reps, rows + *n, why, whylen);
    if (rc == 0)
        *n += k;
    cca_upstream_destroy(u);
    return rc;
}

/* The whole-maps rows of the CUDA upstream on GPU 0 (vm_backing
 * CCA_VM_WHOLE_MAPS, granule `page`, 0: the driver's minimum), and in
 * mrows the cudaMalloc figures of each size: copied from rows (the
 * cudaMalloc table) where it has the size, else measured (a failure leaves
 * reps 0: "—"). 0 measured, 1 skipped, -1 error (why says which). */
static int measure_whole(size_t page, int reps, const ccb_driver_row *rows, ccb_driver_vm_row *wrows, size_t *nw,
                         ccb_driver_row *mrows, char *why, size_t whylen) {
    cca_upstream *u = NULL;
    int made = cuda_upstream(page, CCA_VM_WHOLE_MAPS, &u, why, whylen);
    if (made != 0)
        return made;
    int rc = ccb_driver_vm_whole_maps(u, whole_sizes, NWHOLE, reps, wrows, nw, why, whylen);
    cca_upstream_destroy(u);
    for (size_t i = 0; i < *nw; i++) {
        size_t k = 0;
        while (k < NSIZES && sizes[k] != wrows[i].bytes)
            k++;
        char mwhy[CCB_WHY_MAX];
        if (k < NSIZES)
            mrows[i] = rows[k];
        else if (wrows[i].unfit || ccb_driver_measure(wrows[i].bytes, reps, &mrows[i], mwhy, sizeof mwhy) != 0)
            mrows[i] = (ccb_driver_row){.size = wrows[i].bytes};
    }
    return rc;
}

int ccb_cmd_driver(ccb_options *o) {
    int reps = o->reps_given ? o->reps : 50;
    ccb_driver_row rows[NSIZES];
    ccb_driver_vm_row vrows[NPAGES * NSIZES];
    size_t nv = 0;
    char why[CCB_WHY_MAX] = "", vwhy[CCB_WHY_MAX] = "";
    if (ccb_no_operands(o, "driver"))
        return 2;
    if (o->out && ccb_mkdir_p(o->out))
        return 1; /* said and counted: before anything runs, a skip included */
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
    int tables = ccb_driver_tables(o), vrc = 1, wrc = 1;
    size_t min = 0, used = 0, nw = 0;
    if (tables & CCB_DRIVER_PAGES) {
        vrc = measure_vm(o->vm_granularity, reps, vrows, &nv, &min, vwhy, sizeof vwhy);
        /* larger pages only up to the CUDA upstream's largest (a device whose
         * minimum is above 64 MiB measures fewer tables, not none) */
        for (size_t p = 1;
             p < NPAGES && vrc == 0 && !o->vm_granularity && min <= CCA_CUDA_MAX_VM_GRANULARITY / times_min[p]; p++)
            vrc = measure_vm(min * times_min[p], reps, vrows, &nv, &used, vwhy, sizeof vwhy);
        if (vrc < 0)
            fprintf(stderr, "ccbench driver: virtual memory: %s\n", vwhy);
    }
    ccb_driver_vm_row wrows[NWHOLE];
    ccb_driver_row mrows[NWHOLE];
    char wwhy[CCB_WHY_MAX] = "";
    if (tables & CCB_DRIVER_WHOLE_MAPS) {
        wrc = measure_whole(o->vm_granularity, reps, rows, wrows, &nw, mrows, wwhy, sizeof wwhy);
        if (wrc < 0)
            fprintf(stderr, "ccbench driver: whole maps: %s\n", wwhy);
    }
    const ccb_driver_vm_row *vr = vrc == 0 ? vrows : NULL, *wr = wrc == 0 ? wrows : NULL;
    int failed = vrc < 0 || wrc < 0;
    FILE *md = stdout, *csv = NULL, *vcsv = NULL, *wcsv = NULL;
    if (o->out) { /* made before anything ran */
        md = ccb_open_out(o->out, "driver.md");
        csv = ccb_open_out(o->out, "driver.csv");
        vcsv = vr ? ccb_open_out(o->out, "driver_vm.csv") : NULL;
        wcsv = wr ? ccb_open_out(o->out, "driver_whole_maps.csv") : NULL;
        failed |= !md || !csv || (vr && !vcsv) || (wr && !wcsv);
    }
    FILE *m = md ? md : stdout;
    ccb_write_driver_md(m, rows, NSIZES, reps);
    int bad = 0;
    if (tables & CCB_DRIVER_PAGES)
        bad |= ccb_write_driver_vm_md(m, "CUDA (GPU 0)", vr, nv, vwhy);
    if (tables & CCB_DRIVER_WHOLE_MAPS)
        bad |= ccb_write_driver_whole_maps_md(m, "CUDA (GPU 0)", wr, nw, mrows, nw, wwhy);
    int to_file = o->out && md; /* else standard output */
    failed |= ccb_out_formatted(bad, to_file ? o->out : NULL, to_file ? "driver.md" : "standard output") != 0;
    if (!o->out)
        return failed;
    if (csv)
        ccb_write_driver_csv(csv, rows, NSIZES);
    if (vcsv)
        ccb_write_driver_vm_csv(vcsv, vrows, nv);
    if (wcsv)
        ccb_write_driver_whole_maps_csv(wcsv, wrows, nw, mrows, nw);
    failed |= csv && ccb_close_out(csv, o->out, "driver.csv") != 0;
    failed |= vcsv && ccb_close_out(vcsv, o->out, "driver_vm.csv") != 0;
    failed |= wcsv && ccb_close_out(wcsv, o->out, "driver_whole_maps.csv") != 0;
    failed |= md && ccb_close_out(md, o->out, "driver.md") != 0;
    return failed ? 1 : 0;
}
