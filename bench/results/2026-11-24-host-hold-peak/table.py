#!/usr/bin/env python3
"""The tables of this run from ccbench's results.csv: per trace and
strategy, peak reserved over the peak of live requested bytes (ratio_requested) and upstream calls (allocs +
frees), then the replay's time with the simulated driver's cost.

usage: table.py RESULTS_CSV > hold.md
"""
import csv
import sys

# (the config column, which ccbench writes whole; the strategy column is cut at 60 characters)
COLUMNS = [
    ("policy:growth", "classic"),
    ("policy:growth,hold_peak:1", "classic, hold_peak"),
    ("expandable:1", "expandable (default ahead)"),
    ("expandable:1,hold_peak:1", "expandable, hold_peak"),
    ("expandable:1,expandable_ahead_max:0,expandable_ahead_min:0", "expandable, no ahead"),
    ("expandable:1,hold_peak:1,expandable_ahead_max:0,expandable_ahead_min:0", "expandable, no ahead, hold_peak"),
]


def main(path):
    rows = list(csv.DictReader(open(path, newline="")))
    traces = []
    cell = {}
    for r in rows:
        if r["trace"] not in traces:
            traces.append(r["trace"])
        cell[(r["trace"], r["config"])] = r
    names = [c[0] for c in COLUMNS]
    missing = [(t, s) for t in traces for s in names if (t, s) not in cell]
    if missing:
        sys.exit(f"table.py: no row for {missing[0]}")
    print("| trace | live peak | " + " | ".join(c[1] for c in COLUMNS) + " |")
    print("|---|--:|" + "--:|" * len(COLUMNS))
    for t in traces:
        live = int(cell[(t, names[0])]["lower_bound"]) / 2**20
        out = []
        for s in names:
            r = cell[(t, s)]
            if r["status"] != "ok" or int(r["ooms"]):
                out.append(f"{r['status']}, {r['ooms']} OOMs")
                continue
            calls = int(r["upstream_allocs"]) + int(r["upstream_frees"])
            out.append(f"{float(r['ratio_requested']):.3f} / {calls}")
        print(f"| {t} | {live:.1f} MiB | " + " | ".join(out) + " |")
    print()
    print("Replay time with the driver's cost (ms; one pass, bookkeeping plus the simulated device's latencies):")
    print()
    print("| trace | " + " | ".join(c[1] for c in COLUMNS) + " |")
    print("|---|" + "--:|" * len(COLUMNS))
    for t in traces:
        print(f"| {t} | " + " | ".join(f"{float(cell[(t, s)]['driver_total_ms']):.1f}" for s in names) + " |")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
