/*
 * stream.c — which streams own and use a block, and the frees that wait.
 *
 * - KEY stream: a FREE block goes only to requests of its segment's stream
 *   (NULL in a shared arena, greedy's or a domain's: to every stream).
 * - USERS: while LIVE, alloc_stream and every stream cca_record_stream named.
 * - At cca_free a user needs no wait only when it is the key, outside an
 *   arena. Streams are independent: NULL is ordered against none (CUDA
 *   orders nothing of a cudaStreamNonBlocking stream against it). Every
 *   other user gets an event; the block is PENDING until all complete (I6).
 *
 *     growth, alloc on s, no record_stream   -> FREE at once (the fast path)
 *     growth, alloc on s, record_stream(t)   -> event on t, PENDING
 *     arena,  alloc on s (NULL too)          -> event on s, PENDING
 *
 * - No event (no event ops, a record refused, no host memory for the
 *   waits): synchronize instead, FREE at once; that fails too: PENDING with
 *   needs_sync until a synchronize succeeds (cca_free reports it).
 * - Pending queues: a FIFO of waits per stream; a poll stops at a queue's
 *   first incomplete event (one stream's events complete in order).
 * - Cost: a poll, one event query per stream with pending frees plus one
 *   per wait completed; record_stream O(users); a deferred free O(users)
 *   and host memory for its waits, the block's stream-use record if it has
 *   none (an arena's block) and a queue per stream without one (freed empty).
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static ccai_stream_use *use_of(ccai_block *b) {
    if (!b->uses)
        b->uses = calloc(1, sizeof *b->uses);
    return b->uses;
}

void ccai_stream_use_free(cca_allocator *a, ccai_block *b) {
    ccai_stream_use *u = b->uses;
    if (!u)
        return;
    for (size_t i = 0; i < u->wait_count; i++)
        if (u->waits[i].event)
            ccai_upstream_event_destroy(ccai_upstream_op(a), u->waits[i].event);
    free(u->waits);
    free(u->streams);
    free(u);
    b->uses = NULL;
}

cca_status ccai_stream_record(ccai_block *b, cca_stream s) {
    if (s == b->alloc_stream)
        return CCA_OK;
    ccai_stream_use *u = use_of(b);
    if (!u)
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "cca_record_stream: host malloc failed");
    for (size_t i = 0; i < u->count; i++)
        if (u->streams[i] == s)
            return CCA_OK;
    if (u->count == u->cap) {
        size_t cap = u->cap ? 2 * u->cap : 2;
        cca_stream *grown = realloc(u->streams, cap * sizeof *grown);
        if (!grown)
            return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "cca_record_stream: host malloc failed");
        u->streams = grown;
        u->cap = cap;
    }
    u->streams[u->count++] = s;
    return CCA_OK;
}

/* ---- pending queues ----------------------------------------------------- */

static ccai_pending_queue *queue_of(cca_allocator *a, cca_stream s, bool create) {
    for (ccai_pending_queue *q = a->queues; q; q = q->next)
        if (q->stream == s)
            return q;
    if (!create)
        return NULL;
    ccai_pending_queue *q = calloc(1, sizeof *q);
    if (!q)
        return NULL;
    q->stream = s;
    q->next = a->queues;
    a->queues = q;
    return q;
}

static void queue_drop_empty(cca_allocator *a) {
    for (ccai_pending_queue **link = &a->queues, *q; (q = *link) != NULL;) {
        if (q->head) {
            link = &q->next;
        } else {
            *link = q->next;
            free(q);
        }
    }
}

/* Pending block b's last wait is over: it rejoins its pool. */
static void complete(cca_allocator *a, ccai_block *b) {
    ccai_stream_use_free(a, b);
    ccai_lower(&a->c.pending, 1);
    ccai_pool_return(a, b);
}

static void wait_done(cca_allocator *a, ccai_wait *w) {
    ccai_stream_use *u = w->block->uses;
    ccai_upstream_event_destroy(ccai_upstream_op(a), w->event);
    w->event = NULL;
    ccai_assert(u && u->outstanding > 0);
    if (--u->outstanding == 0 && !w->block->needs_sync)
        complete(a, w->block);
}

/* Complete the waits at the head of q; stop at the first incomplete event
 * unless `all` (then every wait is queried and completed ones unlinked). */
static void poll_queue(cca_allocator *a, ccai_pending_queue *q, bool all) {
    ccai_wait **link = &q->head, *last = NULL;
    while (*link) {
        ccai_wait *w = *link;
        if (ccai_upstream_event_query(ccai_upstream_op(a), w->event) != CCA_OK) {
            if (!all)
                return; /* q is not empty and its tail is unchanged */
            last = w;
            link = &w->next;
            continue;
        }
        *link = w->next; /* unlink first: wait_done may free w */
        wait_done(a, w);
    }
    q->tail = last;
}

void ccai_stream_poll_queues(cca_allocator *a) {
    bool emptied = false;
    for (ccai_pending_queue *q = a->queues; q; q = q->next) {
        poll_queue(a, q, false);
        emptied |= q->head == NULL;
    }
    if (emptied)
        queue_drop_empty(a);
}

void ccai_stream_complete_all(cca_allocator *a) {
    while (a->sync_head) { /* the synchronize covers what no event could */
        ccai_block *b = a->sync_head;
        a->sync_head = b->sync_next;
        b->sync_next = NULL;
        b->needs_sync = false;
        if (!b->uses || b->uses->outstanding == 0)
            complete(a, b);
    }
    for (ccai_pending_queue *q = a->queues; q; q = q->next)
        poll_queue(a, q, true);
    queue_drop_empty(a);
}

cca_status ccai_stream_wait_all(cca_allocator *a) {
    if (!a->queues && !a->sync_head)
        return CCA_OK;
    return ccai_stream_sync_device(a);
}

cca_status ccai_stream_sync_device(cca_allocator *a) {
    cca_status st = cca_upstream_synchronize(ccai_upstream_op(a));
    if (st != CCA_OK)
        return cca_set_error(st, "synchronize failed; %zu frees stay pending: %s", a->c.pending, cca_last_error());
    ccai_stream_complete_all(a);
    return CCA_OK;
}

void ccai_stream_destroy(cca_allocator *a) {
    while (a->queues) {
        ccai_pending_queue *next = a->queues->next;
        free(a->queues);
        a->queues = next;
    }
    a->sync_head = NULL;
}

/* ---- deferring a free --------------------------------------------------- */

/* b->stream is the key (NULL for an arena, whose next owner may be any
 * stream: every user waits there) */
static bool needs_wait(const ccai_block *b, cca_stream user) {
    return user != b->stream || (b->seg & CCAI_SEG_SHARED);
}

/* The device could not be told to signal the block's users: synchronize,
 * and when even that fails, hold the block until a synchronize works. */
static bool sync_instead(cca_allocator *a, ccai_block *b, cca_status *st) {
    cca_status s = cca_upstream_synchronize(ccai_upstream_op(a));
    if (s == CCA_OK)
        return false;
    b->needs_sync = true;
    b->sync_next = a->sync_head;
    a->sync_head = b;
    b->state = CCAI_PENDING;
    a->c.pending++;
    *st = cca_set_error(s, "cca_free: could not record a stream event and synchronize failed; %p is held until a "
                       "synchronize succeeds: %s",
                    (void *)b->addr, cca_last_error());
    return true;
}

/* The users of b that need a wait (stream set in w[i] when w is given). */
static size_t users_to_wait(const ccai_block *b, ccai_wait *w) {
    const ccai_stream_use *u = b->uses;
    size_t n = 0;
    for (size_t i = 0; i <= (u ? u->count : 0); i++) {
        cca_stream s = i == 0 ? b->alloc_stream : u->streams[i - 1];
        if (needs_wait(b, s) && w)
            w[n].stream = s;
        n += needs_wait(b, s);
    }
    return n;
}

bool ccai_stream_defer_free(cca_allocator *a, ccai_block *b, cca_status *st) {
    size_t users = users_to_wait(b, NULL);
    if (users == 0)
        return false; /* every user is the key: reuse at once */
    char saved[CCAI_ERROR_CAP]; /* a refused record is no failure of a free that synchronizes instead */
    ccai_error_save(saved);
    ccai_stream_use *u = NULL;
    ccai_wait *waits = ccai_upstream_has_events(a->upstream) && (u = use_of(b)) ? calloc(users, sizeof *waits) : NULL;
    bool ok = waits != NULL && users_to_wait(b, waits) == users;
    for (size_t i = 0; ok && i < users; i++) {
        waits[i].block = b;
        ok = queue_of(a, waits[i].stream, true) != NULL &&
             ccai_upstream_event_record(ccai_upstream_op(a), waits[i].stream, &waits[i].event) == CCA_OK;
    }
    size_t done = 0;
    for (size_t i = 0; ok && i < users; i++)
        done += ccai_upstream_event_query(ccai_upstream_op(a), waits[i].event) == CCA_OK;
    if (!ok || done == users) { /* no events, or all complete already */
        for (size_t i = 0; waits && i < users; i++)
            if (waits[i].event)
                ccai_upstream_event_destroy(ccai_upstream_op(a), waits[i].event);
        free(waits);
        queue_drop_empty(a); /* an empty queue left linked would read as a pending free */
        bool held = !ok && sync_instead(a, b, st); /* ok: the host device, or an idle GPU */
        if (!held)
            ccai_error_restore(saved);
        return held;
    }
    u->waits = waits;
    u->wait_count = u->outstanding = users;
    for (size_t i = 0; i < users; i++) {
        ccai_pending_queue *q = queue_of(a, waits[i].stream, false);
        if (q->tail)
            q->tail->next = &waits[i];
        else
            q->head = &waits[i];
        q->tail = &waits[i];
    }
    b->state = CCAI_PENDING;
    a->c.pending++;
    return true;
}
