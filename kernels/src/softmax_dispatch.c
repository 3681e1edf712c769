/*
 * softmax_dispatch.c — which softmax version, at which block size,
 * cck_softmax_cuda runs for a rows × cols call: a table of measured winners
 * and the rule for the shapes between them.
 *
 * Why a table: no version of softmax.cu is fastest at every row length.
 * Short rows want one warp per row and nothing else in the way (v2); long
 * rows want many threads per row and many loads in flight (v3); in between
 * it depends on details (divisibility by 32, the row's alignment, how the
 * rows spread over the SMs) that one GPU run settles better than an
 * argument. So the engine runs, per shape, what a run measured fastest.
 *
 * THE SOURCE. Every row of the table is the fastest (version, block size)
 * of the block-size sweep of one GPU run:
 *
 *     bench/results/2026-11-23-h100/session1/cck_bench.md
 *     (NVIDIA H100 80GB HBM3, CUDA 13.0, commit 415a018;
 *      cck_bench --no-cpu --sweep: versions 2-4 at every power-of-two block
 *      from 32 to 1024, 4096 rows, median of 20 launches, L2 flushed)
 *
 *     cols    fastest          its median   % of copy   runner-up (other version)
 *     128     v2, block 128    0.0061 ms    95.3 %      v4 block 1024, 0.0070 ms
 *     512     v2, block 512    0.0101 ms    98.3 %      v3 block 64,   0.0103 ms
 *     1000    v4, block 1024   0.0184 ms    86.4 %      v3 block 128,  0.0215 ms
 *     1024    v2, block 1024   0.0168 ms    96.7 %      v3 block 128,  0.0169 ms
 *     1025    v3, block 128    0.0201 ms    80.2 %      v4 block 64,   0.0205 ms
 *     2048    v3, block 256    0.0290 ms    93.8 %      v4 block 128,  0.0328 ms
 *     4096    v3, block 512    0.0508 ms    98.2 %      v4 block 256,  0.0583 ms
 *     32768   v3, block 1024   0.5056 ms    71.5 %      v4 block 1024, 0.5357 ms
 *
 * v1 is not in the sweep; in the same run's main table it is 7 to 23 times
 * slower than the fastest version at every shape. Some winners are close
 * (1024: 0.0168 against 0.0169 ms) and would swap within the run's spread;
 * the table takes the medians as they are. tests/kernels/test_softmax_dispatch.c
 * reads that file and fails if a row here is not its fastest.
 *
 * THE RULE for a shape not in the table (cck_softmax_lookup):
 *   1. the row count: the table's row count nearest to `rows` on a log
 *      scale (ties to the smaller);
 *   2. among the entries of that row count, the row length nearest to
 *      `cols` on a log scale (ties to the shorter); its version and block.
 * A log scale because what decides between the versions grows by factors,
 * not by steps: elements per thread, rows per SM, whether a row fits in a
 * warp's registers or in L1. A row of 2000 is taken to be like one of
 * 2048 rather than 1025 (an assumption; the next sweep adds points). The
 * boundaries that follow (c belongs to a when c² <= a·b):
 *
 *     cols       1-256  257-715  716-1011  1012-1024  1025-1448  1449-2896  2897-11585  11586-
 *     runs       v2/128 v2/512   v4/1024   v2/1024    v3/128     v3/256     v3/512      v3/1024
 *
 * Below 128 and above 32768 the nearest measured length rules (nothing was
 * measured there: the engine's own 10-column softmax heads run v2/128 by
 * this rule). The narrow v4 and v2 bands around 1000 and 1024 each rest on
 * one measured point; whether what separates 1000 from 1024 is the length
 * or the divisibility by 32 is not something this run can tell, and the
 * next sweep (cck_bench --sweep) adds lengths on either side.
 *
 * Row count: every measured point had 4096 rows, so step 1 always lands on
 * 4096 and the table is in effect keyed by row length alone. The rule and
 * its test (with a two-row-count table) are in place for the run that
 * measures other row counts: cck_bench's sweep now includes the engine's
 * shapes (8 × 10, 1024 × 10).
 *
 * Device: the table has no device key, because one GPU (an H100) has been
 * measured. A run on another GPU (the workplace also lends H200s) may imply
 * other rows; if two devices disagree, the key gains the device.
 *
 * Version 5 has no GPU figure yet, and so no row here: the table never
 * chooses a version on a guess. HOW TO UPDATE from a new run:
 *
 *     cck_bench --no-cpu --sweep     (scripts/gpu_session.sh, step cck_bench)
 *
 * ends with "Dispatch table this run implies": one line per measured
 * shape in the syntax of cck_softmax_table below, the fastest (version,
 * block) with its figures. Replace the table with those lines, point
 * cck_softmax_table_source at the committed cck_bench.md of that run, update
 * the two tables of this comment and docs/kernels.md, and run
 * test_softmax_dispatch: it re-derives every winner from that file.
 *
 * Cost: a lookup reads the table twice (8 entries): nothing next to a
 * kernel launch. No state, no allocation; the same answer on every machine,
 * with or without a GPU.
 */
#include <limits.h>

#include "cck_internal.h"

const char cck_softmax_table_source[] = "bench/results/2026-11-23-h100/session1/cck_bench.md";

/* Sorted by rows, then cols; rows and cols <= INT_MAX. */
const cck_softmax_entry cck_softmax_table[] = {
    /* rows, cols, version, block     median, % of copy; runner-up */
    {4096, 128, 2, 128},    /* 0.0061 ms, 95.3%; v4 block 1024 0.0070 ms */
    {4096, 512, 2, 512},    /* 0.0101 ms, 98.3%; v3 block 64 0.0103 ms */
    {4096, 1000, 4, 1024},  /* 0.0184 ms, 86.4%; v3 block 128 0.0215 ms */
    {4096, 1024, 2, 1024},  /* 0.0168 ms, 96.7%; v3 block 128 0.0169 ms */
    {4096, 1025, 3, 128},   /* 0.0201 ms, 80.2%; v4 block 64 0.0205 ms */
    {4096, 2048, 3, 256},   /* 0.0290 ms, 93.8%; v4 block 128 0.0328 ms */
    {4096, 4096, 3, 512},   /* 0.0508 ms, 98.2%; v4 block 256 0.0583 ms */
    {4096, 32768, 3, 1024}, /* 0.5056 ms, 71.5%; v4 block 1024 0.5357 ms */
};
const size_t cck_softmax_table_len = sizeof cck_softmax_table / sizeof cck_softmax_table[0];

/* Is a strictly nearer to v than b on a log scale? The distance of a is
 * max(v, a) / min(v, a); two such ratios are compared by cross-multiplying,
 * exact in 64 bits for values <= INT_MAX (no log, so ties are exact). */
static int nearer(size_t v, size_t a, size_t b) {
    unsigned long long pa = v > a ? v : a, qa = v > a ? a : v;
    unsigned long long pb = v > b ? v : b, qb = v > b ? b : v;
    return pa * qb < pb * qa;
}

cck_status cck_softmax_lookup(const cck_softmax_entry *table, size_t n, size_t rows, size_t cols,
                              cck_softmax_choice *out) {
    if (out != NULL) {
        out->version = 0;
        out->block_size = 0;
    }
    if (out == NULL || table == NULL || n == 0 || !cck_dims_ok(rows, cols)) {
        return CCK_ERR_INVALID_ARGUMENT;
    }
    if (!cck_softmax_fits_int(rows, cols)) {
        return CCK_ERR_UNSUPPORTED;
    }
    /* 1. the nearest row count (entries are sorted: the first of a tie is the smaller) */
    size_t best_rows = table[0].rows;
    for (size_t i = 1; i < n; i++) {
        if (nearer(rows, table[i].rows, best_rows)) {
            best_rows = table[i].rows;
        }
    }
    /* 2. the nearest row length among that row count's entries */
    const cck_softmax_entry *best = NULL;
    for (size_t i = 0; i < n; i++) {
        if (table[i].rows == best_rows && (best == NULL || nearer(cols, table[i].cols, best->cols))) {
            best = &table[i];
        }
    }
    out->version = best->version;
    out->block_size = best->block;
    return CCK_OK;
}

cck_status cck_softmax_dispatch(size_t rows, size_t cols, cck_softmax_choice *out) {
    return cck_softmax_lookup(cck_softmax_table, cck_softmax_table_len, rows, cols, out);
}
