"""bench/scripts/pytorch_replay.py against stand-ins for torch (no GPU, no PyTorch).

PyTorch's memory_stats() counters ("segment.all.allocated", ...) accumulate
over the process unless reset: each trace's row must count only its own
cudaMalloc calls, however many traces ran before it in the same process.

--expandable and --iterations (below STANDIN): bad values exit 2 before
torch is imported; without torch the script still skips; --expandable sets
PYTORCH_CUDA_ALLOC_CONF before torch reads it; --iterations 3 replays the
trace 3 times in one allocator and reports the first iteration and the later
ones apart, as worked out by hand from the stand-in's rules; without the new
flags the output is what it was."""
import csv
import json
import os
import re
import subprocess
import sys
import types

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "scripts"))

import pytorch_replay as pr  # noqa: E402


class FakeCuda:
    """A caching allocator with no cache: every alloc is a new segment."""

    def __init__(self):
        self.segments = 0   # accumulated, like segment.all.allocated
        self.freed = 0
        self.next_addr = 0x1000
        self.live = {}

    def is_available(self):
        return True

    def default_stream(self, dev):
        return "s0"

    def Stream(self, dev):
        return "s"

    def synchronize(self):
        pass

    def empty_cache(self):
        pass

    def mem_get_info(self, dev):
        return (1 << 30, 1 << 31)

    def reset_peak_memory_stats(self, dev):
        pass

    def reset_accumulated_memory_stats(self, dev):
        self.segments = self.freed = 0

    def memory_stats(self, dev):
        b = sum(self.live.values())
        return {"allocated_bytes.all.peak": max(b, 512), "reserved_bytes.all.peak": max(b, 512),
                "segment.all.allocated": self.segments, "segment.all.freed": self.freed}

    def memory_reserved(self, dev):
        return sum(self.live.values())

    def caching_allocator_alloc(self, size, dev, stream):
        self.segments += 1
        self.next_addr += 4096
        self.live[self.next_addr] = size
        return self.next_addr

    def caching_allocator_delete(self, p):
        self.freed += 1
        del self.live[p]

    def get_device_name(self, dev):
        return "Fake GPU"


def test_each_trace_counts_its_own_upstream_calls(monkeypatch, tmp_path):
    cuda = FakeCuda()
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda, __version__="0.0"))
    paths = []
    for name, n in (("a", 3), ("b", 2)):
        p = tmp_path / (name + ".csv")
        lines = ["seq,op,id,size,stream"]
        lines += ["%d,alloc,%d,1024,0" % (i, i + 1) for i in range(n)]
        lines += ["%d,free,%d,1024,0" % (n + i, i + 1) for i in range(n)]
        p.write_text("\n".join(lines) + "\n")
        paths.append(str(p))
    out = tmp_path / "out.csv"
    monkeypatch.setattr(sys, "argv", ["pytorch_replay.py", "--reps", "1", "--csv", str(out)] + paths)
    pr.main()
    rows = out.read_text().splitlines()
    head = rows[0].split(",")
    got = {r.split(",")[0]: dict(zip(head, r.split(","))) for r in rows[1:]}
    assert got["a"]["upstream_allocs"] == "3" and got["a"]["upstream_frees"] == "3"
    assert got["b"]["upstream_allocs"] == "2" and got["b"]["upstream_frees"] == "2", got["b"]


def test_v3_traces_read_with_their_domain_events_skipped(tmp_path):
    """A v3 file (domain column, domain events) gives the same allocs and
    frees as the v2 file of the same program: PyTorch has no domains."""
    v3 = tmp_path / "v3.csv"
    v3.write_text("# ccalloc trace v3\n"
                  "seq,op,id,size,stream,domain,name\n"
                  "0,domain,0,0,0,1,model a\n"
                  "1,domain_reserve,0,4096,0,1\n"
                  "2,alloc,1,1000,0,1\n"
                  "3,alloc,2,24,1,0\n"
                  "4,mark,0,0,0,0,run\n"
                  "5,free,1,1000,0,1\n"
                  "6,domain_release,0,0,0,1\n"
                  "7,empty_cache,0,0,0,0\n"
                  "8,free,2,24,1,0\n")
    v2 = tmp_path / "v2.csv"
    v2.write_text("seq,op,id,size,stream,name\n"
                  "0,alloc,1,1000,0\n"
                  "1,alloc,2,24,1\n"
                  "2,mark,0,0,0,run\n"
                  "3,free,1,1000,0\n"
                  "4,empty_cache,0,0,0\n"
                  "5,free,2,24,1\n")
    e3, name = pr.read_trace(str(v3))
    e2, _ = pr.read_trace(str(v2))
    assert name == "v3"
    assert e3 == e2
    assert e3 == [("alloc", (0, 1), 1000, 0), ("alloc", (0, 2), 24, 1), ("free", (0, 1), 1000, 0),
                  ("empty_cache", (0, 0), 0, 0), ("free", (0, 2), 24, 1)]


# ---- --expandable and --iterations: a stand-in torch with a cache -------------
#
# STANDIN is the source of a module named torch: exec'd into a module object for
# the tests that call main() in this process, written as torch/__init__.py (found
# first on PYTHONPATH) for the tests that run the script as a fresh process. It
# models only what pytorch_replay.py reads, by rules small enough to work out a
# trace's figures by hand (the tests below do).
STANDIN = r'''
"""A stand-in for torch: torch.cuda as a caching allocator whose figures a
test can work out by hand.
- PYTORCH_CUDA_ALLOC_CONF is read once, at import (PyTorch reads it when its
  CUDA allocator starts: the script must set it before); with
  STANDIN_TORCH_RECORD=FILE the value seen, and at exit the count of
  caching_allocator_alloc calls, are appended to FILE as JSON lines.
- A freed block is cached; an alloc takes a cached block of exactly its size,
  else new memory: with the default configuration a segment of that size
  (segment.all.allocated and num_device_alloc + 1); with
  expandable_segments:True a map of that size into one segment made at the
  first map (num_device_alloc + 1; segment.all.allocated + 1 only then).
- New memory that would take reserved bytes past STANDIN_TORCH_CAPACITY
  (default 1 GiB): the cache is released first (num_alloc_retries + 1), then
  RuntimeError if it still does not fit.
- Releasing a cached block (empty_cache, or before a retry): segment.all.freed
  (default configuration only) and num_device_free + 1.
- Peaks: reset_peak_memory_stats sets them to the current bytes; the counters
  count from reset_accumulated_memory_stats."""
import atexit
import json
import os

__version__ = "0.0-standin"
_CONF = os.environ.get("PYTORCH_CUDA_ALLOC_CONF")
_RECORD = os.environ.get("STANDIN_TORCH_RECORD")


def _note(**what):
    if _RECORD:
        with open(_RECORD, "a") as f:
            f.write(json.dumps(what) + "\n")


class _Cuda:
    def __init__(self, expandable, capacity):
        self.expandable, self.capacity = expandable, capacity
        self.live, self.cache = {}, {}  # address -> size; size -> [address]
        self.next_addr, self.segment_made, self.alloc_calls = 0x1000, False, 0
        self.allocated = self.reserved = self.allocated_peak = self.reserved_peak = 0
        self.reset_accumulated_memory_stats(0)

    def _release(self, addr, size):
        self.reserved -= size
        self.num_device_free += 1
        if not self.expandable:
            self.segment_freed += 1

    def _release_cache(self):
        for size, addrs in self.cache.items():
            for a in addrs:
                self._release(a, size)
        self.cache = {}

    def _new_memory(self, size):
        if self.reserved + size > self.capacity:
            self.num_alloc_retries += 1
            self._release_cache()
            if self.reserved + size > self.capacity:
                raise RuntimeError("CUDA out of memory (stand-in)")
        self.reserved += size
        self.reserved_peak = max(self.reserved_peak, self.reserved)
        self.num_device_alloc += 1
        if not self.expandable or not self.segment_made:
            self.segment_allocated += 1
            self.segment_made = True
        self.next_addr += 1 << 20
        return self.next_addr

    def caching_allocator_alloc(self, size, dev, stream):
        self.alloc_calls += 1
        cached = self.cache.get(size)
        addr = cached.pop() if cached else self._new_memory(size)
        self.live[addr] = size
        self.allocated += size
        self.allocated_peak = max(self.allocated_peak, self.allocated)
        return addr

    def caching_allocator_delete(self, addr):
        size = self.live.pop(addr)
        self.allocated -= size
        self.cache.setdefault(size, []).append(addr)

    def empty_cache(self):
        self._release_cache()

    def memory_stats(self, dev):
        return {"allocated_bytes.all.peak": self.allocated_peak, "reserved_bytes.all.peak": self.reserved_peak,
                "segment.all.allocated": self.segment_allocated, "segment.all.freed": self.segment_freed,
                "num_device_alloc": self.num_device_alloc, "num_device_free": self.num_device_free,
                "num_alloc_retries": self.num_alloc_retries}

    def reset_peak_memory_stats(self, dev):
        self.allocated_peak, self.reserved_peak = self.allocated, self.reserved

    def reset_accumulated_memory_stats(self, dev):
        self.segment_allocated = self.segment_freed = 0
        self.num_device_alloc = self.num_device_free = self.num_alloc_retries = 0

    def memory_reserved(self, dev):
        return self.reserved

    def mem_get_info(self, dev):
        return (self.capacity - self.reserved, self.capacity)

    def is_available(self):
        return True

    def synchronize(self):
        pass

    def default_stream(self, dev):
        return "stream 0"

    def Stream(self, dev):
        return "stream"

    def get_device_name(self, dev):
        return "Stand-in GPU"


cuda = _Cuda("expandable_segments:True" in [kv.strip() for kv in (_CONF or "").split(",")],
             int(os.environ.get("STANDIN_TORCH_CAPACITY", 1 << 30)))
_note(conf=_CONF)
atexit.register(lambda: _note(alloc_calls=cuda.alloc_calls))
'''

SCRIPT = os.path.join(ROOT, "bench", "scripts", "pytorch_replay.py")

# Worked by hand from the stand-in's rules (default configuration, 1 GiB):
#   iteration 1: A new (4000 reserved), freed, empty_cache releases it; B new
#     (1000), freed; C new (1500 reserved), left live: 3 allocs, 1 free, peak 4000.
#   each later one: C freed before it (cached); A new (5500 reserved: no cached
#     block of 4000), freed; empty_cache releases A, B, C; B and C new again:
#     3 allocs, 3 frees, peak 5500.
#   timed: 6 calls in iteration 1 (empty_cache included), 7 in each later one
#     (the free of C before it), 1000 ns each on the test's clock.
STEADY = ("seq,op,id,size,stream\n"
          "0,alloc,1,4000,0\n"
          "1,free,1,4000,0\n"
          "2,empty_cache,0,0,0\n"
          "3,alloc,2,1000,0\n"
          "4,free,2,1000,0\n"
          "5,alloc,3,500,0\n")


def standin_module(monkeypatch):
    """The stand-in as torch in this process (it reads the environment now)."""
    mod = types.ModuleType("torch")
    exec(STANDIN, mod.__dict__)
    monkeypatch.setitem(sys.modules, "torch", mod)
    return mod


def standin_path(tmp_path, source=STANDIN):
    d = tmp_path / "standin"
    (d / "torch").mkdir(parents=True)
    (d / "torch" / "__init__.py").write_text(source)
    return str(d)


def run_script(args, pythonpath, **env):
    e = {k: v for k, v in os.environ.items() if k != "PYTORCH_CUDA_ALLOC_CONF"}
    e.update(PYTHONPATH=pythonpath, PYTHONDONTWRITEBYTECODE="1", **env)
    return subprocess.run([sys.executable, SCRIPT] + args, env=e, capture_output=True, text=True, timeout=60)


def records(path):
    return [json.loads(line) for line in open(path)] if os.path.exists(path) else []


def read_rows(path):
    lines = open(path).read().splitlines()
    head = lines[0].split(",")
    rows = []
    for line in lines[1:]:
        fields = next(csv.reader([line]))
        assert len(fields) == len(head), line
        rows.append(dict(zip(head, fields)))
    return head, rows


def steady_trace(tmp_path):
    p = tmp_path / "steady.csv"
    p.write_text(STEADY)
    return str(p)


def tick_clock(monkeypatch):
    """time.perf_counter_ns advancing 1000 ns a read: every timed call costs 1000 ns."""
    now = [0]

    def clock():
        now[0] += 1000
        return now[0]
    monkeypatch.setattr(pr.time, "perf_counter_ns", clock)


def test_new_flags_parse():
    a = pr.parse_args(["t.csv", "--expandable", "--iterations", "3", "--iterations-csv", "i.csv",
                       "--csv", "r.csv", "--reps", "2"])
    assert (a.expandable, a.iterations, a.iterations_csv, a.csv, a.reps) == (True, 3, "i.csv", "r.csv", 2)
    a = pr.parse_args(["t.csv"])
    assert (a.expandable, a.iterations, a.iterations_csv, a.reps) == (False, 1, None, 3)
    assert pr.parse_args(["t.csv", "--iterations", "100"]).iterations == 100


BAD = [
    (["--iterations", "0"], r"--iterations '0' is not a count in 1\.\.100"),
    (["--iterations", "101"], r"--iterations '101' is not a count in 1\.\.100"),
    (["--iterations", "x"], r"--iterations 'x' is not a count in 1\.\.100"),
    (["--iterations", "+3"], r"--iterations '\+3' is not a count"),
    (["--iterations", " 3"], r"--iterations ' 3' is not a count"),
    (["--iterations", "-1"], r"--iterations '-1' is not a count"),
    (["--iterations", "99999999999999999999999"], r"--iterations '9+' is not a count in 1\.\.100"),
    (["--iterations"], r"argument --iterations: expected one argument"),
    (["--reps", "0"], r"--reps '0' is not a count in 1\.\.1000"),
    (["--iterations-csv", "i.csv"], r"--iterations-csv needs --iterations N with N >= 2"),
    (["--iterations", "1", "--iterations-csv", "i.csv"], r"--iterations-csv needs --iterations N with N >= 2"),
    (["--iterations", "3", "--iterations-csv", ""], r"--iterations-csv needs a file name"),
    (["--iterations", "3", "--csv", "same.csv", "--iterations-csv", "same.csv"], r"name the same file"),
    (["--expandable=yes"], r"argument --expandable: ignored explicit argument 'yes'"),
]


def test_bad_values_exit_2_before_torch(tmp_path):
    """Refused with exit status 2 and the reason, before torch is imported
    (the stand-in records every import) and before any file is written."""
    record = str(tmp_path / "record.jsonl")
    path = standin_path(tmp_path)
    trace = steady_trace(tmp_path)
    for args, message in BAD:
        r = run_script([trace] + args, path, STANDIN_TORCH_RECORD=record)
        assert r.returncode == 2, (args, r.returncode, r.stdout, r.stderr)
        assert re.search(message, r.stderr), (args, r.stderr)
        assert r.stdout == "", (args, r.stdout)
    assert records(record) == []
    assert sorted(os.listdir(tmp_path)) == ["standin", "steady.csv"]


def test_an_output_on_a_trace_exits_2_before_torch(tmp_path):
    """--csv or --iterations-csv that is one of the TRACEs (by its name, a
    symlink or a hard link) is refused with exit 2 before torch is imported:
    the CSV was written over the trace once the replay had read it."""
    record = str(tmp_path / "record.jsonl")
    path = standin_path(tmp_path)
    trace = steady_trace(tmp_path)
    os.symlink("steady.csv", str(tmp_path / "link.csv"))
    os.link(trace, str(tmp_path / "hard.csv"))
    for args, opt, out in ((["--csv", trace], "--csv", trace),
                           (["--csv", str(tmp_path / "link.csv")], "--csv", str(tmp_path / "link.csv")),
                           (["--iterations", "2", "--iterations-csv", str(tmp_path / "hard.csv")], "--iterations-csv",
                            str(tmp_path / "hard.csv"))):
        r = run_script([trace] + args, path, STANDIN_TORCH_RECORD=record)
        assert r.returncode == 2, (args, r.returncode, r.stdout, r.stderr)
        assert "%s '%s' is the trace '%s': it would be written over" % (opt, out, trace) in r.stderr, r.stderr
    assert records(record) == []
    with open(trace) as f:
        assert f.read() == STEADY


def test_without_torch_still_skips(tmp_path):
    """No torch: "skipped: ..." and exit 0 with the new flags too, nothing written."""
    path = standin_path(tmp_path, source='raise ImportError("stand-in: no PyTorch here")\n')
    trace = steady_trace(tmp_path)
    out, it = str(tmp_path / "out.csv"), str(tmp_path / "it.csv")
    for args in ([], ["--expandable"], ["--iterations", "3", "--iterations-csv", it],
                 ["--expandable", "--iterations", "5", "--csv", out, "--iterations-csv", it]):
        r = run_script(args + [trace], path)
        assert r.returncode == 0, (args, r.stderr)
        assert r.stdout.startswith("skipped: PyTorch is not installed"), (args, r.stdout)
    assert not os.path.exists(out) and not os.path.exists(it)


def test_expandable_sets_the_conf_before_torch_starts(tmp_path):
    """The stand-in reads PYTORCH_CUDA_ALLOC_CONF once, at import: --expandable
    must have set it by then; without it the script leaves the variable alone."""
    path = standin_path(tmp_path)
    trace = steady_trace(tmp_path)
    out = str(tmp_path / "out.csv")
    cases = [  # (flags, PYTORCH_CUDA_ALLOC_CONF given, seen by torch, strategy, config)
        (["--expandable"], None, "expandable_segments:True", "pytorch-expandable", "expandable_segments:True"),
        (["--expandable"], "max_split_size_mb:64,expandable_segments:False",
         "max_split_size_mb:64,expandable_segments:True", "pytorch-expandable",
         "max_split_size_mb:64,expandable_segments:True"),
        ([], None, None, "pytorch", "torch 0.0-standin"),
    ]
    for i, (flags, given, seen, strategy, config) in enumerate(cases):
        record = str(tmp_path / ("record%d.jsonl" % i))
        env = {"STANDIN_TORCH_RECORD": record}
        if given:
            env["PYTORCH_CUDA_ALLOC_CONF"] = given
        r = run_script(flags + ["--reps", "1", "--csv", out, trace], path, **env)
        assert r.returncode == 0, r.stderr
        assert records(record)[0] == {"conf": seen}
        _, rows = read_rows(out)
        assert (rows[0]["strategy"], rows[0]["config"]) == (strategy, config)
        assert "| steady | %s |" % strategy in r.stdout
        # the upstream counters of the configuration: a map each (num_device_alloc),
        # not the one expandable segment; without it, segments (classic: the same calls)
        assert (rows[0]["upstream_allocs"], rows[0]["upstream_frees"]) == ("3", "1"), rows[0]
        if flags:
            assert "num_device_alloc/free" in rows[0]["why"] and "torch 0.0-standin" in rows[0]["why"]
    # the caller's own setting without --expandable: used as it is, and said
    record = str(tmp_path / "record-own.jsonl")
    r = run_script([trace], path, STANDIN_TORCH_RECORD=record, PYTORCH_CUDA_ALLOC_CONF="max_split_size_mb:64")
    assert r.returncode == 0 and records(record)[0] == {"conf": "max_split_size_mb:64"}
    assert "PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:64 is set" in r.stderr


def test_expandable_after_torch_was_imported_runs_a_fresh_process(monkeypatch, tmp_path, capfd):
    """torch already imported (the script used as a module): its allocator may
    have read the variable, so the replay runs in a fresh process of the script."""
    here = standin_module(monkeypatch)
    record = str(tmp_path / "record.jsonl")
    monkeypatch.setenv("PYTHONPATH", standin_path(tmp_path))
    monkeypatch.setenv("STANDIN_TORCH_RECORD", record)
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)
    out = str(tmp_path / "out.csv")
    assert pr.main(["--expandable", "--reps", "1", "--csv", out, steady_trace(tmp_path)]) == 0
    assert "PYTORCH_CUDA_ALLOC_CONF" not in os.environ  # this process's is left alone
    assert here.cuda.alloc_calls == 0
    assert records(record) == [{"conf": "expandable_segments:True"}, {"alloc_calls": 3 * 2}]
    assert read_rows(out)[1][0]["strategy"] == "pytorch-expandable"
    assert "| steady | pytorch-expandable |" in capfd.readouterr().out


def ccbench_iterations_header():
    """The header ccbench's iterations.csv has (bench/iterations.c)."""
    src = open(os.path.join(ROOT, "bench", "iterations.c")).read()
    body = src[src.index("void ccb_write_iterations_csv"):]
    call = body[body.index("fprintf(f,"):]
    call = call[:call.index(");")]
    return "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', call)).split("\\n")[0].split(",")


def run_iterations(monkeypatch, tmp_path, flags):
    tick_clock(monkeypatch)
    out, it = str(tmp_path / "out.csv"), str(tmp_path / "it.csv")
    code = pr.main(flags + ["--iterations", "3", "--reps", "2", "--csv", out, "--iterations-csv", it,
                            steady_trace(tmp_path)])
    assert code == 0
    head, iters = read_rows(it)
    assert head == ccbench_iterations_header()
    assert len(iters) == 1
    return read_rows(out)[1][0], iters[0]


def test_iterations_first_and_later(monkeypatch, tmp_path, capfd):
    """--iterations 3: the trace 3 times in one allocator; the first iteration
    and the later ones apart, from the stand-in's counters (worked out above STEADY)."""
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)
    torch = standin_module(monkeypatch)
    row, it = run_iterations(monkeypatch, tmp_path, [])
    # 3 iterations in the observe pass and in each of 2 timed passes, 3 allocs each
    assert torch.cuda.alloc_calls == 3 * 3 * (1 + 2)
    assert it == {"trace": "steady", "strategy": "pytorch", "config": "torch 0.0-standin", "status": "ok",
                  "iterations": "3", "first_peak_reserved": "4000", "later_peak_reserved": "5500",
                  "first_upstream_allocs": "3", "first_upstream_frees": "1",
                  "later_upstream_allocs": "6", "later_upstream_frees": "6",
                  "first_total_ms": "0.006", "later_total_ms": "0.014", "total_ms": "0.020", "driver": "real",
                  "first_driver_total_ms": "0.006", "later_driver_total_ms": "0.014", "driver_total_ms": "0.020",
                  "why": "Stand-in GPU; times include Python call overhead; upstream calls: "
                         "segment.all.allocated/freed (cudaMalloc/cudaFree)"}
    # results.csv: the whole run's figures
    assert (row["ops"], row["allocs"], row["frees"], row["reps"]) == ("18", "9", "6", "2")
    assert (row["peak_reserved"], row["peak_allocated"], row["peak_requested"]) == ("5500", "4000", "4000")
    assert (row["upstream_allocs"], row["upstream_frees"], row["ooms"]) == ("9", "7", "0")
    assert (row["reserved_after_trace"], row["reserved_after_empty"]) == ("1500", "500")
    assert (row["median_ns"], row["total_ms"]) == ("1000.0", "0.020")
    out = capfd.readouterr().out
    assert "| steady | pytorch | 3 | 0.0 MiB | 0.0 MiB | 3+1 | 6+6 | 0.006 | 0.014 | 0.020 |" in out


def test_iterations_expandable_counts_maps(monkeypatch, tmp_path):
    """The same run with expandable segments: upstream calls are maps and
    unmaps (num_device_alloc/free), not the one segment they grow
    (segment.all.allocated = 1)."""
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")  # as main() sets it
    torch = standin_module(monkeypatch)
    assert torch.cuda.expandable
    args = pr.parse_args(["--expandable", "--iterations", "3", "--reps", "2", steady_trace(tmp_path)])
    tick_clock(monkeypatch)
    row, it = pr.replay_trace(torch, args.traces[0], args)
    assert torch.cuda.memory_stats(0)["segment.all.allocated"] == 1
    assert (it["strategy"], it["config"]) == ("pytorch-expandable", '"expandable_segments:True"')
    assert (it["first_upstream_allocs"], it["first_upstream_frees"]) == (3, 1)
    assert (it["later_upstream_allocs"], it["later_upstream_frees"]) == (6, 6)
    assert (it["first_peak_reserved"], it["later_peak_reserved"]) == (4000, 5500)
    assert (row["upstream_allocs"], row["upstream_frees"]) == (9, 7)
    assert "num_device_alloc/free (cudaMalloc+cuMemMap/cudaFree+cuMemUnmap)" in it["why"]


def test_iterations_retries_after_the_first(monkeypatch, tmp_path):
    """A device of 5000 bytes: from iteration 2, A (4000) does not fit beside
    the cached B and C (1500), so the cache is released and the alloc retried:
    the later peak is 4000, not 5500, and the retries are said."""
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)
    monkeypatch.setenv("STANDIN_TORCH_CAPACITY", "5000")
    standin_module(monkeypatch)
    row, it = run_iterations(monkeypatch, tmp_path, [])
    assert (it["first_peak_reserved"], it["later_peak_reserved"]) == ("4000", "4000")
    assert (it["first_upstream_allocs"], it["first_upstream_frees"]) == ("3", "1")
    assert (it["later_upstream_allocs"], it["later_upstream_frees"]) == ("6", "6")
    assert "(num_alloc_retries): 0 in the first iteration, 2 later" in it["why"]
    assert row["ooms"] == "0" and row["peak_reserved"] == "4000"


def test_without_the_new_flags_the_output_is_unchanged(monkeypatch, tmp_path, capfd):
    """No new flag: the rows print as before (strategy pytorch, config "torch
    VERSION", upstream calls from segment.all.*), no iterations table."""
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)
    standin_module(monkeypatch)
    tick_clock(monkeypatch)
    out = str(tmp_path / "out.csv")
    assert pr.main(["--reps", "1", "--csv", out, steady_trace(tmp_path)]) == 0
    text = open(out).read()
    assert text == (",".join(pr.COLUMNS) + "\n"
                    'steady,pytorch,"torch 0.0-standin",ok,6,3,2,1,1000.0,1000.0,0.006,,4000,4000,4000,1.0000,'
                    '1.0000,,3,1,0,1500,500,1073741824,1073741324,0,"Stand-in GPU; times include Python call '
                    'overhead"\n')
    assert capfd.readouterr().out == (
        "| steady | pytorch | 1000.0 | 1000.0 | 0.006 | 0.0 MiB | 0.0 MiB | 1.0000 | — | 3+1 | 0 | 0.0 MiB | "
        "0.0 MiB | 1.00 GiB → 1.00 GiB |\nwrote %s\n" % out)


def test_an_unwritable_csv_exits_1_with_the_reason(monkeypatch, tmp_path, capfd):
    """The replay's tables are printed; the file that cannot be written is
    named with the reason, exit status 1 (an output failure, not bad usage)."""
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)
    standin_module(monkeypatch)
    out = str(tmp_path / "out.csv")
    bad = str(tmp_path / "no-such-dir" / "it.csv")
    assert pr.main(["--iterations", "2", "--reps", "1", "--csv", out, "--iterations-csv", bad,
                    steady_trace(tmp_path)]) == 1
    got = capfd.readouterr()
    assert "pytorch_replay.py: cannot write %s: No such file or directory" % bad in got.err
    assert "wrote " + out in got.out and "| steady | pytorch | 2 |" in got.out
