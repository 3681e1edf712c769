/*
 * domain.c — memory domains: named owners of segments, so that one model's
 * memory goes back whole while other models keep running.
 *
 * - A DOMAIN owns segments (expandable: address ranges); a request in d
 *   (cca_alloc_in, alloc.c) is served only from d's free index (`pools`) and new
 *   segments are d's, so one domain's blocks never pin another's memory (I8).
 *
 *     one domain:  [ A's weights | B's weights | A's activations | free ]
 *                  unload A -> pinned by B: nothing goes back
 *     domain A:    [ A's weights | A's activations | free ] -> released whole
 *     domain B:    [ B's weights | free ]                   -> untouched
 *
 * - The default domain is a->root; a->serving is the domain the call in
 *   progress serves. A segment's domain never changes. The set of domains,
 *   their handles and numbers: domain_set.c.
 * - Release (cca_domain_release): synchronize, complete pending frees,
 *   count d's live and pending blocks; a pending one refuses, even with
 *   FORCE, a live one too unless FORCE (which returns live blocks to the
 *   pool first); then every segment of d goes back through its kind.
 * - The footprint arena (cca_domain_reserve): one shared segment of pool
 *   ARENA in d, key stream NULL; d's requests look there first, then grow.
 * - Cached free memory stays the allocator's: trim, empty-cache and the OOM
 *   retry release free memory of every domain.
 * - Sleep and wake (cca_domain_sleep, cca_domain_wake, cca_sleep,
 *   cca_wake): the lock, the domains, what a refusal undoes; sleep.c has
 *   the steps for one domain.
 * - Cost: create and a handle's check O(1) expected; release, and destroy
 *   (a release first), one synchronize and O(d's segments + blocks), plus
 *   O(pages) per range.
 */
#include "domain.h"
#include "sleep.h"
#include "observe/check.h" /* the unlock, a bad pointer's diagnosis */
#include "observe/trace.h"

#include <stdlib.h>
#include <string.h>

void ccai_domain_destroy_all(cca_allocator *a) {
    for (cca_domain *d = &a->root, *next; d; d = next) {
        next = d->next;
        ccai_sleep_forget(a, d, false); /* asleep: its host memory goes (the segments went already) */
        for (int p = 0; p < CCAI_POOL_COUNT; p++)
            ccai_free_index_destroy(&d->pools[p]);
        if (d != &a->root)
            free(d);
    }
    a->root.next = NULL;
    a->last = &a->root;
    a->holding = a->asleep = NULL;
    free(a->domain_set.slot);
    memset(&a->domain_set, 0, sizeof a->domain_set);
}

cca_status ccai_domain_check(cca_allocator *a, const cca_domain *handle, const char *who) {
    cca_status st = ccai_lock(a, who);
    if (st != CCA_OK)
        return st;
    bool found = ccai_domain_lookup(a, handle) != NULL;
    ccai_unlock(a);
    if (found)
        return CCA_OK;
    return cca_set_error(CCA_ERR_INVALID_ARGUMENT,
                         "%s: domain %p is not one of this allocator's (destroyed, another allocator's, or no domain)",
                         who, (const void *)handle);
}

static bool name_ok(const char *name) {
    size_t n = 0;
    for (const char *c = name; *c; c++, n++)
        if (*c < 0x20 || *c > 0x7e || *c == '"' || *c == '\\' || *c == ',' || n >= CCA_DOMAIN_NAME_MAX)
            return false;
    return n > 0;
}

cca_status cca_domain_create(cca_allocator *a, const char *name, cca_domain **out) {
    if (out)
        *out = NULL;
    if (!a || !name || !out)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_domain_create: %s is NULL",
                         !a ? "allocator" : !name ? "name" : "out");
    if (!name_ok(name))
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT,
                         "cca_domain_create: a name is 1..%d printable ASCII characters without '\"', '\\' or ','",
                         CCA_DOMAIN_NAME_MAX);
    if (a->config.policy == CCA_POLICY_GREEDY)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT,
                         "cca_domain_create: domains need policy:growth (a greedy allocator holds one arena for "
                         "every owner; give a domain its own arena with cca_domain_reserve instead)");
    cca_domain *d = calloc(1, sizeof *d);
    if (!d)
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "cca_domain_create: host malloc failed");
    snprintf(d->name, sizeof d->name, "%s", name);
    d->handle = ccai_domain_new_handle();
    cca_status st = ccai_lock(a, "cca_domain_create");
    if (st != CCA_OK) {
        free(d);
        return st;
    }
    st = ccai_domain_set_reserve(a);
    if (st != CCA_OK) {
        ccai_unlock(a);
        free(d);
        return st;
    }
    ccai_domain_set_add(a, d);
    ccai_unlock(a);
    /* Recorded once it exists (a refused create is not in the trace), and
     * outside the lock: the recorder may log. No other call can name d
     * before it is returned, so its number is set before any use. */
    if (a->trace)
        d->trace_no = ccai_trace_domain(a->trace, d->name);
    *out = ccai_domain_handle(d);
    return CCA_OK;
}

/* ---- release ------------------------------------------------------------- */

static void note_leak(const cca_allocator *a, const ccai_block *b, cca_domain_report *r) {
    r->live_blocks++;
    r->live_bytes += b->size;
    if (r->leaks && r->leaks_written < r->leaks_cap) {
        cca_live_block *l = &r->leaks[r->leaks_written++];
        l->ptr = (void *)b->addr;
        l->size = b->size;
        l->requested = b->requested;
        l->stream = b->alloc_stream;
        l->age = a->c.alloc_calls - b->born;
        l->pending = b->state == CCAI_PENDING;
    }
}

/* Return d's live blocks to the pool (FORCE): as cca_free would, without
 * waiting for any stream. Returning a block may merge it with neighbours,
 * so each segment's walk starts again after one. */
static void drop_live(cca_allocator *a, cca_domain *d) {
    for (ccai_segment *s = d->segs; s; s = s->dnext) {
        for (ccai_block *b = s->first; b;) {
            if (b->state != CCAI_LIVE) {
                b = b->next;
                continue;
            }
            ccai_assert(a->c.requested >= b->requested);
            a->c.requested -= b->requested;
            if (a->domains_tracked) {
                ccai_assert(d->c.requested >= b->requested);
                d->c.requested -= b->requested;
            }
            if (a->trace)
                ccai_trace_free(a->trace, b->id, b->requested, b->alloc_stream, d->trace_no);
            ccai_stream_use_free(a, b); /* cca_record_stream's users, if any */
            ccai_pool_return(a, b);
            b = s->first;
        }
    }
}

static cca_status release_locked(cca_allocator *a, cca_domain *d, unsigned flags, cca_domain_report *r,
                                 const char *fn) {
    cca_status sync = cca_upstream_synchronize(ccai_upstream_op(a));
    if (sync != CCA_OK)
        return cca_set_error(sync, "%s(%s): synchronize failed, nothing released: %s", fn, d->name,
                         cca_last_error());
    ccai_stream_complete_all(a);
    size_t pending = 0;
    for (ccai_segment *s = d->segs; s; s = s->dnext)
        if (!ccai_segment_empty(s))
            for (const ccai_block *b = s->first; b; b = b->next)
                if (b->state != CCAI_FREE) {
                    note_leak(a, b, r);
                    pending += b->state == CCAI_PENDING;
                }
    if (pending)
        return cca_set_error(CCA_ERR_LIVE_BLOCKS,
                         "%s(%s): %zu freed blocks still wait on stream events; nothing released", fn,
                         d->name, pending);
    if (r->live_blocks && !(flags & CCA_DOMAIN_FORCE))
        return cca_set_error(CCA_ERR_LIVE_BLOCKS, "%s(%s): %zu live blocks (%zu bytes); nothing released", fn,
                         d->name, r->live_blocks, r->live_bytes);
    if (r->live_blocks)
        drop_live(a, d);
    ccai_sleep_forget(a, d, true); /* asleep: no live block is left to wake; its host memory goes */
    if (a->trace) /* goes ahead: none of d's blocks is live any more */
        ccai_trace_domain_event(a->trace, false, 0, d->trace_no);
    size_t before = d->c.reserved, refused = 0;
    cca_status first = CCA_OK;
    char why[CCAI_ERROR_CAP] = "";
    for (ccai_segment *s = d->segs, *next; s; s = next) {
        next = s->dnext;
        ccai_assert(ccai_segment_empty(s));
        cca_status st = a->kind->release(a, s);
        if (st == CCA_OK) {
            r->segments_released++;
        } else {
            refused++;
            if (first == CCA_OK) {
                first = st;
                snprintf(why, sizeof why, "%s", cca_last_error());
            }
        }
    }
    r->bytes_released = before - d->c.reserved;
    if (first != CCA_OK)
        return cca_set_error(CCA_ERR_UPSTREAM,
                         "%s(%s): the upstream refused %zu segment(s) (kept, still cached): %s", fn,
                         d->name, refused, why);
    return CCA_OK;
}

static cca_status release(cca_allocator *a, cca_domain *h, unsigned flags, cca_domain_report *report, bool destroy,
                          const char *fn) {
    cca_domain_report local;
    memset(&local, 0, sizeof local);
    if (report) {
        local.leaks = report->leaks;
        local.leaks_cap = report->leaks ? report->leaks_cap : 0;
    }
    if (!a)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "%s: allocator is NULL", fn);
    if (flags & ~CCA_DOMAIN_FORCE)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "%s: unknown flags 0x%x", fn, flags & ~CCA_DOMAIN_FORCE);
    if (destroy && !h)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "%s: the default domain cannot be destroyed", fn);
    cca_status st = ccai_lock(a, fn);
    if (st != CCA_OK)
        return st;
    cca_domain *d;
    if ((st = ccai_domain_find(a, h, fn, &d)) == CCA_OK) {
        st = release_locked(a, d, flags, &local, fn);
        local.bytes_still_reserved = d->c.reserved;
        if (st == CCA_OK && destroy) {
            ccai_assert(d->c.segments == 0 && d->c.reserved == 0);
            ccai_assert(!d->segs);
            ccai_domain_set_remove(a, d);
            for (int p = 0; p < CCAI_POOL_COUNT; p++)
                ccai_free_index_destroy(&d->pools[p]);
            free(d);
        }
    }
    ccai_unlock(a);
    if (report)
        *report = local;
    return st;
}

cca_status cca_domain_release(cca_allocator *a, cca_domain *d, unsigned flags, cca_domain_report *report) {
    return release(a, d, flags, report, false, "cca_domain_release");
}

cca_status cca_domain_destroy(cca_allocator *a, cca_domain *d, unsigned flags, cca_domain_report *report) {
    return release(a, d, flags, report, true, "cca_domain_destroy");
}

/* ---- footprint ----------------------------------------------------------- */

/* The footprint arena: a shared segment of the domain's own pool, every
 * byte usable at once (kind.h, reserve). */
static cca_status reserve_arena(cca_allocator *a, size_t bytes) {
    ccai_segment *s = NULL;
    return a->kind->reserve(a, bytes, NULL, CCAI_POOL_ARENA, true, &s);
}

cca_status cca_domain_reserve(cca_allocator *a, cca_domain *h, size_t bytes) {
    if (!a)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_domain_reserve: allocator is NULL");
    if (bytes == 0 || bytes > SIZE_MAX / 2)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_domain_reserve: %zu bytes (1..SIZE_MAX/2)", bytes);
    if (a->config.policy == CCA_POLICY_GREEDY)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_domain_reserve: the greedy policy has its arena already");
    size_t rounded = (bytes + CCA_GRANULARITY - 1) / CCA_GRANULARITY * CCA_GRANULARITY;
    cca_status st = ccai_lock(a, "cca_domain_reserve");
    if (st != CCA_OK)
        return st;
    cca_domain *d;
    if ((st = ccai_domain_find(a, h, "cca_domain_reserve", &d)) != CCA_OK)
        d = &a->root; /* for the messages below, which st already skips */
    if (st == CCA_OK && d->arena)
        st = cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_domain_reserve(%s): the domain has an arena already", d->name);
    if (st == CCA_OK && d->sleep)
        st = cca_set_error(CCA_ERR_ASLEEP, "cca_domain_reserve(%s): the domain is asleep (cca_domain_wake first)",
                           d->name);
    if (rounded <= SIZE_MAX / 2) /* in the kind's unit: an arena over pages is whole pages */
        rounded = a->kind->whole(a, rounded);
    /* the ceiling's mem_info (asked until answered) or the first try may
     * fail and the call succeed: a call that succeeds leaves the caller's
     * message as it was (ccalloc.h) */
    char saved[CCAI_ERROR_CAP];
    ccai_error_save(saved);
    if (st == CCA_OK && rounded > ccai_request_ceiling(a))
        st = cca_set_error(CCA_ERR_OUT_OF_MEMORY,
                       "cca_domain_reserve(%s): %zu bytes exceed the device, max_reserved or the address budget "
                       "(%zu bytes)",
                       d->name, rounded, ccai_request_ceiling(a));
    if (st == CCA_OK) {
        a->serving = d;
        st = reserve_arena(a, rounded);
        if (st == CCA_ERR_OUT_OF_MEMORY) { /* the OOM retry (grow.c): cached memory of every domain goes back first */
            ccai_block *unused;
            st = ccai_grow_retry(a, &(ccai_grow_req){rounded, NULL, CCAI_POOL_ARENA, true}, &unused);
        }
        if (st == CCA_OK) {
            d->arena = a->segments; /* linked at the head */
            ccai_assert(d->arena->domain == d && d->arena->shared);
            ccai_error_restore(saved);
            if (a->trace) /* what the program got: a refused reserve is not replayed */
                ccai_trace_domain_event(a->trace, true, bytes, d->trace_no);
        } else {
            st = cca_set_error(st, "cca_domain_reserve(%s): %zu bytes: %s", d->name, rounded, cca_last_error());
        }
        a->serving = &a->root;
    }
    ccai_unlock(a);
    return st;
}

/* ---- queries ------------------------------------------------------------- */

cca_status cca_domain_of(cca_allocator *a, const void *ptr, cca_domain **d) {
    if (d)
        *d = NULL;
    if (!a || !ptr || !d)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_domain_of: %s is NULL", !a ? "allocator" : !ptr ? "ptr" : "d");
    cca_status st = ccai_lock(a, "cca_domain_of");
    if (st != CCA_OK)
        return st;
    ccai_block *b = ccai_live_map_find(&a->live, (uintptr_t)ptr);
    if (!b || b->state != CCAI_LIVE)
        st = ccai_diagnose_pointer(a, ptr, "cca_domain_of");
    else
        *d = ccai_domain_handle(b->segment->domain);
    ccai_unlock(a);
    return st;
}

/* ---- sleep and wake (sleep.c has the steps) -------------------------------- */

static cca_status sleep_begin(cca_allocator *a, cca_sleep_report *r, const char *fn) {
    if (r)
        memset(r, 0, sizeof *r);
    if (!a)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "%s: allocator is NULL", fn);
    return ccai_lock(a, fn);
}

static cca_status sleep_named(cca_status st, const char *fn, const cca_domain *d) {
    return st == CCA_OK ? st : cca_set_error(st, "%s(%s): %s", fn, d->name, cca_last_error());
}

cca_status cca_domain_sleep(cca_allocator *a, cca_domain *h, unsigned flags, cca_sleep_report *report) {
    cca_sleep_report local = {0};
    cca_status st = sleep_begin(a, report, "cca_domain_sleep");
    if (st != CCA_OK)
        return st;
    cca_domain *d;
    bool slept;
    if ((st = ccai_domain_find(a, h, "cca_domain_sleep", &d)) == CCA_OK)
        st = sleep_named(ccai_sleep_domain(a, d, flags, &local, &slept), "cca_domain_sleep", d);
    ccai_unlock(a);
    if (report)
        *report = local;
    return st;
}

cca_status cca_domain_wake(cca_allocator *a, cca_domain *h, cca_sleep_report *report) {
    cca_sleep_report local = {0};
    cca_status st = sleep_begin(a, report, "cca_domain_wake");
    if (st != CCA_OK)
        return st;
    cca_domain *d;
    if ((st = ccai_domain_find(a, h, "cca_domain_wake", &d)) == CCA_OK)
        st = sleep_named(ccai_wake_domain(a, d, &local), "cca_domain_wake", d);
    ccai_unlock(a);
    if (report)
        *report = local;
    return st;
}

/* Every domain: the default first, then in creation order. A refusal
 * wakes the domains this call put to sleep again (their bytes just went
 * to the host: the device has their room). DISCARD puts nothing on the
 * host, so every domain's waits come first (sleep_ready): a refused wait
 * discards nothing. A refused unmap is no refusal: that domain is asleep,
 * the call goes on and returns it at the end. */
cca_status cca_sleep(cca_allocator *a, unsigned flags, cca_sleep_report *report) {
    cca_sleep_report local = {0};
    cca_status st = sleep_begin(a, report, "cca_sleep");
    if (st != CCA_OK)
        return st;
    if ((st = ccai_sleep_can(a, flags, false)) != CCA_OK) { /* the copy ops: each awake domain's sleep asks */
        ccai_unlock(a);
        return cca_error_prefix(st, "cca_sleep");
    }
    size_t count = 0;
    for (cca_domain *d = &a->root; d; d = d->next)
        count++;
    bool *before = malloc(count * sizeof *before); /* asleep before this call */
    if (!before) {
        ccai_unlock(a);
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "cca_sleep: host malloc failed; nothing changed");
    }
    size_t k = 0;
    for (cca_domain *d = &a->root; d; d = d->next)
        before[k++] = d->sleep != NULL;
    cca_domain *failed = NULL;
    cca_status unmap_st = CCA_OK;
    char unmap_why[CCAI_ERROR_CAP] = "";
    /* DISCARD keeps no copy, so a domain discarded before another refuses
     * could not be woken with its bytes: every wait that may refuse comes
     * first, before any domain is discarded */
    for (cca_domain *d = &a->root; d && (flags & CCA_SLEEP_DISCARD) && st == CCA_OK; d = d->next)
        if (!d->sleep && (st = ccai_sleep_ready(a, d)) != CCA_OK) {
            st = sleep_named(st, "cca_sleep", d);
            free(before);
            ccai_unlock(a);
            return st;
        }
    for (cca_domain *d = &a->root; d && !failed; d = d->next) {
        bool slept = false;
        cca_status one = ccai_sleep_domain(a, d, flags, &local, &slept);
        if (one != CCA_OK && d->sleep && unmap_st == CCA_OK) { /* asleep all the same */
            unmap_st = sleep_named(one, "cca_sleep", d);
            snprintf(unmap_why, sizeof unmap_why, "%s", cca_last_error());
        } else if (one != CCA_OK && !d->sleep) {
            failed = d;
            st = one;
        }
    }
    if (failed) {
        char why[CCAI_ERROR_CAP];
        snprintf(why, sizeof why, "%s", cca_last_error());
        size_t undone = 0, stuck = 0;
        cca_sleep_report back = {0};
        k = 0;
        for (cca_domain *d = &a->root; d != failed; d = d->next, k++) {
            if (before[k] || !d->sleep)
                continue;
            if (ccai_wake_domain(a, d, &back) == CCA_OK)
                undone++;
            else
                stuck++;
        }
        memset(&local, 0, sizeof local);
        st = cca_set_error(st, "cca_sleep(%s): %s; the %zu domains this call had put to sleep were woken again%s%s",
                           failed->name, why, undone, stuck ? " (some could not be: they stay asleep)" : "",
                           undone && (flags & CCA_SLEEP_DISCARD) ? " (DISCARD: their contents are undefined)" : "");
    } else if (unmap_st != CCA_OK) {
        st = cca_set_error(unmap_st, "%s", unmap_why);
    }
    free(before);
    ccai_unlock(a);
    if (report)
        *report = local;
    return st;
}

/* Every sleeping domain, in the same order. The device's free memory is
 * asked once for all of them first: short, nothing is woken. A refusal
 * after that stops there: the domains woken stay awake, the rest asleep. */
cca_status cca_wake(cca_allocator *a, cca_sleep_report *report) {
    cca_sleep_report local = {0};
    cca_status st = sleep_begin(a, report, "cca_wake");
    if (st != CCA_OK)
        return st;
    size_t need = 0, asleep = 0;
    for (cca_domain *d = &a->root; d && st == CCA_OK; d = d->next) {
        if (!d->sleep)
            continue;
        asleep++;
        need += ccai_wake_need(d, &st);
    }
    ccai_device_room room = {false, 0};
    size_t missing = 0;
    char unsynced[CCAI_ERROR_CAP];
    if (st == CCA_OK && (st = ccai_wake_room(a, need, &room, &missing, unsynced)) != CCA_OK) {
        if (missing)
            st = cca_set_error(CCA_ERR_OUT_OF_MEMORY,
                               "cca_wake: %zu bytes of pages needed for %zu sleeping domains, the device has %zu "
                               "free: %zu bytes missing%s%s; nothing woken",
                               need, asleep, room.free, missing, *unsynced ? "; the cache was kept: " : "", unsynced);
        else
            st = cca_set_error(st, "cca_wake: %zu bytes of pages needed: %s%s%s; nothing woken", need, cca_last_error(),
                               *unsynced ? "; the cache was kept: " : "", unsynced);
    }
    size_t woken = 0;
    for (cca_domain *d = &a->root; d && st == CCA_OK; d = d->next) {
        if (!d->sleep)
            continue;
        st = ccai_wake_domain(a, d, &local);
        if (st == CCA_OK)
            woken++;
        else
            st = cca_set_error(st, "cca_wake(%s): %s; %zu domains woken before it stay awake, the rest asleep", d->name,
                               cca_last_error(), woken);
    }
    ccai_unlock(a);
    if (report)
        *report = local;
    return st;
}
