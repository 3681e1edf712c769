/*
 * lock.c — the contended path of the allocator's lock.
 *
 * The fast path is inline in internal.h (ccai_mutex_lock/unlock): one
 * compare-and-swap to take a free lock, one atomic decrement to release it.
 * The lock word is 0 (free), 1 (held) or 2 (held, and someone may sleep on
 * it): Drepper's "mutex 2" from "Futexes Are Tricky". A waiter first spins
 * (critical sections are tens of nanoseconds, so the holder is usually about
 * to leave), then swaps in 2 and sleeps in the kernel until the word
 * changes; an unlock that finds 2 stores 0 and wakes one sleeper, which
 * swaps in 2 again (it cannot know whether others still sleep).
 *
 * Costs: uncontended, no system call; contended, at most one futex wait per
 * sleep and one wake per unlock while the word says 2.
 */
#include "internal.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SPINS 100

void ccai_mutex_wait(ccai_mutex *m) {
    for (int i = 0; i < SPINS; i++) {
        int expected = 0;
        if (atomic_load_explicit(&m->state, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_weak_explicit(&m->state, &expected, 1, memory_order_acquire,
                                                  memory_order_relaxed))
            return;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
    /* sleep: mark the lock contended (2) so that unlock wakes someone */
    while (atomic_exchange_explicit(&m->state, 2, memory_order_acquire) != 0)
        syscall(SYS_futex, &m->state, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
}

void ccai_mutex_wake(ccai_mutex *m) {
    atomic_store_explicit(&m->state, 0, memory_order_release);
    syscall(SYS_futex, &m->state, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}
