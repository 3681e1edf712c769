#!/bin/bash
# interleave.sh BINARY L — R rounds (default 10) of pair_loop BINARY (built as in
# ../2026-11-23-host-micro-ghost/pair_loop.c) with L holes and P pairs (default
# 2,000,000), classic then expandable segments in each round; prints the minimum and
# median of each and the median of the per-round differences (expandable - classic),
# then the differences themselves. Run with the machine otherwise idle.
set -euo pipefail
B=$1; L=$2; R=${R:-10}; P=${P:-2000000}
for r in $(seq "$R"); do
  c=$("$B" "$L" 1 "$P" "" | awk '{print $1}'); e=$("$B" "$L" 1 "$P" "expandable:1" | awk '{print $1}')
  echo "$c $e"
done | python3 -c "
import sys, statistics as st
rows = [tuple(map(float, l.split())) for l in sys.stdin if l.strip()]
c = [r[0] for r in rows]; e = [r[1] for r in rows]; d = [r[1] - r[0] for r in rows]
print('L=$L classic min %.1f median %.1f | expandable min %.1f median %.1f | paired diff median %+.1f (%s)' %
      (min(c), st.median(c), min(e), st.median(e), st.median(d), ' '.join('%+.1f' % x for x in d)))"
