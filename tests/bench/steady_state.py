#!/usr/bin/env python3
"""tests/bench/steady_state.py — issue 41's steady state, held on the
committed traces: replayed 3 times back to back in one allocator
(`ccbench replay --iterations 3`), ccalloc's expandable segments
(ccalloc-expandable, and ccalloc-default: the allocator's default
configuration, which uses them) make no upstream call after the first
iteration and keep the first iteration's peak, on every trace that repeats
its work (every committed trace but those that release memory themselves:
ccrun-resident, torch-multi-model). The check is shown able to fail:
classic growth (ccalloc-growth), replayed alone on torch-resnet50-infer,
must be seen adding segments after the first iteration there
(bench/results/2026-11-29-iterations).

Usage: steady_state.py CCBENCH REPO OUTDIR. Exit 1, one line per broken
rule. No driver pass (every latency 0: --upstream-latency 0 alone still
runs it, for the virtual-memory costs): calls and peaks are exact without
it."""
import csv
import glob
import os
import subprocess
import sys

ccbench, repo, out = sys.argv[1:4]
RELEASING = ("ccrun-resident", "torch-multi-model")
traces = sorted(glob.glob(os.path.join(repo, "bench", "traces", "*.csv*")))
HELD = ("ccalloc-expandable", "ccalloc-default")
CONTRAST = ("ccalloc-growth", "torch-resnet50-infer")  # calls after the first iteration


def replay(strategies, paths, subdir):
    """The rows of iterations.csv of one ccbench run."""
    cmd = [ccbench, "replay", "--iterations", "3", "--reps", "1", "--upstream-latency", "0", "--vm-latency", "0",
           "--vm-call-latency", "0", "--no-plots",
           "--out", os.path.join(out, subdir)]
    for s in strategies:
        cmd += ["-s", s]
    done = subprocess.run(cmd + paths, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"steady_state: ccbench failed ({done.returncode}): {done.stderr[-2000:]}")
    return list(csv.DictReader(open(os.path.join(out, subdir, "iterations.csv"))))


rows = replay(HELD, traces, "held")
broken, seen = [], 0
for row in rows:
    if row["strategy"] not in HELD or row["trace"] in RELEASING:
        continue
    seen += 1
    later = int(row["later_upstream_allocs"]) + int(row["later_upstream_frees"])
    if row["status"] != "ok":
        broken.append(f"{row['trace']} {row['strategy']}: status {row['status']} {row['why']}")
    if later:
        broken.append(f"{row['trace']} {row['strategy']}: {later} upstream calls after the first iteration")
    if row["later_peak_reserved"] != row["first_peak_reserved"]:
        broken.append(
            f"{row['trace']} {row['strategy']}: peak {row['first_peak_reserved']} then {row['later_peak_reserved']}")
want = len(HELD) * (len(traces) - len(RELEASING))
if seen != want:
    broken.append(f"{seen} rows of repeating traces replayed, {want} wanted ({len(HELD)} strategies)")
contrast = [r for r in replay(CONTRAST[:1], [t for t in traces if CONTRAST[1] in os.path.basename(t)], "contrast")
            if r["status"] == "ok" and int(r["later_upstream_allocs"]) > 0]
if len(contrast) != 1:
    broken.append(f"{CONTRAST[0]} on {CONTRAST[1]}: no upstream call seen after the first iteration"
                  " (the check would pass whatever the allocator did)")
for line in broken:
    print(line)
print(f"steady_state: {len(broken)} broken" if broken
      else f"steady_state: {seen} trace x strategy rows, no call after the first iteration")
sys.exit(1 if broken else 0)
