/*
 * status.c — status names, the per-thread last-error message, and the log
 * sink.
 *
 * Every failing public call goes through ccai_fail(), which formats a message
 * into a thread-local buffer and returns the status, so call sites read
 * `return ccai_fail(CCA_ERR_CONFIG, "unknown key '%s'", key);`. Nothing here
 * allocates: the buffer is fixed (truncating long messages), and the default
 * log sink writes one line to stderr.
 */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[512];

static cca_log_fn log_fn;
static void *log_user;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

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
    }
    return "unknown cca_status";
}

const char *cca_last_error(void) {
    return last_error;
}

cca_status ccai_fail(cca_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return s;
}

void cca_set_log_callback(cca_log_fn fn, void *user) {
    pthread_mutex_lock(&log_lock);
    log_fn = fn;
    log_user = user;
    pthread_mutex_unlock(&log_lock);
}

void ccai_log(const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&log_lock);
    if (log_fn)
        log_fn(log_user, line);
    else
        fprintf(stderr, "ccalloc: %s\n", line);
    pthread_mutex_unlock(&log_lock);
}

const char *cca_format_bytes(size_t bytes, char *buf, size_t len) {
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%zu B", bytes);
    else
        snprintf(buf, len, "%.2f %s", v, units[u]);
    return buf;
}
