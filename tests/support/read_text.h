/*
 * read_text.h — a whole file as one NUL-terminated string, for the tests
 * that read committed files (docs, results, recordings). Asserts (fails the
 * test) when the file cannot be opened or read; the caller frees the text.
 */
#ifndef TU_READ_TEXT_H
#define TU_READ_TEXT_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

/* The bytes of `path` plus a '\0'; their count in *len unless len is NULL. */
static inline char *tu_read_text(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    cr_assert_geq(n, 0, "%s: cannot tell its size", path);
    char *buf = malloc((size_t)n + 1);
    cr_assert_not_null(buf, "%s: out of memory for %ld bytes", path, n);
    cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n, "%s: short read", path);
    buf[n] = '\0';
    fclose(f);
    if (len)
        *len = (size_t)n;
    return buf;
}

#endif /* TU_READ_TEXT_H */
