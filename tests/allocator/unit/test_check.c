/*
 * test_check.c — allocator/src/observe/check.c: the allocator checking itself:
 * cca_check_invariants names a broken invariant with its own status code,
 * each check by its own message when the state it exists for is made, and
 * bad pointers are diagnosed precisely (the whole message). The suite breaks the state on
 * purpose through internal.h, then repairs it so destroy stays clean.
 */
#include <criterion/criterion.h>

#include <string.h>

#include "internal.h"
#include "alloc_test_util.h"

static cca_upstream *u;
static cca_allocator *a;

static void setup(void) {
    tu_host_allocator(256 * MiB, NULL, &u, &a);
}

static void teardown(void) {
    tu_fixture_teardown(a, u);
}

TestSuite(check, .init = setup, .fini = teardown);

/* x's check fails with CCA_ERR_INVARIANT and a message naming `what`; or
 * passes. Macros, so that a failure points at the caller's line. */
#define ASSERT_BROKEN(x, what)                                                                                         \
    do {                                                                                                               \
        cr_assert_eq(cca_check_invariants(x), CCA_ERR_INVARIANT);                                                      \
        cr_assert(strstr(cca_last_error(), what) != NULL, "%s", cca_last_error());                                     \
    } while (0)
#define ASSERT_SOUND(x) cr_assert_eq(cca_check_invariants(x), CCA_OK, "%s", cca_last_error())

Test(check, a_healthy_allocator_passes) {
    void *p = tu_alloc(a, 4096, NULL);
    ASSERT_SOUND(a);
    tu_free(a, p);
    ASSERT_SOUND(a);
    cr_assert_eq(cca_check_invariants(NULL), CCA_ERR_INVALID_ARGUMENT);
}

Test(check, a_broken_counter_is_reported_as_an_invariant) {
    void *p = tu_alloc(a, 4096, NULL);
    a->c.allocated += 512;
    ASSERT_BROKEN(a, "I4");
    cr_assert_str_eq(cca_status_string(CCA_ERR_INVARIANT), "CCA_ERR_INVARIANT: an internal invariant is broken");
    a->c.allocated -= 512;
    tu_free(a, p);
}

Test(check, a_broken_block_chain_is_reported) {
    void *p = tu_alloc(a, 4096, NULL);
    ccai_block *b = ccai_live_map_find(&a->live, (uintptr_t)p);
    cr_assert_not_null(b);
    b->size += 512; /* no longer tiles its segment */
    ASSERT_BROKEN(a, "I1");
    cr_assert_str_eq(cca_last_error(), "invariant broken: I1: blocks do not tile their segment");
    b->size -= 512;
    b->state = CCAI_PENDING; /* pending without any wait */
    ASSERT_BROKEN(a, "I6");
    b->state = CCAI_LIVE;
    ASSERT_SOUND(a);
    tu_free(a, p);
}

Test(check, a_stale_copy_of_the_segments_properties_is_reported) {
    void *p = tu_alloc(a, 4096, NULL);
    ccai_block *b = ccai_live_map_find(&a->live, (uintptr_t)p);
    cr_assert_not_null(b);
    cr_assert_eq(b->seg, ccai_segment_flags(a, b->segment));
    cr_assert(b->seg & CCAI_SEG_ROOT, "a block of the root domain finds its index without its segment");
    cr_assert_eq(ccai_block_index(a, b), b->segment->index);
    uint8_t saved = b->seg;
    b->seg ^= CCAI_SEG_SHARED; /* would split it as if in the greedy arena */
    ASSERT_BROKEN(a, "stale");
    b->seg = saved;
    ASSERT_SOUND(a);
    tu_free(a, p);
}

Test(check, an_expandable_segments_mapped_prefix_is_checked) {
    cca_upstream *eu = tu_vm_device(256 * MiB, 0); /* pages: trim unmaps part of a map */
    cca_allocator *ea = tu_allocator(eu, "expandable:1");
    void *p = tu_alloc(ea, 3 * MiB, NULL), *q = tu_alloc(ea, 3 * MiB, NULL);
    ccai_block *b = ccai_live_map_find(&ea->live, (uintptr_t)p);
    ccai_segment *s = b->segment;
    cr_assert(s->expandable && s->mapped_pages > 0);
    cr_assert_eq(s->mapped_end, s->base + s->mapped_pages * s->page, "mapped from the start, no hole");
    s->mapped_end += s->page; /* would let an alloc skip mapping the page after the prefix */
    ASSERT_BROKEN(ea, "prefix");
    s->mapped_end -= s->page;
    tu_free(ea, p); /* its pages, the first ones, are now free: trim unmaps them */
    cca_release_report r;
    cr_assert_eq(cca_trim(ea, 0, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(s->mapped_end, s->base, "page 0 unmapped: no prefix");
    ASSERT_SOUND(ea);
    void *p2 = tu_alloc(ea, 3 * MiB, NULL); /* maps the first pages again */
    cr_assert_eq(p2, p);
    cr_assert_eq(s->mapped_end, s->base + s->mapped_pages * s->page, "the prefix grows over pages mapped before");
    ASSERT_SOUND(ea);
    tu_free(ea, p2);
    tu_free(ea, q);
    tu_fixture_teardown(ea, eu);
}

/* A free block of an expandable segment carries `unmapped` when some of its
 * pages may be unmapped; without it, an allocation skips the page test. So
 * the check insists that an unmarked free block lies wholly on mapped pages,
 * and that no block of a classic segment is marked. A freed block is
 * unmarked (its pages were mapped while it was live). */
Test(check, a_block_marked_mapped_over_unmapped_pages_is_reported) {
    cca_upstream *eu = tu_vm_device(256 * MiB, 0); /* pages: trim unmaps part of a map */
    cca_allocator *ea = tu_allocator(eu, "expandable:1");
    void *p = tu_alloc(ea, 5 * MiB, NULL), *q = tu_alloc(ea, 3 * MiB, NULL);
    ccai_block *bp = ccai_live_map_find(&ea->live, (uintptr_t)p), *bq = bp->next;
    tu_free(ea, p);
    cr_assert(bq->prev == bp && !bp->unmapped, "freed: unmarked");
    ASSERT_SOUND(ea);
    cca_release_report r;
    cr_assert_eq(cca_trim(ea, 0, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_gt(r.pages_unmapped, 0);
    ccai_block *hole = bq->prev;
    cr_assert(hole && hole->state == CCAI_FREE && hole->unmapped, "trim marks the block whose pages it unmapped");
    ASSERT_SOUND(ea);
    hole->unmapped = false; /* an allocation would skip mapping its pages */
    ASSERT_BROKEN(ea, "unmapped");
    hole->unmapped = true;
    /* the hole is taken again (its pages mapped again) and freed: unmarked */
    void *p2 = tu_alloc(ea, 5 * MiB, NULL);
    cr_assert_eq(p2, p);
    ASSERT_SOUND(ea);
    tu_free(ea, p2);
    cr_assert(bq->prev->state == CCAI_FREE && !bq->prev->unmapped);
    tu_free(ea, q);
    tu_fixture_teardown(ea, eu);
    /* a classic segment's blocks are never marked */
    cca_allocator *ca = tu_allocator(u, "expandable:0");
    void *c = tu_alloc(ca, 8192, NULL);
    ccai_block *bc = ccai_live_map_find(&ca->live, (uintptr_t)c);
    tu_free(ca, c);
    ccai_block *f = bc->segment->first;
    cr_assert(!f->segment->expandable && f->state == CCAI_FREE && !f->unmapped);
    f->unmapped = true;
    ASSERT_BROKEN(ca, "classic");
    f->unmapped = false;
    tu_destroy_clean(ca, u);
}

Test(check, bad_pointers_are_diagnosed_precisely) {
    char *p = tu_alloc(a, 8192, NULL), *q = tu_alloc(a, 8192, NULL);
    char want[256];
    /* q, the second block: the offset is from its own start, not the segment's */
    cr_assert_eq(cca_free(a, q + 512), CCA_ERR_INVALID_POINTER);
    snprintf(want, sizeof want, "cca_free: interior pointer %p (block starts at %p, offset 512)", (void *)(q + 512),
             (void *)q);
    cr_assert_str_eq(cca_last_error(), want);
    tu_free(a, p);
    cr_assert_eq(cca_free(a, p), CCA_ERR_INVALID_POINTER);
    snprintf(want, sizeof want, "cca_free: double free of %p", (void *)p);
    cr_assert_str_eq(cca_last_error(), want);
    cr_assert_eq(cca_free(a, p + 512), CCA_ERR_INVALID_POINTER);
    snprintf(want, sizeof want,
             "cca_free: %p lies inside a free block (double free of a coalesced block, or stale pointer)",
             (void *)(p + 512));
    cr_assert_str_eq(cca_last_error(), want);
    int local;
    cr_assert_eq(cca_free(a, &local), CCA_ERR_INVALID_POINTER);
    snprintf(want, sizeof want,
             "cca_free: %p is not in this allocator's memory (not allocated by it, or its memory was given back: "
             "freed and released, or dropped by a forced domain release)",
             (void *)&local);
    cr_assert_str_eq(cca_last_error(), want);
    /* calls that free nothing say what the pointer is, never "double free" */
    size_t n;
    cr_assert_eq(cca_block_size(a, p, &n), CCA_ERR_INVALID_POINTER);
    snprintf(want, sizeof want, "cca_block_size: %p was freed: it starts a free block", (void *)p);
    cr_assert_str_eq(cca_last_error(), want);
    cr_assert_eq(cca_record_stream(a, p + 512, (cca_stream)&n), CCA_ERR_INVALID_POINTER);
    snprintf(want, sizeof want, "cca_record_stream: %p lies inside a free block (stale pointer)", (void *)(p + 512));
    cr_assert_str_eq(cca_last_error(), want);
    cca_domain *d;
    cr_assert_eq(cca_domain_of(a, p, &d), CCA_ERR_INVALID_POINTER);
    snprintf(want, sizeof want, "cca_domain_of: %p was freed: it starts a free block", (void *)p);
    cr_assert_str_eq(cca_last_error(), want);
    tu_free(a, q);
}

/* A block of a domain that a forced release dropped: its memory is gone,
 * and the message says that may be why, never that this allocator did
 * not allocate it. */
Test(check, a_pointer_a_forced_release_dropped_is_not_called_foreign) {
    cca_domain *d;
    cr_assert_eq(cca_domain_create(a, "m", &d), CCA_OK);
    void *p;
    cr_assert_eq(cca_alloc_in(a, d, 4096, NULL, &p), CCA_OK);
    cr_assert_eq(cca_domain_release(a, d, CCA_DOMAIN_FORCE, NULL), CCA_OK, "%s", cca_last_error());
    size_t n;
    cr_assert_eq(cca_block_size(a, p, &n), CCA_ERR_INVALID_POINTER);
    cr_assert(strstr(cca_last_error(), "dropped by a forced domain release"), "%s", cca_last_error());
    cr_assert_eq(cca_free(a, p), CCA_ERR_INVALID_POINTER);
    cr_assert(strstr(cca_last_error(), "dropped by a forced domain release"), "%s", cca_last_error());
    cr_assert_eq(cca_domain_destroy(a, d, 0, NULL), CCA_OK, "%s", cca_last_error());
}

/* Each check of the walk, met by the state it exists for: the message is
 * that check's own (a later check would catch some of these states too,
 * under another name). Each state is put back before the next. */
#define ASSERT_MESSAGE(x, want)                                                                                        \
    do {                                                                                                               \
        cr_assert_eq(cca_check_invariants(x), CCA_ERR_INVARIANT);                                                      \
        cr_assert_str_eq(cca_last_error(), "invariant broken: " want);                                                 \
    } while (0)

Test(check, each_broken_block_is_named_by_its_own_check) {
    void *p = tu_alloc(a, 8192, NULL), *q = tu_alloc(a, 8192, NULL);
    ccai_block *bq = ccai_live_map_find(&a->live, (uintptr_t)q);
    tu_free(a, p); /* [free][q][free remainder] */
    ccai_block *last = bq->next;
    cr_assert(bq->prev->state == CCAI_FREE && last && last->state == CCAI_FREE && !last->next);
    ASSERT_SOUND(a);

    bq->state = CCAI_FREE; /* beside the free block before it */
    ASSERT_MESSAGE(a, "I2: two neighbouring free blocks");
    bq->state = 7;
    ASSERT_MESSAGE(a, "a block has no valid state");
    bq->state = CCAI_LIVE;
    cca_stream saved = bq->stream;
    bq->stream = (cca_stream)0x1000;
    ASSERT_MESSAGE(a, "a block's key stream differs from its segment's");
    bq->stream = saved;
    last->size -= CCA_GRANULARITY;
    ASSERT_MESSAGE(a, "I1: blocks do not reach the end of their segment");
    last->size += CCA_GRANULARITY;
    ASSERT_SOUND(a);
    tu_free(a, q);
}

Test(check, each_broken_counter_is_named_by_its_own_check) {
    void *p = tu_alloc(a, 8192, NULL);
    ccai_block *b = ccai_live_map_find(&a->live, (uintptr_t)p);
    ccai_free_index *ix = b->segment->index;
    a->c.segments++;
    a->c.segments_peak++;
    ASSERT_MESSAGE(a, "I4: reserved bytes or segment count disagree with the segments");
    a->c.segments--;
    a->c.segments_peak--;
    a->c.pending++;
    ASSERT_MESSAGE(a, "I4: allocated bytes, active or pending blocks disagree with the blocks");
    a->c.pending--;
    cr_assert_gt(ix->count, 0, "the remainder after p is in the index");
    ix->bytes += CCA_GRANULARITY;
    ASSERT_MESSAGE(a, "free index counters disagree with its entries");
    ix->bytes -= CCA_GRANULARITY;
    ASSERT_SOUND(a);
    tu_free(a, p);
}

/* The handle set (domain.c) grows before it is more than half full, so
 * that a lookup of a handle not in it stops at an empty slot: eight
 * domains in a full table of eight (lookups of those eight still work) is
 * the state the check exists for. */
Test(check, a_handle_set_more_than_half_full_is_reported) {
    cca_domain *d[8];
    for (int i = 0; i < 8; i++)
        cr_assert_eq(cca_domain_create(a, "d", &d[i]), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(a->domain_set.count, 8);
    cr_assert_eq(a->domain_set.cap, 16, "exactly half full: sound");
    ASSERT_SOUND(a);
    cca_domain **saved = a->domain_set.slot, *full[8]; /* the records (d[] holds handles) */
    int n = 0;
    for (cca_domain *r = a->root.next; r; r = r->next) {
        cr_assert_lt(n, 8, "more than eight domains listed");
        full[n++] = r;
    }
    cr_assert_eq(n, 8);
    a->domain_set.slot = full;
    a->domain_set.cap = 8;
    ASSERT_MESSAGE(a, "I8: the handle set is more than half full");
    a->domain_set.slot = saved;
    a->domain_set.cap = 16;
    ASSERT_SOUND(a);
    for (int i = 0; i < 8; i++)
        cr_assert_eq(cca_domain_destroy(a, d[i], 0, NULL), CCA_OK, "%s", cca_last_error());
}

/* ---- the table of invariants (invariants.h) ------------------------------ */

/* Every id from 1 has its row, and row 0 (no invariant) none: a row given
 * twice one id leaves another id without (and does not compile). */
Test(check, every_invariant_id_has_its_row) {
    const ccai_invariant_row *none = &ccai_invariants[CCAI_INV_NONE];
    cr_assert(!none->statement && !none->applies_to && !none->checked_in);
    for (int id = 1; id < CCAI_INV_COUNT; id++) {
        const ccai_invariant_row *r = &ccai_invariants[id];
        cr_assert(r->statement && *r->statement, "I%d has no statement", id);
        cr_assert(r->applies_to && *r->applies_to, "I%d does not say what it applies to", id);
        cr_assert(r->checked_in && *r->checked_in, "I%d does not say where it is checked", id);
    }
    cr_assert_eq(CCAI_INV_COALESCED, 2);
    cr_assert_eq(CCAI_INV_WHOLE_MAPS, 9);
}

/* A message is the row's id and the check's detail; a check outside the
 * table (CCAI_INV_NONE) gives its detail alone. */
Test(check, a_broken_invariant_is_named_by_its_rows_id) {
    char buf[128];
    cr_assert_str_eq(
        ccai_broken_message(ccai_broke(CCAI_INV_COALESCED, "two neighbouring free blocks"), buf, sizeof buf),
        "I2: two neighbouring free blocks");
    cr_assert_str_eq(
        ccai_broken_message(ccai_broke(CCAI_INV_NONE, "a peak is below its current value"), buf, sizeof buf),
        "a peak is below its current value");
    cr_assert_str_eq(ccai_broken_message(ccai_broke(CCAI_INV_WHOLE_MAPS, "a map"), buf, 8), "I9: a m");
}

/* The counters' and lists' checks after the blocks' (check.c, check_all,
 * check_domains, check_queues): each state made on purpose is named by its
 * own message, then repaired. A domain exists, so domains are tracked. */
Test(check, each_broken_peak_domain_and_list_is_named_by_its_own_check) {
    cca_domain *d;
    cr_assert_eq(cca_domain_create(a, "m", &d), CCA_OK, "%s", cca_last_error());
    void *p = NULL;
    cr_assert_eq(cca_alloc_in(a, d, 8192, NULL, &p), CCA_OK, "%s", cca_last_error());
    ccai_block *b = ccai_live_map_find(&a->live, (uintptr_t)p);
    cca_domain *r = b->segment->domain;
    cr_assert_neq(r, &a->root, "the block is d's");
    ASSERT_SOUND(a);

    ccai_live_map_remove(&a->live, b);
    ASSERT_BROKEN(a, "a live block is missing from the live map");
    ccai_live_map_insert(&a->live, b);
    ASSERT_SOUND(a);

    a->c.allocated_peak = a->c.allocated - 1;
    ASSERT_BROKEN(a, "a peak is below its current value");
    a->c.allocated_peak = a->c.allocated;
    size_t requested = a->c.requested, requested_peak = a->c.requested_peak;
    a->c.requested = a->c.requested_peak = a->c.allocated + 1;
    ASSERT_BROKEN(a, "requested bytes exceed allocated bytes");
    a->c.requested = requested, a->c.requested_peak = requested_peak;
    ASSERT_SOUND(a);

    r->c.allocated += CCA_GRANULARITY;
    ASSERT_BROKEN(a, "a domain's counters disagree with its segments and blocks");
    r->c.allocated -= CCA_GRANULARITY;
    size_t peak = r->c.reserved_peak;
    r->c.reserved_peak = r->c.reserved - 1;
    ASSERT_BROKEN(a, "a domain's peak is below its current value, or requested exceeds allocated");
    r->c.reserved_peak = peak;
    r->c.requested -= 1; /* the domain's own rules hold; the sum is off by one */
    ASSERT_BROKEN(a, "the domains' counters do not sum to the allocator's");
    r->c.requested += 1;
    ASSERT_SOUND(a);

    a->last = &a->root;
    ASSERT_BROKEN(a, "the domain list is broken");
    a->last = r;
    a->domain_set.count++;
    ASSERT_BROKEN(a, "the handle set holds a domain that is not in the list");
    a->domain_set.count--;
    ASSERT_SOUND(a);

    b->sync_next = a->sync_head; /* a live block on the list of blocks waiting for a synchronize */
    a->sync_head = b;
    ASSERT_BROKEN(a, "a block on the sync list does not need a synchronize");
    a->sync_head = b->sync_next;
    b->sync_next = NULL;
    ASSERT_SOUND(a);
    tu_free(a, p);
    cr_assert_eq(cca_domain_destroy(a, d, 0, NULL), CCA_OK, "%s", cca_last_error());
}
