/*
 * domain.c — memory domains: named owners of segments, so that one model's
 * memory goes back whole while other models keep running.
 *
 * - A DOMAIN owns segments (expandable: address ranges); a request in d
 *   (cca_alloc_in) is served only from d's free index (`pools`) and new
 *   segments are d's, so one domain's blocks never pin another's memory (I8).
 *
 *     one domain:  [ A's weights | B's weights | A's activations | free ]
 *                  unload A -> pinned by B: nothing goes back
 *     domain A:    [ A's weights | A's activations | free ] -> released whole
 *     domain B:    [ B's weights | free ]                   -> untouched
 *
 * - The default domain is a->root; the others follow it in creation order;
 *   those owning segments are also on a->holding. a->serving is the domain
 *   the call in progress serves. A segment's domain never changes.
 * - Handles are numbers never given twice, looked up in a hash set, never
 *   read: a destroyed or foreign handle is refused.
 * - Release (cca_domain_release): synchronize, complete pending frees,
 *   count d's live and pending blocks; any: refuse (unless FORCE, which
 *   returns live blocks to the pool first); then every segment of d goes
 *   back through its kind.
 * - The footprint arena (cca_domain_reserve): one shared segment of pool
 *   ARENA in d, key stream NULL; d's requests look there first, then grow.
 * - Cached free memory stays the allocator's: trim, empty-cache and the OOM
 *   retry release free memory of every domain.
 * - A domain's number (its position in the list, the snapshots'
 *   domain_index) is kept in it: a create appends the next one, a destroy
 *   of any but the last marks every number stale, and the next lookup
 *   numbers the list again.
 * - Cost: create, handle check, destroy O(1) expected; release O(d's
 *   segments + blocks), plus O(pages) per range; per-domain stats
 *   O(pools x streams) of d's free index; a domain's number O(1), after a
 *   destroy that moved domains O(domains) once.
 */
#include "domain.h"

#include <stdlib.h>
#include <string.h>

void ccai_domain_init_root(cca_allocator *a) {
    memset(&a->root, 0, sizeof a->root);
    snprintf(a->root.name, sizeof a->root.name, "default");
    a->serving = &a->root;
    a->allocating = "cca_alloc";
    a->last = &a->root;
    a->holding = a->asleep = NULL;
    memset(&a->domain_set, 0, sizeof a->domain_set);
}

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

/* ---- handles and the handle set --------------------------------------- *
 * A caller never holds a domain's address: a handle is a number drawn once
 * per process, the k-th domain ever created (by any allocator) getting
 * k * 0x9E3779B97F4A7C15 (mod 2^64; odd, so k -> handle is one-to-one and
 * never 0 before 2^64 creates). So no handle is ever given twice: the
 * handle of a destroyed domain stays refused even when malloc gives its
 * record to the next domain (a program that unloads one model and loads
 * another does exactly that), and another allocator's handle is refused
 * too. Consecutive handles lie far apart, so an offset or interior pointer
 * names nothing either.
 *
 * The set holds every domain but root, keyed by handle, in an
 * open-addressing table with linear probing: a handle is looked up by
 * hashing its value, never by reading what it points to (it may be freed
 * or foreign memory). Deletion shifts the entries of the probe run back
 * (no tombstones), so a lookup stops at the first empty slot. The table
 * doubles at half full: O(1) expected per operation. */

static _Atomic uint64_t handles_made;

static uintptr_t new_handle(void) {
    uint64_t k = atomic_fetch_add_explicit(&handles_made, 1, memory_order_relaxed) + 1;
    return (uintptr_t)(k * 0x9E3779B97F4A7C15ull);
}

static size_t set_home(const cca_allocator *a, uintptr_t h) {
    uint64_t x = (uint64_t)h * 0x9E3779B97F4A7C15ull; /* Fibonacci hashing (garbage handles too) */
    return (size_t)(x >> 32) & (a->domain_set.cap - 1);
}

static size_t set_find(const cca_allocator *a, uintptr_t h) { /* the slot holding handle h, or cap */
    if (!a->domain_set.cap)
        return 0;
    size_t mask = a->domain_set.cap - 1;
    for (size_t i = set_home(a, h);; i = (i + 1) & mask) {
        if (!a->domain_set.slot[i])
            return a->domain_set.cap;
        if (a->domain_set.slot[i]->handle == h)
            return i;
    }
}

static void set_place(cca_allocator *a, cca_domain *d) { /* room known */
    size_t mask = a->domain_set.cap - 1, i = set_home(a, d->handle);
    while (a->domain_set.slot[i])
        i = (i + 1) & mask;
    a->domain_set.slot[i] = d;
    a->domain_set.count++;
}

/* Room for one more, before the domain is linked: the only step of
 * cca_domain_create that can fail once the record is made. */
static cca_status set_reserve(cca_allocator *a) {
    if (a->domain_set.count + 1 <= a->domain_set.cap / 2)
        return CCA_OK;
    size_t cap = a->domain_set.cap ? a->domain_set.cap * 2 : 16;
    cca_domain **slot = calloc(cap, sizeof *slot);
    if (!slot)
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "cca_domain_create: host malloc failed");
    cca_domain **old = a->domain_set.slot;
    size_t old_cap = a->domain_set.cap;
    a->domain_set.slot = slot;
    a->domain_set.cap = cap;
    a->domain_set.count = 0;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i])
            set_place(a, old[i]);
    free(old);
    return CCA_OK;
}

static void set_erase(cca_allocator *a, const cca_domain *d) {
    size_t mask = a->domain_set.cap - 1, hole = set_find(a, d->handle);
    ccai_assert(hole != a->domain_set.cap && a->domain_set.slot[hole] == d);
    a->domain_set.slot[hole] = NULL;
    a->domain_set.count--;
    /* shift back every later entry of the run whose home is not in (hole, i] */
    for (size_t i = (hole + 1) & mask; a->domain_set.slot[i]; i = (i + 1) & mask) {
        size_t home = set_home(a, a->domain_set.slot[i]->handle);
        bool stays = hole < i ? (home > hole && home <= i) : (home > hole || home <= i);
        if (stays)
            continue;
        a->domain_set.slot[hole] = a->domain_set.slot[i];
        a->domain_set.slot[i] = NULL;
        hole = i;
    }
}

cca_domain *ccai_domain_lookup(const cca_allocator *a, const cca_domain *handle) {
    if (!handle)
        return (cca_domain *)&a->root;
    size_t i = set_find(a, (uintptr_t)handle);
    return i == a->domain_set.cap ? NULL : a->domain_set.slot[i];
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

bool ccai_domain_valid(const cca_allocator *a, const cca_domain *d) {
    return ccai_domain_lookup(a, ccai_domain_handle(d)) == d; /* root's handle is NULL: root */
}

unsigned ccai_domain_number(const cca_allocator *a, const cca_domain *d) {
    if (a->numbers_stale) { /* a cache under the caller's lock: made again once per destroy that moved domains */
        cca_allocator *m = (cca_allocator *)a;
        unsigned k = 0;
        for (cca_domain *e = &m->root; e; e = e->next)
            e->number = k++;
        m->numbers_stale = false;
    }
    return d->number;
}

/* ---- the sleeping domains' list ----------------------------------------- */

void ccai_domain_set_sleep(cca_allocator *a, cca_domain *d, struct ccai_sleep *rec) {
    if (rec && !d->sleep)
        CCAI_LIST_PUSH(a->asleep, d, sprev, snext);
    else if (!rec && d->sleep)
        CCAI_LIST_UNLINK(a->asleep, d, sprev, snext);
    d->sleep = rec;
}

/* The counts kept only while domains are tracked, from the allocator's:
 * before the first domain, the default domain holds every block. */
static void copy_block_counts(ccai_domain_counters *to, const ccai_counters *from) {
    to->allocated = from->allocated;
    to->allocated_peak = from->allocated_peak;
    to->requested = from->requested;
    to->requested_peak = from->requested_peak;
    to->active = from->active;
    to->active_peak = from->active_peak;
    to->alloc_calls = from->alloc_calls;
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
    d->handle = new_handle();
    cca_status st = ccai_lock(a, "cca_domain_create");
    if (st != CCA_OK) {
        free(d);
        return st;
    }
    st = set_reserve(a);
    if (st != CCA_OK) {
        ccai_unlock(a);
        free(d);
        return st;
    }
    set_place(a, d);
    if (!a->domains_tracked) { /* every block so far is the default domain's */
        copy_block_counts(&a->root.c, &a->c);
        a->domains_tracked = true;
    }
    d->number = a->last->number + 1; /* stale with the rest, if they are */
    a->last->next = d;
    d->prev = a->last;
    a->last = d;
    ccai_unlock(a);
    /* Recorded once it exists (a refused create is not in the trace), and
     * outside the lock: the recorder may log. No other call can name d
     * before it is returned, so its number is set before any use. */
    if (a->trace)
        d->trace_no = ccai_trace_domain(a->trace, d->name);
    *out = ccai_domain_handle(d);
    return CCA_OK;
}

/* ---- allocating in a domain -------------------------------------------- */

cca_status cca_alloc_in(cca_allocator *a, cca_domain *h, size_t size, cca_stream s, void **out) {
    if (out)
        *out = NULL;
    if (!a || !out)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_alloc_in: %s is NULL", a ? "out" : "allocator");
    ccai_deferred_log log;
    log.set = false;
    cca_status st = ccai_lock(a, "cca_alloc_in");
    if (st != CCA_OK)
        return st;
    cca_domain *d = ccai_domain_lookup(a, h);
    if (!d) {
        st = cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_alloc_in: domain %p is not one of this allocator's",
                           (void *)h);
    } else if (size == 0) {
        st = CCA_OK;
    } else {
        a->serving = d;
        a->allocating = "cca_alloc_in";
        st = ccai_alloc_locked(a, a->serving, size, s, out, &log);
        a->serving = &a->root;
        a->allocating = "cca_alloc";
    }
    ccai_unlock(a);
    ccai_log_flush(&log);
    return st;
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
    cca_domain *d = ccai_domain_lookup(a, h);
    if (!d) {
        st = cca_set_error(CCA_ERR_INVALID_ARGUMENT, "%s: domain %p is not one of this allocator's", fn, (void *)h);
    } else {
        st = release_locked(a, d, flags, &local, fn);
        local.bytes_still_reserved = d->c.reserved;
        if (st == CCA_OK && destroy) {
            ccai_assert(d->c.segments == 0 && d->c.reserved == 0);
            ccai_assert(!d->segs);
            d->prev->next = d->next;
            if (d->next)
                d->next->prev = d->prev;
            else
                a->last = d->prev;
            a->numbers_stale |= d->next != NULL; /* the last one's going moves none */
            set_erase(a, d);
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
    cca_domain *d = ccai_domain_lookup(a, h);
    if (!d) {
        st = cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_domain_reserve: domain %p is not one of this allocator's",
                       (void *)h);
        d = &a->root; /* for the messages below, which st already skips */
    }
    if (st == CCA_OK && d->arena)
        st = cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_domain_reserve(%s): the domain has an arena already", d->name);
    if (st == CCA_OK && d->sleep)
        st = cca_set_error(CCA_ERR_ASLEEP, "cca_domain_reserve(%s): the domain is asleep (cca_domain_wake first)",
                           d->name);
    if (rounded <= SIZE_MAX / 2) /* in the kind's unit: an arena over pages is whole pages */
        rounded = a->kind->whole(a, rounded);
    if (st == CCA_OK && rounded > ccai_request_ceiling(a))
        st = cca_set_error(CCA_ERR_OUT_OF_MEMORY,
                       "cca_domain_reserve(%s): %zu bytes exceed the device, max_reserved or the address budget "
                       "(%zu bytes)",
                       d->name, rounded, ccai_request_ceiling(a));
    if (st == CCA_OK) {
        a->serving = d;
        /* the first try may fail and the retry succeed: a call that
         * succeeds leaves the caller's message as it was (ccalloc.h) */
        char saved[CCAI_ERROR_CAP];
        ccai_error_save(saved);
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

static void fill_stats(const cca_allocator *a, const cca_domain *d, cca_domain_stats *s) {
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", d->name);
    ccai_domain_counters untracked; /* no domain yet: the default one is the allocator */
    const ccai_domain_counters *c = &d->c;
    if (!a->domains_tracked) {
        untracked = d->c;
        copy_block_counts(&untracked, &a->c);
        c = &untracked;
    }
    s->allocated_bytes = c->allocated;
    s->allocated_bytes_peak = c->allocated_peak;
    s->requested_bytes = c->requested;
    s->requested_bytes_peak = c->requested_peak;
    s->reserved_bytes = c->reserved;
    s->reserved_bytes_peak = c->reserved_peak;
    s->active_blocks = c->active;
    s->active_blocks_peak = c->active_peak;
    /* asleep: its allocated bytes are on the host, and pages a refused
     * unmap left serve nothing until the wake (sleep.c) */
    s->cached_bytes = d->sleep == NULL && c->reserved >= c->allocated ? c->reserved - c->allocated : 0;
    s->segments = c->segments;
    s->alloc_calls = c->alloc_calls;
    s->upstream_allocs = c->upstream_allocs;
    s->upstream_frees = c->upstream_frees;
    s->largest_free_block = d->sleep ? 0 : ccai_domain_largest_free(d, 0); /* d's free index (I8), as cca_get_stats */
    s->fragmentation = s->cached_bytes ? 1.0 - (double)s->largest_free_block / (double)s->cached_bytes : 0.0;
    s->asleep = d->sleep != NULL;
    s->host_bytes = ccai_sleep_host_bytes(d);
}

cca_status cca_get_domain_stats(const cca_allocator *a, const cca_domain *h, cca_domain_stats *s) {
    if (!a || !s)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_get_domain_stats: %s is NULL", a ? "stats" : "allocator");
    cca_allocator *m = (cca_allocator *)a; /* the lock only */
    cca_status st = ccai_lock(m, "cca_get_domain_stats");
    if (st != CCA_OK)
        return st;
    const cca_domain *d = ccai_domain_lookup(a, h);
    if (!d)
        st = cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_get_domain_stats: domain %p is not one of this allocator's",
                       (const void *)h);
    else
        fill_stats(a, d, s);
    ccai_unlock(m);
    return st;
}

void ccai_domain_stats_json(const cca_allocator *a, FILE *f) {
    locale_t previous = ccai_numeric_begin(); /* "fragmentation": 0.5 in any locale (numeric.c) */
    fputc('[', f);
    for (const cca_domain *d = &a->root; d; d = d->next) {
        cca_domain_stats s;
        fill_stats(a, d, &s);
        fprintf(f,
                "%s{\"name\": \"%s\", \"allocated_bytes\": %zu, \"allocated_bytes_peak\": %zu, "
                "\"requested_bytes\": %zu, \"requested_bytes_peak\": %zu, \"reserved_bytes\": %zu, "
                "\"reserved_bytes_peak\": %zu, \"active_blocks\": %zu, \"active_blocks_peak\": %zu, "
                "\"cached_bytes\": %zu, \"largest_free_block\": %zu, \"segments\": %zu, \"alloc_calls\": %llu, "
                "\"upstream_allocs\": %llu, \"upstream_frees\": %llu, \"fragmentation\": %.6f, \"asleep\": %s, "
                "\"host_bytes\": %zu, \"arena_bytes\": %zu}",
                d == &a->root ? "" : ", ", s.name, s.allocated_bytes, s.allocated_bytes_peak, s.requested_bytes,
                s.requested_bytes_peak, s.reserved_bytes, s.reserved_bytes_peak, s.active_blocks,
                s.active_blocks_peak, s.cached_bytes, s.largest_free_block, s.segments,
                (unsigned long long)s.alloc_calls, (unsigned long long)s.upstream_allocs,
                (unsigned long long)s.upstream_frees, s.fragmentation, s.asleep ? "true" : "false", s.host_bytes,
                d->arena ? d->arena->size : (size_t)0);
    }
    fputc(']', f);
    ccai_numeric_end(previous);
}

/* The array's body (ccai_body_fn), under the lock. */
static int domain_stats_body(const void *ctx, FILE *f) {
    cca_allocator *m = (cca_allocator *)ctx; /* the lock is not part of the logical state */
    (void)ccai_lock(m, "cca_domain_stats_write_json"); /* never refused: the caller checked */
    ccai_domain_stats_json(m, f);
    fputc('\n', f);
    ccai_unlock(m);
    return ferror(f) ? CCAI_BODY_WRITE : CCAI_BODY_OK;
}

/* Taken under the lock into host memory and written to f after it, as the
 * snapshots are: a file that does not drain stalls this call only. */
cca_status cca_domain_stats_write_json(const cca_allocator *a, FILE *f) {
    if (!a || !f)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_domain_stats_write_json: %s is NULL", a ? "file" : "allocator");
    if (ccai_mutex_held_here(&a->lock))
        return ccai_lock_refused("cca_domain_stats_write_json");
    int bad = ccai_write_via_memory(f, domain_stats_body, a) != CCAI_BODY_OK;
    if (bad || ccai_write_failed(f))
        return cca_set_error(CCA_ERR_IO, "cca_domain_stats_write_json: write failed");
    return CCA_OK;
}
