/*
 * gpu_required.h — how a GPU test leaves when there is no usable GPU.
 *
 * By default it skips with the reason (cr_skip_test), so the suites pass on
 * machines without a GPU, CI included. On a GPU machine a skip would hide
 * exactly what the run is for (a CUDA-less build, a driver mismatch), so
 * scripts/gpu_session.sh sets CCA_REQUIRE_GPU=1, and then the same test
 * fails instead, with the same reason.
 */
#ifndef CCA_GPU_REQUIRED_H
#define CCA_GPU_REQUIRED_H

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static inline int cca_gpu_required(void) {
    const char *v = getenv("CCA_REQUIRE_GPU");
    return v != NULL && v[0] != '\0' && strcmp(v, "0") != 0;
}

/* Skip (or, under CCA_REQUIRE_GPU, fail) the current test: no GPU. */
#define CCA_NO_GPU(...)                                                                                                \
    do {                                                                                                               \
        if (cca_gpu_required()) {                                                                                      \
            cr_assert_fail("CCA_REQUIRE_GPU is set but: " __VA_ARGS__);                                                \
        }                                                                                                              \
        cr_skip_test(__VA_ARGS__);                                                                                     \
    } while (0)

#endif /* CCA_GPU_REQUIRED_H */
