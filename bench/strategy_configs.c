/*
 * strategy_configs.c — the configs of the strategies that are not ccalloc,
 * read before any device call, so that they are checked (a strategy's
 * `check` op) and tested on every build, with or without a GPU:
 *
 *   none         malloc, device-malloc, cuda-malloc: an empty config only
 *   cuda-async   "" (threshold 0), "release_threshold:max" or
 *                "release_threshold:N"
 *   cub          "key:N,..." with bin_growth, min_bin, max_bin, max_cached
 *
 * Values are plain decimal (ccai_decimal_uint); a refusal's why names the
 * value, quoting at most QUOTE_MAX bytes of it cut between UTF-8
 * characters and marked "..." (a config from -s has any length; the why's
 * buffer would cut it anywhere). The ranges and why they are what they
 * are: ccbench.h.
 */
#include "ccbench.h"

#include "ccai_decimal.h" /* common/: ccai_decimal_uint */
#include "ccai_utf8.h"    /* common/: ccai_utf8_head */

#include <stdint.h>
#include <string.h>

/* The n bytes at s as a refusal quotes them: "%.*s%s" of QUOTED(s, n). */
#define QUOTE_MAX 200
#define QUOTED(s, n) ccai_utf8_head((s), (n), QUOTE_MAX), (s), (n) > QUOTE_MAX ? "..." : ""

int ccb_no_config_check(const char *config, char *why, size_t whylen) {
    if (config && *config) {
        snprintf(why, whylen, "takes no config (got '%.*s%s')", QUOTED(config, strlen(config)));
        return -1;
    }
    return 0;
}

int ccb_async_config_check(const char *config, char *why, size_t whylen) {
    unsigned long long threshold;
    return ccb_async_config_parse(config, &threshold, why, whylen);
}

int ccb_cub_config_check(const char *config, char *why, size_t whylen) {
    ccb_cub_config c;
    return ccb_cub_config_parse(config, &c, why, whylen);
}

int ccb_async_config_parse(const char *config, unsigned long long *threshold, char *why, size_t whylen) {
    static const char key[] = "release_threshold:";
    *threshold = 0;
    if (!config || !*config)
        return 0;
    if (!strcmp(config, "release_threshold:max")) {
        *threshold = UINT64_MAX;
        return 0;
    }
    if (strncmp(config, key, sizeof key - 1) || ccai_decimal_uint(config + sizeof key - 1, 0, UINT64_MAX, threshold)) {
        snprintf(why, whylen,
                 "cuda-async: config is release_threshold:N (plain decimal) or release_threshold:max, got '%.*s%s'",
                 QUOTED(config, strlen(config)));
        return -1;
    }
    return 0;
}

/* base^exp <= UINT64_MAX */
static int power_fits(unsigned long long base, unsigned exp) {
    unsigned long long p = 1;
    for (unsigned i = 0; i < exp; i++) {
        if (p > UINT64_MAX / base)
            return 0;
        p *= base;
    }
    return 1;
}

int ccb_cub_config_parse(const char *config, ccb_cub_config *c, char *why, size_t whylen) {
    *c = (ccb_cub_config){.bin_growth = 8, .min_bin = 3, .max_bin = 7, .max_cached = (6ull << 20) - 1};
    char item[64];
    for (const char *at = config; at && *at;) {
        size_t n = strcspn(at, ",");
        snprintf(item, sizeof item, "%.*s", (int)(n < sizeof item ? n : sizeof item - 1), at);
        char *colon = strchr(item, ':');
        unsigned *field = NULL; /* the key's field and range */
        unsigned long long v = 0, lo = 0, hi = UINT32_MAX;
        if (n < sizeof item && colon) {
            *colon = '\0';
            if (!strcmp(item, "bin_growth"))
                field = &c->bin_growth, lo = 2;
            else if (!strcmp(item, "min_bin"))
                field = &c->min_bin;
            else if (!strcmp(item, "max_bin"))
                field = &c->max_bin;
            else if (!strcmp(item, "max_cached"))
                hi = UINT64_MAX;
            else
                colon = NULL; /* an unknown key */
        }
        int bad = n >= sizeof item || !colon || ccai_decimal_uint(colon + 1, lo, hi, &v);
        if (!bad && field)
            *field = (unsigned)v;
        else if (!bad)
            c->max_cached = v;
        if (bad) {
            snprintf(why, whylen,
                     "cub: bad config item '%.*s%s' (expected bin_growth:2..2^32-1, min_bin:N, max_bin:N or "
                     "max_cached:BYTES, plain decimal, separated by single commas)",
                     QUOTED(at, n));
            return -1;
        }
        at += n;
        if (*at == ',' && !*++at) { /* a trailing comma: an empty item */
            snprintf(why, whylen, "cub: bad config '%.*s%s': empty item after the last comma",
                     QUOTED(config, strlen(config)));
            return -1;
        }
    }
    if (c->min_bin > c->max_bin || !power_fits(c->bin_growth, c->max_bin)) {
        snprintf(why, whylen,
                 "cub: config needs min_bin <= max_bin and bin_growth^max_bin < 2^64, got min_bin %u, max_bin %u, "
                 "bin_growth %u",
                 c->min_bin, c->max_bin, c->bin_growth);
        return -1;
    }
    return 0;
}
