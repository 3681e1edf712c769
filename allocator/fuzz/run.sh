#!/bin/sh
# Build the allocator's API action fuzzer (allocator/fuzz/fuzz_api.c) with
# clang (ASan + UBSan, libFuzzer coverage on the library) and run it.
#
#   allocator/fuzz/run.sh [SECONDS]    # default 60; CI (scripts/test.sh) runs it with 30
#
# Build dir: build-fuzz/ (the loader fuzzer's, runtime/fuzz/run.sh: the same
# host-only, sanitized configuration; BUILD=dir overrides it), with the
# allocator's cheap assertions on (CCA_DEBUG=1). Seeds: the committed corpus
# allocator/fuzz/corpus/ (one input per configuration, and the minimized
# findings). Crashes land in BUILD/fuzz-api-artifacts/; the exit status is
# libFuzzer's (non-zero on a finding). Reproduce one with:
#   build-fuzz/allocator/cca_fuzz_api build-fuzz/fuzz-api-artifacts/crash-...
set -eu
SECONDS_TO_RUN=${1:-60}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build-fuzz}
CC=${CC:-clang}
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="${CXX:-clang++}" \
    -DCCA_SANITIZE=ON -DCCA_ENABLE_CUDA=OFF -DCCA_BUILD_TESTS=OFF -DCCA_BUILD_BENCH=OFF -DCCA_BUILD_FUZZ=ON \
    -DCCA_DEBUG=1 -DCCK_USE_OPENBLAS=OFF >/dev/null
cmake --build "$BUILD" --target cca_fuzz_api -j"$(nproc)"
CORPUS=$BUILD/fuzz-api-corpus
mkdir -p "$CORPUS" "$BUILD/fuzz-api-artifacts"
cp "$ROOT"/allocator/fuzz/corpus/* "$CORPUS"/
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} "$BUILD/allocator/cca_fuzz_api" \
    -max_total_time="$SECONDS_TO_RUN" -max_len=4096 -rss_limit_mb=4096 -timeout=20 \
    -artifact_prefix="$BUILD/fuzz-api-artifacts/" -print_final_stats=1 "$CORPUS"
