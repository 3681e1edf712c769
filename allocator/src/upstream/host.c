/*
 * host.c — a simulated device of fixed capacity over host memory that
 * behaves like a GPU, so every allocator path (OOM, retry, trim, release)
 * runs, and is measured, without one (docs/allocator.md, "Upstreams").
 *
 * - Address space: ONE range the size of the capacity (rounded up to the
 *   host page), mmap(NULL, range, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS |
 *   MAP_NORESERVE), 2 MiB-aligned from 2 MiB where the address space has
 *   room: no memory until touched. The device places every alloc itself,
 *   so addresses depend only on this device's calls (best fit breaks ties
 *   by address: figures are the same in every run).
 * - Placement: FIRST FIT BY ADDRESS over a sorted array of free extents,
 *     free[0..n): {off, len}, off strictly increasing, no two touching
 *   (merged on free); an alloc takes the lowest extent that fits, from its
 *   start. A second sorted array holds live allocations {off, size as
 *   asked}: a free must name exactly one (pointer and size), as cudaFree;
 *   anything else (double free, other size, interior pointer) is refused
 *   and changes nothing.
 * - Sizes round up to the host page (mprotect's unit; a GPU rounds
 *   cudaMalloc to 2 MiB); capacity and mem_info count rounded bytes (a
 *   capacity off a page multiple cannot be allocated whole). A capacity
 *   below one page is refused at creation: such a device could hold
 *   nothing, every alloc and map an OOM; so is a vm_granularity above the
 *   capacity (not one page of it fits).
 * - Pages live only while allocated: alloc mprotects them READ|WRITE (zero
 *   pages on first touch), asked to be huge when it is whole 2 MiB pages
 *   (MADV_HUGEPAGE: one fault per 2 MiB, as a GPU's page; never a page two
 *   allocations share, nor a hint that cuts a mapping; never at all with
 *   host_pages CCA_HOST_PAGES_SMALL, for sparse touches); free maps fresh
 *   PROT_NONE pages over them (mmap MAP_FIXED): the memory goes back to the OS at once and a later touch
 *   faults, like a use after cudaFree. Where the kernel refuses new
 *   mappings (the address space above RLIMIT_AS), the same in place:
 *   mprotect PROT_NONE and MADV_DONTNEED, the hint off (give_back), so
 *   memory can always be given back.
 * - Driver costs (optional): a busy-wait per alloc and per free, on
 *   CLOCK_MONOTONIC, outside the lock, charged to refused allocs too.
 * - Events: kernels are host work, synchronous, so an event is complete when
 *   recorded (record returns a non-NULL token, query returns CCA_OK).
 * - Costs: alloc O(n), free O(log n + n) (binary searches, memmove),
 *   n = live allocations (free extents <= n + 1).
 *
 * Virtual memory (the vm_* ops, CUDA's cuMemAddressReserve / cuMemCreate +
 * cuMemMap / cuMemUnmap / cuMemAddressFree). Two more sorted arrays, by
 * address, and `mapped`, the bytes in maps:
 *     ranges[0..n): address space from vm_reserve, disjoint
 *     maps[0..m):   what is mapped (maps from vm_map, or what unmaps left
 *                   of them), disjoint, each inside one range
 *     classic range | range A [ map | map |  ....  ]   range B [ .. | map ]
 *                   (PROT_NONE where nothing is mapped: a touch faults)
 * - Release is GRANULE BY GRANULE (PyTorch's expandable segments: one
 *   handle per page): any run of mapped granules can be unmapped,
 *   whichever calls mapped them:
 *     map [0,3)   map [3,4)          granules  0 1 2 3 4
 *     unmap [1,2)                              # . # # .   (# mapped)
 *     unmap [2,4)  (spans two maps)            # . . . .
 *     unmap [0,2)  refused: granule 1 is not mapped; nothing changes
 *   A record is cut where an unmap ends inside it; adjacent records are not
 *   merged (m <= map calls + cuts).
 * - Rules; a call that breaks one fails, naming the rule, changing nothing:
 *   - addresses and sizes are multiples of the granularity (0 = 2 MiB, or
 *     the largest power of two within a smaller capacity, at least the
 *     host page; else a power of two >= the host page, checked at
 *     creation); the
 *     wrapper refuses the rest (CCA_ERR_INVALID_ARGUMENT);
 *   and here, CCA_ERR_UPSTREAM:
 *   - a map lies inside ONE range and overlaps no mapped granule;
 *   - an unmap names only mapped granules (one map, part of one, or a run
 *     across adjacent maps); any unmapped granule refuses it whole; with
 *     whole maps (vm_backing CCA_VM_WHOLE_MAPS, as CUDA's one cuMemCreate
 *     per map) it names whole maps only, so no record is ever cut;
 *   - a release names exactly one range (same base and size), nothing
 *     mapped in it.
 * - Capacity is shared: used + mapped <= capacity (else
 *   CCA_ERR_OUT_OF_MEMORY, after the rules); mem_info's free is capacity -
 *   used - mapped; reserved address space counts for nothing.
 *   vm_reserve  mmap(size + gran, PROT_NONE, MAP_NORESERVE), slop unmapped
 *               on each side: a granularity-aligned range.
 *   vm_map      private anonymous pages mapped MAP_FIXED over the range,
 *               asked to be huge (MADV_HUGEPAGE: one fault per 2 MiB;
 *               not with CCA_HOST_PAGES_SMALL).
 *               Pages appear zeroed on first touch. Touching maps are one
 *               run of addresses. A failing mmap puts PROT_NONE back where
 *               it left a hole (OOM for ENOMEM, else UPSTREAM; UPSTREAM if
 *               the hole could not be filled). fork() copies them on write,
 *               as any private page: a child never writes its parent's block.
 *   vm_unmap    the run's pages given back as a free's (give_back: one mmap
 *               MAP_FIXED of PROT_NONE), at once, even while the rest of
 *               their map stays mapped; the records cut. The records' room
 *               is reserved first, so a host malloc failure changes nothing.
 *   vm_release  munmap of the range. Destroy munmaps every range left.
 * - Costs: vm_map busy-waits its call latency (vm_map_call_latency_ns, else
 *   alloc_latency_ns) and vm_unmap its own (else free_latency_ns), granted
 *   or refused, outside the lock; a granted call also waits the
 *   per-granule latency times its granules (with whole maps, once per map),
 *   after the lock. Under the device's lock (a check and the syscalls it
 *   allows are one step): vm_map O(log m) + O(m) memmove, two syscalls;
 *   vm_unmap O(log m + k) for the k maps it overlaps, one mmap (refused:
 *   one mprotect and one madvise more), O(m) memmove.
 * - Host staging memory and copies (sleep and wake): host_alloc maps host
 *   memory of its own (huge pages from 2 MiB), recorded (a fourth sorted
 *   array): host_free takes back exactly a pointer and size it gave, else
 *   refuses, nothing changed; copy queues a memcpy on the device's copy
 *   engine (copy_engine.c), a thread, and copy_wait waits.
 */
#include "upstream.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define HOST_HUGE ((size_t)2 << 20) /* a GPU's page, and the host's huge page */

typedef struct extent {
    size_t off, len;
} extent;

/* A range of address space or a map (virtual memory): absolute address. */
typedef struct vm_span {
    uintptr_t addr;
    size_t len;
} vm_span;

typedef struct host_device {
    pthread_mutex_t lock;
    size_t capacity; /* as given: mem_info's total                           */
    size_t used;     /* page-rounded bytes allocated (classic; maps: mapped)  */
    size_t page;
    char *base; /* the reserved range: [base, base + range)                  */
    size_t range;
    extent *free; /* sorted by off, never touching                         */
    size_t nfree, capfree;
    extent *live; /* sorted by off; len = the size the alloc was asked for  */
    size_t nlive, caplive;
    uint64_t alloc_latency_ns, free_latency_ns;
    uint64_t map_granule_ns, unmap_granule_ns; /* per granule (whole maps: per map) of a granted vm_map / vm_unmap */
    uint64_t map_call_ns, unmap_call_ns;       /* per vm_map / vm_unmap call, granted or refused */
    bool whole_maps; /* CCA_VM_WHOLE_MAPS: an unmap names whole maps, and each map costs one granule's latency */
    bool huge;       /* CCA_HOST_PAGES_HUGE: whole 2 MiB pages asked to be huge (ask_huge) */
    /* virtual memory: used + mapped <= capacity                              */
    size_t gran;     /* mapping granularity                                   */
    size_t mapped;   /* bytes in maps                                         */
    vm_span *ranges; /* from vm_reserve: sorted by addr, disjoint             */
    size_t nranges, capranges;
    /* what is mapped: each a map, or what unmaps left of one; sorted by
     * addr, disjoint, each inside a range, adjacent ones not merged          */
    vm_span *maps;
    size_t nmaps, capmaps;
    ccai_copy_engine copy; /* runs the copy op's memcpys (copy_engine.c) */
    /* host memory from host_alloc: addr, and the size asked; sorted by addr */
    vm_span *hosts;
    size_t nhosts, caphosts;
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

/* The per-granule charge of a granted vm_map / vm_unmap of `size` bytes
 * (a multiple of the granularity), saturating. */
static void spin_granules(uint64_t per_ns, size_t size, size_t gran) {
    uint64_t n = size / gran;
    spin_ns(per_ns && n > UINT64_MAX / per_ns ? UINT64_MAX : per_ns * n);
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

/* An allocation of whole 2 MiB pages asked to be huge (MADV_HUGEPAGE; a
 * hint: refused, the pages are small). Only such: a hint over part of one
 * would cut its mapping in two (a process has vm.max_map_count of them),
 * and a huge page under two allocations would outlive a free of either
 * (split, its memory back only when the kernel gets to it). The range
 * starts on a 2 MiB page, so a device used in whole 2 MiB pages (an
 * allocator's segments) is huge pages in one mapping. */
static void ask_huge(const host_device *d, char *p, size_t len) {
    if (d->huge && (uintptr_t)p % HOST_HUGE == 0 && len % HOST_HUGE == 0)
        (void)madvise(p, len, MADV_HUGEPAGE);
}

static cca_status host_alloc(void *ctx, size_t size, void **ptr) {
    host_device *d = ctx;
    spin_ns(d->alloc_latency_ns);
    size_t len = size > SIZE_MAX - (d->page - 1) ? 0 : (size + d->page - 1) & ~(d->page - 1);
    pthread_mutex_lock(&d->lock);
    size_t free_now = d->capacity - d->used - d->mapped;
    size_t i = 0;
    if (len && len <= free_now)
        while (i < d->nfree && d->free[i].len < len)
            i++;
    if (!len || len > free_now || i == d->nfree) {
        pthread_mutex_unlock(&d->lock);
        /* i == nfree with len <= free_now: the free bytes are there but in
         * pieces (the range is exactly the capacity, maps or not); a GPU
         * refuses such a request as well. */
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "host device: %zu bytes requested, %zu of %zu free%s", size,
                         free_now, d->capacity, len <= free_now && len ? " (address space fragmented)" : "");
    }
    char *p = d->base + d->free[i].off;
    if (!reserve_one(&d->live, d->nlive, &d->caplive)) {
        pthread_mutex_unlock(&d->lock);
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "host device: host malloc failed recording an allocation");
    }
    if (mprotect(p, len, PROT_READ | PROT_WRITE) != 0) {
        int e = errno;
        pthread_mutex_unlock(&d->lock);
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "host device: mprotect of %zu bytes failed: %s", len, strerror(e));
    }
    ask_huge(d, p, len);
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

/* len bytes of a fresh mapping that start on a multiple of align (a power
 * of two; 0: anywhere): align bytes more mapped, the slop on each side
 * unmapped. MAP_FAILED with errno set where the address space has no room. */
static char *map_aligned(size_t len, size_t align, int prot, int flags) {
    if (len > SIZE_MAX - align) {
        errno = ENOMEM;
        return MAP_FAILED;
    }
    char *raw = mmap(NULL, len + align, prot, flags, -1, 0);
    if (raw == MAP_FAILED || !align)
        return raw;
    char *p = (char *)(((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1));
    if (p > raw)
        munmap(raw, (size_t)(p - raw));
    if (raw + align > p)
        munmap(p + len, (size_t)(raw + align - p));
    return p;
}

/* Fresh inaccessible address space over [p, p + len): what a range holds
 * where nothing is mapped. */
static bool protect_none(void *p, size_t len) {
    return mmap(p, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) != MAP_FAILED;
}

/* The pages of [p, p + len) back to the OS, a touch faulting after: fresh
 * PROT_NONE pages over them (one mmap). Where the kernel refuses any new
 * mapping (the address space above RLIMIT_AS refuses even one of the same
 * size), the pages in place: mprotect PROT_NONE, then MADV_DONTNEED (a
 * private anonymous page dropped now, the next touch a fault). false with
 * errno set when neither could, nothing changed by the second way. */
static bool give_back(void *p, size_t len) {
    if (protect_none(p, len))
        return true;
    if (mprotect(p, len, PROT_NONE) != 0)
        return false;
    if (madvise(p, len, MADV_DONTNEED) == 0) {
        (void)madvise(p, len, MADV_NOHUGEPAGE); /* in place, its hint would reach the pages' next owners */
        return true;
    }
    int e = errno;
    (void)mprotect(p, len, PROT_READ | PROT_WRITE); /* as it was: the caller keeps it */
    errno = e;
    return false;
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
        return cca_set_error(CCA_ERR_UPSTREAM, "host device: free of %p (%zu bytes) is not an allocation of this device",
                         ptr, size);
    }
    size_t i = first_after(d, off); /* free[i-1].off <= off < free[i].off */
    if (!reserve_one(&d->free, d->nfree, &d->capfree)) {
        pthread_mutex_unlock(&d->lock);
        return cca_set_error(CCA_ERR_UPSTREAM, "host device: host malloc failed recording a free");
    }
    /* The extent's pages back to the OS now; a later touch faults. */
    if (!give_back(p, len)) {
        int e = errno;
        pthread_mutex_unlock(&d->lock);
        return cca_set_error(CCA_ERR_UPSTREAM, "host device: unmapping %zu bytes failed: %s", len, strerror(e));
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

/* ---- virtual memory ------------------------------------------------------- */

/* Index of the first span with addr >= x (binary search). */
static size_t span_index(const vm_span *a, size_t n, uintptr_t x) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a[mid].addr >= x)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* Room for one more span; false on host OOM. */
static bool reserve_span(vm_span **a, size_t n, size_t *cap) {
    if (n < *cap)
        return true;
    size_t c = *cap ? *cap * 2 : 16;
    vm_span *x = realloc(*a, c * sizeof *x);
    if (!x)
        return false;
    *a = x;
    *cap = c;
    return true;
}

static void insert_span(vm_span *a, size_t *n, size_t i, vm_span s) {
    memmove(&a[i + 1], &a[i], (*n - i) * sizeof *a);
    a[i] = s;
    (*n)++;
}

static void remove_span(vm_span *a, size_t *n, size_t i) {
    memmove(&a[i], &a[i + 1], (*n - i - 1) * sizeof *a);
    (*n)--;
}

/* The status of a failed syscall: no memory is an OOM, the rest a failure. */
static cca_status errno_status(int e) {
    return e == ENOMEM || e == ENOSPC ? CCA_ERR_OUT_OF_MEMORY : CCA_ERR_UPSTREAM;
}

static cca_status host_vm_granularity(void *ctx, size_t *bytes) {
    host_device *d = ctx;
    *bytes = d->gran;
    return CCA_OK;
}

static cca_status host_vm_reserve(void *ctx, size_t size, void **base) {
    host_device *d = ctx;
    size_t g = d->gran;
    if (size > SIZE_MAX - g)
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "host device: vm_reserve of %zu bytes: beyond the address space", size);
    char *start = map_aligned(size, g, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE);
    if (start == MAP_FAILED) {
        int e = errno;
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "host device: vm_reserve of %zu bytes of address space: %s", size,
                         strerror(e));
    }
    pthread_mutex_lock(&d->lock);
    if (!reserve_span(&d->ranges, d->nranges, &d->capranges)) {
        pthread_mutex_unlock(&d->lock);
        munmap(start, size);
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "host device: host malloc failed recording a reserved range");
    }
    size_t i = span_index(d->ranges, d->nranges, (uintptr_t)start);
    insert_span(d->ranges, &d->nranges, i, (vm_span){(uintptr_t)start, size});
    pthread_mutex_unlock(&d->lock);
    *base = start;
    return CCA_OK;
}

static cca_status host_vm_release(void *ctx, void *base, size_t size) {
    host_device *d = ctx;
    uintptr_t b = (uintptr_t)base;
    pthread_mutex_lock(&d->lock);
    size_t i = span_index(d->ranges, d->nranges, b);
    if (i == d->nranges || d->ranges[i].addr != b || d->ranges[i].len != size) {
        bool at = i < d->nranges && d->ranges[i].addr == b;
        size_t len = at ? d->ranges[i].len : 0;
        pthread_mutex_unlock(&d->lock);
        if (at)
            return cca_set_error(CCA_ERR_UPSTREAM,
                             "host device: vm_release of %p (%zu bytes): the range reserved there "
                             "is %zu bytes; a release names exactly one range",
                             base, size, len);
        return cca_set_error(CCA_ERR_UPSTREAM,
                         "host device: vm_release of %p (%zu bytes): no range reserved there "
                         "(a release names exactly one range from vm_reserve)",
                         base, size);
    }
    /* maps lie inside one range, so one inside this range starts in it */
    size_t k = span_index(d->maps, d->nmaps, b);
    if (k < d->nmaps && d->maps[k].addr - b < size) {
        vm_span m = d->maps[k];
        pthread_mutex_unlock(&d->lock);
        return cca_set_error(CCA_ERR_UPSTREAM,
                         "host device: vm_release of %p (%zu bytes): the map at %p (%zu bytes) "
                         "is still in it; unmap first",
                         base, size, (void *)m.addr, m.len);
    }
    if (munmap(base, size) != 0) {
        int e = errno;
        pthread_mutex_unlock(&d->lock);
        return cca_set_error(CCA_ERR_UPSTREAM, "host device: vm_release of %p (%zu bytes): munmap: %s", base, size,
                         strerror(e));
    }
    remove_span(d->ranges, &d->nranges, i);
    pthread_mutex_unlock(&d->lock);
    return CCA_OK;
}

/* The rules of a map, checked under the lock: CCA_OK, or the refusal with
 * its message (nothing changed). *at is where the map goes in maps[]. */
static cca_status vm_map_allowed(const host_device *d, uintptr_t a, size_t size, size_t *at) {
    void *p = (void *)a;
    size_t i = span_index(d->ranges, d->nranges, a + 1); /* ranges[i-1]: the last starting at or below a */
    if (i == 0 || a - d->ranges[i - 1].addr >= d->ranges[i - 1].len)
        return cca_set_error(CCA_ERR_UPSTREAM, "host device: vm_map of %p (%zu bytes): not inside any reserved range", p,
                         size);
    vm_span r = d->ranges[i - 1];
    if (size > r.len - (a - r.addr))
        return cca_set_error(CCA_ERR_UPSTREAM,
                         "host device: vm_map of %p (%zu bytes) runs past the end of its reserved "
                         "range %p (%zu bytes): a map lies inside one range",
                         p, size, (void *)r.addr, r.len);
    size_t k = span_index(d->maps, d->nmaps, a);
    const vm_span *hit = NULL;
    if (k > 0 && d->maps[k - 1].addr + d->maps[k - 1].len > a)
        hit = &d->maps[k - 1];
    else if (k < d->nmaps && d->maps[k].addr - a < size)
        hit = &d->maps[k];
    if (hit)
        return cca_set_error(CCA_ERR_UPSTREAM,
                         "host device: vm_map of %p (%zu bytes) overlaps the map at %p (%zu "
                         "bytes): a map overlaps no mapped granule",
                         p, size, (void *)hit->addr, hit->len);
    size_t free_now = d->capacity - d->used - d->mapped;
    if (size > free_now)
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "host device: vm_map of %zu bytes, %zu of %zu free", size, free_now,
                         d->capacity);
    *at = k;
    return CCA_OK;
}

/* New physical memory at [p, p + size): private anonymous pages mapped
 * over the range's PROT_NONE ones, asked to be huge on a device of huge
 * pages (MADV_HUGEPAGE: a granule's 2 MiB is one fault, not 512, as a
 * GPU's page is 2 MiB; where the kernel has no transparent huge pages they
 * are 4 KiB, nothing else changes). On failure the PROT_NONE pages are
 * back. */
static cca_status map_memory(const host_device *d, void *p, size_t size) {
    if (mmap(p, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) !=
        MAP_FAILED) {
        if (d->huge)
            (void)madvise(p, size, MADV_HUGEPAGE); /* a hint: refused, the pages are small */
        return CCA_OK;
    }
    int e = errno;
    /* A failed MAP_FIXED may have removed what was there: put it back,
     * unless it is all still mapped (msync fails with ENOMEM over a hole).
     * Refused before anything changed (the address space above RLIMIT_AS,
     * where even a same-size replacement is refused), the range is intact
     * and putting it back would be refused too. */
    if (msync(p, size, MS_ASYNC) != 0 && !protect_none(p, size))
        return cca_set_error(CCA_ERR_UPSTREAM,
                         "host device: vm_map of %p (%zu bytes): mmap: %s, and restoring the "
                         "reserved range failed: %s",
                         p, size, strerror(e), strerror(errno));
    return cca_set_error(errno_status(e), "host device: vm_map of %p (%zu bytes): mmap: %s", p, size, strerror(e));
}

static cca_status host_vm_map(void *ctx, void *addr, size_t size) {
    host_device *d = ctx;
    spin_ns(d->map_call_ns); /* granted or refused */
    uintptr_t a = (uintptr_t)addr;
    pthread_mutex_lock(&d->lock);
    size_t k = 0;
    cca_status st = vm_map_allowed(d, a, size, &k);
    if (st == CCA_OK && !reserve_span(&d->maps, d->nmaps, &d->capmaps))
        st = cca_set_error(CCA_ERR_OUT_OF_MEMORY, "host device: host malloc failed recording a map");
    if (st == CCA_OK)
        st = map_memory(d, addr, size);
    if (st == CCA_OK) {
        insert_span(d->maps, &d->nmaps, k, (vm_span){a, size});
        d->mapped += size;
    }
    pthread_mutex_unlock(&d->lock);
    if (st == CCA_OK)
        spin_granules(d->map_granule_ns, d->whole_maps ? d->gran : size, d->gran);
    return st;
}

/* The rule of an unmap, checked under the lock: [a, a + size) is a run of
 * mapped granules, made by one map, part of one or several adjacent ones.
 * CCA_OK with maps[*first] holding a and maps[*last] holding the last byte
 * (each map between starting where the one before ends), or the refusal
 * naming the first granule that is not mapped (nothing changed). Cost:
 * O(log m) for the first map, then one step per map overlapped. */
static cca_status vm_unmap_allowed(const host_device *d, uintptr_t a, size_t size, size_t *first, size_t *last) {
    uintptr_t hole = a;                              /* the first unmapped address, when refused */
    size_t k = span_index(d->maps, d->nmaps, a + 1); /* maps[k-1]: the last starting at or below a */
    if (size <= UINTPTR_MAX - a && k > 0 && a - d->maps[k - 1].addr < d->maps[k - 1].len) {
        uintptr_t e = a + size;
        size_t j = k - 1;
        uintptr_t end = d->maps[j].addr + d->maps[j].len;
        while (end < e && j + 1 < d->nmaps && d->maps[j + 1].addr == end) {
            j++;
            end = d->maps[j].addr + d->maps[j].len;
        }
        if (end >= e) {
            *first = k - 1;
            *last = j;
            return CCA_OK;
        }
        hole = end;
    }
    return cca_set_error(CCA_ERR_UPSTREAM,
                     "host device: vm_unmap of %p (%zu bytes): nothing is mapped at %p (%zu bytes in); an "
                     "unmap names only mapped granules",
                     (void *)a, size, (void *)hole, (size_t)(hole - a));
}

/* Whole maps (CCA_VM_WHOLE_MAPS): maps[first..last], which the run
 * [a, e) overlaps, must lie wholly inside it (no record is ever cut, so
 * every record is a whole map). Else the refusal names the map cut. */
static cca_status vm_unmap_whole(const host_device *d, uintptr_t a, uintptr_t e, size_t first, size_t last) {
    const vm_span *cut = d->maps[first].addr < a ? &d->maps[first]
                       : d->maps[last].addr + d->maps[last].len > e ? &d->maps[last] : NULL;
    if (!cut)
        return CCA_OK;
    return cca_set_error(CCA_ERR_UPSTREAM,
                     "host device: vm_unmap of %p (%zu bytes) cuts the map at %p (%zu bytes): its maps are "
                     "whole (CCA_VM_WHOLE_MAPS), an unmap names whole maps only",
                     (void *)a, (size_t)(e - a), (void *)cut->addr, cut->len);
}

/* Replace maps[first..last] by what is left of them outside [a, e): the
 * part of maps[first] below a and the part of maps[last] from e, each when
 * not empty. One map losing its middle becomes two: the caller reserved
 * room for it. */
static void cut_maps(host_device *d, size_t first, size_t last, uintptr_t a, uintptr_t e) {
    vm_span keep[2];
    size_t n = 0;
    vm_span f = d->maps[first], l = d->maps[last];
    if (f.addr < a)
        keep[n++] = (vm_span){f.addr, (size_t)(a - f.addr)};
    if (l.addr + l.len > e)
        keep[n++] = (vm_span){e, (size_t)(l.addr + l.len - e)};
    size_t gone = last - first + 1;
    memmove(&d->maps[first + n], &d->maps[last + 1], (d->nmaps - last - 1) * sizeof *d->maps);
    memcpy(&d->maps[first], keep, n * sizeof *keep);
    d->nmaps = d->nmaps - gone + n;
}

static cca_status host_vm_unmap(void *ctx, void *addr, size_t size) {
    host_device *d = ctx;
    spin_ns(d->unmap_call_ns); /* granted or refused */
    uintptr_t a = (uintptr_t)addr;
    pthread_mutex_lock(&d->lock);
    /* 1. the rule: every granule mapped */
    size_t first = 0, last = 0;
    cca_status st = vm_unmap_allowed(d, a, size, &first, &last);
    if (st == CCA_OK && d->whole_maps)
        st = vm_unmap_whole(d, a, a + size, first, last);
    if (st != CCA_OK) {
        pthread_mutex_unlock(&d->lock);
        return st;
    }
    uintptr_t e = a + size;
    /* 2. room for the records before anything changes: only one map cut
     * in its middle needs an entry more */
    bool split = first == last && d->maps[first].addr < a && d->maps[first].addr + d->maps[first].len > e;
    if (split && !reserve_span(&d->maps, d->nmaps, &d->capmaps)) {
        pthread_mutex_unlock(&d->lock);
        return cca_set_error(CCA_ERR_UPSTREAM,
                         "host device: vm_unmap of %p (%zu bytes): host malloc failed recording "
                         "what is left of the map",
                         addr, size);
    }
    /* 3. the whole run's pages back to the OS at once (give_back),
     * whatever stays mapped of its maps; a later touch faults */
    if (!give_back(addr, size)) {
        int err = errno;
        pthread_mutex_unlock(&d->lock);
        return cca_set_error(CCA_ERR_UPSTREAM,
                             "host device: vm_unmap of %p (%zu bytes): giving the pages back failed: %s", addr, size,
                             strerror(err));
    }
    /* 4. the records: maps cut, removed, or split in two */
    cut_maps(d, first, last, a, e);
    d->mapped -= size;
    pthread_mutex_unlock(&d->lock);
    spin_granules(d->unmap_granule_ns, d->whole_maps ? (last - first + 1) * d->gran : size, d->gran);
    return CCA_OK;
}

static cca_status host_mem_info(void *ctx, size_t *free_bytes, size_t *total_bytes) {
    host_device *d = ctx;
    pthread_mutex_lock(&d->lock);
    *free_bytes = d->capacity - d->used - d->mapped;
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

/* Host staging memory and copies. Host memory: an anonymous mapping of
 * its own, 2 MiB-aligned and asked to be huge from 2 MiB (as pinned memory,
 * the copies then fault a page per 2 MiB, not per 4 KiB); given back whole
 * (munmap). A copy is a memcpy run by the device's copy engine
 * (copy_engine.c), which copy_wait waits for; a copy from or to an
 * unmapped page faults, in the engine's thread or the caller's, a crash as
 * any touch of it. */

static size_t host_length(size_t size) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t unit = size >= HOST_HUGE ? HOST_HUGE : page;
    return size > SIZE_MAX - unit ? 0 : (size + unit - 1) & ~(unit - 1);
}

static cca_status host_host_alloc(void *ctx, size_t size, void **ptr) {
    host_device *d = ctx;
    *ptr = NULL;
    size_t len = host_length(size), align = size >= HOST_HUGE ? HOST_HUGE : 0;
    char *p = len ? map_aligned(len, align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS) : MAP_FAILED;
    if (p == MAP_FAILED)
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "host-simulated: no host memory for %zu bytes", size);
    ask_huge(d, p, len); /* whole 2 MiB pages exactly when align */
    pthread_mutex_lock(&d->lock);
    bool recorded = reserve_span(&d->hosts, d->nhosts, &d->caphosts);
    if (recorded)
        insert_span(d->hosts, &d->nhosts, span_index(d->hosts, d->nhosts, (uintptr_t)p), (vm_span){(uintptr_t)p, size});
    pthread_mutex_unlock(&d->lock);
    if (!recorded) {
        munmap(p, len);
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "host-simulated: host malloc failed recording host memory");
    }
    *ptr = p;
    return CCA_OK;
}

/* Exactly a pointer and size host_alloc gave, or refused, nothing changed
 * (as cudaFreeHost refuses a pointer it did not give): an interior
 * pointer or a longer size would unmap a neighbour's memory. */
static cca_status host_host_free(void *ctx, void *ptr, size_t size) {
    host_device *d = ctx;
    pthread_mutex_lock(&d->lock);
    size_t k = span_index(d->hosts, d->nhosts, (uintptr_t)ptr);
    bool ok = k < d->nhosts && d->hosts[k].addr == (uintptr_t)ptr && d->hosts[k].len == size;
    if (ok)
        remove_span(d->hosts, &d->nhosts, k);
    pthread_mutex_unlock(&d->lock);
    if (!ok)
        return cca_set_error(CCA_ERR_UPSTREAM,
                             "host-simulated: host_free of %p (%zu bytes) is not host memory this device gave", ptr,
                             size);
    munmap(ptr, host_length(size));
    return CCA_OK;
}

static cca_status host_copy(void *ctx, void *dst, const void *src, size_t size, int to_host) {
    host_device *d = ctx;
    (void)to_host;
    ccai_copy_engine_copy(&d->copy, dst, src, size);
    return CCA_OK;
}

static cca_status host_copy_wait(void *ctx) {
    host_device *d = ctx;
    ccai_copy_engine_wait(&d->copy);
    return CCA_OK;
}

static void host_destroy(void *ctx) {
    host_device *d = ctx;
    ccai_copy_engine_destroy(&d->copy);
    if (d->base)
        munmap(d->base, d->range);
    for (size_t i = 0; i < d->nranges; i++) /* the maps in them go too */
        munmap((void *)d->ranges[i].addr, d->ranges[i].len);
    free(d->free);
    free(d->live);
    free(d->ranges);
    free(d->maps);
    free(d->hosts); /* host memory never given back stays mapped: the caller's, as CUDA's pinned memory */
    pthread_mutex_destroy(&d->lock);
    free(d);
}

/* In the child of a fork, under the device's locks (fork.c's handler):
 * the copy engine emptied, without its thread. The maps need nothing: their
 * pages are private, so fork() copies them on write, as every other page
 * of the process. */
static void host_fork_child(void *ctx) {
    host_device *d = ctx;
    ccai_copy_engine_fork_child(&d->copy);
}

/* fork.c's handler, through the upstream's fork link: the device's lock,
 * so that a fork never copies it held by a thread the child does not have. */
static void host_fork_lock(void *ctx, bool lock) {
    host_device *d = ctx;
    if (lock) {
        pthread_mutex_lock(&d->lock);
        ccai_copy_engine_fork_lock(&d->copy, true);
    } else {
        ccai_copy_engine_fork_lock(&d->copy, false);
        pthread_mutex_unlock(&d->lock);
    }
}

/* Both public creates; fn is the one called, which every refusal names. */
static cca_status host_create(const cca_host_options *o, cca_upstream **out, const char *fn) {
    if (!out)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    *out = NULL;
    if (!o)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "%s: options are NULL", fn);
    if (o->alloc_latency_ns > CCA_HOST_MAX_LATENCY_NS || o->free_latency_ns > CCA_HOST_MAX_LATENCY_NS ||
        o->vm_map_granule_latency_ns > CCA_HOST_MAX_LATENCY_NS ||
        o->vm_unmap_granule_latency_ns > CCA_HOST_MAX_LATENCY_NS || o->vm_map_call_latency_ns > CCA_HOST_MAX_LATENCY_NS ||
        o->vm_unmap_call_latency_ns > CCA_HOST_MAX_LATENCY_NS)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "%s: a latency above %llu ns (1 s)", fn,
                         (unsigned long long)CCA_HOST_MAX_LATENCY_NS);
    long pg = sysconf(_SC_PAGESIZE);
    size_t page = pg > 0 ? (size_t)pg : 4096;
    if (o->capacity < page) /* it could never hold a block or a map: every alloc an OOM */
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT,
                             "%s: capacity %zu is below the %zu-byte host page, the least a simulated device holds", fn,
                             o->capacity, page);
    size_t gran = o->vm_granularity ? o->vm_granularity : (size_t)2 << 20;
    while (!o->vm_granularity && gran > page && gran > o->capacity) /* a device below 2 MiB: one page fits */
        gran /= 2;
    if ((gran & (gran - 1)) || gran < page || gran % CCA_GRANULARITY)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT,
                         "%s: vm_granularity %zu is not a power of two >= the %zu-byte host page and a "
                         "multiple of %u",
                         fn, gran, page, CCA_GRANULARITY);
    if (gran > o->capacity) /* not one page fits: every map an OOM, greedy's arena none */
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT,
                             "%s: vm_granularity %zu is larger than the capacity %zu: not one page fits", fn, gran,
                             o->capacity);
    if (o->vm_backing != CCA_VM_PAGES && o->vm_backing != CCA_VM_WHOLE_MAPS)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT,
                         "%s: vm_backing %d is neither CCA_VM_WHOLE_MAPS (0) nor CCA_VM_PAGES (1)", fn, o->vm_backing);
    if (o->host_pages != CCA_HOST_PAGES_HUGE && o->host_pages != CCA_HOST_PAGES_SMALL)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT,
                             "%s: host_pages %d is neither CCA_HOST_PAGES_HUGE (0) nor CCA_HOST_PAGES_SMALL (1)", fn,
                             o->host_pages);
    if (o->capacity > SIZE_MAX / 2)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "%s: capacity %zu is beyond the address space", fn,
                         o->capacity);
    host_device *d = calloc(1, sizeof *d);
    if (!d)
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "%s: host malloc failed", fn);
    pthread_mutex_init(&d->lock, NULL);
    ccai_copy_engine_init(&d->copy);
    d->capacity = o->capacity;
    d->page = page;
    d->range = (o->capacity + page - 1) & ~(page - 1);
    d->alloc_latency_ns = o->alloc_latency_ns;
    d->free_latency_ns = o->free_latency_ns;
    d->map_granule_ns = o->vm_map_granule_latency_ns;
    d->unmap_granule_ns = o->vm_unmap_granule_latency_ns;
    d->map_call_ns = o->vm_map_call_latency_ns ? o->vm_map_call_latency_ns : o->alloc_latency_ns;
    d->unmap_call_ns = o->vm_unmap_call_latency_ns ? o->vm_unmap_call_latency_ns : o->free_latency_ns;
    d->gran = gran;
    d->whole_maps = o->vm_backing == CCA_VM_WHOLE_MAPS;
    d->huge = o->host_pages == CCA_HOST_PAGES_HUGE;
    /* 2 MiB-aligned from 2 MiB (the slop unmapped), so that allocations of
     * whole 2 MiB pages lie on huge pages (ask_huge); where the address
     * space has no room for the slop (RLIMIT_AS), the range alone */
    int kind = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    char *base = map_aligned(d->range, d->range >= HOST_HUGE ? HOST_HUGE : 0, PROT_NONE, kind);
    if (base == MAP_FAILED)
        base = map_aligned(d->range, 0, PROT_NONE, kind);
    if (base == MAP_FAILED) {
        int e = errno;
        host_destroy(d);
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "%s: reserving %zu bytes of address space: %s", fn, d->range,
                             strerror(e));
    }
    d->base = base;
    d->free = malloc(64 * sizeof *d->free);
    if (!d->free) {
        host_destroy(d);
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "%s: host malloc failed", fn);
    }
    d->capfree = 64;
    d->free[0] = (extent){0, d->range};
    d->nfree = 1;
    cca_upstream_ops ops = {
        .alloc = host_alloc,
        .free = host_free,
        .mem_info = host_mem_info,
        .synchronize = NULL,
        .event_record = host_event_record,
        .event_query = host_event_query,
        .event_destroy = host_event_destroy,
        .destroy = host_destroy,
        .name = "host-simulated",
        .vm_granularity = host_vm_granularity,
        .vm_reserve = host_vm_reserve,
        .vm_release = host_vm_release,
        .vm_map = host_vm_map,
        .vm_unmap = host_vm_unmap,
        .vm_backing = o->vm_backing,
        .host_alloc = host_host_alloc,
        .host_free = host_host_free,
        .copy = host_copy,
        .copy_wait = host_copy_wait,
    };
    cca_status st = ccai_upstream_wrap(&ops, d, out, fn);
    if (st != CCA_OK)
        host_destroy(d);
    else
        ccai_upstream_set_fork_hooks(*out, host_fork_lock, host_fork_child);
    return st;
}

cca_status cca_upstream_host_create_with(const cca_host_options *o, cca_upstream **out) {
    return host_create(o, out, "cca_upstream_host_create_with");
}

cca_status cca_upstream_host_create(size_t capacity, cca_upstream **out) {
    cca_host_options o = {.capacity = capacity};
    return host_create(&o, out, "cca_upstream_host_create");
}
