#!/bin/sh
# ccbench_sleep.sh — `ccbench sleep` end to end on the simulated device
# (bench/sleep.c): a tiny run succeeds, says no mismatch, and writes
# README.md (device, command, what is timed), sleep.md (the table) and
# sleep.csv (the columns a plot reads, one row per size), the ratios of the
# two the same. A size the host cannot hold on the simulated device (its run
# needs 3 x SIZE of host memory at once) is refused before anything is
# allocated: exit 1 naming the size and both figures, not a process the
# kernel's OOM killer ends.
#
#   ccbench_sleep.sh CCBENCH OUTDIR
set -u
ccbench=$1 out=$2
rm -rf "$out"
fail() { echo "FAIL: $*"; exit 1; }
"$ccbench" sleep --sizes 8M,2M --reps 1 --out "$out" || fail "exit status $?"
for f in README.md sleep.md sleep.csv; do [ -s "$out/$f" ] || fail "no $out/$f"; done
grep -q 'SIMULATED device' "$out/sleep.md" || fail "sleep.md does not name the simulated device"
grep -Eq '^\| 8\.00 MiB \| [0-9]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| n/a \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| n/a \|$' \
    "$out/sleep.md" || fail "sleep.md has no row for 8 MiB"
for w in '^- device: ' '^- command: `.*ccbench sleep --sizes 8M,2M --reps 1' '^## What is timed' 'first-touch' 'copy in to fresh pages' "sleep's chunks"; do
    grep -q -- "$w" "$out/README.md" || fail "README.md lacks '$w'"
done
head -1 "$out/sleep.csv" | grep -q '^device,simulated,domain_bytes,blocks,live_bytes,reps,sleep_ms_median,sleep_ms_min,sleep_ms_max,sleep_gibs,wake_ms_median,wake_ms_min,wake_ms_max,wake_gibs,copy_out_ms_median,copy_out_ms_min,copy_out_ms_max,copy_out_gibs,copy_in_ms_median,copy_in_ms_min,copy_in_ms_max,copy_in_gibs,copy_in_fresh_ms_median,copy_in_fresh_ms_min,copy_in_fresh_ms_max,copy_in_fresh_gibs,host_alloc_ms_median,host_alloc_ms_min,host_alloc_ms_max,host_alloc_gibs,host_register_ms_median,host_register_ms_min,host_register_ms_max,host_register_gibs,sleep_ratio,wake_ratio,target_met,wake_fresh_ratio,host_memory$' \
    || fail "sleep.csv's header: $(head -1 "$out/sleep.csv")"
[ "$(wc -l <"$out/sleep.csv")" -eq 3 ] || fail "sleep.csv: want a header and 2 rows"
grep -q '^host-simulated,1,8388608,[0-9]*,8388608,1,' "$out/sleep.csv" || fail "sleep.csv has no 8 MiB row"
grep -q '^host-simulated,1,8388608,.*,[0-9.]*,,,,,[0-9.]*,[0-9.]*,n/a,[0-9.]*,simulated$' "$out/sleep.csv" ||
    fail "sleep.csv: the simulated device's cudaHostRegister fields are not empty"
# sleep.md's ratios (sleep / copy out, wake / copy in, wake / fresh copy in)
# are sleep.csv's sleep_ratio, wake_ratio and wake_fresh_ratio, to 2 decimals
md=$(grep '^| 8\.00 MiB |' "$out/sleep.md" | awk -F'|' '{print $8, $9, $12}')
csv=$(grep '^host-simulated,1,8388608,' "$out/sleep.csv" | awk -F, '{print $(NF-4), $(NF-3), $(NF-1)}')
echo "$md $csv" | awk 'NF != 6 { exit 1 } { for (i = 1; i <= 3; i++) { d = $i - $(i + 3); if (d < -0.0055 || d > 0.0055) exit 1 } }' ||
    fail "sleep.md's ratios ($md) are not sleep.csv's ($csv)"
# 1T needs 3 TiB of host memory: refused, unless this host has that much.
# Run under an address-space limit where the binary allows one (not under
# a sanitizer, whose shadow memory needs more): a ccbench without the check
# then fails on that limit, not by the OOM killer.
phys=$(($(getconf _PHYS_PAGES) * $(getconf PAGESIZE)))
if [ "$phys" -lt $((3 << 40)) ]; then
    limit=
    (ulimit -v 8388608 && "$ccbench" sleep --help) >/dev/null 2>&1 && limit=8388608
    (if [ -n "$limit" ]; then ulimit -v "$limit"; fi; exec "$ccbench" sleep --sizes 64M,1T --reps 1) \
        >"$out/big.txt" 2>&1
    rc=$?
    [ "$rc" -eq 1 ] || fail "--sizes 64M,1T: exit status $rc, want 1: $(cat "$out/big.txt")"
    grep -q "ccbench sleep: --sizes 1.00 TiB needs 3.00 TiB of host memory on the simulated device, this host has " \
        "$out/big.txt" || fail "--sizes 64M,1T: $(cat "$out/big.txt")"
    ! grep -q '64.00 MiB |' "$out/big.txt" || fail "--sizes 64M,1T: 64M was run before the refusal"
fi
echo "ok"
