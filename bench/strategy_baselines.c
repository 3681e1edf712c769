/*
 * strategy_baselines.c — the two host strategies that are not ccalloc, the
 * baselines its figures are read against:
 *
 *   malloc         glibc malloc/free of the requested sizes: the floor for
 *                  bookkeeping cost. It counts requested bytes itself and
 *                  cannot know what glibc reserves (reserved: unknown). It
 *                  has no device, so no driver time; the device's capacity
 *                  bounds one block (a larger request, or one larger than
 *                  the host's physical memory, is an OOM and malloc is not
 *                  called: a trace may ask for 2^60 bytes, which ASan's
 *                  malloc aborts on rather than failing).
 *   device-malloc  one simulated-device alloc/free per request, nothing
 *                  cached: raw cudaMalloc/cudaFree's analogue, paying the
 *                  driver's cost on every request.
 *
 * Also here: ccb_simulated_device_open, the simulated device a ccb_device
 * describes (capacity, driver latencies, page, backing), which ccalloc's
 * host strategy opens too. Neither baseline takes a config.
 */
#include "ccbench.h"

#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "ccalloc.h"

/* ---- the simulated device ---------------------------------------------------------- */

/* Small host pages (CCA_HOST_PAGES_SMALL): a replay touches two bytes per
 * block (its tags, replay.c), and a huge page zeroes 2 MiB at each first
 * touch: `ccbench --all --quick` took 27.2 s with huge pages, 11.1 s with
 * small, side by side with other tests on the 2-core build machine. */
int ccb_simulated_device_open(const ccb_device *dev, cca_upstream **u, char *why, size_t whylen) {
    cca_host_options ho = {.capacity = dev->bytes,
                           .host_pages = CCA_HOST_PAGES_SMALL,
                           .alloc_latency_ns = dev->alloc_latency_ns,
                           .free_latency_ns = dev->free_latency_ns,
                           .vm_map_granule_latency_ns = dev->map_granule_ns,
                           .vm_unmap_granule_latency_ns = dev->unmap_granule_ns,
                           .vm_map_call_latency_ns = dev->map_call_ns,
                           .vm_unmap_call_latency_ns = dev->unmap_call_ns,
                           .vm_granularity = dev->vm_granularity,
                           .vm_backing = dev->vm_backing};
    cca_status st = cca_upstream_host_create_with(&ho, u);
    if (st != CCA_OK)
        snprintf(why, whylen, "host upstream: %s: %s", cca_status_string(st), cca_last_error());
    return st == CCA_OK ? 0 : -1;
}

/* ---- malloc/free floor ------------------------------------------------------------ */

typedef struct malloc_impl {
    size_t live, peak;
    size_t max_block; /* the device's capacity, at most the host's memory */
} malloc_impl;

static int malloc_open(ccb_strategy *s, const char *config, const ccb_device *dev, char *why, size_t whylen) {
    if (config && *config) { /* the config quoted as the check quotes it: cut between characters */
        int n = snprintf(why, whylen, "malloc ");
        if (n >= 0 && (size_t)n < whylen)
            ccb_no_config_check(config, why + n, whylen - (size_t)n);
        return -1;
    }
    malloc_impl *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(why, whylen, "out of host memory");
        return -1;
    }
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    size_t host =
        pages > 0 && page > 0 && (size_t)pages <= SIZE_MAX / (size_t)page ? (size_t)pages * (size_t)page : SIZE_MAX;
    m->max_block = dev->bytes < host ? dev->bytes : host;
    s->impl = m;
    return 0;
}

static int malloc_alloc(ccb_strategy *s, size_t size, unsigned stream, void **ptr) {
    (void)stream;
    malloc_impl *m = s->impl;
    *ptr = NULL;
    if (size > m->max_block)
        return 1; /* over the device or the host: an OOM, malloc not asked */
    *ptr = malloc(size);
    if (!*ptr)
        return 1;
    m->live += size;
    if (m->live > m->peak)
        m->peak = m->live;
    return 0;
}

static void malloc_release(ccb_strategy *s, void *ptr, size_t size, unsigned stream) {
    (void)stream;
    free(ptr);
    ((malloc_impl *)s->impl)->live -= size;
}

static void malloc_sample(ccb_strategy *s, ccb_mem *m) {
    m->allocated = ((malloc_impl *)s->impl)->live;
    m->reserved = CCB_UNKNOWN;
    m->fragmentation = -1;
    m->upstream_allocs = m->upstream_frees = UINT64_MAX;
    m->requested_peak = CCB_UNKNOWN;
}

static void malloc_peaks(ccb_strategy *s, size_t *allocated_peak, size_t *reserved_peak) {
    *allocated_peak = ((malloc_impl *)s->impl)->peak;
    *reserved_peak = CCB_UNKNOWN;
}

static void malloc_empty(ccb_strategy *s) {
    (void)s;
}
static void malloc_trim(ccb_strategy *s, size_t keep) {
    (void)s;
    (void)keep;
}
static size_t malloc_device_free(ccb_strategy *s) {
    (void)s;
    return CCB_UNKNOWN;
}
static void malloc_close(ccb_strategy *s) {
    free(s->impl);
    s->impl = NULL;
}

const ccb_strategy_ops ccb_strategy_malloc = {
    .base = "malloc",
    .doc = "glibc malloc/free of the requested sizes (reserved bytes unknown; a block over --device-bytes: OOM)",
    .gpu = 0,
    .open = malloc_open,
    .alloc = malloc_alloc,
    .release = malloc_release,
    .sample = malloc_sample,
    .peaks = malloc_peaks,
    .empty_cache = malloc_empty,
    .device_free = malloc_device_free,
    .close = malloc_close,
    .host_pointers = 1,
    .trim = malloc_trim,
    .driver = CCB_DRIVER_NONE,
    .check = ccb_no_config_check,
};

/* ---- one device call per request (no cache) ---------------------------------------- */

/* What raw cudaMalloc/cudaFree per request is on a GPU, on the simulated
 * device: each request rounded up to CCA_GRANULARITY (the wrapper's unit; the
 * device itself rounds to its page and counts that) and allocated from the
 * device; each free returns it. Nothing is cached, so release events have
 * nothing to do, reserved is what the device holds for live blocks, and every
 * request pays the driver's cost. A 0-byte request is NULL, no call. */
typedef struct dm_impl {
    cca_upstream *u;
    size_t allocated, allocated_peak, reserved_peak;
} dm_impl;

static size_t dm_round(size_t size) {
    return size > SIZE_MAX - CCA_GRANULARITY ? 0 : (size + CCA_GRANULARITY - 1) / CCA_GRANULARITY * CCA_GRANULARITY;
}

static size_t dm_reserved(dm_impl *d) {
    size_t fr, total;
    return cca_upstream_mem_info(d->u, &fr, &total) == CCA_OK ? total - fr : CCB_UNKNOWN;
}

static int dm_open(ccb_strategy *s, const char *config, const ccb_device *dev, char *why, size_t whylen) {
    if (config && *config) { /* the config quoted as the check quotes it: cut between characters */
        int n = snprintf(why, whylen, "device-malloc ");
        if (n >= 0 && (size_t)n < whylen)
            ccb_no_config_check(config, why + n, whylen - (size_t)n);
        return -1;
    }
    dm_impl *d = calloc(1, sizeof *d);
    if (!d) {
        snprintf(why, whylen, "out of host memory");
        return -1;
    }
    if (ccb_simulated_device_open(dev, &d->u, why, whylen)) {
        free(d);
        return -1;
    }
    s->impl = d;
    return 0;
}

static int dm_alloc(ccb_strategy *s, size_t size, unsigned stream, void **ptr) {
    (void)stream;
    dm_impl *d = s->impl;
    *ptr = NULL;
    if (size == 0)
        return 0;
    size_t r = dm_round(size);
    if (r == 0)
        return 1;
    cca_status st = cca_upstream_alloc(d->u, r, ptr);
    if (st != CCA_OK)
        return st == CCA_ERR_OUT_OF_MEMORY ? 1 : -1;
    d->allocated += r;
    if (d->allocated > d->allocated_peak)
        d->allocated_peak = d->allocated;
    size_t res = dm_reserved(d);
    if (res != CCB_UNKNOWN && res > d->reserved_peak)
        d->reserved_peak = res;
    return 0;
}

static void dm_release(ccb_strategy *s, void *ptr, size_t size, unsigned stream) {
    (void)stream;
    dm_impl *d = s->impl;
    if (cca_upstream_free(d->u, ptr, dm_round(size)) == CCA_OK)
        d->allocated -= dm_round(size);
}

static void dm_sample(ccb_strategy *s, ccb_mem *m) {
    dm_impl *d = s->impl;
    cca_upstream_stats us;
    cca_upstream_get_stats(d->u, &us);
    m->allocated = d->allocated;
    m->reserved = dm_reserved(d);
    m->fragmentation = -1;
    m->upstream_allocs = us.alloc_calls;
    m->upstream_frees = us.free_calls;
    m->requested_peak = CCB_UNKNOWN;
}

static void dm_peaks(ccb_strategy *s, size_t *allocated_peak, size_t *reserved_peak) {
    dm_impl *d = s->impl;
    *allocated_peak = d->allocated_peak;
    *reserved_peak = d->reserved_peak;
}

static void dm_empty(ccb_strategy *s) {
    (void)s; /* nothing cached */
}

static void dm_trim(ccb_strategy *s, size_t keep) {
    (void)s;
    (void)keep;
}

static size_t dm_device_free(ccb_strategy *s) {
    size_t fr, total;
    return cca_upstream_mem_info(((dm_impl *)s->impl)->u, &fr, &total) == CCA_OK ? fr : CCB_UNKNOWN;
}

static void dm_close(ccb_strategy *s) {
    dm_impl *d = s->impl;
    if (!d)
        return;
    cca_upstream_destroy(d->u);
    free(d);
    s->impl = NULL;
}

const ccb_strategy_ops ccb_strategy_device_malloc = {
    .base = "device-malloc",
    .doc = "one simulated-device alloc/free per request, nothing cached (raw cudaMalloc's analogue)",
    .gpu = 0,
    .open = dm_open,
    .alloc = dm_alloc,
    .release = dm_release,
    .sample = dm_sample,
    .peaks = dm_peaks,
    .empty_cache = dm_empty,
    .device_free = dm_device_free,
    .close = dm_close,
    .host_pointers = 1,
    .trim = dm_trim,
    .driver = CCB_DRIVER_MODEL,
    .check = ccb_no_config_check,
};
