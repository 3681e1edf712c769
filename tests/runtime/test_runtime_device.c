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
 *     host upstream named "cuda:0junk" is not driven as a GPU.
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
