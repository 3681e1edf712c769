/*
 * pages_model.c — the reference model of expandable segments under the
 * growth policy (pages_model.h), from the documented rules only.
 *
 * - Each rule below is tagged [Pn]; test_pages_oracle.c's opening comment
 *   lists them with the doc section each comes from. Nothing here was
 *   taken from allocator/src: where the docs were silent (the release
 *   order, the ahead's rounding), they were made precise first, then this
 *   followed them.
 * - A range is an array of blocks sorted by offset that tile it (a free
 *   block never has a free neighbour), plus a byte per page: mapped, and
 *   (whole maps) whether a map starts there.
 * - Costs: every operation is O(ranges x (blocks + pages)); nothing here is
 *   meant to be fast.
 */
#include "pages_model.h"

#include <stdlib.h>
#include <string.h>

#define GRAN ((size_t)CCA_GRANULARITY)
#define MIB ((size_t)1 << 20)
#define MAX_MAP (128 * MIB) /* [P9] the largest map over whole maps */

static size_t round_up(size_t n, size_t k) {
    return (n + k - 1) / k * k;
}

const char *pm_reach_name(int i) {
    static const char *const names[PM_REACH_N] = {"ahead maps",
                                                  "ahead left out",
                                                  "maps again after a trim",
                                                  "several runs",
                                                  "a run in several maps",
                                                  "slack",
                                                  "cut at an unmapped page",
                                                  "ties",
                                                  "second range of a pool",
                                                  "small spilled",
                                                  "impossible",
                                                  "(b) stops",
                                                  "(c) releases",
                                                  "(d) releases",
                                                  "retries that serve",
                                                  "trapped bytes",
                                                  "empty ranges released",
                                                  "held under the peak",
                                                  "peak raised by a hold"};
    return i >= 0 && i < PM_REACH_N ? names[i] : "?";
}

void pm_config_default(pm_config *c, size_t capacity, size_t page, int whole_maps) {
    memset(c, 0, sizeof *c);
    c->capacity = capacity;
    c->page = page;
    c->whole_maps = whole_maps;
    c->small_max = 1 * MIB;
    c->small_segment = 2 * MIB;
    c->segment_round = 2 * MIB;
    c->small_pool = 1;
    c->ahead = 0.0625;
}

void pm_init(pm_model *m, const pm_config *c) {
    memset(m, 0, sizeof *m);
    m->c = *c;
    m->cap_now = c->max_reserved;
}

static void range_free(pm_range *r) {
    free(r->bl.at);
    free(r->mapped);
    free(r->start);
}

void pm_fini(pm_model *m) {
    for (size_t i = 0; i < m->nranges; i++)
        range_free(&m->ranges[i]);
    free(m->ranges);
    memset(m, 0, sizeof *m);
}

size_t pm_device_free(const pm_model *m) {
    return m->c.capacity - m->mapped;
}

pm_range *pm_range_by_id(pm_model *m, uint64_t id) {
    for (size_t i = 0; i < m->nranges; i++)
        if (m->ranges[i].id == id)
            return &m->ranges[i];
    return NULL;
}

void pm_set_base(pm_model *m, uint64_t id, uintptr_t base) {
    pm_range *r = pm_range_by_id(m, id);
    if (r)
        r->base = base;
}

int pm_live_at(const pm_model *m, uintptr_t addr) {
    for (size_t i = 0; i < m->nranges; i++) {
        const pm_range *r = &m->ranges[i];
        if (r->base && addr >= r->base && addr - r->base < r->size && mb_live_at(&r->bl, addr - r->base))
            return 1;
    }
    return 0;
}

/* ---- pages: [first, end) of the pages a byte span touches or covers ----- */

static size_t first_touched(const pm_model *m, size_t off) {
    return off / m->c.page;
}
static size_t end_touched(const pm_model *m, size_t end) {
    return (end + m->c.page - 1) / m->c.page;
}

/* [P7] a page a live block touches stays mapped; over whole maps, every
 * page of a map such a page is in. kept[] gets 1 for each such page. */
static unsigned char *kept_pages(const pm_model *m, const pm_range *r) {
    unsigned char *k = calloc(r->npages ? r->npages : 1, 1);
    if (!k)
        abort();
    for (size_t j = 0; j < r->bl.n; j++)
        if (r->bl.at[j].live)
            for (size_t p = first_touched(m, r->bl.at[j].off); p < end_touched(m, r->bl.at[j].off + r->bl.at[j].size);
                 p++)
                k[p] = 1;
    if (!m->c.whole_maps)
        return k;
    /* spread over each map: a map is a start and the mapped pages after it
     * up to the next start */
    for (size_t p = 0; p < r->npages;) {
        if (!r->mapped[p]) {
            p++;
            continue;
        }
        size_t e = p + 1;
        while (e < r->npages && r->mapped[e] && !r->start[e])
            e++;
        int any = 0;
        for (size_t q = p; q < e; q++)
            any |= k[q];
        for (size_t q = p; q < e; q++)
            k[q] = (unsigned char)any;
        p = e;
    }
    return k;
}

static size_t count_runs(const unsigned char *want, size_t from, size_t to) {
    size_t runs = 0;
    for (size_t p = from; p < to; p++)
        runs += want[p] && (p == from || !want[p - 1]);
    return runs;
}

/* [P9] map one run of pages: one vm_map over pages, maps of at most 128 MiB
 * from its start over whole maps. A call the device cannot hold fails; the
 * maps this run made before it are unmapped again. */
static int map_run(pm_model *m, pm_range *r, size_t p, size_t e) {
    size_t per = m->c.whole_maps ? (MAX_MAP / m->c.page ? MAX_MAP / m->c.page : 1) : e - p;
    size_t q = p;
    while (q < e) {
        size_t n = e - q < per ? e - q : per;
        if (n * m->c.page > pm_device_free(m)) {
            m->failed_maps++;
            for (size_t u = p; u < q;) { /* undo this run's maps, one by one */
                size_t k = q - u < per ? q - u : per;
                for (size_t x = u; x < u + k; x++)
                    r->mapped[x] = r->start[x] = 0;
                m->mapped -= k * m->c.page;
                m->vm_unmaps++;
                m->pages_unmapped += k;
                m->upstream_frees++;
                u += k;
            }
            return 0;
        }
        for (size_t x = q; x < q + n; x++) {
            r->mapped[x] = 1;
            r->start[x] = x == q;
        }
        m->mapped += n * m->c.page;
        m->peak = m->mapped > m->peak ? m->mapped : m->peak;
        m->vm_maps++;
        m->pages_mapped += n;
        m->upstream_allocs++;
        q += n;
    }
    return 1;
}

static size_t range_mapped(const pm_model *m, const pm_range *r) {
    size_t n = 0;
    for (size_t p = 0; p < r->npages; p++)
        n += r->mapped[p];
    return n * m->c.page;
}

static size_t ceiling(const pm_model *m) {
    size_t c = m->c.capacity;
    return m->c.max_reserved && m->c.max_reserved < c ? m->c.max_reserved : c;
}

/* [P5] the ahead pages of a tail map: F x the range's mapped bytes, raised
 * so that the call maps at least 20 MiB (small range: small_segment) with
 * the request's new pages, capped at F x 1 GiB; whole pages. */
static size_t ahead_pages(const pm_model *m, const pm_range *r, size_t new_pages) {
    double f = m->c.ahead;
    if (f <= 0)
        return 0;
    size_t bytes = (size_t)(f * (double)range_mapped(m, r));
    size_t least = 20 * MIB;
    if (r->pool == PM_SMALL && m->c.small_segment < least)
        least = m->c.small_segment;
    if (new_pages * m->c.page + bytes < least)
        bytes = least - new_pages * m->c.page;
    size_t cap = (size_t)(f * (double)(1024 * MIB));
    if (bytes > cap)
        bytes = cap;
    return bytes / m->c.page;
}

/* [P4] map the pages of [lo, end) that want[] marks: the cap asked first,
 * the device (one mem_info) when there are several runs or it was asked
 * already in this step; then one call per run, lowest first, and a call
 * refused part-way unmaps what this one mapped. 1: mapped. */
static int map_wanted(pm_model *m, pm_range *r, const unsigned char *want, size_t lo, size_t end, int *asked) {
    size_t pages = 0;
    for (size_t p = lo; p < end; p++)
        pages += want[p];
    if (m->cap_now && m->mapped + pages * m->c.page > m->cap_now)
        return 0;
    size_t runs = count_runs(want, lo, end), calls = 0;
    size_t per = m->c.whole_maps ? MAX_MAP / m->c.page : r->npages;
    for (size_t p = lo; p < end;) { /* one call per run; whole maps: per map */
        size_t e = p;
        while (e < end && want[e])
            e++;
        calls += e > p ? (e - p + per - 1) / per : 0;
        p = e > p ? e : p + 1;
    }
    m->reach[PM_RUNS] += runs > 1;
    m->reach[PM_MAPS] += runs < calls;
    if (calls > 1 || *asked) {
        *asked = 1;
        if (pages * m->c.page > pm_device_free(m))
            return 0;
    }
    for (size_t p = lo; p < end;) {
        if (!want[p]) {
            p++;
            continue;
        }
        size_t e = p;
        while (e < end && want[e])
            e++;
        if (!map_run(m, r, p, e)) {
            for (size_t q = lo; q < p;) { /* the runs before the refused one */
                if (!want[q]) {
                    q++;
                    continue;
                }
                size_t f = q;
                while (f < p && want[f])
                    f++;
                for (size_t x = q; x < f; x++)
                    r->mapped[x] = r->start[x] = 0;
                m->mapped -= (f - q) * m->c.page;
                m->vm_unmaps++;
                m->pages_unmapped += f - q;
                m->upstream_frees++;
                q = f;
            }
            return 0;
        }
        p = e;
    }
    return 1;
}

/* [P4] [P5] [P6] map the missing pages under [off, off + size) of r and,
 * when they are some and the block is the range's tail, the ahead pages
 * after them; refused with ahead pages that added pages, once more
 * without them. new_range: the device was asked before the range was
 * reserved. 1: mapped; 0: refused, nothing mapped. */
static int map_block(pm_model *m, pm_range *r, size_t off, size_t size, int tail, int new_range) {
    size_t lo = first_touched(m, off), hi = end_touched(m, off + size);
    unsigned char *want = calloc(r->npages ? r->npages : 1, 1);
    if (!want)
        abort();
    size_t need = 0;
    for (size_t p = lo; p < hi; p++)
        need += want[p] = !r->mapped[p];
    size_t ahead_end = hi;
    if (tail && need > 0 && !m->no_ahead) { /* only a call the request makes maps ahead */
        size_t k = ahead_pages(m, r, need);
        ahead_end = hi + k < r->npages ? hi + k : r->npages;
    }
    size_t all = need;
    for (size_t p = hi; p < ahead_end; p++)
        all += want[p] = !r->mapped[p];
    int ok = 1, asked = new_range;
    if (all > 0) {
        m->reach[PM_AHEAD] += all > need;
        m->reach[PM_REMAP] += !tail && need > 0;
        ok = map_wanted(m, r, want, lo, ahead_end, &asked);
        if (!ok && all > need) { /* the ahead pages left out */
            m->reach[PM_AHEAD_DROPPED]++;
            ok = map_wanted(m, r, want, lo, hi, &asked);
        }
    }
    free(want);
    return ok;
}

/* ---- taking a block ------------------------------------------------------ */

/* [P3] the split: a small-range block (or a spilled small request) when
 * the remainder is at least 512 bytes, a large-range one when it is larger
 * than small_max; any remainder that reaches an unmapped page the request
 * does not touch. */
static int cuts(pm_model *m, const pm_range *r, const pm_block *b, size_t rounded, int small_rule) {
    size_t rest = b->size - rounded;
    if (rest == 0)
        return 0;
    int cut = small_rule ? rest >= GRAN : rest > m->c.small_max;
    if (cut)
        return 1;
    for (size_t p = end_touched(m, b->off + rounded); p < end_touched(m, b->off + b->size); p++)
        if (!r->mapped[p]) {
            m->reach[PM_CUT_UNMAPPED]++;
            return 1;
        }
    m->reach[PM_SLACK]++;
    return 0;
}

/* Map what block j of r needs for `rounded`, then split and mark it live.
 * 1: done; 0: its pages were refused, nothing changed. */
static int take_block(pm_model *m, pm_range *r, size_t j, size_t rounded, int small_rule, int new_range,
                      pm_alloc_result *out) {
    pm_block *b = &r->bl.at[j];
    int cut = cuts(m, r, b, rounded, small_rule);
    size_t size = cut ? rounded : b->size;
    int tail = j == r->bl.n - 1;
    if (!map_block(m, r, b->off, size, tail, new_range))
        return 0;
    b = &r->bl.at[j];
    if (cut) {
        mb_split(&r->bl, j, rounded);
        b = &r->bl.at[j];
    }
    b->live = 1;
    *out = (pm_alloc_result){CCA_OK, PM_OOM_NONE, r->id, b->off, b->size};
    return 1;
}

static uintptr_t addr_of(const pm_range *r, size_t off) {
    return r->base + off;
}

/* [P2] best fit over the free blocks of the pool's ranges: the smallest that
 * fits, the lowest address on a tie. all_mapped: only blocks whose first
 * `rounded` bytes are mapped (a spilled small request). */
static int best_fit(pm_model *m, size_t rounded, int pool, int all_mapped, size_t *ri, size_t *bi) {
    int found = 0;
    size_t best = 0;
    uintptr_t best_addr = 0;
    size_t equal = 0;
    for (size_t i = 0; i < m->nranges; i++) {
        pm_range *r = &m->ranges[i];
        if (r->pool != pool)
            continue;
        for (size_t j = 0; j < r->bl.n; j++) {
            pm_block *b = &r->bl.at[j];
            if (b->live || b->size < rounded)
                continue;
            if (all_mapped) {
                int ok = 1;
                for (size_t p = first_touched(m, b->off); p < end_touched(m, b->off + rounded); p++)
                    ok &= r->mapped[p];
                if (!ok)
                    continue;
            }
            uintptr_t a = addr_of(r, b->off);
            if (found && b->size == best)
                equal++;
            if (!found || b->size < best || (b->size == best && a < best_addr)) {
                if (!found || b->size < best)
                    equal = 1;
                found = 1;
                best = b->size, best_addr = a;
                *ri = i, *bi = j;
            }
        }
    }
    m->reach[PM_TIE] += equal > 1;
    return found;
}

/* [P1] a new range of the ceiling's whole pages, the block at its start. */
static pm_range *new_range(pm_model *m, int pool) {
    if (m->nranges == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 8;
        m->ranges = mb_xrealloc(m->ranges, m->cap * sizeof *m->ranges);
    }
    pm_range *r = &m->ranges[m->nranges++];
    memset(r, 0, sizeof *r);
    r->id = m->next_id++;
    r->size = round_up(ceiling(m), m->c.page);
    r->npages = r->size / m->c.page;
    r->pool = pool;
    r->mapped = calloc(r->npages, 1);
    r->start = calloc(r->npages, 1);
    if (!r->mapped || !r->start)
        abort();
    mb_insert(&r->bl, 0, (pm_block){0, r->size, 0});
    m->upstream_allocs++;
    for (size_t i = 0; i + 1 < m->nranges; i++)
        m->reach[PM_NEW_RANGE] += m->ranges[i].pool == pool;
    return r;
}

static void drop_range(pm_model *m, size_t i) {
    range_free(&m->ranges[i]);
    memmove(&m->ranges[i], &m->ranges[i + 1], (m->nranges - i - 1) * sizeof *m->ranges);
    m->nranges--;
    m->upstream_frees++;
}

/* Room for `pages` new pages under max_reserved and on the device. */
static int room_for(const pm_model *m, size_t pages) {
    size_t b = pages * m->c.page;
    if (m->cap_now && m->mapped + b > m->cap_now)
        return 0;
    return b <= pm_device_free(m);
}

/* One take (step 4 then 5b). 1: served. 0: refused; *fit says whether best
 * fit found a block, (*fri, *fbi) which. */
static int take(pm_model *m, size_t rounded, int pool, pm_alloc_result *out, int *fit, size_t *fri, size_t *fbi) {
    size_t ri, bi;
    *fit = 0;
    if (best_fit(m, rounded, pool, 0, &ri, &bi)) {
        *fit = 1, *fri = ri, *fbi = bi;
        return take_block(m, &m->ranges[ri], bi, rounded, pool == PM_SMALL, 0, out);
    }
    size_t pages = end_touched(m, rounded);
    if (!room_for(m, pages)) {
        /* [P8] a small request whose range cannot start: the smallest
         * free block of the large range with its bytes mapped */
        if (pool == PM_SMALL && best_fit(m, rounded, PM_LARGE, 1, &ri, &bi)) {
            m->reach[PM_SPILL]++;
            return take_block(m, &m->ranges[ri], bi, rounded, 1, 0, out);
        }
        return 0;
    }
    pm_range *r = new_range(m, pool);
    int ok = take_block(m, r, 0, rounded, pool == PM_SMALL, 1, out);
    if (!ok) /* cannot happen: the room was asked */
        abort();
    return ok;
}

/* ---- releasing ------------------------------------------------------------ */

/* Unmap pages [p, e) of r: over pages one call; over whole maps the caller
 * passes one map. */
static void unmap_run(pm_model *m, pm_range *r, size_t p, size_t e) {
    for (size_t x = p; x < e; x++)
        r->mapped[x] = r->start[x] = 0;
    m->mapped -= (e - p) * m->c.page;
    m->vm_unmaps++;
    m->pages_unmapped += e - p;
    m->upstream_frees++;
}

/* [P10] unmap the free pages (whole maps: the maps) lying wholly inside
 * block j of r, the highest first, until mapped <= target. */
static void release_block(pm_model *m, pm_range *r, size_t j, size_t target) {
    const pm_block *b = &r->bl.at[j];
    size_t lo = end_touched(m, b->off), hi = (b->off + b->size) / m->c.page;
    if (lo >= hi)
        return;
    if (!m->c.whole_maps) {
        size_t p = hi;
        while (p > lo && m->mapped > target) {
            if (!r->mapped[p - 1]) {
                p--;
                continue;
            }
            /* one call for the run unmapped now, no more pages than keep needs */
            size_t e = p, left = (m->mapped - target + m->c.page - 1) / m->c.page;
            while (p > lo && r->mapped[p - 1] && e - p < left)
                p--;
            unmap_run(m, r, p, e);
        }
        return;
    }
    /* whole maps: a map [s, t) wholly inside [lo, hi), the highest first */
    size_t p = hi;
    while (p > lo && m->mapped > target) {
        size_t t = p;
        if (!r->mapped[t - 1]) {
            p--;
            continue;
        }
        size_t s = t - 1;
        while (!r->start[s])
            s--;
        /* the map ends at t only if the page after it is no part of it */
        size_t end = s + 1;
        while (end < r->npages && r->mapped[end] && !r->start[end])
            end++;
        if (s >= lo && end <= hi)
            unmap_run(m, r, s, end);
        p = s;
    }
}

/* [P10] the release order: the free pages at each range's tail, then the
 * other free pages (blocks in address order), until mapped <= target; the
 * newest range first in both. */
static void release_until(pm_model *m, size_t target) {
    for (size_t i = m->nranges; i-- > 0 && m->mapped > target;) {
        pm_range *r = &m->ranges[i];
        if (!r->bl.at[r->bl.n - 1].live)
            release_block(m, r, r->bl.n - 1, target);
    }
    for (size_t i = m->nranges; i-- > 0 && m->mapped > target;) {
        pm_range *r = &m->ranges[i];
        for (size_t j = 0; j + 1 < r->bl.n && m->mapped > target; j++)
            if (!r->bl.at[j].live)
                release_block(m, r, j, target);
    }
}

/* [P7] the bytes of mapped pages no live block keeps. */
static size_t releasable(const pm_model *m) {
    size_t n = 0;
    for (size_t i = 0; i < m->nranges; i++) {
        const pm_range *r = &m->ranges[i];
        unsigned char *k = kept_pages(m, r);
        for (size_t p = 0; p < r->npages; p++)
            n += r->mapped[p] && !k[p];
        free(k);
    }
    return n * m->c.page;
}

/* [P11] (b): can releasing help? fit: best fit found block (ri, bi) and
 * its pages were refused; else a new range was. */
static int can_help(pm_model *m, size_t rounded, int fit, size_t ri, size_t bi, int *nothing_cached) {
    size_t rel = releasable(m);
    size_t need_pages = 0;
    if (fit) { /* its block's pages that stay unmapped once the free ones go */
        pm_range *r = &m->ranges[ri];
        unsigned char *k = kept_pages(m, r);
        size_t off = r->bl.at[bi].off;
        for (size_t p = first_touched(m, off); p < end_touched(m, off + rounded); p++)
            need_pages += !k[p];
        free(k);
    } else {
        need_pages = end_touched(m, rounded);
    }
    size_t need = need_pages * m->c.page;
    int over_cap = m->cap_now && m->mapped - rel + need > m->cap_now;
    *nothing_cached = rel == 0;
    return !(rel == 0 || pm_device_free(m) + rel < need || over_cap);
}

/* [P11] the retry's steps after (a), under the cap in force. */
static int retry_steps(pm_model *m, size_t rounded, int pool, int fit, size_t ri, size_t bi, pm_alloc_result *out,
                       int *nothing_cached) {
    if (!can_help(m, rounded, fit, ri, bi, nothing_cached)) { /* (b) */
        m->reach[PM_RETRY_STOP]++;
        return 0;
    }
    /* (c) the shortfall of the request's bytes plus a page */
    size_t want = rounded + m->c.page, res = m->mapped, dev = pm_device_free(m);
    size_t shortfall = want > dev ? want - dev : 0;
    if (m->cap_now && res + want > m->cap_now && res + want - m->cap_now > shortfall)
        shortfall = res + want - m->cap_now;
    int f2;
    size_t r2, b2;
    if (shortfall < res) {
        size_t before = m->pages_unmapped;
        release_until(m, res - shortfall);
        m->reach[PM_RETRY_C] += m->pages_unmapped > before;
        if (take(m, rounded, pool, out, &f2, &r2, &b2))
            return ++m->reach[PM_RETRY_OK], 1;
    }
    size_t before = m->pages_unmapped; /* (d) everything */
    release_until(m, 0);
    m->reach[PM_RETRY_D] += m->pages_unmapped > before;
    return take(m, rounded, pool, out, &f2, &r2, &b2) ? (++m->reach[PM_RETRY_OK], 1) : 0;
}

/* [P11] the one retry, counted. */
static int retry(pm_model *m, size_t rounded, int pool, int fit, size_t ri, size_t bi, pm_alloc_result *out,
                 int *nothing_cached) {
    m->alloc_retries++;
    return retry_steps(m, rounded, pool, fit, ri, bi, out, nothing_cached);
}

/* [P13] the hold applies: the request needs new memory (no block, or its
 * block's pages not all mapped) while something is cached. */
static int held(pm_model *m, size_t rounded, int pool) {
    size_t ri, bi;
    if (!m->c.hold || m->mapped == 0)
        return 0;
    size_t allocated = 0;
    for (size_t i = 0; i < m->nranges; i++)
        for (size_t j = 0; j < m->ranges[i].bl.n; j++)
            allocated += m->ranges[i].bl.at[j].live ? m->ranges[i].bl.at[j].size : 0;
    if (m->mapped == allocated) /* nothing cached */
        return 0;
    if (!best_fit(m, rounded, pool, 0, &ri, &bi))
        return 1;
    const pm_range *r = &m->ranges[ri];
    for (size_t p = first_touched(m, r->bl.at[bi].off); p < end_touched(m, r->bl.at[bi].off + rounded); p++)
        if (!r->mapped[p])
            return 1;
    return 0;
}

/* [P13] the hold: the take and the retry's steps under the peak (none
 * counted in alloc_retries); still short, everything cached released
 * (when that can make room with the peak lifted) and the request taken
 * with no cap beyond max_reserved, its own pages only; refused by the
 * device then, the retry. peak_holds counts a request that released. */
static int hold(pm_model *m, size_t rounded, int pool, pm_alloc_result *out, int *nothing_cached) {
    uint64_t before = m->pages_unmapped;
    int fit;
    size_t ri = 0, bi = 0;
    m->cap_now = m->c.max_reserved && m->c.max_reserved < m->peak ? m->c.max_reserved : m->peak;
    int ok =
        take(m, rounded, pool, out, &fit, &ri, &bi) || retry_steps(m, rounded, pool, fit, ri, bi, out, nothing_cached);
    m->cap_now = m->c.max_reserved;
    if (ok) {
        m->reach[PM_HELD] += m->pages_unmapped > before;
    } else {
        int f2, nc;
        size_t r2 = 0, b2 = 0;
        fit = best_fit(m, rounded, pool, 0, &r2, &b2);
        if (can_help(m, rounded, fit, r2, b2, &nc))
            release_until(m, 0);
        m->no_ahead = 1;
        ok = take(m, rounded, pool, out, &f2, &r2, &b2);
        m->no_ahead = 0;
        m->reach[PM_PEAK_RISES] += ok;
        if (!ok)
            ok = retry(m, rounded, pool, f2, r2, b2, out, nothing_cached);
    }
    m->peak_holds += m->pages_unmapped > before;
    return ok;
}

pm_alloc_result pm_alloc(pm_model *m, size_t size) {
    pm_alloc_result res = {CCA_OK, PM_OOM_NONE, 0, 0, 0};
    if (size == 0) /* [P1] */
        return res;
    size_t bound = m->c.segment_round > m->c.page ? m->c.segment_round : m->c.page;
    res.status = CCA_ERR_INVALID_ARGUMENT;
    if (size > SIZE_MAX - GRAN - bound)
        return res;
    res.status = CCA_OK;
    size_t rounded = round_up(size, GRAN);
    int pool = rounded <= m->c.small_max && m->c.small_pool ? PM_SMALL : PM_LARGE;
    if (round_up(rounded, m->c.page) > ceiling(m)) { /* [P1] (5a) */
        m->reach[PM_IMPOSSIBLE]++;
        m->ooms++;
        res.status = CCA_ERR_OUT_OF_MEMORY;
        res.oom = PM_OOM_NEVER;
        return res;
    }
    int fit, nothing_cached = 0;
    size_t ri = 0, bi = 0;
    if (held(m, rounded, pool)) {
        if (hold(m, rounded, pool, &res, &nothing_cached))
            return res;
    } else if (take(m, rounded, pool, &res, &fit, &ri, &bi) ||
               retry(m, rounded, pool, fit, ri, bi, &res, &nothing_cached)) {
        return res;
    }
    m->ooms++;
    res = (pm_alloc_result){CCA_ERR_OUT_OF_MEMORY, nothing_cached ? PM_OOM_NOTHING_CACHED : PM_OOM_OTHER, 0, 0, 0};
    return res;
}

int pm_free(pm_model *m, uint64_t range_id, size_t off) {
    pm_range *r = pm_range_by_id(m, range_id);
    return r && mb_free(&r->bl, off);
}

static int range_has_live(const pm_range *r) {
    for (size_t j = 0; j < r->bl.n; j++)
        if (r->bl.at[j].live)
            return 1;
    return 0;
}

/* [P10] [P12] trim: pages in the release order until mapped <= keep, then
 * the ranges left empty; the report. */
void pm_trim(pm_model *m, size_t keep, cca_release_report *rep) {
    memset(rep, 0, sizeof *rep);
    size_t before = m->mapped;
    uint64_t pages = m->pages_unmapped;
    release_until(m, keep);
    rep->pages_unmapped = m->pages_unmapped - pages;
    rep->bytes_unmapped = before - m->mapped;
    rep->bytes_released = rep->bytes_unmapped;
    for (size_t i = m->nranges; i-- > 0;) {
        pm_range *r = &m->ranges[i];
        if (r->bl.n == 1 && !r->bl.at[0].live && range_mapped(m, r) == 0) {
            rep->segments_released++;
            m->reach[PM_RANGE_FREED]++;
            drop_range(m, i);
        }
    }
    rep->bytes_still_reserved = m->mapped;
    for (size_t i = 0; i < m->nranges; i++) {
        pm_range *r = &m->ranges[i];
        if (!range_has_live(r)) {
            rep->segments_kept++;
            continue;
        }
        rep->segments_pinned++;
        unsigned char *k = kept_pages(m, r);
        for (size_t j = 0; j < r->bl.n; j++) {
            const pm_block *b = &r->bl.at[j];
            if (b->live) {
                rep->live_bytes_pinning += b->size;
                continue;
            }
            for (size_t p = first_touched(m, b->off); p < end_touched(m, b->off + b->size); p++) {
                if (!r->mapped[p])
                    continue;
                size_t s = p * m->c.page, e = s + m->c.page;
                s = s > b->off ? s : b->off;
                e = e < b->off + b->size ? e : b->off + b->size;
                rep->free_bytes_pinned += e - s;
                if (k[p])
                    rep->free_bytes_trapped += e - s;
            }
        }
        free(k);
    }
    m->reach[PM_TRAPPED] += rep->free_bytes_trapped > 0;
}

void pm_stats_get(const pm_model *m, pm_stats *st) {
    memset(st, 0, sizeof *st);
    st->segments = m->nranges;
    st->reserved = m->mapped;
    for (size_t i = 0; i < m->nranges; i++) {
        const pm_range *r = &m->ranges[i];
        st->address_space += r->size;
        for (size_t j = 0; j < r->bl.n; j++) {
            const pm_block *b = &r->bl.at[j];
            if (b->live) {
                st->allocated += b->size;
                st->active_blocks++;
                continue;
            }
            st->cached_blocks++;
            /* [P12] the longest mapped stretch of the block */
            size_t run = 0, best = 0;
            for (size_t p = first_touched(m, b->off); p < end_touched(m, b->off + b->size); p++) {
                if (!r->mapped[p]) {
                    run = 0;
                    continue;
                }
                size_t s = p * m->c.page, e = s + m->c.page;
                s = s > b->off ? s : b->off;
                e = e < b->off + b->size ? e : b->off + b->size;
                run += e - s;
                best = run > best ? run : best;
            }
            st->largest_free = best > st->largest_free ? best : st->largest_free;
        }
    }
    st->cached = st->reserved - st->allocated;
}
