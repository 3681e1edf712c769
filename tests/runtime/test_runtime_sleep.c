/*
 * test_runtime_sleep.c — runtime/src/sleep.c: a model asleep and woken on
 * the simulated device, where every figure is exact:
 *
 *   - asleep, the device's free memory rises by exactly the domain's
 *     reservation (back at its baseline when the model is the only one);
 *     after the wake every weight pointer is unchanged and the outputs are
 *     bit-identical to before the sleep; the wake maps exactly wake_need;
 *   - run and save of a sleeping model are refused (CCR_ERR_ASLEEP, no file);
 *   - a wake that does not fit (another model fills the device) is
 *     CCR_ERR_OUT_OF_MEMORY with the missing bytes, the model still asleep,
 *     and succeeds once room is made;
 *   - unload, the engine's release and destroy of a sleeping model;
 *   - sleep twice, wake twice; NULL; no domain (domains off, greedy) and
 *     classic segments: CCR_ERR_UNSUPPORTED, nothing changed;
 *   - the device refusing (tu_faulty): host memory, a copy, an unmap at
 *     sleep; a map and a copy back at wake: each path's status and state,
 *     and the timeline's phase after it (the model's state: `awake` after
 *     a refused sleep, `asleep` after a refused wake);
 *   - every device call of a life of two models slept, woken and unloaded
 *     asleep refused in turn, once and from then on, on maps backed whole
 *     and page by page: the step's documented status, then (faults off)
 *     each model wakes and runs to its first bytes, and the device gets
 *     every byte back (host memory it refused back excepted);
 *   - a device whose free memory cannot be read either: the message of a
 *     refused sleep, wake, run or unload still names what was refused (the
 *     timeline rows and figures read after it do not replace it); one
 *     that never says it runs a model's whole life, only the engine's
 *     release saying it could not read the device.
 */
#include <stdio.h>
#include <unistd.h>

#include "alloc_test_util.h"
#include "test_runtime_util.h"

static const char *const SPEC_A = "mlp:256x2048x2048x10:relu:softmax:seed=1";      /* ~18 MiB */
static const char *const SPEC_B = "mlp:256x2048x2048x2048x10:relu:softmax:seed=2"; /* ~34 MiB */

static ccr_model *load(ccr_engine *e, const char *spec) {
    ccr_model *m = NULL;
    cr_assert_eq(ccr_model_load_spec(e, spec, &m), CCR_OK, "%s", ccr_last_error());
    return m;
}

/* The first of `sub` in the last error, or NULL (for cr_expect). */
static int said(const char *sub) {
    return strstr(ccr_last_error(), sub) != NULL;
}

/* On the simulated device with maps backed whole (the default) or page by
 * page (CCA_VM_PAGES). */
static void sleep_and_wake(int backing) {
    const char *conf = backing == CCA_VM_PAGES ? "pages" : "whole maps";
    ccr_device_options o = {CCR_DEVICE_HOST, 0, 256 * MiB, 0, backing};
    cca_upstream *up = NULL;
    cr_assert_eq(ccr_device_open_with(&o, &up, NULL), CCR_OK, "%s", ccr_last_error());
    ccr_engine *e = test_engine(up, 0, NULL, 1, 0, NULL);
    ccr_model *a = load(e, SPEC_A);
    float *want = outputs_of(a, 8);
    float *w0[CCR_MAX_LAYERS], *b0[CCR_MAX_LAYERS];
    memcpy(w0, a->w, sizeof w0);
    memcpy(b0, a->b, sizeof b0);
    ccr_device_info dev;
    cr_assert_eq(ccr_engine_device_info(e, &dev), CCR_OK);
    size_t reserved = dstats(e, a).reserved_bytes, before = dev_free(e);
    cr_expect_gt(reserved, ccr_model_device_bytes(a), "weights and the run's cached activations");
    cr_expect_eq(before + reserved, dev.free_baseline, "%s: only A holds memory", conf);

    ccr_sleep_info s;
    cr_assert_eq(ccr_model_sleep(a, &s), CCR_OK, "%s: %s", conf, ccr_last_error());
    cr_expect(ccr_model_asleep(a));
    cr_expect_eq(s.was_asleep, 0);
    cr_expect_eq(dev_free(e), dev.free_baseline, "%s: asleep, the device's free memory is back at its baseline", conf);
    cr_expect_eq(s.device_bytes, reserved, "%s: every byte of the domain unmapped", conf);
    cr_expect_eq(s.device_free_before, before);
    cr_expect_eq(s.device_free_after - s.device_free_before, reserved);
    cr_expect_eq(s.device_free_read, 1);
    cr_expect_geq(s.bytes_copied, ccr_arch_param_bytes(ccr_model_arch(a)));
    cr_expect_leq(s.bytes_copied, ccr_model_device_bytes(a));
    cr_expect_eq(s.host_bytes, s.bytes_copied, "one host copy of the live bytes");
    cr_expect_geq(s.wake_need, ccr_model_device_bytes(a));
    cr_expect_leq(s.wake_need, reserved);
    cr_expect_geq(s.ms, 0.0);
    cca_domain_stats ds = dstats(e, a);
    cr_expect(ds.asleep);
    cr_expect_eq(ds.reserved_bytes, 0);
    cr_expect_eq(ds.host_bytes, s.host_bytes);
    cr_expect_eq(live_bytes(e), ccr_model_device_bytes(a), "the weights stay live (allocated) while asleep");
    size_t need = 0;
    cr_expect_eq(ccr_model_check_batch(a, 8, &need), CCR_OK, "the batch check touches no memory");
    cr_expect_gt(need, 0);

    ccr_sleep_info w;
    cr_assert_eq(ccr_model_wake(a, &w), CCR_OK, "%s: %s", conf, ccr_last_error());
    cr_expect_not(ccr_model_asleep(a));
    cr_expect_eq(w.was_asleep, 1);
    cr_expect_eq(w.device_bytes, s.wake_need, "%s: the wake mapped %zu, wake_need said %zu", conf, w.device_bytes,
                 s.wake_need);
    cr_expect_eq(w.wake_need, s.wake_need);
    cr_expect_eq(w.bytes_copied, s.bytes_copied);
    cr_expect_eq(w.host_bytes, s.host_bytes);
    cr_expect_eq(w.missing, 0);
    cr_expect_eq(w.device_free_before - w.device_free_after, w.device_bytes);
    cr_expect_eq(w.device_free_read, 1);
    cr_expect_eq(dev_free(e), dev.free_baseline - w.device_bytes);
    cr_expect_eq(memcmp(w0, a->w, sizeof w0), 0, "weight pointers unchanged");
    cr_expect_eq(memcmp(b0, a->b, sizeof b0), 0, "bias pointers unchanged");
    cr_expect_not(dstats(e, a).asleep);
    cr_expect_eq(dstats(e, a).host_bytes, 0, "the host copy is given back");
    expect_same_outputs(a, 8, want, "after the wake");
    expect_same_outputs(a, 8, want, "after a second run");
    free(want);
    ccr_release_info r;
    cr_expect_eq(ccr_engine_release(e, &r), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(r.device_free_after, r.device_free_baseline);
    ccr_engine_destroy(e);
    cca_upstream_destroy(up);
}

Test(runtime_sleep, asleep_frees_the_whole_domain_and_the_wake_gives_the_same_outputs) {
    sleep_and_wake(CCA_VM_WHOLE_MAPS);
}

Test(runtime_sleep, the_same_with_a_physical_allocation_per_page) {
    sleep_and_wake(CCA_VM_PAGES);
}

Test(runtime_sleep, with_another_model_loaded_only_the_sleeping_models_memory_goes) {
    ccr_engine *e = host_engine(256 * MiB, NULL);
    ccr_model *a = load(e, SPEC_A), *b = load(e, "mlp:64x512x10:relu:seed=3");
    float *want_b = outputs_of(b, 4);
    size_t a_res = dstats(e, a).reserved_bytes, b_res = dstats(e, b).reserved_bytes, before = dev_free(e);
    cr_assert_eq(ccr_model_sleep(a, NULL), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(dev_free(e) - before, a_res, "device free rises by exactly A's reservation");
    cr_expect_eq(dstats(e, b).reserved_bytes, b_res, "B keeps its memory");
    expect_same_outputs(b, 4, want_b, "of B while A sleeps");
    free(want_b);
    ccr_engine_destroy(e);
}

Test(runtime_sleep, run_and_save_of_a_sleeping_model_are_refused) {
    ccr_engine *e = host_engine(256 * MiB, NULL);
    ccr_model *a = load(e, SPEC_A);
    float *want = outputs_of(a, 2);
    cr_assert_eq(ccr_model_sleep(a, NULL), CCR_OK, "%s", ccr_last_error());
    float x[256 * 2] = {0}, y[10 * 2];
    size_t live = live_bytes(e);
    cr_expect_eq(ccr_model_run(a, x, 2, y), CCR_ERR_ASLEEP);
    cr_expect(said("is asleep: run refused"), "%s", ccr_last_error());
    cr_expect(said(SPEC_A), "the message names the model: %s", ccr_last_error());
    cr_expect_eq(live_bytes(e), live, "nothing allocated");
    char path[] = "/tmp/ccr_sleep_saveXXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    unlink(path);
    cr_expect_eq(ccr_model_save(a, path), CCR_ERR_ASLEEP);
    cr_expect(said("is asleep: save refused"), "%s", ccr_last_error());
    cr_expect_neq(access(path, F_OK), 0, "no file written");
    cr_expect_str_eq(ccr_status_string(CCR_ERR_ASLEEP), "CCR_ERR_ASLEEP");
    cr_expect_str_eq(ccr_status_string(CCR_ERR_UNSUPPORTED), "CCR_ERR_UNSUPPORTED");
    cr_assert_eq(ccr_model_wake(a, NULL), CCR_OK, "%s", ccr_last_error());
    expect_same_outputs(a, 2, want, "after the refused calls and the wake");
    cr_expect_eq(ccr_model_save(a, path), CCR_OK, "%s", ccr_last_error());
    unlink(path);
    free(want);
    ccr_engine_destroy(e);
}

/* A asleep, B fills the device: A's wake is refused with the missing bytes,
 * A stays asleep with its copy; after B goes, the wake succeeds. */
Test(runtime_sleep, a_wake_without_room_leaves_the_model_asleep_until_room_is_made) {
    ccr_engine *e = host_engine(48 * MiB, NULL);
    ccr_model *a = load(e, SPEC_A);
    float *want = outputs_of(a, 8);
    ccr_sleep_info s;
    cr_assert_eq(ccr_model_sleep(a, &s), CCR_OK, "%s", ccr_last_error());
    ccr_model *b = NULL;
    cr_assert_eq(ccr_model_load_spec(e, SPEC_B, &b), CCR_OK, "B fits while A sleeps: %s", ccr_last_error());
    free(outputs_of(b, 8));
    size_t free_now = dev_free(e);
    cr_assert_lt(free_now, s.wake_need, "the test needs B to leave too little room for A");
    ccr_sleep_info w;
    cr_expect_eq(ccr_model_wake(a, &w), CCR_ERR_OUT_OF_MEMORY);
    cr_expect(said("stays asleep"), "%s", ccr_last_error());
    cr_expect(said("missing"), "%s", ccr_last_error());
    cr_expect_eq(w.wake_need, s.wake_need);
    cr_expect_eq(w.missing, s.wake_need - free_now, "missing %zu, need %zu, free %zu", w.missing, s.wake_need,
                 free_now);
    cr_expect_eq(w.device_bytes, 0);
    cr_expect_eq(dev_free(e), free_now, "nothing of the refused wake stays mapped");
    cr_expect(ccr_model_asleep(a));
    cr_expect(dstats(e, a).asleep);
    cr_expect_eq(dstats(e, a).host_bytes, s.host_bytes, "the host copy is intact");
    float x[256] = {0}, y[10];
    cr_expect_eq(ccr_model_run(a, x, 1, y), CCR_ERR_ASLEEP);
    /* B sleeps too: room for A */
    cr_assert_eq(ccr_model_sleep(b, NULL), CCR_OK, "%s", ccr_last_error());
    cr_assert_eq(ccr_model_wake(a, &w), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(w.device_bytes, s.wake_need);
    expect_same_outputs(a, 8, want, "after a refused wake and a good one");
    /* and back: A sleeps, B wakes */
    cr_assert_eq(ccr_model_sleep(a, NULL), CCR_OK, "%s", ccr_last_error());
    cr_assert_eq(ccr_model_wake(b, NULL), CCR_OK, "%s", ccr_last_error());
    free(outputs_of(b, 8));
    ccr_model_unload(b);
    cr_assert_eq(ccr_model_wake(a, NULL), CCR_OK, "%s", ccr_last_error());
    expect_same_outputs(a, 8, want, "after B's unload");
    free(want);
    ccr_engine_destroy(e);
}

Test(runtime_sleep, a_sleeping_model_unloads_and_the_engine_releases_it) {
    ccr_engine *e = host_engine(256 * MiB, NULL);
    ccr_device_info dev;
    cr_assert_eq(ccr_engine_device_info(e, &dev), CCR_OK);
    ccr_model *a = load(e, SPEC_A);
    free(outputs_of(a, 4));
    cr_assert_eq(ccr_model_sleep(a, NULL), CCR_OK, "%s", ccr_last_error());
    ccr_unload_info u;
    cr_expect_eq(ccr_model_release(a, &u), CCR_OK, "%s", ccr_last_error());
    cr_expect(u.domain);
    cr_expect_eq(u.live_blocks, 0);
    cr_expect_eq(u.reserved_at_unload, 0, "nothing mapped while asleep");
    cr_expect_eq(live_bytes(e), 0);
    cr_expect_eq(dev_free(e), dev.free_baseline);
    cca_stats st;
    cca_get_stats(ccr_engine_allocator(e), &st);
    cr_expect_eq(st.asleep_domains, 0);
    cr_expect_eq(st.host_bytes, 0, "the host copy went with the domain");
    cca_upstream_stats us;
    cca_upstream_get_stats(ccr_engine_upstream(e), &us);
    cr_expect_eq(us.host_bytes_in_use, 0, "the host copy given back to the device");
    /* the engine's release unloads a sleeping model too */
    a = load(e, SPEC_A);
    cr_assert_eq(ccr_model_sleep(a, NULL), CCR_OK, "%s", ccr_last_error());
    ccr_release_info r;
    cr_expect_eq(ccr_engine_release(e, &r), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(r.models_unloaded, 1);
    cr_expect_eq(r.live_bytes_after, 0);
    cr_expect_eq(r.device_free_after, r.device_free_baseline);
    cca_upstream_get_stats(ccr_engine_upstream(e), &us);
    cr_expect_eq(us.host_bytes_in_use, 0);
    /* and destroy, with one asleep (ASan: nothing leaks) */
    a = load(e, SPEC_A);
    cr_assert_eq(ccr_model_sleep(a, NULL), CCR_OK, "%s", ccr_last_error());
    ccr_engine_destroy(e);
}

Test(runtime_sleep, sleep_twice_and_wake_twice_do_nothing_the_second_time) {
    ccr_engine *e = host_engine(256 * MiB, NULL);
    ccr_model *a = load(e, SPEC_A);
    float *want = outputs_of(a, 3);
    ccr_sleep_info s;
    cr_assert_eq(ccr_model_sleep(a, &s), CCR_OK, "%s", ccr_last_error());
    size_t after = dev_free(e);
    ccr_sleep_info again;
    cr_expect_eq(ccr_model_sleep(a, &again), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(again.was_asleep, 1);
    cr_expect_eq(again.bytes_copied, 0);
    cr_expect_eq(again.device_bytes, 0);
    cr_expect_eq(again.host_bytes, 0);
    cr_expect_eq(dev_free(e), after);
    cr_expect_eq(dstats(e, a).host_bytes, s.host_bytes, "the first copy kept");
    ccr_sleep_info w;
    cr_assert_eq(ccr_model_wake(a, &w), CCR_OK, "%s", ccr_last_error());
    size_t awake = dev_free(e);
    cr_expect_eq(ccr_model_wake(a, &again), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(again.was_asleep, 0);
    cr_expect_eq(again.device_bytes, 0);
    cr_expect_eq(again.bytes_copied, 0);
    cr_expect_eq(dev_free(e), awake);
    expect_same_outputs(a, 3, want, "after two sleeps and two wakes");
    free(want);
    ccr_engine_destroy(e);
}

Test(runtime_sleep, null_arguments) {
    ccr_sleep_info s;
    memset(&s, 0xff, sizeof s);
    cr_expect_eq(ccr_model_sleep(NULL, &s), CCR_ERR_INVALID_ARGUMENT);
    cr_expect(said("model is NULL"), "%s", ccr_last_error());
    cr_expect_eq(s.bytes_copied, 0, "info zeroed");
    cr_expect_eq(s.was_asleep, 0);
    memset(&s, 0xff, sizeof s);
    cr_expect_eq(ccr_model_wake(NULL, &s), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(s.device_bytes, 0, "info zeroed");
    cr_expect_eq(ccr_model_sleep(NULL, NULL), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(ccr_model_wake(NULL, NULL), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(ccr_model_asleep(NULL), 0);
}

/* No domain of its own (domains off; greedy) or classic segments: refused,
 * the model awake and running, the device's memory as it was. */
static void unsupported(ccr_engine *e, const char *words) {
    ccr_model *a = load(e, "mlp:64x512x10:relu:seed=3");
    float *want = outputs_of(a, 2);
    size_t before = dev_free(e);
    ccr_sleep_info s;
    cr_expect_eq(ccr_model_sleep(a, &s), CCR_ERR_UNSUPPORTED);
    cr_expect(said(words), "expected '%s' in: %s", words, ccr_last_error());
    cr_expect_not(ccr_model_asleep(a));
    cr_expect_eq(s.device_bytes, 0);
    cr_expect_eq(dev_free(e), before);
    cr_expect_eq(ccr_model_wake(a, NULL), CCR_OK, "an awake model: nothing to do");
    expect_same_outputs(a, 2, want, "after a refused sleep");
    free(want);
    ccr_engine_destroy(e);
}

Test(runtime_sleep, without_a_domain_of_its_own_or_pages_sleep_is_unsupported) {
    unsupported(host_engine_domains(64 * MiB, "policy:growth", 0), "no memory domain of its own");
    unsupported(host_engine(64 * MiB, "policy:greedy,greedy_bytes:32M"), "no memory domain of its own");
    unsupported(host_engine(64 * MiB, "policy:growth,expandable:0"), "classic segments");
}

/* The device refusing, through tu_faulty over the simulated device; the
 * engine writes a timeline to `path`. */
typedef struct faulty_engine {
    cca_upstream *inner, *up;
    tu_faulty f;
    ccr_engine *e;
    ccr_timeline *tl;
    char path[64];
} faulty_engine;

static void faulty_open(faulty_engine *fe, size_t capacity) {
    cca_host_options ho = {.capacity = capacity};
    cr_assert_eq(cca_upstream_host_create_with(&ho, &fe->inner), CCA_OK, "%s", cca_last_error());
    fe->up = tu_faulty_create(&fe->f, fe->inner, "fx", false);
    snprintf(fe->path, sizeof fe->path, "/tmp/ccr_sleep_timeline_XXXXXX");
    int fd = mkstemp(fe->path);
    cr_assert_geq(fd, 0);
    close(fd);
    cr_assert_eq(ccr_timeline_open(fe->path, &fe->tl), CCR_OK, "%s", ccr_last_error());
    ccr_engine_options o;
    ccr_engine_options_default(&o);
    o.device = CCR_DEVICE_HOST;
    o.upstream = fe->up;
    o.domains = 1;
    o.timeline = fe->tl;
    cr_assert_eq(ccr_engine_create(&o, &fe->e), CCR_OK, "%s", ccr_last_error());
}

/* Closes everything; `phases` gets the timeline's sleep, asleep, wake and
 * awake rows in order, as "sleep asleep wake awake" (NULL: not read). */
static void faulty_close(faulty_engine *fe, char *phases, size_t cap) {
    ccr_engine_destroy(fe->e);
    cr_assert_eq(ccr_timeline_close(fe->tl), CCR_OK, "%s", ccr_last_error());
    cca_upstream_destroy(fe->up);
    cca_upstream_destroy(fe->inner);
    FILE *f = fopen(fe->path, "r");
    cr_assert_not_null(f);
    char line[512];
    size_t n = 0;
    if (phases)
        phases[0] = '\0';
    while (phases && fgets(line, sizeof line, f)) {
        char event[16], phase[16];
        if (sscanf(line, "%*[^,],%15[^,],%15[^,],", event, phase) == 2 && !strcmp(event, "phase") &&
            (!strcmp(phase, "sleep") || !strcmp(phase, "asleep") || !strcmp(phase, "wake") || !strcmp(phase, "awake")))
            n += (size_t)snprintf(phases + n, n < cap ? cap - n : 0, "%s%s", n ? " " : "", phase);
    }
    fclose(f);
    unlink(fe->path);
}

/* A sleep refused before the unmap: nothing changed, the model runs. */
static void sleep_refused(tu_fault_kind k, ccr_status want, const char *words) {
    faulty_engine fe;
    faulty_open(&fe, 128 * MiB);
    ccr_model *a = load(fe.e, SPEC_A);
    float *y0 = outputs_of(a, 2);
    size_t before = dev_free(fe.e);
    fe.f.fail_at[k] = fe.f.calls[k] + 1;
    cr_expect_eq(ccr_model_sleep(a, NULL), want, "%s: %s", tu_fault_names[k], ccr_last_error());
    cr_expect(said("not put to sleep (nothing changed)"), "%s", ccr_last_error());
    cr_expect(said(words), "%s", ccr_last_error());
    cr_expect_not(ccr_model_asleep(a));
    cr_expect_not(dstats(fe.e, a).asleep);
    cr_expect_eq(dev_free(fe.e), before);
    tu_faulty_faults_off(&fe.f);
    expect_same_outputs(a, 2, y0, "after a refused sleep");
    free(y0);
    char phases[128];
    faulty_close(&fe, phases, sizeof phases);
    cr_expect_str_eq(phases, "sleep awake", "%s: the model's state after the refused sleep", tu_fault_names[k]);
}

Test(runtime_sleep, host_memory_short_or_a_copy_refused_at_sleep_changes_nothing) {
    sleep_refused(TU_FAULT_HOST_ALLOC, CCR_ERR_OUT_OF_MEMORY, "injected host_alloc failure");
    sleep_refused(TU_FAULT_COPY, CCR_ERR_DEVICE, "injected copy failure");
}

Test(runtime_sleep, an_unmap_refused_at_sleep_leaves_it_asleep_and_a_second_sleep_finishes) {
    faulty_engine fe;
    faulty_open(&fe, 128 * MiB);
    ccr_model *a = load(fe.e, SPEC_A);
    float *y0 = outputs_of(a, 2);
    size_t reserved = dstats(fe.e, a).reserved_bytes, before = dev_free(fe.e);
    fe.f.fail_at[TU_FAULT_UNMAP] = fe.f.calls[TU_FAULT_UNMAP] + 1;
    ccr_sleep_info s;
    cr_expect_eq(ccr_model_sleep(a, &s), CCR_ERR_DEVICE);
    cr_expect(said("is asleep, but the device refused to unmap"), "%s", ccr_last_error());
    cr_expect(ccr_model_asleep(a), "the domain IS asleep: so is the model");
    size_t left = dstats(fe.e, a).reserved_bytes;
    cr_expect_gt(left, 0);
    cr_expect_eq(dev_free(fe.e) - before, reserved - left);
    float x[256] = {0}, y[10];
    cr_expect_eq(ccr_model_run(a, x, 1, y), CCR_ERR_ASLEEP);
    tu_faulty_faults_off(&fe.f);
    cr_expect_eq(ccr_model_sleep(a, &s), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(s.was_asleep, 1);
    cr_expect_eq(s.device_bytes, left, "the second sleep unmaps what was left");
    cr_expect_eq(dev_free(fe.e) - before, reserved);
    cr_assert_eq(ccr_model_wake(a, NULL), CCR_OK, "%s", ccr_last_error());
    expect_same_outputs(a, 2, y0, "after a sleep in two calls");
    free(y0);
    char phases[128];
    faulty_close(&fe, phases, sizeof phases);
    cr_expect_str_eq(phases, "sleep asleep sleep asleep wake awake", "asleep after the refused unmap");
}

/* A wake refused after the room check: a map (another tenant took the
 * memory) or a copy back; the model stays asleep, nothing left mapped. */
static void wake_refused(tu_fault_kind k, ccr_status want) {
    faulty_engine fe;
    faulty_open(&fe, 128 * MiB);
    ccr_model *a = load(fe.e, SPEC_A);
    float *y0 = outputs_of(a, 2);
    ccr_sleep_info s;
    cr_assert_eq(ccr_model_sleep(a, &s), CCR_OK, "%s", ccr_last_error());
    size_t asleep = dev_free(fe.e);
    fe.f.fail_at[k] = fe.f.calls[k] + 1;
    ccr_sleep_info w;
    cr_expect_eq(ccr_model_wake(a, &w), want, "%s: %s", tu_fault_names[k], ccr_last_error());
    cr_expect(said("stays asleep"), "%s", ccr_last_error());
    cr_expect(ccr_model_asleep(a));
    cr_expect_eq(dev_free(fe.e), asleep, "%s: nothing of the refused wake stays mapped", tu_fault_names[k]);
    cr_expect_eq(dstats(fe.e, a).host_bytes, s.host_bytes, "the host copy intact");
    tu_faulty_faults_off(&fe.f);
    cr_assert_eq(ccr_model_wake(a, NULL), CCR_OK, "%s", ccr_last_error());
    expect_same_outputs(a, 2, y0, "after a refused wake");
    free(y0);
    char phases[128];
    faulty_close(&fe, phases, sizeof phases);
    cr_expect_str_eq(phases, "sleep asleep wake asleep wake awake", "%s: the model's state after the refused wake",
                     tu_fault_names[k]);
}

Test(runtime_sleep, a_map_or_a_copy_refused_at_wake_leaves_it_asleep) {
    wake_refused(TU_FAULT_MAP, CCR_ERR_OUT_OF_MEMORY);
    wake_refused(TU_FAULT_COPY, CCR_ERR_DEVICE);
}

/* A block of the caller's in the model's domain is copied and restored too. */
Test(runtime_sleep, a_callers_block_in_the_models_domain_sleeps_with_it) {
    ccr_engine *e = host_engine(256 * MiB, NULL);
    ccr_model *a = load(e, SPEC_A);
    cca_allocator *al = ccr_engine_allocator(e);
    unsigned char *p = NULL;
    cr_assert_eq(cca_alloc_in(al, ccr_model_domain(a), 5000, NULL, (void **)&p), CCA_OK);
    for (size_t i = 0; i < 5000; i++)
        p[i] = (unsigned char)(i * 31);
    ccr_sleep_info s;
    cr_assert_eq(ccr_model_sleep(a, &s), CCR_OK, "%s", ccr_last_error());
    cr_expect_geq(s.bytes_copied, ccr_arch_param_bytes(ccr_model_arch(a)) + 5000);
    cr_assert_eq(ccr_model_wake(a, NULL), CCR_OK, "%s", ccr_last_error());
    for (size_t i = 0; i < 5000; i++)
        cr_assert_eq(p[i], (unsigned char)(i * 31), "byte %zu", i);
    cr_expect_eq(cca_free(al, p), CCA_OK);
    ccr_engine_destroy(e);
}

/* ---- every device call of a sleep-and-wake life refused in turn ----------- */

/* The life: A and B loaded; A run, put to sleep, B run, A woken and run, A
 * asleep again and unloaded so, B asleep, woken, run and unloaded, the
 * engine released. Small models: 2 MiB pages hold each whole. */
#define LIFE_A "mlp:32x200x10:relu:softmax:seed=5"
#define LIFE_B "mlp:48x300x12:gelu:softmax:seed=6"
enum life_kind { L_LOAD, L_RUN, L_SLEEP, L_WAKE, L_UNLOAD, L_RELEASE };
static const char *const life_names[] = {"load", "run", "sleep", "wake", "unload", "release"};

typedef struct life {
    ccr_engine *e;
    ccr_model *a, *b;
    float ya[2 * 10], yb[2 * 12];
    int failed;          /* the step that failed, 0: none */
    enum life_kind kind; /* its kind */
    ccr_status st;
    char why[512];
    int kept_message; /* a step that succeeded but left a message (0: none) */
    char left[512];   /* ... that message */
} life;

/* Each step's call is made TU_MARKED (alloc_test_util.h): one that succeeds,
 * a refusal met inside and recovered from included, leaves the mark. */
static int life_step(life *l, int n, enum life_kind k, ccr_status st) {
    if (st == CCR_OK && strcmp(ccr_last_error(), TU_MARK) != 0 && !l->kept_message) {
        l->kept_message = n;
        snprintf(l->left, sizeof l->left, "%s", ccr_last_error());
    }
    if (st == CCR_OK)
        return 1;
    l->failed = n;
    l->kind = k;
    l->st = st;
    snprintf(l->why, sizeof l->why, "%s", ccr_last_error());
    return 0;
}

static ccr_status life_run(ccr_model *m, float *y) {
    const ccr_arch *a = ccr_model_arch(m);
    float x[2 * 48];
    for (size_t i = 0; i < 2 * a->layers[0].in; i++)
        x[i] = (float)((i * 7919) % 1009) / 1009.0f;
    return ccr_model_run(m, x, 2, y);
}

static int life_unload(life *l, int n, ccr_model **m) {
    ccr_status st = TU_MARKED(ccr_model_release(*m, NULL));
    *m = NULL; /* freed whatever the status */
    return life_step(l, n, L_UNLOAD, st);
}

static void live_sleep_life(life *l) {
    (void)(life_step(l, 1, L_LOAD, TU_MARKED(ccr_model_load_spec(l->e, LIFE_A, &l->a))) &&
           life_step(l, 2, L_LOAD, TU_MARKED(ccr_model_load_spec(l->e, LIFE_B, &l->b))) &&
           life_step(l, 3, L_RUN, TU_MARKED(life_run(l->a, l->ya))) &&
           life_step(l, 4, L_SLEEP, TU_MARKED(ccr_model_sleep(l->a, NULL))) &&
           life_step(l, 5, L_RUN, TU_MARKED(life_run(l->b, l->yb))) &&
           life_step(l, 6, L_WAKE, TU_MARKED(ccr_model_wake(l->a, NULL))) &&
           life_step(l, 7, L_RUN, TU_MARKED(life_run(l->a, l->ya))) &&
           life_step(l, 8, L_SLEEP, TU_MARKED(ccr_model_sleep(l->a, NULL))) && life_unload(l, 9, &l->a) &&
           life_step(l, 10, L_SLEEP, TU_MARKED(ccr_model_sleep(l->b, NULL))) &&
           life_step(l, 11, L_WAKE, TU_MARKED(ccr_model_wake(l->b, NULL))) &&
           life_step(l, 12, L_RUN, TU_MARKED(life_run(l->b, l->yb))) && life_unload(l, 13, &l->b) &&
           life_step(l, 14, L_RELEASE, TU_MARKED(ccr_engine_release(l->e, NULL))));
}

/* The statuses ccr.h documents for a step refused by the device. */
static int documented(enum life_kind k, ccr_status st) {
    switch (k) {
    case L_LOAD:
    case L_RUN: return st == CCR_ERR_OUT_OF_MEMORY;
    case L_SLEEP:
    case L_WAKE: return st == CCR_ERR_OUT_OF_MEMORY || st == CCR_ERR_DEVICE;
    case L_UNLOAD:
    case L_RELEASE: return st == CCR_ERR_DEVICE;
    }
    return 0;
}

/* The device of every life: set per sweep. */
static cca_host_options life_device;

/* One life with call `n` of kind k refused (from then on when sticky);
 * returns the calls of each kind the life made (n 0: no fault). */
static void one_sleep_life(tu_fault_kind k, uint64_t n, bool sticky, const float *ref_a, const float *ref_b,
                           uint64_t *calls, size_t *lives) {
    cca_upstream *inner = NULL;
    cr_assert_eq(cca_upstream_host_create_with(&life_device, &inner), CCA_OK, "%s", cca_last_error());
    tu_faulty f;
    cca_upstream *up = tu_faulty_create(&f, inner, "fx", false);
    life l;
    memset(&l, 0, sizeof l);
    l.e = test_engine(up, 0, "log_oom:0", 1, 0, NULL);
    f.fail_at[k] = n;
    f.sticky[k] = sticky;
    live_sleep_life(&l);
    if (calls)
        memcpy(calls, f.calls, sizeof f.calls);
    tu_faulty_faults_off(&f);
    char what[96];
    snprintf(what, sizeof what, "%s call %llu%s", tu_fault_names[k], (unsigned long long)n, sticky ? " on" : "");
    cr_expect_eq(l.kept_message, 0, "%s: step %d succeeded but left the message '%s'", what, l.kept_message, l.left);
    if (l.failed) {
        cr_expect(documented(l.kind, l.st), "%s: %s (step %d) failed with %s: %s", what, life_names[l.kind], l.failed,
                  ccr_status_string(l.st), l.why);
        cr_expect_neq(l.why[0], '\0', "%s: step %d failed without a message", what, l.failed);
        if (l.kind == L_WAKE) /* after a refused wake the model is asleep */
            cr_expect(ccr_model_asleep(l.failed == 6 ? l.a : l.b), "%s: step %d", what, l.failed);
        if (l.kind == L_SLEEP && l.failed != 8 && ccr_model_asleep(l.failed == 4 ? l.a : l.b))
            cr_expect_eq(l.st, CCR_ERR_DEVICE, "%s: asleep after a refused sleep: only a refused unmap", what);
    } else {
        cr_expect_eq(memcmp(l.ya, ref_a, sizeof l.ya), 0, "%s: A's outputs", what);
        cr_expect_eq(memcmp(l.yb, ref_b, sizeof l.yb), 0, "%s: B's outputs", what);
    }
    /* faults off: every model still loaded wakes and runs to the same bytes */
    ccr_model *ms[2] = {l.a, l.b};
    const float *refs[2] = {ref_a, ref_b};
    for (int i = 0; i < 2; i++) {
        if (!ms[i] || l.failed == 14)
            continue;
        cr_expect_eq(ccr_model_wake(ms[i], NULL), CCR_OK, "%s: %s", what, ccr_last_error());
        float y[2 * 12];
        cr_expect_eq(life_run(ms[i], y), CCR_OK, "%s: %s", what, ccr_last_error());
        cr_expect_eq(memcmp(y, refs[i],
                            2 * ccr_model_arch(ms[i])->layers[ccr_model_arch(ms[i])->n_layers - 1].out * sizeof(float)),
                     0, "%s: model %d's outputs after recovery", what, i);
    }
    ccr_release_info r;
    cr_expect_eq(ccr_engine_release(l.e, &r), CCR_OK, "%s: release after step %d: %s", what, l.failed,
                 ccr_last_error());
    cr_expect_eq(r.live_bytes_after, 0, "%s", what);
    cr_expect_eq(reserved_bytes(l.e), 0, "%s: step %d: %zu bytes still reserved", what, l.failed, reserved_bytes(l.e));
    cr_expect_eq(r.device_free_after, r.device_free_baseline, "%s: step %d", what, l.failed);
    ccr_engine_destroy(l.e);
    if (k == TU_FAULT_HOST_FREE) { /* host memory the device refused back stays with it (ccalloc.h) */
        cca_upstream_stats us;
        cr_assert_eq(cca_upstream_get_stats(inner, &us), CCA_OK);
        cr_expect_eq(us.bytes_in_use, 0, "%s: %zu device bytes still in use", what, us.bytes_in_use);
        cca_upstream_destroy(up);
        cca_upstream_destroy(inner);
    } else {
        tu_faulty_destroy_clean(up, inner);
    }
    (*lives)++;
}

Test(runtime_sleep, every_device_call_of_a_sleep_and_wake_life_fails_in_turn, .timeout = 120) {
    float ref_a[2 * 10], ref_b[2 * 12];
    uint64_t calls[TU_FAULT_KINDS];
    {
        ccr_engine *e = host_engine(64 * MiB, NULL);
        ccr_model *a = load(e, LIFE_A), *b = load(e, LIFE_B);
        cr_assert_eq(life_run(a, ref_a), CCR_OK);
        cr_assert_eq(life_run(b, ref_b), CCR_OK);
        ccr_engine_destroy(e);
    }
    /* maps backed whole on 2 MiB pages (the default); a physical
     * allocation per 64 KiB page: more maps, unmaps and copies */
    const cca_host_options devices[] = {{.capacity = 64 * MiB},
                                        {.capacity = 64 * MiB, .vm_granularity = 64 << 10, .vm_backing = CCA_VM_PAGES}};
    size_t lives = 0;
    for (size_t d = 0; d < sizeof devices / sizeof devices[0]; d++) {
        life_device = devices[d];
        one_sleep_life(TU_FAULT_ALLOC, 0, false, ref_a, ref_b, calls, &lives);
        for (int k = 0; k < TU_FAULT_KINDS; k++) {
            if (k == TU_FAULT_STREAM_SYNC)
                continue;
            cr_log_info("device %zu: %s: %llu calls", d, tu_fault_names[k], (unsigned long long)calls[k]);
            for (uint64_t n = 1; n <= calls[k] + 1; n++)
                for (int sticky = 0; sticky < 2; sticky++)
                    one_sleep_life((tu_fault_kind)k, n, sticky, ref_a, ref_b, NULL, &lives);
        }
    }
    cr_log_info("%zu lives", lives);
}

/* The device refuses its next call of kind k, and cannot say its free
 * memory from now on; answer_again: every call answered again. */
static void refuse_next(tu_faulty *f, tu_fault_kind k) {
    f->fail_mem_info = true;
    f->fail_at[k] = f->calls[k] + 1;
}
static void answer_again(tu_faulty *f) {
    tu_faulty_faults_off(f);
    f->fail_mem_info = false;
}

/* A device that cannot say its free memory as well (every timeline row
 * and every figure read after the refusal fails): the refusal's message
 * still names what the device refused, for a sleep, a wake, a run and an
 * unload alike. */
Test(runtime_sleep, a_refusal_keeps_its_reason_when_the_free_memory_cannot_be_read) {
    faulty_engine fe;
    faulty_open(&fe, 128 * MiB);
    ccr_model *a = load(fe.e, SPEC_A);
    /* a batch whose activations need pages of their own: 2 x 4 MiB */
    float *x = calloc(512 * 256, sizeof(float)), *y = malloc(512 * 10 * sizeof(float));
    refuse_next(&fe.f, TU_FAULT_MAP);
    fe.f.sticky[TU_FAULT_MAP] = true;
    cr_expect_eq(ccr_model_run(a, x, 512, y), CCR_ERR_OUT_OF_MEMORY);
    cr_expect(said("out of device memory"), "%s", ccr_last_error());
    free(x);
    free(y);
    answer_again(&fe.f);
    ccr_model *b = load(fe.e, "mlp:64x512x10:relu:seed=3");
    refuse_next(&fe.f, TU_FAULT_UNMAP);
    cr_expect_eq(ccr_model_release(b, NULL), CCR_ERR_DEVICE);
    cr_expect(said("injected vm_unmap failure"), "%s", ccr_last_error());
    answer_again(&fe.f);
    cr_assert_eq(ccr_engine_release(fe.e, NULL), CCR_OK, "%s", ccr_last_error());
    a = load(fe.e, SPEC_A);
    refuse_next(&fe.f, TU_FAULT_COPY);
    cr_expect_eq(ccr_model_sleep(a, NULL), CCR_ERR_DEVICE);
    cr_expect(said("injected copy failure"), "%s", ccr_last_error());
    answer_again(&fe.f);
    cr_assert_eq(ccr_model_sleep(a, NULL), CCR_OK, "%s", ccr_last_error());
    refuse_next(&fe.f, TU_FAULT_COPY);
    cr_expect_eq(ccr_model_wake(a, NULL), CCR_ERR_DEVICE);
    cr_expect(said("injected copy failure"), "%s", ccr_last_error());
    refuse_next(&fe.f, TU_FAULT_MAP);
    cr_expect_eq(ccr_model_wake(a, NULL), CCR_ERR_OUT_OF_MEMORY);
    cr_expect(said("injected vm_map failure"), "%s", ccr_last_error());
    answer_again(&fe.f);
    cr_expect_eq(ccr_model_wake(a, NULL), CCR_OK, "%s", ccr_last_error());
    faulty_close(&fe, NULL, 0);
}

/* A device that cannot say its free memory at all after the engine began:
 * a model's whole life works (the figures read 0), only the engine's
 * release says it could not read the device, and once the device answers
 * again a release finds it back at its baseline. */
Test(runtime_sleep, a_device_without_free_figures_runs_a_whole_life) {
    faulty_engine fe;
    faulty_open(&fe, 128 * MiB);
    fe.f.fail_mem_info = true;
    ccr_model *a = load(fe.e, SPEC_A);
    float *y0 = outputs_of(a, 2);
    ccr_sleep_info s;
    cr_expect_eq(ccr_model_sleep(a, &s), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(s.device_free_before, 0);
    cr_expect_eq(s.device_free_after, 0);
    cr_expect_eq(s.device_free_read, 0, "the figures are said unread");
    cr_expect_eq(ccr_model_wake(a, &s), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(s.device_free_read, 0);
    expect_same_outputs(a, 2, y0, "after the wake");
    free(y0);
    ccr_device_info d;
    cr_expect_eq(ccr_engine_device_info(fe.e, &d), CCR_ERR_DEVICE);
    cr_expect_str_eq(d.name, "host", "the name even so");
    cr_expect_eq(d.total_bytes, 128 * MiB, "and the total, read at the engine's creation");
    cr_expect_eq(d.free_baseline, 128 * MiB);
    cr_expect_eq(ccr_model_release(a, NULL), CCR_OK, "%s", ccr_last_error());
    ccr_release_info r;
    cr_expect_eq(ccr_engine_release(fe.e, &r), CCR_ERR_DEVICE);
    cr_expect(said("cannot read the device's free memory before"), "%s", ccr_last_error());
    cr_expect_eq(r.live_bytes_after, 0);
    fe.f.fail_mem_info = false;
    cr_expect_eq(ccr_engine_release(fe.e, &r), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(r.device_free_after, r.device_free_baseline);
    faulty_close(&fe, NULL, 0);
}

/* What ccr.h says a sleep and a wake cost in mem_info: two each of their
 * own (the wake's cca_domain_wake asks once more), and with a timeline one
 * per row on top: the two phase rows each call writes. */
Test(runtime_sleep, a_sleep_and_a_wake_read_the_free_memory_twice) {
    for (int with_timeline = 0; with_timeline < 2; with_timeline++) {
        faulty_engine fe;
        faulty_open(&fe, 128 * MiB);
        if (!with_timeline)
            fe.e->timeline = NULL; /* the same engine, its rows off */
        ccr_model *a = load(fe.e, SPEC_A);
        free(outputs_of(a, 2));
        uint64_t c0 = fe.f.mem_info_calls;
        cr_assert_eq(ccr_model_sleep(a, NULL), CCR_OK, "%s", ccr_last_error());
        uint64_t c1 = fe.f.mem_info_calls;
        cr_assert_eq(ccr_model_wake(a, NULL), CCR_OK, "%s", ccr_last_error());
        uint64_t c2 = fe.f.mem_info_calls;
        uint64_t rows = with_timeline ? 2 : 0;
        cr_expect_eq(c1 - c0, 2 + rows, "sleep, timeline %d: %llu mem_info", with_timeline,
                     (unsigned long long)(c1 - c0));
        cr_expect_eq(c2 - c1, 2 + 1 + rows, "wake, timeline %d: %llu mem_info", with_timeline,
                     (unsigned long long)(c2 - c1));
        fe.e->timeline = fe.tl;
        faulty_close(&fe, NULL, 0);
    }
}

/* A timeline row whose device count the device refused leaves device_free
 * empty, never 0 as if the device were full (docs/engine.md, "The timeline
 * CSV"); the rows read before and after it have the count. */
Test(runtime_sleep, a_timeline_row_leaves_an_unread_free_count_empty) {
    faulty_engine fe;
    faulty_open(&fe, 128 * MiB);
    fe.f.fail_mem_info = true;
    ccr_model *a = load(fe.e, SPEC_A);
    fe.f.fail_mem_info = false;
    ccr_model_unload(a);
    ccr_engine_destroy(fe.e);
    cr_assert_eq(ccr_timeline_close(fe.tl), CCR_OK, "%s", ccr_last_error());
    cca_upstream_destroy(fe.up);
    cca_upstream_destroy(fe.inner);
    FILE *f = fopen(fe.path, "r");
    cr_assert_not_null(f);
    char line[512];
    size_t unread = 0, read = 0;
    cr_assert_not_null(fgets(line, sizeof line, f)); /* the header */
    while (fgets(line, sizeof line, f)) {
        char phase[16], free_text[32] = "";
        /* t_ms,event,phase,model,tag,bytes,allocated,reserved,device_free,fragmentation */
        cr_assert_eq(sscanf(line, "%*[^,],%*[^,],%15[^,],", phase), 1, "%s", line);
        const char *c = line;
        for (int k = 0; k < 8; k++)
            c = strchr(c, ',') + 1;
        snprintf(free_text, sizeof free_text, "%.*s", (int)(strchr(c, ',') - c), c);
        int in_load = !strcmp(phase, "load") || !strcmp(phase, "loaded"); /* mem_info refused */
        if (in_load)
            cr_expect_str_eq(free_text, "", "%s", line);
        else
            cr_expect(free_text[0] && strcmp(free_text, "0"), "%s", line);
        unread += in_load;
        read += !in_load;
    }
    fclose(f);
    unlink(fe.path);
    cr_expect_gt(unread, 2, "the load's rows");
    cr_expect_gt(read, 2, "the unload's rows");
}
