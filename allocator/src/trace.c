/*
 * trace.c — recording every cca_alloc / cca_free of a program to a CSV trace
 * when the environment variable CCALLOC_TRACE names a file.
 *
 * Format (docs/benchmarks.md; bench/ replays it):
 *     # ccalloc trace v1
 *     # source: pid 1234, allocator 0x55d1c0
 *     seq,op,id,size,stream
 *     0,alloc,1,4096,0
 *     1,free,1,4096,0
 * `id` pairs a free with its alloc; `size` is the requested size; `stream` is
 * a small integer per distinct stream handle in order of first use (0 = the
 * default stream), so traces do not leak addresses and replay anywhere.
 *
 * Cost when unset: one NULL check per call (a->trace). When set, one fprintf
 * per event under the allocator's lock. Several allocators in one process
 * append to the same file, each with its own header line (source).
 */
#include "internal.h"

#include <stdlib.h>
#include <unistd.h>

#define TRACE_MAX_STREAMS 64

typedef struct ccai_trace {
    FILE *f;
    uint64_t seq;
    cca_stream streams[TRACE_MAX_STREAMS];
    size_t stream_count;
} ccai_trace;

struct ccai_trace *ccai_trace_open_from_env(void) {
    const char *path = getenv("CCALLOC_TRACE");
    if (!path || !*path)
        return NULL;
    ccai_trace *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->f = fopen(path, "a");
    if (!t->f) {
        ccai_log("CCALLOC_TRACE: cannot open '%s' for writing; not tracing", path);
        free(t);
        return NULL;
    }
    if (ftell(t->f) == 0)
        fprintf(t->f, "# ccalloc trace v1\n");
    fprintf(t->f, "# source: pid %ld, allocator %p\nseq,op,id,size,stream\n", (long)getpid(), (void *)t);
    return t;
}

static unsigned stream_number(ccai_trace *t, cca_stream s) {
    if (!s)
        return 0;
    for (size_t i = 0; i < t->stream_count; i++)
        if (t->streams[i] == s)
            return (unsigned)i + 1;
    if (t->stream_count < TRACE_MAX_STREAMS)
        t->streams[t->stream_count++] = s;
    return (unsigned)t->stream_count; /* beyond 64 streams, the last number is shared */
}

void ccai_trace_alloc(struct ccai_trace *t, uint64_t id, size_t size, cca_stream s, uintptr_t addr) {
    (void)addr;
    fprintf(t->f, "%llu,alloc,%llu,%zu,%u\n", (unsigned long long)t->seq++, (unsigned long long)id, size,
            stream_number(t, s));
}

void ccai_trace_free(struct ccai_trace *t, uint64_t id, size_t size, cca_stream s) {
    fprintf(t->f, "%llu,free,%llu,%zu,%u\n", (unsigned long long)t->seq++, (unsigned long long)id, size,
            stream_number(t, s));
}

void ccai_trace_close(struct ccai_trace *t) {
    if (!t)
        return;
    fclose(t->f);
    free(t);
}
