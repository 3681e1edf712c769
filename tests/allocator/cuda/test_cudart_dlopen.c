/*
 * test_cudart_dlopen.c — allocator/src/upstream/cudart.c built as the Python
 * wheel builds it (CCA_CUDA_RUNTIME=dlopen): libccalloc links no CUDA
 * library and looks for the runtime on the first cca_upstream_cuda_create.
 * Label cpu: it needs the toolkit's headers, no GPU.
 *
 * Each test names the candidates through CCALLOC_CUDART (the search runs
 * once per process; Criterion runs each test in a process of its own):
 *   - a missing file, nothing at all, a library that is no CUDA runtime:
 *     CCA_ERR_NO_DEVICE, never a crash, whose message says what to install
 *     and why each candidate failed;
 *   - the toolkit's own libcudart (CCA_TEST_TOOLKIT_CUDART): its functions
 *     load; without a GPU the runtime's own no-device error names it, on a
 *     GPU the upstream is made;
 *   - the default search (CCALLOC_CUDART unset): one of those two answers.
 * test_cuda_double_dlopen runs the whole of test_cuda_upstream.c through the
 * same table, on the driver double built as a shared library.
 */
#include "alloc_test_util.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

/* cca_upstream_cuda_create(0) with CCALLOC_CUDART set to `named` (NULL: unset). */
static cca_status create_with(const char *named, cca_upstream **u) {
    if (named)
        setenv("CCALLOC_CUDART", named, 1);
    else
        unsetenv("CCALLOC_CUDART");
    *u = NULL;
    return cca_upstream_cuda_create(0, u);
}

/* The message of a failed search: what to install comes first. */
static void says_what_to_install(const char *msg) {
    cr_assert(strstr(msg, "no CUDA runtime (libcudart) could be loaded"), "%s", msg);
    cr_assert(strstr(msg, "pip install nvidia-cuda-runtime"), "%s", msg);
    cr_assert(strstr(msg, "nvidia-cuda-runtime-cu12"), "%s", msg);
    cr_assert(strstr(msg, "CUDA toolkit"), "%s", msg);
}

Test(cudart_dlopen, a_missing_file_is_no_device_saying_what_to_install) {
    cca_upstream *u;
    cr_assert_eq(create_with("/nonexistent/libcudart.so.13", &u), CCA_ERR_NO_DEVICE);
    cr_assert_null(u);
    const char *msg = cca_last_error();
    says_what_to_install(msg);
    cr_assert(strstr(msg, "Tried: /nonexistent/libcudart.so.13: "), "%s", msg);
    cr_assert(strstr(msg, "No such file"), "%s", msg);
    /* asked again: the same answer, from the search made once */
    cr_assert_eq(cca_upstream_cuda_create(1, &u), CCA_ERR_NO_DEVICE);
    cr_assert(strstr(cca_last_error(), "/nonexistent/libcudart.so.13"), "%s", cca_last_error());
}

Test(cudart_dlopen, every_named_candidate_is_tried_and_named_nothing_else) {
    cca_upstream *u;
    cr_assert_eq(create_with("/nonexistent/a.so:/nonexistent/b.so", &u), CCA_ERR_NO_DEVICE);
    const char *msg = cca_last_error();
    says_what_to_install(msg);
    cr_assert(strstr(msg, "/nonexistent/a.so: "), "%s", msg);
    cr_assert(strstr(msg, "; /nonexistent/b.so: "), "%s", msg);
    cr_assert_null(strstr(msg, "libcudart.so.12"), "CCALLOC_CUDART set: nothing else is tried: %s", msg);
}

Test(cudart_dlopen, a_list_of_separators_names_nothing) {
    cca_upstream *u;
    cr_assert_eq(create_with("::", &u), CCA_ERR_NO_DEVICE);
    cr_assert(strstr(cca_last_error(), "CCALLOC_CUDART: names nothing"), "%s", cca_last_error());
}

Test(cudart_dlopen, a_library_that_is_no_runtime_is_closed_and_named) {
    cca_upstream *u;
    cr_assert_eq(create_with("libm.so.6", &u), CCA_ERR_NO_DEVICE);
    const char *msg = cca_last_error();
    says_what_to_install(msg);
    cr_assert(strstr(msg, "libm.so.6: has no cudaGetDeviceCount (CUDA 12.5 or later is needed)"), "%s", msg);
}

Test(cudart_dlopen, bad_arguments_are_refused_before_any_search) {
    cca_upstream *u = NULL;
    setenv("CCALLOC_CUDART", "/nonexistent/libcudart.so.13", 1);
    cca_cuda_options o = {.device = 0, .vm_granularity = 3};
    cr_assert_eq(cca_upstream_cuda_create_with(&o, &u), CCA_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(cca_last_error(), "vm_granularity"), "%s", cca_last_error());
}

/* A runtime that loads: the upstream on a GPU, else the runtime's own
 * no-device error naming the file the functions came from. */
static void loaded(cca_status st, cca_upstream *u, const char *file) {
    if (st == CCA_OK) {
        cca_upstream_destroy(u);
        return;
    }
    cr_assert_eq(st, CCA_ERR_NO_DEVICE, "%s", cca_last_error());
    const char *msg = cca_last_error();
    cr_assert(strstr(msg, "cuda: no usable GPU ("), "%s", msg);
    cr_assert(strstr(msg, "; runtime "), "%s", msg);
    if (file)
        cr_assert(strstr(msg, file), "the file loaded is named: %s", msg);
}

#ifdef CCA_TEST_TOOLKIT_CUDART
Test(cudart_dlopen, the_toolkits_runtime_loads) {
    cca_upstream *u;
    cca_status st = create_with(CCA_TEST_TOOLKIT_CUDART, &u);
    loaded(st, u, "libcudart.so");
}

Test(cudart_dlopen, a_missing_candidate_before_a_good_one_is_passed_over) {
    cca_upstream *u;
    cca_status st = create_with("/nonexistent/libcudart.so.13:" CCA_TEST_TOOLKIT_CUDART, &u);
    loaded(st, u, "libcudart.so");
}
#endif

Test(cudart_dlopen, the_default_search_loads_a_runtime_or_says_what_to_install) {
    cca_upstream *u;
    cca_status st = create_with(NULL, &u);
    if (st == CCA_ERR_NO_DEVICE && strstr(cca_last_error(), "no CUDA runtime")) {
        says_what_to_install(cca_last_error());
        cr_assert(strstr(cca_last_error(), "libcudart.so.13: "), "%s", cca_last_error());
        return;
    }
    loaded(st, u, NULL);
}
