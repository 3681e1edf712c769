/*
 * status.c — status names, the per-thread last-error message, and the log
 * sink.
 *
 * Also the two helpers shared by every tool: cca_format_bytes and
 * cca_parse_size (the size syntax of config strings and command lines):
 * exact integer arithmetic throughout, fractions rounded down to a whole
 * byte, one pass over a text of any length.
 *
 * Every failing public call goes through ccai_fail(), which formats a message
 * into a thread-local buffer and returns the status, so call sites read
 * `return ccai_fail(CCA_ERR_CONFIG, "unknown key '%s'", key);`. The same
 * buffer is public through cca_set_error / cca_error_prefix / cca_clear_error,
 * so layers above (the runtime's ccr_fail) keep one message per thread, not
 * one per library. Nothing here allocates: the buffer is fixed (1024 bytes;
 * a longer message is cut and ends in "...", never cut silently), and the
 * default log sink writes one line to stderr.
 */
#include "../core/internal.h"

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

/* The log sink. log_lock is recursive, so that a sink may call
 * cca_set_log_callback; it is held while a sink runs, so that once
 * cca_set_log_callback returns the old sink is neither running nor called
 * again (its user data may be freed). A line logged by a thread that is
 * inside the sink goes to stderr, so a sink that logs never recurses.
 * ccalloc's own locks are never held while a sink runs: the allocator
 * defers its own lines (ccai_deferred_log); a line logged while a thread
 * holds one of them is queued in that thread (ccai_log_hold) and written by
 * the outermost release, once none is held: an allocator's lock holds the
 * log before it calls an upstream op and releases it after its unlock
 * (lock.c, "The log"), the CUDA upstream's vm ops hold it across their
 * lock, plug.c across a device's creation and cca_plug_reset. */
static cca_log_fn log_fn;
static void *log_user;
static pthread_mutex_t log_lock;
static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static _Thread_local bool in_sink;
static _Thread_local unsigned log_held; /* nesting of ccai_log_hold */
static _Thread_local struct {
    char line[CCAI_LOG_HELD][512];
    unsigned n, lost;
} held;

static void log_lock_init(void) {
    pthread_mutexattr_t at;
    pthread_mutexattr_init(&at);
    pthread_mutexattr_settype(&at, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&log_lock, &at);
    pthread_mutexattr_destroy(&at);
}

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

/* A message cut to fit ends in "...", so a reader knows it is not whole. */
static void mark_cut(char *message, size_t size) {
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
        mark_cut(message, sizeof last_error);
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

cca_status ccai_fail(cca_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cca_vset_error(s, fmt, ap);
    va_end(ap);
    return s;
}

/* The public face of ccai_fail, for custom upstreams and other layers. */
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
            mark_cut(message, sizeof message);
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

bool ccai_write_failed(FILE *f) {
    return fflush(f) != 0 || ferror(f);
}

int ccai_write_via_memory(FILE *f, ccai_body_fn body, const void *ctx) {
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (mem) {
        int r = body(ctx, mem);
        bool lost = fclose(mem) != 0; /* the stream's own growth failed: out of memory */
        if (r == CCAI_BODY_OK && !lost) {
            int bad = len && fwrite(buf, 1, len, f) != len ? CCAI_BODY_WRITE : CCAI_BODY_OK;
            free(buf);
            return bad;
        }
        free(buf);
        if (r == CCAI_BODY_NOMEM)
            return r;
    }
    return body(ctx, f);
}

void cca_clear_error(void) {
    last_error[0] = '\0';
}

void cca_set_log_callback(cca_log_fn fn, void *user) {
    pthread_once(&log_once, log_lock_init);
    pthread_mutex_lock(&log_lock);
    log_fn = fn;
    log_user = user;
    pthread_mutex_unlock(&log_lock);
}

static void emit(const char *line) {
    ccai_assert(ccai_mutexes_held == 0); /* lines never leave under a ccalloc lock */
    pthread_once(&log_once, log_lock_init);
    pthread_mutex_lock(&log_lock);
    if (log_fn && !in_sink) {
        /* the sink may call the library, and a call of its own that fails
         * sets this thread's message: the caller that logged reads its own
         * failure in cca_last_error() afterwards, not the sink's */
        char saved[CCAI_ERROR_CAP];
        ccai_error_save(saved);
        in_sink = true;
        log_fn(log_user, line);
        in_sink = false;
        ccai_error_restore(saved);
    } else {
        fprintf(stderr, "ccalloc: %s\n", line);
    }
    pthread_mutex_unlock(&log_lock);
}

void ccai_log(const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0)
        memcpy(line, "...", 4);
    else if ((size_t)n >= sizeof line) /* a cut line says so */
        mark_cut(line, sizeof line);
    if (!log_held) {
        emit(line);
    } else if (held.n < CCAI_LOG_HELD) {
        memcpy(held.line[held.n++], line, sizeof line);
    } else {
        held.lost++;
    }
}

void ccai_log_fork_child(void) {
    pthread_once(&log_once, log_lock_init);
    log_lock_init(); /* unlocked, whoever held it in the parent */
}

void ccai_log_hold(void) {
    log_held++;
}

#if CCA_DEBUG >= 1
bool ccai_log_holding(void) {
    return log_held > 0;
}
#endif

void ccai_log_release(void) {
    if (--log_held)
        return;
    /* The lines are emitted from a copy: a sink may make a call that holds
     * and logs again on this thread (a device's creation), which refills the
     * queue while the sink still reads its line (that call's lines go to
     * stderr: they are logged inside the sink). */
    unsigned n = held.n, lost = held.lost;
    char line[CCAI_LOG_HELD][sizeof held.line[0]];
    memcpy(line, held.line, n * sizeof line[0]);
    held.n = held.lost = 0;
    for (unsigned i = 0; i < n; i++)
        emit(line[i]);
    if (lost) {
        char line[80];
        snprintf(line, sizeof line, "%u more lines were not logged", lost);
        emit(line);
    }
}

const char *cca_format_bytes(size_t bytes, char *buf, size_t len) {
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    if (!buf || len == 0)
        return ""; /* nowhere to write: an empty text, not NULL, for printf's %s */
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

/* floor(0.d1d2...dn * 2^shift) for the fraction digits `frac` (n of them),
 * exactly. Only the first `shift` digits matter: with k = shift digits,
 * 0.d1..dk * 2^shift = H / 5^k for an integer H, so its distance to the next
 * integer is at least 1 / 5^k, while the rest, 0.0..0d(k+1).. < 10^-k, adds
 * less than 10^-k * 2^shift = 1 / 5^k: it can never carry into the integer
 * part. The first min(n, shift) digits (at most 40) are doubled `shift`
 * times as a decimal fraction, each doubling shifting one bit out. */
static uint64_t fraction_bits(const char *frac, size_t n, unsigned shift) {
    unsigned char d[40];
    size_t k = n < shift ? n : shift;
    for (size_t i = 0; i < k; i++)
        d[i] = (unsigned char)(frac[i] - '0');
    uint64_t bits = 0;
    for (unsigned b = 0; b < shift; b++) {
        unsigned carry = 0;
        for (size_t i = k; i-- > 0;) {
            unsigned x = d[i] * 2u + carry;
            d[i] = (unsigned char)(x % 10);
            carry = x / 10;
        }
        bits = bits << 1 | carry;
    }
    return bits;
}

/* Exact in every case: the integer part is read as an integer (overflow
 * checked), the suffix is a shift (overflow checked), and a fraction adds
 * fraction_bits (fractions of a byte are dropped: 1.5 is 1 byte, and
 * 0.9999999999999999999K is 1023, not the 1024 a double would give). One
 * pass over the text whatever its length: leading zeros and trailing
 * fraction digits cost a step each and need no buffer. */
cca_status cca_parse_size(const char *text, size_t *out) {
    if (!text || !out)
        return ccai_fail(CCA_ERR_INVALID_ARGUMENT, "cca_parse_size: NULL argument");
    /* the number: digits, optionally one '.' and more digits; nothing else
     * (no sign, exponent, hex, inf or nan) */
    const char *p = text;
    uint64_t whole = 0;
    bool too_large = false;
    size_t int_digits = 0, frac_digits = 0;
    for (; isdigit((unsigned char)*p); p++, int_digits++) {
        unsigned digit = (unsigned)(*p - '0');
        if (whole > (UINT64_MAX - digit) / 10)
            too_large = true;
        else
            whole = whole * 10 + digit;
    }
    const char *frac = NULL;
    if (*p == '.')
        for (frac = ++p; isdigit((unsigned char)*p); p++)
            frac_digits++;
    if (int_digits + frac_digits == 0)
        return ccai_fail(CCA_ERR_INVALID_ARGUMENT, "bad size '%s' (expected e.g. 512M, 1.5G, 4096)", text);
    unsigned shift = 0;
    switch (toupper((unsigned char)*p)) {
    case 'K': shift = 10; break;
    case 'M': shift = 20; break;
    case 'G': shift = 30; break;
    case 'T': shift = 40; break;
    default: break;
    }
    if (shift) {
        p++;
        if (*p == 'i' || *p == 'I')
            p++;
    }
    if (*p == 'B' || *p == 'b')
        p++;
    if (*p != '\0')
        return ccai_fail(CCA_ERR_INVALID_ARGUMENT, "bad size '%s' (expected e.g. 512M, 1.5G, 4096)", text);
    if (too_large || whole > (UINT64_MAX >> shift))
        return ccai_fail(CCA_ERR_INVALID_ARGUMENT, "bad size '%s' (too large)", text);
    /* whole << shift is a multiple of 2^shift and the fraction adds less
     * than 2^shift: the sum cannot overflow 64 bits */
    uint64_t bytes = (whole << shift) + (frac ? fraction_bits(frac, frac_digits, shift) : 0);
    if (bytes > SIZE_MAX)
        return ccai_fail(CCA_ERR_INVALID_ARGUMENT, "bad size '%s' (too large)", text);
    *out = (size_t)bytes;
    return CCA_OK;
}
