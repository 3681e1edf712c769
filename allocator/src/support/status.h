/*
 * status.h — the per-thread message (status.c): its size, saving and restoring it.
 */
#ifndef CCA_STATUS_H
#define CCA_STATUS_H

#include "ccalloc.h"

#include <stddef.h>

/* status.c: the per-thread last-error buffer's size, message included its
 * NUL; longer messages end in "...". upstream.c saves a message this large. */
#define CCAI_ERROR_CAP 1024

/* Cut message (of `size` bytes) marked: it ends in "...". */
void ccai_mark_cut(char *message, size_t size);
/* Copy this thread's message out and back: a public call that fails
 * inside and then succeeds (the OOM retry) puts the caller's back. */
void ccai_error_save(char saved[CCAI_ERROR_CAP]);
void ccai_error_restore(const char saved[CCAI_ERROR_CAP]);

#endif /* CCA_STATUS_H */
