/*
 * free_index_v1.c — the free index, version 1: sorted bins (BFC style).
 * Read this one first: the same answers as free_index.c (version 2, which
 * the allocator uses), the plainest exact way; the tests run the two
 * against each other (tests/allocator/unit/test_free_index_v1.c).
 *
 * - Per key stream, V1_BINS bins, each a growable array of FREE blocks
 *   sorted strictly by (size, address); bin i holds sizes in
 *   [512 B << i, 512 B << (i + 1)), the last also every larger size.
 * - It only reads a block (size, addr, stream, state), never writes one.
 * - A stream's bins live from its first attach to its last detach.
 * - Best fit: the smallest block of the stream with size >= n, the lowest
 *   address on ties (NULL: none, or over max_size): the lower bound of
 *   (n, 0) in n's bin, else the first block of the next non-empty bin.
 * - Departs from v2: take is remove, split is insert then remove, no
 *   recent slot; insert and split fail (CCA_ERR_OUT_OF_MEMORY, nothing
 *   changed) when a bin cannot grow.
 *
 *     stream NULL:  bin 0  [512 B, 1 KiB)  [ 512@0x9000 ]
 *                   bin 1  [1 KiB, 2 KiB)  [ ]
 *                   bin 2  [2 KiB, 4 KiB)  [ 2K@0x1000  3K@0x2000  3K@0x3000 ]
 *                   ...
 *                   bin 20 [512 MiB, ...)  [ 1G@0x40000000  8G@0x100000000 ... ]
 *
 * Cost (S streams, k blocks in the bin, B = 21 bins): attach, detach O(S);
 * insert, remove O(S + log k) plus O(k) to move the tail (insert may
 * double the bin); best_fit O(S + log k + B); largest O(S * B);
 * largest_run that plus run() per block larger than the best run so far;
 * walk, check O(S * B + blocks).
 */
#include "free_index_v1.h"

#include <stdlib.h>
#include <string.h>

#define V1_BINS 21

typedef struct v1_bin {
    ccai_block **v; /* sorted by (size, address) */
    size_t n, cap;
} v1_bin;

struct ccai_v1_stream {
    struct ccai_v1_stream *next;
    cca_stream stream;
    size_t segments; /* attaches not yet matched by a detach */
    v1_bin bins[V1_BINS];
};

/* ---- bins ------------------------------------------------------------------- */

/* floor(log2(size / 512)), the last bin for every larger size. */
static unsigned bin_of(size_t size) {
    size_t units = size / CCA_GRANULARITY;
    if (units == 0)
        return 0;
    unsigned log2 = 63u - (unsigned)__builtin_clzll((unsigned long long)units);
    return log2 < V1_BINS ? log2 : V1_BINS - 1;
}

/* Is b's key below (size, addr)? */
static bool below(const ccai_block *b, size_t size, uintptr_t addr) {
    return b->size < size || (b->size == size && b->addr < addr);
}

/* The first position whose block is not below (size, addr): binary search. */
static size_t lower_bound(const v1_bin *bin, size_t size, uintptr_t addr) {
    size_t lo = 0, hi = bin->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (below(bin->v[mid], size, addr))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Room for one more entry. */
static cca_status bin_reserve(v1_bin *bin) {
    if (bin->n < bin->cap)
        return CCA_OK;
    size_t cap = bin->cap ? bin->cap * 2 : 8;
    ccai_block **v = realloc(bin->v, cap * sizeof *v);
    if (!v)
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "free index v1: host malloc failed");
    bin->v = v;
    bin->cap = cap;
    return CCA_OK;
}

/* ---- streams ---------------------------------------------------------------- */

static ccai_v1_stream *stream_of(const ccai_free_index_v1 *ix, cca_stream stream) {
    ccai_v1_stream *sb = ix->streams;
    while (sb && sb->stream != stream)
        sb = sb->next;
    return sb;
}

static void stream_free(ccai_v1_stream *sb) {
    for (unsigned i = 0; i < V1_BINS; i++)
        free(sb->bins[i].v);
    free(sb);
}

cca_status ccai_free_index_v1_attach(ccai_free_index_v1 *ix, cca_stream stream) {
    ccai_v1_stream *sb = stream_of(ix, stream);
    if (!sb) {
        sb = calloc(1, sizeof *sb);
        if (!sb)
            return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "free index v1: host malloc failed");
        sb->stream = stream;
        sb->next = ix->streams;
        ix->streams = sb;
    }
    sb->segments++;
    return CCA_OK;
}

void ccai_free_index_v1_detach(ccai_free_index_v1 *ix, cca_stream stream) {
    ccai_v1_stream **link = &ix->streams;
    while (*link && (*link)->stream != stream)
        link = &(*link)->next;
    ccai_v1_stream *sb = *link;
    if (!sb || --sb->segments > 0)
        return;
    for (unsigned i = 0; i < V1_BINS; i++) /* its last segment is gone: so are its blocks */
        ccai_assert(sb->bins[i].n == 0);
    *link = sb->next;
    stream_free(sb);
}

void ccai_free_index_v1_destroy(ccai_free_index_v1 *ix) {
    while (ix->streams) {
        ccai_v1_stream *next = ix->streams->next;
        stream_free(ix->streams);
        ix->streams = next;
    }
    ix->count = ix->bytes = 0;
}

/* ---- insert and remove ------------------------------------------------------ */

cca_status ccai_free_index_v1_insert(ccai_free_index_v1 *ix, ccai_block *b) {
    ccai_assert(b->state == CCAI_FREE);
    ccai_v1_stream *sb = stream_of(ix, b->stream);
    ccai_assert(sb != NULL); /* attached with its segment */
    v1_bin *bin = &sb->bins[bin_of(b->size)];
    cca_status st = bin_reserve(bin);
    if (st != CCA_OK)
        return st;
    size_t pos = lower_bound(bin, b->size, b->addr);
    ccai_assert(pos == bin->n || bin->v[pos]->addr != b->addr); /* not in already */
    memmove(&bin->v[pos + 1], &bin->v[pos], (bin->n - pos) * sizeof bin->v[0]);
    bin->v[pos] = b;
    bin->n++;
    ix->count++;
    ix->bytes += b->size;
    return CCA_OK;
}

/* b must be in the index under its present size and address. */
void ccai_free_index_v1_remove(ccai_free_index_v1 *ix, ccai_block *b) {
    ccai_v1_stream *sb = stream_of(ix, b->stream);
    ccai_assert(sb != NULL);
    v1_bin *bin = &sb->bins[bin_of(b->size)];
    size_t pos = lower_bound(bin, b->size, b->addr);
    ccai_assert(pos < bin->n && bin->v[pos] == b);
    memmove(&bin->v[pos], &bin->v[pos + 1], (bin->n - pos - 1) * sizeof bin->v[0]);
    bin->n--;
    ix->count--;
    ix->bytes -= b->size;
}

/* rest first: if its bin cannot grow, b stays and nothing changes. */
cca_status ccai_free_index_v1_split(ccai_free_index_v1 *ix, ccai_block *b, ccai_block *rest) {
    cca_status st = ccai_free_index_v1_insert(ix, rest);
    if (st == CCA_OK)
        ccai_free_index_v1_remove(ix, b);
    return st;
}

/* ---- queries ---------------------------------------------------------------- */

ccai_block *ccai_free_index_v1_best_fit(ccai_free_index_v1 *ix, cca_stream stream, size_t size, size_t max_size) {
    const ccai_v1_stream *sb = stream_of(ix, stream);
    if (!sb)
        return NULL;
    unsigned i = bin_of(size);
    const v1_bin *bin = &sb->bins[i];
    size_t pos = lower_bound(bin, size, 0); /* (size, 0): below every block of that size */
    ccai_block *best = pos < bin->n ? bin->v[pos] : NULL;
    while (!best && ++i < V1_BINS) /* nothing large enough there: the next bin's smallest */
        best = sb->bins[i].n ? sb->bins[i].v[0] : NULL;
    return best && best->size <= max_size ? best : NULL;
}

/* The largest run(b) over the free blocks, or floor; run(b) <= b->size. Per
 * stream, blocks largest first, until one is no larger than the best run
 * found: no block after it can beat that. */
size_t ccai_free_index_v1_largest_run(const ccai_free_index_v1 *ix, size_t (*run)(const ccai_block *b), size_t floor) {
    size_t best = floor;
    for (const ccai_v1_stream *sb = ix->streams; sb; sb = sb->next) {
        for (unsigned i = V1_BINS; i-- > 0;) {
            const v1_bin *bin = &sb->bins[i];
            for (size_t j = bin->n; j-- > 0;) {
                if (bin->v[j]->size <= best)
                    goto next_stream;
                size_t r = run(bin->v[j]);
                best = r > best ? r : best;
            }
        }
    next_stream:;
    }
    return best;
}

static size_t block_size(const ccai_block *b) {
    return b->size;
}

size_t ccai_free_index_v1_largest(const ccai_free_index_v1 *ix) {
    return ccai_free_index_v1_largest_run(ix, block_size, 0);
}

bool ccai_free_index_v1_walk(const ccai_free_index_v1 *ix, bool (*fn)(void *user, const ccai_block *b), void *user) {
    for (const ccai_v1_stream *sb = ix->streams; sb; sb = sb->next)
        for (unsigned i = 0; i < V1_BINS; i++)
            for (size_t j = 0; j < sb->bins[i].n; j++)
                if (!fn(user, sb->bins[i].v[j]))
                    return false;
    return true;
}

/* ---- structure check -------------------------------------------------------- */

/* The rules above, as checks: NULL, or what is broken. O(S^2 + S * B + blocks). */
const char *ccai_free_index_v1_check(const ccai_free_index_v1 *ix) {
    size_t count = 0, bytes = 0;
    for (const ccai_v1_stream *sb = ix->streams; sb; sb = sb->next) {
        if (sb->segments == 0)
            return "free index v1: a stream's bins outlive its segments";
        for (const ccai_v1_stream *o = sb->next; o; o = o->next)
            if (o->stream == sb->stream)
                return "free index v1: a stream has two sets of bins";
        for (unsigned i = 0; i < V1_BINS; i++) {
            const v1_bin *bin = &sb->bins[i];
            if (bin->n > bin->cap || (bin->cap && !bin->v))
                return "free index v1: a bin holds more than its array";
            for (size_t j = 0; j < bin->n; j++) {
                const ccai_block *b = bin->v[j];
                if (!b || b->state != CCAI_FREE)
                    return "free index v1: a bin holds a block that is not free";
                if (b->stream != sb->stream || bin_of(b->size) != i)
                    return "free index v1: a block is in the bin of another size or stream";
                if (j > 0 && !below(bin->v[j - 1], b->size, b->addr))
                    return "free index v1: a bin is not in (size, address) order";
                count++;
                bytes += b->size;
            }
        }
    }
    if (count != ix->count || bytes != ix->bytes)
        return "free index v1: count or bytes differ from the blocks indexed";
    return NULL;
}
