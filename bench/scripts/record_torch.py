#!/usr/bin/env python3
"""record_torch.py — record the allocator events of a PyTorch program and
write them as a ccalloc trace (format v2), for ccbench to replay.

    python3 bench/scripts/record_torch.py --list
    python3 bench/scripts/record_torch.py --scenario resnet50-infer -o bench/traces/torch-resnet50-infer.csv.gz
    python3 bench/scripts/record_torch.py --scenario gpt2-generate --device cuda -o /tmp/gpt2.csv
    python3 bench/scripts/record_torch.py --convert snapshot.pickle -o out.csv   # a saved CUDA snapshot

Each scenario is a small, standard PyTorch program (ResNet-50, BERT-base,
GPT-2 small: written out below with random weights, nothing is downloaded)
run once under a recorder. The same scenario code runs on both devices.

Install (the venv the committed traces were recorded with; there is no
CPU-only torch wheel on the package index the build machine reaches, so the
CUDA wheel is installed without its CUDA dependencies, which the machine's
CUDA 13 toolkit in /usr/local/cuda provides):

    python3 -m venv /tmp/torchenv
    /tmp/torchenv/bin/pip install --no-deps torch==2.15.0 nvidia-cusparselt-cu13==0.8.1 nvidia-nvshmem-cu13==3.7.2 nvidia-nccl-cu13==2.30.7 nvidia-cufile==1.20.0.107
    /tmp/torchenv/bin/pip install filelock typing-extensions sympy networkx jinja2 fsspec numpy
    /tmp/torchenv/bin/python bench/scripts/record_torch.py --scenario bert-infer -o bench/traces/torch-bert-infer.csv.gz

--device cpu (default) records PyTorch's CPU allocator with
torch.profiler (profile_memory=True): every tensor storage the program
creates or releases is one Allocation event with its address, its exact
byte size (negative for a free), the allocator's running total and a time
stamp. This is the request stream a caching allocator would see: no
rounding, no cache in between. The profiler reports only events from the
threads it profiles and says nothing of frees of blocks allocated before it
started (it warns once instead), so on the CPU nothing is ever dropped.
Recording runs with torch.set_num_threads(1): allocations on intra-op
worker threads may go unreported, and scratch buffers sized per thread
change with the thread count (train-step with --threads 2 gave the same
events, some of them twice as large). --threads is for such experiments.

--device cuda records PyTorch's CUDA caching allocator instead, with
torch.cuda.memory._record_memory_history() and the snapshot's
"device_traces". Sizes there are the sizes requested (not PyTorch's
rounded block sizes: on torch 2.11 on an H100 the live totals of the
history were not multiples of 512), so each replayed allocator rounds them
its own way, and the running total they are checked against is the
allocator's "requested_bytes.all.current" statistic, not
memory_allocated() (which counts rounded blocks). A phase boundary is placed by
the number of history entries at that moment (one _snapshot() per
boundary: exact, where the entries' microsecond time stamps could tie).
Backward runs on the autograd engine's device thread there, whose events
carry no phase label (not checked, still placed by count). The tests
exercise this path through cuda_events and a stand-in for torch.cuda that
keeps PyTorch's two totals apart; bench/results/ says where it ran on a GPU.
Without CUDA it prints "skipped: <reason>" and exits 0.

Reconstruction rules (reconstruct(); the same for both devices):
  - Events are ordered by time: profiler time stamps on the CPU, position
    in the allocator's history on the GPU. Marks sort before allocator
    events with the same time; equal-time allocator events keep the
    profiler's order unless the allocator's running totals say otherwise
    (then they are put in the order the totals chain in, and counted).
  - An alloc gets the next id (1, 2, 3, ...); a free is paired with the
    live block at the same address and written with that block's id, size
    and stream. A free whose size differs from its block's is an error.
  - A free of an address that is not live (a block allocated before the
    recording started) is dropped and counted.
  - An alloc at an address that is already live is an error: it means a
    free was lost, and no trace written from such a record is faithful.
  - Where the allocator reports its running total (CPU: after every event;
    GPU: memory_stats()["requested_bytes.all.current"] at every phase
    boundary), it must
    equal (bytes live before the first event) + (bytes of live blocks in
    the trace) - (bytes of dropped frees). Any disagreement fails the
    recording: only dropped blocks may explain a difference.
  - A mark names the phase that follows it (load:resnet50, infer:bert, ...).
    Phases do not nest. Every event recorded inside a phase must follow
    that phase's mark and no other (checked on the CPU through the
    profiler's event tree, on the GPU through the entries' user_metadata).
  - Streams are numbered by first use; 0 is the default stream. CPU traces
    use stream 0 only.
A recording that breaks a rule writes no file and exits 1; the summary
(counts, peak live bytes) goes to stderr and into the trace's header. An
-o that cannot be written is "record_torch: cannot write PATH: REASON",
exit 1; an -o that is the snapshot --convert reads is refused, exit 2.

Trace format v2 (what bench/trace.c reads):
    # ccalloc trace v2
    # any number of provenance lines
    seq,op,id,size,stream,name
    0,alloc,1,4096,0
    1,free,1,4096,0
    2,mark,0,0,0,load:resnet50
    3,empty_cache,0,0,0
(v2 also has trim,0,KEEP,0 lines; this script writes none.)
Files named *.gz are gzip-compressed with mtime 0 (same text, same bytes).

The parts that need no torch (format, ordering, reconstruction, snapshot
conversion) are plain functions tested by tests/bench/test_record_torch.py; torch
is imported only when a scenario runs.
"""
import argparse
import collections
import contextlib
import datetime
import gc
import gzip
import io
import math
import os
import platform
import random
import shlex
import sys
import time

# ---- trace format v2 --------------------------------------------------------

TRACE_MAGIC = "# ccalloc trace v2"
TRACE_HEADER = "seq,op,id,size,stream,name"
MAX_ID = (1 << 40) - 1
MAX_STREAM = 63
MAX_MARK = 63


class RecordError(Exception):
    """The record cannot be turned into a faithful trace."""


def mark_name_problem(name):
    """None when NAME may be a mark's name, else why not."""
    if not isinstance(name, str) or not 1 <= len(name) <= MAX_MARK:
        return "a mark name has 1..%d characters" % MAX_MARK
    for c in name:
        if not 0x20 <= ord(c) <= 0x7E or c in ',"':
            return "a mark name may not contain %r" % c
    return None


def check_mark_name(name):
    why = mark_name_problem(name)
    if why:
        raise RecordError("%s: %r" % (why, name))
    return name


def format_trace(provenance, rows):
    """The text of a v2 trace. provenance: header comment lines (without '# ');
    rows: ('alloc'|'free', id, size, stream) or ('mark', name) or ('empty_cache',)."""
    out = [TRACE_MAGIC]
    for p in provenance:
        p = p.rstrip()
        if "\n" in p or any(not 0x20 <= ord(c) <= 0x7E for c in p):
            raise RecordError("provenance lines are printable ASCII: %r" % p)
        out.append(("# " + p) if p else "#")
    out.append(TRACE_HEADER)
    for seq, r in enumerate(rows):
        op = r[0]
        if op in ("alloc", "free"):
            out.append("%d,%s,%d,%d,%d" % (seq, op, r[1], r[2], r[3]))
        elif op == "mark":
            out.append("%d,mark,0,0,0,%s" % (seq, check_mark_name(r[1])))
        elif op == "empty_cache":
            out.append("%d,empty_cache,0,0,0" % seq)
        else:
            raise RecordError("unknown row %r" % (r,))
    return "\n".join(out) + "\n"


def write_trace(path, text):
    """Write TEXT to PATH, gzip-compressed (mtime 0, no name) when PATH ends in .gz."""
    data = text.encode("ascii")
    if path.endswith(".gz"):
        buf = io.BytesIO()
        with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as z:
            z.write(data)
        data = buf.getvalue()
    try:
        with open(path, "wb") as f:
            f.write(data)
    except OSError as e:  # a full disk, a missing directory, a directory: said, exit 1
        raise RecordError("cannot write %s: %s" % (path, e.strerror or e))


# ---- reconstruction: allocator events -> trace rows --------------------------

# One allocator event or phase boundary.
#   time   ordering key (profiler ns, or position in the CUDA history)
#   op     'alloc' | 'free' | 'mark' | 'empty_cache' | 'check' (a total only)
#   addr   block address (alloc/free)
#   size   bytes, >= 0 (a free's size is its block's)
#   stream the allocator's stream handle (0 = default)
#   name   a mark's name
#   total  the allocator's own count of allocated bytes after this event, or None
#   phase  the phase the event was recorded in (must match the last mark), or None
Event = collections.namedtuple("Event", "time op addr size stream name total phase")


def event(time, op, addr=0, size=0, stream=0, name="", total=None, phase=None):
    return Event(time, op, addr, size, stream, name, total, phase)


BOUNDARY_OPS = ("mark", "empty_cache", "check")


def order_events(events):
    """Events in the order they happened: by time; at equal times boundaries
    first, then allocator events in the order given, except that a run of
    equal-time allocator events carrying totals is put in the order its
    totals chain in. Returns (ordered, ties, reordered): how many events
    shared a time with the one before, how many runs had to be reordered."""
    keyed = sorted(range(len(events)),
                   key=lambda i: (events[i].time, 0 if events[i].op in BOUNDARY_OPS else 1, i))
    ordered = [events[i] for i in keyed]
    ties = reordered = 0
    out, i, running = [], 0, None
    while i < len(ordered):
        e = ordered[i]
        if e.op in BOUNDARY_OPS:
            out.append(e)
            i += 1
            continue
        j = i + 1
        while j < len(ordered) and ordered[j].time == e.time and ordered[j].op not in BOUNDARY_OPS:
            j += 1
        run = ordered[i:j]
        ties += len(run) - 1
        if len(run) > 1 and running is not None and all(x.total is not None for x in run):
            chained = chain_by_totals(run, running)
            if chained != run:
                reordered += 1
            run = chained
        out.extend(run)
        if run[-1].total is not None:
            running = run[-1].total
        i = j
    return out, ties, reordered


def delta(e):
    return e.size if e.op == "alloc" else -e.size if e.op == "free" else 0


def chain_by_totals(run, running):
    """RUN reordered so that each event's total is the one before plus its own
    size; where no event fits, the rest keep their order."""
    rest, out = list(run), []
    while rest:
        k = next((n for n, x in enumerate(rest) if x.total == running + delta(x)), 0)
        x = rest.pop(k)
        out.append(x)
        running = x.total
    return out


class Summary:
    """Counts of one reconstruction; lines() is what goes into the header."""

    def __init__(self):
        self.seen = self.allocs = self.frees = self.written = 0
        self.dropped = self.dropped_bytes = 0
        self.live_blocks = self.live_bytes = self.peak_bytes = 0
        self.marks = self.empty_caches = 0
        self.checks = self.mismatches = 0
        self.first_mismatch = None
        self.phase_errors = 0
        self.first_phase_error = None
        self.streams = 0
        self.base = None
        self.ties = self.reordered = 0
        self.notes = []

    def ok(self):
        return self.mismatches == 0 and self.phase_errors == 0

    def lines(self):
        s = ["reconstruction: %d allocator events seen (%d allocs, %d frees), %d written, "
             "%d frees dropped (%d bytes; blocks allocated before recording)"
             % (self.seen, self.allocs, self.frees, self.written, self.dropped, self.dropped_bytes),
             "live at end: %d blocks, %d bytes; peak live: %d bytes; marks: %d; empty_cache: %d; streams: %d"
             % (self.live_blocks, self.live_bytes, self.peak_bytes, self.marks, self.empty_caches,
                self.streams),
             "checks: allocator total agreed %d/%d times (bytes live before recording: %s); "
             "phase errors: %d; equal-time events: %d, runs reordered by totals: %d"
             % (self.checks - self.mismatches, self.checks, "unknown" if self.base is None else self.base,
                self.phase_errors, self.ties, self.reordered)]
        if self.first_mismatch:
            s.append("first total mismatch: " + self.first_mismatch)
        if self.first_phase_error:
            s.append("first phase error: " + self.first_phase_error)
        return s + self.notes


def reconstruct(events):
    """Ordered EVENTS -> (rows for format_trace, Summary). Raises RecordError
    on a broken rule that makes further pairing meaningless; total and phase
    disagreements are counted (Summary.ok() is then False)."""
    live = {}  # addr -> (id, size, stream number)
    streams = {0: 0}
    rows, s = [], Summary()
    next_id, live_bytes, phase = 1, 0, None
    for n, e in enumerate(events):
        if e.op == "alloc":
            s.seen += 1
            s.allocs += 1
            if e.size < 0:
                raise RecordError("event %d: negative size %d" % (n, e.size))
            if e.addr in live:
                raise RecordError("event %d: alloc at address %#x, which is live (block %d): a free was lost"
                                  % (n, e.addr, live[e.addr][0]))
            if e.stream not in streams:
                if len(streams) > MAX_STREAM:
                    raise RecordError("more than %d streams" % MAX_STREAM)
                streams[e.stream] = len(streams)
            if next_id > MAX_ID:
                raise RecordError("more than %d blocks" % MAX_ID)
            live[e.addr] = (next_id, e.size, streams[e.stream])
            rows.append(("alloc", next_id, e.size, streams[e.stream]))
            next_id += 1
            live_bytes += e.size
            s.peak_bytes = max(s.peak_bytes, live_bytes)
        elif e.op == "free":
            s.seen += 1
            s.frees += 1
            blk = live.pop(e.addr, None)
            if blk is None:
                s.dropped += 1
                s.dropped_bytes += e.size
            else:
                if blk[1] != e.size:
                    raise RecordError("event %d: free of %#x with %d bytes, its block (id %d) has %d"
                                      % (n, e.addr, e.size, blk[0], blk[1]))
                rows.append(("free",) + blk)
                live_bytes -= blk[1]
        elif e.op == "mark":
            rows.append(("mark", check_mark_name(e.name)))
            phase = e.name
            s.marks += 1
        elif e.op == "empty_cache":
            rows.append(("empty_cache",))
            s.empty_caches += 1
        elif e.op != "check":
            raise RecordError("event %d: unknown op %r" % (n, e.op))
        if e.phase is not None and e.phase != phase:
            if s.phase_errors == 0:
                s.first_phase_error = ("event %d (%s) recorded in phase %r follows mark %r"
                                       % (n, e.op, e.phase, phase))
            s.phase_errors += 1
        if e.total is not None:
            mine = live_bytes - s.dropped_bytes
            if s.base is None:
                s.base = e.total - mine
            s.checks += 1
            if e.total != s.base + mine:
                if s.mismatches == 0:
                    s.first_mismatch = ("event %d (%s %d bytes): allocator says %d, trace says %d"
                                        % (n, e.op, e.size, e.total, s.base + mine))
                s.mismatches += 1
    s.written = sum(1 for r in rows if r[0] in ("alloc", "free"))
    s.live_blocks, s.live_bytes = len(live), live_bytes
    s.streams = len(streams)
    return rows, s


# ---- the CUDA caching allocator's history -> events (no torch needed) --------

def cuda_events(entries, boundaries=(), start=0):
    """Events from a snapshot's device_traces[device] (a list of dicts) and
    BOUNDARIES: (count, op, name, total) taken while recording, count being
    how many entries the history held at that moment (so the boundary comes
    before entry number count). Entries before number START (older history)
    are ignored. Keeps 'alloc' and 'free_completed' (the block is back in
    PyTorch's pool; 'free_requested' when the history has no completed
    frees). Entries' user_metadata 'ccalloc:NAME' give their phase."""
    entries = entries[start:]
    have_completed = any(e.get("action") == "free_completed" for e in entries)
    free_action = "free_completed" if have_completed else "free_requested"
    out = []
    for i, e in enumerate(entries, start):
        action = e.get("action")
        if action not in ("alloc", free_action):
            continue
        meta = e.get("user_metadata") or ""
        phase = meta[len("ccalloc:"):] if meta.startswith("ccalloc:") else None
        out.append(event(i, "alloc" if action == "alloc" else "free", e["addr"], e["size"],
                         e.get("stream", 0) or 0, phase=phase))
    for count, op, name, total in boundaries:
        out.append(event(count, op, name=name, total=total))
    return out, free_action


# ---- recording (torch from here on) -----------------------------------------

MARK_PREFIX = "ccalloc:mark:"
EMPTY_CACHE_NAME = "ccalloc:empty_cache"


class Recorder:
    """What a scenario calls: phase(name) around each phase, empty_cache() where
    the program releases its allocator's cache; .device for its tensors."""

    def __init__(self, torch, device):
        self.torch, self.device = torch, device
        self.boundaries = []  # cuda: (count, op, name, total)
        self.in_phase = False
        self.metadata = device == "cuda" and hasattr(torch.cuda.memory, "_set_memory_metadata")

    @contextlib.contextmanager
    def phase(self, name):
        check_mark_name(name)
        if self.in_phase:
            raise RecordError("phase %r inside another phase: phases do not nest" % name)
        self.in_phase = True
        try:
            if self.device == "cpu":
                with self.torch.profiler.record_function(MARK_PREFIX + name):
                    yield
            else:
                self.boundary("mark", name)
                if self.metadata:
                    self.torch.cuda.memory._set_memory_metadata("ccalloc:" + name)
                try:
                    yield
                finally:
                    if self.metadata:
                        self.torch.cuda.memory._set_memory_metadata("")
        finally:
            self.in_phase = False

    def empty_cache(self):
        if self.device == "cpu":
            with self.torch.profiler.record_function(EMPTY_CACHE_NAME):
                pass
        else:
            self.boundary("empty_cache", "")
            self.torch.cuda.empty_cache()

    def boundary(self, op, name):
        """cuda: remember how many history entries exist now, and the allocated total."""
        cuda = self.torch.cuda
        count = len(cuda.memory._snapshot()["device_traces"][cuda.current_device()])
        self.boundaries.append((count, op, name, requested_total(cuda)))


def requested_total(cuda):
    """The CUDA allocator's live requested bytes: what the history's sizes sum
    to (memory_allocated() counts PyTorch's rounded block sizes instead)."""
    stats = cuda.memory_stats()
    key = "requested_bytes.all.current"
    if key not in stats:
        raise RecordError("this PyTorch reports no %r statistic: the history's sizes cannot be checked" % key)
    return stats[key]


def cpu_events(torch, prof, device="cpu"):
    """Events from a finished CPU profile: Allocation nodes of DEVICE, ccalloc
    marks and empty_cache points, each allocation labelled with the phase
    whose record_function encloses it. Returns (events, notes)."""
    alloc_tag = torch._C._profiler._EventType.Allocation
    out, tids, other = [], collections.Counter(), 0
    stack = [(n, None) for n in reversed(prof.profiler.kineto_results.experimental_event_tree())]
    while stack:
        node, phase = stack.pop()
        if node.tag == alloc_tag:
            f = node.extra_fields
            if str(f.device) != device:
                other += 1
                continue
            tids[node.start_tid] += 1
            op = "free" if f.alloc_size < 0 else "alloc"
            out.append(event(node.start_time_ns, op, f.ptr, abs(f.alloc_size), total=f.total_allocated,
                             phase=phase))
            continue
        name = node.name or ""
        if name.startswith(MARK_PREFIX):
            if phase is not None:
                raise RecordError("phase %r inside phase %r" % (name, phase))
            phase = name[len(MARK_PREFIX):]
            out.append(event(node.start_time_ns, "mark", name=phase))
        elif name == EMPTY_CACHE_NAME:
            out.append(event(node.start_time_ns, "empty_cache"))
        stack.extend((c, phase) for c in reversed(node.children))
    notes = ["allocation events by thread id: %s%s" % (
        ", ".join("%d: %d" % kv for kv in sorted(tids.items())),
        "; %d events of other devices ignored" % other if other else "")]
    return out, notes


# ---- models (standard architectures, random weights) -------------------------

def model_zoo(torch):
    """The model classes, defined once torch is imported."""
    nn, F = torch.nn, torch.nn.functional

    class Bottleneck(nn.Module):
        """ResNet v1.5 bottleneck (stride on the 3x3), as torchvision's."""

        def __init__(self, cin, width, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(width)
            self.conv3 = nn.Conv2d(width, width * 4, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(width * 4)
            self.relu = nn.ReLU(inplace=True)
            self.downsample = None
            if stride != 1 or cin != width * 4:
                self.downsample = nn.Sequential(nn.Conv2d(cin, width * 4, 1, stride, bias=False),
                                                nn.BatchNorm2d(width * 4))

        def forward(self, x):
            identity = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.relu(self.bn2(self.conv2(out)))
            out = self.bn3(self.conv3(out))
            out += identity
            return self.relu(out)

    class ResNet50(nn.Module):
        def __init__(self, blocks=(3, 4, 6, 3), classes=1000):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            layers, cin = [], 64
            for i, n in enumerate(blocks):
                width = 64 << i
                stage = []
                for b in range(n):
                    stage.append(Bottleneck(cin, width, 2 if b == 0 and i > 0 else 1))
                    cin = width * 4
                layers.append(nn.Sequential(*stage))
            self.layer1, self.layer2, self.layer3, self.layer4 = layers
            self.fc = nn.Linear(cin, classes)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))

    class BertLayer(nn.Module):
        """One BERT encoder layer, written as Hugging Face's eager BertLayer."""

        def __init__(self, hidden, heads, ffn):
            super().__init__()
            self.heads = heads
            self.query, self.key, self.value = (nn.Linear(hidden, hidden) for _ in range(3))
            self.attn_out = nn.Linear(hidden, hidden)
            self.attn_norm = nn.LayerNorm(hidden, eps=1e-12)
            self.intermediate = nn.Linear(hidden, ffn)
            self.output = nn.Linear(ffn, hidden)
            self.out_norm = nn.LayerNorm(hidden, eps=1e-12)
            self.dropout = nn.Dropout(0.1)

        def forward(self, h, mask):
            b, s, c = h.shape
            d = c // self.heads

            def heads(t):
                return t.view(b, s, self.heads, d).transpose(1, 2)

            q, k, v = heads(self.query(h)), heads(self.key(h)), heads(self.value(h))
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d) + mask
            probs = self.dropout(torch.softmax(scores, dim=-1))
            ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous().view(b, s, c)
            h = self.attn_norm(self.dropout(self.attn_out(ctx)) + h)
            return self.out_norm(self.dropout(self.output(F.gelu(self.intermediate(h)))) + h)

    class Bert(nn.Module):
        """BERT-base: embeddings + LayerNorm, 12 layers of 768 (12 heads, FFN 3072),
        pooler; mlm=True adds the masked-LM head (tied to the word embeddings)."""

        def __init__(self, vocab=30522, hidden=768, layers=12, heads=12, ffn=3072, positions=512, mlm=False):
            super().__init__()
            self.word = nn.Embedding(vocab, hidden)
            self.position = nn.Embedding(positions, hidden)
            self.token_type = nn.Embedding(2, hidden)
            self.emb_norm = nn.LayerNorm(hidden, eps=1e-12)
            self.dropout = nn.Dropout(0.1)
            self.layers = nn.ModuleList(BertLayer(hidden, heads, ffn) for _ in range(layers))
            self.pooler = nn.Linear(hidden, hidden)
            self.mlm = None
            if mlm:
                self.mlm = nn.Sequential(nn.Linear(hidden, hidden), nn.GELU(), nn.LayerNorm(hidden, eps=1e-12))
                self.decoder = nn.Linear(hidden, vocab)
                self.decoder.weight = self.word.weight

        def forward(self, ids, attention_mask):
            pos = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)
            h = self.word(ids) + self.token_type(torch.zeros_like(ids)) + self.position(pos)
            h = self.dropout(self.emb_norm(h))
            mask = (1.0 - attention_mask[:, None, None, :].to(h.dtype)) * torch.finfo(h.dtype).min
            for layer in self.layers:
                h = layer(h, mask)
            if self.mlm is not None:
                return self.decoder(self.mlm(h))
            return h, torch.tanh(self.pooler(h[:, 0]))

    class GPT2Attention(nn.Module):
        def __init__(self, hidden, heads, context):
            super().__init__()
            self.heads = heads
            self.c_attn = nn.Linear(hidden, 3 * hidden)
            self.c_proj = nn.Linear(hidden, hidden)
            # Hugging Face's GPT-2 keeps a causal-mask buffer in every layer
            self.register_buffer("bias", torch.tril(torch.ones(context, context, dtype=torch.bool)))

        def forward(self, x, past):
            b, t, c = x.shape
            d = c // self.heads
            q, k, v = (y.view(b, t, self.heads, d).transpose(1, 2) for y in self.c_attn(x).split(c, dim=2))
            if past is not None:  # the naive KV cache: grown by one token per step
                k = torch.cat((past[0], k), dim=-2)
                v = torch.cat((past[1], v), dim=-2)
            s = k.shape[-2]
            att = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d)
            att = att.masked_fill(~self.bias[s - t:s, :s], float("-inf"))
            y = torch.matmul(torch.softmax(att, dim=-1), v)
            return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c)), (k, v)

    class GPT2Block(nn.Module):
        def __init__(self, hidden, heads, context):
            super().__init__()
            self.ln_1 = nn.LayerNorm(hidden)
            self.attn = GPT2Attention(hidden, heads, context)
            self.ln_2 = nn.LayerNorm(hidden)
            self.c_fc = nn.Linear(hidden, 4 * hidden)
            self.c_proj = nn.Linear(4 * hidden, hidden)

        def forward(self, x, past):
            a, present = self.attn(self.ln_1(x), past)
            x = x + a
            return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh")), present

    class GPT2(nn.Module):
        """GPT-2 small: 12 layers of 768, 12 heads, vocabulary 50257, context 1024;
        the LM head is tied to the token embedding."""

        def __init__(self, vocab=50257, hidden=768, layers=12, heads=12, context=1024):
            super().__init__()
            self.wte = nn.Embedding(vocab, hidden)
            self.wpe = nn.Embedding(context, hidden)
            self.h = nn.ModuleList(GPT2Block(hidden, heads, context) for _ in range(layers))
            self.ln_f = nn.LayerNorm(hidden)
            self.lm_head = nn.Linear(hidden, vocab, bias=False)
            self.lm_head.weight = self.wte.weight

        def forward(self, ids, past=None):
            start = 0 if past is None else past[0][0].shape[-2]
            pos = torch.arange(start, start + ids.shape[1], device=ids.device).unsqueeze(0)
            x = self.wte(ids) + self.wpe(pos)
            presents = []
            for i, block in enumerate(self.h):
                x, p = block(x, None if past is None else past[i])
                presents.append(p)
            return self.lm_head(self.ln_f(x)), presents

    def generate(model, ids, new_tokens):
        """Greedy decoding with the KV cache; returns the ids, prompt included."""
        logits, past = model(ids)
        for _ in range(new_tokens):
            nxt = logits[:, -1, :].argmax(dim=-1, keepdim=True)
            ids = torch.cat((ids, nxt), dim=1)
            logits, past = model(nxt, past)
        return ids

    return ResNet50, Bert, GPT2, generate


# ---- scenarios ------------------------------------------------------------------
# Each takes (torch, rec, seed) and returns header lines about the model; it
# builds its models inside the recording, so the weights are in the trace.

RESNET_BATCH = 16
BERT_BATCH, BERT_SEQ = 8, 128
GPT2_BATCH, GPT2_PROMPT, GPT2_NEW = 1, 32, 128
TRAIN_BATCH, TRAIN_SEQ, TRAIN_STEPS = 8, 128, 2
VARLEN_BATCHES, VARLEN_TOKENS, VARLEN_MAX_SEQ = 16, 1024, 384
MULTI_GPT2_NEW = 8


def nparams(model):
    return sum(p.numel() for p in model.parameters())


def run_resnet(torch, rec, batch):
    ResNet50, _, _, _ = model_zoo(torch)
    with rec.phase("load:resnet50"):
        with torch.device(rec.device):
            model = ResNet50().eval()
    with rec.phase("infer:resnet50"), torch.no_grad():
        x = torch.randn(batch, 3, 224, 224, device=rec.device)
        y = model(x)
        y.argmax(dim=1)
        del x, y
    info = "ResNet-50 (bottleneck blocks [3,4,6,3], widths 64-512, torchvision v1.5 layout), %d parameters" % nparams(
        model)
    return model, info


def run_bert(torch, rec, batch, seq, gen):
    _, Bert, _, _ = model_zoo(torch)
    with rec.phase("load:bert"):
        with torch.device(rec.device):
            model = Bert().eval()
    with rec.phase("infer:bert"), torch.no_grad():
        ids = torch.randint(0, 30522, (batch, seq), generator=gen).to(rec.device)
        h, pooled = model(ids, torch.ones_like(ids))
        del ids, h, pooled
    info = "BERT-base encoder (12 layers, hidden 768, 12 heads, FFN 3072, vocab 30522), %d parameters" % nparams(
        model)
    return model, info


def run_gpt2(torch, rec, batch, prompt, new, gen):
    _, _, GPT2, generate = model_zoo(torch)
    with rec.phase("load:gpt2"):
        with torch.device(rec.device):
            model = GPT2().eval()
    with rec.phase("generate:gpt2"), torch.no_grad():
        ids = torch.randint(0, 50257, (batch, prompt), generator=gen).to(rec.device)
        out = generate(model, ids, new)
        del ids, out
    info = ("GPT-2 small (12 layers, 768, 12 heads, vocab 50257, context 1024, tied LM head), %d parameters; "
            "greedy decoding, KV cache grown by torch.cat every step" % nparams(model))
    return model, info


def scenario_resnet50_infer(torch, rec, seed):
    model, info = run_resnet(torch, rec, RESNET_BATCH)
    with rec.phase("unload:resnet50"):
        del model
        gc.collect()
    return ["model: " + info + "; eval, no_grad; random weights (seed %d)" % seed,
            "batch: %d; input 3x224x224 float32; sequence length: n/a" % RESNET_BATCH]


def scenario_bert_infer(torch, rec, seed):
    gen = torch.Generator().manual_seed(seed)
    model, info = run_bert(torch, rec, BERT_BATCH, BERT_SEQ, gen)
    with rec.phase("unload:bert"):
        del model
        gc.collect()
    return ["model: " + info + "; eval, no_grad; random weights (seed %d)" % seed,
            "batch: %d; sequence length: %d (no padding)" % (BERT_BATCH, BERT_SEQ)]


def scenario_gpt2_generate(torch, rec, seed):
    gen = torch.Generator().manual_seed(seed)
    model, info = run_gpt2(torch, rec, GPT2_BATCH, GPT2_PROMPT, GPT2_NEW, gen)
    with rec.phase("unload:gpt2"):
        del model
        gc.collect()
    return ["model: " + info + "; eval, no_grad; random weights (seed %d)" % seed,
            "batch: %d; sequence length: prompt %d + %d new tokens = %d"
            % (GPT2_BATCH, GPT2_PROMPT, GPT2_NEW, GPT2_PROMPT + GPT2_NEW)]


def scenario_train_step(torch, rec, seed):
    _, Bert, _, _ = model_zoo(torch)
    gen = torch.Generator().manual_seed(seed)
    with rec.phase("load:bert-mlm"):
        with torch.device(rec.device):
            model = Bert(mlm=True).train()
        opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    for step in range(1, TRAIN_STEPS + 1):
        ids = torch.randint(0, 30522, (TRAIN_BATCH, TRAIN_SEQ), generator=gen).to(rec.device)
        labels = torch.randint(0, 30522, (TRAIN_BATCH, TRAIN_SEQ), generator=gen)
        labels[torch.rand(TRAIN_BATCH, TRAIN_SEQ, generator=gen) > 0.15] = -100  # 15 % of positions
        labels = labels.to(rec.device)
        with rec.phase("fwd:%d" % step):
            logits = model(ids, torch.ones_like(ids))
            loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1),
                                                     ignore_index=-100)
            del logits
        with rec.phase("bwd:%d" % step):
            loss.backward()
            del loss
        with rec.phase("optim:%d" % step):
            opt.step()
            opt.zero_grad(set_to_none=True)
        del ids, labels
    info = nparams(model)
    with rec.phase("unload:bert-mlm"):
        del model, opt
        gc.collect()
    return ["model: BERT-base with masked-LM head (tied decoder), %d parameters; train mode (dropout 0.1); "
            "cross-entropy on 15 %% of positions; torch.optim.Adam (lr 1e-4, foreach default), "
            "zero_grad(set_to_none=True); %d steps; random weights (seed %d)" % (info, TRAIN_STEPS, seed),
            "batch: %d; sequence length: %d" % (TRAIN_BATCH, TRAIN_SEQ)]


def scenario_multi_model(torch, rec, seed):
    gen = torch.Generator().manual_seed(seed)
    model, a = run_resnet(torch, rec, RESNET_BATCH)
    with rec.phase("unload:resnet50"):
        del model
        gc.collect()
    rec.empty_cache()
    model, b = run_bert(torch, rec, BERT_BATCH, BERT_SEQ, gen)
    with rec.phase("unload:bert"):
        del model
        gc.collect()
    rec.empty_cache()
    model, c = run_gpt2(torch, rec, GPT2_BATCH, GPT2_PROMPT, MULTI_GPT2_NEW, gen)
    with rec.phase("unload:gpt2"):
        del model
        gc.collect()
    return ["model: A = %s; B = %s; C = %s; eval, no_grad; random weights (seed %d)" % (a, b, c, seed),
            "batch: A %d (3x224x224); B %d; C %d; sequence length: B %d, C prompt %d + %d new tokens"
            % (RESNET_BATCH, BERT_BATCH, GPT2_BATCH, BERT_SEQ, GPT2_PROMPT, MULTI_GPT2_NEW),
            "phases: load, infer, unload A; empty_cache; load, infer, unload B; empty_cache; "
            "load, generate, unload C"]


def varlen_batches(seed):
    """Per-sample lengths of each request batch, seeded: batch size 1, 2, 4
    or 8, lengths uniform in 8..min(VARLEN_MAX_SEQ, VARLEN_TOKENS / batch)."""
    r = random.Random(seed)
    out = []
    for _ in range(VARLEN_BATCHES):
        batch = r.choice((1, 2, 4, 8))
        cap = min(VARLEN_MAX_SEQ, VARLEN_TOKENS // batch)
        out.append([r.randint(8, cap) for _ in range(batch)])
    return out


def scenario_bert_varlen(torch, rec, seed):
    _, Bert, _, _ = model_zoo(torch)
    gen = torch.Generator().manual_seed(seed)
    batches = varlen_batches(seed)
    with rec.phase("load:bert"):
        with torch.device(rec.device):
            model = Bert().eval()
    for n, lengths in enumerate(batches):
        seq = max(lengths)
        with rec.phase("infer:bert:%d:b%d:s%d" % (n, len(lengths), seq)), torch.no_grad():
            ids = torch.randint(0, 30522, (len(lengths), seq), generator=gen)
            mask = (torch.arange(seq)[None, :] < torch.tensor(lengths)[:, None]).long()
            ids, mask = (ids * mask).to(rec.device), mask.to(rec.device)  # padded with id 0
            h, pooled = model(ids, mask)
            del ids, mask, h, pooled
    info = nparams(model)
    with rec.phase("unload:bert"):
        del model
        gc.collect()
    return ["model: BERT-base encoder (12 layers, hidden 768, 12 heads, FFN 3072), %d parameters; eval, no_grad; "
            "random weights (seed %d)" % (info, seed),
            "batch: %d request batches, batch size and per-sample lengths drawn with seed %d, each batch padded "
            "to its longest sample (attention mask)" % (len(batches), seed),
            "sequence length: (batch x padded length) %s"
            % " ".join("%dx%d" % (len(b), max(b)) for b in batches)]


SCENARIOS = collections.OrderedDict([
    ("resnet50-infer", (scenario_resnet50_infer,
                        "ResNet-50 built inside the recording, one batch of %d at 224x224, unloaded"
                        % RESNET_BATCH)),
    ("bert-infer", (scenario_bert_infer,
                    "BERT-base encoder, one batch of %d x %d tokens, unloaded" % (BERT_BATCH, BERT_SEQ))),
    ("gpt2-generate", (scenario_gpt2_generate,
                       "GPT-2 small, greedy generation of %d tokens after a %d-token prompt, KV cache grown "
                       "by torch.cat" % (GPT2_NEW, GPT2_PROMPT))),
    ("train-step", (scenario_train_step,
                    "BERT-base masked-LM training, %d steps of forward, backward, Adam, zero_grad "
                    "(batch %d x %d)" % (TRAIN_STEPS, TRAIN_BATCH, TRAIN_SEQ))),
    ("multi-model", (scenario_multi_model,
                     "one process: ResNet-50, then BERT-base, then GPT-2 (%d tokens), each loaded, run and "
                     "unloaded, empty_cache between" % MULTI_GPT2_NEW)),
    ("bert-varlen", (scenario_bert_varlen,
                     "BERT-base serving %d request batches of varying batch size and sequence length "
                     "(seeded)" % VARLEN_BATCHES)),
])


# ---- main -----------------------------------------------------------------------

def skipped(why):
    print("skipped: " + why)
    sys.exit(0)


def same_file(a, b):
    """Whether paths a and b name one file: an existing one by its identity
    (a symlink followed, a hard link found), else by its real path."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def fail(why):
    print("record_torch: " + why, file=sys.stderr)
    sys.exit(1)


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def common_provenance(device, threads):
    return ["recorded by: bench/scripts/record_torch.py",
            "command: " + shlex.join([sys.executable] + sys.argv),
            "date: " + utc_now(),
            "python: %s; host: %s" % (platform.python_version(), platform.platform()),
            "device: " + device,
            "threads: %d (torch.set_num_threads; the profiler may miss allocations on intra-op worker threads)"
            % threads if device == "cpu" else "threads: n/a (allocator history is per device, all threads)"]


def finish(events, provenance, out, elapsed):
    """Order, reconstruct, check, write; exit 1 on a broken rule."""
    ordered, ties, reordered = order_events(events)
    try:
        rows, s = reconstruct(ordered)
    except RecordError as e:
        fail("reconstruction failed: %s (no trace written)" % e)
    s.ties, s.reordered = ties, reordered
    lines = s.lines() + ["recording took %.1f s" % elapsed]
    for line in lines:
        print(line, file=sys.stderr)
    if not s.ok():
        fail("the record does not check out (see above); no trace written")
    write_trace(out, format_trace(provenance + lines, rows))
    print("wrote %s: %d rows, %d bytes" % (out, len(rows), os.path.getsize(out)), file=sys.stderr)


def record_cpu(torch, name, seed, threads, out):
    from torch.profiler import ProfilerActivity, profile
    rec = Recorder(torch, "cpu")
    torch.manual_seed(seed)
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        info = SCENARIOS[name][0](torch, rec, seed)
    elapsed = time.perf_counter() - t0
    events, notes = cpu_events(torch, prof)
    prov = common_provenance("cpu", threads) + [
        "torch: " + torch.__version__,
        "scenario: %s: %s" % (name, SCENARIOS[name][1])] + info + [
        "source: PyTorch's CPU allocator seen by torch.profiler (profile_memory=True): one block per tensor "
        "storage, sizes are the exact requested bytes"] + notes
    finish(events, prov, out, elapsed)


CUDA_MAX_ENTRIES = 10_000_000


def record_cuda(torch, name, seed, out):
    cuda = torch.cuda
    dev = cuda.current_device()
    rec = Recorder(torch, "cuda")
    torch.manual_seed(seed)
    cuda.synchronize()
    cuda.empty_cache()
    cuda.memory._record_memory_history(max_entries=CUDA_MAX_ENTRIES, context=None, stacks="python",
                                       clear_history=True)
    t0 = time.perf_counter()
    try:
        rec.boundary("check", "")
        info = SCENARIOS[name][0](torch, rec, seed)
        cuda.synchronize()
        rec.boundary("check", "")
        entries = cuda.memory._snapshot()["device_traces"][dev]
    finally:
        cuda.memory._record_memory_history(enabled=None)
    elapsed = time.perf_counter() - t0
    if len(entries) >= CUDA_MAX_ENTRIES:
        fail("the allocator history filled its %d entries: early events are lost" % CUDA_MAX_ENTRIES)
    events, free_action = cuda_events(entries, rec.boundaries, start=rec.boundaries[0][0])
    prov = common_provenance("cuda: %s" % cuda.get_device_name(dev), 1) + [
        "torch: %s (CUDA %s)" % (torch.__version__, torch.version.cuda),
        "scenario: %s: %s" % (name, SCENARIOS[name][1])] + info + [
        "source: PyTorch's CUDA caching allocator history (torch.cuda.memory._record_memory_history); "
        "sizes are the sizes requested (unrounded); frees are '%s' events" % free_action,
        "phase boundaries placed by counting history entries; totals from "
        "torch.cuda.memory_stats()['requested_bytes.all.current']"]
    finish(events, prov, out, elapsed)


def convert_snapshot(path, out):
    import pickle
    with open(path, "rb") as f:
        snap = pickle.load(f)
    traces = snap.get("device_traces", [])
    devs = [d for d, t in enumerate(traces) if t]
    if len(devs) != 1:
        fail("%s: expected the history of one device, found %d" % (path, len(devs)))
    events, free_action = cuda_events(traces[devs[0]])
    prov = ["recorded by: bench/scripts/record_torch.py --convert",
            "command: " + shlex.join([sys.executable] + sys.argv),
            "date: " + utc_now(),
            "source: converted from CUDA snapshot %s (device %d); sizes are PyTorch block sizes; frees are "
            "'%s' events" % (os.path.basename(path), devs[0], free_action)]
    finish(events, prov, out, 0.0)


def whole_number(lo, hi):
    """An argparse type: plain decimal digits (ASCII: no sign, blank, "_" or
    other script's digits, which int() takes) in [lo, hi], of any length:
    leading zeros are dropped and a longer number than hi refused before
    int(), which takes at most 4300 digits from a text."""
    def parse(text):
        digits = text.lstrip("0") or "0"
        if not (text.isascii() and text.isdigit()) or len(digits) > len(str(hi)) or not lo <= int(digits) <= hi:
            raise argparse.ArgumentTypeError("'%s' is not a whole number in %d..%d (plain decimal)" % (text, lo, hi))
        return int(digits)
    return parse


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 epilog="The top of this file explains the rules and the install.")
    ap.add_argument("--list", action="store_true", help="list the scenarios")
    ap.add_argument("--scenario", choices=list(SCENARIOS))
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--seed", type=whole_number(0, 2**64 - 1), default=0, help="0..2**64-1 (default 0)")
    ap.add_argument("--threads", type=whole_number(1, 1024), default=1,
                    help="torch.set_num_threads, 1..1024 (CPU; default 1: more loses worker-thread allocations)")
    ap.add_argument("--convert", metavar="SNAPSHOT.pickle", help="convert a saved CUDA snapshot instead")
    ap.add_argument("-o", "--output", help="the trace (.csv, or .csv.gz to compress)")
    args = ap.parse_args(argv)
    if args.list:
        for name, (_, what) in SCENARIOS.items():
            print("%-15s %s" % (name, what))
        return
    if not args.output:
        ap.error("-o is required")
    if args.convert and same_file(args.convert, args.output):
        ap.error("-o '%s' is the snapshot --convert reads: it would be written over" % args.output)
    if args.convert:
        try:
            convert_snapshot(args.convert, args.output)
        except RecordError as e:
            fail(str(e))
        return
    if not args.scenario:
        ap.error("--scenario (or --convert, --list) is required")
    try:
        import torch
    except ImportError:
        if args.device == "cuda":
            skipped("PyTorch is not installed")
        fail("PyTorch is not installed (the install is at the top of this file)")
    if args.device == "cuda" and not torch.cuda.is_available():
        skipped("no CUDA device visible to PyTorch")
    torch.set_num_threads(args.threads)
    try:
        if args.device == "cpu":
            record_cpu(torch, args.scenario, args.seed, args.threads, args.output)
        else:
            record_cuda(torch, args.scenario, args.seed, args.output)
    except RecordError as e:
        fail(str(e))


if __name__ == "__main__":
    main()
