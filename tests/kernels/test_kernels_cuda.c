/*
 * test_kernels_cuda.c — kernels/src/softmax.cu, dense.cu, context.cu: the CUDA kernels
 * against the double references, on a GPU. Every test skips with a reason
 * when cck_cuda_device_count finds none (fails under CCA_REQUIRE_GPU=1).
 *
 * All device memory, the cuBLAS workspace included, comes from a ccalloc
 * allocator over the CUDA upstream, as in the engine; the last test checks
 * that after the context is gone and the cache emptied, the allocator holds
 * no device byte.
 *
 * Every run poisons its output with NaN first and every element is checked
 * (kernels_check.h: a NaN passes only where the reference is NaN). Softmax is
 * run for every version and every block size it allows (v1, v2: multiples of
 * 32 up to 1024; v3-v5: powers of two), on odd shapes, with rows that start
 * off 16-byte boundaries, with y aligned differently from x, and in place;
 * v5 on rows that stay in registers at each tile size and on rows too long
 * for them; and cck_softmax_cuda against the version the dispatch names.
 */
#include <string.h>

#include <ccalloc.h>

#include <limits.h>
#ifdef CCK_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include "gpu_required.h"
#include "kernels_check.h"

typedef struct gpu {
    cca_upstream *up;
    cca_allocator *alloc;
    void *workspace;
    size_t workspace_bytes;
    cck_cuda_context *ctx;
} gpu;

/* Skip the test when there is no GPU; else an allocator and a context whose
 * cuBLAS workspace is a ccalloc block. */
static gpu gpu_open(int use_tf32) {
    gpu g = {0};
    int n = 0;
    cck_status st = cck_cuda_device_count(&n);
    if (st != CCK_OK || n == 0) {
        CCA_NO_GPU("no GPU: %s", cck_status_string(st));
    }
    cr_assert_eq(cca_upstream_cuda_create(0, &g.up), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_create(NULL, g.up, &g.alloc), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cck_cublas_workspace_size(0, &g.workspace_bytes), CCK_OK);
    cr_assert_eq(cca_alloc(g.alloc, g.workspace_bytes, NULL, &g.workspace), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cck_cuda_context_create(0, NULL, g.workspace, g.workspace_bytes, use_tf32, &g.ctx), CCK_OK);
    return g;
}

static void gpu_close(gpu *g) {
    cr_assert_eq(cck_cuda_context_destroy(g->ctx), CCK_OK);
    cr_assert_eq(cca_free(g->alloc, g->workspace), CCA_OK);
    cca_release_report rep;
    cr_assert_eq(cca_empty_cache(g->alloc, &rep), CCA_OK);
    cr_assert_eq(rep.bytes_still_reserved, 0, "allocator still holds %zu bytes", rep.bytes_still_reserved);
    cr_assert_eq(cca_destroy(g->alloc), CCA_OK);
    cca_upstream_destroy(g->up);
}

static float *dev_alloc(gpu *g, size_t floats) {
    void *p = NULL;
    cr_assert_eq(cca_alloc(g->alloc, floats * sizeof(float), NULL, &p), CCA_OK, "%s", cca_last_error());
    return p;
}

static void dev_free(gpu *g, float *p) {
    cr_assert_eq(cca_free(g->alloc, p), CCA_OK);
}

static void to_dev(gpu *g, float *d, const float *h, size_t n) {
    cr_assert_eq(cck_copy_to_device(g->ctx, d, h, n * sizeof(float)), CCK_OK);
}

static void to_host(gpu *g, float *h, const float *d, size_t n) {
    cr_assert_eq(cck_copy_to_host(g->ctx, h, d, n * sizeof(float)), CCK_OK);
}

/* Device buffers are CCA_ALIGNMENT-aligned; x_off / y_off floats of offset
 * move the rows off 16-byte boundaries. version 0 = cck_softmax_cuda. */
static void softmax_run(gpu *g, rng *r, int version, int block, size_t rows, size_t cols, size_t x_off, size_t y_off,
                        int in_place, float scale) {
    size_t n = rows * cols;
    float *hx = xmalloc(n * sizeof *hx), *hy = xmalloc(n * sizeof *hy);
    fill_uniform(r, hx, n, scale);
    if (rows > 2 && cols > 3) { /* a few special rows ride along */
        hx[1 * cols + 2] = NAN;
        hx[2 * cols + 1] = -INFINITY;
    }
    float *dx = dev_alloc(g, n + 4), *dy = in_place ? dx : dev_alloc(g, n + 4);
    float *x = dx + x_off, *y = in_place ? x : dy + y_off;
    for (size_t i = 0; i < n; i++)
        hy[i] = NAN;
    if (!in_place)
        to_dev(g, y, hy, n); /* poison */
    to_dev(g, x, hx, n);
    cck_status st = version ? cck_softmax_cuda_version(g->ctx, version, block, x, y, rows, cols)
                            : cck_softmax_cuda(g->ctx, x, y, rows, cols);
    cr_assert_eq(st, CCK_OK, "v%d block %d %zux%zu: %s", version, block, rows, cols, cck_status_string(st));
    cr_assert_eq(cck_cuda_synchronize(g->ctx), CCK_OK);
    to_host(g, hy, y, n);
    char what[128];
    snprintf(what, sizeof what, "softmax v%d block %d %zux%zu x+%zu y+%zu%s", version, block, rows, cols, x_off, y_off,
             in_place ? " in place" : "");
    check_softmax(what, hy, hx, rows, cols);
    dev_free(g, dx);
    if (!in_place)
        dev_free(g, dy);
    free(hx), free(hy);
}

static const size_t shapes[][2] = {{1, 1},     {3, 1},    {5, 7},    {7, 31},   {9, 33},    {33, 127}, {64, 128},
                                   {17, 1000}, {4, 1023}, {4, 1025}, {3, 4097}, {2, 32768}, {130, 4}};
#define NSHAPES (sizeof shapes / sizeof shapes[0])

static void every_block_size(int version) {
    gpu g = gpu_open(0);
    rng r = rng_fresh("softmax_cuda.every_block_size");
    int pow2 = version >= 3;
    for (int bs = 32; bs <= 1024; bs += 32) {
        if (pow2 && (bs & (bs - 1)) != 0) {
            cr_assert_eq(cck_softmax_cuda_version(g.ctx, version, bs, (float *)g.workspace, (float *)g.workspace, 1, 1),
                         CCK_ERR_UNSUPPORTED);
            continue;
        }
        for (size_t s = 0; s < NSHAPES; s++) {
            softmax_run(&g, &r, version, bs, shapes[s][0], shapes[s][1], 0, 0, 0, 10.0f);
        }
    }
    gpu_close(&g);
}

Test(softmax_cuda, v1_every_block_size, .timeout = 600) {
    every_block_size(1);
}
Test(softmax_cuda, v2_every_block_size, .timeout = 600) {
    every_block_size(2);
}
Test(softmax_cuda, v3_every_block_size, .timeout = 600) {
    every_block_size(3);
}
Test(softmax_cuda, v4_every_block_size, .timeout = 600) {
    every_block_size(4);
}
Test(softmax_cuda, v5_every_block_size, .timeout = 600) {
    every_block_size(5);
}

/* v5's two paths at every block: rows resident in registers (each tile
 * size: 2, 4, 8 float4 per thread) and rows longer than the registers hold
 * (chunks, re-read), odd lengths, rows off 16-byte boundaries, in place. */
Test(softmax_cuda, v5_resident_and_chunked_rows, .timeout = 600) {
    gpu g = gpu_open(0);
    rng r = rng_fresh("softmax_cuda.v5_resident_and_chunked_rows");
    static const size_t v5_shapes[][2] = {{5, 1025},  {4, 2051},  {3, 4099}, {1, 8191},
                                          {3, 32768}, {2, 32771}, {2, 40000}};
    for (int bs = 32; bs <= 1024; bs *= 2)
        for (size_t s = 0; s < sizeof v5_shapes / sizeof v5_shapes[0]; s++) {
            softmax_run(&g, &r, 5, bs, v5_shapes[s][0], v5_shapes[s][1], 0, 0, 0, 20.0f);
            softmax_run(&g, &r, 5, bs, v5_shapes[s][0], v5_shapes[s][1], 3, 1, 0, 20.0f);
            softmax_run(&g, &r, 5, bs, v5_shapes[s][0], v5_shapes[s][1], 2, 2, 1, 20.0f);
        }
    gpu_close(&g);
}

/* cck_softmax_cuda runs exactly what cck_softmax_dispatch names: the same
 * bits as cck_softmax_cuda_version with that version and block, on a shape
 * of every band of the table and the engine's softmax heads (10 columns,
 * batches 8 and 1024). */
Test(softmax_cuda, dispatched_is_the_named_version, .timeout = 600) {
    gpu g = gpu_open(0);
    rng r = rng_fresh("softmax_cuda.dispatched_is_the_named_version");
    static const size_t dshapes[][2] = {{8, 10},   {1024, 10}, {64, 128}, {33, 600}, {17, 1000}, {9, 1020},
                                        {5, 1024}, {4, 1300},  {3, 2048}, {3, 4096}, {2, 32768}, {2, 40000}};
    for (size_t s = 0; s < sizeof dshapes / sizeof dshapes[0]; s++) {
        size_t rows = dshapes[s][0], cols = dshapes[s][1], n = rows * cols;
        cck_softmax_choice c;
        cr_assert_eq(cck_softmax_dispatch(rows, cols, &c), CCK_OK);
        float *hx = xmalloc(n * sizeof *hx), *a = xmalloc(n * sizeof *a), *b = xmalloc(n * sizeof *b);
        fill_uniform(&r, hx, n, 20.0f);
        float *dx = dev_alloc(&g, n), *dy = dev_alloc(&g, n);
        to_dev(&g, dx, hx, n);
        cr_assert_eq(cck_softmax_cuda(g.ctx, dx, dy, rows, cols), CCK_OK);
        to_host(&g, a, dy, n);
        cr_assert_eq(cck_softmax_cuda_version(g.ctx, c.version, c.block_size, dx, dy, rows, cols), CCK_OK);
        to_host(&g, b, dy, n);
        cr_assert(memcmp(a, b, n * sizeof *a) == 0, "%zux%zu: cck_softmax_cuda differs from v%d block %d", rows, cols,
                  c.version, c.block_size);
        char what[64];
        snprintf(what, sizeof what, "dispatched v%d block %d %zux%zu", c.version, c.block_size, rows, cols);
        check_softmax(what, a, hx, rows, cols);
        dev_free(&g, dx), dev_free(&g, dy);
        free(hx), free(a), free(b);
    }
    gpu_close(&g);
}

/* Rows longer than any in `shapes`: a float sum over one thread's whole row
 * (v1) would drift past the tolerance here; every version must not. */
Test(softmax_cuda, long_rows_every_version, .timeout = 600) {
    gpu g = gpu_open(0);
    rng r = rng_fresh("softmax_cuda.long_rows_every_version");
    for (int v = 0; v <= 5; v++) {
        softmax_run(&g, &r, v, 0, 3, 131072, 0, 0, 0, 4.0f);
        softmax_run(&g, &r, v, 0, 2, 262147, 1, 3, 0, 4.0f);
    }
    gpu_close(&g);
}

Test(softmax_cuda, unaligned_rows_and_in_place) {
    gpu g = gpu_open(0);
    rng r = rng_fresh("softmax_cuda.unaligned_rows_and_in_place");
    static const size_t offs[][2] = {{1, 1}, {1, 2}, {3, 0}, {0, 1}, {2, 3}};
    for (int v = 0; v <= 5; v++) {
        for (size_t s = 0; s < NSHAPES; s++) {
            for (size_t o = 0; o < 5; o++) {
                softmax_run(&g, &r, v, 0, shapes[s][0], shapes[s][1], offs[o][0], offs[o][1], 0, 30.0f);
            }
            softmax_run(&g, &r, v, 0, shapes[s][0], shapes[s][1], 1, 1, 1, 30.0f);
        }
    }
    gpu_close(&g);
}

Test(softmax_cuda, nan_and_inf_follow_the_reference) {
    gpu g = gpu_open(0);
    const float nan = NAN, inf = INFINITY;
    /* the rows of the host test, stretched to 1100 columns (v4's and v5's
     * block path), 40 (their warp path) and 33000 (v5's rows too long for
     * its registers at its default block) by padding with -inf, which must
     * not matter */
    float rows[7][4] = {{1, nan, 2, 3},       {1, inf, 2, 3},        {-inf, 0, -inf, 0}, {-inf, -inf, -inf, -inf},
                        {nan, nan, nan, nan}, {-inf, 5, -inf, -inf}, {inf, -inf, 1, nan}};
    size_t widths[] = {4, 40, 1100, 33000};
    for (size_t wi = 0; wi < 4; wi++) {
        size_t cols = widths[wi], n = 7 * cols;
        float *hx = xmalloc(n * sizeof *hx), *hy = xmalloc(n * sizeof *hy);
        for (size_t i = 0; i < 7; i++) {
            for (size_t j = 0; j < cols; j++)
                hx[i * cols + j] = j < 4 ? rows[i][j] : -inf;
        }
        float *dx = dev_alloc(&g, n), *dy = dev_alloc(&g, n);
        to_dev(&g, dx, hx, n);
        for (int v = 0; v <= 5; v++) {
            for (size_t i = 0; i < n; i++)
                hy[i] = 0.25f; /* a number: NaN outputs must be written */
            to_dev(&g, dy, hy, n);
            cck_status st =
                v ? cck_softmax_cuda_version(g.ctx, v, 0, dx, dy, 7, cols) : cck_softmax_cuda(g.ctx, dx, dy, 7, cols);
            cr_assert_eq(st, CCK_OK);
            to_host(&g, hy, dy, n);
            char what[64];
            snprintf(what, sizeof what, "softmax v%d nan/inf cols %zu", v, cols);
            check_softmax(what, hy, hx, 7, cols);
        }
        dev_free(&g, dx), dev_free(&g, dy);
        free(hx), free(hy);
    }
    gpu_close(&g);
}

/* ---- dense ---------------------------------------------------------------- */

static void dense_run(gpu *g, rng *r, size_t batch, size_t in, size_t out, int bias, cck_activation act, double rtol,
                      size_t y_off) {
    float *hx = xmalloc(batch * in * sizeof *hx), *hw = xmalloc(out * in * sizeof *hw);
    float *hb = xmalloc(out * sizeof *hb), *hy = xmalloc(batch * out * sizeof *hy);
    fill_uniform(r, hx, batch * in, 1.0f);
    fill_uniform(r, hw, out * in, 1.0f / sqrtf((float)in));
    fill_uniform(r, hb, out, 0.5f);
    float *dx = dev_alloc(g, batch * in), *dw = dev_alloc(g, out * in), *db = dev_alloc(g, out);
    float *dy = dev_alloc(g, batch * out + 4);
    to_dev(g, dx, hx, batch * in);
    to_dev(g, dw, hw, out * in);
    to_dev(g, db, hb, out);
    for (size_t i = 0; i < batch * out; i++)
        hy[i] = NAN;
    to_dev(g, dy + y_off, hy, batch * out);
    cck_status st = cck_dense_cuda(g->ctx, dx, dw, bias ? db : NULL, dy + y_off, batch, in, out, act);
    cr_assert_eq(st, CCK_OK, "%s", cck_status_string(st));
    to_host(g, hy, dy + y_off, batch * out);
    char what[128];
    snprintf(what, sizeof what, "dense_cuda %zux%zux%zu %s%s y+%zu rtol %g", batch, in, out, cck_activation_name(act),
             bias ? " +bias" : "", y_off, rtol);
    check_dense(what, hy, hx, hw, bias ? hb : NULL, batch, in, out, act, rtol);
    dev_free(g, dx), dev_free(g, dw), dev_free(g, db), dev_free(g, dy);
    free(hx), free(hw), free(hb), free(hy);
}

static void dense_all(int use_tf32, double rtol) {
    gpu g = gpu_open(use_tf32);
    rng r = rng_fresh(use_tf32 ? "dense_cuda.tf32" : "dense_cuda.fp32");
    static const size_t dims[][3] = {{1, 1, 1},     {3, 5, 7},        {4, 8, 8},        {17, 33, 65},
                                     {64, 256, 96}, {128, 1024, 512}, {33, 1000, 1001}, {256, 4096, 1024}};
    for (size_t s = 0; s < sizeof dims / sizeof dims[0]; s++) {
        for (int act = CCK_ACT_NONE; act <= CCK_ACT_GELU; act++) {
            for (int bias = 0; bias < 2; bias++) {
                dense_run(&g, &r, dims[s][0], dims[s][1], dims[s][2], bias, (cck_activation)act, rtol, 0);
                dense_run(&g, &r, dims[s][0], dims[s][1], dims[s][2], bias, (cck_activation)act, rtol, 1);
            }
        }
    }
    gpu_close(&g);
}

Test(dense_cuda, fp32_each_activation, .timeout = 600) {
    dense_all(0, 1e-5);
}
Test(dense_cuda, tf32_each_activation, .timeout = 600) {
    dense_all(1, 4e-3);
}

/* GELU over its whole range (kernels_check.h's grid) through the real
 * epilogue: 1x1 layers (scalar path) and in = 1, out = 4, W = 1 (float4
 * path: four copies of the grid, each checked). CUDA's expf is <= 2 ulp, so
 * 6 ulp times the condition number (the host's bound is 4). */
Test(dense_cuda, gelu_over_its_range) {
    gpu g = gpu_open(0);
    enum { N = GELU_GRID_LEN };
    float *hx = xmalloc(N * sizeof *hx), *hy = xmalloc(4 * N * sizeof *hy), *col = xmalloc(N * sizeof *col);
    const float hw[4] = {1.0f, 1.0f, 1.0f, 1.0f};
    gelu_grid_fill(hx);
    float *dx = dev_alloc(&g, N), *dw = dev_alloc(&g, 4), *dy = dev_alloc(&g, 4 * N);
    to_dev(&g, dx, hx, N);
    to_dev(&g, dw, hw, 4);
    for (size_t out = 1; out <= 4; out += 3) {
        for (size_t i = 0; i < out * N; i++)
            hy[i] = NAN;
        to_dev(&g, dy, hy, out * N);
        cr_assert_eq(cck_dense_cuda(g.ctx, dx, dw, NULL, dy, N, 1, out, CCK_ACT_GELU), CCK_OK);
        to_host(&g, hy, dy, out * N);
        for (size_t o = 0; o < out; o++) {
            for (size_t i = 0; i < N; i++)
                col[i] = hy[i * out + o];
            char what[64];
            snprintf(what, sizeof what, "dense_cuda gelu out=%zu column %zu", out, o);
            gelu_grid_check(what, hx, col, 6.0);
        }
    }
    dev_free(&g, dx), dev_free(&g, dw), dev_free(&g, dy);
    free(hx), free(hy), free(col);
    gpu_close(&g);
}

/* ---- the workspace and the allocator ------------------------------------- */

Test(dense_cuda, cublas_workspace_is_a_ccalloc_block) {
    gpu g = gpu_open(0);
    size_t held = 0;
    cr_assert_eq(cca_block_size(g.alloc, g.workspace, &held), CCA_OK);
    cr_assert_geq(held, g.workspace_bytes);
    cca_stats s;
    cca_get_stats(g.alloc, &s);
    cr_assert_eq(s.active_blocks, 1);
    rng r = rng_fresh("dense_cuda.cublas_workspace_is_a_ccalloc_block");
    dense_run(&g, &r, 512, 2048, 2048, 1, CCK_ACT_GELU, 1e-5, 0);
    cca_get_stats(g.alloc, &s);
    cr_assert_eq(s.active_blocks, 1, "only the workspace is live after the layer");
    gpu_close(&g); /* asserts reserved_bytes == 0 after empty_cache */
}

Test(kernels_cuda_api, device_errors_with_a_context) {
    gpu g = gpu_open(0);
    cck_cuda_context *ctx = NULL;
    int n = 0;
    cr_assert_eq(cck_cuda_device_count(&n), CCK_OK);
    cr_assert_eq(cck_cuda_context_create(n, NULL, NULL, 0, 0, &ctx), CCK_ERR_INVALID_ARGUMENT);
    cr_assert_null(ctx);
    float *d = dev_alloc(&g, 64);
    cr_assert_eq(cck_softmax_cuda_version(g.ctx, 3, 96, d, d, 1, 64), CCK_ERR_UNSUPPORTED);
    cr_assert_eq(cck_softmax_cuda_version(g.ctx, 5, 96, d, d, 1, 64), CCK_ERR_UNSUPPORTED);
    cr_assert_eq(cck_softmax_cuda_version(g.ctx, 6, 0, d, d, 1, 64), CCK_ERR_INVALID_ARGUMENT);
    /* refused before any launch: indices too close to INT_MAX for the
     * kernels' int arithmetic, and a y that overlaps an input */
    cr_assert_eq(cck_softmax_cuda(g.ctx, d, d, (size_t)INT_MAX - 100, 1), CCK_ERR_UNSUPPORTED);
    cr_assert_eq(cck_softmax_cuda_version(g.ctx, 2, 0, d, d, 1, (size_t)INT_MAX), CCK_ERR_UNSUPPORTED);
    cr_assert_eq(cck_dense_cuda(g.ctx, d, d + 8, d + 32, d + 32, 1, 4, 4, CCK_ACT_RELU), CCK_ERR_INVALID_ARGUMENT);
    cr_assert_eq(cck_dense_cuda(g.ctx, d, d + 8, NULL, d + 2, 1, 4, 4, CCK_ACT_NONE), CCK_ERR_INVALID_ARGUMENT);
    /* a context without workspace works too */
    cr_assert_eq(cck_cuda_context_create(0, NULL, NULL, 0, 0, &ctx), CCK_OK);
    cr_assert_eq(cck_softmax_cuda(ctx, d, d, 1, 64), CCK_OK);
    cr_assert_eq(cck_cuda_context_destroy(ctx), CCK_OK);
    dev_free(&g, d);
    gpu_close(&g);
}

#ifdef CCK_HAVE_CUDA /* the test calls the CUDA runtime itself */
/* An error the caller left pending (here a failed cudaMalloc, which sets the
 * runtime's last-error slot and is not sticky) is not blamed on our launch. */
Test(kernels_cuda_api, a_pending_error_of_the_caller_is_not_ours) {
    gpu g = gpu_open(0);
    float *d = dev_alloc(&g, 64);
    void *huge = NULL;
    cr_assert_neq(cudaMalloc(&huge, (size_t)1 << 62), cudaSuccess);
    cr_assert_eq(cck_softmax_cuda(g.ctx, d, d, 1, 64), CCK_OK);
    cr_assert_eq(cck_cuda_synchronize(g.ctx), CCK_OK);
    cr_assert_eq(cudaGetLastError(), cudaSuccess);
    dev_free(&g, d);
    gpu_close(&g);
}
#endif
