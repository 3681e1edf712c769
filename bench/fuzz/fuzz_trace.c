/*
 * fuzz_trace.c — libFuzzer target for ccbench's trace reader (bench/trace.c).
 *
 * Each input is a whole trace file, plain CSV or gzip'd CSV (zlib decides by
 * the magic bytes, as it does for a real file): written to one scratch file
 * and loaded with ccb_trace_load_capped under a cap of 8 MiB, so that huge
 * counts, many ids and gzip bombs reach the budget (budget.c) quickly. A load
 * that fails must leave the trace empty and name a reason. Whatever it
 * accepts must
 *
 *   1. round-trip: ccb_trace_write, then ccb_trace_read of that text, gives
 *      the same trace event for event (ops, slots, sizes, streams, domains),
 *      the same marks, domain names and counts (the reader's promise:
 *      read(write(t)) == t);
 *   2. replay: ccb_replay through the host strategy ccalloc-growth on a
 *      64 MiB simulated device (one timed pass, no driver costs) returns 0
 *      (replay checks block tags at every free and that nothing stays
 *      reserved after the final release), its pattern check ran, and when
 *      no alloc was refused its peak of live requested bytes is the
 *      analysis's; for traces of at most 4096 events (replay's observe pass
 *      samples after every event; longer ones are read only).
 *
 * and a plain (not gzip'd) input must load alike three ways: from the file,
 * from the same bytes gzip'd (zlib must change nothing the reader sees:
 * the same status and message), and through ccb_trace_read on a memory
 * stream with no budget (inputs of at most 64 KiB stay far below the cap,
 * so the budget must refuse nothing the reader accepts).
 *
 * Build and run: scripts/fuzz.sh trace [SECONDS] (clang, ASan + UBSan).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static void replay(const ccb_trace *t) {
    if (t->n > REPLAY_MAX_EVENTS)
        return;
    static const ccb_replay_options o = {.device_bytes = (size_t)64 << 20, .reps = 1, .timeline_points = 8};
    ccb_result r;
    if (ccb_replay(t, "ccalloc-growth", &o, &r) != 0)
        die("replay of an accepted trace failed", r.why);
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
        snprintf(path, sizeof path, "/tmp/ccb_fuzz_trace.%ld.csv", (long)getpid());
        snprintf(gz_path, sizeof gz_path, "/tmp/ccb_fuzz_trace.%ld.csv.gz", (long)getpid());
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
    if (rc == 0) {
        round_trip(&t);
        replay(&t);
    }
    ccb_trace_free(&t);
    if (!(size >= 2 && data[0] == 0x1f && data[1] == 0x8b))
        differential(data, size, gz_path, rc, err);
    return 0;
}
