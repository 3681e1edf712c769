/*
 * device_books.h — a wrapper upstream that keeps the device side of the
 * books, for the model-based random suites (test_random_domains.c,
 * test_random_streams.c).
 *
 * tb forwards every op to a simulated device (`inner`, vm ops included) and
 * records, independently of the allocator's counters:
 *   ranges   every range it granted (alloc: a classic segment; vm_reserve:
 *            an address range) with the owner the test says the call serves
 *            (`serving`, a domain slot; a grant while serving is -1 counts in
 *            `stray`), and a bit per granule mapped in each address range;
 *            `capturing` notes the index of the last range granted in
 *            `candidate` (kept right as ranges are removed);
 *   counts   calls[k] (every call of kind k: a tu_fault_kind, or TB_RECORD;
 *            injected failures included) and
 *            ok[k] (granted); ups/downs per owner (grants, give-backs);
 *            granules mapped and unmapped;
 *   faults   call fail_at[k] of kind k fails (sticky[k]: every later one too);
 *            or, counting every call of every kind from 1 (`call_no`), call
 *            fail_call fails (sticky_call: every later one too). alloc,
 *            vm_reserve and vm_map fail with CCA_ERR_OUT_OF_MEMORY, the others
 *            with CCA_ERR_UPSTREAM; a refused event_record leaves *event
 *            pointing at a token that is no event (querying or destroying it
 *            fails the test);
 *   events   numbered per stream (the test's streams[], NULL included): one is
 *            complete once its stream's done[] reaches it; an event recorded
 *            on a stream that is not busy[] completes at once; a synchronize
 *            that succeeds completes every event unless sync_keeps. Also
 *            numbered across streams (events_recorded); events_done is that
 *            number once every stream's events are complete (after
 *            tb_progress_all or a synchronize);
 *   one call the test brackets with tb_call_begin: the synchronizes that
 *            succeeded and failed, the bytes, pages and segments given back,
 *            the events recorded (stream and number; 0: refused). With
 *            check_calls set, a vm_unmap must follow a synchronize that
 *            succeeded in the same call unless it undoes pages the call
 *            mapped itself (unmapping does not wait for queued work), and in
 *            a call marked `trimming` nothing is given back once the device
 *            holds no more than `keep`.
 * The first and last granules of every unmap are probed: touching them
 * must fault (EFAULT). The
 * optional `guard` is called before every give-back with the bytes it
 * covers, so a test can check that no live or pending block lies there.
 *
 * Not locked: for single-threaded tests.
 */
#ifndef CCA_DEVICE_BOOKS_H
#define CCA_DEVICE_BOOKS_H

#include "alloc_test_util.h"

#define TB_RANGES 512
#define TB_GRANULES 2048 /* the most granules a range may have */
#define TB_OWNERS 8
#define TB_STREAMS 4
#define TB_RECORD TU_FAULT_KINDS /* the kinds of tu_fault_kind, and event_record */
#define TB_KINDS (TU_FAULT_KINDS + 1)

typedef struct tb_range {
    uintptr_t base;
    size_t size, mapped;
    int owner;
    bool vm, arena; /* arena: set by the test */
    uint64_t id;    /* the grant's number, from 1: a later range at the same base has another */
    uint64_t bits[TB_GRANULES / 64], fresh[TB_GRANULES / 64]; /* mapped; mapped during the current call */
    uint64_t starts[TB_GRANULES / 64]; /* the first granule of every map (whole maps: what an unmap must start at) */
} tb_range;

typedef struct tb_event {
    int stream;
    uint64_t seq;
} tb_event;

typedef struct tb {
    cca_upstream *inner;
    const char *name;
    size_t page;
    bool whole; /* the inner device's maps are whole (CCA_VM_WHOLE_MAPS): so is the wrapper's */
    tb_range r[TB_RANGES];
    int nr;
    uint64_t grants;
    int serving;
    uint64_t stray;
    bool capturing;
    int candidate;
    uint64_t calls[TB_KINDS], ok[TB_KINDS], fail_at[TB_KINDS];
    bool sticky[TB_KINDS];
    uint64_t call_no, fail_call;
    bool sticky_call;
    uint64_t injected;
    uint64_t ups[TB_OWNERS], downs[TB_OWNERS];
    uint64_t granules_mapped, granules_unmapped;
    cca_stream streams[TB_STREAMS];
    int nstreams;
    uint64_t recorded[TB_STREAMS], done[TB_STREAMS];
    bool busy[TB_STREAMS], sync_keeps;
    uint64_t events_recorded, events_done, events_live;
    bool check_calls;
    void (*guard)(void *user, const char *what, uintptr_t lo, uintptr_t hi);
    void *user;
    struct {
        uint64_t given_bytes, given_pages, segments_released, syncs_ok, syncs_failed, records_failed;
        int nrec; /* events recorded, refused ones included; the first 8 logged */
        int rec_stream[8];
        uint64_t rec_seq[8];
        bool trimming;
        size_t keep;
    } call;
} tb;

/* A cca_upstream over `x` (reset here) wrapping `inner` (granularity `page`),
 * with events on `nstreams` streams (0: no event ops; the allocator
 * synchronizes instead), every stream busy. The wrapper's vm_backing is
 * inner's: over whole maps every unmap must name whole maps (checked
 * here, with the map a granule starts in kept in the range's `starts`). */
cca_upstream *tb_create(tb *x, cca_upstream *inner, const char *name, size_t page, const cca_stream *streams,
                        int nstreams);
void tb_faults_off(tb *x);
void tb_call_begin(tb *x);
/* Every event recorded so far completes. */
void tb_progress_all(tb *x);

/* Books: the range holding [lo, hi) (-1: none); bytes held (classic segments
 * whole, ranges what is mapped), ranges and address space of one owner
 * (owner < 0: all); whether granule g of range i is mapped. */
int tb_find(const tb *x, uintptr_t lo, uintptr_t hi, bool vm);
size_t tb_reserved(const tb *x, int owner);
size_t tb_segments(const tb *x, int owner);
size_t tb_space(const tb *x);
bool tb_mapped(const tb *x, int i, size_t g);
/* Whole maps: the map holding granule g of range i, [*first, *end) in
 * granules; false when g is not mapped. */
bool tb_map_of(const tb *x, int i, size_t g, size_t *first, size_t *end);

#endif /* CCA_DEVICE_BOOKS_H */
