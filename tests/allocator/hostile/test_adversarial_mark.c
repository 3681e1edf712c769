/*
 * test_adversarial_mark.c — allocator/src/kinds/pages.c: adversarial tests of the `unmapped` mark of the
 * free blocks of expandable segments (b->unmapped, invariant I7: a free
 * block without the mark lies wholly on mapped pages, so an allocation from
 * it makes no page test and maps nothing).
 *
 * A missed mark hands out a block over unmapped pages: on the simulated
 * device (64 KiB pages, CCA_VM_PAGES: each page its own memory, so a trim
 * can stop at any page) touching it faults. So every block a test is given
 * is probed page by page (a clear assertion instead of a crash) and then
 * written WHOLE, its slack included (cca_block_size bytes), and read back
 * whole before it is freed; and after the steps that matter the state is
 * audited independently of check.c: every page the bitmap calls mapped is
 * readable on the device, the allocator maps exactly what the device says
 * it maps (so the bitmap is the device's truth), and every page under a
 * live, pending or unmarked free block is mapped.
 *
 * Call sequences attacked:
 *   stop points  a trim whose keep stops at every page of a free block
 *                (the highest pages go first), then every way a request can
 *                land in that block: exact fit, split with a remainder, the
 *                remainder taken next, slack (kept whole on mapped pages,
 *                split off over unmapped ones: the device is probed to say
 *                which), a piece inside the still-mapped head; in the
 *                small and large ranges (three
 *                map-ahead settings), the greedy arena and a domain's
 *                footprint arena.
 *   merges       three neighbours freed in every order with a trim (full or
 *                part-way) after any subset of the frees, so that marked
 *                and unmarked blocks merge left-to-right and right-to-left,
 *                then the merged block split at each old boundary and taken
 *                again.
 *   pending      a pending block (held event) between trimmed neighbours
 *                rejoins unmarked and merges with them; growth, greedy,
 *                domain arena.
 *   OOM retry    the retry unmaps a neighbour of the block it serves (on the
 *                same stream and from another), with another tenant on the
 *                device; that neighbour is then taken.
 *   faults       vm_map, vm_unmap, vm_release, vm_reserve and synchronize
 *                fail at each call index (once and from then on) through
 *                scripts of trims, empty-caches, the OOM retry, pending
 *                blocks, cca_domain_reserve and cca_domain_release (growth
 *                on two streams with a domain arena; greedy); afterwards
 *                every free block is allocated and written whole.
 *   random       seeded sequences of alloc / free / trim (random keep) /
 *                empty-cache / record_stream with held events / injected
 *                faults / domain release and reserve on two streams;
 *                invariants after every step, the audit often, contents
 *                checked, every free block taken and written at the end.
 *                The fresh-seed run prints its seed on stderr; replay it
 *                with CCA_ADV_MARK_SEED=<seed>.
 *   kept range   a defect found here that was not the mark's (a refused
 *                vm_release after a refused arena map leaked the range),
 *                fixed: the last test.
 *
 * Internal header access (adversarial.cmake) for the audit and for finding
 * a block's segment and the pages a trim can reach.
 */
#include "alloc_test_util.h"
#include "internal.h"
#include "../domain.h" /* ccai_domain_* */
#include "../kinds/pages.h" /* the page bitmap, the address budget */

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PG ((size_t)64 * KiB) /* the simulated device's granularity */
#define S0 ((cca_stream)0x100)
#define S1 ((cca_stream)0x200)
#define SMALL_MAX (1 * MiB) /* the default small_max */

static size_t round_to(size_t v, size_t to) {
    return (v + to - 1) / to * to;
}

/* ---- a world: device, fault wrapper, allocator ----------------------------- */

typedef struct world {
    tu_faulty f; /* the wrapper's state: f.inner is the device */
    cca_upstream *u;
    cca_allocator *a;
    size_t cap;
    bool greedy;
    void *tenant; /* another tenant's classic allocation on the device */
    size_t tenant_bytes;
} world;

/* How a world's allocator is configured: its options, and whether the
 * growth rule's least step stays (else it is set to 0 through the test
 * hook, ccai_pages_rule_set, before the first request: a tail maps what it
 * needs plus expandable_ahead of what is mapped, page by page). */
typedef struct setting {
    const char *conf;
    bool least;
} setting;

#define CONF(c) ((setting){(c), true})
static const setting LEAST_OFF = {"", false}; /* the default fraction, no least step */

/* `s` in a message: its options, and the least step when it is off. */
static const char *setting_name(setting s, char *buf, size_t len) {
    snprintf(buf, len, "%s%s", s.conf, s.least ? "" : "; least step 0");
    return buf;
}

/* A device of `cap` bytes with 64 KiB pages, the pages backing (any run of
 * pages unmaps, so a free block can be part mapped), behind the fault
 * wrapper (with events), and an expandable allocator over it set by `set`. */
static void w_open_set(world *w, size_t cap, setting set) {
    const char *conf = set.conf;
    memset(w, 0, sizeof *w);
    cca_host_options o = {.capacity = cap, .vm_granularity = PG, .vm_backing = CCA_VM_PAGES};
    cca_upstream *dev = NULL;
    cr_assert_eq(cca_upstream_host_create_with(&o, &dev), CCA_OK, "%s", cca_last_error());
    w->u = tu_faulty_create(&w->f, dev, "mx", true);
    char c[256];
    snprintf(c, sizeof c, "expandable:1,log_oom:0%s%s", conf && *conf ? "," : "", conf ? conf : "");
    w->a = tu_allocator(w->u, c);
    cr_assert(w->a->expandable, "expandable segments over the simulated device");
    if (!set.least)
        ccai_pages_rule_set(w->a, 0, w->a->rule.cap, w->a->rule.map_pages * PG);
    w->cap = cap;
    w->greedy = w->a->config.policy == CCA_POLICY_GREEDY;
}

static void w_open(world *w, size_t cap, const char *conf) {
    w_open_set(w, cap, CONF(conf));
}

static void w_tenant(world *w, size_t bytes) {
    if (w->tenant)
        cr_assert_eq(cca_upstream_free(w->f.inner, w->tenant, w->tenant_bytes), CCA_OK);
    w->tenant = NULL;
    w->tenant_bytes = 0;
    if (bytes) {
        cr_assert_eq(cca_upstream_alloc(w->f.inner, bytes, &w->tenant), CCA_OK, "tenant of %zu: %s", bytes,
                     cca_last_error());
        w->tenant_bytes = bytes;
    }
}

/* Nothing live: faults off, events done; empty-cache gives everything
 * back, to the device's own count; then destroy all. */
static void w_close(world *w) {
    tu_faulty_faults_off(&w->f);
    w->f.events_done = w->f.events_recorded;
    w_tenant(w, 0);
    cr_assert_eq(cca_empty_cache(w->a, NULL), CCA_OK, "final empty_cache: %s", cca_last_error());
    tu_check(w->a);
    cca_stats s = tu_stats(w->a);
    cr_assert_eq(s.active_blocks, 0, "%zu blocks still live", s.active_blocks);
    cr_assert_eq(s.reserved_bytes, 0, "%zu bytes still reserved", s.reserved_bytes);
    cr_assert_eq(s.segments, 0);
    cca_upstream_stats d = tu_upstream_stats(w->f.inner);
    cr_assert_eq(d.vm_mapped_bytes, 0, "the device still maps %zu bytes", d.vm_mapped_bytes);
    cr_assert_eq(d.vm_reserved_bytes, 0, "the device still reserves %zu bytes", d.vm_reserved_bytes);
    cr_assert_eq(cca_destroy(w->a), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(w->f.events_live, 0, "events leaked");
    cca_upstream_destroy(w->u);
    cca_upstream_destroy(w->f.inner);
}

/* ---- the audit --------------------------------------------------------------- */

static bool page_bit(const ccai_segment *s, size_t i) {
    return (s->mapped[i / 64] >> (i % 64)) & 1;
}

/* Every page under a live, pending or UNMARKED free block is mapped in the
 * bitmap (I7, coded again here rather than trusted to check.c), and the
 * allocator maps exactly as much as the device says. With `probe`, also
 * every page the bitmap calls mapped is readable on the device: the bitmap
 * is then the device's truth (a system call per mapped page: at the steps
 * that unmap, and at the end). */
static void audit_with(world *w, const char *what, bool probe) {
    cca_status st = cca_check_invariants(w->a);
    cr_assert_eq(st, CCA_OK, "%s: invariants: %s", what, cca_last_error());
    cca_stats s = tu_stats(w->a);
    cca_upstream_stats d = tu_upstream_stats(w->f.inner);
    cr_assert_eq(s.mapped_bytes, d.vm_mapped_bytes, "%s: the allocator maps %zu bytes, the device %zu", what,
                 s.mapped_bytes, d.vm_mapped_bytes);
    cr_assert_eq(s.reserved_bytes, s.mapped_bytes, "%s: a classic segment", what);
    size_t mapped = 0;
    for (const ccai_segment *g = w->a->segments; g; g = g->next) {
        cr_assert(g->expandable, "%s: a classic segment", what);
        for (size_t i = 0; i < g->npages; i++)
            if (page_bit(g, i)) {
                mapped++;
                if (probe)
                    cr_assert_eq(tu_probe((const char *)(g->base + i * g->page)), 0,
                                 "%s: page %zu of the range at %#lx is mapped in the bitmap, not on the device", what,
                                 i, (unsigned long)g->base);
            }
        for (const ccai_block *b = g->first; b; b = b->next) {
            if (b->state == CCAI_FREE && b->unmapped)
                continue;
            size_t lo = (b->addr - g->base) / g->page, hi = (b->addr + b->size - 1 - g->base) / g->page;
            for (size_t i = lo; i <= hi; i++)
                cr_assert(page_bit(g, i),
                          "%s: %s block %#lx (%zu bytes, %s) lies on unmapped page %zu: an allocation from it would "
                          "fault",
                          what,
                          b->state == CCAI_FREE   ? "free"
                          : b->state == CCAI_LIVE ? "live"
                                                  : "pending",
                          (unsigned long)b->addr, b->size, b->unmapped ? "marked" : "unmarked", i);
        }
    }
    cr_assert_eq(mapped * PG, s.mapped_bytes, "%s: bitmaps hold %zu pages, the allocator counts %zu bytes", what,
                 mapped, s.mapped_bytes);
}

static void audit(world *w, const char *what) {
    audit_with(w, what, false);
}

static void audit_probe(world *w, const char *what) {
    audit_with(w, what, true);
}

/* ---- blocks written whole ------------------------------------------------------ */

typedef struct blk {
    char *p;
    size_t size; /* the block's size (cca_block_size): slack included */
    uint64_t seed;
    cca_domain *d;
    cca_stream s;
} blk;

/* The pattern: every byte of the block, a byte of the seed's, with a tag
 * of the seed and the offset at the head of each 4 KiB (a page mapped again
 * reads zeros; another block's bytes differ). memset and memcmp: a Debug
 * build writes megabytes per run. */
#define CHUNK ((size_t)4096)

static unsigned char seed_byte(uint64_t seed) {
    return (unsigned char)(seed % 251 + 1);
}

static uint64_t tag_at(uint64_t seed, size_t off) {
    return seed * 0x9e3779b97f4a7c15ull ^ (off + 1) * 0xd1b54a32d192ed03ull;
}

/* p was just handed out: probe each page it touches (an unmapped one is an
 * assertion, not a crash), then write all of it. */
static blk put(world *w, void *p, uint64_t seed, cca_domain *d, cca_stream s, const char *what) {
    blk b = {p, tu_block_size(w->a, p), seed, d, s};
    uintptr_t x = (uintptr_t)p, end = x + b.size;
    for (uintptr_t at = x; at < end; at = (at / PG + 1) * PG)
        cr_assert_eq(tu_probe((const void *)at), 0,
                     "%s: block %p (%zu bytes) is handed out over an unmapped page at +%zu: touching it faults", what,
                     p, b.size, (size_t)(at - x));
    cr_assert_eq(tu_probe((const void *)(end - 1)), 0, "%s: block %p (%zu bytes): its last byte is unmapped", what, p,
                 b.size);
    memset(p, seed_byte(seed), b.size);
    for (size_t off = 0; off < b.size; off += CHUNK) {
        uint64_t t = tag_at(seed, off);
        memcpy(b.p + off, &t, sizeof t);
    }
    return b;
}

static void verify(const blk *b, const char *what) {
    unsigned char ref[CHUNK];
    memset(ref, seed_byte(b->seed), sizeof ref);
    for (size_t off = 0; off < b->size; off += CHUNK) {
        uint64_t t = tag_at(b->seed, off);
        size_t n = b->size - off < CHUNK ? b->size - off : CHUNK;
        if (memcmp(b->p + off, &t, sizeof t) != 0 || memcmp(b->p + off + sizeof t, ref, n - sizeof t) != 0)
            cr_assert_fail("%s: block %p (%zu bytes) lost its contents in the 4 KiB at +%zu", what, (void *)b->p,
                           b->size, off);
    }
}

static cca_status try_alloc(world *w, cca_domain *d, size_t size, cca_stream s, void **p) {
    *p = (void *)1;
    cca_status st = cca_alloc_in(w->a, d, size, s, p);
    if (st != CCA_OK)
        cr_assert_null(*p, "a failed allocation returns NULL");
    return st;
}

static blk must_put(world *w, cca_domain *d, size_t size, cca_stream s, uint64_t seed, const char *what) {
    void *p;
    cca_status st = try_alloc(w, d, size, s, &p);
    cr_assert_eq(st, CCA_OK, "%s: alloc of %zu: %s / %s", what, size, cca_status_string(st), cca_last_error());
    return put(w, p, seed, d, s, what);
}

static void release_blk(world *w, blk *b, const char *what) {
    verify(b, what);
    tu_free(w->a, b->p);
    b->p = NULL;
}

/* A block taken again where it was: at `at`, written, and the state audited. */
static blk take_at(world *w, cca_domain *d, size_t size, cca_stream s, const char *at, uint64_t seed,
                   const char *what) {
    blk b = must_put(w, d, size, s, seed, what);
    cr_assert_eq(b.p, at, "%s: %zu bytes taken at %p, expected at %p", what, size, (void *)b.p, (const void *)at);
    audit_probe(w, what);
    return b;
}

/* The end of a run: the blocks read back and freed, the world closed. */
static void finish(world *w, blk *const *b, int n, const char *what) {
    for (int i = 0; i < n; i++)
        release_blk(w, b[i], what);
    w_close(w);
}

/* ---- where things are ---------------------------------------------------------- */

static ccai_segment *segment_of(const cca_allocator *a, const void *p) {
    for (ccai_segment *s = a->segments; s; s = s->next)
        if ((uintptr_t)p >= s->base && (uintptr_t)p < s->base + s->size)
            return s;
    cr_assert_fail("%p lies in no segment", p);
    return NULL;
}

static ccai_block *block_at(const cca_allocator *a, const void *p) {
    for (ccai_block *b = segment_of(a, p)->first; b; b = b->next)
        if (b->addr == (uintptr_t)p)
            return b;
    cr_assert_fail("no block starts at %p", p);
    return NULL;
}

/* Mapped pages lying wholly inside block b: what a trim can unmap there. */
static size_t inner_mapped(const ccai_block *b) {
    const ccai_segment *s = b->segment;
    size_t off = b->addr - s->base, n = 0;
    for (size_t i = (off + s->page - 1) / s->page; i < (off + b->size) / s->page; i++)
        n += page_bit(s, i);
    return n;
}

/* Pages a trim would unmap before anything else: those wholly inside the
 * free tails of every segment (release.c, step 1). */
static size_t tail_pages(const cca_allocator *a) {
    size_t n = 0;
    for (const ccai_segment *s = a->segments; s; s = s->next) {
        const ccai_block *t = s->first;
        while (t->next)
            t = t->next;
        if (t->state == CCAI_FREE)
            n += inner_mapped(t);
    }
    return n;
}

/* Mapped pages wholly inside free blocks other than tails. */
static size_t hole_pages(const cca_allocator *a) {
    size_t n = 0;
    for (const ccai_segment *s = a->segments; s; s = s->next)
        for (const ccai_block *b = s->first; b && b->next; b = b->next)
            if (b->state == CCAI_FREE)
                n += inner_mapped(b);
    return n;
}

/* Trim so that exactly the tails' pages and `pages` more go. */
static void trim_pages(world *w, size_t pages, const char *what) {
    size_t before = tu_stats(w->a).reserved_bytes, n = tail_pages(w->a) + pages;
    cr_assert_leq(n * PG, before, "%s", what);
    cr_assert_eq(cca_trim(w->a, before - n * PG, NULL), CCA_OK, "%s: trim: %s", what, cca_last_error());
    cr_assert_eq(tu_stats(w->a).reserved_bytes, before - n * PG, "%s: the trim stops exactly %zu pages down", what, n);
}

/* ---- an allocation the device could not hold ------------------------------------ */

/* May a request of `size` be refused? Only when it could not fit: the
 * device's room (capacity less another tenant and everything allocated,
 * less the pages trapped around blocks after every cached page went back:
 * at most two per free block, and free blocks are at most live + pending
 * blocks + segments), or, in a greedy arena, no free block large enough. */
static bool excusable(world *w, size_t size) {
    cca_stats s = tu_stats(w->a);
    size_t r = round_to(size, CCA_GRANULARITY);
    size_t trapped = PG * (2 * (s.active_blocks + s.segments) + 2);
    if (w->tenant_bytes + s.allocated_bytes + r + trapped > w->cap)
        return true;
    if (w->greedy) {
        size_t largest = 0;
        for (const ccai_segment *g = w->a->segments; g; g = g->next)
            for (const ccai_block *b = g->first; b; b = b->next)
                if (b->state == CCAI_FREE && b->size > largest)
                    largest = b->size;
        return largest < r;
    }
    return false;
}

/* ---- every free block taken and written -------------------------------------------- */

#define DRAIN_MAX (3 * MiB) /* a tail is taken this far */

typedef struct target {
    size_t size;
    cca_domain *d;
    cca_stream s;
} target;

static int by_size(const void *x, const void *y) {
    const target *a = x, *b = y;
    return a->size < b->size ? -1 : a->size > b->size;
}

/* Allocate, smallest first, a block of exactly the size of each free block
 * (a tail: DRAIN_MAX of it), in its domain and on its key stream, so that
 * best fit lands on it or on one of equal size; write each whole. Blocks of
 * the large range that small requests cannot reach are left. Appends to
 * out (at most cap); returns how many were taken. */
static int drain(world *w, blk *out, int *n, int cap, uint64_t seed, const char *what) {
    target t[256];
    int k = 0;
    for (const ccai_segment *g = w->a->segments; g; g = g->next)
        for (const ccai_block *b = g->first; b && k < 256; b = b->next) {
            if (b->state != CCAI_FREE)
                continue;
            size_t size = b->size < DRAIN_MAX ? b->size : DRAIN_MAX;
            if (!g->shared && g->pool == CCAI_POOL_SMALL && size > SMALL_MAX)
                size = SMALL_MAX;
            if (!g->shared && g->pool != CCAI_POOL_SMALL && size <= SMALL_MAX)
                continue; /* a small request goes to the small range */
            cca_domain *d = ccai_domain_handle(g->domain);
            t[k++] = (target){size, d, g->shared ? S0 : g->stream};
        }
    qsort(t, (size_t)k, sizeof t[0], by_size);
    int taken = 0;
    for (int i = 0; i < k && *n < cap; i++) {
        char step[200];
        snprintf(step, sizeof step, "%s: drain %d (%zu bytes)", what, i, t[i].size);
        bool may_fail = excusable(w, t[i].size);
        void *p;
        cca_status st = try_alloc(w, t[i].d, t[i].size, t[i].s, &p);
        if (st != CCA_OK) {
            cr_assert(st == CCA_ERR_OUT_OF_MEMORY && may_fail, "%s: %s / %s", step, cca_status_string(st),
                      cca_last_error());
            continue;
        }
        out[(*n)++] = put(w, p, seed + (uint64_t)i, t[i].d, t[i].s, step);
        taken++;
        audit(w, step);
    }
    return taken;
}

/* ==== stop points: a trim stopping at every page of a free block ================= */

typedef enum hmode { H_LARGE, H_SMALL, H_GREEDY, H_ARENA } hmode;

/* Plan steps, taken in order until the hole is full or a REST was taken:
 * > 0 bytes; < 0 the hole's size less that; REST what is left of the hole;
 * HALF half of the hole; (merges) TO_AB, TO_BC up to the old boundaries. */
#define REST ((long)0)
#define HALF ((long)1)
#define TO_AB ((long)2)
#define TO_BC ((long)3)
#define PLAN_MAX 10
typedef struct plan {
    const char *name;
    long step[PLAN_MAX];
} plan;

static size_t plan_size(long v, size_t hs, size_t left) {
    if (v == REST)
        return left;
    if (v == HALF)
        return hs / 2 / CCA_GRANULARITY * CCA_GRANULARITY;
    return v > 0 ? (size_t)v : hs - (size_t)-v;
}

#define K(x) ((long)((x)*KiB))
#define M(x) ((long)((x)*MiB))

/* In a medium or large range, a request of `size` from a free block at p
 * of `left` bytes leaves a remainder of at most small_max, not worth a
 * block: it stays with the block as slack unless it reaches a page the
 * request does not touch that is not mapped, when it is split off (block.h,
 * ccai_block_worth_splitting). The device says which: those pages are probed. */
static bool slack_split_off(const char *p, size_t size, size_t left) {
    if (size >= left || left - size > 1 * MiB)
        return false;
    uintptr_t from = ((uintptr_t)p + size + PG - 1) / PG * PG, to = ((uintptr_t)p + left + PG - 1) / PG * PG;
    for (uintptr_t q = from; q < to; q += PG)
        if (tu_probe((const void *)q) != 0)
            return true;
    return false;
}

static const plan large_plans[] = {
    {"exact", {REST}},
    {"slack of 512 KiB (kept whole, or split off over unmapped pages)", {-K(512)}},
    {"slack of small_max (kept whole, or split off over unmapped pages)", {-M(1)}},
    {"split leaving small_max + 512, then that", {-(M(1) + 512), REST}},
    {"smallest large request, then the rest", {M(1) + 512, REST}},
};
static const plan small_plans[] = {
    {"exact", {REST}},
    {"512 B in the mapped head, then the rest", {512, REST}},
    {"all but 512 B, then the 512 B", {-512, REST}},
    {"100 KiB pieces, then the rest", {K(100), K(100), K(100), K(100), K(100), K(100), REST}},
};
static const plan arena_plans[] = {
    {"exact", {REST}},
    {"512 B in the mapped head, then the rest", {512, REST}},
    {"all but 512 B, then the 512 B", {-512, REST}},
    {"half, then the rest", {HALF, REST}},
    {"1 MiB + 512, then the rest", {M(1) + 512, REST}},
};

typedef struct layout_sizes {
    size_t l, h, r;
} layout_sizes;

/* Pages wholly inside the hole: each range starts on a page, L at its start. */
static size_t hole_inner_pages(layout_sizes z) {
    return (z.l + z.h) / PG - round_to(z.l, PG) / PG;
}

static layout_sizes hole_sizes(hmode m) {
    if (m == H_SMALL)
        return (layout_sizes){40 * KiB + 512, 700 * KiB + 1536, 20 * KiB + 512};
    if (m == H_GREEDY || m == H_ARENA) /* any size: one arena */
        return (layout_sizes){96 * KiB + 512, 1 * MiB + 600 * KiB + 1536, 64 * KiB + 512};
    /* the large range: every block above small_max */
    return (layout_sizes){1 * MiB + 96 * KiB + 512, 2 * MiB + 200 * KiB + 1536, 1 * MiB + 512};
}

/* Open a world for mode m (set: map-ahead settings for growth), with its
 * domain (arena mode: its 8 MiB footprint arena). */
static cca_domain *open_mode(world *w, hmode m, setting set) {
    char c[200];
    snprintf(c, sizeof c, "%s%s%s", m == H_GREEDY ? "policy:greedy,greedy_bytes:8M" : "",
             m == H_GREEDY && set.conf && *set.conf ? "," : "", set.conf ? set.conf : "");
    w_open_set(w, 32 * MiB, (setting){c, set.least});
    if (m != H_ARENA)
        return NULL;
    cca_domain *d = NULL;
    cr_assert_eq(cca_domain_create(w->a, "D", &d), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_domain_reserve(w->a, d, 8 * MiB), CCA_OK, "%s", cca_last_error());
    return d;
}

/* One run: [L live][H free][R live], a trim that stops after the tails and
 * `stop` pages of H (stop < 0: no trim), then the plan inside H. */
static void hole_run(hmode m, setting set, long stop, const plan *pl) {
    world w;
    cca_domain *d = open_mode(&w, m, set);
    layout_sizes z = hole_sizes(m);
    char what[256], name[80];
    snprintf(what, sizeof what, "mode %d [%s], stop %ld, plan \"%s\"", (int)m, setting_name(set, name, sizeof name),
             stop, pl->name);
    blk L = must_put(&w, d, z.l, S0, 1, what);
    char *hole;
    cr_assert_eq(try_alloc(&w, d, z.h, S0, (void **)&hole), CCA_OK, "%s: %s", what, cca_last_error());
    size_t hs = tu_block_size(w.a, hole);
    blk R = must_put(&w, d, z.r, S0, 3, what);
    cr_assert_eq(hole, L.p + L.size, "%s: the hole follows L", what);
    cr_assert_eq(R.p, hole + hs, "%s: R follows the hole", what);
    tu_free(w.a, hole);
    audit(&w, what);
    size_t pages = inner_mapped(block_at(w.a, hole));
    cr_assert_eq(pages, hole_inner_pages(z), "%s: every page wholly inside the freed hole is mapped", what);
    if (stop >= 0) {
        trim_pages(&w, (size_t)stop, what);
        audit_probe(&w, what);
        if (stop > 0) { /* the highest page wholly inside went first */
            uintptr_t top = ((uintptr_t)hole + hs) / PG * PG - PG;
            TU_ASSERT_FAULTS((const char *)top);
        }
    }
    blk got[PLAN_MAX];
    int n = 0;
    size_t used = 0, split_off = 0; /* split_off: slack left free over unmapped pages */
    for (int i = 0; i < PLAN_MAX && n == 0; i++) {
        size_t size = plan_size(pl->step[i], hs, hs - used);
        char step[300];
        snprintf(step, sizeof step, "%s, step %d (%zu bytes)", what, i, size);
        bool split = m == H_LARGE && slack_split_off(hole + used, size, hs - used);
        got[i] = must_put(&w, d, size, S0, 10 + (uint64_t)i, step);
        if (m == H_LARGE && size < hs - used && hs - used - size <= 1 * MiB)
            cr_assert_eq(got[i].size, split ? size : hs - used, "%s: slack %s", step,
                         split ? "over unmapped pages split off" : "on mapped pages kept whole");
        if (split)
            split_off = hs - used - size, n = i + 1;
        cr_assert(got[i].p >= hole && got[i].p + got[i].size <= hole + hs,
                  "%s: %p (%zu bytes) is not inside the hole %p (%zu bytes)", step, (void *)got[i].p, got[i].size,
                  (void *)hole, hs);
        cr_assert_eq(got[i].p, hole + used, "%s: pieces are taken from the hole's start", step);
        used += got[i].size;
        audit(&w, step);
        verify(&L, step);
        verify(&R, step);
        for (int k = 0; k < i; k++)
            verify(&got[k], step);
        if (used == hs || pl->step[i] == REST)
            n = i + 1;
    }
    cr_assert_eq(used + split_off, hs, "%s: the plan fills the hole (%zu + %zu split off of %zu bytes)", what, used,
                 split_off, hs);
    /* back, unmapped whole, and taken whole again */
    for (int i = n - 1; i >= 0; i -= 2)
        release_blk(&w, &got[i], what);
    for (int i = n - 2; i >= 0; i -= 2)
        release_blk(&w, &got[i], what);
    cr_assert_eq(cca_trim(w.a, 0, NULL), CCA_OK, "%s", cca_last_error());
    audit(&w, what);
    blk again = take_at(&w, d, hs, S0, hole, 99, what);
    finish(&w, (blk *const[]){&again, &L, &R}, 3, what);
}

static const setting ahead_confs[] = {{"expandable_ahead:0", true}, {"", false}, {"", true}};

/* Every stop point with the first map-ahead setting (the tail maps only
 * what requests need); the edges and the middle with the others (their
 * tails hold pages mapped ahead, which a trim takes first). */
static void hole_sweep(hmode m, const plan *plans, size_t nplans, size_t nconfs) {
    long last = (long)hole_inner_pages(hole_sizes(m));
    for (size_t c = 0; c < nconfs; c++)
        for (long stop = -1; stop <= last; stop++) {
            bool edge = stop <= 2 || stop >= last - 1 || stop == last / 2;
            for (size_t p = 0; p < nplans && (c == 0 || edge); p++)
                hole_run(m, ahead_confs[c], stop, &plans[p]);
        }
}

Test(adversarial_mark, a_trim_stopping_at_every_page_of_a_large_hole) {
    hole_sweep(H_LARGE, large_plans, sizeof large_plans / sizeof large_plans[0], 3);
}

Test(adversarial_mark, a_trim_stopping_at_every_page_of_a_small_hole) {
    hole_sweep(H_SMALL, small_plans, sizeof small_plans / sizeof small_plans[0], 3);
}

Test(adversarial_mark, a_trim_stopping_at_every_page_of_a_hole_in_the_greedy_arena) {
    hole_sweep(H_GREEDY, arena_plans, sizeof arena_plans / sizeof arena_plans[0], 1);
}

Test(adversarial_mark, a_trim_stopping_at_every_page_of_a_hole_in_a_domain_arena) {
    hole_sweep(H_ARENA, arena_plans, sizeof arena_plans / sizeof arena_plans[0], 1);
}

/* ==== merges of marked and unmarked neighbours ===================================== */

/* [L][A][B][C][R]: A, B, C freed in the order `perm`, with a trim after
 * the k-th free when bit k of `trims` is set (keep: everything, or half of
 * the free pages left outside the tails), so that every pairing of a
 * marked and an unmarked block merges, from either side; then the merged
 * block (A + B + C) is taken by `pl`: whole, or split at the old A|B and
 * B|C boundaries (pieces reaching into pages once unmapped), or with slack. */
static void merge_run(hmode m, const int perm[3], unsigned trims, bool half, const plan *pl) {
    world w;
    cca_domain *d = open_mode(&w, m, m == H_LARGE ? ahead_confs[0] : CONF(""));
    char what[256];
    snprintf(what, sizeof what, "mode %d, frees %c%c%c, trims after %#x (%s), plan \"%s\"", (int)m, "ABC"[perm[0]],
             "ABC"[perm[1]], "ABC"[perm[2]], trims, half ? "half" : "all", pl->name);
    /* L, A, B, C, R, and (an arena) F: its tail made smaller than any
     * piece, so that best fit chooses the merged block. Only the pieces
     * taken from the merged block are written (a Debug build's time goes to
     * first touches of pages) */
    const size_t sizes[5] = {1 * MiB + 40 * KiB + 512, 1 * MiB + 136 * KiB + 512, 1 * MiB + 72 * KiB + 1024,
                             1 * MiB + 264 * KiB + 1536, 1 * MiB + 512};
    char *x[6] = {NULL};
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(try_alloc(&w, d, sizes[i], S0, (void **)&x[i]), CCA_OK, "%s", what);
        cr_assert(i == 0 || x[i] == x[i - 1] + sizes[i - 1], "%s: the blocks follow each other", what);
    }
    const ccai_block *tail = block_at(w.a, x[4])->next;
    if (m != H_LARGE && tail && tail->state == CCAI_FREE && tail->size > 512 * KiB)
        cr_assert_eq(try_alloc(&w, d, tail->size - 256 * KiB, S0, (void **)&x[5]), CCA_OK, "%s", what);
    char *a0 = x[1];
    size_t ms = sizes[1] + sizes[2] + sizes[3];
    for (int k = 0; k < 3; k++) {
        tu_free(w.a, x[1 + perm[k]]);
        if (trims & (1u << k)) {
            size_t pages = hole_pages(w.a);
            trim_pages(&w, half ? (pages + 1) / 2 : pages, what);
            audit_probe(&w, what);
        }
    }
    ccai_block *merged = block_at(w.a, a0);
    cr_assert(merged->state == CCAI_FREE && merged->size == ms, "%s: A, B and C merged (%zu bytes)", what,
              merged->size);
    audit(&w, what);
    blk got[PLAN_MAX];
    int n = 0;
    size_t used = 0, split_off = 0;
    for (int i = 0; i < PLAN_MAX && n == 0; i++) {
        long v = pl->step[i];
        size_t size = v == TO_AB ? sizes[1] : v == TO_BC ? sizes[1] + sizes[2] : plan_size(v, ms, ms - used);
        char step[300];
        snprintf(step, sizeof step, "%s, step %d (%zu bytes)", what, i, size);
        bool split = m == H_LARGE && slack_split_off(a0 + used, size, ms - used);
        got[i] = must_put(&w, d, size, S0, 10 + (uint64_t)i, step);
        cr_assert_eq(got[i].p, a0 + used, "%s: taken from the merged block", step);
        if (m == H_LARGE && size < ms - used && ms - used - size <= 1 * MiB)
            cr_assert_eq(got[i].size, split ? size : ms - used, "%s: slack %s", step,
                         split ? "over unmapped pages split off" : "on mapped pages kept whole");
        used += got[i].size;
        audit(&w, step);
        if (split)
            split_off = ms - used, n = i + 1;
        if (used == ms || v == REST)
            n = i + 1;
    }
    cr_assert_eq(used + split_off, ms, "%s: the plan fills the merged block (%zu + %zu split off)", what, used,
                 split_off);
    for (int i = 0; i < n; i++)
        release_blk(&w, &got[i], what);
    for (int i = 0; i < 6; i += i == 0 ? 4 : 1)
        if (x[i])
            tu_free(w.a, x[i]);
    w_close(&w);
}

static const plan merge_plans[] = {
    {"whole", {REST}},
    {"A, then B + C", {TO_AB, REST}},
    {"A + B, then C", {TO_BC, REST}},
    {"all but 512 KiB, then the rest (large range: slack kept whole, or split off over unmapped pages)", {-K(512), REST}},
};

/* Every order of the frees with the trims after each subset of them in
 * trim_masks, full and part-way; each combination with two of the plans,
 * alternately (every plan meets every order with every non-empty subset). */
static void merge_sweep(hmode m, unsigned trim_masks) {
    static const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    for (int p = 0; p < 6; p++)
        for (unsigned trims = 0; trims < 8; trims++)
            for (int half = 0; half < 2; half++)
                for (size_t k = 0; k < sizeof merge_plans / sizeof merge_plans[0]; k++)
                    if ((trim_masks >> trims) & 1 && (trims || !half) && (k + (size_t)p + trims + (size_t)half) % 2)
                        merge_run(m, perms[p], trims, half, &merge_plans[k]);
}

Test(adversarial_mark, marked_and_unmarked_neighbours_merge_in_every_order, .timeout = 60) {
    merge_sweep(H_LARGE, 0xff);
}

Test(adversarial_mark, merges_in_the_greedy_and_a_domain_arena, .timeout = 60) {
    merge_sweep(H_GREEDY, 1u << 1 | 1u << 3 | 1u << 4 | 1u << 6);
    merge_sweep(H_ARENA, 1u << 1 | 1u << 2 | 1u << 5 | 1u << 7);
}

/* ==== pending blocks between trimmed neighbours ==================================== */

/* [L][A][P][B][R]: P is used on another stream and freed while its event
 * is held (pending: its pages stay through trims); A and B are freed and
 * trimmed around it (variant: B freed after the trim, unmarked; or a trim
 * that stops part-way). When the event completes, P rejoins unmarked and
 * merges with its marked neighbours; the merged block is taken whole and
 * written. In an arena (key stream NULL) any stream's block waits. */
static void pending_run(hmode m, int variant) {
    world w;
    cca_domain *d = open_mode(&w, m, LEAST_OFF);
    char what[128];
    snprintf(what, sizeof what, "mode %d, variant %d", (int)m, variant);
    cca_stream key = m == H_GREEDY || m == H_ARENA ? NULL : S0; /* frees on the key stream never wait */
    const size_t sa = 1 * MiB + 328 * KiB + 512, sp = 1 * MiB + 136 * KiB + 1536, sb = 1 * MiB + 200 * KiB + 1024;
    blk L = must_put(&w, d, 1 * MiB + 8 * KiB + 512, key, 1, what);
    char *A, *B;
    cr_assert_eq(try_alloc(&w, d, sa, key, (void **)&A), CCA_OK, "%s", what);
    blk P = must_put(&w, d, sp, S0, 2, what);
    cr_assert_eq(try_alloc(&w, d, sb, key, (void **)&B), CCA_OK, "%s", what);
    blk R = must_put(&w, d, 1 * MiB + 512, key, 3, what);
    cr_assert(P.p == A + sa && B == P.p + sp && R.p == B + sb, "%s: the layout", what);
    if (key == S0)
        cr_assert_eq(cca_record_stream(w.a, P.p, S1), CCA_OK);
    w.f.hold_events = true;
    w.f.sync_keeps_events = true;
    tu_free(w.a, P.p);
    cr_assert_eq(tu_stats(w.a).pending_blocks, 1, "%s: P waits on its event", what);
    tu_free(w.a, A);
    if (variant != 1)
        tu_free(w.a, B);
    size_t pages = hole_pages(w.a);
    size_t before = tu_stats(w.a).reserved_bytes, go = tail_pages(w.a) + (variant == 2 ? pages / 2 : pages);
    cr_assert_eq(cca_trim(w.a, before - go * PG, NULL), CCA_ERR_NOT_READY, "%s: P's event is held", what);
    cr_assert_eq(tu_stats(w.a).reserved_bytes, before - go * PG, "%s", what);
    audit_probe(&w, what);
    verify(&P, what); /* a pending block's pages stay: its contents too */
    if (variant == 1)
        tu_free(w.a, B);
    w.f.events_done = w.f.events_recorded;
    blk all = take_at(&w, d, sa + sp + sb, key, A, 4, what); /* the poll completes P first: A + P + B whole */
    cr_assert_eq(tu_stats(w.a).pending_blocks, 0);
    finish(&w, (blk *const[]){&all, &L, &R}, 3, what);
}

Test(adversarial_mark, a_pending_block_rejoins_between_trimmed_neighbours) {
    const hmode modes[] = {H_LARGE, H_GREEDY, H_ARENA};
    for (int m = 0; m < 3; m++)
        for (int variant = 0; variant < 3; variant++)
            pending_run(modes[m], variant);
}

/* ==== the OOM retry unmaps a neighbour ============================================= */

/* S0's range: [L][H free, trimmed part-way][R][X free][Y]. Another tenant
 * leaves the device two pages short of what H needs; a request for H (on
 * S0, or on S1 in a range of its own) fails to map, and the retry unmaps
 * free pages, X's among them, to make room. X must then be marked: taking
 * it maps its pages again. */
static void retry_run(cca_stream requester) {
    world w;
    w_open(&w, 24 * MiB, "expandable_ahead:0");
    const char *what = requester == S0 ? "retry on the same stream" : "retry on another stream";
    blk L = must_put(&w, NULL, 1 * MiB + 40 * KiB + 512, S0, 1, what);
    char *H, *X;
    size_t sh = 4 * MiB + 136 * KiB + 1536, sx = 2 * MiB + 264 * KiB + 1024;
    cr_assert_eq(try_alloc(&w, NULL, sh, S0, (void **)&H), CCA_OK);
    blk R = must_put(&w, NULL, 1 * MiB + 512, S0, 2, what);
    cr_assert_eq(try_alloc(&w, NULL, sx, S0, (void **)&X), CCA_OK);
    blk Y = must_put(&w, NULL, 1 * MiB + 72 * KiB + 512, S0, 3, what);
    tu_free(w.a, H);
    tu_free(w.a, X);
    /* H (first in address order) loses half its pages, X none */
    size_t hp = inner_mapped(block_at(w.a, H));
    trim_pages(&w, hp / 2, what);
    cr_assert_eq(inner_mapped(block_at(w.a, X)), ((uintptr_t)X + sx) / PG - round_to((uintptr_t)X, PG) / PG,
                 "%s: X untouched", what);
    size_t xp = inner_mapped(block_at(w.a, X));
    cr_assert_geq(xp, 30);
    audit_probe(&w, what);
    /* another tenant leaves the device two pages short of the ones H
     * lost (S1 needs all of H's pages, in a range of its own) */
    size_t free_b, total_b;
    cr_assert_eq(cca_upstream_mem_info(w.f.inner, &free_b, &total_b), CCA_OK);
    cr_assert_gt(free_b, hp / 2 * PG);
    w_tenant(&w, free_b - (hp / 2 - 2) * PG);
    uint64_t retries = tu_stats(w.a).alloc_retries;
    blk big = must_put(&w, NULL, sh, requester, 4, what);
    cr_assert_eq(tu_stats(w.a).alloc_retries, retries + 1, "%s: served through the retry", what);
    if (requester == S0)
        cr_assert_eq(big.p, H, "%s: H itself", what);
    audit_probe(&w, what);
    cr_assert_lt(inner_mapped(block_at(w.a, X)), xp, "%s: the retry unmapped pages of X", what);
    TU_ASSERT_FAULTS((const char *)(((uintptr_t)X + sx) / PG * PG - PG)); /* X's highest page went first */
    release_blk(&w, &big, what);
    w_tenant(&w, 0);
    blk x = take_at(&w, NULL, sx, S0, X, 5, what);
    finish(&w, (blk *const[]){&x, &L, &R, &Y}, 4, what);
}

Test(adversarial_mark, the_oom_retry_marks_the_neighbours_it_unmaps) {
    retry_run(S0);
    retry_run(S1);
}

/* ==== refusals at every call index, then every free block taken ==================== */

typedef enum sop_kind {
    SO_ALLOC,   /* slot, size, stream, domain (0 root, 1 D) */
    SO_FREE,    /* slot */
    SO_RECORD,  /* slot, stream */
    SO_TRIM,    /* size: pages to go besides the tails; SIZE_MAX: empty-cache */
    SO_HOLD,    /* size: 1 hold events (and keep them through synchronize), 0 not */
    SO_DONE,    /* every event so far completes */
    SO_RESERVE, /* cca_domain_reserve(D, size) */
    SO_RELEASE, /* cca_domain_release(D, size: flags) */
    SO_TENANT,  /* another tenant leaves `size` pages of the device free; SIZE_MAX: it leaves */
} sop_kind;

typedef struct sop {
    sop_kind kind;
    int slot;
    size_t size;
    cca_stream s;
    int dom;
} sop;

#define SLOTS 17

/* Growth on a 16 MiB device: two streams, both ranges, a domain with a
 * footprint arena used on two streams (a pending block), trims stopping
 * part-way through holes, a request that needs the retry (another tenant
 * leaves four pages), a domain release and a second arena, an empty-cache,
 * and requests into every hole. */
static const sop growth_script[] = {
    {SO_ALLOC, 0, 100 * KiB + 512, S0, 0},
    {SO_ALLOC, 1, 3 * MiB + 1536, S0, 0},
    {SO_ALLOC, 2, 1 * MiB + 300 * KiB, S0, 0},
    {SO_ALLOC, 3, 2 * MiB + 1024, S1, 0},
    {SO_ALLOC, 4, 500 * KiB + 512, S0, 0},
    {SO_ALLOC, 5, 300 * KiB, S0, 0},
    {SO_RESERVE, 0, 3 * MiB, NULL, 1},
    {SO_ALLOC, 6, 1 * MiB + 512, S0, 1},
    {SO_ALLOC, 7, 700 * KiB, S1, 1},
    {SO_ALLOC, 8, 1 * MiB + 100 * KiB, S0, 1},
    {SO_ALLOC, 9, 2 * MiB + 512, S0, 1},
    {SO_HOLD, 0, 1, NULL, 0},
    {SO_RECORD, 7, 0, S0, 0},
    {SO_FREE, 7, 0, NULL, 0}, /* pending: the arena's key is NULL */
    {SO_FREE, 1, 0, NULL, 0},
    {SO_FREE, 4, 0, NULL, 0},
    {SO_FREE, 6, 0, NULL, 0},
    {SO_TRIM, 0, 30, NULL, 0},            /* part-way */
    {SO_ALLOC, 10, 1 * MiB + 512, S0, 0}, /* into the trimmed hole of slot 1 */
    {SO_ALLOC, 11, 200 * KiB, S0, 0},     /* into slot 4's hole */
    {SO_FREE, 3, 0, NULL, 0},
    {SO_TRIM, 0, 5, NULL, 0},
    {SO_DONE, 0, 0, NULL, 0},
    {SO_HOLD, 0, 0, NULL, 0},
    {SO_TENANT, 0, 4, NULL, 0},
    {SO_ALLOC, 12, 900 * KiB, S1, 0}, /* a new range, four pages free: the retry */
    {SO_TENANT, 0, SIZE_MAX, NULL, 0},
    {SO_FREE, 10, 0, NULL, 0},
    {SO_FREE, 2, 0, NULL, 0},
    {SO_TRIM, 0, 9, NULL, 0},
    {SO_ALLOC, 13, 2 * MiB + 1536, S0, 0},
    {SO_FREE, 8, 0, NULL, 0},
    {SO_FREE, 9, 0, NULL, 0},
    {SO_RELEASE, 0, 0, NULL, 1},
    {SO_RESERVE, 0, 2 * MiB, NULL, 1},
    {SO_ALLOC, 14, 1 * MiB, S1, 1},
    {SO_FREE, 14, 0, NULL, 0},
    {SO_RELEASE, 0, 0, NULL, 1},          /* an arena never trimmed: unmarked until the release */
    {SO_ALLOC, 14, 1 * MiB + 512, S0, 1}, /* the arena again when its release was refused */
    {SO_RESERVE, 0, 2 * MiB, NULL, 1},
    {SO_ALLOC, 16, 1 * MiB, S1, 1},
    {SO_FREE, 12, 0, NULL, 0},
    {SO_FREE, 14, 0, NULL, 0},
    {SO_TRIM, 0, 3, NULL, 0},
    {SO_ALLOC, 15, 700 * KiB, S0, 1},
    {SO_FREE, 11, 0, NULL, 0},
    {SO_TRIM, 0, SIZE_MAX, NULL, 0},
    {SO_ALLOC, 12, 3 * MiB, S0, 0},
    {SO_ALLOC, 14, 1 * MiB + 1536, S1, 1},
    {SO_FREE, 16, 0, NULL, 0},
    {SO_FREE, 0, 0, NULL, 0},
    {SO_TRIM, 0, 2, NULL, 0},
};

/* Greedy: a 12 MiB arena on a 16 MiB device, a pending block, trims
 * part-way, a request that needs the retry (another tenant holds the rest
 * of the device), an empty-cache that gives the range back, the arena
 * again. */
static const sop greedy_script[] = {
    {SO_ALLOC, 0, 1 * MiB + 512, NULL, 0},
    {SO_ALLOC, 1, 2 * MiB + 1536, NULL, 0},
    {SO_ALLOC, 2, 700 * KiB, S0, 0},
    {SO_ALLOC, 3, 1 * MiB, NULL, 0},
    {SO_ALLOC, 4, 300 * KiB + 512, NULL, 0},
    {SO_HOLD, 0, 1, NULL, 0},
    {SO_FREE, 1, 0, NULL, 0},
    {SO_FREE, 2, 0, NULL, 0}, /* pending: used on S0, not the key */
    {SO_TRIM, 0, 20, NULL, 0},
    {SO_ALLOC, 5, 1 * MiB + 512, NULL, 0},
    {SO_DONE, 0, 0, NULL, 0},
    {SO_HOLD, 0, 0, NULL, 0},
    {SO_FREE, 3, 0, NULL, 0},
    {SO_TRIM, 0, 7, NULL, 0},
    {SO_TENANT, 0, 80, NULL, 0},     /* 5 MiB: the tail needs 6 */
    {SO_ALLOC, 6, 6 * MiB, NULL, 0}, /* the retry unmaps the others' pages */
    {SO_TENANT, 0, SIZE_MAX, NULL, 0},
    {SO_ALLOC, 7, 900 * KiB, NULL, 0},
    {SO_FREE, 0, 0, NULL, 0},
    {SO_FREE, 5, 0, NULL, 0},
    {SO_TRIM, 0, 11, NULL, 0},
    {SO_FREE, 6, 0, NULL, 0},
    {SO_FREE, 7, 0, NULL, 0},
    {SO_FREE, 4, 0, NULL, 0},
    {SO_TRIM, 0, SIZE_MAX, NULL, 0}, /* the arena's range goes back */
    {SO_ALLOC, 8, 2 * MiB, NULL, 0},
    {SO_ALLOC, 9, 512 * KiB, NULL, 0},
    {SO_FREE, 8, 0, NULL, 0},
    {SO_TRIM, 0, 4, NULL, 0},
    {SO_ALLOC, 10, 1 * MiB + 1024, NULL, 0},
    {SO_ALLOC, 11, 700 * KiB, NULL, 0},
    {SO_ALLOC, 12, 1 * MiB + 512 * KiB, S1, 0},
    {SO_ALLOC, 13, 300 * KiB, NULL, 0},
    {SO_ALLOC, 14, 100 * KiB, NULL, 0},
    {SO_FREE, 11, 0, NULL, 0},
    {SO_FREE, 12, 0, NULL, 0},
    {SO_TRIM, 0, 6, NULL, 0},
};

typedef struct fault {
    tu_fault_kind kind;
    uint64_t at; /* 0: none */
    bool sticky;
} fault;

/* Run a script with one fault armed; every step's status must be one the
 * fault explains; then, faults off, every free block is taken and written,
 * everything is checked, freed and given back. Returns the calls made of
 * each kind (for the sweep's bounds). */
static void script_run(const sop *script, int len, setting set, fault ft, uint64_t calls[TU_FAULT_KINDS]) {
    world w;
    w_open_set(&w, 16 * MiB, set);
    char conf[80];
    setting_name(set, conf, sizeof conf);
    cca_domain *D = NULL;
    if (!w.greedy)
        cr_assert_eq(cca_domain_create(w.a, "D", &D), CCA_OK);
    uint64_t start[TU_FAULT_KINDS]; /* calls made at creation (greedy: the arena) */
    memcpy(start, w.f.calls, sizeof start);
    if (ft.at) {
        w.f.fail_at[ft.kind] = start[ft.kind] + ft.at;
        w.f.sticky[ft.kind] = ft.sticky;
    }
    blk slot[SLOTS] = {{0}};
    blk extra[64];
    int nextra = 0;
    char what[200];
    for (int i = 0; i < len; i++) {
        const sop *o = &script[i];
        snprintf(what, sizeof what, "%s [%s] N=%llu%s, step %d", tu_fault_names[ft.kind], conf,
                 (unsigned long long)ft.at, ft.sticky ? " (sticky)" : "", i);
        uint64_t failures = w.f.failures, retries = tu_stats(w.a).alloc_retries;
        cca_domain *d = o->dom ? D : NULL;
        cca_status st = CCA_OK;
        switch (o->kind) {
        case SO_ALLOC: {
            bool may_fail = excusable(&w, o->size);
            void *p;
            st = try_alloc(&w, d, o->size, o->s, &p);
            if (st == CCA_OK)
                slot[o->slot] = put(&w, p, (uint64_t)i + 1, d, o->s, what);
            else
                cr_assert(st == CCA_ERR_OUT_OF_MEMORY && (w.f.failures > failures || may_fail),
                          "%s: alloc of %zu: %s / %s", what, o->size, cca_status_string(st), cca_last_error());
            break;
        }
        case SO_FREE:
            if (slot[o->slot].p) {
                verify(&slot[o->slot], what);
                st = cca_free(w.a, slot[o->slot].p);
                cr_assert(st == CCA_OK || (st == CCA_ERR_UPSTREAM && w.f.failures > failures), "%s: free: %s", what,
                          cca_last_error());
                slot[o->slot].p = NULL;
            }
            break;
        case SO_RECORD:
            if (slot[o->slot].p)
                cr_assert_eq(cca_record_stream(w.a, slot[o->slot].p, o->s), CCA_OK, "%s", what);
            break;
        case SO_TRIM: {
            size_t reserved = tu_stats(w.a).reserved_bytes, go = tail_pages(w.a) + o->size;
            if (o->size == SIZE_MAX || go * PG > reserved)
                st = cca_empty_cache(w.a, NULL);
            else
                st = cca_trim(w.a, reserved - go * PG, NULL);
            cr_assert(st == CCA_OK || (st == CCA_ERR_NOT_READY && tu_stats(w.a).pending_blocks) ||
                          (st == CCA_ERR_UPSTREAM && w.f.failures > failures),
                      "%s: trim: %s / %s", what, cca_status_string(st), cca_last_error());
            break;
        }
        case SO_HOLD: w.f.hold_events = w.f.sync_keeps_events = o->size; break;
        case SO_DONE: w.f.events_done = w.f.events_recorded; break;
        case SO_RESERVE:
            st = cca_domain_reserve(w.a, D, o->size);
            cr_assert(st == CCA_OK || (st == CCA_ERR_OUT_OF_MEMORY && w.f.failures > failures) ||
                          (st == CCA_ERR_INVALID_ARGUMENT && ft.at), /* the last release was refused */
                      "%s: domain reserve: %s / %s", what, cca_status_string(st), cca_last_error());
            break;
        case SO_TENANT: {
            size_t free_b, total_b;
            w_tenant(&w, 0);
            cr_assert_eq(cca_upstream_mem_info(w.f.inner, &free_b, &total_b), CCA_OK);
            if (o->size != SIZE_MAX && free_b > o->size * PG)
                w_tenant(&w, free_b - o->size * PG);
            break;
        }
        case SO_RELEASE:
            st = cca_domain_release(w.a, D, (unsigned)o->size, NULL);
            cr_assert(st == CCA_OK || (st == CCA_ERR_UPSTREAM && w.f.failures > failures), "%s: domain release: %s",
                      what, cca_last_error());
            break;
        }
        /* after the steps that unmap or fail, everything is checked */
        if (o->kind == SO_TRIM || o->kind == SO_RELEASE || st != CCA_OK || tu_stats(w.a).alloc_retries != retries) {
            audit_probe(&w, what);
            for (int k = 0; k < SLOTS; k++)
                if (slot[k].p)
                    verify(&slot[k], what);
        } else {
            audit(&w, what);
        }
        if (!ft.at)
            cr_assert(st == CCA_OK || st == CCA_ERR_NOT_READY, "the script runs clean without faults: %s: %s", what,
                      cca_last_error());
    }
    if (ft.at && ft.at <= calls[ft.kind]) /* the baseline made that call */
        cr_assert_geq(w.f.failures, 1, "%s: the fault never fired", what);
    if (!ft.at) {
        for (int k = 0; k < TU_FAULT_KINDS; k++)
            calls[k] = w.f.calls[k] - start[k];
        cr_assert_geq(tu_stats(w.a).alloc_retries, 1, "%s: the script needs the OOM retry", what);
    }
    /* faults off and events done: every free block taken and written */
    tu_faulty_faults_off(&w.f);
    w.f.hold_events = w.f.sync_keeps_events = false;
    w.f.events_done = w.f.events_recorded;
    snprintf(what, sizeof what, "%s [%s] N=%llu%s, after", tu_fault_names[ft.kind], conf, (unsigned long long)ft.at,
             ft.sticky ? " (sticky)" : "");
    int taken = drain(&w, extra, &nextra, 64, 1000, what);
    if (!ft.at)
        cr_assert_geq(taken, 3, "%s: the drain takes the script's holes", what);
    audit_probe(&w, what);
    for (int k = 0; k < SLOTS; k++)
        if (slot[k].p)
            release_blk(&w, &slot[k], what);
    for (int k = 0; k < nextra; k++)
        release_blk(&w, &extra[k], what);
    w_close(&w);
}

/* Each kind of refusal at each call index the baseline makes (and one
 * past), once and from then on. */
static void fault_sweep(const sop *script, int len, setting set) {
    uint64_t calls[TU_FAULT_KINDS] = {0};
    char conf[80];
    setting_name(set, conf, sizeof conf);
    script_run(script, len, set, (fault){TU_FAULT_MAP, 0, false}, calls);
    cr_assert_geq(calls[TU_FAULT_UNMAP], 4, "[%s] the script unmaps", conf);
    cr_assert_geq(calls[TU_FAULT_RELEASE], 1, "[%s] the script gives a range back", conf);
    const tu_fault_kind kinds[] = {TU_FAULT_UNMAP, TU_FAULT_MAP, TU_FAULT_RELEASE, TU_FAULT_RESERVE, TU_FAULT_SYNC};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (uint64_t at = 1; at <= calls[kinds[k]] + 1; at++)
            for (int sticky = 0; sticky < 2; sticky++)
                script_run(script, len, set, (fault){kinds[k], at, sticky}, calls);
}

Test(adversarial_mark, refusals_at_every_call_of_a_growth_script_then_every_block, .timeout = 120) {
    fault_sweep(growth_script, sizeof growth_script / sizeof growth_script[0], LEAST_OFF);
}

Test(adversarial_mark, refusals_at_every_call_of_a_greedy_script_then_every_block, .timeout = 120) {
    fault_sweep(greedy_script, sizeof greedy_script / sizeof greedy_script[0], CONF("policy:greedy,greedy_bytes:12M"));
}

/* ==== random sequences ============================================================= */

#define RLIVE 48

typedef struct rworld {
    world w;
    cca_domain *D; /* growth: a domain, with an arena now and then */
    blk live[RLIVE];
    int n;
    uint64_t rng;
    int sticky_until[TU_FAULT_KINDS]; /* step when a sticky fault stops */
} rworld;

static uint64_t rr(rworld *r, uint64_t below) {
    return tu_rand(&r->rng) % below;
}

/* Mostly small, some medium, a few large; never a multiple of 512. */
static size_t rsize(rworld *r) {
    uint64_t k = rr(r, 100);
    size_t size = k < 55 ? 1 + rr(r, 96 * KiB) : k < 85 ? 96 * KiB + rr(r, 1200 * KiB) : 1200 * KiB + rr(r, 2 * MiB);
    return size % CCA_GRANULARITY ? size : size + 1;
}

/* Forget the model's blocks of D that are no longer live (a forced release). */
static void prune(rworld *r) {
    for (int i = 0; i < r->n;) {
        size_t size;
        if (r->live[i].d && cca_block_size(r->w.a, r->live[i].p, &size) != CCA_OK)
            r->live[i] = r->live[--r->n];
        else
            i++;
    }
}

/* One step; returns whether it may have unmapped or failed (the audit
 * then probes the device, and every live block is read back). */
static bool rstep(rworld *r, int step, const char *what) {
    world *w = &r->w;
    uint64_t failures = w->f.failures, retries = tu_stats(w->a).alloc_retries;
    uint64_t k = rr(r, 1000);
    cca_status st = CCA_OK;
    if (k < 420 && r->n < RLIVE) { /* alloc */
        size_t size = rsize(r);
        cca_stream s = rr(r, 2) ? S0 : S1;
        cca_domain *d = r->D && rr(r, 4) == 0 ? r->D : NULL;
        bool may_fail = excusable(w, size);
        void *p;
        st = try_alloc(w, d, size, s, &p);
        if (st == CCA_OK)
            r->live[r->n++] = put(w, p, (uint64_t)step, d, s, what);
        else
            cr_assert(st == CCA_ERR_OUT_OF_MEMORY && (w->f.failures > failures || may_fail),
                      "%s: alloc of %zu on %p: %s / %s", what, size, (void *)s, cca_status_string(st),
                      cca_last_error());
    } else if (k < 720 && r->n) { /* free */
        int i = (int)rr(r, (uint64_t)r->n);
        verify(&r->live[i], what);
        st = cca_free(w->a, r->live[i].p);
        cr_assert(st == CCA_OK || (st == CCA_ERR_UPSTREAM && w->f.failures > failures), "%s: free: %s", what,
                  cca_last_error());
        r->live[i] = r->live[--r->n];
        st = CCA_OK;
    } else if (k < 770 && r->n) { /* used on the other stream too */
        blk *b = &r->live[rr(r, (uint64_t)r->n)];
        cr_assert_eq(cca_record_stream(w->a, b->p, b->s == S0 ? S1 : S0), CCA_OK, "%s", what);
    } else if (k < 860) { /* trim, keep anywhere from 0 to what is reserved */
        size_t reserved = tu_stats(w->a).reserved_bytes;
        size_t keep = rr(r, 4) == 0 ? 0 : reserved / 100 * rr(r, 101) + rr(r, PG);
        st = rr(r, 10) == 0 ? cca_empty_cache(w->a, NULL) : cca_trim(w->a, keep, NULL);
        cr_assert(st == CCA_OK || (st == CCA_ERR_NOT_READY && tu_stats(w->a).pending_blocks) ||
                      (st == CCA_ERR_UPSTREAM && w->f.failures > failures),
                  "%s: trim: %s / %s", what, cca_status_string(st), cca_last_error());
        return true;
    } else if (k < 890) { /* events: held or not, kept through synchronize or not */
        w->f.hold_events = rr(r, 2);
        w->f.sync_keeps_events = rr(r, 2);
    } else if (k < 930) {
        w->f.events_done = w->f.events_recorded;
    } else if (k < 960) { /* a refusal soon: once, or for a few steps */
        static const tu_fault_kind kinds[] = {TU_FAULT_MAP, TU_FAULT_UNMAP, TU_FAULT_RELEASE, TU_FAULT_RESERVE,
                                              TU_FAULT_SYNC};
        tu_fault_kind f = kinds[rr(r, 5)];
        w->f.fail_at[f] = w->f.calls[f] + 1 + rr(r, 3);
        w->f.sticky[f] = rr(r, 6) == 0;
        r->sticky_until[f] = step + 1 + (int)rr(r, 5);
    } else if (r->D && k < 980) { /* the domain goes back, forced or not */
        st = cca_domain_release(w->a, r->D, rr(r, 2) ? CCA_DOMAIN_FORCE : 0, NULL);
        cr_assert(st == CCA_OK || st == CCA_ERR_LIVE_BLOCKS || (st != CCA_OK && w->f.failures > failures),
                  "%s: domain release: %s / %s", what, cca_status_string(st), cca_last_error());
        prune(r);
        return true;
    } else if (r->D) { /* a footprint arena */
        size_t bytes = 512 * KiB + rr(r, 3 * MiB);
        st = cca_domain_reserve(w->a, r->D, bytes);
        cr_assert(st == CCA_OK || st == CCA_ERR_INVALID_ARGUMENT ||
                      (st == CCA_ERR_OUT_OF_MEMORY && (w->f.failures > failures || excusable(w, bytes))),
                  "%s: domain reserve of %zu: %s / %s", what, bytes, cca_status_string(st), cca_last_error());
        return st == CCA_OK;
    }
    for (int f = 0; f < TU_FAULT_KINDS; f++)
        if (w->f.sticky[f] && step >= r->sticky_until[f])
            w->f.fail_at[f] = 0, w->f.sticky[f] = false;
    return st != CCA_OK || tu_stats(w->a).alloc_retries != retries;
}

static void random_run(uint64_t seed, bool greedy, int steps) {
    rworld r;
    memset(&r, 0, sizeof r);
    r.rng = seed;
    setting set = greedy          ? CONF("policy:greedy,greedy_bytes:10M")
                  : seed % 3 == 0 ? CONF("expandable_ahead:0")
                  : seed % 3 == 1 ? LEAST_OFF
                                  : CONF("");
    w_open_set(&r.w, 20 * MiB, set);
    char conf[80];
    setting_name(set, conf, sizeof conf);
    if (!greedy)
        cr_assert_eq(cca_domain_create(r.w.a, "D", &r.D), CCA_OK);
    char what[160];
    for (int step = 0; step < steps; step++) {
        snprintf(what, sizeof what, "seed %llu [%s], step %d", (unsigned long long)seed, conf, step);
        bool deep = rstep(&r, step, what);
        if (deep || step % 16 == 0) {
            audit_probe(&r.w, what);
            for (int i = 0; i < r.n; i++)
                verify(&r.live[i], what);
        } else {
            audit(&r.w, what);
        }
    }
    /* faults off, events done: every free block taken and written */
    snprintf(what, sizeof what, "seed %llu [%s], the end", (unsigned long long)seed, conf);
    tu_faulty_faults_off(&r.w.f);
    r.w.f.hold_events = r.w.f.sync_keeps_events = false;
    r.w.f.events_done = r.w.f.events_recorded;
    blk extra[64];
    int nextra = 0;
    drain(&r.w, extra, &nextra, 64, 1u << 20, what);
    audit_probe(&r.w, what);
    for (int i = 0; i < r.n; i++)
        release_blk(&r.w, &r.live[i], what);
    for (int i = 0; i < nextra; i++)
        release_blk(&r.w, &extra[i], what);
    w_close(&r.w);
}

Test(adversarial_mark, random_growth_fixed_seeds, .timeout = 60) {
    for (uint64_t seed = 1; seed <= 3; seed++)
        random_run(seed * 0x9e3779b97f4a7c15ull + seed, false, 1500);
}

Test(adversarial_mark, random_greedy_fixed_seeds, .timeout = 60) {
    for (uint64_t seed = 1; seed <= 2; seed++)
        random_run(seed * 0xbf58476d1ce4e5b9ull + seed, true, 1500);
}

/* A fresh seed each run (or CCA_ADV_MARK_SEED), printed for replay. */
Test(adversarial_mark, random_fresh_seed, .timeout = 60) {
    const char *env = getenv("CCA_ADV_MARK_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 0) : tu_now_ns() | 1;
    /* on stderr, not cr_log_warn: Criterion exits non-zero on a warning */
    fprintf(stderr, "adversarial_mark: seed %llu (replay it with CCA_ADV_MARK_SEED=%llu)\n", (unsigned long long)seed,
            (unsigned long long)seed);
    random_run(seed, seed % 4 == 0, 1500);
}

/* ==== a range kept after a refused release (not about the mark) ====================== */

/* A defect found by the random sequences above (fixed in kinds/pages.c): an
 * arena (a domain's footprint arena, or the greedy arena) is reserved by
 * ccai_expandable_reserve and mapped whole; when that map was refused the
 * range went back with vm_release, whose status was ignored, so a refused
 * release left the range reserved on the device with no segment recording
 * it (neither empty-cache nor cca_destroy gave it back, and upstream_frees
 * counted a free that did not happen). Now the range is kept as an empty
 * segment with nothing mapped, as any refused release keeps its range:
 * after everything is freed and the cache emptied, the device reserves no
 * address space, and the allocator's accounts agree with the device's at
 * every step. (The random sequences still keep vm_release refusals away
 * from arena reservations, see rstep; this test covers the case.) */
Test(adversarial_mark, a_refused_release_after_a_refused_arena_map_keeps_the_range_to_give_back) {
    world w;
    w_open(&w, 16 * MiB, "");
    cca_domain *d = NULL;
    cr_assert_eq(cca_domain_create(w.a, "D", &d), CCA_OK);
    w.f.fail_at[TU_FAULT_MAP] = w.f.calls[TU_FAULT_MAP] + 1;         /* the arena's map */
    w.f.fail_at[TU_FAULT_RELEASE] = w.f.calls[TU_FAULT_RELEASE] + 1; /* and giving its range back */
    cca_status st = cca_domain_reserve(w.a, d, 2 * MiB);             /* the retry reserves a second range */
    cr_assert_eq(w.f.failures, 2, "both refusals happened");
    cca_stats s0 = tu_stats(w.a);
    cca_upstream_stats dev0 = tu_upstream_stats(w.f.inner);
    cr_assert_eq(s0.address_space_bytes, dev0.vm_reserved_bytes, "the kept range is counted: %zu vs the device's %zu",
                 s0.address_space_bytes, dev0.vm_reserved_bytes);
    cr_assert_eq(cca_check_invariants(w.a), CCA_OK, "%s", cca_last_error());
    tu_faulty_faults_off(&w.f);
    if (st == CCA_OK)
        cr_assert_eq(cca_domain_release(w.a, d, 0, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_empty_cache(w.a, NULL), CCA_OK, "%s", cca_last_error());
    cca_stats s = tu_stats(w.a);
    cr_assert_eq(s.address_space_bytes, 0);
    cca_upstream_stats dev = tu_upstream_stats(w.f.inner);
    cr_assert_eq(dev.vm_reserved_bytes, 0,
                 "the device still reserves %zu bytes of address space that the allocator no longer knows of",
                 dev.vm_reserved_bytes);
    w_close(&w);
}
