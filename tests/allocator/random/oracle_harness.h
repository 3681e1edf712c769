/*
 * oracle_harness.h — what test_classic_oracle.c and test_pages_oracle.c
 * share: the run's books and where it is, the program's loop, the checks
 * that do not depend on the kind of segment (status and OOM message, the
 * OOM line, the counters the test keeps itself, a release report, frees
 * the allocator must refuse).
 *
 * - A test gives its model through oracle_ops; the harness owns the live
 *   pointers (at most ORACLE_MAX_LIVE) and a ring of freed ones.
 * - Every failure names the configuration, the seed, the step and the op
 *   (WHERE), so CCA_RANDOM_SEED with CCA_ORACLE_TRACE=1 replays it.
 * - Cost: O(1) per check but the model's own; nothing here is meant to be
 *   fast.
 */
#ifndef CCA_ORACLE_HARNESS_H
#define CCA_ORACLE_HARNESS_H

#include "alloc_test_util.h"

#include <criterion/criterion.h>
#include <stddef.h>
#include <stdint.h>

#define ORACLE_MAX_LIVE 48
#define ORACLE_FREED_RING 16 /* pointers freed lately, for double frees */

/* A live block: its pointer, the model's name for it (a segment or a
 * range by creation number, an offset in it), the bytes asked for. */
typedef struct oracle_live {
    void *p;
    uint64_t id;
    size_t off, requested;
} oracle_live;

/* What the test counts itself: calls, requested bytes and every peak. */
typedef struct oracle_books {
    uint64_t alloc_calls, free_calls, oom_lines;
    size_t requested, requested_peak, allocated_peak, reserved_peak, active_peak, segments_peak;
} oracle_books;

typedef struct oracle_run {
    const char *name;
    uint64_t seed;
    int step;
    const char *op;
    int trace; /* CCA_ORACLE_TRACE: every step on stderr */
    oracle_books books;
    oracle_live live[ORACLE_MAX_LIVE + 1];
    size_t n;
    uintptr_t freed[ORACLE_FREED_RING];
    size_t nfreed;
} oracle_run;

/* Every message ends with where the run was: WHERE in the format, WHERE_ARGS(r) last. */
#define WHERE "; %s, seed %llu, step %d (%s)"
#define WHERE_ARGS(r) (r)->name, (unsigned long long)(r)->seed, (r)->step, (r)->op
#define CHECK_EQ(r, real, model, what)                                                                                 \
    cr_assert_eq((size_t)(real), (size_t)(model), "%s: real %zu, model %zu" WHERE, what, (size_t)(real),               \
                 (size_t)(model), WHERE_ARGS(r))

/* The model's side of one program. ctx is the test's. */
typedef struct oracle_ops {
    void (*alloc)(void *ctx, oracle_run *r, uint64_t *rng);
    /* free live[i] in the model (the harness frees it in the allocator) */
    void (*free)(void *ctx, oracle_run *r, size_t i);
    /* 1 when a live block of the model starts at p */
    int (*live_at)(void *ctx, const void *p);
    void (*trim)(void *ctx, oracle_run *r, uint64_t *rng, int empty);
    void (*check)(void *ctx, oracle_run *r);
} oracle_ops;

/* Run `steps` ops of `seed` on a (allocs, frees, refused frees, trims,
 * empty-caches, a free of everything), ops->check after each, then free
 * what is live; the log sink counts lines meanwhile. `test` and `name`
 * name the run on stderr. */
void oracle_program(const char *test, const char *name, uint64_t seed, int trace, cca_allocator *a, int steps,
                    const oracle_ops *ops, void *ctx);

/* A size near n: n, n +- 1, n +- 512, n +- 513 (never below 0). */
size_t oracle_jitter(uint64_t *rng, size_t n);

/* The model's figures, as cca_stats names them, and the device's free
 * bytes as mem_info should say. */
typedef struct oracle_figures {
    size_t reserved, allocated, cached, largest_free, segments, active_blocks, cached_blocks, device_free;
    uint64_t upstream_allocs, upstream_frees, alloc_retries, ooms;
} oracle_figures;

/* Why an OOM: each reason the docs quote a message for (the models'
 * CM_OOM_* and PM_OOM_* in this order). */
enum { ORACLE_OOM_NONE, ORACLE_OOM_NEVER, ORACLE_OOM_NOTHING_CACHED, ORACLE_OOM_OTHER };

/* After cca_alloc(size) returned st with *out p, the model having said
 * `want` and, for an OOM, the reason `oom`: the status, the message, the
 * OOM line (the model's figures f, after the retry), *out NULL on failure.
 * 1 when p is a block to check. */
int oracle_alloc_status(oracle_run *r, size_t size, cca_status st, const void *p, cca_status want, int oom,
                        const oracle_figures *f);
/* A block the model placed as expected: its cca_block_size against the
 * model's, then kept live. */
void oracle_keep(oracle_run *r, cca_allocator *a, void *p, size_t size, size_t model_block, uint64_t id, size_t off);

/* The stats of a (into *s, for the test's own checks) against the model's
 * figures and the counters the test keeps (calls, requested bytes, every
 * peak, OOM lines), fragmentation, and the device's free bytes. */
void oracle_check_stats(oracle_run *r, cca_allocator *a, cca_upstream *u, const oracle_figures *f, cca_stats *s);

/* cca_trim(a, keep) (cca_empty_cache when `empty`): CCA_OK, and every
 * field of its report the model's `want`. */
void oracle_release(oracle_run *r, cca_allocator *a, size_t keep, int empty, const cca_release_report *want);

/* A run's count of each rule that decided something, printed, added to
 * `total`. */
void oracle_reached(const uint64_t *run, uint64_t *total, int n, const char *(*name)(int));

/* The test: each configuration under seeds 1, 2, 3 and one from time(),
 * each printed (CCA_RANDOM_SEED: that seed only; CCA_ORACLE_CONFIG: that
 * configuration only, by index; CCA_ORACLE_TRACE=1: every step), then,
 * over the whole set, every rule reached: a change that stopped the
 * programs reaching one would leave the oracle idle there. */
void oracle_seeds(size_t nconfigs, void (*run)(size_t config, uint64_t seed, int trace), const uint64_t *total, int n,
                  const char *(*name)(int));

#endif
