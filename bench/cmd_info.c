/*
 * cmd_info.c — `ccbench info TRACE...`: what each trace holds (events,
 * allocs and frees, lower bound, ideal arena, peak live blocks, streams,
 * marks, release events) as one markdown table, one row per trace. Traces
 * are read one at a time, so memory holds one trace at most. A row that
 * host memory cannot hold ends the command (exit 1), never a short table.
 */
#include "ccbench.h"

#include <stdlib.h>
#include <string.h>

/* One trace's table row alone: the table without its header and rule.
 * 0, or -1 when host memory could not hold the table (nothing printed). */
static int write_row(const ccb_trace *t) {
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m)
        return -1;
    int bad = ccb_write_traces_md(m, t, 1) != 0;
    bad = fclose(m) != 0 || !buf || bad;
    const char *row = buf;
    for (int k = 0; k < 2 && row; k++)
        row = strchr(row, '\n') ? strchr(row, '\n') + 1 : NULL;
    bad = bad || !row || !*row;
    if (!bad)
        fputs(row, stdout);
    free(buf);
    return bad ? -1 : 0;
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
        int bad = i == 0 ? ccb_write_traces_md(stdout, &t, 1) : write_row(&t);
        ccb_trace_free(&t);
        if (bad) { /* a table without the row would look complete */
            fprintf(stderr, "ccbench info: out of host memory writing the row of '%s'\n", o->args[i]);
            return 1;
        }
    }
    return 0;
}
