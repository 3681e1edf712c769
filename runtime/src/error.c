/*
 * error.c — status names, the per-thread last-error message, size parsing.
 *
 * Every failing runtime call writes one message naming what was wrong (the
 * file and byte offset, the tensor, the option) into a thread-local buffer
 * and returns a ccr_status; callers print ccr_last_error(). Layers of the
 * runtime add context with ccr_fail_prefix ("digits.safetensors: tensor
 * '0.weight': ..."), like errno + a message, never by exiting. This follows
 * ccalloc's own cca_last_error().
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static _Thread_local char last_error[1024];

const char *ccr_status_string(ccr_status s) {
    switch (s) {
    case CCR_OK: return "CCR_OK";
    case CCR_ERR_INVALID_ARGUMENT: return "CCR_ERR_INVALID_ARGUMENT";
    case CCR_ERR_IO: return "CCR_ERR_IO";
    case CCR_ERR_FORMAT: return "CCR_ERR_FORMAT";
    case CCR_ERR_SPEC: return "CCR_ERR_SPEC";
    case CCR_ERR_SHAPE: return "CCR_ERR_SHAPE";
    case CCR_ERR_DTYPE: return "CCR_ERR_DTYPE";
    case CCR_ERR_OUT_OF_MEMORY: return "CCR_ERR_OUT_OF_MEMORY";
    case CCR_ERR_DEVICE: return "CCR_ERR_DEVICE";
    case CCR_ERR_KERNEL: return "CCR_ERR_KERNEL";
    case CCR_ERR_ALLOCATOR: return "CCR_ERR_ALLOCATOR";
    }
    return "CCR_ERR_UNKNOWN";
}

const char *ccr_last_error(void) {
    return last_error;
}

void ccr_clear_error(void) {
    last_error[0] = '\0';
}

ccr_status ccr_fail(ccr_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return s;
}

ccr_status ccr_fail_prefix(ccr_status s, const char *fmt, ...) {
    char prefix[512], old[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, last_error, sizeof old);
    size_t pl = strlen(prefix), ol = strlen(old);
    if (pl > sizeof last_error - 3)
        pl = sizeof last_error - 3;
    if (ol > sizeof last_error - 3 - pl)
        ol = sizeof last_error - 3 - pl;
    memcpy(last_error, prefix, pl);
    memcpy(last_error + pl, ": ", 2);
    memcpy(last_error + pl + 2, old, ol);
    last_error[pl + 2 + ol] = '\0';
    return s;
}

int ccr_mul_ok(size_t a, size_t b, size_t *out) {
    if (a != 0 && b > SIZE_MAX / a)
        return 0;
    *out = a * b;
    return 1;
}

ccr_status ccr_parse_size(const char *text, size_t *out) {
    if (!text || !out || !*text)
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "empty size");
    if (cca_parse_size(text, out) != CCA_OK)
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "%s", cca_last_error());
    return CCR_OK;
}
