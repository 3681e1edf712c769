/*
 * model.c — a loaded MLP: its layer list, one device block per tensor, its
 * memory domain, and the engine's list of loaded models.
 *
 *     ccr_model ──> arch (layers: in, out, act, has_bias; softmax)
 *               ──> w[i]: device block, out×in float32 (nn.Linear layout)
 *               ──> b[i]: device block, out float32, or NULL
 *               ──> domain: its own segments (NULL: the default domain)
 *
 *   load    linked into the engine's list -> domain created, footprint
 *           reserved (if one is remembered) -> one block per tensor in it
 *   run     activations in the domain, freed layer by layer (infer.c)
 *   unload  weights freed -> domain stats read (peak = footprint for next
 *           time) -> cca_domain_destroy (no FORCE): every segment of the
 *           domain back to the device; live blocks (a leak) refuse it
 *           -> unlinked, handle freed. A sleeping model (sleep.c) unloads
 *           the same way: the frees and the destroy accept its asleep
 *           domain, whose host copy goes with it; save refuses it.
 *
 * Rules:
 * - Owns: loading (ccr_model_build and the file, stream and spec loaders),
 *   the model's domain from the start of its load to the end of its
 *   unload, unloading (ccr_model_release, ccr_model_unload), saving,
 *   seeded spec weights, the non-finite report, and the engine's list of
 *   loaded models and of the domains unloads had to keep (orphans).
 * - Every model comes through ccr_model_build: the source (a safetensors
 *   file, or seeded random numbers for a spec) is a fill callback that
 *   writes one tensor into host memory: the device block itself on the
 *   simulated device (its pointers are host memory), one staging buffer
 *   the size of the largest tensor on CUDA, copied up tensor by tensor.
 *   Loading never holds two copies of a whole model; progress is reported
 *   per tensor.
 * - A failed build frees every block it took and destroys its domain, so
 *   every bad input ends with zero live bytes; a partial load records no
 *   footprint.
 * - Files are validated completely (ccr_st_open, ccr_st_bind_mlp) before
 *   the first device byte is allocated.
 * - Domains (the engine's domains on, the default; growth policy only):
 *   every block a model uses, weights here and activations in infer.c, is
 *   allocated in its domain (ccr_dev_alloc(e, m, ...)). Its segments are
 *   its own, so unloading returns all of them while other models keep
 *   theirs. Domains off or greedy: the default domain.
 * - The leak check is the allocator's: cca_domain_destroy lists the blocks
 *   still live, and the model is unloaded all the same (its weights freed,
 *   the handle gone). Its domain is kept as an orphan until
 *   ccr_engine_release tries it again, since FORCE would hand memory
 *   someone may still use to the next tenant; no host memory to keep it is
 *   a warning, and the domain ends with the allocator.
 * - The list: a model is linked (newest first) when its build starts and
 *   unlinked when its unload ends; ccr_engine_release (engine.c) unloads
 *   each until the list is empty.
 * - Non-finite weights (NaN, ±Inf after conversion to float32) are not an
 *   error — the file is well-formed — but NaN and +Inf poison every output
 *   they reach (a -Inf may not: ReLU and softmax map it to 0,
 *   kernels/include/cck.h and softmax_host.c). The file fill counts them per tensor
 *   while each tensor is in host memory; ccr_model_nonfinite_weights /
 *   ccr_model_nonfinite_tensor report them (ccrun warns and exits 4). Spec
 *   models are finite by construction.
 * - Calls down only (footprint.c, device.c, timeline.c, safetensors.c,
 *   arch.c, error.c, and sleep.c's ccr_model_check_awake at a save), never
 *   engine.c.
 * - Costs: load: with a domain, one domain create and one reserve when a
 *   footprint is known; one ccr_dev_alloc, one cca_block_size and one fill
 *   per tensor (plus one upload on CUDA); two phase marks;
 *   unload: one ccr_dev_free per tensor, one domain stats read, one domain
 *   destroy, two phase marks; linking and unlinking: O(1); keeping an
 *   orphan: amortized O(1). With footprint sidecars (footprint.c), a load
 *   from a file the engine has no footprint for reads one, and an unload
 *   whose footprint changed writes one (a temporary file and a rename).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ccai_rng.h"
#include "internal.h"

/* ---- the engine's list of models, and the domains unloads kept ----------- */

/* Newest first: a model is linked when its build starts. */
static void link_model(ccr_engine *e, ccr_model *m) {
    m->prev = NULL;
    m->next = e->models;
    if (e->models)
        e->models->prev = m;
    e->models = m;
}

/* At the end of an unload. */
static void unlink_model(ccr_engine *e, ccr_model *m) {
    if (m->prev)
        m->prev->next = m->next;
    else
        e->models = m->next;
    if (m->next)
        m->next->prev = m->prev;
    m->prev = m->next = NULL;
}

/* Keep a domain an unload could not destroy, for ccr_engine_release to try
 * again (0 when out of host memory: the allocator still owns it). */
static int keep_orphan(ccr_engine *e, cca_domain *d) {
    if (e->n_orphans == e->cap_orphans) {
        size_t cap = e->cap_orphans ? 2 * e->cap_orphans : 4;
        cca_domain **o = realloc(e->orphans, cap * sizeof *o);
        if (!o)
            return 0;
        e->orphans = o;
        e->cap_orphans = cap;
    }
    e->orphans[e->n_orphans++] = d;
    return 1;
}

/* ---- loading and unloading ------------------------------------------------ */

/* A domain name from the model's source: at most CCA_DOMAIN_NAME_MAX
 * printable characters without '"', '\\' or ',' (those become '_'); a spec keeps
 * its head (the shape), a path its tail (the file name), as ccrun's table. */
static void domain_name(const char *src, char *buf, size_t len) {
    size_t n = strlen(src), max = len - 1;
    const char *from = n <= max || !strncmp(src, "mlp:", 4) ? src : src + n - max;
    snprintf(buf, len, "%s", *from ? from : "model");
    for (char *c = buf; *c; c++)
        if (*c < 0x20 || *c > 0x7e || *c == '"' || *c == '\\' || *c == ',')
            *c = '_';
}

/* Step 1 of a load: the model's domain, and its footprint reserved in it.
 * No domain when the engine's domains are off or the allocator is greedy
 * (cca_domain_create refuses there): the model uses the default domain. A
 * footprint that cannot be reserved (the device is fuller than at the
 * previous load) is a warning: the load goes on, growing as it needs. */
static ccr_status open_domain(ccr_engine *e, ccr_model *m) {
    cca_config cfg;
    if (!e->domains || cca_get_config(e->alloc, &cfg) != CCA_OK || cfg.policy != CCA_POLICY_GROWTH)
        return CCR_OK;
    char dn[CCA_DOMAIN_NAME_MAX + 1];
    domain_name(m->name, dn, sizeof dn);
    cca_status cs = cca_domain_create(e->alloc, dn, &m->domain);
    if (cs != CCA_OK)
        return ccr_fail(cs == CCA_ERR_OUT_OF_MEMORY ? CCR_ERR_OUT_OF_MEMORY : CCR_ERR_ALLOCATOR,
                        "model '%s': creating its memory domain: %s: %s", m->name, cca_status_string(cs),
                        cca_last_error());
    size_t foot = e->footprint ? ccr_footprint_lookup(e, m->name, &m->arch, m->from_file) : 0;
    if (foot) {
        ccr_kept_error k; /* a load that goes on without its footprint leaves the caller's message */
        ccr_error_keep(&k);
        cs = cca_domain_reserve(e->alloc, m->domain, foot);
        if (cs == CCA_OK) {
            m->footprint = foot;
        } else {
            char b0[32];
            ccr_warn(e, "model '%s': its footprint of %s was not reserved up front (%s: %s); loading without it",
                     m->name, cca_format_bytes(foot, b0, sizeof b0), cca_status_string(cs), cca_last_error());
            ccr_error_restore(&k);
        }
    }
    return CCR_OK;
}

/* A load that failed: give back what it took, keep its error message (the
 * release must not replace it, and nothing of a partial load is worth
 * remembering as a footprint). */
static ccr_status discard(ccr_model *m, ccr_status st) {
    char why[1024];
    snprintf(why, sizeof why, "%s", ccr_last_error());
    ccr_model_unload(m); /* m->built is 0: no footprint recorded */
    return ccr_fail(st, "%s", why);
}

ccr_status ccr_model_build(ccr_engine *e, const ccr_arch *arch, const char *name, int from_file, ccr_fill_fn fill,
                           void *user, ccr_model **out) {
    *out = NULL;
    ccr_model *m = calloc(1, sizeof *m);
    if (!m)
        return ccr_fail(CCR_ERR_OUT_OF_MEMORY, "out of host memory");
    m->e = e;
    m->arch = *arch;
    m->from_file = from_file;
    m->name = strdup(name ? name : "model"); /* whole: messages name the file as given */
    if (!m->name) {
        free(m);
        return ccr_fail(CCR_ERR_OUT_OF_MEMORY, "out of host memory");
    }
    link_model(e, m);
    ccr_engine_mark(e, "load", m->name);
    ccr_status st = open_domain(e, m);
    if (st != CCR_OK)
        return discard(m, st);

    size_t total = ccr_arch_param_bytes(arch), done = 0, largest = 0;
    for (size_t i = 0; i < arch->n_layers; i++)
        if (arch->layers[i].in * arch->layers[i].out > largest)
            largest = arch->layers[i].in * arch->layers[i].out;
    float *staging = NULL;
    if (e->kind != CCR_DEVICE_HOST) {
        staging = malloc(largest * sizeof(float));
        if (!staging)
            return discard(
                m, ccr_fail(CCR_ERR_OUT_OF_MEMORY, "out of host memory for a %zu-float staging buffer", largest));
    }
    for (size_t i = 0; i < arch->n_layers && st == CCR_OK; i++) {
        const ccr_layer_desc *l = &arch->layers[i];
        for (int is_bias = 0; is_bias < 2 && st == CCR_OK; is_bias++) {
            if (is_bias && !l->has_bias)
                continue;
            size_t count = is_bias ? l->out : l->in * l->out;
            void *dev = NULL;
            st = ccr_dev_alloc(e, m, count * sizeof(float), is_bias ? "bias" : "weight", &dev);
            if (st != CCR_OK) {
                char need[32], dev_total[32];
                ccr_fail_prefix(st, "model '%s' (%s of weights) %s on %s (%s): layer %zu %s", m->name,
                                cca_format_bytes(total, need, sizeof need),
                                st == CCR_ERR_OUT_OF_MEMORY ? "does not fit" : "could not be loaded", e->devname,
                                cca_format_bytes(e->total_bytes, dev_total, sizeof dev_total), i,
                                is_bias ? "bias" : "weight");
                break;
            }
            if (is_bias)
                m->b[i] = dev;
            else
                m->w[i] = dev;
            size_t held = 0;
            cca_block_size(e->alloc, dev, &held);
            m->device_bytes += held;
            float *dst = staging ? staging : dev;
            st = fill(user, i, is_bias, dst, count);
            if (st == CCR_OK && staging)
                st = ccr_dev_upload(e, dev, staging, count * sizeof(float));
            done += count * sizeof(float);
            if (st == CCR_OK && e->progress)
                e->progress(e->progress_user, m->name, done, total);
        }
    }
    free(staging);
    if (st != CCR_OK)
        return discard(m, st);
    m->built = 1;
    ccr_engine_mark(e, "loaded", m->name);
    *out = m;
    return CCR_OK;
}

/* cca_domain_destroy's failure as the runtime's status and message. */
static ccr_status release_failed(ccr_model *m, cca_status cs, const ccr_unload_info *u) {
    char b0[32], b1[32];
    if (cs == CCA_ERR_LIVE_BLOCKS && u->leaks_written) {
        const cca_live_block *l = &u->leaks[0];
        return ccr_fail(CCR_ERR_LIVE_BLOCKS,
                        "model '%s' unloaded with %zu block(s) (%s) still allocated in its memory domain, a leak: "
                        "its %s stay reserved until they are freed and ccr_engine_release runs; first: %p, %zu "
                        "bytes (asked %zu), allocated %llu allocations ago",
                        m->name, u->live_blocks, cca_format_bytes(u->live_bytes, b0, sizeof b0),
                        cca_format_bytes(u->reserved_at_unload, b1, sizeof b1), l->ptr, l->size, l->requested,
                        (unsigned long long)l->age);
    }
    if (cs == CCA_ERR_LIVE_BLOCKS)
        return ccr_fail(CCR_ERR_LIVE_BLOCKS, "model '%s' unloaded, its memory domain kept: %s", m->name,
                        cca_last_error());
    return ccr_fail(ccr_status_of(cs) == CCR_ERR_DEVICE ? CCR_ERR_DEVICE : CCR_ERR_ALLOCATOR,
                    "model '%s' unloaded, but its memory domain was not released (%s of %s went back): %s: %s", m->name,
                    cca_format_bytes(u->bytes_released, b0, sizeof b0),
                    cca_format_bytes(u->reserved_at_unload, b1, sizeof b1), cca_status_string(cs), cca_last_error());
}

/* Unload: the weights back to the domain's cache, the footprint noted, the
 * domain destroyed (every segment to the device), the handle freed. */
ccr_status ccr_model_release(ccr_model *m, ccr_unload_info *info) {
    ccr_unload_info u;
    memset(&u, 0, sizeof u);
    if (info)
        memset(info, 0, sizeof *info);
    if (!m)
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "model is NULL");
    ccr_engine *e = m->e;
    ccr_engine_mark(e, "unload", m->name);
    for (size_t i = 0; i < m->arch.n_layers; i++) {
        ccr_dev_free(e, m, m->w[i], "weight");
        ccr_dev_free(e, m, m->b[i], "bias");
    }
    ccr_status st = CCR_OK;
    u.footprint = m->footprint;
    if (m->domain) {
        u.domain = 1;
        cca_domain_stats ds;
        if (cca_get_domain_stats(e->alloc, m->domain, &ds) == CCA_OK) {
            u.reserved_at_unload = ds.reserved_bytes;
            u.reserved_peak = ds.reserved_bytes_peak;
            u.upstream_allocs = ds.upstream_allocs;
            if (m->built && e->footprint)
                ccr_footprint_record(e, m->name, &m->arch, m->from_file, m->max_batch, ds.reserved_bytes_peak);
        }
        cca_domain_report r;
        memset(&r, 0, sizeof r);
        r.leaks = u.leaks;
        r.leaks_cap = CCR_LEAKS_MAX;
        cca_status cs = cca_domain_destroy(e->alloc, m->domain, 0, &r);
        u.bytes_released = r.bytes_released;
        u.live_blocks = r.live_blocks;
        u.live_bytes = r.live_bytes;
        u.leaks_written = r.leaks_written;
        if (cs != CCA_OK) {
            st = release_failed(m, cs, &u);
            if (!keep_orphan(e, m->domain))
                ccr_warn(e, "model '%s': out of host memory to keep its domain: it stays until the engine ends",
                         m->name);
        }
        m->domain = NULL;
    }
    ccr_engine_mark(e, "idle", m->name);
    unlink_model(e, m);
    for (size_t i = 0; i < m->n_nonfinite; i++)
        free(m->bad[i].name);
    free(m->name);
    free(m);
    if (info)
        *info = u;
    return st;
}

void ccr_model_unload(ccr_model *m) {
    if (!m)
        return;
    ccr_engine *e = m->e;
    if (ccr_model_release(m, NULL) != CCR_OK)
        ccr_warn(e, "%s", ccr_last_error());
}

/* ---- spec models: seeded random weights ---------------------------------- */

/* splitmix64 as a counter-based generator: element i of a tensor is
 * mix(seed + (i + 1) * golden), the (i + 1)-th output of splitmix64 from
 * `seed`. Each element depends only on its index, so the loop parallelizes
 * (OpenMP, when the build has it) and every thread count, machine and device
 * gets the same numbers: a 60%-of-an-H200 demo model is ~80 GB of weights. */
static float random_weight(uint64_t seed, size_t i, float scale) {
    uint64_t z = ccai_splitmix64_at(seed, (uint64_t)i + 1); /* common/ccai_rng.h */
    float u = (float)(z >> 40) * (1.0f / 16777216.0f);      /* [0,1) from 24 bits */
    return (2.0f * u - 1.0f) * scale;
}

typedef struct spec_fill {
    const ccr_arch *arch;
} spec_fill;

static ccr_status fill_random(void *user, size_t layer, int is_bias, float *dst, size_t count) {
    const spec_fill *f = user;
    /* one stream per tensor, so CUDA (staged) and host loads agree */
    uint64_t seed = f->arch->seed * 0x100000001B3ull + layer * 2 + (uint64_t)is_bias;
    float scale = 1.0f / sqrtf((float)f->arch->layers[layer].in);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (count >= ((size_t)1 << 22))
#endif
    for (size_t i = 0; i < count; i++)
        dst[i] = random_weight(seed, i, scale);
    return CCR_OK;
}

ccr_status ccr_model_load_spec(ccr_engine *e, const char *spec, ccr_model **out) {
    if (out) /* NULL after any failure, a refused argument's too */
        *out = NULL;
    if (!e || !spec || !out)
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "engine, spec or output is NULL");
    ccr_arch a;
    ccr_status st = ccr_arch_parse(spec, &a);
    if (st != CCR_OK)
        return st;
    spec_fill f = {&a};
    return ccr_model_build(e, &a, spec, 0, fill_random, &f, out);
}

/* ---- safetensors models --------------------------------------------------- */

typedef struct file_fill {
    ccr_st_file *st;
    const ccr_st_tensor **w, **b;
    size_t nonfinite, n_bad;
    ccr_nonfinite bad[2 * CCR_MAX_LAYERS];
} file_fill;

/* Read one tensor, then count its non-finite values while they are still in
 * host memory (the simulated device's block, or the CUDA staging buffer):
 * one more pass over bytes just read, so it costs little next to the read. */
static ccr_status fill_file(void *user, size_t layer, int is_bias, float *dst, size_t count) {
    file_fill *f = user;
    const ccr_st_tensor *t = is_bias ? f->b[layer] : f->w[layer];
    ccr_status st = ccr_st_read_f32(f->st, t, dst);
    if (st != CCR_OK)
        return st;
    size_t bad = 0;
    for (size_t i = 0; i < count; i++)
        bad += !isfinite(dst[i]);
    if (bad) {
        char *name = strdup(t->name);
        if (!name)
            return ccr_fail(CCR_ERR_OUT_OF_MEMORY, "out of host memory");
        f->bad[f->n_bad].name = name;
        f->bad[f->n_bad].count = bad;
        f->n_bad++;
        f->nonfinite += bad;
    }
    return CCR_OK;
}

/* from_file: `name` is the path fp was opened from (a footprint sidecar may
 * sit next to it); a stream of the caller's is only labelled by name. */
static ccr_status load_stream(ccr_engine *e, FILE *fp, const char *name, int from_file, ccr_model **out) {
    ccr_st_file st;
    ccr_status s = ccr_st_open(fp, name, &st);
    if (s != CCR_OK)
        return s;
    ccr_arch a;
    const ccr_st_tensor *w[CCR_MAX_LAYERS], *b[CCR_MAX_LAYERS];
    s = ccr_st_bind_mlp(&st, &a, w, b);
    if (s == CCR_OK) {
        file_fill f = {.st = &st, .w = w, .b = b};
        s = ccr_model_build(e, &a, name, from_file, fill_file, &f, out);
        if (s == CCR_OK) { /* the model owns the names from here */
            (*out)->nonfinite = f.nonfinite;
            (*out)->n_nonfinite = f.n_bad;
            memcpy((*out)->bad, f.bad, f.n_bad * sizeof f.bad[0]);
        } else {
            for (size_t i = 0; i < f.n_bad; i++)
                free(f.bad[i].name);
        }
    }
    ccr_st_close(&st);
    return s;
}

ccr_status ccr_model_load_stream(ccr_engine *e, FILE *fp, const char *name, ccr_model **out) {
    if (out) /* NULL after any failure, a refused argument's too */
        *out = NULL;
    if (!e || !fp || !out)
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "engine, stream or output is NULL");
    return load_stream(e, fp, name, 0, out);
}

/* What a non-regular file is, for the message. */
static const char *file_kind(mode_t mode) {
    return S_ISFIFO(mode)  ? "a FIFO"
           : S_ISCHR(mode) ? "a character device"
           : S_ISBLK(mode) ? "a block device"
           : S_ISSOCK(mode) ? "a socket"
                            : "not a file";
}

/* Open a model file for reading, never waiting. fopen(path, "rb") of a FIFO
 * blocks in open(2) until some process opens it for writing: with none, for
 * ever (`ccrun FIFO` hung). So the file is opened with O_NONBLOCK, which
 * returns at once for a FIFO, then fstat decides: a directory goes on to
 * ccr_st_open (which says "is a directory"); anything else that is not a
 * regular file (FIFO, character or block device, socket) is refused here —
 * a safetensors file is read with seeks, which a pipe cannot do, and a
 * device is no model file. A socket fails open(2) itself (ENXIO): stat
 * names it the same way. A regular file is made blocking again and read
 * exactly as with fopen. */
static ccr_status open_model_file(const char *path, FILE **out) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        int err = errno;
        struct stat sb;
        if (err == ENXIO && stat(path, &sb) == 0 && S_ISSOCK(sb.st_mode)) /* a socket cannot be opened at all */
            return ccr_fail(CCR_ERR_IO, "%s: not a regular file (%s), not a model file", path, file_kind(sb.st_mode));
        return ccr_fail(CCR_ERR_IO, "%s: cannot open: %s", path, strerror(err));
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int err = errno;
        close(fd);
        return ccr_fail(CCR_ERR_IO, "%s: cannot stat: %s", path, strerror(err));
    }
    if (!S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode)) {
        close(fd);
        return ccr_fail(CCR_ERR_IO, "%s: not a regular file (%s), not a model file", path, file_kind(sb.st_mode));
    }
    int flags = fcntl(fd, F_GETFL);
    FILE *fp = NULL;
    if (flags >= 0 && fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0)
        fp = fdopen(fd, "rb");
    if (!fp) {
        int err = errno;
        close(fd);
        if (err == ENOMEM) /* the FILE's host memory, not the file */
            return ccr_fail(CCR_ERR_OUT_OF_MEMORY, "%s: out of host memory to open it", path);
        return ccr_fail(CCR_ERR_IO, "%s: cannot open: %s", path, strerror(err));
    }
    *out = fp;
    return CCR_OK;
}

ccr_status ccr_model_load_file(ccr_engine *e, const char *path, ccr_model **out) {
    if (out) /* NULL after any failure, a refused argument's too */
        *out = NULL;
    if (!e || !path || !out)
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "engine, path or output is NULL");
    if (!*path)
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "empty model path (a safetensors file or an mlp: spec)");
    FILE *fp = NULL;
    ccr_status s = open_model_file(path, &fp);
    if (s != CCR_OK)
        return s;
    s = load_stream(e, fp, path, 1, out);
    fclose(fp);
    return s;
}

ccr_status ccr_model_load(ccr_engine *e, const char *source, ccr_model **out) {
    if (source && !strncmp(source, "mlp:", 4))
        return ccr_model_load_spec(e, source, out);
    return ccr_model_load_file(e, source, out);
}

const ccr_arch *ccr_model_arch(const ccr_model *m) {
    return m ? &m->arch : NULL;
}
const char *ccr_model_name(const ccr_model *m) {
    return m ? m->name : "";
}
size_t ccr_model_device_bytes(const ccr_model *m) {
    return m ? m->device_bytes : 0;
}
cca_domain *ccr_model_domain(const ccr_model *m) {
    return m ? m->domain : NULL;
}
size_t ccr_model_footprint(const ccr_model *m) {
    return m ? m->footprint : 0;
}
size_t ccr_model_nonfinite_weights(const ccr_model *m) {
    return m ? m->nonfinite : 0;
}
ccr_status ccr_model_nonfinite_tensor(const ccr_model *m, size_t i, const char **name, size_t *count) {
    if (!m || !name || !count)
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "model, name or count is NULL");
    if (i >= m->n_nonfinite)
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT,
                        "model '%s' has %zu tensors with non-finite weights: index %zu is past the last", m->name,
                        m->n_nonfinite, i);
    *name = m->bad[i].name;
    *count = m->bad[i].count;
    return CCR_OK;
}

/* ---- saving ----------------------------------------------------------------- */

typedef struct save_ctx {
    ccr_model *m;
    size_t map[2 * CCR_MAX_LAYERS][2]; /* tensor index -> (layer, is_bias) */
} save_ctx;

static ccr_status get_tensor(void *user, size_t index, float *dst, size_t count) {
    save_ctx *c = user;
    size_t layer = c->map[index][0];
    const float *src = c->map[index][1] ? c->m->b[layer] : c->m->w[layer];
    return ccr_dev_download(c->m->e, dst, src, count * sizeof(float));
}

ccr_status ccr_model_save(ccr_model *m, const char *path) {
    if (!m || !path)
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "model or path is NULL");
    ccr_status st = ccr_model_check_awake(m, "save"); /* its weights are on the host */
    if (st != CCR_OK)
        return st;
    save_ctx c;
    ccr_st_out_tensor t[2 * CCR_MAX_LAYERS];
    size_t n = 0, module = 0;
    c.m = m;
    /* nn.Sequential numbering: Linear, then the activation module if any */
    for (size_t i = 0; i < m->arch.n_layers; i++) {
        const ccr_layer_desc *l = &m->arch.layers[i];
        snprintf(t[n].name, sizeof t[n].name, "%zu.weight", module);
        t[n].ndim = 2;
        t[n].shape[0] = l->out;
        t[n].shape[1] = l->in;
        c.map[n][0] = i;
        c.map[n][1] = 0;
        n++;
        if (l->has_bias) {
            snprintf(t[n].name, sizeof t[n].name, "%zu.bias", module);
            t[n].ndim = 1;
            t[n].shape[0] = l->out;
            c.map[n][0] = i;
            c.map[n][1] = 1;
            n++;
        }
        module += l->act == CCK_ACT_NONE ? 1 : 2;
    }
    char spec[1024];
    st = ccr_arch_format(&m->arch, spec, sizeof spec);
    if (st != CCR_OK)
        return st;
    return ccr_st_write(path, CCR_META_KEY, spec, t, n, get_tensor, &c);
}
