/*
 * domain_set.c — an allocator's set of domains: the default domain's
 * record, each domain's handle and the set that finds its record, the list
 * in creation order and each domain's number in it, the sleeping list.
 *
 * - The default domain is a->root; the others follow it in creation order
 *   (a->last the newest). A domain's number is its position: a create
 *   appends the next one, a removal of any but the last marks every number
 *   stale, and the next ccai_domain_number numbers the list again.
 * - Makes no public allocator call and takes no lock: its callers hold it.
 * - Cost: add, remove, lookup O(1) expected; a number O(1), after a
 *   removal that moved domains O(domains) once.
 */
#include "domain_set.h"

#include <stdlib.h>
#include <string.h>

void ccai_domain_init_root(cca_allocator *a) {
    memset(&a->root, 0, sizeof a->root);
    snprintf(a->root.name, sizeof a->root.name, "default");
    a->serving = &a->root;
    a->allocating = "cca_alloc";
    a->last = &a->root;
    a->holding = a->asleep = NULL;
    memset(&a->domain_set, 0, sizeof a->domain_set);
}

/* ---- handles and the handle set ----------------------------------------- *
 * A caller never holds a domain's address: a handle is a number drawn once
 * per process, the k-th domain ever created (by any allocator) getting
 * k * 0x9E3779B97F4A7C15 (mod 2^64; odd, so k -> handle is one-to-one and
 * never 0 before 2^64 creates). So no handle is ever given twice: the
 * handle of a destroyed domain stays refused even when malloc gives its
 * record to the next domain (a program that unloads one model and loads
 * another does exactly that), and another allocator's handle is refused
 * too. Consecutive handles lie far apart, so an offset or interior pointer
 * names nothing either.
 *
 * The set holds every domain but root, keyed by handle, in an
 * open-addressing table with linear probing: a handle is looked up by
 * hashing its value, never by reading what it points to (it may be freed
 * or foreign memory). Deletion shifts the entries of the probe run back
 * (no tombstones), so a lookup stops at the first empty slot. The table
 * doubles at half full: O(1) expected per operation. */

static _Atomic uint64_t handles_made;

uintptr_t ccai_domain_new_handle(void) {
    uint64_t k = atomic_fetch_add_explicit(&handles_made, 1, memory_order_relaxed) + 1;
    return (uintptr_t)(k * 0x9E3779B97F4A7C15ull);
}

static size_t set_home(const cca_allocator *a, uintptr_t h) {
    uint64_t x = (uint64_t)h * 0x9E3779B97F4A7C15ull; /* Fibonacci hashing (garbage handles too) */
    return (size_t)(x >> 32) & (a->domain_set.cap - 1);
}

static size_t set_find(const cca_allocator *a, uintptr_t h) { /* the slot holding handle h, or cap */
    if (!a->domain_set.cap)
        return 0;
    size_t mask = a->domain_set.cap - 1;
    for (size_t i = set_home(a, h);; i = (i + 1) & mask) {
        if (!a->domain_set.slot[i])
            return a->domain_set.cap;
        if (a->domain_set.slot[i]->handle == h)
            return i;
    }
}

static void set_place(cca_allocator *a, cca_domain *d) { /* room known */
    size_t mask = a->domain_set.cap - 1, i = set_home(a, d->handle);
    while (a->domain_set.slot[i])
        i = (i + 1) & mask;
    a->domain_set.slot[i] = d;
    a->domain_set.count++;
}

cca_status ccai_domain_set_reserve(cca_allocator *a) {
    if (a->domain_set.count + 1 <= a->domain_set.cap / 2)
        return CCA_OK;
    size_t cap = a->domain_set.cap ? a->domain_set.cap * 2 : 16;
    cca_domain **slot = calloc(cap, sizeof *slot);
    if (!slot)
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "cca_domain_create: host malloc failed");
    cca_domain **old = a->domain_set.slot;
    size_t old_cap = a->domain_set.cap;
    a->domain_set.slot = slot;
    a->domain_set.cap = cap;
    a->domain_set.count = 0;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i])
            set_place(a, old[i]);
    free(old);
    return CCA_OK;
}

static void set_erase(cca_allocator *a, const cca_domain *d) {
    size_t mask = a->domain_set.cap - 1, hole = set_find(a, d->handle);
    ccai_assert(hole != a->domain_set.cap && a->domain_set.slot[hole] == d);
    a->domain_set.slot[hole] = NULL;
    a->domain_set.count--;
    /* shift back every later entry of the run whose home is not in (hole, i] */
    for (size_t i = (hole + 1) & mask; a->domain_set.slot[i]; i = (i + 1) & mask) {
        size_t home = set_home(a, a->domain_set.slot[i]->handle);
        bool stays = hole < i ? (home > hole && home <= i) : (home > hole || home <= i);
        if (stays)
            continue;
        a->domain_set.slot[hole] = a->domain_set.slot[i];
        a->domain_set.slot[i] = NULL;
        hole = i;
    }
}

void ccai_domain_set_add(cca_allocator *a, cca_domain *d) {
    set_place(a, d);
    if (!a->domains_tracked) { /* every block so far is the default domain's */
        ccai_domain_copy_block_counts(&a->root.c, &a->c);
        a->domains_tracked = true;
    }
    d->number = a->last->number + 1; /* stale with the rest, if they are */
    a->last->next = d;
    d->prev = a->last;
    a->last = d;
}

void ccai_domain_set_remove(cca_allocator *a, cca_domain *d) {
    d->prev->next = d->next;
    if (d->next)
        d->next->prev = d->prev;
    else
        a->last = d->prev;
    a->numbers_stale |= d->next != NULL; /* the last one's going moves none */
    set_erase(a, d);
}

cca_domain *ccai_domain_lookup(const cca_allocator *a, const cca_domain *handle) {
    if (!handle)
        return (cca_domain *)&a->root;
    size_t i = set_find(a, (uintptr_t)handle);
    return i == a->domain_set.cap ? NULL : a->domain_set.slot[i];
}

cca_status ccai_domain_find(const cca_allocator *a, const cca_domain *handle, const char *fn, cca_domain **d) {
    if ((*d = ccai_domain_lookup(a, handle)) != NULL)
        return CCA_OK;
    return cca_set_error(CCA_ERR_INVALID_ARGUMENT, "%s: domain %p is not one of this allocator's", fn,
                         (const void *)handle);
}

bool ccai_domain_valid(const cca_allocator *a, const cca_domain *d) {
    return ccai_domain_lookup(a, ccai_domain_handle(d)) == d; /* root's handle is NULL: root */
}

unsigned ccai_domain_number(const cca_allocator *a, const cca_domain *d) {
    if (a->numbers_stale) { /* a cache under the caller's lock: made again once per destroy that moved domains */
        cca_allocator *m = (cca_allocator *)a;
        unsigned k = 0;
        for (cca_domain *e = &m->root; e; e = e->next)
            e->number = k++;
        m->numbers_stale = false;
    }
    return d->number;
}

/* ---- the sleeping domains' list ----------------------------------------- */

void ccai_domain_set_sleep(cca_allocator *a, cca_domain *d, struct ccai_sleep *rec) {
    if (rec && !d->sleep)
        CCAI_LIST_PUSH(a->asleep, d, sprev, snext);
    else if (!rec && d->sleep)
        CCAI_LIST_UNLINK(a->asleep, d, sprev, snext);
    d->sleep = rec;
}

void ccai_domain_copy_block_counts(ccai_domain_counters *to, const ccai_counters *from) {
    to->allocated = from->allocated;
    to->allocated_peak = from->allocated_peak;
    to->requested = from->requested;
    to->requested_peak = from->requested_peak;
    to->active = from->active;
    to->active_peak = from->active_peak;
    to->alloc_calls = from->alloc_calls;
}
