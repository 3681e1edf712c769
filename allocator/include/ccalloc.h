/*
 * ccalloc.h — the one public header of libccalloc, a best-fit caching
 * allocator for GPU memory that can give its memory back.
 *
 * Plain C11, no CUDA header: streams are opaque `void *` (a cudaStream_t on
 * the CUDA upstream, any token on the host upstream). Every function returns
 * a cca_status (0 = success) and passes results through out-parameters.
 *
 * Thread safety: every function taking a cca_allocator may be called
 * concurrently on the same allocator (one mutex per allocator). Upstreams are
 * safe to share between allocators and threads. On Linux 4.14+ the first
 * cca_create registers the process for membarrier(2)'s private expedited
 * barrier, which a thread that waits for the mutex uses before it sleeps
 * (the holder then releases it with a plain store); where the kernel
 * refuses, the mutex releases with an atomic decrement instead.
 *
 * fork() is safe at any moment, whatever other threads are doing in
 * ccalloc: a fork handler (pthread_atfork, set by the first upstream or
 * allocator made) takes every allocator's and upstream's lock before the
 * fork, waiting for the calls in flight to leave, and frees them after it in
 * parent and child, so the child can go on with every simulated device and
 * allocator it inherits (their blocks and cache a copy, each as a call left
 * it). A CUDA device cannot be used in a forked child in any case (the
 * driver refuses a context inherited across fork). Not covered: the locks
 * of a custom upstream's own code, whose ops must not create or destroy
 * allocators or upstreams, nor fork (they run with an allocator's lock
 * held, which the handler would wait for).
 *
 * Example usage:
 *
 *     cca_upstream *dev;
 *     cca_allocator *a;
 *     cca_upstream_host_create(1u << 30, &dev);      // 1 GiB simulated device
 *     cca_config cfg;
 *     cca_config_default(&cfg);
 *     cca_config_parse(&cfg, "policy:growth,max_reserved:512M");
 *     cca_create(&cfg, dev, &a);
 *     void *p;
 *     if (cca_alloc(a, 4 << 20, NULL, &p) == CCA_OK) { ... cca_free(a, p); }
 *     cca_release_report r;
 *     cca_empty_cache(a, &r);                          // reserved_bytes == 0
 *     cca_destroy(a);
 *     cca_upstream_destroy(dev);
 */
#ifndef CCALLOC_H
#define CCALLOC_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CCA_VERSION_MAJOR 0
#define CCA_VERSION_MINOR 1
#define CCA_VERSION_PATCH 0

/* Every block handed out starts on a multiple of this many bytes (an
 * upstream's allocation that does not is refused: CCA_ERR_UPSTREAM, given
 * back to it). */
#define CCA_ALIGNMENT 256u
/* Every request is rounded up to a multiple of this many bytes. */
#define CCA_GRANULARITY 512u

/* ------------------------------------------------------------------------ */
/* Status codes                                                             */
/* ------------------------------------------------------------------------ */

typedef enum cca_status {
    CCA_OK = 0,
    CCA_ERR_INVALID_ARGUMENT, /* NULL handle, bad size, bad option value       */
    CCA_ERR_OUT_OF_MEMORY,    /* upstream refused, cap reached, arena full     */
    CCA_ERR_INVALID_POINTER,  /* double free, unknown or interior pointer      */
    CCA_ERR_UPSTREAM,         /* the upstream failed in a way other than OOM   */
    CCA_ERR_NO_DEVICE,        /* no GPU, or built without CUDA                 */
    CCA_ERR_CONFIG,           /* unknown key / bad value in a config string    */
    CCA_ERR_NOT_READY,        /* an event has not completed yet (upstream ops) */
    CCA_ERR_LIVE_BLOCKS,      /* cca_destroy / cca_domain_release: blocks live */
    CCA_ERR_IO,               /* writing a snapshot or trace failed            */
    CCA_ERR_INVARIANT         /* cca_check_invariants found a broken invariant */
} cca_status;

/* A short constant name for every code ("CCA_ERR_OUT_OF_MEMORY: ..."). */
const char *cca_status_string(cca_status s);

/* The message of the last failing call on this thread ("" if none): names the
 * key, pointer or size that was wrong. Valid until the next failing call. */
const char *cca_last_error(void);

#if defined(__GNUC__) || defined(__clang__)
#define CCA_PRINTF(fmt_index, first_arg) __attribute__((format(printf, fmt_index, first_arg)))
#else
#define CCA_PRINTF(fmt_index, first_arg)
#endif

/* Set this thread's message (printf-style) and return s, so a failing path
 * reads
 *     return cca_set_error(CCA_ERR_UPSTREAM, "device lost at %zu", size);
 * For custom upstreams (see cca_upstream_ops) and layers above the allocator
 * (the runtime's ccr_fail writes here too: one message per thread). The
 * arguments may include cca_last_error() itself, to wrap it. A message keeps
 * at most 1023 characters: a longer one is cut and ends in "...". */
cca_status cca_set_error(cca_status s, const char *fmt, ...) CCA_PRINTF(2, 3);
cca_status cca_vset_error(cca_status s, const char *fmt, va_list ap);

/* Put "prefix: " before this thread's message and return s: a layer adds
 * context to a failure from below ("model.bin: tensor 'w': <message>"). A
 * message too long for the buffer loses its end, never the prefix, and ends
 * in "...". */
cca_status cca_error_prefix(cca_status s, const char *fmt, ...) CCA_PRINTF(2, 3);
cca_status cca_verror_prefix(cca_status s, const char *fmt, va_list ap);

/* Empty this thread's message (cca_last_error() returns ""). */
void cca_clear_error(void);

/* Log sink for warnings (the one-line OOM report, bad env config, a cleanup
 * step the CUDA driver refused). Default:
 * stderr with a "ccalloc: " prefix. NULL restores the default. Process-wide.
 * Lines reach the sink one at a time, never while a ccalloc lock is held, so
 * a sink may call the library, cca_set_log_callback included. A line made
 * while the thread holds one (by an upstream op the allocator calls under
 * its lock, say) waits in that thread and reaches the sink, in order, when
 * the thread's last ccalloc lock is released, before the call returns; at
 * most 8 lines wait per call, and one more line says how many others were
 * not logged. A line logged
 * by a thread while it is inside the sink goes to stderr instead (a sink
 * never recurses), and the thread's cca_last_error() is the same after the
 * sink as before it (a failing call in the sink does not replace the
 * message of the call that logged). Once cca_set_log_callback returns, the
 * old sink is not running on another thread and is not called again. */
typedef void (*cca_log_fn)(void *user, const char *line);
void cca_set_log_callback(cca_log_fn fn, void *user);

/* Human-readable size: "512 B", "1.50 MiB", "3.00 GiB". Writes at most len
 * bytes (32 is always enough; less: the text cut, NUL-terminated) and
 * returns buf; buf NULL or len 0: writes nothing and returns "". */
const char *cca_format_bytes(size_t bytes, char *buf, size_t len);

/* Parse a size: a number (decimals allowed: "1.5G") with an optional K, M, G
 * or T suffix (powers of 1024), optionally followed by "i" and/or "B"
 * ("4GiB", "512k", "1048576"). Fractions of a byte are dropped.
 * CCA_ERR_INVALID_ARGUMENT for anything else, negative or too large values;
 * *out is unchanged then. The syntax of every size in config strings. */
cca_status cca_parse_size(const char *text, size_t *out);

typedef void *cca_stream; /* cudaStream_t or any token; NULL = default stream */

/* ------------------------------------------------------------------------ */
/* Upstreams: where device memory comes from                                */
/* ------------------------------------------------------------------------ */

/* An upstream is a table of functions over an opaque context. All members
 * return CCA_OK on success. `alloc` and `free` are required; the others are
 * optional and their default when NULL is stated.
 *
 * Messages: a failing member may say why with cca_set_error (above), e.g.
 *     return cca_set_error(CCA_ERR_UPSTREAM, "mydev: %s", mydev_strerror(rc));
 * and that message is what cca_last_error() shows (wrapped by the allocator
 * call that failed). A member that fails without one gets a message from the
 * wrapper naming the upstream, the member, the size or pointer, and the
 * status: "upstream 'mydev' alloc of 2097152 bytes failed (CCA_ERR_UPSTREAM:
 * ...)"; never the message of an earlier call. A member that succeeds (or
 * an event_query, whatever it answers) leaves the caller's message as it
 * was, whatever it wrote.
 *
 * Re-entry: the allocator calls every member but destroy with its lock
 * held, on the thread of the public call that needed it. A member must not
 * call back into that allocator: such a call on the member's own thread is
 * refused, nothing taken or changed (CCA_ERR_INVALID_ARGUMENT, the message
 * saying so; cca_get_stats fills *s with zeros, cca_reset_peak_stats does
 * nothing), and the outer call goes on; a member that waits for another
 * thread's call into it waits for ever. Other allocators may be called. */
typedef struct cca_upstream_ops {
    /* Reserve `size` bytes (size > 0, multiple of CCA_GRANULARITY); the
     * pointer must be CCA_ALIGNMENT-aligned and end below the top of the
     * address space (ptr + size neither wraps nor is 2^64): one that is not
     * is given back and the call is CCA_ERR_UPSTREAM. It must not overlap
     * any range it holds (not checked: the allocator would hand the same
     * bytes out twice). CCA_ERR_OUT_OF_MEMORY when full. */
    cca_status (*alloc)(void *ctx, size_t size, void **ptr);
    /* Return a pointer obtained from alloc, with the same size. */
    cca_status (*free)(void *ctx, void *ptr, size_t size);
    /* Device free and total bytes. NULL: CCA_ERR_UPSTREAM (greedy_fraction
     * cannot be used; greedy_bytes can). The allocator takes `free` as what
     * a map or an alloc can get: with expandable segments it asks it (once
     * per step) before reserving a new range or an arena and before mapping
     * a block that lacks several runs of pages, and refuses what it cannot
     * hold without calling vm_reserve or vm_map; the OOM retry asks it
     * too. NULL, or a failure: the upstream's own refusals decide. */
    cca_status (*mem_info)(void *ctx, size_t *free_bytes, size_t *total_bytes);
    /* Wait for all work on the device. NULL: nothing to wait for. */
    cca_status (*synchronize)(void *ctx);
    /* Record an event on `stream` after the work queued so far. NULL (all
     * three event members): the allocator synchronizes instead of deferring.
     * On failure *event is ignored (never queried nor destroyed), whatever
     * the member left in it, and the allocator synchronizes instead. */
    cca_status (*event_record)(void *ctx, cca_stream stream, void **event);
    /* CCA_OK when the event completed, CCA_ERR_NOT_READY when not yet. Any
     * other status reads as not yet: the event is asked again later (a
     * trim then says CCA_ERR_NOT_READY, a cca_destroy counts its block
     * live), and the caller's message is kept; the first failure of a run
     * (the upstream's last query answered, or none was made) logs one line
     * with the member's message, the later ones none until a query answers
     * again. */
    cca_status (*event_query)(void *ctx, void *event);
    /* Called once per event, after it completed (or at cca_destroy). A
     * refusal changes nothing for the allocator (the event is not asked
     * about again): it is logged, one line naming the upstream. */
    cca_status (*event_destroy)(void *ctx, void *event);
    /* Called once by cca_upstream_destroy. NULL: nothing to do. */
    void (*destroy)(void *ctx);
    /* A short name for logs and reports ("host", "cuda:0"). NULL: "custom".
     * Copied when the upstream is made: its first 31 bytes are kept (a
     * UTF-8 character the cut would split is dropped whole); the writers
     * show bytes that are not well-formed UTF-8 as '?'. */
    const char *name;

    /* ---- Virtual memory: optional, all five or none ----------------------
     * What expandable segments are built on (CUDA's cuMemAddressReserve,
     * cuMemCreate + cuMemMap + cuMemSetAccess, cuMemUnmap, cuMemAddressFree).
     * An upstream without them keeps working with classic segments.
     * Release is granule by granule, as PyTorch's expandable segments with
     * one physical handle per page: a map is one call, but each of its
     * granules is memory of its own. The rules:
     *   - every size and address is a multiple of the granularity (no
     *     partial unmap of a granule);
     *   - a map lies inside one reserved range and overlaps no mapped
     *     granule;
     *   - an unmap names any granule-aligned run of mapped granules: one
     *     map, part of one, or a run across adjacent maps made by separate
     *     calls; a range with any granule not mapped is refused whole;
     *   - a range is released only when nothing in it is mapped.
     * mem_info counts mapped bytes as used, reserved address space as
     * nothing. The wrapper (cca_upstream_vm_*) checks alignment
     * (CCA_ERR_INVALID_ARGUMENT) and counts; the upstream enforces the rest
     * and fails with CCA_ERR_UPSTREAM, changing nothing, when a call breaks
     * a rule (the CUDA upstream keeps a bit per granule to check first). */
    /* The mapping granularity: a power of two, a multiple of CCA_GRANULARITY. */
    cca_status (*vm_granularity)(void *ctx, size_t *bytes);
    /* Reserve `size` bytes of address space, no memory behind it. A base
     * that is NULL, not a multiple of the granularity, or whose range ends
     * past the top of the address space is released (vm_release) and the
     * call is CCA_ERR_UPSTREAM. */
    cca_status (*vm_reserve)(void *ctx, size_t size, void **base);
    /* Give back a range from vm_reserve (same base and size), nothing mapped in it. */
    cca_status (*vm_release)(void *ctx, void *base, size_t size);
    /* Back [addr, addr + size) with new device memory, readable and writable
     * from the device. CCA_ERR_OUT_OF_MEMORY when the device is full; on any
     * failure nothing stays mapped or allocated. */
    cca_status (*vm_map)(void *ctx, void *addr, size_t size);
    /* Unmap [addr, addr + size) and give its memory back at once, granule
     * by granule: any granule-aligned run of mapped granules, whichever
     * vm_map calls mapped them; the granules around it stay mapped with
     * their contents. The caller has made sure no queued work still uses
     * it (unmapping does not wait). */
    cca_status (*vm_unmap)(void *ctx, void *addr, size_t size);
    /* How the memory behind a map is kept: 0 (the default) as above, each
     * granule memory of its own; CCA_VM_WHOLE_MAPS: each vm_map is ONE
     * physical allocation (over CUDA one cuMemCreate of the map's size,
     * whatever its granules: the driver's cost is per allocation, not per
     * byte), so an unmap must name WHOLE maps: one map, or a run of
     * adjacent maps made by separate calls, each whole; a range that
     * starts or ends inside a map is refused (CCA_ERR_UPSTREAM, nothing
     * changed). The allocator then never unmaps part of a map: it cuts
     * what it maps into maps of at most expandable_chunk bytes and gives
     * memory back map by map. Any other value: cca_upstream_custom_create
     * refuses the table (CCA_ERR_INVALID_ARGUMENT); ignored without the
     * vm ops. */
    int vm_backing;
} cca_upstream_ops;
#define CCA_VM_PAGES 0      /* vm_backing: every granule its own memory     */
#define CCA_VM_WHOLE_MAPS 1 /* vm_backing: every map one allocation, unmapped whole */

typedef struct cca_upstream cca_upstream;

/* Accounting kept by every upstream, whatever its ops (counted around them).
 * Memory given back (free, vm_unmap) is uncounted before the op, and counted
 * again if it fails; memory taken (alloc, vm_map) is counted after the op:
 * with threads sharing the upstream, bytes_in_use and its peak never exceed
 * what the device held at that moment. */
typedef struct cca_upstream_stats {
    size_t bytes_in_use;      /* reserved through this upstream, now      */
    size_t bytes_in_use_peak; /* highest bytes_in_use                     */
    size_t allocations;       /* live upstream allocations, now           */
    uint64_t alloc_calls;     /* successful alloc calls                   */
    uint64_t free_calls;      /* successful free calls                    */
    uint64_t failed_allocs;   /* alloc calls that failed                  */
    /* virtual memory (zero for an upstream without it); bytes_in_use above
     * includes vm_mapped_bytes: it is device memory in use */
    size_t vm_reserved_bytes; /* address space reserved, now              */
    size_t vm_mapped_bytes;   /* mapped, now                              */
    uint64_t vm_map_calls;    /* successful vm_map calls                  */
    uint64_t vm_unmap_calls;  /* successful vm_unmap calls                */
    uint64_t vm_failed_maps;  /* vm_map calls that failed                 */
} cca_upstream_stats;

/* A simulated device of `capacity` bytes over host memory, behaving like a
 * GPU: it reserves one range of address space of that size and places every
 * allocation in it itself (first fit by address), so the same calls give the
 * same addresses whatever else the process did; sizes are rounded up to the
 * host page, which mem_info counts (as a GPU counts its own pages); freed
 * memory goes back to the OS at once and touching it afterwards faults.
 * Pointers are real and writable while allocated; mem_info reports capacity
 * minus what every allocator on it holds, so allocators sharing it compete
 * like tenants of one GPU. Events complete at once. capacity 0, or more than
 * SIZE_MAX / 2: CCA_ERR_INVALID_ARGUMENT; a capacity the process cannot
 * reserve as address space (more than the system's, e.g. 2^62 on a 47-bit
 * space, or none left): CCA_ERR_OUT_OF_MEMORY. */
cca_status cca_upstream_host_create(size_t capacity, cca_upstream **out);

/* The same device with the driver's costs: every alloc call (granted or
 * refused) busy-waits alloc_latency_ns and every free free_latency_ns before
 * doing its work, outside any lock, as cudaMalloc and cudaFree take tens of
 * microseconds (cudaFree also waits for the device); the vm_* ops may also
 * be charged per granule (below). Latencies above CCA_HOST_MAX_LATENCY_NS:
 * CCA_ERR_INVALID_ARGUMENT. */
typedef struct cca_host_options {
    size_t capacity;           /* bytes of device memory, > 0            */
    uint64_t alloc_latency_ns; /* per upstream alloc; 0 = none (default) */
    uint64_t free_latency_ns;  /* per upstream free;  0 = none (default) */
    /* Virtual memory (the vm_* ops, always present on the simulated
     * device): mapping granularity, a power of two >= the host page and a
     * multiple of CCA_GRANULARITY (else CCA_ERR_INVALID_ARGUMENT); 0 =
     * 2 MiB, the usual GPU figure. vm_map latency: alloc_latency_ns, vm_unmap:
     * free_latency_ns (once per call, granted or refused), plus the two
     * per-granule latencies below for each granule a call maps or unmaps
     * (granted calls only). Physical memory
     * of a map is a memfd mapped MAP_SHARED | MAP_FIXED into the reserved
     * range; an unmap (any run of mapped granules) punches a hole in the
     * memfd under it (MADV_REMOVE) and puts inaccessible address space back
     * over it, so its pages return to the OS at once, even while the rest
     * of the map stays, and a later touch faults. */
    size_t vm_granularity;
    /* The CUDA upstream makes two driver calls per granule of a map
     * (cuMemCreate, cuMemMap) and one per granule of an unmap (cuMemUnmap),
     * so a map's cost grows with its size, where cudaMalloc's barely does.
     * These busy-wait that much per granule of a granted vm_map / vm_unmap,
     * after the call's own latency and outside any lock; 0 = none (the
     * default). Above CCA_HOST_MAX_LATENCY_NS: CCA_ERR_INVALID_ARGUMENT. A
     * call's total wait saturates at UINT64_MAX ns. */
    uint64_t vm_map_granule_latency_ns;
    uint64_t vm_unmap_granule_latency_ns;
    /* CCA_VM_PAGES (0, the default) or CCA_VM_WHOLE_MAPS (else
     * CCA_ERR_INVALID_ARGUMENT): the vm ops' backing (cca_upstream_ops).
     * With whole maps, each map is one memfd that only a whole unmap gives
     * back, and the two per-granule latencies above are charged once per
     * map mapped or unmapped, whatever its size: the CUDA upstream's
     * cuMemCreate + cuMemMap, and cuMemUnmap, per physical allocation. */
    int vm_backing;
} cca_host_options;
#define CCA_HOST_MAX_LATENCY_NS 1000000000ull
cca_status cca_upstream_host_create_with(const cca_host_options *o, cca_upstream **out);

/* cudaMalloc / cudaFree / cudaMemGetInfo / cudaEvent* on `device`, in its
 * primary context (retained here, released by cca_upstream_destroy); each
 * call puts the caller's current context back, and creates none on another
 * device. CCA_ERR_NO_DEVICE when no GPU is present or the library was built
 * without CUDA; cca_last_error() says which.
 * A cleanup step the driver refuses never changes what a call returns: it
 * is logged, one line naming the device, the driver call, its error and
 * what stays behind. The steps: putting the caller's context back (the call
 * stands, and the device's primary context stays current on the thread),
 * a vm_map's cuMemRelease of each new allocation (the map stands or fails
 * as it would, but that memory is not freed by its unmap: "leaked: N bytes
 * of device memory"), cuMemAddressFree of a reservation that could not be
 * recorded (the range stays reserved), cudaEventDestroy of an event whose
 * record failed (it leaks), and cuDevicePrimaryCtxRelease by
 * cca_upstream_destroy or a failed creation (the context stays retained). */
cca_status cca_upstream_cuda_create(int device, cca_upstream **out);

/* The same with options. vm_granularity: the page of the vm_* ops, so of
 * expandable segments: each page is one physical allocation (cuMemCreate +
 * cuMemMap to map it, cuMemUnmap to give it back), and a page's cost is
 * nearly the same whatever its size (measured on an H100: about 31 us to
 * map and 26 us to unmap a page, 2 to 32 MiB alike; docs/tuning.md), so
 * larger pages map a segment in fewer calls but give memory back in larger
 * steps (a free run shorter than a page, or a page a live block shares,
 * stays mapped). 0: the driver's minimum granularity (2 MiB on current
 * GPUs), what cca_upstream_cuda_create uses. Else a power of two, a
 * multiple of CCA_GRANULARITY and at most CCA_CUDA_MAX_VM_GRANULARITY
 * (else CCA_ERR_INVALID_ARGUMENT, before any device is touched), and a
 * multiple of the device's minimum granularity (else
 * CCA_ERR_INVALID_ARGUMENT once the device is asked). On a device without
 * virtual memory management it is not checked against the device and has
 * no effect: there are no vm_* ops. o or out NULL: CCA_ERR_INVALID_ARGUMENT;
 * the rest as cca_upstream_cuda_create. */
typedef struct cca_cuda_options {
    int device;
    size_t vm_granularity;
    /* CCA_VM_PAGES (0): one cuMemCreate per page, any run of pages can be
     * unmapped. CCA_VM_WHOLE_MAPS: one cuMemCreate per vm_map, of the map's
     * size (two driver calls and one cuMemSetAccess per map instead of two
     * per page), unmapped only whole (cca_upstream_ops.vm_backing). Else
     * CCA_ERR_INVALID_ARGUMENT, before any device is touched. */
    int vm_backing;
} cca_cuda_options;
#define CCA_CUDA_MAX_VM_GRANULARITY ((size_t)1 << 30)
cca_status cca_upstream_cuda_create_with(const cca_cuda_options *o, cca_upstream **out);

/* Wrap a caller's ops table (copied) and context (borrowed). */
cca_status cca_upstream_custom_create(const cca_upstream_ops *ops, void *ctx, cca_upstream **out);

/* The device's free and total bytes, as the upstream's mem_info reports
 * them. NULL arguments: CCA_ERR_INVALID_ARGUMENT; an upstream without
 * mem_info: CCA_ERR_UPSTREAM; either way, and when mem_info fails, what
 * *free_bytes and *total_bytes hold is unspecified (the upstream may have
 * written them): read them only after CCA_OK. */
cca_status cca_upstream_mem_info(cca_upstream *u, size_t *free_bytes, size_t *total_bytes);

/* Virtual memory through the upstream (see cca_upstream_ops): 1 when it
 * has the vm_* ops. The others fail with CCA_ERR_UPSTREAM without them (the
 * message saying why where the upstream can: the CUDA upstream names the
 * missing driver function or the device without VMM support), and
 * with CCA_ERR_INVALID_ARGUMENT for a size 0 or a size or address that is
 * not a multiple of the granularity. cca_upstream_vm_granularity sets
 * *bytes, and cca_upstream_vm_reserve *base, to 0 / NULL on any failure but
 * a NULL argument. */
int cca_upstream_has_vm(const cca_upstream *u);
/* The upstream's vm_backing (CCA_VM_PAGES or CCA_VM_WHOLE_MAPS); CCA_VM_PAGES
 * for NULL or an upstream without the vm ops. */
int cca_upstream_vm_backing(const cca_upstream *u);
cca_status cca_upstream_vm_granularity(cca_upstream *u, size_t *bytes);
cca_status cca_upstream_vm_reserve(cca_upstream *u, size_t size, void **base);
cca_status cca_upstream_vm_release(cca_upstream *u, void *base, size_t size);
cca_status cca_upstream_vm_map(cca_upstream *u, void *addr, size_t size);
cca_status cca_upstream_vm_unmap(cca_upstream *u, void *addr, size_t size);
cca_status cca_upstream_synchronize(cca_upstream *u);
cca_status cca_upstream_get_stats(cca_upstream *u, cca_upstream_stats *s);
const char *cca_upstream_name(const cca_upstream *u);

/* Destroy after every allocator using it is destroyed. NULL is a no-op. */
void cca_upstream_destroy(cca_upstream *u);

/* Raw access for tenants that do not use an allocator (the "second tenant" in
 * demos, baselines in benchmarks): counted in the upstream's stats. */
cca_status cca_upstream_alloc(cca_upstream *u, size_t size, void **ptr);
cca_status cca_upstream_free(cca_upstream *u, void *ptr, size_t size);

/* ------------------------------------------------------------------------ */
/* Configuration                                                            */
/* ------------------------------------------------------------------------ */

typedef enum cca_policy {
    CCA_POLICY_GROWTH = 0, /* reserve segments on demand (PyTorch-like)          */
    CCA_POLICY_GREEDY = 1  /* reserve one arena at creation (TensorFlow default) */
} cca_policy;

/* Every field is one option of the table in config.c; cca_config_print and
 * docs/allocator.md list them with defaults and ranges. Sizes are bytes. */
typedef struct cca_config {
    cca_policy policy;      /* policy:growth|greedy                        (growth) */
    double greedy_fraction; /* greedy_fraction: of device free memory, (0,1]  (0.9) */
    size_t greedy_bytes;    /* greedy_bytes: arena size; 0 = use the fraction (0)   */
    size_t max_reserved;    /* max_reserved: cap on reserved bytes; 0 = none    (0) */
    size_t small_max;       /* small_max: requests <= this (rounded up to 512
                               first) use the small pool                  (1M) */
    size_t small_segment;   /* small_segment: size of small-pool segments      (2M) */
    size_t medium_segment;  /* medium_segment: segments of the medium pool     (20M)*/
    size_t large_min;       /* large_min: from here (rounded up to 512 first)
                               a request gets its own segment, rounded up
                               to segment_round                           (10M) */
    size_t segment_round;   /* segment_round: rounding of large segments       (2M) */
    size_t max_split;       /* max_split: free blocks larger than this are never
                               split, nor used for smaller requests, nor for
                               larger ones with >= medium_segment of slack;
                               growth, classic segments only (refused with
                               greedy and expandable:1); 0 = off             (0) */
    int small_pool;         /* small_pool: 0 = every request uses the large pool (1)*/
    int medium_pool;        /* medium_pool: requests < large_min never use the
                               segments of large requests (1)                     */
    int log_oom;            /* log_oom: log one line per OOM                     (1) */
    int expandable;         /* expandable: segments are reserved address ranges
                               whose pages are mapped as they grow and unmapped
                               when free, where the upstream has the vm ops;
                               elsewhere classic segments (stats: page_size 0;
                               cca_create logs why, once per upstream)     (0) */
    size_t history;         /* history: keep the last N allocator events (alloc,
                               free, segment and page events, OOMs) in memory
                               for cca_write_snapshot_torch; 0 = off        (0) */
    double expandable_ahead;     /* expandable_ahead: a request served from an
                                    expandable segment's tail also maps this
                                    fraction of the segment's mapped bytes,
                                    (0,1]                              (0.0625) */
    size_t expandable_ahead_max; /* expandable_ahead_max: cap on those bytes;
                                    0 = map only what requests need  (64 MiB) */
    size_t expandable_ahead_min; /* expandable_ahead_min: a tail request maps at
                                    least this much, its own pages included
                                    (small pool's range: at most small_segment);
                                    capped by expandable_ahead_max; 0 = off
                                                                     (20 MiB) */
    size_t expandable_chunk;     /* expandable_chunk: over an upstream whose
                                    maps are whole (CCA_VM_WHOLE_MAPS), the
                                    largest map the allocator makes: a run of
                                    pages is mapped in maps of at most this
                                    (rounded down to pages, at least one),
                                    and memory goes back only map by map;
                                    0 = one map per run; no effect
                                    over pages                (128 MiB) */
    int hold_peak;               /* hold_peak: growth only (refused with
                                    greedy): a request that would raise
                                    reserved bytes above reserved_bytes_peak
                                    first releases cached memory as the OOM
                                    retry does; the peak rises only when
                                    releasing everything cached leaves no
                                    room, and then by what the request needs
                                    (stats: peak_holds)                  (0) */
} cca_config;

/* Compiled-in defaults. Does not read the environment. */
void cca_config_default(cca_config *c);

/* Apply "key:value,key:value" on top of *c. Items are separated by commas or
 * newlines (cca_config_print's lines parse as they are); blanks (space, tab,
 * CR) around keys and values are ignored, and so are empty items; a key
 * given more than once takes its last value (a string layered on another
 * overrides it, as ccrun's --conf does). Sizes as cca_parse_size: K/M/G/T
 * suffixes (powers of 1024), decimals allowed ("1.5G"); a positive value
 * that rounds down to 0 bytes ("0.1") is refused, as 0 means none or off
 * for several keys (max_reserved:0 is no cap). On error *c is left unchanged, CCA_ERR_CONFIG is returned
 * and cca_last_error() names the key and the problem. NULL text = no change. */
cca_status cca_config_parse(cca_config *c, const char *text);

/* Apply the CCALLOC_CONF environment variable, if set and not empty, on top
 * of *c. A bad value: CCA_ERR_CONFIG, cca_last_error() naming CCALLOC_CONF
 * and the key, *c unchanged. c NULL: CCA_ERR_INVALID_ARGUMENT. */
cca_status cca_config_apply_env(cca_config *c);

/* Check ranges and cross-field rules (e.g. small_max <= small_segment;
 * docs/allocator.md lists them): CCA_ERR_CONFIG naming the key or rule,
 * CCA_ERR_INVALID_ARGUMENT for NULL. */
cca_status cca_config_validate(const cca_config *c);

/* Write the options: with_docs 0 = the values of *c as "key:value" lines;
 * 1 = each value with its default and documentation (for --help);
 * 2 = the option table as markdown (defaults and documentation; the table in
 * docs/allocator.md is this output, and a test keeps them equal).
 * Any other with_docs: CCA_ERR_INVALID_ARGUMENT, nothing written.
 * f is flushed; a write or the flush failed: CCA_ERR_IO. */
cca_status cca_config_print(const cca_config *c, FILE *f, int with_docs);

/* ------------------------------------------------------------------------ */
/* Allocator lifetime                                                       */
/* ------------------------------------------------------------------------ */

typedef struct cca_allocator cca_allocator;

/* Create an allocator over upstream `u` (borrowed; it must outlive the
 * allocator). Config precedence: an explicit `c` is used as given; with
 * c == NULL the defaults plus CCALLOC_CONF are used (a bad CCALLOC_CONF is
 * logged and the defaults alone used: the call still succeeds, and leaves
 * the thread's message as it was). The greedy policy
 * reserves its arena here (CCA_ERR_OUT_OF_MEMORY if the upstream refuses,
 * or if the arena comes to 0 bytes: greedy_bytes under 512, or expandable
 * with less than one page allowed).
 * Failures, *out NULL (when out is not NULL) and nothing held: out or u NULL:
 * CCA_ERR_INVALID_ARGUMENT; an explicit c that cca_config_validate refuses:
 * CCA_ERR_CONFIG; host memory short: CCA_ERR_OUT_OF_MEMORY; expandable:1
 * and the upstream's vm_granularity fails, or the greedy arena cannot be
 * sized or reserved for a reason other than memory (greedy_fraction over an
 * upstream without mem_info, an upstream error): that status, usually
 * CCA_ERR_UPSTREAM. */
cca_status cca_create(const cca_config *c, cca_upstream *u, cca_allocator **out);

/* Return every segment to the upstream and free the allocator. The device is
 * synchronized first when frees are pending or pages of expandable segments
 * are mapped (unmapping does not wait for queued work; freeing a classic
 * segment does). If blocks are still live they are released too, and
 * CCA_ERR_LIVE_BLOCKS is returned. If that synchronize fails, no mapped
 * page is unmapped (queued work may still use it): the pages stay mapped
 * and their ranges reserved in the upstream (its stats count them), the
 * allocator is freed all the same, classic segments are freed, and the
 * synchronize's status is returned (CCA_ERR_LIVE_BLOCKS first when blocks
 * were live), the message saying how many bytes were left mapped. As in
 * cca_domain_release, a freed block whose stream events have not completed
 * (that synchronize failed, or an event still reads incomplete) counts as
 * live: CCA_ERR_LIVE_BLOCKS, and it is in the message's count. If the
 * upstream refuses to take a segment back: CCA_ERR_UPSTREAM.
 * NULL: CCA_ERR_INVALID_ARGUMENT. */
cca_status cca_destroy(cca_allocator *a);

/* The configuration in force (after env and validation). a or c NULL:
 * CCA_ERR_INVALID_ARGUMENT. */
cca_status cca_get_config(const cca_allocator *a, cca_config *c);

/* ------------------------------------------------------------------------ */
/* Allocation                                                               */
/* ------------------------------------------------------------------------ */

/* Best fit: the smallest cached free block of the stream that fits (ties:
 * lowest address), split when the remainder is worth keeping; otherwise:
 *  - a request that can never succeed (its segment — which shrinks to a
 *    device or max_reserved smaller than it, never below the request — or
 *    with expandable segments its whole pages, would exceed the device's
 *    total memory or
 *    max_reserved, or with expandable segments the 32 TiB of address space
 *    one allocator's ranges may hold, whether or not the device's size is
 *    known; greedy: greedy_bytes (expandable: in whole pages) or
 *    the arena, also after an empty-cache released it) fails at once with
 *    CCA_ERR_OUT_OF_MEMORY, touching neither the cache nor the upstream
 *    (as every cca_alloc, it first completes the pending frees whose
 *    events have finished: event queries only, nothing synchronized,
 *    released or allocated);
 *  - growth: a new segment (expandable: map the pages the block lacks; a
 *    new range is reserved only when max_reserved and the device's free
 *    memory, asked with one mem_info where the upstream has it, hold the
 *    request's pages); if the upstream refuses (or max_reserved would be
 *    crossed, or the device's free memory is short), one retry
 *    (alloc_retries): synchronize and complete pending frees (classic
 *    segments: only if frees are pending; expandable: also with none
 *    pending, since pages are unmapped only once the device is idle),
 *    then release cached memory as cca_trim does (whole free segments,
 *    free pages) as needed and try again. Expandable: if that synchronize
 *    fails, nothing can be unmapped or completed, and the retry ends
 *    there: CCA_ERR_OUT_OF_MEMORY (ooms counted, the line logged) whose
 *    message names the synchronize's failure, nothing released, nothing
 *    more asked of the upstream. Nothing is released (and,
 *    expandable with no free pending, nothing synchronized) when releasing
 *    cannot make room: nothing is cached; max_reserved is set and what
 *    live and pending blocks keep reserved (classic: the segments they
 *    pin; expandable: the pages they touch) plus the request's least
 *    segment (expandable: the new pages its block would need) is over it;
 *    or the device's free memory plus everything cached is short of that.
 *    A failed retry leaves live blocks unchanged; what it released stays
 *    released.
 *  - growth with hold_peak:1: a request that needs new memory while
 *    something is cached (free bytes reserved, or frees pending) may not
 *    raise reserved_bytes past reserved_bytes_peak, a cap beside
 *    max_reserved for this request only. Refused by it, the request
 *    takes the retry's steps above with the peak as the cap (synchronize,
 *    complete pending frees, release the shortfall, then everything, each
 *    followed by a take), none counted in alloc_retries; if it still does
 *    not fit, everything cached is released (expandable: after a
 *    synchronize; if that fails nothing is unmapped) and the request is
 *    taken with no hold, so the peak rises by no more than the request
 *    needs once the cache is empty (classic: a segment of its usual size;
 *    expandable: its own pages, no ahead pages). That release follows the
 *    retry's rule: when releasing cannot make room even with the peak
 *    lifted (max_reserved, or the device's free memory plus everything
 *    cached, is short of what the request needs), nothing is released or
 *    synchronized, and the take is refused. peak_holds counts the requests
 *    that released cached memory on the way (a map refused part-way and
 *    unmapped again is no release). If the upstream refuses that
 *    last take, the retry above follows (counted) and its outcome is the
 *    call's. Like the retry, a hold may release any domain's cached
 *    memory, a reserved footprint included.
 *  - greedy: the upstream is called only to reserve the arena, here only
 *    when cca_empty_cache released it; a full arena is an OOM (no retry)
 *    once pending frees are completed (a synchronize, when frees are
 *    pending, then best fit again). Over expandable segments also to map a
 *    fitting free block's pages that trim unmapped; if the device refuses
 *    them, the one retry above (which unmaps other free pages of the
 *    arena); no block that fits, pending frees completed: an OOM with no
 *    retry and no other upstream call.
 * An OOM logs one line, after the allocator's lock is released. The retry
 * is for CCA_ERR_OUT_OF_MEMORY only: an upstream failing otherwise (e.g.
 * CCA_ERR_UPSTREAM) has its status returned at once, no retry, no OOM
 * counted, nothing released. a or out NULL, or a size whose rounding would
 * overflow: CCA_ERR_INVALID_ARGUMENT, nothing touched.
 * size 0: CCA_OK, *out = NULL. On failure *out is NULL. */
cca_status cca_alloc(cca_allocator *a, size_t size, cca_stream s, void **out);

/* Free a pointer from cca_alloc. NULL is a no-op. Double free, an unknown or
 * an interior pointer: CCA_ERR_INVALID_POINTER, nothing changes. If another
 * stream used the block (cca_record_stream; or any block of a greedy or
 * footprint arena, which goes to any stream: the default stream is taken
 * as ordered against no other, as CUDA's non-blocking streams are), it is
 * reused only after events on those streams complete. If no event can be recorded and the fallback
 * synchronize fails, the upstream's status is returned: the pointer is
 * consumed all the same (do not free it again), and its block is reused
 * only after a later synchronize succeeds (trim, empty-cache, OOM retry). */
cca_status cca_free(cca_allocator *a, void *ptr);

/* Mark a live block as used on stream `s` too: at free it returns to the pool
 * only after events recorded on every such stream have completed (the
 * stream it was allocated on, or one already marked: CCA_OK, no change).
 * a or ptr NULL: CCA_ERR_INVALID_ARGUMENT; ptr not a live block (freed,
 * pending, interior, foreign): CCA_ERR_INVALID_POINTER; host memory short:
 * CCA_ERR_OUT_OF_MEMORY, the block's streams as they were. */
cca_status cca_record_stream(cca_allocator *a, void *ptr, cca_stream s);

/* The size actually held for a live pointer (rounded, maybe unsplit slack).
 * A NULL argument: CCA_ERR_INVALID_ARGUMENT; ptr not a live block:
 * CCA_ERR_INVALID_POINTER; *size is written only on success. */
cca_status cca_block_size(cca_allocator *a, const void *ptr, size_t *size);

/* ------------------------------------------------------------------------ */
/* Giving memory back                                                       */
/* ------------------------------------------------------------------------ */

typedef struct cca_release_report {
    size_t bytes_released; /* returned to the upstream by this call       */
    size_t segments_released;
    size_t bytes_still_reserved; /* reserved_bytes afterwards                   */
    size_t segments_kept;        /* free segments kept to honour keep_bytes     */
    size_t segments_pinned;      /* segments kept because live blocks sit in it */
    size_t live_bytes_pinning;   /* bytes of the live (or pending) blocks in them */
    size_t free_bytes_pinned;    /* cached free bytes trapped in pinned segments */
    /* expandable segments: pages unmapped by this call, those of ranges it
     * then released whole included (their bytes are in bytes_released too),
     * and the free bytes that stay mapped because they share a page with a
     * live or pending block */
    size_t pages_unmapped;
    size_t bytes_unmapped;
    size_t free_bytes_trapped;
} cca_release_report;

/* Synchronize, complete pending frees, then give memory back until
 * reserved <= keep_bytes or nothing free is left: whole free classic
 * segments largest first and, with expandable segments, every page lying
 * wholly inside a free block (tails first), then empty address ranges
 * (docs/allocator.md, "Giving memory back" and "Pages, not segments"). If
 * the synchronize fails, no page is unmapped. report may be NULL. If the upstream refuses to take a
 * segment back, that segment stays cached (state intact), the rest are
 * released, the report is filled and CCA_ERR_UPSTREAM is returned. Pending
 * blocks that could not complete stay reserved, and after the release the
 * call returns the synchronize's failure, or CCA_ERR_NOT_READY when the
 * device synchronized but an event still reads incomplete. */
cca_status cca_trim(cca_allocator *a, size_t keep_bytes, cca_release_report *report);

/* cca_trim(a, 0, report): with no live blocks, reserved_bytes becomes 0. */
cca_status cca_empty_cache(cca_allocator *a, cca_release_report *report);

/* ------------------------------------------------------------------------ */
/* Statistics                                                               */
/* ------------------------------------------------------------------------ */

typedef struct cca_stats {
    size_t allocated_bytes; /* bytes in live blocks (rounded sizes)          */
    size_t allocated_bytes_peak;
    size_t requested_bytes; /* bytes callers asked for, live                 */
    size_t requested_bytes_peak;
    size_t reserved_bytes; /* bytes held from the upstream                  */
    size_t reserved_bytes_peak;
    size_t active_blocks; /* live blocks (pending ones included)           */
    size_t active_blocks_peak;
    size_t pending_blocks; /* freed, waiting on stream events               */
    size_t cached_blocks;  /* free blocks in the pools                      */
    size_t cached_bytes;   /* bytes in free blocks; of expandable segments:
                              only mapped ones (reserved - allocated)        */
    size_t segments;
    size_t segments_peak;
    size_t largest_free_block; /* expandable: the longest mapped free stretch */
    uint64_t alloc_calls; /* successful cca_alloc calls (size > 0)         */
    uint64_t free_calls;  /* successful cca_free calls (ptr != NULL)       */
    uint64_t upstream_allocs;
    uint64_t upstream_frees;
    uint64_t alloc_retries; /* upstream refused, cache released, retried     */
    uint64_t ooms;          /* CCA_ERR_OUT_OF_MEMORY returned                */
    uint64_t splits;
    uint64_t merges;
    double fragmentation; /* 1 - largest_free_block / cached_bytes; 0 if none */
    /* expandable segments (all 0 with classic ones): */
    size_t page_size;           /* the upstream's mapping granularity        */
    size_t expandable_segments; /* of `segments`                             */
    size_t address_space_bytes; /* address space they reserve                */
    size_t mapped_bytes;        /* mapped in them (part of reserved_bytes)   */
    uint64_t vm_maps;           /* map calls (also in upstream_allocs)       */
    uint64_t vm_unmaps;         /* unmap calls (also in upstream_frees)      */
    uint64_t pages_mapped;      /* pages mapped by those calls, in all       */
    uint64_t pages_unmapped;
    int vm_backing; /* the upstream's: CCA_VM_WHOLE_MAPS (maps of at most
                       expandable_chunk, given back whole) or CCA_VM_PAGES */
    uint64_t peak_holds; /* hold_peak:1: requests that would have raised
                            reserved_bytes_peak and released cached memory
                            first (not counted in alloc_retries)          */
} cca_stats;

/* Consistent snapshot of the counters (taken under the allocator's lock).
 * a or s NULL: nothing happens. Cheap enough to poll every step: it never
 * reads the live blocks. Cost under the lock: O(domains holding memory x
 * pools x streams); with expandable segments, plus the free blocks larger
 * than the longest mapped free stretch, largest first (usually a few per
 * range; docs/allocator.md, "Pages, not segments"). */
void cca_get_stats(const cca_allocator *a, cca_stats *s);

/* Set every *_peak to its current value, the domains' too. NULL: nothing
 * happens. */
void cca_reset_peak_stats(cca_allocator *a);

/* Stats as one line of text ("allocated=... reserved=...") and as JSON.
 * Every writer below (and cca_config_print, cca_domain_stats_write_json)
 * flushes f before it returns: a write or the flush failed is CCA_ERR_IO
 * (f may hold part of the output), a NULL argument CCA_ERR_INVALID_ARGUMENT
 * (nothing written). */
cca_status cca_stats_print(const cca_stats *s, FILE *f);
cca_status cca_stats_write_json(const cca_stats *s, FILE *f);

/* The whole allocator as JSON: config, stats, domains, and every segment in
 * address order (its address, size, domain: its name and, as names need not
 * be unique, "domain_index", its position in "domains" (the default domain
 * 0, then in creation order; the pickle's segment_pool_id); pool, stream,
 * live blocks, and for an expandable one its mapped runs) with its blocks in address order
 * (offset in the segment, size, state, requested bytes). Taken under the
 * allocator's lock into host memory and written to f after it, so a file
 * that does not drain (a pipe nobody reads yet) stalls this call only,
 * never the allocator's other callers; with no host memory for that copy,
 * written to f under the lock instead (it needs none). */
cca_status cca_write_snapshot_json(const cca_allocator *a, FILE *f);

/* The same state as a Python pickle (protocol 2) of the dict that PyTorch's
 * torch.cuda.memory._snapshot() returns, so that PyTorch's tools open it
 * (torch.cuda._memory_viz, pytorch.org/memory_viz; docs/allocator.md,
 * "Snapshots in PyTorch's format"):
 *  - "segments": every segment in address order with its blocks and their
 *    states (live: active_allocated, pending: active_pending_free, free:
 *    inactive); an expandable segment as one segment per run of mapped
 *    pages; "device" is `device`, streams are the cca_stream values as
 *    integers;
 *  - "device_traces": device + 1 lists, all empty but the last: the events
 *    of the history ring (config `history`; empty when it is 0), oldest
 *    first;
 *  - "allocator_settings" (the config string as PYTORCH_CUDA_ALLOC_CONF),
 *    and "ccalloc" (upstream name, policy, history size and count).
 * Taken under the allocator's lock into host memory and written to f after
 * it, as cca_write_snapshot_json (straight to f under the lock when that
 * memory is short); f is flushed. a or f NULL, or device
 * not in [0, CCA_SNAPSHOT_MAX_DEVICE]: CCA_ERR_INVALID_ARGUMENT, nothing
 * written. A write or the flush failed: CCA_ERR_IO (f holds a partial
 * pickle). Host memory short: CCA_ERR_OUT_OF_MEMORY, nothing written. */
#define CCA_SNAPSHOT_MAX_DEVICE 1023
cca_status cca_write_snapshot_torch(const cca_allocator *a, int device, FILE *f);

/* ------------------------------------------------------------------------ */
/* Memory domains: one owner per model, released whole                     */
/* ------------------------------------------------------------------------ */

/* A DOMAIN is a named owner of segments inside one allocator. A domain's
 * blocks live only in its own segments (expandable: its own address
 * ranges), so they never pin another domain's memory, and
 * cca_domain_release gives all of it back while other domains keep
 * running. Every allocator has a default domain (NULL in the calls below),
 * which cca_alloc uses. Domains need policy:growth: a greedy allocator holds
 * one arena for the whole process, which is what domains exist to avoid —
 * cca_domain_create refuses there (CCA_ERR_INVALID_ARGUMENT); a domain's own
 * up-front arena is cca_domain_reserve.
 *
 * Cached free memory is the allocator's to manage: cca_trim, cca_empty_cache
 * and the OOM retry release free memory of every domain. */
typedef struct cca_domain cca_domain;

#define CCA_DOMAIN_NAME_MAX 63

/* A new, empty domain. name: 1..CCA_DOMAIN_NAME_MAX printable ASCII
 * characters without '"', '\\' or ',' (names appear in JSON and in the
 * CSV of a CCALLOC_TRACE recording); names need not be unique.
 * Holds no device memory until something is allocated in it.
 * The handle is opaque (not the domain's address; never dereference it)
 * and never given twice in a process: once the domain is destroyed, every
 * call refuses its handle (CCA_ERR_INVALID_ARGUMENT), whatever was created
 * since. Handles of other allocators are refused the same way. */
cca_status cca_domain_create(cca_allocator *a, const char *name, cca_domain **out);

/* cca_alloc in domain d (NULL: the default domain; one that is not a's:
 * CCA_ERR_INVALID_ARGUMENT, even for size 0). Best fit among d's
 * cached blocks only (its arena first, when it has one), growth in d's own
 * segments; the OOM retry may release cached memory of any domain. An
 * explicit argument rather than a per-thread current domain: a model's work
 * often hops threads (thread pools, callbacks), and the domain of every
 * block is then visible at the call site. */
cca_status cca_alloc_in(cca_allocator *a, cca_domain *d, size_t size, cca_stream s, void **out);

/* The domain a live pointer belongs to (NULL: the default domain). A NULL
 * a, ptr or d: CCA_ERR_INVALID_ARGUMENT; ptr not a live block:
 * CCA_ERR_INVALID_POINTER; *d is NULL on any failure (d not NULL). */
cca_status cca_domain_of(cca_allocator *a, const void *ptr, cca_domain **d);

/* One live block found by cca_domain_release: a leak at unload. */
typedef struct cca_live_block {
    void *ptr;
    size_t size;      /* held (rounded) */
    size_t requested; /* what the caller asked for */
    cca_stream stream;
    uint64_t age;     /* allocations (in this allocator) since it was made */
    int pending;      /* 1: freed, but waiting on stream events */
} cca_live_block;

typedef struct cca_domain_report {
    size_t bytes_released; /* returned to the upstream (segments and pages) */
    size_t segments_released;
    size_t bytes_still_reserved; /* the domain's reserved bytes afterwards */
    size_t live_blocks;          /* live or pending blocks found (all, even
                                    beyond leaks_cap); released with FORCE  */
    size_t live_bytes;
    /* caller's array: the first leaks_cap of those blocks, in address order
     * within each segment; leaks_written says how many were written */
    cca_live_block *leaks;
    size_t leaks_cap;
    size_t leaks_written;
} cca_domain_report;

#define CCA_DOMAIN_FORCE 1u /* release live blocks too: DANGEROUS (see below) */

/* Synchronize the device, complete pending frees, then return every segment
 * (every mapped page and address range) of domain d to the upstream; the
 * domain stays usable, empty, with its peak statistics. report may be NULL;
 * on entry only its leaks/leaks_cap are read.
 *  - live blocks in d (or pending ones whose events are still incomplete):
 *    nothing is released, CCA_ERR_LIVE_BLOCKS, the report lists them — a
 *    leak check at unload;
 *  - flags CCA_DOMAIN_FORCE: live blocks are released all the same; their
 *    pointers become invalid (a later cca_free of one is
 *    CCA_ERR_INVALID_POINTER). Only for a caller that knows no kernel will
 *    touch that memory again: the device is synchronized first, but work
 *    queued after this call on such a pointer faults or corrupts another
 *    owner's memory. Pending blocks whose events did not complete are never
 *    released, even with FORCE (CCA_ERR_LIVE_BLOCKS);
 *  - the synchronize failed: nothing is released, its status is returned;
 *  - the upstream refuses a segment or page: that memory stays in d, cached
 *    and indexed (state intact), the rest is released, CCA_ERR_UPSTREAM.
 * d NULL: the default domain. */
cca_status cca_domain_release(cca_allocator *a, cca_domain *d, unsigned flags, cca_domain_report *report);

/* cca_domain_release, then free the handle (only if everything was
 * released; otherwise the domain stays and the release's status is
 * returned). The default domain cannot be destroyed
 * (CCA_ERR_INVALID_ARGUMENT). */
cca_status cca_domain_destroy(cca_allocator *a, cca_domain *d, unsigned flags, cca_domain_report *report);

/* FOOTPRINT: reserve `bytes` for d up front, as one arena (classic: one
 * upstream allocation; expandable: one range mapped whole), so that a model
 * whose peak is known (from a previous load) runs with no upstream call.
 * Requests in d are served from the arena first (best fit at any size, any
 * stream: a block used on a stream other than the default is reused only
 * after an event, as in the greedy arena), then from growth. At most one
 * arena per domain (CCA_ERR_INVALID_ARGUMENT for a second); bytes is rounded
 * up to CCA_GRANULARITY (expandable: to the page). The arena is released
 * with the domain, and by trim/empty-cache when it is wholly free.
 * Failures: CCA_ERR_INVALID_ARGUMENT (bytes 0 or above SIZE_MAX/2, the
 * greedy policy, a foreign handle, an arena already there) and
 * CCA_ERR_OUT_OF_MEMORY for more than the device or max_reserved could
 * ever hold (expandable: or more than 32 TiB) change nothing. When the
 * upstream refuses (expandable: or the device's free memory, asked with
 * one mem_info before the range is reserved, cannot hold the arena: no
 * range is reserved), it retries as the
 * OOM retry of cca_alloc does (alloc_retries counted): synchronize, release
 * every cached free segment and page of every domain, reserve once more; if
 * that is refused too, CCA_ERR_OUT_OF_MEMORY, d has no arena, and what was
 * released stays released (ooms is not counted: no allocation failed).
 * Expandable: a synchronize that fails ends the retry there, as for
 * cca_alloc (CCA_ERR_OUT_OF_MEMORY naming it, nothing released, no second
 * reservation).
 * When releasing cannot make room, nothing is released:
 * CCA_ERR_OUT_OF_MEMORY at once (after a synchronize only when frees are
 * pending, to complete them). That is when nothing is cached; when
 * max_reserved is set and live and pending blocks (classic: the segments
 * they pin; expandable: the pages they touch) plus the arena are over it;
 * or when the device's free memory plus everything cached is short of
 * the arena.
 * The upstream failing otherwise than for memory (CCA_ERR_UPSTREAM, ...):
 * that status at once, no retry, d has no arena.
 * Expandable: a range whose map and then release were both refused stays
 * reserved, empty, as an ordinary range of d (docs/allocator.md), never as
 * part of an arena: a later arena of d serves only from itself.
 * A CCALLOC_TRACE recording gets the reservation only when it succeeds. */
cca_status cca_domain_reserve(cca_allocator *a, cca_domain *d, size_t bytes);

typedef struct cca_domain_stats {
    char name[CCA_DOMAIN_NAME_MAX + 1];
    size_t allocated_bytes;
    size_t allocated_bytes_peak;
    size_t requested_bytes;
    size_t requested_bytes_peak;
    size_t reserved_bytes; /* segments (classic) and mapped pages of d */
    size_t reserved_bytes_peak;
    size_t active_blocks; /* live + pending */
    size_t active_blocks_peak;
    size_t cached_bytes; /* reserved - allocated */
    size_t largest_free_block;
    size_t segments;
    uint64_t alloc_calls;
    uint64_t upstream_allocs; /* upstream calls made for d (maps included) */
    uint64_t upstream_frees;
    double fragmentation; /* 1 - largest_free_block / cached_bytes; 0 if none */
} cca_domain_stats;

/* d NULL: the default domain. Peaks are reset by cca_reset_peak_stats.
 * Costs what cca_get_stats costs, for d's free blocks only. */
cca_status cca_get_domain_stats(const cca_allocator *a, const cca_domain *d, cca_domain_stats *s);

/* Every domain (the default first, then in creation order) as a JSON array
 * of the stats above, each with "arena_bytes" too (the size of its
 * cca_domain_reserve arena; 0: none); f is flushed (CCA_ERR_IO when a write
 * or the flush failed). Taken under the allocator's lock into host memory
 * and written to f after it, as cca_write_snapshot_json, so a file that
 * does not drain stalls this call only (with no host memory for that copy,
 * written to f under the lock). */
cca_status cca_domain_stats_write_json(const cca_allocator *a, FILE *f);

/* ------------------------------------------------------------------------ */
/* Tracing (CCALLOC_TRACE=file.csv records every alloc, free and release)   */
/* ------------------------------------------------------------------------ */

/* Write a phase mark ("load:resnet50") into the trace, in order with the
 * allocator's events, so that a replay reports reserved memory at each
 * phase. A name is 1..CCA_MARK_MAX printable ASCII characters (0x20..0x7e)
 * without ',' or '"'; anything else, or a NULL argument, is
 * CCA_ERR_INVALID_ARGUMENT. When the process is not tracing: CCA_OK, no-op.
 * A mark is a checkpoint: the recording is flushed to its file, and
 * CCA_ERR_IO says that it could not be written (a full disk; the recording
 * is incomplete from some earlier event on). The allocator calls that
 * record events cannot fail for the trace: when the last allocator using
 * it is destroyed, a recording that could not be written whole is said
 * once in the log. CCALLOC_TRACE naming a FIFO that no process reads is
 * refused when the first allocator opens it (logged, not tracing) instead
 * of waiting for a reader; a pipe whose reader goes away raises SIGPIPE at
 * the next write, as any write to it does, unless the program ignores
 * SIGPIPE (then the write fails and is said as above). */
#define CCA_MARK_MAX 63
cca_status cca_trace_mark(cca_allocator *a, const char *name);

/* Walk every internal invariant (block chains tile each segment, no two free
 * neighbours, index and stats agree). CCA_OK, CCA_ERR_INVARIANT with
 * cca_last_error() naming the broken invariant, or CCA_ERR_INVALID_ARGUMENT
 * for a NULL allocator. O(blocks): for tests. */
cca_status cca_check_invariants(const cca_allocator *a);

/* ------------------------------------------------------------------------ */
/* Framework entry points (PyTorch's CUDAPluggableAllocator, Python)        */
/* ------------------------------------------------------------------------ */

/* One allocator per device number, created on the first call that names
 * the device (thread-safe: racing first calls create one), kept until
 * cca_plug_reset or the end of the process (no destructor runs at exit).
 *  - config: cca_plug_configure's conf, else the defaults + CCALLOC_CONF (a
 *    bad CCALLOC_CONF is logged and the defaults kept, as in cca_create);
 *  - upstream: cca_plug_configure's, else CCALLOC_PLUG_UPSTREAM, else
 *    "cuda": the CUDA device `device`. "cuda:KEY=VALUE[,KEY=VALUE]" sets
 *    its cca_cuda_options: vm_granularity=SIZE (the page of its expandable
 *    segments, a power of two from CCA_GRANULARITY to
 *    CCA_CUDA_MAX_VM_GRANULARITY, K/M/G suffixes) and
 *    vm_backing=pages|whole_maps (CCA_VM_PAGES / CCA_VM_WHOLE_MAPS), each
 *    key at most once, in either order, no blanks, no empty key or value,
 *    no trailing comma (e.g. "cuda:vm_granularity=32M,vm_backing=whole_maps");
 *    anything else is CCA_ERR_CONFIG, and a page the device refuses fails
 *    the device's creation with CCA_ERR_INVALID_ARGUMENT. "host[:CAPACITY[:DEVICES]]" (default
 *    1G and 1) gives each device number below DEVICES a simulated device of
 *    its own of CAPACITY bytes. Only ever chosen explicitly: with "cuda"
 *    and no GPU (or a build without CUDA) there is no fallback;
 *  - a device whose creation failed (no GPU, device number past the count,
 *    bad CCALLOC_PLUG_UPSTREAM) is logged once and stays failed until
 *    cca_plug_reset: every later call on it fails at once with the same
 *    status and message.
 *  - fork() is safe at any time, as for every allocator (the top of this
 *    header): the child can use the simulated devices it inherits,
 *    whatever other threads were doing.
 * Usage from Python: ccalloc.torch.enable() (docs/python.md). */
#define CCA_PLUG_MAX_DEVICES 64

/* PyTorch's alloc signature (`stream` is a cudaStream_t): cca_alloc on the
 * device's allocator with `stream` passed through. Returns NULL, and never
 * aborts, on any failure, with cca_last_error() set on this thread and one
 * log line: device < 0 or >= CCA_PLUG_MAX_DEVICES (logged every time), a
 * device that cannot be created (logged once, above), out of memory
 * (logged by the allocator when log_oom:1, the default), any other
 * cca_alloc failure. size 0: NULL, no log, no message, nothing created
 * (PyTorch's own allocator gives an empty tensor a null pointer too). */
void *cca_plug_alloc(size_t size, int device, void *stream);

/* PyTorch's free signature: cca_free on the device's allocator. size and
 * stream are ignored (the allocator knows the block's size and the streams
 * that used it). NULL: no-op. A device out of range, a device with no
 * allocator, or a pointer that is not a live block of that device's
 * allocator (double free, foreign or interior pointer, another device's
 * block): nothing changes, cca_last_error() is set, one log line. */
void cca_plug_free(void *ptr, size_t size, int device, void *stream);

/* Choose, before the first call that creates a device, the upstream text
 * ("cuda" or "host[:CAPACITY[:DEVICES]]"; NULL: CCALLOC_PLUG_UPSTREAM or
 * "cuda") and the allocator config ("key:value,..." as cca_config_parse;
 * NULL: defaults + CCALLOC_CONF). Replaces any earlier configure.
 * CCA_ERR_CONFIG for a bad text of either (nothing changes);
 * CCA_ERR_INVALID_ARGUMENT once a device has been created (or its creation
 * tried) since the last reset. */
cca_status cca_plug_configure(const char *upstream, const char *conf);

/* The allocator cca_plug_alloc uses for `device`, created now if it was not
 * yet (for stats, trim, empty-cache, snapshots and domains through the
 * ordinary calls; do not cca_destroy it). Fails as cca_plug_alloc would:
 * CCA_ERR_INVALID_ARGUMENT for a device out of range, or the device's
 * creation failure (CCA_ERR_NO_DEVICE, CCA_ERR_CONFIG, ...); *out NULL. */
cca_status cca_plug_get_allocator(int device, cca_allocator **out);

/* The upstream under that allocator (for cca_upstream_mem_info and
 * cca_upstream_get_stats), with the same errors. Do not destroy it. */
cca_status cca_plug_get_upstream(int device, cca_upstream **out);

/* For tests: destroy every device's allocator and upstream and forget
 * cca_plug_configure and every recorded failure, as at load. Not while
 * another thread is in a cca_plug_* call, nor while one uses an allocator or
 * upstream that cca_plug_get_allocator / cca_plug_get_upstream returned:
 * those handles are destroyed here (the next call on the device creates new
 * ones). If any device has live (or pending) blocks: CCA_ERR_LIVE_BLOCKS
 * naming it, and nothing changes. */
cca_status cca_plug_reset(void);

#ifdef __cplusplus
}
#endif

#endif /* CCALLOC_H */
