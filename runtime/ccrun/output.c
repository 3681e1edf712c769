/*
 * output.c — where ccrun's results go, and whether they got there.
 *
 * ccrun writes up to four things: the table or the JSON document (standard
 * output), --timeline FILE.csv, --save FILE and --snapshot FILE. A result
 * that is cut short is worse than none, because it looks whole: a full disk
 * turns the table, the JSON document or the CSV into a prefix a script
 * reads as if it were everything. So every output is checked to the end:
 *
 *   - the files: --save and --snapshot check each write and their fclose
 *     (model.c, the allocator's snapshot writers, write_snapshot in main.c);
 *     the timeline keeps its first failure and returns it at
 *     ccr_timeline_close (timeline.c);
 *   - standard output: rows are flushed as they are printed (ccrun_flush,
 *     which keeps the first failure's errno: after a failed flush glibc may
 *     drop the buffer, and the close then succeeds), and ccrun_close_stdout,
 *     the last thing main does, checks the stream's error flag and closes
 *     it, so that a failure of the final flush is seen too (the check `cat`
 *     and GNU's close_stdout make).
 *
 * Each failure is said on stderr with the path ("standard output" for
 * stdout) and the reason (strerror), and makes ccrun exit 1
 * (CCRUN_ERR_MODEL, "the run failed"), over 0 and over 4 (NaN weights): a
 * run whose report was lost did not succeed. 2 and 3 (usage, a leak) stay:
 * they say more.
 *
 * Text for a person (every message on stderr, the table's model and note
 * columns, the demo's error lines) goes through ccrun_say and ccrun_print,
 * which write it with ccr_fputs_escaped: messages quote tensor names,
 * dtypes and metadata keys from model files, sidecar lines, paths and
 * --conf as they are, and a control byte there (ESC [ 2 J, a newline that
 * forges a line of its own) reaches the terminal as \x1b, \x0a. The JSON
 * document and the timeline escape the same text their own way (report.c,
 * timeline.c).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ccrun.h"

static int vprint(FILE *f, const char *fmt, va_list ap) {
    char *text = ccrun_vformat(fmt, ap);
    int n = ccr_fputs_escaped(text ? text : "(out of host memory for the message)", f);
    free(text);
    return n;
}

int ccrun_print(FILE *f, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vprint(f, fmt, ap);
    va_end(ap);
    return n;
}

void ccrun_say(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("ccrun: ", stderr);
    vprint(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int ccrun_output_failed(int rc) {
    return rc == CCRUN_OK || rc == CCRUN_WARN_NONFINITE ? CCRUN_ERR_MODEL : rc;
}

/* errno of the first failed flush of stdout (ccrun is one thread). */
static int stdout_errno;

void ccrun_flush(FILE *f) {
    errno = 0;
    if (fflush(f) != 0 && f == stdout && !stdout_errno)
        stdout_errno = errno ? errno : EIO;
}

int ccrun_close_stdout(int rc) {
    errno = 0;
    int bad = ferror(stdout) || stdout_errno;
    int why = fclose(stdout) != 0 ? errno : 0;
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
