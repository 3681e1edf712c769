/*
 * test_bench_switch.c — bench/switch.c called in the test process with the
 * stand-in ccrun (tests/fixtures/fake_ccrun.sh): what it says of a ccrun
 * document it could not read.
 *
 * - cJSON allocates through hooks (cJSON_InitHooks): a hook that refuses
 *   every allocation, as malloc does without host memory (NULL, errno
 *   ENOMEM), stands for host memory short while the document is parsed.
 * - Built only where ccbench has cJSON (CCB_HAVE_CJSON: without it switch
 *   reports skipped).
 */
#include <criterion/criterion.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h" /* tests/support: standard error, kept */
#include "ccbench.h"
#include "source_dir.h" /* tests/support: the fixtures */

static void *refuse(size_t n) {
    (void)n;
    errno = ENOMEM;
    return NULL;
}

/* A document host memory could not hold was said to be "not one JSON
 * document" (cJSON_Parse returns NULL for both): a valid one must not be
 * called invalid. */
Test(bench_switch, a_document_host_memory_cannot_parse_says_so) {
    char fake[4096];
    snprintf(fake, sizeof fake, "%s/tests/fixtures/fake_ccrun.sh", tu_source_dir());
    setenv("FAKE_CCRUN", "figures", 1);
    char *argv[] = {"switch", "--ccrun", fake, "a", "b", NULL};
    cJSON_Hooks hooks = {refuse, free};
    tu_capture c;
    tu_capture_begin(&c, 2);
    cJSON_InitHooks(&hooks);
    int rc = ccb_cmd_switch(5, argv);
    cJSON_InitHooks(NULL);
    char *err = tu_capture_end(&c);
    cr_assert_eq(rc, 1, "exit %d; stderr: %s", rc, err);
    cr_assert_null(strstr(err, "not one JSON document"), "a valid document called invalid: %s", err);
    cr_assert_not_null(strstr(err, "out of host memory"), "stderr: %s", err);
    free(err);
}
