/*
 * debug.c — a failed internal check (ccai_assert, debug.h; the invariant
 * walk, check.h): the condition, file and line on stderr, then abort. A
 * failed check is a bug in ccalloc, never a caller's error.
 */
#include "debug.h"

#include <stdio.h>
#include <stdlib.h>

void ccai_assert_fail(const char *cond, const char *file, int line) {
    fprintf(stderr, "ccalloc: internal check failed: %s (%s:%d)\n", cond, file, line);
    fflush(stderr);
    abort();
}
