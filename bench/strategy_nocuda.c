/*
 * strategy_nocuda.c — the GPU strategies where ccbench is built without the
 * CUDA toolkit: each opens as skipped, "no GPU (ccbench built without
 * CUDA)", so the tables still name them. With the toolkit, strategy_cuda.cu replaces this file.
 * ccalloc-cuda's upstream (ccb_cuda_upstream_open) is still asked for: the
 * allocator's CUDA upstream says why there is none.
 */
#include "ccbench.h"

#include "ccalloc.h"

#include <string.h>

const char *ccb_gpu_unavailable_reason(void) {
    return "built without CUDA";
}

void *ccb_cuda_stream(unsigned n) {
    (void)n;
    return NULL;
}

int ccb_cuda_upstream_open(const ccb_device *dev, cca_upstream **u, char *why, size_t whylen) {
    cca_cuda_options co = {.device = 0, .vm_granularity = dev->vm_granularity, .vm_backing = dev->vm_backing};
    cca_status st = cca_upstream_cuda_create_with(&co, u);
    if (st != CCA_OK) {
        snprintf(why, whylen, "no GPU (%s)", cca_last_error());
        return 1;
    }
    return 0;
}

static int skip_open(ccb_strategy *s, const char *config, const ccb_device *dev, char *why, size_t whylen) {
    (void)s;
    (void)config;
    (void)dev;
    snprintf(why, whylen, "no GPU (ccbench built without CUDA)");
    return 1;
}

/* cuda-async and cub check their configs as with CUDA (the check op,
 * before anything runs; and at open, for a caller that opens directly):
 * a bad one is an error on every build. */
static int async_skip_open(ccb_strategy *s, const char *config, const ccb_device *dev, char *why, size_t whylen) {
    return ccb_async_config_check(config, why, whylen) ? -1 : skip_open(s, config, dev, why, whylen);
}

static int cub_skip_open(ccb_strategy *s, const char *config, const ccb_device *dev, char *why, size_t whylen) {
    return ccb_cub_config_check(config, why, whylen) ? -1 : skip_open(s, config, dev, why, whylen);
}

#define SKIPPED(var, name, text, opener, checker)                                                                      \
    const ccb_strategy_ops var = {                                                                                     \
        .base = name, .doc = text, .gpu = 1, .open = opener, .driver = CCB_DRIVER_REAL, .check = checker}

SKIPPED(ccb_strategy_cuda_malloc, "cuda-malloc", "raw cudaMalloc/cudaFree per operation (not built: no CUDA)",
        skip_open, ccb_no_config_check);
SKIPPED(ccb_strategy_cuda_async, "cuda-async",
        "cudaMallocAsync/cudaFreeAsync on the default pool; config release_threshold:N|max (not built)",
        async_skip_open, ccb_async_config_check);
SKIPPED(ccb_strategy_cub, "cub",
        "cub::CachingDeviceAllocator; config bin_growth,min_bin,max_bin,max_cached (not built)", cub_skip_open,
        ccb_cub_config_check);

int ccb_host_register_ms(const size_t *lens, size_t n, double *ms, char *why, size_t whylen) {
    (void)lens;
    (void)n;
    *ms = 0;
    snprintf(why, whylen, "no GPU (ccbench built without CUDA)");
    return 1;
}

int ccb_driver_measure(size_t size, int reps, ccb_driver_row *row, char *why, size_t whylen) {
    (void)reps;
    memset(row, 0, sizeof *row);
    row->size = size;
    snprintf(why, whylen, "no GPU (ccbench built without CUDA)");
    return 1;
}
