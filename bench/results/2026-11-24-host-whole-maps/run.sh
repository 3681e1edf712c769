#!/bin/bash
# whole maps against pages on the simulated device: every committed trace, the driver's per-allocation
# cost measured on an H100 (31 us per physical allocation mapped, 26 us unmapped, 35 us per call)
cd "$(git rev-parse --show-toplevel)"   # run from anywhere in the repository; OUT=DIR for the results
T="gen:uniform gen:lognormal gen:mlp gen:models gen:adversarial bench/traces/ccrun-mlp.csv bench/traces/ccrun-resident.csv $(ls bench/traces/torch-*.csv.gz | tr '\n' ' ')"
B=${CCBENCH:-build/bench/ccbench}
run() { # NAME ARGS...
  local name=$1; shift
  $B replay "$@" --vm-latency 31us,26us --reps 1 --driver-reps 5 --no-plots --out ${OUT:-.}/$name $T > ${OUT:-.}/$name.log 2>&1
  echo "$name rc=$?" >&2
}
run pages2M  -s ccalloc-growth -s ccalloc-expandable --vm-granularity 2M
run pages32M -s ccalloc-expandable --vm-granularity 32M
run whole2M  -s ccalloc-expandable -s ccalloc=expandable:1,expandable_chunk:32M -s ccalloc=expandable:1,expandable_chunk:0 \
             --vm-granularity 2M --vm-backing whole-maps
