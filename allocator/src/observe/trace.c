/*
 * trace.c — CCALLOC_TRACE: every cca_alloc / cca_free of a program, its
 * release calls and phase marks, recorded to a CSV file (format v3,
 * docs/benchmarks.md, "Trace format"; bench/ replays it):
 *
 *     # ccalloc trace v3
 *     # source: pid 1234
 *     seq,op,id,size,stream,domain,name
 *     0,domain,0,0,0,1,mlp          <- cca_domain_create: numbered 1, 2, ..
 *     1,alloc,1,4096,0,1            <- cca_alloc_in (cca_alloc: domain 0)
 *     2,free,1,4096,0,1
 *     3,mark,0,0,0,0,load:mlp       <- cca_trace_mark
 *
 * - `id` pairs a free with its alloc; `size` is the requested size;
 *   `stream` a small number per stream handle in order of first use (0 =
 *   the default stream: no addresses leak); `domain` numbers the section's
 *   domains in order of creation (0 = default), never reused.
 * - A release event (empty_cache, trim) is written when the program asks,
 *   before it happens; the OOM retry's own release is not written. A
 *   domain release is written once it goes ahead, after a free line for
 *   each live block FORCE drops; a domain reservation once it succeeded.
 * - Limits: the reader's, per file (common/ccai_trace_limits.h). An event
 *   past one stops the recording: it and nothing after it is written, the
 *   log names the limit once, and the file reads back whole up to the stop.
 * - One trace per process: the first allocator created with CCALLOC_TRACE
 *   set opens the file (truncating) and writes the header; every allocator
 *   writes under one lock (lines never interleave, one `seq`, ids unique);
 *   the last one destroyed closes it; a later one appends a new section.
 *   The path is fixed at the first opening (%p made the process's id, %%
 *   one '%', any other '%' refused: common/ccai_trace_path.h; a relative
 *   path made absolute against the working directory then), so a chdir
 *   or a new value of CCALLOC_TRACE never splits the trace into files; a
 *   file found empty (removed or emptied since) gets the header lines
 *   again. A path that cannot be fixed (that '%', host memory short, a
 *   working directory with no name) is a refused opening, below: never a
 *   file opened unfixed.
 * - Whole lines only: stdio would write its buffer out wherever it is
 *   full, mid-line. Each line is formatted first (put_line) and the buffer
 *   flushed before a line that would not fit (commit), so every write(2)
 *   ends at a line's end, and `committed` is the file's size after the
 *   last flush that succeeded. To a pipe the buffer is PIPE_BUF bytes: a
 *   write of at most that is atomic, so processes sharing the pipe never
 *   cut each other's lines. The stream is ours (fopencookie) and writes
 *   with ccai_write_all (common/): a write a signal interrupted (EINTR,
 *   a handler without SA_RESTART, as CPython installs every one) is made
 *   again, where stdio's own would fail and drop the buffer.
 * - Write failures (a full disk): recording calls cannot fail for the
 *   trace. The first failed flush cuts a regular file back to `committed`
 *   (what a partial write added goes), and the recording stops there
 *   (`failed`, `off`: nothing more is written, no later section is
 *   opened), so the file reads back whole up to the failure. A close
 *   that fails (NFS reports a lost write there) stops it too: no later
 *   section is appended to a file the system could not keep.
 *   cca_trace_mark flushes and returns CCA_ERR_IO from then on; the last
 *   close logs it once. Messages name the path last (a line is cut at 512
 *   bytes, an error at 1024, a path may be 4096), so what failed and why
 *   come first.
 * - fork(): fork.c's handler flushes under the trace's lock before the fork
 *   and detaches the child's copy (`off`: nothing written, a failed
 *   flush's buffer dropped, the file never opened again), so the child's
 *   exit cannot write the parent's lines twice. A child forked after the
 *   trace was opened records nothing.
 * - Opened without waiting (ccai_open_nowait): a FIFO nobody reads is
 *   refused at once, not a hang in cca_create. Never on descriptor 0, 1
 *   or 2: a program that closed one (a daemon) would otherwise have its
 *   own output, and the log's (stderr), written into the trace; the file
 *   is moved above them (F_DUPFD_CLOEXEC), and the standard descriptors
 *   stay closed.
 * - An opening refused (its path at the first: a '%' refused, host memory
 *   short; the open fails: no descriptor left, a directory, a FIFO nobody
 *   reads; another process's lock, below) is logged once
 *   and stops the recording as a failed write does (`off`): no later
 *   allocator opens the file, so a trace never reads as whole while it
 *   lacks the refused allocator's events (a gap between two sections, a
 *   first section that is not the process's first), and a file another
 *   process held is never emptied once it let go. Its log line's text is
 *   kept (`refusal`), and every allocator created with CCALLOC_TRACE set
 *   that records nothing for it (the refused one, and those created after
 *   it) is told so (*refused: cca_trace_status says it, as CCA_ERR_IO; its
 *   marks stay no-ops), so that a program can fail for a trace it asked
 *   for and never got (ccrun does).
 * - One process per file: a write lock on a regular file (fcntl) before
 *   it is emptied (open_for_this_process); a process that finds another's
 *   lock is not tracing (logged), so two processes with one CCALLOC_TRACE
 *   leave one whole trace, not two written over each other. The lock goes
 *   with the last close (and with any close of the file by the process,
 *   fcntl's rule: a program reading its own trace while recording drops
 *   it; exec() too, the descriptor being close-on-exec). A later section
 *   first checks the file is as the last one left it (same file, same
 *   size, or empty): one another process wrote between sections is its
 *   trace, left whole, and the recording stops there (logged). A device or
 *   a pipe is shared: never emptied, no lock (/dev/stderr is the file it
 *   names: a regular file when stderr was redirected to one).
 * - Costs: unset, one NULL check per call (a->trace); set, one fprintf per
 *   event under the trace lock, one fflush per mark.
 */
#include "../core/internal.h"
#include "check.h" /* the unlock */
#include "trace.h"
#include "ccai_open.h"         /* common/ */
#include "ccai_trace_limits.h" /* common/: the reader's limits too */
#include "ccai_trace_path.h"   /* common/: %p and %%, as the programs that check their outputs expand them */
#include "ccai_write.h"        /* common/: writes a signal interrupted, written again */

#include <errno.h>
#include <fcntl.h>
#include <limits.h> /* PIPE_BUF */
#include <stdarg.h>
#include <stdint.h>
#include <stdio_ext.h> /* __fpurge, __fpending */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The trace's stdio buffer: one trace per process, so one buffer. Larger
 * than any line (a mark's or domain's name is 63 characters at most); a
 * pipe uses its first PIPE_BUF bytes (`buffer`). */
#define TRACE_BUFFER 8192
#define TRACE_LINE_MAX 256

typedef struct ccai_trace {
    FILE *f; /* a stream of ours over `fd` (trace_write): NULL when closed */
    int fd;
    size_t users;
    uint64_t seq;
    uint64_t next_id;
    cca_stream streams[CCAI_TRACE_MAX_STREAM]; /* stream i + 1 of the section */
    size_t stream_count;
    unsigned domains;      /* numbered so far in this section */
    unsigned file_domains; /* ... in the file, every section */
    uint64_t sections;     /* column headers written */
    size_t buffer;         /* the stdio buffer's size for this file: TRACE_BUFFER, or PIPE_BUF for a pipe */
    bool opened_before;
    bool off;        /* nothing more is written: a limit passed, a write failed, or a forked child's copy */
    bool failed;     /* a write failed: the file cut back to `committed`, the recording stopped */
    bool forked;     /* a forked child's, the file the parent's: never opened again */
    bool refused;    /* an opening was refused and stopped the recording: `refusal` says why */
    off_t committed; /* the file's size after the last flush that succeeded; -1: no size (a pipe, a terminal) */
    dev_t dev;       /* the regular file of the last section (its size at the close: `committed`) */
    ino_t ino;
    char *path; /* the file, absolute, fixed at the first opening (malloc'd, kept; NULL: none yet) */
} ccai_trace;

/* What stopped the recording: "more than <limit> <what>". */
typedef struct trace_stop {
    const char *what;
    unsigned long long limit;
} trace_stop;

static ccai_trace the_trace;
static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;
static char trace_buffer[TRACE_BUFFER];
/* The last refused opening's log line, less "CCALLOC_TRACE: " (under the
 * lock; cut at CCAI_ERROR_CAP as an error is): cca_trace_status's message. */
static char refusal[CCAI_ERROR_CAP];

/* Under the lock: write out what stdio holds (whole lines, see put_line).
 * A flush that failed cuts a regular file back to the end of the last one
 * that succeeded and stops the recording. False once a write has failed. */
static bool commit(ccai_trace *t) {
    if (t->failed)
        return false;
    if (fflush(t->f) == 0 && !ferror(t->f)) {
        if (t->committed >= 0)
            t->committed = lseek(t->fd, 0, SEEK_CUR);
        return true;
    }
    t->failed = t->off = true;
    __fpurge(t->f); /* what could not be written goes too */
    if (t->committed >= 0)
        (void)!ftruncate(t->fd, t->committed); /* best effort: a file that cannot shrink stays cut */
    return false;
}

/* Under the lock, with t->off false: one line, into the buffer whole (a
 * flush first when it would not fit). */
__attribute__((format(printf, 2, 3))) static void put_line(ccai_trace *t, const char *fmt, ...) {
    char line[TRACE_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    ccai_assert(n > 0 && (size_t)n < sizeof line);
    if (__fpending(t->f) + (size_t)n >= t->buffer && !commit(t))
        return;
    fputs(line, t->f);
}

/* The stream's writes: stdio's own give up at the first EINTR (a signal
 * handler without SA_RESTART while a pipe is full) and drop the buffer;
 * ccai_write_all writes it again from where it stopped. A short count is
 * a failure to stdio (ferror): commit's. The bytes written, 0 when none,
 * never -1 (fopencookie(3): glibc adds a write's count to what fwrite
 * says it wrote, and a -1 there is SIZE_MAX bytes). */
static ssize_t trace_write(void *cookie, const char *buf, size_t n) {
    return (ssize_t)ccai_write_all((int)(intptr_t)cookie, buf, n);
}

static int trace_close(void *cookie) {
    return close((int)(intptr_t)cookie);
}

/* The file, opened for one process only: a regular file gets a write
 * lock on the whole of it (fcntl's record lock: a process's own, not
 * inherited by fork()) taken before it is emptied, so that a second
 * process with the same CCALLOC_TRACE (a child forked before the opening,
 * workers started with one environment) is refused rather than writing
 * over the first's lines. A device or a pipe (/dev/null, /dev/stderr) is
 * never emptied, so it takes no lock: every process writes its own lines
 * to it. A file that takes no lock (ENOLCK, some filesystems) is written
 * as before. NULL with errno (EAGAIN: another process holds it); *st
 * the file as opened (st_mode 0 when fstat failed). */
static FILE *open_for_this_process(const char *path, bool append, struct stat *st, int *fd_out) {
    *st = (struct stat){0};
    int fd = ccai_open_nowait(path, CCAI_APPEND); /* not truncated before the lock is ours */
    if (fd >= 0 && fd <= STDERR_FILENO) { /* a standard one the program closed: moved above them */
        int moved = fcntl(fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1), e = errno;
        close(fd); /* before the lock: a close drops the process's locks on the file */
        errno = e;
        fd = moved;
    }
    if (fd < 0)
        return NULL;
    if (fstat(fd, st) == 0 && S_ISREG(st->st_mode)) {
        struct flock lock = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
        if (fcntl(fd, F_SETLK, &lock) != 0 && (errno == EAGAIN || errno == EACCES)) {
            close(fd);
            errno = EAGAIN;
            return NULL;
        }
        if (!append)
            (void)!ftruncate(fd, 0);
    }
    FILE *f = fopencookie((void *)(intptr_t)fd, "a", (cookie_io_functions_t){NULL, trace_write, NULL, trace_close});
    if (!f) {
        int e = errno;
        close(fd);
        errno = e;
    } else
        *fd_out = fd;
    return f;
}

/* path made absolute against the working directory (malloc'd; NULL when
 * host memory or the directory's name cannot be had). */
static char *absolute_path(const char *path) {
    if (path[0] == '/')
        return strdup(path);
    char *cwd = getcwd(NULL, 0);
    if (!cwd)
        return NULL;
    size_t n = strlen(cwd) + strlen(path) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", cwd, path);
    free(cwd);
    return p;
}

/* Past a limit, under the lock: nothing more is written. The caller logs
 * the stop (said_stop) once it has released the trace's lock (under an
 * allocator's, with its log held: the line is written after its unlock). */
static trace_stop stop(ccai_trace *t, const char *what, unsigned long long limit) {
    t->off = true;
    return (trace_stop){what, limit};
}

static void said_stop(trace_stop s) {
    if (s.what) /* outside the trace lock: a log callback may call back */
        ccai_log("CCALLOC_TRACE: the recording stops: more than %llu %s, the trace format's limit; what it holds "
                 "reads back whole",
                 s.limit, s.what);
}

/* Under the lock: an opening refused, why into line (the caller logs it
 * once it has released the lock: a log callback may call back) and kept
 * for cca_trace_status (refusal). */
__attribute__((format(printf, 2, 3))) static void refuse(char line[CCAI_ERROR_CAP], const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, CCAI_ERROR_CAP, fmt, ap);
    va_end(ap);
    memcpy(refusal, line, sizeof refusal);
}

struct ccai_trace *ccai_trace_open_from_env(bool *refused) {
    *refused = false;
    const char *path = getenv("CCALLOC_TRACE");
    if (!path || !*path)
        return NULL;
    ccai_trace *t = &the_trace;
    trace_stop stopped = {0};
    char why[CCAI_ERROR_CAP]; /* a refusal's log line, less "CCALLOC_TRACE: " */
    pthread_mutex_lock(&trace_lock);
    if (!t->f && !t->off && t->sections == CCAI_TRACE_MAX_SECTIONS)
        stopped = stop(t, "sections in the file", CCAI_TRACE_MAX_SECTIONS);
    if (t->forked || (!t->f && t->off)) {    /* a stopped recording opens no new section */
        *refused = !t->forked && t->refused; /* the refusal that stopped it, said when it was */
        pthread_mutex_unlock(&trace_lock);
        said_stop(stopped);
        return NULL;
    }
    char *expanded = NULL, *absolute = NULL;
    if (!t->f && !t->path) { /* the first opening: %p, %%, the path made absolute */
        int bad;
        expanded = ccai_trace_expand(path, &bad); /* %p, %% */
        absolute = expanded ? absolute_path(expanded) : NULL;
        if (!absolute) { /* refused as an opening is: the recording stops for the process */
            int e = errno;
            t->off = t->refused = *refused = true;
            if (bad)
                refuse(why, "not tracing: a '%%' other than %%p (the process id) or %%%% (one '%%') in the path: '%s'",
                       path);
            else if (!expanded || e == ENOMEM)
                refuse(why, "not tracing: host memory short: '%s'", path);
            else
                refuse(why, "not tracing: the working directory has no name (%s): '%s'", strerror(e), path);
            pthread_mutex_unlock(&trace_lock);
            ccai_log("CCALLOC_TRACE: %s", why);
            free(expanded);
            return NULL;
        }
        path = expanded;
    }
    if (!t->f) {
        if (t->path) /* the file of the first opening, whatever chdir or setenv did since */
            path = t->path;
        struct stat st;
        t->f = open_for_this_process(path, t->opened_before, &st, &t->fd);
        if (t->f && t->opened_before && S_ISREG(st.st_mode) && st.st_size != 0 &&
            (st.st_dev != t->dev || st.st_ino != t->ino || st.st_size != t->committed)) {
            /* not as the last section left it: another process took the
             * file between sections (the lock goes with the close) and
             * wrote its own trace; it stays whole, this recording stops */
            fclose(t->f);
            t->f = NULL;
            t->off = t->refused = *refused = true;
            refuse(why,
                   "not tracing: another process has written to the file since the last section (its trace is "
                   "left whole): '%s'",
                   path);
            pthread_mutex_unlock(&trace_lock);
            ccai_log("CCALLOC_TRACE: %s", why);
            free(expanded);
            free(absolute);
            return NULL;
        }
        if (!t->f) { /* refused: the recording stops, a later section would follow a gap */
            int e = errno;
            t->off = t->refused = *refused = true;
            refuse(why, "not tracing: cannot open for writing (%s): '%s'",
                   e == EAGAIN ? "another process is recording to it" : ccai_open_strerror(e), path);
            pthread_mutex_unlock(&trace_lock);
            ccai_log("CCALLOC_TRACE: %s", why);
            free(expanded);
            free(absolute);
            return NULL;
        }
        if (!t->path)
            t->path = absolute; /* fixed: later sections go to it */
        free(expanded);
        t->buffer = S_ISFIFO(st.st_mode) ? PIPE_BUF : sizeof trace_buffer; /* a pipe's writes whole */
        setvbuf(t->f, trace_buffer, _IOFBF, t->buffer);
        t->committed = lseek(t->fd, 0, SEEK_END); /* -1: a pipe, a terminal: nothing to cut back */
        t->dev = st.st_dev;
        t->ino = st.st_ino;
        if (!t->opened_before || t->committed == 0) /* removed or emptied since: a trace again */
            put_line(t, "# ccalloc trace v3\n# source: pid %ld\n", (long)getpid());
        put_line(t, "seq,op,id,size,stream,domain,name\n");
        commit(t); /* the header written: a file that fills later reads as a trace */
        t->sections++;
        t->opened_before = true;
        t->seq = 0;
        t->stream_count = 0;
        t->domains = 0;
    }
    t->users++;
    pthread_mutex_unlock(&trace_lock);
    return t;
}

/* 0 for the default stream, then 1.. in order of first use in the section;
 * -1 past CCAI_TRACE_MAX_STREAM. O(streams of the section). */
static int stream_number(ccai_trace *t, cca_stream s) {
    if (!s)
        return 0;
    for (size_t i = 0; i < t->stream_count; i++)
        if (t->streams[i] == s)
            return (int)i + 1;
    if (t->stream_count == CCAI_TRACE_MAX_STREAM)
        return -1;
    t->streams[t->stream_count++] = s;
    return (int)t->stream_count;
}

/* An alloc or free line, under the lock; past a limit, none. */
static trace_stop block_line(ccai_trace *t, const char *op, uint64_t id, size_t size, cca_stream s, unsigned domain) {
    if (t->off)
        return (trace_stop){0};
    int stream = stream_number(t, s);
    if (stream < 0)
        return stop(t, "streams in a section", CCAI_TRACE_MAX_STREAM);
    if (id > CCAI_TRACE_MAX_ID)
        return stop(t, "allocations", CCAI_TRACE_MAX_ID);
    put_line(t, "%llu,%s,%llu,%zu,%d,%u\n", (unsigned long long)t->seq++, op, (unsigned long long)id, size, stream,
             domain);
    return (trace_stop){0};
}

/* Called under the allocator's lock, its log held (alloc.c, mark_live): a stop's line
 * is queued and written after the unlock. */
uint64_t ccai_trace_alloc(struct ccai_trace *t, size_t size, cca_stream s, unsigned domain) {
    pthread_mutex_lock(&trace_lock);
    uint64_t id = ++t->next_id;
    trace_stop stopped = block_line(t, "alloc", id, size, s, domain);
    pthread_mutex_unlock(&trace_lock);
    said_stop(stopped);
    return id;
}

/* A free never stops the recording: its stream and id were its alloc's,
 * written within the limits (or nothing is written any more). */
void ccai_trace_free(struct ccai_trace *t, uint64_t id, size_t size, cca_stream s, unsigned domain) {
    pthread_mutex_lock(&trace_lock);
    trace_stop stopped = block_line(t, "free", id, size, s, domain);
    pthread_mutex_unlock(&trace_lock);
    ccai_assert(!stopped.what);
    (void)stopped;
}

/* sizes above 2^60 are written as 2^60: the format's largest (a trim keeping
 * more than that keeps everything, as 2^60 does) */
static unsigned long long format_size(size_t size) {
    return size > CCAI_TRACE_MAX_SIZE ? CCAI_TRACE_MAX_SIZE : (unsigned long long)size;
}

void ccai_trace_release(struct ccai_trace *t, size_t keep) {
    pthread_mutex_lock(&trace_lock);
    if (!t->off && keep == 0)
        put_line(t, "%llu,empty_cache,0,0,0,0\n", (unsigned long long)t->seq++);
    else if (!t->off)
        put_line(t, "%llu,trim,0,%llu,0,0\n", (unsigned long long)t->seq++, format_size(keep));
    pthread_mutex_unlock(&trace_lock);
}

unsigned ccai_trace_domain(struct ccai_trace *t, const char *name) {
    unsigned n = 0;
    trace_stop stopped = {0};
    pthread_mutex_lock(&trace_lock);
    if (!t->off && t->file_domains == CCAI_TRACE_MAX_DOMAINS) {
        stopped = stop(t, "domains in the file", CCAI_TRACE_MAX_DOMAINS);
    } else if (!t->off) {
        t->file_domains++;
        n = ++t->domains;
        put_line(t, "%llu,domain,0,0,0,%u,%s\n", (unsigned long long)t->seq++, n, name);
    }
    pthread_mutex_unlock(&trace_lock);
    said_stop(stopped);
    return n;
}

void ccai_trace_domain_event(struct ccai_trace *t, bool reserve, size_t bytes, unsigned domain) {
    pthread_mutex_lock(&trace_lock);
    if (!t->off)
        put_line(t, "%llu,%s,0,%llu,0,%u\n", (unsigned long long)t->seq++,
                 reserve ? "domain_reserve" : "domain_release", reserve ? format_size(bytes) : 0ull, domain);
    pthread_mutex_unlock(&trace_lock);
}

bool ccai_mark_name_ok(const char *name) {
    size_t n = 0;
    for (const char *c = name; *c; c++, n++)
        if (*c < 0x20 || *c > 0x7e || *c == ',' || *c == '"' || n >= CCA_MARK_MAX)
            return false;
    return n > 0;
}

cca_status cca_trace_mark(cca_allocator *a, const char *name) {
    if (!a || !name)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_trace_mark: %s is NULL", a ? "name" : "allocator");
    if (!ccai_mark_name_ok(name))
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT,
                             "cca_trace_mark: a name is 1..%d printable ASCII characters without ',' or '\"'",
                             CCA_MARK_MAX);
    cca_status refused = ccai_lock(a, "cca_trace_mark"); /* in the order of the allocator's own events */
    if (refused != CCA_OK)
        return refused;
    bool written = true;
    if (a->trace) {
        pthread_mutex_lock(&trace_lock);
        if (!a->trace->off) {
            put_line(a->trace, "%llu,mark,0,0,0,0,%s\n", (unsigned long long)a->trace->seq++, name);
            /* a mark is a checkpoint: what came before it is written now */
            commit(a->trace);
        }
        written = !a->trace->failed; /* a recording that could not be written is said here */
        pthread_mutex_unlock(&trace_lock);
    }
    ccai_unlock(a);
    if (!written)
        return cca_set_error(CCA_ERR_IO, "cca_trace_mark: writing the trace failed, the recording is incomplete: '%s'",
                             a->trace->path ? a->trace->path : "CCALLOC_TRACE");
    return CCA_OK;
}

cca_status cca_trace_status(const cca_allocator *a) {
    if (!a)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_trace_status: allocator is NULL");
    if (!a->trace_refused) /* fixed at cca_create */
        return CCA_OK;
    char why[CCAI_ERROR_CAP];
    pthread_mutex_lock(&trace_lock);
    memcpy(why, refusal, sizeof why);
    pthread_mutex_unlock(&trace_lock);
    return cca_set_error(CCA_ERR_IO, "cca_trace_status: %s", why);
}

/* The last user closes the file; a recording any of whose writes failed
 * (a full disk) is said once, in the log: the allocator calls that wrote
 * it could not fail for it. */
void ccai_trace_close(struct ccai_trace *t) {
    if (!t)
        return;
    pthread_mutex_lock(&trace_lock);
    bool failed = false;
    const char *path = NULL;
    if (--t->users == 0) {
        failed = !commit(t) && !t->forked; /* a child's copy says nothing of the parent's file */
        if (fclose(t->f) != 0 && !t->forked) {
            /* the system could not keep what was written (NFS says so at
             * the close): no later section is appended to it */
            failed = true;
            t->off = true;
        }
        t->f = NULL;
        path = t->path; /* kept for the process: read after the unlock */
    }
    pthread_mutex_unlock(&trace_lock);
    if (failed) /* outside the trace lock: a log callback may call back */
        ccai_log("CCALLOC_TRACE: writing failed, the recording is incomplete (whole lines up to the failure): '%s'",
                 path ? path : "");
}

void ccai_trace_fork_lock(bool lock) {
    if (lock) {
        pthread_mutex_lock(&trace_lock);
        if (the_trace.f && !the_trace.off) /* nothing buffered for the child to write again */
            commit(&the_trace);
    } else {
        pthread_mutex_unlock(&trace_lock);
    }
}

static void fork_take(ccai_fork_link *l) {
    (void)l;
    ccai_trace_fork_lock(true);
}

static void fork_give(ccai_fork_link *l, bool child) {
    (void)l;
    if (child)
        ccai_trace_fork_child();
    ccai_trace_fork_lock(false);
}

/* fork.c's TRACE rank, from the library's load: before any thread can hold trace_lock. */
__attribute__((constructor)) static void fork_register(void) {
    static ccai_fork_link link = {.take = fork_take, .give = fork_give};
    ccai_fork_register(CCAI_FORK_TRACE, &link);
}

void ccai_trace_fork_child(void) {
    the_trace.forked = the_trace.opened_before; /* the file is the parent's */
    if (the_trace.f) {
        the_trace.off = true;
        the_trace.failed = false; /* the parent's to say */
        the_trace.committed = -1; /* never cut the parent's file */
        __fpurge(the_trace.f);    /* what a failed flush left: the parent's lines */
        clearerr(the_trace.f);
    }
}
