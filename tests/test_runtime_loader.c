/*
 * test_runtime_loader.c — every bad model input gets a clear message, a
 * non-zero status, and leaves the allocator with zero live bytes.
 *
 * The files are hand-made and committed in tests/fixtures/malformed/
 * (make_malformed.py documents how); each row below says which status and
 * which words the message must contain. tests/test_ccrun.sh checks the same
 * files through the ccrun binary (exit code 1 and the message).
 */
#include <stdio.h>

#include "test_runtime_util.h"

typedef struct bad_case {
    const char *file;
    ccr_status status;
    const char *words; /* must appear in ccr_last_error() */
} bad_case;

static const bad_case cases[] = {
    {"empty.safetensors", CCR_ERR_FORMAT, "truncated: 0 bytes"},
    {"tiny.safetensors", CCR_ERR_FORMAT, "truncated: 3 bytes"},
    {"zero_header.safetensors", CCR_ERR_FORMAT, "header length is 0"},
    {"huge_header_len.safetensors", CCR_ERR_FORMAT, "exceeds the cap"},
    {"truncated_header.safetensors", CCR_ERR_FORMAT, "truncated: header length"},
    {"truncated_data.safetensors", CCR_ERR_FORMAT, "out of range"},
    {"not_json.safetensors", CCR_ERR_FORMAT, "not valid JSON"},
    {"header_not_object.safetensors", CCR_ERR_FORMAT, "not an object"},
    {"offsets_out_of_range.safetensors", CCR_ERR_FORMAT, "'2.bias': data_offsets [84, 1000) out of range"},
    {"offsets_overlap.safetensors", CCR_ERR_FORMAT, "overlaps tensor '0.weight'"},
    {"offsets_gap.safetensors", CCR_ERR_FORMAT, "[48, 52) are not covered"},
    {"trailing_bytes.safetensors", CCR_ERR_FORMAT, "at the end are not covered"},
    {"size_mismatch.safetensors", CCR_ERR_FORMAT, "F32 [3, 5] needs 60"},
    {"dtype_i64.safetensors", CCR_ERR_DTYPE, "unsupported dtype 'I64'"},
    {"dtype_unknown.safetensors", CCR_ERR_DTYPE, "unsupported dtype 'Q4_K'"},
    {"shape_mismatch.safetensors", CCR_ERR_SHAPE, "'0.weight' has shape [4, 3] but layer 0"},
    {"missing_metadata.safetensors", CCR_ERR_FORMAT, "no __metadata__ key 'ccr.mlp'"},
    {"bad_spec_metadata.safetensors", CCR_ERR_SPEC, "mlp:4xx2"},
    {"layer_count_mismatch.safetensors", CCR_ERR_SHAPE, "file has 2 layers but 'mlp:4x3x3x2' lists 3"},
    {"unexpected_tensor.safetensors", CCR_ERR_SHAPE, "unexpected tensor 'running_mean'"},
    {"duplicate_name.safetensors", CCR_ERR_FORMAT, "'0.weight' appears twice"},
    {"bad_shape_value.safetensors", CCR_ERR_FORMAT, "shape[1] is not a non-negative integer"},
};

Test(runtime_loader, every_malformed_file_is_rejected_cleanly) {
    ccr_engine *e = host_engine(16u << 20, NULL);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const bad_case *c = &cases[i];
        ccr_model *m = (ccr_model *)1;
        char rel[128];
        snprintf(rel, sizeof rel, "malformed/%s", c->file);
        ccr_status st = ccr_model_load_file(e, fixture_path(rel), &m);
        cr_expect_eq(st, c->status, "%s: got %s (%s), want %s", c->file, ccr_status_string(st), ccr_last_error(),
                     ccr_status_string(c->status));
        cr_expect_null(m, "%s: model pointer not cleared", c->file);
        cr_expect(strstr(ccr_last_error(), c->words) != NULL, "%s: message '%s' lacks '%s'", c->file, ccr_last_error(),
                  c->words);
        cr_expect(strstr(ccr_last_error(), c->file) != NULL, "%s: message '%s' does not name the file", c->file,
                  ccr_last_error());
        cr_expect_eq(live_bytes(e), 0, "%s: %zu live bytes", c->file, live_bytes(e));
        cr_expect_eq(reserved_bytes(e), 0, "%s: validation must precede any device allocation", c->file);
    }
    ccr_engine_destroy(e);
}

Test(runtime_loader, the_valid_control_file_loads) {
    ccr_engine *e = host_engine(16u << 20, NULL);
    ccr_model *m;
    cr_assert_eq(ccr_model_load_file(e, fixture_path("malformed/valid_4x3x2.safetensors"), &m), CCR_OK, "%s",
                 ccr_last_error());
    float x[4] = {1, 2, 3, 4}, y[2];
    cr_expect_eq(ccr_model_run(m, x, 1, y), CCR_OK);
    cr_expect_float_eq(y[0] + y[1], 1.0f, 1e-6);
    ccr_engine_destroy(e);
}

Test(runtime_loader, missing_file) {
    ccr_engine *e = host_engine(16u << 20, NULL);
    ccr_model *m;
    cr_expect_eq(ccr_model_load_file(e, "/nonexistent/model.safetensors", &m), CCR_ERR_IO);
    cr_expect(strstr(ccr_last_error(), "/nonexistent/model.safetensors: cannot open") != NULL, "%s", ccr_last_error());
    cr_expect_eq(ccr_model_load(e, "no-such-file.safetensors", &m), CCR_ERR_IO);
    cr_expect_eq(live_bytes(e), 0);
    ccr_engine_destroy(e);
}

Test(runtime_loader, model_too_large_from_file) {
    /* the digits model needs ~20 KiB: on a 1 MiB device with max_reserved 4K it cannot fit */
    ccr_engine *e = host_engine(1u << 20, "max_reserved:4K");
    ccr_model *m;
    cr_expect_eq(ccr_model_load_file(e, fixture_path("digits_mlp.safetensors"), &m), CCR_ERR_OUT_OF_MEMORY);
    cr_expect(strstr(ccr_last_error(), "does not fit") != NULL, "%s", ccr_last_error());
    cr_expect_eq(live_bytes(e), 0);
    ccr_engine_destroy(e);
}

Test(runtime_loader, from_a_memory_stream) {
    /* what the fuzzer does: fmemopen over bytes */
    static const char junk[] = "\x08\0\0\0\0\0\0\0{}      ";
    ccr_engine *e = host_engine(16u << 20, NULL);
    FILE *f = fmemopen((void *)junk, sizeof junk - 1, "rb");
    cr_assert_not_null(f);
    ccr_model *m;
    cr_expect_eq(ccr_model_load_stream(e, f, "junk", &m), CCR_ERR_FORMAT);
    cr_expect(strstr(ccr_last_error(), "no __metadata__") != NULL, "%s", ccr_last_error());
    fclose(f);
    cr_expect_eq(live_bytes(e), 0);
    ccr_engine_destroy(e);
}
