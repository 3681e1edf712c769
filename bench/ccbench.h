/*
 * ccbench.h — the benchmark harness's internal interface: traces, trace
 * generators, strategies, replay, the cached-path micro-benchmark, reports,
 * and the command line with its sub-commands (the model-switch benchmark
 * among them). One header for the one program (ccbench) and its tests;
 * nothing here is installed.
 *
 * Names: ccb_ prefix (bench), CCB_ for macros.
 */
#ifndef CCBENCH_H
#define CCBENCH_H

#include "ccai_trace_limits.h" /* common/: the limits shared with the recorder */

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

/* The CSV format written by the allocator's recorder (allocator/src/observe/trace.c,
 * CCALLOC_TRACE=path), by `ccbench gen` and by bench/scripts/record_torch.py
 * (docs/benchmarks.md#trace-format):
 *     # ccalloc trace v3
 *     # any provenance comment
 *     seq,op,id,size,stream,domain,name
 *     0,domain,0,0,0,1,resnet50         <- a memory domain: numbered 1, 2, .. in order
 *     1,alloc,1,4096,0,1                   (0 = the default domain, never declared)
 *     2,free,1,4096,0,1                 <- a free names its alloc's domain again
 *     3,mark,0,0,0,0,load:resnet50      <- a phase name: marks and domains have one
 *     4,empty_cache,0,0,0,0             <- the program released its cache
 *     5,trim,0,1048576,0,0              <- ... down to `size` bytes
 *     6,domain_reserve,0,8388608,0,1    <- footprint: reserve `size` bytes for the domain
 *     7,domain_release,0,0,0,1          <- the domain's memory back (none of its blocks live)
 * v1 (header "seq,op,id,size,stream": alloc and free) and v2 (",name": no
 * domain column, no domain events) sections still read. Files may be
 * gzip-compressed (read through zlib whatever their name).
 * In memory, ids become dense SLOTS numbered in the order of the allocs, so a
 * replay keeps its live pointers in a plain array; domains are numbered
 * across the whole file (sections renumber theirs from 1). */

typedef enum ccb_op {
    CCB_ALLOC = 0,
    CCB_FREE = 1,
    CCB_MARK = 2,
    CCB_EMPTY_CACHE = 3,
    CCB_TRIM = 4,
    CCB_DOMAIN_RELEASE = 5, /* a release event, like empty_cache and trim */
    CCB_DOMAIN = 6,         /* a domain's declaration (its name)          */
    CCB_DOMAIN_RESERVE = 7, /* size = bytes                               */
} ccb_op;
#define CCB_OP_COUNT 8

/* A checkpoint (ccb_checkpoint) is taken at a mark and after each release event. */
static inline int ccb_op_is_checkpoint(unsigned op) {
    return op == CCB_MARK || op == CCB_EMPTY_CACHE || op == CCB_TRIM || op == CCB_DOMAIN_RELEASE;
}

/* The recorder's limits are the reader's (common/ccai_trace_limits.h). */
#define CCB_MARK_MAX 63                   /* characters in a mark's name        */
#define CCB_DOMAIN_NAME_MAX 63            /* ... in a domain's (as CCA_DOMAIN_NAME_MAX) */
#define CCB_MAX_DOMAINS (CCAI_TRACE_MAX_DOMAINS + 1) /* domains in one trace, the default one included */
#define CCB_SIZE_MAX ((uint64_t)CCAI_TRACE_MAX_SIZE) /* largest size a trace may hold */
#define CCB_SIZE_FILL UINT64_MAX         /* a free's size to be taken from its alloc (analysis) */

typedef struct ccb_event {
    uint64_t size;   /* alloc/free: requested bytes (the same on both); trim: bytes to keep;
                        domain_reserve: bytes; CCB_SIZE_FILL: a free appended by
                        ccb_trace_release, whose size and stream analysis copies from the alloc */
    uint32_t slot;   /* alloc/free: 0..slots-1 in alloc order; mark: index into marks     */
    uint8_t op;      /* ccb_op                                                          */
    uint8_t stream;  /* 0 = default stream, 1.. = further streams                        */
    uint16_t domain; /* 0 = default domain, 1..ndomains-1 (alloc, free, domain events)   */
} ccb_event;

typedef struct ccb_domain_info {
    char name[CCB_DOMAIN_NAME_MAX + 1]; /* "default" for domain 0 */
    /* filled by ccb_trace_analyze */
    uint64_t allocs, releases, reserves;
    size_t peak_requested; /* the domain's own peak of live requested bytes */
} ccb_domain_info;

typedef struct ccb_trace {
    char name[64]; /* a file's name less .csv or .csv.gz, or a generator's: its first 63 bytes
                      at most, cut between UTF-8 characters (ccai_utf8_head) */
    ccb_event *ev;
    size_t n, cap;
    size_t slots;                    /* number of allocs                          */
    char (*marks)[CCB_MARK_MAX + 1]; /* names of the mark events                  */
    size_t nmarks, capmarks;
    ccb_domain_info *domains; /* [0] = the default domain; NULL until the first ccb_trace_domain */
    size_t ndomains, capdomains;
    char *comments; /* provenance lines ("# " stripped), '\n'-separated */
    size_t comments_len, comments_cap;
    struct ccb_budget *budget; /* while ccb_trace_load reads it: what the load may hold; else NULL */
    /* filled by ccb_trace_analyze */
    uint64_t allocs, frees;
    uint64_t releases;        /* empty_cache + trim events                         */
    uint64_t domain_releases; /* domain_release events                             */
    size_t peak_requested; /* max over time of the live requested bytes: the LOWER BOUND */
    size_t peak_rounded;   /* same with sizes rounded up to CCA_GRANULARITY    */
    size_t ideal_peak;     /* single best-fit arena (ideal.c)                   */
    size_t peak_live;      /* max live blocks                                  */
    size_t final_live;     /* blocks never freed                               */
    size_t final_requested;
    size_t max_size;
    unsigned streams; /* highest stream number + 1                        */
} ccb_trace;

void ccb_trace_init(ccb_trace *t, const char *name);
void ccb_trace_free(ccb_trace *t);
/* Append an alloc; returns its slot. Append a free of a slot (size and stream
 * are taken from the alloc by ccb_trace_analyze). Append a mark (name checked
 * by ccb_mark_name_ok: -1 if bad), an empty-cache, a trim. All abort only on
 * host OOM (the harness cannot continue without memory). */
uint32_t ccb_trace_alloc(ccb_trace *t, uint64_t size, unsigned stream);
void ccb_trace_release(ccb_trace *t, uint32_t slot);
/* Domains: declare one (name checked by ccb_domain_name_ok; returns its
 * number 1.., or -1 for a bad name or more than CCB_MAX_DOMAINS - 1), append
 * an alloc into a declared domain (its free names the same domain), a
 * domain's release and a footprint reservation (-1: domain not declared). */
int ccb_trace_domain(ccb_trace *t, const char *name);
uint32_t ccb_trace_alloc_in(ccb_trace *t, uint64_t size, unsigned stream, unsigned domain);
int ccb_trace_domain_release(ccb_trace *t, unsigned domain);
int ccb_trace_domain_reserve(ccb_trace *t, unsigned domain, uint64_t bytes);
/* 1..CCB_DOMAIN_NAME_MAX printable ASCII characters but ',', '"' and '\\'
 * (cca_domain_create's rule). */
int ccb_domain_name_ok(const char *name);
/* "default" for 0, the declared name, "?" out of range. */
const char *ccb_domain_name(const ccb_trace *t, unsigned domain);
int ccb_trace_mark(ccb_trace *t, const char *name);
void ccb_trace_empty_cache(ccb_trace *t);
void ccb_trace_trim(ccb_trace *t, uint64_t keep);
void ccb_trace_comment(ccb_trace *t, const char *fmt, ...);
/* 1..CCB_MARK_MAX characters, each printable ASCII (0x20..0x7e) but ',' and '"'. */
int ccb_mark_name_ok(const char *name);
const char *ccb_op_name(unsigned op);

/* Read a trace. Several sections (each opened by a column header line) are
 * concatenated, ids and domain numbers being local to a section. Fields are
 * parsed strictly: v1 and v2 exactly 5 (6 for a mark, v2 only), v3 exactly 6
 * (7 for a mark or a domain declaration), none empty, decimal numbers
 * without sign. 0 on success; otherwise -1, a message naming the line in
 * err, and t emptied (nothing left to free). */
int ccb_trace_read(ccb_trace *t, FILE *f, char *err, size_t errlen);
/* Load a file, plain or gzip-compressed. CCB_TRACE_MAX_BYTES caps both the
 * text once decompressed and the host memory the load holds at any moment
 * (the stream's buffers, the events, names, the reader's id table and
 * per-slot arrays, the analysis and the ideal arena; a growing array with
 * its copy: budget.c): a trace over either is refused, naming the line (or
 * the analysis) where it went over. The name is the file's base name without
 * .csv / .csv.gz. A FIFO no process holds for writing, or a directory, is
 * refused at once (a pipe with a writer is read, waiting for it).
 * ccb_trace_load_capped: the same with another cap (tests). */
#define CCB_TRACE_MAX_BYTES ((size_t)1 << 30)
#define CCB_LINE_MAX 4096 /* bytes in one line, its line end included */
/* A row's reason (why) or a check's: the library's whole message (at most
 * 1023 characters, cca_set_error) after ccbench's own words before it
 * ("host upstream: CCA_ERR_...: "), so that no refusal reaches the user cut. */
#define CCB_WHY_MAX 1536
int ccb_trace_load(ccb_trace *t, const char *path, char *err, size_t errlen);
int ccb_trace_load_capped(ccb_trace *t, const char *path, size_t max_bytes, char *err, size_t errlen);

/* What a load may hold (budget.c): bytes held now and at most, against a
 * cap. Growing an array counts its old and new block both (realloc may
 * copy); a request that does not fit sets `over` (host OOM within the cap:
 * `oom`) and is not made, and the load fails. */
typedef struct ccb_budget {
    size_t cap, held, peak;
    int over, oom;
} ccb_budget;
/* The capacity (elements of elem bytes) to grow an array of `cap` to, for
 * `need`: doubled (`first` from 0), or less where b allows no more; 0 when
 * even need does not fit (b->over set). b NULL: unbounded. */
size_t ccb_grow_to(ccb_budget *b, size_t cap, size_t elem, size_t need, size_t first);
/* realloc p to ccb_grow_to's capacity, counted in b; the new block and
 * *cap updated, or NULL with p and *cap untouched (b->over or b->oom set).
 * b NULL: host OOM aborts (the harness cannot go on: generators). */
void *ccb_grow(ccb_budget *b, void *p, size_t *cap, size_t elem, size_t need, size_t first);
/* Count a block allocated whole before allocating it (0, or -1 and b->over
 * when it does not fit), and give it back when it is freed. b NULL: nothing. */
int ccb_budget_take(ccb_budget *b, size_t bytes);
void ccb_budget_give(ccb_budget *b, size_t bytes);
/* Write in format v3 (one section, id = slot + 1); -1 on a write error
 * (ferror: what is still buffered is checked where f is closed). */
int ccb_trace_write(const ccb_trace *t, FILE *f);
/* Check pairing (every free names a live slot, sizes match), that no running
 * sum overflows, and fill the derived fields. 0 or -1 with a message. */
int ccb_trace_analyze(ccb_trace *t, char *err, size_t errlen);
/* The ideal arena's peak (ideal.c); CCB_UNKNOWN on host OOM. */
size_t ccb_ideal_arena_peak(const ccb_trace *t);

/* ------------------------------------------------------------------------ */
/* Generators (gen.c)                                                       */
/* ------------------------------------------------------------------------ */

typedef struct ccb_gen_params {
    uint64_t seed;
    double scale; /* 1.0 = the standard suite; smaller for tests; (0, CCB_GEN_MAX_SCALE] */
} ccb_gen_params;

/* Generators build the whole trace in memory (16 bytes an event), so a
 * generated trace is bounded by its event count: at most CCB_GEN_MAX_EVENTS
 * (~128 MB of events). Counts grow at most linearly with the scale and the
 * largest generator, models, has 73,944 events at scale 1, so the bound
 * allows scale 100 (~7.4M events); ccb_generate refuses a larger scale before
 * generating, and so does --scale. tests/bench/test_bench.c checks every generator
 * against the bound. */
#define CCB_GEN_MAX_EVENTS 8000000.0
#define CCB_GEN_MAX_SCALE 100.0

typedef struct ccb_generator {
    const char *name;
    const char *doc;
    void (*generate)(ccb_trace *t, const ccb_gen_params *p);
} ccb_generator;

extern const ccb_generator ccb_generators[];
extern const size_t ccb_generator_count;
const ccb_generator *ccb_generator_find(const char *name);
/* generate + comment + analyze; 0, or -1 for an unknown name, a scale out of
 * (0, CCB_GEN_MAX_SCALE] (t untouched then) or a bad trace. Every generator
 * draws from the project's one PRNG, xoshiro256** (common/ccai_rng.h). */
int ccb_generate(const char *name, const ccb_gen_params *p, ccb_trace *t);

/* ------------------------------------------------------------------------ */
/* Strategies (strategy.c names them; strategy_*.c, strategy_cuda.cu)      */
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

/* The device a host strategy runs on: the simulated device's capacity and
 * the driver's cost it charges per upstream call, and per physical
 * allocation a virtual-memory map makes or an unmap gives back (a map
 * whatever its size with whole-maps backing, the default, or a page with
 * pages backing; 0 = bookkeeping alone).
 * GPU strategies ignore it: their device and driver are real. */
typedef struct ccb_device {
    size_t bytes;
    uint64_t alloc_latency_ns, free_latency_ns;
    uint64_t map_granule_ns, unmap_granule_ns;
    /* --vm-granularity: the page of virtual-memory maps, on the simulated
     * device and (the one thing GPU strategies take from here) on the CUDA
     * upstream of ccalloc-cuda; 0: each device's default */
    size_t vm_granularity;
    /* --vm-backing: cca_host_options.vm_backing of the simulated device and
     * cca_cuda_options.vm_backing of ccalloc-cuda's upstream
     * (CCA_VM_WHOLE_MAPS, 0: the default, or CCA_VM_PAGES) */
    int vm_backing;
    /* --vm-call-latency: a vm_map's / vm_unmap's own cost per call, in place
     * of the device alloc's / free's (0: as those) */
    uint64_t map_call_ns, unmap_call_ns;
} ccb_device;

/* The driver cost model's defaults: 70 us per cudaMalloc + cudaFree pair, the
 * middle of the 66-76 us published for real GPUs, split evenly. Replaced by
 * measured figures where `ccbench driver` ran on a GPU (docs/benchmarks.md). */
#define CCB_DEFAULT_ALLOC_LATENCY_NS 35000u
#define CCB_DEFAULT_FREE_LATENCY_NS 35000u
/* Per physical allocation mapped and unmapped by the vm ops (a page; a
 * whole map with CCA_VM_WHOLE_MAPS), on top of the call's own alloc / free
 * latency, in proportion to that pair: measured on two H100 machines
 * (bench/results/2026-11-24-h100, `ccbench driver`), an allocation's map
 * cost 0.49-0.54 and its unmap 0.42-0.46 of the same machine's 2 MiB
 * cudaMalloc + cudaFree pair (31 and 26 us against 58 us on one, 45-47 and
 * 39-42 against 92 us on the other, allocations of 2 to 32 MiB alike but
 * the unmap of 32 MiB ones, 58 us): 36 and 30 us of the default 70 us
 * pair. docs/benchmarks.md, "The driver-cost model", says what this model
 * does not match. */
#define CCB_DEFAULT_MAP_GRANULE_NS 36000u
/* A vm_map / vm_unmap call's own part, beside its physical allocations: the
 * one-allocation time less the per-allocation slope up to 1 GiB, on the
 * same two H100s (bench/results/2026-11-24-h100, sessions 2 and 3): a map
 * 0.18-0.25 of the machine's 2 MiB cudaMalloc + cudaFree pair, an unmap
 * 0.02-0.09; the middles, 0.21 and 0.05 of the model's 70 us pair. */
#define CCB_DEFAULT_MAP_CALL_NS 15000u
#define CCB_DEFAULT_UNMAP_CALL_NS 4000u
#define CCB_DEFAULT_UNMAP_GRANULE_NS 30000u

typedef struct ccb_strategy_ops {
    const char *base; /* "ccalloc", "malloc", "cuda-malloc", ... */
    const char *doc;
    int gpu; /* needs a GPU */
    /* Open: 0 ok, 1 skipped (why says so), -1 error (why says so). */
    int (*open)(ccb_strategy *s, const char *config, const ccb_device *dev, char *why, size_t whylen);
    /* 0 ok, 1 out of memory, -1 other error. size 0 may give *ptr == NULL
     * (every device strategy does: no memory, no driver call). */
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
    /* Release cached memory down to `keep` bytes, the strategy's own way (a
     * trace's trim event); empty_cache is a trace's empty_cache event. */
    void (*trim)(ccb_strategy *s, size_t keep);
    /* How the "with driver" time is obtained: CCB_DRIVER_MODEL (simulated
     * device with latencies), CCB_DRIVER_REAL (GPU: the times already are),
     * CCB_DRIVER_NONE (no device: the malloc floor). */
    int driver;
    /* Memory domains (optional, all four or none, last so that
     * positional initializers of the others stay valid; a strategy without them
     * serves every alloc from its one pool and ignores domain events):
     * declare trace domain n (1.., in order) named `name`; alloc into it; the
     * domain's release and footprint reservation (failures are the
     * strategy's business, never fatal to the replay). */
    void (*domain_open)(ccb_strategy *s, unsigned n, const char *name);
    int (*alloc_in)(ccb_strategy *s, unsigned domain, size_t size, unsigned stream, void **ptr);
    void (*domain_release)(ccb_strategy *s, unsigned domain);
    void (*domain_reserve)(ccb_strategy *s, unsigned domain, size_t bytes);
    /* The config alone, before anything runs (cli.c: a refused one is a
     * usage error): 0, or -1 and why. What needs the device is left to
     * open. NULL: open checks it all. */
    int (*check)(const char *config, char *why, size_t whylen);
} ccb_strategy_ops;

enum { CCB_DRIVER_NONE = 0, CCB_DRIVER_MODEL = 1, CCB_DRIVER_REAL = 2 };

struct ccb_strategy {
    const ccb_strategy_ops *ops;
    void *impl;
    /* The device's free bytes before the strategy took anything from it,
     * measured by open where the strategy takes memory at open (a greedy
     * arena); CCB_UNKNOWN (set before open) otherwise: the replay then takes
     * the free bytes after open plus what the strategy reserved there, which
     * misses the device's own rounding of that reservation. */
    size_t device_free_at_open;
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

/* The bases: strategy_ccalloc.c, strategy_baselines.c, and the GPU ones in
 * strategy_cuda.cu (strategy_nocuda.c without the toolkit). */
extern const ccb_strategy_ops ccb_strategy_ccalloc_host;
extern const ccb_strategy_ops ccb_strategy_malloc;
extern const ccb_strategy_ops ccb_strategy_device_malloc;
extern const ccb_strategy_ops ccb_strategy_ccalloc_cuda;
extern const ccb_strategy_ops ccb_strategy_cuda_malloc;
extern const ccb_strategy_ops ccb_strategy_cuda_async;
extern const ccb_strategy_ops ccb_strategy_cub;
/* The driver's real cost on a GPU: cudaMalloc and cudaFree of `size` bytes
 * timed alone, `reps` pairs (`ccbench driver`). 0 ok, 1 skipped (no GPU: why
 * says so), -1 error. */
typedef struct ccb_driver_row {
    size_t size;
    int reps;
    double alloc_median_us, alloc_p99_us, free_median_us, free_p99_us;
    double pair_median_us; /* the median of each pair's cudaMalloc + cudaFree (not the sum of the two medians) */
} ccb_driver_row;
int ccb_driver_measure(size_t size, int reps, ccb_driver_row *row, char *why, size_t whylen);

/* Pinned host memory made the other way (issue 42: what a sleep's host copy
 * could cost instead of cudaMallocHost): for each of lens[0..n), an
 * anonymous mmap of its length rounded up to 2 MiB and aligned to 2 MiB,
 * madvise MADV_HUGEPAGE, every page faulted in (MADV_POPULATE_WRITE, or a
 * write per 4 KiB where the kernel lacks it), then cudaHostRegister; the
 * whole timed (*ms); then cudaHostUnregister and munmap, not timed.
 * 0 measured, 1 not here (why: no GPU, or built without CUDA), -1 a call
 * failed (why says which; what was made is given back). */
int ccb_host_register_ms(const size_t *lens, size_t n, double *ms, char *why, size_t whylen);

/* driver_vm.c: an upstream's vm_map and vm_unmap of granules[i] granules,
 * `reps` pairs each, every call timed alone (`ccbench driver` on the CUDA
 * upstream). A size whose vm_map the device refuses as out of memory is a
 * row with unfit set (why says so, reps 0), not an error: the next sizes
 * are measured. 0 ok, 1 skipped (the upstream has no virtual memory: why
 * says so), -1 error (why says which call failed). */
struct cca_upstream;
typedef struct ccb_driver_vm_row {
    size_t granules, bytes;
    int reps; /* 0: nothing timed (unfit) */
    double map_median_us, map_p99_us, unmap_median_us, unmap_p99_us;
    int unfit; /* the device cannot hold the size (why says so): not a failure */
    char why[CCB_WHY_MAX];
} ccb_driver_vm_row;
int ccb_driver_vm_measure(struct cca_upstream *u, const size_t *granules, size_t n, int reps, ccb_driver_vm_row *rows,
                          char *why, size_t whylen);
/* The sizes[] (bytes, ascending) in u's granules, written to granules[]: a
 * size rounded down to whole granules, one granule at least, a count equal
 * to the one before it dropped. Returns how many (0: u has no vm ops);
 * *granule_bytes: the granule (0 without vm ops). */
size_t ccb_driver_vm_granules(struct cca_upstream *u, const size_t *sizes, size_t n, size_t *granules,
                              size_t *granule_bytes);
/* One map + unmap of each of sizes[] (bytes, ascending, at most
 * CCB_DRIVER_MAX_SIZES) on u, an upstream whose maps are whole
 * (cca_upstream_vm_backing CCA_VM_WHOLE_MAPS): each map one physical
 * allocation. Rows as ccb_driver_vm_measure's, one per size in granules
 * (ccb_driver_vm_granules), *nrows of them. 0 ok, 1 skipped (no vm ops),
 * -1 error: an upstream whose maps are pages (nothing called), or as
 * ccb_driver_vm_measure. */
#define CCB_DRIVER_MAX_SIZES 16
int ccb_driver_vm_whole_maps(struct cca_upstream *u, const size_t *sizes, size_t n, int reps, ccb_driver_vm_row *rows,
                             size_t *nrows, char *why, size_t whylen);
/* "ok" or why GPU strategies cannot run here. */
const char *ccb_gpu_unavailable_reason(void);
/* Shared by the ccalloc strategies (strategy_ccalloc.c): create the allocator
 * over upstream u (taken over: destroyed on failure) with config on top of
 * the defaults. */
int ccb_ccalloc_open_on(ccb_strategy *s, struct cca_upstream *u, const char *config, char *why, size_t whylen);
/* The simulated device dev describes (strategy_baselines.c): 0, or -1 with
 * why naming the upstream's refusal. */
int ccb_simulated_device_open(const ccb_device *dev, struct cca_upstream **u, char *why, size_t whylen);
/* ccalloc-cuda's upstream, device 0 with dev's page and backing
 * (strategy_cuda.cu / strategy_nocuda.c): 0 ok, 1 skipped (no GPU: why
 * says so), -1 error. */
int ccb_cuda_upstream_open(const ccb_device *dev, struct cca_upstream **u, char *why, size_t whylen);
/* The cudaStream_t for trace stream n (NULL for 0, and without CUDA). */
void *ccb_cuda_stream(unsigned n);
/* The configs of the GPU strategies, read before any device call
 * (strategy_configs.c, so that they are checked and tested without a GPU). Values
 * are plain decimal (ccai_decimal_uint, common/ccai_decimal.h); 0 ok, -1 with why naming the value.
 *  - cuda-async: "" (threshold 0), "release_threshold:max" (UINT64_MAX) or
 *    "release_threshold:N";
 *  - cub: "key:N,..." with keys bin_growth (2..2^32-1: cub's bin search
 *    multiplies by it until it passes the request, which 1 never does, and
 *    0 puts every request past the last bin),
 *    min_bin and max_bin (min_bin <= max_bin, and bin_growth^max_bin
 *    within 64 bits: cub computes the bin sizes as that power) and
 *    max_cached (bytes); unset keys keep cub's defaults as ccbench uses them
 *    (8, 3, 7, 6 MiB - 1). */
typedef struct ccb_cub_config {
    unsigned bin_growth, min_bin, max_bin;
    unsigned long long max_cached;
} ccb_cub_config;
int ccb_async_config_parse(const char *config, unsigned long long *threshold, char *why, size_t whylen);
int ccb_cub_config_parse(const char *config, ccb_cub_config *c, char *why, size_t whylen);
/* The strategies' `check` ops (strategy_configs.c): no config at all; cuda-async's
 * and cub's grammars. */
int ccb_no_config_check(const char *config, char *why, size_t whylen);
int ccb_async_config_check(const char *config, char *why, size_t whylen);
int ccb_cub_config_check(const char *config, char *why, size_t whylen);

/* ------------------------------------------------------------------------ */
/* Replay (replay.c)                                                        */
/* ------------------------------------------------------------------------ */

typedef struct ccb_timeline_point {
    uint64_t op;
    size_t requested, allocated, reserved;
} ccb_timeline_point;

/* The state at a trace's mark or right after one of its release events. */
typedef struct ccb_checkpoint {
    uint64_t event;    /* index in the trace                          */
    uint8_t op;        /* CCB_MARK, CCB_EMPTY_CACHE, CCB_TRIM or CCB_DOMAIN_RELEASE */
    uint32_t mark;     /* mark index (CCB_MARK), domain (CCB_DOMAIN_RELEASE) */
    uint64_t keep;     /* CCB_TRIM                                     */
    size_t requested;  /* live requested bytes (the trace's, exact)    */
    size_t allocated;  /* the strategy's view; CCB_UNKNOWN if unknown  */
    size_t reserved;   /* held from the device; CCB_UNKNOWN if unknown */
    size_t returned;   /* a release event: reserved just before minus just
                          after (what it gave back); 0 at a mark; CCB_UNKNOWN */
} ccb_checkpoint;

typedef struct ccb_result {
    char strategy[64];
    char config[128];
    char trace[64];
    int skipped;
    int failed; /* ccb_replay returned -1 (why says why): the row says so, and no figure of it is reported */
    char why[CCB_WHY_MAX];
    uint64_t ops, allocs, frees, ooms;
    int reps;
    /* times: bookkeeping alone (host strategies on a device without driver
     * costs; GPU strategies with their real driver, the only way there) */
    double median_ns, p99_ns, total_ms; /* per alloc/free op; total = median over reps, release events included */
    double timer_ns;                    /* timer overhead subtracted        */
    /* with the driver's cost: the same passes on a device charging
     * alloc/free latencies (CCB_DRIVER_MODEL), the times above for a GPU
     * (CCB_DRIVER_REAL), NAN for the malloc floor */
    double driver_total_ms, driver_median_ns;
    int driver;
    size_t lower_bound;                 /* the trace's peak live requested bytes */
    size_t ideal_peak;                  /* the trace's ideal arena (ideal.c)     */
    size_t peak_requested, peak_allocated, peak_reserved;
    size_t strategy_requested_peak;           /* cca_stats.requested_bytes_peak, or CCB_UNKNOWN */
    double ratio;                             /* peak reserved / peak allocated    */
    double ratio_requested;                   /* peak reserved / lower bound (NAN with OOMs) */
    double ratio_ideal;                       /* peak reserved / ideal arena (NAN with OOMs) */
    double frag_at_peak;                      /* < 0 when unknown                  */
    uint64_t upstream_allocs, upstream_frees; /* UINT64_MAX when unknown    */
    size_t reserved_after_trace, reserved_after_empty;
    size_t device_free_before, device_free_after;
    int checked; /* pattern check ran and passed      */
    ccb_timeline_point *timeline;
    size_t timeline_n;
    ccb_checkpoint *checkpoints; /* one per mark and release event, in order */
    size_t checkpoints_n;
    /* --iterations N (ccb_replay_options.iterations): with N > 1 every
     * figure above is the whole run's (the trace N times back to back in one
     * strategy: see ccb_replay), and these say the first iteration and the
     * later ones (2..N together) apart; iterations.c writes them. */
    int iterations;                                       /* N; 1: the fields below are not reported */
    size_t first_peak_reserved, later_peak_reserved;      /* CCB_UNKNOWN when unknown */
    uint64_t first_upstream_allocs, first_upstream_frees; /* UINT64_MAX when unknown */
    uint64_t later_upstream_allocs, later_upstream_frees;
    double first_total_ms, later_total_ms;               /* bookkeeping alone: medians over the timed passes */
    double first_driver_total_ms, later_driver_total_ms; /* with the driver's cost, as driver_total_ms */
} ccb_result;

typedef struct ccb_replay_options {
    size_t device_bytes; /* capacity of the simulated device        */
    int reps;            /* timed passes (fresh strategy each)       */
    size_t timeline_points;
    /* driver cost charged in the "with driver" passes of host strategies;
     * all four 0: no such pass (driver_total_ms NAN) */
    uint64_t alloc_latency_ns, free_latency_ns;
    int driver_reps;     /* passes with the driver's cost (0: reps) */
    int ignore_releases; /* replay as if the program never released (marks still reported) */
    uint64_t map_granule_ns, unmap_granule_ns; /* per physical allocation of a vm map / unmap */
    size_t vm_granularity;                     /* --vm-granularity (0: the device's default) */
    int vm_backing;                            /* --vm-backing (CCA_VM_WHOLE_MAPS, 0: the default) */
    int iterations; /* --iterations: the trace replayed this many times in one strategy (0: 1) */
    uint64_t map_call_ns, unmap_call_ns; /* --vm-call-latency: per vm_map / vm_unmap call (0: as alloc / free) */
} ccb_replay_options;

/* --iterations: at most this many (every timed pass keeps a latency per
 * event of every iteration, pooled for the median). */
#define CCB_MAX_ITERATIONS 100

/* Replay trace t through the strategy: one untimed OBSERVE pass (pattern
 * checks on host pointers, per-op sampling for the timeline and peaks, the
 * checkpoints, release at the end), `reps` TIMED passes of bookkeeping, and
 * `driver_reps` timed passes with the driver's cost. Release events call the
 * strategy's empty_cache / trim. 0 ok / skipped, -1 error.
 * With o->iterations N > 1 each pass replays the trace N times back to back
 * in one strategy: iteration k > 1 first frees the blocks iteration k - 1
 * left live (timed as frees), then replays every event again (a domain is
 * declared once, in the first iteration); nothing else happens between
 * iterations (no empty-cache, no trim). */
int ccb_replay(const ccb_trace *t, const char *spec, const ccb_replay_options *o, ccb_result *r);
/* t must have passed ccb_trace_analyze; a trace whose events name slots or
 * marks out of range is refused (-1) before anything runs. */
/* The observe pass's block tags: first byte = tag, last = ~tag (one byte for
 * size 1, none for 0); ccb_tag_ok is 1 when they are intact. */
void ccb_tag_block(void *p, size_t size, uint32_t slot);
int ccb_tag_ok(const void *p, size_t size, uint32_t slot);
void ccb_result_free(ccb_result *r);

/* clock.c: the clock for one call's latency. ccb_clock_init chooses and
 * calibrates it (once; call it before ccb_ticks). Ticks are TSC counts where
 * the TSC is invariant and cheaper to read, else clock_gettime ns;
 * ccb_ticks_ns(from, to) is the interval in ns (signed: small negative
 * values are possible across cores). ccb_timer_overhead_ns: the median cost
 * of one read; ccb_clock_name: which clock, in words. */
void ccb_clock_init(void);
uint64_t ccb_ticks(void);
double ccb_ticks_ns(uint64_t from, uint64_t to);
double ccb_timer_overhead_ns(void);
const char *ccb_clock_name(void);
/* Sort and pick: q in [0,1] (nearest rank). Sorts v in place. */
double ccb_quantile(double *v, size_t n, double q);

/* ------------------------------------------------------------------------ */
/* Micro-benchmark (micro.c)                                                */
/* ------------------------------------------------------------------------ */

typedef struct ccb_micro_row {
    char strategy[64];
    size_t live;
    int holes; /* 0 packed: live blocks only; 1: live blocks with free holes between */
    size_t pairs;
    unsigned streams; /* the pairs take streams 0..streams-1 in turn (--streams) */
    double median_ns, p99_ns, mean_ns;
    int skipped;
    int unfit; /* the device cannot hold the cell's blocks (why says so): not a failure */
    char why[CCB_WHY_MAX];
} ccb_micro_row;

/* 1 when `nheld` blocks of `need` bytes in all are more than a device with
 * `room` bytes free can hold (room CCB_UNKNOWN: never), why saying so; a GPU
 * of 80 GB cannot hold the 100k-block cells (mean ~0.8 MiB a block), and
 * such a cell is reported, not failed. */
int ccb_micro_unfit(size_t nheld, size_t need, size_t room, char *why, size_t whylen);

/* The live-block table when --live is not given: 10, 1k, 10k, 100k; --quick
 * runs the first CCB_MICRO_QUICK_NLIVES (up to 1k: the sanitizer stage
 * checks every invariant after each call, O(blocks), so a 10k cell there is
 * quadratic and takes minutes per strategy). */
#define CCB_MICRO_DEFAULT_NLIVES 4
#define CCB_MICRO_QUICK_NLIVES 2
extern const size_t ccb_micro_default_lives[CCB_MICRO_DEFAULT_NLIVES];

/* A cell's timed pairs stop once they have taken ccb_micro_budget_ns
 * (checked every CCB_MICRO_BUDGET_CHECK pairs; default CCB_MICRO_BUDGET_NS,
 * 10 s), and the batch then runs as many: a row's `pairs` says how many
 * ran. glibc malloc with 100k holes costs ~0.6 ms a pair (its large bins
 * are walked), so 200k pairs would take minutes; ccalloc's cells finish
 * far inside the budget. Tests lower it. */
#define CCB_MICRO_BUDGET_NS 10000000000ull
#define CCB_MICRO_BUDGET_CHECK 256
extern uint64_t ccb_micro_budget_ns;

/* Every strategy x layout (packed, then holes) x live count; rows in that
 * order (a skipped strategy has one row). The pairs (warm-up included) take
 * streams 0..streams-1 in turn, 1..CCB_MICRO_MAX_STREAMS. 0, or -1 when a
 * cell failed, or with *rows NULL when host memory could not hold the
 * table (said on stderr). */
#define CCB_MICRO_MAX_STREAMS 255
int ccb_micro(const char *const *specs, size_t nspecs, const size_t *lives, size_t nlives, size_t pairs,
              unsigned streams, ccb_micro_row **rows, size_t *nrows);

/* ------------------------------------------------------------------------ */
/* Reports (report.c)                                                       */
/* ------------------------------------------------------------------------ */

/* cell.c: one cell of a table. Markdown: bytes (cca_format_bytes), a figure
 * with printf format f, upstream calls "a+f", each "—" when unknown. CSV:
 * the value and its ',' (an unknown one: the ',' alone); a text quoted
 * (quotes doubled) always, or by ccb_csv_field only when it holds a comma,
 * quote or line break, no separator. ccb_known: a double is a figure
 * (finite, not negative). A result is reported when it ran whole (neither
 * skipped nor failed). */
int ccb_known(double v);
void ccb_format_bytes(size_t b, char *buf, size_t len);
void ccb_fmt_num(double v, const char *f, char *buf, size_t len);
void ccb_fmt_calls(uint64_t a, uint64_t f, char *buf, size_t len);
void ccb_csv_size(FILE *f, size_t v);
void ccb_csv_u64(FILE *f, uint64_t v);
void ccb_csv_double(FILE *f, double v, const char *fmt);
void ccb_csv_quoted(FILE *f, const char *s);
void ccb_csv_field(FILE *f, const char *s);
int ccb_result_reported(const ccb_result *x);

/* A text from outside (a trace's or a strategy's name, a mark's or a
 * domain's, a reason) as one markdown table cell: each '|' written "\|"
 * (a bare one would end the cell and push every figure after it under the
 * next header), into buf (len bytes: 2 strlen(s) + 1 always hold it; a
 * shorter buf cuts it). CCB_MD(s): the same into a buffer of the
 * statement's own, room for any of those texts (each shorter than
 * CCB_WHY_MAX, its characters doubled at most). */
const char *ccb_md_cell(const char *s, char *buf, size_t len);
/* A markdown row (or a line of one) with text from outside, escaped
 * (ccai_fprintf_escaped): 0, or -1 when it could not be formatted whole
 * (over 1 KiB without host memory: "(out of host memory for the message)"
 * in its place). A failed write is not -1: the file's close reports it. */
__attribute__((format(printf, 2, 3))) int ccb_fprintf_row(FILE *f, const char *fmt, ...);
#define CCB_MD_MAX (2 * CCB_WHY_MAX)
#define CCB_MD(s) ccb_md_cell((s), (char[CCB_MD_MAX]){0}, CCB_MD_MAX)

/* report.c, iterations.c */
/* Every markdown table writer that writes text from outside returns 0, or
 * -1 when a row could not be written whole: a row over 1 KiB (a long
 * reason) without host memory, which ccai_escape.h replaces by "(out of
 * host memory for the message)", or a table host memory could not compute
 * (the per-domain sums). Its callers pass that to ccb_out_formatted, which
 * counts the output as not written whole. */
int ccb_write_results_md(FILE *f, const ccb_result *r, size_t n);
void ccb_write_results_csv(FILE *f, const ccb_result *r, size_t n);
/* iterations.c: the first iteration and the later ones apart (--iterations
 * N > 1), as markdown, CSV, and README.md's "Iterations" section (nothing
 * when every row's N is 1). ccb_results_iterations: the largest N of the
 * rows (1 when none is larger). */
int ccb_results_iterations(const ccb_result *r, size_t n);
int ccb_write_iterations_md(FILE *f, const ccb_result *r, size_t n);
void ccb_write_iterations_csv(FILE *f, const ccb_result *r, size_t n);
int ccb_write_iterations_readme(FILE *f, const ccb_result *r, size_t n);
/* One trace's checkpoints (marks, release events): a row each, reserved per
 * strategy (r = that trace's nspecs results). CSV: one row per strategy and
 * checkpoint, header when asked. */
int ccb_write_checkpoints_md(FILE *f, const ccb_trace *t, const ccb_result *r, size_t nspecs);
void ccb_write_checkpoints_csv(FILE *f, const ccb_trace *t, const ccb_result *r, size_t nspecs, int header);
/* A trace's domains: allocs, peak requested, and what each strategy's
 * releases of each domain gave back. */
int ccb_write_domains_md(FILE *f, const ccb_trace *t, const ccb_result *r, size_t nspecs);
/* The traces: events, lower bound, ideal arena, marks, release events. */
int ccb_write_traces_md(FILE *f, const ccb_trace *t, size_t n);
int ccb_write_timeline_csv(const char *path, const ccb_result *r);
int ccb_micro_write_md(FILE *f, const ccb_micro_row *r, size_t n, double timer_ns);
void ccb_micro_write_csv(FILE *f, const ccb_micro_row *r, size_t n);
void ccb_write_driver_md(FILE *f, const ccb_driver_row *rows, size_t n, int reps);
void ccb_write_driver_csv(FILE *f, const ccb_driver_row *rows, size_t n);
/* The vm table under its own heading: the rows, or "skipped: why" (rows
 * NULL). upstream: what was measured, e.g. "cuda (GPU 0)". */
int ccb_write_driver_vm_md(FILE *f, const char *upstream, const ccb_driver_vm_row *rows, size_t n, const char *why);
void ccb_write_driver_vm_csv(FILE *f, const ccb_driver_vm_row *rows, size_t n);
/* The whole-maps table (rows NULL: "skipped: why"), each size next to the
 * cudaMalloc / cudaFree medians of the mrows row of the same size ("—"
 * where none has reps), and its CSV. */
int ccb_write_driver_whole_maps_md(FILE *f, const char *upstream, const ccb_driver_vm_row *rows, size_t n,
                                   const ccb_driver_row *mrows, size_t nm, const char *why);
void ccb_write_driver_whole_maps_csv(FILE *f, const ccb_driver_vm_row *rows, size_t n, const ccb_driver_row *mrows,
                                     size_t nm);
/* Write the machine description (uname(2)'s five fields, CPU model, date) as markdown. */
void ccb_write_machine_md(FILE *f);
/* A strategy or trace name as a file name (timeline/T__S.csv, timeline_T.png):
 * '/', '=', ',', ':', ' ', '"', '#' and control bytes -> '_' (ratios.dat's
 * words too: gnuplot skips a line starting with '#'; README.md links to
 * the plots, where '#' would start a URL's fragment). */
/* "- command: `LINE`" for a results README: a markdown code span whose
 * fence outgrows any backticks in the line, control characters escaped.
 * Escaped characters (controls, bytes that are not UTF-8, invisible and
 * bidi characters: \xNN) make the line one a shell would read otherwise;
 * it is then followed by "(characters shown as \xNN: not runnable as
 * written)". */
int ccb_write_command_md(FILE *f, const char *command_line);
void ccb_file_name(const char *in, char *out, size_t len);
/* Run gnuplot on scripts/<script> with arguments, inside directory cwd
 * (NULL: this process's), started by posix_spawn (never fork: see
 * common/ccai_capture.h); 0 ok, 1 gnuplot missing, -1 failed. */
int ccb_gnuplot(const char *script_dir, const char *script, const char *cwd, const char *const *args, size_t nargs);
const char *ccb_default_script_dir(void);
const char *ccb_default_traces_dir(void); /* bench/traces of the source tree: --all's without --traces */

/* The output directory of replay, micro, driver and --all (outputs.c). */
typedef struct ccb_outdir {
    const char *path;
    const char *script_dir; /* gnuplot scripts; NULL: ccb_default_script_dir() */
    int no_plots;
} ccb_outdir;
/* outputs.c */
/* mkdir -p; 0, or -1 with a message on stderr (an existing file that is
 * not a directory, a path over 4095 bytes: never cut). */
int ccb_mkdir_p(const char *path);
/* dir/name (name alone when dir is NULL) opened for writing, or NULL with a
 * message on stderr; refused, before it is emptied (the check is of the
 * descriptor the open returned), when it is a
 * regular file that is a trace this process read (ccb_note_input), an
 * output it opened earlier, the file CCALLOC_TRACE names, or where
 * standard output or error goes. */
FILE *ccb_open_out(const char *dir, const char *name);
/* Remember the file open on fd (read as path) as an input: no output may
 * be written over it. A pipe or device is not remembered. 0, or -1 when
 * host memory could not hold the note (the caller does not read it). */
int ccb_note_input(int fd, const char *path);
/* How many files are noted (inputs read, outputs opened): each file, by
 * identity, once however often it is read. */
size_t ccb_noted_files(void);
/* 1, said on stderr, when CCALLOC_TRACE names a trace this process read
 * (the replays' allocators would empty it); else 0. */
int ccb_recording_reads(void);
/* Close what ccb_open_out opened (the same dir and name, for the message):
 * 0, or -1 with a message on stderr when any of it could not be written
 * (a write error, a full device at the last flush) or f is NULL. */
int ccb_close_out(FILE *f, const char *dir, const char *name);
/* Standard output from here on through a stream that keeps the reason of
 * its first failed write, for ccb_close_stdout's message (called once, at
 * start; without host memory for it nothing changes). */
void ccb_track_stdout(void);
/* Flush and close standard output at exit: 0, or -1 with a message. */
int ccb_close_stdout(void);
/* How many outputs ccb_mkdir_p, ccb_open_out, ccb_close_out and
 * ccb_close_stdout could not make so far; ccbench exits 1 if any. */
unsigned ccb_out_failures(void);
/* dir/name (name alone when dir is NULL) into path: 0, or -1 when it does
 * not fit in len, said on stderr and counted as an output failure. */
int ccb_out_path(const char *dir, const char *name, char *path, size_t len);
/* Say "ccbench: cannot WHAT PATH: WHY" on stderr and count it as an output
 * failure; -1. */
int ccb_out_failed(const char *what, const char *path, const char *why);
/* A writer's status (report.c): rc -1 says "cannot write DIR/NAME: a line
 * could not be formatted (out of host memory)" (DIR NULL: NAME alone, e.g.
 * "standard output") and counts it as an output failure; rc. */
int ccb_out_formatted(int rc, const char *dir, const char *name);
/* Replay results as files (r: trace-major, nspecs per trace): results.md/
 * .csv, traces.md, checkpoints.csv, timeline/T__S.csv, and the plots
 * timeline_T.png and ratios.dat/.png unless no_plots. */
void ccb_write_replay_files(const ccb_outdir *d, const ccb_trace *traces, size_t ntraces, const ccb_result *r,
                            size_t nspecs);
/* What README.md says about replays (replay --out and --all alike): the
 * traces, the strategies x traces table with the driver cost it charged, and
 * each trace's phases and release events, and links to the plots of d that
 * ccb_write_replay_files made (none with no_plots, or when gnuplot made none). */
int ccb_write_replay_readme(FILE *readme, const ccb_outdir *d, const ccb_trace *traces, size_t ntraces,
                            const ccb_result *r, size_t nspecs, const ccb_device *driver);

/* ------------------------------------------------------------------------ */
/* Command line (cli.c) and sub-commands (cmd_*.c, suite.c, switch.c)      */
/* ------------------------------------------------------------------------ */

#define CCB_MAX_SPECS 32
#define CCB_MAX_TRACES 64
#define CCB_MAX_LIVES 8

/* Every option of gen, info, replay, micro, driver and --all (one table in
 * cli.c drives the parser and --help); switch has its own (switch.c). */
typedef struct ccb_options {
    const char *specs[CCB_MAX_SPECS]; /* -s; empty: each command's default */
    size_t nspecs;
    const char *args[CCB_MAX_TRACES]; /* the operands: traces, or gen's generator */
    size_t nargs;
    const char *out;         /* --out DIR, or NULL */
    const char *script_dir;  /* --scripts DIR, or NULL */
    const char *traces_dir;  /* --traces DIR (--all), or NULL: ccb_default_traces_dir() */
    const char *output_file; /* -o FILE (gen) */
    const char *micro_option; /* the first of micro's own options given (--pairs, --streams, --live), or NULL */
    uint64_t seed;
    double scale;
    int reps, reps_given;
    size_t device_bytes;
    uint64_t alloc_latency_ns, free_latency_ns;
    uint64_t map_granule_ns, unmap_granule_ns; /* --vm-latency */
    uint64_t map_call_ns, unmap_call_ns;       /* --vm-call-latency */
    size_t vm_granularity;                     /* --vm-granularity; 0: each device's default */
    int vm_backing;                            /* --vm-backing: CCA_VM_WHOLE_MAPS (0, default) or CCA_VM_PAGES */
    int vm_backing_given;                      /* --vm-backing was given (driver: which tables) */
    int driver_reps; /* 0: as --reps (1 with --quick) */
    int iterations;  /* --iterations: 1..CCB_MAX_ITERATIONS (0: 1) */
    int ignore_releases;
    size_t pairs;
    int pairs_given;             /* --pairs was given (--quick keeps it) */
    unsigned streams;            /* --streams: micro's pairs on streams 0..streams-1 (default 1) */
    size_t lives[CCB_MAX_LIVES]; /* --live; nlives 0: the default table */
    size_t nlives;
    int no_plots;
    int quick;
    int all;
    const char *command_line; /* for README.md */
} ccb_options;

/* The command line as one string for a results README (malloc'd, the
 * caller frees; NULL without host memory): every argument, whatever the
 * length, each a POSIX shell word (single-quoted unless it is made only of
 * letters, digits and _@%+=:,./-), so that pasting it into a shell runs the
 * same command (unless the README must escape a character of it:
 * ccb_write_command_md). */
char *ccb_command_line(int argc, char **argv);
void ccb_options_init(ccb_options *o, const char *command_line);
/* Parse argv[1..argc) (argv[0] is the command) with getopt_long: long options
 * as "--opt value" or "--opt=value", -s/-o/-h short ones, operands anywhere.
 * 0 ok; 1 --help was printed (exit 0); 2 a usage error was printed in the
 * form "ccbench: MESSAGE (see ccbench --help)" (exit 2). */
int ccb_options_parse(ccb_options *o, int argc, char **argv);
void ccb_usage(FILE *f);
/* A TRACE operand: a file, or gen:NAME generated with --seed and --scale.
 * 0, or -1 with a message on stderr (t then needs no freeing). */
int ccb_load_trace(const char *arg, const ccb_options *o, ccb_trace *t);
/* For a command that takes no operand (micro, driver): 0, or the usage
 * error "ccbench COMMAND: unexpected operand 'X'" and 2 (cli.c). */
int ccb_no_operands(const ccb_options *o, const char *command);
/* Give traces of one name, or of one file name (ccb_file_name), distinct
 * names, in order: the second "t" is "t-2", the third "t-3" (the name cut
 * to keep the suffix), each said on stderr with its operand (args[i], or
 * NULL: its name). Every per-trace output of a replay is then its own. */
void ccb_name_traces(ccb_trace *traces, size_t n, const char *const *args);
/* The default strategies: the host suite, then the GPU suite. */
void ccb_default_specs(ccb_options *o);
/* Replay every trace through every strategy of o; *out trace-major. 0, or -1
 * when a replay failed (its row says why), or with *out NULL when host
 * memory could not hold the results (said on stderr). */
int ccb_run_replays(ccb_options *o, const ccb_trace *traces, size_t ntraces, ccb_result **out);
/* The micro-benchmark with o's strategies, lives and pairs: table on stdout
 * (and into md when not NULL), micro.md/.csv into --out. */
int ccb_run_micro(ccb_options *o, FILE *md);

/* A usage error on stderr, "ccbench[ COMMAND]: <message> (see ccbench[
 * COMMAND] --help)", the message's values escaped (they come from the
 * command line); returns 2, the exit status of bad usage (cli.c). */
int ccb_usage_error(const char *command, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* 1 when getopt_long finds -h or help_id (--help) among argv's options,
 * whatever else is there (a bad value, an unknown option): the first pass
 * of every parser, so that --help anywhere prints the usage (exit 0); a
 * "--help" that is an option's value or follows "--" is not one. The parse
 * proper starts afresh after it (optind = 0; GNU getopt's permutation of
 * argv keeps options and operands in their order) (cli.c). */
struct option;
int ccb_help_wanted(int argc, char **argv, const char *shortopts, const struct option *longopts, int help_id);
/* ccb_help_wanted with ccbench's own options (the table of cli.c): for a
 * command line whose first argument is an option, not a command (main.c). */
int ccb_options_help_wanted(int argc, char **argv);
/* The same pass for --all (main.c: the suite in place of any command): an
 * "--all" that is an option's value or follows "--" is not one. */
int ccb_options_all_wanted(int argc, char **argv);
/* getopt_long's ':' (a value missing) or '?' (unknown, or a value given to
 * an option that takes none) as the usage error that names the option
 * (argv[optind - 1], or optopt); returns 2 (cli.c). */
int ccb_getopt_error(const char *command, int c, char **argv);

/* Sub-commands: the process's exit status (0 ok, 1 failed, 2 bad usage). */
int ccb_cmd_gen(ccb_options *o);    /* cmd_gen.c    */
int ccb_cmd_info(ccb_options *o);   /* cmd_info.c   */
int ccb_cmd_replay(ccb_options *o); /* cmd_replay.c */
int ccb_cmd_micro(ccb_options *o);  /* cmd_micro.c  */
int ccb_cmd_driver(ccb_options *o); /* cmd_driver.c */
/* The virtual-memory tables `ccbench driver` measures: --vm-backing pages,
 * the page tables; whole-maps, the whole-maps table; neither, both. */
#define CCB_DRIVER_PAGES 1
#define CCB_DRIVER_WHOLE_MAPS 2
int ccb_driver_tables(const ccb_options *o);
int ccb_cmd_all(ccb_options *o);    /* suite.c      */
/* `ccbench switch ARGS` (argv[0] = "switch"): parses its own options. */
int ccb_cmd_switch(int argc, char **argv);
/* `ccbench sleep`: sleep and wake throughput against the plain copy (sleep.c);
 * its own options, argv[0] = "sleep"; command_line quoted in its README. */
int ccb_cmd_sleep(int argc, char **argv, const char *command_line);
/* The same on `device` (borrowed, not destroyed), every size on it in turn
 * instead of a fresh device per size; --device then only names it in the
 * report. NULL: ccb_cmd_sleep. The command line never passes one: tests
 * do, a double that corrupts a copy (tests/bench/test_bench_sleep.c). */
int ccb_cmd_sleep_on(int argc, char **argv, const char *command_line, struct cca_upstream *device);

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
