/*
 * test_docs.c — the option table in docs/allocator.md is the output of
 * cca_config_print(..., 2), so the docs cannot drift from config.c.
 */
#include <ccalloc.h>

#include <criterion/criterion.h>
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
