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
               "3 device memory still allocated at exit (a bug).\n"
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

static int run_models(const ccrun_options *o) {
    ccr_timeline *tl = NULL;
    ccr_engine *e = NULL;
    ccrun_report rep = {stdout, o->json, 0, 0, NULL};
    char conf[512], errbuf[1024] = "";
    int rc = CCRUN_OK;
    float *x = NULL, *y = NULL;

    if (o->timeline_path && ccr_timeline_open(o->timeline_path, &tl) != CCR_OK) {
        fprintf(stderr, "ccrun: %s\n", ccr_last_error());
        if (o->json) /* --json promises one document, failures included */
            ccrun_json_document(&rep, NULL, ccr_last_error(), 0);
        return CCRUN_ERR_USAGE;
    }
    ccrun_alloc_conf(o, NULL, conf, sizeof conf);
    ccr_engine_options eo;
    ccr_engine_options_default(&eo);
    eo.device = o->device;
    eo.host_capacity = o->capacity;
    eo.alloc_conf = conf;
    eo.timeline = tl;
    if (!o->json && isatty(STDOUT_FILENO))
        eo.progress = ccrun_progress;
    ccr_status st = ccr_engine_create(&eo, &e);
    if (st != CCR_OK) {
        fprintf(stderr, "ccrun: %s\n", ccr_last_error());
        if (o->json)
            ccrun_json_document(&rep, NULL, ccr_last_error(), 0);
        ccr_timeline_close(tl);
        return st == CCR_ERR_INVALID_ARGUMENT ? CCRUN_ERR_USAGE : CCRUN_ERR_MODEL;
    }
    ccr_device_info dev;
    ccr_engine_device_info(e, &dev);
    char b0[32], b1[32];
    if (!o->json) {
        printf("device %s (%s), %s total, %s free at start; allocator %s\n", dev.name,
               dev.simulated ? "SIMULATED on host memory" : "real GPU",
               cca_format_bytes(dev.total_bytes, b0, sizeof b0), cca_format_bytes(dev.free_baseline, b1, sizeof b1),
               *conf ? conf : "defaults (growth)");
        ccrun_table_header(&rep);
    }
    ccrun_phase(&rep, e, "start", "", 0, "device free before the allocator: %s (the baseline)",
                cca_format_bytes(dev.free_baseline, b0, sizeof b0));

    for (size_t k = 0; k < o->n_models && rc == CCRUN_OK; k++) {
        const char *src = o->models[k];
        ccr_model *m = NULL;
        double t = ccrun_now_ms();
        st = ccr_model_load(e, src, &m);
        if (st != CCR_OK) {
            snprintf(errbuf, sizeof errbuf, "%s", ccr_last_error());
            rc = CCRUN_ERR_MODEL;
            break;
        }
        const ccr_arch *a = ccr_model_arch(m);
        ccrun_phase(&rep, e, "load", src, ccrun_now_ms() - t, "%zu layers, %s of weights", a->n_layers,
                    cca_format_bytes(ccr_arch_param_bytes(a), b0, sizeof b0));
        if (o->save_path) {
            t = ccrun_now_ms();
            if (ccr_model_save(m, o->save_path) != CCR_OK) {
                snprintf(errbuf, sizeof errbuf, "%s", ccr_last_error());
                ccr_model_unload(m);
                rc = CCRUN_ERR_MODEL;
                break;
            }
            ccrun_phase(&rep, e, "save", src, ccrun_now_ms() - t, "wrote %s", o->save_path);
        }
        size_t in = a->layers[0].in, out = a->layers[a->n_layers - 1].out;
        free(x);
        free(y);
        x = malloc(o->batch * in * sizeof(float));
        y = malloc(o->batch * out * sizeof(float));
        if (!x || !y) {
            snprintf(errbuf, sizeof errbuf, "out of host memory for a batch of %zu", o->batch);
            ccr_model_unload(m);
            rc = CCRUN_ERR_MODEL;
            break;
        }
        t = ccrun_now_ms();
        for (size_t i = 0; i < o->iters && rc == CCRUN_OK; i++) {
            ccrun_fill_input(x, o->batch * in, o->seed + i);
            if (ccr_model_run(m, x, o->batch, y) != CCR_OK) {
                snprintf(errbuf, sizeof errbuf, "%s", ccr_last_error());
                rc = CCRUN_ERR_MODEL;
            }
        }
        double run_ms = ccrun_now_ms() - t;
        if (rc == CCRUN_OK)
            ccrun_phase(&rep, e, "run", src, run_ms, "%zu x batch %zu, %.2f ms/batch, y[0][0]=%.6g", o->iters, o->batch,
                        run_ms / (double)o->iters, (double)y[0]);
        t = ccrun_now_ms();
        ccr_model_unload(m);
        ccrun_phase(&rep, e, "unload", src, ccrun_now_ms() - t, "");
        if (rc != CCRUN_OK || o->keep_cache)
            continue;
        ccr_release_info r;
        t = ccrun_now_ms();
        st = ccr_engine_release(e, &r);
        if (st != CCR_OK) {
            snprintf(errbuf, sizeof errbuf, "%s", ccr_last_error());
            rc = CCRUN_ERR_MODEL;
            break;
        }
        ccrun_phase(&rep, e, "release", src, ccrun_now_ms() - t, "released %s; device free %s baseline",
                    cca_format_bytes(r.cache.bytes_released, b0, sizeof b0),
                    r.device_free_after == r.device_free_baseline ? "==" : "!=");
    }
    if (rc == CCRUN_OK && o->keep_cache) {
        cca_stats s;
        cca_get_stats(ccr_engine_allocator(e), &s);
        ccrun_phase(&rep, e, "keep", "", 0, "--keep-cache: the process still holds %s",
                    cca_format_bytes(s.reserved_bytes, b0, sizeof b0));
    }
    if (rc != CCRUN_OK)
        fprintf(stderr, "ccrun: error: %s\n", errbuf);
    cca_stats s;
    cca_get_stats(ccr_engine_allocator(e), &s);
    if (rc != CCRUN_OK && !o->json)
        fprintf(stderr, "ccrun: after the error the allocator holds %zu live bytes\n", s.allocated_bytes);
    if (o->json)
        ccrun_json_document(&rep, e, rc == CCRUN_OK ? NULL : errbuf, s.allocated_bytes);
    if (s.allocated_bytes != 0) {
        fprintf(stderr, "ccrun: BUG: %zu bytes of device memory still allocated at exit\n", s.allocated_bytes);
        rc = CCRUN_ERR_LEAK;
    }
    free(x);
    free(y);
    ccrun_report_free(&rep);
    ccr_engine_destroy(e);
    ccr_timeline_close(tl);
    return rc;
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
