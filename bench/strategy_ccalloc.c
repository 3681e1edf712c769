/*
 * strategy_ccalloc.c — the ccalloc strategies: the allocator under test,
 * over the simulated device (base "ccalloc") and over the CUDA upstream
 * (base "ccalloc-cuda"). One implementation serves both; they differ in
 * the upstream they open and in what a trace's stream number becomes.
 *
 * - Config: cca_config_parse's syntax on top of cca_config_default, plus the
 *   strategy's own key domains:0|1 (taken out first); log_oom is off (OOMs
 *   are counted in the results, not logged per event). expandable:1 written
 *   in the config is refused on a device without virtual memory (the
 *   allocator would fall back to classic segments under an expandable name).
 * - Figures: every number from cca_get_stats; device free bytes from the
 *   upstream's mem_info.
 * - "ccalloc": the simulated device a ccb_device describes, with its driver
 *   latencies (ccb_simulated_device_open, strategy_baselines.c); a trace's
 *   stream n is the token n.
 * - "ccalloc-cuda": device 0 through ccb_cuda_upstream_open and stream n
 *   through ccb_cuda_stream (strategy_cuda.cu, or strategy_nocuda.c, which
 *   says why there is no GPU).
 */
#include "ccbench.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ccai_utf8.h" /* common/: ccai_utf8_head */
#include "ccalloc.h"

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

/* The refusal of a domains key: the config quoted, its first 200 bytes at
 * most, cut between UTF-8 characters (ccai_utf8_head) and marked "...". */
static void bad_domains(const char *config, char *why, size_t whylen) {
    size_t n = strlen(config);
    snprintf(why, whylen, "config '%.*s%s': domains takes 0 or 1 (or the config is too long)",
             ccai_utf8_head(config, n, 200), config, n > 200 ? "..." : "");
}

/* ccalloc's check: the config as open parses it (domains:0|1 taken out),
 * then validated; expandable:1 on a device without virtual memory is
 * open's to refuse. */
static int ccalloc_check(const char *config, char *why, size_t whylen) {
    char rest[512];
    int domains;
    if (take_domains_key(config, rest, sizeof rest, &domains) != 0) {
        bad_domains(config, why, whylen);
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
        bad_domains(config, why, whylen);
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

static int ccalloc_host_open(ccb_strategy *s, const char *config, const ccb_device *dev, char *why, size_t whylen) {
    cca_upstream *u;
    if (ccb_simulated_device_open(dev, &u, why, whylen))
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

/* The two bases' tables: what differs is the device (open), what a trace's
 * stream becomes (alloc, alloc_in) and where the driver's time comes from. */
#define CCALLOC_OPS(name, text, on_gpu, opener, alloc_op, alloc_in_op, driver_time)                                    \
    {                                                                                                                  \
        .base = name, .doc = text, .gpu = on_gpu, .open = opener, .alloc = alloc_op, .release = ccalloc_release,       \
        .sample = ccalloc_sample, .peaks = ccalloc_peaks, .empty_cache = ccalloc_empty,                                \
        .device_free = ccalloc_device_free, .close = ccalloc_close, .host_pointers = !(on_gpu), .trim = ccalloc_trim,  \
        .domain_open = ccalloc_domain_open, .alloc_in = alloc_in_op, .domain_release = ccalloc_domain_release,         \
        .domain_reserve = ccalloc_domain_reserve, .driver = driver_time, .check = ccalloc_check,                       \
    }

const ccb_strategy_ops ccb_strategy_ccalloc_host =
    CCALLOC_OPS("ccalloc", "ccalloc over the simulated device (host memory, --device-bytes capacity)", 0,
                ccalloc_host_open, ccalloc_alloc_host_token, ccalloc_alloc_in_host, CCB_DRIVER_MODEL);

/* ccalloc over the CUDA upstream: the upstream from strategy_cuda.cu /
 * strategy_nocuda.c; the rest is shared with the host version. */

static int ccalloc_cuda_open(ccb_strategy *s, const char *config, const ccb_device *dev, char *why, size_t whylen) {
    cca_upstream *u;
    int rc = ccb_cuda_upstream_open(dev, &u, why, whylen);
    return rc ? rc : ccb_ccalloc_open_on(s, u, config, why, whylen);
}

const ccb_strategy_ops ccb_strategy_ccalloc_cuda =
    CCALLOC_OPS("ccalloc-cuda", "ccalloc over the CUDA upstream (cudaMalloc/cudaFree) on device 0", 1,
                ccalloc_cuda_open, ccalloc_alloc_cuda_stream, ccalloc_alloc_in_cuda, CCB_DRIVER_REAL);
