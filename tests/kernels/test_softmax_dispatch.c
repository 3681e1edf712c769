/*
 * test_softmax_dispatch.c — kernels/src/softmax_dispatch.c: the table that
 * picks cck_softmax_cuda's version, checked against the run it cites.
 *
 * - Every row of the table is the fastest (version, block) of its shape in
 *   the results file named by cck_softmax_table_source (read here, the
 *   markdown sweep table of cck_bench), and every shape of that sweep has a
 *   row: editing the table without a measurement, or committing a new run
 *   without updating the table, fails here. A version the file has no
 *   figure for (version 5 today) is never chosen, at any shape.
 * - The fallback rule: the boundaries between measured lengths are where
 *   c² = a·b says (derived from the table, so they follow it), and the
 *   bands quoted in softmax_dispatch.c's comment and docs/kernels.md hold.
 *   The row-count step is tested on a made-up table with two row counts.
 * - Bad input gets the documented status codes.
 * - Every shape class the table can send to a version runs through that
 *   version's CPU emulation (emulate_softmax.h) against the double
 *   reference, at the block size the table names.
 */
#include "source_dir.h" /* tests/support */
#include <ctype.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "cck_internal.h"
#include "emulate_softmax.h"
#include "kernels_check.h"
#include "read_text.h" /* tests/support */

/* ---- the results file ------------------------------------------------------ */

typedef struct measured {
    size_t rows, cols;
    int version, block;
    double ms;
} measured;

/* Split a markdown table line into at most `max` trimmed cells; returns
 * how many. The line is modified. */
static int cells(char *line, char **out, int max) {
    int n = 0;
    char *p = strchr(line, '|');
    while (p && n < max) {
        char *start = p + 1, *end = strchr(start, '|');
        if (!end)
            break;
        *end = '\0';
        while (isspace((unsigned char)*start))
            start++;
        char *e = end;
        while (e > start && isspace((unsigned char)e[-1]))
            *--e = '\0';
        out[n++] = start;
        p = end;
    }
    return n;
}

static int column(char **head, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(head[i], name) == 0)
            return i;
    return -1;
}

/* The block-size sweep of the cited file: one entry per (shape, version),
 * its best block and time. The table is found by its header (columns
 * "cols", "version", "best block", "best ms", and "rows" where the run
 * swept row counts; else the row count is the heading's "(N rows"). */
static size_t read_sweep(measured *m, size_t max) {
    const char *src = tu_source_dir();
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", src, cck_softmax_table_source);
    char *text = tu_read_text(path, NULL);
    size_t n = 0, heading_rows = 0;
    int c_rows = -1, c_cols = -1, c_ver = -1, c_block = -1, c_ms = -1, in_table = 0;
    for (char *line = text, *next; line; line = next) { /* line by line, blank lines included */
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        size_t hr;
        if (sscanf(line, "### Block-size sweep (%zu rows", &hr) == 1)
            heading_rows = hr;
        if (line[0] != '|') {
            in_table = 0;
            continue;
        }
        char copy[1024], *cell[16];
        snprintf(copy, sizeof copy, "%s", line);
        int nc = cells(copy, cell, 16);
        if (!in_table) { /* a header: is it the sweep's? */
            in_table = 1;
            c_cols = column(cell, nc, "cols"), c_ver = column(cell, nc, "version");
            c_block = column(cell, nc, "best block"), c_ms = column(cell, nc, "best ms");
            c_rows = column(cell, nc, "rows");
            if (c_cols < 0 || c_ver < 0 || c_block < 0 || c_ms < 0)
                c_cols = -1; /* another table */
            continue;
        }
        if (c_cols < 0 || strncmp(cell[0], "---", 3) == 0)
            continue;
        cr_assert_lt(n, max, "more sweep rows than expected");
        measured e = {0};
        char *end;
        e.cols = strtoull(cell[c_cols], &end, 10);
        e.rows = c_rows >= 0 ? strtoull(cell[c_rows], NULL, 10) : heading_rows;
        cr_assert(cell[c_ver][0] == 'v', "version cell '%s'", cell[c_ver]);
        e.version = atoi(cell[c_ver] + 1);
        e.block = atoi(cell[c_block]);
        e.ms = strtod(cell[c_ms], NULL);
        cr_assert(e.rows > 0 && e.cols > 0 && e.version > 0 && e.block > 0 && e.ms > 0, "sweep row '%s'", line);
        m[n++] = e;
    }
    free(text);
    cr_assert_gt(n, 0, "no block-size sweep table in %s", path);
    fprintf(stderr, "%s: %zu (shape, version) rows of the block-size sweep\n", cck_softmax_table_source, n);
    return n;
}

static int table_has(size_t rows, size_t cols) {
    for (size_t i = 0; i < cck_softmax_table_len; i++)
        if (cck_softmax_table[i].rows == rows && cck_softmax_table[i].cols == cols)
            return 1;
    return 0;
}

static cck_softmax_choice dispatch(size_t rows, size_t cols) {
    cck_softmax_choice c;
    cr_assert_eq(cck_softmax_dispatch(rows, cols, &c), CCK_OK, "%zux%zu", rows, cols);
    return c;
}

/* ---- the table against its source ------------------------------------------ */

Test(softmax_dispatch, every_measured_shape_maps_to_its_fastest) {
    measured m[256];
    size_t n = read_sweep(m, 256);
    for (size_t i = 0; i < n; i++) {
        double best = INFINITY;
        for (size_t j = 0; j < n; j++)
            if (m[j].rows == m[i].rows && m[j].cols == m[i].cols && m[j].ms < best)
                best = m[j].ms;
        cr_assert(table_has(m[i].rows, m[i].cols), "%s measured %zux%zu; the table has no row for it",
                  cck_softmax_table_source, m[i].rows, m[i].cols);
        cck_softmax_choice c = dispatch(m[i].rows, m[i].cols);
        int chosen = 0; /* the choice is one of the fastest (ties at the file's precision allowed) */
        for (size_t j = 0; j < n; j++)
            chosen |= m[j].rows == m[i].rows && m[j].cols == m[i].cols && m[j].ms == best &&
                      m[j].version == c.version && m[j].block == c.block_size;
        cr_assert(chosen, "%zux%zu: the table runs v%d block %d; %s measured %.4f ms as the fastest", m[i].rows,
                  m[i].cols, c.version, c.block_size, cck_softmax_table_source, best);
    }
    for (size_t i = 0; i < cck_softmax_table_len; i++) {
        int found = 0;
        for (size_t j = 0; j < n; j++)
            found |= m[j].rows == cck_softmax_table[i].rows && m[j].cols == cck_softmax_table[i].cols;
        cr_assert(found, "table row %zux%zu was not measured in %s", cck_softmax_table[i].rows,
                  cck_softmax_table[i].cols, cck_softmax_table_source);
    }
}

/* No shape gets a version without a figure in the source: today that
 * keeps version 5 out until a GPU has measured it. */
Test(softmax_dispatch, no_version_without_a_measurement) {
    measured m[256];
    size_t n = read_sweep(m, 256);
    int has[CCK_SOFTMAX_VERSIONS + 1] = {0};
    for (size_t i = 0; i < n; i++)
        if (m[i].version >= 1 && m[i].version <= CCK_SOFTMAX_VERSIONS)
            has[m[i].version] = 1;
    const size_t rows[] = {1, 8, 100, 1024, 4096, 65536, (size_t)INT_MAX - CCK_MAX_BLOCK};
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++)
        for (size_t cols = 1; cols <= (size_t)INT_MAX - CCK_MAX_BLOCK; cols = cols < 64 ? cols + 1 : cols * 9 / 8) {
            if (!cck_dims_ok(rows[r], cols))
                break;
            cck_softmax_choice c = dispatch(rows[r], cols);
            cr_assert(has[c.version], "%zux%zu: v%d chosen, but %s has no figure for v%d", rows[r], cols, c.version,
                      cck_softmax_table_source, c.version);
        }
    if (!has[5]) { /* the case of this commit, said plainly */
        for (size_t cols = 1; cols <= 70000; cols++)
            cr_assert_neq(dispatch(4096, cols).version, 5, "v5 chosen at %zu columns without a GPU figure", cols);
    }
}

Test(softmax_dispatch, table_is_well_formed) {
    cr_assert_gt(cck_softmax_table_len, 0);
    for (size_t i = 0; i < cck_softmax_table_len; i++) {
        const cck_softmax_entry *e = &cck_softmax_table[i];
        cr_assert(e->rows >= 1 && e->rows <= INT_MAX && e->cols >= 1 && e->cols <= INT_MAX, "entry %zu", i);
        cr_assert(e->version >= 1 && e->version <= CCK_SOFTMAX_VERSIONS, "entry %zu: version %d", i, e->version);
        cr_assert(e->block >= 32 && e->block <= CCK_MAX_BLOCK && e->block % 32 == 0, "entry %zu: block %d", i,
                  e->block);
        if (e->version >= 3)
            cr_assert_eq(e->block & (e->block - 1), 0, "entry %zu: v%d needs a power of two", i, e->version);
        if (i > 0) { /* sorted by rows, then cols, no duplicate */
            const cck_softmax_entry *p = e - 1;
            cr_assert(p->rows < e->rows || (p->rows == e->rows && p->cols < e->cols), "entries %zu, %zu out of order",
                      i - 1, i);
        }
    }
}

/* ---- the fallback rule -------------------------------------------------------- */

static size_t isqrt(unsigned long long v) {
    size_t r = (size_t)sqrt((double)v);
    while ((unsigned long long)r * r > v)
        r--;
    while ((unsigned long long)(r + 1) * (r + 1) <= v)
        r++;
    return r;
}

static void assert_entry(size_t rows, size_t cols, const cck_softmax_entry *e) {
    cck_softmax_choice c = dispatch(rows, cols);
    cr_assert(c.version == e->version && c.block_size == e->block,
              "%zux%zu: v%d block %d, expected the entry of %zu columns (v%d block %d)", rows, cols, c.version,
              c.block_size, e->cols, e->version, e->block);
}

/* Between measured lengths a < b, c goes to a while c² <= a·b: checked on
 * both sides of every boundary, and beyond both ends, for row counts near
 * and far from the measured one. */
Test(softmax_dispatch, fallback_switches_at_the_log_midpoints) {
    const size_t rows[] = {1, 8, 1024, 4096, 1 << 20};
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        const cck_softmax_entry *t = cck_softmax_table;
        size_t n = cck_softmax_table_len;
        assert_entry(rows[r], 1, &t[0]);
        assert_entry(rows[r], t[0].cols, &t[0]);
        for (size_t i = 0; i + 1 < n; i++) {
            size_t mid = isqrt((unsigned long long)t[i].cols * t[i + 1].cols);
            assert_entry(rows[r], t[i].cols, &t[i]);
            assert_entry(rows[r], mid, &t[i]);
            assert_entry(rows[r], mid + 1, &t[i + 1]);
        }
        assert_entry(rows[r], t[n - 1].cols * 3, &t[n - 1]);
        assert_entry(rows[r], (size_t)INT_MAX - CCK_MAX_BLOCK, &t[n - 1]);
    }
}

/* The bands as softmax_dispatch.c's comment and docs/kernels.md state them
 * (update all three with the table). */
Test(softmax_dispatch, the_documented_bands) {
    static const struct {
        size_t lo, hi;
        int version, block;
    } bands[] = {{1, 256, 2, 128},      {257, 715, 2, 512},
                 {716, 1011, 4, 1024},  {1012, 1024, 2, 1024},
                 {1025, 1448, 3, 128},  {1449, 2896, 3, 256},
                 {2897, 11585, 3, 512}, {11586, (size_t)INT_MAX - CCK_MAX_BLOCK, 3, 1024}};
    for (size_t b = 0; b < sizeof bands / sizeof bands[0]; b++) {
        const size_t probe[] = {bands[b].lo, bands[b].lo + (bands[b].hi - bands[b].lo) / 2, bands[b].hi};
        for (int p = 0; p < 3; p++) {
            cck_softmax_choice c = dispatch(4096, probe[p]);
            cr_assert(c.version == bands[b].version && c.block_size == bands[b].block,
                      "4096x%zu: v%d block %d, the docs say v%d block %d", probe[p], c.version, c.block_size,
                      bands[b].version, bands[b].block);
        }
    }
    /* the engine's softmax heads (10 classes, ccrun's default batch 8 and
     * the demo's largest, 1024): below every measured length */
    cck_softmax_choice e8 = dispatch(8, 10), e1024 = dispatch(1024, 10);
    cr_assert(e8.version == 2 && e8.block_size == 128 && e1024.version == 2 && e1024.block_size == 128);
}

/* Step 1, the row count, on a made-up table with two: the nearest on a log
 * scale (512 = √(64·4096) is a tie, which goes to the smaller), then the
 * nearest length among that row count's entries. */
Test(softmax_dispatch, row_count_is_the_first_key) {
    static const cck_softmax_entry t[] = {
        {64, 100, 2, 32}, {64, 1000, 3, 64}, {4096, 100, 4, 128}, {4096, 1000, 5, 256}};
    struct {
        size_t rows, cols;
        int version;
    } cases[] = {{1, 1, 2},     {64, 316, 2},  {64, 317, 3}, {511, 5000, 3},         {512, 100, 2},
                 {513, 100, 4}, {513, 317, 5}, {4096, 1, 4}, {1u << 30, 1u << 30, 5}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cck_softmax_choice c;
        cr_assert_eq(cck_softmax_lookup(t, 4, cases[i].rows, cases[i].cols, &c), CCK_OK);
        cr_assert_eq(c.version, cases[i].version, "%zux%zu: entry v%d, expected v%d", cases[i].rows, cases[i].cols,
                     c.version, cases[i].version);
    }
}

/* The rule computed another way: distances as |log v - log a| in long
 * double (a tie: equal within 1e-12, to the smaller), over the real table
 * at every length up to 70000 and geometric steps to the int edge, and over
 * random sorted tables (several row counts, repeated lengths) through
 * cck_softmax_lookup. */
static size_t nearest_by_log(size_t v, const size_t *cands, size_t n) {
    size_t best = cands[0];
    long double bd = fabsl(logl((long double)v) - logl((long double)best));
    for (size_t i = 1; i < n; i++) {
        long double d = fabsl(logl((long double)v) - logl((long double)cands[i]));
        if (d < bd - 1e-12L || (fabsl(d - bd) <= 1e-12L && cands[i] < best))
            best = cands[i], bd = d;
    }
    return best;
}

static void assert_rule(const cck_softmax_entry *t, size_t n, size_t rows, size_t cols) {
    size_t all_rows[64] = {0}, lens[64] = {0}, nl = 0;
    cr_assert_leq(n, 64);
    for (size_t i = 0; i < n; i++)
        all_rows[i] = t[i].rows;
    size_t want_rows = nearest_by_log(rows, all_rows, n);
    for (size_t i = 0; i < n; i++)
        if (t[i].rows == want_rows)
            lens[nl++] = t[i].cols;
    size_t want_cols = nearest_by_log(cols, lens, nl);
    const cck_softmax_entry *want = NULL;
    for (size_t i = 0; i < n && !want; i++)
        if (t[i].rows == want_rows && t[i].cols == want_cols)
            want = &t[i]; /* the first of equal entries, as the table is read */
    cck_softmax_choice c = {-1, -1};
    cr_assert_eq(cck_softmax_lookup(t, n, rows, cols, &c), CCK_OK, "%zux%zu", rows, cols);
    cr_assert(c.version == want->version && c.block_size == want->block,
              "%zux%zu: v%d block %d, the log rule says %zux%zu (v%d block %d)", rows, cols, c.version, c.block_size,
              want->rows, want->cols, want->version, want->block);
}

Test(softmax_dispatch, the_rule_matches_an_independent_log_computation) {
    const size_t rows[] = {1, 2, 4095, 4096, 4097, 1 << 20, (size_t)INT_MAX - CCK_MAX_BLOCK};
    const size_t edge = (size_t)INT_MAX - CCK_MAX_BLOCK;
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        for (size_t c = 1; c <= 70000; c++)
            assert_rule(cck_softmax_table, cck_softmax_table_len, rows[r], c);
        for (size_t c = 70001; c < edge; c += c / 3)
            assert_rule(cck_softmax_table, cck_softmax_table_len, rows[r], c);
        assert_rule(cck_softmax_table, cck_softmax_table_len, rows[r], edge);
    }
    rng g = rng_fresh("softmax_dispatch.the_rule_matches_an_independent_log_computation");
    for (int k = 0; k < 300; k++) {
        cck_softmax_entry t[12];
        size_t n = 1 + rng_below(&g, 12);
        for (size_t i = 0; i < n; i++) { /* small values make ties and repeats common */
            t[i].rows = 1 + rng_below(&g, k % 2 ? 64 : 100000);
            t[i].cols = 1 + rng_below(&g, k % 2 ? 64 : 100000);
            t[i].version = 1 + (int)rng_below(&g, 5);
            t[i].block = 32 << rng_below(&g, 6);
        }
        for (size_t i = 1; i < n; i++) /* insertion sort by rows, then cols (stable) */
            for (size_t j = i;
                 j > 0 && (t[j - 1].rows > t[j].rows || (t[j - 1].rows == t[j].rows && t[j - 1].cols > t[j].cols));
                 j--) {
                cck_softmax_entry e = t[j];
                t[j] = t[j - 1], t[j - 1] = e;
            }
        for (int q = 0; q < 200; q++)
            assert_rule(t, n, 1 + rng_below(&g, k % 2 ? 128 : 200000), 1 + rng_below(&g, k % 2 ? 128 : 200000));
    }
}

/* ---- bad input ------------------------------------------------------------------ */

Test(softmax_dispatch, bad_arguments_get_the_documented_codes) {
    cck_softmax_choice c = {7, 7};
    const cck_status bad = CCK_ERR_INVALID_ARGUMENT;
    cr_assert_eq(cck_softmax_dispatch(1, 1, NULL), bad);
    cr_assert_eq(cck_softmax_dispatch(0, 128, &c), bad);
    cr_assert(c.version == 0 && c.block_size == 0, "a refused call clears *out");
    cr_assert_eq(cck_softmax_dispatch(4096, 0, &c), bad);
    cr_assert_eq(cck_softmax_dispatch(0, 0, &c), bad);
    cr_assert_eq(cck_softmax_dispatch(SIZE_MAX / 2, 3, &c), bad); /* rows·cols floats overflow size_t */
    cr_assert_eq(cck_softmax_dispatch(3, SIZE_MAX, &c), bad);
    /* past the kernels' int indexing: refused as the launch would be */
    const size_t edge = (size_t)INT_MAX - CCK_MAX_BLOCK;
    cr_assert_eq(cck_softmax_dispatch(1, edge + 1, &c), CCK_ERR_UNSUPPORTED);
    cr_assert(c.version == 0 && c.block_size == 0);
    cr_assert_eq(cck_softmax_dispatch(edge + 1, 1, &c), CCK_ERR_UNSUPPORTED);
    cr_assert_eq(cck_softmax_dispatch(1, (size_t)INT_MAX, &c), CCK_ERR_UNSUPPORTED);
    cr_assert_eq(cck_softmax_dispatch(1, edge, &c), CCK_OK);
    cr_assert_eq(cck_softmax_dispatch(edge, 1, &c), CCK_OK);
    /* the rule over a table: no table, an empty one */
    cr_assert_eq(cck_softmax_lookup(NULL, 1, 1, 1, &c), bad);
    cr_assert_eq(cck_softmax_lookup(cck_softmax_table, 0, 1, 1, &c), bad);
    /* cck_softmax_cuda checks its arguments before it dispatches */
    float buf[8];
    cr_assert_eq(cck_softmax_cuda(NULL, buf, buf, 1, 8), bad);
    cr_assert_eq(cck_softmax_cuda(NULL, NULL, buf, 1, 8), bad);
    cr_assert_eq(cck_softmax_cuda(NULL, buf, buf, 0, 8), bad);
}

/* ---- every shape class through the version the table picks, emulated -------- */

/* Rows 1 and 7, every band of the table and both sides of each boundary,
 * short and odd lengths, rows off 16-byte boundaries: cck_softmax_cuda's
 * choice, run through that version's CPU emulation at that block size,
 * against the double reference. */
Test(softmax_dispatch, every_choice_runs_correctly_emulated, .timeout = 600) {
    rng r = rng_fresh("softmax_dispatch.every_choice_runs_correctly_emulated");
    size_t lens[64], nl = 0;
    const size_t fixed[] = {1, 2, 3, 5, 10, 31, 32, 33, 127, 128, 129, 1000, 4096, 32768, 40000};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        lens[nl++] = fixed[i];
    for (size_t i = 0; i + 1 < cck_softmax_table_len && nl + 2 <= 64; i++) {
        size_t mid = isqrt((unsigned long long)cck_softmax_table[i].cols * cck_softmax_table[i + 1].cols);
        lens[nl++] = mid, lens[nl++] = mid + 1;
    }
    int used[CCK_SOFTMAX_VERSIONS + 1] = {0};
    for (size_t k = 0; k < nl; k++)
        for (size_t rows = 1; rows <= 7; rows += 6) {
            size_t cols = lens[k], n = rows * cols;
            cck_softmax_choice c = dispatch(rows, cols);
            used[c.version]++;
            float *xbuf = xmalloc((n + 3) * sizeof *xbuf), *y = xmalloc(n * sizeof *y);
            float *x = xbuf + (k % 4); /* rows off 16-byte boundaries too */
            fill_uniform(&r, x, n, 20.0f);
            if (rows > 1 && cols > 3)
                x[cols + 1] = -INFINITY, x[2 * cols + 2] = NAN;
            for (size_t i = 0; i < n; i++)
                y[i] = NAN;
            emulate_version(c.version, c.block_size, x, y, rows, cols);
            char what[96];
            snprintf(what, sizeof what, "dispatched v%d block %d, %zux%zu", c.version, c.block_size, rows, cols);
            check_softmax(what, y, x, rows, cols);
            free(xbuf), free(y);
        }
    for (size_t i = 0; i < cck_softmax_table_len; i++)
        cr_assert(used[cck_softmax_table[i].version], "v%d is in the table but no case reached it",
                  cck_softmax_table[i].version);
}
