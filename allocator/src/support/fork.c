/*
 * fork.c — fork() at any moment: every ccalloc lock taken before it and
 * given back free after it, in the parent and in the child.
 *
 * - Why: fork() copies every lock word but only the calling thread; a lock
 *   another thread holds stays held in the child for ever. The fix is
 *   glibc's malloc's and jemalloc's: a pthread_atfork handler
 *   (docs/allocator.md, "Threads").
 * - The registry: one list per rank (support.h), each link a lock's take
 *   and give, intrusive in its owner, O(1) in and out under
 *   registry_lock. It knows no allocator, upstream, plug or trace: each
 *   registers itself (an allocator at cca_create, an upstream at
 *   ccai_upstream_wrap, the plug, the trace and the copy engines once, at
 *   load):
 *
 *     OUTER: plug    ALLOCATOR: a1 <-> a2    UPSTREAM: u1 <-> u2
 *     TRACE: trace   LAST: copy engines
 *
 * - The handler, registered once, when the library is loaded (a
 *   constructor), as are the plug's, the trace's and the copy engines'
 *   links: so their locks are covered before any thread can hold one:
 *   prepare  the plug's lock (plug.c: held while a device's allocator is
 *            made, so before the registry), registry_lock, each allocator's
 *            lock, each upstream's locks (its counting lock and, through
 *            its fork hooks, the simulated device's own, once its copy
 *            engine's thread, if starting, is in its loop: copy_engine.c
 *            says why), the trace's lock
 *            (the trace flushed: nothing buffered at the fork), and last
 *            the copy engines' stopping lock, once no engine's thread is
 *            exiting (its device already off the list: copy_engine.c);
 *   parent   all released, in reverse;
 *   child    the same, allocator locks released as a child must
 *            (ccai_mutex_unlock_in_child: the parent's sleepers are not in
 *            the child), the log lock made anew (log.h says why it is not
 *            taken), the trace's file detached (trace.c), and, before each
 *            simulated device's locks go, its copy engine emptied (its
 *            thread is not in the child: host.c).
 * - Order: the order calls take them. No call holds an allocator's lock
 *   while it waits for the plug's or the registry's, none holds two
 *   allocators' locks, an upstream's or the trace's lock is innermost. So
 *   the fork waits for calls in flight (a cudaMalloc's time at most),
 *   cannot deadlock with them, and the child gets each allocator as a call
 *   left it.
 * - Not covered: a custom upstream's own locks (its maker's to handle); the
 *   CUDA upstream's vm lock (the driver refuses a context inherited across
 *   fork; the simulated device works in the child); an allocator or
 *   upstream the child destroys while another parent thread used it.
 * - An op of a custom upstream must not create or destroy allocators or
 *   upstreams (it would wait for registry_lock under its allocator's lock,
 *   the reverse of prepare's order), nor fork (prepare would wait for the
 *   lock its own thread holds).
 * - Costs: creating or destroying an allocator or upstream takes
 *   registry_lock once (O(1)); nothing on alloc/free. A fork: O(allocators
 *   + upstreams) lock takes, plus the calls in flight.
 */
#include "support.h"

#include <pthread.h>
#include <stdatomic.h>

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static ccai_fork_link *lists[CCAI_FORK_RANKS]; /* list heads, under registry_lock */
static _Atomic(ccai_fork_link *) outer;        /* lists[OUTER]'s head, read without it */
static pthread_once_t handler_once = PTHREAD_ONCE_INIT;
static bool handler_set;

/* The OUTER rank (a device's creation holds the plug's lock across
 * cca_create, which takes registry_lock), then the registry, then every
 * other rank in order. */
static void prepare(void) {
    for (ccai_fork_link *l = atomic_load_explicit(&outer, memory_order_acquire); l; l = l->next)
        l->take(l);
    pthread_mutex_lock(&registry_lock);
    for (int r = CCAI_FORK_OUTER + 1; r < CCAI_FORK_RANKS; r++)
        for (ccai_fork_link *l = lists[r]; l; l = l->next)
            l->take(l);
}

/* In reverse rank order (none of them is taken while another of them is
 * held, so the order of the releases matters only to readers). */
static void release(bool child) {
    for (int r = CCAI_FORK_RANKS - 1; r > CCAI_FORK_OUTER; r--)
        for (ccai_fork_link *l = lists[r]; l; l = l->next)
            l->give(l, child);
    pthread_mutex_unlock(&registry_lock);
    for (ccai_fork_link *l = atomic_load_explicit(&outer, memory_order_acquire); l; l = l->next)
        l->give(l, child);
    if (child)
        ccai_log_fork_child();
}

static void parent(void) {
    release(false);
}

static void child(void) {
    release(true);
}

static void set_handler(void) {
    handler_set = pthread_atfork(prepare, parent, child) == 0;
}

__attribute__((constructor)) static void set_handler_at_load(void) {
    pthread_once(&handler_once, set_handler);
}

/* The handler set first, if the constructor has not. A failed
 * pthread_atfork (no memory) is logged once, after the lock. */
void ccai_fork_register(ccai_fork_rank rank, ccai_fork_link *l) {
    pthread_once(&handler_once, set_handler);
    pthread_mutex_lock(&registry_lock);
    l->prev = NULL;
    l->next = lists[rank];
    if (lists[rank])
        lists[rank]->prev = l;
    lists[rank] = l;
    if (rank == CCAI_FORK_OUTER) /* published whole: prepare reads it without the lock */
        atomic_store_explicit(&outer, l, memory_order_release);
    pthread_mutex_unlock(&registry_lock);
    static atomic_bool said;
    if (!handler_set && !atomic_exchange(&said, true))
        ccai_log("cannot register the fork handler (pthread_atfork: no memory): a fork while another thread is "
                 "inside a ccalloc call may leave the child waiting on a lock");
}

void ccai_fork_unregister(ccai_fork_rank rank, ccai_fork_link *l) {
    ccai_assert(rank != CCAI_FORK_OUTER);
    pthread_mutex_lock(&registry_lock);
    if (l->prev)
        l->prev->next = l->next;
    else if (lists[rank] == l)
        lists[rank] = l->next;
    if (l->next)
        l->next->prev = l->prev;
    l->prev = l->next = NULL;
    pthread_mutex_unlock(&registry_lock);
}
