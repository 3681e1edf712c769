/*
 * ccai_open.h — opening a file for writing without waiting, header-only.
 *
 * fopen(path, "w") of a FIFO blocks until a process opens it for reading:
 * with none, for ever (CCALLOC_TRACE inside cca_create, ccrun --snapshot).
 * ccai_fopen_nowait opens with O_NONBLOCK instead, which fails at once
 * with ENXIO for a FIFO nobody reads (ccai_open_strerror says so in
 * words), and then makes the descriptor blocking again, so that writes to
 * a FIFO with a reader wait for it as they would to any pipe, and a
 * regular file behaves exactly as with fopen. A reader that goes away
 * raises SIGPIPE at the next write, as for any pipe, unless the program
 * ignores SIGPIPE (then the write fails with EPIPE). Likewise a write past
 * RLIMIT_FSIZE raises SIGXFSZ (ignored: EFBIG, after a short write up to
 * the limit); ccrun and ccbench leave both signals as they found them, as
 * cat and cp do, and say EPIPE or EFBIG as any failed write.
 *
 * Cost: one open and two fcntl calls more than nothing; the FILE is
 * fdopen's, closed by fclose as usual (ccai_open_nowait: the descriptor,
 * for a caller that writes through its own stream).
 */
#ifndef CCAI_OPEN_H
#define CCAI_OPEN_H

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* What the open does to a file that is there: empty it, write at its end,
 * or neither (the caller checks the descriptor, then truncates). */
enum { CCAI_TRUNCATE = 0, CCAI_APPEND = 1, CCAI_KEEP = 2 };

/* open(2) for writing (how: CCAI_TRUNCATE, CCAI_APPEND or CCAI_KEEP) that
 * never waits for a FIFO's reader (see above); blocking once open,
 * close-on-exec. -1 with errno on failure. */
static inline int ccai_open_nowait(const char *path, int how) {
    int mode = how == CCAI_APPEND ? O_APPEND : how == CCAI_KEEP ? 0 : O_TRUNC;
    int fd = open(path, O_WRONLY | O_CREAT | O_NONBLOCK | O_CLOEXEC | mode, 0666);
    if (fd < 0)
        return -1;
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* fopen(path, how == CCAI_APPEND ? "a" : "w") that never waits for a
 * FIFO's reader (see above); close-on-exec; CCAI_KEEP empties nothing.
 * NULL with errno on failure. */
static inline FILE *ccai_fopen_nowait(const char *path, int how) {
    int fd = ccai_open_nowait(path, how);
    FILE *f = fd < 0 ? NULL : fdopen(fd, how == CCAI_APPEND ? "a" : "w");
    if (!f && fd >= 0) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return f;
}

/* The reason ccai_fopen_nowait failed with errno e, for a message. */
static inline const char *ccai_open_strerror(int e) {
    return e == ENXIO ? "a FIFO nobody reads" : strerror(e);
}

#endif /* CCAI_OPEN_H */
