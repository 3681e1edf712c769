/*
 * classic_model.c — the reference model of classic segments under the
 * growth policy (classic_model.h), from the documented rules only.
 *
 * - Each rule below is tagged [Rn]; test_classic_oracle.c's opening comment
 *   lists them with the doc section each comes from. Nothing here was
 *   taken from allocator/src: where the docs were silent or wrong, they
 *   were fixed first, then this followed them.
 * - A segment is an array of blocks sorted by offset that tile it; a free
 *   block never has a free neighbour (frees merge at once).
 * - Costs: every operation is O(segments x blocks), trim O(S^2); nothing
 *   here is meant to be fast.
 */
#include "classic_model.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define GRAN ((size_t)CCA_GRANULARITY)

static size_t round_up(size_t n, size_t k) {
    return (n + k - 1) / k * k;
}

const char *cm_reach_name(int i) {
    static const char *const names[CM_REACH_N] = {"slack",
                                                  "large in medium",
                                                  "ties",
                                                  "fallback",
                                                  "shrunk",
                                                  "impossible",
                                                  "(b) stops",
                                                  "(c) releases",
                                                  "(d) releases",
                                                  "retries that serve",
                                                  "max_split refusals",
                                                  "max_split uncut"};
    return i >= 0 && i < CM_REACH_N ? names[i] : "?";
}

void cm_config_default(cm_config *c, size_t capacity, size_t page) {
    memset(c, 0, sizeof *c);
    c->capacity = capacity;
    c->page = page;
    c->small_max = 1u << 20;
    c->small_segment = 2u << 20;
    c->medium_segment = 20u << 20;
    c->large_min = 10u << 20;
    c->segment_round = 2u << 20;
    c->small_pool = c->medium_pool = 1;
}

void cm_init(cm_model *m, const cm_config *c) {
    memset(m, 0, sizeof *m);
    m->c = *c;
}

void cm_fini(cm_model *m) {
    for (size_t i = 0; i < m->nsegs; i++)
        free(m->segs[i].bl.at);
    free(m->segs);
    memset(m, 0, sizeof *m);
}

/* ---- the simulated device: first fit by address, page-rounded [R11] ---- */

size_t cm_device_used(const cm_model *m) {
    size_t used = 0;
    for (size_t i = 0; i < m->nsegs; i++)
        used += round_up(m->segs[i].size, m->c.page);
    return used;
}

/* The lowest offset where `size` (page-rounded) fits; 0 if none. */
static int device_place(const cm_model *m, size_t size, size_t *at) {
    size_t need = round_up(size, m->c.page), start = 0;
    for (;;) {
        size_t end = start + need;
        if (end > m->c.capacity || end < start)
            return 0;
        size_t next = start;
        for (size_t i = 0; i < m->nsegs; i++) {
            size_t s = m->segs[i].dev_off, e = s + round_up(m->segs[i].size, m->c.page);
            if (s < end && start < e && e > next)
                next = e;
        }
        if (next == start) {
            *at = start;
            return 1;
        }
        start = next;
    }
}

/* ---- segments and blocks ------------------------------------------------ */

static int seg_free(const cm_segment *s) {
    return s->bl.n == 1 && !s->bl.at[0].live;
}

static int seg_has_live(const cm_segment *s) {
    for (size_t i = 0; i < s->bl.n; i++)
        if (s->bl.at[i].live)
            return 1;
    return 0;
}

const cm_segment *cm_segment_by_id(const cm_model *m, uint64_t id) {
    for (size_t i = 0; i < m->nsegs; i++)
        if (m->segs[i].id == id)
            return &m->segs[i];
    return NULL;
}

int cm_live_at(const cm_model *m, size_t addr) {
    for (size_t i = 0; i < m->nsegs; i++)
        for (size_t j = 0; j < m->segs[i].bl.n; j++)
            if (m->segs[i].bl.at[j].live && m->segs[i].dev_off + m->segs[i].bl.at[j].off == addr)
                return 1;
    return 0;
}

static cm_segment *new_segment(cm_model *m, size_t size, size_t dev_off, int pool) {
    if (m->nsegs == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 8;
        m->segs = mb_xrealloc(m->segs, m->cap * sizeof *m->segs);
    }
    cm_segment *s = &m->segs[m->nsegs++];
    memset(s, 0, sizeof *s);
    s->id = m->next_id++;
    s->dev_off = dev_off;
    s->size = size;
    s->pool = pool;
    mb_insert(&s->bl, 0, (cm_block){0, size, 0});
    m->upstream_allocs++;
    return s;
}

static void release_segment(cm_model *m, size_t i) {
    free(m->segs[i].bl.at);
    memmove(&m->segs[i], &m->segs[i + 1], (m->nsegs - i - 1) * sizeof *m->segs);
    m->nsegs--;
    m->upstream_frees++;
}

/* [R2] the pool of a rounded request; small_pool:0 serves small requests
 * from the medium pool. */
static int pool_of(const cm_model *m, size_t rounded) {
    if (rounded <= m->c.small_max && m->c.small_pool)
        return CM_SMALL;
    return rounded < m->c.large_min ? CM_MEDIUM : CM_LARGE;
}

/* [R3] a request of pool `want` may take a block of a segment of pool
 * `seg`: its own, a large request a medium one, and with medium_pool:0 a
 * medium request a large one. */
static int pool_serves(const cm_model *m, int seg, int want) {
    if (seg == want)
        return 1;
    return (want == CM_LARGE && seg == CM_MEDIUM) || (!m->c.medium_pool && want == CM_MEDIUM && seg == CM_LARGE);
}

/* [R6] take `rounded` bytes from the start of free block i of s, cutting
 * the remainder off when it is worth keeping. */
static cm_alloc_result take_block(cm_model *m, cm_segment *s, size_t i, size_t rounded) {
    cm_block *b = &s->bl.at[i];
    size_t rest = b->size - rounded;
    int cut = s->pool == CM_SMALL ? rest >= GRAN : rest > m->c.small_max;
    if (m->c.max_split && b->size > m->c.max_split) { /* [R13] never cut */
        m->reach[CM_SPLIT_UNCUT] += cut;
        cut = 0;
    }
    m->reach[CM_SLACK] += !cut && rest > 0;
    m->reach[CM_LARGE_IN_MEDIUM] += s->pool == CM_MEDIUM && rounded >= m->c.large_min;
    if (cut) {
        mb_split(&s->bl, i, rounded);
        b = &s->bl.at[i];
    }
    b->live = 1;
    return (cm_alloc_result){CCA_OK, CM_OOM_NONE, s->id, b->off, b->size, s->dev_off + b->off};
}

/* [R4] best fit: the smallest free block that fits, lowest address on a tie. */
static int best_fit(cm_model *m, size_t rounded, int pool, size_t *si, size_t *bi) {
    int found = 0;
    size_t best_size = 0, best_addr = 0;
    for (size_t i = 0; i < m->nsegs; i++) {
        cm_segment *s = &m->segs[i];
        if (!pool_serves(m, s->pool, pool))
            continue;
        for (size_t j = 0; j < s->bl.n; j++) {
            cm_block *b = &s->bl.at[j];
            if (b->live || b->size < rounded)
                continue;
            size_t addr = s->dev_off + b->off;
            if (!found || b->size < best_size || (b->size == best_size && addr < best_addr)) {
                found = 1;
                best_size = b->size, best_addr = addr;
                *si = i, *bi = j;
            }
        }
    }
    /* [R13] a block above max_split: only for a request of at least
     * max_split that leaves less than medium_segment of it; the best fit
     * is the smallest block, so if it may not be taken no larger one may */
    if (found && m->c.max_split && best_size > m->c.max_split &&
        (rounded < m->c.max_split || best_size - rounded >= m->c.medium_segment)) {
        m->reach[CM_SPLIT_REFUSED]++;
        return 0;
    }
    size_t equal = 0; /* only to count ties: the address decided */
    for (size_t i = 0; found && i < m->nsegs; i++)
        for (size_t j = 0; pool_serves(m, m->segs[i].pool, pool) && j < m->segs[i].bl.n; j++)
            equal += !m->segs[i].bl.at[j].live && m->segs[i].bl.at[j].size == best_size;
    m->reach[CM_TIE] += equal > 1;
    return found;
}

/* [R7] the ceiling a least segment shrinks to: the device or max_reserved,
 * rounded down to 512. */
static size_t ceiling(const cm_model *m) {
    size_t c = m->c.capacity;
    if (m->c.max_reserved && m->c.max_reserved < c)
        c = m->c.max_reserved;
    return c / GRAN * GRAN;
}

static size_t reserved(const cm_model *m) {
    size_t n = 0;
    for (size_t i = 0; i < m->nsegs; i++)
        n += m->segs[i].size;
    return n;
}

/* [R7] [R8] room under max_reserved for `size` more bytes. */
static int under_cap(const cm_model *m, size_t size) {
    return !m->c.max_reserved || (reserved(m) <= m->c.max_reserved && size <= m->c.max_reserved - reserved(m));
}

static size_t shrink(const cm_model *m, size_t seg, size_t rounded) {
    size_t c = ceiling(m);
    if (seg > c)
        seg = c;
    return seg < rounded ? rounded : seg;
}

/* [R7] the request's least segment. */
static size_t least_segment(const cm_model *m, size_t rounded, int pool) {
    size_t seg = pool == CM_SMALL ? m->c.small_segment : round_up(rounded, m->c.segment_round);
    return shrink(m, seg, rounded);
}

/* [R7] a new segment: the pool's usual size, then (medium) the request
 * rounded up to segment_round; only a least segment shrinks to the
 * ceiling (for small and large requests the usual size is the least). The
 * block starts the segment. */
static int grow(cm_model *m, size_t rounded, int pool, cm_alloc_result *out) {
    size_t tries[2];
    int n = 0;
    if (pool == CM_SMALL)
        tries[n++] = shrink(m, m->c.small_segment, rounded);
    else if (pool == CM_MEDIUM) { /* only the least shrinks */
        tries[n++] = m->c.medium_segment;
        size_t fallback = least_segment(m, rounded, pool);
        if (fallback < tries[0])
            tries[n++] = fallback;
    } else
        tries[n++] = shrink(m, round_up(rounded, m->c.segment_round), rounded);
    for (int k = 0; k < n; k++) {
        size_t at;
        if (!under_cap(m, tries[k])) /* the cap refuses without asking the device */
            continue;
        if (!device_place(m, tries[k], &at)) {
            m->device_refusals++;
            continue;
        }
        m->reach[CM_FALLBACK] += k == 1;
        m->reach[CM_SHRUNK] +=
            tries[k] < (pool == CM_SMALL ? m->c.small_segment : round_up(rounded, m->c.segment_round));
        cm_segment *s = new_segment(m, tries[k], at, pool);
        *out = take_block(m, s, 0, rounded);
        return 1;
    }
    return 0;
}

/* [R9] the wholly free segment to release next: largest first, then the
 * lowest address. */
static int largest_free_segment(const cm_model *m, size_t *at) {
    int found = 0;
    for (size_t i = 0; i < m->nsegs; i++) {
        const cm_segment *s = &m->segs[i];
        if (!seg_free(s))
            continue;
        if (!found || s->size > m->segs[*at].size ||
            (s->size == m->segs[*at].size && s->dev_off < m->segs[*at].dev_off)) {
            found = 1;
            *at = i;
        }
    }
    return found;
}

static size_t free_segment_bytes(const cm_model *m) {
    size_t n = 0;
    for (size_t i = 0; i < m->nsegs; i++)
        if (seg_free(&m->segs[i]))
            n += m->segs[i].size;
    return n;
}

/* [R8] the one retry: nothing is pending on one stream, so (a) is empty. */
static int retry(cm_model *m, size_t rounded, int pool, cm_alloc_result *out, int *nothing_cached) {
    m->alloc_retries++;
    size_t need = least_segment(m, rounded, pool);
    size_t dev_free = m->c.capacity - cm_device_used(m);
    size_t cached = free_segment_bytes(m);
    int over_cap = m->c.max_reserved && reserved(m) - cached + need > m->c.max_reserved;
    if (cached == 0 || dev_free + cached < need || over_cap) { /* (b) */
        *nothing_cached = cached == 0;
        m->reach[CM_RETRY_STOP]++;
        return 0;
    }
    /* (c) the shortfall: what the device's free bytes lack, or what would
     * pass max_reserved, whichever is more; released largest first until
     * reserved_bytes has fallen by it. A shortfall of everything reserved
     * goes straight to (d). */
    size_t shortfall = need > dev_free ? need - dev_free : 0, at, res = reserved(m);
    if (m->c.max_reserved && res + need > m->c.max_reserved && res + need - m->c.max_reserved > shortfall)
        shortfall = res + need - m->c.max_reserved;
    if (shortfall < res) {
        while (reserved(m) > res - shortfall && largest_free_segment(m, &at)) {
            m->reach[CM_RETRY_C]++;
            release_segment(m, at);
        }
        if (grow(m, rounded, pool, out))
            return ++m->reach[CM_RETRY_OK], 1;
    }
    while (largest_free_segment(m, &at)) { /* (d) everything */
        m->reach[CM_RETRY_D]++;
        release_segment(m, at);
    }
    /* taken even when nothing was released: a refusal may pass */
    return grow(m, rounded, pool, out) ? (++m->reach[CM_RETRY_OK], 1) : 0;
}

cm_alloc_result cm_alloc(cm_model *m, size_t size) {
    cm_alloc_result r = {CCA_OK, CM_OOM_NONE, 0, 0, 0, 0};
    if (size == 0) /* [R1] */
        return r;
    r.status = CCA_ERR_INVALID_ARGUMENT; /* [R1] past the bound of every rounding */
    if (size > SIZE_MAX - GRAN - m->c.segment_round)
        return r;
    r.status = CCA_OK;
    size_t rounded = round_up(size, GRAN);
    int pool = pool_of(m, rounded);
    size_t si, bi;
    if (best_fit(m, rounded, pool, &si, &bi))
        return take_block(m, &m->segs[si], bi, rounded);
    if (least_segment(m, rounded, pool) > ceiling(m)) { /* [R7] (5a) impossible */
        m->reach[CM_IMPOSSIBLE]++;
        m->ooms++;
        r.status = CCA_ERR_OUT_OF_MEMORY;
        r.oom = CM_OOM_NEVER;
        return r;
    }
    int nothing_cached = 0;
    if (grow(m, rounded, pool, &r) || retry(m, rounded, pool, &r, &nothing_cached))
        return r;
    m->ooms++;
    r.status = CCA_ERR_OUT_OF_MEMORY;
    r.oom = nothing_cached ? CM_OOM_NOTHING_CACHED : CM_OOM_OTHER;
    return r;
}

/* [R5] a free merges with its free neighbours in the segment. */
int cm_free(cm_model *m, uint64_t seg_id, size_t off) {
    for (size_t i = 0; i < m->nsegs; i++)
        if (m->segs[i].id == seg_id)
            return mb_free(&m->segs[i].bl, off);
    return 0;
}

/* [R9] [R10] trim: whole free segments largest first until reserved <= keep. */
void cm_trim(cm_model *m, size_t keep, cca_release_report *r) {
    memset(r, 0, sizeof *r);
    size_t at;
    while (reserved(m) > keep && largest_free_segment(m, &at)) {
        r->bytes_released += m->segs[at].size;
        r->segments_released++;
        release_segment(m, at);
    }
    r->bytes_still_reserved = reserved(m);
    for (size_t i = 0; i < m->nsegs; i++) {
        const cm_segment *s = &m->segs[i];
        if (seg_free(s)) {
            r->segments_kept++;
            continue;
        }
        if (!seg_has_live(s))
            continue;
        r->segments_pinned++;
        for (size_t j = 0; j < s->bl.n; j++)
            *(s->bl.at[j].live ? &r->live_bytes_pinning : &r->free_bytes_pinned) += s->bl.at[j].size;
    }
}

void cm_stats_get(const cm_model *m, cm_stats *st) {
    memset(st, 0, sizeof *st);
    st->segments = m->nsegs;
    for (size_t i = 0; i < m->nsegs; i++) {
        const cm_segment *s = &m->segs[i];
        st->reserved += s->size;
        for (size_t j = 0; j < s->bl.n; j++) {
            const cm_block *b = &s->bl.at[j];
            if (b->live) {
                st->allocated += b->size;
                st->active_blocks++;
            } else {
                st->cached += b->size;
                st->cached_blocks++;
                if (b->size > st->largest_free)
                    st->largest_free = b->size;
            }
        }
    }
}
