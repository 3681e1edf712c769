#!/usr/bin/env python3
"""table.py: the page options' table of docs/tuning.md ("How far ahead to
map") from run/results.csv and run/iterations.csv: per trace and strategy,
peak reserved / the lower bound (the peak of live requested bytes), then upstream calls (allocs + frees) in
the first iteration / in the later four.

    python3 table.py > table.md      (from this folder)
"""
import csv

NAMES = {"ccalloc-growth": "classic", "ccalloc-default": "default",
         "ccalloc=expandable_ahead:0": "`expandable_ahead:0`", "ccalloc=hold_peak:1": "`hold_peak:1`",
         "ccalloc=expandable_ahead:0.25": "`expandable_ahead:0.25`"}
ratio = {(r["trace"], r["strategy"]): r["ratio_requested"] for r in csv.DictReader(open("run/results.csv"))}
rows, traces = {}, []
for r in csv.DictReader(open("run/iterations.csv")):
    if r["trace"] not in traces:
        traces.append(r["trace"])
    first = int(r["first_upstream_allocs"]) + int(r["first_upstream_frees"])
    later = int(r["later_upstream_allocs"]) + int(r["later_upstream_frees"])
    rows[(r["trace"], r["strategy"])] = f"{float(ratio[(r['trace'], r['strategy'])]):.3f} / {first} / {later}"
print("| trace | " + " | ".join(NAMES.values()) + " |")
print("|---|" + "--:|" * len(NAMES))
for t in traces:
    print(f"| {t} | " + " | ".join(rows[(t, s)] for s in NAMES) + " |")
