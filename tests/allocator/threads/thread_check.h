/*
 * thread_check.h — the checks of the plain threaded programs (threads_api,
 * tsan_shared), which run without Criterion (its runner cannot start under
 * ThreadSanitizer): CHECK(cond, fmt, ...) counts a failure in `failures`
 * and prints the first TC_MAX_PRINTED of them on stderr, each line whole
 * (flockfile) and prefixed with THREAD_CHECK_NAME, which the program
 * defines before including this. Any thread may fail at any time: the
 * count is atomic. The program exits non-zero when `failures` is not 0.
 */
#ifndef CCA_THREAD_CHECK_H
#define CCA_THREAD_CHECK_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>

#ifndef THREAD_CHECK_NAME
#error "define THREAD_CHECK_NAME (the program's name, for its failure lines) before including thread_check.h"
#endif

#define TC_MAX_PRINTED 20

static atomic_int failures;

static void fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (atomic_fetch_add(&failures, 1) < TC_MAX_PRINTED) {
        flockfile(stderr);
        fprintf(stderr, THREAD_CHECK_NAME ": ");
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        funlockfile(stderr);
    }
    va_end(ap);
}

#define CHECK(cond, ...)                                                                                               \
    do {                                                                                                               \
        if (!(cond))                                                                                                   \
            fail(__VA_ARGS__);                                                                                         \
    } while (0)

#endif /* CCA_THREAD_CHECK_H */
