/*
 * test_runtime_fixture.c — runtime/src/infer.c: the engine against a real client: scikit-learn.
 *
 * tests/fixtures/make_digits.py trained an MLPClassifier (64 -> 64 relu ->
 * 10 softmax) on sklearn's bundled digits and wrote the weights with the
 * safetensors package, plus predict_proba and labels for the held-out
 * split. On the simulated device (always) the engine must reproduce every
 * probability within 1e-5 and sklearn's accuracy exactly. The F16 and BF16
 * copies of the same weights check dtype conversion (looser tolerance:
 * rounding the weights changes the model). Saving and reloading a model
 * must give bit-identical outputs; a spec model's seeded weights are pinned
 * bit for bit and saved under nn.Sequential's names.
 */
#include <stdio.h>
#include <unistd.h>

#include "test_runtime_util.h"

Test(runtime_fixture, digits_match_sklearn_on_host) {
    ccr_engine *e = host_engine(64u << 20, "policy:growth");
    double sk, err;
    double acc = check_digits(e, "digits_mlp.safetensors", 1e-5, &sk, &err);
    cr_expect_eq(acc, sk, "engine accuracy %.4f != sklearn %.4f", acc, sk);
    cr_expect_geq(acc, 0.95);
    cr_log_info("digits on host: accuracy %.4f (sklearn %.4f), max prob error %.3g", acc, sk, err);
    cr_expect_eq(live_bytes(e), 0);
    ccr_engine_destroy(e);
}

Test(runtime_fixture, digits_f16_and_bf16_weights_convert) {
    ccr_engine *e = host_engine(64u << 20, NULL);
    const char *files[] = {"digits_mlp_f16.safetensors", "digits_mlp_bf16.safetensors"};
    for (int i = 0; i < 2; i++) {
        double sk, err;
        double acc = check_digits(e, files[i], 0.05, &sk, &err);
        cr_expect_geq(acc, sk - 0.01, "%s: accuracy %.4f vs sklearn %.4f", files[i], acc, sk);
        cr_log_info("%s: accuracy %.4f, max prob error %.3g", files[i], acc, err);
    }
    ccr_engine_destroy(e);
}

Test(runtime_fixture, digits_greedy_policy_same_answers) {
    ccr_engine *e = host_engine(64u << 20, "policy:greedy,greedy_fraction:0.5");
    double sk;
    cr_expect_eq(check_digits(e, "digits_mlp.safetensors", 1e-5, &sk, NULL), sk);
    ccr_engine_destroy(e);
}

static void run_rows(ccr_model *m, const float *x, size_t batch, float *y) {
    cr_assert_eq(ccr_model_run(m, x, batch, y), CCR_OK, "%s", ccr_last_error());
}

static void roundtrip(ccr_engine *e, const char *source) {
    char path[] = "/tmp/ccr_roundtrip_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    ccr_model *a, *b;
    cr_assert_eq(ccr_model_load(e, source, &a), CCR_OK, "%s", ccr_last_error());
    cr_assert_eq(ccr_model_save(a, path), CCR_OK, "%s", ccr_last_error());
    cr_assert_eq(ccr_model_load_file(e, path, &b), CCR_OK, "%s", ccr_last_error());
    const ccr_arch *aa = ccr_model_arch(a), *ab = ccr_model_arch(b);
    cr_assert_eq(aa->n_layers, ab->n_layers);
    cr_assert_eq(aa->softmax, ab->softmax);
    for (size_t i = 0; i < aa->n_layers; i++) {
        cr_expect_eq(aa->layers[i].in, ab->layers[i].in);
        cr_expect_eq(aa->layers[i].out, ab->layers[i].out);
        cr_expect_eq(aa->layers[i].act, ab->layers[i].act);
        cr_expect_eq(aa->layers[i].has_bias, ab->layers[i].has_bias);
    }
    size_t in = aa->layers[0].in, out = aa->layers[aa->n_layers - 1].out, batch = 5;
    float *x = malloc(batch * in * sizeof(float)), *ya = malloc(batch * out * sizeof(float)),
          *yb = malloc(batch * out * sizeof(float));
    for (size_t i = 0; i < batch * in; i++)
        x[i] = (float)((i * 37) % 101) / 101.0f;
    run_rows(a, x, batch, ya);
    run_rows(b, x, batch, yb);
    cr_expect_eq(memcmp(ya, yb, batch * out * sizeof(float)), 0, "%s: reloaded model differs", source);
    ccr_model_unload(a);
    ccr_model_unload(b);
    free(x);
    free(ya);
    free(yb);
    unlink(path);
}

Test(runtime_fixture, save_and_reload_is_bit_identical) {
    ccr_engine *e = host_engine(128u << 20, NULL);
    roundtrip(e, fixture_path("digits_mlp.safetensors"));
    roundtrip(e, "mlp:33x65x17x5:gelu:softmax:seed=9");
    roundtrip(e, "mlp:8x8x8:acts=relu/gelu:nosoftmax:nobias");
    cr_expect_eq(live_bytes(e), 0);
    ccr_engine_destroy(e);
}

/* A spec model's weights are the same numbers on every machine, thread
 * count and device (model.c, random_weight: uniform in [-1/sqrt(in),
 * 1/sqrt(in)), one stream per tensor); pinned here bit for bit, and saved
 * under nn.Sequential's names (a Linear, then its activation module). */
Test(runtime_fixture, a_spec_models_weights_are_pinned_and_saved_as_nn_sequential) {
    static const struct {
        const char *name;
        size_t count;
        uint32_t first[3];
    } want[] = {
        {"0.weight", 12, {0xbde1a3c0, 0x3e0041a4, 0xbe559578}},
        {"0.bias", 3, {0xbec71c2a, 0xbdb55350, 0x3e384f78}},
        {"2.weight", 6, {0x3ec2bb5d, 0x3e983cdb, 0x3d08647c}},
        {"2.bias", 2, {0xbedb122a, 0x3e5e3624, 0}},
    };
    char path[64];
    snprintf(path, sizeof path, "/tmp/ccr-pinned-%ld.safetensors", (long)getpid());
    ccr_engine *e = host_engine(16u << 20, NULL);
    ccr_model *m;
    cr_assert_eq(ccr_model_load_spec(e, "mlp:4x3x2:relu:seed=7", &m), CCR_OK, "%s", ccr_last_error());
    cr_assert_eq(ccr_model_save(m, path), CCR_OK, "%s", ccr_last_error());
    ccr_model_unload(m);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        size_t n;
        float *v = read_tensor(path, want[i].name, &n);
        cr_expect_eq(n, want[i].count, "%s", want[i].name);
        for (size_t k = 0; k < 3 && k < n; k++) {
            uint32_t bits;
            memcpy(&bits, &v[k], 4);
            cr_expect_eq(bits, want[i].first[k], "%s[%zu]: 0x%08x (%g), want 0x%08x", want[i].name, k, bits, v[k],
                         want[i].first[k]);
        }
        free(v);
    }
    unlink(path);
    ccr_engine_destroy(e);
}
