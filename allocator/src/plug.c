/*
 * plug.c — the entry points a framework calls instead of its own allocator:
 * PyTorch's CUDAPluggableAllocator, and through the Python package the CuPy
 * and Numba adapters (docs/python.md, "The framework entry points").
 *
 * - PyTorch calls two functions, nothing else (no init, empty_cache or
 *   stats: PyTorch refuses those with a pluggable allocator), for every
 *   tensor on the current device and stream, and when it dies with the
 *   same values:
 *     void *cca_plug_alloc(size_t size, int device, cudaStream_t stream)
 *     void cca_plug_free(void *ptr, size_t size, int device, cudaStream_t stream)
 *   Everything else is an ordinary status-returning call on a device's
 *   allocator (cca_plug_get_allocator), for the Python package.
 * - One allocator per device number, in a fixed table of
 *   CCA_PLUG_MAX_DEVICES slots, made on the first call naming the device:
 *
 *     devices[0]  allocator ──> cca_allocator (config: cca_plug_configure or CCALLOC_CONF)
 *                 upstream  ──> cuda:0  (or a simulated device, if chosen)
 *     devices[1]  failed = CCA_ERR_NO_DEVICE, why = "cuda: device 1 not in [0, 1)"
 *     devices[2]  (never named: nothing)
 *
 * - Memory comes from CUDA device `device` unless a simulated device was
 *   chosen (cca_plug_configure, or CCALLOC_PLUG_UPSTREAM
 *   "host[:CAPACITY[:DEVICES]]"); never by fallback. A slot's failure is
 *   sticky until cca_plug_reset: logged once, then every call on the slot
 *   sets the same message without asking the driver again.
 * - Locking: creation takes plug_lock and checks the slot again under it
 *   (racing first calls make one allocator); the pointer is published with
 *   a release store, read with one acquire load. cca_plug_reset (tests)
 *   must not run while another thread is in a cca_plug_* call.
 * - Fork: safe with calls in flight; fork.c's handler takes plug_lock
 *   first (docs/allocator.md, "Threads").
 * - Errors: the two PyTorch entry points never abort, longjmp or throw:
 *   failure is NULL (alloc) or nothing (free), with cca_last_error() set
 *   and one log line naming the call, device and reason (an OOM is logged
 *   by the allocator's log_oom, not twice). A free of a pointer that is not
 *   a live block of that device's allocator changes nothing and is logged.
 *   size 0 returns NULL and creates nothing (PyTorch's own empty tensor);
 *   a free of NULL does nothing.
 * - The thread's current domain (cca_plug_set_domain): PyTorch's alloc
 *   takes no domain, so the domain a thread's allocations go to is kept
 *   per thread and per device, in thread-local storage:
 *
 *     thread T1  current = { generation 3, domain[0] = A, domain[1] = NULL }
 *     thread T2  current = { generation 3, domain[0] = B, ... }
 *     thread T3  current = { generation 2, ... }  stale: all default
 *
 *   cca_plug_alloc on device n asks cca_alloc_in for domain[n] (NULL: the
 *   default domain, plain cca_alloc). A handle is checked when it is set
 *   (one of the device's allocator's live domains); one destroyed after
 *   that is refused by cca_alloc_in at the next alloc (NULL, logged). A
 *   thread's table counts only while its generation is plug_generation,
 *   which cca_plug_reset bumps: every thread's domains go back to the
 *   default without the reset touching another thread's storage. A free
 *   needs no domain: the block knows its own.
 * - Departs from PyTorch in one visible way: freed blocks stay cached until
 *   ccalloc's own release calls (cca_trim, cca_empty_cache,
 *   ccalloc.torch.empty_cache()); PyTorch's empty_cache calls nothing here.
 * - Costs: after the first call on a device, a range check, one atomic load
 *   (alloc: two, and a thread-local read for the domain) and the cca_alloc /
 *   cca_alloc_in / cca_free it forwards to. The first call: parsing
 *   the config, creating the upstream (the CUDA runtime's first call on a
 *   device: tens to hundreds of ms) and the allocator (greedy: its arena).
 */
#include "../core/internal.h"
#include "domain.h" /* ccai_domain_check */

#include "ccai_decimal.h" /* common/: ccai_decimal_uint */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h> /* sysconf: the host page */

/* Longest CCALLOC_PLUG_UPSTREAM / cca_plug_configure upstream text read. */
#define PLUG_SPEC_MAX 127
/* Simulated device size when "host" gives none. */
#define PLUG_HOST_DEFAULT_CAPACITY ((size_t)1 << 30)

typedef enum plug_kind { PLUG_CUDA = 0, PLUG_HOST = 1 } plug_kind;

/* Where memory comes from, parsed from the upstream text. */
typedef struct plug_spec {
    plug_kind kind;
    size_t capacity; /* host: bytes per simulated device */
    int devices;     /* host: how many simulated devices (device numbers 0..devices-1) */
    size_t vm_granularity; /* cuda: cca_cuda_options.vm_granularity (0: the driver's minimum) */
    int vm_backing;        /* cuda: cca_cuda_options.vm_backing (CCA_VM_WHOLE_MAPS unless given) */
    int host_memory;       /* cuda: cca_cuda_options.host_memory (CCA_HOST_MEMORY_PINNED unless given) */
} plug_spec;

typedef struct plug_device {
    _Atomic(cca_allocator *) allocator; /* published last, with release order */
    cca_upstream *upstream;
    cca_status failed; /* sticky creation failure (CCA_OK: none) */
    char why[CCAI_ERROR_CAP]; /* its message, whole: as long as any thread's message */
} plug_device;

static plug_device devices[CCA_PLUG_MAX_DEVICES];
static pthread_mutex_t plug_lock = PTHREAD_MUTEX_INITIALIZER;

/* Set by cca_plug_configure; read once, under plug_lock, by the first
 * creation (`started` then refuses a later configure). */
static struct {
    bool have_spec;
    plug_spec spec;
    bool have_config;
    cca_config config;
    bool started;
} plug;

/* The thread's current domain per device (cca_plug_set_domain), valid
 * while its generation is plug_generation: cca_plug_reset bumps that, so
 * every thread's table reads as all default afterwards. A new thread's
 * generation is 0, never current (plug_generation starts at 1). */
static _Atomic uint64_t plug_generation = 1;
static _Thread_local struct {
    uint64_t generation;
    cca_domain *domain[CCA_PLUG_MAX_DEVICES];
} current;

/* This thread's domain for `device` (in range); NULL: the default domain. */
static cca_domain *current_domain(int device) {
    if (current.generation != atomic_load_explicit(&plug_generation, memory_order_relaxed))
        return NULL;
    return current.domain[device];
}

/* ---- the upstream text ----------------------------------------------------- */

/* What "cuda:" takes, said by every refusal of a "cuda..." text. */
#define PLUG_CUDA_FORM                                                                                                 \
    "cuda[:KEY=VALUE[,KEY=VALUE]] with keys vm_granularity=SIZE, vm_backing=pages|whole_maps and "                     \
    "host_memory=pinned|registered, each at most once"

/* The keys after "cuda:" (buf, written into: each pair cut at its comma):
 * comma-separated KEY=VALUE, each key once, no empty key, value or pair. */
static cca_status parse_cuda_keys(char *keys, plug_spec *s) {
    bool have_page = false, have_backing = false, have_host = false;
    for (char *pair = keys, *next; pair; pair = next) {
        char *comma = strchr(pair, ',');
        next = comma ? comma + 1 : NULL;
        if (comma)
            *comma = '\0';
        char *eq = strchr(pair, '=');
        const char *v = eq ? eq + 1 : "";
        if (eq)
            *eq = '\0';
        if (strcmp(pair, "vm_granularity") == 0 && !have_page && *v) {
            size_t g = 0;
            if (cca_parse_size_exact(v, &g) != CCA_OK || !g || (g & (g - 1)) || g % CCA_GRANULARITY ||
                g > CCA_CUDA_MAX_VM_GRANULARITY)
                return cca_set_error(CCA_ERR_CONFIG,
                                 "upstream 'cuda': vm_granularity '%s' is not a power of two from %u to %zu (expected "
                                 "%s)",
                                 v, CCA_GRANULARITY, CCA_CUDA_MAX_VM_GRANULARITY, PLUG_CUDA_FORM);
            s->vm_granularity = g;
            have_page = true;
        } else if (strcmp(pair, "vm_backing") == 0 && !have_backing &&
                   (strcmp(v, "pages") == 0 || strcmp(v, "whole_maps") == 0)) {
            s->vm_backing = strcmp(v, "pages") == 0 ? CCA_VM_PAGES : CCA_VM_WHOLE_MAPS;
            have_backing = true;
        } else if (strcmp(pair, "host_memory") == 0 && !have_host &&
                   (strcmp(v, "pinned") == 0 || strcmp(v, "registered") == 0)) {
            s->host_memory = strcmp(v, "pinned") == 0 ? CCA_HOST_MEMORY_PINNED : CCA_HOST_MEMORY_REGISTERED;
            have_host = true;
        } else {
            bool twice = (strcmp(pair, "vm_granularity") == 0 && have_page) ||
                         (strcmp(pair, "vm_backing") == 0 && have_backing) ||
                         (strcmp(pair, "host_memory") == 0 && have_host);
            return cca_set_error(CCA_ERR_CONFIG, "upstream 'cuda': '%s%s%s' is %s (expected %s)", pair, eq ? "=" : "", v,
                             twice ? "a key given twice" : "not a key=value it takes", PLUG_CUDA_FORM);
        }
    }
    return CCA_OK;
}

/* "cuda" | "cuda:KEY=VALUE[,KEY=VALUE]" (vm_granularity=SIZE,
 * vm_backing=pages|whole_maps, host_memory=pinned|registered) | "host" |
 * "host:CAPACITY" |
 * "host:CAPACITY:DEVICES". CAPACITY is at least the host page (a smaller
 * device could hold nothing: cca_upstream_host_create refuses it). Every
 * number is decimal with any leading zeros ("010" devices are ten), as
 * cca_parse_size and ccai_decimal_uint read every number of the library. */
static cca_status parse_spec(const char *text, plug_spec *out) {
    size_t n = strnlen(text, PLUG_SPEC_MAX + 1);
    if (n > PLUG_SPEC_MAX)
        return cca_set_error(CCA_ERR_CONFIG, "upstream: text longer than %d characters", PLUG_SPEC_MAX);
    char buf[PLUG_SPEC_MAX + 1];
    memcpy(buf, text, n);
    buf[n] = '\0';
    plug_spec s = {.kind = PLUG_CUDA, .capacity = 0, .devices = 1};
    if (strcmp(buf, "cuda") == 0) {
        *out = s;
        return CCA_OK;
    }
    if (strncmp(buf, "cuda:", 5) == 0) {
        cca_status st = parse_cuda_keys(buf + 5, &s);
        if (st == CCA_OK)
            *out = s;
        return st;
    }
    if (strncmp(buf, "cuda", 4) == 0)
        return cca_set_error(CCA_ERR_CONFIG, "upstream '%s': expected %s", buf, PLUG_CUDA_FORM);
    if (strncmp(buf, "host", 4) != 0 || (buf[4] != '\0' && buf[4] != ':'))
        return cca_set_error(CCA_ERR_CONFIG,
                         "upstream '%s': expected cuda[:KEY=VALUE[,KEY=VALUE]] or host[:CAPACITY[:DEVICES]]", buf);
    s.kind = PLUG_HOST;
    s.capacity = PLUG_HOST_DEFAULT_CAPACITY;
    if (buf[4] == ':') {
        char *cap = buf + 5;
        char *colon = strchr(cap, ':');
        if (colon)
            *colon = '\0';
        if (cca_parse_size(cap, &s.capacity) != CCA_OK || s.capacity == 0)
            return cca_set_error(CCA_ERR_CONFIG, "upstream 'host': capacity '%s' is not a size > 0 like 512M", cap);
        long page = sysconf(_SC_PAGESIZE); /* cca_upstream_host_create's own least capacity, said up front */
        if (page > 0 && s.capacity < (size_t)page)
            return cca_set_error(
                CCA_ERR_CONFIG,
                "upstream 'host': capacity '%s' is below the %ld-byte host page, the least a simulated "
                "device holds",
                cap, page);
        if (colon) {
            const char *d = colon + 1;
            unsigned long long v;
            if (ccai_decimal_uint(d, 1, CCA_PLUG_MAX_DEVICES, &v))
                return cca_set_error(CCA_ERR_CONFIG, "upstream 'host': devices '%s' is not a number in [1, %d]", d,
                                 CCA_PLUG_MAX_DEVICES);
            s.devices = (int)v;
        }
    }
    *out = s;
    return CCA_OK;
}

/* ---- fork --------------------------------------------------------------------- */

/* fork.c's handler: plug_lock first before a fork (a device's creation
 * holds it across cca_create, which takes the registry's lock), last after. */
void ccai_plug_fork_lock(bool lock) {
    if (lock)
        pthread_mutex_lock(&plug_lock);
    else
        pthread_mutex_unlock(&plug_lock);
}

static void fork_take(ccai_fork_link *l) {
    (void)l;
    ccai_plug_fork_lock(true);
}

static void fork_give(ccai_fork_link *l, bool child) {
    (void)l, (void)child;
    ccai_plug_fork_lock(false);
}

/* fork.c's OUTER rank, from the library's load: before any thread can hold plug_lock. */
__attribute__((constructor)) static void fork_register(void) {
    static ccai_fork_link link = {.take = fork_take, .give = fork_give};
    ccai_fork_register(CCAI_FORK_OUTER, &link);
}

/* ---- creating a device's allocator ----------------------------------------- */

/* The configuration in force: cca_plug_configure's, else the environment. */
static cca_status resolve_spec(plug_spec *s) {
    if (plug.have_spec) {
        *s = plug.spec;
        return CCA_OK;
    }
    const char *env = getenv("CCALLOC_PLUG_UPSTREAM");
    if (!env || !*env) {
        *s = (plug_spec){.kind = PLUG_CUDA, .devices = 1};
        return CCA_OK;
    }
    cca_status st = parse_spec(env, s);
    return st == CCA_OK ? st : cca_error_prefix(st, "CCALLOC_PLUG_UPSTREAM");
}

static cca_status create_upstream(const plug_spec *s, int device, cca_upstream **u) {
    if (s->kind == PLUG_CUDA) {
        cca_cuda_options o = {.device = device,
                              .vm_granularity = s->vm_granularity,
                              .vm_backing = s->vm_backing,
                              .host_memory = s->host_memory};
        return cca_upstream_cuda_create_with(&o, u);
    }
    if (device >= s->devices)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "simulated device %d not in [0, %d)", device, s->devices);
    return cca_upstream_host_create(s->capacity, u);
}

/* Under plug_lock: make devices[device] usable or record why not. */
static void create_locked(int device) {
    plug_device *d = &devices[device];
    plug.started = true;
    plug_spec s;
    cca_upstream *u = NULL;
    cca_allocator *a = NULL;
    cca_status st = resolve_spec(&s);
    if (st == CCA_OK)
        st = create_upstream(&s, device, &u);
    if (st == CCA_OK) {
        /* cca_create(NULL): defaults + CCALLOC_CONF, a bad one logged and
         * the defaults kept, as for every allocator of the library */
        st = cca_create(plug.have_config ? &plug.config : NULL, u, &a);
        if (st != CCA_OK)
            cca_upstream_destroy(u);
    }
    if (st != CCA_OK) {
        d->failed = st;
        snprintf(d->why, sizeof d->why, "device %d: %s", device, cca_last_error());
        ccai_log("cca_plug: %s (%s); every alloc on this device returns NULL until cca_plug_reset", d->why,
                 cca_status_string(st));
        return;
    }
    d->upstream = u;
    atomic_store_explicit(&d->allocator, a, memory_order_release);
}

/* The allocator of `device`, created on first use; NULL with the thread's
 * message set (logged by the caller or, for creation, once here). */
static cca_allocator *device_allocator(const char *who, int device, cca_status *status) {
    if (device < 0 || device >= CCA_PLUG_MAX_DEVICES) {
        *status =
            cca_set_error(CCA_ERR_INVALID_ARGUMENT, "%s: device %d not in [0, %d)", who, device, CCA_PLUG_MAX_DEVICES);
        return NULL;
    }
    plug_device *d = &devices[device];
    cca_allocator *a = atomic_load_explicit(&d->allocator, memory_order_acquire);
    if (a)
        return a;
    ccai_log_hold(); /* a creation's lines are written once plug_lock is released */
    pthread_mutex_lock(&plug_lock);
    a = atomic_load_explicit(&d->allocator, memory_order_relaxed);
    if (!a && d->failed == CCA_OK)
        create_locked(device);
    a = atomic_load_explicit(&d->allocator, memory_order_relaxed);
    cca_status failed = d->failed;
    char why[sizeof d->why];
    memcpy(why, d->why, sizeof why);
    pthread_mutex_unlock(&plug_lock);
    ccai_log_release();
    if (!a)
        *status = cca_set_error(failed, "%s: %s", who, why);
    return a;
}

/* ---- PyTorch's two entry points -------------------------------------------- */

/* One log line for a failure whose message this thread just set. */
static void log_failure(cca_status st) {
    ccai_log("%s (%s)", cca_last_error(), cca_status_string(st));
}

void *cca_plug_alloc(size_t size, int device, void *stream) {
    cca_status st = CCA_OK;
    if (device < 0 || device >= CCA_PLUG_MAX_DEVICES) {
        (void)device_allocator("cca_plug_alloc", device, &st);
        log_failure(st);
        return NULL;
    }
    if (size == 0)
        return NULL;
    cca_allocator *a = device_allocator("cca_plug_alloc", device, &st);
    if (!a)
        return NULL; /* a creation failure was logged once, when it happened */
    void *p = NULL;
    cca_domain *d = current_domain(device);
    st = d ? cca_alloc_in(a, d, size, stream, &p) : cca_alloc(a, size, stream, &p);
    if (st == CCA_OK)
        return p;
    if (st != CCA_ERR_OUT_OF_MEMORY) { /* an OOM is logged by the allocator (log_oom) */
        if (d)
            cca_error_prefix(st, "cca_plug_alloc of %zu bytes on device %d in this thread's domain %p", size, device,
                             (void *)d);
        else
            cca_error_prefix(st, "cca_plug_alloc of %zu bytes on device %d", size, device);
        log_failure(st);
    }
    return NULL;
}

void cca_plug_free(void *ptr, size_t size, int device, void *stream) {
    (void)size;   /* the allocator knows each block's size */
    (void)stream; /* and the streams that used it */
    if (!ptr)
        return;
    if (device < 0 || device >= CCA_PLUG_MAX_DEVICES) {
        log_failure(cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_plug_free(%p): device %d not in [0, %d); ignored", ptr,
                              device, CCA_PLUG_MAX_DEVICES));
        return;
    }
    cca_allocator *a = atomic_load_explicit(&devices[device].allocator, memory_order_acquire);
    if (!a) {
        log_failure(cca_set_error(CCA_ERR_INVALID_POINTER,
                              "cca_plug_free(%p): device %d has no allocator, so not ours; ignored", ptr, device));
        return;
    }
    cca_status st = cca_free(a, ptr);
    if (st != CCA_OK)
        log_failure(cca_error_prefix(st, "cca_plug_free on device %d", device));
}

/* ---- the rest of the API ----------------------------------------------------- */

cca_status cca_plug_configure(const char *upstream, const char *conf) {
    plug_spec s = {0};
    bool have_spec = upstream != NULL;
    if (have_spec && parse_spec(upstream, &s) != CCA_OK)
        return cca_error_prefix(CCA_ERR_CONFIG, "cca_plug_configure");
    cca_config c;
    cca_config_default(&c);
    bool have_config = conf != NULL;
    if (have_config) {
        cca_status st = cca_config_parse(&c, conf);
        if (st == CCA_OK)
            st = cca_config_validate(&c);
        if (st != CCA_OK)
            return cca_error_prefix(st, "cca_plug_configure");
    }
    pthread_mutex_lock(&plug_lock);
    if (plug.started) {
        pthread_mutex_unlock(&plug_lock);
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT,
                         "cca_plug_configure: a device is already in use (configure before the first "
                         "cca_plug_alloc, or cca_plug_reset first)");
    }
    plug.have_spec = have_spec;
    plug.spec = s;
    plug.have_config = have_config;
    plug.config = c;
    pthread_mutex_unlock(&plug_lock);
    return CCA_OK;
}

cca_status cca_plug_get_allocator(int device, cca_allocator **out) {
    if (!out)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_plug_get_allocator: out is NULL");
    cca_status st = CCA_OK;
    *out = device_allocator("cca_plug_get_allocator", device, &st);
    return *out ? CCA_OK : st;
}

cca_status cca_plug_get_upstream(int device, cca_upstream **out) {
    if (!out)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_plug_get_upstream: out is NULL");
    *out = NULL;
    cca_status st = CCA_OK;
    if (!device_allocator("cca_plug_get_upstream", device, &st))
        return st;
    /* set once before the allocator was published, never changed until reset */
    *out = devices[device].upstream;
    return CCA_OK;
}

cca_status cca_plug_set_domain(int device, cca_domain *d, cca_domain **previous) {
    if (device < 0 || device >= CCA_PLUG_MAX_DEVICES)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_plug_set_domain: device %d not in [0, %d)", device,
                             CCA_PLUG_MAX_DEVICES);
    if (d) {
        /* a domain of this device exists only once its allocator does:
         * no allocator is created here */
        cca_allocator *a = atomic_load_explicit(&devices[device].allocator, memory_order_acquire);
        if (!a)
            return cca_set_error(CCA_ERR_INVALID_ARGUMENT,
                                 "cca_plug_set_domain: device %d has no allocator, so domain %p is not its", device,
                                 (void *)d);
        char who[48];
        snprintf(who, sizeof who, "cca_plug_set_domain on device %d", device);
        cca_status st = ccai_domain_check(a, d, who);
        if (st != CCA_OK)
            return st;
    }
    uint64_t now = atomic_load_explicit(&plug_generation, memory_order_relaxed);
    if (current.generation != now) { /* set before the last reset, or never: all default */
        memset(current.domain, 0, sizeof current.domain);
        current.generation = now;
    }
    if (previous)
        *previous = current.domain[device];
    current.domain[device] = d;
    return CCA_OK;
}

cca_status cca_plug_get_domain(int device, cca_domain **out) {
    if (!out)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_plug_get_domain: out is NULL");
    *out = NULL;
    if (device < 0 || device >= CCA_PLUG_MAX_DEVICES)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_plug_get_domain: device %d not in [0, %d)", device,
                             CCA_PLUG_MAX_DEVICES);
    *out = current_domain(device);
    return CCA_OK;
}

static cca_status reset_locked(void);

cca_status cca_plug_reset(void) {
    ccai_log_hold(); /* cca_destroy may log (a trace's close): after plug_lock */
    cca_status result = reset_locked();
    ccai_log_release();
    return result;
}

static cca_status reset_locked(void) {
    pthread_mutex_lock(&plug_lock);
    for (int i = 0; i < CCA_PLUG_MAX_DEVICES; i++) {
        cca_allocator *a = atomic_load_explicit(&devices[i].allocator, memory_order_relaxed);
        if (!a)
            continue;
        cca_stats s;
        cca_get_stats(a, &s);
        if (s.active_blocks) {
            pthread_mutex_unlock(&plug_lock);
            return cca_set_error(CCA_ERR_LIVE_BLOCKS,
                             "cca_plug_reset: device %d has %zu live blocks (%zu bytes); "
                             "nothing was reset",
                             i, s.active_blocks, s.allocated_bytes);
        }
    }
    cca_status result = CCA_OK;
    for (int i = 0; i < CCA_PLUG_MAX_DEVICES; i++) {
        plug_device *d = &devices[i];
        cca_allocator *a = atomic_load_explicit(&d->allocator, memory_order_relaxed);
        if (a) {
            cca_status st = cca_destroy(a);
            if (st != CCA_OK && result == CCA_OK)
                result = cca_error_prefix(st, "cca_plug_reset: device %d", i);
            cca_upstream_destroy(d->upstream);
        }
        atomic_store_explicit(&d->allocator, NULL, memory_order_relaxed);
        d->upstream = NULL;
        d->failed = CCA_OK;
        d->why[0] = '\0';
    }
    memset(&plug, 0, sizeof plug);
    atomic_fetch_add_explicit(&plug_generation, 1, memory_order_relaxed); /* every thread's domains: default */
    pthread_mutex_unlock(&plug_lock);
    return result;
}
