/*
 * test_cuda_upstream.c — allocator/src/upstream_cuda.c on a real GPU (label
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
 */
#include "alloc_test_util.h"

#include <criterion/criterion.h>
#include "gpu_required.h"
#include <string.h>
#ifdef CCA_TEST_CUDART
#include <cuda_runtime.h>
#endif

#define TOLERANCE (1 * MiB)

static cca_upstream *cuda_or_skip(void) {
    cca_upstream *u = NULL;
    cca_status st = cca_upstream_cuda_create(0, &u);
    if (st == CCA_ERR_NO_DEVICE)
        CCA_NO_GPU("no GPU: %s", cca_last_error());
    cr_assert_eq(st, CCA_OK, "cca_upstream_cuda_create: %s", cca_last_error());
    cr_assert_str_eq(cca_upstream_name(u), "cuda:0");
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

static size_t distance(size_t x, size_t y) {
    return x > y ? x - y : y - x;
}

Test(cuda_upstream, empty_cache_gives_the_device_memory_back) {
    cca_upstream *u = cuda_or_skip();
    size_t start = device_free_warm(u);
    cca_allocator *a = tu_allocator(u, NULL);
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
    cr_assert_leq(distance(end, start), TOLERANCE, "device free %zu at start, %zu after empty-cache", start, end);
    tu_teardown(a, u);
}

Test(cuda_upstream, greedy_arena_is_released_too) {
    cca_upstream *u = cuda_or_skip();
    size_t start = device_free_warm(u);
    cca_allocator *a = tu_allocator(u, "policy:greedy,greedy_bytes:256M");
    size_t during = device_free(u);
    cr_assert_geq(start - during + TOLERANCE, 256 * MiB);
    void *p = tu_alloc(a, 100 * MiB, (cca_stream)NULL);
    tu_free(a, p);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    cr_assert_leq(distance(device_free(u), start), TOLERANCE);
    tu_teardown(a, u);
}

Test(cuda_upstream, oom_on_the_device_is_reported_and_recovered) {
    cca_upstream *u = cuda_or_skip();
    size_t free_b = device_free(u);
    cca_allocator *a = tu_allocator(u, "log_oom:0");
    void *p = (void *)1;
    cr_assert_eq(cca_alloc(a, free_b + 64 * GiB, NULL, &p), CCA_ERR_OUT_OF_MEMORY);
    cr_assert_null(p);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.ooms, 1);
    cr_assert_eq(s.reserved_bytes, 0);
    p = tu_alloc(a, 1 * MiB, NULL);
    tu_free(a, p);
    tu_teardown(a, u);
}

/* ---- virtual memory (CUDA VMM through the vm_* ops) ---------------------------- */

/* Reserve a range, map granules [0,1) and [1,4) by two calls, use them as
 * one range (written across the boundary and read back), then release
 * granule by granule: granule 2 alone (part of the second map) gives its
 * memory back at once; unmapping it again, or a run containing it, is
 * refused with what is mapped unchanged; one unmap spanning both maps
 * ([0,2)) and one of granule 3 finish. The driver's free count is checked
 * at each step, the data of the granules that stay where cudart is linked;
 * at the end the device is back where it started and the stats are exact. */
Test(cuda_upstream, vm_map_unmap_round_trip) {
    cca_upstream *u = cuda_or_skip();
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
    /* granule 1 is unmapped by the driver before it reaches granule 2, then
     * mapped again: mapped, but its contents are lost */
    cr_assert_eq(cca_upstream_vm_unmap(u, p + g, 3 * g), CCA_ERR_UPSTREAM, "a run with a hole was unmapped");
    cr_assert_not_null(strstr(cca_last_error(), "only mapped granules"), "message: %s", cca_last_error());
    cca_upstream_get_stats(u, &s);
    cr_assert_eq(s.vm_mapped_bytes, 3 * g);
    cr_assert_eq(s.vm_unmap_calls, 1);
    cr_assert_leq(distance(device_free(u), after_one), TOLERANCE, "a refused unmap changed the device's free count");
#ifdef CCA_TEST_CUDART
    cr_assert_eq(cudaMemcpy(host, p + g / 2, sizeof host, cudaMemcpyDeviceToHost), cudaSuccess, "granule 0");
    for (size_t i = 0; i < sizeof host; i++)
        cr_assert_eq(host[i], 0x5a, "byte %zu of granule 0 after the unmaps", i);
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

/* A map larger than the device fails with OOM and leaves nothing mapped
 * (cuMemCreate refuses the first granule that does not fit; the granules
 * mapped before it are unmapped); one that fits still works. */
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
