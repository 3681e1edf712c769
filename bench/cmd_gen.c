/*
 * cmd_gen.c — `ccbench gen NAME [-o FILE] [--seed N] [--scale X]`: one
 * generated trace written in the trace format (v2), to stdout or FILE. The
 * same seed and scale write the same bytes on every machine (gen.c).
 */
#include "ccbench.h"

#include <stdio.h>

int ccb_cmd_gen(ccb_options *o) {
    if (o->nargs != 1) {
        fprintf(stderr, "ccbench gen: name one generator (ccbench --list)\n");
        return 2;
    }
    ccb_trace t;
    char name[80];
    snprintf(name, sizeof name, "gen:%s", o->args[0]);
    if (ccb_load_trace(name, o, &t))
        return 2;
    int rc = o->output_file ? ccb_trace_save(&t, o->output_file) : ccb_trace_write(&t, stdout);
    ccb_trace_free(&t);
    return rc ? 1 : 0;
}
