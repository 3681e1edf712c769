/*
 * ccai_escape.h — text from outside the program, written for a person at a
 * terminal: the project's one escaper, header-only (the runtime's
 * ccr_fputs_escaped, ccrun and ccbench all write through it).
 *
 * Much of what the tools print was not written by them: a model file's
 * tensor names, dtypes and metadata keys, a footprint sidecar's lines, a
 * trace file's name and fields, a path or an option's value from the
 * command line. A safetensors header is JSON, and JSON strings may hold any
 * character through escapes: "\u001b[2J" is ESC [ 2 J, which clears the
 * screen when printed as it is, "\u001b]0;...\u0007" retitles the window,
 * "\n" starts a line of the attacker's own ("ccrun: warning: ..." that
 * ccrun never wrote); a file name may hold the same bytes, and bytes that
 * are not UTF-8 make the rest of the line unreadable. Messages keep such
 * text exactly; it is escaped where it meets the terminal (or a markdown
 * file a person reads), by ccai_fputs_escaped:
 *
 *     input bytes                                  written as
 *     printable ASCII, well-formed printable UTF-8 themselves ("café", "€")
 *     C0 controls 0x00-0x1f, DEL 0x7f              \xNN        (ESC: \x1b)
 *     C1 controls U+0080-U+009F (CSI is U+009B)    \xc2\xNN    (each byte)
 *     bidi and line controls: U+061C, U+200E-F,
 *       U+2028-202E, U+2066-2069 ("Trojan
 *       Source" reordering, line separators)      each byte as \xNN
 *     invisible format characters: U+200B-200D,
 *       U+2060-2064, U+FEFF, the tags
 *       U+E0000-E007F (they make one name look
 *       like another: "a\u200bb" and "ab")         each byte as \xNN
 *     a byte that does not start a well-formed     \xNN, then go on with
 *       sequence (RFC 3629: no overlongs, no        the next byte
 *       surrogates, nothing past U+10FFFF;
 *       common/ccai_utf8.h decides)
 *
 * A backslash stays itself: the result is for reading, not for parsing
 * back. The functions:
 *
 *   ccai_fputs_escaped      a string, as the table says;
 *   ccai_escape_some        the same into a buffer, whole characters, for a
 *                           writer that wants one write (log.c's lines);
 *   ccai_fprintf_escaped    printf, then the whole text escaped, except the
 *                           newlines that open and close the format (the
 *                           caller's own: "\n### %s\n\n" is a heading),
 *                           so a message is one call and never cut (the
 *                           text is formatted into a malloc'd buffer of
 *                           its exact length);
 *   ccai_fputs_escaped_lines  another program's output: each line escaped,
 *                           its '\n' kept;
 *   ccai_shown_as_is        the rule alone, for writers that escape their
 *                           own way (ccrun's JSON document writes every
 *                           character it refuses as \uXXXX, so the
 *                           document stays lossless and valid).
 *
 * Cost: one pass, O(length); the printf form one allocation.
 */
#ifndef CCAI_ESCAPE_H
#define CCAI_ESCAPE_H

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccai_utf8.h"

/* 1 for a character a terminal shows rather than acts on or hides (see the
 * table above), 0 for one written escaped. */
static inline int ccai_shown_as_is(uint32_t cp) {
    if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f)) /* C0, DEL, C1 */
        return 0;
    if (cp == 0x061c || (cp >= 0x200b && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202e) ||
        (cp >= 0x2060 && cp <= 0x2064) || (cp >= 0x2066 && cp <= 0x2069)) /* bidi, line, invisible */
        return 0;
    return cp != 0xfeff && !(cp >= 0xe0000 && cp <= 0xe007f); /* zero-width no-break space, tags */
}

/* Escape from *s into out (cap bytes, at least 16: the longest character
 * escaped) as the table above says, whole characters only, advancing *s
 * past them: the bytes written (no NUL added). *s at its NUL: all done. */
static inline size_t ccai_escape_some(char *out, size_t cap, const char **s) {
    static const char hex[] = "0123456789abcdef";
    size_t k = 0;
    const unsigned char *p = (const unsigned char *)*s;
    while (*p) {
        uint32_t cp = 0;
        size_t n = ccai_utf8_decode(p, &cp);
        bool shown = n && ccai_shown_as_is(cp);
        n = n ? n : 1; /* a whole control's bytes; one byte of a malformed sequence */
        if (k + (shown ? n : 4 * n) > cap)
            break;
        for (size_t i = 0; i < n; i++) {
            if (shown) {
                out[k++] = (char)p[i];
            } else {
                out[k++] = '\\';
                out[k++] = 'x';
                out[k++] = hex[p[i] >> 4];
                out[k++] = hex[p[i] & 15];
            }
        }
        p += n;
    }
    *s = (const char *)p;
    return k;
}

/* Write s (NULL: nothing) to f escaped as the table above says, in chunks
 * of up to 1 KiB (a short text in one write, not one per character). The
 * bytes written (INT_MAX at most), or EOF when a write failed. */
static inline int ccai_fputs_escaped(const char *s, FILE *f) {
    size_t written = 0;
    char buf[1024];
    for (const char *p = s ? s : ""; *p;) {
        size_t k = ccai_escape_some(buf, sizeof buf, &p);
        if (fwrite(buf, 1, k, f) != k)
            return EOF;
        written += k;
    }
    return written > INT_MAX ? INT_MAX : (int)written;
}

/* n newlines to f: n, or EOF. */
static inline int ccai_newlines(FILE *f, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (fputc('\n', f) == EOF)
            return EOF;
    return n > INT_MAX ? INT_MAX : (int)n;
}

/* vfprintf(f, fmt, ap), the text escaped but for the newlines opening and
 * closing fmt. The bytes written, or EOF. A text of up to 1 KiB (a table
 * row, a message) is formatted on the stack; a longer one needs host
 * memory, and without it "(out of host memory for the message)" is written
 * in its place and EOF returned with errno ENOMEM: a caller that checks
 * (a table writer) learns its output is not whole. */
static inline int ccai_vfprintf_escaped(FILE *f, const char *fmt, va_list ap) {
    va_list again;
    va_copy(again, ap);
    char small[1024];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    char *text = n < 0 ? NULL : (size_t)n < sizeof small ? small : (char *)malloc((size_t)n + 1);
    if (text && text != small)
        vsnprintf(text, (size_t)n + 1, fmt, again);
    va_end(again);
    if (!text) {
        if (n < 0)
            return EOF;
        ccai_fputs_escaped("(out of host memory for the message)", f);
        errno = ENOMEM;
        return EOF;
    }
    /* fmt's opening and closing newlines are literal: text has them too */
    size_t len = strlen(fmt), lead = strspn(fmt, "\n"), trail = 0;
    while (trail < len - lead && fmt[len - 1 - trail] == '\n')
        trail++;
    text[(size_t)n - trail] = '\0';
    int a = ccai_newlines(f, lead), b = a == EOF ? EOF : ccai_fputs_escaped(text + lead, f);
    int c = b == EOF ? EOF : ccai_newlines(f, trail);
    if (text != small)
        free(text);
    return c == EOF ? EOF : a + b + c;
}

__attribute__((format(printf, 2, 3))) static inline int ccai_fprintf_escaped(FILE *f, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = ccai_vfprintf_escaped(f, fmt, ap);
    va_end(ap);
    return n;
}

/* text (NULL: nothing) line by line, each escaped and ended by '\n'. The
 * bytes written, or EOF. */
static inline int ccai_fputs_escaped_lines(const char *text, FILE *f) {
    int w = 0;
    for (const char *p = text ? text : ""; *p && w != EOF;) {
        size_t k = strcspn(p, "\n");
        int n = ccai_fprintf_escaped(f, "%.*s\n", (int)k, p);
        w = n == EOF ? EOF : w + n;
        p += k + (p[k] == '\n');
    }
    return w;
}

#endif /* CCAI_ESCAPE_H */
