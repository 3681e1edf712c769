/*
 * test_cuda_upstream.c — allocator/src/upstream/cuda.c on a real GPU (label
 * gpu). Skips, saying why, when cca_upstream_cuda_create reports
 * CCA_ERR_NO_DEVICE (no GPU, or libccalloc built without CUDA); fails
 * instead under CCA_REQUIRE_GPU=1 (gpu_required.h).
 *
 * The check that matters: after cca_empty_cache, the driver's own free count
 * (cudaMemGetInfo through cca_upstream_mem_info) is back to its value before
 * the allocator existed. That "before" is read after one warm-up allocation
 * has come and gone (the driver may keep bookkeeping of its own after a
 * process's first cudaMalloc), and the tolerance is TOLERANCE bytes; anything
 * the allocator kept would be a whole segment (>= 2 MiB) and fail.
 *
 * The same check runs through the driver's virtual memory: the vm_* ops
 * alone, then the allocator's expandable segments (pages unmapped by trim
 * while live blocks stay, a request above the device's free memory). The
 * allocator's defaults (expandable segments over the upstream's default
 * backing, whole maps) and classic segments (expandable:0) both run the
 * first checks; granule by granule unmapping needs CCA_VM_PAGES, asked for
 * where a test's subject is that backing.
 * Where cudart is linked (CCA_TEST_CUDART) the blocks' data are written and
 * read back on the device too, and a thread with no current context is
 * checked to have none after the upstream's ops. scripts/gpu_session.sh runs this suite under
 * compute-sanitizer as well (its `sanitizer` step).
 */
#include "alloc_test_util.h"
#include "pages_rule.h"

#include <criterion/criterion.h>
#include "gpu_required.h"
#include <stdio.h>
#include <string.h>
#ifdef CCA_TEST_CUDART
#include <cuda_runtime.h>
#include <cudaTypedefs.h>
#include <pthread.h>
#endif

#define TOLERANCE (1 * MiB)

#ifdef CCA_TEST_CUDA_DOUBLE
/* Built as test_cuda_double (tests/allocator/cuda_double.cmake): the same checks on
 * the driver double, which also counts every call that broke a documented
 * driver rule and every runtime call on a thread with no context: none may
 * happen, in any test. */
#include "cuda_double.h"
#include <stdio.h>
#include <stdlib.h>
static void no_driver_rule_broken(void) {
    cuda_double_stats s = cuda_double_get_stats();
    if (s.violations == 0 && s.implicit_contexts == 0)
        return;
    /* Criterion reports an assertion in .fini but does not fail the test
     * for it: a crash it does count */
    fprintf(stderr, "driver double: %lu rule(s) broken (last: %s); %lu runtime call(s) on a thread with no context "
                    "(first: %s)\n",
            s.violations, s.last_violation, s.implicit_contexts, s.first_implicit);
    abort();
}
TestSuite(cuda_upstream, .fini = no_driver_rule_broken);
#endif

static cca_upstream *cuda_or_skip(void) {
    cca_upstream *u = NULL;
    cca_status st = cca_upstream_cuda_create(0, &u);
    if (st == CCA_ERR_NO_DEVICE)
        CCA_NO_GPU("no GPU: %s", cca_last_error());
    cr_assert_eq(st, CCA_OK, "cca_upstream_cuda_create: %s", cca_last_error());
    cr_assert_str_eq(cca_upstream_name(u), "cuda:0");
    return u;
}

/* Device 0 with options o; skipped without a GPU. */
static cca_upstream *cuda_with_or_skip(const cca_cuda_options *o) {
    cca_upstream *u = NULL;
    cca_status st = cca_upstream_cuda_create_with(o, &u);
    if (st == CCA_ERR_NO_DEVICE)
        CCA_NO_GPU("no GPU: %s", cca_last_error());
    cr_assert_eq(st, CCA_OK, "cca_upstream_cuda_create_with: %s", cca_last_error());
    cr_assert_str_eq(cca_upstream_name(u), "cuda:0");
    return u;
}

/* Device 0 with the pages backing (CCA_VM_PAGES: one physical allocation
 * per page, any run of pages unmapped) and the driver's granularity. */
static cca_upstream *cuda_pages_backing_or_skip(void) {
    cca_upstream *u = cuda_with_or_skip(&(cca_cuda_options){.device = 0, .vm_backing = CCA_VM_PAGES});
    cr_assert_eq(cca_upstream_vm_backing(u), CCA_VM_PAGES);
    return u;
}

static size_t device_free(cca_upstream *u) {
    size_t free_b = 0, total_b = 0;
    cr_assert_eq(cca_upstream_mem_info(u, &free_b, &total_b), CCA_OK, "%s", cca_last_error());
    cr_assert_gt(total_b, 0);
    cr_assert_leq(free_b, total_b);
    return free_b;
}

/* The driver's free count right after one allocation has come and gone: the
 * first cudaMalloc of a process may leave driver bookkeeping behind, which
 * is not the allocator's to give back. */
static size_t device_free_warm(cca_upstream *u) {
    void *p = NULL;
    cr_assert_eq(cca_upstream_alloc(u, 64 * MiB, &p), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_free(u, p, 64 * MiB), CCA_OK, "%s", cca_last_error());
    return device_free(u);
}

#ifdef CCA_TEST_CUDART
/* The test's own runtime calls (cudaMemset, cudaMemcpy: reading and writing
 * the blocks) run in device 0's primary context, made current by the test
 * itself: the runtime would otherwise make it current implicitly, which the
 * driver double counts against the upstream. */
static void test_context(void) {
    cr_assert_eq(cudaSetDevice(0), cudaSuccess);
}
#endif

static size_t distance(size_t x, size_t y) {
    return x > y ? x - y : y - x;
}

/* With the defaults (expandable segments over whole maps) and classic
 * segments. */
static void empty_cache_gives_back(const char *conf) {
    cca_upstream *u = cuda_or_skip();
    size_t start = device_free_warm(u);
    cca_allocator *a = tu_allocator(u, conf);
    enum { N = 64 };
    void *p[N];
    for (int i = 0; i < N; i++)
        p[i] = tu_alloc(a, i % 8 == 0 ? (size_t)(i + 1) * MiB : (size_t)(i + 1) * 3000, NULL);
    cca_stats s = tu_stats(a);
    size_t during = device_free(u);
    cr_assert_geq(start - during + TOLERANCE, s.reserved_bytes, "the device shows what was reserved: %zu of %zu",
                  start - during, s.reserved_bytes);
    for (int i = 0; i < N; i++)
        tu_free(a, p[i]);
    cca_release_report r;
    cr_assert_eq(cca_empty_cache(a, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(r.bytes_released, s.reserved_bytes);
    cr_assert_eq(tu_stats(a).reserved_bytes, 0);
    size_t end = device_free(u);
    cr_assert_leq(distance(end, start), TOLERANCE, "[%s] device free %zu at start, %zu after empty-cache",
                  conf ? conf : "defaults", start, end);
    tu_teardown(a, u);
}

Test(cuda_upstream, empty_cache_gives_the_device_memory_back) {
    empty_cache_gives_back(NULL);
    empty_cache_gives_back("expandable:0");
}

Test(cuda_upstream, greedy_arena_is_released_too) {
    const char *confs[2] = {"policy:greedy,greedy_bytes:256M", "policy:greedy,greedy_bytes:256M,expandable:0"};
    for (int c = 0; c < 2; c++) {
        cca_upstream *u = cuda_or_skip();
        size_t start = device_free_warm(u);
        cca_allocator *a = tu_allocator(u, confs[c]);
        size_t during = device_free(u);
        cr_assert_geq(start - during + TOLERANCE, 256 * MiB, "[%s]", confs[c]);
        void *p = tu_alloc(a, 100 * MiB, (cca_stream)NULL);
        tu_free(a, p);
        cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
        cr_assert_leq(distance(device_free(u), start), TOLERANCE, "[%s]", confs[c]);
        tu_teardown(a, u);
    }
}

Test(cuda_upstream, oom_on_the_device_is_reported_and_recovered) {
    const char *confs[2] = {"log_oom:0", "log_oom:0,expandable:0"};
    for (int c = 0; c < 2; c++) {
        cca_upstream *u = cuda_or_skip();
        size_t free_b = device_free(u);
        cca_allocator *a = tu_allocator(u, confs[c]);
        void *p = (void *)1;
        cr_assert_eq(cca_alloc(a, free_b + 64 * GiB, NULL, &p), CCA_ERR_OUT_OF_MEMORY, "[%s]", confs[c]);
        cr_assert_null(p);
        cca_stats s = tu_stats(a);
        cr_assert_eq(s.ooms, 1);
        cr_assert_eq(s.reserved_bytes, 0);
        p = tu_alloc(a, 1 * MiB, NULL);
        tu_free(a, p);
        tu_teardown(a, u);
    }
}

#ifdef CCA_TEST_CUDART
/* What a thread saw of its current context around the upstream's ops. */
typedef struct context_probe {
    cca_upstream *u;
    PFN_cuCtxGetCurrent_v4000 get_current;
    CUcontext before, after;
    cca_status st;
    char why[256];
} context_probe;

static void *ops_on_a_fresh_thread(void *arg) {
    context_probe *p = arg;
    p->before = p->after = (CUcontext)p; /* not NULL until asked */
    if (p->get_current(&p->before) != CUDA_SUCCESS)
        return NULL;
    void *x = NULL, *base = NULL;
    size_t free_b, total_b, g = 0;
    p->st = cca_upstream_alloc(p->u, 2 * MiB, &x);
    if (p->st == CCA_OK)
        p->st = cca_upstream_free(p->u, x, 2 * MiB);
    if (p->st == CCA_OK)
        p->st = cca_upstream_mem_info(p->u, &free_b, &total_b);
    if (p->st == CCA_OK)
        p->st = cca_upstream_synchronize(p->u);
    if (p->st == CCA_OK && cca_upstream_has_vm(p->u) && (p->st = cca_upstream_vm_granularity(p->u, &g)) == CCA_OK &&
        (p->st = cca_upstream_vm_reserve(p->u, 4 * g, &base)) == CCA_OK) {
        if ((p->st = cca_upstream_vm_map(p->u, base, 2 * g)) == CCA_OK)
            p->st = cca_upstream_vm_unmap(p->u, base, 2 * g);
        cca_status rel = cca_upstream_vm_release(p->u, base, 4 * g);
        if (p->st == CCA_OK)
            p->st = rel;
    }
    if (p->st != CCA_OK)
        snprintf(p->why, sizeof p->why, "%s", cca_last_error());
    (void)p->get_current(&p->after);
    return NULL;
}

/* A thread with no current context (this test's, and a fresh one) has none
 * after cca_upstream_cuda_create and the upstream's ops either: each op makes the device's primary context
 * current and puts back what was there, nothing. Restoring with
 * cudaGetDevice/cudaSetDevice instead would leave device 0's primary
 * context current (and create it, on a machine where the allocator works
 * on another GPU: PyTorch #94864). */
Test(cuda_upstream, a_thread_without_a_context_is_left_without_one) {
    cca_upstream *u = cuda_or_skip();
    context_probe p = {.u = u};
    enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    cr_assert_eq(
        cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", (void **)&p.get_current, 12000, cudaEnableDefault, &q),
        cudaSuccess);
    cr_assert_eq(q, cudaDriverEntryPointSuccess);
    CUcontext mine = (CUcontext)&p;
    cr_assert_eq(p.get_current(&mine), CUDA_SUCCESS);
    cr_assert_null(mine, "cca_upstream_cuda_create left context %p current on this thread, which had none",
                   (void *)mine);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, ops_on_a_fresh_thread, &p), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(p.st, CCA_OK, "the ops on the fresh thread: %s", p.why);
    cr_assert_null(p.before, "a fresh thread has no current context");
    cr_assert_null(p.after, "the upstream left context %p current on a thread that had none", (void *)p.after);
    cca_upstream_destroy(u);
}
#endif

/* ---- virtual memory (CUDA VMM through the vm_* ops) ---------------------------- */

/* Reserve a range, map granules [0,1) and [1,4) by two calls, use them as
 * one range (written across the boundary and read back), then release
 * granule by granule: granule 2 alone (part of the second map) gives its
 * memory back at once; unmapping it again, or a run containing it, or
 * mapping granule 3 again, is refused with what is mapped and its contents
 * unchanged (checked before the driver is called); one unmap spanning
 * both maps ([0,2)) and one of granule 3 finish. The driver's free count is checked
 * at each step, the data of the granules that stay where cudart is linked;
 * at the end the device is back where it started and the stats are exact. */
Test(cuda_upstream, vm_map_unmap_round_trip) {
    cca_upstream *u = cuda_pages_backing_or_skip();
    cr_assert(cca_upstream_has_vm(u), "the CUDA upstream offers no virtual memory on this GPU");
    size_t g = 0;
    cr_assert_eq(cca_upstream_vm_granularity(u, &g), CCA_OK, "%s", cca_last_error());
    cr_log_info("CUDA VMM granularity: %zu bytes", g);
    cr_assert(g >= 64 * KiB && (g & (g - 1)) == 0, "granularity %zu", g);
    size_t start = device_free_warm(u);
    void *base = NULL;
    cr_assert_eq(cca_upstream_vm_reserve(u, 64 * g, &base), CCA_OK, "%s", cca_last_error());
    cr_assert_leq(distance(device_free(u), start), TOLERANCE, "reserving address space costs no memory");
    char *p = base;
    cr_assert_eq(cca_upstream_vm_map(u, p, g), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_map(u, p + g, 3 * g), CCA_OK, "%s", cca_last_error());
    size_t during = device_free(u);
    cr_assert_leq(distance(start - during, 4 * g), TOLERANCE, "device lost %zu for %zu mapped", start - during, 4 * g);
    cca_upstream_stats s;
    cca_upstream_get_stats(u, &s);
    cr_assert_eq(s.vm_reserved_bytes, 64 * g);
    cr_assert_eq(s.vm_mapped_bytes, 4 * g);
    cr_assert_eq(s.vm_map_calls, 2);
#ifdef CCA_TEST_CUDART
    test_context();
    cr_assert_eq(cudaMemset(p + g / 2, 0x5a, g), cudaSuccess, "write across the two maps");
    cr_assert_eq(cudaMemset(p + 3 * g, 0x33, g), cudaSuccess, "write granule 3");
    unsigned char host[4096];
    cr_assert_eq(cudaMemcpy(host, p + g - 2048, sizeof host, cudaMemcpyDeviceToHost), cudaSuccess);
    for (size_t i = 0; i < sizeof host; i++)
        cr_assert_eq(host[i], 0x5a, "byte %zu around the boundary of the maps", i);
    cr_assert_eq(cudaDeviceSynchronize(), cudaSuccess);
#endif
    /* granule 2, the middle of the second map: its memory goes back alone */
    cr_assert_eq(cca_upstream_vm_unmap(u, p + 2 * g, g), CCA_OK, "%s", cca_last_error());
    cca_upstream_get_stats(u, &s);
    cr_assert_eq(s.vm_mapped_bytes, 3 * g);
    cr_assert_eq(s.vm_unmap_calls, 1);
    size_t after_one = device_free(u);
    cr_assert_leq(distance(after_one - during, g), TOLERANCE, "unmapping one granule gave back %zu, not %zu",
                  after_one - during, g);
    /* a range with a granule not mapped is refused; what is mapped stays */
    cr_assert_eq(cca_upstream_vm_unmap(u, p + 2 * g, g), CCA_ERR_UPSTREAM, "an unmapped granule was unmapped");
    cr_assert_eq(cca_upstream_vm_unmap(u, p + 8 * g, 2 * g), CCA_ERR_UPSTREAM, "a range never mapped was unmapped");
    /* a run with a hole in the middle: refused before granule 1 is touched */
    cr_assert_eq(cca_upstream_vm_unmap(u, p + g, 3 * g), CCA_ERR_UPSTREAM, "a run with a hole was unmapped");
    cr_assert_not_null(strstr(cca_last_error(), "only mapped granules"), "message: %s", cca_last_error());
    cr_assert_not_null(strstr(cca_last_error(), "granule 2 "), "the hole is named: %s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_map(u, p + 2 * g, 2 * g), CCA_ERR_UPSTREAM, "a map over mapped granule 3");
    cr_assert_not_null(strstr(cca_last_error(), "already mapped (a map overlaps no mapped granule"), "message: %s",
                       cca_last_error());
    cr_assert_eq(cca_upstream_vm_release(u, base, 64 * g), CCA_ERR_UPSTREAM, "a release with granules mapped");
    cca_upstream_get_stats(u, &s);
    cr_assert_eq(s.vm_mapped_bytes, 3 * g);
    cr_assert_eq(s.vm_unmap_calls, 1);
    cr_assert_leq(distance(device_free(u), after_one), TOLERANCE, "a refused unmap changed the device's free count");
#ifdef CCA_TEST_CUDART
    test_context();
    cr_assert_eq(cudaMemcpy(host, p + g / 2, sizeof host, cudaMemcpyDeviceToHost), cudaSuccess, "granule 0");
    for (size_t i = 0; i < sizeof host; i++)
        cr_assert_eq(host[i], 0x5a, "byte %zu of granule 0 after the unmaps", i);
    cr_assert_eq(cudaMemcpy(host, p + g, sizeof host, cudaMemcpyDeviceToHost), cudaSuccess, "granule 1");
    for (size_t i = 0; i < sizeof host; i++)
        cr_assert_eq(host[i], 0x5a, "byte %zu of granule 1 after the refused unmap: its contents stay", i);
    cr_assert_eq(cudaMemcpy(host, p + 4 * g - sizeof host, sizeof host, cudaMemcpyDeviceToHost), cudaSuccess,
                 "granule 3");
    for (size_t i = 0; i < sizeof host; i++)
        cr_assert_eq(host[i], 0x33, "byte %zu of granule 3 after the unmaps", i);
    cr_assert_eq(cudaMemset(p + g, 0x11, g), cudaSuccess, "granule 1 is mapped and writable");
    cr_assert_eq(cudaDeviceSynchronize(), cudaSuccess);
#endif
    /* one unmap across both maps, one of what is left */
    cr_assert_eq(cca_upstream_vm_unmap(u, p, 2 * g), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_unmap(u, p + 3 * g, g), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_release(u, base, 64 * g), CCA_OK, "%s", cca_last_error());
    cca_upstream_get_stats(u, &s);
    cr_assert_eq(s.vm_reserved_bytes, 0);
    cr_assert_eq(s.vm_mapped_bytes, 0);
    cr_assert_eq(s.bytes_in_use, 0);
    cr_assert_eq(s.vm_unmap_calls, 3);
    cr_assert_leq(distance(device_free(u), start), TOLERANCE, "device free %zu at start, %zu after", start,
                  device_free(u));
    cca_upstream_destroy(u);
}

/* A map larger than the device fails with OOM and leaves nothing mapped:
 * refused before anything is created, being above the device's free
 * memory (one cudaMemGetInfo, not a create and a map per granule of free
 * memory and as many unmaps); one that fits still works. */
Test(cuda_upstream, vm_map_refused_leaves_nothing) {
    cca_upstream *u = cuda_or_skip();
    cr_assert(cca_upstream_has_vm(u), "no virtual memory on this GPU");
    size_t g = 0, free_b = 0, total_b = 0;
    cr_assert_eq(cca_upstream_vm_granularity(u, &g), CCA_OK);
    cr_assert_eq(cca_upstream_mem_info(u, &free_b, &total_b), CCA_OK);
    size_t too_big = (total_b / g + 16) * g;
    size_t start = device_free_warm(u);
    void *base = NULL;
    cr_assert_eq(cca_upstream_vm_reserve(u, too_big, &base), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_map(u, base, too_big), CCA_ERR_OUT_OF_MEMORY, "%s", cca_last_error());
    cr_assert_not_null(strstr(cca_last_error(), "bytes free (cudaMemGetInfo); nothing mapped"),
                       "refused before any granule was created: %s", cca_last_error());
    cca_upstream_stats s;
    cca_upstream_get_stats(u, &s);
    cr_assert_eq(s.vm_mapped_bytes, 0);
    cr_assert_eq(s.vm_failed_maps, 1);
    cr_assert_leq(distance(device_free(u), start), TOLERANCE);
    cr_assert_eq(cca_upstream_vm_map(u, base, g), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_unmap(u, base, g), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_release(u, base, too_big), CCA_OK, "%s", cca_last_error());
    cr_assert_leq(distance(device_free(u), start), TOLERANCE);
    cca_upstream_destroy(u);
}

/* ---- expandable segments over CUDA VMM ------------------------------------------ */

/* pages: the pages backing; else cca_upstream_cuda_create's (whole maps). */
static cca_upstream *cuda_vm_or_skip(bool pages, size_t *granularity) {
    cca_upstream *u = pages ? cuda_pages_backing_or_skip() : cuda_or_skip();
    cr_assert(cca_upstream_has_vm(u), "the CUDA upstream offers no virtual memory on this GPU");
    cr_assert_eq(cca_upstream_vm_granularity(u, granularity), CCA_OK, "%s", cca_last_error());
    return u;
}

#ifdef CCA_TEST_CUDART
/* Fill a block on the device with one byte value. */
static void device_fill(void *p, size_t size, int value) {
    test_context();
    cr_assert_eq(cudaMemset(p, value, size), cudaSuccess, "cudaMemset of %zu bytes at %p", size, p);
}

/* The first and last (up to) 4 KiB of a device block hold `value`. */
static void device_expect(const void *p, size_t size, int value, const char *what) {
    unsigned char host[4096];
    size_t n = size < sizeof host ? size : sizeof host;
    const unsigned char *ends[2] = {p, (const unsigned char *)p + size - n};
    test_context();
    for (int e = 0; e < 2; e++) {
        cr_assert_eq(cudaMemcpy(host, ends[e], n, cudaMemcpyDeviceToHost), cudaSuccess, "%s: copy back", what);
        for (size_t i = 0; i < n; i++)
            cr_assert_eq(host[i], (unsigned char)value, "%s: byte %zu of its %s is %u, not %d", what, i,
                         e ? "end" : "start", host[i], value);
    }
}
#else
static void device_fill(void *p, size_t size, int value) {
    (void)p, (void)size, (void)value;
}
static void device_expect(const void *p, size_t size, int value, const char *what) {
    (void)p, (void)size, (void)value, (void)what;
}
#endif

/* n blocks of mixed sizes (MiB-sized every third, tens of KiB between),
 * each filled on the device with its own byte. */
static void alloc_filled(cca_allocator *a, void **p, size_t *size, int n) {
    for (int i = 0; i < n; i++) {
        size[i] = i % 3 == 0 ? (size_t)(i + 1) * MiB + 123 : (size_t)(i + 1) * 37 * KiB;
        p[i] = tu_alloc(a, size[i], NULL);
        device_fill(p[i], size[i], i % 250 + 1);
    }
}

/* The allocator's page-granular life on a real GPU, checked against the
 * driver's own free count at every step: blocks of mixed sizes in
 * expandable segments (mapped bytes = reserved bytes = what the device
 * lost), every other one freed, trim(0) unmapping the pages that lie wholly
 * in free blocks while live blocks stay (the device gains exactly what the
 * report says; the live blocks' data survive), the freed sizes allocated
 * again (pages mapped again, data written and read), and empty-cache giving
 * the device back where it started. */
static void follow_the_driver(cca_upstream *u, size_t g) {
    size_t start = device_free_warm(u);
    cca_allocator *a = tu_allocator(u, "expandable:1");
    enum { N = 48 };
    void *p[N];
    size_t size[N];
    alloc_filled(a, p, size, N);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.page_size, g, "expandable segments use the upstream's granularity");
    cr_assert_geq(s.expandable_segments, 1);
    cr_assert_eq(s.mapped_bytes, s.reserved_bytes, "every reserved byte is a mapped page");
    cr_assert_eq(s.mapped_bytes % g, 0);
    size_t during = device_free(u);
    cr_assert_leq(distance(start - during, s.mapped_bytes), TOLERANCE, "device lost %zu for %zu mapped", start - during,
                  s.mapped_bytes);
    for (int i = 1; i < N; i += 2)
        tu_free(a, p[i]);
    cca_release_report r;
    cr_assert_eq(cca_trim(a, 0, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_gt(r.pages_unmapped, 0, "free pages between live blocks were unmapped");
    cr_assert_eq(r.bytes_unmapped, r.pages_unmapped * g);
    cca_stats t = tu_stats(a);
    cr_assert_eq(t.mapped_bytes, s.mapped_bytes - r.bytes_released);
    cr_assert_gt(t.mapped_bytes, 0, "live blocks keep their pages");
    size_t trimmed = device_free(u);
    cr_assert_leq(distance(trimmed - during, r.bytes_released), TOLERANCE, "device gained %zu, report says %zu",
                  trimmed - during, r.bytes_released);
    tu_check(a);
    for (int i = 0; i < N; i += 2)
        device_expect(p[i], size[i], i % 250 + 1, "a live block after trim");
    for (int i = 1; i < N; i += 2) {
        p[i] = tu_alloc(a, size[i], NULL);
        device_fill(p[i], size[i], i % 250 + 1);
    }
    for (int i = 0; i < N; i++)
        device_expect(p[i], size[i], i % 250 + 1, "a block after the pages were mapped again");
    cr_assert_leq(distance(start - device_free(u), tu_stats(a).mapped_bytes), TOLERANCE);
    for (int i = 0; i < N; i++)
        tu_free(a, p[i]);
    cr_assert_eq(cca_empty_cache(a, &r), CCA_OK, "%s", cca_last_error());
    t = tu_stats(a);
    cr_assert_eq(t.reserved_bytes, 0);
    cr_assert_eq(t.mapped_bytes, 0);
    cr_assert_eq(t.expandable_segments, 0, "an empty address range is released by empty-cache");
    cr_assert_leq(distance(device_free(u), start), TOLERANCE, "device free %zu at start, %zu after empty-cache", start,
                  device_free(u));
    tu_teardown(a, u);
}

Test(cuda_upstream, expandable_segments_follow_the_driver) {
    size_t g = 0;
    cca_upstream *u = cuda_vm_or_skip(true, &g);
    follow_the_driver(u, g);
}

/* The device's minimum granularity (one throwaway upstream asks it), then an
 * upstream with the pages backing whose pages are `times` of those. */
static cca_upstream *cuda_pages_or_skip(size_t times, size_t *min, size_t *page) {
    cca_upstream *probe = cuda_vm_or_skip(false, min);
    cca_upstream_destroy(probe);
    cca_cuda_options o = {.device = 0, .vm_granularity = times * *min, .vm_backing = CCA_VM_PAGES};
    cca_upstream *u = NULL;
    cr_assert_eq(cca_upstream_cuda_create_with(&o, &u), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_granularity(u, page), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(*page, times * *min, "the granularity asked for is the upstream's");
    return u;
}

/* The same life in pages of 4 of the driver's granules: each page one
 * physical allocation, unmapped whole by trim; the allocator's page_size
 * follows the upstream's. */
Test(cuda_upstream, expandable_segments_follow_the_driver_in_larger_pages) {
    size_t min = 0, page = 0;
    cca_upstream *u = cuda_pages_or_skip(4, &min, &page);
    follow_the_driver(u, page);
}

/* Over whole maps (CCA_VM_WHOLE_MAPS: one cuMemCreate per map), maps of at
 * most 8 MiB (the growth rule's test hook, pages_rule.h; the least step
 * and the ahead's cap are the defaults): the same
 * blocks, the upper half freed as one run so that whole maps lie in it,
 * trim(0) giving back exactly what the report says (maps, never part of
 * one: the device would refuse), the live half's data intact, the freed
 * sizes allocated again, and empty-cache giving the device back. */
Test(cuda_upstream, expandable_segments_follow_the_driver_over_whole_maps) {
    size_t g = 0;
    cca_upstream *probe = cuda_vm_or_skip(false, &g);
    cca_upstream_destroy(probe);
    cca_cuda_options o = {.device = 0, .vm_backing = CCA_VM_WHOLE_MAPS};
    cca_upstream *u = NULL;
    cr_assert_eq(cca_upstream_cuda_create_with(&o, &u), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_backing(u), CCA_VM_WHOLE_MAPS);
    size_t start = device_free_warm(u);
    cca_allocator *a = tu_allocator(u, "expandable:1");
    ccai_pages_rule_set(a, 20 * MiB, 64 * MiB, 8 * MiB);
    enum { N = 48 };
    void *p[N];
    size_t size[N];
    alloc_filled(a, p, size, N);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.vm_backing, CCA_VM_WHOLE_MAPS);
    cr_assert_eq(s.mapped_bytes, s.reserved_bytes);
    size_t during = device_free(u);
    cr_assert_leq(distance(start - during, s.mapped_bytes), TOLERANCE, "device lost %zu for %zu mapped", start - during,
                  s.mapped_bytes);
    for (int i = N / 2; i < N; i++)
        tu_free(a, p[i]);
    cca_release_report r;
    cr_assert_eq(cca_trim(a, 0, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_gt(r.pages_unmapped, 0, "the maps lying in the freed half went");
    cca_stats t = tu_stats(a);
    cr_assert_eq(t.mapped_bytes, s.mapped_bytes - r.bytes_released);
    size_t trimmed = device_free(u);
    cr_assert_leq(distance(trimmed - during, r.bytes_released), TOLERANCE, "device gained %zu, report says %zu",
                  trimmed - during, r.bytes_released);
    tu_check(a);
    for (int i = 0; i < N / 2; i++)
        device_expect(p[i], size[i], i % 250 + 1, "a live block after trim");
    for (int i = N / 2; i < N; i++) {
        p[i] = tu_alloc(a, size[i], NULL);
        device_fill(p[i], size[i], i % 250 + 1);
    }
    for (int i = 0; i < N; i++)
        device_expect(p[i], size[i], i % 250 + 1, "a block after the maps were made again");
    for (int i = 0; i < N; i++)
        tu_free(a, p[i]);
    cr_assert_eq(cca_empty_cache(a, &r), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(tu_stats(a).reserved_bytes, 0);
    cr_assert_leq(distance(device_free(u), start), TOLERANCE, "device free %zu at start, %zu after empty-cache", start,
                  device_free(u));
    tu_teardown(a, u);
}

/* cca_upstream_cuda_create_with's arguments: checked before any device is
 * touched (so the same statuses with or without a GPU, and without CUDA),
 * then against the device's minimum granularity. */
Test(cuda_upstream, cuda_options_are_checked) {
    cca_upstream *u = (cca_upstream *)&u;
    cca_cuda_options o = {.device = 0};
    cr_assert_eq(cca_upstream_cuda_create_with(NULL, &u), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_null(u, "out cleared on a refusal");
    cr_assert_not_null(strstr(cca_last_error(), "options are NULL"), "%s", cca_last_error());
    cr_assert_eq(cca_upstream_cuda_create_with(&o, NULL), CCA_ERR_INVALID_ARGUMENT);
    const size_t bad[] = {3 * MiB, 256, 1000, (size_t)2 << 30, SIZE_MAX, (SIZE_MAX >> 1) + 1, 6 * MiB};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        o.vm_granularity = bad[i];
        u = (cca_upstream *)&u;
        cr_assert_eq(cca_upstream_cuda_create_with(&o, &u), CCA_ERR_INVALID_ARGUMENT, "vm_granularity %zu", bad[i]);
        cr_assert_null(u);
        cr_assert_not_null(strstr(cca_last_error(), "is not a power of two"), "%zu: %s", bad[i], cca_last_error());
    }
    o.vm_granularity = 0;
    /* the two enumerations: each bad value refused, the message naming the
     * field and both values as ccalloc.h defines them */
    struct {
        int *field;
        const char *name, *n0, *n1;
        int v0, v1;
    } enums[] = {{&o.vm_backing, "vm_backing", "CCA_VM_PAGES", "CCA_VM_WHOLE_MAPS", CCA_VM_PAGES, CCA_VM_WHOLE_MAPS},
                 {&o.host_memory, "host_memory", "CCA_HOST_MEMORY_PINNED", "CCA_HOST_MEMORY_REGISTERED",
                  CCA_HOST_MEMORY_PINNED, CCA_HOST_MEMORY_REGISTERED}};
    const int bad_value[] = {2, -1, 1000};
    for (size_t e = 0; e < sizeof enums / sizeof *enums; e++) {
        for (size_t i = 0; i < sizeof bad_value / sizeof *bad_value; i++) {
            *enums[e].field = bad_value[i];
            u = (cca_upstream *)&u;
            cr_assert_eq(cca_upstream_cuda_create_with(&o, &u), CCA_ERR_INVALID_ARGUMENT, "%s %d", enums[e].name,
                         bad_value[i]);
            cr_assert_null(u);
            char w0[48], w1[48];
            snprintf(w0, sizeof w0, "%s (%d)", enums[e].n0, enums[e].v0);
            snprintf(w1, sizeof w1, "%s (%d)", enums[e].n1, enums[e].v1);
            cr_assert(strstr(cca_last_error(), enums[e].name) && strstr(cca_last_error(), "is neither ") &&
                          strstr(cca_last_error(), w0) && strstr(cca_last_error(), w1),
                      "%s %d: %s (want %s and %s)", enums[e].name, bad_value[i], cca_last_error(), w0, w1);
        }
        *enums[e].field = enums[e].v0;
    }
    o.host_memory = CCA_HOST_MEMORY_PINNED;
    o.vm_granularity = CCA_CUDA_MAX_VM_GRANULARITY; /* the largest accepted: the device decides */
    cca_status st = cca_upstream_cuda_create_with(&o, &u);
    if (st == CCA_ERR_NO_DEVICE)
        CCA_NO_GPU("no GPU: %s", cca_last_error());
    cr_assert_eq(st, CCA_OK, "%s", cca_last_error());
    cca_upstream_destroy(u);
    size_t min = 0;
    u = cuda_vm_or_skip(false, &min);
    cca_upstream_destroy(u);
    if (min / 2 >= CCA_GRANULARITY) { /* a power of two, but less than the device's minimum */
        o.vm_granularity = min / 2;
        cr_assert_eq(cca_upstream_cuda_create_with(&o, &u), CCA_ERR_INVALID_ARGUMENT);
        cr_assert_null(u);
        cr_assert_not_null(strstr(cca_last_error(), "minimum granularity"), "%s", cca_last_error());
    }
    o.vm_granularity = 0; /* the driver's minimum, as cca_upstream_cuda_create */
    cr_assert_eq(cca_upstream_cuda_create_with(&o, &u), CCA_OK, "%s", cca_last_error());
    size_t g = 0;
    cr_assert_eq(cca_upstream_vm_granularity(u, &g), CCA_OK);
    cr_assert_eq(g, min);
    cca_upstream_destroy(u);
    o.device = -1;
    cr_assert_eq(cca_upstream_cuda_create_with(&o, &u), CCA_ERR_INVALID_ARGUMENT, "device -1");
}

/* Sleep and wake of the default domain over either host memory
 * (cca_cuda_options.host_memory): while asleep the driver's free count is
 * back where it was before the blocks within one page and the host holds
 * their live bytes; after the wake every block holds its bytes at its
 * address; then empty-cache gives the device back. */
static void sleep_and_wake_with(int host_memory) {
    cca_upstream *u = cuda_with_or_skip(&(cca_cuda_options){.device = 0, .host_memory = host_memory});
    if (!cca_upstream_has_vm(u))
        CCA_NO_GPU("no virtual memory management on this GPU: %s", cca_last_error());
    size_t g = 0;
    cr_assert_eq(cca_upstream_vm_granularity(u, &g), CCA_OK);
    size_t before = device_free_warm(u);
    cca_allocator *a = tu_allocator(u, "expandable:1");
    enum { N = 7 };
    void *p[N];
    size_t size[N];
    alloc_filled(a, p, size, N);
    cca_sleep_report r;
    cr_assert_eq(cca_domain_sleep(a, NULL, 0, &r), CCA_OK, "host_memory %d: %s", host_memory, cca_last_error());
    size_t live = 0;
    for (int i = 0; i < N; i++)
        live += size[i];
    cr_assert_geq(r.bytes_copied, live, "every live byte copied");
    cr_assert_geq(r.host_bytes, r.bytes_copied);
    size_t copied = r.bytes_copied;
    cr_assert_leq(distance(device_free(u), before), g + TOLERANCE, "asleep: the device's free count is back");
    cr_assert_eq(tu_stats(a).reserved_bytes, 0);
    cr_assert_eq(cca_domain_wake(a, NULL, &r), CCA_OK, "host_memory %d: %s", host_memory, cca_last_error());
    cr_assert_eq(r.bytes_copied, copied, "the wake copies back what the sleep copied");
    for (int i = 0; i < N; i++) {
        char what[64];
        snprintf(what, sizeof what, "host_memory %d, block %d after the wake", host_memory, i);
        device_expect(p[i], size[i], i % 250 + 1, what);
        tu_free(a, p[i]);
    }
    cca_upstream_stats us;
    cr_assert_eq(cca_upstream_get_stats(u, &us), CCA_OK);
    cr_assert_eq(us.host_bytes_in_use, 0, "the wake gave the host memory back");
    tu_empty_all(a, u);
    cr_assert_leq(distance(device_free(u), before), TOLERANCE);
    tu_destroy_clean(a, u);
    cca_upstream_destroy(u);
}

Test(cuda_upstream, sleep_and_wake_over_pinned_host_memory) {
    sleep_and_wake_with(CCA_HOST_MEMORY_PINNED);
}

Test(cuda_upstream, sleep_and_wake_over_registered_host_memory) {
    sleep_and_wake_with(CCA_HOST_MEMORY_REGISTERED);
}

/* A page of 4 granules is ONE physical allocation: a map of 3 pages makes 3
 * of them (on the double: 3 cuMemCreate calls of a page each), the device
 * loses 3 pages, an unmap of the middle page gives exactly one page back
 * while the pages around it keep their data, and a map refused by the
 * driver's second create leaves nothing mapped. */
Test(cuda_upstream, a_larger_page_is_one_allocation) {
    size_t min = 0, page = 0;
    cca_upstream *u = cuda_pages_or_skip(4, &min, &page);
    size_t start = device_free_warm(u);
    void *base = NULL;
    cr_assert_eq(cca_upstream_vm_reserve(u, 8 * page, &base), CCA_OK, "%s", cca_last_error());
    cr_assert_eq((uintptr_t)base % page, 0, "the range is aligned to the page");
    cr_assert_eq(cca_upstream_vm_map(u, base, min), CCA_ERR_INVALID_ARGUMENT, "a driver granule is less than a page");
#ifdef CCA_TEST_CUDA_DOUBLE
    unsigned long creates = cuda_double_calls("cuMemCreate");
#endif
    cr_assert_eq(cca_upstream_vm_map(u, base, 3 * page), CCA_OK, "%s", cca_last_error());
#ifdef CCA_TEST_CUDA_DOUBLE
    cr_assert_eq(cuda_double_calls("cuMemCreate") - creates, 3, "one physical allocation per page");
    cr_assert_eq(cuda_double_get_stats().physical_bytes[0], 3 * page);
    cr_assert_eq(cuda_double_get_stats().handles, 3);
#endif
    char *p = base;
    size_t during = device_free(u);
    cr_assert_leq(distance(start - during, 3 * page), TOLERANCE, "device lost %zu for 3 pages of %zu", start - during,
                  page);
    device_fill(p, 3 * page, 0x5a);
    cr_assert_eq(cca_upstream_vm_unmap(u, p + page, min), CCA_ERR_INVALID_ARGUMENT, "part of a page");
    cr_assert_eq(cca_upstream_vm_unmap(u, p + page, page), CCA_OK, "%s", cca_last_error());
    cr_assert_leq(distance(device_free(u) - during, page), TOLERANCE, "one page back");
    device_expect(p, page, 0x5a, "page 0 after page 1 went");
    device_expect(p + 2 * page, page, 0x5a, "page 2 after page 1 went");
    cr_assert_eq(cca_upstream_vm_unmap(u, p, page), CCA_OK);
    cr_assert_eq(cca_upstream_vm_unmap(u, p + 2 * page, page), CCA_OK);
#ifdef CCA_TEST_CUDA_DOUBLE
    cr_assert_eq(cuda_double_get_stats().physical_bytes[0], 0);
    cuda_double_fail("cuMemCreate", 2, CUDA_ERROR_OUT_OF_MEMORY, false);
    cr_assert_eq(cca_upstream_vm_map(u, base, 3 * page), CCA_ERR_OUT_OF_MEMORY, "the second page's create failed");
    cuda_double_clear_faults();
    cr_assert_eq(cuda_double_get_stats().physical_bytes[0], 0, "the first page was unmapped again");
    cr_assert_eq(cuda_double_get_stats().mapped_bytes, 0);
#endif
    cr_assert_eq(cca_upstream_vm_release(u, base, 8 * page), CCA_OK, "%s", cca_last_error());
    cr_assert_leq(distance(device_free(u), start), TOLERANCE);
    cca_upstream_destroy(u);
}

/* A request the device cannot hold although it is below its total (above
 * its free memory): its map is refused, before anything is created (a
 * request of several maps, over whole maps, by the allocator's question of
 * the device's free memory before the first; one map by the upstream's
 * own check), and
 * cca_alloc returns OOM with every live block and its data intact and
 * nothing leaked on the device (PyTorch's expandable segments assert
 * there). Afterwards small requests still work and empty-cache returns
 * everything. A map refused part-way (cuMemCreate failing on some granule
 * although the free count said it fits) cannot be provoked on purpose on a
 * GPU; its undo is the simulated device's fault tests' (test_expandable_stress). */
Test(cuda_upstream, expandable_oom_below_the_total_leaves_nothing_behind) {
    size_t g = 0;
    cca_upstream *u = cuda_vm_or_skip(false, &g);
    size_t start = device_free_warm(u), free_b = 0, total_b = 0;
    cr_assert_eq(cca_upstream_mem_info(u, &free_b, &total_b), CCA_OK);
    cca_allocator *a = tu_allocator(u, "expandable:1,log_oom:0");
    void *live = tu_alloc(a, 64 * MiB, NULL);
    device_fill(live, 64 * MiB, 0x77);
    /* memory taken outside the allocator: the device's free count falls,
     * its total does not, so the request below passes the total check */
    void *held = NULL;
    size_t hold = total_b / 4 / g * g;
    cr_assert_eq(cca_upstream_alloc(u, hold, &held), CCA_OK, "%s", cca_last_error());
    size_t free_now = device_free(u);
    cca_stats before = tu_stats(a);
    /* The request: more than the device has free, yet less than its total
     * minus what this process holds (the allocator's pages, the tenant's),
     * so only the memory others use (the context's ~0.5 GiB on an H100)
     * stands in its way. That gap is all the room there is: the request
     * goes halfway into it, in whole granules, and needs a few of them. */
    size_t ours = before.reserved_bytes + hold;
    size_t room = total_b > free_now + ours ? total_b - free_now - ours : 0;
    if (room < 4 * g) {
        size_t left = room;
        tu_free(a, live);
        cr_assert_eq(cca_upstream_free(u, held, hold), CCA_OK, "%s", cca_last_error());
        tu_teardown(a, u);
        cr_skip_test("the device's memory used outside this process is %zu bytes, under 4 granules (%zu): no "
                     "request can be above its free memory and below its total",
                     left, 4 * g);
    }
    size_t want = free_now + room / 2 / g * g;
    cr_assert_lt(want + ours, total_b, "the request must stay below the device's total");
    cr_assert_gt(want, free_now, "the request must be above the device's free memory");
    cca_upstream_stats ub = tu_upstream_stats(u);
    void *p = (void *)1;
    cr_assert_eq(cca_alloc(a, want, NULL, &p), CCA_ERR_OUT_OF_MEMORY, "%s", cca_last_error());
    cr_assert_null(p);
    cca_stats after = tu_stats(a);
    cr_assert_eq(after.ooms, before.ooms + 1);
    cr_assert_eq(after.allocated_bytes, before.allocated_bytes);
    cr_assert_eq(after.active_blocks, before.active_blocks);
    cr_assert_leq(after.mapped_bytes, before.mapped_bytes, "the failed map left no page behind");
    cca_upstream_stats ua = tu_upstream_stats(u);
    cr_assert_eq(ua.vm_map_calls, ub.vm_map_calls, "no map was made");
    if (want > 128 * MiB + g) /* whole maps: several maps, the allocator asked the device first */
        cr_assert_eq(ua.vm_failed_maps, ub.vm_failed_maps, "refused before any map was asked");
    else if (want + g <= 128 * MiB) /* one map: the upstream's own refusal */
        cr_assert_gt(ua.vm_failed_maps, ub.vm_failed_maps, "the upstream refused the map");
    cr_assert_leq(distance(device_free(u), free_now + (before.mapped_bytes - after.mapped_bytes)), TOLERANCE,
                  "device free %zu after the OOM, %zu before it", device_free(u), free_now);
    tu_check(a);
    device_expect(live, 64 * MiB, 0x77, "the live block after the OOM");
    void *small = tu_alloc(a, 3 * MiB, NULL);
    device_fill(small, 3 * MiB, 0x12);
    device_expect(small, 3 * MiB, 0x12, "a block allocated after the OOM");
    tu_free(a, small);
    tu_free(a, live);
    cr_assert_eq(cca_upstream_free(u, held, hold), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(tu_stats(a).reserved_bytes, 0);
    cr_assert_leq(distance(device_free(u), start), TOLERANCE, "device free %zu at start, %zu at the end", start,
                  device_free(u));
    tu_teardown(a, u);
}
