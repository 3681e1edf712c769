/*
 * support.h — what every layer shares and nothing allocator-specific: the
 * assertion levels, the per-thread message (status.c), the log (log.c) and
 * the fork registry's link (fork.c). The upstream files include this (via
 * upstream.h) and see no allocator type.
 */
#ifndef CCA_SUPPORT_H
#define CCA_SUPPORT_H

#include "ccalloc.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* ---- assertion levels (check.c) ---------------------------------------- */

/* CCA_DEBUG, in the spirit of mimalloc's MI_DEBUG:
 *   0  no checks (Release, RelWithDebInfo);
 *   1  cheap checks of preconditions and postconditions (Debug builds): a
 *      free-index erase finds its block, a returned block was LIVE, counters
 *      never go below zero, no log line leaves while a lock is held;
 *   2  level 1, plus the full invariant walk (cca_check_invariants) at the
 *      end of every public call that holds the lock: O(blocks) per call, for
 *      tests and the sanitizer CI stage.
 * A failed check is a bug in ccalloc: it prints the condition, file and line
 * (and the broken invariant) and aborts. */
#ifndef CCA_DEBUG
#ifdef NDEBUG
#define CCA_DEBUG 0
#else
#define CCA_DEBUG 1
#endif
#endif

void ccai_assert_fail(const char *cond, const char *file, int line);
#if CCA_DEBUG >= 1
#define ccai_assert(cond) ((cond) ? (void)0 : ccai_assert_fail(#cond, __FILE__, __LINE__))
#else
#define ccai_assert(cond) ((void)0)
#endif

/* ---- status.c: the per-thread message ---------------------------------- */

/* status.c: the per-thread last-error buffer's size, message included its
 * NUL; longer messages end in "...". upstream.c saves a message this large. */
#define CCAI_ERROR_CAP 1024

/* A log line formatted under the lock and written after it is released: the
 * log callback may call back into the allocator (status.c). */
typedef struct ccai_deferred_log {
    bool set;
    char line[512];
} ccai_deferred_log;

/* Cut message (of `size` bytes) marked: it ends in "...". */
void ccai_mark_cut(char *message, size_t size);
/* Copy this thread's message out and back: a public call that fails
 * inside and then succeeds (the OOM retry) puts the caller's back. */
void ccai_error_save(char saved[CCAI_ERROR_CAP]);
void ccai_error_restore(const char saved[CCAI_ERROR_CAP]);
/* The end of every writer (stats, snapshots, config, domain stats): flush f
 * and report whether anything written failed. stdio accepts a write into its
 * buffer and fails only when the buffer goes out (a full disk, a closed
 * pipe), so without the flush a short write "succeeds" and the caller learns
 * of the loss, if ever, at fclose. true: CCA_ERR_IO. */
bool ccai_write_failed(FILE *f);
/* A snapshot's body, written to `out` under the allocator's lock, which it
 * takes and releases itself: CCAI_BODY_OK, CCAI_BODY_WRITE (a write to out
 * failed) or CCAI_BODY_NOMEM (host memory short before anything was
 * written). */
enum { CCAI_BODY_OK = 0, CCAI_BODY_WRITE = 1, CCAI_BODY_NOMEM = 2 };
typedef int (*ccai_body_fn)(const void *ctx, FILE *out);
/* Run body into host memory (open_memstream), then copy that to f after the
 * lock is released, so that a file that does not drain (a pipe nobody reads
 * yet) stalls only the writing thread, never the allocator's other callers.
 * Where that memory cannot be had (the stream cannot be opened, or grows
 * out of memory), body runs again straight into f, under the lock, as
 * before. Returns body's result for the pass that counts. */
int ccai_write_via_memory(FILE *f, ccai_body_fn body, const void *ctx);
cca_status ccai_fail(cca_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void ccai_log(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
/* In the child of a fork: the log lock made anew (plug.c's fork handler).
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

/* ---- log.c: lines held while a lock is ---------------------------------- */

/* status.c, declared here for the lock's inline unlock: lines logged by
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

#if CCA_DEBUG >= 1
/* How many of ccalloc's locks this thread holds (lock.c): every ccai_mutex,
 * and the CUDA upstream's vm lock (upstream_cuda.c counts it), so that a log
 * line emitted under one fails the check in status.c: ccalloc.h promises
 * that lines reach the sink "never while a ccalloc lock is held". */
extern _Thread_local unsigned ccai_mutexes_held;
#endif

/* ---- fork.c: the registry's link ---------------------------------------- */

/* fork.c's registry: every allocator and upstream is on a list from its
 * creation to its destruction, so the fork handler can take its locks. */
typedef struct ccai_fork_link {
    struct ccai_fork_link *prev, *next;
} ccai_fork_link;
void ccai_fork_register_upstream(cca_upstream *u);   /* ccai_upstream_wrap */
void ccai_fork_unregister_upstream(cca_upstream *u); /* cca_upstream_destroy, first */

#endif /* CCA_SUPPORT_H */
