/*
 * test_os_resources.c — what the allocator and the simulated device take
 * from the operating system, given back: descriptors, mappings and threads
 * (tests/support/os_counts.h), after every object's life, on success and
 * on every failure path. AddressSanitizer's leak check sees heap memory
 * only; these it does not.
 *
 * - The lives: the simulated device alone (classic allocations, ranges and
 *   maps, host memory and copies: the copy engine's thread), and within
 *   one device's life its mappings back to their number once a thousand
 *   scattered allocations and maps are given back; an allocator
 *   over it in each configuration (classic, expandable, greedy, hold_peak)
 *   through growth, trim, empty-cache, domains made, reserved, put to sleep,
 *   woken and released, stats and snapshots; destroyed with blocks still
 *   live and a domain still asleep; CCALLOC_TRACE's file opened and closed
 *   again and again; the plug's devices made and reset.
 * - Failure paths: the same lives with the k-th host allocation failing
 *   (malloc_fault.h), and with the k-th upstream call of each kind refused
 *   (tu_faulty), k = 1, 2, ... until nothing more is injected; the trace's
 *   first opening and a later section's with the k-th host allocation
 *   failing (fopencookie's FILE included), each in a child of its own (one
 *   refused opening stops the recording for the process), and a section
 *   refused because another process wrote to the file; the plug's devices
 *   made with the k-th host allocation failing.
 * - Threads: an allocator made (its copy engine started) on one thread and
 *   destroyed on another; forks after many lives and after each sweep of
 *   failures (the fork handler walks every object still registered);
 *   pthread_atfork called once, at load, whatever came and went.
 * - Each test runs its life once before the first count (the C library
 *   keeps a thread's stack and arena for reuse), then again and again, and
 *   asserts every count is exactly the first's; and that no signal's
 *   disposition, the calling thread's signal mask, a resource limit or the
 *   environment changed, not even by the first life (os_counts.h's
 *   fingerprints).
 */
#include "alloc_test_util.h"
#include "malloc_fault.h"
#include "os_counts.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define PG ((size_t)64 * KiB)
#define ROUNDS 4

static cca_upstream *device(size_t capacity) {
    cca_host_options o = {.capacity = capacity, .vm_granularity = PG, .vm_backing = CCA_VM_PAGES};
    cca_upstream *u = NULL;
    cr_assert_eq(cca_upstream_host_create_with(&o, &u), CCA_OK, "%s", cca_last_error());
    return u;
}

/* pthread_atfork's calls, counted (allocator.cmake wraps it): fork.c
 * registers its handler once, at load, however many objects come and go. */
int __real_pthread_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void));
int __wrap_pthread_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void));
static int atfork_calls;
int __wrap_pthread_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void)) {
    atfork_calls++;
    return __real_pthread_atfork(prepare, parent, child);
}

/* A fork whose child exits at once: fork.c's handler walks every
 * allocator and upstream still registered (a freed one left on its lists
 * is a use after free here, or a lock taken for ever). */
static void fork_and_reap(const char *what) {
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0)
        _exit(0);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: the child of a fork failed (status %d)", what,
              status);
}

/* ---- the simulated device alone ------------------------------------------- */

/* Every op that maps, or starts the copy engine: classic allocations, a
 * range with maps cut by an unmap, host memory with copies both ways
 * (large enough to go through the engine's thread); `leave` keeps one of
 * each for the destroy. */
static void device_life(bool leave) {
    cca_upstream *u = device(64 * MiB);
    void *p[4];
    for (int i = 0; i < 4; i++)
        cr_assert_eq(cca_upstream_alloc(u, (size_t)(i + 1) * MiB, &p[i]), CCA_OK, "%s", cca_last_error());
    for (int i = 0; i < 4; i += 2)
        cr_assert_eq(cca_upstream_free(u, p[i], (size_t)(i + 1) * MiB), CCA_OK, "%s", cca_last_error());
    void *base;
    cr_assert_eq(cca_upstream_vm_reserve(u, 8 * MiB, &base), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_map(u, base, 4 * MiB), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_vm_unmap(u, (char *)base + PG, PG), CCA_OK, "%s", cca_last_error());
    void *host; /* 4 MiB mapped: 2 MiB multiples from 2 MiB up */
    cr_assert_eq(cca_upstream_host_alloc(u, 3 * MiB, &host), CCA_OK, "%s", cca_last_error());
    memset(host, 7, 3 * MiB);
    cr_assert_eq(cca_upstream_copy(u, (char *)base + 2 * PG, host, 2 * MiB, 0), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_copy(u, host, (char *)base + 2 * PG, 2 * MiB, 1), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_upstream_copy_wait(u), CCA_OK, "%s", cca_last_error());
    if (!leave) {
        cr_assert_eq(cca_upstream_host_free(u, host, 3 * MiB), CCA_OK, "%s", cca_last_error());
        cr_assert_eq(cca_upstream_vm_unmap(u, base, PG), CCA_OK, "%s", cca_last_error());
        cr_assert_eq(cca_upstream_vm_unmap(u, (char *)base + 2 * PG, 4 * MiB - 2 * PG), CCA_OK, "%s", cca_last_error());
        cr_assert_eq(cca_upstream_vm_release(u, base, 8 * MiB), CCA_OK, "%s", cca_last_error());
        for (int i = 1; i < 4; i += 2)
            cr_assert_eq(cca_upstream_free(u, p[i], (size_t)(i + 1) * MiB), CCA_OK, "%s", cca_last_error());
    }
    cca_upstream_destroy(u);
    if (leave) /* host memory outlives the device (ccalloc.h), the caller's to unmap */
        cr_assert_eq(munmap(host, 4 * MiB), 0);
}

/* Within one device's life: a thousand allocations, frees, maps and
 * unmaps at scattered places, then everything given back: the mappings
 * are as many as right after the creation (pieces given back merge with
 * the reserved range around them again, so a long-lived device does not
 * creep towards the kernel's limit on mappings, vm.max_map_count). */
Test(os_resources, a_long_lived_device_merges_what_it_gives_back) {
    cca_upstream *u = device(64 * MiB);
    void *base;
    cr_assert_eq(cca_upstream_vm_reserve(u, 16 * MiB, &base), CCA_OK, "%s", cca_last_error());
    tu_os_counts before = tu_os_now();
    enum { N = 24 };
    void *p[N] = {0};
    bool mapped[16 * MiB / PG] = {0};
    uint64_t rng = 12345;
    for (int i = 0; i < 1000; i++) {
        int k = (int)(tu_rand(&rng) % N);
        if (p[k]) {
            cr_assert_eq(cca_upstream_free(u, p[k], (size_t)(k + 1) * 64 * KiB), CCA_OK, "%s", cca_last_error());
            p[k] = NULL;
        } else {
            cr_assert_eq(cca_upstream_alloc(u, (size_t)(k + 1) * 64 * KiB, &p[k]), CCA_OK, "%s", cca_last_error());
            memset(p[k], 1, 64);
        }
        size_t g = tu_rand(&rng) % (16 * MiB / PG);
        char *at = (char *)base + g * PG;
        if (mapped[g])
            cr_assert_eq(cca_upstream_vm_unmap(u, at, PG), CCA_OK, "%s", cca_last_error());
        else
            cr_assert_eq(cca_upstream_vm_map(u, at, PG), CCA_OK, "%s", cca_last_error());
        if (!mapped[g])
            memset(at, 1, 64);
        mapped[g] = !mapped[g];
    }
    for (int k = 0; k < N; k++)
        if (p[k])
            cr_assert_eq(cca_upstream_free(u, p[k], (size_t)(k + 1) * 64 * KiB), CCA_OK, "%s", cca_last_error());
    for (size_t g = 0; g < 16 * MiB / PG; g++)
        if (mapped[g])
            cr_assert_eq(cca_upstream_vm_unmap(u, (char *)base + g * PG, PG), CCA_OK, "%s", cca_last_error());
    tu_os_same(&before, "a device after a thousand allocations, frees, maps and unmaps");
    cr_assert_eq(cca_upstream_vm_release(u, base, 16 * MiB), CCA_OK, "%s", cca_last_error());
    cca_upstream_destroy(u);
}

static void assert_lives_leave_nothing(void (*life)(bool), bool arg, const char *what) {
    tu_os_counts first = tu_os_now();
    life(arg);
    tu_os_counts before = tu_os_warmed(&first);
    for (int r = 0; r < ROUNDS; r++)
        life(arg);
    tu_os_same(&before, what);
}

Test(os_resources, device_gives_back_every_mapping_and_its_thread) {
    assert_lives_leave_nothing(device_life, false, "the simulated device, everything given back");
}

Test(os_resources, device_destroy_unmaps_what_the_caller_left) {
    assert_lives_leave_nothing(device_life, true, "the simulated device destroyed holding memory of each kind");
}

/* ---- an allocator's life --------------------------------------------------- */

static const char *const confs[] = {
    "log_oom:0,expandable:0",
    "log_oom:0,expandable:1",
    "log_oom:0,expandable:0,policy:greedy,greedy_bytes:16M",
    "log_oom:0,expandable:1,hold_peak:1",
    "log_oom:0,expandable:1,history:64",
};
#define NCONFS (sizeof confs / sizeof confs[0])

/* A program's use of one allocator over u, every call allowed to fail
 * (a fault injected): growth in both pools, trim, empty-cache, two domains
 * (one reserved, one put to sleep and woken, one asleep at the end when
 * `leave`), the writers, then the destroy. Returns nothing: what it
 * leaves is the test's. */
static void allocator_life_on(cca_upstream *u, const char *conf, bool leave) {
    cca_config c;
    cca_config_default(&c);
    if (cca_config_parse(&c, conf) != CCA_OK)
        return;
    cca_allocator *a = NULL;
    if (cca_create(&c, u, &a) != CCA_OK)
        return;
    void *p[16] = {0};
    for (int i = 0; i < 16; i++)
        (void)cca_alloc(a, (size_t)(i % 4 ? 20 * KiB * i : 2 * MiB + 4096 * i), NULL, &p[i]);
    for (int i = 0; i < 16; i += 2)
        if (p[i])
            (void)cca_free(a, p[i]);
    (void)cca_trim(a, 1 * MiB, NULL);
    cca_domain *m = NULL, *s = NULL;
    void *q[6] = {0};
    if (cca_domain_create(a, "m", &m) == CCA_OK) {
        (void)cca_domain_reserve(a, m, 4 * MiB);
        for (int i = 0; i < 3; i++)
            (void)cca_alloc_in(a, m, 512 * KiB, NULL, &q[i]);
    }
    if (cca_domain_create(a, "s", &s) == CCA_OK) {
        for (int i = 3; i < 6; i++) /* 1 MiB copies: through the copy engine's thread */
            if (cca_alloc_in(a, s, 1 * MiB, NULL, &q[i]) == CCA_OK)
                memset(q[i], i, 1 * MiB);
        if (cca_domain_sleep(a, s, 0, NULL) == CCA_OK && !leave)
            (void)cca_domain_wake(a, s, NULL);
    }
    FILE *sink = fopen("/dev/null", "w");
    cr_assert_not_null(sink);
    cca_stats st;
    cca_get_stats(a, &st);
    (void)cca_stats_print(&st, sink);
    (void)cca_stats_write_json(&st, sink);
    (void)cca_write_snapshot_json(a, sink);
    (void)cca_write_snapshot_torch(a, 0, sink);
    (void)cca_domain_stats_write_json(a, sink);
    fclose(sink);
    if (m)
        (void)cca_domain_destroy(a, m, CCA_DOMAIN_FORCE, NULL);
    if (s && !leave)
        (void)cca_domain_destroy(a, s, CCA_DOMAIN_FORCE, NULL);
    for (int i = 1; i < 16 && !leave; i += 2)
        if (p[i])
            (void)cca_free(a, p[i]);
    (void)cca_empty_cache(a, NULL);
    (void)cca_destroy(a); /* live blocks when leave: reported, and given back all the same */
}

static int conf_index;

static void allocator_life(bool leave) {
    cca_upstream *u = device(64 * MiB);
    allocator_life_on(u, confs[conf_index], leave);
    cca_upstream_destroy(u);
}

Test(os_resources, allocator_lives_leave_nothing) {
    for (conf_index = 0; conf_index < (int)NCONFS; conf_index++) {
        assert_lives_leave_nothing(allocator_life, false, confs[conf_index]);
        assert_lives_leave_nothing(allocator_life, true, confs[conf_index]);
    }
}

/* ---- host malloc refused at every step ------------------------------------ */

/* The whole life, device included, with the k-th host allocation failing
 * (once; and from then on), k = 1, 2, ... until nothing more is injected. */
static void malloc_faults(bool sticky, bool leave) {
    for (size_t i = 0; i < 2; i++) { /* classic and expandable, as upstream_faults (below) */
        conf_index = (int)i;
        tu_os_counts first = tu_os_now();
        allocator_life(leave); /* the C library's first-use mappings, before the count */
        tu_os_counts before = tu_os_warmed(&first);
        for (long k = 1;; k++) {
            cca_host_options o = {.capacity = 64 * MiB, .vm_granularity = PG, .vm_backing = CCA_VM_PAGES};
            cca_upstream *u = NULL;
            tu_malloc_arm(k, sticky);
            cca_status made = cca_upstream_host_create_with(&o, &u);
            if (made == CCA_OK)
                allocator_life_on(u, confs[i], leave);
            long injected = tu_malloc_disarm();
            if (made == CCA_OK)
                cca_upstream_destroy(u);
            char what[160];
            snprintf(what, sizeof what, "%s, host allocation %ld failing%s%s", confs[i], k,
                     sticky ? " and every one after" : "", leave ? ", destroyed holding blocks" : "");
            tu_os_same(&before, what);
            if (!injected)
                break;
        }
    }
    fork_and_reap("after the host malloc sweep");
}

Test(os_resources, host_malloc_failing_once_leaves_nothing) {
    malloc_faults(false, false);
}

Test(os_resources, host_malloc_failing_from_then_on_leaves_nothing) {
    malloc_faults(true, false);
    malloc_faults(true, true);
}

/* ---- upstream calls refused at every step --------------------------------- */

/* Classic and expandable: the two kinds of segment, the only ones whose
 * upstream calls differ (greedy's arena and hold_peak's are a classic or
 * an expandable segment's). Every kind but stream_synchronize (tu_faulty_create
 * has no such op) and host_free: a refused host_free's memory stays with
 * the device, and outlives it (ccalloc.h, cca_upstream_host_create). */
static void upstream_faults(size_t conf) {
    conf_index = (int)conf;
    tu_os_counts first = tu_os_now();
    allocator_life(false);
    tu_os_counts before = tu_os_warmed(&first);
    for (int kind = 0; kind < TU_FAULT_KINDS; kind++)
        for (int sticky = 0; sticky < 2 && kind != TU_FAULT_STREAM_SYNC && kind != TU_FAULT_HOST_FREE; sticky++)
            for (uint64_t k = 1;; k++) {
                tu_faulty f;
                cca_upstream *dev = device(64 * MiB);
                cca_upstream *u = tu_faulty_create(&f, dev, "fx", true);
                f.fail_at[kind] = k;
                f.sticky[kind] = sticky;
                allocator_life_on(u, confs[conf], false);
                uint64_t injected = f.failures;
                cca_upstream_destroy(u);
                cca_upstream_destroy(dev);
                char what[160];
                snprintf(what, sizeof what, "%s, %s call %llu refused%s", confs[conf], tu_fault_names[kind],
                         (unsigned long long)k, sticky ? " and every one after" : "");
                tu_os_same(&before, what);
                if (!injected)
                    break;
            }
    fork_and_reap("after the upstream sweep");
}

Test(os_resources, upstream_refusals_leave_nothing_classic) {
    upstream_faults(0);
}

Test(os_resources, upstream_refusals_leave_nothing_expandable) {
    upstream_faults(1);
}

/* ---- CCALLOC_TRACE: the file opened by the first, closed by the last ------ */

static char trace_path[64];

static void traced_life(bool leave) {
    cca_upstream *u = device(64 * MiB);
    cca_allocator *a = tu_allocator(u, "log_oom:0");
    cca_allocator *b = tu_allocator(u, "log_oom:0,expandable:1");
    void *p = tu_alloc(a, 1 * MiB, NULL), *q = tu_alloc(b, 1 * MiB, NULL);
    cr_assert_eq(cca_trace_mark(a, "m"), CCA_OK, "%s", cca_last_error());
    tu_free(a, p);
    tu_free(b, q);
    cr_assert_eq(cca_destroy(leave ? b : a), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_destroy(leave ? a : b), CCA_OK, "%s", cca_last_error());
    cca_upstream_destroy(u);
}

Test(os_resources, trace_file_closed_by_the_last_allocator) {
    snprintf(trace_path, sizeof trace_path, "/tmp/ccalloc_os_trace_%ld.csv", (long)getpid());
    cr_assert_eq(setenv("CCALLOC_TRACE", trace_path, 1), 0);
    assert_lives_leave_nothing(traced_life, false, "two traced allocators, destroyed in order");
    assert_lives_leave_nothing(traced_life, true, "two traced allocators, destroyed in reverse");
    unsetenv("CCALLOC_TRACE");
    unlink(trace_path);
}

/* fopencookie mallocs the trace's FILE inside libc, out of --wrap=malloc's
 * reach: wrapped here (allocator.cmake), refused in turn as the others. */
FILE *__real_fopencookie(void *cookie, const char *mode, cookie_io_functions_t io);
FILE *__wrap_fopencookie(void *cookie, const char *mode, cookie_io_functions_t io);
FILE *__wrap_fopencookie(void *cookie, const char *mode, cookie_io_functions_t io) {
    if (tu_malloc_fails_now()) {
        errno = ENOMEM;
        return NULL;
    }
    return __real_fopencookie(cookie, mode, io);
}

static void quiet(void *user, const char *line) {
    (void)user;
    (void)line;
}

/* traced_life with every call allowed to fail. */
static void traced_life_failing(void) {
    cca_upstream *u = NULL;
    if (cca_upstream_host_create(64 * MiB, &u) != CCA_OK)
        return;
    cca_config c;
    cca_config_default(&c);
    c.log_oom = 0;
    cca_allocator *a = NULL, *b = NULL;
    void *p = NULL, *q = NULL;
    if (cca_create(&c, u, &a) == CCA_OK && cca_alloc(a, 1 * MiB, NULL, &p) == CCA_OK)
        (void)cca_trace_mark(a, "m");
    if (cca_create(&c, u, &b) == CCA_OK)
        (void)cca_alloc(b, 1 * MiB, NULL, &q);
    if (p)
        (void)cca_free(a, p);
    if (q)
        (void)cca_free(b, q);
    if (a)
        (void)cca_destroy(a);
    if (b)
        (void)cca_destroy(b);
    cca_upstream_destroy(u);
}

/* In a child (the recording's state is the process's: one opening refused
 * stops it for good), a traced life with host allocation k failing: 0 when
 * it left nothing, 1 when it did, 2 when nothing was injected. `first`:
 * the failing life is the first to open the file; else one before it
 * opened and closed it (the later section's path). */
static int traced_fault_child(long k, bool first, const char *path) {
    cca_set_log_callback(quiet, NULL); /* the refusals' lines */
    tu_os_counts start = tu_os_now();
    if (!first)
        setenv("CCALLOC_TRACE", path, 1);
    traced_life_failing(); /* the first use's mappings; the trace opened when !first */
    setenv("CCALLOC_TRACE", path, 1);
    tu_os_counts before = tu_os_warmed(&start);
    before.environment = tu_os_environment(); /* the variable set here */
    tu_malloc_arm(k, false);
    traced_life_failing();
    long injected = tu_malloc_disarm();
    tu_os_counts after = tu_os_now();
    return !tu_os_equal(&before, &after) ? 1 : injected ? 0 : 2;
}

static void trace_faults(bool first) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/ccalloc_os_trace_%ld.csv", (long)getpid());
    for (long k = 1;; k++) {
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0)
            _exit(traced_fault_child(k, first, path));
        int status;
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        unlink(path);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) != 1,
                  "host allocation %ld failing in a traced life (%s): "
                  "something left behind (status %d)",
                  k, first ? "its first opening" : "a later section", status);
        if (WEXITSTATUS(status) == 2)
            break;
    }
}

/* A later section refused: another process wrote to the file since the
 * last one closed it (the test appends a line), so the file opened for the
 * section is closed again at once. In a child, as above. */
static int refused_section_child(const char *path) {
    cca_set_log_callback(quiet, NULL); /* the refusal's line */
    setenv("CCALLOC_TRACE", path, 1);
    traced_life_failing();
    tu_os_counts before = tu_os_now();
    FILE *f = fopen(path, "a");
    if (!f || fputs("written by another process\n", f) < 0 || fclose(f) != 0)
        return 3;
    traced_life_failing();
    tu_os_counts after = tu_os_now();
    return tu_os_equal(&before, &after) ? 0 : 1;
}

Test(os_resources, trace_section_refused_leaves_nothing) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/ccalloc_os_trace_%ld.csv", (long)getpid());
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0)
        _exit(refused_section_child(path));
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    unlink(path);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a refused section left something (status %d)", status);
}

Test(os_resources, trace_opening_refused_at_each_allocation_leaves_nothing) {
    trace_faults(true);
    trace_faults(false);
}

/* ---- threads and forks ----------------------------------------------------- */

static void *destroy_on_thread(void *arg) {
    cca_upstream *u = arg;
    cca_upstream_destroy(u);
    return NULL;
}

/* Made and used on this thread (the copy engine started by a sleep's
 * copies), destroyed on another. */
static void across_threads_life(bool leave) {
    cca_upstream *u = device(64 * MiB);
    cca_allocator *a = tu_allocator(u, "log_oom:0,expandable:1");
    void *p = tu_alloc(a, 4 * MiB, NULL);
    memset(p, 1, 4 * MiB);
    cr_assert_eq(cca_sleep(a, 0, NULL), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_wake(a, NULL), CCA_OK, "%s", cca_last_error());
    if (!leave)
        tu_free(a, p);
    (void)cca_destroy(a);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, destroy_on_thread, u), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
}

Test(os_resources, destroyed_on_another_thread) {
    assert_lives_leave_nothing(across_threads_life, false, "made on one thread, destroyed on another");
}

Test(os_resources, fork_after_many_lives) {
    cr_assert_eq(atfork_calls, 1, "pthread_atfork called %d times by the library's load", atfork_calls);
    tu_os_counts first = tu_os_now();
    for (int r = 0; r < 4 * ROUNDS; r++)
        allocator_life(false);
    tu_os_counts before = tu_os_warmed(&first);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) { /* the child makes, uses and destroys its own, on threads of its own */
        tu_os_counts at_fork = tu_os_now();
        across_threads_life(false);
        tu_os_counts mine = tu_os_warmed(&at_fork);
        for (int r = 0; r < ROUNDS; r++)
            across_threads_life(false);
        tu_os_counts after = tu_os_now();
        _exit(tu_os_equal(&mine, &after) ? 0 : 1);
    }
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's life left something (status %d)", status);
    tu_os_same(&before, "a fork");
    cr_assert_eq(atfork_calls, 1, "pthread_atfork called %d times: a registration per object", atfork_calls);
}

/* ---- the plug -------------------------------------------------------------- */

static void plug_life(bool leave) {
    (void)leave;
    cr_assert_eq(cca_plug_configure("host:64M:2", "log_oom:0,expandable:1"), CCA_OK, "%s", cca_last_error());
    void *p = cca_plug_alloc(1 * MiB, 0, NULL), *q = cca_plug_alloc(1 * MiB, 1, NULL);
    cr_assert(p && q, "%s", cca_last_error());
    cca_plug_free(p, 1 * MiB, 0, NULL);
    cca_plug_free(q, 1 * MiB, 1, NULL);
    cr_assert_eq(cca_plug_reset(), CCA_OK, "%s", cca_last_error());
}

Test(os_resources, plug_devices_made_and_reset) {
    assert_lives_leave_nothing(plug_life, false, "the plug's two devices, made and reset");
}

/* The plug's devices made with the k-th host allocation failing (a device
 * whose creation failed stays failed until the reset), k = 1, 2, ... */
Test(os_resources, plug_devices_failing_to_be_made_leave_nothing) {
    cca_set_log_callback(quiet, NULL); /* a failed creation's line */
    tu_os_counts first = tu_os_now();
    plug_life(false);
    tu_os_counts before = tu_os_warmed(&first);
    for (long k = 1;; k++) {
        tu_malloc_arm(k, false);
        void *p = cca_plug_configure("host:64M:2", "log_oom:0,expandable:1") == CCA_OK
                      ? cca_plug_alloc(1 * MiB, 0, NULL)
                      : NULL;
        void *q = cca_plug_alloc(1 * MiB, 1, NULL);
        cca_plug_free(p, 1 * MiB, 0, NULL);
        cca_plug_free(q, 1 * MiB, 1, NULL);
        long injected = tu_malloc_disarm();
        cr_assert_eq(cca_plug_reset(), CCA_OK, "%s", cca_last_error());
        char what[64];
        snprintf(what, sizeof what, "the plug, host allocation %ld failing", k);
        tu_os_same(&before, what);
        if (!injected)
            break;
    }
}
