/*
 * test_kernels_emulated.c — the GPU kernels' own code, run on the CPU:
 * kernels/src/softmax_strided.h, softmax_online.h, softmax_v5.h, activation.h.
 *
 * Parts of the CUDA kernels are written once, as CCK_HD functions, for the
 * GPU and for this test:
 *
 * - softmax versions 2 and 3 (softmax_strided.h: the three strided passes),
 *   version 4's per-thread work (softmax_online.h: running pairs, the
 *   head/body/tail split of a row, both passes) and version 5's
 *   (softmax_v5.h: the register tile, the pair of a chunk, both passes).
 *   Only the merges across threads are CUDA (warp shuffles, CUB, v5's
 *   shared-memory step); here the same functions run for every thread of a
 *   warp or block in turn and the merges are emulated (emulate_softmax.h):
 *   the warp's butterfly lane by lane, exactly as __shfl_xor_sync pairs
 *   lanes, and a block's warps merged as the kernel merges them. So the
 *   index arithmetic, the alignment logic and the NaN/inf rules of the GPU
 *   kernels are checked on every machine, CI included, against the double
 *   reference. test_softmax_dispatch.c runs these emulations on the shapes
 *   the dispatch table sends to each version.
 * - the dense epilogue's activations (activation.h): ReLU and the GELU the
 *   CUDA epilogue computes, here with glibc's expf in place of CUDA's.
 *
 * The GPU suite, test_kernels_cuda.c, runs the real kernels with the same
 * tolerances. What the emulation does not show: timing, memory coalescing,
 * CUDA's expf (<= 2 ulp against glibc's < 1), and whether CUB merges in
 * another order (the merge is commutative but float addition is not
 * associative, so the GPU's d may differ in the last bits; the tolerance
 * allows it).
 */
#include <float.h>
#include <string.h>

#include "activation.h"
#include "emulate_softmax.h"
#include "kernels_check.h"

/* Rows of cols floats starting x_off / y_off floats past a 16-byte boundary,
 * y poisoned with NaN (or y == x), through `version` on nt threads per row
 * (warp: one warp per row). */
static void run_case(rng *r, int version, int rows, int cols, int x_off, int y_off, int in_place, int nt, int warp,
                     float scale) {
    size_t n = (size_t)rows * cols;
    float *xbuf = aligned_alloc(16, ((n + 8) * sizeof(float) + 15) / 16 * 16);
    float *ybuf = aligned_alloc(16, ((n + 8) * sizeof(float) + 15) / 16 * 16);
    cr_assert(xbuf && ybuf);
    float *x = xbuf + x_off, *y = in_place ? x : ybuf + y_off;
    fill_uniform(r, x, n, scale);
    if (rows > 2 && cols > 3) { /* special rows ride along */
        x[1 * cols + 2] = NAN;
        x[2 * cols + 1] = -INFINITY;
        for (int j = 0; j < cols && rows > 3; j++)
            x[3 * cols + j] = j == cols / 2 ? 1.0f : -INFINITY;
    }
    float *keep = xmalloc(n * sizeof *keep);
    memcpy(keep, x, n * sizeof *x);
    if (!in_place)
        for (size_t i = 0; i < n; i++)
            y[i] = NAN;
    for (int row = 0; row < rows; row++)
        emulate_row(version, x + (size_t)row * cols, y + (size_t)row * cols, cols, nt, warp);
    char what[128];
    snprintf(what, sizeof what, "emulated v%d %s nt=%d %dx%d x+%d y+%d%s", version, warp ? "warp" : "block", nt, rows,
             cols, x_off, y_off, in_place ? " in place" : "");
    check_softmax(what, y, keep, (size_t)rows, (size_t)cols);
    free(keep), free(xbuf), free(ybuf);
}

/* Every split in a warp: cols from 1 to 70 (all heads, bodies and tails),
 * each of the 4 row alignments, y aligned like x or not, and in place. */
static void warp_every_split(const char *test, int version) {
    rng r = rng_fresh(test);
    for (int cols = 1; cols <= 70; cols++)
        for (int x_off = 0; x_off < 4; x_off++) {
            run_case(&r, version, 5, cols, x_off, 0, 0, 32, 1, 10.0f);
            run_case(&r, version, 5, cols, x_off, 3 - x_off, 0, 32, 1, 10.0f);
            run_case(&r, version, 5, cols, x_off, 0, 1, 32, 1, 10.0f);
        }
}

Test(softmax_emulated, v4_warp_every_split) {
    warp_every_split("softmax_emulated.v4_warp_every_split", 4);
}

/* Block mode at every power-of-two block the launcher allows, on rows long
 * enough that every thread has a share, and odd lengths around them. */
Test(softmax_emulated, v4_block_every_block_size) {
    rng r = rng_fresh("softmax_emulated.v4_block_every_block_size");
    const int lens[] = {1025, 4096, 4099, 9000, 32771};
    for (int nt = 32; nt <= 1024; nt *= 2)
        for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++)
            for (int x_off = 0; x_off < 4; x_off += 3)
                run_case(&r, 4, 4, lens[k], x_off, 1, 0, nt, 0, 20.0f);
}

/* Special values (NaN, infinities, huge and tiny magnitudes) at the first,
 * middle and last element of rows of every boundary length, each of the 4
 * row alignments, through a warp and a 256-thread block: the emulated GPU
 * rows equal the host kernel's in class (NaN where NaN) and both the
 * reference within its tolerance; all -inf and all NaN rows are all NaN.
 * Blocks run short rows too (the launchers would use a warp there): the
 * block code must not depend on the row being long. */
static void special_values_at_every_width(const char *test, int version) {
    rng r = rng_fresh(test);
    static const size_t widths[] = KERNELS_BOUNDARY_COLS;
    const float special[] = KERNELS_SPECIAL_VALUES;
    enum { NS = sizeof special / sizeof special[0], ROWS = 3 * NS + 2 };
    for (size_t c = 0; c < sizeof widths / sizeof widths[0]; c++) {
        int cols = (int)widths[c];
        size_t n = (size_t)ROWS * cols;
        float *xbuf = aligned_alloc(16, ((n + 4) * sizeof(float) + 15) / 16 * 16);
        float *y = xmalloc(n * sizeof *y), *host = xmalloc(n * sizeof *host);
        cr_assert_not_null(xbuf);
        for (int x_off = 0; x_off < 4; x_off++) {
            float *x = xbuf + x_off;
            fill_uniform(&r, x, n, 5.0f);
            for (int s = 0; s < NS; s++) {
                const int pos[3] = {0, cols / 2, cols - 1};
                for (int p = 0; p < 3; p++)
                    x[(size_t)(3 * s + p) * cols + pos[p]] = special[s];
            }
            for (int j = 0; j < cols; j++) {
                x[(size_t)(ROWS - 2) * cols + j] = -INFINITY;
                x[(size_t)(ROWS - 1) * cols + j] = NAN;
            }
            cr_assert_eq(cck_softmax_host(x, host, ROWS, (size_t)cols), CCK_OK);
            for (int nt = 32; nt <= 256; nt *= 8) {
                for (int row = 0; row < ROWS; row++)
                    emulate_row(version, x + (size_t)row * cols, y + (size_t)row * cols, cols, nt, nt == 32);
                char what[96];
                snprintf(what, sizeof what, "emulated v%d specials nt=%d cols=%d x+%d", version, nt, cols, x_off);
                check_softmax(what, y, x, ROWS, (size_t)cols);
                for (size_t i = 0; i < n; i++)
                    cr_assert(isnan(y[i]) == isnan(host[i]), "%s: element %zu is %g, host kernel %g", what, i, y[i],
                              host[i]);
                for (int j = 0; j < cols; j++)
                    cr_assert(isnan(y[(size_t)(ROWS - 2) * cols + j]) && isnan(y[(size_t)(ROWS - 1) * cols + j]),
                              "%s: all -inf / all NaN rows", what);
            }
        }
        free(xbuf), free(y), free(host);
    }
}

Test(softmax_emulated, v4_special_values_at_every_width) {
    special_values_at_every_width("softmax_emulated.v4_special_values_at_every_width", 4);
}

/* ---- versions 2 and 3 (softmax_strided.h) ---------------------------------- */

/* v2 (a warp) and v3 (every block size) on short and odd lengths, around
 * the warp (32) and the float4 (4) boundaries, the lengths the dispatch
 * sends them, rows 1 and many, in place and with y apart. */
Test(softmax_emulated, v2_v3_every_shape_class) {
    rng r = rng_fresh("softmax_emulated.v2_v3_every_shape_class");
    const int lens[] = {1, 2, 3, 5, 31, 32, 33, 127, 128, 129, 1000, 1024, 1025, 2048, 4097};
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        run_case(&r, 2, 1, lens[k], 0, 0, 0, 32, 1, 10.0f);
        run_case(&r, 2, 9, lens[k], 1, 2, 0, 32, 1, 10.0f);
        run_case(&r, 2, 5, lens[k], 3, 0, 1, 32, 1, 10.0f);
        for (int nt = 32; nt <= 1024; nt *= 2) {
            run_case(&r, 3, 5, lens[k], 1, 0, 0, nt, 0, 20.0f);
        }
        run_case(&r, 3, 5, lens[k], 2, 0, 1, 128, 0, 20.0f);
    }
    run_case(&r, 3, 2, 32768, 0, 1, 0, 1024, 0, 20.0f);
}

Test(softmax_emulated, v2_special_values_at_every_width) {
    special_values_at_every_width("softmax_emulated.v2_special_values_at_every_width", 2);
}

Test(softmax_emulated, v3_special_values_at_every_width) {
    special_values_at_every_width("softmax_emulated.v3_special_values_at_every_width", 3);
}

/* ---- version 5 (softmax_v5.h) ----------------------------------------------- */

Test(softmax_emulated, v5_warp_every_split) {
    warp_every_split("softmax_emulated.v5_warp_every_split", 5);
}

/* A warp's register tile at each size (1, 2, 4, 8 float4 per lane) and
 * across each switch, with 1 row and with many. */
Test(softmax_emulated, v5_warp_every_tile) {
    rng r = rng_fresh("softmax_emulated.v5_warp_every_tile");
    const int lens[] = {127, 128, 129, 131, 255, 256, 257, 511, 512, 513, 1000, 1001, 1023, 1024};
    int seen[CCK_V5_MAX_VPT + 1] = {0};
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        cck_v5_tile t = cck_v5_pick_tile(lens[k], 32, 1);
        cr_assert(t.resident, "cols %d: a warp row is always resident", lens[k]);
        seen[t.vpt]++;
        for (int x_off = 0; x_off < 4; x_off++) {
            run_case(&r, 5, 1, lens[k], x_off, 1, 0, 32, 1, 30.0f);
            run_case(&r, 5, 33, lens[k], x_off, 0, x_off == 2, 32, 1, 30.0f);
        }
    }
    cr_assert(seen[1] && seen[2] && seen[4] && seen[8], "every tile ran: %d %d %d %d", seen[1], seen[2], seen[4],
              seen[8]);
}

/* Block mode at every power-of-two block: resident rows at each tile and
 * rows too long for the registers (chunks, re-read), odd lengths, both
 * alignments of x and of y. Both paths must have run. */
Test(softmax_emulated, v5_block_every_block_size) {
    rng r = rng_fresh("softmax_emulated.v5_block_every_block_size");
    const int lens[] = {1025, 1031, 2048, 4096, 4099, 9000, 32768, 32771};
    int resident = 0, streaming = 0;
    for (int nt = 32; nt <= 1024; nt *= 2)
        for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
            cck_v5_tile t = cck_v5_pick_tile(lens[k], nt, 0);
            resident += t.resident, streaming += !t.resident;
            for (int x_off = 0; x_off < 4; x_off += 3)
                run_case(&r, 5, 3, lens[k], x_off, 1, 0, nt, 0, 20.0f);
            run_case(&r, 5, 2, lens[k], 2, 0, 1, nt, 0, 20.0f);
        }
    cr_assert(resident > 0 && streaming > 0, "resident rows %d, chunked rows %d", resident, streaming);
}

/* The longest rows: 32768 columns resident in a 1024-thread block, and
 * rows of 2^17 and 2^18 + 3 columns in chunks (the GPU suite's long rows). */
Test(softmax_emulated, v5_long_rows) {
    rng r = rng_fresh("softmax_emulated.v5_long_rows");
    cr_assert(cck_v5_pick_tile(32768, 1024, 0).resident);
    cr_assert(!cck_v5_pick_tile(32772, 1024, 0).resident);
    run_case(&r, 5, 2, 32768, 0, 0, 0, 1024, 0, 4.0f);
    run_case(&r, 5, 2, 131072, 0, 0, 0, 1024, 0, 4.0f);
    run_case(&r, 5, 1, 262147, 1, 3, 0, 1024, 0, 4.0f);
    run_case(&r, 5, 1, 262147, 2, 0, 1, 256, 0, 4.0f);
}

Test(softmax_emulated, v5_special_values_at_every_width) {
    special_values_at_every_width("softmax_emulated.v5_special_values_at_every_width", 5);
}

/* The tile the launcher picks holds the longest body a row can have, is the
 * smallest that does, and is chunked only when 8 float4 per thread do not. */
Test(softmax_emulated, v5_tile_choice) {
    for (int nt = 32; nt <= 1024; nt *= 2)
        for (int warp = 0; warp <= (nt == 32); warp++)
            for (int cols = 1; cols <= (warp ? 1024 : 40000); cols += cols < 300 ? 1 : 97) {
                cck_v5_tile t = cck_v5_pick_tile(cols, nt, warp);
                int n4 = cols / 4, smallest = warp ? 1 : 2;
                cr_assert(t.vpt == 1 || t.vpt == 2 || t.vpt == 4 || t.vpt == 8, "vpt %d", t.vpt);
                cr_assert(t.vpt >= smallest, "nt %d cols %d: vpt %d", nt, cols, t.vpt);
                if (t.resident) {
                    cr_assert(n4 <= nt * t.vpt, "nt %d cols %d: vpt %d does not hold the row", nt, cols, t.vpt);
                    cr_assert(t.vpt == smallest || n4 > nt * (t.vpt / 2), "nt %d cols %d: vpt %d not the smallest", nt,
                              cols, t.vpt);
                } else {
                    cr_assert(!warp && t.vpt == CCK_V5_MAX_VPT && n4 > nt * CCK_V5_MAX_VPT, "nt %d cols %d", nt, cols);
                }
            }
    /* docs/kernels.md, version 5 and its default block: rows are chunked
     * from 32772 columns at 1024 threads; 512 threads hold rows up to 16387
     * columns, so the default block (softmax.cu, v5_default_block: the
     * smallest that holds the row) is 1024 from 16388 columns on */
    cr_assert(cck_v5_pick_tile(32771, 1024, 0).resident && !cck_v5_pick_tile(32772, 1024, 0).resident);
    cr_assert(cck_v5_pick_tile(16387, 512, 0).resident && !cck_v5_pick_tile(16388, 512, 0).resident);
    cr_assert(cck_v5_pick_tile(8195, 256, 0).resident && !cck_v5_pick_tile(8196, 256, 0).resident);
    cr_assert(cck_v5_pick_tile(4099, 128, 0).resident && !cck_v5_pick_tile(4100, 128, 0).resident);
}

/* The pair rules of version 5, one case at a time. */
Test(softmax_emulated, v5_pair_rules) {
    const cck_float4 none = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
    cck_float4 v[2] = {none, none};
    cck_md_pair p = cck_v5_pair(v, 2, -INFINITY, -INFINITY); /* nothing but -inf: the empty pair */
    cr_assert(p.m == -INFINITY && p.d == 0.0f, "m %g d %g", p.m, p.d);
    v[1].z = 1.0f; /* [-inf, ..., 1]: finite */
    p = cck_v5_pair(v, 2, -INFINITY, -INFINITY);
    cr_assert(p.m == 1.0f && p.d == 1.0f, "m %g d %g", p.m, p.d);
    p = cck_v5_pair(v, 2, NAN, -INFINITY); /* NaN skipped by the max, but reaches the sum */
    cr_assert(p.m == 1.0f && isnan(p.d));
    v[1].z = -INFINITY;
    p = cck_v5_pair(v, 2, NAN, -INFINITY); /* NaN among -inf only: m stays -inf, d is NaN */
    cr_assert(p.m == -INFINITY && isnan(p.d), "m %g d %g", p.m, p.d);
    cck_md_pair fin = {1.0f, 1.0f};
    cr_assert(isnan(cck_v5_merge(fin, p).d), "a NaN pair with m = -inf still poisons the merge");
    v[0].x = INFINITY; /* +inf: exp(inf - inf) */
    p = cck_v5_pair(v, 2, 3.0f, -INFINITY);
    cr_assert(p.m == INFINITY && isnan(p.d));
    v[0].x = FLT_MAX, v[0].y = -FLT_MAX; /* huge magnitudes: no overflow */
    p = cck_v5_pair(v, 2, -INFINITY, -INFINITY);
    cr_assert(p.m == FLT_MAX && p.d == 1.0f, "m %g d %g", p.m, p.d);
    /* the merge: empty is neutral to the bit, and a, b commute to the bit */
    cck_md_pair empty = {-INFINITY, 0.0f};
    rng r = rng_fresh("softmax_emulated.v5_pair_rules");
    for (int i = 0; i < 100000; i++) {
        cck_md_pair a = {rng_uniform(&r, 50.0f), 1.0f + rng_uniform(&r, 1000.0f) + 1000.0f};
        cck_md_pair b = {rng_uniform(&r, 50.0f), 1.0f + rng_uniform(&r, 1000.0f) + 1000.0f};
        cck_md_pair ab = cck_v5_merge(a, b), ba = cck_v5_merge(b, a), ae = cck_v5_merge(a, empty);
        cr_assert(ab.m == ba.m && ab.d == ba.d, "merge(a, b) != merge(b, a): %a %a", ab.d, ba.d);
        cr_assert(ae.m == a.m && ae.d == a.d, "merge(a, empty) != a");
    }
}

/* The rules of the running pair, one case at a time. */
Test(softmax_emulated, pair_rules) {
    cck_md_pair empty = {-INFINITY, 0.0f};
    cck_md_pair p = cck_md_add(empty, -INFINITY); /* -inf adds nothing */
    cr_assert(p.m == -INFINITY && p.d == 0.0f);
    p = cck_md_add(p, 1.0f); /* [-inf, 1]: finite, not NaN */
    cr_assert(p.m == 1.0f && p.d == 1.0f, "m %g d %g", p.m, p.d);
    cck_md_pair q = cck_md_merge(empty, p); /* an empty pair merges as nothing */
    cr_assert(q.m == 1.0f && q.d == 1.0f);
    q = cck_md_add(p, NAN); /* NaN reaches the sum */
    cr_assert(isnan(q.d));
    q = cck_md_add(p, INFINITY); /* +inf: exp(inf - inf) */
    cr_assert(q.m == INFINITY && isnan(q.d));
    cck_md_pair a = {2.0f, 3.0f}, b = {-1.0f, 5.0f};
    cck_md_pair ab = cck_md_merge(a, b), ba = cck_md_merge(b, a);
    cr_assert(ab.m == ba.m && ab.d == ba.d, "the merge is commutative");
    cr_assert(fabsf(ab.d - (3.0f + 5.0f * expf(-3.0f))) < 1e-6f);
}

/* The split covers each element once and aligns the body, for every start. */
Test(softmax_emulated, split_covers_each_element_once) {
    _Alignas(16) float row[80];
    for (int off = 0; off < 4; off++)
        for (int cols = 1; cols <= 70; cols++) {
            cck_row_split s = cck_split_row(row + off, cols);
            cr_assert(s.head >= 0 && s.head <= 3 && s.head <= cols);
            cr_assert(s.n4 >= 0 && s.tail_start == s.head + 4 * s.n4 && s.tail_start <= cols);
            cr_assert(cols - s.tail_start <= 3, "off %d cols %d: tail of %d", off, cols, cols - s.tail_start);
            if (s.n4 > 0)
                cr_assert(((uintptr_t)(row + off + s.head) & 15u) == 0, "off %d cols %d: body unaligned", off, cols);
            if (cols >= 3)
                cr_assert(s.head == (4 - off) % 4, "off %d: head %d", off, s.head);
        }
}

/* The CUDA epilogue's GELU (cck_gelu_expf) over kernels_check.h's grid: the
 * formula and its limits, with glibc's expf standing in for CUDA's. */
Test(epilogue_emulated, gelu_of_the_cuda_epilogue) {
    float x[GELU_GRID_LEN], y[GELU_GRID_LEN];
    gelu_grid_fill(x);
    for (int i = 0; i < GELU_GRID_LEN; i++)
        y[i] = cck_gelu_expf(x[i]);
    gelu_grid_check("cck_gelu_expf", x, y, 4.0);
    /* the tanh form it replaces, 0.5·v·(1 + tanhf(u)), is 0 from u < -9 on;
     * this one keeps the value (relative error checked above): */
    const int at_minus_9 = 2100; /* x = -30 + 0.01·2100, u = -33 */
    cr_assert(x[at_minus_9] > -9.01f && x[at_minus_9] < -8.99f);
    cr_assert(y[at_minus_9] < 0.0f, "gelu(%g) = %g", x[at_minus_9], y[at_minus_9]);
}

Test(epilogue_emulated, relu_keeps_nan) {
    const float in[] = {-1.0f, -0.0f, 0.0f, 1e-45f, 2.5f, INFINITY, -INFINITY, NAN};
    const float want[] = {0.0f, 0.0f, 0.0f, 1e-45f, 2.5f, INFINITY, 0.0f, NAN};
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
        float r = cck_relu(in[i]);
        if (isnan(want[i]))
            cr_assert(isnan(r), "relu(%g) = %g", in[i], r);
        else
            cr_assert(r == want[i] && !signbit(r), "relu(%g) = %g, want %g", in[i], r, want[i]);
    }
}
