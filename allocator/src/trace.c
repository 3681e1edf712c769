/*
 * trace.c — recording every cca_alloc / cca_free of a program to a CSV trace
 * when the environment variable CCALLOC_TRACE names a file.
 *
 * Format (docs/benchmarks.md; bench/ replays it):
 *     # ccalloc trace v1
 *     # source: pid 1234
 *     seq,op,id,size,stream
 *     0,alloc,1,4096,0
 *     1,free,1,4096,0
 * `id` pairs a free with its alloc; `size` is the requested size; `stream` is
 * a small integer per distinct stream handle in order of first use (0 = the
 * default stream), so traces do not leak addresses and replay anywhere.
 *
 * One trace per process: the first allocator created with CCALLOC_TRACE set
 * opens the file (truncating it) and writes the header; every allocator of
 * the process then writes to it under one lock, so lines never interleave,
 * `seq` is one global order and ids are unique across allocators. The last
 * allocator destroyed closes it. A later allocator after that starts a new
 * section ("seq,..." header again) in append mode.
 *
 * Cost when unset: one NULL check per call (a->trace). When set, one fprintf
 * per event under the trace lock.
 */
#include "internal.h"

#include <stdlib.h>
#include <unistd.h>

#define TRACE_MAX_STREAMS 64

typedef struct ccai_trace {
    FILE *f;
    size_t users;
    uint64_t seq;
    uint64_t next_id;
    cca_stream streams[TRACE_MAX_STREAMS];
    size_t stream_count;
    bool opened_before;
} ccai_trace;

static ccai_trace the_trace;
static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;

struct ccai_trace *ccai_trace_open_from_env(void) {
    const char *path = getenv("CCALLOC_TRACE");
    if (!path || !*path)
        return NULL;
    ccai_trace *t = &the_trace;
    pthread_mutex_lock(&trace_lock);
    if (!t->f) {
        t->f = fopen(path, t->opened_before ? "a" : "w");
        if (!t->f) {
            pthread_mutex_unlock(&trace_lock);
            ccai_log("CCALLOC_TRACE: cannot open '%s' for writing; not tracing", path);
            return NULL;
        }
        if (!t->opened_before)
            fprintf(t->f, "# ccalloc trace v1\n# source: pid %ld\n", (long)getpid());
        fprintf(t->f, "seq,op,id,size,stream\n");
        t->opened_before = true;
        t->seq = 0;
        t->stream_count = 0;
    }
    t->users++;
    pthread_mutex_unlock(&trace_lock);
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

uint64_t ccai_trace_alloc(struct ccai_trace *t, size_t size, cca_stream s) {
    pthread_mutex_lock(&trace_lock);
    uint64_t id = ++t->next_id;
    fprintf(t->f, "%llu,alloc,%llu,%zu,%u\n", (unsigned long long)t->seq++, (unsigned long long)id, size,
            stream_number(t, s));
    pthread_mutex_unlock(&trace_lock);
    return id;
}

void ccai_trace_free(struct ccai_trace *t, uint64_t id, size_t size, cca_stream s) {
    pthread_mutex_lock(&trace_lock);
    fprintf(t->f, "%llu,free,%llu,%zu,%u\n", (unsigned long long)t->seq++, (unsigned long long)id, size,
            stream_number(t, s));
    pthread_mutex_unlock(&trace_lock);
}

void ccai_trace_close(struct ccai_trace *t) {
    if (!t)
        return;
    pthread_mutex_lock(&trace_lock);
    if (--t->users == 0) {
        fclose(t->f);
        t->f = NULL;
    }
    pthread_mutex_unlock(&trace_lock);
}
