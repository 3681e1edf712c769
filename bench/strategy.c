/*
 * strategy.c — the strategies a trace is replayed through: a small table of
 * functions per BASE strategy (ggml-style: open/alloc/free/sample/peaks/
 * empty_cache/device_free/close), and PRESETS naming a base plus a config.
 *
 *   preset             base          config
 *   ccalloc-default    ccalloc       (none)                   (cca_config_default: as ccalloc-expandable here)
 *   ccalloc-growth     ccalloc       policy:growth,expandable:0 (classic segments, simulated device)
 *   ccalloc-greedy     ccalloc       policy:greedy,expandable:0 (arena = 0.9 x device)
 *   ccalloc-nosmall    ccalloc       small_pool:0,expandable:0  (one pool for all sizes)
 *   ccalloc-maxsplit   ccalloc       max_split:64M,expandable:0 (PyTorch's max_split_size_mb)
 *   ccalloc-onelarge   ccalloc       medium_pool:0,expandable:0 (PyTorch's pools: medium and large share)
 *   ccalloc-shared     ccalloc       policy:growth,domains:0,expandable:0 (a trace's domains ignored: one pool)
 *   ccalloc-expandable ccalloc       expandable:1             (pages of reserved ranges, growth: the default)
 *   ccalloc-expandable-greedy ccalloc policy:greedy,expandable:1 (the arena as pages: it can shrink)
 *   ccalloc-hold       ccalloc       policy:growth,hold_peak:1,expandable:0 (cached memory released before
 *                                                              the peak rises)
 *   ccalloc-expandable-hold ccalloc expandable:1,hold_peak:1 (the same, page by page)
 *   malloc             malloc                                 (host malloc/free floor)
 *   device-malloc      device-malloc                          (one upstream call per request: no cache)
 *   ccalloc-cuda       ccalloc-cuda  policy:growth,expandable:0 (GPU, classic segments over cudaMalloc)
 *   ccalloc-cuda-expandable ccalloc-cuda expandable:1         (GPU, over the driver's virtual memory;
 *                                                              refused with the reason on a GPU without it)
 *   cuda-malloc        cuda-malloc                            (GPU, raw cudaMalloc/cudaFree)
 *   cuda-async-t0      cuda-async    release_threshold:0      (GPU, cudaMallocAsync)
 *   cuda-async-tmax    cuda-async    release_threshold:max    (GPU)
 *   cub                cub                                    (GPU, cub::CachingDeviceAllocator)
 *
 * The allocator's default is expandable segments wherever the upstream has
 * virtual memory (the simulated device always has), so every preset named
 * for classic segments (growth, greedy and their variants, ccalloc-cuda)
 * says expandable:0 itself: a preset means what its name says whatever the
 * default. ccalloc-default takes no key at all, so it is whatever the
 * default is: on the simulated device it replays exactly as
 * ccalloc-expandable, which the suites run under that name.
 *
 * Any spec may also be written BASE=CONFIG ("ccalloc=max_split:128M,
 * expandable:0"); the config string of ccalloc bases is cca_config_parse's
 * syntax, on top of cca_config_default (so expandable segments unless it
 * says expandable:0; max_split needs classic segments).
 *
 * The host strategies live here; the GPU ones in strategy_cuda.cu (built with
 * the CUDA toolkit) or strategy_nocuda.c (which opens them as "skipped").
 * The ccalloc strategies take their numbers from cca_get_stats; the malloc
 * floor counts requested bytes itself and cannot know what glibc reserves.
 *
 * Host strategies over the simulated device (ccalloc, device-malloc) open it
 * with the ccb_device's latencies: zero for the bookkeeping passes, the
 * driver's cost for the "with driver" passes. The malloc floor has no
 * device, so no driver time; it takes the device's capacity as its bound
 * on one block (a larger request, or one larger than the host's physical
 * memory, is an OOM and malloc is not called: a trace may ask for 2^60
 * bytes, which ASan's malloc aborts on rather than failing).
 */
#include "ccbench.h"

#include "ccai_decimal.h" /* common/: ccai_decimal_uint */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ccalloc.h"

const ccb_preset ccb_presets[] = {
    {"ccalloc-default", "ccalloc", "",
     "ccalloc with cca_config_default: growth over expandable segments where the device has virtual memory"},
    {"ccalloc-growth", "ccalloc", "policy:growth,expandable:0",
     "ccalloc, growth policy over classic segments, on the simulated device"},
    {"ccalloc-greedy", "ccalloc", "policy:greedy,expandable:0",
     "ccalloc, greedy arena of 0.9 x the simulated device, one classic segment"},
    {"ccalloc-nosmall", "ccalloc", "small_pool:0,expandable:0", "ccalloc classic growth without the small pool"},
    {"ccalloc-maxsplit", "ccalloc", "max_split:64M,expandable:0",
     "ccalloc classic growth, blocks > 64 MiB never split"},
    {"ccalloc-onelarge", "ccalloc", "medium_pool:0,expandable:0",
     "ccalloc classic growth, medium and large requests share one pool (PyTorch's layout)"},
    {"ccalloc-shared", "ccalloc", "policy:growth,domains:0,expandable:0",
     "ccalloc classic growth with a trace's domains ignored: every model's blocks share segments"},
    {"ccalloc-expandable", "ccalloc", "expandable:1",
     "ccalloc growth over expandable segments (the default): address ranges mapped as they grow, unmapped when free"},
    {"ccalloc-expandable-greedy", "ccalloc", "policy:greedy,expandable:1",
     "ccalloc greedy arena as an expandable segment: mapped whole, trim unmaps what is free of it"},
    {"ccalloc-hold", "ccalloc", "policy:growth,hold_peak:1,expandable:0",
     "ccalloc classic growth holding the peak: free segments go back before reserved bytes pass their peak"},
    {"ccalloc-expandable-hold", "ccalloc", "expandable:1,hold_peak:1",
     "ccalloc growth over expandable segments holding the peak: free memory is unmapped before the peak rises"},
    {"malloc", "malloc", "", "host malloc/free: the floor for bookkeeping cost"},
    {"device-malloc", "device-malloc", "",
     "one simulated-device alloc/free per request, no cache (cudaMalloc/cudaFree's analogue)"},
    {"ccalloc-cuda", "ccalloc-cuda", "policy:growth,expandable:0",
     "ccalloc growth over cudaMalloc: classic segments (GPU)"},
    {"ccalloc-cuda-expandable", "ccalloc-cuda", "expandable:1",
     "ccalloc growth over the driver's virtual memory: expandable segments, cuMemCreate/cuMemMap (GPU)"},
    {"cuda-malloc", "cuda-malloc", "", "raw cudaMalloc/cudaFree per op (GPU)"},
    {"cuda-async-t0", "cuda-async", "release_threshold:0", "cudaMallocAsync, default pool, threshold 0 (GPU)"},
    {"cuda-async-tmax", "cuda-async", "release_threshold:max",
     "cudaMallocAsync, default pool, threshold UINT64_MAX (GPU)"},
    {"cub", "cub", "", "cub::CachingDeviceAllocator with its defaults (GPU)"},
};
const size_t ccb_preset_count = sizeof ccb_presets / sizeof ccb_presets[0];

static const ccb_strategy_ops *const bases[] = {
    &ccb_strategy_ccalloc_host, &ccb_strategy_malloc,      &ccb_strategy_device_malloc, &ccb_strategy_ccalloc_cuda,
    &ccb_strategy_cuda_malloc,  &ccb_strategy_cuda_async,  &ccb_strategy_cub,
};

const ccb_strategy_ops *ccb_strategy_base(const char *base) {
    for (size_t i = 0; i < sizeof bases / sizeof bases[0]; i++)
        if (strcmp(bases[i]->base, base) == 0)
            return bases[i];
    return NULL;
}

void ccb_strategy_list(FILE *f) {
    fprintf(f, "  presets:\n");
    for (size_t i = 0; i < ccb_preset_count; i++)
        fprintf(f, "    %-18s %s%s%s\n", ccb_presets[i].name, ccb_presets[i].doc, *ccb_presets[i].config ? "; " : "",
                ccb_presets[i].config);
    fprintf(f, "  bases (use BASE=CONFIG):\n");
    for (size_t i = 0; i < sizeof bases / sizeof bases[0]; i++)
        fprintf(f, "    %-18s %s\n", bases[i]->base, bases[i]->doc);
}

int ccb_strategy_resolve(const char *spec, const ccb_strategy_ops **ops, const char **config, char *label,
                         size_t labellen) {
    for (size_t i = 0; i < ccb_preset_count; i++) {
        if (strcmp(spec, ccb_presets[i].name) == 0) {
            *ops = ccb_strategy_base(ccb_presets[i].base);
            *config = ccb_presets[i].config;
            snprintf(label, labellen, "%s", spec);
            return *ops ? 0 : -1;
        }
    }
    const char *eq = strchr(spec, '=');
    size_t blen = eq ? (size_t)(eq - spec) : strlen(spec);
    char base[64];
    if (blen >= sizeof base)
        return -1;
    memcpy(base, spec, blen);
    base[blen] = '\0';
    *ops = ccb_strategy_base(base);
    *config = eq ? eq + 1 : "";
    snprintf(label, labellen, "%s", spec);
    return *ops ? 0 : -1;
}

/* ---- ccalloc over the simulated (host) device ----------------------------------- */

/* A trace's domains (bench/trace.c) are honoured by default: trace domain n
 * becomes cca_domain_create(name), its allocs cca_alloc_in, its release
 * cca_domain_release and its footprint cca_domain_reserve. The strategy key
 * "domains:0" in the config (taken out before cca_config_parse sees the
 * rest) serves every alloc from the default domain and ignores domain
 * events: the allocator as a program without domains would use it. A domain
 * the allocator refuses (the greedy policy refuses every domain) is served
 * by the default domain, and its events are then ignored. */
typedef struct ccalloc_impl {
    cca_upstream *u;
    cca_allocator *a;
    int domains;
    cca_domain **dom; /* trace domain n -> cca_domain; NULL: the default domain */
    size_t ndom;
} ccalloc_impl;

/* Copy config into buf without its "domains:0|1" tokens; -1 for a bad value. */
static int take_domains_key(const char *config, char *buf, size_t len, int *domains) {
    size_t n = 0;
    *domains = 1;
    buf[0] = '\0';
    for (const char *c = config; *c;) {
        const char *end = strchr(c, ',');
        size_t tl = end ? (size_t)(end - c) : strlen(c);
        if (tl >= 8 && !strncmp(c, "domains:", 8)) {
            if (tl != 9 || (c[8] != '0' && c[8] != '1'))
                return -1;
            *domains = c[8] == '1';
        } else if (tl) {
            if (n + tl + 2 > len)
                return -1;
            if (n)
                buf[n++] = ',';
            memcpy(buf + n, c, tl);
            n += tl;
            buf[n] = '\0';
        }
        c += tl + (end != NULL);
    }
    return 0;
}

/* Shared by ccalloc and ccalloc-cuda (strategy_cuda.cu opens the upstream). */
/* ccalloc's check: the config as open parses it (domains:0|1 taken out),
 * then validated; expandable:1 on a device without virtual memory is
 * open's to refuse. */
static int ccalloc_check(const char *config, char *why, size_t whylen) {
    char rest[512];
    int domains;
    if (take_domains_key(config, rest, sizeof rest, &domains) != 0) {
        snprintf(why, whylen, "config '%.200s': domains takes 0 or 1 (or the config is too long)", config);
        return -1;
    }
    cca_config cfg;
    cca_config_default(&cfg);
    if (cca_config_parse(&cfg, rest) != CCA_OK || cca_config_validate(&cfg) != CCA_OK) {
        snprintf(why, whylen, "%s", cca_last_error());
        return -1;
    }
    return 0;
}

int ccb_ccalloc_open_on(ccb_strategy *s, cca_upstream *u, const char *config, char *why, size_t whylen) {
    ccalloc_impl *c = calloc(1, sizeof *c);
    if (!c) {
        cca_upstream_destroy(u);
        snprintf(why, whylen, "out of host memory");
        return -1;
    }
    char rest[512];
    if (take_domains_key(config, rest, sizeof rest, &c->domains) != 0) {
        snprintf(why, whylen, "config '%.200s': domains takes 0 or 1 (or the config is too long)", config);
        cca_upstream_destroy(u);
        free(c);
        return -1;
    }
    cca_config cfg;
    cca_config_default(&cfg);
    cfg.log_oom = 0; /* OOMs are counted in the results, not logged per event */
    cca_status st = cca_config_parse(&cfg, rest);
    /* expandable:1 written in the config, not merely the default */
    cca_config asked;
    cca_config_default(&asked);
    asked.expandable = 0;
    size_t page;
    if (st == CCA_OK && cca_config_parse(&asked, rest) == CCA_OK && asked.expandable && !cca_upstream_has_vm(u)) {
        /* the allocator would fall back to classic segments: measuring them
         * under an expandable name would be wrong. The upstream's reason.
         * Without the key (the default), classic segments are what the
         * allocator itself would use there: no refusal. */
        (void)cca_upstream_vm_granularity(u, &page);
        snprintf(why, whylen, "expandable:1 needs virtual memory, and %s", cca_last_error());
        cca_upstream_destroy(u);
        free(c);
        return -1;
    }
    size_t dev_free, dev_total; /* before cca_create: a greedy arena is taken there */
    if (st == CCA_OK && cca_upstream_mem_info(u, &dev_free, &dev_total) == CCA_OK)
        s->device_free_at_open = dev_free;
    if (st == CCA_OK)
        st = cca_create(&cfg, u, &c->a);
    if (st != CCA_OK) {
        snprintf(why, whylen, "%s: %s", cca_status_string(st), cca_last_error());
        cca_upstream_destroy(u);
        free(c);
        return -1;
    }
    c->u = u;
    s->impl = c;
    return 0;
}

static int open_device(const ccb_device *dev, cca_upstream **u, char *why, size_t whylen) {
    cca_host_options ho = {.capacity = dev->bytes,
                           .alloc_latency_ns = dev->alloc_latency_ns,
                           .free_latency_ns = dev->free_latency_ns,
                           .vm_map_granule_latency_ns = dev->map_granule_ns,
                           .vm_unmap_granule_latency_ns = dev->unmap_granule_ns,
                           .vm_map_call_latency_ns = dev->map_call_ns,
                           .vm_unmap_call_latency_ns = dev->unmap_call_ns,
                           .vm_granularity = dev->vm_granularity,
                           .vm_backing = dev->vm_backing};
    cca_status st = cca_upstream_host_create_with(&ho, u);
    if (st != CCA_OK)
        snprintf(why, whylen, "host upstream: %s: %s", cca_status_string(st), cca_last_error());
    return st == CCA_OK ? 0 : -1;
}

static int ccalloc_host_open(ccb_strategy *s, const char *config, const ccb_device *dev, char *why, size_t whylen) {
    cca_upstream *u;
    if (open_device(dev, &u, why, whylen))
        return -1;
    return ccb_ccalloc_open_on(s, u, config, why, whylen);
}

/* Stream tokens: the host upstream takes any token; the CUDA one real streams. */

static int ccalloc_alloc_host_token(ccb_strategy *s, size_t size, unsigned stream, void **ptr) {
    ccalloc_impl *c = s->impl;
    cca_status st = cca_alloc(c->a, size, (cca_stream)(uintptr_t)stream, ptr);
    return st == CCA_OK ? 0 : st == CCA_ERR_OUT_OF_MEMORY ? 1 : -1;
}

static int ccalloc_alloc_cuda_stream(ccb_strategy *s, size_t size, unsigned stream, void **ptr) {
    ccalloc_impl *c = s->impl;
    cca_status st = cca_alloc(c->a, size, ccb_cuda_stream(stream), ptr);
    return st == CCA_OK ? 0 : st == CCA_ERR_OUT_OF_MEMORY ? 1 : -1;
}

static cca_domain *ccalloc_domain(const ccalloc_impl *c, unsigned n) {
    return n < c->ndom ? c->dom[n] : NULL;
}

static int ccalloc_alloc_in_host(ccb_strategy *s, unsigned domain, size_t size, unsigned stream, void **ptr) {
    ccalloc_impl *c = s->impl;
    cca_status st = cca_alloc_in(c->a, ccalloc_domain(c, domain), size, (cca_stream)(uintptr_t)stream, ptr);
    return st == CCA_OK ? 0 : st == CCA_ERR_OUT_OF_MEMORY ? 1 : -1;
}

static int ccalloc_alloc_in_cuda(ccb_strategy *s, unsigned domain, size_t size, unsigned stream, void **ptr) {
    ccalloc_impl *c = s->impl;
    cca_status st = cca_alloc_in(c->a, ccalloc_domain(c, domain), size, ccb_cuda_stream(stream), ptr);
    return st == CCA_OK ? 0 : st == CCA_ERR_OUT_OF_MEMORY ? 1 : -1;
}

static void ccalloc_domain_open(ccb_strategy *s, unsigned n, const char *name) {
    ccalloc_impl *c = s->impl;
    if (!c->domains)
        return;
    if (n >= c->ndom) {
        size_t cap = n + 1 > 2 * c->ndom ? n + 1 : 2 * c->ndom;
        cca_domain **d = realloc(c->dom, cap * sizeof *d);
        if (!d)
            return; /* served by the default domain */
        memset(d + c->ndom, 0, (cap - c->ndom) * sizeof *d);
        c->dom = d;
        c->ndom = cap;
    }
    if (cca_domain_create(c->a, name, &c->dom[n]) != CCA_OK)
        c->dom[n] = NULL;
}

static void ccalloc_domain_release(ccb_strategy *s, unsigned n) {
    ccalloc_impl *c = s->impl;
    if (c->domains && (n == 0 || ccalloc_domain(c, n)))
        cca_domain_release(c->a, ccalloc_domain(c, n), 0, NULL);
}

static void ccalloc_domain_reserve(ccb_strategy *s, unsigned n, size_t bytes) {
    ccalloc_impl *c = s->impl;
    if (c->domains && (n == 0 || ccalloc_domain(c, n)))
        cca_domain_reserve(c->a, ccalloc_domain(c, n), bytes);
}

static void ccalloc_release(ccb_strategy *s, void *ptr, size_t size, unsigned stream) {
    (void)size;
    (void)stream;
    cca_free(((ccalloc_impl *)s->impl)->a, ptr);
}

static void ccalloc_sample(ccb_strategy *s, ccb_mem *m) {
    cca_stats st;
    cca_get_stats(((ccalloc_impl *)s->impl)->a, &st);
    m->allocated = st.allocated_bytes;
    m->reserved = st.reserved_bytes;
    m->fragmentation = st.fragmentation;
    m->upstream_allocs = st.upstream_allocs;
    m->upstream_frees = st.upstream_frees;
    m->requested_peak = st.requested_bytes_peak;
}

static void ccalloc_peaks(ccb_strategy *s, size_t *allocated_peak, size_t *reserved_peak) {
    cca_stats st;
    cca_get_stats(((ccalloc_impl *)s->impl)->a, &st);
    *allocated_peak = st.allocated_bytes_peak;
    *reserved_peak = st.reserved_bytes_peak;
}

static void ccalloc_empty(ccb_strategy *s) {
    cca_empty_cache(((ccalloc_impl *)s->impl)->a, NULL);
}

static void ccalloc_trim(ccb_strategy *s, size_t keep) {
    cca_trim(((ccalloc_impl *)s->impl)->a, keep, NULL);
}

static size_t ccalloc_device_free(ccb_strategy *s) {
    size_t fr, total;
    return cca_upstream_mem_info(((ccalloc_impl *)s->impl)->u, &fr, &total) == CCA_OK ? fr : CCB_UNKNOWN;
}

static void ccalloc_close(ccb_strategy *s) {
    ccalloc_impl *c = s->impl;
    if (!c)
        return;
    cca_destroy(c->a); /* its domains with it */
    cca_upstream_destroy(c->u);
    free(c->dom);
    free(c);
    s->impl = NULL;
}

const ccb_strategy_ops ccb_strategy_ccalloc_host = {
    .base = "ccalloc",
    .doc = "ccalloc over the simulated device (host memory, --device-bytes capacity)",
    .gpu = 0,
    .open = ccalloc_host_open,
    .alloc = ccalloc_alloc_host_token,
    .release = ccalloc_release,
    .sample = ccalloc_sample,
    .peaks = ccalloc_peaks,
    .empty_cache = ccalloc_empty,
    .device_free = ccalloc_device_free,
    .close = ccalloc_close,
    .host_pointers = 1,
    .trim = ccalloc_trim,
    .domain_open = ccalloc_domain_open,
    .alloc_in = ccalloc_alloc_in_host,
    .domain_release = ccalloc_domain_release,
    .domain_reserve = ccalloc_domain_reserve,
    .driver = CCB_DRIVER_MODEL,
    .check = ccalloc_check,
};

/* ccalloc over cudaMalloc: opened by strategy_cuda.cu / strategy_nocuda.c
 * through ccb_ccalloc_open_on; the rest is shared with the host version. */

const ccb_strategy_ops ccb_strategy_ccalloc_cuda = {
    .base = "ccalloc-cuda",
    .doc = "ccalloc over the CUDA upstream (cudaMalloc/cudaFree) on device 0",
    .gpu = 1,
    .open = ccb_ccalloc_cuda_open,
    .alloc = ccalloc_alloc_cuda_stream,
    .release = ccalloc_release,
    .sample = ccalloc_sample,
    .peaks = ccalloc_peaks,
    .empty_cache = ccalloc_empty,
    .device_free = ccalloc_device_free,
    .close = ccalloc_close,
    .host_pointers = 0,
    .trim = ccalloc_trim,
    .domain_open = ccalloc_domain_open,
    .alloc_in = ccalloc_alloc_in_cuda,
    .domain_release = ccalloc_domain_release,
    .domain_reserve = ccalloc_domain_reserve,
    .driver = CCB_DRIVER_REAL,
    .check = ccalloc_check,
};

/* ---- malloc/free floor ------------------------------------------------------------ */

typedef struct malloc_impl {
    size_t live, peak;
    size_t max_block; /* the device's capacity, at most the host's memory */
} malloc_impl;

static int malloc_open(ccb_strategy *s, const char *config, const ccb_device *dev, char *why, size_t whylen) {
    if (config && *config) {
        snprintf(why, whylen, "malloc takes no config (got '%s')", config);
        return -1;
    }
    malloc_impl *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(why, whylen, "out of host memory");
        return -1;
    }
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    size_t host =
        pages > 0 && page > 0 && (size_t)pages <= SIZE_MAX / (size_t)page ? (size_t)pages * (size_t)page : SIZE_MAX;
    m->max_block = dev->bytes < host ? dev->bytes : host;
    s->impl = m;
    return 0;
}

static int malloc_alloc(ccb_strategy *s, size_t size, unsigned stream, void **ptr) {
    (void)stream;
    malloc_impl *m = s->impl;
    *ptr = NULL;
    if (size > m->max_block)
        return 1; /* over the device or the host: an OOM, malloc not asked */
    *ptr = malloc(size);
    if (!*ptr)
        return 1;
    m->live += size;
    if (m->live > m->peak)
        m->peak = m->live;
    return 0;
}

static void malloc_release(ccb_strategy *s, void *ptr, size_t size, unsigned stream) {
    (void)stream;
    free(ptr);
    ((malloc_impl *)s->impl)->live -= size;
}

static void malloc_sample(ccb_strategy *s, ccb_mem *m) {
    m->allocated = ((malloc_impl *)s->impl)->live;
    m->reserved = CCB_UNKNOWN;
    m->fragmentation = -1;
    m->upstream_allocs = m->upstream_frees = UINT64_MAX;
    m->requested_peak = CCB_UNKNOWN;
}

static void malloc_peaks(ccb_strategy *s, size_t *allocated_peak, size_t *reserved_peak) {
    *allocated_peak = ((malloc_impl *)s->impl)->peak;
    *reserved_peak = CCB_UNKNOWN;
}

static void malloc_empty(ccb_strategy *s) {
    (void)s;
}
static void malloc_trim(ccb_strategy *s, size_t keep) {
    (void)s;
    (void)keep;
}
static size_t malloc_device_free(ccb_strategy *s) {
    (void)s;
    return CCB_UNKNOWN;
}
static void malloc_close(ccb_strategy *s) {
    free(s->impl);
    s->impl = NULL;
}

const ccb_strategy_ops ccb_strategy_malloc = {
    .base = "malloc",
    .doc = "glibc malloc/free of the requested sizes (reserved bytes unknown; a block over --device-bytes: OOM)",
    .gpu = 0,
    .open = malloc_open,
    .alloc = malloc_alloc,
    .release = malloc_release,
    .sample = malloc_sample,
    .peaks = malloc_peaks,
    .empty_cache = malloc_empty,
    .device_free = malloc_device_free,
    .close = malloc_close,
    .host_pointers = 1,
    .trim = malloc_trim,
    .driver = CCB_DRIVER_NONE,
    .check = ccb_no_config_check,
};

/* ---- one device call per request (no cache) ---------------------------------------- */

/* What raw cudaMalloc/cudaFree per request is on a GPU, on the simulated
 * device: each request rounded up to CCA_GRANULARITY (the wrapper's unit; the
 * device itself rounds to its page and counts that) and allocated from the
 * device; each free returns it. Nothing is cached, so release events have
 * nothing to do, reserved is what the device holds for live blocks, and every
 * request pays the driver's cost. A 0-byte request is NULL, no call. */
typedef struct dm_impl {
    cca_upstream *u;
    size_t allocated, allocated_peak, reserved_peak;
} dm_impl;

static size_t dm_round(size_t size) {
    return size > SIZE_MAX - CCA_GRANULARITY ? 0 : (size + CCA_GRANULARITY - 1) / CCA_GRANULARITY * CCA_GRANULARITY;
}

static size_t dm_reserved(dm_impl *d) {
    size_t fr, total;
    return cca_upstream_mem_info(d->u, &fr, &total) == CCA_OK ? total - fr : CCB_UNKNOWN;
}

static int dm_open(ccb_strategy *s, const char *config, const ccb_device *dev, char *why, size_t whylen) {
    if (config && *config) {
        snprintf(why, whylen, "device-malloc takes no config (got '%s')", config);
        return -1;
    }
    dm_impl *d = calloc(1, sizeof *d);
    if (!d) {
        snprintf(why, whylen, "out of host memory");
        return -1;
    }
    if (open_device(dev, &d->u, why, whylen)) {
        free(d);
        return -1;
    }
    s->impl = d;
    return 0;
}

static int dm_alloc(ccb_strategy *s, size_t size, unsigned stream, void **ptr) {
    (void)stream;
    dm_impl *d = s->impl;
    *ptr = NULL;
    if (size == 0)
        return 0;
    size_t r = dm_round(size);
    if (r == 0)
        return 1;
    cca_status st = cca_upstream_alloc(d->u, r, ptr);
    if (st != CCA_OK)
        return st == CCA_ERR_OUT_OF_MEMORY ? 1 : -1;
    d->allocated += r;
    if (d->allocated > d->allocated_peak)
        d->allocated_peak = d->allocated;
    size_t res = dm_reserved(d);
    if (res != CCB_UNKNOWN && res > d->reserved_peak)
        d->reserved_peak = res;
    return 0;
}

static void dm_release(ccb_strategy *s, void *ptr, size_t size, unsigned stream) {
    (void)stream;
    dm_impl *d = s->impl;
    if (cca_upstream_free(d->u, ptr, dm_round(size)) == CCA_OK)
        d->allocated -= dm_round(size);
}

static void dm_sample(ccb_strategy *s, ccb_mem *m) {
    dm_impl *d = s->impl;
    cca_upstream_stats us;
    cca_upstream_get_stats(d->u, &us);
    m->allocated = d->allocated;
    m->reserved = dm_reserved(d);
    m->fragmentation = -1;
    m->upstream_allocs = us.alloc_calls;
    m->upstream_frees = us.free_calls;
    m->requested_peak = CCB_UNKNOWN;
}

static void dm_peaks(ccb_strategy *s, size_t *allocated_peak, size_t *reserved_peak) {
    dm_impl *d = s->impl;
    *allocated_peak = d->allocated_peak;
    *reserved_peak = d->reserved_peak;
}

static void dm_empty(ccb_strategy *s) {
    (void)s; /* nothing cached */
}

static void dm_trim(ccb_strategy *s, size_t keep) {
    (void)s;
    (void)keep;
}

static size_t dm_device_free(ccb_strategy *s) {
    size_t fr, total;
    return cca_upstream_mem_info(((dm_impl *)s->impl)->u, &fr, &total) == CCA_OK ? fr : CCB_UNKNOWN;
}

static void dm_close(ccb_strategy *s) {
    dm_impl *d = s->impl;
    if (!d)
        return;
    cca_upstream_destroy(d->u);
    free(d);
    s->impl = NULL;
}

const ccb_strategy_ops ccb_strategy_device_malloc = {
    .base = "device-malloc",
    .doc = "one simulated-device alloc/free per request, nothing cached (raw cudaMalloc's analogue)",
    .gpu = 0,
    .open = dm_open,
    .alloc = dm_alloc,
    .release = dm_release,
    .sample = dm_sample,
    .peaks = dm_peaks,
    .empty_cache = dm_empty,
    .device_free = dm_device_free,
    .close = dm_close,
    .host_pointers = 1,
    .trim = dm_trim,
    .driver = CCB_DRIVER_MODEL,
    .check = ccb_no_config_check,
};

/* ---- the GPU strategies' configs ------------------------------------------------- */

int ccb_no_config_check(const char *config, char *why, size_t whylen) {
    if (config && *config) {
        snprintf(why, whylen, "takes no config (got '%s')", config);
        return -1;
    }
    return 0;
}

int ccb_async_config_check(const char *config, char *why, size_t whylen) {
    unsigned long long threshold;
    return ccb_async_config_parse(config, &threshold, why, whylen);
}

int ccb_cub_config_check(const char *config, char *why, size_t whylen) {
    ccb_cub_config c;
    return ccb_cub_config_parse(config, &c, why, whylen);
}

int ccb_async_config_parse(const char *config, unsigned long long *threshold, char *why, size_t whylen) {
    static const char key[] = "release_threshold:";
    *threshold = 0;
    if (!config || !*config)
        return 0;
    if (!strcmp(config, "release_threshold:max")) {
        *threshold = UINT64_MAX;
        return 0;
    }
    if (strncmp(config, key, sizeof key - 1) || ccai_decimal_uint(config + sizeof key - 1, 0, UINT64_MAX, threshold)) {
        snprintf(why, whylen,
                 "cuda-async: config is release_threshold:N (plain decimal) or release_threshold:max, got '%s'",
                 config);
        return -1;
    }
    return 0;
}

/* base^exp <= UINT64_MAX */
static int power_fits(unsigned long long base, unsigned exp) {
    unsigned long long p = 1;
    for (unsigned i = 0; i < exp; i++) {
        if (p > UINT64_MAX / base)
            return 0;
        p *= base;
    }
    return 1;
}

int ccb_cub_config_parse(const char *config, ccb_cub_config *c, char *why, size_t whylen) {
    *c = (ccb_cub_config){.bin_growth = 8, .min_bin = 3, .max_bin = 7, .max_cached = (6ull << 20) - 1};
    char item[64];
    for (const char *at = config; at && *at;) {
        size_t n = strcspn(at, ",");
        snprintf(item, sizeof item, "%.*s", (int)(n < sizeof item ? n : sizeof item - 1), at);
        char *colon = strchr(item, ':');
        unsigned *field = NULL; /* the key's field and range */
        unsigned long long v = 0, lo = 0, hi = UINT32_MAX;
        if (n < sizeof item && colon) {
            *colon = '\0';
            if (!strcmp(item, "bin_growth"))
                field = &c->bin_growth, lo = 2;
            else if (!strcmp(item, "min_bin"))
                field = &c->min_bin;
            else if (!strcmp(item, "max_bin"))
                field = &c->max_bin;
            else if (!strcmp(item, "max_cached"))
                hi = UINT64_MAX;
            else
                colon = NULL; /* an unknown key */
        }
        int bad = n >= sizeof item || !colon || ccai_decimal_uint(colon + 1, lo, hi, &v);
        if (!bad && field)
            *field = (unsigned)v;
        else if (!bad)
            c->max_cached = v;
        if (bad) {
            snprintf(why, whylen,
                     "cub: bad config item '%.*s' (expected bin_growth:2..2^32-1, min_bin:N, max_bin:N or "
                     "max_cached:BYTES, plain decimal, separated by single commas)",
                     (int)n, at);
            return -1;
        }
        at += n;
        if (*at == ',' && !*++at) { /* a trailing comma: an empty item */
            snprintf(why, whylen, "cub: bad config '%s': empty item after the last comma", config);
            return -1;
        }
    }
    if (c->min_bin > c->max_bin || !power_fits(c->bin_growth, c->max_bin)) {
        snprintf(why, whylen,
                 "cub: config needs min_bin <= max_bin and bin_growth^max_bin < 2^64, got min_bin %u, max_bin %u, "
                 "bin_growth %u",
                 c->min_bin, c->max_bin, c->bin_growth);
        return -1;
    }
    return 0;
}
