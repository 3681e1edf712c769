/*
 * fuzz_config.c — libFuzzer target for the allocator's text inputs: the
 * CCALLOC_CONF grammar (cca_config_parse), the size grammar
 * (cca_parse_size) and cca_config_validate.
 *
 * Each input is read three ways, each with its own oracle:
 *
 *   text    the bytes up to the first NUL, parsed onto the defaults. Parsing
 *           is all-or-nothing: a refusal leaves the config untouched and
 *           names a reason (cca_last_error non-empty). An accepted config
 *           passes cca_config_validate, and cca_config_print (with_docs 0)
 *           prints text that parses back, from the defaults and from a
 *           config that differs in every field, to the same config field by
 *           field (the ROUND TRIP). with_docs 1 and 2 print without failing.
 *   size    the same text through cca_parse_size, against a reference
 *           written here in another way: the grammar as a pattern, the
 *           value with 128-bit integers (exact for fractions of up to 25
 *           significant digits; longer ones are checked for acceptance
 *           only, and against the value of their first 25 digits, which may
 *           be at most 1 byte less).
 *   struct  the first sizeof(cca_config) bytes as a config, and the last
 *           16 bytes as the two fractions of the defaults (random structs
 *           rarely validate; fractions are where printing is delicate):
 *           whatever cca_config_validate accepts prints as text that parses
 *           back to it (every valid config has a text).
 *
 * Build and run: scripts/fuzz.sh config [SECONDS] (clang, ASan + UBSan).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccalloc.h"
#include "ccai_fuzz.h" /* common/: the input as a C string */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FIELDS(X)                                                                                                      \
    X(policy) X(greedy_fraction) X(greedy_bytes) X(max_reserved) X(small_max) X(small_segment) X(medium_segment)      \
        X(large_min) X(segment_round) X(max_split) X(small_pool) X(medium_pool) X(log_oom) X(expandable) X(history)    \
            X(expandable_ahead)

/* The first field in which a and b differ, or NULL. Doubles compare by
 * value (the config's fractions are never NaN: validate refuses them). */
static const char *differ(const cca_config *a, const cca_config *b) {
#define CMP(f)                                                                                                         \
    if (a->f != b->f)                                                                                                  \
        return #f;
    FIELDS(CMP)
#undef CMP
    return NULL;
}

static void die(const char *what, const char *detail, const char *text) {
    fprintf(stderr, "fuzz_config: %s (%s)\ninput: '%s'\n", what, detail ? detail : "", text ? text : "");
    abort();
}

/* A config unlike the defaults in every field the round trip could leave
 * alone: a print that omitted a field would show. */
static void other_config(cca_config *c) {
    cca_config_default(c);
    c->policy = CCA_POLICY_GREEDY;
    c->greedy_fraction = 0.5;
    c->greedy_bytes = 3;
    c->max_reserved = 5;
    c->small_max = 4096;
    c->small_segment = 1 << 20;
    c->medium_segment = 64 << 20;
    c->large_min = 32 << 20;
    c->segment_round = 1024;
    c->max_split = 0;
    c->small_pool = 0;
    c->medium_pool = 0;
    c->log_oom = 0;
    c->expandable = 1;
    c->history = 7;
    c->expandable_ahead = 0.25;
}

/* print c, parse the text onto `onto`: it must be accepted and equal c */
static void round_trip(const cca_config *c, const cca_config *onto, const char *input) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return;
    if (cca_config_print(c, f, 0) != CCA_OK)
        die("cca_config_print failed on a valid config", cca_last_error(), input);
    fclose(f);
    cca_config back = *onto;
    if (cca_config_parse(&back, text) != CCA_OK) {
        fprintf(stderr, "printed:\n%s", text);
        die("printed config does not parse back", cca_last_error(), input);
    }
    const char *field = differ(c, &back);
    if (field) {
        fprintf(stderr, "printed:\n%s", text);
        die("printed config parses back to another value of", field, input);
    }
    free(text);
}

/* ---- the size reference ------------------------------------------------------ */

typedef unsigned __int128 u128;

/* cca_parse_size's grammar and value, written independently: 1 and *out
 * (exact) when accepted, 2 when accepted and *out is only a lower bound
 * that may be 1 short (more than 25 significant fraction digits), 0 when
 * refused. */
static int ref_size(const char *s, uint64_t *out) {
    const char *p = s;
    const char *w0 = p;
    while (*p >= '0' && *p <= '9')
        p++;
    const char *w1 = p, *f0 = p, *f1 = p;
    if (*p == '.') {
        f0 = ++p;
        while (*p >= '0' && *p <= '9')
            p++;
        f1 = p;
    }
    if (w1 == w0 && f1 == f0)
        return 0;
    unsigned shift = 0;
    const char *units = "kKmMgGtT";
    const char *u = *p ? strchr(units, *p) : NULL;
    if (u) {
        shift = 10 * (unsigned)(1 + (u - units) / 2);
        p++;
        if (*p == 'i' || *p == 'I')
            p++;
    }
    if (*p == 'b' || *p == 'B')
        p++;
    if (*p)
        return 0;
    while (w0 < w1 && *w0 == '0')
        w0++;
    while (f1 > f0 && f1[-1] == '0')
        f1--;
    if (w1 - w0 > 20)
        return 0; /* above 2^64 whatever the suffix */
    u128 whole = 0;
    for (const char *c = w0; c < w1; c++)
        whole = whole * 10 + (unsigned)(*c - '0');
    if (whole > (u128)(UINT64_MAX >> shift))
        return 0;
    size_t k = (size_t)(f1 - f0);
    int exact = k <= 25;
    if (!exact)
        k = 25;
    u128 d = 0, ten = 1;
    for (size_t i = 0; i < k; i++) {
        d = d * 10 + (unsigned)(f0[i] - '0');
        ten *= 10;
    }
    *out = (uint64_t)((whole << shift) + ((d << shift) / ten));
    return exact ? 1 : 2;
}

static void check_size(const char *text) {
    size_t got = 0;
    uint64_t want = 0;
    cca_status st = cca_parse_size(text, &got);
    int ref = ref_size(text, &want);
    char detail[128];
    if ((st == CCA_OK) != (ref != 0)) {
        snprintf(detail, sizeof detail, "parse_size %s, reference %s", st == CCA_OK ? "accepts" : "refuses",
                 ref ? "accepts" : "refuses");
        die("cca_parse_size disagrees with the grammar", detail, text);
    }
    if (st != CCA_OK)
        return;
    if ((ref == 1 && got != want) || (ref == 2 && got != want && got != want + 1)) {
        snprintf(detail, sizeof detail, "got %zu, want %llu", got, (unsigned long long)want);
        die("cca_parse_size value", detail, text);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static FILE *null;
    if (!null && !(null = fopen("/dev/null", "w")))
        abort();
    char *text = ccai_fuzz_cstring(data, size);
    if (!text)
        return 0;

    /* text: all-or-nothing, validate, the round trip */
    cca_config c, before, other;
    cca_config_default(&c);
    before = c;
    other_config(&other);
    if (cca_config_validate(&other) != CCA_OK)
        die("the harness's other config is invalid", cca_last_error(), NULL);
    if (cca_config_parse(&c, text) == CCA_OK) {
        if (cca_config_validate(&c) != CCA_OK)
            die("parse accepted a config validate refuses", cca_last_error(), text);
        round_trip(&c, &before, text);
        round_trip(&c, &other, text);
        if (cca_config_print(&c, null, 1) != CCA_OK || cca_config_print(&c, null, 2) != CCA_OK)
            die("cca_config_print with docs failed", cca_last_error(), text);
    } else {
        const char *field = differ(&c, &before);
        if (field)
            die("a refused text changed the config", field, text);
        if (!cca_last_error() || !*cca_last_error())
            die("a refused text left no message", NULL, text);
    }

    /* size: the grammar and the exact value */
    check_size(text);

    /* struct: every valid config prints as text that parses back */
    if (size >= sizeof(cca_config)) {
        cca_config raw;
        memcpy(&raw, data, sizeof raw);
        if (cca_config_validate(&raw) == CCA_OK) {
            round_trip(&raw, &before, "(struct input)");
            round_trip(&raw, &other, "(struct input)");
        }
    }
    if (size >= 2 * sizeof(double)) {
        cca_config d = before;
        memcpy(&d.greedy_fraction, data + size - 2 * sizeof(double), sizeof(double));
        memcpy(&d.expandable_ahead, data + size - sizeof(double), sizeof(double));
        if (cca_config_validate(&d) == CCA_OK) {
            round_trip(&d, &before, "(fraction bytes)");
            round_trip(&d, &other, "(fraction bytes)");
        }
    }
    free(text);
    return 0;
}
