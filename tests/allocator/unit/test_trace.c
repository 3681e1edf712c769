/*
 * test_trace.c — allocator/src/observe/trace.c: with CCALLOC_TRACE naming a file,
 * the allocator appends one CSV row per successful cca_alloc / cca_free
 * (seq, op, id, requested size, stream number), and nothing else: no row for
 * size 0, free(NULL), failed allocations or rejected frees.
 *
 * Criterion runs each test in its own process, so setenv stays local to it.
 */
#include "alloc_test_util.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char path[64];

static void make_path(void) {
    snprintf(path, sizeof path, "/tmp/cca_trace_XXXXXX");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    unlink(path); /* the allocator creates it */
    cr_assert_eq(setenv("CCALLOC_TRACE", path, 1), 0);
}

static void remove_path(void) {
    unlink(path);
}

TestSuite(trace, .init = make_path, .fini = remove_path);

static char *read_all(const char *file) {
    FILE *f = fopen(file, "r");
    cr_assert_not_null(f, "no trace file %s", file);
    char *buf = calloc(1, 1 << 16);
    size_t n = fread(buf, 1, (1 << 16) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

#define TRACE_HEADER "seq,op,id,size,stream,domain,name\n"

/* The trace file's text (*text, freed by the caller) and its rows from the
 * v3 column header on; the header must be there. */
static const char *trace_rows(const char *file, char **text) {
    *text = read_all(file);
    const char *rows = strstr(*text, TRACE_HEADER);
    cr_assert_not_null(rows, "no column header in %s:\n%s", file, *text);
    return rows;
}

Test(trace, records_exactly_what_the_program_did) {
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(64 * MiB, "log_oom:0", &u, &a);
    cca_stream s1 = (cca_stream)0x1000, s2 = (cca_stream)0x2000;
    void *p1 = tu_alloc(a, 100, NULL);
    void *p2 = tu_alloc(a, 5000, s1);
    void *p3 = tu_alloc(a, 3 * MiB, s2);
    tu_free(a, p2);
    void *none;
    cr_assert_eq(cca_alloc(a, 0, s1, &none), CCA_OK);                      /* not traced */
    cr_assert_eq(cca_free(a, NULL), CCA_OK);                               /* not traced */
    cr_assert_eq(cca_free(a, p2), CCA_ERR_INVALID_POINTER);                /* not traced */
    cr_assert_eq(cca_alloc(a, 1 * GiB, s1, &none), CCA_ERR_OUT_OF_MEMORY); /* not traced */
    void *p4 = tu_alloc(a, 7, s1);
    tu_free(a, p1);
    tu_free(a, p3);
    tu_free(a, p4);
    tu_teardown(a, u); /* closes the trace */
    char *text = read_all(path);
    char expected[1024];
    snprintf(expected, sizeof expected,
             "seq,op,id,size,stream,domain,name\n"
             "0,alloc,1,100,0,0\n"
             "1,alloc,2,5000,1,0\n"
             "2,alloc,3,3145728,2,0\n"
             "3,free,2,5000,1,0\n"
             "4,alloc,4,7,1,0\n"
             "5,free,1,100,0,0\n"
             "6,free,3,3145728,2,0\n"
             "7,free,4,7,1,0\n");
    cr_assert_eq(strncmp(text, "# ccalloc trace v3\n", 19), 0, "%s", text);
    char source[64];
    snprintf(source, sizeof source, "# source: pid %ld\n", (long)getpid());
    cr_assert_eq(strncmp(text + 19, source, strlen(source)), 0, "%s", text);
    const char *rows = strstr(text, "seq,op");
    cr_assert_not_null(rows);
    cr_assert_str_eq(rows, expected);
    free(text);
}

Test(trace, allocators_one_after_another_append_a_new_section) {
    for (int i = 0; i < 2; i++) {
        cca_upstream *u;
        cca_allocator *a;
        tu_host_allocator(64 * MiB, NULL, &u, &a);
        void *p = tu_alloc(a, 512 * (size_t)(i + 1), NULL);
        tu_free(a, p);
        tu_teardown(a, u);
    }
    char *text;
    /* each section numbers its events from 0; ids are the file's */
    cr_assert_str_eq(trace_rows(path, &text), "seq,op,id,size,stream,domain,name\n"
                                              "0,alloc,1,512,0,0\n"
                                              "1,free,1,512,0,0\n"
                                              "seq,op,id,size,stream,domain,name\n"
                                              "0,alloc,2,1024,0,0\n"
                                              "1,free,2,1024,0,0\n");
    int versions = 0, sources = 0, headers = 0, rows = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        versions += strcmp(line, "# ccalloc trace v3") == 0;
        sources += strncmp(line, "# source: ", 10) == 0;
        headers += strcmp(line, "seq,op,id,size,stream,domain,name") == 0;
        rows += strstr(line, ",alloc,") || strstr(line, ",free,");
    }
    cr_assert_eq(versions, 1, "one format line per file");
    cr_assert_eq(sources, 1, "one source line per process");
    cr_assert_eq(headers, 2, "each reopening starts a section");
    cr_assert_eq(rows, 4);
    free(text);
}

/* Two allocators alive at once share one trace: one header, one global seq,
 * ids unique across allocators, whole lines only. */
Test(trace, concurrent_allocators_share_one_section) {
    cca_upstream *u1, *u2;
    cca_allocator *a1, *a2;
    tu_host_allocator(64 * MiB, NULL, &u1, &a1);
    tu_host_allocator(64 * MiB, NULL, &u2, &a2);
    void *p1 = tu_alloc(a1, 1000, NULL);
    void *p2 = tu_alloc(a2, 2000, NULL);
    tu_free(a1, p1);
    void *p3 = tu_alloc(a1, 3000, NULL);
    tu_free(a2, p2);
    tu_free(a1, p3);
    tu_teardown(a2, u2);
    tu_teardown(a1, u1);
    char *text;
    const char *rows = trace_rows(path, &text);
    cr_assert_null(strstr(rows + 1, "seq,op"), "one section");
    cr_assert_str_eq(rows, "seq,op,id,size,stream,domain,name\n"
                           "0,alloc,1,1000,0,0\n"
                           "1,alloc,2,2000,0,0\n"
                           "2,free,1,1000,0,0\n"
                           "3,alloc,3,3000,0,0\n"
                           "4,free,2,2000,0,0\n"
                           "5,free,3,3000,0,0\n");
    free(text);
}

Test(trace, ids_and_sizes_under_load) {
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(256 * MiB, NULL, &u, &a);
    enum { N = 200 };
    void *p[N];
    size_t total = 0;
    for (int i = 0; i < N; i++) {
        p[i] = tu_alloc(a, (size_t)(i + 1) * 100, (cca_stream)(uintptr_t)(i % 3));
        total += (size_t)(i + 1) * 100;
    }
    for (int i = N - 1; i >= 0; i--)
        tu_free(a, p[i]);
    tu_teardown(a, u);
    char *text;
    const char *rows = trace_rows(path, &text) + strlen(TRACE_HEADER);
    unsigned long long seq, id, size;
    unsigned stream;
    char op[8];
    int consumed, line = 0;
    size_t alloc_bytes = 0, free_bytes = 0;
    while (sscanf(rows, "%llu,%7[a-z],%llu,%llu,%u,0\n%n", &seq, op, &id, &size, &stream, &consumed) == 5) {
        cr_assert_eq(seq, (unsigned long long)line);
        if (strcmp(op, "alloc") == 0) {
            cr_assert_eq(id, (unsigned long long)line + 1, "ids count allocations from 1");
            cr_assert_eq(size, (id)*100);
            cr_assert_eq(stream, (unsigned)(line % 3), "stream numbers in order of first use, 0 = default");
            alloc_bytes += size;
        } else {
            cr_assert_str_eq(op, "free");
            cr_assert_eq(id, (unsigned long long)(2 * N - line), "frees in reverse order");
            cr_assert_eq(size, id * 100);
            free_bytes += size;
        }
        rows += consumed;
        line++;
    }
    cr_assert_eq(line, 2 * N);
    cr_assert_eq(*rows, '\0', "nothing after the rows: '%s'", rows);
    cr_assert_eq(alloc_bytes, total);
    cr_assert_eq(free_bytes, total);
    free(text);
}

/* A path the library cannot open: logged once, the allocator works, its
 * marks are no-ops, and cca_trace_status says it with the log line's text;
 * so it does for an allocator created after it (the recording stopped),
 * which logs nothing more. */
Test(trace, an_unwritable_path_is_logged_and_the_allocator_works) {
    cr_assert_eq(setenv("CCALLOC_TRACE", "/nonexistent-dir/trace.csv", 1), 0);
    tu_log_capture log = {0};
    cca_set_log_callback(tu_capture_log, &log);
    cca_upstream *u;
    cca_allocator *a, *b;
    tu_host_allocator(64 * MiB, NULL, &u, &a);
    cr_assert_eq(cca_create(NULL, u, &b), CCA_OK, "%s", cca_last_error());
    cca_set_log_callback(NULL, NULL);
    cr_assert_eq(log.lines, 1);
    cr_assert(strstr(log.last, "CCALLOC_TRACE") && strstr(log.last, "/nonexistent-dir/trace.csv"), "%s", log.last);
    void *p = tu_alloc(a, 100, NULL);
    tu_free(a, p);
    cr_assert_eq(cca_trace_mark(a, "x"), CCA_OK, "not tracing: a no-op");
    const char *want = "cca_trace_status: not tracing: cannot open for writing (No such file or directory): "
                       "'/nonexistent-dir/trace.csv'";
    cca_clear_error();
    cr_assert_eq(cca_trace_status(a), CCA_ERR_IO);
    cr_assert_str_eq(cca_last_error(), want);
    cca_clear_error();
    cr_assert_eq(cca_trace_status(b), CCA_ERR_IO, "created after the refusal");
    cr_assert_str_eq(cca_last_error(), want);
    cr_assert_eq(cca_trace_status(NULL), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_str_eq(cca_last_error(), "cca_trace_status: allocator is NULL");
    cr_assert_eq(cca_destroy(b), CCA_OK);
    tu_teardown(a, u);
}

Test(trace, unset_means_no_file) {
    cr_assert_eq(unsetenv("CCALLOC_TRACE"), 0);
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(64 * MiB, NULL, &u, &a);
    void *p = tu_alloc(a, 100, NULL);
    tu_free(a, p);
    cr_assert_eq(cca_trace_status(a), CCA_OK, "not asked for: %s", cca_last_error());
    tu_teardown(a, u);
    cr_assert_neq(access(path, F_OK), 0, "no trace file was written");
}

Test(trace, release_calls_and_marks_are_recorded_in_order) {
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(64 * MiB, "log_oom:0", &u, &a);
    cr_assert_eq(cca_trace_status(a), CCA_OK, "recording: %s", cca_last_error());
    cr_assert_eq(cca_trace_mark(a, "load:model a (batch 16)"), CCA_OK);
    void *p = tu_alloc(a, 3 * MiB, NULL);
    tu_free(a, p);
    cr_assert_eq(cca_trace_mark(a, "unload:a"), CCA_OK);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    cr_assert_eq(cca_trim(a, 1 * MiB, NULL), CCA_OK);
    cr_assert_eq(cca_trim(a, 0, NULL), CCA_OK); /* keep 0 is an empty-cache */
    cr_assert_eq(cca_trim(a, 1, NULL), CCA_OK); /* keep 1 byte is a trim */
    /* refused names write nothing */
    cr_assert_eq(cca_trace_mark(a, "a,b"), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_trace_mark(a, "quote\"d"), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_trace_mark(a, ""), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_trace_mark(a, "new\nline"), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_trace_mark(a, "1234567890123456789012345678901234567890123456789012345678901234"),
                 CCA_ERR_INVALID_ARGUMENT, "64 characters");
    cr_assert_eq(cca_trace_mark(a, "123456789012345678901234567890123456789012345678901234567890123"), CCA_OK,
                 "63 characters");
    cr_assert_eq(cca_trace_mark(a, NULL), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_trace_mark(NULL, "x"), CCA_ERR_INVALID_ARGUMENT);
    tu_teardown(a, u);
    char *text;
    const char *rows = trace_rows(path, &text);
    cr_assert_str_eq(rows, "seq,op,id,size,stream,domain,name\n"
                           "0,mark,0,0,0,0,load:model a (batch 16)\n"
                           "1,alloc,1,3145728,0,0\n"
                           "2,free,1,3145728,0,0\n"
                           "3,mark,0,0,0,0,unload:a\n"
                           "4,empty_cache,0,0,0,0\n"
                           "5,trim,0,1048576,0,0\n"
                           "6,empty_cache,0,0,0,0\n"
                           "7,trim,0,1,0,0\n"
                           "8,mark,0,0,0,0,123456789012345678901234567890123456789012345678901234567890123\n");
    free(text);
}

Test(trace, marks_are_a_no_op_without_a_trace) {
    unsetenv("CCALLOC_TRACE");
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(64 * MiB, "log_oom:0", &u, &a);
    cr_assert_eq(cca_trace_mark(a, "load:x"), CCA_OK);
    cr_assert_eq(cca_trace_mark(a, "bad,name"), CCA_ERR_INVALID_ARGUMENT, "names are checked all the same");
    tu_teardown(a, u);
    cr_assert_eq(access(path, F_OK), -1, "no file written");
}

/* Domains: declared at creation in order, each alloc and free names its
 * block's domain, a refused release writes nothing, a FORCE release writes
 * a free for each block it drops and then the release, a reservation is
 * written once it passes its checks (arguments, the device's size),
 * destroy is a release, and the file replays (bench/trace.c reads it). */
Test(trace, domains_are_recorded_with_their_blocks_and_releases) {
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(64 * MiB, "log_oom:0", &u, &a);
    cca_domain *x, *y, *bad = NULL;
    cr_assert_eq(cca_domain_create(a, "model x", &x), CCA_OK);
    cr_assert_eq(cca_domain_create(a, "a,b", &bad), CCA_ERR_INVALID_ARGUMENT, "refused: not written");
    cr_assert_eq(cca_domain_create(a, "y", &y), CCA_OK);
    void *px = NULL, *py = NULL, *pd = NULL;
    cr_assert_eq(cca_alloc_in(a, x, 4096, NULL, &px), CCA_OK);
    cr_assert_eq(cca_alloc_in(a, y, 100, (cca_stream)0x10, &py), CCA_OK);
    pd = tu_alloc(a, 7, NULL);
    cca_domain_report rep = {0};
    cr_assert_eq(cca_domain_release(a, x, 0, &rep), CCA_ERR_LIVE_BLOCKS, "refused: not written");
    cr_assert_eq(cca_domain_release(a, x, CCA_DOMAIN_FORCE, &rep), CCA_OK);
    cr_assert_eq(cca_domain_reserve(a, y, 0), CCA_ERR_INVALID_ARGUMENT, "bad arguments: not written");
    cr_assert_eq(cca_domain_reserve(a, y, 1 * GiB), CCA_ERR_OUT_OF_MEMORY, "past the device: not written");
    cr_assert_eq(cca_domain_reserve(a, y, 4 * MiB), CCA_OK);
    tu_free(a, py);
    cr_assert_eq(cca_domain_destroy(a, y, 0, NULL), CCA_OK);
    tu_free(a, pd);
    cr_assert_eq(cca_domain_release(a, NULL, 0, NULL), CCA_OK, "the default domain");
    tu_teardown(a, u);
    char *text;
    const char *rows = trace_rows(path, &text);
    cr_assert_str_eq(rows, "seq,op,id,size,stream,domain,name\n"
                           "0,domain,0,0,0,1,model x\n"
                           "1,domain,0,0,0,2,y\n"
                           "2,alloc,1,4096,0,1\n"
                           "3,alloc,2,100,1,2\n"
                           "4,alloc,3,7,0,0\n"
                           "5,free,1,4096,0,1\n"
                           "6,domain_release,0,0,0,1\n"
                           "7,domain_reserve,0,4194304,0,2\n"
                           "8,free,2,100,1,2\n"
                           "9,domain_release,0,0,0,2\n"
                           "10,free,3,7,0,0\n"
                           "11,domain_release,0,0,0,0\n");
    free(text);
}

/* A footprint reservation the device refuses (within the device's size, so
 * it is tried, and the retry too) is not written: a trace records what the
 * program got, and a replay must not reserve an arena the program never
 * had. */
Test(trace, a_reserve_the_device_refuses_is_not_written) {
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(64 * MiB, "log_oom:0", &u, &a);
    cca_domain *y;
    cr_assert_eq(cca_domain_create(a, "y", &y), CCA_OK);
    void *big = tu_alloc(a, 40 * MiB, NULL);
    cr_assert_eq(cca_domain_reserve(a, y, 32 * MiB), CCA_ERR_OUT_OF_MEMORY, "the device has 24 MiB left");
    tu_free(a, big);
    cr_assert_eq(cca_domain_destroy(a, y, 0, NULL), CCA_OK);
    tu_teardown(a, u);
    char *text;
    const char *rows = trace_rows(path, &text);
    cr_assert_str_eq(rows, "seq,op,id,size,stream,domain,name\n"
                           "0,domain,0,0,0,1,y\n"
                           "1,alloc,1,41943040,0,0\n"
                           "2,free,1,41943040,0,0\n"
                           "3,domain_release,0,0,0,1\n");
    free(text);
}

/* A trace whose writes fail (a full disk: /dev/full) is not silently cut
 * short: cca_trace_mark flushes the recording and returns CCA_ERR_IO when
 * it could not be written, and closing it (the last allocator's
 * cca_destroy) logs once that the recording is incomplete. The allocator
 * itself works on. */
Test(trace, a_trace_that_cannot_be_written_says_so) {
    cr_assert_eq(setenv("CCALLOC_TRACE", "/dev/full", 1), 0);
    tu_log_capture log = {0};
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(64 * MiB, NULL, &u, &a);
    void *p = tu_alloc(a, 100, NULL);
    tu_free(a, p);
    cca_clear_error();
    cr_assert_eq(cca_trace_mark(a, "phase"), CCA_ERR_IO);
    cr_assert(strstr(cca_last_error(), "cca_trace_mark") && strstr(cca_last_error(), "/dev/full"), "%s",
              cca_last_error());
    cr_assert_eq(cca_trace_status(a), CCA_OK, "opened: a failed write is the mark's to say");
    p = tu_alloc(a, 100, NULL);
    tu_free(a, p);
    cca_set_log_callback(tu_capture_log, &log);
    tu_teardown(a, u);
    cca_set_log_callback(NULL, NULL);
    cr_assert_eq(log.lines, 1, "one line at close, got %d", log.lines);
    cr_assert(strstr(log.last, "CCALLOC_TRACE") && strstr(log.last, "/dev/full") && strstr(log.last, "incomplete"),
              "%s", log.last);
}

/* CCALLOC_TRACE naming a FIFO that nobody reads: opening it for writing
 * would wait for a reader forever, inside cca_create. It is refused at
 * once instead (logged, not tracing), and the allocator works. A FIFO with
 * a reader is written to as a file is (not tested: it needs a second
 * process). */
#include <sys/stat.h>
Test(trace, a_fifo_without_a_reader_does_not_hang_cca_create, .timeout = 10) {
    char fifo[80];
    snprintf(fifo, sizeof fifo, "%s.fifo", path);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    cr_assert_eq(setenv("CCALLOC_TRACE", fifo, 1), 0);
    tu_log_capture log = {0};
    cca_set_log_callback(tu_capture_log, &log);
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(64 * MiB, NULL, &u, &a);
    cca_set_log_callback(NULL, NULL);
    unlink(fifo);
    cr_assert_eq(log.lines, 1);
    cr_assert(strstr(log.last, "CCALLOC_TRACE") && strstr(log.last, fifo), "%s", log.last);
    void *p = tu_alloc(a, 100, NULL);
    tu_free(a, p);
    cr_assert_eq(cca_trace_mark(a, "x"), CCA_OK, "not tracing: a no-op");
    tu_teardown(a, u);
}

/* fork(): a child forked from a recording process (Python
 * multiprocessing, DataLoader workers) that exits normally leaves the
 * parent's trace whole: one header, each allocation once, nothing of its
 * own. exit() flushes every stdio stream; a Criterion test's child must not
 * run the runner's exit handlers, so it does what exit() does to the trace
 * (fflush(NULL)) and leaves with _exit(). */
#include <sys/wait.h>

#define NFORK 8 /* allocations of the parent, buffered at the fork */

/* Counts of what the file holds: header lines, allocs and frees, and
 * whether an id was allocated twice. */
typedef struct counts {
    int format, columns, allocs, frees, twice;
} counts;

static counts count_lines(void) {
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "no trace file %s", path);
    counts c = {0};
    unsigned long long seen[64] = {0};
    char line[256];
    while (fgets(line, sizeof line, f)) {
        unsigned long long seq, id;
        char op[16];
        if (!strcmp(line, "# ccalloc trace v3\n"))
            c.format++;
        else if (!strcmp(line, "seq,op,id,size,stream,domain,name\n"))
            c.columns++;
        else if (sscanf(line, "%llu,%15[a-z_],%llu", &seq, op, &id) == 3 && !strcmp(op, "alloc")) {
            for (int i = 0; i < c.allocs && i < 64; i++)
                c.twice += seen[i] == id;
            if (c.allocs < 64)
                seen[c.allocs] = id;
            c.allocs++;
        } else if (sscanf(line, "%llu,%15[a-z_],%llu", &seq, op, &id) == 3 && !strcmp(op, "free"))
            c.frees++;
    }
    fclose(f);
    return c;
}

/* Fork with the parent's NFORK allocations recorded and not yet written; the
 * child runs `child` then flushes stdio as exit() does. The parent frees
 * and destroys: the file must hold exactly the parent's events. */
static void fork_from_recording(void (*child)(cca_allocator *, cca_upstream *)) {
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(64 * MiB, NULL, &u, &a);
    void *p[NFORK];
    for (int i = 0; i < NFORK; i++)
        p[i] = tu_alloc(a, 4096 * (size_t)(i + 1), NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        alarm(10);
        child(a, u);
        fflush(NULL); /* what exit() does to every stdio stream */
        _exit(0);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child failed: status %#x", status);
    for (int i = 0; i < NFORK; i++)
        tu_free(a, p[i]);
    tu_teardown(a, u); /* closes the trace */
    counts c = count_lines();
    cr_assert_eq(c.format, 1, "one format line, not %d", c.format);
    cr_assert_eq(c.columns, 1, "one column header, not %d", c.columns);
    cr_assert_eq(c.allocs, NFORK, "each allocation once: %d alloc lines", c.allocs);
    cr_assert_eq(c.frees, NFORK, "%d free lines", c.frees);
    cr_assert_eq(c.twice, 0, "an id allocated twice");
}

static void child_exits(cca_allocator *a, cca_upstream *u) {
    (void)a, (void)u;
}

static void child_allocates_and_destroys(cca_allocator *a, cca_upstream *u) {
    void *q = NULL;
    if (cca_alloc(a, 100, NULL, &q) != CCA_OK || cca_free(a, q) != CCA_OK)
        _exit(2);
    if (cca_trace_mark(a, "child") != CCA_OK)
        _exit(3);
    cca_allocator *b = NULL; /* a new allocator of the child's: no new section in the parent's file */
    if (cca_create(NULL, u, &b) != CCA_OK || cca_alloc(b, 100, NULL, &q) != CCA_OK || cca_free(b, q) != CCA_OK ||
        cca_destroy(b) != CCA_OK)
        _exit(4);
    (void)cca_destroy(a); /* the parent's live blocks: CCA_ERR_LIVE_BLOCKS; the trace closed */
}

Test(trace, a_child_that_exits_does_not_write_the_parents_lines_again) {
    fork_from_recording(child_exits);
}

Test(trace, a_child_that_allocates_writes_nothing_to_the_parents_trace) {
    fork_from_recording(child_allocates_and_destroys);
}

/* A child forked between two sections (the file closed, no lock held)
 * records nothing: the file is the parent's, whose next section must not
 * find another process's lines in it. (A child that opened it appended a
 * section of its own, and the parent's next one was refused.) */
Test(trace, a_child_forked_between_sections_writes_nothing) {
    for (int section = 0; section < 2; section++) {
        cca_upstream *u;
        cca_allocator *a;
        tu_host_allocator(64 * MiB, NULL, &u, &a);
        tu_free(a, tu_alloc(a, 4096, NULL));
        tu_teardown(a, u); /* closes the trace */
        if (section == 1)
            break;
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
            alarm(10);
            cca_allocator *b = NULL;
            void *q = NULL;
            if (cca_upstream_host_create(64 * MiB, &u) != CCA_OK || cca_create(NULL, u, &b) != CCA_OK ||
                cca_alloc(b, 100, NULL, &q) != CCA_OK || cca_free(b, q) != CCA_OK ||
                cca_trace_mark(b, "child") != CCA_OK || cca_destroy(b) != CCA_OK)
                _exit(2);
            cca_upstream_destroy(u);
            _exit(0);
        }
        int status = 0;
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child failed: status %#x", status);
    }
    counts c = count_lines();
    cr_assert_eq(c.columns, 2, "the parent's two sections, not %d", c.columns);
    cr_assert_eq(c.allocs, 2, "the parent's two allocations, not %d", c.allocs);
    char *text = read_all(path);
    cr_assert_null(strstr(text, "child"), "%s", text);
    free(text);
}
