/*
 * lock_cost.c — what the allocator's lock costs on its own, uncontended:
 * a loop of critical sections that each write two cache lines, guarded by
 *   0: nothing (the loop's own cost),
 *   1: compare-and-swap to lock, atomic decrement to unlock (the symmetric
 *      protocol's fast path),
 *   2: compare-and-swap to lock, plain store to unlock (the asymmetric one).
 *
 *   cc -O2 lock_cost.c -o lock_cost && for m in 0 1 2; do ./lock_cost $m; done
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static _Atomic int lock_word;
static volatile long sink[16];

int main(int argc, char **argv) {
    int mode = argc > 1 ? atoi(argv[1]) : 1;
    long n = 50000000;
    double t0 = now_ns();
    for (long i = 0; i < n; i++) {
        if (mode >= 1) {
            int expected = 0;
            atomic_compare_exchange_strong_explicit(&lock_word, &expected, 1, memory_order_acquire,
                                                    memory_order_relaxed);
        }
        sink[i & 7] = i;
        sink[8 + (i & 7)] = i;
        if (mode == 1)
            atomic_fetch_sub_explicit(&lock_word, 1, memory_order_release);
        else if (mode == 2)
            atomic_store_explicit(&lock_word, 0, memory_order_release);
    }
    printf("mode %d: %.2f ns per critical section\n", mode, (now_ns() - t0) / n);
    return 0;
}
