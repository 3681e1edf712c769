/*
 * history.h — the ring of recent events (history.c), for PyTorch-format snapshots.
 */
#ifndef CCA_HISTORY_H
#define CCA_HISTORY_H

#include "support.h"

#include <stdint.h>

/* history.c: the ring of recent events (config `history`; NULL when off). */
typedef enum ccai_event_kind {
    CCAI_EV_ALLOC = 0,
    CCAI_EV_FREE_REQUESTED,
    CCAI_EV_FREE_COMPLETED,
    CCAI_EV_SEGMENT_ALLOC,
    CCAI_EV_SEGMENT_FREE,
    CCAI_EV_SEGMENT_MAP,
    CCAI_EV_SEGMENT_UNMAP,
    CCAI_EV_OOM
} ccai_event_kind;
typedef struct ccai_event {
    uint64_t time_us; /* CLOCK_REALTIME, microseconds since the epoch */
    uintptr_t addr;   /* block or first page; oom: the device's free bytes */
    size_t size;      /* requested bytes (blocks, oom), bytes (segments, maps) */
    cca_stream stream;
    uint8_t kind; /* ccai_event_kind */
} ccai_event;
typedef struct ccai_history {
    size_t cap;     /* entries */
    uint64_t total; /* events ever recorded; event k is in ring[k % cap] */
    ccai_event ring[];
} ccai_history;
#define CCAI_HISTORY_MAX ((size_t)16 << 20) /* the config option's upper bound */
cca_status ccai_history_create(size_t cap, ccai_history **out);
void ccai_history_destroy(ccai_history *h);
void ccai_history_record(ccai_history *h, ccai_event_kind kind, uintptr_t addr, size_t size, cca_stream stream);
/* cca_free: free_requested, and free_completed unless the free is deferred. */
void ccai_history_free(ccai_history *h, uintptr_t addr, size_t requested, cca_stream stream, bool deferred);
size_t ccai_history_held(const ccai_history *h); /* min(total, cap) */
const ccai_event *ccai_history_at(const ccai_history *h, size_t i); /* 0 = oldest held */
const char *ccai_event_name(ccai_event_kind kind);                 /* PyTorch's action name */

#endif /* CCA_HISTORY_H */
