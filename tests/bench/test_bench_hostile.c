/*
 * test_bench_hostile.c — bench/trace.c, ideal.c, replay.c: adversarial tests of the trace reader/writer
 * (bench/trace.c), the analysis and ideal arena (bench/ideal.c), replay
 * (bench/replay.c, bench/strategy*.c) and the allocator's recorder
 * (allocator/src/observe/trace.c).
 *
 * Every test states the exact behaviour it expects (error vs success, the
 * message naming the line, exact counts). Tests whose name starts with
 * `defect_` were written against a defect, before its fix (each failed or
 * crashed then); they pass now and keep it fixed. Run under ASan + UBSan:
 *
 *   gcc -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=address,undefined \
 *       -I bench -I allocator/include -I tests/support tests/bench/test_bench_hostile.c \
 *       BUILD/bench/libccbench_core.a BUILD/allocator/libccalloc.a \
 *       -lcriterion -lz -lm -lpthread -o /tmp/hostile && /tmp/hostile --jobs=1
 *
 * (BUILD configured with -DCCA_SANITIZE=ON -DCCA_ENABLE_CUDA=OFF.)
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "ccai_utf8.h" /* common/: ccai_utf8_decode */
#include "ccalloc.h"
#include "ccbench.h"
#include "read_text.h" /* tests/support */
#include "hostile_numbers.h" /* tests/support: HOSTILE_DECIMALS */

#if defined(__has_include)
#if __has_include(<sanitizer/lsan_interface.h>) && defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define HAVE_LSAN 1
#endif
#endif

/* malloc(2^60) must return NULL (the malloc strategy counts an OOM), not
 * abort the process as ASan does by default; UB is fatal. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) {
    return "allocator_may_return_null=1";
}
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void) {
    return "halt_on_error=1:print_stacktrace=1";
}

#define P60 ((uint64_t)1 << 60)
#define P59 ((uint64_t)1 << 59)

static double now_s(void) {
    return (double)ccb_now_ns() / 1e9;
}

/* ---- helpers -------------------------------------------------------------- */

/* Read `len` bytes (NULs allowed) into t, named "mem". */
static int rd(ccb_trace *t, const void *buf, size_t len, char *err, size_t errlen) {
    ccb_trace_init(t, "mem");
    FILE *f = len ? fmemopen((void *)buf, len, "r") : fopen("/dev/null", "r");
    cr_assert_not_null(f, "fmemopen: %s", strerror(errno));
    int rc = ccb_trace_read(t, f, err, errlen);
    fclose(f);
    return rc;
}

static void assert_emptied(const ccb_trace *t) {
    cr_assert_null(t->ev, "events freed after an error");
    cr_assert_null(t->marks, "marks freed after an error");
    cr_assert_null(t->comments, "comments freed after an error");
    cr_assert_eq(t->n, 0);
    cr_assert_eq(t->slots, 0);
    cr_assert_eq(t->nmarks, 0);
    cr_assert_str_eq(t->name, "mem", "the name survives an error");
}

/* Rejected, with `needle` in the message, and t emptied. */
static void bad_n(const char *buf, size_t len, const char *needle) {
    ccb_trace t;
    char err[256] = "";
    int rc = rd(&t, buf, len, err, sizeof err);
    cr_assert_eq(rc, -1, "accepted: '%.*s'", (int)(len > 200 ? 200 : len), buf);
    cr_assert(strstr(err, needle) != NULL, "error '%s' should contain '%s' (input '%.*s')", err, needle,
              (int)(len > 200 ? 200 : len), buf);
    assert_emptied(&t);
    ccb_trace_free(&t);
}

static void bad(const char *text, const char *needle) {
    bad_n(text, strlen(text), needle);
}

/* v2 header + body */
static void bad2(const char *body, const char *needle) {
    char text[2048];
    snprintf(text, sizeof text, "seq,op,id,size,stream,name\n%s", body);
    bad(text, needle);
}

/* Accepted; t is left for the caller to inspect and free. */
static void good_n(const char *buf, size_t len, ccb_trace *t) {
    char err[256] = "";
    int rc = rd(t, buf, len, err, sizeof err);
    cr_assert_eq(rc, 0, "rejected: %s (input '%.*s')", err, (int)(len > 200 ? 200 : len), buf);
}

static void good(const char *text, ccb_trace *t) {
    good_n(text, strlen(text), t);
}

static void good2(const char *body, ccb_trace *t) {
    char text[4096];
    snprintf(text, sizeof text, "seq,op,id,size,stream,name\n%s", body);
    good(text, t);
}

/* One gzip member holding data[0..n). */
static unsigned char *gz_member(const void *data, size_t n, size_t *outlen) {
    z_stream z;
    memset(&z, 0, sizeof z);
    cr_assert_eq(deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY), Z_OK);
    size_t cap = deflateBound(&z, (uLong)n) + 64;
    unsigned char *out = malloc(cap);
    cr_assert_not_null(out);
    z.next_in = (Bytef *)data;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    cr_assert_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
    *outlen = cap - z.avail_out;
    deflateEnd(&z);
    return out;
}

static char tmpdir[64];

/* The test process's scratch directory goes away when the process exits. */
static void remove_tmpdir(void) {
    DIR *d = opendir(tmpdir);
    if (!d)
        return;
    struct dirent *e;
    char path[512];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(path, sizeof path, "%s/%s", tmpdir, e->d_name);
            unlink(path);
        }
    closedir(d);
    rmdir(tmpdir);
}

static const char *tmp_path(const char *name) {
    static char path[256];
    if (!tmpdir[0]) {
        snprintf(tmpdir, sizeof tmpdir, "/tmp/ccb_hostile_XXXXXX");
        cr_assert_not_null(mkdtemp(tmpdir));
        atexit(remove_tmpdir);
    }
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    return path;
}

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(data, 1, n, f), n);
    cr_assert_eq(fclose(f), 0);
}

static void write_gz(const char *path, const char *text) {
    size_t n;
    unsigned char *g = gz_member(text, strlen(text), &n);
    write_file(path, g, n);
    free(g);
}

/* A data line of exactly `len` characters before its end of line: seq padded
 * with leading zeros, then `rest` (",alloc,1,8,0"). */
static size_t make_line(char *dst, size_t len, const char *rest, const char *eol) {
    size_t r = strlen(rest);
    cr_assert_gt(len, r);
    memset(dst, '0', len - r);
    memcpy(dst + len - r, rest, r);
    strcpy(dst + len, eol);
    return len + strlen(eol);
}

static const char simple_v2[] = "seq,op,id,size,stream,name\n"
                                "0,alloc,1,4096,0\n"
                                "1,mark,0,0,0,phase\n"
                                "2,free,1,4096,0\n"
                                "3,empty_cache,0,0,0\n"
                                "4,trim,0,1048576,0\n";

/* ======================================================================== */
/* 1. Malformed fields                                                       */
/* ======================================================================== */

Test(fields, empty_fields_are_errors_naming_the_line) {
    bad2(",alloc,1,8,0\n", "line 2: bad number");
    bad2("0,,1,8,0\n", "line 2: op '' is not one of");
    bad2("0,alloc,,8,0\n", "line 2: bad number");
    bad2("0,alloc,1,,0\n", "line 2: bad number");
    bad2("0,alloc,1,8,\n", "line 2: bad number");
    bad2(",,,,\n", "line 2: bad number");
    bad2("0,mark,,0,0,x\n", "line 2: bad number");
    bad2("0,mark,0,0,0,\n", "line 2: mark name must be");
}

Test(fields, missing_and_extra_fields) {
    bad2("0,alloc,1,8\n", "line 2: expected 5 fields");
    bad2("0\n", "line 2: expected 5 fields");
    bad2("0,alloc,1,8,0,\n", "line 2: expected 5 fields");
    bad2("0,alloc,1,8,0,name\n", "line 2: expected 5 fields");
    bad2("0,alloc,1,8,0,,,,,,,,,,,,,,,,,,,,,,\n", "line 2: expected 5 fields");
    bad2("0,free,1,8,0,x\n", "line 2: expected 5 fields");
    bad2("0,empty_cache,0,0,0,x\n", "line 2: expected 5 fields");
    bad2("0,mark,0,0,0\n", "line 2: expected 6 fields");
    bad2("0,mark,0,0,0,a,b\n", "line 2: expected 6 fields");
    bad2("   \n", "line 2: expected 5 fields");
}

Test(fields, signs_spaces_and_bases_are_rejected) {
    static const char *const nums[] = {"+1", "-0", "+0", "-1", " 1", "1 ", "\t1", "1\t", "0x10", "0X1f", "1e3",
                                       "10.0", "0b1", "1_000", "٣", "1,", "\v1", "0 "};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        char body[128];
        if (strchr(nums[i], ','))
            continue; /* a comma changes the field count, tested above */
        snprintf(body, sizeof body, "%s,alloc,1,8,0\n", nums[i]);
        bad2(body, "line 2: bad number");
        snprintf(body, sizeof body, "0,alloc,%s,8,0\n", nums[i]);
        bad2(body, "line 2: bad number");
        snprintf(body, sizeof body, "0,alloc,1,%s,0\n", nums[i]);
        bad2(body, "line 2: bad number");
        snprintf(body, sizeof body, "0,alloc,1,8,%s\n", nums[i]);
        bad2(body, "line 2: bad number");
    }
}

/* A refused number is named: its field, its text as written (at most 32
 * characters, then "..."), and the field's range, for every field of a v3
 * line and every kind of hostile number (the message said "bad number
 * (seq, id < 2^44, size <= 2^60, stream < 256, domain < 65535)" whichever
 * field it was, and not the text). */
Test(fields, a_bad_number_names_its_field_and_its_text) {
    static const struct {
        const char *name, *range, *over; /* over: one past the field's largest */
    } fields[] = {
        {"seq", "0..2^64-1", "18446744073709551616"},
        {"id", "0..2^44-1", "17592186044416"},
        {"size", "0..2^60", "1152921504606846977"},
        {"stream", "0..255", "256"},
        {"domain", "0..65534", "65535"},
    };
    static const char *const nums[] = {HOSTILE_DECIMALS};
    for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++)
        for (size_t i = 0; i <= sizeof nums / sizeof nums[0]; i++) {
            const char *v = i < sizeof nums / sizeof nums[0] ? nums[i] : fields[f].over;
            const char *line[5] = {"0", "1", "8", "0", "0"};
            line[f] = v;
            char text[512], want[256];
            snprintf(text, sizeof text, "seq,op,id,size,stream,domain,name\n%s,alloc,%s,%s,%s,%s\n", line[0], line[1],
                     line[2], line[3], line[4]);
            size_t n = strlen(v);
            snprintf(want, sizeof want, "line 2: bad number in %s: '%.*s%s' (plain decimal, %s)", fields[f].name,
                     (int)(n > 32 ? 32 : n), v, n > 32 ? "..." : "", fields[f].range);
            ccb_trace t;
            char err[256] = "";
            cr_assert_eq(rd(&t, text, strlen(text), err, sizeof err), -1, "accepted: %s", text);
            cr_expect_str_eq(err, want, "%s", text);
            ccb_trace_free(&t);
        }
}

/* A field quoted in a message is cut between characters: at most 32 bytes
 * of it, backed up to the start of a UTF-8 character that the cut would
 * split (the message ended in the character's first bytes, which the
 * escaper shows as \xNN). The op is quoted without "...", a number with. */
Test(fields, a_quoted_field_is_cut_between_characters) {
    static const char *const chars[] = {"\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80"};
    for (size_t c = 0; c < sizeof chars / sizeof chars[0]; c++) {
        size_t before = 33 - strlen(chars[c]); /* the character's last byte is byte 33 */
        char op[40], seq[40], text[256], want[256], err[256] = "";
        memset(op, 'a', before);
        op[before] = '\0';
        memset(seq, '1', before);
        seq[before] = '\0';
        ccb_trace t;
        snprintf(text, sizeof text, "seq,op,id,size,stream,domain,name\n0,%s%szz,1,8,0,0\n", op, chars[c]);
        snprintf(want, sizeof want,
                 "line 2: op '%s' is not one of alloc, free, mark, empty_cache, trim, domain, domain_release, "
                 "domain_reserve",
                 op);
        cr_assert_eq(rd(&t, text, strlen(text), err, sizeof err), -1, "accepted: %s", text);
        cr_expect_str_eq(err, want);
        ccb_trace_free(&t);
        snprintf(text, sizeof text, "seq,op,id,size,stream,domain,name\n%s%s2,alloc,1,8,0,0\n", seq, chars[c]);
        snprintf(want, sizeof want, "line 2: bad number in seq: '%s...' (plain decimal, 0..2^64-1)", seq);
        cr_assert_eq(rd(&t, text, strlen(text), err, sizeof err), -1, "accepted: %s", text);
        cr_expect_str_eq(err, want);
        ccb_trace_free(&t);
    }
}

Test(fields, leading_zeros_are_plain_decimal) {
    ccb_trace t;
    good2("000,alloc,0001,0000008,000\n1,free,1,8,0\n", &t);
    cr_assert_eq(t.n, 2);
    cr_assert_eq(t.ev[0].size, 8);
    cr_assert_eq(t.ev[1].slot, 0, "id 0001 and id 1 are the same id");
    cr_assert_eq(t.final_live, 0);
    ccb_trace_free(&t);
}

Test(fields, numbers_at_and_over_their_bounds) {
    ccb_trace t;
    /* seq: any uint64 (unused), never more */
    good2("18446744073709551615,alloc,1,8,0\n", &t);
    ccb_trace_free(&t);
    bad2("18446744073709551616,alloc,1,8,0\n", "line 2: bad number");
    bad2("99999999999999999999999999999,alloc,1,8,0\n", "line 2: bad number");
    bad2("0,alloc,1,18446744073709551616,0\n", "line 2: bad number");
    /* id < 2^44 */
    good2("0,alloc,17592186044415,8,0\n1,free,17592186044415,8,0\n", &t);
    cr_assert_eq(t.final_live, 0);
    ccb_trace_free(&t);
    bad2("0,alloc,17592186044416,8,0\n", "line 2: bad number");
    bad2("0,alloc,18446744073709551615,8,0\n", "line 2: bad number");
    /* stream <= 255 */
    good2("0,alloc,1,8,255\n1,free,1,8,255\n", &t);
    cr_assert_eq(t.ev[0].stream, 255);
    cr_assert_eq(t.streams, 256);
    ccb_trace_free(&t);
    bad2("0,alloc,1,8,256\n", "line 2: bad number");
    /* size <= 2^60, for alloc, free and trim */
    good2("0,alloc,1,1152921504606846976,0\n1,trim,0,1152921504606846976,0\n", &t);
    cr_assert_eq(t.ev[0].size, P60);
    cr_assert_eq(t.ev[1].size, P60);
    cr_assert_eq(t.max_size, P60);
    cr_assert_eq(t.peak_requested, P60);
    cr_assert_eq(t.ideal_peak, P60);
    ccb_trace_free(&t);
    bad2("0,alloc,1,1152921504606846977,0\n", "line 2: bad number");
    bad2("0,trim,0,1152921504606846977,0\n", "line 2: bad number");
    /* size 0 */
    good2("0,alloc,1,0,0\n1,free,1,0,0\n", &t);
    cr_assert_eq(t.peak_requested, 0);
    cr_assert_eq(t.peak_live, 1);
    ccb_trace_free(&t);
}

/* ======================================================================== */
/* 2. Lines: end of line, NUL, length, headers, sections, comments          */
/* ======================================================================== */

Test(lines, crlf_is_the_same_trace_as_lf) {
    ccb_trace a, b, c;
    good(simple_v2, &a);
    char crlf[512] = "", *o = crlf;
    for (const char *c2 = simple_v2; *c2; c2++) {
        if (*c2 == '\n')
            *o++ = '\r';
        *o++ = *c2;
    }
    *o = '\0';
    good(crlf, &b);
    cr_assert_eq(a.n, b.n);
    cr_assert_eq(memcmp(a.ev, b.ev, a.n * sizeof *a.ev), 0);
    cr_assert_str_eq(b.marks[0], "phase", "the CR is not part of the mark's name");
    /* several CRs before the LF, no final newline */
    good("seq,op,id,size,stream\r\r\n0,alloc,1,8,0\r\r\r\n1,free,1,8,0", &c);
    cr_assert_eq(c.n, 2);
    ccb_trace_free(&a);
    ccb_trace_free(&b);
    ccb_trace_free(&c);
    /* a CR inside a line is not an end of line */
    bad("seq,op,id,size,stream\n0,alloc,1,8\r9,0\n", "line 2: bad number");
    bad("seq,op,id,size,stream\n0,alloc,1,8,0\r1,free,1,8,0\n", "line 2: expected 5 fields");
    /* old-Mac CR-only files are one line: not a trace */
    bad("seq,op,id,size,stream\r0,alloc,1,8,0\r", "line 1: an event before the column header");
    /* LF CR: the CR starts the next line */
    bad("seq,op,id,size,stream\n\r0,alloc,1,8,0\n", "line 2: bad number");
}

/* A NUL byte in a line is an error naming the line. (The reader's first
 * NUL check tested strlen against itself and could never fire: a NUL
 * silently cut the line and the rest of it vanished.) */
Test(lines, defect_nul_byte_after_a_valid_record_is_rejected) {
    static const char in[] = "seq,op,id,size,stream\n0,alloc,1,8,0\0GARBAGE,,,\n";
    bad_n(in, sizeof in - 1, "line 2: NUL byte");
}

Test(lines, defect_nul_byte_drops_the_rest_of_a_line) {
    /* the free is read, the text after the NUL is dropped */
    static const char in[] = "seq,op,id,size,stream\n0,alloc,1,8,0\n1,free,1,8,0\0 and then anything\n";
    bad_n(in, sizeof in - 1, "line 3: NUL byte");
}

Test(lines, defect_nul_line_is_not_an_empty_line) {
    static const char in[] = "seq,op,id,size,stream\n\0\0\0\n0,alloc,1,8,0\n";
    bad_n(in, sizeof in - 1, "line 2: NUL byte");
}

Test(lines, defect_nul_cannot_smuggle_an_event_past_the_line_limit) {
    /* line 2 = a record, a NUL, padding to the 1023-byte read chunk, then a
     * second record: the reader returns TWO allocs from ONE line. */
    char in[4096];
    size_t n = (size_t)sprintf(in, "seq,op,id,size,stream\n");
    size_t start = n;
    n += (size_t)sprintf(in + n, "0,alloc,1,8,0");
    in[n++] = '\0';
    while (n - start < 1023)
        in[n++] = 'x';
    n += (size_t)sprintf(in + n, "1,alloc,2,8,0\n");
    ccb_trace t;
    char err[256] = "";
    int rc = rd(&t, in, n, err, sizeof err);
    cr_assert_eq(rc, -1, "a line holding a NUL was accepted: %zu events, %zu slots", t.n, t.slots);
    cr_assert(strstr(err, "line 2: NUL byte"), "%s", err);
    ccb_trace_free(&t);
}

Test(lines, line_length_limit) {
    char *in = malloc(8192);
    size_t n;
    ccb_trace t;
    /* 1022 characters + LF: accepted */
    n = (size_t)sprintf(in, "seq,op,id,size,stream\n");
    n += make_line(in + n, 1022, ",alloc,1,8,0", "\n");
    good_n(in, n, &t);
    cr_assert_eq(t.n, 1);
    cr_assert_eq(t.ev[0].size, 8);
    ccb_trace_free(&t);
    /* 1022 characters, no end of line at the end of file: accepted */
    n = (size_t)sprintf(in, "seq,op,id,size,stream\n");
    n += make_line(in + n, 1022, ",alloc,1,8,0", "");
    good_n(in, n, &t);
    cr_assert_eq(t.n, 1);
    ccb_trace_free(&t);
    /* 4095 + LF is the longest line (CCB_LINE_MAX = 4096 bytes with its end) */
    n = (size_t)sprintf(in, "seq,op,id,size,stream\n");
    n += make_line(in + n, 4095, ",alloc,1,8,0", "\n");
    good_n(in, n, &t);
    cr_assert_eq(t.n, 1);
    ccb_trace_free(&t);
    /* 4096 + LF, 5000 + LF, 8000 + LF: too long, named */
    static const size_t longs[] = {4096, 5000, 8000};
    for (int i = 0; i < 3; i++) {
        n = (size_t)sprintf(in, "seq,op,id,size,stream\n");
        n += make_line(in + n, longs[i], ",alloc,1,8,0", "\n");
        n += (size_t)sprintf(in + n, "1,free,1,8,0\n");
        bad_n(in, n, "line 2: too long");
    }
    /* a comment line of 1022 is kept whole (it is under the line limit) */
    n = (size_t)sprintf(in, "#");
    memset(in + n, 'c', 1021);
    n += 1021;
    n += (size_t)sprintf(in + n, "\nseq,op,id,size,stream\n");
    good_n(in, n, &t);
    cr_assert_eq(t.n, 0);
    ccb_trace_free(&t);
    /* a 5000-byte comment is too long too */
    n = 0;
    in[n++] = '#';
    memset(in + n, 'c', 4999);
    n += 4999;
    in[n++] = '\n';
    bad_n(in, n, "line 1: too long");
    free(in);
}

/* A CRLF file hits the limit one character earlier than the same LF file. */
Test(lines, defect_crlf_line_of_the_maximum_length_is_accepted) {
    char in[2048];
    size_t n = (size_t)sprintf(in, "seq,op,id,size,stream\r\n");
    n += make_line(in + n, 1022, ",alloc,1,8,0", "\r\n");
    ccb_trace t;
    char err[256] = "";
    int rc = rd(&t, in, n, err, sizeof err);
    cr_assert_eq(rc, 0, "the same 1022-character line is accepted with LF, refused with CRLF: %s", err);
    ccb_trace_free(&t);
}

Test(lines, events_before_any_header) {
    bad("0,alloc,1,8,0\nseq,op,id,size,stream\n", "line 1: an event before the column header");
    bad("# a\n\n# b\n0,alloc,1,8,0\n", "line 4: an event before the column header");
    /* header look-alikes are not headers */
    bad("seq,op,id,size,stream \n0,alloc,1,8,0\n", "line 1: an event before the column header");
    bad("SEQ,OP,ID,SIZE,STREAM\n", "line 1: an event before the column header");
    bad("seq,op,id,size,stream,name,x\n", "line 1: an event before the column header");
    bad(" seq,op,id,size,stream\n", "line 1: an event before the column header");
    bad("seq,op,id,size\n", "line 1: an event before the column header");
    bad("\xef\xbb\xbfseq,op,id,size,stream\n", "line 1: an event before the column header"); /* a BOM */
}

Test(lines, a_second_header_opens_a_section_with_its_own_ids) {
    ccb_trace t;
    /* the same id in two sections: two slots */
    good("seq,op,id,size,stream,name\n0,alloc,1,100,0\nseq,op,id,size,stream,name\n0,alloc,1,200,0\n1,free,1,200,0\n",
         &t);
    cr_assert_eq(t.slots, 2);
    cr_assert_eq(t.ev[2].slot, 1);
    cr_assert_eq(t.final_live, 1);
    cr_assert_eq(t.final_requested, 100);
    ccb_trace_free(&t);
    /* a free cannot reach across a header */
    bad("seq,op,id,size,stream\n0,alloc,1,8,0\nseq,op,id,size,stream\n0,free,1,8,0\n",
        "line 4: free of id 1 which is not live");
    /* a header twice in a row opens an empty section: harmless */
    good("seq,op,id,size,stream\nseq,op,id,size,stream\nseq,op,id,size,stream\n0,alloc,7,1,0\n", &t);
    cr_assert_eq(t.n, 1);
    ccb_trace_free(&t);
}

Test(lines, v1_then_v2_sections_with_the_same_ids) {
    ccb_trace t;
    good("# ccalloc trace v1\n"
         "seq,op,id,size,stream\n"
         "0,alloc,1,1000,0\n"
         "1,alloc,2,10,1\n"
         "2,free,2,10,1\n"
         "# ccalloc trace v2\n"
         "seq,op,id,size,stream,name\n"
         "0,alloc,1,2000,0\n"
         "1,mark,0,0,0,after\n"
         "2,alloc,2,30,3\n"
         "3,free,1,2000,0\n"
         "4,empty_cache,0,0,0\n",
         &t);
    cr_assert_eq(t.slots, 4);
    cr_assert_eq(t.n, 8);
    cr_assert_eq(t.allocs, 4);
    cr_assert_eq(t.frees, 2);
    cr_assert_eq(t.releases, 1);
    cr_assert_eq(t.nmarks, 1);
    cr_assert_eq(t.final_live, 2);
    cr_assert_eq(t.final_requested, 1030);
    cr_assert_eq(t.peak_requested, 3030);
    cr_assert_eq(t.streams, 4);
    cr_assert_null(t.comments, "format lines are not provenance");
    ccb_trace_free(&t);
    /* v2 ops in a v1 section (after a v2 one) */
    bad("seq,op,id,size,stream,name\n0,mark,0,0,0,a\nseq,op,id,size,stream\n0,mark,0,0,0,b\n",
        "line 4: op 'mark' is not one of alloc, free (a v1 section)");
    bad("seq,op,id,size,stream\n0,empty_cache,0,0,0\n",
        "line 2: op 'empty_cache' is not one of alloc, free (a v1 section)");
    bad("seq,op,id,size,stream\n0,trim,0,0,0\n", "line 2: op 'trim' is not one of alloc, free (a v1 section)");
}

Test(lines, comments_anywhere_are_kept_and_counted_as_lines) {
    ccb_trace t;
    good("# one\nseq,op,id,size,stream\n0,alloc,1,8,0\n#two\n\n#    three\n# ccalloc trace v2\n1,free,1,8,0\n#\n", &t);
    cr_assert_eq(t.n, 2);
    cr_assert_str_eq(t.comments, "one\ntwo\nthree\n\n");
    ccb_trace_free(&t);
    /* line numbers count comments and blank lines */
    bad("# a\n\nseq,op,id,size,stream\n# b\n\n0,alloc,1,8,0\n1,free,1,9,0\n", "line 7: free of id 1 with size 9");
}

/* ======================================================================== */
/* 3. Ops                                                                   */
/* ======================================================================== */

Test(ops, op_names_are_exact) {
    bad2("0,Alloc,1,8,0\n", "line 2: op 'Alloc' is not one of alloc, free, mark, empty_cache, trim");
    bad2("0,ALLOC,1,8,0\n", "line 2: op 'ALLOC'");
    bad2("0,alloc ,1,8,0\n", "line 2: op 'alloc '");
    bad2("0, free,1,8,0\n", "line 2: op ' free'");
    bad2("0,empty-cache,0,0,0\n", "line 2: op 'empty-cache'");
    bad2("0,Mark,0,0,0,x\n", "line 2: expected 5 fields"); /* only "mark" has 6 */
    /* a long op name is cut in the message, never overflows it */
    char body[600];
    snprintf(body, sizeof body, "0,%0400d,1,8,0\n", 7);
    ccb_trace t;
    char text[700], err[64] = "";
    snprintf(text, sizeof text, "seq,op,id,size,stream\n%s", body);
    cr_assert_eq(rd(&t, text, strlen(text), err, sizeof err), -1);
    cr_assert(strstr(err, "line 2: op '0000") == err, "%s", err);
    cr_assert_eq(strlen(err), sizeof err - 1, "truncated to the buffer");
    ccb_trace_free(&t);
}

Test(ops, release_events_and_marks_take_zero_fields) {
    bad2("0,mark,1,0,0,x\n", "line 2: mark takes id 0, stream 0 and size 0");
    bad2("0,mark,0,1,0,x\n", "line 2: mark takes id 0, stream 0 and size 0");
    bad2("0,mark,0,0,1,x\n", "line 2: mark takes id 0, stream 0 and size 0");
    bad2("0,empty_cache,0,5,0\n", "line 2: empty_cache takes id 0, stream 0 and size 0");
    bad2("0,empty_cache,3,0,0\n", "line 2: empty_cache takes id 0, stream 0 and size 0");
    bad2("0,trim,1,0,0\n", "line 2: trim takes id 0, stream 0");
    bad2("0,trim,0,0,2\n", "line 2: trim takes id 0, stream 0");
    ccb_trace t;
    good2("0,trim,0,0,0\n1,trim,0,123,0\n", &t);
    cr_assert_eq(t.releases, 2);
    cr_assert_eq(t.ev[0].op, CCB_TRIM);
    cr_assert_eq(t.ev[1].size, 123);
    ccb_trace_free(&t);
}

Test(ops, pairing_errors_name_the_line) {
    bad2("0,alloc,1,8,0\n1,free,1,8,1\n", "line 3: free of id 1 with size 8 on stream 1, allocated with 8 on stream 0");
    bad2("0,alloc,1,8,0\n1,free,1,8,0\n2,free,1,8,0\n", "line 4: free of id 1 which is not live");
    bad2("0,alloc,1,8,0\n1,alloc,1,8,0\n", "line 3: alloc of id 1 which is already live");
    bad2("0,free,0,0,0\n", "line 2: free of id 0 which is not live");
    ccb_trace t;
    /* a freed id may come back (tolerated): a new slot */
    good2("0,alloc,1,8,0\n1,free,1,8,0\n2,alloc,1,16,0\n3,free,1,16,0\n", &t);
    cr_assert_eq(t.slots, 2);
    cr_assert_eq(t.ev[3].slot, 1);
    ccb_trace_free(&t);
}

/* ======================================================================== */
/* 4. Marks                                                                 */
/* ======================================================================== */

static void bad_mark(const char *name) {
    char body[256];
    snprintf(body, sizeof body, "0,mark,0,0,0,%s\n", name);
    bad2(body, "line 2: mark name must be 1..63 printable ASCII characters, no comma or quote");
    cr_assert_eq(ccb_mark_name_ok(name), 0, "'%s'", name);
    ccb_trace t;
    ccb_trace_init(&t, "m");
    cr_assert_eq(ccb_trace_mark(&t, name), -1);
    cr_assert_eq(t.n, 0, "a refused mark appends nothing");
    cr_assert_eq(t.nmarks, 0);
    ccb_trace_free(&t);
}

Test(marks, name_length_bounds) {
    char n63[64], n64[65];
    memset(n63, 'a', 63);
    n63[63] = '\0';
    memset(n64, 'b', 64);
    n64[64] = '\0';
    ccb_trace t;
    char body[128];
    snprintf(body, sizeof body, "0,mark,0,0,0,%s\n", n63);
    good2(body, &t);
    cr_assert_str_eq(t.marks[0], n63);
    ccb_trace_free(&t);
    bad_mark(n64);
    cr_assert_eq(ccb_mark_name_ok(n63), 1);
}

Test(marks, forbidden_characters) {
    static const char *const names[] = {"a\x01", "tab\there", "\x1b[31mred", "del\x7f", "caf\xc3\xa9", "\xff",
                                        "\x80x",  "q\"uote",   "\"",          "a\x1f"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        bad_mark(names[i]);
    /* a comma splits the field */
    bad2("0,mark,0,0,0,a,b\n", "line 2: expected 6 fields");
    cr_assert_eq(ccb_mark_name_ok("a,b"), 0);
    cr_assert_eq(ccb_mark_name_ok(""), 0);
    ccb_trace t;
    ccb_trace_init(&t, "m");
    cr_assert_eq(ccb_trace_mark(&t, NULL), -1);
    ccb_trace_free(&t);
}

Test(marks, every_allowed_character_round_trips) {
    /* all of 0x20..0x7e but ',' and '"', in names of at most 63 characters */
    char all[128];
    size_t k = 0;
    for (int c = 0x20; c <= 0x7e; c++)
        if (c != ',' && c != '"')
            all[k++] = (char)c;
    all[k] = '\0';
    cr_assert_eq(k, 93);
    ccb_trace a;
    ccb_trace_init(&a, "marks");
    for (size_t off = 0; off < k; off += 40) {
        char name[64];
        snprintf(name, sizeof name, "%.40s", all + off);
        cr_assert_eq(ccb_trace_mark(&a, name), 0, "'%s'", name);
    }
    cr_assert_eq(ccb_trace_mark(&a, " "), 0, "a single space is printable");
    cr_assert_eq(ccb_trace_mark(&a, "#not a comment"), 0);
    cr_assert_eq(ccb_trace_analyze(&a, NULL, 0), 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_eq(ccb_trace_write(&a, f), 0);
    fclose(f);
    ccb_trace b;
    good_n(buf, len, &b);
    cr_assert_eq(b.nmarks, a.nmarks);
    for (size_t i = 0; i < a.nmarks; i++)
        cr_assert_str_eq(b.marks[i], a.marks[i], "mark %zu", i);
    free(buf);
    ccb_trace_free(&a);
    ccb_trace_free(&b);
}

/* A mark line with 8+ fields is told it needs 5 fields (split_fields gives
 * up at 7 and is_mark is then computed on nf == -1). */
Test(marks, defect_mark_with_many_fields_names_six_fields) {
    bad2("0,mark,0,0,0,a,b,c\n", "line 2: expected 6 fields");
}

/* ======================================================================== */
/* 5. Files: gzip, empty, directories                                       */
/* ======================================================================== */

static void load_bad(const char *path, const char *needle) {
    ccb_trace t;
    ccb_trace_init(&t, "before");
    char err[512] = "";
    cr_assert_eq(ccb_trace_load(&t, path, err, sizeof err), -1, "'%s' loaded", path);
    cr_assert(strstr(err, needle) != NULL, "error '%s' should contain '%s'", err, needle);
    cr_assert_null(t.ev);
    cr_assert_eq(t.n, 0);
    ccb_trace_free(&t);
}

Test(files, gzip_round_trip_and_name) {
    const char *p = tmp_path("model.csv.gz");
    write_gz(p, simple_v2);
    ccb_trace t;
    char err[256] = "";
    cr_assert_eq(ccb_trace_load(&t, p, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(t.name, "model");
    cr_assert_eq(t.n, 5);
    cr_assert_eq(t.releases, 2);
    ccb_trace_free(&t);
}

/* A trace is named after its file less ".csv" or ".csv.gz"; a file whose
 * name is the suffix alone keeps its whole name (never an empty one). */
Test(files, a_name_that_is_only_the_suffix_is_kept) {
    static const char *const names[][2] = {
        {".csv", ".csv"}, {".csv.gz", ".csv.gz"}, {"a.csv", "a"}, {"a.csv.gz", "a"}, {"x.gz", "x.gz"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *p = tmp_path(names[i][0]);
        write_file(p, simple_v2, sizeof simple_v2 - 1);
        ccb_trace t;
        char err[256] = "";
        cr_assert_eq(ccb_trace_load(&t, p, err, sizeof err), 0, "%s: %s", names[i][0], err);
        cr_assert_str_eq(t.name, names[i][1], "file '%s'", names[i][0]);
        ccb_trace_free(&t);
        unlink(p);
    }
}

Test(files, gzip_truncated_or_corrupt_is_an_error) {
    /* a body long enough to have real deflate blocks */
    char *text = malloc(200000);
    size_t n = (size_t)sprintf(text, "seq,op,id,size,stream\n");
    for (int i = 0; i < 5000; i++)
        n += (size_t)sprintf(text + n, "%d,alloc,%d,%d,0\n", i, i + 1, (i * 7919) % 100000);
    size_t glen;
    unsigned char *g = gz_member(text, n, &glen);
    const char *p = tmp_path("t.csv.gz");
    /* cut anywhere: half, all but the 8-byte trailer, all but 1 byte, 11 bytes (header only) */
    size_t cuts[] = {glen / 2, glen - 8, glen - 1, 11};
    for (int i = 0; i < 4; i++) {
        write_file(p, g, cuts[i]);
        load_bad(p, "t.csv.gz");
    }
    /* corrupt CRC32 (trailer bytes 0..3) */
    unsigned char *c = malloc(glen);
    memcpy(c, g, glen);
    c[glen - 8] ^= 0x55;
    write_file(p, c, glen);
    load_bad(p, "t.csv.gz");
    /* corrupt ISIZE (trailer bytes 4..7) */
    memcpy(c, g, glen);
    c[glen - 1] ^= 0x01;
    write_file(p, c, glen);
    load_bad(p, "t.csv.gz");
    /* corrupt deflate data in the middle */
    memcpy(c, g, glen);
    for (size_t k = glen / 3; k < glen / 3 + 16; k++)
        c[k] ^= 0xa5;
    write_file(p, c, glen);
    load_bad(p, "t.csv.gz");
    /* gzip magic, then garbage */
    static const unsigned char magic[] = {0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 3, 'n', 'o', 't', ' ', 'd', 'e', 'f'};
    write_file(p, magic, sizeof magic);
    load_bad(p, "t.csv.gz");
    free(c);
    free(g);
    free(text);
}

Test(files, concatenated_gzip_members_are_one_file) {
    size_t l1, l2, l3;
    unsigned char *m1 = gz_member("seq,op,id,size,stream\n0,alloc,1,8,0\n", 36, &l1);
    unsigned char *m2 = gz_member("", 0, &l2); /* an empty member in between */
    unsigned char *m3 = gz_member("1,free,1,8,0\n", 13, &l3);
    unsigned char all[1024];
    memcpy(all, m1, l1);
    memcpy(all + l1, m2, l2);
    memcpy(all + l1 + l2, m3, l3);
    const char *p = tmp_path("cat.csv.gz");
    write_file(p, all, l1 + l2 + l3);
    ccb_trace t;
    char err[256] = "";
    cr_assert_eq(ccb_trace_load(&t, p, err, sizeof err), 0, "%s", err);
    cr_assert_eq(t.n, 2, "both members read");
    cr_assert_eq(t.final_live, 0);
    ccb_trace_free(&t);
    /* an empty gzip file is an empty trace, as an empty plain file is */
    write_file(p, m2, l2);
    cr_assert_eq(ccb_trace_load(&t, p, err, sizeof err), 0, "%s", err);
    cr_assert_eq(t.n, 0);
    ccb_trace_free(&t);
    free(m1);
    free(m2);
    free(m3);
}

/* Bytes after the last complete gzip member that are not another member:
 * a damaged or badly joined file, whose tail would otherwise be lost
 * without a word (zlib's gzread skips them). Every kind is an error naming
 * the file and how many bytes follow: text, zero padding, one byte, the
 * start of a member cut short, a member header followed by junk. */
Test(files, bytes_after_the_last_gzip_member_are_an_error) {
    const char *body = "seq,op,id,size,stream\n0,alloc,1,8,0\n1,free,1,8,0\n";
    size_t l1;
    unsigned char *m1 = gz_member(body, strlen(body), &l1);
    struct {
        const char *tail;
        size_t n;
        const char *needle;
    } tails[] = {
        {"garbage after the stream\n", 25, "25 bytes after the last gzip member"},
        {"\0\0\0\0\0\0\0\0", 8, "8 bytes after the last gzip member"},
        {"x", 1, "1 bytes after the last gzip member"},
        {"\x1f", 1, "1 bytes after the last gzip member"},
        {"\x1fx", 2, "2 bytes after the last gzip member"}, /* gzip's first magic byte alone */
        {"\x1f\x8b", 2, "truncated or corrupt gzip stream"},
        {"\x1f\x8b\x08\0\0\0\0\0\0\x03junkjunk", 18, "t.csv.gz"},
    };
    const char *p = tmp_path("t.csv.gz");
    unsigned char buf[1024];
    for (size_t i = 0; i < sizeof tails / sizeof tails[0]; i++) {
        memcpy(buf, m1, l1);
        memcpy(buf + l1, tails[i].tail, tails[i].n);
        write_file(p, buf, l1 + tails[i].n);
        load_bad(p, tails[i].needle);
    }
    /* the member alone, and twice, still load */
    ccb_trace t;
    char err[256] = "";
    write_file(p, m1, l1);
    cr_assert_eq(ccb_trace_load(&t, p, err, sizeof err), 0, "%s", err);
    cr_assert_eq(t.n, 2);
    ccb_trace_free(&t);
    memcpy(buf, m1, l1);
    memcpy(buf + l1, m1, l1);
    write_file(p, buf, 2 * l1);
    cr_assert_eq(ccb_trace_load(&t, p, err, sizeof err), 0, "%s", err);
    cr_assert_eq(t.n, 4, "two sections");
    ccb_trace_free(&t);
    /* a file is gzip by both magic bytes: one that starts 1f 78 is text,
     * and its first line is not a column header */
    static const char not_gzip[] = "\x1fx\nseq,op,id,size,stream\n";
    write_file(p, not_gzip, sizeof not_gzip - 1);
    load_bad(p, "line 1: an event before the column header");
    free(m1);
}

Test(files, empty_comment_only_dev_null_directory_missing) {
    ccb_trace t;
    char err[256] = "";
    const char *p = tmp_path("empty.csv");
    write_file(p, "", 0);
    cr_assert_eq(ccb_trace_load(&t, p, err, sizeof err), 0, "%s", err);
    cr_assert_eq(t.n, 0);
    cr_assert_str_eq(t.name, "empty");
    ccb_trace_free(&t);
    cr_assert_eq(ccb_trace_load(&t, "/dev/null", err, sizeof err), 0, "%s", err);
    cr_assert_eq(t.n, 0);
    cr_assert_str_eq(t.name, "null");
    ccb_trace_free(&t);
    p = tmp_path("comments.csv");
    write_file(p, "# a\n#b\n\n", 8);
    cr_assert_eq(ccb_trace_load(&t, p, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(t.comments, "a\nb\n");
    ccb_trace_free(&t);
    /* a directory */
    tmp_path("x");
    load_bad(tmpdir, tmpdir);
    /* a missing file */
    load_bad("/nonexistent/dir/trace.csv", "cannot open '/nonexistent/dir/trace.csv'");
}

/* ccb_trace_read empties t on every error; ccb_trace_load leaves t as the
 * caller had it when the file cannot be opened or decompressed (garbage if
 * the caller relied on the load to initialize it). */
Test(files, defect_load_failure_leaves_t_initialized) {
    ccb_trace t;
    memset(&t, 0xa5, sizeof t);
    char err[256] = "";
    cr_assert_eq(ccb_trace_load(&t, "/nonexistent/x.csv", err, sizeof err), -1);
    cr_assert_null(t.ev, "t.ev left as %p: ccb_trace_free(&t) would free garbage", (void *)t.ev);
    cr_assert_eq(t.n, 0);
}

/* The name is cut at the first ".csv" anywhere in the base name. */
Test(files, defect_name_strips_only_a_csv_suffix) {
    const char *p = tmp_path("run.csv_backup");
    write_file(p, "", 0);
    ccb_trace t;
    char err[256] = "";
    cr_assert_eq(ccb_trace_load(&t, p, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(t.name, "run.csv_backup");
    ccb_trace_free(&t);
}

/* A stream of zeros that expands to exactly CCB_TRACE_MAX_BYTES (1024
 * members of 1 MiB): "at most 1 GiB once decompressed" allows it, the loader
 * refuses it as "more than" 1 GiB. Memory stays bounded by the cap. */
static void bomb(const char *name, size_t extra, int *rc, char *err, size_t errlen, long *maxrss_mb, double *secs) {
    void *zeros = calloc(1, 1 << 20);
    size_t ml;
    unsigned char *m = gz_member(zeros, 1 << 20, &ml);
    const char *p = tmp_path(name);
    FILE *f = fopen(p, "wb");
    cr_assert_not_null(f);
    for (int i = 0; i < 1024; i++)
        fwrite(m, 1, ml, f);
    if (extra) {
        size_t el;
        unsigned char *e = gz_member(zeros, extra, &el);
        fwrite(e, 1, el, f);
        free(e);
    }
    fclose(f);
    free(m);
    free(zeros);
    struct stat st;
    stat(p, &st);
    cr_assert_lt(st.st_size, 2 << 20, "the file itself is small (%lld bytes)", (long long)st.st_size);
    ccb_trace t;
    double t0 = now_s();
    *rc = ccb_trace_load(&t, p, err, errlen);
    *secs = now_s() - t0;
    if (*rc == 0)
        ccb_trace_free(&t);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    *maxrss_mb = ru.ru_maxrss / 1024;
    unlink(p);
}

Test(files, gzip_bomb_over_the_cap_is_refused_in_bounded_memory, .timeout = 60) {
    int rc;
    char err[256] = "";
    long rss;
    double secs;
    bomb("bomb1.gz", 1, &rc, err, sizeof err, &rss, &secs);
    cr_log_info("1 GiB + 1 byte: rc %d, '%s', max RSS %ld MiB, %.1f s", rc, err, rss, secs);
    cr_assert_eq(rc, -1);
    /* one endless line of zeros: refused as over the cap (the stream is read
     * on to tell a cut stream from a bad line), in bounded memory */
    cr_assert(strstr(err, "more than 1073741824 bytes once decompressed"), "%s", err);
    cr_assert_lt(rss, 256, "max RSS %ld MiB: the file is streamed, never held", rss);
}

Test(files, defect_gzip_of_exactly_the_cap_is_not_over_the_cap, .timeout = 60) {
    int rc;
    char err[256] = "";
    long rss;
    double secs;
    bomb("bomb0.gz", 0, &rc, err, sizeof err, &rss, &secs);
    cr_log_info("exactly 1 GiB: rc %d, '%s', max RSS %ld MiB, %.1f s", rc, err, rss, secs);
    cr_assert_lt(rss, 2048, "max RSS %ld MiB", rss);
    cr_assert(rc == 0 || strstr(err, "more than") == NULL, "a file of exactly 2^30 bytes refused with '%s'", err);
}

/* A plain file is not a stream that can be cut: the reader's own error
 * stands, and the cap is on its bytes (nothing is decompressed). A plain
 * trace over 1 GiB whose line 4 was too long was refused as "more than
 * 1073741824 bytes once decompressed" (the loader read on to the cap as it
 * does for gzip), and so was /dev/zero instead of its first line. The cap is
 * lowered to 4 MiB (ccb_trace_load_capped) so that the files are small. */
#define PLAIN_CAP ((size_t)4 << 20)

static void plain_over_cap(const char *name, const char *head, int fill, size_t size, const char *want) {
    const char *p = tmp_path(name);
    FILE *f = fopen(p, "wb");
    cr_assert_not_null(f);
    fputs(head, f);
    for (size_t n = strlen(head); n < size; n++)
        fputc(fill, f);
    fclose(f);
    ccb_trace t;
    char err[256] = "";
    cr_assert_eq(ccb_trace_load_capped(&t, p, PLAIN_CAP, err, sizeof err), -1, "%s", name);
    cr_assert(strstr(err, want), "%s: '%s', wanted '%s'", name, err, want);
    cr_assert_null(strstr(err, "decompressed"), "%s: a plain file is not decompressed: '%s'", name, err);
    cr_assert_null(t.ev);
    unlink(p);
}

Test(files, a_plain_file_over_the_cap_keeps_its_own_error) {
    const char *head = "seq,op,id,size,stream\n0,alloc,1,512,0\n1,free,1,512,0\n";
    plain_over_cap("long_line.csv", head, 'x', PLAIN_CAP + 4096, "line 4: too long");
    plain_over_cap("zeros.csv", "", 0, PLAIN_CAP + 4096, "line 1: ");
}

Test(files, a_plain_file_of_good_lines_over_the_cap_says_its_bytes) {
    const char *p = tmp_path("many.csv");
    FILE *f = fopen(p, "wb");
    cr_assert_not_null(f);
    size_t n = (size_t)fprintf(f, "seq,op,id,size,stream\n");
    for (size_t i = 0; n <= PLAIN_CAP; i += 2)
        n += (size_t)fprintf(f, "%zu,alloc,1,512,0\n%zu,free,1,512,0\n", i, i + 1);
    fclose(f);
    ccb_trace t;
    char err[256] = "";
    cr_assert_eq(ccb_trace_load_capped(&t, p, PLAIN_CAP, err, sizeof err), -1);
    cr_assert(strstr(err, "more than 4194304 bytes"), "%s", err);
    cr_assert_null(strstr(err, "decompressed"), "a plain file is not decompressed: '%s'", err);
    unlink(p);
}

/* The budget's own arithmetic (bench/budget.c), exactly: a block may take
 * the budget to its cap and no further, a block larger than the cap is
 * refused whatever is held, a give never takes held below 0, a growth is
 * doubling or the largest capacity the room allows (the old block still
 * held), the peak counts both, and a grown array is counted by the
 * difference of its capacities. */
Test(budget, take_give_and_grow_count_exactly) {
    ccb_budget b = {.cap = 100};
    cr_assert_eq(ccb_budget_take(&b, 60), 0);
    cr_assert_eq(ccb_budget_take(&b, 40), 0, "up to the cap exactly");
    cr_assert_eq(b.held, 100);
    cr_assert_eq(b.peak, 100);
    cr_assert_eq(b.over, 0);
    cr_assert_eq(ccb_budget_take(&b, 1), -1);
    cr_assert_eq(b.over, 1);
    cr_assert_eq(b.held, 100, "a refused block is not counted");
    ccb_budget_give(&b, 30);
    cr_assert_eq(b.held, 70);
    cr_assert_eq(b.peak, 100);
    ccb_budget_give(&b, 1000);
    cr_assert_eq(b.held, 0, "never below 0");
    ccb_budget fresh = {.cap = 100};
    cr_assert_eq(ccb_budget_take(&fresh, 101), -1, "larger than the cap, with nothing held");
    cr_assert_eq(fresh.held, 0);

    ccb_budget g = {.cap = 1000};
    cr_assert_eq(ccb_grow_to(&g, 0, 10, 1, 16), 16, "the first capacity");
    cr_assert_eq(g.peak, 160);
    g.held = 900; /* room for 10 elements of 10 bytes */
    cr_assert_eq(ccb_grow_to(&g, 4, 10, 5, 16), 8, "doubled: it fits");
    cr_assert_eq(ccb_grow_to(&g, 8, 10, 9, 16), 10, "not doubled: the largest that fits");
    cr_assert_eq(g.peak, 1000, "held and the new block");
    cr_assert_eq(g.over, 0);
    cr_assert_eq(ccb_grow_to(&g, 10, 10, 11, 16), 0, "no room for one more");
    cr_assert_eq(g.over, 1);

    ccb_budget a = {.cap = (size_t)1 << 20};
    size_t cap = 0;
    uint64_t *p = ccb_grow(&a, NULL, &cap, sizeof *p, 1, 16);
    cr_assert_not_null(p);
    cr_assert_eq(cap, 16);
    cr_assert_eq(a.held, 16 * sizeof *p);
    p = ccb_grow(&a, p, &cap, sizeof *p, 17, 16);
    cr_assert_not_null(p);
    cr_assert_eq(cap, 32);
    cr_assert_eq(a.held, 32 * sizeof *p, "the array's capacity, counted once");
    free(p);
}

/* The cap holds for memory too: loading holds at most the cap at any moment
 * (events, names, the reader's id table, the analysis and the ideal arena;
 * a growing array counted with its copy). A gzip trace of 1 GiB of short
 * alloc lines (under the cap on decompressed bytes) was held in 3.3 GB:
 * doubled arrays, the id table, the analysis. ccb_trace_load_capped is
 * ccb_trace_load with a lower cap, so that the test runs in seconds; the
 * trace is written as a stream, so that the process holds nothing before. */
#define MEM_CAP ((size_t)48 << 20)

static void gz_allocs(const char *path, size_t max_text, size_t max_allocs, size_t *text) {
    gzFile g = gzopen(path, "wb1");
    cr_assert_not_null(g);
    char buf[1 << 16];
    size_t n = (size_t)sprintf(buf, "seq,op,id,size,stream\n");
    *text = n;
    for (size_t i = 0; i < max_allocs; i++) {
        char line[64];
        int l = sprintf(line, "%zu,alloc,%zu,512,0\n", i, i + 1);
        if (*text + (size_t)l > max_text)
            break;
        if (n + (size_t)l > sizeof buf) {
            cr_assert_eq(gzwrite(g, buf, (unsigned)n), (int)n);
            n = 0;
        }
        memcpy(buf + n, line, (size_t)l);
        n += (size_t)l;
        *text += (size_t)l;
    }
    cr_assert_eq(gzwrite(g, buf, (unsigned)n), (int)n);
    cr_assert_eq(gzclose(g), Z_OK);
}

static long max_rss_mib(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024;
}

/* RSS is checked where it means what loading holds: not under ASan, whose
 * quarantine keeps freed blocks and whose shadow adds an eighth. */
static void assert_rss_within_cap(long before, const char *what) {
#if defined(__SANITIZE_ADDRESS__)
    (void)before;
    (void)what;
#else
    long after = max_rss_mib(), cap = (long)(MEM_CAP >> 20);
    cr_log_info("%s: max RSS %ld MiB before, %ld MiB after (cap %ld MiB)", what, before, after, cap);
    cr_assert_leq(after - before, cap + 8, "%s: loading took %ld MiB, the cap is %ld MiB", what, after - before, cap);
#endif
}

Test(files, a_trace_that_needs_more_memory_than_the_cap_is_refused_within_it, .timeout = 120) {
    const char *p = tmp_path("mem.csv.gz");
    size_t text;
    gz_allocs(p, MEM_CAP - 4096, SIZE_MAX, &text);
    cr_assert_lt(text, MEM_CAP, "under the cap on decompressed bytes");
    long before = max_rss_mib();
    ccb_trace t;
    char err[256] = "";
    int rc = ccb_trace_load_capped(&t, p, MEM_CAP, err, sizeof err);
    if (rc == 0)
        cr_log_warn("loaded %zu events from %zu bytes of text", t.n, text);
    assert_rss_within_cap(before, "refused");
    cr_assert_eq(rc, -1, "%zu bytes of short alloc lines need more than the cap to hold", text);
    cr_assert(strstr(err, "more than 50331648 bytes of host memory"), "%s", err);
    cr_assert(strstr(err, "line "), "the line where it went over: %s", err);
    cr_assert_null(t.ev);
    cr_assert_null(t.budget, "the budget does not outlive the load");
    unlink(p);
}

Test(files, a_trace_that_fits_the_cap_loads_within_it, .timeout = 120) {
    const char *p = tmp_path("fits.csv.gz");
    size_t text;
    gz_allocs(p, SIZE_MAX, 250000, &text);
    long before = max_rss_mib();
    ccb_trace t;
    char err[256] = "";
    cr_assert_eq(ccb_trace_load_capped(&t, p, MEM_CAP, err, sizeof err), 0, "%s", err);
    assert_rss_within_cap(before, "loaded");
    cr_assert_eq(t.n, 250000);
    cr_assert_eq(t.final_live, 250000);
    cr_assert_eq(t.peak_requested, 250000 * 512);
    cr_assert_null(t.budget, "the budget does not outlive the load");
    ccb_trace_free(&t);
    cr_assert_eq(ccb_trace_load(&t, p, err, sizeof err), 0, "the default cap: %s", err);
    ccb_trace_free(&t);
    unlink(p);
}

/* ======================================================================== */
/* 6. Error contract: messages name the line, nothing leaks                 */
/* ======================================================================== */

/* The header promises: a free of an id that is not live, ..., live bytes
 * that would overflow 64 bits: "Errors name the line". The overflow is found
 * by ccb_trace_analyze after reading and names an event index instead. */
Test(messages, defect_live_bytes_overflow_in_a_file_names_its_line) {
    char text[2048];
    size_t n = (size_t)sprintf(text, "# c\nseq,op,id,size,stream\n");
    for (int i = 0; i < 16; i++)
        n += (size_t)sprintf(text + n, "%d,alloc,%d,1152921504606846976,0\n", i, i + 1);
    /* the 16th alloc is on line 2 + 16 = 18 */
    bad(text, "line 18");
}

/* 2^19 sections: the error says "bad number (seq, id < 2^44, ...)" about a
 * line whose numbers are all fine. */
Test(messages, defect_too_many_sections_is_named_as_such) {
    static const char hdr[] = "seq,op,id,size,stream\n";
    size_t h = sizeof hdr - 1, count = ((size_t)1 << 19) + 1;
    char *buf = malloc(h * count + 64);
    for (size_t i = 0; i < count; i++)
        memcpy(buf + i * h, hdr, h);
    size_t n = h * count;
    n += (size_t)sprintf(buf + n, "0,alloc,1,8,0\n");
    ccb_trace t;
    char err[256] = "";
    cr_assert_eq(rd(&t, buf, n, err, sizeof err), -1);
    cr_assert(strstr(err, "line 524290"), "%s", err);
    cr_assert(strstr(err, "section"), "the message should say what is wrong: '%s'", err);
    free(buf);
}

Test(messages, err_may_be_null) {
    ccb_trace t;
    cr_assert_eq(rd(&t, "x\n", 2, NULL, 0), -1);
    assert_emptied(&t);
    cr_assert_eq(rd(&t, "x\n", 2, NULL, 100), -1);
    char one[1] = {'Z'};
    cr_assert_eq(rd(&t, "x\n", 2, one, 1), -1);
    cr_assert_eq(one[0], '\0');
}

/* Reading into a trace that already holds allocs: the reader indexes its own
 * slot_size[] array (capacity 0 at start) by t->slots. */
Test(messages, defect_read_appends_to_a_trace_that_has_allocs) {
    ccb_trace t;
    ccb_trace_init(&t, "mem");
    ccb_trace_alloc(&t, 100, 0);
    ccb_trace_alloc(&t, 200, 0);
    static const char in[] = "seq,op,id,size,stream\n0,alloc,1,8,0\n1,free,1,8,0\n";
    FILE *f = fmemopen((void *)in, sizeof in - 1, "r");
    char err[256] = "";
    int rc = ccb_trace_read(&t, f, err, sizeof err); /* NULL slot_size[2] = 8: SEGV */
    fclose(f);
    cr_assert_eq(rc, 0, "%s", err);
    cr_assert_eq(t.slots, 3);
    cr_assert_eq(t.n, 4);
    ccb_trace_free(&t);
}

Test(messages, error_paths_leak_nothing) {
    static const char *const inputs[] = {
        "x\n",
        "seq,op,id,size,stream\n0,alloc,1,8,0\n0,alloc,2,8,0\n0,free,3,8,0\n",
        "# keep\n# keep2\nseq,op,id,size,stream,name\n0,mark,0,0,0,a\n1,mark,0,0,0,b\n2,alloc,1,8,0\n3,mark,0,0,0,\x7f\n",
        "seq,op,id,size,stream,name\n0,alloc,1,1152921504606846976,0\n1,alloc,2,1152921504606846976,0\n"
        "2,alloc,3,1152921504606846976,0\n3,alloc,4,1152921504606846976,0\n4,alloc,5,1152921504606846976,0\n"
        "5,alloc,6,1152921504606846976,0\n6,alloc,7,1152921504606846976,0\n7,alloc,8,1152921504606846976,0\n"
        "8,alloc,9,1152921504606846976,0\n9,alloc,10,1152921504606846976,0\n10,alloc,11,1152921504606846976,0\n"
        "11,alloc,12,1152921504606846976,0\n12,alloc,13,1152921504606846976,0\n"
        "13,alloc,14,1152921504606846976,0\n14,alloc,15,1152921504606846976,0\n"
        "15,alloc,16,1152921504606846976,0\n",
    };
    for (int rep = 0; rep < 3; rep++)
        for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
            ccb_trace t;
            char err[256];
            cr_assert_eq(rd(&t, inputs[i], strlen(inputs[i]), err, sizeof err), -1, "input %zu", i);
            assert_emptied(&t);
        }
    /* many allocs (several growths of every array and the id map), then an error */
    char *big = malloc(4 << 20);
    size_t n = (size_t)sprintf(big, "# c\nseq,op,id,size,stream,name\n");
    for (int i = 0; i < 20000; i++)
        n += (size_t)sprintf(big + n, "%d,alloc,%d,%d,0\n%d,mark,0,0,0,m%d\n", i, i + 1, i, i, i);
    n += (size_t)sprintf(big + n, "0,free,1,9,0\n");
    ccb_trace t;
    char err[256];
    cr_assert_eq(rd(&t, big, n, err, sizeof err), -1);
    cr_assert(strstr(err, "line 40003: free of id 1 with size 9"), "%s", err);
    assert_emptied(&t);
    free(big);
    /* load errors after decompression */
    const char *p = tmp_path("bad.csv.gz");
    write_gz(p, "# c\nseq,op,id,size,stream\n0,alloc,1,8,0\n0,frob,1,8,0\n");
    ccb_trace u;
    cr_assert_eq(ccb_trace_load(&u, p, err, sizeof err), -1);
    cr_assert(strstr(err, "line 4: op 'frob'"), "%s", err);
    cr_assert_null(u.ev);
    cr_assert_null(u.comments);
    cr_assert_str_eq(u.name, "bad");
#ifdef HAVE_LSAN
    cr_assert_eq(__lsan_do_recoverable_leak_check(), 0, "LeakSanitizer found leaks (see stderr)");
#endif
}

/* ======================================================================== */
/* 7. Analysis of hand-built traces                                          */
/* ======================================================================== */

Test(analyze, releases_of_unknown_slots) {
    char err[256] = "";
    ccb_trace t;
    ccb_trace_init(&t, "a");
    ccb_trace_alloc(&t, 100, 0);
    ccb_trace_release(&t, 5);
    cr_assert_eq(ccb_trace_analyze(&t, err, sizeof err), -1);
    cr_assert(strstr(err, "event 1: slot 5 out of range"), "%s", err);
    ccb_trace_free(&t);

    ccb_trace_init(&t, "a");
    ccb_trace_alloc(&t, 100, 0);
    ccb_trace_release(&t, 0);
    ccb_trace_release(&t, 0);
    cr_assert_eq(ccb_trace_analyze(&t, err, sizeof err), -1);
    cr_assert(strstr(err, "event 2: free of slot 0 which is not live"), "%s", err);
    ccb_trace_free(&t);

    ccb_trace_init(&t, "a");
    ccb_trace_release(&t, 0); /* before the alloc of slot 0 */
    ccb_trace_alloc(&t, 100, 0);
    cr_assert_eq(ccb_trace_analyze(&t, err, sizeof err), -1);
    cr_assert(strstr(err, "event 0: free of slot 0 which is not live"), "%s", err);
    ccb_trace_free(&t);

    ccb_trace_init(&t, "a");
    ccb_trace_release(&t, UINT32_MAX);
    cr_assert_eq(ccb_trace_analyze(&t, err, sizeof err), -1);
    cr_assert(strstr(err, "event 0: slot 4294967295 out of range"), "%s", err);
    ccb_trace_free(&t);
}

Test(analyze, release_takes_the_allocs_size_and_stream_and_is_idempotent) {
    ccb_trace t;
    ccb_trace_init(&t, "a");
    uint32_t a = ccb_trace_alloc(&t, 1000, 7);
    uint32_t b = ccb_trace_alloc(&t, 0, 0);
    ccb_trace_release(&t, a);
    ccb_trace_release(&t, b);
    cr_assert_eq(ccb_trace_analyze(&t, NULL, 0), 0);
    cr_assert_eq(t.ev[2].size, 1000);
    cr_assert_eq(t.ev[2].stream, 7);
    cr_assert_neq(t.ev[2].size, CCB_SIZE_FILL, "filled once: a second analysis sees a plain free");
    ccb_trace copy = t;
    cr_assert_eq(ccb_trace_analyze(&t, NULL, 0), 0, "a second analysis agrees");
    cr_assert_eq(t.peak_requested, copy.peak_requested);
    cr_assert_eq(t.ideal_peak, copy.ideal_peak);
    cr_assert_eq(t.streams, 8);
    cr_assert_eq(t.peak_rounded, 1024);
    ccb_trace_free(&t);
}

Test(analyze, live_bytes_overflow_is_refused) {
    char err[256] = "";
    ccb_trace t;
    ccb_trace_init(&t, "a");
    for (int i = 0; i < 15; i++)
        ccb_trace_alloc(&t, P60, 0);
    cr_assert_eq(ccb_trace_analyze(&t, err, sizeof err), 0, "%s", err);
    cr_assert_eq(t.peak_requested, 15 * P60);
    cr_assert_eq(t.ideal_peak, 15 * P60);
    ccb_trace_alloc(&t, P60, 0);
    cr_assert_eq(ccb_trace_analyze(&t, err, sizeof err), -1);
    cr_assert(strstr(err, "event 15: live bytes overflow"), "%s", err);
    ccb_trace_free(&t);

    ccb_trace_init(&t, "a");
    ccb_trace_alloc(&t, P60 + 1, 0);
    cr_assert_eq(ccb_trace_analyze(&t, err, sizeof err), -1);
    cr_assert(strstr(err, "event 0: alloc of slot 0 larger than 2^60 bytes"), "%s", err);
    ccb_trace_free(&t);
    ccb_trace_init(&t, "a");
    ccb_trace_alloc(&t, UINT64_MAX, 0);
    cr_assert_eq(ccb_trace_analyze(&t, err, sizeof err), -1);
    ccb_trace_free(&t);
}

/* The overflow check adds the ROUNDED size to the REQUESTED sum: 16 blocks of
 * 2^60 - 1 bytes pass it (2^64 - 16 requested) while their rounded sum is
 * exactly 2^64 and wraps; peak_rounded and the ideal arena (same wrap) come
 * out below the lower bound. */
Test(analyze, defect_rounded_sum_overflow_is_refused_or_exact) {
    char err[256] = "";
    ccb_trace t;
    ccb_trace_init(&t, "a");
    for (int i = 0; i < 16; i++)
        ccb_trace_alloc(&t, P60 - 1, 0);
    int rc = ccb_trace_analyze(&t, err, sizeof err);
    if (rc == 0) {
        cr_assert_geq(t.peak_rounded, t.peak_requested, "peak_rounded %zu < peak_requested %zu (wrapped)",
                      t.peak_rounded, t.peak_requested);
        cr_assert_geq(t.ideal_peak, t.peak_requested, "ideal arena %zu < lower bound %zu (wrapped)", t.ideal_peak,
                      t.peak_requested);
    }
    ccb_trace_free(&t);
}

/* The ideal arena's top is not bounded by the live bytes (fragmentation):
 * 30 blocks of 2^59, every other freed, then one 2^60 block (fits no hole)
 * takes top to 2^64, which wraps to 0; refilling the holes then gives a live
 * peak of 15.5 x 2^60 against an "ideal" of 15 x 2^60. */
Test(analyze, defect_ideal_arena_top_overflow_is_detected) {
    char err[256] = "";
    ccb_trace t;
    ccb_trace_init(&t, "a");
    uint32_t s[30];
    for (int i = 0; i < 30; i++)
        s[i] = ccb_trace_alloc(&t, P59, 0);
    for (int i = 0; i < 30; i += 2)
        ccb_trace_release(&t, s[i]);
    ccb_trace_alloc(&t, P60, 0);
    for (int i = 0; i < 14; i++)
        ccb_trace_alloc(&t, P59, 0);
    int rc = ccb_trace_analyze(&t, err, sizeof err);
    if (rc == 0)
        cr_assert_geq(t.ideal_peak, t.peak_requested, "ideal arena %zu < lower bound %zu", t.ideal_peak,
                      t.peak_requested);
    ccb_trace_free(&t);
}

Test(analyze, zero_byte_allocs_and_a_small_exact_arena) {
    ccb_trace t;
    ccb_trace_init(&t, "z");
    for (int i = 0; i < 100000; i++) {
        uint32_t s = ccb_trace_alloc(&t, 0, (unsigned)(i % 3));
        if (i % 2)
            ccb_trace_release(&t, s);
    }
    char err[256] = "";
    cr_assert_eq(ccb_trace_analyze(&t, err, sizeof err), 0, "%s", err);
    cr_assert_eq(t.peak_requested, 0);
    cr_assert_eq(t.peak_rounded, 0);
    cr_assert_eq(t.ideal_peak, 0);
    cr_assert_eq(t.peak_live, 50001); /* the last odd alloc, before its free */
    cr_assert_eq(t.final_live, 50000);
    cr_assert_eq(t.allocs, 100000);
    cr_assert_eq(t.frees, 50000);
    ccb_trace_free(&t);

    /* 100 (512) | 0 | 600 (1024) ; free the first; 512 fits the hole: top 1536 */
    ccb_trace_init(&t, "z");
    uint32_t a = ccb_trace_alloc(&t, 100, 0);
    ccb_trace_alloc(&t, 0, 0);
    ccb_trace_alloc(&t, 600, 0);
    ccb_trace_release(&t, a);
    ccb_trace_alloc(&t, 512, 0);
    ccb_trace_alloc(&t, 1, 0); /* no hole left: from the top */
    cr_assert_eq(ccb_trace_analyze(&t, NULL, 0), 0);
    cr_assert_eq(t.ideal_peak, 2048);
    cr_assert_eq(t.peak_requested, 1113);
    cr_assert_eq(t.peak_rounded, 2048);
    ccb_trace_free(&t);
}

Test(analyze, injected_bad_events_are_refused) {
    char err[256] = "";
    ccb_trace t;
    ccb_trace_init(&t, "x");
    ccb_trace_mark(&t, "m");
    t.ev[0].slot = 3; /* mark index out of range */
    cr_assert_eq(ccb_trace_analyze(&t, err, sizeof err), -1);
    cr_assert(strstr(err, "event 0: mark 3 out of range"), "%s", err);
    ccb_trace_free(&t);
    ccb_trace_init(&t, "x");
    ccb_trace_alloc(&t, 8, 0);
    t.ev[0].op = 9; /* no such op */
    cr_assert_eq(ccb_trace_analyze(&t, err, sizeof err), -1);
    cr_log_info("op 9 is reported as: %s", err);
    ccb_trace_free(&t);
}

/* ccb_trace_analyze accepts a trim whose keep is over 2^60 (it checks alloc
 * sizes only); ccb_trace_write writes it; ccb_trace_read refuses the file. */
Test(analyze, defect_what_analysis_accepts_reads_back) {
    ccb_trace t;
    ccb_trace_init(&t, "w");
    ccb_trace_trim(&t, UINT64_MAX);
    char err[256] = "";
    int rc = ccb_trace_analyze(&t, err, sizeof err);
    if (rc == 0) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        ccb_trace_write(&t, f);
        fclose(f);
        ccb_trace u;
        rc = rd(&u, buf, len, err, sizeof err);
        cr_assert_eq(rc, 0, "analysis accepted it, write wrote it, read refuses it: %s", err);
        ccb_trace_free(&u);
        free(buf);
    }
    ccb_trace_free(&t);
}

/* ======================================================================== */
/* 8. Replay                                                                */
/* ======================================================================== */

static const ccb_replay_options ropt = {.device_bytes = (size_t)64 << 20, .reps = 1, .timeline_points = 20};

static const char *const host_specs[] = {"ccalloc-growth",     "ccalloc-greedy",     "ccalloc-nosmall",
                                         "ccalloc-maxsplit",   "ccalloc-onelarge",   "ccalloc-expandable",
                                         "ccalloc-expandable-greedy", "device-malloc", "malloc"};
#define NHOST (sizeof host_specs / sizeof host_specs[0])

static void analyzed(ccb_trace *t) {
    char err[256] = "";
    cr_assert_eq(ccb_trace_analyze(t, err, sizeof err), 0, "%s", err);
}

Test(replay, allocations_over_the_device_are_counted_and_replay_goes_on) {
    ccb_trace t;
    ccb_trace_init(&t, "oom");
    ccb_trace_mark(&t, "start");
    uint32_t a = ccb_trace_alloc(&t, 1 << 20, 0);
    uint32_t big = ccb_trace_alloc(&t, P60, 0); /* no device and no host has this */
    uint32_t b = ccb_trace_alloc(&t, 2 << 20, 1);
    ccb_trace_mark(&t, "mid");
    ccb_trace_release(&t, big);
    ccb_trace_release(&t, a);
    uint32_t big2 = ccb_trace_alloc(&t, (size_t)1 << 30, 0); /* over the 64 MiB device */
    ccb_trace_release(&t, b);
    ccb_trace_release(&t, big2);
    ccb_trace_empty_cache(&t);
    analyzed(&t);
    for (size_t s = 0; s < NHOST; s++) {
        ccb_result r;
        int rc = ccb_replay(&t, host_specs[s], &ropt, &r);
        cr_assert_eq(rc, 0, "%s: %s", host_specs[s], r.why);
        cr_assert_eq(r.skipped, 0);
        cr_assert_eq(r.ooms, 2, "%s: %" PRIu64 " OOMs (malloc too: 1 GiB is over the device)", host_specs[s], r.ooms);
        cr_assert_eq(r.allocs, 4);
        cr_assert_eq(r.frees, 4);
        cr_assert_eq(r.checkpoints_n, 3);
        cr_assert_eq(r.checkpoints[1].requested, 3 << 20, "%s: 'mid' sees the two granted blocks", host_specs[s]);
        cr_assert_eq(r.checkpoints[2].requested, 0);
        cr_assert_eq(r.lower_bound, P60 + (3 << 20), "the trace's lower bound");
        cr_assert_eq(r.peak_requested, 3 << 20);
        ccb_result_free(&r);
    }
    ccb_trace_free(&t);
}

/* The malloc floor never asks the host for a block larger than the simulated
 * device (--device-bytes) or than the host's physical memory: such a request
 * is an OOM of its row and malloc is not called (under ASan a 2^60-byte
 * malloc aborts the process: allocation-size-too-big; this suite hides that
 * with allocator_may_return_null, tests/bench/bench.cmake's
 * ccbench_malloc_huge_request runs ccbench without it). */
Test(replay, malloc_refuses_blocks_over_the_device_or_the_host) {
    ccb_trace t;
    ccb_trace_init(&t, "huge");
    uint32_t fits = ccb_trace_alloc(&t, ropt.device_bytes, 0); /* the whole device: granted */
    ccb_trace_release(&t, fits);
    uint32_t over = ccb_trace_alloc(&t, ropt.device_bytes + 1, 0);
    uint32_t huge = ccb_trace_alloc(&t, P60, 0);
    ccb_trace_release(&t, over);
    ccb_trace_release(&t, huge);
    analyzed(&t);
    ccb_result r;
    cr_assert_eq(ccb_replay(&t, "malloc", &ropt, &r), 0, "%s", r.why);
    cr_assert_eq(r.ooms, 2, "%" PRIu64 " OOMs", r.ooms);
    cr_assert_eq(r.peak_requested, ropt.device_bytes);
    ccb_result_free(&r);
    ccb_trace_free(&t);
    /* a device larger than the host: the host's memory bounds a block */
    size_t host = (size_t)sysconf(_SC_PHYS_PAGES) * (size_t)sysconf(_SC_PAGESIZE);
    ccb_trace_init(&t, "host");
    ccb_trace_release(&t, ccb_trace_alloc(&t, host + 4096, 0));
    analyzed(&t);
    ccb_replay_options o = ropt;
    o.device_bytes = (size_t)1 << 62;
    cr_assert_eq(ccb_replay(&t, "malloc", &o, &r), 0, "%s", r.why);
    cr_assert_eq(r.ooms, 1);
    ccb_result_free(&r);
    ccb_trace_free(&t);
}

Test(replay, trim_keep_beyond_reserved_and_empty_cache_first) {
    ccb_trace t;
    ccb_trace_init(&t, "trim");
    ccb_trace_empty_cache(&t);
    uint32_t a = ccb_trace_alloc(&t, 8 << 20, 0);
    ccb_trace_release(&t, a);
    ccb_trace_trim(&t, P60);
    ccb_trace_trim(&t, UINT64_MAX); /* analysis lets it through; replay clamps it to SIZE_MAX */
    ccb_trace_trim(&t, 0);
    analyzed(&t);
    for (size_t s = 0; s < NHOST; s++) {
        ccb_result r;
        cr_assert_eq(ccb_replay(&t, host_specs[s], &ropt, &r), 0, "%s: %s", host_specs[s], r.why);
        cr_assert_eq(r.checkpoints_n, 4);
        cr_assert_eq(r.checkpoints[0].event, 0);
        cr_assert_eq(r.checkpoints[0].op, CCB_EMPTY_CACHE);
        cr_assert_eq(r.checkpoints[0].requested, 0);
        cr_assert_eq(r.checkpoints[1].op, CCB_TRIM);
        cr_assert_eq(r.checkpoints[1].keep, P60);
        if (r.checkpoints[0].reserved != CCB_UNKNOWN)
            cr_assert_eq(r.checkpoints[0].reserved, 0, "%s: nothing reserved at the first event",
                         host_specs[s]); /* greedy reserves again lazily */
        if (strncmp(host_specs[s], "ccalloc", 7) == 0 && strcmp(host_specs[s], "ccalloc-greedy") != 0) {
            cr_assert_gt(r.checkpoints[1].reserved, 0, "%s: keep 2^60 keeps the cached segment", host_specs[s]);
            cr_assert_gt(r.checkpoints[2].reserved, 0, "%s: keep SIZE_MAX keeps it too", host_specs[s]);
            cr_assert_eq(r.checkpoints[3].reserved, 0, "%s: trim 0 releases it", host_specs[s]);
        }
        ccb_result_free(&r);
    }
    ccb_trace_free(&t);
}

Test(replay, only_release_events_and_empty_trace) {
    ccb_trace t;
    ccb_trace_init(&t, "rel");
    ccb_trace_empty_cache(&t);
    ccb_trace_trim(&t, 0);
    ccb_trace_trim(&t, P60);
    ccb_trace_empty_cache(&t);
    analyzed(&t);
    cr_assert_eq(t.releases, 4);
    for (size_t s = 0; s < NHOST; s++) {
        ccb_result r;
        cr_assert_eq(ccb_replay(&t, host_specs[s], &ropt, &r), 0, "%s: %s", host_specs[s], r.why);
        cr_assert_eq(r.checkpoints_n, 4);
        cr_assert_eq(r.ooms, 0);
        cr_assert(isnan(r.median_ns), "no alloc/free: no per-op median");
        cr_assert(r.total_ms >= 0);
        ccb_result_free(&r);
    }
    ccb_trace_free(&t);
    ccb_trace_init(&t, "empty");
    analyzed(&t);
    for (size_t s = 0; s < NHOST; s++) {
        ccb_result r;
        cr_assert_eq(ccb_replay(&t, host_specs[s], &ropt, &r), 0, "%s: %s", host_specs[s], r.why);
        cr_assert_eq(r.checkpoints_n, 0);
        cr_assert_eq(r.timeline_n, 2);
        cr_assert_eq(r.ops, 0);
        ccb_result_free(&r);
    }
    ccb_trace_free(&t);
}

Test(replay, thousands_of_marks) {
    ccb_trace t;
    ccb_trace_init(&t, "marks");
    uint32_t prev = UINT32_MAX;
    for (int i = 0; i < 5000; i++) {
        char name[32];
        snprintf(name, sizeof name, "step:%d", i);
        cr_assert_eq(ccb_trace_mark(&t, name), 0);
        uint32_t s = ccb_trace_alloc(&t, (uint64_t)(i % 7) * 1000, 0);
        if (prev != UINT32_MAX)
            ccb_trace_release(&t, prev);
        prev = s;
    }
    analyzed(&t);
    cr_assert_eq(t.nmarks, 5000);
    ccb_result r;
    cr_assert_eq(ccb_replay(&t, "ccalloc-growth", &ropt, &r), 0, "%s", r.why);
    cr_assert_eq(r.checkpoints_n, 5000);
    for (size_t i = 0; i < 5000; i++) {
        cr_assert_eq(r.checkpoints[i].mark, i);
        cr_assert_eq(r.checkpoints[i].op, CCB_MARK);
        cr_assert_eq(r.checkpoints[i].requested, i ? ((i - 1) % 7) * 1000 : 0, "mark %zu", i);
    }
    ccb_result_free(&r);
    /* and they survive a write / read */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ccb_trace_write(&t, f);
    fclose(f);
    ccb_trace u;
    good_n(buf, len, &u);
    cr_assert_eq(u.nmarks, 5000);
    cr_assert_str_eq(u.marks[4999], "step:4999");
    free(buf);
    ccb_trace_free(&u);
    ccb_trace_free(&t);
}

Test(replay, unknown_strategies_and_bad_configs) {
    ccb_trace t;
    ccb_trace_init(&t, "x");
    analyzed(&t);
    ccb_result r;
    cr_assert_eq(ccb_replay(&t, "nope", &ropt, &r), -1);
    cr_assert(strstr(r.why, "unknown strategy 'nope'"), "%s", r.why);
    char longspec[200];
    memset(longspec, 'a', 199);
    longspec[199] = '\0';
    cr_assert_eq(ccb_replay(&t, longspec, &ropt, &r), -1);
    cr_assert_eq(ccb_replay(&t, "malloc=x", &ropt, &r), -1);
    cr_assert(strstr(r.why, "malloc takes no config"), "%s", r.why);
    ccb_result_free(&r);
    cr_assert_eq(ccb_replay(&t, "ccalloc=policy:bogus", &ropt, &r), -1);
    ccb_result_free(&r);
    /* the GPU strategies' configs: a bad one fails the run, with or without a GPU */
    cr_assert_eq(ccb_replay(&t, "cub=bin_growth:1", &ropt, &r), -1);
    cr_assert(strstr(r.why, "bin_growth"), "%s", r.why);
    ccb_result_free(&r);
    cr_assert_eq(ccb_replay(&t, "cuda-async=release_threshold:-1", &ropt, &r), -1);
    cr_assert(strstr(r.why, "release_threshold"), "%s", r.why);
    ccb_result_free(&r);
    ccb_replay_options o = ropt;
    o.alloc_latency_ns = 2000000000ull; /* above the simulated device's 1 s limit */
    cr_assert_eq(ccb_replay(&t, "device-malloc", &o, &r), -1);
    cr_assert(strstr(r.why, "latency"), "%s", r.why);
    ccb_result_free(&r);
    ccb_trace_free(&t);
}

/* The GPU strategies' configs, checked before any device call (and on a
 * build without CUDA, where the strategies are skipped): cub's bin_growth 1
 * made its bin search loop forever, and sscanf took "-1", " 5" and
 * trailing text. */
Test(replay, gpu_strategy_configs_are_checked_before_the_device) {
    char why[256];
    unsigned long long th = 77;
    cr_assert_eq(ccb_async_config_parse(NULL, &th, why, sizeof why), 0);
    cr_assert_eq(th, 0);
    cr_assert_eq(ccb_async_config_parse("release_threshold:max", &th, why, sizeof why), 0);
    cr_assert_eq(th, UINT64_MAX);
    cr_assert_eq(ccb_async_config_parse("release_threshold:18446744073709551615", &th, why, sizeof why), 0);
    cr_assert_eq(th, UINT64_MAX);
    cr_assert_eq(ccb_async_config_parse("release_threshold:1048576", &th, why, sizeof why), 0);
    cr_assert_eq(th, 1048576);
    ccb_cub_config c;
    cr_assert_eq(ccb_cub_config_parse(NULL, &c, why, sizeof why), 0);
    cr_assert(c.bin_growth == 8 && c.min_bin == 3 && c.max_bin == 7 && c.max_cached == (6ull << 20) - 1);
    cr_assert_eq(
        ccb_cub_config_parse("bin_growth:2,min_bin:0,max_bin:63,max_cached:18446744073709551615", &c, why, sizeof why),
        0, "%s", why);
    cr_assert(c.bin_growth == 2 && c.min_bin == 0 && c.max_bin == 63 && c.max_cached == UINT64_MAX);
    cr_assert_eq(ccb_cub_config_parse("max_bin:1,min_bin:1,bin_growth:4294967295", &c, why, sizeof why), 0, "%s", why);
    cr_assert_eq(c.bin_growth, 4294967295u);
    /* refused, each naming the strategy: cuda-async's configs, then cub's */
    static const struct {
        int cub;
        const char *text;
    } bad[] = {{0, "release_threshold:-1"},
               {0, "release_threshold: 5"},
               {0, "release_threshold:+5"},
               {0, "release_threshold:5x"},
               {0, "release_threshold:"},
               {0, "release_threshold:0x10"},
               {0, "release_threshold:18446744073709551616"},
               {0, "release_threshold"},
               {0, "release_threshold:MAX"},
               {0, "threshold:5"},
               {0, "release_threshold:5,"},
               {1, "bin_growth:0"},
               {1, "bin_growth:1"},
               {1, "bin_growth:-1"},
               {1, "bin_growth: 8"},
               {1, "bin_growth:+8"},
               {1, "bin_growth:8x"},
               {1, "bin_growth:4294967296"},
               {1, "min_bin:-1"},
               {1, "max_cached:-1"},
               {1, "max_cached:18446744073709551616"},
               {1, "bin_growth:"},
               {1, "bin_growth"},
               {1, "bogus:1"},
               {1, "Bin_growth:8"},
               {1, ",bin_growth:8"},
               {1, "bin_growth:8,"},
               {1, "bin_growth:8,,min_bin:3"},
               {1, "min_bin:8"},
               {1, "bin_growth:2,max_bin:64"},
               {1, "bin_growth:4294967295,max_bin:3"},
               {1, "min_bin:4294967296"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        why[0] = '\0';
        int rc = bad[i].cub ? ccb_cub_config_parse(bad[i].text, &c, why, sizeof why)
                            : ccb_async_config_parse(bad[i].text, &th, why, sizeof why);
        cr_assert_eq(rc, -1, "'%s' accepted", bad[i].text);
        const char *name = bad[i].cub ? "cub: " : "cuda-async: ";
        cr_assert(strncmp(why, name, strlen(name)) == 0, "%s: %s", bad[i].text, why);
    }
}

/* A refused config is quoted whole characters only, as ccalloc's is: a
 * long one (from -s, any length) cut between UTF-8 characters and marked
 * "...", never at the end of the message's buffer (common/ccai_utf8.h). */
Test(replay, a_long_refused_config_is_cut_between_characters) {
    static char config[2][1700];
    for (int k = 0; k < 2; k++) { /* "é" (c3 a9) over any cut: one of the two starts it at an odd byte */
        char *p = config[k];
        if (k)
            *p++ = 'x';
        for (int i = 0; i < 800; i++, p += 2)
            memcpy(p, "\xc3\xa9", 2);
        *p = '\0';
    }
    for (int check = 0; check < 3; check++)
        for (int k = 0; k < 2; k++) {
            char why[CCB_WHY_MAX] = "";
            int rc = check == 0   ? ccb_no_config_check(config[k], why, sizeof why)
                     : check == 1 ? ccb_async_config_check(config[k], why, sizeof why)
                                  : ccb_cub_config_check(config[k], why, sizeof why);
            cr_assert_eq(rc, -1);
            uint32_t cp;
            for (const char *c = why; *c;) {
                unsigned n = ccai_utf8_decode((const unsigned char *)c, &cp);
                cr_assert_gt(n, 0, "check %d: half a character at byte %zu of %zu", check, (size_t)(c - why),
                             strlen(why));
                c += n;
            }
            cr_assert_not_null(strstr(why, "...'"), "check %d: the cut is marked: ...%s", check,
                               why + strlen(why) - 40);
        }
}

/* ... and so is one the baselines refuse when they open (ccb_replay, no
 * check before it). */
Test(replay, a_long_config_refused_at_open_is_cut_between_characters) {
    ccb_trace t;
    ccb_trace_init(&t, "x");
    analyzed(&t);
    for (int base = 0; base < 2; base++)
        for (int k = 0; k < 2; k++) {
            static char spec[1800];
            char *p = spec + sprintf(spec, "%s=%s", base ? "device-malloc" : "malloc", k ? "x" : "");
            for (int i = 0; i < 800; i++, p += 2)
                memcpy(p, "\xc3\xa9", 2);
            *p = '\0';
            ccb_result r;
            cr_assert_eq(ccb_replay(&t, spec, &ropt, &r), -1);
            uint32_t cp;
            for (const char *c = r.why; *c;) {
                unsigned n = ccai_utf8_decode((const unsigned char *)c, &cp);
                cr_assert_gt(n, 0, "base %d: half a character at byte %zu of %zu", base, (size_t)(c - r.why),
                             strlen(r.why));
                c += n;
            }
            cr_assert_not_null(strstr(r.why, "takes no config (got '"), "%s", r.why);
            cr_assert_not_null(strstr(r.why, "...')"), "base %d: the cut is marked", base);
            ccb_result_free(&r);
        }
    ccb_trace_free(&t);
}

Test(replay, streams_up_to_255_and_zero_byte_blocks) {
    ccb_trace t;
    ccb_trace_init(&t, "s");
    for (unsigned s = 0; s < 256; s++) {
        uint32_t a = ccb_trace_alloc(&t, s * 3, s);
        uint32_t z = ccb_trace_alloc(&t, 0, s);
        if (s % 2)
            ccb_trace_release(&t, a);
        ccb_trace_release(&t, z);
    }
    analyzed(&t);
    cr_assert_eq(t.streams, 256);
    ccb_replay_options o = ropt;
    o.device_bytes = (size_t)8 << 30; /* a segment per stream: 20 MiB each for ccalloc-nosmall */
    for (size_t s = 0; s < NHOST; s++) {
        ccb_result r;
        cr_assert_eq(ccb_replay(&t, host_specs[s], &o, &r), 0, "%s: %s", host_specs[s], r.why);
        cr_assert_eq(r.ooms, 0, "%s: %" PRIu64 " OOMs, peak reserved %zu", host_specs[s], r.ooms, r.peak_reserved);
        cr_assert_eq(r.peak_requested, t.peak_requested, "%s", host_specs[s]);
        ccb_result_free(&r);
    }
    ccb_trace_free(&t);
}

/* ccb_replay trusts the trace: a release of a slot that was never allocated
 * (a hand-built trace that skipped ccb_trace_analyze) reads ptr[] out of
 * bounds. Hardening, not a documented precondition. */
Test(replay, defect_unanalyzed_trace_with_a_bad_slot_is_refused) {
    ccb_trace t;
    ccb_trace_init(&t, "u");
    ccb_trace_alloc(&t, 64, 0);
    ccb_trace_release(&t, 1000); /* no such slot */
    ccb_result r;
    int rc = ccb_replay(&t, "malloc", &ropt, &r);
    cr_assert_eq(rc, -1, "replayed an invalid trace");
    ccb_result_free(&r);
    ccb_trace_free(&t);
}

/* ======================================================================== */
/* 9. The recorder                                                          */
/* ======================================================================== */


Test(recorder, mark_without_tracing_is_a_no_op_and_names_are_checked) {
    unsetenv("CCALLOC_TRACE");
    cca_upstream *u;
    cca_allocator *a;
    cr_assert_eq(cca_upstream_host_create((size_t)16 << 20, &u), CCA_OK);
    cr_assert_eq(cca_create(NULL, u, &a), CCA_OK);
    cr_assert_eq(cca_trace_mark(a, "phase"), CCA_OK);
    cr_assert_eq(cca_trace_mark(a, NULL), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_trace_mark(NULL, "x"), CCA_ERR_INVALID_ARGUMENT);
    char n63[64], n64[65];
    memset(n63, 'x', 63);
    n63[63] = '\0';
    memset(n64, 'x', 64);
    n64[64] = '\0';
    cr_assert_eq(cca_trace_mark(a, n63), CCA_OK);
    static const char *const badn[] = {"", "a,b", "q\"", "\x7f", "\t", "caf\xc3\xa9", "\n"};
    for (size_t i = 0; i < sizeof badn / sizeof badn[0]; i++)
        cr_assert_eq(cca_trace_mark(a, badn[i]), CCA_ERR_INVALID_ARGUMENT, "'%s'", badn[i]);
    cr_assert_eq(cca_trace_mark(a, n64), CCA_ERR_INVALID_ARGUMENT);
    cca_destroy(a);
    cca_upstream_destroy(u);
    /* empty CCALLOC_TRACE means unset */
    setenv("CCALLOC_TRACE", "", 1);
    cr_assert_eq(cca_upstream_host_create((size_t)16 << 20, &u), CCA_OK);
    cr_assert_eq(cca_create(NULL, u, &a), CCA_OK);
    cr_assert_eq(cca_trace_mark(a, "phase"), CCA_OK);
    cca_destroy(a);
    cca_upstream_destroy(u);
    unsetenv("CCALLOC_TRACE");
}

enum { WORKERS = 4, ITERS = 1500, MARKERS = 2, MARKS = 400, RELEASES = 60 };

typedef struct rec_ctx {
    cca_allocator *a[2];
    int id;
    int failed;
    int streams[8];
} rec_ctx;

static void *rec_worker(void *arg) {
    rec_ctx *c = arg;
    cca_allocator *a = c->a[c->id % 2];
    void *ring[8] = {0};
    for (int i = 0; i < ITERS; i++) {
        int k = i % 8;
        if (ring[k] && cca_free(a, ring[k]) != CCA_OK)
            c->failed = 1;
        size_t size = (size_t)((i * 7919 + c->id * 104729) % 300000) + 1;
        cca_stream s = i % 3 ? NULL : (cca_stream)&c->streams[i % 8];
        if (cca_alloc(a, size, s, &ring[k]) != CCA_OK)
            c->failed = 1;
    }
    for (int k = 0; k < 8; k++)
        if (ring[k])
            cca_free(a, ring[k]);
    return NULL;
}

static void *rec_marker(void *arg) {
    rec_ctx *c = arg;
    for (int i = 0; i < MARKS; i++) {
        char name[32];
        snprintf(name, sizeof name, "t%d:%d", c->id, i);
        if (cca_trace_mark(c->a[i % 2], name) != CCA_OK)
            c->failed = 1;
    }
    return NULL;
}

static void *rec_releaser(void *arg) {
    rec_ctx *c = arg;
    for (int i = 0; i < RELEASES; i++) {
        if (i % 2)
            cca_empty_cache(c->a[i % 2], NULL);
        else
            cca_trim(c->a[i % 2], (size_t)1 << 20, NULL);
        usleep(100);
    }
    return NULL;
}

Test(recorder, concurrent_marks_allocs_frees_and_releases, .timeout = 60) {
    const char *path = tmp_path("rec.csv");
    setenv("CCALLOC_TRACE", path, 1);
    cca_upstream *u[2];
    cca_allocator *a[2];
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(cca_upstream_host_create((size_t)512 << 20, &u[i]), CCA_OK);
        cr_assert_eq(cca_create(NULL, u[i], &a[i]), CCA_OK);
    }
    rec_ctx ctx[WORKERS + MARKERS + 1];
    pthread_t th[WORKERS + MARKERS + 1];
    int nt = 0;
    for (int i = 0; i < WORKERS; i++, nt++) {
        ctx[nt] = (rec_ctx){.a = {a[0], a[1]}, .id = i};
        pthread_create(&th[nt], NULL, rec_worker, &ctx[nt]);
    }
    for (int i = 0; i < MARKERS; i++, nt++) {
        ctx[nt] = (rec_ctx){.a = {a[0], a[1]}, .id = i};
        pthread_create(&th[nt], NULL, rec_marker, &ctx[nt]);
    }
    ctx[nt] = (rec_ctx){.a = {a[0], a[1]}, .id = 0};
    pthread_create(&th[nt], NULL, rec_releaser, &ctx[nt]);
    nt++;
    for (int i = 0; i < nt; i++) {
        pthread_join(th[i], NULL);
        cr_assert_eq(ctx[i].failed, 0, "thread %d: a call failed", i);
    }
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(cca_destroy(a[i]), CCA_OK);
        cca_upstream_destroy(u[i]);
    }
    unsetenv("CCALLOC_TRACE");

    /* every line well formed, seq 0..n-1 in file order */
    size_t len;
    char *text = tu_read_text(path, &len);
    cr_assert_eq(memchr(text, '\0', len), NULL);
    cr_assert(len > 0 && text[len - 1] == '\n');
    char *save, *line = strtok_r(text, "\n", &save);
    cr_assert_str_eq(line, "# ccalloc trace v3");
    line = strtok_r(NULL, "\n", &save);
    cr_assert(strncmp(line, "# source: pid ", 14) == 0, "%s", line);
    line = strtok_r(NULL, "\n", &save);
    cr_assert_str_eq(line, "seq,op,id,size,stream,domain,name");
    uint64_t seq = 0, allocs = 0, frees = 0, marks = 0, rel = 0;
    int last_mark[MARKERS];
    for (int i = 0; i < MARKERS; i++)
        last_mark[i] = -1;
    while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
        unsigned long long sq, id, size, stream, domain;
        char op[16], name[80];
        int used = 0;
        int nf = sscanf(line, "%llu,%15[a-z_],%llu,%llu,%llu,%llu%n", &sq, op, &id, &size, &stream, &domain, &used);
        cr_assert_eq(nf, 6, "malformed line '%s'", line);
        cr_assert_eq(domain, 0, "no domains here: '%s'", line);
        cr_assert_eq(sq, seq, "seq %llu where %" PRIu64 " was due: '%s'", sq, seq, line);
        seq++;
        if (!strcmp(op, "alloc") || !strcmp(op, "free")) {
            cr_assert_eq(line[used], '\0', "'%s'", line);
            cr_assert(id > 0 && size > 0 && size <= 300000 && stream <= WORKERS * 8, "'%s'", line);
            allocs += op[0] == 'a';
            frees += op[0] == 'f';
        } else if (!strcmp(op, "mark")) {
            cr_assert_eq(line[used], ',', "'%s'", line);
            cr_assert(id == 0 && size == 0 && stream == 0, "'%s'", line);
            int who, k;
            cr_assert_eq(sscanf(line + used + 1, "t%d:%d", &who, &k), 2, "'%s'", line);
            snprintf(name, sizeof name, "t%d:%d", who, k);
            cr_assert_str_eq(line + used + 1, name);
            cr_assert(who >= 0 && who < MARKERS);
            cr_assert_eq(k, last_mark[who] + 1, "marks of one thread in order");
            last_mark[who] = k;
            marks++;
        } else if (!strcmp(op, "empty_cache") || !strcmp(op, "trim")) {
            cr_assert_eq(line[used], '\0');
            cr_assert(id == 0 && stream == 0);
            cr_assert_eq(size, op[0] == 'e' ? 0 : (1u << 20));
            rel++;
        } else {
            cr_assert_fail("unknown op in '%s'", line);
        }
    }
    cr_assert_eq(allocs, WORKERS * ITERS);
    cr_assert_eq(frees, WORKERS * ITERS);
    cr_assert_eq(marks, MARKERS * MARKS);
    cr_assert_eq(rel, RELEASES);
    free(text);

    ccb_trace t;
    char err[256] = "";
    cr_assert_eq(ccb_trace_load(&t, path, err, sizeof err), 0, "%s", err);
    cr_assert_eq(t.allocs, WORKERS * ITERS);
    cr_assert_eq(t.frees, WORKERS * ITERS);
    cr_assert_eq(t.nmarks, MARKERS * MARKS);
    cr_assert_eq(t.releases, RELEASES);
    cr_assert_eq(t.final_live, 0);
    cr_assert_eq(t.n, seq);
    ccb_trace_free(&t);
}

Test(recorder, reopened_trace_is_a_new_section_and_reads_back) {
    const char *path = tmp_path("sections.csv");
    setenv("CCALLOC_TRACE", path, 1);
    for (int round = 0; round < 3; round++) {
        cca_upstream *u;
        cca_allocator *a;
        cr_assert_eq(cca_upstream_host_create((size_t)64 << 20, &u), CCA_OK);
        cr_assert_eq(cca_create(NULL, u, &a), CCA_OK);
        void *p, *q;
        cr_assert_eq(cca_alloc(a, 1000 + (size_t)round, NULL, &p), CCA_OK);
        cr_assert_eq(cca_trace_mark(a, "round"), CCA_OK);
        cr_assert_eq(cca_alloc(a, 5, NULL, &q), CCA_OK);
        cca_free(a, p);
        if (round != 1)
            cca_free(a, q); /* round 1 leaks a block: destroy reports it */
        cca_destroy(a);
        cca_upstream_destroy(u);
    }
    unsetenv("CCALLOC_TRACE");
    ccb_trace t;
    char err[256] = "";
    cr_assert_eq(ccb_trace_load(&t, path, err, sizeof err), 0, "%s", err);
    cr_assert_eq(t.allocs, 6);
    cr_assert_eq(t.frees, 5);
    cr_assert_eq(t.nmarks, 3);
    cr_assert_eq(t.final_live, 1);
    ccb_trace_free(&t);
}

/* Every name the allocator takes, as a domain's and as a mark's, reads
 * back as it was written: every allowed character (in windows of 63),
 * blanks at either end or alone, a leading '#' (a comment at a line's
 * start), op and header words, a mark's backslash. */
Test(recorder, every_name_the_allocator_takes_reads_back_as_written) {
    const char *path = tmp_path("names.csv");
    setenv("CCALLOC_TRACE", path, 1);
    static char names[16][64];
    size_t n = 0;
    char alphabet[96];
    size_t k = 0;
    for (int c = 0x20; c < 0x7f; c++)
        if (c != '"' && c != '\\' && c != ',')
            alphabet[k++] = (char)c;
    alphabet[k] = '\0';
    for (size_t off = 0; off < k; off += 20)
        snprintf(names[n++], sizeof names[0], "%.63s", alphabet + off);
    static const char *const odd[] = {" ", "  x  ", "#", "# ccalloc trace v3", "seq", "alloc", "mark", ":"};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++)
        snprintf(names[n++], sizeof names[0], "%s", odd[i]);
    cca_upstream *u;
    cca_allocator *a;
    cr_assert_eq(cca_upstream_host_create((size_t)64 << 20, &u), CCA_OK);
    cr_assert_eq(cca_create(NULL, u, &a), CCA_OK);
    for (size_t i = 0; i < n; i++) {
        cca_domain *d;
        void *p;
        cr_assert_eq(cca_domain_create(a, names[i], &d), CCA_OK, "'%s': %s", names[i], cca_last_error());
        cr_assert_eq(cca_alloc_in(a, d, 100 + i, NULL, &p), CCA_OK);
        cr_assert_eq(cca_free(a, p), CCA_OK);
        cr_assert_eq(cca_trace_mark(a, names[i]), CCA_OK, "'%s': %s", names[i], cca_last_error());
    }
    cr_assert_eq(cca_trace_mark(a, "a\\b\\"), CCA_OK); /* a mark may hold a backslash */
    cr_assert_eq(cca_destroy(a), CCA_OK);
    cca_upstream_destroy(u);
    unsetenv("CCALLOC_TRACE");
    ccb_trace t;
    char err[256] = "";
    cr_assert_eq(ccb_trace_load(&t, path, err, sizeof err), 0, "%s", err);
    cr_assert_eq(t.nmarks, n + 1);
    cr_assert_eq(t.ndomains, n + 1); /* the default domain is number 0 */
    for (size_t i = 0; i < n; i++) {
        cr_assert_str_eq(t.marks[i], names[i]);
        cr_assert_str_eq(ccb_domain_name(&t, (unsigned)i + 1), names[i]);
    }
    cr_assert_str_eq(t.marks[n], "a\\b\\");
    ccb_trace_free(&t);
}

/* A failure in the forked child (pid 0) is its exit status; in the
 * parent, the test's. */
static void give_up(pid_t pid, const char *what) {
    if (pid == 0)
        _exit(11);
    cr_assert_fail("%s: %s", what, cca_last_error());
}

/* Two processes with one CCALLOC_TRACE (a child forked before the trace
 * was opened; workers a launcher started with one environment), both
 * recording at once: the file holds one of them whole, never the two
 * interleaved (each wrote its own lines over the other's: "expected 6
 * fields"). */
Test(recorder, two_processes_recording_to_one_file_leave_one_whole_trace, .timeout = 60) {
    enum { EVENTS = 20000 };
    const char *path = tmp_path("two.csv");
    setenv("CCALLOC_TRACE", path, 1);
    int opened[2], go[2];
    cr_assert_eq(pipe(opened), 0);
    cr_assert_eq(pipe(go), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    cca_upstream *u;
    cca_allocator *a;
    if (cca_upstream_host_create((size_t)64 << 20, &u) != CCA_OK || cca_create(NULL, u, &a) != CCA_OK)
        give_up(pid, "cca_create");
    char c = 'x';
    if (pid == 0) { /* both opened before either writes */
        if (write(opened[1], &c, 1) != 1 || read(go[0], &c, 1) != 1)
            _exit(12);
    } else {
        cr_assert_eq(read(opened[0], &c, 1), 1);
        cr_assert_eq(write(go[1], &c, 1), 1);
    }
    for (int i = 0; i < EVENTS; i++) {
        void *p;
        if (cca_alloc(a, 1 + (size_t)i % (pid ? 3000 : 1777), NULL, &p) != CCA_OK || cca_free(a, p) != CCA_OK)
            give_up(pid, "cca_alloc");
        if (i % 1000 == 0)
            (void)cca_trace_mark(a, pid ? "parent" : "child");
    }
    cca_destroy(a);
    cca_upstream_destroy(u);
    if (pid == 0)
        _exit(0);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's status %d", status);
    unsetenv("CCALLOC_TRACE");
    ccb_trace t;
    char err[256] = "";
    cr_assert_eq(ccb_trace_load(&t, path, err, sizeof err), 0, "%s", err);
    cr_assert_eq(t.allocs, EVENTS, "one process's allocations, whole");
    cr_assert_eq(t.frees, EVENTS);
    cr_assert_eq(t.nmarks, EVENTS / 1000);
    ccb_trace_free(&t);
}

/* A child records to `path` with files limited to `limit` bytes
 * (RLIMIT_FSIZE: a write past it fails with EFBIG, as one on a full disk
 * fails with ENOSPC), marking as it goes. Its exit status: 0 when a mark
 * said CCA_ERR_IO, else what went wrong. */
static int record_on_a_disk_of(const char *path, rlim_t limit) {
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit r = {limit, limit};
        if (setrlimit(RLIMIT_FSIZE, &r) != 0)
            _exit(10);
        setenv("CCALLOC_TRACE", path, 1);
        cca_upstream *u;
        cca_allocator *a;
        if (cca_upstream_host_create((size_t)64 << 20, &u) != CCA_OK || cca_create(NULL, u, &a) != CCA_OK)
            _exit(11);
        int io = 0;
        for (int i = 0; i <= 3000; i++) {
            void *p;
            if (cca_alloc(a, 1 + (size_t)i * 7 % 5000, NULL, &p) != CCA_OK || cca_free(a, p) != CCA_OK)
                _exit(12);
            if (i % 250 == 0) {
                cca_status s = cca_trace_mark(a, "phase:fill");
                if (s != CCA_OK && s != CCA_ERR_IO)
                    _exit(13);
                io |= s == CCA_ERR_IO;
            }
        }
        cca_destroy(a);
        cca_upstream_destroy(u);
        _exit(io ? 0 : 14);
    }
    cr_assert_gt(pid, 0);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

/* A disk that fills mid-run, at any byte (inside the header, a line, at a
 * buffer's end): the file holds whole lines up to where the recording
 * stopped, so it reads back, and a mark said CCA_ERR_IO. (The file ended
 * in a cut line: "expected 6 fields".) */
Test(recorder, a_disk_that_fills_mid_run_leaves_a_trace_that_reads_back, .timeout = 120) {
    static const rlim_t limits[] = {30, 74, 100, 1000, 4095, 4096, 4097, 5000, 8191, 8193, 12345, 30000};
    const char *path = tmp_path("full.csv");
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
        unlink(path);
        int rc = record_on_a_disk_of(path, limits[i]);
        cr_assert_eq(rc, 0, "limit %lu: the child's status %d", (unsigned long)limits[i], rc);
        struct stat st;
        cr_assert_eq(stat(path, &st), 0);
        cr_assert_leq((rlim_t)st.st_size, limits[i]);
        ccb_trace t;
        char err[256] = "";
        cr_assert_eq(ccb_trace_load(&t, path, err, sizeof err), 0, "limit %lu (%lld bytes written): %s",
                     (unsigned long)limits[i], (long long)st.st_size, err);
        cr_assert_lt(t.allocs, 3001);
        ccb_trace_free(&t);
    }
}

Test(recorder, seventy_streams_get_seventy_numbers) {
    const char *path = tmp_path("streams.csv");
    setenv("CCALLOC_TRACE", path, 1);
    cca_upstream *u;
    cca_allocator *a;
    cr_assert_eq(cca_upstream_host_create((size_t)256 << 20, &u), CCA_OK);
    cr_assert_eq(cca_create(NULL, u, &a), CCA_OK);
    static int tokens[70];
    void *p[70];
    for (int i = 0; i < 70; i++)
        cr_assert_eq(cca_alloc(a, 4096, (cca_stream)&tokens[i], &p[i]), CCA_OK);
    for (int i = 0; i < 70; i++)
        cca_free(a, p[i]);
    cca_empty_cache(a, NULL);
    cca_destroy(a);
    cca_upstream_destroy(u);
    unsetenv("CCALLOC_TRACE");
    ccb_trace t;
    char err[256] = "";
    cr_assert_eq(ccb_trace_load(&t, path, err, sizeof err), 0, "%s", err);
    cr_assert_eq(t.streams, 71);
    cr_assert_eq(t.ev[69].stream, 70);
    ccb_trace_free(&t);
}

/* cca_trim(a, keep) writes keep as it is; any keep > 2^60 (SIZE_MAX: "keep
 * everything") makes the recorder's own file unreadable. */
Test(recorder, defect_trim_with_a_huge_keep_reads_back) {
    const char *path = tmp_path("trim.csv");
    setenv("CCALLOC_TRACE", path, 1);
    cca_upstream *u;
    cca_allocator *a;
    cr_assert_eq(cca_upstream_host_create((size_t)64 << 20, &u), CCA_OK);
    cr_assert_eq(cca_create(NULL, u, &a), CCA_OK);
    void *p;
    cr_assert_eq(cca_alloc(a, 4096, NULL, &p), CCA_OK);
    cca_free(a, p);
    cr_assert_eq(cca_trim(a, SIZE_MAX, NULL), CCA_OK, "the allocator accepts it");
    cca_destroy(a);
    cca_upstream_destroy(u);
    unsetenv("CCALLOC_TRACE");
    ccb_trace t;
    char err[256] = "";
    int rc = ccb_trace_load(&t, path, err, sizeof err);
    cr_assert_eq(rc, 0, "the recorder's own trace is refused: %s", err);
    ccb_trace_free(&t);
}

/* ======================================================================== */
/* 10. Cost of hostile inputs                                               */
/* ======================================================================== */

static double time_read(const char *buf, size_t len, ccb_trace *keep) {
    ccb_trace t;
    char err[256] = "";
    double t0 = now_s();
    int rc = rd(&t, buf, len, err, sizeof err);
    double d = now_s() - t0;
    cr_assert_eq(rc, 0, "%s", err);
    if (keep)
        *keep = t;
    else
        ccb_trace_free(&t);
    return d;
}

static char *comment_file(size_t lines, size_t *len) {
    char *b = malloc(lines * 64 + 64);
    size_t n = 0;
    for (size_t i = 0; i < lines; i++) {
        memcpy(b + n, "# provenance line of some forty characters\n", 43);
        n += 43;
    }
    n += (size_t)sprintf(b + n, "seq,op,id,size,stream\n");
    *len = n;
    return b;
}

/* Each comment line re-reads and re-allocates all comments kept so far
 * (strlen + realloc in ccb_trace_comment): reading is quadratic in the
 * number of comment lines. 8x the lines should cost about 8x, not 64x. */
Test(cost, defect_comment_lines_read_in_linear_time, .timeout = 60) {
    size_t l1, l2;
    char *a = comment_file(1500, &l1), *b = comment_file(12000, &l2);
    double t1 = 1e9;
    for (int i = 0; i < 3; i++) {
        double d = time_read(a, l1, NULL);
        t1 = d < t1 ? d : t1;
    }
    double t2 = time_read(b, l2, NULL);
    cr_log_info("comments: 1500 lines %.4f s, 12000 lines %.4f s (x%.0f)", t1, t2, t2 / t1);
    cr_assert_lt(t2, 20 * t1 + 0.05, "1500 lines: %.4f s; 12000 lines: %.4f s (x%.0f)", t1, t2, t2 / t1);
    free(a);
    free(b);
}

/* Comments are cut at 511 characters (ccb_trace_comment's buffer) though
 * lines up to 1022 are read: provenance is silently lost on a round trip. */
Test(cost, defect_long_comment_is_kept_whole) {
    char in[1200];
    in[0] = '#';
    in[1] = ' ';
    memset(in + 2, 'p', 900);
    strcpy(in + 902, "\nseq,op,id,size,stream\n");
    ccb_trace t;
    good(in, &t);
    cr_assert_eq(strlen(t.comments), 901, "comment kept as %zu characters", strlen(t.comments) - 1);
    ccb_trace_free(&t);
}

static uint64_t mix64(uint64_t x) { /* bench/trace.c's mix */
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

static char *ids_file(int n, int crafted, size_t *len) {
    char *b = malloc((size_t)n * 48 + 64);
    size_t k = (size_t)sprintf(b, "seq,op,id,size,stream\n");
    uint64_t id = 0;
    for (int i = 0; i < n; i++) {
        if (crafted) /* ids whose hash lands in the first 2048 buckets of every table up to 2^17 */
            do
                id++;
            while ((mix64(id + 1) & 0x1ffff) >= 2048);
        else
            id++;
        k += (size_t)sprintf(b + k, "%d,alloc,%" PRIu64 ",0,0\n", i, id);
    }
    *len = k;
    return b;
}

/* The (section, id) map hashes with a fixed, invertible function and linear
 * probing: ids chosen to share low hash bits make every insert walk one
 * cluster, so reading becomes quadratic (40000 such ids: ~18 s vs 0.06 s). */
Test(cost, defect_chosen_ids_do_not_make_reading_quadratic, .timeout = 60) {
    size_t l1, l2;
    char *plain = ids_file(10000, 0, &l1), *evil = ids_file(10000, 1, &l2);
    double t1 = time_read(plain, l1, NULL);
    double t2 = time_read(evil, l2, NULL);
    cr_log_info("10000 ids: sequential %.4f s, chosen %.4f s", t1, t2);
    cr_assert_lt(t2, 10 * t1 + 0.1, "sequential ids %.4f s, chosen ids %.4f s", t1, t2);
    free(plain);
    free(evil);
}

/* ---- the recorder's limits, read back ------------------------------------------ */

/* The recorder and the reader keep one set of limits: 65534 domains in a
 * file (all sections together), streams numbered up to 255 in a section,
 * 2^19 sections in a file. At each limit less one and at the limit the
 * recording reads back whole; one past it the recorder logs once that it
 * stops and writes nothing more, so the file reads back with nothing past
 * the stop: no domain recorded as the default one, no stream merged into
 * another, no section the reader refuses. */

static int stop_lines;
static char stop_line[512];

static void count_stops(void *user, const char *line) {
    (void)user;
    if (strstr(line, "CCALLOC_TRACE")) {
        stop_lines++;
        snprintf(stop_line, sizeof stop_line, "%s", line);
    }
}

/* CCALLOC_TRACE names path, the log counts the recorder's lines; a device. */
static cca_upstream *begin_recording(const char *path) {
    setenv("CCALLOC_TRACE", path, 1);
    stop_lines = 0;
    cca_set_log_callback(count_stops, NULL);
    cca_upstream *u = NULL;
    cr_assert_eq(cca_upstream_host_create((size_t)64 << 20, &u), CCA_OK);
    return u;
}

static void end_recording(cca_upstream *u) {
    cca_upstream_destroy(u);
    cca_set_log_callback(NULL, NULL);
    unsetenv("CCALLOC_TRACE");
}

/* Only a regular file is locked against a second recording process: a
 * device (/dev/null to time tracing's cost, /dev/stderr on a terminal)
 * is never truncated, so two processes tracing to it both record, and
 * neither is told "another process is recording to it" (a lock on a
 * device holds as on a file: the second was refused). */
Test(recorder, two_processes_record_to_one_device, .timeout = 60) {
    int opened[2], done[2];
    cr_assert_eq(pipe(opened), 0);
    cr_assert_eq(pipe(done), 0);
    setenv("CCALLOC_TRACE", "/dev/null", 1);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) { /* records, and holds the device open until the parent has opened it too */
        cca_upstream *u;
        cca_allocator *a;
        char c = 'x';
        if (cca_upstream_host_create((size_t)16 << 20, &u) != CCA_OK || cca_create(NULL, u, &a) != CCA_OK)
            _exit(11);
        if (write(opened[1], &c, 1) != 1 || read(done[0], &c, 1) != 1)
            _exit(12);
        cca_destroy(a);
        cca_upstream_destroy(u);
        _exit(0);
    }
    char c;
    cr_assert_eq(read(opened[0], &c, 1), 1);
    cca_upstream *u = begin_recording("/dev/null");
    cca_allocator *a;
    cr_assert_eq(cca_create(NULL, u, &a), CCA_OK);
    cr_expect_eq(stop_lines, 0, "the second process is refused: %s", stop_line);
    cr_expect_eq(cca_trace_mark(a, "second"), CCA_OK);
    cca_destroy(a);
    cr_assert_eq(write(done[1], "x", 1), 1);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's status %d", status);
    end_recording(u);
}

static void load_ok(ccb_trace *t, const char *path) {
    char err[512];
    ccb_trace_init(t, "limits");
    cr_assert_eq(ccb_trace_load(t, path, err, sizeof err), 0, "the reader refuses the recording: %s", err);
}

static cca_allocator *limits_allocator(cca_upstream *u, const char *conf) {
    cca_config c;
    cca_config_default(&c);
    cr_assert_eq(cca_config_parse(&c, conf), CCA_OK, "%s", cca_last_error());
    cca_allocator *a = NULL;
    cr_assert_eq(cca_create(&c, u, &a), CCA_OK, "%s", cca_last_error());
    return a;
}

/* `first` domains in one allocator lifetime, then `second` in another (0:
 * none); the last domain of all gets one allocation, and the default domain
 * one at the end of each lifetime. */
static void record_domains(const char *path, int first, int second) {
    cca_upstream *u = begin_recording(path);
    int lifetimes[2] = {first, second}, last = second ? 1 : 0;
    for (int l = 0; l <= last; l++) {
        cca_allocator *a = limits_allocator(u, "log_oom:0");
        for (int i = 0; i < lifetimes[l]; i++) {
            char name[16];
            snprintf(name, sizeof name, "d%d", i);
            cca_domain *d = NULL;
            void *p = NULL;
            cr_assert_eq(cca_domain_create(a, name, &d), CCA_OK, "domain %d: %s", i, cca_last_error());
            if (l == last && i == lifetimes[l] - 1) {
                cr_assert_eq(cca_alloc_in(a, d, 4096, NULL, &p), CCA_OK, "%s", cca_last_error());
                cr_assert_eq(cca_free(a, p), CCA_OK);
            }
            cr_assert_eq(cca_domain_destroy(a, d, 0, NULL), CCA_OK, "%s", cca_last_error());
        }
        void *p = NULL;
        cr_assert_eq(cca_alloc(a, 512, NULL, &p), CCA_OK);
        cr_assert_eq(cca_free(a, p), CCA_OK);
        cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    }
    end_recording(u);
}

/* n = first + second domains: up to the limit every one reads back, the
 * last with its allocation; one past it, the first 65534 only, nothing of
 * the last domain nor after it, and one log line. */
static void domains_read_back(int first, int second) {
    const char *path = tmp_path("domains.csv");
    record_domains(path, first, second);
    int n = first + second;
    ccb_trace t;
    load_ok(&t, path);
    if (n <= 65534) {
        cr_assert_eq(t.ndomains, (size_t)n + 1, "%d domains: the trace holds %zu", n, t.ndomains - 1);
        cr_assert_eq(t.domains[n].allocs, 1, "the last domain's allocation");
        cr_assert_eq(t.domains[0].allocs, second ? 2u : 1u, "the default domain's");
        cr_assert_eq(stop_lines, 0, "%s", stop_line);
    } else {
        cr_assert_eq(t.ndomains, (size_t)65535, "65534 domains and the default one, not %zu", t.ndomains);
        cr_assert_eq(t.allocs, second ? 1u : 0u, "nothing past the stop (the first lifetime's default allocation)");
        cr_assert_eq(stop_lines, 1, "the stop said once, not %d times", stop_lines);
        cr_assert(strstr(stop_line, "65534 domains"), "%s", stop_line);
    }
    ccb_trace_free(&t);
}

Test(recorder, domains_one_below_the_limit_read_back, .timeout = 120) {
    domains_read_back(65533, 0);
}

Test(recorder, domains_at_the_limit_read_back, .timeout = 120) {
    domains_read_back(65534, 0);
}

Test(recorder, domains_past_the_limit_stop_the_recording, .timeout = 120) {
    domains_read_back(65535, 0);
}

Test(recorder, domains_of_two_lifetimes_count_in_one_file, .timeout = 120) {
    domains_read_back(40000, 25534);
}

Test(recorder, domains_of_two_lifetimes_past_the_limit_stop, .timeout = 120) {
    domains_read_back(40000, 40000);
}

/* n streams besides the default one, an allocation on each, then one on
 * the default stream. */
static void streams_read_back(int n) {
    const char *path = tmp_path("streams.csv");
    cca_upstream *u = begin_recording(path);
    cca_allocator *a = limits_allocator(u, "policy:greedy,greedy_bytes:4M");
    for (int i = 0; i <= n; i++) {
        void *p = NULL;
        cca_stream s = i < n ? (cca_stream)(uintptr_t)(0x1000 * (i + 1)) : NULL;
        cr_assert_eq(cca_alloc(a, 512, s, &p), CCA_OK, "%s", cca_last_error());
        cr_assert_eq(cca_free(a, p), CCA_OK);
    }
    cr_assert_eq(cca_destroy(a), CCA_OK, "%s", cca_last_error());
    end_recording(u);
    ccb_trace t;
    load_ok(&t, path);
    if (n <= 255) {
        cr_assert_eq(t.allocs, (uint64_t)n + 1);
        cr_assert_eq(t.streams, (unsigned)n + 1, "streams 0..%d, not %u", n, t.streams - 1);
        cr_assert_eq(stop_lines, 0, "%s", stop_line);
    } else {
        cr_assert_eq(t.allocs, 255, "one allocation on each of the first 255 streams, nothing after: %" PRIu64,
                     t.allocs);
        cr_assert_eq(t.streams, 256u, "streams 0..255");
        cr_assert_eq(stop_lines, 1, "the stop said once, not %d times", stop_lines);
        cr_assert(strstr(stop_line, "255 streams"), "%s", stop_line);
    }
    ccb_trace_free(&t);
}

Test(recorder, streams_one_below_the_limit_read_back) {
    streams_read_back(254);
}

Test(recorder, streams_at_the_limit_read_back) {
    streams_read_back(255);
}

Test(recorder, streams_past_the_limit_stop_the_recording) {
    streams_read_back(256);
}

/* 2^19 + 1 allocator lifetimes, one section each: the file read back
 * after 2^19 - 1, 2^19 and 2^19 + 1 of them. A section's allocation is
 * what the read-back counts, so one is made in every 4096th section and in
 * the last three (a section is written by cca_create whether or not it
 * allocates; with one in each, the segment's reservation, mapping and
 * free-index bins made each lifetime three times as slow: 64 s of this
 * suite's 84 under ASan). Classic segments: a section is the same whatever
 * the kind. */
Test(recorder, sections_below_at_and_past_the_limit, .timeout = 600) {
    const char *path = tmp_path("sections.csv");
    cca_upstream *u = begin_recording(path);
    const uint64_t limit = (uint64_t)1 << 19;
    uint64_t allocs = 0; /* sections with an allocation, so far */
    for (uint64_t s = 1; s <= limit + 1; s++) {
        cca_allocator *a = limits_allocator(u, "expandable:0");
        if (s % 4096 == 0 || s + 2 >= limit) {
            void *p = NULL;
            cr_assert_eq(cca_alloc(a, 512, NULL, &p), CCA_OK);
            cr_assert_eq(cca_free(a, p), CCA_OK);
            allocs += s <= limit;
        }
        cr_assert_eq(cca_destroy(a), CCA_OK);
        if (s + 1 < limit)
            continue;
        ccb_trace t;
        load_ok(&t, path);
        cr_assert_eq(t.allocs, allocs, "%" PRIu64 " sections: %" PRIu64 " allocations", s, t.allocs);
        cr_assert_eq(stop_lines, s <= limit ? 0 : 1, "after %" PRIu64 " sections: %s", s, stop_line);
        ccb_trace_free(&t);
    }
    cr_assert(strstr(stop_line, "524288 sections"), "%s", stop_line);
    end_recording(u);
}
