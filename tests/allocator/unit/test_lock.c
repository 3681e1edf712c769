/*
 * test_lock.c — allocator/src/support/lock.c: the allocator's lock, both protocols, on its own.
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
 *   most 1 ms, checked again), which also finds a lock whose wake was lost;
 * - a forked child's unlock of a lock the parent's threads waited for;
 * - the log (log.c) as it leaves: lines cut at their cap, the queue held
 *   under a lock, a sink that calls back, the default sink's lines whole
 *   through a full pipe and a signal that does not restart its write.
 */
#include <criterion/criterion.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "no_restart_timer.h" /* tests/support/ */

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
    cr_expect_eq(m.unlock, CCAI_UNLOCK_DECREMENT, "the unlock's byte says the protocol, unmarked");
    ccai_mutex_init_kind(&m, true);
    cr_expect_eq(m.unlock, m.asymmetric ? CCAI_UNLOCK_STORE : CCAI_UNLOCK_DECREMENT);
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

/* s->m made and taken by this thread, then n threads (t) wait for it until
 * every one is asleep (asymmetric: the sleeper count is n; symmetric: the
 * word says "contended"), and 50 ms more (the waiters spin out). */
static void waiters_asleep(shared *s, bool asymmetric, pthread_t *t, int n) {
    ccai_mutex_init_kind(&s->m, asymmetric);
    ccai_mutex_lock(&s->m);
    for (int i = 0; i < n; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, take_once, s), 0);
    for (int ms = 0; ms < 10000; ms++) {
        bool asleep = asymmetric ? atomic_load(&s->m.sleepers) == n : atomic_load(&s->m.state) == 2;
        if (asleep && atomic_load(&s->started) == n)
            break;
        sleep_ms(1);
    }
    if (asymmetric)
        cr_assert_eq(atomic_load(&s->m.sleepers), n, "every waiter went to sleep");
    else
        cr_assert_eq(atomic_load(&s->m.state), 2, "a waiter marked the lock contended");
    sleep_ms(50);
    cr_expect_eq(s->counter, 0, "no waiter got the lock while it was held");
}

/* The holder keeps the lock until every waiter is asleep, then lets go. */
static void wakes_every_sleeper(bool asymmetric) {
    shared s = {.counter = 0};
    pthread_t t[WAITERS];
    waiters_asleep(&s, asymmetric, t, WAITERS);
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

/* What the fallback is for: a wake-up lost (here the word freed with no
 * wake at all). With barriers refused a waiter sleeps at most 1 ms at a
 * time and checks again, so it finds the free lock; a sleep without that
 * limit would last for ever (the test's timeout). */
Test(lock, with_barriers_refused_a_waiter_finds_a_lock_freed_without_a_wake, .timeout = 10) {
    need_barriers();
    atomic_store(&ccai_mutex_refuse_barrier, true);
    shared s = {.counter = 0};
    pthread_t t;
    waiters_asleep(&s, true, &t, 1);
    atomic_store(&s.m.state, 0); /* released, the wake lost */
#if CCA_DEBUG >= 1
    ccai_mutexes_held--;
#endif
    pthread_join(t, NULL);
    cr_expect_eq(s.counter, 1);
    cr_expect_eq(atomic_load(&s.m.state), 0);
    atomic_store(&ccai_mutex_refuse_barrier, false);
}

/* A lock held across fork() while other threads of the parent wait for it:
 * the child has none of those threads, so its unlock (fork.c's child
 * handler) forgets them: the word free, no sleeper counted, and the lock
 * taken and freed again at once. */
static void a_forked_child_forgets_the_parents_waiters(bool asymmetric) {
    shared s = {.counter = 0};
    pthread_t t[WAITERS];
    waiters_asleep(&s, asymmetric, t, WAITERS);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        ccai_mutex_unlock_in_child(&s.m);
        int bad = (atomic_load(&s.m.state) != 0) | (atomic_load(&s.m.sleepers) != 0) << 1;
        ccai_mutex_lock(&s.m);
        ccai_mutex_unlock(&s.m);
        bad |= (atomic_load(&s.m.state) != 0) << 2;
        _exit(bad);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_expect(WIFEXITED(status), "the child died (status %d)", status);
    cr_expect_eq(WEXITSTATUS(status), 0, "child: bit 0 word not free, bit 1 sleepers counted, bit 2 not free again");
    ccai_mutex_unlock(&s.m);
    for (int i = 0; i < WAITERS; i++)
        pthread_join(t[i], NULL);
    cr_expect_eq(s.counter, WAITERS);
}

Test(lock, a_forked_child_forgets_the_parents_waiters_symmetric, .timeout = 30) {
    a_forked_child_forgets_the_parents_waiters(false);
}

Test(lock, a_forked_child_forgets_the_parents_waiters_asymmetric, .timeout = 30) {
    need_barriers();
    a_forked_child_forgets_the_parents_waiters(true);
}

/* ---- log lines under the lock ---------------------------------------------------
 *
 * An upstream op runs under its allocator's lock and may log (the CUDA
 * upstream says so when the driver refuses a cleanup step). No line may reach
 * the sink while a ccalloc lock is held (ccalloc.h: a sink may call the
 * library back): the line waits for the unlock. The upstream here is host
 * memory whose alloc and free each log `lines` lines; its refusals log too.
 * The sink checks the allocator's lock word is free whenever it runs (this
 * thread would be holding it) and then calls the allocator back. */

#define MiB ((size_t)1 << 20)

typedef struct talker {
    int lines;   /* logged by each alloc and free */
    bool refuse; /* alloc refuses (OOM), after logging */
} talker;

static cca_status talker_alloc(void *ctx, size_t size, void **ptr) {
    talker *t = ctx;
    for (int i = 0; i < t->lines; i++)
        ccai_log("alloc of %zu: line %d", size, i);
    if (t->refuse)
        return CCA_ERR_OUT_OF_MEMORY;
    *ptr = aligned_alloc(CCA_ALIGNMENT, size);
    return *ptr ? CCA_OK : CCA_ERR_OUT_OF_MEMORY;
}

static cca_status talker_free(void *ctx, void *ptr, size_t size) {
    talker *t = ctx;
    for (int i = 0; i < t->lines; i++)
        ccai_log("free of %zu: line %d", size, i);
    free(ptr);
    return CCA_OK;
}

typedef struct sink_probe {
    cca_allocator *a;
    bool destroying; /* cca_destroy is running: the sink must not call a back */
    int lines, under_lock, called_back;
    char line[16][160];
    bool alloc_inside; /* the sink's call back also allocates a new segment (its op logs) */
    void *inside;      /* what that allocation got */
} sink_probe;

static void probe_sink(void *user, const char *line) {
    sink_probe *p = user;
    if (p->lines < 16)
        snprintf(p->line[p->lines], sizeof p->line[0], "%s", line);
    p->lines++;
    if (atomic_load(&p->a->lock.state) != 0) {
        p->under_lock++; /* calling back would wait for ever: count it and go */
        return;
    }
    if (p->destroying)
        return;
    cca_stats s;
    cca_get_stats(p->a, &s); /* takes the allocator's lock */
    p->called_back++;
    if (p->alloc_inside && !p->inside) /* its op's line is logged inside the sink: to stderr */
        p->called_back += cca_alloc(p->a, 64 * MiB, NULL, &p->inside) == CCA_OK;
}

static cca_allocator *talking_allocator(talker *t, cca_upstream **u, sink_probe *p) {
    cca_upstream_ops ops = {.alloc = talker_alloc, .free = talker_free, .name = "talker"};
    cr_assert_eq(cca_upstream_custom_create(&ops, t, u), CCA_OK, "%s", cca_last_error());
    cca_config c;
    cca_config_default(&c);
    cca_allocator *a = NULL;
    cr_assert_eq(cca_create(&c, *u, &a), CCA_OK, "%s", cca_last_error());
    p->a = a;
    cca_set_log_callback(probe_sink, p);
    return a;
}

static void talking_teardown(cca_allocator *a, cca_upstream *u, sink_probe *p) {
    p->destroying = true;
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    cca_set_log_callback(NULL, NULL);
    cca_upstream_destroy(u);
}

/* Every call that reaches the upstream writes its op's line once the lock is
 * free, before the call returns; the cached pair writes nothing. */
Test(lock, a_line_an_upstream_op_logs_under_the_lock_reaches_the_sink_after_the_unlock) {
    talker t = {.lines = 1};
    cca_upstream *u;
    sink_probe p = {0};
    cca_allocator *a = talking_allocator(&t, &u, &p);
    void *x = NULL;
    cr_assert_eq(cca_alloc(a, 3 * MiB, NULL, &x), CCA_OK, "%s", cca_last_error()); /* a new segment */
    cr_assert_eq(p.lines, 1, "one line by the time cca_alloc returns: %d", p.lines);
    cr_assert(strstr(p.line[0], "alloc of") && strstr(p.line[0], "line 0"), "%s", p.line[0]);
    cr_assert_eq(cca_free(a, x), CCA_OK);
    cr_assert_eq(cca_alloc(a, 3 * MiB, NULL, &x), CCA_OK); /* cached: no op, no line */
    cr_assert_eq(cca_free(a, x), CCA_OK);
    cr_assert_eq(p.lines, 1, "the cached pair logged: %d", p.lines);
    cr_assert_not((a->lock.unlock & CCAI_UNLOCK_LOG), "the lock keeps no mark after its unlock");
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s", cca_last_error()); /* the segment's free */
    cr_assert_eq(p.lines, 2);
    cr_assert(strstr(p.line[1], "free of"), "%s", p.line[1]);
    cr_assert_eq(cca_alloc(a, 3 * MiB, NULL, &x), CCA_OK);
    cr_assert_eq(cca_free(a, x), CCA_OK);
    talking_teardown(a, u, &p); /* cca_destroy's free: under its lock too */
    cr_assert_eq(p.lines, 4, "%d", p.lines);
    cr_assert(strstr(p.line[3], "free of"), "%s", p.line[3]);
    cr_assert_eq(p.under_lock, 0, "%d lines reached the sink under the allocator's lock", p.under_lock);
    cr_assert_eq(p.called_back, 3, "the sink called the allocator back while it lived: %d", p.called_back);
}

/* The op's lines come first, then the allocator's own (the OOM line, which
 * it defers to after the unlock): the order in which they were logged. */
Test(lock, an_ops_lines_come_before_the_oom_line_of_the_same_call) {
    talker t = {.lines = 2, .refuse = true};
    cca_upstream *u;
    sink_probe p = {0};
    cca_allocator *a = talking_allocator(&t, &u, &p);
    void *x = (void *)1;
    cr_assert_eq(cca_alloc(a, 3 * MiB, NULL, &x), CCA_ERR_OUT_OF_MEMORY);
    cr_assert_null(x);
    cca_upstream_stats us;
    cr_assert_eq(cca_upstream_get_stats(u, &us), CCA_OK);
    int ops = (int)us.failed_allocs; /* the sizes it tried: the preferred segment, then the least */
    cr_assert_geq(ops, 1);
    cr_assert_eq(p.lines, 2 * ops + 1, "%d lines for %d refused allocs", p.lines, ops);
    for (int i = 0; i < 2 * ops; i++)
        cr_assert(strstr(p.line[i], "alloc of") && strstr(p.line[i], i % 2 ? "line 1" : "line 0"), "%d: %s", i,
                  p.line[i]);
    cr_assert(strstr(p.line[2 * ops], "out of memory"), "%s", p.line[2 * ops]);
    cr_assert_eq(p.under_lock, 0);
    t.refuse = false;
    talking_teardown(a, u, &p);
}

/* More lines than the queue holds: the first CCAI_LOG_HELD, then one line
 * saying how many more were lost (status.c). */
static void keep_line(void *user, const char *line) {
    snprintf(user, 600, "%s", line);
}

/* A line is at most 511 characters: 511 go whole, 512 are cut to 511
 * ending in "...". */
Test(lock, a_line_one_character_too_long_is_cut_and_says_so) {
    char got[600], text[513];
    memset(text, 'x', sizeof text - 1);
    cca_set_log_callback(keep_line, got);
    text[511] = '\0';
    ccai_log("%s", text);
    cr_assert_eq(strlen(got), 511);
    cr_assert_str_eq(got + 508, "xxx", "511 characters fit");
    text[511] = 'x';
    text[512] = '\0';
    ccai_log("%s", text);
    cr_assert_eq(strlen(got), 511);
    cr_assert_str_eq(got + 508, "...", "512 are cut, and the cut is marked");
    cca_set_log_callback(NULL, NULL);
}

Test(lock, lines_past_the_queue_are_counted_as_lost) {
    talker t = {.lines = CCAI_LOG_HELD + 3};
    cca_upstream *u;
    sink_probe p = {0};
    cca_allocator *a = talking_allocator(&t, &u, &p);
    void *x = NULL;
    cr_assert_eq(cca_alloc(a, 3 * MiB, NULL, &x), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(p.lines, CCAI_LOG_HELD + 1, "%d", p.lines);
    cr_assert(strstr(p.line[CCAI_LOG_HELD - 1], "line 7"), "%s", p.line[CCAI_LOG_HELD - 1]);
    cr_assert_str_eq(p.line[CCAI_LOG_HELD], "3 more lines were not logged");
    t.lines = 1; /* the next holding starts with an empty queue and nothing lost */
    void *y = NULL;
    cr_assert_eq(cca_alloc(a, 64 * MiB, NULL, &y), CCA_OK, "%s", cca_last_error()); /* a new segment */
    cr_assert_eq(p.lines, CCAI_LOG_HELD + 2, "%d: %s", p.lines, p.line[(p.lines - 1) % 16]);
    cr_assert(strstr(p.line[CCAI_LOG_HELD + 1], "line 0"), "%s", p.line[CCAI_LOG_HELD + 1]);
    cr_assert_eq(cca_free(a, x), CCA_OK);
    cr_assert_eq(cca_free(a, y), CCA_OK);
    t.lines = 0;
    talking_teardown(a, u, &p);
    cr_assert_eq(p.under_lock, 0);
}

/* A sink that calls back into the allocator with a call whose op logs: no
 * deadlock (the lock is free when the sink runs) and no recursion (the
 * nested line goes to stderr: it is logged inside the sink). */
Test(lock, a_sink_whose_call_back_logs_neither_waits_nor_recurses, .timeout = 30) {
    talker t = {.lines = 1};
    cca_upstream *u;
    sink_probe p = {.alloc_inside = true};
    cca_allocator *a = talking_allocator(&t, &u, &p);
    void *x = NULL;
    cr_assert_eq(cca_alloc(a, 3 * MiB, NULL, &x), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(p.lines, 1, "the nested call's line reached the sink: %d", p.lines);
    cr_assert_not_null(p.inside, "the sink's own allocation");
    cr_assert_eq(p.called_back, 2);
    cr_assert_eq(cca_free(a, x), CCA_OK);
    cr_assert_eq(cca_free(a, p.inside), CCA_OK);
    t.lines = 0;
    talking_teardown(a, u, &p);
    cr_assert_eq(p.under_lock, 0);
}

/* The default sink writes to stderr. A signal handler installed without
 * SA_RESTART (Python installs every handler so) makes a write(2) waiting
 * on a full pipe fail with EINTR, nothing written: the line must be
 * written all the same, once and whole. (stdio's fwrite dropped it: the
 * first line lost at the first full pipe, about the 1,700th.) */
Test(lock, default_sink_lines_survive_a_signal_that_does_not_restart_the_write, .timeout = 60) {
    enum { LINES = 20000 };
    int fd[2];
    cr_assert_eq(pipe(fd), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(fd[0]);
        if (dup2(fd[1], STDERR_FILENO) < 0 || !tu_timer_start())
            _exit(1);
        for (int i = 0; i < LINES; i++)
            ccai_log("line %d of a talkative program", i);
        _exit(tu_timer_stop() ? 0 : 3); /* 3: no signal came, the test tested nothing */
    }
    close(fd[1]);
    FILE *r = fdopen(fd[0], "r");
    cr_assert_not_null(r);
    char line[512];
    int next = 0, lines = 0;
    while (fgets(line, sizeof line, r)) {
        if (++lines % 128 == 0)
            usleep(1000); /* a slow reader: the pipe full, the writer waiting in write(2) */
        int i = -1;
        char end = 0;
        cr_assert(sscanf(line, "ccalloc: line %d of a talkative program%c", &i, &end) == 2 && end == '\n',
                  "line %d: %s", lines, line);
        cr_assert_eq(i, next, "line %d: %s", lines, line);
        next++;
    }
    fclose(r);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d", status);
    cr_assert_eq(lines, LINES, "%d lines of %d read back", lines, LINES);
}
