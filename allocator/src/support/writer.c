/*
 * writer.c — the end of every writer (stats, snapshots, config, domain
 * stats): flushing and reporting a failed write, and writing a body under
 * the allocator's lock into host memory first.
 *
 * - stdio accepts a write into its buffer and fails only when the buffer
 *   goes out: a writer flushes and asks (ccai_write_failed), so a full
 *   disk is CCA_ERR_IO, not a silent loss.
 * - A body runs into an open_memstream buffer under the lock and is copied
 *   to the file after it: a file that does not drain stalls only the
 *   writing thread. Without that memory, the body runs into the file.
 */
#include "writer.h"

#include <stdio.h>
#include <stdlib.h>

bool ccai_write_failed(FILE *f) {
    return fflush(f) != 0 || ferror(f);
}

int ccai_write_via_memory(FILE *f, ccai_body_fn body, const void *ctx) {
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (mem) {
        int r = body(ctx, mem);
        bool lost = fclose(mem) != 0; /* the stream's own growth failed: out of memory */
        if (r == CCAI_BODY_OK && !lost) {
            int bad = len && fwrite(buf, 1, len, f) != len ? CCAI_BODY_WRITE : CCAI_BODY_OK;
            free(buf);
            return bad;
        }
        free(buf);
        if (r == CCAI_BODY_NOMEM)
            return r;
    }
    return body(ctx, f);
}
