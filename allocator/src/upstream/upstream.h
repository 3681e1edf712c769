/*
 * upstream.h — where device memory comes from: the wrapper every upstream
 * sits behind (upstream.c: accounting, the vm rules, events), the simulated
 * device (host.c) and its copy engine (copy_engine.c), the CUDA one
 * (cuda.c) and the record of reserved ranges (vm_ranges.c).
 *
 * - An upstream knows nothing of the allocator: this header includes no
 *   allocator type, and the fork handler reaches a device's own locks
 *   through hooks (ccai_upstream_set_fork_hooks), not by name.
 * - Every op returns a cca_status and sets the thread's message on failure,
 *   but two: event_query keeps the caller's message whatever it answers (a
 *   failure is logged, once per run of them), and event_destroy returns
 *   nothing (a refusal is logged).
 */
#ifndef CCA_UPSTREAM_H
#define CCA_UPSTREAM_H

#include "../support/support.h"

#include <pthread.h>
#include <stdint.h>

/* vm_ranges.c: an upstream's record of its reserved address ranges, of
 * which granules in them are mapped and where each physical allocation
 * starts, one bit each (the CUDA upstream's: the driver keeps no such
 * record it can be asked for), and the vm rules checked on it before any
 * driver call, so that a call breaking one changes nothing. Not locked:
 * the caller holds its own lock. */
typedef struct ccai_vm_range {
    struct ccai_vm_range *next;
    uintptr_t base;
    size_t size, granules;
    uint64_t *starts;  /* bit i: an allocation starts at granule i (meaningful where mapped) */
    uint64_t mapped[]; /* bit i: granule i is mapped; then the starts words */
} ccai_vm_range;
typedef struct ccai_vm_ranges {
    ccai_vm_range *head;
    size_t granule;  /* a power of two */
    const char *who; /* the upstream's name, for messages */
    bool whole_maps; /* CCA_VM_WHOLE_MAPS: an unmap names whole maps only */
} ccai_vm_ranges;
/* Record [base, base + size) (size a multiple of the granule), nothing
 * mapped. CCA_ERR_OUT_OF_MEMORY when host memory has no room. */
cca_status ccai_vm_ranges_add(ccai_vm_ranges *rs, uintptr_t base, size_t size);
/* Forget r (its range released). */
void ccai_vm_ranges_remove(ccai_vm_ranges *rs, ccai_vm_range *r);
void ccai_vm_ranges_free(ccai_vm_ranges *rs);
/* The rules (CCA_ERR_UPSTREAM naming the rule and the granule, nothing
 * changed; else CCA_OK with the range and the index of addr's granule):
 * a map lies inside one range and overlaps no mapped granule; an unmap
 * lies inside one range and names only mapped granules, and with
 * whole_maps starts at a map's start and ends at a map's end (the map it
 * would cut is named); a release names one range exactly, with nothing
 * mapped in it. */
cca_status ccai_vm_check_map(const ccai_vm_ranges *rs, uintptr_t addr, size_t size, ccai_vm_range **r, size_t *first);
cca_status ccai_vm_check_unmap(const ccai_vm_ranges *rs, uintptr_t addr, size_t size, ccai_vm_range **r, size_t *first);
cca_status ccai_vm_check_release(const ccai_vm_ranges *rs, uintptr_t base, size_t size, ccai_vm_range **r);
bool ccai_vm_range_mapped(const ccai_vm_range *r, size_t i);
void ccai_vm_range_set(ccai_vm_range *r, size_t i, bool mapped);
/* Where the allocations of granules [first, first + n), about to be mapped
 * by one vm_map, start: each granule without whole_maps, the first only
 * with. Mapped bits untouched. */
void ccai_vm_range_mark_map(const ccai_vm_ranges *rs, ccai_vm_range *r, size_t first, size_t n);
bool ccai_vm_range_starts(const ccai_vm_range *r, size_t i);
/* The end of the allocation starting at granule i: the next granule before
 * `end` where one starts, else end. */
size_t ccai_vm_map_end(const ccai_vm_range *r, size_t i, size_t end);

/* upstream.c: the wrapper every upstream sits behind (accounting included). */
struct cca_upstream {
    cca_upstream_ops ops;
    void *ctx;
    pthread_mutex_t lock;
    cca_upstream_stats stats;
    size_t vm_granularity; /* asked once (0: not yet); under lock */
    char name[32];
    char no_vm_reason[128]; /* why it has no vm ops, when its maker said ("": not said) */
    bool no_vm_logged;      /* cca_create's expandable:1 fallback line was written; under lock */
    bool query_failing;     /* the last event_query failed (its run was logged once); under lock */
    ccai_fork_link fork;    /* fork.c's registry; under its lock */
    void (*fork_lock)(void *ctx, bool lock); /* the device's own locks (ccai_upstream_set_fork_hooks) */
    void (*fork_child)(void *ctx);           /* its state fixed in a forked child */
};
/* Why u has no vm_* ops (cuda.c: the driver or the device lacks
 * VMM), for the messages that say so. */
void ccai_upstream_set_no_vm_reason(cca_upstream *u, const char *why);
/* cca_create `asked` for expandable:1 (the default) and u has no vm ops:
 * where its maker said why (a GPU without VMM), one log line per upstream
 * (the first such allocator), naming it and why; else nothing. */
void ccai_upstream_log_no_vm(cca_upstream *u, bool asked);
bool ccai_upstream_has_events(const cca_upstream *u);
/* Has the stream_synchronize op (else waiting for a stream is the device's synchronize). */
bool ccai_upstream_has_stream_sync(const cca_upstream *u);
cca_status ccai_upstream_event_record(cca_upstream *u, cca_stream s, void **event);
cca_status ccai_upstream_event_query(cca_upstream *u, void *event);
void ccai_upstream_event_destroy(cca_upstream *u, void *event);
/* A device whose context has locks of its own, or state to fix in a forked
 * child, says so once after ccai_upstream_wrap (host.c does): lock(ctx,
 * true/false) around a fork, child(ctx) in the child. NULL: none. */
void ccai_upstream_set_fork_hooks(cca_upstream *u, void (*lock)(void *ctx, bool lock), void (*child)(void *ctx));

/* host.c / cuda.c build ops tables over a context; fn is
 * the public function called, which a refusal's message names. */
cca_status ccai_upstream_wrap(const cca_upstream_ops *ops, void *ctx, cca_upstream **out, const char *fn);

/* copy_engine.c: the simulated device's copy engine: the upstream's copies
 * run by a thread of their own, in order, while the caller goes on, as a
 * GPU's copy engine runs cudaMemcpyAsync beside the host (host.c's copy and
 * copy_wait ops). */
#define CCAI_COPY_RING 64 /* copies queued at most; one more waits for room */

typedef struct ccai_copy_job {
    void *dst;
    const void *src;
    size_t size;
} ccai_copy_job;

typedef struct ccai_copy_engine {
    pthread_mutex_t lock;
    pthread_cond_t work; /* the thread: a job queued, or stop         */
    pthread_cond_t done; /* callers: a job done (room, or all done);
                            a fork: the thread in its loop          */
    ccai_copy_job ring[CCAI_COPY_RING];
    size_t head, next, tail; /* [head, next) running (one at most), [next, tail) queued */
    bool started, stop;
    bool running; /* the thread has entered its loop (its start-up over) */
    pthread_t thread;
} ccai_copy_engine;

void ccai_copy_engine_init(ccai_copy_engine *e);
/* Copy size bytes from src to dst: dst's pages faulted in first, by the
 * caller, then the copy queued (or done at once: see copy_engine.c). */
void ccai_copy_engine_copy(ccai_copy_engine *e, void *dst, const void *src, size_t size);
/* Return once every copy queued before the call is done. */
void ccai_copy_engine_wait(ccai_copy_engine *e);
/* Stop the thread (every queued copy done first). The engine is unusable after. */
void ccai_copy_engine_destroy(ccai_copy_engine *e);
/* fork(): lock (prepare: once a thread started has entered its loop) /
 * unlock (parent and child, after); child: the engine emptied, without a
 * thread (the child has none), under the lock. */
void ccai_copy_engine_fork_lock(ccai_copy_engine *e, bool lock);
void ccai_copy_engine_fork_child(ccai_copy_engine *e);
/* fork.c's handler, last of prepare (lock: once no engine's thread is
 * being stopped, every engine's, destroyed devices' included) and first
 * after it (unlock; child: in the child). */
void ccai_copy_engine_fork_exits(bool lock, bool child);

#endif /* CCA_UPSTREAM_H */
