/*
 * oracle_harness.c — the loop and the shared checks of the oracle tests
 * (oracle_harness.h).
 */
#include "oracle_harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

size_t oracle_jitter(uint64_t *rng, size_t n) {
    static const long d[] = {0, 0, -1, 1, -512, 512, -513, 513};
    long k = d[tu_rand(rng) % 8];
    return (k < 0 && (size_t)-k >= n) ? n : n + (size_t)k;
}

/* The log sink: with log_oom:1 an OOM writes one line, and nothing else
 * logs in these tests, so the lines are counted. */
static uint64_t log_lines;
static char last_line[1024];

static void count_line(void *user, const char *line) {
    (void)user;
    log_lines++;
    snprintf(last_line, sizeof last_line, "%s", line);
}

/* The OOM line names the request, reserved, allocated, the largest free
 * block and the device's free memory (docs/allocator.md, "Out of
 * memory"): after the retry, so what it released is gone. */
static void check_oom_line(const oracle_run *r, size_t size, const oracle_figures *f) {
    char b[32], want[5][96];
    snprintf(want[0], sizeof want[0], "requested %s", cca_format_bytes(size, b, sizeof b));
    snprintf(want[1], sizeof want[1], "reserved %s", cca_format_bytes(f->reserved, b, sizeof b));
    snprintf(want[2], sizeof want[2], "allocated %s", cca_format_bytes(f->allocated, b, sizeof b));
    snprintf(want[3], sizeof want[3], "largest free block %s", cca_format_bytes(f->largest_free, b, sizeof b));
    snprintf(want[4], sizeof want[4], "device free %s", cca_format_bytes(f->device_free, b, sizeof b));
    for (int i = 0; i < 5; i++)
        cr_assert(strstr(last_line, want[i]), "alloc(%zu): the OOM line '%s' does not say '%s'" WHERE, size, last_line,
                  want[i], WHERE_ARGS(r));
}

int oracle_alloc_status(oracle_run *r, size_t size, cca_status st, const void *p, cca_status want, int oom,
                        const oracle_figures *f) {
    static const char *const reasons[] = {NULL, "it can never succeed", "nothing cached to release", ""};
    cr_assert_eq(st, want, "alloc(%zu): real %s, model %s (%s)" WHERE, size, cca_status_string(st),
                 cca_status_string(want), cca_last_error(), WHERE_ARGS(r));
    const char *why = oom > ORACLE_OOM_NONE && oom <= ORACLE_OOM_OTHER ? reasons[oom] : NULL;
    if (why) { /* the reasons docs/allocator.md quotes */
        cr_assert(strstr(cca_last_error(), why), "alloc(%zu): the message '%s' does not say '%s'" WHERE, size,
                  cca_last_error(), why, WHERE_ARGS(r));
        r->books.oom_lines++;
        check_oom_line(r, size, f);
    }
    if (st != CCA_OK || size == 0) {
        cr_assert_null(p, "alloc(%zu) failed or empty but *out is not NULL" WHERE, size, WHERE_ARGS(r));
        return 0;
    }
    return 1;
}

void oracle_keep(oracle_run *r, cca_allocator *a, void *p, size_t size, size_t model_block, uint64_t id, size_t off) {
    size_t held;
    cr_assert_eq(cca_block_size(a, p, &held), CCA_OK);
    CHECK_EQ(r, held, model_block, "cca_block_size");
    cr_assert_lt(r->n, ORACLE_MAX_LIVE + 1);
    r->live[r->n++] = (oracle_live){p, id, off, size};
    r->books.alloc_calls++;
    r->books.requested += size;
}

#define PEAK(p, v) ((p) = (v) > (p) ? (v) : (p))

void oracle_check_stats(oracle_run *r, cca_allocator *a, cca_upstream *u, const oracle_figures *f, cca_stats *s) {
    cca_get_stats(a, s);
    oracle_books *k = &r->books;
    PEAK(k->requested_peak, k->requested);
    PEAK(k->allocated_peak, f->allocated);
    PEAK(k->reserved_peak, f->reserved);
    PEAK(k->active_peak, f->active_blocks);
    PEAK(k->segments_peak, f->segments);
    CHECK_EQ(r, s->reserved_bytes, f->reserved, "reserved_bytes");
    CHECK_EQ(r, s->allocated_bytes, f->allocated, "allocated_bytes");
    CHECK_EQ(r, s->cached_bytes, f->cached, "cached_bytes");
    CHECK_EQ(r, s->largest_free_block, f->largest_free, "largest_free_block");
    CHECK_EQ(r, s->segments, f->segments, "segments");
    CHECK_EQ(r, s->active_blocks, f->active_blocks, "active_blocks");
    CHECK_EQ(r, s->cached_blocks, f->cached_blocks, "cached_blocks");
    CHECK_EQ(r, s->upstream_allocs, f->upstream_allocs, "upstream_allocs");
    CHECK_EQ(r, s->upstream_frees, f->upstream_frees, "upstream_frees");
    CHECK_EQ(r, s->alloc_retries, f->alloc_retries, "alloc_retries");
    CHECK_EQ(r, s->ooms, f->ooms, "ooms");
    CHECK_EQ(r, s->alloc_calls, k->alloc_calls, "alloc_calls");
    CHECK_EQ(r, s->free_calls, k->free_calls, "free_calls");
    CHECK_EQ(r, s->requested_bytes, k->requested, "requested_bytes");
    CHECK_EQ(r, s->requested_bytes_peak, k->requested_peak, "requested_bytes_peak");
    CHECK_EQ(r, s->allocated_bytes_peak, k->allocated_peak, "allocated_bytes_peak");
    CHECK_EQ(r, s->reserved_bytes_peak, k->reserved_peak, "reserved_bytes_peak");
    CHECK_EQ(r, s->active_blocks_peak, k->active_peak, "active_blocks_peak");
    CHECK_EQ(r, s->segments_peak, k->segments_peak, "segments_peak");
    CHECK_EQ(r, s->pending_blocks, 0, "pending_blocks");
    CHECK_EQ(r, log_lines, k->oom_lines, "OOM log lines");
    double frag = f->cached ? 1.0 - (double)f->largest_free / (double)f->cached : 0.0;
    cr_assert_float_eq(s->fragmentation, frag, 1e-12, "fragmentation: real %.17g, model %.17g" WHERE, s->fragmentation,
                       frag, WHERE_ARGS(r));
    size_t dev_free, dev_total;
    cr_assert_eq(cca_upstream_mem_info(u, &dev_free, &dev_total), CCA_OK);
    CHECK_EQ(r, dev_free, f->device_free, "device free bytes");
}

static void check_report(const oracle_run *r, const cca_release_report *got, const cca_release_report *want) {
    CHECK_EQ(r, got->bytes_released, want->bytes_released, "bytes_released");
    CHECK_EQ(r, got->segments_released, want->segments_released, "segments_released");
    CHECK_EQ(r, got->bytes_still_reserved, want->bytes_still_reserved, "bytes_still_reserved");
    CHECK_EQ(r, got->segments_kept, want->segments_kept, "segments_kept");
    CHECK_EQ(r, got->segments_pinned, want->segments_pinned, "segments_pinned");
    CHECK_EQ(r, got->live_bytes_pinning, want->live_bytes_pinning, "live_bytes_pinning");
    CHECK_EQ(r, got->free_bytes_pinned, want->free_bytes_pinned, "free_bytes_pinned");
    CHECK_EQ(r, got->pages_unmapped, want->pages_unmapped, "pages_unmapped");
    CHECK_EQ(r, got->bytes_unmapped, want->bytes_unmapped, "bytes_unmapped");
    CHECK_EQ(r, got->free_bytes_trapped, want->free_bytes_trapped, "free_bytes_trapped");
    CHECK_EQ(r, got->asleep_domains, want->asleep_domains, "asleep_domains");
    CHECK_EQ(r, got->host_bytes, want->host_bytes, "host_bytes");
}

void oracle_release(oracle_run *r, cca_allocator *a, size_t keep, int empty, const cca_release_report *want) {
    cca_release_report got;
    cca_status st = empty ? cca_empty_cache(a, &got) : cca_trim(a, keep, &got);
    if (r->trace)
        fprintf(stderr, "  step %d: %s(%zu) -> released %zu bytes, %zu pages, %zu segments; model %zu, %zu, %zu\n",
                r->step, r->op, keep, got.bytes_released, got.pages_unmapped, got.segments_released,
                want->bytes_released, want->pages_unmapped, want->segments_released);
    cr_assert_eq(st, CCA_OK, "%s(%zu): %s" WHERE, r->op, keep, cca_last_error(), WHERE_ARGS(r));
    check_report(r, &got, want);
}

void oracle_reached(const uint64_t *run, uint64_t *total, int n, const char *(*name)(int)) {
    fprintf(stderr, "  reached:");
    for (int i = 0; i < n; i++) {
        fprintf(stderr, "%s %s %llu", i ? "," : "", name(i), (unsigned long long)run[i]);
        total[i] += run[i];
    }
    fprintf(stderr, "\n");
}

void oracle_seeds(size_t nconfigs, void (*run)(size_t config, uint64_t seed, int trace), const uint64_t *total, int n,
                  const char *(*name)(int)) {
    uint64_t seeds[] = {1, 2, 3, (uint64_t)time(NULL)};
    size_t nseeds = sizeof seeds / sizeof seeds[0];
    int trace = getenv("CCA_ORACLE_TRACE") != NULL;
    const char *only = getenv("CCA_RANDOM_SEED"), *config = getenv("CCA_ORACLE_CONFIG");
    if (only) {
        seeds[0] = strtoull(only, NULL, 10);
        nseeds = 1;
    }
    for (size_t c = 0; c < nconfigs; c++)
        for (size_t i = 0; i < nseeds; i++)
            if (!config || strtoull(config, NULL, 10) == c)
                run(c, seeds[i], trace);
    for (int i = 0; !only && !config && i < n; i++)
        cr_expect_gt(total[i], 0, "no program reached '%s'", name(i));
}

static void free_one(oracle_run *r, cca_allocator *a, const oracle_ops *ops, void *ctx, size_t i) {
    if (r->trace)
        fprintf(stderr, "  step %d: free(%llu + %zu)\n", r->step, (unsigned long long)r->live[i].id, r->live[i].off);
    cr_assert_eq(cca_free(a, r->live[i].p), CCA_OK, "free: %s" WHERE, cca_last_error(), WHERE_ARGS(r));
    ops->free(ctx, r, i);
    r->books.free_calls++;
    r->books.requested -= r->live[i].requested;
    r->freed[r->nfreed++ % ORACLE_FREED_RING] = (uintptr_t)r->live[i].p;
    r->live[i] = r->live[--r->n];
}

/* A pointer the allocator must refuse, nothing changed (ccalloc.h,
 * cca_free): a freed one no live block starts at now, or one inside a live
 * block; NULL is a no-op. */
static void bad_free(oracle_run *r, cca_allocator *a, const oracle_ops *ops, void *ctx, uint64_t *rng) {
    size_t nfreed = r->nfreed < ORACLE_FREED_RING ? r->nfreed : ORACLE_FREED_RING;
    uint64_t k = tu_rand(rng) % 3;
    void *p = NULL;
    cca_status want = CCA_ERR_INVALID_POINTER;
    if (k == 0 && nfreed) {
        p = (void *)r->freed[tu_rand(rng) % nfreed];
        if (ops->live_at(ctx, p))
            return; /* its address was handed out again: a valid free */
    } else if (k == 1 && r->n) {
        p = (char *)r->live[tu_rand(rng) % r->n].p + CCA_ALIGNMENT;
    } else {
        want = CCA_OK;
    }
    if (r->trace)
        fprintf(stderr, "  step %d: bad free(%p)\n", r->step, p);
    cca_status st = cca_free(a, p);
    cr_assert_eq(st, want, "free(%p): real %s, model %s" WHERE, p, cca_status_string(st), cca_status_string(want),
                 WHERE_ARGS(r));
}

void oracle_program(const char *test, const char *name, uint64_t seed, int trace, cca_allocator *a, int steps,
                    const oracle_ops *ops, void *ctx) {
    fprintf(stderr, "%s: %s, seed %llu (CCA_RANDOM_SEED=%llu replays it)\n", test, name, (unsigned long long)seed,
            (unsigned long long)seed);
    static oracle_run run; /* the live array is large: not on the stack */
    oracle_run *r = &run;
    memset(r, 0, sizeof *r);
    r->name = name, r->seed = seed, r->op = "", r->trace = trace;
    log_lines = 0;
    cca_set_log_callback(count_line, NULL);
    uint64_t rng = seed;
    for (r->step = 0; r->step < steps; r->step++) {
        uint64_t k = tu_rand(&rng) % 100;
        if ((k < 52 && r->n < ORACLE_MAX_LIVE) || r->n == 0) {
            r->op = "alloc";
            ops->alloc(ctx, r, &rng);
        } else if (k < 88) {
            r->op = "free";
            free_one(r, a, ops, ctx, tu_rand(&rng) % r->n);
        } else if (k < 90) {
            r->op = "bad free";
            bad_free(r, a, ops, ctx, &rng);
        } else if (k < 97) {
            r->op = "trim";
            ops->trim(ctx, r, &rng, 0);
        } else if (k < 99) {
            r->op = "empty_cache";
            ops->trim(ctx, r, &rng, 1);
        } else {
            r->op = "free all";
            while (r->n)
                free_one(r, a, ops, ctx, r->n - 1);
        }
        ops->check(ctx, r);
    }
    while (r->n)
        free_one(r, a, ops, ctx, r->n - 1);
    cca_set_log_callback(NULL, NULL);
}
