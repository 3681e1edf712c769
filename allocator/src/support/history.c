/*
 * history.c — a ring of the allocator's recent events, for snapshots that
 * show how memory got where it is (snapshot_torch.c writes it as PyTorch's
 * `device_traces`; docs/allocator.md, "Snapshots in PyTorch's format").
 *
 * - Off by default (`history:0`); `history:N` keeps the last N events:
 *
 *   event            recorded by                    addr          size
 *   alloc            cca_alloc / cca_alloc_in       block         requested
 *   free_requested   cca_free                       block         requested
 *   free_completed   the block rejoins its pool:    block         requested
 *                    at cca_free when nothing waits,
 *                    later for a deferred (stream)
 *                    free, or a forced domain
 *                    release of a live block (no
 *                    free_requested then)
 *   segment_alloc    a classic segment reserved     segment base  its size
 *   segment_free     a classic segment given back   segment base  its size
 *   segment_map      pages mapped (one vm_map)      first page    bytes
 *   segment_unmap    pages unmapped (one vm_unmap)  first page    bytes
 *   oom              cca_alloc fails for memory     device free   requested
 *                                                   bytes (0 if unknown)
 *
 * - PyTorch's trace entries (CUDACachingAllocator's record_trace) and its
 *   sizes. A block event's stream is its cca_alloc's, a segment event's the
 *   segment's. Not events: an expandable range's vm_reserve / vm_release
 *   (memory moves by maps, as in PyTorch), and the segments cca_destroy
 *   gives back (the ring goes with it).
 * - The ring: `cap` entries allocated by cca_create and `total` events ever
 *   recorded; event k (0-based) lives in slot k % cap:
 *
 *   cap = 4, total = 6:   slot  0    1    2    3
 *                               e4   e5   e2   e3      oldest e2, newest e5
 *
 * - Invariants: held = min(total, cap); held events in the order they
 *   happened; times (CLOCK_REALTIME, microseconds since the epoch, as
 *   PyTorch's time_us) never decrease, the system clock permitting.
 * - Recording and reading (snapshots) are under the allocator's lock; no
 *   other synchronization.
 * - Costs: recording O(1), one clock read and one 40-byte store (cca_free's
 *   request and completion share a read); 40 bytes per entry (history:64K
 *   = 2.5 MiB), allocated once. Off: one test of a->history against NULL
 *   on each recording path (alloc.c, core/block.c, kinds/classic.c,
 *   kinds/pages.c, observe/oom.c),
 *   two per cached alloc+free pair, predicted not taken; the recorders are
 *   out of line so hot paths carry only a compare and a not-taken call.
 *   Measured: docs/allocator-measurements.md, "The history ring".
 */
#include "history.h"

#include <stdlib.h>
#include <time.h>

cca_status ccai_history_create(size_t cap, ccai_history **out) {
    *out = NULL;
    if (cap == 0 || cap > CCAI_HISTORY_MAX)
        return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "history: %zu entries not in [1, %zu]", cap,
                         (size_t)CCAI_HISTORY_MAX);
    ccai_history *h = malloc(sizeof *h + cap * sizeof h->ring[0]);
    if (!h)
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "history: host malloc failed for %zu entries", cap);
    h->cap = cap;
    h->total = 0;
    *out = h;
    return CCA_OK;
}

void ccai_history_destroy(ccai_history *h) {
    free(h);
}

static uint64_t now_us(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void put(ccai_history *h, uint64_t time_us, ccai_event_kind kind, uintptr_t addr, size_t size,
                cca_stream stream) {
    ccai_event *e = &h->ring[h->total % h->cap];
    e->time_us = time_us;
    e->addr = addr;
    e->size = size;
    e->stream = stream;
    e->kind = kind;
    h->total++;
}

void ccai_history_record(ccai_history *h, ccai_event_kind kind, uintptr_t addr, size_t size, cca_stream stream) {
    put(h, now_us(), kind, addr, size, stream);
}

void ccai_history_free(ccai_history *h, uintptr_t addr, size_t requested, cca_stream stream, bool deferred) {
    uint64_t t = now_us(); /* one clock read for both: the same moment */
    put(h, t, CCAI_EV_FREE_REQUESTED, addr, requested, stream);
    if (!deferred)
        put(h, t, CCAI_EV_FREE_COMPLETED, addr, requested, stream);
}

size_t ccai_history_held(const ccai_history *h) {
    return h->total < h->cap ? (size_t)h->total : h->cap;
}

const ccai_event *ccai_history_at(const ccai_history *h, size_t i) {
    size_t held = ccai_history_held(h);
    ccai_assert(i < held);
    uint64_t k = h->total - held + i; /* the event's number in recording order */
    return &h->ring[k % h->cap];
}

const char *ccai_event_name(ccai_event_kind kind) {
    static const char *names[] = {"alloc",        "free_requested", "free_completed", "segment_alloc",
                                  "segment_free", "segment_map",    "segment_unmap",  "oom"};
    return (unsigned)kind < sizeof names / sizeof names[0] ? names[kind] : "unknown";
}
