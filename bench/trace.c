/*
 * trace.c — the allocation trace: reading and writing the CSV format of the
 * allocator's recorder (allocator/src/observe/trace.c), and the analysis every replay
 * is checked against.
 *
 * Format v3 (documented in docs/benchmarks.md#trace-format):
 *
 *     # ccalloc trace v3                  <- '#' lines: provenance, kept
 *     # source: pid 1234
 *     seq,op,id,size,stream,domain,name   <- column header: opens a SECTION
 *     0,domain,0,0,0,1,resnet50           <- declares domain 1 (then 2, 3, ..)
 *     1,alloc,1,4096,0,1                  <- id pairs a free with its alloc
 *     2,free,1,4096,0,1                      size = requested bytes (0 allowed)
 *     3,mark,0,0,0,0,load:resnet50           stream = 0 default, 1.. others
 *     4,empty_cache,0,0,0,0               <- release events: every strategy
 *     5,trim,0,1048576,0,0                   applies its own release call
 *     6,domain_reserve,0,8388608,0,1      <- footprint reservation
 *     7,domain_release,0,0,0,1            <- none of domain 1's blocks live
 *
 * domain = 0 is the default domain, never declared; a free names its alloc's
 * domain; marks, empty_cache and trim name 0. A v2 section (header
 * "seq,op,id,size,stream,name") has no domain column and no domain events, a
 * v1 section ("seq,op,id,size,stream") holds alloc and free only.
 * Fields are split at every comma, so an empty field is an error, never a
 * shifted column; numbers are plain decimal (no sign, no space, no hex).
 *
 * The recorder writes one section per process (all allocators alive at once
 * share it, ids unique across them) and a new section each time the trace is
 * reopened after every allocator closed it; older traces had one section per
 * allocator. Either way ids are only unique within a section, so the reader
 * maps (section, id) to a dense SLOT through a hash table: slots
 * are numbered in alloc order (domains likewise: a section numbers its own
 * from 1 and the reader renumbers them across the file), and a replay keeps its live pointers in an
 * array indexed by slot (O(1) per event, no hashing while timing). Writing
 * emits one section with id = slot + 1, so write(read(x)) is canonical and
 * read(write(t)) == t event for event.
 *
 * Costs: reading is O(events) with one hash insert per alloc and one lookup
 * per free; analysis is one O(events) pass over a live-size array plus the
 * ideal arena (ideal.c, O(events log F)). Memory: 16 bytes an event, and
 * while reading 40 to 70 more per alloc (id table, per-slot arrays), then
 * 28 per alloc for the analysis; ccb_trace_load holds all of it, at every
 * moment, within its cap (budget.c): a file of short alloc lines reaches
 * 1 GiB at about 16 million allocs and is refused at that line.
 *
 * Reading, a function per step: read_one_line (a comment kept, a column
 * header opening a section, else an event), parse_event (the fields, the
 * numbers, the domain named), read_event (by op: read_alloc, read_free,
 * read_phase, read_domain_op). A step returns 0, FAILED (the line's
 * message) or STOP (the load's budget spent: said once, after the loop).
 *
 * Errors name the line: a free of an id that is not live, a free whose size
 * differs from its alloc's, an alloc reusing a live id, a bad field (a
 * number: its field, its text and the field's range), a mark
 * name out of its alphabet, live bytes that would overflow 64 bits, a domain
 * used before it is declared or declared out of order, a free in another
 * domain than its alloc's, a domain release while one of its blocks is live.
 */
#include "ccbench.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ccalloc.h"
#include "ccai_decimal.h" /* common/: ccai_decimal_uint, the fields' grammar */
#include "ccai_utf8.h"    /* common/: ccai_utf8_head, a quoted field cut between characters */

#include <zlib.h>

void ccb_trace_init(ccb_trace *t, const char *name) {
    memset(t, 0, sizeof *t);
    name = name ? name : "trace";
    snprintf(t->name, sizeof t->name, "%.*s", ccai_utf8_head(name, strlen(name), sizeof t->name - 1), name);
}

void ccb_trace_free(ccb_trace *t) {
    free(t->ev);
    free(t->marks);
    free(t->domains);
    free(t->comments);
    memset(t, 0, sizeof *t);
    t->comments_len = t->comments_cap = 0;
}

/* Growth goes through t->budget while ccb_trace_load reads t (budget.c): an
 * array that would not fit is not grown, the event or name is dropped and
 * the reader, which checks the budget after every line, fails the load. */
static void push(ccb_trace *t, ccb_event e) {
    if (t->n == t->cap) {
        ccb_event *ev = ccb_grow(t->budget, t->ev, &t->cap, sizeof *ev, t->n + 1, 1024);
        if (!ev)
            return;
        t->ev = ev;
    }
    t->ev[t->n++] = e;
}

uint32_t ccb_trace_alloc_in(ccb_trace *t, uint64_t size, unsigned stream, unsigned domain) {
    uint32_t slot = (uint32_t)t->slots++;
    push(t, (ccb_event){.size = size, .slot = slot, .op = CCB_ALLOC, .stream = (uint8_t)stream,
                        .domain = (uint16_t)domain});
    return slot;
}

uint32_t ccb_trace_alloc(ccb_trace *t, uint64_t size, unsigned stream) {
    return ccb_trace_alloc_in(t, size, stream, 0);
}

/* A free appended here carries no size: generators know only the slot, and
 * ccb_trace_analyze copies the alloc's size, stream and domain into it. */
void ccb_trace_release(ccb_trace *t, uint32_t slot) {
    push(t, (ccb_event){.size = CCB_SIZE_FILL, .slot = slot, .op = CCB_FREE});
}

int ccb_domain_name_ok(const char *name) {
    size_t n = 0;
    for (const char *c = name; *c; c++, n++)
        if (*c < 0x20 || *c > 0x7e || *c == ',' || *c == '"' || *c == '\\' || n >= CCB_DOMAIN_NAME_MAX)
            return 0;
    return n > 0;
}

int ccb_trace_domain(ccb_trace *t, const char *name) {
    if (!name || !ccb_domain_name_ok(name) || t->ndomains >= CCB_MAX_DOMAINS)
        return -1;
    if (t->ndomains + 1 >= t->capdomains) {
        ccb_domain_info *d = ccb_grow(t->budget, t->domains, &t->capdomains, sizeof *d, t->ndomains + 2, 8);
        if (!d)
            return -1;
        t->domains = d;
    }
    if (t->ndomains == 0) { /* the default domain takes number 0 */
        memset(&t->domains[0], 0, sizeof t->domains[0]);
        snprintf(t->domains[0].name, sizeof t->domains[0].name, "default");
        t->ndomains = 1;
    }
    unsigned n = (unsigned)t->ndomains++;
    memset(&t->domains[n], 0, sizeof t->domains[n]);
    memcpy(t->domains[n].name, name, strlen(name));
    push(t, (ccb_event){.op = CCB_DOMAIN, .domain = (uint16_t)n});
    return (int)n;
}

int ccb_trace_domain_release(ccb_trace *t, unsigned domain) {
    if (domain != 0 && domain >= t->ndomains)
        return -1;
    push(t, (ccb_event){.op = CCB_DOMAIN_RELEASE, .domain = (uint16_t)domain});
    return 0;
}

int ccb_trace_domain_reserve(ccb_trace *t, unsigned domain, uint64_t bytes) {
    if ((domain != 0 && domain >= t->ndomains) || bytes == 0 || bytes > CCB_SIZE_MAX)
        return -1;
    push(t, (ccb_event){.size = bytes, .op = CCB_DOMAIN_RESERVE, .domain = (uint16_t)domain});
    return 0;
}

const char *ccb_domain_name(const ccb_trace *t, unsigned domain) {
    if (domain == 0)
        return "default";
    return domain < t->ndomains ? t->domains[domain].name : "?";
}

int ccb_mark_name_ok(const char *name) {
    size_t n = 0;
    for (const char *c = name; *c; c++, n++)
        if (*c < 0x20 || *c > 0x7e || *c == ',' || *c == '"' || n >= CCB_MARK_MAX)
            return 0;
    return n > 0;
}

int ccb_trace_mark(ccb_trace *t, const char *name) {
    if (!name || !ccb_mark_name_ok(name) || t->nmarks >= UINT32_MAX)
        return -1;
    if (t->nmarks == t->capmarks) {
        char(*m)[CCB_MARK_MAX + 1] = ccb_grow(t->budget, t->marks, &t->capmarks, sizeof *m, t->nmarks + 1, 16);
        if (!m)
            return -1;
        t->marks = m;
    }
    memset(t->marks[t->nmarks], 0, sizeof t->marks[0]); /* whole records compare equal */
    memcpy(t->marks[t->nmarks], name, strlen(name));
    push(t, (ccb_event){.slot = (uint32_t)t->nmarks++, .op = CCB_MARK});
    return 0;
}

void ccb_trace_empty_cache(ccb_trace *t) {
    push(t, (ccb_event){.op = CCB_EMPTY_CACHE});
}

/* A keep above CCB_SIZE_MAX keeps everything, as CCB_SIZE_MAX does: stored
 * as that, so that the written file reads back. */
void ccb_trace_trim(ccb_trace *t, uint64_t keep) {
    push(t, (ccb_event){.size = keep > CCB_SIZE_MAX ? CCB_SIZE_MAX : keep, .op = CCB_TRIM});
}

static const char *const op_names[CCB_OP_COUNT] = {"alloc", "free",           "mark",   "empty_cache",
                                                   "trim",  "domain_release", "domain", "domain_reserve"};

const char *ccb_op_name(unsigned op) {
    return op < sizeof op_names / sizeof op_names[0] ? op_names[op] : "?";
}

/* Appended whole (no length cap), amortized O(length): the buffer doubles. */
void ccb_trace_comment(ccb_trace *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    size_t need = t->comments_len + (size_t)n + 2;
    if (need > t->comments_cap) {
        char *c = ccb_grow(t->budget, t->comments, &t->comments_cap, 1, need, need);
        if (!c)
            return;
        t->comments = c;
    }
    va_start(ap, fmt);
    vsnprintf(t->comments + t->comments_len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    t->comments_len += (size_t)n;
    t->comments[t->comments_len++] = '\n';
    t->comments[t->comments_len] = '\0';
}

/* ---- (section, id) -> slot: open addressing, linear probing ---------------- */

typedef struct idmap {
    uint64_t *keys; /* 0 = empty; key = (section << 44 | id) + 1 */
    uint32_t *slots;
    size_t cap, n;
    ccb_budget *b; /* the load's, or NULL */
} idmap;

#define IDMAP_ENTRY (sizeof(uint64_t) + sizeof(uint32_t)) /* bytes per entry */

/* Keys are mixed with a per-process random key, so a file cannot choose ids
 * that all probe one cluster (the order of slots never depends on it). */
static uint64_t hash_key;

static uint64_t mix(uint64_t x) {
    x ^= hash_key;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

static int idmap_grow(idmap *m);

/* The slot of key; with insert, a new entry for it (NULL: no room in the
 * load's budget, or host memory). */
static uint32_t *idmap_find(idmap *m, uint64_t key, int insert) {
    if (insert && (m->n + 1) * 2 > m->cap && idmap_grow(m) != 0)
        return NULL;
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

/* Twice the entries, rehashed: the old table and the new one are both held
 * meanwhile, and both are counted. */
static int idmap_grow(idmap *m) {
    idmap old = *m;
    size_t cap = old.cap ? old.cap * 2 : 1024;
    if (ccb_budget_take(m->b, cap * IDMAP_ENTRY) != 0)
        return -1;
    uint64_t *keys = calloc(cap, sizeof *keys);
    uint32_t *slots = calloc(cap, sizeof *slots);
    if (!keys || !slots) {
        free(keys);
        free(slots);
        if (!m->b) {
            fprintf(stderr, "ccbench: out of host memory\n");
            abort(); /* the harness itself cannot go on; never library code */
        }
        m->b->oom = 1;
        return -1;
    }
    *m = (idmap){.keys = keys, .slots = slots, .cap = cap, .b = old.b};
    for (size_t i = 0; i < old.cap; i++)
        if (old.keys[i])
            *idmap_find(m, old.keys[i], 1) = old.slots[i]; /* room enough: no growth */
    free(old.keys);
    free(old.slots);
    ccb_budget_give(m->b, old.cap * IDMAP_ENTRY);
    return 0;
}

/* ---- reading --------------------------------------------------------------- */

/* What a step of the reader returns: 0 go on; FAILED the line is refused,
 * its message in err (fail() returns it); STOP the load's budget is spent,
 * said once after the loop (spent). */
#define FAILED (-1)
#define STOP 1

static int fail(char *err, size_t len, const char *fmt, ...) {
    if (err && len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, len, fmt, ap);
        va_end(ap);
    }
    return FAILED;
}

/* Plain decimal, the whole field: no sign, no space, no base prefix. */
static int parse_u64(const char *s, uint64_t *v) {
    unsigned long long x;
    if (ccai_decimal_uint(s, 0, UINT64_MAX, &x))
        return -1;
    *v = x;
    return 0;
}

/* One line into buf (cap bytes, the line end included), NUL bytes kept and
 * counted: 1 a line (*len bytes), 0 end of file, -1 longer than cap - 1.
 * Bounded memory whatever the file holds (getline would grow to any line). */
static int read_line(FILE *f, char *buf, size_t cap, size_t *len) {
    size_t n = 0;
    int c;
    while ((c = getc_unlocked(f)) != EOF) {
        if (n == cap - 1)
            return -1;
        buf[n++] = (char)c;
        if (c == '\n')
            break;
    }
    buf[n] = '\0';
    *len = n;
    return n > 0;
}

/* Split at every comma (empty fields kept, unlike strtok); -1 if more than max. */
static int split_fields(char *line, char **field, int max) {
    int n = 0;
    for (char *c = line;; c++) {
        if (n == max)
            return -1;
        field[n++] = c;
        c = strchr(c, ',');
        if (!c)
            return n;
        *c = '\0';
    }
}

/* Per-file state of the reader beyond the trace itself: what each live slot
 * was allocated with (so a free is checked with its own line named), the
 * running sums analysis checks again, and the section's domain numbers. */
typedef struct reader {
    ccb_trace *t;                 /* what the file adds to                  */
    char *err;                    /* the message of a refused line          */
    size_t errlen;
    idmap m;                      /* (section, id) -> slot                  */
    uint64_t section;             /* the column headers seen, less one      */
    int in_section, version;      /* version: the section's header, 1-3     */
    uint64_t *slot_size;
    uint8_t *slot_stream;
    uint16_t *slot_domain;
    size_t slot_cap;
    uint64_t live_rounded;
    uint64_t *domain_live;        /* live blocks per (global) domain        */
    uint16_t *section_domain;     /* section-local number -> global number  */
    size_t section_domains;       /* declared in this section, 0 included   */
} reader;

/* One event line, its fields parsed (parse_event). */
typedef struct event_line {
    size_t lineno;
    const char *op;
    const char *name;             /* a mark's or a domain's name field      */
    uint64_t id, size, stream, dom;
    uint64_t key;                 /* (section << 44 | id) + 1               */
    int gdom;                     /* dom in the file's numbering (the ops
                                     that name a domain), else 0           */
    int is_domain_op;
} event_line;


#define READER_SLOT (sizeof(uint64_t) + sizeof(uint8_t) + sizeof(uint16_t)) /* bytes per slot */
/* The line buffer and the domain tables: allocated whole, counted whole. */
#define READER_FIXED (CCB_LINE_MAX + 1 + (CCB_MAX_DOMAINS + 1) * (sizeof(uint64_t) + sizeof(uint16_t)))

/* The three per-slot arrays to hold `need` slots, grown together within b. */
static int reader_grow(reader *r, size_t need, ccb_budget *b) {
    size_t n = ccb_grow_to(b, r->slot_cap, READER_SLOT, need, 1024);
    uint64_t *size = n ? realloc(r->slot_size, n * sizeof *size) : NULL;
    if (size)
        r->slot_size = size;
    uint8_t *stream = size ? realloc(r->slot_stream, n) : NULL;
    if (stream)
        r->slot_stream = stream;
    uint16_t *dom = stream ? realloc(r->slot_domain, n * sizeof *dom) : NULL;
    if (dom)
        r->slot_domain = dom;
    if (!dom && !b) {
        fprintf(stderr, "ccbench: out of host memory (%zu slots)\n", n);
        abort(); /* the harness itself cannot go on; never library code */
    }
    if (!dom) {
        b->oom |= n != 0;
        return -1;
    }
    ccb_budget_take(b, (n - r->slot_cap) * READER_SLOT); /* fits: ccb_grow_to said so */
    r->slot_cap = n;
    return 0;
}

static void reader_free(reader *r, ccb_budget *b) {
    free(r->slot_size);
    free(r->slot_stream);
    free(r->slot_domain);
    free(r->domain_live);
    free(r->section_domain);
    ccb_budget_give(b, r->slot_cap * READER_SLOT + READER_FIXED);
}

/* The load's budget ran out (or host memory did): every step stops there. */
static int spent(const ccb_trace *t) {
    return t->budget && (t->budget->over || t->budget->oom);
}

/* Its message, naming where (a line, the analysis). */
static int budget_fail(const ccb_trace *t, char *err, size_t errlen, const char *where) {
    if (t->budget->oom)
        return fail(err, errlen, "%s: out of host memory (%zu bytes held)", where, t->budget->held);
    return fail(err, errlen, "%s: loading the trace needs more than %zu bytes of host memory (the cap on a trace)",
                where, t->budget->cap);
}

/* The global number of a section-local domain field; -1 if not declared. */
static int local_domain(const reader *r, uint64_t d) {
    return d < r->section_domains ? r->section_domain[d] : -1;
}

/* alloc: a new slot for (section, id), which must not be live. */
static int read_alloc(reader *rd, const event_line *e) {
    ccb_trace *t = rd->t;
    uint32_t *slot = idmap_find(&rd->m, e->key, 0);
    if (slot && *slot != UINT32_MAX)
        return fail(rd->err, rd->errlen, "line %zu: alloc of id %" PRIu64 " which is already live", e->lineno, e->id);
    if (t->slots >= UINT32_MAX - 1)
        return fail(rd->err, rd->errlen, "line %zu: more than 2^32 allocations", e->lineno);
    if (t->slots >= rd->slot_cap && reader_grow(rd, t->slots + 1, t->budget) != 0)
        return STOP; /* t may already hold allocs */
    uint64_t r = (e->size + CCA_GRANULARITY - 1) / CCA_GRANULARITY * CCA_GRANULARITY;
    if (rd->live_rounded > UINT64_MAX - r || (uint64_t)SIZE_MAX < rd->live_rounded + r)
        return fail(rd->err, rd->errlen, "line %zu: live bytes overflow 64 bits", e->lineno);
    rd->live_rounded += r;
    rd->slot_size[t->slots] = e->size;
    rd->slot_stream[t->slots] = (uint8_t)e->stream;
    rd->slot_domain[t->slots] = (uint16_t)e->gdom;
    rd->domain_live[e->gdom]++;
    uint32_t *entry = idmap_find(&rd->m, e->key, 1);
    if (!entry)
        return STOP;
    *entry = ccb_trace_alloc_in(t, e->size, (unsigned)e->stream, (unsigned)e->gdom);
    return 0;
}

/* free: of a live id, with its alloc's size, stream and domain. */
static int read_free(reader *rd, const event_line *e) {
    uint32_t *slot = idmap_find(&rd->m, e->key, 0);
    if (!slot || *slot == UINT32_MAX)
        return fail(rd->err, rd->errlen, "line %zu: free of id %" PRIu64 " which is not live", e->lineno, e->id);
    if (e->size != rd->slot_size[*slot] || e->stream != rd->slot_stream[*slot])
        return fail(rd->err, rd->errlen,
                    "line %zu: free of id %" PRIu64 " with size %" PRIu64 " on stream %" PRIu64
                    ", allocated with %" PRIu64 " on stream %u",
                    e->lineno, e->id, e->size, e->stream, rd->slot_size[*slot], (unsigned)rd->slot_stream[*slot]);
    if (e->gdom != rd->slot_domain[*slot])
        return fail(rd->err, rd->errlen,
                    "line %zu: free of id %" PRIu64 " in domain %" PRIu64 ", allocated in another", e->lineno, e->id,
                    e->dom);
    rd->live_rounded -= (e->size + CCA_GRANULARITY - 1) / CCA_GRANULARITY * CCA_GRANULARITY;
    rd->domain_live[e->gdom]--;
    push(rd->t, (ccb_event){.size = e->size, .slot = *slot, .op = CCB_FREE, .stream = (uint8_t)e->stream,
                            .domain = (uint16_t)e->gdom});
    *slot = UINT32_MAX; /* ids are never reused by the recorder, but tolerate it */
    return 0;
}

/* mark, empty_cache, trim (v2 and v3 sections): no id, stream or domain. */
static int read_phase(reader *rd, const event_line *e) {
    int is_trim = strcmp(e->op, "trim") == 0, is_mark = strcmp(e->op, "mark") == 0;
    if (e->id != 0 || e->stream != 0 || e->dom != 0 || (!is_trim && e->size != 0))
        return fail(rd->err, rd->errlen, "line %zu: %s takes id 0, stream 0%s%s", e->lineno, e->op,
                    rd->version == 3 ? ", domain 0" : "", is_trim ? "" : " and size 0");
    if (is_mark && ccb_trace_mark(rd->t, e->name) != 0)
        return fail(rd->err, rd->errlen,
                    "line %zu: mark name must be 1..%d printable ASCII characters, no comma or quote", e->lineno,
                    CCB_MARK_MAX);
    if (is_trim)
        ccb_trace_trim(rd->t, e->size);
    else if (!is_mark)
        ccb_trace_empty_cache(rd->t);
    return 0;
}

/* domain (declares the section's next one), domain_reserve, domain_release (v3). */
static int read_domain_op(reader *rd, const event_line *e) {
    int is_reserve = strcmp(e->op, "domain_reserve") == 0;
    if (e->id != 0 || e->stream != 0 || (is_reserve ? e->size == 0 : e->size != 0))
        return fail(rd->err, rd->errlen, "line %zu: %s takes id 0, stream 0 and %s", e->lineno, e->op,
                    is_reserve ? "a size of 1 byte or more" : "size 0");
    if (!strcmp(e->op, "domain")) {
        if (e->dom != rd->section_domains)
            return fail(rd->err, rd->errlen, "line %zu: domain %" PRIu64 " declared out of order (next is %zu)",
                        e->lineno, e->dom, rd->section_domains);
        if (!ccb_domain_name_ok(e->name))
            return fail(rd->err, rd->errlen,
                        "line %zu: a domain name is 1..%d printable ASCII characters, no comma, quote or backslash",
                        e->lineno, CCB_DOMAIN_NAME_MAX);
        int n = ccb_trace_domain(rd->t, e->name);
        if (n < 0)
            return fail(rd->err, rd->errlen, "line %zu: more than %d domains in the file", e->lineno,
                        CCB_MAX_DOMAINS - 1);
        rd->section_domain[rd->section_domains++] = (uint16_t)n;
    } else if (is_reserve) {
        ccb_trace_domain_reserve(rd->t, (unsigned)e->gdom, e->size);
    } else {
        if (rd->domain_live[e->gdom])
            return fail(rd->err, rd->errlen, "line %zu: release of domain %" PRIu64 " (%s) with %" PRIu64 " live blocks",
                        e->lineno, e->dom, ccb_domain_name(rd->t, (unsigned)e->gdom), rd->domain_live[e->gdom]);
        ccb_trace_domain_release(rd->t, (unsigned)e->gdom);
    }
    return 0;
}

/* An event line's fields: their count for the section's version and op,
 * the numbers, and the domain it names (declared in this section). */
static int parse_event(reader *rd, char *line, size_t lineno, event_line *e) {
    int version = rd->version;
    char *field[8] = {NULL}; /* split_fields sets the first nf; NULL keeps gcc -O3's may-be-uninitialized quiet */
    int nf = split_fields(line, field, 8); /* 8: one too many, to be named */
    /* nf < 0: 8+ fields, all set */
    int named = (nf >= 2 || nf < 0) && (!strcmp(field[1], "mark") || (version == 3 && !strcmp(field[1], "domain")));
    int want = (version == 3 ? 6 : 5) + named;
    if (nf != want)
        return fail(rd->err, rd->errlen, "line %zu: expected %d fields seq,op,id,size,stream%s%s", lineno, want,
                    version == 3 ? ",domain" : "", named ? ",name" : "");
    if (rd->section >= CCAI_TRACE_MAX_SECTIONS)
        return fail(rd->err, rd->errlen, "line %zu: more than 2^19 sections (column header lines)", lineno);
    uint64_t seq; /* the order of lines is the order of events */
    *e = (event_line){.lineno = lineno, .op = field[1], .name = named ? field[want - 1] : NULL};
    /* the numbers, each in its range: a refusal names the field, its text
     * (at most 32 bytes of it, cut between characters) and the range */
    _Static_assert(CCB_MAX_DOMAINS - 1 == 65534 && CCAI_TRACE_MAX_STREAM == 255 && CCB_SIZE_MAX == (1ull << 60),
                   "the ranges below name these limits");
    const struct {
        const char *name, *range;
        int col;
        uint64_t *out, max;
    } num[] = {
        {"seq", "0..2^64-1", 0, &seq, UINT64_MAX},
        {"id", "0..2^44-1", 2, &e->id, CCAI_TRACE_MAX_ID},
        {"size", "0..2^60", 3, &e->size, CCB_SIZE_MAX},
        {"stream", "0..255", 4, &e->stream, CCAI_TRACE_MAX_STREAM},
        {"domain", "0..65534", 5, &e->dom, CCB_MAX_DOMAINS - 1},
    };
    for (size_t i = 0; i < (version == 3 ? 5u : 4u); i++) {
        const char *text = field[num[i].col];
        if (parse_u64(text, num[i].out) || *num[i].out > num[i].max) {
            size_t n = strlen(text);
            return fail(rd->err, rd->errlen, "line %zu: bad number in %s: '%.*s%s' (plain decimal, %s)", lineno,
                        num[i].name, ccai_utf8_head(text, n, 32), text, n > 32 ? "..." : "", num[i].range);
        }
    }
    _Static_assert(CCAI_TRACE_MAX_ID < (1ull << 44) && CCAI_TRACE_MAX_SECTIONS <= (1ull << 19),
                   "a key (section << 44 | id) + 1 fits 64 bits");
    e->key = ((rd->section << 44) | e->id) + 1;
    const char *op = e->op;
    e->is_domain_op =
        version == 3 && (!strcmp(op, "domain") || !strcmp(op, "domain_release") || !strcmp(op, "domain_reserve"));
    /* the ops whose domain field names a domain (the others require 0) */
    int names_domain = !strcmp(op, "alloc") || !strcmp(op, "free") || (e->is_domain_op && strcmp(op, "domain"));
    e->gdom = names_domain ? local_domain(rd, e->dom) : 0;
    if (e->gdom < 0)
        return fail(rd->err, rd->errlen, "line %zu: domain %" PRIu64 " is not declared in this section", lineno,
                    e->dom);
    return 0;
}

/* One event, by its op (those of the section's version). */
static int read_event(reader *rd, const event_line *e) {
    const char *op = e->op;
    if (!strcmp(op, "alloc"))
        return read_alloc(rd, e);
    if (!strcmp(op, "free"))
        return read_free(rd, e);
    if (rd->version >= 2 && (!strcmp(op, "mark") || !strcmp(op, "empty_cache") || !strcmp(op, "trim")))
        return read_phase(rd, e);
    if (e->is_domain_op)
        return read_domain_op(rd, e);
    return fail(rd->err, rd->errlen, "line %zu: op '%.*s' is not one of %s", e->lineno,
                ccai_utf8_head(op, strlen(op), 32), op,
                rd->version == 3   ? "alloc, free, mark, empty_cache, trim, domain, domain_release, domain_reserve"
                : rd->version == 2 ? "alloc, free, mark, empty_cache, trim (a v2 section)"
                                   : "alloc, free (a v1 section)");
}

/* The column header's version: 1-3, or 0 when the line is not one. */
static int header_version(const char *line) {
    return !strcmp(line, "seq,op,id,size,stream")                 ? 1
           : !strcmp(line, "seq,op,id,size,stream,name")          ? 2
           : !strcmp(line, "seq,op,id,size,stream,domain,name") ? 3
                                                                  : 0;
}

/* One line of len bytes (its end included): a comment kept, a column
 * header opening a section, an event. */
static int read_one_line(reader *rd, char *line, size_t len, size_t lineno) {
    if (memchr(line, '\0', len))
        return fail(rd->err, rd->errlen, "line %zu: NUL byte", lineno);
    while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
        line[--len] = '\0';
    if (len == 0)
        return 0;
    if (line[0] == '#') {
        const char *c = line + 1;
        while (*c == ' ')
            c++;
        /* the format line is written back by ccb_trace_write, not kept */
        if (strcmp(c, "ccalloc trace v1") != 0 && strcmp(c, "ccalloc trace v2") != 0 &&
            strcmp(c, "ccalloc trace v3") != 0)
            ccb_trace_comment(rd->t, "%s", c);
        return 0;
    }
    int hdr = header_version(line);
    if (hdr) {
        rd->section += rd->in_section; /* the first header opens section 0 */
        rd->in_section = 1;
        rd->version = hdr;
        rd->section_domains = 1; /* a section's domain 0 is the default domain */
        rd->section_domain[0] = 0;
        return 0;
    }
    if (!rd->in_section)
        return fail(rd->err, rd->errlen,
                    "line %zu: an event before the column header seq,op,id,size,stream[,domain][,name]", lineno);
    event_line e;
    int st = parse_event(rd, line, lineno, &e);
    return st ? st : read_event(rd, &e);
}

int ccb_trace_read(ccb_trace *t, FILE *f, char *err, size_t errlen) {
    if (!hash_key) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        hash_key = ((uint64_t)ts.tv_nsec << 32 ^ (uint64_t)ts.tv_sec ^ (uint64_t)(uintptr_t)&ts) | 1;
    }
    int taken = ccb_budget_take(t->budget, READER_FIXED) == 0; /* given back by reader_free */
    char *line = taken ? malloc(CCB_LINE_MAX + 1) : NULL;
    reader rd = {.t = t, .err = err, .errlen = errlen, .m = {.b = t->budget}};
    /* domains numbered so far by t itself (t may already hold some) */
    rd.domain_live = taken ? calloc(CCB_MAX_DOMAINS + 1, sizeof *rd.domain_live) : NULL;
    rd.section_domain = taken ? calloc(CCB_MAX_DOMAINS + 1, sizeof *rd.section_domain) : NULL;
    int rc = 0;
    if (!taken)
        rc = budget_fail(t, err, errlen, "line 1");
    else if (!line || !rd.domain_live || !rd.section_domain)
        rc = fail(err, errlen, "out of host memory");
    size_t lineno = 0, len;
    int got;
    while (rc == 0 && !spent(t) && (got = read_line(f, line, CCB_LINE_MAX + 1, &len)) != 0) {
        lineno++;
        int st = got < 0 ? fail(err, errlen, "line %zu: too long (a line holds at most %d bytes)", lineno, CCB_LINE_MAX)
                         : read_one_line(&rd, line, len, lineno);
        if (st) {
            rc = st == STOP ? 0 : st; /* STOP: said below */
            break;
        }
    }
    if (spent(t)) { /* whatever the line's own check made of a name or event not stored */
        char where[32];
        snprintf(where, sizeof where, "line %zu", lineno);
        rc = budget_fail(t, err, errlen, where);
    }
    free(line);
    free(rd.m.keys);
    free(rd.m.slots);
    ccb_budget_give(t->budget, rd.m.cap * IDMAP_ENTRY);
    if (taken)
        reader_free(&rd, t->budget);
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

/* The file is read as a stream: a fopencookie FILE whose read inflates it
 * with zlib (or passes a plain file through), so the text is never held
 * whole, and the cap on its bytes (decompressed, for gzip) is counted as they come. A file
 * is gzip when it starts with gzip's magic bytes (1f 8b), whatever its name.
 * It may hold several members one after the other (gzip's rule: their texts
 * join, so each is a section of the trace); after the last member the file
 * must end. Any other byte there is an error naming how many follow: zlib's
 * own gzread skips them, which would load a damaged or badly joined file
 * without its tail and without a word. The same cap bounds the memory the
 * load holds (budget.c): the stream's buffers, then every array of the
 * reader and the analysis. */
#define LOAD_IN_BYTES ((size_t)16 << 10)     /* compressed input read at a time */
#define LOAD_STREAM_BYTES ((size_t)128 << 10) /* that, zlib's state and 32 KiB window, stdio's buffers */
typedef struct gz_cookie {
    FILE *raw;
    z_stream zs;
    bool gzip;      /* the file starts with gzip's magic */
    bool inflating; /* inside a member (gzip) */
    bool raw_eof, done;
    size_t total, max;
    int over_cap, zerr;
    char msg[128];
    unsigned char in[LOAD_IN_BYTES];
} gz_cookie;

static int gz_stop(gz_cookie *z, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int gz_stop(gz_cookie *z, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(z->msg, sizeof z->msg, fmt, ap);
    va_end(ap);
    z->zerr = 1;
    return -1;
}

/* Keep the unread input at the front of the buffer and read more after it.
 * -1 on a read error. */
static int gz_fill(gz_cookie *z) {
    if (z->raw_eof)
        return 0;
    if (z->zs.avail_in && z->zs.next_in != z->in)
        memmove(z->in, z->zs.next_in, z->zs.avail_in);
    z->zs.next_in = z->in;
    size_t n = fread(z->in + z->zs.avail_in, 1, sizeof z->in - z->zs.avail_in, z->raw);
    if (n == 0) {
        if (ferror(z->raw))
            return gz_stop(z, "read error: %s", strerror(errno));
        z->raw_eof = true;
    }
    z->zs.avail_in += (uInt)n;
    return 0;
}

/* Bytes from the unread input to the end of the file (a file that is not
 * regular: those in the buffer, and "or more"). */
static int gz_trailing(gz_cookie *z) {
    struct stat st;
    off_t at = ftello(z->raw);
    if (fstat(fileno(z->raw), &st) == 0 && S_ISREG(st.st_mode) && at >= 0 && st.st_size >= at)
        return gz_stop(z, "%llu bytes after the last gzip member (not gzip data)",
                       (unsigned long long)(st.st_size - at) + z->zs.avail_in);
    return gz_stop(z, "%u or more bytes after the last gzip member (not gzip data)", z->zs.avail_in);
}

/* The next decompressed bytes: > 0, 0 at the end of the file, -1 on an
 * error (z->msg) or over the cap. */
static ssize_t gz_produce(gz_cookie *z, unsigned char *buf, size_t size) {
    unsigned want = size > (1u << 30) ? (1u << 30) : (unsigned)size;
    for (;;) {
        if (z->zs.avail_in == 0 && gz_fill(z) < 0)
            return -1;
        if (!z->gzip) { /* plain: the bytes as they are */
            if (z->zs.avail_in == 0)
                return 0;
            unsigned n = z->zs.avail_in < want ? z->zs.avail_in : want;
            memcpy(buf, z->zs.next_in, n);
            z->zs.next_in += n;
            z->zs.avail_in -= n;
            return n;
        }
        if (!z->inflating) { /* between members: the end, another member, or bytes that are neither */
            if (z->zs.avail_in < 2 && gz_fill(z) < 0)
                return -1;
            if (z->zs.avail_in == 0)
                return 0;
            if (z->zs.avail_in < 2 || z->zs.next_in[0] != 0x1f || z->zs.next_in[1] != 0x8b)
                return gz_trailing(z);
            if (inflateReset(&z->zs) != Z_OK)
                return gz_stop(z, "zlib: inflateReset failed");
            z->inflating = true;
        }
        z->zs.next_out = buf;
        z->zs.avail_out = want;
        int r = inflate(&z->zs, Z_NO_FLUSH);
        unsigned got = want - z->zs.avail_out;
        if (r == Z_STREAM_END)
            z->inflating = false;
        else if (r == Z_MEM_ERROR)
            return gz_stop(z, "out of host memory (zlib)");
        else if (r != Z_OK && r != Z_BUF_ERROR)
            return gz_stop(z, "truncated or corrupt gzip stream (%s)", z->zs.msg ? z->zs.msg : "corrupt data");
        else if (got == 0 && z->zs.avail_in == 0 && z->raw_eof)
            return gz_stop(z, "truncated or corrupt gzip stream (it ends inside a member)");
        if (got)
            return got;
    }
}

static ssize_t gz_cookie_read(void *c, char *buf, size_t size) {
    gz_cookie *z = c;
    if (z->over_cap || z->zerr)
        return -1;
    if (z->done)
        return 0;
    ssize_t got = gz_produce(z, (unsigned char *)buf, size);
    if (got <= 0) {
        z->done = got == 0;
        return got;
    }
    z->total += (size_t)got;
    if (z->total > z->max) {
        z->over_cap = 1;
        return -1;
    }
    return got;
}

/* Open a trace for reading, never waiting: fopen of a FIFO blocks in
 * open(2) until some process opens it for writing, with none for ever. So
 * the file is opened with O_NONBLOCK (at once for a FIFO), and a FIFO or
 * pipe is asked, without taking a byte from it, whether anything can come:
 * tee(2) of one byte into a pipe of our own answers 0 when it is empty and
 * no process holds it for writing (refused: "a FIFO nobody writes"), EAGAIN
 * when a writer holds it with nothing written yet (it is read, waiting for
 * the writer as any pipe), 1 when bytes wait. The descriptor is then made
 * blocking again: a pipe with a writer and a regular file read as before.
 * The descriptor, or -1 with the message in err. */
static int open_trace(const char *path, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        fail(err, errlen, "cannot open '%s': %s", path, strerror(errno));
        return -1;
    }
    struct stat sb;
    int e = fstat(fd, &sb) == 0 ? 0 : errno;
    if (!e && S_ISDIR(sb.st_mode))
        e = EISDIR;
    if (!e && S_ISFIFO(sb.st_mode)) {
        int p[2];
        if (pipe2(p, O_NONBLOCK | O_CLOEXEC) == 0) {
            ssize_t n = tee(fd, p[1], 1, SPLICE_F_NONBLOCK);
            close(p[0]);
            close(p[1]);
            if (n == 0) {
                close(fd);
                fail(err, errlen, "'%s': a FIFO nobody writes (refused rather than waited for)", path);
                return -1;
            }
        }
    }
    int flags = e ? -1 : fcntl(fd, F_GETFL);
    if (!e && (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0))
        e = errno;
    if (e) {
        close(fd);
        fail(err, errlen, "cannot open '%s': %s", path, strerror(e));
        return -1;
    }
    if (ccb_note_input(fd, path) != 0) { /* no output of this process may write over it */
        close(fd);
        fail(err, errlen, "'%s': out of host memory to guard it from the run's outputs", path);
        return -1;
    }
    return fd;
}

/* Open path for the cookie: 0, or -1 with err set. */
static int gz_open(gz_cookie *z, const char *path, char *err, size_t errlen) {
    int fd = open_trace(path, err, errlen);
    if (fd < 0)
        return -1;
    if (!(z->raw = fdopen(fd, "rb"))) {
        close(fd);
        return fail(err, errlen, "'%s': out of host memory", path);
    }
    if (gz_fill(z) < 0 || (z->zs.avail_in < 2 && gz_fill(z) < 0)) {
        fclose(z->raw);
        return fail(err, errlen, "'%s': %s", path, z->msg);
    }
    z->gzip = z->zs.avail_in >= 2 && z->in[0] == 0x1f && z->in[1] == 0x8b;
    if (z->gzip) {
        int r = inflateInit2(&z->zs, 15 + 16); /* gzip members only */
        if (r != Z_OK) {
            fclose(z->raw);
            return fail(err, errlen, "'%s': %s", path,
                        r == Z_MEM_ERROR ? "out of host memory (zlib)" : "zlib: inflateInit2 failed");
        }
        z->inflating = true;
    }
    return 0;
}

static void gz_close(gz_cookie *z) {
    if (z->gzip)
        inflateEnd(&z->zs);
    fclose(z->raw);
}

int ccb_trace_load(ccb_trace *t, const char *path, char *err, size_t errlen) {
    return ccb_trace_load_capped(t, path, CCB_TRACE_MAX_BYTES, err, errlen);
}

int ccb_trace_load_capped(ccb_trace *t, const char *path, size_t max_bytes, char *err, size_t errlen) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t nl = strlen(base); /* the suffix goes before the name is cut to fit */
    if (nl > 7 && !strcmp(base + nl - 7, ".csv.gz"))
        nl -= 7;
    else if (nl > 4 && !strcmp(base + nl - 4, ".csv"))
        nl -= 4;
    ccb_trace_init(t, ""); /* t is empty on every return path, named after the file */
    snprintf(t->name, sizeof t->name, "%.*s", ccai_utf8_head(base, nl, sizeof t->name - 1), base);
    gz_cookie *z = calloc(1, sizeof *z); /* its input buffer is not for the stack */
    if (!z)
        return fail(err, errlen, "'%s': out of host memory", path);
    z->max = max_bytes;
    if (gz_open(z, path, err, errlen) != 0) {
        free(z);
        return -1;
    }
    cookie_io_functions_t io = {.read = gz_cookie_read};
    FILE *f = fopencookie(z, "r", io);
    if (!f) {
        gz_close(z);
        free(z);
        return fail(err, errlen, "'%s': out of host memory", path);
    }
    ccb_budget budget = {.cap = max_bytes};
    ccb_budget_take(&budget, LOAD_STREAM_BYTES); /* over: the reader says so at once */
    t->budget = &budget;
    int rc = ccb_trace_read(t, f, err, errlen);
    t->budget = NULL; /* the trace outlives the load, its budget does not */

    /* a bad last line of gzip may be a cut member: read on to know. Not a
     * plain file: nothing is cut there, the reader's error stands */
    if (rc != 0 && z->gzip && !z->over_cap && !z->zerr) {
        char tmp[1 << 14];
        while (gz_cookie_read(z, tmp, sizeof tmp) > 0)
            ;
    }
    fclose(f);
    gz_close(z);
    int over_cap = z->over_cap, zerr = z->zerr, gzip = z->gzip;
    char msg[sizeof z->msg];
    memcpy(msg, z->msg, sizeof msg);
    free(z);
    if (over_cap || zerr) {
        /* the stream's own failure explains whatever the reader said */
        char name[sizeof t->name];
        memcpy(name, t->name, sizeof name);
        ccb_trace_free(t);
        memcpy(t->name, name, sizeof name);
        if (over_cap)
            return fail(err, errlen, "'%s': more than %zu bytes%s", path, max_bytes, gzip ? " once decompressed" : "");
        return fail(err, errlen, "'%s': %s", path, msg);
    }
    return rc;
}

/* ---- writing --------------------------------------------------------------- */

int ccb_trace_write(const ccb_trace *t, FILE *f) {
    fprintf(f, "# ccalloc trace v3\n");
    for (const char *c = t->comments; c && *c;) {
        const char *nl = strchr(c, '\n');
        size_t len = nl ? (size_t)(nl - c) : strlen(c);
        fprintf(f, "# %.*s\n", (int)len, c);
        c += len + (nl != NULL);
    }
    fprintf(f, "seq,op,id,size,stream,domain,name\n");
    for (size_t i = 0; i < t->n; i++) {
        const ccb_event *e = &t->ev[i];
        switch (e->op) {
        case CCB_ALLOC:
        case CCB_FREE:
            fprintf(f, "%zu,%s,%" PRIu32 ",%" PRIu64 ",%u,%u\n", i, ccb_op_name(e->op), e->slot + 1, e->size,
                    (unsigned)e->stream, (unsigned)e->domain);
            break;
        case CCB_MARK:
            fprintf(f, "%zu,mark,0,0,0,0,%s\n", i, t->marks[e->slot]);
            break;
        case CCB_DOMAIN: /* declared in order: the file's numbers are t's */
            fprintf(f, "%zu,domain,0,0,0,%u,%s\n", i, (unsigned)e->domain, ccb_domain_name(t, e->domain));
            break;
        default: /* empty_cache, trim, domain_release, domain_reserve */
            fprintf(f, "%zu,%s,0,%" PRIu64 ",0,%u\n", i, ccb_op_name(e->op),
                    e->op == CCB_TRIM || e->op == CCB_DOMAIN_RESERVE ? e->size : 0, (unsigned)e->domain);
        }
    }
    return ferror(f) ? -1 : 0;
}

/* ---- analysis -------------------------------------------------------------- */

static uint64_t round_gran(uint64_t s) { /* s <= CCB_SIZE_MAX: no overflow */
    return (s + CCA_GRANULARITY - 1) / CCA_GRANULARITY * CCA_GRANULARITY;
}

int ccb_trace_analyze(ccb_trace *t, char *err, size_t errlen) {
    /* per slot: size and stream of the live alloc, its domain, alive 1 while
     * live (sizes may be 0); per domain: live blocks and requested bytes */
    size_t ns = t->slots ? t->slots : 1, nd = t->ndomains ? t->ndomains : 1;
    size_t held = ns * (sizeof(uint64_t) + 2 * sizeof(uint8_t) + sizeof(uint16_t)) + nd * 2 * sizeof(uint64_t);
    if (ccb_budget_take(t->budget, held) != 0)
        return budget_fail(t, err, errlen, "the analysis");
    uint64_t *size = calloc(ns, sizeof *size);
    uint8_t *stream = calloc(ns, 1);
    uint8_t *alive = calloc(ns, 1);
    uint16_t *dom = calloc(ns, sizeof *dom);
    uint64_t *dlive = calloc(nd, sizeof *dlive), *dreq = calloc(nd, sizeof *dreq);
    if (!size || !stream || !alive || !dom || !dlive || !dreq) {
        free(size);
        free(stream);
        free(alive);
        free(dom);
        free(dlive);
        free(dreq);
        ccb_budget_give(t->budget, held);
        return fail(err, errlen, "out of host memory");
    }
    t->allocs = t->frees = t->releases = t->domain_releases = 0;
    t->peak_requested = t->peak_rounded = t->peak_live = t->max_size = 0;
    t->ideal_peak = 0;
    t->streams = 0;
    for (size_t d = 0; d < t->ndomains; d++) {
        t->domains[d].allocs = t->domains[d].releases = t->domains[d].reserves = 0;
        t->domains[d].peak_requested = 0;
    }
    uint64_t req = 0, rounded = 0;
    size_t nlive = 0, declared = 0; /* domains declared so far (numbers 1..declared) */
    int rc = 0;
    for (size_t i = 0; i < t->n; i++) {
        ccb_event *e = &t->ev[i];
        if (e->op >= CCB_OP_COUNT) {
            rc = fail(err, errlen, "event %zu: op %u out of range", i, (unsigned)e->op);
            break;
        }
        if (e->op == CCB_MARK) {
            if (e->slot >= t->nmarks) {
                rc = fail(err, errlen, "event %zu: mark %u out of range", i, e->slot);
                break;
            }
            continue;
        }
        if (e->op == CCB_EMPTY_CACHE || e->op == CCB_TRIM) {
            t->releases++;
            continue;
        }
        if (e->op == CCB_DOMAIN) {
            if (e->domain != declared + 1 || e->domain >= t->ndomains) {
                rc = fail(err, errlen, "event %zu: domain %u declared out of order (next is %zu)", i,
                          (unsigned)e->domain, declared + 1);
                break;
            }
            declared++;
            continue;
        }
        /* a free appended by ccb_trace_release names its domain at the fill below */
        if (e->domain > declared && !(e->op == CCB_FREE && e->size == CCB_SIZE_FILL)) {
            rc = fail(err, errlen, "event %zu: domain %u is not declared", i, (unsigned)e->domain);
            break;
        }
        ccb_domain_info *di = t->domains ? &t->domains[e->domain] : NULL;
        if (e->op == CCB_DOMAIN_RELEASE) {
            if (dlive[e->domain]) {
                rc = fail(err, errlen, "event %zu: release of domain %u (%s) with %" PRIu64 " live blocks", i,
                          (unsigned)e->domain, ccb_domain_name(t, e->domain), dlive[e->domain]);
                break;
            }
            t->domain_releases++;
            if (di)
                di->releases++;
            continue;
        }
        if (e->op == CCB_DOMAIN_RESERVE) {
            if (e->size == 0 || e->size > CCB_SIZE_MAX) {
                rc = fail(err, errlen, "event %zu: a reservation of %" PRIu64 " bytes (1..2^60)", i, e->size);
                break;
            }
            if (di)
                di->reserves++;
            continue;
        }
        if (e->slot >= t->slots) {
            rc = fail(err, errlen, "event %zu: slot %u out of range", i, e->slot);
            break;
        }
        if (e->op == CCB_ALLOC) {
            if (alive[e->slot] || e->size > CCB_SIZE_MAX) {
                rc = fail(err, errlen, "event %zu: alloc of slot %u %s", i, e->slot,
                          alive[e->slot] ? "already live" : "larger than 2^60 bytes");
                break;
            }
            /* rounded >= req: checking the rounded sum covers both */
            if (rounded > UINT64_MAX - round_gran(e->size) || (uint64_t)SIZE_MAX < rounded + round_gran(e->size)) {
                rc = fail(err, errlen, "event %zu: live bytes overflow (%" PRIu64 " + %" PRIu64 ")", i, req, e->size);
                break;
            }
            alive[e->slot] = 1;
            size[e->slot] = e->size;
            stream[e->slot] = e->stream;
            dom[e->slot] = e->domain;
            req += e->size;
            rounded += round_gran(e->size);
            dlive[e->domain]++;
            dreq[e->domain] += e->size;
            if (di) {
                di->allocs++;
                if (dreq[e->domain] > di->peak_requested)
                    di->peak_requested = dreq[e->domain];
            }
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
            if (!alive[e->slot]) {
                rc = fail(err, errlen, "event %zu: free of slot %u which is not live", i, e->slot);
                break;
            }
            if (e->size == CCB_SIZE_FILL) { /* appended by ccb_trace_release: take the alloc's */
                e->size = size[e->slot];
                e->stream = stream[e->slot];
                e->domain = dom[e->slot];
            } else if (e->size != size[e->slot]) {
                rc = fail(err, errlen, "event %zu: free of slot %u with size %" PRIu64 ", allocated with %" PRIu64, i,
                          e->slot, e->size, size[e->slot]);
                break;
            } else if (e->stream != stream[e->slot]) {
                rc = fail(err, errlen, "event %zu: free of slot %u on stream %u, allocated on %u", i, e->slot,
                          (unsigned)e->stream, (unsigned)stream[e->slot]);
                break;
            } else if (e->domain != dom[e->slot]) {
                rc = fail(err, errlen, "event %zu: free of slot %u in domain %u, allocated in %u", i, e->slot,
                          (unsigned)e->domain, (unsigned)dom[e->slot]);
                break;
            }
            req -= size[e->slot];
            rounded -= round_gran(size[e->slot]);
            dlive[e->domain]--;
            dreq[e->domain] -= size[e->slot];
            alive[e->slot] = 0;
            nlive--;
            t->frees++;
        }
        if ((unsigned)e->stream + 1 > t->streams)
            t->streams = (unsigned)e->stream + 1;
    }
    if (rc == 0 && declared + (t->ndomains > 0) != t->ndomains)
        rc = fail(err, errlen, "%zu domains named, %zu declared by events", t->ndomains ? t->ndomains - 1 : 0,
                  declared);
    t->final_live = nlive;
    t->final_requested = req;
    free(size);
    free(stream);
    free(alive);
    free(dom);
    free(dlive);
    free(dreq);
    ccb_budget_give(t->budget, held);
    if (rc == 0 && (t->ideal_peak = ccb_ideal_arena_peak(t)) == CCB_UNKNOWN)
        rc = spent(t) ? budget_fail(t, err, errlen, "the ideal arena")
                      : fail(err, errlen, "the ideal arena overflows 64 bits (or host memory ran out)");
    return rc;
}
