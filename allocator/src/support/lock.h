/*
 * lock.h — the allocator's lock (lock.c): the lock word, its two protocols and
 * the inline fast paths every public call runs.
 */
#ifndef CCA_LOCK_H
#define CCA_LOCK_H

#include "support.h"

#include <stdatomic.h>
#include <stdint.h>

/* The allocator lock (lock.c; fast paths inline below). Two protocols,
 * fixed when the lock is made:
 *   asymmetric: state 0 free, 1 held; `sleepers` counts waiters that may
 *               sleep in the kernel; unlock is a plain store;
 *   symmetric:  state 0 free, 1 held, 2 held with waiters sleeping in the
 *               kernel (Drepper's mutex 2); unlock is an atomic decrement. */
typedef struct ccai_mutex {
    _Atomic int state;
    _Atomic int sleepers; /* asymmetric only */
    bool asymmetric;      /* written once, before any thread can use the lock */
    /* How the holder unlocks, the one byte the unlock tests first:
     * CCAI_UNLOCK_STORE (asymmetric) or CCAI_UNLOCK_DECREMENT (symmetric),
     * set with `asymmetric`, plus CCAI_UNLOCK_LOG while the holder holds its
     * thread's log (ccai_mutex_hold_log), which sends the unlock out of line
     * to release it. Read and written by the holder only (and ccai_mutex_init). */
    uint8_t unlock;
    /* Re-entry: while the holder calls upstream ops (set with the log's
     * mark, cleared by its unlock), its thread's token (&ccai_this_thread),
     * else NULL. An op that calls back into the allocator on its own thread
     * takes the contended path, finds its own token here and is refused
     * instead of waiting for ever (ccai_mutex_lock). Written by the holder
     * only; a thread reads its own token here only while it holds the lock
     * itself, so relaxed accesses are enough. */
    _Atomic(const void *) owner;
} ccai_mutex;
enum { CCAI_UNLOCK_STORE = 0, CCAI_UNLOCK_DECREMENT = 1, CCAI_UNLOCK_LOG = 2 };


/* The lock: a futex mutex with a short spin before sleeping (lock.c has
 * the protocols and why they are correct). Uncontended, lock is one
 * compare-and-swap; unlock is a plain store (asymmetric protocol, where the
 * kernel offers process-private memory barriers) or one atomic decrement
 * (symmetric). A cached alloc+free pair takes two round trips, and on x86
 * each locked instruction also waits for every earlier store to reach the
 * cache, so the unlock's kind is a third of the pair's time at 1k live
 * blocks (docs/allocator.md, "Then the lock"). Critical sections are short
 * (tens of ns), so a waiter spins first: most contended acquisitions never
 * enter the kernel. C11 atomics, so ThreadSanitizer sees every acquire and
 * release. */
void ccai_mutex_init(ccai_mutex *m);                       /* asymmetric where the kernel allows */
void ccai_mutex_init_kind(ccai_mutex *m, bool asymmetric); /* asymmetric only if the kernel allows; tests */
extern _Atomic bool ccai_mutex_refuse_barrier;            /* tests: waiters act as if the kernel refused */
/* lock.c: the contended path; false, without taking m, when this thread
 * holds m itself inside an upstream op (m->owner) */
bool ccai_mutex_wait(ccai_mutex *m);
/* Its address identifies the calling thread (ccai_mutex.owner). */
extern _Thread_local char ccai_this_thread;
void ccai_mutex_wake(ccai_mutex *m);
/* In the child of a fork, release a lock the forking thread took before
 * the fork (fork.c's handler): the child has that one thread, so no
 * one is woken, and the parent's count of sleepers is forgotten. */
void ccai_mutex_unlock_in_child(ccai_mutex *m);

/* m on fork.c's ALLOCATOR rank, through f: taken before a fork, given
 * back after it (in the child as a child must). A take refused (a fork
 * from inside an op of m's holder, not allowed: ccalloc.h) gives nothing
 * back: that op unlocks m. Unregistering an f never registered (zeroed)
 * does nothing. */
typedef struct ccai_fork_mutex {
    ccai_fork_link link; /* first: fork.c hands back the link */
    ccai_mutex *m;
    bool taken;
} ccai_fork_mutex;
void ccai_mutex_fork_register(ccai_fork_mutex *f, ccai_mutex *m);
void ccai_mutex_fork_unregister(ccai_fork_mutex *f);

/* Take m; false (m not taken) when this thread holds it already, inside an
 * upstream op: a call back into the allocator from its own op, which would
 * otherwise wait for ever. */
static inline bool ccai_mutex_lock(ccai_mutex *m) {
    int expected = 0;
    if (!atomic_compare_exchange_strong_explicit(&m->state, &expected, 1, memory_order_acquire, memory_order_relaxed) &&
        !ccai_mutex_wait(m))
        return false;
#if CCA_DEBUG >= 1
    ccai_mutexes_held++;
#endif
    return true;
}

/* This thread holds m, inside an upstream op (a public call made from the
 * op: the ones that must refuse before ccai_mutex_lock would). */
static inline bool ccai_mutex_held_here(const ccai_mutex *m) {
    return atomic_load_explicit(&m->owner, memory_order_relaxed) == &ccai_this_thread;
}

/* The holder of m is about to call something that may log (an upstream
 * op): from now until m's unlock, this thread's lines are queued, and the
 * unlock writes them once m is free (lock.c, "The log"). Once per holding:
 * a second call finds the mark. */
static inline void ccai_mutex_hold_log(ccai_mutex *m) {
    ccai_assert(ccai_mutexes_held > 0);
    if (!(m->unlock & CCAI_UNLOCK_LOG)) {
        m->unlock |= CCAI_UNLOCK_LOG;
        atomic_store_explicit(&m->owner, &ccai_this_thread, memory_order_relaxed);
        ccai_log_hold();
    }
}

/* Free the lock word by its protocol (ccai_mutex_unlock, below, and
 * lock.c's unlock of a marked lock). */
static inline void ccai_mutex_release(ccai_mutex *m, bool asymmetric) {
#if CCA_DEBUG >= 1
    ccai_assert(ccai_mutexes_held > 0);
    ccai_mutexes_held--;
#endif
    if (asymmetric) {
        atomic_store_explicit(&m->state, 0, memory_order_release);
        /* keeps the compiler from reading sleepers before the store; the
         * processor may still, and the waiter's membarrier covers that */
        atomic_signal_fence(memory_order_seq_cst);
        if (atomic_load_explicit(&m->sleepers, memory_order_relaxed) != 0)
            ccai_mutex_wake(m);
    } else if (atomic_fetch_sub_explicit(&m->state, 1, memory_order_release) != 1) {
        ccai_mutex_wake(m); /* there were waiters (state was 2) */
    }
}

/* lock.c: the unlock of a marked lock, out of line: the mark cleared, the
 * word freed, then the lines held under it written. */
void ccai_mutex_unlock_and_log(ccai_mutex *m);

/* The protocol and the mark in one byte, read while m is still ours: the
 * asymmetric unlock of an unmarked lock costs what it cost without the
 * mark (one compare and branch), the symmetric one a compare more, and a
 * marked lock goes out of line. */
static inline void ccai_mutex_unlock(ccai_mutex *m) {
    if (__builtin_expect(m->unlock == CCAI_UNLOCK_STORE, 1))
        ccai_mutex_release(m, true);
    else if (m->unlock == CCAI_UNLOCK_DECREMENT)
        ccai_mutex_release(m, false);
    else
        ccai_mutex_unlock_and_log(m);
}

#endif /* CCA_LOCK_H */
