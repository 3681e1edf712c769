/*
 * test_config.c — allocator/src/support/config.c: the option table, parsing (every
 * option, size suffixes, booleans), rejection of unknown keys, of removed
 * keys (naming what replaced them), out-of-range and malformed values with
 * a message naming the key, all-or-nothing application, cross-field
 * validation, CCALLOC_CONF, and printing; numbers read and written in C's
 * format under a locale with a decimal comma (every writer of a fraction).
 */
#include "alloc_test_util.h"
#include "comma_locale.h"

#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static cca_config defaults(void) {
    cca_config c;
    cca_config_default(&c);
    return c;
}

static cca_config parse_ok(const char *text) {
    cca_config c = defaults();
    cca_status st = cca_config_parse(&c, text);
    cr_assert_eq(st, CCA_OK, "'%s': %s", text, cca_last_error());
    return c;
}

/* Must fail with CCA_ERR_CONFIG, leave the config untouched, and name `word`. */
static void parse_fails(const char *text, const char *word) {
    cca_config c = defaults(), before = c;
    cca_status st = cca_config_parse(&c, text);
    cr_assert_eq(st, CCA_ERR_CONFIG, "'%s' was accepted (%s)", text, cca_status_string(st));
    cr_assert(memcmp(&c, &before, sizeof c) == 0, "'%s' changed the config", text);
    cr_assert(strstr(cca_last_error(), word) != NULL, "'%s': message '%s' does not name '%s'", text, cca_last_error(),
              word);
}

Test(config, defaults_are_the_documented_ones) {
    cca_config c = defaults();
    cr_assert_eq(c.policy, CCA_POLICY_GROWTH);
    cr_assert_eq(c.greedy_fraction, 0.9);
    cr_assert_eq(c.greedy_bytes, 0);
    cr_assert_eq(c.max_reserved, 0);
    cr_assert_eq(c.small_max, 1 * MiB);
    cr_assert_eq(c.small_segment, 2 * MiB);
    cr_assert_eq(c.medium_segment, 20 * MiB);
    cr_assert_eq(c.large_min, 10 * MiB);
    cr_assert_eq(c.segment_round, 2 * MiB);
    cr_assert_eq(c.max_split, 0);
    cr_assert_eq(c.small_pool, 1);
    cr_assert_eq(c.medium_pool, 1);
    cr_assert_eq(c.log_oom, 1);
    cr_assert_eq(c.expandable, 1);
    cr_assert_eq(cca_config_validate(&c), CCA_OK);
    cca_config_default(NULL); /* no crash */
}

Test(config, every_option_parses) {
    /* growth over classic segments: max_split has no meaning under greedy
     * (refused, test_pool) nor with expandable segments */
    cca_config c = parse_ok("policy:growth,greedy_fraction:0.75,greedy_bytes:3G,max_reserved:10G,small_max:256K,"
                            "small_segment:4M,medium_segment:32M,large_min:16M,segment_round:1M,max_split:64M,"
                            "small_pool:0,medium_pool:no,log_oom:off,expandable:0");
    cr_assert_eq(c.policy, CCA_POLICY_GROWTH);
    cr_assert_eq(c.greedy_fraction, 0.75);
    cr_assert_eq(c.greedy_bytes, 3 * GiB);
    cr_assert_eq(c.max_reserved, 10 * GiB);
    cr_assert_eq(c.small_max, 256 * KiB);
    cr_assert_eq(c.small_segment, 4 * MiB);
    cr_assert_eq(c.medium_segment, 32 * MiB);
    cr_assert_eq(c.large_min, 16 * MiB);
    cr_assert_eq(c.segment_round, 1 * MiB);
    cr_assert_eq(c.max_split, 64 * MiB);
    cr_assert_eq(c.small_pool, 0);
    cr_assert_eq(c.medium_pool, 0);
    cr_assert_eq(c.log_oom, 0);
    cr_assert_eq(c.expandable, 0);
    cr_assert_eq(parse_ok("policy:growth").policy, CCA_POLICY_GROWTH);
    cr_assert_eq(parse_ok("policy:GREEDY").policy, CCA_POLICY_GREEDY, "values are case-insensitive");
}

Test(config, size_suffixes) {
    struct {
        const char *text;
        size_t value;
    } cases[] = {
        {"max_reserved:0", 0},           {"max_reserved:4096", 4096},
        {"max_reserved:1k", KiB},        {"max_reserved:512K", 512 * KiB},
        {"max_reserved:3M", 3 * MiB},    {"max_reserved:4G", 4 * GiB},
        {"max_reserved:2T", 2048 * GiB}, {"max_reserved:4GiB", 4 * GiB},
        {"max_reserved:4GB", 4 * GiB},   {"max_reserved:7mb", 7 * MiB},
        {"max_reserved:100B", 100},      {"max_reserved:16Gi", 16 * GiB},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        cr_assert_eq(parse_ok(cases[i].text).max_reserved, cases[i].value, "%s", cases[i].text);
}

Test(config, booleans) {
    const char *yes[] = {"1", "true", "on", "yes", "TRUE", "Yes"}, *no[] = {"0", "false", "off", "no", "OFF"};
    char text[64];
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        snprintf(text, sizeof text, "small_pool:0,small_pool:%s", yes[i]);
        cr_assert_eq(parse_ok(text).small_pool, 1, "%s", yes[i]);
    }
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        snprintf(text, sizeof text, "log_oom:%s", no[i]);
        cr_assert_eq(parse_ok(text).log_oom, 0, "%s", no[i]);
    }
    /* the message names every spelling the parser takes, not only 0 and 1 */
    cca_config c = defaults();
    cr_assert_eq(cca_config_parse(&c, "log_oom:maybe"), CCA_ERR_CONFIG);
    cr_assert_str_eq(cca_last_error(),
                     "invalid value 'maybe' for key 'log_oom' (expected 1, true, on, yes or 0, false, off, no)");
}

Test(config, whitespace_empty_items_and_repeats) {
    cca_config c = parse_ok("  policy : greedy ,, max_reserved: 4G ,");
    cr_assert_eq(c.policy, CCA_POLICY_GREEDY);
    cr_assert_eq(c.max_reserved, 4 * GiB);
    cr_assert_eq(parse_ok("max_reserved:1G,max_reserved:2G").max_reserved, 2 * GiB, "the last one wins");
    cca_config d = defaults(), e = d;
    cr_assert_eq(cca_config_parse(&d, ""), CCA_OK);
    cr_assert_eq(cca_config_parse(&d, NULL), CCA_OK);
    cr_assert(memcmp(&d, &e, sizeof d) == 0);
    cr_assert_eq(cca_config_parse(NULL, "policy:greedy"), CCA_ERR_INVALID_ARGUMENT);
}

Test(config, parse_applies_on_top_of_the_given_config) {
    cca_config c = parse_ok("max_reserved:1G");
    cr_assert_eq(cca_config_parse(&c, "policy:greedy"), CCA_OK);
    cr_assert_eq(c.max_reserved, 1 * GiB, "earlier settings stay");
    cr_assert_eq(c.policy, CCA_POLICY_GREEDY);
}

Test(config, unknown_keys_are_rejected_by_name) {
    parse_fails("greedy_fractoin:0.5", "greedy_fractoin");
    parse_fails("policy:greedy,bogus:1", "bogus");
    parse_fails("Policy:greedy", "Policy"); /* keys are case-sensitive */
    parse_fails("max_reserved_bytes:1G", "max_reserved_bytes");
}

Test(config, out_of_range_values_are_rejected_by_name) {
    parse_fails("greedy_fraction:1.5", "greedy_fraction");
    parse_fails("greedy_fraction:0", "greedy_fraction");
    parse_fails("greedy_fraction:-0.5", "greedy_fraction");
    parse_fails("greedy_fraction:1.0000001", "greedy_fraction");
    parse_fails("greedy_fraction:inf", "greedy_fraction");
    parse_fails("small_max:256", "small_max");
    parse_fails("small_max:2G", "small_max");
    parse_fails("small_segment:32K", "small_segment");
    parse_fails("medium_segment:65G", "medium_segment");
    parse_fails("segment_round:256", "segment_round");
    parse_fails("segment_round:2G", "segment_round");
    parse_fails("large_min:511", "large_min");
    cca_config c = parse_ok("greedy_fraction:1");
    cr_assert_eq(c.greedy_fraction, 1.0, "1 is in (0, 1]");
    cr_assert_eq(parse_ok("greedy_fraction:1e-9").greedy_fraction, 1e-9);
}

Test(config, malformed_values_are_rejected_by_name) {
    parse_fails("policy", "policy");
    parse_fails("policy:", "policy");
    parse_fails("policy:fastest", "policy");
    parse_fails("max_reserved:lots", "max_reserved");
    parse_fails("max_reserved:", "max_reserved");
    parse_fails("max_reserved:-1", "max_reserved");
    parse_fails("max_reserved:+1", "max_reserved");
    parse_fails("max_reserved:4X", "max_reserved");
    parse_fails("max_reserved:4..5G", "max_reserved");
    parse_fails("max_reserved:.", "max_reserved");
    parse_fails("max_reserved:1e9", "max_reserved");
    parse_fails("max_reserved:0x10", "max_reserved");
    parse_fails("max_reserved:4 G", "max_reserved");
    parse_fails("max_reserved:99999999999999999999", "max_reserved");
    parse_fails("max_reserved:17179869184G", "max_reserved"); /* 2^34 G overflows 64 bits */
    parse_fails("greedy_bytes:123456789012345678901234567890123456789012345678901234567890123456", "greedy_bytes");
    parse_fails("greedy_fraction:abc", "greedy_fraction");
    parse_fails("greedy_fraction:nan", "greedy_fraction");
    parse_fails("greedy_fraction:0.5x", "greedy_fraction");
    parse_fails("greedy_fraction:", "greedy_fraction");
    parse_fails("small_pool:maybe", "small_pool");
    parse_fails("small_pool:2", "small_pool");
    parse_fails("log_oom:", "log_oom");
    parse_fails(":1", "''");
    parse_fails("max_reserved=4G", "max_reserved=4G");
}

Test(config, parsing_is_all_or_nothing) {
    cca_config c = parse_ok("max_reserved:1G");
    cca_config before = c;
    cr_assert_eq(cca_config_parse(&c, "policy:greedy,greedy_bytes:8M,bogus:1"), CCA_ERR_CONFIG);
    cr_assert(memcmp(&c, &before, sizeof c) == 0, "the valid items before the bad one were not applied");
    /* cross-field rules are checked on the whole result too */
    cr_assert_eq(cca_config_parse(&c, "policy:greedy,small_max:4M"), CCA_ERR_CONFIG);
    cr_assert(strstr(cca_last_error(), "small_max") != NULL, "%s", cca_last_error());
    cr_assert(memcmp(&c, &before, sizeof c) == 0);
    /* ...and the same pair is fine once small_segment grows with it */
    cr_assert_eq(cca_config_parse(&c, "small_segment:8M,small_max:4M"), CCA_OK);
    cr_assert_eq(c.small_max, 4 * MiB);
}

Test(config, cross_field_rules) {
    parse_fails("small_max:4M", "small_max");
    parse_fails("segment_round:1000", "multiples of 512");
    parse_fails("small_max:64K,small_segment:100000", "multiples of 512");
    parse_fails("large_min:32M", "large_min");
    parse_fails("max_split:64M", "expandable:0"); /* classic segments' option: the message says how to get them */
    cca_config c = defaults();
    c.policy = (cca_policy)7;
    cr_assert_eq(cca_config_validate(&c), CCA_ERR_CONFIG);
    cr_assert(strstr(cca_last_error(), "policy") != NULL);
    c = defaults();
    c.small_pool = 2;
    cr_assert_eq(cca_config_validate(&c), CCA_ERR_CONFIG);
    cr_assert(strstr(cca_last_error(), "small_pool") != NULL);
    c = defaults();
    c.greedy_fraction = 0.0;
    cr_assert_eq(cca_config_validate(&c), CCA_ERR_CONFIG);
    /* a size set outside its range, below or above, as parse would refuse it */
    c = defaults();
    c.small_max = 256;
    cr_assert_eq(cca_config_validate(&c), CCA_ERR_CONFIG);
    cr_assert_str_eq(cca_last_error(), "out-of-range value for key 'small_max': 256 not in [512, 1073741824]");
    c = defaults();
    c.segment_round = 2048 * MiB;
    cr_assert_eq(cca_config_validate(&c), CCA_ERR_CONFIG);
    cr_assert_str_eq(cca_last_error(),
                     "out-of-range value for key 'segment_round': 2147483648 not in [512, 1073741824]");
    cr_assert_eq(cca_config_validate(NULL), CCA_ERR_INVALID_ARGUMENT);
}

/* ---- CCALLOC_CONF ------------------------------------------------------------------- */

Test(config, env_applies_when_create_gets_no_config) {
    cr_assert_eq(setenv("CCALLOC_CONF", "policy:greedy,greedy_bytes:8M,max_reserved:1G", 1), 0);
    cca_upstream *u;
    cr_assert_eq(cca_upstream_host_create(1 * GiB, &u), CCA_OK);
    cca_allocator *a = NULL;
    cr_assert_eq(cca_create(NULL, u, &a), CCA_OK, "%s", cca_last_error());
    cca_config c;
    cr_assert_eq(cca_get_config(a, &c), CCA_OK);
    cr_assert_eq(c.policy, CCA_POLICY_GREEDY);
    cr_assert_eq(c.max_reserved, 1 * GiB);
    cr_assert_eq(tu_stats(a).reserved_bytes, 8 * MiB, "the greedy arena from the env");
    tu_destroy_clean(a, u);
    /* an explicit config wins: the env is not read */
    cca_config explicit_cfg = defaults();
    a = NULL;
    cr_assert_eq(cca_create(&explicit_cfg, u, &a), CCA_OK);
    cr_assert_eq(cca_get_config(a, &c), CCA_OK);
    cr_assert_eq(c.policy, CCA_POLICY_GROWTH);
    cr_assert_eq(tu_stats(a).reserved_bytes, 0);
    tu_teardown(a, u);
    /* cca_config_apply_env applies it on top of anything */
    c = parse_ok("small_max:512K");
    cr_assert_eq(cca_config_apply_env(&c), CCA_OK);
    cr_assert_eq(c.policy, CCA_POLICY_GREEDY);
    cr_assert_eq(c.small_max, 512 * KiB);
    cr_assert_eq(cca_config_apply_env(NULL), CCA_ERR_INVALID_ARGUMENT);
}

Test(config, bad_env_is_logged_and_the_defaults_are_used) {
    cr_assert_eq(setenv("CCALLOC_CONF", "policy:greedy,max_reserved:lots", 1), 0);
    cca_config c = parse_ok("small_max:512K"), before = c;
    cr_assert_eq(cca_config_apply_env(&c), CCA_ERR_CONFIG);
    cr_assert(memcmp(&c, &before, sizeof c) == 0);
    cr_assert(strstr(cca_last_error(), "CCALLOC_CONF") && strstr(cca_last_error(), "max_reserved"), "%s",
              cca_last_error());
    tu_log_capture log = {0};
    cca_set_log_callback(tu_capture_log, &log);
    cca_upstream *u;
    cr_assert_eq(cca_upstream_host_create(1 * GiB, &u), CCA_OK);
    cca_allocator *a = NULL;
    cca_set_error(CCA_ERR_IO, "the caller's own message");
    cr_assert_eq(cca_create(NULL, u, &a), CCA_OK);
    cca_set_log_callback(NULL, NULL);
    cr_assert_str_eq(cca_last_error(), "the caller's own message", "a logged bad CCALLOC_CONF is no failure");
    cr_assert_eq(log.lines, 1);
    cr_assert(strstr(log.last, "max_reserved") && strstr(log.last, "defaults"), "%s", log.last);
    cca_config in_force, def = defaults();
    cr_assert_eq(cca_get_config(a, &in_force), CCA_OK);
    cr_assert(memcmp(&in_force, &def, sizeof def) == 0, "the whole env string was ignored");
    tu_teardown(a, u);
}

Test(config, empty_env_changes_nothing) {
    cr_assert_eq(setenv("CCALLOC_CONF", "", 1), 0);
    cca_config c = defaults(), before = c;
    cr_assert_eq(cca_config_apply_env(&c), CCA_OK);
    cr_assert(memcmp(&c, &before, sizeof c) == 0);
    cr_assert_eq(unsetenv("CCALLOC_CONF"), 0);
    cr_assert_eq(cca_config_apply_env(&c), CCA_OK);
    cr_assert(memcmp(&c, &before, sizeof c) == 0);
}

/* ---- printing ------------------------------------------------------------------- */

static char *print_config(const cca_config *c, int with_docs) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    cr_assert_eq(cca_config_print(c, f, with_docs), CCA_OK);
    fclose(f);
    return buf;
}

static const char *option_names[] = {
    "policy",         "greedy_fraction", "greedy_bytes",     "max_reserved", "small_max",  "small_segment",
    "medium_segment", "large_min",       "segment_round",    "max_split",    "small_pool", "medium_pool",
    "log_oom",        "expandable",      "expandable_ahead", "hold_peak",    "history"};
#define OPTION_COUNT (sizeof option_names / sizeof option_names[0])

Test(config, print_lists_every_option_and_parses_back) {
    cca_config c = parse_ok("policy:growth,greedy_fraction:0.625,greedy_bytes:1000000,max_reserved:6G,"
                            "small_max:768K,max_split:40M,small_pool:0,medium_pool:0,log_oom:0,expandable:0");
    char *text = print_config(&c, 0);
    int lines = 0;
    for (const char *p = text; *p; p++)
        lines += *p == '\n';
    cr_assert_eq(lines, (int)OPTION_COUNT, "%s", text);
    for (size_t i = 0; i < OPTION_COUNT; i++) {
        char key[64];
        snprintf(key, sizeof key, "%s:", option_names[i]);
        cr_assert(strstr(text, key) != NULL, "'%s' missing from\n%s", option_names[i], text);
    }
    cr_assert(strstr(text, "max_reserved:6144M\n") != NULL, "%s", text);
    cr_assert(strstr(text, "greedy_bytes:1000000\n") != NULL, "%s", text);
    /* the printed form is itself a config string, its lines items */
    cca_config back = defaults();
    cr_assert_eq(cca_config_parse(&back, text), CCA_OK, "%s: %s", text, cca_last_error());
    cr_assert(memcmp(&back, &c, sizeof c) == 0, "round trip through print and parse");
    /* and with its lines joined by commas */
    for (char *p = text; *p; p++)
        if (*p == '\n')
            *p = ',';
    back = defaults();
    cr_assert_eq(cca_config_parse(&back, text), CCA_OK, "%s: %s", text, cca_last_error());
    cr_assert(memcmp(&back, &c, sizeof c) == 0, "round trip through print and parse, one line");
    free(text);
}

/* Newlines separate items as commas do; spaces, tabs and CRs around keys and
 * values are blanks (a config file written on any system); a blank inside a
 * key or a value is not. */
Test(config, newlines_separate_and_tabs_are_blanks) {
    static const char *same[] = {
        "max_reserved:2G,small_max:768K",     "max_reserved:2G\nsmall_max:768K",
        "max_reserved:2G\r\nsmall_max:768K\r\n", "\t max_reserved\t:\t2G\t\n\n,\nsmall_max : 768K \t",
        "\n\nmax_reserved:2G,\n,small_max:768K\n",
    };
    cca_config want = parse_ok(same[0]);
    for (size_t i = 1; i < sizeof same / sizeof same[0]; i++) {
        cca_config c = defaults();
        cr_assert_eq(cca_config_parse(&c, same[i]), CCA_OK, "[%zu] %s", i, cca_last_error());
        cr_assert(memcmp(&c, &want, sizeof c) == 0, "[%zu] parses as '%s'", i, same[0]);
    }
    static const char *bad[] = {"max_res\terved:2G", "max_reserved:2\tG", "max_reserved:2G\vsmall_max:1M",
                                "max_reserved\n:2G", "max_reserved:\n2G"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cca_config c = defaults(), before = c;
        cr_assert_eq(cca_config_parse(&c, bad[i]), CCA_ERR_CONFIG, "[%zu] accepted", i);
        cr_assert(memcmp(&c, &before, sizeof c) == 0, "[%zu] left the config changed", i);
    }
}

/* An item without a colon is named in the message, at most 64 characters of
 * it, so that a runaway item cannot fill the message. */
Test(config, an_item_without_a_colon_is_shown_cut) {
    char item[300];
    memset(item, 'x', sizeof item - 1);
    item[sizeof item - 1] = '\0';
    cca_config c = defaults();
    cr_assert_eq(cca_config_parse(&c, item), CCA_ERR_CONFIG);
    const char *msg = cca_last_error();
    cr_assert(strstr(msg, "expected key:value") != NULL, "%s", msg);
    cr_assert(strstr(msg, "...") != NULL, "%s", msg);
    cr_assert_lt(strlen(msg), 160u, "%s", msg);
}

/* A value or an item in a message is at most 64 bytes of it, cut between
 * characters: a UTF-8 character straddling the cap is left out whole (its
 * first bytes were quoted, and a terminal's escaper showed them as \xNN). */
Test(config, a_quoted_value_is_cut_between_characters) {
    static const char *const chars[] = {"\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80"};
    for (size_t c = 0; c < sizeof chars / sizeof chars[0]; c++) {
        size_t len = strlen(chars[c]);
        char head[80], text[200], want[300];
        memset(head, '1', 65 - len); /* the character's last byte is byte 65 */
        head[65 - len] = '\0';
        cca_config cfg = defaults();
        snprintf(text, sizeof text, "max_reserved:%s%s2", head, chars[c]);
        snprintf(want, sizeof want, "invalid value '%s...' for key 'max_reserved' (expected a size like 512M)", head);
        cr_expect_eq(cca_config_parse(&cfg, text), CCA_ERR_CONFIG, "%s", text);
        cr_expect_str_eq(cca_last_error(), want);
        snprintf(text, sizeof text, "%s%s2", head, chars[c]); /* no colon: the item is quoted */
        snprintf(want, sizeof want, "expected key:value, got '%s...'", head);
        cr_expect_eq(cca_config_parse(&cfg, text), CCA_ERR_CONFIG, "%s", text);
        cr_expect_str_eq(cca_last_error(), want);
    }
}

Test(config, print_with_docs_shows_defaults_and_docs) {
    cca_config c = parse_ok("max_reserved:2G");
    char *text = print_config(&c, 1);
    for (size_t i = 0; i < OPTION_COUNT; i++)
        cr_assert(strstr(text, option_names[i]) != NULL, "'%s' missing", option_names[i]);
    cr_assert(strstr(text, "(default 20M)") != NULL, "%s", text);
    cr_assert(strstr(text, "2048M") && strstr(text, "cap on reserved bytes"), "%s", text);
    free(text);
    cr_assert_eq(cca_config_print(NULL, stdout, 0), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cca_config_print(&c, NULL, 0), CCA_ERR_INVALID_ARGUMENT);
    FILE *ro = fopen("/dev/null", "r");
    cr_assert_eq(cca_config_print(&c, ro, 0), CCA_ERR_IO);
    cr_assert_eq(cca_config_print(&c, ro, 1), CCA_ERR_IO);
    fclose(ro);
}

Test(config, max_split_must_exceed_medium_segment) {
    cca_config c;
    cca_config_default(&c);
    c.expandable = 0; /* max_split is classic segments' */
    cca_config before;
    memcpy(&before, &c, sizeof c);
    cr_assert_eq(cca_config_parse(&c, "max_split:8M"), CCA_ERR_CONFIG);
    cr_assert_not_null(strstr(cca_last_error(), "max_split"), "%s", cca_last_error());
    cr_assert_eq(memcmp(&c, &before, sizeof c), 0, "a rejected string changes nothing");
    cr_assert_eq(cca_config_parse(&c, "max_split:20M"), CCA_ERR_CONFIG, "equal to medium_segment is still too small");
    cr_assert_eq(cca_config_parse(&c, "max_split:21M"), CCA_OK);
    cr_assert_eq(c.max_split, 21 * 1024 * 1024);
}

/* The one size syntax of config strings and command lines (cca_parse_size). */
Test(config, sizes_parse_exactly) {
    struct {
        const char *text;
        size_t bytes;
    } ok[] = {
        {"0", 0},
        {"4096", 4096},
        {"512k", 512 * 1024},
        {"4G", (size_t)4 << 30},
        {"4GiB", (size_t)4 << 30},
        {"4gb", (size_t)4 << 30},
        {"4Gi", (size_t)4 << 30},
        {"3MIB", (size_t)3 << 20}, /* the i in either case */
        {"2kI", 2048},
        {"1.5G", (size_t)3 << 29},
        {"0.5K", 512},
        {".25M", (size_t)1 << 18},
        {"1.0001K", 1024}, /* fractions of a byte are dropped */
        {"2T", (size_t)2 << 40},
        {"18446744073709551615", SIZE_MAX}, /* exact, not through a double */
        {"7B", 7},
        {"7b", 7}, /* the B in either case too */
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        size_t v = 12345;
        cr_assert_eq(cca_parse_size(ok[i].text, &v), CCA_OK, "'%s': %s", ok[i].text, cca_last_error());
        cr_assert_eq(v, ok[i].bytes, "'%s' -> %zu, want %zu", ok[i].text, v, ok[i].bytes);
    }
    const char *bad[] = {"",
                         "G",
                         "-1",
                         "+1",
                         "1e3",
                         "0x10",
                         "inf",
                         "nan",
                         "1.2.3",
                         "4 G",
                         "4X",
                         "4iB",
                         "5i",
                         "18446744073709551616",
                         "16777216T",
                         "1.5",
                         ".",
                         "K"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t v = 777;
        cca_status st = cca_parse_size(bad[i], &v);
        if (strcmp(bad[i], "1.5") == 0) { /* a decimal byte count is fine: 1 byte */
            cr_assert_eq(st, CCA_OK);
            cr_assert_eq(v, 1);
            continue;
        }
        cr_assert_eq(st, CCA_ERR_INVALID_ARGUMENT, "'%s' accepted as %zu", bad[i], v);
        cr_assert_eq(v, 777, "'%s': output unchanged on error", bad[i]);
    }
    cr_assert_eq(cca_parse_size(NULL, NULL), CCA_ERR_INVALID_ARGUMENT);
    cca_config c = parse_ok("max_reserved:1.5G");
    cr_assert_eq(c.max_reserved, (size_t)3 << 29);
}

/* cca_parse_size_exact: cca_parse_size's syntax and values, and a text
 * whose value is not a whole number of bytes refused (a page, a size that
 * must be a multiple of something: 4096.5 is not 4096). */
Test(config, parse_size_exact_refuses_a_fraction_of_a_byte) {
    static const struct {
        const char *text;
        size_t want;
    } ok[] = {{"4096", 4096},      {"1.5K", 1536}, {"0.5K", 512}, {"2.0000000M", 2u << 20},  {"8MiB", 8u << 20},
              {"0.25KB", 256},     {"1.0", 1},     {"0", 0},      {"0.5T", (size_t)1 << 39}, {"0.0009765625K", 1},
              {"007.50000K", 7680}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        size_t v = 777, w = 778;
        cr_assert_eq(cca_parse_size_exact(ok[i].text, &v), CCA_OK, "'%s': %s", ok[i].text, cca_last_error());
        cr_assert_eq(v, ok[i].want, "'%s': %zu", ok[i].text, v);
        cr_assert_eq(cca_parse_size(ok[i].text, &w), CCA_OK);
        cr_assert_eq(v, w, "'%s': the two parsers differ", ok[i].text);
    }
    static const char *fraction[] = {
        "4096.5",         "1.5", "0.3K", "2.0000001M", "0.9999999999999999999K", "1.00000000000000000000000000001T",
        "0.00048828125K", "0.1"};
    for (size_t i = 0; i < sizeof fraction / sizeof fraction[0]; i++) {
        size_t v = 777, floor = 0;
        cr_assert_eq(cca_parse_size(fraction[i], &floor), CCA_OK, "'%s'", fraction[i]);
        cr_assert_eq(cca_parse_size_exact(fraction[i], &v), CCA_ERR_INVALID_ARGUMENT, "'%s' accepted as %zu",
                     fraction[i], v);
        cr_assert_eq(v, 777, "'%s': output unchanged on error", fraction[i]);
        char want[160];
        snprintf(want, sizeof want, "bad size '%s' (not a whole number of bytes: more than %zu, less than %zu)",
                 fraction[i], floor, floor + 1);
        cr_assert_str_eq(cca_last_error(), want);
    }
    static const char *bad[] = {"", "x", "-1", "+1", " 1", "1 ", "1e3", "0x10", "5iB", "18446744073709551616", "."};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t v = 777;
        cr_assert_eq(cca_parse_size_exact(bad[i], &v), CCA_ERR_INVALID_ARGUMENT, "'%s' accepted as %zu", bad[i], v);
        cr_assert_eq(v, 777);
    }
    size_t v;
    cr_assert_eq(cca_parse_size_exact(NULL, &v), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_str_eq(cca_last_error(), "cca_parse_size_exact: NULL argument", "the message names the call made");
    cr_assert_eq(cca_parse_size_exact("1", NULL), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_str_eq(cca_last_error(), "cca_parse_size_exact: NULL argument");
    cr_assert_eq(cca_parse_size(NULL, &v), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_str_eq(cca_last_error(), "cca_parse_size: NULL argument");
}

/* cca_parse_size_exact at the top of size_t: a text between SIZE_MAX and
 * SIZE_MAX + 1 bytes (with no unit, and with T) is refused naming both
 * bounds as ccalloc.h promises ("more than N, less than N+1"): N + 1 is
 * 18446744073709551616, not a size_t that wrapped to 0. */
Test(config, parse_size_exact_names_the_bound_above_size_max) {
    _Static_assert(SIZE_MAX == UINT64_MAX, "the texts below are 2^64 - 1 and a fraction");
    static const char *texts[] = {"18446744073709551615.5", "16777215.99999999999999999999999T"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        size_t v = 777, floor = 0;
        cr_assert_eq(cca_parse_size(texts[i], &floor), CCA_OK, "'%s': %s", texts[i], cca_last_error());
        cr_assert_eq(floor, SIZE_MAX, "'%s'", texts[i]);
        cr_assert_eq(cca_parse_size_exact(texts[i], &v), CCA_ERR_INVALID_ARGUMENT, "'%s' accepted", texts[i]);
        cr_assert_eq(v, 777);
        char want[160];
        snprintf(want, sizeof want,
                 "bad size '%s' (not a whole number of bytes: more than 18446744073709551615, less than "
                 "18446744073709551616)",
                 texts[i]);
        cr_assert_str_eq(cca_last_error(), want);
    }
    /* a carry through every 9: 9.5 lies below 10, 99.5 below 100 */
    size_t v;
    cr_assert_eq(cca_parse_size_exact("99.5", &v), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_str_eq(cca_last_error(), "bad size '99.5' (not a whole number of bytes: more than 99, less than 100)");
}

/* A bad CCALLOC_CONF is reported whole, naming the variable and the key. */
Test(config, bad_env_message_wraps_the_parse_error) {
    setenv("CCALLOC_CONF", "medium_pol:0", 1);
    cca_config c;
    cca_config_default(&c);
    cr_assert_eq(cca_config_apply_env(&c), CCA_ERR_CONFIG);
    cr_assert_str_eq(cca_last_error(), "CCALLOC_CONF: unknown key 'medium_pol'");
    unsetenv("CCALLOC_CONF");
}

/* The default log sink escapes what came from outside the program: a bad
 * CCALLOC_CONF's key and value reach stderr with their control bytes as
 * \xNN (common/ccai_escape.h), so the variable cannot drive the terminal
 * (ESC [ 2 J clears it; C1's CSI as well). */
Test(config, bad_env_line_reaches_stderr_escaped, .init = cr_redirect_stderr) {
    cca_set_log_callback(NULL, NULL);
    setenv("CCALLOC_CONF", "\x1b[2Jkey:1", 1);
    cca_upstream *u = NULL;
    cca_allocator *a = NULL;
    cr_assert_eq(cca_upstream_host_create(64 * MiB, &u), CCA_OK);
    cr_assert_eq(cca_create(NULL, u, &a), CCA_OK, "%s", cca_last_error());
    setenv("CCALLOC_CONF", "max_reserved:1\a\xc2\x9b" "2J", 1); /* BEL, then C1 CSI */
    cca_allocator *b = NULL;
    cr_assert_eq(cca_create(NULL, u, &b), CCA_OK, "%s", cca_last_error());
    unsetenv("CCALLOC_CONF");
    cca_destroy(b);
    cca_destroy(a);
    cca_upstream_destroy(u);
    fflush(stderr);
    char text[1024] = "";
    size_t n = fread(text, 1, sizeof text - 1, cr_get_redirected_stderr());
    text[n] = '\0';
    cr_assert_str_eq(text,
                     "ccalloc: CCALLOC_CONF: unknown key '\\x1b[2Jkey'; using the defaults\n"
                     "ccalloc: CCALLOC_CONF: invalid value '1\\x07\\xc2\\x9b2J' for key 'max_reserved' "
                     "(expected a size like 512M); using the defaults\n");
}

/* A line of the default sink reaches stderr in one write(2): a pipe in
 * packet mode (O_DIRECT) hands each write to one read, so the first read is
 * the whole line. Written piece by piece (a write per character, as stderr
 * is unbuffered), a line interleaved with another process's on a shared
 * terminal or pipe (ccrun's children, ranks of one job), and with another
 * thread's stderr between two of its pieces. The pipe does not block: it
 * has room for 16 packets, fewer than a line's characters. */
Test(config, default_sink_line_is_one_write) {
    cca_set_log_callback(NULL, NULL);
    int fd[2], saved = dup(2);
    cr_assert(saved >= 0);
    cr_assert_eq(pipe2(fd, O_DIRECT | O_NONBLOCK), 0); /* a packet per page of room: never wait */
    fflush(stderr);
    cr_assert(dup2(fd[1], 2) == 2);
    setenv("CCALLOC_CONF", "\x1b[2Jkey:1", 1);
    cca_upstream *u = NULL;
    cca_allocator *a = NULL;
    cca_status up = cca_upstream_host_create(64 * MiB, &u);
    cca_status cr = up == CCA_OK ? cca_create(NULL, u, &a) : up;
    unsetenv("CCALLOC_CONF");
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(fd[1]);
    cca_destroy(a);
    cca_upstream_destroy(u);
    cr_assert_eq(cr, CCA_OK);
    char text[4096] = "";
    ssize_t n = read(fd[0], text, sizeof text - 1);
    close(fd[0]);
    text[n > 0 ? n : 0] = '\0';
    cr_assert_str_eq(text, "ccalloc: CCALLOC_CONF: unknown key '\\x1b[2Jkey'; using the defaults\n");
}

/* Sizes in config strings are stored exactly: 2^53 + 1 is not a double, and
 * went through one (stored as 2^53). */
Test(config, sizes_in_config_strings_are_exact) {
    cca_config c = parse_ok("max_reserved:9007199254740993,greedy_bytes:18446744073709551614");
    cr_assert_eq(c.max_reserved, (size_t)9007199254740993ull);
    cr_assert_eq(c.greedy_bytes, (size_t)18446744073709551614ull);
    c = parse_ok("max_reserved:18446744073709551615");
    cr_assert_eq(c.max_reserved, SIZE_MAX);
    c = parse_ok("max_reserved:17179869183G"); /* 2^64 - 2^30: the largest whole-G size */
    cr_assert_eq(c.max_reserved, SIZE_MAX - ((size_t)1 << 30) + 1);
    parse_fails("max_reserved:17179869184G", "max_reserved"); /* 2^64: the suffix overflows */
    parse_fails("max_reserved:18446744073709551616", "max_reserved");
    /* the range checks are exact too: one byte over a bound is refused */
    parse_fails("small_max:1073741825,small_segment:1G", "small_max");
    c = parse_ok("small_max:1073741824,small_segment:1G");
    cr_assert_eq(c.small_max, (size_t)1 << 30);
}

/* A fractional size is its exact value rounded down to a whole byte: no
 * rounding through a double on the way. */
Test(config, fractional_sizes_round_down_exactly) {
    struct {
        const char *text;
        size_t bytes;
    } ok[] = {
        {"0.9999999999999999999K", 1023},         /* a double would say 1.0 -> 1024 */
        {"16777215.9999999999999999T", SIZE_MAX}, /* 2^64 - 1.1e-4, rounded down */
        {"8388607.99999999999999999999999999999999999999999999T", ((size_t)1 << 63) - 1},
        {"0.00000000000000000000000000000000000000000001T", 0},
        {"0.0009765625K", 1}, /* 2^-10 K: exactly one byte */
        {"0.0009765624K", 0},
        {"1.5", 1},
        {"4095.9999999999999999", 4095},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        size_t v = 12345;
        cr_assert_eq(cca_parse_size(ok[i].text, &v), CCA_OK, "'%s': %s", ok[i].text, cca_last_error());
        cr_assert_eq(v, ok[i].bytes, "'%s' -> %zu, want %zu", ok[i].text, v, ok[i].bytes);
    }
    size_t v = 777;
    cr_assert_eq(cca_parse_size("16777216.0000000000000000001T", &v), CCA_ERR_INVALID_ARGUMENT);
    cr_assert_eq(v, 777);
}

/* The grammar has no length limit: "1." and any number of zeros is 1, in
 * cca_parse_size and in a config string alike; work stays linear in the
 * length (one pass, no copy of the digits). */
Test(config, long_numbers_within_the_grammar_are_accepted) {
    size_t n = 100000;
    char *text = malloc(n + 64);
    cr_assert_not_null(text);
    strcpy(text, "1.");
    memset(text + 2, '0', n);
    strcpy(text + 2 + n, "K");
    size_t v = 0;
    cr_assert_eq(cca_parse_size(text, &v), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(v, 1024);
    memset(text, '0', n); /* leading zeros */
    strcpy(text + n, "1.5M");
    cr_assert_eq(cca_parse_size(text, &v), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(v, (size_t)3 << 19);
    /* the same in a config string */
    strcpy(text, "max_reserved:1.");
    memset(text + 15, '0', n);
    strcpy(text + 15 + n, "G");
    cca_config c = parse_ok(text);
    cr_assert_eq(c.max_reserved, (size_t)1 << 30);
    free(text);
}

/* A value is copied into a 64-byte buffer when it fits (terminator
 * included), into host memory when longer: every length around that edge
 * parses to the same size and the same fraction. */
Test(config, values_of_every_length_around_the_copy_buffer_parse) {
    char text[256];
    for (size_t len = 3; len <= 80; len++) {
        int k = snprintf(text, sizeof text, "max_reserved:%.*s1M,greedy_fraction:0.5%.*s", (int)(len - 2),
                         "0000000000000000000000000000000000000000000000000000000000000000000000000000000000",
                         (int)(len - 3),
                         "0000000000000000000000000000000000000000000000000000000000000000000000000000000000");
        cr_assert_lt((size_t)k, sizeof text);
        cca_config c = parse_ok(text);
        cr_assert_eq(c.max_reserved, MiB, "values of %zu characters", len);
        cr_assert_eq(c.greedy_fraction, 0.5, "values of %zu characters", len);
    }
}

/* Fractions have no length limit either: the same digits as a short
 * fraction plus any number of zeros are the same value, leading zeros and
 * a long exponent included; a long text that is not a number is refused as
 * such, naming the key. */
Test(config, long_fractions_within_the_grammar_are_accepted) {
    size_t n = 100000;
    char *text = malloc(n + 64);
    cr_assert_not_null(text);
    const char *keys[] = {"greedy_fraction", "expandable_ahead"};
    for (size_t k = 0; k < 2; k++) {
        int at = sprintf(text, "%s:0.5", keys[k]); /* 0.5 and n zeros */
        memset(text + at, '0', n);
        text[at + n] = '\0';
        cca_config c = parse_ok(text);
        cr_assert_eq(k ? c.expandable_ahead : c.greedy_fraction, 0.5, "%s", keys[k]);
        at = sprintf(text, "%s:", keys[k]); /* n leading zeros, then 0.0625 */
        memset(text + at, '0', n);
        strcpy(text + at + n, "0.0625");
        c = parse_ok(text);
        cr_assert_eq(k ? c.expandable_ahead : c.greedy_fraction, 0.0625, "%s", keys[k]);
        at = sprintf(text, "%s:625e-", keys[k]); /* 625e-0...04 */
        memset(text + at, '0', n);
        strcpy(text + at + n, "4");
        c = parse_ok(text);
        cr_assert_eq(k ? c.expandable_ahead : c.greedy_fraction, 0.0625, "%s", keys[k]);
        at = sprintf(text, "%s:0.5", keys[k]); /* ...and one bad byte at the end */
        memset(text + at, '0', n);
        strcpy(text + at + n, "x");
        parse_fails(text, keys[k]);
        cr_assert(strstr(cca_last_error(), "expected a number") != NULL, "%.200s", cca_last_error());
        at = sprintf(text, "%s:1.", keys[k]); /* 1.000...0001 is the double 1.0, which is in range */
        memset(text + at, '0', n);
        strcpy(text + at + n, "1");
        cr_assert_eq(parse_ok(text).greedy_fraction, k ? 0.9 : 1.0, "%s", keys[k]);
        at = sprintf(text, "%s:1.0000001", keys[k]); /* 1.0000001 and n zeros: over 1 */
        memset(text + at, '0', n);
        text[at + n] = '\0';
        parse_fails(text, keys[k]);
        cr_assert(strstr(cca_last_error(), "out-of-range") != NULL, "%.200s", cca_last_error());
    }
    /* a long bad size is named with its key too: the value is shown cut,
     * never so long that the key falls off the end of the message */
    int at = sprintf(text, "max_reserved:1.");
    memset(text + at, '0', n);
    strcpy(text + at + n, "X");
    parse_fails(text, "max_reserved");
    cr_assert(strstr(cca_last_error(), "expected a size") != NULL, "%.200s", cca_last_error());
    at = sprintf(text, "small_max:");
    memset(text + at, '0', n);
    strcpy(text + at + n, "1");
    parse_fails(text, "small_max");
    cr_assert(strstr(cca_last_error(), "out-of-range") != NULL, "%.200s", cca_last_error());
    free(text);
}

/* print(c, 0) -> parse gives back c exactly, for every option, at edge
 * values: fractions that %g would round (0.123456789 -> 0.123457), the
 * smallest and largest fractions, sizes that are not whole K or M, sizes
 * above 2^53, both policies, both boolean values. */
static void assert_round_trip(const cca_config *c) {
    cr_assert_eq(cca_config_validate(c), CCA_OK, "%s", cca_last_error());
    char *text = print_config(c, 0);
    for (char *p = text; *p; p++)
        if (*p == '\n')
            *p = ',';
    cca_config back = defaults();
    cr_assert_eq(cca_config_parse(&back, text), CCA_OK, "%s: %s", text, cca_last_error());
    cr_assert_eq(back.policy, c->policy, "%s", text);
    cr_assert(back.greedy_fraction == c->greedy_fraction, "greedy_fraction %.17g came back as %.17g: %s",
              c->greedy_fraction, back.greedy_fraction, text);
    cr_assert(back.expandable_ahead == c->expandable_ahead, "expandable_ahead %.17g came back as %.17g: %s",
              c->expandable_ahead, back.expandable_ahead, text);
#define SAME(f) cr_assert_eq(back.f, c->f, #f ": %zu came back as %zu: %s", (size_t)c->f, (size_t)back.f, text)
    SAME(greedy_bytes);
    SAME(max_reserved);
    SAME(small_max);
    SAME(small_segment);
    SAME(medium_segment);
    SAME(large_min);
    SAME(segment_round);
    SAME(max_split);
    SAME(small_pool);
    SAME(medium_pool);
    SAME(log_oom);
    SAME(history);
#undef SAME
    cr_assert(memcmp(&back, c, sizeof *c) == 0, "round trip through print and parse: %s", text);
    free(text);
}

Test(config, printed_configs_parse_back_to_the_same_values) {
    const double fractions[] = {0.123456789,
                                0.1,
                                1.0 / 3.0,
                                0.9,
                                1.0,
                                0.99999999999999989 /* below 1 */,
                                4.9406564584124654e-324 /* the smallest double */,
                                2.2250738585072014e-308,
                                1e-17};
    for (size_t i = 0; i < sizeof fractions / sizeof fractions[0]; i++) {
        cca_config c = defaults();
        c.policy = CCA_POLICY_GREEDY;
        c.greedy_fraction = fractions[i];
        assert_round_trip(&c);
        c = defaults();
        c.expandable_ahead = fractions[i];
        assert_round_trip(&c);
    }
    cca_config off = defaults(); /* expandable_ahead's range is [0, 1]: 0 prints and parses back too */
    off.expandable_ahead = 0.0;
    assert_round_trip(&off);
    cca_config c = defaults(); /* growth, every size at an awkward value */
    c.expandable = 0;          /* classic segments: max_split is allowed */
    c.greedy_fraction = 0.7000000000000001;
    c.greedy_bytes = (size_t)9007199254740993ull; /* 2^53 + 1 */
    c.max_reserved = SIZE_MAX;
    c.small_max = 512 + 1024; /* not a whole K */
    c.small_segment = 1024 * 1024 + 512;
    c.medium_segment = 64 * GiB; /* its maximum, a whole M */
    c.large_min = 1025 * KiB;
    c.segment_round = 512;
    c.max_split = SIZE_MAX - 1;
    c.small_pool = 0;
    c.medium_pool = 0;
    c.log_oom = 0;
    assert_round_trip(&c);
    c.greedy_bytes = 1;
    c.max_reserved = 1;
    c.max_split = 64 * GiB + 1;
    c.small_pool = c.medium_pool = c.log_oom = 1;
    assert_round_trip(&c);
    c = defaults();
    assert_round_trip(&c);
}

/* Every option of the table, at the edges of its range: the rows of
 * cca_config_print(c, f, 2) (the option table itself: name and range) give
 * each option's candidates, each candidate that the parser accepts is set
 * on a config, and that config must come back from print -> parse exactly
 * (assert_round_trip). Three base configs: the defaults, a wide one whose
 * cross-option rules (small_max <= small_segment, large_min <=
 * medium_segment) leave room for every bound, and classic segments, where
 * max_split is allowed. */
static int round_trip_candidate(const char *key, const char *value) {
    static const char *bases[] = {"", "small_max:512,small_segment:1G,medium_segment:64G,large_min:512",
                                  "expandable:0"};
    int accepted = 0;
    for (size_t b = 0; b < sizeof bases / sizeof bases[0]; b++) {
        cca_config c = parse_ok(bases[b]);
        char text[128];
        snprintf(text, sizeof text, "%s:%s", key, value);
        if (cca_config_parse(&c, text) != CCA_OK)
            continue; /* out of range, or against a cross-option rule */
        assert_round_trip(&c);
        accepted++;
    }
    return accepted;
}

Test(config, every_option_round_trips_at_the_edges_of_its_range) {
    char *table = print_config(&(cca_config){0}, 2); /* the values do not matter: names and ranges do */
    const char *row = strstr(table, "|---|---|---|---|\n");
    cr_assert_not_null(row, "%s", table);
    row += strlen("|---|---|---|---|\n");
    size_t options = 0;
    for (; *row == '|'; row = strchr(row, '\n') + 1, options++) {
        char key[64], def[64], range[128];
        cr_assert_eq(sscanf(row, "| `%63[^`]` | `%63[^`]` | `%127[^`]` |", key, def, range), 3, "%.80s", row);
        char cand[16][64];
        size_t n = 0;
        /* '[' opens a size's range and a fraction's that holds its lower
         * end (expandable_ahead's [0, 1]); a fraction's default has a point */
        bool share = range[0] == '[' && strchr(def, '.') != NULL;
        cr_assert_eq(share, strcmp(key, "expandable_ahead") == 0, "%s: range %s, default %s", key, range, def);
        if (range[0] == '[' && !share) { /* a size: both bounds, their neighbours, 2^53 + 1, fractions of a K and a G */
            char lo_s[64], hi_s[64];
            size_t lo, hi;
            cr_assert_eq(sscanf(range, "[%63[^,], %63[^]]]", lo_s, hi_s), 2, "%s", range);
            cr_assert_eq(cca_parse_size(lo_s, &lo), CCA_OK);
            hi = strcmp(hi_s, "SIZE_MAX") == 0 ? SIZE_MAX : 0;
            if (!hi)
                cr_assert_eq(cca_parse_size(hi_s, &hi), CCA_OK);
            const size_t values[] = {lo, lo + 1, lo + 512, hi, hi - 1, hi - 512, (size_t)9007199254740993ull};
            for (size_t i = 0; i < sizeof values / sizeof values[0]; i++)
                snprintf(cand[n++], sizeof cand[0], "%zu", values[i]);
            snprintf(cand[n++], sizeof cand[0], "1.5K");
            snprintf(cand[n++], sizeof cand[0], "0.3G");
        } else if (range[0] == '[' && share) { /* a fraction in [lo, hi]: both ends, their neighbours */
            double lo, hi;
            cr_assert_eq(sscanf(range, "[%lf, %lf]", &lo, &hi), 2, "%s", range);
            const double values[] = {lo,
                                     nextafter(lo, hi),
                                     hi,
                                     nextafter(hi, lo),
                                     0.123456789,
                                     1.0 / 3.0,
                                     0.7000000000000001,
                                     2.2250738585072014e-308};
            for (size_t i = 0; i < sizeof values / sizeof values[0]; i++)
                snprintf(cand[n++], sizeof cand[0], "%.17g", values[i]);
            char lo_s[32];
            snprintf(lo_s, sizeof lo_s, "%.17g", lo);
            cr_assert_eq(round_trip_candidate(key, lo_s), 3, "%s: its lower end %s is in its range", key, lo_s);
        } else if (range[0] == '(') { /* a fraction: both ends' neighbours, values %g would round */
            double lo, hi;
            cr_assert_eq(sscanf(range, "(%lf, %lf]", &lo, &hi), 2, "%s", range);
            const double values[] = {
                nextafter(lo, hi),      hi, nextafter(hi, lo), 0.123456789, 1.0 / 3.0, 0.7000000000000001,
                2.2250738585072014e-308};
            for (size_t i = 0; i < sizeof values / sizeof values[0]; i++)
                snprintf(cand[n++], sizeof cand[0], "%.17g", values[i]);
        } else { /* a list of words */
            char words[128];
            snprintf(words, sizeof words, "%s", range);
            for (char *w = strtok(words, ", "); w; w = strtok(NULL, ", "))
                snprintf(cand[n++], sizeof cand[0], "%s", w);
        }
        int accepted = 0;
        for (size_t i = 0; i < n; i++)
            accepted += round_trip_candidate(key, cand[i]);
        cr_assert_geq(accepted, 2, "%s: only %d of its edge values were accepted", key, accepted);
    }
    cr_assert_eq(options, OPTION_COUNT, "one row per option");
    free(table);
}

/* expandable_ahead, the growth rule's one option: its default, its edges
 * ([0, 1]: 0 turns the ahead off), and hostile values refused with the
 * config unchanged and the option named. */
Test(config, expandable_ahead_refuses_hostile_values) {
    cca_config c = defaults();
    cr_assert_eq(c.expandable_ahead, 0.0625);
    c = parse_ok("expandable_ahead:1");
    cr_assert_eq(c.expandable_ahead, 1.0);
    c = parse_ok("expandable_ahead:0");
    cr_assert_eq(c.expandable_ahead, 0.0, "0 is in [0, 1]: the ahead off");
    c = parse_ok("expandable_ahead:0.0");
    cr_assert_eq(c.expandable_ahead, 0.0);
    cr_assert(!signbit(c.expandable_ahead));
    c = parse_ok("expandable_ahead:0.001");
    cr_assert_eq(c.expandable_ahead, 0.001);
    static const char *bad_fraction[] = {"-0", "-0.1", "-0.25", "1.0000001", "1.5",    "2",  "nan", "inf", "-inf",
                                         "",   "abc",  "0.5x",  "1/16",      "0x1p-4", "1e", "1e+", "..5", "."};
    for (size_t i = 0; i < sizeof bad_fraction / sizeof bad_fraction[0]; i++) {
        char text[64];
        snprintf(text, sizeof text, "expandable_ahead:%s", bad_fraction[i]);
        parse_fails(text, "expandable_ahead");
    }
    parse_fails("expandable_ahead:-0.1", "expected a number"); /* a number has no sign */
    parse_fails("expandable_ahead:1.5", "not in [0, 1]");
    /* cca_config_validate holds a config built by hand to the same range */
    c = defaults();
    c.expandable_ahead = -0.1;
    cr_assert_eq(cca_config_validate(&c), CCA_ERR_CONFIG);
    cr_assert(strstr(cca_last_error(), "expandable_ahead") != NULL, "%s", cca_last_error());
    c.expandable_ahead = 1.5;
    cr_assert_eq(cca_config_validate(&c), CCA_ERR_CONFIG);
    /* negative zero would print as "-0", which no parse takes back (found
     * by fuzz_config): refused as out of range */
    c.expandable_ahead = -0.0;
    cr_assert_eq(cca_config_validate(&c), CCA_ERR_CONFIG);
    cr_assert(strstr(cca_last_error(), "expandable_ahead") != NULL, "%s", cca_last_error());
    c.expandable_ahead = 0.0;
    cr_assert_eq(cca_config_validate(&c), CCA_OK, "%s", cca_last_error());
}

/* The growth rule's three size options are gone (issue 41: fewer knobs):
 * each key is refused with any value, good or bad, the config untouched,
 * the message naming the key and what replaced it, in a string, among
 * valid items, and in CCALLOC_CONF. */
Test(config, removed_keys_are_refused_naming_their_replacement) {
    static const struct {
        const char *key, *instead;
    } removed[] = {
        {"expandable_ahead_max", "the ahead is at most expandable_ahead x 1 GiB; expandable_ahead:0 maps none"},
        {"expandable_ahead_min", "a tail map maps at least 20 MiB while expandable_ahead is above 0"},
        {"expandable_chunk", "over whole maps one map holds at most 128 MiB"},
    };
    static const char *values[] = {"0",   "1", "64M", "128M", "18446744073709551615", "0.1", "-1",
                                   "abc", "",  "1e6", "0x40", "17179869184G"};
    for (size_t k = 0; k < sizeof removed / sizeof removed[0]; k++) {
        char text[128], want[256];
        snprintf(want, sizeof want, "key '%s' was removed: %s (docs/tuning.md, \"How far ahead to map\")",
                 removed[k].key, removed[k].instead);
        for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
            snprintf(text, sizeof text, "%s:%s", removed[k].key, values[i]);
            parse_fails(text, removed[k].key);
            cr_assert_str_eq(cca_last_error(), want, "'%s'", text);
        }
        /* among valid items, before and after: none of them applied */
        snprintf(text, sizeof text, "max_reserved:1G,%s:64M,small_pool:0", removed[k].key);
        parse_fails(text, removed[k].instead);
        snprintf(text, sizeof text, "%s:0,expandable_ahead:0", removed[k].key);
        parse_fails(text, "was removed");
        /* a removed key is not an unknown one */
        cr_assert(strstr(cca_last_error(), "unknown") == NULL, "%s", cca_last_error());
        /* in the environment: refused whole, naming the variable and the key */
        snprintf(text, sizeof text, "small_max:512K,%s:0", removed[k].key);
        cr_assert_eq(setenv("CCALLOC_CONF", text, 1), 0);
        cca_config c = defaults(), before = c;
        cr_assert_eq(cca_config_apply_env(&c), CCA_ERR_CONFIG);
        cr_assert(memcmp(&c, &before, sizeof c) == 0, "%s", text);
        cr_assert(strstr(cca_last_error(), "CCALLOC_CONF") && strstr(cca_last_error(), want), "%s", cca_last_error());
        cr_assert_eq(unsetenv("CCALLOC_CONF"), 0);
    }
    /* their near names are unknown keys, as any other */
    parse_fails("expandable_ahead_maximum:0", "unknown key 'expandable_ahead_maximum'");
    parse_fails("expandable_chunks:0", "unknown key 'expandable_chunks'");
}

/* expandable_ahead:0 maps nothing ahead, and no least step either: over a
 * device of 2 MiB pages each request maps exactly the pages it lacks, in
 * one call (the default maps 20 MiB at the first large request). */
Test(config, expandable_ahead_0_maps_only_what_requests_need) {
    cca_upstream *u = tu_vm_device(256 * MiB, 2 * MiB);
    cca_allocator *a = tu_allocator(u, "expandable:1,expandable_ahead:0,log_oom:0");
    static const struct {
        size_t size;
        size_t mapped; /* bytes mapped after it: the small range's, then the large range's pages */
    } steps[] = {
        {4 * KiB, 2 * MiB},                /* small range: page 0 */
        {3 * MiB, 2 * MiB + 4 * MiB},      /* large range: [0, 3M), pages 0-1 */
        {3 * MiB, 2 * MiB + 6 * MiB},      /* [3M, 6M): page 2 */
        {5 * MiB + 1, 2 * MiB + 12 * MiB}, /* [6M, 11M + 512): pages 3-5 */
        {40 * MiB, 2 * MiB + 52 * MiB},    /* [11M + 512, 51M + 512): pages 6-25 */
        {512, 2 * MiB + 52 * MiB},         /* the small range's page 0 again: no call */
    };
    enum { N = sizeof steps / sizeof steps[0] };
    void *p[N];
    uint64_t maps = 0;
    for (size_t i = 0; i < N; i++) {
        size_t before = tu_stats(a).mapped_bytes;
        p[i] = tu_alloc(a, steps[i].size, NULL);
        cca_stats s = tu_stats(a);
        maps += s.mapped_bytes > before;
        cr_assert_eq(s.mapped_bytes, steps[i].mapped, "request %zu (%zu bytes): mapped %zu", i, steps[i].size,
                     s.mapped_bytes);
        cr_assert_eq(s.reserved_bytes, s.mapped_bytes);
        cr_assert_eq(s.vm_maps, maps, "request %zu: one call for the pages it lacks", i);
        cr_assert_eq(tu_upstream_stats(u).vm_mapped_bytes, steps[i].mapped);
    }
    for (size_t i = 0; i < N; i++)
        tu_free(a, p[i]);
    cca_release_report r;
    cr_assert_eq(cca_empty_cache(a, &r), CCA_OK, "%s", cca_last_error());
    tu_teardown(a, u);

    /* the default config, the same first large request: 20 MiB mapped */
    u = tu_vm_device(256 * MiB, 2 * MiB);
    a = tu_allocator(u, "expandable:1,small_pool:0,log_oom:0");
    void *q = tu_alloc(a, 3 * MiB, NULL);
    cr_assert_eq(tu_stats(a).mapped_bytes, 20 * MiB, "the least step");
    tu_free(a, q);
    tu_teardown(a, u);
}

/* A size option where 0 means "none" or "off" (no cap, no arena size, no
 * ring...) must not get that meaning from a positive value that rounds down
 * to 0 bytes: max_reserved:0.1 asked for a cap, and would run with none.
 * Every such key refuses it, naming the key (history, a count, as not a
 * whole number of entries); 0 written as 0 (or 0.0) still
 * means off, and a fraction that leaves at least one byte is taken. */
Test(config, a_positive_size_that_rounds_to_zero_is_refused) {
    static const char *keys[] = {"greedy_bytes", "max_reserved", "max_split", "history"};
    static const char *tiny[] = {"0.1", "0.5", "0.999", "0.0009765624K", "0.00000000000000000000001T", "0.4B"};
    char text[128];
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        for (size_t i = 0; i < sizeof tiny / sizeof tiny[0]; i++) {
            snprintf(text, sizeof text, "%s:%s", keys[k], tiny[i]);
            parse_fails(text, keys[k]);
            /* history counts entries: any fraction is its own rule's (a_count_must_come_out_whole) */
            parse_fails(text, strcmp(keys[k], "history") ? "rounds to 0 bytes" : "not a whole number of entries");
        }
        static const char *zero[] = {"0", "0.0", "0K", "0.000G", "00"};
        for (size_t i = 0; i < sizeof zero / sizeof zero[0]; i++) {
            snprintf(text, sizeof text, "%s:%s", keys[k], zero[i]);
            (void)parse_ok(text);
        }
        snprintf(text, sizeof text, "%s:0.0009765625K", keys[k]); /* exactly one byte: not this rule's */
        cca_config c = defaults();
        cca_status st = cca_config_parse(&c, text);
        cr_assert(st == CCA_OK || !strstr(cca_last_error(), "rounds to 0"), "'%s': %s", text, cca_last_error());
    }
    cca_config c = parse_ok("max_reserved:1.5K");
    cr_assert_eq(c.max_reserved, 1536);
}

/* history is a count of entries, read as a size (64K = 65536): a text
 * whose fraction gives a whole count is taken exactly, one that does not
 * is refused quoting it (history:1.5 was 1 entry, history:0.3K 307, the
 * fraction dropped as a size drops a fraction of a byte). Sizes in bytes
 * keep their rounding. */
Test(config, a_count_must_come_out_whole) {
    static const struct {
        const char *text;
        size_t entries;
    } whole[] = {
        {"1.5K", 1536},    {"1.00", 1},        {"2.50K", 2560},     {"0.5K", 512}, {"1.0000000000000000000000000", 1},
        {"0.25M", 262144}, {"16M", 16u << 20}, {"0.0009765625K", 1}};
    for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++) {
        char text[64];
        snprintf(text, sizeof text, "history:%s", whole[i].text);
        cr_expect_eq(parse_ok(text).history, whole[i].entries, "%s", text);
    }
    static const char *const part[] = {"1.5",       "2.01",          "0.3K", "1.0001K", "1.00000000000000000000001",
                                       "3.999999B", "0.0009765626K", "0.5",  "0.0001K" /* below 1: no "0 bytes" */};
    for (size_t i = 0; i < sizeof part / sizeof part[0]; i++) {
        char text[64], want[160];
        snprintf(text, sizeof text, "history:%s", part[i]);
        snprintf(want, sizeof want,
                 "value '%s' for key 'history' is not a whole number of entries (a count: 1.5K is 1536)", part[i]);
        cca_config c = defaults();
        cr_expect_eq(cca_config_parse(&c, text), CCA_ERR_CONFIG, "%s", text);
        cr_expect_str_eq(cca_last_error(), want);
    }
    cr_expect_eq(parse_ok("max_reserved:1.5").max_reserved, 1, "bytes: a fraction of a byte is still dropped");
}

/* history is a count: it takes the multipliers K, M, G, T (and their IEC
 * spelling Ki, Mi, ...) but no byte unit B: history:4KB was 4096 entries,
 * as if entries were bytes. Refused quoting the value; sizes in bytes keep
 * their B. */
Test(config, a_count_takes_no_byte_unit) {
    static const struct {
        const char *text;
        size_t entries;
    } ok[] = {{"4", 4}, {"4K", 4096}, {"4k", 4096}, {"4Ki", 4096}, {"64K", 65536}, {"1.5K", 1536}, {"16M", 16u << 20}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        char text[64];
        snprintf(text, sizeof text, "history:%s", ok[i].text);
        cr_expect_eq(parse_ok(text).history, ok[i].entries, "%s", text);
    }
    static const char *const bytes[] = {"4KB", "4B", "4KiB", "4kb", "4b", "4kib", "1MB", "1.5KB", "0B", "0KB"};
    for (size_t i = 0; i < sizeof bytes / sizeof bytes[0]; i++) {
        char text[64], want[160];
        snprintf(text, sizeof text, "history:%s", bytes[i]);
        snprintf(want, sizeof want,
                 "value '%s' for key 'history' is a count of entries, not a size in bytes (no B: 4K is 4096)",
                 bytes[i]);
        cca_config c = defaults(), before = c;
        cr_expect_eq(cca_config_parse(&c, text), CCA_ERR_CONFIG, "%s", text);
        cr_expect_str_eq(cca_last_error(), want);
        cr_expect(memcmp(&c, &before, sizeof c) == 0, "'%s' changed the config", text);
    }
    cr_expect_eq(parse_ok("max_reserved:4KB").max_reserved, 4096, "a size in bytes keeps its B");
    cr_expect_eq(parse_ok("max_reserved:4KiB").max_reserved, 4096);
}

/* ---- numbers in a locale with a decimal comma ---------------------------- */

/* What a writer put in a FILE, as a string (the caller frees it). */
typedef cca_status (*file_writer)(const void *arg, FILE *f);
static char *written_by(file_writer w, const void *arg) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_assert_not_null(f);
    cr_assert_eq(w(arg, f), CCA_OK, "%s", cca_last_error());
    fclose(f);
    return text;
}
static cca_status w_stats_print(const void *s, FILE *f) {
    return cca_stats_print(s, f);
}
static cca_status w_stats_json(const void *s, FILE *f) {
    return cca_stats_write_json(s, f);
}
static cca_status w_config(const void *c, FILE *f) {
    return cca_config_print(c, f, 0);
}
static cca_status w_config_docs(const void *c, FILE *f) {
    return cca_config_print(c, f, 1);
}
static cca_status w_config_md(const void *c, FILE *f) {
    return cca_config_print(c, f, 2);
}
static cca_status w_snapshot(const void *a, FILE *f) {
    return cca_write_snapshot_json(a, f);
}
static cca_status w_domains(const void *a, FILE *f) {
    return cca_domain_stats_write_json(a, f);
}

/* No text the library writes holds a decimal comma: "1,5" where a digit
 * precedes the comma and one follows it (a list's ", " does not match). */
static void no_decimal_comma(const char *what, const char *text) {
    for (const char *p = text; (p = strchr(p, ',')) != NULL; p++)
        cr_assert(!(p > text && p[-1] >= '0' && p[-1] <= '9' && p[1] >= '0' && p[1] <= '9'),
                  "%s: a decimal comma at '%.16s' in: %s", what, p > text + 8 ? p - 8 : text, text);
}

/* JSON: every "fragmentation" (the writers' doubles) reads 0.5, not 0,5
 * (which is two numbers); there is at least one. */
static void json_fractions_dotted(const char *what, const char *json) {
    int seen = 0;
    for (const char *p = json; (p = strstr(p, "\"fragmentation\":")) != NULL; seen++) {
        p += strlen("\"fragmentation\":");
        while (*p == ' ')
            p++;
        while (*p >= '0' && *p <= '9')
            p++;
        cr_assert(*p == '.' || *p == ',' || *p == '}', "%s: fragmentation not a number at '%.16s'", what, p);
        cr_assert(!(*p == ',' && p[1] >= '0' && p[1] <= '9'), "%s: a decimal comma at '%.16s'", what, p - 2);
    }
    cr_assert_gt(seen, 0, "%s: no fragmentation in %s", what, json);
}

/* docs/allocator.md, "Options": numbers are read and written in C's format
 * whatever the program's locale. Under a locale with a decimal comma (as
 * after setlocale(LC_ALL, "") under LANG=de_DE.UTF-8), every text the
 * library makes that can hold a fraction: cca_format_bytes ("1.50 MiB",
 * the header's own example), cca_stats_print's line (its sizes and
 * fragmentation), the JSON writers, the three forms of cca_config_print,
 * the messages of cca_config_validate and cca_config_parse that show a
 * value, and the OOM line in the log; and the readers (fractions in
 * configs, cca_parse_size). The program's locale is the same afterwards. */
Test(config, numbers_are_c_format_in_a_locale_with_a_decimal_comma) {
    const char *name = tu_comma_locale();
    char check[16];
    snprintf(check, sizeof check, "%.1f", 1.5);
    cr_assert_str_eq(check, "1,5", "%s: the test's own printf uses the comma", name);

    /* readers */
    size_t z = 0;
    cr_assert_eq(cca_parse_size("1.5M", &z), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(z, 3 * MiB / 2);
    cca_config c = parse_ok("greedy_fraction:0.5,expandable_ahead:0.125");
    cr_assert_eq(c.greedy_fraction, 0.5);
    cr_assert_eq(c.expandable_ahead, 0.125);

    /* cca_format_bytes */
    char buf[32];
    cr_assert_str_eq(cca_format_bytes(3 * MiB / 2, buf, sizeof buf), "1.50 MiB");
    cr_assert_str_eq(cca_format_bytes(3 * GiB, buf, sizeof buf), "3.00 GiB");

    /* messages that show a value */
    cca_config bad = defaults();
    bad.greedy_fraction = 1.5;
    cr_assert_eq(cca_config_validate(&bad), CCA_ERR_CONFIG);
    cr_assert_not_null(strstr(cca_last_error(), "1.5 not in (0, 1]"), "%s", cca_last_error());
    bad = defaults();
    bad.expandable_ahead = 2.25;
    cr_assert_eq(cca_config_validate(&bad), CCA_ERR_CONFIG);
    cr_assert_not_null(strstr(cca_last_error(), "2.25 not in [0, 1]"), "%s", cca_last_error());
    parse_fails("greedy_fraction:1.5", "1.5 not in (0, 1]");
    no_decimal_comma("cca_config_parse message", cca_last_error());

    /* the stats writers, with a fraction in every double */
    cca_stats s;
    memset(&s, 0, sizeof s);
    s.allocated_bytes = 3 * MiB / 2;
    s.reserved_bytes = 5 * MiB / 2;
    s.cached_bytes = 1 * MiB;
    s.fragmentation = 0.5;
    s.page_size = 2 * MiB;
    s.mapped_bytes = 5 * MiB / 2;
    char *line = written_by(w_stats_print, &s);
    cr_assert_not_null(strstr(line, "allocated=1.50 MiB"), "%s", line);
    cr_assert_not_null(strstr(line, "fragmentation=0.500"), "%s", line);
    no_decimal_comma("cca_stats_print", line);
    free(line);
    char *json = written_by(w_stats_json, &s);
    cr_assert_not_null(strstr(json, "\"fragmentation\":0.500000"), "%s", json);
    free(json);

    /* the config printers: the values (0, 1), the defaults (1, 2) */
    file_writer printers[] = {w_config, w_config_docs, w_config_md};
    const char *shown[] = {"expandable_ahead:0.125", "0.0625", "`0.0625`"};
    for (size_t i = 0; i < 3; i++) {
        char *text = written_by(printers[i], &c);
        cr_assert_not_null(strstr(text, shown[i]), "print %zu: %s", i, text);
        no_decimal_comma("cca_config_print", text);
        free(text);
    }

    /* an allocator's JSON, and its OOM line in the log */
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator(64 * MiB, "max_reserved:3.5M", &u, &a);
    cca_domain *d;
    cr_assert_eq(cca_domain_create(a, "m", &d), CCA_OK, "%s", cca_last_error());
    void *p = NULL, *q = NULL;
    cr_assert_eq(cca_alloc_in(a, d, 1000, NULL, &p), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_alloc_in(a, d, 3000, NULL, &q), CCA_OK, "%s", cca_last_error());
    tu_free(a, p); /* a hole: fragmentation between 0 and 1 */
    char *snap = written_by(w_snapshot, a);
    json_fractions_dotted("cca_write_snapshot_json", snap);
    free(snap);
    char *doms = written_by(w_domains, a);
    json_fractions_dotted("cca_domain_stats_write_json", doms);
    free(doms);
    tu_log_capture cap = {0};
    cca_set_log_callback(tu_capture_log, &cap);
    void *big = NULL;
    cr_assert_eq(cca_alloc(a, 5 * MiB, NULL, &big), CCA_ERR_OUT_OF_MEMORY);
    cca_set_log_callback(NULL, NULL);
    cr_assert_eq(cap.lines, 1);
    cr_assert_not_null(strstr(cap.last, "requested 5.00 MiB"), "%s", cap.last);
    no_decimal_comma("the OOM line", cap.last);
    tu_free(a, q);
    cr_assert_eq(cca_domain_destroy(a, d, 0, NULL), CCA_OK, "%s", cca_last_error());
    tu_teardown(a, u);

    /* the program's locale is as it set it */
    cr_assert(tu_decimal_comma(), "the library changed the thread's locale");
    snprintf(check, sizeof check, "%.1f", 1.5);
    cr_assert_str_eq(check, "1,5");
}
