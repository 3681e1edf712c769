#!/bin/sh
# Build the loader's libFuzzer target with clang (ASan + UBSan) and run it.
#
#   runtime/fuzz/run.sh [SECONDS]      # default 60; CI (scripts/test.sh) runs it with 30
#
# Build dir: build-fuzz/ (host-only: CUDA off; no OpenBLAS, whose OpenMP
# flavour would bring libgomp next to clang's libomp; every library built with ASan +
# UBSan (CCA_SANITIZE), the runtime with libFuzzer coverage too). Seeds: the committed
# fixtures (valid models and every hand-made malformed file). Crashes and
# leaks land in build-fuzz/fuzz-artifacts/; the exit status is libFuzzer's
# (non-zero on a finding). Reproduce one with:
#   build-fuzz/runtime/ccr_fuzz_loader build-fuzz/fuzz-artifacts/crash-...
set -eu
SECONDS_TO_RUN=${1:-60}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$ROOT/build-fuzz
CC=${CC:-clang}
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="${CXX:-clang++}" \
    -DCCA_SANITIZE=ON -DCCA_ENABLE_CUDA=OFF -DCCA_BUILD_TESTS=OFF -DCCA_BUILD_BENCH=OFF -DCCR_BUILD_FUZZ=ON \
    -DCCK_USE_OPENBLAS=OFF >/dev/null
cmake --build "$BUILD" --target ccr_fuzz_loader -j"$(nproc)"
CORPUS=$BUILD/fuzz-corpus
mkdir -p "$CORPUS" "$BUILD/fuzz-artifacts"
cp "$ROOT"/tests/fixtures/*.safetensors "$ROOT"/tests/fixtures/malformed/*.safetensors "$CORPUS"/
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} "$BUILD/runtime/ccr_fuzz_loader" \
    -max_total_time="$SECONDS_TO_RUN" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
    -dict="$ROOT/runtime/fuzz/safetensors.dict" -artifact_prefix="$BUILD/fuzz-artifacts/" \
    -print_final_stats=1 "$CORPUS"
