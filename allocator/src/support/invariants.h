/*
 * invariants.h — the allocator's invariants, one table: id, statement, what
 * it applies to, where it is checked (invariants.c holds the rows).
 *
 * - The id is the row's index: ccai_invariants[CCAI_INV_COALESCED] is I2.
 *   A row has no id field of its own, so two rows cannot claim one id, and
 *   the enum below numbers them 1, 2, 3, ... with no gap.
 * - The walker (check.c, and the kinds' `check`, kind.h) reports what it
 *   finds broken as a ccai_broken: the row's id and a detail;
 *   ccai_broken_message formats it as "I<id>: <detail>", the text
 *   cca_check_invariants puts after "invariant broken: ".
 * - docs/allocator.md's table (section Invariants) holds these rows
 *   verbatim, as ccai_invariant_row_md prints them: tests/docs/test_docs.c.
 * - Nothing here knows an allocator type: the docs test includes this
 *   header alone.
 */
#ifndef CCA_INVARIANTS_H
#define CCA_INVARIANTS_H

#include <stddef.h>

typedef enum ccai_invariant {
    CCAI_INV_NONE = 0,   /* a check outside the numbered invariants        */
    CCAI_INV_TILING,     /* I1 blocks tile their segment                   */
    CCAI_INV_COALESCED,  /* I2 no two neighbouring free blocks             */
    CCAI_INV_INDEXED,    /* I3 free index and live map hold the right ones */
    CCAI_INV_COUNTERS,   /* I4 the byte and block counters                 */
    CCAI_INV_ALIGNED,    /* I5 alignment and granularity                   */
    CCAI_INV_WAITS,      /* I6 pending blocks and the queues               */
    CCAI_INV_MAPPED,     /* I7 expandable segments' pages                  */
    CCAI_INV_DOMAINS,    /* I8 domains                                     */
    CCAI_INV_WHOLE_MAPS, /* I9 whole maps                                  */
    CCAI_INV_ASLEEP,     /* I10 sleeping domains                            */
    CCAI_INV_COUNT
} ccai_invariant;

/* One row; every text is markdown, as the docs show it. */
typedef struct ccai_invariant_row {
    const char *statement;
    const char *applies_to;
    const char *checked_in; /* files relative to allocator/src, and functions */
} ccai_invariant_row;

/* Indexed by id, CCAI_INV_COUNT rows; row 0 (CCAI_INV_NONE) is empty.
 * Declared without its size so that invariants.c's rows set it (and its
 * assertion can count them). */
extern const ccai_invariant_row ccai_invariants[];

/* What a check found: id CCAI_INV_NONE and detail NULL when it holds; a
 * detail with id CCAI_INV_NONE names a check outside the table (a peak, a
 * stale copy of a segment's flags). The detail is a static string. */
typedef struct ccai_broken {
    ccai_invariant id;
    const char *detail;
} ccai_broken;

#define CCAI_HOLDS ((ccai_broken){CCAI_INV_NONE, NULL})

static inline ccai_broken ccai_broke(ccai_invariant id, const char *detail) {
    return (ccai_broken){id, detail};
}

/* "I<id>: <detail>", or the detail alone for CCAI_INV_NONE, into buf (cut
 * to size); returns buf. */
const char *ccai_broken_message(ccai_broken b, char *buf, size_t size);

/* Row `id` as one line of the docs' table, "| I<id> | statement | applies
 * to | checked in |" (no newline), into buf (cut to size); returns buf. */
const char *ccai_invariant_row_md(ccai_invariant id, char *buf, size_t size);

#endif /* CCA_INVARIANTS_H */
