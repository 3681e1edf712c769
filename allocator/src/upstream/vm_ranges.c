/*
 * vm_ranges.c — an upstream's record of the address ranges it reserved:
 * which granules are mapped, where each physical allocation starts, and
 * the virtual-memory rules checked on that record BEFORE any driver call.
 *
 * - Why: the CUDA driver finds a broken rule only when it reaches the
 *   granule (an unmap of [0, 4) with granule 2 unmapped unmaps 0 and 1,
 *   then fails); cca_upstream_ops says a refused call changes nothing, so
 *   the CUDA upstream checks here first, as host.c does on its own arrays.
 *
 *   ranges  head -> [base, size, granules | mapped | starts] -> [ ... ] -> NULL
 *   mapped  one bit per granule: 1 = mapped    granules 0 1 2 3 4 5 6 ...
 *                                              mapped   1 1 1 1 0 1 0 ...
 *   starts  one bit per granule: 1 = a physical starts   1 0 0 1 . 1 . ...
 *           allocation starts here (read only where mapped: '.')
 *           Above, whole maps [0, 3), [3, 4) and [5, 6).
 *
 * - Rules:
 *   map      [addr, addr + size) inside one range, every mapped bit 0;
 *   unmap    inside one range, every mapped bit 1 (the first 0 is named);
 *            with whole maps (rs->whole_maps) also: the run starts where a
 *            map starts, and the granule after it is the range's end, not
 *            mapped, or a map's start (else the map it would cut is named);
 *   release  exactly one range (same base and size), every mapped bit 0.
 * - A refusal is CCA_ERR_UPSTREAM naming the upstream, the rule and the
 *   granule (its index in the range).
 * - The record stays the truth when a call fails part-way: the caller
 *   marks starts before mapping a run (ccai_vm_range_mark_map: every
 *   granule in page mode, the run's first with whole maps), then sets and
 *   clears mapped bits as its driver calls succeed. An unmap leaves starts
 *   bits as they were, so an undo that maps again finds the allocations it
 *   had there (ccai_vm_map_end).
 * - Not locked: the caller holds its own lock across the check and the
 *   driver calls it allows.
 * - Costs: finding a range walks the list (one range per stream, pool and
 *   domain in use); a run of k granules is k bit tests (plus two starts
 *   bits with whole maps; naming a map a refused unmap would cut walks
 *   that map). Bitmaps: 2 * granules / 8 bytes per range (10 KiB for 80
 *   GiB of 2 MiB granules).
 */
#include "upstream.h"

#include <stdlib.h>

bool ccai_vm_range_mapped(const ccai_vm_range *r, size_t i) {
    return (r->mapped[i / 64] >> (i % 64)) & 1;
}

static void set_bit(uint64_t *bits, size_t i, bool on) {
    uint64_t bit = (uint64_t)1 << (i % 64);
    if (on)
        bits[i / 64] |= bit;
    else
        bits[i / 64] &= ~bit;
}

void ccai_vm_range_set(ccai_vm_range *r, size_t i, bool mapped) {
    set_bit(r->mapped, i, mapped);
}

bool ccai_vm_range_starts(const ccai_vm_range *r, size_t i) {
    return (r->starts[i / 64] >> (i % 64)) & 1;
}

void ccai_vm_range_mark_map(const ccai_vm_ranges *rs, ccai_vm_range *r, size_t first, size_t n) {
    for (size_t i = first; i < first + n; i++)
        set_bit(r->starts, i, !rs->whole_maps || i == first);
}

size_t ccai_vm_map_end(const ccai_vm_range *r, size_t i, size_t end) {
    size_t j = i + 1;
    while (j < end && !ccai_vm_range_starts(r, j))
        j++;
    return j;
}

cca_status ccai_vm_ranges_add(ccai_vm_ranges *rs, uintptr_t base, size_t size) {
    size_t granules = size / rs->granule, words = (granules + 63) / 64;
    ccai_vm_range *r = calloc(1, sizeof *r + 2 * words * sizeof r->mapped[0]);
    if (!r)
        return cca_set_error(CCA_ERR_OUT_OF_MEMORY, "%s: host malloc failed recording a range of %zu bytes", rs->who, size);
    r->starts = r->mapped + words;
    r->base = base;
    r->size = size;
    r->granules = granules;
    r->next = rs->head;
    rs->head = r;
    return CCA_OK;
}

void ccai_vm_ranges_remove(ccai_vm_ranges *rs, ccai_vm_range *r) {
    for (ccai_vm_range **link = &rs->head; *link; link = &(*link)->next) {
        if (*link == r) {
            *link = r->next;
            free(r);
            return;
        }
    }
}

void ccai_vm_ranges_free(ccai_vm_ranges *rs) {
    while (rs->head)
        ccai_vm_ranges_remove(rs, rs->head);
}

/* The first granule of [first, first + n) whose bit is `mapped`, or n +
 * first when none is. */
static size_t first_in_state(const ccai_vm_range *r, size_t first, size_t n, bool mapped) {
    size_t i = first;
    while (i < first + n && ccai_vm_range_mapped(r, i) != mapped)
        i++;
    return i;
}

/* The range holding all of [addr, addr + size), with addr's granule index;
 * else the refusal of `op` (nothing is inside, or it runs past the end). */
static cca_status inside(const ccai_vm_ranges *rs, const char *op, uintptr_t addr, size_t size, ccai_vm_range **out,
                         size_t *first) {
    if (size == 0 || addr % rs->granule || size % rs->granule) /* whole granules only, whoever calls */
        return cca_set_error(CCA_ERR_UPSTREAM, "%s: %s of %p (%zu bytes): not whole granules of %zu bytes", rs->who, op,
                         (void *)addr, size, rs->granule);
    for (ccai_vm_range *r = rs->head; r; r = r->next) {
        if (addr < r->base || addr - r->base >= r->size)
            continue;
        if (size > r->size - (addr - r->base))
            return cca_set_error(CCA_ERR_UPSTREAM,
                             "%s: %s of %p (%zu bytes) runs past the end of its reserved range %p (%zu bytes)", rs->who,
                             op, (void *)addr, size, (void *)r->base, r->size);
        *out = r;
        *first = (addr - r->base) / rs->granule;
        return CCA_OK;
    }
    return cca_set_error(CCA_ERR_UPSTREAM, "%s: %s of %p (%zu bytes): not inside any reserved range", rs->who, op,
                     (void *)addr, size);
}

/* A map wants every granule of its run unmapped, an unmap every one mapped:
 * the first granule in the other state is named. */
static cca_status check_run(const ccai_vm_ranges *rs, bool unmap, uintptr_t addr, size_t size, ccai_vm_range **r,
                            size_t *first) {
    const char *op = unmap ? "vm_unmap" : "vm_map";
    cca_status st = inside(rs, op, addr, size, r, first);
    if (st != CCA_OK)
        return st;
    size_t n = size / rs->granule, bad = first_in_state(*r, *first, n, !unmap);
    if (bad == *first + n)
        return CCA_OK;
    return cca_set_error(CCA_ERR_UPSTREAM,
                     "%s: %s of %p (%zu bytes): granule %zu of the range at %p is %s (%s; nothing "
                     "changed)",
                     rs->who, op, (void *)addr, size, bad, (void *)(*r)->base, unmap ? "not mapped" : "already mapped",
                     unmap ? "an unmap names only mapped granules" : "a map overlaps no mapped granule");
}

cca_status ccai_vm_check_map(const ccai_vm_ranges *rs, uintptr_t addr, size_t size, ccai_vm_range **r, size_t *first) {
    return check_run(rs, false, addr, size, r, first);
}

/* The map holding mapped granule i (whole maps): [*s, *e). */
static void map_around(const ccai_vm_range *r, size_t i, size_t *s, size_t *e) {
    *s = i;
    while (!ccai_vm_range_starts(r, *s)) /* a mapped granule's map starts at or before it */
        (*s)--;
    *e = *s + 1;
    while (*e < r->granules && ccai_vm_range_mapped(r, *e) && !ccai_vm_range_starts(r, *e))
        (*e)++;
}

cca_status ccai_vm_check_unmap(const ccai_vm_ranges *rs, uintptr_t addr, size_t size, ccai_vm_range **r,
                               size_t *first) {
    cca_status st = check_run(rs, true, addr, size, r, first);
    if (st != CCA_OK || !rs->whole_maps)
        return st;
    size_t end = *first + size / rs->granule, cut, s, e;
    if (!ccai_vm_range_starts(*r, *first))
        cut = *first;
    else if (end < (*r)->granules && ccai_vm_range_mapped(*r, end) && !ccai_vm_range_starts(*r, end))
        cut = end;
    else
        return CCA_OK;
    map_around(*r, cut, &s, &e);
    return cca_set_error(CCA_ERR_UPSTREAM,
                     "%s: vm_unmap of %p (%zu bytes): it would cut the map of granules [%zu, %zu) of the range at %p, "
                     "which it %s (maps here are whole allocations, unmapped only whole; nothing changed)",
                     rs->who, (void *)addr, size, s, e, (void *)(*r)->base,
                     cut == *first ? "starts inside" : "ends inside");
}

cca_status ccai_vm_check_release(const ccai_vm_ranges *rs, uintptr_t base, size_t size, ccai_vm_range **r) {
    for (*r = rs->head; *r; *r = (*r)->next)
        if ((*r)->base == base && (*r)->size == size)
            break;
    if (!*r)
        return cca_set_error(CCA_ERR_UPSTREAM,
                         "%s: vm_release: no range of %zu bytes reserved at %p (a release names exactly one range "
                         "from vm_reserve)",
                         rs->who, size, (void *)base);
    size_t mapped = first_in_state(*r, 0, (*r)->granules, true);
    if (mapped < (*r)->granules)
        return cca_set_error(CCA_ERR_UPSTREAM, "%s: vm_release of %p (%zu bytes): granule %zu is still mapped; unmap first",
                         rs->who, (void *)base, size, mapped);
    return CCA_OK;
}
