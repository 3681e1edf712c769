/*
 * stats.c — counters, the allocator's and each domain's
 * (cca_get_domain_stats), their text and JSON forms, the JSON snapshot,
 * and the config in force (cca_get_config). The invariant walk is
 * check.c's.
 *
 * - The core updates the counters in place under the allocator's lock
 *   (ccai_counters: alloc.c, block.c, segment.c, release.c); reading is a
 *   copy under the same lock, so a cca_stats is one consistent picture.
 * - Derived figures:
 *     cached_bytes        bytes in FREE blocks (the indexes keep the sum);
 *                         with expandable segments, mapped free bytes only
 *                         (reserved - allocated, of awake domains)
 *     largest_free_block  the largest free block of an awake domain; of an
 *                         expandable segment, its longest stretch on
 *                         mapped pages
 *     fragmentation       1 - largest_free_block / cached_bytes (0 if none)
 * - largest_free_block's cost (ccai_domain_largest_free): the free indexes
 *   read largest first, stopping at the first block no larger than the
 *   best run found: O(domains holding memory x pools x streams), plus,
 *   with expandable segments, a page-bit scan of each free block larger
 *   than the best run before it (usually a few per range: its tail, then
 *   the largest wholly mapped block below; after a trim that unmapped the
 *   middle of many large free blocks, each of them). Never the live
 *   blocks. Measured: docs/allocator-measurements.md, "Expandable
 *   segments", Stats.
 * - Sums over sleeping domains (asleep_domains, host_bytes, the awake
 *   domains' cached bytes; the release report's) walk a->asleep: a domain
 *   neither holding memory nor asleep costs nothing.
 * - The snapshot (cca_write_snapshot_json): every segment and block in
 *   address order, the segments by a merge sort through their records
 *   (ccai_segments_by_address, also the pickle's; support/chain_sort.h):
 *   O(n log n) and no host memory, so a snapshot never waits on a walk per
 *   segment. The one caller-supplied string, the upstream's name, is
 *   escaped (write_json_string: quotes, backslashes, control bytes; bytes
 *   not well-formed UTF-8 as '?'), so any name gives valid JSON. Doubles
 *   are written in the C locale's format (ccai_numeric_begin; config.c),
 *   in the JSON and in cca_stats_print's line alike.
 */
#include "../core/internal.h"
#include "check.h" /* the unlock */
#include "stats.h"
#include "../support/chain_sort.h"
#include "../domain_set.h"  /* the domains' records and numbers */
#include "../sleep.h"       /* a sleeping domain's host bytes */
#include "ccai_utf8.h"      /* common/: the writers' check on names */
#include "../kinds/pages.h" /* mapped runs of a pages segment */

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The counters cca_stats and cca_domain_stats both carry, from the
 * allocator's (ccai_counters) or a domain's (ccai_domain_counters). */
#define COPY_COUNTS(s, c)                                                                                              \
    do {                                                                                                               \
        (s)->allocated_bytes = (c)->allocated;                                                                         \
        (s)->allocated_bytes_peak = (c)->allocated_peak;                                                               \
        (s)->requested_bytes = (c)->requested;                                                                         \
        (s)->requested_bytes_peak = (c)->requested_peak;                                                               \
        (s)->reserved_bytes = (c)->reserved;                                                                           \
        (s)->reserved_bytes_peak = (c)->reserved_peak;                                                                 \
        (s)->active_blocks = (c)->active;                                                                              \
        (s)->active_blocks_peak = (c)->active_peak;                                                                    \
    } while (0)

static void domains_json(const cca_allocator *a, FILE *f); /* below, with each domain's stats */

/* What a free block adds to largest_free_block: in an expandable segment,
 * its longest stretch on mapped pages, at most its size (a scan of its
 * pages' bits, a word of 64 pages at a time); in a classic
 * one, its size. */
static size_t free_run(const ccai_block *b) {
    return b->seg & CCAI_SEG_EXPANDABLE ? ccai_expandable_largest_mapped(b) : b->size;
}

size_t ccai_domain_largest_free(const cca_domain *d, size_t floor) {
    for (int p = 0; p < CCAI_POOL_COUNT; p++)
        floor = ccai_free_index_largest_run(&d->pools[p], free_run, floor);
    return floor;
}

void ccai_fill_stats(const cca_allocator *a, cca_stats *s) {
    const ccai_counters *c = &a->c;
    memset(s, 0, sizeof *s);
    COPY_COUNTS(s, c);
    s->pending_blocks = c->pending;
    s->segments = c->segments;
    s->segments_peak = c->segments_peak;
    s->alloc_calls = c->alloc_calls;
    s->free_calls = c->free_calls;
    s->upstream_allocs = c->upstream_allocs;
    s->upstream_frees = c->upstream_frees;
    s->alloc_retries = c->retries;
    s->peak_holds = c->peak_holds;
    s->ooms = c->ooms;
    s->splits = c->splits;
    s->merges = c->merges;
    for (const cca_domain *d = a->holding; d; d = d->hnext) { /* a domain without segments caches nothing */
        for (int p = 0; p < CCAI_POOL_COUNT; p++) {
            s->cached_blocks += d->pools[p].count;
            s->cached_bytes += d->pools[p].bytes;
        }
        if (!d->sleep) /* asleep: it serves nothing until its wake */
            s->largest_free_block = ccai_domain_largest_free(d, s->largest_free_block);
    }
    for (const cca_domain *d = a->asleep; d; d = d->snext) {
        s->asleep_domains++;
        s->host_bytes += ccai_sleep_host_bytes(d);
    }
    if (c->expandable_segments)                 /* free blocks span unmapped address space: count mapped bytes only */
        s->cached_bytes = ccai_cached_bytes(a); /* asleep: bytes on the host, pages left serve nothing */
    s->fragmentation = s->cached_bytes ? 1.0 - (double)s->largest_free_block / (double)s->cached_bytes : 0.0;
    s->page_size = a->page; /* 0 unless the kind is pages (cca_create) */
    s->expandable_segments = c->expandable_segments;
    s->address_space_bytes = c->address_space;
    s->mapped_bytes = c->mapped;
    s->vm_maps = c->vm_maps;
    s->vm_unmaps = c->vm_unmaps;
    s->pages_mapped = c->pages_mapped;
    s->pages_unmapped = c->pages_unmapped;
    s->vm_backing = a->whole_maps ? CCA_VM_WHOLE_MAPS : CCA_VM_PAGES;
}

/* The config never changes after cca_create: no lock. */
cca_status cca_get_config(const cca_allocator *a, cca_config *c) {
    if (!a || !c)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_get_config: NULL argument");
    *c = a->config;
    return CCA_OK;
}

void cca_get_stats(const cca_allocator *a, cca_stats *s) {
    if (!a || !s)
        return;
    cca_allocator *m = (cca_allocator *)a;         /* the lock is not part of the logical state */
    if (ccai_lock(m, "cca_get_stats") != CCA_OK) { /* from inside one of a's ops: zeros, and the message */
        memset(s, 0, sizeof *s);
        return;
    }
    ccai_fill_stats(a, s);
    ccai_unlock(m);
}

void cca_reset_peak_stats(cca_allocator *a) {
    if (!a || ccai_lock(a, "cca_reset_peak_stats") != CCA_OK) /* from inside one of a's ops: nothing */
        return;
    a->c.allocated_peak = a->c.allocated;
    a->c.requested_peak = a->c.requested;
    a->c.reserved_peak = a->c.reserved;
    a->c.active_peak = a->c.active;
    a->c.segments_peak = a->c.segments;
    for (cca_domain *d = &a->root; d; d = d->next) {
        d->c.allocated_peak = d->c.allocated;
        d->c.requested_peak = d->c.requested;
        d->c.reserved_peak = d->c.reserved;
        d->c.active_peak = d->c.active;
    }
    ccai_unlock(a);
}

cca_status cca_stats_print(const cca_stats *s, FILE *f) {
    if (!s || !f)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_stats_print: NULL argument");
    char al[32], alp[32], re[32], rep[32], ca[32], lf[32];
    locale_t previous = ccai_numeric_begin(); /* "fragmentation=0.500" whatever the program's locale (numeric.c) */
    int n = fprintf(
        f,
        "allocated=%s (peak %s) reserved=%s (peak %s) cached=%s in %zu blocks, largest free %s, "
        "fragmentation=%.3f active=%zu pending=%zu segments=%zu upstream allocs=%" PRIu64 " frees=%" PRIu64
        " retries=%" PRIu64 " holds=%" PRIu64 " ooms=%" PRIu64 "%s",
        cca_format_bytes(s->allocated_bytes, al, sizeof al), cca_format_bytes(s->allocated_bytes_peak, alp, sizeof alp),
        cca_format_bytes(s->reserved_bytes, re, sizeof re), cca_format_bytes(s->reserved_bytes_peak, rep, sizeof rep),
        cca_format_bytes(s->cached_bytes, ca, sizeof ca), s->cached_blocks,
        cca_format_bytes(s->largest_free_block, lf, sizeof lf), s->fragmentation, s->active_blocks, s->pending_blocks,
        s->segments, s->upstream_allocs, s->upstream_frees, s->alloc_retries, s->peak_holds, s->ooms,
        s->page_size ? "" : "\n");
    if (n >= 0 && s->page_size) {
        char ma[32], as[32], pg[32];
        n = fprintf(f,
                    " expandable: %zu segments, mapped=%s of %s address space, page=%s%s, maps=%" PRIu64
                    " unmaps=%" PRIu64 "\n",
                    s->expandable_segments, cca_format_bytes(s->mapped_bytes, ma, sizeof ma),
                    cca_format_bytes(s->address_space_bytes, as, sizeof as),
                    cca_format_bytes(s->page_size, pg, sizeof pg),
                    s->vm_backing == CCA_VM_WHOLE_MAPS ? " (whole maps)" : "", s->vm_maps, s->vm_unmaps);
    }
    ccai_numeric_end(previous);
    return n < 0 || ccai_write_failed(f) ? cca_set_error(CCA_ERR_IO, "cca_stats_print: write failed") : CCA_OK;
}

static int write_stats_json(const cca_stats *s, FILE *f) {
    locale_t previous = ccai_numeric_begin(); /* "fragmentation":0.5 whatever the program's locale (numeric.c) */
    /* a cca_stats the program made may hold any double: NaN and infinities
     * have no JSON form ("nan" is not one), so null; room for the largest
     * finite one in %.6f (DBL_MAX: 309 digits) */
    char frag[DBL_MAX_10_EXP + 16] = "null";
    if (isfinite(s->fragmentation))
        snprintf(frag, sizeof frag, "%.6f", s->fragmentation);
    int n = fprintf(f,
                    "{\"allocated_bytes\":%zu,\"allocated_bytes_peak\":%zu,\"requested_bytes\":%zu,"
                    "\"requested_bytes_peak\":%zu,\"reserved_bytes\":%zu,\"reserved_bytes_peak\":%zu,"
                    "\"active_blocks\":%zu,\"active_blocks_peak\":%zu,\"pending_blocks\":%zu,\"cached_blocks\":%zu,"
                    "\"cached_bytes\":%zu,\"segments\":%zu,\"segments_peak\":%zu,\"largest_free_block\":%zu,"
                    "\"alloc_calls\":%" PRIu64 ",\"free_calls\":%" PRIu64 ",\"upstream_allocs\":%" PRIu64
                    ",\"upstream_frees\":%" PRIu64 ",\"alloc_retries\":%" PRIu64 ",\"ooms\":%" PRIu64
                    ",\"splits\":%" PRIu64 ",\"merges\":%" PRIu64 ",\"fragmentation\":%s,\"page_size\":%zu,"
                    "\"expandable_segments\":%zu,\"address_space_bytes\":%zu,\"mapped_bytes\":%zu,\"vm_maps\":%" PRIu64
                    ",\"vm_unmaps\":%" PRIu64 ",\"pages_mapped\":%" PRIu64 ",\"pages_unmapped\":%" PRIu64
                    ",\"vm_backing\":\"%s\",\"peak_holds\":%" PRIu64 ",\"asleep_domains\":%zu,\"host_bytes\":%zu}",
                    s->allocated_bytes, s->allocated_bytes_peak, s->requested_bytes, s->requested_bytes_peak,
                    s->reserved_bytes, s->reserved_bytes_peak, s->active_blocks, s->active_blocks_peak,
                    s->pending_blocks, s->cached_blocks, s->cached_bytes, s->segments, s->segments_peak,
                    s->largest_free_block, s->alloc_calls, s->free_calls, s->upstream_allocs, s->upstream_frees,
                    s->alloc_retries, s->ooms, s->splits, s->merges, frag, s->page_size, s->expandable_segments,
                    s->address_space_bytes, s->mapped_bytes, s->vm_maps, s->vm_unmaps, s->pages_mapped,
                    s->pages_unmapped, s->vm_backing == CCA_VM_WHOLE_MAPS ? "whole_maps" : "pages", s->peak_holds,
                    s->asleep_domains, s->host_bytes);
    ccai_numeric_end(previous);
    return n;
}

cca_status cca_stats_write_json(const cca_stats *s, FILE *f) {
    if (!s || !f)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_stats_write_json: NULL argument");
    if (write_stats_json(s, f) < 0 || fputc('\n', f) == EOF || ccai_write_failed(f))
        return cca_set_error(CCA_ERR_IO, "cca_stats_write_json: write failed");
    return CCA_OK;
}

static const char *state_name(uint8_t state) {
    return state == CCAI_FREE ? "free" : state == CCAI_LIVE ? "live" : "pending";
}

/* s as a JSON string literal: '"' and '\\' escaped, control characters
 * (< 0x20) as \u00XX, everything else (UTF-8 included) as is. Names come
 * from callers (a custom upstream's name), so nothing is assumed about them.
 * Returns < 0 when a write fails, like fprintf. */
static int write_json_string(FILE *f, const char *s) {
    int bad = fputc('"', f) == EOF;
    for (const unsigned char *p = (const unsigned char *)s; *p && !bad; p++) {
        if (*p == '"' || *p == '\\')
            bad = fputc('\\', f) == EOF || fputc(*p, f) == EOF;
        else if (*p < 0x20)
            bad = fprintf(f, "\\u%04x", *p) < 0;
        else if (*p < 0x80)
            bad = fputc(*p, f) == EOF;
        else { /* well-formed UTF-8 as it is; any other byte: '?' (JSON text is UTF-8) */
            unsigned n = ccai_utf8_len(p);
            if (!n) {
                bad = fputc('?', f) == EOF;
            } else {
                bad = fwrite(p, 1, n, f) != n;
                p += n - 1;
            }
        }
    }
    bad |= fputc('"', f) == EOF;
    return bad ? -1 : 0;
}

/* An expandable segment's pages, written before its blocks (the segment's
 * object is open): "expandable":true,"page":P,"mapped_bytes":M,"mapped":[[
 * offset, bytes], ...] with one pair per run of mapped pages. */
static int write_pages_json(FILE *f, const ccai_segment *seg) {
    int bad = fprintf(f, ",\"expandable\":true,\"page\":%zu,\"mapped_bytes\":%zu,\"mapped\":[", seg->page,
                      seg->mapped_pages * seg->page) < 0;
    size_t first, n;
    const char *sep = "";
    for (size_t i = 0; !bad && ccai_next_mapped_run(seg, &i, seg->npages, &first, &n); sep = ",")
        bad |= fprintf(f, "%s[%zu,%zu]", sep, first * seg->page, n * seg->page) < 0;
    bad |= fputc(']', f) == EOF;
    return bad ? -1 : 0;
}

static bool lower(const void *x, const void *y) {
    return ((const ccai_segment *)x)->base < ((const ccai_segment *)y)->base;
}

ccai_segment *ccai_segments_by_address(const cca_allocator *a) {
    for (ccai_segment *s = a->segments; s; s = s->next)
        s->sorted_next = s->next;
    return ccai_chain_sort(a->segments, offsetof(ccai_segment, sorted_next), lower);
}

void ccai_release_report_fill(const cca_allocator *a, cca_release_report *r) {
    r->bytes_still_reserved = a->c.reserved;
    for (ccai_segment *s = a->segments; s; s = s->next) {
        if (ccai_segment_empty(s)) {
            r->segments_kept++;
        } else {
            size_t live_blocks, live_bytes;
            ccai_segment_live(s, &live_blocks, &live_bytes);
            r->segments_pinned++;
            r->live_bytes_pinning += live_bytes;
            /* asleep (sleep.c): its live bytes are on the host, and what the
             * device still holds (a refused unmap's pages) holds none */
            size_t held = a->kind->reserved(s);
            r->free_bytes_pinned += s->domain->sleep ? held : held - live_bytes;
        }
        r->free_bytes_trapped += a->kind->trapped(s);
    }
    for (const cca_domain *d = a->asleep; d; d = d->snext) {
        r->asleep_domains++;
        r->host_bytes += ccai_sleep_host_bytes(d);
    }
}

/* The JSON snapshot's body (ccai_body_fn): everything, under the lock. */
static int json_body(const void *ctx, FILE *f) {
    const cca_allocator *a = ctx;
    cca_allocator *m = (cca_allocator *)a;
    (void)ccai_lock(m, "cca_write_snapshot_json"); /* never refused: the caller checked */
    cca_stats s;
    ccai_fill_stats(a, &s);
    int bad = fputs("{\"upstream\":", f) == EOF;
    bad |= write_json_string(f, cca_upstream_name(a->upstream)) < 0;
    bad |= fprintf(f,
                   ",\"config\":{\"policy\":\"%s\",\"max_reserved\":%zu,\"expandable\":%d},\"segment_kind\":\"%s\","
                   "\"stats\":",
                   a->config.policy == CCA_POLICY_GREEDY ? "greedy" : "growth", a->config.max_reserved,
                   a->config.expandable, a->expandable ? "expandable" : "classic") < 0;
    bad |= write_stats_json(&s, f) < 0;
    bad |= fputs(",\"domains\":", f) == EOF;
    domains_json(a, f);
    bad |= fputs(",\"segments\":[", f) == EOF;
    const ccai_segment *first = ccai_segments_by_address(a);
    for (const ccai_segment *seg = first; seg && !bad; seg = seg->sorted_next) {
        size_t live_blocks, live_bytes;
        ccai_segment_live(seg, &live_blocks, &live_bytes);
        bad |= fprintf(f,
                       "%s{\"address\":\"0x%" PRIxPTR "\",\"size\":%zu,\"domain\":\"%s\",\"domain_index\":%u,"
                       "\"pool\":\"%s\",\"stream\":\"%p\",\"live_blocks\":%zu",
                       seg == first ? "" : ",", seg->base, seg->size, seg->domain->name,
                       ccai_domain_number(a, seg->domain),
                       seg->shared                     ? "arena"
                       : seg->pool == CCAI_POOL_SMALL  ? "small"
                       : seg->pool == CCAI_POOL_MEDIUM ? "medium"
                                                       : "large",
                       seg->stream, live_blocks) < 0;
        if (seg->expandable)
            bad |= write_pages_json(f, seg) < 0;
        bad |= fputs(",\"blocks\":[", f) == EOF;
        for (const ccai_block *b = seg->first; b && !bad; b = b->next)
            bad |= fprintf(f, "%s{\"offset\":%zu,\"size\":%zu,\"state\":\"%s\",\"requested\":%zu}",
                           b == seg->first ? "" : ",", (size_t)(b->addr - seg->base), b->size, state_name(b->state),
                           b->requested) < 0;
        bad |= fputs("]}", f) == EOF;
    }
    bad |= fputs("]}\n", f) == EOF;
    ccai_unlock(m);
    return bad ? CCAI_BODY_WRITE : CCAI_BODY_OK;
}

cca_status cca_write_snapshot_json(const cca_allocator *a, FILE *f) {
    if (!a || !f)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_write_snapshot_json: NULL argument");
    if (ccai_mutex_held_here(&a->lock))
        return ccai_lock_refused("cca_write_snapshot_json");
    int bad = ccai_write_via_memory(f, json_body, a) != CCAI_BODY_OK;
    bad |= ccai_write_failed(f);
    return bad ? cca_set_error(CCA_ERR_IO, "cca_write_snapshot_json: write failed") : CCA_OK;
}

/* ---- each domain's ------------------------------------------------------ */

static void fill_stats(const cca_allocator *a, const cca_domain *d, cca_domain_stats *s) {
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", d->name);
    ccai_domain_counters untracked; /* no domain yet: the default one is the allocator */
    const ccai_domain_counters *c = &d->c;
    if (!a->domains_tracked) {
        untracked = d->c;
        ccai_domain_copy_block_counts(&untracked, &a->c);
        c = &untracked;
    }
    COPY_COUNTS(s, c);
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
    cca_domain *d;
    if ((st = ccai_domain_find(a, h, "cca_get_domain_stats", &d)) == CCA_OK)
        fill_stats(a, d, s);
    ccai_unlock(m);
    return st;
}

/* Every domain's stats as a JSON array (the snapshot's too); the caller
 * holds the lock. */
static void domains_json(const cca_allocator *a, FILE *f) {
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
                s.requested_bytes_peak, s.reserved_bytes, s.reserved_bytes_peak, s.active_blocks, s.active_blocks_peak,
                s.cached_bytes, s.largest_free_block, s.segments, (unsigned long long)s.alloc_calls,
                (unsigned long long)s.upstream_allocs, (unsigned long long)s.upstream_frees, s.fragmentation,
                s.asleep ? "true" : "false", s.host_bytes, d->arena ? d->arena->size : (size_t)0);
    }
    fputc(']', f);
    ccai_numeric_end(previous);
}

/* The array's body (ccai_body_fn), under the lock. */
static int domain_stats_body(const void *ctx, FILE *f) {
    cca_allocator *m = (cca_allocator *)ctx;           /* the lock is not part of the logical state */
    (void)ccai_lock(m, "cca_domain_stats_write_json"); /* never refused: the caller checked */
    domains_json(m, f);
    fputc('\n', f);
    ccai_unlock(m);
    return ferror(f) ? CCAI_BODY_WRITE : CCAI_BODY_OK;
}

/* Taken under the lock into host memory and written to f after it, as the
 * snapshots are: a file that does not drain stalls this call only. */
cca_status cca_domain_stats_write_json(const cca_allocator *a, FILE *f) {
    if (!a || !f)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_domain_stats_write_json: %s is NULL",
                             a ? "file" : "allocator");
    if (ccai_mutex_held_here(&a->lock))
        return ccai_lock_refused("cca_domain_stats_write_json");
    int bad = ccai_write_via_memory(f, domain_stats_body, a) != CCAI_BODY_OK;
    if (bad || ccai_write_failed(f))
        return cca_set_error(CCA_ERR_IO, "cca_domain_stats_write_json: write failed");
    return CCA_OK;
}
