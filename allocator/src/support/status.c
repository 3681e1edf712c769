/*
 * status.c — status names and the per-thread last-error message (the log
 * is log.c; sizes as text, size.c).
 *
 * - Every failing public call goes through cca_set_error(), which formats
 *   into a thread-local buffer and returns the status:
 *   `return cca_set_error(CCA_ERR_CONFIG, "unknown key '%s'", key);`.
 * - The buffer is public (cca_set_error / cca_error_prefix /
 *   cca_clear_error), so layers above (the runtime's ccr_fail) keep one
 *   message per thread, not one per library.
 * - Nothing here allocates: the buffer is fixed (CCAI_ERROR_CAP, 1024
 *   bytes); a longer message is cut and ends in "...", never silently.
 */
#include "debug.h"
#include "status.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

/* The one per-thread message of the process: the allocator, the runtime
 * (ccr_fail and ccr_last_error are wrappers over this) and custom upstreams
 * (cca_set_error) all write here. */
static _Thread_local char last_error[CCAI_ERROR_CAP];


const char *cca_status_string(cca_status s) {
    switch (s) {
    case CCA_OK: return "CCA_OK: success";
    case CCA_ERR_INVALID_ARGUMENT: return "CCA_ERR_INVALID_ARGUMENT: invalid argument";
    case CCA_ERR_OUT_OF_MEMORY: return "CCA_ERR_OUT_OF_MEMORY: out of device memory";
    case CCA_ERR_INVALID_POINTER: return "CCA_ERR_INVALID_POINTER: not a live block of this allocator";
    case CCA_ERR_UPSTREAM: return "CCA_ERR_UPSTREAM: the upstream failed";
    case CCA_ERR_NO_DEVICE: return "CCA_ERR_NO_DEVICE: no GPU available";
    case CCA_ERR_CONFIG: return "CCA_ERR_CONFIG: bad configuration";
    case CCA_ERR_NOT_READY: return "CCA_ERR_NOT_READY: event not complete";
    case CCA_ERR_LIVE_BLOCKS: return "CCA_ERR_LIVE_BLOCKS: blocks were still live";
    case CCA_ERR_IO: return "CCA_ERR_IO: write failed";
    case CCA_ERR_INVARIANT: return "CCA_ERR_INVARIANT: an internal invariant is broken";
    case CCA_ERR_ASLEEP: return "CCA_ERR_ASLEEP: the domain is asleep (wake it first)";
    }
    return "unknown cca_status";
}

const char *cca_last_error(void) {
    return last_error;
}

/* A message cut to fit ends in "...", so a reader knows it is not whole. */
void ccai_mark_cut(char *message, size_t size) {
    memcpy(message + size - 4, "...", 4);
}

/* Format into `message` (the size of last_error); returns its length. A
 * message that does not fit is cut and marked. */
static size_t format(char *message, const char *fmt, va_list ap) {
    int n = vsnprintf(message, sizeof last_error, fmt, ap);
    if (n < 0) { /* an encoding error: nothing reliable was written */
        memcpy(message, "...", 4);
        return 3;
    }
    if ((size_t)n >= sizeof last_error) {
        ccai_mark_cut(message, sizeof last_error);
        return sizeof last_error - 1;
    }
    return (size_t)n;
}

cca_status cca_vset_error(cca_status s, const char *fmt, va_list ap) {
    /* format into a local buffer first: callers may pass cca_last_error() as
     * an argument to wrap the previous message */
    char message[sizeof last_error];
    size_t len = format(message, fmt, ap);
    memcpy(last_error, message, len + 1);
    return s;
}

/* Every failure of the library, and of custom upstreams and other layers:
 * the message set, the status returned (`return cca_set_error(...)`). */
cca_status cca_set_error(cca_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cca_vset_error(s, fmt, ap);
    va_end(ap);
    return s;
}

cca_status cca_verror_prefix(cca_status s, const char *fmt, va_list ap) {
    char message[sizeof last_error];
    size_t used = format(message, fmt, ap);
    /* then ": " and the old message; what does not fit is the old message's
     * end, and the cut is marked */
    const char *parts[] = {": ", last_error};
    for (int i = 0; i < 2; i++) {
        size_t n = strlen(parts[i]), room = sizeof message - 1 - used;
        if (n > room) {
            memcpy(message + used, parts[i], room);
            used = sizeof message - 1;
            message[used] = '\0';
            ccai_mark_cut(message, sizeof message);
            break;
        }
        memcpy(message + used, parts[i], n);
        used += n;
        message[used] = '\0';
    }
    memcpy(last_error, message, used + 1);
    return s;
}

cca_status cca_error_prefix(cca_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cca_verror_prefix(s, fmt, ap);
    va_end(ap);
    return s;
}

void ccai_error_save(char saved[CCAI_ERROR_CAP]) {
    memcpy(saved, last_error, strlen(last_error) + 1);
}

void ccai_error_restore(const char saved[CCAI_ERROR_CAP]) {
    memcpy(last_error, saved, strlen(saved) + 1);
}


void cca_clear_error(void) {
    last_error[0] = '\0';
}
