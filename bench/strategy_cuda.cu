/*
 * strategy_cuda.cu — the GPU strategies, built when the CUDA toolkit is
 * found (CCA_WITH_CUDA); without a GPU each one opens as "skipped: no GPU".
 *
 *   cuda-malloc   every alloc is a cudaMalloc and every free a cudaFree: the
 *                 upstream cost ccalloc's cache exists to avoid. reserved =
 *                 allocated = what the harness handed out (the driver's own
 *                 2 MiB page rounding is not visible through the runtime API).
 *   cuda-async    cudaMallocAsync/cudaFreeAsync on the device's default pool
 *                 with cudaMemPoolAttrReleaseThreshold = N (0: the pool
 *                 returns memory at every synchronization; max: it keeps
 *                 everything). Peaks from UsedMemHigh / ReservedMemHigh;
 *                 empty-cache is cudaMemPoolTrimTo(pool, 0). Upstream calls
 *                 are not observable: reported unknown. Time per op is the
 *                 host-side enqueue cost only: both calls are stream-ordered
 *                 and the timed replay never synchronizes (only the untimed
 *                 empty-cache and close do), so the GPU-side cost of the
 *                 allocation is not in the figure. The default pool is
 *                 process-wide: open saves its release threshold, close
 *                 puts it back.
 *   cub           cub::CachingDeviceAllocator: geometric bins (bin_growth^k,
 *                 default 8^3..8^7 = 512 B..2 MiB), requests above max_bin
 *                 go straight to cudaMalloc/cudaFree, max_cached bytes kept.
 *                 allocated/reserved from its cached_bytes (live, live+free).
 *                 Upstream calls are reported unknown: CUB does not count
 *                 them, and inferring them from changes of live+free between
 *                 samples undercounts (one DeviceAllocate that frees the
 *                 cache and retries is one net change).
 *                 Config: bin_growth:8,min_bin:3,max_bin:7,max_cached:6291455
 *   ccalloc-cuda  ccalloc over cca_upstream_cuda_create(0) (strategy_ccalloc.c;
 *                 its upstream from ccb_cuda_upstream_open, here).
 *
 * Also the driver's own costs: cudaMalloc / cudaFree by size
 * (ccb_driver_measure, `ccbench driver`) and pinned host memory made by
 * mmap + cudaHostRegister (ccb_host_register_ms, `ccbench sleep`).
 *
 * Errors: a failing cudaFree / cudaFreeAsync / cudaMemPool* call (void
 * callbacks: release, empty-cache, close) is recorded in the strategy, printed
 * once to stderr, and makes every later alloc return -1, so the replay fails
 * with the event where it noticed instead of going on with wrong figures.
 *
 * Streams: trace stream n > 0 maps to one cudaStream_t created on first use
 * (non-blocking); stream 0 is the legacy default stream.
 */
#include <cuda_runtime.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cub/util_allocator.cuh>

#include "ccalloc.h"
#include "ccbench.h"

static const char *gpu_reason(void) {
    static char reason[160];
    static int checked = 0, ok = 0;
    if (!checked) {
        checked = 1;
        int n = 0;
        cudaError_t e = cudaGetDeviceCount(&n);
        if (e != cudaSuccess || n == 0) {
            snprintf(reason, sizeof reason, "no GPU (cudaGetDeviceCount: %s)",
                     e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
            cudaGetLastError();
        } else {
            ok = 1;
            cudaDeviceProp p;
            cudaGetDeviceProperties(&p, 0);
            snprintf(reason, sizeof reason, "ok (%s)", p.name);
        }
    }
    return ok ? "ok" : reason;
}

extern "C" const char *ccb_gpu_unavailable_reason(void) {
    return gpu_reason();
}

static int need_gpu(char *why, size_t whylen) {
    const char *r = gpu_reason();
    if (strcmp(r, "ok") != 0) {
        snprintf(why, whylen, "%s", r);
        return 1;
    }
    return 0;
}

extern "C" void *ccb_cuda_stream(unsigned n) {
    static cudaStream_t streams[256];
    if (n == 0 || n > 255)
        return NULL;
    if (!streams[n] && cudaStreamCreateWithFlags(&streams[n], cudaStreamNonBlocking) != cudaSuccess)
        return NULL;
    return (void *)streams[n];
}

static cudaStream_t stream_of(unsigned n) {
    return (cudaStream_t)ccb_cuda_stream(n);
}

static size_t cuda_free_bytes(void) {
    size_t fr = 0, total = 0;
    return cudaMemGetInfo(&fr, &total) == cudaSuccess ? fr : CCB_UNKNOWN;
}

extern "C" int ccb_cuda_upstream_open(const ccb_device *dev, cca_upstream **u, char *why, size_t whylen) {
    if (need_gpu(why, whylen))
        return 1;
    cca_cuda_options co = {.device = 0, .vm_granularity = dev->vm_granularity, .vm_backing = dev->vm_backing};
    cca_status st = cca_upstream_cuda_create_with(&co, u);
    if (st != CCA_OK) {
        snprintf(why, whylen, "%s", cca_last_error());
        return st == CCA_ERR_NO_DEVICE ? 1 : -1;
    }
    return 0;
}

/* The first failure of a void callback: printed once, then alloc fails. */
struct cuda_failure {
    int failed;
};

/* Nonzero when e is a failure; the first one is printed and recorded. */
static int cuda_check(cuda_failure *f, const char *strategy, const char *call, cudaError_t e) {
    if (e == cudaSuccess)
        return 0;
    cudaGetLastError(); /* clear the sticky-free error state of the runtime */
    if (!f->failed)
        fprintf(stderr, "ccbench: %s: %s failed: %s; later allocations fail\n", strategy, call, cudaGetErrorString(e));
    f->failed = 1;
    return 1;
}

#define CCB_CUDA_CHECK(f, strategy, call) cuda_check((f), (strategy), #call, (call))

static int status_of(cudaError_t e) {
    if (e == cudaSuccess)
        return 0;
    cudaGetLastError(); /* clear the sticky-free error state of the runtime */
    return e == cudaErrorMemoryAllocation ? 1 : -1;
}

/* ---- raw cudaMalloc / cudaFree -------------------------------------------------- */

struct raw_impl {
    size_t live, peak;
    uint64_t allocs, frees;
    cuda_failure err;
};

static int raw_open(ccb_strategy *s, const char *config, const ccb_device *, char *why, size_t whylen) {
    if (need_gpu(why, whylen))
        return 1;
    if (config && *config) {
        snprintf(why, whylen, "cuda-malloc takes no config");
        return -1;
    }
    s->impl = calloc(1, sizeof(raw_impl));
    if (!s->impl) {
        snprintf(why, whylen, "cuda-malloc: out of host memory");
        return -1;
    }
    return 0;
}

static int raw_alloc(ccb_strategy *s, size_t size, unsigned, void **ptr) {
    raw_impl *r = (raw_impl *)s->impl;
    *ptr = NULL;
    if (size == 0) /* no memory, no driver call (as PyTorch's allocator) */
        return 0;
    if (r->err.failed)
        return -1;
    int rc = status_of(cudaMalloc(ptr, size));
    if (rc == 0) {
        r->live += size;
        r->allocs++;
        if (r->live > r->peak)
            r->peak = r->live;
    }
    return rc;
}

static void raw_release(ccb_strategy *s, void *ptr, size_t size, unsigned) {
    raw_impl *r = (raw_impl *)s->impl;
    if (CCB_CUDA_CHECK(&r->err, "cuda-malloc", cudaFree(ptr)))
        return; /* not freed: live and frees keep counting it */
    r->live -= size;
    r->frees++;
}

static void raw_sample(ccb_strategy *s, ccb_mem *m) {
    raw_impl *r = (raw_impl *)s->impl;
    m->allocated = m->reserved = r->live;
    m->fragmentation = -1;
    m->upstream_allocs = r->allocs;
    m->upstream_frees = r->frees;
    m->requested_peak = CCB_UNKNOWN;
}

static void raw_peaks(ccb_strategy *s, size_t *a, size_t *r) {
    *a = *r = ((raw_impl *)s->impl)->peak;
}

static void raw_empty(ccb_strategy *s) {
    CCB_CUDA_CHECK(&((raw_impl *)s->impl)->err, "cuda-malloc", cudaDeviceSynchronize());
}
static void raw_trim(ccb_strategy *s, size_t) {
    raw_empty(s); /* nothing cached: only wait, as empty_cache does */
}
static size_t raw_device_free(ccb_strategy *) {
    return cuda_free_bytes();
}
static void raw_close(ccb_strategy *s) {
    raw_empty(s);
    free(s->impl);
    s->impl = NULL;
}

extern "C" const ccb_strategy_ops ccb_strategy_cuda_malloc = {"cuda-malloc",
                                                              "raw cudaMalloc/cudaFree per operation",
                                                              1,
                                                              raw_open,
                                                              raw_alloc,
                                                              raw_release,
                                                              raw_sample,
                                                              raw_peaks,
                                                              raw_empty,
                                                              raw_device_free,
                                                              raw_close,
                                                              0,
                                                              raw_trim,
                                                              CCB_DRIVER_REAL,
                                                              NULL,
                                                              NULL,
                                                              NULL,
                                                              NULL,
                                                              ccb_no_config_check};

/* ---- cudaMallocAsync on the default pool ---------------------------------------- */

struct async_impl {
    cudaMemPool_t pool;
    unsigned long long saved_threshold; /* the default pool's, restored by close */
    cuda_failure err;
};

/* A pool attribute, or CCB_UNKNOWN when it cannot be read. */
static size_t pool_attr(async_impl *a, cudaMemPoolAttr attr) {
    unsigned long long v = 0;
    if (CCB_CUDA_CHECK(&a->err, "cuda-async", cudaMemPoolGetAttribute(a->pool, attr, &v)))
        return CCB_UNKNOWN;
    return (size_t)v;
}

static int async_open(ccb_strategy *s, const char *config, const ccb_device *, char *why, size_t whylen) {
    unsigned long long threshold = 0; /* a bad config is an error with or without a GPU */
    if (ccb_async_config_parse(config, &threshold, why, whylen))
        return -1;
    if (need_gpu(why, whylen))
        return 1;
    async_impl *a = (async_impl *)calloc(1, sizeof *a);
    if (!a) {
        snprintf(why, whylen, "cuda-async: out of host memory");
        return -1;
    }
    const char *step = "cudaDeviceGetDefaultMemPool";
    cudaError_t e = cudaDeviceGetDefaultMemPool(&a->pool, 0);
    if (e == cudaSuccess) {
        step = "cudaMemPoolGetAttribute(ReleaseThreshold)";
        e = cudaMemPoolGetAttribute(a->pool, cudaMemPoolAttrReleaseThreshold, &a->saved_threshold);
    }
    int set = 0;
    if (e == cudaSuccess) {
        step = "cudaMemPoolSetAttribute(ReleaseThreshold)";
        e = cudaMemPoolSetAttribute(a->pool, cudaMemPoolAttrReleaseThreshold, &threshold);
        set = e == cudaSuccess;
    }
    if (e == cudaSuccess) {
        step = "cudaDeviceSynchronize";
        e = cudaDeviceSynchronize();
    }
    if (e == cudaSuccess) {
        step = "cudaMemPoolTrimTo";
        e = cudaMemPoolTrimTo(a->pool, 0);
    }
    unsigned long long zero = 0; /* reset the high-water marks */
    if (e == cudaSuccess) {
        step = "cudaMemPoolSetAttribute(ReservedMemHigh)";
        e = cudaMemPoolSetAttribute(a->pool, cudaMemPoolAttrReservedMemHigh, &zero);
    }
    if (e == cudaSuccess) {
        step = "cudaMemPoolSetAttribute(UsedMemHigh)";
        e = cudaMemPoolSetAttribute(a->pool, cudaMemPoolAttrUsedMemHigh, &zero);
    }
    if (e != cudaSuccess) {
        snprintf(why, whylen, "cuda-async: %s failed: %s", step, cudaGetErrorString(e));
        cudaGetLastError();
        if (set &&
            cudaMemPoolSetAttribute(a->pool, cudaMemPoolAttrReleaseThreshold, &a->saved_threshold) != cudaSuccess)
            cudaGetLastError(); /* the open already failed; that error is the one reported */
        free(a);
        return -1;
    }
    s->impl = a;
    return 0;
}

/* Enqueue cost only: cudaMallocAsync returns once the allocation is ordered
 * on the stream; the timed replay does not synchronize. */
static int async_alloc(ccb_strategy *s, size_t size, unsigned stream, void **ptr) {
    *ptr = NULL;
    if (size == 0)
        return 0;
    if (((async_impl *)s->impl)->err.failed)
        return -1;
    return status_of(cudaMallocAsync(ptr, size, stream_of(stream)));
}

/* Enqueue cost only, as async_alloc. */
static void async_release(ccb_strategy *s, void *ptr, size_t, unsigned stream) {
    CCB_CUDA_CHECK(&((async_impl *)s->impl)->err, "cuda-async", cudaFreeAsync(ptr, stream_of(stream)));
}

static void async_sample(ccb_strategy *s, ccb_mem *m) {
    async_impl *a = (async_impl *)s->impl;
    m->allocated = pool_attr(a, cudaMemPoolAttrUsedMemCurrent);
    m->reserved = pool_attr(a, cudaMemPoolAttrReservedMemCurrent);
    m->fragmentation = -1;
    m->upstream_allocs = m->upstream_frees = UINT64_MAX;
    m->requested_peak = CCB_UNKNOWN;
}

static void async_peaks(ccb_strategy *s, size_t *al, size_t *re) {
    async_impl *a = (async_impl *)s->impl;
    *al = pool_attr(a, cudaMemPoolAttrUsedMemHigh);
    *re = pool_attr(a, cudaMemPoolAttrReservedMemHigh);
}

static void async_empty(ccb_strategy *s) {
    async_impl *a = (async_impl *)s->impl;
    if (!CCB_CUDA_CHECK(&a->err, "cuda-async", cudaDeviceSynchronize()))
        CCB_CUDA_CHECK(&a->err, "cuda-async", cudaMemPoolTrimTo(a->pool, 0));
}

/* A trace's trim: the pool keeps at most `keep` bytes (cudaMemPoolTrimTo). */
static void async_trim(ccb_strategy *s, size_t keep) {
    async_impl *a = (async_impl *)s->impl;
    if (!CCB_CUDA_CHECK(&a->err, "cuda-async", cudaDeviceSynchronize()))
        CCB_CUDA_CHECK(&a->err, "cuda-async", cudaMemPoolTrimTo(a->pool, keep));
}

static size_t async_device_free(ccb_strategy *) {
    return cuda_free_bytes();
}

static void async_close(ccb_strategy *s) {
    async_impl *a = (async_impl *)s->impl;
    if (!a)
        return;
    async_empty(s);
    /* the default pool is the process's: give it back its threshold */
    CCB_CUDA_CHECK(&a->err, "cuda-async",
                   cudaMemPoolSetAttribute(a->pool, cudaMemPoolAttrReleaseThreshold, &a->saved_threshold));
    free(a);
    s->impl = NULL;
}

extern "C" const ccb_strategy_ops ccb_strategy_cuda_async = {
    "cuda-async",
    "cudaMallocAsync/cudaFreeAsync on the default pool (times: enqueue cost, no sync in the timed replay); "
    "config release_threshold:N|max",
    1,
    async_open,
    async_alloc,
    async_release,
    async_sample,
    async_peaks,
    async_empty,
    async_device_free,
    async_close,
    0,
    async_trim,
    CCB_DRIVER_REAL,
    NULL,
    NULL,
    NULL,
    NULL,
    ccb_async_config_check};

/* ---- cub::CachingDeviceAllocator ------------------------------------------------- */

struct cub_impl {
    cub::CachingDeviceAllocator *a;
    cuda_failure err;
};

static void cub_totals(cub_impl *c, size_t *live, size_t *total) {
    int dev = 0;
    cudaGetDevice(&dev);
    auto it = c->a->cached_bytes.find(dev);
    size_t l = 0, f = 0;
    if (it != c->a->cached_bytes.end()) {
        l = it->second.live;
        f = it->second.free;
    }
    *live = l;
    *total = l + f;
}

static int cub_open(ccb_strategy *s, const char *config, const ccb_device *, char *why, size_t whylen) {
    ccb_cub_config cc; /* checked: bin_growth 0 or 1 made cub's bin search loop forever */
    if (ccb_cub_config_parse(config, &cc, why, whylen))
        return -1;
    if (need_gpu(why, whylen))
        return 1;
    cub_impl *c = new cub_impl();
    c->a = new cub::CachingDeviceAllocator(cc.bin_growth, cc.min_bin, cc.max_bin, (size_t)cc.max_cached);
    s->impl = c;
    return 0;
}

static int cub_alloc(ccb_strategy *s, size_t size, unsigned stream, void **ptr) {
    cub_impl *c = (cub_impl *)s->impl;
    *ptr = NULL;
    if (size == 0)
        return 0;
    if (c->err.failed)
        return -1;
    return status_of(c->a->DeviceAllocate(ptr, size, stream_of(stream)));
}

static void cub_release(ccb_strategy *s, void *ptr, size_t, unsigned) {
    cub_impl *c = (cub_impl *)s->impl;
    CCB_CUDA_CHECK(&c->err, "cub", c->a->DeviceFree(ptr));
}

static void cub_sample(ccb_strategy *s, ccb_mem *m) {
    cub_impl *c = (cub_impl *)s->impl;
    size_t live, total;
    cub_totals(c, &live, &total);
    m->allocated = live;
    m->reserved = total;
    m->fragmentation = -1;
    /* unknown, not inferred from changes of live+free: that undercounts */
    m->upstream_allocs = m->upstream_frees = UINT64_MAX;
    m->requested_peak = CCB_UNKNOWN;
}

static void cub_empty(ccb_strategy *s) {
    cub_impl *c = (cub_impl *)s->impl;
    if (!CCB_CUDA_CHECK(&c->err, "cub", cudaDeviceSynchronize()))
        CCB_CUDA_CHECK(&c->err, "cub", c->a->FreeAllCached());
}

/* CUB cannot keep part of its cache: a trim frees all of it (FreeAllCached). */
static void cub_trim(ccb_strategy *s, size_t) {
    cub_empty(s);
}

static size_t cub_device_free(ccb_strategy *) {
    return cuda_free_bytes();
}

static void cub_close(ccb_strategy *s) {
    cub_impl *c = (cub_impl *)s->impl;
    if (!c)
        return;
    delete c->a;
    delete c;
    s->impl = NULL;
}

extern "C" const ccb_strategy_ops ccb_strategy_cub = {
    "cub",      "cub::CachingDeviceAllocator; config bin_growth,min_bin,max_bin,max_cached",
    1,          cub_open,
    cub_alloc,  cub_release,
    cub_sample, NULL,
    cub_empty,  cub_device_free,
    cub_close,  0,
    cub_trim,   CCB_DRIVER_REAL,
    NULL,       NULL,
    NULL,       NULL,
    ccb_cub_config_check};

/* ---- the driver's real costs ------------------------------------------------------ */

/* cudaMalloc and cudaFree of one size, timed alone, `reps` times each after
 * one warm-up pair (context creation is not a per-call cost). cudaFree is
 * timed with the device idle: what it costs with work queued is a device
 * synchronization on top. Medians and p99 in microseconds. */
/* ---- pinned host memory by mmap + cudaHostRegister (ccbench sleep) ---------------------- */

#define CCB_HUGE ((size_t)2 << 20)

/* len bytes (a multiple of CCB_HUGE) of anonymous memory aligned to
 * CCB_HUGE, huge pages asked for and every page faulted in; NULL if mmap
 * failed. */
static void *huge_populated(size_t len) {
    void *raw = mmap(NULL, len + CCB_HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    uintptr_t r = (uintptr_t)raw, p = (r + CCB_HUGE - 1) & ~(uintptr_t)(CCB_HUGE - 1);
    if (p > r)
        munmap(raw, p - r);
    if (r + CCB_HUGE > p)
        munmap((void *)(p + len), r + CCB_HUGE - p);
    (void)madvise((void *)p, len, MADV_HUGEPAGE); /* a hint: refused, the pages stay 4 KiB */
#ifdef MADV_POPULATE_WRITE
    if (madvise((void *)p, len, MADV_POPULATE_WRITE) == 0)
        return (void *)p;
#endif
    for (size_t off = 0; off < len; off += 4096) /* no MADV_POPULATE_WRITE here: fault each page in */
        ((volatile char *)p)[off] = 0;
    return (void *)p;
}

extern "C" int ccb_host_register_ms(const size_t *lens, size_t n, double *ms, char *why, size_t whylen) {
    *ms = 0;
    if (need_gpu(why, whylen))
        return 1;
    void **ptr = (void **)calloc(n ? n : 1, sizeof *ptr);
    size_t *len = (size_t *)calloc(n ? n : 1, sizeof *len);
    if (!ptr || !len) {
        free(ptr);
        free(len);
        snprintf(why, whylen, "out of host memory");
        return -1;
    }
    int rc = 0;
    size_t made = 0;
    uint64_t t0 = ccb_now_ns();
    for (; made < n; made++) {
        len[made] = (lens[made] + CCB_HUGE - 1) / CCB_HUGE * CCB_HUGE;
        if (!(ptr[made] = huge_populated(len[made]))) {
            snprintf(why, whylen, "mmap of %zu bytes failed", len[made]);
            rc = -1;
            break;
        }
        cudaError_t e = cudaHostRegister(ptr[made], len[made], cudaHostRegisterDefault);
        if (e != cudaSuccess) {
            snprintf(why, whylen, "cudaHostRegister of %zu bytes: %s", len[made], cudaGetErrorString(e));
            cudaGetLastError();
            munmap(ptr[made], len[made]);
            rc = -1;
            break;
        }
    }
    *ms = (double)(ccb_now_ns() - t0) / 1e6;
    while (made-- > 0) {
        cudaError_t e = cudaHostUnregister(ptr[made]);
        if (e != cudaSuccess && rc == 0) {
            snprintf(why, whylen, "cudaHostUnregister: %s", cudaGetErrorString(e));
            cudaGetLastError();
            rc = -1;
        }
        munmap(ptr[made], len[made]);
    }
    free(ptr);
    free(len);
    return rc;
}

extern "C" int ccb_driver_measure(size_t size, int reps, ccb_driver_row *row, char *why, size_t whylen) {
    memset(row, 0, sizeof *row);
    row->size = size;
    if (need_gpu(why, whylen))
        return 1;
    double *ta = (double *)malloc((size_t)reps * sizeof *ta), *tf = (double *)malloc((size_t)reps * sizeof *tf);
    double *tp = (double *)malloc((size_t)reps * sizeof *tp); /* each pair's alloc + free */
    if (!ta || !tf || !tp) {
        free(ta);
        free(tf);
        free(tp);
        snprintf(why, whylen, "out of host memory");
        return -1;
    }
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, size);
    if (e == cudaSuccess)
        e = cudaFree(p);
    for (int i = 0; i < reps && e == cudaSuccess; i++) {
        uint64_t t0 = ccb_now_ns();
        e = cudaMalloc(&p, size);
        uint64_t t1 = ccb_now_ns();
        if (e != cudaSuccess)
            break;
        e = cudaFree(p);
        uint64_t t2 = ccb_now_ns();
        ta[i] = (double)(t1 - t0) / 1e3;
        tf[i] = (double)(t2 - t1) / 1e3;
        tp[i] = ta[i] + tf[i];
    }
    int rc = 0;
    if (e != cudaSuccess) {
        snprintf(why, whylen, "cudaMalloc/cudaFree of %zu bytes: %s", size, cudaGetErrorString(e));
        cudaGetLastError();
        rc = -1;
    } else {
        row->reps = reps;
        row->alloc_median_us = ccb_quantile(ta, (size_t)reps, 0.5);
        row->alloc_p99_us = ccb_quantile(ta, (size_t)reps, 0.99);
        row->free_median_us = ccb_quantile(tf, (size_t)reps, 0.5);
        row->free_p99_us = ccb_quantile(tf, (size_t)reps, 0.99);
        row->pair_median_us = ccb_quantile(tp, (size_t)reps, 0.5);
    }
    free(ta);
    free(tf);
    free(tp);
    return rc;
}
