/*
 * writer.h — the end of every writer (writer.c): a failed write found, a body
 * written into memory first.
 */
#ifndef CCA_WRITER_H
#define CCA_WRITER_H

#include <stdbool.h>
#include <stdio.h>

/* The end of every writer (stats, snapshots, config, domain stats): flush f
 * and report whether anything written failed. stdio accepts a write into its
 * buffer and fails only when the buffer goes out (a full disk, a closed
 * pipe), so without the flush a short write "succeeds" and the caller learns
 * of the loss, if ever, at fclose. true: CCA_ERR_IO. */
bool ccai_write_failed(FILE *f);
/* A snapshot's body, written to `out` under the allocator's lock, which it
 * takes and releases itself: CCAI_BODY_OK, CCAI_BODY_WRITE (a write to out
 * failed) or CCAI_BODY_NOMEM (host memory short before anything was
 * written). */
enum { CCAI_BODY_OK = 0, CCAI_BODY_WRITE = 1, CCAI_BODY_NOMEM = 2 };
typedef int (*ccai_body_fn)(const void *ctx, FILE *out);
/* Run body into host memory (open_memstream), then copy that to f after the
 * lock is released, so that a file that does not drain (a pipe nobody reads
 * yet) stalls only the writing thread, never the allocator's other callers.
 * Where that memory cannot be had (the stream cannot be opened, or grows
 * out of memory), body runs again straight into f, under the lock, as
 * before. Returns body's result for the pass that counts. */
int ccai_write_via_memory(FILE *f, ccai_body_fn body, const void *ctx);

#endif /* CCA_WRITER_H */
