/*
 * cmd_info.c — `ccbench info TRACE...`: what each trace holds (events,
 * allocs and frees, lower bound, ideal arena, peak live blocks, streams,
 * marks, release events) as one markdown table, one row per trace. Traces
 * are read one at a time, so memory holds one trace at most.
 */
#include "ccbench.h"

#include <stdlib.h>
#include <string.h>

/* One trace's table row alone: the table without its header and rule. */
static void write_row(const ccb_trace *t) {
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m)
        return;
    ccb_write_traces_md(m, t, 1);
    fclose(m);
    const char *row = buf;
    for (int k = 0; k < 2 && row; k++)
        row = strchr(row, '\n') ? strchr(row, '\n') + 1 : NULL;
    fputs(row ? row : "", stdout);
    free(buf);
}

int ccb_cmd_info(ccb_options *o) {
    if (!o->nargs) {
        fprintf(stderr, "ccbench info: name at least one trace (file or gen:NAME)\n");
        return 2;
    }
    for (size_t i = 0; i < o->nargs; i++) {
        ccb_trace t;
        if (ccb_load_trace(o->args[i], o, &t))
            return 2;
        if (i == 0)
            ccb_write_traces_md(stdout, &t, 1);
        else
            write_row(&t);
        ccb_trace_free(&t);
    }
    return 0;
}
