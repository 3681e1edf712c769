/*
 * ccrun — run models one after another in one process, with the memory
 * figures of every phase, and release in between.
 *
 *     ccrun [options] MODEL...        MODEL: file.safetensors or mlp:... spec
 *     ccrun --demo                    greedy vs growth, fragmentation, release
 *
 * For each model: load, run --iters batches of --batch rows, unload, then
 * release (unless --keep-cache): cca_empty_cache and the device's free memory
 * compared with its value before the first load. Errors name the problem,
 * leave the allocator at zero live bytes, and exit non-zero (see --help).
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ccrun.h"

static void usage(FILE *f) {
    fprintf(f, "usage: ccrun [options] MODEL...\n"
               "       ccrun --demo [--device D] [--capacity SIZE]\n"
               "\n"
               "Runs each MODEL in sequence in one process: load, run N batches, unload,\n"
               "release (unless --keep-cache), printing a table of memory figures per phase.\n"
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
               "  --capacity SIZE         simulated device size, K/M/G suffixes (default 1G)\n"
               "  --batch N               rows per batch (default 8)\n"
               "  --iters N               batches per model (default 3)\n"
               "  --keep-cache            never release: memory stays with the process, as in\n"
               "                          TensorFlow (unload only)\n"
               "  --json                  print one JSON document instead of the table\n"
               "                          (MODEL runs; not with --demo)\n"
               "  --timeline FILE.csv     one CSV row per allocator event or phase\n"
               "  --save FILE             after loading the (single) MODEL, write it as safetensors\n"
               "  --seed N                seed of the random input batches (default 1)\n"
               "  --demo                  the whole story: greedy + keep-cache, growth +\n"
               "                          fragmentation + trim, explicit release (3 acts)\n"
               "  --help                  this text\n"
               "\n"
               "exit status: 0 ok, 1 a model failed (bad file, does not fit, ...), 2 bad usage,\n"
               "3 device memory still allocated at exit (a bug),\n"
               "4 a model has non-finite (NaN/Inf) weights: it ran, its outputs are not numbers\n"
               "  (a warning on stderr names each tensor and its count).\n"
               "Environment: CCALLOC_CONF is not read by ccrun; use --conf.\n");
}

static int usage_error(const char *fmt, const char *arg) {
    fprintf(stderr, "ccrun: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (see ccrun --help)\n");
    return CCRUN_ERR_USAGE;
}

static int parse_count(const char *text, size_t *out) {
    char *end;
    if (!text || !*text || *text == '-')
        return 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (*end || v == 0 || v > (1ull << 24))
        return 0;
    *out = (size_t)v;
    return 1;
}

/* 0 on success, else an exit code. */
static int parse_options(int argc, char **argv, ccrun_options *o) {
    enum {
        O_POLICY = 256,
        O_CONF,
        O_DEVICE,
        O_CAPACITY,
        O_BATCH,
        O_ITERS,
        O_KEEP,
        O_JSON,
        O_TIMELINE,
        O_SAVE,
        O_SEED,
        O_DEMO,
        O_HELP
    };
    static const struct option longopts[] = {{"policy", required_argument, 0, O_POLICY},
                                             {"conf", required_argument, 0, O_CONF},
                                             {"device", required_argument, 0, O_DEVICE},
                                             {"capacity", required_argument, 0, O_CAPACITY},
                                             {"batch", required_argument, 0, O_BATCH},
                                             {"iters", required_argument, 0, O_ITERS},
                                             {"keep-cache", no_argument, 0, O_KEEP},
                                             {"json", no_argument, 0, O_JSON},
                                             {"timeline", required_argument, 0, O_TIMELINE},
                                             {"save", required_argument, 0, O_SAVE},
                                             {"seed", required_argument, 0, O_SEED},
                                             {"demo", no_argument, 0, O_DEMO},
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
            char *end;
            errno = 0;
            o->seed = strtoull(optarg, &end, 10);
            if (!isdigit((unsigned char)*optarg) || *end || errno == ERANGE)
                return usage_error("--seed '%s' is not a number in 0..2^64-1", optarg);
            break;
        }
        case O_DEMO: o->demo = 1; break;
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
    if (!o->demo && o->n_models == 0)
        return usage_error("%s", "no MODEL given");
    if (o->demo && o->n_models)
        return usage_error("--demo takes no MODEL (got '%s')", o->models[0]);
    if (o->demo && o->json)
        return usage_error("%s", "--demo prints a report, not JSON: --json is for MODEL runs");
    if (o->save_path && o->n_models != 1)
        return usage_error("%s", "--save needs exactly one MODEL");
    return 0;
}

/* "ccrun: warning: model 'F' has N non-finite weights (NaN/Inf): tensor
 * '0.weight': 1, tensor '0.bias': 1" on stderr, whatever the output mode. */
static void warn_nonfinite(const ccr_model *m, const char *src) {
    fprintf(stderr, "ccrun: warning: model '%s' has %zu non-finite weights (NaN/Inf):", src,
            ccr_model_nonfinite_weights(m));
    const char *name;
    size_t count;
    for (size_t i = 0; ccr_model_nonfinite_tensor(m, i, &name, &count) == CCR_OK; i++)
        fprintf(stderr, "%s tensor '%s': %zu", i ? "," : "", name, count);
    fprintf(stderr, "; its outputs will be NaN (exit status 4)\n");
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
} run_state;

/* Step 1: timeline, allocator configuration, engine, the device banner.
 * CCRUN_OK, or the exit code (the message is printed here). */
static int open_engine(run_state *rs) {
    const ccrun_options *o = rs->o;
    if (o->timeline_path && ccr_timeline_open(o->timeline_path, &rs->tl) != CCR_OK) {
        fprintf(stderr, "ccrun: %s\n", ccr_last_error());
        if (o->json) /* --json promises one document, failures included */
            ccrun_json_document(&rs->rep, NULL, ccr_last_error(), 0);
        return CCRUN_ERR_USAGE;
    }
    rs->conf = ccrun_alloc_conf(o, NULL);
    if (!rs->conf) {
        fprintf(stderr, "ccrun: out of host memory\n");
        return CCRUN_ERR_MODEL;
    }
    ccr_engine_options eo;
    ccr_engine_options_default(&eo);
    eo.device = o->device;
    eo.host_capacity = o->capacity;
    eo.alloc_conf = rs->conf;
    eo.timeline = rs->tl;
    if (!o->json && isatty(STDOUT_FILENO))
        eo.progress = ccrun_progress;
    ccr_status st = ccr_engine_create(&eo, &rs->e);
    if (st != CCR_OK) {
        fprintf(stderr, "ccrun: %s\n", ccr_last_error());
        if (o->json)
            ccrun_json_document(&rs->rep, NULL, ccr_last_error(), 0);
        return st == CCR_ERR_INVALID_ARGUMENT ? CCRUN_ERR_USAGE : CCRUN_ERR_MODEL;
    }
    ccr_device_info dev;
    ccr_engine_device_info(rs->e, &dev);
    char b0[32], b1[32];
    if (!o->json) {
        printf("device %s (%s), %s total, %s free at start; allocator %s\n", dev.name,
               dev.simulated ? "SIMULATED on host memory" : "real GPU",
               cca_format_bytes(dev.total_bytes, b0, sizeof b0), cca_format_bytes(dev.free_baseline, b1, sizeof b1),
               *rs->conf ? rs->conf : "defaults (growth)");
        ccrun_table_header(&rs->rep);
    }
    ccrun_phase(&rs->rep, rs->e, "start", "", 0, "device free before the allocator: %s (the baseline)",
                cca_format_bytes(dev.free_baseline, b0, sizeof b0));
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

/* Step 2a: load SRC (and save it when asked), warn on non-finite weights. */
static int load_model(run_state *rs, const char *src, ccr_model **out) {
    char b0[32];
    ccr_model *m = NULL;
    double t = ccrun_now_ms();
    if (ccr_model_load(rs->e, src, &m) != CCR_OK)
        return model_error(rs, NULL);
    const ccr_arch *a = ccr_model_arch(m);
    size_t nonfinite = ccr_model_nonfinite_weights(m);
    ccrun_phase(&rs->rep, rs->e, "load", src, ccrun_now_ms() - t, "%zu layers, %s of weights%s", a->n_layers,
                cca_format_bytes(ccr_arch_param_bytes(a), b0, sizeof b0),
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

/* Step 2b: --iters passes of one batch. The batch is checked against the
 * device before host memory is taken for it (batch, in, out <= 2^24: the
 * products fit). M stays loaded either way. */
static int run_passes(run_state *rs, ccr_model *m, const char *src) {
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
    double t = ccrun_now_ms();
    for (size_t i = 0; i < o->iters; i++) {
        ccrun_fill_input(rs->x, o->batch * in, o->seed + i);
        if (ccr_model_run(m, rs->x, o->batch, rs->y) != CCR_OK)
            return model_error(rs, NULL);
    }
    double run_ms = ccrun_now_ms() - t;
    ccrun_phase(&rs->rep, rs->e, "run", src, run_ms, "%zu x batch %zu, %.2f ms/batch, y[0][0]=%.6g", o->iters, o->batch,
                run_ms / (double)o->iters, (double)rs->y[0]);
    return CCRUN_OK;
}

/* Step 2c: unload, then release everything unless --keep-cache or the
 * model's step 2b failed (RC, returned unchanged then). */
static int unload_and_release(run_state *rs, ccr_model *m, const char *src, int rc) {
    double t = ccrun_now_ms();
    ccr_model_unload(m);
    ccrun_phase(&rs->rep, rs->e, "unload", src, ccrun_now_ms() - t, "");
    if (rc != CCRUN_OK || rs->o->keep_cache)
        return rc;
    ccr_release_info r;
    t = ccrun_now_ms();
    if (ccr_engine_release(rs->e, &r) != CCR_OK)
        return model_error(rs, NULL);
    char b0[32], b1[64];
    ccrun_phase(&rs->rep, rs->e, "release", src, ccrun_now_ms() - t, "released %s; %s",
                cca_format_bytes(r.cache.bytes_released, b0, sizeof b0), ccrun_baseline_note(&r, b1, sizeof b1));
    return CCRUN_OK;
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
            fprintf(stderr, "ccrun: error: %s\n", rs->errbuf ? rs->errbuf : "(out of host memory for the message)");
        if (rc != CCRUN_OK && !o->json)
            fprintf(stderr, "ccrun: after the error the allocator holds %zu live bytes\n", s.allocated_bytes);
        if (o->json)
            ccrun_json_document(&rs->rep, rs->e,
                                rc == CCRUN_OK ? NULL : rs->errbuf ? rs->errbuf : "out of host memory",
                                s.allocated_bytes);
        if (rc == CCRUN_OK && rs->nonfinite_seen)
            rc = CCRUN_WARN_NONFINITE;
        if (s.allocated_bytes != 0) {
            fprintf(stderr, "ccrun: BUG: %zu bytes of device memory still allocated at exit\n", s.allocated_bytes);
            rc = CCRUN_ERR_LEAK;
        }
    }
    free(rs->x);
    free(rs->y);
    free(rs->errbuf);
    free(rs->conf);
    ccrun_report_free(&rs->rep);
    ccr_engine_destroy(rs->e);
    ccr_timeline_close(rs->tl);
    return rc;
}

/* ccrun MODEL...: open the engine, then per model load, run, unload and
 * release (steps 1-3 above); the first failure stops the sequence. */
static int run_models(const ccrun_options *o) {
    run_state rs = {.o = o, .rep = {stdout, o->json, 0, 0, NULL}};
    int rc = open_engine(&rs); /* on failure rs.e is NULL: finish only frees */
    for (size_t k = 0; k < o->n_models && rc == CCRUN_OK; k++) {
        ccr_model *m = NULL;
        rc = load_model(&rs, o->models[k], &m);
        if (rc == CCRUN_OK)
            rc = unload_and_release(&rs, m, o->models[k], run_passes(&rs, m, o->models[k]));
    }
    return finish(&rs, rc);
}

int main(int argc, char **argv) {
    ccrun_options o;
    int rc = parse_options(argc, argv, &o);
    if (rc == -1)
        return CCRUN_OK;
    if (rc)
        return rc;
    if (o.demo)
        return ccrun_demo(&o);
    return run_models(&o);
}
