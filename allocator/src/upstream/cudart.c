/*
 * cudart.c — where the CUDA upstream's runtime functions come from
 * (cudart.h; docs/python.md, "Reference: the CUDA runtime").
 *
 * Linked (CCA_CUDA_RUNTIME=link, the CMake default): the table is the
 * functions of the libcudart.so libccalloc was linked with.
 *
 * Loaded (CCA_CUDA_RUNTIME=dlopen, CCA_CUDA_DLOPEN; the Python wheel): one
 * library serves machines with and without CUDA. Nothing happens at load
 * time or for the simulated device; the first cca_upstream_cuda_create
 * looks for a runtime, once per process (the answer, found or not, holds
 * until the process ends), trying in order:
 *
 *   1. CCALLOC_CUDART, when set: a ':'-separated list of files or sonames,
 *      and nothing else (a wrong path is an error, never a fallback; the
 *      tests name a missing file or a test double here).
 *   2. A runtime already in the process (RTLD_NOLOAD): libcudart.so.13,
 *      then .12, such as PyTorch's or CuPy's, so that one runtime serves
 *      the program and ccalloc.
 *   3. The NVIDIA wheels beside the ccalloc package: libccalloc sits in
 *      site-packages/ccalloc/lib/, so ../../nvidia/cu13/lib/libcudart.so.13
 *      (pip install nvidia-cuda-runtime) and
 *      ../../nvidia/cuda_runtime/lib/libcudart.so.12
 *      (pip install nvidia-cuda-runtime-cu12), relative to libccalloc.
 *   4. libcudart.so.13, then .12, by soname: LD_LIBRARY_PATH, the linker's
 *      cache (a toolkit registered with ldconfig).
 *   5. /usr/local/cuda/lib64/libcudart.so (a toolkit not registered).
 *
 * A library that loads but lacks a function of the table (a runtime older
 * than 12.5 has no cudaGetDriverEntryPointByVersion) is closed and the
 * search goes on. Found: the table points into it for good (never closed).
 * None: CCA_ERR_NO_DEVICE, the message naming what to install and each
 * place tried with the loader's reason. The runtime's ABI for these
 * functions is the same in CUDA 12 and 13 (the header compiled against
 * fixes the types; the driver's functions are asked by version, 12000).
 */
#ifdef CCA_HAVE_CUDA
#include "cudart.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static void load(void);

/* The file a function of the table comes from, into table->path. */
static void name_file(ccai_cudart *t, const char *otherwise) {
    Dl_info info;
    const char *file = dladdr(*(void **)&t->cudaMalloc, &info) && info.dli_fname ? info.dli_fname : otherwise;
    snprintf(t->path, sizeof t->path, "%s", file);
}

#ifdef CCA_CUDA_DLOPEN

#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
#error "CCA_CUDA_RUNTIME=dlopen looks functions up by their legacy-stream names"
#endif

/* What to install, said first in the message of a failed search. */
#define INSTALL_HINT                                                                                                   \
    "install a CUDA runtime, with the NVIDIA driver: pip install nvidia-cuda-runtime (CUDA 13), pip install "          \
    "nvidia-cuda-runtime-cu12 (CUDA 12) or the CUDA toolkit (or name a libcudart.so in CCALLOC_CUDART)"

static ccai_cudart table;
static char failure[CCAI_ERROR_CAP]; /* empty once the table is filled */

/* Fill the table from an open library; false (and *missing) when one function is not there. */
static bool resolve(void *h, const char **missing) {
#define CCAI_CUDART_DLSYM(fn)                                                                                          \
    if (!(*(void **)&table.fn = dlsym(h, #fn))) {                                                                      \
        *missing = #fn;                                                                                                \
        return false;                                                                                                  \
    }
    CCAI_CUDART_FUNCTIONS(CCAI_CUDART_DLSYM)
#undef CCAI_CUDART_DLSYM
    return true;
}

/* Append "; what" to the list of places tried (cut short, never overrun). */
static void tried(const char *fmt, const char *a, const char *b) {
    size_t used = strlen(failure);
    if (used + 3 >= sizeof failure)
        return;
    snprintf(failure + used, sizeof failure - used, fmt, a, b);
}

/* Try one candidate: true when the table is filled from it. */
static bool try_open(const char *name, int flags) {
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL | flags);
    if (!h) {
        if (!(flags & RTLD_NOLOAD)) {
            const char *why = dlerror();
            /* dlerror starts with the name itself: keep only the reason */
            const char *colon = why ? strstr(why, ": ") : NULL;
            tried("; %s: %s", name, colon ? colon + 2 : (why ? why : "not loaded"));
        }
        return false;
    }
    const char *missing = NULL;
    if (!resolve(h, &missing)) {
        tried("; %s: has no %s (CUDA 12.5 or later is needed)", name, missing);
        dlclose(h);
        return false;
    }
    name_file(&table, name);
    return true;
}

/* Step 1: CCALLOC_CUDART's entries, each tried in turn. */
static bool try_named(const char *list) {
    char *copy = strdup(list);
    if (!copy) {
        tried("; %s%s: no host memory to read it", "CCALLOC_CUDART", "");
        return false;
    }
    bool found = false;
    char *save = NULL;
    for (char *name = strtok_r(copy, ":", &save); name && !found; name = strtok_r(NULL, ":", &save))
        found = try_open(name, 0);
    free(copy);
    return found;
}

/* Step 3: the NVIDIA wheels, relative to this library's own file. */
static bool try_beside_package(void) {
    static const char *const wheels[] = {"nvidia/cu13/lib/libcudart.so.13", "nvidia/cuda_runtime/lib/libcudart.so.12"};
    Dl_info info;
    if (!dladdr((void *)ccai_cudart_get, &info) || !info.dli_fname || !strchr(info.dli_fname, '/'))
        return false;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", info.dli_fname);
    *strrchr(dir, '/') = '\0'; /* .../site-packages/ccalloc/lib */
    for (size_t i = 0; i < sizeof wheels / sizeof *wheels; i++) {
        char path[sizeof dir + 64];
        snprintf(path, sizeof path, "%s/../../%s", dir, wheels[i]);
        if (try_open(path, 0))
            return true;
    }
    return false;
}

static void load(void) {
    static const char *const sonames[] = {"libcudart.so.13", "libcudart.so.12"};
    const size_t n = sizeof sonames / sizeof *sonames;
    snprintf(failure, sizeof failure, "cuda: no CUDA runtime (libcudart) could be loaded: %s. Tried", INSTALL_HINT);
    size_t head = strlen(failure);
    const char *named = getenv("CCALLOC_CUDART");
    bool found = false;
    if (named && *named) {
        found = try_named(named);
    } else {
        for (size_t i = 0; i < n && !found; i++)
            found = try_open(sonames[i], RTLD_NOLOAD);
        found = found || try_beside_package();
        for (size_t i = 0; i < n && !found; i++)
            found = try_open(sonames[i], 0);
        found = found || try_open("/usr/local/cuda/lib64/libcudart.so", 0);
    }
    if (found) {
        failure[0] = '\0';
        return;
    }
    if (strlen(failure) == head) /* nothing to list: CCALLOC_CUDART was only separators */
        tried(" %s%s: names nothing", "CCALLOC_CUDART", "");
    else
        failure[head] = ':'; /* "Tried; a: ..." reads "Tried: a: ..." */
}

cca_status ccai_cudart_get(const ccai_cudart **out) {
    pthread_once(&once, load);
    if (failure[0])
        return cca_set_error(CCA_ERR_NO_DEVICE, "%s", failure);
    *out = &table;
    return CCA_OK;
}

#else /* linked */

#define CCAI_CUDART_LINKED(fn) .fn = fn,
static ccai_cudart table = {CCAI_CUDART_FUNCTIONS(CCAI_CUDART_LINKED)};
#undef CCAI_CUDART_LINKED

static void load(void) {
    name_file(&table, "libcudart (linked)");
}

cca_status ccai_cudart_get(const ccai_cudart **out) {
    pthread_once(&once, load);
    *out = &table;
    return CCA_OK;
}

#endif /* CCA_CUDA_DLOPEN */
#endif /* CCA_HAVE_CUDA */
