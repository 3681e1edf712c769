/*
 * error.c — the runtime's messages: status names, the per-thread last-error
 * message, warnings, size parsing.
 *
 * Rules:
 * - Owns: ccr_status_string; the last-error message (ccr_fail,
 *   ccr_fail_prefix, ccr_clear_error, ccr_last_error); warnings through the
 *   engine's sink (ccr_warn); ccr_status_of; ccr_mul_ok; ccr_parse_size.
 * - Every failing runtime call writes one message naming what was wrong
 *   (the file and byte offset, the tensor, the option) and returns a
 *   ccr_status; callers print ccr_last_error(). Layers add context with
 *   ccr_fail_prefix ("digits.safetensors: tensor '0.weight': ..."), like
 *   errno + a message, never by exiting.
 * - The message lives in ccalloc's one thread-local buffer (status.c): the
 *   four are thin wrappers over cca_vset_error, cca_verror_prefix,
 *   cca_clear_error and cca_last_error, which prefix and mark a cut message
 *   with "..." once. One buffer per thread, so an allocator failure and the
 *   runtime's context around it are one message, and neither library's
 *   message can be stale in the other's.
 * - A call whose failure nobody reports (a timeline row's mem_info, a trace
 *   mark, a sleep's figures) is wrapped in ccr_error_keep /
 *   ccr_error_restore: the message of the failure before it survives.
 * - A warning is one line, cut to 1023 bytes with "..."; it goes to the
 *   engine's warn callback when set, else to stderr as "ccr: warning: "
 *   and the line escaped for the terminal (text.c): it quotes paths and
 *   sidecar text.
 * - Calls nothing in the runtime but text.c: every other file calls down
 *   to this one.
 * - Costs: a message or a warning: one vsnprintf.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

const char *ccr_status_string(ccr_status s) {
    switch (s) {
    case CCR_OK: return "CCR_OK";
    case CCR_ERR_INVALID_ARGUMENT: return "CCR_ERR_INVALID_ARGUMENT";
    case CCR_ERR_IO: return "CCR_ERR_IO";
    case CCR_ERR_FORMAT: return "CCR_ERR_FORMAT";
    case CCR_ERR_SPEC: return "CCR_ERR_SPEC";
    case CCR_ERR_SHAPE: return "CCR_ERR_SHAPE";
    case CCR_ERR_DTYPE: return "CCR_ERR_DTYPE";
    case CCR_ERR_OUT_OF_MEMORY: return "CCR_ERR_OUT_OF_MEMORY";
    case CCR_ERR_DEVICE: return "CCR_ERR_DEVICE";
    case CCR_ERR_KERNEL: return "CCR_ERR_KERNEL";
    case CCR_ERR_ALLOCATOR: return "CCR_ERR_ALLOCATOR";
    case CCR_ERR_LIVE_BLOCKS: return "CCR_ERR_LIVE_BLOCKS";
    case CCR_ERR_ASLEEP: return "CCR_ERR_ASLEEP";
    case CCR_ERR_UNSUPPORTED: return "CCR_ERR_UNSUPPORTED";
    }
    return "CCR_ERR_UNKNOWN";
}

const char *ccr_last_error(void) {
    return cca_last_error();
}

void ccr_clear_error(void) {
    cca_clear_error();
}

void ccr_error_keep(ccr_kept_error *k) {
    snprintf(k->text, sizeof k->text, "%s", cca_last_error());
}

void ccr_error_restore(const ccr_kept_error *k) {
    if (!strcmp(k->text, cca_last_error()))
        return; /* unchanged: the common case, no copy */
    if (k->text[0])
        cca_set_error(CCA_OK, "%s", k->text);
    else
        cca_clear_error();
}

/* The text is formatted by status.c straight into the shared buffer (the
 * arguments may include ccr_last_error() itself); a message too long for it
 * ends in "...". */
ccr_status ccr_fail(ccr_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cca_vset_error(CCA_OK, fmt, ap);
    va_end(ap);
    return s;
}

ccr_status ccr_fail_prefix(ccr_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cca_verror_prefix(CCA_OK, fmt, ap);
    va_end(ap);
    return s;
}

void ccr_warn(ccr_engine *e, const char *fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof line) /* cut: say so, as the error messages do */
        memcpy(line + sizeof line - 4, "...", 4);
    if (e && e->warn) {
        e->warn(e->warn_user, line);
    } else { /* the line quotes paths and sidecar text: escaped for the terminal */
        fputs("ccr: warning: ", stderr);
        ccr_fputs_escaped(line, stderr);
        fputc('\n', stderr);
    }
}

ccr_status ccr_status_of(cca_status cs) {
    switch (cs) {
    case CCA_OK: return CCR_OK;
    case CCA_ERR_OUT_OF_MEMORY: return CCR_ERR_OUT_OF_MEMORY;
    case CCA_ERR_UPSTREAM:
    case CCA_ERR_NO_DEVICE: return CCR_ERR_DEVICE;
    case CCA_ERR_ASLEEP: return CCR_ERR_ASLEEP;
    default: return CCR_ERR_ALLOCATOR;
    }
}

int ccr_mul_ok(size_t a, size_t b, size_t *out) {
    if (a != 0 && b > SIZE_MAX / a)
        return 0;
    *out = a * b;
    return 1;
}

ccr_status ccr_parse_size(const char *text, size_t *out) {
    if (!text || !out || !*text)
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "empty size");
    if (cca_parse_size(text, out) != CCA_OK)
        return ccr_fail(CCR_ERR_INVALID_ARGUMENT, "%s", cca_last_error());
    return CCR_OK;
}
