/*
 * micro.c — the cached-path micro-benchmark: what one alloc+free pair costs
 * once the pool is warm, with L blocks live (by default L = 10, 1k, 10k and
 * 100k, each in both layouts below).
 *
 * Set-up per (strategy, live count L, layout):
 *   1. PACKED (the harness's definition): allocate L blocks of mixed sizes
 *      and keep them. HOLES (harsher): allocate 2L and free every other one,
 *      so that up to L free blocks sit in the free index between the L live
 *      ones and best fit searches a populated index, not a near-empty one;
 *   2. warm-up: one alloc+free pair for each size step 3 times (the first
 *      `pairs` of the 4096-size pair sequence, all of them from 4096 pairs
 *      on: any segment a size needs is reserved here, not timed), with a
 *      tag written and checked in each block on host pointers; then (2b)
 *      those sizes four more times untagged, so that the timing starts
 *      from the caches' steady state, not from what the tags' page faults
 *      and the stats call of step 4 left (see rewarm());
 *   3. timed: `pairs` pairs p = alloc(size_i); free(p), sizes cycling through
 *      the sequence (with --streams S, pair i on stream (i mod 4096) mod S,
 *      its warm-up too: the cost of finding a stream's free blocks), each
 *      pair between two clock reads (clock.c: the TSC where it is invariant,
 *      else clock_gettime; the median read cost subtracted): the median and
 *      p99 per pair. A read costs ~10 ns (TSC) or ~20 ns (clock_gettime) on
 *      the reference machine, a third to all of a pair, so per-pair figures
 *      carry its jitter; the same pairs are then run again between just two
 *      reads, and that batch's time / pairs is the mean (no per-pair clock
 *      cost in it). Step 3 stops once its pairs have taken
 *      ccb_micro_budget_ns (10 s; the batch then runs as many, and the row's
 *      `pairs` says how many): glibc malloc with 100k holes costs 1-2 ms a
 *      timed pair (median 0.9 ms, mean 1.8 ms in
 *      bench/results/2026-11-24-h100/session4/micro.csv), its warm-up's
 *      pairs more, and the budget does not bound those;
 *   4. check: allocated bytes are back to their value before step 3.
 *
 * Sizes: log-uniform in [512 B, 8 MiB] (seeded, xoshiro256** from
 * common/ccai_rng.h), so both ccalloc pools (small <= 1 MiB, large) are hit;
 * the mean is ~0.8 MiB, so 100k live blocks hold ~80 GiB and the holes
 * layout at 100k allocates ~160 GiB. The simulated device is sized from the
 * blocks drawn: max(32 GiB, 2 x their sum + 4 GiB), the factor covering
 * segment rounding. It only reserves address space (MAP_NORESERVE) and only
 * pages that are written exist — the tags of the warm-up blocks — so even
 * that capacity costs a few MiB of memory on a small machine.
 *
 * Target for ccalloc on the simulated device: <= 40 ns median and <= 150 ns
 * p99 per pair at every L up to 100k, packed and holes. RMM's pool allocator
 * measures 0.5-0.8 us per pair at 1k live blocks. The malloc floor is not
 * held to it: with holes glibc's in-band headers land on never-touched
 * pages.
 */
#include "ccbench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ccai_escape.h" /* common/: text from outside, escaped for a person */
#include "ccai_rng.h"

#define MICRO_SIZES 4096
#define MICRO_REWARM 4 /* untagged passes over the pair sequence before the timing (step 2b) */
#define MICRO_MIN_DEVICE ((size_t)32 << 30) /* the simulated device's least capacity */
#define MICRO_HEADROOM ((size_t)4 << 30)    /* warm-up segments, beyond 2 x the held blocks */

const size_t ccb_micro_default_lives[CCB_MICRO_DEFAULT_NLIVES] = {10, 1000, 10000, 100000};

static size_t mixed_size(ccai_rng *r) {
    double lo = log(512.0), hi = log(8.0 * 1048576.0);
    return (size_t)exp(lo + (hi - lo) * ccai_rng_uniform(r));
}

/* Capacity of the simulated device for blocks of these sizes held at once. */
static size_t device_for(const size_t *sizes, size_t n) {
    size_t sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += sizes[i];
    size_t want = 2 * sum + MICRO_HEADROOM;
    return want > MICRO_MIN_DEVICE ? want : MICRO_MIN_DEVICE;
}

/* One cell's state: the strategy, the blocks held, the pair sequence. */
typedef struct cell {
    ccb_strategy s;
    size_t sizes[MICRO_SIZES]; /* the pair sequence                  */
    size_t nheld;              /* L packed, 2L with holes             */
    void **held;               /* NULL once released                  */
    size_t *held_size;
    double *lat;                          /* one per timed pair */
    unsigned char stream_at[MICRO_SIZES]; /* place i's stream: i mod --streams */
} cell;

/* The stream of pair i, warm-up and timed: a function of its place in the
 * size sequence, so that the warm-up's pass over the sequence meets every
 * (size, stream) the timed pairs do. Consecutive pairs take the streams in
 * turn (but at the sequence's wrap). A load, as the size is: a division
 * here would be timed in the batch (the mean) but not per pair. */
static unsigned stream_of(const cell *c, size_t i) {
    return c->stream_at[i & (MICRO_SIZES - 1)];
}

/* Step 1: the live blocks, and the holes between them. */
static int set_up(cell *c, int holes, char *why, size_t whylen) {
    const ccb_strategy_ops *ops = c->s.ops;
    for (size_t i = 0; i < c->nheld; i++) {
        if (ops->alloc(&c->s, c->held_size[i], 0, &c->held[i]) != 0) {
            c->held[i] = NULL;
            snprintf(why, whylen, "set-up alloc %zu of %zu failed", i, c->held_size[i]);
            return -1;
        }
    }
    for (size_t i = 1; holes && i < c->nheld; i += 2) {
        ops->release(&c->s, c->held[i], c->held_size[i], 0);
        c->held[i] = NULL;
    }
    return 0;
}

/* The sizes step 3's `pairs` use: the sequence's first min(pairs, 4096). */
static size_t sizes_timed(size_t pairs) {
    return pairs < MICRO_SIZES ? pairs : MICRO_SIZES;
}

/* Step 2: every size step 3 uses once, its block tagged and checked. */
static int warm_up(cell *c, size_t pairs, char *why, size_t whylen) {
    const ccb_strategy_ops *ops = c->s.ops;
    for (size_t i = 0; i < sizes_timed(pairs); i++) {
        void *p;
        size_t size = c->sizes[i];
        unsigned stream = stream_of(c, i);
        if (ops->alloc(&c->s, size, stream, &p) != 0 || !p) {
            snprintf(why, whylen, "warm-up alloc of %zu failed", size);
            return -1;
        }
        if (ops->host_pointers) {
            volatile unsigned char *b = p;
            b[0] = 0x5a;
            b[size - 1] = 0xa5;
            if (b[0] != 0x5a || b[size - 1] != 0xa5) {
                snprintf(why, whylen, "warm-up block not writable");
                return -1;
            }
        }
        ops->release(&c->s, p, size, stream);
    }
    return 0;
}

/* Step 2b: the part of the pair sequence step 3 times (its first `pairs`
 * sizes: --quick times 2000) MICRO_REWARM more times, untagged, right
 * before the timing. On the simulated device the tags of step 2 fault in
 * fresh pages, and the kernel's zeroing of them evicts the allocator's
 * records from the caches (a GPU's memory never passes through them); the
 * stats call between (step 4's "before") walks every block of expandable
 * segments. Measured at 100k holes, the first timed cycle of 4096 pairs
 * after such a pass had 1,100-1,400 pairs above 150 ns where a later cycle
 * has about 5, and one untagged pass left 100-600; after three the first
 * cycle is like the others. Timing starts from the state the pairs keep. */
static int rewarm(cell *c, size_t pairs, char *why, size_t whylen) {
    const ccb_strategy_ops *ops = c->s.ops;
    size_t n = sizes_timed(pairs);
    for (size_t i = 0; i < MICRO_REWARM * n; i++) {
        void *p;
        size_t size = c->sizes[i % n];
        unsigned stream = stream_of(c, i % n);
        if (ops->alloc(&c->s, size, stream, &p) != 0) {
            snprintf(why, whylen, "warm-up alloc of %zu failed", size);
            return -1;
        }
        ops->release(&c->s, p, size, stream);
    }
    return 0;
}

uint64_t ccb_micro_budget_ns = CCB_MICRO_BUDGET_NS;

/* Step 3a: up to `pairs` timed alloc+free pairs; c->lat gets each one's
 * cost; *done how many ran (fewer once the budget is spent: checked every
 * CCB_MICRO_BUDGET_CHECK pairs, outside the timed pairs). */
static int timed_pairs(cell *c, size_t pairs, size_t *done, char *why, size_t whylen) {
    const ccb_strategy_ops *ops = c->s.ops;
    double timer = ccb_timer_overhead_ns();
    uint64_t start = ccb_ticks();
    *done = pairs;
    for (size_t i = 0; i < pairs; i++) {
        if (i && i % CCB_MICRO_BUDGET_CHECK == 0 && ccb_ticks_ns(start, ccb_ticks()) >= (double)ccb_micro_budget_ns) {
            *done = i;
            break;
        }
        size_t size = c->sizes[i & (MICRO_SIZES - 1)];
        unsigned stream = stream_of(c, i);
        void *p;
        uint64_t t0 = ccb_ticks();
        int a = ops->alloc(&c->s, size, stream, &p);
        if (a == 0)
            ops->release(&c->s, p, size, stream);
        uint64_t t1 = ccb_ticks();
        if (a != 0) {
            snprintf(why, whylen, "timed alloc of %zu failed", size);
            return -1;
        }
        double d = ccb_ticks_ns(t0, t1) - timer;
        c->lat[i] = d < 0 ? 0 : d;
    }
    return 0;
}

/* Step 3b: the same pairs timed as one batch; *mean = its time / pairs. */
static int batch_pairs(cell *c, size_t pairs, double *mean, char *why, size_t whylen) {
    const ccb_strategy_ops *ops = c->s.ops;
    ccb_clock_init();
    uint64_t t0 = ccb_ticks();
    for (size_t i = 0; i < pairs; i++) {
        size_t size = c->sizes[i & (MICRO_SIZES - 1)];
        unsigned stream = stream_of(c, i);
        void *p;
        if (ops->alloc(&c->s, size, stream, &p) != 0) {
            snprintf(why, whylen, "timed alloc of %zu failed", size);
            return -1;
        }
        ops->release(&c->s, p, size, stream);
    }
    *mean = ccb_ticks_ns(t0, ccb_ticks()) / (double)pairs;
    return 0;
}

int ccb_micro_unfit(size_t nheld, size_t need, size_t room, char *why, size_t whylen) {
    if (room == CCB_UNKNOWN || need <= room)
        return 0;
    char n[32], r[32];
    ccb_format_bytes(need, n, sizeof n);
    ccb_format_bytes(room, r, sizeof r);
    snprintf(why, whylen, "%zu blocks need %s, the device has %s free", nheld, n, r);
    return 1;
}

static void run_one(const char *spec, size_t live, int holes, size_t pairs, unsigned streams, ccb_micro_row *row) {
    memset(row, 0, sizeof *row);
    row->holes = holes;
    row->streams = streams;
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
    cell *c = calloc(1, sizeof *c);
    if (c) {
        c->s.ops = ops;
        for (size_t i = 0; i < MICRO_SIZES; i++)
            c->stream_at[i] = (unsigned char)(i % streams); /* streams <= CCB_MICRO_MAX_STREAMS = 255 */
        c->nheld = (holes ? 2 : 1) * live;
        c->held = calloc(c->nheld, sizeof *c->held);
        c->held_size = calloc(c->nheld, sizeof *c->held_size);
        c->lat = malloc(pairs * sizeof *c->lat);
    }
    if (!c || !c->held || !c->held_size || !c->lat) {
        snprintf(row->why, sizeof row->why, "out of host memory");
        goto out;
    }
    memset(c->lat, 0, pairs * sizeof *c->lat); /* its pages faulted in now, not between timed pairs */
    /* the sizes: the pair sequence, then the held blocks (one seeded stream) */
    ccai_rng r;
    ccai_rng_seed(&r, 42);
    for (size_t i = 0; i < MICRO_SIZES; i++)
        c->sizes[i] = mixed_size(&r);
    for (size_t i = 0; i < c->nheld; i++)
        c->held_size[i] = mixed_size(&r);
    ccb_device dev = {device_for(c->held_size, c->nheld), 0, 0, 0, 0, 0, 0, 0, 0};
    int rc = ops->open(&c->s, config, &dev, row->why, sizeof row->why);
    if (rc != 0) {
        row->skipped = rc == 1;
        goto out;
    }
    ccb_mem before, after;
    double mean;
    size_t need = 0; /* every held block is allocated before the holes are freed */
    for (size_t i = 0; i < c->nheld; i++)
        need = need > SIZE_MAX - c->held_size[i] ? SIZE_MAX : need + c->held_size[i];
    size_t room = ops->device_free ? ops->device_free(&c->s) : CCB_UNKNOWN;
    if (ccb_micro_unfit(c->nheld, need, room, row->why, sizeof row->why))
        row->unfit = 1;
    else if (set_up(c, holes, row->why, sizeof row->why) == 0 && warm_up(c, pairs, row->why, sizeof row->why) == 0) {
        ops->sample(&c->s, &before);
        size_t done = 0;
        if (rewarm(c, pairs, row->why, sizeof row->why) == 0 &&
            timed_pairs(c, pairs, &done, row->why, sizeof row->why) == 0 &&
            batch_pairs(c, done, &mean, row->why, sizeof row->why) == 0) {
            row->pairs = done;
            ops->sample(&c->s, &after); /* step 4 */
            if (after.allocated != before.allocated) {
                snprintf(row->why, sizeof row->why, "allocated changed across the timed pairs (%zu -> %zu)",
                         before.allocated, after.allocated);
            } else {
                row->mean_ns = mean;
                row->median_ns = ccb_quantile(c->lat, done, 0.5);
                row->p99_ns = ccb_quantile(c->lat, done, 0.99);
            }
        }
    }
    for (size_t i = 0; i < c->nheld; i++)
        if (c->held[i])
            ops->release(&c->s, c->held[i], c->held_size[i], 0);
    ops->empty_cache(&c->s);
    ops->close(&c->s);
out:
    if (c) {
        free(c->held);
        free(c->held_size);
        free(c->lat);
    }
    free(c);
}

int ccb_micro(const char *const *specs, size_t nspecs, const size_t *lives, size_t nlives, size_t pairs,
              unsigned streams, ccb_micro_row **rows, size_t *nrows) {
    *rows = calloc(2 * nspecs * nlives + 1, sizeof **rows);
    if (!*rows) {
        fprintf(stderr, "ccbench: out of host memory for the micro table's %zu rows\n", 2 * nspecs * nlives);
        return -1;
    }
    ccb_clock_init(); /* its ~20 ms calibration now, not between the first cell's warm-up and timing */
    *nrows = 0;
    int rc = 0;
    for (size_t i = 0; i < nspecs; i++) {
        for (int holes = 0; holes < 2; holes++) {
            for (size_t j = 0; j < nlives; j++) {
                ccb_micro_row *row = &(*rows)[(*nrows)++];
                run_one(specs[i], lives[j], holes, pairs, streams, row);
                if (!row->skipped && !row->unfit && isnan(row->median_ns))
                    rc = -1;
                ccai_fprintf_escaped(stderr, "  micro %-16s live=%-6zu %-6s %s%s\n", row->strategy, row->live,
                                     holes ? "holes" : "packed",
                                     row->skipped            ? "skipped"
                                     : row->unfit            ? "does not fit: "
                                     : isnan(row->median_ns) ? ""
                                                             : "done",
                                     row->skipped || !isnan(row->median_ns) ? "" : row->why);
                if (row->skipped) { /* one line says it for this strategy */
                    j = nlives;
                    holes = 2;
                }
            }
        }
    }
    return rc;
}
