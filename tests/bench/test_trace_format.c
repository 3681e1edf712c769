/*
 * test_trace_format.c — bench/trace.c: the CSV trace format of the
 * allocator's recorder, read and written by ccbench.
 *
 * Round trips (generated traces, write then read, event for event), the
 * recorder's real output (CCALLOC_TRACE around a host-upstream program:
 * counts and sizes exactly what the program did), several sections with
 * overlapping ids, and every malformed line the reader must name.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ccalloc.h"
#include "ccai_utf8.h" /* common/: ccai_utf8_decode */
#include "ccbench.h"

static void assert_same_events(const ccb_trace *a, const ccb_trace *b) {
    cr_assert_eq(a->n, b->n, "event counts differ: %zu vs %zu", a->n, b->n);
    cr_assert_eq(a->slots, b->slots);
    for (size_t i = 0; i < a->n; i++) {
        cr_assert_eq(a->ev[i].op, b->ev[i].op, "event %zu: op", i);
        cr_assert_eq(a->ev[i].slot, b->ev[i].slot, "event %zu: slot", i);
        cr_assert_eq(a->ev[i].size, b->ev[i].size, "event %zu: size", i);
        cr_assert_eq(a->ev[i].stream, b->ev[i].stream, "event %zu: stream", i);
        cr_assert_eq(a->ev[i].domain, b->ev[i].domain, "event %zu: domain", i);
    }
    cr_assert_eq(a->peak_requested, b->peak_requested);
    cr_assert_eq(a->peak_rounded, b->peak_rounded);
    cr_assert_eq(a->peak_live, b->peak_live);
    cr_assert_eq(a->final_live, b->final_live);
}

static int read_text(ccb_trace *t, const char *text, char *err, size_t errlen) {
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    cr_assert_not_null(f);
    ccb_trace_init(t, "text");
    int rc = ccb_trace_read(t, f, err, errlen);
    fclose(f);
    return rc;
}

Test(trace_format, every_generator_round_trips) {
    for (size_t g = 0; g < ccb_generator_count; g++) {
        ccb_gen_params p = {7, 0.05};
        ccb_trace a, b;
        cr_assert_eq(ccb_generate(ccb_generators[g].name, &p, &a), 0);
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        cr_assert_eq(ccb_trace_write(&a, f), 0);
        fclose(f);
        char err[256] = "";
        cr_assert_eq(read_text(&b, buf, err, sizeof err), 0, "%s: %s", ccb_generators[g].name, err);
        assert_same_events(&a, &b);
        cr_assert_str_eq(a.comments, b.comments, "provenance comments survive the round trip");
        /* canonical: writing what was read gives the same bytes */
        char *buf2 = NULL;
        size_t len2 = 0;
        f = open_memstream(&buf2, &len2);
        ccb_trace_write(&b, f);
        fclose(f);
        cr_assert_eq(len, len2);
        cr_assert_eq(memcmp(buf, buf2, len), 0);
        free(buf);
        free(buf2);
        ccb_trace_free(&a);
        ccb_trace_free(&b);
    }
}

Test(trace_format, written_file_has_the_recorder_layout) {
    ccb_trace t;
    ccb_trace_init(&t, "small");
    uint32_t a = ccb_trace_alloc(&t, 4096, 0);
    uint32_t b = ccb_trace_alloc(&t, 100, 2);
    ccb_trace_release(&t, a);
    ccb_trace_release(&t, b);
    cr_assert_eq(ccb_trace_analyze(&t, NULL, 0), 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ccb_trace_write(&t, f);
    fclose(f);
    cr_assert_str_eq(buf, "# ccalloc trace v3\n"
                          "seq,op,id,size,stream,domain,name\n"
                          "0,alloc,1,4096,0,0\n"
                          "1,alloc,2,100,2,0\n"
                          "2,free,1,4096,0,0\n"
                          "3,free,2,100,2,0\n");
    cr_assert_eq(t.peak_requested, 4196);
    cr_assert_eq(t.peak_rounded, 4096 + 512);
    cr_assert_eq(t.streams, 3);
    free(buf);
    ccb_trace_free(&t);
}

Test(trace_format, sections_have_their_own_ids) {
    const char *text = "# ccalloc trace v1\n"
                       "# source: pid 1, allocator 0x1\n"
                       "seq,op,id,size,stream\n"
                       "0,alloc,1,1000,0\n"
                       "# source: pid 1, allocator 0x2\n"
                       "seq,op,id,size,stream\n"
                       "0,alloc,1,2000,1\n"
                       "1,free,1,2000,1\n";
    ccb_trace t;
    char err[256] = "";
    cr_assert_eq(read_text(&t, text, err, sizeof err), 0, "%s", err);
    cr_assert_eq(t.slots, 2);
    cr_assert_eq(t.n, 3);
    cr_assert_eq(t.ev[2].slot, 1, "the free names the second section's id 1");
    cr_assert_eq(t.final_live, 1);
    cr_assert_eq(t.final_requested, 1000);
    cr_assert_eq(t.peak_requested, 3000);
    cr_assert(strstr(t.comments, "allocator 0x2") != NULL);
    ccb_trace_free(&t);
}

static void expect_error(const char *body, const char *needle) {
    char text[512];
    snprintf(text, sizeof text, "seq,op,id,size,stream\n%s", body);
    ccb_trace t;
    char err[256] = "";
    cr_assert_eq(read_text(&t, text, err, sizeof err), -1, "accepted: %s", body);
    cr_assert(strstr(err, needle) != NULL, "error '%s' should mention '%s'", err, needle);
    ccb_trace_free(&t);
}

Test(trace_format, malformed_lines_are_named) {
    expect_error("0,free,9,10,0\n", "line 2: free of id 9 which is not live");
    expect_error("0,alloc,1,10,0\n1,free,1,11,0\n", "size 11");
    expect_error("0,alloc,1,10,0\n1,alloc,1,10,0\n", "line 3: alloc of id 1 which is already live");
    expect_error("0,grab,1,10,0\n", "line 2: op 'grab' is not one of alloc, free (a v1 section)");
    expect_error("0,alloc,1,10\n", "expected 5 fields");
    expect_error("0,alloc,1,10,0,9\n", "expected 5 fields");
    expect_error("0,alloc,x,10,0\n", "bad number");
    expect_error("0,alloc,1,-5,0\n", "bad number");
    expect_error("0,alloc,1,10,300\n", "bad number");
}

Test(trace_format, empty_and_comment_only_files_are_empty_traces) {
    ccb_trace t;
    cr_assert_eq(read_text(&t, "# nothing\n\n", NULL, 0), 0);
    cr_assert_eq(t.n, 0);
    cr_assert_eq(t.peak_requested, 0);
    ccb_trace_free(&t);
}

/* An allocator on a simulated device of `capacity` bytes whose calls
 * CCALLOC_TRACE records into a fresh file named by `path` (a mkstemp
 * template, filled in); stop_recording destroys both and unsets it. */
static void start_recording(char *path, size_t capacity, cca_upstream **u, cca_allocator **a) {
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    unlink(path);
    setenv("CCALLOC_TRACE", path, 1);
    cr_assert_eq(cca_upstream_host_create(capacity, u), CCA_OK);
    cr_assert_eq(cca_create(NULL, *u, a), CCA_OK);
}

static void stop_recording(cca_allocator *a, cca_upstream *u) {
    cca_destroy(a);
    cca_upstream_destroy(u);
    unsetenv("CCALLOC_TRACE");
}

/* The recorder in allocator/src/observe/trace.c and this reader agree. */
Test(trace_format, reads_what_the_recorder_wrote) {
    char path[] = "/tmp/ccb_trace_XXXXXX";
    cca_upstream *u;
    cca_allocator *a;
    start_recording(path, (size_t)256 << 20, &u, &a);
    static const size_t sizes[] = {1, 512, 513, 4096, 1 << 20, (1 << 20) + 1, 12 << 20, 100};
    void *p[8];
    int s1 = 0; /* a second stream token */
    for (int i = 0; i < 8; i++)
        cr_assert_eq(cca_alloc(a, sizes[i], i == 7 ? (cca_stream)&s1 : NULL, &p[i]), CCA_OK);
    for (int i = 0; i < 8; i += 2)
        cca_free(a, p[i]);
    cr_assert_eq(cca_free(a, p[0]), CCA_ERR_INVALID_POINTER); /* not recorded */
    for (int i = 1; i < 8; i += 2)
        cca_free(a, p[i]);
    cca_stats st;
    cca_get_stats(a, &st);
    stop_recording(a, u);

    ccb_trace t;
    char err[256] = "";
    cr_assert_eq(ccb_trace_load(&t, path, err, sizeof err), 0, "%s", err);
    cr_assert_eq(t.allocs, 8);
    cr_assert_eq(t.frees, 8);
    cr_assert_eq(t.final_live, 0);
    for (int i = 0; i < 8; i++)
        cr_assert_eq(t.ev[i].size, sizes[i], "alloc %d: %llu", i, (unsigned long long)t.ev[i].size);
    cr_assert_eq(t.ev[7].stream, 1, "the second stream token is stream 1");
    cr_assert_eq(t.peak_requested, st.requested_bytes_peak);
    cr_assert(strstr(t.comments, "source: pid") != NULL);
    ccb_trace_free(&t);
    unlink(path);
}

/* A program with three domains, recorded, read and replayed: each domain's
 * release in the replay gives back exactly what that domain held in the
 * program (the same allocator, the same sequence), FORCE's dropped blocks
 * included, while the other domains stay. */
Test(trace_format, a_recorded_program_with_domains_replays_per_domain) {
    char path[] = "/tmp/ccb_trace_XXXXXX";
    cca_upstream *u;
    cca_allocator *a;
    start_recording(path, (size_t)1 << 30, &u, &a);
    cca_domain *d[3];
    size_t held[3];
    static const size_t sizes[] = {100, 3 << 20, 700, 9 << 20, 40 << 20, 5000};
    void *p[3][6];
    for (int k = 0; k < 3; k++) {
        char name[16];
        snprintf(name, sizeof name, "m%d", k);
        cr_assert_eq(cca_domain_create(a, name, &d[k]), CCA_OK);
    }
    for (int i = 0; i < 6; i++) /* interleaved: without domains they would share segments */
        for (int k = 0; k < 3; k++)
            cr_assert_eq(cca_alloc_in(a, d[k], sizes[i] + (size_t)k * 64, NULL, &p[k][i]), CCA_OK);
    for (int k = 0; k < 3; k++) {
        cca_domain_stats s;
        cr_assert_eq(cca_get_domain_stats(a, d[k], &s), CCA_OK);
        held[k] = s.reserved_bytes;
    }
    for (int i = 0; i < 6; i++)
        cca_free(a, p[1][i]);
    cr_assert_eq(cca_domain_release(a, d[1], 0, NULL), CCA_OK);
    for (int i = 0; i < 5; i++) /* one block left: FORCE drops it */
        cca_free(a, p[0][i]);
    cr_assert_eq(cca_domain_release(a, d[0], CCA_DOMAIN_FORCE, NULL), CCA_OK);
    for (int i = 0; i < 6; i++)
        cca_free(a, p[2][i]);
    cr_assert_eq(cca_domain_destroy(a, d[2], 0, NULL), CCA_OK);
    stop_recording(a, u);

    ccb_trace t;
    char err[256] = "";
    cr_assert_eq(ccb_trace_load(&t, path, err, sizeof err), 0, "%s", err);
    cr_assert_eq(t.ndomains, 4);
    cr_assert_eq(t.domain_releases, 3);
    cr_assert_eq(t.allocs, 18);
    cr_assert_eq(t.frees, 18, "FORCE's dropped block is a free in the file");
    ccb_replay_options o = {.device_bytes = (size_t)1 << 30, .reps = 1, .timeline_points = 10};
    ccb_result r;
    cr_assert_eq(ccb_replay(&t, "ccalloc-default", &o, &r), 0, "%s", r.why); /* the recording's config */
    cr_assert_eq(r.checkpoints_n, 3);
    static const int order[] = {1, 0, 2};
    static const char *const names[] = {"m0", "m1", "m2"};
    size_t left = held[0] + held[1] + held[2];
    for (int i = 0; i < 3; i++) {
        const ccb_checkpoint *c = &r.checkpoints[i];
        cr_assert_eq(c->op, CCB_DOMAIN_RELEASE);
        cr_assert_str_eq(ccb_domain_name(&t, c->mark), names[order[i]]);
        cr_assert_eq(c->returned, held[order[i]], "release %d: %zu returned, the program's domain held %zu", i,
                     c->returned, held[order[i]]);
        left -= held[order[i]];
        cr_assert_eq(c->reserved, left, "the others stay");
    }
    ccb_result_free(&r);
    cr_assert_eq(ccb_replay(&t, "ccalloc-shared", &o, &r), 0, "%s", r.why);
    cr_assert_lt(r.peak_reserved, held[0] + held[1] + held[2] + 1, "one pool");
    cr_assert_eq(r.checkpoints[0].returned, 0, "no domains: nothing back at a release");
    ccb_result_free(&r);
    ccb_trace_free(&t);
    unlink(path);
}

Test(trace_format, free_of_size_zero_is_rejected) {
    /* size 0 on a free means "take the alloc's" in memory; a file saying 0
     * for a 100-byte block is malformed, not a match */
    ccb_trace t;
    char err[256] = "";
    cr_assert_eq(read_text(&t, "seq,op,id,size,stream\n0,alloc,1,100,0\n1,free,1,0,0\n", err, sizeof err), -1);
    cr_assert(strstr(err, "line 3") && strstr(err, "size 0 on stream 0, allocated with 100"), "%s", err);
    ccb_trace_free(&t);
}

Test(trace_format, a_failed_read_leaves_nothing_allocated) {
    /* callers (ccbench info/replay) return on a failed read without freeing */
    ccb_trace t;
    char err[256] = "";
    cr_assert_eq(
        read_text(&t, "# provenance\nseq,op,id,size,stream\n0,alloc,1,100,0\n1,alloc,1,100,0\n", err, sizeof err), -1);
    cr_assert_null(t.ev, "events freed after the error");
    cr_assert_null(t.comments, "comments freed after the error");
    cr_assert_eq(t.n, 0);
    cr_assert_str_eq(t.name, "text", "the name survives for the message");
}

/* Whether s is well-formed UTF-8 to its end (common/ccai_utf8.h). */
static int utf8_whole(const char *s) {
    uint32_t cp;
    for (unsigned n; *s; s += n)
        if (!(n = ccai_utf8_decode((const unsigned char *)s, &cp)))
            return 0;
    return 1;
}

/* A trace is named after its file, less ".csv" or ".csv.gz", its first 63
 * bytes at most, cut between UTF-8 characters (docs/benchmarks.md: printable
 * UTF-8 is kept). */
static void load_named(const char *file, char *name, size_t len) {
    char dir[] = "/tmp/ccb_nameXXXXXX", path[512];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("seq,op,id,size,stream\n0,alloc,1,100,0\n1,free,1,100,0\n", f);
    cr_assert_eq(fclose(f), 0);
    ccb_trace t;
    char err[256] = "";
    cr_assert_eq(ccb_trace_load(&t, path, err, sizeof err), 0, "%s", err);
    snprintf(name, len, "%s", t.name);
    ccb_trace_free(&t);
    unlink(path);
    rmdir(dir);
}

Test(trace_format, a_long_file_name_is_cut_between_characters) {
    char file[128], want[128], name[128];
    memset(file, 'x', 62); /* "é" (c3 a9) across byte 63 of the name */
    strcpy(file + 62, "\xc3\xa9.csv");
    memset(want, 'x', 62);
    want[62] = '\0';
    load_named(file, name, sizeof name);
    cr_assert(utf8_whole(name), "half a character kept: ...%s", name + 58);
    cr_assert_str_eq(name, want);
}

Test(trace_format, a_long_file_name_loses_its_suffix_whole) {
    char file[128], want[128], name[128];
    memset(file, 'y', 60); /* 64 bytes with ".csv": the name is the 60 before it */
    strcpy(file + 60, ".csv");
    memset(want, 'y', 60);
    want[60] = '\0';
    load_named(file, name, sizeof name);
    cr_assert_str_eq(name, want, "a part of the suffix kept: ...%s", name + 56);
}

/* A renamed trace's name is cut for its suffix between UTF-8 characters. */
Test(trace_format, a_renamed_long_name_is_cut_between_characters) {
    char name[64];
    memset(name, 'x', 60); /* 63 bytes, "é" across byte 61, where "-2" goes */
    strcpy(name + 60, "\xc3\xa9x");
    ccb_trace t[2];
    ccb_trace_init(&t[0], name);
    ccb_trace_init(&t[1], name);
    ccb_name_traces(t, 2, NULL);
    cr_assert(utf8_whole(t[1].name), "half a character kept: ...%s", t[1].name + 56);
    cr_assert_eq(strncmp(t[1].name, name, 60), 0);
    cr_assert_str_eq(t[1].name + 60, "-2", "%s", t[1].name + 56);
}
