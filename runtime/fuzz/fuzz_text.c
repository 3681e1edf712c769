/*
 * fuzz_text.c — libFuzzer target for the runtime's two text inputs besides
 * the model file (fuzz_loader.c has that): the model spec grammar
 * (ccr_arch_parse, arch.c) and the footprint sidecar "<path>.ccfoot"
 * (footprint.c).
 *
 *   spec     the input up to its first NUL through ccr_arch_parse. A spec
 *            that parses formats (ccr_arch_format) to a canonical spec that
 *            parses to the same layers (dimensions, activations, biases,
 *            softmax; the seed is not part of the canonical form) and
 *            formats to itself.
 *   sidecar  the whole input as the sidecar of a model file of fixed layers
 *            (mlp:64x32x10:relu:softmax), read through
 *            ccr_footprint_lookup on a 1 GiB simulated device. A sidecar the
 *            engine takes (a footprint > 0) must be what footprint.c
 *            promises to take and nothing else: exactly the four lines
 *            "ccfoot 1", "arch SPEC", "batch N", "reserved_peak N" (the
 *            last three in any order, the last newline optional), no
 *            other byte, numbers plain decimal, and the footprint is the
 *            file's reserved_peak. One it refuses must have said why (a
 *            warning; an empty file too).
 *
 * Build and run: scripts/fuzz.sh text [SECONDS] (clang, ASan + UBSan).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ccr.h"
#include "ccai_fuzz.h" /* common/: the input as a C string */
#include "internal.h" /* runtime/src: ccr_footprint_lookup, ccr_footprint_clear */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void die(const char *what, const char *detail) {
    fprintf(stderr, "fuzz_text: %s (%s)\n", what, detail ? detail : "");
    abort();
}

/* ---- spec ---------------------------------------------------------------- */

static int same_arch(const ccr_arch *a, const ccr_arch *b) {
    if (a->n_layers != b->n_layers || a->softmax != b->softmax)
        return 0;
    for (size_t i = 0; i < a->n_layers; i++)
        if (a->layers[i].in != b->layers[i].in || a->layers[i].out != b->layers[i].out ||
            a->layers[i].has_bias != b->layers[i].has_bias || a->layers[i].act != b->layers[i].act)
            return 0;
    return 1;
}

static void check_spec(const char *text) {
    ccr_arch a, b;
    if (ccr_arch_parse(text, &a) != CCR_OK)
        return;
    static char canon[8192], again[8192];
    if (ccr_arch_format(&a, canon, sizeof canon) != CCR_OK)
        die("a parsed spec does not format", text);
    if (ccr_arch_parse(canon, &b) != CCR_OK)
        die("a canonical spec does not parse", canon);
    if (!same_arch(&a, &b))
        die("the canonical spec names other layers", canon);
    if (ccr_arch_format(&b, again, sizeof again) != CCR_OK || strcmp(canon, again) != 0)
        die("the canonical spec is not canonical", again);
}

/* ---- sidecar ------------------------------------------------------------- */

#define SIDECAR_SPEC "mlp:64x32x10:relu:softmax"

static int warned;
static void on_warn(void *user, const char *line) {
    (void)user;
    (void)line;
    warned = 1;
}

/* A plain decimal number: digits only, not empty. */
static int plain_number(const char *s, size_t n, unsigned long long *v) {
    if (n == 0 || n > 20)
        return 0;
    unsigned long long x = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        if (x > (~0ull - (unsigned)(s[i] - '0')) / 10)
            return 0;
        x = x * 10 + (unsigned)(s[i] - '0');
    }
    *v = x;
    return 1;
}

/* Is text (n bytes) exactly the four lines of a sidecar for SIDECAR_SPEC?
 * Its reserved_peak in *peak when it is. */
static int strict_sidecar(const char *text, size_t n, unsigned long long *peak) {
    if (n && text[n - 1] == '\n')
        n--; /* the last newline is optional */
    const char *line = text, *end = text + n;
    int seen = 0, count = 0;
    while (line <= end) {
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        size_t len = (size_t)((nl ? nl : end) - line);
        unsigned long long v;
        if (count == 0) {
            if (len != 8 || memcmp(line, "ccfoot 1", 8))
                return 0;
        } else if (len == 5 + strlen(SIDECAR_SPEC) && !memcmp(line, "arch " SIDECAR_SPEC, len) && !(seen & 1)) {
            seen |= 1;
        } else if (len > 6 && !memcmp(line, "batch ", 6) && !(seen & 2) && plain_number(line + 6, len - 6, &v)) {
            seen |= 2;
        } else if (len > 14 && !memcmp(line, "reserved_peak ", 14) && !(seen & 4) &&
                   plain_number(line + 14, len - 14, peak)) {
            seen |= 4;
        } else {
            return 0;
        }
        count++;
        if (!nl)
            break;
        line = nl + 1;
    }
    return count == 4 && seen == 7;
}

static ccr_engine *engine;
static char model_path[64], sidecar_path[80];
static ccr_arch sidecar_arch;

static void check_sidecar(const uint8_t *data, size_t size) {
    if (!engine) {
        ccr_engine_options o;
        ccr_engine_options_default(&o);
        o.device = CCR_DEVICE_HOST;
        o.footprint_sidecar = 1;
        o.warn = on_warn;
        if (ccr_engine_create(&o, &engine) != CCR_OK || ccr_arch_parse(SIDECAR_SPEC, &sidecar_arch) != CCR_OK)
            abort();
        snprintf(model_path, sizeof model_path, "/tmp/ccr_fuzz_text.%ld.safetensors", (long)getpid());
        snprintf(sidecar_path, sizeof sidecar_path, "%s.ccfoot", model_path);
    }
    FILE *f = fopen(sidecar_path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0)
        abort();
    warned = 0;
    size_t got = ccr_footprint_lookup(engine, model_path, &sidecar_arch, 1);
    ccr_footprint_clear(engine); /* the next input is read from its file again */
    unsigned long long peak = 0;
    int strict = memchr(data, '\0', size) == NULL && strict_sidecar((const char *)data, size, &peak);
    if (got && !strict)
        die("a sidecar that is not exactly the four lines was taken", NULL);
    if (got && got != peak)
        die("the footprint is not the file's reserved_peak", NULL);
    if (!got && !warned)
        die("a sidecar was ignored without a warning", NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = ccai_fuzz_cstring(data, size);
    if (!text)
        return 0;
    check_spec(text);
    free(text);
    check_sidecar(data, size);
    return 0;
}
