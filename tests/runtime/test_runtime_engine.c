/*
 * test_runtime_engine.c — runtime/src/engine.c: the engine's memory contract on the simulated
 * device: where device bytes come from, and that release gives them all
 * back.
 *
 *   - three models in sequence, each released: the device holds zero bytes
 *     for us in between and its free memory equals the baseline exactly;
 *   - keep-cache (unload without release, no domains) retains the memory;
 *   - greedy reserves ~90% at creation and never grows; growth reserves
 *     what the model needs (figures documented in docs/release.md);
 *   - the allocator's reserved bytes account for everything the device lost;
 *   - activations are freed as soon as consumed, batch sizes may change;
 *   - a refused reconfigure keeps the allocator and the models running;
 *   - spec strings parse strictly, their limits exact; timelines balance
 *     alloc/free rows (a free row gives the block's bytes, a run's phase row
 *     its batch, t_ms counts from the open, a model name stays one CSV
 *     field), and one that could not be written says so at close; a
 *     CCALLOC_TRACE recording that could not be written is the engine's
 *     CCR_ERR_IO from the first mark that found it on, and a mark refused
 *     for another reason (from inside an upstream op) is not;
 *   - device options the simulated device cannot take are refused by name;
 *     max_reserved above the device's total is not the limit;
 *   - a batch the device can never hold is refused before anything moves:
 *     the check counts a pass's peak, its bound is inclusive, batch 0 is
 *     refused; one refused memory during the pass names model and batch.
 */
#include <stdio.h>
#include <unistd.h>

#include "comma_locale.h" /* tests/support */
#include "test_runtime_util.h"
#include "hostile_numbers.h" /* tests/support: HOSTILE_DECIMALS */

#define MiB ((size_t)1 << 20)

static void device_free(ccr_engine *e, size_t *free_b, size_t *total) {
    cr_assert_eq(cca_upstream_mem_info(ccr_engine_upstream(e), free_b, total), CCA_OK);
}

/* The device lost exactly what the allocator reserved (we are its only tenant). */
static void expect_accounted(ccr_engine *e, const char *when) {
    size_t f, t;
    device_free(e, &f, &t);
    cca_upstream_stats us;
    cca_upstream_get_stats(ccr_engine_upstream(e), &us);
    cr_expect_eq(t - f, reserved_bytes(e), "%s: device lost %zu bytes but the allocator reserved %zu", when, t - f,
                 reserved_bytes(e));
    cr_expect_eq(us.bytes_in_use, reserved_bytes(e), "%s: upstream holds %zu, allocator reserved %zu", when,
                 us.bytes_in_use, reserved_bytes(e));
}

static void run_once(ccr_model *m, size_t batch) {
    const ccr_arch *a = ccr_model_arch(m);
    size_t in = a->layers[0].in, out = a->layers[a->n_layers - 1].out;
    float *x = calloc(batch * in, sizeof(float)), *y = malloc(batch * out * sizeof(float));
    for (size_t i = 0; i < batch * in; i++)
        x[i] = (float)(i % 13) / 13.0f;
    cr_assert_eq(ccr_model_run(m, x, batch, y), CCR_OK, "%s", ccr_last_error());
    if (a->softmax) {
        double sum = 0;
        for (size_t c = 0; c < out; c++)
            sum += y[c];
        cr_expect_float_eq(sum, 1.0, 1e-4, "softmax row sums to %f", sum);
    }
    free(x);
    free(y);
}

Test(runtime_engine, three_models_in_sequence_with_release) {
    ccr_engine *e = host_engine(256 * MiB, "policy:growth");
    const char *specs[] = {"mlp:512x2048x2048x10:relu:softmax:seed=1", "mlp:1024x4096x1024x10:gelu:softmax:seed=2",
                           "mlp:256x3000x3000x3000x10:relu:softmax:seed=3"};
    ccr_device_info d;
    ccr_engine_device_info(e, &d);
    cr_expect(d.simulated);
    cr_expect_eq(d.free_baseline, 256 * MiB);
    for (int k = 0; k < 3; k++) {
        ccr_model *m;
        cr_assert_eq(ccr_model_load_spec(e, specs[k], &m), CCR_OK, "%s", ccr_last_error());
        cr_expect_geq(live_bytes(e), ccr_arch_param_bytes(ccr_model_arch(m)));
        expect_accounted(e, "after load");
        run_once(m, 4);
        expect_accounted(e, "after run");
        cr_expect_eq(live_bytes(e), ccr_model_device_bytes(m), "activations not freed after the pass");
        ccr_release_info r;
        cr_assert_eq(ccr_engine_release(e, &r), CCR_OK, "%s", ccr_last_error());
        cr_expect_eq(r.models_unloaded, 1);
        cr_expect_eq(r.live_bytes_after, 0);
        cr_expect_eq(r.device_free_after, r.device_free_baseline, "model %d: free %zu after release, %zu at start", k,
                     r.device_free_after, r.device_free_baseline);
        cr_expect_eq(r.cache.bytes_still_reserved, 0);
        cca_upstream_stats us;
        cca_upstream_get_stats(ccr_engine_upstream(e), &us);
        cr_expect_eq(us.bytes_in_use, 0, "the device still holds %zu bytes for us after release", us.bytes_in_use);
        cr_expect_eq(us.allocations, 0);
    }
    ccr_engine_destroy(e);
}

/* Without memory domains (one shared pool, TensorFlow's and ccrun
 * --keep-cache's mode) an unloaded model's memory stays cached; with them,
 * the unload returns it (test_runtime_domains.c). */
Test(runtime_engine, keep_cache_retains_memory_until_release) {
    ccr_engine *e = host_engine_domains(128 * MiB, "policy:growth", 0);
    ccr_model *m;
    cr_assert_eq(ccr_model_load_spec(e, "mlp:1024x4096x1024:relu", &m), CCR_OK, "%s", ccr_last_error());
    run_once(m, 2);
    ccr_model_unload(m);
    size_t f, t;
    device_free(e, &f, &t);
    cr_expect_eq(live_bytes(e), 0);
    cr_expect_geq(reserved_bytes(e), 32 * MiB, "unload must keep the cache (like --keep-cache)");
    cr_expect_eq(f, t - reserved_bytes(e));
    /* a second model of the same shape reuses the cache without new upstream calls */
    cca_stats s0, s1;
    cca_get_stats(ccr_engine_allocator(e), &s0);
    cr_assert_eq(ccr_model_load_spec(e, "mlp:1024x4096x1024:relu:seed=5", &m), CCR_OK);
    cca_get_stats(ccr_engine_allocator(e), &s1);
    cr_expect_eq(s1.upstream_allocs, s0.upstream_allocs, "cache not reused");
    ccr_release_info r;
    cr_assert_eq(ccr_engine_release(e, &r), CCR_OK);
    cr_expect_eq(r.device_free_after, t);
    cr_expect_gt(r.cache.bytes_released, 0);
    ccr_engine_destroy(e);
}

Test(runtime_engine, greedy_versus_growth_reserved) {
    const size_t cap = 256 * MiB;
    const char *spec = "mlp:1024x8192x1024:relu:softmax"; /* 64 MiB of weights */
    ccr_engine *g = host_engine(cap, "policy:greedy");
    size_t arena = reserved_bytes(g);
    /* greedy: 90% of free memory at creation, before any model */
    cr_expect_geq(arena, cap / 10 * 9 - 2 * MiB);
    cr_expect_leq(arena, cap / 10 * 9 + 2 * MiB);
    ccr_model *m;
    cr_assert_eq(ccr_model_load_spec(g, spec, &m), CCR_OK, "%s", ccr_last_error());
    run_once(m, 8);
    cr_expect_eq(reserved_bytes(g), arena, "greedy must not grow");
    ccr_release_info r;
    ccr_engine_release(g, &r);
    cr_expect_eq(r.device_free_after, cap, "empty-cache releases the greedy arena too");
    ccr_engine_destroy(g);

    ccr_engine *w = host_engine(cap, "policy:growth");
    cr_expect_eq(reserved_bytes(w), 0);
    cr_assert_eq(ccr_model_load_spec(w, spec, &m), CCR_OK, "%s", ccr_last_error());
    size_t need = ccr_arch_param_bytes(ccr_model_arch(m));
    cr_expect_geq(reserved_bytes(w), need);
    cr_expect_leq(reserved_bytes(w), need + 8 * MiB, "growth reserved %zu for %zu of weights", reserved_bytes(w), need);
    cr_expect_lt(reserved_bytes(w), arena / 2);
    ccr_engine_destroy(w);
}

Test(runtime_engine, model_too_large_for_device) {
    ccr_engine *e = host_engine(64 * MiB, NULL);
    ccr_model *m = (ccr_model *)1;
    cr_expect_eq(ccr_model_load_spec(e, "mlp:4096x4096x4096:relu", &m), CCR_ERR_OUT_OF_MEMORY);
    cr_expect_null(m);
    cr_expect(strstr(ccr_last_error(), "does not fit") != NULL, "message: %s", ccr_last_error());
    cr_expect(strstr(ccr_last_error(), "layer") != NULL, "message: %s", ccr_last_error());
    cr_expect_eq(live_bytes(e), 0);
    /* the engine stays usable */
    cr_assert_eq(ccr_model_load_spec(e, "mlp:64x64x10", &m), CCR_OK, "%s", ccr_last_error());
    run_once(m, 3);
    ccr_engine_destroy(e);
}

Test(runtime_engine, changing_batch_sizes_give_consistent_rows) {
    ccr_engine *e = host_engine(64 * MiB, NULL);
    ccr_model *m;
    cr_assert_eq(ccr_model_load_spec(e, "mlp:100x300x10:gelu:softmax:seed=4", &m), CCR_OK);
    float x[37 * 100], y1[10], y37[37 * 10];
    for (size_t i = 0; i < 37 * 100; i++)
        x[i] = (float)((i * 7919) % 1000) / 1000.0f;
    cr_assert_eq(ccr_model_run(m, x, 37, y37), CCR_OK);
    for (size_t r = 0; r < 37; r += 12) {
        cr_assert_eq(ccr_model_run(m, x + r * 100, 1, y1), CCR_OK);
        for (int c = 0; c < 10; c++)
            cr_expect_float_eq(y1[c], y37[r * 10 + c], 1e-6, "row %zu col %d", r, c);
    }
    cr_expect_eq(ccr_model_run(m, x, 0, y1), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(live_bytes(e), ccr_model_device_bytes(m));
    ccr_engine_destroy(e);
}

Test(runtime_engine, activation_too_large_fails_cleanly) {
    ccr_engine *e = host_engine(16 * MiB, NULL);
    ccr_model *m;
    cr_assert_eq(ccr_model_load_spec(e, "mlp:16x4096x16", &m), CCR_OK);
    size_t batch = 2048; /* 2048 x 4096 x 4 = 32 MiB activation */
    float *x = calloc(batch * 16, sizeof(float)), *y = malloc(batch * 16 * sizeof(float));
    cr_expect_eq(ccr_model_run(m, x, batch, y), CCR_ERR_OUT_OF_MEMORY);
    cr_expect(strstr(ccr_last_error(), "activation") != NULL, "message: %s", ccr_last_error());
    cr_expect_eq(live_bytes(e), ccr_model_device_bytes(m), "a failed pass must free its activations");
    cr_expect_eq(ccr_model_run(m, x, 4, y), CCR_OK);
    free(x);
    free(y);
    ccr_engine_destroy(e);
}

/* A batch the check lets through can still fail at an allocation (another
 * tenant holds the device): the message names the model and the batch, and
 * the pass frees what it took. */
Test(runtime_engine, a_pass_refused_memory_names_the_model_and_batch) {
    ccr_engine *e = host_engine(16 * MiB, NULL);
    ccr_model *m;
    cr_assert_eq(ccr_model_load_spec(e, "mlp:16x4096x16", &m), CCR_OK, "%s", ccr_last_error());
    void *tenant = NULL;
    cr_assert_eq(cca_upstream_alloc(ccr_engine_upstream(e), 14 * MiB, &tenant), CCA_OK);
    size_t batch = 256; /* a 4 MiB activation: within the device's total, not its free memory */
    float *x = calloc(batch * 16, sizeof(float)), *y = malloc(batch * 16 * sizeof(float));
    cr_assert_eq(ccr_model_check_batch(m, batch, NULL), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(ccr_model_run(m, x, batch, y), CCR_ERR_OUT_OF_MEMORY);
    cr_expect(strncmp(ccr_last_error(), "model 'mlp:16x4096x16', batch 256: ", 35) == 0, "%s", ccr_last_error());
    cr_expect_eq(live_bytes(e), ccr_model_device_bytes(m), "a failed pass must free its activations");
    cca_upstream_free(ccr_engine_upstream(e), tenant, 14 * MiB);
    cr_expect_eq(ccr_model_run(m, x, batch, y), CCR_OK, "%s", ccr_last_error());
    free(x);
    free(y);
    ccr_engine_destroy(e);
}

Test(runtime_engine, spec_strings) {
    ccr_arch a;
    cr_assert_eq(ccr_arch_parse("mlp:784x4096x4096x10:relu:softmax", &a), CCR_OK);
    cr_expect_eq(a.n_layers, 3);
    cr_expect_eq(a.layers[0].in, 784);
    cr_expect_eq(a.layers[2].out, 10);
    cr_expect_eq(a.layers[0].act, CCK_ACT_RELU);
    cr_expect_eq(a.layers[2].act, CCK_ACT_NONE);
    cr_expect(a.softmax);
    char buf[256];
    cr_assert_eq(ccr_arch_format(&a, buf, sizeof buf), CCR_OK);
    cr_expect_str_eq(buf, "mlp:784x4096x4096x10:relu:softmax");
    cr_assert_eq(ccr_arch_parse("mlp:8x4x2:acts=gelu/relu:seed=42:nobias", &a), CCR_OK);
    cr_expect_eq(a.seed, 42);
    cr_expect_eq(a.layers[1].act, CCK_ACT_RELU);
    cr_expect_eq(a.layers[0].has_bias, 0);
    cr_assert_eq(ccr_arch_format(&a, buf, sizeof buf), CCR_OK);
    cr_expect_str_eq(buf, "mlp:8x4x2:acts=gelu/relu:nosoftmax:nobias");
    static const char *bad[] = {"",
                                "mlp:",
                                "mlp:64",
                                "mlp:64x",
                                "mlp:64xx10",
                                "mlp:0x10",
                                "mlp:64x10:swish",
                                "cnn:64x10",
                                "mlp:-4x10",
                                "mlp:64x10:",
                                "mlp:64x10:seed=",
                                "mlp:64x10:seed=x",
                                "mlp:99999999x10",
                                "mlp:65536x65536",
                                "mlp:4x4:acts=relu/relu",
                                "mlp:4x4x4:acts=relu/",
                                "mlp:1x2:softmax:extra",
                                "mlp:4x4:abcdefghijklmnop"}; /* 16 characters: parse_act's buffer is 16 */
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_expect_eq(ccr_arch_parse(bad[i], &a), CCR_ERR_SPEC, "'%s' accepted", bad[i]);
        cr_expect_neq(ccr_last_error()[0], '\0');
    }
    ccr_engine *e = host_engine(16 * MiB, NULL);
    ccr_model *m;
    cr_expect_eq(ccr_model_load_spec(e, "mlp:64xx10", &m), CCR_ERR_SPEC);
    cr_expect(strstr(ccr_last_error(), "mlp:64xx10") != NULL, "message: %s", ccr_last_error());
    cr_expect_eq(reserved_bytes(e), 0);
    ccr_engine_destroy(e);
}

/* acts= naming fewer activations than layers says how many of each;
 * ccr_arch_format refuses every buffer shorter than the canonical spec and
 * its NUL (CCR_ERR_INVALID_ARGUMENT), for each of its forms. */
Test(runtime_engine, acts_counts_and_short_format_buffers_are_refused) {
    ccr_arch a;
    cr_expect_eq(ccr_arch_parse("mlp:4x4x4:acts=relu", &a), CCR_ERR_SPEC);
    cr_expect_str_eq(ccr_last_error(), "spec 'mlp:4x4x4:acts=relu': acts= lists 1 activations for 2 layers");
    static const char *const specs[] = {"mlp:784x4096x4096x10:relu:softmax", "mlp:8x4x2:acts=gelu/relu:nobias",
                                        "mlp:5x7:none:nosoftmax"};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        char want[128], buf[128];
        cr_assert_eq(ccr_arch_parse(specs[i], &a), CCR_OK, "%s", ccr_last_error());
        cr_assert_eq(ccr_arch_format(&a, want, sizeof want), CCR_OK);
        size_t n = strlen(want);
        for (size_t len = 1; len <= n; len++) {
            cr_expect_eq(ccr_arch_format(&a, buf, len), CCR_ERR_INVALID_ARGUMENT, "%s in %zu bytes", want, len);
            char msg[64];
            snprintf(msg, sizeof msg, "spec buffer of %zu bytes too short", len);
            cr_expect_str_eq(ccr_last_error(), msg);
        }
        cr_expect_eq(ccr_arch_format(&a, buf, n + 1), CCR_OK, "%s in %zu bytes", want, n + 1);
        cr_expect_str_eq(buf, want);
    }
}

/* Each device name ccrun's --device takes, and nothing else. */
Test(runtime_engine, device_names_parse) {
    ccr_device_kind k = CCR_DEVICE_HOST;
    cr_expect_eq(ccr_device_parse("auto", &k), CCR_OK);
    cr_expect_eq(k, CCR_DEVICE_AUTO);
    cr_expect_eq(ccr_device_parse("cuda", &k), CCR_OK);
    cr_expect_eq(k, CCR_DEVICE_CUDA);
    cr_expect_eq(ccr_device_parse("host", &k), CCR_OK);
    cr_expect_eq(k, CCR_DEVICE_HOST);
    cr_expect_eq(ccr_device_parse("Host", &k), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(ccr_last_error(), "unknown device 'Host' (auto|cuda|host)");
    cr_expect_eq(k, CCR_DEVICE_HOST);
    cr_expect_eq(ccr_device_parse(NULL, &k), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_eq(ccr_device_parse("host", NULL), CCR_ERR_INVALID_ARGUMENT);
}

/* The spec's limits at their exact values: a dimension of 2^24, a layer of
 * 2^31 weights, 64 layers, a seed of 2^64 - 1 are accepted, one more is not. */
Test(runtime_engine, spec_limits_are_exact) {
    ccr_arch a;
    cr_expect_eq(ccr_arch_parse("mlp:16777216x1", &a), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(a.layers[0].in, (size_t)1 << 24);
    cr_expect_eq(ccr_arch_parse("mlp:16777217x1", &a), CCR_ERR_SPEC);
    cr_expect_eq(ccr_arch_parse("mlp:65536x32768", &a), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(ccr_arch_parse("mlp:65536x32769", &a), CCR_ERR_SPEC);
    cr_expect(strstr(ccr_last_error(), "exceeds 2^31 weights") != NULL, "%s", ccr_last_error());
    cr_expect_eq(ccr_arch_parse("mlp:2x2:seed=18446744073709551615", &a), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(a.seed, UINT64_MAX);
    cr_expect_eq(ccr_arch_parse("mlp:2x2:seed=18446744073709551616", &a), CCR_ERR_SPEC);
    char spec[512] = "mlp:2";
    for (int i = 0; i < CCR_MAX_LAYERS; i++)
        strcat(spec, "x2");
    cr_expect_eq(ccr_arch_parse(spec, &a), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(a.n_layers, CCR_MAX_LAYERS);
    strcat(spec, "x2");
    cr_expect_eq(ccr_arch_parse(spec, &a), CCR_ERR_SPEC);
    cr_expect(strstr(ccr_last_error(), "more than 64 layers") != NULL, "%s", ccr_last_error());
}

/* The spec's numbers, a dimension and the seed, are ccrun --seed's grammar:
 * plain decimal, any leading zeros, in range. Each hostile spelling is
 * refused naming the field, the text and the range (a seed's message gave
 * no range, "seed=" was an unknown field), and a number of more than 20
 * characters that leading zeros make is the number it says (it was refused
 * as "not a number in 1..16777216"; ccrun --seed took it). */
Test(runtime_engine, spec_numbers_are_plain_decimal_with_their_range) {
    static const char *const bad[] = {HOSTILE_DECIMALS, "18446744073709551616"};
    ccr_arch a;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char spec[128], want[256];
        snprintf(spec, sizeof spec, "mlp:4x2:seed=%s", bad[i]);
        snprintf(want, sizeof want, "spec '%s': seed '%s' is not a number in 0..2^64-1", spec, bad[i]);
        cr_expect_eq(ccr_arch_parse(spec, &a), CCR_ERR_SPEC, "%s", spec);
        cr_expect_str_eq(ccr_last_error(), want);
        if (strchr(bad[i], 'x'))
            continue; /* "0x10" in a layer list is two dimensions, 0 and 10 */
        snprintf(spec, sizeof spec, "mlp:4x%s", bad[i]);
        snprintf(want, sizeof want, "spec '%s': dimension '%s' is not a number in 1..16777216", spec, bad[i]);
        cr_expect_eq(ccr_arch_parse(spec, &a), CCR_ERR_SPEC, "%s", spec);
        cr_expect_str_eq(ccr_last_error(), want);
    }
    cr_expect_eq(ccr_arch_parse("mlp:4x16777217", &a), CCR_ERR_SPEC);
    cr_expect_str_eq(ccr_last_error(), "spec 'mlp:4x16777217': dimension '16777217' is not a number in 1..16777216");
    cr_expect_eq(ccr_arch_parse("mlp:4x0", &a), CCR_ERR_SPEC);
    cr_expect_str_eq(ccr_last_error(), "spec 'mlp:4x0': dimension '0' is not a number in 1..16777216");
    /* leading zeros, any number of them */
    cr_assert_eq(ccr_arch_parse("mlp:000000000000000000000000000004x0000000000000000000000000000002:seed="
                                "0000000000000000000000000000018446744073709551615",
                                &a),
                 CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(a.layers[0].in, 4);
    cr_expect_eq(a.layers[0].out, 2);
    cr_expect_eq(a.seed, UINT64_MAX);
}

/* The activations a batch needs at the peak of a pass, per row: the widest
 * pair of a layer's input and output, or logits and probabilities. */
Test(runtime_engine, the_batch_check_counts_the_peak_of_a_pass) {
    static const struct {
        const char *spec;
        size_t floats_per_row;
    } cases[] = {
        {"mlp:2x100:softmax", 200},       /* logits and probabilities */
        {"mlp:2x100:nosoftmax", 102},     /* input and output */
        {"mlp:50x10x300x4:softmax", 310}, /* the middle layer */
        {"mlp:400x3:softmax", 403},       /* the first layer */
    };
    ccr_engine *e = host_engine(64 * MiB, NULL);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ccr_model *m;
        cr_assert_eq(ccr_model_load_spec(e, cases[i].spec, &m), CCR_OK, "%s", ccr_last_error());
        size_t need = 0;
        cr_assert_eq(ccr_model_check_batch(m, 10, &need), CCR_OK, "%s", ccr_last_error());
        cr_expect_eq(need, ccr_model_device_bytes(m) + 10 * cases[i].floats_per_row * sizeof(float), "%s",
                     cases[i].spec);
        ccr_model_unload(m);
    }
    ccr_engine_destroy(e);
}

/* The grammar gives each field at most once ([:ACT][:softmax|:nosoftmax]
 * [:seed=N][:nobias][:acts=...]): a field given twice, or two that say
 * opposite things (relu then gelu, softmax then nosoftmax, an ACT beside
 * acts=, which would silently override it), is a spec error naming the
 * field, not "the last one wins". */
Test(runtime_engine, spec_fields_given_twice_or_in_conflict_are_refused) {
    static const char *bad[] = {
        "mlp:8x8:relu:gelu",           "mlp:8x8:relu:relu",          "mlp:8x8:softmax:nosoftmax",
        "mlp:8x8:softmax:softmax",     "mlp:8x8:seed=1:seed=2",      "mlp:8x8:nobias:nobias",
        "mlp:8x8x8:acts=relu/gelu:none", "mlp:8x8x8:gelu:acts=relu/none", "mlp:8x8:acts=none:acts=relu",
    };
    ccr_arch a;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&a, 0x5a, sizeof a);
        ccr_arch before = a;
        cr_expect_eq(ccr_arch_parse(bad[i], &a), CCR_ERR_SPEC, "'%s' accepted", bad[i]);
        cr_expect(strstr(ccr_last_error(), bad[i]) != NULL, "'%s': the message names the spec: %s", bad[i],
                  ccr_last_error());
        cr_expect_eq(memcmp(&a, &before, sizeof a), 0, "'%s': *out written on failure", bad[i]);
    }
    /* each field once, in any order, is fine */
    cr_assert_eq(ccr_arch_parse("mlp:8x8x8:nobias:seed=3:nosoftmax:gelu", &a), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(a.layers[0].act, CCK_ACT_GELU);
    cr_assert_eq(ccr_arch_parse("mlp:8x8x8:seed=3:acts=none/relu:softmax", &a), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(a.layers[1].act, CCK_ACT_RELU);
}

Test(runtime_engine, engine_options) {
    ccr_engine_options o;
    ccr_engine_options_default(&o);
    o.device = CCR_DEVICE_HOST;
    o.host_capacity = 16 * MiB;
    o.alloc_conf = "policy:greedy,no_such_key:1";
    ccr_engine *e = (ccr_engine *)1;
    cr_expect_eq(ccr_engine_create(&o, &e), CCR_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ccr_last_error(), "no_such_key") != NULL, "message: %s", ccr_last_error());
    cr_expect_null(e, "*out is NULL after a failure (ccr.h)");
    o.alloc_conf = "policy:greedy,greedy_bytes:32M"; /* an arena the 16 MiB device cannot hold */
    e = (ccr_engine *)1;
    cr_expect_eq(ccr_engine_create(&o, &e), CCR_ERR_OUT_OF_MEMORY, "%s", ccr_last_error());
    cr_expect_null(e);
    o.alloc_conf = NULL;
    o.host_capacity = 0;
    e = (ccr_engine *)1;
    cr_expect_eq(ccr_engine_create(&o, &e), CCR_ERR_INVALID_ARGUMENT, "%s", ccr_last_error());
    cr_expect_null(e);
    int count = 0;
    cck_cuda_device_count(&count);
    if (count == 0) {
        o.device = CCR_DEVICE_CUDA;
        o.host_capacity = 16 * MiB;
        e = (ccr_engine *)1;
        cr_expect_eq(ccr_engine_create(&o, &e), CCR_ERR_DEVICE);
        cr_expect_null(e);
        o.device = CCR_DEVICE_AUTO; /* no GPU: falls back to the simulated device */
        cr_assert_eq(ccr_engine_create(&o, &e), CCR_OK, "%s", ccr_last_error());
        ccr_device_info d;
        ccr_engine_device_info(e, &d);
        cr_expect(d.simulated);
        cr_expect_eq(d.total_bytes, 16 * MiB);
        /* reconfigure: growth -> greedy on the same device */
        cr_expect_eq(ccr_engine_reconfigure(e, "policy:greedy,greedy_bytes:8M"), CCR_OK, "%s", ccr_last_error());
        cr_expect_eq(reserved_bytes(e), 8 * MiB);
        ccr_engine_destroy(e);
    }
    ccr_device_kind k;
    cr_expect_eq(ccr_device_parse("gpu", &k), CCR_ERR_INVALID_ARGUMENT);
    size_t sz;
    cr_expect_eq(ccr_parse_size("1.5G", &sz), CCR_OK);
    cr_expect_eq(sz, 1536 * MiB);
    cr_expect_neq(ccr_parse_size("12Q", &sz), CCR_OK);
}

/* A reconfigure the allocator refuses (a bad key, or models still loaded)
 * changes nothing: the engine keeps its allocator and its models run. */
Test(runtime_engine, a_refused_reconfigure_keeps_the_engine_usable) {
    ccr_engine *e = host_engine(16 * MiB, "policy:growth");
    cca_allocator *before = ccr_engine_allocator(e);
    ccr_model *m;
    cr_assert_eq(ccr_model_load_spec(e, "mlp:8x4x2:softmax", &m), CCR_OK, "%s", ccr_last_error());
    float *want = outputs_of(m, 3);
    cr_expect_eq(ccr_engine_reconfigure(e, "policy:greedy"), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(ccr_last_error(), "cannot change the allocator with models loaded");
    ccr_model_unload(m);
    cr_expect_eq(ccr_engine_reconfigure(e, "policy:growth,no_such_key:1"), CCR_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ccr_last_error(), "no_such_key") != NULL, "%s", ccr_last_error());
    cr_expect_eq(ccr_engine_allocator(e), before, "the allocator changed");
    /* a config that parses but whose allocator cannot be made: a greedy
     * arena larger than the device */
    cr_expect_eq(ccr_engine_reconfigure(e, "policy:greedy,greedy_bytes:32M"), CCR_ERR_OUT_OF_MEMORY, "%s",
                 ccr_last_error());
    cr_expect_eq(ccr_engine_allocator(e), before, "the allocator changed");
    cr_assert_eq(ccr_model_load_spec(e, "mlp:8x4x2:softmax", &m), CCR_OK, "%s", ccr_last_error());
    expect_same_outputs(m, 3, want, "after a refused reconfigure");
    free(want);
    ccr_engine_destroy(e);
}

/* max_reserved above the device's total does not raise the limit: the
 * device's total stays the bound a batch is checked against. */
Test(runtime_engine, max_reserved_above_the_device_is_not_the_limit) {
    ccr_engine *e = host_engine(16 * MiB, "max_reserved:1G");
    ccr_model *m;
    cr_assert_eq(ccr_model_load_spec(e, "mlp:64x1", &m), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(ccr_model_check_batch(m, 100000, NULL), CCR_ERR_OUT_OF_MEMORY); /* 24.8 MiB */
    cr_expect(strstr(ccr_last_error(), "at most 16.00 MiB (16777216 bytes) is available (the device's total)") != NULL,
              "%s", ccr_last_error());
    ccr_engine_destroy(e);
}

/* Opening a device: a capacity of 0 and an unknown backing are the
 * caller's errors, each said as such; so is a capacity below the host
 * page, which the simulated device refuses as it refuses 0 (it was
 * CCR_ERR_DEVICE, a device that failed, for 1..page-1). */
Test(runtime_engine, bad_device_options_are_refused_by_name) {
    cca_upstream *up = (cca_upstream *)&up;
    cr_expect_eq(ccr_device_open(CCR_DEVICE_HOST, 0, 0, &up, NULL), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(ccr_last_error(), "simulated device capacity is 0");
    cr_expect_null(up);
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const size_t small[] = {1, page / 2, page - 1};
    for (size_t i = 0; i < sizeof small / sizeof small[0]; i++) {
        up = (cca_upstream *)&up;
        char want[160];
        snprintf(want, sizeof want,
                 "simulated device: cca_upstream_host_create_with: capacity %zu is below the %zu-byte host page, the "
                 "least a simulated device holds",
                 small[i], page);
        cr_expect_eq(ccr_device_open(CCR_DEVICE_HOST, 0, small[i], &up, NULL), CCR_ERR_INVALID_ARGUMENT,
                     "capacity %zu: %s", small[i], ccr_last_error());
        cr_expect_str_eq(ccr_last_error(), want);
        cr_expect_null(up);
    }
    cr_expect_eq(ccr_device_open(CCR_DEVICE_HOST, 0, page, &up, NULL), CCR_OK, "%s", ccr_last_error());
    cca_upstream_destroy(up);
    ccr_device_options o = {CCR_DEVICE_HOST, 0, 16 * MiB, 0, 7};
    cr_expect_eq(ccr_device_open_with(&o, &up, NULL), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(ccr_last_error(), "vm_backing 7 is neither CCA_VM_WHOLE_MAPS (0) nor CCA_VM_PAGES (1)");
    cr_expect_null(up);
}

/* The page of expandable segments through the engine: ccr_device_open_paged
 * gives the simulated device that page; a page the library refuses is
 * CCR_ERR_INVALID_ARGUMENT on every kind, never a silent fall-back to the
 * simulated device (AUTO on a machine without a GPU); an engine with
 * vm_granularity and expandable:1 serves its model from pages of that size. */
Test(runtime_engine, the_page_of_expandable_segments) {
    cca_upstream *dev = (cca_upstream *)&dev;
    int simulated = -1;
    cr_assert_eq(ccr_device_open_paged(CCR_DEVICE_HOST, 0, 64 * MiB, 8 * MiB, &dev, &simulated), CCR_OK, "%s",
                 ccr_last_error());
    size_t g = 0;
    cr_assert_eq(cca_upstream_vm_granularity(dev, &g), CCA_OK);
    cr_assert_eq(g, 8 * MiB);
    cr_assert_eq(simulated, 1);
    cca_upstream_destroy(dev);
    const ccr_device_kind kinds[] = {CCR_DEVICE_HOST, CCR_DEVICE_AUTO, CCR_DEVICE_CUDA};
    const size_t bad[] = {3 * MiB, 1000, (size_t)3 << 40};
    for (size_t k = 0; k < 3; k++)
        for (size_t i = 0; i < 3; i++) {
            dev = (cca_upstream *)&dev;
            cr_assert_eq(ccr_device_open_paged(kinds[k], 0, 64 * MiB, bad[i], &dev, NULL), CCR_ERR_INVALID_ARGUMENT,
                         "kind %zu, page %zu: %s", k, bad[i], ccr_last_error());
            cr_assert_null(dev);
            cr_assert_not_null(strstr(ccr_last_error(), "vm_granularity"), "%s", ccr_last_error());
        }
    ccr_engine_options o;
    ccr_engine_options_default(&o);
    cr_assert_eq(o.vm_granularity, 0, "the device's page by default");
    o.device = CCR_DEVICE_HOST;
    o.host_capacity = 64 * MiB;
    o.vm_granularity = 8 * MiB;
    o.alloc_conf = "expandable:1";
    ccr_engine *e;
    cr_assert_eq(ccr_engine_create(&o, &e), CCR_OK, "%s", ccr_last_error());
    ccr_model *m;
    cr_assert_eq(ccr_model_load_spec(e, "mlp:64x64", &m), CCR_OK, "%s", ccr_last_error());
    cca_stats s;
    cca_get_stats(ccr_engine_allocator(e), &s);
    cr_assert_eq(s.page_size, 8 * MiB);
    cr_assert_eq(s.mapped_bytes % (8 * MiB), 0);
    cr_assert_gt(s.mapped_bytes, 0);
    ccr_engine_destroy(e);
}

/* The backing of virtual-memory maps: a value other than CCA_VM_PAGES and
 * CCA_VM_WHOLE_MAPS is CCR_ERR_INVALID_ARGUMENT on every kind before any
 * device is opened (o NULL too); ccr_device_open_with and an engine's
 * vm_backing reach the device (cca_upstream_vm_backing), checked where the
 * library's simulated device takes it. */
Test(runtime_engine, the_backing_of_virtual_memory_maps) {
    const ccr_device_kind kinds[] = {CCR_DEVICE_HOST, CCR_DEVICE_AUTO, CCR_DEVICE_CUDA};
    const int bad[] = {2, -1, 77};
    cca_upstream *dev = (cca_upstream *)&dev;
    cr_assert_eq(ccr_device_open_with(NULL, &dev, NULL), CCR_ERR_INVALID_ARGUMENT);
    cr_assert_null(dev);
    for (size_t k = 0; k < 3; k++)
        for (size_t i = 0; i < 3; i++) {
            ccr_device_options d = {kinds[k], 0, 64 * MiB, 0, bad[i]};
            dev = (cca_upstream *)&dev;
            cr_assert_eq(ccr_device_open_with(&d, &dev, NULL), CCR_ERR_INVALID_ARGUMENT, "kind %zu, backing %d: %s", k,
                         bad[i], ccr_last_error());
            cr_assert_null(dev);
            char want[64];
            snprintf(want, sizeof want, "vm_backing %d is neither", bad[i]);
            cr_assert_not_null(strstr(ccr_last_error(), want), "%s", ccr_last_error());
        }
    ccr_engine_options o;
    ccr_engine_options_default(&o);
    cr_assert_eq(o.vm_backing, CCA_VM_WHOLE_MAPS, "whole maps by default");
    o.device = CCR_DEVICE_HOST;
    o.host_capacity = 64 * MiB;
    o.alloc_conf = "expandable:1";
    o.vm_backing = 5;
    ccr_engine *e = NULL;
    cr_assert_eq(ccr_engine_create(&o, &e), CCR_ERR_INVALID_ARGUMENT, "%s", ccr_last_error());
    ccr_device_options d = {CCR_DEVICE_HOST, 0, 64 * MiB, 4 * MiB, CCA_VM_PAGES};
    cr_assert_eq(ccr_device_open_with(&d, &dev, NULL), CCR_OK, "%s", ccr_last_error());
    cr_assert_eq(cca_upstream_vm_backing(dev), CCA_VM_PAGES);
    size_t g = 0;
    cr_assert_eq(cca_upstream_vm_granularity(dev, &g), CCA_OK);
    cr_assert_eq(g, 4 * MiB, "the page goes with it");
    cca_upstream_destroy(dev);
    d.vm_backing = CCA_VM_WHOLE_MAPS;
    cr_assert_eq(ccr_device_open_with(&d, &dev, NULL), CCR_OK, "%s", ccr_last_error());
    cr_assert_eq(cca_upstream_vm_backing(dev), CCA_VM_WHOLE_MAPS);
    cca_upstream_destroy(dev);
    o.vm_backing = CCA_VM_PAGES;
    cr_assert_eq(ccr_engine_create(&o, &e), CCR_OK, "%s", ccr_last_error());
    cr_assert_eq(cca_upstream_vm_backing(ccr_engine_upstream(e)), CCA_VM_PAGES);
    ccr_model *m;
    cr_assert_eq(ccr_model_load_spec(e, "mlp:64x64", &m), CCR_OK, "%s", ccr_last_error());
    ccr_engine_destroy(e);
}

Test(runtime_engine, two_engines_share_one_device) {
    cca_upstream *dev;
    cr_assert_eq(ccr_device_open(CCR_DEVICE_HOST, 0, 64 * MiB, &dev, NULL), CCR_OK);
    ccr_engine_options o;
    ccr_engine_options_default(&o);
    o.upstream = dev;
    o.alloc_conf = "policy:greedy";
    ccr_engine *a, *b;
    cr_assert_eq(ccr_engine_create(&o, &a), CCR_OK, "%s", ccr_last_error());
    o.alloc_conf = "policy:growth";
    cr_assert_eq(ccr_engine_create(&o, &b), CCR_OK, "%s", ccr_last_error());
    ccr_model *m;
    /* the greedy tenant holds 90%: a 16 MiB model cannot load in the other */
    cr_expect_eq(ccr_model_load_spec(b, "mlp:2048x2048", &m), CCR_ERR_OUT_OF_MEMORY);
    ccr_engine_release(a, NULL);
    cr_expect_eq(ccr_model_load_spec(b, "mlp:2048x2048", &m), CCR_OK, "%s", ccr_last_error());
    ccr_engine_destroy(a);
    ccr_engine_destroy(b);
    cca_upstream_stats us;
    cca_upstream_get_stats(dev, &us);
    cr_expect_eq(us.bytes_in_use, 0);
    cca_upstream_destroy(dev);
}

/* A fresh temporary file's name in path (a "..._XXXXXX" template). */
static void temp_file(char *path) {
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
}

/* Open a timeline on `path`, load `spec` on a 64 MiB simulated device
 * writing to it, run one batch of 5 when `spec` is given, release and
 * destroy the engine. Returns the timeline, still open. */
/* An engine on a 64 MiB simulated device writing timeline tl. */
static ccr_engine *timeline_engine(ccr_timeline *tl) {
    ccr_engine_options o;
    ccr_engine_options_default(&o);
    o.device = CCR_DEVICE_HOST;
    o.host_capacity = 64 * MiB;
    o.timeline = tl;
    ccr_engine *e;
    cr_assert_eq(ccr_engine_create(&o, &e), CCR_OK, "%s", ccr_last_error());
    return e;
}

static ccr_timeline *timeline_of_run(const char *path, const char *spec) {
    ccr_timeline *tl;
    cr_assert_eq(ccr_timeline_open(path, &tl), CCR_OK, "%s", ccr_last_error());
    ccr_engine *e = timeline_engine(tl);
    ccr_model *m;
    if (spec) {
        cr_assert_eq(ccr_model_load_spec(e, spec, &m), CCR_OK);
        run_once(m, 5);
    }
    ccr_engine_release(e, NULL);
    ccr_engine_destroy(e);
    return tl;
}

/* A number as the timeline writes it: digits, '.', exactly `decimals` digits
 * (C's format, whatever the program's locale). */
static void expect_fixed(const char *field, size_t decimals, const char *what) {
    size_t n = strspn(field, "0123456789");
    cr_expect(n > 0 && field[n] == '.' && strspn(field + n + 1, "0123456789") == decimals &&
                  (field[n + 1 + decimals] == '\0' || field[n + 1 + decimals] == '\n'),
              "%s '%s': not digits '.' and %zu digits", what, field, decimals);
}

/* The rows of a model's life: 10 columns each, allocs and frees balanced,
 * t_ms with 3 decimals and fragmentation with 6, in C's format. comma: the
 * model runs in a locale with a decimal comma; the rows are read back in
 * the C locale. */
static void check_timeline_rows(int comma) {
    char path[] = "/tmp/ccr_timeline_XXXXXX";
    temp_file(path);
    if (comma)
        tu_comma_locale();
    cr_expect_eq(ccr_timeline_close(timeline_of_run(path, "mlp:32x64x64x10:relu:softmax")), CCR_OK);
    setlocale(LC_ALL, "C");
    FILE *f = fopen(path, "r");
    char line[512];
    cr_assert_not_null(fgets(line, sizeof line, f));
    cr_expect_str_eq(line, "t_ms,event,phase,model,tag,bytes,allocated,reserved,device_free,fragmentation\n");
    size_t allocs = 0, frees = 0, phases = 0, last_alloc = 1, frees_of_nothing = 0, run_tags = 0;
    size_t prev_allocated = 0, alloc_bytes = 0, free_bytes = 0;
    /* bytes allocated minus freed per tag: a block is freed under the tag it
     * was allocated with */
    const char *tags[] = {"weight", "bias", "input", "activation", "probs"};
    long long by_tag[5] = {0};
    double last_t = 0;
    while (fgets(line, sizeof line, f)) {
        char *field[10];
        size_t cols = 0;
        field[0] = line;
        for (char *p = line; *p; p++)
            if (*p == ',' && ++cols < 10) {
                *p = '\0';
                field[cols] = p + 1;
            }
        cr_assert_eq(cols, 9, "row at t_ms %s", line);
        const char *event = field[1];
        expect_fixed(field[0], 3, "t_ms");
        expect_fixed(field[9], 6, "fragmentation");
        last_t = strtod(field[0], NULL);
        allocs += !strcmp(event, "alloc");
        frees += !strcmp(event, "free");
        frees_of_nothing += !strcmp(event, "free") && strtoull(field[5], NULL, 10) == 0;
        phases += !strcmp(event, "phase");
        run_tags += !strcmp(event, "phase") && !strcmp(field[4], "batch=5"); /* a run's phase row: its batch */
        last_alloc = strtoull(field[6], NULL, 10);
        /* a row's bytes are what its event moved `allocated` by: the
         * block's size, the same on its alloc and its free row */
        size_t bytes = strtoull(field[5], NULL, 10);
        if (!strcmp(event, "alloc") || !strcmp(event, "free")) {
            bool alloc = !strcmp(event, "alloc");
            cr_expect_eq(alloc ? last_alloc - prev_allocated : prev_allocated - last_alloc, bytes,
                         "%s %s: allocated %zu -> %zu, row says %zu bytes", event, field[4], prev_allocated, last_alloc,
                         bytes);
            *(alloc ? &alloc_bytes : &free_bytes) += bytes;
            size_t t = 0;
            while (t < 5 && strcmp(field[4], tags[t]))
                t++;
            cr_assert_lt(t, 5, "a row tagged '%s'", field[4]);
            by_tag[t] += alloc ? (long long)bytes : -(long long)bytes;
        } else {
            cr_expect_eq(last_alloc, prev_allocated, "a %s row moves allocated", event);
        }
        prev_allocated = last_alloc;
    }
    fclose(f);
    unlink(path);
    /* 6 tensors, 1 input, 3 activations, 1 probs: 11 allocs, all freed */
    cr_expect_eq(allocs, 11);
    cr_expect_eq(frees, allocs);
    cr_expect_eq(free_bytes, alloc_bytes, "the bytes balance");
    for (size_t t = 0; t < 5; t++)
        cr_expect_eq(by_tag[t], 0, "tag %s: %lld bytes allocated and never freed under it", tags[t], by_tag[t]);
    cr_expect_eq(frees_of_nothing, 0, "a free row gives the block's bytes");
    cr_expect_geq(phases, 4);
    cr_expect_eq(run_tags, 1);
    cr_expect_eq(last_alloc, 0);
    cr_expect_gt(last_t, 0.0, "t_ms counts from the open, below a second too");
}

Test(runtime_engine, timeline_rows_balance) {
    check_timeline_rows(0);
}

/* A program whose locale writes a decimal comma (setlocale(LC_ALL, "")
 * under LANG=de_DE.UTF-8) gets the same rows: "0,012" would be two fields
 * of a CSV row. The test reads them back in the C locale. */
Test(runtime_engine, timeline_numbers_are_c_format_in_a_comma_locale) {
    check_timeline_rows(1);
}

/* Model names are written CSV-safe: a path with ',' and '"' keeps every row
 * at 10 columns, those characters dropped from the model field. */
Test(runtime_engine, timeline_model_names_stay_one_field) {
    char path[] = "/tmp/ccr_timeline_XXXXXX", model[96];
    temp_file(path);
    snprintf(model, sizeof model, "%s-a,b\"c.safetensors", path);
    ccr_engine *e = host_engine(16 * MiB, NULL);
    ccr_model *m;
    cr_assert_eq(ccr_model_load_spec(e, "mlp:4x2", &m), CCR_OK, "%s", ccr_last_error());
    cr_assert_eq(ccr_model_save(m, model), CCR_OK, "%s", ccr_last_error());
    ccr_engine_destroy(e);
    ccr_timeline *tl;
    cr_assert_eq(ccr_timeline_open(path, &tl), CCR_OK, "%s", ccr_last_error());
    e = timeline_engine(tl);
    cr_assert_eq(ccr_model_load_file(e, model, &m), CCR_OK, "%s", ccr_last_error());
    ccr_model_unload(m);
    ccr_engine_destroy(e);
    cr_expect_eq(ccr_timeline_close(tl), CCR_OK, "%s", ccr_last_error());
    char want[96], line[512];
    snprintf(want, sizeof want, ",%s-abc.safetensors,", path);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    size_t named = 0;
    while (fgets(line, sizeof line, f)) {
        size_t cols = 0;
        for (char *p = line; *p; p++)
            cols += *p == ',';
        cr_expect_eq(cols, 9, "row %s", line);
        named += strstr(line, want) != NULL;
    }
    fclose(f);
    cr_expect_gt(named, 0, "no row names the model as '%s'", want);
    unlink(path);
    unlink(model);
}

/* A timeline whose rows cannot all be written (a full device) says so at
 * close: CCR_ERR_IO naming the file and the reason; a complete one is CCR_OK. */
Test(runtime_engine, timeline_write_failure_is_reported_at_close) {
    cr_expect_eq(ccr_timeline_close(timeline_of_run("/dev/full", "mlp:32x64x10:relu:softmax")), CCR_ERR_IO);
    cr_expect_str_eq(ccr_last_error(), "/dev/full: write failed: No space left on device");
    /* a few rows, all buffered until the close: the close's own flush fails */
    cr_expect_eq(ccr_timeline_close(timeline_of_run("/dev/full", NULL)), CCR_ERR_IO);
    cr_expect_str_eq(ccr_last_error(), "/dev/full: write failed: No space left on device");
    cr_expect_eq(ccr_timeline_close(NULL), CCR_OK);
}

/* The trace's state as the marks found it: CCR_OK while not tracing or
 * written whole; from the first mark that found the recording stopped (a
 * full device: the engine's "create" mark) CCR_ERR_IO with the allocator's
 * message, and the engine keeps working; NULL is refused. Each test runs
 * in its own process, so CCALLOC_TRACE is its own: one trace per process,
 * its path fixed at the first opening, hence three tests. A file the
 * library would not open (a missing directory) is the engine's error from
 * its creation on (cca_trace_status). */
static void load_and_unload(ccr_engine *e) {
    ccr_model *m;
    cr_assert_eq(ccr_model_load_spec(e, "mlp:8x8", &m), CCR_OK, "%s", ccr_last_error());
    run_once(m, 2);
    ccr_model_unload(m);
}

Test(runtime_engine, a_trace_written_whole_is_no_error) {
    cr_expect_eq(ccr_engine_trace_status(NULL), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(ccr_last_error(), "engine is NULL");
    unsetenv("CCALLOC_TRACE");
    ccr_engine *e = host_engine(16 * MiB, "");
    load_and_unload(e);
    cr_expect_eq(ccr_engine_trace_status(e), CCR_OK, "not tracing");
    ccr_engine_destroy(e);

    char path[] = "/tmp/ccr_trace_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    setenv("CCALLOC_TRACE", path, 1);
    e = host_engine(16 * MiB, "");
    load_and_unload(e);
    cr_expect_eq(ccr_engine_trace_status(e), CCR_OK, "a trace written whole: %s", ccr_last_error());
    ccr_engine_destroy(e);
    unsetenv("CCALLOC_TRACE");
    FILE *f = fopen(path, "r");
    char line[256];
    size_t marks = 0;
    while (f && fgets(line, sizeof line, f))
        marks += strstr(line, ",mark,") != NULL;
    cr_expect_gt(marks, 0, "the engine's phases are in the trace");
    if (f)
        fclose(f);
    unlink(path);
}

Test(runtime_engine, a_trace_that_could_not_be_written_is_the_engines_error) {
    setenv("CCALLOC_TRACE", "/dev/full", 1);
    ccr_engine *e = host_engine(16 * MiB, "");
    const char *want = "CCALLOC_TRACE: cca_trace_mark: writing the trace failed, the recording is incomplete: "
                       "'/dev/full'";
    cr_expect_eq(ccr_engine_trace_status(e), CCR_ERR_IO);
    cr_expect_str_eq(ccr_last_error(), want);
    load_and_unload(e); /* the engine keeps working */
    cr_expect_eq(ccr_engine_trace_status(e), CCR_ERR_IO, "it stays failed");
    cr_expect_str_eq(ccr_last_error(), want, "the first failure's message");
    ccr_engine_destroy(e);
    unsetenv("CCALLOC_TRACE");
}

Test(runtime_engine, a_trace_that_could_not_be_opened_is_the_engines_error) {
    setenv("CCALLOC_TRACE", "/nonexistent-ccr-dir/t.csv", 1);
    ccr_clear_error();
    ccr_engine *e = host_engine(16 * MiB, "");
    cr_expect_str_eq(ccr_last_error(), "", "a creation that succeeded set a message");
    const char *want = "CCALLOC_TRACE: cca_trace_status: not tracing: cannot open for writing (No such file or "
                       "directory): '/nonexistent-ccr-dir/t.csv'";
    cr_expect_eq(ccr_engine_trace_status(e), CCR_ERR_IO, "from the creation on");
    cr_expect_str_eq(ccr_last_error(), want);
    load_and_unload(e); /* the engine keeps working */
    cr_expect_eq(ccr_engine_trace_status(e), CCR_ERR_IO, "it stays failed");
    cr_expect_str_eq(ccr_last_error(), want);
    ccr_engine_destroy(e);
    unsetenv("CCALLOC_TRACE");
}

/* A mark the allocator refuses for another reason than a stopped recording
 * (made from inside one of its upstream ops: CCA_ERR_INVALID_ARGUMENT) is
 * no trace failure: the status stays CCR_OK. The device here forwards to a
 * host one and marks the engine on each alloc. */
static ccr_engine *marking_engine;
static cca_status marking_alloc(void *ctx, size_t size, void **ptr) {
    if (marking_engine)
        ccr_engine_mark(marking_engine, "inside-an-op", NULL);
    return cca_upstream_alloc(ctx, size, ptr);
}
static cca_status marking_free(void *ctx, void *ptr, size_t size) {
    return cca_upstream_free(ctx, ptr, size);
}
static cca_status marking_mem_info(void *ctx, size_t *free_bytes, size_t *total_bytes) {
    return cca_upstream_mem_info(ctx, free_bytes, total_bytes);
}

Test(runtime_engine, a_mark_refused_inside_an_op_is_no_trace_failure) {
    cca_upstream *host, *dev;
    cr_assert_eq(ccr_device_open(CCR_DEVICE_HOST, 0, 64 * MiB, &host, NULL), CCR_OK);
    cca_upstream_ops ops = {.alloc = marking_alloc, .free = marking_free, .mem_info = marking_mem_info};
    cr_assert_eq(cca_upstream_custom_create(&ops, host, &dev), CCA_OK, "%s", cca_last_error());
    ccr_engine_options o;
    ccr_engine_options_default(&o);
    o.upstream = dev;
    ccr_engine *e;
    cr_assert_eq(ccr_engine_create(&o, &e), CCR_OK, "%s", ccr_last_error());
    marking_engine = e;
    load_and_unload(e);
    marking_engine = NULL;
    cr_expect_eq(ccr_engine_trace_status(e), CCR_OK, "%s", ccr_last_error());
    ccr_engine_destroy(e);
    cca_upstream_destroy(dev);
    cca_upstream_destroy(host);
}

/* A batch that cannot fit is refused before anything is allocated or read,
 * naming what it needs and what the device can give. */
Test(runtime_engine, batch_too_large_for_the_device_is_refused_up_front) {
    ccr_engine *e = host_engine(64 * MiB, NULL);
    ccr_model *m;
    cr_assert_eq(ccr_model_load_spec(e, "mlp:64x1", &m), CCR_OK, "%s", ccr_last_error());
    float x[64] = {0}, y[1];
    /* 2^24 rows x 64 floats = 4 GiB of input: no 64 MiB device holds it.
     * x is 1 row long: a check that came after the upload would crash. */
    cr_expect_eq(ccr_model_run(m, x, (size_t)1 << 24, y), CCR_ERR_OUT_OF_MEMORY);
    cr_expect(strstr(ccr_last_error(), "batch 16777216 of model 'mlp:64x1' needs at least ") != NULL, "%s",
              ccr_last_error());
    cr_expect(strstr(ccr_last_error(), "at most 64.00 MiB (67108864 bytes) is available (the device's total)") != NULL,
              "%s", ccr_last_error());
    /* the figure: weights held + input (64) and output (1) floats per row */
    size_t need = 0;
    cr_expect_eq(ccr_model_check_batch(m, (size_t)1 << 24, &need), CCR_ERR_OUT_OF_MEMORY);
    cr_expect_eq(need, ccr_model_device_bytes(m) + ((size_t)1 << 24) * 65 * sizeof(float));
    cr_expect_eq(ccr_model_check_batch(m, 1000, &need), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(need, ccr_model_device_bytes(m) + 1000 * 65 * sizeof(float));
    cr_expect_eq(ccr_model_check_batch(m, SIZE_MAX, &need), CCR_ERR_OUT_OF_MEMORY);
    cr_expect_eq(need, SIZE_MAX);
    cr_expect(strstr(ccr_last_error(), "needs more than 2^64 bytes") != NULL, "%s", ccr_last_error());
    cr_expect_eq(live_bytes(e), ccr_model_device_bytes(m), "only the weights are held");
    ccr_model_unload(m);
    /* max_reserved below the total is the limit that counts */
    ccr_engine_destroy(e);
    e = host_engine(64 * MiB, "max_reserved:4M");
    cr_assert_eq(ccr_model_load_spec(e, "mlp:64x1", &m), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(ccr_model_run(m, x, (size_t)1 << 20, y), CCR_ERR_OUT_OF_MEMORY);
    cr_expect(strstr(ccr_last_error(), "at most 4.00 MiB (4194304 bytes) is available (max_reserved)") != NULL, "%s",
              ccr_last_error());
    ccr_engine_destroy(e);
    /* greedy: the arena is all the allocator can ever hold (ccalloc.h, also
     * after an empty-cache released it), however large the device */
    static const char *const greedy[] = {"policy:greedy,greedy_bytes:4M", "policy:greedy,greedy_fraction:0.0625",
                                         "policy:greedy,expandable:1,greedy_bytes:4M"};
    for (size_t k = 0; k < sizeof greedy / sizeof greedy[0]; k++) {
        e = host_engine(64 * MiB, greedy[k]);
        cr_assert_eq(ccr_model_load_spec(e, "mlp:64x1", &m), CCR_OK, "%s", ccr_last_error());
        for (int released = 0; released < 2; released++) {
            /* 100000 rows x 65 floats: 24.8 MiB, within the device, not the arena */
            cr_expect_eq(ccr_model_check_batch(m, 100000, &need), CCR_ERR_OUT_OF_MEMORY, "%s", greedy[k]);
            cr_expect(strstr(ccr_last_error(), "at most 4.00 MiB (4194304 bytes) is available (the greedy arena)") !=
                          NULL,
                      "%s: %s", greedy[k], ccr_last_error());
            cr_expect_eq(ccr_model_run(m, x, 100000, y), CCR_ERR_OUT_OF_MEMORY);
            cr_expect(strstr(ccr_last_error(), "(the greedy arena)") != NULL, "%s", ccr_last_error());
            cr_expect_eq(ccr_model_check_batch(m, 1000, &need), CCR_OK, "%s: %s", greedy[k], ccr_last_error());
            cr_assert_eq(ccr_engine_release(e, NULL), CCR_OK, "%s", ccr_last_error());
            cr_assert_eq(ccr_model_load_spec(e, "mlp:64x1", &m), CCR_OK, "%s", ccr_last_error());
        }
        ccr_engine_destroy(e);
    }
}

/* The check's bound is inclusive: a batch that needs exactly what the
 * allocator may hold passes, one row more does not; batch 0 is refused by
 * the check itself (a caller asks it before a run). */
Test(runtime_engine, the_batch_check_is_exact_at_the_limit) {
    ccr_engine *e = host_engine(64 * MiB, NULL);
    ccr_model *m;
    cr_assert_eq(ccr_model_load_spec(e, "mlp:64x1", &m), CCR_OK, "%s", ccr_last_error());
    size_t need = 1;
    cr_expect_eq(ccr_model_check_batch(m, 0, &need), CCR_ERR_INVALID_ARGUMENT);
    cr_expect_str_eq(ccr_last_error(), "batch size is 0");
    cr_expect_eq(need, 0);
    cr_assert_eq(ccr_model_check_batch(m, 16384, &need), CCR_OK, "%s", ccr_last_error());
    ccr_engine_destroy(e);
    char conf[64];
    snprintf(conf, sizeof conf, "max_reserved:%zu", need);
    e = host_engine(64 * MiB, conf);
    cr_assert_eq(ccr_model_load_spec(e, "mlp:64x1", &m), CCR_OK, "%s", ccr_last_error());
    size_t again = 0;
    cr_expect_eq(ccr_model_check_batch(m, 16384, &again), CCR_OK, "%s: %s", conf, ccr_last_error());
    cr_expect_eq(again, need);
    cr_expect_eq(ccr_model_check_batch(m, 16385, &again), CCR_ERR_OUT_OF_MEMORY, "%s", conf);
    ccr_engine_destroy(e);
}

/* The allocator decides where blocks go, never what a model computes: the
 * same models and inputs give the same output bytes under every allocator
 * configuration (pools, segment sizes, splitting, expandable segments and
 * their mapping ahead, greedy arenas, history, a cap), with domains and
 * without, batch sizes changing from pass to pass. */
Test(runtime_engine, outputs_are_the_same_bytes_under_every_allocator_configuration) {
    static const char *const specs[] = {"mlp:96x700x300x10:relu:softmax:seed=7", "mlp:40x64x33:gelu:nobias:seed=9"};
    static const size_t batches[] = {1, 37, 5, 64};
    static const char *const confs[] = {
        NULL,
        "expandable:0",
        "expandable:1,expandable_ahead:0",
        "expandable:1,expandable_ahead:1",
        "policy:greedy,expandable:0,greedy_bytes:12M",
        "policy:greedy,greedy_bytes:12M",
        "expandable:0,max_split:21M",
        "small_pool:0",
        "medium_pool:0",
        "small_max:512,small_segment:64K,medium_segment:64K,large_min:512,segment_round:512",
        "history:1",
        "max_reserved:12M",
    };
    float *want[2][4] = {{0}}, x[64 * 96], y[64 * 33];
    for (size_t i = 0; i < sizeof x / sizeof x[0]; i++)
        x[i] = (float)((i * 7919) % 1009) / 1009.0f - 0.5f;
    for (size_t c = 0; c <= sizeof confs / sizeof confs[0]; c++) {
        for (int domains = 0; domains < 2; domains++) {
            const char *conf = c ? confs[c - 1] : NULL; /* c 0: the reference, defaults */
            ccr_engine *e = host_engine_domains(64 * MiB, conf, domains);
            ccr_model *m[2];
            for (int k = 0; k < 2; k++) /* both loaded at once: blocks interleave */
                cr_assert_eq(ccr_model_load_spec(e, specs[k], &m[k]), CCR_OK, "%s: %s", conf, ccr_last_error());
            for (int k = 0; k < 2; k++) {
                size_t out = ccr_model_arch(m[k])->layers[ccr_model_arch(m[k])->n_layers - 1].out;
                for (size_t b = 0; b < 4; b++) {
                    cr_assert_eq(ccr_model_run(m[k], x, batches[b], y), CCR_OK, "%s: %s", conf, ccr_last_error());
                    size_t bytes = batches[b] * out * sizeof(float);
                    if (!want[k][b]) {
                        want[k][b] = malloc(bytes);
                        memcpy(want[k][b], y, bytes);
                    }
                    cr_expect_eq(memcmp(y, want[k][b], bytes), 0, "%s, domains %d: model %d, batch %zu: other bytes",
                                 conf ? conf : "defaults", domains, k, batches[b]);
                }
            }
            ccr_release_info r;
            cr_assert_eq(ccr_engine_release(e, &r), CCR_OK, "%s", ccr_last_error());
            cr_expect_eq(r.live_bytes_after, 0);
            ccr_engine_destroy(e);
        }
    }
    for (int k = 0; k < 2; k++)
        for (size_t b = 0; b < 4; b++)
            free(want[k][b]);
}
