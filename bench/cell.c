/*
 * cell.c — one cell of a table, as every writer of ccbench prints it
 * (report.c's tables, iterations.c's, micro and driver): a figure for a
 * person (markdown) or for a plot (CSV).
 *
 * - Unknown: a figure a strategy cannot know, or one the trace gives
 *   nothing to measure (a double that is NaN, infinite or negative; a byte
 *   count CCB_UNKNOWN; a call count UINT64_MAX) is "—" in markdown and an
 *   empty field in CSV, never "nan" or "inf".
 * - CSV: a number is written with its ',' (an unknown one: the ',' alone);
 *   a text field is quoted (quotes doubled) only when it holds a comma, a
 *   quote or a line break, so plain names stay as they are.
 * - Markdown text: a name from outside may hold '|' (a file's name, a mark's
 *   or a domain's: the trace format allows it), which in a table ends the
 *   cell; ccb_md_cell writes it "\|" (GitHub's escape), so a row keeps its
 *   header's columns. The writers then escape controls for the terminal
 *   (ccb_fprintf_row: ccai_fprintf_escaped), which leaves '\' and '|' as
 *   they are.
 * - A row host memory could not format (over 1 KiB: a long reason) is
 *   "(out of host memory for the message)"; ccb_fprintf_row says so (-1),
 *   and the table's caller counts the output as not whole. A row that
 *   could not be written (a full disk) is not: ferror keeps that, and the
 *   close says it (outputs.c).
 */
#include "ccbench.h"

#include <ccalloc.h>

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>

#include "ccai_escape.h" /* common/: text from outside, escaped for a person */

int ccb_fprintf_row(FILE *f, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = ccai_vfprintf_escaped(f, fmt, ap);
    va_end(ap);
    return n == EOF && !ferror(f) ? -1 : 0;
}

/* cca_format_bytes, plus "—" for a figure a strategy cannot report. */
void ccb_format_bytes(size_t b, char *buf, size_t len) {
    if (b == CCB_UNKNOWN)
        snprintf(buf, len, "—");
    else
        cca_format_bytes(b, buf, len);
}

/* A cell whose figures are reported: it ran, every pass of it (a skipped or
 * failed one has its reason in the results instead, and nothing elsewhere). */
int ccb_result_reported(const ccb_result *x) {
    return !x->skipped && !x->failed;
}

int ccb_known(double v) {
    return isfinite(v) && v >= 0;
}

void ccb_fmt_num(double v, const char *f, char *buf, size_t len) {
    if (!ccb_known(v))
        snprintf(buf, len, "—");
    else
        snprintf(buf, len, f, v);
}

void ccb_fmt_calls(uint64_t a, uint64_t f, char *buf, size_t len) {
    if (a == UINT64_MAX)
        snprintf(buf, len, "—");
    else
        snprintf(buf, len, "%llu+%llu", (unsigned long long)a, (unsigned long long)f);
}

void ccb_csv_size(FILE *f, size_t v) {
    if (v == CCB_UNKNOWN)
        fputc(',', f);
    else
        fprintf(f, "%zu,", v);
}

void ccb_csv_u64(FILE *f, uint64_t v) {
    if (v == UINT64_MAX)
        fputc(',', f);
    else
        fprintf(f, "%llu,", (unsigned long long)v);
}

void ccb_csv_double(FILE *f, double v, const char *fmt) {
    if (!ccb_known(v))
        fputc(',', f);
    else {
        fprintf(f, fmt, v);
        fputc(',', f);
    }
}

void ccb_csv_quoted(FILE *f, const char *s) { /* quoted, quotes doubled */
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

void ccb_csv_field(FILE *f, const char *s) {
    if (s && strpbrk(s, ",\"\r\n"))
        ccb_csv_quoted(f, s);
    else if (s)
        fputs(s, f);
}

const char *ccb_md_cell(const char *s, char *buf, size_t len) {
    size_t n = 0;
    if (!len)
        return buf;
    for (; s && *s && n + 1 + (*s == '|') < len; s++) { /* never half of a "\|" */
        if (*s == '|')
            buf[n++] = '\\';
        buf[n++] = *s;
    }
    buf[n] = '\0';
    return buf;
}
