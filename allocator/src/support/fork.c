/*
 * fork.c — fork() at any moment: every ccalloc lock taken before it and
 * given back free after it, in the parent and in the child.
 *
 * - Why: fork() copies every lock word but only the calling thread; a lock
 *   another thread holds stays held in the child for ever. The fix is
 *   glibc's malloc's and jemalloc's: a pthread_atfork handler
 *   (docs/allocator.md, "Threads").
 * - The registry: every upstream (ccai_upstream_wrap) and allocator
 *   (cca_create) is on a list from creation to destruction, under
 *   registry_lock; intrusive (a ccai_fork_link in each object), O(1) in
 *   and out:
 *
 *     allocators: a1 <-> a2 <-> a3        upstreams: u1 <-> u2
 *
 * - The handler, registered once, when the library is loaded (a
 *   constructor): before any registration a thread may already hold the
 *   plug's lock (the first device in the making) or the log's (a sink):
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
#include "../core/internal.h"

#include <pthread.h>

#include <stddef.h>

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static ccai_fork_link *allocators, *upstreams; /* list heads */
static pthread_once_t handler_once = PTHREAD_ONCE_INIT;
static bool handler_set;

#define ALLOCATOR(l) ((cca_allocator *)((char *)(l) - offsetof(cca_allocator, fork)))
#define UPSTREAM(l) ((cca_upstream *)((char *)(l) - offsetof(cca_upstream, fork)))

static void prepare(void) {
    ccai_plug_fork_lock(true);
    pthread_mutex_lock(&registry_lock);
    for (ccai_fork_link *l = allocators; l; l = l->next) /* refused only for a fork from inside an op (ccalloc.h: */
        ALLOCATOR(l)->fork_locked = ccai_mutex_lock(&ALLOCATOR(l)->lock); /* not allowed): then this thread holds it */
    for (ccai_fork_link *l = upstreams; l; l = l->next)
        ccai_upstream_fork_lock(UPSTREAM(l));
    ccai_trace_fork_lock(true);
    ccai_copy_engine_fork_exits(true, false); /* last: a destroy under any lock above is done by now */
}

/* In reverse: the trace's, the upstreams', the allocators', the registry's,
 * the plug's (none of them is taken while another of them is held, so the
 * order of the releases matters only to readers). */
static void release(bool child) {
    ccai_copy_engine_fork_exits(false, child);
    if (child)
        ccai_trace_fork_child();
    ccai_trace_fork_lock(false);
    for (ccai_fork_link *l = upstreams; l; l = l->next) {
        if (child) /* the simulated device's maps, shared by fork(), made the child's own */
            ccai_upstream_fork_child(UPSTREAM(l));
        ccai_upstream_fork_unlock(UPSTREAM(l));
    }
    for (ccai_fork_link *l = allocators; l; l = l->next) {
        if (!ALLOCATOR(l)->fork_locked)
            continue; /* not taken by prepare: its holder, this thread's op, unlocks it */
        if (child)
            ccai_mutex_unlock_in_child(&ALLOCATOR(l)->lock);
        else
            ccai_mutex_unlock(&ALLOCATOR(l)->lock);
    }
    pthread_mutex_unlock(&registry_lock);
    ccai_plug_fork_lock(false);
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

/* Push l on *head (the handler set, if the constructor has not). A failed
 * pthread_atfork (no memory) is logged once, after the lock. */
static void link_in(ccai_fork_link **head, ccai_fork_link *l) {
    pthread_once(&handler_once, set_handler);
    pthread_mutex_lock(&registry_lock);
    l->prev = NULL;
    l->next = *head;
    if (*head)
        (*head)->prev = l;
    *head = l;
    pthread_mutex_unlock(&registry_lock);
    static atomic_bool said;
    if (!handler_set && !atomic_exchange(&said, true))
        ccai_log("cannot register the fork handler (pthread_atfork: no memory): a fork while another thread is "
                 "inside a ccalloc call may leave the child waiting on a lock");
}

static void link_out(ccai_fork_link **head, ccai_fork_link *l) {
    pthread_mutex_lock(&registry_lock);
    if (l->prev)
        l->prev->next = l->next;
    else if (*head == l)
        *head = l->next;
    if (l->next)
        l->next->prev = l->prev;
    l->prev = l->next = NULL;
    pthread_mutex_unlock(&registry_lock);
}

void ccai_fork_register_allocator(cca_allocator *a) {
    link_in(&allocators, &a->fork);
}

void ccai_fork_unregister_allocator(cca_allocator *a) {
    link_out(&allocators, &a->fork);
}

void ccai_fork_register_upstream(cca_upstream *u) {
    link_in(&upstreams, &u->fork);
}

void ccai_fork_unregister_upstream(cca_upstream *u) {
    link_out(&upstreams, &u->fork);
}
