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
 *   - the default search (CCALLOC_CUDART unset or empty): one of those two
 *     answers;
 *   - steps 2 and 3 on the driver double: a runtime already loaded under
 *     either soname, and the NVIDIA wheels' places beside the package, come
 *     before the toolkit's file; a runtime elsewhere is not taken.
 * test_cuda_double_dlopen runs the whole of test_cuda_upstream.c through the
 * same table, on the driver double built as a shared library.
 */
#include "alloc_test_util.h"

#include <criterion/criterion.h>
#include <dlfcn.h>
#include <link.h> /* dl_iterate_phdr */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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
    const char *first = strstr(msg, "/nonexistent/libcudart.so.13");
    cr_assert_null(strstr(first + 1, "/nonexistent/libcudart.so.13"), "the loader's reason without the name again: %s",
                   msg);
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

static int has_part(struct dl_phdr_info *info, size_t size, void *part) {
    (void)size;
    return info->dlpi_name && strstr(info->dlpi_name, part) != NULL;
}

/* Is an object whose path contains `part` loaded in this process? */
static bool loaded_file(const char *part) {
    return dl_iterate_phdr(has_part, (void *)part) != 0;
}

/* A library that loads but is no runtime is closed again (cJSON's: a
 * library nothing in this test loads otherwise). */
Test(cudart_dlopen, a_library_that_is_no_runtime_does_not_stay_loaded) {
    cr_assert_not(loaded_file("libcjson"));
    cca_upstream *u;
    cr_assert_eq(create_with("libcjson.so.1", &u), CCA_ERR_NO_DEVICE);
    cr_assert(strstr(cca_last_error(), "libcjson.so.1: has no cuda"), "%s", cca_last_error());
    cr_expect_not(loaded_file("libcjson"), "closed after its check");
}

/* CCALLOC_CUDART set but empty is the default search, not a list naming
 * nothing. */
Test(cudart_dlopen, an_empty_cudart_variable_is_the_default_search) {
    cca_upstream *u;
    cca_status st = create_with("", &u);
    cr_assert_null(strstr(cca_last_error(), "names nothing"), "%s", cca_last_error());
    if (st == CCA_ERR_NO_DEVICE && strstr(cca_last_error(), "no CUDA runtime")) {
        says_what_to_install(cca_last_error());
        return;
    }
    if (st == CCA_OK)
        cca_upstream_destroy(u);
    else
        cr_assert(strstr(cca_last_error(), "cuda: no usable GPU ("), "%s", cca_last_error());
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

#ifdef CCA_TEST_DOUBLE_FILE
/* The first candidate that is a runtime is the one: the names after it are
 * not tried (one that is no runtime would leave the table half filled). */
Test(cudart_dlopen, the_names_after_the_runtime_found_are_not_tried) {
    cca_upstream *u;
    cr_assert_eq(create_with(CCA_TEST_DOUBLE_FILE ":libcjson.so.1", &u), CCA_OK, "%s", cca_last_error());
    void *p = NULL;
    cr_assert_eq(cca_upstream_alloc(u, 2 << 20, &p), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_free(u, p, 2 << 20), CCA_OK, "%s", cca_last_error());
    cca_upstream_destroy(u);
    cr_expect_not(loaded_file("libcjson"), "never opened");
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

/* ---- steps 2 and 3 of the search, on the driver double --------------------------
 * The double (a shared library built from cuda_double.c) is a runtime whose
 * device works without a GPU; the toolkit's libcudart, which the soname
 * steps find, is a file named libcudart.so.*. Which file the search took is
 * read from the objects loaded in the process (dl_iterate_phdr). */
#ifdef CCA_TEST_DOUBLE_SO13

/* Step 2: a runtime already in the process, found by its soname (a
 * framework's libcudart.so.13 or .12) before any file is looked for; the
 * toolkit's file is never opened. */
static void already_loaded(const char *file) {
    cr_assert_not_null(dlopen(file, RTLD_NOW | RTLD_GLOBAL), "%s", dlerror());
    cca_upstream *u;
    cr_assert_eq(create_with(NULL, &u), CCA_OK, "%s", cca_last_error());
    cca_upstream_destroy(u);
    cr_expect_not(loaded_file("/libcudart.so"), "only the runtime already loaded is used");
}

Test(cudart_dlopen, a_runtime_13_already_loaded_is_the_one_used) {
    already_loaded(CCA_TEST_DOUBLE_SO13);
}

Test(cudart_dlopen, a_runtime_12_already_loaded_is_the_one_used) {
    already_loaded(CCA_TEST_DOUBLE_SO12);
}

/* Step 3: the NVIDIA wheels beside the package. This test binary (libccalloc
 * linked in: dladdr names it, as it names the wheel's libccalloc.so) is
 * copied to site-packages/ccalloc/lib/ of a fresh tree, the double to
 * site-packages/`wheel`, and the copy run: its constructor (wheel_child)
 * searches and exits 10 x (upstream made) + (a file of the tree loaded). */
static int wheel_run(const char *wheel, char *err, size_t cap) {
    char root[] = "/tmp/cca_wheel_XXXXXX";
    cr_assert_not_null(mkdtemp(root));
    char lib[512], exe[600], dir[700], so[700], cmd[2048];
    snprintf(lib, sizeof lib, "%s/site-packages/ccalloc/lib", root);
    snprintf(exe, sizeof exe, "%s/test_cudart_dlopen", lib);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp /proc/%d/exe '%s'", lib, (int)getpid(), exe);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    snprintf(so, sizeof so, "%s/site-packages/%s", root, wheel);
    snprintf(dir, sizeof dir, "%s", so);
    *strrchr(dir, '/') = '\0';
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp '%s' '%s'", dir, CCA_TEST_DOUBLE_FILE, so);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    snprintf(cmd, sizeof cmd, "CCA_TEST_WHEEL_ROOT='%s' '%s' 2>'%s/err'", root, exe, root);
    unsetenv("CCALLOC_CUDART");
    int rc = system(cmd);
    snprintf(so, sizeof so, "%s/err", root);
    FILE *f = fopen(so, "r");
    size_t n = f ? fread(err, 1, cap - 1, f) : 0;
    err[n] = '\0';
    if (f)
        fclose(f);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    cr_assert_eq(system(cmd), 0);
    cr_assert(WIFEXITED(rc), "the copy died: %d (%s)", rc, err);
    return WEXITSTATUS(rc);
}

Test(cudart_dlopen, the_cuda_13_wheel_beside_the_package_comes_before_the_toolkit) {
    char err[2048];
    cr_expect_eq(wheel_run("nvidia/cu13/lib/libcudart.so.13", err, sizeof err), 11, "%s", err);
}

Test(cudart_dlopen, the_cuda_12_wheel_beside_the_package_comes_before_the_toolkit) {
    char err[2048];
    cr_expect_eq(wheel_run("nvidia/cuda_runtime/lib/libcudart.so.12", err, sizeof err), 11, "%s", err);
}

/* Elsewhere in site-packages the double is no wheel: it is not loaded, and
 * the search goes on to the sonames (the toolkit's: no GPU here). */
Test(cudart_dlopen, a_runtime_elsewhere_in_site_packages_is_not_taken) {
    char err[2048];
    int rc = wheel_run("nvidia/cu13/libcudart.so.13", err, sizeof err);
    cr_expect_eq(rc % 10, 0, "the double was not loaded: %d, %s", rc, err);
}

/* The copied binary, run by wheel_run: the search alone, before Criterion
 * starts. */
__attribute__((constructor)) static void wheel_child(void) {
    const char *root = getenv("CCA_TEST_WHEEL_ROOT");
    if (!root)
        return;
    unsetenv("CCA_TEST_WHEEL_ROOT");
    cca_upstream *u = NULL;
    cca_status st = cca_upstream_cuda_create(0, &u);
    if (st != CCA_OK)
        fprintf(stderr, "%s: %s\n", cca_status_string(st), cca_last_error());
    else
        cca_upstream_destroy(u);
    _exit(10 * (st == CCA_OK) + loaded_file(root));
}
#endif
