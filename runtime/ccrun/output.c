/*
 * output.c — where ccrun's results go, and whether they got there.
 *
 * ccrun writes up to four things: the table or the JSON document (standard
 * output), --timeline FILE.csv, --save FILE and --snapshot FILE. A result
 * that is cut short is worse than none, because it looks whole: a full disk
 * turns the table, the JSON document or the CSV into a prefix a script
 * reads as if it were everything. So every output is checked to the end:
 *
 *   - the files: --save and --snapshot check each write and their close
 *     (safetensors.c, the allocator's snapshot writers, write_snapshot in
 *     run.c);
 *     the timeline keeps its first failure and returns it at
 *     ccr_timeline_close (timeline.c);
 *   - standard output: rows are flushed as they are printed (ccrun_flush,
 *     which keeps the first failure's errno: after a failed flush glibc may
 *     drop the buffer, and the close then succeeds), and ccrun_close_stdout,
 *     the last thing main does, checks the stream's error flag and closes
 *     it, so that a failure of the final flush is seen too (the check `cat`
 *     and GNU's close_stdout make). Standard output closed at start (`>&-`)
 *     is held by main (common/ccai_stdfds.h), so no file ccrun opens takes
 *     its descriptor; printing there fails with EBADF, and a run that
 *     printed nothing there closes it cleanly.
 *
 * Each failure is said on stderr with the path ("standard output" for
 * stdout) and the reason (strerror), and makes ccrun exit 1
 * (CCRUN_ERR_MODEL, "the run failed"), over 0 and over 4 (NaN weights): a
 * run whose report was lost did not succeed. 2 and 3 (usage, a leak) stay:
 * they say more.
 *
 * Before anything runs, ccrun_check_outputs refuses (exit 2, naming both)
 * two outputs that are one file, since the later write would replace the
 * earlier: --timeline, --save, --snapshot, each file model's footprint
 * sidecar (--footprint-sidecar), the CCALLOC_TRACE file (%p expanded as
 * the library will: emptied when the first allocator is made), and
 * standard output and standard error when they go to a regular file
 * (`ccrun ... >log --timeline log`). It
 * also refuses an output that is a MODEL or --resident file, which the
 * output would destroy (--timeline is created before the first load). One
 * file has many names, so each is compared twice:
 *
 *   - an existing file by its identity, st_dev and st_ino (a symlink is
 *     followed, a hard link is the same inode) and by realpath;
 *   - a file not made yet by the path it will have: symlinks that dangle
 *     followed to their target (fopen creates the target), then
 *     realpath(its directory) + "/" + its name, so ./X, X, d/../X and
 *     dir//X are one; a directory that does not exist cannot hold it, and
 *     such a path is compared with nothing (its open fails on its own);
 *   - a sidecar by its name: it is written to a temporary file renamed
 *     over that name, which replaces a link rather than following it, so
 *     a file not there yet, or a link there, is known by the name alone;
 *     and, when a regular file is there, by its identity too (stat: a
 *     symlink followed): that file is read at the first load, through the
 *     name, and then replaced, so standard output or error sent to it
 *     would be lost with it (`ccrun --footprint-sidecar m >m.ccfoot`: the
 *     table), and an output on a hard link to it would wipe it before it
 *     is read. A MODEL that is that file is not refused: reading it as a
 *     sidecar and replacing the name leaves the model as it was.
 *
 * Files that are not regular (/dev/null, a terminal, a pipe) are not
 * compared: nothing written there is overwritten.
 *
 * Text for a person (every message on stderr, the table's model and note
 * columns, the demo's error lines) goes through ccrun_say and
 * ccai_fprintf_escaped (common/ccai_escape.h, the escaper behind
 * ccr_fputs_escaped): messages quote tensor names,
 * dtypes and metadata keys from model files, sidecar lines, paths and
 * --conf as they are, and a control byte there (ESC [ 2 J, a newline that
 * forges a line of its own) reaches the terminal as \x1b, \x0a. The JSON
 * document and the timeline escape the same text their own way (report.c,
 * timeline.c).
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ccai_stdfds.h"     /* common/: ccai_close_failed */
#include "ccai_trace_path.h" /* common/: ccai_trace_env_path */
#include "ccrun.h"

void ccrun_say(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("ccrun: ", stderr);
    ccai_vfprintf_escaped(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int ccrun_output_failed(int rc) {
    return rc == CCRUN_OK || rc == CCRUN_WARN_NONFINITE ? CCRUN_ERR_MODEL : rc;
}

/* errno of the first failed flush of stdout (ccrun is one thread). */
static int stdout_errno;

void ccrun_stdout_failed(int err) {
    if (!stdout_errno)
        stdout_errno = err ? err : EIO;
}

void ccrun_flush(FILE *f) {
    errno = 0;
    if (fflush(f) != 0 && f == stdout)
        ccrun_stdout_failed(errno);
}

int ccrun_close_stdout(int rc) {
    ccrun_flush(stdout); /* what is pending, before the close can hide it */
    errno = 0;
    int bad = ferror(stdout) || stdout_errno;
    int why = fclose(stdout) != 0 && (bad || ccai_close_failed(errno)) ? errno : 0;
    if (stdout_errno)
        why = stdout_errno;
    if (!bad && !why)
        return rc;
    if (why)
        ccrun_say("standard output: write failed: %s", strerror(why));
    else /* an earlier write failed and the stream did not keep its reason */
        ccrun_say("standard output: write failed");
    return ccrun_output_failed(rc);
}

/* ---- two outputs on one file ------------------------------------------- */

/* One file ccrun writes or reads, and what makes it the same as another. */
typedef struct named_file {
    const char *option; /* "--timeline", "MODEL", "standard output", ...; NULL: skip it */
    const char *path;   /* as given; NULL for a standard stream */
    int fd;             /* the standard stream's descriptor */
    int input;          /* a model ccrun reads */
    int sidecar;        /* a footprint sidecar: named by its path, malloc'd */
    int has_id;         /* an existing regular file: dev and ino are set */
    dev_t dev;
    ino_t ino;
    char *canon; /* malloc'd: the path it has or will have; NULL: none */
} named_file;

/* "dir" + "/" + "base", malloc'd (dir "/" gives "/base"). */
static char *join(const char *dir, const char *base) {
    size_t n = strlen(dir);
    return ccrun_format("%s%s%s", dir, n && dir[n - 1] == '/' ? "" : "/", base);
}

/* The directory part of path, malloc'd: "." when it has none, "/" for
 * "/name". */
static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? ccrun_format("%.*s", slash == path ? 1 : (int)(slash - path), path) : strdup(".");
}

/* The path a file not made yet will have: realpath of its directory and its
 * name; symlinks that dangle followed first when `follow` (up to 40, as
 * the kernel does). NULL when its directory does not resolve. */
static char *future_path(const char *path, int follow, int depth) {
    struct stat ls;
    char target[PATH_MAX];
    ssize_t len;
    char *dir = dir_of(path), *r = NULL;
    if (dir && follow && depth < 40 && lstat(path, &ls) == 0 && S_ISLNK(ls.st_mode) &&
        (len = readlink(path, target, sizeof target - 1)) > 0) {
        target[len] = '\0'; /* relative to the link's directory */
        char *next = target[0] == '/' ? strdup(target) : join(dir, target);
        r = next ? future_path(next, 1, depth + 1) : NULL;
        free(next);
    } else if (dir) {
        char *real = realpath(dir, NULL);
        const char *slash = strrchr(path, '/');
        r = real ? join(real, slash ? slash + 1 : path) : NULL;
        free(real);
    }
    free(dir);
    return r;
}

/* Fill f's identity (see the top of this file); 0 when it has none that
 * could be overwritten (not a regular file). */
static int identify(named_file *f) {
    struct stat st;
    if (!f->path) { /* a standard stream: only when it goes to a regular file */
        if (fstat(f->fd, &st) != 0 || !S_ISREG(st.st_mode))
            return 0;
        f->has_id = 1, f->dev = st.st_dev, f->ino = st.st_ino;
        return 1;
    }
    if (f->sidecar) {
        if (stat(f->path, &st) == 0 && S_ISREG(st.st_mode))
            f->has_id = 1, f->dev = st.st_dev, f->ino = st.st_ino;
        f->canon = future_path(f->path, 0, 0);
        return f->canon != NULL || f->has_id;
    }
    if (stat(f->path, &st) == 0) {
        if (!S_ISREG(st.st_mode))
            return 0;
        f->has_id = 1, f->dev = st.st_dev, f->ino = st.st_ino;
        f->canon = realpath(f->path, NULL);
        return 1;
    }
    f->canon = future_path(f->path, 1, 0);
    return f->canon != NULL;
}

static int same_file(const named_file *a, const named_file *b) {
    int sidecar_on_input = (a->sidecar && b->input) || (a->input && b->sidecar); /* read, then its name replaced */
    if (a->has_id && b->has_id && a->dev == b->dev && a->ino == b->ino && !sidecar_on_input)
        return 1;
    return a->canon && b->canon && !strcmp(a->canon, b->canon);
}

/* "--timeline 'PATH'" or "standard output", malloc'd. */
static char *file_name(const named_file *f) {
    return f->path ? ccrun_format("%s '%s'", f->option, f->path) : strdup(f->option);
}

/* 0 when a and b may share (both inputs, both standard streams, both
 * sidecars, or two files); else say so, naming both, and return 1. */
static int clash(const named_file *a, const named_file *b) {
    if ((a->input && b->input) || (!a->path && !b->path) || (a->sidecar && b->sidecar) || !same_file(a, b))
        return 0;
    char *na = file_name(a), *nb = file_name(b);
    if (b->input)
        ccrun_say("%s is the same file as %s: ccrun would write over its input (see ccrun --help)", na ? na : "",
                  nb ? nb : "");
    else
        ccrun_say("%s and %s are the same file: one would overwrite the other (see ccrun --help)", na ? na : "",
                  nb ? nb : "");
    free(na);
    free(nb);
    return 1;
}

/* Is `src` a model file (not a spec string)? As ccr_model_load decides. */
static int is_file(const char *src) {
    return strncmp(src, "mlp:", 4) != 0;
}

int ccrun_check_outputs(const ccrun_options *o) {
    size_t n = 0, sources = o->n_resident + o->n_models;
    named_file *f = calloc(6 + 2 * sources, sizeof *f);
    char *trace = ccai_trace_env_path(); /* as the library will expand it */
    if (!f) {
        free(trace);
        ccrun_say("out of host memory");
        return CCRUN_ERR_MODEL;
    }
    /* outputs first, in the order they are written; inputs last */
    f[n++] = (named_file){.option = "standard output", .fd = STDOUT_FILENO};
    f[n++] = (named_file){.option = "standard error", .fd = STDERR_FILENO};
    if (trace) /* emptied when the first allocator is made, before any load */
        f[n++] = (named_file){.option = "CCALLOC_TRACE", .path = trace};
    if (o->timeline_path)
        f[n++] = (named_file){.option = "--timeline", .path = o->timeline_path};
    if (o->save_path)
        f[n++] = (named_file){.option = "--save", .path = o->save_path};
    if (o->snapshot_path)
        f[n++] = (named_file){.option = "--snapshot", .path = o->snapshot_path};
    int rc = CCRUN_OK;
    for (size_t i = 0; o->footprint_sidecar && i < sources; i++) {
        const char *src = i < o->n_resident ? o->resident[i] : o->models[i - o->n_resident];
        char *path = is_file(src) ? ccrun_format("%s.ccfoot", src) : NULL;
        if (path)
            f[n++] = (named_file){.option = "--footprint-sidecar", .path = path, .sidecar = 1};
        else if (is_file(src))
            rc = CCRUN_ERR_MODEL;
    }
    for (size_t i = 0; i < sources; i++) {
        const char *src = i < o->n_resident ? o->resident[i] : o->models[i - o->n_resident];
        if (is_file(src))
            f[n++] = (named_file){.option = i < o->n_resident ? "--resident" : "MODEL", .path = src, .input = 1};
    }
    if (rc != CCRUN_OK)
        ccrun_say("out of host memory");
    for (size_t i = 0; i < n && rc == CCRUN_OK; i++)
        if (!identify(&f[i]))
            f[i].option = NULL; /* nothing there to overwrite */
    for (size_t i = 0; i < n && rc == CCRUN_OK; i++)
        for (size_t j = i + 1; j < n && rc == CCRUN_OK && f[i].option; j++)
            if (f[j].option && clash(&f[i], &f[j]))
                rc = CCRUN_ERR_USAGE;
    for (size_t i = 0; i < n; i++) {
        free(f[i].canon);
        if (f[i].sidecar)
            free((char *)f[i].path);
    }
    free(f);
    free(trace);
    return rc;
}
