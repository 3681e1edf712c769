/*
 * pages_model.h — a reference model of the growth policy over expandable
 * segments (expandable:1, kinds/pages.c), written from docs/allocator.md
 * and ccalloc.h only (not from the allocator's code), for
 * tests/allocator/random/test_pages_oracle.c.
 *
 * - Owns: the ranges (in creation order, each an address-ordered array of
 *   blocks that tile it, a mapped bit and a map-start bit per page), the
 *   simulated device's free bytes, and the counters the allocator reports.
 *   One stream, no domains, no max_split (refused with pages); hold_peak
 *   as an option.
 * - Addresses are offsets inside a range; a range is named by its creation
 *   number (`id`). Where a range lies is the upstream's choice (vm_reserve),
 *   so the test tells the model each range's base once it has seen it
 *   (pm_set_base), and best fit's ties between ranges use those bases.
 * - Slow and obvious on purpose: linear scans over every block and page.
 * - The rules it encodes ([Pn] in pages_model.c) are listed, each with the
 *   section it comes from, in test_pages_oracle.c's opening comment.
 */
#ifndef CCA_PAGES_MODEL_H
#define CCA_PAGES_MODEL_H

#include "ccalloc.h"
#include "model_blocks.h"

#include <stddef.h>
#include <stdint.h>

enum { PM_SMALL, PM_LARGE };

typedef mb_block pm_block;

typedef struct pm_range {
    uint64_t id;    /* creation number, from 0 */
    uintptr_t base; /* learned from the first block handed out; 0 = not yet */
    size_t size;    /* address space: whole pages */
    size_t npages;
    int pool;                      /* PM_SMALL or PM_LARGE */
    unsigned char *mapped, *start; /* per page: mapped; a map starts here */
    mb_blocks bl;                  /* its blocks, address-ordered (model_blocks.h) */
} pm_range;

typedef struct pm_config {
    size_t capacity; /* the simulated device */
    size_t page;     /* its vm granularity */
    int whole_maps;  /* vm_backing CCA_VM_WHOLE_MAPS */
    size_t small_max, small_segment, segment_round;
    size_t max_reserved; /* 0: no cap */
    int small_pool;
    double ahead; /* expandable_ahead */
    int hold;     /* hold_peak:1 */
} pm_config;

/* The decisions counted in pm_model.reach; pm_reach_name names them. */
enum {
    PM_AHEAD,         /* a tail map with ahead pages */
    PM_AHEAD_DROPPED, /* ahead pages left out (cap, device) */
    PM_REMAP,         /* a block whose pages a trim unmapped, mapped again */
    PM_RUNS,          /* a block lacking several runs (mem_info asked) */
    PM_MAPS,          /* whole maps: one run in several maps (asked too) */
    PM_SLACK,         /* a remainder kept as slack */
    PM_CUT_UNMAPPED,  /* a small remainder cut: it reached an unmapped page */
    PM_TIE,           /* best fit among equal sizes: the address decided */
    PM_NEW_RANGE,     /* a second range of a pool */
    PM_SPILL,         /* a small request spilled to the large range */
    PM_IMPOSSIBLE,    /* step 5a */
    PM_RETRY_STOP,    /* (b): releasing cannot help */
    PM_RETRY_C,       /* pages released by (c) */
    PM_RETRY_D,       /* pages released by (d) */
    PM_RETRY_OK,      /* a retry that served its request */
    PM_TRAPPED,       /* a release that left trapped free bytes */
    PM_RANGE_FREED,   /* a trim released an empty range */
    PM_HELD,          /* hold: a request kept under the peak by a release */
    PM_PEAK_RISES,    /* hold: a request that raised the peak, cache emptied */
    PM_REACH_N
};
const char *pm_reach_name(int i);

typedef struct pm_model {
    pm_config c;
    pm_range *ranges; /* live ranges, in creation order */
    size_t nranges, cap;
    uint64_t next_id;
    size_t mapped; /* bytes mapped in all ranges */
    size_t peak;   /* the highest `mapped` (reserved_bytes_peak) */
    size_t cap_now; /* the cap in force: max_reserved, or the hold's peak (0: none) */
    int no_ahead;   /* the hold's take past the peak: the request's pages only */
    /* counters as cca_stats and cca_upstream_stats name them */
    uint64_t upstream_allocs, upstream_frees, alloc_retries, ooms;
    uint64_t vm_maps, vm_unmaps, pages_mapped, pages_unmapped, failed_maps, peak_holds;
    uint64_t reach[PM_REACH_N];
} pm_model;

/* Why an OOM: each reason the docs quote a message for. */
enum { PM_OOM_NONE, PM_OOM_NEVER, PM_OOM_NOTHING_CACHED, PM_OOM_OTHER };

typedef struct pm_alloc_result {
    cca_status status;
    int oom;           /* PM_OOM_*: why, for CCA_ERR_OUT_OF_MEMORY */
    uint64_t range_id; /* the block's range */
    size_t off;        /* the block's offset within it */
    size_t size;       /* the block's size (slack included) */
} pm_alloc_result;

typedef struct pm_stats {
    size_t reserved, allocated, cached, largest_free, segments, active_blocks, cached_blocks, address_space;
} pm_stats;

void pm_config_default(pm_config *c, size_t capacity, size_t page, int whole_maps);
void pm_init(pm_model *m, const pm_config *c);
void pm_fini(pm_model *m);

pm_alloc_result pm_alloc(pm_model *m, size_t size);
/* Free the live block at (range_id, off); 0 if there is none. */
int pm_free(pm_model *m, uint64_t range_id, size_t off);
/* cca_trim(keep): fills every field of the report. */
void pm_trim(pm_model *m, size_t keep, cca_release_report *r);
void pm_stats_get(const pm_model *m, pm_stats *s);
size_t pm_device_free(const pm_model *m);
pm_range *pm_range_by_id(pm_model *m, uint64_t id);
void pm_set_base(pm_model *m, uint64_t id, uintptr_t base);
/* 1 when a live block starts at address `addr`. */
int pm_live_at(const pm_model *m, uintptr_t addr);

#endif
