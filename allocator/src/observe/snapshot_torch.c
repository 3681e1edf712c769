/*
 * snapshot_torch.c — the allocator's state as the dict PyTorch's
 * torch.cuda.memory._snapshot() returns, written as a Python pickle, so
 * torch.cuda._memory_viz and pytorch.org/memory_viz read it
 * (docs/allocator.md, "Snapshots in PyTorch's format").
 *
 *   {"segments": [                        address order
 *      {"device": D, "address": A, "total_size": T,
 *       "allocated_size": (live blocks), "active_size": (live + pending),
 *       "requested_size": (requested bytes of live + pending blocks),
 *       "stream": int(cudaStream_t), "segment_type": "small" | "large",
 *       "segment_pool_id": (0, domain number), "is_expandable": bool,
 *       "frames": [],
 *       "blocks": [{"address", "size", "requested_size",
 *                   "state": "active_allocated" | "active_pending_free"
 *                            | "inactive", "frames": []}, ...]}, ...],
 *    "device_traces": [[], ..., [events of this allocator]],   D + 1 lists
 *    "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": (ccalloc's config as
 *       key:value,...), "max_split_size", "garbage_collection_threshold",
 *       "expandable_segments", "pinned_num_register_threads",
 *       "release_lock_on_cudamalloc", "pinned_use_cuda_host_register",
 *       "roundup_power2_divisions"},
 *    "ccalloc": {"upstream", "policy", "history_entries",
 *                "history_recorded"}}
 *
 * - Every key PyTorch writes; "frames" always empty (no stacks recorded).
 * - Segments: a classic segment is one (its blocks tile it, I1, so sizes
 *   sum to total_size, as `stats` checks); an expandable segment is one
 *   per run of mapped pages, a free block cut at the run's ends (live and
 *   pending blocks lie in mapped pages, I7). A sleeping domain's runs are
 *   only what a refused unmap left (sleep.c): any block is cut there, and
 *   a segment counts the bytes of its blocks inside it (a block's requested
 *   size at most those). Total sizes sum to reserved_bytes either way.
 * - Pools: small -> "small", all else -> "large"; domains ->
 *   segment_pool_id (0, k), k = 0 the default domain, else the k-th
 *   created (list order).
 * - States: LIVE -> active_allocated, PENDING -> active_pending_free, FREE
 *   -> inactive (requested size 0). Streams: the cca_stream as a signed
 *   64-bit integer (NULL is 0), as PyTorch writes int64_t(cudaStream_t).
 * - device_traces: the history ring (history.c), oldest first, one dict
 *   per event {"action", "addr" (oom: "device_free"), "size", "stream",
 *   "time_us", "frames"}; empty when `history` is 0.
 * - allocator_settings: keys with no ccalloc meaning carry PyTorch's
 *   defaults; max_split_size is max_split, or -1 (PyTorch's "none") when
 *   off or above INT64_MAX (no block is that large).
 * - The pickle: protocol 2, a minimal emitter (dicts, lists, 2-tuples, str,
 *   int, bool, float). EMPTY_DICT / EMPTY_LIST then MARK ... SETITEMS /
 *   APPENDS (nothing known in advance, no memo); integers in the smallest
 *   opcode (BININT1, BININT2, BININT, else LONG1); strings BINUNICODE,
 *   callers' names as well-formed UTF-8, every other byte >= 0x80 as '?'.
 * - Costs: O(segments log segments + blocks + pages / 64 + history) under
 *   the allocator's lock (segments in address order: a merge sort through
 *   their records, ccai_segments_by_address, no host memory).
 */
#include "../core/internal.h"
#include "check.h"          /* the unlock */
#include "stats.h"          /* the segments in address order */
#include "../domain_set.h"  /* the domains' records and numbers */
#include "ccai_utf8.h"      /* common/: the writers' check on names */
#include "../kinds/pages.h" /* mapped runs of a pages segment */

#include <stdlib.h>
#include <string.h>

/* ---- a minimal pickle emitter (protocol 2) ------------------------------- */

enum {
    PK_PROTO = 0x80,
    PK_STOP = '.',
    PK_MARK = '(',
    PK_EMPTY_DICT = '}',
    PK_SETITEMS = 'u',
    PK_EMPTY_LIST = ']',
    PK_APPENDS = 'e',
    PK_TUPLE2 = 0x86,
    PK_BININT1 = 'K',
    PK_BININT2 = 'M',
    PK_BININT = 'J',
    PK_LONG1 = 0x8a,
    PK_BINUNICODE = 'X',
    PK_NEWTRUE = 0x88,
    PK_NEWFALSE = 0x89,
    PK_BINFLOAT = 'G'
};

typedef struct pk {
    FILE *f;
    bool bad; /* a write failed: everything after is skipped */
} pk;

static void pk_put(pk *p, const void *bytes, size_t n) {
    if (!p->bad && fwrite(bytes, 1, n, p->f) != n)
        p->bad = true;
}

static void pk_op(pk *p, uint8_t op) {
    pk_put(p, &op, 1);
}

/* v as n little-endian bytes after opcode op. */
static void pk_le(pk *p, uint8_t op, uint64_t v, int n) {
    uint8_t b[9];
    b[0] = op;
    for (int i = 0; i < n; i++)
        b[1 + i] = (uint8_t)(v >> (8 * i));
    pk_put(p, b, (size_t)n + 1);
}

/* LONG1: a length byte, then the two's complement value, little-endian, in
 * as few bytes as keep its sign: trailing 0x00 (0xff for a negative value)
 * bytes go while the byte below carries the same sign bit; a positive
 * 64-bit value with its top bit set gets a ninth, zero byte. */
static void pk_long1(pk *p, uint64_t bits, bool negative) {
    uint8_t b[11];
    for (int i = 0; i < 8; i++)
        b[2 + i] = (uint8_t)(bits >> (8 * i));
    int n = 8;
    uint8_t fill = negative ? 0xff : 0x00;
    while (n > 1 && b[2 + n - 1] == fill && (b[2 + n - 2] & 0x80) == (fill & 0x80))
        n--;
    if (!negative && (b[2 + n - 1] & 0x80))
        b[2 + n++] = 0;
    b[0] = PK_LONG1;
    b[1] = (uint8_t)n;
    pk_put(p, b, (size_t)n + 2);
}

static void pk_uint(pk *p, uint64_t v) {
    if (v < 0x100)
        pk_le(p, PK_BININT1, v, 1);
    else if (v < 0x10000)
        pk_le(p, PK_BININT2, v, 2);
    else if (v <= INT32_MAX)
        pk_le(p, PK_BININT, v, 4);
    else
        pk_long1(p, v, false);
}

static void pk_int(pk *p, int64_t v) {
    if (v >= 0)
        pk_uint(p, (uint64_t)v);
    else if (v >= INT32_MIN)
        pk_le(p, PK_BININT, (uint64_t)v & 0xffffffffu, 4); /* BININT is signed */
    else
        pk_long1(p, (uint64_t)v, true);
}

static void pk_str(pk *p, const char *s) {
    size_t n = strlen(s);
    pk_le(p, PK_BINUNICODE, n, 4);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) { /* byte for byte: n stays right */
        unsigned len = ccai_utf8_len(c);
        if (!len)
            pk_op(p, '?');
        for (unsigned i = 0; i < len; i++)
            pk_op(p, c[i]);
        c += len ? len - 1 : 0;
    }
}

static void pk_bool(pk *p, bool v) {
    pk_op(p, v ? PK_NEWTRUE : PK_NEWFALSE);
}

static void pk_float(pk *p, double v) {
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    uint8_t b[9];
    b[0] = PK_BINFLOAT;
    for (int i = 0; i < 8; i++) /* big-endian */
        b[1 + i] = (uint8_t)(bits >> (8 * (7 - i)));
    pk_put(p, b, sizeof b);
}

static void pk_dict(pk *p) {
    pk_op(p, PK_EMPTY_DICT);
    pk_op(p, PK_MARK);
}
static void pk_dict_end(pk *p) {
    pk_op(p, PK_SETITEMS);
}
static void pk_list(pk *p) {
    pk_op(p, PK_EMPTY_LIST);
    pk_op(p, PK_MARK);
}
static void pk_list_end(pk *p) {
    pk_op(p, PK_APPENDS);
}
static void pk_empty_list(pk *p) {
    pk_op(p, PK_EMPTY_LIST);
}

/* key: value items of the dict being written */
static void kv_uint(pk *p, const char *k, uint64_t v) {
    pk_str(p, k);
    pk_uint(p, v);
}
static void kv_int(pk *p, const char *k, int64_t v) {
    pk_str(p, k);
    pk_int(p, v);
}
static void kv_str(pk *p, const char *k, const char *v) {
    pk_str(p, k);
    pk_str(p, v);
}
static void kv_bool(pk *p, const char *k, bool v) {
    pk_str(p, k);
    pk_bool(p, v);
}

/* ---- segments ------------------------------------------------------------ */

static int64_t stream_int(cca_stream s) {
    return (int64_t)(intptr_t)s;
}

static const char *state_name(uint8_t state) {
    return state == CCAI_LIVE ? "active_allocated" : state == CCAI_PENDING ? "active_pending_free" : "inactive";
}

/* The part of [b->addr, b->addr + b->size) inside [lo, hi): its bytes. */
static size_t clip(const ccai_block *b, uintptr_t lo, uintptr_t hi, uintptr_t *start) {
    uintptr_t s = b->addr > lo ? b->addr : lo, e = b->addr + b->size < hi ? b->addr + b->size : hi;
    *start = s;
    return e > s ? e - s : 0;
}

/* One PyTorch segment: the blocks of seg inside [lo, hi) (a classic
 * segment whole, or one mapped run of an expandable one), starting the walk
 * at *cursor; on return *cursor is the last block that reaches into [lo, hi)
 * (it may reach into the next run too). */
static void write_segment(pk *p, const cca_allocator *a, const ccai_segment *seg, int device, uintptr_t lo,
                          uintptr_t hi, const ccai_block **cursor) {
    const ccai_block *first = *cursor;
    while (first && first->addr + first->size <= lo)
        first = first->next;
    size_t allocated = 0, active = 0, requested = 0;
    const ccai_block *last = first;
    for (const ccai_block *b = first; b && b->addr < hi; b = b->next) {
        last = b;
        if (b->state == CCAI_FREE)
            continue;
        uintptr_t start;
        size_t in = clip(b, lo, hi, &start);
        ccai_assert(in == b->size || seg->domain->sleep); /* I7: an awake domain's live blocks are mapped */
        active += in;
        requested += b->requested < in ? b->requested : in;
        if (b->state == CCAI_LIVE)
            allocated += in;
    }
    *cursor = last;
    pk_dict(p);
    kv_int(p, "device", device);
    kv_uint(p, "address", lo);
    kv_uint(p, "total_size", hi - lo);
    kv_uint(p, "allocated_size", allocated);
    kv_uint(p, "active_size", active);
    kv_uint(p, "requested_size", requested);
    kv_int(p, "stream", stream_int(seg->stream));
    kv_str(p, "segment_type", seg->pool == CCAI_POOL_SMALL ? "small" : "large");
    pk_str(p, "segment_pool_id");
    pk_uint(p, 0);
    pk_uint(p, ccai_domain_number(a, seg->domain));
    pk_op(p, PK_TUPLE2);
    kv_bool(p, "is_expandable", seg->expandable);
    pk_str(p, "frames");
    pk_empty_list(p);
    pk_str(p, "blocks");
    pk_list(p);
    for (const ccai_block *b = first; b && b->addr < hi && !p->bad; b = b->next) {
        uintptr_t start;
        size_t size = clip(b, lo, hi, &start);
        pk_dict(p);
        kv_uint(p, "address", start);
        kv_uint(p, "size", size);
        kv_uint(p, "requested_size", b->state == CCAI_FREE ? 0 : b->requested < size ? b->requested : size);
        kv_str(p, "state", state_name(b->state));
        pk_str(p, "frames");
        pk_empty_list(p);
        pk_dict_end(p);
    }
    pk_list_end(p);
    pk_dict_end(p);
}

static void write_segments(pk *p, const cca_allocator *a, int device) {
    pk_str(p, "segments");
    pk_list(p);
    for (const ccai_segment *seg = ccai_segments_by_address(a); seg && !p->bad; seg = seg->sorted_next) {
        const ccai_block *cursor = seg->first;
        if (!seg->expandable) {
            write_segment(p, a, seg, device, seg->base, seg->base + seg->size, &cursor);
            continue;
        }
        size_t first, count;
        for (size_t pg = 0; !p->bad && ccai_next_mapped_run(seg, &pg, seg->npages, &first, &count);)
            write_segment(p, a, seg, device, seg->base + first * seg->page, seg->base + (first + count) * seg->page,
                          &cursor);
    }
    pk_list_end(p);
}

/* ---- the device trace, the settings ---------------------------------------- */

static void write_traces(pk *p, const cca_allocator *a, int device) {
    pk_str(p, "device_traces");
    pk_list(p);
    for (int d = 0; d < device; d++)
        pk_empty_list(p);
    pk_list(p);
    const ccai_history *h = a->history;
    size_t held = h ? ccai_history_held(h) : 0;
    for (size_t i = 0; i < held && !p->bad; i++) {
        const ccai_event *e = ccai_history_at(h, i);
        pk_dict(p);
        kv_str(p, "action", ccai_event_name((ccai_event_kind)e->kind));
        kv_uint(p, e->kind == CCAI_EV_OOM ? "device_free" : "addr", e->addr);
        kv_uint(p, "size", e->size);
        kv_int(p, "stream", stream_int(e->stream));
        kv_uint(p, "time_us", e->time_us);
        pk_str(p, "frames");
        pk_empty_list(p);
        pk_dict_end(p);
    }
    pk_list_end(p);
    pk_list_end(p);
}

/* PyTorch's max_split_size: an int64, -1 for none (its SIZE_MAX, cast).
 * ccalloc's max_split is a size_t: 0 (off) and any value above INT64_MAX
 * (no block is that large, so it splits as none does) are -1; a cast would
 * write a negative size. */
static int64_t max_split_size(size_t max_split) {
    return max_split && max_split <= INT64_MAX ? (int64_t)max_split : -1;
}

static void write_settings(pk *p, const cca_allocator *a, const char *conf) {
    pk_str(p, "allocator_settings");
    pk_dict(p);
    kv_str(p, "PYTORCH_CUDA_ALLOC_CONF", conf);
    kv_int(p, "max_split_size", max_split_size(a->config.max_split));
    pk_str(p, "garbage_collection_threshold");
    pk_float(p, 0.0);
    kv_bool(p, "expandable_segments", a->expandable);
    kv_int(p, "pinned_num_register_threads", 1);
    kv_bool(p, "release_lock_on_cudamalloc", false);
    kv_bool(p, "pinned_use_cuda_host_register", false);
    pk_str(p, "roundup_power2_divisions");
    pk_dict(p);
    pk_dict_end(p);
    pk_dict_end(p);

    pk_str(p, "ccalloc");
    pk_dict(p);
    kv_str(p, "upstream", cca_upstream_name(a->upstream));
    kv_str(p, "policy", a->config.policy == CCA_POLICY_GREEDY ? "greedy" : "growth");
    kv_uint(p, "history_entries", a->history ? a->history->cap : 0);
    kv_uint(p, "history_recorded", a->history ? a->history->total : 0);
    pk_dict_end(p);
}

/* The config as one "key:value,..." string (cca_config_print's lines);
 * NULL when host memory is short. */
static char *config_string(const cca_config *c) {
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (!m)
        return NULL;
    cca_status st = cca_config_print(c, m, 0);
    if (fclose(m) != 0 || st != CCA_OK) {
        free(text);
        return NULL;
    }
    for (size_t i = 0; i < len; i++)
        if (text[i] == '\n')
            text[i] = i + 1 == len ? '\0' : ',';
    return text;
}

/* What the body needs: the allocator, the device it names, the config text. */
typedef struct torch_ctx {
    const cca_allocator *a;
    int device;
    const char *conf;
} torch_ctx;
static int torch_body(const void *ctx, FILE *f);

cca_status cca_write_snapshot_torch(const cca_allocator *a, int device, FILE *f) {
    if (!a || !f)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_write_snapshot_torch: %s is NULL", a ? "f" : "allocator");
    if (device < 0 || device > CCA_SNAPSHOT_MAX_DEVICE)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "cca_write_snapshot_torch: device %d not in [0, %d]", device,
                             CCA_SNAPSHOT_MAX_DEVICE);
    if (ccai_mutex_held_here(&a->lock))
        return ccai_lock_refused("cca_write_snapshot_torch");
    char *conf = config_string(&a->config); /* immutable: no lock needed */
    if (!conf)
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "cca_write_snapshot_torch: host malloc failed");
    torch_ctx t = {a, device, conf};
    int r = ccai_write_via_memory(f, torch_body, &t);
    free(conf);
    if (r == CCAI_BODY_NOMEM)
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "cca_write_snapshot_torch: host malloc failed");
    if (r != CCAI_BODY_OK || ccai_write_failed(f))
        return cca_set_error(CCA_ERR_IO, "cca_write_snapshot_torch: write failed");
    return CCA_OK;
}

/* The pickle's body (ccai_body_fn), under the lock. */
static int torch_body(const void *ctx, FILE *f) {
    const torch_ctx *t = ctx;
    const cca_allocator *a = t->a;
    int device = t->device;
    const char *conf = t->conf;
    cca_allocator *m = (cca_allocator *)a;          /* the lock is not part of the logical state */
    (void)ccai_lock(m, "cca_write_snapshot_torch"); /* never refused: the caller checked */
    pk p = {f, false};
    pk_op(&p, PK_PROTO);
    pk_op(&p, 2);
    pk_dict(&p);
    write_segments(&p, a, device);
    write_traces(&p, a, device);
    write_settings(&p, a, conf);
    pk_dict_end(&p);
    pk_op(&p, PK_STOP);
    ccai_unlock(m);
    return p.bad ? CCAI_BODY_WRITE : CCAI_BODY_OK;
}
