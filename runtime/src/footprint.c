/*
 * footprint.c — the engine's memory of how much device memory each model
 * took, so that its next load reserves that much up front and runs without
 * calling the driver.
 *
 * A model's FOOTPRINT is its memory domain's peak reserved bytes
 * (cca_domain_stats.reserved_bytes_peak), read at unload: the weights'
 * segments plus the activation segments its passes grew, rounding included.
 * At the next load of the same source the engine calls
 *
 *     cca_domain_reserve(alloc, domain, footprint)     one upstream call
 *
 * before the first tensor is allocated; the allocator serves the domain from
 * that one arena first (best fit at any size), so the load and its passes
 * make no upstream call when the arena holds them, and the reserved peak is
 * the footprint itself, no more than the first time.
 *
 * The key. A footprint depends on the model and on the batch: activations
 * grow with it. The source is known at load (the path or the spec as given:
 * ccr_model_name), the batch only at run time, and a load reserves before
 * any run. So an entry is
 *
 *     key (source) -> { arch, batch, peak }
 *
 * one per source, where batch is the largest batch run while the peak was
 * measured: a footprint measured with batch 64 serves a load that runs batch
 * 8, not the other way round. At unload the entry is replaced when the model
 * ran a batch at least as large as the remembered one (the same batch gives a
 * fresh measurement), and kept otherwise. `arch` (the canonical spec of the
 * layers) guards against a file that changed between loads: an entry for
 * other layers is not used, and the next unload replaces it.
 *
 * Memory is per engine (one engine per process is the usual case), a small
 * array searched linearly: one entry per distinct source.
 *
 * Sidecars (ccr_engine_options.footprint_sidecar, models from files only):
 * the same entry in "<path>.ccfoot", a few lines of text,
 *
 *     ccfoot 1
 *     arch mlp:64x64x10:relu:softmax
 *     batch 8
 *     reserved_peak 2097152
 *
 * read at load when the engine remembers nothing for the path, rewritten at
 * unload when the entry changed (a temporary file, "<path>.ccfoot.XXXXXX",
 * renamed over it, so a reader never sees half a file; close-on-exec, so a
 * child another thread starts meanwhile never holds it open; removed
 * whatever fails once it is made), unless the model was never run: batch 0
 * is remembered in the engine only, since a sidecar's batch is 1..2^24. A sidecar is input from outside: it is
 * opened without blocking (a FIFO cannot hang the load), must be a regular
 * file of at most CCR_FOOT_MAX_BYTES, hold exactly these four lines (no NUL,
 * plain decimal numbers, a refused one quoted in the warning, no
 * duplicates, nothing else), name the layers being loaded, have a batch
 * in 1..2^24 (ccrun's), and hold a plausible peak (at least CCA_GRANULARITY, at most
 * what the allocator may ever reserve, at most 4 x (weights + activations of
 * its batch) + 64 MiB: segment rounding and fragmentation stay far below
 * that). Anything else is a warning and the sidecar is ignored: the load
 * goes on without a footprint. A missing sidecar is nothing to warn about.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ccai_decimal.h" /* common/: ccai_decimal_uint */
#include "ccai_utf8.h"    /* common/: ccai_utf8_head, a quoted field cut between characters */
#include "internal.h"

#define CCR_FOOT_MAX_BYTES 4096
#define CCR_FOOT_SLACK ((size_t)64 << 20)
#define CCR_FOOT_SPEC_MAX 2048 /* a canonical spec of 64 layers fits */

static ccr_footprint *find(ccr_engine *e, const char *key) {
    for (size_t i = 0; i < e->n_foot; i++)
        if (!strcmp(e->foot[i].key, key))
            return &e->foot[i];
    return NULL;
}

/* The entry for key, created empty if needed (NULL: out of host memory). */
static ccr_footprint *find_or_add(ccr_engine *e, const char *key) {
    ccr_footprint *f = find(e, key);
    if (f)
        return f;
    if (e->n_foot == e->cap_foot) {
        size_t cap = e->cap_foot ? 2 * e->cap_foot : 8;
        ccr_footprint *n = realloc(e->foot, cap * sizeof *n);
        if (!n)
            return NULL;
        e->foot = n;
        e->cap_foot = cap;
    }
    f = &e->foot[e->n_foot];
    memset(f, 0, sizeof *f);
    f->key = strdup(key);
    if (!f->key)
        return NULL;
    e->n_foot++;
    return f;
}

/* Store (arch, batch, peak) in f. 0 when out of host memory (f unchanged). */
static int set(ccr_footprint *f, const char *arch, size_t batch, size_t peak) {
    if (!f->arch || strcmp(f->arch, arch)) {
        char *a = strdup(arch);
        if (!a)
            return 0;
        free(f->arch);
        f->arch = a;
    }
    f->batch = batch;
    f->peak = peak;
    return 1;
}

void ccr_footprint_clear(ccr_engine *e) {
    for (size_t i = 0; i < e->n_foot; i++) {
        free(e->foot[i].key);
        free(e->foot[i].arch);
    }
    e->n_foot = 0;
}

/* ---- sidecars ------------------------------------------------------------- */

/* A whole number in size_t, plain decimal (ccai_decimal_uint: digits
 * only, no sign, blank or base prefix). */
static int parse_number(const char *text, size_t *out) {
    unsigned long long v;
    if (ccai_decimal_uint(text, 0, SIZE_MAX, &v))
        return 0;
    *out = (size_t)v;
    return 1;
}

/* Read at most CCR_FOOT_MAX_BYTES of a regular file at `path` into buf
 * (NUL-terminated). 1: read; 0: no such file (nothing to say); -1: not
 * usable, why says so. */
static int read_small_file(const char *path, char *buf, size_t cap, char *why, size_t wn) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        if (errno == ENOENT)
            return 0;
        snprintf(why, wn, "cannot open: %s", strerror(errno));
        return -1;
    }
    struct stat st;
    int rc = -1;
    if (fstat(fd, &st) != 0) {
        snprintf(why, wn, "cannot stat: %s", strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        snprintf(why, wn, "not a regular file");
    } else if (st.st_size > (off_t)(cap - 1)) {
        snprintf(why, wn, "%lld bytes, more than a footprint's %zu", (long long)st.st_size, cap - 1);
    } else {
        size_t got = 0;
        ssize_t n;
        while (got < cap - 1 && (n = read(fd, buf + got, cap - 1 - got)) > 0)
            got += (size_t)n;
        buf[got] = '\0';
        if (n < 0)
            snprintf(why, wn, "read failed: %s", strerror(errno));
        else if (got == cap - 1 && read(fd, &(char){0}, 1) > 0) /* grew since fstat */
            snprintf(why, wn, "more than a footprint's %zu bytes", cap - 1);
        else if (strlen(buf) != got)
            snprintf(why, wn, "holds a NUL byte");
        else
            rc = 1;
    }
    close(fd);
    return rc;
}

/* Parse a sidecar's text. 1 and the fields on success; 0 and why. */
static int parse_sidecar(char *text, char **arch, size_t *batch, size_t *peak, char *why, size_t wn) {
    int seen_arch = 0, seen_batch = 0, seen_peak = 0;
    size_t line_no = 0;
    for (char *line = text, *next; line && *line; line = next) {
        line_no++;
        next = strchr(line, '\n');
        if (next) /* the last line may lack its newline */
            *next++ = '\0';
        char *sp = strchr(line, ' ');
        if (!sp) {
            snprintf(why, wn, "line %zu is not 'key value'", line_no);
            return 0;
        }
        *sp = '\0';
        const char *key = line, *value = sp + 1;
        if (line_no == 1) {
            if (strcmp(key, "ccfoot") || strcmp(value, "1")) {
                snprintf(why, wn, "does not start with 'ccfoot 1'");
                return 0;
            }
            continue;
        }
        int *seen = !strcmp(key, "arch")            ? &seen_arch
                    : !strcmp(key, "batch")         ? &seen_batch
                    : !strcmp(key, "reserved_peak") ? &seen_peak
                                                    : NULL;
        if (!seen) {
            snprintf(why, wn, "line %zu: unknown key '%.*s'", line_no, ccai_utf8_head(key, strlen(key), 32), key);
            return 0;
        }
        if (*seen) {
            snprintf(why, wn, "line %zu: '%.*s' given twice", line_no, ccai_utf8_head(key, strlen(key), 32), key);
            return 0;
        }
        *seen = 1;
        if (seen == &seen_arch) {
            *arch = sp + 1;
        } else if (!parse_number(value, seen == &seen_batch ? batch : peak)) {
            snprintf(why, wn, "line %zu: %s '%.*s%s' is not a number (plain decimal)", line_no,
                     seen == &seen_batch ? "batch" : "reserved_peak", ccai_utf8_head(value, strlen(value), 32), value,
                     strlen(value) > 32 ? "..." : "");
            return 0;
        }
    }
    if (line_no == 0) {
        snprintf(why, wn, "empty");
        return 0;
    }
    if (!seen_arch || !seen_batch || !seen_peak) {
        snprintf(why, wn, "lacks '%s'", !seen_arch ? "arch" : !seen_batch ? "batch" : "reserved_peak");
        return 0;
    }
    return 1;
}

/* A peak a model of these layers could have had with this batch, on this
 * allocator. 0 and why when not. */
static int plausible(ccr_engine *e, const ccr_arch *a, size_t batch, size_t peak, char *why, size_t wn) {
    char b0[32], b1[32];
    const char *what;
    size_t limit = ccr_engine_limit(e, &what);
    if (batch == 0 || batch > ((size_t)1 << 24)) { /* ccrun's batches: 1..2^24 */
        snprintf(why, wn, "batch %zu is not in 1..2^24", batch);
        return 0;
    }
    if (peak < CCA_GRANULARITY || peak > limit) {
        snprintf(why, wn, "reserved_peak %zu is outside %u..%zu (what the allocator may reserve)", peak,
                 CCA_GRANULARITY, limit);
        return 0;
    }
    size_t acts = 0, weights = ccr_arch_param_bytes(a), need;
    if (!ccr_arch_activation_bytes(a, batch, &acts) || acts > SIZE_MAX - weights) {
        snprintf(why, wn, "batch %zu overflows", batch);
        return 0;
    }
    need = weights + acts;
    size_t cap = need > (SIZE_MAX - CCR_FOOT_SLACK) / 4 ? SIZE_MAX : 4 * need + CCR_FOOT_SLACK;
    if (peak > cap) {
        snprintf(why, wn, "reserved_peak %s is implausible for %s of weights and activations at batch %zu",
                 cca_format_bytes(peak, b0, sizeof b0), cca_format_bytes(need, b1, sizeof b1), batch);
        return 0;
    }
    return 1;
}

static char *sidecar_path(const char *key) {
    size_t n = strlen(key);
    char *p = malloc(n + sizeof ".ccfoot");
    if (p) {
        memcpy(p, key, n);
        memcpy(p + n, ".ccfoot", sizeof ".ccfoot");
    }
    return p;
}

/* The sidecar of `key` for layers `spec`, checked. 1: *batch, *peak. */
static int read_sidecar(ccr_engine *e, const char *key, const ccr_arch *a, const char *spec, size_t *batch,
                        size_t *peak) {
    char *path = sidecar_path(key);
    if (!path)
        return 0;
    char text[CCR_FOOT_MAX_BYTES + 1], why[256] = "";
    char *arch = NULL;
    int rc = read_small_file(path, text, sizeof text, why, sizeof why);
    if (rc == 1 && parse_sidecar(text, &arch, batch, peak, why, sizeof why)) {
        if (strcmp(arch, spec))
            snprintf(why, sizeof why, "written for other layers ('%.*s', the model has '%.*s')",
                     ccai_utf8_head(arch, strlen(arch), 80), arch, ccai_utf8_head(spec, strlen(spec), 80), spec);
        else if (plausible(e, a, *batch, *peak, why, sizeof why))
            rc = 2;
    }
    if (rc != 0 && rc != 2)
        ccr_warn(e, "footprint sidecar '%s': %s; ignored", path, why);
    free(path);
    return rc == 2;
}

/* Write the entry next to its model, through a temporary file renamed over
 * the sidecar; a failure is a warning (the memory keeps the entry). */
static void write_sidecar(ccr_engine *e, const ccr_footprint *f) {
    char *path = sidecar_path(f->key);
    size_t n = path ? strlen(path) : 0;
    char *tmp = path ? malloc(n + sizeof ".XXXXXX") : NULL;
    if (!tmp) {
        free(path);
        ccr_warn(e, "footprint of '%s' not written: out of host memory", f->key);
        return;
    }
    memcpy(tmp, path, n);
    memcpy(tmp + n, ".XXXXXX", sizeof ".XXXXXX");
    int fd = mkostemp(tmp, O_CLOEXEC); /* O_EXCL: never through a link someone planted; no child inherits it */
    FILE *out = fd >= 0 ? fdopen(fd, "w") : NULL;
    int ok = out != NULL;
    if (ok) {
        fchmod(fd, 0644);
        ok = fprintf(out, "ccfoot 1\narch %s\nbatch %zu\nreserved_peak %zu\n", f->arch, f->batch, f->peak) > 0;
        ok = fclose(out) == 0 && ok;
        ok = ok && rename(tmp, path) == 0;
    } else if (fd >= 0) {
        close(fd);
    }
    if (!ok) {
        ccr_warn(e, "footprint sidecar '%s' not written: %s", path, strerror(errno));
        if (fd >= 0)
            unlink(tmp);
    }
    free(tmp);
    free(path);
}

/* ---- lookup and record ----------------------------------------------------- */

size_t ccr_footprint_lookup(ccr_engine *e, const char *key, const ccr_arch *arch, int from_file) {
    char spec[CCR_FOOT_SPEC_MAX];
    ccr_kept_error k; /* no footprint is no failure: the caller's message stays */
    ccr_error_keep(&k);
    if (ccr_arch_format(arch, spec, sizeof spec) != CCR_OK) {
        ccr_error_restore(&k);
        return 0;
    }
    const ccr_footprint *f = find(e, key);
    if (f)
        return strcmp(f->arch, spec) ? 0 : f->peak; /* other layers: the file changed */
    size_t batch = 0, peak = 0;
    if (!(e->sidecar && from_file && read_sidecar(e, key, arch, spec, &batch, &peak)))
        return 0;
    ccr_footprint *n = find_or_add(e, key);
    if (n && !set(n, spec, batch, peak)) {
        /* the entry was added empty and could not be filled: drop it */
        free(n->key);
        e->n_foot--;
    }
    return peak;
}

void ccr_footprint_record(ccr_engine *e, const char *key, const ccr_arch *arch, int from_file, size_t batch,
                          size_t peak) {
    char spec[CCR_FOOT_SPEC_MAX];
    ccr_kept_error k; /* nothing to remember is no failure: the caller's message stays */
    ccr_error_keep(&k);
    if (peak == 0 || ccr_arch_format(arch, spec, sizeof spec) != CCR_OK) {
        ccr_error_restore(&k);
        return;
    }
    ccr_footprint *f = find(e, key);
    if (f && !strcmp(f->arch, spec)) {
        if (f->batch > batch) /* measured with a larger batch: keep it */
            return;
        if (f->batch == batch && f->peak == peak)
            return; /* unchanged: no sidecar to rewrite */
    }
    f = f ? f : find_or_add(e, key);
    if (!f || !set(f, spec, batch, peak)) {
        if (f && !f->arch) { /* added empty: drop it */
            free(f->key);
            e->n_foot--;
        }
        ccr_warn(e, "footprint of '%s' not remembered: out of host memory", key);
        return;
    }
    if (e->sidecar && from_file && f->batch) /* batch 0, never run: no sidecar holds it */
        write_sidecar(e, f);
}
