/*
 * report.c — ccrun's per-phase table and its JSON form.
 *
 * Every phase (start, load, run, unload, release, keep; trim, save, sleep
 * and wake where they happen; the demo's create, idle and process) records
 * the same figures taken right after the phase: the allocator's allocated
 * and reserved bytes and fragmentation (cca_get_stats), the device's free
 * bytes (cca_upstream_mem_info: cudaMemGetInfo or the simulated device;
 * "unknown", JSON null, when the device refuses to say), and the phase's
 * wall time. Text mode prints each row as it happens; --json keeps them
 * and prints one document at the end (also on failure, with "error").
 * Each text row is flushed as it is printed, through output.c's
 * ccrun_flush, which keeps a failure for the exit status; output.c calls
 * nothing here. A row host memory could not keep (its model, its note, its
 * place in the JSON document) is a report lost, kept the same way
 * (ccrun_stdout_failed(ENOMEM)): ccrun says so and exits 1.
 */
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>

#include "ccai_escape.h" /* common/: ccai_shown_as_is, on ccai_utf8.h (ccai_utf8_head) */
#include "ccrun.h"

double ccrun_now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

char *ccrun_alloc_conf(const ccrun_options *o, const char *policy) {
    const char *p = policy ? policy : o->policy;
    return ccrun_format("%s%s%s%s", p ? "policy:" : "", p ? p : "", p && o->conf && *o->conf ? "," : "",
                        o->conf ? o->conf : "");
}

void ccrun_fill_input(float *x, size_t n, unsigned long long seed) {
    unsigned long long s = seed * 2654435761ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        x[i] = (float)(s >> 40) / 16777216.0f;
    }
}

unsigned long long ccrun_fnv1a(unsigned long long h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* The length of s's first `max` bytes at most, not cutting a UTF-8
 * sequence (a cut one would show as \xNN). */
static int head_len(const char *s, size_t max) {
    return ccai_utf8_head(s, strlen(s), max);
}

void ccrun_progress(void *user, const char *model, size_t done, size_t total) {
    (void)user;
    static double last;
    double now = ccrun_now_ms();
    if (done < total && now - last < 100)
        return;
    last = now;
    if (done < total) { /* the model's name escaped: only ccrun's own \r and ESC [ K reach the terminal */
        fputs("\r  loading ", stderr);
        ccai_fprintf_escaped(stderr, "%.*s", head_len(model, 40), model);
        fprintf(stderr, ": %3.0f%%", total ? 100.0 * (double)done / (double)total : 100.0);
    } else {
        fprintf(stderr, "\r\033[K");
    }
    fflush(stderr);
}

static void size_text(size_t b, char *buf, size_t len) {
    cca_format_bytes(b, buf, len);
}

int ccrun_device_free(cca_upstream *dev, size_t *free_b) {
    size_t total = 0;
    if (cca_upstream_mem_info(dev, free_b, &total) == CCA_OK)
        return 1;
    *free_b = 0;
    return 0;
}

const char *ccrun_rise_text(int read, size_t before, size_t after, char *buf, size_t n) {
    char b[32];
    if (!read)
        snprintf(buf, n, "unknown (mem_info refused)");
    else
        snprintf(buf, n, "+%s", cca_format_bytes(after > before ? after - before : 0, b, sizeof b));
    return buf;
}

void ccrun_table_header(ccrun_report *r) {
    if (r->json)
        return;
    fprintf(r->out, "%-9s %-34s %11s %11s %11s %6s %10s  %s\n", "phase", "model", "allocated", "reserved", "dev free",
            "frag", "time", "");
}

/* The display columns of the character at s as the escaper writes it
 * (ccai_escape.h), and its bytes in *n: a character written escaped is 4
 * per byte (\xNN), a byte that starts no well-formed sequence 4; a shown
 * one what glibc's wcwidth gives it in C.UTF-8 (2 for a wide CJK
 * character, 0 for a combining mark), 1 where that locale is missing or
 * has no answer. */
static size_t unit_columns(const char *s, size_t *n) {
    static locale_t utf8;
    static int tried;
    uint32_t cp = 0;
    unsigned k = ccai_utf8_decode((const unsigned char *)s, &cp);
    if (!k || !ccai_shown_as_is(cp)) {
        *n = k ? k : 1;
        return 4 * *n;
    }
    *n = k;
    if (cp < 0x80)
        return 1;
    if (!tried) { /* ccrun prints from one thread */
        tried = 1;
        utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
    }
    if (!utf8)
        return 1;
    locale_t previous = uselocale(utf8);
    int w = wcwidth((wchar_t)cp);
    uselocale(previous);
    return w < 0 ? 1 : (size_t)w;
}

/* The display columns of s, written escaped. */
static size_t model_columns(const char *s) {
    size_t cols = 0;
    for (size_t n; *s; s += n)
        cols += unit_columns(s, &n);
    return cols;
}

static void print_row(FILE *f, const ccrun_row *w) {
    char a[32], b[32], c[32];
    size_text(w->allocated, a, sizeof a);
    size_text(w->reserved, b, sizeof b);
    if (w->device_free_known)
        size_text(w->device_free, c, sizeof c);
    else
        snprintf(c, sizeof c, "unknown");
    /* 34 display columns: spec strings keep their head (the shape), paths
     * their tail, marked "..." when shortened (the JSON has the name
     * whole), cut between characters and padded to the columns written
     * (model_columns). The model and the note quote paths and --conf:
     * written escaped (ccai_fprintf_escaped). */
    const char *from = w->model && *w->model ? w->model : "-";
    size_t cols = model_columns(from), len = strlen(from), n;
    bool head = cols > 34 && !strncmp(from, "mlp:", 4), tail = cols > 34 && !head;
    if (head) { /* whole characters up to 31 columns, then "..." */
        len = 0, cols = 3;
        for (size_t c; from[len] && cols + (c = unit_columns(from + len, &n)) <= 34; len += n)
            cols += c;
    } else if (tail) { /* "...", then the last characters that fit in 31 columns */
        for (; cols > 31; from += n)
            cols -= unit_columns(from, &n);
        while (*from && unit_columns(from, &n) == 0) /* a combining mark would sit on the "..." */
            from += n;
        len = strlen(from), cols += 3;
    }
    fprintf(f, "%-9s %s", w->phase, tail ? "..." : "");
    ccai_fprintf_escaped(f, "%.*s", (int)len, from);
    fputs(head ? "..." : "", f);
    fprintf(f, "%*s %11s %11s %11s %6.3f %8.1f ms  ", cols < 34 ? (int)(34 - cols) : 0, "", a, b, c, w->fragmentation,
            w->ms);
    ccr_fputs_escaped(w->note, f);
    fputc('\n', f);
    ccrun_flush(f);
}

void ccrun_phase(ccrun_report *r, ccr_engine *e, const char *phase, const char *model, double ms, const char *note_fmt,
                 ...) {
    ccrun_row w;
    memset(&w, 0, sizeof w);
    snprintf(w.phase, sizeof w.phase, "%s", phase); /* ccrun's own names, all short */
    w.model = strdup(model ? model : "");
    cca_stats s;
    cca_get_stats(ccr_engine_allocator(e), &s);
    w.device_free_known = ccrun_device_free(ccr_engine_upstream(e), &w.device_free);
    w.allocated = s.allocated_bytes;
    w.reserved = s.reserved_bytes;
    w.fragmentation = s.fragmentation;
    w.ms = ms;
    if (note_fmt) {
        va_list ap;
        va_start(ap, note_fmt);
        w.note = ccrun_vformat(note_fmt, ap);
        va_end(ap);
    }
    if (!w.model || (note_fmt && !w.note))
        ccrun_stdout_failed(ENOMEM); /* a row shown without its text: the report is not whole */
    if (!r->json) {
        print_row(r->out, &w);
        free(w.model);
        free(w.note);
        return;
    }
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 16;
        ccrun_row *rows = realloc(r->rows, cap * sizeof *rows);
        if (!rows) { /* the document would look whole without this row: a report lost */
            ccrun_stdout_failed(ENOMEM);
            free(w.model);
            free(w.note);
            return;
        }
        r->rows = rows;
        r->cap = cap;
    }
    r->rows[r->n++] = w;
}

void ccrun_report_free(ccrun_report *r) {
    for (size_t i = 0; i < r->n; i++) {
        free(r->rows[i].model);
        free(r->rows[i].note);
    }
    free(r->rows);
    r->rows = NULL;
    r->n = r->cap = 0;
}

/* A JSON string: quotes and backslashes escaped, and every character the
 * terminal escaper refuses (common/ccai_escape.h: C0 and C1 controls, DEL,
 * bidi and line controls, invisible format characters) written as \uXXXX
 * (a surrogate pair past U+FFFF), so the document is lossless and reaches
 * a terminal inert; bytes that are not well-formed UTF-8 (a non-UTF-8 file
 * name) become U+FFFD, so the document is always valid JSON. */
static void json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; p && *p;) {
        uint32_t cp = 0;
        size_t n = ccai_utf8_decode(p, &cp);
        if (!n) {
            fputs("\\ufffd", f);
            n = 1;
        } else if (cp == '"' || cp == '\\') {
            fprintf(f, "\\%c", (char)cp);
        } else if (ccai_shown_as_is(cp)) {
            fwrite(p, 1, n, f);
        } else if (cp < 0x10000) {
            fprintf(f, "\\u%04x", (unsigned)cp);
        } else { /* UTF-16: a high and a low surrogate */
            fprintf(f, "\\u%04x\\u%04x", (unsigned)(0xd800 + ((cp - 0x10000) >> 10)),
                    (unsigned)(0xdc00 + ((cp - 0x10000) & 0x3ff)));
        }
        p += n;
    }
    fputc('"', f);
}

void ccrun_json_document(ccrun_report *r, ccr_engine *e, const char *error, size_t live_bytes) {
    FILE *f = r->out;
    fprintf(f, "{\n  \"device\": ");
    if (e) {
        ccr_device_info d;
        ccr_engine_device_info(e, &d);
        fprintf(f, "{\"name\": ");
        json_string(f, d.name);
        fprintf(f, ", \"simulated\": %s, \"total_bytes\": %zu, \"free_baseline\": %zu},\n",
                d.simulated ? "true" : "false", d.total_bytes, d.free_baseline);
    } else {
        fprintf(f, "null,\n");
    }
    fprintf(f, "  \"phases\": [");
    for (size_t i = 0; i < r->n; i++) {
        const ccrun_row *w = &r->rows[i];
        fprintf(f, "%s\n    {\"phase\": ", i ? "," : "");
        json_string(f, w->phase);
        fprintf(f, ", \"model\": ");
        json_string(f, w->model);
        fprintf(f, ", \"allocated_bytes\": %zu, \"reserved_bytes\": %zu, \"device_free_bytes\": ", w->allocated,
                w->reserved);
        if (w->device_free_known)
            fprintf(f, "%zu", w->device_free);
        else
            fprintf(f, "null"); /* the device refused mem_info */
        fprintf(f, ", \"fragmentation\": %.6f, \"time_ms\": %.3f, \"note\": ",
                isfinite(w->fragmentation) ? w->fragmentation : 0.0, w->ms);
        json_string(f, w->note);
        fputc('}', f);
    }
    fprintf(f, "\n  ],\n  \"error\": ");
    if (error)
        json_string(f, error);
    else
        fprintf(f, "null");
    fprintf(f, ",\n  \"live_bytes_at_exit\": %zu\n}\n", live_bytes);
}

const char *ccrun_baseline_note(const ccr_release_info *r, char *buf, size_t n) {
    char b[32];
    if (!r->device_free_read) {
        snprintf(buf, n, "device free unknown (mem_info refused)");
    } else if (r->device_free_after == r->device_free_baseline) {
        snprintf(buf, n, "device free == baseline");
    } else {
        int below = r->device_free_after < r->device_free_baseline;
        size_t d = below ? r->device_free_baseline - r->device_free_after : r->device_free_after - r->device_free_baseline;
        snprintf(buf, n, "device free %s %s baseline", cca_format_bytes(d, b, sizeof b), below ? "below" : "above");
    }
    return buf;
}
