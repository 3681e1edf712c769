/*
 * test_vm_ranges.c — allocator/src/upstream/vm_ranges.c: the CUDA upstream's record
 * of its reserved ranges and of which granules are mapped, one bit each,
 * and the rules checked on it before any driver call (so that a call that
 * breaks one changes nothing, as on the simulated device):
 *
 *   map      inside one reserved range, overlapping no mapped granule;
 *   unmap    inside one range, every granule mapped (the first one that is
 *            not is named);
 *   release  exactly one range (same base and size), nothing mapped in it.
 *   whole    with whole maps (CCA_VM_WHOLE_MAPS), an unmap takes whole maps:
 *            it starts at a map's start and ends at a map's end.
 *
 * Runs on a CPU: the record is plain bookkeeping (the driver calls around
 * it are exercised by test_cuda_upstream on a GPU). Granule indices cross
 * 64-bit word boundaries on purpose.
 */
#include "internal.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#define G ((size_t)2 << 20)

static ccai_vm_ranges fresh(void) {
    ccai_vm_ranges rs = {.head = NULL, .granule = G, .who = "cuda:7"};
    return rs;
}

/* A record of two ranges, [a, a + a_size) added first: b's is listed first. */
static ccai_vm_ranges two_ranges(uintptr_t a, size_t a_size, uintptr_t b, size_t b_size) {
    ccai_vm_ranges rs = fresh();
    cr_assert_eq(ccai_vm_ranges_add(&rs, a, a_size), CCA_OK);
    cr_assert_eq(ccai_vm_ranges_add(&rs, b, b_size), CCA_OK);
    return rs;
}

static void set_run(ccai_vm_range *r, size_t first, size_t n, bool on) {
    for (size_t i = first; i < first + n; i++)
        ccai_vm_range_set(r, i, on);
}

/* A refusal: CCA_ERR_UPSTREAM, the message naming the upstream and `what`. */
static void refused(cca_status st, const char *what) {
    cr_assert_eq(st, CCA_ERR_UPSTREAM, "refused (%s): %s", what, cca_last_error());
    cr_assert(strstr(cca_last_error(), "cuda:7"), "%s", cca_last_error());
    cr_assert(strstr(cca_last_error(), what), "wanted '%s' in: %s", what, cca_last_error());
}

Test(vm_ranges, maps_lie_inside_one_range_and_overlap_no_mapped_granule) {
    const uintptr_t A = 0x7f0000000000, B = A + 1000 * G; /* two ranges, apart */
    ccai_vm_ranges rs = two_ranges(A, 200 * G, B, 8 * G);
    ccai_vm_range *r = NULL;
    size_t first = 99;
    cr_assert_eq(ccai_vm_check_map(&rs, A + 60 * G, 70 * G, &r, &first), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(r->base, A);
    cr_assert_eq(first, 60);
    cr_assert_eq(ccai_vm_check_map(&rs, B, 8 * G, &r, &first), CCA_OK);
    cr_assert_eq(r->base, B);
    cr_assert_eq(first, 0);
    refused(ccai_vm_check_map(&rs, A + 199 * G, 2 * G, &r, &first), "runs past the end");
    refused(ccai_vm_check_map(&rs, A + 300 * G, G, &r, &first), "not inside any reserved range");
    refused(ccai_vm_check_map(&rs, A - G, 2 * G, &r, &first), "not inside any reserved range");
    refused(ccai_vm_check_map(&rs, UINTPTR_MAX - G + 1, 2 * G, &r, &first), "not inside any reserved range");
    /* granules [60, 130) mapped: across two words of the bitmap */
    cr_assert_eq(ccai_vm_check_map(&rs, A + 60 * G, 70 * G, &r, &first), CCA_OK);
    set_run(r, first, 70, true);
    refused(ccai_vm_check_map(&rs, A + 129 * G, 2 * G, &r, &first), "granule 129");
    refused(ccai_vm_check_map(&rs, A + 40 * G, 21 * G, &r, &first), "granule 60");
    cr_assert(strstr(cca_last_error(), "already mapped (a map overlaps no mapped granule"), "%s", cca_last_error());
    cr_assert_eq(ccai_vm_check_map(&rs, A + 130 * G, 70 * G, &r, &first), CCA_OK, "right after the run");
    cr_assert_eq(ccai_vm_check_map(&rs, A, 60 * G, &r, &first), CCA_OK, "right before it");
    refused(ccai_vm_check_map(&rs, A + G / 2, G, &r, &first), "not whole granules");
    refused(ccai_vm_check_map(&rs, A, G + 4096, &r, &first), "not whole granules");
    ccai_vm_ranges_free(&rs);
    cr_assert_null(rs.head);
}

/* A range ending where the next begins: an address at the end of one is
 * the start of the other, not past the end of the first. The range at the
 * lower address is listed first (added last), so it is tried first. */
Test(vm_ranges, an_address_at_the_end_of_one_range_is_inside_the_next) {
    const uintptr_t A = 0x7f0000000000, B = A + 8 * G;
    ccai_vm_ranges rs = two_ranges(B, 4 * G, A, 8 * G);
    ccai_vm_range *r = NULL;
    size_t first = 99;
    cr_assert_eq(ccai_vm_check_map(&rs, B, 4 * G, &r, &first), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(r->base, B);
    cr_assert_eq(first, 0);
    cr_assert_eq(ccai_vm_check_map(&rs, A + 7 * G, G, &r, &first), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(r->base, A);
    cr_assert_eq(first, 7);
    refused(ccai_vm_check_map(&rs, A + 7 * G, 2 * G, &r, &first), "runs past the end of its reserved range");
    ccai_vm_ranges_free(&rs);
}

/* Mark and map [first, first + n) as one vm_map does. */
static void map_run(const ccai_vm_ranges *rs, size_t first, size_t n) {
    ccai_vm_range *r = NULL;
    size_t at = 0;
    cr_assert_eq(ccai_vm_check_map(rs, rs->head->base + first * G, n * G, &r, &at), CCA_OK, "%s", cca_last_error());
    ccai_vm_range_mark_map(rs, r, at, n);
    set_run(r, at, n, true);
}

/* With whole maps (CCA_VM_WHOLE_MAPS) a map marks only its first granule as
 * a start, and an unmap takes whole maps: it starts where a map starts and
 * the granule after it is the range's end, unmapped or another map's start;
 * else the map it would cut is named. Without whole maps every granule is
 * a start and any mapped run unmaps. The range is 64 granules, one word of
 * each bitmap: the last map ends at the range's end, where no bit is read. */
Test(vm_ranges, with_whole_maps_an_unmap_takes_whole_maps_only) {
    ccai_vm_ranges rs = fresh();
    rs.whole_maps = true;
    const uintptr_t A = 0x7f0000000000;
    cr_assert_eq(ccai_vm_ranges_add(&rs, A, 64 * G), CCA_OK);
    ccai_vm_range *r = rs.head, *got = NULL;
    map_run(&rs, 0, 2);  /* [0, 2) */
    map_run(&rs, 2, 3);  /* [2, 5), right after it */
    map_run(&rs, 10, 4); /* [10, 14), an unmapped granule after it */
    map_run(&rs, 60, 4); /* [60, 64), the range's end */
    for (size_t i = 0; i < 64; i++)
        cr_assert_eq(ccai_vm_range_starts(r, i), i == 0 || i == 2 || i == 10 || i == 60, "granule %zu", i);
    cr_assert_eq(ccai_vm_map_end(r, 0, 5), 2, "the next start");
    cr_assert_eq(ccai_vm_map_end(r, 2, 5), 5, "no start before `end`: end");
    cr_assert_eq(ccai_vm_map_end(r, 2, 4), 4, "a run's end inside a map");
    cr_assert_eq(ccai_vm_map_end(r, 60, 64), 64);
    size_t first = 99;
    cr_assert_eq(ccai_vm_check_unmap(&rs, A, 2 * G, &got, &first), CCA_OK, "a map followed by a map: %s",
                 cca_last_error());
    cr_assert_eq(first, 0);
    cr_assert_eq(ccai_vm_check_unmap(&rs, A, 5 * G, &got, &first), CCA_OK, "two maps: %s", cca_last_error());
    cr_assert_eq(ccai_vm_check_unmap(&rs, A + 10 * G, 4 * G, &got, &first), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(ccai_vm_check_unmap(&rs, A + 60 * G, 4 * G, &got, &first), CCA_OK, "to the range's end: %s",
                 cca_last_error());
    refused(ccai_vm_check_unmap(&rs, A + 3 * G, 2 * G, &got, &first), "would cut the map of granules [2, 5)");
    cr_assert(strstr(cca_last_error(), "which it starts inside"), "%s", cca_last_error());
    refused(ccai_vm_check_unmap(&rs, A + 10 * G, 2 * G, &got, &first), "would cut the map of granules [10, 14)");
    cr_assert(strstr(cca_last_error(), "which it ends inside"), "%s", cca_last_error());
    refused(ccai_vm_check_unmap(&rs, A + 60 * G, 2 * G, &got, &first), "would cut the map of granules [60, 64)");
    cr_assert(strstr(cca_last_error(), "which it ends inside"), "%s", cca_last_error());
    refused(ccai_vm_check_unmap(&rs, A + 61 * G, 3 * G, &got, &first), "would cut the map of granules [60, 64)");
    ccai_vm_ranges_free(&rs);

    rs = fresh(); /* page mode: every granule starts, any mapped run unmaps */
    cr_assert_eq(ccai_vm_ranges_add(&rs, A, 64 * G), CCA_OK);
    map_run(&rs, 10, 4);
    for (size_t i = 10; i < 14; i++)
        cr_assert(ccai_vm_range_starts(rs.head, i), "granule %zu", i);
    cr_assert_eq(ccai_vm_map_end(rs.head, 10, 14), 11);
    cr_assert_eq(ccai_vm_check_unmap(&rs, A + 11 * G, 2 * G, &got, &first), CCA_OK, "%s", cca_last_error());
    ccai_vm_ranges_free(&rs);
}

Test(vm_ranges, an_unmap_names_only_mapped_granules) {
    ccai_vm_ranges rs = fresh();
    const uintptr_t A = 0x7f0000000000;
    cr_assert_eq(ccai_vm_ranges_add(&rs, A, 200 * G), CCA_OK);
    ccai_vm_range *r = rs.head;
    set_run(r, 60, 70, true);
    size_t first = 0;
    ccai_vm_range *got = NULL;
    cr_assert_eq(ccai_vm_check_unmap(&rs, A + 60 * G, 70 * G, &got, &first), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(got, r);
    cr_assert_eq(first, 60);
    cr_assert_eq(ccai_vm_check_unmap(&rs, A + 64 * G, G, &got, &first), CCA_OK, "one granule in the middle");
    refused(ccai_vm_check_unmap(&rs, A + 59 * G, 71 * G, &got, &first), "granule 59");
    cr_assert(strstr(cca_last_error(), "an unmap names only mapped granules"), "%s", cca_last_error());
    refused(ccai_vm_check_unmap(&rs, A + 60 * G, 71 * G, &got, &first), "granule 130");
    ccai_vm_range_set(r, 100, false); /* a hole */
    cr_assert(!ccai_vm_range_mapped(r, 100));
    cr_assert(ccai_vm_range_mapped(r, 99) && ccai_vm_range_mapped(r, 101));
    refused(ccai_vm_check_unmap(&rs, A + 60 * G, 70 * G, &got, &first), "granule 100");
    refused(ccai_vm_check_unmap(&rs, A + 300 * G, G, &got, &first), "not inside any reserved range");
    ccai_vm_ranges_free(&rs);
}

Test(vm_ranges, a_release_names_one_range_with_nothing_mapped) {
    const uintptr_t A = 0x7f0000000000, B = A + 1000 * G;
    ccai_vm_ranges rs = two_ranges(A, 200 * G, B, 8 * G);
    ccai_vm_range *r = NULL;
    refused(ccai_vm_check_release(&rs, A, 100 * G, &r), "no range of 209715200 bytes reserved at");
    refused(ccai_vm_check_release(&rs, A + G, 199 * G, &r), "no range of");
    cr_assert_eq(ccai_vm_check_release(&rs, A, 200 * G, &r), CCA_OK);
    ccai_vm_range_set(r, 199, true);
    refused(ccai_vm_check_release(&rs, A, 200 * G, &r), "granule 199 is still mapped");
    ccai_vm_range_set(r, 199, false);
    cr_assert_eq(ccai_vm_check_release(&rs, A, 200 * G, &r), CCA_OK);
    ccai_vm_ranges_remove(&rs, r);
    refused(ccai_vm_check_release(&rs, A, 200 * G, &r), "no range of");
    ccai_vm_range *b = NULL;
    size_t first;
    refused(ccai_vm_check_map(&rs, A, G, &b, &first), "not inside any reserved range");
    cr_assert_eq(ccai_vm_check_map(&rs, B + 7 * G, G, &b, &first), CCA_OK, "the other range stays");
    cr_assert_eq(first, 7);
    cr_assert_eq(ccai_vm_check_release(&rs, B, 8 * G, &r), CCA_OK);
    ccai_vm_ranges_remove(&rs, r);
    cr_assert_null(rs.head);
}
