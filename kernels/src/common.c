/*
 * common.c — the small vocabulary every kernel file shares: status names,
 * activation names, and the overflow check on matrix dimensions.
 *
 * Status codes follow ggml's habit (one enum, 0 = success, a string for
 * every code); activation names are the lower-case words the engine's model
 * files and command lines use. Nothing here allocates; everything is O(1).
 * The argument checks refuse what would fault or read garbage on a GPU
 * before anything is launched or written: NULL, dimensions past size_t,
 * pointers that are no float's address (not 4-byte aligned), overlaps.
 */
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "cck_internal.h"

#ifdef _OPENMP
#include <omp.h>
#endif

const char *cck_status_string(cck_status s) {
    switch (s) {
    case CCK_OK: return "CCK_OK";
    case CCK_ERR_INVALID_ARGUMENT: return "CCK_ERR_INVALID_ARGUMENT: NULL or misaligned pointer, zero dimension, overlap, bad version or name";
    case CCK_ERR_NO_DEVICE: return "CCK_ERR_NO_DEVICE: no GPU present, or built without CUDA";
    case CCK_ERR_CUDA: return "CCK_ERR_CUDA: a CUDA runtime call failed";
    case CCK_ERR_CUBLAS: return "CCK_ERR_CUBLAS: a cuBLAS call failed";
    case CCK_ERR_UNSUPPORTED: return "CCK_ERR_UNSUPPORTED: this version cannot run with these parameters";
    }
    return "CCK_ERR_?: unknown status code";
}

static const char *const act_names[] = {"none", "relu", "gelu"};

const char *cck_activation_name(cck_activation a) {
    if ((unsigned)a < sizeof act_names / sizeof act_names[0]) {
        return act_names[a];
    }
    return "?";
}

cck_status cck_activation_parse(const char *name, cck_activation *out) {
    if (name == NULL || out == NULL) {
        return CCK_ERR_INVALID_ARGUMENT;
    }
    for (unsigned i = 0; i < sizeof act_names / sizeof act_names[0]; i++) {
        if (strcmp(name, act_names[i]) == 0) {
            *out = (cck_activation)i;
            return CCK_OK;
        }
    }
    return CCK_ERR_INVALID_ARGUMENT;
}

int cck_dims_ok(size_t rows, size_t cols) {
    if (rows == 0 || cols == 0) {
        return 0;
    }
    /* elements and bytes (4 per float) must both fit a size_t */
    return rows <= SIZE_MAX / 4 / cols;
}

/* Do the n_a floats at a and the n_b floats at b share a byte? Compared as
 * integers: the pointers may belong to different objects (or be device
 * addresses), where comparing them as pointers would be undefined. */
static int ranges_overlap(const float *a, size_t n_a, const float *b, size_t n_b) {
    uintptr_t a0 = (uintptr_t)a, b0 = (uintptr_t)b;
    return a0 < b0 + n_b * sizeof(float) && b0 < a0 + n_a * sizeof(float);
}

/* Is p (NULL included) a float's address? */
static int float_aligned(const float *p) {
    return (uintptr_t)p % _Alignof(float) == 0;
}

int cck_softmax_args_ok(const float *x, const float *y, size_t rows, size_t cols) {
    if (x == NULL || y == NULL || !float_aligned(x) || !float_aligned(y) || !cck_dims_ok(rows, cols)) {
        return 0;
    }
    /* in place, or apart: a y that starts inside x (or x inside y) would
     * overwrite elements of x before they are read */
    return x == y || !ranges_overlap(y, rows * cols, x, rows * cols);
}

int cck_softmax_fits_int(size_t rows, size_t cols) {
    return rows <= (size_t)INT_MAX - CCK_MAX_BLOCK && cols <= (size_t)INT_MAX - CCK_MAX_BLOCK;
}

int cck_dense_args_ok(const float *x, const float *w, const float *b, const float *y, size_t batch, size_t in,
                      size_t out, cck_activation act) {
    if (x == NULL || w == NULL || y == NULL) {
        return 0;
    }
    if (!float_aligned(x) || !float_aligned(w) || !float_aligned(b) || !float_aligned(y)) {
        return 0;
    }
    if (!cck_dims_ok(batch, in) || !cck_dims_ok(out, in) || !cck_dims_ok(batch, out)) {
        return 0;
    }
    /* y is written while x, W and b are still read (b by the epilogue, after
     * the GEMM has overwritten y): no overlap with any of them */
    if (ranges_overlap(y, batch * out, x, batch * in) || ranges_overlap(y, batch * out, w, out * in) ||
        (b != NULL && ranges_overlap(y, batch * out, b, out))) {
        return 0;
    }
    return act == CCK_ACT_NONE || act == CCK_ACT_RELU || act == CCK_ACT_GELU;
}

int cck_host_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}
