/*
 * status.c — status names, the per-thread last-error message, and the log
 * sink.
 *
 * Also the two helpers shared by every tool: cca_format_bytes and
 * cca_parse_size (the size syntax of config strings and command lines).
 *
 * Every failing public call goes through ccai_fail(), which formats a message
 * into a thread-local buffer and returns the status, so call sites read
 * `return ccai_fail(CCA_ERR_CONFIG, "unknown key '%s'", key);`. Nothing here
 * allocates: the buffer is fixed (truncating long messages), and the default
 * log sink writes one line to stderr.
 */
#include "internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
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
    case CCA_ERR_INVARIANT: return "CCA_ERR_INVARIANT: an internal invariant is broken";
    }
    return "unknown cca_status";
}

const char *cca_last_error(void) {
    return last_error;
}

cca_status ccai_fail(cca_status s, const char *fmt, ...) {
    /* format into a local buffer first: callers may pass cca_last_error() as
     * an argument to wrap the previous message */
    char message[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    memcpy(last_error, message, sizeof last_error);
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

cca_status cca_parse_size(const char *text, size_t *out) {
    if (!text || !out)
        return ccai_fail(CCA_ERR_INVALID_ARGUMENT, "cca_parse_size: NULL argument");
    /* the number: digits, optionally one '.' and more digits; nothing else
     * (no sign, exponent, hex, inf or nan, which strtod would accept) */
    const char *p = text;
    size_t int_digits = 0, frac_digits = 0;
    while (isdigit((unsigned char)*p))
        p++, int_digits++;
    bool fraction = *p == '.';
    if (fraction)
        for (p++; isdigit((unsigned char)*p); p++)
            frac_digits++;
    if (int_digits + frac_digits == 0)
        return ccai_fail(CCA_ERR_INVALID_ARGUMENT, "bad size '%s' (expected e.g. 512M, 1.5G, 4096)", text);
    const char *number_end = p;
    unsigned shift = 0;
    switch (toupper((unsigned char)*p)) {
    case 'K':
        shift = 10;
        p++;
        break;
    case 'M':
        shift = 20;
        p++;
        break;
    case 'G':
        shift = 30;
        p++;
        break;
    case 'T':
        shift = 40;
        p++;
        break;
    default: break;
    }
    if (shift && (*p == 'i' || *p == 'I'))
        p++;
    if (*p == 'B' || *p == 'b')
        p++;
    if (*p != '\0')
        return ccai_fail(CCA_ERR_INVALID_ARGUMENT, "bad size '%s' (expected e.g. 512M, 1.5G, 4096)", text);
    if (!fraction) { /* exact integer arithmetic */
        errno = 0;
        unsigned long long v = strtoull(text, NULL, 10);
        if (errno == ERANGE || (shift && v > (ULLONG_MAX >> shift)) || (v << shift) > SIZE_MAX)
            return ccai_fail(CCA_ERR_INVALID_ARGUMENT, "bad size '%s' (too large)", text);
        *out = (size_t)(v << shift);
        return CCA_OK;
    }
    char number[64];
    size_t len = (size_t)(number_end - text);
    if (len >= sizeof number)
        return ccai_fail(CCA_ERR_INVALID_ARGUMENT, "bad size '%s' (too long)", text);
    memcpy(number, text, len);
    number[len] = '\0';
    double bytes = strtod(number, NULL) * (double)(1ull << shift); /* >= 0: the cast drops the fraction */
    if (!(bytes < 18446744073709551616.0) || bytes > (double)SIZE_MAX)
        return ccai_fail(CCA_ERR_INVALID_ARGUMENT, "bad size '%s' (too large)", text);
    *out = (size_t)bytes;
    return CCA_OK;
}
