#!/usr/bin/env python3
"""Issue 12's two targets side by side: peak reserved over the live peak, and
upstream calls, for expandable segments mapping more or less ahead, plus a
cap at 1.05x each trace's live peak (an oracle: it is given the peak the
trace will reach, which no allocator knows while it runs).

usage: frontier.py BUILD_DIR OUT_DIR   (run from the source tree's root)

Peaks and call counts are deterministic (the simulated device places every
allocation itself); nothing here is a timing. Writes OUT_DIR/raw/ (ccbench's
own output for each run), OUT_DIR/frontier.md (the table), OUT_DIR/sweep.csv
and OUT_DIR/caps.csv (ccbench's results.csv rows of every run).
"""
import csv, glob, os, subprocess, sys

build, out = sys.argv[1], sys.argv[2]
ccbench = os.path.join(build, "bench", "ccbench")
traces = ["gen:uniform", "gen:lognormal", "gen:mlp", "gen:models", "gen:adversarial",
          "bench/traces/ccrun-mlp.csv", "bench/traces/ccrun-resident.csv"] + \
    sorted(glob.glob("bench/traces/torch-*.csv.gz"))
MiB = 1 << 20
GRANULE = 2 * MiB
SETTINGS = [  # (column title, strategy)
    ("classic growth", "ccalloc-growth"),
    ("no ahead", "ccalloc=expandable:1,expandable_ahead_max:0,expandable_ahead_min:0"),
    ("default (1/16, cap 64M, least 20M)", "ccalloc-expandable"),
    ("1/4, cap 1G", "ccalloc=expandable:1,expandable_ahead:0.25,expandable_ahead_max:1G"),
    ("1/2, no cap", "ccalloc=expandable:1,expandable_ahead:0.5,expandable_ahead_max:1T"),
    ("1/1 (doubling), no cap", "ccalloc=expandable:1,expandable_ahead:1,expandable_ahead_max:1T"),
]
COMMON = ["--reps", "1", "--driver-reps", "1", "--no-plots"]


def replay(strategies, dest, trs):
    cmd = [ccbench, "replay"] + COMMON + sum((["-s", s] for s in strategies), []) + ["--out", dest] + trs
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(dest, "results.csv")) as f:
        return list(csv.DictReader(f))


def cell(r):
    if r["status"] != "ok":
        return r["status"]
    calls = int(r["upstream_allocs"]) + int(r["upstream_frees"])
    if int(r["ooms"]):  # it did not serve the whole trace: no ratio to compare
        return "%s OOMs / %d" % (r["ooms"], calls)
    return "%.3f / %d" % (int(r["peak_reserved"]) / int(r["lower_bound"]), calls)


rows = replay([s for _, s in SETTINGS], os.path.join(out, "raw", "sweep"), traces)
name_of = {t: r["trace"] for t, r in zip(traces, rows[::len(SETTINGS)])}
# keyed by the setting's position: results.csv cuts long strategy names
by = {(r["trace"], SETTINGS[i % len(SETTINGS)][1]): r for i, r in enumerate(rows)}
caps, cap_rows = {}, []
for t in traces:
    lb = int(by[(name_of[t], "ccalloc-growth")]["lower_bound"])
    cap = int(lb * 1.05) // GRANULE * GRANULE
    caps[name_of[t]] = cap
    for label, extra in (("cap", ""), ("cap-noahead", ",expandable_ahead_max:0,expandable_ahead_min:0")):
        s = "ccalloc=expandable:1,max_reserved:%d%s" % (cap, extra)
        for r in replay([s], os.path.join(out, "raw", "%s-%s" % (label, name_of[t])), [t]):
            by[(r["trace"], label)] = r
            cap_rows.append(r)

head = [t for t, _ in SETTINGS] + ["cap 1.05x peak (oracle), default ahead", "cap 1.05x peak (oracle), no ahead"]
keys = [s for _, s in SETTINGS] + ["cap", "cap-noahead"]
lines = ["| trace | live peak | " + " | ".join(head) + " |", "|---|--:|" + "--:|" * len(head)]
for t in traces:
    n = name_of[t]
    lb = int(by[(n, "ccalloc-growth")]["lower_bound"])
    lines.append("| %s | %.1f MiB | " % (n, lb / MiB) + " | ".join(cell(by[(n, k)]) for k in keys) + " |")
lines.append("")
lines.append("Caps (max_reserved, 1.05x the live peak rounded down to 2 MiB): " +
             ", ".join("%s %d MiB" % (n, c // MiB) for n, c in caps.items()))
for name, rs in (("sweep.csv", rows), ("caps.csv", cap_rows)):
    with open(os.path.join(out, name), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rs[0].keys()))
        w.writeheader()
        w.writerows(rs)
with open(os.path.join(out, "frontier.md"), "w") as f:
    f.write("\n".join(lines) + "\n")
print("\n".join(lines))
