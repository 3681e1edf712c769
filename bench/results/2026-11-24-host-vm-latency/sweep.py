#!/usr/bin/env python3
"""Classic against expandable segments, timed with the driver's cost, as the
cost of one mapped or unmapped granule rises (ccbench --vm-latency): on the
simulated device, whose latencies are busy-waits, so this is a model, not a
GPU measurement. Per-call costs stay at ccbench's default (35 us per alloc
or map call, 35 us per free or unmap call).

usage: sweep.py BUILD_DIR OUT_DIR   (from the source tree's root)
Writes OUT_DIR/raw/<latency>/ (ccbench's output), OUT_DIR/sweep.csv and
OUT_DIR/sweep.md.
"""
import csv, glob, os, subprocess, sys

build, out = sys.argv[1], sys.argv[2]
ccbench = os.path.join(build, "bench", "ccbench")
traces = ["gen:uniform", "gen:lognormal", "gen:mlp", "gen:models", "gen:adversarial",
          "bench/traces/ccrun-mlp.csv", "bench/traces/ccrun-resident.csv"] + \
    sorted(glob.glob("bench/traces/torch-*.csv.gz"))
LATENCIES = ["0", "5us", "15us", "30us"]
STRATEGIES = ["ccalloc-growth", "ccalloc-expandable"]

rows = []
for lat in LATENCIES:
    dest = os.path.join(out, "raw", lat)
    cmd = [ccbench, "replay", "--reps", "1", "--driver-reps", "3", "--no-plots", "--vm-latency", lat,
           "--out", dest] + sum((["-s", s] for s in STRATEGIES), []) + traces
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(dest, "results.csv")) as f:
        for r in csv.DictReader(f):
            r["vm_latency"] = lat
            rows.append(r)
with open(os.path.join(out, "sweep.csv"), "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
    w.writeheader()
    w.writerows(rows)

by = {(r["trace"], r["strategy"], r["vm_latency"]): r for r in rows}
names = []
for r in rows:
    if r["trace"] not in names:
        names.append(r["trace"])
head = "| trace | classic ms (calls) | " + " | ".join("expandable ms at %s/granule" % l for l in LATENCIES) + \
    " | expandable calls |"
lines = [head, "|---|--:|" + "--:|" * len(LATENCIES) + "--:|"]
for n in names:
    c = by[(n, "ccalloc-growth", "0")]
    calls = lambda r: int(r["upstream_allocs"]) + int(r["upstream_frees"])
    cells = []
    for l in LATENCIES:
        e = by[(n, "ccalloc-expandable", l)]
        cells.append("%.2f" % float(e["driver_total_ms"]))
    e0 = by[(n, "ccalloc-expandable", "0")]
    lines.append("| %s | %.2f (%d) | %s | %d |" % (n, float(c["driver_total_ms"]), calls(c), " | ".join(cells),
                                                   calls(e0)))
with open(os.path.join(out, "sweep.md"), "w") as f:
    f.write("\n".join(lines) + "\n")
print("\n".join(lines))
