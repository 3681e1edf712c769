/*
 * trace.h — CCALLOC_TRACE recording (trace.c).
 */
#ifndef CCA_TRACE_H
#define CCA_TRACE_H

#include "../support/support.h"

#include <stdint.h>

struct ccai_trace;

/* trace.c: CCALLOC_TRACE recording (a no-op pointer check when unset).
 * NULL when not recording; *refused then says whether CCALLOC_TRACE was
 * set and an opening refused (this one, or the earlier one that stopped
 * the recording): cca_trace_status's CCA_ERR_IO. */
struct ccai_trace *ccai_trace_open_from_env(bool *refused);
/* Returns the trace id of the new allocation (unique in the process). */
uint64_t ccai_trace_alloc(struct ccai_trace *t, size_t size, cca_stream s, unsigned domain);
void ccai_trace_free(struct ccai_trace *t, uint64_t id, size_t size, cca_stream s, unsigned domain);
/* A domain's number in the trace (1..; 0 once the recording stopped at a
 * limit: nothing more is written), its declaration written; a
 * domain_release or (reserve) domain_reserve line. */
unsigned ccai_trace_domain(struct ccai_trace *t, const char *name);
void ccai_trace_domain_event(struct ccai_trace *t, bool reserve, size_t bytes, unsigned domain);
void ccai_trace_release(struct ccai_trace *t, size_t keep); /* keep 0: empty_cache */
bool ccai_mark_name_ok(const char *name);
void ccai_trace_close(struct ccai_trace *t);
/* fork.c's handler: the trace's lock, taken before a fork (after every
 * allocator lock: recording takes it under one), the file flushed, and
 * released after it. */
void ccai_trace_fork_lock(bool lock);
/* fork.c, in the child before the lock is released: the parent's file is
 * detached, nothing more written to it or opened (trace.c). */
void ccai_trace_fork_child(void);

#endif /* CCA_TRACE_H */
