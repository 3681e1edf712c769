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
    ccai_vm_ranges rs = fresh();
    const uintptr_t A = 0x7f0000000000, B = A + 1000 * G; /* two ranges, apart */
    cr_assert_eq(ccai_vm_ranges_add(&rs, A, 200 * G), CCA_OK);
    cr_assert_eq(ccai_vm_ranges_add(&rs, B, 8 * G), CCA_OK);
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
    ccai_vm_ranges_free(&rs);
    cr_assert_null(rs.head);
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
    ccai_vm_ranges rs = fresh();
    const uintptr_t A = 0x7f0000000000, B = A + 1000 * G;
    cr_assert_eq(ccai_vm_ranges_add(&rs, A, 200 * G), CCA_OK);
    cr_assert_eq(ccai_vm_ranges_add(&rs, B, 8 * G), CCA_OK);
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
