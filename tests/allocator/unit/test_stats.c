/*
 * test_stats.c — allocator/src/observe/stats.c: counters, fragmentation, peaks and
 * their reset, the text and JSON forms (parsed back with cJSON), the
 * snapshot, the invariant walker's argument checks, and the OOM line
 * (observe/oom.c).
 *
 * The suite's allocator has classic segments (expandable:0): the exact
 * numbers below are a classic segment's, each segment reserved whole; the
 * largest_free suite at the end covers expandable segments' mapped runs.
 */
#include "alloc_test_util.h"
#include "pages_rule.h"

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static cca_upstream *u;
static cca_allocator *a;

static void setup(void) {
    tu_host_allocator(1 * GiB, "expandable:0", &u, &a);
}
static void teardown(void) {
    tu_fixture_teardown(a, u);
}

TestSuite(stats, .init = setup, .fini = teardown);

Test(stats, fragmentation_is_exact) {
    cr_assert_eq(tu_stats(a).fragmentation, 0.0, "nothing cached");
    void *p[4];
    for (int i = 0; i < 4; i++)
        p[i] = tu_alloc(a, 512 * KiB, NULL); /* fills one 2M segment */
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.cached_bytes, 0);
    cr_assert_eq(s.fragmentation, 0.0);
    tu_free(a, p[0]);
    tu_free(a, p[2]);
    s = tu_stats(a);
    cr_assert_eq(s.cached_blocks, 2);
    cr_assert_eq(s.cached_bytes, 1 * MiB);
    cr_assert_eq(s.largest_free_block, 512 * KiB);
    cr_assert_eq(s.fragmentation, 0.5);
    /* a 20M segment in the large pool adds a 16M free tail */
    void *big = tu_alloc(a, 4 * MiB, NULL);
    s = tu_stats(a);
    cr_assert_eq(s.cached_bytes, 17 * MiB);
    cr_assert_eq(s.largest_free_block, 16 * MiB);
    cr_assert_eq(s.fragmentation, 1.0 - 16.0 / 17.0);
    tu_free(a, p[1]);
    s = tu_stats(a);
    cr_assert_eq(s.largest_free_block, 16 * MiB);
    cr_assert_eq(s.cached_bytes, 17 * MiB + 512 * KiB);
    cr_assert_eq(s.fragmentation, 1.0 - 16.0 / 17.5);
    tu_free(a, p[3]), tu_free(a, big);
    s = tu_stats(a);
    cr_assert_eq(s.fragmentation, 1.0 - 20.0 / 22.0);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    cr_assert_eq(tu_stats(a).fragmentation, 0.0);
}

Test(stats, peaks_follow_the_highest_value_and_reset) {
    void *p = tu_alloc(a, 3 * MiB, NULL), *q = tu_alloc(a, 5000, NULL);
    void *r = tu_alloc(a, 18 * MiB, NULL); /* the 17M tail is too small: an 18M segment */
    tu_free(a, r);
    tu_free(a, p);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.allocated_bytes, 5120);
    cr_assert_eq(s.allocated_bytes_peak, 21 * MiB + 5120);
    cr_assert_eq(s.requested_bytes, 5000);
    cr_assert_eq(s.requested_bytes_peak, 21 * MiB + 5000);
    cr_assert_eq(s.active_blocks, 1);
    cr_assert_eq(s.active_blocks_peak, 3);
    cr_assert_eq(s.reserved_bytes, 40 * MiB);
    cr_assert_eq(s.reserved_bytes_peak, 40 * MiB);
    cr_assert_eq(s.segments_peak, 3);
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    s = tu_stats(a);
    cr_assert_eq(s.reserved_bytes, 2 * MiB);
    cr_assert_eq(s.reserved_bytes_peak, 40 * MiB);
    cr_assert_eq(s.segments, 1);
    cr_assert_eq(s.segments_peak, 3, "the peak stays when segments go back");
    cca_reset_peak_stats(a);
    s = tu_stats(a);
    cr_assert_eq(s.allocated_bytes_peak, 5120);
    cr_assert_eq(s.requested_bytes_peak, 5000);
    cr_assert_eq(s.reserved_bytes_peak, 2 * MiB);
    cr_assert_eq(s.active_blocks_peak, 1);
    cr_assert_eq(s.segments_peak, 1);
    cr_assert_eq(s.alloc_calls, 3, "reset touches only peaks");
    cr_assert_eq(s.free_calls, 2);
    void *t = tu_alloc(a, 8192, NULL);
    s = tu_stats(a);
    cr_assert_eq(s.allocated_bytes_peak, 5120 + 8192);
    tu_free(a, t), tu_free(a, q);
}

Test(stats, call_counters_count_only_successful_calls) {
    void *p, *q = tu_alloc(a, 100, NULL);
    cr_assert_eq(cca_alloc(a, 0, NULL, &p), CCA_OK);
    cr_assert_eq(cca_free(a, NULL), CCA_OK);
    cr_assert_eq(cca_alloc(a, SIZE_MAX, NULL, &p), CCA_ERR_INVALID_ARGUMENT);
    tu_free(a, q);
    cr_assert_eq(cca_free(a, q), CCA_ERR_INVALID_POINTER);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.alloc_calls, 1);
    cr_assert_eq(s.free_calls, 1);
    cr_assert_eq(s.ooms, 0);
}

/* ---- text and JSON ----------------------------------------------------------------- */

static char *capture_output(cca_status (*write)(const void *, FILE *), const void *what) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    cr_assert_eq(write(what, f), CCA_OK, "%s", cca_last_error());
    fclose(f);
    return buf;
}

static cca_status write_stats_json(const void *s, FILE *f) {
    return cca_stats_write_json(s, f);
}
static cca_status write_stats_text(const void *s, FILE *f) {
    return cca_stats_print(s, f);
}
static cca_status write_snapshot(const void *al, FILE *f) {
    return cca_write_snapshot_json(al, f);
}

static double number(const cJSON *obj, const char *key) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
    cr_assert(cJSON_IsNumber(item), "JSON key '%s' missing or not a number", key);
    return item->valuedouble;
}

static const char *string(const cJSON *obj, const char *key) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
    cr_assert(cJSON_IsString(item), "JSON key '%s' missing or not a string", key);
    return item->valuestring;
}

/* Every field of s appears in obj with the same value. */
static void assert_json_stats(const cJSON *obj, const cca_stats *s) {
#define KEY(f) cr_assert_eq(number(obj, #f), (double)s->f, #f)
    KEY(allocated_bytes);
    KEY(allocated_bytes_peak);
    KEY(requested_bytes);
    KEY(requested_bytes_peak);
    KEY(reserved_bytes);
    KEY(reserved_bytes_peak);
    KEY(active_blocks);
    KEY(active_blocks_peak);
    KEY(pending_blocks);
    KEY(cached_blocks);
    KEY(cached_bytes);
    KEY(segments);
    KEY(segments_peak);
    KEY(largest_free_block);
    KEY(alloc_calls);
    KEY(free_calls);
    KEY(upstream_allocs);
    KEY(upstream_frees);
    KEY(alloc_retries);
    KEY(ooms);
    KEY(splits);
    KEY(merges);
    KEY(page_size);
    KEY(expandable_segments);
    KEY(address_space_bytes);
    KEY(mapped_bytes);
    KEY(vm_maps);
    KEY(vm_unmaps);
    KEY(pages_mapped);
    KEY(pages_unmapped);
    KEY(peak_holds);
    KEY(asleep_domains);
    KEY(host_bytes);
#undef KEY
    cr_assert_float_eq(number(obj, "fragmentation"), s->fragmentation, 1e-6);
    cJSON *backing = cJSON_GetObjectItemCaseSensitive(obj, "vm_backing");
    cr_assert(cJSON_IsString(backing), "vm_backing is a string");
    cr_assert_str_eq(backing->valuestring, s->vm_backing == CCA_VM_WHOLE_MAPS ? "whole_maps" : "pages");
    cr_assert_eq(cJSON_GetArraySize(obj), 35, "35 keys, no more");
}

Test(stats, stats_json_parses_and_matches_the_struct) {
    void *p = tu_alloc(a, 4 * MiB, NULL), *q = tu_alloc(a, 777, NULL), *r = tu_alloc(a, 1 * MiB, NULL);
    tu_free(a, q);
    cca_stats s = tu_stats(a);
    char *text = capture_output(write_stats_json, &s);
    cr_assert_eq(text[strlen(text) - 1], '\n');
    cJSON *json = cJSON_Parse(text);
    cr_assert_not_null(json, "not JSON: %s", text);
    assert_json_stats(json, &s);
    cJSON_Delete(json);
    free(text);
    text = capture_output(write_stats_text, &s);
    cr_assert(strstr(text, "allocated=") && strstr(text, "reserved=22.00 MiB") && strstr(text, "fragmentation="), "%s",
              text);
    free(text);
    tu_free(a, p), tu_free(a, r);
}

Test(stats, snapshot_is_valid_json_consistent_with_the_stats) {
    void *blocks[6];
    const size_t sizes[] = {1000, 64 * KiB, 3 * MiB, 12 * MiB, 512, 5 * MiB};
    for (int i = 0; i < 6; i++)
        blocks[i] = tu_alloc(a, sizes[i], NULL);
    tu_free(a, blocks[1]);
    tu_free(a, blocks[2]);
    cca_stats s = tu_stats(a);
    char *text = capture_output(write_snapshot, a);
    cJSON *json = cJSON_Parse(text);
    cr_assert_not_null(json, "not JSON: %s", text);
    cr_assert_str_eq(string(json, "upstream"), "host-simulated");
    const cJSON *config = cJSON_GetObjectItemCaseSensitive(json, "config");
    cr_assert_str_eq(string(config, "policy"), "growth");
    cr_assert_eq(number(config, "max_reserved"), 0);
    assert_json_stats(cJSON_GetObjectItemCaseSensitive(json, "stats"), &s);
    const cJSON *segments = cJSON_GetObjectItemCaseSensitive(json, "segments");
    cr_assert(cJSON_IsArray(segments));
    cr_assert_eq(cJSON_GetArraySize(segments), (int)s.segments);
    size_t reserved = 0, live = 0, live_bytes = 0, free_blocks = 0, free_bytes = 0, requested = 0, small = 0;
    const cJSON *seg;
    cJSON_ArrayForEach(seg, segments) {
        size_t size = (size_t)number(seg, "size"), offset = 0, seg_live = 0;
        reserved += size;
        const char *pool = string(seg, "pool");
        cr_assert(strcmp(pool, "small") == 0 || strcmp(pool, "medium") == 0 || strcmp(pool, "large") == 0, "pool %s",
                  pool);
        small += strcmp(pool, "small") == 0;
        cr_assert_eq(strncmp(string(seg, "address"), "0x", 2), 0);
        const cJSON *b;
        const char *prev_state = "";
        cJSON_ArrayForEach(b, cJSON_GetObjectItemCaseSensitive(seg, "blocks")) {
            cr_assert_eq((size_t)number(b, "offset"), offset, "blocks tile their segment");
            size_t bsize = (size_t)number(b, "size");
            const char *state = string(b, "state");
            if (strcmp(state, "free") == 0) {
                cr_assert_str_neq(prev_state, "free", "two free neighbours");
                free_blocks++;
                free_bytes += bsize;
                cr_assert_eq(number(b, "requested"), 0);
            } else {
                cr_assert_str_eq(state, "live");
                live++, seg_live++;
                live_bytes += bsize;
                requested += (size_t)number(b, "requested");
            }
            prev_state = state;
            offset += bsize;
        }
        cr_assert_eq(offset, size, "blocks reach the end of the segment");
        cr_assert_eq((size_t)number(seg, "live_blocks"), seg_live);
    }
    cr_assert_eq(reserved, s.reserved_bytes);
    cr_assert_eq(live, s.active_blocks);
    cr_assert_eq(live_bytes, s.allocated_bytes);
    cr_assert_eq(requested, s.requested_bytes);
    cr_assert_eq(free_blocks, s.cached_blocks);
    cr_assert_eq(free_bytes, s.cached_bytes);
    cr_assert_eq(small, 1);
    cJSON_Delete(json);
    free(text);
    for (int i = 0; i < 6; i++)
        if (i != 1 && i != 2)
            tu_free(a, blocks[i]);
}

Test(stats, greedy_snapshot_names_the_arena) {
    cca_allocator *g = tu_allocator(u, "policy:greedy,greedy_bytes:4M,max_reserved:1G");
    char *text = capture_output(write_snapshot, g);
    cJSON *json = cJSON_Parse(text);
    cr_assert_not_null(json, "%s", text);
    cr_assert_str_eq(string(cJSON_GetObjectItemCaseSensitive(json, "config"), "policy"), "greedy");
    cr_assert_eq(number(cJSON_GetObjectItemCaseSensitive(json, "config"), "max_reserved"), (double)GiB);
    const cJSON *seg = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(json, "segments"), 0);
    cr_assert_str_eq(string(seg, "pool"), "arena");
    cr_assert_eq(number(seg, "size"), 4.0 * MiB);
    cJSON_Delete(json);
    free(text);
    tu_destroy_clean(g, u);
}

Test(stats, empty_allocator_snapshot) {
    char *text = capture_output(write_snapshot, a);
    cJSON *json = cJSON_Parse(text);
    cr_assert_not_null(json, "%s", text);
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(json, "segments")), 0);
    cJSON_Delete(json);
    free(text);
}

Test(stats, writers_report_bad_arguments_and_write_errors) {
    cca_stats s = tu_stats(a);
    cr_assert_eq(cca_stats_print(NULL, stdout), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_stats_print(&s, NULL), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_stats_write_json(NULL, stdout), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_stats_write_json(&s, NULL), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_write_snapshot_json(NULL, stdout), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_write_snapshot_json(a, NULL), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_check_invariants(NULL), CCA_ERR_INVALID_ARGUMENT);
    FILE *ro = fopen("/dev/null", "r"); /* every write fails */
    cr_assert_not_null(ro);
    cr_assert_eq(cca_stats_print(&s, ro), CCA_ERR_IO);
    cr_assert_eq(cca_stats_write_json(&s, ro), CCA_ERR_IO);
    cr_assert_eq(cca_write_snapshot_json(a, ro), CCA_ERR_IO);
    fclose(ro);
    tu_check(a);
}

/* cca_stats_write_json takes any cca_stats, not only cca_get_stats's (a
 * program's difference of two, a zeroed one it fills): a fragmentation
 * that is no finite number is written as null, so the line stays JSON
 * (printf's "nan" and "inf" are not). Every other field is an integer. */
Test(stats, a_fragmentation_that_is_no_number_is_written_as_null) {
    cca_stats s = tu_stats(a);
    const double odd[] = {NAN, -NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        s.fragmentation = odd[i];
        char *text = capture_output(write_stats_json, &s);
        cJSON *json = cJSON_Parse(text);
        cr_assert_not_null(json, "not JSON: %s", text);
        cr_assert(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(json, "fragmentation")), "%s", text);
        cJSON_Delete(json);
        free(text);
    }
    s.fragmentation = 0.25; /* a number as ever */
    char *text = capture_output(write_stats_json, &s);
    cr_assert(strstr(text, "\"fragmentation\":0.250000,"), "%s", text);
    free(text);
}

/* Any finite fragmentation is written whole, however large: %.6f of
 * 1e300 is 308 characters. (It was cut at 31, a valid JSON number 1e270
 * times too small.) */
Test(stats, a_large_finite_fragmentation_is_written_whole) {
    cca_stats s = tu_stats(a);
    const double large[] = {1e300, -1e300, 1.7976931348623157e308};
    for (size_t i = 0; i < sizeof large / sizeof large[0]; i++) {
        s.fragmentation = large[i];
        char *text = capture_output(write_stats_json, &s);
        cJSON *json = cJSON_Parse(text);
        cr_assert_not_null(json, "not JSON: %s", text);
        const cJSON *frag = cJSON_GetObjectItemCaseSensitive(json, "fragmentation");
        cr_assert(cJSON_IsNumber(frag), "%s", text);
        cr_assert_eq(frag->valuedouble, large[i], "%g written as %s", large[i], text);
        cJSON_Delete(json);
        free(text);
    }
}

/* A sink whose first write fails and every later one succeeds (a disk
 * that was full and is not any more): *cookie counts the bytes taken. The
 * failure returns 0, as fopencookie(3) asks (never a negative value: see
 * cut_write in tests/allocator/random/test_snapshot_model.c). */
static ssize_t fails_once(void *cookie, const char *buf, size_t n) {
    (void)buf;
    size_t *taken = cookie;
    if (*taken == SIZE_MAX) {
        *taken = 0;
        errno = ENOSPC;
        return 0;
    }
    *taken += n;
    return (ssize_t)n;
}

/* A FILE whose error indicator an earlier write set: every writer says
 * CCA_ERR_IO though all of its own output went through (stdio's indicator
 * sticks until clearerr), as the header says; after clearerr, CCA_OK. */
Test(stats, writers_report_a_file_already_in_error_until_clearerr) {
    cca_stats s = tu_stats(a);
    size_t taken = SIZE_MAX;
    FILE *f = fopencookie(&taken, "w", (cookie_io_functions_t){.write = fails_once});
    cr_assert_not_null(f);
    fputs("x", f);
    cr_assert_neq(fflush(f), 0);
    cr_assert(ferror(f));
    cr_assert_eq(cca_stats_write_json(&s, f), CCA_ERR_IO);
    cr_assert_gt(taken, 0, "the output went through");
    cr_assert_eq(cca_stats_print(&s, f), CCA_ERR_IO);
    cr_assert_eq(cca_write_snapshot_json(a, f), CCA_ERR_IO);
    cr_assert_eq(cca_domain_stats_write_json(a, f), CCA_ERR_IO);
    cr_assert_eq(cca_write_snapshot_torch(a, 0, f), CCA_ERR_IO);
    clearerr(f);
    cr_assert_eq(cca_stats_write_json(&s, f), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_stats_print(&s, f), CCA_OK);
    cr_assert_eq(cca_write_snapshot_json(a, f), CCA_OK);
    cr_assert_eq(cca_domain_stats_write_json(a, f), CCA_OK);
    cr_assert_eq(cca_write_snapshot_torch(a, 0, f), CCA_OK);
    fclose(f);
}

Test(stats, status_strings_name_every_code) {
    const cca_status codes[] = {CCA_OK,
                                CCA_ERR_INVALID_ARGUMENT,
                                CCA_ERR_OUT_OF_MEMORY,
                                CCA_ERR_INVALID_POINTER,
                                CCA_ERR_UPSTREAM,
                                CCA_ERR_NO_DEVICE,
                                CCA_ERR_CONFIG,
                                CCA_ERR_NOT_READY,
                                CCA_ERR_LIVE_BLOCKS,
                                CCA_ERR_IO};
    const char *names[] = {"CCA_OK",
                           "CCA_ERR_INVALID_ARGUMENT",
                           "CCA_ERR_OUT_OF_MEMORY",
                           "CCA_ERR_INVALID_POINTER",
                           "CCA_ERR_UPSTREAM",
                           "CCA_ERR_NO_DEVICE",
                           "CCA_ERR_CONFIG",
                           "CCA_ERR_NOT_READY",
                           "CCA_ERR_LIVE_BLOCKS",
                           "CCA_ERR_IO"};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        const char *s = cca_status_string(codes[i]);
        cr_assert_eq(strncmp(s, names[i], strlen(names[i])), 0, "%s", s);
        cr_assert_eq(s[strlen(names[i])], ':', "%s", s);
    }
    cr_assert_str_eq(cca_status_string((cca_status)1234), "unknown cca_status");
}

static cca_status plain_alloc(void *ctx, size_t size, void **ptr) {
    (void)ctx;
    *ptr = aligned_alloc(CCA_ALIGNMENT, size);
    return *ptr ? CCA_OK : CCA_ERR_OUT_OF_MEMORY;
}
static cca_status plain_free(void *ctx, void *ptr, size_t size) {
    (void)ctx, (void)size;
    free(ptr);
    return CCA_OK;
}

Test(stats, snapshot_escapes_the_upstream_name) {
    /* a quote, a backslash, a newline, a tab and a control character: each
     * would end the string or be invalid JSON if written raw */
    const char *name = "q\"b\\n\nt\tc\x01z";
    cca_upstream_ops ops = {.alloc = plain_alloc, .free = plain_free, .name = name};
    cca_upstream *cu;
    cr_assert_eq(cca_upstream_custom_create(&ops, NULL, &cu), CCA_OK);
    cca_allocator *ca = tu_allocator(cu, NULL);
    void *p = tu_alloc(ca, 4096, NULL);
    char *text = capture_output(write_snapshot, ca);
    cJSON *json = cJSON_Parse(text);
    cr_assert_not_null(json, "snapshot is not valid JSON:\n%s", text);
    cr_assert_str_eq(string(json, "upstream"), name);
    cr_assert_not_null(strstr(text, "\\u0001"), "control characters as \\u00XX: %s", text);
    cJSON_Delete(json);
    free(text);
    tu_free(ca, p);
    tu_teardown(ca, cu);
}

/* A message too long for the per-thread buffer (1024 bytes) is cut and says
 * so: it ends in "..." (status.c). So do log lines. A message that fits is
 * never marked. */
Test(stats, long_messages_are_cut_with_an_ellipsis) {
    char text[3000];
    memset(text, 'x', sizeof text - 1);
    text[sizeof text - 1] = '\0';
    size_t v;
    cr_assert_eq(cca_parse_size(text, &v), CCA_ERR_INVALID_ARGUMENT);
    const char *m = cca_last_error();
    size_t n = strlen(m);
    cr_assert_eq(n, 1023, "the buffer is used to its end: %zu", n);
    cr_assert_eq(strncmp(m, "bad size 'xxx", 13), 0, "%.20s", m);
    cr_assert_str_eq(m + n - 4, "x...", "a cut message ends in '...'");
    cr_assert_eq(cca_parse_size("12Q", &v), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_str_eq(cca_last_error(), "bad size '12Q' (expected e.g. 512M, 1.5G, 4096)");

    /* a log line: a bad CCALLOC_CONF with a long key is logged, cut */
    char conf[700];
    memset(conf, 'k', sizeof conf);
    memcpy(conf + sizeof conf - 3, ":1", 3);
    setenv("CCALLOC_CONF", conf, 1);
    tu_log_capture log = {0};
    cca_set_log_callback(tu_capture_log, &log);
    cca_allocator *b = NULL;
    cca_status st = cca_create(NULL, u, &b);
    cca_set_log_callback(NULL, NULL);
    unsetenv("CCALLOC_CONF");
    cr_assert_eq(st, CCA_OK, "%s", cca_last_error());
    cr_assert_eq(log.lines, 1);
    n = strlen(log.last);
    cr_assert_eq(strncmp(log.last, "CCALLOC_CONF: unknown key 'kkk", 30), 0, "%.40s", log.last);
    cr_assert_str_eq(log.last + n - 4, "k...", "%s", log.last + n - 20);
    cca_destroy(b);
}

/* The snapshot is JSON, so UTF-8 whatever the upstream's name: well-formed
 * sequences kept, a sequence the name's 31-byte cut splits dropped, and any
 * other byte >= 0x80 written as '?'. Checked with the C library's own
 * decoder (mbstowcs in a UTF-8 locale). */
static bool valid_utf8(const char *s) {
    cr_assert_not_null(setlocale(LC_CTYPE, "C.UTF-8"), "no C.UTF-8 locale");
    return mbstowcs(NULL, s, 0) != (size_t)-1;
}

static cca_status nm_alloc(void *ctx, size_t size, void **p) {
    return cca_upstream_alloc(ctx, size, p);
}
static cca_status nm_free(void *ctx, void *p, size_t size) {
    return cca_upstream_free(ctx, p, size);
}

Test(stats, snapshot_is_utf8_whatever_the_upstream_name) {
    const char *names[] = {
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\xc3\xa9",  /* 'é' cut by the 31-byte name: dropped */
        "gpu\xc3\xa9\xe2\x82\xac",                  /* 'é' and '€': kept */
        "bad\xff\xfe\x80 lone \xc3 cont",          /* bytes no UTF-8 has, a lone lead byte */
        "surrogate \xed\xa0\x80 overlong \xc0\xaf", /* forbidden forms */
    };
    const char *kept[] = {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"", "gpu\xc3\xa9\xe2\x82\xac\"", "bad??? lone ? cont\"",
                          "surrogate ??? overlong ??\""};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        cca_upstream *host = NULL, *u = NULL;
        cr_assert_eq(cca_upstream_host_create(16 * MiB, &host), CCA_OK);
        cca_upstream_ops ops = {.alloc = nm_alloc, .free = nm_free, .name = names[i]};
        cr_assert_eq(cca_upstream_custom_create(&ops, host, &u), CCA_OK);
        cca_allocator *al = tu_allocator(u, "");
        void *p = tu_alloc(al, 4096, NULL);
        char *json = capture_output(write_snapshot, al);
        cr_assert(valid_utf8(json), "name %zu: not UTF-8: %s", i, json);
        cr_assert_not_null(strstr(json, kept[i]), "name %zu written as expected (%s)", i, json);
        cJSON *root = cJSON_Parse(json);
        cr_assert_not_null(root, "name %zu: not JSON", i);
        cJSON_Delete(root);
        free(json);
        tu_free(al, p);
        tu_destroy_clean(al, u);
        cca_upstream_destroy(u);
        cca_upstream_destroy(host);
    }
}

/* ---- largest_free_block against every block ---------------------------------------- *
 * The stats read largest_free_block from the free indexes, largest blocks
 * first, and stop at the first block no larger than the longest mapped run
 * found (core/free_index.c). Here it is computed the long way, from the
 * snapshot, which lists every block and every segment's mapped runs: each
 * free block's longest stretch inside a run (its size in a classic
 * segment), the largest over the allocator and over each domain, and the
 * mapped free bytes that cached_bytes counts. The allocator's figures (stats,
 * per-domain stats, the snapshot's own stats and domain list) must equal it
 * after every step of random sequences on expandable allocators (streams,
 * domains, arenas, trims that leave large blocks mostly unmapped, sizes that
 * tie), and on classic ones. */

#define LF_DOMAINS 3 /* the default domain, "d1", "d2": indexes 0, 1, 2 in the snapshot */
#define LF_SLOTS 64

typedef struct lf_ref {
    size_t largest, cached, d_largest[LF_DOMAINS], d_cached[LF_DOMAINS];
    size_t above;      /* free blocks larger than `largest`: what a walk must pass */
    bool above_tie;    /* two of them of one size */
    bool top_unmapped; /* the largest free block is not wholly mapped */
} lf_ref;

/* Of [off, off + size): the longest stretch inside one of `runs` (maximal
 * runs, so no stretch spans two) and the bytes inside them all. */
static void lf_block_in_runs(const cJSON *runs, size_t off, size_t size, size_t *longest, size_t *mapped) {
    *longest = *mapped = 0;
    const cJSON *run;
    cJSON_ArrayForEach(run, runs) {
        size_t lo = (size_t)cJSON_GetArrayItem(run, 0)->valuedouble;
        size_t hi = lo + (size_t)cJSON_GetArrayItem(run, 1)->valuedouble;
        lo = lo > off ? lo : off;
        hi = hi < off + size ? hi : off + size;
        if (hi > lo) {
            *longest = hi - lo > *longest ? hi - lo : *longest;
            *mapped += hi - lo;
        }
    }
}

#define LF_SIZES 4096
static lf_ref lf_reference(const cJSON *json) {
    lf_ref r;
    memset(&r, 0, sizeof r);
    static size_t size[LF_SIZES], run[LF_SIZES];
    size_t n = 0;
    const cJSON *seg;
    cJSON_ArrayForEach(seg, cJSON_GetObjectItemCaseSensitive(json, "segments")) {
        size_t d = (size_t)number(seg, "domain_index");
        cr_assert_lt(d, LF_DOMAINS);
        bool expandable = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(seg, "expandable"));
        const cJSON *runs = cJSON_GetObjectItemCaseSensitive(seg, "mapped"), *b;
        cJSON_ArrayForEach(b, cJSON_GetObjectItemCaseSensitive(seg, "blocks")) {
            if (strcmp(string(b, "state"), "free") != 0)
                continue;
            size_t off = (size_t)number(b, "offset"), bs = (size_t)number(b, "size"), longest = bs, mapped = bs;
            if (expandable)
                lf_block_in_runs(runs, off, bs, &longest, &mapped);
            cr_assert_lt(n, LF_SIZES);
            size[n] = bs, run[n] = longest, n++;
            r.largest = longest > r.largest ? longest : r.largest;
            r.d_largest[d] = longest > r.d_largest[d] ? longest : r.d_largest[d];
            r.cached += mapped;
            r.d_cached[d] += mapped;
        }
    }
    size_t top = 0;
    for (size_t i = 0; i < n; i++) {
        if (size[i] > r.largest) {
            r.above++;
            for (size_t j = 0; j < i; j++)
                r.above_tie |= size[j] == size[i];
        }
        if (size[i] > size[top] || (size[i] == size[top] && run[i] < run[top]))
            top = i;
    }
    r.top_unmapped = n && run[top] < size[top];
    return r;
}

static double lf_fragmentation(size_t largest, size_t cached) {
    return cached ? 1.0 - (double)largest / (double)cached : 0.0;
}

/* The allocator's figures against the reference; returns the reference. */
static lf_ref lf_agree(const cca_allocator *al, cca_domain *const dom[LF_DOMAINS], const char *what) {
    char *text = capture_output(write_snapshot, al);
    cJSON *json = cJSON_Parse(text);
    cr_assert_not_null(json, "%s: not JSON", what);
    lf_ref r = lf_reference(json);
    cca_stats s = tu_stats(al);
    cr_assert_eq(s.largest_free_block, r.largest, "%s: largest_free_block %zu, the blocks say %zu", what,
                 s.largest_free_block, r.largest);
    cr_assert_eq(s.cached_bytes, r.cached, "%s: cached_bytes %zu, the blocks say %zu", what, s.cached_bytes, r.cached);
    cr_assert_eq(s.fragmentation, lf_fragmentation(r.largest, r.cached), "%s: fragmentation", what);
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(json, "stats");
    cr_assert_eq((size_t)number(js, "largest_free_block"), r.largest, "%s: the snapshot's stats", what);
    const cJSON *jd = cJSON_GetObjectItemCaseSensitive(json, "domains");
    for (int k = 0; k < LF_DOMAINS; k++) {
        if (k > 0 && !dom[k])
            continue;
        cca_domain_stats ds;
        cr_assert_eq(cca_get_domain_stats(al, dom[k], &ds), CCA_OK, "%s", cca_last_error());
        cr_assert_eq(ds.largest_free_block, r.d_largest[k], "%s: domain %d: largest_free_block %zu, the blocks say %zu",
                     what, k, ds.largest_free_block, r.d_largest[k]);
        cr_assert_eq(ds.cached_bytes, r.d_cached[k], "%s: domain %d: cached_bytes %zu, the blocks say %zu", what, k,
                     ds.cached_bytes, r.d_cached[k]);
        cr_assert_eq(ds.fragmentation, lf_fragmentation(r.d_largest[k], r.d_cached[k]), "%s: domain %d", what, k);
        const cJSON *e = cJSON_GetArrayItem(jd, k);
        cr_assert_not_null(e, "%s: domain %d missing from the snapshot", what, k);
        cr_assert_eq((size_t)number(e, "largest_free_block"), r.d_largest[k], "%s: the snapshot's domain %d", what, k);
    }
    cJSON_Delete(json);
    free(text);
    return r;
}

typedef struct lf_slot {
    void *p;
    int domain;
} lf_slot;

/* Sizes that tie (one size, several pages and a bit), of whole pages, small
 * and log-uniform up to 4 MiB. */
static size_t lf_size(uint64_t *rng, size_t page) {
    switch (tu_rand(rng) % 5) {
    case 0: return 3 * page + 512;
    case 1: return (1 + tu_rand(rng) % 40) * page;
    case 2: return 512 + tu_rand(rng) % (64 * KiB);
    default: {
        unsigned bits = 9 + (unsigned)(tu_rand(rng) % 13); /* 512 B .. 4 MiB */
        size_t lo = (size_t)1 << bits;
        return lo + (size_t)(tu_rand(rng) % lo);
    }
    }
}

/* `steps` random steps on an allocator made with conf over u (page: its
 * granularity, or a size scale for classic segments), checked after each;
 * domains unless greedy. no_least: the growth rule's least step off (the
 * test hook, pages_rule.h; the cap the default 64 MiB). */
static void lf_random(cca_upstream *up, const char *conf, bool no_least, size_t page, bool domains, uint64_t seed,
                      int steps) {
    cca_allocator *al = tu_allocator(up, conf);
    if (no_least)
        ccai_pages_rule_set(al, 0, 64 * MiB, 128 * MiB);
    const char *rule = no_least ? " (no least step)" : "";
    cca_domain *dom[LF_DOMAINS] = {NULL};
    if (domains) {
        cr_assert_eq(cca_domain_create(al, "d1", &dom[1]), CCA_OK);
        cr_assert_eq(cca_domain_create(al, "d2", &dom[2]), CCA_OK);
    }
    const cca_stream streams[3] = {NULL, (cca_stream)0x100, (cca_stream)0x200};
    lf_slot slots[LF_SLOTS] = {{0}};
    uint64_t rng = seed;
    size_t lost = 0, deep = 0, ties = 0, trims = 0;
    for (int step = 0; step < steps; step++) {
        char what[128];
        snprintf(what, sizeof what, "%s%s, seed %llu, step %d", conf, rule, (unsigned long long)seed, step);
        uint64_t r = tu_rand(&rng) % 1000;
        int k = (int)(tu_rand(&rng) % LF_SLOTS), d = domains ? (int)(tu_rand(&rng) % LF_DOMAINS) : 0;
        if (r < 20) { /* trim to a random keep: large free blocks lose their middle pages */
            cca_stats s = tu_stats(al);
            size_t keep = s.reserved_bytes ? (size_t)(tu_rand(&rng) % (s.reserved_bytes + 1)) : 0;
            cr_assert_eq(cca_trim(al, keep, NULL), CCA_OK, "%s: %s", what, cca_last_error());
            trims++;
        } else if (r < 24) {
            cr_assert_eq(cca_empty_cache(al, NULL), CCA_OK, "%s: %s", what, cca_last_error());
            trims++;
        } else if (r < 28 && domains) { /* a footprint arena: a pool of its own */
            cca_status st = cca_domain_reserve(al, dom[d], (1 + tu_rand(&rng) % 64) * page);
            cr_assert(st == CCA_OK || st == CCA_ERR_INVALID_ARGUMENT || st == CCA_ERR_OUT_OF_MEMORY, "%s: %s", what,
                      cca_status_string(st));
        } else if (r < 30 && domains && d > 0) { /* the domain goes back whole, live blocks and all */
            cr_assert_eq(cca_domain_release(al, dom[d], CCA_DOMAIN_FORCE, NULL), CCA_OK, "%s: %s", what,
                         cca_last_error());
            for (int i = 0; i < LF_SLOTS; i++)
                if (slots[i].p && slots[i].domain == d)
                    slots[i].p = NULL;
        } else if (!slots[k].p) {
            void *p = NULL;
            cca_status st = cca_alloc_in(al, dom[d], lf_size(&rng, page), streams[tu_rand(&rng) % 3], &p);
            cr_assert(st == CCA_OK || st == CCA_ERR_OUT_OF_MEMORY, "%s: %s", what, cca_status_string(st));
            if (st == CCA_OK)
                slots[k] = (lf_slot){p, d};
        } else {
            tu_free(al, slots[k].p);
            slots[k].p = NULL;
        }
        lf_ref ref = lf_agree(al, dom, what);
        lost += ref.top_unmapped;
        deep += ref.above >= 3;
        ties += ref.above_tie;
    }
    cr_log_info("%s%s: %zu steps where the largest free block was not wholly mapped, %zu with 3+ blocks above the "
                "answer, %zu with ties above it, %zu trims",
                conf, rule, lost, deep, ties, trims);
    if (page && strstr(conf, "expandable:1")) { /* the cases the early stop must get right did occur */
        cr_assert_gt(lost, (size_t)steps / 10, "%s: the largest block lost only %zu times", conf, lost);
        cr_assert_gt(deep, (size_t)steps / 20, "%s: only %zu steps with 3+ blocks above the answer", conf, deep);
        cr_assert(ties > 0 || !domains, "%s: no tie above the answer", conf); /* greedy: one arena */
    }
    for (int i = 0; i < LF_SLOTS; i++)
        if (slots[i].p)
            tu_free(al, slots[i].p);
    cr_assert_eq(cca_empty_cache(al, NULL), CCA_OK);
    lf_agree(al, dom, "emptied");
    tu_destroy_clean(al, up);
}

#define LF_PG ((size_t)64 * KiB)

Test(largest_free, expandable_64k_pages_matches_every_block, .timeout = 120) {
    cca_upstream *up = tu_vm_device(96 * MiB, LF_PG);
    lf_random(up, "expandable:1,log_oom:0", true, LF_PG, true, 0x5eed1ull, 2500);
    lf_random(up, "expandable:1,log_oom:0", false, LF_PG, true, 0x5eed2ull, 2500);
    cca_upstream_destroy(up);
}

Test(largest_free, expandable_small_max_64k_matches_every_block, .timeout = 120) {
    /* small_max 64 KiB: nearly every request shares the large range, many blocks between page edges */
    cca_upstream *up = tu_vm_device(96 * MiB, LF_PG);
    lf_random(up, "expandable:1,log_oom:0,small_max:64K", true, LF_PG, true, 0x5eed3ull, 2500);
    cca_upstream_destroy(up);
}

Test(largest_free, expandable_2m_pages_and_greedy_match_every_block, .timeout = 120) {
    cca_upstream *up = tu_vm_device(256 * MiB, 2 * MiB);
    lf_random(up, "expandable:1,log_oom:0", false, 2 * MiB, true, 0x5eed4ull, 1500);
    cca_upstream_destroy(up);
    up = tu_vm_device(96 * MiB, LF_PG);
    lf_random(up, "expandable:1,log_oom:0,policy:greedy,greedy_bytes:64M", false, LF_PG, false, 0x5eed5ull, 1500);
    cca_upstream_destroy(up);
}

Test(largest_free, classic_segments_match_every_block, .timeout = 120) {
    cca_upstream *up = NULL;
    cr_assert_eq(cca_upstream_host_create(256 * MiB, &up), CCA_OK);
    lf_random(up, "log_oom:0", false, LF_PG, true, 0x5eed6ull, 1500);
    cca_upstream_destroy(up);
}

/* The cases by hand, in one expandable range of 64 KiB pages (sizes above
 * small_max, so every block shares the large range; nothing mapped ahead):
 *
 *   X1 (64 pages) | L | X2 | L | X3 | ... | L | X21 | L | tail
 *
 * with X2..X21 of one size (24 pages) and L live (17.5 pages: the Xs start
 * in the middle of pages). Freed and trimmed, every X keeps only the part
 * of a page it shares with an L: X1 (largest) has nothing mapped. */
Test(largest_free, trimmed_largest_block_loses_to_a_smaller_mapped_one) {
    const size_t P = LF_PG, X1 = 64 * P, X = 24 * P, L = 17 * P + P / 2;
    enum { NX = 20 };
    cca_upstream *up = tu_vm_device(128 * MiB, P);
    cca_allocator *al = tu_allocator(up, "expandable:1,log_oom:0,expandable_ahead:0");
    cca_domain *none[LF_DOMAINS] = {NULL};
    void *x1 = tu_alloc(al, X1, NULL), *x[NX], *l[NX + 1];
    l[0] = tu_alloc(al, L, NULL);
    for (int i = 0; i < NX; i++) {
        x[i] = tu_alloc(al, X, NULL);
        l[i + 1] = tu_alloc(al, L, NULL);
    }
    cr_assert_eq((uintptr_t)x[NX - 1] - (uintptr_t)x1, X1 + L + (NX - 1) * (X + L), "one range, in order");
    tu_free(al, x1);
    for (int i = 0; i < NX; i++)
        tu_free(al, x[i]);
    /* all mapped: X1 wins */
    lf_ref r = lf_agree(al, none, "freed");
    cr_assert_eq(r.largest, X1);
    cr_assert_eq(tu_stats(al).largest_free_block, X1);
    /* trimmed: each X keeps the half page it shares with the L before or
     * after it, X1 nothing (it starts the range and ends on a page) */
    cr_assert_eq(cca_empty_cache(al, NULL), CCA_OK);
    r = lf_agree(al, none, "trimmed");
    cr_assert_eq(r.largest, P / 2, "the trapped half pages");
    cr_assert(r.top_unmapped && r.above >= NX + 1);
    /* the lowest X mapped again (best fit takes the lowest address among
     * ties), freed: it wins over X1 and the 19 other Xs of its size, all
     * larger than its run or as large, which the walk meets first */
    void *again = tu_alloc(al, X, NULL);
    cr_assert_eq(again, x[0]);
    tu_free(al, again);
    r = lf_agree(al, none, "the lowest X mapped");
    cr_assert_eq(r.largest, X);
    cr_assert(!r.above_tie && r.above == 2, "X1 and the tail are larger; 19 ties of X's size");
    cca_stats s = tu_stats(al);
    cr_assert_eq(s.largest_free_block, X);
    cr_assert_eq(s.fragmentation, 1.0 - (double)X / (double)s.cached_bytes);
    cca_domain_stats ds;
    cr_assert_eq(cca_get_domain_stats(al, NULL, &ds), CCA_OK);
    cr_assert_eq(ds.largest_free_block, X);
    /* part of X1 mapped: a larger block partly mapped beats X */
    void *part = tu_alloc(al, 40 * P, NULL);
    cr_assert_eq(part, x1, "best fit: only X1 holds 40 pages");
    tu_free(al, part);
    r = lf_agree(al, none, "40 pages of X1 mapped");
    cr_assert_eq(r.largest, 40 * P);
    cr_assert_eq(tu_stats(al).largest_free_block, 40 * P);
    /* trimmed again, and the highest X freed last of all: a tie met first */
    cr_assert_eq(cca_empty_cache(al, NULL), CCA_OK);
    void *hi = NULL;
    for (int i = 0; i < NX; i++) { /* take every X (lowest first), keep the highest */
        void *p = tu_alloc(al, X, NULL);
        cr_assert_eq(p, x[i]);
        if (i == NX - 1)
            hi = p;
    }
    for (int i = 0; i < NX - 1; i++)
        tu_free(al, x[i]);
    cr_assert_eq(cca_empty_cache(al, NULL), CCA_OK); /* the 19 lose their middle pages; the highest is live */
    tu_free(al, hi);
    r = lf_agree(al, none, "the highest X mapped");
    cr_assert_eq(r.largest, X);
    cr_assert_eq(tu_stats(al).largest_free_block, X);
    for (int i = 0; i <= NX; i++)
        tu_free(al, l[i]);
    lf_agree(al, none, "all free");
    tu_empty_all(al, up);
    lf_agree(al, none, "emptied");
    tu_destroy_clean(al, up);
    cca_upstream_destroy(up);
}

/* ---- the OOM line (allocator/src/observe/oom.c) ---------------------------- */

/* A request refused with log_oom on: one line naming the request (its bytes
 * and their rounding to 512), its stream, what the allocator reserves and
 * hands out, its largest free block, the device's free memory ("unknown of
 * ?" when the device cannot say), the policy and whether max_reserved is
 * set; and the thread's message stays the refusal's, whatever the line's
 * own call to the device said. The figures are cca_get_stats' and the
 * device's mem_info, taken the moment before. */
static void oom_line(const char *conf, size_t request, bool mem_info_fails, const char *why) {
    cca_host_options ho = {.capacity = 64 * MiB};
    cca_upstream *inner, *up;
    cr_assert_eq(cca_upstream_host_create_with(&ho, &inner), CCA_OK);
    tu_faulty f;
    up = tu_faulty_create(&f, inner, "fx", false);
    cca_config c;
    cca_config_default(&c);
    cr_assert_eq(cca_config_parse(&c, conf), CCA_OK, "%s", cca_last_error());
    cca_allocator *b;
    cr_assert_eq(cca_create(&c, up, &b), CCA_OK, "%s", cca_last_error());
    void *p = tu_alloc(b, 3 * MiB, NULL), *q = tu_alloc(b, 1 * MiB, NULL);
    tu_free(b, q); /* a free block beside the live one */
    cca_stats st = tu_stats(b);
    size_t dev_free = 0, dev_total = 0;
    cr_assert_eq(cca_upstream_mem_info(up, &dev_free, &dev_total), CCA_OK);
    cr_assert(st.reserved_bytes != st.allocated_bytes && st.largest_free_block > 0, "figures that tell apart");
    char req[32], res[32], alloc[32], big[32], devfree[32] = "unknown", total[32] = "?", want[512];
    if (!mem_info_fails) {
        cca_format_bytes(dev_free, devfree, sizeof devfree);
        cca_format_bytes(dev_total, total, sizeof total);
    }
    snprintf(want, sizeof want,
             "out of memory: requested %s (%zu B rounded to %zu) on stream 0x51; reserved %s, allocated %s, "
             "largest free block %s, device free %s of %s (policy growth%s)",
             cca_format_bytes(request, req, sizeof req), request, (request + 511) / 512 * 512,
             cca_format_bytes(st.reserved_bytes, res, sizeof res),
             cca_format_bytes(st.allocated_bytes, alloc, sizeof alloc),
             cca_format_bytes(st.largest_free_block, big, sizeof big), devfree, total,
             strstr(conf, "max_reserved") ? ", max_reserved set" : "");
    f.fail_mem_info = mem_info_fails;
    tu_log_capture log = {0};
    cca_set_log_callback(tu_capture_log, &log);
    void *r = NULL;
    cr_assert_eq(cca_alloc(b, request, (cca_stream)0x51, &r), CCA_ERR_OUT_OF_MEMORY);
    cca_set_log_callback(NULL, NULL);
    cr_expect_eq(strncmp(cca_last_error(), why, strlen(why)), 0, "%s: the refusal's message: %s", conf,
                 cca_last_error());
    f.fail_mem_info = false;
    cr_expect_eq(log.lines, 1, "%s", conf);
    cr_expect_str_eq(log.last, want, "%s", conf);
    cr_expect_eq(tu_stats(b).ooms, st.ooms + 1);
    tu_free(b, p);
    cr_assert_eq(cca_destroy(b), CCA_OK);
    cca_upstream_destroy(up);
    cca_upstream_destroy(inner);
}

Test(stats, the_oom_line_says_exactly_what_was_refused_and_what_was_held) {
    oom_line("log_oom:1,expandable:0,max_reserved:32M", 40 * MiB + 1, false, "cca_alloc: 41943041 bytes need a");
    oom_line("log_oom:1,expandable:0", 100 * MiB + 1, false, "cca_alloc: 104857601 bytes need a");
    oom_line("log_oom:1,expandable:0", 100 * MiB + 1, true, "cca_alloc: 104857601 bytes need a");
    oom_line("log_oom:1", 100 * MiB + 1, true, "cca_alloc: 104857601 bytes need a");
}
