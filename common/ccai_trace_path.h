/*
 * ccai_trace_path.h — the file a CCALLOC_TRACE value names, header-only.
 *
 * - `%p` is the process's id and `%%` one `%`; any other `%` is refused
 *   (the recorder then records nothing: a later expansion must not
 *   rename the file under the programs that use it).
 * - One expansion for the recorder (allocator/src/observe/trace.c), which
 *   opens the file, and for the programs that must not write over it
 *   (ccrun's and ccbench's checks of their outputs): all three name the
 *   same file, since each runs in the process whose id %p is.
 * - Cost: one pass over the value to size it, one to copy it, one malloc.
 */
#ifndef CCAI_TRACE_PATH_H
#define CCAI_TRACE_PATH_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* value with %p made this process's id and %% one '%' (malloc'd). NULL
 * with *bad set for any other '%', with *bad clear when host memory is
 * short. */
static inline char *ccai_trace_expand(const char *value, int *bad) {
    char pid[24];
    size_t pid_len = (size_t)snprintf(pid, sizeof pid, "%ld", (long)getpid()), n = 1;
    *bad = 0;
    for (const char *c = value; *c; c++) {
        if (*c == '%' && c[1] != 'p' && c[1] != '%') {
            *bad = 1;
            return NULL;
        }
        n += *c != '%' ? 1 : c[1] == 'p' ? pid_len : 1;
        c += *c == '%'; /* the sequence's second character */
    }
    char *out = (char *)malloc(n), *o = out;
    for (const char *c = value; out && *c; c++) {
        if (*c != '%')
            *o++ = *c;
        else if (*++c == 'p') {
            memcpy(o, pid, pid_len);
            o += pid_len;
        } else
            *o++ = '%';
    }
    if (out)
        *o = '\0';
    return out;
}

/* The file CCALLOC_TRACE names in this process (malloc'd); NULL when it
 * is unset or empty, names none (a refused '%'), or host memory is short. */
static inline char *ccai_trace_env_path(void) {
    const char *v = getenv("CCALLOC_TRACE");
    int bad;
    return v && *v ? ccai_trace_expand(v, &bad) : NULL;
}

#endif /* CCAI_TRACE_PATH_H */
