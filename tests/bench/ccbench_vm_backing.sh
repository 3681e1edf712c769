#!/bin/sh
# ccbench_vm_backing.sh — --vm-backing reaches the simulated device:
#
#   ccbench_vm_backing.sh CCBENCH WORKDIR
#
# A replay of one 4 KiB block by ccalloc-expandable runs with --vm-backing
# whole-maps, with --vm-backing pages and without the flag (whole maps, the
# default), and its README names the backing once, as asked (whole maps
# without the flag), and says that a simulated device made with those
# options reports the same (cca_upstream_vm_backing). A device that reports
# another backing than the one asked for fails, as does a README that names
# both or neither.
set -u
ccbench=$1 work=$2
rm -rf "$work" && mkdir -p "$work" || exit 1
printf 'seq,op,id,size,stream\n0,alloc,1,4096,0\n1,free,1,4096,0\n' >"$work/one.csv"
fail=0
line='^Backing of virtual-memory maps (`--vm-backing`): '
for flag in whole-maps pages ''; do
    out="$work/out${flag:-default}"
    "$ccbench" replay -s ccalloc-expandable --reps 1 --driver-reps 1 --no-plots ${flag:+--vm-backing "$flag"} \
        --out "$out" "$work/one.csv" >/dev/null 2>"$work/err" || { echo "FAIL: replay with '$flag' failed"; cat "$work/err"; fail=1; continue; }
    whole=$(grep -c "${line}whole maps (the default: one physical allocation per map" "$out/README.md")
    pages=$(grep -c "${line}pages (one physical allocation per page" "$out/README.md")
    if [ "$flag" = pages ]; then
        want_whole=0 want_pages=1 reports=pages
    else
        want_whole=1 want_pages=0 reports='whole maps'
    fi
    if [ "$whole" != "$want_whole" ] || [ "$pages" != "$want_pages" ]; then
        echo "FAIL: --vm-backing '$flag': the README names whole maps $whole times and pages $pages times"
        fail=1
    elif grep -q "${line}.*; the simulated device reports $reports\\.\$" "$out/README.md"; then
        echo "ok: --vm-backing '$flag': the README and the simulated device say $reports"
    else
        echo "FAIL: --vm-backing '$flag': the README does not say the simulated device reports $reports"
        grep "$line" "$out/README.md"
        fail=1
    fi
done
exit "$fail"
