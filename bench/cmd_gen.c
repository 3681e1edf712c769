/*
 * cmd_gen.c — `ccbench gen NAME [-o FILE] [--seed N] [--scale X]`: one
 * generated trace written in the trace format (v3), to stdout or FILE. The
 * same seed and scale write the same bytes on every machine (gen.c). A FILE
 * that cannot be written whole is named with the reason (outputs.c's
 * ccb_open_out / ccb_close_out), exit status 1; standard output is checked
 * at exit (main.c).
 */
#include "ccbench.h"

#include <stdio.h>

#include "ccai_escape.h" /* common/: text from outside, escaped for a person */

int ccb_cmd_gen(ccb_options *o) {
    if (o->nargs != 1) {
        fprintf(stderr, "ccbench gen: name one generator (ccbench --list)\n");
        return 2;
    }
    if (!ccb_generator_find(o->args[0])) { /* named whole: "gen:NAME" below is cut to fit */
        ccai_fprintf_escaped(stderr, "ccbench: unknown generator '%s' (ccbench --list)\n", o->args[0]);
        return 2;
    }
    ccb_trace t;
    char name[80];
    snprintf(name, sizeof name, "gen:%s", o->args[0]);
    if (ccb_load_trace(name, o, &t))
        return 2;
    int rc = 0;
    if (!o->output_file) {
        ccb_trace_write(&t, stdout); /* a write error: said by main at exit */
    } else {
        FILE *f = ccb_open_out(NULL, o->output_file);
        if (f)
            ccb_trace_write(&t, f);
        rc = ccb_close_out(f, NULL, o->output_file); /* either said and counted */
    }
    ccb_trace_free(&t);
    return rc ? 1 : 0;
}
