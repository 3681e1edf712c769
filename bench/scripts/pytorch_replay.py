#!/usr/bin/env python3
"""pytorch_replay.py — replay a ccbench trace through PyTorch's CUDA caching
allocator and print the same metrics as ccbench, so PyTorch stands in the
same table.

    python3 bench/scripts/pytorch_replay.py TRACE.csv [TRACE.csv ...] [--csv out.csv] [--reps 3]

Without torch or CUDA it prints "skipped: ..." and exits 0.

Each alloc is torch.cuda.caching_allocator_alloc(size, device, stream), each
free torch.cuda.caching_allocator_delete(ptr): PyTorch's allocator itself,
no tensor objects. Times are per call from Python (time.perf_counter_ns),
so they include the Python call overhead (~0.3-1 us): compare PyTorch's
memory figures with ccbench's directly, its times only with care. Memory
figures come from torch.cuda.memory_stats(): allocated_bytes.all.peak,
reserved_bytes.all.peak, segment.all.allocated/freed (cudaMalloc/cudaFree
calls), num_ooms; device free from torch.cuda.mem_get_info(). The CSV has
ccbench's results.csv columns; unknown fields are empty.
"""
import argparse
import gzip
import statistics
import sys
import time

COLUMNS = ("trace,strategy,config,status,ops,allocs,frees,reps,median_ns,p99_ns,total_ms,timer_ns,"
           "peak_requested,peak_allocated,peak_reserved,ratio,ratio_requested,frag_at_peak,upstream_allocs,"
           "upstream_frees,ooms,reserved_after_trace,reserved_after_empty,device_free_before,"
           "device_free_after,checked,why").split(",")


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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--csv")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        skipped("PyTorch is not installed")
    if not torch.cuda.is_available():
        skipped("no CUDA device visible to PyTorch")
    rows = []
    for path in args.traces:
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
        st = torch.cuda.memory_stats(0)
        reserved_after = torch.cuda.memory_reserved(0)
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        reserved_empty = torch.cuda.memory_reserved(0)
        free_after = torch.cuda.mem_get_info(0)[0]
        for p, _ in live.values():
            torch.cuda.caching_allocator_delete(p)
        # timed passes, each from an empty cache
        lats, totals = [], []
        for _ in range(args.reps):
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            left, lat, _, _ = replay(torch, events, streams, timed=True)
            for p, _ in left.values():
                torch.cuda.caching_allocator_delete(p)
            lats += lat
            totals.append(sum(lat))
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        pa = st["allocated_bytes.all.peak"]
        pr = st["reserved_bytes.all.peak"]
        row = {
            "trace": name, "strategy": "pytorch", "config": '"torch %s"' % torch.__version__, "status": "ok",
            "ops": len(events), "allocs": sum(e[0] == "alloc" for e in events),
            "frees": sum(e[0] == "free" for e in events), "reps": args.reps,
            "median_ns": "%.1f" % statistics.median(lats) if lats else "",
            "p99_ns": "%.1f" % quantile(lats, 0.99) if lats else "",
            "total_ms": "%.3f" % (statistics.median(totals) / 1e6), "timer_ns": "",
            "peak_requested": peak_req, "peak_allocated": pa, "peak_reserved": pr,
            "ratio": "%.4f" % (pr / pa) if pa else "", "ratio_requested": "%.4f" % (pr / peak_req) if peak_req else "",
            "frag_at_peak": "", "upstream_allocs": st.get("segment.all.allocated", ""),
            "upstream_frees": st.get("segment.all.freed", ""), "ooms": ooms,
            "reserved_after_trace": reserved_after, "reserved_after_empty": reserved_empty,
            "device_free_before": free_before, "device_free_after": free_after, "checked": 0,
            "why": '"%s; times include Python call overhead"' % torch.cuda.get_device_name(0),
        }
        rows.append(row)
        print("| %s | pytorch | %s | %s | %s | %.1f MiB | %.1f MiB | %s | — | %s+%s | %d | %.1f MiB | %.1f MiB | "
              "%.2f GiB → %.2f GiB |" % (name, row["median_ns"], row["p99_ns"], row["total_ms"], pa / 2**20,
                                        pr / 2**20, row["ratio"], row["upstream_allocs"], row["upstream_frees"],
                                        ooms, reserved_after / 2**20, reserved_empty / 2**20, free_before / 2**30,
                                        free_after / 2**30))
    if args.csv:
        with open(args.csv, "w") as f:
            f.write(",".join(COLUMNS) + "\n")
            for r in rows:
                f.write(",".join(str(r[c]) for c in COLUMNS) + "\n")
        print("wrote " + args.csv)


if __name__ == "__main__":
    main()
