/*
 * test_kernels_emulated.c — kernels/src/softmax_online.h: the GPU kernels' own code, run on the CPU.
 *
 * Two parts of the CUDA kernels are written once, as CCK_HD functions, for
 * the GPU and for this test:
 *
 * - softmax version 4's per-thread work (softmax_online.h: running pairs,
 *   the head/body/tail split of a row, both passes). Only the merge across
 *   threads is CUDA (warp shuffles, CUB); here the same functions run for
 *   every thread of a warp or block in turn, and the merge is emulated: the
 *   warp's butterfly lane by lane, exactly as __shfl_xor_sync pairs lanes,
 *   and a block as warps merged in a tree. So the index arithmetic, the
 *   alignment logic and the NaN/inf rules of the GPU kernel are checked on
 *   every machine, CI included, against the double reference.
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
#include "kernels_check.h"
#include "softmax_online.h"

static int same(float a, float b) {
    return a == b || (isnan(a) && isnan(b));
}

/* One row through nt emulated threads: pass 1 per thread, the merge, pass 2
 * per thread. warp = 1: the butterfly of warp_md (nt = 32); warp = 0: a block
 * of nt threads, each warp's butterfly, then the warps' results merged. */
static void emulate_row(const float *xr, float *yr, int cols, int nt, int warp) {
    cck_row_split s = cck_split_row(xr, cols);
    cck_md_pair p[1024], next[1024];
    for (int t = 0; t < nt; t++)
        p[t] = cck_row_pair(xr, cols, s, t, nt);
    for (int off = 16; off > 0; off >>= 1) { /* every warp at once, as the shuffle does */
        for (int t = 0; t < nt; t++)
            next[t] = cck_md_merge(p[t], p[t ^ off]);
        memcpy(p, next, (size_t)nt * sizeof *p);
    }
    for (int t = 0; t < nt; t++) /* after the butterfly, a warp's lanes agree exactly (NaN with NaN) */
        cr_assert(same(p[t].m, p[t & ~31].m) && same(p[t].d, p[t & ~31].d), "lane %d: (%g, %g), lane %d: (%g, %g)", t,
                  p[t].m, p[t].d, t & ~31, p[t & ~31].m, p[t & ~31].d);
    cck_md_pair all = p[0];
    if (!warp) {
        for (int w = 32; w < nt; w += 32)
            all = cck_md_merge(all, p[w]);
    }
    for (int t = 0; t < nt; t++)
        cck_row_write(xr, yr, cols, s, t, nt, all.m, 1.0f / all.d);
}

/* Rows of cols floats starting x_off / y_off floats past a 16-byte boundary,
 * y poisoned with NaN (or y == x), through every thread count v4 allows. */
static void run_case(rng *r, int rows, int cols, int x_off, int y_off, int in_place, int nt, int warp, float scale) {
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
        emulate_row(x + (size_t)row * cols, y + (size_t)row * cols, cols, nt, warp);
    char what[128];
    snprintf(what, sizeof what, "emulated v4 %s nt=%d %dx%d x+%d y+%d%s", warp ? "warp" : "block", nt, rows, cols,
             x_off, y_off, in_place ? " in place" : "");
    check_softmax(what, y, keep, (size_t)rows, (size_t)cols);
    free(keep), free(xbuf), free(ybuf);
}

/* Every split: cols from 1 to 70 (all heads, bodies and tails), each of the 4
 * row alignments, y aligned like x or not, and in place. */
Test(softmax_emulated, v4_warp_every_split) {
    rng r = rng_fresh("softmax_emulated.v4_warp_every_split");
    for (int cols = 1; cols <= 70; cols++)
        for (int x_off = 0; x_off < 4; x_off++) {
            run_case(&r, 5, cols, x_off, 0, 0, 32, 1, 10.0f);
            run_case(&r, 5, cols, x_off, 3 - x_off, 0, 32, 1, 10.0f);
            run_case(&r, 5, cols, x_off, 0, 1, 32, 1, 10.0f);
        }
}

/* Block mode at every power-of-two block the launcher allows, on rows long
 * enough that every thread has a share, and odd lengths around them. */
Test(softmax_emulated, v4_block_every_block_size) {
    rng r = rng_fresh("softmax_emulated.v4_block_every_block_size");
    const int lens[] = {1025, 4096, 4099, 9000, 32771};
    for (int nt = 32; nt <= 1024; nt *= 2)
        for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++)
            for (int x_off = 0; x_off < 4; x_off += 3)
                run_case(&r, 4, lens[k], x_off, 1, 0, nt, 0, 20.0f);
}

/* Special values (NaN, infinities, huge and tiny magnitudes) at the first,
 * middle and last element of rows of every boundary length, each of the 4
 * row alignments, through a warp and a 256-thread block: the emulated GPU
 * rows equal the host kernel's in class (NaN where NaN) and both the
 * reference within its tolerance; all -inf and all NaN rows are all NaN. */
Test(softmax_emulated, v4_special_values_at_every_width) {
    rng r = rng_fresh("softmax_emulated.v4_special_values_at_every_width");
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
                    emulate_row(x + (size_t)row * cols, y + (size_t)row * cols, cols, nt, nt == 32);
                char what[96];
                snprintf(what, sizeof what, "emulated v4 specials nt=%d cols=%d x+%d", nt, cols, x_off);
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
