/*
 * test_runtime_device.c — runtime/src/device.c: which borrowed device is a
 * GPU.
 *
 *   - ccr_device_name_cuda, the one rule (ccr.h): exactly "cuda:" and
 *     decimal digits whose value fits an int, nothing before or after; every
 *     other name (trailing text, a sign, blanks, an overflow, no number, a
 *     hex number, another case) is the simulated device;
 *   - an engine given a borrowed upstream of each name of the table takes it
 *     for what the rule says (ccr_engine_device_info: simulated, name): a
 *     host upstream named "cuda:0junk" is not driven as a GPU;
 *   - a device that fails an allocation (CCA_ERR_UPSTREAM), at the engine's
 *     creation, a load or a run, is CCR_ERR_DEVICE, never called out of
 *     memory.
 */
#include <limits.h>
#include <stdlib.h>

#include "test_runtime_util.h"

#define MiB ((size_t)1 << 20)

/* The name table: cuda 1 with its index, or 0 (the simulated device). */
static const struct {
    const char *name;
    int cuda, index;
} names[] = {
    {"cuda:0", 1, 0},
    {"cuda:7", 1, 7},
    {"cuda:007", 1, 7},
    {"cuda:2147483647", 1, INT_MAX},
    {"cuda:2147483648", 0, 0},  /* INT_MAX + 1 */
    {"cuda:99999999999", 0, 0}, /* sscanf's %d: undefined behaviour */
    {"cuda:18446744073709551617", 0, 0},
    {"cuda:0junk", 0, 0},
    {"cuda:1 2", 0, 0},
    {"cuda:1 ", 0, 0},
    {"cuda:1\n", 0, 0},
    {"cuda: 1", 0, 0},
    {"cuda:\t1", 0, 0},
    {"cuda:+1", 0, 0},
    {"cuda:-1", 0, 0},
    {"cuda:-0", 0, 0},
    {"cuda:0x1", 0, 0},
    {"cuda:", 0, 0},
    {"cuda", 0, 0},
    {"CUDA:0", 0, 0},
    {" cuda:0", 0, 0},
    {"xcuda:0", 0, 0},
    {"cuda::0", 0, 0},
    {"host", 0, 0},
    {"", 0, 0},
};
#define N_NAMES (sizeof names / sizeof names[0])

Test(runtime_device, the_cuda_name_rule_is_exact) {
    for (size_t i = 0; i < N_NAMES; i++) {
        int index = -5;
        cr_expect_eq(ccr_device_name_cuda(names[i].name, &index), names[i].cuda, "'%s'", names[i].name);
        cr_expect_eq(index, names[i].cuda ? names[i].index : -5, "'%s': index %d", names[i].name, index);
        cr_expect_eq(ccr_device_name_cuda(names[i].name, NULL), names[i].cuda, "'%s' (index NULL)", names[i].name);
    }
    int index = -5;
    cr_expect_eq(ccr_device_name_cuda(NULL, &index), 0);
    cr_expect_eq(index, -5);
}

/* A device that holds nothing and says it has 64 MiB free, under any name:
 * an engine is created on it and asked what it is, nothing more. */
static cca_status no_alloc(void *ctx, size_t size, void **ptr) {
    (void)ctx;
    (void)size;
    *ptr = NULL;
    return CCA_ERR_OUT_OF_MEMORY;
}
static cca_status no_free(void *ctx, void *ptr, size_t size) {
    (void)ctx;
    (void)ptr;
    (void)size;
    return CCA_ERR_UPSTREAM;
}
static cca_status mem_64m(void *ctx, size_t *free_bytes, size_t *total_bytes) {
    (void)ctx;
    *free_bytes = *total_bytes = 64 * MiB;
    return CCA_OK;
}

Test(runtime_device, a_borrowed_device_is_a_gpu_only_by_the_rule) {
    for (size_t i = 0; i < N_NAMES; i++) {
        cca_upstream_ops ops = {.alloc = no_alloc, .free = no_free, .mem_info = mem_64m, .name = names[i].name};
        cca_upstream *up;
        cr_assert_eq(cca_upstream_custom_create(&ops, NULL, &up), CCA_OK, "%s", cca_last_error());
        ccr_engine_options o;
        ccr_engine_options_default(&o);
        o.upstream = up;
        ccr_engine *e;
        cr_assert_eq(ccr_engine_create(&o, &e), CCR_OK, "'%s': %s", names[i].name, ccr_last_error());
        ccr_device_info d;
        cr_assert_eq(ccr_engine_device_info(e, &d), CCR_OK, "%s", ccr_last_error());
        char want[32];
        snprintf(want, sizeof want, "cuda:%d", names[i].index);
        cr_expect_eq(d.simulated, !names[i].cuda, "'%s': simulated %d", names[i].name, d.simulated);
        cr_expect_str_eq(d.name, names[i].cuda ? want : "host", "'%s': named '%s'", names[i].name, d.name);
        ccr_engine_destroy(e);
        cca_upstream_destroy(up);
    }
}

/* ---- a device that fails (CCA_ERR_UPSTREAM), not one that is full ---------- */

/* The simulated device behind alloc, free and mem_info (classic segments),
 * whose alloc fails while `broken` is set. */
typedef struct breakable {
    cca_upstream *host;
    int broken;
} breakable;
static cca_status b_alloc(void *ctx, size_t size, void **ptr) {
    breakable *b = ctx;
    if (b->broken) {
        *ptr = NULL;
        return cca_set_error(CCA_ERR_UPSTREAM, "the device failed");
    }
    return cca_upstream_alloc(b->host, size, ptr);
}
static cca_status b_free(void *ctx, void *ptr, size_t size) {
    return cca_upstream_free(((breakable *)ctx)->host, ptr, size);
}
static cca_status b_mem_info(void *ctx, size_t *free_bytes, size_t *total_bytes) {
    return cca_upstream_mem_info(((breakable *)ctx)->host, free_bytes, total_bytes);
}

/* ccr.h: CCR_ERR_DEVICE is "the device failed", CCR_ERR_OUT_OF_MEMORY "the
 * allocator could not serve": a device that fails an allocation is the
 * first at the engine's creation (the greedy arena), at a load and in a
 * run, and the message does not call it out of memory. */
Test(runtime_device, a_device_that_fails_is_a_device_error_not_out_of_memory) {
    breakable b = {NULL, 0};
    cr_assert_eq(cca_upstream_host_create(64 * MiB, &b.host), CCA_OK, "%s", cca_last_error());
    cca_upstream_ops ops = {.alloc = b_alloc, .free = b_free, .mem_info = b_mem_info, .name = "breakable"};
    cca_upstream *up;
    cr_assert_eq(cca_upstream_custom_create(&ops, &b, &up), CCA_OK, "%s", cca_last_error());
    ccr_engine_options o;
    ccr_engine_options_default(&o);
    o.upstream = up;
    o.alloc_conf = "policy:greedy,greedy_bytes:8M";
    ccr_engine *e = (ccr_engine *)1;
    b.broken = 1;
    cr_expect_eq(ccr_engine_create(&o, &e), CCR_ERR_DEVICE, "%s", ccr_last_error());
    cr_expect_null(e);
    cr_expect(strstr(ccr_last_error(), "the device failed") != NULL, "%s", ccr_last_error());
    o.alloc_conf = NULL;
    cr_assert_eq(ccr_engine_create(&o, &e), CCR_OK, "%s", ccr_last_error());
    ccr_model *m = (ccr_model *)1;
    cr_expect_eq(ccr_model_load_spec(e, "mlp:64x64", &m), CCR_ERR_DEVICE, "%s", ccr_last_error());
    cr_expect_null(m);
    cr_expect(strstr(ccr_last_error(), "out of device memory") == NULL, "%s", ccr_last_error());
    cr_expect(strstr(ccr_last_error(), "does not fit") == NULL, "%s", ccr_last_error());
    cr_expect(strstr(ccr_last_error(), "the device failed an allocation: 16.00 KiB for weight") != NULL, "%s",
              ccr_last_error());
    cr_expect(strstr(ccr_last_error(), "(CCA_ERR_UPSTREAM: the upstream failed: cca_alloc_in: the device failed)") !=
                  NULL,
              "%s", ccr_last_error());
    b.broken = 0;
    cr_assert_eq(ccr_model_load_spec(e, "mlp:64x64", &m), CCR_OK, "%s", ccr_last_error());
    b.broken = 1;
    float *x = calloc(4096 * 64, sizeof(float)), *y = malloc(4096 * 64 * sizeof(float));
    cr_expect_eq(ccr_model_run(m, x, 4096, y), CCR_ERR_DEVICE, "%s", ccr_last_error());
    cr_expect(strstr(ccr_last_error(), "out of device memory") == NULL, "%s", ccr_last_error());
    b.broken = 0;
    cr_expect_eq(ccr_model_run(m, x, 4096, y), CCR_OK, "%s", ccr_last_error());
    free(x);
    free(y);
    ccr_engine_destroy(e);
    cca_upstream_stats us;
    cr_assert_eq(cca_upstream_get_stats(b.host, &us), CCA_OK);
    cr_expect_eq(us.bytes_in_use, 0);
    cca_upstream_destroy(up);
    cca_upstream_destroy(b.host);
}
