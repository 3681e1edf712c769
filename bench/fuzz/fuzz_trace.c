/*
 * fuzz_trace.c — libFuzzer target for ccbench's trace reader (bench/trace.c).
 *
 * Each input is a whole trace file, plain CSV or gzip'd CSV (the reader
 * decides by gzip's magic bytes, as for a real file): written to a scratch
 * file and loaded with ccb_trace_load_capped under a cap of 8 MiB, so that
 * huge counts, many ids and gzip bombs reach the budget (budget.c) quickly.
 * A load that fails must leave the trace empty and name a reason. The
 * scratch files (the input, and its gzip'd copy for the differential
 * below) are two files in memory (memfd_create), opened by their
 * /proc/self/fd names: nothing is left on disk, even by a crash, and every
 * input is the same file by identity, which the reader notes once
 * (outputs.c), so an input allocates no more than it frees and libFuzzer's
 * leak detection reruns only inputs that do (a second run and a
 * LeakSanitizer pass each: two thirds of the run's time when every input
 * was a new file). Whatever it accepts must
 *
 *   1. round-trip: ccb_trace_write, then ccb_trace_read of that text, gives
 *      the same trace event for event (ops, slots, sizes, streams, domains),
 *      the same marks, domain names and counts (the reader's promise:
 *      read(write(t)) == t);
 *   2. replay: ccb_replay through one host strategy (a hash of the input
 *      picks one of the ccalloc presets that run without a GPU, or the
 *      uncached device-malloc; scripts/fuzz.sh builds the allocator with
 *      CCA_DEBUG=2, its invariant walk after every call) on a 64 MiB
 *      simulated device (one timed pass, no driver costs) returns 0
 *      (replay checks block tags at every free and that nothing stays
 *      reserved after the final release), its pattern check ran, and when
 *      no alloc was refused its peak of live requested bytes is the
 *      analysis's; for traces of at most 4096 events (replay's observe pass
 *      samples after every event; longer ones are read only).
 *
 * An input that starts with the byte 0xA5 is a program that writes a valid
 * trace (synthesize, below), which must load, then goes the same way.
 * A plain (not gzip'd) input must load alike three ways: from the file,
 * from the same bytes gzip'd (inflating must change nothing the reader sees:
 * the same status and message), and through ccb_trace_read on a memory
 * stream with no budget (inputs of at most 64 KiB stay far below the cap,
 * so the budget must refuse nothing the reader accepts).
 *
 * Build and run: scripts/fuzz.sh trace [SECONDS] (clang, ASan + UBSan).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <zlib.h>

#include "ccbench.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* malloc of a huge block must return NULL (a refusal the reader handles),
 * not abort the process as ASan does by default */
const char *__asan_default_options(void);
const char *__asan_default_options(void) {
    return "allocator_may_return_null=1";
}

#define LOAD_CAP ((size_t)8 << 20)
#define REPLAY_MAX_EVENTS 4096

static void die(const char *what, const char *detail) {
    fprintf(stderr, "fuzz_trace: %s (%s)\n", what, detail ? detail : "");
    abort();
}

static int same_event(const ccb_event *a, const ccb_event *b) {
    return a->op == b->op && a->slot == b->slot && a->size == b->size && a->stream == b->stream &&
           a->domain == b->domain;
}

/* t written and read back must equal t */
static void round_trip(const ccb_trace *t) {
    char *text = NULL;
    size_t len = 0;
    FILE *w = open_memstream(&text, &len);
    if (!w)
        return;
    if (ccb_trace_write(t, w) != 0)
        die("ccb_trace_write failed", NULL);
    fclose(w);
    FILE *r = fmemopen(text, len, "r");
    if (!r)
        die("fmemopen", NULL);
    ccb_trace back;
    ccb_trace_init(&back, "back");
    char err[256] = "";
    if (ccb_trace_read(&back, r, err, sizeof err) != 0) {
        fprintf(stderr, "written:\n%.4000s\n", text);
        die("a written trace does not read back", err);
    }
    fclose(r);
    char where[160];
    if (back.n != t->n || back.slots != t->slots || back.nmarks != t->nmarks || back.ndomains != t->ndomains) {
        snprintf(where, sizeof where, "n %zu/%zu slots %zu/%zu marks %zu/%zu domains %zu/%zu", t->n, back.n,
                 (size_t)t->slots, (size_t)back.slots, (size_t)t->nmarks, (size_t)back.nmarks, (size_t)t->ndomains,
                 (size_t)back.ndomains);
        die("read(write(t)) counts differ", where);
    }
    for (size_t i = 0; i < t->n; i++)
        if (!same_event(&t->ev[i], &back.ev[i])) {
            snprintf(where, sizeof where, "event %zu", i);
            die("read(write(t)) event differs", where);
        }
    for (size_t i = 0; i < t->nmarks; i++)
        if (strcmp(t->marks[i], back.marks[i]) != 0)
            die("read(write(t)) mark differs", t->marks[i]);
    for (size_t i = 1; i < t->ndomains; i++)
        if (strcmp(t->domains[i].name, back.domains[i].name) != 0)
            die("read(write(t)) domain name differs", t->domains[i].name);
    if ((t->comments_len || back.comments_len) &&
        (t->comments_len != back.comments_len || memcmp(t->comments, back.comments, t->comments_len) != 0))
        die("read(write(t)) comments differ", NULL);
    ccb_trace_free(&back);
    free(text);
}

/* The host strategies replay runs, one per input (chosen by a hash of it):
 * every ccalloc preset that runs without a GPU, and the uncached device. */
static const char *const strategies[] = {"ccalloc-growth",   "ccalloc-greedy",     "ccalloc-nosmall",
                                         "ccalloc-maxsplit", "ccalloc-onelarge",   "ccalloc-shared",
                                         "ccalloc-expandable", "ccalloc-expandable-greedy", "device-malloc"};

static void replay(const ccb_trace *t, const uint8_t *data, size_t size) {
    if (t->n > REPLAY_MAX_EVENTS)
        return;
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < size; i++)
        h = (h ^ data[i]) * 16777619u;
    const char *spec = strategies[h % (sizeof strategies / sizeof strategies[0])];
    static const ccb_replay_options o = {.device_bytes = (size_t)64 << 20, .reps = 1, .timeline_points = 8};
    ccb_result r;
    if (ccb_replay(t, spec, &o, &r) != 0) {
        fprintf(stderr, "strategy %s\n", spec);
        die("replay of an accepted trace failed", r.why);
    }
    if (!r.checked)
        die("replay's pattern check did not run", r.why);
    /* with no refusal, replay's live requested bytes are the analysis's */
    if (!r.ooms && r.peak_requested != t->peak_requested) {
        char n[96];
        snprintf(n, sizeof n, "replay %zu, analysis %zu", r.peak_requested, t->peak_requested);
        die("peak requested bytes differ", n);
    }
    ccb_result_free(&r);
}

/* ---- synthesized traces ----------------------------------------------------
 * Byte mutations rarely keep a trace valid for long, so an input whose first
 * byte is SYNTH is read as a program that writes a valid v3 trace instead
 * (4 bytes a step): allocs of ids 1..32 with sizes from a table of edges
 * (0, 1, granule +-1, pool limits, segment sizes, the device, 2^60), frees
 * of live ids, marks, empty_cache, trims, domain declarations, reservations
 * and releases (when none of the domain's blocks is live), new sections.
 * The reader must accept it (the synthesizer keeps the format's rules), so
 * the replay gets long valid traces. */
#define SYNTH 0xA5
#define SYNTH_IDS 32

static const uint64_t synth_sizes[] = {0,          1,           511,         512,         513,
                                       4096,       (1u << 20) - 1, 1u << 20,   (1u << 20) + 1, 2u << 20,
                                       10u << 20,  (20u << 20) + 1, 32u << 20, 64u << 20,   (64u << 20) + 1,
                                       1ull << 30, 1ull << 60,  12345,       999999,      3u << 20};
#define NSIZES (sizeof synth_sizes / sizeof synth_sizes[0])

typedef struct synth_block {
    int live;
    uint64_t size;
    unsigned stream, domain;
} synth_block;

/* The trace text of program p[0..n) (malloc'd, *len bytes). */
static char *synthesize(const uint8_t *p, size_t n, size_t *len) {
    char *text = NULL;
    FILE *f = open_memstream(&text, len);
    if (!f)
        abort();
    synth_block b[SYNTH_IDS + 1] = {{0}};
    unsigned domains = 0, seq = 0;       /* declared in this section (1..domains) */
    unsigned dlive[8] = {0};             /* live blocks per local domain (0..7)   */
    unsigned long long next_id = 1;      /* ids of this section, never reused     */
    unsigned long long id_of[SYNTH_IDS + 1] = {0};
    uint64_t live = 0; /* live bytes, every section's: kept below 2^62 (the reader refuses 2^64) */
    fprintf(f, "# ccalloc trace v3\nseq,op,id,size,stream,domain,name\n");
    for (size_t i = 0; i + 4 <= n; i += 4) {
        unsigned op = p[i] % 12, k = 1 + p[i + 1] % SYNTH_IDS;
        uint64_t size = synth_sizes[p[i + 2] % NSIZES];
        unsigned stream = p[i + 3] % 4, dom = domains ? (p[i + 3] >> 2) % (domains + 1) : 0;
        synth_block *x = &b[k];
        if (op <= 4 && !x->live) {
            if (live + size > (1ull << 62))
                size = 1;
            live += size;
            *x = (synth_block){1, size, stream, dom};
            id_of[k] = next_id++;
            dlive[dom]++;
            fprintf(f, "%u,alloc,%llu,%llu,%u,%u\n", seq++, id_of[k], (unsigned long long)size, stream, dom);
        } else if (op <= 7 && x->live) {
            x->live = 0;
            live -= x->size;
            dlive[x->domain]--;
            fprintf(f, "%u,free,%llu,%llu,%u,%u\n", seq++, id_of[k], (unsigned long long)x->size, x->stream,
                    x->domain);
        } else if (op == 8) {
            fprintf(f, "%u,mark,0,0,0,0,step-%u\n", seq++, p[i + 1]);
        } else if (op == 9) {
            if (p[i + 1] & 1)
                fprintf(f, "%u,empty_cache,0,0,0,0\n", seq++);
            else
                fprintf(f, "%u,trim,0,%llu,0,0\n", seq++, (unsigned long long)size);
        } else if (op == 10) {
            unsigned what = p[i + 1] % 3;
            if (what == 0 && domains < 7)
                fprintf(f, "%u,domain,0,0,0,%u,model-%u\n", seq++, ++domains, p[i + 2]);
            else if (what == 1 && size)
                fprintf(f, "%u,domain_reserve,0,%llu,0,%u\n", seq++, (unsigned long long)size, dom);
            else if (what == 2 && !dlive[dom])
                fprintf(f, "%u,domain_release,0,0,0,%u\n", seq++, dom);
        } else if (op == 11 && p[i + 1] % 8 == 0) { /* a new section: the old one's live blocks stay live */
            fprintf(f, "seq,op,id,size,stream,domain,name\n");
            memset(b, 0, sizeof b);
            memset(dlive + 1, 0, sizeof dlive - sizeof dlive[0]); /* domain 0 is every section's */
            domains = 0;
            next_id = 1;
        }
    }
    fclose(f);
    return text;
}

/* Load `path` (plain or gzip'd): 0 or -1, and the message in err. */
static int load(const char *path, char *err, size_t errlen, ccb_trace *t) {
    err[0] = '\0';
    int rc = ccb_trace_load_capped(t, path, LOAD_CAP, err, errlen);
    if (rc != 0) {
        if (!err[0])
            die("a refused trace left no message", NULL);
        if (t->n || t->ev || t->marks || t->domains || t->comments)
            die("a refused trace left events or arrays", err);
    }
    return rc;
}

/* The plain input loaded two more ways must give what the file gave. */
static void differential(const uint8_t *data, size_t size, const char *gz_path, int rc, const char *err) {
    gzFile g = gzopen(gz_path, "wb");
    if (!g || (size && gzwrite(g, data, (unsigned)size) != (int)size) || gzclose(g) != Z_OK)
        abort();
    ccb_trace t;
    char err2[256];
    int rc2 = load(gz_path, err2, sizeof err2, &t);
    ccb_trace_free(&t);
    /* the messages name the file only where zlib failed, which it must not here */
    if (rc2 != rc || (rc && strcmp(err, err2) != 0)) {
        fprintf(stderr, "plain: %d '%s'\ngzip'd: %d '%s'\n", rc, err, rc2, err2);
        die("the same bytes gzip'd load otherwise", NULL);
    }
    FILE *m = size ? fmemopen((void *)data, size, "r") : fopen("/dev/null", "r");
    if (!m)
        abort();
    ccb_trace_init(&t, "memory");
    char err3[256] = "";
    int rc3 = ccb_trace_read(&t, m, err3, sizeof err3);
    fclose(m);
    ccb_trace_free(&t);
    if (rc3 != rc || (rc && strcmp(err, err3) != 0)) {
        fprintf(stderr, "load: %d '%s'\nread, no budget: %d '%s'\n", rc, err, rc3, err3);
        die("the reader without a budget disagrees with the load", NULL);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char path[64], gz_path[64];
    if (!path[0]) {
        int fd = memfd_create("ccb_fuzz_trace.csv", 0), gz_fd = memfd_create("ccb_fuzz_trace.csv.gz", 0);
        if (fd < 0 || gz_fd < 0)
            die("memfd_create", strerror(errno));
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        snprintf(gz_path, sizeof gz_path, "/proc/self/fd/%d", gz_fd);
        /* small pages: the simulated device asks for huge ones, and each
         * block the replay's pattern touches would fault in and zero 2 MiB
         * (allocator/fuzz/fuzz_api.c says the same); refused: only slower */
        (void)prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
    char *program = NULL;
    if (size && data[0] == SYNTH) {
        program = synthesize(data + 1, size - 1, &size);
        data = (const uint8_t *)program;
    }
    FILE *f = fopen(path, "wb");
    if (!f)
        abort();
    if (size && fwrite(data, 1, size, f) != size)
        abort();
    fclose(f);
    ccb_trace t;
    char err[256];
    int rc = load(path, err, sizeof err, &t);
    if (program && rc != 0)
        die("a synthesized trace was refused", err);
    if (rc == 0) {
        round_trip(&t);
        replay(&t, data, size);
    }
    ccb_trace_free(&t);
    if (!(size >= 2 && data[0] == 0x1f && data[1] == 0x8b))
        differential(data, size, gz_path, rc, err);
    free(program);
    return 0;
}
