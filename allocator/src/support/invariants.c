/*
 * invariants.c — the table of invariants (invariants.h) and the two
 * formatters that read it: a broken invariant's message, a docs row.
 *
 * - Rows are designated by their enum id, so a row's place is its id. The
 *   size assertion below fails when the last id has no row; a second row
 *   for one id does not compile (the pragma below); an id left without a
 *   row between others is refused by tests/allocator/unit/test_check.c and
 *   tests/docs/test_docs.c.
 * - cca_check_invariants walks them all (observe/check.c has its cost);
 *   CCA_DEBUG=2 runs the walk before every public call's unlock.
 */
#include "invariants.h"

#include <stdio.h>

/* Two rows for one id: an error, not gcc's or clang's warning. */
#pragma GCC diagnostic error "-Woverride-init"

const ccai_invariant_row ccai_invariants[] = {
    [CCAI_INV_TILING] = {"the blocks of a segment tile it, from its base to its end, in an address-ordered chain",
                         "every segment", "`observe/check.c` (`check_segments`)"},
    [CCAI_INV_COALESCED] = {"no two neighbouring blocks are both free (frees coalesce at once)", "every segment",
                            "`observe/check.c` (`check_segments`)"},
    [CCAI_INV_INDEXED] = {"a block is in the free index exactly when it is free, in its own pool's index; it is in "
                          "the live map exactly when it is live or pending",
                          "every block", "`observe/check.c` (`check_segments`, `check_index_entry`, `check_all`)"},
    [CCAI_INV_COUNTERS] = {"`allocated_bytes` (live and pending blocks), `reserved_bytes` (classic segments plus "
                           "mapped pages), `cached_bytes` (free blocks), the block and segment counts equal the sums "
                           "over the blocks and segments",
                           "the allocator's counters", "`observe/check.c` (`check_segments`, `check_all`)"},
    [CCAI_INV_ALIGNED] = {"every block starts on a 256-byte boundary (`CCA_ALIGNMENT`) and its size is a multiple of "
                          "512 bytes (`CCA_GRANULARITY`)",
                          "every block", "`observe/check.c` (`check_segments`)"},
    [CCAI_INV_WAITS] = {"a block is pending exactly when it waits (for stream events, or for a synchronize that "
                        "failed: then it is on the sync list), and every event it waits on is in the pending queue "
                        "of its stream",
                        "pending blocks, queues", "`observe/check.c` (`check_block`, `check_queues`)"},
    [CCAI_INV_MAPPED] = {"every page under a live or pending block is mapped, and so is every page under a free block "
                         "without its `unmapped` mark, except in a sleeping domain (I10); a segment's count of mapped "
                         "pages is its bitmap's, and the allocator's mapped bytes are their sum, never more than the "
                         "upstream counts",
                         "expandable segments",
                         "`observe/check.c` (`check_segments`), `kinds/pages.c` (`pages_check`)"},
    [CCAI_INV_DOMAINS] = {"every segment belongs to one domain of the allocator and is on that domain's list; its free "
                          "blocks are in that domain's free index; the holding list is exactly the domains with "
                          "segments, the asleep list those asleep, the handle set every domain but the root, at "
                          "most half full; each domain's kept number is its position in the list, unless a destroy "
                          "marked the numbers stale; each "
                          "domain's counters are what its segments and blocks hold, and they sum to the allocator's",
                          "memory domains", "`observe/check.c` (`check_domains`, `check_index_entry`)"},
    [CCAI_INV_WHOLE_MAPS] = {"a map starts only on a mapped page, every run of mapped pages begins with a map's start, "
                             "and no map holds more pages than the growth rule's largest map (128 MiB)",
                             "expandable segments over whole maps (`CCA_VM_WHOLE_MAPS`)",
                             "`kinds/pages.c` (`pages_check`, `ccai_expandable_check_maps`)"},
    [CCAI_INV_ASLEEP] = {"a sleeping domain's pages may be unmapped under any block (its live blocks' bytes are on the "
                         "host; only what a refused unmap left is mapped, counted as any page); its record names every "
                         "live block of the domain, each copy not dropped and inside its host chunk; a chunk is held "
                         "exactly while a copy in it is not dropped, and the domain's host bytes are the held "
                         "chunks' sum (0 with `CCA_SLEEP_DISCARD`); no allocation is made in it",
                         "sleeping domains (`cca_domain_sleep`)",
                         "`observe/check.c` (`check_domains`), `sleep.c` "
                         "(`ccai_sleep_check`)"},
};
_Static_assert(sizeof ccai_invariants / sizeof ccai_invariants[0] == CCAI_INV_COUNT,
               "the last invariant id has no row");

const char *ccai_broken_message(ccai_broken b, char *buf, size_t size) {
    if (b.id == CCAI_INV_NONE)
        snprintf(buf, size, "%s", b.detail);
    else
        snprintf(buf, size, "I%d: %s", (int)b.id, b.detail);
    return buf;
}

const char *ccai_invariant_row_md(ccai_invariant id, char *buf, size_t size) {
    const ccai_invariant_row *r = &ccai_invariants[id];
    snprintf(buf, size, "| I%d | %s | %s | %s |", (int)id, r->statement, r->applies_to, r->checked_in);
    return buf;
}
