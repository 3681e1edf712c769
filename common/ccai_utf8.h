/*
 * ccai_utf8.h — the project's one UTF-8 decoder, header-only.
 *
 * Names and messages come from outside (an upstream's name, a model file's
 * tensor names, a path): the allocator's snapshot writers keep them when
 * they are well-formed UTF-8 and write '?' for any other byte; the
 * escaper of ccai_escape.h (the runtime's ccr_fputs_escaped, ccrun's JSON,
 * ccbench's messages) shows them on a terminal with controls and
 * malformed bytes escaped. Both ask the same question of the bytes at p —
 * is a well-formed sequence here, how long, which character — and this is
 * the one answer, RFC 3629 strictly:
 *
 *     lead byte   length   second byte        refused
 *     00-7f       1        -                  (NUL ends the string: 0)
 *     c2-df       2        80-bf              c0, c1: overlong
 *     e0          3        a0-bf              overlong
 *     e1-ec,ee-ef 3        80-bf
 *     ed          3        80-9f              surrogates D800-DFFF
 *     f0          4        90-bf              overlong
 *     f1-f3       4        80-bf
 *     f4          4        80-8f              past U+10FFFF
 *     80-bf, f5-ff                            never a lead byte
 *
 * and every byte after the second is 80-bf. A NUL is never a continuation
 * byte, so a cut sequence at the end of a string reads nothing past its
 * terminator. Cost: at most four byte reads; no state, no allocation.
 *
 * A message that quotes the head of a field from outside (a trace's op, a
 * dtype, a sidecar's key, a config value: at most 32 or 64 bytes of it)
 * cuts it with ccai_utf8_head, never at a fixed byte count: a cut inside a
 * well-formed sequence would leave its first bytes, which the escaper then
 * shows as \xNN though the field was valid UTF-8.
 */
#ifndef CCAI_UTF8_H
#define CCAI_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* The well-formed sequence at p: its length (1-4) and code point *cp, or 0
 * (*cp untouched) at the terminating NUL and at a byte that starts none. */
static inline unsigned ccai_utf8_decode(const unsigned char *p, uint32_t *cp) {
    unsigned char c = p[0];
    if (c < 0x80) {
        *cp = c;
        return c != 0;
    }
    unsigned n;
    unsigned char lo = 0x80, hi = 0xbf; /* the second byte's range */
    if (c >= 0xc2 && c <= 0xdf)
        n = 2;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
    else
        return 0;
    if (p[1] < lo || p[1] > hi)
        return 0;
    uint32_t v = ((uint32_t)c & (0x7fu >> n)) << 6 | (p[1] & 0x3fu);
    for (unsigned i = 2; i < n; i++) {
        if (p[i] < 0x80 || p[i] > 0xbf)
            return 0;
        v = v << 6 | (p[i] & 0x3fu);
    }
    *cp = v;
    return n;
}

/* The length of the well-formed sequence at p (1 for ASCII, 2-4), or 0. */
static inline unsigned ccai_utf8_len(const unsigned char *p) {
    uint32_t cp;
    return ccai_utf8_decode(p, &cp);
}

/* How many of the n bytes at s a message quotes when it shows at most max
 * of them: n when n <= max, else max, moved back to the start of the
 * well-formed sequence that a cut at max would split (at most three bytes
 * back), so that the head holds whole characters. Malformed bytes are cut
 * where they lie (the escaper shows them as \xNN either way). For
 * "%.*s": max must fit an int. Cost: at most seven byte reads. */
static inline int ccai_utf8_head(const char *s, size_t n, size_t max) {
    if (n <= max)
        return (int)n;
    const unsigned char *p = (const unsigned char *)s;
    for (size_t back = 1; back <= 3 && back <= max; back++) {
        size_t at = max - back;
        if ((p[at] & 0xc0) == 0x80)
            continue;                           /* a continuation byte: the sequence starts further back */
        unsigned char seq[5] = {0, 0, 0, 0, 0}; /* the sequence at `at`, NUL-ended within the n bytes */
        for (size_t i = 0; i < 4 && at + i < n; i++)
            seq[i] = p[at + i];
        return ccai_utf8_len(seq) > back ? (int)at : (int)max;
    }
    return (int)max;
}

#endif /* CCAI_UTF8_H */
