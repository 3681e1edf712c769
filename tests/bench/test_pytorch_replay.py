"""bench/scripts/pytorch_replay.py against a stand-in for torch.cuda.

PyTorch's memory_stats() counters ("segment.all.allocated", ...) accumulate
over the process unless reset: each trace's row must count only its own
cudaMalloc calls, however many traces ran before it in the same process."""
import os
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
