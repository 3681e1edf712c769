/*
 * sleep.c — sleep and wake: a domain's device memory given back while its
 * blocks stay live, every pointer valid, and restored at the same
 * addresses. The steps for one domain, under the lock; the public calls
 * (cca_domain_sleep, cca_domain_wake, cca_sleep, cca_wake) are domain.c's.
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
 *   a block of d still pending refuses the sleep; (2) the live bytes
 *   (each live block's requested size rounded up to CCA_GRANULARITY: never
 *   the free space, nor a block's slack) in host chunks (CCAI_SLEEP_CHUNK,
 *   below), each one host_alloc, (3) after each, one copy per live block
 *   of it queued, (4) one copy_wait, (5) d is asleep: every
 *   mapped page of d's segments is unmapped (ranges kept reserved), every
 *   free block marked `unmapped`. DISCARD skips (2)-(4). Until (5) a
 *   failure changes nothing (the host memory goes back); at (5) a refused
 *   unmap leaves d asleep, its bytes on the host, the refused pages mapped
 *   and counted, for the next sleep call to try again.
 * - Overlap: wake maps span by span (a span: the pages under neighbouring
 *   live or pending blocks) and queues a span's copies once it is mapped,
 *   so the upstream copies it (CUDA: its copy stream; the simulated device:
 *   its copy engine's thread) while the next span is mapped. Sleep unmaps
 *   only after its one copy_wait: an unmap overlapping a copy still running
 *   would have to be undone by a map and a copy back if a later copy
 *   failed, and "until (5) nothing changes" would not hold.
 * - While asleep: cca_alloc(_in) refused (CCA_ERR_ASLEEP, ccai_sleep_refuse,
 *   one branch in alloc.c); cca_free allowed: the block turns free (its
 *   `unmapped` mark is set again at wake or release, ccai_sleep_forget), its
 *   copy is dropped (ccai_sleep_drop, one branch in cca_free) and its
 *   chunk's host memory given back with the chunk's last live block; trim and the OOM retry find nothing mapped in
 *   d (pages.c counts what a refused unmap left as held, so they leave it),
 *   and trim may give back a range whose blocks were all freed; d's live
 *   bytes stay in `allocated` but not in `reserved`, and what a refused
 *   unmap left stays in `reserved`: what compares the two (cached bytes,
 *   hold_peak's hold) counts awake domains only (ccai_cached_bytes, release.c).
 * - Wake, all or nothing: the pages under d's live and pending blocks (not
 *   its free space) are counted, the cap and the device's free memory asked
 *   once for all of them (short: the allocator's cache released as by the
 *   OOM retry, wake_room, held under hold_peak:1 as a request; short
 *   still: CCA_ERR_OUT_OF_MEMORY saying how
 *   many bytes are missing, nothing mapped); span by span, mapped, then the
 *   copies of the live blocks still recorded in it queued; one copy_wait;
 *   the host memory freed (a host_free refused is logged, once per run of
 *   refusals of the record: free_host). A refusal waits for the copies
 *   queued, then unmaps what the call mapped: d stays asleep, the copy intact (an
 *   unmap refused there leaves its pages mapped and counted, as at (5)).
 * - Costs: sleep O(d's blocks + segments x log segments + pages / 64)
 *   plus a copy per live block and an unmap per map (whole maps) or run
 *   (the record's address index: each segment's blocks in address order,
 *   the segments sorted); wake O(d's blocks + pages / 64) with maps; a
 *   host record of 64 bytes per live block (its entry, its place in the
 *   address index, a chunk record; DISCARD: 40); a free while asleep
 *   O(log blocks).
 */
#include "domain_set.h"
#include "sleep.h"
#include "kinds/pages.h"

#include <stdlib.h>
#include <string.h>

/* The host copy is in chunks, each one host_alloc: consecutive live
 * blocks packed up to CCAI_SLEEP_CHUNK bytes, a larger block alone. A
 * chunk goes back as soon as every block in it is freed (ccai_sleep_drop),
 * so the host holds the live bytes plus, per chunk part freed, less than a
 * chunk; and sleep allocates chunk k + 1 while chunk k's copies run. */
#define CCAI_SLEEP_CHUNK ((size_t)16 << 20)

typedef struct sleep_entry {
    uintptr_t addr; /* the block's address (its block found again by the live map) */
    size_t len;     /* bytes copied: its requested size rounded up to CCA_GRANULARITY; 0: dropped */
    size_t off;     /* where in its chunk */
    size_t chunk;
} sleep_entry;

typedef struct sleep_chunk {
    void *host;  /* one host_alloc of size bytes; NULL once every block in it was freed */
    size_t size; /* the sum of its entries' len at sleep */
    size_t live; /* its entries not dropped */
} sleep_chunk;

/* A sleeping domain's record: its live blocks at sleep and their copy. */
struct ccai_sleep {
    size_t host_size; /* the held chunks' bytes */
    size_t n, nchunks;
    sleep_entry *e;  /* in address order within each segment */
    sleep_chunk *c;  /* none with DISCARD or no live bytes */
    size_t *by_addr; /* e's indices by address: the free path's search */
    bool host_refused; /* the last host_free refused: its run logged once (free_host) */
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

/* One chunk's host memory back. A refusal leaves it with the upstream
 * (counted in its host_bytes_in_use) and is logged once per run of
 * refusals of r, as a failing event_query is (upstream.c): a lost device
 * refuses every chunk, and a line for each, the same line, would be one
 * per 16 MiB of the copy at the wake and one per free while asleep. */
static void free_host(cca_allocator *a, cca_domain *d, struct ccai_sleep *r, void *host, size_t size) {
    if (!host)
        return;
    bool refused = cca_upstream_host_free(ccai_upstream_op(a), host, size) != CCA_OK;
    if (refused && !r->host_refused)
        ccai_log("domain '%s': the upstream refused to take back %zu bytes of host memory (they stay with it, in its "
                 "host_bytes_in_use): %s; later refusals for this domain's copy are not logged until one is taken "
                 "back",
                 d->name, size, cca_last_error());
    r->host_refused = refused;
}

static void record_free(cca_allocator *a, cca_domain *d, struct ccai_sleep *r) {
    for (size_t k = 0; k < r->nchunks; k++)
        free_host(a, d, r, r->c[k].host, r->c[k].size);
    free(r->by_addr);
    free(r->c);
    free(r->e);
    free(r);
}

/* The entry of the block at addr, or NULL (binary search of by_addr). */
static sleep_entry *entry_at(struct ccai_sleep *r, uintptr_t addr) {
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uintptr_t x = r->e[r->by_addr[mid]].addr;
        if (x == addr)
            return &r->e[r->by_addr[mid]];
        if (x < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

void ccai_sleep_drop(cca_allocator *a, const ccai_block *b) {
    cca_domain *d = b->segment->domain;
    struct ccai_sleep *r = d->sleep;
    sleep_entry *e = entry_at(r, b->addr);
    if (!e || !e->len)
        return;
    e->len = 0;
    if (!r->nchunks)
        return;
    sleep_chunk *c = &r->c[e->chunk];
    if (--c->live == 0) {
        char saved[CCAI_ERROR_CAP];
        ccai_error_save(saved);
        free_host(a, d, r, c->host, c->size);
        ccai_error_restore(saved);
        c->host = NULL;
        r->host_size -= c->size;
    }
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
    ccai_domain_set_sleep(a, d, NULL);
}

ccai_broken ccai_sleep_check(const cca_allocator *a, const cca_domain *d) {
    const struct ccai_sleep *r = d->sleep;
    size_t held = 0;
    for (size_t k = 0; k < r->nchunks; k++) {
        size_t bytes = 0, live = 0;
        for (size_t i = 0; i < r->n; i++) /* tests only: O(n x chunks) */
            if (r->e[i].chunk == k && r->e[i].len) {
                live++;
                bytes = r->e[i].off + r->e[i].len > bytes ? r->e[i].off + r->e[i].len : bytes;
            }
        if (live != r->c[k].live || (live && !r->c[k].host) || (!live && r->c[k].host))
            return ccai_broke(CCAI_INV_ASLEEP,
                              "a sleeping domain's host chunk is held without live copies, or not with");
        if (bytes > r->c[k].size)
            return ccai_broke(CCAI_INV_ASLEEP, "a sleeping block's copy lies past its host chunk");
        held += r->c[k].host ? r->c[k].size : 0;
    }
    if (held != r->host_size)
        return ccai_broke(CCAI_INV_ASLEEP, "a sleeping domain's host bytes are not its held chunks' sum");
    for (size_t i = 1; i < r->n; i++)
        if (r->e[r->by_addr[i - 1]].addr >= r->e[r->by_addr[i]].addr)
            return ccai_broke(CCAI_INV_ASLEEP, "a sleeping domain's address index is out of order");
    size_t k = 0; /* live blocks of d, each recorded, its copy not dropped */
    for (const ccai_segment *s = d->segs; s; s = s->dnext)
        for (const ccai_block *b = s->first; b; b = b->next) {
            if (b->state != CCAI_LIVE)
                continue;
            k++;
            const sleep_entry *e = entry_at((struct ccai_sleep *)r, b->addr);
            if (!e || !e->len || e->len > b->size)
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

/* A segment's entries: e[first, first + n), in address order (I1). */
typedef struct seg_span {
    uintptr_t base;
    size_t first, n;
} seg_span;

static int span_by_base(const void *x, const void *y) {
    uintptr_t p = ((const seg_span *)x)->base, q = ((const seg_span *)y)->base;
    return (p > q) - (p < q);
}

/* The address index: each segment's entries are in address order already,
 * so the segments sorted by base give every entry's place, O(blocks +
 * segments log segments) (a sort of the entries was O(blocks log blocks),
 * 44% of a sleep of 10,000 blocks: bench/results/2026-12-01-host-scale). */
static void index_by_addr(seg_span *span, size_t nspan, size_t *idx) {
    qsort(span, nspan, sizeof *span, span_by_base);
    size_t k = 0;
    for (size_t i = 0; i < nspan; i++)
        for (size_t j = 0; j < span[i].n; j++)
            idx[k++] = span[i].first + j;
}

/* The record of d's live blocks: entries in d's order, packed into chunks
 * (host not allocated yet), and the address index. */
static cca_status record_make(const cca_domain *d, size_t n, bool discard, struct ccai_sleep **out) {
    size_t nseg = 0;
    for (const ccai_segment *s = d->segs; s; s = s->dnext)
        nseg++;
    struct ccai_sleep *rec = calloc(1, sizeof *rec);
    sleep_entry *e = n ? malloc(n * sizeof *e) : NULL;
    size_t *idx = n ? malloc(n * sizeof *idx) : NULL;
    seg_span few[8], *span = !n ? NULL : nseg <= 8 ? few : malloc(nseg * sizeof *span); /* n > 0: d has one */
    sleep_chunk *c = n && !discard ? calloc(n, sizeof *c) : NULL; /* at most one chunk per block */
    if (!rec || (n && (!e || !idx || !span)) || (n && !discard && !c)) {
        free(rec);
        free(e);
        free(idx);
        if (span != few)
            free(span);
        free(c);
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "host malloc failed for the record of %zu blocks", n);
    }
    size_t k = 0, nspan = 0;
    for (const ccai_segment *s = d->segs; s && n; s = s->dnext) {
        size_t first = k;
        for (const ccai_block *b = s->first; b; b = b->next)
            if (b->state == CCAI_LIVE) {
                size_t len = ccai_round_up(b->requested, CCA_GRANULARITY), ch = 0, off = 0;
                if (c) { /* a new chunk when this one would pass the size (a first entry always fits) */
                    ch = rec->nchunks && c[rec->nchunks - 1].size + len <= CCAI_SLEEP_CHUNK ? rec->nchunks - 1
                                                                                            : rec->nchunks++;
                    off = c[ch].size;
                    c[ch].size += len;
                    c[ch].live++;
                }
                e[k++] = (sleep_entry){b->addr, len, off, ch};
            }
        span[nspan++] = (seg_span){s->base, first, k - first};
    }
    if (n)
        index_by_addr(span, nspan, idx);
    if (span != few)
        free(span);
    rec->n = n;
    rec->e = e;
    rec->by_addr = idx;
    rec->c = c;
    *out = rec;
    return CCA_OK;
}

/* Steps 2-4: the record and, unless discard, the copy on the host: chunk
 * by chunk, allocated, then its copies queued (the next chunk is
 * allocated while they run); one wait. */
static cca_status copy_out(cca_allocator *a, cca_domain *d, bool discard, struct ccai_sleep **out,
                           cca_sleep_report *r) {
    size_t n, bytes, pending;
    count_live(d, &n, &bytes, &pending); /* pending: 0, sleep_ready saw to it */
    struct ccai_sleep *rec = NULL;
    cca_status st = record_make(d, n, discard, &rec);
    if (st != CCA_OK)
        return st;
    cca_upstream *u = ccai_upstream_op(a);
    for (size_t k = 0, i = 0; k < rec->nchunks && st == CCA_OK; k++) {
        void *host = NULL;
        if ((st = cca_upstream_host_alloc(u, rec->c[k].size, &host)) != CCA_OK)
            break;
        rec->c[k].host = host;
        rec->host_size += rec->c[k].size;
        for (; i < n && rec->e[i].chunk == k && st == CCA_OK; i++)
            st = cca_upstream_copy(u, (char *)rec->c[k].host + rec->e[i].off, (const void *)rec->e[i].addr,
                                   rec->e[i].len, 1);
    }
    if (rec->host_size) { /* queued copies done (or failed) before the host memory can go */
        char why[CCAI_ERROR_CAP];
        snprintf(why, sizeof why, "%s", cca_last_error());
        cca_status w = cca_upstream_copy_wait(u);
        st = st != CCA_OK ? cca_set_error(st, "%s", why) : w;
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

/* The checks every sleep makes before it changes anything; `copies`: the
 * sleep would copy (a domain asleep already copies nothing, its flags
 * ignored, so it needs no copy ops). */
cca_status ccai_sleep_can(cca_allocator *a, unsigned flags, bool copies) {
    if (flags & ~CCA_SLEEP_DISCARD)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "unknown flags 0x%x", flags & ~CCA_SLEEP_DISCARD);
    if (!a->expandable)
        return cca_set_error(CCA_ERR_UPSTREAM,
                             "sleep needs expandable segments (upstream '%s' %s): classic segments give their "
                             "addresses back with their memory; nothing changed",
                             cca_upstream_name(a->upstream),
                             cca_upstream_has_vm(a->upstream) ? "has virtual memory, but expandable:0"
                                                              : "has no virtual-memory operations");
    if (copies && !(flags & CCA_SLEEP_DISCARD) && !cca_upstream_has_copy(a->upstream))
        return cca_set_error(CCA_ERR_UPSTREAM,
                             "upstream '%s' has no host staging memory or copies (only CCA_SLEEP_DISCARD can "
                             "sleep); nothing changed",
                             cca_upstream_name(a->upstream));
    return CCA_OK;
}

/* What a sleep of d may be refused for before it changes anything, waited
 * for: its work (quiesce), then its freed blocks' events. */
cca_status ccai_sleep_ready(cca_allocator *a, cca_domain *d) {
    size_t n, bytes, pending;
    cca_status st = quiesce(a, d);
    if (st != CCA_OK)
        return cca_set_error(st, "%s; nothing changed", cca_last_error());
    count_live(d, &n, &bytes, &pending);
    return pending ? cca_set_error(CCA_ERR_NOT_READY, "%zu freed blocks still wait on stream events; nothing changed",
                                   pending)
                   : CCA_OK;
}

/* One domain to sleep, under the lock; *slept: this call put it to sleep. */
cca_status ccai_sleep_domain(cca_allocator *a, cca_domain *d, unsigned flags, cca_sleep_report *r, bool *slept) {
    *slept = false;
    cca_status st = ccai_sleep_can(a, flags, d->sleep == NULL);
    if (st != CCA_OK)
        return st;
    if (d->sleep) /* asleep already: only what a refused unmap left */
        return d->c.reserved ? unmap_all(a, d, &r->bytes_unmapped) : CCA_OK;
    if ((st = ccai_sleep_ready(a, d)) != CCA_OK)
        return st;
    struct ccai_sleep *rec = NULL;
    if ((st = copy_out(a, d, flags & CCA_SLEEP_DISCARD, &rec, r)) != CCA_OK)
        return st;
    ccai_domain_set_sleep(a, d, rec);
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

static bool span_holds(const page_span *v, uintptr_t addr) {
    return addr >= v->s->base + (v->lo << v->s->page_shift) && addr < v->s->base + (v->hi << v->s->page_shift);
}

/* Map span *done, the next one. A refused span unmapped its own runs
 * (map_missing). */
static cca_status map_next(cca_allocator *a, page_span *v, size_t *done, ccai_device_room *room) {
    cca_status st = ccai_expandable_map_pages(a, v[*done].s, v[*done].lo, v[*done].hi, room);
    *done += st == CCA_OK;
    return st;
}

/* Map the spans and copy back every live block still recorded, each copy
 * queued as soon as the span under it is mapped (so the upstream copies
 * one span while the next is mapped), then one wait. Entries and spans are
 * both in d's segment order and address order: one cursor walks the spans,
 * and a span without a live block (pending ones only) is mapped when the
 * cursor passes it. *done: spans mapped, in order. On failure every copy
 * queued has been waited for, so that the caller can unmap. */
static cca_status map_and_copy_in(cca_allocator *a, cca_domain *d, page_span *v, size_t n, ccai_device_room *room,
                                  size_t *done, size_t *bytes) {
    struct ccai_sleep *rec = d->sleep;
    cca_upstream *u = ccai_upstream_op(a);
    cca_status st = CCA_OK;
    size_t i = 0; /* the span holding the entry */
    for (size_t j = 0; rec->nchunks && j < rec->n && st == CCA_OK; j++) {
        const ccai_block *b = ccai_live_map_find(&a->live, rec->e[j].addr);
        if (!rec->e[j].len || !b || b->state != CCAI_LIVE || b->segment->domain != d) /* freed while asleep */
            continue;
        while (i < n && !span_holds(&v[i], rec->e[j].addr))
            i++;
        if (i == n) { /* spans_of holds every live block, in the same order: cannot happen */
            st = cca_set_error(CCA_ERR_INVARIANT, "the live block at %p lies in none of the spans to map",
                               (void *)rec->e[j].addr);
            break;
        }
        while (st == CCA_OK && *done <= i)
            st = map_next(a, v, done, room);
        const char *from = (const char *)rec->c[rec->e[j].chunk].host + rec->e[j].off;
        if (st == CCA_OK && (st = cca_upstream_copy(u, (void *)rec->e[j].addr, from, rec->e[j].len, 0)) == CCA_OK)
            *bytes += rec->e[j].len;
    }
    while (st == CCA_OK && *done < n) /* the spans after the last copy: pending blocks' */
        st = map_next(a, v, done, room);
    char why[CCAI_ERROR_CAP];
    snprintf(why, sizeof why, "%s", cca_last_error());
    cca_status w = rec->host_size ? cca_upstream_copy_wait(u) : CCA_OK;
    return st != CCA_OK ? cca_set_error(st, "%s", why) : w;
}

/* Room for a wake's `need` bytes of pages (wake_room, below): max_reserved, then the device's
 * free memory (one mem_info, kept in *room for the maps). Short, the
 * allocator's cached memory goes first, as for an allocation's OOM retry
 * (every domain's: release.c): frees pending are waited for first (their
 * blocks cached then, as the retry's step 2 does); then only when
 * releasing can help (ccai_release_can_help), after waiting for the work
 * that may touch it (quiesce: without it nothing is released), the
 * shortfall, then all of it; the question is asked again after each. Else the first refusal:
 * CCA_ERR_OUT_OF_MEMORY, *missing the bytes the device lacks (0: the cap
 * refused), nothing released; a wait that failed is in `unsynced` (else
 * ""), for the caller's message. */
static cca_status room_or_release(cca_allocator *a, size_t need, ccai_device_room *room, size_t *missing,
                                  char unsynced[CCAI_ERROR_CAP]) {
    *missing = 0;
    unsynced[0] = '\0';
    if (!need)
        return CCA_OK;
    cca_status st = ccai_cap_room(a, need);
    if (st == CCA_OK && (st = ccai_device_room_for(a, room, need, "the wake")) != CCA_OK)
        *missing = need - room->free;
    if (st != CCA_OK && st != CCA_ERR_OUT_OF_MEMORY)
        return st;
    for (int pass = 0; st == CCA_ERR_OUT_OF_MEMORY && pass < 2; pass++) {
        char refused[CCAI_ERROR_CAP];
        ccai_error_save(refused);
        size_t free_b = 0;
        /* frees pending: their blocks are cached once their work is done,
         * so wait first, as the retry does (grow.c, step 2), then ask */
        bool waited = a->c.pending && a->kind->quiesce;
        cca_status wait = waited ? a->kind->quiesce(a) : CCA_OK;
        cca_status can = wait == CCA_OK ? ccai_release_can_help(a, need, &free_b) : wait;
        if (can == CCA_OK && !waited && a->kind->quiesce)
            can = wait = a->kind->quiesce(a);
        if (can != CCA_OK) {
            if (wait != CCA_OK)
                snprintf(unsynced, CCAI_ERROR_CAP, "%s", cca_last_error());
            ccai_error_restore(refused);
            return CCA_ERR_OUT_OF_MEMORY;
        }
        size_t keep = pass == 0 ? ccai_release_keep(a, need, free_b) : 0; /* the shortfall, then everything */
        (void)ccai_release(a, keep, CCAI_RELEASE_UNMAP, NULL);             /* a refusal only means less room */
        *room = (ccai_device_room){false, 0};
        *missing = 0;
        st = ccai_cap_room(a, need);
        if (st == CCA_OK && (st = ccai_device_room_for(a, room, need, "the wake")) != CCA_OK)
            *missing = need - room->free;
    }
    return st;
}

/* room_or_release, held under hold_peak:1 as a request is
 * (policies/hold.c): while something is cached, the reserved peak is a cap
 * too, so the cache goes before reserved passes it; when even all of it
 * cannot keep reserved under the peak, the peak rises by the least:
 * everything cached goes (when that can help, after the wait), then the
 * room is asked with max_reserved and the device alone. Counted in
 * peak_holds when the hold released something. */
static cca_status held_room(cca_allocator *a, size_t need, ccai_device_room *room, size_t *missing,
                            char unsynced[CCAI_ERROR_CAP]) {
    if (!need || !a->policy->begin) /* the policy's begin: the hold's (hold_peak:1) */
        return room_or_release(a, need, room, missing, unsynced);
    uint64_t frees = a->release_frees;
    a->policy->begin(a);
    bool held = a->peak_hold;
    cca_status st = room_or_release(a, need, room, missing, unsynced);
    a->peak_hold = false;
    if (held && st == CCA_ERR_OUT_OF_MEMORY) { /* the peak rises by the least (the hold's step 2) */
        ccai_release_all_for(a, need);
        *room = (ccai_device_room){false, 0};
        st = room_or_release(a, need, room, missing, unsynced);
    }
    a->c.peak_holds += held && a->release_frees != frees;
    return st;
}

/* held_room; a wake that finds room, released or not, leaves the thread's
 * message as it was (a successful call never changes it). */
cca_status ccai_wake_room(cca_allocator *a, size_t need, ccai_device_room *room, size_t *missing,
                          char unsynced[CCAI_ERROR_CAP]) {
    char before[CCAI_ERROR_CAP]; /* a wake that finds room leaves the thread's message as it was */
    ccai_error_save(before);
    cca_status st = held_room(a, need, room, missing, unsynced);
    if (st == CCA_OK)
        ccai_error_restore(before);
    return st;
}

cca_status ccai_wake_domain(cca_allocator *a, cca_domain *d, cca_sleep_report *r) {
    if (!d->sleep)
        return CCA_OK;
    page_span *v = NULL;
    size_t n = 0, need = 0, missing = 0;
    cca_status st = spans_of(d, &v, &n, &need);
    if (st != CCA_OK)
        return st;
    ccai_device_room room = {false, 0};
    char unsynced[CCAI_ERROR_CAP];
    if ((st = ccai_wake_room(a, need, &room, &missing, unsynced)) != CCA_OK) {
        free(v);
        if (missing)
            return cca_set_error(CCA_ERR_OUT_OF_MEMORY,
                                 "%zu bytes of pages needed, the device has %zu free: %zu bytes missing%s%s; still "
                                 "asleep, its host copy intact",
                                 need, room.free, missing, *unsynced ? "; the cache was kept: " : "", unsynced);
        return cca_set_error(st, "%zu bytes of pages needed: %s%s%s; still asleep, its host copy intact", need,
                             cca_last_error(), *unsynced ? "; the cache was kept: " : "", unsynced);
    }
    size_t done = 0, copied = 0;
    if ((st = map_and_copy_in(a, d, v, n, &room, &done, &copied)) != CCA_OK) {
        unmap_spans(a, v, done); /* the refused span, if any, unmapped its own runs */
        free(v);
        return cca_set_error(st, "%zu bytes of pages needed: %s; still asleep, its host copy intact", need,
                             cca_last_error());
    }
    free(v);
    r->blocks += d->sleep->n;
    r->bytes_copied += copied;
    r->bytes_mapped += need;
    r->host_bytes += d->sleep->host_size;
    ccai_sleep_forget(a, d, true);
    return CCA_OK;
}

size_t ccai_wake_need(const cca_domain *d, cca_status *st) {
    page_span *v = NULL;
    size_t n = 0, need = 0;
    *st = spans_of(d, &v, &n, &need);
    free(v);
    return need;
}
