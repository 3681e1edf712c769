/*
 * device.c — the engine's device: which one it is, every byte the engine
 * takes from it, copies to and from it, and the CUDA context.
 *
 *     ccr_dev_alloc(e, m, bytes, tag)          ccr_dev_upload / ccr_dev_download
 *       └─ cca_alloc_in(m's domain | default)    ├─ simulated: memcpy
 *            └─ timeline row: alloc | oom        └─ CUDA: cck_copy_* on the
 *     ccr_dev_free(e, m, p, tag)                      context's stream (made on
 *       └─ cca_free ─ timeline row: free              first use, with its cuBLAS
 *                                                     workspace from the allocator)
 *
 * Rules:
 * - Owns: device names (ccr_device_parse); opening a device, CUDA or the
 *   host-simulated one (ccr_device_open*); the engine's device identity
 *   (kind, cuda_device, "host" / "cuda:N") and its figures
 *   (ccr_engine_device_info); the most of it the allocator can ever hold
 *   (ccr_engine_limit); ccr_dev_alloc/free; host <-> device copies; the
 *   cuBLAS context and its workspace (ccr_engine_ensure_context).
 * - The limit is the smallest of the device's total (read once at engine
 *   creation), max_reserved when set, and the greedy arena (reserved at
 *   cca_create, engine.c): greedy never grows past its arena, even after an
 *   empty-cache gave it back. Batch checks (infer.c) and sidecar checks
 *   (footprint.c) measure against it.
 * - Every device byte the runtime uses goes through ccr_dev_alloc and
 *   ccr_dev_free: the one place that picks the domain (the model's, or the
 *   default domain for the engine's own memory), writes the timeline row
 *   and words the out-of-memory message with the device's state.
 * - AUTO opens CUDA when a GPU answers, else the simulated device; CUDA
 *   never falls back. A page size or backing the device refuses is the
 *   caller's error, the same with or without a GPU: never a silent fall-back
 *   to the simulated device. So is a simulated capacity it refuses (0,
 *   below the host page, beyond the address space): CCR_ERR_INVALID_ARGUMENT,
 *   as every setting of the caller's; CCR_ERR_DEVICE is a device that failed.
 * - A borrowed upstream is CUDA when it names itself "cuda:N" exactly (N
 *   decimal digits that fit an int, nothing after: ccr_device_name_cuda, the
 *   one rule, ccrun's demo uses it too), else simulated.
 * - The context exists on CUDA only, from the first copy or kernel until
 *   ccr_engine_release (engine.c) destroys it and frees its workspace; its
 *   workspace lives in the default domain.
 * - Calls nothing in engine.c: the engine calls down to this file.
 * - Costs: alloc/free: one cca_alloc_in / cca_free, plus one cca_get_stats
 *   and one mem_info per event when a timeline is set (and, for an alloc or
 *   a free, a cca_block_size for the row's bytes); a refused allocation adds both for
 *   its message, and a domain stats read for a model's; the limit: one
 *   cca_get_config; a copy: one
 *   memcpy (simulated) or one cck_copy_to_device / cck_copy_to_host (CUDA); opening: a GPU count and one
 *   CUDA upstream create (CUDA, AUTO), then one host upstream create when
 *   the device is the simulated one.
 */
#include <limits.h>
#include <stdbool.h>
#include <string.h>

#include "internal.h"

ccr_status ccr_device_parse(const char *name, ccr_device_kind *out) {
    if (!name || !out)
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "device name is NULL");
    if (!strcmp(name, "auto"))
        *out = CCR_DEVICE_AUTO;
    else if (!strcmp(name, "cuda"))
        *out = CCR_DEVICE_CUDA;
    else if (!strcmp(name, "host"))
        *out = CCR_DEVICE_HOST;
    else
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "unknown device '%s' (auto|cuda|host)", name);
    return CCR_OK;
}

int ccr_device_name_cuda(const char *name, int *index) {
    static const char prefix[] = "cuda:";
    if (!name || strncmp(name, prefix, sizeof prefix - 1))
        return 0;
    const char *d = name + sizeof prefix - 1;
    if (!*d)
        return 0;
    long long v = 0;
    for (; *d; d++) {
        if (*d < '0' || *d > '9')
            return 0;
        v = v * 10 + (*d - '0');
        if (v > INT_MAX) /* checked every digit: v never passes 10 * INT_MAX + 9 */
            return 0;
    }
    if (index)
        *index = (int)v;
    return 1;
}

ccr_status ccr_device_open(ccr_device_kind kind, int cuda_device, size_t host_capacity, cca_upstream **out,
                           int *simulated) {
    return ccr_device_open_paged(kind, cuda_device, host_capacity, 0, out, simulated);
}

ccr_status ccr_device_open_paged(ccr_device_kind kind, int cuda_device, size_t host_capacity, size_t vm_granularity,
                                 cca_upstream **out, int *simulated) {
    ccr_device_options o = {kind, cuda_device, host_capacity, vm_granularity, CCA_VM_WHOLE_MAPS};
    return ccr_device_open_with(&o, out, simulated);
}

ccr_status ccr_device_open_with(const ccr_device_options *o, cca_upstream **out, int *simulated) {
    if (!out)
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "device output is NULL");
    *out = NULL;
    if (!o)
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "device options are NULL");
    if (o->vm_backing != CCA_VM_WHOLE_MAPS && o->vm_backing != CCA_VM_PAGES)
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "vm_backing %d is neither CCA_VM_WHOLE_MAPS (0) nor CCA_VM_PAGES (1)",
                        o->vm_backing);
    if (o->kind != CCR_DEVICE_AUTO && o->kind != CCR_DEVICE_CUDA && o->kind != CCR_DEVICE_HOST)
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT,
                        "device kind %d is none of CCR_DEVICE_AUTO (0), CCR_DEVICE_CUDA (1), CCR_DEVICE_HOST (2)",
                        (int)o->kind);
    ccr_device_kind kind = o->kind;
    int cuda_device = o->cuda_device;
    size_t host_capacity = o->host_capacity, vm_granularity = o->vm_granularity;
    if (kind != CCR_DEVICE_HOST) {
        int count = 0;
        cck_cuda_device_count(&count);
        /* the page first, whatever the machine: a bad one is refused the same
         * with or without a GPU, not turned into a simulated device */
        cca_cuda_options co = {.device = cuda_device, .vm_granularity = vm_granularity, .vm_backing = o->vm_backing};
        cca_status cs = cca_upstream_cuda_create_with(&co, out);
        if (cs == CCA_ERR_INVALID_ARGUMENT && (count == 0 || (cuda_device >= 0 && cuda_device < count)))
            return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "device cuda:%d: %s", cuda_device, cca_last_error());
        if (cs == CCA_OK) {
            if (simulated)
                *simulated = 0;
            return CCR_OK;
        }
        *out = NULL;
        if (kind == CCR_DEVICE_CUDA)
            return ccr_fail(CCR_ERR_DEVICE, "device cuda:%d not available (%d GPU(s) found%s%s)", cuda_device, count,
                            count > 0 ? ": " : "", count > 0 ? cca_last_error() : "");
    }
    if (host_capacity == 0)
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "simulated device capacity is 0");
    cca_host_options ho = {.capacity = host_capacity, .vm_granularity = vm_granularity, .vm_backing = o->vm_backing};
    cca_status hs = cca_upstream_host_create_with(&ho, out);
    if (hs == CCA_ERR_INVALID_ARGUMENT) /* from the settings passed: a capacity, a page, a backing */
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "simulated device: %s", cca_last_error());
    if (hs != CCA_OK)
        return ccr_fail(CCR_ERR_DEVICE, "cannot create the simulated device: %s", cca_last_error());
    if (simulated)
        *simulated = 1;
    return CCR_OK;
}

ccr_status ccr_engine_open_device(ccr_engine *e, const ccr_engine_options *o) {
    e->own_up = o->upstream == NULL;
    e->up = o->upstream;
    int simulated = 1;
    if (!e->up) {
        ccr_device_options d = {o->device, o->cuda_device, o->host_capacity, o->vm_granularity, o->vm_backing};
        ccr_status st = ccr_device_open_with(&d, &e->up, &simulated);
        if (st != CCR_OK)
            return st;
        e->cuda_device = o->cuda_device;
    } else {
        /* a borrowed device: the CUDA upstream names itself "cuda:N" */
        simulated = !ccr_device_name_cuda(cca_upstream_name(e->up), &e->cuda_device);
    }
    e->kind = simulated ? CCR_DEVICE_HOST : CCR_DEVICE_CUDA;
    if (simulated)
        e->cuda_device = 0;
    if (simulated)
        snprintf(e->devname, sizeof e->devname, "host");
    else
        snprintf(e->devname, sizeof e->devname, "cuda:%d", e->cuda_device);
    return CCR_OK;
}

ccr_status ccr_engine_device_info(ccr_engine *e, ccr_device_info *out) {
    if (!e || !out)
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "engine or output is NULL");
    memset(out, 0, sizeof *out);
    out->simulated = e->kind == CCR_DEVICE_HOST;
    snprintf(out->name, sizeof out->name, "%s", e->devname);
    out->free_baseline = e->free_baseline;
    out->total_bytes = e->total_bytes; /* read at creation: a device's total does not change */
    size_t total = 0;
    if (cca_upstream_mem_info(e->up, &out->free_bytes, &total) != CCA_OK) {
        out->free_bytes = 0;
        return ccr_fail(CCR_ERR_DEVICE, "mem_info failed: %s", cca_last_error());
    }
    return CCR_OK;
}

size_t ccr_engine_limit(ccr_engine *e, const char **what) {
    size_t limit = e->total_bytes;
    *what = "the device's total";
    cca_config cfg;
    if (cca_get_config(e->alloc, &cfg) == CCA_OK && cfg.max_reserved && cfg.max_reserved < limit) {
        limit = cfg.max_reserved;
        *what = "max_reserved";
    }
    if (e->arena_bytes && e->arena_bytes < limit) {
        limit = e->arena_bytes;
        *what = "the greedy arena";
    }
    return limit;
}

ccr_status ccr_dev_alloc(ccr_engine *e, ccr_model *m, size_t bytes, const char *tag, void **out) {
    *out = NULL;
    const char *model = m ? m->name : "";
    cca_status cs = cca_alloc_in(e->alloc, m ? m->domain : NULL, bytes, NULL, out);
    if (cs == CCA_OK) {
        if (e->timeline) /* the row gives the block's size, as the free's row will */
            cca_block_size(e->alloc, *out, &bytes);
        ccr_timeline_event(e, "alloc", tag, model, bytes);
        return CCR_OK;
    }
    /* out of memory, or the device failed (CCR_ERR_DEVICE, its message
     * kept: the figures read below may replace the thread's) */
    ccr_status st = ccr_status_of(cs);
    char why[512] = "";
    if (st != CCR_ERR_OUT_OF_MEMORY)
        snprintf(why, sizeof why, ": %s", cca_last_error());
    ccr_timeline_event(e, "oom", tag, model, bytes);
    cca_stats s;
    size_t free_b = 0, total = 0;
    char b0[32], b1[32], b2[32], b3[32], b4[32], b5[32], b6[32];
    cca_get_stats(e->alloc, &s);
    char device[96] = "free memory unknown (mem_info refused)"; /* never 0 of 0 as if read */
    if (cca_upstream_mem_info(e->up, &free_b, &total) == CCA_OK)
        snprintf(device, sizeof device, "%s free of %s", cca_format_bytes(free_b, b1, sizeof b1),
                 cca_format_bytes(total, b2, sizeof b2));
    /* the model's own share, when it has a domain: what it holds of the total */
    char own[96] = "";
    cca_domain_stats ds;
    if (m && m->domain && cca_get_domain_stats(e->alloc, m->domain, &ds) == CCA_OK)
        snprintf(own, sizeof own, " (%s of it in this model's domain)",
                 cca_format_bytes(ds.reserved_bytes, b6, sizeof b6));
    return ccr_fail(st,
                    "%s: %s for %s%s%s; device %s has %s, allocator holds %s "
                    "reserved%s, %s allocated, largest free block %s (%s%s)",
                    st == CCR_ERR_OUT_OF_MEMORY ? "out of device memory"
                    : st == CCR_ERR_DEVICE      ? "the device failed an allocation"
                                                : "the allocator refused an allocation",
                    cca_format_bytes(bytes, b0, sizeof b0), tag, *model ? " of " : "", model, e->devname, device,
                    cca_format_bytes(s.reserved_bytes, b3, sizeof b3), own,
                    cca_format_bytes(s.allocated_bytes, b4, sizeof b4),
                    cca_format_bytes(s.largest_free_block, b5, sizeof b5), cca_status_string(cs), why);
}

void ccr_dev_free(ccr_engine *e, ccr_model *m, void *p, const char *tag) {
    if (!p)
        return;
    size_t bytes = 0;
    if (e->timeline)
        cca_block_size(e->alloc, p, &bytes);
    cca_free(e->alloc, p);
    ccr_timeline_event(e, "free", tag, m ? m->name : "", bytes);
}

/* One copy routine for both directions: memcpy on the simulated device,
 * cck_copy_* on the context's stream on CUDA. */
static ccr_status dev_copy(ccr_engine *e, void *dst, const void *src, size_t bytes, int to_device) {
    if (e->kind == CCR_DEVICE_HOST) {
        memcpy(dst, src, bytes);
        return CCR_OK;
    }
    ccr_status st = ccr_engine_ensure_context(e);
    if (st != CCR_OK)
        return st;
    cck_status ks =
        to_device ? cck_copy_to_device(e->cuda, dst, src, bytes) : cck_copy_to_host(e->cuda, dst, src, bytes);
    return ks == CCK_OK
               ? CCR_OK
               : ccr_fail(CCR_ERR_DEVICE, "copy to %s: %s", to_device ? "device" : "host", cck_status_string(ks));
}

ccr_status ccr_dev_upload(ccr_engine *e, void *dst, const void *src, size_t bytes) {
    return dev_copy(e, dst, src, bytes, 1);
}

ccr_status ccr_dev_download(ccr_engine *e, void *dst, const void *src, size_t bytes) {
    return dev_copy(e, dst, src, bytes, 0);
}

ccr_status ccr_engine_ensure_context(ccr_engine *e) {
    if (e->kind != CCR_DEVICE_CUDA || e->cuda)
        return CCR_OK;
    size_t ws = 0;
    if (cck_cublas_workspace_size(e->cuda_device, &ws) != CCK_OK)
        ws = 0;
    if (ws) {
        ccr_status st = ccr_dev_alloc(e, NULL, ws, "workspace", &e->workspace);
        if (st != CCR_OK)
            return ccr_fail_prefix(st, "cuBLAS workspace");
        e->workspace_bytes = ws;
    }
    cck_status ks = cck_cuda_context_create(e->cuda_device, NULL, e->workspace, ws, 0, &e->cuda);
    if (ks != CCK_OK) {
        ccr_dev_free(e, NULL, e->workspace, "workspace");
        e->workspace = NULL;
        e->workspace_bytes = 0;
        e->cuda = NULL;
        const char *why = NULL;
        if (ks == CCK_ERR_CUBLAS && cck_cublas_load(&why) != CCK_OK) /* not loadable: say where it was sought */
            return ccr_fail(CCR_ERR_DEVICE, "cuBLAS context on cuda:%d: %s", e->cuda_device, why);
        return ccr_fail(CCR_ERR_DEVICE, "cuBLAS context on cuda:%d: %s", e->cuda_device, cck_status_string(ks));
    }
    return CCR_OK;
}
