/*
 * pickle_read.h — a minimal unpickler for the tests of
 * cca_write_snapshot_torch: exactly the opcodes that snapshot_torch.c emits
 * (PROTO 2, EMPTY_DICT / EMPTY_LIST + MARK ... SETITEMS / APPENDS, TUPLE2,
 * BININT1 / BININT2 / BININT / LONG1, BINUNICODE, NEWTRUE / NEWFALSE,
 * BINFLOAT, STOP). Anything else, a truncated stream, bytes after STOP, a
 * string that is not well-formed UTF-8 (Python's pickle.load would refuse
 * it), a LONG1 wider than 9 bytes: the read fails with a message.
 *
 * Values are a tree of pr_value; a dict holds its keys and values
 * alternately in `items`. Everything is freed with pr_free.
 */
#ifndef CCA_TESTS_PICKLE_READ_H
#define CCA_TESTS_PICKLE_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum pr_kind { PR_DICT, PR_LIST, PR_TUPLE, PR_STR, PR_INT, PR_BOOL, PR_FLOAT, PR_MARK } pr_kind;

typedef struct pr_value {
    pr_kind kind;
    __int128 i; /* PR_INT, PR_BOOL */
    double f;   /* PR_FLOAT */
    char *s;    /* PR_STR, NUL-terminated (len bytes) */
    size_t len;
    struct pr_value **items; /* PR_DICT (key, value, ...), PR_LIST, PR_TUPLE */
    size_t count;
} pr_value;

/* Decode data[0, n): the value, or NULL with `why` (len bytes) saying where
 * and what went wrong. */
pr_value *pr_read(const unsigned char *data, size_t n, char *why, size_t len);
void pr_free(pr_value *v);

/* d[key] for a dict d (NULL when absent or d is not a dict). */
const pr_value *pr_get(const pr_value *d, const char *key);

#endif
