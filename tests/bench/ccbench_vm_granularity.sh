#!/bin/sh
# ccbench_vm_granularity.sh — --vm-granularity reaches the simulated device:
#
#   ccbench_vm_granularity.sh CCBENCH WORKDIR
#
# A trace of one 4 KiB block, replayed by ccalloc-expandable, maps exactly
# one page of the small pool's range: its peak reserved is the page, 8 MiB
# with --vm-granularity 8M and 2 MiB (the device's default) without; the
# replay's README names the page only when it was given.
set -u
ccbench=$1 work=$2
rm -rf "$work" && mkdir -p "$work" || exit 1
printf 'seq,op,id,size,stream\n0,alloc,1,4096,0\n1,free,1,4096,0\n' >"$work/one.csv"
fail=0
for case in 8M:8388608 :2097152; do
    page=${case%%:*} want=${case#*:} out="$work/out${page:-default}"
    "$ccbench" replay -s ccalloc-expandable --reps 1 --driver-reps 1 --no-plots ${page:+--vm-granularity "$page"} \
        --out "$out" "$work/one.csv" >/dev/null 2>"$work/err" || { echo "FAIL: replay with '$page' failed"; cat "$work/err"; fail=1; continue; }
    got=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "peak_reserved") c = i; next } { print $c }' "$out/results.csv")
    if [ "$got" != "$want" ]; then
        echo "FAIL: --vm-granularity '$page': peak reserved $got, want one page, $want"
        fail=1
    fi
    named=$(grep -c 'vm-granularity.): 8.00 MiB' "$out/README.md")
    if [ "$page" ] && [ "$named" != 1 ] || [ -z "$page" ] && [ "$named" != 0 ]; then
        echo "FAIL: --vm-granularity '$page': the README names an 8 MiB page $named times"
        fail=1
    fi
    [ "$fail" = 0 ] && echo "ok: --vm-granularity '$page': one page of $want bytes"
done
exit "$fail"
