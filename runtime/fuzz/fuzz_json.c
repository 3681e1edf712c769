/*
 * fuzz_json.c — libFuzzer target for the writers that put text from outside
 * into a document another program parses: ccrun's --json document
 * (runtime/ccrun/report.c: model paths or specs, notes, the error message)
 * and the allocator's two snapshots, cca_write_snapshot_json (stats.c) and
 * cca_write_snapshot_torch (snapshot_torch.c), which carry a custom
 * upstream's name.
 *
 * The input, cut at its NUL bytes, gives the strings: the first is the
 * upstream's name and the ccrun row's model, the second the row's note, the
 * third the error (each the whole input when it holds no NUL). Each document
 * is parsed back with a real parser, cJSON for JSON, tests/support/pickle_read.c for
 * the pickle (it refuses what Python's pickle.load would), and every string
 * must come back as the writer promises, checked against a UTF-8 decoder
 * written here (RFC 3629: no overlongs, surrogates or code points past
 * U+10FFFF):
 *
 *   ccrun JSON   lossless: every well-formed character comes back as
 *                itself (written raw or as \uXXXX), every other byte as
 *                U+FFFD;
 *   snapshots    the name the upstream kept (its first 31 bytes, a
 *                character the cut would split dropped: cca_upstream_name),
 *                well-formed characters as themselves, every other byte
 *                as '?'.
 *
 * Build and run: scripts/fuzz.sh json [SECONDS] (clang, ASan + UBSan).
 */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccalloc.h"
#include "ccai_fuzz.h" /* common/: the input as a C string */
#include "ccrun.h"       /* runtime/ccrun: ccrun_json_document */
#include "pickle_read.h" /* tests/: the pickle's reader */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void die(const char *what, const char *got, const char *want) {
    fprintf(stderr, "fuzz_json: %s\n  got:  '%s'\n  want: '%s'\n", what, got ? got : "(null)", want ? want : "(null)");
    abort();
}

/* The length of the well-formed UTF-8 sequence at p, or 0 (RFC 3629's
 * table of well-formed byte sequences). */
static size_t utf8_ok(const unsigned char *p) {
    unsigned char c = p[0];
    if (c < 0x80)
        return 1;
    unsigned char lo = 0x80, hi = 0xbf;
    size_t n;
    if (c >= 0xc2 && c <= 0xdf)
        n = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        if (c == 0xe0)
            lo = 0xa0;
        if (c == 0xed)
            hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        if (c == 0xf0)
            lo = 0x90;
        if (c == 0xf4)
            hi = 0x8f;
    } else
        return 0;
    if (p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xbf)
            return 0;
    return n;
}

/* s with every byte that does not start a well-formed sequence replaced by
 * `bad` (malloc'd). */
static char *shown(const char *s, const char *bad) {
    size_t n = strlen(s), k = strlen(bad);
    char *out = malloc(n * (k > 1 ? k : 1) + 1), *o = out;
    if (!out)
        abort();
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        size_t len = utf8_ok(p);
        if (!len) {
            memcpy(o, bad, k);
            o += k;
            p++;
        } else {
            memcpy(o, p, len);
            o += len;
            p += len;
        }
    }
    *o = '\0';
    return out;
}

/* ---- ccrun's document ----------------------------------------------------- */

static void check_ccrun(const char *model, const char *note, const char *error) {
    char *doc = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&doc, &len);
    if (!f)
        abort();
    ccrun_row row = {.phase = "load", .model = (char *)model, .note = (char *)note};
    ccrun_report r = {.out = f, .json = 1, .n = 1, .cap = 1, .rows = &row};
    ccrun_json_document(&r, NULL, error, 0);
    fclose(f);
    cJSON *root = cJSON_ParseWithLength(doc, len);
    if (!root)
        die("ccrun's JSON document does not parse", doc, NULL);
    const cJSON *ph = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "phases"), 0);
    const char *got[3] = {cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ph, "model")),
                          cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ph, "note")),
                          cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "error"))};
    const char *in[3] = {model, note, error};
    for (int i = 0; i < 3; i++) {
        char *want = shown(in[i], "\xef\xbf\xbd");
        if (!got[i] || strcmp(got[i], want) != 0)
            die("a ccrun JSON string does not come back", got[i], want);
        free(want);
    }
    cJSON_Delete(root);
    free(doc);
}

/* ---- the allocator's snapshots --------------------------------------------- */

static cca_status up_alloc(void *ctx, size_t size, void **ptr) {
    (void)ctx;
    *ptr = aligned_alloc(CCA_GRANULARITY, size);
    return *ptr ? CCA_OK : CCA_ERR_OUT_OF_MEMORY;
}

static cca_status up_free(void *ctx, void *ptr, size_t size) {
    (void)ctx;
    (void)size;
    free(ptr);
    return CCA_OK;
}

static char *snapshot(const cca_allocator *a, int torch, size_t *len) {
    char *doc = NULL;
    FILE *f = open_memstream(&doc, len);
    if (!f)
        abort();
    cca_status st = torch ? cca_write_snapshot_torch(a, 0, f) : cca_write_snapshot_json(a, f);
    fclose(f);
    if (st != CCA_OK)
        die("a snapshot was not written", cca_last_error(), NULL);
    return doc;
}

static void check_snapshots(const char *name) {
    cca_upstream_ops ops = {.alloc = up_alloc, .free = up_free, .name = name};
    cca_upstream *u;
    cca_allocator *a;
    cca_config c;
    cca_config_default(&c);
    if (cca_upstream_custom_create(&ops, NULL, &u) != CCA_OK || cca_create(&c, u, &a) != CCA_OK)
        abort();
    void *p;
    if (cca_alloc(a, 1000, NULL, &p) != CCA_OK)
        abort();
    const char *kept = cca_upstream_name(u);
    if (strlen(kept) > 31 || strncmp(kept, name, strlen(kept)) != 0)
        die("the upstream kept a name that is not a prefix of 31 bytes at most", kept, name);
    char *want = shown(kept, "?");

    size_t len;
    char *doc = snapshot(a, 0, &len);
    cJSON *root = cJSON_ParseWithLength(doc, len);
    if (!root)
        die("the JSON snapshot does not parse", doc, NULL);
    const char *got = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "upstream"));
    if (!got || strcmp(got, want) != 0)
        die("the JSON snapshot's upstream name", got, want);
    cJSON_Delete(root);
    free(doc);

    doc = snapshot(a, 1, &len);
    char why[256];
    pr_value *v = pr_read((const unsigned char *)doc, len, why, sizeof why);
    if (!v)
        die("the pickle snapshot does not read", why, NULL);
    const pr_value *s = pr_get(pr_get(v, "ccalloc"), "upstream");
    if (!s || s->kind != PR_STR || strcmp(s->s, want) != 0)
        die("the pickle snapshot's upstream name", s && s->kind == PR_STR ? s->s : NULL, want);
    pr_free(v);
    free(doc);

    free(want);
    cca_free(a, p);
    cca_destroy(a);
    cca_upstream_destroy(u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = ccai_fuzz_cstring(data, size);
    if (!text)
        return 0;
    const char *s[3] = {text, text, text};
    size_t k = 1;
    for (size_t i = 0; i < size && k < 3; i++)
        if (!text[i])
            s[k++] = text + i + 1;
    check_ccrun(s[0], s[1], s[2]);
    check_snapshots(s[0]);
    free(text);
    return 0;
}
