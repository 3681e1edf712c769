/*
 * test_upstream.c — allocator/src/upstream/upstream.c, host.c and the
 * no-GPU side of upstream/cuda.c: the host device's capacity and mem_info,
 * two allocators sharing one device like two tenants, the custom upstream's
 * validation and defaults, and the wrapper's accounting.
 */
#include "internal.h" /* ccai_upstream_set_no_vm_reason: what upstream/cuda.c tells the wrapper */
#include "alloc_test_util.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdlib.h>
#include <string.h>

Test(upstream, host_device_capacity_mem_info_and_accounting) {
    cca_upstream *u = NULL;
    cr_assert_eq(cca_upstream_host_create(10 * MiB, &u), CCA_OK);
    cr_assert_str_eq(cca_upstream_name(u), "host-simulated");
    size_t free_b = 0, total_b = 0;
    cr_assert_eq(cca_upstream_mem_info(u, &free_b, &total_b), CCA_OK);
    cr_assert_eq(free_b, 10 * MiB);
    cr_assert_eq(total_b, 10 * MiB);
    void *p = NULL, *q = NULL, *r = (void *)1;
    cr_assert_eq(cca_upstream_alloc(u, 6 * MiB, &p), CCA_OK);
    cr_assert_eq((uintptr_t)p % CCA_ALIGNMENT, 0);
    memset(p, 0x5a, 6 * MiB); /* real, writable memory */
    cr_assert_eq(cca_upstream_alloc(u, 4 * MiB, &q), CCA_OK, "exactly full");
    cr_assert_eq(cca_upstream_alloc(u, 512, &r), CCA_ERR_OUT_OF_MEMORY);
    cr_assert_null(r);
    cr_assert_eq(cca_upstream_mem_info(u, &free_b, &total_b), CCA_OK);
    cr_assert_eq(free_b, 0);
    cca_upstream_stats s = tu_upstream_stats(u);
    cr_assert_eq(s.bytes_in_use, 10 * MiB);
    cr_assert_eq(s.bytes_in_use_peak, 10 * MiB);
    cr_assert_eq(s.allocations, 2);
    cr_assert_eq(s.alloc_calls, 2);
    cr_assert_eq(s.failed_allocs, 1);
    cr_assert_eq(cca_upstream_free(u, p, 6 * MiB), CCA_OK);
    cr_assert_eq(cca_upstream_free(u, q, 4 * MiB), CCA_OK);
    s = tu_upstream_stats(u);
    cr_assert_eq(s.bytes_in_use, 0);
    cr_assert_eq(s.bytes_in_use_peak, 10 * MiB);
    cr_assert_eq(s.free_calls, 2);
    cr_assert_eq(s.allocations, 0);
    cr_assert_eq(cca_upstream_synchronize(u), CCA_OK);
    cca_upstream_destroy(u);
    cca_upstream_destroy(NULL);
}

Test(upstream, host_device_rejects_bad_arguments) {
    cca_upstream *u = (cca_upstream *)1;
    cr_assert_eq(cca_upstream_host_create(0, &u), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_null(u);
    cr_assert_eq(cca_upstream_host_create(1 * MiB, NULL), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_upstream_host_create(1 * MiB, &u), CCA_OK);
    void *p = (void *)1;
    cr_assert_eq(cca_upstream_alloc(u, 0, &p), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_null(p);
    cr_assert_eq(cca_upstream_alloc(u, 1000, &p), CCA_ERR_INVALID_ARGUMENT, "not a multiple of 512");
    cr_assert_eq(cca_upstream_alloc(u, 512, NULL), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_upstream_alloc(NULL, 512, &p), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_upstream_free(u, NULL, 512), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_upstream_free(NULL, &p, 512), CCA_ERR_INVALID_ARGUMENT);
    size_t f, t;
    cr_assert_eq(cca_upstream_mem_info(NULL, &f, &t), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_upstream_mem_info(u, NULL, &t), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_upstream_synchronize(NULL), CCA_ERR_INVALID_ARGUMENT);
    cca_upstream_stats s;
    cr_assert_eq(cca_upstream_get_stats(NULL, &s), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_upstream_get_stats(u, NULL), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_str_eq(cca_upstream_name(NULL), "(null)");
    /* a free larger than what is in use is refused and not counted */
    void *q;
    cr_assert_eq(cca_upstream_alloc(u, 512, &q), CCA_OK);
    cr_assert_eq(cca_upstream_free(u, q, 1 * MiB), CCA_ERR_UPSTREAM);
    s = tu_upstream_stats(u);
    cr_assert_eq(s.bytes_in_use, 512);
    cr_assert_eq(s.free_calls, 0);
    cr_assert_eq(cca_upstream_free(u, q, 512), CCA_OK);
    cr_assert_eq(s.failed_allocs, 0, "argument errors never reach the device");
    cca_upstream_destroy(u);
}

Test(upstream, two_allocators_share_one_device_like_two_tenants) {
    cca_upstream *dev;
    cr_assert_eq(cca_upstream_host_create(40 * MiB, &dev), CCA_OK);
    /* classic segments: each reserved whole, so the device's free bytes are exact */
    cca_allocator *a1 = tu_allocator(dev, "expandable:0"), *a2 = tu_allocator(dev, "expandable:0");
    void *p = tu_alloc(a1, 4 * MiB, NULL); /* a1 reserves 20M */
    tu_free(a1, p);                        /* ...and keeps it cached */
    size_t free_b, total_b;
    cr_assert_eq(cca_upstream_mem_info(dev, &free_b, &total_b), CCA_OK);
    cr_assert_eq(free_b, 20 * MiB, "a1's cache counts against every tenant");
    /* a2 wants a 30M segment: the device has 20M; a2's retry can only free
     * a2's own cache (empty), so it is an OOM for a2 */
    void *q = (void *)1;
    cca_stats before = tu_stats(a2);
    cr_assert_eq(cca_alloc(a2, 30 * MiB, NULL, &q), CCA_ERR_OUT_OF_MEMORY);
    cr_assert_null(q);
    before.ooms++, before.alloc_retries++;
    tu_assert_intact(a2, &before, "a2 OOM");
    cr_assert_eq(tu_stats(a1).reserved_bytes, 20 * MiB, "a2 cannot release a1's cache");
    /* a1 gives its cache back: now a2 fits */
    cr_assert_eq(cca_empty_cache(a1, NULL), CCA_OK);
    q = tu_alloc(a2, 30 * MiB, NULL);
    cr_assert_eq(cca_upstream_mem_info(dev, &free_b, &total_b), CCA_OK);
    cr_assert_eq(free_b, 10 * MiB);
    cr_assert_eq(total_b, 40 * MiB);
    /* a greedy tenant sizes its arena from what the others left */
    cca_allocator *g = tu_allocator(dev, "expandable:0,policy:greedy,greedy_fraction:0.5");
    cr_assert_eq(tu_stats(g).reserved_bytes, 5 * MiB);
    tu_destroy_clean(g, dev);
    tu_free(a2, q);
    tu_destroy_clean(a2, dev);
    tu_teardown(a1, dev);
}

/* ---- custom upstreams ----------------------------------------------------------------- */

static cca_status dummy_alloc(void *ctx, size_t size, void **ptr) {
    (void)ctx;
    *ptr = aligned_alloc(CCA_ALIGNMENT, size);
    return *ptr ? CCA_OK : CCA_ERR_OUT_OF_MEMORY;
}
static cca_status dummy_free(void *ctx, void *ptr, size_t size) {
    (void)ctx, (void)size;
    free(ptr);
    return CCA_OK;
}
static cca_status null_alloc(void *ctx, size_t size, void **ptr) {
    (void)ctx, (void)size;
    *ptr = NULL;
    return CCA_OK; /* a broken upstream: OK without a pointer */
}
static cca_status dummy_event_record(void *ctx, cca_stream s, void **e) {
    (void)ctx, (void)s;
    *e = NULL;
    return CCA_OK;
}
static int destroyed;
static void count_destroy(void *ctx) {
    *(int *)ctx += 1;
}

Test(upstream, custom_upstream_validation) {
    cca_upstream *u = (cca_upstream *)1;
    cca_upstream_ops ops = {.alloc = dummy_alloc, .free = dummy_free};
    cr_assert_eq(cca_upstream_custom_create(NULL, NULL, &u), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_null(u);
    cr_assert_eq(cca_upstream_custom_create(&ops, NULL, NULL), CCA_ERR_INVALID_ARGUMENT);
    cca_upstream_ops no_alloc = {.free = dummy_free};
    cr_assert_eq(cca_upstream_custom_create(&no_alloc, NULL, &u), CCA_ERR_INVALID_ARGUMENT);
    cca_upstream_ops no_free = {.alloc = dummy_alloc};
    cr_assert_eq(cca_upstream_custom_create(&no_free, NULL, &u), CCA_ERR_INVALID_ARGUMENT);
    cca_upstream_ops half_events = {.alloc = dummy_alloc, .free = dummy_free, .event_record = dummy_event_record};
    cr_assert_eq(cca_upstream_custom_create(&half_events, NULL, &u), CCA_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(cca_last_error(), "event") != NULL, "%s", cca_last_error());
    cr_assert_null(u);
}

Test(upstream, custom_upstream_defaults_and_name) {
    destroyed = 0;
    cca_upstream_ops ops = {.alloc = dummy_alloc, .free = dummy_free, .destroy = count_destroy};
    cca_upstream *u = NULL;
    cr_assert_eq(cca_upstream_custom_create(&ops, &destroyed, &u), CCA_OK);
    ops.alloc = NULL; /* the table was copied */
    cr_assert_str_eq(cca_upstream_name(u), "custom");
    size_t f, t;
    cr_assert_eq(cca_upstream_mem_info(u, &f, &t), CCA_ERR_UPSTREAM, "no mem_info");
    cr_assert_eq(cca_upstream_synchronize(u), CCA_OK, "no synchronize: nothing to wait for");
    /* greedy_fraction needs mem_info; greedy_bytes does not */
    cca_config cfg;
    cca_config_default(&cfg);
    cfg.policy = CCA_POLICY_GREEDY;
    cca_allocator *a = (cca_allocator *)1;
    cr_assert_eq(cca_create(&cfg, u, &a), CCA_ERR_UPSTREAM);
    cr_assert_null(a);
    cr_assert(strstr(cca_last_error(), "greedy_fraction") != NULL, "%s", cca_last_error());
    a = tu_allocator(u, "policy:greedy,greedy_bytes:1M");
    void *p = tu_alloc(a, 1000, NULL);
    tu_free(a, p);
    tu_destroy_clean(a, u);
    cr_assert_eq(destroyed, 0);
    cca_upstream_destroy(u);
    cr_assert_eq(destroyed, 1, "destroy called once");

    char long_name[100];
    memset(long_name, 'x', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    cca_upstream_ops named = {.alloc = dummy_alloc, .free = dummy_free, .name = long_name};
    cr_assert_eq(cca_upstream_custom_create(&named, NULL, &u), CCA_OK);
    long_name[0] = 'y'; /* the name was copied */
    cr_assert_eq(strlen(cca_upstream_name(u)), 31, "names are kept to 31 characters");
    cr_assert_eq(cca_upstream_name(u)[0], 'x');
    cca_upstream_destroy(u);
}

/* An upstream without vm ops whose maker knows why (the CUDA upstream on a
 * driver or device without VMM) says so: cca_upstream_vm_granularity's
 * message carries the reason, and expandable:1 (the default) over it logs
 * one line, once per upstream, naming it and the reason, before falling
 * back to classic segments. One that cannot say is named all the same by
 * cca_upstream_vm_granularity, and logs nothing: an upstream made without
 * vm ops is its maker's choice, not a surprise. */
Test(upstream, an_upstream_without_vm_says_why_and_expandable_logs_it_once) {
    tu_log_capture log = {0};
    cca_set_log_callback(tu_capture_log, &log);
    for (int reason = 0; reason < 2; reason++) {
        cca_upstream_ops ops = {.alloc = dummy_alloc, .free = dummy_free, .name = "novm"};
        cca_upstream *u = NULL;
        cr_assert_eq(cca_upstream_custom_create(&ops, NULL, &u), CCA_OK);
        if (reason)
            ccai_upstream_set_no_vm_reason(u, "device 3 does not support virtual memory management");
        size_t g = 1;
        cr_assert_eq(cca_upstream_vm_granularity(u, &g), CCA_ERR_UPSTREAM);
        cr_assert_eq(g, 0);
        cr_assert(strstr(cca_last_error(), "upstream 'novm' has no virtual-memory operations"), "%s", cca_last_error());
        cr_assert_eq(strstr(cca_last_error(), "device 3 does not support") != NULL, reason, "%s", cca_last_error());
        int before = log.lines;
        cca_allocator *plain = tu_allocator(u, "expandable:0");
        cr_assert_eq(log.lines, before, "expandable:0 asks for nothing: no line (%s)", log.last);
        cca_allocator *a = tu_allocator(u, "expandable:1");
        cr_assert_eq(log.lines, before + reason, "expandable:1 without vm ops is logged where the upstream says why");
        if (reason)
            cr_assert(strstr(log.last, "expandable segments need virtual memory") &&
                          strstr(log.last, "upstream 'novm'") && strstr(log.last, "classic segments") &&
                          strstr(log.last, "device 3 does not support"),
                      "%s", log.last);
        cca_allocator *b = tu_allocator(u, NULL);
        cr_assert_eq(log.lines, before + reason, "once per upstream: %s", log.last);
        cr_assert_eq(tu_stats(b).page_size, 0, "classic segments");
        tu_destroy_clean(b, u);
        tu_destroy_clean(a, u);
        tu_destroy_clean(plain, u);
        cca_upstream_destroy(u);
    }
    cca_set_log_callback(NULL, NULL);
}

Test(upstream, an_upstream_returning_ok_without_a_pointer_is_an_error) {
    cca_upstream_ops ops = {.alloc = null_alloc, .free = dummy_free};
    cca_upstream *u;
    cr_assert_eq(cca_upstream_custom_create(&ops, NULL, &u), CCA_OK);
    void *p = (void *)1;
    cr_assert_eq(cca_upstream_alloc(u, 512, &p), CCA_ERR_UPSTREAM);
    cr_assert_null(p);
    cca_allocator *a = tu_allocator(u, NULL);
    cca_stats before = tu_stats(a);
    cr_assert_eq(cca_alloc(a, 512, NULL, &p), CCA_ERR_UPSTREAM, "not an OOM, no retry");
    tu_assert_intact(a, &before, "upstream error");
    cca_upstream_stats s = tu_upstream_stats(u);
    cr_assert_eq(s.failed_allocs, 2);
    cr_assert_eq(s.bytes_in_use, 0);
    tu_teardown(a, u);
}

Test(upstream, raw_tenant_competes_with_an_allocator) {
    cca_upstream *dev;
    cca_allocator *a;
    tu_host_allocator(32 * MiB, NULL, &dev, &a);
    void *raw;
    cr_assert_eq(cca_upstream_alloc(dev, 16 * MiB, &raw), CCA_OK);
    void *p = tu_alloc(a, 4 * MiB, NULL); /* 20M does not fit in 16M: a 4M segment */
    cr_assert_eq(tu_stats(a).reserved_bytes, 4 * MiB);
    cr_assert_eq(tu_upstream_stats(dev).bytes_in_use, 20 * MiB);
    tu_free(a, p);
    cr_assert_eq(cca_upstream_free(dev, raw, 16 * MiB), CCA_OK);
    tu_teardown(a, dev);
}

Test(upstream, cuda_upstream_without_a_gpu_is_no_device) {
    /* hide any GPU so the answer is the same on every machine */
    cr_assert_eq(setenv("CUDA_VISIBLE_DEVICES", "", 1), 0);
    cca_upstream *u = (cca_upstream *)1;
    cr_assert_eq(cca_upstream_cuda_create(0, &u), CCA_ERR_NO_DEVICE);
    cr_assert_null(u);
    cr_assert(strlen(cca_last_error()) > 0, "cca_last_error says why");
    cr_assert(strstr(cca_last_error(), "cuda") != NULL, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_cuda_create(-1, &u), CCA_ERR_NO_DEVICE);
    cca_status st = cca_upstream_cuda_create(0, NULL);
    cr_assert(st == CCA_ERR_INVALID_ARGUMENT || st == CCA_ERR_NO_DEVICE, "%s", cca_status_string(st));
}

/* ---- messages of failing upstream calls ----------------------------------------------- */

/* An upstream that fails on demand and says nothing (no cca_set_error), or
 * says its own message when `speak` is set. */
typedef struct quiet {
    int fail_alloc, fail_free, fail_sync, fail_mem_info, speak;
} quiet;
static cca_status quiet_alloc(void *ctx, size_t size, void **ptr) {
    quiet *q = ctx;
    if (q->fail_alloc)
        return q->speak ? cca_set_error(CCA_ERR_UPSTREAM, "quiet: device lost at %zu bytes", size) : CCA_ERR_UPSTREAM;
    return dummy_alloc(ctx, size, ptr);
}
static cca_status quiet_free(void *ctx, void *ptr, size_t size) {
    return ((quiet *)ctx)->fail_free ? CCA_ERR_UPSTREAM : dummy_free(ctx, ptr, size);
}
static cca_status quiet_sync(void *ctx) {
    return ((quiet *)ctx)->fail_sync ? CCA_ERR_UPSTREAM : CCA_OK;
}
static cca_status quiet_mem_info(void *ctx, size_t *f, size_t *t) {
    *f = *t = 64 * MiB;
    return ((quiet *)ctx)->fail_mem_info ? CCA_ERR_UPSTREAM : CCA_OK;
}

/* Leave a message on this thread that no upstream failure should show. */
static void stale_message(cca_allocator *a) {
    int x;
    cr_assert_eq(cca_free(a, &x), CCA_ERR_INVALID_POINTER);
    cr_assert(strlen(cca_last_error()) > 0);
}

Test(upstream, a_silent_upstream_failure_gets_a_message_naming_it) {
    quiet q = {0};
    cca_upstream_ops ops = {.alloc = quiet_alloc,
                            .free = quiet_free,
                            .synchronize = quiet_sync,
                            .mem_info = quiet_mem_info,
                            .name = "quiet"};
    cca_upstream *u;
    cr_assert_eq(cca_upstream_custom_create(&ops, &q, &u), CCA_OK);
    cca_allocator *a = tu_allocator(u, NULL);

    /* alloc: the failed cca_alloc names the upstream, the operation, the
     * size and the status, not the previous call's message */
    stale_message(a);
    char stale[512];
    snprintf(stale, sizeof stale, "%s", cca_last_error());
    q.fail_alloc = 1;
    void *p = (void *)1;
    cr_assert_eq(cca_alloc(a, 4096, NULL, &p), CCA_ERR_UPSTREAM);
    const char *msg = cca_last_error();
    cr_assert(strstr(msg, stale) == NULL, "stale message: %s", msg);
    cr_assert(strstr(msg, "'quiet'") && strstr(msg, "alloc") && strstr(msg, "2097152") &&
                  strstr(msg, "CCA_ERR_UPSTREAM"),
              "%s", msg);
    /* an upstream that sets its own message keeps it, after the name of
     * the call that failed */
    q.speak = 1;
    stale_message(a);
    cr_assert_eq(cca_alloc(a, 4096, NULL, &p), CCA_ERR_UPSTREAM);
    cr_assert_str_eq(cca_last_error(), "cca_alloc: quiet: device lost at 2097152 bytes");
    q.fail_alloc = q.speak = 0;

    /* free: trim's refused-free message names the upstream free */
    p = tu_alloc(a, 4096, NULL);
    tu_free(a, p);
    stale_message(a);
    snprintf(stale, sizeof stale, "%s", cca_last_error());
    q.fail_free = 1;
    cca_release_report r;
    cr_assert_eq(cca_trim(a, 0, &r), CCA_ERR_UPSTREAM);
    msg = cca_last_error();
    cr_assert(strstr(msg, stale) == NULL, "stale message: %s", msg);
    cr_assert(strstr(msg, "'quiet'") && strstr(msg, "free") && strstr(msg, "2097152"), "%s", msg);
    q.fail_free = 0;

    /* synchronize, inside trim */
    stale_message(a);
    snprintf(stale, sizeof stale, "%s", cca_last_error());
    q.fail_sync = 1;
    cr_assert_eq(cca_trim(a, 0, &r), CCA_ERR_UPSTREAM);
    msg = cca_last_error();
    cr_assert(strstr(msg, stale) == NULL, "stale message: %s", msg);
    cr_assert(strstr(msg, "'quiet'") && strstr(msg, "synchronize"), "%s", msg);
    q.fail_sync = 0;

    /* a successful upstream call leaves the last failure's message alone */
    stale_message(a);
    snprintf(stale, sizeof stale, "%s", cca_last_error());
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    cr_assert_str_eq(cca_last_error(), stale);
    tu_destroy_clean(a, u);

    /* mem_info, inside the greedy cca_create message */
    cca_config cfg;
    cca_config_default(&cfg);
    cfg.policy = CCA_POLICY_GREEDY;
    a = tu_allocator(u, NULL);
    stale_message(a);
    snprintf(stale, sizeof stale, "%s", cca_last_error());
    tu_destroy_clean(a, u);
    q.fail_mem_info = 1;
    cca_allocator *g = (cca_allocator *)1;
    cr_assert_eq(cca_create(&cfg, u, &g), CCA_ERR_UPSTREAM);
    msg = cca_last_error();
    cr_assert(strstr(msg, stale) == NULL, "stale message: %s", msg);
    cr_assert(strstr(msg, "greedy") && strstr(msg, "'quiet'") && strstr(msg, "mem_info"), "%s", msg);
    /* and the greedy arena's alloc */
    q.fail_mem_info = 0;
    q.fail_alloc = 1;
    cr_assert_eq(cca_create(&cfg, u, &g), CCA_ERR_UPSTREAM);
    msg = cca_last_error();
    cr_assert(strstr(msg, "greedy") && strstr(msg, "'quiet'") && strstr(msg, "alloc"), "%s", msg);
    cca_upstream_destroy(u);
}

Test(upstream, set_error_returns_its_status) {
    cr_assert_eq(cca_set_error(CCA_ERR_NOT_READY, "event %d", 7), CCA_ERR_NOT_READY);
    cr_assert_str_eq(cca_last_error(), "event 7");
    cr_assert_eq(cca_set_error(CCA_ERR_UPSTREAM, "wrapped: %s", cca_last_error()), CCA_ERR_UPSTREAM);
    cr_assert_str_eq(cca_last_error(), "wrapped: event 7", "the previous message may be an argument");
}

/* The layers above (the runtime's ccr_fail_prefix) add context in front of
 * the one per-thread message; a long message loses its end, not the prefix. */
Test(upstream, error_prefix_and_clear) {
    cca_set_error(CCA_ERR_UPSTREAM, "device lost");
    cr_assert_eq(cca_error_prefix(CCA_ERR_IO, "tensor '%s'", "0.weight"), CCA_ERR_IO);
    cr_assert_eq(cca_error_prefix(CCA_ERR_IO, "model.bin"), CCA_ERR_IO);
    cr_assert_str_eq(cca_last_error(), "model.bin: tensor '0.weight': device lost");
    char big[2000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    cca_set_error(CCA_ERR_UPSTREAM, "%s", big);
    cr_assert_eq(strlen(cca_last_error()), 1023, "messages are kept to 1023 characters");
    cr_assert_str_eq(cca_last_error() + 1019, "x...", "and a cut one says so");
    cca_error_prefix(CCA_ERR_UPSTREAM, "outer");
    cr_assert_eq(strncmp(cca_last_error(), "outer: xxx", 10), 0, "%.20s", cca_last_error());
    cr_assert_eq(strlen(cca_last_error()), 1023);
    cr_assert_str_eq(cca_last_error() + 1019, "x...");
    /* a message that fits before the prefix but not after it */
    cca_set_error(CCA_ERR_UPSTREAM, "%.1020s", big);
    cca_error_prefix(CCA_ERR_UPSTREAM, "outer");
    cr_assert_eq(strlen(cca_last_error()), 1023);
    cr_assert_str_eq(cca_last_error() + 1019, "x...");
    /* a prefix as long as the buffer: the old message is gone, marked */
    cca_set_error(CCA_ERR_UPSTREAM, "inner");
    cca_error_prefix(CCA_ERR_UPSTREAM, "%.1022s", big);
    cr_assert_eq(strlen(cca_last_error()), 1023);
    cr_assert_str_eq(cca_last_error() + 1019, "x...");
    /* exactly full: nothing is cut, nothing is marked */
    cca_set_error(CCA_ERR_UPSTREAM, "%.1016s", big); /* 7 + 1016 = 1023 */
    cca_error_prefix(CCA_ERR_UPSTREAM, "outer");
    cr_assert_eq(strlen(cca_last_error()), 1023);
    cr_assert_str_eq(cca_last_error() + 1019, "xxxx");
    cr_assert_eq(strncmp(cca_last_error(), "outer: xxx", 10), 0);
    cca_clear_error();
    cr_assert_str_eq(cca_last_error(), "");
}

/* ---- what a custom upstream hands back must be usable ------------------------------ */

/* A device over the host one whose allocations come back `skew` bytes past
 * what the host device gave (0 = as given); frees undo the skew. */
typedef struct skewed {
    cca_upstream *inner;
    size_t skew, frees;
} skewed;

static cca_status sk_alloc(void *ctx, size_t size, void **p) {
    skewed *k = ctx;
    cca_status st = cca_upstream_alloc(k->inner, size, p);
    if (st == CCA_OK)
        *p = (char *)*p + k->skew;
    return st;
}

static cca_status sk_free(void *ctx, void *p, size_t size) {
    skewed *k = ctx;
    k->frees++;
    return cca_upstream_free(k->inner, (char *)p - k->skew, size);
}

Test(upstream, misaligned_pointers_are_refused_and_given_back) {
    skewed k = {.skew = 16};
    cr_assert_eq(cca_upstream_host_create(64 * MiB, &k.inner), CCA_OK);
    cca_upstream_ops ops = {.alloc = sk_alloc, .free = sk_free, .name = "skewed"};
    cca_upstream *u = NULL;
    cr_assert_eq(cca_upstream_custom_create(&ops, &k, &u), CCA_OK);
    void *p = (void *)1;
    cr_assert_eq(cca_upstream_alloc(u, 4 * MiB, &p), CCA_ERR_UPSTREAM);
    cr_assert_null(p);
    cr_assert_not_null(strstr(cca_last_error(), "not a multiple of 256"), "%s", cca_last_error());
    cr_assert_eq(k.frees, 1, "the unusable allocation was given back");
    cr_assert_eq(tu_upstream_stats(k.inner).bytes_in_use, 0);
    cca_upstream_stats s = tu_upstream_stats(u);
    cr_assert_eq(s.bytes_in_use, 0);
    cr_assert_eq(s.failed_allocs, 1);
    /* through an allocator: no misaligned block is ever handed out */
    cca_allocator *a = tu_allocator(u, "log_oom:0");
    cr_assert_eq(cca_alloc(a, 1000, NULL, &p), CCA_ERR_UPSTREAM, "%s", cca_last_error());
    cr_assert_null(p);
    tu_check(a);
    cr_assert_eq(tu_stats(a).reserved_bytes, 0);
    k.skew = 0; /* the same device, aligned again: works */
    p = tu_alloc(a, 1000, NULL);
    cr_assert_eq((uintptr_t)p % CCA_ALIGNMENT, 0);
    tu_free(a, p);
    tu_destroy_clean(a, u);
    cca_upstream_destroy(u);
    cr_assert_eq(tu_upstream_stats(k.inner).bytes_in_use, 0);
    cca_upstream_destroy(k.inner);
}

/* ---- the wrapper's counts under threads ------------------------------------------------ */

/* A device given back by one thread may be taken by another before the
 * first has counted its free: bytes_in_use (and so its peak) must never say
 * the device held more than it has. "gated" forwards to the simulated
 * device; with `gate` set, free and vm_unmap stop after the device took the
 * memory back, until the main thread has allocated it again. */
typedef struct gated {
    cca_upstream *inner;
    bool gate;
    sem_t given_back, go_on;
} gated;

static void gated_wait(gated *g) {
    if (!g->gate)
        return;
    sem_post(&g->given_back);
    sem_wait(&g->go_on);
}

static cca_status gated_alloc(void *ctx, size_t size, void **p) {
    return cca_upstream_alloc(((gated *)ctx)->inner, size, p);
}
static cca_status gated_free(void *ctx, void *p, size_t size) {
    cca_status st = cca_upstream_free(((gated *)ctx)->inner, p, size);
    gated_wait(ctx);
    return st;
}
static cca_status gated_granularity(void *ctx, size_t *bytes) {
    return cca_upstream_vm_granularity(((gated *)ctx)->inner, bytes);
}
static cca_status gated_reserve(void *ctx, size_t size, void **base) {
    return cca_upstream_vm_reserve(((gated *)ctx)->inner, size, base);
}
static cca_status gated_release(void *ctx, void *base, size_t size) {
    return cca_upstream_vm_release(((gated *)ctx)->inner, base, size);
}
static cca_status gated_map(void *ctx, void *addr, size_t size) {
    return cca_upstream_vm_map(((gated *)ctx)->inner, addr, size);
}
static cca_status gated_unmap(void *ctx, void *addr, size_t size) {
    cca_status st = cca_upstream_vm_unmap(((gated *)ctx)->inner, addr, size);
    gated_wait(ctx);
    return st;
}

typedef struct give_back {
    cca_upstream *u;
    void *p;
    size_t size;
    bool vm;
    cca_status st;
} give_back;

static void *give_back_main(void *arg) {
    give_back *g = arg;
    g->st = g->vm ? cca_upstream_vm_unmap(g->u, g->p, g->size) : cca_upstream_free(g->u, g->p, g->size);
    return NULL;
}

static void freed_memory_retaken_is_never_counted_twice(bool vm) {
    const size_t cap = 4 * MiB;
    gated g = {0};
    cr_assert_eq(cca_upstream_host_create(cap, &g.inner), CCA_OK);
    sem_init(&g.given_back, 0, 0);
    sem_init(&g.go_on, 0, 0);
    cca_upstream_ops ops = {.alloc = gated_alloc,
                            .free = gated_free,
                            .vm_granularity = gated_granularity,
                            .vm_reserve = gated_reserve,
                            .vm_release = gated_release,
                            .vm_map = gated_map,
                            .vm_unmap = gated_unmap,
                            .name = "gated"};
    cca_upstream *u;
    cr_assert_eq(cca_upstream_custom_create(&ops, &g, &u), CCA_OK);
    void *base = NULL, *p = NULL;
    if (vm) {
        cr_assert_eq(cca_upstream_vm_reserve(u, 2 * cap, &base), CCA_OK);
        cr_assert_eq(cca_upstream_vm_map(u, base, cap), CCA_OK, "%s", cca_last_error());
        p = base;
    } else {
        cr_assert_eq(cca_upstream_alloc(u, cap, &p), CCA_OK); /* the device is full */
    }
    g.gate = true;
    give_back gb = {.u = u, .p = p, .size = cap, .vm = vm};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, give_back_main, &gb), 0);
    sem_wait(&g.given_back); /* the device has it back; the other thread has not counted it yet */
    void *q = NULL;
    if (vm)
        cr_assert_eq(cca_upstream_vm_map(u, (char *)base + cap, cap), CCA_OK, "%s", cca_last_error());
    else
        cr_assert_eq(cca_upstream_alloc(u, cap, &q), CCA_OK, "%s", cca_last_error());
    cca_upstream_stats s = tu_upstream_stats(u);
    sem_post(&g.go_on);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(gb.st, CCA_OK);
    g.gate = false;
    cr_assert_leq(s.bytes_in_use, cap, "%zu bytes in use on a device of %zu", s.bytes_in_use, cap);
    cr_assert_leq(s.bytes_in_use_peak, cap, "a peak of %zu bytes on a device of %zu", s.bytes_in_use_peak, cap);
    s = tu_upstream_stats(u);
    cr_assert_eq(s.bytes_in_use, cap);
    cr_assert_eq(s.bytes_in_use_peak, cap);
    if (vm) {
        cr_assert_eq(s.vm_mapped_bytes, cap);
        cr_assert_eq(cca_upstream_vm_unmap(u, (char *)base + cap, cap), CCA_OK);
        cr_assert_eq(cca_upstream_vm_release(u, base, 2 * cap), CCA_OK);
    } else {
        cr_assert_eq(s.allocations, 1);
        cr_assert_eq(cca_upstream_free(u, q, cap), CCA_OK);
    }
    s = tu_upstream_stats(u);
    cr_assert_eq(s.bytes_in_use, 0);
    cr_assert_eq(s.allocations, 0);
    cr_assert_eq(s.vm_mapped_bytes, 0);
    cr_assert_eq(s.vm_reserved_bytes, 0);
    cca_upstream_destroy(u);
    cr_assert_eq(tu_upstream_stats(g.inner).bytes_in_use, 0);
    cca_upstream_destroy(g.inner);
    sem_destroy(&g.given_back);
    sem_destroy(&g.go_on);
}

Test(upstream, a_free_and_another_threads_alloc_never_count_the_memory_twice) {
    freed_memory_retaken_is_never_counted_twice(false);
}

Test(upstream, an_unmap_and_another_threads_map_never_count_the_memory_twice) {
    freed_memory_retaken_is_never_counted_twice(true);
}

/* An event the upstream refuses to destroy leaks in the upstream, and the
 * allocator can do nothing about it (ccai_upstream_event_destroy returns
 * nothing): it is logged, one line naming the upstream and the op, and the
 * caller's message is kept. Through the allocator too: the pending free's
 * event, destroyed once it completed, under the allocator's lock (the line
 * is written after the unlock). */
typedef struct refusing_events {
    int made, destroyed;
} refusing_events;
static cca_status re_record(void *ctx, cca_stream s, void **event) {
    refusing_events *r = ctx;
    (void)s;
    *event = (void *)(uintptr_t)(0x1000 + ++r->made);
    return CCA_OK;
}
static cca_status re_query(void *ctx, void *event) {
    (void)ctx, (void)event;
    return CCA_OK;
}
static cca_status re_destroy(void *ctx, void *event) {
    (void)event;
    ((refusing_events *)ctx)->destroyed++;
    return cca_set_error(CCA_ERR_UPSTREAM, "refused on purpose");
}
static cca_status re_sync(void *ctx) {
    (void)ctx;
    return CCA_OK;
}

Test(upstream, a_refused_event_destroy_is_logged) {
    tu_log_capture log = {0};
    cca_set_log_callback(tu_capture_log, &log);
    refusing_events r = {0};
    cca_upstream_ops ops = {.alloc = dummy_alloc, .free = dummy_free, .event_record = re_record, .event_query = re_query, .event_destroy = re_destroy,
                            .synchronize = re_sync, .name = "leaky-events"};
    cca_upstream *u = NULL;
    cr_assert_eq(cca_upstream_custom_create(&ops, &r, &u), CCA_OK, "%s", cca_last_error());
    cca_set_error(CCA_ERR_CONFIG, "the caller's message");
    ccai_upstream_event_destroy(u, (void *)(uintptr_t)0x1234);
    cr_assert_eq(r.destroyed, 1);
    cr_assert_eq(log.lines, 1, "one line for the refused destroy");
    cr_assert(strstr(log.last, "upstream 'leaky-events'") && strstr(log.last, "event_destroy") &&
                  strstr(log.last, "refused on purpose"),
              "%s", log.last);
    cr_assert_str_eq(cca_last_error(), "the caller's message");
    /* through the allocator: a block used on a second stream is freed
     * pending an event; the next alloc finds it complete and destroys it
     * under the lock: one more line, written once the call returned */
    /* classic segments, all this upstream can give (no vm ops; with
     * expandable:1 cca_create would log a line saying so) */
    cca_allocator *a = tu_allocator(u, "policy:growth,expandable:0");
    cr_assert_eq(log.lines, 1, "cca_create logs nothing");
    void *p = NULL, *q = NULL;
    cr_assert_eq(cca_alloc(a, 4096, (cca_stream)0x10, &p), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_record_stream(a, p, (cca_stream)0x20), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_free(a, p), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(r.made, 1, "the free recorded an event");
    cr_assert_eq(cca_alloc(a, 4096, (cca_stream)0x10, &q), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(r.destroyed, 2);
    cr_assert_eq(log.lines, 2, "one line for the allocator's refused destroy");
    cr_assert(strstr(log.last, "event_destroy"), "%s", log.last);
    tu_free(a, q);
    tu_destroy_clean(a, u);
    cca_upstream_destroy(u);
    cca_set_log_callback(NULL, NULL);
}

/* The wrapper's counters of host staging memory and copies, exactly:
 * host_bytes_peak is the highest host_bytes_in_use (it stays when memory
 * goes back), copies and bytes_copied count successful copies either way,
 * a refused call counts nothing. */
Test(upstream, host_staging_and_copies_are_counted_exactly) {
    cca_upstream *u = tu_vm_device(16 * MiB, 0);
    void *dev = NULL, *h1 = NULL, *h2 = NULL;
    cr_assert_eq(cca_upstream_alloc(u, 2 * MiB, &dev), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_host_alloc(u, 3 * MiB, &h1), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_host_alloc(u, 1 * MiB, &h2), CCA_OK, "%s", cca_last_error());
    cca_upstream_stats s = tu_upstream_stats(u);
    cr_assert_eq(s.host_bytes_in_use, 4 * MiB);
    cr_assert_eq(s.host_bytes_peak, 4 * MiB);
    cr_assert_eq(s.copies, 0);
    cr_assert_eq(s.bytes_copied, 0);
    memset(h1, 0x3c, 3 * MiB);
    cr_assert_eq(cca_upstream_copy(u, dev, h1, 2 * MiB, 0), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_copy(u, h2, dev, 4096, 1), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_copy_wait(u), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(((unsigned char *)h2)[4095], 0x3c, "the copies ran");
    cr_assert_eq(cca_upstream_copy(u, NULL, h1, 512, 0), CCA_ERR_INVALID_ARGUMENT);
    s = tu_upstream_stats(u);
    cr_assert_eq(s.copies, 2, "two copies, the refused one not counted");
    cr_assert_eq(s.bytes_copied, 2 * MiB + 4096);
    cr_assert_eq(cca_upstream_host_free(u, h1, 3 * MiB), CCA_OK, "%s", cca_last_error());
    s = tu_upstream_stats(u);
    cr_assert_eq(s.host_bytes_in_use, 1 * MiB);
    cr_assert_eq(s.host_bytes_peak, 4 * MiB, "the peak stays");
    cr_assert_eq(cca_upstream_host_alloc(u, 2 * MiB, &h1), CCA_OK, "%s", cca_last_error());
    s = tu_upstream_stats(u);
    cr_assert_eq(s.host_bytes_in_use, 3 * MiB);
    cr_assert_eq(s.host_bytes_peak, 4 * MiB, "below the peak: unchanged");
    void *h3 = NULL;
    cr_assert_eq(cca_upstream_host_alloc(u, 2 * MiB, &h3), CCA_OK, "%s", cca_last_error());
    s = tu_upstream_stats(u);
    cr_assert_eq(s.host_bytes_peak, 5 * MiB, "above it: the new peak");
    cr_assert_eq(cca_upstream_host_free(u, h1, 2 * MiB), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_host_free(u, h2, 1 * MiB), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_host_free(u, h3, 2 * MiB), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_free(u, dev, 2 * MiB), CCA_OK, "%s", cca_last_error());
    s = tu_upstream_stats(u);
    cr_assert_eq(s.host_bytes_in_use, 0);
    cr_assert_eq(s.host_bytes_peak, 5 * MiB);
    cca_upstream_destroy(u);
}

/* Host staging memory and copies (ccalloc.h): an upstream without the four
 * ops refuses each call with CCA_ERR_UPSTREAM naming it (host_alloc's
 * *ptr NULL); a host_alloc op that succeeds without a pointer is refused
 * as alloc's is (CCA_ERR_UPSTREAM, *ptr NULL, nothing counted); a NULL
 * upstream to stream_synchronize is CCA_ERR_INVALID_ARGUMENT. */
static cca_status null_host_free(void *ctx, void *ptr, size_t size) {
    (void)ctx, (void)ptr, (void)size;
    return CCA_OK;
}
static cca_status null_copy(void *ctx, void *dst, const void *src, size_t size, int to_host) {
    (void)ctx, (void)dst, (void)src, (void)size, (void)to_host;
    return CCA_OK;
}
static cca_status null_copy_wait(void *ctx) {
    (void)ctx;
    return CCA_OK;
}

Test(upstream, host_staging_refused_without_the_ops_or_a_pointer) {
    cca_upstream_ops ops = {.alloc = dummy_alloc, .free = dummy_free, .name = "nocopy"};
    cca_upstream *u = NULL;
    cr_assert_eq(cca_upstream_custom_create(&ops, NULL, &u), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_has_copy(u), 0);
    void *h = (void *)1;
    cr_assert_eq(cca_upstream_host_alloc(u, 4096, &h), CCA_ERR_UPSTREAM);
    cr_assert_null(h);
    cr_assert_str_eq(cca_last_error(),
                     "cca_upstream_host_alloc: upstream 'nocopy' has no host staging memory or copies");
    cr_assert_eq(cca_upstream_copy_wait(u), CCA_ERR_UPSTREAM);
    cr_assert_str_eq(cca_last_error(),
                     "cca_upstream_copy_wait: upstream 'nocopy' has no host staging memory or copies");
    cca_upstream_destroy(u);

    cca_upstream_ops broken = {.alloc = dummy_alloc,
                               .free = dummy_free,
                               .host_alloc = null_alloc,
                               .host_free = null_host_free,
                               .copy = null_copy,
                               .copy_wait = null_copy_wait,
                               .name = "nullhost"};
    cr_assert_eq(cca_upstream_custom_create(&broken, NULL, &u), CCA_OK, "%s", cca_last_error());
    h = (void *)1;
    cca_clear_error();
    cr_assert_eq(cca_upstream_host_alloc(u, 4096, &h), CCA_ERR_UPSTREAM);
    cr_assert_null(h);
    cr_assert(strstr(cca_last_error(), "upstream 'nullhost' host_alloc of 4096 bytes failed"), "%s", cca_last_error());
    cca_upstream_stats s = tu_upstream_stats(u);
    cr_assert_eq(s.host_bytes_in_use, 0, "nothing counted");
    cr_assert_eq(s.host_bytes_peak, 0);
    cca_upstream_destroy(u);

    cr_assert_eq(cca_upstream_stream_synchronize(NULL, (cca_stream)1), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_str_eq(cca_last_error(), "cca_upstream_stream_synchronize: upstream is NULL");
}
