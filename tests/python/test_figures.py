"""The documentation's figure scripts still run and say what the docs quote.

docs/figures/expandable_pages.py replays a recorded training step through
the package with expandable:1 and classic segments, trims, and draws the
large pool's segment from two snapshots; here it writes to a temporary
prefix, and its summary must hold together: after trim(0) an expandable
segment keeps the live bytes plus what is trapped in shared pages, which
is less than classic segments keep.

docs/figures/expandable_frontier.py draws the committed frontier run; its
points must be the cells of that run's own table (frontier.md, written by
another script from the same run).
"""
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "docs", "figures", "expandable_pages.py")


def mib(pattern, text):
    m = re.search(pattern, text)
    assert m, "%r not in:\n%s" % (pattern, text)
    return [float(g) for g in m.groups()]


def test_expandable_pages_figure(tmp_path):
    out = str(tmp_path / "fig")
    env = dict(os.environ, EXPANDABLE_PAGES_OUT=out)
    r = subprocess.run([sys.executable, SCRIPT], env=env, capture_output=True, text=True, timeout=240)
    have_gnuplot = shutil.which("gnuplot") is not None
    assert r.returncode == (0 if have_gnuplot else 1), r.stdout + r.stderr
    text = open(out + ".txt").read()
    (live,) = mib(r"live \(allocated\) bytes: ([\d.]+) MiB", text)
    before, after, unmapped, trapped = mib(
        r"expandable:1  reserved ([\d.]+) MiB -> ([\d.]+) MiB after trim\(0\): \d+ pages unmapped \(([\d.]+) MiB\), "
        r"([\d.]+) MiB of free bytes trapped", text)
    cbefore, cafter = mib(r"classic       reserved ([\d.]+) MiB -> ([\d.]+) MiB", text)
    assert abs(before - unmapped - after) < 0.05, text
    assert abs(after - live - trapped) < 0.05, "after trim(0): live + trapped\n" + text
    assert after < cafter <= cbefore, text
    rows = [l for l in open(out + ".dat") if not l.startswith("#")]
    assert len(rows) > 100, "boxes drawn: %d" % len(rows)
    if have_gnuplot:
        assert open(out + ".png", "rb").read(8) == b"\x89PNG\r\n\x1a\n"


def test_expandable_frontier_figure(tmp_path):
    script = os.path.join(ROOT, "docs", "figures", "expandable_frontier.py")
    out = str(tmp_path / "frontier")
    env = dict(os.environ, EXPANDABLE_FRONTIER_OUT=out)
    r = subprocess.run([sys.executable, script], env=env, capture_output=True, text=True, timeout=120)
    have_gnuplot = shutil.which("gnuplot") is not None
    assert r.returncode == (0 if have_gnuplot else 1), r.stdout + r.stderr
    blocks = open(out + ".dat").read().strip().split("\n\n\n")
    assert len(blocks) == 2, blocks
    table = open(os.path.join(ROOT, "bench", "results", "2026-11-24-host-expandable-frontier", "frontier.md")).read()
    for block, trace, columns in ((blocks[0], "lognormal", 6), (blocks[1], "torch-train-step", 8)):
        assert block.startswith("# %s:" % trace), block
        row = next(l for l in table.splitlines() if l.startswith("| %s |" % trace))
        cells = [c.strip() for c in row.strip("|").split("|")][2:]  # after the trace and its live peak
        want = sorted((int(c.split(" / ")[1]), float(c.split(" / ")[0])) for c in cells if "OOM" not in c)
        got = sorted((int(l.split()[0]), float(l.split()[1])) for l in block.splitlines()[1:])
        assert len(got) == columns == len(want), (trace, got, want)
        for (gc, gr), (wc, wr) in zip(got, want):  # the table rounds to 3 places, the figure's data to 4
            assert gc == wc and abs(gr - wr) <= 0.0006, (trace, got, want)
    if have_gnuplot:
        assert open(out + ".png", "rb").read(8) == b"\x89PNG\r\n\x1a\n"
