/*
 * log.h — the log (log.c): lines to the sink, deferred while a lock is held.
 */
#ifndef CCA_LOG_H
#define CCA_LOG_H

#include "debug.h"

#include <stdbool.h>

/* A log line formatted under the lock and written after it is released: the
 * log callback may call back into the allocator (log.c). */
typedef struct ccai_deferred_log {
    bool set;
    char line[512];
} ccai_deferred_log;


void ccai_log(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
/* In the child of a fork: the log lock made anew (fork.c's handler).
 * It is not taken before the fork, as the other locks are: a sink may wait
 * for something the forking thread holds (a Python sink for the GIL), so
 * waiting for the sink there could wait for ever; a line half written by
 * another thread of the parent is not the child's to finish. */
void ccai_log_fork_child(void);
/* Write a deferred line (if set) through the log sink; call without the
 * allocator lock. */
static inline void ccai_log_flush(ccai_deferred_log *d) {
    if (d->set)
        ccai_log("%s", d->line);
    d->set = false;
}


/* log.c, declared here for the lock's inline unlock: lines logged by
 * this thread between hold and release are queued (up to CCAI_LOG_HELD
 * lines; more are counted, and one line says how many were lost) and
 * written at the outermost release. Code that holds a ccalloc lock while it
 * may log holds the log across it, so no sink runs under a ccalloc lock:
 * an allocator's lock through ccai_mutex_hold_log (below), plug.c's around
 * a creation, the CUDA upstream's vm lock around each vm op. */
#define CCAI_LOG_HELD 8
void ccai_log_hold(void);
void ccai_log_release(void);
#if CCA_DEBUG >= 1
bool ccai_log_holding(void); /* this thread holds its log now */
#endif

#endif /* CCA_LOG_H */
