/*
 * test_api_contract.c — allocator/include/ccalloc.h: the public API's error paths held to what ccalloc.h
 * and docs/allocator.md promise.
 *
 * For every public function: each NULL argument, each documented error code,
 * each "nothing changes" claim (the whole cca_stats / cca_upstream_stats /
 * cca_config compared before and after, not a field or two), out-parameters
 * on failure (set, cleared or untouched as documented), and the message: a
 * failing call leaves a non-empty cca_last_error() naming the function (or
 * the key / pointer / size, as the header says), and a call that succeeds
 * leaves the caller's message as it was.
 *
 * Host malloc failures are injected as in test_domain_hostile.c: the suite is
 * linked with --wrap=malloc,calloc,realloc,aligned_alloc (tests/allocator/allocator.cmake)
 * and hm_arm(n) fails the n-th call from now, once.
 */
#include "source_dir.h" /* tests/support */
#include "alloc_test_util.h"
#include "malloc_fault.h"

#include <criterion/criterion.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* host malloc failures (malloc_fault.h): hm_arm(n) fails the n-th
 * allocation from now, once; hm_disarm says whether it happened */
static void hm_arm(long nth) {
    tu_malloc_arm(nth, false);
}
static bool hm_disarm(void) {
    return tu_malloc_disarm() != 0;
}

/* ---- helpers -------------------------------------------------------------- */

#define SENTINEL ((void *)0x5a5a5a5a)
#define S1 ((cca_stream)0x1000)

/* A failed call: exactly `want`, and a non-empty message containing `needle`
 * (the function's name, or the key / size the header says it names). */
#define EXPECT_FAIL(call, want, needle)                                                                        \
    do {                                                                                                       \
        cca_clear_error();                                                                                     \
        cca_status st_ = (call);                                                                               \
        cr_assert_eq(st_, (want), "%s: %s, expected %s (%s)", #call, cca_status_string(st_),                   \
                     cca_status_string(want), cca_last_error());                                               \
        cr_assert_neq(cca_last_error()[0], '\0', "%s: failed with an empty message", #call);                  \
        cr_assert_not_null(strstr(cca_last_error(), (needle)), "%s: message '%s' does not name '%s'", #call,   \
                           cca_last_error(), (needle));                                                        \
    } while (0)

/* A call that succeeds leaves the caller's message as it was. */
#define MARK "caller's own message"
#define EXPECT_OK_KEEPS_MESSAGE(call)                                                                           \
    do {                                                                                                       \
        cca_set_error(CCA_ERR_IO, MARK);                                                                       \
        cca_status st_ = (call);                                                                               \
        cr_assert_eq(st_, CCA_OK, "%s: %s (%s)", #call, cca_status_string(st_), cca_last_error());             \
        cr_assert_str_eq(cca_last_error(), MARK, "%s succeeded but changed the message", #call);              \
    } while (0)

/* The whole struct, every field (expandable ones included); the field-by-
 * field helper first, so that a difference names its field. */
static void assert_stats_same(const cca_stats *before, const cca_allocator *a, const char *what) {
    cca_stats now = tu_stats(a);
    tu_assert_stats_equal(before, &now, what);
    cr_assert_eq(memcmp(before, &now, sizeof now), 0, "%s: cca_stats changed (an expandable field?)", what);
    tu_check(a);
}

static void assert_upstream_same(const cca_upstream_stats *before, cca_upstream *u, const char *what) {
    cca_upstream_stats now = tu_upstream_stats(u);
    cr_assert_eq(memcmp(before, &now, sizeof now), 0,
                 "%s: upstream stats changed (bytes_in_use %zu -> %zu, allocs %zu -> %zu, failed %llu -> %llu)",
                 what, before->bytes_in_use, now.bytes_in_use, before->allocations, now.allocations,
                 (unsigned long long)before->failed_allocs, (unsigned long long)now.failed_allocs);
}

/* ========================================================================== */
/* status.c: names, the message, sizes                                        */
/* ========================================================================== */

Test(api_contract, status_string_names_every_code) {
    for (int s = CCA_OK; s <= CCA_ERR_INVARIANT; s++) {
        const char *n = cca_status_string((cca_status)s);
        cr_assert_eq(strncmp(n, "CCA_", 4), 0, "code %d: '%s'", s, n);
    }
    cr_assert_str_eq(cca_status_string((cca_status)999), "unknown cca_status");
    cr_assert_str_eq(cca_status_string(CCA_ERR_OUT_OF_MEMORY), "CCA_ERR_OUT_OF_MEMORY: out of device memory");
}

Test(api_contract, last_error_set_prefix_clear) {
    cca_clear_error();
    cr_assert_str_eq(cca_last_error(), "");
    cr_assert_eq(cca_set_error(CCA_ERR_IO, "x=%d", 7), CCA_ERR_IO);
    cr_assert_str_eq(cca_last_error(), "x=7");
    cr_assert_eq(cca_error_prefix(CCA_ERR_CONFIG, "f(%s)", "a"), CCA_ERR_CONFIG);
    cr_assert_str_eq(cca_last_error(), "f(a): x=7");
    /* wrapping the message itself */
    cca_set_error(CCA_OK, "outer: %s", cca_last_error());
    cr_assert_str_eq(cca_last_error(), "outer: f(a): x=7");
    /* at most 1023 characters, a cut one ends in "..." */
    char big[3000];
    memset(big, 'z', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    cca_set_error(CCA_ERR_IO, "%s", big);
    cr_assert_eq(strlen(cca_last_error()), 1023);
    cr_assert_str_eq(cca_last_error() + 1020, "...");
    /* a prefix survives a cut; the old message's end is lost */
    cca_error_prefix(CCA_ERR_IO, "PREFIX");
    cr_assert_eq(strncmp(cca_last_error(), "PREFIX: zzz", 11), 0);
    cr_assert_eq(strlen(cca_last_error()), 1023);
    cr_assert_str_eq(cca_last_error() + 1020, "...");
    /* 1023 characters fit whole; 1024, one more than fits, are cut */
    big[1023] = '\0';
    cca_set_error(CCA_ERR_IO, "%s", big);
    cr_assert_eq(strlen(cca_last_error()), 1023);
    cr_assert_str_eq(cca_last_error() + 1020, "zzz", "exactly full: not cut");
    big[1023] = 'z';
    big[1024] = '\0';
    cca_set_error(CCA_ERR_IO, "%s", big);
    cr_assert_eq(strlen(cca_last_error()), 1023);
    cr_assert_str_eq(cca_last_error() + 1020, "...", "one character too many: cut and marked");
    cca_clear_error();
    cr_assert_str_eq(cca_last_error(), "");
}

Test(api_contract, format_bytes_fits_32_and_honours_len) {
    char buf[32];
    cr_assert_str_eq(cca_format_bytes(512, buf, sizeof buf), "512 B");
    cr_assert_str_eq(cca_format_bytes((size_t)3 << 30, buf, sizeof buf), "3.00 GiB");
    cr_assert_str_eq(cca_format_bytes(1023, buf, sizeof buf), "1023 B");
    cr_assert_str_eq(cca_format_bytes(1024, buf, sizeof buf), "1.00 KiB", "1024 is the first KiB");
    cr_assert_str_eq(cca_format_bytes((size_t)5 << 39, buf, sizeof buf), "2.50 TiB");
    cr_assert_str_eq(cca_format_bytes((size_t)2048 << 40, buf, sizeof buf), "2048.00 TiB", "TiB is the last unit");
    cr_assert_lt(strlen(cca_format_bytes(SIZE_MAX, buf, sizeof buf)), 32u);
    char small[4] = {'#', '#', '#', '#'};
    cca_format_bytes(123456, small, 3); /* writes at most len bytes, NUL included */
    cr_assert_eq(small[2], '\0');
    cr_assert_eq(small[3], '#');
}

/* The unit is chosen after the rounding to two decimals: a size just under
 * a unit that rounds up to 1024.00 of the unit below is "1.00" of the next,
 * as "1023 B" never shows as "1024 B"; below that rounding point it stays in
 * the lower unit. Every number shown is under 1024 but in TiB, the last. */
Test(api_contract, format_bytes_never_shows_1024_of_a_unit) {
    char buf[32];
    const char *next[] = {"1.00 MiB", "1.00 GiB", "1.00 TiB"};
    const char *below[] = {"1023.99 KiB", "1023.99 MiB", "1023.99 GiB"};
    for (int k = 0; k < 3; k++) {
        size_t unit = (size_t)1 << (10 * (k + 1)), up = unit * 1024;
        cr_assert_str_eq(cca_format_bytes(up - 1, buf, sizeof buf), next[k], "%zu", up - 1);
        /* 1023.995 units is where %.2f rounds up: the last size below it */
        size_t last_below = (size_t)(1023.995 * (double)unit);
        while ((double)last_below / (double)unit >= 1023.995)
            last_below--;
        cr_assert_str_eq(cca_format_bytes(last_below, buf, sizeof buf), below[k], "%zu", last_below);
        cr_assert_str_eq(cca_format_bytes(last_below + 1, buf, sizeof buf), next[k], "%zu", last_below + 1);
    }
    uint64_t x = 88172645463325252ull; /* xorshift64: sizes at every scale */
    for (int i = 0; i < 200000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        size_t z = (size_t)(x >> (x % 64));
        cca_format_bytes(z, buf, sizeof buf);
        double shown = strtod(buf, NULL);
        if (!strstr(buf, "TiB"))
            cr_assert_lt(shown, 1024.0, "%zu shown as %s", z, buf);
        if (z >= 1024)
            cr_assert_geq(shown, 1.0, "%zu shown as %s", z, buf);
    }
}

Test(api_contract, parse_size_errors_leave_out_unchanged) {
    size_t out = 12345;
    EXPECT_FAIL(cca_parse_size(NULL, &out), CCA_ERR_INVALID_ARGUMENT, "cca_parse_size");
    EXPECT_FAIL(cca_parse_size("1M", NULL), CCA_ERR_INVALID_ARGUMENT, "cca_parse_size");
    const char *bad[] = {"", "-1", "+1", "1e3", "0x10", "M", ".", "1MM", "1 M", "1Q", "inf", "nan", "1.5.5",
                         "18446744073709551616", "16777216T", "1KiBB"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        EXPECT_FAIL(cca_parse_size(bad[i], &out), CCA_ERR_INVALID_ARGUMENT, bad[i]); /* names the size */
        cr_assert_eq(out, 12345, "'%s' changed *out", bad[i]);
    }
    EXPECT_OK_KEEPS_MESSAGE(cca_parse_size("1.5KiB", &out));
    cr_assert_eq(out, 1536);
}

/* ========================================================================== */
/* config.c                                                                   */
/* ========================================================================== */

Test(api_contract, config_parse_all_or_nothing) {
    cca_config c, before;
    cca_config_default(&c);
    cca_config_parse(&c, "max_reserved:1G");
    before = c;
    EXPECT_FAIL(cca_config_parse(NULL, "policy:greedy"), CCA_ERR_INVALID_ARGUMENT, "cca_config_parse");
    EXPECT_OK_KEEPS_MESSAGE(cca_config_parse(&c, NULL));
    cr_assert_eq(memcmp(&c, &before, sizeof c), 0, "NULL text changed the config");
    struct {
        const char *text, *names;
    } bad[] = {
        {"policy:greedy,greedy_fractoin:0.5", "greedy_fractoin"}, /* the good first item is not applied */
        {"max_reserved:lots", "max_reserved"},
        {"greedy_fraction:1.5", "greedy_fraction"},
        {"small_max:2G", "small_max"},
        {"log_oom:maybe", "log_oom"},
        {"policy:fast", "policy"},
        {"small_max:4M", "small_max"}, /* cross-field: small_max > small_segment */
        {"max_split:30M,policy:greedy", "max_split"},
        {"max_split:30M,expandable:1", "max_split"},
        {"justakey", "justakey"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        EXPECT_FAIL(cca_config_parse(&c, bad[i].text), CCA_ERR_CONFIG, bad[i].names);
        cr_assert_eq(memcmp(&c, &before, sizeof c), 0, "'%s' changed the config", bad[i].text);
    }
}

Test(api_contract, config_validate_apply_env_print_default) {
    EXPECT_FAIL(cca_config_validate(NULL), CCA_ERR_INVALID_ARGUMENT, "cca_config_validate");
    EXPECT_FAIL(cca_config_apply_env(NULL), CCA_ERR_INVALID_ARGUMENT, "cca_config_apply_env");
    cca_config c;
    cca_config_default(&c);
    cca_config_default(NULL); /* no crash */
    c.policy = (cca_policy)7;
    EXPECT_FAIL(cca_config_validate(&c), CCA_ERR_CONFIG, "policy");
    cca_config_default(&c);
    c.greedy_fraction = 0;
    EXPECT_FAIL(cca_config_validate(&c), CCA_ERR_CONFIG, "greedy_fraction");
    cca_config_default(&c);
    EXPECT_FAIL(cca_config_print(NULL, stdout, 0), CCA_ERR_INVALID_ARGUMENT, "cca_config_print");
    EXPECT_FAIL(cca_config_print(&c, NULL, 0), CCA_ERR_INVALID_ARGUMENT, "cca_config_print");

    /* a bad CCALLOC_CONF: CCA_ERR_CONFIG naming the variable and the key, *c unchanged */
    cca_config before = c;
    setenv("CCALLOC_CONF", "policy:greedy,nokey:1", 1);
    EXPECT_FAIL(cca_config_apply_env(&c), CCA_ERR_CONFIG, "CCALLOC_CONF");
    cr_assert_not_null(strstr(cca_last_error(), "nokey"));
    cr_assert_eq(memcmp(&c, &before, sizeof c), 0);
    unsetenv("CCALLOC_CONF");
    EXPECT_OK_KEEPS_MESSAGE(cca_config_apply_env(&c));
}

/* with_docs is 0, 1 or 2 (ccalloc.h); anything else is refused and writes
 * nothing, rather than silently printing one of the three. */
Test(api_contract, config_print_refuses_an_unknown_with_docs) {
    cca_config c;
    cca_config_default(&c);
    int bad[] = {-1, 3, 100};
    for (size_t i = 0; i < 3; i++) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        EXPECT_FAIL(cca_config_print(&c, f, bad[i]), CCA_ERR_INVALID_ARGUMENT, "cca_config_print");
        fclose(f);
        cr_assert_eq(len, 0, "with_docs %d wrote %zu bytes", bad[i], len);
        free(buf);
    }
}

/* ========================================================================== */
/* upstreams                                                                  */
/* ========================================================================== */

Test(api_contract, host_create_refusals_clear_out) {
    cca_upstream *u = SENTINEL;
    EXPECT_FAIL(cca_upstream_host_create(0, &u), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_host_create");
    cr_assert_null(u);
    EXPECT_FAIL(cca_upstream_host_create(1 << 20, NULL), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_host_create");
    u = SENTINEL;
    EXPECT_FAIL(cca_upstream_host_create(SIZE_MAX / 2 + 1, &u), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_host_create");
    cr_assert_null(u);
    u = SENTINEL;
    EXPECT_FAIL(cca_upstream_host_create_with(NULL, &u), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_host_create_with");
    cr_assert_null(u);
    cca_host_options o = {.capacity = 1 << 20, .alloc_latency_ns = CCA_HOST_MAX_LATENCY_NS + 1};
    u = SENTINEL;
    EXPECT_FAIL(cca_upstream_host_create_with(&o, &u), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_host_create");
    cr_assert_null(u);
    o.alloc_latency_ns = 0;
    o.free_latency_ns = CCA_HOST_MAX_LATENCY_NS + 1;
    EXPECT_FAIL(cca_upstream_host_create_with(&o, &u), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_host_create");
    o.free_latency_ns = 0;
    o.vm_map_granule_latency_ns = CCA_HOST_MAX_LATENCY_NS + 1;
    EXPECT_FAIL(cca_upstream_host_create_with(&o, &u), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_host_create");
    cr_assert_null(u);
    o.vm_map_granule_latency_ns = 0;
    o.vm_unmap_granule_latency_ns = UINT64_MAX;
    EXPECT_FAIL(cca_upstream_host_create_with(&o, &u), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_host_create");
    cr_assert_null(u);
    o.vm_unmap_granule_latency_ns = 0;
    o.vm_map_call_latency_ns = CCA_HOST_MAX_LATENCY_NS + 1;
    EXPECT_FAIL(cca_upstream_host_create_with(&o, &u), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_host_create");
    cr_assert_null(u);
    o.vm_map_call_latency_ns = 0;
    o.vm_unmap_call_latency_ns = UINT64_MAX;
    EXPECT_FAIL(cca_upstream_host_create_with(&o, &u), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_host_create");
    cr_assert_null(u);
    o.vm_unmap_call_latency_ns = 0;
    int pages[] = {-1, 2, INT_MAX, INT_MIN};
    for (size_t i = 0; i < sizeof pages / sizeof pages[0]; i++) {
        o.host_pages = pages[i];
        u = SENTINEL;
        EXPECT_FAIL(cca_upstream_host_create_with(&o, &u), CCA_ERR_INVALID_ARGUMENT, "host_pages");
        cr_assert_null(u);
    }
    o.host_pages = CCA_HOST_PAGES_SMALL;
    cr_assert_eq(cca_upstream_host_create_with(&o, &u), CCA_OK, "%s", cca_last_error());
    cca_upstream_destroy(u);
    o.host_pages = CCA_HOST_PAGES_HUGE;
    o.free_latency_ns = CCA_HOST_MAX_LATENCY_NS; /* the bound itself is allowed */
    size_t grans[] = {3 * MiB, 512, 1 * MiB + 512};
    for (size_t i = 0; i < 3; i++) {
        o.vm_granularity = grans[i];
        u = SENTINEL;
        EXPECT_FAIL(cca_upstream_host_create_with(&o, &u), CCA_ERR_INVALID_ARGUMENT, "vm_granularity");
        cr_assert_null(u);
    }
    o.vm_granularity = 0;
    o.free_latency_ns = 0;
    EXPECT_OK_KEEPS_MESSAGE(cca_upstream_host_create_with(&o, &u));
    cca_upstream_destroy(u);
    /* host malloc failing at each of create's allocations: OOM, *out NULL */
    for (long n = 1; n < 8; n++) {
        u = SENTINEL;
        cca_clear_error();
        hm_arm(n);
        cca_status st = cca_upstream_host_create(1 << 20, &u);
        bool failed = hm_disarm();
        if (!failed) {
            cr_assert_eq(st, CCA_OK);
            cca_upstream_destroy(u);
            break;
        }
        cr_assert_eq(st, CCA_ERR_OUT_OF_MEMORY, "malloc %ld: %s", n, cca_status_string(st));
        cr_assert_null(u);
        cr_assert_neq(cca_last_error()[0], '\0');
    }
}

Test(api_contract, cuda_create_without_a_gpu_says_why) {
    cca_upstream *u = SENTINEL;
    cca_clear_error();
    cca_status st = cca_upstream_cuda_create(0, &u);
    if (st == CCA_OK) {
        cca_upstream_destroy(u);
        cr_skip_test("a GPU is present");
    }
    cr_assert_eq(st, CCA_ERR_NO_DEVICE, "%s", cca_status_string(st));
    cr_assert_null(u);
    cr_assert_neq(cca_last_error()[0], '\0');
    EXPECT_FAIL(cca_upstream_cuda_create(0, NULL), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_cuda_create");
}

static cca_status nop_alloc(void *ctx, size_t size, void **ptr) {
    (void)ctx, (void)size, (void)ptr;
    return CCA_ERR_OUT_OF_MEMORY;
}
static cca_status nop_free(void *ctx, void *ptr, size_t size) {
    (void)ctx, (void)ptr, (void)size;
    return CCA_OK;
}
static cca_status nop_event_record(void *ctx, cca_stream s, void **e) {
    (void)ctx, (void)s, (void)e;
    return CCA_OK;
}
static cca_status nop_gran(void *ctx, size_t *b) {
    (void)ctx;
    *b = 2 * MiB;
    return CCA_OK;
}

Test(api_contract, custom_create_refusals_clear_out) {
    cca_upstream_ops ops = {.alloc = nop_alloc, .free = nop_free};
    cca_upstream *u = SENTINEL;
    EXPECT_FAIL(cca_upstream_custom_create(NULL, NULL, &u), CCA_ERR_INVALID_ARGUMENT, "ops");
    cr_assert_null(u);
    EXPECT_FAIL(cca_upstream_custom_create(&ops, NULL, NULL), CCA_ERR_INVALID_ARGUMENT, "out");
    cca_upstream_ops no_free = {.alloc = nop_alloc};
    u = SENTINEL;
    EXPECT_FAIL(cca_upstream_custom_create(&no_free, NULL, &u), CCA_ERR_INVALID_ARGUMENT, "free");
    cr_assert_null(u);
    cca_upstream_ops some_events = {.alloc = nop_alloc, .free = nop_free, .event_record = nop_event_record};
    u = SENTINEL;
    EXPECT_FAIL(cca_upstream_custom_create(&some_events, NULL, &u), CCA_ERR_INVALID_ARGUMENT, "event_record");
    cr_assert_null(u);
    cca_upstream_ops some_vm = {.alloc = nop_alloc, .free = nop_free, .vm_granularity = nop_gran};
    u = SENTINEL;
    EXPECT_FAIL(cca_upstream_custom_create(&some_vm, NULL, &u), CCA_ERR_INVALID_ARGUMENT, "vm_");
    cr_assert_null(u);
    u = SENTINEL;
    hm_arm(1);
    EXPECT_FAIL(cca_upstream_custom_create(&ops, NULL, &u), CCA_ERR_OUT_OF_MEMORY, "host malloc");
    cr_assert(hm_disarm());
    cr_assert_null(u);
    EXPECT_OK_KEEPS_MESSAGE(cca_upstream_custom_create(&ops, NULL, &u));
    cr_assert_str_eq(cca_upstream_name(u), "custom");
    cr_assert_eq(cca_upstream_has_vm(u), 0);
    cca_upstream_destroy(u);
}

Test(api_contract, upstream_wrappers_on_bad_input_change_nothing) {
    cca_upstream *u;
    cr_assert_eq(cca_upstream_host_create(64 * MiB, &u), CCA_OK);
    void *held;
    cr_assert_eq(cca_upstream_alloc(u, MiB, &held), CCA_OK);
    cca_upstream_stats before = tu_upstream_stats(u);
    void *p = SENTINEL;
    EXPECT_FAIL(cca_upstream_alloc(NULL, MiB, &p), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_alloc");
    EXPECT_FAIL(cca_upstream_alloc(u, MiB, NULL), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_alloc");
    EXPECT_FAIL(cca_upstream_alloc(u, 0, &p), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_alloc");
    cr_assert_null(p);
    p = SENTINEL;
    EXPECT_FAIL(cca_upstream_alloc(u, 1000, &p), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_alloc");
    cr_assert_null(p);
    EXPECT_FAIL(cca_upstream_free(NULL, held, MiB), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_free");
    EXPECT_FAIL(cca_upstream_free(u, NULL, MiB), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_free");
    size_t fb = 1, tb = 2;
    EXPECT_FAIL(cca_upstream_mem_info(NULL, &fb, &tb), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_mem_info");
    EXPECT_FAIL(cca_upstream_mem_info(u, NULL, &tb), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_mem_info");
    EXPECT_FAIL(cca_upstream_mem_info(u, &fb, NULL), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_mem_info");
    EXPECT_FAIL(cca_upstream_synchronize(NULL), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_synchronize");
    cca_upstream_stats s;
    EXPECT_FAIL(cca_upstream_get_stats(NULL, &s), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_get_stats");
    EXPECT_FAIL(cca_upstream_get_stats(u, NULL), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_get_stats");
    /* the host upstream refuses a free that does not name one live allocation */
    EXPECT_FAIL(cca_upstream_free(u, held, 2 * MiB), CCA_ERR_UPSTREAM, "free");
    EXPECT_FAIL(cca_upstream_free(u, (char *)held + 4096, MiB), CCA_ERR_UPSTREAM, "free");
    /* refused for want of memory: OOM, *ptr NULL, counted as a failed alloc and nothing else */
    p = SENTINEL;
    EXPECT_FAIL(cca_upstream_alloc(u, 64 * MiB, &p), CCA_ERR_OUT_OF_MEMORY, "67108864"); /* the device's own message */
    cr_assert_null(p);
    before.failed_allocs++;
    assert_upstream_same(&before, u, "bad upstream calls");
    /* vm wrappers: NULLs, zero and misaligned sizes and addresses, refused before the upstream */
    size_t g = 7;
    EXPECT_FAIL(cca_upstream_vm_granularity(NULL, &g), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_vm_granularity");
    EXPECT_FAIL(cca_upstream_vm_granularity(u, NULL), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_vm_granularity");
    void *base = SENTINEL;
    EXPECT_FAIL(cca_upstream_vm_reserve(NULL, 2 * MiB, &base), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_vm_reserve");
    EXPECT_FAIL(cca_upstream_vm_reserve(u, 2 * MiB, NULL), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_vm_reserve");
    EXPECT_FAIL(cca_upstream_vm_reserve(u, 0, &base), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_vm_reserve");
    cr_assert_null(base);
    base = SENTINEL;
    EXPECT_FAIL(cca_upstream_vm_reserve(u, 3 * MiB, &base), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_vm_reserve");
    cr_assert_null(base);
    cr_assert_eq(cca_upstream_vm_reserve(u, 8 * MiB, &base), CCA_OK);
    before = tu_upstream_stats(u);
    char *b = base;
    EXPECT_FAIL(cca_upstream_vm_map(u, NULL, 2 * MiB), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_vm_map");
    EXPECT_FAIL(cca_upstream_vm_map(u, b, 0), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_vm_map");
    EXPECT_FAIL(cca_upstream_vm_map(u, b + 4096, 2 * MiB), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_vm_map");
    EXPECT_FAIL(cca_upstream_vm_map(u, b, MiB), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_vm_map");
    EXPECT_FAIL(cca_upstream_vm_unmap(u, b, 2 * MiB), CCA_ERR_UPSTREAM, "vm_unmap"); /* nothing mapped there */
    EXPECT_FAIL(cca_upstream_vm_unmap(u, NULL, 2 * MiB), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_vm_unmap");
    EXPECT_FAIL(cca_upstream_vm_release(u, b, 4 * MiB), CCA_ERR_UPSTREAM, "vm_release"); /* not the whole range */
    EXPECT_FAIL(cca_upstream_vm_release(u, NULL, 8 * MiB), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_vm_release");
    EXPECT_FAIL(cca_upstream_vm_release(NULL, b, 8 * MiB), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_vm_release");
    assert_upstream_same(&before, u, "bad vm calls");
    /* a map beyond the device's free memory: OOM, counted as a failed map, nothing mapped */
    void *filler;
    cr_assert_eq(cca_upstream_alloc(u, 58 * MiB, &filler), CCA_OK);
    before = tu_upstream_stats(u);
    EXPECT_FAIL(cca_upstream_vm_map(u, b, 8 * MiB), CCA_ERR_OUT_OF_MEMORY, "vm_map");
    before.vm_failed_maps++;
    assert_upstream_same(&before, u, "refused map");
    cr_assert_eq(cca_upstream_free(u, filler, 58 * MiB), CCA_OK);
    EXPECT_OK_KEEPS_MESSAGE(cca_upstream_vm_map(u, b, 2 * MiB));
    EXPECT_FAIL(cca_upstream_vm_release(u, b, 8 * MiB), CCA_ERR_UPSTREAM, "vm_release"); /* something mapped */
    EXPECT_OK_KEEPS_MESSAGE(cca_upstream_vm_unmap(u, b, 2 * MiB));
    EXPECT_OK_KEEPS_MESSAGE(cca_upstream_vm_release(u, b, 8 * MiB));
    EXPECT_OK_KEEPS_MESSAGE(cca_upstream_free(u, held, MiB));
    EXPECT_OK_KEEPS_MESSAGE(cca_upstream_mem_info(u, &fb, &tb));
    EXPECT_OK_KEEPS_MESSAGE(cca_upstream_synchronize(u));
    cr_assert_eq(fb, 64 * MiB);
    cca_upstream_destroy(u);
    cca_upstream_destroy(NULL); /* no-op */
    cr_assert_str_eq(cca_upstream_name(NULL), "(null)");
    cr_assert_eq(cca_upstream_has_vm(NULL), 0);
}

Test(api_contract, vm_wrappers_without_vm_ops_are_upstream_errors) {
    cca_upstream_ops ops = {.alloc = nop_alloc, .free = nop_free, .name = "novm"};
    cca_upstream *u;
    cr_assert_eq(cca_upstream_custom_create(&ops, NULL, &u), CCA_OK);
    size_t g = 7;
    void *base = SENTINEL;
    EXPECT_FAIL(cca_upstream_vm_granularity(u, &g), CCA_ERR_UPSTREAM, "novm");
    cr_assert_eq(g, 0);
    EXPECT_FAIL(cca_upstream_vm_reserve(u, 2 * MiB, &base), CCA_ERR_UPSTREAM, "cca_upstream_vm_reserve");
    cr_assert_null(base);
    EXPECT_FAIL(cca_upstream_vm_map(u, (void *)(uintptr_t)(2 * MiB), 2 * MiB), CCA_ERR_UPSTREAM, "cca_upstream_vm_map");
    EXPECT_FAIL(cca_upstream_vm_unmap(u, (void *)(uintptr_t)(2 * MiB), 2 * MiB), CCA_ERR_UPSTREAM, "cca_upstream_vm_unmap");
    EXPECT_FAIL(cca_upstream_vm_release(u, (void *)(uintptr_t)(2 * MiB), 2 * MiB), CCA_ERR_UPSTREAM,
                "cca_upstream_vm_release");
    size_t fb, tb;
    EXPECT_FAIL(cca_upstream_mem_info(u, &fb, &tb), CCA_ERR_UPSTREAM, "novm");
    /* a silent failing member: the wrapper names the upstream, the member, the size, the status */
    void *p = SENTINEL;
    cca_set_error(CCA_ERR_IO, "an earlier call's message");
    cr_assert_eq(cca_upstream_alloc(u, 2 * MiB, &p), CCA_ERR_OUT_OF_MEMORY);
    cr_assert_null(p);
    cr_assert_str_eq(cca_last_error(), "upstream 'novm' alloc of 2097152 bytes failed (CCA_ERR_OUT_OF_MEMORY: out of "
                                       "device memory)");
    EXPECT_OK_KEEPS_MESSAGE(cca_upstream_synchronize(u)); /* no synchronize op: nothing to wait for */
    cca_upstream_destroy(u);
}

/* ========================================================================== */
/* allocator lifetime                                                         */
/* ========================================================================== */

Test(api_contract, create_refusals_clear_out_and_touch_nothing) {
    cca_upstream *u;
    cr_assert_eq(cca_upstream_host_create(64 * MiB, &u), CCA_OK);
    cca_upstream_stats before = tu_upstream_stats(u);
    cca_allocator *a = SENTINEL;
    EXPECT_FAIL(cca_create(NULL, NULL, &a), CCA_ERR_INVALID_ARGUMENT, "cca_create");
    cr_assert_null(a);
    EXPECT_FAIL(cca_create(NULL, u, NULL), CCA_ERR_INVALID_ARGUMENT, "cca_create");
    cca_config c;
    cca_config_default(&c);
    c.small_max = 4 * MiB; /* > small_segment */
    a = SENTINEL;
    EXPECT_FAIL(cca_create(&c, u, &a), CCA_ERR_CONFIG, "small_max");
    cr_assert_null(a);
    /* greedy arena refused: OOM, *out NULL, the upstream holds nothing */
    cca_config_default(&c);
    cr_assert_eq(cca_config_parse(&c, "policy:greedy,greedy_bytes:128M"), CCA_OK);
    a = SENTINEL;
    EXPECT_FAIL(cca_create(&c, u, &a), CCA_ERR_OUT_OF_MEMORY, "cca_create");
    cr_assert_null(a);
    before.failed_allocs = tu_upstream_stats(u).failed_allocs; /* the refusals themselves are counted */
    assert_upstream_same(&before, u, "greedy create refused");
    /* an arena that comes to 0 bytes (greedy_bytes under 512, or capped so
     * by max_reserved): OOM before the upstream is asked */
    const char *zero[] = {"policy:greedy,expandable:0,greedy_bytes:511",
                          "policy:greedy,expandable:0,greedy_bytes:8M,max_reserved:300"};
    for (size_t k = 0; k < 2; k++) {
        cca_config_default(&c);
        cr_assert_eq(cca_config_parse(&c, zero[k]), CCA_OK, "%s", cca_last_error());
        a = SENTINEL;
        EXPECT_FAIL(cca_create(&c, u, &a), CCA_ERR_OUT_OF_MEMORY, "cca_create: greedy: arena size rounds to 0 bytes");
        cr_assert_null(a);
        assert_upstream_same(&before, u, zero[k]);
    }
    /* host malloc failing at every allocation cca_create makes (history and
     * expandable included): OOM, *out NULL, nothing held, a message */
    const char *confs[] = {"policy:growth", "history:16,expandable:1", "policy:greedy,greedy_bytes:8M"};
    for (size_t k = 0; k < 3; k++) {
        cca_config_default(&c);
        cr_assert_eq(cca_config_parse(&c, confs[k]), CCA_OK);
        for (long n = 1;; n++) {
            cr_assert_lt(n, 100);
            a = SENTINEL;
            cca_set_error(CCA_ERR_IO, "stale");
            hm_arm(n);
            cca_status st = cca_create(&c, u, &a);
            bool failed = hm_disarm();
            if (!failed) {
                cr_assert_eq(st, CCA_OK, "%s: %s", confs[k], cca_last_error());
                tu_destroy_clean(a, u);
                break;
            }
            cr_assert_eq(st, CCA_ERR_OUT_OF_MEMORY, "%s, malloc %ld: %s", confs[k], n, cca_status_string(st));
            cr_assert_null(a);
            cr_assert(cca_last_error()[0] && strcmp(cca_last_error(), "stale"), "%s, malloc %ld: message '%s'",
                      confs[k], n, cca_last_error());
            cr_assert_eq(tu_upstream_stats(u).bytes_in_use, 0, "%s, malloc %ld", confs[k], n);
        }
    }
    EXPECT_FAIL(cca_destroy(NULL), CCA_ERR_INVALID_ARGUMENT, "cca_destroy");
    EXPECT_FAIL(cca_get_config(NULL, &c), CCA_ERR_INVALID_ARGUMENT, "cca_get_config");
    cca_upstream_destroy(u);
}

Test(api_contract, create_and_destroy_keep_the_callers_message) {
    cca_upstream *u;
    cr_assert_eq(cca_upstream_host_create(64 * MiB, &u), CCA_OK);
    cca_config c;
    cca_config_default(&c);
    cca_allocator *a;
    EXPECT_OK_KEEPS_MESSAGE(cca_create(&c, u, &a));
    cca_config got;
    EXPECT_OK_KEEPS_MESSAGE(cca_get_config(a, &got));
    cr_assert_eq(memcmp(&got, &c, sizeof c), 0);
    EXPECT_OK_KEEPS_MESSAGE(cca_destroy(a));
    cr_assert_eq(cca_config_parse(&c, "policy:greedy,greedy_fraction:0.5"), CCA_OK);
    EXPECT_OK_KEEPS_MESSAGE(cca_create(&c, u, &a));
    EXPECT_OK_KEEPS_MESSAGE(cca_destroy(a));
    cca_upstream_destroy(u);
}

/* cca_create's cost (ccalloc.h), greedy: the mem_info calls made to size
 * and check its arena. Classic with greedy_bytes: none; greedy_fraction:
 * one; over pages, one more to check the range's pages fit the device, and
 * one more again when the fraction's bytes are no whole number of pages
 * (pages_fit_arena rounds them within the device's free memory). */
Test(api_contract, create_greedy_asks_mem_info_to_size_and_check_its_arena) {
    static const struct {
        const char *conf;
        uint64_t mem_infos;
    } cases[] = {
        {"policy:greedy,greedy_bytes:16M,expandable:0", 0},
        {"policy:greedy,greedy_fraction:0.5,expandable:0", 1},
        {"policy:greedy,greedy_bytes:16M,expandable:1", 1},
        {"policy:greedy,greedy_fraction:0.5,expandable:1", 2}, /* 32 MiB: whole pages */
        {"policy:greedy,greedy_fraction:0.3,expandable:1", 3}, /* 19.2 MiB: not */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tu_faulty f;
        cca_upstream *inner = tu_vm_device(64 * MiB, 64 * KiB);
        cca_upstream *u = tu_faulty_create(&f, inner, "fx", false);
        uint64_t before = f.mem_info_calls;
        cca_allocator *a = tu_allocator(u, cases[k].conf);
        cr_assert_eq(f.mem_info_calls - before, cases[k].mem_infos, "%s: %llu mem_info calls", cases[k].conf,
                     (unsigned long long)(f.mem_info_calls - before));
        tu_destroy_clean(a, u);
        tu_faulty_destroy_clean(u, inner);
    }
}

Test(api_contract, destroy_with_live_blocks_releases_them_and_says_so) {
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(64 * MiB, NULL, &u, &a);
    tu_alloc(a, MiB, NULL);
    tu_alloc(a, 12 * MiB, NULL);
    EXPECT_FAIL(cca_destroy(a), CCA_ERR_LIVE_BLOCKS, "cca_destroy");
    cr_assert_not_null(strstr(cca_last_error(), "2 blocks"), "%s", cca_last_error());
    cr_assert_eq(tu_upstream_stats(u).bytes_in_use, 0);
    cca_upstream_destroy(u);
}

/* ========================================================================== */
/* allocation                                                                 */
/* ========================================================================== */

Test(api_contract, alloc_refusals) {
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(64 * MiB, "max_reserved:32M", &u, &a);
    void *live = tu_alloc(a, 3 * MiB, NULL);
    void *cached = tu_alloc(a, 100 * KiB, NULL);
    tu_free(a, cached);
    cca_stats before = tu_stats(a);
    cca_upstream_stats ubefore = tu_upstream_stats(u);
    void *p = SENTINEL;
    EXPECT_FAIL(cca_alloc(NULL, 512, NULL, &p), CCA_ERR_INVALID_ARGUMENT, "cca_alloc");
    cr_assert_null(p);
    EXPECT_FAIL(cca_alloc(a, 512, NULL, NULL), CCA_ERR_INVALID_ARGUMENT, "cca_alloc");
    p = SENTINEL;
    EXPECT_FAIL(cca_alloc(a, SIZE_MAX, NULL, &p), CCA_ERR_INVALID_ARGUMENT, "cca_alloc");
    cr_assert_null(p);
    p = SENTINEL;
    EXPECT_FAIL(cca_alloc(a, SIZE_MAX - 4096, NULL, &p), CCA_ERR_INVALID_ARGUMENT, "cca_alloc");
    cr_assert_null(p);
    assert_stats_same(&before, a, "refused arguments");
    /* size 0: CCA_OK, NULL, nothing counted, the message kept */
    p = SENTINEL;
    EXPECT_OK_KEEPS_MESSAGE(cca_alloc(a, 0, NULL, &p));
    cr_assert_null(p);
    assert_stats_same(&before, a, "size 0");
    /* a request that can never succeed: OOM at once, only `ooms` moves, no upstream call */
    p = SENTINEL;
    tu_log_capture log = {0};
    cca_set_log_callback(tu_capture_log, &log);
    EXPECT_FAIL(cca_alloc(a, 40 * MiB, NULL, &p), CCA_ERR_OUT_OF_MEMORY, "never succeed");
    cca_set_log_callback(NULL, NULL);
    cr_assert_eq(log.lines, 1, "one OOM line, got %d", log.lines);
    cr_assert_null(p);
    before.ooms++;
    assert_stats_same(&before, a, "impossible request");
    assert_upstream_same(&ubefore, u, "impossible request");
    tu_free(a, live);
    tu_teardown(a, u);
}

Test(api_contract, alloc_oom_after_retry_changes_only_what_the_doc_says) {
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(32 * MiB, "log_oom:0,expandable:0", &u, &a); /* classic: a segment per request */
    void *x = tu_alloc(a, 12 * MiB, NULL);
    void *y = tu_alloc(a, 12 * MiB, NULL);
    tu_free(a, y);
    /* 24 MiB: device free (8) + cached (12) cannot hold it: the retry stops
     * before releasing anything (allocator.md, step 5 (b)) */
    cca_stats before = tu_stats(a);
    void *p = SENTINEL;
    EXPECT_FAIL(cca_alloc(a, 24 * MiB, NULL, &p), CCA_ERR_OUT_OF_MEMORY, "cca_alloc");
    cr_assert_null(p);
    before.ooms++;
    before.alloc_retries++;
    assert_stats_same(&before, a, "OOM with nothing worth releasing");
    /* 20 MiB: the retry releases y's segment and then succeeds: a success,
     * the caller's message kept */
    EXPECT_OK_KEEPS_MESSAGE(cca_alloc(a, 20 * MiB, NULL, &p));
    cca_stats after = tu_stats(a);
    cr_assert_eq(after.alloc_retries, before.alloc_retries + 1);
    cr_assert_eq(after.upstream_frees, before.upstream_frees + 1);
    tu_free(a, p);
    tu_free(a, x);
    tu_teardown(a, u);
}

Test(api_contract, free_record_stream_block_size_bad_pointers_change_nothing) {
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(64 * MiB, NULL, &u, &a);
    char *live = tu_alloc(a, 8 * KiB, NULL);
    char *gone = tu_alloc(a, 8 * KiB, NULL);
    tu_free(a, gone);
    cca_stats before = tu_stats(a);
    int foreign;
    void *bad[] = {live + 512, gone, &foreign, (void *)(uintptr_t)0x10};
    const char *why[] = {"interior", "", "not allocated", "not allocated"};
    for (size_t i = 0; i < 4; i++) {
        EXPECT_FAIL(cca_free(a, bad[i]), CCA_ERR_INVALID_POINTER, "cca_free");
        cr_assert_not_null(strstr(cca_last_error(), why[i]), "%s", cca_last_error());
        EXPECT_FAIL(cca_record_stream(a, bad[i], S1), CCA_ERR_INVALID_POINTER, "cca_record_stream");
        size_t sz = 77;
        EXPECT_FAIL(cca_block_size(a, bad[i], &sz), CCA_ERR_INVALID_POINTER, "cca_block_size");
        cr_assert_eq(sz, 77);
        cca_domain *d = SENTINEL;
        EXPECT_FAIL(cca_domain_of(a, bad[i], &d), CCA_ERR_INVALID_POINTER, "cca_domain_of");
        cr_assert_null(d);
        assert_stats_same(&before, a, "bad pointer");
    }
    EXPECT_FAIL(cca_free(NULL, live), CCA_ERR_INVALID_ARGUMENT, "cca_free");
    EXPECT_OK_KEEPS_MESSAGE(cca_free(a, NULL));
    EXPECT_FAIL(cca_record_stream(NULL, live, S1), CCA_ERR_INVALID_ARGUMENT, "cca_record_stream");
    EXPECT_FAIL(cca_record_stream(a, NULL, S1), CCA_ERR_INVALID_ARGUMENT, "cca_record_stream");
    size_t sz = 0;
    EXPECT_FAIL(cca_block_size(NULL, live, &sz), CCA_ERR_INVALID_ARGUMENT, "cca_block_size");
    EXPECT_FAIL(cca_block_size(a, NULL, &sz), CCA_ERR_INVALID_ARGUMENT, "cca_block_size");
    EXPECT_FAIL(cca_block_size(a, live, NULL), CCA_ERR_INVALID_ARGUMENT, "cca_block_size");
    assert_stats_same(&before, a, "NULL arguments");
    /* host malloc failing in cca_record_stream: OOM, the block's streams as they were
     * (its free needs no event: the host upstream's events complete at once anyway) */
    hm_arm(1);
    EXPECT_FAIL(cca_record_stream(a, live, S1), CCA_ERR_OUT_OF_MEMORY, "cca_record_stream");
    cr_assert(hm_disarm());
    assert_stats_same(&before, a, "record_stream without host memory");
    EXPECT_OK_KEEPS_MESSAGE(cca_record_stream(a, live, S1));
    EXPECT_OK_KEEPS_MESSAGE(cca_block_size(a, live, &sz));
    cr_assert_eq(sz, 8 * KiB);
    EXPECT_OK_KEEPS_MESSAGE(cca_free(a, live));
    tu_teardown(a, u);
}

/* ========================================================================== */
/* giving memory back                                                         */
/* ========================================================================== */

Test(api_contract, trim_and_empty_cache_errors) {
    EXPECT_FAIL(cca_trim(NULL, 0, NULL), CCA_ERR_INVALID_ARGUMENT, "cca_trim");
    cca_release_report r;
    memset(&r, 0xab, sizeof r);
    cca_release_report untouched = r;
    EXPECT_FAIL(cca_empty_cache(NULL, &r), CCA_ERR_INVALID_ARGUMENT, "NULL");
    cr_assert_eq(memcmp(&r, &untouched, sizeof r), 0, "report written on a refused call");

    /* synchronize refused: the classic free segments go all the same, the
     * report is filled, and the synchronize's status is returned */
    tu_upstream t;
    cca_upstream *u = tu_upstream_create(&t, 64 * MiB, true);
    cca_allocator *a = tu_allocator(u, NULL);
    void *x = tu_alloc(a, 12 * MiB, NULL);
    void *y = tu_alloc(a, 12 * MiB, NULL);
    tu_free(a, y);
    t.fail_sync = true;
    memset(&r, 0xab, sizeof r);
    EXPECT_FAIL(cca_empty_cache(a, &r), CCA_ERR_UPSTREAM, "cca_empty_cache");
    t.fail_sync = false;
    cr_assert_eq(r.bytes_released, 12 * MiB);
    cr_assert_eq(r.segments_released, 1);
    cr_assert_eq(r.bytes_still_reserved, 12 * MiB);
    cr_assert_eq(r.segments_pinned, 1);
    tu_check(a);
    /* a refused segment free: that segment stays cached, the report filled, CCA_ERR_UPSTREAM */
    tu_free(a, x);
    cca_stats before = tu_stats(a);
    t.fail_at = t.calls + 1;
    memset(&r, 0xab, sizeof r);
    EXPECT_FAIL(cca_trim(a, 0, &r), CCA_ERR_UPSTREAM, "refused");
    cr_assert_eq(r.bytes_released, 0);
    cr_assert_eq(r.bytes_still_reserved, 12 * MiB);
    cca_stats after = tu_stats(a);
    cr_assert_eq(after.reserved_bytes, before.reserved_bytes);
    cr_assert_eq(after.cached_bytes, before.cached_bytes);
    cr_assert_eq(after.segments, before.segments);
    tu_check(a);
    EXPECT_OK_KEEPS_MESSAGE(cca_empty_cache(a, &r));
    cr_assert_eq(r.bytes_released, 12 * MiB);
    EXPECT_OK_KEEPS_MESSAGE(cca_trim(a, 0, NULL));
    tu_teardown(a, u);
}

/* ========================================================================== */
/* statistics and snapshots                                                   */
/* ========================================================================== */

Test(api_contract, stats_null_arguments) {
    cca_stats s;
    memset(&s, 0xab, sizeof s);
    cca_stats untouched = s;
    cca_get_stats(NULL, &s); /* nothing happens */
    cr_assert_eq(memcmp(&s, &untouched, sizeof s), 0);
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(64 * MiB, NULL, &u, &a);
    cca_get_stats(a, NULL);
    cca_reset_peak_stats(NULL);
    EXPECT_FAIL(cca_stats_print(NULL, stdout), CCA_ERR_INVALID_ARGUMENT, "cca_stats_print");
    EXPECT_FAIL(cca_stats_print(&s, NULL), CCA_ERR_INVALID_ARGUMENT, "cca_stats_print");
    EXPECT_FAIL(cca_stats_write_json(NULL, stdout), CCA_ERR_INVALID_ARGUMENT, "cca_stats_write_json");
    EXPECT_FAIL(cca_stats_write_json(&s, NULL), CCA_ERR_INVALID_ARGUMENT, "cca_stats_write_json");
    EXPECT_FAIL(cca_write_snapshot_json(NULL, stdout), CCA_ERR_INVALID_ARGUMENT, "cca_write_snapshot_json");
    EXPECT_FAIL(cca_write_snapshot_json(a, NULL), CCA_ERR_INVALID_ARGUMENT, "cca_write_snapshot_json");
    EXPECT_FAIL(cca_domain_stats_write_json(NULL, stdout), CCA_ERR_INVALID_ARGUMENT, "cca_domain_stats_write_json");
    EXPECT_FAIL(cca_domain_stats_write_json(a, NULL), CCA_ERR_INVALID_ARGUMENT, "cca_domain_stats_write_json");
    EXPECT_FAIL(cca_write_snapshot_torch(NULL, 0, stdout), CCA_ERR_INVALID_ARGUMENT, "cca_write_snapshot_torch");
    EXPECT_FAIL(cca_write_snapshot_torch(a, 0, NULL), CCA_ERR_INVALID_ARGUMENT, "cca_write_snapshot_torch");
    /* device out of range: nothing written */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    EXPECT_FAIL(cca_write_snapshot_torch(a, -1, f), CCA_ERR_INVALID_ARGUMENT, "cca_write_snapshot_torch");
    EXPECT_FAIL(cca_write_snapshot_torch(a, CCA_SNAPSHOT_MAX_DEVICE + 1, f), CCA_ERR_INVALID_ARGUMENT, "1024");
    /* host memory short: OOM, nothing written */
    hm_arm(1);
    EXPECT_FAIL(cca_write_snapshot_torch(a, 0, f), CCA_ERR_OUT_OF_MEMORY, "cca_write_snapshot_torch");
    cr_assert(hm_disarm());
    fflush(f);
    cr_assert_eq(len, 0, "a refused snapshot wrote %zu bytes", len);
    EXPECT_OK_KEEPS_MESSAGE(cca_write_snapshot_torch(a, CCA_SNAPSHOT_MAX_DEVICE, f));
    fclose(f);
    free(buf);
    tu_teardown(a, u);
}

/* Every writer says CCA_ERR_IO when its bytes cannot be written, not only
 * when stdio's buffer happened to fill during the call: /dev/full accepts
 * every buffered write and fails at the flush. */
Test(api_contract, writers_report_a_failed_write) {
    FILE *f = fopen("/dev/full", "w");
    if (!f)
        cr_skip_test("no /dev/full");
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(64 * MiB, NULL, &u, &a);
    void *p = tu_alloc(a, MiB, NULL);
    cca_stats s = tu_stats(a);
    cca_config c;
    cca_config_default(&c);
    EXPECT_FAIL(cca_stats_print(&s, f), CCA_ERR_IO, "cca_stats_print");
    clearerr(f);
    EXPECT_FAIL(cca_stats_write_json(&s, f), CCA_ERR_IO, "cca_stats_write_json");
    clearerr(f);
    EXPECT_FAIL(cca_write_snapshot_json(a, f), CCA_ERR_IO, "cca_write_snapshot_json");
    clearerr(f);
    EXPECT_FAIL(cca_domain_stats_write_json(a, f), CCA_ERR_IO, "cca_domain_stats_write_json");
    clearerr(f);
    EXPECT_FAIL(cca_config_print(&c, f, 0), CCA_ERR_IO, "cca_config_print");
    clearerr(f);
    EXPECT_FAIL(cca_write_snapshot_torch(a, 0, f), CCA_ERR_IO, "cca_write_snapshot_torch");
    fclose(f);
    tu_free(a, p);
    tu_teardown(a, u);
}

/* ========================================================================== */
/* domains                                                                    */
/* ========================================================================== */

Test(api_contract, domain_create_refusals) {
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(64 * MiB, NULL, &u, &a);
    cca_stats before = tu_stats(a);
    cca_domain *d = SENTINEL;
    EXPECT_FAIL(cca_domain_create(NULL, "m", &d), CCA_ERR_INVALID_ARGUMENT, "cca_domain_create");
    cr_assert_null(d);
    d = SENTINEL;
    EXPECT_FAIL(cca_domain_create(a, NULL, &d), CCA_ERR_INVALID_ARGUMENT, "cca_domain_create");
    cr_assert_null(d);
    EXPECT_FAIL(cca_domain_create(a, "m", NULL), CCA_ERR_INVALID_ARGUMENT, "cca_domain_create");
    char long_name[CCA_DOMAIN_NAME_MAX + 2];
    memset(long_name, 'n', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    const char *bad[] = {"", "a\"b", "a\\b", "a,b", "tab\there", "\x7f", "caf\xc3\xa9", long_name};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        d = SENTINEL;
        EXPECT_FAIL(cca_domain_create(a, bad[i], &d), CCA_ERR_INVALID_ARGUMENT, "cca_domain_create");
        cr_assert_null(d);
    }
    long_name[CCA_DOMAIN_NAME_MAX] = '\0'; /* exactly the maximum: accepted */
    EXPECT_OK_KEEPS_MESSAGE(cca_domain_create(a, long_name, &d));
    hm_arm(1);
    cca_domain *d2 = SENTINEL;
    EXPECT_FAIL(cca_domain_create(a, "m2", &d2), CCA_ERR_OUT_OF_MEMORY, "cca_domain_create");
    cr_assert(hm_disarm());
    cr_assert_null(d2);
    assert_stats_same(&before, a, "refused domain creates");
    EXPECT_OK_KEEPS_MESSAGE(cca_domain_destroy(a, d, 0, NULL));
    tu_teardown(a, u);
    /* greedy: refused */
    tu_host_allocator(64 * MiB, "policy:greedy,greedy_bytes:8M", &u, &a);
    d = SENTINEL;
    EXPECT_FAIL(cca_domain_create(a, "m", &d), CCA_ERR_INVALID_ARGUMENT, "policy:growth");
    cr_assert_null(d);
    EXPECT_FAIL(cca_domain_reserve(a, NULL, MiB), CCA_ERR_INVALID_ARGUMENT, "cca_domain_reserve");
    tu_teardown(a, u);
}

Test(api_contract, domain_release_destroy_refusals) {
    cca_upstream *u;
    cca_allocator *a, *other;
    tu_host_allocator(64 * MiB, NULL, &u, &a);
    other = tu_allocator(u, NULL);
    cca_domain *d, *foreign;
    cr_assert_eq(cca_domain_create(a, "model", &d), CCA_OK);
    cr_assert_eq(cca_domain_create(other, "elsewhere", &foreign), CCA_OK);
    void *p;
    cr_assert_eq(cca_alloc_in(a, d, 3 * MiB, NULL, &p), CCA_OK);
    cca_stats before = tu_stats(a);
    cca_live_block leaks[2];
    cca_domain_report r = {.leaks = leaks, .leaks_cap = 2};
    EXPECT_FAIL(cca_domain_release(NULL, d, 0, &r), CCA_ERR_INVALID_ARGUMENT, "cca_domain_release");
    EXPECT_FAIL(cca_domain_release(a, d, 2, &r), CCA_ERR_INVALID_ARGUMENT, "unknown flags");
    EXPECT_FAIL(cca_domain_release(a, foreign, 0, &r), CCA_ERR_INVALID_ARGUMENT, "cca_domain_release");
    EXPECT_FAIL(cca_domain_destroy(a, NULL, 0, &r), CCA_ERR_INVALID_ARGUMENT, "default domain");
    EXPECT_FAIL(cca_domain_destroy(a, foreign, 0, NULL), CCA_ERR_INVALID_ARGUMENT, "cca_domain_destroy");
    assert_stats_same(&before, a, "refused releases");
    /* live blocks: nothing released, the report lists them */
    EXPECT_FAIL(cca_domain_release(a, d, 0, &r), CCA_ERR_LIVE_BLOCKS, "cca_domain_release");
    cr_assert_eq(r.live_blocks, 1);
    cr_assert_eq(r.leaks_written, 1);
    cr_assert_eq(r.leaks[0].ptr, p);
    cr_assert_eq(r.leaks[0].requested, 3 * MiB);
    cr_assert_eq(r.bytes_released, 0);
    cr_assert_eq(r.bytes_still_reserved, before.reserved_bytes);
    EXPECT_FAIL(cca_domain_destroy(a, d, 0, &r), CCA_ERR_LIVE_BLOCKS, "live blocks");
    assert_stats_same(&before, a, "release with a live block");
    /* the handle stays valid after a refused destroy */
    cca_domain_stats ds;
    EXPECT_OK_KEEPS_MESSAGE(cca_get_domain_stats(a, d, &ds));
    cr_assert_str_eq(ds.name, "model");
    EXPECT_FAIL(cca_get_domain_stats(NULL, d, &ds), CCA_ERR_INVALID_ARGUMENT, "cca_get_domain_stats");
    EXPECT_FAIL(cca_get_domain_stats(a, d, NULL), CCA_ERR_INVALID_ARGUMENT, "cca_get_domain_stats");
    memset(&ds, 0xab, sizeof ds);
    cca_domain_stats untouched = ds;
    EXPECT_FAIL(cca_get_domain_stats(a, foreign, &ds), CCA_ERR_INVALID_ARGUMENT, "cca_get_domain_stats");
    cr_assert_eq(memcmp(&ds, &untouched, sizeof ds), 0);
    cca_domain *of = SENTINEL;
    EXPECT_FAIL(cca_domain_of(NULL, p, &of), CCA_ERR_INVALID_ARGUMENT, "cca_domain_of");
    cr_assert_null(of);
    EXPECT_FAIL(cca_domain_of(a, p, NULL), CCA_ERR_INVALID_ARGUMENT, "cca_domain_of");
    EXPECT_OK_KEEPS_MESSAGE(cca_domain_of(a, p, &of));
    cr_assert_eq(of, d);
    void *q = SENTINEL;
    EXPECT_FAIL(cca_alloc_in(a, foreign, 512, NULL, &q), CCA_ERR_INVALID_ARGUMENT, "cca_alloc_in");
    cr_assert_null(q);
    q = SENTINEL; /* a foreign domain is refused even for size 0 (ccalloc.h) */
    EXPECT_FAIL(cca_alloc_in(a, foreign, 0, NULL, &q), CCA_ERR_INVALID_ARGUMENT, "cca_alloc_in");
    cr_assert_null(q);
    EXPECT_FAIL(cca_alloc_in(NULL, d, 512, NULL, &q), CCA_ERR_INVALID_ARGUMENT, "cca_alloc_in");
    EXPECT_FAIL(cca_alloc_in(a, d, 512, NULL, NULL), CCA_ERR_INVALID_ARGUMENT, "cca_alloc_in");
    q = SENTINEL;
    EXPECT_FAIL(cca_alloc_in(a, d, SIZE_MAX, NULL, &q), CCA_ERR_INVALID_ARGUMENT, "cca_alloc");
    cr_assert_null(q);
    assert_stats_same(&before, a, "refused alloc_in");
    /* FORCE: released, the pointer invalid afterwards */
    EXPECT_OK_KEEPS_MESSAGE(cca_domain_destroy(a, d, CCA_DOMAIN_FORCE, &r));
    cr_assert_eq(r.live_blocks, 1);
    EXPECT_FAIL(cca_free(a, p), CCA_ERR_INVALID_POINTER, "cca_free");
    tu_destroy_clean(other, u);
    tu_teardown(a, u);
}

/* A release whose synchronize fails releases nothing and returns its status. */
Test(api_contract, domain_release_sync_failure_releases_nothing) {
    tu_upstream t;
    cca_upstream *u = tu_upstream_create(&t, 64 * MiB, true);
    cca_allocator *a = tu_allocator(u, NULL);
    cca_domain *d;
    cr_assert_eq(cca_domain_create(a, "m", &d), CCA_OK);
    void *p;
    cr_assert_eq(cca_alloc_in(a, d, 3 * MiB, NULL, &p), CCA_OK);
    cr_assert_eq(cca_free(a, p), CCA_OK);
    cca_stats before = tu_stats(a);
    t.fail_sync = true;
    cca_domain_report r;
    memset(&r, 0xcd, sizeof r); /* on entry only leaks and leaks_cap are read: the rest must be written */
    r.leaks = NULL, r.leaks_cap = 0;
    EXPECT_FAIL(cca_domain_release(a, d, 0, &r), CCA_ERR_UPSTREAM, "cca_domain_release");
    EXPECT_FAIL(cca_domain_destroy(a, d, CCA_DOMAIN_FORCE, &r), CCA_ERR_UPSTREAM, "nothing released");
    t.fail_sync = false;
    cr_assert_eq(r.bytes_released, 0);
    cr_assert_eq(r.segments_released, 0);
    cr_assert_eq(r.bytes_still_reserved, 20 * MiB);
    cr_assert_eq(r.live_blocks, 0);
    cr_assert_eq(r.leaks_written, 0);
    assert_stats_same(&before, a, "release with a failing synchronize");
    EXPECT_OK_KEEPS_MESSAGE(cca_domain_destroy(a, d, 0, &r));
    cr_assert_eq(r.bytes_released, 20 * MiB);
    tu_teardown(a, u);
}

Test(api_contract, domain_reserve_refusals) {
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(64 * MiB, "max_reserved:32M", &u, &a);
    cca_domain *d, *foreign;
    cr_assert_eq(cca_domain_create(a, "m", &d), CCA_OK);
    cca_allocator *other = tu_allocator(u, NULL);
    cr_assert_eq(cca_domain_create(other, "x", &foreign), CCA_OK);
    cca_stats before = tu_stats(a);
    EXPECT_FAIL(cca_domain_reserve(NULL, d, MiB), CCA_ERR_INVALID_ARGUMENT, "cca_domain_reserve");
    EXPECT_FAIL(cca_domain_reserve(a, d, 0), CCA_ERR_INVALID_ARGUMENT, "cca_domain_reserve");
    EXPECT_FAIL(cca_domain_reserve(a, d, SIZE_MAX), CCA_ERR_INVALID_ARGUMENT, "cca_domain_reserve");
    EXPECT_FAIL(cca_domain_reserve(a, foreign, MiB), CCA_ERR_INVALID_ARGUMENT, "cca_domain_reserve");
    EXPECT_FAIL(cca_domain_reserve(a, d, 33 * MiB), CCA_ERR_OUT_OF_MEMORY, "cca_domain_reserve");
    assert_stats_same(&before, a, "refused reserves");
    EXPECT_OK_KEEPS_MESSAGE(cca_domain_reserve(a, d, 4 * MiB));
    before = tu_stats(a);
    EXPECT_FAIL(cca_domain_reserve(a, d, MiB), CCA_ERR_INVALID_ARGUMENT, "arena already");
    assert_stats_same(&before, a, "second arena");
    cr_assert_eq(cca_domain_destroy(a, d, 0, NULL), CCA_OK);
    tu_destroy_clean(other, u);
    tu_teardown(a, u);
}

/* A reserve the device first refuses and that succeeds after the retry
 * released cached memory is a success: the caller's message is kept. */
/* cca_domain_reserve's cost (ccalloc.h): one upstream alloc (expandable:
 * a mem_info, a vm_reserve and its maps), and the device's total, a
 * mem_info, the first time the allocator needs its ceiling. */
Test(api_contract, domain_reserve_asks_the_devices_total_once) {
    for (int expandable = 0; expandable <= 1; expandable++) {
        tu_faulty f;
        cca_upstream *inner = tu_vm_device(64 * MiB, 64 * KiB);
        cca_upstream *u = tu_faulty_create(&f, inner, "fx", false);
        cca_allocator *a = tu_allocator(u, expandable ? "expandable:1" : "expandable:0");
        cca_domain *d1 = NULL, *d2 = NULL;
        cr_assert_eq(cca_domain_create(a, "one", &d1), CCA_OK);
        cr_assert_eq(cca_domain_create(a, "two", &d2), CCA_OK);
        uint64_t info = f.mem_info_calls, allocs = f.calls[TU_FAULT_ALLOC], reserves = f.calls[TU_FAULT_RESERVE];
        cr_assert_eq(cca_domain_reserve(a, d1, 4 * MiB), CCA_OK, "%s", cca_last_error());
        cr_assert_eq(f.mem_info_calls - info, expandable ? 2 : 1, "expandable:%d, the first", expandable);
        info = f.mem_info_calls;
        cr_assert_eq(cca_domain_reserve(a, d2, 4 * MiB), CCA_OK, "%s", cca_last_error());
        cr_assert_eq(f.mem_info_calls - info, expandable ? 1 : 0, "expandable:%d, the second", expandable);
        cr_assert_eq(f.calls[TU_FAULT_ALLOC] - allocs, expandable ? 0 : 2);
        cr_assert_eq(f.calls[TU_FAULT_RESERVE] - reserves, expandable ? 2 : 0);
        cr_assert_eq(cca_domain_destroy(a, d1, 0, NULL), CCA_OK, "%s", cca_last_error());
        cr_assert_eq(cca_domain_destroy(a, d2, 0, NULL), CCA_OK, "%s", cca_last_error());
        tu_destroy_clean(a, u);
        tu_faulty_destroy_clean(u, inner);
    }
}

Test(api_contract, domain_reserve_after_retry_keeps_the_message) {
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(64 * MiB, NULL, &u, &a);
    void *x = tu_alloc(a, 40 * MiB, NULL);
    tu_free(a, x); /* 40 MiB cached: a 32 MiB arena fits only once it is released */
    cca_domain *d;
    cr_assert_eq(cca_domain_create(a, "m", &d), CCA_OK);
    EXPECT_OK_KEEPS_MESSAGE(cca_domain_reserve(a, d, 32 * MiB));
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.reserved_bytes, 32 * MiB);
    cr_assert_eq(s.alloc_retries, 1);
    cr_assert_eq(cca_domain_destroy(a, d, 0, NULL), CCA_OK);
    tu_teardown(a, u);
}

/* ========================================================================== */
/* trace marks, invariants                                                    */
/* ========================================================================== */

Test(api_contract, trace_mark_and_check_invariants) {
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(64 * MiB, NULL, &u, &a);
    EXPECT_FAIL(cca_trace_mark(NULL, "x"), CCA_ERR_INVALID_ARGUMENT, "cca_trace_mark");
    EXPECT_FAIL(cca_trace_mark(a, NULL), CCA_ERR_INVALID_ARGUMENT, "cca_trace_mark");
    char long_name[CCA_MARK_MAX + 2];
    memset(long_name, 'm', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    const char *bad[] = {"", "a,b", "a\"b", "new\nline", "\x7f", "\xc3\xa9", long_name};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) /* refused even when not tracing */
        EXPECT_FAIL(cca_trace_mark(a, bad[i]), CCA_ERR_INVALID_ARGUMENT, "cca_trace_mark");
    long_name[CCA_MARK_MAX] = '\0';
    EXPECT_OK_KEEPS_MESSAGE(cca_trace_mark(a, long_name));
    EXPECT_OK_KEEPS_MESSAGE(cca_trace_mark(a, "load:resnet50 \\ ok"));
    EXPECT_FAIL(cca_check_invariants(NULL), CCA_ERR_INVALID_ARGUMENT, "cca_check_invariants");
    EXPECT_OK_KEEPS_MESSAGE(cca_check_invariants(a));
    tu_teardown(a, u);
}

/* ========================================================================== */
/* messages name the call that failed                                         */
/* ========================================================================== */

/* A failing call's message names the function the caller called, not a
 * helper it went through (cca_trim for cca_empty_cache, cca_domain_release
 * for cca_domain_destroy, an internal "live map" or "upstream" for
 * cca_create and cca_upstream_custom_create). */
Test(api_contract, failure_messages_name_the_function_called) {
    cca_upstream *u;
    cr_assert_eq(cca_upstream_host_create(64 * MiB, &u), CCA_OK);
    cca_config c;
    cca_config_default(&c);
    for (long n = 1;; n++) {
        cr_assert_lt(n, 100);
        cca_allocator *a = SENTINEL;
        hm_arm(n);
        cca_status st = cca_create(&c, u, &a);
        if (!hm_disarm()) {
            cr_assert_eq(st, CCA_OK);
            cr_assert_eq(cca_destroy(a), CCA_OK);
            break;
        }
        cr_assert_eq(st, CCA_ERR_OUT_OF_MEMORY);
        cr_assert_not_null(strstr(cca_last_error(), "cca_create"), "malloc %ld: '%s'", n, cca_last_error());
    }
    cca_upstream_ops ops = {.alloc = nop_alloc, .free = nop_free};
    cca_upstream_ops no_free = {.alloc = nop_alloc};
    cca_upstream_ops some_events = {.alloc = nop_alloc, .free = nop_free, .event_record = nop_event_record};
    cca_upstream_ops some_vm = {.alloc = nop_alloc, .free = nop_free, .vm_granularity = nop_gran};
    cca_upstream *cu;
    EXPECT_FAIL(cca_upstream_custom_create(NULL, NULL, &cu), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_custom_create");
    EXPECT_FAIL(cca_upstream_custom_create(&ops, NULL, NULL), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_custom_create");
    EXPECT_FAIL(cca_upstream_custom_create(&no_free, NULL, &cu), CCA_ERR_INVALID_ARGUMENT,
                "cca_upstream_custom_create");
    EXPECT_FAIL(cca_upstream_custom_create(&some_events, NULL, &cu), CCA_ERR_INVALID_ARGUMENT,
                "cca_upstream_custom_create");
    EXPECT_FAIL(cca_upstream_custom_create(&some_vm, NULL, &cu), CCA_ERR_INVALID_ARGUMENT,
                "cca_upstream_custom_create");
    hm_arm(1);
    EXPECT_FAIL(cca_upstream_custom_create(&ops, NULL, &cu), CCA_ERR_OUT_OF_MEMORY, "cca_upstream_custom_create");
    cr_assert(hm_disarm());
    cca_host_options o = {.capacity = 0};
    EXPECT_FAIL(cca_upstream_host_create_with(&o, &cu), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_host_create_with");
    EXPECT_FAIL(cca_upstream_host_create_with(&o, NULL), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_host_create_with");
    o.capacity = MiB;
    o.vm_granularity = 3 * MiB;
    EXPECT_FAIL(cca_upstream_host_create_with(&o, &cu), CCA_ERR_INVALID_ARGUMENT, "cca_upstream_host_create_with");
    EXPECT_FAIL(cca_empty_cache(NULL, NULL), CCA_ERR_INVALID_ARGUMENT, "cca_empty_cache");
    cca_allocator *a = tu_allocator(u, NULL);
    cca_domain *d;
    cr_assert_eq(cca_domain_create(a, "m", &d), CCA_OK);
    void *p;
    cr_assert_eq(cca_alloc_in(a, d, MiB, NULL, &p), CCA_OK);
    EXPECT_FAIL(cca_domain_destroy(a, d, 0, NULL), CCA_ERR_LIVE_BLOCKS, "cca_domain_destroy");
    cr_assert_not_null(strstr(cca_last_error(), "(m)"), "the domain's name: '%s'", cca_last_error());
    EXPECT_FAIL(cca_domain_release(a, d, 0, NULL), CCA_ERR_LIVE_BLOCKS, "cca_domain_release(m)");
    /* an allocation's failure names the call made, in or out of a domain */
    void *q;
    EXPECT_FAIL(cca_alloc_in(a, d, 1 * GiB, NULL, &q), CCA_ERR_OUT_OF_MEMORY, "cca_alloc_in: ");
    EXPECT_FAIL(cca_alloc_in(a, NULL, 1 * GiB, NULL, &q), CCA_ERR_OUT_OF_MEMORY, "cca_alloc_in: ");
    EXPECT_FAIL(cca_alloc_in(a, d, SIZE_MAX - 8, NULL, &q), CCA_ERR_INVALID_ARGUMENT, "cca_alloc_in: ");
    EXPECT_FAIL(cca_alloc(a, 1 * GiB, NULL, &q), CCA_ERR_OUT_OF_MEMORY, "cca_alloc: ");
    EXPECT_FAIL(cca_alloc(a, SIZE_MAX - 8, NULL, &q), CCA_ERR_INVALID_ARGUMENT, "cca_alloc: ");
    tu_free(a, p);
    cr_assert_eq(cca_domain_destroy(a, d, 0, NULL), CCA_OK);
    tu_teardown(a, u);
}

/* The greedy policy's failures name cca_alloc too: the arena that
 * empty-cache released and the device no longer has room for, and
 * (expandable) trimmed pages the device will not map again, after the
 * retry. Another allocator on the same device holds the rest. */
Test(api_contract, greedy_failure_messages_name_the_function_called) {
    cca_host_options o = {.capacity = 64 * MiB, .vm_granularity = 64 * KiB};
    cca_upstream *u;
    cr_assert_eq(cca_upstream_host_create_with(&o, &u), CCA_OK);
    cca_allocator *other = tu_allocator(u, "log_oom:0");
    void *p, *big;
    for (int expandable = 0; expandable <= 1; expandable++) {
        cca_allocator *a = tu_allocator(u, expandable ? "log_oom:0,policy:greedy,greedy_bytes:32M,expandable:1"
                                                      : "log_oom:0,policy:greedy,greedy_bytes:32M,expandable:0");
        cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK, "%s", cca_last_error());
        big = tu_alloc(other, 48 * MiB, NULL);
        EXPECT_FAIL(cca_alloc(a, MiB, NULL, &p), CCA_ERR_OUT_OF_MEMORY, "cca_alloc: ");
        tu_free(other, big);
        cr_assert_eq(cca_empty_cache(other, NULL), CCA_OK);
        if (expandable) { /* the arena kept, 24 MiB of its pages unmapped */
            p = tu_alloc(a, MiB, NULL);
            tu_free(a, p);
            cr_assert_eq(cca_trim(a, 8 * MiB, NULL), CCA_OK, "%s", cca_last_error());
            big = tu_alloc(other, 48 * MiB, NULL);
            EXPECT_FAIL(cca_alloc(a, 30 * MiB, NULL, &p), CCA_ERR_OUT_OF_MEMORY, "cca_alloc: ");
            tu_free(other, big);
            cr_assert_eq(cca_empty_cache(other, NULL), CCA_OK);
        }
        cr_assert_eq(cca_destroy(a), CCA_OK);
    }
    tu_teardown(other, u);
}

/* ========================================================================== */
/* docs/allocator.md says what cca_config_validate refuses                    */
/* ========================================================================== */

static char *read_doc(const char *rel) {
    const char *root = tu_source_dir();
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s", path);
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        fwrite(chunk, 1, n, m);
    fclose(f);
    fclose(m);
    return text;
}

/* Every cross-field rule cca_config_validate enforces is in the doc's list
 * ("Rules across options are checked by cca_config_validate ..."). */
Test(api_contract, docs_list_every_cross_field_rule) {
    cca_config c;
    cca_config_default(&c);
    EXPECT_FAIL(cca_config_parse(&c, "max_split:30M,expandable:1"), CCA_ERR_CONFIG, "max_split");
    char *doc = read_doc("docs/allocator.md");
    char *rules = strstr(doc, "Rules across options are checked by `cca_config_validate`");
    cr_assert_not_null(rules);
    char *end = strchr(rules, '\n');
    *end = '\0';
    cr_assert_not_null(strstr(rules, "small_max` ≤ `small_segment"), "%s", rules);
    cr_assert_not_null(strstr(rules, "large_min` ≤ `medium_segment"), "%s", rules);
    cr_assert_not_null(strstr(rules, "refused with `policy:greedy`"), "%s", rules);
    cr_assert_not_null(strstr(rules, "`expandable:1`"), "the doc's rules omit max_split with expandable:1: %s",
                       rules);
    free(doc);
}

/* cca_format_bytes with nowhere to write: "" and nothing written; with a
 * short buffer, the text cut and terminated. */
Test(api_contract, format_bytes_without_room) {
    cr_assert_str_eq(cca_format_bytes(5 * MiB, NULL, 32), "");
    char buf[8] = "xxxxxxx";
    cr_assert_str_eq(cca_format_bytes(5 * MiB, buf, 0), "");
    cr_assert_str_eq(buf, "xxxxxxx", "len 0: nothing written");
    cr_assert_eq(cca_format_bytes(5 * MiB, buf, 5), buf);
    cr_assert_str_eq(buf, "5.00");
    char full[32];
    cr_assert_str_eq(cca_format_bytes(3 * MiB / 2, full, sizeof full), "1.50 MiB");
}

/* What a writer of the allocator's state writes (it succeeds, keeping the
 * caller's message); the caller frees it. */
static char *written_by(cca_status (*writer)(const cca_allocator *, FILE *), const cca_allocator *a) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    EXPECT_OK_KEEPS_MESSAGE(writer(a, f));
    fclose(f);
    return buf;
}

/* Four segments for the snapshot tests: three large ones reserved in
 * address order, the middle one's block freed, and a small one (classic
 * segments: one per large request). */
typedef struct four_segments {
    cca_upstream *u;
    cca_allocator *a;
    void *p[3], *small;
} four_segments;

static four_segments four_segments_make(void) {
    four_segments f;
    tu_host_allocator(256 * MiB, "expandable:0", &f.u, &f.a);
    for (int i = 0; i < 3; i++)
        f.p[i] = tu_alloc(f.a, 12 * MiB, NULL); /* large: one segment each */
    f.small = tu_alloc(f.a, 4 * KiB, NULL);
    tu_free(f.a, f.p[1]);
    return f;
}

static void four_segments_end(four_segments *f) {
    tu_free(f->a, f->p[0]);
    tu_free(f->a, f->p[2]);
    tu_free(f->a, f->small);
    tu_teardown(f->a, f->u);
}

/* cca_write_snapshot_json lists "every segment with its blocks ... in
 * address order" (ccalloc.h), as cca_write_snapshot_torch does: segments
 * are kept newest first, so three segments reserved in address order (the
 * simulated device places first fit by address) must not come out
 * reversed. Each segment's blocks are in address order too, and each block
 * carries the fields the header names. */
Test(api_contract, snapshot_json_lists_segments_in_address_order) {
    four_segments seg = four_segments_make();
    cca_allocator *a = seg.a;
    char *buf = written_by(cca_write_snapshot_json, a);
    const char *segs = strstr(buf, "\"segments\":[");
    cr_assert_not_null(segs, "%s", buf);
    uintptr_t last = 0;
    int n = 0;
    for (const char *at = strstr(segs, "\"address\":\"0x"); at; at = strstr(at + 1, "\"address\":\"0x"), n++) {
        uintptr_t base = (uintptr_t)strtoull(at + strlen("\"address\":\""), NULL, 16);
        cr_assert_gt(base, last, "segment %d at %#lx follows one at %#lx: not address order\n%s", n,
                     (unsigned long)base, (unsigned long)last, buf);
        last = base;
    }
    cr_assert_eq(n, 4, "%d segments in the snapshot", n);
    cr_assert_not_null(strstr(buf, "\"blocks\":[{\"offset\":0,\"size\":"), "%s", buf);
    cr_assert_not_null(strstr(buf, "\"requested\":"), "%s", buf);
    free(buf);
    four_segments_end(&seg);
}

/* The JSON snapshot is rendered into host memory (so that a slow file stalls
 * no other caller) and sorts its segments by address in one host allocation
 * (a walk by address took seconds for tens of thousands of segments); with
 * no host memory it writes straight to the file and falls back on that
 * walk: still CCA_OK, still address order, the same bytes. */
Test(api_contract, snapshot_json_without_host_memory_is_the_same_snapshot) {
    four_segments seg = four_segments_make();
    cca_allocator *a = seg.a;
    char *want = written_by(cca_write_snapshot_json, a);
    static char got[1 << 16];
    memset(got, 0, sizeof got);
    FILE *f = fmemopen(got, sizeof got - 1, "w"); /* glibc's own allocation: not failed */
    cr_assert_not_null(f);
    tu_malloc_arm(1, true); /* every host allocation from now fails */
    cca_status st = cca_write_snapshot_json(a, f);
    long injected = tu_malloc_disarm();
    cr_assert_eq(st, CCA_OK, "%s", cca_last_error());
    cr_assert_eq(fclose(f), 0);
    cr_assert_geq(injected, 1, "the snapshot asked for host memory and was refused");
    cr_assert_str_eq(got, want);
    /* and any ONE host allocation refused (the copy's stream, the sort's
     * array, whichever comes k-th): the same bytes each time */
    for (long k = 1; k <= 4; k++) {
        memset(got, 0, sizeof got);
        f = fmemopen(got, sizeof got - 1, "w");
        cr_assert_not_null(f);
        tu_malloc_arm(k, false);
        st = cca_write_snapshot_json(a, f);
        tu_malloc_disarm();
        cr_assert_eq(st, CCA_OK, "allocation %ld refused: %s", k, cca_last_error());
        cr_assert_eq(fclose(f), 0);
        cr_assert_str_eq(got, want, "allocation %ld refused", k);
    }
    free(want);
    four_segments_end(&seg);
}

/* Whole free segments go back largest first (equal sizes: lowest address
 * first), as ccalloc.h says, also with every host allocation refused: the
 * order is a sort through the segments' own records, which needs none.
 * Trim stops at its budget after the largest; empty-cache takes the rest
 * in the same order. */
Test(api_contract, trim_without_host_memory_releases_largest_first) {
    tu_upstream t;
    cca_upstream *u = tu_upstream_create(&t, 256 * MiB, false);
    cca_allocator *a = tu_allocator(u, "expandable:0");
    void *p[4] = {tu_alloc(a, 16 * MiB, NULL), tu_alloc(a, 12 * MiB, NULL), tu_alloc(a, 14 * MiB, NULL),
                  tu_alloc(a, 12 * MiB, NULL)};
    for (int i = 0; i < 4; i++)
        tu_free(a, p[i]);
    size_t freed = t.freed_count;
    cca_release_report r;
    memset(&r, 0, sizeof r);
    tu_malloc_arm(1, true); /* every host allocation from now fails */
    cca_status st = cca_trim(a, 40 * MiB, &r);
    tu_malloc_disarm();
    cr_assert_eq(st, CCA_OK, "%s", cca_last_error());
    cr_assert_eq(r.segments_released, 1, "54 MiB over a 40 MiB budget: the 16 MiB segment alone");
    cr_assert_eq(r.bytes_released, 16 * MiB);
    cr_assert_eq(t.freed_sizes[freed], 16 * MiB, "largest first");
    memset(&r, 0, sizeof r);
    tu_malloc_arm(1, true);
    st = cca_empty_cache(a, &r);
    tu_malloc_disarm();
    cr_assert_eq(st, CCA_OK, "%s", cca_last_error());
    cr_assert_eq(r.segments_released, 3);
    cr_assert_eq(r.bytes_released, 38 * MiB);
    cr_assert_eq(t.used, 0);
    cr_assert_eq(t.freed_count, freed + 4);
    cr_assert_eq(t.freed_sizes[freed + 1], 14 * MiB);
    cr_assert_eq(t.freed_sizes[freed + 2], 12 * MiB);
    void *low = (uintptr_t)p[1] < (uintptr_t)p[3] ? p[1] : p[3], *high = low == p[1] ? p[3] : p[1];
    cr_assert_eq(t.freed_ptrs[freed + 2], low, "equal sizes: the lower address first");
    cr_assert_eq(t.freed_sizes[freed + 3], 12 * MiB);
    cr_assert_eq(t.freed_ptrs[freed + 3], high);
    tu_teardown(a, u);
}

/* The live map doubles at load factor 1 (live_map.c, 256 buckets first);
 * with no host memory for the bigger table it keeps the old one: the
 * cca_alloc that needed it still succeeds, and every live block is still
 * found (cca_block_size, cca_free), with longer chains. */
Test(api_contract, alloc_succeeds_when_the_live_map_cannot_grow) {
    enum { N = 256 + 64 };
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(64 * MiB, "expandable:0", &u, &a);
    static void *p[N];
    for (int i = 0; i < 256; i++) /* the map is full: the next insert grows it */
        p[i] = tu_alloc(a, 512, NULL);
    tu_malloc_arm(1, true); /* every host allocation from now fails */
    cca_status st = cca_alloc(a, 512, NULL, &p[256]);
    long injected = tu_malloc_disarm();
    cr_assert_eq(st, CCA_OK, "%s", cca_last_error());
    cr_assert_eq(injected, 1, "the bigger table, and only it, was refused");
    for (int i = 257; i < N; i++)
        p[i] = tu_alloc(a, 512, NULL);
    cr_assert_eq(tu_stats(a).active_blocks, N);
    for (int i = 0; i < N; i++)
        cr_assert_eq(tu_block_size(a, p[i]), 512, "block %d", i);
    tu_check(a);
    for (int i = 0; i < N; i++)
        tu_free(a, p[i]);
    tu_teardown(a, u);
}

/* The upstream failing otherwise than for want of memory: its status comes
 * back as it is, with no OOM retry and no OOM counted (ccalloc.h: cca_create,
 * cca_alloc, cca_domain_reserve); and greedy_fraction over an upstream
 * without mem_info is CCA_ERR_UPSTREAM at cca_create (cca_upstream_ops). */
Test(api_contract, upstream_failures_other_than_oom_pass_through) {
    cca_upstream_ops ops = {.alloc = nop_alloc, .free = nop_free, .name = "nomeminfo"};
    cca_upstream *cu;
    cr_assert_eq(cca_upstream_custom_create(&ops, NULL, &cu), CCA_OK);
    cca_config c;
    cca_config_default(&c);
    cr_assert_eq(cca_config_parse(&c, "policy:greedy"), CCA_OK);
    cca_allocator *a = SENTINEL;
    EXPECT_FAIL(cca_create(&c, cu, &a), CCA_ERR_UPSTREAM, "greedy_fraction");
    cr_assert_null(a);
    cr_assert_eq(cca_config_parse(&c, "greedy_bytes:8M"), CCA_OK); /* sized without mem_info: the device says no */
    a = SENTINEL;
    EXPECT_FAIL(cca_create(&c, cu, &a), CCA_ERR_OUT_OF_MEMORY, "cca_create");
    cr_assert_null(a);
    cca_upstream_destroy(cu);

    tu_upstream t;
    cca_upstream *u = tu_upstream_create(&t, 64 * MiB, false);
    t.alloc_error = CCA_ERR_UPSTREAM;
    t.fail_at = t.calls + 1;
    a = SENTINEL;
    EXPECT_FAIL(cca_create(&c, u, &a), CCA_ERR_UPSTREAM, "cca_create");
    cr_assert_null(a);
    a = tu_allocator(u, NULL);
    void *cached = tu_alloc(a, 12 * MiB, NULL);
    tu_free(a, cached); /* something the OOM retry could release */
    cca_stats before = tu_stats(a);
    void *p = SENTINEL;
    t.fail_at = t.calls + 1;
    EXPECT_FAIL(cca_alloc(a, MiB, NULL, &p), CCA_ERR_UPSTREAM, "cca_alloc");
    cr_assert_null(p);
    assert_stats_same(&before, a, "an upstream error: no retry, no OOM, nothing released");
    /* medium: the preferred 20M segment refused with an upstream error is
     * not followed by the least segment, which an OOM would be */
    uint64_t allocs = t.alloc_calls;
    p = SENTINEL;
    t.fail_at = t.calls + 1;
    EXPECT_FAIL(cca_alloc(a, 4 * MiB, NULL, &p), CCA_ERR_UPSTREAM, "cca_alloc");
    cr_assert_null(p);
    cr_assert_eq(t.alloc_calls, allocs + 1, "one upstream alloc, no second size");
    assert_stats_same(&before, a, "a medium request's upstream error: no retry");
    cca_domain *d;
    cr_assert_eq(cca_domain_create(a, "m", &d), CCA_OK);
    before = tu_stats(a);
    t.fail_at = t.calls + 1;
    EXPECT_FAIL(cca_domain_reserve(a, d, 4 * MiB), CCA_ERR_UPSTREAM, "cca_domain_reserve");
    assert_stats_same(&before, a, "a reserve refused with an upstream error: no retry");
    EXPECT_OK_KEEPS_MESSAGE(cca_domain_reserve(a, d, 4 * MiB)); /* d has no arena: a first one is taken */
    cr_assert_eq(cca_domain_destroy(a, d, 0, NULL), CCA_OK);
    tu_teardown(a, u);
}

/* Details ccalloc.h states: an empty CCALLOC_CONF is no config; recording
 * a block's own stream (or one already recorded) changes nothing, so its
 * free needs no event; cca_domain_stats_write_json adds each domain's
 * arena_bytes to the stats. */
Test(api_contract, header_details_env_record_stream_arena_bytes) {
    cca_config c, before;
    cca_config_default(&c);
    before = c;
    setenv("CCALLOC_CONF", "", 1);
    EXPECT_OK_KEEPS_MESSAGE(cca_config_apply_env(&c));
    unsetenv("CCALLOC_CONF");
    cr_assert_eq(memcmp(&c, &before, sizeof c), 0);

    tu_upstream t;
    cca_upstream *u = tu_upstream_create(&t, 64 * MiB, true);
    cca_allocator *a = tu_allocator(u, NULL);
    void *p = tu_alloc(a, 8 * KiB, S1);
    EXPECT_OK_KEEPS_MESSAGE(cca_record_stream(a, p, S1));
    uint64_t records = t.event_records;
    tu_free(a, p);
    cr_assert_eq(t.event_records, records, "a block used only on its own stream waited on an event");
    cr_assert_eq(tu_stats(a).pending_blocks, 0);

    cca_domain *d;
    cr_assert_eq(cca_domain_create(a, "m", &d), CCA_OK);
    cr_assert_eq(cca_domain_reserve(a, d, 4 * MiB), CCA_OK, "%s", cca_last_error());
    char *buf = written_by(cca_domain_stats_write_json, a);
    const char *m = strstr(buf, "\"name\": \"m\"");
    cr_assert_not_null(m, "%s", buf);
    cr_assert_not_null(strstr(buf, "\"arena_bytes\": 0}"), "the default domain has no arena: %s", buf);
    cr_assert_not_null(strstr(m, "\"arena_bytes\": 4194304}"), "%s", buf);
    free(buf);
    cr_assert_eq(cca_domain_destroy(a, d, 0, NULL), CCA_OK);
    tu_teardown(a, u);
}
