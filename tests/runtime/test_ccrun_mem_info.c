/*
 * test_ccrun_mem_info.c — what ccrun says when the device will not tell
 * its free memory (runtime/ccrun: run.c, report.c, demo.c).
 *
 * - The device (ccrun_double.h) refuses mem_info from its k-th call on,
 *   for every k up to the clean run's count plus one: a run that never
 *   meets a refusal, and one refusal at each point where ccrun or the
 *   engine asks.
 * - A figure ccrun could not read is said to be unknown, never shown as a
 *   number: no device free of "0 B" (the device always has room here), no
 *   more rises of "+0 B" than the clean run shows, no difference wrapped past
 *   the device's size (a GiB figure on a 128-256 MiB device), and no 0 in
 *   the JSON's device_free_bytes (null when unknown).
 * - Whatever fails, the run ends: exit 0 when only ccrun's own rows met
 *   the refusal, or 1 with the engine's message when an engine call needed
 *   the count; nothing is left on the device (ccrun_double.h).
 */
#include <criterion/criterion.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccrun_double.h"

#define SPEC_A "mlp:64x256x256x10:gelu:softmax:seed=1"
#define SPEC_B "mlp:64x256x256x256x10:relu:softmax:seed=2"

static bool matches(const char *text, const char *pattern) {
    regex_t re;
    cr_assert_eq(regcomp(&re, pattern, REG_EXTENDED | REG_NEWLINE), 0, "%s", pattern);
    bool m = regexec(&re, text, 0, NULL, 0) == 0;
    regfree(&re);
    return m;
}

/* No figure made from an unread count, in either stream; zero_rises: how
 * many rises of "+0 B" the clean run shows (a model without a domain gives
 * nothing back at its unload): a refused run may show no more. */
static void no_unread_figure(const ccrun_result *r, uint64_t k, size_t zero_rises) {
    cr_expect_leq(tu_count(r->out, "free +0 B"), zero_rises, "k=%llu: a rise from an unread count:\n%s",
                  (unsigned long long)k, r->out);
    const char *streams[] = {r->out, r->err};
    for (int i = 0; i < 2; i++) {
        const char *t = streams[i];
        cr_expect(!matches(t, "[0-9.]+ (GiB|TiB|PiB|EiB)"), "k=%llu: a size past the device:\n%s",
                  (unsigned long long)k, t);
        cr_expect(!matches(t, "\"device_free_bytes\": 0,"), "k=%llu: 0 for an unread count:\n%s", (unsigned long long)k,
                  t);
        cr_expect(!matches(t, "^[a-z]+ +[^ ]+ +[0-9.]+ [KMG]?i?B +[0-9.]+ [KMG]?i?B +0 B "),
                  "k=%llu: a row showing 0 B free:\n%s", (unsigned long long)k, t);
        cr_expect(!matches(t, "(has|had|with) 0 B free"), "k=%llu: 0 B free said:\n%s", (unsigned long long)k, t);
    }
}

static int argc_of(char **argv) {
    int n = 0;
    while (argv[n])
        n++;
    return n;
}

/* One refused run: k, the first call refused; every period-th from there. */
static void refused_run(size_t capacity, char **argv, uint64_t k, uint64_t period, size_t zero_rises) {
    tu_faulty f;
    ccrun_setup s = {.capacity = capacity, .fail_mem_info_from = k, .fail_mem_info_period = period};
    ccrun_result r = ccrun_on_double(&f, &s, argc_of(argv), argv);
    cr_expect(r.rc == CCRUN_OK || r.rc == CCRUN_ERR_MODEL, "k=%llu/%llu: exit %d; stderr:\n%s", (unsigned long long)k,
              (unsigned long long)period, r.rc, r.err);
    no_unread_figure(&r, k, zero_rises);
    if (r.rc != CCRUN_OK)
        cr_expect(strstr(r.err, "free memory") || strstr(r.out, "free memory"),
                  "k=%llu/%llu: the error names the count:\n%s\n%s", (unsigned long long)k, (unsigned long long)period,
                  r.out, r.err);
    ccrun_result_free(&r);
}

/* ARGV run clean: its mem_info calls, and *zero_rises. */
static uint64_t clean_run(size_t capacity, char **argv, size_t *zero_rises) {
    tu_faulty f;
    ccrun_setup s = {.capacity = capacity};
    ccrun_result r = ccrun_on_double(&f, &s, argc_of(argv), argv);
    cr_assert_eq(r.rc, CCRUN_OK, "clean: exit 0; stdout:\n%s\nstderr:\n%s", r.out, r.err);
    *zero_rises = tu_count(r.out, "free +0 B");
    no_unread_figure(&r, 0, *zero_rises);
    cr_expect_null(strstr(r.out, "unknown"), "%s", r.out);
    cr_assert_gt(f.mem_info_calls, 2);
    ccrun_result_free(&r);
    return f.mem_info_calls;
}

/* ARGV with mem_info refused from each call on, and at every second and
 * third call (each phase): a read refused before a change and granted
 * after, and the other way round. */
static void every_refusal(size_t capacity, char **argv) {
    size_t zero_rises;
    uint64_t calls = clean_run(capacity, argv, &zero_rises);
    for (uint64_t k = 1; k <= calls + 1; k++)
        refused_run(capacity, argv, k, 1, zero_rises);
    for (uint64_t period = 2; period <= 3; period++)
        for (uint64_t k = 1; k <= period; k++)
            refused_run(capacity, argv, k, period, zero_rises);
}

Test(ccrun_mem_info, models_in_turn) {
    char *argv[] = {"ccrun", "--device", "host", "--iters", "2", SPEC_A, SPEC_B, NULL};
    every_refusal(256 * MiB, argv);
}

Test(ccrun_mem_info, models_in_turn_json) {
    char *argv[] = {"ccrun", "--device", "host", "--iters", "2", "--json", SPEC_A, SPEC_B, NULL};
    every_refusal(256 * MiB, argv);
}

Test(ccrun_mem_info, resident_and_no_domains) {
    char *argv[] = {"ccrun", "--device", "host", "--iters", "2", "--resident", SPEC_A, "--no-domains", SPEC_B, NULL};
    every_refusal(256 * MiB, argv);
}

Test(ccrun_mem_info, sleep_and_wake) {
    char *argv[] = {"ccrun", "--device", "host", "--iters", "2", "--sleep", SPEC_A, SPEC_B, SPEC_A, SPEC_B, NULL};
    every_refusal(256 * MiB, argv);
}

/* The demo reads the device's count at 170 calls or so, each run taking
 * most of a second here: the refusals come at every second and third call
 * (each phase), and from every 16th call on (each act's start and end). */
Test(ccrun_mem_info, demo) {
    char *argv[] = {"ccrun", "--demo", "--device", "host", "--capacity", "128M", NULL};
    size_t zero_rises;
    uint64_t calls = clean_run(128 * MiB, argv, &zero_rises);
    for (uint64_t period = 2; period <= 3; period++)
        for (uint64_t k = 1; k <= period; k++)
            refused_run(128 * MiB, argv, k, period, zero_rises);
    for (uint64_t k = 1; k <= calls; k += 16)
        refused_run(128 * MiB, argv, k, 1, zero_rises);
}
