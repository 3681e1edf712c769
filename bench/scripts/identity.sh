#!/usr/bin/env bash
# identity.sh — does a build behave exactly as another? (issue 40's checks)
#
#   bench/scripts/identity.sh run BUILD OUT     record BUILD's behaviour into OUT
#   bench/scripts/identity.sh compare OUT1 OUT2 byte-compare two records (exit 1: they differ)
#   bench/scripts/identity.sh micro A B OUT [N]  `ccbench micro` of build A then build B, N rounds
#                                               interleaved (default 5): OUT/micro.md, the median
#                                               of each build's round medians per cell
#
# What a record holds (timings stripped; everything else byte for byte):
#   replay/<preset>.csv   every ccalloc preset of `ccbench replay --reps 1 --driver-reps 1`
#                         on every committed trace (bench/traces) and every generator:
#                         peaks, ratios, upstream calls, OOMs, reserved after, device free
#   replay/<preset>.checkpoints.csv   the checkpoint table (what each trim/empty-cache released)
#   demo.txt              `ccrun --demo`'s tables, the time column removed
#   pair.txt              callgrind instructions per cached pair (ccb_pair_loop 1000 1: classic, expandable,
#                         hold): compared within 2%, not byte for byte
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)

presets=(ccalloc-growth ccalloc-greedy ccalloc-nosmall ccalloc-maxsplit ccalloc-onelarge ccalloc-shared
         ccalloc-expandable ccalloc-expandable-greedy ccalloc-hold ccalloc-expandable-hold)
gens=(gen:uniform gen:lognormal gen:mlp gen:models gen:adversarial)

# results.csv without its timing columns (median_ns p99_ns total_ms timer_ns
# driver_median_ns driver_total_ms: columns 9-12, 14, 15)
strip_times() { python3 -c '
import csv, sys
r = csv.reader(sys.stdin); w = csv.writer(sys.stdout, lineterminator="\n")
for row in r: w.writerow(row[:8] + row[12:13] + row[15:])'; }

pairs() { # instructions per pair for CONFIG: two runs, the difference
    local build=$1 conf=$2 n1=0 n2=50000 i1 i2
    i1=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$build/bench/ccb_pair_loop" 1000 1 $n1 "$conf" 2>&1 |
         sed -n 's/.*Collected : *\([0-9]*\).*/\1/p')
    i2=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$build/bench/ccb_pair_loop" 1000 1 $n2 "$conf" 2>&1 |
         sed -n 's/.*Collected : *\([0-9]*\).*/\1/p')
    echo "${conf:-default} $(( (i2 - i1) / (n2 - n1) ))"
}

case "${1:-}" in
run)
    build=$(cd "$2" && pwd); out=$3
    mkdir -p "$out/replay"
    traces=("$here"/bench/traces/*.csv "$here"/bench/traces/*.csv.gz)
    for p in "${presets[@]}"; do
        tmp=$(mktemp -d)
        "$build/bench/ccbench" replay -s "$p" --reps 1 --driver-reps 1 --no-plots --out "$tmp" 2>/dev/null \
            "${traces[@]}" "${gens[@]}" >/dev/null
        strip_times <"$tmp/results.csv" >"$out/replay/$p.csv"
        cp "$tmp/checkpoints.csv" "$out/replay/$p.checkpoints.csv"
        rm -rf "$tmp"
        echo "identity: $p done"
    done
    "$build/runtime/ccrun" --demo 2>&1 | sed -E 's/ +[0-9]+\.[0-9] ms / TIME /; s/took [0-9.]+ s/took TIME/' >"$out/demo.txt"
    if command -v valgrind >/dev/null; then
        { pairs "$build" "" ; pairs "$build" "expandable:1"; pairs "$build" "expandable:1,hold_peak:1"; } >"$out/pair.txt"
    fi
    ;;
compare)
    a=$2; b=$3; bad=0
    for f in $(cd "$a" && find replay -type f | sort) demo.txt; do
        if ! cmp -s "$a/$f" "$b/$f"; then echo "DIFFERS: $f"; diff "$a/$f" "$b/$f" | head -20; bad=1; fi
    done
    if [ -f "$a/pair.txt" ] && [ -f "$b/pair.txt" ]; then
        paste -d' ' "$a/pair.txt" "$b/pair.txt" | while read -r c1 n1 c2 n2; do
            pct=$(python3 -c "print(f'{($n2 - $n1) * 100 / $n1:+.1f}')")
            echo "cached pair ${c1:-default}: $n1 -> $n2 instructions ($pct%)"
        done
    fi
    [ $bad = 0 ] && echo "identity: replay tables, checkpoints and demo byte-identical"
    exit $bad
    ;;
micro)
    a=$(cd "$2" && pwd); b=$(cd "$3" && pwd); out=$4; rounds=${5:-5}
    mkdir -p "$out"
    for r in $(seq 1 "$rounds"); do
        for side in a b; do
            build=$a; [ $side = b ] && build=$b
            "$build/bench/ccbench" micro -s ccalloc-growth -s ccalloc-expandable --live 10,1000,10000,100000 \
                --no-plots --out "$out/$side$r" >/dev/null 2>&1
        done
    done
    python3 - "$out" "$rounds" <<'PY'
import csv, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
cells = {}
for side in "ab":
    for r in range(1, rounds + 1):
        for row in csv.DictReader(open(f"{out}/{side}{r}/micro.csv")):
            key = (row["strategy"], int(row["live"]), row["layout"])
            cells.setdefault(key, {"a": [], "b": []})[side].append(float(row["median_ns"]))
with open(f"{out}/micro.md", "w") as f:
    f.write(f"| strategy | live | layout | A median ns | B median ns | B/A |\n|---|--:|---|--:|--:|--:|\n")
    for key in sorted(cells):
        ma, mb = statistics.median(cells[key]["a"]), statistics.median(cells[key]["b"])
        f.write(f"| {key[0]} | {key[1]} | {key[2]} | {ma:.1f} | {mb:.1f} | {mb / ma:.3f} |\n")
print(open(f"{out}/micro.md").read())
PY
    ;;
*) sed -n '2,20p' "$0"; exit 2 ;;
esac
