#!/bin/sh
# Build the project's libFuzzer targets with clang (ASan + UBSan) and run
# them, one process at a time.
#
#   scripts/fuzz.sh TARGET [SECONDS]     # one target, default 60 s
#   scripts/fuzz.sh all [SECONDS]        # every target in turn, SECONDS each
#
# Targets (each harness's opening comment says what it checks):
#   loader  runtime/fuzz/fuzz_loader.c    safetensors model files
#   text    runtime/fuzz/fuzz_text.c      model specs, footprint sidecars
#   json    runtime/fuzz/fuzz_json.c      ccrun --json and the snapshots, parsed back
#   config  allocator/fuzz/fuzz_config.c  CCALLOC_CONF, sizes, validate, print round trip
#   api     allocator/fuzz/fuzz_api.c     the allocator's public API, action by action against a model
#   trace   bench/fuzz/fuzz_trace.c       ccbench trace files (CSV, gzip), write round trip, replay
#
# Build dir: $CCA_FUZZ_BUILD, default build-fuzz/ (host-only: CUDA off; no
# OpenBLAS, whose OpenMP flavour would bring libgomp next to clang's libomp;
# every library built with ASan + UBSan (CCA_SANITIZE), the ones under test
# with libFuzzer coverage too; the allocator at assertion level 2, CCA_DEBUG:
# its full invariant walk after every public call, so that a replay or a
# load that corrupts it stops there). Seeds: committed files (fixtures, traces,
# each target's seeds/), copied into BUILD/fuzz-corpus/TARGET, which keeps
# what the runs found. Crashes and leaks land in BUILD/fuzz-artifacts/; the
# exit status is libFuzzer's (non-zero on a finding). Reproduce one with:
#   build-fuzz/bench/ccb_fuzz_trace build-fuzz/fuzz-artifacts/crash-...
set -eu
TARGET=${1:?usage: scripts/fuzz.sh loader|text|json|config|api|trace|all [SECONDS]}
SECONDS_TO_RUN=${2:-60}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${CCA_FUZZ_BUILD:-$ROOT/build-fuzz}
ALL="loader text json config api trace"
if [ "$TARGET" = all ]; then
    for t in $ALL; do "$0" "$t" "$SECONDS_TO_RUN"; done
    exit 0
fi

# binary, seeds and libFuzzer options per target (DICT "": none)
RSS=2048 TIMEOUT=10
case $TARGET in
loader) BIN=runtime/ccr_fuzz_loader DICT=runtime/fuzz/safetensors.dict MAX_LEN=65536
    SEEDS="$ROOT/tests/fixtures/*.safetensors $ROOT/tests/fixtures/malformed/*.safetensors" ;;
text) BIN=runtime/ccr_fuzz_text DICT=runtime/fuzz/text.dict MAX_LEN=4096
    SEEDS="$ROOT/runtime/fuzz/seeds/*" ;;
json) BIN=runtime/ccr_fuzz_json DICT=runtime/fuzz/json.dict MAX_LEN=1024
    SEEDS="$ROOT/runtime/fuzz/seeds_json/*" ;;
config) BIN=allocator/cca_fuzz_config DICT=allocator/fuzz/config.dict MAX_LEN=4096
    SEEDS="$ROOT/allocator/fuzz/seeds/*" ;;
api) BIN=allocator/cca_fuzz_api DICT="" MAX_LEN=4096 RSS=4096 TIMEOUT=20
    SEEDS="$ROOT/allocator/fuzz/corpus/*" ;;
trace) BIN=bench/ccb_fuzz_trace DICT=bench/fuzz/trace.dict MAX_LEN=65536
    SEEDS="$ROOT/bench/fuzz/seeds/* $ROOT/bench/traces/*.csv $ROOT/bench/traces/torch-bert-infer.csv.gz $ROOT/bench/traces/torch-resnet50-infer.csv.gz" ;;
*) echo "scripts/fuzz.sh: unknown target '$TARGET' (one of: $ALL, all)" >&2; exit 2 ;;
esac

CC=${CC:-clang}
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="${CXX:-clang++}" \
    -DCCA_SANITIZE=ON -DCCA_ENABLE_CUDA=OFF -DCCA_BUILD_TESTS=OFF -DCCA_BUILD_BENCH=ON -DCCR_BUILD_FUZZ=ON \
    -DCCA_BUILD_FUZZ=ON -DCCK_USE_OPENBLAS=OFF -DCCA_DEBUG=2 >/dev/null
cmake --build "$BUILD" --target "$(basename "$BIN")" -j"$(nproc)"
CORPUS=$BUILD/fuzz-corpus/$TARGET
mkdir -p "$CORPUS" "$BUILD/fuzz-artifacts"
# shellcheck disable=SC2086 # SEEDS are globs
cp $SEEDS "$CORPUS"/
echo "== fuzzing $TARGET for $SECONDS_TO_RUN s =="
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} "$BUILD/$BIN" \
    -max_total_time="$SECONDS_TO_RUN" -max_len="$MAX_LEN" -rss_limit_mb="$RSS" -timeout="$TIMEOUT" \
    ${DICT:+-dict="$ROOT/$DICT"} -artifact_prefix="$BUILD/fuzz-artifacts/" \
    -print_final_stats=1 "$CORPUS"
