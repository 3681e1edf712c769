/*
 * test_plug.c — allocator/src/plug.c: the framework entry points on the
 * simulated device: PyTorch's two signatures, the lazily created per-device
 * table, configuration by call and by environment, every error path (bad
 * device numbers, sizes, pointers, upstream texts and configs, CUDA without
 * a GPU), racing first calls, and reset.
 *
 * The plug state is process-wide; Criterion runs each test in a process of
 * its own, and every test still ends with cca_plug_reset (its fixture).
 */
#include "alloc_test_util.h"

#include <criterion/criterion.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static tu_log_capture logged;

static void setup(void) {
    unsetenv("CCALLOC_PLUG_UPSTREAM");
    unsetenv("CCALLOC_CONF");
    unsetenv("CCALLOC_TRACE");
    memset(&logged, 0, sizeof logged);
    cca_set_log_callback(tu_capture_log, &logged);
}

static void teardown(void) {
    cca_set_log_callback(NULL, NULL);
    if (cca_plug_reset() != CCA_OK)
        abort(); /* .fini cannot cr_assert: a test left live blocks */
}

TestSuite(plug, .init = setup, .fini = teardown);

static cca_allocator *plug_allocator(int device) {
    cca_allocator *a = NULL;
    cr_assert_eq(cca_plug_get_allocator(device, &a), CCA_OK, "%s", cca_last_error());
    cr_assert_not_null(a);
    return a;
}

#define ASSERT_LOGGED(n, needle)                                                                                       \
    do {                                                                                                               \
        cr_assert_eq(logged.lines, (n), "log lines: %d, last '%s'", logged.lines, logged.last);                        \
        cr_assert_not_null(strstr(logged.last, (needle)), "log '%s' should contain '%s'", logged.last, (needle));      \
    } while (0)

/* ---- the ordinary path -------------------------------------------------------- */

Test(plug, alloc_free_through_the_device_allocator) {
    cr_assert_eq(cca_plug_configure("host:64M", NULL), CCA_OK, "%s", cca_last_error());
    void *p = cca_plug_alloc(1000, 0, NULL);
    cr_assert_not_null(p, "%s", cca_last_error());
    cr_assert_eq((uintptr_t)p % CCA_ALIGNMENT, 0);
    memset(p, 0xab, 1000); /* real, writable memory */
    cca_allocator *a = plug_allocator(0);
    cr_assert_eq(plug_allocator(0), a, "one allocator per device, the same every time");
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.allocated_bytes, 1024); /* 1000 rounded up to 512 */
    cr_assert_eq(s.requested_bytes, 1000);
    cr_assert_eq(s.reserved_bytes, 2 * MiB); /* one small segment */
    cr_assert_eq(s.alloc_calls, 1);
    cca_plug_free(p, 1000, 0, NULL);
    s = tu_stats(a);
    cr_assert_eq(s.allocated_bytes, 0);
    cr_assert_eq(s.free_calls, 1);
    cr_assert_eq(s.reserved_bytes, 2 * MiB, "a free caches the segment");
    cr_assert_eq(logged.lines, 0, "nothing logged on the ordinary path: '%s'", logged.last);
    tu_check(a);
}

/* Classic segments (expandable:0): the device's bytes are whole segments. */
Test(plug, empty_cache_through_get_allocator_gives_everything_back) {
    cr_assert_eq(cca_plug_configure("host:64M", "expandable:0"), CCA_OK);
    void *p = cca_plug_alloc(5 * MiB, 0, NULL);
    void *q = cca_plug_alloc(16 * MiB, 0, NULL); /* more than the 15M left in the medium segment */
    cr_assert(p && q);
    cca_plug_free(p, 5 * MiB, 0, NULL);
    cca_plug_free(q, 16 * MiB, 0, NULL);
    cca_upstream *u = NULL;
    cr_assert_eq(cca_plug_get_upstream(0, &u), CCA_OK);
    cr_assert_eq(tu_upstream_stats(u).bytes_in_use, 36 * MiB); /* a 20M medium + a 16M large segment */
    cca_release_report r;
    cr_assert_eq(cca_empty_cache(plug_allocator(0), &r), CCA_OK);
    cr_assert_eq(r.bytes_released, 36 * MiB);
    cr_assert_eq(r.segments_released, 2);
    cr_assert_eq(r.bytes_still_reserved, 0);
    cr_assert_eq(tu_upstream_stats(u).bytes_in_use, 0, "the simulated device holds nothing");
    size_t free_bytes = 0, total = 0;
    cr_assert_eq(cca_upstream_mem_info(u, &free_bytes, &total), CCA_OK);
    cr_assert_eq(total, 64 * MiB);
    cr_assert_eq(free_bytes, 64 * MiB);
}

/* The default, expandable segments: every page mapped and every range
 * reserved goes back. */
Test(plug, empty_cache_through_get_allocator_gives_everything_back_expandable) {
    cr_assert_eq(cca_plug_configure("host:64M", NULL), CCA_OK);
    void *p = cca_plug_alloc(5 * MiB, 0, NULL);
    void *q = cca_plug_alloc(16 * MiB, 0, NULL);
    cr_assert(p && q);
    cca_plug_free(p, 5 * MiB, 0, NULL);
    cca_plug_free(q, 16 * MiB, 0, NULL);
    cca_upstream *u = NULL;
    cr_assert_eq(cca_plug_get_upstream(0, &u), CCA_OK);
    cca_stats s = tu_stats(plug_allocator(0));
    cr_assert_gt(s.expandable_segments, 0);
    cr_assert_eq(s.segments, s.expandable_segments);
    cr_assert_geq(s.reserved_bytes, 21 * MiB);
    cr_assert_eq(tu_upstream_stats(u).bytes_in_use, s.reserved_bytes);
    cr_assert_eq(tu_upstream_stats(u).vm_mapped_bytes, s.mapped_bytes);
    cca_release_report r;
    cr_assert_eq(cca_empty_cache(plug_allocator(0), &r), CCA_OK);
    cr_assert_eq(r.bytes_released, s.reserved_bytes);
    cr_assert_eq(r.bytes_still_reserved, 0);
    cca_upstream_stats us = tu_upstream_stats(u);
    cr_assert_eq(us.bytes_in_use, 0, "the simulated device holds nothing");
    cr_assert_eq(us.vm_mapped_bytes, 0);
    cr_assert_eq(us.vm_reserved_bytes, 0);
    size_t free_bytes = 0, total = 0;
    cr_assert_eq(cca_upstream_mem_info(u, &free_bytes, &total), CCA_OK);
    cr_assert_eq(total, 64 * MiB);
    cr_assert_eq(free_bytes, 64 * MiB);
}

/* The stream reaches cca_alloc: a block freed on stream s is reused by the
 * next request on s, never by one on the default stream. */
Test(plug, stream_is_passed_through) {
    cr_assert_eq(cca_plug_configure("host:64M", NULL), CCA_OK);
    void *s = (void *)(uintptr_t)0x5000;
    void *p = cca_plug_alloc(4096, 0, s);
    cr_assert_not_null(p);
    cca_plug_free(p, 4096, 0, s);
    void *q = cca_plug_alloc(4096, 0, NULL);
    cr_assert_not_null(q);
    cr_assert_neq(q, p, "the default stream must not take stream s's cached block");
    void *r = cca_plug_alloc(4096, 0, s);
    cr_assert_eq(r, p, "stream s reuses its own block");
    cr_assert_eq(tu_stats(plug_allocator(0)).segments, 2, "one small segment per stream");
    cca_plug_free(q, 4096, 0, NULL);
    cca_plug_free(r, 4096, 0, s);
}

Test(plug, config_from_configure_and_from_ccalloc_conf) {
    cr_assert_eq(cca_plug_configure("host:64M", "max_reserved:4M"), CCA_OK);
    cca_config c;
    cr_assert_eq(cca_get_config(plug_allocator(0), &c), CCA_OK);
    cr_assert_eq(c.max_reserved, 4 * MiB);
    cr_assert_null(cca_plug_alloc(6 * MiB, 0, NULL), "over max_reserved");
    cr_assert_eq(cca_plug_reset(), CCA_OK);

    setenv("CCALLOC_PLUG_UPSTREAM", "host:32M", 1);
    setenv("CCALLOC_CONF", "small_segment:4M", 1);
    cr_assert_eq(cca_get_config(plug_allocator(0), &c), CCA_OK);
    cr_assert_eq(c.small_segment, 4 * MiB, "CCALLOC_CONF applies when configure gave no conf");
    size_t free_bytes = 0, total = 0;
    cca_upstream *u = NULL;
    cr_assert_eq(cca_plug_get_upstream(0, &u), CCA_OK);
    cr_assert_eq(cca_upstream_mem_info(u, &free_bytes, &total), CCA_OK);
    cr_assert_eq(total, 32 * MiB, "CCALLOC_PLUG_UPSTREAM's capacity");
}

/* Without cca_plug_configure each device reads CCALLOC_PLUG_UPSTREAM and
 * CCALLOC_CONF when it is made (ccalloc.h): a device made after the
 * environment changed follows the new values, the ones made before keep
 * theirs. */
Test(plug, each_device_reads_the_environment_when_it_is_made) {
    setenv("CCALLOC_PLUG_UPSTREAM", "host:32M:1", 1);
    setenv("CCALLOC_CONF", "small_segment:4M", 1);
    cca_allocator *a0 = plug_allocator(0);
    cr_assert_null(cca_plug_alloc(4096, 1, NULL), "device 1 is past host:32M:1's count");
    setenv("CCALLOC_PLUG_UPSTREAM", "host:16M:3", 1);
    setenv("CCALLOC_CONF", "small_segment:8M", 1);
    cr_assert_null(cca_plug_alloc(4096, 1, NULL), "a failed device stays failed");
    cca_allocator *a2 = plug_allocator(2);
    cca_config c;
    size_t free_bytes = 0, total = 0;
    cca_upstream *u = NULL;
    cr_assert_eq(cca_get_config(a0, &c), CCA_OK);
    cr_assert_eq(c.small_segment, 4 * MiB);
    cr_assert_eq(cca_plug_get_upstream(0, &u), CCA_OK);
    cr_assert_eq(cca_upstream_mem_info(u, &free_bytes, &total), CCA_OK);
    cr_assert_eq(total, 32 * MiB);
    cr_assert_eq(cca_get_config(a2, &c), CCA_OK);
    cr_assert_eq(c.small_segment, 8 * MiB);
    cr_assert_eq(cca_plug_get_upstream(2, &u), CCA_OK);
    cr_assert_eq(cca_upstream_mem_info(u, &free_bytes, &total), CCA_OK);
    cr_assert_eq(total, 16 * MiB);
}

Test(plug, configure_wins_over_the_environment) {
    setenv("CCALLOC_PLUG_UPSTREAM", "host:32M", 1);
    setenv("CCALLOC_CONF", "small_segment:4M", 1);
    cr_assert_eq(cca_plug_configure("host:16M", "small_segment:8M"), CCA_OK);
    cca_config c;
    cr_assert_eq(cca_get_config(plug_allocator(0), &c), CCA_OK);
    cr_assert_eq(c.small_segment, 8 * MiB);
    size_t free_bytes = 0, total = 0;
    cca_upstream *u = NULL;
    cr_assert_eq(cca_plug_get_upstream(0, &u), CCA_OK);
    cr_assert_eq(cca_upstream_mem_info(u, &free_bytes, &total), CCA_OK);
    cr_assert_eq(total, 16 * MiB);
}

Test(plug, host_devices_are_separate) {
    cr_assert_eq(cca_plug_configure("host:16M:2", NULL), CCA_OK);
    void *p0 = cca_plug_alloc(4096, 0, NULL);
    void *p1 = cca_plug_alloc(4096, 1, NULL);
    cr_assert(p0 && p1);
    cca_allocator *a0 = plug_allocator(0), *a1 = plug_allocator(1);
    cr_assert_neq(a0, a1);
    cca_upstream *u0 = NULL, *u1 = NULL;
    cr_assert_eq(cca_plug_get_upstream(0, &u0), CCA_OK);
    cr_assert_eq(cca_plug_get_upstream(1, &u1), CCA_OK);
    cr_assert_neq(u0, u1, "a simulated device each");
    cr_assert_eq(tu_upstream_stats(u0).bytes_in_use, 2 * MiB);
    cr_assert_eq(tu_upstream_stats(u1).bytes_in_use, 2 * MiB);

    /* device 1's block freed as device 0's: refused, logged, both intact */
    cca_stats before0 = tu_stats(a0), before1 = tu_stats(a1);
    cca_plug_free(p1, 4096, 0, NULL);
    ASSERT_LOGGED(1, "CCA_ERR_INVALID_POINTER");
    cr_assert_not_null(strstr(logged.last, "device 0"), "%s", logged.last);
    tu_assert_intact(a0, &before0, "wrong device");
    tu_assert_intact(a1, &before1, "wrong device");
    cca_plug_free(p1, 4096, 1, NULL);
    cca_plug_free(p0, 4096, 0, NULL);
    cr_assert_eq(tu_stats(a0).allocated_bytes + tu_stats(a1).allocated_bytes, 0);

    /* device 2 of two: refused when named, logged once, sticky */
    cr_assert_null(cca_plug_alloc(4096, 2, NULL));
    ASSERT_LOGGED(2, "simulated device 2 not in [0, 2)");
    cr_assert_null(cca_plug_alloc(4096, 2, NULL));
    cr_assert_eq(logged.lines, 2, "a failed device is logged once");
    cca_allocator *a = (cca_allocator *)1;
    cr_assert_eq(cca_plug_get_allocator(2, &a), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_null(a);
    cr_assert_not_null(strstr(cca_last_error(), "simulated device 2 not in [0, 2)"), "%s", cca_last_error());
}

/* ---- sizes --------------------------------------------------------------------- */

Test(plug, size_zero_is_null_and_creates_nothing) {
    cr_assert_eq(cca_plug_configure("host:16M", NULL), CCA_OK);
    cca_clear_error();
    cr_assert_null(cca_plug_alloc(0, 0, NULL));
    cr_assert_str_empty(cca_last_error(), "size 0 is not a failure");
    cr_assert_eq(logged.lines, 0);
    /* nothing was created: configure is still allowed */
    cr_assert_eq(cca_plug_configure("host:8M", NULL), CCA_OK, "%s", cca_last_error());
    cca_plug_free(NULL, 0, 0, NULL); /* what newer PyTorch calls for an empty tensor */
    cr_assert_eq(logged.lines, 0);
    cr_assert_eq(tu_stats(plug_allocator(0)).alloc_calls, 0);
}

/* ccalloc.h: a device out of range is refused at any size, size 0
 * included: NULL, the message set and one log line each time. */
Test(plug, size_zero_on_a_device_out_of_range_is_refused) {
    cr_assert_eq(cca_plug_configure("host:16M", NULL), CCA_OK);
    const int bad[] = {-1, CCA_PLUG_MAX_DEVICES};
    for (int i = 0; i < 2; i++) {
        cca_clear_error();
        cr_assert_null(cca_plug_alloc(0, bad[i], NULL));
        char want[64];
        snprintf(want, sizeof want, "cca_plug_alloc: device %d not in [0, 64)", bad[i]);
        cr_assert_str_eq(cca_last_error(), want);
        ASSERT_LOGGED(i + 1, want);
    }
    /* nothing was created: configure is still allowed */
    cr_assert_eq(cca_plug_configure("host:8M", NULL), CCA_OK, "%s", cca_last_error());
}

Test(plug, out_of_memory_is_null_and_logged_once) {
    cr_assert_eq(cca_plug_configure("host:8M", NULL), CCA_OK);
    void *keep = cca_plug_alloc(1024, 0, NULL);
    cr_assert_not_null(keep);
    cr_assert_null(cca_plug_alloc(16 * MiB, 0, NULL));
    cr_assert_not_null(strstr(cca_last_error(), "never succeed"), "%s", cca_last_error());
    ASSERT_LOGGED(1, "16.00 MiB"); /* the allocator's one OOM line, not a second from the plug */
    cr_assert_null(cca_plug_alloc(7 * MiB, 0, NULL), "7M does not fit beside the 2M small segment");
    cr_assert_eq(logged.lines, 2);
    cca_stats s = tu_stats(plug_allocator(0));
    cr_assert_eq(s.ooms, 2);
    cr_assert_eq(s.allocated_bytes, 1024, "the live block is untouched");
    void *p = cca_plug_alloc(4 * MiB, 0, NULL);
    cr_assert_not_null(p, "a request that fits still succeeds after an OOM");
    cca_plug_free(p, 4 * MiB, 0, NULL);
    cca_plug_free(keep, 1024, 0, NULL);
}

/* ccalloc.h: an OOM's message is cca_alloc's own, not prefixed with the
 * plug's "cca_plug_alloc of N bytes" (every other failure's is), and its one
 * log line is the allocator's: none with log_oom:0. */
Test(plug, out_of_memory_keeps_the_allocators_message_and_its_log_rule) {
    const char *confs[] = {NULL, "log_oom:0"};
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(cca_plug_reset(), CCA_OK);
        logged.lines = 0;
        cr_assert_eq(cca_plug_configure("host:8M", confs[i]), CCA_OK);
        cca_allocator *a = plug_allocator(0);
        void *direct = NULL;
        cr_assert_eq(cca_alloc(a, 16 * MiB, NULL, &direct), CCA_ERR_OUT_OF_MEMORY);
        char want[1024];
        snprintf(want, sizeof want, "%s", cca_last_error());
        int lines = logged.lines;
        cr_assert_eq(lines, i == 0 ? 1 : 0, "log_oom %s: %d lines", confs[i] ? "0" : "1", lines);
        cr_assert_null(cca_plug_alloc(16 * MiB, 0, NULL));
        cr_assert_str_eq(cca_last_error(), want, "the plug's OOM message is cca_alloc's");
        cr_assert_eq(logged.lines, 2 * lines, "one line per OOM, the allocator's, or none");
        tu_check(a);
    }
}

Test(plug, size_that_overflows_rounding_is_null_and_logged) {
    cr_assert_eq(cca_plug_configure("host:8M", NULL), CCA_OK);
    cr_assert_null(cca_plug_alloc(SIZE_MAX, 0, NULL));
    ASSERT_LOGGED(1, "cca_plug_alloc of 18446744073709551615 bytes on device 0");
    cr_assert_null(cca_plug_alloc(SIZE_MAX - 100, 0, NULL));
    cr_assert_eq(logged.lines, 2);
    tu_check(plug_allocator(0));
}

/* ---- device numbers -------------------------------------------------------------- */

Test(plug, bad_device_numbers_are_refused_and_logged) {
    cr_assert_eq(cca_plug_configure("host:8M", NULL), CCA_OK);
    const int bad[] = {-1, -64, INT_MIN, CCA_PLUG_MAX_DEVICES, CCA_PLUG_MAX_DEVICES + 1, 1000, INT_MAX};
    int n = (int)(sizeof bad / sizeof bad[0]);
    for (int i = 0; i < n; i++) {
        cr_assert_null(cca_plug_alloc(4096, bad[i], NULL), "device %d", bad[i]);
        char want[64];
        snprintf(want, sizeof want, "device %d not in [0, %d)", bad[i], CCA_PLUG_MAX_DEVICES);
        ASSERT_LOGGED(2 * i + 1, want);
        cr_assert_not_null(strstr(cca_last_error(), want), "%s", cca_last_error());
        cca_plug_free((void *)(uintptr_t)0x1000, 4096, bad[i], NULL);
        ASSERT_LOGGED(2 * i + 2, want);
        cca_allocator *a = (cca_allocator *)1;
        cr_assert_eq(cca_plug_get_allocator(bad[i], &a), CCA_ERR_INVALID_ARGUMENT);
        cr_assert_null(a);
        cca_upstream *u = (cca_upstream *)1;
        cr_assert_eq(cca_plug_get_upstream(bad[i], &u), CCA_ERR_INVALID_ARGUMENT);
        cr_assert_null(u);
    }
    cr_assert_eq(cca_plug_configure("host:4M", NULL), CCA_OK, "bad devices create nothing");
    cr_assert_eq(cca_plug_get_allocator(0, NULL), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_plug_get_upstream(0, NULL), CCA_ERR_INVALID_ARGUMENT);
}

/* The default upstream is the CUDA device: without a GPU (or built without
 * CUDA) that is NULL with the reason, never a simulated device. */
Test(plug, cuda_without_a_gpu_is_null_with_the_reason) {
    cca_upstream *probe = NULL;
    if (cca_upstream_cuda_create(0, &probe) == CCA_OK) {
        cca_upstream_destroy(probe);
        cr_skip_test("a GPU is present: this test is for machines without one");
    }
    cr_assert_null(cca_plug_alloc(4096, 0, NULL));
    ASSERT_LOGGED(1, "CCA_ERR_NO_DEVICE");
    cr_assert_not_null(strstr(logged.last, "device 0: cuda"), "%s", logged.last);
    cr_assert_null(cca_plug_alloc(4096, 0, NULL));
    cr_assert_eq(logged.lines, 1, "logged once");
    cr_assert_not_null(strstr(cca_last_error(), "cuda"), "the reason is retrievable: %s", cca_last_error());
    cca_allocator *a = (cca_allocator *)1;
    cr_assert_eq(cca_plug_get_allocator(0, &a), CCA_ERR_NO_DEVICE);
    cr_assert_null(a);
    cr_assert_eq(cca_plug_configure("host:8M", NULL), CCA_ERR_INVALID_ARGUMENT, "too late: device 0 was tried");
    cr_assert_eq(cca_plug_reset(), CCA_OK);
    cr_assert_eq(cca_plug_configure("host:8M", NULL), CCA_OK, "after a reset");
    void *p = cca_plug_alloc(4096, 0, NULL);
    cr_assert_not_null(p);
    cca_plug_free(p, 4096, 0, NULL);

    cr_assert_eq(cca_plug_reset(), CCA_OK);
    setenv("CCALLOC_PLUG_UPSTREAM", "cuda", 1);
    cr_assert_null(cca_plug_alloc(4096, 3, NULL));
    cr_assert_eq(cca_plug_get_allocator(3, &a), CCA_ERR_NO_DEVICE);
}

/* ---- pointers ------------------------------------------------------------------- */

Test(plug, free_null_is_a_no_op) {
    cr_assert_eq(cca_plug_configure("host:8M", NULL), CCA_OK);
    void *p = cca_plug_alloc(4096, 0, NULL);
    cca_stats before = tu_stats(plug_allocator(0));
    cca_plug_free(NULL, 4096, 0, NULL);
    cca_plug_free(NULL, 0, -1, NULL); /* even with a bad device */
    cca_plug_free(NULL, 0, 5, NULL);  /* or one never created */
    cr_assert_eq(logged.lines, 0);
    tu_assert_intact(plug_allocator(0), &before, "free(NULL)");
    cca_plug_free(p, 4096, 0, NULL);
}

Test(plug, double_free_and_foreign_pointers_change_nothing) {
    cr_assert_eq(cca_plug_configure("host:8M", NULL), CCA_OK);
    void *p = cca_plug_alloc(4096, 0, NULL);
    void *keep = cca_plug_alloc(8192, 0, NULL);
    cr_assert(p && keep);
    cca_allocator *a = plug_allocator(0);
    cca_plug_free(p, 4096, 0, NULL);
    cca_stats before = tu_stats(a);

    cca_plug_free(p, 4096, 0, NULL);
    ASSERT_LOGGED(1, "double free");
    cr_assert_not_null(strstr(logged.last, "cca_plug_free on device 0"), "%s", logged.last);
    tu_assert_intact(a, &before, "double free");

    int on_stack;
    cca_plug_free(&on_stack, 4, 0, NULL);
    ASSERT_LOGGED(2, "CCA_ERR_INVALID_POINTER");
    tu_assert_intact(a, &before, "foreign pointer");

    void *heap = malloc(64);
    cca_plug_free(heap, 64, 0, NULL);
    ASSERT_LOGGED(3, "CCA_ERR_INVALID_POINTER");
    free(heap);

    cca_plug_free((char *)keep + 512, 512, 0, NULL);
    ASSERT_LOGGED(4, "interior");
    tu_assert_intact(a, &before, "interior pointer");

    cca_plug_free(keep, 8192, 7, NULL); /* a device that has no allocator */
    ASSERT_LOGGED(5, "device 7 has no allocator");
    tu_assert_intact(a, &before, "device without an allocator");
    cca_plug_free(keep, 8192, 0, NULL);
    cr_assert_eq(logged.lines, 5);
    cr_assert_eq(tu_stats(a).allocated_bytes, 0);
}

/* ---- configuration texts ------------------------------------------------------------ */

Test(plug, hostile_upstream_texts_are_refused) {
    const char *bad[] = {"",
                         "gpu",
                         "CUDA",
                         "cuda:0",
                         "cuda ",
                         " host",
                         "hostile",
                         "host:",
                         "host:0",
                         "host:1",    /* below any host page: a device that could hold nothing */
                         "host:4095", /* (test_upstream_host.c: the least capacity is the page) */
                         "host:1:2",
                         "host:-1",
                         "host:abc",
                         "host:1G:",
                         "host:1G:0",
                         "host:1G:65",
                         "host:1G:-1",
                         "host:1G:1:1",
                         "host:1G:x",
                         "host:1G: 1",
                         "host:1G:+1",
                         "host:1G:99999999999999999999",
                         "host:1G,devices:2",
                         "host:99999999999T",
                         "cuda:",
                         "cuda:vm_granularity",
                         "cuda:vm_granularity=",
                         "cuda:vm_granularity=0",
                         "cuda:vm_granularity=3M",
                         "cuda:vm_granularity=256",
                         "cuda:vm_granularity=2G",
                         "cuda:vm_granularity=2.0000001M",
                         "cuda:vm_granularity=4096.5",
                         "cuda:vm_granularity=8M:1",
                         "cuda:vm_granularity=-8M",
                         "cuda:vm_granularity= 8M",
                         "cuda:page=8M",
                         "cuda:VM_GRANULARITY=8M",
                         "cuda:8M",
                         "cuda:vm_backing",
                         "cuda:vm_backing=",
                         "cuda:vm_backing=whole",
                         "cuda:vm_backing=WHOLE_MAPS",
                         "cuda:vm_backing=whole-maps",
                         "cuda:vm_backing=1",
                         "cuda:vm_backing=pages ",
                         "cuda:vm_backing=whole_maps,",
                         "cuda:vm_backing=whole_maps,,vm_granularity=8M",
                         "cuda:,vm_backing=pages",
                         "cuda:vm_backing=pages,vm_backing=pages",
                         "cuda:host_memory",
                         "cuda:host_memory=",
                         "cuda:host_memory=pageable",
                         "cuda:host_memory=PINNED",
                         "cuda:host_memory=1",
                         "cuda:host_memory=registered,host_memory=registered",
                         "cuda:host_memory=pinned,host_memory=registered",
                         "cuda:vm_backing=pages,host_memory=registered,vm_backing=pages",
                         "cuda:host_memory=registered,",
                         "cuda:vm_backing=pages,vm_backing=whole_maps",
                         "cuda:vm_granularity=8M,vm_granularity=8M",
                         "cuda:vm_granularity=8M,",
                         "cuda:vm_granularity=8M,vm_backing=",
                         "cuda:vm_granularity=,vm_backing=pages",
                         "cuda:vm_granularity=8M,vm_backing=whole_maps,extra=1",
                         "cuda:vm_granularity=8M,vm_backing=whole_maps:1",
                         "cuda:vm_granularity=8M;vm_backing=whole_maps",
                         "cuda:vm_backing=whole_maps vm_granularity=8M",
                         "cuda:=whole_maps",
                         "cuda:vm_backing==whole_maps",
                         "cuda:vm_granularity=3M,vm_backing=pages",
                         "host:8M,vm_backing=whole_maps",
                         "host:vm_backing=whole_maps"};
    cr_assert_eq(cca_plug_configure("host:8M", "max_reserved:4M"), CCA_OK);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(cca_plug_configure(bad[i], NULL), CCA_ERR_CONFIG, "'%s' accepted", bad[i]);
        cr_assert_not_null(strstr(cca_last_error(), "cca_plug_configure: upstream"), "%s", cca_last_error());
        if (strncmp(bad[i], "cuda", 4) == 0)
            cr_assert_not_null(strstr(cca_last_error(),
                                      "cuda[:KEY=VALUE[,KEY=VALUE]] with keys vm_granularity=SIZE, "
                                      "vm_backing=pages|whole_maps and host_memory=pinned|registered, "
                                      "each at most once"),
                               "'%s': the message gives the accepted form: %s", bad[i], cca_last_error());
    }
    char longer[4096];
    memset(longer, 'h', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    cr_assert_eq(cca_plug_configure(longer, NULL), CCA_ERR_CONFIG);
    cr_assert_not_null(strstr(cca_last_error(), "longer than"), "%s", cca_last_error());
    char least[96];
    snprintf(least, sizeof least, "capacity '1' is below the %zu-byte host page", tu_page_size());
    cr_assert_eq(cca_plug_configure("host:1", NULL), CCA_ERR_CONFIG);
    cr_assert_not_null(strstr(cca_last_error(), least), "the message names the least capacity: %s", cca_last_error());
    /* nothing changed: the first configure is still in force */
    cca_config c;
    cr_assert_eq(cca_get_config(plug_allocator(0), &c), CCA_OK);
    cr_assert_eq(c.max_reserved, 4 * MiB);
    cr_assert_eq(logged.lines, 0, "configure reports, it does not log");
}

Test(plug, good_upstream_texts) {
    const struct {
        const char *text;
        size_t capacity;
    } good[] = {{"host", GiB}, {"host:512M", 512 * MiB}, {"host:1.5M", 3 * MiB / 2}, {"host:64M:64", 64 * MiB}};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        cr_assert_eq(cca_plug_configure(good[i].text, NULL), CCA_OK, "'%s': %s", good[i].text, cca_last_error());
        cca_upstream *u = NULL;
        cr_assert_eq(cca_plug_get_upstream(0, &u), CCA_OK);
        size_t free_bytes = 0, total = 0;
        cr_assert_eq(cca_upstream_mem_info(u, &free_bytes, &total), CCA_OK);
        cr_assert_geq(total, good[i].capacity, "'%s'", good[i].text); /* rounded up to the host page */
        cr_assert_lt(total, good[i].capacity + tu_page_size(), "'%s'", good[i].text);
        cr_assert_eq(cca_plug_reset(), CCA_OK);
    }
    cr_assert_eq(cca_plug_configure("host:4M:64", NULL), CCA_OK);
    cr_assert_not_null(plug_allocator(63), "device 63 of 64");
    /* the CUDA device with larger pages: accepted; what it gives depends on
     * the machine (no GPU: the device fails with CCA_ERR_NO_DEVICE; a GPU:
     * its upstream's granularity is the one asked for) */
    cr_assert_eq(cca_plug_reset(), CCA_OK);
    cr_assert_eq(cca_plug_configure("cuda:vm_granularity=8M", NULL), CCA_OK, "%s", cca_last_error());
    cca_upstream *u = NULL;
    cca_status st = cca_plug_get_upstream(0, &u);
    if (st == CCA_OK && cca_upstream_has_vm(u)) {
        size_t g = 0;
        cr_assert_eq(cca_upstream_vm_granularity(u, &g), CCA_OK);
        cr_assert_eq(g, 8 * MiB);
    } else if (st != CCA_OK) {
        cr_assert_eq(st, CCA_ERR_NO_DEVICE, "%s", cca_last_error());
    }
    /* the backing, alone or with a page, either order: accepted; the
     * upstream says its backing where there is one (tests/
     * test_cuda_double_whole_maps.c checks it reaches the driver) */
    static const struct {
        const char *text;
        int backing;
    } backed[] = {{"cuda:vm_backing=pages", CCA_VM_PAGES},
                  {"cuda:vm_backing=whole_maps", CCA_VM_WHOLE_MAPS},
                  {"cuda:vm_granularity=32M,vm_backing=whole_maps", CCA_VM_WHOLE_MAPS},
                  {"cuda:vm_backing=whole_maps,vm_granularity=32M", CCA_VM_WHOLE_MAPS},
                  {"cuda:vm_granularity=8M,vm_backing=pages", CCA_VM_PAGES}};
    for (size_t i = 0; i < sizeof backed / sizeof *backed; i++) {
        cr_assert_eq(cca_plug_reset(), CCA_OK);
        cr_assert_eq(cca_plug_configure(backed[i].text, NULL), CCA_OK, "'%s': %s", backed[i].text, cca_last_error());
        st = cca_plug_get_upstream(0, &u);
        if (st == CCA_OK && cca_upstream_has_vm(u))
            cr_assert_eq(cca_upstream_vm_backing(u), backed[i].backing, "'%s'", backed[i].text);
        else if (st != CCA_OK)
            cr_assert_eq(st, CCA_ERR_NO_DEVICE, "'%s': %s", backed[i].text, cca_last_error());
    }
}

/* Every number of the upstream text is decimal, leading zeros allowed, as
 * every number of the library's texts (sizes, config values, ccrun's
 * counts): "010" devices are ten (not octal eight), "02" two; a zero
 * count stays refused however it is written. */
Test(plug, numbers_in_the_upstream_text_are_decimal_with_any_leading_zeros) {
    size_t P = tu_page_size();
    const struct {
        const char *text;
        size_t capacity; /* of device 0 */
        int devices;
    } good[] = {{"host:0512M", 512 * MiB, 1}, {"host:001.5M", 3 * MiB / 2, 1}, {"host:4M:02", 4 * MiB, 2},
                {"host:4M:010", 4 * MiB, 10}, {"host:4M:0064", 4 * MiB, 64},   {"host:004M:01", 4 * MiB, 1}};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        cr_assert_eq(cca_plug_configure(good[i].text, NULL), CCA_OK, "'%s': %s", good[i].text, cca_last_error());
        cca_upstream *u = NULL;
        cr_assert_eq(cca_plug_get_upstream(good[i].devices - 1, &u), CCA_OK, "'%s': the last device: %s", good[i].text,
                     cca_last_error());
        cr_assert_eq(cca_plug_get_upstream(0, &u), CCA_OK);
        size_t free_bytes = 0, total = 0;
        cr_assert_eq(cca_upstream_mem_info(u, &free_bytes, &total), CCA_OK);
        cr_assert_eq(total, good[i].capacity, "'%s'", good[i].text);
        if (good[i].devices < CCA_PLUG_MAX_DEVICES) {
            cr_assert_eq(cca_plug_get_upstream(good[i].devices, &u), CCA_ERR_INVALID_ARGUMENT,
                         "'%s': one device past the count", good[i].text);
            cr_assert_not_null(strstr(cca_last_error(), "not in [0, "), "%s", cca_last_error());
        }
        cr_assert_eq(cca_plug_reset(), CCA_OK);
    }
    /* the page, with zeros before it: the least capacity */
    char text[64];
    snprintf(text, sizeof text, "host:000%zu", P);
    cr_assert_eq(cca_plug_configure(text, NULL), CCA_OK, "'%s': %s", text, cca_last_error());
    const char *bad[] = {"host:4M:00", "host:4M:000", "host:4M:065", "host:4M:0065", "host:00"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert_eq(cca_plug_configure(bad[i], NULL), CCA_ERR_CONFIG, "'%s' accepted", bad[i]);
    /* the CUDA page: 08M is 8M (accepted), 03M is 3M (not a power of two) */
    cr_assert_eq(cca_plug_configure("cuda:vm_granularity=08M", NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_plug_configure("cuda:vm_granularity=03M", NULL), CCA_ERR_CONFIG);
    cr_assert_not_null(strstr(cca_last_error(), "vm_granularity '03M'"), "%s", cca_last_error());
}

Test(plug, hostile_environment_upstream_fails_every_device_once) {
    setenv("CCALLOC_PLUG_UPSTREAM", "host:lots", 1);
    cr_assert_null(cca_plug_alloc(4096, 0, NULL));
    ASSERT_LOGGED(1, "CCALLOC_PLUG_UPSTREAM: upstream 'host': capacity 'lots'");
    cr_assert_null(cca_plug_alloc(4096, 0, NULL));
    cr_assert_eq(logged.lines, 1);
    cca_allocator *a = NULL;
    cr_assert_eq(cca_plug_get_allocator(0, &a), CCA_ERR_CONFIG);
    cr_assert_not_null(strstr(cca_last_error(), "capacity 'lots'"), "%s", cca_last_error());
    cr_assert_null(cca_plug_alloc(4096, 1, NULL));
    cr_assert_eq(logged.lines, 2, "each device logs its own failure once");
}

Test(plug, hostile_conf_texts) {
    const char *bad[] = {"policy:bogus", "max_reserved:lots",
                         "nokey:1",      "small_max:2G",
                         "small_max:4M", "policy:greedy,greedy_fraction:1.5",
                         "max_split:1M", "policy"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert_eq(cca_plug_configure("host:8M", bad[i]), CCA_ERR_CONFIG, "'%s': %s", bad[i], cca_last_error());
    /* a bad CCALLOC_CONF is logged and the defaults kept (as cca_create does) */
    setenv("CCALLOC_CONF", "policy:bogus", 1);
    cr_assert_eq(cca_plug_configure("host:8M", NULL), CCA_OK);
    void *p = cca_plug_alloc(4096, 0, NULL);
    cr_assert_not_null(p);
    ASSERT_LOGGED(1, "using the defaults");
    cca_config c, d;
    cca_config_default(&d);
    cr_assert_eq(cca_get_config(plug_allocator(0), &c), CCA_OK);
    cr_assert_eq(memcmp(&c, &d, sizeof c), 0);
    cca_plug_free(p, 4096, 0, NULL);
}

/* "Replaces any earlier configure", and a refused one changes nothing
 * (CCA_ERR_CONFIG, a config text cca_config_validate refuses included);
 * configure(NULL, NULL) goes back to the environment, as at load. */
Test(plug, configure_replaces_the_last_one_and_a_refused_one_changes_nothing) {
    cr_assert_eq(cca_plug_configure("host:8M", "max_reserved:4M"), CCA_OK);
    cr_assert_eq(cca_plug_configure("host:16M:2", "max_reserved:6M"), CCA_OK);
    cr_assert_eq(cca_plug_configure("host:8M", "small_max:4M"), CCA_ERR_CONFIG, "small_max above small_segment");
    cr_assert_eq(cca_plug_configure("host:8M:0", NULL), CCA_ERR_CONFIG);
    void *p = cca_plug_alloc(4096, 1, NULL);
    cr_assert_not_null(p, "host:16M:2 is in force: %s", cca_last_error());
    cca_config c;
    cr_assert_eq(cca_get_config(plug_allocator(1), &c), CCA_OK);
    cr_assert_eq(c.max_reserved, 6 * MiB);
    cca_plug_free(p, 4096, 1, NULL);
    cr_assert_eq(cca_plug_reset(), CCA_OK);
    setenv("CCALLOC_PLUG_UPSTREAM", "host:8M", 1);
    setenv("CCALLOC_CONF", "max_reserved:2M", 1);
    cr_assert_eq(cca_plug_configure("host:16M:2", "max_reserved:6M"), CCA_OK);
    cr_assert_eq(cca_plug_configure(NULL, NULL), CCA_OK);
    cr_assert_eq(cca_get_config(plug_allocator(0), &c), CCA_OK);
    cr_assert_eq(c.max_reserved, 2 * MiB, "CCALLOC_CONF in force");
    cca_allocator *a = (cca_allocator *)1;
    cr_assert_eq(cca_plug_get_allocator(1, &a), CCA_ERR_INVALID_ARGUMENT, "CCALLOC_PLUG_UPSTREAM's one device");
    cr_assert_null(a);
    cr_assert_not_null(strstr(cca_last_error(), "simulated device 1 not in [0, 1)"), "%s", cca_last_error());
}

/* A capacity the parser takes but the simulated device refuses (more than
 * half the address space): a creation failure, sticky like any other. */
Test(plug, host_capacity_too_large_is_a_creation_failure) {
    cr_assert_eq(cca_plug_configure("host:9000000T", NULL), CCA_OK);
    cr_assert_null(cca_plug_alloc(4096, 0, NULL));
    ASSERT_LOGGED(1, "CCA_ERR_INVALID_ARGUMENT");
    cca_allocator *a = NULL;
    cr_assert_eq(cca_plug_get_allocator(0, &a), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(logged.lines, 1);
}

Test(plug, greedy_policy_through_configure) {
    cr_assert_eq(cca_plug_configure("host:8M", "policy:greedy,greedy_bytes:4M"), CCA_OK);
    cca_upstream *u = NULL;
    cr_assert_eq(cca_plug_get_upstream(0, &u), CCA_OK);
    cr_assert_eq(tu_upstream_stats(u).bytes_in_use, 4 * MiB, "the arena is reserved at creation");
    cr_assert_null(cca_plug_alloc(5 * MiB, 0, NULL));
    void *p = cca_plug_alloc(3 * MiB, 0, NULL);
    cr_assert_not_null(p);
    cca_plug_free(p, 3 * MiB, 0, NULL);
}

Test(plug, greedy_arena_refused_is_a_sticky_creation_failure) {
    cr_assert_eq(cca_plug_configure("host:8M", "policy:greedy,greedy_bytes:16M"), CCA_OK);
    cr_assert_null(cca_plug_alloc(4096, 0, NULL));
    ASSERT_LOGGED(1, "CCA_ERR_OUT_OF_MEMORY");
    cr_assert_not_null(strstr(logged.last, "until cca_plug_reset"), "%s", logged.last);
    cca_allocator *a = NULL;
    cr_assert_eq(cca_plug_get_allocator(0, &a), CCA_ERR_OUT_OF_MEMORY);
}

/* ---- configure after use, reset -------------------------------------------------------- */

Test(plug, configure_after_first_use_is_refused) {
    cr_assert_eq(cca_plug_configure("host:8M", "max_reserved:6M"), CCA_OK);
    void *p = cca_plug_alloc(4096, 0, NULL);
    cr_assert_not_null(p);
    cr_assert_eq(cca_plug_configure("host:16M", NULL), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_not_null(strstr(cca_last_error(), "already in use"), "%s", cca_last_error());
    cca_config c;
    cr_assert_eq(cca_get_config(plug_allocator(0), &c), CCA_OK);
    cr_assert_eq(c.max_reserved, 6 * MiB, "the config in force is unchanged");
    cca_plug_free(p, 4096, 0, NULL);
}

Test(plug, reset_refuses_while_blocks_live) {
    cr_assert_eq(cca_plug_configure("host:8M:2", NULL), CCA_OK);
    void *p0 = cca_plug_alloc(4096, 0, NULL);
    void *p1 = cca_plug_alloc(4096, 1, NULL);
    cca_plug_free(p0, 4096, 0, NULL);
    cca_allocator *a1 = plug_allocator(1);
    cr_assert_eq(cca_plug_reset(), CCA_ERR_LIVE_BLOCKS);
    cr_assert_not_null(strstr(cca_last_error(), "device 1 has 1 live blocks (4096 bytes)"), "%s", cca_last_error());
    cr_assert_eq(plug_allocator(1), a1, "nothing was reset");
    memset(p1, 1, 4096); /* still mapped */
    cca_plug_free(p1, 4096, 1, NULL);
    cca_upstream *u0 = NULL;
    cr_assert_eq(cca_plug_get_upstream(0, &u0), CCA_OK);
    cr_assert_eq(cca_plug_reset(), CCA_OK, "%s", cca_last_error());
    /* forgotten: the environment decides again */
    setenv("CCALLOC_PLUG_UPSTREAM", "host:2M", 1);
    cca_upstream *u = NULL;
    cr_assert_eq(cca_plug_get_upstream(0, &u), CCA_OK);
    size_t free_bytes = 0, total = 0;
    cr_assert_eq(cca_upstream_mem_info(u, &free_bytes, &total), CCA_OK);
    cr_assert_eq(total, 2 * MiB);
    cr_assert_null(cca_plug_alloc(4096, 1, NULL), "one device now");
}

/* ---- threads ----------------------------------------------------------------------------- */

#define RACERS 8
#define ROUNDS 2000

typedef struct racer {
    pthread_barrier_t *go;
    int device;
    int id;
    const char *error;
} racer;

static void *race(void *arg) {
    racer *r = arg;
    pthread_barrier_wait(r->go);
    void *s = (void *)(uintptr_t)(0x1000 * (r->id % 3)); /* three streams, NULL among them */
    for (int i = 0; i < ROUNDS && !r->error; i++) {
        size_t size = 512 + (size_t)((i * 7919 + r->id * 104729) % (256 * 1024));
        unsigned char *p = cca_plug_alloc(size, r->device, s);
        if (!p) {
            r->error = "cca_plug_alloc returned NULL";
            break;
        }
        p[0] = (unsigned char)r->id;
        p[size - 1] = (unsigned char)i;
        if (p[0] != (unsigned char)r->id || p[size - 1] != (unsigned char)i)
            r->error = "block overwritten";
        cca_plug_free(p, size, r->device, s);
    }
    return NULL;
}

static void run_racers(int devices) {
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, RACERS);
    pthread_t t[RACERS];
    racer r[RACERS];
    for (int i = 0; i < RACERS; i++) {
        r[i] = (racer){.go = &go, .device = i % devices, .id = i};
        pthread_create(&t[i], NULL, race, &r[i]);
    }
    for (int i = 0; i < RACERS; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&go);
    for (int i = 0; i < RACERS; i++)
        cr_assert_null(r[i].error, "racer %d: %s", i, r[i].error);
}

/* Racing first calls create one allocator per device: if a second one were
 * made, the calls that went to it would be missing from these counts. */
Test(plug, racing_first_calls_create_one_allocator) {
    setenv("CCALLOC_PLUG_UPSTREAM", "host:256M", 1);
    run_racers(1);
    cca_stats s = tu_stats(plug_allocator(0));
    cr_assert_eq(s.alloc_calls, (uint64_t)RACERS * ROUNDS);
    cr_assert_eq(s.free_calls, (uint64_t)RACERS * ROUNDS);
    cr_assert_eq(s.allocated_bytes, 0);
    cca_upstream *u = NULL;
    cr_assert_eq(cca_plug_get_upstream(0, &u), CCA_OK);
    cr_assert_eq(tu_upstream_stats(u).bytes_in_use, s.reserved_bytes, "one allocator on the device");
    cr_assert_eq(logged.lines, 0, "%s", logged.last);
    tu_check(plug_allocator(0));
}

Test(plug, racing_first_calls_on_several_devices) {
    setenv("CCALLOC_PLUG_UPSTREAM", "host:128M:4", 1);
    run_racers(4);
    for (int d = 0; d < 4; d++) {
        cca_stats s = tu_stats(plug_allocator(d));
        cr_assert_eq(s.alloc_calls, (uint64_t)(RACERS / 4) * ROUNDS, "device %d", d);
        cr_assert_eq(s.allocated_bytes, 0);
    }
}

/* Racing first calls on a device whose creation fails: it is tried once,
 * logged once, and every racer gets NULL with the same reason; a device
 * beside it works. */
typedef struct failing_racer {
    pthread_barrier_t *go;
    int id;
    bool got_null, same_reason;
    void *good;
} failing_racer;

static void *race_failing(void *arg) {
    failing_racer *r = arg;
    pthread_barrier_wait(r->go);
    for (int i = 0; i < 50; i++) {
        r->got_null = cca_plug_alloc(4096, 5, NULL) == NULL;
        r->same_reason = strstr(cca_last_error(), "cca_plug_alloc: device 5: simulated device 5 not in [0, 2)") != NULL;
        if (!r->got_null || !r->same_reason)
            break;
    }
    r->good = cca_plug_alloc(4096, r->id % 2, NULL);
    return NULL;
}

Test(plug, racing_first_calls_on_a_failing_device_try_and_log_once) {
    setenv("CCALLOC_PLUG_UPSTREAM", "host:64M:2", 1);
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, RACERS);
    pthread_t t[RACERS];
    failing_racer r[RACERS];
    for (int i = 0; i < RACERS; i++) {
        r[i] = (failing_racer){.go = &go, .id = i};
        pthread_create(&t[i], NULL, race_failing, &r[i]);
    }
    for (int i = 0; i < RACERS; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&go);
    for (int i = 0; i < RACERS; i++) {
        cr_assert(r[i].got_null && r[i].same_reason, "racer %d", i);
        cr_assert_not_null(r[i].good, "racer %d: the working device", i);
        cca_plug_free(r[i].good, 4096, i % 2, NULL);
    }
    ASSERT_LOGGED(1, "device 5");
    for (int d = 0; d < 2; d++)
        cr_assert_eq(tu_stats(plug_allocator(d)).alloc_calls, RACERS / 2);
}

/* ---- log callbacks that call back into the library ------------------------------------- */

/* A sink may call the library: unregister itself, or make calls that log
 * (whose lines then go to stderr, not back into the sink), even when the
 * line comes from a device's creation (under the plug's lock). A hang here
 * is a deadlock: the suite's timeout fails it. */
static atomic_int sink_calls;

static void sink_unregisters(void *user, const char *line) {
    (void)user;
    (void)line;
    atomic_fetch_add(&sink_calls, 1);
    cca_set_log_callback(NULL, NULL);
}

Test(plug, log_sink_may_unregister_itself, .timeout = 20) {
    cca_set_log_callback(sink_unregisters, NULL);
    cr_assert_null(cca_plug_alloc(4096, -1, NULL)); /* one line: the sink, which unregisters */
    cr_assert_null(cca_plug_alloc(4096, -2, NULL)); /* the default sink: stderr */
    cr_assert_eq(atomic_load(&sink_calls), 1);
}

static void sink_calls_the_plug(void *user, const char *line) {
    tu_capture_log(user, line);
    atomic_fetch_add(&sink_calls, 1);
    /* the device whose creation failed (this line's cause): the call needs
     * the plug's lock, and fails again without a line; a bad device logs,
     * from inside the sink: to stderr */
    cr_assert_null(cca_plug_alloc(4096, 0, NULL));
    cr_assert_null(cca_plug_alloc(4096, -1, NULL));
    cca_set_log_callback(sink_calls_the_plug, user); /* and re-registering is allowed */
}

Test(plug, log_sink_may_call_the_plug_during_a_creation_failure, .timeout = 20) {
    cr_assert_eq(cca_plug_configure("host:9000000T", NULL), CCA_OK);
    cca_set_log_callback(sink_calls_the_plug, &logged);
    cr_assert_null(cca_plug_alloc(4096, 0, NULL));
    cr_assert_eq(atomic_load(&sink_calls), 1, "the sink's own call logged to stderr, not to the sink");
    cr_assert_not_null(strstr(logged.last, "until cca_plug_reset"), "%s", logged.last);
    cr_assert_null(cca_plug_alloc(4096, -1, NULL)); /* the re-registered sink, once */
    cr_assert_eq(atomic_load(&sink_calls), 2);
}

/* A sink whose own call fails (or clears the message) leaves the message of
 * the call that logged: cca_last_error() after a NULL names its cause. */
static void sink_fails_a_call(void *user, const char *line) {
    tu_capture_log(user, line);
    cr_assert_eq(cca_free(NULL, (void *)0x1000), CCA_ERR_INVALID_ARGUMENT);
    cca_clear_error();
}

Test(plug, log_sink_calls_keep_the_message_of_the_call_that_logged, .timeout = 20) {
    cr_assert_eq(cca_plug_configure("host:8M", NULL), CCA_OK);
    cca_set_log_callback(sink_fails_a_call, &logged);
    cr_assert_null(cca_plug_alloc(64u << 20, 0, NULL)); /* the allocator's OOM line */
    cr_assert_eq(logged.lines, 1);
    cr_assert_eq(strncmp(cca_last_error(), "cca_alloc: 67108864 bytes need", 30), 0, "%s", cca_last_error());
    cr_assert_null(cca_plug_alloc(4096, -1, NULL)); /* the plug's own line */
    cr_assert_eq(logged.lines, 2);
    cr_assert_str_eq(cca_last_error(), "cca_plug_alloc: device -1 not in [0, 64)");
}

/* Two threads: one's sink waits for a device the other is creating, whose
 * creation logs. Lines from a creation are emitted after the plug's lock
 * is released, so neither waits for the other. */
static atomic_int sink_entered;

static void sink_waits_for_device_0(void *user, const char *line) {
    (void)user;
    (void)line;
    if (atomic_fetch_add(&sink_entered, 1) == 0) {
        void *p = cca_plug_alloc(4096, 0, NULL); /* device 0: being created by the other thread */
        if (p)
            cca_plug_free(p, 4096, 0, NULL);
    }
}

static void *alloc_on_device_0(void *arg) {
    (void)arg;
    void *p = cca_plug_alloc(4096, 0, NULL);
    if (p)
        cca_plug_free(p, 4096, 0, NULL);
    return NULL;
}

Test(plug, log_sink_and_a_creation_on_two_threads, .timeout = 20) {
    cr_assert_eq(cca_plug_configure("host:64M", NULL), CCA_OK);
    setenv("CCALLOC_CONF", "no_such_option:1", 1); /* a creation logs "using the defaults" */
    cca_set_log_callback(sink_waits_for_device_0, NULL);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, alloc_on_device_0, NULL), 0);
    cr_assert_null(cca_plug_alloc(4096, -1, NULL)); /* this thread's sink runs, and waits for device 0 */
    pthread_join(t, NULL);
    /* the other thread's creation line reached the sink, or stderr if this
     * thread's sink created device 0 itself */
    cr_assert_geq(atomic_load(&sink_entered), 1);
    cca_allocator *a = NULL;
    cr_assert_eq(cca_plug_get_allocator(0, &a), CCA_OK);
}

/* Lines held across a lock (ccai_log_hold) reach the sink at the outermost
 * release, in order; beyond CCAI_LOG_HELD, one line says how many were lost. */
#include "internal.h"

static char held_lines[16][128];
static int held_n;

static void sink_collects(void *user, const char *line) {
    (void)user;
    if (held_n < 16)
        snprintf(held_lines[held_n], sizeof held_lines[0], "%s", line);
    held_n++;
}

Test(plug, held_log_lines_are_written_at_release_and_the_lost_counted) {
    cca_set_log_callback(sink_collects, NULL);
    ccai_log_hold();
    ccai_log_hold(); /* nested: only the outermost release writes */
    for (int i = 0; i < CCAI_LOG_HELD + 3; i++)
        ccai_log("line %d", i);
    ccai_log_release();
    cr_assert_eq(held_n, 0, "nothing written while held");
    ccai_log_release();
    cr_assert_eq(held_n, CCAI_LOG_HELD + 1);
    for (int i = 0; i < CCAI_LOG_HELD; i++) {
        char want[32];
        snprintf(want, sizeof want, "line %d", i);
        cr_assert_str_eq(held_lines[i], want);
    }
    cr_assert_str_eq(held_lines[CCAI_LOG_HELD], "3 more lines were not logged");
    ccai_log("after"); /* not held any more: at once */
    cr_assert_eq(held_n, CCAI_LOG_HELD + 2);
}

/* A held line reaches the sink as a pointer into the thread's queue; a sink
 * that makes a call which holds and logs again (here: a device's creation
 * failing) must not change the line it is reading. Device 0's creation holds
 * one line (a bad CCALLOC_CONF: the defaults are used); the sink, at that
 * line, names device 1, whose creation fails with a line of its own (to
 * stderr: it is logged inside the sink). */
static char sink_seen[256];
static int sink_seen_n;
static bool sink_line_changed;

static void sink_creates_another_device(void *user, const char *line) {
    (void)user;
    char copy[256];
    snprintf(copy, sizeof copy, "%s", line);
    if (sink_seen_n++ == 0)
        cr_assert_null(cca_plug_alloc(4096, 1, NULL)); /* device 1 of 1: its creation fails and logs */
    sink_line_changed |= strcmp(copy, line) != 0;
    snprintf(sink_seen, sizeof sink_seen, "%s", copy);
}

Test(plug, a_sink_that_logs_again_keeps_the_held_line, .timeout = 20) {
    cr_assert_eq(cca_plug_configure("host:64M", NULL), CCA_OK);
    setenv("CCALLOC_CONF", "no_such_option:1", 1);
    cca_set_log_callback(sink_creates_another_device, NULL);
    void *p = cca_plug_alloc(4096, 0, NULL);
    cr_assert_not_null(p, "%s", cca_last_error());
    cr_assert_eq(sink_seen_n, 1, "one line held by device 0's creation");
    cr_assert_not_null(strstr(sink_seen, "no_such_option"), "%s", sink_seen);
    cr_assert_not(sink_line_changed, "the line changed under the sink");
    cca_plug_free(p, 4096, 0, NULL);
}

/* A call that succeeds leaves the caller's message (ccalloc.h: "the message
 * of the last failing call on this thread"), also when it is the first call
 * of a device and the creation met a bad CCALLOC_CONF on the way (logged,
 * the defaults used): a framework reading cca_last_error() after a later
 * NULL from elsewhere must not find the configuration's complaint there. */
Test(plug, a_first_call_that_succeeds_leaves_the_message) {
    cr_assert_eq(cca_plug_configure("host:64M:2", NULL), CCA_OK);
    setenv("CCALLOC_CONF", "no_such_option:1", 1);
    cca_set_error(CCA_ERR_IO, "the caller's own");
    void *p = cca_plug_alloc(4096, 0, NULL);
    cr_assert_not_null(p, "%s", cca_last_error());
    ASSERT_LOGGED(1, "no_such_option");
    cr_assert_str_eq(cca_last_error(), "the caller's own");
    cca_allocator *a = NULL;
    cr_assert_eq(cca_plug_get_allocator(1, &a), CCA_OK);
    cr_assert_eq(logged.lines, 2, "device 1 logged too");
    cr_assert_str_eq(cca_last_error(), "the caller's own");
    cca_plug_free(p, 4096, 0, NULL);
    cr_assert_str_eq(cca_last_error(), "the caller's own");
}

/* ---- fork ------------------------------------------------------------------- */

/* A fork while another thread holds a device's allocator lock: in
 * tests/allocator/unit/test_fork.c (fork.c's handler covers the plug's allocators with
 * every other), fork::a_plug_device_held_by_another_thread. */

/* ---- the thread's current domain (cca_plug_set_domain) ----------------------------------- */

static cca_domain *new_domain(int device, const char *name) {
    cca_domain *d = NULL;
    cr_assert_eq(cca_domain_create(plug_allocator(device), name, &d), CCA_OK, "%s", cca_last_error());
    return d;
}

static cca_domain *domain_of(int device, void *p) {
    cca_domain *d = (cca_domain *)(uintptr_t)1; /* set to NULL or the domain by the call */
    cr_assert_eq(cca_domain_of(plug_allocator(device), p, &d), CCA_OK, "%s", cca_last_error());
    return d;
}

static cca_domain_stats domain_stats(int device, cca_domain *d) {
    cca_domain_stats s;
    cr_assert_eq(cca_get_domain_stats(plug_allocator(device), d, &s), CCA_OK, "%s", cca_last_error());
    return s;
}

static cca_domain *current(int device) {
    cca_domain *d = (cca_domain *)(uintptr_t)1;
    cr_assert_eq(cca_plug_get_domain(device, &d), CCA_OK, "%s", cca_last_error());
    return d;
}

Test(plug, set_domain_routes_this_threads_allocations) {
    cr_assert_eq(cca_plug_configure("host:64M", NULL), CCA_OK);
    cca_domain *a = new_domain(0, "model-a");
    cr_assert_null(current(0), "a thread starts in the default domain");
    cca_domain *prev = (cca_domain *)(uintptr_t)1;
    cr_assert_eq(cca_plug_set_domain(0, a, &prev), CCA_OK, "%s", cca_last_error());
    cr_assert_null(prev);
    cr_assert_eq(current(0), a);
    void *p = cca_plug_alloc(3 * MiB, 0, NULL);
    cr_assert_not_null(p, "%s", cca_last_error());
    cr_assert_eq(domain_of(0, p), a);
    cr_assert_eq(cca_plug_set_domain(0, NULL, &prev), CCA_OK);
    cr_assert_eq(prev, a, "previous: the domain set before");
    void *q = cca_plug_alloc(4096, 0, NULL);
    cr_assert_null(domain_of(0, q), "the default domain again");
    cca_domain_stats sa = domain_stats(0, a), sd = domain_stats(0, NULL);
    cr_assert_eq(sa.allocated_bytes, 3 * MiB);
    cr_assert_eq(sa.alloc_calls, 1);
    cr_assert_eq(sd.allocated_bytes, 4096);
    cr_assert_eq(sd.alloc_calls, 1);
    /* a free finds its block's domain whatever the thread's current one */
    cr_assert_eq(cca_plug_set_domain(0, a, NULL), CCA_OK);
    cca_plug_free(q, 4096, 0, NULL);
    cr_assert_eq(cca_plug_set_domain(0, NULL, NULL), CCA_OK);
    cca_plug_free(p, 3 * MiB, 0, NULL);
    cr_assert_eq(domain_stats(0, a).allocated_bytes, 0);
    cr_assert_eq(domain_stats(0, NULL).allocated_bytes, 0);
    cr_assert_eq(logged.lines, 0, "%s", logged.last);
    tu_check(plug_allocator(0));
}

Test(plug, set_domain_is_per_device) {
    cr_assert_eq(cca_plug_configure("host:64M:2", NULL), CCA_OK);
    cca_domain *a = new_domain(0, "a");
    plug_allocator(1);
    cr_assert_eq(cca_plug_set_domain(0, a, NULL), CCA_OK);
    void *p0 = cca_plug_alloc(4096, 0, NULL), *p1 = cca_plug_alloc(4096, 1, NULL);
    cr_assert(p0 && p1);
    cr_assert_eq(domain_of(0, p0), a);
    cr_assert_null(domain_of(1, p1), "device 1 has its own current domain: the default");
    cr_assert_null(current(1));
    cca_plug_free(p0, 4096, 0, NULL);
    cca_plug_free(p1, 4096, 1, NULL);
}

/* Two threads, two domains, allocating at the same time: each thread's
 * blocks land in its own domain. Then A's memory goes back whole: the
 * device's count falls by exactly A's reserved bytes, while B's blocks stay
 * where they were with their contents. */
#define DOMAIN_BLOCKS 24

typedef struct domain_worker {
    pthread_barrier_t *go;
    cca_domain *domain;
    uint64_t seed;
    void *blocks[DOMAIN_BLOCKS];
    size_t sizes[DOMAIN_BLOCKS];
    const char *error;
} domain_worker;

static void *domain_work(void *arg) {
    domain_worker *w = arg;
    if (cca_plug_set_domain(0, w->domain, NULL) != CCA_OK) {
        w->error = "cca_plug_set_domain refused";
        return NULL;
    }
    pthread_barrier_wait(w->go);
    for (int i = 0; i < DOMAIN_BLOCKS; i++) {
        w->sizes[i] = 4096 + (size_t)i * 97 * 1024 + (w->seed % 7) * 512;
        w->blocks[i] = cca_plug_alloc(w->sizes[i], 0, (void *)(uintptr_t)(0x100 * (i % 2)));
        if (!w->blocks[i]) {
            w->error = "cca_plug_alloc returned NULL";
            return NULL;
        }
        tu_fill(w->blocks[i], w->sizes[i], w->seed + (uint64_t)i);
    }
    return NULL;
}

Test(plug, two_threads_two_domains_and_one_released) {
    cr_assert_eq(cca_plug_configure("host:256M", NULL), CCA_OK);
    cca_domain *da = new_domain(0, "model-a"), *db = new_domain(0, "model-b");
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, 2);
    domain_worker wa = {.go = &go, .domain = da, .seed = 11}, wb = {.go = &go, .domain = db, .seed = 23};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, domain_work, &wa);
    pthread_create(&tb, NULL, domain_work, &wb);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    pthread_barrier_destroy(&go);
    cr_assert_null(wa.error, "%s", wa.error);
    cr_assert_null(wb.error, "%s", wb.error);
    cr_assert_null(current(0), "the main thread's domain is its own: still the default");
    size_t bytes_a = 0, bytes_b = 0;
    for (int i = 0; i < DOMAIN_BLOCKS; i++) {
        cr_assert_eq(domain_of(0, wa.blocks[i]), da, "thread A's block %d", i);
        cr_assert_eq(domain_of(0, wb.blocks[i]), db, "thread B's block %d", i);
        bytes_a += tu_block_size(plug_allocator(0), wa.blocks[i]);
        bytes_b += tu_block_size(plug_allocator(0), wb.blocks[i]);
    }
    cca_domain_stats sa = domain_stats(0, da), sb = domain_stats(0, db);
    cr_assert_eq(sa.allocated_bytes, bytes_a);
    cr_assert_eq(sb.allocated_bytes, bytes_b);
    cr_assert_eq(sa.alloc_calls, DOMAIN_BLOCKS);
    cr_assert_eq(sb.alloc_calls, DOMAIN_BLOCKS);
    cr_assert_eq(domain_stats(0, NULL).alloc_calls, 0, "nothing in the default domain");
    tu_check(plug_allocator(0));

    /* A unloads: its blocks freed (from this thread), its memory released */
    cca_upstream *u = NULL;
    cr_assert_eq(cca_plug_get_upstream(0, &u), CCA_OK);
    size_t device_before = tu_upstream_stats(u).bytes_in_use;
    cr_assert_eq(device_before, sa.reserved_bytes + sb.reserved_bytes);
    for (int i = 0; i < DOMAIN_BLOCKS; i++)
        cca_plug_free(wa.blocks[i], wa.sizes[i], 0, NULL);
    cca_domain_report r = {0};
    cr_assert_eq(cca_domain_release(plug_allocator(0), da, 0, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(r.bytes_released, sa.reserved_bytes);
    cr_assert_eq(r.bytes_still_reserved, 0);
    cr_assert_eq(tu_upstream_stats(u).bytes_in_use, device_before - sa.reserved_bytes,
                 "the device's count falls by exactly A's reserved bytes");
    cca_domain_stats sb2 = domain_stats(0, db);
    cr_assert_eq(sb2.reserved_bytes, sb.reserved_bytes, "B keeps its memory");
    cr_assert_eq(sb2.allocated_bytes, sb.allocated_bytes);
    for (int i = 0; i < DOMAIN_BLOCKS; i++)
        cr_assert(tu_check_fill(wb.blocks[i], wb.sizes[i], wb.seed + (uint64_t)i), "B's block %d kept its bytes", i);
    tu_check(plug_allocator(0));
    for (int i = 0; i < DOMAIN_BLOCKS; i++)
        cca_plug_free(wb.blocks[i], wb.sizes[i], 0, NULL);
    cr_assert_eq(logged.lines, 0, "%s", logged.last);
}

Test(plug, set_domain_errors_change_nothing) {
    cr_assert_eq(cca_plug_configure("host:64M:2", NULL), CCA_OK);
    cca_domain *keep = (cca_domain *)(uintptr_t)1;
    /* a domain before its device's allocator exists: no domain can be its */
    cr_assert_eq(cca_plug_set_domain(0, (cca_domain *)(uintptr_t)0x1234, &keep), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_not_null(strstr(cca_last_error(), "device 0 has no allocator"), "%s", cca_last_error());
    cr_assert_eq(plug_allocator(0) != NULL, true);
    cca_domain *a = new_domain(0, "a"), *other = new_domain(1, "on-1"), *gone = new_domain(0, "gone");
    cr_assert_eq(cca_domain_destroy(plug_allocator(0), gone, 0, NULL), CCA_OK);
    cr_assert_eq(cca_plug_set_domain(0, a, NULL), CCA_OK);
    struct {
        int device;
        cca_domain *d;
        const char *needle;
    } bad[] = {
        {-1, NULL, "device -1 not in [0, 64)"},
        {CCA_PLUG_MAX_DEVICES, a, "device 64 not in [0, 64)"},
        {INT_MIN, NULL, "not in [0, 64)"},
        {0, other, "not one of this allocator's"},  /* device 1's domain on device 0 */
        {0, gone, "not one of this allocator's"},   /* destroyed */
        {0, (cca_domain *)(uintptr_t)0x1234, "not one of this allocator's"}, /* garbage */
        {1, a, "not one of this allocator's"},      /* device 0's domain on device 1 */
        {5, a, "device 5 has no allocator"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cca_clear_error();
        cr_assert_eq(cca_plug_set_domain(bad[i].device, bad[i].d, &keep), CCA_ERR_INVALID_ARGUMENT, "case %zu", i);
        cr_assert_not_null(strstr(cca_last_error(), bad[i].needle), "case %zu: '%s'", i, cca_last_error());
        cr_assert_eq(keep, (cca_domain *)(uintptr_t)1, "case %zu: *previous not written", i);
        cr_assert_eq(current(0), a, "case %zu: the current domain unchanged", i);
    }
    cr_assert_null(current(1));
    cr_assert_eq(cca_plug_get_domain(0, NULL), CCA_ERR_INVALID_ARGUMENT);
    cca_domain *out = (cca_domain *)(uintptr_t)1;
    cr_assert_eq(cca_plug_get_domain(-1, &out), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_null(out);
    cr_assert_eq(cca_plug_get_domain(CCA_PLUG_MAX_DEVICES, &out), CCA_ERR_INVALID_ARGUMENT);
    /* d NULL (the default domain) needs no allocator: set and read on a
     * device that has none, CCA_OK, and none is created (ccalloc.h) */
    cr_assert_eq(cca_plug_set_domain(5, NULL, &keep), CCA_OK, "%s", cca_last_error());
    cr_assert_null(keep);
    out = (cca_domain *)(uintptr_t)1;
    cr_assert_eq(cca_plug_get_domain(5, &out), CCA_OK, "%s", cca_last_error());
    cr_assert_null(out);
    cr_assert_eq(cca_plug_set_domain(5, a, NULL), CCA_ERR_INVALID_ARGUMENT, "still no allocator on device 5");
    void *p = cca_plug_alloc(4096, 0, NULL);
    cr_assert_eq(domain_of(0, p), a, "allocations still go to a");
    cca_plug_free(p, 4096, 0, NULL);
    cr_assert_eq(logged.lines, 0, "a refused set logs nothing: '%s'", logged.last);
}

/* A domain destroyed while it is a thread's current one: that thread's
 * allocations fail (NULL, logged, the reason named) until it sets another. */
Test(plug, a_destroyed_current_domain_fails_allocations_until_set_again) {
    cr_assert_eq(cca_plug_configure("host:64M", NULL), CCA_OK);
    cca_domain *a = new_domain(0, "a");
    cr_assert_eq(cca_plug_set_domain(0, a, NULL), CCA_OK);
    cr_assert_eq(cca_domain_destroy(plug_allocator(0), a, 0, NULL), CCA_OK);
    cr_assert_eq(current(0), a, "still set: the thread's storage is not touched by a destroy");
    cr_assert_null(cca_plug_alloc(4096, 0, NULL));
    ASSERT_LOGGED(1, "in this thread's domain");
    cr_assert_not_null(strstr(cca_last_error(), "not one of this allocator's"), "%s", cca_last_error());
    cr_assert_eq(cca_plug_set_domain(0, a, NULL), CCA_ERR_INVALID_ARGUMENT, "nor can it be set again");
    cr_assert_eq(cca_plug_set_domain(0, NULL, NULL), CCA_OK);
    void *p = cca_plug_alloc(4096, 0, NULL);
    cr_assert_not_null(p, "%s", cca_last_error());
    cca_plug_free(p, 4096, 0, NULL);
}

/* After a reset, the first domain a thread sets (on any device) starts its
 * table afresh: a domain it had set on another device before the reset,
 * gone with its allocator, does not come back as current. */
Test(plug, a_domain_set_after_a_reset_brings_back_none_from_before) {
    cr_assert_eq(cca_plug_configure("host:64M:2", NULL), CCA_OK);
    cr_assert_eq(cca_plug_set_domain(0, new_domain(0, "a"), NULL), CCA_OK);
    cr_assert_eq(cca_plug_reset(), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_plug_configure("host:64M:2", NULL), CCA_OK);
    cca_domain *previous = (cca_domain *)(uintptr_t)1;
    cr_assert_eq(cca_plug_set_domain(1, new_domain(1, "b"), &previous), CCA_OK);
    cr_assert_null(previous, "device 1 had the default");
    cr_assert_null(current(0), "device 0's domain from before the reset");
    void *p = cca_plug_alloc(4096, 0, NULL);
    cr_assert_not_null(p, "%s", cca_last_error());
    cr_assert_null(domain_of(0, p));
    cca_plug_free(p, 4096, 0, NULL);
    cr_assert_eq(logged.lines, 0, "%s", logged.last);
}

/* cca_plug_reset returns every thread's domain to the default, a thread
 * that is not in a call at the time included. */
typedef struct parked {
    pthread_barrier_t *step;
    cca_domain *domain;
    cca_domain *after_reset;
    void *block;
    cca_status set;
} parked;

static void *park_in_domain(void *arg) {
    parked *w = arg;
    w->set = cca_plug_set_domain(0, w->domain, NULL);
    pthread_barrier_wait(w->step); /* 1: set */
    pthread_barrier_wait(w->step); /* 2: the main thread has reset and configured again */
    cca_plug_get_domain(0, &w->after_reset);
    w->block = cca_plug_alloc(4096, 0, NULL);
    return NULL;
}

Test(plug, reset_returns_every_threads_domain_to_the_default) {
    cr_assert_eq(cca_plug_configure("host:64M", NULL), CCA_OK);
    cca_domain *a = new_domain(0, "a");
    cr_assert_eq(cca_plug_set_domain(0, a, NULL), CCA_OK);
    pthread_barrier_t step;
    pthread_barrier_init(&step, NULL, 2);
    parked w = {.step = &step, .domain = a};
    pthread_t t;
    pthread_create(&t, NULL, park_in_domain, &w);
    pthread_barrier_wait(&step);
    cr_assert_eq(w.set, CCA_OK);
    cr_assert_eq(cca_plug_reset(), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_plug_configure("host:64M", NULL), CCA_OK);
    cr_assert_null(current(0), "this thread's");
    pthread_barrier_wait(&step);
    pthread_join(t, NULL);
    pthread_barrier_destroy(&step);
    cr_assert_null(w.after_reset, "the other thread's");
    cr_assert_not_null(w.block, "%s", cca_last_error());
    cr_assert_null(domain_of(0, w.block));
    void *p = cca_plug_alloc(4096, 0, NULL);
    cr_assert_null(domain_of(0, p));
    cca_plug_free(p, 4096, 0, NULL);
    cca_plug_free(w.block, 4096, 0, NULL);
    cr_assert_eq(logged.lines, 0, "%s", logged.last);
}

/* ---- a creation failure's message, whole ---------------------------------------- */

static char whole_line[2048];
static void capture_whole(void *user, const char *line) {
    (void)user;
    snprintf(whole_line, sizeof whole_line, "%s", line);
}

/* A device whose creation failed keeps its reason for every later call
 * ("the same status and message"): every refusal of an upstream text, the
 * longest ones included (up to PLUG_SPEC_MAX characters echoed, the form
 * the "cuda" texts take spelled out), reaches the log line, the first
 * call's message and each later call's whole, as cca_plug_configure says it. */
Test(plug, a_creation_failure_keeps_its_whole_message) {
    char longest[128], long_host[128];
    memset(longest, 'x', sizeof longest - 1);
    memcpy(longest, "cuda", 4); /* "cudaxxx...": 127 characters, echoed */
    longest[sizeof longest - 1] = '\0';
    snprintf(long_host, sizeof long_host, "host:1G:%0119d", 65); /* 127 characters, echoed */
    const char *bad[] = {"cuda:vm_granularity=3M",
                         "cuda:vm_granularity=000000000000000000000000000000000000000000000000000000000000003M",
                         "cuda:vm_backing=pages,vm_backing=pages",
                         "cuda:vm_granularity=2M,vm_backing=pages,host_memory=pinned,nokey=1",
                         "cuda:host_memory=pinned,host_memory=registered",
                         longest,
                         long_host,
                         "host:1.5K",
                         "host:99999999999999999999999999999999999999999999999999999999999999999999999999"};
    cca_set_log_callback(capture_whole, NULL);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(cca_plug_configure(bad[i], NULL), CCA_ERR_CONFIG, "'%s' accepted", bad[i]);
        const char *prefix = "cca_plug_configure: ";
        cr_assert_eq(strncmp(cca_last_error(), prefix, strlen(prefix)), 0, "%s", cca_last_error());
        char reason[1024], want[1100];
        snprintf(reason, sizeof reason, "%s", cca_last_error() + strlen(prefix));
        snprintf(want, sizeof want, "cca_plug_alloc: device 0: CCALLOC_PLUG_UPSTREAM: %s", reason);
        setenv("CCALLOC_PLUG_UPSTREAM", bad[i], 1);
        whole_line[0] = '\0';
        for (int call = 0; call < 2; call++) {
            cr_assert_null(cca_plug_alloc(4096, 0, NULL));
            cr_assert_str_eq(cca_last_error(), want, "'%s', call %d", bad[i], call);
        }
        cr_assert_not_null(strstr(whole_line, want + strlen("cca_plug_alloc: ")), "'%s': log '%s'", bad[i], whole_line);
        cr_assert_not_null(strstr(whole_line, "(CCA_ERR_CONFIG"), "%s", whole_line);
        cca_allocator *a = NULL;
        cr_assert_eq(cca_plug_get_allocator(0, &a), CCA_ERR_CONFIG);
        snprintf(want, sizeof want, "cca_plug_get_allocator: device 0: CCALLOC_PLUG_UPSTREAM: %s", reason);
        cr_assert_str_eq(cca_last_error(), want);
        cr_assert_eq(cca_plug_reset(), CCA_OK, "%s", cca_last_error());
    }
    cca_set_log_callback(tu_capture_log, &logged);
}
