/*
 * ccrun_double.h — ccrun's own code run in the test process on a device
 * the test made, for the suites that check what ccrun says when the device
 * misbehaves (test_ccrun_sleep.c, test_ccrun_mem_info.c).
 *
 * - ccrun_on_double parses ARGV (ccrun_parse_options) and runs ccrun_demo
 *   or ccrun_run on the simulated device of `capacity` bytes wrapped in
 *   tu_faulty (tests/support/alloc_test_util.h), given through
 *   ccrun_options.upstream, which the command line never sets.
 * - The setup's faults are set on the wrapper after its creation (which
 *   resets it): a copy to corrupt, memory kept at each unmap, mem_info
 *   refused from a call on.
 * - Standard output and error are captured whole; the wrapper and its
 *   device must hold nothing at the end (tu_faulty_destroy_clean).
 * - Act 5's process per model runs CCRUN_PATH (the suite's compile
 *   definition), not the test.
 */
#ifndef TU_CCRUN_DOUBLE_H
#define TU_CCRUN_DOUBLE_H

#include <criterion/criterion.h>
#include <string.h>

#include "alloc_test_util.h"
#include "capture.h"
#include "ccrun.h"

typedef struct ccrun_setup {
    size_t capacity;               /* the simulated device's bytes */
    uint64_t corrupt_in_at;        /* tu_faulty.corrupt_in_at (byte 2 of that copy); 0: none */
    size_t keep_per_unmap;         /* tu_faulty.keep_per_unmap */
    bool keep_after_host_alloc;    /* tu_faulty.keep_after_host_alloc */
    uint64_t fail_mem_info_from;   /* tu_faulty.fail_mem_info_from */
    uint64_t fail_mem_info_period; /* tu_faulty.fail_mem_info_period */
} ccrun_setup;

typedef struct ccrun_result {
    int rc;
    char *out, *err; /* what ccrun wrote on stdout and stderr */
} ccrun_result;

static inline ccrun_result ccrun_on_double(tu_faulty *f, const ccrun_setup *s, int argc, char **argv) {
    cca_upstream *inner = tu_vm_device_backed(s->capacity, 0, CCA_VM_WHOLE_MAPS);
    cca_upstream *u = tu_faulty_create(f, inner, "host", false);
    f->corrupt_in_at = s->corrupt_in_at;
    f->corrupt_byte = 2;
    f->keep_per_unmap = s->keep_per_unmap;
    f->keep_after_host_alloc = s->keep_after_host_alloc;
    f->fail_mem_info_from = s->fail_mem_info_from;
    f->fail_mem_info_period = s->fail_mem_info_period;
    ccrun_options o;
    cr_assert_eq(ccrun_parse_options(argc, argv, &o), 0, "the command line parses");
    o.upstream = u;
    o.child_ccrun = CCRUN_PATH;
    tu_capture_std c;
    tu_capture_std_begin(&c);
    ccrun_result r = {o.demo ? ccrun_demo(&o) : ccrun_run(&o), NULL, NULL};
    tu_capture_std_end(&c, &r.out, &r.err);
    tu_faulty_destroy_clean(u, inner);
    return r;
}

static inline void ccrun_result_free(ccrun_result *r) {
    free(r->out);
    free(r->err);
}

/* How many times sub occurs in text (overlapping ones counted). */
static inline size_t tu_count(const char *text, const char *sub) {
    size_t n = 0;
    for (const char *p = strstr(text, sub); p; p = strstr(p + 1, sub))
        n++;
    return n;
}

#endif /* TU_CCRUN_DOUBLE_H */
