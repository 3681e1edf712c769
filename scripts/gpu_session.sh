#!/usr/bin/env bash
# Everything that needs a GPU, in one command, for a session that is lent one.
#
#   scripts/gpu_session.sh OUTDIR          # e.g. "$OUT" on the device machine
#
# Builds (Release, sm_80 + sm_90), then runs, each step logged to OUTDIR and
# never stopping the rest when one fails:
#   1. nvidia-smi and the CUDA runtime's view of the device;
#   2. the GPU test suites (CTest label gpu): allocator (cudaMemGetInfo after
#      empty-cache), kernels (every softmax version x block size, dense), engine
#      (release checked against the driver's free memory);
#   3. ccrun --demo on the GPU (sized to the device it finds);
#   4. cck_bench (softmax per version vs D2D copy, dense epilogue overhead)
#      and torch_softmax.py on the same shapes, when PyTorch is present;
#   5. ccbench --all (GPU strategies: ccalloc-cuda, cudaMalloc, cudaMallocAsync
#      t0/tmax, CUB; model switching through ccrun on the GPU);
#   6. PyTorch traces: record two workloads, replay them and the standard
#      traces through PyTorch's caching allocator (when PyTorch is present).
# Without a GPU it says so and exits 0 after step 1, so it is safe anywhere.
#
# Results to commit afterwards: copy OUTDIR into bench/results/<date>-<gpu>/
# (its README.md has the machine, date and commands) and the recorded traces
# into bench/traces/. Device time is scarce: steps are ordered by value, and
# each has a time limit.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/gpu_session.sh OUTDIR}
mkdir -p "$out"
log() { printf '%s\n' "$*" | tee -a "$out/README.md"; }
step() { # step NAME SECONDS COMMAND...: run, log, keep going
    local name=$1 limit=$2
    shift 2
    log "- \`$*\` -> $name.log"
    timeout "$limit" "$@" >"$out/$name.log" 2>&1
    local rc=$?
    log "  exit status $rc"
}

: >"$out/README.md"
log "# GPU session results"
log ""
log "- date: $(date -u '+%F %T') UTC"
log "- machine: $(uname -srm), $(nproc) cores"
log "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
    log "- GPU: none found (nvidia-smi); nothing to run"
    exit 0
fi
log "- GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)"
log ""
log "## Steps"

jobs=$(nproc)
step build 900 bash -c "cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build build-gpu -j$jobs"
step gpu_tests 600 bash -c "cd build-gpu && ctest -L gpu --output-on-failure -V"
step cpu_tests 600 bash -c "cd build-gpu && ctest -L cpu --output-on-failure"
step demo 600 build-gpu/runtime/ccrun --demo --timeline "$out/demo_timeline.csv"
step cck_bench 600 build-gpu/bench/kernels/cck_bench --no-cpu --csv "$out/cck_bench_gpu.csv"
step torch_softmax 300 python3 bench/kernels/torch_softmax.py --csv "$out/torch_softmax.csv"
step ccbench 900 build-gpu/bench/ccbench --all --out "$out/ccbench"
mkdir -p "$out/traces"
step pytorch_record_infer 300 python3 bench/scripts/pytorch_record.py --workload mlp-infer -o "$out/traces/pytorch-mlp-infer.csv"
step pytorch_record_train 300 python3 bench/scripts/pytorch_record.py --workload transformer-train -o "$out/traces/pytorch-tf-train.csv"
traces=$(ls "$out"/traces/*.csv 2>/dev/null)
step pytorch_replay 600 bash -c "python3 bench/scripts/pytorch_replay.py --csv '$out/pytorch_replay.csv' $traces bench/traces/*.csv"
if [ -n "$traces" ]; then
    step ccbench_pytorch_traces 600 build-gpu/bench/ccbench replay --out "$out/ccbench-pytorch" $traces
fi
log ""
log "Done. Commit: $out -> bench/results/$(date -u +%F)-<gpu>/, $out/traces/*.csv -> bench/traces/."
