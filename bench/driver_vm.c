/*
 * driver_vm.c — what an upstream's virtual-memory ops cost: the calls an
 * expandable segment makes where a classic one calls cudaMalloc/cudaFree.
 *
 * One range of address space is reserved for the largest size; then, per
 * size of n granules, `reps` pairs of vm_map + vm_unmap of the range's first
 * n granules, each call timed alone (after one untimed pair). The calls go
 * through the public cca_upstream_vm_* functions, the ones the allocator
 * makes, so a figure includes the upstream's own work around the driver. On
 * the CUDA upstream (allocator/src/upstream/cuda.c) a map of n granules is one
 * cudaMemGetInfo, n x (cuMemCreate + cuMemMap) and one cuMemSetAccess; an
 * unmap, n x cuMemUnmap: the per-granule medians are what ccbench's
 * --vm-latency models on the simulated device.
 *
 * A size the device cannot hold (vm_map refused as out of memory, which
 * leaves nothing mapped) is a row saying so, and the next sizes are
 * measured: a small GPU reports its large sizes as not fitting.
 *
 * Whole maps (ccb_driver_vm_whole_maps): on an upstream made with vm_backing
 * CCA_VM_WHOLE_MAPS each vm_map is ONE physical allocation of its size (on
 * CUDA one cudaMemGetInfo, one cuMemCreate, one cuMemMap and one
 * cuMemSetAccess; an unmap one cuMemUnmap), so the same loop times what one
 * allocation of 2 MiB .. 1 GiB costs, sizes given in bytes.
 *
 * `ccbench driver` runs both on the CUDA upstream (GPU 0); the tests run
 * them on the simulated device with known per-granule latencies (charged
 * per granule over pages, once per map over whole maps). Costs: O(reps)
 * host memory for the samples; the device holds at most the largest size.
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
        ccb_driver_vm_row *r = &rows[i];
        r->granules = granules[i];
        r->bytes = size;
        step = "vm_map";
        if ((st = cca_upstream_vm_map(u, base, size)) == CCA_ERR_OUT_OF_MEMORY) {
            char b[32];
            ccb_format_bytes(size, b, sizeof b);
            snprintf(r->why, sizeof r->why, "vm_map of %s: %s", b, cca_last_error());
            r->unfit = 1;
            st = CCA_OK; /* nothing mapped: the next size */
            continue;
        }
        if (st != CCA_OK)
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

size_t ccb_driver_vm_granules(cca_upstream *u, const size_t *sizes, size_t n, size_t *granules, size_t *granule_bytes) {
    size_t g = 0, k = 0;
    if (!cca_upstream_has_vm(u) || cca_upstream_vm_granularity(u, &g) != CCA_OK) {
        *granule_bytes = 0;
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        size_t c = sizes[i] > g ? sizes[i] / g : 1;
        if (!k || granules[k - 1] != c) /* sizes below the granule: one row */
            granules[k++] = c;
    }
    *granule_bytes = g;
    return k;
}

int ccb_driver_vm_whole_maps(cca_upstream *u, const size_t *sizes, size_t n, int reps, ccb_driver_vm_row *rows,
                             size_t *nrows, char *why, size_t whylen) {
    *nrows = 0;
    if (n == 0 || n > CCB_DRIVER_MAX_SIZES) {
        snprintf(why, whylen, "%zu sizes: 1 to %d", n, CCB_DRIVER_MAX_SIZES);
        return -1;
    }
    if (!cca_upstream_has_vm(u)) {
        snprintf(why, whylen, "the upstream has no virtual-memory ops");
        return 1;
    }
    if (cca_upstream_vm_backing(u) != CCA_VM_WHOLE_MAPS) {
        snprintf(why, whylen, "the upstream's maps are pages (CCA_VM_PAGES), not whole maps");
        return -1;
    }
    size_t granules[CCB_DRIVER_MAX_SIZES], g = 0;
    size_t k = ccb_driver_vm_granules(u, sizes, n, granules, &g);
    if (!k) {
        snprintf(why, whylen, "no virtual memory: %s", cca_last_error());
        return 1;
    }
    int rc = ccb_driver_vm_measure(u, granules, k, reps, rows, why, whylen);
    if (rc == 0)
        *nrows = k;
    return rc;
}
