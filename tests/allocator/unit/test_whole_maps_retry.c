/*
 * test_whole_maps_retry.c — allocator/src/kinds/pages.c: the OOM retry over whole maps: what a request
 * still needs once everything cached is released.
 *
 * Before it releases anything, the retry (core/grow.c) asks whether releasing
 * can make room: the request's NEW pages (retry_need) against the
 * device's free memory plus what a release can give back
 * (ccai_releasable), and against max_reserved. Over pages, a free block's
 * pages all go but the one a live neighbour shares at each end. Over whole
 * maps a live neighbour holds every page of each map it touches, and such
 * a map can reach many pages into the free block: those pages are neither
 * releasable nor new. Counted as new, the request asks for more than it
 * needs, and the retry refuses a request that releasing would have served.
 *
 *   S0   maps  [0                8)[8        13)      <- L's map, then R's
 *        blocks L|free ........................ (the tail)
 *   S1   maps  [0    4)   Z's, freed: cached, releasable
 * The device holds 14 pages: R (12 pages from page 1) lacks only pages
 * [8,13), 5, where 2 are free; unmapping Z's 4 makes room.
 */
#include "alloc_test_util.h"
#include "pages_rule.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#define PG ((size_t)64 * KiB)
#define S0 ((cca_stream)0x100)
#define S1 ((cca_stream)0x200)

/* No ahead pages, no least step; one map per run (the test hook, before
 * the first request). */
static cca_allocator *allocator(cca_upstream *u, const char *more) {
    char conf[200];
    snprintf(conf, sizeof conf, "expandable:1,log_oom:0,expandable_ahead:0,small_pool:0%s", more);
    cca_allocator *a = tu_allocator(u, conf);
    ccai_pages_rule_set(a, 0, 0, 0);
    return a;
}

static void agree(const cca_allocator *a, cca_upstream *u, const char *what) {
    cr_assert_eq(cca_check_invariants(a), CCA_OK, "%s: %s", what, cca_last_error());
    cr_assert_eq(tu_stats(a).mapped_bytes, tu_upstream_stats(u).vm_mapped_bytes, "%s", what);
}

/* L live in map [0,8) on S0, Z's 4 pages cached on S1: 12 of 14 pages mapped. */
static void layout(cca_allocator *a, cca_upstream *u, char **l) {
    char *x = tu_alloc(a, 8 * PG, S0); /* one map [0,8) */
    tu_free(a, x);
    *l = tu_alloc(a, PG, S0);
    cr_assert_eq(*l, x, "L takes page 0, in the map of 8");
    tu_fill(*l, PG, 7);
    tu_free(a, tu_alloc(a, 4 * PG, S1));
    agree(a, u, "layout");
    cr_assert_eq(tu_stats(a).mapped_bytes, 12 * PG);
}

/* R, 12 pages on S0: served from page 1 after one retry. */
static char *serve_r(cca_allocator *a, cca_upstream *u, const char *why) {
    void *r = NULL;
    cca_status st = cca_alloc(a, 12 * PG, S0, &r);
    cr_assert_eq(st, CCA_OK, "%s: %s", why, cca_last_error());
    agree(a, u, "R served");
    cr_assert_eq(tu_stats(a).alloc_retries, 1);
    return r;
}

static void finish(cca_allocator *a, cca_upstream *u, char *l) {
    cr_assert(tu_check_fill(l, PG, 7), "L overwritten");
    tu_free(a, l);
    tu_empty_all(a, u);
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    cca_upstream_destroy(u);
}

/* The device's free memory plus the cache: 2 + 4 pages for the 5 R lacks. */
Test(whole_maps_retry, pages_a_live_neighbours_map_holds_are_not_needed_again) {
    cca_upstream *u = tu_vm_device_backed(14 * PG, PG, CCA_VM_WHOLE_MAPS);
    cca_allocator *a = allocator(u, "");
    char *l;
    layout(a, u, &l);
    char *r = serve_r(a, u, "releasing S1's 4 pages makes room for the 5 R lacks");
    cr_assert_eq(r, l + PG);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.mapped_bytes, 13 * PG, "L's map and R's five pages; Z's map gone");
    tu_fill(r, 12 * PG, 9);
    cr_assert(tu_check_fill(r, 12 * PG, 9));
    tu_free(a, r);
    finish(a, u, l);
}

/* max_reserved: 13 pages stay reserved at most; L's map (8) plus R's 5 new
 * ones fit once Z's map goes. */
Test(whole_maps_retry, max_reserved_counts_a_held_map_once) {
    cca_upstream *u = tu_vm_device_backed(64 * PG, PG, CCA_VM_WHOLE_MAPS);
    char more[64];
    snprintf(more, sizeof more, ",max_reserved:%zu", 13 * PG);
    cca_allocator *a = allocator(u, more);
    char *l;
    layout(a, u, &l);
    char *r = serve_r(a, u, "13 pages reserved once Z's map goes");
    cr_assert_eq(r, l + PG);
    cr_assert_eq(tu_stats(a).reserved_bytes, 13 * PG);
    tu_free(a, r);
    finish(a, u, l);
}
