"""cca_write_snapshot_torch (allocator/src/observe/snapshot_torch.c) and
ccrun --snapshot FILE.pickle, checked against what PyTorch's tools read.

(a) Always (no torch needed): the pickles written by tests/
    snapshot_torch_writer.c and by ccrun load with the standard library's
    pickle; every field torch.cuda._memory_viz and the memory_viz web page
    read is there with its type; blocks tile their segments; the sums equal
    the JSON snapshot's stats exactly; each segment and block equals the
    JSON snapshot's; and the device trace replays (a port of MemoryViz.js's
    simulate_memory, the web viewer's own replay) without losing a block.
(b) Where torch is importable: _memory_viz's stats (segsum), trace,
    segments, memory, compare, trace_plot and segment_plot run on them.

CTest (tests/allocator/snapshot_torch.cmake) sets CCA_SNAPSHOT_WRITER and CCA_CCRUN to
the programs it built; run by hand, set them (a test needing one that is
not set is skipped with a message).
"""
from __future__ import annotations

import json
import os
import pickle
import subprocess
import threading

import pytest

SEGMENT_KEYS = {
    "device", "address", "total_size", "allocated_size", "active_size", "requested_size", "stream",
    "segment_type", "segment_pool_id", "is_expandable", "frames", "blocks",
}
BLOCK_KEYS = {"address", "size", "requested_size", "state", "frames"}
EVENT_KEYS = {"action", "size", "stream", "time_us", "frames"}  # + addr, or device_free for oom
ACTIONS = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map",
           "segment_unmap", "oom"}
SETTINGS = {
    "PYTORCH_CUDA_ALLOC_CONF": str, "max_split_size": int, "garbage_collection_threshold": float,
    "expandable_segments": bool, "pinned_num_register_threads": int, "release_lock_on_cudamalloc": bool,
    "pinned_use_cuda_host_register": bool, "roundup_power2_divisions": dict,
}
STATES = {"live": "active_allocated", "pending": "active_pending_free", "free": "inactive"}


def program(var):
    path = os.environ.get(var)
    if not path:
        pytest.skip(f"{var} is not set (CTest sets it: tests/allocator/snapshot_torch.cmake)")
    return path


def write(tmp_path, kind, device=0):
    out = tmp_path / kind
    subprocess.run([program("CCA_SNAPSHOT_WRITER"), kind, str(device), str(out)], check=True)
    with open(f"{out}.pickle", "rb") as f:
        snap = pickle.load(f)
    with open(f"{out}-after.pickle", "rb") as f:
        after = pickle.load(f)
    with open(f"{out}.json") as f:
        js = json.load(f)
    return snap, after, js


# ---- (a) structure, numbers, replay -------------------------------------------------


def check_structure(snap, device):
    assert set(snap) == {"segments", "device_traces", "allocator_settings", "ccalloc"}
    assert isinstance(snap["segments"], list)
    addresses = [s["address"] for s in snap["segments"]]
    assert addresses == sorted(addresses), "segments in address order"
    for seg in snap["segments"]:
        assert set(seg) == SEGMENT_KEYS, seg.keys()
        assert seg["device"] == device
        assert seg["segment_type"] in ("small", "large")
        assert isinstance(seg["segment_pool_id"], tuple) and len(seg["segment_pool_id"]) == 2
        assert isinstance(seg["is_expandable"], bool) and isinstance(seg["stream"], int)
        assert seg["frames"] == []
        addr, allocated, active, requested = seg["address"], 0, 0, 0
        for b in seg["blocks"]:
            assert set(b) == BLOCK_KEYS, b.keys()
            assert b["address"] == addr, "blocks tile the segment"
            assert b["size"] > 0 and b["frames"] == []
            assert b["state"] in STATES.values()
            if b["state"] == "inactive":
                assert b["requested_size"] == 0
            else:
                assert 0 < b["requested_size"] <= b["size"]
                active += b["size"]
                requested += b["requested_size"]
                if b["state"] == "active_allocated":
                    allocated += b["size"]
            addr += b["size"]
        assert addr == seg["address"] + seg["total_size"], "the blocks' sizes sum to total_size"
        assert (seg["allocated_size"], seg["active_size"], seg["requested_size"]) == (allocated, active, requested)
    traces = snap["device_traces"]
    assert len(traces) == device + 1 and all(t == [] for t in traces[:device])
    last = 0
    for e in traces[device]:
        assert e["action"] in ACTIONS
        assert set(e) == EVENT_KEYS | {"device_free" if e["action"] == "oom" else "addr"}, e
        assert e["frames"] == [] and e["time_us"] >= last
        last = e["time_us"]
    settings = snap["allocator_settings"]
    assert set(settings) == set(SETTINGS)
    for k, t in SETTINGS.items():
        assert type(settings[k]) is t, (k, settings[k])


def replay(snap, device):
    """MemoryViz.js (torch/utils/viz): annotate_snapshot's free_requested +
    free_completed elision, then simulate_memory from the last event back
    to each earlier one; at every step each live block must lie in a
    segment (the viewer dereferences find_segment(b.addr)), and each
    free_requested must find its block. Returns the number of steps."""
    events = []
    for t in snap["device_traces"][device]:
        t = dict(t)
        if t["action"] == "free_completed" and events and events[-1]["action"] == "free_requested" \
                and events[-1]["addr"] == t["addr"]:
            events[-1]["action"] = "free"
            continue
        events.append(t)
    segs0 = [[s["address"], s["total_size"], s["stream"]] for s in snap["segments"] if s["device"] == device]
    blocks0 = {}
    for s in snap["segments"]:
        for b in s["blocks"]:
            if b["state"] != "inactive":
                blocks0[b["address"]] = [b["size"], b["state"] == "active_pending_free"]

    def map_segment(segs, merge, addr, size, stream):
        segs.append([addr, size, stream])
        segs.sort()
        if merge:
            i = segs.index([addr, size, stream])
            if i + 1 < len(segs) and addr + size == segs[i + 1][0] and stream == segs[i + 1][2]:
                segs[i][1] += segs.pop(i + 1)[1]
            if i > 0 and segs[i - 1][0] + segs[i - 1][1] == addr and segs[i - 1][2] == stream:
                segs[i - 1][1] += segs.pop(i)[1]

    def unmap_segment(segs, merge, addr, size):
        if not merge:
            segs.remove(next(s for s in segs if s[0] == addr))
            return
        s = next(s for s in segs if s[0] <= addr and addr + size <= s[0] + s[1])
        end = s[0] + s[1]
        if s[0] == addr:
            s[0] += size
            s[1] -= size
            if s[1] == 0:
                segs.remove(s)
        elif end == addr + size:
            s[1] -= size
        else:
            s[1] = addr - s[0]
            segs.append([addr + size, end - addr - size, s[2]])

    for idx in range(len(events) - 1, -2, -1):
        segs = [list(s) for s in segs0]
        blocks = {k: list(v) for k, v in blocks0.items()}
        for e in reversed(events[idx + 1:]):
            a = e["action"]
            if a in ("free", "free_completed"):
                blocks[e["addr"]] = [e["size"], a == "free_completed"]
            elif a == "free_requested":
                assert e["addr"] in blocks, f"free_requested of {e['addr']:#x}: no such block in the replay"
                blocks[e["addr"]][1] = False
            elif a == "alloc":
                blocks.pop(e["addr"], None)
            elif a in ("segment_free", "segment_unmap"):
                map_segment(segs, a == "segment_unmap", e["addr"], e["size"], e["stream"])
            elif a in ("segment_alloc", "segment_map"):
                unmap_segment(segs, a == "segment_map", e["addr"], e["size"])
        for addr, (size, _) in blocks.items():
            assert any(s[0] <= addr < s[0] + s[1] for s in segs), \
                f"at event {idx}: block {addr:#x} ({size} B) lies in no segment"
    return len(events)


def json_segments(js):
    """The JSON snapshot's segments as PyTorch's: classic whole, expandable
    one per mapped run (free blocks cut at the run's ends)."""
    out = []
    for s in js["segments"]:
        base = int(s["address"], 16)
        runs = [(base + o, n) for o, n in s["mapped"]] if s.get("expandable") else [(base, s["size"])]
        for lo, n in runs:
            blocks = []
            for b in s["blocks"]:
                start, end = max(base + b["offset"], lo), min(base + b["offset"] + b["size"], lo + n)
                if start < end:
                    blocks.append((start, end - start, STATES[b["state"]], b["requested"]))
            out.append({"address": lo, "total_size": n, "is_expandable": bool(s.get("expandable")),
                        "segment_type": "small" if s["pool"] == "small" else "large",
                        "stream": int(s["stream"], 16) if s["stream"] not in ("(nil)", "0x0") else 0,
                        "blocks": blocks})
    return sorted(out, key=lambda s: s["address"])


@pytest.mark.parametrize("kind", ["classic", "expandable"])
def test_structure_and_numbers_match_the_json_snapshot(tmp_path, kind):
    snap, after, js = write(tmp_path, kind)
    check_structure(snap, 0)
    check_structure(after, 0)
    st = js["stats"]
    segs = snap["segments"]
    blocks = [b for s in segs for b in s["blocks"]]
    assert sum(s["total_size"] for s in segs) == st["reserved_bytes"]
    assert sum(s["active_size"] for s in segs) == st["allocated_bytes"]
    pending = [b for b in blocks if b["state"] == "active_pending_free"]
    assert len(pending) == st["pending_blocks"] == 1, "the script leaves one pending free"
    assert sum(s["allocated_size"] for s in segs) == st["allocated_bytes"] - sum(b["size"] for b in pending)
    live = [b for b in blocks if b["state"] == "active_allocated"]
    assert len(live) + len(pending) == st["active_blocks"]
    assert sum(b["requested_size"] for b in live) == st["requested_bytes"]
    assert sum(b["size"] for b in blocks if b["state"] == "inactive") == \
        (st["cached_bytes"] if kind == "classic" else st["reserved_bytes"] - st["allocated_bytes"])
    # segment by segment, block by block, the JSON snapshot's state
    want = json_segments(js)
    got = [{"address": s["address"], "total_size": s["total_size"], "is_expandable": s["is_expandable"],
            "segment_type": s["segment_type"], "stream": s["stream"],
            "blocks": [(b["address"], b["size"], b["state"], b["requested_size"]) for b in s["blocks"]]}
           for s in segs]
    assert got == want
    assert {s["segment_type"] for s in segs} == {"small", "large"}
    assert {s["stream"] for s in segs} >= {0, 0x1000}
    assert {s["segment_pool_id"] for s in segs} == {(0, 0), (0, 1)}, "the default domain and 'model'"
    assert all(s["is_expandable"] == (kind == "expandable") for s in segs)
    if kind == "expandable":
        assert len(segs) > len(js["segments"]), "a trimmed segment shows as several mapped runs"
    settings = snap["allocator_settings"]
    assert settings["expandable_segments"] == (kind == "expandable")
    assert "history:4K" in settings["PYTORCH_CUDA_ALLOC_CONF"]
    assert settings["max_split_size"] == -1
    assert snap["ccalloc"]["upstream"] == "host-held-events" and snap["ccalloc"]["policy"] == "growth"
    # the trace: every kind the script causes, the OOM with the device's free bytes
    trace = snap["device_traces"][0]
    assert snap["ccalloc"]["history_recorded"] == len(trace)
    actions = {e["action"] for e in trace}
    assert actions >= {"alloc", "free_requested", "free_completed", "oom"}
    assert actions >= ({"segment_map", "segment_unmap"} if kind == "expandable" else {"segment_alloc"})
    oom = [e for e in trace if e["action"] == "oom"]
    assert len(oom) == 1 and oom[0]["size"] == 1024 * 1024 * 1024 and oom[0]["stream"] == 0x1000
    assert 0 < oom[0]["device_free"] <= 512 * 1024 * 1024
    pend = pending[0]
    requested = [e for e in trace if e["action"] == "free_requested" and e["addr"] == pend["address"]]
    assert requested and requested[-1] == {**requested[-1], "size": pend["requested_size"], "stream": 0x1000}
    assert not [e for e in trace if e["action"] == "free_completed" and e["addr"] == pend["address"]
                and e["time_us"] >= requested[-1]["time_us"] and trace.index(e) > trace.index(requested[-1])]
    # the free completes in the later snapshot
    later = after["device_traces"][0]
    assert any(e["action"] == "free_completed" and e["addr"] == pend["address"] for e in later[len(trace):])
    assert replay(snap, 0) > 10
    assert replay(after, 0) > 10


def test_device_number_places_the_trace(tmp_path):
    snap, _, _ = write(tmp_path, "classic", device=2)
    check_structure(snap, 2)
    assert len(snap["device_traces"]) == 3 and snap["device_traces"][2]
    assert replay(snap, 2) > 10


def run_ccrun(tmp_path, *extra):
    out = tmp_path / "run.pickle"
    subprocess.run([program("CCA_CCRUN"), "--device", "host", "--snapshot", str(out), *extra,
                    "mlp:64x256x10:relu:softmax", "mlp:32x128x128x10"], check=True, stdout=subprocess.DEVNULL)
    with open(out, "rb") as f:
        return pickle.load(f)


@pytest.mark.parametrize("conf", [[], ["--conf", "expandable:0"]])  # the defaults (expandable), classic
def test_ccrun_snapshot_pickle(tmp_path, conf):
    snap = run_ccrun(tmp_path, *conf)
    check_structure(snap, 0)
    segs = snap["segments"]
    assert segs, "taken with the last model still loaded"
    assert sum(b["requested_size"] for s in segs for b in s["blocks"] if b["state"] == "active_allocated") > 0
    assert "history:64K" in snap["allocator_settings"]["PYTORCH_CUDA_ALLOC_CONF"]
    trace = snap["device_traces"][0]
    assert trace and snap["ccalloc"]["history_recorded"] == len(trace), "both models' events, nothing dropped"
    assert replay(snap, 0) > 10


# The opcodes the memory_viz web page's own unpickler (MemoryViz.js,
# unpickle()) decodes; any other one makes it throw "UNKNOWN OPCODE" and
# show nothing. Its LONG1 reads up to 8 bytes as a Number and more as a
# BigInt, which its address arithmetic cannot mix with Numbers.
VIEWER_OPCODES = {
    "PROTO", "APPEND", "APPENDS", "LIST", "TUPLE", "NEWFALSE", "NEWTRUE", "NONE", "BINGET", "BININT",
    "BININT1", "BININT2", "EMPTY_DICT", "EMPTY_LIST", "FRAME", "LONG1", "LONG_BINGET", "MARK", "MEMOIZE",
    "BINPUT", "LONG_BINPUT", "SETITEMS", "SETITEM", "DICT", "SHORT_BINUNICODE", "BINUNICODE", "STOP",
    "EMPTY_TUPLE", "TUPLE1", "TUPLE2", "TUPLE3", "BINFLOAT",
}


def check_viewer_opcodes(data):
    import pickletools

    seen = set()
    for op, arg, _pos in pickletools.genops(data):
        assert op.name in VIEWER_OPCODES, f"{op.name}: the web viewer cannot decode it"
        if op.name == "PROTO":
            assert 2 <= arg <= 4, "the web viewer reads protocols 2 to 4"
        if op.name == "LONG1":
            assert -(2**63) <= arg < 2**63, "more than 8 bytes: a BigInt in the web viewer"
        seen.add(op.name)
    assert {"PROTO", "EMPTY_DICT", "SETITEMS", "BINUNICODE", "STOP"} <= seen


@pytest.mark.parametrize("kind", ["classic", "expandable"])
def test_pickle_opcodes_are_the_web_viewers(tmp_path, kind):
    write(tmp_path, kind)
    for name in (kind, f"{kind}-after"):
        check_viewer_opcodes((tmp_path / f"{name}.pickle").read_bytes())
    run_ccrun(tmp_path, "--conf", "expandable:1" if kind == "expandable" else "expandable:0,small_pool:1")
    check_viewer_opcodes((tmp_path / "run.pickle").read_bytes())


def test_ccrun_snapshot_refuses_other_suffixes(tmp_path):
    r = subprocess.run([program("CCA_CCRUN"), "--snapshot", str(tmp_path / "x.txt"), "mlp:4x4"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "must end in .pickle" in r.stderr


def test_ccrun_snapshot_to_paths_that_are_not_files(tmp_path):
    """A directory or a device that is full: exit 1 with the path and the
    reason. A FIFO nobody reads: refused at once, as CCALLOC_TRACE refuses
    one (opening it for writing would wait for a reader, for ever); a FIFO
    with a reader gets the pickle. (A hang fails by the timeout.)"""
    ccrun = program("CCA_CCRUN")

    def run(path):
        return subprocess.run([ccrun, "--device", "host", "--snapshot", str(path), "mlp:16x16:relu"],
                              capture_output=True, text=True, timeout=60)

    (tmp_path / "d.pickle").mkdir()
    r = run(tmp_path / "d.pickle")
    assert r.returncode == 1 and f"--snapshot {tmp_path}/d.pickle: cannot create: Is a directory" in r.stderr
    if os.path.exists("/dev/full"):
        (tmp_path / "full.pickle").symlink_to("/dev/full")
        r = run(tmp_path / "full.pickle")
        assert r.returncode == 1 and "write failed: No space left on device" in r.stderr
    fifo = tmp_path / "f.pickle"
    os.mkfifo(fifo)
    r = run(fifo)
    assert r.returncode == 1 and f"--snapshot {fifo}: cannot create: a FIFO nobody reads" in r.stderr
    # with a reader (held read-write, so that it never sees an end of file
    # before ccrun opens the FIFO): the pickle arrives whole
    fd = os.open(fifo, os.O_RDWR)
    with os.fdopen(fd, "rb") as reader:
        got = {}
        t = threading.Thread(target=lambda: got.setdefault("snap", pickle.load(reader)), daemon=True)
        t.start()
        r = run(fifo)
        t.join(60)
    assert r.returncode == 0, r.stderr
    check_structure(got["snap"], 0)


# ---- (b) PyTorch's own code -------------------------------------------------------


@pytest.mark.parametrize("kind", ["classic", "expandable"])
def test_torch_memory_viz_reads_it(tmp_path, kind):
    mv = pytest.importorskip("torch.cuda._memory_viz")
    snap, after, js = write(tmp_path, kind)
    st = js["stats"]
    text = mv.segsum(snap)  # raises on any accounting mismatch
    assert f"segments: {len(snap['segments'])}" in text
    assert f"total_reserved: {mv.Bytes(st['reserved_bytes'])}" in text
    trace = mv.trace(snap)
    assert "Device 0" in trace and f"{len(snap['device_traces'][0])} entries" in trace
    assert "raise OutOfMemoryError" in trace
    flame = mv.segments(snap, format_flamegraph=lambda lines: lines)
    assert sum(int(line.rsplit(" ", 1)[1]) for line in flame.splitlines()) == st["reserved_bytes"]
    flame = mv.memory(snap, format_flamegraph=lambda lines: lines)
    assert sum(int(line.rsplit(" ", 1)[1]) for line in flame.splitlines()) == st["reserved_bytes"]
    mv.compare(snap["segments"], after["segments"], format_flamegraph=lambda lines: lines)
    for html in (mv.trace_plot(snap), mv.trace_plot(snap, plot_segments=True), mv.segment_plot(snap),
                 mv.trace_plot(mv.filter_alloc_free_pairs(pickle.loads(pickle.dumps(snap))))):
        assert "MemoryViz.js" in html and "snapshot.pickle" in html


def test_torch_memory_viz_reads_ccrun(tmp_path):
    mv = pytest.importorskip("torch.cuda._memory_viz")
    snap = run_ccrun(tmp_path)
    assert "segments:" in mv.segsum(snap)
    assert "Device 0" in mv.trace(snap)
    assert "MemoryViz.js" in mv.segment_plot(snap)
