/*
 * test_docs.c — the option table in docs/allocator.md is the output of
 * cca_config_print(..., 2), so the docs cannot drift from config.c.
 */
#include <ccalloc.h>

#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

Test(docs, option_table_matches_config_table) {
    const char *src = getenv("CCA_SOURCE_DIR");
    cr_assert_not_null(src, "CCA_SOURCE_DIR is set by CTest");
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
 * passes when every table row in it is, verbatim, a line of that file: a
 * rerun of a benchmark that changes a figure fails here until the docs are
 * updated, so the docs never quote numbers the repository does not hold. */
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
                char *needle = malloc(len + 3);
                snprintf(needle, len + 3, "\n%.*s\n", (int)len, line);
                bool first_line = strncmp(results, line, len) == 0 && results[len] == '\n';
                cr_assert(first_line || strstr(results, needle), "%s: row not found verbatim in %s:\n%.*s", doc_name,
                          result_path, (int)len, line);
                free(needle);
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
    const char *src = getenv("CCA_SOURCE_DIR");
    cr_assert_not_null(src, "CCA_SOURCE_DIR is set by CTest");
    cr_assert_gt(check_rows_from(src, "benchmarks.md"), 30, "benchmarks.md quotes the micro, trace and switch tables");
    cr_assert_gt(check_rows_from(src, "kernels.md"), 10, "kernels.md quotes the CPU kernel table");
    cr_assert_gt(check_rows_from(src, "tuning.md"), 5, "tuning.md quotes rows of the trace table");
}
