/*
 * sleep.h — what sleep.c gives the rest of the library: one domain's sleep
 * and wake and their checks (domain.c's public calls), the refusal and the
 * free of a sleeping domain's blocks (alloc.c), its record dropped
 * (domain.c), its host bytes (the stats) and its invariant (check.c).
 * Every function runs under the allocator's lock.
 */
#ifndef CCA_SLEEP_H
#define CCA_SLEEP_H

#include "core/internal.h"
#include "support/invariants.h" /* ccai_broken */

/* The checks every sleep makes before it changes anything (flags known,
 * expandable segments, the copy ops); `copies`: the sleep would copy (a
 * domain asleep already copies nothing, its flags ignored). */
cca_status ccai_sleep_can(cca_allocator *a, unsigned flags, bool copies);
/* What a sleep of d may be refused for before it changes anything, waited
 * for: its work (quiesce), then its freed blocks' events. */
cca_status ccai_sleep_ready(cca_allocator *a, struct cca_domain *d);
/* One domain to sleep; *slept: this call put it to sleep (a refused unmap
 * leaves it asleep all the same, and returns the refusal). */
cca_status ccai_sleep_domain(cca_allocator *a, struct cca_domain *d, unsigned flags, cca_sleep_report *r, bool *slept);
/* Bytes of the unmapped pages under d's live and pending blocks: what its
 * wake maps. *st: CCA_ERR_OUT_OF_MEMORY when host memory for the list failed. */
size_t ccai_wake_need(const struct cca_domain *d, cca_status *st);
/* Room for `need` bytes of pages: the cap and the device asked, the cache
 * released as by the OOM retry when short (held under hold_peak:1).
 * Short still: *missing bytes, *unsynced why the cache was kept. */
cca_status ccai_wake_room(cca_allocator *a, size_t need, ccai_device_room *room, size_t *missing,
                          char unsynced[CCAI_ERROR_CAP]);
/* One domain awake, all or nothing (awake already: CCA_OK). */
cca_status ccai_wake_domain(cca_allocator *a, struct cca_domain *d, cca_sleep_report *r);
/* cca_alloc / cca_alloc_in in sleeping domain d: CCA_ERR_ASLEEP, naming it. */
cca_status ccai_sleep_refuse(cca_allocator *a, struct cca_domain *d);
/* Drop d's sleep record and give its host memory back (a refusal is
 * logged). mark: d's segments are still there, and their free blocks get
 * the `unmapped` mark (a block freed while asleep lost it); false at
 * cca_destroy, whose segments are gone. No-op for a domain awake. */
void ccai_sleep_forget(cca_allocator *a, struct cca_domain *d, bool mark);
/* cca_free of live block b of a sleeping domain: its copy dropped, and its
 * host chunk given back once every block in it is freed. */
void ccai_sleep_drop(cca_allocator *a, const ccai_block *b);
/* Host bytes d's copy holds (0: awake, or asleep with DISCARD). */
size_t ccai_sleep_host_bytes(const struct cca_domain *d);
/* I10 for sleeping domain d: its record names every live block of d. */
ccai_broken ccai_sleep_check(const cca_allocator *a, const struct cca_domain *d);

#endif /* CCA_SLEEP_H */
