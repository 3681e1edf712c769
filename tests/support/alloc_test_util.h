/*
 * alloc_test_util.h — helpers shared by the allocator suites (tests/allocator/).
 *
 * Three kinds of helper:
 *   tu_*   short-hands that assert: create a host-upstream allocator from a
 *          config string, allocate and free expecting success, compare stats
 *          field by field (so a failure names the field), check invariants.
 *   tu_upstream  a test double upstream ("test" in reports) with its own
 *          accounting, independent of the allocator's and of the wrapper's:
 *          a capacity, a list of live (pointer, size) pairs, call counters,
 *          a fault switch that fails the k-th alloc/free call, and events
 *          that can be held back until released or synchronized.
 *   tu_faulty  a wrapper over a real upstream (the simulated device, vm ops
 *          included) that fails the N-th call of one kind (alloc, free,
 *          vm_reserve, vm_map, vm_unmap, vm_release, synchronize), once or
 *          from then on, and counts each kind's calls and successes.
 *
 * Everything asserts through Criterion, so a helper failing fails the test
 * that called it.
 */
#ifndef CCA_ALLOC_TEST_UTIL_H
#define CCA_ALLOC_TEST_UTIL_H

#include "ccalloc.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)
#define GiB (1024 * MiB)

/* ---- allocator short-hands ------------------------------------------------ */

/* A host upstream of `capacity` bytes and an allocator over it, configured
 * by `conf` ("key:value,...") on top of the defaults (NULL = defaults). */
void tu_host_allocator(size_t capacity, const char *conf, cca_upstream **u, cca_allocator **a);
/* An allocator over any upstream with `conf` on top of the defaults. */
cca_allocator *tu_allocator(cca_upstream *u, const char *conf);
/* No live blocks; cca_destroy succeeds and the upstream's bytes_in_use drops
 * by exactly the allocator's reserved_bytes, its allocations by the classic
 * segments, its reserved and mapped address space by what the expandable
 * ones hold (other tenants may remain). */
void tu_destroy_clean(cca_allocator *a, cca_upstream *u);
/* tu_destroy_clean, then the upstream must hold nothing; destroy it too. */
void tu_teardown(cca_allocator *a, cca_upstream *u);
/* The same checks for a suite's .fini, which must not use cr_assert (Criterion
 * ignores assertion failures there): a failure aborts, and the run fails. */
void tu_fixture_teardown(cca_allocator *a, cca_upstream *u);

/* The simulated device with virtual memory of granularity `gran` (0: the
 * device's default, 2 MiB). */
cca_upstream *tu_vm_device(size_t capacity, size_t gran);
/* The same with vm_backing (CCA_VM_PAGES or CCA_VM_WHOLE_MAPS). */
cca_upstream *tu_vm_device_backed(size_t capacity, size_t gran, int backing);
/* Nothing live: cca_empty_cache gives everything back (reserved 0, no
 * segment or range left, the report saying so) and the upstream holds
 * nothing (no byte in use, nothing mapped or reserved). Destroys neither. */
void tu_empty_all(cca_allocator *a, cca_upstream *u);

void *tu_alloc(cca_allocator *a, size_t size, cca_stream s); /* asserts CCA_OK, non-NULL */
void tu_free(cca_allocator *a, void *p);                     /* asserts CCA_OK */
size_t tu_block_size(cca_allocator *a, const void *p);

cca_stats tu_stats(const cca_allocator *a);
cca_upstream_stats tu_upstream_stats(cca_upstream *u);
/* cca_check_invariants == CCA_OK, with cca_last_error() in the message. */
void tu_check(const cca_allocator *a);
/* Every integer field equal, fragmentation equal; `what` names the step. */
void tu_assert_stats_equal(const cca_stats *expected, const cca_stats *actual, const char *what);
/* An error path left nothing changed: invariants hold and stats equal `before`. */
void tu_assert_intact(const cca_allocator *a, const cca_stats *before, const char *what);

/* Fill / check a block with a pattern derived from `seed`. Blocks larger than
 * 64 KiB are filled at their head, tail and one word per 4 KiB page. */
void tu_fill(void *p, size_t size, uint64_t seed);
bool tu_check_fill(const void *p, size_t size, uint64_t seed);
/* How many of the n bytes at p are not `byte`: one memcmp of the bytes
 * against themselves shifted by one when none differs (a byte loop over
 * MiBs was a quarter of a suite's time under ASan), counted when one does. */
size_t tu_bytes_not(const void *p, size_t n, unsigned char byte);

/* A log sink for cca_set_log_callback that counts lines and keeps the last. */
typedef struct tu_log_capture {
    int lines;
    char last[512];
} tu_log_capture;
void tu_capture_log(void *capture, const char *line);

/* Host memory: the page size; whether a byte is readable (0) or faults
 * (EFAULT), asked without faulting; CLOCK_MONOTONIC in ns; resident bytes. */
size_t tu_page_size(void);
int tu_probe(const void *p);
/* ccalloc.h: a call that succeeds leaves the thread's message as it was.
 * TU_KEEPS_MESSAGE(call, what): sets a mark, evaluates call (a cca_status)
 * and, when it returns CCA_OK, asserts the mark is still the message;
 * yields the status. For the random drivers, where an upstream refusal a
 * call recovered from must not leave its message behind. */
#define TU_MARK "the caller's own message"
/* The mark set, then the call made (its value): for a chain of calls whose
 * statuses a helper checks afterwards (the engine's suites). */
#define TU_MARKED(call) (cca_set_error(CCA_ERR_IO, TU_MARK), (call))
#define TU_KEEPS_MESSAGE(call, what)                                                                                   \
    ({                                                                                                                 \
        cca_set_error(CCA_ERR_IO, TU_MARK);                                                                            \
        cca_status keeps_st_ = (call);                                                                                 \
        if (keeps_st_ == CCA_OK)                                                                                       \
            cr_assert_str_eq(cca_last_error(), TU_MARK, "%s: %s succeeded but left '%s'", (what), #call,               \
                             cca_last_error());                                                                        \
        keeps_st_;                                                                                                     \
    })

#define TU_ASSERT_READABLE(p) cr_assert_eq(tu_probe(p), 0, "%s (%p) should be accessible", #p, (void *)(p))
#define TU_ASSERT_FAULTS(p) cr_assert_eq(tu_probe(p), EFAULT, "%s (%p) should fault (EFAULT)", #p, (void *)(p))
uint64_t tu_now_ns(void);
/* The calling thread's CPU time: what a call cost, not counting the time
 * other programs had the core (for cost ratios measured within one test). */
uint64_t tu_thread_cpu_ns(void);
size_t tu_resident_bytes(void);
/* The soft RLIMIT_AS lowered below the process's address space now: the
 * kernel then refuses every mapping that would not shrink it (ENOMEM), a
 * MAP_FIXED one over pages of the same size included, while mprotect and
 * madvise still work. Returns the limit to put back with tu_as_limit_lift.
 * Nothing in between may allocate (a malloc may need a new mapping, and
 * Criterion's asserts may malloc): keep statuses and messages, assert
 * after. */
struct rlimit tu_as_limit_below_now(void);
void tu_as_limit_lift(const struct rlimit *old);
/* mlock(p, len), and whether the pages really are locked now: the
 * process's VmLck grew by len. false with *why set when not: mlock
 * refused, or a no-op (ASan intercepts it and locks nothing). */
bool tu_mlock(void *p, size_t len, char *why, size_t whylen);

/* The PRNG of the randomized suites: the next output of the splitmix64 stream
 * whose state is *state (ccai_splitmix64_next, common/ccai_rng.h). */
uint64_t tu_rand(uint64_t *state);

/* ---- the test double upstream ---------------------------------------------- */

#define TU_MAX_LIVE 4096

typedef struct tu_live {
    void *ptr;
    size_t size;
} tu_live;

typedef struct tu_upstream {
    pthread_mutex_t lock;
    size_t capacity; /* alloc fails with OOM past this */
    size_t used;     /* own accounting: bytes handed out now */
    tu_live live[TU_MAX_LIVE];
    size_t live_count;
    /* counters (successful and failed calls alike) */
    uint64_t alloc_calls, free_calls, sync_calls;
    uint64_t event_records, event_queries, events_live;
    /* faults: the fail_at-th call among alloc+free calls fails (1-based, 0 =
     * never); alloc fails with alloc_error, free with CCA_ERR_UPSTREAM. */
    uint64_t calls, fail_at;
    cca_status alloc_error;
    uint64_t failures;
    /* events: complete when their number <= events_done. hold_events keeps
     * new events incomplete; synchronize completes every event unless
     * sync_keeps_events is set. */
    bool hold_events, sync_keeps_events;
    uint64_t events_recorded, events_done;
    /* more faults: synchronize and event record fail (CCA_ERR_UPSTREAM, no
     * message set, like a careless custom upstream) while these are set; a
     * refused record leaves *event pointing at a token that is no event, as
     * a driver may leave its out-parameter (querying or destroying it fails
     * the test) */
    bool fail_sync, fail_record;
    /* order of sizes and pointers given back (trim order checks) */
    size_t freed_sizes[64];
    void *freed_ptrs[64];
    size_t freed_count;
} tu_upstream;

/* A cca_upstream over `t` (initialised here with `capacity`). with_events:
 * provide the three event ops; otherwise the allocator synchronizes. */
cca_upstream *tu_upstream_create(tu_upstream *t, size_t capacity, bool with_events);
/* Complete every event recorded so far. */
void tu_upstream_release_events(tu_upstream *t);
/* Give back whatever the allocator could not (after a refused free). */
void tu_upstream_free_leftovers(tu_upstream *t);

/* ---- the fault-injecting wrapper upstream ---------------------------------- */

/* tu_faulty forwards every op to `inner` (which must have vm ops) and fails
 * calls on demand, so a test can make the allocator meet a refusal at every
 * upstream call it makes (test_expandable_*.c, test_domain_release.c):
 *
 *   calls[k]    every call of kind k, numbered from 1, injected failures
 *               included.
 *   fail_at[k]  N: call number N of kind k fails (0 = never), without
 *               reaching `inner`; with sticky[k], every later call of k too.
 *               A test aims at "the N-th call from now" with
 *               fail_at[k] = calls[k] + N.
 *   failures    injected failures so far, all kinds together.
 *   ok[k]       calls of kind k that reached `inner` and succeeded (what the
 *               allocator was granted, to compare with its own stats).
 *   order       the kind of every counted call, in the order made (the
 *               first TU_FAULTY_ORDER of them; order_count counts them
 *               all): "synchronize before the first vm_unmap" is checkable.
 *   corrupt_in_at  N: copy number N to the device (host -> device,
 *               numbered in copies_in from 1, injected failures included;
 *               0 = never) lands with byte corrupt_byte of its destination
 *               (its last byte when the copy is shorter) inverted: the
 *               wrapper inverts it when the next copy_wait that is not
 *               failed returns, the bytes having landed, and counts it in
 *               corrupted. The copy itself succeeds: data changed on its
 *               way back, which only a check of the bytes can find. The
 *               inner device's memory must be host memory (the simulated
 *               device).
 *   book        NULL, or the device's side of the memory, kept by the test
 *               (tu_book): every granted alloc and vm_map as a piece; a
 *               granted free or vm_unmap takes its range out (over whole
 *               maps an unmap must name whole maps), and a vm_release with
 *               a map in its range fails the test.
 *
 * An injected failure returns CCA_ERR_OUT_OF_MEMORY for alloc, vm_reserve,
 * vm_map and host_alloc, CCA_ERR_UPSTREAM for free, vm_unmap, vm_release,
 * synchronize, host_free, copy and copy_wait,
 * with the message "<name>: injected <kind> failure". mem_info and
 * vm_granularity are passed through and are no fault kind; mem_info calls
 * are counted in mem_info_calls (refused ones included), and mem_info
 * fails while fail_mem_info is set, and from call fail_mem_info_from on
 * (every fail_mem_info_period-th call from there). tu_faulty_create_without_mem_info
 * makes a wrapper with no mem_info op at all (the allocator cannot ask the
 * device's size or free memory). A device that does not give all its
 * memory back: with keep_per_unmap set, each granted vm_unmap (only once a
 * host_alloc was granted, if keep_after_host_alloc) adds keep_per_unmap to
 * `kept`, which mem_info then reports as not free (down to 0 free).
 *
 * Events (with_events; without them the allocator synchronizes instead) are
 * the wrapper's own numbered tokens, not the device's: one is complete when
 * its number <= events_done. A new event is complete at once unless
 * hold_events is set; a synchronize that is not failed completes every event
 * recorded so far unless sync_keeps_events is set; a test may also set
 * events_done itself. events_live counts events not yet destroyed.
 *
 * Not locked: for single-threaded tests. */
typedef enum tu_fault_kind {
    TU_FAULT_ALLOC,
    TU_FAULT_FREE,
    TU_FAULT_RESERVE, /* vm_reserve */
    TU_FAULT_MAP,     /* vm_map */
    TU_FAULT_UNMAP,   /* vm_unmap */
    TU_FAULT_RELEASE, /* vm_release */
    TU_FAULT_SYNC,    /* synchronize */
    TU_FAULT_STREAM_SYNC, /* stream_synchronize (tu_faulty_create_streams only) */
    TU_FAULT_HOST_ALLOC,  /* host_alloc (when the inner upstream has the copy ops) */
    TU_FAULT_HOST_FREE,   /* host_free */
    TU_FAULT_COPY,        /* copy */
    TU_FAULT_COPY_WAIT,   /* copy_wait */
    TU_FAULT_KINDS
} tu_fault_kind;
/* The op's name for each kind ("alloc", ..., "vm_release", "synchronize"). */
extern const char *const tu_fault_names[TU_FAULT_KINDS];

/* A tu_faulty's book: what the device holds, piece by piece (a classic
 * segment; a map, carved by partial unmaps over CCA_VM_PAGES). Room for
 * test_whole_maps_random's 32 MiB of maps of two 4 KiB pages (4,096 and
 * more), with margin. */
#define TU_BOOK_MAX 16384
typedef struct tu_piece {
    uintptr_t lo, hi;
} tu_piece;
typedef struct tu_book {
    tu_piece maps[TU_BOOK_MAX], segs[TU_BOOK_MAX];
    size_t nmaps, nsegs;
} tu_book;

#define TU_FAULTY_ORDER 256
typedef struct tu_faulty {
    cca_upstream *inner; /* the caller's: destroyed by the caller, after the wrapper */
    const char *name;
    uint64_t calls[TU_FAULT_KINDS], ok[TU_FAULT_KINDS], fail_at[TU_FAULT_KINDS];
    tu_fault_kind order[TU_FAULTY_ORDER];
    size_t order_count;
    bool sticky[TU_FAULT_KINDS];
    uint64_t failures;
    bool hold_events, sync_keeps_events;
    uint64_t events_recorded, events_done, events_live;
    bool fail_mem_info;      /* mem_info refuses (CCA_ERR_UPSTREAM): the device's size is unknown */
    uint64_t fail_mem_info_from;   /* ... and from this call on (1-based; 0: never), */
    uint64_t fail_mem_info_period; /* every period-th from there (0 or 1: every one) */
    size_t keep_per_unmap, kept; /* a device that keeps memory: each granted vm_unmap adds to kept */
    bool keep_after_host_alloc;  /* ... only once a host_alloc was granted (a sleep) */
    uint64_t mem_info_calls; /* every mem_info call, refused ones included */
    cca_stream synced_streams[TU_FAULTY_ORDER]; /* tu_faulty_create_streams: each call's stream */
    uint64_t copies_in, corrupt_in_at, corrupted; /* host -> device copies; the one to corrupt; bytes inverted */
    size_t corrupt_byte;                          /* which byte of its destination */
    unsigned char *corrupt_pending;               /* inverted at the next copy_wait; NULL: none */
    tu_book *book;                                /* the device's pieces, set by the test; NULL: none */
} tu_faulty;

/* A cca_upstream over `f` (reset here) wrapping `inner`. `name` is the
 * upstream's name in reports and the prefix of injected failures' messages
 * (the suites use "fx" and "dx"); with_events: provide the three event ops. */
cca_upstream *tu_faulty_create(tu_faulty *f, cca_upstream *inner, const char *name, bool with_events);
/* The same with a stream_synchronize op (TU_FAULT_STREAM_SYNC): each call's
 * stream is kept in synced_streams (the first TU_FAULTY_ORDER); one that
 * is not failed completes every event recorded so far, as synchronize does
 * (the wrapper keeps no stream's work apart), unless sync_keeps_events. */
cca_upstream *tu_faulty_create_streams(tu_faulty *f, cca_upstream *inner, const char *name, bool with_events);
/* The same with no mem_info op (cca_upstream_mem_info: CCA_ERR_UPSTREAM). */
cca_upstream *tu_faulty_create_without_mem_info(tu_faulty *f, cca_upstream *inner, const char *name, bool with_events);
/* The wrapper u and its inner device hold nothing (no device byte, no
 * host byte: what a program on u gave back whatever happened); both
 * destroyed. */
void tu_faulty_destroy_clean(cca_upstream *u, cca_upstream *inner);
/* No more injected failures (fail_at and sticky cleared); counts kept. */
void tu_faulty_faults_off(tu_faulty *f);
/* The index in f->order of the first call of kind k at or after `from`
 * (both within the recorded TU_FAULTY_ORDER); SIZE_MAX when none. */
size_t tu_faulty_first(const tu_faulty *f, tu_fault_kind k, size_t from);

#endif /* CCA_ALLOC_TEST_UTIL_H */
