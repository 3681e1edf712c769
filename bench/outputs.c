/*
 * outputs.c — where ccbench's files go and whether they got there: the
 * output directory, every output file's open and checked close, standard
 * output's, and the refusal of an output that would land on another file
 * of this process.
 *
 * - A file that cannot be written (opened, or written whole: checked when
 *   it is closed, ccb_close_out, standard output at exit, ccb_close_stdout)
 *   is said on stderr ("ccbench: cannot write PATH: WHY") and counted
 *   (ccb_out_failures: ccbench exits 1), whatever the command printed.
 * - An output with a line host memory could not format (a table row or
 *   the command over 1 KiB: report.c's writers return -1, the line reads
 *   "(out of host memory for the message)") is not written whole: said
 *   ("a line could not be formatted") and counted the same way
 *   (ccb_out_formatted), whichever file or standard output it went to.
 * - Every path made from --out is built in a PATH_MAX buffer and checked:
 *   one that does not fit is an output failure ("path too long"), never
 *   cut to a prefix that would be another file.
 * - An output never lands on another file of the process (taken: asked
 *   of the path, so that a file of the run is refused unopened, then of
 *   the descriptor the open returned, which neither empties nor moves in
 *   the file; emptied only once allowed, so a path changed meanwhile
 *   cannot lead the open elsewhere): a regular file that is a trace read
 *   (each one trace.c opens is noted, ccb_note_input, by st_dev/st_ino and
 *   birth time: a deleted file's numbers given to a new one born in a
 *   later tick of the file system's clock do not carry its note where the
 *   file system keeps birth times and statx answers; born in the same
 *   tick, 1-10 ms before Linux 6.13, the two are one file: refused), an
 *   output
 *   opened earlier in the run (noted the same way by ccb_open_out; a
 *   symlink left in --out), the file CCALLOC_TRACE names, or the one
 *   standard output or error goes to is refused, said and counted as
 *   above. A CCALLOC_TRACE naming a trace read is refused before replays
 *   run (ccb_recording_reads: exit 2). Plots are gnuplot's to open
 *   (report.c): not checked. A note host memory cannot hold fails its
 *   file rather than leave it unguarded: a trace is not read (the load's
 *   error), an output is said and counted as above. Each file is noted
 *   once, however often it is read (ccb_noted_files counts them).
 * - Cost: per output opened, two statx of it (path, descriptor) and two
 *   of standard output and error each (an fstatat more for each where
 *   statx is refused), an fstat and an ftruncate, plus walks of the files
 *   noted (a run notes tens); a walk of them per note.
 */
#include "ccbench.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "ccai_escape.h"     /* common/: text from outside, escaped for a person */
#include "ccai_open.h"       /* common/: ccai_open_nowait */
#include "ccai_stdfds.h"     /* common/: ccai_close_failed */
#include "ccai_trace_path.h" /* common/: the file CCALLOC_TRACE names */
#include "ccai_write.h"      /* common/: ccai_write_all */

/* Outputs that could not be made since the process started: ccbench's exit
 * status is 1 when any was (main.c), whatever the command printed. */
static _Atomic unsigned out_failures;

unsigned ccb_out_failures(void) {
    return out_failures;
}

/* Say "cannot WHAT DIR/NAME: WHY" (DIR NULL: NAME alone) and count it; -1. */
static int out_failed_in(const char *what, const char *dir, const char *name, const char *why) {
    ccai_fprintf_escaped(stderr, "ccbench: cannot %s %s%s%s: %s\n", what, dir ? dir : "", dir ? "/" : "", name, why);
    out_failures++;
    return -1;
}

int ccb_out_failed(const char *what, const char *path, const char *why) {
    return out_failed_in(what, NULL, path, why);
}

int ccb_out_formatted(int rc, const char *dir, const char *name) {
    if (rc != 0)
        out_failed_in("write", dir, name, "a line could not be formatted (out of host memory)");
    return rc;
}

/* Every path made from --out is built in a PATH_MAX buffer, the longest
 * path the kernel opens, and checked: one that does not fit is an output
 * failure ("path too long", counted), never cut to a prefix that would be
 * another file or directory. ccb_mkdir_p: the directory made (parents
 * too), and a probe file made in it and removed; any refusal said and
 * counted, -1. */
int ccb_mkdir_p(const char *path) {
    char buf[PATH_MAX];
    if (strlen(path) >= sizeof buf)
        return ccb_out_failed("create", path, "path too long");
    memcpy(buf, path, strlen(path) + 1);
    for (char *p = buf + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0755) && errno != EEXIST)
                return ccb_out_failed("create", buf, strerror(errno));
            *p = '/';
        }
    }
    struct stat st;
    if (mkdir(buf, 0755) && (errno != EEXIST || stat(buf, &st) || !S_ISDIR(st.st_mode)))
        return ccb_out_failed("create", buf, errno == EEXIST ? "not a directory" : strerror(errno));
    /* a directory that exists may take no file (/proc, a read-only mount,
     * no write permission): a probe file made and removed says so first;
     * its name is shorter than any output file's */
    char probe[PATH_MAX], why[128];
    int n = snprintf(probe, sizeof probe, "%s/.XXXXXX", buf);
    if (n < 0 || (size_t)n >= sizeof probe)
        return ccb_out_failed("create", buf, "path too long");
    int fd = mkstemp(probe);
    if (fd < 0) {
        snprintf(why, sizeof why, "no file can be made there (%s)", strerror(errno));
        return ccb_out_failed("write", buf, why);
    }
    close(fd);
    unlink(probe);
    return 0;
}

/* ---- outputs that would land on another file of this process --------------------- */

/* A file's identity: st_dev/st_ino, and its birth time where the file
 * system keeps one (statx's btime: ext4, xfs, btrfs, tmpfs). A number a
 * deleted file gave back goes to the next file made; the birth time tells
 * the two apart (without it, they are the same file to this guard). Not
 * guarded: a file overlayfs copies up while the run goes on (another
 * process writes or chmods it: it keeps its number, but its birth time is
 * the copy's), which is another file to the guard from then on. */
typedef struct file_id {
    dev_t dev;
    ino_t ino;
    struct statx_timestamp born;
    bool born_known;
} file_id;

/* The identity of the regular file fd (path NULL) or path (fd AT_FDCWD)
 * names; false when it cannot be asked or is no regular file. statx
 * refused, whatever the reason (EPERM, EACCES: a seccomp profile older
 * than it; ENOSYS: a kernel without it, under a glibc that does not fall
 * back itself), is asked of fstatat, without a birth time. */
static bool identify(int fd, const char *path, file_id *id) {
    const char *at = path ? path : "";
    int how = path ? 0 : AT_EMPTY_PATH;
    struct statx sx;
    if (statx(fd, at, how, STATX_TYPE | STATX_INO | STATX_BTIME, &sx) == 0) {
        *id = (file_id){makedev(sx.stx_dev_major, sx.stx_dev_minor), sx.stx_ino, sx.stx_btime,
                        (sx.stx_mask & STATX_BTIME) != 0};
        return S_ISREG(sx.stx_mode);
    }
    struct stat st;
    if (fstatat(fd, at, &st, how) != 0)
        return false;
    *id = (file_id){.dev = st.st_dev, .ino = st.st_ino};
    return S_ISREG(st.st_mode);
}

/* Same file: same numbers and, where both birth times are known, born
 * at the same moment. */
static bool same_file(const file_id *a, const file_id *b) {
    return a->dev == b->dev && a->ino == b->ino &&
           (!a->born_known || !b->born_known ||
            (a->born.tv_sec == b->born.tv_sec && a->born.tv_nsec == b->born.tv_nsec));
}

/* The regular files this process reads as traces (ccb_note_input) and
 * the ones it has written (ccb_open_out), by identity: an output that is
 * one of them is refused (ccb_open_out). */
typedef struct input_file {
    file_id id;
    char *path;  /* as given; NULL: host memory was short for it */
    bool output; /* one this process wrote, not a trace it read */
} input_file;
static input_file *inputs;
static size_t ninputs, inputs_cap;

/* The note holding id's numbers (of that file, or of a deleted one whose
 * numbers it got: same_file tells), or NULL. O(notes). */
static input_file *slot_of(const file_id *id) {
    for (size_t i = 0; i < ninputs; i++)
        if (inputs[i].id.dev == id->dev && inputs[i].id.ino == id->ino)
            return &inputs[i];
    return NULL;
}

/* The note of the file id names, or NULL. O(notes). */
static input_file *noted(const file_id *id) {
    input_file *n = slot_of(id);
    return n && same_file(&n->id, id) ? n : NULL;
}

/* 0, or -1 when host memory could not hold the note: the file would go
 * unguarded, so its caller fails it (a trace not read, an output failed).
 * A file noted already (by any name) is not noted again: the list grows
 * with the files, not with the reads (the trace fuzzer reads one file per
 * input); its first note, the one taken() finds, stays, marked a trace
 * read once one is (ccb_recording_reads). A note of a deleted file whose
 * numbers this one got is this one's from now on. O(notes). */
static int note_file(int fd, const char *path, bool output) {
    file_id id;
    if (!identify(fd, NULL, &id))
        return 0; /* a pipe, a device: nothing there to overwrite */
    input_file *known = slot_of(&id);
    if (known && same_file(&known->id, &id)) {
        known->output &= output; /* read once: a trace read from then on */
        return 0;
    }
    if (!known && ninputs == inputs_cap) {
        size_t cap = inputs_cap ? 2 * inputs_cap : 8;
        input_file *grown = realloc(inputs, cap * sizeof *grown);
        if (!grown)
            return -1;
        inputs = grown, inputs_cap = cap;
    }
    if (known)
        free(known->path);
    else
        known = &inputs[ninputs++];
    *known = (input_file){id, strdup(path), output}; /* path NULL: named "?" */
    return 0;
}

int ccb_note_input(int fd, const char *path) {
    return note_file(fd, path, false);
}

size_t ccb_noted_files(void) {
    return ninputs;
}

/* The file CCALLOC_TRACE names, when it is there and regular, in *id. */
static bool recording(file_id *id) {
    char *trace = ccai_trace_env_path(); /* %p, %% as the library expands them */
    bool there = trace && identify(AT_FDCWD, trace, id);
    free(trace);
    return there;
}

/* Why the file fd is open on (path NULL), or path names (fd AT_FDCWD),
 * must not be written (into why), or NULL: it is a regular file that is
 * also a trace read, the recording, or where standard output or error
 * goes, and writing it would destroy that or mix the two. */
static const char *taken(int fd, const char *path, char *why, size_t len) {
    file_id id, other;
    if (!identify(fd, path, &id))
        return NULL; /* not made yet, or not a file that can be overwritten */
    const input_file *note = noted(&id);
    if (note) {
        if (note->output)
            snprintf(why, len, "it is '%s', which this command wrote (refused: one would overwrite the other)",
                     note->path ? note->path : "?");
        else
            snprintf(why, len, "it is the trace '%s' this command reads (refused: it would be written over)",
                     note->path ? note->path : "?");
        return why;
    }
    for (int out = STDOUT_FILENO; out <= STDERR_FILENO; out++) {
        if (identify(out, NULL, &other) && same_file(&id, &other)) {
            snprintf(why, len, "it is the file standard %s goes to (refused: one would overwrite the other)",
                     out == STDOUT_FILENO ? "output" : "error");
            return why;
        }
    }
    if (recording(&other) && same_file(&id, &other)) {
        snprintf(why, len, "it is the CCALLOC_TRACE recording (refused: one would overwrite the other)");
        return why;
    }
    return NULL;
}

int ccb_recording_reads(void) {
    file_id id;
    if (!recording(&id))
        return 0;
    const input_file *note = noted(&id);
    if (!note || note->output)
        return 0;
    ccai_fprintf_escaped(stderr,
                         "ccbench: CCALLOC_TRACE '%s' is the trace '%s': recording the replays would write over it "
                         "(unset CCALLOC_TRACE, or name another file)\n",
                         getenv("CCALLOC_TRACE"), note->path ? note->path : "?");
    return 1;
}

/* ccbench.h: dir/name into path, or -1 said and counted if too long. */
int ccb_out_path(const char *dir, const char *name, char *path, size_t len) {
    int n = dir ? snprintf(path, len, "%s/%s", dir, name) : snprintf(path, len, "%s", name);
    return n < 0 || (size_t)n >= len ? out_failed_in("write", dir, name, "path too long") : 0;
}

FILE *ccb_open_out(const char *dir, const char *name) {
    char path[PATH_MAX];
    if (ccb_out_path(dir, name, path, sizeof path))
        return NULL;
    /* checked by its path first, so that a file of the run is refused
     * without being opened (closing a descriptor of the CCALLOC_TRACE
     * recording would drop the recorder's fcntl lock on it), then opened
     * as it is (a FIFO nobody reads: refused, not waited for), the file
     * the open reached checked again (a path changed since cannot lead it
     * elsewhere), and only then emptied */
    char why[PATH_MAX + 128];
    if (taken(AT_FDCWD, path, why, sizeof why)) {
        ccb_out_failed("write", path, why);
        return NULL;
    }
    int fd = ccai_open_nowait(path, CCAI_KEEP);
    if (fd < 0) {
        ccb_out_failed("write", path, ccai_open_strerror(errno));
        return NULL;
    }
    struct stat st;
    const char *refused = taken(fd, NULL, why, sizeof why);
    if (!refused && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ftruncate(fd, 0) != 0)
        refused = strerror(errno);
    FILE *f = refused ? NULL : fdopen(fd, "w");
    if (!f) {
        if (!refused)
            refused = strerror(errno);
        close(fd);
        ccb_out_failed("write", path, refused);
    } else if (note_file(fileno(f), path, true) != 0) { /* no later output of the run over it */
        fclose(f);
        ccb_out_failed("write", path, "out of host memory to guard it from the run's later outputs");
        f = NULL;
    }
    return f;
}

/* Standard output through a stream of ours (ccb_track_stdout), which keeps
 * the reason of its first failed write. A write error is sticky (ferror),
 * but its errno is not: once a buffer's write failed, glibc writes nothing
 * more, so an output longer than one buffer (4 KiB to a file or device)
 * that meets a full device would be reported at its close as only "write
 * error". The cookie's write is ccai_write_all (common/) on descriptor 1,
 * which writes again what a short write or EINTR left; its close closes nothing (descriptor 1 stays the
 * process's, as with stdio's own stdout). */
static int stdout_errno; /* the first failed write's errno; 0: none */

static ssize_t stdout_write(void *cookie, const char *buf, size_t n) {
    (void)cookie;
    size_t done = ccai_write_all(STDOUT_FILENO, buf, n);
    if (done < n && !stdout_errno)
        stdout_errno = errno;
    return (ssize_t)done; /* 0 when none, never -1: fopencookie(3), as trace.c's */
}

static int stdout_close(void *cookie) {
    (void)cookie;
    return 0;
}

void ccb_track_stdout(void) {
    fflush(stdout);
    FILE *f = fopencookie(NULL, "w", (cookie_io_functions_t){NULL, stdout_write, NULL, stdout_close});
    if (!f)
        return; /* no host memory: stdio's own stdout, whose reasons may be lost */
    if (isatty(STDOUT_FILENO))
        setvbuf(f, NULL, _IOLBF, 0);
    stdout = f;
}

/* A write error is sticky (ferror) and a full device often shows only when
 * the buffer is flushed: both are checked here, once, at the close. NULL if
 * all of f was written, else why not. A close that fails with EBADF after
 * nothing failed is not a failure (common/ccai_stdfds.h: standard output
 * closed, `>&-`, and never written). */
static const char *close_checked(FILE *f) {
    errno = 0;
    int bad = fflush(f) != 0 || ferror(f);
    int e = errno;
    if (bad && f == stdout && stdout_errno) /* the first failure's reason (ccb_track_stdout) */
        e = stdout_errno;
    if (fclose(f) != 0 && !bad && ccai_close_failed(errno)) {
        bad = 1;
        e = errno;
    }
    return !bad ? NULL : e ? strerror(e) : "write error";
}

int ccb_close_out(FILE *f, const char *dir, const char *name) {
    if (!f)
        return -1; /* counted when it could not be opened */
    const char *why = close_checked(f);
    char path[PATH_MAX];
    if (!why || ccb_out_path(dir, name, path, sizeof path))
        return why ? -1 : 0;
    return ccb_out_failed("write", path, why);
}

int ccb_close_stdout(void) {
    const char *why = close_checked(stdout);
    return why ? ccb_out_failed("write", "standard output", why) : 0;
}
