/*
 * infer.c — the forward pass, and how it uses device memory.
 *
 *     x (host) ──upload──> in ─dense0─> a0 ─dense1─> a1 ... ─> logits ─softmax─> probs ──download──> y (host)
 *                          │  freed ───┘   freed ───┘           freed ───────┘    freed after download
 *
 * At any moment at most two activations are live: the layer's input and its
 * output. Each is allocated from the engine's allocator just before the
 * layer runs and the input is freed as soon as the layer has consumed it, so
 * a pass makes 1 + n_layers (+1 with softmax) alloc/free pairs of sizes
 * batch × width × 4 bytes — the traffic a caching allocator exists for, and
 * with a batch size that changes from call to call, the traffic that splits
 * blocks and fragments a pool (docs/engine.md shows it on a timeline).
 *
 * Before anything moves, ccr_model_check_batch compares that peak (weights +
 * the largest set of live activations, ccr_arch_activation_bytes in arch.c,
 * overflow-checked) with what the allocator can ever hold (the device's
 * total, or max_reserved or the greedy arena when smaller): a batch that
 * cannot fit is refused with needed vs available bytes, and a caller
 * (ccrun) can ask before it allocates its host input.
 * It is a lower bound: rounding, fragmentation or other tenants can still
 * make a batch that passes fail at an allocation, with the usual OOM message.
 *
 * Every activation is the model's: allocated in its memory domain (model.c),
 * so a pass leaves its freed blocks cached in the model's own segments,
 * where the next pass finds them, and they go back with the model at
 * unload. The pass also notes the largest batch the model ran: the key of
 * the footprint the engine remembers for it (footprint.c).
 *
 * A sleeping model (sleep.c) is refused before anything moves: its weights'
 * pages are not mapped (on the simulated device a touch would fault).
 *
 * On the simulated device the host kernels run on the allocator's pointers
 * directly (they are host memory); on CUDA the same sequence runs cuBLAS
 * (workspace from the allocator too) and the softmax kernel on one stream.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"

static ccr_status dense(ccr_engine *e, const ccr_layer_desc *l, const float *x, const float *w, const float *b,
                        float *y, size_t batch) {
    cck_status ks = e->kind == CCR_DEVICE_HOST ? cck_dense_host(x, w, b, y, batch, l->in, l->out, l->act)
                                               : cck_dense_cuda(e->cuda, x, w, b, y, batch, l->in, l->out, l->act);
    return ks == CCK_OK ? CCR_OK : ccr_fail(CCR_ERR_KERNEL, "dense %zux%zu: %s", l->in, l->out, cck_status_string(ks));
}

static ccr_status softmax(ccr_engine *e, const float *x, float *y, size_t rows, size_t cols) {
    cck_status ks =
        e->kind == CCR_DEVICE_HOST ? cck_softmax_host(x, y, rows, cols) : cck_softmax_cuda(e->cuda, x, y, rows, cols);
    return ks == CCK_OK ? CCR_OK : ccr_fail(CCR_ERR_KERNEL, "softmax %zux%zu: %s", rows, cols, cck_status_string(ks));
}

ccr_status ccr_model_check_batch(ccr_model *m, size_t batch, size_t *need) {
    if (need)
        *need = 0;
    if (!m)
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "model is NULL");
    if (batch == 0)
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "batch size is 0");
    ccr_engine *e = m->e;
    size_t acts = 0, total = 0;
    int fits = ccr_arch_activation_bytes(&m->arch, batch, &acts) && m->device_bytes <= SIZE_MAX - acts;
    if (fits)
        total = m->device_bytes + acts;
    /* what the allocator can ever hold: the device, max_reserved, the greedy arena */
    const char *limit;
    size_t avail = ccr_engine_limit(e, &limit);
    if (need)
        *need = fits ? total : SIZE_MAX;
    if (fits && total <= avail)
        return CCR_OK;
    char b0[32], b1[32], b2[32], b3[32];
    if (!fits)
        return ccr_fail(CCR_ERR_OUT_OF_MEMORY,
                        "batch %zu of model '%s' needs more than 2^64 bytes on the device; at most %s is available "
                        "(%s)",
                        batch, m->name, cca_format_bytes(avail, b0, sizeof b0), limit);
    return ccr_fail(CCR_ERR_OUT_OF_MEMORY,
                    "batch %zu of model '%s' needs at least %s (%zu bytes) on the device: weights %s + activations "
                    "live at once %s; at most %s (%zu bytes) is available (%s)",
                    batch, m->name, cca_format_bytes(total, b0, sizeof b0), total,
                    cca_format_bytes(m->device_bytes, b1, sizeof b1), cca_format_bytes(acts, b2, sizeof b2),
                    cca_format_bytes(avail, b3, sizeof b3), avail, limit);
}

ccr_status ccr_model_run(ccr_model *m, const float *x_host, size_t batch, float *y_host) {
    if (!m || !x_host || !y_host)
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "model, input or output is NULL");
    if (batch == 0)
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "batch size is 0");
    ccr_engine *e = m->e;
    const ccr_arch *a = &m->arch;
    ccr_status st = ccr_model_check_awake(m, "run"); /* its weights are on the host (sleep.c) */
    if (st == CCR_OK)
        st = ccr_model_check_batch(m, batch, NULL); /* before any byte moves */
    if (st != CCR_OK)
        return st;
    st = ccr_engine_ensure_context(e);
    if (st != CCR_OK)
        return st;
    if (batch > m->max_batch) /* the footprint's key (footprint.c) */
        m->max_batch = batch;
    char tag[32];
    snprintf(tag, sizeof tag, "batch=%zu", batch);
    ccr_engine_mark_tag(e, "run", m->name, tag);
    size_t in_bytes, bytes;
    if (!ccr_mul_ok(batch, a->layers[0].in * sizeof(float), &in_bytes))
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "batch %zu too large", batch);
    void *cur = NULL, *next = NULL;
    const char *cur_tag = "input"; /* what cur was allocated as: its free's row says the same */
    st = ccr_dev_alloc(e, m, in_bytes, cur_tag, &cur);
    if (st == CCR_OK)
        st = ccr_dev_upload(e, cur, x_host, in_bytes);
    for (size_t i = 0; i < a->n_layers && st == CCR_OK; i++) {
        const ccr_layer_desc *l = &a->layers[i];
        if (!ccr_mul_ok(batch, l->out * sizeof(float), &bytes)) {
            st = ccr_fail(CCR_ERR_INVALID_ARGUMENT, "batch %zu too large", batch);
            break;
        }
        st = ccr_dev_alloc(e, m, bytes, "activation", &next);
        if (st != CCR_OK)
            break;
        st = dense(e, l, cur, m->w[i], m->b[i], next, batch);
        ccr_dev_free(e, m, cur, cur_tag);
        cur = next;
        cur_tag = "activation";
        next = NULL;
    }
    size_t out = a->layers[a->n_layers - 1].out;
    if (st == CCR_OK && a->softmax) {
        st = ccr_dev_alloc(e, m, batch * out * sizeof(float), "probs", &next);
        if (st == CCR_OK) {
            st = softmax(e, cur, next, batch, out);
            ccr_dev_free(e, m, cur, cur_tag);
            cur = next;
            cur_tag = "probs";
            next = NULL;
        }
    }
    if (st == CCR_OK)
        st = ccr_dev_download(e, y_host, cur, batch * out * sizeof(float));
    ccr_dev_free(e, m, cur, cur_tag);
    if (st != CCR_OK)
        return ccr_fail_prefix(st, "model '%s', batch %zu", m->name, batch);
    return CCR_OK;
}
