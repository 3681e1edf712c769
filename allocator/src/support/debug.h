/*
 * debug.h — the assertion levels (CCA_DEBUG; a failed check aborts in debug.c)
 * and the count of ccalloc locks this thread holds (lock.c).
 */
#ifndef CCA_DEBUG_H
#define CCA_DEBUG_H

#include <stdbool.h>

/* CCA_DEBUG, in the spirit of mimalloc's MI_DEBUG:
 *   0  no checks (Release, RelWithDebInfo);
 *   1  cheap checks of preconditions and postconditions (Debug builds): a
 *      free-index erase finds its block, a returned block was LIVE, counters
 *      never go below zero, no log line leaves while a lock is held;
 *   2  level 1, plus the full invariant walk (cca_check_invariants) at the
 *      end of every public call that holds the lock: O(blocks + segments
 *      + pages / 64 + domains) per call (check.c: each domain's class
 *      bitmaps are read too), for tests and the sanitizer CI stage.
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

#if CCA_DEBUG >= 1
/* How many of ccalloc's locks this thread holds (lock.c): every ccai_mutex,
 * and the CUDA upstream's vm lock (cuda.c counts it), so that a log
 * line emitted under one fails the check in log.c: ccalloc.h promises
 * that lines reach the sink "never while a ccalloc lock is held". */
extern _Thread_local unsigned ccai_mutexes_held;
#endif

#endif /* CCA_DEBUG_H */
