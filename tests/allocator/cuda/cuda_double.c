/*
 * cuda_double.c — the CUDA runtime and driver calls of upstream/cuda.c,
 * over host memory, with the documented rules enforced (cuda_double.h).
 *
 * State, all under one mutex:
 *   devices    config.devices, each with a PRIMARY context (created by
 *              cuDevicePrimaryCtxRetain or implicitly, see below; retain
 *              count) and the bytes cudaMalloc and cuMemCreate hold on it;
 *   contexts   per thread, the CURRENT context (thread-local), which
 *              cuCtxGetCurrent/cuCtxSetCurrent read and write and which
 *              every call that works on a device uses: cudaMalloc and
 *              cudaMemGetInfo act on the current context's device, as the
 *              real runtime does;
 *   cudaMalloc blocks: host memory mapped read-write (MAP_NORESERVE), so
 *              cudaMemset/cudaMemcpy work, counted on the current device
 *              rounded up to 2 MiB;
 *   VMM        reservations (address space, PROT_NONE), physical handles
 *              (a size and a device; no memory until mapped), and mappings
 *              (a run of a reservation backed by one handle: fresh
 *              anonymous pages, PROT_NONE until cuMemSetAccess makes them
 *              read-write, and huge where the granularity is whole 2 MiB
 *              pages (MADV_HUGEPAGE: one fault per 2 MiB); an unmap puts
 *              fresh PROT_NONE pages back, so the memory goes and a later
 *              touch faults).
 *
 * Rules enforced (a call that breaks one fails with the driver's
 * CUDA_ERROR_INVALID_VALUE / INVALID_CONTEXT, or the runtime's
 * cudaErrorInvalidValue, and counts a VIOLATION, which tests assert to be
 * 0 after what the upstream does). VMM is the Driver API's Virtual Memory
 * Management page, https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__VA.html;
 * each rule says whether a real driver is known to refuse the same
 * (DOCUMENTED), or the double is STRICTER than any documented rule, where
 * the upstream must not rely on the driver's leniency either:
 *   - every VMM call that names memory or address space (reserve, free,
 *     create, release, map, unmap, set access) needs a current context,
 *     CUDA_ERROR_INVALID_CONTEXT. STRICTER: VMM lists no such error for
 *     them and takes the device from the allocation's properties; vLLM's
 *     cumem allocator makes the device's primary context current before
 *     each of them, as the upstream does;
 *   - cuMemAddressReserve, cuMemCreate, cuMemMap: flags 0 (DOCUMENTED:
 *     VMM reserves them for later use, to be zero now); reserve: size a
 *     multiple of the granularity (STRICTER: VMM asks for the host page
 *     size) and a power-of-two alignment (DOCUMENTED);
 *   - cuMemCreate: size a multiple of the granularity, a pinned device
 *     location that exists (DOCUMENTED); OOM above the device's free memory;
 *   - cuMemMap: offset 0, size a multiple of the granularity and at most
 *     the handle's, inside ONE reservation, over no mapped byte
 *     (DOCUMENTED); a handle is mapped at most once at a time (STRICTER:
 *     the driver allows more; the upstream never does it);
 *   - cuMemSetAccess: every byte of the range mapped (DOCUMENTED: VMM asks
 *     for a fully mapped range), spanning any run of whole mappings, as
 *     NVIDIA's growing-vector example sets a run of handles at once
 *     (https://developer.nvidia.com/blog/introducing-low-level-gpu-virtual-memory/);
 *     part of one mapping is refused (STRICTER: not documented either way;
 *     the double keeps access per mapping);
 *   - cuMemUnmap: exactly a run of whole mappings, nothing unmapped inside
 *     it (DOCUMENTED: VMM wants the whole range that was mapped and
 *     refuses a sub-range of one mapping; one call over several adjacent
 *     mappings is what the same NVIDIA example and PyTorch's bulk unmap
 *     do, and a run with a never-mapped part fails on a GPU:
 *     https://github.com/pytorch/pytorch/issues/188008). It is not known
 *     to wait for queued work (PyTorch's expandable segments synchronize
 *     the stream or device before unmapping for that reason); the double
 *     has no kernels, so tests check the order in cuda_double_log;
 *   - cuMemRelease: a live handle (STRICTER: VMM leaves another undefined);
 *     releasing a MAPPED handle is valid and the memory goes when it is
 *     released AND unmapped (DOCUMENTED: VMM frees it once every mapping
 *     is gone and every reference released);
 *   - cuMemAddressFree: exactly a reservation (DOCUMENTED: size and ptr
 *     must match the reserve), with nothing mapped in it (DOCUMENTED in the
 *     Programming Guide, not in VMM: the whole range is to be unmapped
 *     before it is freed,
 *     https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#reserving-a-virtual-address-range;
 *     what a driver does otherwise, fail or free and leak, is not said);
 *   - cudaFree: NULL or a live cudaMalloc pointer; cudaMemset/cudaMemcpy:
 *     inside one live cudaMalloc block or accessible mapped run.
 * Not modelled (LOOSER than a driver, where the upstream is not checked):
 * a primary context lives on after its last cuDevicePrimaryCtxRelease here,
 * where the driver resets it once nothing retains it (the runtime's own
 * use may retain it; undocumented); cudaMemGetInfo counts this process
 * only (a GPU's free memory also moves with other processes); queued work
 * does not exist, so nothing is touched after an unmap by a kernel.
 * IMPLICIT CONTEXTS: a runtime call on a thread with no current context
 * makes that thread's runtime device's primary context current (device 0
 * unless cudaSetDevice said otherwise), as CUDA 12+ does, and is counted
 * in implicit_contexts: the upstream must never cause one. cudaFree(NULL)
 * is one such call (the usual way to create a context), so the upstream
 * makes it with its primary context already current. cudaMemGetInfo
 * reports what the device has free after every live context's own cost
 * (context_bytes), as a GPU's does. cudaEventQuery and cudaEventDestroy
 * count an implicit context too, though the runtime's pages do not say
 * they need the event's context (STRICTER).
 * EVENTS belong to the context current at their creation. Recording one on
 * a default stream (NULL, cudaStreamLegacy, cudaStreamPerThread: the
 * current context's) while another context is current is a violation,
 * cudaErrorInvalidResourceHandle: the runtime's cudaEventRecord says event
 * and stream must be on the same device, the driver's cuEventRecord the
 * same context, or CUDA_ERROR_INVALID_HANDLE
 * (https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__EVENT.html,
 * https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__EVENT.html).
 * They complete at once unless held (cuda_double_hold_events); a
 * cudaDeviceSynchronize completes those of the current context's device
 * only, a cudaStreamSynchronize those recorded on that stream of it. There are no kernels and no stream objects: a
 * handle other than the default ones is taken as the caller's stream on the event's device unchecked (a real driver
 * refuses one of another context).
 */
#include "cuda_double.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cudaTypedefs.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define MIB ((size_t)1 << 20)

struct CUctx_st {
    int device;
    bool primary;
};

struct CUevent_st {
    bool ready;
    struct CUctx_st *ctx; /* the context current at its creation */
    cudaStream_t stream;  /* where it was last recorded */
};

typedef struct dbl_block { /* a cudaMalloc */
    uintptr_t addr;
    size_t size, counted;
    int device;
} dbl_block;

typedef struct dbl_handle {
    size_t size;
    int device;
    bool live;     /* created, memory counted                   */
    bool released; /* cuMemRelease'd: goes when unmapped        */
    bool mapped;
} dbl_handle;

typedef struct dbl_mapping {
    uintptr_t addr;
    size_t size;
    unsigned long long handle; /* index + 1 */
    bool access;
} dbl_mapping;

typedef struct dbl_reservation {
    uintptr_t base;
    size_t size;
    void *raw;
    size_t raw_size;
} dbl_reservation;

typedef struct dbl_fault {
    char fn[40];
    unsigned long at; /* the call count at which it fires */
    int code;
    bool sticky;
} dbl_fault;

#define LOG_CALLS 64
#define MAX_FAULTS 16
#define MAX_FNS 64

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static cuda_double_config g_config;
static bool g_configured;
static struct CUctx_st g_primary[CUDA_DOUBLE_MAX_DEVICES];
static int g_primary_refs[CUDA_DOUBLE_MAX_DEVICES];
static bool g_primary_alive[CUDA_DOUBLE_MAX_DEVICES];
static size_t g_malloc_bytes[CUDA_DOUBLE_MAX_DEVICES], g_physical_bytes[CUDA_DOUBLE_MAX_DEVICES];
static dbl_block *g_blocks;
static size_t g_nblocks, g_capblocks;
static dbl_handle *g_handles;
static size_t g_nhandles, g_caphandles;
static dbl_mapping *g_maps;
static size_t g_nmaps, g_capmaps;
static dbl_reservation *g_res;
static size_t g_nres, g_capres;
static dbl_fault g_faults[MAX_FAULTS];
static size_t g_nfaults;
static unsigned long g_calls; /* every counted call, all functions together */
static char g_last_fault[40];
static struct {
    char name[40];
    unsigned long calls;
} g_fns[MAX_FNS];
static size_t g_nfns;
static char g_log[LOG_CALLS][40];
static size_t g_logn;
static bool g_hold;
static cuda_double_stats g_stats;

static _Thread_local struct CUctx_st *t_current;
static _Thread_local cudaError_t t_last_error;
static _Thread_local int t_runtime_device;

/* ---- bookkeeping ---------------------------------------------------------- */

cuda_double_config cuda_double_defaults(void) {
    cuda_double_config c = {.devices = 2,
                            .device_bytes = (size_t)4 << 30,
                            .granularity = 2 * MIB,
                            .vmm = true,
                            .context_bytes = 256 * MIB,
                            .hidden = NULL};
    return c;
}

static void ensure_config(void) { /* under g_lock */
    if (!g_configured) {
        g_config = cuda_double_defaults();
        g_configured = true;
    }
}

void cuda_double_configure(const cuda_double_config *c) {
    pthread_mutex_lock(&g_lock);
    g_config = *c;
    if (g_config.devices > CUDA_DOUBLE_MAX_DEVICES)
        g_config.devices = CUDA_DOUBLE_MAX_DEVICES;
    g_configured = true;
    pthread_mutex_unlock(&g_lock);
}

static void grow(void **arr, size_t *cap, size_t n, size_t elem) {
    if (n < *cap)
        return;
    size_t c = *cap ? *cap * 2 : 64;
    void *p = realloc(*arr, c * elem);
    if (!p)
        abort(); /* a test double: no host memory is a broken test machine */
    *arr = p;
    *cap = c;
}

/* Count the call, and say whether an injected fault fires (its code). */
static bool enter_call(const char *fn, int *code) { /* under g_lock */
    ensure_config();
    size_t i = 0;
    while (i < g_nfns && strcmp(g_fns[i].name, fn) != 0)
        i++;
    if (i == g_nfns && g_nfns < MAX_FNS)
        snprintf(g_fns[g_nfns++].name, sizeof g_fns[0].name, "%s", fn);
    unsigned long n = i < MAX_FNS ? ++g_fns[i].calls : 0;
    g_calls++;
    snprintf(g_log[g_logn++ % LOG_CALLS], sizeof g_log[0], "%s", fn);
    for (size_t k = 0; k < g_nfaults; k++) {
        dbl_fault *f = &g_faults[k];
        bool any = strcmp(f->fn, "*") == 0; /* cuda_double_fail_call */
        if (any ? g_calls == f->at : strcmp(f->fn, fn) == 0 && (n == f->at || (f->sticky && n > f->at))) {
            bool runtime = strncmp(fn, "cuda", 4) == 0;
            *code = any ? (runtime ? (int)cudaErrorLaunchFailure : (int)CUDA_ERROR_UNKNOWN) : f->code;
            snprintf(g_last_fault, sizeof g_last_fault, "%s", fn);
            return true;
        }
    }
    return false;
}

static unsigned long calls_of(const char *fn) { /* under g_lock */
    if (strcmp(fn, "*") == 0)
        return g_calls;
    for (size_t i = 0; i < g_nfns; i++)
        if (strcmp(g_fns[i].name, fn) == 0)
            return g_fns[i].calls;
    return 0;
}

void cuda_double_fail(const char *fn, unsigned long nth, int code, bool sticky) {
    pthread_mutex_lock(&g_lock);
    if (g_nfaults < MAX_FAULTS && nth > 0) {
        dbl_fault *f = &g_faults[g_nfaults++];
        snprintf(f->fn, sizeof f->fn, "%s", fn);
        f->at = calls_of(fn) + nth;
        f->code = code;
        f->sticky = sticky;
    }
    g_last_fault[0] = '\0';
    pthread_mutex_unlock(&g_lock);
}

void cuda_double_fail_call(unsigned long nth) {
    pthread_mutex_lock(&g_lock);
    if (g_nfaults < MAX_FAULTS && nth > 0) {
        dbl_fault *f = &g_faults[g_nfaults++];
        snprintf(f->fn, sizeof f->fn, "*");
        f->at = g_calls + nth;
        f->sticky = false;
    }
    g_last_fault[0] = '\0';
    pthread_mutex_unlock(&g_lock);
}

void cuda_double_clear_faults(void) {
    pthread_mutex_lock(&g_lock);
    g_nfaults = 0;
    pthread_mutex_unlock(&g_lock);
}

const char *cuda_double_last_fault(void) {
    static char name[sizeof g_last_fault];
    pthread_mutex_lock(&g_lock);
    memcpy(name, g_last_fault, sizeof name);
    pthread_mutex_unlock(&g_lock);
    return name;
}

static void violation(const char *fmt, const char *fn, uintptr_t addr, size_t size) { /* under g_lock */
    g_stats.violations++;
    char what[200];
    snprintf(what, sizeof what, fmt, addr, size);
    snprintf(g_stats.last_violation, sizeof g_stats.last_violation, "%s: %s", fn, what);
}

static size_t device_used(int dev) {
    return g_malloc_bytes[dev] + g_physical_bytes[dev] + (g_primary_alive[dev] ? g_config.context_bytes : 0);
}

static size_t device_free(int dev) {
    size_t used = device_used(dev);
    return used >= g_config.device_bytes ? 0 : g_config.device_bytes - used;
}

/* The runtime's context for a call: the current one, or (none) the
 * runtime device's primary context, made current and counted. */
static struct CUctx_st *runtime_context(void) { /* under g_lock */
    if (t_current)
        return t_current;
    int dev = t_runtime_device;
    if (g_stats.implicit_contexts++ == 0)
        snprintf(g_stats.first_implicit, sizeof g_stats.first_implicit, "%s", g_log[(g_logn - 1) % LOG_CALLS]);
    g_primary_alive[dev] = true;
    g_primary[dev].device = dev;
    g_primary[dev].primary = true;
    t_current = &g_primary[dev];
    return t_current;
}

static cudaError_t rt_fail(cudaError_t e) {
    t_last_error = e;
    return e;
}

/* ---- runtime -------------------------------------------------------------- */

#define RT_BEGIN(name)                                                                                                 \
    int code_ = 0;                                                                                                     \
    pthread_mutex_lock(&g_lock);                                                                                       \
    if (enter_call(name, &code_)) {                                                                                    \
        pthread_mutex_unlock(&g_lock);                                                                                 \
        return rt_fail((cudaError_t)code_);                                                                            \
    }

cudaError_t CUDARTAPI cudaGetDeviceCount(int *count) {
    RT_BEGIN("cudaGetDeviceCount");
    int n = g_config.devices;
    pthread_mutex_unlock(&g_lock);
    if (n <= 0) {
        *count = 0;
        return rt_fail(cudaErrorNoDevice);
    }
    *count = n;
    return cudaSuccess;
}

const char *CUDARTAPI cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    default: return "unknown error (cuda double)";
    }
}

cudaError_t CUDARTAPI cudaGetLastError(void) {
    cudaError_t e = t_last_error;
    t_last_error = cudaSuccess;
    return e;
}

cudaError_t CUDARTAPI cudaPeekAtLastError(void) {
    return t_last_error;
}

cudaError_t CUDARTAPI cudaSetDevice(int device) {
    RT_BEGIN("cudaSetDevice");
    if (device < 0 || device >= g_config.devices) {
        pthread_mutex_unlock(&g_lock);
        return rt_fail(cudaErrorInvalidDevice);
    }
    t_runtime_device = device;
    g_primary_alive[device] = true;
    g_primary[device].device = device;
    g_primary[device].primary = true;
    t_current = &g_primary[device];
    pthread_mutex_unlock(&g_lock);
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaGetDevice(int *device) {
    RT_BEGIN("cudaGetDevice");
    *device = t_current ? t_current->device : t_runtime_device;
    pthread_mutex_unlock(&g_lock);
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaMalloc(void **ptr, size_t size) {
    RT_BEGIN("cudaMalloc");
    int dev = runtime_context()->device;
    size_t counted = (size + 2 * MIB - 1) / (2 * MIB) * (2 * MIB);
    if (size == 0) {
        *ptr = NULL;
        pthread_mutex_unlock(&g_lock);
        return cudaSuccess;
    }
    if (counted > device_free(dev)) {
        pthread_mutex_unlock(&g_lock);
        return rt_fail(cudaErrorMemoryAllocation);
    }
    void *p = mmap(NULL, counted, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        pthread_mutex_unlock(&g_lock);
        return rt_fail(cudaErrorMemoryAllocation);
    }
    grow((void **)&g_blocks, &g_capblocks, g_nblocks, sizeof *g_blocks);
    g_blocks[g_nblocks++] = (dbl_block){(uintptr_t)p, size, counted, dev};
    g_malloc_bytes[dev] += counted;
    *ptr = p;
    pthread_mutex_unlock(&g_lock);
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaFree(void *ptr) {
    RT_BEGIN("cudaFree");
    (void)runtime_context();
    if (!ptr) {
        pthread_mutex_unlock(&g_lock);
        return cudaSuccess;
    }
    for (size_t i = 0; i < g_nblocks; i++) {
        if (g_blocks[i].addr == (uintptr_t)ptr) {
            munmap(ptr, g_blocks[i].counted);
            g_malloc_bytes[g_blocks[i].device] -= g_blocks[i].counted;
            g_blocks[i] = g_blocks[--g_nblocks];
            pthread_mutex_unlock(&g_lock);
            return cudaSuccess;
        }
    }
    violation("%#lx (%zu) is not a live cudaMalloc pointer", "cudaFree", (uintptr_t)ptr, 0);
    pthread_mutex_unlock(&g_lock);
    return rt_fail(cudaErrorInvalidValue);
}

cudaError_t CUDARTAPI cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
    RT_BEGIN("cudaMemGetInfo");
    int dev = runtime_context()->device;
    *free_bytes = device_free(dev);
    *total_bytes = g_config.device_bytes;
    pthread_mutex_unlock(&g_lock);
    return cudaSuccess;
}

static struct CUevent_st **g_events;
static size_t g_nevents, g_capevents;

cudaError_t CUDARTAPI cudaDeviceSynchronize(void) {
    RT_BEGIN("cudaDeviceSynchronize");
    int dev = runtime_context()->device;
    g_stats.syncs++;
    for (size_t i = 0; i < g_nevents; i++) /* this device's work only */
        if (g_events[i]->ctx->device == dev)
            g_events[i]->ready = true;
    pthread_mutex_unlock(&g_lock);
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags) {
    (void)flags;
    RT_BEGIN("cudaEventCreateWithFlags");
    struct CUctx_st *ctx = runtime_context();
    struct CUevent_st *e = calloc(1, sizeof *e);
    if (!e) {
        pthread_mutex_unlock(&g_lock);
        return rt_fail(cudaErrorMemoryAllocation);
    }
    e->ready = true;
    e->ctx = ctx;
    grow((void **)&g_events, &g_capevents, g_nevents, sizeof *g_events);
    g_events[g_nevents++] = e;
    *event = e;
    pthread_mutex_unlock(&g_lock);
    return cudaSuccess;
}

static bool event_known(const struct CUevent_st *e) {
    for (size_t i = 0; i < g_nevents; i++)
        if (g_events[i] == e)
            return true;
    return false;
}

/* The default streams (NULL, cudaStreamLegacy, cudaStreamPerThread) are
 * the current context's; any other handle is a stream of the caller's, of
 * which the double knows nothing. */
static bool default_stream(cudaStream_t s) {
    return s == NULL || s == cudaStreamLegacy || s == cudaStreamPerThread;
}

cudaError_t CUDARTAPI cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
    RT_BEGIN("cudaEventRecord");
    struct CUctx_st *ctx = runtime_context();
    if (!event_known(event)) {
        violation("event %#lx (%zu) was not created", "cudaEventRecord", (uintptr_t)event, 0);
        pthread_mutex_unlock(&g_lock);
        return rt_fail(cudaErrorInvalidValue);
    }
    if (default_stream(stream) && event->ctx != ctx) {
        violation("event %#lx (%zu): recorded on the default stream of a context it was not created in",
                  "cudaEventRecord", (uintptr_t)event, 0);
        pthread_mutex_unlock(&g_lock);
        return rt_fail(cudaErrorInvalidResourceHandle);
    }
    event->ready = !g_hold;
    event->stream = stream;
    pthread_mutex_unlock(&g_lock);
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaStreamSynchronize(cudaStream_t stream) {
    RT_BEGIN("cudaStreamSynchronize");
    int dev = runtime_context()->device;
    g_stats.stream_syncs++;
    for (size_t i = 0; i < g_nevents; i++) /* the work recorded on this stream of this device */
        if (g_events[i]->ctx->device == dev && g_events[i]->stream == stream)
            g_events[i]->ready = true;
    pthread_mutex_unlock(&g_lock);
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaEventQuery(cudaEvent_t event) {
    RT_BEGIN("cudaEventQuery");
    (void)runtime_context();
    if (!event_known(event)) {
        violation("event %#lx (%zu) was not created", "cudaEventQuery", (uintptr_t)event, 0);
        pthread_mutex_unlock(&g_lock);
        return rt_fail(cudaErrorInvalidValue);
    }
    bool ready = event->ready, recorded = !g_config.not_ready_unrecorded;
    pthread_mutex_unlock(&g_lock);
    return ready ? cudaSuccess : recorded ? rt_fail(cudaErrorNotReady) : cudaErrorNotReady;
}

cudaError_t CUDARTAPI cudaEventDestroy(cudaEvent_t event) {
    RT_BEGIN("cudaEventDestroy");
    (void)runtime_context();
    for (size_t i = 0; i < g_nevents; i++) {
        if (g_events[i] == event) {
            free(event);
            g_events[i] = g_events[--g_nevents];
            pthread_mutex_unlock(&g_lock);
            return cudaSuccess;
        }
    }
    violation("event %#lx (%zu) was not created", "cudaEventDestroy", (uintptr_t)event, 0);
    pthread_mutex_unlock(&g_lock);
    return rt_fail(cudaErrorInvalidValue);
}

void cuda_double_hold_events(bool hold) {
    pthread_mutex_lock(&g_lock);
    g_hold = hold;
    if (!hold)
        for (size_t i = 0; i < g_nevents; i++)
            g_events[i]->ready = true;
    pthread_mutex_unlock(&g_lock);
}

/* Is [p, p + n) device memory the host may touch: inside one cudaMalloc
 * block, or mapped and made accessible? */
static bool device_range_ok(uintptr_t p, size_t n) { /* under g_lock */
    for (size_t i = 0; i < g_nblocks; i++)
        if (p >= g_blocks[i].addr && n <= g_blocks[i].size && p - g_blocks[i].addr <= g_blocks[i].size - n)
            return true;
    uintptr_t at = p, end = p + n;
    while (at < end) {
        size_t i = 0;
        while (i < g_nmaps && !(at >= g_maps[i].addr && at < g_maps[i].addr + g_maps[i].size))
            i++;
        if (i == g_nmaps || !g_maps[i].access)
            return false;
        at = g_maps[i].addr + g_maps[i].size;
    }
    return true;
}

cudaError_t CUDARTAPI cudaMemset(void *ptr, int value, size_t count) {
    RT_BEGIN("cudaMemset");
    (void)runtime_context();
    if (!device_range_ok((uintptr_t)ptr, count)) {
        violation("%#lx (%zu bytes) is not accessible device memory", "cudaMemset", (uintptr_t)ptr, count);
        pthread_mutex_unlock(&g_lock);
        return rt_fail(cudaErrorInvalidValue);
    }
    memset(ptr, value, count);
    pthread_mutex_unlock(&g_lock);
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind) {
    RT_BEGIN("cudaMemcpy");
    (void)runtime_context();
    bool ok = true;
    if (kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice)
        ok = device_range_ok((uintptr_t)src, count);
    if (ok && (kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice))
        ok = device_range_ok((uintptr_t)dst, count);
    if (!ok || kind == cudaMemcpyDefault) {
        violation("%#lx (%zu bytes): not accessible device memory, or kind Default", "cudaMemcpy",
                  (uintptr_t)(kind == cudaMemcpyDeviceToHost ? src : dst), count);
        pthread_mutex_unlock(&g_lock);
        return rt_fail(cudaErrorInvalidValue);
    }
    memcpy(dst, src, count);
    pthread_mutex_unlock(&g_lock);
    return cudaSuccess;
}

/* ---- pinned host memory, streams of the caller's, async copies ----------------
 * The CUDA upstream's host and copy ops (sleep and wake). cudaMallocHost
 * memory is host memory here, recorded; cudaFreeHost takes a live one only
 * (DOCUMENTED: a pointer cudaMallocHost returned). A stream made by
 * cudaStreamCreateWithFlags is recorded and cudaStreamDestroy takes one
 * only (DOCUMENTED: a valid stream). cudaMemcpyAsync copies at once (no
 * queued work), between accessible device memory and a live pinned
 * allocation (STRICTER: pageable host memory is allowed, the copy then
 * not asynchronous), on a recorded stream or a default one. */
typedef struct dbl_pinned {
    uintptr_t addr;
    size_t size;
    bool registered; /* cudaHostRegister'd (the caller's mapping), not cudaMallocHost'd */
} dbl_pinned;
static dbl_pinned *g_pinned;
static size_t g_npinned, g_cappinned, g_pinned_bytes;
static void **g_streams;
static size_t g_nstreams, g_capstreams;
static unsigned long g_async_copies;

cudaError_t CUDARTAPI cudaMallocHost(void **ptr, size_t size) {
    RT_BEGIN("cudaMallocHost");
    (void)runtime_context();
    void *p = size ? mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) : MAP_FAILED;
    if (p == MAP_FAILED) {
        pthread_mutex_unlock(&g_lock);
        return rt_fail(size ? cudaErrorMemoryAllocation : cudaErrorInvalidValue);
    }
    grow((void **)&g_pinned, &g_cappinned, g_npinned, sizeof *g_pinned);
    g_pinned[g_npinned++] = (dbl_pinned){(uintptr_t)p, size, false};
    g_pinned_bytes += size;
    *ptr = p;
    pthread_mutex_unlock(&g_lock);
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaFreeHost(void *ptr) {
    RT_BEGIN("cudaFreeHost");
    (void)runtime_context();
    for (size_t i = 0; i < g_npinned; i++)
        if (g_pinned[i].addr == (uintptr_t)ptr && !g_pinned[i].registered) {
            munmap(ptr, g_pinned[i].size);
            g_pinned_bytes -= g_pinned[i].size;
            g_pinned[i] = g_pinned[--g_npinned];
            pthread_mutex_unlock(&g_lock);
            return cudaSuccess;
        }
    violation("%#lx (%zu) is not a live cudaMallocHost pointer", "cudaFreeHost", (uintptr_t)ptr, 0);
    pthread_mutex_unlock(&g_lock);
    return rt_fail(cudaErrorInvalidValue);
}

/* cudaHostRegister: the caller's memory, recorded as pinned; nothing of it
 * may be registered already (DOCUMENTED: cudaErrorHostMemoryAlreadyRegistered),
 * flags cudaHostRegisterDefault only (STRICTER), ptr and size not 0 (DOCUMENTED).
 * cudaHostUnregister takes the base of a live registration only (DOCUMENTED:
 * cudaErrorHostMemoryNotRegistered). */
cudaError_t CUDARTAPI cudaHostRegister(void *ptr, size_t size, unsigned int flags) {
    RT_BEGIN("cudaHostRegister");
    (void)runtime_context();
    uintptr_t p = (uintptr_t)ptr;
    if (!ptr || !size || flags != cudaHostRegisterDefault || p + size < p) {
        violation("%#lx (%zu bytes): NULL, empty, wrapping or flags other than the default", "cudaHostRegister", p,
                  size);
        pthread_mutex_unlock(&g_lock);
        return rt_fail(cudaErrorInvalidValue);
    }
    for (size_t i = 0; i < g_npinned; i++)
        if (p < g_pinned[i].addr + g_pinned[i].size && g_pinned[i].addr < p + size) {
            violation("%#lx (%zu bytes) overlaps memory registered or pinned already", "cudaHostRegister", p, size);
            pthread_mutex_unlock(&g_lock);
            return rt_fail(cudaErrorHostMemoryAlreadyRegistered);
        }
    grow((void **)&g_pinned, &g_cappinned, g_npinned, sizeof *g_pinned);
    g_pinned[g_npinned++] = (dbl_pinned){p, size, true};
    g_pinned_bytes += size;
    pthread_mutex_unlock(&g_lock);
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaHostUnregister(void *ptr) {
    RT_BEGIN("cudaHostUnregister");
    (void)runtime_context();
    for (size_t i = 0; i < g_npinned; i++)
        if (g_pinned[i].addr == (uintptr_t)ptr && g_pinned[i].registered) {
            g_pinned_bytes -= g_pinned[i].size;
            g_pinned[i] = g_pinned[--g_npinned];
            pthread_mutex_unlock(&g_lock);
            return cudaSuccess;
        }
    violation("%#lx (%zu) is not the base of a live cudaHostRegister", "cudaHostUnregister", (uintptr_t)ptr, 0);
    pthread_mutex_unlock(&g_lock);
    return rt_fail(cudaErrorHostMemoryNotRegistered);
}

size_t cuda_double_free_pinned(void) {
    pthread_mutex_lock(&g_lock);
    size_t bytes = g_pinned_bytes;
    for (size_t i = 0; i < g_npinned; i++)
        munmap((void *)g_pinned[i].addr, g_pinned[i].size);
    g_npinned = 0;
    g_pinned_bytes = 0;
    pthread_mutex_unlock(&g_lock);
    return bytes;
}

static bool pinned_range_ok(uintptr_t p, size_t n) { /* under g_lock */
    for (size_t i = 0; i < g_npinned; i++)
        if (p >= g_pinned[i].addr && n <= g_pinned[i].size && p - g_pinned[i].addr <= g_pinned[i].size - n)
            return true;
    return false;
}

static bool stream_known(const void *s) { /* under g_lock */
    for (size_t i = 0; i < g_nstreams; i++)
        if (g_streams[i] == s)
            return true;
    return false;
}

cudaError_t CUDARTAPI cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags) {
    (void)flags;
    RT_BEGIN("cudaStreamCreateWithFlags");
    (void)runtime_context();
    void *s = malloc(1);
    if (!s) {
        pthread_mutex_unlock(&g_lock);
        return rt_fail(cudaErrorMemoryAllocation);
    }
    grow((void **)&g_streams, &g_capstreams, g_nstreams, sizeof *g_streams);
    g_streams[g_nstreams++] = s;
    *stream = (cudaStream_t)s;
    pthread_mutex_unlock(&g_lock);
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaStreamDestroy(cudaStream_t stream) {
    RT_BEGIN("cudaStreamDestroy");
    (void)runtime_context();
    for (size_t i = 0; i < g_nstreams; i++)
        if (g_streams[i] == (void *)stream) {
            free(g_streams[i]);
            g_streams[i] = g_streams[--g_nstreams];
            pthread_mutex_unlock(&g_lock);
            return cudaSuccess;
        }
    violation("stream %#lx (%zu) was not created", "cudaStreamDestroy", (uintptr_t)stream, 0);
    pthread_mutex_unlock(&g_lock);
    return rt_fail(cudaErrorInvalidResourceHandle);
}

cudaError_t CUDARTAPI cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                                      cudaStream_t stream) {
    RT_BEGIN("cudaMemcpyAsync");
    (void)runtime_context();
    bool ok = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyHostToDevice;
    if (ok && kind == cudaMemcpyDeviceToHost)
        ok = device_range_ok((uintptr_t)src, count) && pinned_range_ok((uintptr_t)dst, count);
    else if (ok)
        ok = device_range_ok((uintptr_t)dst, count) && pinned_range_ok((uintptr_t)src, count);
    if (!ok || !(default_stream(stream) || stream_known(stream))) {
        violation("%#lx (%zu bytes): not accessible device memory and pinned host memory, or an unknown stream",
                  "cudaMemcpyAsync", (uintptr_t)(kind == cudaMemcpyDeviceToHost ? src : dst), count);
        pthread_mutex_unlock(&g_lock);
        return rt_fail(cudaErrorInvalidValue);
    }
    memcpy(dst, src, count);
    g_async_copies++;
    pthread_mutex_unlock(&g_lock);
    return cudaSuccess;
}

/* ---- driver: errors, devices, contexts ------------------------------------ */

#define DRV_BEGIN(name)                                                                                                \
    int code_ = 0;                                                                                                     \
    pthread_mutex_lock(&g_lock);                                                                                       \
    if (enter_call(name, &code_)) {                                                                                    \
        pthread_mutex_unlock(&g_lock);                                                                                 \
        return (CUresult)code_;                                                                                        \
    }
#define DRV_RETURN(r)                                                                                                  \
    do {                                                                                                               \
        pthread_mutex_unlock(&g_lock);                                                                                 \
        return (r);                                                                                                    \
    } while (0)

static CUresult CUDAAPI d_get_error_string(CUresult r, const char **s) {
    switch (r) {
    case CUDA_SUCCESS: *s = "no error"; break;
    case CUDA_ERROR_INVALID_VALUE: *s = "invalid argument"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *s = "out of memory"; break;
    case CUDA_ERROR_INVALID_CONTEXT: *s = "invalid device context"; break;
    case CUDA_ERROR_NOT_SUPPORTED: *s = "operation not supported"; break;
    case CUDA_ERROR_INVALID_DEVICE: *s = "invalid device ordinal"; break;
    case CUDA_ERROR_UNKNOWN: *s = "unknown error"; break;
    default: *s = NULL; return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

static CUresult CUDAAPI d_device_get(CUdevice *dev, int ordinal) {
    DRV_BEGIN("cuDeviceGet");
    if (ordinal < 0 || ordinal >= g_config.devices)
        DRV_RETURN(CUDA_ERROR_INVALID_DEVICE);
    *dev = ordinal;
    DRV_RETURN(CUDA_SUCCESS);
}

static CUresult CUDAAPI d_primary_retain(CUcontext *ctx, CUdevice dev) {
    DRV_BEGIN("cuDevicePrimaryCtxRetain");
    if (dev < 0 || dev >= g_config.devices)
        DRV_RETURN(CUDA_ERROR_INVALID_DEVICE);
    g_primary[dev].device = dev;
    g_primary[dev].primary = true;
    g_primary_alive[dev] = true;
    g_primary_refs[dev]++;
    *ctx = &g_primary[dev];
    DRV_RETURN(CUDA_SUCCESS);
}

static CUresult CUDAAPI d_primary_release(CUdevice dev) {
    DRV_BEGIN("cuDevicePrimaryCtxRelease");
    if (dev < 0 || dev >= g_config.devices || g_primary_refs[dev] == 0) {
        violation("device %lu (%zu): released more often than retained", "cuDevicePrimaryCtxRelease",
                  (uintptr_t)dev, 0);
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    }
    g_primary_refs[dev]--; /* the context stays: the runtime's implicit use holds it too */
    DRV_RETURN(CUDA_SUCCESS);
}

static CUresult CUDAAPI d_ctx_get_current(CUcontext *ctx) {
    DRV_BEGIN("cuCtxGetCurrent");
    *ctx = t_current;
    DRV_RETURN(CUDA_SUCCESS);
}

static CUresult CUDAAPI d_ctx_set_current(CUcontext ctx) {
    DRV_BEGIN("cuCtxSetCurrent");
    t_current = ctx;
    DRV_RETURN(CUDA_SUCCESS);
}

void *cuda_double_user_context(int device) {
    /* live to the end of the test process, and reachable (no leak report) */
    static struct CUctx_st contexts[16];
    static atomic_int made;
    int k = atomic_fetch_add(&made, 1);
    if (k >= (int)(sizeof contexts / sizeof *contexts))
        return NULL;
    contexts[k].device = device;
    contexts[k].primary = false;
    return &contexts[k];
}

void *cuda_double_current(void) {
    return t_current;
}

bool cuda_double_mapped(const void *addr) {
    pthread_mutex_lock(&g_lock);
    bool in = false;
    for (size_t i = 0; i < g_nmaps && !in; i++)
        in = (uintptr_t)addr >= g_maps[i].addr && (uintptr_t)addr - g_maps[i].addr < g_maps[i].size;
    pthread_mutex_unlock(&g_lock);
    return in;
}

void *cuda_double_primary(int device) {
    pthread_mutex_lock(&g_lock);
    void *p = device >= 0 && device < CUDA_DOUBLE_MAX_DEVICES && g_primary_alive[device] ? &g_primary[device] : NULL;
    pthread_mutex_unlock(&g_lock);
    return p;
}

static CUresult CUDAAPI d_device_get_attribute(int *value, CUdevice_attribute attr, CUdevice dev) {
    DRV_BEGIN("cuDeviceGetAttribute");
    if (dev < 0 || dev >= g_config.devices)
        DRV_RETURN(CUDA_ERROR_INVALID_DEVICE);
    if (attr != CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)
        DRV_RETURN(CUDA_ERROR_NOT_SUPPORTED); /* the double knows this one attribute */
    *value = g_config.vmm;
    DRV_RETURN(CUDA_SUCCESS);
}

static CUresult CUDAAPI d_device_total_mem(size_t *bytes, CUdevice dev) {
    DRV_BEGIN("cuDeviceTotalMem");
    if (dev < 0 || dev >= g_config.devices)
        DRV_RETURN(CUDA_ERROR_INVALID_DEVICE);
    *bytes = g_config.device_bytes;
    DRV_RETURN(CUDA_SUCCESS);
}

/* ---- driver: virtual memory ----------------------------------------------- */

static bool no_context(const char *fn) { /* under g_lock */
    if (t_current)
        return false;
    violation("called with no current context (%#lx, %zu)", fn, 0, 0);
    return true;
}

static bool prop_ok(const CUmemAllocationProp *prop) {
    return prop && prop->type == CU_MEM_ALLOCATION_TYPE_PINNED && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
           prop->location.id >= 0 && prop->location.id < g_config.devices;
}

static CUresult CUDAAPI d_granularity(size_t *g, const CUmemAllocationProp *prop, CUmemAllocationGranularity_flags f) {
    (void)f;
    DRV_BEGIN("cuMemGetAllocationGranularity");
    if (!prop_ok(prop))
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    *g = g_config.granularity;
    DRV_RETURN(CUDA_SUCCESS);
}

static CUresult CUDAAPI d_reserve(CUdeviceptr *ptr, size_t size, size_t align, CUdeviceptr addr,
                                  unsigned long long flags) {
    (void)addr;
    DRV_BEGIN("cuMemAddressReserve");
    if (no_context("cuMemAddressReserve"))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    size_t g = g_config.granularity;
    if (size == 0 || size % g || (align && (align & (align - 1))) || flags) {
        violation("size %#lx / %zu not a multiple of the granularity, a bad alignment, or flags not 0",
                  "cuMemAddressReserve", size, align);
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    }
    size_t a = align > g ? align : g, raw_size = size + a;
    void *raw = mmap(NULL, raw_size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED)
        DRV_RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    uintptr_t base = ((uintptr_t)raw + a - 1) & ~(uintptr_t)(a - 1);
    grow((void **)&g_res, &g_capres, g_nres, sizeof *g_res);
    g_res[g_nres++] = (dbl_reservation){base, size, raw, raw_size};
    *ptr = (CUdeviceptr)base;
    DRV_RETURN(CUDA_SUCCESS);
}

static size_t mapped_in(uintptr_t lo, uintptr_t hi) { /* bytes of mappings overlapping [lo, hi) */
    size_t n = 0;
    for (size_t i = 0; i < g_nmaps; i++) {
        uintptr_t a = g_maps[i].addr, b = a + g_maps[i].size;
        if (a < hi && b > lo)
            n += (b < hi ? b : hi) - (a > lo ? a : lo);
    }
    return n;
}

static CUresult CUDAAPI d_address_free(CUdeviceptr ptr, size_t size) {
    DRV_BEGIN("cuMemAddressFree");
    if (no_context("cuMemAddressFree"))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    for (size_t i = 0; i < g_nres; i++) {
        if (g_res[i].base == (uintptr_t)ptr && g_res[i].size == size) {
            if (mapped_in(g_res[i].base, g_res[i].base + size)) {
                violation("%#lx (%zu bytes) still has mappings in it", "cuMemAddressFree", (uintptr_t)ptr, size);
                DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
            }
            munmap(g_res[i].raw, g_res[i].raw_size);
            g_res[i] = g_res[--g_nres];
            DRV_RETURN(CUDA_SUCCESS);
        }
    }
    violation("%#lx (%zu bytes) is not a reservation", "cuMemAddressFree", (uintptr_t)ptr, size);
    DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
}

static CUresult CUDAAPI d_create(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *prop,
                                 unsigned long long flags) {
    DRV_BEGIN("cuMemCreate");
    if (no_context("cuMemCreate"))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    if (!prop_ok(prop) || size == 0 || size % g_config.granularity || flags) {
        violation("size %#lx (%zu): not a multiple of the granularity, a bad prop, or flags not 0", "cuMemCreate",
                  size, 0);
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    }
    int dev = prop->location.id;
    if (size > device_free(dev))
        DRV_RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    grow((void **)&g_handles, &g_caphandles, g_nhandles, sizeof *g_handles);
    g_handles[g_nhandles++] = (dbl_handle){.size = size, .device = dev, .live = true};
    g_physical_bytes[dev] += size;
    g_stats.handles++;
    *h = g_nhandles; /* index + 1 */
    DRV_RETURN(CUDA_SUCCESS);
}

static dbl_handle *handle_of(CUmemGenericAllocationHandle h) {
    return h >= 1 && h <= g_nhandles && g_handles[h - 1].live ? &g_handles[h - 1] : NULL;
}

static void handle_maybe_free(dbl_handle *hd) {
    if (hd->released && !hd->mapped) {
        hd->live = false;
        g_physical_bytes[hd->device] -= hd->size;
        g_stats.handles--;
    }
}

size_t cuda_double_free_leaked_handles(void) {
    pthread_mutex_lock(&g_lock);
    size_t n = 0;
    for (size_t i = 0; i < g_nhandles; i++) {
        dbl_handle *hd = &g_handles[i];
        if (hd->live && !hd->released && !hd->mapped) {
            hd->released = true;
            handle_maybe_free(hd);
            n++;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return n;
}

static CUresult CUDAAPI d_release(CUmemGenericAllocationHandle h) {
    DRV_BEGIN("cuMemRelease");
    if (no_context("cuMemRelease"))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    dbl_handle *hd = handle_of(h);
    if (!hd || hd->released) {
        violation("handle %lu (%zu): not a live handle", "cuMemRelease", (uintptr_t)h, 0);
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    }
    hd->released = true;
    handle_maybe_free(hd);
    DRV_RETURN(CUDA_SUCCESS);
}

static const dbl_reservation *reservation_of(uintptr_t p, size_t size) {
    for (size_t i = 0; i < g_nres; i++)
        if (p >= g_res[i].base && size <= g_res[i].size && p - g_res[i].base <= g_res[i].size - size)
            return &g_res[i];
    return NULL;
}

static CUresult CUDAAPI d_map(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle h,
                              unsigned long long flags) {
    DRV_BEGIN("cuMemMap");
    if (no_context("cuMemMap"))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    uintptr_t p = (uintptr_t)ptr;
    dbl_handle *hd = handle_of(h);
    if (!hd || hd->mapped || offset != 0 || size == 0 || size % g_config.granularity || size > hd->size ||
        p % g_config.granularity || flags) {
        violation("%#lx (%zu bytes): a bad handle, offset, size, alignment or flags", "cuMemMap", p, size);
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    }
    if (!reservation_of(p, size) || mapped_in(p, p + size)) {
        violation("%#lx (%zu bytes): outside one reservation, or over a mapping", "cuMemMap", p, size);
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    }
    if (mmap((void *)p, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == MAP_FAILED)
        DRV_RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    grow((void **)&g_maps, &g_capmaps, g_nmaps, sizeof *g_maps);
    g_maps[g_nmaps++] = (dbl_mapping){p, size, h, false};
    hd->mapped = true;
    g_stats.mapped_bytes += size;
    DRV_RETURN(CUDA_SUCCESS);
}

static CUresult CUDAAPI d_set_access(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count) {
    DRV_BEGIN("cuMemSetAccess");
    if (no_context("cuMemSetAccess"))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    uintptr_t p = (uintptr_t)ptr;
    if (!desc || count != 1 || desc->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        desc->flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE || size == 0 || mapped_in(p, p + size) != size) {
        violation("%#lx (%zu bytes): not all mapped, or a descriptor the double does not take", "cuMemSetAccess", p,
                  size);
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    }
    /* Part of a mapping is refused (the double keeps access per mapping),
     * before anything changes: a refused call grants nothing. */
    for (size_t i = 0; i < g_nmaps; i++) {
        uintptr_t a = g_maps[i].addr, b = a + g_maps[i].size;
        if (a < p + size && b > p && (a < p || b > p + size)) {
            violation("%#lx (%zu bytes): covers part of a mapping", "cuMemSetAccess", p, size);
            DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
        }
    }
    mprotect((void *)p, size, PROT_READ | PROT_WRITE);
    if (g_config.granularity % (2 * MIB) == 0)         /* whole 2 MiB pages, none shared by two maps */
        (void)madvise((void *)p, size, MADV_HUGEPAGE); /* a GPU's: one fault each (a hint) */
    for (size_t i = 0; i < g_nmaps; i++) {
        dbl_mapping *m = &g_maps[i];
        if (m->addr >= p && m->addr + m->size <= p + size && !m->access) {
            m->access = true;
            g_stats.accessible_bytes += m->size;
        }
    }
    DRV_RETURN(CUDA_SUCCESS);
}

static CUresult CUDAAPI d_unmap(CUdeviceptr ptr, size_t size) {
    DRV_BEGIN("cuMemUnmap");
    if (no_context("cuMemUnmap"))
        DRV_RETURN(CUDA_ERROR_INVALID_CONTEXT);
    uintptr_t p = (uintptr_t)ptr, end = p + size;
    /* exactly a run of whole mappings: each byte mapped, no mapping sticking out */
    bool ok = size > 0 && mapped_in(p, end) == size;
    for (size_t i = 0; ok && i < g_nmaps; i++) {
        uintptr_t a = g_maps[i].addr, b = a + g_maps[i].size;
        if (a < end && b > p && (a < p || b > end))
            ok = false;
    }
    if (!ok) {
        violation("%#lx (%zu bytes): not exactly a run of whole mappings", "cuMemUnmap", p, size);
        DRV_RETURN(CUDA_ERROR_INVALID_VALUE);
    }
    mmap((void *)p, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    for (size_t i = 0; i < g_nmaps;) {
        dbl_mapping *m = &g_maps[i];
        if (m->addr >= p && m->addr < end) {
            dbl_handle *hd = &g_handles[m->handle - 1];
            hd->mapped = false;
            handle_maybe_free(hd);
            g_stats.mapped_bytes -= m->size;
            if (m->access)
                g_stats.accessible_bytes -= m->size;
            g_maps[i] = g_maps[--g_nmaps];
        } else {
            i++;
        }
    }
    DRV_RETURN(CUDA_SUCCESS);
}

/* ---- entry points ---------------------------------------------------------- */

static const struct {
    const char *name;
    void *fn;
} g_entry[] = {
    {"cuGetErrorString", (void *)(PFN_cuGetErrorString_v6000)d_get_error_string},
    {"cuDeviceGet", (void *)(PFN_cuDeviceGet_v2000)d_device_get},
    {"cuDevicePrimaryCtxRetain", (void *)(PFN_cuDevicePrimaryCtxRetain_v7000)d_primary_retain},
    {"cuDevicePrimaryCtxRelease", (void *)(PFN_cuDevicePrimaryCtxRelease_v11000)d_primary_release},
    {"cuCtxGetCurrent", (void *)(PFN_cuCtxGetCurrent_v4000)d_ctx_get_current},
    {"cuCtxSetCurrent", (void *)(PFN_cuCtxSetCurrent_v4000)d_ctx_set_current},
    {"cuDeviceGetAttribute", (void *)(PFN_cuDeviceGetAttribute_v2000)d_device_get_attribute},
    {"cuDeviceTotalMem", (void *)(PFN_cuDeviceTotalMem_v3020)d_device_total_mem},
    {"cuMemGetAllocationGranularity", (void *)(PFN_cuMemGetAllocationGranularity_v10020)d_granularity},
    {"cuMemAddressReserve", (void *)(PFN_cuMemAddressReserve_v10020)d_reserve},
    {"cuMemAddressFree", (void *)(PFN_cuMemAddressFree_v10020)d_address_free},
    {"cuMemCreate", (void *)(PFN_cuMemCreate_v10020)d_create},
    {"cuMemRelease", (void *)(PFN_cuMemRelease_v10020)d_release},
    {"cuMemMap", (void *)(PFN_cuMemMap_v10020)d_map},
    {"cuMemUnmap", (void *)(PFN_cuMemUnmap_v10020)d_unmap},
    {"cuMemSetAccess", (void *)(PFN_cuMemSetAccess_v10020)d_set_access},
};

cudaError_t CUDARTAPI cudaGetDriverEntryPointByVersion(const char *symbol, void **fn, unsigned int version,
                                                       unsigned long long flags,
                                                       enum cudaDriverEntryPointQueryResult *status) {
    (void)version;
    (void)flags;
    RT_BEGIN("cudaGetDriverEntryPointByVersion");
    const char *hidden = g_config.hidden;
    pthread_mutex_unlock(&g_lock);
    *fn = NULL;
    for (size_t i = 0; i < sizeof g_entry / sizeof *g_entry; i++) {
        if (strcmp(g_entry[i].name, symbol) == 0 && !(hidden && strcmp(hidden, symbol) == 0)) {
            *fn = g_entry[i].fn;
            if (status)
                *status = cudaDriverEntryPointSuccess;
            return cudaSuccess;
        }
    }
    if (status)
        *status = cudaDriverEntryPointSymbolNotFound;
    return cudaSuccess;
}

/* ---- inspection ------------------------------------------------------------ */

cuda_double_stats cuda_double_get_stats(void) {
    pthread_mutex_lock(&g_lock);
    cuda_double_stats s = g_stats;
    s.reservations = g_nres;
    for (int d = 0; d < CUDA_DOUBLE_MAX_DEVICES; d++) {
        s.malloc_bytes[d] = g_malloc_bytes[d];
        s.physical_bytes[d] = g_physical_bytes[d];
        s.primary_refs[d] = g_primary_refs[d];
    }
    s.pinned_bytes = g_pinned_bytes;
    s.streams = g_nstreams;
    s.async_copies = g_async_copies;
    pthread_mutex_unlock(&g_lock);
    return s;
}

unsigned long cuda_double_calls(const char *fn) {
    pthread_mutex_lock(&g_lock);
    unsigned long n = calls_of(fn);
    pthread_mutex_unlock(&g_lock);
    return n;
}

const char *cuda_double_log(void) {
    static char buf[LOG_CALLS * 41];
    pthread_mutex_lock(&g_lock);
    size_t n = g_logn < LOG_CALLS ? g_logn : LOG_CALLS, k = 0;
    buf[0] = '\0';
    for (size_t i = g_logn - n; i < g_logn; i++)
        k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%s", k ? " " : "", g_log[i % LOG_CALLS]);
    pthread_mutex_unlock(&g_lock);
    return buf;
}
