#!/usr/bin/env python3
"""torch_e2e.py — issue 41 end to end: a PyTorch training step and a
generation loop on ccalloc (``ccalloc.torch.enable()``) and on PyTorch's own
caching allocator, its defaults and ``expandable_segments:True``; peak
reserved bytes and step / token time side by side, with the issue's targets
checked: ccalloc's peak at most PyTorch's, its median time within 2 %.

    python3 bench/scripts/torch_e2e.py [--out DIR] [--workloads train,generate]
            [--settings ccalloc,pytorch,pytorch-expandable] [--steps N] [--generations N]
            [--tokens N] [--warmup N] [--rounds N] [--seed N] [--timeout S] [--no-deterministic]

Rules:
- One fresh process per (workload, setting, round): PyTorch fixes its CUDA
  allocator at its first CUDA allocation, so no two settings ever share a
  process. This script is the parent; the child is this script again
  (``--child WORKLOAD SETTING``), whose last stdout line is
  ``torch_e2e result: {JSON}``. A child that exits non-zero, prints no
  result line, prints one that is not JSON or lacks a field, or runs past
  --timeout is a failed run, reported with the reason: never dropped.
- Settings: ``ccalloc`` = ``ccalloc.torch.enable()`` before any CUDA tensor
  (the caller's CCALLOC_CONF applies; CCALLOC_PLUG_UPSTREAM is removed);
  ``pytorch`` = PYTORCH_CUDA_ALLOC_CONF removed (PyTorch's defaults, whatever
  the caller set); ``pytorch-expandable`` = PYTORCH_CUDA_ALLOC_CONF set to
  ``expandable_segments:True`` exactly. The child sees only that variable
  changed; the package and libccalloc are the checkout's
  (allocator/python first on sys.path; CCALLOC_LIBRARY if set).
- Workloads (plain torch.nn, random weights seeded with --seed, nothing
  downloaded): ``train`` = a GPT-style decoder (8 layers, 768 wide, 12
  heads, vocabulary 16384) on batches of 8 x 512 tokens: forward under bf16
  autocast, cross-entropy, backward, AdamW step, zero_grad(set_to_none);
  one unit = one step. ``generate`` = GPT-2 small (12 layers, 768, 12 heads,
  vocabulary 50257, context 1024) in bf16, greedy decoding of --tokens new
  tokens after a 128-token prompt, batch 8, the KV cache grown by torch.cat
  every token; one unit = one decode step (the prefill is timed apart and
  is not a unit).
- Measured in each child: --warmup iterations first (steps / generations),
  then --steps steps or --generations generations. Times: each unit between
  two torch.cuda.synchronize() calls (time.perf_counter_ns); median and p90
  (nearest rank) over the units of every round pooled. Peak reserved: over
  the whole process (model, warm-up and measured part): PyTorch's
  torch.cuda.max_memory_reserved(), ccalloc's stats()["reserved_bytes_peak"]
  (PyTorch refuses its own memory statistics with a plug-in allocator);
  the measured part alone too, after a peak reset at the warm-up's end.
  Driver: torch.cuda.mem_get_info() (cudaMemGetInfo) before the model is
  built and after every unit (warm-up included), outside the timed region:
  used = total - free; its maximum is a sample after a unit, not a
  continuous trace (neither allocator gives memory back inside a run unless
  a cudaMalloc fails, so a sample after a unit sees what the unit reserved),
  and it counts every process on the device.
- Same computation: each child hashes its outputs (train: the parameters
  and the losses after the last step; generate: the last generation's
  tokens and logits). With determinism on (default:
  torch.use_deterministic_algorithms(True, warn_only=True),
  CUBLAS_WORKSPACE_CONFIG=:4096:8) and no warning from an op without a
  deterministic version, the settings must agree bit for bit, else the run
  fails; otherwise a difference is reported, not failed.
- Verdicts per workload, against each PyTorch setting measured: peak
  reserved (whole process) ccalloc <= PyTorch; median unit time ccalloc <=
  1.02 x PyTorch (exact: 100 c <= 102 r).
- Exit status: 0 every run ok, outputs agree where required, every target
  met; 1 otherwise (the last line says why); 2 a bad argument (before torch
  is imported); 75 "skipped: ..." (no torch, a torch without CUDA, no
  device), scripts/gpu_session.sh's status for a step that did no GPU work.
- --out DIR: torch_e2e.json (provenance, raw runs, rows, verdicts),
  torch_e2e.csv (a row per workload and setting), torch_e2e.md (the table
  printed); rewritten after every child, so a run cut short keeps what ran.

The pure parts (arguments, the child protocol, rows, ratios, verdicts,
writers) are tested without torch or a GPU by tests/bench/test_torch_e2e.py.
"""
import argparse
import csv
import ctypes
import datetime
import hashlib
import io
import json
import os
import platform
import shlex
import signal
import statistics
import subprocess
import sys
import time
import traceback
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONF = "PYTORCH_CUDA_ALLOC_CONF"
RESULT_PREFIX = "torch_e2e result: "
EXIT_SKIPPED = 75
SETTINGS = ("ccalloc", "pytorch", "pytorch-expandable")
REFERENCES = ("pytorch", "pytorch-expandable")  # what ccalloc is held against
TIME_TARGET = (102, 100)  # ccalloc's median within 2 %: 100 * ccalloc <= 102 * reference
# name: (unit, what it is); the sizes are in the child's workload functions
WORKLOADS = {
    "train": ("step", "GPT-style decoder, 8 layers, 768 wide, 12 heads, vocabulary 16384, batch 8 x 512 "
                      "tokens: bf16 autocast forward, cross-entropy, backward, AdamW, zero_grad(set_to_none)"),
    "generate": ("token", "GPT-2 small (12 layers, 768, 12 heads, vocabulary 50257) in bf16, batch 8, "
                          "128-token prompt, greedy decoding, KV cache grown by torch.cat"),
}
GEN_PROMPT = 128
GEN_CONTEXT = 1024
# option: (default, low, high)
COUNTS = {"steps": (20, 1, 1000), "generations": (5, 1, 200), "tokens": (64, 2, GEN_CONTEXT - GEN_PROMPT),
          "warmup": (2, 0, 100), "rounds": (1, 1, 20), "seed": (0, 0, 2**31 - 1), "timeout": (600, 1, 86400)}
REQUIRED = {"unit": str, "times_ns": list, "peak_reserved": int, "peak_reserved_measured": int,
            "peak_allocated": int, "driver_used_base": int, "driver_used_peak": int, "checksum": str,
            "deterministic": bool, "nondeterministic": list, "torch": str, "device": str}


# ---- arguments ------------------------------------------------------------------

def count(name):
    """argparse type: plain decimal digits in COUNTS[name]'s range."""
    _, lo, hi = COUNTS[name]

    def parse(v):
        if not v.isdigit() or not v.isascii() or len(v) > 12 or not lo <= int(v) <= hi:
            raise argparse.ArgumentTypeError("'%s' is not a whole number in %d..%d" % (v, lo, hi))
        return int(v)
    return parse


def names(known, what):
    """argparse type: a comma-separated list of KNOWN names, each once."""
    def parse(v):
        got = v.split(",")
        for n in got:
            if n not in known:
                raise argparse.ArgumentTypeError("unknown %s '%s' (known: %s)" % (what, n, ",".join(known)))
        if len(set(got)) != len(got):
            raise argparse.ArgumentTypeError("'%s' names a %s twice" % (v, what))
        return tuple(got)
    return parse


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="torch_e2e.py", description=__doc__.split("\n")[0],
                                 epilog="The top of this file states what is measured and how.")
    ap.add_argument("--out", help="folder for torch_e2e.json, .csv and .md (made if missing)")
    ap.add_argument("--workloads", type=names(tuple(WORKLOADS), "workload"), default=tuple(WORKLOADS))
    ap.add_argument("--settings", type=names(SETTINGS, "setting"), default=SETTINGS)
    for name, (default, lo, hi) in COUNTS.items():
        ap.add_argument("--" + name, type=count(name), default=default, help="%d..%d (default %d)" % (lo, hi, default))
    ap.add_argument("--no-deterministic", dest="deterministic", action="store_false",
                    help="let PyTorch pick nondeterministic kernels (outputs then need not agree)")
    ap.add_argument("--child", nargs=2, metavar=("WORKLOAD", "SETTING"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.out is not None and not args.out:
        ap.error("--out needs a folder name")
    if args.out and os.path.exists(args.out) and not os.path.isdir(args.out):
        ap.error("--out '%s' exists and is not a folder" % args.out)
    if args.child and (args.child[0] not in WORKLOADS or args.child[1] not in SETTINGS):
        ap.error("--child wants a workload and a setting")
    return args


# ---- the child: one workload on one allocator, in a fresh process ------------------------------

class TorchMeter:
    """PyTorch's own allocator (either setting): its memory statistics."""

    def __init__(self, torch):
        self.cuda = torch.cuda
        self.describe = "PyTorch's caching allocator, %s=%s" % (CONF, os.environ.get(CONF, "(unset)"))

    def peaks(self):
        return self.cuda.max_memory_reserved(), self.cuda.max_memory_allocated()

    def reset(self):
        self.cuda.reset_peak_memory_stats()


class CcallocMeter:
    """ccalloc as PyTorch's allocator: its stats (PyTorch refuses its own)."""

    def __init__(self, torch):
        import ccalloc
        import ccalloc.plug
        import ccalloc.torch
        self.ct, self.plug, self.torch = ccalloc.torch, ccalloc.plug, torch
        self.describe = "ccalloc.torch.enable() (library %s; CCALLOC_CONF=%s)" % (
            ccalloc.library_path(), os.environ.get("CCALLOC_CONF", "(unset)"))

    def peaks(self):
        s = self.ct.stats()
        return s["reserved_bytes_peak"], s["allocated_bytes_peak"]

    def reset(self):
        self.plug.allocator(self.torch.cuda.current_device()).reset_peak_stats()


def start(setting):
    """torch, with SETTING's allocator in place before any CUDA allocation, and its meter."""
    if setting == "ccalloc":
        pkg = os.path.join(ROOT, "allocator", "python")
        if os.path.isdir(pkg):
            sys.path.insert(0, pkg)
        import ccalloc.torch
        ccalloc.torch.enable()
    import torch
    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA device visible to PyTorch in the child")
    return torch, (CcallocMeter if setting == "ccalloc" else TorchMeter)(torch)


def gpt(torch, vocab, ctx, d, heads, layers):
    """A GPT-2-style decoder in plain torch.nn; forward(ids, caches, past)
    grows each layer's KV cache (a [k, v] list) by torch.cat when caches is given."""
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x, mask, cache):
            b, t, _ = x.shape
            q, k, v = (z.view(b, t, heads, d // heads).transpose(1, 2) for z in self.qkv(self.ln1(x)).split(d, 2))
            if cache is not None:
                if cache:
                    k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
                cache[:] = [k, v]
            att = ((q @ k.transpose(-2, -1)) * (d // heads) ** -0.5).masked_fill(mask, float("-inf")).softmax(-1)
            x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln = nn.LayerNorm(d)
            self.register_buffer("causal", torch.ones(ctx, ctx, dtype=torch.bool).triu(1), persistent=False)

        def forward(self, ids, caches=None, past=0):
            t = ids.shape[1]
            x = self.tok(ids) + self.pos(torch.arange(past, past + t, device=ids.device))
            mask = self.causal[past:past + t, :past + t]
            for i, blk in enumerate(self.blocks):
                x = blk(x, mask, None if caches is None else caches[i])
            return self.ln(x) @ self.tok.weight.T  # the head tied to the embedding

    return GPT()


def digest(tensors):
    """sha256 of the tensors' bytes, in order (ctypes: no numpy needed); 16 hex digits."""
    h = hashlib.sha256()
    for t in tensors:
        c = t.detach().contiguous().cpu()
        h.update(ctypes.string_at(c.data_ptr(), c.numel() * c.element_size()))
    return h.hexdigest()[:16]


class Clock:
    """Runs units: timed between two synchronizes when recording; the driver's
    used bytes sampled after every unit, outside the timed region."""

    def __init__(self, torch):
        self.cuda, self.recording, self.times, self.other = torch.cuda, False, [], []
        free, total = self.cuda.mem_get_info()
        self.base = self.used = total - free

    def sample(self):
        free, total = self.cuda.mem_get_info()
        self.used = max(self.used, total - free)

    def unit(self, fn, other=False):
        self.cuda.synchronize()
        t0 = time.perf_counter_ns()
        r = fn()
        self.cuda.synchronize()
        t1 = time.perf_counter_ns()
        if self.recording:
            (self.other if other else self.times).append(t1 - t0)
        self.sample()
        return r


def train(torch, args):
    """(iteration, checksum): one AdamW step per iteration."""
    vocab, seq, batch = 16384, 512, 8
    F = torch.nn.functional
    with torch.device("cuda"):
        model = gpt(torch, vocab, seq, 768, 12, 8).train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    n = args.warmup + args.steps
    data = torch.randint(0, vocab, (n, batch, seq + 1), generator=torch.Generator().manual_seed(args.seed)).cuda()
    losses = []

    def step():
        ids = data[len(losses)]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.float().view(-1, vocab), ids[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.detach())

    def checksum():
        return digest(list(model.parameters()) + [torch.stack(losses)])
    return (lambda clock: clock.unit(step)), checksum


def generate(torch, args):
    """(iteration, checksum): one greedy generation of args.tokens tokens per iteration."""
    vocab, batch, layers = 50257, 8, 12
    with torch.device("cuda"):
        model = gpt(torch, vocab, GEN_CONTEXT, 768, 12, layers).to(torch.bfloat16).eval()
    prompt = torch.randint(0, vocab, (batch, GEN_PROMPT), generator=torch.Generator().manual_seed(args.seed)).cuda()
    last = {}

    def iteration(clock):
        with torch.no_grad():
            caches = [[] for _ in range(layers)]
            logits = clock.unit(lambda: model(prompt, caches, 0), other=True)  # the prefill
            ids = [logits[:, -1].argmax(-1, keepdim=True)]
            for i in range(args.tokens - 1):
                logits = clock.unit(lambda: model(ids[-1], caches, GEN_PROMPT + i))
                ids.append(logits[:, -1].argmax(-1, keepdim=True))
            last.update(ids=torch.cat(ids, 1), logits=logits)

    return iteration, lambda: digest([last["ids"], last["logits"]])


def measure(torch, meter, workload, args):
    """The child's record for WORKLOAD: warm-up, peak reset, measured iterations."""
    clock = Clock(torch)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        iteration, checksum = {"train": train, "generate": generate}[workload](torch, args)
        for _ in range(args.warmup):
            iteration(clock)
        whole = meter.peaks()
        meter.reset()
        clock.recording = True
        for _ in range(args.steps if workload == "train" else args.generations):
            iteration(clock)
        clock.recording = False
        torch.cuda.synchronize()
        measured = meter.peaks()
        total = checksum()
    nondet = sorted({str(w.message).split("\n")[0][:200] for w in caught if "deterministic" in str(w.message)})
    for w in caught:  # the others, shown as they would have been
        if "deterministic" not in str(w.message):
            print("warning: %s: %s" % (w.category.__name__, w.message), file=sys.stderr)
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return {"unit": WORKLOADS[workload][0], "times_ns": clock.times, "other_ns": clock.other,
            "peak_reserved": max(whole[0], measured[0]), "peak_reserved_measured": measured[0],
            "peak_allocated": max(whole[1], measured[1]), "driver_used_base": clock.base,
            "driver_used_peak": clock.used, "checksum": total, "deterministic": args.deterministic,
            "nondeterministic": nondet, "torch": "%s (CUDA %s)" % (torch.__version__, torch.version.cuda),
            "device": "%s, %d MiB" % (props.name, props.total_memory >> 20), "allocator": meter.describe}


def child_main(args):
    workload, setting = args.child
    record = {"workload": workload, "setting": setting}
    try:
        torch, meter = start(setting)
        torch.manual_seed(args.seed)
        if args.deterministic:
            torch.use_deterministic_algorithms(True, warn_only=True)
        record.update(measure(torch, meter, workload, args), status="ok")
    except Exception as e:  # reported in the record; the traceback goes to stderr
        traceback.print_exc()
        record.update(status="failed", why="%s: %s" % (type(e).__name__, str(e).split("\n")[0][:300]))
    print(RESULT_PREFIX + json.dumps(record), flush=True)
    return 0 if record["status"] == "ok" else 1


# ---- the parent: children, their records, rows, verdicts ----------------------------------------

def plan(workloads, settings, rounds):
    """(round, workload, setting) in run order: each round runs every workload's
    settings, their order rotated by one each round (drift spread over all)."""
    out = []
    for r in range(rounds):
        k = r % len(settings)
        for w in workloads:
            out += [(r, w, s) for s in settings[k:] + settings[:k]]
    return out


def child_env(setting, deterministic, environ):
    env = dict(environ)
    env.pop(CONF, None)
    env.pop("CCALLOC_PLUG_UPSTREAM", None)  # a simulated device would fail every kernel
    if setting == "pytorch-expandable":
        env[CONF] = "expandable_segments:True"
    if deterministic:
        env.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    return env


def child_argv(workload, setting, args):
    argv = [sys.executable, os.path.abspath(__file__), "--child", workload, setting]
    for name in ("steps", "generations", "tokens", "warmup", "seed"):
        argv += ["--" + name, str(getattr(args, name))]
    return argv + ([] if args.deterministic else ["--no-deterministic"])


def run_child(argv, env, timeout):
    """(returncode, stdout, stderr, timed_out); output kept when it times out."""
    try:
        r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
        return r.returncode, r.stdout, r.stderr, False
    except subprocess.TimeoutExpired as e:
        def text(b):
            return b.decode("utf-8", "replace") if isinstance(b, bytes) else (b or "")
        return None, text(e.stdout), text(e.stderr), True


def exit_text(rc):
    if rc is not None and rc < 0:
        try:
            return "killed by %s" % signal.Signals(-rc).name
        except ValueError:
            return "killed by signal %d" % -rc
    return "exited with status %s" % rc


def record_problems(rec, workload, setting):
    """What is missing or wrong in an ok record, as a list of strings."""
    bad = []
    if (rec.get("workload"), rec.get("setting")) != (workload, setting):
        bad.append("it is for %s/%s" % (rec.get("workload"), rec.get("setting")))
    for key, typ in REQUIRED.items():
        v = rec.get(key)
        if not isinstance(v, typ) or (typ is int and (isinstance(v, bool) or v < 0)):
            bad.append("%s %s" % (key, "missing" if key not in rec else "is %r" % (v,)))
    t = rec.get("times_ns")
    if isinstance(t, list) and (not t or any(isinstance(x, bool) or not isinstance(x, int) or x < 0 for x in t)):
        bad.append("times_ns is not a non-empty list of non-negative integers")
    return bad


def parse_child(workload, setting, rc, out, err, timed_out=False, timeout=None):
    """The record of one child run: its own when it printed one good result
    line and exited 0; else status 'failed' and why."""
    rec = None
    lines = [line[len(RESULT_PREFIX):] for line in out.splitlines() if line.startswith(RESULT_PREFIX)]
    if timed_out:
        why = "ran past its %s s timeout" % timeout
    elif not lines:
        why = "%s and printed no result line" % exit_text(rc)
    elif len(lines) > 1:
        why = "printed %d result lines" % len(lines)
    else:
        try:
            rec = json.loads(lines[0])
        except ValueError:
            rec = None
        if not isinstance(rec, dict):
            why = "printed a result line that is not a JSON object: %r" % lines[0][:120]
        elif rec.get("status") != "ok":
            why = "failed: %s" % rec.get("why", "status %r" % rec.get("status"))
        elif rc != 0:
            why = "%s after printing its result" % exit_text(rc)
        else:
            problems = record_problems(rec, workload, setting)
            if not problems:
                return rec
            why = "its result is incomplete: " + "; ".join(problems)
    tail = [line for line in err.splitlines() if line.strip()]
    if tail:
        why += " (stderr: %s)" % tail[-1].strip()[:200]
    return {"workload": workload, "setting": setting, "status": "failed", "why": why}


def p90(v):
    """Nearest rank: the smallest value with at least 90 % of the values at or below it."""
    s = sorted(v)
    return s[-(-9 * len(s) // 10) - 1]


def row_of(workload, setting, records):
    """One table row from the records of every round of (WORKLOAD, SETTING)."""
    row = {"workload": workload, "setting": setting, "rounds": len(records), "unit": WORKLOADS[workload][0]}
    failed = [r["why"] for r in records if r["status"] != "ok"]
    sums = sorted({r["checksum"] for r in records if r["status"] == "ok"})
    if not records:
        failed = ["not run"]
    elif len(sums) > 1:
        failed.append("outputs differ between rounds (%s)" % ", ".join(sums))
    if failed:
        return dict(row, status="failed", why="; ".join(failed))
    times = [t for r in records for t in r["times_ns"]]
    return dict(row, status="ok", why="", units=len(times), median_ns=statistics.median(times), p90_ns=p90(times),
                peak_reserved=max(r["peak_reserved"] for r in records),
                peak_reserved_measured=max(r["peak_reserved_measured"] for r in records),
                peak_allocated=max(r["peak_allocated"] for r in records),
                driver_used_base=max(r["driver_used_base"] for r in records),
                driver_used_peak=max(r["driver_used_peak"] for r in records), checksum=sums[0],
                exact=all(r["deterministic"] and not r["nondeterministic"] for r in records),
                nondeterministic=sorted({w for r in records for w in r["nondeterministic"]}))


def rows_of(workloads, settings, records):
    return [row_of(w, s, [r for r in records if (r["workload"], r["setting"]) == (w, s)])
            for w in workloads for s in settings]


def find(rows, workload, setting):
    return next((r for r in rows if (r["workload"], r["setting"]) == (workload, setting)), None)


def ratio(rows, row, ref, key):
    """ROW's KEY over the REF setting's, '%.4f'; '' when either is not measured."""
    other = find(rows, row["workload"], ref)
    if row["status"] != "ok" or other is None or other["status"] != "ok" or not other[key]:
        return ""
    return "%.4f" % (row[key] / other[key])


def outputs(rows, workload):
    """(ok, line): whether the settings of WORKLOAD computed the same thing."""
    ok = [r for r in rows if r["workload"] == workload and r["status"] == "ok"]
    if len(ok) < 2:
        return True, "outputs: %s: fewer than two settings measured, nothing to compare" % workload
    sums = {r["setting"]: r["checksum"] for r in ok}
    if len(set(sums.values())) == 1:
        return True, "outputs: %s: bit-identical across %s (sha256 %s)" % (workload, ", ".join(sums),
                                                                          ok[0]["checksum"])
    listed = ", ".join("%s %s" % kv for kv in sums.items())
    if all(r["exact"] for r in ok):
        return False, "outputs: %s: DIFFER with deterministic kernels: %s" % (workload, listed)
    why = "; ".join(sorted({w for r in ok for w in r["nondeterministic"]})) or "--no-deterministic"
    return True, "outputs: %s: differ (%s), not deterministic here: %s" % (workload, listed, why)


def mib(b):
    return "%.1f MiB" % (b / 2**20)


def ms(ns):
    return "%.3f ms" % (ns / 1e6)


def verdicts(rows, workloads):
    """Per workload and PyTorch setting measured, the two targets: dicts with
    workload, target, reference, ok (True / False; None: not measured), line."""
    out = []
    for w in workloads:
        c = find(rows, w, "ccalloc")
        unit = WORKLOADS[w][0]
        for ref in REFERENCES:
            r = find(rows, w, ref)
            if r is None or c is None:
                continue  # a setting not asked for: no verdict
            for target in ("peak", "time"):
                head = ("%s: peak reserved, ccalloc <= %s" % (w, ref) if target == "peak" else
                        "%s: median %s time, ccalloc within 2%% of %s" % (w, unit, ref))
                if c["status"] != "ok" or r["status"] != "ok":
                    out.append(dict(workload=w, target=target, reference=ref, ok=None,
                                    line="verdict: %s: NOT MEASURED (a run failed)" % head))
                    continue
                if target == "peak":
                    ok = c["peak_reserved"] <= r["peak_reserved"]
                    detail = "%s vs %s" % (mib(c["peak_reserved"]), mib(r["peak_reserved"]))
                    q = ratio(rows, c, ref, "peak_reserved")
                else:
                    ok = TIME_TARGET[1] * c["median_ns"] <= TIME_TARGET[0] * r["median_ns"]
                    detail = "%s vs %s" % (ms(c["median_ns"]), ms(r["median_ns"]))
                    q = ratio(rows, c, ref, "median_ns")
                out.append(dict(workload=w, target=target, reference=ref, ok=ok,
                                line="verdict: %s: %s (%s, ratio %s)" % (head, "PASS" if ok else "FAIL", detail, q)))
    return out


def table(rows):
    """The markdown table: one row per workload and setting, ratios to both PyTorch settings."""
    out = ["| workload | setting | peak reserved | × pytorch | × expandable | peak reserved, measured part | "
           "driver used, max | median / unit | p90 / unit | × pytorch | × expandable | units | output sha256 |",
           "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|"]
    for r in rows:
        if r["status"] != "ok":
            out.append("| %s | %s | FAILED: %s |  |  |  |  |  |  |  |  |  |  |" % (
                r["workload"], r["setting"], r["why"].replace("|", "/")))
            continue
        out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d %ss | %s |" % (
            r["workload"], r["setting"], mib(r["peak_reserved"]),
            ratio(rows, r, "pytorch", "peak_reserved") or "—",
            ratio(rows, r, "pytorch-expandable", "peak_reserved") or "—",
            mib(r["peak_reserved_measured"]), mib(r["driver_used_peak"]), ms(r["median_ns"]), ms(r["p90_ns"]),
            ratio(rows, r, "pytorch", "median_ns") or "—", ratio(rows, r, "pytorch-expandable", "median_ns") or "—",
            r["units"], r["unit"], r["checksum"]))
    return out


CSV_COLUMNS = ("workload,setting,status,rounds,unit,units,median_ns,p90_ns,peak_reserved,peak_reserved_measured,"
               "peak_allocated,driver_used_base,driver_used_peak,ratio_peak_pytorch,ratio_peak_expandable,"
               "ratio_time_pytorch,ratio_time_expandable,checksum,why").split(",")


def csv_text(rows):
    f = io.StringIO()
    w = csv.writer(f, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for r in rows:
        extra = {"ratio_peak_pytorch": ratio(rows, r, "pytorch", "peak_reserved"),
                 "ratio_peak_expandable": ratio(rows, r, "pytorch-expandable", "peak_reserved"),
                 "ratio_time_pytorch": ratio(rows, r, "pytorch", "median_ns"),
                 "ratio_time_expandable": ratio(rows, r, "pytorch-expandable", "median_ns")}
        w.writerow([extra.get(c, r.get(c, "")) for c in CSV_COLUMNS])
    return f.getvalue()


def report(rows, workloads):
    """(markdown lines, verdict dicts, output lines, exit status, closing line)."""
    vs = verdicts(rows, workloads)
    outs = [outputs(rows, w) for w in workloads]
    failed = [r for r in rows if r["status"] != "ok"]
    missed = [v for v in vs if v["ok"] is not True]
    differ = [line for ok, line in outs if not ok]
    if failed or missed or differ:
        end = "torch_e2e: NOT OK: %d of %d runs failed, %d of %d targets not met, %d workloads' outputs differ" % (
            len(failed), len(rows), len(missed), len(vs), len(differ))
        status = 1
    else:
        end = "torch_e2e: ok: every run measured, %d targets met" % len(vs)
        status = 0
    if not vs:
        end += " (no verdict: ccalloc and a PyTorch setting are both needed)"
    lines = table(rows) + [""] + [line for _, line in outs] + [v["line"] for v in vs]
    return lines, vs, outs, status, end


def commit():
    try:
        r = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if r.returncode == 0:
            dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain"], capture_output=True, text=True,
                                   timeout=10).stdout
            return r.stdout.strip() + (" (uncommitted changes)" if dirty.strip() else "")
    except (OSError, subprocess.SubprocessError):
        pass
    p = os.path.join(ROOT, ".gpudeps", "commit.txt")  # scripts/gpu_carry.sh, for a copy without .git
    if os.path.exists(p):
        return "; ".join(open(p).read().split("\n")).strip("; ") + " (from .gpudeps/commit.txt)"
    return "unknown (no git, no .gpudeps/commit.txt)"


def provenance(argv, args):
    return {"command": shlex.join([sys.executable, os.path.abspath(__file__)] + argv), "commit": commit(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
            "python": platform.python_version(), "host": platform.platform(),
            "options": {k: getattr(args, k) for k in ("steps", "generations", "tokens", "warmup", "rounds", "seed",
                                                      "timeout", "deterministic")},
            "workloads": {w: WORKLOADS[w][1] for w in args.workloads}, "settings": list(args.settings)}


def write_out(folder, prov, records, rows, lines, vs, outs, end):
    """The three files into FOLDER; False (and a message) when they cannot be written."""
    ok = [r for r in records if r["status"] == "ok"]
    prov = dict(prov, torch=sorted({r["torch"] for r in ok}), device=sorted({r["device"] for r in ok}))
    doc = {"provenance": prov, "runs": records, "rows": rows, "verdicts": vs,
           "outputs": [{"ok": o, "line": line} for o, line in outs], "result": end}
    files = {"torch_e2e.json": json.dumps(doc, indent=1) + "\n", "torch_e2e.csv": csv_text(rows),
             "torch_e2e.md": "\n".join(["# torch_e2e", "", "- command: `%s`" % prov["command"],
                                        "- commit: " + prov["commit"], "- date: " + prov["date"],
                                        "- torch: " + ", ".join(prov["torch"]),
                                        "- device: " + ", ".join(prov["device"]), ""] + lines + ["", end]) + "\n"}
    try:
        os.makedirs(folder, exist_ok=True)
        for name, text in files.items():
            with open(os.path.join(folder, name), "w") as f:
                f.write(text)
    except OSError as e:
        # the path refused: the folder (it could not be made) or one of its files
        print("torch_e2e: cannot write %s: %s" % (e.filename or folder, e.strerror or e), file=sys.stderr)
        return False
    return True


def cuda_missing():
    """Why no GPU work can be done here, or None."""
    try:
        import torch
    except ImportError as e:
        return "PyTorch is not installed (%s)" % e
    if getattr(getattr(torch, "version", None), "cuda", None) is None:
        return "this PyTorch (%s) is built without CUDA" % getattr(torch, "__version__", "?")
    if not torch.cuda.is_available():
        return "no CUDA device visible to PyTorch"
    return None


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    if args.child:
        return child_main(args)
    why = cuda_missing()
    if why:
        print("skipped: " + why)
        return EXIT_SKIPPED
    if os.environ.get(CONF):
        print("note: %s=%s is not passed on: the pytorch rows are PyTorch's defaults" % (CONF, os.environ[CONF]),
              file=sys.stderr)
    prov, records = provenance(argv, args), []
    for r, w, s in plan(args.workloads, args.settings, args.rounds):
        t0 = time.monotonic()
        rc, out, err, late = run_child(child_argv(w, s, args), child_env(s, args.deterministic, os.environ),
                                       args.timeout)
        rec = parse_child(w, s, rc, out, err, late, args.timeout)
        records.append(dict(rec, round=r + 1))
        print("round %d, %s, %s: %s (%.1f s)" % (r + 1, w, s, rec["status"] if rec["status"] == "ok" else
                                                 "FAILED: " + rec["why"], time.monotonic() - t0), file=sys.stderr)
        rows = rows_of(args.workloads, args.settings, records)
        lines, vs, outs, status, end = report(rows, args.workloads)
        written = not args.out or write_out(args.out, prov, records, rows, lines, vs, outs, end)
    print("\n".join(lines))
    print(end)
    return status if written else 1


if __name__ == "__main__":
    sys.exit(main())
