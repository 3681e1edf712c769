/*
 * config.c — one table of options drives defaults, parsing, validation,
 * printing and the docs (jemalloc's MALLOC_CONF model; docs/allocator.md,
 * "Options"); an allocator's copy (cca_get_config).
 *
 * - Syntax: "key:value,key:value"; items separated by commas or newlines,
 *   blanks (space, tab, CR) around keys and values ignored, so
 *   cca_config_print's lines parse as they are. Keys are cca_config's
 *   field names.
 * - Values: sizes are cca_parse_size's (size.c: K/M/G/T, exact, any
 *   length; range checks are exact integer compares; a count read as a
 *   size, history, must come out whole: 1.5K, not 1.5, and takes no byte
 *   unit: 4K, not 4KB); fractions
 *   (greedy_fraction, expandable_ahead) ccai_decimal.h's decimal numbers,
 *   any length, read by strtod; booleans 1/0, true/false, on/off, yes/no;
 *   the policy growth or greedy.
 * - All or nothing: the text is applied to a copy, validated, then copied
 *   back; a bad string never leaves a half-applied config. Errors are
 *   CCA_ERR_CONFIG, cca_last_error() naming the key:
 *     unknown key 'greedy_fractoin'
 *     invalid value 'lots' for key 'max_reserved' (expected a size like 512M)
 *     out-of-range value for key 'greedy_fraction': 1.5 not in (0, 1]
 * - Numbers are C's format whatever the program's locale: fractions are
 *   read with strtod_l in the C locale (ccai_strtod, numeric.c), and the printed
 *   config and the messages (refuse_number) format doubles between
 *   ccai_numeric_begin and ccai_numeric_end (numeric.c). Sizes never meet the locale
 *   (read digit by digit). Why: docs/allocator.md, "Options".
 * - Precedence (ccalloc.h): a config passed to cca_create is used as given;
 *   CCALLOC_CONF applies only when cca_create gets NULL, or through
 *   cca_config_apply_env.
 */
#include "support.h"
#include "history.h" /* CCAI_HISTORY_MAX */

#include "ccai_config_items.h" /* common/: the items, split as ccrun --demo splits them */
#include "ccai_decimal.h"      /* common/: a fraction's grammar, stricter than strtod's */
#include "ccai_utf8.h"    /* common/: ccai_utf8_head, a quoted value cut between characters */

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A message that shows a double: in C's format ("1.5"), whatever the
 * program's locale (ccai_numeric_begin). */
static cca_status refuse_number(const char *fmt, ...) CCA_PRINTF(1, 2);
static cca_status refuse_number(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    locale_t previous = ccai_numeric_begin();
    cca_status st = cca_vset_error(CCA_ERR_CONFIG, fmt, ap);
    ccai_numeric_end(previous);
    va_end(ap);
    return st;
}

/* OPT_FRACTION: (min, max]; OPT_SHARE: a fraction that may be min, [min, max] */
typedef enum option_type { OPT_POLICY, OPT_FRACTION, OPT_SHARE, OPT_SIZE, OPT_BOOL } option_type;

typedef struct option {
    const char *name;
    option_type type;
    size_t offset;
    double default_value; /* sizes, fractions, bools, policy index */
    double min, max;      /* inclusive, except OPT_FRACTION: (min, max] */
    const char *doc;
} option;

#define KiB (1024.0)
#define MiB (1024.0 * 1024.0)
#define OFF(field) offsetof(cca_config, field)

static const option options[] = {
    {"policy", OPT_POLICY, OFF(policy), 0, 0, 1,
     "growth: reserve segments on demand; greedy: reserve one arena at creation and never call the "
     "upstream again until it is released"},
    {"greedy_fraction", OPT_FRACTION, OFF(greedy_fraction), 0.9, 0, 1,
     "greedy arena size as a fraction of the device's free memory at creation"},
    {"greedy_bytes", OPT_SIZE, OFF(greedy_bytes), 0, 0, (double)SIZE_MAX,
     "greedy arena size in bytes; 0 = use greedy_fraction"},
    {"max_reserved", OPT_SIZE, OFF(max_reserved), 0, 0, (double)SIZE_MAX,
     "cap on reserved bytes (like a memory fraction or limit); 0 = no cap"},
    {"small_max", OPT_SIZE, OFF(small_max), 1 * MiB, CCA_GRANULARITY, 1024 * MiB,
     "requests up to this size (rounded up to 512 bytes first) are served from the small pool"},
    {"small_segment", OPT_SIZE, OFF(small_segment), 2 * MiB, 64 * KiB, 1024 * MiB,
     "size of the segments of the small pool"},
    {"medium_segment", OPT_SIZE, OFF(medium_segment), 20 * MiB, 64 * KiB, 64 * 1024 * MiB,
     "size of the segments of the medium pool (requests above small_max, below large_min)"},
    {"large_min", OPT_SIZE, OFF(large_min), 10 * MiB, CCA_GRANULARITY, (double)SIZE_MAX,
     "requests from this size (rounded up to 512 bytes first) get a segment of their own, rounded up to "
     "segment_round"},
    {"segment_round", OPT_SIZE, OFF(segment_round), 2 * MiB, CCA_GRANULARITY, 1024 * MiB,
     "rounding of segments reserved for large requests (a multiple of 512)"},
    {"max_split", OPT_SIZE, OFF(max_split), 0, 0, (double)SIZE_MAX,
     "free blocks larger than this are never split nor given to smaller requests; 0 = off, else more than "
     "medium_segment"},
    {"small_pool", OPT_BOOL, OFF(small_pool), 1, 0, 1,
     "0 = serve small requests from the medium pool: its segments and split rule (for comparison)"},
    {"medium_pool", OPT_BOOL, OFF(medium_pool), 1, 0, 1,
     "1 = requests below large_min never use the segments of large requests (large requests may use medium "
     "segments); 0 = one pool for both, as PyTorch does"},
    {"log_oom", OPT_BOOL, OFF(log_oom), 1, 0, 1, "log one line per out-of-memory error"},
    {"expandable", OPT_BOOL, OFF(expandable), 1, 0, 1,
     "1 = expandable segments where the upstream has virtual memory: address ranges whose pages are mapped as "
     "they grow and given back by trim, empty-cache and the out-of-memory retry wherever they are free (map by map "
     "over whole maps, the upstreams' default; page by page over CCA_VM_PAGES); classic segments elsewhere (over a "
     "GPU without VMM cca_create logs why, once per upstream); 0 = classic segments, one upstream allocation each "
     "(max_split needs them)"},
    {"expandable_ahead", OPT_SHARE, OFF(expandable_ahead), 0.0625, 0, 1,
     "expandable segments: a request served from a segment's tail also maps this fraction F of what the segment "
     "has mapped, raised so that the call maps at least 20 MiB with the request (small_segment in the small "
     "pool's range), then capped at F x 1 GiB, so that a growing segment calls the upstream once per such "
     "step; 0 = map only what requests need: the least memory, more calls the first time a program runs"},
    {"hold_peak", OPT_BOOL, OFF(hold_peak), 0, 0, 1,
     "1 = growth: a request that would raise reserved bytes above their peak so far first releases cached memory "
     "(whole free segments, free pages), as the out-of-memory retry does, and the peak rises only when releasing "
     "everything cached leaves no room, by what the request then needs: less memory held, more upstream calls "
     "(policy:growth only)"},
    {"history", OPT_SIZE, OFF(history), 0, 0, (double)CCAI_HISTORY_MAX,
     "entries of the ring of recent events (alloc, free, segment, map, OOM) that cca_write_snapshot_torch "
     "writes as PyTorch's device trace: a count (64K = 65536; no byte unit: 64KB is refused), 40 bytes each; 0 = off"},
};
#define OPTION_COUNT (sizeof options / sizeof options[0])

static const char *policy_names[] = {"growth", "greedy"};

/* A size bound of the table as a size_t: the table's doubles hold every
 * bound exactly (powers of two), and (double)SIZE_MAX, which is 2^64, means
 * SIZE_MAX. Sizes themselves never go through a double. */
static size_t size_bound(double bound) {
    return bound >= (double)SIZE_MAX ? SIZE_MAX : (size_t)bound;
}

/* The size options that count entries, not bytes: their text must give a
 * whole number (1.5K, not 1.5), where a size drops a fraction of a byte,
 * and names no byte unit (4K or 4Ki, not 4KB, 4KiB or 4B). */
static bool is_count(const option *o) {
    return o->offset == OFF(history);
}

/* -0 is out of every range: printed "-0", no parse would take it back */
static bool fraction_in_range(const option *o, double v) {
    return (o->type == OPT_SHARE ? v >= o->min : v > o->min) && v <= o->max && !signbit(v);
}

static void set_value(cca_config *c, const option *o, double v) {
    char *field = (char *)c + o->offset;
    switch (o->type) {
    case OPT_POLICY: *(cca_policy *)field = (cca_policy)(int)v; break;
    case OPT_FRACTION:
    case OPT_SHARE: *(double *)field = v; break;
    case OPT_SIZE: *(size_t *)field = size_bound(v); break; /* defaults only */
    case OPT_BOOL: *(int *)field = (int)v; break;
    }
}

void cca_config_default(cca_config *c) {
    if (!c)
        return;
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < OPTION_COUNT; i++)
        set_value(c, &options[i], options[i].default_value);
}

/* A value inside a config string (not NUL-terminated there) as a string of
 * its own: in `small` when it fits, else a heap copy (the caller frees it
 * when it is not `small`), NULL when that copy failed. Numbers may be of any
 * length the grammar allows ("1." and a thousand zeros): long values are
 * copied rather than refused. */
static char *value_text(const char *text, size_t len, char *small, size_t cap) {
    char *buf = len < cap ? small : malloc(len + 1);
    if (buf) {
        memcpy(buf, text, len);
        buf[len] = '\0';
    }
    return buf;
}

/* A size: CCA_OK (and *whole: nothing below a unit was dropped),
 * CCA_ERR_INVALID_ARGUMENT when it is not a size, or CCA_ERR_OUT_OF_MEMORY
 * when a long value could not be copied. */
static cca_status parse_size(const char *text, size_t len, size_t *out, bool *whole) {
    char small[64];
    if (len == 0)
        return CCA_ERR_INVALID_ARGUMENT;
    char *buf = value_text(text, len, small, sizeof small);
    if (!buf)
        return CCA_ERR_OUT_OF_MEMORY;
    cca_status st = ccai_parse_size_whole(buf, out, whole);
    if (buf != small)
        free(buf);
    return st;
}

/* A fraction (ccai_decimal.h's grammar, then strtod), with parse_size's
 * statuses. */
static cca_status parse_fraction(const char *text, size_t len, double *out) {
    char small[64];
    char *buf = value_text(text, len, small, sizeof small);
    if (!buf)
        return CCA_ERR_OUT_OF_MEMORY;
    cca_status st = CCA_ERR_INVALID_ARGUMENT;
    if (ccai_decimal_number(buf)) {
        char *end;
        double v = ccai_strtod(buf, &end);
        if (*end == '\0' && !isnan(v)) {
            *out = v;
            st = CCA_OK;
        }
    }
    if (buf != small)
        free(buf);
    return st;
}

static bool parse_bool(const char *t, size_t n, int *out) {
    static const char *yes[] = {"1", "true", "on", "yes"}, *no[] = {"0", "false", "off", "no"};
    for (int i = 0; i < 4; i++) {
        if (strlen(yes[i]) == n && strncasecmp(t, yes[i], n) == 0)
            return (*out = 1), true;
        if (strlen(no[i]) == n && strncasecmp(t, no[i], n) == 0)
            return (*out = 0), true;
    }
    return false;
}

/* A value in a message: at most VALUE_SHOWN bytes of it, cut between
 * characters (ccai_utf8_head), then "..." when it is longer, so that a
 * value of any length (numbers have no length limit) never pushes the
 * key's name off the end of the message. */
#define VALUE_SHOWN 64
#define SHOWN(val, len) ccai_utf8_head((val), (len), VALUE_SHOWN), (val), (len) > VALUE_SHOWN ? "..." : ""

/* A number parse_size or parse_fraction did not take (status st). */
static cca_status number_refused(const option *o, cca_status st, const char *val, size_t val_len,
                                 const char *expected) {
    if (st == CCA_ERR_OUT_OF_MEMORY)
        return cca_set_error(CCA_ERR_CONFIG, "value of key '%s' (%zu characters): no host memory to parse it", o->name,
                         val_len);
    return cca_set_error(CCA_ERR_CONFIG, "invalid value '%.*s%s' for key '%s' (expected %s)", SHOWN(val, val_len), o->name,
                     expected);
}

/* Does a size's text hold a digit other than 0? (Then it is not zero, even
 * when it rounds down to 0 bytes.) */
static bool has_nonzero_digit(const char *t, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (t[i] >= '1' && t[i] <= '9')
            return true;
    return false;
}

/* Options that went when expandable segments became the default (issue
 * 41): refused, naming what replaced them. */
static const struct {
    const char *name, *instead;
} removed[] = {
    {"expandable_ahead_max", "the ahead is at most expandable_ahead x 1 GiB; expandable_ahead:0 maps none"},
    {"expandable_ahead_min", "a tail map maps at least 20 MiB while expandable_ahead is above 0"},
    {"expandable_chunk", "over whole maps one map holds at most 128 MiB"},
};

static cca_status apply_one(cca_config *c, const char *key, size_t key_len, const char *val, size_t val_len) {
    const option *o = NULL;
    for (size_t i = 0; i < OPTION_COUNT; i++)
        if (strlen(options[i].name) == key_len && strncmp(options[i].name, key, key_len) == 0)
            o = &options[i];
    for (size_t i = 0; !o && i < sizeof removed / sizeof removed[0]; i++)
        if (strlen(removed[i].name) == key_len && strncmp(removed[i].name, key, key_len) == 0)
            return cca_set_error(CCA_ERR_CONFIG, "key '%s' was removed: %s (docs/tuning.md, \"How far ahead to map\")",
                                 removed[i].name, removed[i].instead);
    if (!o)
        return cca_set_error(CCA_ERR_CONFIG, "unknown key '%.*s'", (int)key_len, key);
    switch (o->type) {
    case OPT_POLICY:
        for (int p = 0; p < 2; p++)
            if (strlen(policy_names[p]) == val_len && strncasecmp(val, policy_names[p], val_len) == 0) {
                set_value(c, o, p);
                return CCA_OK;
            }
        return cca_set_error(CCA_ERR_CONFIG, "invalid value '%.*s%s' for key 'policy' (expected growth or greedy)",
                         SHOWN(val, val_len));
    case OPT_FRACTION:
    case OPT_SHARE: {
        double v;
        cca_status st = parse_fraction(val, val_len, &v);
        if (st != CCA_OK)
            return number_refused(o, st, val, val_len, "a number");
        if (!fraction_in_range(o, v))
            return refuse_number("out-of-range value for key '%s': %.*s%s not in %c%g, %g]", o->name,
                                 SHOWN(val, val_len), o->type == OPT_SHARE ? '[' : '(', o->min, o->max);
        set_value(c, o, v);
        return CCA_OK;
    }
    case OPT_SIZE: {
        size_t v;
        bool whole;
        cca_status st = parse_size(val, val_len, &v, &whole);
        if (st != CCA_OK)
            return number_refused(o, st, val, val_len, "a size like 512M");
        if (is_count(o) && !whole) /* entries, not bytes: nothing is dropped silently (0.5 too: no
                                    * "0 bytes" for a count) */
            return cca_set_error(CCA_ERR_CONFIG,
                                 "value '%.*s%s' for key '%s' is not a whole number of entries (a count: 1.5K is 1536)",
                                 SHOWN(val, val_len), o->name);
        if (is_count(o) && (val[val_len - 1] == 'B' || val[val_len - 1] == 'b')) /* K, Ki: a multiplier; B: bytes */
            return cca_set_error(CCA_ERR_CONFIG,
                                 "value '%.*s%s' for key '%s' is a count of entries, not a size in bytes (no B: 4K is "
                                 "4096)",
                                 SHOWN(val, val_len), o->name);
        if (v == 0 && has_nonzero_digit(val, val_len)) /* 0 means none or off: only when written as 0 */
            return cca_set_error(CCA_ERR_CONFIG,
                                 "value '%.*s%s' for key '%s' rounds to 0 bytes, which means none or off here (write 0 "
                                 "for that, or at least 1 byte)",
                                 SHOWN(val, val_len), o->name);
        if (v < size_bound(o->min) || v > size_bound(o->max))
            return cca_set_error(CCA_ERR_CONFIG, "out-of-range value for key '%s': %.*s%s not in [%zu, %zu]", o->name,
                             SHOWN(val, val_len), size_bound(o->min), size_bound(o->max));
        *(size_t *)((char *)c + o->offset) = v; /* exact: not through set_value's double */
        return CCA_OK;
    }
    case OPT_BOOL: {
        int v;
        if (!parse_bool(val, val_len, &v))
            return cca_set_error(CCA_ERR_CONFIG,
                             "invalid value '%.*s%s' for key '%s' (expected 1, true, on, yes or 0, false, off, no)",
                             SHOWN(val, val_len), o->name);
        set_value(c, o, v);
        return CCA_OK;
    }
    }
    return cca_set_error(CCA_ERR_CONFIG, "internal: bad option type");
}

cca_status cca_config_parse(cca_config *c, const char *text) {
    if (!c)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_config_parse: config is NULL");
    if (!text)
        return CCA_OK;
    cca_config work = *c;
    ccai_config_item it; /* ccai_config_items.h: items, keys and values, blanks left out */
    while (ccai_config_next(&text, &it)) {
        if (!it.key)
            return cca_set_error(CCA_ERR_CONFIG, "expected key:value, got '%.*s%s'", SHOWN(it.item, it.item_len));
        cca_status st = apply_one(&work, it.key, it.key_len, it.val, it.val_len);
        if (st != CCA_OK)
            return st;
    }
    cca_status st = cca_config_validate(&work);
    if (st != CCA_OK)
        return st;
    *c = work;
    return CCA_OK;
}

cca_status cca_config_apply_env(cca_config *c) {
    if (!c)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_config_apply_env: config is NULL");
    const char *env = getenv("CCALLOC_CONF");
    if (!env || !*env)
        return CCA_OK;
    cca_status st = cca_config_parse(c, env);
    if (st != CCA_OK)
        return cca_set_error(st, "CCALLOC_CONF: %s", cca_last_error());
    return CCA_OK;
}

cca_status cca_config_validate(const cca_config *c) {
    if (!c)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_config_validate: config is NULL");
    if (c->policy != CCA_POLICY_GROWTH && c->policy != CCA_POLICY_GREEDY)
        return cca_set_error(CCA_ERR_CONFIG, "policy: %d is neither growth nor greedy", (int)c->policy);
    for (size_t i = 0; i < OPTION_COUNT; i++) {
        const option *o = &options[i];
        const char *field = (const char *)c + o->offset;
        double v = 0;
        switch (o->type) {
        case OPT_POLICY: continue;
        case OPT_FRACTION:
        case OPT_SHARE:
            v = *(const double *)field;
            if (!fraction_in_range(o, v))
                return refuse_number("out-of-range value for key '%s': %g not in %c%g, %g]", o->name, v,
                                     o->type == OPT_SHARE ? '[' : '(', o->min, o->max);
            continue;
        case OPT_SIZE: {
            size_t z = *(const size_t *)field;
            if (z < size_bound(o->min) || z > size_bound(o->max))
                return cca_set_error(CCA_ERR_CONFIG, "out-of-range value for key '%s': %zu not in [%zu, %zu]", o->name, z,
                                 size_bound(o->min), size_bound(o->max));
            continue;
        }
        case OPT_BOOL: v = *(const int *)field; break;
        }
        if (v < o->min || v > o->max)
            return refuse_number("out-of-range value for key '%s': %.0f not in [%.0f, %.0f]", o->name, v, o->min,
                                 o->max);
    }
    if (c->small_max > c->small_segment)
        return cca_set_error(CCA_ERR_CONFIG, "small_max (%zu) must not exceed small_segment (%zu)", c->small_max,
                         c->small_segment);
    if (c->segment_round % CCA_GRANULARITY || c->small_segment % CCA_GRANULARITY || c->medium_segment % CCA_GRANULARITY)
        return cca_set_error(CCA_ERR_CONFIG, "segment sizes must be multiples of %u bytes", CCA_GRANULARITY);
    if (c->max_split && c->max_split <= c->medium_segment)
        return cca_set_error(CCA_ERR_CONFIG,
                         "max_split (%zu) must be 0 or larger than medium_segment (%zu): smaller blocks are the "
                         "ones that must be split",
                         c->max_split, c->medium_segment);
    if (c->large_min > c->medium_segment)
        return cca_set_error(CCA_ERR_CONFIG, "large_min (%zu) must not exceed medium_segment (%zu)", c->large_min,
                         c->medium_segment);
    if (c->max_split && c->expandable)
        return cca_set_error(CCA_ERR_CONFIG,
                         "max_split (%zu) needs classic segments (expandable:0): expandable segments, the default, "
                         "are one free block to their end, and their free pages are released wherever they are",
                         c->max_split);
    if (c->max_split && c->policy == CCA_POLICY_GREEDY)
        return cca_set_error(CCA_ERR_CONFIG,
                         "max_split (%zu) cannot be used with policy:greedy: the arena is one block "
                         "that every request must split",
                         c->max_split);
    if (c->hold_peak && c->policy == CCA_POLICY_GREEDY)
        return cca_set_error(CCA_ERR_CONFIG, "hold_peak cannot be used with policy:greedy: the arena is reserved once, "
                                         "whole, and never grows past it");
    return CCA_OK;
}

static void format_value(const cca_config *c, const option *o, char *buf, size_t len) {
    const char *field = (const char *)c + o->offset;
    switch (o->type) {
    case OPT_POLICY: snprintf(buf, len, "%s", policy_names[*(const cca_policy *)field == CCA_POLICY_GREEDY]); break;
    case OPT_FRACTION:
    case OPT_SHARE: {
        /* the shortest of %.15g..%.17g that reads back as the same double
         * (%.17g always does): 0.9 stays "0.9", 0.123456789 is not cut to
         * %g's 0.123457 */
        double v = *(const double *)field;
        locale_t previous = ccai_numeric_begin();
        for (int digits = 15; digits <= 17; digits++) {
            snprintf(buf, len, "%.*g", digits, v);
            if (ccai_strtod(buf, NULL) == v)
                break;
        }
        ccai_numeric_end(previous);
        break;
    }
    case OPT_SIZE: {
        size_t v = *(const size_t *)field;
        if (v && v % (1u << 20) == 0)
            snprintf(buf, len, "%zuM", v >> 20);
        else if (v && v % 1024 == 0)
            snprintf(buf, len, "%zuK", v >> 10);
        else
            snprintf(buf, len, "%zu", v);
        break;
    }
    case OPT_BOOL: snprintf(buf, len, "%d", *(const int *)field); break;
    }
}

/* A bound of the table for the docs: the largest of T, G, M, K that divides
 * it ("64G", "512"), or SIZE_MAX. */
static void format_bound(size_t v, char *buf, size_t len) {
    static const char units[] = "TGMK";
    if (v == SIZE_MAX) {
        snprintf(buf, len, "SIZE_MAX");
        return;
    }
    for (int i = 0; i < 4; i++) {
        unsigned shift = 40 - 10 * (unsigned)i;
        if (v && v % ((size_t)1 << shift) == 0) {
            snprintf(buf, len, "%zu%c", v >> shift, units[i]);
            return;
        }
    }
    snprintf(buf, len, "%zu", v);
}

/* The range column of the docs, from the table's min and max. */
static void format_range(const option *o, char *buf, size_t len) {
    char lo[32], hi[32];
    switch (o->type) {
    case OPT_POLICY: snprintf(buf, len, "%s, %s", policy_names[0], policy_names[1]); break;
    case OPT_FRACTION:
    case OPT_SHARE: {
        locale_t previous = ccai_numeric_begin();
        snprintf(buf, len, "%c%g, %g]", o->type == OPT_SHARE ? '[' : '(', o->min, o->max);
        ccai_numeric_end(previous);
        break;
    }
    case OPT_SIZE:
        format_bound(size_bound(o->min), lo, sizeof lo);
        format_bound(size_bound(o->max), hi, sizeof hi);
        snprintf(buf, len, "[%s, %s]", lo, hi);
        break;
    case OPT_BOOL: snprintf(buf, len, "0, 1"); break;
    }
}

cca_status cca_config_print(const cca_config *c, FILE *f, int with_docs) {
    if (!c || !f)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_config_print: NULL argument");
    if (with_docs < 0 || with_docs > 2) /* refused, not read as "non-zero": a 3 may mean a format we lack */
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_config_print: with_docs %d is not 0, 1 or 2", with_docs);
    cca_config defaults;
    cca_config_default(&defaults);
    for (size_t i = 0; i < OPTION_COUNT; i++) {
        char value[64], def[64], range[80];
        format_value(c, &options[i], value, sizeof value);
        if (with_docs == 2) {
            format_value(&defaults, &options[i], def, sizeof def);
            format_range(&options[i], range, sizeof range);
            if ((i == 0 && fprintf(f, "| option | default | range | meaning |\n|---|---|---|---|\n") < 0) ||
                fprintf(f, "| `%s` | `%s` | `%s` | %s |\n", options[i].name, def, range, options[i].doc) < 0)
                return cca_set_error(CCA_ERR_IO, "cca_config_print: write failed");
        } else if (with_docs) {
            format_value(&defaults, &options[i], def, sizeof def);
            if (fprintf(f, "  %-16s %-10s (default %s) %s\n", options[i].name, value, def, options[i].doc) < 0)
                return cca_set_error(CCA_ERR_IO, "cca_config_print: write failed");
        } else if (fprintf(f, "%s:%s\n", options[i].name, value) < 0) {
            return cca_set_error(CCA_ERR_IO, "cca_config_print: write failed");
        }
    }
    if (ccai_write_failed(f))
        return cca_set_error(CCA_ERR_IO, "cca_config_print: write failed");
    return CCA_OK;
}
