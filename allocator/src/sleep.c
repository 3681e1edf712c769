/*
 * sleep.c — sleep and wake: a domain's device memory given back while its
 * blocks stay live, every pointer valid, and restored at the same
 * addresses (cca_domain_sleep, cca_domain_wake, cca_sleep, cca_wake).
 *
 * - Built on pages (kinds/pages.c): a segment is a reserved address range,
 *   so unmapping every page of a domain gives its memory back while the
 *   ranges, and so every address, stay reserved. Classic segments cannot
 *   (cudaFree gives the addresses back too): refused, nothing changed.
 *
 *     awake   pages |##|##|##|##|##|  |  |      blocks [A live |B free|C live|tail ]
 *     asleep  pages |  |  |  |  |  |  |  |      A's and C's bytes on the host
 *     woken   pages |##|##|  |##|##|  |  |      only the pages under A and C
 *
 * - Sleep, the steps: (1) wait for the work that may touch d's blocks: one
 *   stream_synchronize per stream (segments' key streams, live blocks'
 *   streams and users, pending queues), the device past 16 streams or
 *   without the op (pages_quiesce's rule), then complete the pending frees;
 *   a block of d still pending refuses the sleep; (2) one host allocation
 *   of the live bytes (each live block's requested size rounded up to
 *   CCA_GRANULARITY: never the free space, nor a block's slack), (3) one
 *   copy per live block into it, (4) one copy_wait, (5) d is asleep: every
 *   mapped page of d's segments is unmapped (ranges kept reserved), every
 *   free block marked `unmapped`. DISCARD skips (2)-(4). Until (5) a
 *   failure changes nothing (the host memory goes back); at (5) a refused
 *   unmap leaves d asleep, its bytes on the host, the refused pages mapped
 *   and counted, for the next sleep call to try again.
 * - Not done: overlapping the copy of one chunk with the unmap of the
 *   previous. The copies are all queued, waited for once, then the unmaps
 *   run: on CUDA the copies overlap one another on the copy stream, not the
 *   unmaps; on the simulated device everything is sequential anyway.
 * - While asleep: cca_alloc(_in) refused (CCA_ERR_ASLEEP, ccai_sleep_refuse,
 *   one branch in alloc.c); cca_free allowed: the block turns free (its
 *   `unmapped` mark is set again at wake or release, ccai_sleep_forget), its
 *   copy is not copied back; trim and the OOM retry find nothing mapped in
 *   d (pages.c counts what a refused unmap left as held, so they leave it),
 *   and trim may give back a range whose blocks were all freed.
 * - Wake, all or nothing: the pages under d's live and pending blocks (not
 *   its free space) are counted, the cap and the device's free memory asked
 *   once for all of them (short: CCA_ERR_OUT_OF_MEMORY saying how many
 *   bytes are missing, nothing mapped); mapped run by run; every live block
 *   still recorded copied back; one copy_wait; the host memory freed. A
 *   refusal unmaps what the call mapped: d stays asleep, the copy intact.
 * - Costs: sleep O(d's blocks + pages / 64) plus a copy per live block and an
 *   unmap per map (whole maps) or run; wake the same with maps; a host
 *   record of 24 bytes per live block.
 */
#include "domain.h"
#include "kinds/pages.h"

#include <stdlib.h>
#include <string.h>

typedef struct sleep_entry {
    uintptr_t addr; /* the block's address (its block found again by the live map) */
    size_t len;     /* bytes copied: its requested size rounded up to CCA_GRANULARITY */
    size_t off;     /* where in host */
} sleep_entry;

/* A sleeping domain's record: its live blocks at sleep and their copy. */
struct ccai_sleep {
    void *host; /* one host_alloc of host_size bytes; NULL with DISCARD or no live bytes */
    size_t host_size;
    size_t n;
    sleep_entry *e; /* in address order within each segment */
};

size_t ccai_sleep_host_bytes(const cca_domain *d) {
    return d->sleep ? d->sleep->host_size : 0;
}

cca_status ccai_sleep_refuse(cca_allocator *a, cca_domain *d) {
    return cca_set_error(CCA_ERR_ASLEEP, "%s: domain '%s' is asleep (cca_domain_wake first)", a->allocating,
                         d->name);
}

/* ---- the record ---------------------------------------------------------- */

static void mark_free_unmapped(cca_domain *d) {
    for (ccai_segment *s = d->segs; s; s = s->dnext)
        for (ccai_block *b = s->first; b; b = b->next)
            if (b->state == CCAI_FREE)
                b->unmapped = true; /* conservative: the page test drops it when all mapped */
}

static void free_host(cca_allocator *a, cca_domain *d, void *host, size_t size) {
    if (!host)
        return;
    if (cca_upstream_host_free(ccai_upstream_op(a), host, size) != CCA_OK)
        ccai_log("domain '%s': the upstream refused to take back %zu bytes of host memory (they stay with it): %s",
                 d->name, size, cca_last_error());
}

static void record_free(cca_allocator *a, cca_domain *d, struct ccai_sleep *r) {
    free_host(a, d, r->host, r->host_size);
    free(r->e);
    free(r);
}

void ccai_sleep_forget(cca_allocator *a, cca_domain *d, bool mark) {
    if (!d->sleep)
        return;
    if (mark)
        mark_free_unmapped(d);
    char saved[CCAI_ERROR_CAP];
    ccai_error_save(saved);
    record_free(a, d, d->sleep);
    ccai_error_restore(saved);
    d->sleep = NULL;
}

ccai_broken ccai_sleep_check(const cca_allocator *a, const cca_domain *d) {
    const struct ccai_sleep *r = d->sleep;
    size_t bytes = 0;
    for (size_t i = 0; i < r->n; i++) {
        bytes += r->e[i].len;
        if (r->host && r->e[i].off + r->e[i].len > r->host_size)
            return ccai_broke(CCAI_INV_ASLEEP, "a sleeping block's copy lies past its domain's host memory");
    }
    if (r->host ? bytes != r->host_size : r->host_size != 0)
        return ccai_broke(CCAI_INV_ASLEEP, "a sleeping domain's host bytes are not its copies' sum");
    size_t k = 0; /* live blocks of d, each recorded (a binary search would do; tests only) */
    for (const ccai_segment *s = d->segs; s; s = s->dnext)
        for (const ccai_block *b = s->first; b; b = b->next) {
            if (b->state != CCAI_LIVE)
                continue;
            k++;
            bool found = false;
            for (size_t i = 0; i < r->n && !found; i++)
                found = r->e[i].addr == b->addr && r->e[i].len <= b->size;
            if (!found)
                return ccai_broke(CCAI_INV_ASLEEP, "a live block of a sleeping domain has no copy in its record");
        }
    (void)a;
    return k <= r->n ? CCAI_HOLDS : ccai_broke(CCAI_INV_ASLEEP, "a sleeping domain has more live blocks than copies");
}

/* ---- sleep ----------------------------------------------------------------- */

/* Add s to the streams to wait for, once; false when the list is full. */
static bool wait_for(cca_stream *list, size_t *n, cca_stream s) {
    for (size_t i = 0; i < *n; i++)
        if (list[i] == s)
            return true;
    if (*n == 16)
        return false;
    list[(*n)++] = s;
    return true;
}

/* Step 1: the work that may touch d's blocks done, pending frees completed
 * (pages_quiesce's rule, over d's streams). */
static cca_status quiesce(cca_allocator *a, cca_domain *d) {
    cca_stream streams[16];
    size_t n = 0;
    bool fits = a->sync_head == NULL;
    for (const ccai_segment *s = d->segs; s && fits; s = s->dnext) {
        if (!s->shared)
            fits = wait_for(streams, &n, s->stream);
        for (const ccai_block *b = s->first; b && fits; b = b->next) {
            if (b->state == CCAI_FREE)
                continue;
            fits = wait_for(streams, &n, b->alloc_stream);
            for (size_t i = 0; b->uses && i < b->uses->count && fits; i++)
                fits = wait_for(streams, &n, b->uses->streams[i]);
        }
    }
    for (const ccai_pending_queue *q = a->queues; q && fits; q = q->next)
        fits = wait_for(streams, &n, q->stream);
    if (!fits || !ccai_upstream_has_stream_sync(a->upstream))
        return ccai_stream_sync_device(a);
    for (size_t i = 0; i < n; i++) {
        cca_status st = cca_upstream_stream_synchronize(ccai_upstream_op(a), streams[i]);
        if (st != CCA_OK)
            return cca_set_error(st, "synchronize of stream %p failed: %s", streams[i], cca_last_error());
    }
    ccai_stream_complete_all(a);
    return CCA_OK;
}

/* d's live blocks (n) and the bytes their copies take; pending ones. */
static void count_live(const cca_domain *d, size_t *n, size_t *bytes, size_t *pending) {
    *n = *bytes = *pending = 0;
    for (const ccai_segment *s = d->segs; s; s = s->dnext)
        for (const ccai_block *b = s->first; b; b = b->next) {
            *pending += b->state == CCAI_PENDING;
            if (b->state == CCAI_LIVE) {
                (*n)++;
                *bytes += ccai_round_up(b->requested, CCA_GRANULARITY);
            }
        }
}

/* Step 5: every mapped page of d unmapped (a refusal: the first kept, the
 * rest still tried). */
static cca_status unmap_all(cca_allocator *a, cca_domain *d, size_t *bytes) {
    cca_status first = CCA_OK;
    char why[CCAI_ERROR_CAP] = "";
    mark_free_unmapped(d);
    for (ccai_segment *s = d->segs; s; s = s->dnext) {
        if (!s->mapped_pages)
            continue;
        cca_status st = ccai_expandable_unmap_pages(a, s, 0, s->npages, bytes);
        if (st != CCA_OK && first == CCA_OK) {
            first = st;
            snprintf(why, sizeof why, "%s", cca_last_error());
        }
    }
    if (first == CCA_OK)
        return CCA_OK;
    return cca_set_error(CCA_ERR_UPSTREAM,
                         "asleep, every live byte on the host, but the upstream refused an unmap: %zu bytes stay "
                         "mapped (a later cca_domain_sleep tries again): %s",
                         d->c.reserved, why);
}

/* Steps 2-4: the record and, unless discard, the copy on the host. */
static cca_status copy_out(cca_allocator *a, cca_domain *d, bool discard, struct ccai_sleep **out,
                           cca_sleep_report *r) {
    size_t n, bytes, pending;
    count_live(d, &n, &bytes, &pending);
    if (pending)
        return cca_set_error(CCA_ERR_NOT_READY, "%zu freed blocks still wait on stream events; nothing changed",
                             pending);
    struct ccai_sleep *rec = calloc(1, sizeof *rec);
    sleep_entry *e = n ? malloc(n * sizeof *e) : NULL;
    if (!rec || (n && !e)) {
        free(rec);
        free(e);
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "host malloc failed for the record of %zu blocks", n);
    }
    rec->e = e;
    rec->n = n;
    size_t k = 0, off = 0;
    for (const ccai_segment *s = d->segs; s; s = s->dnext)
        for (const ccai_block *b = s->first; b; b = b->next)
            if (b->state == CCAI_LIVE) {
                e[k] = (sleep_entry){b->addr, ccai_round_up(b->requested, CCA_GRANULARITY), off};
                off += e[k++].len;
            }
    cca_upstream *u = ccai_upstream_op(a);
    cca_status st = CCA_OK;
    if (!discard && bytes) {
        st = cca_upstream_host_alloc(u, bytes, &rec->host);
        if (st == CCA_OK)
            rec->host_size = bytes;
        for (size_t i = 0; i < n && st == CCA_OK; i++)
            st = cca_upstream_copy(u, (char *)rec->host + e[i].off, (const void *)e[i].addr, e[i].len, 1);
        if (rec->host) { /* queued copies done (or failed) before the host memory can go */
            char why[CCAI_ERROR_CAP];
            snprintf(why, sizeof why, "%s", cca_last_error());
            cca_status w = cca_upstream_copy_wait(u);
            st = st != CCA_OK ? cca_set_error(st, "%s", why) : w;
        }
    }
    if (st != CCA_OK) {
        char why[CCAI_ERROR_CAP];
        snprintf(why, sizeof why, "%s", cca_last_error());
        record_free(a, d, rec);
        return cca_set_error(st, "%s; nothing changed", why);
    }
    r->blocks += n;
    r->bytes_copied += discard ? 0 : bytes;
    r->host_bytes += rec->host_size;
    *out = rec;
    return CCA_OK;
}

/* The checks every sleep makes before it changes anything. */
static cca_status can_sleep(cca_allocator *a, unsigned flags) {
    if (flags & ~CCA_SLEEP_DISCARD)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "unknown flags 0x%x", flags & ~CCA_SLEEP_DISCARD);
    if (!a->expandable)
        return cca_set_error(CCA_ERR_UPSTREAM,
                             "sleep needs expandable segments (upstream '%s' %s): classic segments give their "
                             "addresses back with their memory; nothing changed",
                             cca_upstream_name(a->upstream),
                             cca_upstream_has_vm(a->upstream) ? "has virtual memory, but expandable:0"
                                                              : "has no virtual-memory operations");
    if (!(flags & CCA_SLEEP_DISCARD) && !cca_upstream_has_copy(a->upstream))
        return cca_set_error(CCA_ERR_UPSTREAM,
                             "upstream '%s' has no host staging memory or copies (only CCA_SLEEP_DISCARD can "
                             "sleep); nothing changed",
                             cca_upstream_name(a->upstream));
    return CCA_OK;
}

/* One domain to sleep, under the lock; *slept: this call put it to sleep. */
static cca_status sleep_locked(cca_allocator *a, cca_domain *d, unsigned flags, cca_sleep_report *r, bool *slept) {
    *slept = false;
    cca_status st = can_sleep(a, flags);
    if (st != CCA_OK)
        return st;
    if (d->sleep) /* asleep already: only what a refused unmap left */
        return d->c.reserved ? unmap_all(a, d, &r->bytes_unmapped) : CCA_OK;
    if ((st = quiesce(a, d)) != CCA_OK)
        return cca_set_error(st, "%s; nothing changed", cca_last_error());
    struct ccai_sleep *rec = NULL;
    if ((st = copy_out(a, d, flags & CCA_SLEEP_DISCARD, &rec, r)) != CCA_OK)
        return st;
    d->sleep = rec;
    *slept = true;
    return unmap_all(a, d, &r->bytes_unmapped);
}

/* ---- wake ------------------------------------------------------------------ */

typedef struct page_span {
    ccai_segment *s;
    size_t lo, hi; /* pages [lo, hi) */
} page_span;

/* The page spans under d's live and pending blocks, merged where blocks
 * share a page; *need: the bytes of their unmapped pages. */
static cca_status spans_of(const cca_domain *d, page_span **out, size_t *count, size_t *need) {
    size_t n = 0, cap = 0;
    page_span *v = NULL;
    *need = 0;
    for (ccai_segment *s = d->segs; s; s = s->dnext)
        for (const ccai_block *b = s->first; b; b = b->next) {
            if (b->state == CCAI_FREE)
                continue;
            size_t lo = (b->addr - s->base) >> s->page_shift;
            size_t hi = ((b->addr + b->size - 1 - s->base) >> s->page_shift) + 1;
            if (n && v[n - 1].s == s && lo <= v[n - 1].hi) {
                v[n - 1].hi = hi > v[n - 1].hi ? hi : v[n - 1].hi;
                continue;
            }
            if (n == cap) {
                cap = cap ? 2 * cap : 16;
                page_span *bigger = realloc(v, cap * sizeof *v);
                if (!bigger) {
                    free(v);
                    return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "host malloc failed for the pages to map");
                }
                v = bigger;
            }
            v[n++] = (page_span){s, lo, hi};
        }
    for (size_t i = 0; i < n; i++)
        *need += ccai_expandable_missing(v[i].s, v[i].lo, v[i].hi) * v[i].s->page;
    *out = v;
    *count = n;
    return CCA_OK;
}

/* Unmap spans [0, n) again after a refusal (what they had before is of no
 * use: d stays asleep). The caller's message is kept. */
static void unmap_spans(cca_allocator *a, page_span *v, size_t n) {
    char why[CCAI_ERROR_CAP];
    snprintf(why, sizeof why, "%s", cca_last_error());
    for (size_t i = n; i-- > 0;)
        (void)ccai_expandable_unmap_pages(a, v[i].s, v[i].lo, v[i].hi, NULL);
    cca_set_error(CCA_OK, "%s", why);
}

/* Copy back every live block still recorded, then wait. */
static cca_status copy_in(cca_allocator *a, cca_domain *d, size_t *bytes) {
    struct ccai_sleep *rec = d->sleep;
    cca_upstream *u = ccai_upstream_op(a);
    cca_status st = CCA_OK;
    if (!rec->host)
        return CCA_OK;
    for (size_t i = 0; i < rec->n && st == CCA_OK; i++) {
        const ccai_block *b = ccai_live_map_find(&a->live, rec->e[i].addr);
        if (!b || b->state != CCAI_LIVE || b->segment->domain != d) /* freed while asleep: its copy dropped */
            continue;
        st = cca_upstream_copy(u, (void *)rec->e[i].addr, (char *)rec->host + rec->e[i].off, rec->e[i].len, 0);
        *bytes += st == CCA_OK ? rec->e[i].len : 0;
    }
    char why[CCAI_ERROR_CAP];
    snprintf(why, sizeof why, "%s", cca_last_error());
    cca_status w = cca_upstream_copy_wait(u);
    return st != CCA_OK ? cca_set_error(st, "%s", why) : w;
}

static cca_status wake_locked(cca_allocator *a, cca_domain *d, cca_sleep_report *r) {
    if (!d->sleep)
        return CCA_OK;
    page_span *v = NULL;
    size_t n = 0, need = 0;
    cca_status st = spans_of(d, &v, &n, &need);
    if (st != CCA_OK)
        return st;
    ccai_device_room room = {false, 0};
    if ((st = ccai_cap_room(a, need)) != CCA_OK) {
        free(v);
        return cca_set_error(st, "%zu bytes of pages needed: %s; still asleep, its host copy intact", need,
                             cca_last_error());
    }
    if (need && ccai_device_room_for(a, &room, need, "the wake") != CCA_OK) {
        free(v);
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY,
                             "%zu bytes of pages needed, the device has %zu free: %zu bytes missing; still asleep, "
                             "its host copy intact",
                             need, room.free, need - room.free);
    }
    size_t done = 0;
    for (; done < n && st == CCA_OK; done++)
        st = ccai_expandable_map_pages(a, v[done].s, v[done].lo, v[done].hi, &room);
    if (st != CCA_OK) { /* the refused span unmapped its own runs (map_missing) */
        unmap_spans(a, v, done - 1);
        free(v);
        return cca_set_error(st, "%zu bytes of pages needed, a map was refused: %s; still asleep, its host copy intact",
                             need, cca_last_error());
    }
    size_t copied = 0;
    if ((st = copy_in(a, d, &copied)) != CCA_OK) {
        unmap_spans(a, v, n);
        free(v);
        return cca_set_error(st, "%s; still asleep, its host copy intact", cca_last_error());
    }
    free(v);
    r->blocks += d->sleep->n;
    r->bytes_copied += copied;
    r->bytes_mapped += need;
    r->host_bytes += d->sleep->host_size;
    ccai_sleep_forget(a, d, true);
    return CCA_OK;
}

/* ---- the public calls ------------------------------------------------------- */

static cca_status begin(cca_allocator *a, cca_sleep_report *r, const char *fn) {
    if (r)
        memset(r, 0, sizeof *r);
    if (!a)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "%s: allocator is NULL", fn);
    return ccai_lock(a, fn);
}

static cca_status named(cca_status st, const char *fn, const cca_domain *d) {
    return st == CCA_OK ? st : cca_set_error(st, "%s(%s): %s", fn, d->name, cca_last_error());
}

cca_status cca_domain_sleep(cca_allocator *a, cca_domain *h, unsigned flags, cca_sleep_report *report) {
    cca_sleep_report local = {0};
    cca_status st = begin(a, report, "cca_domain_sleep");
    if (st != CCA_OK)
        return st;
    cca_domain *d = ccai_domain_lookup(a, h);
    bool slept;
    if (!d)
        st = cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_domain_sleep: domain %p is not one of this allocator's",
                           (void *)h);
    else
        st = named(sleep_locked(a, d, flags, &local, &slept), "cca_domain_sleep", d);
    ccai_unlock(a);
    if (report)
        *report = local;
    return st;
}

cca_status cca_domain_wake(cca_allocator *a, cca_domain *h, cca_sleep_report *report) {
    cca_sleep_report local = {0};
    cca_status st = begin(a, report, "cca_domain_wake");
    if (st != CCA_OK)
        return st;
    cca_domain *d = ccai_domain_lookup(a, h);
    if (!d)
        st = cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_domain_wake: domain %p is not one of this allocator's",
                           (void *)h);
    else
        st = named(wake_locked(a, d, &local), "cca_domain_wake", d);
    ccai_unlock(a);
    if (report)
        *report = local;
    return st;
}

/* Every domain: the default first, then in creation order. A refusal
 * wakes the domains this call put to sleep again (their bytes just went
 * to the host: the device has their room). A refused unmap is no refusal:
 * that domain is asleep, the call goes on and returns it at the end. */
cca_status cca_sleep(cca_allocator *a, unsigned flags, cca_sleep_report *report) {
    cca_sleep_report local = {0};
    cca_status st = begin(a, report, "cca_sleep");
    if (st != CCA_OK)
        return st;
    if ((st = can_sleep(a, flags)) != CCA_OK) {
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
    for (cca_domain *d = &a->root; d && !failed; d = d->next) {
        bool slept = false;
        cca_status one = sleep_locked(a, d, flags, &local, &slept);
        if (one != CCA_OK && d->sleep && unmap_st == CCA_OK) { /* asleep all the same */
            unmap_st = named(one, "cca_sleep", d);
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
            if (wake_locked(a, d, &back) == CCA_OK)
                undone++;
            else
                stuck++;
        }
        memset(&local, 0, sizeof local);
        st = cca_set_error(st, "cca_sleep(%s): %s; the %zu domains this call had put to sleep were woken again%s",
                           failed->name, why, undone, stuck ? " (some could not be: they stay asleep)" : "");
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
    cca_status st = begin(a, report, "cca_wake");
    if (st != CCA_OK)
        return st;
    size_t need = 0, asleep = 0;
    for (cca_domain *d = &a->root; d && st == CCA_OK; d = d->next) {
        if (!d->sleep)
            continue;
        asleep++;
        page_span *v = NULL;
        size_t n = 0, one = 0;
        st = spans_of(d, &v, &n, &one);
        free(v);
        need += one;
    }
    ccai_device_room room = {false, 0};
    if (st == CCA_OK && need && (st = ccai_cap_room(a, need)) != CCA_OK)
        st = cca_set_error(st, "cca_wake: %zu bytes of pages needed: %s; nothing woken", need, cca_last_error());
    if (st == CCA_OK && need && ccai_device_room_for(a, &room, need, "the wake") != CCA_OK)
        st = cca_set_error(CCA_ERR_OUT_OF_MEMORY,
                           "cca_wake: %zu bytes of pages needed for %zu sleeping domains, the device has %zu free: "
                           "%zu bytes missing; nothing woken",
                           need, asleep, room.free, need - room.free);
    size_t woken = 0;
    for (cca_domain *d = &a->root; d && st == CCA_OK; d = d->next) {
        if (!d->sleep)
            continue;
        st = wake_locked(a, d, &local);
        if (st == CCA_OK)
            woken++;
        else
            st = cca_set_error(st, "cca_wake(%s): %s; %zu domains woken before it stay awake, the rest asleep",
                               d->name, cca_last_error(), woken);
    }
    ccai_unlock(a);
    if (report)
        *report = local;
    return st;
}
