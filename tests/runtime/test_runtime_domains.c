/*
 * test_runtime_domains.c — runtime/src/model.c: one memory domain per model (runtime/src/model.c,
 * engine.c, footprint.c) on the simulated device, where every figure is
 * exact:
 *
 *   - unloading one model returns all it reserved (device free rises by
 *     exactly its domain's reserved bytes) while another stays loaded and
 *     keeps producing the same output bytes; classic and expandable
 *     segments;
 *   - without domains (and under greedy) models share the pool: the unload
 *     leaves memory cached, as before domains;
 *   - a block left live in a model's domain is a leak: the unload reports it
 *     (status, info, warning), releases nothing of the domain, and
 *     ccr_engine_release destroys the domain once the block is freed (it
 *     counts the leaking model, and keeps retrying the domain until then);
 *   - footprint: the second load of a model reserves its first peak up front
 *     and then makes no upstream call during its load and runs, with a peak
 *     no higher; the key keeps the largest batch, the same batch measures
 *     afresh; a footprint for other layers (the file changed) is not used
 *     and is replaced; a failed load records none; reconfigure forgets;
 *   - sidecars: written and read across engines; hostile ones (garbage,
 *     oversized, NUL bytes, duplicates, missing or overflowing fields, other
 *     layers, absurd peaks, a FIFO, a directory) are ignored with a warning
 *     and the load succeeds; batch 2^24 is accepted; a spec reads none;
 *     a sidecar that cannot be a file (its directory /proc, a symbolic link
 *     loop, a device, a directory) is a warning at load or unload, no
 *     temporary file left behind;
 *   - a domain is named after its model's source (a long path by its tail).
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_runtime_util.h"
#include "hostile_numbers.h" /* tests/support: HOSTILE_DECIMALS */

#define MiB ((size_t)1 << 20)

static unsigned long long upstream_calls(ccr_engine *e) {
    cca_upstream_stats us;
    cca_upstream_get_stats(ccr_engine_upstream(e), &us);
    return (unsigned long long)(us.alloc_calls + us.vm_map_calls);
}

/* Warnings of the engine, kept for the test to read. */
static char warned[8][1024];
static size_t n_warned;
static void capture(void *user, const char *line) {
    (void)user;
    if (n_warned < 8)
        snprintf(warned[n_warned], sizeof warned[0], "%s", line);
    n_warned++;
}
static int warned_about(const char *words) {
    for (size_t i = 0; i < n_warned && i < 8; i++)
        if (strstr(warned[i], words))
            return 1;
    return 0;
}

static ccr_engine *engine_with(size_t capacity, const char *conf, int sidecar) {
    n_warned = 0;
    return test_engine(NULL, capacity, conf, 1, sidecar, capture);
}

/* B resident; A, then C loaded, run, unloaded: each unload gives back
 * exactly its domain's reservation, B's bytes and outputs never move. */
static void resident_sequence(const char *conf) {
    ccr_engine *e = host_engine(256 * MiB, conf);
    ccr_model *b, *m;
    cr_assert_eq(ccr_model_load_spec(e, "mlp:256x2048x2048x10:relu:softmax:seed=2", &b), CCR_OK, "%s",
                 ccr_last_error());
    float *want = outputs_of(b, 8);
    cca_domain_stats b0 = dstats(e, b);
    const char *swapped[] = {"mlp:512x1024x1024x10:relu:softmax:seed=1", "mlp:128x3000x3000x10:gelu:softmax:seed=3",
                             "mlp:64x700x900x300x10:relu:softmax:seed=4"};
    for (int k = 0; k < 3; k++) {
        cr_assert_eq(ccr_model_load_spec(e, swapped[k], &m), CCR_OK, "%s", ccr_last_error());
        free(outputs_of(m, 16));
        expect_same_outputs(b, 8, want, "while another model is loaded");
        size_t own = dstats(e, m).reserved_bytes, before = dev_free(e);
        cr_expect_gt(own, 0);
        ccr_unload_info u;
        cr_assert_eq(ccr_model_release(m, &u), CCR_OK, "%s", ccr_last_error());
        size_t after = dev_free(e);
        cr_expect(u.domain);
        cr_expect_eq(u.reserved_at_unload, own);
        cr_expect_eq(u.bytes_released, own, "%s: released %zu of %zu", conf, u.bytes_released, own);
        cr_expect_eq(after - before, own, "%s, model %d: device free rose by %zu, the model reserved %zu", conf, k,
                     after - before, own);
        cr_expect_eq(u.live_blocks, 0);
        /* B untouched: same reservation, same bytes live, same outputs */
        cca_domain_stats b1 = dstats(e, b);
        cr_expect_eq(b1.reserved_bytes, b0.reserved_bytes);
        cr_expect_eq(b1.allocated_bytes, b0.allocated_bytes);
        cr_expect_eq(reserved_bytes(e), b0.reserved_bytes, "only B's memory is left");
        expect_same_outputs(b, 8, want, "after another model's unload");
    }
    free(want);
    ccr_release_info r;
    cr_assert_eq(ccr_engine_release(e, &r), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(r.domain_bytes_released, b0.reserved_bytes);
    cr_expect_eq(r.device_free_after, r.device_free_baseline);
    cr_expect_eq(r.models_leaking, 0);
    ccr_engine_destroy(e);
}

Test(runtime_domains, unload_returns_all_of_a_models_memory_while_another_runs) {
    resident_sequence("policy:growth");
}

Test(runtime_domains, unload_returns_all_of_a_models_memory_with_expandable_segments) {
    resident_sequence("policy:growth,expandable:1");
}

/* Every device byte of a model is its domain's: weights, and activations. */
Test(runtime_domains, weights_and_activations_live_in_the_models_domain) {
    ccr_engine *e = host_engine(64 * MiB, NULL);
    ccr_model *m;
    cr_assert_eq(ccr_model_load_spec(e, "mlp:32x64x64x10:relu:softmax", &m), CCR_OK, "%s", ccr_last_error());
    cca_domain_stats s = dstats(e, m), root;
    cr_expect_eq(s.allocated_bytes, ccr_model_device_bytes(m));
    cr_expect_eq(s.alloc_calls, 6, "3 weights + 3 biases");
    free(outputs_of(m, 5));
    s = dstats(e, m);
    cr_expect_eq(s.alloc_calls, 6 + 5, "input, 3 activations, probs: in the model's domain");
    cr_expect_eq(s.allocated_bytes, ccr_model_device_bytes(m), "activations freed");
    cr_assert_eq(cca_get_domain_stats(ccr_engine_allocator(e), NULL, &root), CCA_OK);
    cr_expect_eq(root.reserved_bytes, 0, "nothing in the default domain on the simulated device");
    cr_expect_eq(root.alloc_calls, 0);
    /* a pass of n layers: n + 1 alloc/free pairs, + 1 with softmax (infer.c, docs/engine.md) */
    ccr_model *n;
    cr_assert_eq(ccr_model_load_spec(e, "mlp:32x64x64x10:relu:nosoftmax", &n), CCR_OK, "%s", ccr_last_error());
    free(outputs_of(n, 5));
    s = dstats(e, n);
    cr_expect_eq(s.alloc_calls, 6 + 4, "input, 3 activations");
    cr_expect_eq(s.allocated_bytes, ccr_model_device_bytes(n), "each freed");
    ccr_engine_destroy(e);
}

/* Domains off, and greedy: one shared pool; the unload leaves the memory cached. */
Test(runtime_domains, without_domains_models_share_the_pool) {
    ccr_engine *engines[2] = {host_engine_domains(64 * MiB, "policy:growth", 0),
                              host_engine(64 * MiB, "policy:greedy,greedy_bytes:48M")};
    for (int k = 0; k < 2; k++) {
        ccr_engine *e = engines[k];
        ccr_model *m;
        cr_assert_eq(ccr_model_load_spec(e, "mlp:512x1024x10", &m), CCR_OK, "%s", ccr_last_error());
        cr_expect_null(ccr_model_domain(m));
        size_t held = reserved_bytes(e), before = dev_free(e);
        ccr_unload_info u;
        cr_expect_eq(ccr_model_release(m, &u), CCR_OK, "%s", ccr_last_error());
        cr_expect_eq(u.domain, 0);
        cr_expect_eq(u.bytes_released, 0);
        cr_expect_eq(dev_free(e), before, "the unload gives nothing back without a domain");
        cr_expect_eq(reserved_bytes(e), held);
        ccr_release_info r;
        cr_expect_eq(ccr_engine_release(e, &r), CCR_OK);
        cr_expect_eq(r.device_free_after, r.device_free_baseline);
        ccr_engine_destroy(e);
    }
}

/* A block left in a model's domain: reported at unload, nothing of the
 * domain released (the block may still be in use), cleaned up by the
 * engine's release once the block is freed. */
Test(runtime_domains, a_leak_at_unload_is_reported_and_keeps_the_domain) {
    ccr_engine *e = engine_with(64 * MiB, NULL, 0);
    cca_allocator *a = ccr_engine_allocator(e);
    ccr_model *m;
    cr_assert_eq(ccr_model_load_spec(e, "mlp:64x256x10", &m), CCR_OK, "%s", ccr_last_error());
    free(outputs_of(m, 4));
    void *p = NULL;
    cr_assert_eq(cca_alloc_in(a, ccr_model_domain(m), 3000, NULL, &p), CCA_OK);
    size_t reserved = dstats(e, m).reserved_bytes, before = dev_free(e);
    ccr_unload_info u;
    cr_expect_eq(ccr_model_release(m, &u), CCR_ERR_LIVE_BLOCKS);
    cr_expect(strstr(ccr_last_error(), "a leak") != NULL, "%s", ccr_last_error());
    cr_expect(strstr(ccr_last_error(), "mlp:64x256x10") != NULL, "%s", ccr_last_error());
    cr_expect_eq(u.live_blocks, 1);
    cr_expect_eq(u.leaks_written, 1);
    cr_expect_eq(u.leaks[0].ptr, p);
    cr_expect_eq(u.leaks[0].requested, 3000);
    cr_expect_eq(u.live_bytes, u.leaks[0].size);
    cr_expect_eq(u.bytes_released, 0);
    cr_expect_eq(u.reserved_at_unload, reserved);
    cr_expect_eq(dev_free(e), before, "nothing of a leaking domain is released");
    cr_expect_eq(live_bytes(e), u.leaks[0].size, "the weights are freed all the same");
    /* ccr_model_unload: the same leak is a warning */
    cr_assert_eq(ccr_model_load_spec(e, "mlp:16x16", &m), CCR_OK, "%s", ccr_last_error());
    void *q = NULL;
    cr_assert_eq(cca_alloc_in(a, ccr_model_domain(m), 100, NULL, &q), CCA_OK);
    ccr_model_unload(m);
    cr_expect(warned_about("mlp:16x16' unloaded with 1 block(s)"), "warnings: %zu, first '%s'", n_warned, warned[0]);
    /* freed later: the engine's release destroys both domains */
    cr_expect_eq(cca_free(a, p), CCA_OK);
    cr_expect_eq(cca_free(a, q), CCA_OK);
    ccr_release_info r;
    cr_expect_eq(ccr_engine_release(e, &r), CCR_OK, "%s", ccr_last_error());
    cr_expect_geq(r.domain_bytes_released, reserved);
    cr_expect_eq(r.device_free_after, r.device_free_baseline);
    cca_stats s;
    cca_get_stats(a, &s);
    cr_expect_eq(s.reserved_bytes, 0);
    ccr_engine_destroy(e);
}

/* The engine's release counts a model it unloads with a leak; a domain it
 * cannot destroy yet stays an orphan for the next release, which destroys
 * it once the block is freed, and the device is back at its baseline. */
Test(runtime_domains, release_counts_leaks_and_retries_a_kept_domain) {
    ccr_engine *e = engine_with(64 * MiB, NULL, 0);
    cca_allocator *a = ccr_engine_allocator(e);
    ccr_model *m;
    cr_assert_eq(ccr_model_load_spec(e, "mlp:64x256x10", &m), CCR_OK, "%s", ccr_last_error());
    void *p = NULL;
    cr_assert_eq(cca_alloc_in(a, ccr_model_domain(m), 3000, NULL, &p), CCA_OK);
    size_t reserved = dstats(e, m).reserved_bytes;
    ccr_release_info r;
    cr_expect_eq(ccr_engine_release(e, &r), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(r.models_unloaded, 1);
    cr_expect_eq(r.models_leaking, 1);
    cr_expect_eq(r.domain_bytes_released, 0);
    cr_expect(warned_about("a leak"), "warnings: %zu '%s'", n_warned, warned[0]);
    cr_expect_eq(ccr_engine_release(e, &r), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(r.domain_bytes_released, 0, "the block is still live");
    cr_expect_eq(cca_free(a, p), CCA_OK);
    cr_expect_eq(ccr_engine_release(e, &r), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(r.models_unloaded, 0);
    cr_expect_eq(r.models_leaking, 0);
    cr_expect_eq(r.domain_bytes_released, reserved);
    cr_expect_eq(r.device_free_after, r.device_free_baseline);
    ccr_engine_destroy(e);
}

/* Footprint: the second load reserves the first peak up front; nothing else
 * calls the upstream during the load and runs, and the peak is no higher. */
static void second_load_uses_footprint(ccr_engine *e, const char *src, size_t batch) {
    ccr_model *m;
    cr_assert_eq(ccr_model_load(e, src, &m), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(ccr_model_footprint(m), 0, "nothing remembered yet");
    free(outputs_of(m, batch));
    free(outputs_of(m, batch));
    ccr_unload_info first;
    cr_assert_eq(ccr_model_release(m, &first), CCR_OK, "%s", ccr_last_error());
    cr_expect_gt(first.upstream_allocs, 0);

    /* the device's count of calls that take memory (allocs, maps): the
     * footprint's arena is one (expandable: one range mapped whole; the
     * allocator also counts reserving that address space) */
    unsigned long long c0 = upstream_calls(e);
    cr_assert_eq(ccr_model_load(e, src, &m), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(ccr_model_footprint(m), first.reserved_peak);
    unsigned long long c1 = upstream_calls(e);
    uint64_t at_load = dstats(e, m).upstream_allocs;
    cr_expect_eq(c1 - c0, 1, "%s: the load made %llu upstream calls: the footprint's one only", src, c1 - c0);
    free(outputs_of(m, batch));
    free(outputs_of(m, batch));
    cr_expect_eq(upstream_calls(e), c1, "%s: the runs made upstream calls", src);
    ccr_unload_info second;
    cr_assert_eq(ccr_model_release(m, &second), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(second.upstream_allocs, at_load, "%s: %llu upstream allocs in its domain, %llu at load", src,
                 (unsigned long long)second.upstream_allocs, (unsigned long long)at_load);
    cr_expect_leq(second.upstream_allocs, 2);
    cr_expect_eq(second.footprint, first.reserved_peak);
    cr_expect_leq(second.reserved_peak, first.reserved_peak, "%s: peak %zu > first %zu", src, second.reserved_peak,
                  first.reserved_peak);
    cr_expect_eq(second.bytes_released, second.reserved_at_unload);
}

Test(runtime_domains, footprint_second_load_makes_no_upstream_call) {
    ccr_engine *e = host_engine(256 * MiB, NULL);
    second_load_uses_footprint(e, "mlp:256x2048x2048x10:relu:softmax:seed=2", 32);
    second_load_uses_footprint(e, "mlp:1344x1344x1344x1344x10:relu:softmax", 2);
    second_load_uses_footprint(e, fixture_path("digits_mlp.safetensors"), 64);
    cr_expect_eq(dev_free(e), 256 * MiB);
    ccr_engine_destroy(e);
    e = host_engine(256 * MiB, "expandable:1");
    second_load_uses_footprint(e, "mlp:256x2048x2048x10:relu:softmax:seed=2", 32);
    ccr_engine_destroy(e);
}

/* The key's batch is the largest run: a later load with smaller batches
 * keeps it, one with a larger batch replaces it. Reconfigure forgets. */
Test(runtime_domains, footprint_key_keeps_the_largest_batch) {
    const char *spec = "mlp:64x4096x10:relu:softmax";
    ccr_engine *e = host_engine(256 * MiB, NULL);
    ccr_model *m;
    ccr_unload_info u;
    cr_assert_eq(ccr_model_load_spec(e, spec, &m), CCR_OK);
    free(outputs_of(m, 2000)); /* 2000 x 4096 floats: a 31 MiB activation */
    cr_assert_eq(ccr_model_release(m, &u), CCR_OK);
    size_t big = u.reserved_peak;
    cr_assert_eq(ccr_model_load_spec(e, spec, &m), CCR_OK);
    cr_expect_eq(ccr_model_footprint(m), big);
    free(outputs_of(m, 2));
    cr_assert_eq(ccr_model_release(m, &u), CCR_OK);
    cr_assert_eq(ccr_model_load_spec(e, spec, &m), CCR_OK);
    cr_expect_eq(ccr_model_footprint(m), big, "a smaller batch must not replace the footprint");
    ccr_model_unload(m);
    /* a fresh measurement with a larger batch replaces it */
    ccr_engine_destroy(e);
    e = host_engine(256 * MiB, NULL);
    cr_assert_eq(ccr_model_load_spec(e, spec, &m), CCR_OK);
    free(outputs_of(m, 2));
    cr_assert_eq(ccr_model_release(m, &u), CCR_OK);
    size_t small = u.reserved_peak;
    cr_expect_lt(small, big);
    cr_assert_eq(ccr_model_load_spec(e, spec, &m), CCR_OK);
    free(outputs_of(m, 2000));
    cr_assert_eq(ccr_model_release(m, &u), CCR_OK);
    cr_assert_eq(ccr_model_load_spec(e, spec, &m), CCR_OK);
    cr_expect_eq(ccr_model_footprint(m), u.reserved_peak);
    cr_expect_gt(ccr_model_footprint(m), small);
    ccr_model_unload(m);
    /* a model never loaded whole is not remembered; reconfigure forgets */
    cr_expect_eq(ccr_engine_reconfigure(e, "policy:growth"), CCR_OK, "%s", ccr_last_error());
    cr_assert_eq(ccr_model_load_spec(e, spec, &m), CCR_OK);
    cr_expect_eq(ccr_model_footprint(m), 0);
    ccr_model_unload(m);
    ccr_engine_destroy(e);
}

/* A footprint the device cannot hold any more (another tenant came) is a
 * warning, not a failure: the load goes on without it. */
Test(runtime_domains, footprint_that_no_longer_fits_is_skipped) {
    ccr_engine *e = engine_with(64 * MiB, NULL, 0);
    ccr_model *m;
    cr_assert_eq(ccr_model_load_spec(e, "mlp:64x1024x10", &m), CCR_OK, "%s", ccr_last_error());
    free(outputs_of(m, 4000)); /* a 15.6 MiB activation: the peak is ~20 MiB */
    ccr_unload_info u;
    cr_assert_eq(ccr_model_release(m, &u), CCR_OK);
    cr_assert_gt(u.reserved_peak, 16 * MiB);
    void *tenant = NULL;
    cr_assert_eq(cca_upstream_alloc(ccr_engine_upstream(e), 52 * MiB, &tenant), CCA_OK);
    cr_assert_eq(ccr_model_load_spec(e, "mlp:64x1024x10", &m), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(ccr_model_footprint(m), 0);
    cr_expect(warned_about("was not reserved up front"), "warnings: %zu '%s'", n_warned, warned[0]);
    free(outputs_of(m, 2));
    ccr_model_unload(m);
    cr_expect_eq(live_bytes(e), 0);
    cca_upstream_free(ccr_engine_upstream(e), tenant, 52 * MiB);
    ccr_engine_destroy(e);
}

/* ---- sidecars ---------------------------------------------------------------- */

static char tmpdir[64];

static const char *tmp_path(const char *name) {
    static char buf[4][256];
    static int next;
    char *out = buf[next++ % 4];
    snprintf(out, sizeof buf[0], "%s/%s", tmpdir, name);
    return out;
}

static void make_tmpdir(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ccr_foot_XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
}

static void write_text(const char *path, const char *text, size_t len) {
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(text, 1, len, f), len);
    fclose(f);
}

/* A model file in tmpdir (saved from a spec), its path. */
static const char *model_file(const char *name, const char *spec) {
    const char *path = tmp_path(name);
    ccr_engine *e = host_engine(64 * MiB, NULL);
    ccr_model *m;
    cr_assert_eq(ccr_model_load_spec(e, spec, &m), CCR_OK, "%s", ccr_last_error());
    cr_assert_eq(ccr_model_save(m, path), CCR_OK, "%s", ccr_last_error());
    ccr_engine_destroy(e);
    return path;
}

/* In a fresh tmpdir: model file `name` of `spec` and, as its footprint
 * sidecar (path in side), `sidecar`; the model's path. */
static const char *model_with_sidecar(const char *name, const char *spec, const char *sidecar, char *side, size_t cap) {
    make_tmpdir();
    const char *path = model_file(name, spec);
    snprintf(side, cap, "%s.ccfoot", path);
    write_text(side, sidecar, strlen(sidecar));
    return path;
}

/* The text of a small file. */
static void read_small_text(const char *path, char *text, size_t cap) {
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "no file %s", path);
    size_t n = fread(text, 1, cap - 1, f);
    text[n] = '\0';
    fclose(f);
}

Test(runtime_domains, sidecar_carries_the_footprint_to_another_engine) {
    make_tmpdir();
    const char *path = model_file("m.safetensors", "mlp:512x1024x1024x10:relu:softmax");
    char side[300];
    snprintf(side, sizeof side, "%s.ccfoot", path);
    ccr_engine *e = engine_with(128 * MiB, NULL, 1);
    ccr_model *m;
    cr_assert_eq(ccr_model_load_file(e, path, &m), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(n_warned, 0, "a missing sidecar is no warning: '%s'", warned[0]);
    cr_expect_eq(ccr_model_footprint(m), 0);
    free(outputs_of(m, 8));
    ccr_unload_info u;
    cr_assert_eq(ccr_model_release(m, &u), CCR_OK);
    ccr_engine_destroy(e);
    /* the file: four lines, the canonical layers, the batch, the peak */
    char text[512], want[512];
    read_small_text(side, text, sizeof text);
    snprintf(want, sizeof want, "ccfoot 1\narch mlp:512x1024x1024x10:relu:softmax\nbatch 8\nreserved_peak %zu\n",
             u.reserved_peak);
    cr_expect_str_eq(text, want);
    /* a new engine (a new process) reads it */
    e = engine_with(128 * MiB, NULL, 1);
    unsigned long long c0 = upstream_calls(e);
    cr_assert_eq(ccr_model_load_file(e, path, &m), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(ccr_model_footprint(m), u.reserved_peak);
    free(outputs_of(m, 8));
    cr_expect_eq(upstream_calls(e) - c0, 1);
    ccr_model_unload(m);
    ccr_engine_destroy(e);
    /* without the option, no sidecar is read */
    e = engine_with(128 * MiB, NULL, 0);
    cr_assert_eq(ccr_model_load_file(e, path, &m), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(ccr_model_footprint(m), 0);
    ccr_model_unload(m);
    ccr_engine_destroy(e);
    unlink(side);
    unlink(path);
    rmdir(tmpdir);
}

/* Hostile sidecars: each is ignored with a warning naming the problem; the
 * load succeeds without a footprint, nothing stays allocated. */
Test(runtime_domains, hostile_sidecars_are_ignored_with_a_warning) {
    make_tmpdir();
    const char *path = model_file("h.safetensors", "mlp:64x128x10:relu:softmax");
    char side[300];
    snprintf(side, sizeof side, "%s.ccfoot", path);
    const char *arch = "arch mlp:64x128x10:relu:softmax\n";
    char big[8000];
    memset(big, 'x', sizeof big);
    char nul[128];
    int nl = snprintf(nul, sizeof nul, "ccfoot 1\n%sbatch 8\nreserved_peak 2097152\n", arch);
    nul[20] = '\0';
    static const struct {
        const char *text, *why;
    } cases[] = {
        {"", "empty"},
        {"garbage\n", "not 'key value'"},
        {"ccfoot 2\n", "'ccfoot 1'"},
        {"ccfoot 1\narch mlp:64x128x10:relu:softmax\nbatch 8\n", "lacks 'reserved_peak'"},
        {"ccfoot 1\narch mlp:64x128x10:relu:softmax\nbatch 8\nreserved_peak 2097152\nreserved_peak 1\n", "twice"},
        {"ccfoot 1\narch mlp:64x128x10:relu:softmax\nbatch 8\nreserved_peak -5\n", "not a number"},
        {"ccfoot 1\narch mlp:64x128x10:relu:softmax\nbatch 8\nreserved_peak 99999999999999999999999\n", "not a number"},
        {"ccfoot 1\narch mlp:64x128x10:relu:softmax\nbatch 8\nreserved_peak 99999999999999999999\n", "not a number"},
        {"ccfoot 1\narch mlp:64x128x10:relu:softmax\nreserved_peak 2097152\n", "lacks 'batch'"},
        {"ccfoot 1\nbatch 8\nreserved_peak 2097152\n", "lacks 'arch'"},
        {"ccfoot 1\narch mlp:64x128x10:relu:softmax\nbatch 8\nreserved_peak 0x10\n", "not a number"},
        {"ccfoot 1\narch mlp:64x128x10:relu:softmax\nbatch 8\nreserved_peak 18446744073709551615\n", "outside"},
        {"ccfoot 1\narch mlp:64x128x10:relu:softmax\nbatch 8\nreserved_peak 100\n", "outside"},
        {"ccfoot 1\narch mlp:64x128x10:relu:softmax\nbatch 8\nreserved_peak 100000000\n", "implausible"},
        {"ccfoot 1\narch mlp:64x128x10:relu:softmax\nbatch 99999999\nreserved_peak 2097152\n", "is not in 1..2^24"},
        {"ccfoot 1\narch mlp:9x9\nbatch 8\nreserved_peak 2097152\n", "other layers"},
        {"ccfoot 1\narch mlp:64x128x10:relu:softmax\nbatch 8\nreserved_peak 2097152\nextra 1\n", "unknown key"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0] + 5; k++) {
        const char *why;
        unlink(side);
        rmdir(side);
        if (k < sizeof cases / sizeof cases[0]) {
            write_text(side, cases[k].text, strlen(cases[k].text));
            why = cases[k].why;
        } else if (k == sizeof cases / sizeof cases[0]) {
            write_text(side, big, sizeof big);
            why = "more than a footprint's";
        } else if (k == sizeof cases / sizeof cases[0] + 1) {
            write_text(side, nul, (size_t)nl);
            why = "NUL";
        } else if (k == sizeof cases / sizeof cases[0] + 2) {
            cr_assert_eq(mkfifo(side, 0600), 0);
            why = "not a regular file";
        } else if (k == sizeof cases / sizeof cases[0] + 3) {
            cr_assert_eq(mkdir(side, 0700), 0);
            why = "not a regular file";
        } else {
            write_text(side, "ccfoot 1\n", 9);
            chmod(side, 0);
            if (access(side, R_OK) == 0) /* root reads anything: nothing to test */
                continue;
            why = "cannot open";
        }
        ccr_engine *e = engine_with(256 * MiB, NULL, 1);
        ccr_model *m;
        cr_assert_eq(ccr_model_load_file(e, path, &m), CCR_OK, "case %zu: %s", k, ccr_last_error());
        cr_expect_eq(ccr_model_footprint(m), 0, "case %zu", k);
        cr_expect(warned_about(why) && warned_about("ignored"), "case %zu: want '%s', got %zu warnings: '%s'", k, why,
                  n_warned, warned[0]);
        free(outputs_of(m, 8));
        ccr_model_unload(m); /* rewrites a regular sidecar with a good footprint */
        cr_expect_eq(live_bytes(e), 0);
        ccr_engine_destroy(e);
    }
    unlink(side);
    rmdir(side);
    unlink(path);
    rmdir(tmpdir);
}

/* The model at `path` loads with a sidecar of `text` ignored: no
 * footprint, and a warning containing `why`. */
static void sidecar_is_ignored(const char *path, const char *side, const char *text, const char *why) {
    write_text(side, text, strlen(text));
    ccr_engine *e = engine_with(256 * MiB, NULL, 1);
    ccr_model *m;
    cr_assert_eq(ccr_model_load_file(e, path, &m), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(ccr_model_footprint(m), 0, "%s", text);
    cr_expect(warned_about(why), "want '%s', got %zu warnings: '%s'", why, n_warned, warned[0]);
    ccr_model_unload(m);
    ccr_engine_destroy(e);
}

/* A sidecar's numbers: every hostile spelling of batch and reserved_peak
 * is ignored with a warning naming the key and the text as written (at
 * most 32 characters of it; it named the key alone), and a batch of 0, which no run has, is out of
 * 1..2^24 (it was taken). */
Test(runtime_domains, a_sidecar_number_refused_is_quoted) {
    make_tmpdir();
    const char *path = model_file("q.safetensors", "mlp:64x128x10:relu:softmax");
    char side[300];
    snprintf(side, sizeof side, "%s.ccfoot", path);
    static const char *const bad[] = {HOSTILE_DECIMALS};
    for (size_t k = 0; k < 2 * (sizeof bad / sizeof bad[0]) + 1; k++) {
        size_t i = k / 2;
        int peak = k % 2;
        char text[256], why[160];
        if (i == sizeof bad / sizeof bad[0]) {
            snprintf(text, sizeof text, "ccfoot 1\narch mlp:64x128x10:relu:softmax\nbatch 0\nreserved_peak 2097152\n");
            snprintf(why, sizeof why, "batch 0 is not in 1..2^24; ignored");
        } else {
            snprintf(text, sizeof text, "ccfoot 1\narch mlp:64x128x10:relu:softmax\nbatch %s\nreserved_peak %s\n",
                     peak ? "8" : bad[i], peak ? bad[i] : "2097152");
            size_t n = strlen(bad[i]); /* at most 32 characters shown, then "..." */
            snprintf(why, sizeof why, "line %d: %s '%.32s%s' is not a number (plain decimal); ignored", peak ? 4 : 3,
                     peak ? "reserved_peak" : "batch", bad[i], n > 32 ? "..." : "");
        }
        sidecar_is_ignored(path, side, text, why);
    }
    unlink(side);
    unlink(path);
    rmdir(tmpdir);
}

/* A sidecar's key, number and arch are quoted at most 32, 32 and 80 bytes
 * long, cut between characters: a UTF-8 character straddling the cap is
 * left out whole (its first bytes were quoted, and shown as \xNN). */
Test(runtime_domains, a_sidecar_field_is_quoted_cut_between_characters) {
    make_tmpdir();
    const char *path = model_file("u.safetensors", "mlp:64x128x10:relu:softmax");
    char side[300];
    snprintf(side, sizeof side, "%s.ccfoot", path);
    static const char *const chars[] = {"\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80"};
    for (size_t k = 0; k < 3 * (sizeof chars / sizeof chars[0]); k++) {
        const char *ch = chars[k / 3];
        size_t len = strlen(ch);
        char head[100], text[512], why[300];
        if (k % 3 == 0) { /* an unknown key: its last byte is byte 33 */
            memset(head, 'k', 33 - len);
            head[33 - len] = '\0';
            snprintf(text, sizeof text,
                     "ccfoot 1\narch mlp:64x128x10:relu:softmax\nbatch 8\nreserved_peak 2097152\n%s%sy 1\n", head, ch);
            snprintf(why, sizeof why, "line 5: unknown key '%s'; ignored", head);
        } else if (k % 3 == 1) { /* a number */
            memset(head, '1', 33 - len);
            head[33 - len] = '\0';
            snprintf(text, sizeof text,
                     "ccfoot 1\narch mlp:64x128x10:relu:softmax\nbatch %s%s2\nreserved_peak 2097152\n", head, ch);
            snprintf(why, sizeof why, "line 3: batch '%s...' is not a number (plain decimal); ignored", head);
        } else { /* the arch: its last byte is byte 81 */
            memcpy(head, "mlp:", 4);
            memset(head + 4, '9', 81 - len - 4);
            head[81 - len] = '\0';
            snprintf(text, sizeof text, "ccfoot 1\narch %s%sz\nbatch 8\nreserved_peak 2097152\n", head, ch);
            snprintf(why, sizeof why,
                     "written for other layers ('%s', the model has 'mlp:64x128x10:relu:softmax'); ignored", head);
        }
        sidecar_is_ignored(path, side, text, why);
    }
    unlink(side);
    unlink(path);
    rmdir(tmpdir);
}

/* A sidecar's batch may be 2^24, the most a plausible footprint was run
 * with; one more is refused (hostile_sidecars_are_ignored_with_a_warning). */
Test(runtime_domains, a_sidecar_batch_of_2_to_the_24_is_accepted) {
    char side[300];
    const char *path = model_with_sidecar(
        "b.safetensors", "mlp:64x128x10:relu:softmax",
        "ccfoot 1\narch mlp:64x128x10:relu:softmax\nbatch 16777216\nreserved_peak 2097152\n", side, sizeof side);
    ccr_engine *e = engine_with(256 * MiB, NULL, 1);
    ccr_model *m;
    cr_assert_eq(ccr_model_load_file(e, path, &m), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(ccr_model_footprint(m), 2097152, "warnings: %zu '%s'", n_warned, warned[0]);
    cr_expect_eq(n_warned, 0, "'%s'", warned[0]);
    ccr_model_unload(m);
    ccr_engine_destroy(e);
    unlink(side);
    unlink(path);
    rmdir(tmpdir);
}

/* A model unloaded without a run has batch 0, which a sidecar may not hold
 * (a_sidecar_number_refused_is_quoted): the engine writes no sidecar for it,
 * so the next engine's load has nothing to warn about (it wrote "batch 0"
 * and the next load ignored its own file with a warning). */
Test(runtime_domains, a_model_never_run_writes_no_sidecar) {
    make_tmpdir();
    const char *path = model_file("n.safetensors", "mlp:64x128x10:relu:softmax");
    char side[300];
    snprintf(side, sizeof side, "%s.ccfoot", path);
    for (int pass = 0; pass < 2; pass++) { /* loaded and unloaded twice, by two engines */
        ccr_engine *e = engine_with(256 * MiB, NULL, 1);
        ccr_model *m;
        cr_assert_eq(ccr_model_load_file(e, path, &m), CCR_OK, "%s", ccr_last_error());
        cr_expect_eq(n_warned, 0, "pass %d: '%s'", pass, warned[0]);
        ccr_model_unload(m);
        ccr_engine_destroy(e);
        cr_expect_neq(access(side, F_OK), 0, "pass %d: a sidecar was written for a model never run", pass);
    }
    unlink(side);
    unlink(path);
    rmdir(tmpdir);
}

/* A run with the remembered batch is a fresh measurement: it replaces the
 * remembered peak (here a sidecar's, lower than the model really takes),
 * and the sidecar is rewritten with it. */
Test(runtime_domains, the_same_batch_measures_the_footprint_afresh) {
    char side[300], text[512], want[512];
    const char *path = model_with_sidecar("s.safetensors", "mlp:64x1024x10:relu:softmax",
                                          "ccfoot 1\narch mlp:64x1024x10:relu:softmax\nbatch 8\nreserved_peak 4096\n",
                                          side, sizeof side);
    ccr_engine *e = engine_with(256 * MiB, NULL, 1);
    ccr_model *m;
    cr_assert_eq(ccr_model_load_file(e, path, &m), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(ccr_model_footprint(m), 4096);
    free(outputs_of(m, 8));
    ccr_unload_info u;
    cr_assert_eq(ccr_model_release(m, &u), CCR_OK, "%s", ccr_last_error());
    cr_expect_gt(u.reserved_peak, 4096);
    snprintf(want, sizeof want, "ccfoot 1\narch mlp:64x1024x10:relu:softmax\nbatch 8\nreserved_peak %zu\n",
             u.reserved_peak);
    read_small_text(side, text, sizeof text);
    cr_expect_str_eq(text, want);
    cr_assert_eq(ccr_model_load_file(e, path, &m), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(ccr_model_footprint(m), u.reserved_peak);
    ccr_model_unload(m);
    ccr_engine_destroy(e);
    unlink(side);
    unlink(path);
    rmdir(tmpdir);
}

/* A file that changed between two loads (other layers at the same path):
 * the remembered footprint is not used, and the next unload replaces it,
 * even after a smaller batch than the old layers ran. */
Test(runtime_domains, a_footprint_for_other_layers_is_not_used_and_is_replaced) {
    make_tmpdir();
    const char *path = tmp_path("c.safetensors");
    model_file("c.safetensors", "mlp:64x4096x10:relu:softmax");
    ccr_engine *e = engine_with(256 * MiB, NULL, 0);
    ccr_model *m;
    cr_assert_eq(ccr_model_load_file(e, path, &m), CCR_OK, "%s", ccr_last_error());
    free(outputs_of(m, 2000)); /* a 31 MiB activation */
    ccr_model_unload(m);
    model_file("c.safetensors", "mlp:64x32x10:relu:softmax");
    cr_assert_eq(ccr_model_load_file(e, path, &m), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(ccr_model_footprint(m), 0, "the old layers' footprint was used");
    free(outputs_of(m, 2));
    ccr_unload_info u;
    cr_assert_eq(ccr_model_release(m, &u), CCR_OK, "%s", ccr_last_error());
    cr_assert_eq(ccr_model_load_file(e, path, &m), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(ccr_model_footprint(m), u.reserved_peak, "the new layers' footprint was not remembered");
    ccr_model_unload(m);
    ccr_engine_destroy(e);
    unlink(path);
    rmdir(tmpdir);
}

/* The footprint's batch is the largest a load ran, not its last. */
Test(runtime_domains, the_footprint_keeps_the_largest_batch_of_one_load) {
    make_tmpdir();
    const char *path = model_file("l.safetensors", "mlp:64x128x10:relu:softmax");
    char side[300], text[512], want[512];
    snprintf(side, sizeof side, "%s.ccfoot", path);
    ccr_engine *e = engine_with(64 * MiB, NULL, 1);
    ccr_model *m;
    cr_assert_eq(ccr_model_load_file(e, path, &m), CCR_OK, "%s", ccr_last_error());
    free(outputs_of(m, 8));
    free(outputs_of(m, 2));
    ccr_unload_info u;
    cr_assert_eq(ccr_model_release(m, &u), CCR_OK, "%s", ccr_last_error());
    snprintf(want, sizeof want, "ccfoot 1\narch mlp:64x128x10:relu:softmax\nbatch 8\nreserved_peak %zu\n",
             u.reserved_peak);
    read_small_text(side, text, sizeof text);
    cr_expect_str_eq(text, want);
    ccr_engine_destroy(e);
    unlink(side);
    unlink(path);
    rmdir(tmpdir);
}

/* A spec is no path: with sidecars on, a spec model reads no "<spec>.ccfoot"
 * (here one of garbage in the working directory). */
Test(runtime_domains, a_spec_model_reads_no_sidecar) {
#define SPEC "mlp:8x8:seed=91"
    write_text(SPEC ".ccfoot", "garbage\n", 8);
    ccr_engine *e = engine_with(64 * MiB, NULL, 1);
    ccr_model *m;
    cr_assert_eq(ccr_model_load_spec(e, SPEC, &m), CCR_OK, "%s", ccr_last_error());
    unlink(SPEC ".ccfoot");
#undef SPEC
    cr_expect_eq(n_warned, 0, "'%s'", warned[0]);
    ccr_model_unload(m);
    ccr_engine_destroy(e);
}

/* A model's domain is named after its source: a spec by its head, a path
 * longer than CCA_DOMAIN_NAME_MAX by its tail (the file name), with '"',
 * '\\' and ',' written as '_'. */
Test(runtime_domains, a_domain_is_named_after_its_source) {
    make_tmpdir();
    const char *path = model_file("model-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa,v2.safetensors", "mlp:8x4");
    ccr_engine *e = engine_with(64 * MiB, NULL, 0);
    ccr_model *m;
    cr_assert_eq(ccr_model_load_file(e, path, &m), CCR_OK, "%s", ccr_last_error());
    cr_expect_str_eq(dstats(e, m).name, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa_v2.safetensors");
    ccr_model_unload(m);
    static const char spec[] = "mlp:64x64x64x64x64x64x64x64x64x64x64x64x64x64x64x64x10:relu:softmax";
    cr_assert_eq(ccr_model_load_spec(e, spec, &m), CCR_OK, "%s", ccr_last_error());
    cr_expect_str_eq(dstats(e, m).name, "mlp:64x64x64x64x64x64x64x64x64x64x64x64x64x64x64x64x10:relu:sof");
    ccr_model_unload(m);
    ccr_engine_destroy(e);
    unlink(path);
    rmdir(tmpdir);
}

/* A load that fails part way (the device full after some tensors) records
 * no footprint: the next load of the same source reserves nothing. */
Test(runtime_domains, a_failed_load_records_no_footprint) {
    static const char spec[] = "mlp:64x2048x2048x10:relu:softmax";
    ccr_engine *e = engine_with(64 * MiB, NULL, 0);
    void *tenant = NULL;
    cr_assert_eq(cca_upstream_alloc(ccr_engine_upstream(e), 56 * MiB, &tenant), CCA_OK);
    ccr_model *m;
    cr_assert_eq(ccr_model_load_spec(e, spec, &m), CCR_ERR_OUT_OF_MEMORY, "%s", ccr_last_error());
    cr_expect(strstr(ccr_last_error(), "layer 1 weight") != NULL, "not a failure part way: %s", ccr_last_error());
    cca_upstream_free(ccr_engine_upstream(e), tenant, 56 * MiB);
    cr_assert_eq(ccr_model_load_spec(e, spec, &m), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(ccr_model_footprint(m), 0, "a partial load's footprint was remembered");
    ccr_model_unload(m);
    cr_expect_eq(live_bytes(e), 0);
    ccr_engine_destroy(e);
}

/* A sidecar that cannot be written (the directory is gone) is a warning. */
Test(runtime_domains, unwritable_sidecar_is_a_warning) {
    ccr_engine *e = engine_with(64 * MiB, NULL, 1);
    make_tmpdir();
    const char *path = model_file("w.safetensors", "mlp:8x8");
    ccr_model *m;
    cr_assert_eq(ccr_model_load_file(e, path, &m), CCR_OK, "%s", ccr_last_error());
    free(outputs_of(m, 1)); /* a model never run writes no sidecar */
    unlink(path);
    rmdir(tmpdir);
    ccr_model_unload(m);
    cr_expect(warned_about("not written"), "got %zu warnings: '%s'", n_warned, warned[0]);
    /* the engine still remembers it */
    ccr_engine_destroy(e);
}

/* Sidecars where no file can be: a model opened as /proc/self/fd/N (its
 * sidecar's directory is /proc, where nothing can be created, root or
 * not), a sidecar that is a symbolic link to itself, to a character device,
 * or a directory. Each load succeeds without a footprint; a sidecar that
 * cannot be read is a warning naming it, one that cannot be written too,
 * and the temporary file is never left behind; nothing stays allocated. */
Test(runtime_domains, sidecars_that_cannot_be_files_are_warnings) {
    make_tmpdir();
    const char *path = model_file("p.safetensors", "mlp:64x128x10:relu:softmax");
    char side[300], proc[64];
    snprintf(side, sizeof side, "%s.ccfoot", path);
    int fd = open(path, O_RDONLY);
    cr_assert_geq(fd, 0);
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    for (int k = 0; k < 4; k++) {
        const char *model = k == 0 ? proc : path, *read_why = NULL;
        unlink(side);
        rmdir(side);
        if (k == 1) {
            cr_assert_eq(symlink(side, side), 0);
            read_why = "cannot open: Too many levels of symbolic links";
        } else if (k == 2) {
            cr_assert_eq(symlink("/dev/zero", side), 0);
            read_why = "not a regular file";
        } else if (k == 3) {
            cr_assert_eq(mkdir(side, 0700), 0);
            read_why = "not a regular file";
        }
        ccr_engine *e = engine_with(256 * MiB, NULL, 1);
        ccr_model *m;
        cr_assert_eq(ccr_model_load_file(e, model, &m), CCR_OK, "case %d: %s", k, ccr_last_error());
        cr_expect_eq(ccr_model_footprint(m), 0, "case %d", k);
        if (read_why)
            cr_expect(warned_about(read_why) && warned_about("ignored"), "case %d: want '%s', got %zu: '%s'", k,
                      read_why, n_warned, warned[0]);
        else
            cr_expect_eq(n_warned, 0, "case %d: '%s'", k, warned[0]);
        free(outputs_of(m, 8));
        n_warned = 0;
        ccr_model_unload(m);
        if (k == 0 || k == 3)
            cr_expect(warned_about("not written"), "case %d: got %zu warnings: '%s'", k, n_warned, warned[0]);
        cr_expect_eq(live_bytes(e), 0, "case %d", k);
        ccr_engine_destroy(e);
        /* only the model and its sidecar (or what stands for it) remain */
        DIR *d = opendir(tmpdir);
        cr_assert_not_null(d);
        size_t entries = 0;
        for (struct dirent *de; (de = readdir(d));)
            entries += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
        closedir(d);
        cr_expect_eq(entries, k == 0 ? 1 : 2, "case %d: %zu entries in %s", k, entries, tmpdir);
    }
    close(fd);
    unlink(side);
    rmdir(side);
    unlink(path);
    rmdir(tmpdir);
}
