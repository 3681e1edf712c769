#!/bin/bash
# the page-size trade-off on the simulated device: every committed trace, growth vs expandable at each page
cd "$(git rev-parse --show-toplevel)"   # run from anywhere in the repository; OUT=DIR for the results
T="gen:uniform gen:lognormal gen:mlp gen:models gen:adversarial bench/traces/ccrun-mlp.csv bench/traces/ccrun-resident.csv $(ls bench/traces/torch-*.csv.gz | tr '\n' ' ')"
for g in 2M 4M 8M 16M 32M; do
  ${CCBENCH:-build/bench/ccbench} replay -s ccalloc-growth -s ccalloc-expandable --vm-granularity $g --vm-latency 31us,26us \
     --reps 1 --driver-reps 1 --no-plots --out ${OUT:-.}/g$g $T > ${OUT:-.}/g$g.log 2>&1
  echo "$g rc=$?" >&2
done
