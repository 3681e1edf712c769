/*
 * ccb_pair — cached alloc+free pairs with 1,000 blocks live, for counting
 * instructions per pair under callgrind (bench/scripts/identity.sh).
 *
 *   ccb_pair [PAIRS [CONFIG]]     default 100000 pairs, the default config
 *
 * - The simulated device (1 GiB); 1,000 live blocks of 4-7 KiB, then PAIRS
 *   pairs of an 8 KiB alloc and its free on the NULL stream.
 * - Instructions per pair = (Ir at PAIRS=N2 - Ir at N1) / (N2 - N1): the
 *   setup's cost cancels.
 * - Exit status 1 when any call fails.
 */
#include <ccalloc.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100000;
    const char *conf = argc > 2 ? argv[2] : "";
    cca_upstream *u;
    cca_allocator *a;
    cca_config c;
    static void *live[1000];
    void *p;
    cca_config_default(&c);
    if (cca_upstream_host_create((size_t)1 << 30, &u) != CCA_OK || cca_config_parse(&c, conf) != CCA_OK ||
        cca_create(&c, u, &a) != CCA_OK) {
        fprintf(stderr, "ccb_pair: %s\n", cca_last_error());
        return 1;
    }
    int bad = 0;
    for (int i = 0; i < 1000; i++)
        bad |= cca_alloc(a, 4096 + 512 * (i % 7), NULL, &live[i]) != CCA_OK;
    for (long i = 0; i < n; i++) {
        bad |= cca_alloc(a, 8192, NULL, &p) != CCA_OK;
        bad |= cca_free(a, p) != CCA_OK;
    }
    for (int i = 0; i < 1000; i++)
        bad |= cca_free(a, live[i]) != CCA_OK;
    bad |= cca_destroy(a) != CCA_OK;
    cca_upstream_destroy(u);
    return bad;
}
