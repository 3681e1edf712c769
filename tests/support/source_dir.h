/*
 * source_dir.h — where the source tree is, for suites that read committed
 * files (fixtures, docs, results).
 *
 * - CCA_SOURCE_DIR when set (CTest sets it; a test can point it elsewhere);
 *   else the tree the suite was built from (CCA_TEST_SOURCE_DIR, set by
 *   cca_add_test), so a suite run by hand from any directory finds its
 *   files too.
 */
#ifndef TU_SOURCE_DIR_H
#define TU_SOURCE_DIR_H

#include <stdlib.h>

static inline const char *tu_source_dir(void) {
    const char *dir = getenv("CCA_SOURCE_DIR");
    return dir && *dir ? dir : CCA_TEST_SOURCE_DIR;
}

#endif
