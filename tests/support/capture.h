/*
 * capture.h — what a call writes on a file descriptor (standard output,
 * standard error), kept for the test to read, for the suites that check a
 * command's messages by calling its code in the test process.
 *
 * - tu_capture_begin(&c, fd): fd goes to a temporary file until
 *   tu_capture_end(&c), which puts fd back and returns the text written
 *   (NUL-terminated, the caller frees it).
 * - tu_capture_std_begin / _end: standard output and error together.
 * - Both flush every stdio stream first, so that nothing buffered before
 *   or during the call lands on the wrong side.
 * - Asserts (fails the test) when the file cannot be made or read.
 */
#ifndef TU_CAPTURE_H
#define TU_CAPTURE_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct tu_capture {
    int fd, saved;
    FILE *tmp;
} tu_capture;

static inline void tu_capture_begin(tu_capture *c, int fd) {
    fflush(NULL);
    c->fd = fd;
    c->tmp = tmpfile();
    cr_assert_not_null(c->tmp, "capture: no temporary file");
    c->saved = dup(fd);
    cr_assert_geq(c->saved, 0, "capture: dup(%d)", fd);
    cr_assert_geq(dup2(fileno(c->tmp), fd), 0, "capture: dup2 onto %d", fd);
}

static inline char *tu_capture_end(tu_capture *c) {
    fflush(NULL);
    cr_assert_geq(dup2(c->saved, c->fd), 0, "capture: dup2 back onto %d", c->fd);
    close(c->saved);
    off_t n = lseek(fileno(c->tmp), 0, SEEK_END); /* written through fd: the FILE never saw it */
    cr_assert_geq(n, 0, "capture: lseek");
    char *text = malloc((size_t)n + 1);
    cr_assert_not_null(text);
    rewind(c->tmp);
    cr_assert_eq(fread(text, 1, (size_t)n, c->tmp), (size_t)n, "capture: short read");
    text[n] = '\0';
    fclose(c->tmp);
    return text;
}

typedef struct tu_capture_std {
    tu_capture out, err;
} tu_capture_std;

static inline void tu_capture_std_begin(tu_capture_std *c) {
    tu_capture_begin(&c->out, STDOUT_FILENO);
    tu_capture_begin(&c->err, STDERR_FILENO);
}

/* *out and *err: what was written on each (the caller frees both). */
static inline void tu_capture_std_end(tu_capture_std *c, char **out, char **err) {
    *err = tu_capture_end(&c->err);
    *out = tu_capture_end(&c->out);
}

#endif /* TU_CAPTURE_H */
