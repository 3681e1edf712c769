/*
 * upstream_cuda.c — device memory from the CUDA runtime.
 *
 * alloc/free are cudaMalloc/cudaFree (256-byte aligned, synchronous w.r.t.
 * the device), mem_info is cudaMemGetInfo (the driver's own free count, used
 * to verify that a release really returned memory), synchronize is
 * cudaDeviceSynchronize, and stream events are cudaEvent_t created with
 * cudaEventDisableTiming (cheap to record and query).
 *
 * Contexts. Every call makes the device's PRIMARY context current for its
 * duration and then puts back the caller's current context, whatever it
 * was: another device's primary context, a context of the caller's own
 * (cuCtxCreate), or none (a fresh thread). So one process can hold
 * upstreams on several GPUs without an allocation moving the program's
 * own work to another device, and without creating a context the program
 * never asked for. Contexts are switched with the driver
 * (cuCtxGetCurrent, then cuCtxSetCurrent only when the current one is not
 * ours, and back), never with cudaSetDevice/cudaGetDevice: on a fresh
 * thread cudaGetDevice answers 0, and cudaSetDevice(0) to "restore" it
 * creates device 0's primary context (CUDA 12+; ~500 MiB of GPU 0 for a
 * program working on GPU 1: PyTorch #94864), and would leave the runtime's
 * per-thread device set besides. The runtime calls (cudaMalloc, ...) work
 * in whatever context is current. The primary context is retained once at
 * creation (cuDevicePrimaryCtxRetain: created then if the device had none)
 * and released by cca_upstream_destroy; a cudaDeviceReset while the
 * upstream lives destroys its memory under it and is not supported.
 *
 * Compiled everywhere the toolkit exists (CCA_HAVE_CUDA); without a GPU,
 * cca_upstream_cuda_create returns CCA_ERR_NO_DEVICE with the driver's
 * reason. Built without the toolkit, it says so. Driver functions are
 * looked up with cudaGetDriverEntryPointByVersion (no link against
 * libcuda; types from cudaTypedefs.h).
 *
 * Virtual memory (the vm_* ops, present when the driver and the device
 * support CUDA's VMM). The driver functions are looked up at creation, the
 * device's VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
 * attribute checked, and the granularity asked once
 * (cuMemGetAllocationGranularity, MINIMUM: 2 MiB on current GPUs). Then:
 *   vm_reserve  cuMemAddressReserve (aligned to the granularity)
 *   vm_release  cuMemAddressFree
 *   vm_map      for each granule: cuMemCreate (one granule of pinned
 *               device memory) + cuMemMap at its place + cuMemRelease of
 *               the handle (the mapping keeps the memory alive and its
 *               unmap frees it, so no handle table is needed); then ONE
 *               cuMemSetAccess (read/write for this device) over the whole
 *               range. A failure at any step unmaps every granule this call
 *               mapped and returns OOM (CUDA_ERROR_OUT_OF_MEMORY) or
 *               UPSTREAM with the driver's error: nothing stays mapped or
 *               allocated.
 *   vm_unmap    cuMemUnmap of each granule of the range.
 * One physical allocation per granule, as PyTorch's expandable segments
 * have one handle per page, is what makes release GRANULE BY GRANULE: the
 * driver unmaps only whole allocations (a sub-range of one is refused), so
 * with one per granule any run of mapped granules can be unmapped, part of
 * one map or across maps made by separate calls. Driver calls: vm_map 2
 * per granule + 1 (cuMemCreate, cuMemMap; one cuMemSetAccess), plus a
 * cuMemRelease per granule (host-side bookkeeping, no device work);
 * vm_unmap 1 per granule. A 2 MiB granule makes growing a segment by 1 GiB
 * 1025 calls and ~512 releases; this is the price of giving back any page.
 * A granule that is not mapped is found by the driver only when the unmap
 * reaches it (cuMemUnmap refuses it): the granules before it are mapped
 * again, with new memory (their contents are lost), and the call is
 * refused with CCA_ERR_UPSTREAM and what is mapped unchanged. The allocator
 * unmaps only what it mapped, so this is the path of a bug, not of a
 * policy: the simulated device checks first and changes nothing at all.
 * The driver does not wait for queued kernels before unmapping: the
 * allocator waits for the blocks' events first.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#ifdef CCA_HAVE_CUDA
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

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
    int device;
    CUdevice dev;
    CUcontext primary; /* the device's primary context, retained at creation */
    char name[32];
    cuda_driver drv;
    cuda_vmm vm; /* valid when the vm_* ops are in the table */
} cuda_device;

static cca_status cuda_error(cudaError_t e, const char *what) {
    cca_status st = e == cudaErrorMemoryAllocation ? CCA_ERR_OUT_OF_MEMORY : CCA_ERR_UPSTREAM;
    (void)cudaGetLastError(); /* clear the sticky-free error state */
    return ccai_fail(st, "cuda: %s failed: %s", what, cudaGetErrorString(e));
}

static cca_status driver_error(const cuda_device *d, CUresult r, const char *what) {
    const char *text = NULL;
    if (!d->drv.error_string || d->drv.error_string(r, &text) != CUDA_SUCCESS || !text)
        text = "unknown driver error";
    return ccai_fail(r == CUDA_ERROR_OUT_OF_MEMORY ? CCA_ERR_OUT_OF_MEMORY : CCA_ERR_UPSTREAM,
                     "cuda: %s failed: %s (CUresult %d)", what, text, (int)r);
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

/* Give the caller back its own current context (or none). */
static void leave(const cuda_device *d, const cuda_caller *c) {
    if (c->switched)
        (void)d->drv.ctx_set_current(c->context);
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
            return cuda_error(e_call_, what);                                                                          \
    } while (0)

static cca_status cuda_alloc(void *ctx, size_t size, void **ptr) {
    cuda_device *d = ctx;
    ON_DEVICE(d, cudaMalloc(ptr, size), "cudaMalloc");
    return CCA_OK;
}

static cca_status cuda_free(void *ctx, void *ptr, size_t size) {
    cuda_device *d = ctx;
    (void)size;
    ON_DEVICE(d, cudaFree(ptr), "cudaFree");
    return CCA_OK;
}

static cca_status cuda_mem_info(void *ctx, size_t *free_bytes, size_t *total_bytes) {
    cuda_device *d = ctx;
    ON_DEVICE(d, cudaMemGetInfo(free_bytes, total_bytes), "cudaMemGetInfo");
    return CCA_OK;
}

static cca_status cuda_synchronize(void *ctx) {
    cuda_device *d = ctx;
    ON_DEVICE(d, cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    return CCA_OK;
}

/* Create an event on the device and record it on `stream` (one call, so that
 * ON_DEVICE brackets both). */
static cudaError_t create_and_record(cudaEvent_t *ev, cudaStream_t stream) {
    cudaError_t e = cudaEventCreateWithFlags(ev, cudaEventDisableTiming);
    if (e != cudaSuccess)
        return e;
    e = cudaEventRecord(*ev, stream);
    if (e != cudaSuccess)
        cudaEventDestroy(*ev);
    return e;
}

static cca_status cuda_event_record(void *ctx, cca_stream stream, void **event) {
    cuda_device *d = ctx;
    cudaEvent_t ev;
    ON_DEVICE(d, create_and_record(&ev, (cudaStream_t)stream), "cudaEventRecord");
    *event = ev;
    return CCA_OK;
}

/* Query and destroy in the device's context too: on a thread with no
 * context the runtime would make one on device 0 for them. */
/* cudaEventQuery, "not ready" a success with *ready false. */
static cudaError_t query_event(cudaEvent_t ev, bool *ready) {
    cudaError_t e = cudaEventQuery(ev);
    *ready = e != cudaErrorNotReady;
    if (*ready)
        return e;
    (void)cudaGetLastError();
    return cudaSuccess;
}

static cca_status cuda_event_query(void *ctx, void *event) {
    cuda_device *d = ctx;
    bool ready = false;
    ON_DEVICE(d, query_event((cudaEvent_t)event, &ready), "cudaEventQuery");
    return ready ? CCA_OK : CCA_ERR_NOT_READY;
}

static cca_status cuda_event_destroy(void *ctx, void *event) {
    cuda_device *d = ctx;
    ON_DEVICE(d, cudaEventDestroy((cudaEvent_t)event), "cudaEventDestroy");
    return CCA_OK;
}

/* ---- virtual memory ------------------------------------------------------- */

static cca_status cuda_vm_granularity(void *ctx, size_t *bytes) {
    *bytes = ((cuda_device *)ctx)->vm.granularity;
    return CCA_OK;
}

static cca_status cuda_vm_reserve(void *ctx, size_t size, void **base) {
    cuda_device *d = ctx;
    cuda_caller caller;
    cca_status st = enter(d, &caller);
    if (st != CCA_OK)
        return st;
    CUdeviceptr p = 0;
    CUresult r = d->vm.reserve(&p, size, d->vm.granularity, 0, 0);
    leave(d, &caller);
    if (r != CUDA_SUCCESS)
        return driver_error(d, r, "cuMemAddressReserve");
    *base = (void *)(uintptr_t)p;
    return CCA_OK;
}

static cca_status cuda_vm_release(void *ctx, void *base, size_t size) {
    cuda_device *d = ctx;
    cuda_caller caller;
    cca_status st = enter(d, &caller);
    if (st != CCA_OK)
        return st;
    CUresult r = d->vm.address_free((CUdeviceptr)(uintptr_t)base, size);
    leave(d, &caller);
    return r == CUDA_SUCCESS ? CCA_OK : driver_error(d, r, "cuMemAddressFree");
}

/* Unmap granules [from, to) of the range at p: one cuMemUnmap each (a
 * granule is its own allocation, so each unmap frees its memory). The
 * first failure stops it: *done is how many were unmapped. */
static CUresult unmap_granules(const cuda_device *d, CUdeviceptr p, size_t from, size_t to, size_t *done) {
    size_t g = d->vm.granularity, i = from;
    CUresult r = CUDA_SUCCESS;
    for (; i < to; i++)
        if ((r = d->vm.unmap(p + i * g, g)) != CUDA_SUCCESS)
            break;
    *done = i - from;
    return r;
}

/* Map granules [0, n) of the range at p, each new memory of its own
 * (cuMemCreate + cuMemMap, then cuMemRelease: the mapping keeps the memory
 * and its unmap frees it), then one cuMemSetAccess for all of them. On a
 * failure every granule mapped here is unmapped again (nothing stays mapped
 * or allocated) and *what names the failed step, *at its granule. */
static CUresult map_granules(const cuda_device *d, CUdeviceptr p, size_t n, const char **what, size_t *at) {
    size_t g = d->vm.granularity, i = 0, undone;
    CUresult r = CUDA_SUCCESS;
    for (; i < n; i++) {
        CUmemGenericAllocationHandle h;
        *what = "cuMemCreate";
        if ((r = d->vm.create(&h, g, &d->vm.prop, 0)) != CUDA_SUCCESS)
            break;
        *what = "cuMemMap";
        r = d->vm.map(p + i * g, g, 0, h, 0);
        /* mapped: the mapping holds the memory; not mapped: this frees it */
        (void)d->vm.release(h);
        if (r != CUDA_SUCCESS)
            break;
    }
    *at = i;
    if (r == CUDA_SUCCESS) {
        *what = "cuMemSetAccess";
        r = d->vm.set_access(p, n * g, &d->vm.access, 1);
    }
    if (r != CUDA_SUCCESS)
        (void)unmap_granules(d, p, 0, i, &undone);
    return r;
}

static cca_status cuda_vm_map(void *ctx, void *addr, size_t size) {
    cuda_device *d = ctx;
    CUdeviceptr p = (CUdeviceptr)(uintptr_t)addr;
    size_t n = size / d->vm.granularity, at = 0; /* the wrapper checked: a multiple */
    cuda_caller caller;
    cca_status st = enter(d, &caller);
    if (st != CCA_OK)
        return st;
    const char *what = "cuMemCreate";
    CUresult r = map_granules(d, p, n, &what, &at);
    leave(d, &caller);
    if (r == CUDA_SUCCESS)
        return CCA_OK;
    char step[96];
    if (strcmp(what, "cuMemSetAccess") == 0)
        snprintf(step, sizeof step, "vm_map of %p (%zu granules): cuMemSetAccess over them", addr, n);
    else
        snprintf(step, sizeof step, "vm_map of %p (%zu granules): %s of granule %zu", addr, n, what, at);
    return driver_error(d, r, step); /* OOM for CUDA_ERROR_OUT_OF_MEMORY */
}

/* Unmap granule by granule. The driver refuses a granule that is not mapped
 * only when the loop reaches it: the granules before it are then gone, and
 * are mapped again (new memory: their contents are lost) so that the range
 * is refused with what is mapped unchanged, as the rule asks. */
static cca_status cuda_vm_unmap(void *ctx, void *addr, size_t size) {
    cuda_device *d = ctx;
    CUdeviceptr p = (CUdeviceptr)(uintptr_t)addr;
    size_t g = d->vm.granularity, n = size / g, done = 0;
    cuda_caller caller;
    cca_status st = enter(d, &caller);
    if (st != CCA_OK)
        return st;
    CUresult r = unmap_granules(d, p, 0, n, &done);
    CUresult back = CUDA_SUCCESS;
    const char *what = "cuMemCreate";
    size_t at = 0;
    if (r != CUDA_SUCCESS && done > 0)
        back = map_granules(d, p, done, &what, &at);
    leave(d, &caller);
    if (r == CUDA_SUCCESS)
        return CCA_OK;
    char step[256];
    if (done == 0)
        snprintf(step, sizeof step,
                 "vm_unmap of %p (%zu granules): cuMemUnmap of its first granule (an unmap names only "
                 "mapped granules; nothing changed)",
                 addr, n);
    else if (back != CUDA_SUCCESS)
        snprintf(step, sizeof step,
                 "vm_unmap of %p (%zu granules): cuMemUnmap of granule %zu (an unmap names only mapped "
                 "granules), and mapping the %zu before it again failed too: they stay unmapped",
                 addr, n, done, done);
    else
        snprintf(step, sizeof step,
                 "vm_unmap of %p (%zu granules): cuMemUnmap of granule %zu (an unmap names only mapped "
                 "granules; the %zu before it mapped again, contents lost)",
                 addr, n, done, done);
    (void)driver_error(d, r, step); /* the message; a refusal whatever the driver said */
    return CCA_ERR_UPSTREAM;
}

/* Look up n driver functions by name (the ABI of CUDA 12.0 each): true
 * when all are there, else the first missing one goes to *why. */
static bool lookup(const char *const *names, void **const *fns, size_t n, char *why, size_t whylen) {
    for (size_t i = 0; i < n; i++) {
        enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        if (cudaGetDriverEntryPointByVersion(names[i], fns[i], 12000, cudaEnableDefault, &q) != cudaSuccess ||
            q != cudaDriverEntryPointSuccess || !*fns[i]) {
            (void)cudaGetLastError();
            snprintf(why, whylen, "the driver has no %s", names[i]);
            return false;
        }
    }
    return true;
}

/* The functions every upstream needs (contexts, messages). */
static bool load_driver(cuda_device *d, char *why, size_t whylen) {
    static const char *const names[] = {"cuGetErrorString",          "cuDeviceGet",      "cuDevicePrimaryCtxRetain",
                                        "cuDevicePrimaryCtxRelease", "cuCtxGetCurrent", "cuCtxSetCurrent"};
    void **const fns[] = {(void **)&d->drv.error_string,    (void **)&d->drv.device_get,
                          (void **)&d->drv.primary_retain,  (void **)&d->drv.primary_release,
                          (void **)&d->drv.ctx_get_current, (void **)&d->drv.ctx_set_current};
    return lookup(names, fns, sizeof names / sizeof *names, why, whylen);
}

/* Look the driver's VMM functions up and check the device: true when the
 * vm_* ops can be offered. Why not goes to *why (no error is set). */
static bool load_vmm(cuda_device *d, char *why, size_t whylen) {
    PFN_cuDeviceGetAttribute_v2000 get_attribute = NULL;
    PFN_cuMemGetAllocationGranularity_v10020 get_granularity = NULL;
    static const char *const names[] = {"cuMemAddressReserve", "cuMemAddressFree",     "cuMemCreate",
                                        "cuMemRelease",        "cuMemMap",             "cuMemUnmap",
                                        "cuMemSetAccess",      "cuDeviceGetAttribute", "cuMemGetAllocationGranularity"};
    void **const fns[] = {(void **)&d->vm.reserve, (void **)&d->vm.address_free, (void **)&d->vm.create,
                          (void **)&d->vm.release, (void **)&d->vm.map,          (void **)&d->vm.unmap,
                          (void **)&d->vm.set_access, (void **)&get_attribute,  (void **)&get_granularity};
    if (!lookup(names, fns, sizeof names / sizeof *names, why, whylen))
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
    d->vm.granularity = g;
    return true;
}

static void cuda_destroy(void *ctx) {
    cuda_device *d = ctx;
    (void)d->drv.primary_release(d->dev);
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
    cudaError_t e = st == CCA_OK ? cudaFree(NULL) : cudaSuccess;
    if (st == CCA_OK)
        leave(d, &caller);
    if (st == CCA_OK && e != cudaSuccess)
        st = cuda_error(e, "context creation");
    if (st != CCA_OK)
        (void)d->drv.primary_release(d->dev);
    return st;
}

cca_status cca_upstream_cuda_create(int device, cca_upstream **out) {
    if (!out)
        return ccai_fail(CCA_ERR_INVALID_ARGUMENT, "cca_upstream_cuda_create: out is NULL");
    *out = NULL;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return ccai_fail(CCA_ERR_NO_DEVICE, "cuda: no usable GPU (%s)", cudaGetErrorString(e));
    }
    if (device < 0 || device >= count)
        return ccai_fail(count ? CCA_ERR_INVALID_ARGUMENT : CCA_ERR_NO_DEVICE, "cuda: device %d not in [0, %d)", device,
                         count);
    cuda_device *d = calloc(1, sizeof *d);
    if (!d)
        return ccai_fail(CCA_ERR_OUT_OF_MEMORY, "cca_upstream_cuda_create: host malloc failed");
    d->device = device;
    char why[128];
    if (!load_driver(d, why, sizeof why)) {
        free(d);
        return ccai_fail(CCA_ERR_UPSTREAM, "cuda: %s", why);
    }
    cca_status st_ctx = open_context(d);
    if (st_ctx != CCA_OK) {
        free(d);
        return st_ctx;
    }
    snprintf(d->name, sizeof d->name, "cuda:%d", device);
    cca_upstream_ops ops = {
        .alloc = cuda_alloc,
        .free = cuda_free,
        .mem_info = cuda_mem_info,
        .synchronize = cuda_synchronize,
        .event_record = cuda_event_record,
        .event_query = cuda_event_query,
        .event_destroy = cuda_event_destroy,
        .destroy = cuda_destroy,
        .name = d->name,
    };
    bool vm = load_vmm(d, why, sizeof why);
    if (vm) {
        ops.vm_granularity = cuda_vm_granularity;
        ops.vm_reserve = cuda_vm_reserve;
        ops.vm_release = cuda_vm_release;
        ops.vm_map = cuda_vm_map;
        ops.vm_unmap = cuda_vm_unmap;
    }
    cca_status st = ccai_upstream_wrap(&ops, d, out);
    if (st != CCA_OK)
        cuda_destroy(d);
    else if (!vm) /* said by cca_upstream_vm_* and by cca_create's expandable:1 fallback */
        ccai_upstream_set_no_vm_reason(*out, why);
    return st;
}

#else /* !CCA_HAVE_CUDA */

cca_status cca_upstream_cuda_create(int device, cca_upstream **out) {
    (void)device;
    if (out)
        *out = NULL;
    return ccai_fail(CCA_ERR_NO_DEVICE, "cuda: libccalloc was built without the CUDA toolkit");
}

#endif
