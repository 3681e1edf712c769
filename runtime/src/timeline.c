/*
 * timeline.c — one CSV row per allocator event or phase, for plots.
 *
 *     t_ms,event,phase,model,tag,bytes,allocated,reserved,device_free,fragmentation
 *     0.012,phase,load,digits.safetensors,load,0,0,0,1073741824,0.000000
 *     0.020,alloc,load,digits.safetensors,weight,16384,16384,2097152,1071644672,0.000000
 *
 * The engine calls ccr_timeline_row after every cca_alloc / cca_free it makes
 * and at every phase change (create, load, run, unload, release, ...), with
 * the allocator's stats and the device's free bytes taken right then. The
 * file is line-buffered text; docs/engine.md plots it with gnuplot. Cost:
 * one cca_get_stats and one mem_info per event, only when a timeline is set.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

struct ccr_timeline {
    FILE *f;
    struct timespec t0;
};

ccr_status ccr_timeline_open(const char *path, ccr_timeline **out) {
    if (!path || !out)
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "timeline path or output is NULL");
    ccr_timeline *t = calloc(1, sizeof *t);
    if (!t)
        return ccr_fail(CCR_ERR_OUT_OF_MEMORY, "out of host memory");
    t->f = fopen(path, "w");
    if (!t->f) {
        free(t);
        return ccr_fail(CCR_ERR_IO, "%s: cannot create timeline: %s", path, strerror(errno));
    }
    clock_gettime(CLOCK_MONOTONIC, &t->t0);
    fprintf(t->f, "t_ms,event,phase,model,tag,bytes,allocated,reserved,device_free,fragmentation\n");
    *out = t;
    return CCR_OK;
}

void ccr_timeline_close(ccr_timeline *t) {
    if (!t)
        return;
    fclose(t->f);
    free(t);
}

/* CSV-safe: models are file names or spec strings; drop commas, quotes and
 * line breaks (a '\r' in a file name would end the row for most readers). */
static void put_field(FILE *f, const char *s) {
    for (; s && *s; s++)
        if (*s != ',' && *s != '"' && *s != '\n' && *s != '\r')
            fputc(*s, f);
    fputc(',', f);
}

void ccr_timeline_row(ccr_timeline *t, const char *event, const char *phase, const char *model, const char *tag,
                      size_t bytes, const cca_stats *st, size_t device_free) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double ms = (double)(now.tv_sec - t->t0.tv_sec) * 1e3 + (double)(now.tv_nsec - t->t0.tv_nsec) / 1e6;
    fprintf(t->f, "%.3f,", ms);
    put_field(t->f, event);
    put_field(t->f, phase);
    put_field(t->f, model);
    put_field(t->f, tag);
    fprintf(t->f, "%zu,%zu,%zu,%zu,%.6f\n", bytes, st->allocated_bytes, st->reserved_bytes, device_free,
            st->fragmentation);
}
