/*
 * test_fork.c — allocator/src/support/fork.c: fork() while other threads are inside ccalloc calls, on
 * allocators and upstreams a program made itself (cca_create,
 * cca_upstream_*_create), not only the plug's devices (test_plug.c).
 *
 * fork() copies the memory, every lock word included, but only the
 * forking thread: a lock another thread holds at that instant stays held
 * in the child for ever, and the child's first call that needs it waits
 * for ever. fork.c's handler takes every ccalloc lock before the fork and
 * gives them back free in parent and child.
 *
 * The single-lock cases are deterministic: a holder thread takes the lock a
 * thread inside a call would hold, and lets it go only once the fork
 * handler waits for it (allocator locks count their waiters) or after a
 * fixed time (pthread mutexes do not say), long enough that fork() without
 * a handler returns first and the child starts with the lock held. Every
 * child works under an alarm, so a hang ends as SIGALRM, not a hung run.
 */
#include "alloc_test_util.h"
#include "internal.h"
#include "../observe/trace.h"
#include "pages_rule.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* plug.c's lock, as the fork handler takes it (plug.c has no header:
 * only this test calls it by name). */
void ccai_plug_fork_lock(bool lock);

/* ---- helpers ---------------------------------------------------------------- */

/* Fork; the child runs fn(arg) under a 10 s alarm and exits with its
 * result; the parent asserts the child exited 0. */
static void fork_and_check(int (*fn)(void *), void *arg) {
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        alarm(10);
        _exit(fn(arg));
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status), "the child died of signal %d (SIGALRM %d: it hung on a lock)",
              WIFSIGNALED(status) ? WTERMSIG(status) : 0, SIGALRM);
    cr_assert_eq(WEXITSTATUS(status), 0, "child step %d failed", WEXITSTATUS(status));
}

/* One allocation and its free on a, then the invariants: 0 or a step number. */
static int use_allocator(cca_allocator *a, int step) {
    void *p = NULL;
    if (cca_alloc(a, 3 * MiB, NULL, &p) != CCA_OK || !p)
        return step;
    memset(p, 0x5a, 3 * MiB);
    if (cca_free(a, p) != CCA_OK)
        return step + 1;
    if (cca_empty_cache(a, NULL) != CCA_OK)
        return step + 2;
    return cca_check_invariants(a) == CCA_OK ? 0 : step + 3;
}

typedef struct mutex_holder {
    ccai_mutex *lock;
    atomic_bool held, forked;
} mutex_holder;

/* Holds an allocator lock until it has a waiter (the asymmetric protocol
 * counts it in sleepers, the symmetric one marks the word 2) or fork()
 * returned without waiting (no handler). */
static void wait_for_the_fork(mutex_holder *h) {
    while (!atomic_load(&h->forked) && atomic_load(&h->lock->sleepers) == 0 && atomic_load(&h->lock->state) != 2)
        sched_yield();
}

static void *hold_allocator_lock(void *arg) {
    mutex_holder *h = arg;
    ccai_mutex_lock(h->lock);
    atomic_store(&h->held, true);
    wait_for_the_fork(h);
    ccai_mutex_unlock(h->lock);
    return NULL;
}

typedef struct pthread_holder {
    pthread_mutex_t *lock; /* this mutex, or the lock `take` takes and gives back */
    void (*take)(bool lock);
    atomic_bool held, released;
} pthread_holder;

/* Holds a pthread mutex for 300 ms: fork() without a handler returns long
 * before, so the child would start with it held. `released` is set just
 * before the unlock: a fork whose handler waited for the lock returns
 * after it. */
static void *hold_pthread_lock(void *arg) {
    pthread_holder *h = arg;
    if (h->take)
        h->take(true);
    else
        pthread_mutex_lock(h->lock);
    atomic_store(&h->held, true);
    struct timespec t = {0, 300 * 1000 * 1000};
    nanosleep(&t, NULL);
    atomic_store(&h->released, true);
    if (h->take)
        h->take(false);
    else
        pthread_mutex_unlock(h->lock);
    return NULL;
}

/* Another thread holds h's lock while this one forks; the child runs
 * child(arg). The fork waited for the lock: it was released before. */
static void fork_while_pthread_held(pthread_holder *h, int (*child)(void *), void *arg) {
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, hold_pthread_lock, h), 0);
    while (!atomic_load(&h->held))
        sched_yield();
    fork_and_check(child, arg);
    cr_assert(atomic_load(&h->released), "the fork did not wait for the lock: the parent's handler freed it under "
                                         "its holder");
    pthread_join(t, NULL);
}

/* ---- one lock held at the fork ------------------------------------------------ */

static int child_uses(void *arg) {
    return use_allocator(arg, 10);
}

/* Another thread holds a's lock (what a thread inside a call on it holds;
 * holder: hold_allocator_lock, or another that takes it and waits for the
 * fork the same way) while this one forks; the child runs child(arg) under
 * an alarm and must exit 0. Afterwards the parent's allocator holds exactly
 * `live` bytes in `calls` allocations, as before the fork. */
static void fork_while_held_by(void *(*holder)(void *), cca_allocator *a, int (*child)(void *), void *arg, size_t live,
                               uint64_t calls) {
    mutex_holder h = {.lock = &a->lock};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, holder, &h), 0);
    while (!atomic_load(&h.held))
        sched_yield();
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        alarm(10);
        _exit(child(arg));
    }
    atomic_store(&h.forked, true);
    pthread_join(t, NULL);
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status), "the child died of signal %d (SIGALRM %d: it hung on the allocator's lock)",
              WIFSIGNALED(status) ? WTERMSIG(status) : 0, SIGALRM);
    cr_assert_eq(WEXITSTATUS(status), 0, "child step %d failed", WEXITSTATUS(status));
    cca_stats s = tu_stats(a); /* the parent's allocator is as it was */
    cr_assert_eq(s.allocated_bytes, live);
    cr_assert_eq(s.alloc_calls, calls);
}

static void fork_while_held(cca_allocator *a, int (*child)(void *), void *arg, size_t live, uint64_t calls) {
    fork_while_held_by(hold_allocator_lock, a, child, arg, live, calls);
}

Test(fork, an_allocator_of_ones_own_held_by_another_thread, .timeout = 60) {
    cca_upstream *u = NULL;
    cca_allocator *a = NULL;
    tu_host_allocator(256 * MiB, NULL, &u, &a);
    void *live = tu_alloc(a, 4096, NULL);
    fork_while_held(a, child_uses, a, 4096, 1);
    tu_free(a, live);
    tu_check(a);
    tu_teardown(a, u);
}

/* A thread inside a call whose upstream op logged: the lock is marked and
 * the line waits in that thread for the unlock (lock.c, "The log"). The
 * fork waits for the unlock like any holder's, so the child's copy of the
 * lock is unmarked and the line is the parent's alone (written once, by
 * the holder, after its unlock); in the child a line logged under the lock
 * waits for the unlock there too, and the allocator works. */
static atomic_int fork_lines;
static cca_allocator *fork_lines_of; /* the child checks its lock word while the sink runs */
static atomic_int fork_lines_under_lock;

static void count_fork_lines(void *user, const char *line) {
    (void)user;
    if (strstr(line, "held across the fork") || strstr(line, "the child's line"))
        atomic_fetch_add(&fork_lines, 1);
    if (fork_lines_of && atomic_load(&fork_lines_of->lock.state) != 0)
        atomic_fetch_add(&fork_lines_under_lock, 1);
}

static void *hold_lock_with_a_line(void *arg) {
    mutex_holder *h = arg;
    cca_allocator *a = (cca_allocator *)((char *)h->lock - offsetof(cca_allocator, lock));
    ccai_mutex_lock(h->lock);
    (void)ccai_upstream_op(a); /* as before an op: the lock marked, the log held */
    ccai_log("held across the fork");
    atomic_store(&h->held, true);
    wait_for_the_fork(h);
    ccai_mutex_unlock(h->lock);
    return NULL;
}

static int child_with_the_log(void *arg) {
    cca_allocator *a = arg;
    if ((a->lock.unlock & CCAI_UNLOCK_LOG)) /* the parent's mark came across */
        return 20;
    fork_lines_of = a; /* one thread here: the lock word is this thread's to read */
    int before = atomic_load(&fork_lines);
    ccai_mutex_lock(&a->lock);
    (void)ccai_upstream_op(a);
    ccai_log("the child's line");
    if (atomic_load(&fork_lines) != before)
        return 21; /* written under the lock */
    ccai_mutex_unlock(&a->lock);
    if (atomic_load(&fork_lines) != before + 1 || atomic_load(&fork_lines_under_lock) != 0)
        return 22;
    return use_allocator(a, 23);
}

Test(fork, a_line_held_under_a_lock_at_the_fork_stays_the_parents, .timeout = 60) {
    cca_upstream *u = NULL;
    cca_allocator *a = NULL;
    tu_host_allocator(256 * MiB, NULL, &u, &a);
    cca_set_log_callback(count_fork_lines, NULL);
    fork_while_held_by(hold_lock_with_a_line, a, child_with_the_log, a, 0, 0);
    cr_assert_eq(atomic_load(&fork_lines), 1, "the holder's line, once, in the parent: %d", atomic_load(&fork_lines));
    cr_assert_not((a->lock.unlock & CCAI_UNLOCK_LOG));
    cca_set_log_callback(NULL, NULL);
    tu_teardown(a, u);
}

/* The same with a device of the plug (cca_plug_*: PyTorch's entry points,
 * what a DataLoader worker forked from a training process inherits). */
static int child_plug_alloc_free(void *arg) {
    (void)arg;
    void *p = cca_plug_alloc(4096, 0, NULL);
    if (!p)
        return 2;
    cca_plug_free(p, 4096, 0, NULL);
    cca_allocator *a = NULL;
    if (cca_plug_get_allocator(0, &a) != CCA_OK || tu_stats(a).allocated_bytes != 4096)
        return 3; /* the parent's live block, copied; the child's own is freed */
    return cca_check_invariants(a) == CCA_OK ? 0 : 4;
}

Test(fork, a_plug_device_held_by_another_thread, .timeout = 60) {
    cr_assert_eq(cca_plug_configure("host:64M:2", NULL), CCA_OK, "%s", cca_last_error());
    void *live = cca_plug_alloc(4096, 0, NULL);
    cr_assert_not_null(live, "%s", cca_last_error());
    cca_allocator *a = NULL;
    cr_assert_eq(cca_plug_get_allocator(0, &a), CCA_OK, "%s", cca_last_error());
    fork_while_held(a, child_plug_alloc_free, NULL, 4096, 1);
    cca_plug_free(live, 4096, 0, NULL);
    tu_check(a);
    cr_assert_eq(cca_plug_reset(), CCA_OK, "%s", cca_last_error());
}

typedef struct tenant {
    cca_upstream *u;
    cca_allocator *a;
} tenant;

static int child_raw_and_allocator(void *arg) {
    tenant *t = arg;
    void *p = NULL;
    if (cca_upstream_alloc(t->u, 2 * MiB, &p) != CCA_OK || !p)
        return 20;
    if (cca_upstream_free(t->u, p, 2 * MiB) != CCA_OK)
        return 21;
    return use_allocator(t->a, 30);
}

/* The upstream's counting lock, what a second tenant inside
 * cca_upstream_alloc holds, held at the fork. */
Test(fork, an_upstream_held_by_a_second_tenant, .timeout = 60) {
    cca_upstream *u = NULL;
    cca_allocator *a = NULL;
    tu_host_allocator(256 * MiB, NULL, &u, &a);
    pthread_holder h = {.lock = &u->lock};
    tenant ten = {u, a};
    fork_while_pthread_held(&h, child_raw_and_allocator, &ten);
    tu_teardown(a, u);
}

/* The plug's lock (held while a device's allocator is made) and the
 * trace's (held while a line is written), each held by another thread at
 * the fork: the fork waits for it, and the child has it free. */
static int child_plug_and_trace(void *arg) {
    (void)arg;
    ccai_trace_fork_lock(true); /* free in the child: taken at once */
    ccai_trace_fork_lock(false);
    void *p = cca_plug_alloc(4096, 0, NULL);
    if (!p)
        return 2;
    cca_plug_free(p, 4096, 0, NULL);
    return 0;
}

Test(fork, the_plug_and_trace_locks_held_by_another_thread, .timeout = 60) {
    cr_assert_eq(cca_plug_configure("host:64M:1", NULL), CCA_OK, "%s", cca_last_error());
    cca_plug_free(cca_plug_alloc(4096, 0, NULL), 4096, 0, NULL); /* the device made (the handler set) */
    void (*locks[2])(bool) = {ccai_plug_fork_lock, ccai_trace_fork_lock};
    for (int i = 0; i < 2; i++) {
        pthread_holder h = {.take = locks[i]};
        fork_while_pthread_held(&h, child_plug_and_trace, NULL);
    }
    cr_assert_eq(cca_plug_reset(), CCA_OK, "%s", cca_last_error());
}

/* The log's lock is not taken by the fork (log.h): a thread inside a sink
 * at the fork holds it, and the child makes it anew, so the child's own
 * log calls do not wait for a thread it does not have. */
static atomic_bool sink_entered;

static void slow_sink(void *user, const char *line) {
    (void)user;
    (void)line;
    atomic_store(&sink_entered, true);
    struct timespec t = {0, 300 * 1000 * 1000};
    nanosleep(&t, NULL);
}

static void *log_slowly(void *arg) {
    (void)arg;
    ccai_log("a line to the slow sink");
    return NULL;
}

static void quiet_sink(void *user, const char *line) {
    (void)line;
    (*(int *)user)++;
}

static int child_logs(void *arg) {
    (void)arg;
    int lines = 0;
    cca_set_log_callback(quiet_sink, &lines); /* takes the log's lock */
    ccai_log("the child's line");
    return lines == 1 ? 0 : 2;
}

/* Another thread in a slow sink (the log's lock held) while this one forks. */
static void fork_inside_a_slow_sink(void) {
    cca_set_log_callback(slow_sink, NULL);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, log_slowly, NULL), 0);
    while (!atomic_load(&sink_entered))
        sched_yield();
    fork_and_check(child_logs, NULL);
    pthread_join(t, NULL);
    cca_set_log_callback(NULL, NULL);
}

Test(fork, the_log_held_by_a_sink_at_the_fork_is_free_in_the_child, .timeout = 60) {
    cca_upstream *u = tu_vm_device(64 * MiB, 0);
    fork_inside_a_slow_sink();
    cca_upstream_destroy(u);
}

/* Before any allocator or upstream exists: a thread inside the first
 * cca_plug_alloc holds the plug's lock while it makes the device, before
 * the device's upstream is registered; a thread in a sink holds the log's
 * (a device that cannot be made is logged, with no upstream made). A fork
 * then must still wait for the plug's lock and give the child a free log. */
Test(fork, before_any_allocator_exists_a_fork_still_takes_the_plugs_lock, .timeout = 60) {
    cr_assert_eq(cca_plug_configure("host:64M:1", NULL), CCA_OK, "%s", cca_last_error());
    pthread_holder h = {.take = ccai_plug_fork_lock};
    fork_while_pthread_held(&h, child_plug_and_trace, NULL);
    cr_assert_eq(cca_plug_reset(), CCA_OK, "%s", cca_last_error());
}

Test(fork, before_any_allocator_exists_the_child_has_the_log_free, .timeout = 60) {
    fork_inside_a_slow_sink();
}

/* A cca_create that fails after its record exists (greedy's arena refused)
 * destroys that record, never registered: the allocators registered
 * before stay registered, and a fork still waits for their locks. */
Test(fork, a_failed_cca_create_leaves_the_others_registered, .timeout = 60) {
    cca_upstream *u = NULL;
    cca_allocator *a = NULL;
    tu_host_allocator(256 * MiB, NULL, &u, &a);
    cca_config c;
    cca_config_default(&c);
    cr_assert_eq(cca_config_parse(&c, "policy:greedy,greedy_bytes:1G,log_oom:0"), CCA_OK, "%s", cca_last_error());
    cca_allocator *b = NULL;
    cr_assert_eq(cca_create(&c, u, &b), CCA_ERR_OUT_OF_MEMORY, "%s", cca_last_error());
    cr_assert_null(b);
    fork_while_held(a, child_uses, a, 0, 0);
    tu_teardown(a, u);
}

/* A fork from inside an upstream op (ccalloc.h: not allowed, but not a
 * deadlock): the handler cannot take the allocator's lock, this thread's
 * op holds it, so it leaves that lock alone in the parent, and the op
 * goes on holding it. */
typedef struct forking_op {
    cca_allocator *a;
    bool fork_now;
    int state_after; /* the allocator's lock word, read in the op after the fork */
    pid_t child;
} forking_op;

static cca_status forking_alloc(void *ctx, size_t size, void **ptr) {
    forking_op *f = ctx;
    if (f->fork_now) {
        f->fork_now = false;
        f->child = fork();
        if (f->child == 0)
            _exit(0);
        f->state_after = atomic_load(&f->a->lock.state);
    }
    *ptr = aligned_alloc(CCA_ALIGNMENT, size);
    return *ptr ? CCA_OK : CCA_ERR_OUT_OF_MEMORY;
}

static cca_status forking_free(void *ctx, void *ptr, size_t size) {
    (void)ctx;
    (void)size;
    free(ptr);
    return CCA_OK;
}

Test(fork, a_fork_inside_an_op_leaves_the_ops_lock_held, .timeout = 60) {
    forking_op f = {.state_after = -1};
    cca_upstream_ops ops = {.alloc = forking_alloc, .free = forking_free, .name = "forking"};
    cca_upstream *u = NULL;
    cr_assert_eq(cca_upstream_custom_create(&ops, &f, &u), CCA_OK, "%s", cca_last_error());
    f.a = tu_allocator(u, NULL);
    f.fork_now = true;
    void *p = tu_alloc(f.a, 4096, NULL);
    cr_assert_gt(f.child, 0);
    int status = 0;
    cr_assert_eq(waitpid(f.child, &status, 0), f.child);
    cr_assert_neq(f.state_after, 0, "the handler freed the lock the op's call holds");
    tu_free(f.a, p);
    tu_check(f.a);
    tu_teardown(f.a, u);
}

/* ---- many allocators, shared upstreams, the plug ------------------------------ */

typedef struct scene {
    cca_upstream *shared, *own, *vm;
    cca_allocator *a[4];
    int n;
} scene;

static int child_uses_all(void *arg) {
    scene *s = arg;
    for (int i = 0; i < s->n; i++) {
        int st = use_allocator(s->a[i], 40 + 4 * i);
        if (st)
            return st;
    }
    void *p = cca_plug_alloc(4096, 0, NULL);
    if (!p)
        return 60;
    cca_plug_free(p, 4096, 0, NULL);
    return 0;
}

/* Two allocators over one upstream (its lock must be taken once, not once
 * per allocator), one over its own, one with expandable segments, and a
 * plug device: nothing held, every fork must still work, and the child
 * can use each of them. */
static void make_scene(scene *s) {
    *s = (scene){0};
    s->shared = tu_vm_device(512 * MiB, 0);
    s->own = tu_vm_device(512 * MiB, 0);
    s->vm = tu_vm_device(512 * MiB, 0);
    s->a[s->n++] = tu_allocator(s->shared, NULL);
    s->a[s->n++] = tu_allocator(s->shared, "policy:greedy,greedy_fraction:0.25");
    s->a[s->n++] = tu_allocator(s->own, NULL);
    s->a[s->n++] = tu_allocator(s->vm, "expandable:1");
    cr_assert_eq(cca_plug_configure("host:64M:1", NULL), CCA_OK);
}

static void end_scene(scene *s) {
    for (int i = 0; i < s->n; i++) {
        tu_check(s->a[i]);
        cr_assert_eq(cca_destroy(s->a[i]), CCA_OK, "%s", cca_last_error());
    }
    cca_upstream_destroy(s->shared);
    cca_upstream_destroy(s->own);
    cca_upstream_destroy(s->vm);
    cr_assert_eq(cca_plug_reset(), CCA_OK, "%s", cca_last_error());
}

Test(fork, allocators_sharing_an_upstream_and_a_plug_device, .timeout = 60) {
    scene s;
    make_scene(&s);
    void *p = cca_plug_alloc(4096, 0, NULL);
    cr_assert_not_null(p, "%s", cca_last_error());
    fork_and_check(child_uses_all, &s);
    fork_and_check(child_uses_all, &s); /* the handler left everything as it found it */
    cca_plug_free(p, 4096, 0, NULL);
    end_scene(&s);
}

/* ---- forks in the middle of everything ----------------------------------------- */

typedef struct churn {
    scene *s;
    int index;
    atomic_bool *stop;
    int failures;
} churn;

/* Allocate, free, trim, read stats on one allocator, and make and destroy
 * allocators of its own, until told to stop. */
static void *churn_thread(void *arg) {
    churn *c = arg;
    cca_allocator *a = c->s->a[c->index];
    void *held[8] = {0};
    for (unsigned i = 0; !atomic_load(c->stop); i++) {
        size_t k = i % 8;
        if (held[k] && cca_free(a, held[k]) != CCA_OK)
            c->failures++;
        held[k] = NULL;
        if (cca_alloc(a, (size_t)(1 + (i * 7919) % 3000) * 1024, NULL, &held[k]) != CCA_OK)
            held[k] = NULL; /* OOM is allowed; a failure here is not the point */
        if (i % 16 == 0 && cca_trim(a, 0, NULL) != CCA_OK)
            c->failures++;
        cca_stats st;
        cca_get_stats(a, &st);
        if (st.allocated_bytes > st.reserved_bytes)
            c->failures++;
        if (i % 64 == 0) {
            cca_allocator *mine = NULL;
            if (cca_create(NULL, c->s->own, &mine) != CCA_OK || cca_destroy(mine) != CCA_OK)
                c->failures++;
        }
        void *q = cca_plug_alloc(8192, 0, NULL);
        cca_plug_free(q, 8192, 0, NULL);
    }
    for (size_t k = 0; k < 8; k++)
        if (held[k] && cca_free(a, held[k]) != CCA_OK)
            c->failures++;
    return NULL;
}

Test(fork, forks_while_threads_allocate_trim_and_create, .timeout = 120) {
    scene s;
    make_scene(&s);
    atomic_bool stop = false;
    churn c[4];
    pthread_t t[4];
    for (int i = 0; i < s.n; i++) {
        c[i] = (churn){.s = &s, .index = i, .stop = &stop};
        cr_assert_eq(pthread_create(&t[i], NULL, churn_thread, &c[i]), 0);
    }
    for (int f = 0; f < 40; f++)
        fork_and_check(child_uses_all, &s);
    atomic_store(&stop, true);
    for (int i = 0; i < s.n; i++) {
        pthread_join(t[i], NULL);
        cr_assert_eq(c[i].failures, 0, "thread %d: %d calls failed", i, c[i].failures);
    }
    end_scene(&s);
}

/* fork() gives the child a copy of device memory, as of every other page
 * of the process: a child writing a block it inherited leaves the parent's
 * block as it was, and finds in it what the parent had written (found by
 * tests/allocator/threads/tsan_shared.c). Classic segments are private anonymous pages (copy
 * on write). Expandable segments' maps are private anonymous pages too
 * (host.c, vm_map): a map shared with the child (MAP_SHARED) is what this
 * test finds. Two live blocks around a trimmed hole, so
 * that the device holds several map records, one of them cut by the
 * unmap, and a tail never touched. The child then gives its copy of a
 * block back (empty_cache unmaps it): the parent's block stays. Over whole
 * maps (unmapped only whole) the child's unmaps are granted.
 * map_bytes: the largest map, set through the test hook (pages_rule.h;
 * the least step and cap the defaults'); 0: not set. */
static void child_writes_inherited_blocks(const char *conf, int backing, size_t map_bytes) {
    cca_upstream *u = tu_vm_device_backed(256 * MiB, 0, backing);
    cca_allocator *a = tu_allocator(u, conf);
    if (map_bytes)
        ccai_pages_rule_set(a, 20 * MiB, 64 * MiB, map_bytes);
    unsigned char *p = tu_alloc(a, 3 * MiB, NULL), *hole = tu_alloc(a, 5 * MiB, NULL), *q = tu_alloc(a, 3 * MiB, NULL);
    tu_free(a, hole);
    cr_assert_eq(cca_trim(a, 0, NULL), CCA_OK, "%s", cca_last_error());
    memset(p, 0x11, 3 * MiB);
    memset(q, 0x22, 3 * MiB);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        alarm(10);
        for (size_t i = 0; i < 3 * MiB; i++)
            if (p[i] != 0x11 || q[i] != 0x22)
                _exit(2); /* the child's copy lost the parent's data */
        memset(p, 0x77, 3 * MiB);
        memset(q, 0x77, 3 * MiB);
        if (cca_free(a, p) != CCA_OK || cca_empty_cache(a, NULL) != CCA_OK)
            _exit(5); /* the child's copy of p given back */
        void *r = NULL; /* and the child's allocator goes on */
        if (cca_alloc(a, 4 * MiB, NULL, &r) != CCA_OK)
            _exit(3);
        memset(r, 0x77, 4 * MiB);
        _exit(cca_free(a, r) == CCA_OK && cca_check_invariants(a) == CCA_OK ? 0 : 4);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: the child failed (status %#x)",
              conf ? conf : "classic", status);
    size_t changed = tu_bytes_not(p, 3 * MiB, 0x11) + tu_bytes_not(q, 3 * MiB, 0x22);
    cr_assert_eq(changed, 0, "%s: the child's writes changed %zu bytes of the parent's blocks", conf ? conf : "classic",
                 changed);
    tu_free(a, p);
    tu_free(a, q);
    tu_check(a);
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    cca_upstream_stats us = tu_upstream_stats(u);
    cr_assert_eq(us.bytes_in_use + us.vm_mapped_bytes + us.vm_reserved_bytes, 0, "the device holds nothing");
    cca_upstream_destroy(u);
}

Test(fork, a_childs_writes_stay_in_the_child_classic) {
    child_writes_inherited_blocks(NULL, CCA_VM_PAGES, 0);
}

Test(fork, a_childs_writes_stay_in_the_child_expandable) {
    child_writes_inherited_blocks("expandable:1", CCA_VM_PAGES, 0);
}

Test(fork, a_childs_writes_stay_in_the_child_over_whole_maps) {
    child_writes_inherited_blocks("expandable:1", CCA_VM_WHOLE_MAPS, 2 * MiB); /* a map per 2 MiB page */
}
