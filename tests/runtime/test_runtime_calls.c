/*
 * test_runtime_calls.c — the engine's public calls (ccr.h) given hostile
 * arguments and called in the wrong order, on a borrowed simulated device
 * whose own figures (cca_upstream_get_stats) must come back to zero:
 *
 *   - every entry point with NULL handles and outputs, zero and huge sizes
 *     and batches (a negative number cast to size_t): the documented status,
 *     nothing allocated;
 *   - wrong orders: a run with the handle of a failed load, release twice,
 *     reconfigure with a model loaded or asleep, or a block live in the
 *     allocator (the caller's own, or a leak), destroy with models loaded,
 *     asleep, or leaking a caller's block: the documented status, and after
 *     destroy the device holds nothing (bytes, maps, host staging).
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "test_runtime_util.h"

#define MiB ((size_t)1 << 20)
#define SPEC "mlp:64x256x10:relu:softmax:seed=3"

static cca_upstream *device(void) {
    cca_upstream *up = NULL;
    cr_assert_eq(ccr_device_open(CCR_DEVICE_HOST, 0, 64 * MiB, &up, NULL), CCR_OK, "%s", ccr_last_error());
    return up;
}

/* The device holds nothing of ours: every byte, map and host copy back. */
static void expect_empty(cca_upstream *up, const char *when) {
    cca_upstream_stats s;
    cr_assert_eq(cca_upstream_get_stats(up, &s), CCA_OK);
    cr_expect_eq(s.bytes_in_use, 0, "%s: %zu bytes in use", when, s.bytes_in_use);
    cr_expect_eq(s.allocations, 0, "%s: %zu allocations", when, s.allocations);
    cr_expect_eq(s.vm_reserved_bytes, 0, "%s: %zu bytes of address space", when, s.vm_reserved_bytes);
    cr_expect_eq(s.vm_mapped_bytes, 0, "%s: %zu bytes mapped", when, s.vm_mapped_bytes);
    cr_expect_eq(s.host_bytes_in_use, 0, "%s: %zu host bytes", when, s.host_bytes_in_use);
}

static ccr_engine *engine(cca_upstream *up) {
    return test_engine(up, 0, NULL, 1, 0, NULL);
}

static ccr_model *load(ccr_engine *e) {
    ccr_model *m = NULL;
    cr_assert_eq(ccr_model_load_spec(e, SPEC, &m), CCR_OK, "%s", ccr_last_error());
    return m;
}

static int said(const char *sub) {
    return strstr(ccr_last_error(), sub) != NULL;
}

Test(runtime_calls, null_handles_and_outputs_are_refused) {
    cca_upstream *up = device();
    ccr_engine *e = engine(up);
    ccr_model *m = load(e);
    float x[64] = {0}, y[10];
    ccr_model *out;
    cr_expect_eq(ccr_engine_create(NULL, NULL), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(ccr_engine_device_info(NULL, NULL), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(ccr_engine_device_info(e, NULL), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(ccr_engine_reconfigure(NULL, NULL), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(ccr_engine_release(NULL, NULL), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(ccr_engine_trace_status(NULL), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_null(ccr_engine_allocator(NULL));
    cr_expect_null(ccr_engine_upstream(NULL));
    ccr_engine_mark(NULL, "x", "y");
    ccr_engine_mark(e, NULL, NULL);
    ccr_engine_destroy(NULL);
    ccr_engine_options_default(NULL);

    /* every refused load leaves *out NULL, whichever argument was wrong */
#define EXPECT_REFUSED_LOAD(call)                                                                                      \
    do {                                                                                                               \
        out = (ccr_model *)0x1;                                                                                        \
        cr_expect_eq(call, CCR_ERR_INVALID_ARGUMENT, "%s", #call);                                                     \
        cr_expect_null(out, "%s: *out not NULL", #call);                                                               \
    } while (0)
    EXPECT_REFUSED_LOAD(ccr_model_load_spec(NULL, SPEC, &out));
    EXPECT_REFUSED_LOAD(ccr_model_load_spec(e, NULL, &out));
    EXPECT_REFUSED_LOAD(ccr_model_load_file(NULL, "x", &out));
    EXPECT_REFUSED_LOAD(ccr_model_load_file(e, NULL, &out));
    EXPECT_REFUSED_LOAD(ccr_model_load_file(e, "", &out));
    EXPECT_REFUSED_LOAD(ccr_model_load_stream(NULL, stdin, "s", &out));
    EXPECT_REFUSED_LOAD(ccr_model_load_stream(e, NULL, "s", &out));
    EXPECT_REFUSED_LOAD(ccr_model_load(e, NULL, &out));
    EXPECT_REFUSED_LOAD(ccr_model_load(NULL, SPEC, &out));
    EXPECT_REFUSED_LOAD(ccr_model_load(NULL, "f.safetensors", &out));
    cr_expect_eq(ccr_model_load_spec(e, SPEC, NULL), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(ccr_model_load_file(e, "x", NULL), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(ccr_model_load_stream(e, stdin, "s", NULL), CCR_ERR_INVALID_ARGUMENT);

    cr_expect_eq(ccr_model_run(NULL, x, 1, y), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(ccr_model_run(m, NULL, 1, y), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(ccr_model_run(m, x, 1, NULL), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(ccr_model_run(m, x, 0, y), CCR_ERR_INVALID_ARGUMENT);
    size_t need = 7;
    cr_expect_eq(ccr_model_check_batch(NULL, 1, &need), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(need, 0);
    cr_expect_eq(ccr_model_check_batch(m, 0, NULL), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(ccr_model_save(NULL, "x"), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(ccr_model_save(m, NULL), CCR_ERR_INVALID_ARGUMENT);
    ccr_unload_info ui;
    memset(&ui, 0xff, sizeof ui);
    cr_expect_eq(ccr_model_release(NULL, &ui), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(ui.bytes_released, 0, "info zeroed");
    ccr_model_unload(NULL);
    const char *name = NULL;
    size_t count = 0;
    cr_expect_eq(ccr_model_nonfinite_tensor(NULL, 0, &name, &count), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(ccr_model_nonfinite_tensor(m, 0, NULL, &count), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(ccr_model_nonfinite_tensor(m, 0, &name, NULL), CCR_ERR_INVALID_ARGUMENT);
    /* an index past the last, SIZE_MAX too: the message names it, never i + 1 wrapped to 0 */
    const size_t past[] = {0, 1, SIZE_MAX};
    for (size_t i = 0; i < sizeof past / sizeof past[0]; i++) {
        char want[96];
        snprintf(want, sizeof want, "has 0 tensors with non-finite weights: index %zu is past the last", past[i]);
        cr_expect_eq(ccr_model_nonfinite_tensor(m, past[i], &name, &count), CCR_ERR_INVALID_ARGUMENT);
        cr_expect(said(want), "index %zu: %s", past[i], ccr_last_error());
    }
    cr_expect_null(ccr_model_arch(NULL));
    cr_expect_str_eq(ccr_model_name(NULL), "");
    cr_expect_eq(ccr_model_device_bytes(NULL), 0);
    cr_expect_null(ccr_model_domain(NULL));
    cr_expect_eq(ccr_model_footprint(NULL), 0);
    cr_expect_eq(ccr_model_nonfinite_weights(NULL), 0);
    cr_expect_eq(ccr_model_asleep(NULL), 0);

    ccr_arch a;
    cr_expect_eq(ccr_arch_parse(NULL, &a), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(ccr_arch_parse(SPEC, NULL), CCR_ERR_INVALID_ARGUMENT);
    char buf[8];
    cr_expect_eq(ccr_arch_format(NULL, buf, sizeof buf), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(ccr_arch_format(ccr_model_arch(m), NULL, 0), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(ccr_arch_format(ccr_model_arch(m), buf, 0), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(ccr_arch_param_bytes(NULL), 0);
    ccr_device_kind k;
    cr_expect_eq(ccr_device_parse(NULL, &k), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(ccr_device_open(CCR_DEVICE_HOST, 0, MiB, NULL, NULL), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(ccr_device_open_with(NULL, NULL, NULL), CCR_ERR_INVALID_ARGUMENT);
    ccr_timeline *tl = (ccr_timeline *)0x1;
    cr_expect_eq(ccr_timeline_open(NULL, &tl), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_null(tl, "*out NULL after a refused open");
    tl = (ccr_timeline *)0x1;
    cr_expect_eq(ccr_timeline_open("/nonexistent-dir/t.csv", &tl), CCR_ERR_IO);
    cr_expect_null(tl, "*out NULL after a failed open");
    cr_expect_eq(ccr_timeline_open("/tmp/x.csv", NULL), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(ccr_timeline_close(NULL), CCR_OK);
    size_t sz;
    cr_expect_eq(ccr_parse_size(NULL, &sz), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(ccr_parse_size("1M", NULL), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(ccr_fputs_escaped(NULL, stderr), 0);

    cr_expect_eq(live_bytes(e), ccr_model_device_bytes(m), "nothing but the weights allocated");
    ccr_engine_destroy(e);
    expect_empty(up, "after destroy");
    cca_upstream_destroy(up);
}

/* Sizes and batches at their limits, negative numbers cast to size_t
 * among them: refused before any byte moves. */
Test(runtime_calls, huge_sizes_and_batches_are_refused_before_anything_moves) {
    cca_upstream *up = device();
    ccr_engine *e = engine(up);
    ccr_model *m = load(e);
    size_t held = live_bytes(e), reserved = reserved_bytes(e);
    float x[64] = {0}, y[10];
    const size_t batches[] = {SIZE_MAX, (size_t)-1 / 2, (size_t)INT_MAX + 1, (size_t)1 << 40, (size_t)-8};
    for (size_t i = 0; i < sizeof batches / sizeof batches[0]; i++) {
        size_t need = 0;
        cr_expect_eq(ccr_model_check_batch(m, batches[i], &need), CCR_ERR_OUT_OF_MEMORY, "batch %zu", batches[i]);
        cr_expect_gt(need, 64 * MiB, "batch %zu: need %zu", batches[i], need);
        cr_expect_eq(ccr_model_run(m, x, batches[i], y), CCR_ERR_OUT_OF_MEMORY, "batch %zu", batches[i]);
        cr_expect_eq(live_bytes(e), held);
        cr_expect_eq(reserved_bytes(e), reserved);
    }
    ccr_engine_options o;
    ccr_engine_options_default(&o);
    o.device = CCR_DEVICE_HOST;
    ccr_engine *bad = (ccr_engine *)0x1;
    const size_t caps[] = {0, 1, 4095, SIZE_MAX, SIZE_MAX - 4095, (size_t)-4096};
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        o.host_capacity = caps[i];
        cr_expect_eq(ccr_engine_create(&o, &bad), CCR_ERR_INVALID_ARGUMENT, "capacity %zu: %s", caps[i],
                     ccr_last_error());
        cr_expect_null(bad);
    }
    o.host_capacity = 64 * MiB;
    const size_t pages[] = {1, 4097, 3 << 12, SIZE_MAX, SIZE_MAX - 4095};
    for (size_t i = 0; i < sizeof pages / sizeof pages[0]; i++) {
        o.vm_granularity = pages[i];
        ccr_status st = ccr_engine_create(&o, &bad);
        cr_expect_eq(st, CCR_ERR_INVALID_ARGUMENT, "page %zu: %s: %s", pages[i], ccr_status_string(st),
                     ccr_last_error());
        if (st == CCR_OK)
            ccr_engine_destroy(bad);
    }
    o.vm_granularity = 0;
    /* a device kind outside the enum: refused, never taken for AUTO */
    const int kinds[] = {-1, 3, 7, INT_MAX, INT_MIN};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        o.device = (ccr_device_kind)kinds[i];
        cr_expect_eq(ccr_engine_create(&o, &bad), CCR_ERR_INVALID_ARGUMENT, "kind %d: %s", kinds[i], ccr_last_error());
        cr_expect_null(bad);
        ccr_device_options d = {(ccr_device_kind)kinds[i], 0, 64 * MiB, 0, 0};
        cca_upstream *dev = (cca_upstream *)1;
        cr_expect_eq(ccr_device_open_with(&d, &dev, NULL), CCR_ERR_INVALID_ARGUMENT, "kind %d", kinds[i]);
        cr_expect_null(dev);
        char want[64];
        snprintf(want, sizeof want, "device kind %d is none of", kinds[i]);
        cr_expect(said(want), "kind %d: %s", kinds[i], ccr_last_error());
    }
    o.device = CCR_DEVICE_HOST;
    const int backings[] = {-1, 2, INT_MAX, INT_MIN};
    for (size_t i = 0; i < sizeof backings / sizeof backings[0]; i++) {
        o.vm_backing = backings[i];
        cr_expect_eq(ccr_engine_create(&o, &bad), CCR_ERR_INVALID_ARGUMENT, "backing %d", backings[i]);
    }
    char buf[4];
    cr_expect_eq(ccr_arch_format(ccr_model_arch(m), buf, sizeof buf), CCR_ERR_INVALID_ARGUMENT);
    ccr_engine_destroy(e);
    expect_empty(up, "after destroy");
    cca_upstream_destroy(up);
}

/* A caller's architecture with a layer count past CCR_MAX_LAYERS is
 * refused, never read past the array; one whose bytes overflow says so. */
Test(runtime_calls, an_arch_of_too_many_layers_is_not_read_past_its_array) {
    ccr_arch a;
    cr_assert_eq(ccr_arch_parse(SPEC, &a), CCR_OK);
    a.n_layers = CCR_MAX_LAYERS + 1;
    char buf[4096];
    cr_expect_eq(ccr_arch_format(&a, buf, sizeof buf), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(ccr_arch_param_bytes(&a), 0);
    a.n_layers = SIZE_MAX;
    cr_expect_eq(ccr_arch_format(&a, buf, sizeof buf), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(ccr_arch_param_bytes(&a), 0);
    /* layers no spec can give have no spec string: an activation outside
     * the enum, a zero width, a layer whose input is not the last output */
    ccr_arch ok;
    cr_assert_eq(ccr_arch_parse("mlp:8x4x2:relu", &ok), CCR_OK);
    const struct {
        size_t layer, in, out;
        int act;
        const char *why;
    } bad[] = {
        {0, 8, 4, 3, "activation 3"},     {1, 4, 2, -1, "activation -1"}, {0, 0, 4, 0, "layer 0 is 0 x 4"},
        {1, 4, 0, 0, "layer 1 is 4 x 0"}, {1, 5, 2, 0, "input 5"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        a = ok;
        a.layers[bad[i].layer].in = bad[i].in;
        a.layers[bad[i].layer].out = bad[i].out;
        a.layers[bad[i].layer].act = (cck_activation)bad[i].act;
        if (bad[i].layer == 0 && bad[i].out != 4)
            a.layers[1].in = bad[i].out;
        cr_expect_eq(ccr_arch_format(&a, buf, sizeof buf), CCR_ERR_INVALID_ARGUMENT, "case %zu: %s", i, buf);
        cr_expect(said(bad[i].why), "case %zu: %s", i, ccr_last_error());
    }
    cr_expect_eq(ccr_arch_format(&ok, buf, sizeof buf), CCR_OK, "%s", ccr_last_error());
    cr_expect_str_eq(buf, "mlp:8x4x2:relu:nosoftmax");
    /* dimensions no spec can have: the sum saturates, never wraps */
    memset(&a, 0, sizeof a);
    a.n_layers = 2;
    a.layers[0] = (ccr_layer_desc){(size_t)1 << 40, (size_t)1 << 40, CCK_ACT_NONE, 1};
    a.layers[1] = (ccr_layer_desc){(size_t)1 << 40, 1, CCK_ACT_NONE, 1};
    cr_expect_eq(ccr_arch_param_bytes(&a), SIZE_MAX);
    a.layers[0] = (ccr_layer_desc){SIZE_MAX / 4, 1, CCK_ACT_NONE, 0};
    a.layers[1] = (ccr_layer_desc){SIZE_MAX / 4, 1, CCK_ACT_NONE, 0};
    cr_expect_eq(ccr_arch_param_bytes(&a), SIZE_MAX, "two tensors that fit alone, not together");
}

Test(runtime_calls, wrong_orders_keep_the_documented_status_and_figures) {
    cca_upstream *up = device();
    ccr_engine *e = engine(up);
    /* a failed load: *out NULL, nothing left allocated */
    ccr_model *bad = (ccr_model *)0x1;
    cr_expect_eq(ccr_model_load_spec(e, "mlp:64x99999999", &bad), CCR_ERR_SPEC);
    cr_expect_null(bad);
    cr_expect_eq(ccr_model_load_spec(e, "mlp:8192x8192", &bad), CCR_ERR_OUT_OF_MEMORY, "256 MiB on 64 MiB");
    cr_expect_null(bad);
    cr_expect_eq(live_bytes(e), 0);
    float x[64] = {0}, y[10];
    cr_expect_eq(ccr_model_run(bad, x, 1, y), CCR_ERR_INVALID_ARGUMENT);
    /* release twice: the second finds nothing and says the same */
    ccr_release_info r1, r2;
    cr_expect_eq(ccr_engine_release(e, &r1), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(ccr_engine_release(e, &r2), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(r2.models_unloaded, 0);
    cr_expect_eq(r2.device_free_after, r2.device_free_baseline);
    cr_expect_eq(r1.device_free_after, r1.device_free_baseline);
    expect_empty(up, "after two releases");
    /* reconfigure with a model loaded, or asleep: refused, the model runs */
    ccr_model *m = load(e);
    cr_expect_eq(ccr_engine_reconfigure(e, "policy:greedy"), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(ccr_model_sleep(m, NULL), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(ccr_engine_reconfigure(e, "policy:greedy"), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(ccr_model_run(m, x, 1, y), CCR_ERR_ASLEEP);
    cr_expect_eq(ccr_model_sleep(m, NULL), CCR_OK, "asleep already");
    cr_expect_eq(ccr_model_wake(m, NULL), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(ccr_model_wake(m, NULL), CCR_OK, "awake already");
    cr_expect_eq(ccr_model_run(m, x, 1, y), CCR_OK, "%s", ccr_last_error());
    /* a bad reconfigure keeps the engine; release then reconfigure works */
    ccr_model_unload(m);
    cr_expect_eq(ccr_engine_reconfigure(e, "policy:nonsense"), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(ccr_engine_reconfigure(e, NULL), CCR_OK, "%s", ccr_last_error());
    expect_empty(up, "after reconfigure");
    ccr_engine_destroy(e);
    expect_empty(up, "after destroy");
    cca_upstream_destroy(up);
}

/* Reconfigure destroys the old allocator: a block still live in it (a
 * caller's own, in the default domain, or one leaked in a released
 * model's domain) would be freed under its owner, who still holds the
 * pointer. Refused with CCR_ERR_LIVE_BLOCKS, the engine and the block as
 * they were; once the block is freed, the same call works. */
Test(runtime_calls, reconfigure_with_a_live_block_is_refused_and_keeps_it) {
    cca_upstream *up = device();
    ccr_engine *e = engine(up);
    cca_allocator *old = ccr_engine_allocator(e);
    ccr_model *m = load(e);
    void *own = NULL, *leak = NULL;
    cr_assert_eq(cca_alloc(old, 5000, NULL, &own), CCA_OK, "%s", cca_last_error());
    cr_assert_eq(cca_alloc_in(old, ccr_model_domain(m), 4096, NULL, &leak), CCA_OK, "%s", cca_last_error());
    cr_expect_eq(ccr_model_release(m, NULL), CCR_ERR_LIVE_BLOCKS, "%s", ccr_last_error());
    for (int step = 0; step < 3; step++) {
        ccr_status st = ccr_engine_reconfigure(e, "policy:growth");
        if (step == 2) { /* both freed */
            cr_expect_eq(st, CCR_OK, "%s", ccr_last_error());
            cr_expect_neq(ccr_engine_allocator(e), old, "a new allocator");
            break;
        }
        /* an assert: after a reconfigure that went through, old is freed */
        cr_assert_eq(st, CCR_ERR_LIVE_BLOCKS, "step %d: %s", step, ccr_last_error());
        cr_expect(said(step == 0 ? "2 blocks" : "1 block"), "step %d: %s", step, ccr_last_error());
        cr_expect_eq(ccr_engine_allocator(e), old, "step %d: the same allocator", step);
        size_t size = 0;
        cr_expect_eq(cca_block_size(old, step == 0 ? own : leak, &size), CCA_OK, "step %d: still live", step);
        memset(step == 0 ? own : leak, 0x5a, step == 0 ? 5000 : 4096); /* still the owner's memory */
        cr_expect_eq(cca_free(old, step == 0 ? own : leak), CCA_OK, "step %d", step);
    }
    ccr_model *again = load(e);
    float x[64] = {0}, y[10];
    cr_expect_eq(ccr_model_run(again, x, 1, y), CCR_OK, "%s", ccr_last_error());
    ccr_engine_destroy(e);
    expect_empty(up, "after destroy");
    cca_upstream_destroy(up);
}

/* Destroy with two models loaded, one asleep, and a caller's block leaked
 * in a third model's domain (its unload kept the domain): the borrowed
 * device gets everything back. The same on an engine of every policy. */
static void destroy_with_everything(const char *conf) {
    cca_upstream *up = device();
    ccr_engine *e = test_engine(up, 0, conf, 1, 0, NULL);
    ccr_model *a = load(e), *b = load(e), *c = load(e);
    (void)a;
    ccr_status sleeps = ccr_model_sleep(b, NULL); /* unsupported without a domain or pages */
    cr_expect(sleeps == CCR_OK || sleeps == CCR_ERR_UNSUPPORTED, "%s: %s", conf, ccr_last_error());
    cr_expect_eq(ccr_model_asleep(b), sleeps == CCR_OK);
    void *leak = NULL;
    cr_assert_eq(cca_alloc_in(ccr_engine_allocator(e), ccr_model_domain(c), 4096, NULL, &leak), CCA_OK);
    ccr_unload_info ui;
    ccr_status st = ccr_model_release(c, &ui);
    cr_expect_eq(st, ccr_model_domain(a) ? CCR_ERR_LIVE_BLOCKS : CCR_OK, "%s: %s", conf, ccr_last_error());
    ccr_engine_destroy(e);
    expect_empty(up, conf);
    cca_upstream_destroy(up);
}

Test(runtime_calls, destroy_with_models_loaded_asleep_and_leaking_gives_everything_back) {
    destroy_with_everything("log_oom:0");
    destroy_with_everything("log_oom:0,expandable:1");
    destroy_with_everything("log_oom:0,expandable:0");
    destroy_with_everything("log_oom:0,policy:greedy,greedy_bytes:8M");
}

/* Two engines on one device, destroyed in either order, each with a model
 * loaded: the device empty at the end. */
Test(runtime_calls, two_engines_on_one_device_end_in_either_order) {
    for (int order = 0; order < 2; order++) {
        cca_upstream *up = device();
        ccr_engine *e1 = engine(up), *e2 = engine(up);
        ccr_model *m1 = load(e1), *m2 = load(e2);
        (void)m1;
        (void)m2;
        ccr_engine_destroy(order ? e2 : e1);
        ccr_engine_destroy(order ? e1 : e2);
        expect_empty(up, order ? "e2 first" : "e1 first");
        cca_upstream_destroy(up);
    }
}

/* A stream with no name, garbage or empty: a format error naming it. */
Test(runtime_calls, a_stream_without_a_name_is_labelled) {
    cca_upstream *up = device();
    ccr_engine *e = engine(up);
    char junk[] = "\x10\x00\x00\x00\x00\x00\x00\x00{\"a\":1}        ";
    FILE *f = fmemopen(junk, sizeof junk - 1, "rb");
    cr_assert_not_null(f);
    ccr_model *m = (ccr_model *)0x1;
    ccr_status st = ccr_model_load_stream(e, f, NULL, &m);
    cr_expect(st == CCR_ERR_FORMAT || st == CCR_ERR_SPEC, "%s: %s", ccr_status_string(st), ccr_last_error());
    cr_expect_null(m);
    cr_expect(said("stream"), "%s", ccr_last_error());
    fclose(f);
    ccr_engine_destroy(e);
    expect_empty(up, "after destroy");
    cca_upstream_destroy(up);
}

/* A caller's block in a model's domain, the model asleep and unloaded: the
 * unload keeps the asleep domain (a leak); once the block is freed the
 * engine's release destroys it, host copy and all. */
Test(runtime_calls, a_leak_in_an_asleep_model_is_given_back_once_freed) {
    cca_upstream *up = device();
    ccr_engine *e = engine(up);
    ccr_model *m = load(e);
    cca_allocator *al = ccr_engine_allocator(e);
    void *p = NULL;
    cr_assert_eq(cca_alloc_in(al, ccr_model_domain(m), 5000, NULL, &p), CCA_OK);
    cr_assert_eq(ccr_model_sleep(m, NULL), CCR_OK, "%s", ccr_last_error());
    ccr_unload_info ui;
    cr_expect_eq(ccr_model_release(m, &ui), CCR_ERR_LIVE_BLOCKS, "%s", ccr_last_error());
    cr_expect_eq(ui.live_blocks, 1);
    cr_expect_eq(cca_free(al, p), CCA_OK, "%s", cca_last_error());
    ccr_release_info r;
    cr_expect_eq(ccr_engine_release(e, &r), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(r.live_bytes_after, 0);
    cr_expect_eq(r.device_free_after, r.device_free_baseline);
    expect_empty(up, "after the release");
    ccr_engine_destroy(e);
    expect_empty(up, "after destroy");
    cca_upstream_destroy(up);
}

/* A caller's cca_domain_sleep on ccr_model_domain puts the model to sleep
 * as ccr_model_sleep does: run and save refuse it (a save read the unmapped
 * weights and crashed), ccr_model_asleep says so, ccr_model_wake wakes it
 * to the same outputs; a caller's cca_domain_wake wakes it too. */
Test(runtime_calls, a_domain_put_to_sleep_by_the_caller_is_a_sleeping_model) {
    cca_upstream *up = device();
    ccr_engine *e = engine(up);
    ccr_model *m = load(e);
    float x[64], y0[10], y[10];
    for (int i = 0; i < 64; i++)
        x[i] = (float)i / 64.0f;
    cr_assert_eq(ccr_model_run(m, x, 1, y0), CCR_OK, "%s", ccr_last_error());
    cca_sleep_report rep;
    cr_assert_eq(cca_domain_sleep(ccr_engine_allocator(e), ccr_model_domain(m), 0, &rep), CCA_OK, "%s",
                 cca_last_error());
    cr_expect_eq(ccr_model_run(m, x, 1, y), CCR_ERR_ASLEEP);
    cr_expect(said("is asleep: run refused"), "%s", ccr_last_error());
    char path[] = "/tmp/ccr_calls_save_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    unlink(path);
    cr_expect_eq(ccr_model_save(m, path), CCR_ERR_ASLEEP);
    cr_expect_neq(access(path, F_OK), 0, "no file for a refused save");
    cr_expect(ccr_model_asleep(m));
    ccr_sleep_info s;
    cr_expect_eq(ccr_model_sleep(m, &s), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(s.was_asleep, 1);
    cr_expect_eq(ccr_model_wake(m, &s), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(s.was_asleep, 1);
    cr_expect_not(ccr_model_asleep(m));
    cr_expect_eq(ccr_model_run(m, x, 1, y), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(memcmp(y, y0, sizeof y), 0, "the same outputs after the wake");
    /* the other way: asleep by ccr_model_sleep, woken by the caller */
    cr_assert_eq(ccr_model_sleep(m, NULL), CCR_OK, "%s", ccr_last_error());
    cr_assert_eq(cca_domain_wake(ccr_engine_allocator(e), ccr_model_domain(m), &rep), CCA_OK, "%s", cca_last_error());
    cr_expect_not(ccr_model_asleep(m));
    cr_expect_eq(ccr_model_run(m, x, 1, y), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(memcmp(y, y0, sizeof y), 0, "the same outputs after the caller's wake");
    cr_expect_eq(ccr_model_wake(m, &s), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(s.was_asleep, 0, "awake already");
    ccr_engine_destroy(e);
    expect_empty(up, "after destroy");
    cca_upstream_destroy(up);
}
