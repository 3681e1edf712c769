/*
 * format.c — printf into a malloc'd string of the length it needs.
 *
 * Rules:
 * - Owns: ccrun_format and ccrun_vformat, the one way ccrun builds a string
 *   that may hold user text (paths, specs, --conf, notes); and
 *   ccrun_ends_with, how a file's kind is told from its name (--snapshot).
 * - ccrun never copies a user string into a fixed-size buffer: the result is
 *   as long as the text, never cut; the caller frees it.
 * - NULL when out of memory (or when the format fails); nothing else fails.
 * - Calls no other file of ccrun: report.c and output.c both build on it.
 * - Cost: two vsnprintf passes (measure, then write) and one malloc.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccrun.h"

char *ccrun_vformat(const char *fmt, va_list ap) {
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s)
        vsnprintf(s, (size_t)n + 1, fmt, again);
    va_end(again);
    return s;
}

char *ccrun_format(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = ccrun_vformat(fmt, ap);
    va_end(ap);
    return s;
}

int ccrun_ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n > k && strcmp(s + n - k, suffix) == 0;
}
