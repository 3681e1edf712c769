/*
 * test_free_index_v1.c — allocator/src/core/free_index_v1.c (sorted bins) against
 * core/free_index.c's free index (version 2), and v1's own structure check.
 *
 * Both indexes hold the SAME block records and are driven by the same
 * seeded sequence; at every step their answers must be identical: the best
 * fit (the exact block pointer), the largest block, the largest run(b),
 * count and bytes; every few steps the blocks each walk visits (as a set,
 * also equal to the test's own model) and both structure checks. Two
 * drivers:
 *   - free set: blocks of fixed, shuffled addresses inserted with random
 *     sizes over every v2 class row and v1 bin (huge ones included), many
 *     equal sizes so that only the address breaks ties; removes, best fits,
 *     whole takes (v2's ghost) and re-inserts under the same key (its
 *     resurrection); v2's node allocation failing in phases, so its
 *     overflow list is used; streams detached and attached again.
 *   - pool: segments tiled by blocks and alloc.c's two paths copied step for
 *     step: an allocation is best fit, then take or split (v2's recent slot
 *     and ghost); a free merges with a free neighbour on either side
 *     (remove, or swap_recent, which v1 always declines), then inserts;
 *     a segment whose one block is free is released (detach). Block
 *     records are reused last-in first-out, as the allocator's slabs do.
 * The link wraps aligned_alloc (v2's tree nodes) and realloc (v1's bins):
 * free_index_v1.cmake.
 */
#include "alloc_test_util.h"
#include "internal.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#define G CCA_GRANULARITY
#define SEEDS 24
#define STEPS 4000

static uint64_t rs;
static uint64_t rnd(void) {
    return tu_rand(&rs);
}

/* ---- host memory, as the library sees it --------------------------------- */

/* v2's tree nodes: refused at fail_pct percent, drawn from their own
 * generator so that the op sequence stays the same. */
static unsigned fail_pct;
static uint64_t fail_rng = 7;
void *__real_aligned_alloc(size_t alignment, size_t size);
void *__wrap_aligned_alloc(size_t alignment, size_t size);
void *__wrap_aligned_alloc(size_t alignment, size_t size) {
    if (fail_pct && size == ((sizeof(ccai_bnode) + 63) & ~(size_t)63) && tu_rand(&fail_rng) % 100 < fail_pct)
        return NULL;
    return __real_aligned_alloc(alignment, size);
}

/* v1's bins grow with realloc: refused while realloc_fails is set. */
static bool realloc_fails;
void *__real_realloc(void *p, size_t size);
void *__wrap_realloc(void *p, size_t size);
void *__wrap_realloc(void *p, size_t size) {
    return realloc_fails ? NULL : __real_realloc(p, size);
}

/* ---- the pair of indexes ---------------------------------------------------- */

typedef struct pair {
    ccai_free_index v2;
    ccai_free_index_v1 v1;
    uint64_t seed;
    int step;
} pair;

static void attach(pair *p, cca_stream s) {
    cr_assert_eq(ccai_free_index_attach(&p->v2, s), CCA_OK);
    cr_assert_eq(ccai_free_index_v1_attach(&p->v1, s), CCA_OK);
}

static void detach(pair *p, cca_stream s) {
    ccai_free_index_detach(&p->v2, s);
    ccai_free_index_v1_detach(&p->v1, s);
}

static void insert(pair *p, ccai_block *b) {
    b->state = CCAI_FREE;
    ccai_free_index_insert(&p->v2, b);
    cr_assert_eq(ccai_free_index_v1_insert(&p->v1, b), CCA_OK);
}

static void remove_both(pair *p, ccai_block *b) {
    ccai_free_index_remove(&p->v2, b);
    ccai_free_index_v1_remove(&p->v1, b);
}

static ccai_block *best_fit(pair *p, cca_stream s, size_t size, size_t max_size) {
    ccai_block *b2 = ccai_free_index_best_fit(&p->v2, s, size, max_size);
    ccai_block *b1 = ccai_free_index_v1_best_fit(&p->v1, s, size, max_size);
    cr_assert_eq(b1, b2, "seed %llu step %d: best fit for %zu on stream %p (max %zu): v1 %p size %zu, v2 %p size %zu",
                 (unsigned long long)p->seed, p->step, size, s, max_size, (void *)b1, b1 ? b1->size : 0, (void *)b2,
                 b2 ? b2->size : 0);
    return b2;
}

/* A run(b) <= b->size fixed by the block's key and a salt: the whole size
 * for some blocks, less (0 included) for the others, so that the largest
 * blocks often lose and the walks go on past them. */
static uint64_t run_salt;
static size_t fake_run(const ccai_block *b) {
    uint64_t h = ((uint64_t)b->addr ^ run_salt) * 0x9e3779b97f4a7c15ull ^ (uint64_t)b->size;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    if (h % 4 == 0)
        return b->size;
    return (h >> 6) % 3 == 0 ? 0 : (size_t)((h >> 8) % (b->size + 1));
}

typedef struct seen {
    const ccai_block **v;
    size_t n, cap;
} seen;

static bool collect(void *user, const ccai_block *b) {
    seen *s = user;
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 256;
        s->v = realloc(s->v, s->cap * sizeof *s->v);
        cr_assert_not_null(s->v);
    }
    s->v[s->n++] = b;
    return true;
}

static int by_pointer(const void *x, const void *y) {
    uintptr_t a = (uintptr_t) * (const ccai_block *const *)x, b = (uintptr_t) * (const ccai_block *const *)y;
    return a < b ? -1 : a > b;
}

static void sorted_walk(const pair *p, bool v1, seen *s) {
    s->n = 0;
    bool done = v1 ? ccai_free_index_v1_walk(&p->v1, collect, s) : ccai_free_index_walk(&p->v2, collect, s);
    cr_assert(done);
    if (s->n)
        qsort(s->v, s->n, sizeof *s->v, by_pointer);
}

/* Every query but best fit, on both indexes; when deep, also both checks
 * and both walks against `model`, the free blocks the test holds, sorted by
 * pointer. */
static void compare(const pair *p, bool deep, const ccai_block **model, size_t model_n) {
    unsigned long long seed = (unsigned long long)p->seed;
    cr_assert_eq(p->v1.count, p->v2.count, "seed %llu step %d: count", seed, p->step);
    cr_assert_eq(p->v1.bytes, p->v2.bytes, "seed %llu step %d: bytes", seed, p->step);
    size_t l1 = ccai_free_index_v1_largest(&p->v1), l2 = ccai_free_index_largest(&p->v2);
    cr_assert_eq(l1, l2, "seed %llu step %d: largest v1 %zu v2 %zu", seed, p->step, l1, l2);
    run_salt = rnd();
    size_t floor = rnd() % 4 == 0 ? (size_t)(rnd() % (l1 + 1)) : 0;
    l1 = ccai_free_index_v1_largest_run(&p->v1, fake_run, floor);
    l2 = ccai_free_index_largest_run(&p->v2, fake_run, floor);
    cr_assert_eq(l1, l2, "seed %llu step %d: largest run v1 %zu v2 %zu (floor %zu)", seed, p->step, l1, l2, floor);
    if (!deep)
        return;
    const char *e1 = ccai_free_index_v1_check(&p->v1), *e2 = ccai_free_index_check(&p->v2);
    cr_assert_null(e1, "seed %llu step %d: %s", seed, p->step, e1);
    cr_assert_null(e2, "seed %llu step %d: %s", seed, p->step, e2);
    static seen w1, w2;
    sorted_walk(p, true, &w1);
    sorted_walk(p, false, &w2);
    cr_assert_eq(w1.n, w2.n, "seed %llu step %d: walks of %zu and %zu blocks", seed, p->step, w1.n, w2.n);
    cr_assert_eq(w1.n, p->v1.count, "seed %llu step %d: v1's walk and count", seed, p->step);
    cr_assert(!w1.n || !memcmp(w1.v, w2.v, w1.n * sizeof *w1.v), "seed %llu step %d: the walks differ", seed, p->step);
    cr_assert_eq(w1.n, model_n, "seed %llu step %d: %zu free blocks indexed, %zu in the model", seed, p->step, w1.n,
                 model_n);
    cr_assert(!w1.n || !memcmp(w1.v, model, w1.n * sizeof *w1.v), "seed %llu step %d: the walk is not the model", seed,
              p->step);
}

/* ---- free set: blocks of fixed addresses, random sizes ------------------------- */

#define SET_BLOCKS 3000
#define STREAMS 4

static const cca_stream set_streams[STREAMS] = {NULL, (cca_stream)0x10, (cca_stream)0x20, (cca_stream)0x30};
static const cca_stream never_attached = (cca_stream)0x40;

/* Every v2 class row and v1 bin: exact classes, around v2's row boundary
 * (511/512/513 units) and powers of two, huge sizes (v1's last bin, from
 * 512 MiB), and a few sizes drawn often, so that addresses break ties. */
static size_t random_size(void) {
    static const size_t often[] = {G,          2 * G,          8 * G,    511 * G,        512 * G,
                                   513 * G,    (1u << 20) - G, 1u << 20, (1u << 20) + G, (512u << 20) - G,
                                   512u << 20, (size_t)1 << 40};
    switch (rnd() % 5) {
    case 0: return (1 + rnd() % 63) * G;
    case 1: return (1 + rnd() % 4096) * G;
    case 2: return ((size_t)1 << (20 + rnd() % 20)) + (rnd() % 1024) * G;
    case 3: return ((size_t)1 << (29 + rnd() % 34)) + (rnd() % 3) * G - G; /* 512 MiB - 512 .. 2^62 + 512 */
    default: return often[rnd() % (sizeof often / sizeof often[0])];
    }
}

static void free_set(uint64_t seed) {
    rs = seed;
    pair p = {.seed = seed};
    static ccai_block blocks[SET_BLOCKS];
    static bool in[SET_BLOCKS];
    memset(blocks, 0, sizeof blocks);
    memset(in, 0, sizeof in);
    unsigned attached[STREAMS] = {0}; /* segments, as the pool would count them */
    for (int s = 0; s < STREAMS; s++) {
        attach(&p, set_streams[s]);
        attached[s] = 1;
    }
    attach(&p, set_streams[1]); /* two segments: one detach keeps its bins */
    attached[1]++;
    unsigned order[SET_BLOCKS]; /* shuffled, so that an index's order is not the address order */
    for (unsigned i = 0; i < SET_BLOCKS; i++)
        order[i] = i;
    for (unsigned i = SET_BLOCKS - 1; i > 0; i--) {
        unsigned j = (unsigned)(rnd() % (i + 1)), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (int i = 0; i < SET_BLOCKS; i++) {
        blocks[i].addr = (uintptr_t)(order[i] + 1) * 4096;
        blocks[i].stream = set_streams[rnd() % STREAMS];
        blocks[i].state = CCAI_LIVE;
    }
    static const ccai_block *model[SET_BLOCKS];
    for (p.step = 0; p.step < STEPS; p.step++) {
        if (p.step % 500 == 0) {
            static const unsigned phases[] = {0, 0, 20, 100};
            fail_pct = phases[rnd() % 4];
        }
        int i = (int)(rnd() % SET_BLOCKS);
        ccai_block *b = &blocks[i];
        int s = (int)(b->stream == NULL ? 0 : (uintptr_t)b->stream / 0x10);
        if (!in[i] && attached[s]) {
            if (b->size == 0 || rnd() % 4) /* else the same key again: v2's ghost comes back */
                b->size = random_size();
            insert(&p, b);
            in[i] = true;
        } else if (in[i] && rnd() % 2) {
            remove_both(&p, b);
            b->state = CCAI_LIVE;
            in[i] = false;
        }
        cca_stream qs = rnd() % 16 ? set_streams[rnd() % STREAMS] : never_attached;
        size_t want = random_size(), max_size = rnd() % 4 ? SIZE_MAX : random_size();
        ccai_block *got = best_fit(&p, qs, want, max_size);
        if (got && rnd() % 2) { /* what cca_alloc does next: take it whole */
            ccai_free_index_take(&p.v2, got);
            ccai_free_index_v1_take(&p.v1, got);
            got->state = CCAI_LIVE;
            if (rnd() % 4 == 0) /* and freed unchanged at once: the cached pair */
                insert(&p, got);
            else
                in[got - blocks] = false;
        }
        if (rnd() % 64 == 0) { /* a stream's segments come and go */
            int t = (int)(rnd() % STREAMS);
            bool empty = true;
            for (int k = 0; k < SET_BLOCKS && empty; k++)
                empty = !(in[k] && blocks[k].stream == set_streams[t]);
            if (attached[t] && empty) {
                detach(&p, set_streams[t]);
                attached[t]--;
            } else if (!attached[t] || rnd() % 2) {
                attach(&p, set_streams[t]);
                attached[t]++;
            }
        }
        bool deep = p.step % 32 == 0 || p.step == STEPS - 1;
        size_t n = 0;
        if (deep) {
            for (int k = 0; k < SET_BLOCKS; k++)
                if (in[k])
                    model[n++] = &blocks[k];
            qsort(model, n, sizeof *model, by_pointer);
        }
        compare(&p, deep, model, n);
    }
    fail_pct = 0;
    ccai_free_index_destroy(&p.v2);
    ccai_free_index_v1_destroy(&p.v1);
}

/* ---- pool: segments tiled by blocks, alloc.c's alloc and free ------------------ */

#define RECORDS 4096
#define SEGMENTS 64

typedef struct segment {
    ccai_block *first; /* NULL: the slot is unused */
    cca_stream stream;
} segment;

typedef struct pool {
    pair p;
    ccai_block recs[RECORDS];
    ccai_block *spare[RECORDS]; /* records to reuse, last in first out */
    size_t nspare;
    segment segs[SEGMENTS];
    ccai_block *live[RECORDS];
    size_t nlive;
    uintptr_t next_base;
} pool;

static ccai_block *record_new(pool *o) {
    if (!o->nspare)
        return NULL;
    ccai_block *b = o->spare[--o->nspare];
    memset(b, 0, sizeof *b);
    return b;
}

static void record_free(pool *o, ccai_block *b) {
    b->state = CCAI_LIVE; /* a recycled record: neither index may see it as free */
    b->size = 0;
    o->spare[o->nspare++] = b;
}

/* b absorbs its successor (block.c's absorb_next); the record is recycled. */
static void absorb_next(pool *o, ccai_block *b) {
    ccai_block *n = b->next;
    b->size += n->size;
    b->next = n->next;
    if (n->next)
        n->next->prev = b;
    record_free(o, n);
}

static bool segment_new(pool *o, cca_stream s, size_t size) {
    for (int i = 0; i < SEGMENTS; i++) {
        if (o->segs[i].first)
            continue;
        ccai_block *b = record_new(o);
        if (!b)
            return false;
        b->addr = o->next_base;
        b->size = size;
        b->stream = s;
        o->next_base += size + (rnd() % 4) * G; /* sometimes adjacent to the last one: still no merge across */
        o->segs[i] = (segment){.first = b, .stream = s};
        attach(&o->p, s);
        insert(&o->p, b);
        return true;
    }
    return false;
}

/* block.h's ccai_block_take: the block found by the last best fit, whole or split. */
static void take(pool *o, ccai_block *b, size_t size) {
    ccai_block *rest = b->size > size && rnd() % 4 ? record_new(o) : NULL;
    if (!rest) {
        ccai_free_index_take(&o->p.v2, b);
        ccai_free_index_v1_take(&o->p.v1, b);
    } else {
        rest->addr = b->addr + size;
        rest->size = b->size - size;
        rest->stream = b->stream;
        rest->state = CCAI_FREE;
        ccai_free_index_split(&o->p.v2, b, rest);
        cr_assert_eq(ccai_free_index_v1_split(&o->p.v1, b, rest), CCA_OK);
        rest->prev = b;
        rest->next = b->next;
        if (b->next)
            b->next->prev = rest;
        b->next = rest;
        b->size = size;
    }
    b->state = CCAI_LIVE;
    o->live[o->nlive++] = b;
}

/* block.c's ccai_pool_return_unlinked, for both indexes. */
static void give_back(pool *o, ccai_block *b) {
    b->state = CCAI_FREE;
    if (b->prev && b->prev->state == CCAI_FREE) {
        ccai_block *p = b->prev;
        remove_both(&o->p, p);
        absorb_next(o, p);
        b = p;
    }
    ccai_block *n = b->next;
    bool in2 = false, in1 = false; /* b already in (by swap_recent) */
    if (n && n->state == CCAI_FREE) {
        in2 = ccai_free_index_swap_recent(&o->p.v2, n, b);
        in1 = ccai_free_index_v1_swap_recent(&o->p.v1, n, b);
        cr_assert(!in1, "v1 has no recent slot");
        if (!in2)
            ccai_free_index_remove(&o->p.v2, n);
        ccai_free_index_v1_remove(&o->p.v1, n);
        absorb_next(o, b);
    }
    if (!in2)
        ccai_free_index_insert(&o->p.v2, b);
    cr_assert_eq(ccai_free_index_v1_insert(&o->p.v1, b), CCA_OK);
}

static size_t request_size(void) {
    switch (rnd() % 4) {
    case 0: return (1 + rnd() % 8) * G;
    case 1: return (1 + rnd() % 2048) * G;
    case 2: return (1 + rnd() % 64) * (1u << 20);
    default: return (1 + rnd() % 4) * ((size_t)1 << (30 + rnd() % 6)); /* huge: v1's last bin */
    }
}

static void pool_run(uint64_t seed) {
    rs = seed;
    pool *o = calloc(1, sizeof *o);
    cr_assert_not_null(o);
    o->p.seed = seed;
    for (size_t i = 0; i < RECORDS; i++)
        o->spare[o->nspare++] = &o->recs[RECORDS - 1 - i];
    o->next_base = (uintptr_t)1 << 32;
    static const ccai_block *model[RECORDS];
    for (o->p.step = 0; o->p.step < STEPS; o->p.step++) {
        if (o->p.step % 500 == 0)
            fail_pct = rnd() % 3 ? 0 : 50;
        uint64_t what = rnd() % 10;
        cca_stream s = set_streams[rnd() % STREAMS];
        if (what < 6) { /* allocate */
            size_t size = request_size(), max_size = rnd() % 4 ? SIZE_MAX : size + request_size();
            ccai_block *b = best_fit(&o->p, s, size, max_size);
            if (!b && segment_new(o, s, size + (rnd() % 3) * request_size()))
                b = best_fit(&o->p, s, size, max_size);
            if (b)
                take(o, b, size);
        } else if (what < 9 && o->nlive) { /* free a live block */
            size_t k = rnd() % o->nlive;
            ccai_block *b = o->live[k];
            o->live[k] = o->live[--o->nlive];
            give_back(o, b);
        } else { /* release a segment that is one free block */
            segment *g = &o->segs[rnd() % SEGMENTS];
            if (g->first && g->first->state == CCAI_FREE && !g->first->next) {
                remove_both(&o->p, g->first);
                detach(&o->p, g->stream);
                record_free(o, g->first);
                g->first = NULL;
            }
        }
        bool deep = o->p.step % 32 == 0 || o->p.step == STEPS - 1;
        size_t n = 0;
        for (int i = 0; deep && i < SEGMENTS; i++)
            for (const ccai_block *b = o->segs[i].first; b; b = b->next)
                if (b->state == CCAI_FREE)
                    model[n++] = b;
        if (deep)
            qsort(model, n, sizeof *model, by_pointer);
        compare(&o->p, deep, model, n);
    }
    fail_pct = 0;
    ccai_free_index_destroy(&o->p.v2);
    ccai_free_index_v1_destroy(&o->p.v1);
    free(o);
}

static uint64_t seed_of(int k) {
    return 0x9e3779b97f4a7c15ull * (uint64_t)(k + 1) ^ 0x2545f4914f6cdd1dull;
}

Test(free_index_v1, same_answers_as_v2_on_a_free_set) {
    for (int k = 0; k < SEEDS; k++)
        free_set(seed_of(k));
}

Test(free_index_v1, same_answers_as_v2_under_pool_alloc_and_free) {
    for (int k = 0; k < SEEDS; k++)
        pool_run(seed_of(k));
}

/* ---- v1 on its own --------------------------------------------------------------- */

/* Equal sizes: the lowest address, whatever the insertion order; a block
 * at a bin's edge is found from the bin below; max_size refuses. */
Test(free_index_v1, ties_bins_and_max_size) {
    ccai_free_index_v1 ix = {0};
    cr_assert_eq(ccai_free_index_v1_attach(&ix, NULL), CCA_OK);
    ccai_block b[4] = {{.size = 3 * G, .addr = 0x9000},
                       {.size = 3 * G, .addr = 0x1000},
                       {.size = 3 * G, .addr = 0x5000},
                       {.size = 1024 * G, .addr = 0x20000}};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(ccai_free_index_v1_insert(&ix, &b[i]), CCA_OK);
    cr_assert_eq(ccai_free_index_v1_best_fit(&ix, NULL, 2 * G, SIZE_MAX), &b[1]);
    cr_assert_eq(ccai_free_index_v1_best_fit(&ix, NULL, 4 * G, SIZE_MAX), &b[3]); /* 3 units: bin 1; bins 2-9 empty */
    cr_assert_null(ccai_free_index_v1_best_fit(&ix, NULL, 4 * G, 1023 * G));
    cr_assert_null(ccai_free_index_v1_best_fit(&ix, (cca_stream)0x10, G, SIZE_MAX)); /* no such stream */
    cr_assert_eq(ccai_free_index_v1_largest(&ix), 1024 * G);
    ccai_free_index_v1_remove(&ix, &b[1]);
    cr_assert_eq(ccai_free_index_v1_best_fit(&ix, NULL, G, SIZE_MAX), &b[2]);
    cr_assert_null(ccai_free_index_v1_check(&ix));
    ccai_free_index_v1_destroy(&ix);
}

/* The check names what is broken: a key changed in place, a count off. */
Test(free_index_v1, check_finds_broken_rules) {
    ccai_free_index_v1 ix = {0};
    cr_assert_eq(ccai_free_index_v1_attach(&ix, NULL), CCA_OK);
    ccai_block b[3] = {
        {.size = 4 * G, .addr = 0x1000}, {.size = 5 * G, .addr = 0x2000}, {.size = 6 * G, .addr = 0x3000}};
    for (int i = 0; i < 3; i++)
        cr_assert_eq(ccai_free_index_v1_insert(&ix, &b[i]), CCA_OK);
    cr_assert_null(ccai_free_index_v1_check(&ix));
    b[1].size = 7 * G; /* same bin, out of order */
    cr_assert_str_eq(ccai_free_index_v1_check(&ix), "free index v1: a bin is not in (size, address) order");
    b[1].size = 16 * G; /* another bin */
    cr_assert_str_eq(ccai_free_index_v1_check(&ix), "free index v1: a block is in the bin of another size or stream");
    b[1].size = 5 * G;
    b[1].state = CCAI_LIVE;
    cr_assert_str_eq(ccai_free_index_v1_check(&ix), "free index v1: a bin holds a block that is not free");
    b[1].state = CCAI_FREE;
    ix.count++;
    cr_assert_str_eq(ccai_free_index_v1_check(&ix), "free index v1: count or bytes differ from the blocks indexed");
    ix.count--;
    ix.bytes += G;
    cr_assert_str_eq(ccai_free_index_v1_check(&ix), "free index v1: count or bytes differ from the blocks indexed");
    ix.bytes -= G;
    cr_assert_null(ccai_free_index_v1_check(&ix));
    ccai_free_index_v1_destroy(&ix);
}

/* A size under one granule (0 included) asks bin 0: the smallest block,
 * one granule, is found there, not skipped for the next bin's. */
Test(free_index_v1, a_size_under_a_granule_finds_the_smallest_block) {
    ccai_free_index_v1 ix = {0};
    cr_assert_eq(ccai_free_index_v1_attach(&ix, NULL), CCA_OK);
    ccai_block b[2] = {{.size = G, .addr = 0x9000}, {.size = 2 * G, .addr = 0x1000}};
    for (int i = 0; i < 2; i++)
        cr_assert_eq(ccai_free_index_v1_insert(&ix, &b[i]), CCA_OK);
    const size_t sizes[3] = {0, 1, G - 1};
    for (int i = 0; i < 3; i++)
        cr_assert_eq(ccai_free_index_v1_best_fit(&ix, NULL, sizes[i], SIZE_MAX), &b[0], "size %zu", sizes[i]);
    cr_assert_null(ccai_free_index_v1_check(&ix));
    ccai_free_index_v1_destroy(&ix);
}

/* A bin that cannot grow: insert and split fail and change nothing. */
Test(free_index_v1, host_oom_changes_nothing) {
    ccai_free_index_v1 ix = {0};
    cr_assert_eq(ccai_free_index_v1_attach(&ix, NULL), CCA_OK);
    ccai_block b[9];
    memset(b, 0, sizeof b);
    for (int i = 0; i < 8; i++) { /* fills bin 0's first array (8) */
        b[i] = (ccai_block){.size = G, .addr = (uintptr_t)(i + 1) * 0x1000};
        cr_assert_eq(ccai_free_index_v1_insert(&ix, &b[i]), CCA_OK);
    }
    b[8] = (ccai_block){.size = G, .addr = 0x100000};
    realloc_fails = true;
    cr_assert_eq(ccai_free_index_v1_insert(&ix, &b[8]), CCA_ERR_OUT_OF_MEMORY);
    ccai_block whole = {.size = 2 * G, .addr = 0x200000};
    realloc_fails = false;
    cr_assert_eq(ccai_free_index_v1_insert(&ix, &whole), CCA_OK); /* bin 1 */
    realloc_fails = true;
    cr_assert_eq(ccai_free_index_v1_split(&ix, &whole, &b[8]), CCA_ERR_OUT_OF_MEMORY); /* rest into full bin 0 */
    realloc_fails = false;
    cr_assert_eq(ix.count, 9);
    cr_assert_eq(ix.bytes, 10 * G);
    cr_assert_eq(ccai_free_index_v1_best_fit(&ix, NULL, 2 * G, SIZE_MAX), &whole);
    cr_assert_null(ccai_free_index_v1_check(&ix));
    cr_assert_eq(ccai_free_index_v1_split(&ix, &whole, &b[8]), CCA_OK);
    cr_assert_eq(ccai_free_index_v1_best_fit(&ix, NULL, 2 * G, SIZE_MAX), NULL);
    cr_assert_eq(ix.count, 9);
    ccai_free_index_v1_destroy(&ix);
}
