/*
 * cmd_micro.c — `ccbench micro [-s STRATEGY]... [--live N,N,..] [--pairs N]
 * [--streams N] [--out DIR]`: the cached-path micro-benchmark (micro.c) over the live-block
 * table, every count packed and with holes; the table on stdout, micro.md and
 * micro.csv into --out. --all runs it too (with --quick: the table up to 1k
 * and 2000 pairs).
 *
 * An operand is a usage error (exit 2), as for sleep and switch.
 *
 * Strategies default to ccalloc-growth (classic segments), ccalloc-expandable
 * (the allocator's default), the malloc floor and the GPU allocators (skipped
 * without a GPU).
 */
#include "ccbench.h"

#include <stdlib.h>

static const char *const micro_suite[] = {"ccalloc-growth", "ccalloc-expandable", "malloc", "ccalloc-cuda",
                                          "ccalloc-cuda-expandable", "cuda-async-tmax", "cub"};

int ccb_run_micro(ccb_options *o, FILE *md) {
    const char *const *specs = o->specs;
    size_t nspecs = o->nspecs;
    if (!nspecs) {
        specs = micro_suite;
        nspecs = sizeof micro_suite / sizeof *micro_suite;
    }
    const size_t *lives = o->lives;
    size_t nlives = o->nlives;
    if (!nlives) {
        lives = ccb_micro_default_lives;
        nlives = o->quick ? CCB_MICRO_QUICK_NLIVES : CCB_MICRO_DEFAULT_NLIVES;
    }
    ccb_micro_row *rows;
    size_t nrows;
    int rc = ccb_micro(specs, nspecs, lives, nlives, o->pairs, o->streams, &rows, &nrows);
    if (!rows)
        return 1; /* said */
    double timer = ccb_timer_overhead_ns();
    ccb_out_formatted(ccb_micro_write_md(stdout, rows, nrows, timer), NULL, "standard output");
    if (md) /* --all's README.md */
        ccb_out_formatted(ccb_micro_write_md(md, rows, nrows, timer), o->out, "README.md");
    if (o->out) { /* made before anything ran (here, or by --all) */
        FILE *f = ccb_open_out(o->out, "micro.csv");
        if (f)
            ccb_micro_write_csv(f, rows, nrows);
        ccb_close_out(f, o->out, "micro.csv");
        if ((f = ccb_open_out(o->out, "micro.md")))
            ccb_out_formatted(ccb_micro_write_md(f, rows, nrows, timer), o->out, "micro.md");
        ccb_close_out(f, o->out, "micro.md");
    }
    free(rows);
    return rc ? 1 : 0;
}

int ccb_cmd_micro(ccb_options *o) {
    if (ccb_no_operands(o, "micro"))
        return 2;
    if (o->out && ccb_mkdir_p(o->out))
        return 1; /* said and counted: before anything runs */
    return ccb_run_micro(o, NULL);
}
