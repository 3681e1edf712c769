/*
 * upstream_host.c — a simulated device of fixed capacity over host memory,
 * made to behave like a GPU so that every allocator path (OOM, retry, trim,
 * release) runs, and is measured, on a machine without one.
 *
 * Address space. At creation the device reserves ONE range of address space
 * the size of its capacity (rounded up to the host page), with
 *     mmap(NULL, range, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE)
 * which costs no memory: no page exists until one is touched. Every alloc is
 * placed inside that range by the device itself, so addresses depend only on
 * the sequence of calls made on this device, never on what else the process
 * did (glibc's malloc would hand out different addresses after other work,
 * and best fit breaks ties by address: figures would drift between runs).
 *
 * Placement is FIRST FIT BY ADDRESS over a sorted array of free extents:
 *     free[0..n): {off, len}, off strictly increasing, no two touching
 * (touching extents are merged on free). An alloc takes the lowest extent
 * that fits, from its start; a free inserts its extent and merges it with its
 * neighbours. A second sorted array holds the live allocations {off, size as
 * asked}: a free must name exactly one of them (pointer and size), as
 * cudaFree takes exactly what cudaMalloc gave; anything else (a double free,
 * another size, an interior pointer) is refused and changes nothing. Sizes are rounded up to the host page (the unit mprotect works
 * in), as a GPU rounds cudaMalloc to its own page (2 MiB on current NVIDIA
 * GPUs): capacity and mem_info count rounded bytes, so a capacity that is not
 * a page multiple cannot be allocated whole, and one under a page not at
 * all. Cost: O(n) per alloc and O(log n + n) per free (binary searches,
 * memmove), n = live allocations (free extents <= n + 1); upstream calls are
 * rare by design.
 *
 * Pages live only while allocated. Alloc makes its pages accessible
 * (mprotect PROT_READ|PROT_WRITE; the kernel then hands out zero pages on
 * first touch). Free maps fresh PROT_NONE pages over the extent
 * (mmap MAP_FIXED), which gives the old pages back to the OS at once — the
 * process's resident memory drops — and makes any later touch fault, like a
 * use-after-cudaFree on a GPU (which faults as an illegal address).
 *
 * Driver costs. Optional busy-waits per alloc and per free model what a real
 * driver charges (cudaMalloc tens of microseconds, cudaFree also waits for
 * the device), so a strategy that calls the upstream many times more often
 * than another is also slower by that much. They spin outside the lock, on
 * CLOCK_MONOTONIC, and are charged to failed allocs as well (a refused
 * cudaMalloc costs as much as a granted one).
 *
 * Events: host work is synchronous, so an event is complete when recorded
 * (record returns a non-NULL token, query returns CCA_OK at once).
 */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

typedef struct extent {
    size_t off, len;
} extent;

typedef struct host_device {
    pthread_mutex_t lock;
    size_t capacity; /* as given: mem_info's total                           */
    size_t used;     /* page-rounded bytes allocated                          */
    size_t page;
    char *base; /* the reserved range: [base, base + range)                  */
    size_t range;
    extent *free; /* sorted by off, never touching                         */
    size_t nfree, capfree;
    extent *live; /* sorted by off; len = the size the alloc was asked for  */
    size_t nlive, caplive;
    uint64_t alloc_latency_ns, free_latency_ns;
} host_device;

static void spin_ns(uint64_t ns) {
    if (!ns)
        return;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    uint64_t start = (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec, now;
    do {
        clock_gettime(CLOCK_MONOTONIC, &t);
        now = (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
    } while (now - start < ns);
}

/* Index of the first extent with off > x (binary search). */
static size_t first_after(const host_device *d, size_t x) {
    size_t lo = 0, hi = d->nfree;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (d->free[mid].off > x)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* Index of the first live allocation with off >= x. */
static size_t live_at_or_after(const host_device *d, size_t x) {
    size_t lo = 0, hi = d->nlive;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (d->live[mid].off >= x)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* Room for one more entry in an array; false on host OOM. */
static bool reserve_one(extent **a, size_t n, size_t *cap) {
    if (n < *cap)
        return true;
    size_t c = *cap ? *cap * 2 : 64;
    extent *x = realloc(*a, c * sizeof *x);
    if (!x)
        return false;
    *a = x;
    *cap = c;
    return true;
}

static cca_status host_alloc(void *ctx, size_t size, void **ptr) {
    host_device *d = ctx;
    spin_ns(d->alloc_latency_ns);
    size_t len = size > SIZE_MAX - (d->page - 1) ? 0 : (size + d->page - 1) & ~(d->page - 1);
    pthread_mutex_lock(&d->lock);
    size_t free_now = d->capacity - d->used;
    size_t i = 0;
    if (len && len <= free_now)
        while (i < d->nfree && d->free[i].len < len)
            i++;
    if (!len || len > free_now || i == d->nfree) {
        pthread_mutex_unlock(&d->lock);
        /* i == nfree with len <= free_now: the free bytes are there but in
         * pieces (the range is exactly the capacity); a GPU refuses such a
         * request as well. */
        return ccai_fail(CCA_ERR_OUT_OF_MEMORY, "host device: %zu bytes requested, %zu of %zu free%s", size,
                         free_now, d->capacity, len <= free_now && len ? " (address space fragmented)" : "");
    }
    char *p = d->base + d->free[i].off;
    if (!reserve_one(&d->live, d->nlive, &d->caplive)) {
        pthread_mutex_unlock(&d->lock);
        return ccai_fail(CCA_ERR_OUT_OF_MEMORY, "host device: host malloc failed recording an allocation");
    }
    if (mprotect(p, len, PROT_READ | PROT_WRITE) != 0) {
        int e = errno;
        pthread_mutex_unlock(&d->lock);
        return ccai_fail(CCA_ERR_OUT_OF_MEMORY, "host device: mprotect of %zu bytes failed: %s", len, strerror(e));
    }
    size_t off = d->free[i].off, k = live_at_or_after(d, off);
    memmove(&d->live[k + 1], &d->live[k], (d->nlive - k) * sizeof *d->live);
    d->live[k] = (extent){off, size};
    d->nlive++;
    d->free[i].off += len;
    d->free[i].len -= len;
    if (d->free[i].len == 0) {
        memmove(&d->free[i], &d->free[i + 1], (d->nfree - i - 1) * sizeof *d->free);
        d->nfree--;
    }
    d->used += len;
    pthread_mutex_unlock(&d->lock);
    *ptr = p;
    return CCA_OK;
}

static cca_status host_free(void *ctx, void *ptr, size_t size) {
    host_device *d = ctx;
    spin_ns(d->free_latency_ns);
    char *p = ptr;
    size_t len = size > SIZE_MAX - (d->page - 1) ? 0 : (size + d->page - 1) & ~(d->page - 1);
    pthread_mutex_lock(&d->lock);
    /* Refuse anything that is not exactly a live allocation of this device
     * (pointer and size): such a free changes nothing. */
    uintptr_t at = (uintptr_t)p, base = (uintptr_t)d->base;
    bool inside = at >= base && at - base < d->range;
    size_t off = inside ? (size_t)(at - base) : 0;
    size_t k = inside ? live_at_or_after(d, off) : d->nlive;
    if (k == d->nlive || d->live[k].off != off || d->live[k].len != size || !len) {
        pthread_mutex_unlock(&d->lock);
        return ccai_fail(CCA_ERR_UPSTREAM, "host device: free of %p (%zu bytes) is not an allocation of this device",
                         ptr, size);
    }
    size_t i = first_after(d, off); /* free[i-1].off <= off < free[i].off */
    if (!reserve_one(&d->free, d->nfree, &d->capfree)) {
        pthread_mutex_unlock(&d->lock);
        return ccai_fail(CCA_ERR_UPSTREAM, "host device: host malloc failed recording a free");
    }
    /* Fresh inaccessible pages over the extent: the old ones go back to the
     * OS now, and a later touch faults. */
    if (mmap(p, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == MAP_FAILED) {
        int e = errno;
        pthread_mutex_unlock(&d->lock);
        return ccai_fail(CCA_ERR_UPSTREAM, "host device: unmapping %zu bytes failed: %s", len, strerror(e));
    }
    bool join_left = i > 0 && d->free[i - 1].off + d->free[i - 1].len == off;
    bool join_right = i < d->nfree && d->free[i].off == off + len;
    if (join_left && join_right) {
        d->free[i - 1].len += len + d->free[i].len;
        memmove(&d->free[i], &d->free[i + 1], (d->nfree - i - 1) * sizeof *d->free);
        d->nfree--;
    } else if (join_left) {
        d->free[i - 1].len += len;
    } else if (join_right) {
        d->free[i].off = off;
        d->free[i].len += len;
    } else {
        memmove(&d->free[i + 1], &d->free[i], (d->nfree - i) * sizeof *d->free);
        d->free[i] = (extent){off, len};
        d->nfree++;
    }
    memmove(&d->live[k], &d->live[k + 1], (d->nlive - k - 1) * sizeof *d->live);
    d->nlive--;
    d->used -= len;
    pthread_mutex_unlock(&d->lock);
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
    if (d->base)
        munmap(d->base, d->range);
    free(d->free);
    free(d->live);
    pthread_mutex_destroy(&d->lock);
    free(d);
}

cca_status cca_upstream_host_create_with(const cca_host_options *o, cca_upstream **out) {
    if (!out)
        return ccai_fail(CCA_ERR_INVALID_ARGUMENT, "cca_upstream_host_create: out is NULL");
    *out = NULL;
    if (!o)
        return ccai_fail(CCA_ERR_INVALID_ARGUMENT, "cca_upstream_host_create_with: options are NULL");
    if (o->capacity == 0)
        return ccai_fail(CCA_ERR_INVALID_ARGUMENT, "cca_upstream_host_create: capacity must be > 0");
    if (o->alloc_latency_ns > CCA_HOST_MAX_LATENCY_NS || o->free_latency_ns > CCA_HOST_MAX_LATENCY_NS)
        return ccai_fail(CCA_ERR_INVALID_ARGUMENT, "cca_upstream_host_create: a latency above %llu ns (1 s)",
                         (unsigned long long)CCA_HOST_MAX_LATENCY_NS);
    long pg = sysconf(_SC_PAGESIZE);
    size_t page = pg > 0 ? (size_t)pg : 4096;
    if (o->capacity > SIZE_MAX / 2)
        return ccai_fail(CCA_ERR_INVALID_ARGUMENT, "cca_upstream_host_create: capacity %zu is beyond the address space",
                         o->capacity);
    host_device *d = calloc(1, sizeof *d);
    if (!d)
        return ccai_fail(CCA_ERR_OUT_OF_MEMORY, "cca_upstream_host_create: host malloc failed");
    pthread_mutex_init(&d->lock, NULL);
    d->capacity = o->capacity;
    d->page = page;
    d->range = (o->capacity + page - 1) & ~(page - 1);
    d->alloc_latency_ns = o->alloc_latency_ns;
    d->free_latency_ns = o->free_latency_ns;
    void *base = mmap(NULL, d->range, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
        int e = errno;
        host_destroy(d);
        return ccai_fail(CCA_ERR_OUT_OF_MEMORY, "cca_upstream_host_create: reserving %zu bytes of address space: %s",
                         o->capacity, strerror(e));
    }
    d->base = base;
    d->free = malloc(64 * sizeof *d->free);
    if (!d->free) {
        host_destroy(d);
        return ccai_fail(CCA_ERR_OUT_OF_MEMORY, "cca_upstream_host_create: host malloc failed");
    }
    d->capfree = 64;
    d->free[0] = (extent){0, d->range};
    d->nfree = 1;
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

cca_status cca_upstream_host_create(size_t capacity, cca_upstream **out) {
    cca_host_options o = {.capacity = capacity};
    return cca_upstream_host_create_with(&o, out);
}
