/*
 * test_cublas_load.c — kernels/src/cublas.c: where cuBLAS comes from
 * (cck_cublas_load), on any machine: loading needs the library, not a GPU.
 *
 * - Each test is its own process (Criterion forks), so each sees a first
 *   load; CCALLOC_CUBLAS is set before it.
 * - The default search finds the toolkit's cuBLAS (skipped, with the reason,
 *   where this machine has none); the file named is the one really mapped.
 * - CCALLOC_CUBLAS: the first entry that loads wins; a missing file or a
 *   library without cuBLAS's functions is named with its reason, and nothing
 *   outside the list is tried (cuBLAS is then not in the process).
 * - A cuBLAS already in the process is taken before any other, and a list
 *   is tried in its order; a library with only some of the functions is
 *   closed again. The stand-ins for cuBLAS are kernels/cublas_double.c.
 * - The soname step comes before the toolkit directory: a process started
 *   with LD_LIBRARY_PATH on a stand-in named libcublas.so.MAJOR takes it.
 * - The answer holds for the process's life, whatever changes after; every
 *   thread gets the same one; a hostile list cannot overrun the message.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <cublas_api.h>

#include "cck.h"

#define STR2(x) #x
#define STR(x) STR2(x)
#define SONAME "libcublas.so." STR(CUBLAS_VER_MAJOR)

/* Is the named library mapped in this process? (RTLD_NOLOAD opens nothing.) */
static int mapped(const char *name) {
    void *h = dlopen(name, RTLD_NOW | RTLD_NOLOAD);
    if (h)
        dlclose(h);
    return h != NULL;
}

static void need_toolkit_cublas(void) {
    void *h = dlopen(SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        h = dlopen(CCK_CUBLAS_TOOLKIT_DIR "/" SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        cr_skip_test("no %s on this machine: %s", SONAME, dlerror());
    dlclose(h);
}

Test(cublas_load, nothing_is_loaded_until_asked) {
    cr_assert_not(mapped(SONAME), "cuBLAS was mapped before any context: it is linked again");
}

Test(cublas_load, the_default_search_finds_the_toolkit_cublas) {
    unsetenv("CCALLOC_CUBLAS");
    need_toolkit_cublas();
    const char *where = NULL;
    cr_assert_eq(cck_cublas_load(&where), CCK_OK, "%s", where);
    cr_assert(strstr(where, "/" SONAME) != NULL, "where = %s", where);
    cr_assert(mapped(where), "%s is not mapped", where);
    /* where may be NULL; the answer is the same */
    cr_assert_eq(cck_cublas_load(NULL), CCK_OK);
}

Test(cublas_load, a_missing_named_file_is_an_error_and_nothing_else_is_tried) {
    setenv("CCALLOC_CUBLAS", "/nonexistent/libcublas.so.99", 1);
    const char *where = NULL;
    cr_assert_eq(cck_cublas_load(&where), CCK_ERR_CUBLAS);
    cr_assert(strstr(where, "/nonexistent/libcublas.so.99: ") != NULL, "where = %s", where);
    cr_assert(strstr(where, "No such file") != NULL, "the loader's reason: %s", where);
    cr_assert(strstr(where, "nothing else is tried") != NULL, "where = %s", where);
    cr_assert(strstr(where, "install") != NULL, "what to install: %s", where);
    /* a pip wheel's cuBLAS is in no place the search looks: the message says to name it */
    cr_assert(strstr(where, "name a " SONAME " in CCALLOC_CUBLAS") != NULL, "where = %s", where);
    cr_assert(strstr(where, "site-packages/nvidia/") != NULL, "where = %s", where);
    cr_assert_not(mapped(SONAME), "a fallback loaded cuBLAS");
}

Test(cublas_load, a_library_without_cublas_is_named_with_the_missing_function) {
    setenv("CCALLOC_CUBLAS", "libm.so.6", 1);
    const char *where = NULL;
    cr_assert_eq(cck_cublas_load(&where), CCK_ERR_CUBLAS);
    cr_assert(strstr(where, "libm.so.6: has no cublasCreate_v2") != NULL, "where = %s", where);
}

Test(cublas_load, the_first_entry_of_the_list_that_loads_wins) {
    need_toolkit_cublas();
    setenv("CCALLOC_CUBLAS", "/nonexistent/a.so::libm.so.6:" SONAME ":/nonexistent/b.so", 1);
    const char *where = NULL;
    cr_assert_eq(cck_cublas_load(&where), CCK_OK, "%s", where);
    cr_assert(strstr(where, "/" SONAME) != NULL, "where = %s", where);
}

Test(cublas_load, the_answer_holds_for_the_process) {
    setenv("CCALLOC_CUBLAS", "/nonexistent/x.so", 1);
    const char *first = NULL, *again = NULL;
    cr_assert_eq(cck_cublas_load(&first), CCK_ERR_CUBLAS);
    unsetenv("CCALLOC_CUBLAS");
    cr_assert_eq(cck_cublas_load(&again), CCK_ERR_CUBLAS, "a later call searched again");
    cr_assert_str_eq(again, first);
}

/* Set but empty is not a list naming nothing: the default search (cck.h). */
Test(cublas_load, an_empty_variable_is_the_default_search) {
    setenv("CCALLOC_CUBLAS", "", 1);
    need_toolkit_cublas();
    const char *where = NULL;
    cr_assert_eq(cck_cublas_load(&where), CCK_OK, "%s", where);
    cr_assert(strstr(where, "/" SONAME) != NULL, "where = %s", where);
}

/* Only separators: nothing to try, and the message says so (as
 * CCALLOC_CUDART's does), not just that nothing loaded. */
Test(cublas_load, a_list_of_separators_names_nothing) {
    setenv("CCALLOC_CUBLAS", "::", 1);
    const char *where = NULL;
    cr_assert_eq(cck_cublas_load(&where), CCK_ERR_CUBLAS);
    cr_assert(strstr(where, "CCALLOC_CUBLAS: names nothing") != NULL, "where = %s", where);
    cr_assert_not(mapped(SONAME), "a fallback loaded cuBLAS");
}

/* cck.h: the search takes cuBLAS "from the cuBLAS major version the library
 * was built with"; a named file of another major version is refused (it
 * would bring its own CUDA runtime beside the one linked). */
Test(cublas_load, a_named_cublas_of_another_major_version_is_refused) {
    setenv("CCALLOC_CUBLAS", CCK_CUBLAS_DOUBLE_older, 1);
    const char *where = NULL;
    cr_assert_eq(cck_cublas_load(&where), CCK_ERR_CUBLAS, "taken: %s", where);
    char want[256];
    snprintf(want, sizeof want, "%s: is cuBLAS %d, not %d", CCK_CUBLAS_DOUBLE_older, CUBLAS_VER_MAJOR - 1,
             CUBLAS_VER_MAJOR);
    cr_assert(strstr(where, want) != NULL, "where = %s", where);
    cr_assert_not(mapped(CCK_CUBLAS_DOUBLE_older), "left loaded after its check");
}

/* The stand-in under cuBLAS's soname, opened by its path before the first
 * search, is the cuBLAS "already in the process": taken before the
 * soname's and the toolkit's. */
Test(cublas_load, a_cublas_already_in_the_process_is_taken_first) {
    unsetenv("CCALLOC_CUBLAS");
    void *h = dlopen(CCK_CUBLAS_DOUBLE_current, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(h, "%s", dlerror());
    const char *where = NULL;
    cr_assert_eq(cck_cublas_load(&where), CCK_OK, "%s", where);
    cr_assert_str_eq(where, CCK_CUBLAS_DOUBLE_current);
}

/* Two entries that both load: the first is taken, whichever it is. */
Test(cublas_load, a_list_is_tried_in_its_order) {
    need_toolkit_cublas();
    setenv("CCALLOC_CUBLAS", CCK_CUBLAS_DOUBLE_current ":" SONAME, 1);
    const char *where = NULL;
    cr_assert_eq(cck_cublas_load(&where), CCK_OK, "%s", where);
    cr_assert_str_eq(where, CCK_CUBLAS_DOUBLE_current);
}

Test(cublas_load, a_library_with_some_of_the_functions_is_named_and_closed) {
    setenv("CCALLOC_CUBLAS", CCK_CUBLAS_DOUBLE_partial, 1);
    const char *where = NULL;
    cr_assert_eq(cck_cublas_load(&where), CCK_ERR_CUBLAS);
    cr_assert(strstr(where, CCK_CUBLAS_DOUBLE_partial ": has no cublasDestroy_v2") != NULL, "where = %s", where);
    cr_assert_not(mapped(CCK_CUBLAS_DOUBLE_partial), "left loaded after its check");
}

static void *load_in_thread(void *arg) {
    const char **where = arg;
    return (void *)(intptr_t)cck_cublas_load(where);
}

Test(cublas_load, every_thread_gets_the_same_answer) {
    unsetenv("CCALLOC_CUBLAS");
    enum { N = 8 };
    pthread_t t[N];
    const char *where[N] = {0};
    for (int i = 0; i < N; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, load_in_thread, &where[i]), 0);
    intptr_t st[N];
    for (int i = 0; i < N; i++) {
        void *r;
        pthread_join(t[i], &r);
        st[i] = (intptr_t)r;
    }
    for (int i = 1; i < N; i++) {
        cr_assert_eq(st[i], st[0]);
        cr_assert_eq(where[i], where[0], "one message, shared");
    }
}

Test(cublas_load, a_hostile_list_cannot_overrun_the_message) {
    /* 20,000 entries, each failing with a long reason */
    size_t n = 20000, len = 0;
    char *list = malloc(n * 40);
    cr_assert_not_null(list);
    for (size_t i = 0; i < n; i++)
        len += (size_t)sprintf(list + len, "%s/nonexistent/dir/lib%zu.so", i ? ":" : "", i);
    setenv("CCALLOC_CUBLAS", list, 1);
    free(list);
    const char *where = NULL;
    cr_assert_eq(cck_cublas_load(&where), CCK_ERR_CUBLAS);
    cr_assert(strlen(where) < 4096, "message of %zu bytes", strlen(where));
    cr_assert(strstr(where, "/nonexistent/dir/lib0.so: ") != NULL, "where = %.200s", where);
}

/* Run in a process of its own, started by the next test with LD_LIBRARY_PATH
 * set (the loader reads it only at start); skipped in the plain run. */
Test(cublas_load, soname_step_child) {
    const char *dir = getenv("CCK_TEST_SONAME_DIR");
    if (!dir)
        cr_skip_test("run by the_soname_step_comes_before_the_toolkit_directory");
    unsetenv("CCALLOC_CUBLAS");
    const char *where = NULL;
    cr_assert_eq(cck_cublas_load(&where), CCK_OK, "%s", where);
    char want[4096];
    snprintf(want, sizeof want, "%s/%s", dir, SONAME);
    cr_assert_str_eq(where, want, "the stand-in on LD_LIBRARY_PATH was not taken by its soname");
}

Test(cublas_load, the_soname_step_comes_before_the_toolkit_directory) {
    char dir[] = "/tmp/cck_soname_XXXXXX", link[4096];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(link, sizeof link, "%s/%s", dir, SONAME);
    cr_assert_eq(symlink(CCK_CUBLAS_DOUBLE_current, link), 0);
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    cr_assert_gt(n, 0);
    self[n] = '\0';
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        /* a clean environment: nothing of this Criterion run's reaches the new one */
        char e1[4200], e2[4200];
        snprintf(e1, sizeof e1, "CCK_TEST_SONAME_DIR=%s", dir);
        snprintf(e2, sizeof e2, "LD_LIBRARY_PATH=%s", dir);
        char *const env[] = {e1, e2, NULL};
        execle(self, self, "--filter=cublas_load/soname_step_child", "--jobs=1", "--short-filename", (char *)NULL, env);
        _exit(127);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    unlink(link);
    rmdir(dir);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child run failed (status %#x)", status);
}
