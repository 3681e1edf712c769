/*
 * test_runtime_loader.c — runtime/src/safetensors.c: every bad model input gets a clear message, a
 * non-zero status, and leaves the allocator with zero live bytes.
 *
 * The files are hand-made and committed in tests/fixtures/malformed/
 * (make_malformed.py documents how); each row below says which status and
 * which words the message must contain. tests/runtime/test_ccrun.sh checks the same
 * files through the ccrun binary (exit code 1 and the message).
 *
 * Headers built in memory cover padding (whitespace only), NUL in strings
 * and structure bounds; hostile files generated at test time (a 93 MB header
 * of zeros, a token bomb) must be refused by the caps with little memory;
 * non-finite weights load and are counted per tensor. Limits are pinned at
 * their exact values (a header of data + 1 MiB, a shape of 8 dimensions),
 * F16/BF16/F64 conversion bit for bit and across read chunks, the binding of
 * tensors to layers (both weight dimensions, a bias's rank, a layer key),
 * and the 8-aligned data of a saved file; a model without softmax outputs
 * its logits. A tensor entry's own fields, a bias without its weight, a
 * layer too many, and the natural order of layer keys have their cases.
 * Streams (fopencookie): a valid file cut at every byte is FORMAT, a read
 * error or an early end at every byte IO, both with nothing allocated;
 * one-byte reads load the same model; a pipe or a socket is refused. A
 * tensor field given twice and strings that are not UTF-8 are refused, and
 * so is every spelling of a shape or offset that is not a whole number in
 * 0..2^53 in digits, quoting the file's text.
 * Saving: over the model's own file, loaded back the same; to a path that
 * cannot be a file, CCR_ERR_IO naming it. Host memory refused inside the
 * JSON parser or writer (cJSON's hooks) is CCR_ERR_OUT_OF_MEMORY, and a
 * save then leaves no file.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

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
    {"bad_shape_value.safetensors", CCR_ERR_FORMAT, "shape[1] is '-4' (header byte "},
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

/* cJSON's allocations with one refused, the (n+1)-th from when
 * json_allocs_left is set to n, as glibc's malloc refuses one (NULL, errno
 * ENOMEM); the ones after it are served again. The hooks are
 * process-wide, and Criterion runs each test in a process of its own. */
static atomic_long json_allocs_left = LONG_MAX;

static void *json_malloc(size_t n) {
    if (atomic_fetch_sub(&json_allocs_left, 1) == 0) {
        errno = ENOMEM;
        return NULL;
    }
    return malloc(n);
}

/* Host memory short while cJSON reads a valid header is host memory
 * short (CCR_ERR_OUT_OF_MEMORY, saying so), never a file "not valid
 * JSON"; at every one of cJSON's allocations, until one that leaves it
 * room loads the model. */
Test(runtime_loader, host_memory_short_inside_the_json_parser_is_out_of_memory) {
    cJSON_Hooks hooks = {json_malloc, free};
    cJSON_InitHooks(&hooks);
    long refused = 0;
    for (long n = 0;; n++) {
        ccr_engine *e = host_engine(16u << 20, NULL);
        ccr_model *m = NULL;
        atomic_store(&json_allocs_left, n);
        ccr_status st = ccr_model_load_file(e, fixture_path("malformed/valid_4x3x2.safetensors"), &m);
        atomic_store(&json_allocs_left, LONG_MAX);
        if (st == CCR_OK) {
            ccr_engine_destroy(e);
            break;
        }
        cr_assert_eq(st, CCR_ERR_OUT_OF_MEMORY, "cJSON's allocation %ld refused: %s (%s)", n, ccr_status_string(st),
                     ccr_last_error());
        cr_expect(strstr(ccr_last_error(), "host memory") != NULL, "allocation %ld: %s", n, ccr_last_error());
        cr_expect_eq(reserved_bytes(e), 0, "allocation %ld: a refused header reserved device memory", n);
        refused++;
        ccr_engine_destroy(e);
        cr_assert_lt(n, 10000, "the header never loaded");
    }
    cr_expect_gt(refused, 0, "no allocation of cJSON's was refused: the test reached nothing");
    cJSON_InitHooks(NULL);
}

/* The same refusals while ccr_model_save builds and prints its header: a
 * save either writes a file that loads the same model, or is
 * CCR_ERR_OUT_OF_MEMORY and creates no file; never a file whose header
 * lacks a tensor, a shape or an offset that an allocation could not add. */
Test(runtime_loader, host_memory_short_inside_the_json_writer_is_out_of_memory_and_no_file) {
    ccr_engine *e = host_engine(16u << 20, NULL);
    ccr_model *m;
    cr_assert_eq(ccr_model_load(e, "mlp:8x6x4x3:relu:softmax:seed=3", &m), CCR_OK, "%s", ccr_last_error());
    float *want = outputs_of(m, 2);
    char path[] = "/tmp/ccr_save_oom_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    cJSON_Hooks hooks = {json_malloc, free};
    cJSON_InitHooks(&hooks);
    long refused = 0;
    for (long n = 0;; n++) {
        unlink(path);
        atomic_store(&json_allocs_left, n);
        ccr_status st = ccr_model_save(m, path);
        atomic_store(&json_allocs_left, LONG_MAX);
        if (st == CCR_OK)
            break;
        cr_assert_eq(st, CCR_ERR_OUT_OF_MEMORY, "cJSON's allocation %ld refused: %s (%s)", n, ccr_status_string(st),
                     ccr_last_error());
        cr_expect(access(path, F_OK) != 0, "allocation %ld refused: the save left a file", n);
        refused++;
        cr_assert_lt(n, 10000, "the save never succeeded");
    }
    cJSON_InitHooks(NULL);
    cr_expect_gt(refused, 0, "no allocation of cJSON's was refused: the test reached nothing");
    ccr_model *back;
    cr_assert_eq(ccr_model_load_file(e, path, &back), CCR_OK, "%s", ccr_last_error());
    expect_same_outputs(back, 2, want, "saved once cJSON had room");
    free(want);
    ccr_model_unload(back);
    ccr_model_unload(m);
    unlink(path);
    ccr_engine_destroy(e);
}

Test(runtime_loader, missing_file) {
    ccr_engine *e = host_engine(16u << 20, NULL);
    ccr_model *m;
    cr_expect_eq(ccr_model_load_file(e, "/nonexistent/model.safetensors", &m), CCR_ERR_IO);
    cr_expect(strstr(ccr_last_error(), "/nonexistent/model.safetensors: cannot open") != NULL, "%s", ccr_last_error());
    cr_expect_eq(ccr_model_load(e, "no-such-file.safetensors", &m), CCR_ERR_IO);
    cr_expect_eq(ccr_model_load_file(e, "/tmp", &m), CCR_ERR_IO, "a directory");
    cr_expect(strstr(ccr_last_error(), "/tmp: is a directory") != NULL, "%s", ccr_last_error());
    cr_expect_eq(live_bytes(e), 0);
    ccr_engine_destroy(e);
}

/* A FIFO as the model path: fopen(path, "rb") would wait for a writer, for
 * ever when none comes (ccrun hung on `ccrun FIFO`). It must be refused at
 * once, as a file that is not a model, with nothing allocated; a character
 * device is not a model file either. The timeout turns a hang into a failure. */
Test(runtime_loader, fifo_or_device_as_model_path_is_refused_at_once, .timeout = 20) {
    char fifo[64];
    snprintf(fifo, sizeof fifo, "/tmp/ccr-fifo-%ld", (long)getpid());
    unlink(fifo);
    cr_assert_eq(mkfifo(fifo, 0600), 0, "mkfifo %s", fifo);
    ccr_engine *e = host_engine(16u << 20, NULL);
    ccr_model *m = (ccr_model *)1;
    ccr_status st = ccr_model_load_file(e, fifo, &m);
    unlink(fifo);
    cr_expect_eq(st, CCR_ERR_IO, "%s", ccr_last_error());
    cr_expect_null(m);
    cr_expect(strstr(ccr_last_error(), "not a regular file") != NULL, "%s", ccr_last_error());
    cr_expect(strstr(ccr_last_error(), "a FIFO") != NULL, "%s", ccr_last_error());
    cr_expect_eq(ccr_model_load(e, "/dev/zero", &m), CCR_ERR_IO, "%s", ccr_last_error());
    cr_expect(strstr(ccr_last_error(), "/dev/zero: not a regular file (a character device)") != NULL, "%s",
              ccr_last_error());
    cr_expect_eq(live_bytes(e), 0);
    ccr_engine_destroy(e);
}

/* A Unix socket as the model path: open(2) answers ENXIO, which would say
 * "cannot open: No such device or address"; it is refused like the FIFO
 * and the device, as a file that is not a model file (docs/engine.md). */
Test(runtime_loader, a_socket_as_model_path_is_refused_as_not_a_file) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "/tmp/ccr-sock-%ld", (long)getpid());
    unlink(sa.sun_path);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    cr_assert_geq(fd, 0);
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0, "bind %s", sa.sun_path);
    ccr_engine *e = host_engine(16u << 20, NULL);
    ccr_model *m = (ccr_model *)1;
    ccr_status st = ccr_model_load(e, sa.sun_path, &m);
    char want[160];
    snprintf(want, sizeof want, "%s: not a regular file (a socket), not a model file", sa.sun_path);
    cr_expect_eq(st, CCR_ERR_IO, "%s", ccr_last_error());
    cr_expect_null(m);
    cr_expect_str_eq(ccr_last_error(), want);
    close(fd);
    unlink(sa.sun_path);
    cr_expect_eq(live_bytes(e), 0);
    ccr_engine_destroy(e);
}

/* An empty path names no file: refused as a bad argument that says so,
 * not "': cannot open: No such file or directory" with nothing before the
 * colon; through ccr_model_load too (ccrun ""). */
Test(runtime_loader, an_empty_model_path_is_refused_by_name) {
    ccr_engine *e = host_engine(16u << 20, NULL);
    ccr_model *m = (ccr_model *)1;
    cr_expect_eq(ccr_model_load_file(e, "", &m), CCR_ERR_INVALID_ARGUMENT, "%s", ccr_last_error());
    cr_expect_null(m);
    cr_expect(strstr(ccr_last_error(), "empty model path") != NULL, "%s", ccr_last_error());
    m = (ccr_model *)1;
    cr_expect_eq(ccr_model_load(e, "", &m), CCR_ERR_INVALID_ARGUMENT, "%s", ccr_last_error());
    cr_expect_null(m);
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

/* ---- headers built in memory (defects found by hand and by the fuzzer) ---- */

/* A one-layer model mlp:2x1: 0.weight [1, 2] and 0.bias [1], 12 data bytes. */
#define TINY_META "{\"__metadata__\":{\"ccr.mlp\":\"mlp:2x1\"},"
#define TINY_TENSORS(dtype)                                                                                            \
    "\"0.weight\":{\"dtype\":\"" dtype "\",\"shape\":[1,2],\"data_offsets\":[0,8]},"                                   \
    "\"0.bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}"

/* A memory stream over 8-byte length + `hlen` header bytes + `dlen` data
 * bytes (zeros when data is NULL); *buf is the bytes, freed after fclose. */
static FILE *bytes_stream(const char *header, size_t hlen, const void *data, size_t dlen, unsigned char **buf) {
    size_t total = 8 + hlen + dlen;
    *buf = calloc(1, total);
    cr_assert_not_null(*buf);
    for (int i = 0; i < 8; i++)
        (*buf)[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    memcpy(*buf + 8, header, hlen);
    if (data)
        memcpy(*buf + 8 + hlen, data, dlen);
    FILE *f = fmemopen(*buf, total, "rb");
    cr_assert_not_null(f);
    return f;
}

/* Load bytes_stream(...) through ccr_model_load_stream, named "mem". */
static ccr_status load_bytes(ccr_engine *e, const char *header, size_t hlen, const void *data, size_t dlen) {
    unsigned char *buf;
    FILE *f = bytes_stream(header, hlen, data, dlen, &buf);
    ccr_model *m = (ccr_model *)1;
    ccr_status st = ccr_model_load_stream(e, f, "mem", &m);
    if (st == CCR_OK)
        ccr_model_unload(m);
    else
        cr_expect_null(m);
    fclose(f);
    free(buf);
    return st;
}

static ccr_status load_header(ccr_engine *e, const char *header) {
    static const float data[3] = {0.5f, -0.25f, 0.125f};
    return load_bytes(e, header, strlen(header), data, sizeof data);
}

Test(runtime_loader, header_padding_is_whitespace_only) {
    ccr_engine *e = host_engine(16u << 20, NULL);
    /* control: the spec's padding (spaces; JSON whitespace in general) is fine */
    cr_expect_eq(load_header(e, TINY_META TINY_TENSORS("F32")), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(load_header(e, TINY_META TINY_TENSORS("F32") "        "), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(load_header(e, TINY_META TINY_TENSORS("F32") " \t\r\n"), CCR_OK, "%s", ccr_last_error());
    /* bytes after the object are not padding */
    static const char *const bad[] = {
        TINY_META TINY_TENSORS("F32") "GARBAGE",
        TINY_META TINY_TENSORS("F32") "{}",
        TINY_META TINY_TENSORS("F32") "  " TINY_META TINY_TENSORS("F32"),
        TINY_META TINY_TENSORS("F32") "   x",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_expect_eq(load_header(e, bad[i]), CCR_ERR_FORMAT, "case %zu: %s", i, ccr_last_error());
        cr_expect(strstr(ccr_last_error(), "mem: header has") != NULL &&
                      strstr(ccr_last_error(), "after the JSON object") != NULL,
                  "case %zu: %s", i, ccr_last_error());
    }
    /* a NUL byte is neither JSON nor padding */
    char nul[sizeof(TINY_META TINY_TENSORS("F32")) + 4] = TINY_META TINY_TENSORS("F32");
    size_t n = strlen(nul);
    memcpy(nul + n, " \0 ", 3);
    cr_expect_eq(load_bytes(e, nul, n + 3, (const float[3]){0}, 12), CCR_ERR_FORMAT, "%s", ccr_last_error());
    cr_expect_eq(live_bytes(e), 0);
    ccr_engine_destroy(e);
}

Test(runtime_loader, nul_inside_a_string_is_rejected) {
    ccr_engine *e = host_engine(16u << 20, NULL);
    /* "F32\u0000junk" must not be read as "F32" (cJSON stops at the NUL) */
    cr_expect_eq(load_header(e, TINY_META TINY_TENSORS("F32\\u0000junk")), CCR_ERR_FORMAT, "%s", ccr_last_error());
    cr_expect(strstr(ccr_last_error(), "mem: header string at byte") != NULL &&
                  strstr(ccr_last_error(), "holds a NUL") != NULL,
              "%s", ccr_last_error());
    /* in a name or a metadata value too */
    cr_expect_eq(load_header(e, "{\"__metadata__\":{\"ccr.mlp\":\"mlp:2x1\\u0000:relu\"}," TINY_TENSORS("F32")),
                 CCR_ERR_FORMAT, "%s", ccr_last_error());
    cr_expect(strstr(ccr_last_error(), "holds a NUL") != NULL, "%s", ccr_last_error());
    /* an escaped backslash followed by u0000 is five plain characters */
    cr_expect_eq(load_header(e, TINY_META TINY_TENSORS("F32\\\\u0000")), CCR_ERR_DTYPE, "%s", ccr_last_error());
    cr_expect_eq(live_bytes(e), 0);
    ccr_engine_destroy(e);
}

/* ---- hostile headers: bounded before cJSON builds anything -------------- */

#include <sys/resource.h>

static long peak_rss_kib(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss;
}

/* Write a file (tmpfile) of 8-byte length + header made of `open`, `count`
 * copies of `item` (without the last one's trailing comma), `close`, then
 * `data_bytes` zero bytes; generated here so no large fixture is committed. */
static FILE *hostile_file(const char *open, const char *item, size_t count, const char *close, size_t data_bytes) {
    FILE *f = tmpfile();
    cr_assert_not_null(f);
    size_t il = strlen(item), hlen = strlen(open) + count * il - 1 + strlen(close);
    unsigned char lenbuf[8];
    for (int i = 0; i < 8; i++)
        lenbuf[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    fwrite(lenbuf, 1, 8, f);
    fputs(open, f);
    enum { CHUNK = 1 << 16 };
    static char chunk[CHUNK];
    size_t per = CHUNK / il;
    for (size_t i = 0; i < per; i++)
        memcpy(chunk + i * il, item, il);
    for (size_t done = 0; done < count;) {
        size_t k = count - done < per ? count - done : per;
        size_t bytes = k * il - (done + k == count ? 1 : 0); /* no comma after the last */
        cr_assert_eq(fwrite(chunk, 1, bytes, f), bytes);
        done += k;
    }
    fputs(close, f);
    memset(chunk, 0, sizeof chunk);
    for (size_t done = 0; done < data_bytes;) {
        size_t k = data_bytes - done < CHUNK ? data_bytes - done : CHUNK;
        cr_assert_eq(fwrite(chunk, 1, k, f), k);
        done += k;
    }
    cr_assert_eq(fflush(f), 0);
    rewind(f);
    return f;
}

static void expect_refused(FILE *f, const char *words) {
    ccr_engine *e = host_engine(16u << 20, NULL);
    long before = peak_rss_kib();
    ccr_model *m = (ccr_model *)1;
    cr_expect_eq(ccr_model_load_stream(e, f, "hostile", &m), CCR_ERR_FORMAT, "%s", ccr_last_error());
    cr_expect_null(m);
    cr_expect(strstr(ccr_last_error(), words) != NULL, "message '%s' lacks '%s'", ccr_last_error(), words);
    cr_expect(strncmp(ccr_last_error(), "hostile: ", 9) == 0, "%s", ccr_last_error());
    long grew = peak_rss_kib() - before;
    cr_expect_lt(grew, 64 * 1024, "peak RSS grew by %ld KiB refusing it", grew);
    cr_expect_eq(live_bytes(e), 0);
    ccr_engine_destroy(e);
    fclose(f);
}

Test(runtime_loader, hostile_93mb_array_header_is_refused_by_the_size_cap, .timeout = 60) {
    /* the report: a 93 MB file whose header is one array of zeros, no data */
    FILE *f = hostile_file("[", "0,", 46500000, "]", 0);
    expect_refused(f, "header length 93000001 is more than the data section (0 bytes) + 1 MiB");
}

Test(runtime_loader, token_bomb_header_is_refused_before_parsing, .timeout = 60) {
    /* within the size caps (3 MiB of data), but 2^20 + 2 tokens of nothing */
    FILE *f = hostile_file("{", "\"k\":0,", (1u << 19) + 1, "}", 3u << 20);
    expect_refused(f, "more than 1048576 JSON tokens");
}

Test(runtime_loader, header_structure_is_bounded) {
    ccr_engine *e = host_engine(16u << 20, NULL);
    /* deeper than root object > entry > array */
    cr_expect_eq(load_header(e, TINY_META "\"x\":{\"a\":[[0]]}," TINY_TENSORS("F32")), CCR_ERR_FORMAT);
    cr_expect(strstr(ccr_last_error(), "mem: header nests deeper than 3 levels (at byte ") != NULL, "%s",
              ccr_last_error());
    cr_expect_eq(load_header(e, "{\"__metadata__\":{\"ccr.mlp\":{\"a\":{}}}}"), CCR_ERR_FORMAT);
    cr_expect(strstr(ccr_last_error(), "nests deeper than 3") != NULL, "%s", ccr_last_error());
    /* a shape has at most 8 entries and data_offsets 2: no array needs more */
    cr_expect_eq(load_header(e, TINY_META "\"x\":{\"shape\":[0,0,0,0,0,0,0,0,0]}," TINY_TENSORS("F32")),
                 CCR_ERR_FORMAT);
    cr_expect(strstr(ccr_last_error(), "mem: header array at byte ") != NULL &&
                  strstr(ccr_last_error(), "has more than 8 elements") != NULL,
              "%s", ccr_last_error());
    /* the root must be an object, said before anything is parsed */
    cr_expect_eq(load_header(e, "[0,0,0]"), CCR_ERR_FORMAT);
    cr_expect(strstr(ccr_last_error(), "mem: header is JSON but not an object") != NULL ||
                  strstr(ccr_last_error(), "mem: header is not a JSON object") != NULL,
              "%s", ccr_last_error());
    /* the control still loads: 8 dims is the limit, not 7 */
    cr_expect_eq(load_header(e, TINY_META TINY_TENSORS("F32")), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(live_bytes(e), 0);
    ccr_engine_destroy(e);
}

/* ---- non-finite weights: loaded, but counted per tensor ------------------ */

static ccr_model *load_tiny(ccr_engine *e, const char *dtype_w, const void *data, size_t dlen) {
    char header[512];
    snprintf(header, sizeof header,
             TINY_META "\"0.weight\":{\"dtype\":\"%s\",\"shape\":[1,2],\"data_offsets\":[0,%zu]},"
                       "\"0.bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[%zu,%zu]}}",
             dtype_w, dlen - 4, dlen - 4, dlen);
    unsigned char *buf;
    FILE *f = bytes_stream(header, strlen(header), data, dlen, &buf);
    ccr_model *m = NULL;
    cr_assert_eq(ccr_model_load_stream(e, f, "tiny", &m), CCR_OK, "%s", ccr_last_error());
    fclose(f);
    free(buf);
    return m;
}

Test(runtime_loader, nonfinite_weights_are_counted_per_tensor) {
    ccr_engine *e = host_engine(16u << 20, NULL);
    const char *name;
    size_t count;
    /* F32: weight {NaN, 1}, bias {+Inf} */
    float f32[3] = {NAN, 1.0f, INFINITY};
    ccr_model *m = load_tiny(e, "F32", f32, sizeof f32);
    cr_expect_eq(ccr_model_nonfinite_weights(m), 2);
    cr_assert_eq(ccr_model_nonfinite_tensor(m, 0, &name, &count), CCR_OK);
    cr_expect_str_eq(name, "0.weight");
    cr_expect_eq(count, 1);
    cr_assert_eq(ccr_model_nonfinite_tensor(m, 1, &name, &count), CCR_OK);
    cr_expect_str_eq(name, "0.bias");
    cr_expect_eq(count, 1);
    cr_expect_eq(ccr_model_nonfinite_tensor(m, 2, &name, &count), CCR_ERR_INVALID_ARGUMENT);
    ccr_model_unload(m);
    /* F64 values too large for float32 become Inf when loaded: counted too */
    unsigned char f64[20];
    double big[2] = {1e300, -INFINITY};
    float one = 1.0f;
    memcpy(f64, big, 16);
    memcpy(f64 + 16, &one, 4);
    m = load_tiny(e, "F64", f64, sizeof f64);
    cr_expect_eq(ccr_model_nonfinite_weights(m), 2);
    cr_assert_eq(ccr_model_nonfinite_tensor(m, 0, &name, &count), CCR_OK);
    cr_expect_str_eq(name, "0.weight");
    cr_expect_eq(count, 2);
    cr_expect_eq(ccr_model_nonfinite_tensor(m, 1, &name, &count), CCR_ERR_INVALID_ARGUMENT);
    ccr_model_unload(m);
    /* finite files and spec models: zero */
    float ok[3] = {0.5f, -1.0f, 2.0f};
    m = load_tiny(e, "F32", ok, sizeof ok);
    cr_expect_eq(ccr_model_nonfinite_weights(m), 0);
    cr_expect_eq(ccr_model_nonfinite_tensor(m, 0, &name, &count), CCR_ERR_INVALID_ARGUMENT);
    ccr_model_unload(m);
    cr_assert_eq(ccr_model_load_spec(e, "mlp:8x4x2", &m), CCR_OK);
    cr_expect_eq(ccr_model_nonfinite_weights(m), 0);
    ccr_model_unload(m);
    cr_expect_eq(ccr_model_nonfinite_weights(NULL), 0);
    cr_expect_eq(live_bytes(e), 0);
    ccr_engine_destroy(e);
}

/* A model without softmax outputs its logits: y = W x + b, exactly here
 * (small integers and halves). */
Test(runtime_loader, a_model_without_softmax_outputs_its_logits) {
    ccr_engine *e = host_engine(16u << 20, NULL);
    float wb[3] = {1.0f, 2.0f, 0.5f}; /* 0.weight [1, 2], 0.bias [1] */
    ccr_model *m = load_tiny(e, "F32", wb, sizeof wb);
    cr_expect_not(ccr_model_arch(m)->softmax);
    float x[4] = {3.0f, 4.0f, -1.0f, 0.25f}, y[2];
    cr_assert_eq(ccr_model_run(m, x, 2, y), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(y[0], 11.5f);
    cr_expect_eq(y[1], 0.0f);
    ccr_model_unload(m);
    ccr_engine_destroy(e);
}

/* ---- limits at their exact values, conversion, binding (mutation run) ---- */

/* The header may be the data section + 1 MiB, not a byte more. */
Test(runtime_loader, a_header_may_exceed_its_data_by_one_mib_exactly) {
    ccr_engine *e = host_engine(16u << 20, NULL);
    static const float data[3] = {0.5f, -0.25f, 0.125f};
    static const char json[] = TINY_META TINY_TENSORS("F32");
    size_t most = sizeof data + CCR_ST_HEADER_SLACK;
    char *header = malloc(most + 1);
    cr_assert_not_null(header);
    memset(header, ' ', most + 1);
    memcpy(header, json, strlen(json));
    cr_expect_eq(load_bytes(e, header, most, data, sizeof data), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(load_bytes(e, header, most + 1, data, sizeof data), CCR_ERR_FORMAT);
    cr_expect_str_eq(ccr_last_error(), "mem: header length 1048589 is more than the data section (12 bytes) + 1 MiB: "
                                       "no header describing that data needs so much");
    free(header);
    cr_expect_eq(live_bytes(e), 0);
    ccr_engine_destroy(e);
}

/* ccr_st_open over a header and its data; the caller closes. */
static ccr_status st_open_bytes(const char *header, const void *data, size_t dlen, ccr_st_file *st, FILE **f,
                                unsigned char **buf) {
    *f = bytes_stream(header, strlen(header), data, dlen, buf);
    return ccr_st_open(*f, "mem", st);
}

static void st_close_bytes(ccr_st_file *st, FILE *f, unsigned char *buf) {
    ccr_st_close(st);
    fclose(f);
    free(buf);
}

/* A shape of 8 dimensions is the most, and it is allowed. */
Test(runtime_loader, a_shape_of_eight_dimensions_is_read) {
    static const float data[3] = {1, 2, 3};
    ccr_st_file st;
    FILE *f;
    unsigned char *buf;
    cr_assert_eq(st_open_bytes("{\"x\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,3],\"data_offsets\":[0,12]}}", data,
                               sizeof data, &st, &f, &buf),
                 CCR_OK, "%s", ccr_last_error());
    const ccr_st_tensor *t = ccr_st_find(&st, "x");
    cr_assert_not_null(t);
    cr_expect_eq(t->ndim, 8);
    cr_expect_eq(t->count, 3);
    cr_expect_eq(t->shape[7], 3);
    st_close_bytes(&st, f, buf);
}

/* data_offsets [8, 0): begin past end is out of range, said as such. */
Test(runtime_loader, data_offsets_running_backwards_are_out_of_range) {
    ccr_engine *e = host_engine(16u << 20, NULL);
    cr_expect_eq(load_header(e, TINY_META "\"0.weight\":{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":[8,0]},"
                                          "\"0.bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}"),
                 CCR_ERR_FORMAT);
    cr_expect_str_eq(ccr_last_error(),
                     "mem: tensor '0.weight': data_offsets [8, 0) out of range (data section is 12 bytes: truncated?)");
    cr_expect_eq(live_bytes(e), 0);
    ccr_engine_destroy(e);
}

/* JSON numbers are whole numbers up to 2^53, the last a double holds
 * exactly: 2^53 is read (and found too large for its bytes), 2^53 + 2 is not
 * a number the loader takes. */
Test(runtime_loader, numbers_above_2_to_the_53_are_refused) {
    ccr_engine *e = host_engine(16u << 20, NULL);
    cr_expect_eq(load_header(e, TINY_META "\"0.weight\":{\"dtype\":\"F32\",\"shape\":[1,9007199254740992],"
                                          "\"data_offsets\":[0,8]},"
                                          "\"0.bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}"),
                 CCR_ERR_FORMAT);
    cr_expect(strstr(ccr_last_error(), "F32 [1, 9007199254740992] needs 36028797018963968") != NULL, "%s",
              ccr_last_error());
    cr_expect_eq(load_header(e, TINY_META "\"0.weight\":{\"dtype\":\"F32\",\"shape\":[1,9007199254740994],"
                                          "\"data_offsets\":[0,8]},"
                                          "\"0.bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}"),
                 CCR_ERR_FORMAT);
    cr_expect_str_eq(ccr_last_error(), "mem: tensor '0.weight': shape[1] is '9007199254740994' (header byte 75): "
                                       "shapes and data_offsets are whole numbers in 0..2^53 written in digits");
    cr_expect_eq(live_bytes(e), 0);
    ccr_engine_destroy(e);
}

/* Every number the loader reads (an element of a shape or of data_offsets)
 * is a whole number in 0..2^53 written in digits, JSON's integer grammar
 * without a sign; anything else is refused by the pre-scan quoting the
 * file's own text, before cJSON turns it into a double: "1.0", "1e0" and
 * "-0" were read as 1, 1 and 0; 2^53 + 1 as 2^53 (a message quoted 2^53);
 * "01" as 1. Each spelling in each array a tensor entry has. */
static const char *const bad_numbers[] = {
    "-0",
    "-4",
    "01",
    "00",
    "1.0",
    "2.",
    "1e0",
    "1E0",
    "2e+0",
    "0.0",
    "-0.0",
    "8e-0",
    "1e400",
    "9007199254740993",
    "9007199254740994",
    "18446744073709551615",
    "18446744073709551616",
    "100000000000000000000000000000000000000000000000000000000000000000000000",
    "+2",
    "0x2",
    "NaN",
    "Infinity",
    "true",
    "null",
};

/* TINY_META's model with 0.weight's dtype and second dimension as given. */
static void tiny_header(char *out, size_t cap, const char *dtype, const char *dim) {
    snprintf(out, cap,
             TINY_META "\"0.weight\":{\"dtype\":\"%s\",\"shape\":[1,%s],\"data_offsets\":[0,8]},"
                       "\"0.bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
             dtype, dim);
}

/* A dtype and a refused number are quoted at most 32 and 64 bytes long,
 * cut between characters: a UTF-8 character straddling the cap is left out
 * whole (its first bytes were quoted, and escaped as \xNN on a terminal). */
Test(runtime_loader, a_quoted_field_is_cut_between_characters) {
    ccr_engine *e = host_engine(16u << 20, NULL);
    static const char *const chars[] = {"\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80"};
    for (size_t c = 0; c < sizeof chars / sizeof chars[0]; c++) {
        size_t len = strlen(chars[c]);
        char dtype[40], text[80], header[512], want[512];
        memset(dtype, 'F', 33 - len); /* the character's last byte is byte 33 */
        dtype[33 - len] = '\0';
        char field[128];
        snprintf(field, sizeof field, "%s%sx", dtype, chars[c]);
        tiny_header(header, sizeof header, field, "2");
        snprintf(want, sizeof want, "mem: tensor '0.weight': unsupported dtype '%s' (supported: F32, F16, BF16, F64)",
                 dtype);
        cr_expect_eq(load_header(e, header), CCR_ERR_DTYPE, "%s", header);
        cr_expect_str_eq(ccr_last_error(), want);
        /* a number's text runs to the next structural character */
        memset(text, '1', 65 - len); /* the character's last byte is byte 65 */
        text[65 - len] = '\0';
        snprintf(field, sizeof field, "%s%s2", text, chars[c]);
        tiny_header(header, sizeof header, "F32", field);
        size_t at = (size_t)(strstr(header, "[1,") + 3 - header);
        snprintf(want, sizeof want,
                 "mem: tensor '0.weight': shape[1] is '%s...' (header byte %zu): shapes and data_offsets are whole "
                 "numbers in 0..2^53 written in digits",
                 text, at);
        cr_expect_eq(load_header(e, header), CCR_ERR_FORMAT, "%s", header);
        cr_expect_str_eq(ccr_last_error(), want);
    }
    ccr_engine_destroy(e);
}

Test(runtime_loader, numbers_are_whole_and_written_in_digits) {
    ccr_engine *e = host_engine(16u << 20, NULL);
    static const char *const fields[] = {"shape", "data_offsets"};
    for (size_t f = 0; f < 2; f++)
        for (size_t i = 0; i < sizeof bad_numbers / sizeof bad_numbers[0]; i++) {
            const char *v = bad_numbers[i];
            char header[512], want[512];
            snprintf(header, sizeof header,
                     TINY_META "\"0.weight\":{\"dtype\":\"F32\",\"shape\":[1,%s],\"data_offsets\":[0,%s]},"
                               "\"0.bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
                     f == 0 ? v : "2", f == 0 ? "8" : v);
            size_t at = (size_t)(strstr(header, f == 0 ? "[1," : "[0,") + 3 - header);
            size_t n = strlen(v);
            snprintf(want, sizeof want,
                     "mem: tensor '0.weight': %s[1] is '%.*s%s' (header byte %zu): shapes and data_offsets are "
                     "whole numbers in 0..2^53 written in digits",
                     fields[f], (int)(n > 64 ? 64 : n), v, n > 64 ? "..." : "", at);
            cr_expect_eq(load_header(e, header), CCR_ERR_FORMAT, "%s in %s", v, fields[f]);
            cr_expect_str_eq(ccr_last_error(), want, "%s in %s", v, fields[f]);
        }
    /* the largest and smallest numbers taken, as written: 0, and 2^53 (read,
     * then found too large for its bytes) */
    cr_expect_eq(load_header(e, TINY_META "\"0.weight\":{\"dtype\":\"F32\",\"shape\":[0,2],\"data_offsets\":[0,0]},"
                                          "\"0.bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,12]}}"),
                 CCR_ERR_FORMAT);
    cr_expect(strstr(ccr_last_error(), "'0.bias': data_offsets [0, 12) hold 12 bytes but F32 [1] needs 4") != NULL,
              "%s", ccr_last_error());
    cr_expect_eq(load_header(e, TINY_META "\"0.weight\":{\"dtype\":\"F32\",\"shape\":[1,2],"
                                          "\"data_offsets\":[0,9007199254740992]},"
                                          "\"0.bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}"),
                 CCR_ERR_FORMAT);
    cr_expect_str_eq(ccr_last_error(), "mem: tensor '0.weight': data_offsets [0, 9007199254740992) out of range (data "
                                       "section is 12 bytes: truncated?)");
    /* an array in an array (no entry, no field to name): the byte instead */
    cr_expect_eq(load_header(e, TINY_META "\"x\":[[1.5]]," TINY_TENSORS("F32")), CCR_ERR_FORMAT);
    cr_expect_str_eq(ccr_last_error(), "mem: header value '1.5' at byte 44, in an array: shapes and data_offsets are "
                                       "whole numbers in 0..2^53 written in digits");
    /* numbers outside a tensor entry's arrays are never read: an extra
     * field's 1.5 is left alone, as the safetensors crate does */
    cr_expect_eq(load_header(e, TINY_META "\"0.weight\":{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":[0,8],"
                                          "\"note\":1.5},"
                                          "\"0.bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}"),
                 CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(live_bytes(e), 0);
    ccr_engine_destroy(e);
}

static uint32_t bits_of(float v) {
    uint32_t b;
    memcpy(&b, &v, 4);
    return b;
}

/* F16 and BF16 to float32, bit for bit: subnormals, signs, infinities,
 * NaN (a NaN stays a NaN, never becomes an infinity), the largest half. */
Test(runtime_loader, half_and_bfloat16_convert_bit_exactly) {
    static const uint16_t h[8] = {0x0001, 0x03ff, 0x8001, 0x7c00, 0xfc00, 0x3c00, 0x7bff, 0x7e00};
    static const uint32_t want_h[7] = {0x33800000, 0x387fc000, 0xb3800000, 0x7f800000,
                                       0xff800000, 0x3f800000, 0x477fe000};
    static const uint16_t b[4] = {0x3f80, 0xc040, 0x0001, 0x7fc1};
    unsigned char data[24];
    for (int i = 0; i < 8; i++) {
        data[2 * i] = (unsigned char)(h[i] & 0xff);
        data[2 * i + 1] = (unsigned char)(h[i] >> 8);
    }
    for (int i = 0; i < 4; i++) {
        data[16 + 2 * i] = (unsigned char)(b[i] & 0xff);
        data[16 + 2 * i + 1] = (unsigned char)(b[i] >> 8);
    }
    ccr_st_file st;
    FILE *f;
    unsigned char *buf;
    cr_assert_eq(st_open_bytes("{\"h\":{\"dtype\":\"F16\",\"shape\":[8],\"data_offsets\":[0,16]},"
                               "\"b\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[16,24]}}",
                               data, sizeof data, &st, &f, &buf),
                 CCR_OK, "%s", ccr_last_error());
    float v[8];
    cr_assert_eq(ccr_st_read_f32(&st, ccr_st_find(&st, "h"), v), CCR_OK, "%s", ccr_last_error());
    for (int i = 0; i < 7; i++)
        cr_expect_eq(bits_of(v[i]), want_h[i], "F16 0x%04x: got 0x%08x, want 0x%08x", h[i], bits_of(v[i]), want_h[i]);
    cr_expect(isnan(v[7]), "F16 0x7e00 is a NaN, got %g", v[7]);
    cr_assert_eq(ccr_st_read_f32(&st, ccr_st_find(&st, "b"), v), CCR_OK, "%s", ccr_last_error());
    for (int i = 0; i < 4; i++)
        cr_expect_eq(bits_of(v[i]), (uint32_t)b[i] << 16, "BF16 0x%04x: got 0x%08x", b[i], bits_of(v[i]));
    st_close_bytes(&st, f, buf);
}

/* Tensors converted in 64 KiB chunks: every element of a tensor a few
 * chunks long lands at its own index (F64: 8192 per chunk, BF16: 32768). */
Test(runtime_loader, tensors_longer_than_a_read_chunk_convert_whole) {
    enum { N64 = 2 * 8192 + 5, N16 = 32768 + 7 };
    size_t dlen = N64 * 8 + N16 * 2;
    unsigned char *data = malloc(dlen);
    cr_assert_not_null(data);
    for (size_t i = 0; i < N64; i++) {
        double d = (double)i + 0.5;
        memcpy(data + 8 * i, &d, 8);
    }
    for (size_t i = 0; i < N16; i++) {
        uint16_t v = (uint16_t)((i * 7) % 0x7f80); /* finite bfloat16s */
        data[N64 * 8 + 2 * i] = (unsigned char)(v & 0xff);
        data[N64 * 8 + 2 * i + 1] = (unsigned char)(v >> 8);
    }
    char header[256];
    snprintf(header, sizeof header,
             "{\"d\":{\"dtype\":\"F64\",\"shape\":[%d],\"data_offsets\":[0,%d]},"
             "\"b\":{\"dtype\":\"BF16\",\"shape\":[%d],\"data_offsets\":[%d,%zu]}}",
             N64, N64 * 8, N16, N64 * 8, dlen);
    ccr_st_file st;
    FILE *f;
    unsigned char *buf;
    cr_assert_eq(st_open_bytes(header, data, dlen, &st, &f, &buf), CCR_OK, "%s", ccr_last_error());
    float *v = malloc(N16 * sizeof(float));
    cr_assert_not_null(v);
    cr_assert_eq(ccr_st_read_f32(&st, ccr_st_find(&st, "d"), v), CCR_OK, "%s", ccr_last_error());
    size_t wrong = 0;
    for (size_t i = 0; i < N64; i++)
        wrong += v[i] != (float)i + 0.5f;
    cr_expect_eq(wrong, 0, "%zu of %d F64 elements wrong", wrong, N64);
    cr_assert_eq(ccr_st_read_f32(&st, ccr_st_find(&st, "b"), v), CCR_OK, "%s", ccr_last_error());
    wrong = 0;
    for (size_t i = 0; i < N16; i++)
        wrong += bits_of(v[i]) != (uint32_t)((i * 7) % 0x7f80) << 16;
    cr_expect_eq(wrong, 0, "%zu of %d BF16 elements wrong", wrong, N16);
    free(v);
    st_close_bytes(&st, f, buf);
    free(data);
}

/* Binding tensors to layers checks both dimensions of a weight, the rank
 * of a bias, that a name has a layer key before ".weight", that every layer
 * key has a weight, and that the file has no layer beyond the layer list. */
Test(runtime_loader, tensors_must_match_their_layers_exactly) {
    ccr_engine *e = host_engine(16u << 20, NULL);
    static const struct {
        const char *tensors;
        size_t data_bytes;
        const char *message;
    } cases[] = {
        {"\"0.weight\":{\"dtype\":\"F32\",\"shape\":[1,3],\"data_offsets\":[0,12]},"
         "\"0.bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[12,16]}}",
         16, "mem: tensor '0.weight' has shape [1, 3] but layer 0 of 'mlp:2x1' expects [1, 2]"},
        {"\"0.weight\":{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":[0,8]},"
         "\"0.bias\":{\"dtype\":\"F32\",\"shape\":[1,1],\"data_offsets\":[8,12]}}",
         12, "mem: tensor '0.bias' has shape [1, 1] but layer 0 of 'mlp:2x1' expects [1]"},
        {"\".weight\":{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":[0,8]},"
         "\".bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
         12, "mem: unexpected tensor '.weight' (expected <layer>.weight and <layer>.bias)"},
        {"\"0.bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
         "mem: layer 0 ('0') has a bias but no '0.weight'"},
        {"\"0.weight\":{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":[0,8]},"
         "\"0.bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]},"
         "\"2.weight\":{\"dtype\":\"F32\",\"shape\":[1,1],\"data_offsets\":[12,16]}}",
         16, "mem: more layers in the file than the 1 in 'mlp:2x1' (at '2.weight')"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char header[512];
        snprintf(header, sizeof header, "%s%s", TINY_META, cases[i].tensors);
        cr_expect_eq(load_bytes(e, header, strlen(header), NULL, cases[i].data_bytes), CCR_ERR_SHAPE, "case %zu: %s", i,
                     ccr_last_error());
        cr_expect_str_eq(ccr_last_error(), cases[i].message, "case %zu", i);
    }
    cr_expect_eq(live_bytes(e), 0);
    ccr_engine_destroy(e);
}

/* A tensor's entry must be an object with a string dtype, an array shape
 * and [begin, end] integer offsets; each failure names the tensor. */
Test(runtime_loader, a_tensor_entry_must_have_its_three_fields) {
    ccr_engine *e = host_engine(16u << 20, NULL);
    static const struct {
        const char *weight; /* the entry of 0.weight, followed by a valid 0.bias at [8, 12) */
        const char *message;
    } cases[] = {
        {"5", "mem: tensor '0.weight': entry is not a JSON object"},
        {"{\"shape\":[1,2],\"data_offsets\":[0,8]}", "mem: tensor '0.weight': missing string 'dtype'"},
        {"{\"dtype\":7,\"shape\":[1,2],\"data_offsets\":[0,8]}", "mem: tensor '0.weight': missing string 'dtype'"},
        {"{\"dtype\":\"F32\",\"data_offsets\":[0,8]}", "mem: tensor '0.weight': missing array 'shape'"},
        {"{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]}", "mem: tensor '0.weight': missing array 'shape'"},
        {"{\"dtype\":\"F32\",\"shape\":[1,2]}", "mem: tensor '0.weight': data_offsets must be [begin, end] integers"},
        {"{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":[8]}",
         "mem: tensor '0.weight': data_offsets must be [begin, end] integers"},
        {"{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":[0,8,8]}",
         "mem: tensor '0.weight': data_offsets must be [begin, end] integers"},
        {"{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":[\"0\",8]}",
         "mem: tensor '0.weight': data_offsets must be [begin, end] integers"},
        {"{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":[0,8.5]}",
         "mem: tensor '0.weight': data_offsets[1] is '8.5' (header byte 96): shapes and data_offsets are whole "
         "numbers in 0..2^53 written in digits"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char header[512];
        snprintf(header, sizeof header,
                 TINY_META "\"0.weight\":%s,\"0.bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
                 cases[i].weight);
        cr_expect_eq(load_bytes(e, header, strlen(header), NULL, 12), CCR_ERR_FORMAT, "case %zu: %s", i,
                     ccr_last_error());
        cr_expect_str_eq(ccr_last_error(), cases[i].message, "case %zu", i);
    }
    cr_expect_eq(live_bytes(e), 0);
    ccr_engine_destroy(e);
}

/* Layer keys sort in natural order, letters and all: fc1 < fc2 < fc10 and
 * l01 < l2 < l010 (leading zeros do not count), a9 < b1 (letters first)
 * and p < p.0 < q (a prefix first). The shapes of mlp:2x3x4x1
 * differ per layer, so any other order (byte order puts fc10 before fc2)
 * is a shape error; the file lists the layers last first. */
Test(runtime_loader, layer_keys_sort_in_natural_order) {
    static const char *const keys[][3] = {{"fc1", "fc2", "fc10"},
                                          {"l01", "l2", "l010"},
                                          {"a.1.b", "a.2.b", "a.10.b"},
                                          {"a9", "b1", "b10"},
                                          {"p", "p.0", "q"}};
    ccr_engine *e = host_engine(16u << 20, NULL);
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        char header[1024];
        snprintf(header, sizeof header,
                 "{\"__metadata__\":{\"ccr.mlp\":\"mlp:2x3x4x1\"},"
                 "\"%s.weight\":{\"dtype\":\"F32\",\"shape\":[1,4],\"data_offsets\":[0,16]},"
                 "\"%s.weight\":{\"dtype\":\"F32\",\"shape\":[4,3],\"data_offsets\":[16,64]},"
                 "\"%s.weight\":{\"dtype\":\"F32\",\"shape\":[3,2],\"data_offsets\":[64,88]}}",
                 keys[k][2], keys[k][1], keys[k][0]);
        cr_expect_eq(load_bytes(e, header, strlen(header), NULL, 88), CCR_OK, "%s < %s < %s: %s", keys[k][0],
                     keys[k][1], keys[k][2], ccr_last_error());
    }
    cr_expect_eq(live_bytes(e), 0);
    ccr_engine_destroy(e);
}

/* Two layer keys that differ only in leading zeros ("1" and "01", "l.2.x"
 * and "l.02.x") name the same place in the natural order: which comes
 * first would be qsort's choice, so a file could run its layers in an order
 * nobody chose. Refused, naming both keys; the last two layers have the same
 * shape, so only this check can tell. */
Test(runtime_loader, layer_keys_equal_as_numbers_are_refused) {
    static const char *const keys[][3] = {{"0", "1", "01"}, {"l.0.x", "l.2.x", "l.02.x"}, {"a", "b007", "b7"}};
    ccr_engine *e = host_engine(16u << 20, NULL);
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        char header[1024], want[256];
        snprintf(header, sizeof header,
                 "{\"__metadata__\":{\"ccr.mlp\":\"mlp:2x3x3x3\"},"
                 "\"%s.weight\":{\"dtype\":\"F32\",\"shape\":[3,2],\"data_offsets\":[0,24]},"
                 "\"%s.weight\":{\"dtype\":\"F32\",\"shape\":[3,3],\"data_offsets\":[24,60]},"
                 "\"%s.weight\":{\"dtype\":\"F32\",\"shape\":[3,3],\"data_offsets\":[60,96]}}",
                 keys[k][0], keys[k][1], keys[k][2]);
        cr_expect_eq(load_bytes(e, header, strlen(header), NULL, 96), CCR_ERR_FORMAT, "%s / %s: %s", keys[k][1],
                     keys[k][2], ccr_last_error());
        snprintf(want, sizeof want,
                 "mem: layer keys '%s' and '%s' differ only in leading zeros: their order is not defined", keys[k][1],
                 keys[k][2]);
        cr_expect_str_eq(ccr_last_error(), want, "%s / %s", keys[k][1], keys[k][2]);
    }
    cr_expect_eq(live_bytes(e), 0);
    ccr_engine_destroy(e);
}

/* ccr_model_save pads the header with spaces so the data starts 8-aligned. */
Test(runtime_loader, a_saved_file_starts_its_data_8_aligned) {
    static const char *const specs[] = {"mlp:2x1", "mlp:3x2:relu", "mlp:4x3x2:relu:softmax", "mlp:5x7"};
    char path[64];
    snprintf(path, sizeof path, "/tmp/ccr-align-%ld.safetensors", (long)getpid());
    ccr_engine *e = host_engine(16u << 20, NULL);
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        ccr_model *m;
        cr_assert_eq(ccr_model_load_spec(e, specs[i], &m), CCR_OK, "%s", ccr_last_error());
        cr_assert_eq(ccr_model_save(m, path), CCR_OK, "%s", ccr_last_error());
        ccr_model_unload(m);
        FILE *f = fopen(path, "rb");
        cr_assert_not_null(f);
        unsigned char len[8];
        cr_assert_eq(fread(len, 1, 8, f), 8);
        uint64_t hlen = 0;
        for (int k = 7; k >= 0; k--)
            hlen = (hlen << 8) | len[k];
        cr_expect_eq(hlen % 8, 0, "%s: header of %llu bytes", specs[i], (unsigned long long)hlen);
        char *text = malloc(hlen + 1);
        cr_assert_eq(fread(text, 1, hlen, f), hlen);
        text[hlen] = '\0';
        size_t end = strlen(text);
        while (end > 0 && text[end - 1] == ' ')
            end--;
        cr_expect(end > 0 && text[end - 1] == '}' && hlen - end < 8, "%s: padding after '%s'", specs[i], text);
        free(text);
        fclose(f);
    }
    unlink(path);
    ccr_engine_destroy(e);
}

/* cJSON keeps a repeated key; Python's json and the safetensors crate keep
 * the last. A layer list given twice (or a second __metadata__) would read
 * as one model here and another there: refused, as a tensor name twice is. */
Test(runtime_loader, a_layer_list_given_twice_is_refused) {
    ccr_engine *e = host_engine(16u << 20, NULL);
    cr_expect_eq(load_header(e, "{\"__metadata__\":{\"ccr.mlp\":\"mlp:2x1\",\"ccr.mlp\":\"mlp:2x1:relu\"}," TINY_TENSORS(
                                    "F32")),
                 CCR_ERR_FORMAT, "%s", ccr_last_error());
    cr_expect_str_eq(ccr_last_error(), "mem: __metadata__ key 'ccr.mlp' appears twice");
    cr_expect_eq(load_header(e, TINY_META "\"__metadata__\":{\"ccr.mlp\":\"mlp:9x9\"}," TINY_TENSORS("F32")),
                 CCR_ERR_FORMAT, "%s", ccr_last_error());
    cr_expect_str_eq(ccr_last_error(), "mem: __metadata__ appears twice");
    /* other keys are not read: a repeat of one is not refused */
    cr_expect_eq(load_header(e, "{\"__metadata__\":{\"ccr.mlp\":\"mlp:2x1\",\"x\":\"a\",\"x\":\"b\"}," TINY_TENSORS(
                                    "F32")),
                 CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(live_bytes(e), 0);
    ccr_engine_destroy(e);
}

/* ---- streams: short reads, read errors, early ends, no seeking ------------ */

/* The bytes of a valid mlp:2x1 file (TINY_META, F32), 8 + header + 12. */
static unsigned char *tiny_file(size_t *size) {
    static const char header[] = TINY_META TINY_TENSORS("F32");
    static const float data[3] = {0.5f, -0.25f, 0.125f};
    size_t hlen = sizeof header - 1;
    *size = 8 + hlen + sizeof data;
    unsigned char *b = malloc(*size);
    cr_assert_not_null(b);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    memcpy(b + 8, header, hlen);
    memcpy(b + 8 + hlen, data, sizeof data);
    return b;
}

/* A seekable cookie stream over bytes[0, size): each read gives at most
 * `chunk` bytes; a read at or past `stop` returns -1 (EIO) when `error`,
 * else 0 (an end before the size SEEK_END reports). */
typedef struct cookie_src {
    const unsigned char *bytes;
    size_t size, pos, chunk, stop;
    int error;
} cookie_src;

static ssize_t cookie_read(void *c, char *buf, size_t n) {
    cookie_src *s = c;
    if (s->pos >= s->stop) {
        errno = EIO;
        return s->error ? -1 : 0;
    }
    size_t k = s->stop - s->pos;
    k = k < n ? k : n;
    k = k < s->chunk ? k : s->chunk;
    memcpy(buf, s->bytes + s->pos, k);
    s->pos += k;
    return (ssize_t)k;
}

static int cookie_seek(void *c, off64_t *off, int whence) {
    cookie_src *s = c;
    off64_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? (off64_t)s->pos : (off64_t)s->size;
    if (base + *off < 0) {
        errno = EINVAL;
        return -1;
    }
    s->pos = (size_t)(base + *off);
    *off = (off64_t)s->pos;
    return 0;
}

static ccr_status load_cookie(ccr_engine *e, cookie_src *s, ccr_model **m) {
    FILE *f = fopencookie(s, "rb", (cookie_io_functions_t){.read = cookie_read, .seek = cookie_seek});
    cr_assert_not_null(f);
    *m = (ccr_model *)1;
    ccr_status st = ccr_model_load_stream(e, f, "mem", m);
    fclose(f);
    return st;
}

/* One byte per read (glibc's buffer refilled 1 byte at a time): the same
 * model, bit for bit, as from a memory stream. */
Test(runtime_loader, a_stream_of_one_byte_reads_loads_the_same_model) {
    size_t size;
    unsigned char *b = tiny_file(&size);
    ccr_engine *e = host_engine(16u << 20, NULL);
    cookie_src s = {.bytes = b, .size = size, .chunk = 1, .stop = size};
    ccr_model *m;
    cr_assert_eq(load_cookie(e, &s, &m), CCR_OK, "%s", ccr_last_error());
    float x[2] = {2, 4}, y;
    cr_expect_eq(ccr_model_run(m, x, 1, &y), CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(y, 0.5f * 2 - 0.25f * 4 + 0.125f);
    ccr_model_unload(m);
    cr_expect_eq(live_bytes(e), 0);
    ccr_engine_destroy(e);
    free(b);
}

/* Every byte, three ways, each with no model and nothing on the device:
 * the file cut there is CCR_ERR_FORMAT (it says what is missing); a stream
 * that reports the whole size but ends (0) or fails (-1) there is
 * CCR_ERR_IO ("short read"), never FORMAT's "truncated": the file is whole. */
Test(runtime_loader, a_cut_file_or_a_failing_stream_at_every_byte_is_refused) {
    size_t size;
    unsigned char *b = tiny_file(&size);
    size_t data_start = 8 + sizeof(TINY_META TINY_TENSORS("F32")) - 1;
    ccr_engine *e = host_engine(16u << 20, NULL);
    for (int mode = 0; mode < 3; mode++)
        for (size_t at = 0; at < size; at++) {
            cookie_src s = {.bytes = b, .size = mode ? size : at, .chunk = 3, .stop = at, .error = mode == 2};
            ccr_model *m;
            ccr_status st = load_cookie(e, &s, &m), want = mode ? CCR_ERR_IO : CCR_ERR_FORMAT;
            const char *words = mode ? "short read" : at < data_start ? "truncated" : "out of range";
            const char *how = mode == 0 ? "cut" : mode == 1 ? "end" : "error";
            cr_expect_eq(st, want, "%s at %zu: got %s (%s)", how, at, ccr_status_string(st), ccr_last_error());
            cr_expect_null(m, "%s at %zu", how, at);
            cr_expect(strncmp(ccr_last_error(), "mem: ", 5) == 0 && strstr(ccr_last_error(), words), "%s at %zu: %s",
                      how, at, ccr_last_error());
            cr_expect_eq(live_bytes(e), 0, "%s at %zu", how, at);
            cr_expect_eq(reserved_bytes(e), 0, "%s at %zu", how, at);
        }
    ccr_engine_destroy(e);
    free(b);
}

/* A pipe or a socket cannot be sized or sought: CCR_ERR_IO "cannot seek",
 * read no further, as ccr.h says. */
Test(runtime_loader, an_unseekable_stream_is_refused_as_io) {
    size_t size;
    unsigned char *b = tiny_file(&size);
    ccr_engine *e = host_engine(16u << 20, NULL);
    for (int kind = 0; kind < 2; kind++) {
        int fds[2];
        cr_assert_eq(kind ? socketpair(AF_UNIX, SOCK_STREAM, 0, fds) : pipe(fds), 0);
        int rd = fds[0], wr = fds[1];
        cr_assert_eq(write(wr, b, size), (ssize_t)size);
        close(wr);
        FILE *f = fdopen(rd, "rb");
        cr_assert_not_null(f);
        ccr_model *m = (ccr_model *)1;
        cr_expect_eq(ccr_model_load_stream(e, f, "mem", &m), CCR_ERR_IO, "%s", ccr_last_error());
        cr_expect_null(m);
        cr_expect(strncmp(ccr_last_error(), "mem: cannot seek", 16) == 0, "%s", ccr_last_error());
        fclose(f);
    }
    cr_expect_eq(live_bytes(e), 0);
    ccr_engine_destroy(e);
    free(b);
}

/* ---- keys: repeated in an entry, not UTF-8 -------------------------------- */

/* A tensor entry naming a field twice: cJSON reads the first, Python's json
 * and the safetensors crate the last (or refuse), so the file would be
 * another model elsewhere: refused, naming the field. */
Test(runtime_loader, a_field_given_twice_in_a_tensor_entry_is_refused) {
    static const struct {
        const char *weight, *field;
    } cases[] = {
        {"{\"dtype\":\"F32\",\"dtype\":\"I8\",\"shape\":[1,2],\"data_offsets\":[0,8]}", "dtype"},
        {"{\"dtype\":\"F32\",\"shape\":[1,2],\"shape\":[2,1],\"data_offsets\":[0,8]}", "shape"},
        {"{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":[0,8],\"data_offsets\":[0,8]}", "data_offsets"},
        {"{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":[0,8],\"d\\u0074ype\":\"F16\"}", "dtype"},
    };
    ccr_engine *e = host_engine(16u << 20, NULL);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char header[512], want[128];
        snprintf(header, sizeof header,
                 TINY_META "\"0.weight\":%s,\"0.bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
                 cases[i].weight);
        cr_expect_eq(load_bytes(e, header, strlen(header), NULL, 12), CCR_ERR_FORMAT, "case %zu: %s", i,
                     ccr_last_error());
        snprintf(want, sizeof want, "mem: tensor '0.weight': field '%s' appears twice", cases[i].field);
        cr_expect_str_eq(ccr_last_error(), want, "case %zu", i);
    }
    /* a field the loader does not read may repeat, as __metadata__'s other keys */
    cr_expect_eq(load_header(e, TINY_META "\"0.weight\":{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":[0,8],"
                                          "\"x\":1,\"x\":2},"
                                          "\"0.bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}"),
                 CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(live_bytes(e), 0);
    ccr_engine_destroy(e);
}

/* JSON is UTF-8 (RFC 8259): a string with a byte that is not well-formed
 * UTF-8 (a stray continuation, an overlong form of '0' or '/', an encoded
 * surrogate, a cut sequence, past U+10FFFF) is refused before parsing, as
 * Python and the safetensors crate refuse it; well-formed names load. */
Test(runtime_loader, strings_that_are_not_utf8_are_refused) {
    static const char *const bad[] = {"\x80",         "\xc0\xb0",         "\xc1\xaf",         "\xe0\x80\xb0",
                                      "\xed\xa0\x80", "\xf0\x80\x80\xb0", "\xf4\x90\x80\x80", "\xff",
                                      "\xe2\x82"};
    ccr_engine *e = host_engine(16u << 20, NULL);
    for (int where = 0; where < 2; where++)
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            char header[512];
            if (where == 0) /* in a layer key */
                snprintf(header, sizeof header,
                         TINY_META "\"%s0.weight\":{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":[0,8]},"
                                   "\"%s0.bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
                         bad[i], bad[i]);
            else /* in a metadata value */
                snprintf(header, sizeof header,
                         "{\"__metadata__\":{\"ccr.mlp\":\"mlp:2x1\",\"note\":\"a%sb\"}," TINY_TENSORS("F32"), bad[i]);
            cr_expect_eq(load_bytes(e, header, strlen(header), NULL, 12), CCR_ERR_FORMAT, "%d/%zu: %s", where, i,
                         ccr_last_error());
            cr_expect(strstr(ccr_last_error(), "mem: header string at byte") && strstr(ccr_last_error(), "not UTF-8"),
                      "%d/%zu: %s", where, i, ccr_last_error());
        }
    /* control: two-, three- and four-byte characters in keys and values */
    cr_expect_eq(
        load_header(e, "{\"__metadata__\":{\"ccr.mlp\":\"mlp:2x1\",\"n\xc3\xa9\":\"\xe2\x82\xac\xf0\x9f\x98\x80\"},"
                       "\"\xc3\xa9.weight\":{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":[0,8]},"
                       "\"\xc3\xa9.bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}"),
        CCR_OK, "%s", ccr_last_error());
    cr_expect_eq(live_bytes(e), 0);
    ccr_engine_destroy(e);
}

/* ---- saving: onto its own file, odd layer lists, paths that are no file --- */

/* A model saved onto the very file it was loaded from, then loaded again,
 * is the same model: layer list (a bias on some layers only, acts= with a
 * none in the middle) and outputs bit for bit. */
Test(runtime_loader, a_model_saved_over_its_own_file_loads_back_the_same) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/ccr-resave-%ld.safetensors", (long)getpid());
    /* mlp:2x3x1: layer 0 with its bias, layer 1 without */
    static const char header[] = "{\"__metadata__\":{\"ccr.mlp\":\"mlp:2x3x1:acts=none/relu:nosoftmax\"},"
                                 "\"0.weight\":{\"dtype\":\"F32\",\"shape\":[3,2],\"data_offsets\":[0,24]},"
                                 "\"0.bias\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[24,36]},"
                                 "\"5.weight\":{\"dtype\":\"F32\",\"shape\":[1,3],\"data_offsets\":[36,48]}}";
    static const float data[12] = {0.5f, -1, 2, 0.25f, -3, 1, 0.125f, -0.5f, 4, 1, -2, 0.75f};
    unsigned char *buf;
    FILE *f = bytes_stream(header, sizeof header - 1, data, sizeof data, &buf);
    FILE *out = fopen(path, "wb");
    cr_assert_not_null(out);
    cr_assert_eq(fwrite(buf, 1, 8 + sizeof header - 1 + sizeof data, out), 8 + sizeof header - 1 + sizeof data);
    fclose(out);
    fclose(f);
    free(buf);
    ccr_engine *e = host_engine(16u << 20, NULL);
    ccr_model *m;
    cr_assert_eq(ccr_model_load_file(e, path, &m), CCR_OK, "%s", ccr_last_error());
    ccr_arch before = *ccr_model_arch(m);
    float *want = outputs_of(m, 4);
    cr_assert_eq(ccr_model_save(m, path), CCR_OK, "%s", ccr_last_error());
    ccr_model_unload(m);
    /* the layer list says :nobias (a layer lacks one); layer 0's is a tensor */
    char saved[512] = "";
    f = fopen(path, "rb");
    cr_assert_not_null(f);
    saved[fread(saved, 1, sizeof saved - 1, f)] = '\0';
    fclose(f);
    cr_expect(memmem(saved, sizeof saved, "\"mlp:2x3x1:acts=none/relu:nosoftmax:nobias\"", 43) &&
                  memmem(saved, sizeof saved, "\"0.bias\"", 8),
              "the saved header: %s", saved + 8);
    cr_assert_eq(ccr_model_load_file(e, path, &m), CCR_OK, "%s", ccr_last_error());
    const ccr_arch *after = ccr_model_arch(m);
    cr_expect_eq(after->n_layers, 2);
    cr_expect_eq(after->softmax, 0);
    for (size_t i = 0; i < 2; i++) {
        cr_expect_eq(after->layers[i].in, before.layers[i].in, "layer %zu", i);
        cr_expect_eq(after->layers[i].out, before.layers[i].out, "layer %zu", i);
        cr_expect_eq(after->layers[i].act, before.layers[i].act, "layer %zu", i);
        cr_expect_eq(after->layers[i].has_bias, i == 0, "layer %zu", i);
    }
    expect_same_outputs(m, 4, want, "after the save over its own file");
    free(want);
    ccr_model_unload(m);
    unlink(path);
    cr_expect_eq(live_bytes(e), 0);
    ccr_engine_destroy(e);
}

/* The tensors decide which layers have a bias: a layer list that says
 * :nobias over a file with every bias loads every bias, and computes what
 * the same file without :nobias computes. */
Test(runtime_loader, a_files_biases_come_from_its_tensors_not_its_layer_list) {
    static const float data[9] = {0.5f, -1, 2, 0.25f, 3, -2, 0.75f, 1, -0.5f}; /* 2x2 W, [2] b, 1x2 W, [1] b */
    float y[2][2];
    for (int nobias = 0; nobias < 2; nobias++) {
        char header[512];
        snprintf(header, sizeof header,
                 "{\"__metadata__\":{\"ccr.mlp\":\"mlp:2x2x1:relu:nosoftmax%s\"},"
                 "\"0.weight\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
                 "\"0.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]},"
                 "\"1.weight\":{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":[24,32]},"
                 "\"1.bias\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[32,36]}}",
                 nobias ? ":nobias" : "");
        unsigned char *buf;
        FILE *f = bytes_stream(header, strlen(header), data, sizeof data, &buf);
        ccr_engine *e = host_engine(16u << 20, NULL);
        ccr_model *m;
        cr_assert_eq(ccr_model_load_stream(e, f, "m", &m), CCR_OK, "%s", ccr_last_error());
        const ccr_arch *a = ccr_model_arch(m);
        cr_expect(a->layers[0].has_bias && a->layers[1].has_bias, "nobias %d: the file's biases are loaded", nobias);
        const float x[2] = {1, 2};
        cr_assert_eq(ccr_model_run(m, x, 1, y[nobias]), CCR_OK, "%s", ccr_last_error());
        ccr_model_unload(m);
        ccr_engine_destroy(e);
        fclose(f);
        free(buf);
    }
    cr_expect_eq(y[1][0], y[0][0], "the same model either way");
}

/* A save path that cannot be written is CCR_ERR_IO naming it and the
 * reason: a directory (left as it was), a missing directory, a FIFO nobody
 * reads (never waited for), a full device. */
Test(runtime_loader, a_save_to_a_path_that_is_no_file_is_an_io_error, .timeout = 20) {
    char dir[64], fifo[64];
    snprintf(dir, sizeof dir, "/tmp/ccr-savedir-%ld", (long)getpid());
    snprintf(fifo, sizeof fifo, "/tmp/ccr-savefifo-%ld", (long)getpid());
    rmdir(dir);
    unlink(fifo);
    cr_assert_eq(mkdir(dir, 0700), 0);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    const struct {
        const char *path, *why;
    } cases[] = {
        {dir, "cannot create: Is a directory"},
        {"/nonexistent-dir/m.safetensors", "cannot create: No such file or directory"},
        {fifo, "cannot create: a FIFO nobody reads"},
        {"/dev/full", "write failed: No space left on device"},
    };
    ccr_engine *e = host_engine(16u << 20, NULL);
    ccr_model *m;
    cr_assert_eq(ccr_model_load_spec(e, "mlp:64x64x10:relu:softmax", &m), CCR_OK, "%s", ccr_last_error());
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char want[128];
        snprintf(want, sizeof want, "%s: %s", cases[i].path, cases[i].why);
        cr_expect_eq(ccr_model_save(m, cases[i].path), CCR_ERR_IO, "case %zu: %s", i, ccr_last_error());
        cr_expect_str_eq(ccr_last_error(), want, "case %zu", i);
    }
    struct stat sb;
    cr_expect(stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode));
    ccr_model_unload(m);
    cr_expect_eq(live_bytes(e), 0);
    ccr_engine_destroy(e);
    rmdir(dir);
    unlink(fifo);
}
