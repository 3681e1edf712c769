/*
 * check.c — the allocator checking itself: the invariant walk behind
 * cca_check_invariants, the diagnosis of a bad pointer, and the assertion
 * levels' failure (CCA_DEBUG, debug.h).
 *
 * - ccai_check_locked walks every segment's block chain, the free index,
 *   the live map, the domains and the pending queues, and recounts what
 *   the counters claim: the invariants of invariants.h's table (a kind's
 *   `check` adds its own, kind.h). Each check returns a ccai_broken (id and
 *   detail); the message ("I2: two neighbouring free blocks") is formatted
 *   once, at the end: CCA_ERR_INVARIANT with the id in the message.
 * - Cost O(blocks + segments + pages / 64 + pending waits + domains x
 *   pools x streams x 6): a pages segment's bitmaps a word (64 pages) at a
 *   time (the kind's check); each key stream's class bitmap a row of 64
 *   words at a time, an empty row by one OR of its words (free_index.c). Allocates nothing, so it runs
 *   after every public call (CCA_DEBUG=2) and inside fault-injection tests.
 * - ccai_diagnose_pointer turns "not in the live map" into the mistake:
 *   double free (of a pending or a free block), interior pointer (block
 *   start and offset), pointer inside a free block, or never handed out.
 *   It walks the segment holding the pointer: O(segments + that segment's
 *   blocks), on the error path only.
 */
#include "../core/internal.h"
#include "check.h"
#include "../domain_set.h"  /* the domains' records and numbers */
#include "../sleep.h"       /* I10 */
#include "../kinds/pages.h" /* ccai_pages_mapped: I7 */

#include <stdio.h>
#include <string.h>
#include <stdlib.h>

/* ---- invariants --------------------------------------------------------- */

typedef struct index_check {
    const cca_domain *domain;
    int pool;
    size_t count, bytes;
    ccai_broken error;
} index_check;

static bool check_index_entry(void *user, const ccai_block *b) {
    index_check *ic = user;
    if (b->state != CCAI_FREE)
        return ic->error = ccai_broke(CCAI_INV_INDEXED, "a non-free block is in the free index"), false;
    if ((int)b->segment->pool != ic->pool)
        return ic->error = ccai_broke(CCAI_INV_INDEXED, "a block is in the wrong pool's index"), false;
    if (b->segment->domain != ic->domain)
        return ic->error = ccai_broke(CCAI_INV_DOMAINS, "a block is in another domain's free index"), false;
    ic->count++;
    ic->bytes += b->size;
    return true;
}

static ccai_broken check_block(const ccai_block *b) {
    if (b->state == CCAI_FREE)
        return b->uses || b->needs_sync ? ccai_broke(CCAI_INV_WAITS, "a free block has stream uses or waits")
                                        : CCAI_HOLDS;
    const ccai_stream_use *u = b->uses;
    bool waits = b->needs_sync || (u && u->outstanding > 0);
    if ((b->state == CCAI_PENDING) != waits)
        return ccai_broke(CCAI_INV_WAITS, "PENDING disagrees with the block's waits");
    if (u && u->outstanding > u->wait_count)
        return ccai_broke(CCAI_INV_WAITS, "more outstanding waits than waits");
    return CCAI_HOLDS;
}

static ccai_broken check_segments(const cca_allocator *a, size_t *allocated, size_t *live_count, size_t *pending,
                                  size_t *free_bytes, size_t *free_count, size_t *waits) {
    size_t reserved = 0, segments = 0, mapped = 0, expandable = 0, space = 0;
    for (const ccai_segment *s = a->segments; s; s = s->next) {
        segments++;
        ccai_broken err = a->kind->check(s); /* the kind's own rules: pages, I7 and I9 */
        if (err.detail)
            return err;
        reserved += a->kind->reserved(s);
        if (s->expandable) {
            mapped += s->mapped_pages * s->page;
            space += s->size;
            expandable++;
        }
        uintptr_t expect = s->base;
        const uint8_t flags = ccai_segment_flags(a, s); /* each block's copy (b->seg) */
        size_t seg_live = 0, seg_live_bytes = 0;
        const ccai_block *prev = NULL;
        for (const ccai_block *b = s->first; b; prev = b, b = b->next) {
            ccai_broken err = CCAI_HOLDS;
            if (b->addr != expect)
                err = ccai_broke(CCAI_INV_TILING, "blocks do not tile their segment");
            else if (b->prev != prev || b->segment != s)
                err = ccai_broke(CCAI_INV_TILING, "broken block chain links");
            else if (b->addr % CCA_ALIGNMENT || b->size % CCA_GRANULARITY || b->size == 0)
                err = ccai_broke(CCAI_INV_ALIGNED, "misaligned block");
            else if (b->state == CCAI_FREE && prev && prev->state == CCAI_FREE)
                err = ccai_broke(CCAI_INV_COALESCED, "two neighbouring free blocks");
            else if (b->stream != s->stream)
                err.detail = "a block's key stream differs from its segment's";
            else if (b->seg != flags)
                err.detail = "a block's copy of its segment's properties is stale";
            else if (b->state > CCAI_PENDING)
                err.detail = "a block has no valid state";
            else if (b->unmapped && !s->expandable)
                err.detail = "a block of a classic segment is marked as lying on unmapped pages";
            else if (s->expandable && b->state == CCAI_FREE && !b->unmapped && !s->domain->sleep &&
                     !ccai_pages_mapped(s, b->addr, b->size))
                err = ccai_broke(
                    CCAI_INV_MAPPED,
                    "a free block lies on unmapped pages without its mark (an allocation would skip mapping them)");
            else
                err = check_block(b);
            if (err.detail)
                return err;
            expect = b->addr + b->size;
            if (b->state == CCAI_FREE) {
                *free_bytes += b->size;
                (*free_count)++;
                continue;
            }
            seg_live++;
            seg_live_bytes += b->size;
            *pending += b->state == CCAI_PENDING;
            if (b->uses)
                *waits += b->uses->outstanding;
            if (ccai_live_map_find(&a->live, b->addr) != b)
                return ccai_broke(CCAI_INV_INDEXED, "a live block is missing from the live map");
            if (s->expandable && !s->domain->sleep && !ccai_pages_mapped(s, b->addr, b->size)) /* asleep: I10 */
                return ccai_broke(CCAI_INV_MAPPED, "a live or pending block lies on an unmapped page");
        }
        if (expect != s->base + s->size)
            return ccai_broke(CCAI_INV_TILING, "blocks do not reach the end of their segment");
        *live_count += seg_live;
        *allocated += seg_live_bytes;
    }
    if (reserved != a->c.reserved || segments != a->c.segments)
        return ccai_broke(CCAI_INV_COUNTERS, "reserved bytes or segment count disagree with the segments");
    if (mapped != a->c.mapped || expandable != a->c.expandable_segments || space != a->c.address_space)
        return ccai_broke(CCAI_INV_MAPPED,
                          "mapped bytes, expandable segments or address space disagree with the segments");
    if (expandable) {
        cca_upstream_stats us;
        if (cca_upstream_get_stats(a->upstream, &us) == CCA_OK && mapped > us.vm_mapped_bytes)
            return ccai_broke(CCAI_INV_MAPPED, "more bytes mapped than the upstream counts");
    }
    return CCAI_HOLDS;
}

/* I8: every segment belongs to a domain of this allocator and is on that
 * domain's segment list; the domains that own segments are exactly those on
 * the holding list, and those asleep exactly those on the asleep list; each
 * domain's kept number is its position, unless a destroy marked them stale; each
 * domain's counters are what its segments and blocks hold; their sums are
 * the allocator's; an arena is a shared ARENA segment of its domain, and the
 * only segment of its domain's arena pool; the handle set holds every domain
 * but root.
 * O(domains + segments + blocks). */
static ccai_broken check_domains(const cca_allocator *a) {
    size_t reserved = 0, allocated = 0, requested = 0, active = 0, segments = 0, listed = 0, domains = 0;
    for (const ccai_segment *s = a->segments; s; s = s->next)
        if (!ccai_domain_valid(a, s->domain) || s->index != &s->domain->pools[s->pool])
            return ccai_broke(CCAI_INV_DOMAINS,
                              "a segment's domain is not one of the allocator's, or its index not that domain's");
    size_t holding = 0;
    for (const cca_domain *d = a->holding; d; d = d->hnext) {
        if ((d->hnext && d->hnext->hprev != d) || !d->segs || ++holding > a->c.segments)
            return ccai_broke(CCAI_INV_DOMAINS, "the holding list is broken, or names a domain without segments");
    }
    size_t asleep = 0;
    for (const cca_domain *d = a->asleep; d; d = d->snext)
        if ((d->snext && d->snext->sprev != d) || !d->sleep || ++asleep > a->domain_set.count + 1)
            return ccai_broke(CCAI_INV_DOMAINS, "the asleep list is broken, or names a domain awake");
    unsigned number = 0;
    for (const cca_domain *d = &a->root; d; d = d->next, number++) {
        if ((d->next && d->next->prev != d) || (!d->next && a->last != d))
            return ccai_broke(CCAI_INV_DOMAINS, "the domain list is broken");
        if (!a->numbers_stale && d->number != number) /* ccai_domain_number's cache */
            return ccai_broke(CCAI_INV_DOMAINS, "a domain's number is not its position in the list");
        if (d != &a->root && (++domains > a->domain_set.count || !ccai_domain_valid(a, d)))
            return ccai_broke(CCAI_INV_DOMAINS, "a domain is missing from the handle set");
        size_t r = 0, al = 0, act = 0, segs = 0;
        bool arena_found = d->arena == NULL;
        holding -= d->segs != NULL;
        asleep -= d->sleep != NULL;
        for (const ccai_segment *s = d->segs; s; s = s->dnext) {
            if (s->domain != d || (s->dnext && s->dnext->dprev != s) || ++listed > a->c.segments)
                return ccai_broke(CCAI_INV_DOMAINS,
                                  "a domain's segment list is broken or names another domain's segment");
            segs++;
            r += a->kind->reserved(s);
            arena_found |= s == d->arena;
            if (s->pool == CCAI_POOL_ARENA && s != d->arena) /* ccai_arena_fit (fit.h) would serve from it */
                return ccai_broke(CCAI_INV_DOMAINS, "a segment of a domain's arena pool is not its arena");
            for (const ccai_block *b = s->first; b; b = b->next)
                if (b->state != CCAI_FREE)
                    al += b->size, act++;
        }
        if (d->sleep) { /* I10 */
            ccai_broken err = ccai_sleep_check(a, d);
            if (err.detail)
                return err;
        }
        if (!arena_found || (d->arena && (!d->arena->shared || d->arena->pool != CCAI_POOL_ARENA)))
            return ccai_broke(CCAI_INV_DOMAINS, "a domain's arena is not a shared arena segment of that domain");
        const ccai_domain_counters *c = &d->c;
        bool hot = a->domains_tracked; /* allocated, requested, active: kept only then */
        if (r != c->reserved || segs != c->segments || (hot && (al != c->allocated || act != c->active)))
            return ccai_broke(CCAI_INV_DOMAINS, "a domain's counters disagree with its segments and blocks");
        if (c->reserved > c->reserved_peak ||
            (hot && (c->requested > c->allocated || c->allocated > c->allocated_peak ||
                     c->requested > c->requested_peak || c->active > c->active_peak)))
            return ccai_broke(CCAI_INV_DOMAINS,
                              "a domain's peak is below its current value, or requested exceeds allocated");
        reserved += c->reserved, allocated += c->allocated, requested += c->requested, active += c->active;
        segments += c->segments;
    }
    if (holding != 0 || asleep != 0)
        return ccai_broke(CCAI_INV_DOMAINS, "the holding or asleep list and the domains it names differ");
    if (domains != a->domain_set.count)
        return ccai_broke(CCAI_INV_DOMAINS, "the handle set holds a domain that is not in the list");
    if (a->domain_set.count > a->domain_set.cap / 2) /* a lookup of a missing handle stops at an empty slot */
        return ccai_broke(CCAI_INV_DOMAINS, "the handle set is more than half full");
    if (listed != a->c.segments)
        return ccai_broke(CCAI_INV_DOMAINS, "a segment is on no domain's list");
    if (reserved != a->c.reserved || segments != a->c.segments ||
        (a->domains_tracked && (allocated != a->c.allocated || requested != a->c.requested || active != a->c.active)))
        return ccai_broke(CCAI_INV_DOMAINS, "the domains' counters do not sum to the allocator's");
    return CCAI_HOLDS;
}

static ccai_broken check_queues(const cca_allocator *a, size_t waits) {
    size_t queued = 0;
    for (const ccai_pending_queue *q = a->queues; q; q = q->next) {
        const ccai_wait *last = NULL;
        for (const ccai_wait *w = q->head; w; last = w, w = w->next) {
            queued++;
            if (w->stream != q->stream || !w->event)
                return ccai_broke(CCAI_INV_WAITS, "a wait is in another stream's queue, or has no event");
            if (w->block->state != CCAI_PENDING)
                return ccai_broke(CCAI_INV_WAITS, "a queued wait belongs to a block that is not PENDING");
            if (queued > waits)
                return ccai_broke(CCAI_INV_WAITS, "more queued waits than outstanding ones (a cycle?)");
        }
        if (q->tail != last)
            return ccai_broke(CCAI_INV_WAITS, "a pending queue's tail is not its last wait");
    }
    if (queued != waits)
        return ccai_broke(CCAI_INV_WAITS, "outstanding waits and queued waits disagree");
    for (const ccai_block *b = a->sync_head; b; b = b->sync_next)
        if (!b->needs_sync || b->state != CCAI_PENDING)
            return ccai_broke(CCAI_INV_WAITS, "a block on the sync list does not need a synchronize");
    return CCAI_HOLDS;
}

static ccai_broken check_all(const cca_allocator *a) {
    size_t allocated = 0, live_count = 0, pending = 0, free_bytes = 0, free_count = 0, waits = 0;
    ccai_broken err = check_segments(a, &allocated, &live_count, &pending, &free_bytes, &free_count, &waits);
    if (err.detail)
        return err;
    size_t index_count = 0, index_bytes = 0;
    for (const cca_domain *d = &a->root; d; d = d->next) {
        for (int p = 0; p < CCAI_POOL_COUNT; p++) {
            const char *structure = ccai_free_index_check(&d->pools[p]); /* its own rules, free_index.c */
            if (structure)
                return ccai_broke(CCAI_INV_NONE, structure);
            index_check ic = {d, p, 0, 0, CCAI_HOLDS};
            ccai_free_index_walk(&d->pools[p], check_index_entry, &ic);
            if (ic.error.detail)
                return ic.error;
            if (ic.count != d->pools[p].count || ic.bytes != d->pools[p].bytes)
                return ccai_broke(CCAI_INV_NONE, "free index counters disagree with its entries");
            index_count += ic.count;
            index_bytes += ic.bytes;
        }
    }

    if (index_count != free_count || index_bytes != free_bytes)
        return ccai_broke(CCAI_INV_INDEXED, "free blocks and the free index disagree");
    if (live_count != a->live.count)
        return ccai_broke(CCAI_INV_INDEXED, "live map holds a block not in any segment");
    if (allocated != a->c.allocated || live_count != a->c.active || pending != a->c.pending)
        return ccai_broke(CCAI_INV_COUNTERS, "allocated bytes, active or pending blocks disagree with the blocks");
    if (a->c.allocated > a->c.allocated_peak || a->c.reserved > a->c.reserved_peak ||
        a->c.requested > a->c.requested_peak || a->c.active > a->c.active_peak || a->c.segments > a->c.segments_peak)
        return ccai_broke(CCAI_INV_NONE, "a peak is below its current value");
    if (a->c.requested > a->c.allocated)
        return ccai_broke(CCAI_INV_NONE, "requested bytes exceed allocated bytes");
    if ((err = check_domains(a)).detail)
        return err;
    return check_queues(a, waits);
}

const char *ccai_check_locked(const cca_allocator *a) {
    /* the calling thread's: valid until its next check, allocated never */
    static _Thread_local char message[256];
    ccai_broken err = check_all(a);
    return err.detail ? ccai_broken_message(err, message, sizeof message) : NULL;
}

cca_status cca_check_invariants(const cca_allocator *a) {
    if (!a)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_check_invariants: allocator is NULL");
    cca_allocator *m = (cca_allocator *)a;
    if (!ccai_mutex_lock(&m->lock))
        return ccai_lock_refused("cca_check_invariants");
    const char *err = ccai_check_locked(a);
    ccai_mutex_unlock(&m->lock);
    return err ? cca_set_error(CCA_ERR_INVARIANT, "invariant broken: %s", err) : CCA_OK;
}

cca_status ccai_diagnose_pointer(cca_allocator *a, const void *ptr, const char *who) {
    uintptr_t p = (uintptr_t)ptr;
    bool freeing = !strcmp(who, "cca_free"); /* the others free nothing: no "double free" */
    ccai_block *live = ccai_live_map_find(&a->live, p);
    if (live && live->state == CCAI_PENDING)
        return cca_set_error(CCA_ERR_INVALID_POINTER, "%s: %s%p%s (its free is waiting on stream events)", who,
                             freeing ? "double free of " : "", ptr, freeing ? "" : " was freed");
    for (ccai_segment *s = a->segments; s; s = s->next) {
        if (p < s->base || p >= s->base + s->size)
            continue;
        for (ccai_block *b = s->first; b; b = b->next) {
            if (p < b->addr || p >= b->addr + b->size)
                continue;
            if (b->state == CCAI_FREE && b->addr == p)
                return cca_set_error(CCA_ERR_INVALID_POINTER, "%s: %s%p%s", who, freeing ? "double free of " : "", ptr,
                                     freeing ? "" : " was freed: it starts a free block");
            if (b->state == CCAI_FREE)
                return cca_set_error(CCA_ERR_INVALID_POINTER, "%s: %p lies inside a free block (%s)", who, ptr,
                                     freeing ? "double free of a coalesced block, or stale pointer" : "stale pointer");
            return cca_set_error(CCA_ERR_INVALID_POINTER, "%s: interior pointer %p (block starts at %p, offset %zu)",
                                 who, ptr, (void *)b->addr, (size_t)(p - b->addr));
        }
    }
    /* no segment holds it: never this allocator's, or its memory is gone
     * (freed and given back, or dropped by a forced domain release) */
    return cca_set_error(CCA_ERR_INVALID_POINTER,
                         "%s: %p is not in this allocator's memory (not allocated by it, or its memory was given "
                         "back: freed and released, or dropped by a forced domain release)",
                         who, ptr);
}
