"""The documentation's figure scripts still run and say what the docs quote.

docs/figures/expandable_pages.py replays a recorded training step through
the package with expandable:1 and classic segments, trims, and draws the
large pool's segment from two snapshots; here it writes to a temporary
prefix, and its summary must hold together: after trim(0) an expandable
segment keeps the live bytes plus what is trapped in shared pages, which
is less than classic segments keep.
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
