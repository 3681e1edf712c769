/*
 * test_runtime_faults.c — runtime/src/engine.c: the engine (runtime/src) when its allocator's
 * device, or the host, refuses memory: every call index of a fault, across
 * a whole life of two models on one engine.
 *
 *   The life (scenario below): resident model R loaded and run; model A
 *   (a safetensors file) loaded, run, R run again, A unloaded (its domain
 *   released), R run, A loaded again (its remembered footprint reserved up
 *   front), run, unloaded; ccr_engine_release. Outputs are compared bit
 *   for bit with a run on a fresh engine that met no fault.
 *
 *   device faults  tu_faulty (tests/support/alloc_test_util.h) fails the k-th call
 *                  of one kind (alloc, free, vm_reserve, vm_map, vm_unmap,
 *                  vm_release, synchronize), once or from then on, for every
 *                  k the fault-free life makes and one more: growth with
 *                  domains, without, expandable, greedy and greedy over
 *                  expandable segments.
 *   host faults    malloc_fault.h fails the n-th host allocation, once and
 *                  from then on, for every n of the life (linked with
 *                  --wrap: the runtime's and the allocator's allocations,
 *                  and fdopen's FILE, malloc'd inside libc; this suite's
 *                  own input buffers are held out), footprint sidecars on.
 *
 * A step that succeeds, a fault met inside it and recovered from included,
 * leaves the caller's message as it was (ccr_last_error: the last failing
 * call's).
 *
 * At the first failing step, whatever it is: the status is the one ccr.h
 * documents for that call (a load or a run: CCR_ERR_OUT_OF_MEMORY; an
 * unload: CCR_ERR_DEVICE when the device refused memory back), the message
 * is not empty, the allocator holds exactly the weights of the models still
 * loaded and its invariants hold. Then, faults off: ccr_engine_release
 * succeeds and leaves zero live and zero reserved bytes (the device's free
 * memory back at its baseline), the same engine loads and runs A again with
 * the same output bytes, and destroying it leaves the device empty. A
 * release meeting two failures (mem_info, then an unmap) reports the first.
 * A save over A's own file refused for host memory at any allocation leaves
 * the file byte for byte as it was.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc_test_util.h"
#include "malloc_fault.h"
#include "test_runtime_util.h"

#define R_SPEC "mlp:48x100x80x10:relu:softmax:seed=2"
#define A_SAVED "mlp:32x600x600x10:gelu:softmax:seed=1" /* a 1.4 MiB layer: medium pool */
#define R_BATCH 8
#define A_BATCH 40

/* fdopen mallocs its FILE inside libc, out of --wrap=malloc's reach: wrapped
 * here (runtime.cmake), its allocation refused in turn as the others. */
FILE *__real_fdopen(int fd, const char *mode);
FILE *__wrap_fdopen(int fd, const char *mode);
FILE *__wrap_fdopen(int fd, const char *mode) {
    if (tu_malloc_fails_now()) {
        errno = ENOMEM;
        return NULL;
    }
    return __real_fdopen(fd, mode);
}

/* ---- the model file, the reference outputs --------------------------------- */

static char dir[64], a_path[128];

static void quiet(void *user, const char *line) {
    (void)user;
    (void)line;
}

static ccr_engine *engine_on(cca_upstream *up, size_t capacity, const char *conf, int domains, int sidecar) {
    return test_engine(up, capacity, conf, domains, sidecar, quiet);
}

/* Outputs of `batch` rows of a fixed input through m into y (batch x out). */
static ccr_status run_into(ccr_model *m, size_t batch, float *y) {
    size_t in = ccr_model_arch(m)->layers[0].in;
    /* the test's own input, not the engine's: held out of the host faults
     * (refused, it failed the step with no message of the engine's, which
     * passed only while an earlier failure's message was still there) */
    tu_malloc_hold(true);
    float *x = malloc(batch * in * sizeof(float));
    tu_malloc_hold(false);
    cr_assert_not_null(x);
    for (size_t i = 0; i < batch * in; i++)
        x[i] = (float)((i * 7919) % 1009) / 1009.0f - 0.5f;
    ccr_status st = ccr_model_run(m, x, batch, y);
    free(x);
    return st;
}

static float ref_r[R_BATCH * 10], ref_a[A_BATCH * 10];

static void setup(void) {
    snprintf(dir, sizeof dir, "/tmp/ccr_faults_XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(a_path, sizeof a_path, "%s/a.safetensors", dir);
    ccr_engine *e = engine_on(NULL, 64 * MiB, NULL, 1, 0);
    ccr_model *m;
    cr_assert_eq(ccr_model_load_spec(e, A_SAVED, &m), CCR_OK, "%s", ccr_last_error());
    cr_assert_eq(ccr_model_save(m, a_path), CCR_OK, "%s", ccr_last_error());
    cr_assert_eq(run_into(m, A_BATCH, ref_a), CCR_OK, "%s", ccr_last_error());
    cr_assert_eq(ccr_model_load_spec(e, R_SPEC, &m), CCR_OK, "%s", ccr_last_error());
    cr_assert_eq(run_into(m, R_BATCH, ref_r), CCR_OK, "%s", ccr_last_error());
    ccr_engine_destroy(e);
}

static void teardown(void) {
    char side[160];
    snprintf(side, sizeof side, "%s.ccfoot", a_path);
    unlink(side);
    unlink(a_path);
    rmdir(dir);
}

TestSuite(runtime_faults, .init = setup, .fini = teardown);

/* ---- the life of two models ------------------------------------------------- */

enum kind { LOAD, RUN, UNLOAD, RELEASE };
static const char *const kind_names[] = {"load", "run", "unload", "engine release"};

typedef struct life {
    ccr_engine *e;
    ccr_model *r, *a;
    int failed_step; /* 0: every step succeeded */
    enum kind failed_kind;
    ccr_status st;
    char why[512];
    int wrong_output; /* a step succeeded with other bytes than the reference */
    int kept_message; /* a step that succeeded but left a message (0: none) */
    char left[512];   /* ... that message */
} life;

static float y_r[R_BATCH * 10], y_a[A_BATCH * 10];

/* One step: its status; on failure the life stops there. */
static int step(life *l, int n, enum kind k, ccr_status st) {
    if (st == CCR_OK && strcmp(ccr_last_error(), TU_MARK) != 0 && !l->kept_message) {
        l->kept_message = n;
        snprintf(l->left, sizeof l->left, "%s", ccr_last_error());
    }
    if (st == CCR_OK)
        return 1;
    l->failed_step = n;
    l->failed_kind = k;
    l->st = st;
    snprintf(l->why, sizeof l->why, "%s", ccr_last_error());
    return 0;
}

static int run_checked(life *l, int n, ccr_model *m, int is_a) {
    size_t batch = is_a ? A_BATCH : R_BATCH;
    float *y = is_a ? y_a : y_r;
    if (!step(l, n, RUN, TU_MARKED(run_into(m, batch, y))))
        return 0;
    if (memcmp(y, is_a ? ref_a : ref_r, batch * 10 * sizeof(float)))
        l->wrong_output = n;
    return 1;
}

static int unload(life *l, int n, ccr_model **m) {
    ccr_status st = TU_MARKED(ccr_model_release(*m, NULL));
    *m = NULL; /* freed whatever the status */
    return step(l, n, UNLOAD, st);
}

static void live_life(life *l) {
    (void)(step(l, 1, LOAD, TU_MARKED(ccr_model_load_spec(l->e, R_SPEC, &l->r))) && run_checked(l, 2, l->r, 0) &&
           step(l, 3, LOAD, TU_MARKED(ccr_model_load_file(l->e, a_path, &l->a))) && run_checked(l, 4, l->a, 1) &&
           run_checked(l, 5, l->r, 0) && unload(l, 6, &l->a) && run_checked(l, 7, l->r, 0) &&
           step(l, 8, LOAD, TU_MARKED(ccr_model_load_file(l->e, a_path, &l->a))) && run_checked(l, 9, l->a, 1) &&
           unload(l, 10, &l->a) && step(l, 11, RELEASE, TU_MARKED(ccr_engine_release(l->e, NULL))));
    if (l->failed_step == 0 || l->failed_step == 11)
        l->r = NULL; /* the engine's release unloaded it */
}

/* Faults are off. What the failed step left, then the engine's recovery. */
static void check_after(life *l, const char *what) {
    cca_allocator *al = ccr_engine_allocator(l->e);
    cr_assert_eq(l->wrong_output, 0, "%s: step %d gave other output bytes", what, l->wrong_output);
    cr_expect_eq(l->kept_message, 0, "%s: step %d succeeded but left the message '%s'", what, l->kept_message, l->left);
    if (l->failed_step) {
        enum kind k = l->failed_kind;
        ccr_status want = k == LOAD || k == RUN ? CCR_ERR_OUT_OF_MEMORY : CCR_ERR_DEVICE;
        cr_expect_eq(l->st, want, "%s: %s (step %d) failed with %s: %s", what, kind_names[k], l->failed_step,
                     ccr_status_string(l->st), l->why);
        cr_expect_neq(l->why[0], '\0', "%s: step %d failed without a message", what, l->failed_step);
    }
    size_t held = (l->r ? ccr_model_device_bytes(l->r) : 0) + (l->a ? ccr_model_device_bytes(l->a) : 0);
    cr_expect_eq(live_bytes(l->e), held, "%s: step %d failed (%s): %zu bytes live, the loaded weights are %zu", what,
                 l->failed_step, l->why, live_bytes(l->e), held);
    cr_expect_eq(cca_check_invariants(al), CCA_OK, "%s: %s", what, cca_last_error());
    ccr_release_info r;
    cr_assert_eq(ccr_engine_release(l->e, &r), CCR_OK, "%s: release after step %d: %s", what, l->failed_step,
                 ccr_last_error());
    cr_expect_eq(r.live_bytes_after, 0, "%s", what);
    cr_expect_eq(reserved_bytes(l->e), 0, "%s: step %d: %zu bytes still reserved after release", what, l->failed_step,
                 reserved_bytes(l->e));
    cr_expect_eq(r.device_free_after, r.device_free_baseline, "%s: step %d", what, l->failed_step);
    /* the engine is whole: A loads and runs to the same bytes */
    ccr_model *m;
    cr_assert_eq(ccr_model_load_file(l->e, a_path, &m), CCR_OK, "%s: reload after step %d: %s", what, l->failed_step,
                 ccr_last_error());
    cr_assert_eq(run_into(m, A_BATCH, y_a), CCR_OK, "%s: %s", what, ccr_last_error());
    cr_expect_eq(memcmp(y_a, ref_a, sizeof ref_a), 0, "%s: outputs after recovery differ", what);
    cr_assert_eq(ccr_model_release(m, NULL), CCR_OK, "%s: %s", what, ccr_last_error());
}

/* ---- device faults ------------------------------------------------------------ */

static const struct {
    const char *conf;
    int domains;
} configs[] = {
    {"log_oom:0", 1},
    {"log_oom:0", 0},
    {"log_oom:0,expandable:1", 1},
    {"log_oom:0,policy:greedy,greedy_bytes:40M", 1},
    {"log_oom:0,policy:greedy,expandable:1,greedy_bytes:40M", 1},
};

static void device_sweep(tu_fault_kind kind, bool sticky) {
    for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++) {
        /* the fault-free life counts the calls of this kind */
        cca_upstream *dev;
        cr_assert_eq(ccr_device_open(CCR_DEVICE_HOST, 0, 128 * MiB, &dev, NULL), CCR_OK);
        tu_faulty f;
        cca_upstream *up = tu_faulty_create(&f, dev, "fx", true);
        life clean = {.e = engine_on(up, 0, configs[c].conf, configs[c].domains, 0)};
        uint64_t base = f.calls[kind];
        live_life(&clean);
        cr_assert_eq(clean.failed_step, 0, "%s: the fault-free life failed at step %d: %s", configs[c].conf,
                     clean.failed_step, clean.why);
        uint64_t total = f.calls[kind] - base;
        ccr_engine_destroy(clean.e);
        for (uint64_t k = 1; k <= total + 1; k++) {
            char what[160];
            snprintf(what, sizeof what, "%s, domains %d: %s call %llu of %llu fails%s", configs[c].conf,
                     configs[c].domains, tu_fault_names[kind], (unsigned long long)k, (unsigned long long)total,
                     sticky ? " and every later one" : "");
            life l = {.e = engine_on(up, 0, configs[c].conf, configs[c].domains, 0)};
            f.fail_at[kind] = f.calls[kind] + k;
            f.sticky[kind] = sticky;
            live_life(&l);
            tu_faulty_faults_off(&f);
            check_after(&l, what);
            ccr_engine_destroy(l.e);
            cca_upstream_stats us;
            cca_upstream_get_stats(dev, &us);
            cr_assert_eq(us.bytes_in_use, 0, "%s: the device holds %zu bytes after the engine's end", what,
                         us.bytes_in_use);
        }
        cca_upstream_destroy(up);
        cca_upstream_destroy(dev);
    }
}

Test(runtime_faults, every_device_alloc_fails_in_turn) {
    device_sweep(TU_FAULT_ALLOC, false);
    device_sweep(TU_FAULT_ALLOC, true);
}

Test(runtime_faults, every_device_map_and_reserve_fails_in_turn) {
    device_sweep(TU_FAULT_MAP, false);
    device_sweep(TU_FAULT_MAP, true);
    device_sweep(TU_FAULT_RESERVE, false);
}

Test(runtime_faults, every_device_free_fails_in_turn) {
    device_sweep(TU_FAULT_FREE, false);
    device_sweep(TU_FAULT_FREE, true);
    device_sweep(TU_FAULT_UNMAP, false);
    device_sweep(TU_FAULT_RELEASE, false);
    device_sweep(TU_FAULT_SYNC, false);
}

/* ---- host faults -------------------------------------------------------------- */

static void host_sweep(const char *conf, bool sticky) {
    for (long n = 1;; n++) {
        char what[128];
        snprintf(what, sizeof what, "%s: host allocation %ld fails%s", conf, n, sticky ? " and every later one" : "");
        char side[160];
        snprintf(side, sizeof side, "%s.ccfoot", a_path);
        unlink(side);
        life l = {.e = engine_on(NULL, 128 * MiB, conf, 1, 1)};
        tu_malloc_arm(n, sticky);
        live_life(&l);
        long injected = tu_malloc_disarm();
        check_after(&l, what);
        ccr_engine_destroy(l.e);
        if (injected == 0) {
            cr_expect_eq(l.failed_step, 0, "%s", what);
            break; /* the life made fewer than n allocations: every one has failed in turn */
        }
    }
}

Test(runtime_faults, every_host_allocation_fails_in_turn) {
    host_sweep("log_oom:0", false);
    host_sweep("log_oom:0,expandable:1", false);
}

Test(runtime_faults, host_allocations_fail_from_the_nth_on) {
    host_sweep("log_oom:0", true);
}

/* The engine's own creation under host faults: CCR_OK, or a documented
 * failure with nothing left behind (the device too is ours: destroyed). */
/* ccr_engine_release runs every step after a failure and reports the
 * first: here the device's free memory cannot be read before, then the
 * empty-cache cannot give a cached segment back; the message is the
 * first's, and a later release, faults off, finishes the job. */
Test(runtime_faults, release_reports_its_first_failure) {
    cca_upstream *dev;
    cr_assert_eq(ccr_device_open(CCR_DEVICE_HOST, 0, 64 * MiB, &dev, NULL), CCR_OK);
    tu_faulty f;
    cca_upstream *up = tu_faulty_create(&f, dev, "fx", true);
    ccr_engine *e = engine_on(up, 0, "log_oom:0", 0, 0); /* no domains: the unload leaves its segments cached */
    ccr_model *m;
    cr_assert_eq(ccr_model_load_spec(e, "mlp:64x256x10", &m), CCR_OK, "%s", ccr_last_error());
    ccr_model_unload(m);
    cr_assert_gt(reserved_bytes(e), 0);
    f.fail_mem_info = true;
    f.fail_at[TU_FAULT_UNMAP] = f.calls[TU_FAULT_UNMAP] + 1; /* expandable segments: pages go back unmapped */
    f.sticky[TU_FAULT_UNMAP] = true;
    ccr_release_info r;
    cr_expect_eq(ccr_engine_release(e, &r), CCR_ERR_DEVICE);
    static const char first[] = "release: cannot read the device's free memory before: ";
    cr_expect(strncmp(ccr_last_error(), first, sizeof first - 1) == 0, "%s", ccr_last_error());
    cr_expect_eq(r.device_free_read, 0);
    /* the unmap refused first, the count after it then: device_free_read 0
     * and the error the empty-cache's, not the count's (ccr.h said the
     * release's error names the refused read) */
    f.fail_mem_info = false;
    f.fail_mem_info_from = f.mem_info_calls + 2; /* the count before is read */
    cr_expect_eq(ccr_engine_release(e, &r), CCR_ERR_DEVICE);
    cr_expect(strstr(ccr_last_error(), "empty-cache failed: ") == ccr_last_error(), "%s", ccr_last_error());
    cr_expect_eq(r.device_free_read, 0);
    cr_expect_eq(r.device_free_before, 0, "neither count alone");
    f.fail_mem_info_from = 0;
    tu_faulty_faults_off(&f);
    cr_expect_eq(ccr_engine_release(e, &r), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(reserved_bytes(e), 0);
    ccr_engine_destroy(e);
    cca_upstream_destroy(up);
    cca_upstream_destroy(dev);
}

Test(runtime_faults, engine_create_under_host_faults) {
    for (long n = 1;; n++) {
        ccr_engine_options o;
        ccr_engine_options_default(&o);
        o.device = CCR_DEVICE_HOST;
        o.host_capacity = 64 * MiB;
        o.alloc_conf = "log_oom:0,expandable:1";
        o.warn = quiet;
        ccr_engine *e = NULL;
        tu_malloc_arm(n, false);
        ccr_status st = ccr_engine_create(&o, &e);
        long injected = tu_malloc_disarm();
        if (st != CCR_OK) {
            cr_expect(st == CCR_ERR_OUT_OF_MEMORY || st == CCR_ERR_DEVICE, "allocation %ld: %s: %s", n,
                      ccr_status_string(st), ccr_last_error());
            cr_expect_null(e);
            continue;
        }
        ccr_model *m;
        cr_assert_eq(ccr_model_load_file(e, a_path, &m), CCR_OK, "allocation %ld: %s", n, ccr_last_error());
        cr_assert_eq(run_into(m, A_BATCH, y_a), CCR_OK, "%s", ccr_last_error());
        cr_expect_eq(memcmp(y_a, ref_a, sizeof ref_a), 0);
        ccr_engine_destroy(e);
        if (injected == 0)
            break;
    }
}

/* The whole file at path, read with the faults held out. */
static char *slurp(const char *path, size_t *len) {
    tu_malloc_hold(true);
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s", path);
    cr_assert_eq(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    cr_assert_geq(n, 0);
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    cr_assert_not_null(buf);
    cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    tu_malloc_hold(false);
    *len = (size_t)n;
    return buf;
}

/* A save over the model's own file refused for host memory leaves the
 * file as it was, byte for byte: the host memory a save needs is taken
 * before the file is opened for writing. Every allocation of the save in
 * turn, until one that leaves it room. */
Test(runtime_faults, a_save_refused_for_host_memory_leaves_the_file_as_it_was) {
    ccr_engine *e = engine_on(NULL, 64 * MiB, NULL, 1, 0);
    ccr_model *m;
    cr_assert_eq(ccr_model_load_file(e, a_path, &m), CCR_OK, "%s", ccr_last_error());
    size_t before_len, after_len;
    char *before = slurp(a_path, &before_len);
    long refused = 0;
    for (long n = 1;; n++) {
        tu_malloc_arm(n, false);
        ccr_status st = ccr_model_save(m, a_path);
        long injected = tu_malloc_disarm();
        if (st == CCR_OK && injected == 0)
            break;
        cr_assert_eq(st, CCR_ERR_OUT_OF_MEMORY, "allocation %ld refused: %s (%s)", n, ccr_status_string(st),
                     ccr_last_error());
        char *after = slurp(a_path, &after_len);
        cr_assert(after_len == before_len && memcmp(after, before, before_len) == 0,
                  "allocation %ld refused: the model's file changed (%zu bytes, was %zu)", n, after_len, before_len);
        free(after);
        refused++;
    }
    cr_expect_gt(refused, 0, "no host allocation of the save was refused: the test reached nothing");
    char *after = slurp(a_path, &after_len);
    cr_expect(after_len == before_len && memcmp(after, before, before_len) == 0,
              "the save that succeeded changed the file");
    free(after);
    free(before);
    ccr_engine_destroy(e);
}

/* ccr_timeline_open refused host memory at each of its allocations (its
 * record, its path, fdopen's FILE): CCR_ERR_OUT_OF_MEMORY, *out NULL, never
 * CCR_ERR_IO as if the path could not be created (fdopen's said so). */
Test(runtime_faults, a_timeline_refused_host_memory_is_out_of_memory) {
    char path[160];
    snprintf(path, sizeof path, "%s/t.csv", dir);
    long refused = 0;
    for (long n = 1;; n++) {
        ccr_timeline *t = (ccr_timeline *)1;
        tu_malloc_arm(n, false);
        ccr_status st = ccr_timeline_open(path, &t);
        long injected = tu_malloc_disarm();
        if (st == CCR_OK) {
            cr_assert_eq(ccr_timeline_close(t), CCR_OK, "%s", ccr_last_error());
            if (injected == 0)
                break;
            continue;
        }
        cr_expect_eq(st, CCR_ERR_OUT_OF_MEMORY, "allocation %ld refused: %s (%s)", n, ccr_status_string(st),
                     ccr_last_error());
        cr_expect_null(t);
        refused++;
    }
    cr_expect_geq(refused, 3, "the record, the path and the FILE");
    unlink(path);
}

/* An allocation the device refuses while it cannot say its free memory
 * either (mem_info refused): the message says so, never "0 B free of 0 B"
 * as if the device had been read. */
Test(runtime_faults, an_oom_message_without_the_devices_count_says_unknown) {
    cca_upstream *dev;
    cr_assert_eq(ccr_device_open(CCR_DEVICE_HOST, 0, 64 * MiB, &dev, NULL), CCR_OK);
    tu_faulty f;
    cca_upstream *up = tu_faulty_create(&f, dev, "fx", true);
    ccr_engine *e = engine_on(up, 0, "log_oom:0,expandable:0", 1, 0);
    ccr_model *m;
    cr_assert_eq(ccr_model_load_spec(e, R_SPEC, &m), CCR_OK, "%s", ccr_last_error());
    f.fail_at[TU_FAULT_ALLOC] = f.calls[TU_FAULT_ALLOC] + 1;
    f.sticky[TU_FAULT_ALLOC] = true;
    f.fail_mem_info = true;
    ccr_model *big = NULL;
    ccr_status st = ccr_model_load_spec(e, A_SAVED, &big); /* a 1.4 MiB layer: a segment of its own */
    f.fail_mem_info = false;
    tu_faulty_faults_off(&f);
    cr_assert_neq(st, CCR_OK, "the load met a refused allocation");
    cr_expect(strstr(ccr_last_error(), "free of") == NULL, "%s", ccr_last_error());
    cr_expect(strstr(ccr_last_error(), "free memory unknown") != NULL, "%s", ccr_last_error());
    ccr_engine_destroy(e);
    cca_upstream_destroy(up);
    cca_upstream_destroy(dev);
}
