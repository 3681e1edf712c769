/*
 * copy_engine.c — the simulated device's copy engine: one thread that runs
 * the queued copies (memcpy) in order while the caller goes on.
 *
 *     caller  | fault in dst 0 | fault in dst 1 | fault in dst 2 |  wait ...
 *     engine                   | memcpy 0       | memcpy 1       | memcpy 2 |
 *
 * - Order: one copy at a time, in the order queued (FIFO), run by the
 *   engine's thread or by a caller waiting: ccai_copy_engine_wait returns
 *   once every copy queued before it is done (the upstream's copy_wait),
 *   and while it waits it runs the next queued copy itself whenever none
 *   runs, so an engine thread that cannot get a core (others spinning on
 *   both, as OpenMP's and OpenBLAS's idle workers do) delays nothing.
 *
 *     ring:  [head, next) running (at most one)   [next, tail) queued
 * - The caller faults in the destination's pages before it queues a copy
 *   (madvise MADV_POPULATE_WRITE over the pages the copy writes; pages
 *   present already are left as they are, a refusal, e.g. an unmapped
 *   page, is ignored: the memcpy then faults as any touch of it does, a
 *   crash). The kernel zeroes a fresh page before it is used, which a GPU's
 *   copy does not pay; done by the caller, that zeroing overlaps the copy
 *   queued before. Both still share the memory's bandwidth: a copy into
 *   fresh pages runs at about 2/3 of one into pages in use (measured:
 *   bench/results/2026-11-29-host-sleep-engine).
 * - A copy is queued in pieces of CCAI_COPY_PIECE bytes, each faulted in
 *   just before it is queued: a large copy overlaps its own zeroing.
 * - At once, without the thread: a copy below CCAI_COPY_INLINE bytes while
 *   nothing is queued (the handoff costs more than the copy), and every
 *   copy if the thread cannot start.
 * - The thread starts at the first queued copy and stops at destroy. A
 *   full ring (CCAI_COPY_RING jobs) makes the caller wait for room.
 * - Signals: the thread is created with every signal blocked but those a
 *   fault raises on the thread itself (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
 *   SIGTRAP, SIGSYS: a copy into unmapped memory still reaches the
 *   program's crash handler, or kills it). A signal sent to the process
 *   therefore never runs the program's handler on the library's thread: it
 *   waits for a thread of the program (jemalloc's background threads do
 *   the same). The creator's own mask is put back at once: two
 *   pthread_sigmask calls per thread started.
 * - fork(): the child has no engine thread; its engine is emptied (a copy
 *   the parent had queued is not finished in the child, whose memory is a
 *   copy of the parent's at the fork) and starts a thread again if used.
 *   The fork waits (fork.c's prepare, through the device's hook) until a
 *   thread started has entered its loop: a thread still in its start-up
 *   runs the C library's and the sanitizers' code, which may hold their
 *   locks (AddressSanitizer's allocator, freeing what pthread_getattr_np
 *   allocated, has no fork handler before GCC 14 / LLVM 18); copied held,
 *   such a lock stays held in the child, whose own engine thread, starting
 *   the same way, then waits on it for ever (test_copy_engine, "a fork as
 *   the engine's thread starts"). Its loop holds none of them. Its exit
 *   runs the same code (AddressSanitizer gives the thread's allocator
 *   cache back under its allocator's locks), and its device is off fork.c's
 *   list by then (cca_upstream_destroy), so the engines being stopped are
 *   counted process-wide (`stopping`, under stopping_lock, from the stop
 *   to the join's return) and the fork waits until none is, holding that
 *   lock last (ccai_copy_engine_fork_exits): a destroy starting meanwhile
 *   waits for the fork ("a fork as another thread's engine thread starts
 *   or exits").
 * - Costs: a queued piece: one lock, a signal, the populate syscall; wait:
 *   one lock, sleeping until the ring is empty; a fork just after the
 *   thread's start or during a destroy: the rest of its start-up or exit
 *   (tens of microseconds); a destroy: one more lock, twice.
 */
#include "upstream.h"

#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; an older kernel refuses it: the memcpy faults the pages in */
#endif

#define CCAI_COPY_INLINE (256u << 10)
#define CCAI_COPY_PIECE ((size_t)4 << 20) /* a queued copy's unit: two huge pages */

/* Engine threads stopped but not yet joined, process-wide (see above). */
static pthread_mutex_t stopping_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stopped = PTHREAD_COND_INITIALIZER;
static size_t stopping;

void ccai_copy_engine_init(ccai_copy_engine *e) {
    memset(e, 0, sizeof *e);
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->work, NULL);
    pthread_cond_init(&e->done, NULL);
}

/* Under the lock: claim the oldest queued copy (its index in *i) when no
 * copy runs (copies run one at a time, in order); false otherwise. */
static bool claim(ccai_copy_engine *e, size_t *i) {
    if (e->next == e->tail || e->head != e->next)
        return false;
    *i = e->next++;
    return true;
}

/* Run claimed copy i outside the lock, then retire it. */
static void run_claimed(ccai_copy_engine *e, size_t i) {
    ccai_copy_job j = e->ring[i % CCAI_COPY_RING];
    pthread_mutex_unlock(&e->lock);
    memcpy(j.dst, j.src, j.size);
    pthread_mutex_lock(&e->lock);
    e->head++;
    pthread_cond_broadcast(&e->done);
    pthread_cond_signal(&e->work); /* the next one may be claimed */
}

static void *engine_main(void *arg) {
    ccai_copy_engine *e = arg;
    pthread_mutex_lock(&e->lock);
    e->running = true; /* its start-up over: a fork may go on (ccai_copy_engine_fork_lock) */
    pthread_cond_broadcast(&e->done);
    for (;;) {
        size_t i;
        if (claim(e, &i))
            run_claimed(e, i);
        else if (e->stop)
            break;
        else
            pthread_cond_wait(&e->work, &e->lock);
    }
    pthread_mutex_unlock(&e->lock);
    return NULL;
}

/* The engine's thread, its mask every signal but a fault's (see above);
 * the caller's mask unchanged. True if it started. */
static bool start_thread(ccai_copy_engine *e) {
    static const int faults[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS};
    sigset_t all, old;
    sigfillset(&all);
    for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++)
        sigdelset(&all, faults[i]);
    bool masked = pthread_sigmask(SIG_SETMASK, &all, &old) == 0;
    bool started = pthread_create(&e->thread, NULL, engine_main, e) == 0;
    if (masked)
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    return started;
}

static void populate(void *dst, size_t size) {
    long pg = sysconf(_SC_PAGESIZE);
    uintptr_t page = pg > 0 ? (uintptr_t)pg : 4096;
    uintptr_t lo = (uintptr_t)dst & ~(page - 1);
    uintptr_t hi = ((uintptr_t)dst + size + page - 1) & ~(page - 1);
    (void)madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE);
}

/* Queue one piece (the thread started), waiting for room. */
static void enqueue(ccai_copy_engine *e, void *dst, const void *src, size_t size) {
    pthread_mutex_lock(&e->lock);
    size_t i;
    while (e->tail - e->head == CCAI_COPY_RING) /* full: help, or wait for room */
        if (claim(e, &i))
            run_claimed(e, i);
        else
            pthread_cond_wait(&e->done, &e->lock);
    e->ring[e->tail % CCAI_COPY_RING] = (ccai_copy_job){dst, src, size};
    e->tail++;
    pthread_cond_signal(&e->work);
    pthread_mutex_unlock(&e->lock);
}

void ccai_copy_engine_copy(ccai_copy_engine *e, void *dst, const void *src, size_t size) {
    if (!size)
        return;
    pthread_mutex_lock(&e->lock);
    bool idle = e->head == e->tail;
    if (idle && size < CCAI_COPY_INLINE) {
        pthread_mutex_unlock(&e->lock);
        memcpy(dst, src, size);
        return;
    }
    if (!e->started) {
        e->stop = e->running = false;
        e->started = start_thread(e);
        if (!e->started) { /* no thread: at once, in order (nothing is queued without one) */
            pthread_mutex_unlock(&e->lock);
            memcpy(dst, src, size);
            return;
        }
    }
    pthread_mutex_unlock(&e->lock);
    /* piece by piece: the caller faults in piece k + 1 while the engine copies piece k */
    for (size_t off = 0; off < size; off += CCAI_COPY_PIECE) {
        size_t n = size - off < CCAI_COPY_PIECE ? size - off : CCAI_COPY_PIECE;
        populate((char *)dst + off, n);
        enqueue(e, (char *)dst + off, (const char *)src + off, n);
    }
}

void ccai_copy_engine_wait(ccai_copy_engine *e) {
    pthread_mutex_lock(&e->lock);
    size_t until = e->tail, i;
    while (e->head < until) {
        if (claim(e, &i)) /* help: the engine's thread may not have a core */
            run_claimed(e, i);
        else
            pthread_cond_wait(&e->done, &e->lock);
    }
    pthread_mutex_unlock(&e->lock);
}

void ccai_copy_engine_destroy(ccai_copy_engine *e) {
    pthread_mutex_lock(&stopping_lock); /* before the stop: a fork from now on waits for the join */
    stopping++;
    pthread_mutex_unlock(&stopping_lock);
    pthread_mutex_lock(&e->lock);
    bool started = e->started;
    e->stop = true;
    pthread_cond_signal(&e->work);
    pthread_mutex_unlock(&e->lock);
    if (started)
        pthread_join(e->thread, NULL);
    pthread_mutex_lock(&stopping_lock); /* its thread gone, exit and all */
    if (--stopping == 0)
        pthread_cond_broadcast(&stopped);
    pthread_mutex_unlock(&stopping_lock);
    pthread_cond_destroy(&e->done);
    pthread_cond_destroy(&e->work);
    pthread_mutex_destroy(&e->lock);
}

void ccai_copy_engine_fork_lock(ccai_copy_engine *e, bool lock) {
    if (!lock) {
        pthread_mutex_unlock(&e->lock);
        return;
    }
    pthread_mutex_lock(&e->lock);
    while (e->started && !e->running) /* a thread in its start-up: wait for its loop (see above) */
        pthread_cond_wait(&e->done, &e->lock);
}

void ccai_copy_engine_fork_exits(bool lock, bool child) {
    if (!lock) {
        if (child) /* no other thread in the child: the parent's waiters are not there */
            pthread_cond_init(&stopped, NULL);
        pthread_mutex_unlock(&stopping_lock);
        return;
    }
    pthread_mutex_lock(&stopping_lock);
    while (stopping) /* an engine's thread exiting: wait for its join (see above) */
        pthread_cond_wait(&stopped, &stopping_lock);
}

static void fork_take(ccai_fork_link *l) {
    (void)l;
    ccai_copy_engine_fork_exits(true, false);
}

static void fork_give(ccai_fork_link *l, bool child) {
    (void)l;
    ccai_copy_engine_fork_exits(false, child);
}

/* fork.c's LAST rank, from the library's load: before any engine can stop. */
__attribute__((constructor)) static void fork_register(void) {
    static ccai_fork_link link = {.take = fork_take, .give = fork_give};
    ccai_fork_register(CCAI_FORK_LAST, &link);
}

void ccai_copy_engine_fork_child(ccai_copy_engine *e) {
    e->head = e->next = e->tail = 0;
    e->started = e->stop = e->running = false;
    pthread_cond_init(&e->work, NULL); /* the parent's engine may have been waiting on them */
    pthread_cond_init(&e->done, NULL);
}
