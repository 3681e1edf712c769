/*
 * test_runtime_os_resources.c — runtime/src: what an engine's life takes
 * from the operating system, given back: descriptors, mappings, threads
 * (tests/support/os_counts.h) and files, on success and on every failure
 * path.
 *
 * - The life: a timeline opened, an engine on a device of its own with
 *   footprint sidecars, a model made from a spec and saved to a file,
 *   loaded from that file, run, put to sleep and woken, unloaded (its
 *   sidecar written through a temporary file), loaded again (the sidecar
 *   read), run, released; then a model file that is a directory and one
 *   that is a FIFO refused; a model unloaded asleep, another left asleep
 *   for the engine's release; the engine destroyed, the timeline closed.
 * - Failure paths: the same life with the k-th host allocation failing
 *   (malloc_fault.h, fdopen's FILE included), once and from then on, k =
 *   1, 2, ... until nothing more is injected.
 * - After each life: every count exactly that after the first life, and
 *   the directory holding exactly the model file, its sidecar (once a
 *   model ran to its unload) and the timeline: no temporary file left.
 * - No signal's disposition, the thread's mask, a resource limit or the
 *   environment changed, not even by the first life.
 * - Every descriptor the engine gives fdopen is close-on-exec.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc_test_util.h"
#include "malloc_fault.h"
#include "os_counts.h"
#include "test_runtime_util.h"

#define SPEC "mlp:32x300x10:gelu:softmax:seed=3"
#define BATCH 8

/* fdopen mallocs its FILE inside libc, out of --wrap=malloc's reach:
 * wrapped here (runtime.cmake), refused in turn as the others. */
FILE *__real_fdopen(int fd, const char *mode);
FILE *__wrap_fdopen(int fd, const char *mode);
static char inherited[256]; /* the first file fdopen was given without close-on-exec ("": none) */
FILE *__wrap_fdopen(int fd, const char *mode) {
    int flags = fcntl(fd, F_GETFD);
    if (flags >= 0 && !(flags & FD_CLOEXEC) && !inherited[0]) {
        char link[64];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, inherited, sizeof inherited - 1);
        inherited[n > 0 ? n : 0] = '\0';
    }
    if (tu_malloc_fails_now()) {
        errno = ENOMEM;
        return NULL;
    }
    return __real_fdopen(fd, mode);
}

/* The directory's files: the model, its sidecar, the timeline, a
 * directory and a FIFO named as models; nothing else may stay in it. */
enum { MODEL, SIDECAR, TIMELINE, SUBDIR, FIFO, NFILES };
static const char *const names[NFILES] = {"m.safetensors", "m.safetensors.ccfoot", "t.csv", "d.safetensors",
                                          "f.safetensors"};
static char dir[64], paths[NFILES][128];

static void quiet(void *user, const char *line) {
    (void)user;
    (void)line;
}

static void setup(void) {
    snprintf(dir, sizeof dir, "/tmp/ccr_os_XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    for (int i = 0; i < NFILES; i++)
        snprintf(paths[i], sizeof paths[i], "%s/%s", dir, names[i]);
    cr_assert_eq(mkdir(paths[SUBDIR], 0700), 0);
    cr_assert_eq(mkfifo(paths[FIFO], 0600), 0);
}

static void teardown(void) {
    for (int i = 0; i < NFILES; i++)
        i == SUBDIR ? rmdir(paths[i]) : unlink(paths[i]);
    rmdir(dir);
}

TestSuite(runtime_os_resources, .init = setup, .fini = teardown);

/* Every call may fail (a fault injected): the life goes on as far as it
 * can and ends with everything it made given back. */
static void life(void) {
    unlink(paths[SIDECAR]); /* so that the first unload writes it */
    ccr_timeline *t = NULL;
    (void)ccr_timeline_open(paths[TIMELINE], &t);
    ccr_engine_options o;
    ccr_engine_options_default(&o);
    o.device = CCR_DEVICE_HOST;
    o.host_capacity = 64 * MiB;
    o.alloc_conf = "log_oom:0,expandable:1";
    o.footprint_sidecar = 1;
    o.timeline = t;
    o.warn = quiet;
    ccr_engine *e = NULL;
    if (ccr_engine_create(&o, &e) == CCR_OK) {
        ccr_model *m = NULL;
        if (ccr_model_load_spec(e, SPEC, &m) == CCR_OK) {
            (void)ccr_model_save(m, paths[MODEL]);
            ccr_model_unload(m);
        }
        tu_malloc_hold(true);
        static float x[BATCH * 32], y[BATCH * 10];
        tu_malloc_hold(false);
        for (int round = 0; round < 2; round++) {
            if (ccr_model_load_file(e, paths[MODEL], &m) != CCR_OK)
                continue;
            (void)ccr_model_run(m, x, BATCH, y);
            if (ccr_model_sleep(m, NULL) == CCR_OK)
                (void)ccr_model_wake(m, NULL);
            (void)ccr_model_run(m, x, BATCH, y);
            (void)ccr_model_release(m, NULL); /* the sidecar written */
        }
        cr_assert_neq(ccr_model_load_file(e, paths[SUBDIR], &m), CCR_OK, "a directory loaded as a model");
        cr_assert_neq(ccr_model_load_file(e, paths[FIFO], &m), CCR_OK, "a FIFO loaded as a model");
        if (ccr_model_load_spec(e, SPEC, &m) == CCR_OK && ccr_model_run(m, x, BATCH, y) == CCR_OK &&
            ccr_model_sleep(m, NULL) == CCR_OK)
            (void)ccr_model_release(m, NULL); /* unloaded asleep: its host copy goes */
        else if (m)
            ccr_model_unload(m);
        if (ccr_model_load_spec(e, SPEC, &m) == CCR_OK && ccr_model_run(m, x, BATCH, y) == CCR_OK)
            (void)ccr_model_sleep(m, NULL); /* asleep at the engine's end */
        (void)ccr_engine_release(e, NULL);
        ccr_engine_destroy(e);
    }
    (void)ccr_timeline_close(t);
}

Test(runtime_os_resources, lives_leave_nothing) {
    tu_os_repeat(life, 8, "eight engine lives");
    tu_os_only_files(dir, names, NFILES, "eight engine lives");
}

/* Every file the engine opens is close-on-exec: a program that starts a
 * child on another thread meanwhile (ccrun's demo, ccbench switch) would
 * otherwise hand the child a descriptor of it, a sidecar's temporary file
 * kept open (and, a lock's holder, its locks) for the child's life. The
 * descriptors fdopen gets are checked as it gets them. */
Test(runtime_os_resources, files_are_close_on_exec) {
    inherited[0] = '\0';
    life();
    cr_assert_str_empty(inherited, "%s was open without close-on-exec", inherited);
}

static void host_faults(bool sticky) {
    tu_os_counts first = tu_os_now();
    life();
    tu_os_counts before = tu_os_warmed(&first);
    for (long k = 1;; k++) {
        tu_malloc_arm(k, sticky);
        life();
        long injected = tu_malloc_disarm();
        char what[96];
        snprintf(what, sizeof what, "host allocation %ld failing%s", k, sticky ? " and every one after" : "");
        tu_os_same(&before, what);
        tu_os_only_files(dir, names, NFILES, what);
        if (!injected)
            break;
    }
}

Test(runtime_os_resources, host_allocation_failing_once_leaves_nothing) {
    host_faults(false);
}

Test(runtime_os_resources, host_allocation_failing_from_then_on_leaves_nothing) {
    host_faults(true);
}
