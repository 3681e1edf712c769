#!/usr/bin/env python3
"""expandable_pages.py: the figure of docs/allocator.md's "Pages, not
segments": one expandable segment of a real model's run, before and after
cca_trim(0), drawn from the allocator's own snapshots.

It replays a trace recorded from PyTorch (bench/traces) through ccalloc's
Python package on the simulated device with expandable:1 over the pages
backing (vm_backing "pages": every page its own memory, so that trim
unmaps each free page wherever it lies; the default, whole maps, gives
back only maps wholly free), stops part-way
(default: 13% into torch-train-step, within the first training step, where
freed tensors leave holes between live ones), takes a snapshot
(cca_write_snapshot_json: every block with its offset and state, and the
mapped runs of each segment), calls trim(0), takes another, and draws the
large pool's segment twice: blocks (live / free) above its pages (mapped /
unmapped). The same replay with classic segments (expandable:0) gives the
comparison line.

    python3 docs/figures/expandable_pages.py             (from the repository root,
                                                           after a build: build/allocator)
    CCALLOC_LIBRARY=... python3 docs/figures/expandable_pages.py [TRACE] [FRACTION]

Writes docs/figures/expandable_pages.{dat,gp,png,txt} (EXPANDABLE_PAGES_OUT:
another prefix); needs gnuplot for the PNG (the .dat, .gp and .txt are
written without it). tests/python/test_figures.py runs it.
"""
import csv
import gzip
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "allocator", "python"))
import ccalloc  # noqa: E402  (the checkout's package)

# where the four files go (a prefix); tests set it to a temporary directory
OUT = os.environ.get("EXPANDABLE_PAGES_OUT") or os.path.join(ROOT, "docs", "figures", "expandable_pages")
MIB = 1 << 20


def events(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        for row in csv.reader(line for line in f if not line.startswith("#")):
            if row and row[0] != "seq":
                yield row


def replay(path, stop, conf, vm_backing=None):
    """The first `stop` events of the trace through a fresh allocator; its
    live blocks (trace id -> address) come back with it."""
    a = ccalloc.Allocator("8G", conf=conf, vm_backing=vm_backing)
    live, n = {}, 0
    for row in events(path):
        if row[1] == "alloc":
            size = int(row[3])
            live[row[2]] = a.alloc(size, int(row[4]) or None) if size else 0
        elif row[1] == "free":
            p = live.pop(row[2])
            if p:
                a.free(p)
        n += 1
        if n >= stop:
            break
    return a, live


def finish(a, live):
    for p in live.values():
        if p:
            a.free(p)
    a.close()


def large_segment(snap):
    segs = [s for s in snap["segments"] if s.get("expandable") and s["pool"] == "large"]
    return max(segs, key=lambda s: s["mapped_bytes"])


def rects(seg, y, out):
    """Blocks on row y+1 (live orange, free grey) and pages on row y
    (mapped purple); each rectangle: x, y, xlow, xhigh, ylow, yhigh, colour,
    in MiB from the segment's start, up to its mapped end."""
    end = max(b + n for b, n in seg["mapped"]) if seg["mapped"] else 0
    for b in seg["blocks"]:
        lo, hi = b["offset"], min(b["offset"] + b["size"], end)
        if lo >= end:
            continue
        colour = 0xE66101 if b["state"] == "live" else 0xD9D9D9
        out.append((lo, hi, y + 1.05, y + 1.95, colour))
    for lo, n in seg["mapped"]:
        out.append((lo, lo + n, y + 0.05, y + 0.95, 0x7A1FA2))
    return end


def main():
    trace = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "bench", "traces", "torch-train-step.csv.gz")
    fraction = float(sys.argv[2]) if len(sys.argv) > 2 else 0.132
    total = sum(1 for _ in events(trace))
    stop = int(total * fraction)

    a, live = replay(trace, stop, "expandable:1", "pages")
    before = a.snapshot()
    report = a.trim(0)
    after = a.snapshot()
    finish(a, live)
    c, clive = replay(trace, stop, "expandable:0")
    classic_before = c.stats()["reserved_bytes"]
    classic_report = c.trim(0)
    finish(c, clive)

    boxes = []
    end_before = rects(large_segment(before), 2.5, boxes)
    rects(large_segment(after), 0, boxes)
    with open(OUT + ".dat", "w") as f:
        f.write("# x y xlow xhigh ylow yhigh rgb (MiB from the segment's start)\n")
        for lo, hi, y0, y1, rgb in boxes:
            f.write("%.4f %.3f %.4f %.4f %.3f %.3f %d\n" % ((lo + hi) / 2 / MIB, (y0 + y1) / 2, lo / MIB, hi / MIB,
                                                          y0, y1, rgb))
    sb, sa = before["stats"], after["stats"]
    name = os.path.basename(trace)
    lines = [
        "trace %s, stopped after %d of %d events (%.0f%%), simulated 8 GiB device, 2 MiB pages" %
        (name, stop, total, 100 * fraction),
        "live (allocated) bytes: %.1f MiB" % (sb["allocated_bytes"] / MIB),
        "expandable:1  reserved %.1f MiB -> %.1f MiB after trim(0): %d pages unmapped (%.1f MiB), "
        "%.1f MiB of free bytes trapped in pages live blocks share" %
        (sb["reserved_bytes"] / MIB, sa["reserved_bytes"] / MIB, report.pages_unmapped, report.bytes_unmapped / MIB,
         report.free_bytes_trapped / MIB),
        "classic       reserved %.1f MiB -> %.1f MiB after trim(0): %d segments released, %d pinned by live blocks" %
        (classic_before / MIB, (classic_before - classic_report.bytes_released) / MIB,
         classic_report.segments_released, classic_report.segments_pinned),
    ]
    with open(OUT + ".txt", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    with open(OUT + ".gp", "w") as f:
        f.write("""# gnuplot script written by docs/figures/expandable_pages.py (run that, not this)
set terminal pngcairo size 1100,360 font 'Helvetica,11'
set output '%(out)s.png'
set title "%(name)s at %(pct).0f%%: the large pool's expandable segment, before and after trim(0) (SIMULATED device)"
set xlabel 'MiB from the start of the segment (to its mapped end)'
set xrange [0:%(end).1f]
set yrange [-0.2:5.2]
set ytics ("pages after" 0.5, "blocks after" 1.5, "pages before" 3.0, "blocks before" 4.0)
set key outside bottom center horizontal
set style fill solid 1.0 noborder
plot '%(out)s.dat' using 1:2:3:4:5:6:7 with boxxy lc rgb variable notitle, \\
     NaN with boxes lc rgb '#e66101' title 'live block', \\
     NaN with boxes lc rgb '#d9d9d9' title 'free block', \\
     NaN with boxes lc rgb '#7a1fa2' title 'mapped page (white: unmapped)'
""" % {"out": os.path.relpath(OUT, ROOT) if OUT.startswith(ROOT + os.sep) else OUT, "name": name, "pct": 100 * fraction, "end": end_before / MIB})
    try:
        subprocess.run(["gnuplot", OUT + ".gp"], cwd=ROOT, check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        print("no PNG: gnuplot failed or is missing (%s)" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
