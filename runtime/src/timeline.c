/*
 * timeline.c — the engine's phases and one CSV row per allocator event or
 * phase, for plots.
 *
 *     t_ms,event,phase,model,tag,bytes,allocated,reserved,device_free,fragmentation
 *     0.012,phase,load,digits.safetensors,load,0,0,0,1073741824,0.000000
 *     0.020,alloc,load,digits.safetensors,weight,16384,16384,2097152,1071644672,0.000000
 *
 * Rules:
 * - Owns: the timeline file (ccr_timeline_open/close), its rows
 *   (ccr_timeline_event), the engine's phase marks (ccr_engine_mark,
 *   ccr_engine_mark_tag) and what they found of the trace
 *   (ccr_engine_trace_status).
 * - A row follows every cca_alloc / cca_free the engine makes (device.c)
 *   and every phase change (create, load, run, unload, release, ...), with
 *   the allocator's stats and the device's free bytes taken right then
 *   (an empty field when the device refuses to say: never a 0 it did not
 *   report).
 *   docs/engine.md plots the file with gnuplot.
 * - A mark sets the engine's current phase, writes its row (when a
 *   timeline is set), and writes the same phase into the allocator's trace
 *   (CCALLOC_TRACE) as "phase:model", so a replay reports reserved memory
 *   at each. In the trace a character a mark cannot hold becomes '_' and a
 *   mark keeps its first CCA_MARK_MAX characters (the trace format's
 *   limit); the timeline and messages have the name whole.
 * - A mark that finds the trace's recording stopped (cca_trace_mark's
 *   CCA_ERR_IO: a write failed) keeps the allocator's message, the first
 *   only, for ccr_engine_trace_status: the engine goes on (recording calls
 *   cannot fail for the trace), its user decides. A file the library would
 *   not open is found at the allocator's creation instead (engine.c,
 *   cca_trace_status), kept the same way.
 * - A row that cannot be written (a full disk) does not stop the engine:
 *   the first failure's errno is kept, later rows are still tried, and
 *   ccr_timeline_close, which flushes the rest, returns CCR_ERR_IO naming
 *   the file and that reason ("t.csv: write failed: No space left on
 *   device"). A timeline that closes with CCR_OK holds every row.
 * - Numbers are C's format whatever locale the program has set (t_ms with
 *   3 decimals, fragmentation with 6, by integer arithmetic): a decimal
 *   comma would split a field.
 * - Calls nothing in engine.c, model.c or device.c: they call down to it.
 * - Costs: a row: one cca_get_stats and one mem_info, only when a timeline
 *   is set (buffered text); a mark: that row, plus one trace mark when the
 *   process is tracing.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ccai_open.h" /* common/: ccai_fopen_nowait */
#include "internal.h"

struct ccr_timeline {
    FILE *f;
    struct timespec t0;
    char *path; /* malloc'd, for the close's message */
    int err;    /* errno of the first failed write, 0 while all went well */
};

/* Keep the errno of the first write that failed (bad != 0). */
static void note_write(ccr_timeline *t, int bad) {
    if (bad && !t->err)
        t->err = errno ? errno : EIO;
}

ccr_status ccr_timeline_open(const char *path, ccr_timeline **out) {
    if (out) /* NULL after any failure, as a load's */
        *out = NULL;
    if (!path || !out)
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "timeline path or output is NULL");
    ccr_timeline *t = calloc(1, sizeof *t);
    if (!t)
        return ccr_fail(CCR_ERR_OUT_OF_MEMORY, "out of host memory");
    t->path = strdup(path);
    t->f = t->path ? ccai_fopen_nowait(path, CCAI_TRUNCATE) : NULL; /* a FIFO nobody reads: refused, not waited for */
    if (!t->f) { /* host memory short: the path, or fdopen's FILE (ENOMEM), not the file */
        ccr_status st = t->path && errno != ENOMEM
                            ? ccr_fail(CCR_ERR_IO, "%s: cannot create timeline: %s", path, ccai_open_strerror(errno))
                            : ccr_fail(CCR_ERR_OUT_OF_MEMORY, "out of host memory");
        free(t->path);
        free(t);
        return st;
    }
    clock_gettime(CLOCK_MONOTONIC, &t->t0);
    errno = 0;
    note_write(t, fprintf(t->f, "t_ms,event,phase,model,tag,bytes,allocated,reserved,device_free,fragmentation\n") < 0);
    *out = t;
    return CCR_OK;
}

ccr_status ccr_timeline_close(ccr_timeline *t) {
    if (!t)
        return CCR_OK;
    errno = 0;
    note_write(t, fclose(t->f) != 0);
    ccr_status st = t->err ? ccr_fail(CCR_ERR_IO, "%s: write failed: %s", t->path, strerror(t->err)) : CCR_OK;
    free(t->path);
    free(t);
    return st;
}

/* CSV-safe: models are file names or spec strings; drop commas, quotes and
 * line breaks (a '\r' in a file name would end the row for most readers).
 * Returns nonzero when a write failed. */
static int put_field(FILE *f, const char *s) {
    int bad = 0;
    for (; s && *s; s++)
        if (*s != ',' && *s != '"' && *s != '\n' && *s != '\r')
            bad |= fputc(*s, f) == EOF;
    return bad | (fputc(',', f) == EOF);
}

/* x >= 0 with `decimals` digits after a '.', rounded, in C's format
 * whatever the program's locale (printf's %f would write the locale's
 * decimal point: "0,5" is two fields of a CSV row). Integer arithmetic:
 * no locale is read or switched. NaN and negative values write 0. Returns
 * nonzero when the write failed. */
static int put_fixed(FILE *f, double x, int decimals, char end) {
    uint64_t scale = decimals == 3 ? 1000u : 1000000u; /* the two this file writes */
    double scaled = x * (double)scale + 0.5;
    uint64_t v = scaled >= 1.0 && scaled < 1.8e19 ? (uint64_t)scaled : 0; /* NaN fails both tests */
    return fprintf(f, "%" PRIu64 ".%0*" PRIu64 "%c", v / scale, decimals, v % scale, end) < 0;
}

/* free_known 0: the device refused mem_info, the field is left empty. */
static void write_row(ccr_timeline *t, const char *event, const char *phase, const char *model, const char *tag,
                      size_t bytes, const cca_stats *st, int free_known, size_t device_free) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double ms = (double)(now.tv_sec - t->t0.tv_sec) * 1e3 + (double)(now.tv_nsec - t->t0.tv_nsec) / 1e6;
    errno = 0;
    int bad = put_fixed(t->f, ms, 3, ',');
    bad |= put_field(t->f, event);
    bad |= put_field(t->f, phase);
    bad |= put_field(t->f, model);
    bad |= put_field(t->f, tag);
    bad |= fprintf(t->f, "%zu,%zu,%zu,", bytes, st->allocated_bytes, st->reserved_bytes) < 0;
    bad |= (free_known ? fprintf(t->f, "%zu,", device_free) : fprintf(t->f, ",")) < 0;
    bad |= put_fixed(t->f, st->fragmentation, 6, '\n');
    note_write(t, bad);
}

void ccr_timeline_event(ccr_engine *e, const char *event, const char *tag, const char *model, size_t bytes) {
    if (!e->timeline)
        return;
    cca_stats s;
    size_t free_b = 0, total = 0;
    ccr_kept_error k; /* a row follows failures too: their message stays */
    ccr_error_keep(&k);
    cca_get_stats(e->alloc, &s);
    int known = cca_upstream_mem_info(e->up, &free_b, &total) == CCA_OK; /* else an empty field, never a 0 */
    ccr_error_restore(&k);
    write_row(e->timeline, event, e->phase, model ? model : "", tag, bytes, &s, known, free_b);
}

void ccr_engine_mark_tag(ccr_engine *e, const char *phase, const char *model, const char *tag) {
    if (!e)
        return;
    snprintf(e->phase, sizeof e->phase, "%s", phase ? phase : "");
    ccr_timeline_event(e, "phase", tag ? tag : phase, model, 0);
    /* the same phase in the allocator's trace (CCALLOC_TRACE), as "phase:model":
     * a replay reports reserved memory at each; characters a mark cannot hold
     * become '_', and a mark keeps its first CCA_MARK_MAX characters (the
     * trace format's limit; the timeline and messages have the name whole).
     * A no-op when the process is not tracing. */
    if (e->alloc) {
        char mark[CCA_MARK_MAX + 1];
        snprintf(mark, sizeof mark, "%s%s%s", phase ? phase : "", model && *model ? ":" : "", model ? model : "");
        for (char *c = mark; *c; c++)
            if (*c < 0x20 || *c > 0x7e || *c == ',' || *c == '"')
                *c = '_';
        ccr_kept_error k; /* a mark follows failures too: their message stays */
        ccr_error_keep(&k);
        if (*mark && cca_trace_mark(e->alloc, mark) == CCA_ERR_IO && !e->trace_error[0])
            snprintf(e->trace_error, sizeof e->trace_error, "%s", cca_last_error());
        ccr_error_restore(&k);
    }
}

ccr_status ccr_engine_trace_status(const ccr_engine *e) {
    if (!e)
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "engine is NULL");
    if (e->trace_error[0])
        return ccr_fail(CCR_ERR_IO, "CCALLOC_TRACE: %s", e->trace_error);
    return CCR_OK;
}

void ccr_engine_mark(ccr_engine *e, const char *phase, const char *model) {
    ccr_engine_mark_tag(e, phase, model, NULL);
}
