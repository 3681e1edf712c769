#!/usr/bin/env bash
# Everything that needs a GPU, in time-limited steps, for a borrowed GPU
# machine (docs/gpu.md is the runbook). Written for the constrained case:
#   - each command may run for a limited time (minutes), and the machine
#     may be a fresh one for each command (an ignored build-gpu/ lost);
#   - the machine gets the working tree and a few ignored paths (.gpudeps),
#     possibly without .git, and has no network;
#   - only a few files come back, and the end of the output.
# Hence: a time budget for the whole run (default 540 s) and a limit per
# step; --tar packs OUTDIR into ONE file; a compact summary is printed last.
# Build dependencies the machine lacks (Criterion, cJSON, zlib headers,
# pkg-config) come from .gpudeps/, made by scripts/gpu_carry.sh.
#
#   scripts/gpu_session.sh [--steps "STEP[:SECONDS] ..."] [--budget S] [--tar FILE] OUTDIR
#   (SECONDS and S: whole seconds, 0..999999999, decimal: 09 is 9)
#   scripts/gpu_session.sh --list          # steps and their default limits
#
# The planned commands (docs/gpu.md, "A short session"); run scripts/gpu_carry.sh
# on the build machine first and send .gpudeps. With 15 minutes of device time
# (start included): the first, then the second if 5 minutes or more are left:
#   1: bash scripts/gpu_session.sh --steps "build:90 gpu_tests:150 sleep:120 demo:60 cck_bench:75 torch_softmax:45" --tar OUT/gs1.tgz /tmp/gs1
#   2: bash scripts/gpu_session.sh --steps "build:60 torch_e2e:120 driver:45" --tar OUT/gs2.tgz /tmp/gs2
# With more time, three commands whose limits sum to <= 540 s, the default --budget:
#   1: bash scripts/gpu_session.sh --steps "build:120 gpu_tests:180 sanitizer:60 demo:90 cck_bench:45 torch_softmax:45" --tar OUT/gs1.tgz /tmp/gs1
#   2: bash scripts/gpu_session.sh --steps "build:60 ccbench:380 pytorch_record:40 pytorch_replay:40 ccbench_pytorch:20" --tar OUT/gs2.tgz /tmp/gs2
#   3: bash scripts/gpu_session.sh --steps "build:120 pages:150 torch_e2e:120 cpu_tests:120" --tar OUT/gs3.tgz /tmp/gs3
# Command 2 does not rely on command 1: "build" reuses a build-gpu/ left on a warm
# machine (same source path) and otherwise configures and builds from scratch,
# only the targets its steps need (ccrun, ccbench, cck_bench, and libccalloc
# for torch_e2e: no tests).
# --budget caps the whole run: a step's limit is cut to the time left, and a
# step is not started with < 10 s left. GS_BUILD_DIR=DIR builds elsewhere
# (a local trial without a GPU: build works, every GPU step fails or is flagged).
#
# Steps (each logged to OUTDIR/<step>.log; a failure never stops the rest):
#   build           configure (Release, sm_90 only, Ninja when present) + build;
#                   FAILS if configure did not print "ccalloc: CUDA ... found"
#   gpu_tests       ctest -L gpu, with CCA_REQUIRE_GPU=1; FAILS when a suite
#                   ran 0 tests or skipped any (Criterion "Tested: 0", [SKIP];
#                   pytest suites, test_python_*: "N passed, M skipped")
#   sanitizer       compute-sanitizer memcheck + leak check over test_cuda_upstream
#                   (VMM and expandable segments included); API errors not counted
#   cpu_tests       ctest -L cpu (on a GPU machine some take other paths)
#   demo            ccrun --demo --device cuda (fails rather than simulate)
#   cck_bench       softmax/dense kernels on the GPU (--no-cpu --sweep): per shape every
#                   softmax version, the dispatched one and the copy in one table; every
#                   block size of v2-v5; the dispatch-table rows the run implies
#                   (kernels/src/softmax_dispatch.c says how to apply them)
#   torch_softmax   torch.softmax on the same shapes (bench/kernels/torch_softmax.py)
#   ccbench         ccbench driver (cudaMalloc/cudaFree, VMM map/unmap by page, and one map of
#                   2 MiB .. 1 GiB as one physical allocation: cost by size), then
#                   ccbench --all --no-plots: GPU strategies included
#   driver          ccbench driver alone (the first half of ccbench, for a short session)
#   sleep           issue 42 on the GPU: ccbench sleep --device cuda (a domain's sleep and
#                   wake against a pinned cudaMemcpy of the same bytes, 64 MiB .. 4 GiB),
#                   ccbench switch --device cuda (sleep + wake beside unload + reload and a
#                   process per model), ccrun --sleep A B A B on cuda (two 512 MiB models
#                   that do not fit side by side under max_reserved:800M; the woken one's
#                   outputs against its first run)
#   pytorch_record  record two PyTorch scenarios on the GPU as ccbench traces
#                   (bench/scripts/record_torch.py --device cuda: multi-model, train-step)
#   pytorch_replay  replay recorded + standard traces through PyTorch's allocator
#   ccbench_pytorch replay the recorded traces through ccbench's strategies
#   pages           the page and backing of expandable segments over CUDA VMM: ccalloc-cuda
#                   and ccalloc-cuda-expandable on every committed trace and generator with
#                   --vm-granularity 2M and 32M, and 2M with --vm-backing whole-maps, one run
#                   each (expandable against the classic strategy of the same run; 8M pages,
#                   measured in bench/results/2026-11-24-h100/session3, are not run again);
#                   the 2M run also holds the peak (expandable:1,hold_peak:1)
#   torch_e2e       issue 41 end to end (bench/scripts/torch_e2e.py): a training step and
#                   a generation loop on ccalloc.torch.enable(), PyTorch's defaults and
#                   expandable_segments:True, each in a fresh process (6 processes, each
#                   importing torch: hence 120 s); peak reserved, step / token time, the
#                   targets (peak <= PyTorch's, median within 2 %); libccalloc from $BUILD
# A step that runs but does no GPU work ("skipped: no CUDA device", "GPU
# benchmarks skipped", GPU strategies skipped) exits 75 and is flagged.
# Exit status: 0 when every step succeeded (and --tar's file was written), else 1.
#
# Results to commit afterwards: unpack the tarball into
# bench/results/<date>-<gpu>/ (its README.md has machine, date, commit and
# every command with exit status and time), traces/*.csv into bench/traces/.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD
SELF="$ROOT/scripts/gpu_session.sh"
BUILD=${GS_BUILD_DIR:-build-gpu} # GS_BUILD_DIR: elsewhere, for a local trial

# name:default-limit, in the order they run
ALL_STEPS="build:120 gpu_tests:180 sanitizer:60 cpu_tests:60 demo:90 sleep:120 cck_bench:45 torch_softmax:45 driver:60 ccbench:400 pytorch_record:90 pytorch_replay:60 ccbench_pytorch:60 pages:150 torch_e2e:120"
needs_build() { case $1 in build | torch_softmax | pytorch_record | pytorch_replay) return 1 ;; *) return 0 ;; esac; }
uses_python() { case $1 in torch_softmax | pytorch_record | pytorch_replay | torch_e2e) return 0 ;; *) return 1 ;; esac; }
default_limit() { local s; for s in $ALL_STEPS; do [ "${s%%:*}" = "$1" ] && { echo "${s#*:}"; return 0; }; done; return 1; }

# ---- the steps (run as `gpu_session.sh --run-step NAME`, under timeout) -----
run() { # run CMD...: show it, run it, record exit status and wall time in README.md
    local t0=$EPOCHREALTIME rc
    printf '$ %s\n' "$*"
    "$@"
    rc=$?
    # shellcheck disable=SC2016 # literal backquotes: markdown code
    printf -- '- [%s] `%s` -> exit %d, %s s\n' "$GS_STEP" "$*" "$rc" \
        "$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b-a}')" >>"$GS_OUT/README.md"
    return $rc
}
skipped_check() { # skipped_check LOGFILE PATTERN WHAT: exit 75 when the output says the GPU work was skipped
    if grep -Eq "$2" "$1"; then
        echo "FLAG: $3: $(grep -Em1 "$2" "$1")"
        return 75
    fi
}

step_build() {
    local fresh=1 targets=() opts=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90)
    [ -n "${GS_PKG_CONFIG:-}" ] && opts+=("-DPKG_CONFIG_EXECUTABLE=$GS_PKG_CONFIG")
    if [ -f "$BUILD/CMakeCache.txt" ]; then
        if grep -qxF "CMAKE_HOME_DIRECTORY:INTERNAL=$ROOT" "$BUILD/CMakeCache.txt"; then
            fresh=0
            echo "build: reusing $BUILD/ (warm machine, same source path)"
        else
            echo "build: $BUILD/ was configured for another source path: starting over"
            rm -rf "$BUILD"
        fi
    else
        echo "build: no $BUILD/: fresh configure (cold machine)"
    fi
    configure() { # the generator only for a fresh build directory
        local gen=()
        [ -f "$BUILD/CMakeCache.txt" ] || ! command -v ninja >/dev/null || gen=(-G Ninja)
        run cmake -S . -B "$BUILD" "${gen[@]}" "${opts[@]}" >"$GS_OUT/configure.txt" 2>&1
        local rc=$?
        cat "$GS_OUT/configure.txt"
        return $rc
    }
    if ! configure; then
        if ((fresh)); then
            echo "BUILD FAILED: cmake configure failed"
            [ -n "${GS_PKG_CONFIG:-}" ] || echo "  (no .gpudeps/ here: run scripts/gpu_carry.sh on the build machine and carry .gpudeps)"
            return 1
        fi
        echo "build: reconfiguring the old $BUILD/ failed: starting over"
        rm -rf "$BUILD"
        configure || { echo "BUILD FAILED: cmake configure failed"; return 1; }
    fi
    if ! grep -Eq 'ccalloc: CUDA .* found' "$GS_OUT/configure.txt"; then
        echo "BUILD FAILED: CUDA NOT ENABLED: configure did not print 'ccalloc: CUDA ... found';"
        echo "  every GPU step would only simulate or skip. Is nvcc at /usr/local/cuda/bin or on PATH?"
        return 1
    fi
    # Only what the listed steps need (the tests are most of the build).
    case " $GS_STEPS " in
    *" gpu_tests "* | *" cpu_tests "* | *" sanitizer "*) ;;
    *) targets=(--target ccrun ccbench cck_bench)
       [[ " $GS_STEPS " == *" torch_e2e "* ]] && targets+=(ccalloc) ;; # libccalloc.so, for ccalloc.torch
    esac
    run cmake --build "$BUILD" -j"$(nproc)" "${targets[@]}" || { echo "BUILD FAILED: compile/link errors above"; return 1; }
}

suite_table() { # suite_table CTEST_V_OUTPUT: per GPU suite, the ctest verdict, tests run and skipped;
    # exit 1 when any suite failed, ran 0 tests or skipped some. Keyed off the test name:
    # test_python_* are pytest suites (their summary line "N passed, M skipped in Ts"),
    # the others Criterion suites ("[====] Synthesis: Tested: N", one [SKIP] line per skip).
    # ctest -V prints a test's output (each line "N: ...") before its verdict line.
    awk '
        function testno(line,   a) { split(line, a, ":"); return a[1] }
        /^ *[0-9]+\/[0-9]+ Test +#[0-9]+: / {
            n = $3; sub(/#/, "", n); sub(/:$/, "", n); name[n] = $4
            verdict[n] = ($0 ~ /Passed/) ? "Passed" : "FAILED"; order[++k] = n }
        /^[0-9]+: \[====\] Synthesis: Tested:/ { n = testno($0); t = $0; sub(/.*Tested: */, "", t); tested[n] = t + 0; seen[n] = 1 }
        /^[0-9]+: \[SKIP\]/ { skip[testno($0)]++ }
        # pytest, -q or not: "3 passed, 1 skipped in 0.52s", "=== 1 failed, 2 passed in 3.1s (0:00:03) ===",
        # "no tests ran in 0.01s"; tested = passed + failed + errors + xfailed + xpassed
        /^[0-9]+: (=+ )?(no tests ran|[0-9]+ [a-z]+(, [0-9]+ [a-z]+)*) in [0-9.]+s/ {
            n = testno($0); line = $0; sub(/^[0-9]+: (=+ )?/, "", line); sub(/ in [0-9.]+s.*/, "", line)
            py_seen[n] = 1; py_tested[n] = 0; py_skip[n] = 0
            c = split(line, parts, ", ")
            for (i = 1; i <= c; i++) {
                split(parts[i], w, " ")
                if (w[2] ~ /^(passed|failed|errors?|xfailed|xpassed)$/) py_tested[n] += w[1]
                else if (w[2] == "skipped") py_skip[n] += w[1]
            } }
        END {
            bad = 0
            printf "\n%-22s %-7s %6s %7s  %s\n", "gpu suite", "ctest", "tested", "skipped", "verdict"
            for (i = 1; i <= k; i++) {
                n = order[i]; v = "ok"
                if (name[n] ~ /^test_python_/) { ran = py_seen[n]; t = py_tested[n]; s = py_skip[n]; what = "NO PYTEST SUMMARY (crashed?)" }
                else { ran = seen[n]; t = tested[n]; s = skip[n]; what = "NO CRITERION SYNTHESIS (crashed?)" }
                if (verdict[n] != "Passed") v = "FAILED"
                else if (!ran) v = what
                else if (t == 0) v = "NO TESTS RAN (all skipped: no usable GPU?)"
                else if (s > 0) v = "SOME TESTS SKIPPED"
                if (v != "ok") bad++
                printf "%-22s %-7s %6s %7d  %s\n", name[n], verdict[n], ran ? t : "?", s, v
            }
            if (k == 0) { print "NO GPU TEST SUITES RAN (ctest -L gpu found none?)"; bad++ }
            exit bad ? 1 : 0
        }' "$1"
}

step_gpu_tests() {
    local raw="$GS_OUT/gpu_tests.ctest.txt" rc
    export CCA_REQUIRE_GPU=1 CRITERION_VERBOSITY_LEVEL=1
    echo "env: CCA_REQUIRE_GPU=1 CRITERION_VERBOSITY_LEVEL=1"
    (cd "$BUILD" && run ctest -L gpu -V --timeout "$((GS_LIMIT > 40 ? GS_LIMIT - 10 : 30))") >"$raw" 2>&1
    rc=$?
    grep -Ev '^[0-9]+: \[(RUN |PASS)\]' "$raw" | tail -n 60
    suite_table "$raw"
    local parse=$?
    if ((rc == 0 && parse != 0)); then
        echo "GPU TESTS FLAGGED: ctest passed but suites ran no tests or skipped some"
        return 1
    fi
    ((rc == 0)) || echo "GPU TESTS FAILED (ctest exit $rc) $(grep -om1 'CCA_REQUIRE_GPU is set but: .*' "$raw")"
    return $rc
}

step_sanitizer() {
    # compute-sanitizer (memcheck + leak check) over the CUDA upstream suite:
    # classic segments, the VMM ops and expandable segments on the device.
    # API errors are not counted: the suite provokes some on purpose (a map
    # larger than the device, a refused unmap); memory errors and leaks are.
    local cs
    cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
    [ -x "$cs" ] || { echo "SANITIZER NOT FOUND: no compute-sanitizer on PATH or in /usr/local/cuda/bin"; return 1; }
    export CCA_REQUIRE_GPU=1 CRITERION_VERBOSITY_LEVEL=1
    echo "env: CCA_REQUIRE_GPU=1 CRITERION_VERBOSITY_LEVEL=1"
    run "$cs" --tool memcheck --leak-check full --report-api-errors no --error-exitcode 86 \
        "$BUILD/tests/test_cuda_upstream" --jobs=1 | tee "$GS_OUT/sanitizer.txt"
    local rc=${PIPESTATUS[0]}
    ((rc == 0)) || echo "SANITIZER FAILED (exit $rc: 86 = memcheck errors or leaks)"
    return "$rc"
}

step_cpu_tests() {
    (cd "$BUILD" && run ctest -L cpu -j"$(nproc)" --output-on-failure --timeout "$((GS_LIMIT > 40 ? GS_LIMIT - 10 : 30))")
}

step_demo() {
    run "$BUILD/runtime/ccrun" --demo --device cuda --timeline "$GS_OUT/demo_timeline.csv"
}

step_cck_bench() {
    run "$BUILD/bench/kernels/cck_bench" --no-cpu --sweep --csv "$GS_OUT/cck_bench_gpu.csv" | tee "$GS_OUT/cck_bench.md"
    local rc=${PIPESTATUS[0]}
    ((rc == 0)) || return "$rc"
    skipped_check "$GS_OUT/cck_bench.md" 'GPU benchmarks skipped' "cck_bench ran no GPU benchmark"
}

torch_info() {
    run python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")'
}

step_torch_softmax() {
    torch_info
    run python3 bench/kernels/torch_softmax.py --csv "$GS_OUT/torch_softmax.csv" | tee "$GS_OUT/torch_softmax.md"
    local rc=${PIPESTATUS[0]}
    ((rc == 0)) || return "$rc"
    skipped_check "$GS_OUT/torch_softmax.md" '^skipped:' "torch_softmax did nothing"
}

step_ccbench() {
    # the driver's real costs first: the figures the simulated device's latencies model
    step_driver || return $?
    run "$BUILD/bench/ccbench" --all --no-plots --out "$GS_OUT/ccbench"
    local rc=$?
    ((rc == 0)) || return "$rc"
    gpu_strategies_ran "$GS_OUT/ccbench"
}

step_driver() { # also the first half of step_ccbench: its skip flags that step
    run "$BUILD/bench/ccbench" driver --out "$GS_OUT/ccbench"
    local rc=$?
    ((rc == 0)) || return "$rc"
    skipped_check "$GS_OUT/$GS_STEP.log" '^skipped' "ccbench driver measured nothing"
}

step_sleep() {
    local rc=0 a=mlp:4096x8192x8192x4096:relu:softmax:seed=1 b=mlp:4096x8192x8192x4096:relu:softmax:seed=2
    run "$BUILD/bench/ccbench" sleep --device cuda --sizes 64M,256M,1G,4G --reps 3 --out "$GS_OUT/sleep" ||
        rc=1
    skipped_check "$GS_OUT/sleep.log" '^skipped' "ccbench sleep did not run on the GPU" || return 75
    run "$BUILD/bench/ccbench" switch --device cuda --rounds 3 --out "$GS_OUT/switch" || rc=1
    run "$BUILD/runtime/ccrun" --device cuda --conf max_reserved:800M --batch 64 --sleep "$a" "$b" "$a" "$b" || rc=1
    # the same sleep over registered host memory (huge pages + cudaHostRegister): which pins faster
    run "$BUILD/bench/ccbench" sleep --device cuda --host-memory registered --sizes 256M,1G --reps 3 \
        --out "$GS_OUT/sleep-registered" || rc=1
    return $rc
}

gpu_strategies_ran() { # DIR: exit 75 when ccbench's GPU strategies were all skipped
    local f
    f=$(find "$1" -name 'results.csv' | head -1)
    [ -n "$f" ] || { echo "FLAG: no results.csv under $1"; return 75; }
    awk -F, 'NR > 1 && $2 ~ /^(ccalloc-cuda|cuda-|cub)/ { n++; if ($4 == "ok") ok++ }
             END { printf "GPU strategy rows in %s: %d, ok: %d\n", FILENAME, n, ok; exit (ok > 0) ? 0 : 1 }' "$f" ||
        { echo "FLAG: no GPU strategy produced a result"; return 75; }
}

step_pytorch_record() {
    local rc=0
    torch_info
    mkdir -p "$GS_OUT/traces"
    run python3 bench/scripts/record_torch.py --device cuda --scenario multi-model -o "$GS_OUT/traces/torch-multi-model.csv" || rc=1
    run python3 bench/scripts/record_torch.py --device cuda --scenario train-step -o "$GS_OUT/traces/torch-train-step.csv" || rc=1
    ls -l "$GS_OUT/traces"
    ((rc == 0)) || return "$rc"
    skipped_check "$GS_OUT/pytorch_record.log" '^skipped:' "pytorch_record recorded nothing"
}

step_pytorch_replay() {
    local traces name left r rc=0
    shopt -s nullglob
    traces=("$GS_OUT"/traces/*.csv bench/traces/*.csv bench/traces/*.csv.gz)
    shopt -u nullglob
    # PyTorch's default allocator, as before: pytorch_replay.csv
    run python3 bench/scripts/pytorch_replay.py --csv "$GS_OUT/pytorch_replay.csv" "${traces[@]}"
    r=$?
    ((r == 0)) || return "$r"
    skipped_check "$GS_OUT/pytorch_replay.log" '^skipped:' "pytorch_replay replayed nothing" || return $?
    # then expandable_segments:True, and both configurations over 5 iterations (first vs
    # later; one timed pass, to stay short): pytorch_replay_<name>.csv, pytorch_iterations*.csv.
    # Each gets what the step's limit leaves less a 3 s margin, and starts only if that is
    # 5 s or more; one not run or cut says FLAG and fails the step.
    for name in expandable iterations expandable_iterations; do
        local args=(--csv "$GS_OUT/pytorch_replay_$name.csv")
        case $name in
        expandable) args+=(--expandable) ;;
        iterations) args+=(--iterations 5 --reps 1 --iterations-csv "$GS_OUT/pytorch_iterations.csv") ;;
        expandable_iterations) args+=(--expandable --iterations 5 --reps 1 --iterations-csv "$GS_OUT/pytorch_iterations_expandable.csv") ;;
        esac
        left=$((GS_LIMIT - SECONDS - 3))
        if ((left < 5)); then
            echo "FLAG: pytorch_replay $name not run: ${left}s left of the step's ${GS_LIMIT}s"
            rc=1
            continue
        fi
        run timeout -k 2 "$left" python3 bench/scripts/pytorch_replay.py "${args[@]}" "${traces[@]}"
        r=$?
        ((r == 124 || r == 137)) && echo "FLAG: pytorch_replay $name cut after ${left}s, what the step's ${GS_LIMIT}s left"
        ((r == 0)) || rc=1
    done
    return $rc
}

step_ccbench_pytorch() {
    local traces
    shopt -s nullglob
    traces=("$GS_OUT"/traces/*.csv)
    shopt -u nullglob
    if ((${#traces[@]} == 0)); then
        echo "FLAG: no recorded traces in $GS_OUT/traces (run pytorch_record first, same call)"
        return 75
    fi
    run "$BUILD/bench/ccbench" replay --no-plots --out "$GS_OUT/ccbench-pytorch" "${traces[@]}" || return $?
    gpu_strategies_ran "$GS_OUT/ccbench-pytorch"
}

step_pages() {
    local run dir g backing rc=0 traces
    shopt -s nullglob
    traces=(gen:uniform gen:lognormal gen:mlp gen:models gen:adversarial bench/traces/*.csv bench/traces/*.csv.gz)
    shopt -u nullglob
    # rG: pages of G over the pages backing (one physical allocation per page); w2M: 2 MiB
    # pages over whole maps, the default (each map one physical allocation, at most
    # 128 MiB). 8M pages are not run: session 3 measured them
    # (bench/results/2026-11-24-h100), and the whole-maps run takes their time.
    # r2M also holds the peak (hold_peak:1): what its synchronizes and extra calls cost on a GPU.
    for run in r2M:2M:pages r32M:32M:pages w2M:2M:whole-maps; do
        IFS=: read -r dir g backing <<<"$run"
        local hold=()
        [ "$dir" = r2M ] && hold=(-s 'ccalloc-cuda=expandable:1,hold_peak:1')
        run "$BUILD/bench/ccbench" replay -s ccalloc-cuda -s ccalloc-cuda-expandable "${hold[@]}" --vm-granularity "$g" \
            ${backing:+--vm-backing "$backing"} --reps 3 --no-plots --out "$GS_OUT/pages/$dir" "${traces[@]}" || rc=1
        rm -rf "$GS_OUT/pages/$dir/timeline" # a CSV per trace and strategy: not needed to compare
    done
    ((rc == 0)) || return "$rc"
    gpu_strategies_ran "$GS_OUT/pages/r2M"
}

step_torch_e2e() {
    # the checkout's package over the library this session built (not another build*/ of the tree)
    local lib=$BUILD/allocator/libccalloc.so rc
    [[ $lib == /* ]] || lib=$ROOT/$lib
    export CCALLOC_LIBRARY=$lib
    echo "env: CCALLOC_LIBRARY=$CCALLOC_LIBRARY"
    torch_info
    run python3 bench/scripts/torch_e2e.py --out "$GS_OUT/torch_e2e"
    rc=$?
    ((rc == 75)) && skipped_check "$GS_OUT/torch_e2e.log" '^skipped:' "torch_e2e measured nothing"
    return "$rc"
}

if [ "${1:-}" = --suite-table ]; then # internal: the gpu_tests table of a saved ctest -V log (tests/scripts/test_gpu_session.sh)
    suite_table "$2"
    exit $?
fi
if [ "${1:-}" = --run-step ]; then # internal: one step, environment from the parent
    export GS_STEP=$2
    : "${GS_LIMIT:=120}"
    if uses_python "$GS_STEP"; then
        export LD_LIBRARY_PATH=$GS_LDLP_ORIG
        [ -n "$GS_LDLP_ORIG" ] || unset LD_LIBRARY_PATH
    else
        export LD_LIBRARY_PATH=$GS_LDLP
    fi
    "step_$GS_STEP" >>"$GS_OUT/$GS_STEP.log" 2>&1
    exit $?
fi

# ---- options -----------------------------------------------------------------
usage() { grep '^#   scripts/gpu_session.sh' "$SELF" | sed 's/^# *//' >&2; exit 2; }
steps_arg="" budget=540 tarball="" out=""
while (($#)); do
    case $1 in
    --steps) steps_arg=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --tar) tarball=$2; shift 2 ;;
    --list) for s in $ALL_STEPS; do printf '%-16s %4s s\n' "${s%%:*}" "${s#*:}"; done; exit 0 ;;
    -h | --help) awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$SELF"; exit 0 ;;
    -*) echo "gpu_session: unknown option $1" >&2; usage ;;
    *) [ -z "$out" ] || usage; out=$1; shift ;;
    esac
done
[ -n "$out" ] || usage
# whole seconds, decimal whatever the leading zeros (bash's $((09)) is an
# octal error, $((010)) 8), at most 9 digits (bash's 64 bits never wrap)
seconds() { # seconds TEXT: TEXT's value on stdout, or status 1
    [[ $1 =~ ^[0-9]+$ ]] || return 1
    local d=${1#"${1%%[!0]*}"}
    ((${#d} <= 9)) || return 1
    echo "${d:-0}"
}
budget_text=$budget
budget=$(seconds "$budget") || {
    echo "gpu_session: --budget '$budget_text' is not whole seconds (0..999999999)" >&2
    exit 2
}
[ -n "$steps_arg" ] || steps_arg=$(for s in $ALL_STEPS; do printf '%s ' "${s%%:*}"; done)
names=() limits=()
for s in $steps_arg; do
    n=${s%%:*}
    lim=$(default_limit "$n") || { echo "gpu_session: unknown step '$n' (see --list)" >&2; exit 2; }
    if [[ $s == *:* ]]; then
        lim=$(seconds "${s#*:}") || {
            echo "gpu_session: limit '${s#*:}' of step '$n' is not whole seconds (0..999999999)" >&2
            exit 2
        }
    fi
    names+=("$n") limits+=("$lim")
done
# A step that needs binaries gets a build first, when none is listed.
if [[ " ${names[*]} " != *" build "* ]]; then
    for n in "${names[@]}"; do
        if needs_build "$n"; then
            names=(build "${names[@]}") limits=("$(default_limit build)" "${limits[@]}")
            echo "gpu_session: 'build' added (step $n needs the binaries)"
            break
        fi
    done
fi
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
T0=$EPOCHREALTIME

# ---- dependencies: carried (.gpudeps, from scripts/gpu_carry.sh) or system ---
GS_LDLP_ORIG=${LD_LIBRARY_PATH:-}
GS_LDLP=$GS_LDLP_ORIG
GS_PKG_CONFIG=""
deps="system"
G=$ROOT/.gpudeps
if [ -d "$G/root" ]; then
    # Link only the carried libraries (each under its SONAME) that the loader does not know:
    # the device's own (newer) libcrypto, libffi, libz ... are never shadowed.
    rm -rf "${G:?}/lib" && mkdir -p "$G/lib"
    known=$( (ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null) |
        awk '$2 ~ /^\(/ && $NF ~ /^\// {print $1, $NF}' | while read -r so path; do [ -e "$path" ] && echo "$so"; done)
    linked=()
    for f in "$G"/root/usr/lib/x86_64-linux-gnu/lib*.so.*; do
        n=${f##*/}
        if ! grep -qxF "$n" <<<"$known"; then
            ln -sfn "$f" "$G/lib/$n"
            linked+=("$n")
        fi
    done
    export PATH="$G/root/usr/bin:$PATH"
    export PKG_CONFIG_PATH="$G/root/usr/lib/x86_64-linux-gnu/pkgconfig:$G/root/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    export CMAKE_PREFIX_PATH="$G/root/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
    GS_LDLP="$G/lib${GS_LDLP_ORIG:+:$GS_LDLP_ORIG}"
    GS_PKG_CONFIG="$G/root/usr/bin/pkg-config"
    deps="carried .gpudeps (pkg-config $(LD_LIBRARY_PATH=$GS_LDLP "$GS_PKG_CONFIG" --modversion criterion libcjson 2>&1 | tr '\n' ' ')); sonames the system lacked, linked: ${linked[*]:-none}"
    # The build itself (pkg-config, the linker, the tests ctest runs) needs them too.
fi
export GS_OUT=$out GS_LDLP GS_LDLP_ORIG GS_PKG_CONFIG GS_STEPS="${names[*]}"
export PATH="$PATH:/usr/local/cuda/bin"

# ---- README.md header ----------------------------------------------------------
if git rev-parse --short HEAD >/dev/null 2>&1; then
    commit="$(git rev-parse --short HEAD) (git; $(git status --porcelain | wc -l) paths uncommitted)"
elif [ -f "$G/commit.txt" ]; then # the device copy has no .git: scripts/gpu_carry.sh wrote this
    commit="$(sed 's/^commit: //' "$G/commit.txt" | paste -sd';' -) (from .gpudeps/commit.txt)"
else
    commit="unknown (no .git, no .gpudeps/commit.txt)"
fi
gpu="none found (nvidia-smi)"
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    gpu="$(nvidia-smi -L | head -4 | tr '\n' ';') $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)"
    nvidia-smi >"$out/nvidia-smi.txt" 2>&1
fi
{
    echo "# GPU session results"
    echo
    echo "- date: $(date -u '+%F %T') UTC"
    echo "- machine: $(uname -srm), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
    echo "- GPU: $gpu"
    echo "- nvcc: $(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p' || echo none); cmake: $(LD_LIBRARY_PATH=$GS_LDLP cmake --version 2>/dev/null | head -1 | awk '{print $3}'); ninja: $(ninja --version 2>/dev/null || echo none); python3: $(python3 --version 2>&1 | awk '{print $2}')"
    echo "- commit: $commit"
    echo "- dependencies: $deps"
    echo "- steps: ${names[*]} (budget ${budget} s)"
    echo
    echo "## Commands (in order, each with exit status and wall time)"
    echo
} >"$out/README.md"
echo "gpu_session: GPU: $gpu"
plan="" sum=0
for i in "${!names[@]}"; do plan+="${names[$i]}:${limits[$i]} " sum=$((sum + limits[i])); done
echo "gpu_session: plan: ${plan}(limits sum ${sum} s, budget ${budget} s)"
echo "gpu_session: deps: $deps"

# ---- run the steps ---------------------------------------------------------------
declare -A RC SECS NOTE
build_ok=1
for i in "${!names[@]}"; do
    n=${names[$i]} lim=${limits[$i]}
    elapsed=$(awk -v a="$T0" -v b="$EPOCHREALTIME" 'BEGIN{printf "%d", b-a}')
    left=$((budget - elapsed - 5))
    if needs_build "$n" && ((!build_ok)); then
        RC[$n]="-" SECS[$n]=0 NOTE[$n]="not run: build failed"
        echo "- [$n] not run: build failed" >>"$out/README.md"
        continue
    fi
    if ((left < 10)); then
        RC[$n]="-" SECS[$n]=0 NOTE[$n]="not run: budget spent"
        echo "- [$n] not run: ${budget} s budget spent" >>"$out/README.md"
        continue
    fi
    ((lim > left)) && { NOTE[$n]="limit cut to ${left}s by budget; "; lim=$left; }
    printf '[%4ss] %-16s (limit %ss) ...\n' "$elapsed" "$n" "$lim"
    echo "== $n (limit ${lim}s) ==" >"$out/$n.log"
    t=$EPOCHREALTIME
    GS_LIMIT=$lim timeout -k 5 "$lim" bash "$SELF" --run-step "$n"
    rc=$?
    SECS[$n]=$(awk -v a="$t" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b-a}')
    RC[$n]=$rc
    case $rc in
    0) NOTE[$n]+="ok" ;;
    75) NOTE[$n]+="FLAGGED: ran, but no GPU work ($(grep -m1 '^FLAG' "$out/$n.log" | cut -c7-90))" ;;
    124 | 137) NOTE[$n]+="TIMED OUT after ${lim}s" ;;
    *) NOTE[$n]+="FAILED: $( (grep -Em1 '^(BUILD FAILED|GPU TESTS|FLAG)' "$out/$n.log" || grep -v '^ *$' "$out/$n.log" | tail -1) | cut -c1-90)" ;;
    esac
    [ "$n" = build ] && ((rc != 0)) && build_ok=0
    printf -- '- [%s] step exit %s, %s s: %s (log: %s.log)\n' "$n" "$rc" "${SECS[$n]}" "${NOTE[$n]}" "$n" >>"$out/README.md"
done

# ---- summary (README + last thing printed) ------------------------------------------
total=$(awk -v a="$T0" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.0f", b-a}')
failed=0
table=$(
    printf '| step | rc | seconds | result |\n|---|---|---|---|\n'
    for n in "${names[@]}"; do printf '| %s | %s | %s | %s |\n' "$n" "${RC[$n]}" "${SECS[$n]}" "${NOTE[$n]}"; done
)
for n in "${names[@]}"; do [ "${RC[$n]}" = 0 ] || failed=$((failed + 1)); done
{
    echo
    echo "## Summary ($total s, $failed of ${#names[@]} steps not ok)"
    echo
    echo "$table"
    echo
    echo "Commit: this folder -> bench/results/$(date -u +%F)-<gpu>/, traces/*.csv -> bench/traces/."
} >>"$out/README.md"

shown=0
for n in "${names[@]}"; do
    [ "${RC[$n]}" = 0 ] || [ "${RC[$n]}" = - ] && continue
    ((shown++ < 4)) || break
    echo
    echo "---- tail of $n.log ----"
    tail -n 12 "$out/$n.log" | cut -c1-200
done
# The tarball is what comes back: one that cannot be written whole (tar
# fails: a full disk, a directory that cannot be made) is said and fails
# the run, the summary still printed last; one inside OUTDIR is not packed
# into itself (nor one an earlier run left there).
tar_failed=0
if [ -n "$tarball" ]; then
    self=() size=""
    if mkdir -p "$(dirname "$tarball")" && tardir=$(cd "$(dirname "$tarball")" && pwd); then
        tarabs=$tardir/$(basename "$tarball")
        [[ $tarabs == "$out"/* ]] && self=(--exclude "./${tarabs#"$out"/}")
    fi
    tar czf "$tarball" ${self[@]+"${self[@]}"} -C "$out" . && size=$(stat -c %s "$tarball") || size=""
    if ((${size:-0} > ${GS_TAR_MAX:-16000000})); then # such machines often return only small files (GS_TAR_MAX, 16 MB by default): drop the biggest files
        echo "gpu_session: $tarball is $size bytes: leaving out files over 1 MB (listed in LEFT_OUT.txt)"
        find "$out" -type f -size +1M -printf '%P %s\n' >"$out/LEFT_OUT.txt"
        tar czf "$tarball" ${self[@]+"${self[@]}"} -C "$out" --exclude-from=<(find "$out" -type f -size +1M -printf '%P\n' | sed 's#^#./#') . &&
            size=$(stat -c %s "$tarball") || size=""
    fi
    if [ -n "$size" ]; then
        cp "$out/README.md" "${tarball%.t*gz}.README.md" 2>/dev/null
        tarnote="; results: $tarball ($size bytes) + ${tarball%.t*gz}.README.md"
    else
        tar_failed=1
        echo "gpu_session: cannot write $tarball: tar failed (its message above); the results are in $out only" >&2
        tarnote="; results NOT packed: $tarball could not be written"
    fi
fi
echo
echo "gpu_session summary: ${#names[@]} steps, $failed not ok, ${total}s of ${budget}s budget${tarnote:-}"
echo "GPU: $gpu"
printf '%-16s %4s %7s  %s\n' step rc seconds result
for n in "${names[@]}"; do printf '%-16s %4s %7s  %s\n' "$n" "${RC[$n]}" "${SECS[$n]}" "${NOTE[$n]:0:100}"; done
((failed == 0 && tar_failed == 0))
