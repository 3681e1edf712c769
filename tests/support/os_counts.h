/*
 * os_counts.h — what the process holds of the operating system, counted:
 * open descriptors (/proc/self/fd), mappings (/proc/self/maps: lines and
 * bytes), threads (/proc/self/task); and what it set, fingerprinted: every
 * signal's disposition and the calling thread's mask, the resource limits,
 * the environment. Heap leaks are AddressSanitizer's to find; these are
 * not: a descriptor, a mapping or a thread left behind by an object's
 * life, on success or on a failure path, or a setting changed and never
 * put back.
 *
 * - Counted with raw system calls into stack buffers (open, read,
 *   getdents64): no host allocation, so a count may be taken while
 *   malloc_fault.h is armed, and counting changes nothing it counts (its
 *   own descriptor is closed before it returns and not counted).
 * - The C library keeps some of what a first use maps (a thread's stack
 *   cache, a thread's malloc arena, stdio's buffers): a test runs its
 *   lifecycle once before the first count, then many times, and asserts
 *   the counts are exactly those after the first run. No first use may
 *   change a setting: tu_os_warmed takes the counts after that first run
 *   and the fingerprints from before it.
 * - Under AddressSanitizer mappings are not compared (TU_OS_MAPS 0): its
 *   allocator maps as it goes and keeps freed memory in quarantine, so
 *   the process's mappings grow from run to run with no leak of ours.
 *   Descriptors, threads and the fingerprints are compared in every build.
 * - tu_os_same: the two counts equal, or the test fails naming each field
 *   that moved and by how much (a fingerprint: that it changed).
 * - tu_os_repeat: the whole pattern for a run of no argument: run once,
 *   then `rounds` times, then tu_os_same against tu_os_warmed.
 * - tu_os_only_files: a directory holds none but the files named (a
 *   temporary file left behind fails the test, named); it reads the
 *   directory with opendir, so not while malloc_fault.h is armed.
 */
#ifndef TU_OS_COUNTS_H
#define TU_OS_COUNTS_H

#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <pthread.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define TU_OS_MAPS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TU_OS_MAPS 0
#endif
#endif
#ifndef TU_OS_MAPS
#define TU_OS_MAPS 1
#endif

typedef struct tu_os_counts {
    long fds;       /* entries of /proc/self/fd, less the one reading it */
    long maps;      /* lines of /proc/self/maps */
    long threads;   /* entries of /proc/self/task */
    uint64_t bytes; /* the sum of the mappings' lengths */
    uint64_t signals, limits, environment; /* fingerprints (FNV-1a) */
} tu_os_counts;

static inline uint64_t tu_os_hash(uint64_t h, const void *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        h = (h ^ ((const unsigned char *)p)[i]) * 0x100000001b3ull;
    return h;
}

/* Every signal's handler and flags, and the calling thread's mask. */
static inline uint64_t tu_os_signals(void) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (int s = 1; s < NSIG; s++) {
        struct sigaction sa;
        if (sigaction(s, NULL, &sa) != 0)
            continue; /* not a signal (32, 33: the C library's own) */
        void *handler = (sa.sa_flags & SA_SIGINFO) ? (void *)sa.sa_sigaction : (void *)sa.sa_handler;
        h = tu_os_hash(h, &handler, sizeof handler);
        h = tu_os_hash(h, &sa.sa_flags, sizeof sa.sa_flags);
    }
    sigset_t mask;
    pthread_sigmask(SIG_BLOCK, NULL, &mask);
    for (int s = 1; s < NSIG; s++) {
        int in = sigismember(&mask, s) == 1;
        h = tu_os_hash(h, &in, sizeof in);
    }
    return h;
}

static inline uint64_t tu_os_limits(void) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (int r = 0; r < RLIM_NLIMITS; r++) {
        struct rlimit l;
        if (getrlimit(r, &l) == 0)
            h = tu_os_hash(h, &l, sizeof l);
    }
    return h;
}

static inline uint64_t tu_os_environment(void) {
    extern char **environ;
    uint64_t h = 0xcbf29ce484222325ull;
    for (char **v = environ; v && *v; v++)
        h = tu_os_hash(h, *v, strlen(*v) + 1);
    return h;
}

/* Entries of a /proc directory, "." and ".." not counted; -1 if unreadable. */
static inline long tu_os_dir_entries(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    long n = 0;
    char buf[4096] __attribute__((aligned(8)));
    for (;;) {
        long got = syscall(SYS_getdents64, fd, buf, sizeof buf);
        if (got <= 0) {
            n = got < 0 ? -1 : n;
            break;
        }
        for (long off = 0; off < got;) {
            unsigned short reclen;
            memcpy(&reclen, buf + off + 16, sizeof reclen); /* d_ino 8, d_off 8, then d_reclen */
            const char *name = buf + off + 19;              /* after d_type */
            if (strcmp(name, ".") && strcmp(name, ".."))
                n++;
            off += reclen;
        }
    }
    close(fd);
    return n;
}

/* Lines of /proc/self/maps and the bytes they map, parsed as read. */
static inline void tu_os_maps(long *lines, uint64_t *bytes) {
    *lines = -1;
    *bytes = 0;
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    char buf[8192], line[128];
    size_t have = 0; /* the current line's start, up to sizeof line - 1 bytes */
    long n = 0;
    ssize_t got;
    while ((got = read(fd, buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < got; i++) {
            if (buf[i] != '\n') {
                if (have < sizeof line - 1)
                    line[have++] = buf[i];
                continue;
            }
            line[have] = '\0';
            unsigned long long lo, hi;
            if (sscanf(line, "%llx-%llx", &lo, &hi) == 2 && !strstr(line, "[heap]"))
                *bytes += hi - lo;
            n++;
            have = 0;
        }
    }
    close(fd);
    *lines = got < 0 ? -1 : n;
}

static inline tu_os_counts tu_os_read(void) {
    tu_os_counts c;
    c.fds = tu_os_dir_entries("/proc/self/fd");
    c.fds = c.fds < 0 ? -1 : c.fds - 1; /* the descriptor that read it */
    c.threads = tu_os_dir_entries("/proc/self/task");
    tu_os_maps(&c.maps, &c.bytes);
    c.signals = tu_os_signals();
    c.limits = tu_os_limits();
    c.environment = tu_os_environment();
    cr_assert(c.fds >= 0 && c.threads > 0 && c.maps > 0, "/proc/self cannot be read");
    return c;
}

static inline bool tu_os_equal(const tu_os_counts *a, const tu_os_counts *b) {
    return a->fds == b->fds && (!TU_OS_MAPS || (a->maps == b->maps && a->bytes == b->bytes)) &&
           a->threads == b->threads && a->signals == b->signals && a->limits == b->limits &&
           a->environment == b->environment;
}

/* The counts once two reads 2 ms apart agree (a joined thread leaves
 * /proc/self/task a moment after pthread_join returns), at most 0.2 s. */
static inline tu_os_counts tu_os_now(void) {
    tu_os_counts c = tu_os_read();
    for (int i = 0; i < 100; i++) {
        usleep(2000);
        tu_os_counts again = tu_os_read();
        if (tu_os_equal(&c, &again))
            break;
        c = again;
    }
    return c;
}

/* The counts now, the fingerprints `first`'s: taken before a warm-up run,
 * whose own change of a setting is then a change too. */
static inline tu_os_counts tu_os_warmed(const tu_os_counts *first) {
    tu_os_counts c = tu_os_now();
    c.signals = first->signals;
    c.limits = first->limits;
    c.environment = first->environment;
    return c;
}

/* The counts now equal `before`, read again every 2 ms for up to 0.2 s
 * while they differ; else the test fails naming each count that moved. */
static inline void tu_os_same(const tu_os_counts *before, const char *what) {
    tu_os_counts after = tu_os_read();
    for (int i = 0; i < 100 && !tu_os_equal(before, &after); i++) {
        usleep(2000);
        after = tu_os_read();
    }
    cr_assert(tu_os_equal(before, &after),
              "%s: left behind: %+ld descriptors, %+ld mappings (%+lld bytes), %+ld threads%s%s%s", what,
              after.fds - before->fds, after.maps - before->maps, (long long)after.bytes - (long long)before->bytes,
              after.threads - before->threads,
              after.signals != before->signals ? "; a signal's disposition or the thread's mask changed" : "",
              after.limits != before->limits ? "; a resource limit changed" : "",
              after.environment != before->environment ? "; the environment changed" : "");
}

static inline void tu_os_repeat(void (*run)(void), int rounds, const char *what) {
    tu_os_counts first = tu_os_now();
    run();
    tu_os_counts before = tu_os_warmed(&first);
    for (int r = 0; r < rounds; r++)
        run();
    tu_os_same(&before, what);
}

/* dir holds none but ".", ".." and names[0..n). */
static inline void tu_os_only_files(const char *dir, const char *const *names, size_t n, const char *what) {
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "%s: cannot read", dir);
    struct dirent *ent;
    while ((ent = readdir(d))) {
        bool known = !strcmp(ent->d_name, ".") || !strcmp(ent->d_name, "..");
        for (size_t i = 0; i < n; i++)
            known = known || !strcmp(ent->d_name, names[i]);
        cr_assert(known, "%s: left behind in %s: %s", what, dir, ent->d_name);
    }
    closedir(d);
}

#endif /* TU_OS_COUNTS_H */
