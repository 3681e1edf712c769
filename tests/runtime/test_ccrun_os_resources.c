/*
 * test_ccrun_os_resources.c — runtime/ccrun: what ccrun's own code takes
 * from the operating system, given back run after run: descriptors,
 * mappings, threads (tests/support/os_counts.h), files and children.
 *
 * - A run: ccrun's code in the test process (ccrun_double.h) saving a
 *   model to a file, then running that file and a spec with --sleep (each
 *   put to sleep and woken), a timeline, a JSON snapshot and footprint
 *   sidecars. After each run: every count exactly that after the first,
 *   no setting changed (os_counts.h), and the directory holding exactly the
 *   outputs, no temporary file.
 * - A child: child.c's ccrun_time_child (common/ccai_capture.h, which
 *   ccbench switch shares) running a shell that lists its own descriptors:
 *   it holds standard input, output (the pipe) and error, the listing's
 *   own, and nothing of this process but what this process holds without
 *   close-on-exec itself; each child is reaped, none left behind. Nor
 *   the pipe of a child another thread is timing at the same moment.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ccrun_double.h"
#include "os_counts.h"

#define SPEC "mlp:32x200x10:gelu:softmax:seed=5"

enum { MODEL, SIDECAR, TIMELINE, SNAPSHOT, LISTING, NFILES };
static const char *const names[NFILES] = {"m.safetensors", "m.safetensors.ccfoot", "t.csv", "s.json", "fds.txt"};
static char dir[64], paths[NFILES][128];

static void setup(void) {
    snprintf(dir, sizeof dir, "/tmp/ccrun_os_XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    for (int i = 0; i < NFILES; i++)
        snprintf(paths[i], sizeof paths[i], "%s/%s", dir, names[i]);
}

static void teardown(void) {
    for (int i = 0; i < NFILES; i++)
        unlink(paths[i]);
    rmdir(dir);
}

TestSuite(ccrun_os_resources, .init = setup, .fini = teardown);

static void ccrun(int argc, char **argv) {
    tu_faulty f;
    ccrun_result r = ccrun_on_double(&f, &(ccrun_setup){.capacity = 64 * MiB}, argc, argv);
    cr_assert_eq(r.rc, CCRUN_OK, "exit 0; stdout:\n%s\nstderr:\n%s", r.out, r.err);
    ccrun_result_free(&r);
}

static void run(void) {
    char *save[] = {"ccrun", "--device", "host", "--iters", "1", "--save", paths[MODEL], SPEC, NULL};
    ccrun(8, save);
    char *sleep[] = {"ccrun",      "--device",      "host",       "--iters",       "1",
                     "--timeline", paths[TIMELINE], "--snapshot", paths[SNAPSHOT], "--footprint-sidecar",
                     "--sleep",    paths[MODEL],    SPEC,         paths[MODEL],    NULL};
    ccrun(14, sleep);
}

Test(ccrun_os_resources, runs_leave_nothing) {
    tu_os_repeat(run, 4, "ccrun, five runs");
    tu_os_only_files(dir, names, NFILES, "ccrun, five runs");
    struct stat st;
    cr_assert_eq(stat(paths[SIDECAR], &st), 0, "the sidecar was written: the run took that path");
}

/* The descriptors this process holds without close-on-exec: what any
 * child of it inherits, whoever starts it. */
static bool inheritable(int fd) {
    int flags = fcntl(fd, F_GETFD);
    return flags >= 0 && !(flags & FD_CLOEXEC);
}

Test(ccrun_os_resources, a_child_inherits_nothing_and_is_reaped) {
    char script[256];
    snprintf(script, sizeof script, "exec ls /proc/self/fd >%s", paths[LISTING]);
    char *argv[] = {"/bin/sh", "-c", script, NULL};
    double wall, ran;
    tu_os_counts first = tu_os_now();
    cr_assert_eq(ccrun_time_child(argv, &wall, &ran), 0, "%s", cca_last_error());
    tu_os_counts before = tu_os_warmed(&first);
    for (int r = 0; r < 4; r++)
        cr_assert_eq(ccrun_time_child(argv, &wall, &ran), 0, "%s", cca_last_error());
    tu_os_same(&before, "five children timed");
    cr_assert_eq(waitpid(-1, NULL, WNOHANG), -1, "a child was left unreaped");
    cr_assert_eq(errno, ECHILD);
    FILE *f = fopen(paths[LISTING], "re"); /* close-on-exec: its number is no inheritable one */
    cr_assert_not_null(f);
    int fd;
    while (fscanf(f, "%d", &fd) == 1)
        cr_assert(fd <= 3 || inheritable(fd), "the child held descriptor %d, close-on-exec here", fd);
    fclose(f);
}

/* The pipes this process holds now. */
static int pipes_held(void) {
    DIR *d = opendir("/proc/self/fd");
    cr_assert_not_null(d);
    int n = 0;
    char link[300], target[64];
    for (struct dirent *e; (e = readdir(d));) {
        snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
        ssize_t len = readlink(link, target, sizeof target - 1);
        n += len > 5 && strncmp(target, "pipe:", 5) == 0;
    }
    closedir(d);
    return n;
}

static void *time_sleeper(void *rc) {
    char *argv[] = {"/bin/sh", "-c", "exec sleep 2", NULL};
    double wall, ran;
    atomic_store((_Atomic int *)rc, ccrun_time_child(argv, &wall, &ran));
    return NULL;
}

/* Two threads each timing a child: the second child must not inherit the
 * pipe of the first (the read end, held while the first child runs): a
 * child that kept the write end would hold the first's output open, and
 * the first thread's read would wait for the second child's end. */
Test(ccrun_os_resources, a_child_inherits_no_other_childs_pipe, .timeout = 60) {
    int held = pipes_held();
    _Atomic int sleeper_rc = -2;
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, time_sleeper, &sleeper_rc), 0);
    /* the other thread's pipe: two ends at the spawn, its read end alone
     * once the child runs (a spawn that failed ends the wait: said) */
    while (pipes_held() != held + 1 && atomic_load(&sleeper_rc) == -2)
        usleep(1000);
    cr_assert_eq(atomic_load(&sleeper_rc), -2, "the sleeper ended first: %d", atomic_load(&sleeper_rc));
    char script[256];
    snprintf(script, sizeof script, "exec ls /proc/self/fd >%s", paths[LISTING]);
    char *argv[] = {"/bin/sh", "-c", script, NULL};
    double wall, ran;
    cr_assert_eq(ccrun_time_child(argv, &wall, &ran), 0, "%s", cca_last_error());
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(sleeper_rc, 0, "%s", cca_last_error());
    FILE *f = fopen(paths[LISTING], "re");
    cr_assert_not_null(f);
    int fd;
    while (fscanf(f, "%d", &fd) == 1)
        cr_expect(fd <= 3 || inheritable(fd), "the child held descriptor %d, the other child's pipe", fd);
    fclose(f);
}
