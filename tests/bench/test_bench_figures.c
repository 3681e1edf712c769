/*
 * test_bench_figures.c — bench/replay.c: every memory figure of a ccalloc replay
 * (bench/replay.c) against the allocator's own numbers, obtained here by an
 * independent replay of the same trace through the public API with the same
 * configuration on the same simulated device:
 *
 *   peak reserved            cca_stats.reserved_bytes_peak
 *   peak allocated           cca_stats.allocated_bytes_peak
 *   frag. at peak            cca_stats.fragmentation right after the event
 *                            where allocated bytes first reached their peak
 *   upstream allocs+frees    cca_stats.upstream_allocs / _frees at the end of
 *                            the trace (before ccbench's own empty-cache)
 *   reserved after trace     cca_stats.reserved_bytes then
 *   after empty-cache        ... after cca_empty_cache, leftovers still live
 *   device free before       cca_upstream_mem_info before cca_create
 *   device free after        ... after that empty-cache
 *   × lower bound, × ideal   peak reserved over the trace's references
 *   checkpoints              reserved after each mark and release event, and
 *                            what the release gave back
 *
 * on every generator's trace at a small scale (two seeds) and on hand-made
 * traces with domains, release events and OOMs, for every ccalloc preset;
 * and a row that says "ok" only for a replay whose every pass ran (a host
 * allocation failing at each step in turn: tests/support/malloc_fault.h).
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "ccalloc.h"
#include "ccbench.h"
#include "malloc_fault.h"

/* no driver pass (latencies 0): the figures checked here are the observe pass's */
static const ccb_replay_options opts = {.device_bytes = (size_t)4 << 30, .reps = 1, .timeline_points = 50};

/* What the allocator itself says over the trace. */
typedef struct direct {
    size_t peak_reserved, peak_allocated, reserved_after_trace, reserved_after_empty;
    size_t device_free_before, device_free_after;
    uint64_t upstream_allocs, upstream_frees, ooms;
    double frag_at_peak;
    size_t ncp;
    size_t cp_reserved[64], cp_returned[64];
} direct;

static cca_status alloc_event(cca_allocator *a, cca_domain *const *dom, size_t ndom, const ccb_event *e,
                              void **p) {
    cca_domain *d = e->domain && e->domain < ndom ? dom[e->domain] : NULL;
    return d ? cca_alloc_in(a, d, e->size, (cca_stream)(uintptr_t)e->stream, p)
             : cca_alloc(a, e->size, (cca_stream)(uintptr_t)e->stream, p);
}

/* The trace through cca_* with `config` (cca_config_parse's syntax; a
 * "domains:0" token, ccbench's own key, means: no domains). */
static void direct_replay(const ccb_trace *t, const char *config, direct *d) {
    memset(d, 0, sizeof *d);
    int domains = strstr(config, "domains:0") == NULL;
    char rest[256];
    snprintf(rest, sizeof rest, "%s", config);
    char *k = strstr(rest, "domains:0");
    if (k)
        memmove(k, k + 9, strlen(k + 9) + 1);
    cca_upstream *u;
    cca_host_options ho = {.capacity = opts.device_bytes};
    cr_assert_eq(cca_upstream_host_create_with(&ho, &u), CCA_OK);
    size_t fr, total;
    cr_assert_eq(cca_upstream_mem_info(u, &fr, &total), CCA_OK);
    d->device_free_before = fr;
    cca_config cfg;
    cca_config_default(&cfg);
    cfg.log_oom = 0;
    cr_assert_eq(cca_config_parse(&cfg, rest), CCA_OK, "%s", rest);
    cca_allocator *a;
    cr_assert_eq(cca_create(&cfg, u, &a), CCA_OK);
    void **ptr = calloc(t->slots + 1, sizeof *ptr);
    cca_domain **dom = calloc(t->ndomains + 1, sizeof *dom);
    cr_assert(ptr && dom);
    size_t peak_alloc = 0, reserved = 0;
    d->frag_at_peak = -1;
    for (size_t i = 0; i < t->n; i++) {
        const ccb_event *e = &t->ev[i];
        size_t before = reserved;
        switch (e->op) {
        case CCB_ALLOC: {
            cca_status st = alloc_event(a, dom, t->ndomains, e, &ptr[e->slot]);
            cr_assert(st == CCA_OK || st == CCA_ERR_OUT_OF_MEMORY, "event %zu: %s", i, cca_status_string(st));
            if (st != CCA_OK) {
                ptr[e->slot] = NULL;
                d->ooms++;
            }
            break;
        }
        case CCB_FREE:
            if (ptr[e->slot])
                cr_assert_eq(cca_free(a, ptr[e->slot]), CCA_OK);
            ptr[e->slot] = NULL;
            break;
        case CCB_EMPTY_CACHE:
            cca_empty_cache(a, NULL);
            break;
        case CCB_TRIM:
            cca_trim(a, (size_t)e->size, NULL);
            break;
        case CCB_DOMAIN:
            if (domains && cca_domain_create(a, ccb_domain_name(t, e->domain), &dom[e->domain]) != CCA_OK)
                dom[e->domain] = NULL;
            break;
        case CCB_DOMAIN_RELEASE:
            if (domains && (e->domain == 0 || dom[e->domain]))
                cca_domain_release(a, dom[e->domain], 0, NULL);
            break;
        case CCB_DOMAIN_RESERVE:
            if (domains && (e->domain == 0 || dom[e->domain]))
                cca_domain_reserve(a, dom[e->domain], (size_t)e->size);
            break;
        default:
            break;
        }
        cca_stats s;
        cca_get_stats(a, &s);
        reserved = s.reserved_bytes;
        if (s.allocated_bytes > peak_alloc) {
            peak_alloc = s.allocated_bytes;
            d->frag_at_peak = s.fragmentation;
        }
        if (ccb_op_is_checkpoint(e->op)) {
            cr_assert_lt(d->ncp, 64);
            d->cp_reserved[d->ncp] = reserved;
            d->cp_returned[d->ncp++] = e->op == CCB_MARK || before < reserved ? 0 : before - reserved;
        }
    }
    cca_stats s;
    cca_get_stats(a, &s);
    d->upstream_allocs = s.upstream_allocs;
    d->upstream_frees = s.upstream_frees;
    d->reserved_after_trace = s.reserved_bytes;
    d->peak_reserved = s.reserved_bytes_peak;
    d->peak_allocated = s.allocated_bytes_peak;
    cr_assert_eq(cca_empty_cache(a, NULL), CCA_OK);
    cca_get_stats(a, &s);
    d->reserved_after_empty = s.reserved_bytes;
    cr_assert_eq(cca_upstream_mem_info(u, &fr, &total), CCA_OK);
    d->device_free_after = fr;
    for (size_t i = 0; i <= t->slots; i++)
        if (ptr[i])
            cca_free(a, ptr[i]);
    cca_destroy(a);
    cca_upstream_destroy(u);
    free(ptr);
    free(dom);
}

static int is_ccalloc_preset(size_t i) {
    return strcmp(ccb_presets[i].base, "ccalloc") == 0;
}

/* ccbench's figures of t under every ccalloc preset against direct_replay's. */
static void check_trace(const ccb_trace *t) {
    for (size_t i = 0; i < ccb_preset_count; i++) {
        if (!is_ccalloc_preset(i))
            continue;
        const char *name = ccb_presets[i].name;
        ccb_result r;
        cr_assert_eq(ccb_replay(t, name, &opts, &r), 0, "%s on %s: %s", name, t->name, r.why);
        if (r.skipped) { /* expandable without virtual memory: said, and no figure */
            cr_assert(r.why[0], "%s", name);
            cr_assert_eq(r.peak_reserved, CCB_UNKNOWN, "%s skipped", name);
            ccb_result_free(&r);
            continue;
        }
        direct d;
        direct_replay(t, ccb_presets[i].config, &d);
        cr_assert_eq(r.ooms, d.ooms, "%s on %s: OOMs", name, t->name);
        cr_assert_eq(r.peak_reserved, d.peak_reserved, "%s on %s: peak reserved", name, t->name);
        cr_assert_eq(r.peak_allocated, d.peak_allocated, "%s on %s: peak allocated", name, t->name);
        cr_assert(r.frag_at_peak == d.frag_at_peak, "%s on %s: fragmentation at peak %f, the allocator's %f", name,
                  t->name, r.frag_at_peak, d.frag_at_peak);
        cr_assert_eq(r.upstream_allocs, d.upstream_allocs, "%s on %s: upstream allocs", name, t->name);
        cr_assert_eq(r.upstream_frees, d.upstream_frees, "%s on %s: upstream frees", name, t->name);
        cr_assert_eq(r.reserved_after_trace, d.reserved_after_trace, "%s on %s: reserved after", name, t->name);
        cr_assert_eq(r.reserved_after_empty, d.reserved_after_empty, "%s on %s: after empty-cache", name, t->name);
        cr_assert_eq(r.device_free_before, d.device_free_before, "%s on %s: device free before (%zu, device %zu)",
                     name, t->name, r.device_free_before, d.device_free_before);
        cr_assert_eq(r.device_free_after, d.device_free_after, "%s on %s: device free after", name, t->name);
        cr_assert_eq(r.lower_bound, t->peak_requested);
        cr_assert_eq(r.ideal_peak, t->ideal_peak);
        if (d.ooms) { /* the strategy did not hold the trace the references describe */
            cr_assert(isnan(r.ratio_requested), "%s on %s: × lower bound %f with %llu OOMs", name, t->name,
                      r.ratio_requested, (unsigned long long)d.ooms);
            cr_assert(isnan(r.ratio_ideal), "%s on %s: × ideal arena %f with OOMs", name, t->name, r.ratio_ideal);
        } else {
            cr_assert(t->peak_requested == 0 ? isnan(r.ratio_requested)
                                             : r.ratio_requested == (double)d.peak_reserved / (double)t->peak_requested,
                      "%s on %s: × lower bound", name, t->name);
            cr_assert(t->ideal_peak == 0 ? isnan(r.ratio_ideal)
                                         : r.ratio_ideal == (double)d.peak_reserved / (double)t->ideal_peak,
                      "%s on %s: × ideal arena", name, t->name);
        }
        cr_assert_eq(r.checkpoints_n, d.ncp, "%s on %s: checkpoints", name, t->name);
        for (size_t c = 0; c < d.ncp; c++) {
            cr_assert_eq(r.checkpoints[c].reserved, d.cp_reserved[c], "%s on %s: checkpoint %zu reserved", name,
                         t->name, c);
            cr_assert_eq(r.checkpoints[c].returned, d.cp_returned[c], "%s on %s: checkpoint %zu returned", name,
                         t->name, c);
        }
        ccb_result_free(&r);
    }
}

static void read_text(ccb_trace *t, const char *name, const char *text) {
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    cr_assert_not_null(f);
    ccb_trace_init(t, name);
    char err[256] = "";
    cr_assert_eq(ccb_trace_read(t, f, err, sizeof err), 0, "%s: %s", name, err);
    fclose(f);
}

Test(figures, every_generator_under_every_ccalloc_preset) {
    for (size_t g = 0; g < ccb_generator_count; g++) {
        for (uint64_t seed = 1; seed <= 2; seed++) {
            ccb_gen_params p = {seed, 0.01};
            ccb_trace t;
            cr_assert_eq(ccb_generate(ccb_generators[g].name, &p, &t), 0, "%s", ccb_generators[g].name);
            check_trace(&t);
            ccb_trace_free(&t);
        }
    }
}

Test(figures, domains_and_release_events) {
    ccb_trace t;
    read_text(&t, "domains",
              "seq,op,id,size,stream,domain,name\n"
              "0,domain,0,0,0,1,m1\n1,domain,0,0,0,2,m2\n2,mark,0,0,0,0,load\n"
              "3,domain_reserve,0,8388608,0,1\n4,alloc,1,1000,0,1\n5,alloc,2,3000000,1,2\n"
              "6,alloc,3,512,0,0\n7,alloc,4,40000000,0,2\n8,free,1,1000,0,1\n9,domain_release,0,0,0,1\n"
              "10,alloc,5,7000,0,1\n11,free,2,3000000,1,2\n12,trim,0,1048576,0,0\n13,free,4,40000000,0,2\n"
              "14,mark,0,0,0,0,next\n15,empty_cache,0,0,0,0\n16,domain_release,0,0,0,2\n");
    check_trace(&t);
    ccb_trace_free(&t);
}

Test(figures, a_strategy_with_ooms_has_no_ratio_to_the_references) {
    /* a block larger than the device is refused: the strategy then holds
     * less than the trace's lower bound, and a ratio below 1 (0.000 here)
     * would say it beat a bound no allocator can beat */
    ccb_trace t;
    read_text(&t, "huge",
              "seq,op,id,size,stream\n0,alloc,1,1152921504606846976,0\n1,alloc,2,4096,0\n"
              "2,free,2,4096,0\n3,alloc,3,513,0\n");
    check_trace(&t);
    ccb_result r;
    cr_assert_eq(ccb_replay(&t, "device-malloc", &opts, &r), 0, "%s", r.why);
    cr_assert_eq(r.ooms, 1);
    cr_assert(isnan(r.ratio_requested) && isnan(r.ratio_ideal), "device-malloc: %f %f", r.ratio_requested,
              r.ratio_ideal);
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    ccb_write_results_md(m, &r, 1);
    fclose(m);
    /* | trace | strategy | med | p99 | total | driver | peak reserved | × lower bound | × ideal | ... */
    const char *row = strstr(buf, "| huge |");
    cr_assert_not_null(row, "%s", buf);
    const char *cell = row;
    for (int k = 0; k < 8; k++)
        cell = strchr(cell + 1, '|');
    cr_assert_eq(strncmp(cell, "| — | — |", strlen("| — | — |")), 0, "%s", row);
    free(buf);
    ccb_result_free(&r);
    ccb_trace_free(&t);
}

/* The checkpoint table's "live requested" column is the trace's: taken from
 * a strategy that served every allocation, never from one with OOMs ahead
 * of it (that one held less: the refused 1 GiB block is live in the trace);
 * when every strategy had OOMs, the column says it shows what was served. */
Test(figures, checkpoints_live_requested_is_the_traces) {
    ccb_trace t;
    read_text(&t, "cp",
              "seq,op,id,size,stream,name\n0,alloc,1,1073741824,0\n1,alloc,2,4096,0\n2,mark,0,0,0,m\n"
              "3,free,2,4096,0\n4,free,1,1073741824,0\n");
    ccb_result r[2];
    ccb_replay_options o = opts;
    o.device_bytes = (size_t)512 << 20; /* the 1 GiB block never fits */
    cr_assert_eq(ccb_replay(&t, "ccalloc", &o, &r[0]), 0, "%s", r[0].why);
    cr_assert_eq(r[0].ooms, 1);
    o.device_bytes = (size_t)4 << 30;
    cr_assert_eq(ccb_replay(&t, "ccalloc", &o, &r[1]), 0, "%s", r[1].why);
    cr_assert_eq(r[1].ooms, 0);
    for (size_t n = 2; n >= 1; n--) { /* both (the first with OOMs), then the first alone */
        char *buf = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&buf, &len);
        ccb_write_checkpoints_md(m, &t, r, n);
        fclose(m);
        const char *want = n == 2 ? "| live requested |" : "| live requested (served) |";
        cr_assert_not_null(strstr(buf, want), "%zu strategies:\n%s", n, buf);
        /* the mark's row: event, label, live requested, then each strategy's reserved bytes */
        cr_assert_not_null(strstr(buf, n == 2 ? "\n| 2 | m | 1.00 GiB | 2.00 MiB | 1.00 GiB |\n"
                                              : "\n| 2 | m | 4.00 KiB | 2.00 MiB |\n"),
                           "%zu strategies:\n%s", n, buf);
        free(buf);
    }
    ccb_result_free(&r[0]);
    ccb_result_free(&r[1]);
    ccb_trace_free(&t);
}

/* The writers' own arithmetic on a hand-made row: a figure of 0 is a
 * figure ("0.000", never the "—" of an unknown one); a CSV field with a
 * quote is quoted; a timeline point's columns are its own; a release that
 * returned nothing shows no "(−0 B)"; a domain's column sums what each of
 * its releases returned. */
Test(figures, writers_show_zero_and_sum_each_domains_releases) {
    char b[32];
    ccb_fmt_num(0.0, "%.3f", b, sizeof b);
    cr_assert_str_eq(b, "0.000");
    ccb_fmt_num(-1.0, "%.3f", b, sizeof b);
    cr_assert_str_eq(b, "—");
    /* a CSV field with a quote is quoted, its quote doubled (RFC 4180) */
    char *f = NULL;
    size_t flen = 0;
    FILE *fm = open_memstream(&f, &flen);
    ccb_csv_field(fm, "a\"b");
    fputc('|', fm);
    ccb_csv_field(fm, "plain");
    fclose(fm);
    cr_assert_str_eq(f, "\"a\"\"b\"|plain");
    free(f);
    ccb_trace t;
    ccb_trace_init(&t, "d");
    cr_assert_eq(ccb_trace_domain(&t, "m"), 1);
    for (int k = 0; k < 2; k++) {
        ccb_trace_release(&t, ccb_trace_alloc_in(&t, 4096, 0, 1));
        cr_assert_eq(ccb_trace_domain_release(&t, 1), 0);
    }
    ccb_trace_empty_cache(&t);
    cr_assert_eq(ccb_trace_analyze(&t, NULL, 0), 0);
    ccb_checkpoint cp[3] = {
        {.event = 3, .op = CCB_DOMAIN_RELEASE, .mark = 1, .reserved = 3 << 20, .returned = 1 << 20},
        {.event = 6, .op = CCB_DOMAIN_RELEASE, .mark = 1, .reserved = 1 << 20, .returned = 2 << 20},
        {.event = 7, .op = CCB_EMPTY_CACHE, .reserved = 1 << 20, .returned = 0},
    };
    ccb_result r;
    memset(&r, 0, sizeof r);
    snprintf(r.strategy, sizeof r.strategy, "s");
    r.peak_reserved = 4 << 20;
    r.checkpoints = cp;
    r.checkpoints_n = 3;
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    ccb_write_checkpoints_md(m, &t, &r, 1);
    ccb_write_domains_md(m, &t, &r, 1);
    fclose(m);
    cr_assert_not_null(strstr(buf, "\n| 3 | **release domain m** | 0 B | 3.00 MiB (−1.00 MiB) |\n"), "%s", buf);
    cr_assert_not_null(strstr(buf, "\n| 7 | **empty_cache** | 0 B | 1.00 MiB |\n"), "%s", buf);
    cr_assert_not_null(strstr(buf, "\n| m | 2 | 4.00 KiB | 2 | 3.00 MiB |\n"), "%s", buf);
    free(buf);
    ccb_trace_free(&t);
    /* a timeline point: requested, allocated and reserved, each its own MiB column */
    ccb_timeline_point pt = {.op = 5, .requested = 1 << 20, .allocated = 2 << 20, .reserved = 3 << 20};
    r.timeline = &pt;
    r.timeline_n = 1;
    char path[] = "/tmp/ccb-timeline-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    cr_assert_eq(ccb_write_timeline_csv(path, &r), 0);
    FILE *tf = fopen(path, "r");
    cr_assert_not_null(tf);
    char text[512] = "";
    size_t got = fread(text, 1, sizeof text - 1, tf);
    text[got] = '\0';
    fclose(tf);
    unlink(path);
    cr_assert_not_null(strstr(text, "\nop,requested_mib,allocated_mib,reserved_mib\n5,1.000,2.000,3.000\n"), "%s",
                       text);
}

/* ---- a replay that fails part-way ------------------------------------------------ */

/* The row of r as results.csv writes it, status field alone; *checkpoints:
 * the lines of r in checkpoints.csv. */
static void csv_status(const ccb_trace *t, const ccb_result *r, char *status, size_t len, size_t *checkpoints) {
    char *buf = NULL;
    size_t n = 0;
    tu_malloc_hold(true);
    FILE *m = open_memstream(&buf, &n);
    cr_assert_not_null(m);
    ccb_write_checkpoints_csv(m, t, r, 1, 0);
    fclose(m);
    *checkpoints = 0;
    for (const char *c = buf; (c = strchr(c, '\n')); c++)
        ++*checkpoints;
    free(buf);
    m = open_memstream(&buf, &n);
    cr_assert_not_null(m);
    ccb_write_results_csv(m, r, 1);
    fclose(m);
    tu_malloc_hold(false);
    const char *row = strchr(buf, '\n') + 1; /* past the header */
    const char *f = row;
    for (int k = 0; k < 2; k++) { /* trace, strategy (no comma in these) */
        f = strchr(f, ',');
        cr_assert_not_null(f, "%s", row);
        f++;
    }
    /* "config": quoted, commas inside ("policy:growth,expandable:0"), no quote */
    cr_assert_eq(*f, '"', "%s", row);
    f = strchr(f + 1, '"');
    cr_assert(f && f[1] == ',', "%s", row);
    f += 2;
    snprintf(status, len, "%.*s", (int)strcspn(f, ","), f);
    free(buf);
}

Test(figures, a_row_says_ok_only_when_every_pass_ran) {
    /* the k-th host allocation of the replay fails, for every k: the replay
     * then either succeeds (its row "ok", with every figure: the allocator
     * may have served it otherwise, a failed host allocation being its
     * business) or fails, and its row says "failed" with the reason:
     * never "ok" with figures of a pass that did not finish (the pass with
     * the driver's cost, last, failed and the row still said ok), and no
     * checkpoint of a failed cell in checkpoints.csv */
    ccb_trace t;
    read_text(&t, "small",
              "seq,op,id,size,stream,name\n0,alloc,1,4096,0\n1,alloc,2,3000000,0\n2,free,1,4096,0\n"
              "3,mark,0,0,0,m\n4,alloc,3,100,0\n5,free,2,3000000,0\n6,empty_cache,0,0,0\n7,free,3,100,0\n");
    ccb_replay_options o = opts;
    o.alloc_latency_ns = o.free_latency_ns = 1000; /* a pass with the driver's cost, after the timed one */
    long k = 1;
    for (;; k++) {
        ccb_result r;
        tu_malloc_arm(k, false);
        int rc = ccb_replay(&t, "ccalloc-growth", &o, &r);
        long injected = tu_malloc_disarm();
        char status[32];
        size_t checkpoints;
        csv_status(&t, &r, status, sizeof status, &checkpoints);
        if (rc == 0) {
            cr_assert_str_eq(status, "ok", "k %ld: replay succeeded, row %s (%s)", k, status, r.why);
            cr_assert(!isnan(r.driver_total_ms), "k %ld: no time with the driver in an ok row", k);
            cr_assert_eq(checkpoints, 2, "k %ld: the mark and the empty_cache", k);
        } else {
            cr_assert_str_eq(status, "failed", "k %ld: replay failed (%s), row %s", k, r.why, status);
            cr_assert(r.why[0], "k %ld: a failure says why", k);
            cr_assert_eq(checkpoints, 0, "k %ld: no checkpoint of a failed cell", k);
        }
        ccb_result_free(&r);
        if (!injected)
            break; /* past the replay's last allocation */
    }
    cr_assert_gt(k, 20, "the sweep reached every pass");
    ccb_trace_free(&t);
}

/* ---- the driver's table -------------------------------------------------------------- */

Test(figures, the_driver_tables_pair_median_is_the_median_of_the_pairs) {
    /* pairs (alloc, free) of (10, 30), (20, 20), (30, 10) µs: each median is
     * 20 and their sum 40, but every pair cost 40 and the pair median here
     * is what the row measured: 45 says the column is the row's own, never
     * the sum of the two medians (which it was) */
    ccb_driver_row row = {.size = 2 << 20,
                          .reps = 3,
                          .alloc_median_us = 20,
                          .alloc_p99_us = 30,
                          .free_median_us = 20,
                          .free_p99_us = 30,
                          .pair_median_us = 45};
    char md[1024] = "", csv[256] = ""; /* the tables fit: fmemopen's buffers */
    FILE *f = fmemopen(md, sizeof md - 1, "w");
    ccb_write_driver_md(f, &row, 1, 3);
    fclose(f);
    cr_assert_not_null(strstr(md, "| 2.00 MiB | 20.0 | 30.0 | 20.0 | 30.0 | 45.0 |\n"), "%s", md);
    f = fmemopen(csv, sizeof csv - 1, "w");
    ccb_write_driver_csv(f, &row, 1);
    fclose(f);
    cr_assert_not_null(strstr(csv, ",pair_median_us\n2097152,3,20.000,30.000,20.000,30.000,45.000\n"), "%s", csv);
}

/* ---- ccbench info under host memory failure ------------------------------------------ */

/* `ccbench info A B`: the k-th host allocation fails, for every k. Either
 * the command succeeds and printed the header and both rows, or it fails
 * (exit 1 or 2) — never exit 0 with a row missing (the second trace's row
 * is built in memory; when that failed the row was dropped and the table
 * looked complete). */
static void write_file(char *path, const char *text) {
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

Test(figures, info_never_succeeds_with_a_row_missing) {
    /* trace files (a generator aborts on host OOM by design: budget.c) */
    char a[] = "/tmp/ccbench_info_a_XXXXXX", b[] = "/tmp/ccbench_info_b_XXXXXX";
    write_file(a, "seq,op,id,size,stream\n0,alloc,1,4096,0\n1,alloc,2,3000000,0\n2,free,1,4096,0\n3,free,2,3000000,0\n");
    write_file(b, "seq,op,id,size,stream\n0,alloc,1,100,0\n1,free,1,100,0\n");
    char path[] = "/tmp/ccbench_info_XXXXXX";
    write_file(path, "");
    long k = 1;
    for (;; k++) {
        ccb_options o;
        ccb_options_init(&o, "ccbench info");
        o.args[0] = a;
        o.args[1] = b;
        o.nargs = 2;
        fflush(stdout);
        int saved = dup(1);
        FILE *out = fopen(path, "w");
        cr_assert_not_null(out);
        dup2(fileno(out), 1);
        tu_malloc_arm(k, false);
        int rc = ccb_cmd_info(&o);
        fflush(stdout);
        long injected = tu_malloc_disarm();
        dup2(saved, 1);
        close(saved);
        fclose(out);
        char text[4096] = "";
        FILE *in = fopen(path, "r");
        size_t n = fread(text, 1, sizeof text - 1, in);
        text[n] = '\0';
        fclose(in);
        int rows = 0;
        for (const char *p = text; (p = strstr(p, "\n| ")); p++)
            rows++;
        if (rc == 0)
            cr_assert_eq(rows, 2, "k %ld: exit 0 with %d of 2 rows:\n%s", k, rows, text);
        else
            cr_assert(rc == 1 || rc == 2, "k %ld: exit %d", k, rc);
        if (!injected)
            break;
    }
    cr_assert_gt(k, 3);
    unlink(path);
    unlink(a);
    unlink(b);
}

/* stdout to /dev/null and stderr into err while fn(o) runs with the k-th
 * host allocation failing; its exit status, *injected how many were. */
static int run_faulted(int (*fn)(ccb_options *), ccb_options *o, long k, char *err, size_t errlen, long *injected) {
    char path[] = "/tmp/ccbench_err_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    fflush(stdout);
    fflush(stderr);
    int out = dup(1), saved = dup(2), null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(fd, 2);
    tu_malloc_arm(k, false);
    int rc = fn(o);
    fflush(stdout);
    fflush(stderr);
    *injected = tu_malloc_disarm();
    dup2(out, 1);
    dup2(saved, 2);
    close(out);
    close(saved);
    close(null);
    ssize_t n = pread(fd, err, errlen - 1, 0);
    err[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(path);
    return rc;
}

/* replay and micro: a run that host memory cuts short exits non-zero and
 * says so on stderr, never in silence (the tables of results and of micro
 * rows, and replay's traces, failed to be allocated with nothing said). */
Test(figures, replay_and_micro_never_fail_in_silence) {
    char a[] = "/tmp/ccbench_replay_a_XXXXXX";
    write_file(a, "seq,op,id,size,stream\n0,alloc,1,4096,0\n1,free,1,4096,0\n");
    for (int micro = 0; micro < 2; micro++) {
        long k = 1, injected;
        for (;; k++) {
            ccb_options o;
            ccb_options_init(&o, "ccbench");
            o.specs[o.nspecs++] = "malloc";
            o.reps = 1;
            o.pairs = 10;
            o.lives[o.nlives++] = 10;
            o.args[0] = a;
            o.nargs = !micro;
            char err[4096];
            int rc = run_faulted(micro ? ccb_cmd_micro : ccb_cmd_replay, &o, k, err, sizeof err, &injected);
            if (rc != 0)
                cr_assert(err[0], "%s, k %ld: exit %d and nothing said", micro ? "micro" : "replay", k, rc);
            if (!injected)
                break;
        }
        cr_assert_gt(k, 2);
    }
    unlink(a);
}

/* A trace loaded is never written over by an output of the run (outputs.c):
 * with host memory short for its note, the load fails rather than leave it
 * unguarded (the note was dropped in silence and the load went on). */
Test(figures, a_trace_read_is_guarded_or_not_read) {
    long k = 1;
    /* every k's trace kept until the sweep ends: one removed at once would
     * give its identity (inode) to the next k's, noted already, and that
     * k's load would make fewer allocations (every_loss_is_counted) */
    char root[] = "/tmp/ccbench_guard_XXXXXX";
    cr_assert_not_null(mkdtemp(root));
    for (;; k++) {
        char path[64];
        snprintf(path, sizeof path, "%s/%ld.XXXXXX", root, k);
        write_file(path, "seq,op,id,size,stream\n0,alloc,1,100,0\n1,free,1,100,0\n");
        ccb_trace t;
        char err[256] = "";
        tu_malloc_arm(k, false);
        int rc = ccb_trace_load(&t, path, err, sizeof err);
        long injected = tu_malloc_disarm();
        if (rc == 0) {
            ccb_trace_free(&t);
            FILE *f = ccb_open_out(NULL, path);
            cr_assert_null(f, "k %ld: the trace just read was opened for writing", k);
        } else {
            cr_assert(err[0], "k %ld: a failed load says why", k);
        }
        if (!injected)
            break;
    }
    char rm[300];
    snprintf(rm, sizeof rm, "rm -rf '%s'", root);
    cr_assert_eq(system(rm), 0);
    cr_assert_gt(k, 2);
}

/* A table never looks whole when a row was not written: a row over 1 KiB
 * (a long reason) that host memory cannot format is replaced by
 * "(out of host memory for the message)" (ccai_escape.h), a per-domain
 * table host memory cannot sum says "(host memory short: ...)", and either
 * counts an output failure (exit 1). Each k fails the k-th host allocation
 * of one writer call, in a fresh directory; `file` must never hold a loss
 * the count did not see, and the sweep must reach one. */
typedef void write_fn(const char *dir, const ccb_trace *t, const ccb_result *r);

static void every_loss_is_counted(write_fn *write, const char *file, const ccb_trace *t, const ccb_result *r) {
    int lost_seen = 0;
    long k = 1;
    /* a fresh directory per k (a file written once is not written again),
     * all kept until the sweep ends: a file removed at once would give its
     * identity (inode) to the next k's, which the run's notes of the files
     * it wrote know already (outputs.c), and that k would make fewer
     * allocations than the others and end the sweep early */
    char root[] = "/tmp/ccbench_rowsXXXXXX";
    cr_assert_not_null(mkdtemp(root));
    for (;; k++) {
        char dir[64];
        snprintf(dir, sizeof dir, "%s/%ld", root, k);
        cr_assert_eq(mkdir(dir, 0700), 0);
        unsigned before = ccb_out_failures();
        tu_malloc_arm(k, false);
        write(dir, t, r);
        long injected = tu_malloc_disarm();
        char path[256], text[16384] = "";
        snprintf(path, sizeof path, "%s/%s", dir, file);
        FILE *f = fopen(path, "r");
        if (f) {
            text[fread(text, 1, sizeof text - 1, f)] = '\0';
            fclose(f);
        }
        if (strstr(text, "out of host memory") || strstr(text, "host memory short")) {
            lost_seen = 1;
            cr_assert_gt(ccb_out_failures(), before, "k %ld: %s lost a row and no failure was counted", k, file);
        }
        if (!injected)
            break;
    }
    char rm[300];
    snprintf(rm, sizeof rm, "rm -rf '%s'", root);
    cr_assert_eq(system(rm), 0);
    cr_assert(lost_seen, "the sweep never reached a row of %s", file);
}

static void write_files(const char *dir, const ccb_trace *t, const ccb_result *r) {
    ccb_outdir d = {dir, NULL, 1};
    ccb_write_replay_files(&d, t, 1, r, 1);
}

/* README.md as replay and --all write it: the command (over 1 KiB here),
 * then the replay's tables, each writer's status counted. */
static void write_readme(const char *dir, const ccb_trace *t, const ccb_result *r) {
    ccb_outdir d = {dir, NULL, 1};
    ccb_device dev = {0};
    char command[1200];
    memset(command, 'c', sizeof command - 1);
    command[sizeof command - 1] = '\0';
    FILE *f = ccb_open_out(dir, "README.md");
    if (f) {
        int bad = ccb_write_command_md(f, command);
        bad |= ccb_write_replay_readme(f, &d, t, 1, r, 1, &dev);
        ccb_out_formatted(bad, dir, "README.md");
    }
    ccb_close_out(f, dir, "README.md");
}

/* A trace of two domains, each released, and one result: skipped with a
 * reason over 1 KiB (`reported` 0), or replayed (`reported` 1, so that the
 * per-domain table has its strategy's column), --iterations 2 either way. */
static void lost_row_case(ccb_trace *t, ccb_result *r, int reported) {
    ccb_trace_init(t, "t");
    int m = ccb_trace_domain(t, "m");
    cr_assert_gt(m, 0);
    ccb_trace_release(t, ccb_trace_alloc_in(t, 4096, 0, (unsigned)m));
    cr_assert_eq(ccb_trace_domain_release(t, (unsigned)m), 0);
    cr_assert_eq(ccb_trace_analyze(t, NULL, 0), 0);
    memset(r, 0, sizeof *r);
    if (reported) {
        ccb_replay_options o = opts;
        o.iterations = 2;
        cr_assert_eq(ccb_replay(t, "ccalloc-growth", &o, r), 0);
    } else {
        r->skipped = 1;
        r->iterations = 2;
        snprintf(r->trace, sizeof r->trace, "t");
        snprintf(r->strategy, sizeof r->strategy, "s");
        memset(r->why, 'w', 1400);
        r->why[1400] = '\0';
    }
}

/* lost_row_case's trace and result through every_loss_is_counted */
static void loss_counted(write_fn *write, const char *file, int reported) {
    ccb_trace t;
    ccb_result r;
    lost_row_case(&t, &r, reported);
    every_loss_is_counted(write, file, &t, &r);
    if (reported)
        ccb_result_free(&r);
    ccb_trace_free(&t);
}

Test(figures, a_results_row_lost_to_host_memory_fails_the_output) {
    loss_counted(write_files, "results.md", 0);
}

/* --iterations: the iterations table had the same rows and no check; a
 * lost row left iterations.md and README.md looking whole (exit 0). */
Test(figures, an_iterations_row_lost_to_host_memory_fails_the_output) {
    loss_counted(write_files, "iterations.md", 0);
    loss_counted(write_readme, "README.md", 0);
}

/* The per-domain table host memory could not sum said so in README.md and
 * the run exited 0. */
Test(figures, a_domains_table_lost_to_host_memory_fails_the_output) {
    loss_counted(write_readme, "README.md", 1);
}

/* The machine line every README carries is the kernel's own uname(2) answer:
 * it ran `uname -a` through a shell (popen), so a `uname` earlier in PATH
 * wrote the line, and no PATH gave "unknown". */
Test(figures, the_machine_line_is_the_kernels_answer_whatever_the_path) {
    struct utsname u;
    cr_assert_eq(uname(&u), 0);
    char want[1200];
    snprintf(want, sizeof want, "- machine: `%s %s %s %s %s`\n", u.sysname, u.nodename, u.release, u.version,
             u.machine);
    char dir[] = "/tmp/ccb_machine_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char fake[64];
    snprintf(fake, sizeof fake, "%s/uname", dir);
    FILE *s = fopen(fake, "w");
    cr_assert_not_null(s);
    fputs("#!/bin/sh\necho planted\n", s);
    cr_assert_eq(fclose(s), 0);
    cr_assert_eq(chmod(fake, 0755), 0);
    const char *old = getenv("PATH");
    char *saved = old ? strdup(old) : NULL;
    const char *paths[] = {dir, "", "/nonexistent"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        cr_assert_eq(setenv("PATH", paths[i], 1), 0);
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        cr_assert_not_null(f);
        ccb_write_machine_md(f);
        cr_assert_eq(fclose(f), 0);
        cr_assert_eq(strncmp(text, want, strlen(want)), 0, "PATH=%s: %s, not %s", paths[i], text, want);
        free(text);
    }
    if (saved)
        setenv("PATH", saved, 1);
    free(saved);
    unlink(fake);
    rmdir(dir);
}
