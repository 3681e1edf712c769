/*
 * test_runtime_util.h — shared by the runtime test suites: fixture paths
 * and reading named tensors of a safetensors file (through the runtime's
 * own loader, so tests need no Python).
 */
#ifndef TEST_RUNTIME_UTIL_H
#define TEST_RUNTIME_UTIL_H

#include "source_dir.h" /* tests/support */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ccr.h"
#include "internal.h" /* runtime/src: ccr_st_* */

/* $CCA_SOURCE_DIR/tests/fixtures/<name> (CTest sets CCA_SOURCE_DIR). */
static inline const char *fixture_path(const char *name) {
    static char buf[4][1024];
    static int next;
    const char *root = tu_source_dir();
    char *out = buf[next++ % 4];
    snprintf(out, sizeof buf[0], "%s/tests/fixtures/%s", root, name);
    return out;
}

/* Read tensor `name` of file `path` as floats (malloc'd); *count elements. */
static inline float *read_tensor(const char *path, const char *name, size_t *count) {
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s (is CCA_SOURCE_DIR set?)", path);
    ccr_st_file st;
    cr_assert_eq(ccr_st_open(f, path, &st), CCR_OK, "%s", ccr_last_error());
    const ccr_st_tensor *t = ccr_st_find(&st, name);
    cr_assert_not_null(t, "%s: no tensor %s", path, name);
    float *v = malloc((t->count ? t->count : 1) * sizeof(float));
    cr_assert_eq(ccr_st_read_f32(&st, t, v), CCR_OK, "%s", ccr_last_error());
    *count = t->count;
    ccr_st_close(&st);
    fclose(f);
    return v;
}

/* An engine on device `up` (borrowed), or on a simulated device of
 * `capacity` bytes when up is NULL, with allocator config `conf`; domains 0
 * puts every model in the allocator's default domain (one shared pool);
 * sidecar: footprint sidecars; warn: the warning sink (NULL: stderr). */
static inline ccr_engine *test_engine(cca_upstream *up, size_t capacity, const char *conf, int domains, int sidecar,
                                      ccr_warn_fn warn) {
    ccr_engine_options o;
    ccr_engine_options_default(&o);
    o.device = CCR_DEVICE_HOST;
    o.host_capacity = capacity;
    o.upstream = up;
    o.alloc_conf = conf;
    o.domains = domains;
    o.footprint_sidecar = sidecar;
    o.warn = warn;
    ccr_engine *e = NULL;
    cr_assert_eq(ccr_engine_create(&o, &e), CCR_OK, "%s: %s", conf ? conf : "defaults", ccr_last_error());
    return e;
}

static inline ccr_engine *host_engine_domains(size_t capacity, const char *conf, int domains) {
    return test_engine(NULL, capacity, conf, domains, 0, NULL);
}

static inline ccr_engine *host_engine(size_t capacity, const char *conf) {
    return host_engine_domains(capacity, conf, 1);
}

static inline size_t live_bytes(ccr_engine *e) {
    cca_stats s;
    cca_get_stats(ccr_engine_allocator(e), &s);
    return s.allocated_bytes;
}

static inline size_t reserved_bytes(ccr_engine *e) {
    cca_stats s;
    cca_get_stats(ccr_engine_allocator(e), &s);
    return s.reserved_bytes;
}

/* The device's free memory now. */
static inline size_t dev_free(ccr_engine *e) {
    size_t f = 0, t = 0;
    cr_assert_eq(cca_upstream_mem_info(ccr_engine_upstream(e), &f, &t), CCA_OK);
    return f;
}

/* The stats of m's own domain (it must have one). */
static inline cca_domain_stats dstats(ccr_engine *e, ccr_model *m) {
    cca_domain_stats s;
    cr_assert_not_null(ccr_model_domain(m));
    cr_assert_eq(cca_get_domain_stats(ccr_engine_allocator(e), ccr_model_domain(m), &s), CCA_OK);
    return s;
}

/* `batch` rows of a fixed input through m: the outputs (malloc'd), for
 * comparing. */
static inline float *outputs_of(ccr_model *m, size_t batch) {
    const ccr_arch *a = ccr_model_arch(m);
    size_t in = a->layers[0].in, out = a->layers[a->n_layers - 1].out;
    float *x = malloc(batch * in * sizeof(float)), *y = malloc(batch * out * sizeof(float));
    for (size_t i = 0; i < batch * in; i++)
        x[i] = (float)((i * 7919) % 1009) / 1009.0f;
    cr_assert_eq(ccr_model_run(m, x, batch, y), CCR_OK, "%s", ccr_last_error());
    free(x);
    return y;
}

/* outputs_of(m, batch) is `want`, byte for byte. */
static inline void expect_same_outputs(ccr_model *m, size_t batch, const float *want, const char *when) {
    const ccr_arch *a = ccr_model_arch(m);
    float *y = outputs_of(m, batch);
    cr_expect_eq(memcmp(y, want, batch * a->layers[a->n_layers - 1].out * sizeof(float)), 0, "outputs changed %s",
                 when);
    free(y);
}

/* Run the held-out digits through `model_file` on engine e, in batches of
 * changing size; check every probability against sklearn's within `tol`
 * and return the engine's accuracy. *sk_acc gets sklearn's. */
static inline double check_digits(ccr_engine *e, const char *model_file, double tol, double *sk_acc, double *max_err) {
    const char *data = fixture_path("digits_test.safetensors");
    size_t nx, np_, nl, ns;
    float *x = read_tensor(data, "x", &nx);
    float *proba = read_tensor(data, "proba", &np_);
    float *labels = read_tensor(data, "labels", &nl);
    float *skpred = read_tensor(data, "sklearn_pred", &ns);
    cr_assert_eq(nx, nl * 64);
    cr_assert_eq(np_, nl * 10);
    ccr_model *m;
    cr_assert_eq(ccr_model_load_file(e, fixture_path(model_file), &m), CCR_OK, "%s", ccr_last_error());
    float *y = malloc(np_ * sizeof(float));
    static const size_t batches[] = {1, 7, 64, 3, 128, 33};
    size_t row = 0, k = 0;
    while (row < nl) {
        size_t b = batches[k++ % 6];
        if (b > nl - row)
            b = nl - row;
        cr_assert_eq(ccr_model_run(m, x + row * 64, b, y + row * 10), CCR_OK, "%s", ccr_last_error());
        row += b;
    }
    double err = 0;
    size_t right = 0, sk_right = 0;
    for (size_t i = 0; i < nl; i++) {
        size_t best = 0;
        for (size_t c = 0; c < 10; c++) {
            double d = fabs((double)y[i * 10 + c] - (double)proba[i * 10 + c]);
            if (d > err)
                err = d;
            if (y[i * 10 + c] > y[i * 10 + best])
                best = c;
        }
        right += (float)best == labels[i];
        sk_right += skpred[i] == labels[i];
    }
    cr_expect_leq(err, tol, "%s: max |p_engine - p_sklearn| = %g > %g", model_file, err, tol);
    ccr_model_unload(m);
    free(x);
    free(proba);
    free(labels);
    free(skpred);
    free(y);
    *sk_acc = (double)sk_right / (double)nl;
    if (max_err)
        *max_err = err;
    return (double)right / (double)nl;
}

#endif /* TEST_RUNTIME_UTIL_H */
