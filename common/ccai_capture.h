/*
 * ccai_capture.h — run a program as a child and keep its standard output,
 * timed, header-only. ccbench switch runs ccrun this way for each of its
 * strategies; ccrun --demo's act 5 runs itself this way for its
 * process-per-model figure.
 *
 * - The wall time runs from just before the fork to the reap
 *   (CLOCK_MONOTONIC): exec, the child's whole life and its exit.
 * - The child's standard output goes into one malloc'd string through a
 *   pipe; its standard error and environment are inherited, less the
 *   variable `unset` names (NULL: none; removed in the child before the
 *   exec, by moving pointers: nothing allocated after the fork). With
 *   host memory short for the output the pipe is still drained (the child
 *   must not block on a full pipe) and the child reaped, then
 *   CCAI_CAPTURE_LOST.
 * - Returns the child's exit status (127: exec failed), or -1 (a pipe or
 *   fork failure, errno set; a child killed by a signal, *signo set to it
 *   when signo is not NULL (else 0)), or CCAI_CAPTURE_LOST: the child ran
 *   to its exit, but host memory was short for its output (*out NULL,
 *   errno ENOMEM, *status its exit status).
 * - ccai_capture_failure words what went wrong for a message ("could not
 *   be run: REASON", "was killed by signal N (NAME)", "ran (exit N), but
 *   its output could not be kept: REASON"), shared by its callers.
 * - Cost: one pipe, one fork + exec, one read per chunk of output (the
 *   buffer doubles from 64 KiB), one waitpid.
 */
#ifndef CCAI_CAPTURE_H
#define CCAI_CAPTURE_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CCAI_CAPTURE_LOST (-2) /* ran, its output lost: see above */

static inline double ccai_capture_now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* Read fd to its end into a malloc'd string (NULL: out of memory; the rest
 * is drained all the same). */
static inline char *ccai_capture_read_all(int fd) {
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (buf && len + 4096 > cap) {
            char *grown = realloc(buf, cap * 2);
            if (!grown)
                free(buf);
            buf = grown;
            cap *= 2;
        }
        char sink[4096];
        ssize_t k = buf ? read(fd, buf + len, cap - len - 1) : read(fd, sink, sizeof sink);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        len += buf ? (size_t)k : 0;
    }
    if (buf)
        buf[len] = '\0';
    return buf;
}

/* In a forked child: the variable `name` taken out of its environment
 * (environ's pointers moved up; no allocation, no lock). */
static inline void ccai_capture_unset(const char *name) {
    extern char **environ;
    size_t n = strlen(name);
    char **kept = environ;
    for (char **v = environ; *v; v++)
        if (strncmp(*v, name, n) != 0 || (*v)[n] != '=')
            *kept++ = *v;
    *kept = NULL;
}

/* Run argv (argv[0] a path) without the environment variable `unset`
 * (NULL: with all of it), its standard output into *out (malloc'd, or
 * NULL), the wall time into *wall_ms, the signal that killed it into
 * *signo (signo may be NULL), for CCAI_CAPTURE_LOST its exit status into
 * *status (may be NULL). See above. */
static inline int ccai_run_capture(char *const argv[], const char *unset, char **out, double *wall_ms, int *signo,
                                   int *status_out) {
    *out = NULL;
    *wall_ms = 0;
    if (signo)
        *signo = 0;
    int fd[2];
    if (pipe(fd))
        return -1;
    fflush(NULL);
    double t0 = ccai_capture_now_ms();
    pid_t pid = fork();
    if (pid < 0) {
        int err = errno;
        close(fd[0]);
        close(fd[1]);
        errno = err;
        return -1;
    }
    if (pid == 0) {
        dup2(fd[1], STDOUT_FILENO);
        close(fd[0]);
        close(fd[1]);
        if (unset)
            ccai_capture_unset(unset);
        execv(argv[0], argv);
        _exit(127);
    }
    close(fd[1]);
    char *buf = ccai_capture_read_all(fd[0]);
    close(fd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    *wall_ms = ccai_capture_now_ms() - t0;
    if (signo && WIFSIGNALED(status))
        *signo = WTERMSIG(status);
    if (!WIFEXITED(status)) {
        *out = buf;
        return -1;
    }
    if (!buf) {
        if (status_out)
            *status_out = WEXITSTATUS(status);
        errno = ENOMEM;
        return CCAI_CAPTURE_LOST;
    }
    *out = buf;
    return WEXITSTATUS(status);
}

/* What went wrong, in words, for rc < 0 from ccai_run_capture: signo and
 * status as it set them, err its errno. Returns buf. */
static inline const char *ccai_capture_failure(int rc, int signo, int status, int err, char *buf, size_t len) {
    if (signo)
        snprintf(buf, len, "was killed by signal %d (%s)", signo, strsignal(signo));
    else if (rc == CCAI_CAPTURE_LOST)
        snprintf(buf, len, "ran (exit %d), but its output could not be kept: %s", status, strerror(err));
    else
        snprintf(buf, len, "could not be run: %s", strerror(err));
    return buf;
}

#endif /* CCAI_CAPTURE_H */
