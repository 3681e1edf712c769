/*
 * cublas.c — where the kernels' cuBLAS functions come from (cublas.h;
 * cck.h, cck_cublas_load; docs/kernels.md, "cuBLAS, loaded").
 *
 * - Owns: one table of cuBLAS functions per process, filled on the first
 *   request (pthread_once) and never changed or closed after; or, when no
 *   library could be loaded, the message saying why, which every later
 *   request answers the same way.
 * - The search, in order (the first library that has every function and
 *   is of the major version compiled against wins):
 *     1. CCALLOC_CUBLAS, when set and not empty: a ':'-separated list of
 *        files or sonames, and nothing else (a wrong name is an error,
 *        never a fallback).
 *     2. A cuBLAS already in the process (RTLD_NOLOAD), such as PyTorch's.
 *     3. libcublas.so.<major> by soname: LD_LIBRARY_PATH, the caller's
 *        RUNPATH, the loader's cache (a toolkit registered with ldconfig).
 *     4. The same file in the toolkit the library was built against
 *        (CCK_CUBLAS_TOOLKIT_DIR, from CMake).
 *   <major> is the header's CUBLAS_VER_MAJOR: the ABI compiled against.
 * - Costs: the first load is ~100 ms (relocating cuBLAS and cuBLASLt);
 *   every later call is a pthread_once check.
 */
#include "cublas.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CCK_STR2(x) #x
#define CCK_STR(x) CCK_STR2(x)
#define CCK_CUBLAS_SONAME "libcublas.so." CCK_STR(CUBLAS_VER_MAJOR)

static pthread_once_t once = PTHREAD_ONCE_INIT;
static cck_cublas table;
static int loaded;        /* the table is filled                  */
static char where[4096];  /* the file loaded, or why none was     */
static size_t where_used; /* bytes of `where` written so far      */

/* Append to the message (cut short, never overrun). */
static void note(const char *fmt, const char *a, const char *b) {
    if (where_used + 1 >= sizeof where)
        return;
    int n = snprintf(where + where_used, sizeof where - where_used, fmt, a, b);
    if (n > 0)
        where_used += (size_t)n < sizeof where - where_used ? (size_t)n : sizeof where - where_used - 1;
}

/* Fill the table from an open library; false and *missing when a function is not there. */
static int resolve(void *h, const char **missing) {
#define CCK_CUBLAS_DLSYM(fn)                                                                                           \
    if (!(*(void **)&table.fn = dlsym(h, #fn))) {                                                                      \
        *missing = #fn;                                                                                                \
        return 0;                                                                                                      \
    }
    CCK_CUBLAS_FUNCTIONS(CCK_CUBLAS_DLSYM)
#undef CCK_CUBLAS_DLSYM
    return 1;
}

/* Is it the major version compiled against? Else its own, in major. A
 * named file can be any cuBLAS; another major version brings its own CUDA
 * runtime beside the one linked. */
static int right_major(void *h, char *major, size_t size) {
    __typeof__(&cublasGetProperty) get = NULL;
    *(void **)&get = dlsym(h, "cublasGetProperty");
    int v = -1;
    if (!get || get(MAJOR_VERSION, &v) != CUBLAS_STATUS_SUCCESS) {
        snprintf(major, size, "%s", "of no known version");
        return 0;
    }
    snprintf(major, size, "%d", v);
    return v == CUBLAS_VER_MAJOR;
}

/* One candidate: true when the table is filled from it. RTLD_NOLOAD
 * candidates that are not loaded leave no note: not being there is normal. */
static int try_open(const char *name, int flags) {
    (void)dlerror();
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL | flags);
    if (!h) {
        if (!(flags & RTLD_NOLOAD)) {
            const char *why = dlerror();
            const char *colon = why ? strstr(why, ": ") : NULL; /* dlerror repeats the name first */
            note("; %s: %s", name, colon ? colon + 2 : (why ? why : "not loaded"));
        }
        return 0;
    }
    const char *missing = NULL;
    char major[32] = "";
    if (!resolve(h, &missing) || !right_major(h, major, sizeof major)) {
        if (missing)
            note("; %s: has no %s", name, missing);
        else
            note("; %s: is cuBLAS %s, not " CCK_STR(CUBLAS_VER_MAJOR), name, major);
        dlclose(h);
        memset(&table, 0, sizeof table);
        return 0;
    }
    /* the file the functions really come from (a soname names no file) */
    Dl_info info;
    const char *file = dladdr(*(void **)&table.cublasCreate_v2, &info) && info.dli_fname ? info.dli_fname : name;
    where_used = 0;
    note("%s%s", file, "");
    return 1;
}

static int try_list(const char *list) {
    char *copy = strdup(list);
    if (!copy) {
        note("; %s%s: no host memory to read it", "CCALLOC_CUBLAS", "");
        return 0;
    }
    int found = 0;
    char *save = NULL;
    for (char *name = strtok_r(copy, ":", &save); name && !found; name = strtok_r(NULL, ":", &save))
        found = try_open(name, 0);
    free(copy);
    return found;
}

static void load(void) {
    note("no cuBLAS %s could be loaded (install the CUDA toolkit's cuBLAS where the loader looks: ldconfig or "
         "LD_LIBRARY_PATH; or name a libcublas.so.%s in CCALLOC_CUBLAS, such as the one pip install nvidia-cublas puts "
         "under site-packages/nvidia/)",
         CCK_STR(CUBLAS_VER_MAJOR), CCK_STR(CUBLAS_VER_MAJOR));
    const char *named = getenv("CCALLOC_CUBLAS");
    if (named && *named) {
        size_t head = where_used;
        loaded = try_list(named);
        if (!loaded && where_used == head) /* only separators: no entry was tried */
            note("; %s%s: names nothing", "CCALLOC_CUBLAS", "");
        if (!loaded)
            note("; %s%s: nothing else is tried when it is set", "CCALLOC_CUBLAS", "");
        return;
    }
    loaded = try_open(CCK_CUBLAS_SONAME, RTLD_NOLOAD) || try_open(CCK_CUBLAS_SONAME, 0);
#ifdef CCK_CUBLAS_TOOLKIT_DIR
    if (!loaded)
        loaded = try_open(CCK_CUBLAS_TOOLKIT_DIR "/" CCK_CUBLAS_SONAME, 0);
#endif
}

cck_status cck_cublas_get(const cck_cublas **out) {
    pthread_once(&once, load);
    *out = loaded ? &table : NULL;
    return loaded ? CCK_OK : CCK_ERR_CUBLAS;
}

cck_status cck_cublas_load(const char **out) {
    const cck_cublas *t = NULL;
    cck_status st = cck_cublas_get(&t);
    if (out)
        *out = where;
    return st;
}
