/* cached alloc+free pairs with 1000 live blocks: instructions per pair under callgrind */
#include <ccalloc.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100000;
    const char *conf = argc > 2 ? argv[2] : "";
    cca_upstream *u; cca_allocator *a; cca_config c;
    cca_upstream_host_create((size_t)1 << 30, &u);
    cca_config_default(&c); cca_config_parse(&c, conf);
    if (cca_create(&c, u, &a) != CCA_OK) return 1;
    static void *live[1000];
    for (int i = 0; i < 1000; i++) cca_alloc(a, 4096 + 512 * (i % 7), NULL, &live[i]);
    void *p;
    for (long i = 0; i < n; i++) { cca_alloc(a, 8192, NULL, &p); cca_free(a, p); }
    for (int i = 0; i < 1000; i++) cca_free(a, live[i]);
    cca_destroy(a); cca_upstream_destroy(u);
    return 0;
}
