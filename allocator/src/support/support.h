/*
 * support.h — what every layer shares and nothing allocator-specific: the
 * assertion levels, the per-thread message (status.c), the log (log.c),
 * large zeroed records (host_pages.c), numbers in C's format (numeric.c)
 * and the fork registry (fork.c). The upstream files include this (via
 * upstream.h) and see no allocator type.
 */
#ifndef CCA_SUPPORT_H
#define CCA_SUPPORT_H

#include "ccalloc.h"

#include <locale.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "debug.h"  /* the assertion levels */
#include "status.h" /* the thread's message */
#include "writer.h" /* the writers' end */
#include "log.h"    /* the log */

/* ---- host_pages.c: large zeroed records, resident where touched --------- */

/* size bytes of zeroed host memory whose pages exist only once written
 * (an anonymous mapping); NULL when the system refuses. Give it back with
 * ccai_host_zfree and the same size (NULL: nothing). */
void *ccai_host_zalloc(size_t size);
void ccai_host_zfree(void *p, size_t size);

/* ---- numeric.c: numbers in C's format ----------------------------------- */

/* numeric.c: numbers as text in the C locale's format ("0.5"), whatever
 * locale the program has set (setlocale(LC_ALL, "") under de_DE makes
 * strtod and printf use a decimal comma). ccai_strtod reads one;
 * ccai_numeric_begin switches the calling thread to the C locale for the
 * printf calls of a writer (a JSON snapshot, a config text) and returns
 * what ccai_numeric_end puts back. Thread-local (uselocale): other threads'
 * formatting is untouched. No lock. */
double ccai_strtod(const char *s, char **end);
locale_t ccai_numeric_begin(void);
void ccai_numeric_end(locale_t previous);

/* ---- size.c -------------------------------------------------------------- */

/* cca_parse_size, and *is_whole: whether the text is a whole number of
 * units, nothing dropped ("1.5K" yes, "1.5" no): a count read as a size
 * (config's history) must be. *is_whole is set only with CCA_OK. */
cca_status ccai_parse_size_whole(const char *text, size_t *out, bool *is_whole);

/* ---- fork.c: the registry ------------------------------------------------ */

/* What fork.c's handler takes before a fork() and gives back after it, in
 * the parent and in the child: rank by rank (prepare: OUTER first; parent
 * and child: the reverse), each rank's links in list order. */
typedef enum ccai_fork_rank {
    CCAI_FORK_OUTER,     /* the plug's lock (plug.c): before the registry's own */
    CCAI_FORK_ALLOCATOR, /* each allocator's lock (allocator.c) */
    CCAI_FORK_UPSTREAM,  /* each upstream's locks, a device's own through its hooks (upstream.c) */
    CCAI_FORK_TRACE,     /* the trace's lock, its file flushed (trace.c) */
    CCAI_FORK_LAST,      /* the copy engines' stopping lock (copy_engine.c) */
    CCAI_FORK_RANKS
} ccai_fork_rank;
/* One thing the handler locks, intrusive in its owner: take before the
 * fork; give after it (child: in the forked child, its only thread). */
typedef struct ccai_fork_link {
    struct ccai_fork_link *prev, *next;
    void (*take)(struct ccai_fork_link *l);
    void (*give)(struct ccai_fork_link *l, bool child);
} ccai_fork_link;
/* On rank's list from now on, until unregistered (O(1), the registry's
 * lock). An OUTER link stays for the process (read without that lock);
 * unregistering a link never registered does nothing. */
void ccai_fork_register(ccai_fork_rank rank, ccai_fork_link *l);
void ccai_fork_unregister(ccai_fork_rank rank, ccai_fork_link *l);

#endif /* CCA_SUPPORT_H */
