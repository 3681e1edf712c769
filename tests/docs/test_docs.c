/*
 * test_docs.c — docs/ against allocator/src/support/config.c: the option table in docs/allocator.md is the output of
 * cca_config_print(..., 2), so the docs cannot drift from config.c, and its
 * range column is checked against what the parser accepts. Likewise the
 * invariants table is allocator/src/support/invariants.c's, row for row.
 */
#include "source_dir.h" /* tests/support */
#include <ccalloc.h>

#include <criterion/criterion.h>
#include <ctype.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "invariants.h" /* allocator/src/support: the invariants table, no allocator type */
#include "read_text.h"  /* tests/support */

static char *read_file(const char *path) {
    return tu_read_text(path, NULL);
}

Test(docs, option_table_matches_config_table) {
    const char *src = tu_source_dir();
    char path[4096];
    snprintf(path, sizeof path, "%s/docs/allocator.md", src);
    char *doc = read_file(path);

    char *table = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&table, &len);
    cca_config c;
    cca_config_default(&c);
    cr_assert_eq(cca_config_print(&c, mem, 2), CCA_OK);
    fclose(mem);
    cr_assert_gt(len, 100);
    cr_assert_not_null(strstr(doc, table), "docs/allocator.md must contain the option table verbatim:\n%s", table);
    free(table);
    free(doc);
}

/* Tables of measured figures in the docs are copies of committed result
 * files. A block
 *     <!-- rows-from: bench/results/.../file.md -->
 *     | ... | ... |
 *     <!-- end rows -->
 * passes when every table row in it is, verbatim, a line of that file, in a
 * table of that file whose header is the header the row has in the doc (a
 * row under another table's header would put its figures in the wrong
 * columns): a rerun of a benchmark that changes a figure fails here until
 * the docs are updated, so the docs never quote numbers the repository does
 * not hold. */

/* The first line of the table (the run of lines starting with '|') that
 * holds the line at `line` of `text`; its length in *len. */
static const char *table_header(const char *text, const char *line, size_t *len) {
    while (line > text) {
        const char *prev = line - 1; /* the '\n' ending the line before */
        while (prev > text && prev[-1] != '\n')
            prev--;
        if (prev[0] != '|')
            break;
        line = prev;
    }
    *len = strcspn(line, "\n");
    return line;
}

/* Whether `row` (len bytes) is a whole line of `results` under a table
 * header equal to `header` (hlen bytes). */
static bool row_under_header(const char *results, const char *row, size_t len, const char *header, size_t hlen) {
    for (const char *q = strstr(results, row); q; q = strstr(q + 1, row)) {
        bool line_start = q == results || q[-1] == '\n';
        if (!line_start || (q[len] != '\n' && q[len] != '\0'))
            continue;
        size_t qlen;
        const char *qh = table_header(results, q, &qlen);
        if (qlen == hlen && strncmp(qh, header, hlen) == 0)
            return true;
    }
    return false;
}

static size_t check_rows_from(const char *src, const char *doc_name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/docs/%s", src, doc_name);
    char *doc = read_file(path);
    size_t checked = 0;
    const char *marker = "<!-- rows-from: ";
    for (const char *p = strstr(doc, marker); p; p = strstr(p, marker)) {
        p += strlen(marker);
        const char *name_end = strstr(p, " -->");
        cr_assert_not_null(name_end, "%s: unterminated rows-from marker", doc_name);
        char result_path[4096];
        snprintf(result_path, sizeof result_path, "%s/%.*s", src, (int)(name_end - p), p);
        char *results = read_file(result_path);
        const char *block_end = strstr(name_end, "<!-- end rows -->");
        cr_assert_not_null(block_end, "%s: rows-from block without <!-- end rows -->", doc_name);
        const char *line = strchr(name_end, '\n') + 1;
        while (line < block_end) {
            const char *eol = strchr(line, '\n');
            size_t len = (size_t)(eol - line);
            if (len > 0 && line[0] == '|') {
                char *row = malloc(len + 1);
                cr_assert_not_null(row);
                memcpy(row, line, len);
                row[len] = '\0';
                size_t hlen;
                const char *header = table_header(doc, line, &hlen);
                cr_assert(row_under_header(results, row, len, header, hlen),
                          "%s: row not found verbatim, under the header it has in the doc, in %s:\n%.*s\nheader: "
                          "%.*s",
                          doc_name, result_path, (int)len, line, (int)hlen, header);
                free(row);
                checked++;
            }
            line = eol + 1;
        }
        free(results);
        p = block_end;
    }
    free(doc);
    return checked;
}

Test(docs, measured_tables_are_verbatim_rows_of_committed_results) {
    const char *src = tu_source_dir();
    cr_assert_gt(check_rows_from(src, "benchmarks.md"), 30, "benchmarks.md quotes the micro, trace and switch tables");
    cr_assert_gt(check_rows_from(src, "kernels.md"), 10, "kernels.md quotes the CPU kernel table");
    cr_assert_gt(check_rows_from(src, "tuning.md"), 5, "tuning.md quotes rows of the trace table");
    cr_assert_gt(check_rows_from(src, "python.md"), 5, "python.md quotes the wheel's size and times");
    cr_assert_gt(check_rows_from(src, "allocator-measurements.md"), 20,
                 "allocator-measurements.md quotes the expandable-segment and whole-maps tables");
}

/* The range column of docs/allocator.md is what the parser enforces: for
 * every row, each end of the range is accepted by cca_config_parse as far as
 * that key's own range goes (a rule across options, such as small_max <=
 * small_segment, may still refuse it), and the value just outside each end
 * is refused as out of range. With option_table_matches_config_table (the
 * table is generated from config.c's table), the column can drift neither
 * from the code's bounds nor from what the code does with them. */
static bool out_of_range(const char *key, const char *value) {
    char text[256];
    snprintf(text, sizeof text, "%s:%s", key, value);
    cca_config c;
    cca_config_default(&c);
    if (cca_config_parse(&c, text) == CCA_OK)
        return false;
    char expect_range[128], expect_value[128];
    snprintf(expect_range, sizeof expect_range, "out-of-range value for key '%s'", key);
    snprintf(expect_value, sizeof expect_value, "invalid value '%s' for key '%s'", value, key);
    return strstr(cca_last_error(), expect_range) || strstr(cca_last_error(), expect_value);
}

static void check_size_range(const char *key, const char *range) {
    char lo[64], hi[64];
    cr_assert_eq(sscanf(range, "[%63[^,], %63[^]]]", lo, hi), 2, "%s: range '%s'", key, range);
    if (strcmp(hi, "SIZE_MAX") == 0)
        snprintf(hi, sizeof hi, "%zu", SIZE_MAX);
    size_t lo_v, hi_v;
    cr_assert_eq(cca_parse_size(lo, &lo_v), CCA_OK, "%s: %s", key, cca_last_error());
    cr_assert_eq(cca_parse_size(hi, &hi_v), CCA_OK, "%s: %s", key, cca_last_error());
    char v[64];
    cr_assert(!out_of_range(key, lo), "%s: %s is in %s: %s", key, lo, range, cca_last_error());
    cr_assert(!out_of_range(key, hi), "%s: %s is in %s: %s", key, hi, range, cca_last_error());
    if (lo_v > 0) {
        snprintf(v, sizeof v, "%zu", lo_v - 1);
        cr_assert(out_of_range(key, v), "%s: %s is below %s", key, v, range);
    }
    snprintf(v, sizeof v, "%zu", hi_v + 1); /* SIZE_MAX + 1 wraps to 0: */
    if (hi_v == SIZE_MAX)                   /* write 2^64 itself        */
        snprintf(v, sizeof v, "18446744073709551616");
    cr_assert(out_of_range(key, v), "%s: %s is above %s", key, v, range);
}

static void check_fraction_range(const char *key, const char *range) {
    double lo, hi;
    cr_assert_eq(sscanf(range, "(%lf, %lf]", &lo, &hi), 2, "%s: range '%s'", key, range);
    char v[64];
    snprintf(v, sizeof v, "%.17g", lo);
    cr_assert(out_of_range(key, v), "%s: %s is not in %s", key, v, range);
    snprintf(v, sizeof v, "%.17g", nextafter(lo, hi));
    cr_assert(!out_of_range(key, v), "%s: %s is in %s: %s", key, v, range, cca_last_error());
    snprintf(v, sizeof v, "%.17g", hi);
    cr_assert(!out_of_range(key, v), "%s: %s is in %s: %s", key, v, range, cca_last_error());
    snprintf(v, sizeof v, "%.17g", nextafter(hi, 2 * hi + 1));
    cr_assert(out_of_range(key, v), "%s: %s is not in %s", key, v, range);
}

/* "growth, greedy", "0, 1": each word is accepted, another is not. */
static void check_list_range(const char *key, const char *range) {
    char words[128];
    snprintf(words, sizeof words, "%s", range);
    for (char *w = strtok(words, ", "); w; w = strtok(NULL, ", "))
        cr_assert(!out_of_range(key, w), "%s: %s is in %s: %s", key, w, range, cca_last_error());
    cr_assert(out_of_range(key, "2"), "%s: 2 is not in %s", key, range);
}

Test(docs, option_table_range_column_is_what_the_parser_enforces) {
    const char *src = tu_source_dir();
    char path[4096];
    snprintf(path, sizeof path, "%s/docs/allocator.md", src);
    char *doc = read_file(path);
    const char *header = "| option | default | range | meaning |\n|---|---|---|---|\n";
    const char *row = strstr(doc, header);
    cr_assert_not_null(row, "docs/allocator.md: no option table with a range column");
    row += strlen(header);
    int rows = 0;
    for (; *row == '|'; row = strchr(row, '\n') + 1, rows++) {
        char key[64], def[64], range[128];
        cr_assert_eq(sscanf(row, "| `%63[^`]` | `%63[^`]` | `%127[^`]` |", key, def, range), 3, "row: %.80s", row);
        if (range[0] == '[')
            check_size_range(key, range);
        else if (range[0] == '(')
            check_fraction_range(key, range);
        else
            check_list_range(key, range);
    }
    /* one row per option: as many as cca_config_print(c, f, 0) has lines */
    char *lines = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&lines, &len);
    cca_config c;
    cca_config_default(&c);
    cr_assert_eq(cca_config_print(&c, mem, 0), CCA_OK);
    fclose(mem);
    int options = 0;
    for (const char *p = lines; *p; p++)
        options += *p == '\n';
    cr_assert_eq(rows, options, "%d rows in the docs, %d options in config.c", rows, options);
    free(lines);
    free(doc);
}

/* ---- statements of the docs held by the code they describe ------------- */

static char *read_source(const char *rel) {
    const char *src = tu_source_dir();
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", src, rel);
    return read_file(path);
}

/* The text from `start` (which must occur in `text`) to the next `end`. */
static char *between(const char *text, const char *start, const char *end, const char *what) {
    const char *p = strstr(text, start);
    cr_assert_not_null(p, "%s: '%s' not found", what, start);
    const char *q = strstr(p, end);
    cr_assert_not_null(q, "%s: no '%s' after '%s'", what, end, start);
    size_t n = (size_t)(q - p);
    char *out = malloc(n + 1);
    cr_assert_not_null(out);
    memcpy(out, p, n);
    out[n] = '\0';
    return out;
}

/* docs/tuning.md says alloc_retries counts retries as they begin, before
 * anything is released: a refusal with nothing cached counts one and
 * releases nothing, and so does cca_domain_reserve's. */
Test(docs, alloc_retries_is_what_tuning_md_says) {
    char *doc = read_source("docs/tuning.md");
    cr_assert_not_null(
        strstr(doc, "is counted when its\n  retry starts, before it completes pending frees or releases anything"),
        "docs/tuning.md: the alloc_retries bullet changed; keep this test with it");
    free(doc);
    const size_t MiB = (size_t)1 << 20;
    cca_upstream *u;
    cr_assert_eq(cca_upstream_host_create(64 * MiB, &u), CCA_OK);
    cca_config c;
    cca_config_default(&c);
    cr_assert_eq(cca_config_parse(&c, "log_oom:0"), CCA_OK);
    cca_allocator *a;
    cr_assert_eq(cca_create(&c, u, &a), CCA_OK, "%s", cca_last_error());
    void *live, *p;
    cr_assert_eq(cca_alloc(a, 40 * MiB, NULL, &live), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_alloc(a, 40 * MiB, NULL, &p), CCA_ERR_OUT_OF_MEMORY, "40 MiB more on a 64 MiB device");
    cca_stats s;
    cca_get_stats(a, &s);
    cr_assert_eq(s.alloc_retries, 1, "the retry is counted though nothing is cached");
    cr_assert_eq(s.upstream_frees, 0, "nothing was released");
    cca_domain *d;
    cr_assert_eq(cca_domain_create(a, "model", &d), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_domain_reserve(a, d, 40 * MiB), CCA_ERR_OUT_OF_MEMORY);
    cca_get_stats(a, &s);
    cr_assert_eq(s.alloc_retries, 2, "cca_domain_reserve's retry counts too");
    cr_assert_eq(s.upstream_frees, 0, "nothing was released");
    cr_assert_eq(cca_free(a, live), CCA_OK);
    cca_destroy(a);
    cca_upstream_destroy(u);
}

/* docs/tuning.md's table "What the release report tells you" names every
 * field of cca_release_report (ccalloc.h). */
Test(docs, release_report_table_names_every_field) {
    char *header = read_source("allocator/include/ccalloc.h");
    char *fields = between(header, "typedef struct cca_release_report {", "} cca_release_report;", "ccalloc.h");
    char *doc = read_source("docs/tuning.md");
    char *table = between(doc, "What the release report tells you:", "\n\n###", "docs/tuning.md");
    int n = 0;
    for (const char *p = strstr(fields, "size_t "); p; p = strstr(p, "size_t ")) {
        p += strlen("size_t ");
        char name[64], quoted[72];
        cr_assert_eq(sscanf(p, "%63[a-z_]", name), 1);
        snprintf(quoted, sizeof quoted, "`%s`", name);
        cr_assert_not_null(strstr(table, quoted), "docs/tuning.md's release report table lacks %s", quoted);
        n++;
    }
    cr_assert_geq(n, 10, "only %d fields read from cca_release_report", n);
    free(table);
    free(doc);
    free(fields);
    free(header);
}

/* ccalloc.h's opening comment lists, under "Return values", every public
 * function that returns something other than a cca_status: each such
 * declaration of the header is named there. */
Test(docs, header_lists_every_function_that_returns_no_status) {
    char *header = read_source("allocator/include/ccalloc.h");
    char *list = between(header, "The exceptions:", "Errors every function shares", "ccalloc.h");
    int n = 0;
    for (const char *line = header; line; line = strchr(line, '\n')) {
        line += *line == '\n';
        /* a declaration at column 0 (comments, fields and macros are not) */
        if (!islower((unsigned char)*line) || strncmp(line, "cca_status ", 11) == 0 || strncmp(line, "typedef", 7) == 0)
            continue;
        const char *open = strchr(line, '('), *end = strchr(line, '\n');
        if (!open || (end && open > end))
            continue;
        const char *name = open;
        while (name > line && (isalnum((unsigned char)name[-1]) || name[-1] == '_'))
            name--;
        if (strncmp(name, "cca_", 4) != 0)
            continue;
        char quoted[80];
        snprintf(quoted, sizeof quoted, "%.*s", (int)(open - name), name);
        size_t k = strlen(quoted);
        bool named = false;
        for (const char *p = strstr(list, quoted); p && !named; p = strstr(p + 1, quoted))
            named = !isalnum((unsigned char)p[k]) && p[k] != '_';
        cr_assert(named, "ccalloc.h: %s returns no cca_status but is not among \"The exceptions\"", quoted);
        n++;
    }
    cr_assert_geq(n, 10, "only %d such functions read from ccalloc.h", n);
    free(list);
    free(header);
}

/* docs/release.md's steps of ccr_engine_release name every call it makes
 * (runtime/src/engine.c), save those that only compose messages. */
Test(docs, release_md_steps_name_every_call_of_ccr_engine_release) {
    char *code = read_source("runtime/src/engine.c");
    char *body = between(code, "ccr_status ccr_engine_release(ccr_engine *e", "\n}\n", "runtime/src/engine.c");
    char *doc = read_source("docs/release.md");
    char *steps = between(doc, "ccr_engine_release(e, &info)\n", "```", "docs/release.md");
    static const char *messages[] = {"ccr_fail",           "ccr_warn",          "ccr_engine_mark",  "ccr_status_of",
                                     "ccr_last_error",     "cca_status_string", "cca_last_error",   "cck_status_string",
                                     "ccr_engine_release", "ccr_error_keep",    "ccr_error_restore"};
    int calls = 0;
    for (const char *p = body; *p; p++) {
        if ((p != body && (p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z'))) || strncmp(p, "cc", 2) != 0)
            continue;
        char name[64];
        int len = 0;
        if (sscanf(p, "%63[a-z_]%n", name, &len) != 1 || p[len] != '(' || name[3] != '_')
            continue;
        bool message = false;
        for (size_t i = 0; i < sizeof messages / sizeof *messages; i++)
            message |= strcmp(name, messages[i]) == 0;
        if (!message) {
            cr_assert_not_null(strstr(steps, name), "docs/release.md's steps leave out %s", name);
            calls++;
        }
        p += len;
    }
    cr_assert_geq(calls, 5, "only %d calls read from ccr_engine_release", calls);
    free(steps);
    free(doc);
    free(body);
    free(code);
}

/* ---- the invariants table ------------------------------------------------ */

/* docs/allocator.md's invariants table is the code's (invariants.h), row for
 * row: the rule is equality. Its rows, in order, are exactly
 * ccai_invariant_row_md(1) ... ccai_invariant_row_md(CCAI_INV_COUNT - 1), so
 * the docs list the same ids, each once, with the same statement, scope and
 * place of check; a row added on either side alone fails here. */
Test(docs, invariants_table_is_the_code_table) {
    char *doc = read_source("docs/allocator.md");
    const char *section = strstr(doc, "\n### Invariants\n");
    cr_assert_not_null(section, "docs/allocator.md: no section Invariants");
    const char *header = "| id | statement | applies to | checked in |\n|---|---|---|---|\n";
    const char *row = strstr(section, header);
    cr_assert_not_null(row, "docs/allocator.md: no invariants table under Invariants");
    row += strlen(header);
    int id = 1;
    for (; *row == '|'; id++) {
        size_t len = strcspn(row, "\n");
        cr_assert_lt(id, CCAI_INV_COUNT, "docs row without an invariant in invariants.c: %.*s", (int)len, row);
        char want[2048];
        ccai_invariant_row_md((ccai_invariant)id, want, sizeof want);
        cr_assert(strlen(want) == len && !strncmp(row, want, len),
                  "docs/allocator.md's row for I%d differs from invariants.c's:\n  docs: %.*s\n  code: %s", id,
                  (int)len, row, want);
        row += len + (row[len] == '\n');
    }
    cr_assert_eq(id, CCAI_INV_COUNT, "docs/allocator.md lists I1..I%d; invariants.c has I1..I%d", id - 1,
                 CCAI_INV_COUNT - 1);
    /* no invariant stated as a row ("| I<digit>") anywhere else in the docs */
    for (const char *p = strstr(doc, "\n| I"); p; p = strstr(p + 1, "\n| I"))
        cr_assert(!isdigit((unsigned char)p[4]) || (p >= section && p < row),
                  "an invariant row outside the table: %.60s", p + 1);
    free(doc);
}

/* Whether `text` defines or calls function `name`: "name(" after a
 * character that cannot be part of an identifier. */
static bool names_function(const char *text, const char *name) {
    size_t n = strlen(name);
    for (const char *p = strstr(text, name); p; p = strstr(p + 1, name))
        if ((p == text || !(isalnum((unsigned char)p[-1]) || p[-1] == '_')) && p[n] == '(')
            return true;
    return false;
}

/* The "checked in" column names files (relative to allocator/src) that
 * exist and functions each of those files holds: a check moved or renamed
 * fails here until its row follows. */
Test(docs, invariants_are_checked_where_the_table_says) {
    for (int id = 1; id < CCAI_INV_COUNT; id++) {
        const ccai_invariant_row *r = &ccai_invariants[id];
        cr_assert(r->statement && *r->statement && r->applies_to && *r->applies_to && r->checked_in,
                  "I%d has no row in invariants.c", id);
        char where[512];
        snprintf(where, sizeof where, "%s", r->checked_in);
        char *files[4];
        int nfiles = 0, nfunctions = 0;
        char *tokens[16]; /* the texts between pairs of backticks */
        int ntokens = 0;
        for (char *open = strchr(where, '`'), *close; open && ntokens < 16; open = strchr(close + 1, '`')) {
            close = strchr(open + 1, '`');
            cr_assert_not_null(close, "I%d: unpaired backtick in \"%s\"", id, r->checked_in);
            *close = '\0';
            tokens[ntokens++] = open + 1;
        }
        for (int i = 0; i < ntokens; i++) {
            if (!strstr(tokens[i], ".c"))
                continue;
            char rel[600];
            snprintf(rel, sizeof rel, "allocator/src/%s", tokens[i]);
            cr_assert_lt(nfiles, 4);
            files[nfiles++] = read_source(rel); /* fails when the file is not there */
        }
        cr_assert_gt(nfiles, 0, "I%d: no file in \"%s\"", id, r->checked_in);
        for (int i = 0; i < ntokens; i++) {
            if (strstr(tokens[i], ".c"))
                continue;
            bool found = false;
            for (int f = 0; f < nfiles && !found; f++)
                found = names_function(files[f], tokens[i]);
            cr_assert(found, "I%d: no function %s in the files of \"%s\"", id, tokens[i], r->checked_in);
            nfunctions++;
        }
        cr_assert_gt(nfunctions, 0, "I%d: no function in \"%s\"", id, r->checked_in);
        for (int f = 0; f < nfiles; f++)
            free(files[f]);
    }
}
