/*
 * ccrun — run models one after another in one process, with the memory
 * figures of every phase, and release in between.
 *
 *     ccrun [options] MODEL...        MODEL: file.safetensors or mlp:... spec
 *     ccrun --resident R MODEL...     R stays loaded while each MODEL is swapped
 *     ccrun --sleep A B A B           each turn ends with a sleep, a return wakes
 *     ccrun --demo                    greedy vs growth, fragmentation, release,
 *                                     memory domains, sleep and wake
 *
 * For each model: load, run --iters batches of --batch rows, unload (with
 * memory domains, the default, the unload itself gives the model's memory
 * back), then release (unless --keep-cache): cca_empty_cache and the
 * device's free memory compared with its value before the first load.
 *
 * With --resident, the resident models are loaded first and stay loaded:
 * each MODEL is loaded, run and unloaded while they keep running, and every
 * resident runs again after each unload, its outputs compared (a hash of
 * their bytes) with its first run. The unload row shows the device's free
 * memory rising by the unloaded model's whole reservation; with
 * --no-domains, the unload leaves it cached and a trim gives back only
 * segments no resident block pins.
 *
 * With --sleep, a model's turn ends with ccr_model_sleep instead of an
 * unload (its device memory given back, the model kept loaded), and a
 * model that comes again in the sequence (the same MODEL text) is woken
 * instead of loaded: "sleep" and "wake" rows give the time and the device's
 * free memory (after a sleep: up by the model's whole reservation), and each
 * woken model's outputs are compared (a hash) with its first run, a
 * different hash an error. The last turn's model and the sleeping ones are
 * unloaded at the end, then everything is released.
 *
 * Errors name the problem, leave the allocator at zero live bytes, and exit
 * non-zero (see --help). An output that could not be written whole
 * (standard output, --timeline, --save, --snapshot) is an error too, said
 * with the file and the reason, and two outputs on one file (or an output
 * on a MODEL) are refused before the run (output.c).
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ccai_decimal.h" /* common/: ccai_decimal_uint */
#include "ccai_open.h"    /* common/: ccai_fopen_nowait */
#include "ccai_stdfds.h"  /* common/: ccai_hold_std_fds */
#include "ccrun.h"

static void usage(FILE *f) {
    errno = 0;
    int n = fprintf(
        f, "usage: ccrun [options] MODEL...\n"
           "       ccrun [options] --resident MODEL [--resident MODEL]... [MODEL...]\n"
           "       ccrun [options] --sleep MODEL...      e.g. --sleep A B A B\n"
           "       ccrun --demo [--device D] [--capacity SIZE] [--vm-granularity SIZE]\n"
           "                    [--vm-backing pages|whole-maps]\n"
           "\n"
           "Runs each MODEL in sequence in one process: load, run N batches, unload,\n"
           "release (unless --keep-cache), printing a table of memory figures per phase.\n"
           "Each model has its own memory domain (policy growth): unloading it returns all\n"
           "of its memory at once, while resident models keep theirs (--no-domains: off).\n"
           "MODEL is a safetensors file (layer list in __metadata__[\"" CCR_META_KEY "\"]) or a spec\n"
           "string:  mlp:D0xD1x...xDn[:relu|gelu|none][:softmax][:seed=N][:nobias][:acts=A/B/..]\n"
           "         e.g. mlp:784x4096x4096x10:relu:softmax\n"
           "\n"
           "options:\n"
           "  --policy greedy|growth  allocator policy (default growth)\n"
           "  --conf STR              allocator config, CCALLOC_CONF syntax, e.g.\n"
           "                          \"max_reserved:4G,greedy_fraction:0.8\" (after --policy)\n"
           "  --device auto|cuda|host auto (default): CUDA if a GPU is present, else the\n"
           "                          simulated device\n"
           "  --capacity SIZE         simulated device size, at least 1M, K/M/G/T suffixes\n"
           "                          (default 1G)\n"
           "  --vm-granularity SIZE   the page of expandable segments (--conf expandable:1),\n"
           "                          a power of two from 4K to 1G: on a GPU one driver\n"
           "                          allocation each, so larger pages map in fewer calls\n"
           "                          and give memory back in larger steps (default: the\n"
           "                          device's, 2M)\n"
           "  --vm-backing pages|whole-maps\n"
           "                          the memory behind each map of expandable segments:\n"
           "                          one allocation per map, given back whole (whole-maps,\n"
           "                          the default: on a GPU far fewer driver calls), or one\n"
           "                          per page, any page given back (pages)\n"
           "  --batch N               rows per batch, 1..2^24 (default 8)\n"
           "  --iters N               batches per model, 1..2^24 (default 3)\n"
           "  --keep-cache            never release: memory stays with the process, as in\n"
           "                          TensorFlow (unload only; implies --no-domains)\n"
           "  --resident MODEL        load MODEL first and keep it loaded (up to 8 times):\n"
           "                          it runs again after each other MODEL is unloaded,\n"
           "                          and its outputs must stay the same bytes\n"
           "  --sleep                 end each MODEL's turn with a sleep, not an unload: its\n"
           "                          weights copied to host memory, all its device memory\n"
           "                          given back, the model kept loaded; a MODEL that comes\n"
           "                          again is woken (same addresses), not loaded, and its\n"
           "                          outputs must be the same bytes as at its first run.\n"
           "                          Needs memory domains (policy growth) and expandable\n"
           "                          segments (the default); not with --resident\n"
           "  --no-domains            every model in the allocator's default domain: an\n"
           "                          unloaded model's memory stays cached, shared segments\n"
           "                          with resident models trap it (for comparison)\n"
           "  --footprint-sidecar     remember each model file's peak reserved memory in\n"
           "                          FILE.ccfoot and reserve it up front at its next load\n"
           "                          (in memory within one run: always, with domains)\n"
           "  --json                  print one JSON document instead of the table\n"
           "                          (MODEL runs; not with --demo)\n"
           "  --timeline FILE.csv     one CSV row per allocator event or phase\n"
           "  --save FILE             after loading the (single) MODEL, write it as safetensors\n"
           "  --snapshot FILE         after each model's batches run (the model still loaded),\n"
           "                          write the allocator's snapshot to FILE, replacing the\n"
           "                          last: FILE.pickle in PyTorch's format for\n"
           "                          torch.cuda._memory_viz and pytorch.org/memory_viz (sets\n"
           "                          history:65536 before --conf: the device trace), FILE.json\n"
           "                          as cca_write_snapshot_json (MODEL runs; not with --demo)\n"
           "  --seed N                seed of the random input batches, 0..2^64-1 (default 1)\n"
           "  --demo                  the whole story: greedy + keep-cache, growth +\n"
           "                          fragmentation + trim, explicit release, memory\n"
           "                          domains with a resident model, sleep and wake\n"
           "                          against reload and a process per model (5 acts)\n"
           "  -h, --help              this text\n"
           "\n"
           "Outputs (--timeline, --save, --snapshot, footprint sidecars, and standard output\n"
           "and error when they go to a regular file) must be different files, and none a\n"
           "MODEL or --resident file: two names for one file (./X and X, d/../X, a symlink,\n"
           "a hard link) are refused before anything runs (exit 2), naming both.\n"
           "\n"
           "exit status: 0 ok, 1 a model failed (bad file, does not fit, a leak at unload, a\n"
           "  resident or woken model's outputs changed, a wake without room, ...) or an output could not be made or\n"
           "  written whole (standard output, --timeline, --save, --snapshot: a missing\n"
           "  directory, a full disk, a FIFO nobody reads; stderr names the\n"
           "  file and the reason), 2 bad usage,\n"
           "3 device memory still allocated at exit (a bug),\n"
           "4 a model has non-finite (NaN/Inf) weights: it ran, but its outputs may not be numbers\n"
           "  (a warning on stderr names each tensor and its count).\n"
           "Environment: CCALLOC_CONF is not read by ccrun; use --conf.\n");
    if (n < 0 && f == stdout) /* the text outgrows stdio's buffer: a write fails inside, its reason kept now */
        ccrun_stdout_failed(errno);
}

static int usage_error(const char *fmt, const char *arg) {
    char *text = ccrun_format(fmt, arg);
    ccrun_say("%s (see ccrun --help)", text ? text : fmt);
    free(text);
    return CCRUN_ERR_USAGE;
}

/* A count in 1..2^24, plain decimal as --seed: strtoull alone would take
 * "+5", " 5" and "-5" (as 2^64-5), so the first byte must be a digit. */
static int parse_count(const char *text, size_t *out) {
    unsigned long long v;
    if (ccai_decimal_uint(text, 1, 1ull << 24, &v))
        return 0;
    *out = (size_t)v;
    return 1;
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n > k && strcmp(s + n - k, suffix) == 0;
}

/* 0 on success, else an exit code. */
static int parse_options(int argc, char **argv, ccrun_options *o) {
    enum {
        O_POLICY = 256,
        O_CONF,
        O_DEVICE,
        O_CAPACITY,
        O_VM_GRANULARITY,
        O_VM_BACKING,
        O_BATCH,
        O_ITERS,
        O_KEEP,
        O_JSON,
        O_TIMELINE,
        O_SAVE,
        O_SEED,
        O_DEMO,
        O_RESIDENT,
        O_NO_DOMAINS,
        O_SIDECAR,
        O_SNAPSHOT,
        O_SLEEP,
        O_HELP
    };
    static const struct option longopts[] = {{"policy", required_argument, 0, O_POLICY},
                                             {"conf", required_argument, 0, O_CONF},
                                             {"device", required_argument, 0, O_DEVICE},
                                             {"capacity", required_argument, 0, O_CAPACITY},
                                             {"vm-granularity", required_argument, 0, O_VM_GRANULARITY},
                                             {"vm-backing", required_argument, 0, O_VM_BACKING},
                                             {"batch", required_argument, 0, O_BATCH},
                                             {"iters", required_argument, 0, O_ITERS},
                                             {"keep-cache", no_argument, 0, O_KEEP},
                                             {"json", no_argument, 0, O_JSON},
                                             {"timeline", required_argument, 0, O_TIMELINE},
                                             {"save", required_argument, 0, O_SAVE},
                                             {"seed", required_argument, 0, O_SEED},
                                             {"demo", no_argument, 0, O_DEMO},
                                             {"resident", required_argument, 0, O_RESIDENT},
                                             {"no-domains", no_argument, 0, O_NO_DOMAINS},
                                             {"footprint-sidecar", no_argument, 0, O_SIDECAR},
                                             {"snapshot", required_argument, 0, O_SNAPSHOT},
                                             {"sleep", no_argument, 0, O_SLEEP},
                                             {"help", no_argument, 0, O_HELP},
                                             {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    o->device = CCR_DEVICE_AUTO;
    o->capacity = CCR_DEFAULT_CAPACITY;
    o->batch = 8;
    o->iters = 3;
    o->seed = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case O_POLICY:
            if (strcmp(optarg, "greedy") && strcmp(optarg, "growth"))
                return usage_error("--policy must be greedy or growth, not '%s'", optarg);
            o->policy = optarg;
            break;
        case O_CONF: o->conf = optarg; break;
        case O_DEVICE:
            if (ccr_device_parse(optarg, &o->device) != CCR_OK)
                return usage_error("--device must be auto, cuda or host, not '%s'", optarg);
            break;
        case O_VM_GRANULARITY:
            if (ccr_parse_size(optarg, &o->vm_granularity) != CCR_OK || o->vm_granularity < 4096 ||
                o->vm_granularity > ((size_t)1 << 30) || (o->vm_granularity & (o->vm_granularity - 1)))
                return usage_error("--vm-granularity '%s' is not a power of two from 4K to 1G", optarg);
            break;
        case O_VM_BACKING:
            if (strcmp(optarg, "pages") == 0)
                o->vm_backing = CCA_VM_PAGES;
            else if (strcmp(optarg, "whole-maps") == 0)
                o->vm_backing = CCA_VM_WHOLE_MAPS;
            else
                return usage_error("--vm-backing '%s' is neither pages nor whole-maps", optarg);
            break;
        case O_CAPACITY:
            if (ccr_parse_size(optarg, &o->capacity) != CCR_OK || o->capacity < (1u << 20))
                return usage_error("--capacity '%s' is not a size of at least 1M (e.g. 512M, 2G)", optarg);
            break;
        case O_BATCH:
            if (!parse_count(optarg, &o->batch))
                return usage_error("--batch '%s' is not a count in 1..2^24", optarg);
            o->batch_set = 1;
            break;
        case O_ITERS:
            if (!parse_count(optarg, &o->iters))
                return usage_error("--iters '%s' is not a count in 1..2^24", optarg);
            o->iters_set = 1;
            break;
        case O_KEEP: o->keep_cache = 1; break;
        case O_JSON: o->json = 1; break;
        case O_TIMELINE: o->timeline_path = optarg; break;
        case O_SAVE: o->save_path = optarg; break;
        case O_SEED: {
            /* plain decimal in 0..2^64-1: strtoull alone would take "-1"
             * (as 2^64-1), " 7", "+7" and clamp an overflow to 2^64-1 */
            unsigned long long seed;
            if (ccai_decimal_uint(optarg, 0, ULLONG_MAX, &seed))
                return usage_error("--seed '%s' is not a number in 0..2^64-1", optarg);
            o->seed = seed;
            break;
        }
        case O_DEMO: o->demo = 1; break;
        case O_RESIDENT:
            if (o->n_resident == CCRUN_MAX_RESIDENT)
                return usage_error("--resident is given at most 8 times ('%s' is the ninth)", optarg);
            o->resident[o->n_resident++] = optarg;
            break;
        case O_NO_DOMAINS: o->no_domains = 1; break;
        case O_SIDECAR: o->footprint_sidecar = 1; break;
        case O_SLEEP: o->sleep = 1; break;
        case O_SNAPSHOT:
            if (!ends_with(optarg, ".pickle") && !ends_with(optarg, ".json"))
                return usage_error("--snapshot '%s' must end in .pickle (PyTorch's format) or .json", optarg);
            o->snapshot_path = optarg;
            break;
        case 'h':
        case O_HELP: usage(stdout); return -1;
        case ':': return usage_error("option '%s' needs a value", argv[optind - 1]);
        default:
            if (optopt >= 256)
                return usage_error("option '%s' takes no value", argv[optind - 1]);
            if (optopt) {
                char opt[3] = {'-', (char)optopt, 0};
                return usage_error("unknown option '%s'", opt);
            }
            return usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    o->models = (const char **)(argv + optind);
    o->n_models = (size_t)(argc - optind);
    if (!o->demo && o->n_models == 0 && o->n_resident == 0)
        return usage_error("%s", "no MODEL given");
    if (o->demo && o->n_resident)
        return usage_error("--demo takes no --resident (got '%s'): act 4 has its own", o->resident[0]);
    if (o->save_path && o->n_resident)
        return usage_error("%s", "--save needs exactly one MODEL and no --resident");
    if (o->demo && o->n_models)
        return usage_error("--demo takes no MODEL (got '%s')", o->models[0]);
    if (o->demo && o->snapshot_path)
        return usage_error("--demo takes no --snapshot (got '%s'): it is for MODEL runs", o->snapshot_path);
    if (o->demo && o->json)
        return usage_error("%s", "--demo prints a report, not JSON: --json is for MODEL runs");
    if (o->save_path && o->n_models != 1)
        return usage_error("%s", "--save needs exactly one MODEL");
    if (o->sleep && o->demo)
        return usage_error("%s", "--demo takes no --sleep: it has its own act");
    if (o->sleep && o->n_resident)
        return usage_error("--sleep takes no --resident (got '%s'): every MODEL sleeps in its turn", o->resident[0]);
    if (o->sleep && (o->no_domains || o->keep_cache))
        return usage_error("--sleep needs memory domains: not with %s",
                           o->keep_cache ? "--keep-cache" : "--no-domains");
    if (o->sleep && o->policy && !strcmp(o->policy, "greedy"))
        return usage_error("%s", "--sleep needs memory domains, which policy greedy cannot have");
    return 0;
}

/* "ccrun: warning: model 'F' has N non-finite weights (NaN/Inf): tensor
 * '0.weight': 1, tensor '0.bias': 1" on stderr, whatever the output mode;
 * the tensors' names are the file's, escaped. */
static void warn_nonfinite(const ccr_model *m, const char *src) {
    fputs("ccrun: ", stderr);
    ccai_fprintf_escaped(stderr, "warning: model '%s' has %zu non-finite weights (NaN/Inf):", src,
                         ccr_model_nonfinite_weights(m));
    const char *name;
    size_t count;
    for (size_t i = 0; ccr_model_nonfinite_tensor(m, i, &name, &count) == CCR_OK; i++)
        ccai_fprintf_escaped(stderr, "%s tensor '%s': %zu", i ? "," : "", name, count);
    fputs("; its outputs may not be numbers (exit status 4)\n", stderr);
}

/* One ccrun invocation's state: what run_models' steps share. */
typedef struct run_state {
    const ccrun_options *o;
    ccr_timeline *tl;
    ccr_engine *e;
    ccrun_report rep;
    char *conf;   /* malloc'd allocator configuration */
    char *errbuf; /* malloc'd, whole: no user string is cut */
    float *x, *y; /* the current model's batch buffers */
    int nonfinite_seen;
    int domains; /* models get memory domains (on, and policy growth) */
} run_state;

/* Step 1: timeline, allocator configuration, engine, the device banner.
 * CCRUN_OK, or the exit code (the message is printed here). */
static int open_engine(run_state *rs) {
    const ccrun_options *o = rs->o;
    if (o->timeline_path && ccr_timeline_open(o->timeline_path, &rs->tl) != CCR_OK) {
        ccrun_say("%s", ccr_last_error());
        if (o->json) /* --json promises one document, failures included */
            ccrun_json_document(&rs->rep, NULL, ccr_last_error(), 0);
        return CCRUN_ERR_MODEL; /* an output that cannot be made: 1, as for --snapshot and --save */
    }
    rs->conf = ccrun_alloc_conf(o, NULL);
    if (rs->conf && o->snapshot_path && ends_with(o->snapshot_path, ".pickle")) { /* --conf may change it */
        char *with = ccrun_format("history:%d%s%s", CCRUN_SNAPSHOT_HISTORY, *rs->conf ? "," : "", rs->conf);
        free(rs->conf);
        rs->conf = with;
    }
    if (!rs->conf) {
        ccrun_say("out of host memory");
        return CCRUN_ERR_MODEL;
    }
    ccr_engine_options eo;
    ccr_engine_options_default(&eo);
    eo.device = o->device;
    eo.host_capacity = o->capacity;
    eo.vm_granularity = o->vm_granularity;
    eo.vm_backing = o->vm_backing;
    eo.alloc_conf = rs->conf;
    eo.timeline = rs->tl;
    eo.domains = !o->no_domains && !o->keep_cache;
    eo.footprint_sidecar = o->footprint_sidecar;
    if (!o->json && isatty(STDOUT_FILENO))
        eo.progress = ccrun_progress;
    ccr_status st = ccr_engine_create(&eo, &rs->e);
    if (st != CCR_OK) {
        ccrun_say("%s", ccr_last_error());
        if (o->json)
            ccrun_json_document(&rs->rep, NULL, ccr_last_error(), 0);
        return st == CCR_ERR_INVALID_ARGUMENT ? CCRUN_ERR_USAGE : CCRUN_ERR_MODEL;
    }
    cca_config cfg;
    rs->domains =
        eo.domains && cca_get_config(ccr_engine_allocator(rs->e), &cfg) == CCA_OK && cfg.policy == CCA_POLICY_GROWTH;
    ccr_device_info dev;
    ccr_engine_device_info(rs->e, &dev);
    char b0[32], b1[32];
    if (!o->json) {
        ccai_fprintf_escaped(
            stdout, "device %s (%s), %s total, %s free at start; allocator %s", dev.name,
            dev.simulated ? "SIMULATED on host memory" : "real GPU", cca_format_bytes(dev.total_bytes, b0, sizeof b0),
            cca_format_bytes(dev.free_baseline, b1, sizeof b1), *rs->conf ? rs->conf : "defaults (growth)");
        putchar('\n');
        ccrun_table_header(&rs->rep);
    }
    ccrun_phase(&rs->rep, rs->e, "start", "", 0, "device free before the allocator: %s (the baseline); %s",
                cca_format_bytes(dev.free_baseline, b0, sizeof b0),
                rs->domains ? "one memory domain per model" : "no memory domains (one shared pool)");
    return CCRUN_OK;
}

/* Keep the last error's message for the end; always CCRUN_ERR_MODEL. */
static int model_error(run_state *rs, ccr_model *m) {
    free(rs->errbuf);
    rs->errbuf = ccrun_format("%s", ccr_last_error());
    if (m)
        ccr_model_unload(m);
    return CCRUN_ERR_MODEL;
}

/* Upstream calls that take device memory (allocations and maps), counted by
 * the device: ccrun is its only tenant. */
static unsigned long long device_calls(run_state *rs) {
    cca_upstream_stats us;
    cca_upstream_get_stats(ccr_engine_upstream(rs->e), &us);
    return (unsigned long long)(us.alloc_calls + us.vm_map_calls);
}

static size_t device_free_now(run_state *rs) {
    size_t f = 0, t = 0;
    cca_upstream_mem_info(ccr_engine_upstream(rs->e), &f, &t);
    return f;
}

/* Step 2a: load SRC (and save it when asked), warn on non-finite weights.
 * A load that reserved a remembered footprint says so, with the upstream
 * calls the load made beyond that one reservation (one allocation, or one
 * range mapped whole). */
static int load_model(run_state *rs, const char *src, const char *role, ccr_model **out) {
    char b0[32], b1[32], foot[128] = "";
    ccr_model *m = NULL;
    unsigned long long calls = device_calls(rs);
    double t = ccrun_now_ms();
    if (ccr_model_load(rs->e, src, &m) != CCR_OK)
        return model_error(rs, NULL);
    double ms = ccrun_now_ms() - t;
    const ccr_arch *a = ccr_model_arch(m);
    size_t nonfinite = ccr_model_nonfinite_weights(m);
    calls = device_calls(rs) - calls;
    if (ccr_model_footprint(m))
        snprintf(foot, sizeof foot, "; footprint %s reserved up front (1 upstream call), then %llu upstream calls",
                 cca_format_bytes(ccr_model_footprint(m), b1, sizeof b1), calls ? calls - 1 : 0);
    ccrun_phase(&rs->rep, rs->e, "load", src, ms, "%s%zu layers, %s of weights%s%s", role, a->n_layers,
                cca_format_bytes(ccr_arch_param_bytes(a), b0, sizeof b0), foot,
                nonfinite ? ", NON-FINITE weights (see the warning)" : "");
    if (nonfinite) {
        warn_nonfinite(m, src);
        rs->nonfinite_seen = 1;
    }
    if (rs->o->save_path) {
        t = ccrun_now_ms();
        if (ccr_model_save(m, rs->o->save_path) != CCR_OK)
            return model_error(rs, m);
        ccrun_phase(&rs->rep, rs->e, "save", src, ccrun_now_ms() - t, "wrote %s", rs->o->save_path);
    }
    *out = m;
    return CCRUN_OK;
}

/* --snapshot FILE: the allocator's state now (PyTorch's pickle or JSON),
 * replacing the file's earlier contents. */
static int write_snapshot(run_state *rs) {
    const char *path = rs->o->snapshot_path;
    FILE *f = ccai_fopen_nowait(path, 0); /* a FIFO nobody reads: refused, not waited for */
    cca_status st = CCA_ERR_IO;
    int why = errno; /* the reason of a failed write (the writers keep none) */
    if (f) {
        const cca_allocator *a = ccr_engine_allocator(rs->e);
        errno = 0;
        st = ends_with(path, ".pickle") ? cca_write_snapshot_torch(a, 0, f) : cca_write_snapshot_json(a, f);
        why = st == CCA_ERR_IO ? errno : 0;
        errno = 0;
        if (fclose(f) != 0 && st == CCA_OK) {
            why = errno;
            st = cca_set_error(CCA_ERR_IO, "closing the file failed");
        }
    }
    if (st == CCA_OK)
        return CCRUN_OK;
    free(rs->errbuf);
    rs->errbuf = ccrun_format("--snapshot %s: %s%s%s", path, f ? cca_last_error() : "cannot create", why ? ": " : "",
                              why ? ccai_open_strerror(why) : "");
    return CCRUN_ERR_MODEL;
}

/* Step 2b: --iters passes of one batch. The batch is checked against the
 * device before host memory is taken for it (batch, in, out <= 2^24: the
 * products fit). M stays loaded either way. A resident model (role
 * "resident") or one of --sleep (role NULL) passes `hash`: a hash of every
 * output byte of the passes goes into *hash, shown in the row; with
 * `first`, the hash of its first run, a different one is an error: its
 * outputs changed while other models came and went (or while it slept). */
static int run_passes(run_state *rs, ccr_model *m, const char *src, const char *role, unsigned long long *hash,
                      const unsigned long long *first) {
    const ccrun_options *o = rs->o;
    const ccr_arch *a = ccr_model_arch(m);
    size_t in = a->layers[0].in, out = a->layers[a->n_layers - 1].out;
    if (ccr_model_check_batch(m, o->batch, NULL) != CCR_OK)
        return model_error(rs, NULL);
    free(rs->x);
    free(rs->y);
    rs->x = malloc(o->batch * in * sizeof(float));
    rs->y = malloc(o->batch * out * sizeof(float));
    if (!rs->x || !rs->y) {
        free(rs->errbuf);
        rs->errbuf = ccrun_format("out of host memory for a batch of %zu", o->batch);
        return CCRUN_ERR_MODEL;
    }
    unsigned long long calls = device_calls(rs), h = CCRUN_FNV_BASIS;
    double t = ccrun_now_ms();
    for (size_t i = 0; i < o->iters; i++) {
        ccrun_fill_input(rs->x, o->batch * in, o->seed + i);
        if (ccr_model_run(m, rs->x, o->batch, rs->y) != CCR_OK)
            return model_error(rs, NULL);
        h = ccrun_fnv1a(h, rs->y, o->batch * out * sizeof(float));
    }
    double run_ms = ccrun_now_ms() - t;
    char note[64] = "", same[96] = "";
    if (ccr_model_domain(m))
        snprintf(note, sizeof note, ", %llu upstream calls", device_calls(rs) - calls);
    int changed = hash && first && h != *first;
    if (hash)
        snprintf(same, sizeof same, "; %s%soutputs %016llx%s", role ? role : "", role ? ", " : "", h,
                 !first    ? " (its first run)"
                 : changed ? " CHANGED"
                           : " = its first run");
    ccrun_phase(&rs->rep, rs->e, "run", src, run_ms, "%zu x batch %zu, %.2f ms/batch, y[0][0]=%.6g%s%s", o->iters,
                o->batch, run_ms / (double)o->iters, (double)rs->y[0], note, same);
    if (hash)
        *hash = h;
    if (changed) {
        free(rs->errbuf);
        rs->errbuf = ccrun_format("%s model '%s': outputs changed (hash %016llx, first run %016llx)",
                                  role ? role : "woken", src, h, *first);
        return CCRUN_ERR_MODEL;
    }
    return o->snapshot_path ? write_snapshot(rs) : CCRUN_OK;
}

/* Step 2c: unload. With a domain, the model's memory goes back now: the
 * row gives the device's free memory before and after against what the
 * domain held (exact on the simulated device); a sleeping model (--sleep)
 * held none. A leak at unload (blocks still live in the domain) is an
 * error. */
static int unload_model(run_state *rs, ccr_model *m, const char *src) {
    char b0[32], b1[32];
    size_t before = device_free_now(rs);
    int asleep = ccr_model_asleep(m);
    double t = ccrun_now_ms();
    ccr_unload_info u;
    ccr_status st = ccr_model_release(m, &u);
    double ms = ccrun_now_ms() - t;
    size_t after = device_free_now(rs), rise = after > before ? after - before : 0;
    if (st != CCR_OK) {
        ccrun_phase(&rs->rep, rs->e, "unload", src, ms, "domain NOT released: %zu live blocks", u.live_blocks);
        return model_error(rs, NULL);
    }
    if (asleep)
        ccrun_phase(&rs->rep, rs->e, "unload", src, ms,
                    "asleep: domain released with its host copy, device free +%s (nothing was mapped)",
                    cca_format_bytes(rise, b0, sizeof b0));
    else if (!u.domain)
        ccrun_phase(&rs->rep, rs->e, "unload", src, ms, "no domain: device free +%s, its memory stays cached",
                    cca_format_bytes(rise, b0, sizeof b0));
    else if (rise == u.reserved_at_unload)
        ccrun_phase(&rs->rep, rs->e, "unload", src, ms,
                    "domain released: device free +%s, exactly its whole reservation (%zu B)",
                    cca_format_bytes(rise, b0, sizeof b0), u.reserved_at_unload);
    else
        ccrun_phase(&rs->rep, rs->e, "unload", src, ms,
                    "domain released: device free +%s (%zu B), its reservation was %s (%zu B)",
                    cca_format_bytes(rise, b0, sizeof b0), rise, cca_format_bytes(u.reserved_at_unload, b1, sizeof b1),
                    u.reserved_at_unload);
    return CCRUN_OK;
}

/* Step 2d: release everything unless --keep-cache or the model's step 2b
 * failed (RC, returned unchanged then). */
static int release_all(run_state *rs, const char *src, int rc) {
    if (rc != CCRUN_OK || rs->o->keep_cache)
        return rc;
    ccr_release_info r;
    double t = ccrun_now_ms();
    if (ccr_engine_release(rs->e, &r) != CCR_OK)
        return model_error(rs, NULL);
    char b0[32], b1[64];
    ccrun_phase(&rs->rep, rs->e, "release", src, ccrun_now_ms() - t, "released %s; %s",
                cca_format_bytes(r.cache.bytes_released, b0, sizeof b0), ccrun_baseline_note(&r, b1, sizeof b1));
    return CCRUN_OK;
}

static size_t reserved_now(run_state *rs) {
    cca_stats st;
    cca_get_stats(ccr_engine_allocator(rs->e), &st);
    return st.reserved_bytes;
}

/* Step 2d with resident models still loaded and no domains: the engine's
 * release would unload them, so empty the cache instead, and compare what
 * the process holds afterwards with what it held before the model came
 * (`before`): more means the model's memory is trapped in segments the
 * residents' blocks pin (their own cached space is there either way). */
static void trim_around_residents(run_state *rs, const char *src, size_t before) {
    char b0[32], b1[32], b2[32];
    cca_release_report r;
    double t = ccrun_now_ms();
    ccr_engine_mark(rs->e, "trim", src);
    cca_empty_cache(ccr_engine_allocator(rs->e), &r);
    size_t after = reserved_now(rs);
    if (after > before)
        ccrun_phase(&rs->rep, rs->e, "trim", src, ccrun_now_ms() - t,
                    "released %s; the process still holds %s more than before the model came, in %zu segments "
                    "pinned by resident blocks",
                    cca_format_bytes(r.bytes_released, b0, sizeof b0), cca_format_bytes(after - before, b1, sizeof b1),
                    r.segments_pinned);
    else
        ccrun_phase(&rs->rep, rs->e, "trim", src, ccrun_now_ms() - t,
                    "released %s; the process holds %s, as before the model came (%s of it free in %zu segments "
                    "pinned by resident blocks)",
                    cca_format_bytes(r.bytes_released, b0, sizeof b0), cca_format_bytes(after, b1, sizeof b1),
                    cca_format_bytes(r.free_bytes_pinned + r.free_bytes_trapped, b2, sizeof b2), r.segments_pinned);
}

/* Step 3: what the process still holds, the error, the JSON document, the
 * leak check; frees everything. Returns the exit code. */
static int finish(run_state *rs, int rc) {
    const ccrun_options *o = rs->o;
    char b0[32];
    cca_stats s = {0};
    if (rs->e) {
        cca_get_stats(ccr_engine_allocator(rs->e), &s);
        if (rc == CCRUN_OK && o->keep_cache)
            ccrun_phase(&rs->rep, rs->e, "keep", "", 0, "--keep-cache: the process still holds %s",
                        cca_format_bytes(s.reserved_bytes, b0, sizeof b0));
        if (rc == CCRUN_ERR_MODEL)
            ccrun_say("error: %s", rs->errbuf ? rs->errbuf : "(out of host memory for the message)");
        if (rc != CCRUN_OK && !o->json)
            ccrun_say("after the error the allocator holds %zu live bytes", s.allocated_bytes);
        if (o->json)
            ccrun_json_document(&rs->rep, rs->e,
                                rc == CCRUN_OK ? NULL
                                : rs->errbuf   ? rs->errbuf
                                               : "out of host memory",
                                s.allocated_bytes);
        if (rc == CCRUN_OK && rs->nonfinite_seen)
            rc = CCRUN_WARN_NONFINITE;
        if (s.allocated_bytes != 0) {
            ccrun_say("BUG: %zu bytes of device memory still allocated at exit", s.allocated_bytes);
            rc = CCRUN_ERR_LEAK;
        }
    } else if (rc != CCRUN_OK && !o->json) { /* the message came from open_engine */
        ccrun_say("after the error the allocator holds 0 live bytes (none was created)");
    }
    free(rs->x);
    free(rs->y);
    free(rs->errbuf);
    free(rs->conf);
    ccrun_report_free(&rs->rep);
    ccr_engine_destroy(rs->e); /* its last rows go to the timeline: close it after */
    if (ccr_timeline_close(rs->tl) != CCR_OK) {
        ccrun_say("error: --timeline %s", ccr_last_error());
        rc = ccrun_output_failed(rc);
    }
    return rc;
}

/* ccrun MODEL...: open the engine, then per model load, run, unload and
 * release (steps 1-3 above); the first failure stops the sequence. */
static int run_models(const ccrun_options *o) {
    run_state rs = {.o = o, .rep = {stdout, o->json, 0, 0, NULL}};
    int rc = open_engine(&rs); /* on failure rs.e is NULL: finish only frees */
    for (size_t k = 0; k < o->n_models && rc == CCRUN_OK; k++) {
        ccr_model *m = NULL;
        const char *src = o->models[k];
        rc = load_model(&rs, src, "", &m);
        if (rc == CCRUN_OK) {
            int run_rc = run_passes(&rs, m, src, NULL, NULL, NULL);
            rc = unload_model(&rs, m, src);
            rc = release_all(&rs, src, run_rc != CCRUN_OK ? run_rc : rc);
        }
    }
    return finish(&rs, rc);
}

/* ccrun --resident R... MODEL...: the residents are loaded and run first and
 * stay loaded; then each MODEL is loaded, run and unloaded (with domains its
 * whole reservation goes back at the unload; without, a trim gives back what
 * the residents do not pin, unless --keep-cache), and every resident runs
 * again, its outputs compared with its first run. At the end the residents
 * are unloaded and everything released, as for MODEL runs. */
static int run_resident(const ccrun_options *o) {
    run_state rs = {.o = o, .rep = {stdout, o->json, 0, 0, NULL}};
    ccr_model *res[CCRUN_MAX_RESIDENT] = {0};
    unsigned long long first[CCRUN_MAX_RESIDENT] = {0};
    size_t loaded = 0;
    int rc = open_engine(&rs);
    while (rc == CCRUN_OK && loaded < o->n_resident) {
        const char *src = o->resident[loaded];
        rc = load_model(&rs, src, "resident: ", &res[loaded]);
        if (rc != CCRUN_OK)
            break;
        loaded++;
        rc = run_passes(&rs, res[loaded - 1], src, "resident", &first[loaded - 1], NULL);
    }
    for (size_t k = 0; k < o->n_models && rc == CCRUN_OK; k++) {
        ccr_model *m = NULL;
        const char *src = o->models[k];
        size_t before = reserved_now(&rs);
        rc = load_model(&rs, src, "", &m);
        if (rc != CCRUN_OK)
            break;
        int run_rc = run_passes(&rs, m, src, NULL, NULL, NULL);
        rc = unload_model(&rs, m, src);
        if (run_rc != CCRUN_OK)
            rc = run_rc;
        if (rc == CCRUN_OK && !rs.domains && !o->keep_cache)
            trim_around_residents(&rs, src, before);
        for (size_t i = 0; i < loaded && rc == CCRUN_OK; i++) {
            unsigned long long h;
            rc = run_passes(&rs, res[i], o->resident[i], "resident", &h, &first[i]);
        }
    }
    /* the residents go last, whatever happened: an error leaves zero live bytes */
    for (size_t i = loaded; i-- > 0;) {
        if (rc == CCRUN_OK)
            rc = unload_model(&rs, res[i], o->resident[i]);
        else
            ccr_model_unload(res[i]);
    }
    rc = release_all(&rs, "", rc);
    return finish(&rs, rc);
}

/* --sleep, the end of a turn: M to sleep. The row gives the device's free
 * memory rising by the domain's reservation (exactly, on the simulated
 * device) and what went to the host. */
static int sleep_model(run_state *rs, ccr_model *m, const char *src) {
    char b0[32], b1[32], b2[32];
    cca_domain_stats ds = {0};
    if (ccr_model_domain(m))
        cca_get_domain_stats(ccr_engine_allocator(rs->e), ccr_model_domain(m), &ds);
    ccr_sleep_info s;
    if (ccr_model_sleep(m, &s) != CCR_OK)
        return model_error(rs, NULL);
    size_t rise = s.device_free_after > s.device_free_before ? s.device_free_after - s.device_free_before : 0;
    if (rise == ds.reserved_bytes)
        ccrun_phase(&rs->rep, rs->e, "sleep", src, s.ms,
                    "asleep: device free +%s, exactly its whole reservation (%zu B); %s copied to host",
                    cca_format_bytes(rise, b0, sizeof b0), ds.reserved_bytes,
                    cca_format_bytes(s.bytes_copied, b1, sizeof b1));
    else
        ccrun_phase(&rs->rep, rs->e, "sleep", src, s.ms,
                    "asleep: device free +%s (%zu B), its reservation was %s (%zu B); %s copied to host",
                    cca_format_bytes(rise, b0, sizeof b0), rise, cca_format_bytes(ds.reserved_bytes, b1, sizeof b1),
                    ds.reserved_bytes, cca_format_bytes(s.bytes_copied, b2, sizeof b2));
    return CCRUN_OK;
}

/* --sleep, a model's return: wake it (a wake without room is an error,
 * the message saying how much is missing). */
static int wake_model(run_state *rs, ccr_model *m, const char *src) {
    char b0[32], b1[32];
    ccr_sleep_info w;
    if (ccr_model_wake(m, &w) != CCR_OK)
        return model_error(rs, NULL);
    ccrun_phase(&rs->rep, rs->e, "wake", src, w.ms, "woken: %s mapped again, %s copied back, same addresses",
                cca_format_bytes(w.device_bytes, b0, sizeof b0), cca_format_bytes(w.bytes_copied, b1, sizeof b1));
    return CCRUN_OK;
}

/* ccrun --sleep MODEL...: MODEL k's turn: woken when the same MODEL text
 * came before (it is asleep), else loaded; run, its outputs compared with
 * its first run; then put to sleep, unless it is the last turn. At the
 * end every model is unloaded (the last one awake, the others asleep) and
 * everything released. first[j]/m[j]: the model whose text first appears
 * at position j. */
static int run_sleeping(const ccrun_options *o) {
    run_state rs = {.o = o, .rep = {stdout, o->json, 0, 0, NULL}};
    ccr_model **m = calloc(o->n_models, sizeof *m);
    unsigned long long *first = calloc(o->n_models, sizeof *first);
    int rc = open_engine(&rs);
    if (rc == CCRUN_OK && (!m || !first)) {
        rs.errbuf = ccrun_format("out of host memory for %zu models", o->n_models);
        rc = CCRUN_ERR_MODEL;
    }
    for (size_t k = 0; k < o->n_models && rc == CCRUN_OK; k++) {
        const char *src = o->models[k];
        size_t j = 0;
        while (strcmp(o->models[j], src)) /* ends at k at the latest */
            j++;
        int again = m[j] != NULL;
        rc = again ? wake_model(&rs, m[j], src) : load_model(&rs, src, "", &m[j]);
        if (rc == CCRUN_OK) {
            unsigned long long h;
            rc = run_passes(&rs, m[j], src, NULL, again ? &h : &first[j], again ? &first[j] : NULL);
        }
        if (rc == CCRUN_OK && k + 1 < o->n_models)
            rc = sleep_model(&rs, m[j], src);
    }
    /* every model goes, asleep or awake, whatever happened: an error leaves zero live bytes */
    for (size_t j = o->n_models; m && j-- > 0;) {
        if (!m[j])
            continue;
        if (rc == CCRUN_OK)
            rc = unload_model(&rs, m[j], o->models[j]);
        else
            ccr_model_unload(m[j]);
    }
    free(m);
    free(first);
    rc = release_all(&rs, "", rc);
    return finish(&rs, rc);
}

int main(int argc, char **argv) {
    ccai_hold_std_fds(); /* `>&-`: no file ccrun opens becomes standard output */
    ccrun_options o;
    int rc = parse_options(argc, argv, &o);
    if (rc == -1) /* --help */
        return ccrun_close_stdout(CCRUN_OK);
    if (rc == 0)
        rc = ccrun_check_outputs(&o);
    if (rc)
        return rc;
    rc = o.demo ? ccrun_demo(&o) : o.n_resident ? run_resident(&o) : o.sleep ? run_sleeping(&o) : run_models(&o);
    return ccrun_close_stdout(rc);
}
