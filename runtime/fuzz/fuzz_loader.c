/*
 * fuzz_loader.c — libFuzzer target for the safetensors loader.
 *
 * Each input is a whole model file, fed through fmemopen to
 * ccr_model_load_stream on a small simulated device (64 MiB): header length,
 * JSON, dtypes, shapes, offsets, layer list, conversion, the device
 * allocation path. A file that loads is also run once (batch 2) and
 * unloaded. Invariant checked after every input: the allocator holds zero
 * live bytes (a leak on any error path aborts).
 *
 * Build and run: runtime/fuzz/run.sh [SECONDS] (clang, ASan + UBSan).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "ccr.h"

static ccr_engine *engine;
static unsigned long inputs;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!engine) {
        ccr_engine_options o;
        ccr_engine_options_default(&o);
        o.device = CCR_DEVICE_HOST;
        o.host_capacity = (size_t)64 << 20;
        if (ccr_engine_create(&o, &engine) != CCR_OK)
            abort();
    }
    if (size == 0)
        return 0; /* fmemopen rejects empty buffers; covered by tests */
    FILE *f = fmemopen((void *)data, size, "rb");
    if (!f)
        return 0;
    ccr_model *m = NULL;
    if (ccr_model_load_stream(engine, f, "fuzz", &m) == CCR_OK) {
        const ccr_arch *a = ccr_model_arch(m);
        size_t in = a->layers[0].in, out = a->layers[a->n_layers - 1].out;
        float *x = calloc(2 * in, sizeof(float)), *y = malloc(2 * out * sizeof(float));
        if (x && y)
            ccr_model_run(m, x, 2, y);
        free(x);
        free(y);
        ccr_model_unload(m);
    }
    fclose(f);
    cca_stats s;
    cca_get_stats(ccr_engine_allocator(engine), &s);
    if (s.allocated_bytes != 0) {
        fprintf(stderr, "fuzz_loader: %zu live bytes after an input\n", s.allocated_bytes);
        abort();
    }
    if (++inputs % 1024 == 0)
        ccr_engine_release(engine, NULL);
    return 0;
}
