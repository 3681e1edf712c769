/*
 * cck_bench.c — throughput of the kernels in kernels/: softmax per version
 * as a fraction of copy bandwidth, and the dense layer's epilogue overhead.
 *
 *     cck_bench [--reps N] [--cpu-reps N] [--cpu-rows N] [--csv FILE] [--no-cpu] [--sweep]
 *     cck_bench --list-shapes     the main table's softmax shapes, one per line
 *                                 (bench/kernels/torch_softmax.py --list-shapes
 *                                 must print the same: a CTest compares them)
 *     cck_bench --help | -h       the usage, each option (counts: range and
 *                                 default) and the exit statuses, on stdout
 *
 * Exit status: 0 done; 1 a configuration failed its check or could not get
 * its memory, or an output could not be made or was cut short (below); 2
 * bad usage: an unknown option, an operand or an option missing its value,
 * named on stderr with the usage; a bad count, named on stderr with its
 * option and range (one line, no usage).
 *
 * GPU (when one is present and the library was built with CUDA):
 *   softmax, 4096 × {128, 1000, 4096, 32768} and the engine's own softmax
 *   heads, 8 × 10 and 1024 × 10 (ccrun's default batch and the demo's
 *   largest; every demo model ends in 10 classes): one table per run with,
 *   per shape, the copy, every version at its default block size, and the
 *   dispatched one (cck_softmax_cuda, which version and block it ran named),
 *   timed with CUDA events one launch at a time, the L2 cache flushed (a
 *   memset of twice its size) before each launch. Bandwidth counts the
 *   compulsory bytes, read x + write y = 8·rows·cols, and is divided by the
 *   bandwidth of a device-to-device cudaMemcpy of the same bytes measured
 *   the same way in the same run: 100% means "as fast as a copy".
 *   dense, y = act(x·Wᵀ + b): the layer with no bias and no activation is
 *   exactly the cuBLAS SGEMM (the epilogue is skipped), so
 *   overhead = (t(bias+act) - t(GEMM)) / t(GEMM).
 *   --sweep adds the data of the dispatch table (kernels/src/softmax_dispatch.c):
 *   versions 2-5 at every power-of-two block size from 32 to 1024, on 4096
 *   rows of {128, 512, 768, 992, 1000, 1008, 1024, 1025, 2048, 4096, 8192,
 *   32768} columns (around the warp/block switch at 1024, and on either side
 *   of 1000, to tell length from divisibility by 32) and on the engine's two
 *   shapes, one table row per (shape, version) with the fastest block, the
 *   default block's time, and a CSV row per block; then "Dispatch table this
 *   run implies": per shape the fastest (version, block), written as rows of
 *   cck_softmax_table, to paste into softmax_dispatch.c.
 * CPU (always, unless --no-cpu): the host kernels on the same softmax shapes
 *   (rows capped by --cpu-rows) against memcpy of the same bytes, and the host
 *   dense layer with and without its epilogue, wall clock.
 *
 * Every configuration is checked against the double reference (on a sample
 * of rows) before it is timed; a failure is reported and the program exits 1.
 * So does a configuration whose host memory malloc refuses (a shape too big
 * for the machine or its ulimit -v): "NOT MEASURED (out of memory): WHAT"
 * on stdout, where a row of the table would be (it was a row of 4 cells,
 * or nothing for a dense shape, and the exit status 0).
 * Results: a markdown table on stdout (medians, min–max spread, device) and
 * one CSV row per measurement (default cck_bench.csv).
 * A result cut short is a failure, as in ccbench: the CSV's header is
 * flushed before anything is timed, and the CSV and standard output are
 * checked at their close; one that could not be written whole (a full
 * disk; a file-size limit with SIGXFSZ ignored, EFBIG) is said,
 * "cck_bench: cannot write FILE: REASON", and the exit status is 1; so
 * is a --list-shapes or --help output cut short, a CSV that cannot be
 * opened (a directory, a missing directory, no permission: exit 1, as in
 * ccbench; it was exit 2, as if the usage were bad), and a CSV that is the
 * file standard output or error goes to (`--csv x.csv >x.csv`: refused
 * before it is opened, nothing timed). A path or value from the
 * command line is escaped in messages (common/ccai_escape.h).
 * Standard descriptors closed at start are held (common/ccai_stdfds.h), so
 * the CSV never takes descriptor 1.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ccai_decimal.h" /* common/: ccai_decimal_uint */
#include "ccai_escape.h"  /* common/: a path or value from the command line, escaped for a person */
#include "ccai_open.h"    /* common/: ccai_open_nowait */
#include "ccai_rng.h"
#include "ccai_stdfds.h" /* common/: ccai_hold_std_fds, ccai_close_failed, ccai_std_stream_of */
#include "cck.h"

#ifdef CCK_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

typedef struct opts {
    int reps, cpu_reps;
    size_t cpu_rows;
    const char *csv;
    int cpu, sweep;
} opts;

typedef struct timing {
    double med, min, max; /* milliseconds */
} timing;

/* Softmax shapes (rows x cols) of the main tables: the four, then
 * the engine's heads. The CPU caps rows at --cpu-rows. */
static const size_t softmax_shapes[][2] = {{4096, 128}, {4096, 1000}, {4096, 4096}, {4096, 32768}, {8, 10}, {1024, 10}};
#define NSHAPES (sizeof softmax_shapes / sizeof softmax_shapes[0])

static FILE *csv;
static char device_name[256];
static int failures;
static int unmeasured; /* configurations whose host memory malloc refused */

/* A configuration not measured for want of host memory: said on stdout
 * with WHAT, and counted (the exit status is then 1). */
static void no_memory(const char *what) {
    printf("NOT MEASURED (out of memory): %s\n", what);
    unmeasured++;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static timing summarize(double *ms, int n) {
    qsort(ms, (size_t)n, sizeof *ms, cmp_double);
    timing t = {n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]), ms[0], ms[n - 1]};
    return t;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static void csv_row(const char *kind, const char *op, const char *version, size_t rows, size_t cols, size_t batch,
                    size_t in, size_t out, const char *act, int reps, timing t, double gbps, double frac, double gflops,
                    double overhead) {
    fprintf(csv, "\"%s\",%s,%s,%s,%zu,%zu,%zu,%zu,%zu,%s,%d,%.6f,%.6f,%.6f,%.3f,%.4f,%.3f,%.2f\n", device_name, kind,
            op, version, rows, cols, batch, in, out, act, reps, t.med, t.min, t.max, gbps, frac, gflops, overhead);
}

/* Uniform in [-scale, scale), 24 bits each, from the splitmix64 stream of
 * the seed (common/ccai_rng.h). */
static void fill(float *a, size_t n, unsigned seed, float scale) {
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++)
        a[i] = ((float)(ccai_splitmix64_next(&s) >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f) * scale;
}

/* The four host buffers of a dense shape (x, W, b, y): 0 when malloc gave
 * them all, else 1 after saying so and freeing the others. */
static int dense_no_memory(const char *kind, size_t batch, size_t in, size_t out, float *x, float *w, float *b,
                           float *y) {
    if (x && w && b && y)
        return 0;
    char what[64];
    snprintf(what, sizeof what, "%s dense %zux%zux%zu", kind, batch, in, out);
    no_memory(what);
    free(x), free(w), free(b), free(y);
    return 1;
}

/* Check rows [r0, r0+nr) of a softmax result against the reference, with
 * the tolerance of tests/kernels/kernels_check.h. */
static int softmax_ok(const char *what, const float *x, const float *y, size_t r0, size_t nr, size_t cols) {
    double *ref = malloc(nr * cols * sizeof *ref);
    if (!ref) {
        no_memory(what);
        return 0;
    }
    cck_softmax_reference(x + r0 * cols, ref, nr, cols);
    double rtol = 1e-5 + 4.0 * sqrt((double)cols) * 0x1.0p-24;
    int ok = 1;
    for (size_t i = 0; i < nr * cols && ok; i++) {
        double v = y[r0 * cols + i];
        ok = !isnan(v) && fabs(v - ref[i]) <= rtol * fabs(ref[i]) + 1e-37;
    }
    free(ref);
    if (!ok) {
        printf("FAILED correctness: %s\n", what);
        failures++;
    }
    return ok;
}

/* Check the first nr rows of a dense result: |y - ref| <= rtol·(Σ|x·w|+|b|)·1.2 */
static int dense_ok(const char *what, const float *x, const float *w, const float *b, const float *y, size_t nr,
                    size_t in, size_t out, cck_activation act, double rtol) {
    double *ref = malloc(nr * out * sizeof *ref), *scale = malloc(nr * out * sizeof *scale);
    float *ax = malloc(nr * in * sizeof *ax), *aw = malloc(out * in * sizeof *aw), *ab = malloc(out * sizeof *ab);
    int ok = ref && scale && ax && aw && ab;
    if (!ok) {
        free(ref), free(scale), free(ax), free(aw), free(ab);
        no_memory(what);
        return 0;
    }
    for (size_t i = 0; i < nr * in; i++)
        ax[i] = fabsf(x[i]);
    for (size_t i = 0; i < out * in; i++)
        aw[i] = fabsf(w[i]);
    for (size_t i = 0; i < out; i++)
        ab[i] = b ? fabsf(b[i]) : 0.0f;
    cck_dense_reference(x, w, b, ref, nr, in, out, act);
    cck_dense_reference(ax, aw, ab, scale, nr, in, out, CCK_ACT_NONE);
    for (size_t i = 0; i < nr * out && ok; i++) {
        ok = !isnan(y[i]) && fabs(y[i] - ref[i]) <= rtol * 1.2 * scale[i] + 1e-30;
    }
    free(ref), free(scale), free(ax), free(aw), free(ab);
    if (!ok) {
        printf("FAILED correctness: %s\n", what);
        failures++;
    }
    return ok;
}

/* ---- CPU ------------------------------------------------------------------ */

static void cpu_name(void) {
    snprintf(device_name, sizeof device_name, "CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) == 0 && colon) {
            line[strcspn(line, "\n")] = 0;
            snprintf(device_name, sizeof device_name, "CPU: %.200s", colon + 2);
            break;
        }
    }
    if (f)
        fclose(f);
}

static void bench_cpu(const opts *o) {
    cpu_name();
    printf("\n## %s (host kernels, %d OpenMP thread(s))\n\n", device_name, cck_host_threads());
    printf("Host GEMM: %s\n\n", cck_host_gemm_name());
    printf("Dense rows: the built-in blocked loop alone (\"blocked gemm\"), then the library's GEMM\n"
           "alone (\"gemm only\") and with each epilogue; overhead is over that GEMM alone.\n\n");
    printf("| op | shape | version | median ms | spread ms | GB/s or GFLOP/s | vs memcpy / overhead |\n");
    printf("|---|---|---|---|---|---|---|\n");
    double *ms = malloc((size_t)o->cpu_reps * sizeof *ms);
    if (!ms) {
        no_memory("cpu benchmarks (their timings)");
        return;
    }
    for (size_t c = 0; c < NSHAPES; c++) {
        size_t cols = softmax_shapes[c][1],
               rows = softmax_shapes[c][0] < o->cpu_rows ? softmax_shapes[c][0] : o->cpu_rows;
        size_t n = rows * cols;
        float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
        char what[64];
        snprintf(what, sizeof what, "cpu softmax %zux%zu", rows, cols);
        if (!x || !y) {
            no_memory(what);
            free(x), free(y);
            continue;
        }
        fill(x, n, (unsigned)cols, 8.0f);
        memset(y, 0, n * sizeof *y);
        cck_softmax_host(x, y, rows, cols);
        if (!softmax_ok(what, x, y, 0, rows < 16 ? rows : 16, cols)) {
            free(x), free(y);
            continue;
        }
        double bytes = 2.0 * n * sizeof(float);
        for (int r = -1; r < o->cpu_reps; r++) {
            double t0 = now_ms();
            memcpy(y, x, n * sizeof *x);
            if (r >= 0)
                ms[r] = now_ms() - t0;
        }
        timing tc = summarize(ms, o->cpu_reps);
        double copy_gbps = bytes / tc.med * 1e-6;
        printf("| memcpy | %zux%zu | - | %.3f | %.3f–%.3f | %.2f GB/s | 100%% |\n", rows, cols, tc.med, tc.min, tc.max,
               copy_gbps);
        csv_row("cpu", "copy", "memcpy", rows, cols, 0, 0, 0, "-", o->cpu_reps, tc, copy_gbps, 1.0, 0, 0);
        for (int r = -1; r < o->cpu_reps; r++) { /* r = -1: warm-up, not kept */
            double t0 = now_ms();
            cck_softmax_host(x, y, rows, cols);
            if (r >= 0)
                ms[r] = now_ms() - t0;
        }
        timing t = summarize(ms, o->cpu_reps);
        double gbps = bytes / t.med * 1e-6;
        printf("| softmax | %zux%zu | host | %.3f | %.3f–%.3f | %.2f GB/s | %.1f%% |\n", rows, cols, t.med, t.min,
               t.max, gbps, 100.0 * gbps / copy_gbps);
        csv_row("cpu", "softmax", "host", rows, cols, 0, 0, 0, "-", o->cpu_reps, t, gbps, gbps / copy_gbps, 0, 0);
        free(x), free(y);
    }
    static const size_t dims[][3] = {{64, 1024, 1024}, {256, 1024, 1024}, {64, 4096, 4096}};
    for (size_t d = 0; d < 3; d++) {
        size_t batch = dims[d][0], in = dims[d][1], out = dims[d][2];
        float *x = malloc(batch * in * sizeof *x), *w = malloc(out * in * sizeof *w);
        float *b = malloc(out * sizeof *b), *y = malloc(batch * out * sizeof *y);
        if (dense_no_memory("cpu", batch, in, out, x, w, b, y))
            continue;
        fill(x, batch * in, 1, 1.0f);
        fill(w, out * in, 2, 1.0f / sqrtf((float)in));
        fill(b, out, 3, 0.5f);
        double gemm_ms = 0;
        /* act -2: the blocked loop, no bias, no activation; -1: the library's
         * GEMM alone (the baseline of the overhead column); then each epilogue */
        for (int act = -2; act <= CCK_ACT_GELU; act++) {
            cck_activation a = act < 0 ? CCK_ACT_NONE : (cck_activation)act;
            const float *bias = act < 0 ? NULL : b;
            cck_status (*dense)(const float *, const float *, const float *, float *, size_t, size_t, size_t,
                                cck_activation) = act == -2 ? cck_dense_host_blocked : cck_dense_host;
            const char *label = act == -2 ? "blocked gemm" : act == -1 ? "gemm only" : cck_activation_name(a);
            char what[96];
            snprintf(what, sizeof what, "cpu dense %zux%zux%zu %s", batch, in, out, label);
            dense(x, w, bias, y, batch, in, out, a);
            if (!dense_ok(what, x, w, bias, y, batch < 4 ? batch : 4, in, out, a, 1e-5))
                continue;
            for (int r = -1; r < o->cpu_reps; r++) {
                double t0 = now_ms();
                dense(x, w, bias, y, batch, in, out, a);
                if (r >= 0)
                    ms[r] = now_ms() - t0;
            }
            timing t = summarize(ms, o->cpu_reps);
            double gflops = 2.0 * batch * in * out / t.med * 1e-6;
            if (act == -1)
                gemm_ms = t.med;
            double over = act < 0 ? 0.0 : 100.0 * (t.med - gemm_ms) / gemm_ms;
            printf("| dense | %zux%zux%zu | %s%s | %.3f | %.3f–%.3f | %.2f GFLOP/s | ", batch, in, out, label,
                   act < 0 ? "" : "+bias", t.med, t.min, t.max, gflops);
            if (act == -2)
                printf("- |\n");
            else
                printf("%+.1f%% |\n", over);
            csv_row("cpu", "dense",
                    act == -2   ? "gemm-blocked"
                    : act == -1 ? "gemm"
                                : "host",
                    0, 0, batch, in, out, label, o->cpu_reps, t, 0, 0, gflops, over);
        }
        free(x), free(w), free(b), free(y);
    }
    free(ms);
}

/* ---- GPU ------------------------------------------------------------------ */

#ifdef CCK_HAVE_CUDA

/* Return `ret` (CU: 1) from the enclosing function when a CUDA call fails. */
#define CUR(call, ret)                                                                                                 \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess) {                                                                                       \
            printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__);                            \
            return (ret);                                                                                              \
        }                                                                                                              \
    } while (0)

#define CU(call) CUR(call, 1)

typedef struct gpu_timer {
    cudaEvent_t a, b;
    void *flush;
    size_t flush_bytes;
} gpu_timer;

/* One launch per rep: flush L2, record, run, record. */
enum job_kind { JOB_COPY, JOB_SOFTMAX, JOB_SOFTMAX_DISPATCHED, JOB_DENSE };
typedef struct gpu_job {
    enum job_kind kind;
    int version; /* JOB_SOFTMAX: 1..CCK_SOFTMAX_VERSIONS                */
    int block;   /* softmax: threads per block, 0 = the version's default */
    cck_cuda_context *ctx;
    const float *x, *w, *b;
    float *y;
    size_t rows, cols, batch, in, out;
    cck_activation act;
} gpu_job;

static int gpu_run(const gpu_job *j) {
    cck_status st = CCK_OK;
    switch (j->kind) {
    case JOB_COPY:
        return cudaMemcpyAsync(j->y, j->x, j->rows * j->cols * sizeof(float), cudaMemcpyDeviceToDevice, 0) ==
               cudaSuccess;
    case JOB_SOFTMAX: st = cck_softmax_cuda_version(j->ctx, j->version, j->block, j->x, j->y, j->rows, j->cols); break;
    case JOB_SOFTMAX_DISPATCHED: st = cck_softmax_cuda(j->ctx, j->x, j->y, j->rows, j->cols); break;
    case JOB_DENSE: st = cck_dense_cuda(j->ctx, j->x, j->w, j->b, j->y, j->batch, j->in, j->out, j->act); break;
    }
    return st == CCK_OK;
}

static int gpu_time(gpu_timer *t, const gpu_job *j, int reps, double *ms, timing *out) {
    for (int r = -1; r < reps; r++) { /* r = -1: warm-up */
        CU(cudaMemsetAsync(t->flush, r & 0xff, t->flush_bytes, 0));
        CU(cudaEventRecord(t->a, 0));
        if (!gpu_run(j)) {
            printf("launch failed\n");
            return 1;
        }
        CU(cudaEventRecord(t->b, 0));
        CU(cudaEventSynchronize(t->b));
        float f = 0;
        CU(cudaEventElapsedTime(&f, t->a, t->b));
        if (r >= 0)
            ms[r] = f;
    }
    *out = summarize(ms, reps);
    return 0;
}

/* Device buffers for a rows × cols softmax, x filled from `seed`; hx and hy
 * on the host (hy only for the rows checked). 0 on success. */
typedef struct softmax_bufs {
    float *hx, *hy, *dx, *dy;
} softmax_bufs;

static int softmax_bufs_open(softmax_bufs *b, size_t rows, size_t cols, unsigned seed) {
    size_t nel = rows * cols;
    memset(b, 0, sizeof *b);
    b->hx = malloc(nel * sizeof *b->hx), b->hy = malloc(nel * sizeof *b->hy);
    if (!b->hx || !b->hy) {
        printf("out of host memory for %zux%zu\n", rows, cols);
        return 1;
    }
    CU(cudaMalloc((void **)&b->dx, nel * sizeof(float)));
    CU(cudaMalloc((void **)&b->dy, nel * sizeof(float)));
    fill(b->hx, nel, seed, 8.0f);
    CU(cudaMemcpy(b->dx, b->hx, nel * sizeof(float), cudaMemcpyHostToDevice));
    return 0;
}

static void softmax_bufs_close(softmax_bufs *b) {
    cudaFree(b->dx), cudaFree(b->dy), free(b->hx), free(b->hy);
}

/* Make *job a softmax of the given kind, version and block over b, run it
 * once on NaN-poisoned y, check the first and last `sample` rows (all rows
 * when there are fewer than 2·sample) against the double reference, and
 * only then time it into *tv: 1 timed, 0 wrong (reported, counted in
 * `failures`, not timed), -1 a CUDA error. Only the checked rows are copied
 * back. */
static int gpu_softmax_measure(gpu_timer *t, gpu_job *job, enum job_kind kind, int version, int block,
                               const softmax_bufs *b, const char *what, size_t sample, int reps, double *ms,
                               timing *tv) {
    job->kind = kind, job->version = version, job->block = block;
    const float *hx = b->hx;
    float *hy = b->hy;
    size_t rows = job->rows, cols = job->cols, row_bytes = cols * sizeof(float);
    if (sample > rows / 2)
        sample = rows - rows / 2;                        /* first half and the rest: every row */
    CUR(cudaMemset(job->y, 0xff, rows * row_bytes), -1); /* NaN poison */
    if (!gpu_run(job))
        return -1;
    size_t last = rows - sample;
    CUR(cudaMemcpy(hy, job->y, sample * row_bytes, cudaMemcpyDeviceToHost), -1);
    CUR(cudaMemcpy(hy + last * cols, job->y + last * cols, sample * row_bytes, cudaMemcpyDeviceToHost), -1);
    if (!softmax_ok(what, hx, hy, 0, sample, cols) || !softmax_ok(what, hx, hy, last, sample, cols))
        return 0;
    return gpu_time(t, job, reps, ms, tv) ? -1 : 1;
}

/* Buffers for a rows × cols softmax and a job over them, and the copy of
 * the same bytes timed into *tc: the yardstick of every softmax figure of
 * this shape. 0 on success. */
static int shape_begin(gpu_timer *t, cck_cuda_context *ctx, size_t rows, size_t cols, unsigned seed, int reps,
                       double *ms, softmax_bufs *b, gpu_job *job, timing *tc) {
    if (softmax_bufs_open(b, rows, cols, seed))
        return 1;
    gpu_job j = {.kind = JOB_COPY, .ctx = ctx, .x = b->dx, .y = b->dy, .rows = rows, .cols = cols};
    *job = j;
    return gpu_time(t, job, reps, ms, tc);
}

/* "v3 block 512" */
static void choice_name(char *buf, size_t len, int version, int block) {
    snprintf(buf, len, "v%d block %d", version, block);
}

/* --sweep: versions 2-5 at every power-of-two block, on the lengths around
 * the warp/block switch (1024 columns), around 1000, and the engine's
 * shapes. Then the dispatch table the run implies. */
static const size_t sweep_shapes[][2] = {{4096, 128},  {4096, 512},   {4096, 768},  {4096, 992},  {4096, 1000},
                                         {4096, 1008}, {4096, 1024},  {4096, 1025}, {4096, 2048}, {4096, 4096},
                                         {4096, 8192}, {4096, 32768}, {8, 10},      {1024, 10}};
#define NSWEEP (sizeof sweep_shapes / sizeof sweep_shapes[0])
#define SWEEP_V0 2 /* v1 (one thread per row) is left out: 7-23x slower everywhere measured */
#define SWEEP_NV (CCK_SOFTMAX_VERSIONS - SWEEP_V0 + 1)

typedef struct sweep_best {
    double ms[SWEEP_NV], copy_ms; /* fastest median per version; INFINITY = none passed */
    int block[SWEEP_NV];
} sweep_best;

/* The rows of cck_softmax_table (kernels/src/softmax_dispatch.c) this run
 * implies: per shape, the fastest (version, block), with the fastest of the
 * other versions as the runner-up. */
static void print_implied_table(const sweep_best *best) {
    printf("\n### Dispatch table this run implies\n\n");
    printf("Per shape the fastest (version, block) of the sweep above, as rows of `cck_softmax_table`\n"
           "(kernels/src/softmax_dispatch.c: rows, cols, version, block; then point\n"
           "`cck_softmax_table_source` at this file and run test_softmax_dispatch):\n\n");
    for (size_t c = 0; c < NSWEEP; c++) {
        int w = -1, r = -1;
        for (int v = 0; v < SWEEP_NV; v++) {
            if (!isfinite(best[c].ms[v]))
                continue;
            if (w < 0 || best[c].ms[v] < best[c].ms[w]) {
                r = w;
                w = v;
            } else if (r < 0 || best[c].ms[v] < best[c].ms[r]) {
                r = v;
            }
        }
        if (w < 0) {
            printf("    /* %zux%zu: no version passed its check */\n", sweep_shapes[c][0], sweep_shapes[c][1]);
            continue;
        }
        char entry[64], runner[64] = "none";
        snprintf(entry, sizeof entry, "{%zu, %zu, %d, %d},", sweep_shapes[c][0], sweep_shapes[c][1], w + SWEEP_V0,
                 best[c].block[w]);
        if (r >= 0)
            snprintf(runner, sizeof runner, "v%d block %d %.4f ms", r + SWEEP_V0, best[c].block[r], best[c].ms[r]);
        printf("    %-24s /* %.4f ms, %.1f%%; %s */\n", entry, best[c].ms[w], 100.0 * best[c].copy_ms / best[c].ms[w],
               runner);
    }
}

static int gpu_sweep(gpu_timer *t, cck_cuda_context *ctx, int reps, double *ms) {
    sweep_best best[NSWEEP];
    printf("\n### Block-size sweep (fastest block per version and shape)\n\n");
    printf("| rows | cols | version | best block | best ms | default ms | best vs copy |\n"
           "|---|---|---|---|---|---|---|\n");
    for (size_t c = 0; c < NSWEEP; c++) {
        size_t rows = sweep_shapes[c][0], cols = sweep_shapes[c][1];
        softmax_bufs b;
        gpu_job job;
        timing tc;
        if (shape_begin(t, ctx, rows, cols, (unsigned)cols + 7, reps, ms, &b, &job, &tc))
            return 1;
        double bytes = 2.0 * rows * cols * sizeof(float);
        best[c].copy_ms = tc.med;
        for (int v = SWEEP_V0; v <= CCK_SOFTMAX_VERSIONS; v++) {
            double fastest = INFINITY, dflt = NAN;
            int best_block = 0;
            for (int bs = 0; bs <= 1024; bs = bs ? 2 * bs : 32) { /* 0 = the default, then 32..1024 */
                char what[96];
                snprintf(what, sizeof what, "gpu sweep v%d block %d %zux%zu", v, bs, rows, cols);
                timing tv;
                int ok = gpu_softmax_measure(t, &job, JOB_SOFTMAX, v, bs, &b, what, 16, reps, ms, &tv);
                if (ok < 0)
                    return 1;
                if (!ok)
                    continue;
                double gbps = bytes / tv.med * 1e-6;
                char ver[32];
                choice_name(ver, sizeof ver, v, bs);
                csv_row("gpu", "softmax-sweep", ver, rows, cols, 0, 0, 0, "-", reps, tv, gbps,
                        tv.med > 0 ? tc.med / tv.med : 0, 0, 0);
                if (bs == 0) {
                    dflt = tv.med;
                } else if (tv.med < fastest) {
                    fastest = tv.med;
                    best_block = bs;
                }
            }
            best[c].ms[v - SWEEP_V0] = fastest;
            best[c].block[v - SWEEP_V0] = best_block;
            printf("| %zu | %zu | v%d | %d | %.4f | %.4f | %.1f%% |\n", rows, cols, v, best_block, fastest, dflt,
                   100.0 * tc.med / fastest);
        }
        softmax_bufs_close(&b);
    }
    print_implied_table(best);
    return 0;
}

/* Per shape: the copy, every version at its default block, and the
 * dispatched one (cck_softmax_cuda), in one table and as CSV rows. */
static int gpu_softmax_table(gpu_timer *t, cck_cuda_context *ctx, int reps, double *ms) {
    printf("| op | shape | version | median ms | spread ms | GB/s or GFLOP/s | vs copy / overhead |\n");
    printf("|---|---|---|---|---|---|---|\n");
    for (size_t c = 0; c < NSHAPES; c++) {
        size_t rows = softmax_shapes[c][0], cols = softmax_shapes[c][1];
        softmax_bufs b;
        gpu_job job;
        timing tc;
        if (shape_begin(t, ctx, rows, cols, (unsigned)cols, reps, ms, &b, &job, &tc))
            return 1;
        double bytes = 2.0 * rows * cols * sizeof(float);
        double copy_gbps = bytes / tc.med * 1e-6;
        printf("| copy D2D | %zux%zu | cudaMemcpy | %.4f | %.4f–%.4f | %.1f GB/s | 100%% |\n", rows, cols, tc.med,
               tc.min, tc.max, copy_gbps);
        csv_row("gpu", "copy", "memcpy", rows, cols, 0, 0, 0, "-", reps, tc, copy_gbps, 1.0, 0, 0);
        cck_softmax_choice d;
        if (cck_softmax_dispatch(rows, cols, &d) != CCK_OK)
            return 1;
        for (int v = 1; v <= CCK_SOFTMAX_VERSIONS + 1; v++) { /* the last: the dispatched one */
            int dispatched = v > CCK_SOFTMAX_VERSIONS;
            char ver[64], what[96];
            if (dispatched) {
                char name[32];
                choice_name(name, sizeof name, d.version, d.block_size);
                snprintf(ver, sizeof ver, "dispatched (%s)", name);
            } else {
                snprintf(ver, sizeof ver, "v%d", v);
            }
            snprintf(what, sizeof what, "gpu softmax %s %zux%zu", ver, rows, cols);
            timing tv;
            int ok = gpu_softmax_measure(t, &job, dispatched ? JOB_SOFTMAX_DISPATCHED : JOB_SOFTMAX, v, 0, &b, what, 32,
                                         reps, ms, &tv);
            if (ok < 0)
                return 1;
            if (!ok)
                continue;
            double gbps = bytes / tv.med * 1e-6;
            printf("| softmax | %zux%zu | %s | %.4f | %.4f–%.4f | %.1f GB/s | %.1f%% |\n", rows, cols, ver, tv.med,
                   tv.min, tv.max, gbps, 100.0 * gbps / copy_gbps);
            csv_row("gpu", "softmax", ver, rows, cols, 0, 0, 0, "-", reps, tv, gbps, gbps / copy_gbps, 0, 0);
        }
        softmax_bufs_close(&b);
    }
    return 0;
}

static int bench_gpu(const opts *o) {
    int n = 0;
    cck_status st = cck_cuda_device_count(&n);
    if (st != CCK_OK || n == 0) {
        printf("GPU benchmarks skipped: no GPU (%s)\n", cck_status_string(st));
        return 0;
    }
    struct cudaDeviceProp prop;
    CU(cudaGetDeviceProperties(&prop, 0));
    snprintf(device_name, sizeof device_name, "GPU: %.160s (sm_%d%d, %d SMs, L2 %d MiB)", prop.name, prop.major,
             prop.minor, prop.multiProcessorCount, prop.l2CacheSize >> 20);
    size_t ws_bytes = 0;
    void *ws = NULL;
    cck_cuda_context *ctx = NULL;
    gpu_timer t = {0};
    t.flush_bytes = 2 * (size_t)prop.l2CacheSize;
    CU(cudaMalloc(&t.flush, t.flush_bytes));
    CU(cudaEventCreate(&t.a));
    CU(cudaEventCreate(&t.b));
    if (cck_cublas_workspace_size(0, &ws_bytes) != CCK_OK)
        return 1;
    CU(cudaMalloc(&ws, ws_bytes));
    if (cck_cuda_context_create(0, NULL, ws, ws_bytes, 0, &ctx) != CCK_OK)
        return 1;
    double *ms = malloc((size_t)o->reps * sizeof *ms);
    if (!ms) {
        no_memory("gpu benchmarks (their timings)");
        return 1;
    }

    printf("\n## %s\n\n", device_name);
    if (gpu_softmax_table(&t, ctx, o->reps, ms))
        return 1;
    if (o->sweep && gpu_sweep(&t, ctx, o->reps, ms))
        return 1;
    if (o->sweep) /* the dense table follows the sweep's */
        printf("\n| op | shape | version | median ms | spread ms | GB/s or GFLOP/s | vs copy / overhead |\n"
               "|---|---|---|---|---|---|---|\n");
    static const size_t dims[][3] = {{512, 4096, 4096}, {4096, 1024, 4096}, {4096, 4096, 4096}};
    for (size_t d = 0; d < 3; d++) {
        size_t batch = dims[d][0], in = dims[d][1], out = dims[d][2];
        float *hx = malloc(batch * in * sizeof *hx), *hw = malloc(out * in * sizeof *hw);
        float *hb = malloc(out * sizeof *hb), *hy = malloc(batch * out * sizeof *hy);
        if (dense_no_memory("gpu", batch, in, out, hx, hw, hb, hy))
            continue;
        float *dx, *dw, *db, *dy;
        CU(cudaMalloc((void **)&dx, batch * in * sizeof(float)));
        CU(cudaMalloc((void **)&dw, out * in * sizeof(float)));
        CU(cudaMalloc((void **)&db, out * sizeof(float)));
        CU(cudaMalloc((void **)&dy, batch * out * sizeof(float)));
        fill(hx, batch * in, 1, 1.0f);
        fill(hw, out * in, 2, 1.0f / sqrtf((float)in));
        fill(hb, out, 3, 0.5f);
        CU(cudaMemcpy(dx, hx, batch * in * sizeof(float), cudaMemcpyHostToDevice));
        CU(cudaMemcpy(dw, hw, out * in * sizeof(float), cudaMemcpyHostToDevice));
        CU(cudaMemcpy(db, hb, out * sizeof(float), cudaMemcpyHostToDevice));
        double gemm_ms = 0;
        for (int act = -1; act <= CCK_ACT_GELU; act++) {
            gpu_job job = {.kind = JOB_DENSE,
                           .ctx = ctx,
                           .x = dx,
                           .w = dw,
                           .b = act < 0 ? NULL : db,
                           .y = dy,
                           .batch = batch,
                           .in = in,
                           .out = out,
                           .act = act < 0 ? CCK_ACT_NONE : (cck_activation)act};
            char what[96];
            const char *label = act < 0 ? "gemm only" : cck_activation_name(job.act);
            snprintf(what, sizeof what, "gpu dense %zux%zux%zu %s", batch, in, out, label);
            CU(cudaMemset(dy, 0xff, batch * out * sizeof(float)));
            if (!gpu_run(&job))
                return 1;
            CU(cudaMemcpy(hy, dy, batch * out * sizeof(float), cudaMemcpyDeviceToHost));
            if (!dense_ok(what, hx, hw, job.b ? hb : NULL, hy, 4, in, out, job.act, 1e-5))
                continue;
            timing tv;
            if (gpu_time(&t, &job, o->reps, ms, &tv))
                return 1;
            double gflops = 2.0 * batch * in * out / tv.med * 1e-6;
            if (act < 0)
                gemm_ms = tv.med;
            double over = act < 0 ? 0.0 : 100.0 * (tv.med - gemm_ms) / gemm_ms;
            printf("| dense | %zux%zux%zu | %s%s | %.4f | %.4f–%.4f | %.0f GFLOP/s | %+.1f%% |\n", batch, in, out,
                   label, act < 0 ? "" : "+bias", tv.med, tv.min, tv.max, gflops, over);
            csv_row("gpu", "dense", act < 0 ? "gemm" : "cublas+epilogue", 0, 0, batch, in, out, label, o->reps, tv, 0,
                    0, gflops, over);
        }
        cudaFree(dx), cudaFree(dw), cudaFree(db), cudaFree(dy);
        free(hx), free(hw), free(hb), free(hy);
    }
    free(ms);
    cck_cuda_context_destroy(ctx);
    cudaFree(ws), cudaFree(t.flush);
    cudaEventDestroy(t.a), cudaEventDestroy(t.b);
    return 0;
}

#else

static int bench_gpu(const opts *o) {
    (void)o;
    printf("GPU benchmarks skipped: no GPU (built without CUDA)\n");
    return 0;
}

#endif

/* Flush f and, when close, close it: NULL if everything written reached
 * the file, else why not (a write error whose errno is gone: "write
 * error"). An EBADF at the close after nothing failed is not a failure
 * (ccai_close_failed: a closed standard output never written). */
static const char *write_failed(FILE *f, int close) {
    errno = 0;
    int bad = fflush(f) != 0 || ferror(f);
    int e = errno;
    if (close && fclose(f) != 0 && !bad && ccai_close_failed(errno)) {
        bad = 1;
        e = errno;
    }
    return !bad ? NULL : e ? strerror(e) : "write error";
}

/* 1 after saying "cck_bench: cannot write WHAT: WHY" when why is not NULL. */
static int said_failed(const char *what, const char *why) {
    if (why)
        ccai_fprintf_escaped(stderr, "cck_bench: cannot write %s: %s\n", what, why); /* what: --csv's path */
    return why != NULL;
}

static void usage(FILE *f, const char *argv0) {
    fprintf(f,
            "usage: %s [--reps N] [--cpu-reps N] [--cpu-rows N] [--csv FILE] [--no-cpu] [--sweep]\n"
            "       %s --list-shapes\n"
            "       %s --help | -h\n"
            "  --reps N        timed launches per GPU configuration, 1..1000000 (default 20)\n"
            "  --cpu-reps N    timed passes per CPU configuration, 1..1000000 (default 5)\n"
            "  --cpu-rows N    the CPU's softmax shapes cut to at most N rows, 1..1048576 (default 4096)\n"
            "  --csv FILE      one row per measurement (default cck_bench.csv)\n"
            "  --no-cpu        no CPU tables\n"
            "  --sweep         the GPU block-size sweep and the dispatch table it implies\n"
            "  counts are plain decimal: no sign, blank, base prefix or exponent\n"
            "exit status: 0 done; 1 a check failed, memory was short or an output could not be written whole; "
            "2 bad usage\n",
            argv0, argv0, argv0);
}

/* "cck_bench: WHAT 'ARG'" and the usage, on standard error: exit status 2. */
static int usage_error(const char *what, const char *arg, const char *argv0) {
    ccai_fprintf_escaped(stderr, "cck_bench: %s '%s'\n", what, arg); /* arg: from the command line */
    usage(stderr, argv0);
    return 2;
}

int main(int argc, char **argv) {
    ccai_hold_std_fds(); /* a closed stdout's descriptor is not the CSV's */
    opts o = {.reps = 20, .cpu_reps = 5, .cpu_rows = 4096, .csv = "cck_bench.csv", .cpu = 1};
    const char *argv0 = argc > 0 ? argv[0] : "cck_bench";
    for (int i = 1; i < argc; i++) {
        unsigned long long v;
        int count = !strcmp(argv[i], "--reps") || !strcmp(argv[i], "--cpu-reps") || !strcmp(argv[i], "--cpu-rows");
        if ((count || !strcmp(argv[i], "--csv")) && i + 1 == argc) {
            ccai_fprintf_escaped(stderr, "cck_bench: option '%s' needs a value\n", argv[i]);
            usage(stderr, argv0);
            return 2;
        } else if (count) {
            /* counts: plain decimal (atoi took "5x" as 5 and "x" as 0); rows
             * at most 2^20, so that rows x cols of the host sweep fit */
            const char *opt = argv[i++];
            unsigned long long hi = !strcmp(opt, "--cpu-rows") ? 1ull << 20 : 1000000;
            if (ccai_decimal_uint(argv[i], 1, hi, &v)) {
                ccai_fprintf_escaped(stderr, "cck_bench: %s '%s' is not a count in 1..%llu\n", opt, argv[i], hi);
                return 2;
            }
            if (!strcmp(opt, "--reps"))
                o.reps = (int)v;
            else if (!strcmp(opt, "--cpu-reps"))
                o.cpu_reps = (int)v;
            else
                o.cpu_rows = (size_t)v;
        } else if (!strcmp(argv[i], "--csv")) {
            o.csv = argv[++i];
        } else if (!strcmp(argv[i], "--no-cpu")) {
            o.cpu = 0;
        } else if (!strcmp(argv[i], "--sweep")) {
            o.sweep = 1;
        } else if (!strcmp(argv[i], "--list-shapes")) {
            for (size_t c = 0; c < NSHAPES; c++)
                printf("%zux%zu\n", softmax_shapes[c][0], softmax_shapes[c][1]);
            return said_failed("standard output", write_failed(stdout, 1)); /* another program reads it */
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout, argv0);
            return said_failed("standard output", write_failed(stdout, 1));
        } else {
            return usage_error(argv[i][0] == '-' ? "unknown option" : "unexpected operand", argv[i], argv0);
        }
    }
    /* opened as it is (a FIFO nobody reads: refused, not waited for), the
     * file it reached checked, then emptied */
    int csv_fd = ccai_open_nowait(o.csv, CCAI_KEEP);
    if (csv_fd < 0)
        return said_failed(o.csv, ccai_open_strerror(errno)); /* 1 */
    const char *stream = ccai_std_stream_of(csv_fd);
    char why[96];
    struct stat csv_st;
    if (stream)
        snprintf(why, sizeof why, "it is the file standard %s goes to (refused: one would overwrite the other)",
                 stream);
    else if (fstat(csv_fd, &csv_st) == 0 && S_ISREG(csv_st.st_mode) && ftruncate(csv_fd, 0) != 0)
        snprintf(why, sizeof why, "%s", strerror(errno));
    else if (!(csv = fdopen(csv_fd, "w")))
        snprintf(why, sizeof why, "%s", strerror(errno));
    if (!csv) {
        close(csv_fd);
        return said_failed(o.csv, why); /* 1 */
    }
    fprintf(csv, "device,kind,op,version,rows,cols,batch,in,out,act,reps,median_ms,min_ms,max_ms,gbps,"
                 "frac_of_copy,gflops,overhead_pct\n");
    if (said_failed(o.csv, write_failed(csv, 0))) { /* before anything is timed */
        fclose(csv);
        return 1;
    }
    time_t now = time(NULL);
    char date[64];
    strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S UTC", gmtime(&now));
    printf("# cck_bench, %s\n\n", date);
    int rc = bench_gpu(&o);
    if (o.cpu) {
        bench_cpu(&o);
    }
    int lost = said_failed(o.csv, write_failed(csv, 1));
    if (!lost)
        printf("\nCSV: %s\n", o.csv);
    if (failures) {
        printf("%d configuration(s) failed their correctness check and were not timed\n", failures);
    }
    if (unmeasured) {
        printf("%d configuration(s) could not get their host memory and were not measured\n", unmeasured);
    }
    lost |= said_failed("standard output", write_failed(stdout, 1));
    return rc || failures || unmeasured || lost ? 1 : 0;
}
