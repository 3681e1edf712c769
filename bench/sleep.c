/*
 * sleep.c — `ccbench sleep`: how fast a domain goes to sleep and wakes
 * (cca_domain_sleep, cca_domain_wake), against the plain copy of the same
 * bytes measured in the same run (issue 42's target: sleep and wake at
 * >= 80% of the plain copy's bandwidth for domains of 256 MiB and more).
 *
 * For each --sizes S (default 64M,256M,1G,2G), on a fresh device and
 * allocator (expandable segments, the defaults):
 *   1. the mix: one domain is filled with blocks whose sizes are drawn
 *      log-uniformly from 4 KiB to 64 MiB (xoshiro256**, seed 1, rounded
 *      down to CCA_GRANULARITY) until the live bytes reach S; the last
 *      block is cut to what is left, so the live bytes are exactly S;
 *   2. the pattern: every 8-byte word of every block gets a value of its
 *      block and offset, written through the upstream's copy op from a
 *      host staging buffer (the same code for both devices);
 *   3. each of --reps N passes (default 5): sleep (timed), wake (timed),
 *      every block read back and compared with the pattern (a mismatch:
 *      exit 1, naming size, block and offset); then the plain copy: one
 *      host buffer from the upstream's host_alloc, what sleep takes
 *      (the simulated device's own host memory, cudaMallocHost, pinned,
 *      on CUDA), one copy per block device -> host at the same offsets
 *      sleep uses, one copy_wait (timed: copy out), then host -> device
 *      into the same blocks, one copy_wait (timed: copy in); then a
 *      vm_reserve (not timed), one vm_map of the live bytes, the same
 *      copies into it and a copy_wait (timed: copy in to fresh pages, the
 *      wake's work without the allocator), unmapped and released; the
 *      buffer freed; last, host_alloc of the live bytes in sleep's chunks
 *      (timed: host alloc; then freed), what a sleep's host memory costs
 *      alone (CUDA: cudaMallocHost pins every page), and on CUDA the same
 *      chunks pinned by mmap, huge pages faulted in and cudaHostRegister
 *      (timed: host register; ccb_host_register_ms), the other way a
 *      sleep could take its host memory.
 *      On the simulated device a copy is a memcpy; on CUDA a
 *      cudaMemcpyAsync on the upstream's copy stream, waited for: a pinned
 *      cudaMemcpy.
 *   4. the report: medians (and min, max) of each, as GiB/s of live bytes,
 *      and the ratios sleep / copy out, wake / copy in (the target's) and
 *      wake / copy in to fresh pages.
 * Fairness, first touch: both sides use FRESH host memory every pass.
 * Sleep's timed call includes its host_alloc and the first touch of that
 * buffer as the copy fills it; the copy out's buffer is allocated (not
 * timed) just before, so its first touch happens inside the timed copy
 * too. The host_alloc call itself (cudaMallocHost: page pinning) is in
 * sleep's time and not in the copy's: it is part of what a sleep costs.
 * Wake maps device pages afresh (their first touch is in the wake; on the
 * simulated device the kernel zeroes each fresh page first), while copy
 * in writes blocks whose pages are mapped already: that is the cost of
 * giving the memory back, and the fresh-pages copy measures it apart.
 *
 * Output: the table on stdout, or README.md (device, command, what is
 * timed, machine), sleep.md and sleep.csv into --out. Exit status: 0 ok,
 * 1 a failure or a mismatch, 2 bad usage; on the simulated device a
 * size whose run the host cannot hold (3 x SIZE: host_can_hold) is a
 * failure before any size runs. --device cuda without a GPU:
 * "skipped: no GPU: REASON", exit 0, as `ccbench driver`.
 *
 * ccb_cmd_sleep_on runs the same on a device its caller made, every size
 * on it in turn (the command line never sets one: a test passes a double
 * that corrupts a copy, tests/bench/test_bench_sleep.c, so that the check
 * after the wake is seen to fire).
 */
#include "ccalloc.h"
#include "ccbench.h"
#include "ccai_decimal.h" /* common/: ccai_decimal_uint */
#include "ccai_escape.h"  /* common/: text from outside, escaped for a person */
#include "ccai_rng.h"     /* common/: xoshiro256** */

#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_SIZES 8
#define MIX_MIN ((size_t)4 << 10)
#define MIX_MAX ((size_t)64 << 20)
#define MIX_SEED 1
#define TARGET_RATIO 0.8
#define TARGET_MIN_SIZE ((size_t)256 << 20)

typedef struct sleep_options {
    size_t sizes[MAX_SIZES];
    size_t nsizes;
    int reps;
    int cuda;
    int vm_backing;
    int host_memory;       /* --host-memory: cca_cuda_options.host_memory */
    int host_memory_given; /* refused without --device cuda */
    const char *out;
    const char *command_line;
    cca_upstream *device; /* borrowed (ccb_cmd_sleep_on); NULL: a fresh device per size */
} sleep_options;

/* One size's figures; ms arrays of reps, sorted by the report. */
typedef struct sleep_row {
    size_t size, blocks, live;
    double *ms[7]; /* sleep, wake, copy out, copy in, copy in to fresh pages, host_alloc of sleep's chunks,
                      the same pinned by mmap + cudaHostRegister (CUDA only; -1 elsewhere) */
    int reg_failed; /* a cudaHostRegister pass failed (said on stderr): that column left out */
} sleep_row;
enum { T_SLEEP, T_WAKE, T_OUT, T_IN, T_FRESH, T_HOST, T_REG, NT };
static const char *const t_names[NT] = {"sleep",         "wake",       "copy_out",     "copy_in",
                                        "copy_in_fresh", "host_alloc", "host_register"};

/* Sleep's host chunks (allocator/src/sleep.c, CCAI_SLEEP_CHUNK): consecutive
 * live blocks packed up to this many bytes, a larger block alone. */
#define SLEEP_CHUNK ((size_t)16 << 20)

/* ---- step 1: the options --------------------------------------------------------------- */

static void usage(FILE *f) {
    fprintf(f,
            "usage: ccbench sleep [--sizes S,S,...] [--reps N] [--device host|cuda]\n"
            "                     [--vm-backing pages|whole-maps] [--host-memory pinned|registered]\n"
            "                     [--out DIR]\n"
            "  For each size (default 64M,256M,1G,2G; at most %d, each 1M..1T and a multiple of 512,\n"
            "  K/M/G/T suffixes), a domain filled with blocks of 4 KiB..64 MiB (log-uniform, seed 1) up\n"
            "  to that many live bytes, each block written with a pattern; then --reps passes (1..1000,\n"
            "  default 5) of cca_domain_sleep + cca_domain_wake (the bytes checked after every wake)\n"
            "  and of the plain copy of the same bytes out to fresh host memory and back (upstream copy\n"
            "  ops: memcpy on the simulated device, pinned cudaMemcpy on CUDA). Reports GiB/s (medians)\n"
            "  and the ratios sleep/copy out and wake/copy in (issue 42: >= 0.8 from 256 MiB).\n"
            "  --device host (default: the simulated device) or cuda (GPU 0; without one: skipped).\n"
            "  --host-memory (cuda only): the host memory a sleep's copy is kept in, pinned\n"
            "  (cudaMallocHost, the default) or registered (huge pages + cudaHostRegister).\n"
            "  The simulated device's memory is the host's: a size needs 3 x SIZE of it (more than the\n"
            "  host has: exit 1 before any size runs).\n"
            "  --out DIR: README.md, sleep.md, sleep.csv there; else the table on stdout.\n",
            MAX_SIZES);
}

#define usage_error(...) ccb_usage_error("sleep", __VA_ARGS__)

/* "S,S,...": 1..MAX_SIZES sizes in 1M..1T; an empty item is an error. */
static int parse_sizes(const char *s, sleep_options *so) {
    char buf[256];
    if (strlen(s) >= sizeof buf)
        return -1;
    snprintf(buf, sizeof buf, "%s", s);
    so->nsizes = 0;
    for (char *t = buf, *comma; t; t = comma ? comma + 1 : NULL) {
        comma = strchr(t, ',');
        if (comma)
            *comma = '\0';
        size_t v;
        if (so->nsizes == MAX_SIZES || !*t || cca_parse_size_exact(t, &v) != CCA_OK || v < ((size_t)1 << 20) ||
            v > ((size_t)1 << 40) || v % CCA_GRANULARITY)
            return -1;
        so->sizes[so->nsizes++] = v;
    }
    return 0;
}

/* 0 ok; 1 --help printed; 2 a usage error printed. */
static int parse_options(int argc, char **argv, sleep_options *so) {
    enum { O_SIZES = 256, O_REPS, O_DEVICE, O_VM_BACKING, O_HOST_MEMORY, O_OUT, O_HELP };
    static const struct option longopts[] = {{"sizes", required_argument, 0, O_SIZES},
                                             {"reps", required_argument, 0, O_REPS},
                                             {"device", required_argument, 0, O_DEVICE},
                                             {"vm-backing", required_argument, 0, O_VM_BACKING},
                                             {"host-memory", required_argument, 0, O_HOST_MEMORY},
                                             {"out", required_argument, 0, O_OUT},
                                             {"help", no_argument, 0, O_HELP},
                                             {0, 0, 0, 0}};
    const char *cl = so->command_line;
    cca_upstream *device = so->device;
    *so = (sleep_options){.reps = 5, .vm_backing = CCA_VM_WHOLE_MAPS, .command_line = cl, .device = device};
    parse_sizes("64M,256M,1G,2G", so);
    if (ccb_help_wanted(argc, argv, ":h", longopts, O_HELP)) { /* anywhere, whatever else is there */
        usage(stdout);
        return 1;
    }
    opterr = 0;
    optind = 0; /* GNU: start afresh */
    int c;
    unsigned long long u;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case O_SIZES:
            if (parse_sizes(optarg, so))
                return usage_error(
                    "--sizes '%s' is not a list of at most %d sizes in 1M..1T (multiples of 512) separated by commas",
                    optarg, MAX_SIZES);
            break;
        case O_REPS:
            if (ccai_decimal_uint(optarg, 1, 1000, &u))
                return usage_error("--reps '%s' is not a count in 1..1000", optarg);
            so->reps = (int)u;
            break;
        case O_DEVICE:
            if (strcmp(optarg, "host") && strcmp(optarg, "cuda"))
                return usage_error("--device '%s' is neither host nor cuda", optarg);
            so->cuda = !strcmp(optarg, "cuda");
            break;
        case O_VM_BACKING:
            if (!strcmp(optarg, "pages"))
                so->vm_backing = CCA_VM_PAGES;
            else if (!strcmp(optarg, "whole-maps"))
                so->vm_backing = CCA_VM_WHOLE_MAPS;
            else
                return usage_error("--vm-backing '%s' is neither pages nor whole-maps", optarg);
            break;
        case O_HOST_MEMORY:
            if (!strcmp(optarg, "pinned"))
                so->host_memory = CCA_HOST_MEMORY_PINNED;
            else if (!strcmp(optarg, "registered"))
                so->host_memory = CCA_HOST_MEMORY_REGISTERED;
            else
                return usage_error("--host-memory '%s' is neither pinned nor registered", optarg);
            so->host_memory_given = 1;
            break;
        case O_OUT: so->out = optarg; break;
        case 'h':
        case O_HELP: usage(stdout); return 1;
        default: return ccb_getopt_error("sleep", c, argv);
        }
    }
    if (optind < argc)
        return usage_error("unexpected operand '%s'", argv[optind]);
    if (so->host_memory_given && !so->cuda)
        return usage_error("--host-memory is for --device cuda (the simulated device's host memory is its own)");
    return 0;
}

/* ---- step 2: the device, the mix, the pattern -------------------------------------------- */

/* A fresh upstream for a domain of `size`: 0, 1 skipped (no GPU: why), -1 error (why). */
static int make_upstream(const sleep_options *so, size_t size, cca_upstream **u, char *why, size_t whylen) {
    cca_status st;
    if (so->cuda) {
        cca_cuda_options co = {.device = 0, .vm_backing = so->vm_backing, .host_memory = so->host_memory};
        st = cca_upstream_cuda_create_with(&co, u);
    } else {
        cca_host_options ho = {.capacity = 2 * size + ((size_t)256 << 20), .vm_backing = so->vm_backing};
        st = cca_upstream_host_create_with(&ho, u);
    }
    if (st == CCA_OK)
        return 0;
    snprintf(why, whylen, "%s", cca_last_error());
    return st == CCA_ERR_NO_DEVICE ? 1 : -1;
}

/* The simulated device's memory is the host's: a size's run holds its
 * live bytes three times at once (the domain's pages, the fresh pages of
 * the copy in, the plain copy's host buffer; a sleep's copy: twice).
 * Overcommit lets every map succeed, so a size beyond the host's memory
 * would end by the OOM killer, not an error: refused before any size
 * runs. 0, or -1 (said). */
static int host_can_hold(const sleep_options *so) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (so->cuda || so->device || pages <= 0 || page <= 0)
        return 0;
    size_t host = (size_t)pages <= SIZE_MAX / (size_t)page ? (size_t)pages * (size_t)page : SIZE_MAX;
    for (size_t i = 0; i < so->nsizes; i++) {
        size_t size = so->sizes[i]; /* <= 1T: three of it fit a size_t */
        if (3 * size <= host)
            continue;
        char b0[32], b1[32], b2[32];
        fprintf(stderr,
                "ccbench sleep: --sizes %s needs %s of host memory on the simulated device, this host has %s "
                "(its live bytes three times at once); nothing was run\n",
                cca_format_bytes(size, b0, sizeof b0), cca_format_bytes(3 * size, b1, sizeof b1),
                cca_format_bytes(host, b2, sizeof b2));
        return -1;
    }
    return 0;
}

/* The block sizes of the mix for `size` live bytes into *lens (malloc'd). */
static size_t draw_mix(size_t size, size_t **lens) {
    ccai_rng r;
    ccai_rng_seed(&r, MIX_SEED);
    size_t n = 0, cap = 0, live = 0;
    *lens = NULL;
    const double lo = log((double)MIX_MIN), hi = log((double)MIX_MAX);
    while (live < size) {
        size_t len = (size_t)exp(lo + (hi - lo) * ccai_rng_uniform(&r));
        len = len / CCA_GRANULARITY * CCA_GRANULARITY;
        if (len < MIX_MIN)
            len = MIX_MIN;
        if (len > size - live)
            len = size - live; /* size is a multiple of CCA_GRANULARITY: so is the rest */
        if (n == cap) {
            cap = cap ? 2 * cap : 256;
            size_t *grown = realloc(*lens, cap * sizeof **lens);
            if (!grown) {
                free(*lens);
                *lens = NULL;
                return 0;
            }
            *lens = grown;
        }
        (*lens)[n++] = len;
        live += len;
    }
    return n;
}

static inline uint64_t pattern_word(size_t block, size_t word) {
    return ((uint64_t)block + 1) * 0x9E3779B97F4A7C15ull ^ ((uint64_t)word * 0xD1B54A32D192ED03ull);
}

static void fill_pattern(uint64_t *w, size_t block, size_t len) {
    for (size_t i = 0; i < len / 8; i++)
        w[i] = pattern_word(block, i);
}

/* The first word of block b that differs from the pattern, or SIZE_MAX. */
static size_t check_pattern(const uint64_t *w, size_t block, size_t len) {
    for (size_t i = 0; i < len / 8; i++)
        if (w[i] != pattern_word(block, i))
            return i;
    return SIZE_MAX;
}

/* Everything one size needs. */
typedef struct sleep_setup {
    cca_upstream *u;
    int own_u; /* made here (else the caller's device: not destroyed) */
    cca_allocator *a;
    cca_domain *d;
    size_t n, *lens, *offs;
    void **ptrs;
    void *stage; /* host_alloc of the largest block: pattern in, read-back out */
    size_t stage_len;
} sleep_setup;

static int fail(const char *what, cca_status st) {
    fprintf(stderr, "ccbench sleep: %s: %s: %s\n", what, cca_status_string(st), cca_last_error());
    return -1;
}

/* Copy block i to or from the stage and wait. */
static cca_status stage_copy(sleep_setup *s, size_t i, int to_host) {
    cca_status st = to_host ? cca_upstream_copy(s->u, s->stage, s->ptrs[i], s->lens[i], 1)
                            : cca_upstream_copy(s->u, s->ptrs[i], s->stage, s->lens[i], 0);
    return st == CCA_OK ? cca_upstream_copy_wait(s->u) : st;
}

static int setup(sleep_setup *s, size_t size) {
    cca_config cfg;
    cca_config_default(&cfg);
    cca_status st = cca_create(&cfg, s->u, &s->a);
    if (st != CCA_OK)
        return fail("cca_create", st);
    if ((st = cca_domain_create(s->a, "sleep", &s->d)) != CCA_OK)
        return fail("cca_domain_create", st);
    s->n = draw_mix(size, &s->lens);
    s->offs = calloc(s->n ? s->n : 1, sizeof *s->offs);
    s->ptrs = calloc(s->n ? s->n : 1, sizeof *s->ptrs);
    if (!s->n || !s->offs || !s->ptrs) {
        fprintf(stderr, "ccbench sleep: out of host memory for the mix\n");
        return -1;
    }
    size_t off = 0;
    for (size_t i = 0; i < s->n; i++) {
        s->offs[i] = off;
        off += s->lens[i];
        if (s->lens[i] > s->stage_len)
            s->stage_len = s->lens[i];
        if ((st = cca_alloc_in(s->a, s->d, s->lens[i], NULL, &s->ptrs[i])) != CCA_OK)
            return fail("cca_alloc_in", st);
    }
    if ((st = cca_upstream_host_alloc(s->u, s->stage_len, &s->stage)) != CCA_OK)
        return fail("host_alloc (staging)", st);
    for (size_t i = 0; i < s->n; i++) {
        fill_pattern(s->stage, i, s->lens[i]);
        if ((st = stage_copy(s, i, 0)) != CCA_OK)
            return fail("writing the pattern", st);
    }
    return 0;
}

static void teardown(sleep_setup *s) {
    if (s->stage)
        cca_upstream_host_free(s->u, s->stage, s->stage_len);
    for (size_t i = 0; s->ptrs && i < s->n; i++)
        if (s->ptrs[i])
            cca_free(s->a, s->ptrs[i]);
    if (s->a)
        cca_destroy(s->a);
    if (s->own_u)
        cca_upstream_destroy(s->u);
    free(s->lens);
    free(s->offs);
    free(s->ptrs);
    memset(s, 0, sizeof *s);
}

/* ---- step 3: the passes ---------------------------------------------------------------- */

/* Every block against the pattern: 0, or -1 (a mismatch or a failed copy, said). */
static int verify(sleep_setup *s, size_t size, int rep) {
    for (size_t i = 0; i < s->n; i++) {
        cca_status st = stage_copy(s, i, 1);
        if (st != CCA_OK)
            return fail("reading a block back", st);
        size_t w = check_pattern(s->stage, i, s->lens[i]);
        if (w != SIZE_MAX) {
            fprintf(stderr,
                    "ccbench sleep: MISMATCH after wake %d of the %zu-byte domain: block %zu (%zu bytes) differs "
                    "at byte %zu\n",
                    rep + 1, size, i, s->lens[i], w * 8);
            return -1;
        }
    }
    return 0;
}

/* The copy in once more, into device memory mapped afresh: one vm_reserve
 * and one vm_map of the live bytes (rounded up to the granularity), then a
 * copy per block at its offset and a copy_wait, the map and the copies
 * timed (ms); unmapped and released after. A wake's work with no allocator
 * around it: the first touch of fresh device pages included. */
static int fresh_copy(sleep_setup *s, const void *host, size_t live, double *ms) {
    size_t g = 0;
    cca_status st = cca_upstream_vm_granularity(s->u, &g);
    if (st != CCA_OK)
        return fail("vm_granularity (fresh copy)", st);
    size_t len = (live + g - 1) / g * g;
    void *base = NULL;
    if ((st = cca_upstream_vm_reserve(s->u, len, &base)) != CCA_OK)
        return fail("vm_reserve (fresh copy)", st);
    uint64_t t0 = ccb_now_ns();
    st = cca_upstream_vm_map(s->u, base, len);
    for (size_t i = 0; i < s->n && st == CCA_OK; i++)
        st = cca_upstream_copy(s->u, (char *)base + s->offs[i], (const char *)host + s->offs[i], s->lens[i], 0);
    cca_status w = cca_upstream_copy_wait(s->u);
    *ms = (double)(ccb_now_ns() - t0) / 1e6;
    st = st != CCA_OK ? st : w;
    char why[CCB_WHY_MAX] = "";
    if (st != CCA_OK) /* said below, after the unmap and release have set theirs */
        snprintf(why, sizeof why, "%s", cca_last_error());
    cca_status um = cca_upstream_vm_unmap(s->u, base, len); /* refused if the map was: nothing to unmap */
    cca_status rel = cca_upstream_vm_release(s->u, base, len);
    if (st == CCA_OK)
        st = um != CCA_OK ? um : rel;
    if (st == CCA_OK)
        return 0;
    if (why[0])
        cca_set_error(st, "%s", why);
    return fail("fresh copy", st);
}

/* The plain copy of every block out to fresh host memory and back, each
 * direction timed (ms), then the copy in to fresh device pages. */
static int plain_copy(sleep_setup *s, size_t live, double *out_ms, double *in_ms, double *fresh_ms) {
    void *host = NULL;
    cca_status st = cca_upstream_host_alloc(s->u, live, &host);
    if (st != CCA_OK)
        return fail("host_alloc (plain copy)", st);
    for (int dir = 1; dir >= 0 && st == CCA_OK; dir--) {
        uint64_t t0 = ccb_now_ns();
        for (size_t i = 0; i < s->n && st == CCA_OK; i++)
            st = dir ? cca_upstream_copy(s->u, (char *)host + s->offs[i], s->ptrs[i], s->lens[i], 1)
                     : cca_upstream_copy(s->u, s->ptrs[i], (char *)host + s->offs[i], s->lens[i], 0);
        cca_status w = cca_upstream_copy_wait(s->u);
        st = st == CCA_OK ? w : st;
        *(dir ? out_ms : in_ms) = (double)(ccb_now_ns() - t0) / 1e6;
    }
    int rc = st == CCA_OK ? fresh_copy(s, host, live, fresh_ms) : fail("plain copy", st);
    cca_upstream_host_free(s->u, host, live);
    return rc;
}

/* The host memory a sleep takes, alone: host_alloc of the live bytes in
 * sleep's chunks, in the blocks' order, timed (ms); then freed (not timed).
 * On CUDA each is a cudaMallocHost, which pins its pages: what a sleep pays
 * beside its copies (and overlaps with them: chunk k + 1 is allocated while
 * chunk k copies). On CUDA also the same chunks pinned the other way,
 * huge pages faulted in and cudaHostRegister (reg_ms; -1 elsewhere; that
 * one failing is said and sets *reg_failed, the run goes on: it measures
 * another way, not the sleep). */
static int host_chunks(sleep_setup *s, int cuda, double *ms, double *reg_ms, int *reg_failed) {
    size_t n = 0, cap = s->n;
    void **host = calloc(cap ? cap : 1, sizeof *host);
    size_t *len = calloc(cap ? cap : 1, sizeof *len);
    cca_status st = host && len ? CCA_OK : CCA_ERR_OUT_OF_MEMORY;
    if (st != CCA_OK)
        cca_set_error(st, "no host memory for the chunk list");
    uint64_t t0 = ccb_now_ns();
    for (size_t i = 0; i < s->n && st == CCA_OK;) {
        size_t bytes = s->lens[i++];
        while (i < s->n && bytes + s->lens[i] <= SLEEP_CHUNK)
            bytes += s->lens[i++];
        st = cca_upstream_host_alloc(s->u, bytes, &host[n]);
        if (st == CCA_OK)
            len[n++] = bytes;
    }
    *ms = (double)(ccb_now_ns() - t0) / 1e6;
    char why[CCB_WHY_MAX] = "";
    if (st != CCA_OK)
        snprintf(why, sizeof why, "%s", cca_last_error());
    size_t chunks = n;
    while (n-- > 0)
        cca_upstream_host_free(s->u, host[n], len[n]);
    free(host);
    *reg_ms = -1;
    char reg_why[CCB_WHY_MAX] = "";
    if (st == CCA_OK && cuda && !*reg_failed && ccb_host_register_ms(len, chunks, reg_ms, reg_why, sizeof reg_why)) {
        fprintf(stderr, "ccbench sleep: host memory by cudaHostRegister (its column left out): %s\n", reg_why);
        *reg_failed = 1;
    }
    free(len);
    if (st == CCA_OK)
        return 0;
    cca_set_error(st, "%s", why);
    return fail("host_alloc (sleep's chunks)", st);
}

/* One size: 0, 1 skipped (why), -1 failed (said). */
static int measure(const sleep_options *so, sleep_row *row, char *devname, size_t devlen, char *why, size_t whylen) {
    sleep_setup s = {.u = so->device, .own_u = !so->device};
    int made = so->device ? 0 : make_upstream(so, row->size, &s.u, why, whylen);
    if (made != 0)
        return made;
    snprintf(devname, devlen, "%s", cca_upstream_name(s.u));
    int rc = setup(&s, row->size);
    row->blocks = s.n;
    row->live = row->size;
    for (int r = 0; rc == 0 && r < so->reps; r++) {
        cca_sleep_report rep;
        uint64_t t0 = ccb_now_ns();
        cca_status st = cca_domain_sleep(s.a, s.d, 0, &rep);
        row->ms[T_SLEEP][r] = (double)(ccb_now_ns() - t0) / 1e6;
        if (st != CCA_OK) {
            rc = fail("cca_domain_sleep", st);
            break;
        }
        if (rep.bytes_copied != row->live) {
            fprintf(stderr, "ccbench sleep: sleep copied %zu bytes, the domain has %zu live\n", rep.bytes_copied,
                    row->live);
            rc = -1;
            break;
        }
        t0 = ccb_now_ns();
        st = cca_domain_wake(s.a, s.d, &rep);
        row->ms[T_WAKE][r] = (double)(ccb_now_ns() - t0) / 1e6;
        if (st != CCA_OK) {
            rc = fail("cca_domain_wake", st);
            break;
        }
        rc = verify(&s, row->size, r);
        if (rc == 0)
            rc = plain_copy(&s, row->live, &row->ms[T_OUT][r], &row->ms[T_IN][r], &row->ms[T_FRESH][r]);
        if (rc == 0)
            rc = host_chunks(&s, so->cuda, &row->ms[T_HOST][r], &row->ms[T_REG][r], &row->reg_failed);
    }
    teardown(&s);
    return rc;
}

/* ---- step 4: the report -------------------------------------------------------------- */

static double median_ms(const sleep_row *r, int t, int reps) {
    return ccb_quantile(r->ms[t], (size_t)reps, 0.5);
}

static double gibs(size_t bytes, double ms) {
    return ms > 0 ? (double)bytes / (double)(1u << 30) / (ms / 1e3) : 0;
}

/* "yes", "NO" or "n/a" (below TARGET_MIN_SIZE). */
static const char *target(const sleep_row *r, int reps) {
    if (r->size < TARGET_MIN_SIZE)
        return "n/a";
    double s = median_ms(r, T_OUT, reps) / median_ms(r, T_SLEEP, reps);
    double w = median_ms(r, T_IN, reps) / median_ms(r, T_WAKE, reps);
    return s >= TARGET_RATIO && w >= TARGET_RATIO ? "yes" : "NO";
}

/* The host memory sleep's copy is kept in, as the csv's host_memory column says it. */
static const char *host_memory_name(const sleep_options *so) {
    if (!so->cuda)
        return "simulated";
    return so->host_memory == CCA_HOST_MEMORY_REGISTERED ? "registered" : "pinned";
}

static void write_md(FILE *f, const sleep_options *so, const sleep_row *rows, size_t n, const char *devname) {
    fprintf(f, "Sleep and wake on %s (%s), %d reps, medians; GiB/s of live bytes\n\n", devname,
            !so->cuda ? "SIMULATED device: copies are memcpy"
            : so->host_memory == CCA_HOST_MEMORY_REGISTERED
                ? "GPU; host memory: registered, huge pages + cudaHostRegister"
                : "GPU; host memory: pinned, cudaMallocHost",
            so->reps);
    fprintf(f, "| domain | blocks | sleep GiB/s | wake GiB/s | copy out GiB/s | copy in GiB/s | sleep / copy out | "
               "wake / copy in | >= 0.8 (from 256 MiB) | copy in, fresh pages GiB/s | wake / fresh copy in | "
               "host_alloc, sleep's chunks GiB/s | the same by cudaHostRegister GiB/s |\n");
    fprintf(f, "|--:|--:|--:|--:|--:|--:|--:|--:|:-:|--:|--:|--:|--:|\n");
    for (size_t i = 0; i < n; i++) {
        const sleep_row *r = &rows[i];
        char sz[32];
        double g[NT];
        for (int t = 0; t < NT; t++)
            g[t] = gibs(r->live, median_ms(r, t, so->reps));
        char reg[32] = "n/a";
        if (so->cuda)
            snprintf(reg, sizeof reg, r->reg_failed ? "failed" : "%.2f", g[T_REG]);
        fprintf(f, "| %s | %zu | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %s | %.2f | %.2f | %.2f | %s |\n",
                cca_format_bytes(r->size, sz, sizeof sz), r->blocks, g[T_SLEEP], g[T_WAKE], g[T_OUT], g[T_IN],
                g[T_OUT] > 0 ? g[T_SLEEP] / g[T_OUT] : 0, g[T_IN] > 0 ? g[T_WAKE] / g[T_IN] : 0, target(r, so->reps),
                g[T_FRESH], g[T_FRESH] > 0 ? g[T_WAKE] / g[T_FRESH] : 0, g[T_HOST], reg);
    }
}

static void write_csv(FILE *f, const sleep_options *so, const sleep_row *rows, size_t n, const char *devname) {
    fprintf(f, "device,simulated,domain_bytes,blocks,live_bytes,reps");
    for (int t = 0; t < NT; t++)
        fprintf(f, ",%s_ms_median,%s_ms_min,%s_ms_max,%s_gibs", t_names[t], t_names[t], t_names[t], t_names[t]);
    fprintf(f, ",sleep_ratio,wake_ratio,target_met,wake_fresh_ratio,host_memory\n");
    for (size_t i = 0; i < n; i++) {
        const sleep_row *r = &rows[i];
        fprintf(f, "%s,%d,%zu,%zu,%zu,%d", devname, !so->cuda, r->size, r->blocks, r->live, so->reps);
        double m[NT];
        for (int t = 0; t < NT; t++) {
            m[t] = median_ms(r, t, so->reps);
            if (t == T_REG && (!so->cuda || r->reg_failed)) /* not measured: empty fields */
                fprintf(f, ",,,,");
            else
                fprintf(f, ",%.3f,%.3f,%.3f,%.3f", m[t], r->ms[t][0], r->ms[t][so->reps - 1], gibs(r->live, m[t]));
        }
        fprintf(f, ",%.3f,%.3f,%s,%.3f,%s\n", m[T_SLEEP] > 0 ? m[T_OUT] / m[T_SLEEP] : 0,
                m[T_WAKE] > 0 ? m[T_IN] / m[T_WAKE] : 0, target(r, so->reps),
                m[T_WAKE] > 0 ? m[T_FRESH] / m[T_WAKE] : 0, host_memory_name(so));
    }
}

/* 0, or -1 when the command line could not be formatted (ccb_fprintf_row). */
static int write_readme(FILE *f, const sleep_options *so, const sleep_row *rows, size_t n, const char *devname) {
    fprintf(f, "# ccbench sleep\n\n");
    fprintf(f, "- device: %s (%s)\n", devname,
            so->cuda ? "GPU; plain copy: pinned cudaMemcpy" : "simulated device: every copy is a memcpy");
    if (so->cuda)
        fprintf(f, "- host memory (sleep's copy, the plain copy's buffer): %s\n",
                so->host_memory == CCA_HOST_MEMORY_REGISTERED
                    ? "registered: an mmap per chunk, huge pages, faulted in, cudaHostRegister"
                    : "pinned: cudaMallocHost per chunk");
    int bad = ccb_write_command_md(f, so->command_line);
    ccb_write_machine_md(f);
    fprintf(f,
            "\n## What is timed\n\n"
            "A domain per size, filled with blocks of 4 KiB..64 MiB (log-uniform, seed %d) up to the size in\n"
            "live bytes, every block written with a pattern. Each pass: `cca_domain_sleep` (wait, host_alloc,\n"
            "a copy per block, copy_wait, unmap), `cca_domain_wake` (map, a copy per block, copy_wait,\n"
            "host_free), every block read back and checked (not timed); then the plain copy: a fresh\n"
            "host_alloc buffer (not timed), a copy per block at the same offsets device -> host and a\n"
            "copy_wait (copy out), host -> device and a copy_wait (copy in). Both sides first-touch fresh\n"
            "host memory inside the timed copy. Sleep's time includes its host_alloc and the unmaps, wake's\n"
            "the maps and the first touch of the fresh device pages; copy in writes pages mapped already.\n"
            "Then copy in to fresh pages: one vm_reserve (not timed), one vm_map of the live bytes and the\n"
            "same copies into it and a copy_wait (timed), unmapped and released: the wake's work without\n"
            "the allocator. Last, host_alloc of the live bytes in sleep's chunks (consecutive blocks up to\n"
            "16 MiB, a larger block alone; timed, then freed): the host memory a sleep takes, alone (on CUDA\n"
            "cudaMallocHost, which pins pages; a sleep allocates chunk k + 1 while chunk k copies); on CUDA\n"
            "also the same chunks pinned the other way: an mmap each, huge pages asked for and faulted in,\n"
            "cudaHostRegister (timed, then unregistered). Medians of the passes; min and max in sleep.csv.\n"
            "Ratios: sleep / copy out, wake / copy in (the target's), wake / copy in to fresh pages.\n\n",
            MIX_SEED);
    write_md(f, so, rows, n, devname);
    return bad;
}

static int report(const sleep_options *so, sleep_row *rows, size_t n, const char *devname) {
    for (size_t i = 0; i < n; i++)
        for (int t = 0; t < NT; t++)
            ccb_quantile(rows[i].ms[t], (size_t)so->reps, 0.5); /* sorts: min and max at the ends */
    if (!so->out) {
        write_md(stdout, so, rows, n, devname);
        return 0;
    }
    /* so->out: made before anything ran */
    FILE *readme = ccb_open_out(so->out, "README.md"), *md = ccb_open_out(so->out, "sleep.md"),
         *csv = ccb_open_out(so->out, "sleep.csv");
    if (readme && md && csv) {
        ccb_out_formatted(write_readme(readme, so, rows, n, devname), so->out, "README.md");
        write_md(md, so, rows, n, devname);
        write_csv(csv, so, rows, n, devname);
    }
    int bad = ccb_close_out(readme, so->out, "README.md") != 0;
    bad |= ccb_close_out(md, so->out, "sleep.md") != 0;
    bad |= ccb_close_out(csv, so->out, "sleep.csv") != 0;
    if (bad)
        return 1;
    ccai_fprintf_escaped(stdout, "ccbench sleep: wrote %s/README.md, sleep.md, sleep.csv\n", so->out);
    return 0;
}

int ccb_cmd_sleep(int argc, char **argv, const char *command_line) {
    return ccb_cmd_sleep_on(argc, argv, command_line, NULL);
}

int ccb_cmd_sleep_on(int argc, char **argv, const char *command_line, cca_upstream *device) {
    sleep_options so = {.command_line = command_line, .device = device};
    int rc = parse_options(argc, argv, &so);
    if (rc)
        return rc == 1 ? 0 : rc;
    if (host_can_hold(&so))
        return 1;
    if (so.out && ccb_mkdir_p(so.out))
        return 1; /* said and counted: before anything runs, a skip included */
    sleep_row rows[MAX_SIZES] = {0};
    char devname[128] = "", why[CCB_WHY_MAX] = "";
    for (size_t i = 0; i < so.nsizes && rc == 0; i++) {
        rows[i].size = so.sizes[i];
        for (int t = 0; t < NT; t++)
            if (!(rows[i].ms[t] = calloc((size_t)so.reps, sizeof(double))))
                rc = 1;
        if (rc) {
            fprintf(stderr, "ccbench sleep: out of host memory\n");
            break;
        }
        int m = measure(&so, &rows[i], devname, sizeof devname, why, sizeof why);
        if (m == 1) {
            printf("skipped: no GPU: %s\n", why);
            break; /* rc stays 0 */
        }
        if (m != 0) {
            if (*why)
                ccai_fprintf_escaped(stderr, "ccbench sleep: %s\n", why);
            rc = 1;
        } else if (i + 1 == so.nsizes) {
            rc = report(&so, rows, so.nsizes, devname);
        }
    }
    for (size_t i = 0; i < so.nsizes; i++)
        for (int t = 0; t < NT; t++)
            free(rows[i].ms[t]);
    return rc;
}
