/*
 * hostile_numbers.h — the class of hostile texts for a plain-decimal whole
 * number (digits only, no sign, blank, base prefix, exponent, fraction or
 * unit), shared by the tests of every parser of one: trace fields, spec
 * strings, footprint sidecars.
 *
 * - Each text is refused by such a parser whatever its range: empty, a sign
 *   alone, a signed number, blanks around it, trailing junk, hex, an
 *   exponent, a fraction, nan and inf, a unit, 2^64 + 1 and 10^39.
 * - Use: static const char *const bad[] = {HOSTILE_DECIMALS}; the tests add
 *   each parser's own bound + 1.
 */
#ifndef HOSTILE_NUMBERS_H
#define HOSTILE_NUMBERS_H

#define HOSTILE_DECIMALS                                                                                               \
    "", "-", "+", "+5", "-0", "-1", " 5", "5 ", "5x", "0x10", "1e3", "1.5", "nan", "inf", "4K",                        \
        "18446744073709551617", "1000000000000000000000000000000000000000"

#endif /* HOSTILE_NUMBERS_H */
