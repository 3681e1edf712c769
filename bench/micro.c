/*
 * micro.c — the cached-path micro-benchmark: what one alloc+free pair costs
 * once the pool is warm, with 10, 1k and 10k blocks live.
 *
 * Set-up per (strategy, live count L, layout):
 *   1. PACKED (the definition): allocate L blocks of mixed sizes and
 *      keep them. HOLES (harsher): allocate 2L and free every other one, so
 *      that up to L free blocks sit in the free index between the L live
 *      ones and best fit searches a populated index, not a near-empty one;
 *   2. warm-up: one alloc+free pair for each of the 4096 sizes of the pair
 *      sequence (any segment a size needs is reserved here, not timed), with
 *      a tag written and checked in each block on host pointers;
 *   3. timed: `pairs` pairs p = alloc(size_i); free(p), sizes cycling through
 *      the sequence, each pair between two clock reads (median clock cost
 *      subtracted). Reported: median and p99 per pair, and the mean.
 *   4. check: allocated bytes are back to their value before step 3.
 *
 * Sizes: log-uniform in [256 B, 4 MiB] (seeded), so both ccalloc pools (small
 * <= 1 MiB, large) are hit; 10k live blocks hold ~4 GiB of the simulated
 * device (pages never touched). Target (issue 2): median < 100 ns per pair
 * with 10k live blocks on the host upstream. RMM's pool allocator measures
 * 0.5-0.8 us per pair at 1k live blocks.
 */
#include "ccbench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MICRO_SIZES 4096
#define MICRO_DEVICE ((size_t)32 << 30) /* simulated device: room for 2 x 10k blocks */

static size_t mixed_size(ccb_rng *r) {
    double lo = log(256.0), hi = log(4.0 * 1048576.0);
    return (size_t)exp(lo + (hi - lo) * ccb_rng_uniform(r));
}

static void run_one(const char *spec, size_t live, int holes, size_t pairs, ccb_micro_row *row) {
    memset(row, 0, sizeof *row);
    row->holes = holes;
    snprintf(row->strategy, sizeof row->strategy, "%s", spec);
    row->live = live;
    row->pairs = pairs;
    row->median_ns = row->p99_ns = row->mean_ns = NAN;
    const ccb_strategy_ops *ops;
    const char *config;
    char label[64];
    if (ccb_strategy_resolve(spec, &ops, &config, label, sizeof label) != 0) {
        snprintf(row->why, sizeof row->why, "unknown strategy");
        return;
    }
    ccb_strategy s = {.ops = ops};
    ccb_device dev = {MICRO_DEVICE, 0, 0};
    int rc = ops->open(&s, config, &dev, row->why, sizeof row->why);
    if (rc != 0) {
        row->skipped = rc == 1;
        return;
    }
    ccb_rng r;
    ccb_rng_seed(&r, 42);
    size_t sizes[MICRO_SIZES];
    for (size_t i = 0; i < MICRO_SIZES; i++)
        sizes[i] = mixed_size(&r);
    void **held = calloc(2 * live, sizeof *held);
    size_t *held_size = calloc(2 * live, sizeof *held_size);
    double *lat = malloc(pairs * sizeof *lat);
    if (!held || !held_size || !lat) {
        snprintf(row->why, sizeof row->why, "out of host memory");
        goto done;
    }
    for (size_t i = 0; i < (holes ? 2 : 1) * live; i++) {
        held_size[i] = mixed_size(&r);
        if (ops->alloc(&s, held_size[i], 0, &held[i]) != 0) {
            snprintf(row->why, sizeof row->why, "set-up alloc %zu failed", i);
            goto done;
        }
    }
    for (size_t i = 1; i < 2 * live; i += 2) {
        if (!holes)
            break;
        ops->release(&s, held[i], held_size[i], 0);
        held[i] = NULL;
    }
    for (size_t i = 0; i < MICRO_SIZES; i++) { /* warm-up, checked */
        void *p;
        if (ops->alloc(&s, sizes[i], 0, &p) != 0 || !p) {
            snprintf(row->why, sizeof row->why, "warm-up alloc of %zu failed", sizes[i]);
            goto done;
        }
        if (ops->host_pointers) {
            ((unsigned char *)p)[0] = 0x5a;
            ((unsigned char *)p)[sizes[i] - 1] = 0xa5;
            if (((unsigned char *)p)[0] != 0x5a || ((unsigned char *)p)[sizes[i] - 1] != 0xa5) {
                snprintf(row->why, sizeof row->why, "warm-up block not writable");
                goto done;
            }
        }
        ops->release(&s, p, sizes[i], 0);
    }
    ccb_mem before, after;
    ops->sample(&s, &before);
    double timer = ccb_timer_overhead_ns(), sum = 0;
    for (size_t i = 0; i < pairs; i++) {
        size_t size = sizes[i & (MICRO_SIZES - 1)];
        void *p;
        uint64_t t0 = ccb_now_ns();
        int a = ops->alloc(&s, size, 0, &p);
        if (a == 0)
            ops->release(&s, p, size, 0);
        uint64_t t1 = ccb_now_ns();
        if (a != 0) {
            snprintf(row->why, sizeof row->why, "timed alloc of %zu failed", size);
            goto done;
        }
        double d = (double)(t1 - t0) - timer;
        lat[i] = d < 0 ? 0 : d;
        sum += lat[i];
    }
    ops->sample(&s, &after);
    if (after.allocated != before.allocated) {
        snprintf(row->why, sizeof row->why, "allocated changed across the timed pairs (%zu -> %zu)", before.allocated,
                 after.allocated);
        goto done;
    }
    row->mean_ns = sum / (double)pairs;
    row->median_ns = ccb_quantile(lat, pairs, 0.5);
    row->p99_ns = ccb_quantile(lat, pairs, 0.99);
done:
    for (size_t i = 0; held && i < 2 * live; i++)
        if (held[i])
            ops->release(&s, held[i], held_size[i], 0);
    ops->empty_cache(&s);
    ops->close(&s);
    free(held);
    free(held_size);
    free(lat);
}

int ccb_micro(const char *const *specs, size_t nspecs, const size_t *lives, size_t nlives, size_t pairs,
              ccb_micro_row **rows, size_t *nrows) {
    *rows = calloc(2 * nspecs * nlives + 1, sizeof **rows);
    if (!*rows)
        return -1;
    *nrows = 0;
    int rc = 0;
    for (size_t i = 0; i < nspecs; i++) {
        for (int holes = 0; holes < 2; holes++) {
            for (size_t j = 0; j < nlives; j++) {
                ccb_micro_row *row = &(*rows)[(*nrows)++];
                run_one(specs[i], lives[j], holes, pairs, row);
                if (!row->skipped && isnan(row->median_ns))
                    rc = -1;
                fprintf(stderr, "  micro %-16s live=%-6zu %-6s %s\n", row->strategy, row->live,
                        holes ? "holes" : "packed",
                        row->skipped            ? "skipped"
                        : isnan(row->median_ns) ? row->why
                                                : "done");
                if (row->skipped) { /* one line says it for this strategy */
                    j = nlives;
                    holes = 2;
                }
            }
        }
    }
    return rc;
}

void ccb_micro_write_md(FILE *f, const ccb_micro_row *r, size_t n, double timer_ns) {
    fprintf(f, "| strategy | live blocks | layout | pairs | median ns/pair | p99 ns/pair | mean ns/pair |\n");
    fprintf(f, "|---|--:|---|--:|--:|--:|--:|\n");
    for (size_t i = 0; i < n; i++) {
        const char *layout = r[i].holes ? "holes" : "packed";
        if (r[i].skipped)
            fprintf(f, "| %s | all | | | skipped: %s | | |\n", r[i].strategy, r[i].why);
        else if (isnan(r[i].median_ns))
            fprintf(f, "| %s | %zu | %s | | failed: %s | | |\n", r[i].strategy, r[i].live, layout, r[i].why);
        else
            fprintf(f, "| %s | %zu | %s | %zu | %.0f | %.0f | %.1f |\n", r[i].strategy, r[i].live, layout, r[i].pairs,
                    r[i].median_ns, r[i].p99_ns, r[i].mean_ns);
    }
    fprintf(f, "\nEach pair timed alone between two clock reads; the median clock read (%.1f ns) is subtracted.\n",
            timer_ns);
}

void ccb_micro_write_csv(FILE *f, const ccb_micro_row *r, size_t n) {
    fprintf(f, "strategy,live,layout,pairs,median_ns,p99_ns,mean_ns,status,why\n");
    for (size_t i = 0; i < n; i++) {
        const char *layout = r[i].holes ? "holes" : "packed";
        ccb_csv_field(f, r[i].strategy); /* -s 'ccalloc=a:1,b:2' has a comma */
        if (isnan(r[i].median_ns)) {
            fprintf(f, ",%zu,%s,,,,,%s,", r[i].live, layout, r[i].skipped ? "skipped" : "failed");
            fputc('"', f); /* always quoted, as before; quotes inside doubled */
            for (const char *c = r[i].why; *c; c++) {
                if (*c == '"')
                    fputc('"', f);
                fputc(*c, f);
            }
            fputs("\"\n", f);
        } else {
            fprintf(f, ",%zu,%s,%zu,%.1f,%.1f,%.2f,ok,\n", r[i].live, layout, r[i].pairs, r[i].median_ns, r[i].p99_ns,
                    r[i].mean_ns);
        }
    }
}
