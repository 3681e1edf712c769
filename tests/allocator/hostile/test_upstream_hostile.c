/*
 * test_upstream_hostile.c — allocator/src/upstream/upstream.c: a custom upstream that misbehaves (upstream/
 * upstream.c, the wrapper that checks what an upstream hands back, and the
 * allocator calls that go through it).
 *
 * One test double, `hostile`, forwards every op to the simulated device
 * (vm ops included) and lies on demand:
 *   - alloc and vm_reserve hand back a fake range: one whose end passes the
 *     top of the address space (ptr + size wraps, or ends exactly at 2^64);
 *   - vm_granularity reports a huge page (2^63, 2^40);
 *   - mem_info reports free > total, or a total that changes every call;
 *   - the event ops are its own tokens, whose query lies (complete, then
 *     pending again) or fails outright, each token checked never to be
 *     queried or destroyed once destroyed, nor destroyed twice;
 *   - any op calls back into the allocator that called it (cca_alloc,
 *     cca_free, cca_get_stats, cca_trim, cca_destroy, ...) from inside the
 *     op, which holds the allocator's lock.
 * After every lie: the call fails with a status (or, where the lie is
 * harmless, succeeds), the invariants hold, nothing is lost (the device
 * holds nothing once the allocator is destroyed) and nothing hangs (the
 * re-entrant cases run under a timeout: a deadlock fails the test).
 */
#include "alloc_test_util.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- the double ------------------------------------------------------------------------- */

#define MAX_EVENTS 4096

typedef enum fake_range { FAKE_NONE, FAKE_WRAPS, FAKE_ENDS_AT_TOP } fake_range;
typedef enum query_lie { QUERY_TRUE, QUERY_FLIP, QUERY_FAILS, QUERY_PENDING } query_lie;
typedef enum op_kind { OP_NONE, OP_ALLOC, OP_FREE, OP_SYNC, OP_MEM_INFO, OP_QUERY, OP_MAP, OP_UNMAP } op_kind;

typedef struct hostile hostile;
typedef void (*reentry_fn)(hostile *h);

struct hostile {
    cca_upstream *inner;
    /* alloc / vm_reserve: hand out a fake range instead of the device's */
    fake_range fake_alloc, fake_reserve;
    size_t fake_given_back; /* frees and releases of a fake range */
    /* vm_granularity: 0 = the device's */
    size_t granularity;
    /* mem_info: lie_free / lie_total nonzero replace the device's; with
     * total_walks, total cycles through 0, 1, SIZE_MAX, the truth */
    size_t lie_free, lie_total;
    bool total_walks;
    uint64_t mem_info_calls;
    /* events: tokens 1..events_made; state 0 live, 1 destroyed */
    query_lie lie;
    uint64_t events_made, events_destroyed, queries;
    unsigned char event_state[MAX_EVENTS + 1];
    bool misuse; /* an event queried or destroyed after its destroy, or unknown */
    bool fail_sync, fail_record, fail_mem_info;
    /* re-entry: the first call of `reenter_in` after arming calls `reenter` once */
    op_kind reenter_in;
    reentry_fn reenter;
    bool reentered;
    cca_allocator *a;
    cca_status inner_status; /* what the re-entrant call returned */
    char inner_message[512];
    void *victim; /* a live block the re-entrant cca_free names */
};

static void maybe_reenter(hostile *h, op_kind k) {
    if (h->reenter_in != k || h->reentered || !h->reenter)
        return;
    h->reentered = true;
    h->reenter(h);
}

/* [p, p + size) whose end passes the top of the address space */
static void *fake_pointer(fake_range f, size_t size, size_t align) {
    if (f == FAKE_ENDS_AT_TOP)
        return (void *)(uintptr_t)(0 - (uintptr_t)size); /* p + size == 2^64 */
    uintptr_t p = UINTPTR_MAX - size / 2;                 /* p + size wraps to size / 2 - 1 */
    return (void *)(p / align * align);
}

static bool is_fake(const void *p) {
    return (uintptr_t)p > UINTPTR_MAX / 2;
}

static cca_status h_alloc(void *ctx, size_t size, void **ptr) {
    hostile *h = ctx;
    maybe_reenter(h, OP_ALLOC);
    if (h->fake_alloc != FAKE_NONE) {
        *ptr = fake_pointer(h->fake_alloc, size, 4096);
        return CCA_OK;
    }
    return cca_upstream_alloc(h->inner, size, ptr);
}

static cca_status h_free(void *ctx, void *ptr, size_t size) {
    hostile *h = ctx;
    maybe_reenter(h, OP_FREE);
    if (is_fake(ptr)) {
        h->fake_given_back++;
        return CCA_OK;
    }
    return cca_upstream_free(h->inner, ptr, size);
}

static cca_status h_mem_info(void *ctx, size_t *free_b, size_t *total_b) {
    hostile *h = ctx;
    maybe_reenter(h, OP_MEM_INFO);
    if (h->fail_mem_info)
        return cca_set_error(CCA_ERR_UPSTREAM, "hostile: mem_info refused");
    cca_status st = cca_upstream_mem_info(h->inner, free_b, total_b);
    if (st != CCA_OK)
        return st;
    if (h->lie_free)
        *free_b = h->lie_free;
    if (h->lie_total)
        *total_b = h->lie_total;
    if (h->total_walks) {
        static const size_t walk[3] = {0, 1, SIZE_MAX};
        if (h->mem_info_calls % 4 < 3)
            *total_b = walk[h->mem_info_calls % 4];
    }
    h->mem_info_calls++;
    return CCA_OK;
}

static cca_status h_sync(void *ctx) {
    hostile *h = ctx;
    maybe_reenter(h, OP_SYNC);
    if (h->fail_sync)
        return cca_set_error(CCA_ERR_UPSTREAM, "hostile: synchronize refused");
    return cca_upstream_synchronize(h->inner);
}

static cca_status h_record(void *ctx, cca_stream s, void **event) {
    hostile *h = ctx;
    (void)s;
    if (h->fail_record) {
        *event = (void *)(uintptr_t)0xdead; /* no event: never to be queried or destroyed */
        return cca_set_error(CCA_ERR_UPSTREAM, "hostile: event_record refused");
    }
    cr_assert_lt(h->events_made, MAX_EVENTS, "too many events for the double");
    *event = (void *)(uintptr_t)++h->events_made;
    return CCA_OK;
}

static bool known_live(hostile *h, void *event) {
    uintptr_t e = (uintptr_t)event;
    if (e == 0 || e > h->events_made || h->event_state[e]) {
        h->misuse = true;
        return false;
    }
    return true;
}

static cca_status h_query(void *ctx, void *event) {
    hostile *h = ctx;
    maybe_reenter(h, OP_QUERY);
    if (!known_live(h, event))
        return CCA_ERR_UPSTREAM;
    h->queries++;
    switch (h->lie) {
    case QUERY_FLIP: /* complete, pending, complete, ... whatever came before */
        return h->queries % 2 ? CCA_OK : CCA_ERR_NOT_READY;
    case QUERY_FAILS:
        return cca_set_error(CCA_ERR_UPSTREAM, "hostile: event_query failed (device lost)");
    case QUERY_PENDING: return CCA_ERR_NOT_READY; /* work still queued, until told otherwise */
    default:
        return CCA_OK;
    }
}

static cca_status h_event_destroy(void *ctx, void *event) {
    hostile *h = ctx;
    if (!known_live(h, event))
        return CCA_ERR_UPSTREAM;
    h->event_state[(uintptr_t)event] = 1;
    h->events_destroyed++;
    return CCA_OK;
}

static cca_status h_granularity(void *ctx, size_t *bytes) {
    hostile *h = ctx;
    if (h->granularity) {
        *bytes = h->granularity;
        return CCA_OK;
    }
    return cca_upstream_vm_granularity(h->inner, bytes);
}

static cca_status h_reserve(void *ctx, size_t size, void **base) {
    hostile *h = ctx;
    if (h->fake_reserve != FAKE_NONE) {
        size_t g = 0;
        cr_assert_eq(h_granularity(h, &g), CCA_OK);
        *base = fake_pointer(h->fake_reserve, size, g);
        return CCA_OK;
    }
    return cca_upstream_vm_reserve(h->inner, size, base);
}

static cca_status h_release(void *ctx, void *base, size_t size) {
    hostile *h = ctx;
    if (is_fake(base)) {
        h->fake_given_back++;
        return CCA_OK;
    }
    return cca_upstream_vm_release(h->inner, base, size);
}

static cca_status h_map(void *ctx, void *addr, size_t size) {
    hostile *h = ctx;
    maybe_reenter(h, OP_MAP);
    return cca_upstream_vm_map(h->inner, addr, size);
}

static cca_status h_unmap(void *ctx, void *addr, size_t size) {
    hostile *h = ctx;
    maybe_reenter(h, OP_UNMAP);
    return cca_upstream_vm_unmap(h->inner, addr, size);
}

/* The double over a fresh simulated device of `capacity` (2 MiB pages). */
static cca_upstream *hostile_create(hostile *h, size_t capacity, bool with_events) {
    memset(h, 0, sizeof *h);
    h->inner = tu_vm_device(capacity, 0);
    cca_upstream_ops ops = {.alloc = h_alloc,
                            .free = h_free,
                            .mem_info = h_mem_info,
                            .synchronize = h_sync,
                            .event_record = with_events ? h_record : NULL,
                            .event_query = with_events ? h_query : NULL,
                            .event_destroy = with_events ? h_event_destroy : NULL,
                            .name = "hostile",
                            .vm_granularity = h_granularity,
                            .vm_reserve = h_reserve,
                            .vm_release = h_release,
                            .vm_map = h_map,
                            .vm_unmap = h_unmap};
    cca_upstream *u = NULL;
    cr_assert_eq(cca_upstream_custom_create(&ops, h, &u), CCA_OK, "%s", cca_last_error());
    return u;
}

/* Destroy the allocator (its status returned), then the wrapper: the
 * device holds nothing, every event made was destroyed exactly once. */
static cca_status hostile_finish(hostile *h, cca_allocator *a, cca_upstream *u) {
    h->reenter = NULL;
    cca_status st = a ? cca_destroy(a) : CCA_OK;
    cca_upstream_stats s = tu_upstream_stats(h->inner);
    cr_assert_eq(s.bytes_in_use, 0, "the device still holds %zu bytes", s.bytes_in_use);
    cr_assert_eq(s.vm_reserved_bytes, 0, "the device still has %zu bytes reserved", s.vm_reserved_bytes);
    cr_assert_eq(h->events_destroyed, h->events_made, "%llu events made, %llu destroyed",
                 (unsigned long long)h->events_made, (unsigned long long)h->events_destroyed);
    cr_assert_not(h->misuse, "an event was queried or destroyed after its destroy");
    cca_upstream_destroy(u);
    cca_upstream_destroy(h->inner);
    return st;
}

static cca_allocator *allocator(cca_upstream *u, const char *conf) {
    cca_config c;
    cca_config_default(&c);
    cr_assert_eq(cca_config_parse(&c, "log_oom:0"), CCA_OK);
    cr_assert_eq(cca_config_parse(&c, conf), CCA_OK, "%s", cca_last_error());
    cca_allocator *a = NULL;
    cr_assert_eq(cca_create(&c, u, &a), CCA_OK, "%s", cca_last_error());
    return a;
}

/* ---- ranges that pass the top of the address space --------------------------------------- */

/* An alloc whose range ends past (or exactly at) the top of the address
 * space cannot be a segment: its end, base + size, is not a number the
 * allocator can hold (blocks would end below where they start). The
 * wrapper refuses it as it refuses a misaligned pointer: CCA_ERR_UPSTREAM,
 * the range given back, nothing counted. The same for an address range
 * from vm_reserve (released, not counted; expandable segments get
 * CCA_ERR_UPSTREAM). */
static void past_the_top(bool vm, fake_range kind) {
    hostile h;
    cca_upstream *u = hostile_create(&h, 64 * MiB, false);
    *(vm ? &h.fake_reserve : &h.fake_alloc) = kind;
    void *p = (void *)1;
    cca_status st = vm ? cca_upstream_vm_reserve(u, 8 * MiB, &p) : cca_upstream_alloc(u, 2 * MiB, &p);
    cr_assert_eq(st, CCA_ERR_UPSTREAM, "vm %d kind %d: accepted %p", vm, kind, p);
    cr_assert_null(p);
    cr_assert_not_null(strstr(cca_last_error(), "address space"), "vm %d kind %d: %s", vm, kind, cca_last_error());
    cr_assert_eq(h.fake_given_back, 1, "vm %d kind %d: the range was not given back", vm, kind);
    cca_upstream_stats us = tu_upstream_stats(u);
    cr_assert_eq(us.bytes_in_use, 0);
    cr_assert_eq(us.allocations, 0);
    cr_assert_eq(us.alloc_calls, 0);
    cr_assert_eq(us.failed_allocs, vm ? 0 : 1);
    cr_assert_eq(us.vm_reserved_bytes, 0);
    /* through an allocator: the request fails, nothing is held, no OOM */
    cca_allocator *a = allocator(u, vm ? "expandable:1" : "expandable:0");
    cr_assert_eq(cca_alloc(a, 1000, NULL, &p), CCA_ERR_UPSTREAM, "vm %d kind %d: %s", vm, kind, cca_last_error());
    cr_assert_null(p);
    tu_check(a);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.reserved_bytes, 0);
    cr_assert_eq(s.address_space_bytes, 0);
    cr_assert_eq(s.segments, 0);
    cr_assert_eq(s.ooms, 0);
    cr_assert_eq(h.fake_given_back, 2);
    /* the device honest again: the allocator works */
    h.fake_alloc = h.fake_reserve = FAKE_NONE;
    p = tu_alloc(a, 1000, NULL);
    tu_free(a, p);
    cr_assert_eq(hostile_finish(&h, a, u), CCA_OK, "%s", cca_last_error());
}

Test(upstream_hostile, an_alloc_whose_end_passes_the_top_of_the_address_space_is_refused_and_given_back) {
    past_the_top(false, FAKE_WRAPS);
    past_the_top(false, FAKE_ENDS_AT_TOP);
}

Test(upstream_hostile, a_vm_reserve_whose_end_passes_the_top_is_refused_and_released) {
    past_the_top(true, FAKE_WRAPS);
    past_the_top(true, FAKE_ENDS_AT_TOP);
}

/* ---- a huge granularity ---------------------------------------------------------------- */

/* A page of 2^63 or 2^40 bytes: a power of two and a multiple of 512, so
 * the wrapper takes it; no request can ever be served (its one page is
 * more than the device, or the 32 TiB of address space an allocator may
 * hold), so every cca_alloc is CCA_ERR_OUT_OF_MEMORY at once, reserving
 * nothing, and nothing in the rounding overflows. */
Test(upstream_hostile, a_huge_granularity_makes_every_request_an_oom_and_nothing_overflows) {
    const size_t grans[2] = {(size_t)1 << 63, (size_t)1 << 40};
    const char *confs[2] = {"expandable:1", "expandable:1,policy:greedy,greedy_bytes:4M"};
    for (int g = 0; g < 2; g++)
        for (int c = 0; c < 2; c++) {
            hostile h;
            cca_upstream *u = hostile_create(&h, 64 * MiB, false);
            h.granularity = grans[g];
            cca_config cfg;
            cca_config_default(&cfg);
            cr_assert_eq(cca_config_parse(&cfg, confs[c]), CCA_OK);
            cca_allocator *a = NULL;
            cfg.log_oom = 0;
            cca_status st = cca_create(&cfg, u, &a);
            if (c == 1) { /* greedy: the arena of one page cannot be had */
                cr_assert_eq(st, CCA_ERR_OUT_OF_MEMORY, "gran 2^%d greedy: %s", g ? 40 : 63, cca_last_error());
                cr_assert_null(a);
                hostile_finish(&h, NULL, u);
                continue;
            }
            cr_assert_eq(st, CCA_OK, "%s", cca_last_error());
            const size_t sizes[4] = {1, 1 * MiB, 100 * MiB, SIZE_MAX / 4};
            for (int i = 0; i < 4; i++) {
                void *p = (void *)1;
                cr_assert_eq(cca_alloc(a, sizes[i], NULL, &p), CCA_ERR_OUT_OF_MEMORY, "gran 2^%d size %zu: %s",
                             g ? 40 : 63, sizes[i], cca_last_error());
                cr_assert_null(p);
            }
            tu_check(a);
            cca_stats s = tu_stats(a);
            cr_assert_eq(s.reserved_bytes, 0);
            cr_assert_eq(s.address_space_bytes, 0);
            cr_assert_eq(tu_upstream_stats(h.inner).vm_reserved_bytes, 0, "a range was reserved");
            cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s", cca_last_error());
            cr_assert_eq(hostile_finish(&h, a, u), CCA_OK, "%s", cca_last_error());
        }
}

/* A granularity the upstream reports that is 0, not a multiple of
 * CCA_GRANULARITY, or not a power of two is refused (CCA_ERR_UPSTREAM, the
 * value named) and not kept: the next call asks the upstream again. */
Test(upstream_hostile, a_granularity_not_a_power_of_two_multiple_of_512_is_refused_and_not_kept) {
    const size_t bad[3] = {1, 768, 6 * MiB}; /* not a multiple of 512 (twice), not a power of two */
    for (int i = 0; i < 3; i++) {
        hostile h;
        cca_upstream *u = hostile_create(&h, 64 * MiB, false);
        h.granularity = bad[i];
        size_t g = 1;
        cr_assert_eq(cca_upstream_vm_granularity(u, &g), CCA_ERR_UPSTREAM, "%zu: %s", bad[i], cca_last_error());
        cr_assert_eq(g, 0);
        char want[64];
        snprintf(want, sizeof want, "a granularity of %zu bytes", bad[i]);
        cr_assert(strstr(cca_last_error(), want), "%s", cca_last_error());
        void *base = (void *)1;
        cr_assert_eq(cca_upstream_vm_reserve(u, 6 * MiB, &base), CCA_ERR_UPSTREAM, "%s", cca_last_error());
        cr_assert_null(base);
        h.granularity = 2 * MiB;
        cr_assert_eq(cca_upstream_vm_granularity(u, &g), CCA_OK, "asked again: %s", cca_last_error());
        cr_assert_eq(g, 2 * MiB);
        cr_assert_eq(hostile_finish(&h, NULL, u), CCA_OK);
    }
}

/* ccalloc.h, cca_create: with expandable:1, a vm_granularity that fails is
 * the call's status (*out NULL, nothing held on the device), its message
 * names the option and the upstream's reason; classic segments are no
 * fallback. The granularity was not kept: a later cca_create asks again. */
Test(upstream_hostile, a_refused_granularity_fails_cca_create_with_expandable) {
    hostile h;
    cca_upstream *u = hostile_create(&h, 64 * MiB, false);
    h.granularity = 768;
    cca_config c;
    cca_config_default(&c);
    cr_assert_eq(cca_config_parse(&c, "expandable:1"), CCA_OK);
    cca_allocator *a = (cca_allocator *)1;
    cr_assert_eq(cca_create(&c, u, &a), CCA_ERR_UPSTREAM, "%s", cca_last_error());
    cr_assert_null(a);
    const char *want = "cca_create: expandable:1 needs the upstream's granularity: ";
    cr_assert_eq(strncmp(cca_last_error(), want, strlen(want)), 0, "%s", cca_last_error());
    cr_assert(strstr(cca_last_error(), "a granularity of 768 bytes"), "%s", cca_last_error());
    h.granularity = 0; /* the device's own: the next create asks again and succeeds */
    a = allocator(u, "expandable:1");
    void *p = tu_alloc(a, 3 * MiB, NULL);
    cr_assert_gt(tu_stats(a).mapped_bytes, 0, "mapped pages: expandable, not classic (%zu)", tu_stats(a).mapped_bytes);
    tu_free(a, p);
    cr_assert_eq(hostile_finish(&h, a, u), CCA_OK, "%s", cca_last_error());
}

/* ---- mem_info that lies --------------------------------------------------------------- */

/* free > total, free SIZE_MAX, a total that changes every call (0, 1,
 * SIZE_MAX, the truth): the allocator takes what it is told (a request may
 * be refused at once), but every call returns OK or OOM, the invariants
 * hold, and everything goes back. Classic, expandable and greedy. */
Test(upstream_hostile, mem_info_lying_about_free_and_total_never_breaks_the_books) {
    const char *confs[3] = {"expandable:0", "expandable:1", "expandable:0,policy:greedy,greedy_fraction:1"};
    for (int c = 0; c < 3; c++)
        for (int lie = 0; lie < 3; lie++) {
            hostile h;
            cca_upstream *u = hostile_create(&h, 64 * MiB, false);
            if (lie == 0) {
                h.lie_free = SIZE_MAX;
                h.lie_total = 64 * MiB;
            } else if (lie == 1) {
                h.lie_free = 1 * GiB;
                h.lie_total = 8 * MiB;
            } else {
                h.total_walks = true;
            }
            cca_config cfg;
            cca_config_default(&cfg);
            cr_assert_eq(cca_config_parse(&cfg, confs[c]), CCA_OK);
            cfg.log_oom = 0;
            cca_allocator *a = NULL;
            cca_status cs = cca_create(&cfg, u, &a);
            if (cs != CCA_OK) { /* greedy sized from a lie: refused, nothing held */
                cr_assert(cs == CCA_ERR_OUT_OF_MEMORY, "conf %d lie %d: %s", c, lie, cca_last_error());
                hostile_finish(&h, NULL, u);
                continue;
            }
            void *live[32] = {0};
            uint64_t rng = 0x5eed + (uint64_t)(c * 3 + lie);
            for (int step = 0; step < 400; step++) {
                int i = (int)(tu_rand(&rng) % 32);
                if (live[i]) {
                    tu_free(a, live[i]);
                    live[i] = NULL;
                } else if (tu_rand(&rng) % 8 == 0) {
                    cca_status st = cca_trim(a, 0, NULL);
                    cr_assert_eq(st, CCA_OK, "conf %d lie %d step %d trim: %s", c, lie, step, cca_last_error());
                } else {
                    size_t size = 1 + tu_rand(&rng) % (12 * MiB);
                    cca_status st = cca_alloc(a, size, NULL, &live[i]);
                    cr_assert(st == CCA_OK || st == CCA_ERR_OUT_OF_MEMORY, "conf %d lie %d step %d: %s (%s)", c,
                              lie, step, cca_status_string(st), cca_last_error());
                }
                tu_check(a);
            }
            for (int i = 0; i < 32; i++)
                if (live[i])
                    tu_free(a, live[i]);
            cr_assert_eq(hostile_finish(&h, a, u), CCA_OK, "%s", cca_last_error());
        }
}

/* ---- events that lie ----------------------------------------------------------------- */

/* Random work on four streams with blocks used on other streams, over
 * event queries that flip (complete, then pending, ...) or fail outright
 * (CCA_ERR_UPSTREAM: as if the device was lost), with synchronizes that
 * sometimes fail: no event is queried or destroyed once destroyed, none is
 * destroyed twice, every event made is destroyed by cca_destroy at the
 * latest, the invariants hold after every call and the device gets
 * everything back. A failing query is never "complete": a block stays
 * pending and trim says so (CCA_ERR_NOT_READY), destroy counts it live. */
Test(upstream_hostile, lying_and_failing_event_queries_never_misuse_an_event_nor_lose_memory) {
    const query_lie lies[2] = {QUERY_FLIP, QUERY_FAILS};
    const char *confs[3] = {"expandable:0", "expandable:1", "expandable:0,policy:greedy,greedy_bytes:48M"};
    for (int l = 0; l < 2; l++)
        for (int c = 0; c < 3; c++) {
            hostile h;
            cca_upstream *u = hostile_create(&h, 64 * MiB, true);
            h.lie = lies[l];
            cca_allocator *a = allocator(u, confs[c]);
            void *live[24] = {0};
            uint64_t rng = 0xe7e + (uint64_t)(l * 3 + c);
            for (int step = 0; step < 600; step++) {
                int i = (int)(tu_rand(&rng) % 24);
                h.fail_sync = tu_rand(&rng) % 5 == 0;
                cca_stream s = (cca_stream)(uintptr_t)(tu_rand(&rng) % 4);
                if (live[i]) {
                    if (tu_rand(&rng) % 2)
                        cr_assert_eq(cca_record_stream(a, live[i], (cca_stream)(uintptr_t)(1 + tu_rand(&rng) % 4)),
                                     CCA_OK, "%s", cca_last_error());
                    cca_status st = cca_free(a, live[i]);
                    cr_assert(st == CCA_OK || (h.fail_sync && st == CCA_ERR_UPSTREAM), "step %d free: %s", step,
                              cca_last_error());
                    live[i] = NULL;
                } else if (tu_rand(&rng) % 10 == 0) {
                    cca_status st = cca_trim(a, 0, NULL);
                    cr_assert(st == CCA_OK || st == CCA_ERR_NOT_READY || (h.fail_sync && st == CCA_ERR_UPSTREAM),
                              "step %d trim: %s (%s)", step, cca_status_string(st), cca_last_error());
                } else {
                    size_t size = 1 + tu_rand(&rng) % (3 * MiB);
                    cca_status st = cca_alloc(a, size, s, &live[i]);
                    cr_assert(st == CCA_OK || st == CCA_ERR_OUT_OF_MEMORY, "step %d alloc: %s (%s)", step,
                              cca_status_string(st), cca_last_error());
                }
                tu_check(a);
                cr_assert_not(h.misuse, "lie %d conf %d step %d: an event was used after its destroy", l, c, step);
            }
            h.fail_sync = false;
            for (int i = 0; i < 24; i++)
                if (live[i])
                    tu_free(a, live[i]);
            cca_status st = hostile_finish(&h, a, u);
            cr_assert(st == CCA_OK || st == CCA_ERR_LIVE_BLOCKS, "destroy: %s", cca_last_error());
        }
}

/* An event query failing inside a call that succeeds (a cca_alloc polls
 * the pending frees) leaves the caller's message as it was: ccalloc.h,
 * "a member that succeeds ... leaves the caller's message", and
 * cca_last_error() is the message of the last FAILING call. The same for a
 * refused mem_info inside a cca_alloc that succeeds. */
Test(upstream_hostile, an_op_failing_inside_a_call_that_succeeds_leaves_the_callers_message) {
    hostile h;
    cca_upstream *u = hostile_create(&h, 64 * MiB, true);
    cca_allocator *a = allocator(u, "policy:growth");
    void *p = tu_alloc(a, 4096, (cca_stream)1);
    cr_assert_eq(cca_record_stream(a, p, (cca_stream)2), CCA_OK);
    h.lie = QUERY_FAILS;
    cr_assert_eq(cca_free(a, p), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(tu_stats(a).pending_blocks, 1, "a failing query is not a completion");
    cca_set_error(CCA_ERR_CONFIG, "the caller's message");
    void *q = NULL;
    cr_assert_eq(cca_alloc(a, 4096, (cca_stream)1, &q), CCA_OK, "%s", cca_last_error());
    cr_assert_str_eq(cca_last_error(), "the caller's message");
    tu_free(a, q);
    h.lie = QUERY_TRUE;
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(hostile_finish(&h, a, u), CCA_OK, "%s", cca_last_error());

    /* mem_info refused when the first request asks the device's size */
    u = hostile_create(&h, 64 * MiB, true);
    h.fail_mem_info = true;
    a = allocator(u, "policy:growth");
    cca_set_error(CCA_ERR_CONFIG, "the caller's message");
    p = NULL;
    cr_assert_eq(cca_alloc(a, 4096, NULL, &p), CCA_OK, "%s", cca_last_error());
    cr_assert_str_eq(cca_last_error(), "the caller's message");
    tu_free(a, p);
    cr_assert_eq(hostile_finish(&h, a, u), CCA_OK, "%s", cca_last_error());
}

/* A block used on a second stream, freed with the queries answering `lie`
 * from then on, then three cca_alloc / cca_free pairs that poll it (a
 * query each) and a trim after each: the block stays pending. */
static void free_pending(hostile *h, cca_allocator *a, query_lie lie) {
    void *p = tu_alloc(a, 4096, (cca_stream)1);
    cr_assert_eq(cca_record_stream(a, p, (cca_stream)2), CCA_OK);
    h->lie = lie;
    tu_free(a, p);
    for (int i = 0; i < 3; i++) {
        void *q = tu_alloc(a, 8192, (cca_stream)1);
        tu_free(a, q);
        cr_assert_eq(cca_trim(a, 0, NULL), CCA_ERR_NOT_READY, "%s", cca_last_error());
        cr_assert_eq(tu_stats(a).pending_blocks, 1);
    }
}

/* A failing event_query (a lost device) reads as "not yet": the block it
 * guards stays pending and trim says CCA_ERR_NOT_READY, which alone reads
 * as work still queued. One log line says the query failed and why, the
 * first time in a run of failures of that upstream (not once per query, a
 * poll at every cca_alloc would flood the log); a query that answers again
 * ends the run, and the next failure is logged again. A query answering
 * CCA_ERR_NOT_READY (work still queued) is an answer, not a failure:
 * nothing is logged. */
Test(upstream_hostile, a_failing_event_query_is_logged_once_per_run_of_failures) {
    hostile h;
    cca_upstream *u = hostile_create(&h, 64 * MiB, true);
    cca_allocator *a = allocator(u, "policy:growth");
    tu_log_capture log = {0};
    cca_set_log_callback(tu_capture_log, &log);
    free_pending(&h, a, QUERY_PENDING);
    cr_assert_eq(log.lines, 0, "a pending answer logged: %s", log.last);
    h.lie = QUERY_TRUE;
    cr_assert_eq(cca_trim(a, 0, NULL), CCA_OK, "%s", cca_last_error());
    uint64_t pending_queries = h.queries;
    cr_assert_geq(pending_queries, 3);
    for (int run = 1; run <= 2; run++) {
        free_pending(&h, a, QUERY_FAILS);
        cr_assert_eq(log.lines, run, "one line per run of failures, not per query (%llu queries): %s",
                     (unsigned long long)(h.queries - pending_queries), log.last);
        cr_assert(strstr(log.last, "event_query") && strstr(log.last, "device lost"), "%s", log.last);
        h.lie = QUERY_TRUE;
        cr_assert_eq(cca_trim(a, 0, NULL), CCA_OK, "%s", cca_last_error());
        cr_assert_eq(tu_stats(a).pending_blocks, 0);
        cr_assert_eq(log.lines, run, "an answer logs nothing");
    }
    cca_set_log_callback(NULL, NULL);
    cr_assert_eq(hostile_finish(&h, a, u), CCA_OK, "%s", cca_last_error());
}

/* No event can be recorded and the synchronize instead fails, through
 * free, trim, domain release and destroy (classic segments): each call
 * says so with the synchronize's status, the block is held (never handed
 * out again) until a synchronize succeeds, the refused record's token is
 * never queried nor destroyed, and cca_destroy with the synchronize still
 * failing frees the classic segments all the same (the device gets every
 * byte back) and counts the held block live. */
Test(upstream_hostile, a_refused_record_and_a_failing_synchronize_hold_the_block_and_lose_nothing) {
    hostile h;
    cca_upstream *u = hostile_create(&h, 64 * MiB, true);
    cca_allocator *a = allocator(u, "expandable:0");
    cca_domain *d = NULL;
    cr_assert_eq(cca_domain_create(a, "m", &d), CCA_OK);
    void *p = NULL;
    cr_assert_eq(cca_alloc_in(a, d, 1 * MiB, (cca_stream)1, &p), CCA_OK);
    cr_assert_eq(cca_record_stream(a, p, (cca_stream)2), CCA_OK);
    h.fail_record = true;
    h.fail_sync = true;
    cr_assert_eq(cca_free(a, p), CCA_ERR_UPSTREAM);
    cr_assert_not_null(strstr(cca_last_error(), "synchronize refused"), "%s", cca_last_error());
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.pending_blocks, 1);
    /* never handed out again while held */
    void *q = NULL;
    cr_assert_eq(cca_alloc_in(a, d, 1 * MiB, (cca_stream)1, &q), CCA_OK, "%s", cca_last_error());
    cr_assert_neq(q, p, "a held block was handed out again");
    tu_free(a, q);
    cr_assert_eq(cca_trim(a, 0, NULL), CCA_ERR_UPSTREAM, "%s", cca_last_error());
    cr_assert_eq(cca_domain_release(a, d, CCA_DOMAIN_FORCE, NULL), CCA_ERR_UPSTREAM, "%s", cca_last_error());
    tu_check(a);
    cr_assert_eq(tu_stats(a).pending_blocks, 1);
    /* destroy with the synchronize still failing: classic segments freed */
    cca_status st = hostile_finish(&h, a, u);
    cr_assert_eq(st, CCA_ERR_LIVE_BLOCKS, "%s (%s)", cca_status_string(st), cca_last_error());
}

/* ---- re-entry: an op that calls the allocator that called it --------------------------- */

/* Every op runs with the allocator's lock held (ccalloc.h). An op that
 * calls back into that same allocator on its own thread would wait for
 * that lock for ever; the allocator refuses the call instead
 * (CCA_ERR_INVALID_ARGUMENT, the message saying why), and the outer call
 * goes on as if nothing happened. Each case runs under a timeout: a
 * deadlock fails it. */

static void save_inner(hostile *h, cca_status st) {
    h->inner_status = st;
    snprintf(h->inner_message, sizeof h->inner_message, "%s", cca_last_error());
}
static void re_alloc(hostile *h) {
    void *p = (void *)1;
    save_inner(h, cca_alloc(h->a, 1000, NULL, &p));
    cr_assert_null(p);
}
static void re_free(hostile *h) {
    save_inner(h, cca_free(h->a, h->victim));
}
static void re_trim(hostile *h) {
    save_inner(h, cca_trim(h->a, 0, NULL));
}
static void re_stats(hostile *h) {
    cca_stats s;
    memset(&s, 0xab, sizeof s);
    cca_clear_error();
    cca_get_stats(h->a, &s);
    /* void: refused, it fills *s with zeros and says why in the message */
    cca_stats zero;
    memset(&zero, 0, sizeof zero);
    cr_assert_eq(memcmp(&s, &zero, sizeof s), 0, "cca_get_stats from inside an op filled in stats");
    save_inner(h, cca_last_error()[0] ? CCA_ERR_INVALID_ARGUMENT : CCA_OK);
}
static void re_check(hostile *h) {
    save_inner(h, cca_check_invariants(h->a));
}
static void re_destroy(hostile *h) {
    save_inner(h, cca_destroy(h->a));
}
static void re_domain(hostile *h) {
    cca_domain *d = (cca_domain *)1;
    save_inner(h, cca_domain_create(h->a, "inner", &d));
    cr_assert_null(d);
}
static void re_snapshot(hostile *h) {
    FILE *f = tmpfile();
    cr_assert_not_null(f);
    save_inner(h, cca_write_snapshot_json(h->a, f));
    fclose(f);
}
static void re_snapshot_torch(hostile *h) {
    FILE *f = tmpfile();
    cr_assert_not_null(f);
    save_inner(h, cca_write_snapshot_torch(h->a, 0, f));
    cr_assert_eq(ftell(f), 0, "nothing written");
    fclose(f);
}
static void re_domain_stats(hostile *h) {
    FILE *f = tmpfile();
    cr_assert_not_null(f);
    save_inner(h, cca_domain_stats_write_json(h->a, f));
    cr_assert_eq(ftell(f), 0, "nothing written");
    fclose(f);
}
static void re_mark(hostile *h) {
    save_inner(h, cca_trace_mark(h->a, "inner"));
}
static void re_record_stream(hostile *h) {
    save_inner(h, cca_record_stream(h->a, h->victim, (cca_stream)7));
}
static void re_block_size(hostile *h) {
    size_t size = 1;
    save_inner(h, cca_block_size(h->a, h->victim, &size));
    cr_assert_eq(size, 1, "cca_block_size from inside an op wrote its out-parameter");
}
static void re_alloc_in(hostile *h) {
    void *p = (void *)1;
    save_inner(h, cca_alloc_in(h->a, NULL, 1000, NULL, &p));
    cr_assert_null(p);
}
static void re_domain_of(hostile *h) {
    cca_domain *d = (cca_domain *)1;
    save_inner(h, cca_domain_of(h->a, h->victim, &d));
    cr_assert_null(d);
}
static void re_domain_reserve(hostile *h) {
    save_inner(h, cca_domain_reserve(h->a, NULL, 4 * MiB));
}
static void re_get_domain_stats(hostile *h) {
    cca_domain_stats s;
    save_inner(h, cca_get_domain_stats(h->a, NULL, &s));
}
static void re_domain_release(hostile *h) {
    save_inner(h, cca_domain_release(h->a, NULL, 0, NULL));
}
static void re_domain_destroy(hostile *h) {
    /* refused before the handle is looked up: any non-NULL one */
    save_inner(h, cca_domain_destroy(h->a, (cca_domain *)h, 0, NULL));
}
static void re_sleep(hostile *h) {
    cca_sleep_report r;
    save_inner(h, cca_domain_sleep(h->a, NULL, 0, &r));
}
static void re_wake(hostile *h) {
    save_inner(h, cca_wake(h->a, NULL));
}

typedef struct reentry_case {
    const char *name;
    op_kind in;
    reentry_fn fn;
    const char *conf;
} reentry_case;

static void run_reentry(const reentry_case *rc) {
    hostile h;
    cca_upstream *u = hostile_create(&h, 256 * MiB, true);
    cca_allocator *a = allocator(u, rc->conf);
    h.a = a;
    /* a live block (the cca_free case's victim), a freed one cached */
    void *keep = tu_alloc(a, 3 * MiB, NULL);
    void *cached = tu_alloc(a, 40 * MiB, NULL);
    tu_free(a, cached);
    h.victim = keep;
    h.reenter_in = rc->in;
    h.reenter = rc->fn;
    /* the outer call that reaches the op */
    cca_status outer = CCA_OK;
    void *p = NULL;
    switch (rc->in) {
    case OP_ALLOC:
    case OP_MAP:
        outer = cca_alloc(a, 100 * MiB, NULL, &p); /* growth: alloc or map */
        break;
    case OP_MEM_INFO:
        outer = cca_domain_reserve(a, NULL, 8 * MiB); /* expandable: asks mem_info before the range */
        break;
    case OP_QUERY: {
        void *q = tu_alloc(a, 4096, (cca_stream)1);
        cr_assert_eq(cca_record_stream(a, q, (cca_stream)2), CCA_OK);
        outer = cca_free(a, q); /* queries its event */
        break;
    }
    case OP_FREE:
    case OP_UNMAP:
    case OP_SYNC:
        outer = cca_empty_cache(a, NULL); /* synchronize, then free or unmap */
        break;
    default:
        cr_assert_fail("no outer call for op %d", rc->in);
    }
    cr_assert(h.reentered, "%s: the op was never called", rc->name);
    cr_assert_eq(h.inner_status, CCA_ERR_INVALID_ARGUMENT, "%s: the re-entrant call returned %s (%s)", rc->name,
                 cca_status_string(h.inner_status), h.inner_message);
    cr_assert_not_null(strstr(h.inner_message, "from inside an upstream op"), "%s: message: %s", rc->name,
                       h.inner_message);
    cr_assert_eq(outer, CCA_OK, "%s: the outer call failed: %s", rc->name, cca_last_error());
    /* the allocator is whole and usable, the victim still live */
    tu_check(a);
    cr_assert_eq(tu_block_size(a, keep), 3 * MiB);
    if (p)
        tu_free(a, p);
    tu_free(a, keep);
    void *again = tu_alloc(a, 1 * MiB, NULL);
    tu_free(a, again);
    cr_assert_eq(hostile_finish(&h, a, u), CCA_OK, "%s", cca_last_error());
}

static const reentry_case reentry_cases[] = {
    {"cca_alloc in alloc", OP_ALLOC, re_alloc, "expandable:0"},
    {"cca_free in alloc", OP_ALLOC, re_free, "expandable:0"},
    {"cca_get_stats in alloc", OP_ALLOC, re_stats, "expandable:0"},
    {"cca_trim in alloc", OP_ALLOC, re_trim, "expandable:0"},
    {"cca_destroy in alloc", OP_ALLOC, re_destroy, "expandable:0"},
    {"cca_domain_create in alloc", OP_ALLOC, re_domain, "expandable:0"},
    {"cca_write_snapshot_json in alloc", OP_ALLOC, re_snapshot, "expandable:0"},
    {"cca_write_snapshot_torch in alloc", OP_ALLOC, re_snapshot_torch, "expandable:0"},
    {"cca_domain_stats_write_json in vm_map", OP_MAP, re_domain_stats, "expandable:1"},
    {"cca_trace_mark in alloc", OP_ALLOC, re_mark, "expandable:0"},
    {"cca_check_invariants in mem_info", OP_MEM_INFO, re_check, "expandable:1"},
    {"cca_alloc in free", OP_FREE, re_alloc, "expandable:0"},
    {"cca_trim in synchronize", OP_SYNC, re_trim, "expandable:0"},
    {"cca_get_stats in event_query", OP_QUERY, re_stats, "expandable:0"},
    {"cca_free in event_query", OP_QUERY, re_free, "expandable:0"},
    {"cca_alloc in vm_map", OP_MAP, re_alloc, "expandable:1"},
    {"cca_free in vm_unmap", OP_UNMAP, re_free, "expandable:1"},
    {"cca_destroy in vm_unmap", OP_UNMAP, re_destroy, "expandable:1"},
    {"cca_record_stream in alloc", OP_ALLOC, re_record_stream, "expandable:0"},
    {"cca_block_size in alloc", OP_ALLOC, re_block_size, "expandable:0"},
    {"cca_alloc_in in alloc", OP_ALLOC, re_alloc_in, "expandable:0"},
    {"cca_domain_of in alloc", OP_ALLOC, re_domain_of, "expandable:0"},
    {"cca_domain_reserve in alloc", OP_ALLOC, re_domain_reserve, "expandable:0"},
    {"cca_get_domain_stats in alloc", OP_ALLOC, re_get_domain_stats, "expandable:0"},
    {"cca_domain_release in free", OP_FREE, re_domain_release, "expandable:0"},
    {"cca_domain_destroy in alloc", OP_ALLOC, re_domain_destroy, "expandable:0"},
    {"cca_domain_sleep in vm_map", OP_MAP, re_sleep, "expandable:1"},
    {"cca_wake in vm_unmap", OP_UNMAP, re_wake, "expandable:1"},
};

Test(upstream_hostile, an_op_calling_back_into_its_allocator_is_refused_not_a_deadlock, .timeout = 60) {
    for (size_t i = 0; i < sizeof reentry_cases / sizeof reentry_cases[0]; i++)
        run_reentry(&reentry_cases[i]);
}

/* An op may use a different allocator (on the same or another upstream)
 * from inside: only its own allocator's lock is held. */
static cca_allocator *other;
static void re_other(hostile *h) {
    void *p = NULL;
    cca_status st = cca_alloc(other, 1000, NULL, &p);
    if (st == CCA_OK)
        st = cca_free(other, p);
    save_inner(h, st);
}

Test(upstream_hostile, an_op_may_call_another_allocator, .timeout = 30) {
    /* from inside alloc (classic segments) and vm_map (expandable) */
    const char *confs[2] = {"expandable:0", "expandable:1"};
    const op_kind ops[2] = {OP_ALLOC, OP_MAP};
    for (int c = 0; c < 2; c++) {
        hostile h;
        cca_upstream *u = hostile_create(&h, 256 * MiB, true);
        cca_allocator *a = allocator(u, confs[c]);
        cca_upstream *u2 = NULL;
        tu_host_allocator(64 * MiB, NULL, &u2, &other);
        h.a = a;
        h.reenter_in = ops[c];
        h.reenter = re_other;
        void *p = tu_alloc(a, 1000, NULL);
        cr_assert(h.reentered, "%s: the op was never called", confs[c]);
        cr_assert_eq(h.inner_status, CCA_OK, "%s: %s", confs[c], h.inner_message);
        tu_free(a, p);
        tu_teardown(other, u2);
        cr_assert_eq(hostile_finish(&h, a, u), CCA_OK, "%s", cca_last_error());
    }
}
