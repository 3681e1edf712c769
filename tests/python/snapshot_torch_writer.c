/*
 * snapshot_torch_writer.c — writes one allocator's state in both snapshot
 * forms for tests/python/test_snapshot_torch.py, which compares them:
 *
 *     snapshot_torch_writer classic|expandable DEVICE OUT
 *
 * writes OUT.pickle (cca_write_snapshot_torch for DEVICE) and OUT.json
 * (cca_write_snapshot_json, stats included) of the same moment, after a
 * fixed script that leaves every state PyTorch's tools show: live blocks
 * in the small, medium and large pools on two streams, a free hole, a
 * block freed while another stream's event is outstanding (pending), a
 * block in a memory domain, an OOM, and (expandable) pages unmapped by a
 * trim between live blocks, so that a segment has several mapped runs.
 * Then (OUT-after.pickle) the pending free completed and one block freed,
 * for _memory_viz.compare. Exit status 0, or 1 with a message.
 *
 * The upstream is the simulated device (the pages backing, CCA_VM_PAGES:
 * the trim unmaps pages between live blocks) behind a custom upstream whose
 * events complete only when the script says so (the simulated device's
 * complete at once, so nothing would stay pending). Classic segments are
 * asked for with expandable:0.
 */
#include <ccalloc.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB ((size_t)1 << 20)
#define S1 ((cca_stream)0x1000)
#define S2 ((cca_stream)0x2000)

/* ---- an upstream whose events wait for `events_done` ----------------------- */

typedef struct held {
    cca_upstream *dev; /* the simulated device doing the work */
    bool events_done;
} held;

static cca_status h_alloc(void *ctx, size_t size, void **ptr) {
    return cca_upstream_alloc(((held *)ctx)->dev, size, ptr);
}
static cca_status h_free(void *ctx, void *ptr, size_t size) {
    return cca_upstream_free(((held *)ctx)->dev, ptr, size);
}
static cca_status h_mem_info(void *ctx, size_t *free_b, size_t *total_b) {
    return cca_upstream_mem_info(((held *)ctx)->dev, free_b, total_b);
}
static cca_status h_sync(void *ctx) {
    ((held *)ctx)->events_done = true;
    return CCA_OK;
}
static cca_status h_record(void *ctx, cca_stream s, void **event) {
    (void)ctx;
    *event = (void *)((uintptr_t)s | 1);
    return CCA_OK;
}
static cca_status h_query(void *ctx, void *event) {
    (void)event;
    return ((held *)ctx)->events_done ? CCA_OK : CCA_ERR_NOT_READY;
}
static cca_status h_destroy_event(void *ctx, void *event) {
    (void)ctx, (void)event;
    return CCA_OK;
}
static cca_status h_granularity(void *ctx, size_t *bytes) {
    return cca_upstream_vm_granularity(((held *)ctx)->dev, bytes);
}
static cca_status h_reserve(void *ctx, size_t size, void **base) {
    return cca_upstream_vm_reserve(((held *)ctx)->dev, size, base);
}
static cca_status h_release(void *ctx, void *base, size_t size) {
    return cca_upstream_vm_release(((held *)ctx)->dev, base, size);
}
static cca_status h_map(void *ctx, void *addr, size_t size) {
    return cca_upstream_vm_map(((held *)ctx)->dev, addr, size);
}
static cca_status h_unmap(void *ctx, void *addr, size_t size) {
    return cca_upstream_vm_unmap(((held *)ctx)->dev, addr, size);
}

static int fail(const char *what) {
    fprintf(stderr, "snapshot_torch_writer: %s: %s\n", what, cca_last_error());
    return 1;
}

static int write_both(const cca_allocator *a, int device, const char *out, const char *suffix, bool json) {
    char path[4096];
    snprintf(path, sizeof path, "%s%s.pickle", out, suffix);
    FILE *f = fopen(path, "wb");
    if (!f || cca_write_snapshot_torch(a, device, f) != CCA_OK || fclose(f) != 0)
        return fail(path);
    if (!json)
        return 0;
    snprintf(path, sizeof path, "%s%s.json", out, suffix);
    f = fopen(path, "w");
    if (!f || cca_write_snapshot_json(a, f) != CCA_OK || fclose(f) != 0)
        return fail(path);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 4 || (strcmp(argv[1], "classic") && strcmp(argv[1], "expandable"))) {
        fprintf(stderr, "usage: snapshot_torch_writer classic|expandable DEVICE OUT\n");
        return 2;
    }
    bool expandable = strcmp(argv[1], "expandable") == 0;
    int device = atoi(argv[2]);
    held h = {NULL, false};
    cca_host_options o = {.capacity = 512 * MiB, .vm_backing = CCA_VM_PAGES};
    if (cca_upstream_host_create_with(&o, &h.dev) != CCA_OK)
        return fail("host upstream");
    cca_upstream_ops ops = {h_alloc,         h_free, h_mem_info,         h_sync,        h_record,  h_query,
                            h_destroy_event, NULL,   "host-held-events", h_granularity, h_reserve, h_release,
                            h_map,           h_unmap,  CCA_VM_PAGES,       NULL, NULL, NULL, NULL, NULL};
    cca_upstream *u;
    if (cca_upstream_custom_create(&ops, &h, &u) != CCA_OK)
        return fail("custom upstream");
    cca_config c;
    cca_config_default(&c);
    if (cca_config_parse(&c, expandable ? "history:4096,log_oom:0,expandable:1"
                                        : "history:4096,log_oom:0,expandable:0") != CCA_OK)
        return fail("config");
    cca_allocator *a;
    if (cca_create(&c, u, &a) != CCA_OK)
        return fail("cca_create");
    cca_domain *d;
    if (cca_domain_create(a, "model", &d) != CCA_OK)
        return fail("domain");

    void *small1, *small2, *small3, *medium, *large, *pend, *in_d, *oom, *gap1, *gap2;
    if (cca_alloc(a, 1000, NULL, &small1) || cca_alloc(a, 3000, NULL, &small2) || cca_alloc(a, 777, NULL, &small3) ||
        cca_alloc(a, 2 * MiB + 100, S1, &medium) || cca_alloc(a, 12 * MiB, S1, &large) ||
        cca_alloc(a, 6 * MiB, S1, &gap1) || cca_alloc(a, 6 * MiB, S1, &gap2) || cca_alloc(a, 3 * MiB, S1, &pend) ||
        cca_alloc_in(a, d, 5000, S2, &in_d))
        return fail("alloc");
    if (cca_free(a, small2) || cca_free(a, gap1)) /* holes */
        return fail("free");
    if (cca_alloc(a, 1024 * MiB, S1, &oom) != CCA_ERR_OUT_OF_MEMORY) /* more than the device */
        return fail("the OOM");
    if (expandable && cca_trim(a, 0, NULL) != CCA_OK) /* unmaps gap1's whole pages: several mapped runs */
        return fail("trim");
    h.events_done = false;                                   /* the trim synchronized */
    if (cca_record_stream(a, pend, S2) || cca_free(a, pend)) /* pending until the event completes */
        return fail("pending free");
    if (write_both(a, device, argv[3], "", true))
        return 1;

    h.events_done = true; /* the pending free completes at the next poll */
    void *more;
    if (cca_free(a, small3) || cca_alloc(a, 512, NULL, &more))
        return fail("after");
    if (write_both(a, device, argv[3], "-after", true))
        return 1;

    if (cca_free(a, small1) || cca_free(a, more) || cca_free(a, medium) || cca_free(a, large) || cca_free(a, gap2) ||
        cca_free(a, in_d) || cca_domain_destroy(a, d, 0, NULL) || cca_destroy(a) != CCA_OK)
        return fail("teardown");
    cca_upstream_destroy(u);
    cca_upstream_destroy(h.dev);
    return 0;
}
