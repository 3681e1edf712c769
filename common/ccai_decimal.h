/*
 * ccai_decimal.h — the project's grammars of a decimal number written by a
 * person, header-only: a fraction (a config string's, ccbench's --scale)
 * and a whole number (every count and number option of ccrun, ccbench and
 * cck_bench, a trace's fields, the plug's device count, a spec string's
 * dimensions and seed: ccai_decimal_uint_n, over a field not NUL-ended).
 *
 * strtod alone takes much more than a person means by "a number": leading
 * blanks (" 1"), a sign ("+1", "-0"), hex floats ("0x10" is 16, "0x1p-4"),
 * "inf", "infinity" and "nan". The grammar here is what the docs promise:
 *
 *     digits [ "." digits ] [ ("e" | "E") [ "+" | "-" ] digits ]
 *
 * where either side of the point may be empty but not both ("5.", ".5";
 * not "."), and an exponent needs at least one digit ("1e" and "1e+" are
 * refused). Nothing else: no sign, no blanks, no trailing text. A text that
 * passes is then read by strtod (range checks are the caller's: "1e400" is
 * in the grammar and is HUGE_VAL). Cost: one pass, no allocation.
 */
#ifndef CCAI_DECIMAL_H
#define CCAI_DECIMAL_H

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

static inline bool ccai_decimal_number(const char *s) {
    size_t digits = 0;
    bool point = false;
    for (; *s && *s != 'e' && *s != 'E'; s++) {
        if (*s == '.' && !point)
            point = true;
        else if (*s >= '0' && *s <= '9')
            digits++;
        else
            return false;
    }
    if (!digits)
        return false;
    if (!*s)
        return true;
    s++; /* the exponent */
    if (*s == '+' || *s == '-')
        s++;
    if (!*s)
        return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return false;
    return true;
}

/* A whole number: digits and nothing else, in [lo, hi]. strtoull alone
 * takes blanks (" 5"), a sign ("+5"; "-5" as 2^64 - 5) and clamps an
 * overflow to 2^64 - 1; atoi takes trailing text ("5x") and overflows
 * silently. 0 and *out set, or -1 and *out untouched. */
static inline int ccai_decimal_uint(const char *s, unsigned long long lo, unsigned long long hi,
                                    unsigned long long *out) {
    if (!s || *s < '0' || *s > '9')
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno == ERANGE || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* The same grammar over the n bytes at s (a field of a spec string, not
 * NUL-terminated there): 0 and *out set, or -1 and *out untouched. Any
 * number of digits (leading zeros); the overflow test compares with hi / 10
 * and hi % 10, never subtracts from hi, so it holds for every hi, 0 too. */
static inline int ccai_decimal_uint_n(const char *s, size_t n, unsigned long long lo, unsigned long long hi,
                                      unsigned long long *out) {
    if (n == 0)
        return -1;
    unsigned long long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > hi / 10 || (v == hi / 10 && d > hi % 10)) /* v * 10 + d > hi */
            return -1;
        v = v * 10 + d;
    }
    if (v < lo)
        return -1;
    *out = v;
    return 0;
}

#endif /* CCAI_DECIMAL_H */
