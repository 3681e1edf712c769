/*
 * upstream_host.c — a simulated device of fixed capacity over host memory.
 *
 * It lets every allocator path (OOM, retry, trim, release) run on a machine
 * without a GPU. Pointers are real, aligned to CCA_ALIGNMENT and writable, so
 * kernels and pattern checks can use them. The capacity is a budget, not a
 * pre-reservation: `used` counts what all tenants hold, alloc fails with
 * CCA_ERR_OUT_OF_MEMORY past `capacity`, and mem_info reports
 * (capacity - used, capacity), like cudaMemGetInfo on a shared GPU.
 *
 * Events: host work is synchronous, so an event is complete when recorded
 * (record returns a non-NULL token, query returns CCA_OK at once).
 *
 * Pages are touched only by the caller, so a 16 GiB simulated device on a
 * 24 GiB machine costs nothing until used.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct host_device {
    pthread_mutex_t lock;
    size_t capacity;
    size_t used;
} host_device;

static cca_status host_alloc(void *ctx, size_t size, void **ptr) {
    host_device *d = ctx;
    pthread_mutex_lock(&d->lock);
    size_t free_now = d->capacity - d->used;
    bool fits = size <= free_now;
    if (fits)
        d->used += size;
    pthread_mutex_unlock(&d->lock);
    if (!fits)
        return ccai_fail(CCA_ERR_OUT_OF_MEMORY, "host device: %zu bytes requested, %zu of %zu free", size, free_now,
                         d->capacity);
    void *p = aligned_alloc(CCA_ALIGNMENT, size);
    if (!p) {
        pthread_mutex_lock(&d->lock);
        d->used -= size;
        pthread_mutex_unlock(&d->lock);
        return ccai_fail(CCA_ERR_OUT_OF_MEMORY, "host device: host memory exhausted (%zu bytes)", size);
    }
    *ptr = p;
    return CCA_OK;
}

static cca_status host_free(void *ctx, void *ptr, size_t size) {
    host_device *d = ctx;
    pthread_mutex_lock(&d->lock);
    if (size > d->used) {
        pthread_mutex_unlock(&d->lock);
        return ccai_fail(CCA_ERR_UPSTREAM, "host device: free of %zu bytes but only %zu in use", size, d->used);
    }
    d->used -= size;
    pthread_mutex_unlock(&d->lock);
    free(ptr);
    return CCA_OK;
}

static cca_status host_mem_info(void *ctx, size_t *free_bytes, size_t *total_bytes) {
    host_device *d = ctx;
    pthread_mutex_lock(&d->lock);
    *free_bytes = d->capacity - d->used;
    *total_bytes = d->capacity;
    pthread_mutex_unlock(&d->lock);
    return CCA_OK;
}

static cca_status host_event_record(void *ctx, cca_stream s, void **event) {
    (void)s;
    *event = ctx; /* any non-NULL token: complete at once */
    return CCA_OK;
}

static cca_status host_event_query(void *ctx, void *event) {
    (void)ctx;
    (void)event;
    return CCA_OK;
}

static cca_status host_event_destroy(void *ctx, void *event) {
    (void)ctx;
    (void)event;
    return CCA_OK;
}

static void host_destroy(void *ctx) {
    host_device *d = ctx;
    pthread_mutex_destroy(&d->lock);
    free(d);
}

cca_status cca_upstream_host_create(size_t capacity, cca_upstream **out) {
    if (!out)
        return ccai_fail(CCA_ERR_INVALID_ARGUMENT, "cca_upstream_host_create: out is NULL");
    *out = NULL;
    if (capacity == 0)
        return ccai_fail(CCA_ERR_INVALID_ARGUMENT, "cca_upstream_host_create: capacity must be > 0");
    host_device *d = calloc(1, sizeof *d);
    if (!d)
        return ccai_fail(CCA_ERR_OUT_OF_MEMORY, "cca_upstream_host_create: host malloc failed");
    pthread_mutex_init(&d->lock, NULL);
    d->capacity = capacity;
    static const cca_upstream_ops ops = {
        .alloc = host_alloc,
        .free = host_free,
        .mem_info = host_mem_info,
        .synchronize = NULL,
        .event_record = host_event_record,
        .event_query = host_event_query,
        .event_destroy = host_event_destroy,
        .destroy = host_destroy,
        .name = "host-simulated",
    };
    cca_status st = ccai_upstream_wrap(&ops, d, out);
    if (st != CCA_OK)
        host_destroy(d);
    return st;
}
