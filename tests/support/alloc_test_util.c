/* alloc_test_util.c — see alloc_test_util.h. */
#include "alloc_test_util.h"
#include "ccai_rng.h"

#include <criterion/criterion.h>
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>
#include <errno.h>

/* ---- allocator short-hands ------------------------------------------------ */

cca_allocator *tu_allocator(cca_upstream *u, const char *conf) {
    cca_config cfg;
    cca_config_default(&cfg);
    cca_status st = cca_config_parse(&cfg, conf);
    cr_assert_eq(st, CCA_OK, "config '%s': %s", conf ? conf : "", cca_last_error());
    cca_allocator *a = NULL;
    st = cca_create(&cfg, u, &a);
    cr_assert_eq(st, CCA_OK, "cca_create: %s", cca_last_error());
    cr_assert_not_null(a);
    return a;
}

void tu_host_allocator(size_t capacity, const char *conf, cca_upstream **u, cca_allocator **a) {
    cr_assert_eq(cca_upstream_host_create(capacity, u), CCA_OK, "%s", cca_last_error());
    *a = tu_allocator(*u, conf);
}

void tu_destroy_clean(cca_allocator *a, cca_upstream *u) {
    tu_check(a);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.active_blocks, 0, "%zu blocks still live before cca_destroy", s.active_blocks);
    cca_upstream_stats before = tu_upstream_stats(u);
    cr_assert_eq(cca_destroy(a), CCA_OK, "cca_destroy: %s", cca_last_error());
    cca_upstream_stats after = tu_upstream_stats(u);
    cr_assert_eq(after.bytes_in_use, before.bytes_in_use - s.reserved_bytes,
                 "cca_destroy gave back %zu bytes, the allocator held %zu", before.bytes_in_use - after.bytes_in_use,
                 s.reserved_bytes);
    /* classic segments are upstream allocations; expandable ones ranges */
    cr_assert_eq(after.allocations, before.allocations - (s.segments - s.expandable_segments));
    cr_assert_eq(after.vm_reserved_bytes, before.vm_reserved_bytes - s.address_space_bytes);
    cr_assert_eq(after.vm_mapped_bytes, before.vm_mapped_bytes - s.mapped_bytes);
}

cca_upstream *tu_vm_device(size_t capacity, size_t gran) {
    return tu_vm_device_backed(capacity, gran, CCA_VM_PAGES);
}

cca_upstream *tu_vm_device_backed(size_t capacity, size_t gran, int backing) {
    cca_host_options o = {.capacity = capacity, .vm_granularity = gran, .vm_backing = backing};
    cca_upstream *u = NULL;
    cca_status st = cca_upstream_host_create_with(&o, &u);
    cr_assert_eq(st, CCA_OK, "host device of %zu bytes, granularity %zu: %s", capacity, gran, cca_last_error());
    return u;
}

void tu_empty_all(cca_allocator *a, cca_upstream *u) {
    cca_release_report r;
    cr_assert_eq(cca_empty_cache(a, &r), CCA_OK, "empty_cache: %s", cca_last_error());
    tu_check(a);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.active_blocks, 0);
    cr_assert_eq(s.reserved_bytes, 0, "reserved %zu after empty_cache", s.reserved_bytes);
    cr_assert_eq(s.segments, 0);
    cr_assert_eq(s.expandable_segments, 0);
    cr_assert_eq(s.address_space_bytes, 0);
    cr_assert_eq(s.mapped_bytes, 0);
    cr_assert_eq(r.bytes_still_reserved, 0);
    cca_upstream_stats us = tu_upstream_stats(u);
    cr_assert_eq(us.vm_mapped_bytes, 0);
    cr_assert_eq(us.vm_reserved_bytes, 0);
    cr_assert_eq(us.bytes_in_use, 0);
}

void tu_teardown(cca_allocator *a, cca_upstream *u) {
    tu_destroy_clean(a, u);
    cca_upstream_stats us = tu_upstream_stats(u);
    cr_assert_eq(us.bytes_in_use, 0, "upstream still holds %zu bytes after cca_destroy", us.bytes_in_use);
    cr_assert_eq(us.allocations, 0, "upstream still holds %zu allocations", us.allocations);
    cr_assert_eq(us.alloc_calls, us.free_calls);
    cca_upstream_destroy(u);
}

/* Criterion ignores assertion failures in .fini, but not a crash there. */
static void fixture_fail(const char *what, const char *detail) {
    fprintf(stderr, "fixture teardown: %s (%s)\n", what, detail);
    abort();
}

void tu_fixture_teardown(cca_allocator *a, cca_upstream *u) {
    if (cca_check_invariants(a) != CCA_OK)
        fixture_fail("invariants broken", cca_last_error());
    cca_stats s;
    cca_get_stats(a, &s);
    if (s.active_blocks)
        fixture_fail("blocks still live at the end of the test", "");
    if (cca_destroy(a) != CCA_OK)
        fixture_fail("cca_destroy failed", cca_last_error());
    cca_upstream_stats us;
    cca_upstream_get_stats(u, &us);
    if (us.bytes_in_use || us.allocations)
        fixture_fail("the upstream still holds memory after cca_destroy", "");
    cca_upstream_destroy(u);
}

void *tu_alloc(cca_allocator *a, size_t size, cca_stream s) {
    void *p = (void *)1;
    cca_status st = cca_alloc(a, size, s, &p);
    cr_assert_eq(st, CCA_OK, "cca_alloc(%zu): %s / %s", size, cca_status_string(st), cca_last_error());
    cr_assert_not_null(p, "cca_alloc(%zu) returned NULL", size);
    cr_assert_eq((uintptr_t)p % CCA_ALIGNMENT, 0, "%p is not %u-aligned", p, CCA_ALIGNMENT);
    return p;
}

void tu_free(cca_allocator *a, void *p) {
    cca_status st = cca_free(a, p);
    cr_assert_eq(st, CCA_OK, "cca_free(%p): %s / %s", p, cca_status_string(st), cca_last_error());
}

size_t tu_block_size(cca_allocator *a, const void *p) {
    size_t size = 0;
    cr_assert_eq(cca_block_size(a, p, &size), CCA_OK, "cca_block_size(%p): %s", p, cca_last_error());
    return size;
}

cca_stats tu_stats(const cca_allocator *a) {
    cca_stats s;
    memset(&s, 0, sizeof s);
    cca_get_stats(a, &s);
    return s;
}

cca_upstream_stats tu_upstream_stats(cca_upstream *u) {
    cca_upstream_stats s;
    memset(&s, 0, sizeof s);
    cr_assert_eq(cca_upstream_get_stats(u, &s), CCA_OK);
    return s;
}

void tu_check(const cca_allocator *a) {
    cca_status st = cca_check_invariants(a);
    cr_assert_eq(st, CCA_OK, "invariants: %s", cca_last_error());
}

#define FIELD_EQ(f)                                                                                                    \
    cr_assert_eq((uint64_t)expected->f, (uint64_t)actual->f, "%s: " #f " is %llu, expected %llu", what,                \
                 (unsigned long long)actual->f, (unsigned long long)expected->f)

void tu_assert_stats_equal(const cca_stats *expected, const cca_stats *actual, const char *what) {
    FIELD_EQ(allocated_bytes);
    FIELD_EQ(allocated_bytes_peak);
    FIELD_EQ(requested_bytes);
    FIELD_EQ(requested_bytes_peak);
    FIELD_EQ(reserved_bytes);
    FIELD_EQ(reserved_bytes_peak);
    FIELD_EQ(active_blocks);
    FIELD_EQ(active_blocks_peak);
    FIELD_EQ(pending_blocks);
    FIELD_EQ(cached_blocks);
    FIELD_EQ(cached_bytes);
    FIELD_EQ(segments);
    FIELD_EQ(segments_peak);
    FIELD_EQ(largest_free_block);
    FIELD_EQ(alloc_calls);
    FIELD_EQ(free_calls);
    FIELD_EQ(upstream_allocs);
    FIELD_EQ(upstream_frees);
    FIELD_EQ(alloc_retries);
    FIELD_EQ(ooms);
    FIELD_EQ(splits);
    FIELD_EQ(merges);
    cr_assert_eq(expected->fragmentation, actual->fragmentation, "%s: fragmentation %g, expected %g", what,
                 actual->fragmentation, expected->fragmentation);
}

void tu_assert_intact(const cca_allocator *a, const cca_stats *before, const char *what) {
    tu_check(a);
    cca_stats now = tu_stats(a);
    tu_assert_stats_equal(before, &now, what);
}

/* ---- patterns and randomness ------------------------------------------------- */

void tu_capture_log(void *capture, const char *line) {
    tu_log_capture *c = capture;
    c->lines++;
    snprintf(c->last, sizeof c->last, "%s", line);
}

uint64_t tu_rand(uint64_t *state) {
    return ccai_splitmix64_next(state);
}

/* The pattern: the bytes of a block filled with `seed` are, 8 at a time,
 * pattern_word(seed, k) for k = 0, 1, ... as the host stores a uint64_t, so
 * an aligned block is filled and checked a word at a time (a byte at a
 * time, the fill took a third of test_random's time under ASan) and a byte
 * anywhere reads the same whichever way it is reached. */
static uint64_t pattern_word(uint64_t seed, size_t k) {
    return ccai_splitmix64_at(seed, (uint64_t)k + 1);
}

static unsigned char pattern_byte(uint64_t seed, size_t i) {
    uint64_t w = pattern_word(seed, i / 8);
    unsigned char bytes[8];
    memcpy(bytes, &w, sizeof bytes);
    return bytes[i % 8];
}

typedef uint64_t __attribute__((may_alias)) tu_word;

/* Bytes [from, to) of the block at b: words where b + i is aligned. */
static bool visit_range(unsigned char *b, size_t from, size_t to, uint64_t seed, bool write) {
    size_t i = from;
    bool words = (uintptr_t)b % 8 == 0;
    while (i < to) {
        if (words && i % 8 == 0 && to - i >= 8) {
            tu_word *w = (tu_word *)(b + i);
            uint64_t want = pattern_word(seed, i / 8);
            if (write)
                *w = want;
            else if (*w != want)
                return false;
            i += 8;
            continue;
        }
        if (write)
            b[i] = pattern_byte(seed, i);
        else if (b[i] != pattern_byte(seed, i))
            return false;
        i++;
    }
    return true;
}

/* Offsets visited: all of a small block, else head, tail and one word per page. */
#define FULL_FILL (64 * KiB)
#define EDGE (256)

static bool visit(void *p, size_t size, uint64_t seed, bool write) {
    unsigned char *b = p;
    if (size <= FULL_FILL)
        return visit_range(b, 0, size, seed, write);
    if (!visit_range(b, 0, EDGE, seed, write))
        return false;
    for (size_t i = EDGE; i + 8 <= size - EDGE; i += 4096)
        if (!visit_range(b, i, i + 8, seed, write))
            return false;
    return visit_range(b, size - EDGE, size, seed, write);
}

size_t tu_bytes_not(const void *p, size_t n, unsigned char byte) {
    const unsigned char *b = p;
    /* all n bytes are b[0] when each equals the next: one memcmp */
    if (n == 0 || (b[0] == byte && memcmp(b, b + 1, n - 1) == 0))
        return 0;
    size_t changed = 0;
    for (size_t i = 0; i < n; i++)
        changed += b[i] != byte;
    return changed;
}

void tu_fill(void *p, size_t size, uint64_t seed) {
    visit(p, size, seed, true);
}
bool tu_check_fill(const void *p, size_t size, uint64_t seed) {
    return visit((void *)p, size, seed, false);
}

/* ---- the test double upstream ---------------------------------------------- */

static bool next_call_fails(tu_upstream *t) {
    t->calls++;
    if (t->fail_at && t->calls == t->fail_at) {
        t->failures++;
        return true;
    }
    return false;
}

static cca_status t_alloc(void *ctx, size_t size, void **ptr) {
    tu_upstream *t = ctx;
    pthread_mutex_lock(&t->lock);
    t->alloc_calls++;
    cca_status st = CCA_OK;
    if (next_call_fails(t))
        st = t->alloc_error;
    else if (size > t->capacity - t->used || t->live_count == TU_MAX_LIVE)
        st = CCA_ERR_OUT_OF_MEMORY;
    void *p = NULL;
    if (st == CCA_OK) {
        p = aligned_alloc(CCA_ALIGNMENT, size);
        cr_assert_not_null(p, "test upstream: host memory exhausted (%zu bytes)", size);
        t->used += size;
        t->live[t->live_count++] = (tu_live){p, size};
        *ptr = p;
    }
    pthread_mutex_unlock(&t->lock);
    return st;
}

static cca_status t_free(void *ctx, void *ptr, size_t size) {
    tu_upstream *t = ctx;
    pthread_mutex_lock(&t->lock);
    t->free_calls++;
    if (next_call_fails(t)) {
        pthread_mutex_unlock(&t->lock);
        return CCA_ERR_UPSTREAM;
    }
    size_t i = 0;
    while (i < t->live_count && t->live[i].ptr != ptr)
        i++;
    cr_assert_lt(i, t->live_count, "test upstream: free of %p, which it never handed out", ptr);
    cr_assert_eq(t->live[i].size, size, "test upstream: free of %p with size %zu, allocated with %zu", ptr, size,
                 t->live[i].size);
    t->live[i] = t->live[--t->live_count];
    t->used -= size;
    if (t->freed_count < sizeof t->freed_sizes / sizeof t->freed_sizes[0]) {
        t->freed_ptrs[t->freed_count] = ptr;
        t->freed_sizes[t->freed_count++] = size;
    }
    pthread_mutex_unlock(&t->lock);
    free(ptr);
    return CCA_OK;
}

static cca_status t_mem_info(void *ctx, size_t *free_bytes, size_t *total_bytes) {
    tu_upstream *t = ctx;
    pthread_mutex_lock(&t->lock);
    *free_bytes = t->capacity - t->used;
    *total_bytes = t->capacity;
    pthread_mutex_unlock(&t->lock);
    return CCA_OK;
}

static cca_status t_sync(void *ctx) {
    tu_upstream *t = ctx;
    pthread_mutex_lock(&t->lock);
    t->sync_calls++;
    bool fail = t->fail_sync;
    if (!t->sync_keeps_events && !fail)
        t->events_done = t->events_recorded;
    pthread_mutex_unlock(&t->lock);
    return fail ? CCA_ERR_UPSTREAM : CCA_OK;
}

/* The test doubles' events are their own bookkeeping, not the library's
 * host memory: a suite that injects host malloc failures (malloc_fault.h,
 * linked only there, hence weak) holds the injector around them. */
void tu_malloc_hold(bool on) __attribute__((weak));
static uint64_t *new_event(void) {
    if (tu_malloc_hold)
        tu_malloc_hold(true);
    uint64_t *e = malloc(sizeof *e);
    if (tu_malloc_hold)
        tu_malloc_hold(false);
    cr_assert_not_null(e);
    return e;
}

/* What a refused record leaves in *event, as a driver may leave its
 * out-parameter: not an event, never to be queried or destroyed. */
static uint64_t t_not_an_event;

static cca_status t_event_record(void *ctx, cca_stream s, void **event) {
    (void)s;
    tu_upstream *t = ctx;
    if (t->fail_record) {
        *event = &t_not_an_event;
        return CCA_ERR_UPSTREAM;
    }
    uint64_t *e = new_event();
    pthread_mutex_lock(&t->lock);
    t->event_records++;
    t->events_live++;
    *e = ++t->events_recorded;
    if (!t->hold_events)
        t->events_done = t->events_recorded;
    pthread_mutex_unlock(&t->lock);
    *event = e;
    return CCA_OK;
}

static cca_status t_event_query(void *ctx, void *event) {
    tu_upstream *t = ctx;
    cr_assert(event != &t_not_an_event, "the allocator queried what a refused event_record left in *event");
    pthread_mutex_lock(&t->lock);
    t->event_queries++;
    bool done = *(uint64_t *)event <= t->events_done;
    pthread_mutex_unlock(&t->lock);
    return done ? CCA_OK : CCA_ERR_NOT_READY;
}

static cca_status t_event_destroy(void *ctx, void *event) {
    tu_upstream *t = ctx;
    cr_assert(event != &t_not_an_event, "the allocator destroyed what a refused event_record left in *event");
    pthread_mutex_lock(&t->lock);
    t->events_live--;
    pthread_mutex_unlock(&t->lock);
    free(event);
    return CCA_OK;
}

static void t_destroy(void *ctx) {
    tu_upstream *t = ctx;
    pthread_mutex_destroy(&t->lock);
}

cca_upstream *tu_upstream_create(tu_upstream *t, size_t capacity, bool with_events) {
    memset(t, 0, sizeof *t);
    pthread_mutex_init(&t->lock, NULL);
    t->capacity = capacity;
    t->alloc_error = CCA_ERR_OUT_OF_MEMORY;
    cca_upstream_ops ops = {
        .alloc = t_alloc,
        .free = t_free,
        .mem_info = t_mem_info,
        .synchronize = t_sync,
        .destroy = t_destroy,
        .name = "test",
    };
    if (with_events) {
        ops.event_record = t_event_record;
        ops.event_query = t_event_query;
        ops.event_destroy = t_event_destroy;
    }
    cca_upstream *u = NULL;
    cr_assert_eq(cca_upstream_custom_create(&ops, t, &u), CCA_OK, "%s", cca_last_error());
    return u;
}

void tu_upstream_release_events(tu_upstream *t) {
    pthread_mutex_lock(&t->lock);
    t->events_done = t->events_recorded;
    pthread_mutex_unlock(&t->lock);
}

void tu_upstream_free_leftovers(tu_upstream *t) {
    pthread_mutex_lock(&t->lock);
    for (size_t i = 0; i < t->live_count; i++)
        free(t->live[i].ptr);
    t->live_count = 0;
    t->used = 0;
    pthread_mutex_unlock(&t->lock);
}

/* ---- the fault-injecting wrapper upstream ---------------------------------- */

/* tu_faulty (its contract in alloc_test_util.h): each op that can fail first
 * numbers its call in calls[k] (faulty_fails) and, when that number is
 * fail_at[k] (or later, sticky), returns an injected failure without reaching
 * the inner upstream; otherwise it forwards the call and counts a success in
 * ok[k] (faulty_count). */
const char *const tu_fault_names[TU_FAULT_KINDS] = {"alloc",      "free",       "vm_reserve",  "vm_map",
                                                    "vm_unmap",   "vm_release", "synchronize", "stream_synchronize",
                                                    "host_alloc", "host_free",  "copy",        "copy_wait"};

/* Counts the call of kind k; true when it is the one to fail (or a later one,
 * sticky). */
static bool faulty_fails(tu_faulty *f, tu_fault_kind k) {
    uint64_t n = ++f->calls[k], at = f->fail_at[k];
    if (f->order_count < TU_FAULTY_ORDER)
        f->order[f->order_count] = k;
    f->order_count++;
    if (at && (n == at || (f->sticky[k] && n > at))) {
        f->failures++;
        return true;
    }
    return false;
}

/* The inner upstream's answer to a call of kind k, counted in ok[k] when it
 * granted it. */
static cca_status faulty_count(tu_faulty *f, tu_fault_kind k, cca_status st) {
    if (st == CCA_OK)
        f->ok[k]++;
    return st;
}

static cca_status faulty_injected(const tu_faulty *f, tu_fault_kind k, cca_status st) {
    return cca_set_error(st, "%s: injected %s failure", f->name, tu_fault_names[k]);
}

/* ---- the book (tu_faulty.book) ---- */

static void book_add(tu_piece *v, size_t *n, uintptr_t lo, uintptr_t hi) {
    cr_assert_lt(*n, TU_BOOK_MAX, "the device holds more than %d pieces: beyond the test's book", TU_BOOK_MAX);
    v[(*n)++] = (tu_piece){lo, hi};
}

/* Take [lo, hi) out of the pieces; whole: it must consist of whole pieces. */
static void book_carve(tu_piece *v, size_t *n, uintptr_t lo, uintptr_t hi, bool whole) {
    size_t covered = 0;
    for (size_t i = 0; i < *n;) {
        tu_piece p = v[i];
        if (p.hi <= lo || p.lo >= hi) {
            i++;
            continue;
        }
        uintptr_t a = p.lo > lo ? p.lo : lo, b = p.hi < hi ? p.hi : hi;
        covered += b - a;
        if (whole)
            cr_assert(a == p.lo && b == p.hi, "unmap [%#lx, %#lx) cuts map [%#lx, %#lx)", (unsigned long)lo,
                      (unsigned long)hi, (unsigned long)p.lo, (unsigned long)p.hi);
        v[i] = v[--*n]; /* out, then what lies outside [lo, hi) back in */
        if (p.lo < a)
            book_add(v, n, p.lo, a);
        if (b < p.hi)
            book_add(v, n, b, p.hi);
    }
    cr_assert_eq(covered, hi - lo, "[%#lx, %#lx) names bytes the device's book does not hold", (unsigned long)lo,
                 (unsigned long)hi);
}

static cca_status faulty_alloc(void *ctx, size_t size, void **ptr) {
    tu_faulty *f = ctx;
    if (faulty_fails(f, TU_FAULT_ALLOC))
        return faulty_injected(f, TU_FAULT_ALLOC, CCA_ERR_OUT_OF_MEMORY);
    cca_status st = faulty_count(f, TU_FAULT_ALLOC, cca_upstream_alloc(f->inner, size, ptr));
    if (st == CCA_OK && f->book)
        book_add(f->book->segs, &f->book->nsegs, (uintptr_t)*ptr, (uintptr_t)*ptr + size);
    return st;
}
static cca_status faulty_free(void *ctx, void *ptr, size_t size) {
    tu_faulty *f = ctx;
    if (faulty_fails(f, TU_FAULT_FREE))
        return faulty_injected(f, TU_FAULT_FREE, CCA_ERR_UPSTREAM);
    cca_status st = faulty_count(f, TU_FAULT_FREE, cca_upstream_free(f->inner, ptr, size));
    if (st == CCA_OK && f->book)
        book_carve(f->book->segs, &f->book->nsegs, (uintptr_t)ptr, (uintptr_t)ptr + size, true);
    return st;
}
static cca_status faulty_mem_info(void *ctx, size_t *free_bytes, size_t *total_bytes) {
    tu_faulty *f = ctx;
    f->mem_info_calls++;
    uint64_t from = f->fail_mem_info_from, period = f->fail_mem_info_period ? f->fail_mem_info_period : 1;
    if (f->fail_mem_info || (from && f->mem_info_calls >= from && (f->mem_info_calls - from) % period == 0))
        return cca_set_error(CCA_ERR_UPSTREAM, "%s: mem_info refused", f->name);
    cca_status st = cca_upstream_mem_info(f->inner, free_bytes, total_bytes);
    if (st == CCA_OK && free_bytes) /* what the device kept is not free */
        *free_bytes -= *free_bytes < f->kept ? *free_bytes : f->kept;
    return st;
}
static cca_status faulty_sync(void *ctx) {
    tu_faulty *f = ctx;
    if (faulty_fails(f, TU_FAULT_SYNC))
        return faulty_injected(f, TU_FAULT_SYNC, CCA_ERR_UPSTREAM);
    if (!f->sync_keeps_events)
        f->events_done = f->events_recorded;
    return faulty_count(f, TU_FAULT_SYNC, cca_upstream_synchronize(f->inner));
}
static cca_status faulty_stream_sync(void *ctx, cca_stream stream) {
    tu_faulty *f = ctx;
    uint64_t k = f->calls[TU_FAULT_STREAM_SYNC];
    if (k < TU_FAULTY_ORDER)
        f->synced_streams[k] = stream;
    if (faulty_fails(f, TU_FAULT_STREAM_SYNC))
        return faulty_injected(f, TU_FAULT_STREAM_SYNC, CCA_ERR_UPSTREAM);
    if (!f->sync_keeps_events)
        f->events_done = f->events_recorded;
    return faulty_count(f, TU_FAULT_STREAM_SYNC, cca_upstream_stream_synchronize(f->inner, stream));
}
static cca_status faulty_event_record(void *ctx, cca_stream s, void **event) {
    (void)s;
    tu_faulty *f = ctx;
    uint64_t *e = new_event();
    *e = ++f->events_recorded;
    if (!f->hold_events)
        f->events_done = f->events_recorded;
    f->events_live++;
    *event = e;
    return CCA_OK;
}
static cca_status faulty_event_query(void *ctx, void *event) {
    tu_faulty *f = ctx;
    return *(uint64_t *)event <= f->events_done ? CCA_OK : CCA_ERR_NOT_READY;
}
static cca_status faulty_event_destroy(void *ctx, void *event) {
    tu_faulty *f = ctx;
    f->events_live--;
    free(event);
    return CCA_OK;
}
static cca_status faulty_vm_granularity(void *ctx, size_t *bytes) {
    tu_faulty *f = ctx;
    return cca_upstream_vm_granularity(f->inner, bytes);
}
static cca_status faulty_vm_reserve(void *ctx, size_t size, void **base) {
    tu_faulty *f = ctx;
    if (faulty_fails(f, TU_FAULT_RESERVE))
        return faulty_injected(f, TU_FAULT_RESERVE, CCA_ERR_OUT_OF_MEMORY);
    return faulty_count(f, TU_FAULT_RESERVE, cca_upstream_vm_reserve(f->inner, size, base));
}
static cca_status faulty_vm_release(void *ctx, void *base, size_t size) {
    tu_faulty *f = ctx;
    if (faulty_fails(f, TU_FAULT_RELEASE))
        return faulty_injected(f, TU_FAULT_RELEASE, CCA_ERR_UPSTREAM);
    for (size_t i = 0; f->book && i < f->book->nmaps; i++)
        cr_assert(f->book->maps[i].hi <= (uintptr_t)base || f->book->maps[i].lo >= (uintptr_t)base + size,
                  "range %p released with a map in it", base);
    return faulty_count(f, TU_FAULT_RELEASE, cca_upstream_vm_release(f->inner, base, size));
}
static cca_status faulty_vm_map(void *ctx, void *addr, size_t size) {
    tu_faulty *f = ctx;
    if (faulty_fails(f, TU_FAULT_MAP))
        return faulty_injected(f, TU_FAULT_MAP, CCA_ERR_OUT_OF_MEMORY);
    cca_status st = faulty_count(f, TU_FAULT_MAP, cca_upstream_vm_map(f->inner, addr, size));
    if (st == CCA_OK && f->book)
        book_add(f->book->maps, &f->book->nmaps, (uintptr_t)addr, (uintptr_t)addr + size);
    return st;
}
static cca_status faulty_vm_unmap(void *ctx, void *addr, size_t size) {
    tu_faulty *f = ctx;
    if (faulty_fails(f, TU_FAULT_UNMAP))
        return faulty_injected(f, TU_FAULT_UNMAP, CCA_ERR_UPSTREAM);
    cca_status st = faulty_count(f, TU_FAULT_UNMAP, cca_upstream_vm_unmap(f->inner, addr, size));
    if (st == CCA_OK && f->keep_per_unmap && (!f->keep_after_host_alloc || f->ok[TU_FAULT_HOST_ALLOC] > 0))
        f->kept += f->keep_per_unmap;
    if (st == CCA_OK && f->book)
        book_carve(f->book->maps, &f->book->nmaps, (uintptr_t)addr, (uintptr_t)addr + size,
                   cca_upstream_vm_backing(f->inner) == CCA_VM_WHOLE_MAPS);
    return st;
}

static cca_status faulty_host_alloc(void *ctx, size_t size, void **ptr) {
    tu_faulty *f = ctx;
    if (faulty_fails(f, TU_FAULT_HOST_ALLOC))
        return faulty_injected(f, TU_FAULT_HOST_ALLOC, CCA_ERR_OUT_OF_MEMORY);
    return faulty_count(f, TU_FAULT_HOST_ALLOC, cca_upstream_host_alloc(f->inner, size, ptr));
}
static cca_status faulty_host_free(void *ctx, void *ptr, size_t size) {
    tu_faulty *f = ctx;
    if (faulty_fails(f, TU_FAULT_HOST_FREE))
        return faulty_injected(f, TU_FAULT_HOST_FREE, CCA_ERR_UPSTREAM);
    return faulty_count(f, TU_FAULT_HOST_FREE, cca_upstream_host_free(f->inner, ptr, size));
}
static cca_status faulty_copy(void *ctx, void *dst, const void *src, size_t size, int to_host) {
    tu_faulty *f = ctx;
    bool corrupt = !to_host && ++f->copies_in == f->corrupt_in_at;
    if (faulty_fails(f, TU_FAULT_COPY))
        return faulty_injected(f, TU_FAULT_COPY, CCA_ERR_UPSTREAM);
    cca_status st = faulty_count(f, TU_FAULT_COPY, cca_upstream_copy(f->inner, dst, src, size, to_host));
    if (st == CCA_OK && corrupt && size) /* inverted once it has landed: at the next copy_wait */
        f->corrupt_pending = (unsigned char *)dst + (f->corrupt_byte < size ? f->corrupt_byte : size - 1);
    return st;
}
static cca_status faulty_copy_wait(void *ctx) {
    tu_faulty *f = ctx;
    if (faulty_fails(f, TU_FAULT_COPY_WAIT)) { /* a failed wait has waited too (the op's contract) */
        (void)cca_upstream_copy_wait(f->inner);
        return faulty_injected(f, TU_FAULT_COPY_WAIT, CCA_ERR_UPSTREAM);
    }
    cca_status st = faulty_count(f, TU_FAULT_COPY_WAIT, cca_upstream_copy_wait(f->inner));
    if (st == CCA_OK && f->corrupt_pending) {
        *f->corrupt_pending ^= 0xFF;
        f->corrupt_pending = NULL;
        f->corrupted++;
    }
    return st;
}

static cca_upstream *faulty_create(tu_faulty *f, cca_upstream *inner, const char *name, bool with_events,
                                   bool with_mem_info, bool with_stream_sync) {
    memset(f, 0, sizeof *f);
    f->inner = inner;
    f->name = name;
    cca_upstream_ops ops = {
        .alloc = faulty_alloc,
        .free = faulty_free,
        .mem_info = with_mem_info ? faulty_mem_info : NULL,
        .synchronize = faulty_sync,
        .name = name,
        .vm_granularity = faulty_vm_granularity,
        .vm_reserve = faulty_vm_reserve,
        .vm_release = faulty_vm_release,
        .vm_map = faulty_vm_map,
        .vm_unmap = faulty_vm_unmap,
        .vm_backing = cca_upstream_vm_backing(inner), /* the inner device's rules are the allocator's */
        .stream_synchronize = with_stream_sync ? faulty_stream_sync : NULL,
    };
    if (cca_upstream_has_copy(inner)) {
        ops.host_alloc = faulty_host_alloc;
        ops.host_free = faulty_host_free;
        ops.copy = faulty_copy;
        ops.copy_wait = faulty_copy_wait;
    }
    if (with_events) {
        ops.event_record = faulty_event_record;
        ops.event_query = faulty_event_query;
        ops.event_destroy = faulty_event_destroy;
    }
    cca_upstream *u = NULL;
    cr_assert_eq(cca_upstream_custom_create(&ops, f, &u), CCA_OK, "%s", cca_last_error());
    return u;
}

cca_upstream *tu_faulty_create(tu_faulty *f, cca_upstream *inner, const char *name, bool with_events) {
    return faulty_create(f, inner, name, with_events, true, false);
}

cca_upstream *tu_faulty_create_streams(tu_faulty *f, cca_upstream *inner, const char *name, bool with_events) {
    return faulty_create(f, inner, name, with_events, true, true);
}

cca_upstream *tu_faulty_create_without_mem_info(tu_faulty *f, cca_upstream *inner, const char *name, bool with_events) {
    return faulty_create(f, inner, name, with_events, false, false);
}

void tu_faulty_destroy_clean(cca_upstream *u, cca_upstream *inner) {
    cca_upstream_stats us = tu_upstream_stats(inner);
    cr_expect_eq(us.bytes_in_use, 0, "the device given back: %zu bytes still in use", us.bytes_in_use);
    cr_expect_eq(us.host_bytes_in_use, 0, "the host memory given back: %zu bytes still in use", us.host_bytes_in_use);
    cca_upstream_destroy(u);
    cca_upstream_destroy(inner);
}

void tu_faulty_faults_off(tu_faulty *f) {
    memset(f->fail_at, 0, sizeof f->fail_at);
    memset(f->sticky, 0, sizeof f->sticky);
}

size_t tu_faulty_first(const tu_faulty *f, tu_fault_kind k, size_t from) {
    size_t n = f->order_count < TU_FAULTY_ORDER ? f->order_count : TU_FAULTY_ORDER;
    for (size_t i = from; i < n; i++)
        if (f->order[i] == k)
            return i;
    return SIZE_MAX;
}

/* ---- host memory: pages, faults, resident memory, time ------------------------- */

size_t tu_page_size(void) {
    long pg = sysconf(_SC_PAGESIZE);
    cr_assert_gt(pg, 0);
    return (size_t)pg;
}

/* Whether one byte at p can be read, asked of the kernel (write(2) from it
 * into a pipe) so that the test process does not fault: 0 when readable,
 * EFAULT when the page is not accessible. */
int tu_probe(const void *p) {
    static int fds[2] = {-1, -1};
    if (fds[0] < 0)
        cr_assert_eq(pipe(fds), 0);
    ssize_t n = write(fds[1], p, 1);
    if (n == 1) {
        char c;
        cr_assert_eq(read(fds[0], &c, 1), 1);
        return 0;
    }
    cr_assert_eq(n, -1);
    return errno;
}

uint64_t tu_now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

uint64_t tu_thread_cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* The process's resident memory, from /proc/self/statm. */
/* /proc/self/statm's first two fields, in bytes: address space, resident. */
static void statm(size_t *size_b, size_t *resident_b) {
    FILE *f = fopen("/proc/self/statm", "r");
    cr_assert_not_null(f, "/proc/self/statm: %s", strerror(errno));
    unsigned long size = 0, resident = 0;
    cr_assert_eq(fscanf(f, "%lu %lu", &size, &resident), 2);
    fclose(f);
    *size_b = (size_t)size * tu_page_size();
    *resident_b = (size_t)resident * tu_page_size();
}

size_t tu_resident_bytes(void) {
    size_t size, resident;
    statm(&size, &resident);
    return resident;
}

struct rlimit tu_as_limit_below_now(void) {
    struct rlimit old, low;
    cr_assert_eq(getrlimit(RLIMIT_AS, &old), 0, "getrlimit: %s", strerror(errno));
    size_t size, resident;
    statm(&size, &resident);
    cr_assert_gt(size, (size_t)1 << 20);
    low = old;
    low.rlim_cur = size - ((size_t)1 << 20);
    if (setrlimit(RLIMIT_AS, &low) != 0) /* no assert once it is set: an assert may allocate */
        cr_assert_fail("setrlimit(RLIMIT_AS, %zu): %s", (size_t)low.rlim_cur, strerror(errno));
    return old;
}

/* The process's VmLck from /proc/self/status, in bytes. */
static size_t locked_bytes(void) {
    FILE *f = fopen("/proc/self/status", "r");
    cr_assert_not_null(f, "/proc/self/status: %s", strerror(errno));
    char line[256];
    size_t kib = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmLck: %zu kB", &kib) == 1)
            break;
    fclose(f);
    return kib * 1024;
}

bool tu_mlock(void *p, size_t len, char *why, size_t whylen) {
    size_t before = locked_bytes();
    if (mlock(p, len) != 0) {
        snprintf(why, whylen, "mlock: %s", strerror(errno));
        return false;
    }
    if (locked_bytes() < before + len) {
        snprintf(why, whylen, "mlock locked nothing (VmLck %zu -> %zu bytes; ASan makes it a no-op)", before,
                 locked_bytes());
        return false;
    }
    return true;
}

void tu_as_limit_lift(const struct rlimit *old) {
    int rc = setrlimit(RLIMIT_AS, old), e = errno;
    cr_assert_eq(rc, 0, "setrlimit back: %s", strerror(e));
}
