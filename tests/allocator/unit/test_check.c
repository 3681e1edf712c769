/*
 * test_check.c — allocator/src/support/check.c: the allocator checking itself:
 * cca_check_invariants names a broken invariant with its own status code,
 * and bad pointers are diagnosed precisely. The suite breaks the state on
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
    cr_assert_eq(cca_free(a, p + 512), CCA_ERR_INVALID_POINTER);
    cr_assert(strstr(cca_last_error(), "interior pointer") && strstr(cca_last_error(), "offset 512"), "%s",
              cca_last_error());
    tu_free(a, p);
    cr_assert_eq(cca_free(a, p), CCA_ERR_INVALID_POINTER);
    cr_assert(strstr(cca_last_error(), "double free") != NULL, "%s", cca_last_error());
    int local;
    cr_assert_eq(cca_free(a, &local), CCA_ERR_INVALID_POINTER);
    cr_assert(strstr(cca_last_error(), "not allocated by this allocator") != NULL, "%s", cca_last_error());
    tu_free(a, q);
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
