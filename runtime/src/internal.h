/*
 * internal.h — what the runtime's source files share. Nothing here is public;
 * each group names the file that defines it.
 */
#ifndef CCR_INTERNAL_H
#define CCR_INTERNAL_H

#include <stdint.h>

#include "ccr.h"

#if defined(__GNUC__)
#define CCR_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define CCR_PRINTF(f, a)
#endif

/* ---- error.c ------------------------------------------------------------ */

/* Set the thread's last error message and return `s`. */
ccr_status ccr_fail(ccr_status s, const char *fmt, ...) CCR_PRINTF(2, 3);
/* Prefix the current message: "<prefix>: <old message>". Returns s. */
ccr_status ccr_fail_prefix(ccr_status s, const char *fmt, ...) CCR_PRINTF(2, 3);
void ccr_clear_error(void);
/* The thread's message, kept across calls whose failure nobody reports (a
 * timeline row's or a sleep's mem_info, a trace mark): a failing call's
 * message must outlive the rows and marks written after it. */
typedef struct ccr_kept_error {
    char text[1024]; /* the message buffer's size (status.c) */
} ccr_kept_error;
void ccr_error_keep(ccr_kept_error *k);
/* Put the kept message back when a call since changed it. */
void ccr_error_restore(const ccr_kept_error *k);

/* The runtime's status for an allocator call's failure cs: the device
 * refusing or failing (CCA_ERR_UPSTREAM, CCA_ERR_NO_DEVICE) is
 * CCR_ERR_DEVICE, wherever the engine meets it; out of memory is
 * CCR_ERR_OUT_OF_MEMORY; a sleeping domain (CCA_ERR_ASLEEP) CCR_ERR_ASLEEP;
 * anything else CCR_ERR_ALLOCATOR. */
ccr_status ccr_status_of(cca_status cs);

/* a*b into *out; 0 on overflow. */
int ccr_mul_ok(size_t a, size_t b, size_t *out);

/* One warning line through the engine's sink (stderr by default). */
void ccr_warn(ccr_engine *e, const char *fmt, ...) CCR_PRINTF(2, 3);

/* ---- footprint.c (the engine's memory of its models' peaks) ------------- */

/* One remembered footprint: what a model's domain reserved at its peak. */
typedef struct ccr_footprint {
    char *key;    /* malloc'd: the model's source, path or spec as given */
    char *arch;   /* malloc'd: canonical spec of the layers it was measured on */
    size_t batch; /* the largest batch run while it was measured          */
    size_t peak;  /* the domain's reserved_bytes_peak at unload           */
} ccr_footprint;

/* ---- engine.c ----------------------------------------------------------- */

struct ccr_engine {
    ccr_device_kind kind; /* resolved: CCR_DEVICE_CUDA or CCR_DEVICE_HOST */
    int cuda_device;
    cca_upstream *up;
    int own_up;
    cca_allocator *alloc;
    cck_cuda_context *cuda; /* created on first use, destroyed by release */
    void *workspace;        /* cuBLAS workspace, from the allocator       */
    size_t workspace_bytes;
    size_t total_bytes;
    size_t free_baseline;
    size_t arena_bytes; /* greedy: the arena cca_create reserved (0: growth) */
    ccr_model *models;  /* doubly linked, newest first (model.c) */
    ccr_timeline *timeline;
    ccr_progress_fn progress;
    void *progress_user;
    char phase[24];   /* the engine's own phase names, all short */
    char devname[32]; /* "host" or "cuda:N" */
    int domains;      /* options: one domain per model (growth only)       */
    int footprint;    /* options: remember peaks, reserve them at load     */
    int sidecar;      /* options: footprint_sidecar                        */
    ccr_warn_fn warn;
    void *warn_user;
    ccr_footprint *foot; /* remembered footprints, one per source        */
    size_t n_foot, cap_foot;
    cca_domain **orphans; /* domains an unload could not destroy (leaks): model.c */
    size_t n_orphans, cap_orphans;
    /* the allocator's message at the first mark that found the CCALLOC_TRACE
     * recording stopped (timeline.c), or at cca_create when the library
     * would not open it (engine.c: cca_trace_status); "" while it is whole
     * or not tracing */
    char trace_error[1024];
};

/* ---- device.c ----------------------------------------------------------- */

/* Give engine `e` its device: o->upstream borrowed, else opened from o's
 * settings (ccr_device_open_with); sets kind, cuda_device, devname and
 * own_up. */
ccr_status ccr_engine_open_device(ccr_engine *e, const ccr_engine_options *o);
/* Allocate device memory for `tag` ("weight", "activation", ...) of model
 * `m` — in m's domain — or of the engine itself (m NULL: the default
 * domain) from the engine's allocator. A refusal names the request and the
 * device state: CCR_ERR_OUT_OF_MEMORY ("out of device memory"); a device
 * that failed, CCR_ERR_DEVICE with the device's message; anything else as
 * ccr_status_of says. */
ccr_status ccr_dev_alloc(ccr_engine *e, ccr_model *m, size_t bytes, const char *tag, void **out);
void ccr_dev_free(ccr_engine *e, ccr_model *m, void *p, const char *tag);
/* Host <-> device copies (memcpy on the simulated device). */
ccr_status ccr_dev_upload(ccr_engine *e, void *dst, const void *src, size_t bytes);
ccr_status ccr_dev_download(ccr_engine *e, void *dst, const void *src, size_t bytes);
/* CUDA only: make sure the cuBLAS context and its workspace exist. */
ccr_status ccr_engine_ensure_context(ccr_engine *e);
/* The most the allocator can ever hold, into *what its name: the device's
 * total ("the device's total"), max_reserved when set and smaller, the
 * greedy arena when smaller still (greedy never grows past it, even after
 * an empty-cache gave it back: ccalloc.h, cca_alloc). */
size_t ccr_engine_limit(ccr_engine *e, const char **what);

/* ---- model.c ------------------------------------------------------------ */

/* A tensor of the source holding non-finite values after loading. */
typedef struct ccr_nonfinite {
    char *name; /* malloc'd: the file's tensor name */
    size_t count;
} ccr_nonfinite;

struct ccr_model {
    ccr_engine *e;
    ccr_model *prev, *next;
    char *name; /* malloc'd: the path or spec as given, whole */
    int from_file;      /* name is a file path (a sidecar may sit next to it) */
    int built;          /* every tensor loaded: its footprint means something */
    cca_domain *domain; /* NULL: the allocator's default domain              */
    size_t footprint;   /* bytes reserved up front at load (0: none)         */
    size_t max_batch;   /* the largest batch run (0: never run)              */
    int asleep;         /* its domain asleep (sleep.c): no run, no save      */
    ccr_arch arch;
    float *w[CCR_MAX_LAYERS]; /* device, out × in */
    float *b[CCR_MAX_LAYERS]; /* device, out, or NULL */
    size_t device_bytes;
    size_t nonfinite;                      /* NaN/Inf weights, all tensors   */
    size_t n_nonfinite;                    /* tensors holding any, in order  */
    ccr_nonfinite bad[2 * CCR_MAX_LAYERS]; /* the first n_nonfinite of them  */
};

/* Fill `count` floats of layer `layer`'s weight (is_bias 0) or bias (1)
 * into host memory `dst`. */
typedef ccr_status (*ccr_fill_fn)(void *user, size_t layer, int is_bias, float *dst, size_t count);

/* Create the model's domain (and reserve its remembered footprint), then
 * allocate every tensor of `arch` on the device and fill it through `fill`
 * (directly into device memory on the simulated device, through one host
 * staging buffer on CUDA). from_file: `name` is a path. On failure
 * everything is freed, the domain destroyed. */
ccr_status ccr_model_build(ccr_engine *e, const ccr_arch *arch, const char *name, int from_file, ccr_fill_fn fill,
                           void *user, ccr_model **out);

/* ---- sleep.c ------------------------------------------------------------ */

/* CCR_ERR_ASLEEP naming m and what was refused ("run", "save"), when m is
 * asleep (its domain put to sleep by a caller's cca_domain_sleep too);
 * CCR_OK otherwise. */
ccr_status ccr_model_check_awake(ccr_model *m, const char *what);

/* ---- arch.c ------------------------------------------------------------- */

/* Bytes of activations live at once at the peak of a pass of `batch` rows
 * into *out; 0 on overflow. */
int ccr_arch_activation_bytes(const ccr_arch *a, size_t batch, size_t *out);

/* ---- footprint.c -------------------------------------------------------- */

/* The footprint to reserve before loading model `key` with layers `arch`
 * (0: none known): the engine's memory, else (from_file and sidecars on) the
 * sidecar "<key>.ccfoot", checked, warned about and remembered. */
size_t ccr_footprint_lookup(ccr_engine *e, const char *key, const ccr_arch *arch, int from_file);
/* At unload: remember `peak` for `key` measured with `batch` as its largest
 * batch, unless a larger batch is remembered already; rewrite the sidecar
 * when the entry changed. */
void ccr_footprint_record(ccr_engine *e, const char *key, const ccr_arch *arch, int from_file, size_t batch,
                          size_t peak);
/* Forget everything remembered (not the sidecars). */
void ccr_footprint_clear(ccr_engine *e);

/* ---- safetensors.c ------------------------------------------------------ */

#define CCR_ST_MAX_HEADER 100000000ull   /* the safetensors crate's own cap */
#define CCR_ST_HEADER_SLACK (1ull << 20) /* header <= data section + 1 MiB   */
#define CCR_ST_MAX_TOKENS (1ull << 20)   /* JSON values + keys in a header  */
#define CCR_ST_MAX_DEPTH 3               /* root object > entry > array     */
#define CCR_ST_MAX_DIMS 8

typedef enum ccr_dtype { CCR_F32, CCR_F16, CCR_BF16, CCR_F64 } ccr_dtype;

typedef struct ccr_st_tensor {
    char *name;
    ccr_dtype dtype;
    size_t ndim;
    size_t shape[CCR_ST_MAX_DIMS];
    size_t count;        /* product of shape */
    uint64_t begin, end; /* byte offsets in the data section */
} ccr_st_tensor;

typedef struct ccr_st_file {
    FILE *f;
    const char *name;    /* borrowed from ccr_st_open's caller: must outlive s */
    uint64_t data_start; /* 8 + header length */
    uint64_t data_size;
    size_t n;
    ccr_st_tensor *t;
    char *arch_spec; /* __metadata__[CCR_META_KEY] or NULL */
} ccr_st_file;

/* Read and validate the header of the safetensors file on `f` (borrowed; so
 * is `name`, which labels messages and must outlive *out):
 * length cap, JSON, dtypes, shapes, offsets (in range, no overlap, the data
 * section exactly covered). CCR_ERR_FORMAT / CCR_ERR_DTYPE / CCR_ERR_IO;
 * CCR_ERR_OUT_OF_MEMORY when host memory is short (the header's text, its
 * parse, the tensors' records). */
ccr_status ccr_st_open(FILE *f, const char *name, ccr_st_file *out);
void ccr_st_close(ccr_st_file *s);
const ccr_st_tensor *ccr_st_find(const ccr_st_file *s, const char *name);
/* Read a tensor converted to float32 (dst holds t->count floats). */
ccr_status ccr_st_read_f32(ccr_st_file *s, const ccr_st_tensor *t, float *dst);
/* Match tensors to the layer list in the metadata: fills *arch (has_bias
 * from the file) and per-layer tensor pointers. CCR_ERR_FORMAT (no layer
 * list; two layer keys that differ only in leading zeros), CCR_ERR_SPEC (a
 * layer list that does not parse), CCR_ERR_SHAPE (tensors that do not
 * match it, or a tensor name other than <key>.weight / <key>.bias). */
ccr_status ccr_st_bind_mlp(const ccr_st_file *s, ccr_arch *arch, const ccr_st_tensor **w, const ccr_st_tensor **b);

/* Writing: tensors are float32, shapes 1-D or 2-D, data through `get`. */
typedef struct ccr_st_out_tensor {
    char name[32];
    size_t ndim;
    size_t shape[2];
} ccr_st_out_tensor;
typedef ccr_status (*ccr_st_get_fn)(void *user, size_t index, float *dst, size_t count);
ccr_status ccr_st_write(const char *path, const char *meta_key, const char *meta_value, const ccr_st_out_tensor *t,
                        size_t n, ccr_st_get_fn get, void *user);

/* ---- timeline.c --------------------------------------------------------- */

/* One row of the engine's timeline, when it has one: `event` ("phase",
 * "alloc", "free", "oom") of `bytes` for `tag` of `model` (NULL: none), in
 * the engine's current phase, with the allocator's stats and the device's
 * free bytes read now. */
void ccr_timeline_event(ccr_engine *e, const char *event, const char *tag, const char *model, size_t bytes);
/* Start a phase on the timeline with a detail in the tag column (and mark
 * it in the allocator's trace); ccr_engine_mark (ccr.h) is this, tag NULL. */
void ccr_engine_mark_tag(ccr_engine *e, const char *phase, const char *model, const char *tag);

#endif /* CCR_INTERNAL_H */
