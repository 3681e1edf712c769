/*
 * support.h — what every layer shares and nothing allocator-specific: the
 * assertion levels, the per-thread message (status.c), the log (log.c),
 * large zeroed records (host_pages.c), numbers in C's format (numeric.c)
 * and the fork registry's link (fork.c). The upstream files include this (via
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

/* ---- fork.c: the registry's link ---------------------------------------- */

/* fork.c's registry: every allocator and upstream is on a list from its
 * creation to its destruction, so the fork handler can take its locks. */
typedef struct ccai_fork_link {
    struct ccai_fork_link *prev, *next;
} ccai_fork_link;
void ccai_fork_register_upstream(cca_upstream *u);   /* ccai_upstream_wrap */
void ccai_fork_unregister_upstream(cca_upstream *u); /* cca_upstream_destroy, first */

#endif /* CCA_SUPPORT_H */
