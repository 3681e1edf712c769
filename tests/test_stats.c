/*
 * test_stats.c — allocator/src/stats.c: counters, fragmentation, peaks and
 * their reset, the text and JSON forms (parsed back with cJSON), the
 * snapshot, and the invariant walker's argument checks.
 */
#include "alloc_test_util.h"

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <locale.h>
#include <stdlib.h>
#include <string.h>

static cca_upstream *u;
static cca_allocator *a;

static void setup(void) {
    tu_host_allocator(1 * GiB, NULL, &u, &a);
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
#undef KEY
    cr_assert_float_eq(number(obj, "fragmentation"), s->fragmentation, 1e-6);
    cr_assert_eq(cJSON_GetArraySize(obj), 31, "31 keys, no more");
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
