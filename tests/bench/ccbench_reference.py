#!/usr/bin/env python3
"""ccbench_reference.py: an independent reference for what `ccbench info`
reports, checked against ccbench on every kind of trace it reads.

The reference is written from the format's documentation
(docs/benchmarks.md, "Trace format") and the ideal arena's rule (bench/ideal.c's
opening comment), not from ccbench's code, with the standard library only:

  - reading: v1 (seq,op,id,size,stream), v2 (+name) and v3 (+domain) sections,
    several sections in one file (ids and domain numbers local to a section,
    domains numbered across the file), '#' comment lines, CRLF, gzip (one or
    several members);
  - the figures of `ccbench info`: events, allocs, frees, lower bound (peak of
    live requested bytes), peak rounded to 512 B, ideal arena, peak live
    blocks, largest, live at end, bytes live at end, streams (highest stream
    number + 1), marks, release events (empty_cache + trim), domains
    (released);
  - the ideal arena by brute force: a list of free extents searched whole at
    every alloc; best fit = the smallest extent that fits, the lowest address
    among equals, cut from its start; none fits: cut from the wilderness at
    `top`; a free merges with its free neighbours and an extent that ends at
    `top` goes back to the wilderness; the figure is the highest `top`.

Checked against ccbench, exactly (bytes formatted as cca_format_bytes does
in the markdown table, and byte for byte through results.csv's lower_bound
and ideal_peak):

  1. every generator (`ccbench --list`) at a small --scale, three seeds: the
     file `ccbench gen` writes, read by the reference, against `ccbench info
     gen:NAME` (the trace in memory) and `ccbench info FILE` (read back);
  2. every committed trace in bench/traces/;
  3. hostile but valid traces: frees in reverse order, one block of 2^60
     bytes, thousands of tiny blocks around the 512 B unit, 0-byte blocks,
     streams, marks, release events, domains with reservations and releases,
     several sections, v1/v2 files, CRLF, comments, gzip in two members;
  4. seeded random traces (a model of a program: random allocs and frees of
     sizes near multiples of 512 B, so that best fit's ties and coalescing
     are exercised).

Then the replay's tables, on small traces of every kind through the default
strategies: results.csv's lower bound and ideal arena are the reference's,
its peak requested is the lower bound where nothing was refused, its ratios
are its own exact fields divided (none with OOMs), every results.md cell is
the results.csv field it shows, no nan or inf anywhere, and a skipped or
failed row holds its reason and no figure (test_bench_figures checks the
memory figures themselves against the allocator's stats).

Usage: ccbench_reference.py CCBENCH SOURCE_DIR WORK_DIR
Exit 0 when every figure agrees; otherwise each disagreement is printed.
"""

import csv
import gzip
import io
import os
import random
import subprocess
import sys

UNIT = 512  # CCA_GRANULARITY: the ideal arena's and "peak rounded"'s unit


# ---- reading ------------------------------------------------------------------

HEADERS = {
    "seq,op,id,size,stream": 1,
    "seq,op,id,size,stream,name": 2,
    "seq,op,id,size,stream,domain,name": 3,
}


class Event:
    __slots__ = ("op", "key", "size", "stream", "domain")

    def __init__(self, op, key, size, stream, domain):
        self.op, self.key, self.size, self.stream, self.domain = op, key, size, stream, domain


def read_text(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)  # every member, in order
    return data.decode("ascii")


def parse(text):
    """The events of a trace: (op, key, size, stream, domain) with key =
    (section, id) for allocs and frees and domain numbered across the file."""
    events = []
    section = -1
    version = 0
    local = {}  # the section's domain numbers -> the file's
    ndomains = 0
    for raw in text.split("\n"):
        line = raw.rstrip("\r")
        if not line or line.startswith("#"):
            continue
        if line in HEADERS:
            section += 1
            version = HEADERS[line]
            local = {0: 0}
            continue
        assert section >= 0, "an event before the header"
        f = line.split(",")
        op = f[1]
        size, stream = int(f[3]), int(f[4])
        dom = int(f[5]) if version == 3 else 0
        if op == "domain":
            assert dom == len(local), "domain declared out of order"
            ndomains += 1
            local[dom] = ndomains
            events.append(Event(op, None, 0, 0, ndomains))
            continue
        gdom = local[dom]
        events.append(Event(op, (section, int(f[2])), size, stream, gdom))
    return events, ndomains


# ---- the figures --------------------------------------------------------------


def rounded(size):
    return (size + UNIT - 1) // UNIT * UNIT


def ideal_arena(events):
    """Brute force: the free extents as a plain list, searched whole."""
    free = []  # [off, len], no two touching, none touching top
    top = peak = 0
    where = {}  # key -> (off, len)
    for e in events:
        if e.op == "alloc":
            need = rounded(e.size)
            if need == 0:
                where[e.key] = None
                continue
            fits = [x for x in free if x[1] >= need]
            if fits:
                best = min(fits, key=lambda x: (x[1], x[0]))
                off = best[0]
                free.remove(best)
                if best[1] > need:
                    free.append([off + need, best[1] - need])
            else:
                off = top
                top += need
                peak = max(peak, top)
            where[e.key] = (off, need)
        elif e.op == "free":
            blk = where.pop(e.key)
            if blk is None:
                continue
            off, ln = blk
            for x in list(free):  # merge with the neighbours on both sides
                if x[0] + x[1] == off:
                    off, ln = x[0], ln + x[1]
                    free.remove(x)
                elif off + ln == x[0]:
                    ln += x[1]
                    free.remove(x)
            if off + ln == top:
                top = off
            else:
                free.append([off, ln])
    return peak


def figures(events, ndomains):
    live, live_domain = {}, {}  # key -> size, key -> domain
    req = rnd = peak_req = peak_rnd = peak_live = largest = 0
    allocs = frees = marks = releases = dreleases = streams = 0
    for e in events:
        if e.op == "alloc":
            assert e.key not in live, "alloc of a live id"
            live[e.key] = e.size
            live_domain[e.key] = e.domain
            req += e.size
            rnd += rounded(e.size)
            allocs += 1
            largest = max(largest, e.size)
            peak_req, peak_rnd = max(peak_req, req), max(peak_rnd, rnd)
            peak_live = max(peak_live, len(live))
            streams = max(streams, e.stream + 1)
        elif e.op == "free":
            size = live.pop(e.key)
            assert live_domain.pop(e.key) == e.domain, "free in another domain"
            assert size == e.size, "free with another size"
            req -= size
            rnd -= rounded(size)
            frees += 1
            streams = max(streams, e.stream + 1)
        elif e.op == "mark":
            marks += 1
        elif e.op in ("empty_cache", "trim"):
            releases += 1
        elif e.op == "domain_release":
            assert not any(d == e.domain for d in live_domain.values()), "release of a domain with live blocks"
            dreleases += 1
    return {
        "events": len(events),
        "allocs": allocs,
        "frees": frees,
        "lower_bound": peak_req,
        "peak_rounded": peak_rnd,
        "ideal": ideal_arena(events),
        "peak_live": peak_live,
        "largest": largest,
        "live_end": len(live),
        "bytes_end": req,
        "streams": streams,
        "marks": marks,
        "releases": releases,
        "domains": "%d (%d)" % (ndomains, dreleases),
    }


def trace_figures(path):
    return figures(*parse(read_text(path)))


# ---- ccbench's side -------------------------------------------------------------


def format_bytes(b):
    """cca_format_bytes (allocator/src/support/size.c), as the markdown shows bytes."""
    v, u = float(b), 0
    units = ["B", "KiB", "MiB", "GiB", "TiB"]
    while v >= 1024.0 and u < 4:
        v /= 1024.0
        u += 1
    if 0 < u < 4 and "%.2f" % v == "1024.00":  # rounded up to a whole next unit
        v /= 1024.0
        u += 1
    return "%d B" % b if u == 0 else "%.2f %s" % (v, units[u])


COLUMNS = [
    "name", "events", "allocs", "frees", "lower_bound", "peak_rounded", "ideal", "peak_live", "largest",
    "live_end", "bytes_end", "streams", "marks", "releases", "domains",
]
BYTES = {"lower_bound", "peak_rounded", "ideal", "largest", "bytes_end"}


def as_row(name, fig):
    return [name] + [format_bytes(fig[c]) if c in BYTES else str(fig[c]) for c in COLUMNS[1:]]


CHUNK = 60  # traces per ccbench command (it takes at most 64)


def chunks(paths):
    return [paths[i:i + CHUNK] for i in range(0, len(paths), CHUNK)]


def info_rows(ccbench, args):
    """`ccbench info ARGS`: one row (a list of cells) per trace."""
    out = subprocess.run([ccbench, "info"] + args, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError("ccbench info %s..: exit %d: %s" % (args[0], out.returncode, out.stderr))
    rows = [l for l in out.stdout.splitlines() if l.startswith("| ") and not l.startswith("| trace |")]
    return [[c.strip() for c in l.strip().strip("|").split("|")] for l in rows]


def exact_references(ccbench, paths, work):
    """lower_bound and ideal_peak in bytes, from results.csv of a replay
    through the malloc floor (the trace's own references, whatever ran)."""
    got = []
    for k, part in enumerate(chunks(paths)):
        out = os.path.join(work, "exact-%d" % k)
        # a 1-byte device: the malloc floor refuses every block (an OOM, malloc
        # not called), so this costs a pass over the events whatever their sizes
        cmd = [ccbench, "replay", "-s", "malloc", "--reps", "1", "--upstream-latency", "0", "--device-bytes", "1",
               "--no-plots", "--out", out] + part
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            raise RuntimeError("ccbench replay %s..: exit %d: %s" % (part[0], run.returncode, run.stderr))
        with open(os.path.join(out, "results.csv"), newline="") as f:
            got += [(int(r["lower_bound"]), int(r["ideal_peak"])) for r in csv.DictReader(f)]
    return got


# ---- hostile and random traces ----------------------------------------------------


def v3(lines, comments=()):
    return "".join("# %s\n" % c for c in comments) + "seq,op,id,size,stream,domain,name\n" + "".join(
        "%d,%s\n" % (i, l) for i, l in enumerate(lines))


def hostile(rng):
    """name -> file bytes: valid traces at the edges of what the format holds."""
    t = {}
    n = 300
    t["reverse-frees"] = v3(["alloc,%d,%d,0,0" % (i + 1, 512 * (i % 7) + i) for i in range(n)] +
                            ["free,%d,%d,0,0" % (i + 1, 512 * (i % 7) + i) for i in reversed(range(n))])
    big = 1 << 60
    t["one-huge"] = v3(["alloc,1,%d,0,0" % big, "alloc,2,1,0,0", "free,2,1,0,0", "alloc,3,513,0,0"])
    tiny = []
    for i in range(3000):
        tiny.append("alloc,%d,%d,0,0" % (i + 1, [0, 1, 511, 512, 513, 1023, 1024][i % 7]))
        if i % 3 == 2:
            tiny.append("free,%d,%d,0,0" % (i, [0, 1, 511, 512, 513, 1023, 1024][(i - 1) % 7]))
    t["tiny"] = v3(tiny)
    t["streams-marks"] = v3([
        "mark,0,0,0,0,load:a b", "alloc,1,4096,3,0", "alloc,2,100,7,0", "empty_cache,0,0,0,0",
        "free,1,4096,3,0", "trim,0,1048576,0,0", "mark,0,0,0,0,x", "trim,0,0,0,0",
    ], comments=["source: a test", "ccalloc trace v3"])
    t["domains"] = v3([
        "domain,0,0,0,1,m1", "domain,0,0,0,2,m2", "domain_reserve,0,8388608,0,1", "alloc,1,1000,0,1",
        "alloc,2,3000,0,2", "alloc,3,512,0,0", "free,1,1000,0,1", "domain_release,0,0,0,1",
        "alloc,4,7000,0,1", "free,2,3000,0,2", "domain_release,0,0,0,2", "free,3,512,0,0",
        "domain_release,0,0,0,0",
    ])
    # three sections: ids and domains local to each; a block of section 0 stays live
    t["sections"] = (v3(["domain,0,0,0,1,a", "alloc,1,5000,0,1", "alloc,2,600,1,0", "free,2,600,1,0"]) +
                     "seq,op,id,size,stream,name\n0,alloc,1,9000,0\n1,mark,0,0,0,m\n2,free,1,9000,0\n" +
                     "seq,op,id,size,stream\n0,alloc,2,77,0\n" +
                     v3(["domain,0,0,0,1,b", "alloc,1,1,2,1", "free,1,1,2,1", "domain_release,0,0,0,1"]))
    t["v1-crlf"] = "seq,op,id,size,stream\r\n" + "".join(
        "%d,%s\r\n" % (i, l) for i, l in enumerate(["alloc,5,2048,0", "alloc,6,1536,0", "free,5,2048,0",
                                                    "alloc,7,1024,0", "alloc,8,1024,0", "free,6,1536,0"]))
    t["empty"] = v3([])
    t["releases-only"] = v3(["empty_cache,0,0,0,0", "trim,0,5,0,0"])
    # best fit's ties: equal holes, the lowest must be taken
    ties = ["alloc,%d,%d,0,0" % (i + 1, 1024) for i in range(8)]
    ties += ["free,%d,1024,0,0" % i for i in (2, 4, 6)]
    ties += ["alloc,20,512,0,0", "alloc,21,1024,0,0", "alloc,22,1024,0,0", "free,8,1024,0,0"]
    t["ties"] = v3(ties)
    for k in range(30):
        t["random-%02d" % k] = random_trace(rng, 150 + 40 * k)
    return t


def random_trace(rng, steps):
    """A program's allocations: random allocs and frees (often out of order),
    sizes near multiples of 512 B, on a few streams and domains, with marks
    and release events between them."""
    lines, live, ids, ndom = [], [], 0, 0
    for _ in range(steps):
        r = rng.random()
        if r < 0.02 and ndom < 5:
            ndom += 1
            lines.append("domain,0,0,0,%d,d%d" % (ndom, ndom))
        elif r < 0.04:
            lines.append("mark,0,0,0,0,step %d" % len(lines))
        elif r < 0.05:
            lines.append("empty_cache,0,0,0,0" if rng.random() < 0.5 else "trim,0,%d,0,0" % rng.randrange(1 << 20))
        elif r < 0.06 and ndom:
            d = rng.randint(1, ndom)
            if not any(x[3] == d for x in live):
                lines.append("domain_release,0,0,0,%d" % d)
        elif r < 0.55 or not live:
            ids += 1
            size = rng.choice([0, 1, 511, 512, 513]) if rng.random() < 0.1 else UNIT * rng.randint(1, 40) + rng.choice(
                [-1, 0, 0, 0, 1])
            size = max(size, 0)
            blk = (ids, size, rng.randint(0, 3), rng.randint(0, ndom))
            live.append(blk)
            lines.append("alloc,%d,%d,%d,%d" % blk)
        else:
            blk = live.pop(rng.randrange(len(live)) if rng.random() < 0.7 else len(live) - 1)
            lines.append("free,%d,%d,%d,%d" % blk)
    return v3(lines)


# ---- the replay's tables ------------------------------------------------------------


def md_rows(path):
    """The rows of results.md as lists of cells."""
    with open(path, encoding="utf-8") as f:
        lines = [l.rstrip("\n") for l in f if l.startswith("| ") and not l.startswith("| trace |")]
    return [[c.strip() for c in l.strip().strip("|").split("|")] for l in lines]


def fixed(v, digits):
    return "%.*f" % (digits, v)


def close_to(cell, csv_value, digits):
    """cell shows csv_value (written with more digits) rounded to `digits`."""
    return abs(float(cell) - float(csv_value)) <= 0.5 * 10 ** -digits + 1e-9


def check_replay_tables(ccbench, paths, refs, work, failures):
    """Replay `paths` through the default strategies (the host suite and the
    GPU suite, skipped without a GPU) and check results.csv's arithmetic
    against its own exact fields and the reference, and results.md against
    results.csv cell by cell."""
    out = os.path.join(work, "replay")
    cmd = [ccbench, "replay", "--reps", "1", "--driver-reps", "1", "--upstream-latency", "1us", "--no-plots",
           "--out", out] + paths
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        failures.append("ccbench replay: exit %d: %s" % (run.returncode, run.stderr[-2000:]))
        return
    with open(os.path.join(out, "results.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    md = md_rows(os.path.join(out, "results.md"))
    if len(md) != len(rows) or not rows:
        failures.append("results.md has %d rows, results.csv %d" % (len(md), len(rows)))
        return
    names = [os.path.basename(p).split(".")[0] for p in paths]
    for r, m in zip(rows, md):
        where = "%s / %s" % (r["trace"], r["strategy"])
        fig = refs[names.index(r["trace"])]
        text = ",".join(r.values()) + "|".join(m)
        if any(w in text.lower() for w in ("nan", "inf")):
            failures.append("%s: nan or inf printed" % where)
        if r["status"] != "ok":  # skipped or failed: the reason, and no figure anywhere
            figures = [k for k, v in r.items() if v and k not in ("trace", "strategy", "config", "status", "why")]
            if figures or not r["why"]:
                failures.append("%s: %s row with figures %s or no reason" % (where, r["status"], figures))
            if m[2] != "%s: %s" % (r["status"], r["why"]) or any(m[3:]) or len(m) != 15:
                failures.append("%s: %s row in results.md: %r" % (where, r["status"], m))
            continue
        lb, ideal = int(r["lower_bound"]), int(r["ideal_peak"])
        if (lb, ideal) != (fig["lower_bound"], fig["ideal"]):
            failures.append("%s: lower bound, ideal arena %d, %d; reference %d, %d" %
                            (where, lb, ideal, fig["lower_bound"], fig["ideal"]))
        ooms = int(r["ooms"])
        if not ooms and int(r["peak_requested"]) != lb:
            failures.append("%s: peak requested %s without OOMs, lower bound %d" % (where, r["peak_requested"], lb))
        pr = int(r["peak_reserved"]) if r["peak_reserved"] else None
        pa = int(r["peak_allocated"])
        want = {  # results.csv's ratios from its own exact fields
            "ratio": fixed(pr / pa, 4) if pr is not None and pa else "",
            "ratio_requested": fixed(pr / lb, 4) if pr is not None and lb and not ooms else "",
            "ratio_ideal": fixed(pr / ideal, 4) if pr is not None and ideal and not ooms else "",
        }
        for k, v in want.items():
            if r[k] != v:
                failures.append("%s: %s %r, want %r" % (where, k, r[k], v))
        cells = {  # results.md's cells from results.csv's fields
            6: format_bytes(pr) if pr is not None else "—",
            7: fixed(pr / lb, 3) if want["ratio_requested"] else "—",
            8: fixed(pr / ideal, 3) if want["ratio_ideal"] else "—",
            10: "%s+%s" % (r["upstream_allocs"], r["upstream_frees"]) if r["upstream_allocs"] else "—",
            11: r["ooms"],
            12: format_bytes(int(r["reserved_after_trace"])) if r["reserved_after_trace"] else "—",
            13: format_bytes(int(r["reserved_after_empty"])) if r["reserved_after_empty"] else "—",
            14: "%s → %s" % tuple(format_bytes(int(r[k])) if r[k] else "—"
                                  for k in ("device_free_before", "device_free_after")),
        }
        for i, v in cells.items():
            if m[i] != v:
                failures.append("%s: results.md cell %d %r, results.csv says %r" % (where, i, m[i], v))
        for i, k, digits in ((0 + 2, "median_ns", 0), (3, "p99_ns", 0), (4, "total_ms", 2), (9, "frag_at_peak", 3)):
            if (m[i] == "—") != (r[k] == "") or (r[k] and not close_to(m[i], r[k], digits)):
                failures.append("%s: results.md %s %r, results.csv %r" % (where, k, m[i], r[k]))
        if r["median_ns"] and (float(r["median_ns"]) < 0 or float(r["p99_ns"]) < float(r["median_ns"])):
            failures.append("%s: median %s, p99 %s" % (where, r["median_ns"], r["p99_ns"]))
        drv = m[5].replace(" (real)", "")
        if (drv == "—") != (r["driver_total_ms"] == "") or (drv != "—" and not close_to(drv, r["driver_total_ms"], 2)):
            failures.append("%s: results.md driver %r, results.csv %r" % (where, m[5], r["driver_total_ms"]))


# ---- the comparison ---------------------------------------------------------------


def generators(ccbench):
    out = subprocess.run([ccbench, "--list"], capture_output=True, text=True, check=True).stdout
    return [w.split()[0][4:] for w in out.splitlines() if w.strip().startswith("gen:")]


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    ccbench, source, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    failures = []
    cases = []  # (label, file, reference figures, info args that must agree with it)

    gens = generators(ccbench)
    if not gens:
        failures.append("ccbench --list names no generator")
    for name in gens:
        for seed in (1, 2, 3):
            scale = "0.01"
            path = os.path.join(work, "gen-%s-%d.csv" % (name, seed))
            subprocess.run([ccbench, "gen", name, "--seed", str(seed), "--scale", scale, "-o", path], check=True)
            fig = trace_figures(path)
            cases.append(("gen:%s seed %d" % (name, seed), path, fig,
                          ["gen:" + name, "--seed", str(seed), "--scale", scale]))

    tdir = os.path.join(source, "bench", "traces")
    for f in sorted(os.listdir(tdir)):
        if f.endswith(".csv") or f.endswith(".csv.gz"):
            path = os.path.join(tdir, f)
            cases.append((f, path, trace_figures(path), None))

    rng = random.Random(20261124)
    for name, text in hostile(rng).items():
        path = os.path.join(work, "hostile-%s.csv" % name)
        data = text.encode("ascii")
        if name in ("domains", "sections"):  # gzip, in two members for one of them
            path += ".gz"
            half = len(data) // 2
            data = gzip.compress(data) if name == "domains" else gzip.compress(data[:half]) + gzip.compress(data[half:])
        with open(path, "wb") as f:
            f.write(data)
        cases.append(("hostile " + name, path, trace_figures(path), None))

    # the files, all through one `ccbench info` and one replay
    files = [c[1] for c in cases]
    rows = [r for part in chunks(files) for r in info_rows(ccbench, part)]
    exact = exact_references(ccbench, files, work)
    if len(rows) != len(cases) or len(exact) != len(cases):
        failures.append("ccbench gave %d info rows and %d results for %d traces" % (len(rows), len(exact), len(cases)))
    for (label, path, fig, gen_args), row, ex in zip(cases, rows, exact):
        want = as_row(row[0], fig)
        if row != want:
            diff = ["%s: ccbench %s, reference %s" % (c, a, b) for c, a, b in zip(COLUMNS, row, want) if a != b]
            failures.append("%s (%s): %s" % (label, path, "; ".join(diff) or "cells %r" % row))
        if ex != (fig["lower_bound"], fig["ideal"]):
            failures.append("%s: results.csv lower_bound, ideal_peak %r, reference %r" %
                            (label, ex, (fig["lower_bound"], fig["ideal"])))
        if gen_args:  # the trace in memory, before it was written
            mem = info_rows(ccbench, gen_args)[0]
            if mem[1:] != want[1:]:
                failures.append("%s in memory: ccbench %r, reference %r" % (label, mem, want))

    # the replay's tables, on small traces of every kind (generated, domains,
    # releases, an OOM, nothing to time)
    small = [c for c in cases if c[0].startswith("gen:") and c[0].endswith("seed 1")]
    small += [c for c in cases if c[0] in ("hostile domains", "hostile streams-marks", "hostile one-huge",
                                           "hostile empty", "hostile sections")]
    check_replay_tables(ccbench, [c[1] for c in small], [c[2] for c in small], work, failures)

    for f in failures:
        print("MISMATCH", f)
    print("%d traces checked against the reference, %d mismatches" % (len(cases), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
