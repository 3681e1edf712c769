/*
 * test_sleep_interplay.c — allocator/src/sleep.c against the rest of the
 * allocator: what the other calls do while a domain sleeps, each a case
 * the programs of test_sleep_hostile.c do not reach.
 *
 *   report     cca_trim / cca_empty_cache's release report while a domain
 *              sleeps with live blocks: its figures are the device's
 *              (free_bytes_pinned no more than what stays reserved).
 *
 * Every test can fail: each names what it expected.
 */
#include <criterion/criterion.h>

#include "alloc_test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- report ------------------------------------------------------------------------------ */

Test(sleep_interplay, release_report_while_asleep_counts_the_device) {
    cca_upstream *u = tu_vm_device(256 * MiB, 0);
    cca_allocator *a = tu_allocator(u, NULL);
    cca_domain *A;
    cr_assert_eq(cca_domain_create(a, "A", &A), CCA_OK);
    void *p = tu_alloc(a, 1 * MiB, NULL), *q = NULL;
    cr_assert_eq(cca_alloc_in(a, A, 30 * MiB, NULL, &q), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_domain_sleep(a, A, 0, NULL), CCA_OK, "%s", cca_last_error());
    tu_check(a);
    cca_release_report r;
    cr_assert_eq(cca_trim(a, 0, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_leq(r.free_bytes_pinned, r.bytes_still_reserved,
                  "free bytes pinned %zu, but only %zu bytes stay reserved", r.free_bytes_pinned,
                  r.bytes_still_reserved);
    cr_assert_eq(cca_empty_cache(a, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_leq(r.free_bytes_pinned, r.bytes_still_reserved,
                  "free bytes pinned %zu, but only %zu bytes stay reserved", r.free_bytes_pinned,
                  r.bytes_still_reserved);
    cr_assert_eq(r.asleep_domains, 1);
    cr_assert_eq(cca_domain_wake(a, A, NULL), CCA_OK, "%s", cca_last_error());
    tu_free(a, q);
    tu_free(a, p);
    tu_teardown(a, u);
}
