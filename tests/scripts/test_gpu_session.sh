#!/usr/bin/env bash
# test_gpu_session.sh — scripts/gpu_session.sh's gpu_tests table (suite_table)
# over made-up `ctest -L gpu -V` logs, no GPU needed: a Criterion suite and a
# pytest suite (test_python_*), each passing, failing, skipping and crashing.
# The table must say "ok" for a suite that ran tests and skipped none, and
# flag everything else, whichever runner wrote the log; a pytest suite is
# read from its summary line ("2 passed, 1 skipped in 0.5s"), never from a
# Criterion synthesis it cannot print. Then the pages and sleep steps'
# commands and the ccbench step's (it begins with the driver step), with a
# stand-in ccbench and ccrun, and the torch_e2e step's skip
# flag, with a stand-in torch. Then the planned --steps commands of
# docs/gpu.md and of the script's header: known steps, within the budget.
# Last, --tar FILE that cannot be written, or that lies inside OUTDIR.
set -u
script=$(cd "$(dirname "$0")/../.." && pwd)/scripts/gpu_session.sh
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0

# table LOG -> the table on stdout, its exit status in $rc
table() {
    out=$(bash "$script" --suite-table "$1")
    rc=$?
}
# expect CASE SUITE VERDICT WANT_RC: the row of SUITE ends in VERDICT
expect() {
    local row
    row=$(printf '%s\n' "$out" | awk -v s="$2" '$1 == s')
    if [[ $row != *"$3" ]] || [ "$rc" != "$4" ]; then
        echo "FAIL $1: $2 should be '$3' (exit $4); got exit $rc:"
        printf '%s\n' "$out"
        fails=$((fails + 1))
    else
        echo "ok   $1: $row"
    fi
}

# ctest -V: a test's output lines ("N: ...") come before its verdict line.
criterion() { # criterion N NAME TESTED SKIPS VERDICT
    echo "$1: [----] Criterion v2.4.1"
    for ((i = 0; i < $4; i++)); do echo "$1: [SKIP] suite::t$i: no GPU: reason"; done
    [ "$3" = crash ] || echo "$1: [====] Synthesis: Tested: $3 | Passing: $3 | Failing: 0 | Crashing: 0 "
    echo "1/2 Test #$1: $2 ...............   $5    0.10 sec"
}
pytest() { # pytest N NAME SUMMARY VERDICT (SUMMARY "" = no summary line: crashed)
    echo "$1: Test command: /usr/bin/python3 \"-m\" \"pytest\" \"-q\""
    echo "$1: ...                                                       [100%]"
    [ -z "$3" ] || echo "$1: $3"
    echo "2/2 Test #$1: $2 ..................   $4    0.23 sec"
}

# check CASE  TESTED SKIPS CTEST WANT  SUMMARY CTEST WANT  RC: a log of the
# Criterion suite (TESTED run or "crash", SKIPS [SKIP] lines, its ctest
# verdict) and the pytest suite (its summary line, its ctest verdict); the
# table must give each its WANT and exit RC.
check() {
    local log="$dir/$((++logs)).txt"
    { criterion 14 test_cuda_upstream "$2" "$3" "$4"; pytest 52 test_python_gpu "$6" "$7"; } >"$log"
    table "$log"
    expect "$1" test_cuda_upstream "$5" "$9"
    expect "$1" test_python_gpu "$8" "$9"
}
logs=0
none="NO TESTS RAN (all skipped: no usable GPU?)"
check "both pass" 7 0 Passed ok "3 passed in 4.21s" Passed ok 0
check "pytest fails" 7 0 Passed ok "========= 1 failed, 2 passed in 63.20s (0:01:03) =========" "***Failed" FAILED 1
check "criterion fails, pytest skips one" 7 0 "***Failed" FAILED "2 passed, 1 skipped in 0.52s" Passed \
    "SOME TESTS SKIPPED" 1
check "all skipped" 0 7 Passed "$none" "3 skipped in 0.01s" Passed "$none" 1
check "no summary" crash 0 Passed "NO CRITERION SYNTHESIS (crashed?)" "" Passed "NO PYTEST SUMMARY (crashed?)" 1
check "criterion skips one, pytest runs none" 6 1 Passed "SOME TESTS SKIPPED" "no tests ran in 0.01s" Passed "$none" 1

: >"$dir/g.txt"
table "$dir/g.txt"
if [[ $out != *"NO GPU TEST SUITES RAN"* ]] || [ "$rc" != 1 ]; then
    echo "FAIL empty log: got exit $rc: $out"
    fails=$((fails + 1))
fi

# The pages step's commands, with a stand-in ccbench that records its
# arguments: ccalloc-cuda and ccalloc-cuda-expandable at 2M and 32M pages,
# and at 2M pages over whole maps, one replay each, on the same traces; the
# 2M run also holds the peak.
mkdir -p "$dir/build/bench" "$dir/out"
cat >"$dir/build/bench/ccbench" <<'FAKE'
#!/usr/bin/env bash
printf '%s\n' "$*" >>"$GS_OUT/calls.txt"
while (($#)); do [ "$1" = --out ] && { mkdir -p "$2"; printf 'x,strategy,y,status\n,ccalloc-cuda,,ok\n' >"$2/results.csv"; }; shift; done
FAKE
chmod +x "$dir/build/bench/ccbench"
GS_BUILD_DIR="$dir/build" GS_OUT="$dir/out" GS_LDLP="" GS_LDLP_ORIG="" bash "$script" --run-step pages
rc=$?
common="-s ccalloc-cuda -s ccalloc-cuda-expandable"
want=$(for run in "-s ccalloc-cuda=expandable:1,hold_peak:1 --vm-granularity 2M --vm-backing pages --reps 3 --no-plots --out $dir/out/pages/r2M" \
    "--vm-granularity 32M --vm-backing pages --reps 3 --no-plots --out $dir/out/pages/r32M" \
    "--vm-granularity 2M --vm-backing whole-maps --reps 3 --no-plots --out $dir/out/pages/w2M"; do
    echo "replay $common $run gen:uniform"
done)
got=$(sed 's/ gen:lognormal.*//' "$dir/out/calls.txt" 2>/dev/null)
if [ "$rc" != 0 ] || [ "$got" != "$want" ]; then
    echo "FAIL pages step: exit $rc, calls:"
    printf '%s\n' "$got"
    echo "wanted:"
    printf '%s\n' "$want"
    cat "$dir/out/pages.log"
    fails=$((fails + 1))
else
    echo "ok   pages step: 2M, 32M and 2M whole maps"
fi
if [ "$(sed 's/.* gen:uniform/gen:uniform/' "$dir/out/calls.txt" | sort -u | wc -l)" != 1 ]; then
    echo "FAIL pages step: the runs do not replay the same traces"
    fails=$((fails + 1))
fi

# Steps that run ccbench (and ccrun), with stand-ins that record their
# arguments and write a results.csv with a GPU row into each --out folder.
# run_step STEP SKIP: runs STEP; a ccbench subcommand named SKIP says
# "skipped: no GPU" (none: "-"); sets rc and got (the calls).
run_step() {
    rm -rf "$dir/out" && mkdir -p "$dir/out" "$dir/build/runtime"
    cat >"$dir/build/bench/ccbench" <<FAKE
#!/usr/bin/env bash
printf 'ccbench %s\n' "\$*" >>"\$GS_OUT/calls.txt"
[ "\$1" = "$2" ] && echo "skipped: no GPU: none here"
while ((\$#)); do [ "\$1" = --out ] && { mkdir -p "\$2"; printf 'x,strategy,y,status\\n,cuda-malloc,,ok\\n' >"\$2/results.csv"; }; shift; done
exit 0
FAKE
    printf '#!/usr/bin/env bash\nprintf "ccrun %%s\\n" "$*" >>"$GS_OUT/calls.txt"\n' >"$dir/build/runtime/ccrun"
    chmod +x "$dir/build/bench/ccbench" "$dir/build/runtime/ccrun"
    GS_BUILD_DIR="$dir/build" GS_OUT="$dir/out" GS_STEP=$1 GS_LDLP="" GS_LDLP_ORIG="" \
        bash "$script" --run-step "$1"
    rc=$?
    got=$(cat "$dir/out/calls.txt" 2>/dev/null)
}
# expect_step STEP SKIP FLAG WHAT: with nothing skipped the calls are $want and
# the step passes; with SKIP skipped only the first call runs, the step exits
# 75 and its log has "FLAG: FLAG".
expect_step() {
    run_step "$1" -
    if [ "$rc" != 0 ] || [ "$got" != "$want" ]; then
        printf 'FAIL %s step: exit %s, calls:\n%s\nwanted:\n%s\n' "$1" "$rc" "$got" "$want"
        fails=$((fails + 1))
    else
        echo "ok   $1 step: $4"
    fi
    run_step "$1" "$2"
    if [ "$rc" != 75 ] || [ "$got" != "${want%%$'\n'*}" ] || ! grep -q "^FLAG: $3" "$dir/out/$1.log"; then
        printf 'FAIL %s step, %s skipped: exit %s (want 75), calls:\n%s\n' "$1" "$2" "$rc" "$got"
        fails=$((fails + 1))
    else
        echo "ok   $1 step: a skipped ccbench $2 flags the step and runs nothing more"
    fi
}

# The sleep step (issue 42 on a GPU): ccbench sleep, ccbench switch and
# ccrun --sleep, each on cuda, then ccbench sleep over registered host memory.
m=mlp:4096x8192x8192x4096:relu:softmax
want="ccbench sleep --device cuda --sizes 64M,256M,1G,4G --reps 3 --out $dir/out/sleep
ccbench switch --device cuda --rounds 3 --out $dir/out/switch
ccrun --device cuda --conf max_reserved:800M --batch 64 --sleep $m:seed=1 $m:seed=2 $m:seed=1 $m:seed=2
ccbench sleep --device cuda --host-memory registered --sizes 256M,1G --reps 3 --out $dir/out/sleep-registered"
expect_step sleep sleep "ccbench sleep did not run on the GPU" \
    "ccbench sleep, ccbench switch, ccrun --sleep on cuda, ccbench sleep over registered host memory"

# The ccbench step begins with the driver step, then the suite.
want="ccbench driver --out $dir/out/ccbench
ccbench --all --no-plots --out $dir/out/ccbench"
expect_step ccbench driver "ccbench driver measured nothing" "the driver, then the suite"

# The torch_e2e step on a machine whose torch has no CUDA device (a stand-in
# torch): the script's "skipped:" and exit 75 become the step's flag, and
# the library it names is the one in the session's build folder.
mkdir -p "$dir/standin/torch" "$dir/e2e"
printf 'class version:\n    cuda = "12.4"\n\n\nclass cuda:\n    is_available = staticmethod(lambda: False)\n' \
    >"$dir/standin/torch/__init__.py"
PYTHONPATH="$dir/standin" GS_BUILD_DIR="$dir/build" GS_OUT="$dir/e2e" GS_LDLP="" GS_LDLP_ORIG="" \
    bash "$script" --run-step torch_e2e
rc=$?
log=$dir/e2e/torch_e2e.log
if [ "$rc" != 75 ] || ! grep -qxF "FLAG: torch_e2e measured nothing: skipped: no CUDA device visible to PyTorch" "$log" ||
    ! grep -qxF "env: CCALLOC_LIBRARY=$dir/build/allocator/libccalloc.so" "$log" || [ -e "$dir/e2e/torch_e2e" ]; then
    echo "FAIL torch_e2e step without CUDA: exit $rc (wanted 75, flagged), log:"
    cat "$log"
    fails=$((fails + 1))
else
    echo "ok   torch_e2e step without CUDA: exit 75, flagged"
fi

# The planned commands (docs/gpu.md and the script's own header) name only
# steps of --list, and their limits (a step's default where none is given) sum to at most the
# command's --budget (the default, 540 s, when it gives none), as both say: a step misspelt
# there would be refused on the borrowed machine, a plan over the budget cut short there.
root=$(dirname "$(dirname "$script")")
known=" $(bash "$script" --list | awk '{printf "%s ", $1}')"
plans=$(grep -ho 'gpu_session.sh --steps "[^"]*"\( --budget [0-9]*\)\?' "$root/docs/gpu.md" "$script" |
    sed 's/.*--steps "\(.*\)"\( --budget \([0-9]*\)\)\?$/\3 \1/')
nplans=0
while IFS= read -r line; do
    [ -n "$line" ] || continue
    budget=540 plan=${line# } # sed left "BUDGET PLAN", or " PLAN" without --budget
    [[ $line == [0-9]* ]] && budget=${line%% *} plan=${line#* }
    nplans=$((nplans + 1)) sum=0 bad=""
    for st in $plan; do
        name=${st%%:*} lim=${st#*:}
        [[ $known == *" $name "* ]] || bad="$bad unknown step '$name';"
        [[ $st == *:* ]] || lim=$(bash "$script" --list | awk -v s="$name" '$1 == s {print $2}') # its default
        [[ $lim =~ ^[0-9]+$ ]] && sum=$((sum + lim)) || bad="$bad '$st' has no limit;"
    done
    ((sum <= budget)) || bad="$bad limits sum to $sum s > $budget;"
    if [ -n "$bad" ]; then
        echo "FAIL planned command --steps \"$plan\":$bad"
        fails=$((fails + 1))
    else
        echo "ok   planned command --steps \"$plan\": known steps, $sum s of $budget"
    fi
done <<<"$plans"
if ((nplans < 10)); then
    echo "FAIL only $nplans planned commands found in docs/gpu.md and the script's header (want 10): moved?"
    fails=$((fails + 1))
fi

# --tar FILE is what comes back from a borrowed machine: a tarball that
# cannot be written (a full device, a missing and unmakeable directory) is
# said naming it, the summary is still printed last, and the exit status
# is 1 (the script died on "size: unbound variable" before its summary);
# a tarball inside OUTDIR is not packed into itself (it held a cut copy of
# itself: a run's OUTDIR is reused, and a tarball left there by the last
# run was always packed, one being written sometimes). --budget 0: no step
# runs, only the summary and the tarball.
tarcase() { # tarcase DESC TARBALL WANT_RC WORDS
    rm -rf "$dir/gs" && mkdir "$dir/gs" && echo "the last run's" >"$dir/gs/gs.tgz"
    bash "$script" --steps "torch_softmax:5" --budget 0 --tar "$2" "$dir/gs" >"$dir/gs.out" 2>"$dir/gs.err"
    local rc=$?
    if [ "$rc" = "$3" ] && grep -q '^gpu_session summary: ' "$dir/gs.out" && grep -qF -- "$4" "$dir/gs.out" "$dir/gs.err" &&
        ! grep -q 'unbound variable' "$dir/gs.err"; then
        echo "ok   $1: exit $rc, the summary printed"
    else
        echo "FAIL $1: exit $rc (want $3), want the summary and '$4':"
        cat "$dir/gs.out" "$dir/gs.err"
        fails=$((fails + 1))
    fi
}
tarcase "--tar on a full device" /dev/full 1 "gpu_session: cannot write /dev/full: tar failed"
tarcase "--tar in a directory that cannot be made" /proc/nope/gs.tgz 1 "gpu_session: cannot write /proc/nope/gs.tgz"
tarcase "--tar inside OUTDIR" "$dir/gs/gs.tgz" 1 "results: $dir/gs/gs.tgz ("
if tar tzf "$dir/gs/gs.tgz" | grep -q 'gs[.]tgz'; then
    echo "FAIL --tar inside OUTDIR: the tarball holds itself"; fails=$((fails + 1))
else
    echo "ok   --tar inside OUTDIR: the tarball does not hold itself"
fi

# --budget and a step's limit are whole seconds, read as decimal: "09" was
# bash's octal (the script died, "value too great for base", without its
# summary), "010" 8 seconds, and 10^20 wrapped in bash's 64 bits (a step
# ran). Refused before anything runs (exit 2), quoting the value; leading
# zeros are decimal.
numcase() { # numcase DESC WANT_RC WORDS ARGS...
    local desc=$1 want=$2 words=$3
    shift 3
    rm -rf "$dir/gn"
    bash "$script" "$@" "$dir/gn" >"$dir/gn.out" 2>&1
    local rc=$?
    if [ "$rc" = "$want" ] && grep -qF -- "$words" "$dir/gn.out" && ! grep -q 'value too great\|unbound' "$dir/gn.out" &&
        { [ "$want" = 2 ] || grep -q '^gpu_session summary: ' "$dir/gn.out"; }; then
        echo "ok   $desc: exit $rc"
    else
        echo "FAIL $desc: exit $rc (want $want), want '$words':"
        cat "$dir/gn.out"
        fails=$((fails + 1))
    fi
}
for bad in "" "-1" "+5" " 5" "5 " "5x" "0x10" "1e3" "1.5" "1000000000" "99999999999999999999" "0000000000000000000001000000000"; do
    numcase "--budget '$bad'" 2 "gpu_session: --budget '$bad' is not whole seconds (0..999999999)" \
        --steps "torch_softmax:5" --budget "$bad"
    [[ $bad == *" "* ]] && continue # --steps splits at blanks: " 5" is another step
    numcase "limit '$bad'" 2 "gpu_session: limit '$bad' of step 'torch_softmax' is not whole seconds (0..999999999)" \
        --steps "torch_softmax:$bad" --budget 0
done
# leading zeros: decimal (a budget under 15 s runs no step: nothing is run
# here, and a step not run is not ok: exit 1, after the summary)
numcase "--budget 09, limit 08" 1 "gpu_session: plan: torch_softmax:8 (limits sum 8 s, budget 9 s)" \
    --steps "torch_softmax:08" --budget 09
numcase "--budget 000000000000000000014" 1 "(limits sum 5 s, budget 14 s)" --steps "torch_softmax:5" --budget 000000000000000000014

((fails == 0)) && echo "all suite_table checks passed"
exit $((fails > 0))
