/*
 * test_lock.c — the allocator's lock (lock.c), both protocols, on its own.
 *
 * - which protocol a lock gets: asymmetric exactly when the kernel grants
 *   process-private memory barriers, symmetric when asked for;
 * - mutual exclusion: threads increment a plain counter under the lock, and
 *   the count is exact;
 * - no lost wake-up: a holder keeps the lock until every waiter has given up
 *   spinning and gone to sleep (asymmetric: the sleeper count says so), then
 *   releases it; every waiter must get the lock in turn. A lost wake-up
 *   leaves a waiter asleep for ever, and the test fails on its timeout;
 * - the same with every barrier refused (the lock's fallback: sleeps of at
 *   most 1 ms, checked again).
 */
#include <criterion/criterion.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define THREADS 4
#define ROUNDS 200000
#define WAITERS 3

static bool kernel_grants_barriers(void) {
    long cmds = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    return cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
           (cmds & MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) &&
           syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}

/* The asymmetric protocol's tests skip where every lock is symmetric. */
static void need_barriers(void) {
    if (!kernel_grants_barriers())
        cr_skip_test("the kernel grants no process-private memory barrier: every lock is symmetric here");
}

Test(lock, the_protocol_follows_the_kernel_and_the_request) {
    ccai_mutex m;
    ccai_mutex_init(&m);
    cr_expect_eq(m.asymmetric, kernel_grants_barriers());
    ccai_mutex_init_kind(&m, true);
    cr_expect_eq(m.asymmetric, kernel_grants_barriers());
    ccai_mutex_init_kind(&m, false);
    cr_expect(!m.asymmetric);
    cr_expect_eq(atomic_load(&m.state), 0);
    cr_expect_eq(atomic_load(&m.sleepers), 0);
}

typedef struct shared {
    ccai_mutex m;
    long counter; /* plain: only the lock orders its updates */
    _Atomic int started;
} shared;

static void *count(void *arg) {
    shared *s = arg;
    atomic_fetch_add(&s->started, 1);
    for (int i = 0; i < ROUNDS; i++) {
        ccai_mutex_lock(&s->m);
        long v = s->counter;
        if (i % 64 == 0) /* a longer critical section now and then: waiters spin out and sleep */
            for (volatile int k = 0; k < 2000; k++) {
            }
        s->counter = v + 1;
        ccai_mutex_unlock(&s->m);
    }
    return NULL;
}

static void counts_exactly(bool asymmetric) {
    shared s = {.counter = 0};
    ccai_mutex_init_kind(&s.m, asymmetric);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, count, &s), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    cr_expect_eq(s.counter, (long)THREADS * ROUNDS);
    cr_expect_eq(atomic_load(&s.m.state), 0, "the lock is free at the end");
    cr_expect_eq(atomic_load(&s.m.sleepers), 0, "no sleeper is left counted");
}

Test(lock, symmetric_counts_exactly_under_contention, .timeout = 60) {
    counts_exactly(false);
}

Test(lock, asymmetric_counts_exactly_under_contention, .timeout = 60) {
    need_barriers();
    counts_exactly(true);
}

static void *take_once(void *arg) {
    shared *s = arg;
    atomic_fetch_add(&s->started, 1);
    ccai_mutex_lock(&s->m);
    s->counter++;
    ccai_mutex_unlock(&s->m);
    return NULL;
}

static void sleep_ms(int ms) {
    struct timespec t = {0, ms * 1000000L};
    nanosleep(&t, NULL);
}

/* The holder keeps the lock until every waiter is asleep (asymmetric: the
 * sleeper count is WAITERS; symmetric: the word says "contended" and the
 * waiters have had 50 ms to spin out), then lets go. */
static void wakes_every_sleeper(bool asymmetric) {
    shared s = {.counter = 0};
    ccai_mutex_init_kind(&s.m, asymmetric);
    ccai_mutex_lock(&s.m);
    pthread_t t[WAITERS];
    for (int i = 0; i < WAITERS; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, take_once, &s), 0);
    for (int ms = 0; ms < 10000; ms++) {
        bool asleep = asymmetric ? atomic_load(&s.m.sleepers) == WAITERS : atomic_load(&s.m.state) == 2;
        if (asleep && atomic_load(&s.started) == WAITERS)
            break;
        sleep_ms(1);
    }
    if (asymmetric)
        cr_assert_eq(atomic_load(&s.m.sleepers), WAITERS, "every waiter went to sleep");
    else
        cr_assert_eq(atomic_load(&s.m.state), 2, "a waiter marked the lock contended");
    sleep_ms(50);
    cr_expect_eq(s.counter, 0, "no waiter got the lock while it was held");
    ccai_mutex_unlock(&s.m);
    for (int i = 0; i < WAITERS; i++)
        pthread_join(t[i], NULL); /* a lost wake-up hangs here: the test's timeout fails it */
    cr_expect_eq(s.counter, WAITERS);
    cr_expect_eq(atomic_load(&s.m.state), 0);
    cr_expect_eq(atomic_load(&s.m.sleepers), 0);
}

Test(lock, symmetric_wakes_every_sleeper, .timeout = 30) {
    wakes_every_sleeper(false);
}

Test(lock, asymmetric_wakes_every_sleeper, .timeout = 30) {
    need_barriers();
    wakes_every_sleeper(true);
}

Test(lock, asymmetric_wakes_every_sleeper_when_barriers_are_refused, .timeout = 30) {
    need_barriers();
    atomic_store(&ccai_mutex_refuse_barrier, true);
    wakes_every_sleeper(true);
    counts_exactly(true);
    atomic_store(&ccai_mutex_refuse_barrier, false);
}
