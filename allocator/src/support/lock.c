/*
 * lock.c — the allocator's lock: its two protocols, their contended paths,
 * and the log lines it holds until its release.
 *
 * - One lock per allocator guards everything. Fast paths are inline in
 *   lock.h; a taker that finds the lock held comes here, spins (SPINS: the
 *   holder's sections are tens of ns), then sleeps on the word (futex(2)).
 * - The hard part is the unlock: it must learn whether someone sleeps in
 *   the same step as it frees the word, or a waiter that checked just
 *   before the release sleeps for ever (a lost wake-up).
 * - Costs: uncontended, no system call and one locked instruction per
 *   lock+unlock (asymmetric) or two (symmetric); contended, at most one
 *   futex wait per sleep, plus one barrier (asymmetric), and one wake per
 *   unlock that finds a sleeper. Measurements: docs/allocator-measurements.md,
 *   "Then the lock".
 *
 * SYMMETRIC (Drepper's "mutex 2", "Futexes Are Tricky"): the word is 0
 * free, 1 held, 2 held with someone maybe asleep. A waiter swaps in 2
 * before sleeping; unlock is an atomic decrement whose old value says
 * whether to wake. Always correct; the decrement is a locked instruction
 * (on x86 it waits for every earlier store of the section to reach the
 * cache).
 *
 * ASYMMETRIC (the default where the kernel allows): the word is 0 or 1, and
 * `sleepers` counts waiters that may sleep. Unlock is a plain store:
 *
 *     holder:  state = 0;  (plain store)      waiter:  sleepers++;  (atomic)
 *              if (sleepers) wake;                     membarrier();
 *                                                      if (state == 0) take it
 *                                                      else sleep while state == 1
 *
 * - Why correct: the holder's read of `sleepers` may pass its store of 0
 *   (store buffers), so the waiter pays for the order:
 *   membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) makes every running thread
 *   of the process execute a full barrier before it returns. Either the
 *   holder's store was before that barrier (the waiter's check sees the
 *   word free) or its read of `sleepers` is after it (it sees the waiter).
 *   The futex sleeps only while the word is still 1, so a wake between the
 *   check and the sleep is not lost either.
 * - Cost to the waiter: a system call and an interrupt to each CPU running
 *   a thread of the process, once per sleep; the holder pays nothing.
 * - Needs the barrier command (Linux 4.14+) and registration, once per
 *   process (pthread_once); if the kernel refuses either (old kernel,
 *   seccomp), every lock is symmetric. A barrier refused later (a forked
 *   child keeps the registration, so it should not be) is retried after
 *   registering again; still refused, the waiter sleeps at most 1 ms at a
 *   time and checks again: a lost wake-up costs a millisecond, never a hang
 *   (ccai_mutex_refuse_barrier makes tests take that path).
 *
 * The log. No line may reach the sink while a ccalloc lock is held (a sink
 * may call the library, and would wait for its own thread's lock).
 * - The allocator's own lines are formatted under the lock and written
 *   after it (ccai_deferred_log). An upstream op, called under the lock,
 *   may log too (the CUDA upstream, on a refused cleanup step).
 * - So before an op (ccai_upstream_op) the holder marks the lock (a bit of
 *   its `unlock` byte) and holds its thread's log (log.c: lines queued, at
 *   most CCAI_LOG_HELD, the rest counted and said in one line). The unlock
 *   reads the mark while the lock is still its own, frees the word, then
 *   releases the log, which writes the queued lines in order, outside
 *   every lock:
 *
 *     lock .. mark, hold .. op: ccai_log("x") (queued) .. unlock: word freed, "x" written
 *
 * - The mark shares the byte that holds the protocol, which the unlock
 *   tests anyway, and only the holder touches it: an unmarked unlock (every
 *   cached alloc and free: they call no op) costs one compare and branch,
 *   a symmetric one a compare more; a marked lock unlocks out of line
 *   (ccai_mutex_unlock_and_log). Nothing thread-local on that path (why
 *   not a thread-local count on every lock: docs/allocator-measurements.md,
 *   "Then the lock"). A lock never marked (fork.c's handler, the invariant
 *   check) writes nothing. With CCA_DEBUG >= 1 the upstream wrapper checks
 *   that every op called under a lock has the log held.
 *
 * Re-entry. An op that calls the same allocator on its own thread would
 * wait for itself for ever. The mark's holder also writes its thread's
 * token into the lock (`owner`, cleared by the marked unlock); the
 * contended path compares it with its own first. A thread reads its own
 * token there only while it holds the lock itself, so the taker is refused
 * (ccai_lock_refused: CCA_ERR_INVALID_ARGUMENT, nothing taken). The cached
 * path never marks the lock; an uncontended take never reads owner.
 */
#include "lock.h"

#include <linux/futex.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if CCA_DEBUG >= 1
_Thread_local unsigned ccai_mutexes_held;
#endif

#define SPINS 100
#define UNFENCED_SLEEP_NS 1000000 /* a waiter without a barrier checks again this often */

_Atomic bool ccai_mutex_refuse_barrier;

static pthread_once_t barrier_once = PTHREAD_ONCE_INIT;
static bool barrier_registered; /* written once, under barrier_once */

static long membarrier(int cmd) {
    return syscall(__NR_membarrier, cmd, 0, 0);
}

static void register_barrier(void) {
    long cmds = membarrier(MEMBARRIER_CMD_QUERY);
    barrier_registered = cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
                         (cmds & MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) &&
                         membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
}

void ccai_mutex_init_kind(ccai_mutex *m, bool asymmetric) {
    pthread_once(&barrier_once, register_barrier);
    atomic_init(&m->state, 0);
    atomic_init(&m->sleepers, 0);
    atomic_init(&m->owner, NULL);
    m->asymmetric = asymmetric && barrier_registered;
    m->unlock = m->asymmetric ? CCAI_UNLOCK_STORE : CCAI_UNLOCK_DECREMENT;
}

void ccai_mutex_init(ccai_mutex *m) {
    ccai_mutex_init_kind(m, true);
}

/* Every running thread of the process has passed a full barrier. False if
 * the kernel refused, even after registering again (a forked child). */
static bool barrier(void) {
    if (atomic_load_explicit(&ccai_mutex_refuse_barrier, memory_order_relaxed))
        return false;
    if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0)
        return true;
    return membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0 &&
           membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0;
}

static bool try_take(ccai_mutex *m) {
    int expected = 0;
    return atomic_load_explicit(&m->state, memory_order_relaxed) == 0 &&
           atomic_compare_exchange_strong_explicit(&m->state, &expected, 1, memory_order_acquire,
                                                   memory_order_relaxed);
}

static void futex_wait(ccai_mutex *m, int value, const struct timespec *timeout) {
    syscall(SYS_futex, &m->state, FUTEX_WAIT_PRIVATE, value, timeout, NULL, 0);
}

static void wait_asymmetric(ccai_mutex *m) {
    atomic_fetch_add_explicit(&m->sleepers, 1, memory_order_seq_cst);
    for (;;) {
        if (try_take(m))
            break;
        bool fenced = barrier();
        if (try_take(m))
            break;
        static const struct timespec unfenced = {0, UNFENCED_SLEEP_NS};
        futex_wait(m, 1, fenced ? NULL : &unfenced); /* returns at once if the word is not 1 */
    }
    atomic_fetch_sub_explicit(&m->sleepers, 1, memory_order_relaxed);
}

_Thread_local char ccai_this_thread;

bool ccai_mutex_wait(ccai_mutex *m) {
    if (ccai_mutex_held_here(m)) /* our own op calling back: it would wait for itself */
        return false;
    for (int i = 0; i < SPINS; i++) {
        if (try_take(m))
            return true;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
    if (m->asymmetric) {
        wait_asymmetric(m);
        return true;
    }
    /* symmetric: mark the lock contended (2) so that unlock wakes someone */
    while (atomic_exchange_explicit(&m->state, 2, memory_order_acquire) != 0)
        futex_wait(m, 2, NULL);
    return true;
}

cca_status ccai_lock_refused(const char *fn) {
    return cca_set_error(CCA_ERR_INVALID_ARGUMENT,
                     "%s: called from inside an upstream op of this allocator, on the thread that holds its lock "
                     "for that op; an op must not call back into the allocator that called it",
                     fn);
}

void ccai_mutex_wake(ccai_mutex *m) {
    if (!m->asymmetric) /* the decrement left 1: no one may take it before this store */
        atomic_store_explicit(&m->state, 0, memory_order_release);
    syscall(SYS_futex, &m->state, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* "The log", above: the mark is cleared while the lock is still ours (the
 * next holder finds it clear), and the lines go once no ccalloc lock is
 * held by this thread (an allocator's is the only one around an op). */
void ccai_mutex_unlock_and_log(ccai_mutex *m) {
    m->unlock &= (uint8_t)~CCAI_UNLOCK_LOG;
    atomic_store_explicit(&m->owner, NULL, memory_order_relaxed);
    ccai_mutex_release(m, m->asymmetric);
    ccai_log_release();
}

void ccai_mutex_unlock_in_child(ccai_mutex *m) {
    atomic_store_explicit(&m->sleepers, 0, memory_order_relaxed);
    if (!m->asymmetric) /* 2: the parent's waiters, none of them in the child */
        atomic_store_explicit(&m->state, 1, memory_order_relaxed);
    ccai_mutex_unlock(m);
}

static void fork_take(ccai_fork_link *l) {
    ccai_fork_mutex *f = (ccai_fork_mutex *)l;
    f->taken = ccai_mutex_lock(f->m);
}

static void fork_give(ccai_fork_link *l, bool child) {
    ccai_fork_mutex *f = (ccai_fork_mutex *)l;
    if (f->taken && child)
        ccai_mutex_unlock_in_child(f->m);
    else if (f->taken)
        ccai_mutex_unlock(f->m);
}

void ccai_mutex_fork_register(ccai_fork_mutex *f, ccai_mutex *m) {
    *f = (ccai_fork_mutex){.link = {.take = fork_take, .give = fork_give}, .m = m};
    ccai_fork_register(CCAI_FORK_ALLOCATOR, &f->link);
}

void ccai_mutex_fork_unregister(ccai_fork_mutex *f) {
    ccai_fork_unregister(CCAI_FORK_ALLOCATOR, &f->link);
}
