/*
 * text.c — text from outside the program, written for a person at a
 * terminal.
 *
 * Much of what the runtime and ccrun print was not written by them: a
 * model file's tensor names, dtypes and metadata keys (in error messages:
 * "unexpected tensor '...'"), a footprint sidecar's lines (in warnings), a
 * path or a --conf value from the command line. A safetensors header is
 * JSON, and JSON strings may hold any character through escapes:
 * "\u001b[2J" is ESC [ 2 J, which clears the screen when printed as it is,
 * "\u001b]0;...\u0007" retitles the window, "\n" starts a line of the
 * attacker's own ("ccrun: warning: ..." that ccrun never wrote), and bytes
 * that are not UTF-8 make the rest of the line unreadable. Messages keep
 * such text exactly (they are also written into JSON, which escapes it its
 * own way); it is escaped where it meets the terminal, by one function,
 * ccr_fputs_escaped, which ccrun's messages, its table and the engine's
 * default warning sink all use:
 *
 *     input bytes                                  written as
 *     printable ASCII, well-formed printable UTF-8 themselves ("café", "€")
 *     C0 controls 0x00-0x1f, DEL 0x7f              \xNN        (ESC: \x1b)
 *     C1 controls U+0080-U+009F (CSI is U+009B)    \xc2\xNN    (each byte)
 *     bidi and line controls: U+061C, U+200E-F,
 *       U+2028-202E, U+2066-2069 ("Trojan
 *       Source" reordering, line separators)      each byte as \xNN
 *     a byte that does not start a well-formed     \xNN, then go on with
 *       sequence (RFC 3629: no overlongs, no        the next byte
 *       surrogates, nothing past U+10FFFF;
 *       common/ccai_utf8.h decides)
 *
 * A backslash stays itself: the result is for reading, not for parsing
 * back. Cost: one pass, O(length), no allocation.
 */
#include <limits.h>
#include <stdint.h>

#include "ccai_utf8.h" /* common/: the project's one UTF-8 decoder */
#include "internal.h"

/* A character a terminal shows rather than acts on (see the table above). */
static int printable(uint32_t cp) {
    if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f))
        return 0;
    if (cp == 0x061c || cp == 0x200e || cp == 0x200f || (cp >= 0x2028 && cp <= 0x202e) ||
        (cp >= 0x2066 && cp <= 0x2069))
        return 0;
    return 1;
}

int ccr_fputs_escaped(const char *s, FILE *f) {
    size_t written = 0;
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p;) {
        uint32_t cp = 0;
        size_t n = ccai_utf8_decode(p, &cp);
        if (n && printable(cp)) {
            if (fwrite(p, 1, n, f) != n)
                return EOF;
            written += n;
        } else {
            n = n ? n : 1; /* a whole control's bytes; one byte of a malformed sequence */
            for (size_t i = 0; i < n; i++)
                if (fprintf(f, "\\x%02x", p[i]) < 0)
                    return EOF;
            written += 4 * n;
        }
        p += n;
    }
    return written > INT_MAX ? INT_MAX : (int)written;
}
