/*
 * pool_demo.c — greedy vs growth pooling and empty-cache, on the simulated
 * device, through the public API only. A first look at what ccalloc does:
 *
 *   1. greedy: the arena takes 90% of the device at creation; a second
 *      tenant on the same device then cannot get 20% of it.
 *   2. growth: reserved memory follows what is allocated; freeing leaves it
 *      cached, trim/empty-cache give it back.
 *   3. after empty-cache the device's free memory is back at its start.
 *
 * Build: part of the normal build (target pool_demo); it also serves as the
 * example consumer of the installed package (allocator/examples/consumer).
 */
#include <ccalloc.h>

#include <stdio.h>
#include <string.h>

#define MiB (1024.0 * 1024.0)
#define CHECK(call)                                                                                                    \
    do {                                                                                                               \
        cca_status st_ = (call);                                                                                       \
        if (st_ != CCA_OK) {                                                                                           \
            fprintf(stderr, "%s failed: %s (%s)\n", #call, cca_status_string(st_), cca_last_error());                  \
            return 1;                                                                                                  \
        }                                                                                                              \
    } while (0)

static void show(const char *phase, cca_allocator *a, cca_upstream *dev) {
    cca_stats s;
    size_t free_b = 0, total_b = 0;
    cca_get_stats(a, &s);
    cca_upstream_mem_info(dev, &free_b, &total_b);
    printf("%-34s allocated %8.1f MiB  reserved %8.1f MiB  device free %8.1f MiB  fragmentation %.3f\n", phase,
           s.allocated_bytes / MiB, s.reserved_bytes / MiB, free_b / MiB, s.fragmentation);
}

/* Allocate n tensors of size `each`, touch them, and return how many fit. */
static int fill(cca_allocator *a, void **p, int n, size_t each) {
    int got = 0;
    for (; got < n; got++) {
        if (cca_alloc(a, each, NULL, &p[got]) != CCA_OK)
            break;
        memset(p[got], 0x5a, 4096);
    }
    return got;
}

int main(void) {
    const size_t capacity = 1024u << 20; /* a 1 GiB simulated device */
    cca_upstream *dev;
    CHECK(cca_upstream_host_create(capacity, &dev));
    size_t free0, total;
    CHECK(cca_upstream_mem_info(dev, &free0, &total));
    printf("simulated device (host memory): %.0f MiB, %.0f MiB free\n\n", total / MiB, free0 / MiB);

    cca_config cfg;
    void *p[64];

    printf("== greedy (TensorFlow's default): reserve up front ==\n");
    cca_config_default(&cfg);
    CHECK(cca_config_parse(&cfg, "policy:greedy,greedy_fraction:0.9"));
    cca_allocator *greedy;
    CHECK(cca_create(&cfg, dev, &greedy));
    show("after create, nothing allocated", greedy, dev);
    int n = fill(greedy, p, 8, 32u << 20);
    show("8 x 32 MiB allocated", greedy, dev);
    void *tenant = NULL;
    cca_status st = cca_upstream_alloc(dev, 200u << 20, &tenant);
    printf("second tenant asks the device for 200 MiB: %s\n", st == CCA_OK ? "granted" : "refused (out of memory)");
    if (tenant)
        cca_upstream_free(dev, tenant, 200u << 20);
    for (int i = 0; i < n; i++)
        CHECK(cca_free(greedy, p[i]));
    show("all freed: the arena stays", greedy, dev);
    CHECK(cca_destroy(greedy));

    printf("\n== growth: reserve on demand ==\n");
    cca_config_default(&cfg);
    cca_allocator *growth;
    CHECK(cca_create(&cfg, dev, &growth));
    show("after create", growth, dev);
    n = fill(growth, p, 8, 32u << 20);
    show("8 x 32 MiB allocated", growth, dev);
    for (int i = 0; i < n; i += 2)
        CHECK(cca_free(growth, p[i]));
    show("every other one freed (cached)", growth, dev);
    cca_release_report r;
    CHECK(cca_trim(growth, 160u << 20, &r));
    printf("trim to 160 MiB: released %.0f MiB in %zu segments; %zu pinned by live blocks\n", r.bytes_released / MiB,
           r.segments_released, r.segments_pinned);
    for (int i = 1; i < n; i += 2)
        CHECK(cca_free(growth, p[i]));
    show("all freed", growth, dev);
    CHECK(cca_empty_cache(growth, &r));
    show("after empty-cache", growth, dev);
    size_t free1;
    CHECK(cca_upstream_mem_info(dev, &free1, &total));
    printf("\ndevice free before: %.1f MiB, after empty-cache: %.1f MiB -> %s\n", free0 / MiB, free1 / MiB,
           free0 == free1 ? "fully released, no process restart" : "NOT fully released");
    CHECK(cca_destroy(growth));
    cca_upstream_destroy(dev);
    return free0 == free1 ? 0 : 1;
}
