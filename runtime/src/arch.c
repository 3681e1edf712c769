/*
 * arch.c — the layer list of an MLP: its spec-string form and its sizes.
 *
 *     mlp:784x4096x4096x10:relu:softmax:seed=7
 *         |  dimensions   | hidden | final | weights seed
 *
 * Rules:
 * - Owns: the spec grammar (ccr_arch_parse, ccr_arch_format) and what an
 *   architecture costs in device bytes: its parameters
 *   (ccr_arch_param_bytes) and the activations live at once at the peak of
 *   a pass (ccr_arch_activation_bytes).
 * - n+1 dimensions give n dense layers; layer i maps D[i] -> D[i+1]. The
 *   same string (without the seed) is what a safetensors file stores in its
 *   metadata under CCR_META_KEY: one grammar describes models from files
 *   and models built for memory-pressure runs.
 * - Parsing is strict: every field is checked, numbers must be plain
 *   decimal, and the error names the field and why. Formatting writes only
 *   what parses back: a caller's struct outside the limits below (or with
 *   layers that do not chain, or an unknown activation) is refused, and
 *   ccr_arch_param_bytes never reads past layers[] nor wraps (0, SIZE_MAX).
 * - Limits (CCR_MAX_LAYERS layers, dimensions <= 2^24, each weight matrix
 *   <= 2^31 elements) keep every size computation far from overflow; the
 *   activation bytes, which multiply by the batch, are overflow-checked.
 * - The activation peak follows infer.c's order of allocations: the input
 *   alone, then each layer's input and output, then logits and
 *   probabilities (softmax). infer.c checks a batch against it before a
 *   pass; footprint.c checks a sidecar's footprint is plausible with it.
 * - Costs: every function is O(layers) and allocates nothing.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccai_decimal.h" /* common/: ccai_decimal_uint_n */
#include "internal.h"

#define MAX_DIM ((size_t)1 << 24)
#define MAX_MATRIX ((size_t)1 << 31)

static ccr_status parse_dims(ccr_arch *a, const char *s, const char *e, const char *spec) {
    size_t dims[CCR_MAX_LAYERS + 1], n = 0;
    const char *p = s;
    for (;;) {
        const char *x = p;
        while (x < e && *x != 'x')
            x++;
        unsigned long long v;
        if (n == CCR_MAX_LAYERS + 1)
            return ccr_fail(CCR_ERR_SPEC, "spec '%s': more than %d layers", spec, CCR_MAX_LAYERS);
        if (ccai_decimal_uint_n(p, (size_t)(x - p), 1, MAX_DIM, &v)) /* digits only, any leading zeros */
            return ccr_fail(CCR_ERR_SPEC, "spec '%s': dimension '%.*s' is not a number in 1..%zu", spec, (int)(x - p),
                            p, MAX_DIM);
        dims[n++] = (size_t)v;
        if (x == e)
            break;
        p = x + 1;
    }
    if (n < 2)
        return ccr_fail(CCR_ERR_SPEC, "spec '%s': need at least two dimensions (input x output)", spec);
    a->n_layers = n - 1;
    for (size_t i = 0; i + 1 < n; i++) {
        if (dims[i] * dims[i + 1] > MAX_MATRIX)
            return ccr_fail(CCR_ERR_SPEC, "spec '%s': layer %zu (%zux%zu) exceeds 2^31 weights", spec, i, dims[i],
                            dims[i + 1]);
        a->layers[i].in = dims[i];
        a->layers[i].out = dims[i + 1];
        a->layers[i].has_bias = 1;
        a->layers[i].act = CCK_ACT_NONE;
    }
    return CCR_OK;
}

static int parse_act(const char *s, const char *e, cck_activation *out) {
    char name[16];
    size_t len = (size_t)(e - s);
    if (len == 0 || len >= sizeof name)
        return 0;
    memcpy(name, s, len);
    name[len] = '\0';
    return cck_activation_parse(name, out) == CCK_OK;
}

ccr_status ccr_arch_parse(const char *spec, ccr_arch *out) {
    if (!spec || !out)
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "spec or output is NULL");
    ccr_arch a;
    memset(&a, 0, sizeof a);
    a.seed = 1;
    if (strncmp(spec, "mlp:", 4) != 0)
        return ccr_fail(CCR_ERR_SPEC, "spec '%s': must start with 'mlp:' (e.g. mlp:784x256x10:relu:softmax)", spec);
    const char *p = spec + 4;
    const char *e = strchr(p, ':');
    if (!e)
        e = p + strlen(p);
    ccr_status st = parse_dims(&a, p, e, spec);
    if (st != CCR_OK)
        return st;
    cck_activation hidden = CCK_ACT_RELU;
    int have_acts = 0;
    /* each field at most once; ACT and acts= say the same thing, one of
     * them; softmax and nosoftmax too: a repeat is refused, never "the last
     * one wins" */
    enum { F_ACT = 1, F_SOFTMAX = 2, F_SEED = 4, F_NOBIAS = 8 };
    unsigned seen = 0;
    while (*e == ':') {
        p = e + 1;
        e = strchr(p, ':');
        if (!e)
            e = p + strlen(p);
        size_t len = (size_t)(e - p);
        cck_activation act;
        unsigned long long v;
        unsigned field = (len == 7 && !strncmp(p, "softmax", 7)) || (len == 9 && !strncmp(p, "nosoftmax", 9))
                             ? F_SOFTMAX
                         : len == 6 && !strncmp(p, "nobias", 6)                          ? F_NOBIAS
                         : len >= 5 && !strncmp(p, "seed=", 5)                           ? F_SEED
                         : (len > 5 && !strncmp(p, "acts=", 5)) || parse_act(p, e, &act) ? F_ACT
                                                                                         : 0;
        if (field & seen)
            return ccr_fail(CCR_ERR_SPEC, "spec '%s': field '%.*s' repeats or contradicts an earlier one (%s at most once)",
                            spec, (int)len, p,
                            field == F_SOFTMAX ? "softmax or nosoftmax"
                            : field == F_ACT   ? "one of relu|gelu|none or acts="
                            : field == F_SEED  ? "seed="
                                               : "nobias");
        seen |= field;
        if (len == 7 && !strncmp(p, "softmax", 7)) {
            a.softmax = 1;
        } else if (len == 9 && !strncmp(p, "nosoftmax", 9)) {
            a.softmax = 0;
        } else if (len == 6 && !strncmp(p, "nobias", 6)) {
            for (size_t i = 0; i < a.n_layers; i++)
                a.layers[i].has_bias = 0;
        } else if (len >= 5 && !strncmp(p, "seed=", 5)) {
            if (ccai_decimal_uint_n(p + 5, len - 5, 0, ~0ull, &v))
                return ccr_fail(CCR_ERR_SPEC, "spec '%s': seed '%.*s' is not a number in 0..2^64-1", spec,
                                (int)(len - 5), p + 5);
            a.seed = v;
        } else if (len > 5 && !strncmp(p, "acts=", 5)) {
            const char *q = p + 5;
            size_t i = 0;
            while (q <= e) {
                const char *r = q;
                while (r < e && *r != '/')
                    r++;
                if (i == a.n_layers || !parse_act(q, r, &act))
                    return ccr_fail(CCR_ERR_SPEC, "spec '%s': acts= needs %zu of none|relu|gelu separated by '/'", spec,
                                    a.n_layers);
                a.layers[i++].act = act;
                q = r + 1;
            }
            if (i != a.n_layers)
                return ccr_fail(CCR_ERR_SPEC, "spec '%s': acts= lists %zu activations for %zu layers", spec, i,
                                a.n_layers);
            have_acts = 1;
        } else if (parse_act(p, e, &act)) {
            hidden = act;
        } else {
            return ccr_fail(CCR_ERR_SPEC,
                            "spec '%s': unknown field '%.*s' (expected relu|gelu|none, softmax, nosoftmax, "
                            "seed=N, nobias or acts=A/B/..)",
                            spec, (int)len, p);
        }
    }
    if (*e != '\0')
        return ccr_fail(CCR_ERR_SPEC, "spec '%s': trailing characters", spec);
    if (!have_acts)
        for (size_t i = 0; i + 1 < a.n_layers; i++)
            a.layers[i].act = hidden;
    *out = a;
    return CCR_OK;
}

/* Layers a spec string can give (a caller's struct may hold anything):
 * widths 1..2^24, each matrix at most 2^31 weights, each layer's input
 * the last one's output, activations of the enum. */
static ccr_status check_layers(const ccr_arch *a) {
    for (size_t i = 0; i < a->n_layers; i++) {
        const ccr_layer_desc *l = &a->layers[i];
        if (l->in == 0 || l->out == 0 || l->in > MAX_DIM || l->out > MAX_DIM || l->in * l->out > MAX_MATRIX)
            return ccr_fail(CCR_ERR_INVALID_ARGUMENT,
                            "bad architecture: layer %zu is %zu x %zu (widths 1..%zu, at most %zu weights)", i, l->in,
                            l->out, MAX_DIM, MAX_MATRIX);
        if (i && l->in != a->layers[i - 1].out)
            return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "bad architecture: layer %zu has input %zu, layer %zu output %zu",
                            i, l->in, i - 1, a->layers[i - 1].out);
        if (l->act != CCK_ACT_NONE && l->act != CCK_ACT_RELU && l->act != CCK_ACT_GELU)
            return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "bad architecture: layer %zu has activation %d", i, (int)l->act);
    }
    return CCR_OK;
}

ccr_status ccr_arch_format(const ccr_arch *a, char *buf, size_t len) {
    if (!a || !buf || a->n_layers == 0 || a->n_layers > CCR_MAX_LAYERS)
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "bad architecture");
    if (check_layers(a) != CCR_OK)
        return CCR_ERR_INVALID_ARGUMENT;
    size_t pos = 0;
    int n = snprintf(buf, len, "mlp:%zu", a->layers[0].in);
    pos += n > 0 ? (size_t)n : 0;
    for (size_t i = 0; i < a->n_layers && pos < len; i++) {
        n = snprintf(buf + pos, len - pos, "x%zu", a->layers[i].out);
        pos += n > 0 ? (size_t)n : 0;
    }
    /* Hidden activations: one name when they agree and the last is none. */
    int uniform = a->layers[a->n_layers - 1].act == CCK_ACT_NONE;
    for (size_t i = 1; i + 1 < a->n_layers; i++)
        uniform &= a->layers[i].act == a->layers[0].act;
    if (pos < len) {
        if (uniform && a->n_layers > 1) {
            n = snprintf(buf + pos, len - pos, ":%s", cck_activation_name(a->layers[0].act));
        } else if (uniform) {
            n = snprintf(buf + pos, len - pos, ":none");
        } else {
            n = snprintf(buf + pos, len - pos, ":acts=");
            for (size_t i = 0; i < a->n_layers && n > 0 && pos + (size_t)n < len; i++) {
                size_t at = pos + (size_t)n;
                int k = snprintf(buf + at, len - at, "%s%s", i ? "/" : "", cck_activation_name(a->layers[i].act));
                n += k > 0 ? k : 0;
            }
        }
        pos += n > 0 ? (size_t)n : 0;
    }
    if (pos < len) {
        n = snprintf(buf + pos, len - pos, ":%s", a->softmax ? "softmax" : "nosoftmax");
        pos += n > 0 ? (size_t)n : 0;
    }
    int all_bias = 1;
    for (size_t i = 0; i < a->n_layers; i++)
        all_bias &= a->layers[i].has_bias;
    if (!all_bias && pos < len) {
        n = snprintf(buf + pos, len - pos, ":nobias");
        pos += n > 0 ? (size_t)n : 0;
    }
    if (pos >= len)
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "spec buffer of %zu bytes too short", len);
    return CCR_OK;
}

size_t ccr_arch_param_bytes(const ccr_arch *a) {
    if (!a || a->n_layers > CCR_MAX_LAYERS) /* a caller's struct: never read past layers[] */
        return 0;
    size_t total = 0;
    for (size_t i = 0; i < a->n_layers; i++) {
        const ccr_layer_desc *l = &a->layers[i];
        size_t w, floats, bytes;
        if (!ccr_mul_ok(l->in, l->out, &w) || w > SIZE_MAX - (l->has_bias ? l->out : 0))
            return SIZE_MAX;
        floats = w + (l->has_bias ? l->out : 0);
        if (!ccr_mul_ok(floats, sizeof(float), &bytes) || bytes > SIZE_MAX - total)
            return SIZE_MAX;
        total += bytes;
    }
    return total;
}

/* Floats live at once at the peak of a pass, per row: the input alone, then
 * each layer's input and output, then logits and probabilities. */
static size_t peak_floats_per_row(const ccr_arch *a) {
    size_t peak = a->layers[0].in, prev = a->layers[0].in;
    for (size_t i = 0; i < a->n_layers; i++) {
        size_t pair = prev + a->layers[i].out; /* each <= 2^24: no overflow */
        if (pair > peak)
            peak = pair;
        prev = a->layers[i].out;
    }
    if (a->softmax && 2 * prev > peak)
        peak = 2 * prev;
    return peak;
}

int ccr_arch_activation_bytes(const ccr_arch *a, size_t batch, size_t *out) {
    return ccr_mul_ok(batch, peak_floats_per_row(a) * sizeof(float), out);
}
