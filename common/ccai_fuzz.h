/*
 * ccai_fuzz.h — what the libFuzzer harnesses share (allocator/fuzz,
 * bench/fuzz, runtime/fuzz; built by cca_add_fuzzer, run by scripts/fuzz.sh).
 *
 * libFuzzer hands a harness bytes, not a string: data[0, size) may hold NUL
 * bytes anywhere and has no terminator. A parser of C strings sees the
 * bytes up to the first NUL, which is what a C caller (getenv, argv, a
 * string built in memory) can give it; ccai_fuzz_cstring makes that string,
 * a malloc'd copy with a terminator after the last byte (so the NULs inside
 * stay, for the harnesses that cut the input into several strings there).
 * NULL when host memory ran out: the harness skips the input. Cost: one
 * allocation and copy of the input.
 */
#ifndef CCAI_FUZZ_H
#define CCAI_FUZZ_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static inline char *ccai_fuzz_cstring(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (text) {
        if (size)
            memcpy(text, data, size);
        text[size] = '\0';
    }
    return text;
}

#endif /* CCAI_FUZZ_H */
