/*
 * safetensors.c — reading and writing the safetensors format, strictly.
 *
 *     ┌──────────┬──────────────────────────────┬───────────────────────────┐
 *     │ u64 LE N │ N bytes of JSON header       │ data section              │
 *     └──────────┴──────────────────────────────┴───────────────────────────┘
 *     header: {"__metadata__": {"ccr.mlp": "mlp:64x64x10:relu:softmax"},
 *              "0.weight": {"dtype": "F32", "shape": [64, 64],
 *                           "data_offsets": [0, 16384]}, ...}
 *
 * ccr_st_open validates everything a hostile file can get wrong before any
 * device memory is touched, in this order, each with its own message:
 *   1. length: file shorter than 8 bytes; N == 0; N above CCR_ST_MAX_HEADER
 *      (the cap the reference implementation uses: 100 MB); N past the end;
 *      N more than the data section + 1 MiB (CCR_ST_HEADER_SLACK: a header
 *      describes its data, a few dozen bytes per tensor; so the header is at
 *      most about half the file + 512 KiB, and a 93 MB file of header alone
 *      is refused before a byte of it is read); a stream that fails or
 *      ends before the size it reported is CCR_ERR_IO ("short read");
 *   2. structure, before parsing (prescan_header, one pass, no memory): at
 *      most CCR_ST_MAX_TOKENS (2^20) keys and values, nesting at most 3 deep
 *      (root object > entry > array), arrays of at most 8 elements, no NUL in
 *      a string (raw or \u0000: "F32\u0000junk" is not "F32"), strings
 *      well-formed UTF-8 (ccai_utf8.h: no overlong form, surrogate or cut
 *      sequence; Python and the safetensors crate refuse those files), every
 *      value in an entry's arrays a whole number in 0..2^53 written in digits
 *      (cJSON reads numbers as doubles: "2.", "1e0", "-0" and 2^53 + 1 would
 *      be read as 2, 1, 0 and 2^53; refused quoting the file's text). So
 *      cJSON never builds more than 2^20 nodes (~64 MiB), whatever the file;
 *   3. JSON: parsed with cJSON (length-bounded; host memory refused inside
 *      it is CCR_ERR_OUT_OF_MEMORY, told by malloc's ENOMEM, never a file
 *      "not valid JSON"), root must be an object,
 *      followed by nothing but whitespace padding up to N (`{...}GARBAGE` and
 *      `{...}{...}` are refused), __metadata__ must map strings to strings;
 *      __metadata__ and its CCR_META_KEY each at most once (cJSON keeps
 *      both copies of a repeated key; Python's json and the safetensors
 *      crate take the last, so a file repeating the layer list would be
 *      one model here and another there);
 *   4. each tensor: dtype, shape and data_offsets each at most once (cJSON
 *      would read the first copy, Python the last); dtype is a string we
 *      can convert (F32, F16, BF16, F64; any other name, the format's own
 *      or not, is CCR_ERR_DTYPE), shape is an array of at most 8 integers,
 *      data_offsets is [begin, end] with begin <= end <= data size, and
 *      end - begin equals elements × dtype size (overflow-checked);
 *   5. layout: tensors sorted by offset tile the data section exactly — no
 *      overlap, no gap, no trailing bytes (the spec's own rule);
 *   6. names: no tensor name twice.
 * ccr_st_bind_mlp then matches tensors to the layer list found in
 * __metadata__[CCR_META_KEY]: tensors are "<key>.weight" / "<key>.bias",
 * keys in natural order ("0" < "2" < "10") are the layers in order, which is
 * what a PyTorch nn.Sequential state dict looks like. Shapes must agree.
 *
 * Writing (ccr_st_write) builds the header with cJSON and checks every
 * node it adds, and takes all the host memory it needs before it opens the
 * file: host memory refused is CCR_ERR_OUT_OF_MEMORY with the file (maybe
 * the model's own) as it was, never a header with a key, tensor or number
 * missing. A write refused after that leaves a prefix (docs/engine.md).
 * Reading converts to float32 in chunks; costs are one pass over the header
 * (O(T log T) for T tensors, for the sort) and one over the data.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdbool.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ccai_open.h" /* common/: ccai_open_nowait */
#include "ccai_utf8.h" /* common/: ccai_utf8_len, ccai_utf8_head */
#include "internal.h"

static const struct {
    const char *name;
    int supported;
    ccr_dtype dtype;
    size_t size;
} dtypes[] = {
    {"F32", 1, CCR_F32, 4},  {"F16", 1, CCR_F16, 2},     {"BF16", 1, CCR_BF16, 2},   {"F64", 1, CCR_F64, 8},
    {"I8", 0, CCR_F32, 1},   {"U8", 0, CCR_F32, 1},      {"I16", 0, CCR_F32, 2},     {"U16", 0, CCR_F32, 2},
    {"I32", 0, CCR_F32, 4},  {"U32", 0, CCR_F32, 4},     {"I64", 0, CCR_F32, 8},     {"U64", 0, CCR_F32, 8},
    {"BOOL", 0, CCR_F32, 1}, {"F8_E4M3", 0, CCR_F32, 1}, {"F8_E5M2", 0, CCR_F32, 1},
};

static size_t dtype_size(ccr_dtype d) {
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (dtypes[i].supported && dtypes[i].dtype == d)
            return dtypes[i].size;
    return 0;
}

static const char *dtype_name(ccr_dtype d) {
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (dtypes[i].supported && dtypes[i].dtype == d)
            return dtypes[i].name;
    return "?";
}

/* A JSON number that is a whole number in [0, 2^53]. Every number in an
 * entry's arrays was checked in the file's text by the pre-scan
 * (array_number), so the double is the number written; this check is the
 * tree's own guard. */
static int json_uint(const cJSON *j, uint64_t *out) {
    if (!cJSON_IsNumber(j))
        return 0;
    double v = j->valuedouble;
    if (!isfinite(v) || v < 0 || v > 9007199254740992.0 || floor(v) != v)
        return 0;
    *out = (uint64_t)v;
    return 1;
}

static void shape_text(const ccr_st_tensor *t, char *buf, size_t len) {
    size_t pos = (size_t)snprintf(buf, len, "[");
    for (size_t i = 0; i < t->ndim && pos < len; i++)
        pos += (size_t)snprintf(buf + pos, len - pos, "%s%zu", i ? ", " : "", t->shape[i]);
    if (pos < len)
        snprintf(buf + pos, len - pos, "]");
}

static ccr_status parse_tensor(const cJSON *j, ccr_st_tensor *t, uint64_t data_size) {
    if (!cJSON_IsObject(j))
        return ccr_fail(CCR_ERR_FORMAT, "tensor '%s': entry is not a JSON object", t->name);
    /* cJSON keeps both copies of a repeated key and finds the first; Python
     * and the safetensors crate take the last or refuse: a field read here
     * is given once. O(keys of the entry). */
    static const char *const fields[] = {"dtype", "shape", "data_offsets"};
    int times[3] = {0, 0, 0};
    for (const cJSON *c = j->child; c; c = c->next)
        for (int k = 0; k < 3; k++)
            if (!strcmp(c->string, fields[k]) && times[k]++)
                return ccr_fail(CCR_ERR_FORMAT, "tensor '%s': field '%s' appears twice", t->name, fields[k]);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(j, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(j, "shape");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(j, "data_offsets");
    if (!cJSON_IsString(dt))
        return ccr_fail(CCR_ERR_FORMAT, "tensor '%s': missing string 'dtype'", t->name);
    size_t k, nd = sizeof dtypes / sizeof dtypes[0];
    for (k = 0; k < nd; k++)
        if (!strcmp(dtypes[k].name, dt->valuestring))
            break;
    if (k == nd || !dtypes[k].supported)
        return ccr_fail(CCR_ERR_DTYPE, "tensor '%s': unsupported dtype '%.*s' (supported: F32, F16, BF16, F64)",
                        t->name, ccai_utf8_head(dt->valuestring, strlen(dt->valuestring), 32), dt->valuestring);
    t->dtype = dtypes[k].dtype;
    if (!cJSON_IsArray(sh))
        return ccr_fail(CCR_ERR_FORMAT, "tensor '%s': missing array 'shape'", t->name);
    int ndim = cJSON_GetArraySize(sh);
    if (ndim > CCR_ST_MAX_DIMS)
        return ccr_fail(CCR_ERR_FORMAT, "tensor '%s': %d dimensions (at most %d)", t->name, ndim, CCR_ST_MAX_DIMS);
    t->ndim = (size_t)ndim;
    t->count = 1;
    size_t i = 0;
    for (const cJSON *d = sh->child; d; d = d->next, i++) {
        uint64_t v;
        if (!json_uint(d, &v) || v > SIZE_MAX)
            return ccr_fail(CCR_ERR_FORMAT, "tensor '%s': shape[%zu] is not a non-negative integer", t->name, i);
        t->shape[i] = (size_t)v;
        if (!ccr_mul_ok(t->count, t->shape[i], &t->count))
            return ccr_fail(CCR_ERR_FORMAT, "tensor '%s': shape overflows", t->name);
    }
    uint64_t b, e;
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 || !json_uint(off->child, &b) ||
        !json_uint(off->child->next, &e))
        return ccr_fail(CCR_ERR_FORMAT, "tensor '%s': data_offsets must be [begin, end] integers", t->name);
    if (b > e || e > data_size)
        return ccr_fail(CCR_ERR_FORMAT,
                        "tensor '%s': data_offsets [%llu, %llu) out of range (data section is %llu bytes: truncated?)",
                        t->name, (unsigned long long)b, (unsigned long long)e, (unsigned long long)data_size);
    size_t need;
    if (!ccr_mul_ok(t->count, dtype_size(t->dtype), &need) || need != e - b) {
        char s[CCR_ST_MAX_DIMS * 22 + 3], n[32] = "more than 2^64"; /* room for 8 x ", 2^64-1" */
        shape_text(t, s, sizeof s);
        if (ccr_mul_ok(t->count, dtype_size(t->dtype), &need))
            snprintf(n, sizeof n, "%zu", need);
        return ccr_fail(CCR_ERR_FORMAT, "tensor '%s': data_offsets [%llu, %llu) hold %llu bytes but %s %s needs %s",
                        t->name, (unsigned long long)b, (unsigned long long)e, (unsigned long long)(e - b),
                        dtype_name(t->dtype), s, n);
    }
    t->begin = b;
    t->end = e;
    return CCR_OK;
}

static int by_offset(const void *pa, const void *pb) {
    const ccr_st_tensor *a = pa, *b = pb;
    if (a->begin != b->begin)
        return a->begin < b->begin ? -1 : 1;
    if (a->end != b->end)
        return a->end < b->end ? -1 : 1;
    return strcmp(a->name, b->name);
}

static int by_name(const void *pa, const void *pb) {
    return strcmp(*(const char *const *)pa, *(const char *const *)pb);
}

static ccr_status check_layout(ccr_st_file *s) {
    qsort(s->t, s->n, sizeof *s->t, by_offset);
    uint64_t at = 0;
    for (size_t i = 0; i < s->n; i++) {
        const ccr_st_tensor *t = &s->t[i];
        if (t->begin < at)
            return ccr_fail(CCR_ERR_FORMAT, "tensor '%s' [%llu, %llu) overlaps tensor '%s' [%llu, %llu)", t->name,
                            (unsigned long long)t->begin, (unsigned long long)t->end, s->t[i - 1].name,
                            (unsigned long long)s->t[i - 1].begin, (unsigned long long)s->t[i - 1].end);
        if (t->begin > at)
            return ccr_fail(CCR_ERR_FORMAT, "data bytes [%llu, %llu) are not covered by any tensor (before '%s')",
                            (unsigned long long)at, (unsigned long long)t->begin, t->name);
        at = t->end;
    }
    if (at != s->data_size)
        return ccr_fail(CCR_ERR_FORMAT, "data bytes [%llu, %llu) at the end are not covered by any tensor",
                        (unsigned long long)at, (unsigned long long)s->data_size);
    /* duplicate names (JSON objects may repeat a key; cJSON keeps both) */
    const char **names = malloc((s->n ? s->n : 1) * sizeof *names);
    if (!names)
        return ccr_fail(CCR_ERR_OUT_OF_MEMORY, "out of host memory");
    for (size_t i = 0; i < s->n; i++)
        names[i] = s->t[i].name;
    qsort(names, s->n, sizeof *names, by_name);
    ccr_status st = CCR_OK;
    for (size_t i = 1; i < s->n && st == CCR_OK; i++)
        if (!strcmp(names[i - 1], names[i]))
            st = ccr_fail(CCR_ERR_FORMAT, "tensor '%s' appears twice", names[i]);
    free(names);
    return st;
}

static int json_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* A stretch of the raw header: a key's text between its quotes, as
 * written (escapes not decoded). */
typedef struct json_span {
    const char *text;
    size_t len;
} json_span;

/* At most this many bytes of a refused number in a message, cut between
 * characters (ccai_utf8_head), then "..." (a number has no length limit). */
#define NUMBER_SHOWN 64

/* A value of an array of a tensor entry, [text, text + n) at header byte
 * `at`: the loader reads it (shape, data_offsets) as a count, so it must be
 * JSON's integer grammar without a sign ("0" or digits not starting with
 * 0) and at most 2^53, which a double holds exactly. cJSON reads every
 * number as a double, so "2.", "1e0", "-0" and 2^53 + 1 would reach the
 * loader as 2, 1, 0 and 2^53: refused here, quoting the file's text. */
static ccr_status array_number(const char *text, size_t n, size_t at, const char *kind, const json_span *key,
                               size_t index) {
    uint64_t v = 0;
    size_t i = 0;
    for (; i < n && text[i] >= '0' && text[i] <= '9' && v <= (1ull << 53); i++)
        v = v * 10 + (uint64_t)(text[i] - '0');
    if (i == n && n > 0 && (text[0] != '0' || n == 1) && v <= (1ull << 53))
        return CCR_OK;
    int shown = ccai_utf8_head(text, n, NUMBER_SHOWN);
    const char *more = n > NUMBER_SHOWN ? "..." : "";
    if (kind[0] == '{' && kind[1] == '{' && key[0].text && key[1].text)
        return ccr_fail(CCR_ERR_FORMAT,
                        "tensor '%.*s': %.*s[%zu] is '%.*s%s' (header byte %zu): shapes and data_offsets are whole "
                        "numbers in 0..2^53 written in digits",
                        (int)key[0].len, key[0].text, (int)key[1].len, key[1].text, index, shown, text, more, at);
    return ccr_fail(CCR_ERR_FORMAT,
                    "header value '%.*s%s' at byte %zu, in an array: shapes and data_offsets are whole numbers in "
                    "0..2^53 written in digits",
                    shown, text, more, at);
}

/* One pass over the raw header before cJSON sees it, O(header) time and no
 * memory, so a hostile header never becomes a tree (cJSON spends ~64 bytes
 * per token: 49M zeros were 3.8 GB). It refuses what no header needs:
 *   - nesting deeper than CCR_ST_MAX_DEPTH (root object > entry > array);
 *   - an array of more than CCR_ST_MAX_DIMS elements (shape; data_offsets 2);
 *   - more than CCR_ST_MAX_TOKENS values and keys in all;
 *   - a NUL in a string, raw or escaped (\u0000): cJSON's C strings would end
 *     there ("F32\u0000junk" read as "F32"); other raw control characters;
 *   - in an array of an entry (shape, data_offsets), a value that is not a
 *     whole number in 0..2^53 in digits (array_number).
 * Everything else malformed is left to cJSON, which words it. */
static ccr_status prescan_header(const char *text, size_t len) {
    char kind[CCR_ST_MAX_DEPTH];
    size_t elems[CCR_ST_MAX_DEPTH], start[CCR_ST_MAX_DEPTH];
    json_span key[CCR_ST_MAX_DEPTH] = {{0}}; /* the last key at each depth: a tensor's name, a field's */
    size_t depth = 0, tokens = 0;
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (json_space(c) || c == ',' || c == ':')
            continue;
        if (c == '}' || c == ']') {
            depth -= depth > 0; /* mismatches are cJSON's to report */
            continue;
        }
        if (c == '\0')
            return ccr_fail(CCR_ERR_FORMAT, "header holds a NUL byte at byte %zu", i);
        /* a value or a key starts here */
        if (++tokens > CCR_ST_MAX_TOKENS)
            return ccr_fail(CCR_ERR_FORMAT,
                            "header has more than %llu JSON tokens (at byte %zu); a tensor entry needs at most %d",
                            (unsigned long long)CCR_ST_MAX_TOKENS, i, 9 + CCR_ST_MAX_DIMS);
        if (depth > 0 && kind[depth - 1] == '[' && ++elems[depth - 1] > CCR_ST_MAX_DIMS)
            return ccr_fail(CCR_ERR_FORMAT,
                            "header array at byte %zu has more than %d elements (a shape has at most %d, "
                            "data_offsets 2)",
                            start[depth - 1], CCR_ST_MAX_DIMS, CCR_ST_MAX_DIMS);
        if (c == '{' || c == '[') {
            if (depth == CCR_ST_MAX_DEPTH)
                return ccr_fail(CCR_ERR_FORMAT,
                                "header nests deeper than %d levels (at byte %zu); a header is an object of "
                                "objects of arrays",
                                CCR_ST_MAX_DEPTH, i);
            kind[depth] = c;
            elems[depth] = 0;
            start[depth] = i;
            key[depth++] = (json_span){0}; /* no key yet inside the new container */
        } else if (c == '"') {
            size_t at = i++;
            for (; i < len && text[i] != '"'; i++) {
                unsigned char b = (unsigned char)text[i];
                if (b >= 0x80) { /* text ends in a NUL: a cut sequence reads no further */
                    unsigned n = ccai_utf8_len((const unsigned char *)text + i);
                    if (!n)
                        return ccr_fail(CCR_ERR_FORMAT,
                                        "header string at byte %zu is not UTF-8 (byte 0x%02x at byte %zu)", at, b, i);
                    i += n - 1;
                    continue;
                }
                if (b < 0x20)
                    return ccr_fail(CCR_ERR_FORMAT, "header string at byte %zu holds a%s control character (0x%02x)",
                                    at, b ? "" : " NUL", b);
                if (b != '\\')
                    continue;
                if (i + 5 < len && text[i + 1] == 'u' && !memcmp(text + i + 2, "0000", 4))
                    return ccr_fail(CCR_ERR_FORMAT,
                                    "header string at byte %zu holds a NUL (\\u0000), which no name, dtype or "
                                    "metadata value may contain",
                                    at);
                i++; /* the escaped character */
            }
            size_t next = i + 1;
            while (next < len && json_space(text[next]))
                next++;
            if (depth > 0 && next < len && text[next] == ':')
                key[depth - 1] = (json_span){text + at + 1, i - at - 1};
        } else { /* number or literal: skip to the next structural character */
            size_t at = i;
            while (i + 1 < len && text[i + 1] && !json_space(text[i + 1]) && !strchr(",:[]{}\"", text[i + 1]))
                i++;
            if (depth == CCR_ST_MAX_DEPTH && kind[depth - 1] == '[') {
                ccr_status st = array_number(text + at, i + 1 - at, at, kind, key, elems[depth - 1] - 1);
                if (st != CCR_OK)
                    return st;
            }
        }
    }
    return CCR_OK;
}

static ccr_status parse_header(ccr_st_file *s, const char *text, size_t len) {
    ccr_status st = prescan_header(text, len);
    if (st != CCR_OK)
        return st;
    const char *end = NULL;
    errno = 0; /* malloc's ENOMEM: cJSON says only that it failed */
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root && errno == ENOMEM)
        return ccr_fail(CCR_ERR_OUT_OF_MEMORY, "out of host memory reading the %zu-byte header", len);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        size_t off = (at && at >= text && at <= text + len) ? (size_t)(at - text) : 0;
        return ccr_fail(CCR_ERR_FORMAT, "header is not valid JSON (error near byte %zu of %zu)", off, len);
    }
    /* the spec allows padding the header with whitespace, nothing else */
    size_t rest = end && end >= text && end <= text + len ? (size_t)(end - text) : len;
    while (rest < len && json_space(text[rest]))
        rest++;
    if (rest < len) {
        size_t at = end >= text && end <= text + len ? (size_t)(end - text) : 0;
        cJSON_Delete(root);
        return ccr_fail(CCR_ERR_FORMAT,
                        "header has %zu bytes after the JSON object (from byte %zu; only whitespace may pad it)",
                        len - at, at);
    }
    if (!cJSON_IsObject(root)) {
        st = ccr_fail(CCR_ERR_FORMAT, "header is JSON but not an object");
        goto done;
    }
    size_t n = 0;
    for (const cJSON *c = root->child; c; c = c->next)
        if (strcmp(c->string, "__metadata__") != 0)
            n++;
    s->t = calloc(n ? n : 1, sizeof *s->t);
    if (!s->t) {
        st = ccr_fail(CCR_ERR_OUT_OF_MEMORY, "out of host memory for %zu tensors", n);
        goto done;
    }
    int metadata = 0;
    for (const cJSON *c = root->child; c && st == CCR_OK; c = c->next) {
        if (!strcmp(c->string, "__metadata__")) {
            if (metadata++) {
                st = ccr_fail(CCR_ERR_FORMAT, "__metadata__ appears twice");
                break;
            }
            if (!cJSON_IsObject(c)) {
                st = ccr_fail(CCR_ERR_FORMAT, "__metadata__ is not a JSON object");
                break;
            }
            for (const cJSON *m = c->child; m; m = m->next) {
                if (!cJSON_IsString(m)) {
                    st = ccr_fail(CCR_ERR_FORMAT, "__metadata__ value '%s' is not a string", m->string);
                    break;
                }
                if (!strcmp(m->string, CCR_META_KEY)) {
                    if (s->arch_spec) {
                        st = ccr_fail(CCR_ERR_FORMAT, "__metadata__ key '%s' appears twice", CCR_META_KEY);
                        break;
                    }
                    s->arch_spec = strdup(m->valuestring);
                    if (!s->arch_spec)
                        st = ccr_fail(CCR_ERR_OUT_OF_MEMORY, "out of host memory");
                }
            }
            continue;
        }
        ccr_st_tensor *t = &s->t[s->n];
        t->name = strdup(c->string);
        if (!t->name) {
            st = ccr_fail(CCR_ERR_OUT_OF_MEMORY, "out of host memory");
            break;
        }
        s->n++;
        st = parse_tensor(c, t, s->data_size);
    }
    if (st == CCR_OK)
        st = check_layout(s);
done:
    cJSON_Delete(root);
    return st;
}

ccr_status ccr_st_open(FILE *f, const char *name, ccr_st_file *out) {
    memset(out, 0, sizeof *out);
    out->f = f;
    const char *label = name ? name : "stream";
    out->name = label;
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode))
        return ccr_fail(CCR_ERR_IO, "%s: is a directory, not a model file", label);
    if (fseeko(f, 0, SEEK_END) != 0)
        return ccr_fail(CCR_ERR_IO, "%s: cannot seek: %s", label, strerror(errno));
    off_t size = ftello(f);
    if (size < 0 || fseeko(f, 0, SEEK_SET) != 0)
        return ccr_fail(CCR_ERR_IO, "%s: cannot read its size: %s", label, strerror(errno));
    unsigned char lenbuf[8];
    if (size < 8)
        return ccr_fail(CCR_ERR_FORMAT,
                        "%s: truncated: %lld bytes, but a safetensors file starts with an 8-byte "
                        "header length",
                        label, (long long)size);
    if (fread(lenbuf, 1, 8, f) != 8) /* the size says the bytes are there: the read failed */
        return ccr_fail(CCR_ERR_IO, "%s: short read in the header length (%s)", label,
                        ferror(f) ? "read error" : "the stream ended before its size");
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | lenbuf[i];
    if (hlen == 0)
        return ccr_fail(CCR_ERR_FORMAT, "%s: header length is 0", label);
    if (hlen > CCR_ST_MAX_HEADER)
        return ccr_fail(CCR_ERR_FORMAT, "%s: header length %llu exceeds the cap of %llu bytes", label,
                        (unsigned long long)hlen, (unsigned long long)CCR_ST_MAX_HEADER);
    if (hlen > (uint64_t)size - 8)
        return ccr_fail(CCR_ERR_FORMAT, "%s: truncated: header length %llu but only %llu bytes follow", label,
                        (unsigned long long)hlen, (unsigned long long)((uint64_t)size - 8));
    if (hlen > (uint64_t)size - 8 - hlen + CCR_ST_HEADER_SLACK)
        return ccr_fail(CCR_ERR_FORMAT,
                        "%s: header length %llu is more than the data section (%llu bytes) + 1 MiB: no header "
                        "describing that data needs so much",
                        label, (unsigned long long)hlen, (unsigned long long)((uint64_t)size - 8 - hlen));
    out->data_start = 8 + hlen;
    out->data_size = (uint64_t)size - out->data_start;
    char *text = malloc((size_t)hlen + 1);
    if (!text)
        return ccr_fail(CCR_ERR_OUT_OF_MEMORY, "%s: no host memory for a %llu-byte header", label,
                        (unsigned long long)hlen);
    if (fread(text, 1, (size_t)hlen, f) != hlen) {
        free(text);
        return ccr_fail(CCR_ERR_IO, "%s: short read in the header", label);
    }
    text[hlen] = '\0';
    ccr_status st = parse_header(out, text, (size_t)hlen);
    free(text);
    if (st != CCR_OK) {
        ccr_st_close(out);
        return ccr_fail_prefix(st, "%s", label);
    }
    return CCR_OK;
}

void ccr_st_close(ccr_st_file *s) {
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        free(s->t[i].name);
    free(s->t);
    free(s->arch_spec);
    s->t = NULL;
    s->arch_spec = NULL;
    s->n = 0;
}

const ccr_st_tensor *ccr_st_find(const ccr_st_file *s, const char *name) {
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->t[i].name, name))
            return &s->t[i];
    return NULL;
}

static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    float v;
    if (exp == 0)
        v = ldexpf((float)man, -24); /* zero or subnormal */
    else if (exp == 31)
        v = man ? NAN : INFINITY;
    else
        v = ldexpf((float)(man | 0x400), (int)exp - 25);
    uint32_t bits;
    memcpy(&bits, &v, 4);
    bits |= sign;
    memcpy(&v, &bits, 4);
    return v;
}

ccr_status ccr_st_read_f32(ccr_st_file *s, const ccr_st_tensor *t, float *dst) {
    if (fseeko(s->f, (off_t)(s->data_start + t->begin), SEEK_SET) != 0)
        return ccr_fail(CCR_ERR_IO, "%s: tensor '%s': cannot seek: %s", s->name, t->name, strerror(errno));
    size_t es = dtype_size(t->dtype);
    if (t->dtype == CCR_F32) {
        if (fread(dst, 4, t->count, s->f) != t->count)
            return ccr_fail(CCR_ERR_IO, "%s: tensor '%s': short read (file changed?)", s->name, t->name);
        return CCR_OK;
    }
    unsigned char buf[1 << 16];
    size_t per = sizeof buf / es;
    for (size_t done = 0; done < t->count;) {
        size_t k = t->count - done < per ? t->count - done : per;
        if (fread(buf, es, k, s->f) != k)
            return ccr_fail(CCR_ERR_IO, "%s: tensor '%s': short read (file changed?)", s->name, t->name);
        for (size_t i = 0; i < k; i++) {
            const unsigned char *p = buf + i * es;
            if (t->dtype == CCR_F64) {
                double d;
                memcpy(&d, p, 8);
                dst[done + i] = (float)d;
            } else {
                uint16_t h = (uint16_t)(p[0] | (p[1] << 8));
                if (t->dtype == CCR_F16) {
                    dst[done + i] = half_to_float(h);
                } else {
                    uint32_t bits = (uint32_t)h << 16;
                    memcpy(&dst[done + i], &bits, 4);
                }
            }
        }
        done += k;
    }
    return CCR_OK;
}

/* ---- matching tensors to the layer list ----------------------------------- */

static int is_digit(char c) {
    return c >= '0' && c <= '9';
}

/* Natural order of a[0, na) and b[0, nb) (keys inside tensor names, compared
 * in place, any length): digit runs compare as numbers ("2" < "10"), so keys
 * that differ only in leading zeros compare equal (refused by the caller). */
static int natural_cmp(const char *a, size_t na, const char *b, size_t nb) {
    const char *ea = a + na, *eb = b + nb;
    while (a < ea && b < eb) {
        if (is_digit(*a) && is_digit(*b)) {
            while (a < ea && *a == '0')
                a++;
            while (b < eb && *b == '0')
                b++;
            size_t la = 0, lb = 0;
            while (a + la < ea && is_digit(a[la]))
                la++;
            while (b + lb < eb && is_digit(b[lb]))
                lb++;
            if (la != lb)
                return la < lb ? -1 : 1;
            int c = memcmp(a, b, la);
            if (c)
                return c;
            a += la;
            b += lb;
        } else {
            if (*a != *b)
                return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
            a++;
            b++;
        }
    }
    return a < ea ? 1 : b < eb ? -1 : 0;
}

typedef struct group {
    const char *key;
    size_t keylen;
    const ccr_st_tensor *w, *b;
} group;

static int group_cmp(const void *pa, const void *pb) {
    const group *a = pa, *b = pb;
    return natural_cmp(a->key, a->keylen, b->key, b->keylen);
}

static int ends_with(const char *s, size_t len, const char *suffix, size_t *keylen) {
    size_t n = strlen(suffix);
    if (len <= n || strcmp(s + len - n, suffix) != 0)
        return 0;
    *keylen = len - n;
    return 1;
}

ccr_status ccr_st_bind_mlp(const ccr_st_file *s, ccr_arch *arch, const ccr_st_tensor **w, const ccr_st_tensor **b) {
    if (!s->arch_spec)
        return ccr_fail(CCR_ERR_FORMAT,
                        "%s: no __metadata__ key '%s' giving the layer list (e.g. "
                        "\"mlp:64x64x10:relu:softmax\")",
                        s->name, CCR_META_KEY);
    ccr_status st = ccr_arch_parse(s->arch_spec, arch);
    if (st != CCR_OK)
        return ccr_fail_prefix(st, "%s: __metadata__ '%s'", s->name, CCR_META_KEY);
    group g[CCR_MAX_LAYERS + 1];
    size_t ng = 0;
    for (size_t i = 0; i < s->n; i++) {
        const ccr_st_tensor *t = &s->t[i];
        size_t len = strlen(t->name), kl;
        int is_bias;
        if (ends_with(t->name, len, ".weight", &kl))
            is_bias = 0;
        else if (ends_with(t->name, len, ".bias", &kl))
            is_bias = 1;
        else
            return ccr_fail(CCR_ERR_SHAPE, "%s: unexpected tensor '%s' (expected <layer>.weight and <layer>.bias)",
                            s->name, t->name);
        size_t k;
        for (k = 0; k < ng; k++)
            if (g[k].keylen == kl && !strncmp(g[k].key, t->name, kl))
                break;
        if (k == ng) {
            if (ng == arch->n_layers)
                return ccr_fail(CCR_ERR_SHAPE, "%s: more layers in the file than the %zu in '%s' (at '%s')", s->name,
                                arch->n_layers, s->arch_spec, t->name);
            g[ng].key = t->name;
            g[ng].keylen = kl;
            g[ng].w = g[ng].b = NULL;
            ng++;
        }
        if (is_bias)
            g[k].b = t;
        else
            g[k].w = t;
    }
    if (ng != arch->n_layers)
        return ccr_fail(CCR_ERR_SHAPE, "%s: file has %zu layers but '%s' lists %zu", s->name, ng, s->arch_spec,
                        arch->n_layers);
    /* two keys the natural order cannot tell apart ("1", "01"): qsort
     * would choose their order; named in the file's order. O(layers^2). */
    for (size_t i = 0; i < ng; i++)
        for (size_t j = i + 1; j < ng; j++)
            if (group_cmp(&g[i], &g[j]) == 0)
                return ccr_fail(CCR_ERR_FORMAT,
                                "%s: layer keys '%.*s' and '%.*s' differ only in leading zeros: their order is not "
                                "defined",
                                s->name, (int)g[i].keylen, g[i].key, (int)g[j].keylen, g[j].key);
    qsort(g, ng, sizeof g[0], group_cmp);
    for (size_t i = 0; i < ng; i++) {
        ccr_layer_desc *l = &arch->layers[i];
        char have[CCR_ST_MAX_DIMS * 22 + 3];
        if (!g[i].w)
            return ccr_fail(CCR_ERR_SHAPE, "%s: layer %zu ('%.*s') has a bias but no '%.*s.weight'", s->name, i,
                            (int)g[i].keylen, g[i].key, (int)g[i].keylen, g[i].key);
        if (g[i].w->ndim != 2 || g[i].w->shape[0] != l->out || g[i].w->shape[1] != l->in) {
            shape_text(g[i].w, have, sizeof have);
            return ccr_fail(CCR_ERR_SHAPE, "%s: tensor '%s' has shape %s but layer %zu of '%s' expects [%zu, %zu]",
                            s->name, g[i].w->name, have, i, s->arch_spec, l->out, l->in);
        }
        if (g[i].b && (g[i].b->ndim != 1 || g[i].b->shape[0] != l->out)) {
            shape_text(g[i].b, have, sizeof have);
            return ccr_fail(CCR_ERR_SHAPE, "%s: tensor '%s' has shape %s but layer %zu of '%s' expects [%zu]", s->name,
                            g[i].b->name, have, i, s->arch_spec, l->out);
        }
        l->has_bias = g[i].b != NULL;
        w[i] = g[i].w;
        b[i] = g[i].b;
    }
    return CCR_OK;
}

/* ---- writing ------------------------------------------------------------------ */

/* A number appended to a JSON array; false (nothing added) when cJSON's
 * allocation is refused. */
static bool add_number(cJSON *array, double v) {
    cJSON *x = cJSON_CreateNumber(v);
    if (x && cJSON_AddItemToArray(array, x))
        return true;
    cJSON_Delete(x);
    return false;
}

/* The header's JSON: the metadata, then per tensor its dtype, shape and
 * data offsets (*largest: the most floats in one tensor); NULL when any
 * of cJSON's allocations was refused, so that no header goes out with a
 * key, a tensor or a number missing. */
static cJSON *header_json(const char *meta_key, const char *meta_value, const ccr_st_out_tensor *t, size_t n,
                          size_t *largest) {
    cJSON *root = cJSON_CreateObject(), *meta = cJSON_AddObjectToObject(root, "__metadata__");
    bool ok = meta && cJSON_AddStringToObject(meta, meta_key, meta_value);
    size_t offset = 0;
    *largest = 0;
    for (size_t i = 0; ok && i < n; i++) {
        size_t count = t[i].ndim == 2 ? t[i].shape[0] * t[i].shape[1] : t[i].shape[0];
        cJSON *o = cJSON_AddObjectToObject(root, t[i].name);
        cJSON *sh = o && cJSON_AddStringToObject(o, "dtype", "F32") ? cJSON_AddArrayToObject(o, "shape") : NULL;
        ok = sh != NULL;
        for (size_t d = 0; ok && d < t[i].ndim; d++)
            ok = add_number(sh, (double)t[i].shape[d]);
        cJSON *off = ok ? cJSON_AddArrayToObject(o, "data_offsets") : NULL;
        ok = off && add_number(off, (double)offset);
        offset += count * sizeof(float);
        ok = ok && add_number(off, (double)offset);
        if (count > *largest)
            *largest = count;
    }
    if (ok)
        return root;
    cJSON_Delete(root);
    return NULL;
}

/* All n bytes of p to fd, on through short writes: 0, or errno. */
static int write_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n > 0) {
        ssize_t k = write(fd, c, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return k < 0 ? errno : EIO;
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

ccr_status ccr_st_write(const char *path, const char *meta_key, const char *meta_value, const ccr_st_out_tensor *t,
                        size_t n, ccr_st_get_fn get, void *user) {
    size_t largest;
    cJSON *root = header_json(meta_key, meta_value, t, n, &largest);
    if (!root)
        return ccr_fail(CCR_ERR_OUT_OF_MEMORY, "out of host memory building the header");
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!text)
        return ccr_fail(CCR_ERR_OUT_OF_MEMORY, "out of host memory printing the header");
    size_t hlen = strlen(text), padded = (hlen + 7) & ~(size_t)7; /* data starts 8-aligned */
    /* all the host memory first: a refusal leaves the file (maybe the model's
     * own) as it was. So the file is written through its descriptor, not a
     * FILE, whose malloc (inside fdopen) would come after the open had
     * truncated it. */
    float *buf = malloc((largest ? largest : 1) * sizeof(float));
    if (!buf) {
        free(text);
        return ccr_fail(CCR_ERR_OUT_OF_MEMORY, "out of host memory for a %zu-float tensor", largest);
    }
    int fd = ccai_open_nowait(path, CCAI_TRUNCATE); /* a FIFO nobody reads: refused, not waited for */
    if (fd < 0) {
        free(text);
        free(buf);
        return ccr_fail(CCR_ERR_IO, "%s: cannot create: %s", path, ccai_open_strerror(errno));
    }
    unsigned char lenbuf[8];
    for (int i = 0; i < 8; i++)
        lenbuf[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    static const char spaces[8] = "        ";
    int err = write_all(fd, lenbuf, 8);
    if (!err)
        err = write_all(fd, text, hlen);
    if (!err)
        err = write_all(fd, spaces, padded - hlen);
    free(text);
    ccr_status st = CCR_OK;
    for (size_t i = 0; i < n && !err && st == CCR_OK; i++) {
        size_t count = t[i].ndim == 2 ? t[i].shape[0] * t[i].shape[1] : t[i].shape[0];
        st = get(user, i, buf, count);
        if (st == CCR_OK)
            err = write_all(fd, buf, count * sizeof(float));
    }
    free(buf);
    if (close(fd) != 0 && !err)
        err = errno;
    if (st != CCR_OK)
        return ccr_fail_prefix(st, "%s", path);
    if (err)
        return ccr_fail(CCR_ERR_IO, "%s: write failed: %s", path, strerror(err));
    return CCR_OK;
}
