/*
 * test_copy_engine.c — allocator/src/upstream/copy_engine.c through the
 * simulated device's host staging and copy ops (cca_upstream_host_alloc,
 * cca_upstream_copy, cca_upstream_copy_wait).
 *
 *   order     a copy queued after another sees its bytes: device <- host,
 *             then host <- device of the same bytes, one wait for both;
 *             a copy larger than a piece, sizes off the page.
 *   ring      more pieces than the ring holds, and many copies at once
 *             below and above the inline size: every byte arrives.
 *   threads   two threads copying through one device at once.
 *   fork      a child copies with the engine its parent used (its thread
 *             is not in the child); the parent's memory untouched; a fork
 *             in the middle of a copy leaves the child an idle engine; a
 *             fork as the engine's thread starts leaves the child no lock
 *             of that thread's start-up held (under AddressSanitizer its
 *             allocator's: before the fix, 3 runs in 4 hung); nor does
 *             a fork as another thread's engine thread starts or exits.
 *   fault     a copy into unmapped device memory kills the process (a
 *             forked child: SIGSEGV, or AddressSanitizer's exit), in the
 *             engine's thread: a use after sleep is never silent.
 *   host      host memory is given back whole (host_bytes_in_use 0).
 *   signals   a signal sent to the process never runs the program's handler
 *             on the engine's thread: with the main thread blocking it, it
 *             waits, pending, until the main thread takes it.
 */
#include <criterion/criterion.h>

#include "alloc_test_util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct dev {
    cca_upstream *u;
    char *base; /* a reserved range, [0, mapped) mapped */
    size_t size, mapped;
} dev;

static dev dev_make(size_t size) {
    dev d = {tu_vm_device_backed(size + 64 * MiB, 0, CCA_VM_WHOLE_MAPS), NULL, size, size};
    void *p = NULL;
    cr_assert_eq(cca_upstream_vm_reserve(d.u, size, &p), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_map(d.u, p, size), CCA_OK, "%s", cca_last_error());
    d.base = p;
    return d;
}

static void dev_done(dev *d) {
    if (d->mapped)
        cr_assert_eq(cca_upstream_vm_unmap(d->u, d->base, d->mapped), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_release(d->u, d->base, d->size), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(tu_upstream_stats(d->u).host_bytes_in_use, 0, "host memory not given back");
    cca_upstream_destroy(d->u);
}

static char *host(dev *d, size_t size) {
    void *p = NULL;
    cr_assert_eq(cca_upstream_host_alloc(d->u, size, &p), CCA_OK, "%s", cca_last_error());
    cr_assert_eq((uintptr_t)p % 256, 0, "host memory not 256-byte aligned");
    return p;
}

static void unhost(dev *d, void *p, size_t size) {
    cr_assert_eq(cca_upstream_host_free(d->u, p, size), CCA_OK, "%s", cca_last_error());
}

static void pattern(char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++)
        p[i] = (char)((i * 131u + seed) % 251u);
}

static void expect_pattern(const char *p, size_t n, unsigned seed, const char *what) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != (char)((i * 131u + seed) % 251u))
            cr_assert_fail("%s: byte %zu of %zu is %d, not %d", what, i, n, p[i], (char)((i * 131u + seed) % 251u));
}

static void copy(dev *d, void *dst, const void *src, size_t n, int to_host) {
    cr_assert_eq(cca_upstream_copy(d->u, dst, src, n, to_host), CCA_OK, "%s", cca_last_error());
}

static void wait_all(dev *d) {
    cr_assert_eq(cca_upstream_copy_wait(d->u), CCA_OK, "%s", cca_last_error());
}

Test(copy_engine, a_copy_queued_after_another_sees_its_bytes) {
    const size_t n = 37 * MiB + 4321; /* several pieces, off the page at both ends */
    dev d = dev_make(64 * MiB);
    char *h1 = host(&d, n), *h2 = host(&d, n);
    pattern(h1, n, 3);
    memset(h2, 0, n);
    copy(&d, d.base + 100, h1, n, 0); /* device <- host */
    copy(&d, h2, d.base + 100, n, 1); /* host <- device, the bytes just queued */
    wait_all(&d);
    expect_pattern(h2, n, 3, "read back");
    expect_pattern(d.base + 100, n, 3, "on the device");
    unhost(&d, h1, n);
    unhost(&d, h2, n);
    dev_done(&d);
}

/* A copy below the inline size runs at once only when no copy is queued
 * or running: one issued while the engine runs the last queued piece waits
 * for it (FIFO), so it reads that piece's bytes. Each round gives the
 * engine another while (0 to 280 us) to claim the piece, so that some small
 * copy meets it running. */
Test(copy_engine, a_small_copy_waits_for_the_piece_the_engine_runs) {
    const size_t n = 4 * MiB, tail = 4096; /* one piece; a copy of its tail stays below the inline size */
    dev d = dev_make(64 * MiB);
    char *h1 = host(&d, n), *h2 = host(&d, tail);
    for (unsigned round = 0; round < 64; round++) {
        pattern(h1, n, round);
        copy(&d, d.base, h1, n, 0);
        usleep(round % 8 * 40);
        copy(&d, h2, d.base + n - tail, tail, 1);
        wait_all(&d);
        for (size_t i = 0; i < tail; i++)
            if (h2[i] != h1[n - tail + i])
                cr_assert_fail("round %u: byte %zu of the tail read %d, not %d", round, i, h2[i], h1[n - tail + i]);
    }
    unhost(&d, h1, n);
    unhost(&d, h2, tail);
    dev_done(&d);
}

Test(copy_engine, more_pieces_than_the_ring_holds_and_many_copies) {
    const size_t big = 300 * MiB; /* 75 pieces of 4 MiB: the ring holds 64 */
    dev d = dev_make(big);
    char *h = host(&d, big);
    pattern(h, big, 9);
    copy(&d, d.base, h, big, 0);
    wait_all(&d);
    expect_pattern(d.base, big, 9, "one big copy");
    /* 200 copies of 1 KiB .. 1 MiB (the inline size is 256 KiB) into a fresh
     * host buffer, all queued, one wait */
    char *back = host(&d, big);
    size_t off = 0;
    for (int i = 0; i < 200; i++) {
        size_t n = (size_t)1024 << (i % 11);
        copy(&d, back + off, d.base + off, n, 1);
        off += n + 4096;
    }
    wait_all(&d);
    off = 0;
    for (int i = 0; i < 200; i++) {
        size_t n = (size_t)1024 << (i % 11);
        cr_assert_eq(memcmp(back + off, d.base + off, n), 0, "copy %d (%zu bytes at %zu) differs", i, n, off);
        off += n + 4096;
    }
    unhost(&d, h, big);
    unhost(&d, back, big);
    dev_done(&d);
}

typedef struct job {
    dev *d;
    char *dst;
    unsigned seed;
} job;

static void *copier(void *arg) {
    job *j = arg;
    const size_t n = 12 * MiB + 17;
    char *h = NULL;
    if (cca_upstream_host_alloc(j->d->u, n, (void **)&h) != CCA_OK)
        return (void *)1;
    for (int r = 0; r < 20; r++) {
        pattern(h, n, j->seed + (unsigned)r);
        if (cca_upstream_copy(j->d->u, j->dst, h, n, 0) != CCA_OK || cca_upstream_copy_wait(j->d->u) != CCA_OK)
            return (void *)2;
        for (size_t i = 0; i < n; i += 4093)
            if (j->dst[i] != (char)((i * 131u + j->seed + (unsigned)r) % 251u))
                return (void *)3;
    }
    return cca_upstream_host_free(j->d->u, h, n) == CCA_OK ? NULL : (void *)4;
}

Test(copy_engine, two_threads_copy_through_one_device) {
    dev d = dev_make(64 * MiB);
    job a = {&d, d.base, 1}, b = {&d, d.base + 32 * MiB, 2};
    pthread_t ta, tb;
    cr_assert_eq(pthread_create(&ta, NULL, copier, &a), 0);
    cr_assert_eq(pthread_create(&tb, NULL, copier, &b), 0);
    void *ra, *rb;
    pthread_join(ta, &ra);
    pthread_join(tb, &rb);
    cr_assert_null(ra, "thread a failed at step %p", ra);
    cr_assert_null(rb, "thread b failed at step %p", rb);
    dev_done(&d);
}

Test(copy_engine, a_child_copies_with_the_engine_its_parent_used) {
    const size_t n = 20 * MiB;
    dev d = dev_make(64 * MiB);
    char *h = host(&d, n);
    pattern(h, n, 5);
    copy(&d, d.base, h, n, 0);
    wait_all(&d);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0, "fork failed");
    if (pid == 0) { /* the child: its own copy of the device's memory, an engine without a thread */
        pattern(h, n, 6);
        int bad = cca_upstream_copy(d.u, d.base, h, n, 0) != CCA_OK || cca_upstream_copy_wait(d.u) != CCA_OK;
        for (size_t i = 0; !bad && i < n; i++)
            bad = d.base[i] != (char)((i * 131u + 6) % 251u);
        _exit(bad ? 1 : 0);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's copy failed (status 0x%x)", status);
    expect_pattern(d.base, n, 5, "the parent's device memory after the child's copy");
    copy(&d, h, d.base, n, 1); /* the parent's engine still runs */
    wait_all(&d);
    expect_pattern(h, n, 5, "the parent's copy after the fork");
    unhost(&d, h, n);
    dev_done(&d);
}

/* The child's step in fork_after_copy, and its alarm: a child that hangs
 * exits 0x40 + the step it hung in, so that the parent's message says
 * where (a wait for the parent's pieces, the copy, its wait, the destroy). */
static volatile sig_atomic_t child_step;

/* Held by a test's other thread while it allocates host memory (its own
 * calls' mallocs), and by fork_after_copy around its fork: a fork never
 * copies a lock of the C library's or the sanitizers' allocator that the
 * program's own thread held, only what the library's threads held. */
static pthread_mutex_t program_malloc = PTHREAD_MUTEX_INITIALIZER;
static unsigned forks; /* by fork_after_copy, in this process */

static void child_alarm(int sig) {
    (void)sig;
    _exit(0x40 + child_step);
}

/* A fork spin_us microseconds after the caller's copy, not waited for;
 * the child's engine must be idle, and work (it copies m bytes of h, above
 * the inline size: its own thread started). The child has 30 s: its work
 * takes milliseconds, and a hang is what it catches (10 s once ran out on
 * a loaded CI machine, the step unknown). */
static void fork_after_copy(dev *d, char *h, size_t m, unsigned spin_us) {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do /* a spin, not a sleep: the engine's thread keeps to its own core */
        clock_gettime(CLOCK_MONOTONIC, &t);
    while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < (long)spin_us * 1000);
    pthread_mutex_lock(&program_malloc);
    forks++;
    pid_t pid = fork();
    pthread_mutex_unlock(&program_malloc);
    cr_assert_geq(pid, 0, "fork failed");
    if (pid == 0) {
        signal(SIGALRM, child_alarm);
        alarm(30);
        child_step = 1;
        int bad = cca_upstream_copy_wait(d->u) != CCA_OK;
        pattern(h, m, 8);
        child_step = 2;
        bad |= (cca_upstream_copy(d->u, d->base, h, m, 0) != CCA_OK) << 1;
        child_step = 3;
        bad |= (cca_upstream_copy_wait(d->u) != CCA_OK) << 1;
        for (size_t i = 0; !bad && i < m; i++)
            bad = (d->base[i] != (char)((i * 131u + 8) % 251u)) << 2;
        child_step = 4;
        cca_upstream_destroy(d->u); /* joins the thread its copy started, not the parent's */
        _exit(bad);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    static const char *const steps[] = {"", "waiting for the parent's pieces", "copying", "waiting for its copy",
                                        "destroying the device"};
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    cr_assert(code != -1, "the child was killed (status 0x%x)", status);
    cr_assert(code < 0x40 || code > 0x44, "the child of fork %u hung %s (30 s)", forks,
              steps[code >= 0x41 && code <= 0x44 ? code - 0x40 : 0]);
    cr_assert_eq(code, 0, "the child failed (bits 0x%x: 1 wait, 2 copy, 4 bytes)", code);
    wait_all(d);
}

/* One round of the test below: a copy of h (n bytes) to d's base, then a fork. */
static void fork_mid_copy(dev *d, char *h, size_t n) {
    copy(d, d->base, h, n, 0); /* not waited for */
    fork_after_copy(d, h, 4 * MiB, 0);
}

/* A fork while the engine's thread runs a piece of a copy: the child has
 * no such thread, so its engine starts empty and idle (fork.c's child
 * handler, through the device's hook): its copies and waits do not wait
 * for the parent's pieces, and its device goes without joining a thread
 * that is not there. The child works under an alarm: a hang fails it. */
Test(copy_engine, a_fork_in_the_middle_of_a_copy_leaves_the_child_an_idle_engine) {
    const size_t n = 48 * MiB; /* many pieces: the engine is likely inside one at the fork */
    dev d = dev_make(64 * MiB);
    char *h = host(&d, n);
    pattern(h, n, 7);
    fflush(NULL);
    for (int round = 0; round < 4; round++) /* four chances to fork with a piece running */
        fork_mid_copy(&d, h, n);
    expect_pattern(d.base, n, 7, "the parent's copy, whole");
    unhost(&d, h, n);
    dev_done(&d);
}

/* A fork just as the engine's thread starts: the first copy above the
 * inline size, into pages already present (it returns within microseconds
 * of pthread_create), then a fork 0 to 75 us later, so that some round
 * forks while the new thread runs its start-up: the code of the C library
 * and of the sanitizers before the engine's loop (AddressSanitizer's frees
 * what pthread_getattr_np allocated, under a lock of its allocator that
 * has no fork handler). A fork that copies such a lock held leaves it held
 * in the child for ever, and the child's own engine thread, starting the
 * same way, waits on it: the child hangs joining it (cca_upstream_destroy).
 * Each round a fresh device, so a fresh thread. */
Test(copy_engine, a_fork_as_the_engines_thread_starts_leaves_the_child_no_lock_held, .timeout = 120) {
    const size_t n = 512 * KiB; /* above the inline size: the thread starts */
    for (unsigned round = 0; round < 128; round++) {
        dev d = dev_make(2 * MiB); /* the granularity */
        char *h = host(&d, n);
        pattern(h, n, round);
        memset(d.base, 0, n); /* present: the copy's populate is quick */
        fflush(NULL);
        copy(&d, d.base, h, n, 0);
        fork_after_copy(&d, h, n, round % 16 * 5);
        expect_pattern(d.base, n, round, "the parent's copy");
        unhost(&d, h, n);
        dev_done(&d);
    }
}

/* Another thread's devices, one after another until *stop: each copies
 * n bytes (its engine's thread started) and is destroyed (that thread
 * stopped and joined). NULL, or the step that failed. */
typedef struct churn {
    atomic_bool stop;
    atomic_uint rounds;
} churn;

static void *churn_devices(void *arg) {
    churn *c = arg;
    const size_t n = 512 * KiB; /* above the inline size: the thread starts */
    while (!atomic_load(&c->stop)) {
        pthread_mutex_lock(&program_malloc); /* its mallocs never copied mid-way: the engine's thread's are */
        cca_upstream *u = tu_vm_device_backed(2 * MiB + 64 * MiB, 0, CCA_VM_WHOLE_MAPS);
        void *base = NULL, *h = NULL;
        if (cca_upstream_vm_reserve(u, 2 * MiB, &base) != CCA_OK || cca_upstream_vm_map(u, base, 2 * MiB) != CCA_OK ||
            cca_upstream_host_alloc(u, n, &h) != CCA_OK)
            return (void *)1;
        memset(base, 0, n); /* present: the copy returns as its thread starts */
        if (cca_upstream_copy(u, base, h, n, 0) != CCA_OK || cca_upstream_copy_wait(u) != CCA_OK)
            return (void *)2;
        if (cca_upstream_host_free(u, h, n) != CCA_OK || cca_upstream_vm_unmap(u, base, 2 * MiB) != CCA_OK ||
            cca_upstream_vm_release(u, base, 2 * MiB) != CCA_OK)
            return (void *)3;
        pthread_mutex_unlock(&program_malloc);
        cca_upstream_destroy(u); /* its engine's thread stops: a fork may meet it exiting (its frees after the join are
                                    the program's, rarely met: 0 hangs in 6 runs with copies below the inline size) */
        atomic_fetch_add(&c->rounds, 1);
    }
    return NULL;
}

/* A fork from one thread while another thread's devices start and stop
 * their engine's threads: a fork that copies one in its start-up or its
 * exit (the C library's and the sanitizers' code: AddressSanitizer's
 * thread exit gives its allocator cache back under the allocator's locks)
 * leaves those locks held in the child, whose own engine thread then
 * waits on them for ever. The other thread's own mallocs are kept from
 * the fork (program_malloc), and it forks only once that thread is up:
 * what a fork may copy mid-way is the library's threads alone. Each child
 * starts a thread of its own and destroys its device under
 * fork_after_copy's alarm. Before the fix, build-asan: 6 runs of 8 hung
 * (at forks 113 to 384 of 400). */
Test(copy_engine, a_fork_as_another_threads_engine_starts_or_stops_leaves_the_child_no_lock_held, .timeout = 240) {
    const size_t n = 512 * KiB;
    dev d = dev_make(2 * MiB);
    char *h = host(&d, n);
    churn c = {0};
    pthread_t t;
    fflush(NULL);
    cr_assert_eq(pthread_create(&t, NULL, churn_devices, &c), 0);
    while (!atomic_load(&c.rounds)) /* the other thread's own start-up over: its locks are the program's */
        usleep(100);
    for (unsigned round = 0; round < 400; round++)
        fork_after_copy(&d, h, n, round % 16 * 7);
    atomic_store(&c.stop, true);
    void *r;
    pthread_join(t, &r);
    cr_assert_null(r, "the other thread's device failed at step %p", r);
    cr_assert_gt(atomic_load(&c.rounds), 0, "the other thread made no device");
    unhost(&d, h, n);
    dev_done(&d);
}

/* In a child, so that the crash is the child's whatever catches the
 * signal: SIGSEGV, or AddressSanitizer's report and exit. */
Test(copy_engine, a_copy_into_unmapped_device_memory_crashes) {
    const size_t n = 8 * MiB; /* above the inline size: the engine's thread runs it */
    dev d = dev_make(64 * MiB);
    char *h = host(&d, n);
    pattern(h, n, 1);
    copy(&d, d.base, h, n, 0);
    wait_all(&d);
    cr_assert_eq(cca_upstream_vm_unmap(d.u, d.base, 64 * MiB), CCA_OK, "%s", cca_last_error());
    d.mapped = 0;
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0, "fork failed");
    if (pid == 0) {
        (void)cca_upstream_copy(d.u, d.base + MiB, h, n, 0);
        (void)cca_upstream_copy_wait(d.u);
        _exit(0); /* the copy returned: the test fails */
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(!(WIFEXITED(status) && WEXITSTATUS(status) == 0),
              "a copy into unmapped memory returned (status 0x%x): a use after sleep would be silent", status);
    cr_log_info("the child died: %s %d", WIFSIGNALED(status) ? "signal" : "exit status",
                WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    unhost(&d, h, n);
    dev_done(&d);
}

static pthread_t main_thread;
static volatile sig_atomic_t on_main, elsewhere;

static void note_thread(int sig) {
    (void)sig;
    if (pthread_equal(pthread_self(), main_thread))
        on_main++;
    else
        elsewhere++;
}

/* A program that blocks a signal in its one thread (a section it must not
 * be interrupted in; a signal thread that takes it with sigwait) expects it
 * to stay pending until it unblocks it, and its handler to run only on its
 * own threads. The engine's thread, idle in its wait, must not take it. In
 * a child: the signal's disposition and mask are the process's. */
Test(copy_engine, a_signal_for_the_process_never_runs_on_the_engines_thread) {
    const size_t n = 8 * MiB; /* above the inline size: the engine's thread starts */
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0, "fork failed");
    if (pid == 0) {
        alarm(10);
        main_thread = pthread_self();
        struct sigaction sa = {.sa_handler = note_thread, .sa_flags = 0};
        sigemptyset(&sa.sa_mask);
        sigset_t usr1;
        sigemptyset(&usr1);
        sigaddset(&usr1, SIGUSR1);
        if (sigaction(SIGUSR1, &sa, NULL) != 0)
            _exit(10);
        dev d = dev_make(64 * MiB);
        char *h = host(&d, n);
        pattern(h, n, 2);
        copy(&d, d.base, h, n, 0);
        wait_all(&d); /* the engine's thread is up, idle */
        if (pthread_sigmask(SIG_BLOCK, &usr1, NULL) != 0 || kill(getpid(), SIGUSR1) != 0)
            _exit(11);
        struct timespec ms = {0, 1000000};
        for (int i = 0; i < 50 && !elsewhere; i++) /* 50 ms for a thread that takes it */
            nanosleep(&ms, NULL);
        sigset_t pending;
        sigpending(&pending);
        int was_pending = sigismember(&pending, SIGUSR1) == 1;
        int ran_elsewhere = elsewhere;
        pthread_sigmask(SIG_UNBLOCK, &usr1, NULL); /* a pending one runs here, now */
        int ran_here = on_main;
        unhost(&d, h, n);
        dev_done(&d);
        if (ran_elsewhere)
            _exit(1); /* the handler ran on the engine's thread */
        if (!was_pending || ran_here != 1)
            _exit(2); /* the signal went nowhere: the test tested nothing */
        _exit(0);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status), "the child died (status 0x%x)", status);
    cr_assert_neq(WEXITSTATUS(status), 1, "the program's handler ran on the copy engine's thread");
    cr_assert_eq(WEXITSTATUS(status), 0, "the child failed at step %d", WEXITSTATUS(status));
}
