"""Tests of bench/scripts/record_torch.py's pure part (no torch needed):
trace format v2, event ordering, reconstruction and its checks, the CUDA
history conversion; and an independent reader that checks every committed
bench/traces/torch-*.csv.gz.

    python3 -m pytest -q tests/bench/test_record_torch.py
"""
import glob
import gzip
import os
import sys
import types

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "scripts"))

import record_torch as rt  # noqa: E402

E = rt.event


def rebuild(events):
    ordered, ties, reordered = rt.order_events(events)
    return rt.reconstruct(ordered)


def test_module_does_not_import_torch():
    assert "torch" not in sys.modules or sys.modules["torch"] is None


# ---- pairing ---------------------------------------------------------------------

def test_pairs_frees_by_address_and_numbers_blocks():
    rows, s = rebuild([E(1, "alloc", 0xA0, 100), E(2, "alloc", 0xB0, 200), E(3, "free", 0xA0, 100),
                       E(4, "alloc", 0xA0, 50), E(5, "free", 0xB0, 200), E(6, "free", 0xA0, 50)])
    assert rows == [("alloc", 1, 100, 0), ("alloc", 2, 200, 0), ("free", 1, 100, 0),
                    ("alloc", 3, 50, 0), ("free", 2, 200, 0), ("free", 3, 50, 0)]
    assert (s.seen, s.allocs, s.frees, s.written, s.dropped) == (6, 3, 3, 6, 0)
    assert (s.peak_bytes, s.live_blocks, s.live_bytes) == (300, 0, 0)


def test_live_at_end_is_counted():
    rows, s = rebuild([E(1, "alloc", 1, 10), E(2, "alloc", 2, 20), E(3, "free", 1, 10)])
    assert (s.live_blocks, s.live_bytes, s.peak_bytes) == (1, 20, 30)


def test_free_of_unknown_address_is_dropped_and_counted():
    rows, s = rebuild([E(1, "free", 0x99, 4096), E(2, "alloc", 0x10, 8), E(3, "free", 0x10, 8)])
    assert rows == [("alloc", 1, 8, 0), ("free", 1, 8, 0)]
    assert (s.seen, s.written, s.dropped, s.dropped_bytes) == (3, 2, 1, 4096)


def test_alloc_at_live_address_is_an_error():
    with pytest.raises(rt.RecordError, match="live"):
        rebuild([E(1, "alloc", 0x10, 8), E(2, "alloc", 0x10, 8)])


def test_free_with_another_size_is_an_error():
    with pytest.raises(rt.RecordError, match="has 8"):
        rebuild([E(1, "alloc", 0x10, 8), E(2, "free", 0x10, 16)])


def test_zero_byte_alloc_is_a_block_like_any_other():
    rows, s = rebuild([E(1, "alloc", 0x10, 0, total=0), E(2, "alloc", 0x20, 0, total=0),
                       E(3, "free", 0x10, 0, total=0), E(4, "free", 0x20, 0, total=0)])
    assert rows == [("alloc", 1, 0, 0), ("alloc", 2, 0, 0), ("free", 1, 0, 0), ("free", 2, 0, 0)]
    assert s.ok() and s.written == 4
    assert "\n0,alloc,1,0,0\n1,alloc,2,0,0\n" in rt.format_trace([], rows)


def test_streams_are_numbered_by_first_use_default_is_zero():
    rows, s = rebuild([E(1, "alloc", 1, 8, stream=0x7F00), E(2, "alloc", 2, 8, stream=0),
                       E(3, "alloc", 3, 8, stream=0x7E00), E(4, "free", 1, 8, stream=0x7F00)])
    assert [r[3] for r in rows] == [1, 0, 2, 1]
    assert s.streams == 3


def test_more_than_63_streams_is_an_error():
    with pytest.raises(rt.RecordError, match="streams"):
        rebuild([E(i, "alloc", i, 8, stream=1000 + i) for i in range(64)])


# ---- the allocator's running total -----------------------------------------------

def test_totals_agree_including_blocks_live_before_recording():
    # 1000 bytes were live before; one of them (600) is freed while recording
    rows, s = rebuild([E(1, "alloc", 1, 10, total=1010), E(2, "free", 0x77, 600, total=410),
                       E(3, "free", 1, 10, total=400)])
    assert s.ok() and (s.checks, s.mismatches, s.base) == (3, 0, 1000)
    assert s.dropped == 1


def test_total_mismatch_is_detected():
    rows, s = rebuild([E(1, "alloc", 1, 10, total=10), E(2, "alloc", 2, 20, total=30),
                       E(3, "alloc", 3, 5, total=99), E(4, "free", 1, 10, total=89)])
    assert not s.ok()
    assert s.mismatches == 2
    assert "allocator says 99, trace says 35" in s.first_mismatch


def test_a_lost_event_shows_as_a_mismatch():
    # the allocator counted a 64-byte block whose alloc event never arrived
    rows, s = rebuild([E(1, "alloc", 1, 10, total=10), E(2, "alloc", 2, 20, total=94)])
    assert s.mismatches == 1


def test_checkpoints_carry_totals_without_rows():
    rows, s = rebuild([E(0, "check", total=500), E(1, "alloc", 1, 10), E(2, "mark", name="x", total=510),
                       E(3, "free", 1, 10), E(4, "check", total=500)])
    assert rows == [("alloc", 1, 10, 0), ("mark", "x"), ("free", 1, 10, 0)]
    assert s.ok() and s.checks == 3 and s.base == 500


def test_failed_recording_writes_nothing(tmp_path, capsys):
    out = str(tmp_path / "t.csv")
    with pytest.raises(SystemExit) as ex:
        rt.finish([E(1, "alloc", 1, 10, total=10), E(2, "alloc", 2, 10, total=21)], [], out, 0.0)
    assert ex.value.code == 1
    assert not os.path.exists(out)
    with pytest.raises(SystemExit):
        rt.finish([E(1, "alloc", 1, 10), E(2, "alloc", 1, 10)], [], out, 0.0)
    assert not os.path.exists(out)


# ---- ordering, marks, phases -------------------------------------------------------

def test_events_are_ordered_by_time_marks_first_at_equal_time():
    events = [E(30, "free", 1, 8), E(10, "alloc", 1, 8), E(20, "mark", name="infer:x"),
              E(20, "alloc", 2, 4), E(5, "mark", name="load:x"), E(40, "empty_cache")]
    rows, s = rebuild(events)
    assert rows == [("mark", "load:x"), ("alloc", 1, 8, 0), ("mark", "infer:x"), ("alloc", 2, 4, 0),
                    ("free", 1, 8, 0), ("empty_cache",)]
    assert (s.marks, s.empty_caches) == (2, 1)


def test_equal_times_keep_given_order_without_totals():
    ordered, ties, reordered = rt.order_events([E(7, "alloc", 1, 8), E(7, "free", 1, 8)])
    assert [e.op for e in ordered] == ["alloc", "free"] and (ties, reordered) == (1, 0)


def test_equal_times_are_put_in_the_order_the_totals_chain_in():
    # given free-then-alloc at one time stamp, but the totals say alloc came first
    events = [E(1, "alloc", 1, 100, total=100), E(5, "free", 2, 30, total=100),
              E(5, "alloc", 2, 30, total=130), E(6, "free", 1, 100, total=0)]
    ordered, ties, reordered = rt.order_events(events)
    assert [e.op for e in ordered] == ["alloc", "alloc", "free", "free"]
    assert (ties, reordered) == (1, 1)
    rows, s = rt.reconstruct(ordered)
    assert s.ok()


def test_events_recorded_in_a_phase_must_follow_its_mark():
    good = [E(1, "mark", name="load:a"), E(2, "alloc", 1, 8, phase="load:a"), E(3, "free", 1, 8),
            E(4, "mark", name="infer:a"), E(5, "alloc", 2, 8, phase="infer:a")]
    assert rebuild(good)[1].ok()
    # the mark's time stamp came after the first event of its phase
    bad = [E(3, "mark", name="load:a"), E(2, "alloc", 1, 8, phase="load:a")]
    rows, s = rebuild(bad)
    assert s.phase_errors == 1 and not s.ok()
    assert "phase 'load:a' follows mark None" in s.first_phase_error


# ---- format ------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["load:resnet50", "x", "a" * 63, "step 3", "~!#$%&'()*+-./:;<=>?@[\\]^_`{|}"])
def test_valid_mark_names(name):
    assert rt.mark_name_problem(name) is None


@pytest.mark.parametrize("name", ["", "a" * 64, "a,b", 'a"b', "tab\there", "new\nline", "caf\u00e9", "\x7f"])
def test_invalid_mark_names(name):
    assert rt.mark_name_problem(name) is not None
    with pytest.raises(rt.RecordError):
        rt.format_trace([], [("mark", name)])


def test_format_is_exactly_v2():
    text = rt.format_trace(["torch: 2.15.0", "model: m"],
                           [("alloc", 1, 4096, 0), ("free", 1, 4096, 0), ("mark", "load:r"), ("empty_cache",)])
    assert text == ("# ccalloc trace v2\n# torch: 2.15.0\n# model: m\nseq,op,id,size,stream,name\n"
                    "0,alloc,1,4096,0\n1,free,1,4096,0\n2,mark,0,0,0,load:r\n3,empty_cache,0,0,0\n")


def test_provenance_must_be_one_printable_line():
    with pytest.raises(rt.RecordError):
        rt.format_trace(["two\nlines"], [])


def test_gzip_output_is_reproducible(tmp_path):
    text = rt.format_trace(["p"], [("alloc", i, i * 512, 0) for i in range(1, 2000)])
    a, b, plain = str(tmp_path / "a.csv.gz"), str(tmp_path / "sub-b.csv.gz"), str(tmp_path / "c.csv")
    rt.write_trace(a, text)
    rt.write_trace(b, text)
    rt.write_trace(plain, text)
    da, db = open(a, "rb").read(), open(b, "rb").read()
    assert da == db  # no time stamp, no file name in the gzip header
    assert da[4:8] == b"\0\0\0\0"
    assert gzip.decompress(da).decode() == text == open(plain).read()


def test_finish_writes_header_summary_and_rows(tmp_path):
    out = str(tmp_path / "t.csv.gz")
    rt.finish([E(1, "mark", name="load:m"), E(2, "alloc", 5, 10, total=10, phase="load:m"),
               E(3, "free", 5, 10, total=0)], ["torch: test"], out, 1.0)
    lines = gzip.open(out, "rt").read().splitlines()
    assert lines[0] == "# ccalloc trace v2" and lines[1] == "# torch: test"
    assert any(line.startswith("# reconstruction: 2 allocator events seen") for line in lines)
    assert lines[-4:] == ["seq,op,id,size,stream,name", "0,mark,0,0,0,load:m", "1,alloc,1,10,0", "2,free,1,10,0"]


# ---- the CUDA allocator's history ------------------------------------------------------

def test_cuda_history_pairs_completed_frees_and_places_boundaries_by_count():
    S = 0x5555
    entries = [
        {"action": "segment_alloc", "addr": 0x1000, "size": 2 << 20, "stream": 0},
        {"action": "alloc", "addr": 0x1000, "size": 512, "stream": 0, "user_metadata": "ccalloc:load:m"},
        {"action": "alloc", "addr": 0x1200, "size": 1024, "stream": S, "user_metadata": "ccalloc:load:m"},
        {"action": "snapshot", "addr": 0, "size": 0, "stream": 0},
        {"action": "free_requested", "addr": 0x1000, "size": 512, "stream": 0, "user_metadata": "ccalloc:infer:m"},
        {"action": "free_completed", "addr": 0x1000, "size": 512, "stream": 0, "user_metadata": "ccalloc:infer:m"},
        {"action": "free_completed", "addr": 0x9000, "size": 512, "stream": 0},  # allocated before
        {"action": "segment_free", "addr": 0x1000, "size": 2 << 20, "stream": 0},
    ]
    boundaries = [(0, "check", "", 512), (1, "mark", "load:m", 512), (4, "mark", "infer:m", 2048),
                  (7, "empty_cache", "", 1024), (8, "check", "", 1024)]
    events, free_action = rt.cuda_events(entries, boundaries)
    assert free_action == "free_completed"
    rows, s = rebuild(events)
    assert rows == [("mark", "load:m"), ("alloc", 1, 512, 0), ("alloc", 2, 1024, 1), ("mark", "infer:m"),
                    ("free", 1, 512, 0), ("empty_cache",)]
    assert s.ok() and s.dropped == 1 and s.base == 512 and s.checks == 5 and s.streams == 2


def test_cuda_history_without_completed_frees_uses_requested():
    entries = [{"action": "alloc", "addr": 1, "size": 512, "stream": 0},
               {"action": "free_requested", "addr": 1, "size": 512, "stream": 0}]
    events, free_action = rt.cuda_events(entries)
    assert free_action == "free_requested"
    assert rebuild(events)[0] == [("alloc", 1, 512, 0), ("free", 1, 512, 0)]


def test_cuda_history_before_start_is_ignored():
    entries = [{"action": "alloc", "addr": 1, "size": 512, "stream": 0},
               {"action": "alloc", "addr": 2, "size": 1024, "stream": 0},
               {"action": "free_completed", "addr": 1, "size": 512, "stream": 0}]
    events, _ = rt.cuda_events(entries, [(1, "check", "", 512), (2, "mark", "x", 1536)], start=1)
    rows, s = rebuild(events)
    assert rows == [("alloc", 1, 1024, 0), ("mark", "x")] and s.dropped == 1 and s.ok()


def test_convert_a_saved_snapshot(tmp_path):
    import pickle
    snap = {"segments": [], "device_traces": [[], [
        {"action": "alloc", "addr": 16, "size": 1024, "stream": 0},
        {"action": "free_requested", "addr": 16, "size": 1024, "stream": 0},
        {"action": "free_completed", "addr": 16, "size": 1024, "stream": 0}]]}
    src, out = str(tmp_path / "s.pickle"), str(tmp_path / "t.csv")
    with open(src, "wb") as f:
        pickle.dump(snap, f)
    rt.main(["--convert", src, "-o", out])
    text = open(out).read()
    assert "converted from CUDA snapshot s.pickle (device 1)" in text
    assert text.endswith("seq,op,id,size,stream,name\n0,alloc,1,1024,0\n1,free,1,1024,0\n")


def saved_snapshot(tmp_path):
    import pickle
    snap = {"segments": [], "device_traces": [[
        {"action": "alloc", "addr": 16, "size": 1024, "stream": 0},
        {"action": "free_completed", "addr": 16, "size": 1024, "stream": 0}]]}
    src = tmp_path / "s.pickle"
    src.write_bytes(pickle.dumps(snap))
    return src


def test_convert_over_its_own_snapshot_is_refused(tmp_path, capsys):
    """--convert S -o S (or a link to S) replaced the snapshot with the
    trace, exit 0: refused, exit 2, the snapshot kept."""
    src = saved_snapshot(tmp_path)
    before = src.read_bytes()
    os.link(str(src), str(tmp_path / "hard.csv"))
    for out in (str(src), str(tmp_path / "hard.csv")):
        with pytest.raises(SystemExit) as ex:
            rt.main(["--convert", str(src), "-o", out])
        assert ex.value.code == 2
        assert "-o '%s' is the snapshot --convert reads: it would be written over" % out in capsys.readouterr().err
    assert src.read_bytes() == before


@pytest.mark.parametrize("where, why", [("missing/t.csv", "No such file or directory"), ("", "Is a directory")])
def test_an_unwritable_output_is_named_with_the_reason(tmp_path, capsys, where, why):
    """-o that cannot be written: "record_torch: cannot write PATH: REASON",
    exit 1 (a traceback before)."""
    src, out = saved_snapshot(tmp_path), str(tmp_path / where)
    with pytest.raises(SystemExit) as ex:
        rt.main(["--convert", str(src), "-o", out])
    assert ex.value.code == 1
    assert "record_torch: cannot write %s: %s" % (out, why) in capsys.readouterr().err


def test_cuda_without_torch_is_skipped(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    with pytest.raises(SystemExit) as ex:
        rt.main(["--scenario", "bert-infer", "--device", "cuda", "-o", str(tmp_path / "t.csv")])
    assert ex.value.code == 0
    assert capsys.readouterr().out.startswith("skipped: ")


def test_list_needs_no_torch(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)
    rt.main(["--list"])
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert names == list(rt.SCENARIOS) and len(names) >= 6


# ---- the torch-facing glue, driven by stand-ins for torch ----------------------------
# (the CUDA path cannot run without a GPU; these run its code on a fake allocator)

class Node:
    def __init__(self, name="", t=0, children=(), alloc=None, tid=1):
        self.tag = "alloc" if alloc else "op"
        self.name, self.start_time_ns, self.children, self.start_tid = name, t, list(children), tid
        if alloc:
            ptr, size, total, device = alloc
            self.extra_fields = types.SimpleNamespace(ptr=ptr, alloc_size=size, total_allocated=total,
                                                      device=device)


def fake_profile(roots):
    torch = types.SimpleNamespace(_C=types.SimpleNamespace(
        _profiler=types.SimpleNamespace(_EventType=types.SimpleNamespace(Allocation="alloc"))))
    results = types.SimpleNamespace(experimental_event_tree=lambda: roots)
    return torch, types.SimpleNamespace(profiler=types.SimpleNamespace(kineto_results=results))


def test_cpu_event_tree_gives_phases_marks_and_filters_devices():
    roots = [Node(rt.MARK_PREFIX + "load:m", 10, [Node("aten::empty", 11, [Node(t=12, alloc=(0xA, 64, 64, "cpu"))]),
                                                  Node(t=13, alloc=(0xC, 32, 32, "cuda:0"))]),
             Node(t=20, alloc=(0xA, -64, 0, "cpu"), tid=7),
             Node(rt.EMPTY_CACHE_NAME, 30)]
    torch, prof = fake_profile(roots)
    events, notes = rt.cpu_events(torch, prof)
    assert [(e.time, e.op, e.phase) for e in events] == [(10, "mark", None), (12, "alloc", "load:m"),
                                                         (20, "free", None), (30, "empty_cache", None)]
    assert "1: 1, 7: 1" in notes[0] and "1 events of other devices ignored" in notes[0]
    rows, s = rebuild(events)
    assert rows == [("mark", "load:m"), ("alloc", 1, 64, 0), ("free", 1, 64, 0), ("empty_cache",)] and s.ok()


def test_cpu_nested_phases_are_an_error():
    torch, prof = fake_profile([Node(rt.MARK_PREFIX + "a", 1, [Node(rt.MARK_PREFIX + "b", 2)])])
    with pytest.raises(rt.RecordError, match="inside"):
        rt.cpu_events(torch, prof)


class FakeCuda:
    """The parts of torch.cuda record_cuda uses, over a toy allocator history."""

    def __init__(self):
        self.entries, self.allocated, self.requested, self.meta, self.enabled = [], 0, 0, "", None
        self.memory = types.SimpleNamespace(_record_memory_history=self.record, _snapshot=self.snapshot,
                                            _set_memory_metadata=self.set_meta)

    def record(self, enabled="all", context="all", stacks="all", max_entries=0, clear_history=False):
        self.enabled = enabled
        if clear_history:
            self.entries.clear()

    def snapshot(self):
        self.entries.append({"action": "snapshot", "addr": 0, "size": 0, "stream": 0})
        return {"device_traces": [[], list(self.entries)], "segments": []}

    def set_meta(self, m):
        self.meta = m

    def alloc(self, addr, size, stream=0):
        # as PyTorch: the history holds the size requested, memory_allocated()
        # counts blocks rounded up to 512 B, requested_bytes the requests
        self.entries.append({"action": "alloc", "addr": addr, "size": size, "stream": stream,
                             "user_metadata": self.meta})
        self.allocated += -(-size // 512) * 512
        self.requested += size

    def free(self, addr, size, stream=0):
        for action in ("free_requested", "free_completed"):
            self.entries.append({"action": action, "addr": addr, "size": size, "stream": stream,
                                 "user_metadata": self.meta})
        self.allocated -= -(-size // 512) * 512
        self.requested -= size

    def empty_cache(self):
        self.entries.append({"action": "segment_free", "addr": 0, "size": 1 << 21, "stream": 0})

    def synchronize(self):
        pass

    def current_device(self):
        return 1

    def memory_allocated(self):
        return self.allocated

    def memory_stats(self):
        return {"allocated_bytes.all.current": self.allocated, "requested_bytes.all.current": self.requested}

    def get_device_name(self, dev):
        return "Fake GPU"


def test_record_cuda_on_a_fake_allocator(monkeypatch, tmp_path):
    cuda = FakeCuda()
    cuda.alloc(0x100, 512)  # live before recording: its free is dropped
    cuda.alloc(0x300, 512)
    cuda.free(0x300, 512)  # history before recording: cleared
    torch = types.SimpleNamespace(cuda=cuda, __version__="0.0", version=types.SimpleNamespace(cuda="13.0"),
                                  manual_seed=lambda s: None)

    def scenario(torch, rec, seed):
        with rec.phase("load:m"):
            cuda.alloc(0x200, 1000)  # live across phase boundaries, unrounded
        with rec.phase("infer:m"):
            cuda.alloc(0x400, 100, stream=0xBEEF)  # unrounded, as PyTorch's history
            cuda.free(0x400, 100, stream=0xBEEF)
            cuda.free(0x100, 512)
        rec.empty_cache()
        with rec.phase("unload:m"):
            cuda.free(0x200, 1000)
        return ["model: fake"]

    monkeypatch.setitem(rt.SCENARIOS, "fake", (scenario, "a fake"))
    out = str(tmp_path / "t.csv")
    rt.record_cuda(torch, "fake", 0, out)
    assert cuda.enabled is None  # history switched off again
    text = open(out).read()
    assert "# device: cuda: Fake GPU\n" in text and "# model: fake\n" in text
    assert "frees dropped (512 bytes" in text and "allocator total agreed 6/6 times" in text
    assert text.split("seq,op,id,size,stream,name\n")[1] == (
        "0,mark,0,0,0,load:m\n1,alloc,1,1000,0\n2,mark,0,0,0,infer:m\n3,alloc,2,100,1\n4,free,2,100,1\n"
        "5,empty_cache,0,0,0\n6,mark,0,0,0,unload:m\n7,free,1,1000,0\n")


# ---- the committed traces, read by an independent reader ---------------------------

def read_v2(path):
    """Check one v2 trace the way bench/trace.c is specified to; returns counts."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    assert data.endswith(b"\n") and b"\r" not in data
    lines = data.decode("ascii").split("\n")[:-1]
    assert lines[0] == "# ccalloc trace v2"
    k = 1
    while lines[k].startswith("# "):
        k += 1
    assert lines[k] == "seq,op,id,size,stream,name"
    live, n = {}, {"alloc": 0, "free": 0, "mark": 0, "empty_cache": 0, "peak": 0}
    live_bytes = 0
    for seq, line in enumerate(lines[k + 1:]):
        assert line == line.strip() and line, line
        f = line.split(",")
        assert f[0] == str(seq)
        op = f[1]
        if op == "mark":
            assert len(f) == 6 and f[2:5] == ["0", "0", "0"] and 1 <= len(f[5]) <= 63
            assert all(0x20 <= ord(c) <= 0x7E and c != '"' for c in f[5])
        else:
            assert len(f) == 5
            i, size, stream = int(f[2]), int(f[3]), int(f[4])
            assert all(str(int(x)) == x for x in f[2:5])
            if op == "alloc":
                assert 0 < i < 2 ** 40 and size >= 0 and 0 <= stream <= 63 and i not in live
                live[i] = (size, stream)
                live_bytes += size
                n["peak"] = max(n["peak"], live_bytes)
            elif op == "free":
                assert live.pop(i) == (size, stream)
                live_bytes -= size
            else:
                assert op in ("empty_cache", "trim") and i == 0 and stream == 0
        n[op] = n.get(op, 0) + 1
    n["live"] = len(live)
    return n


TRACES = sorted(glob.glob(os.path.join(ROOT, "bench", "traces", "torch-*.csv.gz")))


@pytest.mark.parametrize("path", TRACES, ids=[os.path.basename(p) for p in TRACES])
def test_committed_trace_is_valid_v2(path):
    n = read_v2(path)
    assert n["alloc"] > 0 and n["mark"] > 0
    header = gzip.open(path, "rt").read().split("\nseq,")[0]
    assert "live at end: %d blocks" % n["live"] in header
    assert "peak live: %d bytes" % n["peak"] in header


# ---- the command line's numbers ------------------------------------------------------

@pytest.mark.parametrize("option,bad", [(o, b) for o in ("--seed", "--threads")
                                        for b in ("", "-1", "+5", " 5", "5 ", "5x", "0x10", "1e3", "1.5", "1_000",
                                                  "\u0663", "nan")]
                         + [("--seed", "18446744073709551616"), ("--threads", "0"), ("--threads", "1025"),
                            ("--seed", "9" * 5000), ("--threads", "9" * 5000)])
def test_numbers_outside_their_grammar_are_refused_before_torch(option, bad, capsys):
    """--seed and --threads were int(): "1_000", "+5", " 5" and Arabic-Indic
    digits were taken, and a seed past 2**64 - 1 or 0 threads failed in
    torch after the model was built (a traceback). Each is plain decimal in
    its range (--seed 0..2**64-1, --threads 1..1024), refused by argparse
    (exit 2) naming the option and the text, before torch is imported."""
    with pytest.raises(SystemExit) as ex:
        rt.main(["--scenario", "resnet50-infer", option, bad, "-o", "/nonexistent/t.csv"])
    assert ex.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}: '{bad}' is not " in err, err
    assert "torch" not in sys.modules or sys.modules["torch"] is None


def test_numbers_of_any_length_are_read_whole():
    """A number of more digits than Python's int() takes from a string
    (4300: a 5000-digit one raised ValueError, which argparse words as
    "invalid parse value") is refused in the option's own words above, and
    leading zeros of any length are still the number they pad."""
    assert rt.whole_number(1, 1024)("0" * 5000 + "7") == 7
    assert rt.whole_number(0, 2**64 - 1)("0" * 5000) == 0
