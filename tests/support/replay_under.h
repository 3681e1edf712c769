/*
 * replay_under.h — an upper bound on a wall-clock figure of a ccbench replay,
 * for tests that bound bookkeeping time or count the driver's charges by
 * time.
 *
 * - Why: wall-clock figures only grow on a busy machine (a pass preempted, a
 *   busy-wait of the simulated device that overshoots its latency), never
 *   shrink. The bound is checked on the first of at most three replays that
 *   meets it: a machine busy for one replay cannot fail the test, while a
 *   real extra cost, which every replay pays, fails all three.
 * - The caller asserts the bound itself, on the replay kept (the last one
 *   made), with its own message; lower bounds and counts hold for every
 *   replay and are asserted on it too.
 * - Cost: one replay on a quiet machine, three at most.
 */
#ifndef TU_REPLAY_UNDER_H
#define TU_REPLAY_UNDER_H

#include <criterion/criterion.h>

#include "ccbench.h"

typedef double (*tu_replay_figure)(const ccb_result *r);

/* ccb_replay(t, spec, o, r), asserted to succeed and not to be skipped,
 * repeated (the earlier result freed) while figure(r) >= bound, three
 * times at most. */
static inline void tu_replay_under(const ccb_trace *t, const char *spec, const ccb_replay_options *o, ccb_result *r,
                                   tu_replay_figure figure, double bound) {
    for (int attempt = 1;; attempt++) {
        cr_assert_eq(ccb_replay(t, spec, o, r), 0, "%s: %s", spec, r->why);
        cr_assert(!r->skipped, "%s: %s", spec, r->why);
        if (figure(r) < bound || attempt == 3)
            return;
        ccb_result_free(r);
    }
}

#endif /* TU_REPLAY_UNDER_H */
