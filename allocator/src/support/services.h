/*
 * services.h — what support/'s files that see the allocator give the rest
 * of the library: the fork registry (fork.c), the checks (check.c), the
 * stats (stats.c), the OOM report (oom.c). None of it is on the
 * allocator's path; every function here runs under the allocator's lock
 * unless it says otherwise.
 */
#ifndef CCA_SERVICES_H
#define CCA_SERVICES_H

#include <stdio.h>

struct cca_domain;

/* fork.c: every allocator is on the registry from its creation to its
 * destruction, so the fork handler can take its lock. */
void ccai_fork_register_allocator(cca_allocator *a);   /* cca_create, once it succeeds */
void ccai_fork_unregister_allocator(cca_allocator *a); /* cca_destroy, first; a no-op if never registered */
/* plug.c: its lock, taken first before a fork (a device's creation holds it
 * across cca_create) and released last after it. */
void ccai_plug_fork_lock(bool lock);

/* check.c */
/* NULL when every invariant holds, else the first broken one. */
const char *ccai_check_locked(const cca_allocator *a);
/* Why is ptr not a live block? Sets the message. */
cca_status ccai_diagnose_pointer(cca_allocator *a, const void *ptr, const char *who);

/* stats.c */
void ccai_fill_stats(const cca_allocator *a, cca_stats *s);
/* A release report's account of what stays (ccai_release): reserved
 * afterwards, segments kept empty or pinned by live blocks and their
 * bytes, trapped bytes, sleeping domains and their host bytes. */
void ccai_release_report_fill(const cca_allocator *a, cca_release_report *r);
/* largest_free_block of domain d, or `floor` when that is larger: over d's
 * free blocks, the longest stretch on mapped pages (pages) or the size
 * (classic). From d's free index, largest blocks first
 * (ccai_free_index_largest_run): O(pools x streams) plus a page test of
 * each block larger than the best run found before it. */
size_t ccai_domain_largest_free(const struct cca_domain *d, size_t floor);

/* oom.c: step 5d of cca_alloc, after a request failed with
 * CCA_ERR_OUT_OF_MEMORY: counts the OOM, records it in the history, and
 * formats the log line (log_oom) written after the unlock. */
void ccai_oom_report(cca_allocator *a, size_t size, size_t rounded, cca_stream stream, ccai_deferred_log *log);

/* size.c: cca_parse_size, and *is_whole: whether the text is a whole number
 * of units, nothing dropped ("1.5K" yes, "1.5" no): a count read as a size
 * (config's history) must be. *is_whole is set only with CCA_OK. */
cca_status ccai_parse_size_whole(const char *text, size_t *out, bool *is_whole);

#endif /* CCA_SERVICES_H */
