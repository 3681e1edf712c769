/*
 * engine.c — the device, the allocator on it, and releasing everything.
 *
 *     ccr_engine
 *       ├── cca_upstream   the device: cudaMalloc/cudaMemGetInfo, or the
 *       │                  host-simulated device (capacity, real pointers)
 *       ├── cca_allocator  every device byte below comes from here
 *       │     ├── domain "model A"  (one per loaded model, growth policy)
 *       │     │     ├── weights      (ccr_model, one block per tensor)
 *       │     │     └── activations  (per forward pass, freed layer by layer)
 *       │     ├── domain "model B"  ...
 *       │     └── default domain: cuBLAS workspace (CUDA only), and every
 *       │                         model when domains are off or greedy
 *       ├── footprints     per model source: peak reserved at unload
 *       └── cck_cuda_context  cuBLAS handle + stream (CUDA only, lazy)
 *
 * Invariants: the engine measures the device's free memory once, before the
 * allocator exists (free_baseline), because the greedy policy reserves its
 * arena at cca_create. Nothing calls cudaMalloc behind the allocator: the
 * only device memory outside it is what the CUDA runtime and cuBLAS keep for
 * themselves (context, handle), which release destroys too.
 *
 * ccr_engine_release is the in-process answer to "TensorFlow never gives
 * memory back": unload all models, destroy the cuBLAS context, free its
 * workspace, cca_empty_cache, then read the device's free memory again. On
 * the simulated device free_after == free_baseline exactly (tested); on a GPU
 * the driver's figure may differ by what the CUDA context itself caches.
 *
 * Domains are what make one model's unload give memory back while others
 * keep running: without them every model's blocks share segments, and a
 * segment goes back only when all of its blocks are free (model.c,
 * ccr_model_release, has the rest). The engine creates a model's domain at
 * load and destroys it at unload; a domain that cannot be destroyed because
 * a block in it is still live (a leak) is kept here as an orphan, and
 * ccr_engine_release tries it again. Reconfigure and destroy end the
 * allocator, and with it every domain.
 *
 * Every allocation goes through ccr_dev_alloc/ccr_dev_free so that one place
 * picks the domain, writes the timeline (one CSV row per event) and words
 * OOM messages.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void ccr_engine_options_default(ccr_engine_options *o) {
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->device = CCR_DEVICE_AUTO;
    o->host_capacity = CCR_DEFAULT_CAPACITY;
    o->domains = 1;
    o->footprint = 1;
}

void ccr_warn(ccr_engine *e, const char *fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof line) /* cut: say so, as the error messages do */
        memcpy(line + sizeof line - 4, "...", 4);
    if (e && e->warn) {
        e->warn(e->warn_user, line);
    } else { /* the line quotes paths and sidecar text: escaped for the terminal */
        fputs("ccr: warning: ", stderr);
        ccr_fputs_escaped(line, stderr);
        fputc('\n', stderr);
    }
}

static ccr_status make_allocator(ccr_engine *e, const char *conf) {
    cca_config cfg;
    cca_config_default(&cfg);
    if (conf && cca_config_parse(&cfg, conf) != CCA_OK)
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "allocator config '%s': %s", conf, cca_last_error());
    cca_status cs = cca_create(&cfg, e->up, &e->alloc);
    if (cs == CCA_ERR_OUT_OF_MEMORY)
        return ccr_fail(CCR_ERR_OUT_OF_MEMORY, "creating the allocator (%s): %s", conf ? conf : "defaults",
                        cca_last_error());
    if (cs != CCA_OK)
        return ccr_fail(CCR_ERR_ALLOCATOR, "creating the allocator (%s): %s: %s", conf ? conf : "defaults",
                        cca_status_string(cs), cca_last_error());
    /* greedy reserved its arena just now: all it will ever hold */
    cca_stats s;
    cca_get_stats(e->alloc, &s);
    e->arena_bytes = cfg.policy == CCA_POLICY_GREEDY ? s.reserved_bytes : 0;
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

ccr_status ccr_device_open(ccr_device_kind kind, int cuda_device, size_t host_capacity, cca_upstream **out,
                           int *simulated) {
    return ccr_device_open_paged(kind, cuda_device, host_capacity, 0, out, simulated);
}

ccr_status ccr_device_open_paged(ccr_device_kind kind, int cuda_device, size_t host_capacity, size_t vm_granularity,
                                 cca_upstream **out, int *simulated) {
    ccr_device_options o = {kind, cuda_device, host_capacity, vm_granularity, CCA_VM_PAGES};
    return ccr_device_open_with(&o, out, simulated);
}

ccr_status ccr_device_open_with(const ccr_device_options *o, cca_upstream **out, int *simulated) {
    if (!out)
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "device output is NULL");
    *out = NULL;
    if (!o)
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "device options are NULL");
    if (o->vm_backing != CCA_VM_PAGES && o->vm_backing != CCA_VM_WHOLE_MAPS)
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "vm_backing %d is neither CCA_VM_PAGES (0) nor CCA_VM_WHOLE_MAPS (1)",
                        o->vm_backing);
    ccr_device_kind kind = o->kind;
    int cuda_device = o->cuda_device;
    size_t host_capacity = o->host_capacity, vm_granularity = o->vm_granularity;
    bool asked = vm_granularity || o->vm_backing != CCA_VM_PAGES; /* a refusal is the caller's setting's */
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
    if (hs == CCA_ERR_INVALID_ARGUMENT && asked)
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "simulated device: %s", cca_last_error());
    if (hs != CCA_OK)
        return ccr_fail(CCR_ERR_DEVICE, "cannot create the simulated device: %s", cca_last_error());
    if (simulated)
        *simulated = 1;
    return CCR_OK;
}

static ccr_status open_device(ccr_engine *e, const ccr_engine_options *o) {
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
        const char *n = cca_upstream_name(e->up);
        simulated = !(n && sscanf(n, "cuda:%d", &e->cuda_device) == 1);
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

ccr_status ccr_engine_create(const ccr_engine_options *o, ccr_engine **out) {
    if (!out)
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "engine output is NULL");
    *out = NULL;
    ccr_engine_options def;
    if (!o) {
        ccr_engine_options_default(&def);
        o = &def;
    }
    ccr_engine *e = calloc(1, sizeof *e);
    if (!e)
        return ccr_fail(CCR_ERR_OUT_OF_MEMORY, "out of host memory");
    e->timeline = o->timeline;
    e->progress = o->progress;
    e->progress_user = o->progress_user;
    e->domains = o->domains != 0;
    e->footprint = o->footprint != 0;
    e->sidecar = o->footprint_sidecar != 0;
    e->warn = o->warn;
    e->warn_user = o->warn_user;
    snprintf(e->phase, sizeof e->phase, "init");
    ccr_status st = open_device(e, o);
    if (st != CCR_OK) {
        free(e);
        return st;
    }
    size_t free_b = 0, total_b = 0;
    if (cca_upstream_mem_info(e->up, &free_b, &total_b) != CCA_OK) {
        if (e->own_up)
            cca_upstream_destroy(e->up);
        free(e);
        return ccr_fail(CCR_ERR_DEVICE, "cannot read the device's free memory: %s", cca_last_error());
    }
    e->free_baseline = free_b;
    e->total_bytes = total_b;
    st = make_allocator(e, o->alloc_conf);
    if (st != CCR_OK) {
        if (e->own_up)
            cca_upstream_destroy(e->up);
        free(e);
        return st;
    }
    ccr_engine_mark(e, "create", "");
    *out = e;
    return CCR_OK;
}

ccr_status ccr_engine_release(ccr_engine *e, ccr_release_info *info) {
    if (!e)
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "engine is NULL");
    ccr_release_info r;
    memset(&r, 0, sizeof r);
    r.device_free_baseline = e->free_baseline;
    ccr_engine_mark(e, "release", "");
    /* Every step runs even after one fails (release is also the destroy
     * path). The first failure is the one reported; its message is composed
     * here, when it happens, and set with ccr_fail at the end, so a later
     * step cannot overwrite it. */
    ccr_status st = CCR_OK;
    char why[512] = "";
    size_t total;
    cca_status ms = cca_upstream_mem_info(e->up, &r.device_free_before, &total);
    if (ms != CCA_OK) {
        st = CCR_ERR_DEVICE;
        snprintf(why, sizeof why, "release: cannot read the device's free memory before: %s: %s", cca_status_string(ms),
                 cca_last_error());
    }
    while (e->models) {
        ccr_unload_info ui;
        ccr_status us = ccr_model_release(e->models, &ui);
        r.models_unloaded++;
        r.domain_bytes_released += ui.bytes_released;
        r.models_leaking += ui.live_blocks != 0;
        if (us != CCR_OK) /* not the release's failure: the models are unloaded, live_bytes_after tells */
            ccr_warn(e, "release: %s", ccr_last_error());
    }
    if (e->cuda) {
        cck_status ks = cck_cuda_context_destroy(e->cuda); /* consumes the context either way */
        e->cuda = NULL;
        if (ks != CCK_OK) {
            /* Queued work did not provably finish: a GEMM may still be using
             * the workspace, so it is not handed back to the pool, where the
             * next allocation could reuse it. It stays allocated for the
             * allocator's lifetime and shows in live_bytes_after. */
            if (st == CCR_OK) {
                st = CCR_ERR_DEVICE;
                snprintf(why, sizeof why,
                         "release: destroying the cuBLAS context on cuda:%d failed (%s); its %zu-byte workspace "
                         "stays allocated, not freed, because queued work may still be using it",
                         e->cuda_device, cck_status_string(ks), e->workspace_bytes);
            }
            e->workspace = NULL;
            e->workspace_bytes = 0;
        }
    }
    if (e->workspace) {
        ccr_dev_free(e, NULL, e->workspace, "workspace");
        r.workspace_freed = e->workspace_bytes;
        e->workspace = NULL;
        e->workspace_bytes = 0;
    }
    /* domains earlier unloads had to keep: gone now if their leaks were freed */
    size_t kept = 0;
    for (size_t i = 0; i < e->n_orphans; i++) {
        cca_domain_report dr;
        memset(&dr, 0, sizeof dr);
        if (cca_domain_destroy(e->alloc, e->orphans[i], 0, &dr) == CCA_OK)
            r.domain_bytes_released += dr.bytes_released;
        else
            e->orphans[kept++] = e->orphans[i];
    }
    e->n_orphans = kept;
    cca_status cs = cca_empty_cache(e->alloc, &r.cache);
    if (cs != CCA_OK && st == CCR_OK) {
        st = ccr_status_of(cs); /* the device refusing memory back: CCR_ERR_DEVICE, as at an unload */
        snprintf(why, sizeof why, "empty-cache failed: %s: %s", cca_status_string(cs), cca_last_error());
    }
    cca_stats s;
    cca_get_stats(e->alloc, &s);
    r.live_bytes_after = s.allocated_bytes;
    ms = cca_upstream_mem_info(e->up, &r.device_free_after, &total);
    if (ms != CCA_OK && st == CCR_OK) {
        st = CCR_ERR_DEVICE;
        snprintf(why, sizeof why, "release: cannot read the device's free memory after: %s: %s", cca_status_string(ms),
                 cca_last_error());
    }
    ccr_engine_mark(e, "idle", "");
    if (info)
        *info = r;
    return st == CCR_OK ? CCR_OK : ccr_fail(st, "%s", why);
}

void ccr_engine_destroy(ccr_engine *e) {
    if (!e)
        return;
    ccr_engine_release(e, NULL);
    cca_destroy(e->alloc); /* every domain with it */
    if (e->own_up)
        cca_upstream_destroy(e->up);
    ccr_footprint_clear(e);
    free(e->foot);
    free(e->orphans);
    free(e);
}

ccr_status ccr_engine_reconfigure(ccr_engine *e, const char *alloc_conf) {
    if (!e)
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "engine is NULL");
    if (e->models)
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "cannot change the allocator with models loaded");
    ccr_status st = ccr_engine_release(e, NULL);
    if (st != CCR_OK)
        return st;
    cca_allocator *old = e->alloc;
    size_t old_arena = e->arena_bytes;
    e->alloc = NULL;
    st = make_allocator(e, alloc_conf);
    if (st != CCR_OK) {
        e->alloc = old; /* keep the engine usable */
        e->arena_bytes = old_arena;
        return st;
    }
    cca_destroy(old); /* its domains, orphans included, end with it */
    e->n_orphans = 0;
    ccr_footprint_clear(e);
    return CCR_OK;
}

ccr_status ccr_engine_device_info(ccr_engine *e, ccr_device_info *out) {
    if (!e || !out)
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "engine or output is NULL");
    memset(out, 0, sizeof *out);
    out->simulated = e->kind == CCR_DEVICE_HOST;
    snprintf(out->name, sizeof out->name, "%s", e->devname);
    out->free_baseline = e->free_baseline;
    if (cca_upstream_mem_info(e->up, &out->free_bytes, &out->total_bytes) != CCA_OK)
        return ccr_fail(CCR_ERR_DEVICE, "mem_info failed: %s", cca_last_error());
    return CCR_OK;
}

cca_allocator *ccr_engine_allocator(ccr_engine *e) {
    return e ? e->alloc : NULL;
}
cca_upstream *ccr_engine_upstream(ccr_engine *e) {
    return e ? e->up : NULL;
}

static void trace(ccr_engine *e, const char *event, const char *tag, const char *model, size_t bytes) {
    if (!e->timeline)
        return;
    cca_stats s;
    size_t free_b = 0, total = 0;
    cca_get_stats(e->alloc, &s);
    cca_upstream_mem_info(e->up, &free_b, &total);
    ccr_timeline_row(e->timeline, event, e->phase, model ? model : "", tag, bytes, &s, free_b);
}

void ccr_engine_mark_tag(ccr_engine *e, const char *phase, const char *model, const char *tag) {
    if (!e)
        return;
    snprintf(e->phase, sizeof e->phase, "%s", phase ? phase : "");
    trace(e, "phase", tag ? tag : phase, model, 0);
    /* the same phase in the allocator's trace (CCALLOC_TRACE), as "phase:model":
     * a replay reports reserved memory at each; characters a mark cannot hold
     * become '_', and a mark keeps its first CCA_MARK_MAX characters (the
     * trace format's limit; the timeline and messages have the name whole).
     * A no-op when the process is not tracing. */
    if (e->alloc) {
        char mark[CCA_MARK_MAX + 1];
        snprintf(mark, sizeof mark, "%s%s%s", phase ? phase : "", model && *model ? ":" : "", model ? model : "");
        for (char *c = mark; *c; c++)
            if (*c < 0x20 || *c > 0x7e || *c == ',' || *c == '"')
                *c = '_';
        if (*mark)
            cca_trace_mark(e->alloc, mark);
    }
}

void ccr_engine_mark(ccr_engine *e, const char *phase, const char *model) {
    ccr_engine_mark_tag(e, phase, model, NULL);
}

ccr_status ccr_dev_alloc(ccr_engine *e, ccr_model *m, size_t bytes, const char *tag, void **out) {
    *out = NULL;
    const char *model = m ? m->name : "";
    cca_status cs = cca_alloc_in(e->alloc, m ? m->domain : NULL, bytes, NULL, out);
    if (cs == CCA_OK) {
        trace(e, "alloc", tag, model, bytes);
        return CCR_OK;
    }
    trace(e, "oom", tag, model, bytes);
    cca_stats s;
    size_t free_b = 0, total = 0;
    char b0[32], b1[32], b2[32], b3[32], b4[32], b5[32], b6[32];
    cca_get_stats(e->alloc, &s);
    cca_upstream_mem_info(e->up, &free_b, &total);
    /* the model's own share, when it has a domain: what it holds of the total */
    char own[96] = "";
    cca_domain_stats ds;
    if (m && m->domain && cca_get_domain_stats(e->alloc, m->domain, &ds) == CCA_OK)
        snprintf(own, sizeof own, " (%s of it in this model's domain)",
                 cca_format_bytes(ds.reserved_bytes, b6, sizeof b6));
    return ccr_fail(cs == CCA_ERR_OUT_OF_MEMORY ? CCR_ERR_OUT_OF_MEMORY : CCR_ERR_ALLOCATOR,
                    "out of device memory: %s for %s%s%s; device %s has %s free of %s, allocator holds %s "
                    "reserved%s, %s allocated, largest free block %s (%s)",
                    cca_format_bytes(bytes, b0, sizeof b0), tag, *model ? " of " : "", model, e->devname,
                    cca_format_bytes(free_b, b1, sizeof b1), cca_format_bytes(total, b2, sizeof b2),
                    cca_format_bytes(s.reserved_bytes, b3, sizeof b3), own,
                    cca_format_bytes(s.allocated_bytes, b4, sizeof b4),
                    cca_format_bytes(s.largest_free_block, b5, sizeof b5), cca_status_string(cs));
}

void ccr_dev_free(ccr_engine *e, ccr_model *m, void *p, const char *tag) {
    if (!p)
        return;
    size_t bytes = 0;
    if (e->timeline)
        cca_block_size(e->alloc, p, &bytes);
    cca_free(e->alloc, p);
    trace(e, "free", tag, m ? m->name : "", bytes);
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
        return ccr_fail(CCR_ERR_DEVICE, "cuBLAS context on cuda:%d: %s", e->cuda_device, cck_status_string(ks));
    }
    return CCR_OK;
}

void ccr_engine_link_model(ccr_engine *e, ccr_model *m) {
    m->prev = NULL;
    m->next = e->models;
    if (e->models)
        e->models->prev = m;
    e->models = m;
}

void ccr_engine_unlink_model(ccr_engine *e, ccr_model *m) {
    if (m->prev)
        m->prev->next = m->next;
    else
        e->models = m->next;
    if (m->next)
        m->next->prev = m->prev;
    m->prev = m->next = NULL;
}

int ccr_engine_keep_orphan(ccr_engine *e, cca_domain *d) {
    if (e->n_orphans == e->cap_orphans) {
        size_t cap = e->cap_orphans ? 2 * e->cap_orphans : 4;
        cca_domain **o = realloc(e->orphans, cap * sizeof *o);
        if (!o)
            return 0;
        e->orphans = o;
        e->cap_orphans = cap;
    }
    e->orphans[e->n_orphans++] = d;
    return 1;
}
