/*
 * test_trace_hostile.c — allocator/src/observe/trace.c: CCALLOC_TRACE naming what
 * is not a plain writable file: a directory, a path too long for the
 * system, a symlink, an empty value, a file another process records to;
 * a relative path after a chdir, a file removed between sections, a
 * recording a full disk stopped; and several allocators on threads of
 * their own recording to the one trace at once; a timer's signal whose
 * handler does not restart system calls, while the trace waits on a full
 * pipe; a close that fails; %p in the path; an opening the system refuses
 * (no descriptor left, another process's lock); the standard descriptors
 * closed (the trace takes none of them). cca_create must never fail
 * or wait for the trace, and a trace it cannot open is one clear log line
 * that says why. (A FIFO with no reader and /dev/full: test_trace.c.)
 *
 * Criterion runs each test in its own process, so setenv stays local to it.
 */
#include "alloc_test_util.h"
#include "no_restart_timer.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64];

static void make_dir(void) {
    snprintf(dir, sizeof dir, "/tmp/cca_trace_hostile_XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static void remove_dir(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(trace_hostile, .init = make_dir, .fini = remove_dir, .timeout = 30);

/* cca_create with CCALLOC_TRACE=value: the allocator works, and the log
 * lines cca_create wrote are in *log. */
static void create_and_use(const char *value, tu_log_capture *log) {
    cr_assert_eq(setenv("CCALLOC_TRACE", value, 1), 0);
    cca_set_log_callback(tu_capture_log, log);
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(64 * MiB, NULL, &u, &a);
    cca_set_log_callback(NULL, NULL);
    void *p = tu_alloc(a, 100, NULL);
    tu_free(a, p);
    cr_assert_eq(cca_trace_mark(a, "m"), CCA_OK);
    tu_teardown(a, u);
}

static char *read_file(const char *file) {
    FILE *f = fopen(file, "r");
    cr_assert_not_null(f, "no file %s", file);
    char *buf = calloc(1, 1 << 16);
    size_t n = fread(buf, 1, (1 << 16) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

Test(trace_hostile, a_directory_is_refused_with_the_reason) {
    tu_log_capture log = {0};
    create_and_use(dir, &log);
    cr_assert_eq(log.lines, 1);
    cr_assert(strstr(log.last, "CCALLOC_TRACE") && strstr(log.last, dir) && strstr(log.last, strerror(EISDIR)) &&
                  strstr(log.last, "not tracing"),
              "%s", log.last);
}

/* A path longer than the system takes (PATH_MAX 4096): the log line is cut
 * at 512 bytes, and what it must still say is why, and that nothing is
 * traced. */
Test(trace_hostile, a_path_too_long_is_refused_and_the_line_says_why) {
    static char longpath[6000];
    int n = snprintf(longpath, sizeof longpath, "%s/", dir);
    memset(longpath + n, 'x', sizeof longpath - (size_t)n - 1);
    tu_log_capture log = {0};
    create_and_use(longpath, &log);
    cr_assert_eq(log.lines, 1);
    cr_assert(strstr(log.last, "CCALLOC_TRACE"), "%s", log.last);
    cr_assert(strstr(log.last, strerror(ENAMETOOLONG)) && strstr(log.last, "not tracing"),
              "the reason is cut off the line: %s", log.last);
}

/* A long path that opens (1,500 bytes of "/./" before /dev/full) and
 * cannot be written: the mark's error (1024 bytes at most) and the closing
 * log line (512) still say that the recording is incomplete. */
Test(trace_hostile, a_long_path_that_cannot_be_written_still_says_so) {
    static char longpath[1600];
    size_t n = 0;
    while (n < 1500)
        n += (size_t)snprintf(longpath + n, sizeof longpath - n, "/.");
    snprintf(longpath + n, sizeof longpath - n, "/dev/full");
    cr_assert_eq(setenv("CCALLOC_TRACE", longpath, 1), 0);
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(64 * MiB, NULL, &u, &a);
    void *p = tu_alloc(a, 100, NULL);
    tu_free(a, p);
    cr_assert_eq(cca_trace_mark(a, "m"), CCA_ERR_IO);
    cr_assert(strstr(cca_last_error(), "cca_trace_mark") && strstr(cca_last_error(), "incomplete"),
              "the reason is cut off the error: %s", cca_last_error());
    tu_log_capture log = {0};
    cca_set_log_callback(tu_capture_log, &log);
    tu_teardown(a, u);
    cca_set_log_callback(NULL, NULL);
    cr_assert_eq(log.lines, 1);
    cr_assert(strstr(log.last, "CCALLOC_TRACE") && strstr(log.last, "incomplete"),
              "the reason is cut off the line: %s", log.last);
}

Test(trace_hostile, a_symlink_is_followed_to_its_file) {
    char target[96], link[96];
    snprintf(target, sizeof target, "%s/target.csv", dir);
    snprintf(link, sizeof link, "%s/link.csv", dir);
    cr_assert_eq(symlink(target, link), 0); /* dangling: the trace creates the target */
    tu_log_capture log = {0};
    create_and_use(link, &log);
    cr_assert_eq(log.lines, 0, "%s", log.last);
    char *text = read_file(target);
    cr_assert(strstr(text, "seq,op,id,size,stream,domain,name\n0,alloc,1,100,0,0\n1,free,1,100,0,0\n2,mark,0,0,0,0,m\n"),
              "%s", text);
    free(text);
    struct stat st;
    cr_assert_eq(lstat(link, &st), 0);
    cr_assert(S_ISLNK(st.st_mode), "the link itself is left a link");
}

Test(trace_hostile, a_symlink_loop_is_refused_with_the_reason) {
    char link[96];
    snprintf(link, sizeof link, "%s/loop", dir);
    cr_assert_eq(symlink(link, link), 0);
    tu_log_capture log = {0};
    create_and_use(link, &log);
    cr_assert_eq(log.lines, 1);
    cr_assert(strstr(log.last, link) && strstr(log.last, strerror(ELOOP)), "%s", log.last);
}

/* An empty value is unset: no file, no log line. */
Test(trace_hostile, an_empty_value_traces_nothing_and_says_nothing) {
    char cwd_before[4096];
    cr_assert_not_null(getcwd(cwd_before, sizeof cwd_before));
    cr_assert_eq(chdir(dir), 0);
    tu_log_capture log = {0};
    create_and_use("", &log);
    cr_assert_eq(log.lines, 0, "%s", log.last);
    cr_assert_eq(system("test -z \"$(ls -A .)\""), 0, "nothing created in the working directory");
    cr_assert_eq(chdir(cwd_before), 0);
}

/* ---- several allocators on threads, one trace ---------------------------- */

enum { THREADS = 4, ROUNDS = 2000 };

static pthread_barrier_t all_created;

static void *one_allocator(void *arg) {
    (void)arg;
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(64 * MiB, NULL, &u, &a);
    pthread_barrier_wait(&all_created); /* every allocator alive: one section */
    void *p[8] = {0};
    for (int i = 0; i < ROUNDS; i++) {
        int k = i % 8;
        if (p[k])
            tu_free(a, p[k]);
        p[k] = tu_alloc(a, (size_t)(i % 5000) + 1, (cca_stream)(uintptr_t)(i % 2));
        if (i % 500 == 0)
            cr_assert_eq(cca_trace_mark(a, "tick"), CCA_OK);
    }
    for (int k = 0; k < 8; k++)
        tu_free(a, p[k]);
    tu_teardown(a, u);
    return NULL;
}

/* Every allocator is created before any works (a barrier), so they share
 * one section: whole lines, seq consecutive, every id allocated once and
 * freed once after its allocation, with the same size; every mark there. */
Test(trace_hostile, allocators_on_threads_write_whole_consistent_lines) {
    char file[96];
    snprintf(file, sizeof file, "%s/threads.csv", dir);
    cr_assert_eq(setenv("CCALLOC_TRACE", file, 1), 0);
    pthread_t t[THREADS];
    cr_assert_eq(pthread_barrier_init(&all_created, NULL, THREADS), 0);
    for (int i = 0; i < THREADS; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, one_allocator, NULL), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    FILE *f = fopen(file, "r");
    cr_assert_not_null(f);
    enum { IDS = THREADS * ROUNDS + 1 };
    static long long size_of[IDS];
    static char state[IDS]; /* 0 unseen, 1 allocated, 2 freed */
    char line[256];
    long long seq_next = 0;
    long allocs = 0, frees = 0, marks = 0, sections = 0;
    while (fgets(line, sizeof line, f)) {
        cr_assert(strchr(line, '\n'), "a whole line: %s", line);
        if (line[0] == '#')
            continue;
        if (strcmp(line, "seq,op,id,size,stream,domain,name\n") == 0) {
            seq_next = 0;
            sections++;
            continue;
        }
        long long seq, id, size;
        unsigned stream, domain;
        char op[16];
        int n = sscanf(line, "%lld,%15[a-z],%lld,%lld,%u,%u", &seq, op, &id, &size, &stream, &domain);
        cr_assert_eq(n, 6, "a malformed line: %s", line);
        cr_assert_eq(seq, seq_next, "seq %lld where %lld was due: %s", seq, seq_next, line);
        seq_next++;
        if (strcmp(op, "mark") == 0) {
            cr_assert_str_eq(line + strlen(line) - 6, ",tick\n");
            marks++;
            continue;
        }
        cr_assert(id > 0 && id < IDS, "id %lld", id);
        if (strcmp(op, "alloc") == 0) {
            cr_assert_eq(state[id], 0, "id %lld allocated twice", id);
            state[id] = 1;
            size_of[id] = size;
            allocs++;
        } else {
            cr_assert_str_eq(op, "free");
            cr_assert_eq(state[id], 1, "id %lld freed before its allocation or twice", id);
            cr_assert_eq(size, size_of[id]);
            state[id] = 2;
            frees++;
        }
    }
    fclose(f);
    cr_assert_eq(sections, 1);
    cr_assert_eq(allocs, (long)THREADS * ROUNDS);
    cr_assert_eq(frees, allocs);
    cr_assert_eq(marks, (long)THREADS * (ROUNDS / 500));
}

/* ---- later sections: the same file, whole ----------------------------------- */

/* How many times `what` occurs in text. */
static int occurrences(const char *text, const char *what) {
    int n = 0;
    for (const char *c = strstr(text, what); c; c = strstr(c + 1, what))
        n++;
    return n;
}

/* `file` holds one section with create_and_use's mark once: one
 * allocator's recording, no other section after it. */
static void expect_one_section(const char *file) {
    char *text = read_file(file);
    cr_assert_eq(occurrences(text, "seq,op,id,size,stream,domain,name\n"), 1, "%s", text);
    cr_assert_eq(occurrences(text, ",mark,0,0,0,0,m\n"), 1, "%s", text);
    free(text);
}

/* A relative CCALLOC_TRACE is taken against the working directory of the
 * first opening, and the path is the process's from then on: an allocator
 * created after a chdir, or after CCALLOC_TRACE changed, appends its
 * section to that same file. (It went to a second file, which began with a
 * column header and no "# ccalloc trace v3" line.) */
Test(trace_hostile, later_sections_go_to_the_file_first_opened) {
    char a_dir[96], b_dir[96], first[128], stray[128], other[128], cwd_before[4096];
    snprintf(a_dir, sizeof a_dir, "%s/a", dir);
    snprintf(b_dir, sizeof b_dir, "%s/b", dir);
    snprintf(first, sizeof first, "%s/t.csv", a_dir);
    snprintf(stray, sizeof stray, "%s/t.csv", b_dir);
    snprintf(other, sizeof other, "%s/other.csv", dir);
    cr_assert_eq(mkdir(a_dir, 0700), 0);
    cr_assert_eq(mkdir(b_dir, 0700), 0);
    cr_assert_not_null(getcwd(cwd_before, sizeof cwd_before));
    tu_log_capture log = {0};
    cr_assert_eq(chdir(a_dir), 0);
    create_and_use("t.csv", &log);
    cr_assert_eq(chdir(b_dir), 0);
    create_and_use("t.csv", &log);
    create_and_use(other, &log);
    cr_assert_eq(chdir(cwd_before), 0);
    cr_assert_eq(log.lines, 0, "%s", log.last);
    cr_assert_eq(access(stray, F_OK), -1, "a second file after the chdir");
    cr_assert_eq(access(other, F_OK), -1, "a second file after CCALLOC_TRACE changed");
    char *text = read_file(first);
    cr_assert(strncmp(text, "# ccalloc trace v3\n# source: pid ", 33) == 0, "%s", text);
    cr_assert_eq(occurrences(text, "seq,op,id,size,stream,domain,name\n"), 3, "%s", text);
    cr_assert_eq(occurrences(text, ",mark,0,0,0,0,m\n"), 3, "%s", text);
    free(text);
}

/* The file removed or emptied between sections: the next section begins
 * it again with the trace's header lines, so that it reads as a trace. (It
 * began with a column header and no "# ccalloc trace v3" line.) */
Test(trace_hostile, a_file_removed_or_emptied_between_sections_begins_whole) {
    char file[96];
    snprintf(file, sizeof file, "%s/r.csv", dir);
    tu_log_capture log = {0};
    for (int emptied = 0; emptied < 2; emptied++) {
        create_and_use(file, &log);
        cr_assert_eq(emptied ? truncate(file, 0) : unlink(file), 0);
        create_and_use(file, &log);
        cr_assert_eq(log.lines, 0, "%s", log.last);
        char *text = read_file(file);
        cr_assert(strncmp(text, "# ccalloc trace v3\n# source: pid ", 33) == 0, "%s: %s",
                  emptied ? "emptied" : "removed", text);
        cr_assert_eq(occurrences(text, "seq,op,id,size,stream,domain,name\n"), 1, "%s", text);
        cr_assert_eq(occurrences(text, "# ccalloc trace v3\n"), 1, "%s", text);
        free(text);
    }
}

/* A recording stopped by a failed write stays stopped: an allocator
 * created once every allocator that was recording is destroyed records
 * nothing and says nothing, and its marks are no-ops (the header's words
 * on CCA_ERR_IO). */
Test(trace_hostile, a_recording_a_full_disk_stopped_is_not_opened_again) {
    cr_assert_eq(setenv("CCALLOC_TRACE", "/dev/full", 1), 0);
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(64 * MiB, NULL, &u, &a);
    cr_assert_eq(cca_trace_mark(a, "m"), CCA_ERR_IO);
    cr_assert_eq(cca_trace_mark(a, "again"), CCA_ERR_IO, "every later mark says so");
    tu_log_capture log = {0};
    cca_set_log_callback(tu_capture_log, &log);
    tu_teardown(a, u);
    cr_assert_eq(log.lines, 1, "the close says it once");
    tu_host_allocator(64 * MiB, NULL, &u, &a);
    void *p = tu_alloc(a, 100, NULL);
    tu_free(a, p);
    cr_assert_eq(cca_trace_mark(a, "m"), CCA_OK, "%s", cca_last_error());
    tu_teardown(a, u);
    cca_set_log_callback(NULL, NULL);
    cr_assert_eq(log.lines, 1, "nothing more: %s", log.last);
}

/* A child, forked now, that records one section with the mark "child":
 * it first waits for a byte on `start`, writes one to `opened` once the
 * mark is written and waits for one on `done` before closing (-1: none of
 * that). It exits 0 when every step went. */
static pid_t fork_recording_child(int start, int opened, int done) {
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid > 0)
        return pid;
    char c = 'x';
    cca_upstream *u;
    cca_allocator *a;
    if ((start >= 0 && read(start, &c, 1) != 1) || cca_upstream_host_create(64 * MiB, &u) != CCA_OK ||
        cca_create(NULL, u, &a) != CCA_OK || cca_trace_mark(a, "child") != CCA_OK ||
        (opened >= 0 && write(opened, &c, 1) != 1) || (done >= 0 && read(done, &c, 1) != 1))
        _exit(1);
    cca_destroy(a);
    cca_upstream_destroy(u);
    _exit(0);
}

static void exited_cleanly(pid_t pid) {
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* CCALLOC_TRACE=file, and an allocator created and used (into *log) while
 * a child forked before any allocator records to the file; the child
 * ended cleanly afterwards. Its pid. */
static pid_t use_while_a_child_records(const char *file, tu_log_capture *log) {
    cr_assert_eq(setenv("CCALLOC_TRACE", file, 1), 0);
    int opened[2], done[2];
    cr_assert_eq(pipe(opened), 0);
    cr_assert_eq(pipe(done), 0);
    pid_t pid = fork_recording_child(-1, opened[1], done[0]);
    char c = 'x';
    cr_assert_eq(read(opened[0], &c, 1), 1);
    create_and_use(file, log);
    cr_assert_eq(write(done[1], &c, 1), 1);
    exited_cleanly(pid);
    return pid;
}

/* A file another process is recording to (a child forked before the
 * trace was opened, holding it open): the parent's allocator is not
 * tracing, and the one log line says why; the child's trace is left whole. */
Test(trace_hostile, a_file_another_process_records_to_is_refused_with_the_reason) {
    char file[96];
    snprintf(file, sizeof file, "%s/held.csv", dir);
    tu_log_capture log = {0};
    (void)use_while_a_child_records(file, &log);
    cr_assert_eq(log.lines, 1);
    cr_assert(strstr(log.last, "not tracing") && strstr(log.last, "another process is recording to it") &&
                  strstr(log.last, file),
              "%s", log.last);
    char *text = read_file(file);
    cr_assert(strncmp(text, "# ccalloc trace v3\n", 19) == 0 && strstr(text, ",mark,0,0,0,0,child\n") &&
                  !strstr(text, ",m\n"),
              "%s", text);
    free(text);
}

/* The lock goes with the last close: between two sections another process
 * (a child forked before the first opening, a worker started with the same
 * environment) may open the file, empty it and record its own trace. The
 * next section must not be appended to that one (a second process's lines
 * under the first one's header line, its ids among the other's): it is
 * refused, said once, and the other's trace is left whole. (It appended a
 * section: two column headers, "m" marks after the child's.) */
Test(trace_hostile, a_file_another_process_wrote_between_sections_is_left_whole) {
    char file[96];
    snprintf(file, sizeof file, "%s/between.csv", dir);
    cr_assert_eq(setenv("CCALLOC_TRACE", file, 1), 0);
    int go[2];
    cr_assert_eq(pipe(go), 0);
    pid_t pid = fork_recording_child(go[0], -1, -1);
    char c = 'x';
    tu_log_capture log = {0};
    create_and_use(file, &log); /* the first section, closed: no lock held */
    cr_assert_eq(log.lines, 0, "%s", log.last);
    cr_assert_eq(write(go[1], &c, 1), 1);
    exited_cleanly(pid);
    create_and_use(file, &log);
    cr_assert_eq(log.lines, 1, "said once");
    cr_assert(strstr(log.last, "not tracing") && strstr(log.last, "another process") && strstr(log.last, file), "%s",
              log.last);
    char *text = read_file(file);
    char source[64];
    snprintf(source, sizeof source, "# ccalloc trace v3\n# source: pid %ld\n", (long)pid);
    cr_assert(strncmp(text, source, strlen(source)) == 0, "%s", text);
    cr_assert_eq(occurrences(text, "seq,op,id,size,stream,domain,name\n"), 1, "%s", text);
    cr_assert(strstr(text, ",mark,0,0,0,0,child\n") && !strstr(text, ",m\n"), "%s", text);
    free(text);
}

/* Every descriptor of the process taken (the soft RLIMIT_NOFILE lowered
 * first, so that filling it is quick; Criterion runs each test in a
 * process of its own): the next open(2) fails with EMFILE. */
typedef struct fd_fill {
    int fds[512];
    int n;
    struct rlimit old;
} fd_fill;

static void fill_fds(fd_fill *f) {
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &f->old), 0);
    struct rlimit low = {256, f->old.rlim_max};
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
    for (f->n = 0; f->n < 512; f->n++)
        if ((f->fds[f->n] = open("/dev/null", O_RDONLY)) < 0)
            break;
    cr_assert_eq(errno, EMFILE, "the descriptors ran out after %d", f->n);
}

static void free_fds(fd_fill *f) {
    while (f->n > 0)
        close(f->fds[--f->n]);
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &f->old), 0);
}

/* An allocator created while every descriptor is taken: its opening of
 * `file` is refused, logged once (EMFILE, the file named) into *log, which
 * held no line; then, descriptors free again, a later allocator records
 * and says nothing. */
static void refused_then_silent(const char *file, tu_log_capture *log) {
    fd_fill fill;
    fill_fds(&fill);
    create_and_use(file, log);
    free_fds(&fill);
    cr_assert_eq(log->lines, 1, "%s", log->last);
    cr_assert(strstr(log->last, "not tracing") && strstr(log->last, strerror(EMFILE)) && strstr(log->last, file), "%s",
              log->last);
    create_and_use(file, log);
    cr_assert_eq(log->lines, 1, "nothing more: %s", log->last);
}

/* An opening the system refuses (EMFILE: every descriptor taken) is said
 * once, naming the reason, and stops the recording as a failed write does:
 * an allocator created once descriptors are free again records nothing
 * and says nothing, so the file never reads as whole while it lacks what
 * the refused allocator did. At a later section: the file keeps its one
 * section (a second one was appended after the gap, the refused
 * allocator's events missing from a file that read as whole). */
Test(trace_hostile, a_later_section_the_system_refuses_stops_the_recording) {
    char file[96];
    snprintf(file, sizeof file, "%s/nofile.csv", dir);
    tu_log_capture log = {0};
    create_and_use(file, &log); /* the first section, closed */
    cr_assert_eq(log.lines, 0, "%s", log.last);
    refused_then_silent(file, &log);
    expect_one_section(file);
}

/* The same at the first opening: the allocator the system refused is not
 * in any trace, so no later allocator starts one (a trace of the later
 * allocators alone, read as the process's whole, was made). */
Test(trace_hostile, a_first_opening_the_system_refuses_stops_the_recording) {
    char file[96];
    snprintf(file, sizeof file, "%s/nofile-first.csv", dir);
    tu_log_capture log = {0};
    refused_then_silent(file, &log);
    struct stat st;
    cr_assert(stat(file, &st) != 0 && errno == ENOENT, "a trace was started after the refused allocator");
}

/* A file another process holds (its lock refuses the opening): once that
 * process is done, a later allocator of this one must not take the file,
 * empty it and record over the other's whole trace (it did: the file then
 * held only this process's section). It records nothing and says nothing. */
Test(trace_hostile, a_file_another_process_held_at_the_opening_is_never_emptied_later) {
    char file[96];
    snprintf(file, sizeof file, "%s/held-later.csv", dir);
    tu_log_capture log = {0};
    pid_t pid = use_while_a_child_records(file, &log); /* refused: the child holds the file */
    cr_assert_eq(log.lines, 1, "%s", log.last);
    create_and_use(file, &log); /* the child is gone, its trace stays */
    cr_assert_eq(log.lines, 1, "nothing more: %s", log.last);
    char *text = read_file(file);
    char source[64];
    snprintf(source, sizeof source, "# ccalloc trace v3\n# source: pid %ld\n", (long)pid);
    cr_assert(strncmp(text, source, strlen(source)) == 0, "%s", text);
    cr_assert(strstr(text, ",mark,0,0,0,0,child\n") && !strstr(text, ",m\n"), "%s", text);
    free(text);
}

/* A program that runs with standard descriptors closed (a daemon, `prog
 * >&- 2>&-`): the trace's file must not take descriptor 0, 1 or 2, the
 * lowest free ones, or whatever the program, or the library's own log
 * (its default sink is stderr), writes there lands in the trace. For each
 * set of closed descriptors, in a child: an alloc, an OOM (its log line
 * goes to stderr), a line the program writes to each closed descriptor
 * (each must still fail, EBADF: closed), a mark. The file holds the trace
 * alone. (With 2 closed, the OOM's log line and the program's line were in
 * the file between its header and its events, a trace no reader takes;
 * with 1 closed, the program's printf output.) */
Test(trace_hostile, the_standard_descriptors_closed_the_trace_takes_none_of_them) {
    static const unsigned sets[] = {1u << 0, 1u << 1, 1u << 2, 1u << 1 | 1u << 2, 7u};
    for (size_t k = 0; k < sizeof sets / sizeof *sets; k++) {
        char file[96];
        snprintf(file, sizeof file, "%s/daemon%zu.csv", dir, k);
        cr_assert_eq(setenv("CCALLOC_TRACE", file, 1), 0);
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
            for (int fd = 0; fd <= 2; fd++)
                if (sets[k] >> fd & 1)
                    close(fd);
            cca_upstream *u;
            cca_allocator *a;
            void *p, *q;
            static const char line[] = "the program's own line\n";
            int rc = cca_upstream_host_create(64 * MiB, &u) != CCA_OK || cca_create(NULL, u, &a) != CCA_OK ||
                     cca_alloc(a, 100, NULL, &p) != CCA_OK || cca_alloc(a, (size_t)1 << 40, NULL, &q) == CCA_OK;
            for (int fd = 0; fd <= 2; fd++)
                if (sets[k] >> fd & 1)
                    rc |= (write(fd, line, sizeof line - 1) >= 0 || errno != EBADF) << 1;
            rc |= (cca_trace_mark(a, "m") != CCA_OK) << 2;
            if (!(rc & 1)) {
                cca_free(a, p);
                cca_destroy(a);
                cca_upstream_destroy(u);
            }
            _exit(rc);
        }
        int status;
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_assert(WIFEXITED(status), "the child did not exit");
        cr_assert_eq(WEXITSTATUS(status), 0,
                     "closed set %#x: the child's steps (bits: 1 a call, 2 a closed descriptor written, 4 mark)",
                     sets[k]);
        char *text = read_file(file);
        cr_assert(!strstr(text, "ccalloc:") && !strstr(text, "own line"), "closed set %#x: %s", sets[k], text);
        cr_assert(strstr(text, "seq,op,id,size,stream,domain,name\n0,alloc,1,100,0,0\n") &&
                      strstr(text, ",mark,0,0,0,0,m\n"),
                  "closed set %#x: %s", sets[k], text);
        free(text);
    }
}

/* In a child: `events` alloc/free pairs of sizes 1..3000 on an allocator
 * of its own (so 2 x events trace lines), with the no-restart timer running
 * when `timer`; exits 0, or 1/2 when a call failed, 3 when no signal came. */
static _Noreturn void record_pairs(int events, bool timer) {
    cca_upstream *u;
    cca_allocator *a;
    if ((timer && !tu_timer_start()) || cca_upstream_host_create(64 * MiB, &u) != CCA_OK ||
        cca_create(NULL, u, &a) != CCA_OK)
        _exit(1);
    for (int i = 0; i < events; i++) {
        void *p;
        if (cca_alloc(a, 1 + (size_t)i % 3000, NULL, &p) != CCA_OK || cca_free(a, p) != CCA_OK)
            _exit(2);
    }
    if (timer && !tu_timer_stop())
        _exit(3); /* no signal came: the test tested nothing */
    cca_destroy(a);
    cca_upstream_destroy(u);
    _exit(0);
}

/* Two processes tracing to one pipe (CCALLOC_TRACE=/dev/stderr piped to a
 * logger; a device or a pipe is shared): a write to a pipe is whole only
 * up to PIPE_BUF bytes, so each flush must be at most that, or a full pipe
 * takes part of one process's write, then the other's, mid-line. (The
 * recorder flushed up to 8192 bytes: lines like "215,free,108,103232,alloc,1617".) */
Test(trace_hostile, two_processes_tracing_to_one_pipe_write_whole_lines) {
    enum { EVENTS = 40000 };
    int fd[2];
    cr_assert_eq(pipe(fd), 0);
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd[1]);
    cr_assert_eq(setenv("CCALLOC_TRACE", path, 1), 0);
    pid_t kids[2];
    for (int k = 0; k < 2; k++) {
        kids[k] = fork();
        cr_assert_geq(kids[k], 0);
        if (kids[k] == 0) {
            close(fd[0]);
            record_pairs(EVENTS, false);
        }
    }
    close(fd[1]);
    FILE *r = fdopen(fd[0], "r");
    cr_assert_not_null(r);
    char line[512];
    long lines = 0, cut = 0;
    while (fgets(line, sizeof line, r)) {
        if (++lines % 256 == 0)
            usleep(1000); /* a slow reader: the pipe full, the writers waiting */
        if (line[0] == '#' || !strncmp(line, "seq,", 4))
            continue;
        int commas = 0;
        for (const char *c = line; *c; c++)
            commas += *c == ',';
        const char *op = strchr(line, ',') + 1;
        if (commas != 5 || (strncmp(op, "alloc,", 6) != 0 && strncmp(op, "free,", 5) != 0))
            cut++;
    }
    fclose(r);
    for (int k = 0; k < 2; k++)
        exited_cleanly(kids[k]);
    cr_assert_eq(cut, 0, "%ld lines cut of %ld", cut, lines);
    cr_assert_eq(lines, 2 * (3 + 2 * EVENTS));
}

/* A signal handler installed without SA_RESTART (Python installs every
 * handler so; a sampling profiler's timer) makes a write(2) waiting on a
 * full pipe fail with EINTR, nothing written. Every event must still be
 * written, once and whole. (stdio's flush gave up there and the recording
 * stopped as on a full disk at the first full pipe: 3,231 of 40,000
 * events read back.) */
Test(trace_hostile, a_signal_handler_without_restart_does_not_stop_a_pipe_trace) {
    enum { EVENTS = 20000 };
    int fd[2];
    cr_assert_eq(pipe(fd), 0);
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd[1]);
    cr_assert_eq(setenv("CCALLOC_TRACE", path, 1), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(fd[0]);
        record_pairs(EVENTS, true);
    }
    close(fd[1]);
    FILE *r = fdopen(fd[0], "r");
    cr_assert_not_null(r);
    char line[512];
    long lines = 0, events = 0, last_seq = -1;
    while (fgets(line, sizeof line, r)) {
        if (++lines % 256 == 0)
            usleep(1000); /* a slow reader: the pipe full, the writer waiting in write(2) */
        long seq;
        char op[8];
        if (sscanf(line, "%ld,%7[a-z],", &seq, op) == 2 && (!strcmp(op, "alloc") || !strcmp(op, "free"))) {
            cr_assert_eq(seq, last_seq + 1, "line %ld: %s", lines, line);
            last_seq = seq;
            events++;
        }
    }
    fclose(r);
    exited_cleanly(pid);
    cr_assert_eq(events, 2 * EVENTS, "%ld events of %d read back", events, 2 * EVENTS);
    cr_assert_eq(lines, 3 + 2 * EVENTS);
}

/* close(2) for the whole program: the first close of a descriptor on the
 * file whose inode is failing_ino fails with EIO (the descriptor closed
 * all the same, as Linux does), as NFS reports at the close a write it
 * could not keep. Every other close is the system's. */
static ino_t failing_ino;

int close(int fd) {
    struct stat st;
    if (failing_ino && fstat(fd, &st) == 0 && st.st_ino == failing_ino) {
        failing_ino = 0;
        (void)syscall(SYS_close, fd);
        errno = EIO;
        return -1;
    }
    return (int)syscall(SYS_close, fd);
}

/* The close that ends a section fails: the file may not hold what was
 * written, so it is said once and no later allocator appends a section to
 * it. (A later section was appended: two column headers, the mark "m"
 * twice.) */
Test(trace_hostile, a_close_that_fails_stops_the_recording) {
    char file[96];
    snprintf(file, sizeof file, "%s/nfs.csv", dir);
    cr_assert_eq(setenv("CCALLOC_TRACE", file, 1), 0);
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(64 * MiB, NULL, &u, &a);
    cr_assert_eq(cca_trace_mark(a, "m"), CCA_OK);
    struct stat st;
    cr_assert_eq(stat(file, &st), 0);
    failing_ino = st.st_ino;
    tu_log_capture log = {0};
    cca_set_log_callback(tu_capture_log, &log);
    tu_teardown(a, u);
    cca_set_log_callback(NULL, NULL);
    cr_assert_eq(failing_ino, 0, "the trace's close was not the one that failed");
    cr_assert_eq(log.lines, 1);
    cr_assert(strstr(log.last, "writing failed") && strstr(log.last, file), "%s", log.last);
    tu_log_capture later = {0};
    create_and_use(file, &later);
    cr_assert_eq(later.lines, 0, "%s", later.last);
    expect_one_section(file);
}

/* ---- %p: a trace per process ---------------------------------------------- */

/* CCALLOC_TRACE with %p names one file per process (its id), so that the
 * processes a launcher starts with one environment (ranks, workers) each
 * record a whole trace instead of all but the first being refused; %% is
 * one '%'. Two children forked before any allocator, and the parent: three
 * files, each its own process's, nothing logged. */
Test(trace_hostile, a_percent_p_names_one_file_per_process) {
    char pattern[96];
    snprintf(pattern, sizeof pattern, "%s/rank.%%p.%%%%.csv", dir); /* <dir>/rank.%p.%%.csv */
    cr_assert_eq(setenv("CCALLOC_TRACE", pattern, 1), 0);
    pid_t pids[3];
    for (int k = 0; k < 2; k++)
        pids[k] = fork_recording_child(-1, -1, -1);
    tu_log_capture log = {0};
    create_and_use(pattern, &log);
    cr_assert_eq(log.lines, 0, "%s", log.last);
    pids[2] = getpid();
    for (int k = 0; k < 2; k++)
        exited_cleanly(pids[k]);
    for (int k = 0; k < 3; k++) {
        char file[128], source[64];
        snprintf(file, sizeof file, "%s/rank.%ld.%%.csv", dir, (long)pids[k]);
        snprintf(source, sizeof source, "# ccalloc trace v3\n# source: pid %ld\n", (long)pids[k]);
        char *text = read_file(file);
        cr_assert(strncmp(text, source, strlen(source)) == 0, "%s: %s", file, text);
        cr_assert(strstr(text, k < 2 ? ",mark,0,0,0,0,child\n" : ",mark,0,0,0,0,m\n"), "%s: %s", file, text);
        free(text);
    }
    cr_assert_eq(system("test $(ls -A \"$(dirname \"$CCALLOC_TRACE\")\" | wc -l) = 3"), 0, "three files, no other");
}

/* A '%' other than %p or %%: refused with the reason (a later expansion
 * would rename the file under programs that use it), nothing created. One
 * value per test: the refusal stops the recording for the process. */
static void percent_refused(const char *tail) {
    char value[128];
    snprintf(value, sizeof value, "%s/%s", dir, tail);
    tu_log_capture log = {0};
    create_and_use(value, &log);
    cr_assert_eq(log.lines, 1, "%s", value);
    cr_assert(strstr(log.last, "not tracing") && strstr(log.last, "%p") && strstr(log.last, value), "%s", log.last);
    cr_assert_eq(system("test -z \"$(ls -A \"$(dirname \"$CCALLOC_TRACE\")\")\""), 0, "%s: nothing created", value);
}

Test(trace_hostile, a_percent_d_is_refused_with_the_reason) {
    percent_refused("t.%d.csv");
}
Test(trace_hostile, a_capital_percent_p_is_refused_with_the_reason) {
    percent_refused("t.%P.csv");
}
Test(trace_hostile, a_trailing_percent_is_refused_with_the_reason) {
    percent_refused("t.csv%");
}
Test(trace_hostile, a_percent_after_a_percent_percent_is_refused_with_the_reason) {
    percent_refused("%%%");
}

/* ...and it stops the recording for the process, as every refused
 * opening does: an allocator created later, CCALLOC_TRACE now naming a
 * good file, records nothing and says nothing (it started that file, a
 * trace lacking the refused allocator's events, read as the process's
 * whole), and cca_trace_status tells it the refusal. */
Test(trace_hostile, a_refused_percent_stops_the_recording) {
    char bad[128], good[128];
    snprintf(bad, sizeof bad, "%s/t.%%d.csv", dir);
    snprintf(good, sizeof good, "%s/good.csv", dir);
    tu_log_capture log = {0};
    create_and_use(bad, &log);
    cr_assert_eq(log.lines, 1, "%s", log.last);
    create_and_use(good, &log);
    cr_assert_eq(log.lines, 1, "nothing more: %s", log.last);
    struct stat st;
    cr_assert(stat(good, &st) != 0 && errno == ENOENT, "a trace was started after the refused allocator");
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(64 * MiB, NULL, &u, &a);
    cr_assert_eq(cca_trace_status(a), CCA_ERR_IO);
    cr_assert(strstr(cca_last_error(), "cca_trace_status: not tracing: a '%' other than %p") &&
                  strstr(cca_last_error(), bad),
              "%s", cca_last_error());
    tu_teardown(a, u);
}

/* A value whose %p expansions make the path longer than the system takes
 * (1,500 x %p): refused at the opening with the reason, naming the
 * expanded path; nothing created, the allocator works. */
Test(trace_hostile, a_percent_p_expanded_past_the_path_limit_is_refused_with_the_reason) {
    char value[64 + 3 * 1500];
    size_t n = (size_t)snprintf(value, sizeof value, "%s/", dir);
    for (int i = 0; i < 1500; i++)
        n += (size_t)snprintf(value + n, sizeof value - n, "%%p");
    tu_log_capture log = {0};
    create_and_use(value, &log);
    cr_assert_eq(log.lines, 1);
    char pid[24];
    snprintf(pid, sizeof pid, "/%ld%ld", (long)getpid(), (long)getpid());
    cr_assert(strstr(log.last, "not tracing") && strstr(log.last, strerror(ENAMETOOLONG)) && strstr(log.last, pid),
              "%s", log.last);
    cr_assert_eq(system("test -z \"$(ls -A \"$(dirname \"$CCALLOC_TRACE\")\")\""), 0, "nothing created");
}
