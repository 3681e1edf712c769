/*
 * oom.h — what oom.c gives alloc.c: the report of a request that failed
 * with CCA_ERR_OUT_OF_MEMORY. Runs under the allocator's lock.
 */
#ifndef CCA_OOM_H
#define CCA_OOM_H

#include "../core/internal.h"

/* cca_alloc's out of memory (steps 5 and 6, alloc.c): counts the OOM,
 * records it in the history, and formats the log line (log_oom) written
 * after the unlock. */
void ccai_oom_report(cca_allocator *a, size_t size, size_t rounded, cca_stream stream, ccai_deferred_log *log);

#endif /* CCA_OOM_H */
