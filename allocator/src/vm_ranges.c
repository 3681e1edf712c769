/*
 * vm_ranges.c — an upstream's record of the address ranges it reserved and
 * of which granules in them are mapped, and the virtual-memory rules
 * checked on that record BEFORE any driver call.
 *
 * Why: the CUDA driver finds a rule broken only when it reaches the
 * offending granule. An unmap of granules [0, 4) whose granule 2 is not
 * mapped would unmap 0 and 1, then be refused at 2: the call "failed", yet
 * two granules are gone, and putting them back means new memory (their
 * contents lost) and may itself fail. The rules of cca_upstream_ops say a
 * refused call changes nothing, and the simulated device (upstream_host.c)
 * checks first; so does the CUDA upstream, on this record:
 *
 *   ranges  head -> [base, size, granules | bitmap] -> [ ... ] -> NULL
 *   bitmap  one bit per granule: 1 = mapped    granules 0 1 2 3 4 5 ...
 *                                              bits     1 1 0 1 0 0 ...
 *   map      [addr, addr + size) inside one range, every bit 0;
 *   unmap    inside one range, every bit 1 (the first 0 is named);
 *   release  exactly one range (same base and size), every bit 0.
 *
 * A refusal is CCA_ERR_UPSTREAM with a message naming the upstream, the
 * rule and the granule (its index in the range). The caller sets and
 * clears bits as its driver calls succeed, so the record stays the truth
 * even when a call fails part-way.
 *
 * Costs: finding the range walks the list (one range per stream, pool and
 * memory domain in use); checking a run tests its bits one by
 * one (a run of k granules: k tests; the driver then makes >= k calls
 * anyway). A range's bitmap is granules / 8 bytes: 5 KiB for 80 GiB of
 * 2 MiB granules. Not locked: the caller holds its own lock across the
 * check and the driver calls it allows.
 */
#include "internal.h"

#include <stdlib.h>

bool ccai_vm_range_mapped(const ccai_vm_range *r, size_t i) {
    return (r->mapped[i / 64] >> (i % 64)) & 1;
}

void ccai_vm_range_set(ccai_vm_range *r, size_t i, bool mapped) {
    uint64_t bit = (uint64_t)1 << (i % 64);
    if (mapped)
        r->mapped[i / 64] |= bit;
    else
        r->mapped[i / 64] &= ~bit;
}

cca_status ccai_vm_ranges_add(ccai_vm_ranges *rs, uintptr_t base, size_t size) {
    size_t granules = size / rs->granule, words = (granules + 63) / 64;
    ccai_vm_range *r = calloc(1, sizeof *r + words * sizeof r->mapped[0]);
    if (!r)
        return ccai_fail(CCA_ERR_OUT_OF_MEMORY, "%s: host malloc failed recording a range of %zu bytes", rs->who, size);
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
        return ccai_fail(CCA_ERR_UPSTREAM, "%s: %s of %p (%zu bytes): not whole granules of %zu bytes", rs->who, op,
                         (void *)addr, size, rs->granule);
    for (ccai_vm_range *r = rs->head; r; r = r->next) {
        if (addr < r->base || addr - r->base >= r->size)
            continue;
        if (size > r->size - (addr - r->base))
            return ccai_fail(CCA_ERR_UPSTREAM,
                             "%s: %s of %p (%zu bytes) runs past the end of its reserved range %p (%zu bytes)", rs->who,
                             op, (void *)addr, size, (void *)r->base, r->size);
        *out = r;
        *first = (addr - r->base) / rs->granule;
        return CCA_OK;
    }
    return ccai_fail(CCA_ERR_UPSTREAM, "%s: %s of %p (%zu bytes): not inside any reserved range", rs->who, op,
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
    return ccai_fail(CCA_ERR_UPSTREAM,
                     "%s: %s of %p (%zu bytes): granule %zu of the range at %p is %s (%s; nothing "
                     "changed)",
                     rs->who, op, (void *)addr, size, bad, (void *)(*r)->base, unmap ? "not mapped" : "already mapped",
                     unmap ? "an unmap names only mapped granules" : "a map overlaps no mapped granule");
}

cca_status ccai_vm_check_map(const ccai_vm_ranges *rs, uintptr_t addr, size_t size, ccai_vm_range **r, size_t *first) {
    return check_run(rs, false, addr, size, r, first);
}

cca_status ccai_vm_check_unmap(const ccai_vm_ranges *rs, uintptr_t addr, size_t size, ccai_vm_range **r,
                               size_t *first) {
    return check_run(rs, true, addr, size, r, first);
}

cca_status ccai_vm_check_release(const ccai_vm_ranges *rs, uintptr_t base, size_t size, ccai_vm_range **r) {
    for (*r = rs->head; *r; *r = (*r)->next)
        if ((*r)->base == base && (*r)->size == size)
            break;
    if (!*r)
        return ccai_fail(CCA_ERR_UPSTREAM,
                         "%s: vm_release: no range of %zu bytes reserved at %p (a release names exactly one range "
                         "from vm_reserve)",
                         rs->who, size, (void *)base);
    size_t mapped = first_in_state(*r, 0, (*r)->granules, true);
    if (mapped < (*r)->granules)
        return ccai_fail(CCA_ERR_UPSTREAM, "%s: vm_release of %p (%zu bytes): granule %zu is still mapped; unmap first",
                         rs->who, (void *)base, size, mapped);
    return CCA_OK;
}
