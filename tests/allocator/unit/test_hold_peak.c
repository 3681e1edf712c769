/*
 * test_hold_peak.c — allocator/src/alloc.c: hold_peak:1: a request that would raise reserved bytes
 * above their peak first releases cached memory (policies/hold.c).
 *
 * Every case runs twice, with and without the option, on the same calls,
 * and checks both outcomes exactly: what the hold saves is the difference.
 *
 *   classic (expandable:0), 12 MiB segments (a segment per large request):
 *     A B C live, A B freed, D of 20 MiB  -> A and B go back, D's segment
 *                                           fits under the 36 MiB peak
 *     A B live, A freed, C of 14 MiB      -> releasing A leaves 12 + 14 >
 *                                           24: the peak must rise; A goes
 *                                           back first, so by 2 MiB, not 14
 *   expandable, 64 KiB pages, nothing mapped ahead:
 *     [A 1M][B 1M free][C 1M][tail ...]   D of 2 MiB: B's pages are unmapped
 *                                           before D's are mapped (4 MiB, not
 *                                           5), and B's address faults
 *     E of 1 MiB then takes B's place      by unmapping D's freed pages at
 *                                           the tail: the peak stays 4 MiB
 * Then: the reference is reserved_bytes_peak (cca_reset_peak_stats lowers
 * it), a full device still ends in the ordinary retry and an OOM with
 * nothing lost, greedy refuses the option, and the stats report the holds.
 */
#include "alloc_test_util.h"
#include "pages_rule.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- classic segments ------------------------------------------------------- */

static cca_allocator *classic(bool hold, cca_upstream **u) {
    cca_allocator *a;
    tu_host_allocator(64 * MiB, hold ? "expandable:0,hold_peak:1,log_oom:0" : "expandable:0,log_oom:0", u, &a);
    return a;
}

Test(hold_peak, classic_free_segments_go_back_before_the_peak_would_rise) {
    for (int hold = 0; hold < 2; hold++) {
        cca_upstream *u;
        cca_allocator *a = classic(hold, &u);
        void *A = tu_alloc(a, 12 * MiB, NULL), *B = tu_alloc(a, 12 * MiB, NULL), *C = tu_alloc(a, 12 * MiB, NULL);
        tu_fill(C, 12 * MiB, 3);
        tu_free(a, A);
        tu_free(a, B);
        void *D = tu_alloc(a, 20 * MiB, NULL);
        cca_stats s = tu_stats(a);
        tu_check(a);
        cr_assert_eq(tu_upstream_stats(u).bytes_in_use, s.reserved_bytes);
        if (hold) {
            /* over the peak by 20 MiB: A and B (largest first, then by
             * address) go back until 16 MiB stay, then D's segment */
            cr_assert_eq(s.reserved_bytes, 32 * MiB, "%zu", s.reserved_bytes);
            cr_assert_eq(s.reserved_bytes_peak, 36 * MiB, "%zu", s.reserved_bytes_peak);
            cr_assert_eq(s.upstream_frees, 2);
            cr_assert_eq(s.segments, 2);
            cr_assert_eq(s.peak_holds, 1);
        } else {
            cr_assert_eq(s.reserved_bytes, 56 * MiB);
            cr_assert_eq(s.reserved_bytes_peak, 56 * MiB);
            cr_assert_eq(s.upstream_frees, 0);
            cr_assert_eq(s.peak_holds, 0);
        }
        cr_assert_eq(s.upstream_allocs, 4);
        cr_assert_eq(s.alloc_retries, 0, "a hold is not the OOM retry");
        cr_assert(tu_check_fill(C, 12 * MiB, 3));
        tu_free(a, C);
        tu_free(a, D);
        tu_destroy_clean(a, u);
    }
}

Test(hold_peak, classic_the_peak_rises_by_the_least_when_it_must) {
    for (int hold = 0; hold < 2; hold++) {
        cca_upstream *u;
        cca_allocator *a = classic(hold, &u);
        void *A = tu_alloc(a, 12 * MiB, NULL), *B = tu_alloc(a, 12 * MiB, NULL);
        tu_free(a, A);
        void *C = tu_alloc(a, 14 * MiB, NULL); /* A's free 12 MiB cannot hold it */
        cca_stats s = tu_stats(a);
        tu_check(a);
        cr_assert_eq(s.reserved_bytes, hold ? 26 * MiB : 38 * MiB, "%zu", s.reserved_bytes);
        cr_assert_eq(s.reserved_bytes_peak, s.reserved_bytes);
        cr_assert_eq(s.upstream_frees, hold ? 1 : 0, "A's segment went back first");
        cr_assert_eq(s.peak_holds, hold ? 1 : 0);
        cr_assert_eq(s.alloc_retries, 0);
        tu_free(a, B);
        tu_free(a, C);
        /* below the peak nothing is held: a request that fits the cache or
         * stays under it is served as without the option */
        void *D = tu_alloc(a, 12 * MiB, NULL);
        cr_assert_eq(tu_stats(a).peak_holds, hold ? 1 : 0);
        tu_free(a, D);
        tu_destroy_clean(a, u);
    }
}

/* The peak held is reserved_bytes_peak, which cca_reset_peak_stats lowers
 * to what is reserved now: 24 MiB here, under the 48 MiB reached before. */
Test(hold_peak, the_peak_held_is_the_one_reset_peak_stats_sets) {
    for (int reset = 0; reset < 2; reset++) {
        cca_upstream *u;
        cca_allocator *a = classic(true, &u);
        void *A = tu_alloc(a, 12 * MiB, NULL), *B = tu_alloc(a, 12 * MiB, NULL);
        void *C = tu_alloc(a, 12 * MiB, NULL), *E = tu_alloc(a, 12 * MiB, NULL);
        tu_free(a, C);
        tu_free(a, E);
        cca_release_report r;
        cr_assert_eq(cca_trim(a, 24 * MiB, &r), CCA_OK, "%s", cca_last_error()); /* A and B stay, peak 48 */
        if (reset)
            cca_reset_peak_stats(a);
        tu_free(a, B); /* cached */
        void *D = tu_alloc(a, 14 * MiB, NULL); /* B's segment cannot hold it */
        cca_stats s = tu_stats(a);
        tu_check(a);
        if (reset) { /* over the peak of 24 even with B's segment released: it goes, then the peak rises by 2 MiB */
            cr_assert_eq(s.peak_holds, 1);
            cr_assert_eq(s.reserved_bytes, 26 * MiB, "%zu", s.reserved_bytes);
            cr_assert_eq(s.reserved_bytes_peak, 26 * MiB);
        } else { /* 38 MiB is under the peak of 48: nothing is held, B's segment stays cached */
            cr_assert_eq(s.peak_holds, 0);
            cr_assert_eq(s.reserved_bytes, 38 * MiB, "%zu", s.reserved_bytes);
            cr_assert_eq(s.reserved_bytes_peak, 48 * MiB);
        }
        tu_free(a, A);
        tu_free(a, D);
        tu_destroy_clean(a, u);
    }
}

/* Growth with nothing cached is growth: no hold, nothing counted. */
Test(hold_peak, growth_with_nothing_cached_is_not_held) {
    cca_upstream *u;
    cca_allocator *a = classic(true, &u);
    void *p[4];
    for (int i = 0; i < 4; i++)
        p[i] = tu_alloc(a, 12 * MiB, NULL);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.peak_holds, 0);
    cr_assert_eq(s.upstream_allocs, 4);
    cr_assert_eq(s.upstream_frees, 0);
    cr_assert_eq(s.reserved_bytes_peak, 48 * MiB);
    for (int i = 0; i < 4; i++)
        tu_free(a, p[i]);
    tu_destroy_clean(a, u);
}

/* ---- expandable segments ---------------------------------------------------- */

#define PG ((size_t)64 * KiB)

static cca_allocator *expandable(bool hold, cca_upstream *u) {
    return tu_allocator(u, hold ? "expandable:1,hold_peak:1,small_pool:0,expandable_ahead:0,log_oom:0"
                                : "expandable:1,small_pool:0,expandable_ahead:0,log_oom:0");
}

/* The allocator's account agrees with the device's: mapped = reserved =
 * what the simulated device says is used. */
static void agree(const cca_allocator *a, cca_upstream *u) {
    tu_check(a);
    cca_stats s = tu_stats(a);
    cca_upstream_stats us = tu_upstream_stats(u);
    cr_assert_eq(s.mapped_bytes, us.vm_mapped_bytes);
    cr_assert_eq(s.reserved_bytes, s.mapped_bytes);
    cr_assert_eq(s.vm_maps, us.vm_map_calls);
    cr_assert_eq(s.vm_unmaps, us.vm_unmap_calls);
}

Test(hold_peak, expandable_hole_pages_are_unmapped_before_the_peak_would_rise) {
    for (int hold = 0; hold < 2; hold++) {
        cca_upstream *u = tu_vm_device(64 * MiB, PG);
        cca_allocator *a = expandable(hold, u);
        char *A = tu_alloc(a, 1 * MiB, NULL), *B = tu_alloc(a, 1 * MiB, NULL), *C = tu_alloc(a, 1 * MiB, NULL);
        cr_assert_eq(B, A + 1 * MiB);
        cr_assert_eq(C, A + 2 * MiB);
        tu_fill(A, 1 * MiB, 1);
        tu_fill(C, 1 * MiB, 3);
        tu_free(a, B);
        char *D = tu_alloc(a, 2 * MiB, NULL); /* the hole is too small: the tail */
        cr_assert_eq(D, A + 3 * MiB);
        cca_stats s = tu_stats(a);
        agree(a, u);
        if (hold) { /* over the 3 MiB peak even with B's pages unmapped: they go first, the peak rises by 1 MiB */
            cr_assert_eq(s.reserved_bytes, 4 * MiB, "%zu", s.reserved_bytes);
            cr_assert_eq(s.reserved_bytes_peak, 4 * MiB);
            cr_assert_eq(s.pages_unmapped, 1 * MiB / PG);
            cr_assert_eq(s.peak_holds, 1);
            TU_ASSERT_FAULTS(B);
            TU_ASSERT_FAULTS(B + 1 * MiB - 1);
        } else {
            cr_assert_eq(s.reserved_bytes, 5 * MiB);
            cr_assert_eq(s.pages_unmapped, 0);
            cr_assert_eq(s.peak_holds, 0);
            TU_ASSERT_READABLE(B);
        }
        cr_assert_eq(s.alloc_retries, 0);
        tu_free(a, D); /* D's 2 MiB stay mapped, free, at the tail */
        char *E = tu_alloc(a, 1 * MiB, NULL);
        cr_assert_eq(E, B, "best fit: B's hole");
        tu_fill(E, 1 * MiB, 5);
        s = tu_stats(a);
        agree(a, u);
        if (hold) { /* B's pages again, in place of as many of D's: the peak holds */
            cr_assert_eq(s.reserved_bytes_peak, 4 * MiB, "%zu", s.reserved_bytes_peak);
            cr_assert_leq(s.reserved_bytes, 4 * MiB);
            cr_assert_eq(s.peak_holds, 2);
            TU_ASSERT_FAULTS(D + 2 * MiB - 1); /* the tail's pages go first, from its end */
        } else {
            cr_assert_eq(s.reserved_bytes, 5 * MiB, "B's pages were never unmapped");
            cr_assert_eq(s.peak_holds, 0);
        }
        cr_assert(tu_check_fill(A, 1 * MiB, 1));
        cr_assert(tu_check_fill(C, 1 * MiB, 3));
        cr_assert(tu_check_fill(E, 1 * MiB, 5));
        tu_free(a, A);
        tu_free(a, C);
        tu_free(a, E);
        cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s", cca_last_error());
        cr_assert_eq(tu_upstream_stats(u).vm_mapped_bytes, 0);
        cr_assert_eq(cca_destroy(a), CCA_OK);
        cca_upstream_destroy(u);
    }
}

/* The step that raises the peak maps the request's own pages, none ahead:
 * here a least step of 4 MiB (the test hook; the cap the default 64 MiB)
 * would map 2 MiB more.
 *   [A 1M][B 3M] (A's step mapped 4 MiB), A freed, C of 2 MiB: the tail */
Test(hold_peak, the_step_that_raises_the_peak_maps_no_ahead_pages) {
    for (int hold = 0; hold < 2; hold++) {
        cca_upstream *u = tu_vm_device(64 * MiB, PG);
        cca_allocator *a = tu_allocator(u, hold ? "expandable:1,hold_peak:1,small_pool:0,log_oom:0"
                                                : "expandable:1,small_pool:0,log_oom:0");
        ccai_pages_rule_set(a, 4 * MiB, 64 * MiB, 128 * MiB);
        char *A = tu_alloc(a, 1 * MiB, NULL), *B = tu_alloc(a, 3 * MiB, NULL);
        cr_assert_eq(B, A + 1 * MiB);
        cr_assert_eq(tu_stats(a).reserved_bytes, 4 * MiB, "A's step maps the least step");
        tu_free(a, A);
        char *C = tu_alloc(a, 2 * MiB, NULL);
        cr_assert_eq(C, A + 4 * MiB);
        cca_stats s = tu_stats(a);
        agree(a, u);
        /* hold: A's pages go, then C's own 2 MiB; without: C's step of 4 MiB beside A's cached pages */
        cr_assert_eq(s.reserved_bytes, hold ? 5 * MiB : 8 * MiB, "%zu", s.reserved_bytes);
        cr_assert_eq(s.reserved_bytes_peak, s.reserved_bytes);
        cr_assert_eq(s.vm_maps, 2);
        cr_assert_eq(s.peak_holds, hold ? 1 : 0);
        tu_free(a, B);
        tu_free(a, C);
        cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s", cca_last_error());
        cr_assert_eq(tu_upstream_stats(u).vm_mapped_bytes, 0);
        cr_assert_eq(cca_destroy(a), CCA_OK);
        cca_upstream_destroy(u);
    }
}

/* A device too small for the request even with everything cached released:
 * the hold releases nothing (as the retry, it asks whether releasing can
 * make room), the ordinary retry follows (alloc_retries) and releases
 * nothing either, and the OOM leaves live blocks and the cache as they
 * were. */
Test(hold_peak, a_full_device_ends_in_the_retry_and_an_oom_with_nothing_lost) {
    cca_upstream *u = tu_vm_device(4 * MiB, PG);
    cca_allocator *a = expandable(true, u);
    char *A = tu_alloc(a, 1 * MiB, NULL), *B = tu_alloc(a, 1 * MiB, NULL), *C = tu_alloc(a, 1 * MiB, NULL);
    tu_fill(A, 1 * MiB, 1);
    tu_fill(C, 1 * MiB, 3);
    tu_free(a, B);
    void *D = (void *)1;
    cr_assert_eq(cca_alloc(a, 3 * MiB, NULL, &D), CCA_ERR_OUT_OF_MEMORY);
    cr_assert_null(D);
    cca_stats s = tu_stats(a);
    agree(a, u);
    cr_assert_eq(s.peak_holds, 0, "nothing released");
    cr_assert_eq(s.alloc_retries, 1);
    cr_assert_eq(s.ooms, 1);
    cr_assert_eq(s.allocated_bytes, 2 * MiB);
    cr_assert_eq(s.reserved_bytes, 3 * MiB, "B's pages stay mapped: releasing them could not make room");
    cr_assert_eq(s.pages_unmapped, 0);
    cr_assert_eq(s.reserved_bytes_peak, 3 * MiB);
    cr_assert(tu_check_fill(A, 1 * MiB, 1));
    cr_assert(tu_check_fill(C, 1 * MiB, 3));
    /* and a request the device can hold is still served, as the peak
     * allows: B's pages go back for it, then the peak rises by 1 MiB */
    void *E = tu_alloc(a, 2 * MiB, NULL);
    s = tu_stats(a);
    agree(a, u);
    cr_assert_eq(s.reserved_bytes, 4 * MiB);
    cr_assert_eq(s.peak_holds, 1);
    TU_ASSERT_FAULTS(B);
    tu_free(a, A);
    tu_free(a, C);
    tu_free(a, E);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    cr_assert_eq(cca_destroy(a), CCA_OK);
    cca_upstream_destroy(u);
}

/* ---- configuration and reports ---------------------------------------------- */

Test(hold_peak, config_default_off_and_greedy_refuses_it) {
    cca_config c;
    cca_config_default(&c);
    cr_assert_eq(c.hold_peak, 0);
    cr_assert_eq(cca_config_parse(&c, "hold_peak:1"), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(c.hold_peak, 1);
    cr_assert_eq(cca_config_validate(&c), CCA_OK);
    cr_assert_eq(cca_config_parse(&c, "policy:greedy"), CCA_ERR_CONFIG, "the pair is refused as parsed");
    cr_assert(strstr(cca_last_error(), "hold_peak") != NULL, "%s", cca_last_error());
    cr_assert_eq(c.policy, CCA_POLICY_GROWTH, "a refused string changes nothing");
    c.policy = CCA_POLICY_GREEDY; /* set directly: validate and cca_create refuse it */
    cr_assert_eq(cca_config_validate(&c), CCA_ERR_CONFIG);
    cr_assert(strstr(cca_last_error(), "hold_peak") != NULL, "%s", cca_last_error());
    cca_upstream *u;
    cr_assert_eq(cca_upstream_host_create(64 * MiB, &u), CCA_OK);
    cca_allocator *a = (cca_allocator *)1;
    cr_assert_eq(cca_create(&c, u, &a), CCA_ERR_CONFIG);
    cr_assert_null(a);
    cr_assert_eq(tu_upstream_stats(u).bytes_in_use, 0, "no arena reserved for a refused config");
    cca_config_default(&c);
    const char *bad[] = {"hold_peak:2", "hold_peak:-1", "hold_peak:maybe", "hold_peak:", "hold_peak:0.5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(cca_config_parse(&c, bad[i]), CCA_ERR_CONFIG, "%s", bad[i]);
        cr_assert(strstr(cca_last_error(), "hold_peak") != NULL, "%s: %s", bad[i], cca_last_error());
        cr_assert_eq(c.hold_peak, 0, "%s: a refused value changes nothing", bad[i]);
    }
    cca_upstream_destroy(u);
}

Test(hold_peak, stats_report_the_holds) {
    cca_upstream *u;
    cca_allocator *a = classic(true, &u);
    void *A = tu_alloc(a, 12 * MiB, NULL), *B = tu_alloc(a, 12 * MiB, NULL);
    tu_free(a, A);
    void *C = tu_alloc(a, 14 * MiB, NULL);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.peak_holds, 1);
    char *text = NULL, *json = NULL;
    size_t tn = 0, jn = 0;
    FILE *f = open_memstream(&text, &tn);
    cr_assert_eq(cca_stats_print(&s, f), CCA_OK);
    fclose(f);
    cr_assert(strstr(text, " holds=1 ") != NULL, "%s", text);
    f = open_memstream(&json, &jn);
    cr_assert_eq(cca_stats_write_json(&s, f), CCA_OK);
    fclose(f);
    cr_assert(strstr(json, "\"peak_holds\":1,") != NULL, "%s", json);
    free(text);
    free(json);
    tu_free(a, B);
    tu_free(a, C);
    tu_destroy_clean(a, u);
}
