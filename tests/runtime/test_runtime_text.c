/*
 * test_runtime_text.c — runtime/src/text.c and the escaper under it
 * (common/ccai_escape.h, which ccbench uses too): text from outside the
 * program (a model file's names, a sidecar, a path) written for a terminal.
 *
 *   - control bytes (C0, DEL), C1 controls, bidi controls, invisible format
 *     characters (zero-width ones, U+FEFF, tags) and every byte of a
 *     sequence that is not well-formed UTF-8 come out as \xNN;
 *   - printable ASCII and well-formed printable UTF-8 come out as they are;
 *   - the count returned is the bytes written; the decoder under it
 *     (common/ccai_utf8.h) agrees with RFC 3629 (no overlongs, no
 *     surrogates, nothing past U+10FFFF).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccai_escape.h" /* common/: ccai_shown_as_is */
#include "ccai_utf8.h"   /* common/ */
#include "ccr.h"

/* ccr_fputs_escaped(in) into a string, checking its count. */
static void expect_escaped(const char *in, const char *want) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    int n = ccr_fputs_escaped(in, f);
    cr_assert_eq(fclose(f), 0);
    cr_expect_str_eq(buf, want, "input '%s'", in);
    cr_expect_eq((size_t)n, strlen(want), "input '%s': returned %d, wrote %zu", in, n, strlen(want));
    free(buf);
}

Test(runtime_text, controls_are_escaped) {
    expect_escaped("0.weight", "0.weight");
    expect_escaped("", "");
    expect_escaped("a\x1b[31mb\nc", "a\\x1b[31mb\\x0ac");
    expect_escaped("\x1b]0;title\x07", "\\x1b]0;title\\x07");
    expect_escaped("\t\r\x01\x1f\x7f", "\\x09\\x0d\\x01\\x1f\\x7f");
    expect_escaped("back\\slash 'quoted' 100%", "back\\slash 'quoted' 100%");
}

Test(runtime_text, utf8_is_kept_when_printable) {
    expect_escaped("caf\xc3\xa9", "caf\xc3\xa9");                 /* é */
    expect_escaped("\xe2\x82\xac \xf0\x9f\x98\x80", "\xe2\x82\xac \xf0\x9f\x98\x80"); /* € 😀 */
    expect_escaped("\xc2\xa0\xc2\xbf", "\xc2\xa0\xc2\xbf");       /* U+00A0, U+00BF: past C1 */
    expect_escaped("\xef\xbf\xbd", "\xef\xbf\xbd");               /* U+FFFD */
    expect_escaped("\xf4\x8f\xbf\xbf", "\xf4\x8f\xbf\xbf");       /* U+10FFFF, the last */
}

Test(runtime_text, c1_and_bidi_controls_are_escaped) {
    expect_escaped("\xc2\x9b" "31m", "\\xc2\\x9b" "31m");      /* U+009B: CSI in 8 bits */
    expect_escaped("\xc2\x80\xc2\x9f", "\\xc2\\x80\\xc2\\x9f"); /* U+0080, U+009F */
    expect_escaped("a\xe2\x80\xae" "b", "a\\xe2\\x80\\xaeb");     /* U+202E RIGHT-TO-LEFT OVERRIDE */
    expect_escaped("\xe2\x80\xaa\xe2\x81\xa6\xe2\x81\xa9", "\\xe2\\x80\\xaa\\xe2\\x81\\xa6\\xe2\\x81\\xa9");
    expect_escaped("\xe2\x80\xa9\xe2\x80\xa8", "\\xe2\\x80\\xa9\\xe2\\x80\\xa8"); /* paragraph, line separators */
}

/* characters that show nothing, so that one name looks like another */
Test(runtime_text, invisible_format_characters_are_escaped) {
    expect_escaped("a\xe2\x80\x8b" "b", "a\\xe2\\x80\\x8bb");                     /* U+200B ZERO WIDTH SPACE */
    expect_escaped("\xe2\x80\x8c\xe2\x80\x8d", "\\xe2\\x80\\x8c\\xe2\\x80\\x8d"); /* ZWNJ, ZWJ */
    expect_escaped("\xe2\x81\xa0\xe2\x81\xa4", "\\xe2\\x81\\xa0\\xe2\\x81\\xa4"); /* U+2060 WORD JOINER, U+2064 */
    expect_escaped("\xef\xbb\xbfx", "\\xef\\xbb\\xbfx");                          /* U+FEFF (BOM) */
    expect_escaped("\xf3\xa0\x80\x80\xf3\xa0\x81\x81\xf3\xa0\x81\xbf",            /* tags E0000, E0041, E007F */
                   "\\xf3\\xa0\\x80\\x80\\xf3\\xa0\\x81\\x81\\xf3\\xa0\\x81\\xbf");
    /* their neighbours are printable: U+200A HAIR SPACE, U+2065, U+FEFE, U+E0080 */
    expect_escaped("\xe2\x80\x8a\xe2\x81\xa5\xef\xbb\xbe\xf3\xa0\x82\x80",
                   "\xe2\x80\x8a\xe2\x81\xa5\xef\xbb\xbe\xf3\xa0\x82\x80");
}

/* the rule alone, as ccrun's JSON writer asks it */
Test(runtime_text, shown_as_is) {
    const uint32_t escaped[] = {0x00,   0x1b,   0x7f,   0x80,   0x9b,   0x9f,   0x061c, 0x200b,  0x200f,
                                0x2028, 0x202e, 0x2060, 0x2064, 0x2066, 0x2069, 0xfeff, 0xe0000, 0xe007f};
    const uint32_t shown[] = {' ',    '~',    0xa0,   0xe9,   0x200a,  0x2010,  0x2027,  0x202f,
                              0x2065, 0x206a, 0xfffd, 0x1f600, 0xdffff, 0xe0080, 0x10ffff};
    for (size_t i = 0; i < sizeof escaped / sizeof *escaped; i++)
        cr_expect_eq(ccai_shown_as_is(escaped[i]), 0, "U+%04X", (unsigned)escaped[i]);
    for (size_t i = 0; i < sizeof shown / sizeof *shown; i++)
        cr_expect_eq(ccai_shown_as_is(shown[i]), 1, "U+%04X", (unsigned)shown[i]);
}

Test(runtime_text, malformed_utf8_is_escaped_byte_by_byte) {
    expect_escaped("\xff", "\\xff");
    expect_escaped("a\xc3", "a\\xc3");                         /* cut at the end */
    expect_escaped("\xc3(", "\\xc3(");                         /* cut by ASCII */
    expect_escaped("\x80\xbf", "\\x80\\xbf");                  /* stray continuations */
    expect_escaped("\xc0\xaf\xc1\xbf", "\\xc0\\xaf\\xc1\\xbf"); /* overlong '/' and DEL */
    expect_escaped("\xe0\x80\xaf", "\\xe0\\x80\\xaf");         /* overlong, 3 bytes */
    expect_escaped("\xed\xa0\x80", "\\xed\\xa0\\x80");         /* a surrogate */
    expect_escaped("\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80"); /* past U+10FFFF */
    expect_escaped("\xf0\x9f\x98", "\\xf0\\x9f\\x98");         /* 4-byte sequence cut */
    expect_escaped("\xc3\xc3\xa9", "\\xc3\xc3\xa9");           /* a cut one, then é */
}

/* common/ccai_utf8.h, the decoder text.c and the snapshot writers share. */
Test(runtime_text, utf8_decode) {
    uint32_t cp = 0;
    cr_expect_eq(ccai_utf8_decode((const unsigned char *)"a", &cp), 1);
    cr_expect_eq(cp, 'a');
    cr_expect_eq(ccai_utf8_decode((const unsigned char *)"\xc3\xa9", &cp), 2);
    cr_expect_eq(cp, 0xe9);
    cr_expect_eq(ccai_utf8_decode((const unsigned char *)"\xe2\x82\xac", &cp), 3);
    cr_expect_eq(cp, 0x20ac);
    cr_expect_eq(ccai_utf8_decode((const unsigned char *)"\xf0\x9f\x98\x80", &cp), 4);
    cr_expect_eq(cp, 0x1f600);
    cr_expect_eq(ccai_utf8_decode((const unsigned char *)"\xf4\x8f\xbf\xbf", &cp), 4);
    cr_expect_eq(cp, 0x10ffff);
    const char *bad[] = {"", "\xc3", "\xc0\xaf", "\xe0\x9f\xbf", "\xed\xa0\x80", "\xf0\x8f\xbf\xbf", "\xf4\x90\x80\x80",
                         "\xf5\x80\x80\x80", "\xff", "\x80", "\xe2\x82"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_expect_eq(ccai_utf8_len((const unsigned char *)bad[i]), 0, "case %zu", i);
}

Test(runtime_text, null_is_empty_and_a_failed_write_is_eof) {
    expect_escaped(NULL, "");
    FILE *f = fopen("/dev/full", "w");
    cr_assert_not_null(f);
    setvbuf(f, NULL, _IONBF, 0); /* every byte a write, so the first one fails */
    cr_expect_eq(ccr_fputs_escaped("x\x1b", f), EOF);
    fclose(f);
}
