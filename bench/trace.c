/*
 * trace.c — the allocation trace: reading and writing the CSV format of the
 * allocator's recorder (allocator/src/trace.c), and the analysis every replay
 * is checked against.
 *
 * Format (documented in docs/benchmarks.md):
 *
 *     # ccalloc trace v1                  <- '#' lines: provenance, kept
 *     # source: pid 1234
 *     seq,op,id,size,stream               <- column header: opens a SECTION
 *     0,alloc,1,4096,0                    <- id pairs a free with its alloc
 *     1,free,1,4096,0                        size = requested bytes
 *                                            stream = 0 default, 1.. others
 *
 * The recorder writes one section per process (all allocators alive at once
 * share it, ids unique across them) and a new section each time the trace is
 * reopened after every allocator closed it; older traces had one section per
 * allocator. Either way ids are only unique within a section, so the reader
 * maps (section, id) to a dense SLOT through a hash table: slots
 * are numbered in alloc order, and a replay keeps its live pointers in an
 * array indexed by slot (O(1) per event, no hashing while timing). Writing
 * emits one section with id = slot + 1, so write(read(x)) is canonical and
 * read(write(t)) == t event for event.
 *
 * Costs: reading is O(events) with one hash insert per alloc and one lookup
 * per free; analysis is one O(events) pass over a live-size array.
 *
 * Errors name the line: a free of an id that is not live, a free whose size
 * differs from its alloc's, an alloc reusing a live id, a bad field.
 */
#include "ccbench.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ccalloc.h"

static void *xrealloc(void *p, size_t n) {
    void *q = realloc(p, n);
    if (!q && n) {
        fprintf(stderr, "ccbench: out of host memory (%zu bytes)\n", n);
        abort(); /* the harness itself cannot go on; never library code */
    }
    return q;
}

void ccb_trace_init(ccb_trace *t, const char *name) {
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name ? name : "trace");
}

void ccb_trace_free(ccb_trace *t) {
    free(t->ev);
    free(t->comments);
    memset(t, 0, sizeof *t);
}

static void push(ccb_trace *t, ccb_event e) {
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 1024;
        t->ev = xrealloc(t->ev, t->cap * sizeof *t->ev);
    }
    t->ev[t->n++] = e;
}

uint32_t ccb_trace_alloc(ccb_trace *t, uint64_t size, unsigned stream) {
    uint32_t slot = (uint32_t)t->slots++;
    push(t, (ccb_event){.size = size, .slot = slot, .op = CCB_ALLOC, .stream = (uint8_t)stream});
    return slot;
}

/* The free carries the alloc's size and stream; generators keep them in a
 * side array, so look them up only through the caller: see gen.c. Here the
 * free is appended with size/stream filled by ccb_trace_analyze's rules. */
void ccb_trace_release(ccb_trace *t, uint32_t slot) {
    push(t, (ccb_event){.size = 0, .slot = slot, .op = CCB_FREE, .stream = 0});
}

void ccb_trace_comment(ccb_trace *t, const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    size_t old = t->comments ? strlen(t->comments) : 0, add = strlen(line);
    t->comments = xrealloc(t->comments, old + add + 2);
    memcpy(t->comments + old, line, add);
    t->comments[old + add] = '\n';
    t->comments[old + add + 1] = '\0';
}

/* ---- (section, id) -> slot: open addressing, linear probing ---------------- */

typedef struct idmap {
    uint64_t *keys; /* 0 = empty; key = (section << 44 | id) + 1 */
    uint32_t *slots;
    size_t cap, n;
} idmap;

static uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

static void idmap_grow(idmap *m);

static uint32_t *idmap_find(idmap *m, uint64_t key, int insert) {
    if (insert && (m->n + 1) * 2 > m->cap)
        idmap_grow(m);
    if (!m->cap)
        return NULL;
    for (size_t i = mix(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == key)
            return &m->slots[i];
        if (m->keys[i] == 0) {
            if (!insert)
                return NULL;
            m->keys[i] = key;
            m->n++;
            return &m->slots[i];
        }
    }
}

static void idmap_grow(idmap *m) {
    idmap old = *m;
    m->cap = old.cap ? old.cap * 2 : 1024;
    m->keys = calloc(m->cap, sizeof *m->keys);
    m->slots = calloc(m->cap, sizeof *m->slots);
    if (!m->keys || !m->slots) {
        fprintf(stderr, "ccbench: out of host memory\n");
        abort();
    }
    m->n = 0;
    for (size_t i = 0; i < old.cap; i++)
        if (old.keys[i])
            *idmap_find(m, old.keys[i], 1) = old.slots[i];
    free(old.keys);
    free(old.slots);
}

/* ---- reading --------------------------------------------------------------- */

static int fail(char *err, size_t len, const char *fmt, ...) {
    if (err && len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, len, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int parse_u64(const char *s, uint64_t *v) {
    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    char *end;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || (*end != '\0' && *end != '\n' && *end != '\r'))
        return -1;
    *v = x;
    return 0;
}

int ccb_trace_read(ccb_trace *t, FILE *f, char *err, size_t errlen) {
    char line[1024];
    size_t lineno = 0;
    uint64_t section = 0;
    int in_section = 0;
    idmap m = {0};
    int rc = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n') {
            rc = fail(err, errlen, "line %zu: too long", lineno);
            break;
        }
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (len == 0)
            continue;
        if (line[0] == '#') {
            const char *c = line + 1;
            while (*c == ' ')
                c++;
            if (strcmp(c, "ccalloc trace v1") != 0) /* written back once by ccb_trace_write */
                ccb_trace_comment(t, "%s", c);
            continue;
        }
        if (strcmp(line, "seq,op,id,size,stream") == 0) {
            section += in_section; /* the first header opens section 0 */
            in_section = 1;
            continue;
        }
        /* seq,op,id,size,stream */
        char *field[5];
        size_t nf = 0;
        char *save = NULL, *tok = strtok_r(line, ",", &save);
        for (; tok && nf < 5; tok = strtok_r(NULL, ",", &save))
            field[nf++] = tok;
        if (nf != 5 || tok) {
            rc = fail(err, errlen, "line %zu: expected 5 fields seq,op,id,size,stream", lineno);
            break;
        }
        uint64_t seq, id, size, stream;
        if (parse_u64(field[0], &seq) || parse_u64(field[2], &id) || parse_u64(field[3], &size) ||
            parse_u64(field[4], &stream) || stream > 255 || id >= (1ull << 44) || section >= (1ull << 19)) {
            rc = fail(err, errlen, "line %zu: bad number (seq, id < 2^44, size, stream < 256)", lineno);
            break;
        }
        (void)seq; /* order of lines is the order of events */
        uint64_t key = ((section << 44) | id) + 1;
        if (strcmp(field[1], "alloc") == 0) {
            uint32_t *slot = idmap_find(&m, key, 0);
            if (slot && *slot != UINT32_MAX) {
                rc = fail(err, errlen, "line %zu: alloc of id %" PRIu64 " which is already live", lineno, id);
                break;
            }
            if (t->slots >= UINT32_MAX - 1) {
                rc = fail(err, errlen, "line %zu: more than 2^32 allocations", lineno);
                break;
            }
            if (size == 0) { /* cca_alloc(0) returns NULL and is never recorded */
                rc = fail(err, errlen, "line %zu: alloc of size 0", lineno);
                break;
            }
            *idmap_find(&m, key, 1) = ccb_trace_alloc(t, size, (unsigned)stream);
        } else if (strcmp(field[1], "free") == 0) {
            uint32_t *slot = idmap_find(&m, key, 0);
            if (!slot || *slot == UINT32_MAX) {
                rc = fail(err, errlen, "line %zu: free of id %" PRIu64 " which is not live", lineno, id);
                break;
            }
            if (size == 0) { /* in memory, size 0 means "take the alloc's": never from a file */
                rc = fail(err, errlen, "line %zu: free of id %" PRIu64 " with size 0", lineno, id);
                break;
            }
            push(t, (ccb_event){.size = size, .slot = *slot, .op = CCB_FREE, .stream = (uint8_t)stream});
            *slot = UINT32_MAX; /* ids are never reused by the recorder, but tolerate it */
        } else {
            rc = fail(err, errlen, "line %zu: op '%s' is neither alloc nor free", lineno, field[1]);
            break;
        }
    }
    free(m.keys);
    free(m.slots);
    if (rc == 0 && ferror(f))
        rc = fail(err, errlen, "read error");
    if (rc == 0)
        rc = ccb_trace_analyze(t, err, errlen);
    if (rc != 0) { /* nothing half-read stays allocated; t keeps its name */
        char name[sizeof t->name];
        memcpy(name, t->name, sizeof name);
        ccb_trace_free(t);
        memcpy(t->name, name, sizeof name);
    }
    return rc;
}

int ccb_trace_load(ccb_trace *t, const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "r");
    if (!f)
        return fail(err, errlen, "cannot open '%s': %s", path, strerror(errno));
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    ccb_trace_init(t, base);
    char *dot = strstr(t->name, ".csv");
    if (dot)
        *dot = '\0';
    int rc = ccb_trace_read(t, f, err, errlen);
    fclose(f);
    return rc;
}

/* ---- writing --------------------------------------------------------------- */

int ccb_trace_write(const ccb_trace *t, FILE *f) {
    fprintf(f, "# ccalloc trace v1\n");
    for (const char *c = t->comments; c && *c;) {
        const char *nl = strchr(c, '\n');
        size_t len = nl ? (size_t)(nl - c) : strlen(c);
        fprintf(f, "# %.*s\n", (int)len, c);
        c += len + (nl != NULL);
    }
    fprintf(f, "seq,op,id,size,stream\n");
    for (size_t i = 0; i < t->n; i++) {
        const ccb_event *e = &t->ev[i];
        fprintf(f, "%zu,%s,%" PRIu32 ",%" PRIu64 ",%u\n", i, e->op == CCB_ALLOC ? "alloc" : "free", e->slot + 1,
                e->size, (unsigned)e->stream);
    }
    return ferror(f) ? -1 : 0;
}

int ccb_trace_save(const ccb_trace *t, const char *path) {
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    int rc = ccb_trace_write(t, f);
    if (fclose(f) != 0)
        rc = -1;
    return rc;
}

/* ---- analysis -------------------------------------------------------------- */

static uint64_t round_gran(uint64_t s) {
    return (s + CCA_GRANULARITY - 1) / CCA_GRANULARITY * CCA_GRANULARITY;
}

int ccb_trace_analyze(ccb_trace *t, char *err, size_t errlen) {
    /* live[slot]: size of the live alloc, 0 when not live (sizes are > 0) */
    uint64_t *live = calloc(t->slots ? t->slots : 1, sizeof *live);
    uint8_t *stream = calloc(t->slots ? t->slots : 1, 1);
    if (!live || !stream) {
        free(live);
        free(stream);
        return fail(err, errlen, "out of host memory");
    }
    t->allocs = t->frees = 0;
    t->peak_requested = t->peak_rounded = t->peak_live = t->max_size = 0;
    t->streams = 0;
    size_t req = 0, rounded = 0, nlive = 0;
    int rc = 0;
    for (size_t i = 0; i < t->n; i++) {
        ccb_event *e = &t->ev[i];
        if (e->slot >= t->slots) {
            rc = fail(err, errlen, "event %zu: slot %u out of range", i, e->slot);
            break;
        }
        if (e->op == CCB_ALLOC) {
            if (live[e->slot] || e->size == 0) {
                rc = fail(err, errlen, "event %zu: alloc of slot %u %s", i, e->slot,
                          e->size ? "already live" : "with size 0");
                break;
            }
            live[e->slot] = e->size;
            stream[e->slot] = e->stream;
            req += e->size;
            rounded += round_gran(e->size);
            nlive++;
            t->allocs++;
            if (e->size > t->max_size)
                t->max_size = e->size;
            if (req > t->peak_requested)
                t->peak_requested = req;
            if (rounded > t->peak_rounded)
                t->peak_rounded = rounded;
            if (nlive > t->peak_live)
                t->peak_live = nlive;
        } else {
            if (!live[e->slot]) {
                rc = fail(err, errlen, "event %zu: free of slot %u which is not live", i, e->slot);
                break;
            }
            if (e->size == 0) { /* appended by ccb_trace_release: take the alloc's */
                e->size = live[e->slot];
                e->stream = stream[e->slot];
            } else if (e->size != live[e->slot]) {
                rc = fail(err, errlen, "event %zu: free of slot %u with size %" PRIu64 ", allocated with %" PRIu64, i,
                          e->slot, e->size, live[e->slot]);
                break;
            }
            req -= live[e->slot];
            rounded -= round_gran(live[e->slot]);
            live[e->slot] = 0;
            nlive--;
            t->frees++;
        }
        if ((unsigned)e->stream + 1 > t->streams)
            t->streams = (unsigned)e->stream + 1;
    }
    t->final_live = nlive;
    t->final_requested = req;
    free(live);
    free(stream);
    return rc;
}
