#!/bin/sh
# scale.sh — each public call's instructions as the allocator holds more of
# one thing: ccb_scale (scale.c) under callgrind, one run per dimension, N
# and segment kind; each probe's inclusive count over its calls.
#
#   bench/scripts/scale.sh BUILD OUT [N...]
#
# - N: the sizes to run (default 100 1000 10000); threads runs N / 10 of
#   them (valgrind runs at most --max-threads, here 1100).
# - DIMS (environment): the dimensions to run, default all of them;
#   KINDS: classic and/or expandable, default both.
# - OUT/scale.csv: kind,dim,n,probe,calls,instructions_per_call;
#   OUT/growth.md: per kind and probe, the growth from the first N to each
#   later one (instructions at that N over those at the first), one column
#   per dimension. Needs valgrind and callgrind_annotate.
set -eu
[ $# -ge 2 ] || { echo "usage: scale.sh BUILD OUT [N...]" >&2; exit 2; }
build=$1 out=$2
shift 2
sizes=${*:-100 1000 10000}
bin=$build/bench/ccb_scale
[ -x "$bin" ] || { echo "scale.sh: no $bin" >&2; exit 2; }
mkdir -p "$out"
csv=$out/scale.csv
echo "kind,dim,n,probe,calls,instructions_per_call" > "$csv"
cg=$(mktemp)
trap 'rm -f "$cg"' EXIT
for kind in ${KINDS:-classic expandable}; do
  conf=; [ $kind = classic ] && conf=expandable:0
  for dim in ${DIMS:-live free sizes segments pages runs domains empty asleep sleeper history marks threads}; do
    case $kind.$dim in classic.pages | classic.runs | classic.asleep | classic.sleeper) continue ;; esac
    for n in $sizes; do
      m=$n; [ $dim = threads ] && m=$((n / 10))
      valgrind --tool=callgrind --max-threads=1100 --callgrind-out-file="$cg" "$bin" $dim "$m" $conf >/dev/null 2>"$cg.err" ||
        { cat "$cg.err" >&2; exit 1; }
      callgrind_annotate --inclusive=yes "$cg" 2>/dev/null |
        awk -v k=$kind -v d=$dim -v n="$n" '
          /=> .*:scale_m_[a-z_]+ \([0-9]+x\)/ {
            ir = $1; gsub(",", "", ir)
            name = $0; sub(/.*:scale_m_/, "", name); sub(/ .*/, "", name)
            calls = $0; sub(/.*\(/, "", calls); sub(/x\).*/, "", calls)
            printf "%s,%s,%s,%s,%s,%.0f\n", k, d, n, name, calls, ir / calls
          }' >> "$csv"
    done
  done
done
rm -f "$cg.err"

# growth: instructions at each later N over those at the first N
awk -F, -v sizes="$sizes" '
  NR == 1 { next }
  { v[$1 "," $2 "," $3 "," $4] = $6; kinds[$1] = 1; dims[$2] = 1; probes[$4] = 1
    if (!($2 in order)) { order[$2] = ++nd; dimname[nd] = $2 }
    if (!($4 in porder)) { porder[$4] = ++np; probename[np] = $4 } }
  END {
    ns = split(sizes, n, " ")
    for (k in kinds) {
      printf "\n### %s: instructions per call at N = %s, and growth to each later N\n\n", k, n[1]
      printf "| call |"; for (i = 1; i <= nd; i++) printf " %s |", dimname[i]; printf "\n"
      printf "|---|"; for (i = 1; i <= nd; i++) printf "--:|"; printf "\n"
      for (p = 1; p <= np; p++) {
        printf "| %s |", probename[p]
        for (i = 1; i <= nd; i++) {
          base = v[k "," dimname[i] "," n[1] "," probename[p]]
          if (base == "") { printf " |"; continue }
          cell = base
          for (j = 2; j <= ns; j++) {
            x = v[k "," dimname[i] "," n[j] "," probename[p]]
            if (x != "") cell = cell sprintf(" x%.1f", x / base)
          }
          printf " %s |", cell
        }
        printf "\n"
      }
    }
  }' "$csv" > "$out/growth.md"
cat "$out/growth.md"
