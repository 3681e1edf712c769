/*
 * pinning_demo.c — how long-lived small tensors pin memory, and what the
 * release report says about it (the worked example of docs/tuning.md).
 *
 * On a 1 GiB simulated device: four times a 32 MiB + 4 KiB tensor followed by
 * a long-lived 1.5 MiB one; free the large tensors; trim to 64 MiB; empty the
 * cache; free the small tensors; empty the cache again. Each step prints the
 * release report: bytes released, segments kept, and the pinned segments with
 * the live bytes pinning them and the free bytes trapped around them.
 *
 *   build/allocator/pinning_demo                 defaults + CCALLOC_CONF
 *   CCALLOC_CONF=expandable:0,medium_pool:0 build/allocator/pinning_demo
 *                                                PyTorch's layout (the pools shape
 *                                                classic segments only)
 *   build/allocator/pinning_demo CONFIG          an explicit config string
 *                                                (CCALLOC_CONF is then not read)
 */
#include <ccalloc.h>

#include <stdio.h>

#define MiB ((size_t)1 << 20)

static void report(const char *what, const cca_release_report *r) {
    char a[32], b[32], c[32], d[32];
    printf("%-10s released %s in %zu segs; still reserved %s; kept %zu; pinned %zu (live %s, free trapped %s)\n", what,
           cca_format_bytes(r->bytes_released, a, 32), r->segments_released,
           cca_format_bytes(r->bytes_still_reserved, b, 32), r->segments_kept, r->segments_pinned,
           cca_format_bytes(r->live_bytes_pinning, c, 32), cca_format_bytes(r->free_bytes_pinned, d, 32));
}

static int fail(const char *what) {
    printf("%s: %s\n", what, cca_last_error());
    return 1;
}

int main(int argc, char **argv) {
    cca_upstream *dev;
    cca_allocator *a;
    cca_config cfg;
    cca_release_report r;
    cca_stats s;
    if (cca_upstream_host_create(1024 * MiB, &dev) != CCA_OK)
        return fail("device");
    if (argc > 1) { /* explicit config: CCALLOC_CONF is not read */
        cca_config_default(&cfg);
        if (cca_config_parse(&cfg, argv[1]) != CCA_OK)
            return fail("config");
        if (cca_create(&cfg, dev, &a) != CCA_OK)
            return fail("create");
    } else if (cca_create(NULL, dev, &a) != CCA_OK) { /* defaults + CCALLOC_CONF */
        return fail("create");
    }
    cca_get_config(a, &cfg);
    printf("in force: medium_pool=%d max_reserved=%zu\n", cfg.medium_pool, cfg.max_reserved);
    void *big[4], *small[4];
    for (int i = 0; i < 4; i++) { /* 4 x (32 MiB + 4 KiB tensor, then a long-lived 1.5 MiB one) */
        if (cca_alloc(a, 32 * MiB + 4096, NULL, &big[i]) != CCA_OK ||
            cca_alloc(a, 3 * MiB / 2, NULL, &small[i]) != CCA_OK)
            return fail("alloc");
    }
    for (int i = 0; i < 4; i++)
        cca_free(a, big[i]);
    cca_get_stats(a, &s);
    printf("after freeing the large tensors: allocated %.2f MiB reserved %.2f MiB cached %.2f MiB largest free %.2f "
           "MiB fragmentation %.3f\n",
           s.allocated_bytes / (double)MiB, s.reserved_bytes / (double)MiB, s.cached_bytes / (double)MiB,
           s.largest_free_block / (double)MiB, s.fragmentation);
    cca_trim(a, 64 * MiB, &r);
    report("trim(64M)", &r);
    cca_empty_cache(a, &r);
    report("empty", &r);
    for (int i = 0; i < 4; i++)
        cca_free(a, small[i]);
    cca_empty_cache(a, &r);
    report("empty", &r);
    cca_destroy(a);
    cca_upstream_destroy(dev);
    return 0;
}
