/*
 * ccbench.h — the benchmark harness's internal interface: traces, trace
 * generators, strategies, replay, reports, the cached-path micro-benchmark
 * and the model-switch benchmark. One header for the one program (ccbench)
 * and its tests; nothing here is installed.
 *
 * Names: ccb_ prefix (bench), CCB_ for macros.
 */
#ifndef CCBENCH_H
#define CCBENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Traces (trace.c)                                                         */
/* ------------------------------------------------------------------------ */

/* The CSV format written by the allocator's recorder (allocator/src/trace.c,
 * CCALLOC_TRACE=path) and by `ccbench gen`:
 *     # ccalloc trace v1
 *     # any provenance comment
 *     seq,op,id,size,stream
 *     0,alloc,1,4096,0
 *     1,free,1,4096,0
 * In memory, ids become dense SLOTS numbered in the order of the allocs, so a
 * replay keeps its live pointers in a plain array. */

typedef enum ccb_op { CCB_ALLOC = 0, CCB_FREE = 1 } ccb_op;

typedef struct ccb_event {
    uint64_t size;  /* requested bytes (the same on the alloc and its free) */
    uint32_t slot;  /* 0..slots-1, assigned in alloc order                 */
    uint8_t op;     /* ccb_op                                              */
    uint8_t stream; /* 0 = default stream, 1.. = further streams            */
} ccb_event;

typedef struct ccb_trace {
    char name[64];
    ccb_event *ev;
    size_t n, cap;
    size_t slots;   /* number of allocs                                   */
    char *comments; /* provenance lines ("# " stripped), '\n'-separated */
    /* filled by ccb_trace_analyze */
    uint64_t allocs, frees;
    size_t peak_requested; /* max over time of the live requested bytes        */
    size_t peak_rounded;   /* same with sizes rounded up to CCA_GRANULARITY    */
    size_t peak_live;      /* max live blocks                                  */
    size_t final_live;     /* blocks never freed                               */
    size_t final_requested;
    size_t max_size;
    unsigned streams; /* highest stream number + 1                        */
} ccb_trace;

void ccb_trace_init(ccb_trace *t, const char *name);
void ccb_trace_free(ccb_trace *t);
/* Append an alloc; returns its slot. Append a free of a slot. Both abort only
 * on host OOM (the harness cannot continue without memory). */
uint32_t ccb_trace_alloc(ccb_trace *t, uint64_t size, unsigned stream);
void ccb_trace_release(ccb_trace *t, uint32_t slot);
void ccb_trace_comment(ccb_trace *t, const char *fmt, ...);

/* Read a trace file. Several sections (one per recording allocator, each
 * opened by a "seq,op,id,size,stream" line) are concatenated, ids being
 * local to a section. 0 on success; otherwise -1, a message naming the
 * line in err, and t emptied (nothing left to free). */
int ccb_trace_read(ccb_trace *t, FILE *f, char *err, size_t errlen);
int ccb_trace_load(ccb_trace *t, const char *path, char *err, size_t errlen);
/* Write in the recorder's format (one section, id = slot + 1). */
int ccb_trace_write(const ccb_trace *t, FILE *f);
int ccb_trace_save(const ccb_trace *t, const char *path);
/* Check pairing (every free names a live slot, sizes match) and fill the
 * derived fields. 0 or -1 with a message. */
int ccb_trace_analyze(ccb_trace *t, char *err, size_t errlen);

/* ------------------------------------------------------------------------ */
/* Generators (gen.c)                                                       */
/* ------------------------------------------------------------------------ */

typedef struct ccb_gen_params {
    uint64_t seed;
    double scale; /* 1.0 = the standard suite; smaller for tests */
} ccb_gen_params;

typedef struct ccb_generator {
    const char *name;
    const char *doc;
    void (*generate)(ccb_trace *t, const ccb_gen_params *p);
} ccb_generator;

extern const ccb_generator ccb_generators[];
extern const size_t ccb_generator_count;
const ccb_generator *ccb_generator_find(const char *name);
/* generate + comment + analyze; 0 or -1. */
int ccb_generate(const char *name, const ccb_gen_params *p, ccb_trace *t);

/* The PRNG every generator uses: splitmix64 seeding xoshiro256**. */
typedef struct ccb_rng {
    uint64_t s[4];
} ccb_rng;
void ccb_rng_seed(ccb_rng *r, uint64_t seed);
uint64_t ccb_rng_next(ccb_rng *r);
double ccb_rng_uniform(ccb_rng *r); /* [0, 1) */
double ccb_rng_normal(ccb_rng *r);  /* N(0, 1) */
uint64_t ccb_rng_below(ccb_rng *r, uint64_t n);

/* ------------------------------------------------------------------------ */
/* Strategies (strategy.c, strategy_cuda.cu / strategy_nocuda.c)             */
/* ------------------------------------------------------------------------ */

/* What a strategy can say about its memory; a field it cannot know is
 * CCB_UNKNOWN. */
#define CCB_UNKNOWN ((size_t)-1)

typedef struct ccb_mem {
    size_t allocated;                         /* bytes held by live blocks (the strategy's view) */
    size_t reserved;                          /* bytes held from the device                      */
    double fragmentation;                     /* ccalloc's definition; < 0 when unknown           */
    uint64_t upstream_allocs, upstream_frees; /* UINT64_MAX when unknown      */
    size_t requested_peak;                    /* the strategy's own count (ccalloc), else CCB_UNKNOWN */
} ccb_mem;

typedef struct ccb_strategy ccb_strategy;

typedef struct ccb_strategy_ops {
    const char *base; /* "ccalloc", "malloc", "cuda-malloc", ... */
    const char *doc;
    int gpu; /* needs a GPU */
    /* Open: 0 ok, 1 skipped (why says so), -1 error (why says so). */
    int (*open)(ccb_strategy *s, const char *config, size_t device_bytes, char *why, size_t whylen);
    /* 0 ok, 1 out of memory, -1 other error. size > 0. */
    int (*alloc)(ccb_strategy *s, size_t size, unsigned stream, void **ptr);
    void (*release)(ccb_strategy *s, void *ptr, size_t size, unsigned stream);
    void (*sample)(ccb_strategy *s, ccb_mem *m);
    /* Peaks since open. */
    void (*peaks)(ccb_strategy *s, size_t *allocated_peak, size_t *reserved_peak);
    void (*empty_cache)(ccb_strategy *s);
    /* Device free bytes (CCB_UNKNOWN when not meaningful). */
    size_t (*device_free)(ccb_strategy *s);
    void (*close)(ccb_strategy *s);
    /* Host-visible pointers (pattern checks are possible). */
    int host_pointers;
} ccb_strategy_ops;

struct ccb_strategy {
    const ccb_strategy_ops *ops;
    void *impl;
};

/* A named preset: base strategy + config string. */
typedef struct ccb_preset {
    const char *name;
    const char *base;
    const char *config;
    const char *doc;
} ccb_preset;

extern const ccb_preset ccb_presets[];
extern const size_t ccb_preset_count;
const ccb_strategy_ops *ccb_strategy_base(const char *base);
void ccb_strategy_list(FILE *f);
/* "preset" or "base" or "base=config" -> base ops and config. 0 or -1. */
int ccb_strategy_resolve(const char *spec, const ccb_strategy_ops **ops, const char **config, char *label,
                         size_t labellen);

/* Host strategies (strategy.c) and GPU strategies (strategy_cuda.cu). */
extern const ccb_strategy_ops ccb_strategy_ccalloc_host;
extern const ccb_strategy_ops ccb_strategy_malloc;
extern const ccb_strategy_ops ccb_strategy_ccalloc_cuda;
extern const ccb_strategy_ops ccb_strategy_cuda_malloc;
extern const ccb_strategy_ops ccb_strategy_cuda_async;
extern const ccb_strategy_ops ccb_strategy_cub;
/* "ok" or why GPU strategies cannot run here. */
const char *ccb_gpu_unavailable_reason(void);
/* Shared by the ccalloc strategies: create the allocator over upstream u
 * (taken over: destroyed on failure) with config on top of the defaults. */
struct cca_upstream;
int ccb_ccalloc_open_on(ccb_strategy *s, struct cca_upstream *u, const char *config, char *why, size_t whylen);
int ccb_ccalloc_cuda_open(ccb_strategy *s, const char *config, size_t device_bytes, char *why, size_t whylen);
/* The cudaStream_t for trace stream n (NULL for 0, and without CUDA). */
void *ccb_cuda_stream(unsigned n);

/* ------------------------------------------------------------------------ */
/* Replay (replay.c)                                                        */
/* ------------------------------------------------------------------------ */

typedef struct ccb_timeline_point {
    uint64_t op;
    size_t requested, allocated, reserved;
} ccb_timeline_point;

typedef struct ccb_result {
    char strategy[64];
    char config[128];
    char trace[64];
    int skipped;
    char why[160];
    uint64_t ops, allocs, frees, ooms;
    int reps;
    double median_ns, p99_ns, total_ms; /* per op; total = median over reps */
    double timer_ns;                    /* timer overhead subtracted        */
    size_t peak_requested, peak_allocated, peak_reserved;
    size_t strategy_requested_peak;           /* cca_stats.requested_bytes_peak, or CCB_UNKNOWN */
    double ratio;                             /* peak reserved / peak allocated    */
    double ratio_requested;                   /* peak reserved / peak requested    */
    double frag_at_peak;                      /* < 0 when unknown                  */
    uint64_t upstream_allocs, upstream_frees; /* UINT64_MAX when unknown    */
    size_t reserved_after_trace, reserved_after_empty;
    size_t device_free_before, device_free_after;
    int checked; /* pattern check ran and passed      */
    ccb_timeline_point *timeline;
    size_t timeline_n;
} ccb_result;

typedef struct ccb_replay_options {
    size_t device_bytes; /* capacity of the simulated device        */
    int reps;            /* timed passes (fresh strategy each)       */
    size_t timeline_points;
} ccb_replay_options;

/* Replay trace t through the strategy: one untimed OBSERVE pass (pattern
 * checks on host pointers, per-op sampling for the timeline and peaks,
 * release at the end) then `reps` TIMED passes. 0 ok / skipped, -1 error. */
int ccb_replay(const ccb_trace *t, const char *spec, const ccb_replay_options *o, ccb_result *r);
void ccb_result_free(ccb_result *r);

/* Measured cost of reading ccb_now_ns() (median of back-to-back reads). */
double ccb_timer_overhead_ns(void);
/* Sort and pick: q in [0,1] (nearest rank). Sorts v in place. */
double ccb_quantile(double *v, size_t n, double q);

/* ------------------------------------------------------------------------ */
/* Reports (report.c)                                                       */
/* ------------------------------------------------------------------------ */

void ccb_format_bytes(size_t b, char *buf, size_t len);
/* One CSV field, quoted (quotes doubled) only when it holds a comma, quote or
 * line break, so plain names stay as they were. No separator written. */
void ccb_csv_field(FILE *f, const char *s);
void ccb_write_results_md(FILE *f, const ccb_result *r, size_t n);
void ccb_write_results_csv(FILE *f, const ccb_result *r, size_t n);
int ccb_write_timeline_csv(const char *path, const ccb_result *r);
/* Write the machine description (uname -a, CPU model, date) as markdown. */
void ccb_write_machine_md(FILE *f);
/* Run gnuplot on scripts/<script> with arguments; 0 ok, 1 gnuplot missing. */
int ccb_gnuplot(const char *script_dir, const char *script, const char *const *args, size_t nargs);
const char *ccb_default_script_dir(void);

/* ------------------------------------------------------------------------ */
/* Micro-benchmark (micro.c) and model switching (switch.c)                 */
/* ------------------------------------------------------------------------ */

typedef struct ccb_micro_row {
    char strategy[64];
    size_t live;
    int holes; /* 0 packed: live blocks only; 1: live blocks with free holes between */
    size_t pairs;
    double median_ns, p99_ns, mean_ns;
    int skipped;
    char why[160];
} ccb_micro_row;

int ccb_micro(const char *const *specs, size_t nspecs, const size_t *lives, size_t nlives, size_t pairs,
              ccb_micro_row **rows, size_t *nrows);
void ccb_micro_write_md(FILE *f, const ccb_micro_row *r, size_t n, double timer_ns);
void ccb_micro_write_csv(FILE *f, const ccb_micro_row *r, size_t n);

int ccb_switch_main(int argc, char **argv);

#ifdef __cplusplus
}
#endif

/* Nanosecond monotonic clock (vDSO clock_gettime: ~20 ns with a TSC clock). */
static inline uint64_t ccb_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif /* CCBENCH_H */
