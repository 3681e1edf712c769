/*
 * allocator.c — an allocator's life: cca_create, cca_destroy.
 *
 * - cca_create validates the config (or reads CCALLOC_CONF) and picks the
 *   kind and the policy once; only greedy reserves anything before the
 *   first request. The config never changes.
 * - cca_destroy synchronizes (pages mapped, or frees pending), gives every
 *   segment back through its kind, reports live blocks as
 *   CCA_ERR_LIVE_BLOCKS; the record is freed whatever fails.
 * - Cost: create, a few host mallocs and the kind's and the policy's start
 *   (pages: the granularity; greedy: the arena); destroy, O(segments +
 *   blocks + domains), at most one synchronize, each segment's kind destroy.
 */
#include "core/internal.h"
#include "domain.h" /* the default domain */
#include "observe/trace.h"

#include <stdlib.h>
#include <string.h>

cca_status cca_create(const cca_config *c, cca_upstream *u, cca_allocator **out) {
    if (!out)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_create: out is NULL");
    *out = NULL;
    if (!u)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_create: upstream is NULL");
    cca_config cfg;
    if (c) {
        cfg = *c;
        cca_status st = cca_config_validate(&cfg);
        if (st != CCA_OK)
            return st;
    } else {
        cca_config_default(&cfg);
        /* a bad CCALLOC_CONF is logged, not a failure: the caller's message stays */
        char saved[CCAI_ERROR_CAP];
        ccai_error_save(saved);
        if (cca_config_apply_env(&cfg) != CCA_OK) {
            ccai_log("%s; using the defaults", cca_last_error());
            cca_config_default(&cfg);
            ccai_error_restore(saved);
        }
    }
    cca_allocator *a = calloc(1, sizeof *a);
    if (!a)
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "cca_create: host malloc failed");
    ccai_mutex_init(&a->lock);
    a->config = cfg;
    a->upstream = u;
    ccai_domain_init_root(a);
    ccai_upstream_log_no_vm(u, cfg.expandable); /* classic segments: said once per upstream that could say why */
    a->kind = cfg.expandable && cca_upstream_has_vm(u) ? &ccai_kind_pages : &ccai_kind_classic;
    cca_status st = a->kind->start ? a->kind->start(a) : CCA_OK;
    if (st != CCA_OK) {
        free(a);
        return cca_error_prefix(st, "cca_create");
    }
    a->policy = cfg.policy == CCA_POLICY_GREEDY ? &ccai_policy_greedy : &ccai_policy_growth;
    a->policy = cfg.hold_peak ? &ccai_policy_held : a->policy; /* growth only (config.c) */
    a->medium_pool = cfg.medium_pool && a->kind->medium_pool;
    /* step 1's bound: no rounding a request meets (512 B, its segment, the
     * kind's unit) can overflow below it */
    size_t rounding = a->page > cfg.segment_round ? a->page : cfg.segment_round;
    a->max_request = SIZE_MAX - (rounding + CCA_GRANULARITY);
    if (ccai_live_map_init(&a->live) != CCA_OK) {
        free(a);
        return cca_error_prefix(CCA_ERR_OUT_OF_MEMORY, "cca_create");
    }
    a->trace = ccai_trace_open_from_env(&a->trace_refused);
    if (cfg.history && (st = ccai_history_create(cfg.history, &a->history)) != CCA_OK) {
        cca_destroy(a);
        return cca_error_prefix(st, "cca_create");
    }
    if (a->policy->start) {              /* greedy: the arena; under the lock, as every upstream op */
        (void)ccai_mutex_lock(&a->lock); /* a is new: none of its ops is running, so never refused */
        st = a->policy->start(a);
        ccai_mutex_unlock(&a->lock);
        if (st != CCA_OK) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", cca_last_error());
            cca_destroy(a);
            return cca_set_error(st, "cca_create: %s", msg);
        }
    }
    ccai_mutex_fork_register(&a->fork, &a->lock); /* fork.c: a fork from now on waits for its lock */
    *out = a;
    return CCA_OK;
}

cca_status cca_destroy(cca_allocator *a) {
    if (!a)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_destroy: allocator is NULL");
    if (ccai_mutex_held_here(&a->lock)) /* from inside one of a's ops: refused before anything changes */
        return ccai_lock_refused("cca_destroy");
    ccai_mutex_fork_unregister(&a->fork); /* before its lock: registry, then allocator, as fork.c takes them */
    (void)ccai_mutex_lock(&a->lock);      /* not refused: checked above */
    /* with pages mapped always (unmapping does not wait for queued work);
     * else only for pending frees (cudaFree waits) */
    cca_status sync = a->c.mapped ? ccai_stream_sync_device(a) : ccai_stream_wait_all(a);
    char sync_why[CCAI_ERROR_CAP] = "";
    if (sync != CCA_OK)
        snprintf(sync_why, sizeof sync_why, "%s", cca_last_error());
    size_t live = a->live.count;
    size_t live_bytes = a->c.allocated;
    size_t pending = a->c.pending; /* of those, freed but waiting on streams */
    /* not synchronized: mapped pages stay mapped (and their ranges reserved) */
    size_t kept = sync != CCA_OK ? a->c.mapped : 0;
    cca_status result = CCA_OK;
    while (a->segments) {
        ccai_segment *s = a->segments;
        for (ccai_block *b = s->first; b; b = b->next)
            ccai_stream_use_free(a, b);
        a->kind->destroy(a, s, kept != 0, &result);
        a->segments = s->next;
        free(s);
    }
    ccai_block_free_slabs(a);
    ccai_stream_destroy(a);
    ccai_live_map_destroy(&a->live);
    ccai_domain_destroy_all(a);
    ccai_history_destroy(a->history);
    struct ccai_trace *trace = a->trace;
    ccai_mutex_unlock(&a->lock);
    free(a);
    ccai_trace_close(trace);                 /* after the lock: it may log */
    char kept_note[2 * CCAI_ERROR_CAP] = ""; /* room for the synchronize's message whole */
    if (kept)
        snprintf(kept_note, sizeof kept_note,
                 "the synchronize failed, so %zu bytes of mapped pages were left mapped in the upstream, their "
                 "ranges reserved (queued work may still use them): %s",
                 kept, sync_why);
    char pending_note[96] = "";
    if (pending)
        snprintf(pending_note, sizeof pending_note, " (%zu of them freed, their streams' work never seen to complete)",
                 pending);
    if (live)
        return cca_set_error(CCA_ERR_LIVE_BLOCKS, "cca_destroy: %zu blocks (%zu bytes) were still live%s%s%s", live,
                             live_bytes, pending_note, kept ? "; " : "", kept_note);
    if (kept)
        return cca_set_error(sync, "cca_destroy: %s", kept_note);
    if (result != CCA_OK)
        return cca_set_error(result, "cca_destroy: the upstream refused to take a segment back");
    if (sync != CCA_OK)
        return cca_set_error(sync, "cca_destroy: synchronize failed before releasing the segments: %s", sync_why);
    return CCA_OK;
}
