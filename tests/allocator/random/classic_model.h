/*
 * classic_model.h — a reference model of the growth policy over classic
 * segments, written from docs/allocator.md and ccalloc.h (not from the
 * allocator's code), for tests/allocator/random/test_classic_oracle.c.
 *
 * - Owns: the segments (in creation order, each an address-ordered array of
 *   blocks), the simulated device's placement of them, and the counters the
 *   allocator reports. One stream, no domains, no hold.
 * - Addresses are offsets from the simulated device's base; a segment is
 *   named by its creation number (`id`), so a test maps it to the real one.
 * - Slow and obvious on purpose: every search is a linear scan over every
 *   block of every segment. O(blocks) per operation.
 * - The rules it encodes ([Rn] in classic_model.c), each with the section
 *   it comes from, are listed in test_classic_oracle.c's opening comment.
 */
#ifndef CCA_CLASSIC_MODEL_H
#define CCA_CLASSIC_MODEL_H

#include "ccalloc.h"
#include "model_blocks.h"

#include <stddef.h>
#include <stdint.h>

enum { CM_SMALL, CM_MEDIUM, CM_LARGE };

typedef mb_block cm_block;

typedef struct cm_segment {
    uint64_t id;    /* creation number, from 0 */
    size_t dev_off; /* where the device placed it */
    size_t size;    /* as reserved (reserved_bytes counts this) */
    int pool;
    mb_blocks bl; /* its blocks, address-ordered (model_blocks.h) */
} cm_segment;

typedef struct cm_config {
    size_t capacity, page; /* the simulated device */
    size_t small_max, small_segment, medium_segment, large_min, segment_round;
    size_t max_reserved; /* 0: no cap */
    int small_pool, medium_pool;
    size_t max_split; /* 0: off */
} cm_config;

/* The decisions counted in cm_model.reach; cm_reach_name names them. */
enum {
    CM_SLACK,           /* a remainder kept as slack */
    CM_LARGE_IN_MEDIUM, /* a large request served by a medium block */
    CM_TIE,             /* best fit among equal sizes: the address decided */
    CM_FALLBACK,        /* medium_segment refused, the least segment taken */
    CM_SHRUNK,          /* a least segment shrunk to the ceiling */
    CM_IMPOSSIBLE,      /* step 5a */
    CM_RETRY_STOP,      /* (b): releasing cannot help */
    CM_RETRY_C,         /* a segment released by (c) */
    CM_RETRY_D,         /* a segment released by (d) */
    CM_RETRY_OK,        /* a retry that served its request */
    CM_SPLIT_REFUSED,   /* max_split: the best block may not be taken */
    CM_SPLIT_UNCUT,     /* max_split: a remainder left uncut */
    CM_REACH_N
};
const char *cm_reach_name(int i);

typedef struct cm_model {
    cm_config c;
    cm_segment *segs; /* live segments, in creation order */
    size_t nsegs, cap;
    uint64_t next_id;
    /* counters as cca_stats names them */
    uint64_t upstream_allocs, upstream_frees, alloc_retries, ooms;
    uint64_t device_refusals; /* upstream allocs asked and refused */
    /* how often each rule decided something (CM_REACH_*), so a test can
     * require that its programs reach every one */
    uint64_t reach[CM_REACH_N];
} cm_model;

/* What one cca_alloc did, as the model predicts it. */
/* Why an OOM: each reason the docs quote a message for. */
enum { CM_OOM_NONE, CM_OOM_NEVER, CM_OOM_NOTHING_CACHED, CM_OOM_OTHER };

typedef struct cm_alloc_result {
    cca_status status;
    int oom;         /* CM_OOM_*: why, for CCA_ERR_OUT_OF_MEMORY */
    uint64_t seg_id; /* the block's segment */
    size_t off;      /* the block's offset within it */
    size_t size;     /* the block's size (slack included) */
    size_t dev_addr; /* dev_off of the segment + off */
} cm_alloc_result;

typedef struct cm_stats {
    size_t reserved, allocated, cached, largest_free, segments, active_blocks, cached_blocks;
} cm_stats;

/* Defaults of the option table (docs/allocator.md, "Options"). */
void cm_config_default(cm_config *c, size_t capacity, size_t page);
void cm_init(cm_model *m, const cm_config *c);
void cm_fini(cm_model *m);

cm_alloc_result cm_alloc(cm_model *m, size_t size);
/* Free the live block at (seg_id, off); 0 if there is none. */
int cm_free(cm_model *m, uint64_t seg_id, size_t off);
/* cca_trim(keep): fills the report's released/kept/pinned fields. */
void cm_trim(cm_model *m, size_t keep, cca_release_report *r);
void cm_stats_get(const cm_model *m, cm_stats *s);
/* Device bytes in use (sizes rounded up to the page). */
size_t cm_device_used(const cm_model *m);
const cm_segment *cm_segment_by_id(const cm_model *m, uint64_t id);
/* 1 when a live block starts at device offset `addr`. */
int cm_live_at(const cm_model *m, size_t addr);

#endif
