/*
 * consumer/main.c — a program outside this repository using the *installed*
 * ccalloc package, the way a downstream project would.
 *
 * What it shows:
 *   - only <ccalloc.h> is included: no CUDA header, no internal header; the
 *     public API is the whole contract (upstream, allocator, release report);
 *   - linking through the installed package, not the build tree, in either
 *     of the two supported ways (scripts/test.sh builds and runs both):
 *       CMake:      find_package(ccalloc 0.1 REQUIRED) and
 *                   target_link_libraries(consumer PRIVATE ccalloc::ccalloc)
 *                   (CMakeLists.txt next to this file; configure with
 *                   -DCMAKE_PREFIX_PATH=<install prefix>);
 *       pkg-config: cc main.c $(pkg-config --cflags --libs ccalloc)
 *                   with PKG_CONFIG_PATH=<install prefix>/lib/pkgconfig;
 *   - the allocator's life in miniature: alloc, free (cached, not returned),
 *     empty-cache (every byte back to the upstream, checked), destroy. It
 *     uses the host-simulated device, so it runs on any machine.
 */
#include <ccalloc.h>

#include <stdio.h>

int main(void) {
    cca_upstream *dev;
    cca_allocator *a;
    void *p;
    cca_release_report r;
    if (cca_upstream_host_create(64u << 20, &dev) != CCA_OK || cca_create(NULL, dev, &a) != CCA_OK)
        return 1;
    if (cca_alloc(a, 1u << 20, NULL, &p) != CCA_OK || cca_free(a, p) != CCA_OK)
        return 1;
    if (cca_empty_cache(a, &r) != CCA_OK || r.bytes_still_reserved != 0)
        return 1;
    printf("consumer: linked ccalloc %d.%d.%d, released %zu bytes\n", CCA_VERSION_MAJOR, CCA_VERSION_MINOR,
           CCA_VERSION_PATCH, r.bytes_released);
    cca_destroy(a);
    cca_upstream_destroy(dev);
    return 0;
}
