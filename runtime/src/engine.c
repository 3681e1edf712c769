/*
 * engine.c — one engine: the allocator on its device, the models it holds,
 * and giving everything back.
 *
 *     ccr_engine
 *       ├── cca_upstream   the device (device.c): cudaMalloc/cudaMemGetInfo,
 *       │                  or the host-simulated device (capacity, real pointers)
 *       ├── cca_allocator  every device byte below comes from here
 *       │     ├── domain "model A"  (one per loaded model, growth policy)
 *       │     │     ├── weights      (ccr_model, one block per tensor)
 *       │     │     └── activations  (per forward pass, freed layer by layer)
 *       │     ├── domain "model B"  ...
 *       │     └── default domain: cuBLAS workspace (CUDA only), and every
 *       │                         model when domains are off or greedy
 *       ├── footprints     per model source: peak reserved at unload
 *       └── cck_cuda_context  cuBLAS handle + stream (CUDA only, lazy: device.c)
 *
 * Rules:
 * - Owns: the engine's life (create, reconfigure, release, destroy) and
 *   the allocator it makes on the device. The device, every byte taken
 *   from it and what the allocator can ever hold (ccr_engine_limit) are
 *   device.c's; the list of loaded models and the domains an unload had to
 *   keep (orphans) are filled by model.c; phase marks are timeline.c's,
 *   warnings error.c's.
 * - Calls down only: device.c, model.c (ccr_model_release), footprint.c
 *   (ccr_footprint_clear), timeline.c, error.c; none of them calls here.
 * - The device's free memory is measured once, before the allocator exists
 *   (free_baseline), because the greedy policy reserves its arena at
 *   cca_create.
 * - Nothing calls cudaMalloc behind the allocator: the only device memory
 *   outside it is what the CUDA runtime and cuBLAS keep for themselves
 *   (context, handle), which release destroys too.
 * - Release is the in-process answer to "TensorFlow never gives memory
 *   back": unload every model, destroy the cuBLAS context, free its
 *   workspace, destroy the orphaned domains whose leaks were freed,
 *   cca_empty_cache, then read the device's free memory again. Every step
 *   runs even after one fails (release is also the destroy path); the first
 *   failure is the one reported. On the simulated device free_after ==
 *   free_baseline exactly (tested); on a GPU the driver's figure may differ
 *   by what the CUDA context itself caches.
 * - One domain per model makes one model's unload give memory back while
 *   others keep running (without domains a segment goes back only when all
 *   of its blocks are free; model.c, ccr_model_release). A domain an unload
 *   cannot destroy because a block in it is still live (a leak) is kept
 *   as an orphan (model.c), and release tries it again. Reconfigure and
 *   destroy end the allocator, and with it every domain; reconfigure only
 *   when no block is live in it (a caller's, or a leak: CCR_ERR_LIVE_BLOCKS),
 *   destroy whatever is live.
 * - Costs: create: one device open, one mem_info, one cca_create (greedy:
 *   the arena's reservation); release: one unload per model, one
 *   empty-cache, two mem_info. With a timeline, every phase mark and every
 *   allocation or free adds a row (timeline.c: a mem_info each): create
 *   marks one phase, release two, each unload two and a free per tensor.
 */
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

static ccr_status make_allocator(ccr_engine *e, const char *conf) {
    cca_config cfg;
    cca_config_default(&cfg);
    if (conf && cca_config_parse(&cfg, conf) != CCA_OK)
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "allocator config '%s': %s", conf, cca_last_error());
    cca_status cs = cca_create(&cfg, e->up, &e->alloc);
    if (cs == CCA_ERR_OUT_OF_MEMORY)
        return ccr_fail(CCR_ERR_OUT_OF_MEMORY, "creating the allocator (%s): %s", conf ? conf : "defaults",
                        cca_last_error());
    if (cs != CCA_OK) /* the device failed (the greedy arena): CCR_ERR_DEVICE */
        return ccr_fail(ccr_status_of(cs), "creating the allocator (%s): %s: %s", conf ? conf : "defaults",
                        cca_status_string(cs), cca_last_error());
    /* a CCALLOC_TRACE the library would not open: the engine's trace
     * failure from the start, as a mark's that found the recording stopped
     * (timeline.c; the first one kept) */
    ccr_kept_error k; /* kept for ccr_engine_trace_status: not this call's failure */
    ccr_error_keep(&k);
    if (!e->trace_error[0] && cca_trace_status(e->alloc) == CCA_ERR_IO)
        snprintf(e->trace_error, sizeof e->trace_error, "%s", cca_last_error());
    ccr_error_restore(&k);
    /* greedy reserved its arena just now: all it will ever hold */
    cca_stats s;
    cca_get_stats(e->alloc, &s);
    e->arena_bytes = cfg.policy == CCA_POLICY_GREEDY ? s.reserved_bytes : 0;
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
    ccr_status st = ccr_engine_open_device(e, o);
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
        ccr_kept_error k;
        ccr_error_keep(&k);
        ccr_status us = ccr_model_release(e->models, &ui);
        r.models_unloaded++;
        r.domain_bytes_released += ui.bytes_released;
        r.models_leaking += ui.live_blocks != 0;
        if (us != CCR_OK) { /* not the release's failure: the models are unloaded, live_bytes_after tells */
            ccr_warn(e, "release: %s", ccr_last_error());
            ccr_error_restore(&k);
        }
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
    cca_status after = cca_upstream_mem_info(e->up, &r.device_free_after, &total);
    if (after != CCA_OK && st == CCR_OK) {
        st = CCR_ERR_DEVICE;
        snprintf(why, sizeof why, "release: cannot read the device's free memory after: %s: %s",
                 cca_status_string(after), cca_last_error());
    }
    r.device_free_read = ms == CCA_OK && after == CCA_OK;
    if (!r.device_free_read)
        r.device_free_before = r.device_free_after = 0; /* neither alone: no difference made of one */
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
    /* the old allocator ends with every block in it: one still live (the
     * caller's own, or a leak a released model's domain kept) would be
     * freed under the owner that holds its pointer */
    cca_stats s;
    cca_get_stats(e->alloc, &s);
    if (s.active_blocks) {
        char b[32];
        return ccr_fail(CCR_ERR_LIVE_BLOCKS,
                        "cannot change the allocator: %zu block%s (%s) still live in it (the caller's own, or a "
                        "leak in a released model's domain): free them first",
                        s.active_blocks, s.active_blocks == 1 ? "" : "s",
                        cca_format_bytes(s.allocated_bytes, b, sizeof b));
    }
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

cca_allocator *ccr_engine_allocator(ccr_engine *e) {
    return e ? e->alloc : NULL;
}
cca_upstream *ccr_engine_upstream(ccr_engine *e) {
    return e ? e->up : NULL;
}
