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
 *
 * And runtime/src/error.c, the messages that quote such text: each status's
 * name, the status an allocator failure becomes, the last-error message
 * set, prefixed and cleared, and a warning whole or cut at 1,023 bytes, to
 * the engine's sink or escaped on stderr.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"     /* tests/support */
#include "ccai_decimal.h" /* common/: ccai_decimal_uint_n */
#include "ccai_escape.h" /* common/: ccai_shown_as_is */
#include "ccai_utf8.h"   /* common/ */
#include "ccr.h"
#include "internal.h" /* runtime/src: ccr_warn, ccr_status_of, ccr_mul_ok */

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

/* ccai_utf8_head: the head of a field a message quotes is cut between
 * characters, never inside a well-formed sequence (its first bytes would
 * show as \xNN); malformed bytes are cut where they lie. */
Test(runtime_text, utf8_head_cuts_between_characters) {
    cr_expect_eq(ccai_utf8_head("abc", 3, 32), 3, "shorter than the cap: whole");
    cr_expect_eq(ccai_utf8_head("abcd", 4, 4), 4, "exactly the cap: whole");
    cr_expect_eq(ccai_utf8_head("abcd", 4, 3), 3, "ASCII: at the cap");
    cr_expect_eq(ccai_utf8_head("a\xc3\xa9z", 4, 2), 1, "a 2-byte character straddling the cap");
    cr_expect_eq(ccai_utf8_head("a\xc3\xa9z", 4, 3), 3, "ending at the cap");
    cr_expect_eq(ccai_utf8_head("a\xe2\x82\xacz", 5, 2), 1, "a 3-byte character, cut after its lead");
    cr_expect_eq(ccai_utf8_head("a\xe2\x82\xacz", 5, 3), 1, "a 3-byte character, cut before its last");
    cr_expect_eq(ccai_utf8_head("\xf0\x9f\x98\x80z", 5, 3), 0, "a 4-byte character at the start");
    cr_expect_eq(ccai_utf8_head("\xf0\x9f\x98\x80z", 5, 4), 4);
    cr_expect_eq(ccai_utf8_head("\xf0\x9f\x98\x80z", 5, 0), 0);
    /* malformed: not moved */
    cr_expect_eq(ccai_utf8_head("\x80\x80\x80\x80\x80", 5, 3), 3, "continuation bytes alone");
    cr_expect_eq(ccai_utf8_head("a\xe2\x82x", 4, 2), 2, "a sequence cut short in the text itself");
    cr_expect_eq(ccai_utf8_head("a\xc0\x80z", 4, 2), 2, "an overlong NUL");
    cr_expect_eq(ccai_utf8_head("a\xed\xa0\x80z", 5, 2), 2, "a surrogate");
    /* the n bytes are the text: a sequence that goes past them is not whole */
    cr_expect_eq(ccai_utf8_head("a\xe2\x82\xac", 3, 2), 2);
}

/* ccai_decimal_uint_n, the spec's dimensions and seed: a whole number in
 * [lo, hi] for any hi. Its overflow test subtracted the digit from hi, so
 * a limit below 9 wrapped and took a digit above it ("7" in 0..5). */
Test(runtime_text, decimal_span_is_exact_for_any_limit) {
    static const struct {
        const char *text;
        unsigned long long lo, hi;
        int ok;
        unsigned long long v;
    } cases[] = {
        {"0", 0, 0, 1, 0},
        {"00000", 0, 0, 1, 0},
        {"1", 0, 0, 0, 0},
        {"5", 0, 5, 1, 5},
        {"005", 0, 5, 1, 5},
        {"6", 0, 5, 0, 0},
        {"7", 0, 5, 0, 0},
        {"9", 0, 5, 0, 0},
        {"10", 0, 5, 0, 0},
        {"9", 0, 8, 0, 0},
        {"9", 0, 9, 1, 9},
        {"10", 0, 9, 0, 0},
        {"10", 0, 10, 1, 10},
        {"11", 0, 10, 0, 0},
        {"16777216", 1, 1ull << 24, 1, 1ull << 24},
        {"000000000000000000000000016777216", 1, 1ull << 24, 1, 1ull << 24},
        {"16777217", 1, 1ull << 24, 0, 0},
        {"0", 1, 1ull << 24, 0, 0},
        {"18446744073709551615", 0, ~0ull, 1, ~0ull},
        {"0000000000000000000000000018446744073709551615", 0, ~0ull, 1, ~0ull},
        {"18446744073709551616", 0, ~0ull, 0, 0},
        {"99999999999999999999999999999999", 0, ~0ull, 0, 0},
        {"", 0, ~0ull, 0, 0},
        {"+1", 0, ~0ull, 0, 0},
        {"-1", 0, ~0ull, 0, 0},
        {" 1", 0, ~0ull, 0, 0},
        {"1 ", 0, ~0ull, 0, 0},
        {"0x1", 0, ~0ull, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unsigned long long v = 12345;
        int rc = ccai_decimal_uint_n(cases[i].text, strlen(cases[i].text), cases[i].lo, cases[i].hi, &v);
        cr_expect_eq(rc, cases[i].ok ? 0 : -1, "'%s' in %llu..%llu", cases[i].text, cases[i].lo, cases[i].hi);
        cr_expect_eq(v, cases[i].ok ? cases[i].v : 12345, "'%s': *out set only when taken", cases[i].text);
    }
    unsigned long long v = 0;
    cr_expect_eq(ccai_decimal_uint_n("12x", 2, 0, 100, &v), 0, "the n bytes only");
    cr_expect_eq(v, 12);
}

Test(runtime_text, null_is_empty_and_a_failed_write_is_eof) {
    expect_escaped(NULL, "");
    FILE *f = fopen("/dev/full", "w");
    cr_assert_not_null(f);
    setvbuf(f, NULL, _IONBF, 0); /* every byte a write, so the first one fails */
    cr_expect_eq(ccr_fputs_escaped("x\x1b", f), EOF);
    fclose(f);
    /* no stream: a failed write, never a crash */
    cr_expect_eq(ccr_fputs_escaped("x", NULL), EOF);
    cr_expect_eq(ccr_fputs_escaped("", NULL), EOF);
    cr_expect_eq(ccr_fputs_escaped(NULL, NULL), EOF);
}

/* ---- error.c: status names, the status an allocator failure becomes, warnings ---- */

/* Each status is named as the enum spells it; a value outside the enum is
 * "CCR_ERR_UNKNOWN", never another status's name. */
Test(runtime_text, every_status_has_its_own_name) {
    static const char *const names[] = {"CCR_OK",
                                        "CCR_ERR_INVALID_ARGUMENT",
                                        "CCR_ERR_IO",
                                        "CCR_ERR_FORMAT",
                                        "CCR_ERR_SPEC",
                                        "CCR_ERR_SHAPE",
                                        "CCR_ERR_DTYPE",
                                        "CCR_ERR_OUT_OF_MEMORY",
                                        "CCR_ERR_DEVICE",
                                        "CCR_ERR_KERNEL",
                                        "CCR_ERR_ALLOCATOR",
                                        "CCR_ERR_LIVE_BLOCKS",
                                        "CCR_ERR_ASLEEP",
                                        "CCR_ERR_UNSUPPORTED"};
    size_t n = sizeof names / sizeof *names;
    cr_assert_eq(n, (size_t)CCR_ERR_UNSUPPORTED + 1, "a status was added: name it here");
    for (size_t s = 0; s < n; s++)
        cr_expect_str_eq(ccr_status_string((ccr_status)s), names[s]);
    cr_expect_str_eq(ccr_status_string((ccr_status)n), "CCR_ERR_UNKNOWN");
    cr_expect_str_eq(ccr_status_string((ccr_status)-1), "CCR_ERR_UNKNOWN");
}

/* ccr_status_of: out of memory stays out of memory, a device that failed or
 * is missing is CCR_ERR_DEVICE, asleep stays asleep, anything else the
 * allocator returns is CCR_ERR_ALLOCATOR. */
Test(runtime_text, an_allocator_status_becomes_the_runtime_status_it_means) {
    static const struct {
        cca_status in;
        ccr_status out;
    } map[] = {
        {CCA_OK, CCR_OK},
        {CCA_ERR_INVALID_ARGUMENT, CCR_ERR_ALLOCATOR},
        {CCA_ERR_OUT_OF_MEMORY, CCR_ERR_OUT_OF_MEMORY},
        {CCA_ERR_INVALID_POINTER, CCR_ERR_ALLOCATOR},
        {CCA_ERR_UPSTREAM, CCR_ERR_DEVICE},
        {CCA_ERR_NO_DEVICE, CCR_ERR_DEVICE},
        {CCA_ERR_CONFIG, CCR_ERR_ALLOCATOR},
        {CCA_ERR_NOT_READY, CCR_ERR_ALLOCATOR},
        {CCA_ERR_LIVE_BLOCKS, CCR_ERR_ALLOCATOR},
        {CCA_ERR_IO, CCR_ERR_ALLOCATOR},
        {CCA_ERR_INVARIANT, CCR_ERR_ALLOCATOR},
        {CCA_ERR_ASLEEP, CCR_ERR_ASLEEP},
    };
    for (size_t k = 0; k < sizeof map / sizeof *map; k++)
        cr_expect_eq(ccr_status_of(map[k].in), map[k].out, "%s: got %s, want %s", cca_status_string(map[k].in),
                     ccr_status_string(ccr_status_of(map[k].in)), ccr_status_string(map[k].out));
}

/* ccr_mul_ok: the product when it fits in size_t, 0 (and *out untouched)
 * when it does not, exactly at the edge. */
Test(runtime_text, a_product_is_refused_exactly_when_it_overflows) {
    size_t out = 7;
    cr_expect_eq(ccr_mul_ok(0, SIZE_MAX, &out), 1);
    cr_expect_eq(out, 0);
    cr_expect_eq(ccr_mul_ok(SIZE_MAX, 1, &out), 1);
    cr_expect_eq(out, SIZE_MAX);
    cr_expect_eq(ccr_mul_ok(3, SIZE_MAX / 3, &out), 1); /* SIZE_MAX = 3 * 5 * 17 * ...: exactly SIZE_MAX */
    cr_expect_eq(out, SIZE_MAX);
    out = 7;
    cr_expect_eq(ccr_mul_ok(3, SIZE_MAX / 3 + 1, &out), 0);
    cr_expect_eq(out, 7);
    cr_expect_eq(ccr_mul_ok((size_t)1 << 32, (size_t)1 << 31, &out), 1);
    cr_expect_eq(out, (size_t)1 << 63);
    cr_expect_eq(ccr_mul_ok((size_t)1 << 32, (size_t)1 << 32, &out), 0);
}

/* ccr_parse_size: an empty or NULL text is "empty size"; the allocator's
 * own message for anything else it refuses. */
Test(runtime_text, a_size_is_refused_with_what_was_wrong) {
    size_t sz = 5;
    cr_expect_eq(ccr_parse_size("", &sz), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(ccr_last_error(), "empty size");
    cr_expect_eq(ccr_parse_size(NULL, &sz), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(ccr_last_error(), "empty size");
    cr_expect_eq(ccr_parse_size("1K", NULL), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(sz, 5);
    cr_expect_eq(ccr_parse_size("12Q", &sz), CCR_ERR_INVALID_ARGUMENT);
    cca_status st = cca_parse_size("12Q", &sz);
    char want[512];
    snprintf(want, sizeof want, "%s", cca_last_error());
    cr_expect_neq(st, CCA_OK);
    cr_expect_eq(ccr_parse_size("12Q", &sz), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(ccr_last_error(), want);
}

/* The last-error message: ccr_fail sets it whole, ccr_fail_prefix puts
 * context in front of it, ccr_clear_error empties it; each returns the
 * status it was given. The prefix is joined to the message by ": ". */
Test(runtime_text, the_message_is_set_prefixed_and_cleared) {
    cr_expect_eq(ccr_fail(CCR_ERR_SHAPE, "tensor '%s' is %d wide", "w", 3), CCR_ERR_SHAPE);
    cr_expect_str_eq(ccr_last_error(), "tensor 'w' is 3 wide");
    cr_expect_eq(ccr_fail_prefix(CCR_ERR_FORMAT, "%s", "m.safetensors"), CCR_ERR_FORMAT);
    cr_expect_str_eq(ccr_last_error(), "m.safetensors: tensor 'w' is 3 wide");
    ccr_clear_error();
    cr_expect_str_eq(ccr_last_error(), "");
}

static char sunk[2][2048];
static int n_sunk;
static void sink(void *user, const char *line) {
    cr_expect_eq(user, (void *)sunk);
    if (n_sunk < 2)
        snprintf(sunk[n_sunk], sizeof sunk[0], "%s", line);
    n_sunk++;
}

/* A warning: to the engine's sink as one line, unescaped (the sink decides);
 * with no engine or no sink, "ccr: warning: " and the line escaped on
 * stderr. Longer than 1,023 bytes, it is cut there and ends in "..."; at
 * 1,023 or less it is whole. */
Test(runtime_text, a_warning_goes_to_its_sink_whole_or_cut_with_dots) {
    ccr_engine *e = NULL;
    ccr_engine_options o;
    ccr_engine_options_default(&o);
    o.device = CCR_DEVICE_HOST;
    o.host_capacity = 16 << 20;
    o.warn = sink;
    o.warn_user = sunk;
    cr_assert_eq(ccr_engine_create(&o, &e), CCR_OK, "%s", ccr_last_error());
    char text[1100];
    for (size_t len = 1020; len <= 1026; len++) {
        memset(text, 'a', len);
        text[len] = '\0';
        text[len - 1] = 'z';
        n_sunk = 0;
        ccr_warn(e, "%s", text);
        cr_assert_eq(n_sunk, 1);
        if (len <= 1023) {
            cr_expect_str_eq(sunk[0], text, "%zu bytes: whole", len);
        } else {
            cr_expect_eq(strlen(sunk[0]), 1023, "%zu bytes: cut to 1023", len);
            cr_expect_eq(memcmp(sunk[0], text, 1020), 0, "%zu bytes", len);
            cr_expect_str_eq(sunk[0] + 1020, "...", "%zu bytes: ends in dots", len);
        }
    }
    n_sunk = 0;
    ccr_warn(e, "tensor '%s'\n", "a\x1b[31mb");
    cr_expect_str_eq(sunk[0], "tensor 'a\x1b[31mb'\n", "the sink gets the line as it is");
    ccr_engine_destroy(e);

    tu_capture c;
    tu_capture_begin(&c, 2);
    ccr_warn(NULL, "footprint sidecar '%s': %s; ignored", "a\x1b[31mb\nforged", "empty");
    char *err = tu_capture_end(&c);
    cr_expect_str_eq(err, "ccr: warning: footprint sidecar 'a\\x1b[31mb\\x0aforged': empty; ignored\n");
    free(err);
    cr_expect_eq(n_sunk, 1, "no engine: the default sink, not the last engine's");
}
