/*
 * ccai_capture.h — run a program as a child and keep its standard output,
 * timed, header-only. ccbench switch runs ccrun this way for each of its
 * strategies; ccrun --demo's act 5 runs itself this way for its
 * process-per-model figure.
 *
 * - The child is started by posix_spawn, never fork(): fork charges every
 *   writable private mapping of the parent to the child, and under Linux's
 *   default overcommit heuristic one larger than the machine's memory and
 *   swap is refused (ENOMEM), however little of it is touched. ccbench's
 *   heap is that large after its micro cells; posix_spawn shares the
 *   parent's memory until the exec.
 * - The wall time runs from just before the spawn to the reap
 *   (CLOCK_MONOTONIC): exec, the child's whole life and its exit.
 * - The child's standard output goes into one malloc'd string through a
 *   pipe; its standard error and environment are inherited, less the
 *   variable `unset` names (NULL: none; the child gets a copy of the
 *   environment's pointer list without it). With host memory short for the
 *   output the pipe is still drained (the child must not block on a full
 *   pipe) and the child reaped, then CCAI_CAPTURE_LOST.
 * - Both ends of the pipe are close-on-exec from their creation (the
 *   child's standard output is a copy made in the child, without the
 *   flag): a program another thread spawns meanwhile inherits neither
 *   end (a fork that does not exec keeps both, as every descriptor); one
 *   holding the write end would keep this read waiting for its end.
 * - Returns the child's exit status, or -1 (a pipe, host memory for the
 *   environment's list, or the spawn failed, errno set: an exec that fails
 *   is such a failure, ENOENT or EACCES; a child killed by a signal,
 *   *signo set to it when signo is not NULL (else 0)), or
 *   CCAI_CAPTURE_LOST: the child ran to its exit, but host memory was short
 *   for its output (*out NULL, errno ENOMEM, *status its exit status).
 * - ccai_capture_failure words what went wrong for a message ("could not
 *   be run: REASON", "was killed by signal N (NAME)", "ran (exit N), but
 *   its output could not be kept: REASON"), shared by its callers.
 * - Cost: one pipe, one spawn (a vfork + exec), one read per chunk of
 *   output (the buffer doubles from 64 KiB), one waitpid.
 */
#ifndef CCAI_CAPTURE_H
#define CCAI_CAPTURE_H

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
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

/* The environment's pointer list without the variable `name` (NULL: all
 * of it), for the child (malloc'd; NULL when host memory is short). */
static inline char **ccai_capture_environment(const char *name) {
    extern char **environ;
    size_t n = 0, len = name ? strlen(name) : 0;
    while (environ[n])
        n++;
    char **env = malloc((n + 1) * sizeof *env);
    if (!env)
        return NULL;
    char **kept = env;
    for (char **v = environ; *v; v++)
        if (!name || strncmp(*v, name, len) != 0 || (*v)[len] != '=')
            *kept++ = *v;
    *kept = NULL;
    return env;
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
    if (pipe2(fd, O_CLOEXEC))
        return -1;
    char **env = ccai_capture_environment(unset);
    posix_spawn_file_actions_t fa;
    int err = env ? posix_spawn_file_actions_init(&fa) : ENOMEM;
    int made = !err; /* fa to destroy */
    if (made) {
        err = posix_spawn_file_actions_adddup2(&fa, fd[1], STDOUT_FILENO);
    }
    fflush(NULL);
    double t0 = ccai_capture_now_ms();
    pid_t pid;
    if (!err)
        err = posix_spawn(&pid, argv[0], &fa, NULL, argv, env);
    if (made)
        posix_spawn_file_actions_destroy(&fa);
    free(env);
    if (err) {
        close(fd[0]);
        close(fd[1]);
        errno = err;
        return -1;
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
