/*
 * log.c — the log sink: one line per event worth telling (an OOM, a refused
 * cleanup, a bad CCALLOC_CONF), to stderr or the program's callback.
 *
 * - A line is at most 512 bytes; a longer one is cut and ends in "...".
 * - No line leaves while a ccalloc lock is held: the allocator defers its
 *   own (ccai_deferred_log), and a thread holding a lock queues its lines
 *   (ccai_log_hold, up to CCAI_LOG_HELD; more are counted and reported in
 *   one line) until the outermost release writes them.
 * - The sink may call the library: the caller's message is kept across it,
 *   and a line logged inside the sink goes to stderr (no recursion).
 * - The default sink (stderr) escapes control, bidi and invisible
 *   characters as \xNN (common/ccai_escape.h; a line may carry outside
 *   text, a CCALLOC_CONF value) and writes each line in one write(2),
 *   made again when a signal interrupts it (ccai_write_all: stdio's would
 *   drop the line). A program's callback gets the line as made.
 * - After a fork the child makes the log's lock anew (ccai_log_fork_child).
 */
#include "debug.h"
#include "status.h"
#include "log.h"

#include "ccai_escape.h" /* common/: the default sink escapes */
#include "ccai_write.h"  /* common/: a write a signal interrupted, made again */

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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

void cca_set_log_callback(cca_log_fn fn, void *user) {
    pthread_once(&log_once, log_lock_init);
    pthread_mutex_lock(&log_lock);
    log_fn = fn;
    log_user = user;
    pthread_mutex_unlock(&log_lock);
}

/* All of out to stderr: after what stdio holds for it (a program may have
 * made stderr buffered), in one write(2) to its descriptor, made again
 * from where it stopped when a signal interrupts it (EINTR: stdio's fwrite
 * would drop the line). A stderr with no descriptor (a program's own
 * stream): fwrite. Under flockfile(stderr). */
static void put_stderr(const char *out, size_t k) {
    int fd = fileno(stderr);
    fflush(stderr);
    if (fd < 0)
        fwrite(out, 1, k, stderr);
    else
        (void)ccai_write_all(fd, out, k);
}

/* The default sink: "ccalloc: ", the line escaped (it may carry outside
 * text, CCALLOC_CONF), '\n', in one write: never interleaved with another
 * thread's or process's output. A line is under 512 bytes, its escaped
 * form under 4 x 512. */
static void write_stderr(const char *line) {
    static const char prefix[] = "ccalloc: ";
    char out[sizeof prefix - 1 + 4 * 512 + 1];
    size_t k = sizeof prefix - 1;
    memcpy(out, prefix, k);
    flockfile(stderr);
    for (const char *p = line;;) {
        k += ccai_escape_some(out + k, sizeof out - 1 - k, &p);
        if (!*p)
            break;
        put_stderr(out, k); /* not reached: the buffer holds any line */
        k = 0;
    }
    out[k++] = '\n';
    put_stderr(out, k);
    funlockfile(stderr);
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
        write_stderr(line);
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
        ccai_mark_cut(line, sizeof line);
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
