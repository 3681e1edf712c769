/*
 * ccalloc.h — the one public header of libccalloc, a best-fit caching
 * allocator for GPU memory that can give its memory back.
 *
 * Plain C11, no CUDA header: streams are opaque `void *` (a cudaStream_t on
 * the CUDA upstream, any token on the host upstream). Programs may include
 * it as C99 or later, or C++11 or later (tests/allocator/contract/
 * test_header.sh). How it works and why:
 * docs/allocator.md.
 *
 * How to read this header. Declarations are grouped under banners by topic.
 * Each function's comment has the same three parts:
 *   - what it does;
 *   - Errors: the cca_status codes it returns, and when;
 *   - Cost: time, upstream calls it may make, locks it takes.
 * Rules of policy (the slow path of cca_alloc, the hold, expandable
 * segments, domains, streams) are in docs/allocator.md; a comment names
 * the section.
 *
 * Return values. Most functions return a cca_status (CCA_OK = 0 on
 * success) and pass results through out-parameters. The exceptions:
 *   - void: cca_clear_error, cca_set_log_callback, cca_upstream_destroy,
 *     cca_config_default, cca_get_stats, cca_reset_peak_stats,
 *     cca_plug_free;
 *   - const char *: cca_status_string, cca_last_error, cca_format_bytes,
 *     cca_upstream_name;
 *   - int: cca_upstream_has_vm, cca_upstream_vm_backing,
 *     cca_upstream_has_copy;
 *   - void *: cca_plug_alloc (NULL on failure: PyTorch's signature).
 *
 * Errors every function shares (not repeated below):
 *   - a NULL handle or out-parameter: CCA_ERR_INVALID_ARGUMENT, nothing
 *     changed (where a function treats a NULL as a no-op, it says so);
 *   - a call on an allocator from inside one of that allocator's own
 *     upstream ops, on the op's thread: CCA_ERR_INVALID_ARGUMENT, nothing
 *     taken or changed (every call that takes the allocator's lock; see
 *     cca_upstream_ops, "Re-entry");
 *   - a failing call sets this thread's message (cca_last_error); a call
 *     that succeeds leaves it as it was (the message functions aside).
 *
 * Threads: every function taking a cca_allocator may be called
 * concurrently on the same allocator (one lock per allocator; a cached
 * alloc or free takes it once). Upstreams are safe to share between
 * allocators and threads. fork() is safe at any moment: the child can go
 * on with every simulated device and allocator it inherits; a CUDA device
 * cannot be used in a forked child. A custom upstream's ops must not
 * create or destroy allocators or upstreams, nor fork (they run with an
 * allocator's lock held). How: docs/allocator.md, "Threads".
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
/* Status codes, messages and the log                                       */
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
    CCA_ERR_INVARIANT,        /* cca_check_invariants found a broken invariant */
    CCA_ERR_ASLEEP            /* the domain is asleep (cca_domain_sleep): wake it */
} cca_status;

/* A short constant text for every code ("CCA_ERR_OUT_OF_MEMORY: out of
 * device memory"); "unknown cca_status" for a value outside the enum.
 * Errors: none. Cost: O(1). */
const char *cca_status_string(cca_status s);

/* The message of the last failing call on this thread ("" if none): names
 * the key, pointer or size that was wrong. Valid until this thread's next
 * failing call. Errors: none. Cost: O(1), no lock (per-thread). */
const char *cca_last_error(void);

/* The reserved spellings (__format__, __printf__): a program may define
 * printf or format as macros of its own before including this header. */
#if defined(__GNUC__) || defined(__clang__)
#define CCA_PRINTF(fmt_index, first_arg) __attribute__((__format__(__printf__, fmt_index, first_arg)))
#else
#define CCA_PRINTF(fmt_index, first_arg)
#endif

/* Set this thread's message (printf-style) and return s, so a failing path
 * reads
 *     return cca_set_error(CCA_ERR_UPSTREAM, "device lost at %zu", size);
 * For custom upstreams (see cca_upstream_ops) and layers above the
 * allocator (the runtime's ccr_fail writes here too: one message per
 * thread). The arguments may include cca_last_error() itself, to wrap it.
 * A message keeps at most 1023 characters: a longer one is cut and ends in
 * "...".
 * Errors: none: returns s, whatever it is.
 * Cost: one vsnprintf into a per-thread buffer; no lock. */
cca_status cca_set_error(cca_status s, const char *fmt, ...) CCA_PRINTF(2, 3);
cca_status cca_vset_error(cca_status s, const char *fmt, va_list ap);

/* Put "prefix: " before this thread's message and return s: a layer adds
 * context to a failure from below ("model.bin: tensor 'w': <message>"). A
 * message too long for the buffer loses its end, never the prefix, and
 * ends in "...".
 * Errors: none: returns s. Cost: as cca_set_error. */
cca_status cca_error_prefix(cca_status s, const char *fmt, ...) CCA_PRINTF(2, 3);
cca_status cca_verror_prefix(cca_status s, const char *fmt, va_list ap);

/* Empty this thread's message (cca_last_error() returns "").
 * Errors: none (void). Cost: O(1). */
void cca_clear_error(void);

/* Set the process-wide log sink for warnings (the one-line OOM report, a
 * bad CCALLOC_CONF, a cleanup step the CUDA driver refused). NULL restores
 * the default: stderr with a "ccalloc: " prefix, control, bidi and
 * invisible characters written as \xNN (a line may quote CCALLOC_CONF,
 * which must not drive the terminal), each line in one write(2) (never
 * interleaved with another writer's); a callback gets the line unescaped.
 *  - Lines reach the sink one at a time, never while a ccalloc lock is
 *    held, so a sink may call the library, cca_set_log_callback included.
 *    A line made under a lock (by an upstream op the allocator calls, say)
 *    waits in its thread and reaches the sink, in order, when the thread's
 *    last ccalloc lock is released, before the call returns; at most 8
 *    lines wait per call, and one more line says how many others were not
 *    logged.
 *  - A line logged by a thread while it is inside the sink goes to stderr
 *    instead (a sink never recurses); the thread's cca_last_error() is the
 *    same after the sink as before it.
 *  - Once this returns, the old sink is not running on another thread and
 *    is not called again.
 * Errors: none (void).
 * Cost: takes the log's lock, so it waits for a line being written. */
typedef void (*cca_log_fn)(void *user, const char *line);
void cca_set_log_callback(cca_log_fn fn, void *user);

/* Human-readable size: "512 B", "1.50 MiB", "3.00 GiB": a number under 1024
 * in its unit but in TiB, the last (1 MiB - 1 B is "1.00 MiB"; a decimal point
 * whatever the program's locale, as every number the library writes or
 * reads: docs/allocator.md, "Options"). Writes at most len
 * bytes (32 is always enough; less: the text cut, NUL-terminated) and
 * returns buf; buf NULL or len 0: writes nothing and returns "".
 * Errors: none. Cost: one snprintf below 1 KiB, else two (the second
 * after the rounding has chosen the unit). */
const char *cca_format_bytes(size_t bytes, char *buf, size_t len);

/* Parse a size, the syntax of every size in config strings: digits with an
 * optional fraction ("1.5"), then an optional K, M, G or T (powers of
 * 1024) that may be followed by "i", then an optional "B", each letter in
 * either case ("4GiB", "4gib", "3MIB", "512k", "1048576", "100B", "100b";
 * an "i" without K, M, G or T is refused: "5iB"). Exact (integer arithmetic);
 * fractions of a byte are dropped.
 * Errors: CCA_ERR_INVALID_ARGUMENT for a NULL argument, anything else
 * (sign, blanks, exponent, an unknown suffix), or a value above SIZE_MAX;
 * *out is unchanged then.
 * Cost: one pass over the text. */
cca_status cca_parse_size(const char *text, size_t *out);

/* cca_parse_size, refusing a text whose value is not a whole number of
 * bytes ("4096.5", "2.0000001M", "0.3K"; "1.5K" is 1536 and taken): for a
 * size that must be exact, a page or a multiple of one, where dropping the
 * fraction would run with another value than the one written.
 * Errors: as cca_parse_size, and CCA_ERR_INVALID_ARGUMENT ("bad size '...'
 * (not a whole number of bytes: more than N, less than N+1)") for such a
 * text; *out is unchanged then.
 * Cost: one pass over the text. */
cca_status cca_parse_size_exact(const char *text, size_t *out);

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
    /* A short name for logs and reports ("host-simulated", "cuda:0"). NULL: "custom".
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
    /* Unmap [addr, addr + size) and give its memory back at once: whole
     * maps (vm_backing below), or with CCA_VM_PAGES any granule-aligned
     * run of mapped granules, whichever vm_map calls mapped them, the
     * granules around it staying mapped with their contents. The caller
     * has made sure no queued work still uses it (unmapping does not
     * wait). */
    cca_status (*vm_unmap)(void *ctx, void *addr, size_t size);
    /* How the memory behind a map is kept. CCA_VM_WHOLE_MAPS (0, the
     * default): each vm_map is ONE physical allocation (over CUDA one
     * cuMemCreate of the map's size, whatever its granules: the driver's
     * cost is per allocation, not per byte), so an unmap names WHOLE maps:
     * one map, or a run of adjacent maps made by separate calls, each
     * whole; a range that starts or ends inside a map is refused
     * (CCA_ERR_UPSTREAM, nothing changed). The allocator then never unmaps
     * part of a map: its growth rule sizes each map (docs/allocator.md,
     * "Expandable segments") and memory goes back map by map.
     * CCA_VM_PAGES: vm_unmap as above, granule by granule, each granule
     * memory of its own. Any other value: cca_upstream_custom_create
     * refuses the table (CCA_ERR_INVALID_ARGUMENT), with or without the
     * vm ops; either of the two is ignored without them. */
    int vm_backing;
    /* Wait for the work queued on `stream` so far (over CUDA,
     * cudaStreamSynchronize). What pages are given back after: the allocator
     * waits for the streams whose work may still touch the pages it unmaps,
     * not for the whole device. NULL: it calls `synchronize` instead. */
    cca_status (*stream_synchronize)(void *ctx, cca_stream stream);

    /* ---- Host staging memory and copies: optional, all four or none ------
     * What sleep and wake (cca_domain_sleep) are built on: host memory the
     * device copies to and from at full speed (CUDA: pinned, cudaMallocHost)
     * and copies between it and this upstream's device memory. Without them
     * a domain can still sleep with CCA_SLEEP_DISCARD (nothing copied).
     *   - host_alloc: `size` > 0 bytes of host memory, 256-byte aligned;
     *     CCA_ERR_OUT_OF_MEMORY when the host has none. host_free takes back
     *     exactly a pointer and size host_alloc gave.
     *   - copy: `size` bytes from src to dst, one of them memory this
     *     upstream's vm_map or alloc gave (mapped, now) and the other inside
     *     one host_alloc; to_host 1: device -> host, 0: host -> device.
     *     Queued on the upstream's own copy stream (CUDA: cudaMemcpyAsync on
     *     a stream it makes for that), ordered after the copies queued
     *     before it and after nothing else: the caller has waited for the
     *     work that writes the source (sleep waits for its blocks' streams).
     *     It may return before the bytes have moved.
     *   - copy_wait: wait until every copy queued so far on this upstream
     *     is done; its failure (or a copy's, seen only now) is returned,
     *     and a failure too returns only once none of them runs any more
     *     (the caller unmaps or frees what they touch next).
     *     The caller waits before it reads the destination, frees the host
     *     memory, or unmaps either side.
     * The wrapper (cca_upstream_host_alloc, ...) checks arguments and counts
     * host bytes in use, copies and bytes copied. */
    cca_status (*host_alloc)(void *ctx, size_t size, void **ptr);
    cca_status (*host_free)(void *ctx, void *ptr, size_t size);
    cca_status (*copy)(void *ctx, void *dst, const void *src, size_t size, int to_host);
    cca_status (*copy_wait)(void *ctx);
} cca_upstream_ops;
#define CCA_VM_WHOLE_MAPS 0 /* vm_backing (the default): every map one allocation, unmapped whole */
#define CCA_VM_PAGES 1      /* vm_backing: every granule its own memory     */

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
    /* host staging memory and copies (zero for an upstream without them) */
    size_t host_bytes_in_use; /* host_alloc'd, not yet freed               */
    size_t host_bytes_peak;   /* highest host_bytes_in_use                 */
    uint64_t copies;          /* successful copy calls, either way         */
    uint64_t bytes_copied;    /* bytes those copies moved                  */
} cca_upstream_stats;

/* A simulated device of `capacity` bytes over host memory, behaving like a
 * GPU: one range of address space of that size, every allocation placed
 * in it first fit by address (the same calls give the same addresses
 * whatever else the process did); sizes rounded up to the host page, which
 * mem_info counts; freed memory goes back to the OS at once and touching it
 * afterwards faults. mem_info reports capacity minus what every allocator
 * on it holds, so allocators sharing it compete like tenants of one GPU.
 * Events complete at once. Has the vm_* ops (2 MiB granularity, or the
 * largest power of two within a capacity below 2 MiB) over whole maps, and
 * the host and copy ops: host memory mapped for the device (huge pages
 * from 2 MiB; host_free refuses what host_alloc did not give; what
 * was never given back outlives the device, as pinned memory a CUDA
 * upstream gave), a copy is a memcpy queued on
 * the device's copy-engine thread, which copy_wait waits for (a copy from
 * or to an unmapped page faults, as any touch does). That thread blocks
 * every signal but a fault's: the program's handlers never run on it.
 * Errors: CCA_ERR_INVALID_ARGUMENT for a capacity below the host page
 * (0 included: such a device could hold nothing; the message names the
 * page) or above SIZE_MAX / 2;
 * CCA_ERR_OUT_OF_MEMORY when the process cannot reserve that much address
 * space (e.g. 2^62 on a 47-bit space) or host memory is short. *out is
 * NULL on failure.
 * Cost: one mmap of PROT_NONE address space (no memory until used) and
 * three host mallocs (the device's record, its free extents, the wrapper's
 * record). docs/allocator.md, "Upstreams". */
cca_status cca_upstream_host_create(size_t capacity, cca_upstream **out);

/* The same device with the driver's costs: every alloc call (granted or
 * refused) busy-waits alloc_latency_ns and every free free_latency_ns before
 * doing its work, outside the device's own lock (an allocator calling it
 * holds its lock meanwhile, as it does across a cudaMalloc), as cudaMalloc
 * and cudaFree take tens of microseconds (cudaFree also waits for the
 * device); the vm_* ops may also be charged per granule (below). Latencies
 * above CCA_HOST_MAX_LATENCY_NS: CCA_ERR_INVALID_ARGUMENT. */
typedef struct cca_host_options {
    size_t capacity;           /* bytes of device memory, >= host page   */
    uint64_t alloc_latency_ns; /* per upstream alloc; 0 = none (default) */
    uint64_t free_latency_ns;  /* per upstream free;  0 = none (default) */
    /* Virtual memory (the vm_* ops, always present on the simulated
     * device): mapping granularity, a power of two >= the host page, a
     * multiple of CCA_GRANULARITY and at most the capacity (else
     * CCA_ERR_INVALID_ARGUMENT: not one page would fit); 0 =
     * 2 MiB, the usual GPU figure (on a device of less than 2 MiB, the
     * largest power of two within its capacity, at least the host page,
     * so that one page fits). vm_map latency: alloc_latency_ns, vm_unmap:
     * free_latency_ns (once per call, granted or refused; or the call
     * latencies at the end of this struct), plus the two
     * per-granule latencies below for each granule a call maps or unmaps
     * (granted calls only). Physical memory
     * of a map is private anonymous pages mapped MAP_FIXED into the
     * reserved range (MADV_HUGEPAGE: huge pages where the kernel has
     * them, unless host_pages below says small); an unmap (whole maps, or with CCA_VM_PAGES any run of mapped
     * granules) puts inaccessible address space over it, so its pages
     * return to the OS at once, even while the rest of the map stays, and
     * a later touch faults. */
    size_t vm_granularity;
    /* The CUDA upstream makes two driver calls per granule of a map
     * (cuMemCreate, cuMemMap) and one per granule of an unmap (cuMemUnmap),
     * so a map's cost grows with its size, where cudaMalloc's barely does.
     * These busy-wait that much per granule of a granted vm_map / vm_unmap,
     * after the call's own latency, outside the device's lock; 0 = none (the
     * default). Above CCA_HOST_MAX_LATENCY_NS: CCA_ERR_INVALID_ARGUMENT. A
     * call's total wait saturates at UINT64_MAX ns. */
    uint64_t vm_map_granule_latency_ns;
    uint64_t vm_unmap_granule_latency_ns;
    /* CCA_VM_WHOLE_MAPS (0, the default) or CCA_VM_PAGES (else
     * CCA_ERR_INVALID_ARGUMENT): the vm ops' backing (cca_upstream_ops).
     * With whole maps, each map is given back only by a whole unmap, and the two per-granule latencies above are charged once per
     * map mapped or unmapped, whatever its size: the CUDA upstream's
     * cuMemCreate + cuMemMap, and cuMemUnmap, per physical allocation. */
    int vm_backing;
    /* What a vm_map / vm_unmap call itself costs, granted or refused, in
     * place of alloc_latency_ns / free_latency_ns (a VMM call's own part is
     * smaller than a cudaMalloc's: docs/benchmarks.md, "The driver-cost
     * model"); the per-granule latencies above come on top. 0: the call
     * costs alloc_latency_ns / free_latency_ns, as without these fields
     * (to charge nothing per call, give 1 ns). Above CCA_HOST_MAX_LATENCY_NS:
     * CCA_ERR_INVALID_ARGUMENT. */
    uint64_t vm_map_call_latency_ns;
    uint64_t vm_unmap_call_latency_ns;
    /* The host pages under the device's memory, a cost only (placement,
     * capacity and every count are the same either way):
     * CCA_HOST_PAGES_HUGE (0, the default): every map, and every alloc
     * and host alloc of whole 2 MiB pages, is asked to be huge
     * (MADV_HUGEPAGE), as a GPU's page is 2 MiB: one fault, and 2 MiB
     * zeroed, per 2 MiB first touched; cheapest for a user that touches every page (an engine's
     * tensors). CCA_HOST_PAGES_SMALL: never asked, so 4 KiB pages where
     * transparent huge pages are in madvise mode (the kernel's "always"
     * mode makes them huge regardless); cheapest for a user that touches a
     * few bytes per block (ccbench's tags: 4 KiB zeroed, not 2 MiB). Else
     * CCA_ERR_INVALID_ARGUMENT. */
    int host_pages;
} cca_host_options;
#define CCA_HOST_PAGES_HUGE 0  /* host_pages (the default): whole 2 MiB pages asked to be huge */
#define CCA_HOST_PAGES_SMALL 1 /* host_pages: never asked                                       */
#define CCA_HOST_MAX_LATENCY_NS 1000000000ull

/* The same device with the driver's costs (cca_host_options above).
 * Errors: as cca_upstream_host_create, and CCA_ERR_INVALID_ARGUMENT for o
 * NULL, a latency above CCA_HOST_MAX_LATENCY_NS, a bad vm_granularity,
 * vm_backing or host_pages. Cost: as cca_upstream_host_create. */
cca_status cca_upstream_host_create_with(const cca_host_options *o, cca_upstream **out);

/* cudaMalloc / cudaFree / cudaMemGetInfo / cudaDeviceSynchronize /
 * cudaEvent* on `device` (host and copy ops: cudaMallocHost / cudaFreeHost
 * (cca_cuda_options.host_memory: or cudaHostRegister of huge pages),
 * cudaMemcpyAsync on a non-blocking stream of the upstream's own, made on
 * the first copy and destroyed by cca_upstream_destroy, and
 * cudaStreamSynchronize of it), in its primary context (retained here, released
 * by cca_upstream_destroy); each call puts the caller's current context
 * back, and creates none on another device. Has the vm_* ops (the
 * driver's VMM calls) where the device supports virtual memory management.
 * A cleanup step the driver refuses never changes what a call returns: it
 * is logged, one line naming the device, the driver call, its error and
 * what stays behind. The steps: putting the caller's context back (the
 * primary context stays current on the thread), a vm_map's cuMemRelease of
 * each new allocation ("leaked: N bytes of device memory"),
 * cuMemAddressFree of a reservation that could not be recorded (the range
 * stays reserved), cudaEventDestroy of an event whose record failed (it
 * leaks), and cuDevicePrimaryCtxRelease by cca_upstream_destroy or a
 * failed creation (the context stays retained).
 * Errors: CCA_ERR_NO_DEVICE when no GPU is usable, or the library was
 * built without CUDA (cca_last_error() says which); CCA_ERR_INVALID_ARGUMENT
 * for a device number outside [0, device count) when there are devices;
 * CCA_ERR_UPSTREAM when a driver entry point cannot be found or retaining
 * the primary context fails (CCA_ERR_OUT_OF_MEMORY if the driver says out
 * of memory); CCA_ERR_OUT_OF_MEMORY when host memory is short.
 * Cost: driver initialisation on the first call; one context retain. */
cca_status cca_upstream_cuda_create(int device, cca_upstream **out);

/* The same with options. vm_granularity: the page of the vm_* ops, so of
 * expandable segments: every map is a whole number of pages (with
 * CCA_VM_PAGES each page is one physical allocation, cuMemCreate +
 * cuMemMap to map it, cuMemUnmap to give it back; a page costs the driver
 * nearly the same whatever its size, so larger pages map a segment in
 * fewer calls but give memory back in larger steps: docs/tuning.md, "The
 * page"). 0: the driver's minimum granularity (2 MiB on current GPUs), what
 * cca_upstream_cuda_create uses. On a device without virtual memory
 * management it is not checked against the device and has no effect. */
typedef struct cca_cuda_options {
    int device;
    size_t vm_granularity;
    /* CCA_VM_WHOLE_MAPS (0, the default): one cuMemCreate per vm_map, of
     * the map's size (two driver calls and one cuMemSetAccess per map
     * instead of two per page), unmapped only whole
     * (cca_upstream_ops.vm_backing). CCA_VM_PAGES: one cuMemCreate per
     * page, any run of pages can be unmapped. Else
     * CCA_ERR_INVALID_ARGUMENT, before any device is touched. */
    int vm_backing;
    /* The host memory a sleeping domain's copy is kept in (the host_alloc
     * and host_free ops), pinned both ways, so that the copies run at the
     * bus's speed; what differs is how long the pinning takes, which a
     * sleep pays for each chunk of its copy (`ccbench sleep` times both).
     * CCA_HOST_MEMORY_PINNED (0, the default): cudaMallocHost, cudaFreeHost.
     * CCA_HOST_MEMORY_REGISTERED: anonymous memory mapped 2 MiB-aligned and
     * rounded up to 2 MiB, with MADV_HUGEPAGE (huge pages where the kernel
     * has them), faulted in (MADV_POPULATE_WRITE where the kernel has it),
     * then cudaHostRegister; host_free is cudaHostUnregister, then munmap
     * (a refused unregister keeps the mapping: it leaks, and the call
     * fails). Else CCA_ERR_INVALID_ARGUMENT, before any device is touched. */
    int host_memory;
} cca_cuda_options;
#define CCA_HOST_MEMORY_PINNED 0     /* host_memory (the default): cudaMallocHost */
#define CCA_HOST_MEMORY_REGISTERED 1 /* host_memory: mmap'd huge pages + cudaHostRegister */
/* 1 GiB, a size_t (C++: no C cast, which -Wold-style-cast refuses) */
#ifdef __cplusplus
#define CCA_CUDA_MAX_VM_GRANULARITY (static_cast<size_t>(1) << 30)
#else
#define CCA_CUDA_MAX_VM_GRANULARITY ((size_t)1 << 30)
#endif
/* Errors: as cca_upstream_cuda_create, and CCA_ERR_INVALID_ARGUMENT for o
 * NULL, a bad vm_backing or host_memory, or a vm_granularity that is not 0 or a power of
 * two, multiple of CCA_GRANULARITY, at most CCA_CUDA_MAX_VM_GRANULARITY
 * (these before any device is touched), or that is not a multiple of the
 * device's minimum granularity or is larger than the device's memory
 * (cuDeviceTotalMem: "not one page fits"; a driver that cannot say leaves
 * it to the maps), once the device is asked.
 * Cost: as cca_upstream_cuda_create. */
cca_status cca_upstream_cuda_create_with(const cca_cuda_options *o, cca_upstream **out);

/* Wrap a caller's ops table (copied) and context (borrowed: it must
 * outlive the upstream).
 * Errors: CCA_ERR_INVALID_ARGUMENT when ops is NULL or lacks alloc or free,
 * when the three event ops, the five vm ops or the four host and copy ops
 * are not all present or all absent, or when vm_backing is neither CCA_VM_PAGES nor
 * CCA_VM_WHOLE_MAPS; CCA_ERR_OUT_OF_MEMORY when host memory is short.
 * *out is NULL on failure.
 * Cost: one host malloc; no op is called. */
cca_status cca_upstream_custom_create(const cca_upstream_ops *ops, void *ctx, cca_upstream **out);

/* The device's free and total bytes, as the upstream's mem_info reports
 * them. Read *free_bytes and *total_bytes only after CCA_OK: on any failure
 * what they hold is unspecified (the upstream may have written them).
 * Errors: CCA_ERR_UPSTREAM for an upstream without mem_info; else
 * mem_info's own status.
 * Cost: one mem_info call. */
cca_status cca_upstream_mem_info(cca_upstream *u, size_t *free_bytes, size_t *total_bytes);

/* Virtual memory through the upstream (the rules: cca_upstream_ops). */

/* 1 when the upstream has the vm_* ops, else 0 (also for NULL).
 * Errors: none. Cost: O(1). */
int cca_upstream_has_vm(const cca_upstream *u);
/* The upstream's vm_backing (CCA_VM_WHOLE_MAPS or CCA_VM_PAGES);
 * CCA_VM_PAGES for NULL or an upstream without the vm ops.
 * Errors: none. Cost: O(1). */
int cca_upstream_vm_backing(const cca_upstream *u);
/* The mapping granularity; *bytes is 0 on any failure but a NULL argument.
 * Errors: CCA_ERR_UPSTREAM without the vm ops (the message says why where
 * the upstream can: the CUDA upstream names the missing driver function or
 * the device without VMM support), or when the op reports a size that is
 * not a power-of-two multiple of CCA_GRANULARITY; else the op's status.
 * Cost: one vm_granularity call, the first time only (kept). */
cca_status cca_upstream_vm_granularity(cca_upstream *u, size_t *bytes);
/* Reserve, release, map and unmap through the upstream, counted in its
 * stats. *base is NULL after a failed reserve (but a NULL argument).
 * Errors: CCA_ERR_UPSTREAM without the vm ops (as above); the granularity's
 * failure; CCA_ERR_INVALID_ARGUMENT for size 0, or a size or address that
 * is not a multiple of the granularity; then the op's own status (a rule
 * of cca_upstream_ops broken: CCA_ERR_UPSTREAM, nothing changed;
 * CCA_ERR_OUT_OF_MEMORY when the device is full). A vm_reserve base that is
 * NULL, misaligned or past the top of the address space is released and
 * the call is CCA_ERR_UPSTREAM.
 * Cost: one op call each (over CUDA, a map is two driver calls per
 * allocation plus one, an unmap one per allocation: an allocation is the
 * whole map with CCA_VM_WHOLE_MAPS, the default, a granule with
 * CCA_VM_PAGES); the counters under the
 * upstream's own lock. */
cca_status cca_upstream_vm_reserve(cca_upstream *u, size_t size, void **base);
cca_status cca_upstream_vm_release(cca_upstream *u, void *base, size_t size);
cca_status cca_upstream_vm_map(cca_upstream *u, void *addr, size_t size);
cca_status cca_upstream_vm_unmap(cca_upstream *u, void *addr, size_t size);
/* Wait for all work on the device.
 * Errors: the synchronize op's status; CCA_OK when it has none.
 * Cost: one synchronize call. */
cca_status cca_upstream_synchronize(cca_upstream *u);
/* Wait for the work queued on `stream` so far: the stream_synchronize op,
 * or without one the synchronize op (the whole device).
 * Errors: the op's status; CCA_OK when the upstream has neither.
 * Cost: one op call. */
cca_status cca_upstream_stream_synchronize(cca_upstream *u, cca_stream stream);
/* Host staging memory and copies through the upstream (the contract:
 * cca_upstream_ops, "Host staging memory and copies"). has_copy: 1 when the
 * upstream has the four ops, else 0 (also for NULL).
 * Errors: CCA_ERR_UPSTREAM without the ops; CCA_ERR_INVALID_ARGUMENT for a
 * NULL pointer or a size of 0 (*ptr NULL after a failed host_alloc); then
 * the op's own status (host_alloc: CCA_ERR_OUT_OF_MEMORY when the host is
 * short).
 * Cost: one op call each; the counters under the upstream's own lock. */
int cca_upstream_has_copy(const cca_upstream *u);
cca_status cca_upstream_host_alloc(cca_upstream *u, size_t size, void **ptr);
cca_status cca_upstream_host_free(cca_upstream *u, void *ptr, size_t size);
cca_status cca_upstream_copy(cca_upstream *u, void *dst, const void *src, size_t size, int to_host);
cca_status cca_upstream_copy_wait(cca_upstream *u);
/* Copy the upstream's counters (cca_upstream_stats) into *s.
 * Errors: only the shared ones. Cost: O(1) under the upstream's lock. */
cca_status cca_upstream_get_stats(cca_upstream *u, cca_upstream_stats *s);
/* The upstream's name as kept at creation; "(null)" for NULL.
 * Errors: none. Cost: O(1). */
const char *cca_upstream_name(const cca_upstream *u);

/* Destroy, after every allocator using it is destroyed. NULL is a no-op.
 * Errors: none (void). Cost: the destroy op, once. */
void cca_upstream_destroy(cca_upstream *u);

/* Raw access for tenants that do not use an allocator (the "second tenant"
 * in demos, baselines in benchmarks): counted in the upstream's stats.
 * Errors (alloc): CCA_ERR_INVALID_ARGUMENT for a size that is 0 or not a
 * multiple of CCA_GRANULARITY; CCA_ERR_UPSTREAM when the op claims success
 * with no pointer, a pointer off CCA_ALIGNMENT or one whose range passes
 * the top of the address space (given back); else the op's status
 * (CCA_ERR_OUT_OF_MEMORY when full). *ptr is NULL on failure.
 * Errors (free): the op's status.
 * Cost: one op call; the counters under the upstream's own lock. */
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
    int small_pool;         /* small_pool: 0 = small requests use the medium pool
                               (its segments and split rule)             (1) */
    int medium_pool;        /* medium_pool: requests < large_min never use the
                               segments of large requests (1)                     */
    int log_oom;            /* log_oom: log one line per OOM                     (1) */
    int expandable;         /* expandable: segments are reserved address ranges
                               whose pages are mapped as they grow and unmapped
                               when free, where the upstream has the vm ops;
                               elsewhere classic segments (stats: page_size 0;
                               over a GPU without VMM cca_create logs why,
                               once per upstream); 0: classic segments     (1) */
    size_t history;         /* history: keep the last N allocator events (alloc,
                               free, segment and page events, OOMs) in memory
                               for cca_write_snapshot_torch: a count, K/M/G
                               but no byte unit (4K, not 4KB); 0 = off      (0) */
    double expandable_ahead;     /* expandable_ahead: a request served from an
                                    expandable segment's tail also maps this
                                    fraction F of the segment's mapped bytes,
                                    raised so that the call maps at least
                                    20 MiB with the request (small pool:
                                    small_segment), then capped at F x 1 GiB;
                                    0 = map only what requests need (the
                                    least memory, more first-time calls);
                                    [0,1] (docs/tuning.md)     (0.0625) */
    int hold_peak;               /* hold_peak: growth only (refused with
                                    greedy): a request that would raise
                                    reserved bytes above reserved_bytes_peak
                                    first releases cached memory as the OOM
                                    retry does; the peak rises only when
                                    releasing everything cached leaves no
                                    room, and then by what the request needs
                                    (stats: peak_holds)                  (0) */
} cca_config;

/* The compiled-in defaults into *c; does not read the environment. NULL is
 * a no-op. Errors: none (void). Cost: O(options). */
void cca_config_default(cca_config *c);

/* Apply "key:value,key:value" on top of *c, then check the result as
 * cca_config_validate does. Items are separated by commas or newlines
 * (cca_config_print's lines parse as they are); blanks (space, tab, CR)
 * around keys and values are ignored, and so are empty items; a key given
 * more than once takes its last value. Sizes as cca_parse_size; a positive
 * value that rounds down to 0 bytes ("0.1") is refused, as 0 means none or
 * off for several keys. Booleans: 0/1, on/off, yes/no, true/false. All or
 * nothing: on any error *c is unchanged. NULL text: no change, CCA_OK.
 * Errors: CCA_ERR_CONFIG naming the key and the problem (unknown key,
 * invalid or out-of-range value, a rule across options; a value too long
 * to copy when host memory is short); CCA_ERR_INVALID_ARGUMENT for c NULL.
 * Cost: O(text length x options); no lock. */
cca_status cca_config_parse(cca_config *c, const char *text);

/* Apply the CCALLOC_CONF environment variable, if set and not empty, on top
 * of *c, as cca_config_parse.
 * Errors: CCA_ERR_CONFIG, cca_last_error() naming CCALLOC_CONF and the key,
 * *c unchanged. Cost: a getenv and a parse. */
cca_status cca_config_apply_env(cca_config *c);

/* Check every option's range and the rules across options (e.g. small_max
 * <= small_segment; the list: docs/allocator.md, "Options").
 * Errors: CCA_ERR_CONFIG naming the key or rule. Cost: O(options). */
cca_status cca_config_validate(const cca_config *c);

/* Write the options: with_docs 0 = the values of *c as "key:value" lines
 * (they parse back to exactly *c); 1 = each value with its default and
 * documentation (for --help); 2 = the option table as markdown (the table
 * in docs/allocator.md is this output, and a test keeps them equal).
 * Errors: CCA_ERR_INVALID_ARGUMENT for any other with_docs (nothing
 * written); CCA_ERR_IO when a write or the final flush of f failed.
 * Cost: O(options); f is flushed. */
cca_status cca_config_print(const cca_config *c, FILE *f, int with_docs);

/* ------------------------------------------------------------------------ */
/* Allocator lifetime                                                       */
/* ------------------------------------------------------------------------ */

typedef struct cca_allocator cca_allocator;

/* Create an allocator over upstream `u` (borrowed; it must outlive the
 * allocator). An explicit `c` is used as given; with c NULL the defaults
 * plus CCALLOC_CONF (a bad CCALLOC_CONF is logged and the defaults alone
 * used: the call still succeeds and keeps the thread's message).
 * expandable:1 (the default) over an upstream without vm ops gives classic
 * segments, and logs why once per upstream where the upstream can say (the
 * CUDA upstream on a GPU or driver without VMM). The greedy policy reserves its arena here:
 * greedy_bytes, or greedy_fraction of the device's free memory, capped by
 * max_reserved (docs/allocator.md, "Greedy and growth").
 * Errors (*out NULL, nothing held): CCA_ERR_CONFIG for an explicit c that
 * cca_config_validate refuses; CCA_ERR_OUT_OF_MEMORY when host memory is
 * short, the upstream refuses the greedy arena, or the arena comes to 0
 * bytes (greedy_bytes under 512, or expandable with less than one page
 * allowed); when expandable:1 and the upstream's vm_granularity fails, or
 * the greedy arena cannot be sized or reserved for another reason
 * (greedy_fraction over an upstream without mem_info, an upstream error):
 * that status, usually CCA_ERR_UPSTREAM.
 * Cost: a few host mallocs; growth: no upstream call (expandable: one
 * vm_granularity, the first time per upstream); greedy: up to three
 * mem_info (one for greedy_fraction; expandable, one to check the range and
 * one to round a size that is no whole number of pages) and the arena's
 * reservation (classic: one alloc; expandable: a vm_reserve and one vm_map
 * per map). */
cca_status cca_create(const cca_config *c, cca_upstream *u, cca_allocator **out);

/* Return every segment to the upstream and free the allocator. The device
 * is synchronized first when frees are pending or pages of expandable
 * segments are mapped (unmapping does not wait for queued work; freeing a
 * classic segment does). Live blocks are released too. The allocator is
 * freed whatever is returned.
 * Errors, the first that applies:
 *  - CCA_ERR_LIVE_BLOCKS: blocks were still live; a freed block whose
 *    stream events have not completed (that synchronize failed, or an
 *    event still reads incomplete) counts as live; the message counts them;
 *  - the synchronize's status when it failed with pages mapped: no mapped
 *    page is unmapped (queued work may still use it), the pages stay mapped
 *    and their ranges reserved in the upstream (its stats count them),
 *    classic segments are freed, and the message says how many bytes were
 *    left mapped;
 *  - CCA_ERR_UPSTREAM: the upstream refused to take a segment back;
 *  - the synchronize's status when it failed otherwise.
 * Cost: O(segments + blocks + domains); at most one synchronize; one
 * upstream free per classic segment, one vm_unmap per run of mapped pages
 * (whole maps: per map) and one vm_release per range. */
cca_status cca_destroy(cca_allocator *a);

/* The configuration in force (after CCALLOC_CONF and validation) into *c.
 * Errors: only a NULL argument. Cost: O(1), no lock (it never changes). */
cca_status cca_get_config(const cca_allocator *a, cca_config *c);

/* ------------------------------------------------------------------------ */
/* Allocation                                                               */
/* ------------------------------------------------------------------------ */

/* Allocate `size` bytes on stream `s`: the smallest cached free block of
 * the stream that fits (ties: lowest address), split when the remainder is
 * worth keeping; when none fits, new memory from the upstream, then one
 * retry that releases cached memory. The steps, the retry, the hold
 * (hold_peak:1) and greedy: docs/allocator.md, "The life of one
 * cca_alloc". size 0: CCA_OK and *out NULL. *out is NULL on any failure.
 * Errors:
 *  - CCA_ERR_INVALID_ARGUMENT: a size above SIZE_MAX - 512 - the larger
 *    of segment_round and (expandable segments) the page, the bound below
 *    which no rounding can overflow (nothing touched);
 *  - CCA_ERR_OUT_OF_MEMORY (ooms counted, one log line written after the
 *    lock is released, when log_oom:1): a request that can never succeed
 *    (its least segment, which shrinks to a device or max_reserved smaller
 *    than it but never below the request, or its whole pages, over the
 *    device's total, max_reserved, the 32 TiB address budget of expandable
 *    segments, or greedy's arena), at once, nothing released;
 *    the upstream refused and the retry could not make room (what it
 *    released stays released; live blocks never change); a full greedy
 *    arena; host memory short for a block record in an expandable segment;
 *  - any other upstream status (e.g. CCA_ERR_UPSTREAM): returned at once,
 *    no retry, no OOM counted, nothing released.
 * Cost: cached: one lock, one event query per stream with pending frees,
 * a best fit (a bitmap scan and one small B+-tree search), a hash insert;
 * no upstream call. Otherwise: growth, one upstream alloc (expandable: a
 * mem_info, maybe a vm_reserve, one vm_map per run of missing pages), and
 * a mem_info for the device's total while none has answered; the
 * retry, one synchronize when frees are pending (expandable: also with
 * none, unless releasing cannot help; one stream_synchronize per stream
 * that may touch the pages it frees, cca_trim's rule), a free or unmap per
 * released segment or run, and up to two more takes (expandable with
 * frees pending: three, the look for a block once they complete being one);
 * greedy, no upstream alloc but the arena's again after cca_empty_cache,
 * the device total's mem_info until one answers, a synchronize when a full arena has
 * frees pending (expandable: a vm_map for trimmed pages). */
cca_status cca_alloc(cca_allocator *a, size_t size, cca_stream s, void **out);

/* Free a pointer from cca_alloc. NULL is a no-op (CCA_OK; a NULL allocator
 * is still CCA_ERR_INVALID_ARGUMENT). If another stream used the block
 * (cca_record_stream; or any block of a greedy or footprint arena, which
 * goes to any stream: the default stream is taken as ordered against no
 * other, as CUDA's non-blocking streams are), it is reused only after
 * events on those streams complete (docs/allocator.md, "Streams").
 * Errors: CCA_ERR_INVALID_POINTER for a double free, an unknown or an
 * interior pointer, nothing changed; when no event can be recorded and the
 * fallback synchronize fails, that synchronize's status: the pointer is
 * consumed all the same (do not free it again), and its block is reused
 * only after a later synchronize succeeds (trim, empty-cache, OOM retry).
 * Cost: one lock, a hash lookup, a merge with free neighbours and an index
 * insert; no upstream call on one stream; per other user stream (every
 * user stream of an arena block) one event_record and one event_query (a
 * synchronize where events fail). */
cca_status cca_free(cca_allocator *a, void *ptr);

/* Mark a live block as used on stream `s` too: at free it returns to the
 * pool only after events recorded on every such stream have completed (the
 * stream it was allocated on, or one already marked: CCA_OK, no change).
 * Errors: CCA_ERR_INVALID_ARGUMENT for ptr NULL; CCA_ERR_INVALID_POINTER
 * for ptr not a live block (freed, pending, interior, foreign);
 * CCA_ERR_OUT_OF_MEMORY when host memory is short, the block's streams as
 * they were.
 * Cost: one lock, a hash lookup, a scan of the block's streams. */
cca_status cca_record_stream(cca_allocator *a, void *ptr, cca_stream s);

/* The size actually held for a live pointer (rounded, maybe unsplit slack)
 * into *size, written only on success.
 * Errors: CCA_ERR_INVALID_ARGUMENT for ptr NULL; CCA_ERR_INVALID_POINTER
 * for ptr not a live block.
 * Cost: one lock, a hash lookup. */
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
     * and the free bytes of awake domains that stay mapped because they
     * share a page with a live or pending block (part of free_bytes_pinned,
     * and of cached_bytes) */
    size_t pages_unmapped;
    size_t bytes_unmapped;
    size_t free_bytes_trapped;
    /* sleeping domains (cca_domain_sleep) afterwards, and the host memory
     * holding their live blocks; their segments are counted above, pinned
     * by live blocks whose bytes are on the host, not on the device (their
     * free_bytes_pinned: the pages a refused unmap left mapped, if any,
     * which cached_bytes leaves out; none of them free_bytes_trapped: no
     * live block needs a page mapped) */
    size_t asleep_domains;
    size_t host_bytes;
} cca_release_report;

/* Synchronize, complete pending frees, then give memory back until
 * reserved <= keep_bytes or nothing free is left: whole free classic
 * segments largest first (equal sizes: lowest address first) and, with
 * expandable segments, every page lying wholly inside a free block (tails
 * first), then, whatever keep_bytes, the empty address ranges
 * (docs/allocator.md, "Giving memory back" and "Pages, not segments").
 * Classic segments: the whole device is synchronized. Expandable segments:
 * only the streams whose queued work may touch what goes back (the stream
 * of each segment with free mapped pages, each stream a pending free waits
 * on), one stream_synchronize each; the device instead when the upstream
 * has no stream_synchronize, past 16 such streams, or when a free could
 * record no event.
 * report may be NULL; it is filled whenever the lock was taken.
 * Errors, the first that applies (each after releasing what it could):
 *  - CCA_ERR_UPSTREAM: the upstream refused to take a segment or page
 *    back; that memory stays cached, state intact;
 *  - the synchronize's status when it (or a stream's) failed: free classic
 *    segments are released, no page is unmapped, pending blocks stay
 *    reserved;
 *  - CCA_ERR_NOT_READY: the wait succeeded but an event still reads
 *    incomplete: those pending blocks stay reserved.
 * Cost: one synchronize (or one per stream, above); O(segments x log
 * segments) (largest first), plus, for a report, the blocks of the
 * segments live blocks pin; expandable O(blocks); one upstream free per
 * segment released, one vm_unmap per run of pages (whole maps: per map),
 * one vm_release per empty range. */
cca_status cca_trim(cca_allocator *a, size_t keep_bytes, cca_release_report *report);

/* cca_trim(a, 0, report): with no live blocks, reserved_bytes becomes 0.
 * Errors and cost: cca_trim's. */
cca_status cca_empty_cache(cca_allocator *a, cca_release_report *report);

/* ------------------------------------------------------------------------ */
/* Statistics and snapshots                                                 */
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
                              only mapped ones (reserved - allocated); a
                              sleeping domain's count in neither: it serves
                              nothing until its wake                        */
    size_t segments;
    size_t segments_peak;
    size_t largest_free_block; /* expandable: the longest mapped free stretch */
    uint64_t alloc_calls; /* successful cca_alloc calls (size > 0)         */
    uint64_t free_calls;  /* successful cca_free calls (ptr != NULL)       */
    uint64_t upstream_allocs;
    uint64_t upstream_frees;
    uint64_t alloc_retries; /* retries begun: new memory refused (cca_alloc,
                               cca_domain_reserve); counted before any
                               release, whether anything goes back or not */
    uint64_t ooms;          /* CCA_ERR_OUT_OF_MEMORY returned                */
    uint64_t splits;
    uint64_t merges;
    double fragmentation; /* 1 - largest_free_block / cached_bytes; 0 if none */
    /* expandable segments (all 0 with classic ones, vm_backing then
     * CCA_VM_PAGES: they map nothing): */
    size_t page_size;           /* the upstream's mapping granularity        */
    size_t expandable_segments; /* of `segments`                             */
    size_t address_space_bytes; /* address space they reserve                */
    size_t mapped_bytes;        /* mapped in them (part of reserved_bytes)   */
    uint64_t vm_maps;           /* map calls (also in upstream_allocs)       */
    uint64_t vm_unmaps;         /* unmap calls (also in upstream_frees)      */
    uint64_t pages_mapped;      /* pages mapped by those calls, in all       */
    uint64_t pages_unmapped;
    int vm_backing; /* the upstream's: CCA_VM_WHOLE_MAPS (maps of at most
                       128 MiB, given back whole) or CCA_VM_PAGES */
    uint64_t peak_holds; /* hold_peak:1: requests that would have raised
                            reserved_bytes_peak and released cached memory
                            first (not counted in alloc_retries)          */
    size_t asleep_domains; /* domains asleep (cca_domain_sleep), default included */
    size_t host_bytes;     /* host memory their copies hold                  */
} cca_stats;

/* A consistent snapshot of the counters (taken under the allocator's
 * lock). a or s NULL: nothing happens.
 * Errors: none (void); called from inside one of a's upstream ops, *s is
 * all zeros and the thread's message says why.
 * Cost: never reads the live blocks, cheap enough to poll every step:
 * O(domains holding memory x pools x streams + domains asleep) under the
 * lock; with expandable segments, plus the free blocks larger than the
 * longest mapped free stretch, largest first (usually a few per range). */
void cca_get_stats(const cca_allocator *a, cca_stats *s);

/* Set every *_peak to its current value, the domains' too. NULL: nothing
 * happens. Errors: none (void); from inside one of a's upstream ops
 * nothing happens and the thread's message says why.
 * Cost: O(domains) under the lock. */
void cca_reset_peak_stats(cca_allocator *a);

/* Stats as one line of text ("allocated=... reserved=...") and as one JSON
 * object, then a newline; s may be any cca_stats (a fragmentation that is
 * no finite number is JSON's null).
 * Errors (these and every writer below): CCA_ERR_IO when a write or the
 * final flush of f failed (f may hold part of the output), or f's error
 * indicator was already set (an earlier write failed: stdio keeps it until
 * clearerr; this call's output may then be whole). f is the program's
 * stream, written through stdio: a signal handler installed without
 * SA_RESTART that interrupts a write waiting on a full pipe fails it, as
 * it fails the program's own fprintf (the library's own outputs, the log
 * and CCALLOC_TRACE, write such a write again).
 * Cost: one formatted write (the text line: two when page_size is not 0,
 * its expandable part) and a flush; no lock. */
cca_status cca_stats_print(const cca_stats *s, FILE *f);
cca_status cca_stats_write_json(const cca_stats *s, FILE *f);

/* The whole allocator as JSON: config, stats, domains, and every segment in
 * address order (its address, size, domain: its name and, as names need not
 * be unique, "domain_index", its position in "domains" (the default domain
 * 0, then in creation order; the pickle's segment_pool_id); pool, stream,
 * live blocks, and for an expandable one its mapped runs) with its blocks
 * in address order (offset in the segment, size, state, requested bytes).
 * Errors: CCA_ERR_IO.
 * Cost: O(segments x log segments + blocks + domains) under the
 * allocator's lock (the segments sorted through their own records, with no
 * host memory), into host memory; written to f
 * after the lock, so a file that does not drain (a pipe nobody reads yet)
 * stalls this call only; with no host memory for that copy, written to f
 * under the lock instead. */
cca_status cca_write_snapshot_json(const cca_allocator *a, FILE *f);

/* The same state as a Python pickle (protocol 2) of the dict that PyTorch's
 * torch.cuda.memory._snapshot() returns, so that PyTorch's tools open it
 * (torch.cuda._memory_viz, pytorch.org/memory_viz; the mapping field by
 * field: docs/allocator.md, "Snapshots in PyTorch's format"):
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
 * Errors: CCA_ERR_INVALID_ARGUMENT for device not in [0,
 * CCA_SNAPSHOT_MAX_DEVICE], nothing written; CCA_ERR_IO when a write or the
 * flush failed (f holds a partial pickle); CCA_ERR_OUT_OF_MEMORY when host
 * memory is short, nothing written.
 * Cost: as cca_write_snapshot_json, plus the history ring. */
#define CCA_SNAPSHOT_MAX_DEVICE 1023
cca_status cca_write_snapshot_torch(const cca_allocator *a, int device, FILE *f);

/* ------------------------------------------------------------------------ */
/* Memory domains: one owner per model, released whole                     */
/* ------------------------------------------------------------------------ */

/* A DOMAIN is a named owner of segments inside one allocator: its blocks
 * live only in its own segments, so they never pin another domain's
 * memory, and cca_domain_release gives all of it back while other domains
 * keep running. Every allocator has a default domain (NULL in the calls
 * below), which cca_alloc uses. Domains need policy:growth. Cached free
 * memory is the allocator's: trim, empty-cache and the OOM retry release
 * free memory of every domain. The rules: docs/allocator.md, "Memory
 * domains". */
typedef struct cca_domain cca_domain;

#define CCA_DOMAIN_NAME_MAX 63

/* A new, empty domain named `name`: 1..CCA_DOMAIN_NAME_MAX printable ASCII
 * characters without '"', '\\' or ','; names need not be unique. It holds
 * no device memory until something is allocated in it. The handle is
 * opaque (never dereference it) and never given twice in a process: once
 * the domain is destroyed, every call refuses it, whatever was created
 * since; so are handles of other allocators (CCA_ERR_INVALID_ARGUMENT).
 * Errors: CCA_ERR_INVALID_ARGUMENT for a bad name or a greedy allocator (a
 * domain's own up-front arena is cca_domain_reserve);
 * CCA_ERR_OUT_OF_MEMORY when host memory is short. *out NULL on failure.
 * Cost: a host malloc and an insert into the allocator's handle set, under
 * the lock; no upstream call. */
cca_status cca_domain_create(cca_allocator *a, const char *name, cca_domain **out);

/* cca_alloc in domain d (NULL: the default domain): best fit among d's
 * cached blocks only (its arena first, when it has one), growth in d's own
 * segments; the OOM retry may release cached memory of any domain. An
 * explicit argument rather than a per-thread current domain: a model's work
 * often hops threads, and the domain of every block is then visible at the
 * call site. (The framework entry points, whose signatures have no domain,
 * keep one per thread: cca_plug_set_domain.)
 * Errors: cca_alloc's, and CCA_ERR_INVALID_ARGUMENT for a domain that is
 * not a's (even for size 0). Cost: cca_alloc's, plus a handle lookup. */
cca_status cca_alloc_in(cca_allocator *a, cca_domain *d, size_t size, cca_stream s, void **out);

/* The domain a live pointer belongs to into *d (NULL: the default domain);
 * *d is NULL on any failure.
 * Errors: CCA_ERR_INVALID_ARGUMENT for ptr NULL; CCA_ERR_INVALID_POINTER
 * for ptr not a live block.
 * Cost: one lock, a hash lookup. */
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
 * (every mapped page and address range) of domain d (NULL: the default
 * domain) to the upstream; the domain stays usable, empty, with its peak
 * statistics. report may be NULL; on entry only its leaks/leaks_cap are
 * read. flags CCA_DOMAIN_FORCE releases live blocks all the same: their
 * pointers become invalid (a later cca_free of one is
 * CCA_ERR_INVALID_POINTER); only for a caller that knows no kernel will
 * touch that memory again (work queued after this call on such a pointer
 * faults or corrupts another owner's memory).
 * Errors:
 *  - CCA_ERR_INVALID_ARGUMENT: flags other than CCA_DOMAIN_FORCE, a domain
 *    that is not a's;
 *  - the synchronize's status when it failed: nothing released;
 *  - CCA_ERR_LIVE_BLOCKS: live blocks in d without FORCE, or pending blocks
 *    whose events did not complete (even with FORCE): nothing released, the
 *    report lists them (a leak check at unload);
 *  - CCA_ERR_UPSTREAM: the upstream refused a segment or page: that memory
 *    stays in d, cached and indexed (state intact), the rest is released.
 * Cost: one synchronize; O(d's segments and blocks); one upstream free per
 * classic segment, one vm_unmap per run (whole maps: per map) and one
 * vm_release per range. */
cca_status cca_domain_release(cca_allocator *a, cca_domain *d, unsigned flags, cca_domain_report *report);

/* cca_domain_release, then free the handle, only if everything was
 * released; otherwise the domain stays.
 * Errors: cca_domain_release's, and CCA_ERR_INVALID_ARGUMENT for the
 * default domain (d NULL), which cannot be destroyed.
 * Cost: cca_domain_release's. */
cca_status cca_domain_destroy(cca_allocator *a, cca_domain *d, unsigned flags, cca_domain_report *report);

/* FOOTPRINT: reserve `bytes` for d up front, as one arena (classic: one
 * upstream allocation; expandable: one range mapped whole), so that a
 * model whose peak is known runs with no upstream call. bytes is rounded up
 * to CCA_GRANULARITY (expandable: to the page). Requests in d are served
 * from the arena first (best fit at any size, any stream), then from
 * growth. The arena goes with the domain's release, and with trim or
 * empty-cache when it is wholly free. A CCALLOC_TRACE recording gets the
 * reservation only when it succeeds. When the upstream refuses it retries
 * as cca_alloc's OOM retry does (alloc_retries counted, ooms not):
 * docs/allocator.md, "Memory domains".
 * Errors (d has no arena after any of them):
 *  - CCA_ERR_INVALID_ARGUMENT, nothing changed: bytes 0 or above
 *    SIZE_MAX / 2, the greedy policy, a domain that is not a's, an arena
 *    already there;
 *  - CCA_ERR_ASLEEP, nothing changed: d is asleep (cca_domain_sleep);
 *  - CCA_ERR_OUT_OF_MEMORY, nothing changed: more than the device,
 *    max_reserved or (expandable) 32 TiB could ever hold;
 *  - CCA_ERR_OUT_OF_MEMORY after the retry: refused again (what the retry
 *    released stays released), or releasing cannot make room (nothing
 *    released), or (expandable) the retry's synchronize failed (nothing
 *    released, no second reservation; the message names it);
 *  - any other upstream status (CCA_ERR_UPSTREAM, ...): at once, no retry.
 * Cost: one upstream alloc (expandable: a mem_info, a vm_reserve and one
 * vm_map per map), and a mem_info for the device's total while none has
 * answered (a refused one is asked again next time); the retry adds a synchronize, the
 * releases and one more reservation. */
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
    int asleep;           /* 1 while asleep (cca_domain_sleep): its live
                             blocks' bytes on the host, reserved_bytes 0
                             (or what a refused unmap left), cached_bytes,
                             largest_free_block and fragmentation 0 (it
                             serves nothing until the wake) */
    size_t host_bytes;    /* host memory holding its copies while asleep    */
} cca_domain_stats;

/* The stats of domain d (NULL: the default domain) into *s. Peaks are
 * reset by cca_reset_peak_stats.
 * Errors: CCA_ERR_INVALID_ARGUMENT for a domain that is not a's.
 * Cost: what cca_get_stats costs, for d's free blocks only. */
cca_status cca_get_domain_stats(const cca_allocator *a, const cca_domain *d, cca_domain_stats *s);

/* Every domain (the default first, then in creation order) as a JSON array
 * of the stats above, each with "arena_bytes" too (the size of its
 * cca_domain_reserve arena; 0: none); f is flushed.
 * Errors: CCA_ERR_IO when a write or the flush failed.
 * Cost: O(domains) under the lock into host memory, written to f after it
 * as cca_write_snapshot_json (with no host memory for that copy, written
 * to f under the lock). */
cca_status cca_domain_stats_write_json(const cca_allocator *a, FILE *f);

/* SLEEP AND WAKE: a domain's device memory given back while its blocks stay
 * live, and restored at the same addresses (docs/allocator.md, "Sleep and
 * wake"). Needs expandable segments (an upstream with the vm ops,
 * expandable:1): a sleeping domain keeps its address ranges reserved, so
 * every pointer into it stays valid for after the wake, while none of its
 * pages is mapped (on the simulated device a touch faults). The rules:
 *  - sleep waits for the work of d's blocks (a stream_synchronize per
 *    stream that used them or d's segments, and per stream with pending
 *    frees; the device past 16 streams or without the op), completes the
 *    pending frees, copies each live block's bytes (its requested size
 *    rounded up to CCA_GRANULARITY: never free space nor slack) into host
 *    memory (host_alloc: pinned on CUDA; chunks of up to 16 MiB of
 *    consecutive blocks, a larger block in one of its own), waits for the
 *    copies, then unmaps every mapped page of d (free and live alike): the
 *    device's used memory falls by all of d's reserved bytes, and the host
 *    holds its live bytes (no staging buffer beyond them);
 *  - CCA_SLEEP_DISCARD copies nothing: the contents are undefined after the
 *    wake (caches, activations); it needs no copy ops;
 *  - while asleep: cca_alloc / cca_alloc_in in d is refused
 *    (CCA_ERR_ASLEEP, the message names the domain; size 0 is still CCA_OK
 *    and NULL); cca_free of its blocks is allowed (the block becomes free
 *    and its copy is dropped; a chunk's host memory goes back with the
 *    last of its blocks, so the host holds the live bytes plus, per chunk
 *    partly freed, less than 16 MiB; the rest goes at the wake; a
 *    host_free refused is logged as at the wake, below);
 *    cca_record_stream, cca_block_size, cca_domain_of work; trim,
 *    empty-cache and the OOM retry find nothing of d to unmap, and give
 *    back a range all of whose blocks were freed; cca_domain_release and
 *    cca_domain_destroy work as for an awake domain (live blocks refuse
 *    them unless FORCE) and free the host memory when they go ahead;
 *    cca_domain_reserve is refused (CCA_ERR_ASLEEP); cca_destroy frees it;
 *  - wake maps the pages under d's live and pending blocks again (not its
 *    free space: later allocations map that as usual), copies the bytes
 *    back, waits, frees the host memory; every address is unchanged;
 *  - Stats: cca_domain_stats.asleep and host_bytes, cca_stats.asleep_domains
 *    and host_bytes, cca_release_report.asleep_domains and host_bytes; the
 *    JSON writers say "asleep".
 * Thread safety: each call holds the allocator's lock throughout, copies
 * included, as every other call. */
#define CCA_SLEEP_DISCARD 1u /* sleep without copying: contents undefined after the wake */

typedef struct cca_sleep_report {
    size_t blocks;         /* sleep: live blocks copied (or discarded) out;
                            * wake: the blocks the sleep recorded, those
                            * freed while asleep included (not copied back) */
    size_t bytes_copied;   /* live bytes copied out (sleep) or back (wake)   */
    size_t bytes_unmapped; /* device memory given back (sleep)               */
    size_t bytes_mapped;   /* device memory mapped again (wake)              */
    size_t host_bytes;     /* host memory holding the copies (sleep: taken;
                              wake: given back)                             */
} cca_sleep_report;

/* Put domain d (NULL: the default domain) to sleep, as above. report may be
 * NULL; it is zeroed first.
 * Errors:
 *  - CCA_ERR_INVALID_ARGUMENT: flags other than CCA_SLEEP_DISCARD, a domain
 *    that is not a's; nothing changed;
 *  - CCA_ERR_UPSTREAM, nothing changed: classic segments (expandable:0, or
 *    an upstream without the vm ops: the message says which), or no
 *    DISCARD and an upstream without the host and copy ops;
 *  - a stream_synchronize's or the synchronize's status: nothing changed
 *    (awake; pending frees as they were);
 *  - CCA_ERR_NOT_READY: a freed block of d still waits on stream events
 *    after the wait; nothing changed;
 *  - CCA_ERR_OUT_OF_MEMORY: host memory short (host_alloc or the record);
 *    nothing changed;
 *  - a copy's or copy_wait's status: nothing changed (the host memory is
 *    given back, d awake with its bytes on the device);
 *  - CCA_ERR_UPSTREAM: an unmap refused: d IS asleep (its bytes on the
 *    host), the refused pages stay mapped and counted in reserved_bytes,
 *    the message says how many bytes; the other pages are unmapped.
 * A domain asleep already: CCA_OK, nothing copied (CCA_SLEEP_DISCARD ignored;
 * other flags refused as above); pages a refused unmap left mapped are
 * unmapped now (report: bytes_unmapped).
 * Cost: the waits; O(d's blocks + d's segments x log segments + pages /
 * 64); one host_alloc per chunk (up to 16 MiB of consecutive blocks, or one
 * larger block), one copy per live block, one copy_wait, one vm_unmap per
 * run (whole maps: per map). */
cca_status cca_domain_sleep(cca_allocator *a, cca_domain *d, unsigned flags, cca_sleep_report *report);

/* Wake domain d (NULL: the default domain), all or nothing. A domain awake:
 * CCA_OK, nothing done. report may be NULL; it is zeroed first.
 * Errors (after any of them d is asleep, its host copy intact, nothing of
 * this call left mapped, and reserved_bytes no higher than before: pages
 * an earlier refused unmap left mapped may go with this call's. Only
 * should the upstream refuse to unmap this call's pages again do they stay
 * mapped, counted in reserved_bytes, which then grows by them, as after a
 * refused unmap at sleep; the next cca_domain_sleep gives them back):
 *  - CCA_ERR_INVALID_ARGUMENT: a domain that is not a's;
 *  - CCA_ERR_OUT_OF_MEMORY before anything is mapped: the pages needed
 *    pass max_reserved, or the device's free memory (mem_info) is short,
 *    even after the allocator's cached memory (every domain's) was
 *    released as an allocation's OOM retry releases it (first the
 *    shortfall, then all of it; nothing when releasing cannot make room:
 *    the cap or a tenant holds the rest; under hold_peak:1 held as a
 *    request is, the reserved peak a cap while something is cached): the
 *    message says how many bytes are needed, free, and missing (and why
 *    the cache was kept when the wait for its work failed); or host
 *    memory short for the list of pages;
 *  - a vm_map's status (CCA_ERR_OUT_OF_MEMORY when the device refused:
 *    another tenant took memory since, or no mem_info to ask): what this
 *    call mapped is unmapped;
 *  - a copy's or copy_wait's status: what this call mapped is unmapped.
 * A refused host_free after the copies is logged and the wake stands:
 * CCA_OK; the memory stays with the upstream (its host_bytes_in_use). One
 * line per run of refusals of d's copy, not one per chunk: a lost device
 * that refuses every chunk is said once, a later refusal after a chunk
 * taken back again.
 * Cost: O(d's blocks + pages / 64); one mem_info (short, per pass of the
 * release, two passes at most: a mem_info asking whether releasing can
 * help, the wait, the release and one more mem_info); one vm_map per run
 * of missing pages (whole maps: per map of at most 128 MiB); one copy per
 * live block; one copy_wait; one host_free per chunk. */
cca_status cca_domain_wake(cca_allocator *a, cca_domain *d, cca_sleep_report *report);

/* Every domain to sleep, the default first, then in creation order (the
 * whole allocator's device memory back to the device, every address
 * kept). All or nothing: a domain that refuses (any error of
 * cca_domain_sleep that leaves it awake) wakes again the domains this call
 * put to sleep (their room was just given back; should one not wake, it
 * stays asleep and the message says so), and its error is returned, the
 * domain named; the report is then zeros. A domain woken so has the pages
 * under its live blocks mapped again, not its cached ones: reserved_bytes
 * may be lower than before the call, never higher. With CCA_SLEEP_DISCARD (no copy
 * to wake from) every domain's waits come first (its work, its freed
 * blocks' events): a refusal there discards nothing; one after it (host
 * memory for a domain's record) wakes the domains already discarded with
 * undefined contents, and the message says so. A refused unmap leaves its
 * domain asleep and the call goes on with the others: CCA_ERR_UPSTREAM at
 * the end.
 * Domains asleep already stay so. report may be NULL.
 * Errors: cca_domain_sleep's (flags and classic segments before anything
 * changes); CCA_ERR_OUT_OF_MEMORY when host memory is short for the list.
 * Cost: cca_domain_sleep's for each domain, under one lock. */
cca_status cca_sleep(cca_allocator *a, unsigned flags, cca_sleep_report *report);

/* Wake every sleeping domain, in the same order. The pages of all of them
 * are counted first and max_reserved and the device's free memory asked
 * once (short: the cache released as for cca_domain_wake, then asked
 * again): short still, CCA_ERR_OUT_OF_MEMORY saying how many bytes are
 * missing and nothing is woken. A refusal after that (a map refused all the same, a
 * copy) stops there: the domains woken before it stay awake, it and the
 * rest stay asleep with their host copies, and the message names it and
 * counts those woken; call again once the cause is gone. No domain asleep:
 * CCA_OK. report may be NULL.
 * Errors: cca_domain_wake's. Cost: cca_domain_wake's for each, one lock. */
cca_status cca_wake(cca_allocator *a, cca_sleep_report *report);

/* ------------------------------------------------------------------------ */
/* Tracing (CCALLOC_TRACE=file.csv records every alloc, free and release)   */
/* ------------------------------------------------------------------------ */

/* Write a phase mark ("load:resnet50") into the trace, in order with the
 * allocator's events, so that a replay reports reserved memory at each
 * phase; a mark is a checkpoint: the recording is flushed to its file.
 * When the process is not tracing: CCA_OK, no-op (a bad name is refused
 * all the same, below). The allocator calls that
 * record events cannot fail for the trace: a write that fails (a full
 * disk) stops the recording there, the file cut back to its last whole
 * line so that it reads back up to that point, and is said once in the
 * log, when the last allocator using it is destroyed; no later section is
 * opened. The file is the one CCALLOC_TRACE named at the first opening
 * (relative: to the working directory then; %p in it is the process's id,
 * %% one '%', any other '%' refused as an opening is, below, and so is a
 * path host memory is too short to expand): later sections
 * go to it whatever chdir or setenv did since. A regular file another process is
 * recording to (one CCALLOC_TRACE in two processes: it holds a lock on the
 * file while it is open; a device such as /dev/null is shared, never
 * locked) and a FIFO that no process reads are refused when an allocator
 * opens them (the first, or the first of a later section), as is an
 * opening the system refuses (no descriptor left, a directory): logged
 * once, and the recording stops for the process as after a failed write
 * (no later allocator opens the file: a trace never reads as whole with a
 * section missing, and a file another process held is never emptied once
 * it lets go); the file's descriptor is never 0, 1 or 2, even in a
 * program that closed them; a file another process wrote to between two
 * sections stops the recording (logged; that trace is left whole); a pipe whose reader
 * goes away raises SIGPIPE at the next write unless the program ignores it
 * (then the write fails and is said as above), and so does a write past
 * the process's file-size limit (RLIMIT_FSIZE) raise SIGXFSZ, which kills
 * by default (ignored: EFBIG, said as a full disk). The library never
 * changes a signal's disposition: that is the program's business.
 * Errors: CCA_ERR_INVALID_ARGUMENT for a name that is not 1..CCA_MARK_MAX
 * printable ASCII characters (0x20..0x7e) without ',' or '"'; CCA_ERR_IO
 * when the recording could not be written (a full disk; it stopped at the
 * first failed write, and every later mark says so too while any
 * allocator that shares the recording is alive, one created since
 * included; an allocator created once they are all destroyed records
 * nothing, and its marks are no-ops).
 * Cost: the allocator's lock and the trace's lock, one line and a flush. */
#define CCA_MARK_MAX 63
cca_status cca_trace_mark(cca_allocator *a, const char *name);

/* Whether CCALLOC_TRACE was opened for a as asked, at cca_create: CCA_OK
 * when it was unset or empty, when a is recording, and when a records
 * nothing by design (a child forked from a recording process, a recording
 * stopped at the trace format's limits or, for an allocator created once
 * every one that shared it was destroyed, by a failed write). CCA_ERR_IO
 * when a's own opening of the file was refused, or an earlier refused
 * opening had stopped the recording for the process (see cca_trace_mark:
 * a missing directory, a directory, no descriptor left, a FIFO nobody
 * reads, another process's lock or its trace written between sections, a
 * '%' other than %p or %%, host memory short for the path), the message
 * the log line's ("cca_trace_status:
 * not tracing: cannot open for writing (No such file or directory):
 * '/no/such/dir/t.csv'", the last refused opening's). A write that fails
 * later is cca_trace_mark's to say. It changes nothing: a refused opening
 * leaves a working allocator whose marks are no-ops, for a program to go
 * on without its trace or to fail for it (ccrun exits 1). Errors:
 * CCA_ERR_INVALID_ARGUMENT for a NULL allocator. Cost: the trace's lock
 * when refused, else none. */
cca_status cca_trace_status(const cca_allocator *a);

/* Walk every internal invariant (docs/allocator.md, "Invariants": blocks
 * tile each segment, no two free neighbours, index, stats, streams, pages
 * and domains agree).
 * Errors: CCA_ERR_INVARIANT, cca_last_error() naming the broken invariant
 * by its id ("I2: two neighbouring free blocks").
 * Cost: O(blocks + segments + pages / 64 + pending waits + domains x
 * pools x streams) under the lock, no host memory: for tests. */
cca_status cca_check_invariants(const cca_allocator *a);

/* ------------------------------------------------------------------------ */
/* Framework entry points (PyTorch's CUDAPluggableAllocator, Python)        */
/* ------------------------------------------------------------------------ */

/* One allocator per device number, created on the first call that names
 * the device (thread-safe: racing first calls create one), kept until
 * cca_plug_reset or the end of the process (no destructor runs at exit).
 *  - config: cca_plug_configure's conf, else the defaults + CCALLOC_CONF (a
 *    bad CCALLOC_CONF is logged and the defaults kept, as in cca_create);
 *    both environment variables are read when each device is made, so a
 *    device made after they changed follows the new values;
 *  - upstream: cca_plug_configure's, else CCALLOC_PLUG_UPSTREAM, else
 *    "cuda": the CUDA device `device`. "cuda:KEY=VALUE[,KEY=VALUE]" sets
 *    its cca_cuda_options: vm_granularity=SIZE (the page of its expandable
 *    segments, a power of two from CCA_GRANULARITY to
 *    CCA_CUDA_MAX_VM_GRANULARITY, K/M/G suffixes) and
 *    vm_backing=pages|whole_maps (CCA_VM_PAGES / CCA_VM_WHOLE_MAPS) and
 *    host_memory=pinned|registered (CCA_HOST_MEMORY_PINNED /
 *    CCA_HOST_MEMORY_REGISTERED), each
 *    key at most once, in any order, no blanks, no empty key or value,
 *    no trailing comma (e.g. "cuda:vm_granularity=32M,vm_backing=whole_maps");
 *    anything else is CCA_ERR_CONFIG, and a page the device refuses fails
 *    the device's creation with CCA_ERR_INVALID_ARGUMENT.
 *    "host[:CAPACITY[:DEVICES]]" (default 1G and 1) gives each device
 *    number below DEVICES a simulated device of its own of CAPACITY bytes
 *    (at least the host page: a smaller one is CCA_ERR_CONFIG). CAPACITY
 *    is a size as cca_parse_size reads it, DEVICES a whole number from 1
 *    to CCA_PLUG_MAX_DEVICES: both decimal, any leading zeros allowed
 *    ("host:1G:010" is ten devices), as every number of the library's
 *    texts; so is vm_granularity's SIZE.
 *    Only ever chosen explicitly: with "cuda" and no GPU (or a build
 *    without CUDA) there is no fallback;
 *  - a device whose creation failed (no GPU, device number past the count,
 *    bad CCALLOC_PLUG_UPSTREAM) is logged once and stays failed until
 *    cca_plug_reset: every later call on it fails at once with the same
 *    status and message;
 *  - fork() is safe at any time, as for every allocator: the child can use
 *    the simulated devices it inherits.
 * Usage from Python: ccalloc.torch.enable() (docs/python.md). */
#define CCA_PLUG_MAX_DEVICES 64

/* PyTorch's alloc signature (`stream` is a cudaStream_t): cca_alloc on the
 * device's allocator with `stream` passed through; cca_alloc_in when this
 * thread has a current domain for the device (cca_plug_set_domain). size 0
 * on a device in range: NULL, no log, no message, nothing created
 * (PyTorch's own allocator gives an empty tensor a null pointer too); a
 * device out of range is refused at any size, size 0 included (below).
 * Errors: NULL, never an abort, with cca_last_error() set on this thread
 * and one log line: device < 0 or >= CCA_PLUG_MAX_DEVICES (logged every
 * time), a device that cannot be created (logged once, when it failed),
 * out of memory (logged by the allocator when log_oom:1, the default), any
 * other cca_alloc failure, the thread's current domain destroyed since it
 * was set (CCA_ERR_INVALID_ARGUMENT). The message of an out-of-memory is
 * cca_alloc's own, and its one log line the allocator's (none with
 * log_oom:0); every other failure's message begins "cca_plug_alloc of N
 * bytes on device D" (plus " in this thread's domain P" with a domain).
 * Cost: two atomic loads, a thread-local read and cca_alloc's (or
 * cca_alloc_in's); the first call on a device
 * creates its upstream and allocator under the plug's lock. */
void *cca_plug_alloc(size_t size, int device, void *stream);

/* PyTorch's free signature: cca_free on the device's allocator. size and
 * stream are ignored (the allocator knows the block's size and the streams
 * that used it). NULL: no-op.
 * Errors: none returned (void): a device out of range
 * (CCA_ERR_INVALID_ARGUMENT), a device with no allocator
 * (CCA_ERR_INVALID_POINTER), or any cca_free failure (a pointer that is not
 * a live block of that device's allocator: double free, foreign or
 * interior pointer, another device's block): nothing changes,
 * cca_last_error() is set, one log line.
 * Cost: one atomic load and cca_free's. */
void cca_plug_free(void *ptr, size_t size, int device, void *stream);

/* Choose, before the first call that creates a device, the upstream text
 * ("cuda[:...]" or "host[:CAPACITY[:DEVICES]]"; NULL: CCALLOC_PLUG_UPSTREAM
 * or "cuda") and the allocator config ("key:value,..." as
 * cca_config_parse; NULL: defaults + CCALLOC_CONF). Replaces any earlier
 * configure.
 * Errors: CCA_ERR_CONFIG for a bad text of either (nothing changes);
 * CCA_ERR_INVALID_ARGUMENT once a device has been created (or its creation
 * tried) since the last reset.
 * Cost: the parses, and the plug's lock. */
cca_status cca_plug_configure(const char *upstream, const char *conf);

/* The allocator cca_plug_alloc uses for `device`, created now if it was
 * not yet (for stats, trim, empty-cache, snapshots and domains through the
 * ordinary calls; do not cca_destroy it). *out NULL on failure.
 * Errors: as cca_plug_alloc would fail: CCA_ERR_INVALID_ARGUMENT for a
 * device out of range, or the device's creation failure
 * (CCA_ERR_NO_DEVICE, CCA_ERR_CONFIG, ...).
 * Cost: one atomic load; a creation the first time. */
cca_status cca_plug_get_allocator(int device, cca_allocator **out);

/* The upstream under that allocator (for cca_upstream_mem_info and
 * cca_upstream_get_stats). Do not destroy it.
 * Errors and cost: cca_plug_get_allocator's. */
cca_status cca_plug_get_upstream(int device, cca_upstream **out);

/* The calling thread's CURRENT DOMAIN for `device`: from now on every
 * cca_plug_alloc on this thread for that device allocates in d
 * (cca_alloc_in), so a framework that calls cca_plug_alloc with no domain
 * (PyTorch) puts a model's tensors in the model's domain, and
 * cca_domain_release returns that model's memory while other domains'
 * blocks stay. d NULL: the default domain again (plain cca_alloc), as for
 * a thread that never called this. previous (may be NULL) receives the
 * thread's domain for the device before the call, for a restore:
 *     cca_domain *prev;
 *     cca_plug_set_domain(0, model_a, &prev);  ...load model A...
 *     cca_plug_set_domain(0, prev, NULL);
 * The rules:
 *  - per thread and per device: other threads, and this thread's
 *    allocations on other devices, are not affected. Work a framework does
 *    on threads of its own (PyTorch's autograd runs backward() on a thread
 *    per device) goes to those threads' domains (the default);
 *  - cca_plug_free and cca_free find any block by its pointer, whatever the
 *    thread's current domain (a block freed under another domain, or on
 *    another thread, goes back to its own domain);
 *  - d must be a live domain of the device's allocator
 *    (cca_plug_get_allocator(device)), checked here. A domain destroyed
 *    after it was set stays set: every cca_plug_alloc on that thread and
 *    device then fails (NULL, logged, "not one of this allocator's") until
 *    the thread sets another; set it back before destroying it;
 *  - cca_plug_reset returns every thread's domains to the default;
 *  - a child of fork() keeps the forking thread's domains (the domains are
 *    the child's copy).
 * Errors (nothing changed, *previous not written):
 * CCA_ERR_INVALID_ARGUMENT for a device out of range, a d not NULL on a
 * device whose allocator does not exist (no domain can be its; none is
 * created here; d NULL needs no allocator), and a d that is not one of
 * the device's allocator's live domains (another device's, destroyed, or
 * no domain).
 * Cost: d NULL: a thread-local write and one atomic load; else also one
 * atomic load and the allocator's lock for a handle lookup (O(1)
 * expected). cca_plug_alloc then pays a thread-local read and one more
 * atomic load, and cca_alloc_in's handle lookup when d is not NULL. */
cca_status cca_plug_set_domain(int device, cca_domain *d, cca_domain **previous);

/* The calling thread's current domain for `device` into *out (NULL: the
 * default domain; also after cca_plug_reset). *out NULL on failure.
 * Errors: CCA_ERR_INVALID_ARGUMENT for a device out of range.
 * Cost: a thread-local read and one atomic load. */
cca_status cca_plug_get_domain(int device, cca_domain **out);

/* For tests: destroy every device's allocator and upstream and forget
 * cca_plug_configure and every recorded failure, as at load. Not while
 * another thread is in a cca_plug_* call, nor while one uses an allocator
 * or upstream that cca_plug_get_allocator / cca_plug_get_upstream
 * returned: those handles are destroyed here (the next call on the device
 * creates new ones).
 * Every thread's current domains (cca_plug_set_domain) go back to the
 * default.
 * Errors: CCA_ERR_LIVE_BLOCKS naming the first device with live (or
 * pending) blocks, and nothing changes; else the first cca_destroy
 * failure, prefixed with its device (everything is reset all the same).
 * Cost: a cca_get_stats and a cca_destroy per device, under the plug's
 * lock. */
cca_status cca_plug_reset(void);

#ifdef __cplusplus
}
#endif

#endif /* CCALLOC_H */
