/*
 * thread_audit.h — the barrier audit of the plain threaded programs
 * (threads_api, threads_faults): what the threads hold, summed from their
 * slots, against an allocator's stats, and the allocators' sums against
 * the device's. Include after thread_check.h (its CHECK and fail).
 *
 * - A slot: one live block a thread holds (p NULL: none), its requested
 *   size, the size cca_block_size said it holds, its domain (0 default,
 *   1 common, 2 the thread's own).
 * - ta_mark, ta_marked: a block's first and last bytes, the thread's id
 *   and the slot's number (two bytes at least, else one overwrites the
 *   other), written at its allocation, read back until its free.
 * - ta_alloc: one request of `size` bytes as both programs draw it: a
 *   stream of four, a domain of three (doms[1] NULL: the default alone),
 *   an own-domain block cut to own_max (under TSan sleep copies every
 *   byte), the default domain's by cca_alloc or cca_alloc_in, half each.
 * - ta_meet: the barrier every ROUND steps, where one thread audits.
 * - ta_add: a thread's slots and counts into a sum; ta_check_stats: the
 *   sum against cca_get_stats (allocated, requested, active blocks, no
 *   pending block once a trim completed them; alloc_calls, free_calls and
 *   ooms = what the threads counted), and cca_check_invariants;
 *   ta_check_domains: the common domain's requested bytes, and the
 *   domains' allocated bytes adding up to the allocator's; TA_AUDIT: the
 *   three for one allocator's threads;
 *   ta_check_device: the allocators' reserved, mapped and address space
 *   and classic segments against the device's stats.
 */
#ifndef CCA_THREAD_AUDIT_H
#define CCA_THREAD_AUDIT_H

#include <ccalloc.h>

#include "ccai_rng.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct slot {
    unsigned char *p;
    size_t size, held;
    int dom; /* 0 default, 1 common, 2 own */
} slot;

static inline void ta_mark(slot *s, int id, int k) {
    s->p[0] = (unsigned char)id;
    s->p[s->size - 1] = (unsigned char)k;
}

static inline bool ta_marked(const slot *s, int id, int k) {
    return s->p[0] == (unsigned char)id && s->p[s->size - 1] == (unsigned char)k;
}

static inline cca_status ta_alloc(ccai_rng *r, cca_allocator *a, cca_domain *const doms[3], size_t own_max, slot *s,
                                  void **p) {
    cca_stream stream = (cca_stream)(uintptr_t)ccai_rng_below(r, 4);
    s->dom = doms[1] ? (int)ccai_rng_below(r, 3) : 0;
    if (s->dom == 2 && s->size > own_max)
        s->size = own_max - s->size % ((size_t)1 << 20);
    *p = NULL;
    return s->dom == 0 && ccai_rng_below(r, 2) ? cca_alloc(a, s->size, stream, p)
                                               : cca_alloc_in(a, doms[s->dom], s->size, stream, p);
}

typedef struct ta_sum {
    size_t held, req, live, dom_req[3]; /* dom_req: requested bytes by domain */
    uint64_t allocs, frees, ooms;
} ta_sum;

static inline void ta_add(ta_sum *sum, const slot *s, int slots, uint64_t allocs, uint64_t frees, uint64_t ooms) {
    sum->allocs += allocs, sum->frees += frees, sum->ooms += ooms;
    for (int k = 0; k < slots; k++)
        if (s[k].p) {
            sum->held += s[k].held, sum->req += s[k].size, sum->live++;
            sum->dom_req[s[k].dom] += s[k].size;
        }
}

/* a's stats against the sum, its pending frees completed first (a trim
 * that keeps everything); returns them. */
static inline cca_stats ta_check_stats(const char *name, int round, cca_allocator *a, const ta_sum *sum) {
    if (cca_trim(a, SIZE_MAX, NULL) != CCA_OK)
        fail("%s: round %d: trim: %s", name, round, cca_last_error());
    cca_stats st;
    cca_get_stats(a, &st);
    CHECK(st.allocated_bytes == sum->held && st.requested_bytes == sum->req && st.active_blocks == sum->live &&
              st.pending_blocks == 0,
          "%s: round %d: allocated %zu requested %zu active %zu pending %zu; the threads hold %zu / %zu in %zu blocks",
          name, round, st.allocated_bytes, st.requested_bytes, st.active_blocks, st.pending_blocks, sum->held, sum->req,
          sum->live);
    CHECK(st.alloc_calls == sum->allocs && st.free_calls == sum->frees && st.ooms == sum->ooms,
          "%s: round %d: %" PRIu64 " allocs, %" PRIu64 " frees, %" PRIu64 " ooms counted; the threads made %" PRIu64
          ", %" PRIu64 ", %" PRIu64,
          name, round, st.alloc_calls, st.free_calls, st.ooms, sum->allocs, sum->frees, sum->ooms);
    CHECK(cca_check_invariants(a) == CCA_OK, "%s: round %d: %s", name, round, cca_last_error());
    return st;
}

/* The common domain holds the threads' requests there; the default, the
 * common and the `owns` own domains' allocated bytes add up to a's. */
static inline void ta_check_domains(const char *name, int round, cca_allocator *a, const cca_stats *st,
                                    cca_domain *common, cca_domain *const *own, int owns, const ta_sum *sum) {
    cca_domain_stats ds;
    size_t allocated = 0;
    cca_get_domain_stats(a, NULL, &ds);
    allocated += ds.allocated_bytes;
    cca_get_domain_stats(a, common, &ds);
    allocated += ds.allocated_bytes;
    CHECK(ds.requested_bytes == sum->dom_req[1], "%s: round %d: the common domain holds %zu requested, not %zu", name,
          round, ds.requested_bytes, sum->dom_req[1]);
    for (int k = 0; k < owns; k++) {
        cca_get_domain_stats(a, own[k], &ds);
        allocated += ds.allocated_bytes;
    }
    CHECK(allocated == st->allocated_bytes, "%s: round %d: the domains hold %zu allocated bytes, not %zu", name, round,
          allocated, st->allocated_bytes);
}

/* Totals over the allocators sharing a device. */
typedef struct ta_held {
    size_t reserved, mapped, space, classic;
} ta_held;

static inline void ta_hold(ta_held *h, const cca_stats *st) {
    h->reserved += st->reserved_bytes, h->mapped += st->mapped_bytes, h->space += st->address_space_bytes;
    h->classic += st->segments - st->expandable_segments;
}

static inline void ta_check_device(const char *name, int round, const cca_upstream_stats *us, const ta_held *h) {
    CHECK(us->bytes_in_use == h->reserved && us->vm_mapped_bytes == h->mapped && us->vm_reserved_bytes == h->space &&
              us->allocations == h->classic,
          "%s: round %d: the device holds %zu bytes (%zu mapped, %zu address space, %zu allocations); the "
          "allocators %zu (%zu, %zu, %zu classic segments)",
          name, round, us->bytes_in_use, us->vm_mapped_bytes, us->vm_reserved_bytes, us->allocations, h->reserved,
          h->mapped, h->space, h->classic);
}

/* After step i: every `every` steps all threads meet, one of them calls
 * audit(i / every) while the others wait, then all go on. */
static inline void ta_meet(pthread_barrier_t *meet, int i, int every, void (*audit)(int round)) {
    if (i % every != every - 1)
        return;
    if (pthread_barrier_wait(meet) == PTHREAD_BARRIER_SERIAL_THREAD)
        audit(i / every);
    pthread_barrier_wait(meet);
}

/* Allocator n's audit over the workers w[t] with t % tenants == n, t <
 * THREADS (records with s[SLOTS], allocs, frees, ooms and own): their sum,
 * ta_check_stats (st gets a's stats), then with a common domain
 * ta_check_domains. */
#define TA_AUDIT(st, name, round, a, common, w, n, tenants)                                                            \
    do {                                                                                                               \
        ta_sum ta_sum_ = {0};                                                                                          \
        cca_domain *ta_own_[THREADS];                                                                                  \
        int ta_owns_ = 0;                                                                                              \
        for (int ta_t_ = (n); ta_t_ < THREADS; ta_t_ += (tenants)) {                                                   \
            ta_add(&ta_sum_, (w)[ta_t_].s, SLOTS, (w)[ta_t_].allocs, (w)[ta_t_].frees, (w)[ta_t_].ooms);               \
            ta_own_[ta_owns_++] = (w)[ta_t_].own;                                                                      \
        }                                                                                                              \
        (st) = ta_check_stats((name), (round), (a), &ta_sum_);                                                         \
        if (common)                                                                                                    \
            ta_check_domains((name), (round), (a), &(st), (common), ta_own_, ta_owns_, &ta_sum_);                      \
    } while (0)

#endif /* CCA_THREAD_AUDIT_H */
