/* An engine linking libccalloc: one header, no CUDA header needed. */
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
