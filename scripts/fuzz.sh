#!/bin/sh
# Build the project's libFuzzer targets with clang (ASan + UBSan) and run
# them.
#
#   scripts/fuzz.sh TARGET [SECONDS]         # one target, default 60 s (1..2^31-1)
#   scripts/fuzz.sh T1,T2,... [SECONDS]      # side by side, one process each
#   scripts/fuzz.sh all [SECONDS]            # every target in turn, SECONDS each
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
# every library built with ASan + UBSan (CCA_SANITIZE; Debug, so at -O1),
# the ones under test with libFuzzer coverage too; the allocator at
# assertion level 2, CCA_DEBUG: its full invariant walk after every public
# call, so that a replay or a load that corrupts it stops there). Seeds:
# committed files (fixtures, traces, each target's seeds, below), copied
# into BUILD/fuzz-corpus/TARGET, which keeps what the runs found. The seeds
# named by their SHA-1 are inputs of long runs that added coverage, kept by
# a merge into the committed ones (commit only what adds some):
#   mkdir NEW && cp SEEDS NEW/ && BUILD/BIN -merge=1 -max_len=MAX_LEN NEW BUILD/fuzz-corpus/TARGET
# (api and trace, tens of inputs a second: add -use_counters=0, new edges
# only, so that CI spends seconds on its seeds) and the files NEW gained
# go into the target's seeds directory (the loader's:
# runtime/fuzz/seeds_loader; fixtures and traces stay as they are). A CI
# run of 20-30 s starts from them (docs/engine.md has the coverage they
# give). Crashes and
# leaks land in BUILD/fuzz-artifacts/. One target writes to the terminal;
# targets side by side each write BUILD/fuzz-logs/TARGET.log, and its last
# lines (the final stats, or the finding) are printed when all have ended.
# Exit status: libFuzzer's (non-zero on a finding), the first non-zero of
# targets side by side. Reproduce a finding with:
#   build-fuzz/bench/ccb_fuzz_trace build-fuzz/fuzz-artifacts/crash-...
set -eu
TARGETS=${1:?usage: scripts/fuzz.sh loader|text|json|config|api|trace[,...]|all [SECONDS]}
SECONDS_TO_RUN=${2:-60}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${CCA_FUZZ_BUILD:-$ROOT/build-fuzz}
ALL="loader text json config api trace"
if [ "$TARGETS" = all ]; then
    for t in $ALL; do "$0" "$t" "$SECONDS_TO_RUN"; done
    exit 0
fi

# binary, seeds and libFuzzer options per target (DICT "": none)
target() {
    RSS=2048 TIMEOUT=10
    case $1 in
    loader) BIN=runtime/ccr_fuzz_loader DICT=runtime/fuzz/safetensors.dict MAX_LEN=65536
        SEEDS="$ROOT/tests/fixtures/*.safetensors $ROOT/tests/fixtures/malformed/*.safetensors $ROOT/runtime/fuzz/seeds_loader/*" ;;
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
    *) echo "scripts/fuzz.sh: unknown target '$1' (one of: $ALL, all; several joined by commas)" >&2; exit 2 ;;
    esac
}

# every target named, and the seconds, checked before anything is built
case $TARGETS in
,* | *, | *,,*) echo "scripts/fuzz.sh: an empty target name in '$TARGETS'" >&2; exit 2 ;;
esac
# SECONDS: digits, 1..2^31-1 (libFuzzer's -max_total_time is an int, and 0
# runs for ever), leading zeros dropped before the checks ("00" is 0)
case $SECONDS_TO_RUN in
'' | *[!0-9]*) echo "scripts/fuzz.sh: SECONDS must be a whole number above 0, not '$SECONDS_TO_RUN'" >&2; exit 2 ;;
esac
digits=$(echo "$SECONDS_TO_RUN" | sed 's/^0*//')
if [ -z "$digits" ]; then
    echo "scripts/fuzz.sh: SECONDS must be a whole number above 0, not '$SECONDS_TO_RUN'" >&2
    exit 2
fi
if [ "${#digits}" -gt 10 ] || [ "$digits" -gt 2147483647 ]; then
    echo "scripts/fuzz.sh: SECONDS must be at most 2147483647, not '$SECONDS_TO_RUN'" >&2
    exit 2
fi
SECONDS_TO_RUN=$digits
LIST=$(echo "$TARGETS" | tr , ' ')
BINS=
for t in $LIST; do
    target "$t"
    case " $BINS " in *" $(basename "$BIN") "*)
        echo "scripts/fuzz.sh: target '$t' named twice (its corpus and log are one)" >&2; exit 2 ;;
    esac
    BINS="$BINS --target $(basename "$BIN")"
done
[ -n "$BINS" ] || target ""

CC=${CC:-clang}
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="${CXX:-clang++}" \
    -DCCA_SANITIZE=ON -DCCA_ENABLE_CUDA=OFF -DCCA_BUILD_TESTS=OFF -DCCA_BUILD_BENCH=ON -DCCR_BUILD_FUZZ=ON \
    -DCCA_BUILD_FUZZ=ON -DCCK_USE_OPENBLAS=OFF -DCCA_DEBUG=2 >/dev/null
# shellcheck disable=SC2086 # BINS: --target NAME pairs
cmake --build "$BUILD" $BINS -j"$(nproc)"
mkdir -p "$BUILD/fuzz-artifacts" "$BUILD/fuzz-logs"

# run TARGET: libFuzzer on its corpus for SECONDS_TO_RUN
run() {
    target "$1"
    CORPUS=$BUILD/fuzz-corpus/$1
    mkdir -p "$CORPUS"
    # shellcheck disable=SC2086 # SEEDS are globs
    cp $SEEDS "$CORPUS"/
    ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} "$BUILD/$BIN" \
        -max_total_time="$SECONDS_TO_RUN" -max_len="$MAX_LEN" -rss_limit_mb="$RSS" -timeout="$TIMEOUT" \
        ${DICT:+-dict="$ROOT/$DICT"} -artifact_prefix="$BUILD/fuzz-artifacts/" \
        -print_final_stats=1 "$CORPUS"
}

if [ "$LIST" = "$TARGETS" ]; then # one target: on the terminal
    echo "== fuzzing $TARGETS for $SECONDS_TO_RUN s =="
    run "$TARGETS"
    exit
fi
echo "== fuzzing $LIST side by side for $SECONDS_TO_RUN s (logs in $BUILD/fuzz-logs/) =="
PIDS=
for t in $LIST; do
    run "$t" >"$BUILD/fuzz-logs/$t.log" 2>&1 &
    PIDS="$PIDS $!"
done
STATUS=0
for t in $LIST; do
    set -- $PIDS
    pid=$1
    shift
    PIDS="$*"
    rc=0
    wait "$pid" || rc=$?
    echo "== $t: exit $rc; the last lines of $BUILD/fuzz-logs/$t.log =="
    tail -n "$([ "$rc" -eq 0 ] && echo 12 || echo 60)" "$BUILD/fuzz-logs/$t.log"
    [ "$STATUS" -ne 0 ] || STATUS=$rc
done
exit "$STATUS"
