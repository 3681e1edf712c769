#!/usr/bin/env python3
"""ccbench_models.py: what `ccbench replay` reports for the strategies whose
behaviour is simple enough to model from their documentation, against that
model (standard library only; ccbench_reference.py checks the trace's own
figures, test_bench_figures the allocator's against its stats).

The trace makes every block and frees it before the next, in the sizes that
cross each pool's bounds, then empties the cache and makes five more:

  - classic growth (allocator.md, "Grow (growth policy)" and "Pool"): a
    request rounded to 512 B is small up to 1 MiB (a 2 MiB segment), medium
    below 10 MiB (a 20 MiB segment), large from there (its size rounded to
    2 MiB); with every block freed a segment is whole again, so a request
    takes any cached segment of its pool as large as it, a large one a
    medium segment too, and makes a new segment only when none is;
    `small_pool:0` sends small requests to the medium pool, `medium_pool:0`
    makes medium and large requests one pool; empty-cache frees every
    segment; a 0-byte request reserves nothing;
  - ccalloc-greedy: one arena of 0.9 x the device rounded down to 512 B at
    the start, released by the empty-cache (nothing live) and reserved again
    by the next allocation;
  - device-malloc (benchmarks.md, "Strategies"): one device call per request
    and per free, none for a 0-byte block, its reserved bytes the live
    bytes each rounded to the host page;
  - the checkpoints: live requested bytes at each mark and release event.

Usage: ccbench_models.py CCBENCH WORK_DIR. Exit 1, one line per figure that
differs from the model.
"""
import csv
import os
import subprocess
import sys

M = 1 << 20
DEVICE = 8 << 30
PAGE = os.sysconf("SC_PAGESIZE")
SIZES = [100, 512, M, M + 1, 5 * M, 10 * M - 1, 15 * M, 30 * M, 25 * M, 31 * M + 1, 0, 3 * M, 700 * 1024,
         20 * M, 21 * M, 2 * M - 100, 64 * M, 40 * M, 9 * M, 12 * M, 1, 19 * M + 512]
AFTER = SIZES[:5]  # made again after the empty-cache


def up(s, g):
    return (s + g - 1) // g * g


def write_trace(path):
    lines = ["# ccalloc trace v3", "seq,op,id,size,stream,domain,name"]
    ev = []
    ev.append(("mark", 0, 0, "start"))
    for k, s in enumerate(SIZES):
        ev += [("alloc", k + 1, s, None), ("free", k + 1, s, None)]
    ev.append(("empty_cache", 0, 0, None))
    for k, s in enumerate(AFTER):
        ev += [("alloc", 100 + k, s, None), ("free", 100 + k, s, None)]
    ev.append(("mark", 0, 0, "end"))
    for i, (op, idv, size, name) in enumerate(ev):
        lines.append(",".join([str(i), op, str(idv), str(size), "0", "0"] + ([name] if name else [])))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return ev


def growth(small_pool=True, medium_pool=True):
    """Upstream allocs, frees, peak reserved and reserved after the trace."""
    segs = []  # (pool, bytes)
    calls = [0, 0]
    peak = 0

    def serve(size):
        nonlocal peak
        if size == 0:
            return
        n = up(size, 512)
        if n <= M and small_pool:
            pool, takes, seg = "small", ("small",), 2 * M
        elif n < 10 * M:
            pool = "medium" if medium_pool else "large"
            takes, seg = (pool,), 20 * M
        else:
            pool, takes, seg = "large", ("large", "medium"), up(n, 2 * M)
        if any(p in takes and b >= n for p, b in segs):
            return
        segs.append((pool, seg))
        calls[0] += 1
        peak = max(peak, sum(b for _, b in segs))

    for s in SIZES:
        serve(s)
    calls[1] += len(segs)
    segs.clear()
    for s in AFTER:
        serve(s)
    return {"upstream_allocs": calls[0], "upstream_frees": calls[1], "peak_reserved": peak,
            "reserved_after_trace": sum(b for _, b in segs)}


def expected():
    arena = DEVICE * 9 // 10 // 512 * 512
    nonzero = sum(1 for s in SIZES + AFTER if s)
    return {
        "ccalloc-growth": growth(),
        "ccalloc-nosmall": growth(small_pool=False),
        "ccalloc-onelarge": growth(medium_pool=False),
        "ccalloc-greedy": {"upstream_allocs": 2, "upstream_frees": 1, "peak_reserved": arena,
                           "reserved_after_trace": arena},
        "device-malloc": {"upstream_allocs": nonzero, "upstream_frees": nonzero,
                          "peak_reserved": max(up(s, PAGE) for s in SIZES), "reserved_after_trace": 0},
    }


def checkpoints(ev):
    """(event, op, live requested bytes) at each mark and release event"""
    live = 0
    for i, (op, idv, size, name) in enumerate(ev):
        live += size if op == "alloc" else -size if op == "free" else 0
        if op in ("mark", "empty_cache"):
            yield i, op, live


def main():
    ccbench, work = sys.argv[1:3]
    os.makedirs(work, exist_ok=True)
    trace = os.path.join(work, "sequential.csv")
    ev = write_trace(trace)
    want = expected()
    out = os.path.join(work, "out")
    cmd = [ccbench, "replay", "--reps", "1", "--upstream-latency", "0", "--vm-latency", "0", "--vm-call-latency", "0",
           "--no-plots", "--device-bytes", str(DEVICE), "--out", out]
    for s in want:
        cmd += ["-s", s]
    done = subprocess.run(cmd + [trace], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit("ccbench_models: ccbench failed (%d): %s" % (done.returncode, done.stderr[-2000:]))
    bad = []
    rows = {r["strategy"]: r for r in csv.DictReader(open(os.path.join(out, "results.csv")))}
    for s, fig in want.items():
        for k, v in fig.items():
            if rows[s][k] != str(v):
                bad.append("%s %s: the model says %d, ccbench %s" % (s, k, v, rows[s][k]))
    marks = list(checkpoints(ev))
    got = {}
    for c in csv.DictReader(open(os.path.join(out, "checkpoints.csv"))):
        got.setdefault(c["strategy"], []).append((int(c["event"]), c["op"], int(c["requested"])))
    for s in want:
        if got.get(s) != marks:
            bad.append("%s checkpoints: the model says %s, ccbench %s" % (s, marks, got.get(s)))
    for line in bad:
        print(line)
    print("ccbench_models: %d strategies, %d figures differ from the model" % (len(want), len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
