#!/bin/sh
# ccbench_switch_figures.sh — every figure `ccbench switch` derives from
# ccrun's JSON, checked exactly:
#
#   ccbench_switch_figures.sh CCBENCH FAKE_CCRUN WORKDIR
#
# The stand-in ccrun (tests/fixtures/fake_ccrun.sh, FAKE_CCRUN=figures)
# gives each phase its own time per model; `switch --rounds 2 a b` runs
# a b a b. In one process a switch is unload + release of the model that
# ends (a: 0.250 + 0.500, b: 0.125 + 0.500), and b's release leaves 8 KiB
# under the baseline; with sleep and wake it is the sleep (0.600) plus the
# next model's wake (0.600), or the sleep alone at its first load. The
# process-per-model times are wall clock: only their memory is checked.
set -u
ccbench=$1 fake=$2 work=$3
rm -rf "$work" && mkdir -p "$work" || exit 1
FAKE_CCRUN=figures "$ccbench" switch --ccrun "$fake" --rounds 2 --out "$work" a b >"$work/out" 2>&1 ||
    { echo "FAIL: ccbench switch failed"; cat "$work/out"; exit 1; }
fail=0
# has FILE -F|-E LINE: FILE holds LINE as a whole line
has() {
    if grep -qx "$2" -- "$3" "$1"; then
        echo "ok: $3"
    else
        echo "FAIL: $1 has no line '$3'"
        fail=1
    fi
}
md=$work/switch.md csv=$work/switch.csv
# the first line names the ccrun options as a command line a reader can type
has "$md" -F 'Model switching on fake (SIMULATED device: no CUDA context to create, figures are not GPU figures), 2 models x 2 rounds, ccrun --device auto --iters 1 --batch 8 --capacity 2G'
has "$md" -F '| in-process (unload + release) | 3 | 0.750 | 0.625 | 0.750 | 2 of 3 | 8.00 KiB |'
has "$md" -E '\| process per model \(start-up \+ unload \+ exit\) \| 3 \| [-0-9.]+ \| [-0-9.]+ \| [-0-9.]+ \| 3 of 3 \| 0 B \|'
has "$md" -F '| sleep + wake in one process (sleep of the ending model + wake of the next) | 2 | 1.200 | 1.200 | 1.200 | 2 of 2 | 0 B |'
has "$md" -F '| sleep + first load (the sleep alone; the load excluded, as above) | 1 | 0.600 | 0.600 | 0.600 | 1 of 1 | 0 B |'
has "$md" -E '.* Sleep \+ wake: 1\.6x slower than unload \+ release \(median\)\. \(a\) and \(b\) also load the next model at every switch \(median load 2\.000 ms in \(a\), excluded above\);.*'
for line in in-process,a,b,0.750,1048576,1048576,1 in-process,b,a,0.625,1040384,1048576,1 \
    sleep-load,a,b,0.600,1048576,1048576,1 sleep-wake,b,a,1.200,1048576,1048576,1 \
    sleep-wake,a,b,1.200,1048576,1048576,1; do
    has "$csv" -F "$line"
done
has "$csv" -E 'process,b,a,-?[0-9.]+,1048576,1048576,1'
n=$(grep -c '^in-process,a,b,0\.750,1048576,1048576,1$' "$csv")
[ "$n" = 2 ] || { echo "FAIL: $n in-process switches a to b, want 2"; fail=1; }
n=$(grep -c '^process,a,b,-\{0,1\}[0-9.]*,1048576,1048576,1$' "$csv")
[ "$n" = 2 ] || { echo "FAIL: $n process switches a to b, want 2"; fail=1; }
[ "$(wc -l <"$csv")" = 10 ] || { echo "FAIL: switch.csv has $(wc -l <"$csv") lines, want a header and 9 switches"; fail=1; }
exit "$fail"
