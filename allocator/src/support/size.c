/*
 * size.c — sizes as text, beside the config that reads them:
 * cca_format_bytes ("1.50 GiB") and cca_parse_size ("1.5G", "512K", "3MiB").
 *
 * - cca_format_bytes shows a number under 1024 in its unit but in TiB, the
 *   last: the unit is taken after the rounding to two decimals (1 MiB - 1 B
 *   is "1.00 MiB", never "1024.00 KiB").
 * - Reading is exact integer arithmetic throughout; a fraction is rounded down to a
 *   whole byte (ccai_parse_size_whole also says whether it was whole: a
 *   count read as a size, and cca_parse_size_exact, refuse what is not);
 *   one pass over a text of any length.
 * - Both are public (ccalloc.h), shared by the tools (ccrun, ccbench).
 * - Neither depends on the program's locale: the text is C's ("1.50 MiB",
 *   never "1,50 MiB", ccai_numeric_begin, numeric.c), digits are read one by one.
 */
#include "support.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

const char *cca_format_bytes(size_t bytes, char *buf, size_t len) {
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    if (!buf || len == 0)
        return ""; /* nowhere to write: an empty text, not NULL, for printf's %s */
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }

    if (u == 0) {
        snprintf(buf, len, "%zu B", bytes);
    } else {
        locale_t previous = ccai_numeric_begin(); /* "1.50 MiB" whatever the program's locale (numeric.c) */
        char shown[32];
        snprintf(shown, sizeof shown, "%.2f", v);
        if (u < 4 && strcmp(shown, "1024.00") == 0) { /* rounded up to a whole next unit */
            v /= 1024.0;
            u++;
        }
        snprintf(buf, len, "%.2f %s", v, units[u]);
        ccai_numeric_end(previous);
    }
    return buf;
}

/* floor(0.d1d2...dn * 2^shift) for the fraction digits `frac` (n of them),
 * exactly. Only the first `shift` digits matter: with k = shift digits,
 * 0.d1..dk * 2^shift = H / 5^k for an integer H, so its distance to the next
 * integer is at least 1 / 5^k, while the rest, 0.0..0d(k+1).. < 10^-k, adds
 * less than 10^-k * 2^shift = 1 / 5^k: it can never carry into the integer
 * part. The first min(n, shift) digits (at most 40) are doubled `shift`
 * times as a decimal fraction, each doubling shifting one bit out. */
static uint64_t fraction_bits(const char *frac, size_t n, unsigned shift, bool *whole) {
    unsigned char d[40];
    size_t k = n < shift ? n : shift;
    for (size_t i = 0; i < k; i++)
        d[i] = (unsigned char)(frac[i] - '0');
    uint64_t bits = 0;
    for (unsigned b = 0; b < shift; b++) {
        unsigned carry = 0;
        for (size_t i = k; i-- > 0;) {
            unsigned x = d[i] * 2u + carry;
            d[i] = (unsigned char)(x % 10);
            carry = x / 10;
        }
        bits = bits << 1 | carry;
    }
    /* whole: nothing left below the point, of the first k digits doubled or
     * of the digits after them (any of which adds a part of a unit) */
    *whole = true;
    for (size_t i = 0; i < k; i++)
        *whole = *whole && d[i] == 0;
    for (size_t i = k; i < n; i++)
        *whole = *whole && frac[i] == '0';
    return bits;
}

/* Exact in every case: the integer part is read as an integer (overflow
 * checked), the suffix is a shift (overflow checked), and a fraction adds
 * fraction_bits (fractions of a byte are dropped: 1.5 is 1 byte, and
 * 0.9999999999999999999K is 1023, not the 1024 a double would give). One
 * pass over the text whatever its length: leading zeros and trailing
 * fraction digits cost a step each and need no buffer. */
cca_status cca_parse_size(const char *text, size_t *out) {
    bool whole;
    return ccai_parse_size_whole(text, out, &whole);
}

/* v + 1 in decimal, into buf (room for SIZE_MAX's digits, one more and the
 * NUL): SIZE_MAX + 1 has no size_t. */
static const char *next_decimal(size_t v, char *buf, size_t cap) {
    int n = snprintf(buf + 1, cap - 1, "%zu", v), i = n;
    while (--i >= 0 && buf[1 + i] == '9')
        buf[1 + i] = '0';
    if (i >= 0) {
        buf[1 + i]++;
        return buf + 1;
    }
    buf[0] = '1'; /* every digit was a 9 */
    return buf;
}

cca_status cca_parse_size_exact(const char *text, size_t *out) {
    if (!text || !out)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_parse_size_exact: NULL argument");
    size_t v;
    bool whole;
    cca_status st = ccai_parse_size_whole(text, &v, &whole);
    if (st != CCA_OK)
        return st;
    char next[24];
    if (!whole) /* v is the floor; the value lies strictly between v and v + 1 (v may be SIZE_MAX) */
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT,
                             "bad size '%s' (not a whole number of bytes: more than %zu, less than %s)", text, v,
                             next_decimal(v, next, sizeof next));
    *out = v;
    return CCA_OK;
}

cca_status ccai_parse_size_whole(const char *text, size_t *out, bool *is_whole) {
    if (!text || !out)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_parse_size: NULL argument");
    /* the number: digits, optionally one '.' and more digits; nothing else
     * (no sign, exponent, hex, inf or nan) */
    const char *p = text;
    uint64_t whole = 0;
    bool too_large = false;
    size_t int_digits = 0, frac_digits = 0;
    for (; isdigit((unsigned char)*p); p++, int_digits++) {
        unsigned digit = (unsigned)(*p - '0');
        if (whole > (UINT64_MAX - digit) / 10)
            too_large = true;
        else
            whole = whole * 10 + digit;
    }
    const char *frac = NULL;
    if (*p == '.')
        for (frac = ++p; isdigit((unsigned char)*p); p++)
            frac_digits++;
    if (int_digits + frac_digits == 0)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "bad size '%s' (expected e.g. 512M, 1.5G, 4096)", text);
    unsigned shift = 0;
    switch (toupper((unsigned char)*p)) {
    case 'K': shift = 10; break;
    case 'M': shift = 20; break;
    case 'G': shift = 30; break;
    case 'T': shift = 40; break;
    default: break;
    }
    if (shift) {
        p++;
        if (*p == 'i' || *p == 'I')
            p++;
    }
    if (*p == 'B' || *p == 'b')
        p++;
    if (*p != '\0')
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "bad size '%s' (expected e.g. 512M, 1.5G, 4096)", text);
    if (too_large || whole > (UINT64_MAX >> shift))
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "bad size '%s' (too large)", text);
    /* whole << shift is a multiple of 2^shift and the fraction adds less
     * than 2^shift: the sum cannot overflow 64 bits */
    bool exact = true;
    uint64_t bytes = (whole << shift) + (frac ? fraction_bits(frac, frac_digits, shift, &exact) : 0);
    if (bytes > SIZE_MAX)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "bad size '%s' (too large)", text);
    *out = (size_t)bytes;
    *is_whole = exact;
    return CCA_OK;
}
