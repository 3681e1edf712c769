#!/bin/sh
# ccbench_vm_backing.sh — --vm-backing reaches the simulated device:
#
#   ccbench_vm_backing.sh CCBENCH WORKDIR
#
# A replay of one 4 KiB block by ccalloc-expandable with --vm-backing
# whole-maps runs, and its README says whole maps and what a simulated
# device made with those options reports (cca_upstream_vm_backing); without
# the flag, or with --vm-backing pages, the README has no such line. A
# device that reports pages though whole maps were asked fails.
set -u
ccbench=$1 work=$2
rm -rf "$work" && mkdir -p "$work" || exit 1
printf 'seq,op,id,size,stream\n0,alloc,1,4096,0\n1,free,1,4096,0\n' >"$work/one.csv"
fail=0
for flag in whole-maps pages ''; do
    out="$work/out${flag:-default}"
    "$ccbench" replay -s ccalloc-expandable --reps 1 --driver-reps 1 --no-plots ${flag:+--vm-backing "$flag"} \
        --out "$out" "$work/one.csv" >/dev/null 2>"$work/err" || { echo "FAIL: replay with '$flag' failed"; cat "$work/err"; fail=1; continue; }
    named=$(grep -c '^Backing of virtual-memory maps (`--vm-backing`): whole maps' "$out/README.md")
    if [ "$flag" = whole-maps ]; then
        if [ "$named" != 1 ]; then
            echo "FAIL: --vm-backing whole-maps: the README names whole maps $named times"
            fail=1
        elif grep -q 'the simulated device reports whole maps\.$' "$out/README.md"; then
            echo "ok: --vm-backing whole-maps: the simulated device reports whole maps"
        else
            echo "FAIL: --vm-backing whole-maps: the README does not say what the device reports"
            fail=1
        fi
    elif [ "$named" != 0 ]; then
        echo "FAIL: --vm-backing '$flag': the README names whole maps"
        fail=1
    else
        echo "ok: --vm-backing '$flag': pages, nothing said"
    fi
done
exit "$fail"
