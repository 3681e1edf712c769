#!/usr/bin/env python3
"""pytorch_replay.py — replay a ccbench trace through PyTorch's CUDA caching
allocator and print the same metrics as ccbench, so PyTorch stands in the
same table.

    python3 bench/scripts/pytorch_replay.py TRACE.csv [TRACE.csv ...] [--csv out.csv] [--reps 3]
            [--expandable] [--iterations N [--iterations-csv iterations.csv]]

Without torch or CUDA it prints "skipped: ..." and exits 0. A bad option
value exits 2 with the reason, as does --csv or --iterations-csv naming
one of the TRACEs (which it would write over); an output file that cannot
be written, 1.

Each alloc is torch.cuda.caching_allocator_alloc(size, device, stream), each
free torch.cuda.caching_allocator_delete(ptr): PyTorch's allocator itself,
no tensor objects. Times are per call from Python (time.perf_counter_ns),
so they include the Python call overhead (~0.3-1 us): compare PyTorch's
memory figures with ccbench's directly, its times only with care. Memory
figures come from torch.cuda.memory_stats(): allocated_bytes.all.peak,
reserved_bytes.all.peak, the upstream counters below; OOMs are the allocs
that raised (RuntimeError); device free from torch.cuda.mem_get_info(). The
CSV has ccbench's results.csv columns in their order, less driver,
driver_median_ns, driver_total_ms, lower_bound, ideal_peak and ratio_ideal;
unknown fields are empty.

One configuration per run, named in the strategy column:
- pytorch: PyTorch's allocator as the process finds it (config column
  "torch VERSION"): its defaults, unless the caller set
  PYTORCH_CUDA_ALLOC_CONF (then a note on stderr says so).
- pytorch-expandable (--expandable): PYTORCH_CUDA_ALLOC_CONF with
  expandable_segments:True, the caller's other settings kept; the config
  column is the value used ("expandable_segments:True" alone). PyTorch
  reads the variable once, when its CUDA allocator starts, so the script
  sets it before `import torch`; if torch was imported before main() ran
  (the script used as a module), the replay runs in a fresh process of this
  script instead. Where the driver lacks virtual memory management PyTorch
  warns on stderr and uses cudaMalloc.

Upstream calls (upstream_allocs, upstream_frees), from memory_stats():
- pytorch: segment.all.allocated / segment.all.freed, one per cudaMalloc /
  cudaFree;
- pytorch-expandable: num_device_alloc / num_device_free, cudaMalloc and
  cuMemMap calls / cudaFree and cuMemUnmap calls (an expandable segment
  grows by maps, which segment.* does not count); empty where this torch
  has no such counters;
- neither counts a cudaMalloc that failed: num_alloc_retries (each one
  followed by a release of the cache and a retry) is given in the why
  column of the iterations table where it is not 0.

--iterations N (1..100, default 1), the program's steady state, as
`ccbench replay --iterations` (docs/benchmarks.md, "Iterations"):
- the trace N times back to back in one process and one allocator, in the
  observe pass and in each timed pass; between iterations the blocks the
  trace left live are freed in trace order (timed as frees), and nothing
  else happens: no empty_cache unless the trace has one;
- --csv then holds the whole run's figures (ops, allocs, frees: N times
  the trace's);
- with N > 1 the first iteration and iterations 2..N together are reported
  apart, as a table on stdout and in --iterations-csv (ccbench's
  iterations.csv columns): peak reserved is reserved_bytes.all.peak at the
  first iteration's end (peaks reset before the trace), then
  reset_peak_memory_stats and the peak at the run's end (so the later one
  starts from the bytes held when iteration 2 starts); upstream calls are
  the counters above at the first iteration's end and what they grew by
  until the run's end (the frees between iterations count as later);
  times are the summed call latencies of iteration 1 and of the rest, each
  the median over the timed passes (first + later need not be the total);
  driver "real": the times include PyTorch's own driver calls, so the
  with-driver columns repeat them.
"""
import argparse
import gzip
import os
import re
import statistics
import subprocess
import sys
import time

from record_torch import same_file  # its neighbour's: one rule for "one file" (no torch imported)

COLUMNS = ("trace,strategy,config,status,ops,allocs,frees,reps,median_ns,p99_ns,total_ms,timer_ns,"
           "peak_requested,peak_allocated,peak_reserved,ratio,ratio_requested,frag_at_peak,upstream_allocs,"
           "upstream_frees,ooms,reserved_after_trace,reserved_after_empty,device_free_before,"
           "device_free_after,checked,why").split(",")
# ccbench's iterations.csv (bench/iterations.c)
ITERATION_COLUMNS = ("trace,strategy,config,status,iterations,first_peak_reserved,later_peak_reserved,"
                     "first_upstream_allocs,first_upstream_frees,later_upstream_allocs,later_upstream_frees,"
                     "first_total_ms,later_total_ms,total_ms,driver,first_driver_total_ms,later_driver_total_ms,"
                     "driver_total_ms,why").split(",")
CONF = "PYTORCH_CUDA_ALLOC_CONF"
MAX_REPS = 1000       # ccbench's --reps range
MAX_ITERATIONS = 100  # ccbench's CCB_MAX_ITERATIONS
# memory_stats() keys of the upstream allocs and frees, by configuration (expandable or not)
UPSTREAM = {False: ("segment.all.allocated", "segment.all.freed"),
            True: ("num_device_alloc", "num_device_free")}
UPSTREAM_WHAT = {False: "segment.all.allocated/freed (cudaMalloc/cudaFree)",
                 True: "num_device_alloc/free (cudaMalloc+cuMemMap/cudaFree+cuMemUnmap)"}


def skipped(why):
    print("skipped: " + why)
    sys.exit(0)


def read_trace(path):
    """(events, name): events are (op, key, size, stream); ids are per section.

    Trace format v3 (docs/benchmarks.md#trace-format), plain or gzip: marks
    are skipped, empty_cache and trim become torch.cuda.empty_cache() (PyTorch
    cannot keep part of its cache); PyTorch's allocator has no domains, so
    every alloc is served from its one cache and the domain events (domain,
    domain_reserve, domain_release) are skipped; v1 and v2 files read the same."""
    events, section = [], -1
    opener = gzip.open if open(path, "rb").read(2) == b"\x1f\x8b" else open
    with opener(path, "rt") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if line in ("seq,op,id,size,stream", "seq,op,id,size,stream,name",
                        "seq,op,id,size,stream,domain,name"):
                section += 1
                continue
            fields = line.split(",")
            op = fields[1]
            if op in ("mark", "domain", "domain_reserve", "domain_release"):
                continue
            _, op, i, size, stream = fields[:5]
            events.append((op, (section, int(i)), int(size), int(stream)))
    name = path.rsplit("/", 1)[-1].replace(".csv.gz", "").replace(".csv", "")
    return events, name


def quantile(v, q):
    v = sorted(v)
    k = max(0, min(len(v) - 1, int(-(-q * len(v) // 1)) - 1))
    return v[k]


def replay(torch, events, streams, timed):
    ptr, lat, req, peak_req, ooms = {}, [], 0, 0, 0
    for op, key, size, s in events:
        if op in ("empty_cache", "trim"):
            t0 = time.perf_counter_ns()
            torch.cuda.empty_cache()
            t1 = time.perf_counter_ns()
        elif op == "alloc":
            t0 = time.perf_counter_ns()
            try:
                p = torch.cuda.caching_allocator_alloc(size, 0, streams[s])
            except RuntimeError:  # torch.OutOfMemoryError is a RuntimeError
                ooms += 1
                continue
            t1 = time.perf_counter_ns()
            ptr[key] = (p, size)
            req += size
            peak_req = max(peak_req, req)
        else:
            if key not in ptr:  # refused (OOM), or a 0-byte block never held
                continue
            p, size = ptr.pop(key)
            t0 = time.perf_counter_ns()
            torch.cuda.caching_allocator_delete(p)
            t1 = time.perf_counter_ns()
            req -= size
        if timed:
            lat.append(t1 - t0)
    return ptr, lat, peak_req, ooms


def free_between(torch, live, timed):
    """Free, before the next iteration, the blocks an iteration left live:
    in trace order (a dict keeps the order of the allocs that made them);
    timed: their latencies, as replay() times a free."""
    lat = []
    for p, _ in live.values():
        if timed:
            t0 = time.perf_counter_ns()
            torch.cuda.caching_allocator_delete(p)
            lat.append(time.perf_counter_ns() - t0)
        else:
            torch.cuda.caching_allocator_delete(p)
    live.clear()
    return lat


def csv_text(s):
    return '"%s"' % str(s).replace('"', '""')


def expandable_conf(conf):
    """PYTORCH_CUDA_ALLOC_CONF with expandable_segments:True in place of any
    expandable_segments setting, the other settings kept in their order."""
    keep = [kv.strip() for kv in conf.split(",")
            if kv.strip() and kv.split(":")[0].strip() != "expandable_segments"]
    return ",".join(keep + ["expandable_segments:True"])


def parse_count(v, hi):
    """v as plain decimal (digits only: no sign, no space) in 1..hi, else None."""
    if not re.fullmatch(r"[0-9]+", v) or len(v.lstrip("0")) > len(str(hi)):
        return None
    n = int(v)
    return n if 1 <= n <= hi else None


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--csv", help="results CSV (ccbench's results.csv columns)")
    ap.add_argument("--reps", default="3", help="timed passes per trace, 1..%d (default 3)" % MAX_REPS)
    ap.add_argument("--expandable", action="store_true",
                    help="replay with PYTORCH_CUDA_ALLOC_CONF expandable_segments:True (strategy pytorch-expandable)")
    ap.add_argument("--iterations", default="1",
                    help="the trace N times back to back in one allocator, 1..%d (default 1); "
                         "N > 1: first and later iterations apart" % MAX_ITERATIONS)
    ap.add_argument("--iterations-csv", help="with --iterations N > 1: ccbench's iterations.csv columns")
    args = ap.parse_args(argv)
    for opt, hi in (("reps", MAX_REPS), ("iterations", MAX_ITERATIONS)):
        n = parse_count(getattr(args, opt), hi)
        if n is None:
            ap.error("--%s '%s' is not a count in 1..%d" % (opt, getattr(args, opt), hi))
        setattr(args, opt, n)
    if args.iterations_csv is not None:
        if not args.iterations_csv:
            ap.error("--iterations-csv needs a file name")
        if args.iterations < 2:
            ap.error("--iterations-csv needs --iterations N with N >= 2 (the first and later iterations apart)")
        if args.csv and same_file(args.csv, args.iterations_csv):
            ap.error("--csv and --iterations-csv name the same file")
    for opt, out in (("--csv", args.csv), ("--iterations-csv", args.iterations_csv)):
        for trace in args.traces if out else ():
            if same_file(out, trace):
                ap.error("%s '%s' is the trace '%s': it would be written over" % (opt, out, trace))
    return args


def replay_trace(torch, path, args):
    """One trace through PyTorch's allocator: (results row, iterations row or None)."""
    n_iter, expandable = args.iterations, args.expandable
    events, name = read_trace(path)
    nstreams = 1 + max((e[3] for e in events), default=0)
    streams = [torch.cuda.default_stream(0)] + [torch.cuda.Stream(0) for _ in range(nstreams - 1)]
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    free_before = torch.cuda.mem_get_info(0)[0]
    torch.cuda.reset_peak_memory_stats(0)
    # the segment counters accumulate over the process: this trace's own
    torch.cuda.reset_accumulated_memory_stats(0)
    # observe pass (memory figures)
    live, _, peak_req, ooms = replay(torch, events, streams, timed=False)
    first = None
    if n_iter > 1:
        first = torch.cuda.memory_stats(0)  # the first iteration's peaks and counts
        torch.cuda.reset_peak_memory_stats(0)  # from here: the later iterations' peaks
        for _ in range(n_iter - 1):
            free_between(torch, live, timed=False)
            live, _, p, o = replay(torch, events, streams, timed=False)
            peak_req, ooms = max(peak_req, p), ooms + o
    st = torch.cuda.memory_stats(0)
    reserved_after = torch.cuda.memory_reserved(0)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    reserved_empty = torch.cuda.memory_reserved(0)
    free_after = torch.cuda.mem_get_info(0)[0]
    for p, _ in live.values():
        torch.cuda.caching_allocator_delete(p)
    # timed passes, each from an empty cache
    lats, totals, firsts = [], [], []
    for _ in range(args.reps):
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        left, total = {}, 0
        for k in range(n_iter):
            lat = free_between(torch, left, timed=True) if k else []
            left, more, _, _ = replay(torch, events, streams, timed=True)
            lat += more
            lats += lat
            total += sum(lat)
            if k == 0:
                firsts.append(total)
        for p, _ in left.values():
            torch.cuda.caching_allocator_delete(p)
        totals.append(total)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    pa = st["allocated_bytes.all.peak"]
    pr = st["reserved_bytes.all.peak"]
    if first is not None:  # the whole run's peaks: the first iteration's or the later ones'
        pa = max(pa, first["allocated_bytes.all.peak"])
        pr = max(pr, first["reserved_bytes.all.peak"])
    ka, kf = UPSTREAM[expandable]
    strategy = "pytorch-expandable" if expandable else "pytorch"
    if expandable:
        config = csv_text(os.environ[CONF])
        why = csv_text("%s; torch %s; times include Python call overhead; upstream calls: %s"
                       % (torch.cuda.get_device_name(0), torch.__version__, UPSTREAM_WHAT[True]))
    else:
        config = '"torch %s"' % torch.__version__
        why = '"%s; times include Python call overhead"' % torch.cuda.get_device_name(0)
    row = {
        "trace": name, "strategy": strategy, "config": config, "status": "ok",
        "ops": len(events) * n_iter, "allocs": sum(e[0] == "alloc" for e in events) * n_iter,
        "frees": sum(e[0] == "free" for e in events) * n_iter, "reps": args.reps,
        "median_ns": "%.1f" % statistics.median(lats) if lats else "",
        "p99_ns": "%.1f" % quantile(lats, 0.99) if lats else "",
        "total_ms": "%.3f" % (statistics.median(totals) / 1e6), "timer_ns": "",
        "peak_requested": peak_req, "peak_allocated": pa, "peak_reserved": pr,
        "ratio": "%.4f" % (pr / pa) if pa else "", "ratio_requested": "%.4f" % (pr / peak_req) if peak_req else "",
        "frag_at_peak": "", "upstream_allocs": st.get(ka, ""),
        "upstream_frees": st.get(kf, ""), "ooms": ooms,
        "reserved_after_trace": reserved_after, "reserved_after_empty": reserved_empty,
        "device_free_before": free_before, "device_free_after": free_after, "checked": 0,
        "why": why,
    }
    if first is None:
        return row, None

    def later(key):  # what a counter grew by after the first iteration
        return st[key] - first[key] if key in st and key in first else ""

    first_ms = "%.3f" % (statistics.median(firsts) / 1e6)
    later_ms = "%.3f" % (statistics.median([t - f for t, f in zip(totals, firsts)]) / 1e6)
    note = "%s; times include Python call overhead; upstream calls: %s" % (torch.cuda.get_device_name(0),
                                                                         UPSTREAM_WHAT[expandable])
    retries = (first.get("num_alloc_retries", 0), later("num_alloc_retries") or 0)
    if any(retries):
        note += "; cudaMalloc failed and was retried after a release of the cache (num_alloc_retries): " \
                "%d in the first iteration, %d later" % retries
    irow = {
        "trace": name, "strategy": strategy, "config": config, "status": "ok", "iterations": n_iter,
        "first_peak_reserved": first["reserved_bytes.all.peak"], "later_peak_reserved": st["reserved_bytes.all.peak"],
        "first_upstream_allocs": first.get(ka, ""), "first_upstream_frees": first.get(kf, ""),
        "later_upstream_allocs": later(ka), "later_upstream_frees": later(kf),
        "first_total_ms": first_ms, "later_total_ms": later_ms, "total_ms": row["total_ms"],
        "driver": "real", "first_driver_total_ms": first_ms, "later_driver_total_ms": later_ms,
        "driver_total_ms": row["total_ms"], "why": csv_text(note),
    }
    return row, irow


def print_row(r):
    print("| %s | %s | %s | %s | %s | %.1f MiB | %.1f MiB | %s | — | %s+%s | %d | %.1f MiB | %.1f MiB | "
          "%.2f GiB → %.2f GiB |" % (r["trace"], r["strategy"], r["median_ns"], r["p99_ns"], r["total_ms"],
                                    r["peak_allocated"] / 2**20, r["peak_reserved"] / 2**20, r["ratio"],
                                    r["upstream_allocs"], r["upstream_frees"], r["ooms"],
                                    r["reserved_after_trace"] / 2**20, r["reserved_after_empty"] / 2**20,
                                    r["device_free_before"] / 2**30, r["device_free_after"] / 2**30))


def fmt_calls(allocs, frees):
    return "%s+%s" % (allocs, frees) if allocs != "" and frees != "" else "—"


def print_iterations(irows):
    """The table of ccbench's iterations.md, for PyTorch's rows."""
    print("\n| trace | strategy | iterations | peak reserved, first | peak reserved, later | upstream allocs+frees, "
          "first | upstream allocs+frees, later | ms with driver, first | ms with driver, later | ms with "
          "driver, total |")
    print("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|")
    for r in irows:
        print("| %s | %s | %d | %.1f MiB | %.1f MiB | %s | %s | %s | %s | %s |"
              % (r["trace"], r["strategy"], r["iterations"], r["first_peak_reserved"] / 2**20,
                 r["later_peak_reserved"] / 2**20, fmt_calls(r["first_upstream_allocs"], r["first_upstream_frees"]),
                 fmt_calls(r["later_upstream_allocs"], r["later_upstream_frees"]), r["first_driver_total_ms"],
                 r["later_driver_total_ms"], r["driver_total_ms"]))


def write_csv(path, columns, rows):
    try:
        with open(path, "w") as f:
            f.write(",".join(columns) + "\n")
            for r in rows:
                f.write(",".join(str(r[c]) for c in columns) + "\n")
    except OSError as e:
        print("pytorch_replay.py: cannot write %s: %s" % (path, e.strerror or e), file=sys.stderr)
        return False
    print("wrote " + path)
    return True


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    if args.expandable:
        conf = expandable_conf(os.environ.get(CONF, ""))
        if "torch" in sys.modules:  # imported before main(): its allocator may have read the variable
            env = dict(os.environ, **{CONF: conf})
            return subprocess.call([sys.executable, os.path.abspath(__file__)] + argv, env=env)
        os.environ[CONF] = conf  # before torch starts its allocator, which reads it once
    elif os.environ.get(CONF):
        print("note: %s=%s is set: the 'pytorch' rows are PyTorch with it, not its defaults"
              % (CONF, os.environ[CONF]), file=sys.stderr)
    try:
        import torch
    except ImportError:
        skipped("PyTorch is not installed")
    if not torch.cuda.is_available():
        skipped("no CUDA device visible to PyTorch")
    rows, irows = [], []
    for path in args.traces:
        row, irow = replay_trace(torch, path, args)
        rows.append(row)
        print_row(row)
        if irow:
            irows.append(irow)
    if irows:
        print_iterations(irows)
    ok = True
    if args.csv:
        ok = write_csv(args.csv, COLUMNS, rows)
    if args.iterations_csv:
        ok = write_csv(args.iterations_csv, ITERATION_COLUMNS, irows) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
