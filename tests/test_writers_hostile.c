/*
 * test_writers_hostile.c — the recorders and writers under hostile
 * conditions: snapshots of allocators with tens of thousands of segments
 * (time, memory, and output that tests/pickle_read.c and cJSON accept), the
 * history ring at its limits as the pickle's device trace shows it, and
 * snapshots taken while other threads allocate.
 *
 * Criterion runs each test in its own process.
 */
#include "alloc_test_util.h"
#include "internal.h"
#include "pickle_read.h"

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The bytes a writer produced (open_memstream), NUL-terminated. */
typedef struct mem_out {
    char *buf;
    size_t len;
} mem_out;

static mem_out write_torch(const cca_allocator *a) {
    mem_out m = {0};
    FILE *f = open_memstream(&m.buf, &m.len);
    cr_assert_not_null(f);
    cr_assert_eq(cca_write_snapshot_torch(a, 0, f), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(fclose(f), 0);
    return m;
}

static mem_out write_json(const cca_allocator *a) {
    mem_out m = {0};
    FILE *f = open_memstream(&m.buf, &m.len);
    cr_assert_not_null(f);
    cr_assert_eq(cca_write_snapshot_json(a, f), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(fclose(f), 0);
    return m;
}

static pr_value *read_pickle(const mem_out *m) {
    char why[256];
    pr_value *v = pr_read((const unsigned char *)m->buf, m->len, why, sizeof why);
    cr_assert_not_null(v, "pickle_read: %s", why);
    return v;
}

static double seconds(uint64_t ns) {
    return (double)ns / 1e9;
}

/* ---- tens of thousands of segments ---------------------------------------- */

/* small_segment 64 KiB and small_max 64 KiB: every 64 KiB request is a
 * segment of its own. */
enum { MANY = 40000 };

Test(writers_hostile, snapshots_of_forty_thousand_segments_are_fast_and_parse, .timeout = 120) {
    cca_upstream *u;
    cca_allocator *a;
    tu_host_allocator((size_t)MANY * 64 * KiB + 64 * MiB, "small_segment:64K,small_max:64K", &u, &a);
    void **p = malloc(MANY * sizeof *p);
    cr_assert_not_null(p);
    for (int i = 0; i < MANY; i++)
        p[i] = tu_alloc(a, 64 * KiB, NULL);
    cca_stats s = tu_stats(a);
    cr_assert_eq(s.segments, MANY);

    uint64_t t0 = tu_now_ns();
    mem_out pk = write_torch(a);
    uint64_t t1 = tu_now_ns();
    mem_out js = write_json(a);
    uint64_t t2 = tu_now_ns();
    cr_log_info("torch %.3f s (%zu bytes), json %.3f s (%zu bytes)", seconds(t1 - t0), pk.len, seconds(t2 - t1),
                js.len);

    pr_value *v = read_pickle(&pk);
    const pr_value *segs = pr_get(v, "segments");
    cr_assert(segs && segs->kind == PR_LIST && segs->count == MANY, "%zu segments", segs ? segs->count : 0);
    pr_free(v);

    cJSON *j = cJSON_ParseWithLength(js.buf, js.len);
    cr_assert_not_null(j, "cJSON cannot parse the JSON snapshot");
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "segments")), MANY);
    cJSON_Delete(j);

    /* A snapshot holds the allocator's lock throughout: it must stay within
     * the same order as the pickle's (O(n log n)); a quadratic walk of
     * 40,000 segments is 1.6e9 list steps, seconds. Generous bounds for a
     * loaded machine: 2 s each. */
    cr_expect_lt(t1 - t0, 2000000000ull, "torch snapshot took %.3f s", seconds(t1 - t0));
    cr_expect_lt(t2 - t1, 2000000000ull, "JSON snapshot took %.3f s", seconds(t2 - t1));
    free(pk.buf);
    free(js.buf);
    for (int i = 0; i < MANY; i++)
        tu_free(a, p[i]);
    free(p);
    tu_teardown(a, u);
}
