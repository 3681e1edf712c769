/*
 * ccr.h — the ccalloc runtime: a small dense/softmax inference engine whose
 * every device byte comes from a ccalloc allocator.
 *
 * An engine owns one device (a CUDA GPU, or the host-simulated device of
 * ccalloc), one allocator on it, and — on CUDA — one cuBLAS context whose
 * workspace is also allocator memory. Models are multilayer perceptrons:
 * dense layers, each with an activation (none, relu, gelu), and an optional
 * final softmax. They come from a safetensors file or from a spec string:
 *
 *     mlp:784x4096x4096x10:relu:softmax:seed=7
 *
 * Every function that can fail returns a ccr_status (0 = success); on
 * failure ccr_last_error() holds a message naming the problem (the file,
 * the tensor, the byte offset, the option). The others return a value:
 * the getters (ccr_engine_allocator, ccr_model_name, ..., 0 or NULL or ""
 * for a NULL handle), ccr_status_string, ccr_last_error,
 * ccr_arch_param_bytes, ccr_device_name_cuda, ccr_model_asleep and
 * ccr_fputs_escaped (EOF when a write failed); or nothing:
 * ccr_engine_options_default, ccr_engine_mark, ccr_engine_destroy (which
 * frees all it can whatever fails) and ccr_model_unload (a failure is a
 * warning). Nothing in the library exits the process.
 *
 * Thread safety: an engine and its models are used from one thread at a time.
 * Engines of different threads may share a device (ccr_engine_options.
 * upstream), never a timeline: its rows are written without a lock, so a
 * timeline serves engines of one thread only.
 *
 * Example usage:
 *
 *     ccr_engine_options o;
 *     ccr_engine_options_default(&o);          // device auto, 1 GiB simulated
 *     o.alloc_conf = "policy:growth";
 *     ccr_engine *e;
 *     ccr_engine_create(&o, &e);
 *     ccr_model *m;
 *     if (ccr_model_load_file(e, "digits.safetensors", &m) != CCR_OK)
 *         fprintf(stderr, "%s\n", ccr_last_error());
 *     ccr_model_run(m, x, batch, probs);        // host in, host out
 *     // ccr_model_release(m, &u) here would return all of m's memory (its
 *     // domain) at once, other models staying loaded; instead:
 *     ccr_release_info r;
 *     ccr_engine_release(e, &r);               // unloads m, empties the cache
 *     // r.device_free_after == r.device_free_baseline on the simulated device
 *     ccr_engine_destroy(e);
 */
#ifndef CCR_H
#define CCR_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ccalloc.h"
#include "cck.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Status codes                                                             */
/* ------------------------------------------------------------------------ */

typedef enum ccr_status {
    CCR_OK = 0,
    CCR_ERR_INVALID_ARGUMENT, /* NULL handle, zero batch, bad option           */
    CCR_ERR_IO,               /* file missing, unreadable, short read, write    */
    CCR_ERR_FORMAT,           /* malformed safetensors file                     */
    CCR_ERR_SPEC,             /* malformed spec string / layer list             */
    CCR_ERR_SHAPE,            /* tensors inconsistent with the layer list       */
    CCR_ERR_DTYPE,            /* unsupported tensor dtype                       */
    CCR_ERR_OUT_OF_MEMORY,    /* the allocator could not serve a device request */
    CCR_ERR_DEVICE,           /* no such device, or the device failed           */
    CCR_ERR_KERNEL,           /* a kernel returned an error                     */
    CCR_ERR_ALLOCATOR,        /* the allocator returned an unexpected error     */
    CCR_ERR_LIVE_BLOCKS,      /* unload found memory still allocated in the
                                 model's domain (a leak): see ccr_model_release */
    CCR_ERR_ASLEEP,           /* the model is asleep (ccr_model_sleep): wake it */
    CCR_ERR_UNSUPPORTED       /* the engine's setup cannot do it: sleep without
                                 a domain of the model's own or without
                                 expandable segments (ccr_model_sleep)          */
} ccr_status;

/* "CCR_ERR_FORMAT" etc. */
const char *ccr_status_string(ccr_status s);

/* The message of the last failing call on this thread ("" if none): a
 * call that succeeds leaves it as it was, a failure met inside it and
 * recovered from included (a footprint not reserved, a model's domain kept
 * at an engine release that gave everything back). The same per-thread
 * message as cca_last_error(): an allocator failure keeps its message, with
 * the runtime's context in front. */
const char *ccr_last_error(void);

/* ------------------------------------------------------------------------ */
/* Layer lists and spec strings                                             */
/* ------------------------------------------------------------------------ */

#define CCR_MAX_LAYERS 64

typedef struct ccr_layer_desc {
    size_t in, out;     /* weight is out × in (PyTorch nn.Linear layout) */
    cck_activation act; /* applied after the bias                       */
    int has_bias;
} ccr_layer_desc;

/* An MLP architecture without weights. */
typedef struct ccr_arch {
    size_t n_layers;
    ccr_layer_desc layers[CCR_MAX_LAYERS];
    int softmax;   /* final row-wise softmax                           */
    uint64_t seed; /* weights seed for spec models (default 1)         */
} ccr_arch;

/*
 * Parse a spec string. Grammar (fields after the dimensions in any order):
 *
 *     mlp:D0xD1x...xDn[:ACT][:softmax|:nosoftmax][:seed=N][:nobias][:acts=A1/A2/.../An]
 *
 * D0 is the input width, Dn the output width, n layers (1..CCR_MAX_LAYERS).
 * ACT (relu|gelu|none, default relu) is applied after every hidden layer; the
 * last layer gets none. acts= gives every layer's activation explicitly.
 * Each field at most once: a repeat, softmax with nosoftmax, or ACT with
 * acts= is an error. *out is written only on success.
 * Each dimension is 1..2^24 and each weight matrix at most 2^31 elements.
 * Errors: CCR_ERR_SPEC naming the offending field.
 */
ccr_status ccr_arch_parse(const char *spec, ccr_arch *out);

/* Write the canonical spec string of `a` (the form stored in safetensors
 * metadata under CCR_META_KEY) into buf. CCR_ERR_INVALID_ARGUMENT if short,
 * and for layers no spec string can give (0 or more than CCR_MAX_LAYERS
 * of them, a width outside 1..2^24, a matrix of more than 2^31 weights, a
 * layer whose input is not the last one's output, an activation outside
 * cck_activation): what it writes always parses back. */
ccr_status ccr_arch_format(const ccr_arch *a, char *buf, size_t len);

/* Total bytes of float32 parameters. 0 for NULL or more than
 * CCR_MAX_LAYERS layers; SIZE_MAX when the total overflows (dimensions
 * no spec string can give). */
size_t ccr_arch_param_bytes(const ccr_arch *a);

/* The safetensors `__metadata__` key holding the architecture as a spec
 * string, e.g. "mlp:64x64x10:relu:softmax". See docs/engine.md. */
#define CCR_META_KEY "ccr.mlp"

/* ------------------------------------------------------------------------ */
/* Engine                                                                   */
/* ------------------------------------------------------------------------ */

typedef enum ccr_device_kind {
    CCR_DEVICE_AUTO = 0, /* CUDA when a GPU is present, else the simulated device */
    CCR_DEVICE_CUDA,
    CCR_DEVICE_HOST /* ccalloc's host-simulated device */
} ccr_device_kind;

/* "auto" / "cuda" / "host" <-> enum. */
ccr_status ccr_device_parse(const char *name, ccr_device_kind *out);

/* Whether a device of this name (cca_upstream_name) is a CUDA GPU: the name
 * is exactly "cuda:" and decimal digits whose value fits an int ("cuda:0",
 * "cuda:12"), nothing before or after them: 1, and *index (may be NULL)
 * set to the number. Every other name is 0 (a simulated device), *index
 * untouched: trailing text ("cuda:0junk", "cuda:1 "), a sign ("cuda:-1",
 * "cuda:+1"), blanks ("cuda: 1"), an overflow ("cuda:2147483648"), no
 * number ("cuda:"), hex ("cuda:0x1"), "CUDA:0", NULL. The one rule for a
 * borrowed upstream (ccr_engine_options.upstream; ccrun's --demo on a
 * test's device): CUDA by this, else the simulated device. */
int ccr_device_name_cuda(const char *name, int *index);

/* Open a device as the engine does: CUDA `cuda_device` (kind CUDA, or AUTO
 * when cck_cuda_device_count > 0 and cca_upstream_cuda_create succeeds),
 * else the host-simulated device of `host_capacity` bytes. *simulated says
 * which (may be NULL). Destroy with cca_upstream_destroy.
 * Errors: CCR_ERR_INVALID_ARGUMENT for a NULL out or a setting the library
 * refuses, the simulated device's capacity among them (0, below the host
 * page: "capacity 4095 is below the 4096-byte host page, ..."); CCR_ERR_DEVICE
 * when kind CUDA finds no such GPU or the device could not be created (its
 * host memory or address space short). */
ccr_status ccr_device_open(ccr_device_kind kind, int cuda_device, size_t host_capacity, cca_upstream **out,
                           int *simulated);
/* The same with the page of expandable segments (allocator config
 * expandable:1): `vm_granularity` bytes per page on either device
 * (cca_cuda_options / cca_host_options; 0: the device's default, the
 * driver's minimum or 2 MiB). A page the library refuses is
 * CCR_ERR_INVALID_ARGUMENT with its message, never a fall-back to the
 * simulated device (with kind AUTO either). ccr_device_open is this with 0. */
ccr_status ccr_device_open_paged(ccr_device_kind kind, int cuda_device, size_t host_capacity, size_t vm_granularity,
                                 cca_upstream **out, int *simulated);
/* Every setting of the device to open, for ccr_device_open_with. */
typedef struct ccr_device_options {
    ccr_device_kind kind;
    int cuda_device;
    size_t host_capacity;
    size_t vm_granularity; /* as ccr_device_open_paged's */
    /* How the memory behind each virtual-memory map is kept, on either
     * device (cca_cuda_options / cca_host_options .vm_backing):
     * CCA_VM_WHOLE_MAPS (0) or CCA_VM_PAGES (1). Another value is
     * CCR_ERR_INVALID_ARGUMENT before any device is opened; a backing the
     * library refuses is CCR_ERR_INVALID_ARGUMENT with its message, never a
     * fall-back to the simulated device. A kind outside ccr_device_kind
     * is CCR_ERR_INVALID_ARGUMENT too, never taken for AUTO. */
    int vm_backing;
} ccr_device_options;
/* ccr_device_open_paged with every setting (o NULL: CCR_ERR_INVALID_ARGUMENT);
 * ccr_device_open_paged is this with vm_backing CCA_VM_WHOLE_MAPS. */
ccr_status ccr_device_open_with(const ccr_device_options *o, cca_upstream **out, int *simulated);

/* Called during loads: bytes of weights copied so far, of total. */
typedef void (*ccr_progress_fn)(void *user, const char *model, size_t done, size_t total);

/* Warnings: something was wrong but the call went on (a footprint sidecar
 * ignored, a leak found at ccr_model_unload). One line, no newline. */
typedef void (*ccr_warn_fn)(void *user, const char *line);
/* (The line quotes text from outside as it is: a sink that prints it on a
 * terminal escapes it with ccr_fputs_escaped, as the default sink does.) */

typedef struct ccr_timeline ccr_timeline;

typedef struct ccr_engine_options {
    ccr_device_kind device;   /* default CCR_DEVICE_AUTO                          */
    int cuda_device;          /* default 0                                        */
    size_t host_capacity;     /* simulated device size, default CCR_DEFAULT_CAPACITY */
    const char *alloc_conf;   /* cca_config_parse string on top of the defaults   */
    cca_upstream *upstream;   /* borrowed: use this device instead of creating one
                                 (device/host_capacity ignored); NULL = create.
                                 CUDA when its name passes ccr_device_name_cuda,
                                 else the simulated device                       */
    ccr_timeline *timeline;   /* borrowed: allocator events and phases go here    */
    ccr_progress_fn progress; /* NULL = silent                                    */
    void *progress_user;
    /* Memory domains (see "Models and their memory" below): 1 (default) = one
     * cca_domain per loaded model, released whole at unload; 0 = every model
     * in the allocator's default domain, sharing segments (memory freed at
     * unload stays cached until ccr_engine_release or a trim). Ignored (0)
     * under policy:greedy, which cannot have domains. */
    int domains;
    /* Footprint memory (domains only): 1 (default) = remember each model's
     * peak reserved bytes at unload and reserve that much up front at its
     * next load in this engine; 0 = never. */
    int footprint;
    /* 1: also keep the footprint of a model loaded from a file in a sidecar
     * file "<path>.ccfoot" (read at load when the engine has none for it,
     * rewritten at unload when it changed and the model ran: none is
     * written for a model never run), so that it survives the
     * process. A sidecar that is missing is nothing; one that is unreadable,
     * malformed, for other layers or implausible is ignored with a warning.
     * Default 0. */
    int footprint_sidecar;
    ccr_warn_fn warn; /* NULL = "ccr: warning: <line>" on stderr, escaped   */
    void *warn_user;
    /* The page of expandable segments on the device the engine opens
     * (ccr_device_open_paged; ignored with a borrowed upstream). 0 (default):
     * the device's. On a GPU over CCA_VM_PAGES, 32 MiB pages map a large
     * model in a sixteenth of the driver calls of 2 MiB ones; over whole
     * maps (the default) a map is one allocation whatever its pages
     * (docs/tuning.md, "The page"). */
    size_t vm_granularity;
    /* The backing of its virtual-memory maps (ccr_device_options.vm_backing;
     * ignored with a borrowed upstream): CCA_VM_WHOLE_MAPS (0, default:
     * one physical allocation per map, on a GPU far fewer driver calls,
     * memory given back map by map) or CCA_VM_PAGES (1, one per page, any
     * page given back). */
    int vm_backing;
} ccr_engine_options;

#define CCR_DEFAULT_CAPACITY ((size_t)1 << 30)

void ccr_engine_options_default(ccr_engine_options *o);

typedef struct ccr_engine ccr_engine;

/* Pick the device, measure its free memory (the baseline, before anything is
 * allocated), then create the allocator (the greedy policy reserves here).
 * o NULL: the defaults. *out is NULL after any failure.
 * Errors: CCR_ERR_INVALID_ARGUMENT for out NULL, a device setting the
 * library refuses (ccr_device_open_with) or an alloc_conf that does not
 * parse; CCR_ERR_DEVICE when kind CUDA finds no GPU, the device could not
 * be created or read (mem_info) or failed the greedy arena;
 * CCR_ERR_OUT_OF_MEMORY when host memory is short or the greedy arena does
 * not fit; CCR_ERR_ALLOCATOR for any other refusal of cca_create. */
ccr_status ccr_engine_create(const ccr_engine_options *o, ccr_engine **out);

/* Release (see below) and free everything, the device included unless it
 * was borrowed. NULL is a no-op. */
void ccr_engine_destroy(ccr_engine *e);

typedef struct ccr_device_info {
    int simulated; /* 1: ccalloc's host-simulated device           */
    char name[32]; /* "cuda:0" or "host"                           */
    size_t total_bytes;   /* read at engine creation                      */
    size_t free_bytes;    /* now                                          */
    size_t free_baseline; /* at engine creation, before the allocator     */
} ccr_device_info;

/* The device's name, kind, total and baseline, and its free bytes now (one
 * mem_info). Errors: CCR_ERR_INVALID_ARGUMENT (e or out NULL); CCR_ERR_DEVICE
 * when the device refuses mem_info: *out is whole but free_bytes, 0. */
ccr_status ccr_engine_device_info(ccr_engine *e, ccr_device_info *out);

/* The engine's allocator and device (borrowed, for stats and tenants). */
cca_allocator *ccr_engine_allocator(ccr_engine *e);
cca_upstream *ccr_engine_upstream(ccr_engine *e);

/* Replace the allocator (no model may be loaded): release, destroy it and
 * create a new one from `alloc_conf`. Lets one device host several policies.
 * Footprints remembered so far are forgotten: they are the old allocator's
 * figures (sidecar files stay and are read again).
 * Errors: CCR_ERR_INVALID_ARGUMENT for a NULL engine, a model loaded (or
 * asleep) or a config the allocator refuses (the old allocator kept);
 * CCR_ERR_OUT_OF_MEMORY or CCR_ERR_DEVICE when the new allocator cannot be
 * made (greedy's arena does not fit, or the device failed it), as at
 * ccr_engine_create, the old allocator kept;
 * CCR_ERR_LIVE_BLOCKS, after the release, while a block is still live in
 * the old allocator (one the caller took from ccr_engine_allocator, or a
 * leak a released model's domain kept): destroying it would free memory
 * its owner still points to. Nothing else changes; free the blocks and
 * call again. As ccr_engine_release otherwise. */
ccr_status ccr_engine_reconfigure(ccr_engine *e, const char *alloc_conf);

typedef struct ccr_release_info {
    size_t models_unloaded;
    size_t device_free_baseline;  /* before the first load (engine creation) */
    size_t device_free_before;    /* when release began                      */
    size_t device_free_after;     /* after empty-cache                       */
    int device_free_read;         /* 1: both were read; 0: the device refused
                                     a mem_info, and both are 0 (the
                                     release's error names the refused read
                                     unless an earlier step failed first)    */
    size_t workspace_freed;       /* cuBLAS workspace bytes returned         */
    size_t live_bytes_after;      /* allocator's allocated_bytes afterwards (0) */
    size_t domain_bytes_released; /* returned by the unloaded models' domains */
    size_t models_leaking;        /* unloads that found live blocks (a leak)  */
    cca_release_report cache;     /* what cca_empty_cache returned           */
} ccr_release_info;

/* Unload every model (each releasing its domain), destroy the cuBLAS context
 * and free its workspace, destroy the domains that earlier unloads had to
 * keep (leaks since freed), cca_empty_cache, and measure the device's free
 * memory. The engine stays usable: a later load recreates what it needs.
 * Every step runs even after one fails; the first failure is returned:
 * CCR_ERR_DEVICE when the device could not be read or refused memory back
 * (what it refused stays cached, info->cache.bytes_still_reserved says how
 * much, and a later release tries again), as ccr_model_release reports it;
 * CCR_ERR_ALLOCATOR for any other allocator failure. A model that fails to
 * unload cleanly (a leak) is a warning, not the release's failure:
 * info->models_leaking counts them. info may be NULL. */
ccr_status ccr_engine_release(ccr_engine *e, ccr_release_info *info);

/* Write a "phase" row to the engine's timeline (no-op without one), and the
 * phase as a mark into the allocator's trace when the process is tracing
 * (CCALLOC_TRACE: cca_trace_mark, which flushes the recording). */
void ccr_engine_mark(ccr_engine *e, const char *phase, const char *model);

/* Whether the allocator's trace (CCALLOC_TRACE) was written whole at every
 * phase mark of this engine so far: CCR_OK, also when the process is not
 * tracing; CCR_ERR_IO from the first mark that found the recording stopped
 * (a write failed, a full disk) on, or from the engine's creation when the
 * library would not open the file (a missing directory: cca_trace_status),
 * the message "CCALLOC_TRACE: " and the allocator's then ("CCALLOC_TRACE:
 * cca_trace_status: not tracing: cannot open for writing (REASON):
 * 'FILE'"). The engine keeps working either way: an engine's user that
 * promises a trace (ccrun) fails at its end. Events after the last
 * mark are written at the last cca_destroy; a failure there is the
 * library's log line only. e NULL: CCR_ERR_INVALID_ARGUMENT. */
ccr_status ccr_engine_trace_status(const ccr_engine *e);

/* ------------------------------------------------------------------------ */
/* Models                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct ccr_model ccr_model;

/* Load a safetensors file: float32, float16 or bfloat16 tensors (converted to
 * float32), layer list in __metadata__[CCR_META_KEY], tensors named like a
 * PyTorch nn.Sequential state dict ("0.weight", "0.bias", "2.weight", ...).
 * Everything is validated before any device memory is taken. On failure
 * nothing stays allocated. A path that is not a regular file is refused at
 * once with CCR_ERR_IO (a directory; a FIFO, never waited for; a device);
 * an empty path with CCR_ERR_INVALID_ARGUMENT, as a NULL one; host memory
 * short (the file's stream, the header's text, its parse, the tensors'
 * records) with CCR_ERR_OUT_OF_MEMORY. After any failure of this and the three loads below, *out is NULL (out NULL, or
 * e or the source NULL: CCR_ERR_INVALID_ARGUMENT). */
ccr_status ccr_model_load_file(ccr_engine *e, const char *path, ccr_model **out);

/* Same, from an open stream (the fuzzer uses fmemopen). `name` labels it.
 * The stream is sized with fseeko(SEEK_END) and read from its byte 0
 * whatever its position: a pipe or a socket (no seeking) is CCR_ERR_IO
 * ("cannot seek"); a stream whose reads fail, or end before the size it
 * reported, is CCR_ERR_IO ("short read"); short reads are read on. The
 * caller closes it. */
ccr_status ccr_model_load_stream(ccr_engine *e, FILE *f, const char *name, ccr_model **out);

/* Build a model from a spec string with seeded uniform random weights in
 * ±1/sqrt(in) (deterministic for a given seed on every device). */
ccr_status ccr_model_load_spec(ccr_engine *e, const char *spec, ccr_model **out);

/* Load from `source`: a spec string when it starts with "mlp:", else a file. */
ccr_status ccr_model_load(ccr_engine *e, const char *source, ccr_model **out);

/* ---- Models and their memory --------------------------------------------
 *
 *  - With domains (the default, growth policy), every device byte of a model
 *    — its weights, and the activations of its ccr_model_run passes — is
 *    allocated in the model's own cca_domain, so its blocks live in its own
 *    segments and never pin another model's memory.
 *  - Unloading frees the weights and destroys the domain: all of the
 *    model's reserved memory goes back to the device at once, while other
 *    models stay loaded and keep running (ccr_engine_release is not needed).
 *  - A block still live in the domain at unload is a leak (something
 *    allocated in ccr_model_domain and never freed): the domain is not
 *    released (no FORCE: the pointer may still be in use), the model is
 *    unloaded all the same, and the leak is reported (ccr_model_release's
 *    status and info; a warning from ccr_model_unload). The engine destroys
 *    such a domain later, at ccr_engine_release, once the block is freed.
 *  - FOOTPRINT: at unload the engine remembers the domain's peak reserved
 *    bytes under the model's source (the path or spec as given) with the
 *    largest batch run so far; the next load of that source reserves it up
 *    front (cca_domain_reserve, one upstream call), so that load and its
 *    runs make no upstream call at all. The key's batch is the largest
 *    batch run, because the batch is known only at run time: a later load
 *    that ran smaller batches does not replace it (its peak would be too
 *    small for the larger batch), one that ran a larger batch does.
 */

/* Unload `m` and release its memory domain: what it returned, and leaks. */
#define CCR_LEAKS_MAX 8
typedef struct ccr_unload_info {
    int domain;                /* 1: the model had a domain of its own        */
    size_t reserved_at_unload; /* the domain's reserved bytes before release  */
    size_t reserved_peak;      /* its peak over the model's life              */
    uint64_t upstream_allocs;  /* upstream calls made for it, the footprint
                                  reservation included                        */
    size_t footprint;          /* bytes reserved up front at load (0: none)   */
    size_t bytes_released;     /* returned to the device by the release       */
    size_t live_blocks;        /* leaked blocks found (all of them)           */
    size_t live_bytes;         /* their bytes (held)                          */
    size_t leaks_written;      /* the first CCR_LEAKS_MAX of them, in leaks   */
    cca_live_block leaks[CCR_LEAKS_MAX];
} ccr_unload_info;

/* Free the model's weights, record its footprint, destroy its domain. The
 * model handle is freed whatever the status. CCR_OK: everything the model
 * reserved went back (info->bytes_released == info->reserved_at_unload).
 * CCR_ERR_LIVE_BLOCKS: blocks were still live in its domain (listed in
 * info): nothing of the domain was released. CCR_ERR_DEVICE: the device
 * failed to synchronize or refused memory back (the domain keeps it,
 * cached). Without a domain (domains off, greedy) it only frees the weights
 * into the allocator's cache. info may be NULL. */
ccr_status ccr_model_release(ccr_model *m, ccr_unload_info *info);

/* ccr_model_release without the report; a leak or failure is a warning
 * (ccr_engine_options.warn). NULL is a no-op. */
void ccr_model_unload(ccr_model *m);

/* The model's domain, for a caller's own allocations that belong to the
 * model (cca_alloc_in) and for its statistics (cca_get_domain_stats). NULL
 * when the model has none (domains off, greedy): the default domain. */
cca_domain *ccr_model_domain(const ccr_model *m);

/* Bytes reserved up front at load from a remembered footprint (0: none). */
size_t ccr_model_footprint(const ccr_model *m);

const ccr_arch *ccr_model_arch(const ccr_model *m);
const char *ccr_model_name(const ccr_model *m);
size_t ccr_model_device_bytes(const ccr_model *m); /* rounded bytes held for weights */

/* Weights that are not finite (NaN, ±Inf) as loaded, i.e. after conversion
 * to float32 (an F64 1e300 becomes Inf), over all tensors; 0 for spec models
 * and for NULL. Loading does not fail on them (a model may be inspected or
 * repaired), but every output they touch is NaN: ccrun warns and exits 4. */
size_t ccr_model_nonfinite_weights(const ccr_model *m);

/* The i-th tensor (in load order: layer by layer, weight then bias) holding
 * non-finite values: its name in the file ("0.weight"; owned by the model)
 * and how many. CCR_ERR_INVALID_ARGUMENT when i is past the last one. */
ccr_status ccr_model_nonfinite_tensor(const ccr_model *m, size_t i, const char **name, size_t *count);

/* Forward pass for `batch` rows: x_host is batch × in floats, y_host receives
 * batch × out floats (probabilities when the model ends in softmax). Every
 * activation is allocated from the allocator and freed as soon as the next
 * layer has consumed it. batch may differ from call to call. A sleeping
 * model (ccr_model_sleep) is refused with CCR_ERR_ASLEEP before anything
 * is touched. */
ccr_status ccr_model_run(ccr_model *m, const float *x_host, size_t batch, float *y_host);

/* The device bytes one ccr_model_run of `batch` rows needs at its peak, at
 * least, into *need (may be NULL; SIZE_MAX on overflow): the weights held plus
 * the activations live at once (the input; a layer's input and output; logits
 * and probabilities), overflow-checked. CCR_ERR_OUT_OF_MEMORY, the message
 * giving needed and available bytes, when that is more than the allocator can
 * ever hold: the device's total (cca_upstream_mem_info at engine creation),
 * or max_reserved when set and smaller, or under policy:greedy the arena
 * reserved at creation when smaller still (greedy never grows past it). Touches no memory; ccr_model_run calls
 * it first, and a caller can call it before allocating a batch's host input.
 * Passing is no promise: rounding, fragmentation and other tenants count too. */
ccr_status ccr_model_check_batch(ccr_model *m, size_t batch, size_t *need);

/* Write the model (weights read back from the device) as a safetensors file
 * with float32 tensors and the architecture in the metadata. A sleeping
 * model is refused with CCR_ERR_ASLEEP (its weights are on the host, no
 * file is created); host memory short is CCR_ERR_OUT_OF_MEMORY before the
 * file is opened (no file created; an existing one, the model's own too,
 * left as it was); a write refused after that is CCR_ERR_IO, leaving a
 * prefix (docs/engine.md, "Outputs are checked to the end"). */
ccr_status ccr_model_save(ccr_model *m, const char *path);

/* ---- Sleep and wake --------------------------------------------------------
 *
 *  - ccr_model_sleep puts the model's memory domain to sleep
 *    (cca_domain_sleep, ccalloc.h): its weights (every live block of its
 *    domain) are copied to host memory and ALL of the domain's device memory
 *    is unmapped: the device's used memory falls by the domain's whole
 *    reservation (exactly, on the simulated device), while the model stays
 *    loaded and every weight pointer stays valid for after the wake.
 *  - No activation is live then: ccr_model_run frees all of its own before
 *    it returns, and the sleep first waits for the engine's stream (CUDA).
 *  - While asleep: ccr_model_run and ccr_model_save are refused
 *    (CCR_ERR_ASLEEP, nothing touched); ccr_model_check_batch, the getters
 *    and ccr_model_release / ccr_model_unload / ccr_engine_release work (the
 *    unload frees the host copy with the domain).
 *  - ccr_model_wake maps the pages under the weights again and copies them
 *    back, all or nothing: the weights are at the same addresses with the
 *    same bytes, so outputs are bit-identical to before the sleep.
 *  - Needs a domain of the model's own (domains on, policy growth) and
 *    expandable segments (the allocator's default): otherwise
 *    CCR_ERR_UNSUPPORTED, nothing changed.
 *  - The wake does not trim other models' cached memory to make room: an
 *    out-of-memory wake leaves the model asleep, and the caller makes room
 *    (unloads or sleeps a model, cca_empty_cache) and wakes again.
 */

/* What one sleep or wake did. */
typedef struct ccr_sleep_info {
    int was_asleep;            /* the model was asleep when the call began      */
    size_t bytes_copied;       /* sleep: live bytes copied to the host; wake:
                                  copied back                                   */
    size_t device_bytes;       /* sleep: device memory given back (unmapped);
                                  wake: mapped again                            */
    size_t host_bytes;         /* host memory holding the copy (sleep: taken;
                                  wake: given back)                             */
    size_t wake_need;          /* device bytes its wake maps: the pages under the
                                  model's weights (blocks a caller allocated in
                                  ccr_model_domain come on top)                 */
    size_t missing;            /* an out-of-memory wake: wake_need minus the
                                  device's free memory (0 otherwise, and when
                                  that memory is unknown)                       */
    size_t device_free_before; /* the device's free memory when the call began
                                  (mem_info)                                    */
    size_t device_free_after;  /* ... and when it ended                         */
    int device_free_read;      /* 1: both were read; 0: the device refused a
                                  mem_info, or the call returned before reading
                                  (an awake model's wake), and both are 0       */
    double ms;                 /* wall time of the call                          */
} ccr_sleep_info;

/* Put model m to sleep (see above). info may be NULL; it is zeroed first.
 * A model asleep already: CCR_OK, was_asleep 1, nothing copied (pages an
 * earlier refused unmap left mapped are unmapped now, device_bytes).
 * Errors:
 *  - CCR_ERR_INVALID_ARGUMENT: m NULL;
 *  - CCR_ERR_UNSUPPORTED: m has no domain of its own (domains off, or
 *    policy greedy: its weights share the default domain with every other
 *    model), or the allocator has classic segments (expandable:0, or a
 *    device without the virtual-memory ops); nothing changed;
 *  - CCR_ERR_DEVICE: the engine's stream could not be waited for (CUDA), or
 *    the allocator's sleep met a device failure
 *    (a synchronize, a copy, the host and copy ops missing): nothing
 *    changed, m awake; or an unmap was refused: m IS asleep (its weights on
 *    the host), the refused pages stay mapped, the message says how many
 *    bytes (sleep again to retry them);
 *  - CCR_ERR_OUT_OF_MEMORY: host memory short for the copy; nothing changed;
 *  - CCR_ERR_ALLOCATOR: any other allocator failure; nothing changed.
 * Cost: cca_domain_sleep's (a copy of the weights to the host), two
 * mem_info, O(layers); with a timeline, its two phase rows (a mem_info
 * each). */
ccr_status ccr_model_sleep(ccr_model *m, ccr_sleep_info *info);

/* Wake model m, all or nothing. info may be NULL; it is zeroed first. A
 * model awake: CCR_OK, nothing done (was_asleep 0).
 * Errors (after any of them m is asleep, its host copy intact):
 *  - CCR_ERR_INVALID_ARGUMENT: m NULL;
 *  - CCR_ERR_OUT_OF_MEMORY: the device's free memory (or max_reserved) is
 *    short for the pages under its weights: info->wake_need and
 *    info->missing say how many bytes it needs and how many are missing, as
 *    the message does; or a map was refused all the same (another tenant);
 *  - CCR_ERR_DEVICE: a copy back failed;
 *  - CCR_ERR_ALLOCATOR: any other allocator failure.
 * Cost: cca_domain_wake's (the pages mapped, the weights copied back, a
 * mem_info), two mem_info; with a timeline, its two phase rows (a mem_info
 * each). */
ccr_status ccr_model_wake(ccr_model *m, ccr_sleep_info *info);

/* 1 while m is asleep (between a ccr_model_sleep and its ccr_model_wake,
 * a sleep whose unmap was refused included); 0 otherwise and for NULL. A
 * model whose domain a caller put to sleep with cca_domain_sleep
 * (ccr_model_domain) is asleep too: run and save refuse it, and
 * ccr_model_wake wakes it; one whose domain a caller woke with
 * cca_domain_wake is awake. */
int ccr_model_asleep(const ccr_model *m);

/* ------------------------------------------------------------------------ */
/* Timeline: one CSV row per allocator event or phase, for plots             */
/* ------------------------------------------------------------------------ */

/* Columns: t_ms,event,phase,model,tag,bytes,allocated,reserved,device_free,
 * fragmentation. event is alloc|free|oom|phase. t_ms counts from creation.
 * device_free is empty in a row whose mem_info the device refused.
 * A path that cannot be created (a missing directory; a FIFO nobody reads,
 * refused, never waited for) is CCR_ERR_IO naming it; NULL path or out
 * CCR_ERR_INVALID_ARGUMENT; host memory short CCR_ERR_OUT_OF_MEMORY. *out
 * is NULL after any failure. */
ccr_status ccr_timeline_open(const char *path, ccr_timeline **out);
/* Flush and close the file and free t (whatever the status; NULL: CCR_OK).
 * CCR_ERR_IO when any row or the close could not be written: the message
 * names the file and the first failure's reason ("t.csv: write failed: No
 * space left on device"); the file then holds part of the rows. */
ccr_status ccr_timeline_close(ccr_timeline *t);

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

/* "1.5G", "512M", "4096" -> bytes (K/M/G/T powers of 1024). */
ccr_status ccr_parse_size(const char *text, size_t *out);

/* Sizes are printed with ccalloc's cca_format_bytes ("1.50 MiB"). */

/* Write s for a person at a terminal: printable ASCII and well-formed
 * printable UTF-8 as they are; control characters (C0, DEL, C1), bidi and
 * line-separator controls, invisible format characters (zero-width ones,
 * U+FEFF, tags), and each byte that is not part of well-formed UTF-8, as
 * \xNN (the table: common/ccai_escape.h). Messages (ccr_last_error, warnings) quote text from
 * model files as it is — a tensor named "\u001b[2J" in the header holds an
 * ESC — so print them with this, never with a plain "%s". NULL is "".
 * Returns the bytes written, or EOF when a write failed (f NULL: EOF,
 * nothing written). */
int ccr_fputs_escaped(const char *s, FILE *f);

#ifdef __cplusplus
}
#endif

#endif /* CCR_H */
