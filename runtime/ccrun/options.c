/*
 * options.c — ccrun's command line: --help and the options, parsed into a
 * ccrun_options.
 *
 * Rules:
 * - Owns: ccrun_parse_options and the --help text (usage).
 * - Every option is checked here, before any device or file is touched: a
 *   bad value or a bad combination is a usage error (exit 2) naming it.
 * - Counts and sizes are plain decimal (ccai_decimal_uint): strtoull alone
 *   would take "+5", " 5" and "-5".
 * - Sets no field the command line has no option for: ccrun_options'
 *   upstream and child_ccrun stay NULL (they are for tests).
 * - An option given twice: its last value (getopt's order), every value
 *   checked as it comes; --resident appends (up to CCRUN_MAX_RESIDENT).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "ccai_decimal.h" /* common/: ccai_decimal_uint */
#include "ccrun.h"

static void usage(FILE *f) {
    errno = 0;
    int n = fprintf(
        f, "usage: ccrun [options] MODEL...\n"
           "       ccrun [options] --resident MODEL [--resident MODEL]... [MODEL...]\n"
           "       ccrun [options] --sleep MODEL...      e.g. --sleep A B A B\n"
           "       ccrun --demo [--device D] [--capacity SIZE] [--vm-granularity SIZE]\n"
           "                    [--vm-backing pages|whole-maps] [--conf STR] [--batch N]\n"
           "                    [--iters N] [--seed N] [--timeline FILE.csv]\n"
           "\n"
           "Runs each MODEL in sequence in one process: load, run N batches, unload,\n"
           "release (unless --keep-cache), printing a table of memory figures per phase.\n"
           "Each model has its own memory domain (policy growth): unloading it returns all\n"
           "of its memory at once, while resident models keep theirs (--no-domains: off).\n"
           "MODEL is a safetensors file (layer list in __metadata__[\"" CCR_META_KEY "\"]) or a spec\n"
           "string:  mlp:D0xD1x...xDn[:relu|gelu|none][:softmax|:nosoftmax][:seed=N]\n"
           "                 [:nobias][:acts=A/B/..]\n"
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
           "                          a power of two from 4K to 1G: on a GPU over\n"
           "                          --vm-backing pages one driver allocation each, so\n"
           "                          larger pages map in fewer calls; memory goes back in\n"
           "                          steps of a page at least (default: the device's, 2M);\n"
           "                          on the simulated device at most --capacity\n"
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
           "  --sleep                 end each MODEL's turn but the last with a sleep, not\n"
           "                          an unload: its weights copied to host memory, all its\n"
           "                          device memory given back, the model kept loaded; a\n"
           "                          MODEL that comes again is woken (same addresses), not\n"
           "                          loaded, and its outputs must be the same bytes as at\n"
           "                          its first run (the last turn's model stays awake, then\n"
           "                          is unloaded). Needs memory domains (policy growth)\n"
           "                          and expandable segments (the default); not with\n"
           "                          --resident\n"
           "  --no-domains            every model in the allocator's default domain: an\n"
           "                          unloaded model's memory stays cached, shared segments\n"
           "                          with resident models trap it (for comparison)\n"
           "  --footprint-sidecar     remember each model file's peak reserved memory in\n"
           "                          FILE.ccfoot and reserve it up front at its next load\n"
           "                          (in memory within one run: always, with domains);\n"
           "                          needs domains: not with --no-domains, --keep-cache or\n"
           "                          policy greedy\n"
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
           "An option given twice takes its last value (--conf too: the values are not\n"
           "joined); each value is checked as it comes, so a bad one is refused even when\n"
           "a later one would do. --resident adds a model each time.\n"
           "\n"
           "Outputs (--timeline, --save, --snapshot, footprint sidecars, the CCALLOC_TRACE\n"
           "file, and standard output and error when they go to a regular file) must be\n"
           "different files, and none a MODEL or --resident file: two names for one file\n"
           "(./X and X, d/../X, a symlink, a hard link) are refused before anything runs\n"
           "(exit 2), naming both.\n"
           "\n"
           "exit status: 0 ok, 1 a model failed (bad file, does not fit, a leak at unload, a\n"
           "  resident or woken model's outputs changed, a wake without room, ...) or an output could not be made or\n"
           "  written whole (standard output, --timeline, --save, --snapshot: a missing\n"
           "  directory, a full disk, a FIFO nobody reads; a CCALLOC_TRACE file the library\n"
           "  would not open or a recording cut short by a full disk, also in --json's \"error\";\n"
           "  stderr names the file and the reason), 2 bad usage,\n"
           "3 device memory still allocated at exit (a bug),\n"
           "4 a model has non-finite (NaN/Inf) weights: it ran, but its outputs may not be numbers\n"
           "  (a warning on stderr names each tensor and its count).\n"
           "Environment: CCALLOC_CONF is not read by ccrun; use --conf. CCALLOC_TRACE=FILE records\n"
           "  the allocator's trace (see the exit status; --demo's child ccrun records none, the\n"
           "  file being the demo's). Under an address-space limit (ulimit -v), an OpenBLAS built\n"
           "  with OpenMP and older than 0.3.31 (Debian 12's 0.3.21) maps 128 MiB per OpenMP thread\n"
           "  (OMP_NUM_THREADS, else one per core) while ccrun loads, and retries a refused map\n"
           "  forever: ccrun hangs before it starts, saying nothing (measured: ulimit -v 51000 to\n"
           "  313000 on 2 cores; below, the loader fails, exit 127). Raise the limit or set\n"
           "  OMP_NUM_THREADS=1 (docs/engine.md, \"Address-space limits\").\n");
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

int ccrun_parse_options(int argc, char **argv, ccrun_options *o) {
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
    optind = 0; /* GNU: start afresh, from argv[1], whatever an earlier call left */
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
            if (cca_parse_size_exact(optarg, &o->vm_granularity) != CCA_OK || o->vm_granularity < 4096 ||
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
            if (!ccrun_ends_with(optarg, ".pickle") && !ccrun_ends_with(optarg, ".json"))
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
    if (o->demo && (o->policy || o->keep_cache || o->no_domains || o->footprint_sidecar))
        return usage_error("--demo takes no %s: its acts choose their policy, cache and domains themselves",
                           o->policy       ? "--policy"
                           : o->keep_cache ? "--keep-cache"
                           : o->no_domains ? "--no-domains"
                                           : "--footprint-sidecar");
    if (o->save_path && o->n_models != 1)
        return usage_error("%s", "--save needs exactly one MODEL");
    if (o->sleep && o->demo)
        return usage_error("%s", "--demo takes no --sleep: it has its own act");
    if (o->sleep && o->n_resident)
        return usage_error("--sleep takes no --resident (got '%s'): every MODEL sleeps in its turn", o->resident[0]);
    if (o->sleep && (o->no_domains || o->keep_cache))
        return usage_error("--sleep needs memory domains: not with %s",
                           o->keep_cache ? "--keep-cache" : "--no-domains");
    /* the footprint is a domain's peak: without domains nothing is written
     * (policy greedy, which --conf may set or undo after --policy: run.c,
     * domains_policy_ok, before the engine opens) */
    if (o->footprint_sidecar && (o->no_domains || o->keep_cache))
        return usage_error("--footprint-sidecar needs memory domains: not with %s",
                           o->keep_cache ? "--keep-cache" : "--no-domains");
    return 0;
}
