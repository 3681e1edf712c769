/*
 * no_restart_timer.h — a signal that interrupts system calls, for tests of
 * writes it must not break; header-only.
 *
 * - tu_timer_start: SIGALRM every 500 us (ITIMER_REAL), its handler
 *   installed without SA_RESTART, as CPython installs every handler: a
 *   write(2) waiting on a full pipe then fails with EINTR, nothing written.
 * - tu_timer_stop: the timer off; false when no signal came, so that a
 *   test cannot pass without having tested the case.
 * - For a forked child (one timer per process); false/0 on failure.
 */
#ifndef NO_RESTART_TIMER_H
#define NO_RESTART_TIMER_H

#include <signal.h>
#include <stdbool.h>
#include <sys/time.h>

static volatile sig_atomic_t tu_alarms;

static void tu_count_alarm(int sig) {
    (void)sig;
    tu_alarms++;
}

static inline bool tu_timer_start(void) {
    struct sigaction sa = {.sa_handler = tu_count_alarm, .sa_flags = 0}; /* no SA_RESTART */
    sigemptyset(&sa.sa_mask);
    struct itimerval every = {{0, 500}, {0, 500}};
    return sigaction(SIGALRM, &sa, NULL) == 0 && setitimer(ITIMER_REAL, &every, NULL) == 0;
}

static inline bool tu_timer_stop(void) {
    struct itimerval never = {{0, 0}, {0, 0}};
    return setitimer(ITIMER_REAL, &never, NULL) == 0 && tu_alarms > 0;
}

#endif /* NO_RESTART_TIMER_H */
