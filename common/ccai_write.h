/*
 * ccai_write.h — all of a buffer to a descriptor, header-only.
 *
 * - write(2) may take less than asked (a terminal; a pipe when a signal
 *   comes mid-way; a disk's last free blocks) or nothing, failing with
 *   EINTR, when a signal handler installed without SA_RESTART runs while
 *   it waits (CPython installs every handler so; a profiler's timer).
 *   Both are written again from where they stopped; any other failure
 *   ends it, and so does a write(2) of nothing (EIO).
 * - A pipe: a write of at most PIPE_BUF bytes is all or nothing, so one
 *   repeated after EINTR is still one whole write: processes sharing the
 *   pipe never cut each other's lines.
 * - Cost: one write(2) when nothing interrupts it.
 */
#ifndef CCAI_WRITE_H
#define CCAI_WRITE_H

#include <errno.h>
#include <stddef.h>
#include <unistd.h>

/* The bytes of buf written to fd: n, or fewer with errno set. */
static inline size_t ccai_write_all(int fd, const void *buf, size_t n) {
    const char *p = buf;
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(fd, p + done, n - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = EIO;
            break;
        }
        done += (size_t)w;
    }
    return done;
}

#endif /* CCAI_WRITE_H */
