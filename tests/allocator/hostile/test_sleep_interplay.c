/*
 * test_sleep_interplay.c — allocator/src/sleep.c against the rest of the
 * allocator: what the other calls do while a domain sleeps, each a case
 * the programs of test_sleep_hostile.c do not reach.
 *
 *   report     cca_trim / cca_empty_cache's release report while a domain
 *              sleeps with live blocks: its figures are the device's
 *              (free_bytes_pinned no more than what stays reserved).
 *   hold_peak  a sleeping domain's live bytes are on the host: another
 *              domain's request is held at the peak exactly as when no
 *              domain sleeps (the cache goes back before the peak rises).
 *   stats      a sleeping domain whose unmap was refused (a free run left
 *              mapped) reports no cached byte and no free block.
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

/* ---- hold_peak --------------------------------------------------------------------------- */

/* B: two 64 MiB blocks, the first freed (cached, mapped), then 96 MiB that
 * the cache cannot serve. Held at the peak, the cached 64 MiB go back
 * first: B ends with 64 + 96 MiB reserved, not 64 + 64 + 96. Returns B's
 * reserved bytes afterwards. */
static size_t hold_run(bool sleep_a) {
    cca_upstream *u = tu_vm_device(1024 * MiB, 0);
    cca_allocator *a = tu_allocator(u, "hold_peak:1,expandable_ahead:0");
    cca_domain *A, *B;
    cr_assert_eq(cca_domain_create(a, "A", &A), CCA_OK);
    cr_assert_eq(cca_domain_create(a, "B", &B), CCA_OK);
    void *pa = NULL, *x = NULL, *y = NULL, *z = NULL;
    cr_assert_eq(cca_alloc_in(a, A, 200 * MiB, NULL, &pa), CCA_OK, "%s", cca_last_error());
    if (sleep_a)
        cr_assert_eq(cca_domain_sleep(a, A, 0, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_alloc_in(a, B, 64 * MiB, NULL, &x), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_alloc_in(a, B, 64 * MiB, NULL, &y), CCA_OK, "%s", cca_last_error());
    tu_free(a, x);
    cca_reset_peak_stats(a);
    cr_assert_eq(cca_alloc_in(a, B, 96 * MiB, NULL, &z), CCA_OK, "%s", cca_last_error());
    tu_check(a);
    cca_domain_stats s;
    cr_assert_eq(cca_get_domain_stats(a, B, &s), CCA_OK);
    tu_free(a, z);
    tu_free(a, y);
    if (sleep_a)
        cr_assert_eq(cca_domain_wake(a, A, NULL), CCA_OK, "%s", cca_last_error());
    tu_free(a, pa);
    tu_teardown(a, u);
    return s.reserved_bytes;
}

Test(sleep_interplay, hold_peak_holds_beside_a_sleeping_domain) {
    size_t awake = hold_run(false), asleep = hold_run(true);
    cr_assert_eq(awake, 160 * MiB, "awake: B holds %zu MiB (the cache went back first)", awake / MiB);
    cr_assert_eq(asleep, awake, "A asleep: B holds %zu MiB, %zu MiB with A awake (the cache kept)", asleep / MiB,
                 awake / MiB);
}

/* ---- domain stats ------------------------------------------------------------------------ */

/* A refused unmap leaves a free run mapped in a sleeping domain: its stats
 * still say nothing is cached there (ccalloc.h, cca_domain_stats.asleep). */
Test(sleep_interplay, refused_unmap_leaves_no_cached_bytes) {
    tu_faulty f;
    cca_upstream *inner = tu_vm_device(256 * MiB, 0);
    cca_upstream *u = tu_faulty_create(&f, inner, "fx", true);
    cca_allocator *a = tu_allocator(u, "expandable_ahead:0");
    cca_domain *A;
    cr_assert_eq(cca_domain_create(a, "A", &A), CCA_OK);
    void *p = NULL, *q = NULL;
    cr_assert_eq(cca_alloc_in(a, A, 1 * MiB, NULL, &p), CCA_OK);
    cr_assert_eq(cca_alloc_in(a, A, 60 * MiB, NULL, &q), CCA_OK);
    tu_free(a, q);
    f.fail_at[TU_FAULT_UNMAP] = f.calls[TU_FAULT_UNMAP] + 1;
    f.sticky[TU_FAULT_UNMAP] = true;
    cr_assert_eq(cca_domain_sleep(a, A, 0, NULL), CCA_ERR_UPSTREAM);
    tu_faulty_faults_off(&f);
    tu_check(a);
    cca_domain_stats s;
    cr_assert_eq(cca_get_domain_stats(a, A, &s), CCA_OK);
    cr_assert_eq(s.asleep, 1);
    cr_assert_gt(s.reserved_bytes, 0);
    cr_assert_eq(s.cached_bytes, 0, "asleep: cached %zu of %zu reserved", s.cached_bytes, s.reserved_bytes);
    cr_assert_eq(s.largest_free_block, 0, "asleep: a free block of %zu bytes to serve", s.largest_free_block);
    cr_assert_eq(s.fragmentation, 0.0);
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    cr_assert_eq(cca_write_snapshot_torch(a, 0, fp), CCA_OK, "%s", cca_last_error());
    fclose(fp);
    free(buf);
    cr_assert_eq(cca_domain_sleep(a, A, 0, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_domain_wake(a, A, NULL), CCA_OK, "%s", cca_last_error());
    tu_free(a, p);
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    cca_upstream_destroy(u);
    cca_upstream_destroy(inner);
}
