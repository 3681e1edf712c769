/*
 * ccai_stdfds.h — a tool started with a standard stream closed, header-only.
 *
 * `ccbench gen -o x.csv >&-` starts with descriptor 1 closed. Two things
 * then go wrong unless the tool sees to them:
 *
 *   1. the lowest free descriptor goes to the next file opened: x.csv, a
 *      trace being read, ccrun's --timeline CSV becomes descriptor 1, and
 *      what the tool prints to standard output lands in that file (ccrun's
 *      table did, in the middle of its timeline);
 *   2. fclose(stdout) at exit fails with EBADF even when nothing was ever
 *      written there, and a tool that checks its close (as ours do: a full
 *      disk must not pass in silence) reports a failure that is not one.
 *
 * ccai_hold_std_fds, the first thing main does, fills each closed standard
 * descriptor with /dev/null opened the wrong way round (0 write-only, 1 and
 * 2 read-only): no file can take it, and a write there still fails with
 * EBADF, as it would on the closed descriptor, so printing to a closed
 * standard output is still an error, said at the close. A stream that was
 * never written closes cleanly: exactly GNU close_stdout's rule (EBADF at
 * the close is ignored when nothing was pending), which ccai_close_failed
 * also applies for the case where /dev/null could not be opened.
 *
 * Cost: three fcntl calls at start; an open for each closed descriptor.
 *
 * ccai_std_stream_of says whether standard output or error goes to the
 * regular file open on a descriptor (`cck_bench --csv f >f`): an output
 * written there would be at another offset of the same file as the
 * stream, each overwriting the other, so the tools refuse it. It asks the
 * descriptor an open returned, before the file is emptied, never the path
 * (a path changed between a check and the open would lead the open to
 * another file); ccbench asks the same of its outputs (bench/outputs.c),
 * ccrun compares its outputs its own way (runtime/ccrun/output.c). Cost:
 * three fstat.
 */
#ifndef CCAI_STDFDS_H
#define CCAI_STDFDS_H

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

/* Hold descriptors 0, 1 and 2 that are closed (see above). */
static inline void ccai_hold_std_fds(void) {
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF)
            continue;
        int held = open("/dev/null", fd == 0 ? O_WRONLY : O_RDONLY); /* the lowest free: fd */
        if (held >= 0 && held != fd) /* cannot be: 0..fd-1 are open by now */
            close(held);
    }
}

/* Whether an fclose that failed with errno e, after an fflush that
 * succeeded and no error flag (so nothing written was lost), is a failure:
 * not for EBADF, a descriptor that was closed and never written. */
static inline int ccai_close_failed(int e) {
    return e != EBADF;
}

/* "output" or "error" when standard output or error goes to the regular
 * file open on fd (whatever name opened it), else NULL. */
static inline const char *ccai_std_stream_of(int fd) {
    struct stat st, fd_st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        return NULL;
    for (int out = STDOUT_FILENO; out <= STDERR_FILENO; out++)
        if (fstat(out, &fd_st) == 0 && S_ISREG(fd_st.st_mode) && fd_st.st_dev == st.st_dev && fd_st.st_ino == st.st_ino)
            return out == STDOUT_FILENO ? "output" : "error";
    return NULL;
}

#endif /* CCAI_STDFDS_H */
