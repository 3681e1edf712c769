/*
 * cuda.c — device memory from the CUDA runtime (docs/allocator.md,
 * "Upstreams").
 *
 * - Ops: alloc/free are cudaMalloc/cudaFree (256-byte aligned, synchronous
 *   w.r.t. the device); mem_info is cudaMemGetInfo (the driver's own free
 *   count, which verifies that a release returned memory); synchronize is
 *   cudaDeviceSynchronize, stream_synchronize cudaStreamSynchronize (what
 *   a release of pages waits for); events are cudaEvent_t made with
 *   cudaEventDisableTiming (cheap to record and query); host_alloc and
 *   host_free are cudaMallocHost / cudaFreeHost (pinned; or, with
 *   host_memory CCA_HOST_MEMORY_REGISTERED, huge pages of an anonymous
 *   mapping, faulted in, then cudaHostRegister / cudaHostUnregister), copy one
 *   cudaMemcpyAsync on the upstream's own non-blocking stream (made on the
 *   first copy, destroyed with the upstream), copy_wait its
 *   cudaStreamSynchronize (sleep and wake: cca_domain_sleep).
 * - Contexts: every call makes the device's PRIMARY context current and
 *   then puts back the caller's, whatever it was (another device's, one of
 *   its own, none), so upstreams on several GPUs never move the program's
 *   work nor create a context it did not ask for. Switched with the driver
 *   (cuCtxGetCurrent, cuCtxSetCurrent only when not ours, and back), never
 *   cudaSetDevice/cudaGetDevice (on a fresh thread those would create
 *   device 0's primary context: docs/allocator.md, "Upstreams"). The
 *   primary context is retained once at creation (cuDevicePrimaryCtxRetain)
 *   and released by cca_upstream_destroy; cudaDeviceReset while the
 *   upstream lives is not supported.
 * - Built where the toolkit exists (CCA_HAVE_CUDA); without a GPU,
 *   cca_upstream_cuda_create returns CCA_ERR_NO_DEVICE with the driver's
 *   reason; without the toolkit, it says so. Runtime functions go through
 *   the table of cudart.c (rt->cudaMalloc): linked, or, in the Python
 *   wheel's build, found at run time (none found: CCA_ERR_NO_DEVICE naming
 *   what to install). Driver functions come from
 *   cudaGetDriverEntryPointByVersion (no link against libcuda; types from
 *   cudaTypedefs.h).
 *
 * Virtual memory (vm_* ops, offered when the driver and the device support
 * VMM; else the reason goes to the wrapper, which says it in vm_* messages
 * and in cca_create's expandable:1 fallback line).
 * - At creation: driver functions looked up, VIRTUAL_MEMORY_MANAGEMENT_
 *   SUPPORTED checked, the MINIMUM granularity asked once (2 MiB today).
 * - Every call is checked against the rules of cca_upstream_ops on the
 *   record (vm_ranges.c) BEFORE any driver call: a refused call changes
 *   nothing, as on the simulated device.
 * - Backings (cca_cuda_options.vm_backing): WHOLE_MAPS (the default), one
 *   physical allocation per vm_map, unmapped only whole; PAGES, one per
 *   granule, so any run of mapped granules can be unmapped (the driver
 *   unmaps only whole allocations). An "allocation" below is a granule or a
 *   map accordingly.
 *   vm_reserve  cuMemAddressReserve (granularity-aligned), recorded
 *   vm_release  cuMemAddressFree of a recorded range with nothing mapped
 *   vm_map      more than cudaMemGetInfo's free: OOM at once, nothing
 *               created. Then per allocation cuMemCreate + cuMemMap +
 *               cuMemRelease of the handle (the mapping keeps the memory;
 *               its unmap frees it: no handle table), then ONE
 *               cuMemSetAccess over the run. A failing step unmaps every
 *               allocation the call mapped (each tried, even past a
 *               failure) and returns OOM or UPSTREAM with the driver's
 *               error; unmaps the driver refuses too are counted in the
 *               message and stay in the record (the range's release is
 *               refused until they go).
 *   vm_unmap    cuMemUnmap per allocation, in address order. One failing:
 *               those before it are mapped again as laid out (new memory,
 *               contents lost: the allocator unmaps only free pages) and
 *               the call fails, mapping unchanged; if that map fails too,
 *               they stay unmapped and the message says so (and how many
 *               stay mapped should that undo be refused). The record
 *               follows the driver, but the caller (vm_mapped_bytes, a
 *               segment's page bitmap) still takes them as mapped: two
 *               refusals in a row, left at the message
 *               (tests/allocator/cuda/test_cuda_double_faults.c and
 *               test_cuda_double_whole_maps.c pin it).
 * - Page size: cca_upstream_cuda_create_with's vm_granularity, any power of
 *   two from the driver's minimum to 1 GiB and the device's memory
 *   (cuDeviceTotalMem, asked once at creation), ONE cuMemCreate per page in
 *   page mode; it holds whole minimum granules; the record and every rule
 *   work in pages.
 * - Limits (PyTorch adds peers and IPC): access for the owning device only
 *   (another GPU touching it faults), no shareable handle type (no IPC),
 *   gpuDirectRDMACapable not set.
 * - vm_lock: the vm ops of one upstream run one at a time (held across the
 *   record's check and the driver calls); alloc and free do not take it.
 *   The driver does not wait for queued kernels before unmapping: the
 *   allocator synchronizes first (trim, the OOM retry, domain release,
 *   cca_destroy).
 * - Costs in driver calls: page mode, vm_map 2 per page + 1
 *   (cuMemCreate, cuMemMap; one cuMemSetAccess), a cuMemRelease per page
 *   (host-side), one cudaMemGetInfo; vm_unmap 1 per page. WHOLE_MAPS: the
 *   same per map, whatever its size. Measured per page on an H100:
 *   docs/allocator-measurements.md, "Expandable segments".
 *
 * Cleanup steps: driver calls that only tidy up after an op, whose refusal
 * cannot change what the op did: putting the caller's context back (every
 * op), releasing a new allocation's handle once cuMemMap was tried,
 * freeing a reservation that could not be recorded (no host memory),
 * destroying the event of a refused cudaEventRecord, releasing the primary
 * context's retain (destroy, a failed creation).
 * - A refusal changes no status; one log line names the device, the call,
 *   the driver's error and what stays behind (the primary context current;
 *   "leaked: N bytes of device memory" for a handle, whose memory outlives
 *   its unmap; the range; the event; the retain).
 * - The lines are made under the vm lock or the allocator's and wait for
 *   the unlock (lock.c, "The log"): the vm ops hold the log across vm_lock.
 * - The undo of a failed map or unmap is not a cleanup step: what it
 *   leaves changes the op's message, as above.
 */
#include "upstream.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* The arguments, checked before any device is touched (with CUDA or
 * without): out cleared first where it can be. */
static cca_status options_check(const cca_cuda_options *o, cca_upstream **out, const char *fn) {
    if (!out)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    *out = NULL;
    if (!o)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "%s: options are NULL", fn);
    size_t g = o->vm_granularity;
    if (g && ((g & (g - 1)) || g % CCA_GRANULARITY || g > CCA_CUDA_MAX_VM_GRANULARITY))
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT,
                             "%s: vm_granularity %zu is not a power of two from %zu to %zu (0: the driver's minimum)",
                             fn, g, (size_t)CCA_GRANULARITY, CCA_CUDA_MAX_VM_GRANULARITY);
    if (o->vm_backing != CCA_VM_PAGES && o->vm_backing != CCA_VM_WHOLE_MAPS)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT,
                             "%s: vm_backing %d is neither CCA_VM_WHOLE_MAPS (0) nor CCA_VM_PAGES (1)", fn,
                             o->vm_backing);
    if (o->host_memory != CCA_HOST_MEMORY_PINNED && o->host_memory != CCA_HOST_MEMORY_REGISTERED)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT,
                             "%s: host_memory %d is neither CCA_HOST_MEMORY_PINNED (0) nor "
                             "CCA_HOST_MEMORY_REGISTERED (1)",
                             fn, o->host_memory);
    return CCA_OK;
}

#ifdef CCA_HAVE_CUDA
#include "cudart.h"

#include <cudaTypedefs.h>
#include <stdint.h>
#include <sys/mman.h>

/* The driver's functions every upstream needs: contexts and messages. */
typedef struct cuda_driver {
    PFN_cuGetErrorString_v6000 error_string;
    PFN_cuDeviceGet_v2000 device_get;
    PFN_cuDevicePrimaryCtxRetain_v7000 primary_retain;
    PFN_cuDevicePrimaryCtxRelease_v11000 primary_release;
    PFN_cuCtxGetCurrent_v4000 ctx_get_current;
    PFN_cuCtxSetCurrent_v4000 ctx_set_current;
} cuda_driver;

/* The driver's VMM entry points, and what every map needs. */
typedef struct cuda_vmm {
    PFN_cuMemAddressReserve_v10020 reserve;
    PFN_cuMemAddressFree_v10020 address_free;
    PFN_cuMemCreate_v10020 create;
    PFN_cuMemRelease_v10020 release;
    PFN_cuMemMap_v10020 map;
    PFN_cuMemUnmap_v10020 unmap;
    PFN_cuMemSetAccess_v10020 set_access;
    size_t granularity;
    CUmemAllocationProp prop;
    CUmemAccessDesc access;
} cuda_vmm;

typedef struct cuda_device {
    const ccai_cudart *rt; /* the runtime's functions (cudart.c: linked, or found at run time) */
    int device;
    CUdevice dev;
    CUcontext primary; /* the device's primary context, retained at creation */
    char name[32];
    cuda_driver drv;
    cuda_vmm vm;             /* valid when the vm_* ops are in the table */
    bool whole_maps;         /* vm_backing CCA_VM_WHOLE_MAPS: one allocation per vm_map */
    bool registered;         /* host_memory CCA_HOST_MEMORY_REGISTERED: mmap + cudaHostRegister */
    pthread_mutex_t vm_lock; /* around each vm op: the record's check, then the driver calls it allows */
    ccai_vm_ranges ranges;   /* reserved ranges and their mapped granules; under vm_lock */
    pthread_mutex_t copy_lock; /* around the copy stream's creation */
    cudaStream_t copy_stream;  /* the copies' own (host and copy ops); NULL until the first copy */
} cuda_device;

static cca_status cuda_error(const cuda_device *d, cudaError_t e, const char *what) {
    cca_status st = e == cudaErrorMemoryAllocation ? CCA_ERR_OUT_OF_MEMORY : CCA_ERR_UPSTREAM;
    (void)d->rt->cudaGetLastError(); /* clear the sticky-free error state */
    return cca_set_error(st, "cuda: %s failed: %s", what, d->rt->cudaGetErrorString(e));
}

/* The driver's words for r. */
static const char *driver_text(const cuda_device *d, CUresult r) {
    const char *text = NULL;
    if (!d->drv.error_string || d->drv.error_string(r, &text) != CUDA_SUCCESS || !text)
        text = "unknown driver error";
    return text;
}

static cca_status driver_error(const cuda_device *d, CUresult r, const char *what) {
    return cca_set_error(r == CUDA_ERROR_OUT_OF_MEMORY ? CCA_ERR_OUT_OF_MEMORY : CCA_ERR_UPSTREAM,
                         "cuda: %s failed: %s (CUresult %d)", what, driver_text(d, r), (int)r);
}

/* A cleanup step the driver refused (see "Cleanup steps" above): one log
 * line naming the device, the call, the driver's error and what stays
 * behind (`stays`, printf-style). The op's result is not changed. */
static void log_refused(const cuda_device *d, CUresult r, const char *call, const char *stays, ...) CCA_PRINTF(4, 5);
static void log_refused(const cuda_device *d, CUresult r, const char *call, const char *stays, ...) {
    char what[256];
    va_list ap;
    va_start(ap, stays);
    vsnprintf(what, sizeof what, stays, ap);
    va_end(ap);
    ccai_log("%s: %s failed: %s (CUresult %d); %s", d->name, call, driver_text(d, r), (int)r, what);
}

/* The caller's current context, put back by leave (NULL: it had none). */
typedef struct cuda_caller {
    CUcontext context;
    bool switched;
} cuda_caller;

/* Make the device's primary context current, unless it already is. */
static cca_status enter(const cuda_device *d, cuda_caller *c) {
    c->context = NULL;
    c->switched = false;
    CUresult r = d->drv.ctx_get_current(&c->context);
    if (r != CUDA_SUCCESS)
        return driver_error(d, r, "cuCtxGetCurrent");
    if (c->context == d->primary)
        return CCA_OK;
    if ((r = d->drv.ctx_set_current(d->primary)) != CUDA_SUCCESS)
        return driver_error(d, r, "cuCtxSetCurrent");
    c->switched = true;
    return CCA_OK;
}

/* Give the caller back its own current context (or none). Should the
 * driver refuse (the caller's context destroyed meanwhile, say), the op has
 * happened and stands (failing it now would lose what it did), the primary
 * context stays current on this thread, and one log line says so, for the
 * program to put its own back. */
static void leave(const cuda_device *d, const cuda_caller *c) {
    if (!c->switched)
        return;
    CUresult r = d->drv.ctx_set_current(c->context);
    if (r != CUDA_SUCCESS) {
        char call[96];
        snprintf(call, sizeof call, "cuCtxSetCurrent back to the caller's context %p", (void *)c->context);
        log_refused(d, r, call, "the op stands, and the device's primary context stays current on this thread");
    }
}

/* Run the runtime call `call` in the device's primary context, then give
 * the caller back its own: an allocator call must not move the program's
 * kernels, nor create a context. */
#define ON_DEVICE(d, call, what)                                                                                       \
    do {                                                                                                               \
        cuda_caller caller_;                                                                                           \
        cca_status st_enter_ = enter((d), &caller_);                                                                   \
        if (st_enter_ != CCA_OK)                                                                                       \
            return st_enter_;                                                                                          \
        cudaError_t e_call_ = (call);                                                                                  \
        leave((d), &caller_);                                                                                          \
        if (e_call_ != cudaSuccess)                                                                                    \
            return cuda_error((d), e_call_, what);                                                                     \
    } while (0)

static cca_status cuda_alloc(void *ctx, size_t size, void **ptr) {
    cuda_device *d = ctx;
    ON_DEVICE(d, d->rt->cudaMalloc(ptr, size), "cudaMalloc");
    return CCA_OK;
}

static cca_status cuda_free(void *ctx, void *ptr, size_t size) {
    cuda_device *d = ctx;
    (void)size;
    ON_DEVICE(d, d->rt->cudaFree(ptr), "cudaFree");
    return CCA_OK;
}

static cca_status cuda_mem_info(void *ctx, size_t *free_bytes, size_t *total_bytes) {
    cuda_device *d = ctx;
    ON_DEVICE(d, d->rt->cudaMemGetInfo(free_bytes, total_bytes), "cudaMemGetInfo");
    return CCA_OK;
}

static cca_status cuda_synchronize(void *ctx) {
    cuda_device *d = ctx;
    ON_DEVICE(d, d->rt->cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    return CCA_OK;
}

static cca_status cuda_stream_synchronize(void *ctx, cca_stream stream) {
    cuda_device *d = ctx;
    ON_DEVICE(d, d->rt->cudaStreamSynchronize((cudaStream_t)stream), "cudaStreamSynchronize");
    return CCA_OK;
}

/* Create an event on the device and record it on `stream` (one call, so that
 * ON_DEVICE brackets both). An event whose record failed is destroyed; should
 * that be refused too, it leaks, and one log line says so (the record's
 * failure is what the op returns). */
static cudaError_t create_and_record(const cuda_device *d, cudaEvent_t *ev, cudaStream_t stream) {
    cudaError_t e = d->rt->cudaEventCreateWithFlags(ev, cudaEventDisableTiming);
    if (e != cudaSuccess)
        return e;
    e = d->rt->cudaEventRecord(*ev, stream);
    cudaError_t back = e != cudaSuccess ? d->rt->cudaEventDestroy(*ev) : cudaSuccess;
    if (back != cudaSuccess)
        ccai_log("%s: cudaEventDestroy of the event whose cudaEventRecord failed, failed: %s; the event leaks", d->name,
                 d->rt->cudaGetErrorString(back));
    return e;
}

static cca_status cuda_event_record(void *ctx, cca_stream stream, void **event) {
    cuda_device *d = ctx;
    cudaEvent_t ev;
    ON_DEVICE(d, create_and_record(d, &ev, (cudaStream_t)stream), "cudaEventRecord");
    *event = ev;
    return CCA_OK;
}

/* Query and destroy in the device's context too: on a thread with no
 * context the runtime would make one on device 0 for them. */
/* cudaEventQuery, "not ready" a success with *ready false. The runtime's
 * pages do not say whether "not ready" ("not actually an error") lands in
 * the thread's last error: it is cleared only when the last error holds
 * it, so that the caller finds no "not ready" of ours, and an error of its
 * own still pending (a launch not checked yet) is not wiped out. */
static cudaError_t query_event(const cuda_device *d, cudaEvent_t ev, bool *ready) {
    cudaError_t e = d->rt->cudaEventQuery(ev);
    *ready = e != cudaErrorNotReady;
    if (*ready)
        return e;
    if (d->rt->cudaPeekAtLastError() == cudaErrorNotReady)
        (void)d->rt->cudaGetLastError();
    return cudaSuccess;
}

static cca_status cuda_event_query(void *ctx, void *event) {
    cuda_device *d = ctx;
    bool ready = false;
    ON_DEVICE(d, query_event(d, (cudaEvent_t)event, &ready), "cudaEventQuery");
    return ready ? CCA_OK : CCA_ERR_NOT_READY;
}

static cca_status cuda_event_destroy(void *ctx, void *event) {
    cuda_device *d = ctx;
    ON_DEVICE(d, d->rt->cudaEventDestroy((cudaEvent_t)event), "cudaEventDestroy");
    return CCA_OK;
}

/* ---- host staging memory and copies (sleep and wake) ---------------------- */

/* Registered host memory (CCA_HOST_MEMORY_REGISTERED) comes in huge pages:
 * a mapping of `size` rounded up to HUGE, HUGE-aligned. */
#define HUGE ((size_t)2 << 20)

static size_t huge_round(size_t size) {
    return size > SIZE_MAX - (HUGE - 1) ? 0 : (size + HUGE - 1) & ~(HUGE - 1);
}

/* An anonymous mapping of len bytes (a multiple of HUGE), HUGE-aligned,
 * huge pages asked for, faulted in; NULL when the host has no room. */
static void *huge_mapping(size_t len) {
    if (len > SIZE_MAX - HUGE)
        return NULL;
    char *raw = mmap(NULL, len + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    char *p = (char *)(((uintptr_t)raw + HUGE - 1) & ~(uintptr_t)(HUGE - 1));
    if (p > raw) /* the unaligned head and tail go back */
        munmap(raw, (size_t)(p - raw));
    if (p + len < raw + len + HUGE)
        munmap(p + len, (size_t)(raw + len + HUGE - (p + len)));
    (void)madvise(p, len, MADV_HUGEPAGE); /* advice: without it, small pages */
#ifdef MADV_POPULATE_WRITE
    (void)madvise(p, len, MADV_POPULATE_WRITE); /* else cudaHostRegister faults them in as it pins */
#endif
    return p;
}

/* A refused unregister leaves the mapping: unmapping memory the driver
 * still holds pinned is not allowed. */
static cudaError_t unregister_host(cuda_device *d, void *ptr, size_t size) {
    cudaError_t e = d->rt->cudaHostUnregister(ptr);
    if (e == cudaSuccess)
        munmap(ptr, huge_round(size));
    return e;
}

/* Registered: the mapping, then cudaHostRegister of it in the device's
 * context; whatever refuses, the mapping goes back. */
static cca_status register_host(cuda_device *d, size_t size, void **ptr) {
    size_t len = huge_round(size);
    void *p = len ? huge_mapping(len) : NULL;
    if (!len)
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY,
                             "cuda: host memory: %zu bytes rounded up to huge pages of %zu pass SIZE_MAX", size, HUGE);
    if (!p)
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "cuda: host memory: mmap of %zu bytes (%zu asked) failed", len,
                             size);
    cuda_caller caller;
    cca_status st = enter(d, &caller);
    if (st != CCA_OK) {
        munmap(p, len);
        return st;
    }
    cudaError_t e = d->rt->cudaHostRegister(p, len, cudaHostRegisterDefault);
    leave(d, &caller);
    if (e != cudaSuccess) {
        munmap(p, len);
        return cuda_error(d, e, "cudaHostRegister");
    }
    *ptr = p;
    return CCA_OK;
}

static cca_status cuda_host_alloc(void *ctx, size_t size, void **ptr) {
    cuda_device *d = ctx;
    if (d->registered)
        return register_host(d, size, ptr);
    ON_DEVICE(d, d->rt->cudaMallocHost(ptr, size), "cudaMallocHost");
    return CCA_OK;
}

static cca_status cuda_host_free(void *ctx, void *ptr, size_t size) {
    cuda_device *d = ctx;
    if (d->registered)
        ON_DEVICE(d, unregister_host(d, ptr, size), "cudaHostUnregister");
    else
        ON_DEVICE(d, d->rt->cudaFreeHost(ptr), "cudaFreeHost");
    return CCA_OK;
}

/* The copy stream, made on first use (non-blocking: never ordered after the
 * legacy default stream's work, nor it after the copies). */
static cudaError_t copy_stream(cuda_device *d, cudaStream_t *out) {
    pthread_mutex_lock(&d->copy_lock);
    cudaError_t e = cudaSuccess;
    if (!d->copy_stream)
        e = d->rt->cudaStreamCreateWithFlags(&d->copy_stream, cudaStreamNonBlocking);
    if (e != cudaSuccess)
        d->copy_stream = NULL;
    *out = d->copy_stream;
    pthread_mutex_unlock(&d->copy_lock);
    return e;
}

static cudaError_t queue_copy(cuda_device *d, void *dst, const void *src, size_t size, int to_host) {
    cudaStream_t s;
    cudaError_t e = copy_stream(d, &s);
    if (e != cudaSuccess)
        return e;
    return d->rt->cudaMemcpyAsync(dst, src, size, to_host ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice, s);
}

static cca_status cuda_copy(void *ctx, void *dst, const void *src, size_t size, int to_host) {
    cuda_device *d = ctx;
    ON_DEVICE(d, queue_copy(d, dst, src, size, to_host), "cudaMemcpyAsync");
    return CCA_OK;
}

static cca_status cuda_copy_wait(void *ctx) {
    cuda_device *d = ctx;
    pthread_mutex_lock(&d->copy_lock);
    cudaStream_t s = d->copy_stream;
    pthread_mutex_unlock(&d->copy_lock);
    if (!s) /* no copy was ever queued */
        return CCA_OK;
    ON_DEVICE(d, d->rt->cudaStreamSynchronize(s), "cudaStreamSynchronize of the copy stream");
    return CCA_OK;
}

/* At cca_upstream_destroy: the copy stream goes (in the device's context). */
static void destroy_copy_stream(cuda_device *d) {
    if (!d->copy_stream)
        return;
    cuda_caller caller;
    if (enter(d, &caller) != CCA_OK) {
        ccai_log("%s: the copy stream could not be destroyed (no context): it stays with the context", d->name);
        return;
    }
    cudaError_t e = d->rt->cudaStreamDestroy(d->copy_stream);
    leave(d, &caller);
    if (e != cudaSuccess)
        ccai_log("%s: cudaStreamDestroy of the copy stream failed: %s; it stays with the context", d->name,
                 d->rt->cudaGetErrorString(e));
    d->copy_stream = NULL;
}

/* ---- virtual memory ------------------------------------------------------- */

/* d->vm_lock around a vm op, with this thread's log held across it: a line the
 * op logs (a cleanup step refused) reaches the sink after the unlock, never
 * under the lock (a sink may call this upstream back). Counted among the
 * thread's ccalloc locks at CCA_DEBUG >= 1, so that log.c's check
 * covers it. */
static void take_vm_lock(cuda_device *d) {
    ccai_log_hold();
    pthread_mutex_lock(&d->vm_lock);
#if CCA_DEBUG >= 1
    ccai_mutexes_held++;
#endif
}

static void give_vm_lock(cuda_device *d) {
#if CCA_DEBUG >= 1
    ccai_mutexes_held--;
#endif
    pthread_mutex_unlock(&d->vm_lock);
    ccai_log_release();
}

static cca_status cuda_vm_granularity(void *ctx, size_t *bytes) {
    *bytes = ((cuda_device *)ctx)->vm.granularity;
    return CCA_OK;
}

/* A reservation is recorded (vm_ranges.c) so that every later call can be
 * checked against the rules before the driver is asked anything. */
static cca_status cuda_vm_reserve(void *ctx, size_t size, void **base) {
    cuda_device *d = ctx;
    take_vm_lock(d);
    cuda_caller caller;
    cca_status st = enter(d, &caller);
    if (st != CCA_OK) {
        give_vm_lock(d);
        return st;
    }
    CUdeviceptr p = 0;
    CUresult r = d->vm.reserve(&p, size, d->vm.granularity, 0, 0);
    if (r != CUDA_SUCCESS)
        st = driver_error(d, r, "cuMemAddressReserve");
    else if ((st = ccai_vm_ranges_add(&d->ranges, (uintptr_t)p, size)) != CCA_OK &&
             (r = d->vm.address_free(p, size)) != CUDA_SUCCESS) { /* unrecorded: not handed out */
        char call[160];
        snprintf(call, sizeof call, "cuMemAddressFree of %p (%zu bytes), reserved but not recorded,",
                 (void *)(uintptr_t)p, size);
        log_refused(d, r, call, "the range stays reserved (leaked: %zu bytes of address space)", size);
    }
    leave(d, &caller);
    give_vm_lock(d);
    if (st == CCA_OK)
        *base = (void *)(uintptr_t)p;
    return st;
}

static cca_status cuda_vm_release(void *ctx, void *base, size_t size) {
    cuda_device *d = ctx;
    take_vm_lock(d);
    ccai_vm_range *range = NULL;
    cuda_caller caller;
    cca_status st = ccai_vm_check_release(&d->ranges, (uintptr_t)base, size, &range);
    if (st == CCA_OK && (st = enter(d, &caller)) == CCA_OK) {
        CUresult r = d->vm.address_free((CUdeviceptr)(uintptr_t)base, size);
        leave(d, &caller);
        if (r == CUDA_SUCCESS)
            ccai_vm_ranges_remove(&d->ranges, range);
        else
            st = driver_error(d, r, "cuMemAddressFree");
    }
    give_vm_lock(d);
    return st;
}

/* Unmap the allocations of granules [first, first + n) of range r, one
 * cuMemUnmap each, in address order (one per granule in page mode, one per
 * map with whole maps: vm_ranges.c's starts bits say where each begins;
 * the caller checked that the run holds whole ones), clearing their mapped
 * bits as it goes. keep_going: past failures too (best effort: undoing a
 * map frees all the driver lets go); else the first failure stops it.
 * Returns the first failure, *at its first granule, *failed how many
 * allocations failed (their bits stay set: still mapped). */
static CUresult unmap_allocations(const cuda_device *d, ccai_vm_range *r, size_t first, size_t n, bool keep_going,
                                  size_t *failed, size_t *at) {
    size_t g = d->vm.granularity;
    CUresult first_error = CUDA_SUCCESS;
    *failed = 0;
    for (size_t i = first, end; i < first + n; i = end) {
        end = ccai_vm_map_end(r, i, first + n);
        CUresult e = d->vm.unmap((CUdeviceptr)(r->base + i * g), (end - i) * g);
        if (e == CUDA_SUCCESS) {
            for (size_t j = i; j < end; j++)
                ccai_vm_range_set(r, j, false);
            continue;
        }
        if ((*failed)++ == 0) {
            first_error = e;
            *at = i;
        }
        if (!keep_going)
            break;
    }
    return first_error;
}

/* Drop the handle of a new allocation once cuMemMap has been tried at
 * addr: mapped, the mapping keeps the memory (its unmap frees it); not
 * mapped, this frees it. A release the driver refuses changes nothing the
 * op returns (a map stands, a failed map fails for its own reason), but
 * the memory then outlives its unmap: one log line says how much leaks. */
static void release_handle(const cuda_device *d, CUmemGenericAllocationHandle h, void *addr, size_t size, bool mapped) {
    CUresult e = d->vm.release(h);
    if (e == CUDA_SUCCESS)
        return;
    char call[160];
    if (mapped) {
        snprintf(call, sizeof call, "cuMemRelease of the allocation mapped at %p (%zu bytes)", addr, size);
        log_refused(d, e, call, "its unmap will not free it (leaked: %zu bytes of device memory)", size);
    } else {
        snprintf(call, sizeof call, "cuMemRelease of the allocation made for %p (%zu bytes), whose cuMemMap failed,",
                 addr, size);
        log_refused(d, e, call, "it stays allocated (leaked: %zu bytes of device memory)", size);
    }
}

/* Map the allocations of granules [first, first + n) of range r as the
 * starts bits lay them out (ccai_vm_range_mark_map for a new map; as they
 * were for an unmap's undo), each new memory of its own (cuMemCreate of
 * its size + cuMemMap, then cuMemRelease: the mapping keeps the memory and
 * its unmap frees it), setting their mapped bits, then one cuMemSetAccess
 * for all of them. On a failure *what names the failed step and *at the
 * first granule of its allocation, and every allocation mapped here is
 * unmapped again, best effort: *stuck counts those the driver would not
 * let go (still mapped, their bits set); 0 means nothing stays mapped or
 * allocated. */
static CUresult map_allocations(const cuda_device *d, ccai_vm_range *r, size_t first, size_t n, const char **what,
                                size_t *at, size_t *stuck) {
    size_t g = d->vm.granularity, i = first, end, undo_at;
    CUresult e = CUDA_SUCCESS;
    *stuck = 0;
    for (; i < first + n; i = end) {
        end = ccai_vm_map_end(r, i, first + n);
        CUmemGenericAllocationHandle h;
        *what = "cuMemCreate";
        if ((e = d->vm.create(&h, (end - i) * g, &d->vm.prop, 0)) != CUDA_SUCCESS)
            break;
        *what = "cuMemMap";
        e = d->vm.map((CUdeviceptr)(r->base + i * g), (end - i) * g, 0, h, 0);
        /* mapped: the mapping holds the memory; not mapped: this frees it */
        release_handle(d, h, (void *)(r->base + i * g), (end - i) * g, e == CUDA_SUCCESS);
        if (e != CUDA_SUCCESS)
            break;
        for (size_t j = i; j < end; j++)
            ccai_vm_range_set(r, j, true);
    }
    *at = i;
    if (e == CUDA_SUCCESS) {
        *what = "cuMemSetAccess";
        e = d->vm.set_access((CUdeviceptr)(r->base + first * g), n * g, &d->vm.access, 1);
    }
    if (e != CUDA_SUCCESS)
        (void)unmap_allocations(d, r, first, i - first, true, stuck, &undo_at);
    return e;
}

/* How many allocations start in granules [first, first + n). */
static size_t allocations_in(const ccai_vm_range *r, size_t first, size_t n) {
    size_t count = 0;
    for (size_t i = first; i < first + n; i = ccai_vm_map_end(r, i, first + n))
        count++;
    return count;
}

/* More than the device has free cannot be mapped: refused before anything
 * is created, by one cudaMemGetInfo, instead of a cuMemCreate + cuMemMap
 * per granule of free memory until the driver runs out, then as many
 * unmaps (40 000 granules on an 80 GB device). A cudaMemGetInfo that
 * fails decides nothing: the map is tried. */
static cca_status room_for(const cuda_device *d, const void *addr, size_t size) {
    size_t free_b = 0, total_b = 0;
    cudaError_t e = d->rt->cudaMemGetInfo(&free_b, &total_b);
    if (e != cudaSuccess) {
        (void)d->rt->cudaGetLastError();
        return CCA_OK;
    }
    if (size <= free_b)
        return CCA_OK;
    return cca_set_error(CCA_ERR_OUT_OF_MEMORY,
                         "%s: vm_map of %p (%zu bytes): the device has %zu bytes free (cudaMemGetInfo); nothing mapped",
                         d->name, addr, size, free_b);
}

/* The start of a map or an unmap of a run: the VM lock, the run checked
 * against the record (vm_ranges.c), the device's context entered. On
 * CCA_OK the lock is held and the context entered (the caller leaves both);
 * otherwise neither, and nothing was done. */
static cca_status run_begin(cuda_device *d, bool unmap, void *addr, size_t size, ccai_vm_range **range, size_t *first,
                            cuda_caller *caller) {
    take_vm_lock(d);
    cca_status st = unmap ? ccai_vm_check_unmap(&d->ranges, (uintptr_t)addr, size, range, first)
                          : ccai_vm_check_map(&d->ranges, (uintptr_t)addr, size, range, first);
    if (st == CCA_OK)
        st = enter(d, caller);
    if (st != CCA_OK)
        give_vm_lock(d);
    return st;
}

/* The rules first (vm_ranges.c: inside one range, no granule already
 * mapped), so a refusal changes nothing; then room on the device; then
 * the allocations: one per granule, or one for the whole map. */
static cca_status cuda_vm_map(void *ctx, void *addr, size_t size) {
    cuda_device *d = ctx;
    size_t n = size / d->vm.granularity, first = 0, at = 0, stuck = 0; /* the wrapper checked: a multiple */
    ccai_vm_range *range = NULL;
    cuda_caller caller;
    cca_status st = run_begin(d, false, addr, size, &range, &first, &caller);
    if (st != CCA_OK)
        return st;
    const char *what = "cuMemCreate";
    CUresult e = CUDA_SUCCESS;
    if ((st = room_for(d, addr, size)) == CCA_OK) {
        ccai_vm_range_mark_map(&d->ranges, range, first, n);
        e = map_allocations(d, range, first, n, &what, &at, &stuck);
    }
    leave(d, &caller);
    give_vm_lock(d);
    if (st != CCA_OK)
        return st;
    if (e == CUDA_SUCCESS)
        return CCA_OK;
    char step[384], left[192] = "";
    bool whole = d->ranges.whole_maps;
    if (stuck && whole)
        snprintf(left, sizeof left,
                 "; the map could not be unmapped again and stays mapped (the range cannot be released until it is)");
    else if (stuck)
        snprintf(left, sizeof left,
                 "; %zu of the granules it mapped could not be unmapped again and stay mapped (the range cannot be "
                 "released until they are)",
                 stuck);
    if (whole)
        snprintf(step, sizeof step, "vm_map of %p (%zu granules, one map): %s %s it%s", addr, n, what,
                 strcmp(what, "cuMemSetAccess") == 0 ? "over" : "of", left);
    else if (strcmp(what, "cuMemSetAccess") == 0)
        snprintf(step, sizeof step, "vm_map of %p (%zu granules): cuMemSetAccess over them%s", addr, n, left);
    else
        snprintf(step, sizeof step, "vm_map of %p (%zu granules): %s of granule %zu%s", addr, n, what, at - first,
                 left);
    return driver_error(d, e, step); /* OOM for CUDA_ERROR_OUT_OF_MEMORY */
}

/* The rules first (vm_ranges.c: inside one range, every granule mapped;
 * with whole maps, whole maps only), so a refusal changes nothing; then
 * one cuMemUnmap per allocation (granule, or map). Should the driver fail
 * one all the same, the allocations before it are mapped again as they
 * were laid out (new memory: their contents are lost; the allocator
 * unmaps only free pages) so that what is mapped is unchanged. The
 * messages count granules in page mode, maps with whole maps. */
static cca_status cuda_vm_unmap(void *ctx, void *addr, size_t size) {
    cuda_device *d = ctx;
    size_t n = size / d->vm.granularity, first = 0, failed = 0, at = 0;
    ccai_vm_range *range = NULL;
    cuda_caller caller;
    cca_status st = run_begin(d, true, addr, size, &range, &first, &caller);
    if (st != CCA_OK)
        return st;
    bool whole = d->ranges.whole_maps;
    size_t units = whole ? allocations_in(range, first, n) : n; /* read before the bits change */
    CUresult e = unmap_allocations(d, range, first, n, false, &failed, &at);
    CUresult back = CUDA_SUCCESS;
    size_t done = e == CUDA_SUCCESS ? n : at - first, back_at = 0, stuck = 0;
    size_t done_units = whole && done ? allocations_in(range, first, done) : done;
    const char *what = "cuMemCreate";
    if (e != CUDA_SUCCESS && done > 0)
        back = map_allocations(d, range, first, done, &what, &back_at, &stuck);
    leave(d, &caller);
    give_vm_lock(d);
    if (e == CUDA_SUCCESS)
        return CCA_OK;
    char call[160], step[512];
    if (whole)
        snprintf(call, sizeof call, "vm_unmap of %p (%zu granules in %zu maps): cuMemUnmap of map %zu (granule %zu)",
                 addr, n, units, done_units, at - first);
    else
        snprintf(call, sizeof call, "vm_unmap of %p (%zu granules): cuMemUnmap of granule %zu", addr, n, done);
    if (back != CUDA_SUCCESS && stuck) /* mapped again, then that map's own undo refused for these */
        snprintf(step, sizeof step,
                 "%s, and mapping the %zu before it again failed too (%s): %zu of them %s mapped (mapped again, "
                 "and %s undo refused), the other %zu %s unmapped",
                 call, done_units, what, stuck, stuck == 1 ? "stays" : "stay", stuck == 1 ? "its" : "their",
                 done_units - stuck, done_units - stuck == 1 ? "stays" : "stay");
    else if (back != CUDA_SUCCESS)
        snprintf(step, sizeof step, "%s, and mapping the %zu before it again failed too (%s): they stay unmapped", call,
                 done_units, what);
    else
        snprintf(step, sizeof step, "%s (the %zu before it mapped again, contents lost: what is mapped is unchanged)",
                 call, done_units);
    (void)driver_error(d, e, step); /* the message; a refusal whatever the driver said */
    return CCA_ERR_UPSTREAM;
}

/* Look up n driver functions by name (the ABI of CUDA 12.0 each): true
 * when all are there, else the first missing one goes to *why. */
static bool lookup(const ccai_cudart *rt, const char *const *names, void **const *fns, size_t n, char *why,
                   size_t whylen) {
    for (size_t i = 0; i < n; i++) {
        enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        if (rt->cudaGetDriverEntryPointByVersion(names[i], fns[i], 12000, cudaEnableDefault, &q) != cudaSuccess ||
            q != cudaDriverEntryPointSuccess || !*fns[i]) {
            (void)rt->cudaGetLastError();
            snprintf(why, whylen, "the driver has no %s", names[i]);
            return false;
        }
    }
    return true;
}

/* The functions every upstream needs (contexts, messages). */
static bool load_driver(cuda_device *d, char *why, size_t whylen) {
    static const char *const names[] = {"cuGetErrorString",          "cuDeviceGet",     "cuDevicePrimaryCtxRetain",
                                        "cuDevicePrimaryCtxRelease", "cuCtxGetCurrent", "cuCtxSetCurrent"};
    void **const fns[] = {(void **)&d->drv.error_string,    (void **)&d->drv.device_get,
                          (void **)&d->drv.primary_retain,  (void **)&d->drv.primary_release,
                          (void **)&d->drv.ctx_get_current, (void **)&d->drv.ctx_set_current};
    return lookup(d->rt, names, fns, sizeof names / sizeof *names, why, whylen);
}

/* Look the driver's VMM functions up and check the device: true when the
 * vm_* ops can be offered. Why not goes to *why (no error is set). */
static bool load_vmm(cuda_device *d, char *why, size_t whylen) {
    PFN_cuDeviceGetAttribute_v2000 get_attribute = NULL;
    PFN_cuMemGetAllocationGranularity_v10020 get_granularity = NULL;
    static const char *const names[] = {"cuMemAddressReserve",
                                        "cuMemAddressFree",
                                        "cuMemCreate",
                                        "cuMemRelease",
                                        "cuMemMap",
                                        "cuMemUnmap",
                                        "cuMemSetAccess",
                                        "cuDeviceGetAttribute",
                                        "cuMemGetAllocationGranularity"};
    void **const fns[] = {(void **)&d->vm.reserve,    (void **)&d->vm.address_free, (void **)&d->vm.create,
                          (void **)&d->vm.release,    (void **)&d->vm.map,          (void **)&d->vm.unmap,
                          (void **)&d->vm.set_access, (void **)&get_attribute,      (void **)&get_granularity};
    if (!lookup(d->rt, names, fns, sizeof names / sizeof *names, why, whylen))
        return false;
    int supported = 0;
    if (get_attribute(&supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, d->dev) != CUDA_SUCCESS ||
        !supported) {
        snprintf(why, whylen, "device %d does not support virtual memory management", d->device);
        return false;
    }
    memset(&d->vm.prop, 0, sizeof d->vm.prop);
    d->vm.prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    d->vm.prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    d->vm.prop.location.id = d->device;
    memset(&d->vm.access, 0, sizeof d->vm.access);
    d->vm.access.location = d->vm.prop.location;
    d->vm.access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    size_t g = 0;
    if (get_granularity(&g, &d->vm.prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS || g == 0 ||
        g % CCA_GRANULARITY || (g & (g - 1))) {
        snprintf(why, whylen, "device %d reported no usable granularity (%zu)", d->device, g);
        return false;
    }
    if (d->vm.granularity % g) { /* asked for (a power of two, checked): must hold whole minimum granules */
        snprintf(why, whylen, "vm_granularity %zu is not a multiple of device %d's minimum granularity (%zu)",
                 d->vm.granularity, d->device, g);
        d->vm.granularity = 0; /* the caller tells this refusal from "no VMM" by it */
        return false;
    }
    /* a page asked for that is larger than the device: not one fits (every
     * map an OOM, greedy's arena none), refused as the simulated device
     * refuses it; a driver that cannot say leaves it to the maps */
    PFN_cuDeviceTotalMem_v3020 total_mem = NULL;
    size_t total = 0;
    if (d->vm.granularity &&
        lookup(d->rt, (const char *const[]){"cuDeviceTotalMem"}, (void **const[]){(void **)&total_mem}, 1, why,
               whylen) &&
        total_mem(&total, d->dev) == CUDA_SUCCESS && d->vm.granularity > total) {
        snprintf(why, whylen, "vm_granularity %zu is larger than device %d's %zu bytes: not one page fits",
                 d->vm.granularity, d->device, total);
        d->vm.granularity = 0;
        return false;
    }
    if (d->vm.granularity == 0)
        d->vm.granularity = g;
    d->ranges.granule = d->vm.granularity;
    d->ranges.who = d->name;
    d->ranges.whole_maps = d->whole_maps;
    return true;
}

/* Give back the retain of the device's primary context taken at creation.
 * Refused, the context keeps one retain too many (the driver will not reset
 * it when the program's own are released): one log line says so. */
static void release_primary(const cuda_device *d) {
    CUresult r = d->drv.primary_release(d->dev);
    if (r != CUDA_SUCCESS)
        log_refused(d, r, "cuDevicePrimaryCtxRelease",
                    "the primary context stays retained once more (it and its memory stay until the process "
                    "ends or the context is reset)");
}

/* Ranges still reserved (a release the allocator could not make) stay
 * with the driver until the context goes; only their record is freed. */
static void cuda_destroy(void *ctx) {
    cuda_device *d = ctx;
    destroy_copy_stream(d);
    release_primary(d);
    ccai_vm_ranges_free(&d->ranges);
    pthread_mutex_destroy(&d->vm_lock);
    pthread_mutex_destroy(&d->copy_lock);
    free(d);
}

/* The device's primary context, retained (created now if the device had
 * none), and the runtime's state in it made now, not inside the first
 * allocation. */
static cca_status open_context(cuda_device *d) {
    CUresult r = d->drv.device_get(&d->dev, d->device);
    if (r != CUDA_SUCCESS)
        return driver_error(d, r, "cuDeviceGet");
    if ((r = d->drv.primary_retain(&d->primary, d->dev)) != CUDA_SUCCESS)
        return driver_error(d, r, "cuDevicePrimaryCtxRetain");
    cuda_caller caller;
    cca_status st = enter(d, &caller);
    cudaError_t e = st == CCA_OK ? d->rt->cudaFree(NULL) : cudaSuccess;
    if (st == CCA_OK)
        leave(d, &caller);
    if (st == CCA_OK && e != cudaSuccess)
        st = cuda_error(d, e, "context creation");
    if (st != CCA_OK)
        release_primary(d);
    return st;
}

static cca_status cuda_create(const cca_cuda_options *o, cca_upstream **out, const char *fn) {
    cca_status bad = options_check(o, out, fn);
    if (bad != CCA_OK)
        return bad;
    const ccai_cudart *rt = NULL;
    if (ccai_cudart_get(&rt) != CCA_OK) /* no runtime: the message says what to install */
        return CCA_ERR_NO_DEVICE;
    int device = o->device;
    int count = 0;
    cudaError_t e = rt->cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        (void)rt->cudaGetLastError();
        return cca_set_error(CCA_ERR_NO_DEVICE, "cuda: no usable GPU (%s; runtime %s)", rt->cudaGetErrorString(e),
                             rt->path);
    }
    if (device < 0 || device >= count)
        return cca_set_error(count ? CCA_ERR_INVALID_ARGUMENT : CCA_ERR_NO_DEVICE, "cuda: device %d not in [0, %d)",
                             device, count);
    cuda_device *d = calloc(1, sizeof *d);
    if (!d)
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "%s: host malloc failed", fn);
    d->rt = rt;
    d->device = device;
    d->vm.granularity = o->vm_granularity; /* 0: the driver's minimum, asked in load_vmm */
    d->whole_maps = o->vm_backing == CCA_VM_WHOLE_MAPS;
    d->registered = o->host_memory == CCA_HOST_MEMORY_REGISTERED;
    snprintf(d->name, sizeof d->name, "cuda:%d", device);
    pthread_mutex_init(&d->vm_lock, NULL);
    pthread_mutex_init(&d->copy_lock, NULL);
    char why[128];
    if (!load_driver(d, why, sizeof why)) {
        pthread_mutex_destroy(&d->vm_lock);
        pthread_mutex_destroy(&d->copy_lock);
        free(d);
        return cca_set_error(CCA_ERR_UPSTREAM, "cuda: %s", why);
    }
    cca_status st_ctx = open_context(d);
    if (st_ctx != CCA_OK) {
        pthread_mutex_destroy(&d->vm_lock);
        pthread_mutex_destroy(&d->copy_lock);
        free(d);
        return st_ctx;
    }
    cca_upstream_ops ops = {
        .alloc = cuda_alloc,
        .free = cuda_free,
        .mem_info = cuda_mem_info,
        .synchronize = cuda_synchronize,
        .stream_synchronize = cuda_stream_synchronize,
        .event_record = cuda_event_record,
        .event_query = cuda_event_query,
        .event_destroy = cuda_event_destroy,
        .destroy = cuda_destroy,
        .name = d->name,
        .host_alloc = cuda_host_alloc,
        .host_free = cuda_host_free,
        .copy = cuda_copy,
        .copy_wait = cuda_copy_wait,
    };
    bool vm = load_vmm(d, why, sizeof why);
    if (!vm && o->vm_granularity && d->vm.granularity == 0) { /* the page asked for does not fit the device */
        release_primary(d);
        pthread_mutex_destroy(&d->vm_lock);
        pthread_mutex_destroy(&d->copy_lock);
        free(d);
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cuda: %s", why);
    }
    if (vm) {
        ops.vm_granularity = cuda_vm_granularity;
        ops.vm_reserve = cuda_vm_reserve;
        ops.vm_release = cuda_vm_release;
        ops.vm_map = cuda_vm_map;
        ops.vm_unmap = cuda_vm_unmap;
        ops.vm_backing = d->whole_maps ? CCA_VM_WHOLE_MAPS : CCA_VM_PAGES;
    }
    cca_status st = ccai_upstream_wrap(&ops, d, out, fn);
    if (st != CCA_OK)
        cuda_destroy(d);
    else if (!vm) /* said by cca_upstream_vm_* and by cca_create's expandable:1 fallback */
        ccai_upstream_set_no_vm_reason(*out, why);
    return st;
}

cca_status cca_upstream_cuda_create(int device, cca_upstream **out) {
    cca_cuda_options o = {.device = device};
    return cuda_create(&o, out, "cca_upstream_cuda_create");
}

cca_status cca_upstream_cuda_create_with(const cca_cuda_options *o, cca_upstream **out) {
    return cuda_create(o, out, "cca_upstream_cuda_create_with");
}

#else /* !CCA_HAVE_CUDA */

static cca_status no_cuda(const cca_cuda_options *o, cca_upstream **out, const char *fn) {
    cca_status bad = options_check(o, out, fn); /* the arguments first, as with CUDA */
    if (bad != CCA_OK)
        return bad;
    return cca_set_error(CCA_ERR_NO_DEVICE, "cuda: libccalloc was built without the CUDA toolkit");
}

cca_status cca_upstream_cuda_create(int device, cca_upstream **out) {
    cca_cuda_options o = {.device = device};
    return no_cuda(&o, out, "cca_upstream_cuda_create");
}

cca_status cca_upstream_cuda_create_with(const cca_cuda_options *o, cca_upstream **out) {
    return no_cuda(o, out, "cca_upstream_cuda_create_with");
}

#endif
