/*
 * driver_vm.c — what an upstream's virtual-memory ops cost: the calls an
 * expandable segment makes where a classic one calls cudaMalloc/cudaFree.
 *
 * One range of address space is reserved for the largest size; then, per
 * size of n granules, `reps` pairs of vm_map + vm_unmap of the range's first
 * n granules, each call timed alone (after one untimed pair). The calls go
 * through the public cca_upstream_vm_* functions, the ones the allocator
 * makes, so a figure includes the upstream's own work around the driver. On
 * the CUDA upstream (upstream_cuda.c) a map of n granules is one
 * cudaMemGetInfo, n x (cuMemCreate + cuMemMap) and one cuMemSetAccess; an
 * unmap, n x cuMemUnmap: the per-granule medians are what ccbench's
 * --vm-latency models on the simulated device.
 *
 * `ccbench driver` runs it on the CUDA upstream (GPU 0); the tests run it on
 * the simulated device with known per-granule latencies. Costs: O(reps) host
 * memory for the samples; the device holds at most the largest size.
 */
#include "ccalloc.h"
#include "ccbench.h"

#include <stdlib.h>
#include <string.h>

int ccb_driver_vm_measure(cca_upstream *u, const size_t *granules, size_t n, int reps, ccb_driver_vm_row *rows,
                          char *why, size_t whylen) {
    memset(rows, 0, n * sizeof *rows);
    if (reps < 1) {
        snprintf(why, whylen, "%d repetitions", reps);
        return -1;
    }
    if (!cca_upstream_has_vm(u)) {
        snprintf(why, whylen, "the upstream has no virtual-memory ops");
        return 1;
    }
    size_t g = 0, most = 0;
    cca_status st = cca_upstream_vm_granularity(u, &g);
    if (st != CCA_OK) {
        snprintf(why, whylen, "no virtual memory: %s", cca_last_error());
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        if (granules[i] == 0 || granules[i] > SIZE_MAX / g) {
            snprintf(why, whylen, "%zu granules of %zu bytes: not a size", granules[i], g);
            return -1;
        }
        most = granules[i] > most ? granules[i] : most;
    }
    double *tm = malloc((size_t)reps * sizeof *tm), *tu = malloc((size_t)reps * sizeof *tu);
    void *base = NULL;
    if (!tm || !tu) {
        free(tm);
        free(tu);
        snprintf(why, whylen, "out of host memory");
        return -1;
    }
    st = cca_upstream_vm_reserve(u, most * g, &base);
    const char *step = "vm_reserve";
    for (size_t i = 0; i < n && st == CCA_OK; i++) {
        size_t size = granules[i] * g;
        step = "vm_map";
        if ((st = cca_upstream_vm_map(u, base, size)) != CCA_OK)
            break;
        step = "vm_unmap";
        if ((st = cca_upstream_vm_unmap(u, base, size)) != CCA_OK)
            break;
        for (int k = 0; k < reps; k++) {
            uint64_t t0 = ccb_now_ns();
            step = "vm_map";
            if ((st = cca_upstream_vm_map(u, base, size)) != CCA_OK)
                break;
            uint64_t t1 = ccb_now_ns();
            step = "vm_unmap";
            if ((st = cca_upstream_vm_unmap(u, base, size)) != CCA_OK)
                break;
            uint64_t t2 = ccb_now_ns();
            tm[k] = (double)(t1 - t0) / 1e3;
            tu[k] = (double)(t2 - t1) / 1e3;
        }
        if (st != CCA_OK)
            break;
        ccb_driver_vm_row *r = &rows[i];
        r->granules = granules[i];
        r->bytes = size;
        r->reps = reps;
        r->map_median_us = ccb_quantile(tm, (size_t)reps, 0.5);
        r->map_p99_us = ccb_quantile(tm, (size_t)reps, 0.99);
        r->unmap_median_us = ccb_quantile(tu, (size_t)reps, 0.5);
        r->unmap_p99_us = ccb_quantile(tu, (size_t)reps, 0.99);
    }
    int rc = 0;
    if (st != CCA_OK) {
        snprintf(why, whylen, "%s: %s: %s", step, cca_status_string(st), cca_last_error());
        rc = -1;
    }
    /* a failed unmap leaves its map: the range is released only once empty */
    if (base && (strcmp(step, "vm_unmap") != 0 || st == CCA_OK))
        (void)cca_upstream_vm_release(u, base, most * g);
    free(tm);
    free(tu);
    return rc;
}
