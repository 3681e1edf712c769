#!/usr/bin/env python3
"""expandable_frontier.py: the figure of docs/tuning.md's "How far ahead to
map": memory against upstream calls for every expandable setting, on the two
traces issue 12's call target names (lognormal and the training step, whose
RMM pool counts it quotes), with the box where both targets hold.

It draws the committed run bench/results/2026-11-24-host-expandable-frontier
(its sweep.csv and caps.csv, which the run's frontier.py wrote: commit b6e453a
holds it); nothing is measured here. Each point: one setting's upstream calls (x, log scale) and
peak reserved over the live peak (y); a setting with OOMs is left out (its
peak is not comparable).

    python3 docs/figures/expandable_frontier.py        (from the repository root)

Writes docs/figures/expandable_frontier.{dat,gp,png} (EXPANDABLE_FRONTIER_OUT:
another prefix); needs gnuplot for the PNG (the .dat and .gp are written
without it, and it exits 1). tests/python/test_figures.py runs it.
"""
import csv
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN = os.path.join(ROOT, "bench", "results", "2026-11-24-host-expandable-frontier")
OUT = os.environ.get("EXPANDABLE_FRONTIER_OUT", os.path.join(ROOT, "docs", "figures", "expandable_frontier"))
# the sweep's settings, in the order of the run's script (commit b6e453a), with their labels here
SETTINGS = ["classic", "no ahead", "default", "1/4", "1/2", "1/1"]
# trace: RMM pool's calls as issue 12 quotes them (not measured here)
TRACES = {"lognormal": 13, "torch-train-step": 8}


def points():
    """[(trace, label, calls, ratio)] of the run, OOM rows left out."""
    out = []
    with open(os.path.join(RUN, "sweep.csv")) as f:
        rows = list(csv.DictReader(f))
    for i, r in enumerate(rows):
        if r["trace"] in TRACES:
            out.append((r["trace"], SETTINGS[i % len(SETTINGS)], r))
    with open(os.path.join(RUN, "caps.csv")) as f:
        for r in csv.DictReader(f):
            if r["trace"] in TRACES:
                label = "cap 1.05x, no ahead" if "expandable_ahead_max:0" in r["config"] else "cap 1.05x"
                out.append((r["trace"], label, r))
    res = []
    for trace, label, r in out:
        if int(r["ooms"]):
            continue
        calls = int(r["upstream_allocs"]) + int(r["upstream_frees"])
        res.append((trace, label, calls, int(r["peak_reserved"]) / int(r["lower_bound"])))
    return res


def main():
    pts = points()
    with open(OUT + ".dat", "w") as f:
        for k, trace in enumerate(TRACES):
            f.write("# %s: calls ratio label label_dy\n" % trace)
            for t, label, calls, ratio in pts:
                if t == trace:  # below their point: the two a cap's point sits just above
                    dy = -0.02 if label in ("default", "no ahead") else 0.012
                    f.write('%d %.4f "%s" %.3f\n' % (calls, ratio, label, dy))
            f.write("\n\n")
    # paths in the script relative to the repository root, where gnuplot runs
    dat, png = os.path.relpath(OUT + ".dat", ROOT), os.path.relpath(OUT + ".png", ROOT)
    panels = []
    for k, (trace, rmm) in enumerate(TRACES.items()):
        panels.append(f"""set title "{trace}: RMM's pool {rmm} calls (issue 12's figure), target <= {1.5 * rmm:g}"
set object 1 rect from graph 0, first 0.95 to first {1.5 * rmm:g}, first 1.05 fc rgb '#d9f0d3' fs solid 0.6 noborder behind
plot '{dat}' index {k} using 1:2 with points pt 7 ps 1.2 lc rgb '#2166ac' notitle, \\
     '{dat}' index {k} using 1:($2+$4):3 with labels offset 0.8,0 left font ',9' notitle
unset object 1""")
    gp = f"""# gnuplot script written by docs/figures/expandable_frontier.py (run that, not this)
set terminal pngcairo size 1100,420 font 'Helvetica,11'
set output '{png}'
set multiplot layout 1,2 title "Expandable segments, every setting: peak reserved / live peak against upstream calls (SIMULATED device; green: both targets)"
set logscale x
set xrange [5:1500]
set yrange [0.95:1.5]
set xlabel 'upstream calls (log scale)'
set ylabel 'peak reserved / live peak'
set grid
{chr(10).join(panels)}
unset multiplot
"""
    with open(OUT + ".gp", "w") as f:
        f.write(gp)
    if shutil.which("gnuplot"):
        subprocess.run(["gnuplot", OUT + ".gp"], check=True, cwd=ROOT)
    else:
        print("gnuplot not found: wrote %s.dat and %s.gp, no PNG" % (OUT, OUT), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
