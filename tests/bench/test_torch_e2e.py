"""bench/scripts/torch_e2e.py without torch or a GPU: what a GPU session relies on.

- Arguments: a bad value exits 2 with the reason before torch is imported
  (a stand-in torch records every import) and writes nothing.
- The skip path: no torch, a torch without CUDA, no device: "skipped: ..."
  on stdout and exit 75 (scripts/gpu_session.sh's flag), nothing written.
- The child protocol: a good result line is taken; a child that crashes,
  is killed, runs too long, prints garbage, two lines, a failure or an
  incomplete record is a failed run with the reason, never dropped: parsed
  from made-up output, from real child processes, and through main() with
  fake children in place of the workloads.
- Rows, ratios, verdicts and the exit status from synthetic records, worked
  out by hand: exact ratios, a peak one byte over PyTorch's and a median 3 %
  slower fail, exactly 2 % slower passes.
"""
import csv
import io
import json
import os
import re
import subprocess
import sys
import textwrap
import types

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "scripts"))

import torch_e2e as te  # noqa: E402

SCRIPT = os.path.join(ROOT, "bench", "scripts", "torch_e2e.py")
MiB = 1 << 20

# A module named torch, for the script run as a process: it records that it
# was imported (STANDIN_TORCH_RECORD) and has CUDA or not as the test says.
STANDIN = '''
import os
__version__ = "0.0-standin"
if os.environ.get("STANDIN_TORCH_RECORD"):
    with open(os.environ["STANDIN_TORCH_RECORD"], "a") as f:
        f.write("imported\\n")


class version:
    cuda = os.environ.get("STANDIN_TORCH_CUDA") or None


class cuda:
    @staticmethod
    def is_available():
        return os.environ.get("STANDIN_TORCH_GPU") == "1"
'''


def standin_path(tmp_path):
    d = tmp_path / "standin"
    (d / "torch").mkdir(parents=True, exist_ok=True)
    (d / "torch" / "__init__.py").write_text(STANDIN)
    return str(d)


def run_script(args, tmp_path, **env):
    e = {k: v for k, v in os.environ.items() if not k.startswith("STANDIN_")}
    e.update(PYTHONPATH=standin_path(tmp_path), PYTHONDONTWRITEBYTECODE="1", **env)
    return subprocess.run([sys.executable, SCRIPT] + args, env=e, capture_output=True, text=True, timeout=60,
                          cwd=str(tmp_path))


# ---- arguments ---------------------------------------------------------------------------------

def test_defaults_and_values():
    a = te.parse_args([])
    assert (a.workloads, a.settings) == (("train", "generate"), ("ccalloc", "pytorch", "pytorch-expandable"))
    assert (a.steps, a.generations, a.tokens, a.warmup, a.rounds, a.seed, a.deterministic, a.out, a.child) == (
        20, 5, 64, 2, 1, 0, True, None, None)
    a = te.parse_args(["--workloads", "generate", "--settings", "pytorch,ccalloc", "--steps", "1000", "--tokens",
                       "896", "--warmup", "0", "--rounds", "20", "--no-deterministic", "--out", "o"])
    assert (a.workloads, a.settings, a.steps, a.tokens, a.warmup, a.rounds, a.deterministic, a.out) == (
        ("generate",), ("pytorch", "ccalloc"), 1000, 896, 0, 20, False, "o")


BAD = [
    (["--steps", "0"], r"argument --steps: '0' is not a whole number in 1\.\.1000"),
    (["--steps", "1001"], r"argument --steps: '1001' is not a whole number in 1\.\.1000"),
    (["--steps", "x"], r"'x' is not a whole number"),
    (["--steps", "+3"], r"'\+3' is not a whole number"),
    (["--steps", " 3"], r"' 3' is not a whole number"),
    (["--steps", "-1"], r"argument --steps: '-1' is not a whole number"),
    (["--steps", "\u00b2"], r"is not a whole number"),
    (["--steps", "9" * 30], r"is not a whole number in 1\.\.1000"),
    (["--steps"], r"argument --steps: expected one argument"),
    (["--generations", "0"], r"argument --generations: '0' is not a whole number in 1\.\.200"),
    (["--tokens", "1"], r"argument --tokens: '1' is not a whole number in 2\.\.896"),
    (["--tokens", "897"], r"'897' is not a whole number in 2\.\.896"),
    (["--warmup", "101"], r"argument --warmup: '101' is not a whole number in 0\.\.100"),
    (["--rounds", "21"], r"argument --rounds: '21' is not a whole number in 1\.\.20"),
    (["--timeout", "0"], r"argument --timeout: '0' is not a whole number"),
    (["--seed", "2147483648"], r"argument --seed: '2147483648' is not a whole number in 0\.\.2147483647"),
    (["--workloads", "trian"], r"argument --workloads: unknown workload 'trian' \(known: train,generate\)"),
    (["--workloads", "train,train"], r"'train,train' names a workload twice"),
    (["--workloads", ""], r"unknown workload ''"),
    (["--settings", "pytorch,cuda"], r"argument --settings: unknown setting 'cuda'"),
    (["--out", ""], r"--out needs a folder name"),
    (["--out", "a-file"], r"--out 'a-file' exists and is not a folder"),
    (["--child", "train", "cuda"], r"--child wants a workload and a setting"),
    (["--no-deterministic=yes"], r"ignored explicit argument 'yes'"),
]


def test_bad_values_exit_2_before_torch(tmp_path):
    """Each bad value: exit 2, the reason on stderr, nothing on stdout,
    torch never imported, no file written."""
    record = tmp_path / "imports.txt"
    (tmp_path / "a-file").write_text("x")
    for args, message in BAD:
        r = run_script(args, tmp_path, STANDIN_TORCH_RECORD=str(record), STANDIN_TORCH_GPU="1",
                       STANDIN_TORCH_CUDA="12.4")
        assert r.returncode == 2, (args, r.returncode, r.stdout, r.stderr)
        assert re.search(message, r.stderr), (args, r.stderr)
        assert r.stdout == "", (args, r.stdout)
    assert not record.exists()
    assert sorted(os.listdir(tmp_path)) == ["a-file", "standin"]


# ---- skipped: no torch, no CUDA ------------------------------------------------------------------

@pytest.mark.parametrize("env, why", [
    ({"STANDIN_TORCH_CUDA": "12.4"}, "no CUDA device visible to PyTorch"),
    ({}, "this PyTorch (0.0-standin) is built without CUDA"),
])
def test_without_cuda_skips_with_75(tmp_path, env, why):
    record = tmp_path / "imports.txt"
    r = run_script(["--out", "out"], tmp_path, STANDIN_TORCH_RECORD=str(record), **env)
    assert (r.returncode, r.stdout, r.stderr) == (75, "skipped: %s\n" % why, "")
    assert record.read_text() == "imported\n"  # it did ask torch
    assert not (tmp_path / "out").exists()


def test_without_torch_skips_with_75(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    assert te.main(["--steps", "3"]) == 75
    out = capsys.readouterr().out
    assert out.startswith("skipped: PyTorch is not installed (") and out.count("\n") == 1


def test_the_skip_exit_status_is_gpu_sessions_flag():
    text = open(os.path.join(ROOT, "scripts", "gpu_session.sh")).read()
    assert te.EXIT_SKIPPED == 75 and "exits 75 and is flagged" in text


# ---- the child protocol ------------------------------------------------------------------------

def good(workload="train", setting="ccalloc", **over):
    rec = {"workload": workload, "setting": setting, "status": "ok", "unit": te.WORKLOADS[workload][0],
           "times_ns": [10, 20, 30], "other_ns": [], "peak_reserved": 100 * MiB, "peak_reserved_measured": 90 * MiB,
           "peak_allocated": 80 * MiB, "driver_used_base": 500 * MiB, "driver_used_peak": 700 * MiB,
           "checksum": "0123456789abcdef", "deterministic": True, "nondeterministic": [],
           "torch": "2.99 (CUDA 13.0)", "device": "Fake GPU, 1000 MiB", "allocator": "x"}
    rec.update(over)
    return rec


def line(rec):
    return te.RESULT_PREFIX + json.dumps(rec) + "\n"


def parsed(rc, out, err="", **kw):
    return te.parse_child("train", "ccalloc", rc, out, err, **kw)


def test_a_good_result_line_is_taken():
    rec = good()
    assert parsed(0, "some output\n" + line(rec), "a warning\n") == rec


@pytest.mark.parametrize("rc, out, err, why", [
    (0, "hello\n", "", "exited with status 0 and printed no result line"),
    (1, "", "Traceback ...\nImportError: no ccalloc\n",
     "exited with status 1 and printed no result line (stderr: ImportError: no ccalloc)"),
    (-9, "", "", "killed by SIGKILL and printed no result line"),
    (-11, line(good()), "", "killed by SIGSEGV after printing its result"),
    (3, line(good()), "", "exited with status 3 after printing its result"),
    (0, te.RESULT_PREFIX + "{not json\n", "", "printed a result line that is not a JSON object: '{not json'"),
    (0, te.RESULT_PREFIX + "[1, 2]\n", "", "printed a result line that is not a JSON object: '[1, 2]'"),
    (0, line(good()) * 2, "", "printed 2 result lines"),
    (1, line({"workload": "train", "setting": "ccalloc", "status": "failed", "why": "RuntimeError: CUDA error"}), "",
     "failed: RuntimeError: CUDA error"),
    (0, line({k: v for k, v in good().items() if k != "peak_reserved"}), "",
     "its result is incomplete: peak_reserved missing"),
    (0, line(good(times_ns=[])), "", "its result is incomplete: times_ns is not a non-empty list"),
    (0, line(good(times_ns=[1, -2])), "", "its result is incomplete: times_ns is not a non-empty list of non-negative integers"),
    (0, line(good(peak_reserved=True)), "", "its result is incomplete: peak_reserved is True"),
    (0, line(good(peak_reserved=-1)), "", "its result is incomplete: peak_reserved is -1"),
    (0, line(good(peak_reserved=1.5)), "", "its result is incomplete: peak_reserved is 1.5"),
    (0, line(good(setting="pytorch")), "", "its result is incomplete: it is for train/pytorch"),
])
def test_a_bad_child_is_a_failed_run_with_the_reason(rc, out, err, why):
    rec = parsed(rc, out, err)
    assert rec["status"] == "failed" and (rec["workload"], rec["setting"]) == ("train", "ccalloc")
    assert rec["why"].startswith(why), rec["why"]


def test_a_child_past_its_timeout_is_a_failed_run():
    rec = parsed(None, line(good()), "still going\n", timed_out=True, timeout=5)
    assert rec["why"] == "ran past its 5 s timeout (stderr: still going)"


CHILDREN = {  # real processes: what each prints or does, and the reason the parent gives
    "crash": ("import os, signal; print('starting', flush=True); os.kill(os.getpid(), signal.SIGKILL)",
              "killed by SIGKILL and printed no result line"),
    "garbage": ("import sys; print('torch_e2e result: \\x00\\x01 garbage'); sys.exit(0)",
                "printed a result line that is not a JSON object"),
    "raise": ("raise SystemExit('boom')", "exited with status 1 and printed no result line (stderr: boom)"),
    "sleep": ("import time; print('torch_e2e result: {}', flush=True); time.sleep(30)", "ran past its 1 s timeout"),
}


@pytest.mark.parametrize("name", sorted(CHILDREN))
def test_real_children_that_misbehave(name):
    code, why = CHILDREN[name]
    rc, out, err, late = te.run_child([sys.executable, "-c", code], dict(os.environ), 1 if name == "sleep" else 30)
    rec = parsed(rc, out, err, timed_out=late, timeout=1)
    assert rec["status"] == "failed" and rec["why"].startswith(why), rec


def test_a_real_child_with_a_good_line():
    code = "import sys; print('noise'); print(%r)" % line(good()).rstrip("\n")
    rc, out, err, late = te.run_child([sys.executable, "-c", code], dict(os.environ), 30)
    assert parsed(rc, out, err, timed_out=late) == good()


def test_child_environment_per_setting():
    caller = {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:64", "CCALLOC_PLUG_UPSTREAM": "host:1G",
              "CCALLOC_CONF": "max_reserved:4G", "PATH": "/bin"}
    ccalloc = te.child_env("ccalloc", True, caller)
    assert ccalloc == {"CCALLOC_CONF": "max_reserved:4G", "PATH": "/bin", "CUBLAS_WORKSPACE_CONFIG": ":4096:8"}
    assert "PYTORCH_CUDA_ALLOC_CONF" not in te.child_env("pytorch", False, caller)
    assert "CUBLAS_WORKSPACE_CONFIG" not in te.child_env("pytorch", False, caller)
    assert te.child_env("pytorch-expandable", True, caller)["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
    assert te.child_env("pytorch", True, dict(caller, CUBLAS_WORKSPACE_CONFIG=":16:8"))[
        "CUBLAS_WORKSPACE_CONFIG"] == ":16:8"
    assert caller["PYTORCH_CUDA_ALLOC_CONF"] == "max_split_size_mb:64"  # the caller's dict untouched


def test_child_command_carries_the_options():
    a = te.parse_args(["--steps", "7", "--generations", "3", "--tokens", "9", "--warmup", "1", "--seed", "5",
                       "--no-deterministic", "--rounds", "4", "--timeout", "9"])
    argv = te.child_argv("generate", "pytorch", a)
    assert argv[0] == sys.executable and argv[1] == SCRIPT
    assert argv[2:] == ["--child", "generate", "pytorch", "--steps", "7", "--generations", "3", "--tokens", "9",
                        "--warmup", "1", "--seed", "5", "--no-deterministic"]
    b = te.parse_args(argv[2:])
    assert (b.child, b.steps, b.generations, b.tokens, b.warmup, b.seed, b.deterministic) == (
        ["generate", "pytorch"], 7, 3, 9, 1, 5, False)


def test_plan_rotates_the_settings_each_round():
    p = te.plan(("train", "generate"), ("ccalloc", "pytorch", "pytorch-expandable"), 2)
    assert p == [(0, "train", "ccalloc"), (0, "train", "pytorch"), (0, "train", "pytorch-expandable"),
                 (0, "generate", "ccalloc"), (0, "generate", "pytorch"), (0, "generate", "pytorch-expandable"),
                 (1, "train", "pytorch"), (1, "train", "pytorch-expandable"), (1, "train", "ccalloc"),
                 (1, "generate", "pytorch"), (1, "generate", "pytorch-expandable"), (1, "generate", "ccalloc")]


# ---- rows, ratios, verdicts ------------------------------------------------------------------------

def rows_for(train, generate=None):
    """Rows from {setting: record overrides} per workload (one round each)."""
    recs = [good("train", s, **o) for s, o in train.items()]
    recs += [good("generate", s, **o) for s, o in (generate or {}).items()]
    return te.rows_of(("train", "generate") if generate else ("train",), tuple(train), recs)


BASE = {"ccalloc": dict(peak_reserved=1000 * MiB, times_ns=[10_200_000]),
        "pytorch": dict(peak_reserved=1200 * MiB, times_ns=[10_000_000]),
        "pytorch-expandable": dict(peak_reserved=1000 * MiB, times_ns=[9_900_000])}


def test_exact_ratios_and_verdicts():
    rows = rows_for(BASE)
    c = te.find(rows, "train", "ccalloc")
    assert te.ratio(rows, c, "pytorch", "peak_reserved") == "0.8333"
    assert te.ratio(rows, c, "pytorch-expandable", "peak_reserved") == "1.0000"
    assert te.ratio(rows, c, "pytorch", "median_ns") == "1.0200"
    assert te.ratio(rows, c, "pytorch-expandable", "median_ns") == "1.0303"
    vs = {(v["target"], v["reference"]): v for v in te.verdicts(rows, ("train",))}
    assert {k: v["ok"] for k, v in vs.items()} == {("peak", "pytorch"): True, ("peak", "pytorch-expandable"): True,
                                                  ("time", "pytorch"): True,  # exactly 2 % slower
                                                  ("time", "pytorch-expandable"): False}  # 3.03 % slower
    assert vs[("peak", "pytorch")]["line"] == (
        "verdict: train: peak reserved, ccalloc <= pytorch: PASS (1000.0 MiB vs 1200.0 MiB, ratio 0.8333)")
    assert vs[("time", "pytorch-expandable")]["line"] == (
        "verdict: train: median step time, ccalloc within 2% of pytorch-expandable: FAIL "
        "(10.200 ms vs 9.900 ms, ratio 1.0303)")
    lines, _, _, status, end = te.report(rows, ("train",))
    assert status == 1 and end.startswith("torch_e2e: NOT OK: 0 of 3 runs failed, 1 of 4 targets not met")


def test_a_peak_one_byte_higher_fails_and_3_percent_slower_fails():
    over = dict(BASE, ccalloc=dict(peak_reserved=1000 * MiB + 1, times_ns=[10_300_000]),
                **{"pytorch-expandable": dict(peak_reserved=1000 * MiB, times_ns=[10_000_000])})
    vs = te.verdicts(rows_for(over), ("train",))
    assert [(v["target"], v["reference"], v["ok"]) for v in vs] == [
        ("peak", "pytorch", True), ("time", "pytorch", False),
        ("peak", "pytorch-expandable", False), ("time", "pytorch-expandable", False)]


def test_all_met_is_exit_0():
    ok = dict(BASE, **{"pytorch-expandable": dict(peak_reserved=1000 * MiB, times_ns=[10_000_000])})
    lines, vs, outs, status, end = te.report(rows_for(ok, ok), ("train", "generate"))
    assert status == 0 and end == "torch_e2e: ok: every run measured, 8 targets met"
    assert "outputs: train: bit-identical across ccalloc, pytorch, pytorch-expandable (sha256 0123456789abcdef)" in lines
    assert sum(line.startswith("verdict: generate: median token time") for line in lines) == 2


def test_the_table():
    rows = rows_for(BASE)
    t = te.table(rows)
    assert len(t) == 5 and all(r.count("|") == t[0].count("|") for r in t)
    assert t[2] == ("| train | ccalloc | 1000.0 MiB | 0.8333 | 1.0000 | 90.0 MiB | 700.0 MiB | 10.200 ms | 10.200 ms "
                    "| 1.0200 | 1.0303 | 1 steps | 0123456789abcdef |")
    assert t[3].startswith("| train | pytorch | 1200.0 MiB | 1.0000 | 1.2000 |")


def test_rounds_pool_times_and_take_the_highest_peak():
    recs = [good(times_ns=list(range(1, 11)), peak_reserved=5), good(times_ns=list(range(11, 21)), peak_reserved=7)]
    r = te.row_of("train", "ccalloc", recs)
    assert (r["units"], r["median_ns"], r["p90_ns"], r["peak_reserved"], r["rounds"]) == (20, 10.5, 18, 7, 2)
    assert te.p90([5]) == 5 and te.p90(list(range(1, 11))) == 9 and te.p90(list(range(1, 12))) == 10


def test_a_failed_round_or_rounds_that_disagree_fail_the_row():
    bad = {"workload": "train", "setting": "ccalloc", "status": "failed", "why": "killed by SIGKILL"}
    r = te.row_of("train", "ccalloc", [good(), bad])
    assert (r["status"], r["why"]) == ("failed", "killed by SIGKILL")
    r = te.row_of("train", "ccalloc", [good(), good(checksum="ffff")])
    assert r["status"] == "failed" and r["why"] == "outputs differ between rounds (0123456789abcdef, ffff)"
    assert te.row_of("train", "ccalloc", [])["why"] == "not run"
    rows = te.rows_of(("train",), ("ccalloc", "pytorch"), [bad, good(setting="pytorch")])
    lines, vs, _, status, end = te.report(rows, ("train",))
    assert status == 1 and [v["ok"] for v in vs] == [None, None]
    assert "verdict: train: peak reserved, ccalloc <= pytorch: NOT MEASURED (a run failed)" in lines
    assert "| train | ccalloc | FAILED: killed by SIGKILL |" in lines[2]
    assert end.startswith("torch_e2e: NOT OK: 1 of 2 runs failed, 2 of 2 targets not met")


def test_outputs_that_differ():
    d = dict(BASE, pytorch=dict(BASE["pytorch"], checksum="ffff"))
    ok, text = te.outputs(rows_for(d), "train")
    assert not ok and text == ("outputs: train: DIFFER with deterministic kernels: ccalloc 0123456789abcdef, "
                               "pytorch ffff, pytorch-expandable 0123456789abcdef")
    warned = dict(d, ccalloc=dict(BASE["ccalloc"], nondeterministic=["op x does not have a deterministic impl"]))
    ok, text = te.outputs(rows_for(warned), "train")
    assert ok and text.endswith("not deterministic here: op x does not have a deterministic impl")
    off = {s: dict(o, deterministic=False) for s, o in d.items()}
    assert te.outputs(rows_for(off), "train") == (True, text.split(" (")[0] + " (ccalloc 0123456789abcdef, pytorch "
                                                  "ffff, pytorch-expandable 0123456789abcdef), not deterministic "
                                                  "here: --no-deterministic")


def test_csv_columns_and_values():
    rows = rows_for(BASE)
    got = list(csv.DictReader(io.StringIO(te.csv_text(rows))))
    assert list(got[0]) == te.CSV_COLUMNS
    assert (got[0]["setting"], got[0]["peak_reserved"], got[0]["ratio_peak_pytorch"], got[0]["ratio_time_expandable"],
            got[0]["median_ns"], got[0]["p90_ns"]) == ("ccalloc", str(1000 * MiB), "0.8333", "1.0303", "10200000",
                                                      "10200000")


# ---- main() with fake children -----------------------------------------------------------------------

FAKE_CHILD = textwrap.dedent('''
    import json, os, sys
    w, s = sys.argv[1], sys.argv[2]
    plan = json.loads(os.environ["FAKE_PLAN"]).get(w + "/" + s, {})
    if plan == "crash":
        os.abort()
    if plan == "garbage":
        print("torch_e2e result: <html>")
        sys.exit(0)
    rec = {"workload": w, "setting": s, "status": "ok", "unit": "step" if w == "train" else "token",
           "times_ns": [1000000], "other_ns": [], "peak_reserved": 100, "peak_reserved_measured": 90,
           "peak_allocated": 80, "driver_used_base": 5, "driver_used_peak": 200, "checksum": "abc",
           "deterministic": True, "nondeterministic": [], "torch": "fake", "device": "Fake GPU",
           "allocator": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "(unset)")}
    rec.update(plan)
    print("torch_e2e result: " + json.dumps(rec))
''')


def fake_main(monkeypatch, tmp_path, plan, argv):
    monkeypatch.setattr(te, "cuda_missing", lambda: None)
    monkeypatch.setattr(te, "child_argv", lambda w, s, args: [sys.executable, "-c", FAKE_CHILD, w, s])
    monkeypatch.setenv("FAKE_PLAN", json.dumps(plan))
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "garbage_collection_threshold:0.5")
    out = tmp_path / "out"
    return te.main(argv + ["--out", str(out)]), out


def test_main_reports_a_crashed_and_a_garbled_child(monkeypatch, tmp_path, capsys):
    plan = {"train/pytorch": "crash", "generate/pytorch-expandable": "garbage",
            "generate/ccalloc": {"peak_reserved": 50}}
    status, out = fake_main(monkeypatch, tmp_path, plan, [])
    text = capsys.readouterr()
    assert status == 1
    assert "| train | pytorch | FAILED: killed by SIGABRT and printed no result line |" in text.out
    assert "| generate | pytorch-expandable | FAILED: printed a result line that is not a JSON object: '<html>' |" \
        in text.out
    assert "verdict: generate: peak reserved, ccalloc <= pytorch: PASS (0.0 MiB vs 0.0 MiB, ratio 0.5000)" in text.out
    assert text.out.rstrip().endswith("torch_e2e: NOT OK: 2 of 6 runs failed, 4 of 8 targets not met, "
                                      "0 workloads' outputs differ")
    assert "note: PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.5 is not passed on" in text.err
    doc = json.load(open(out / "torch_e2e.json"))
    assert [(r["workload"], r["setting"], r["status"]) for r in doc["runs"]] == [
        ("train", "ccalloc", "ok"), ("train", "pytorch", "failed"), ("train", "pytorch-expandable", "ok"),
        ("generate", "ccalloc", "ok"), ("generate", "pytorch", "ok"), ("generate", "pytorch-expandable", "failed")]
    # each child saw its own setting's PYTORCH_CUDA_ALLOC_CONF, never the caller's
    assert {(r["setting"], r["allocator"]) for r in doc["runs"] if r["status"] == "ok"} == {
        ("ccalloc", "(unset)"), ("pytorch", "(unset)"), ("pytorch-expandable", "expandable_segments:True")}
    assert doc["provenance"]["command"].endswith("torch_e2e.py --out " + str(out))
    assert doc["provenance"]["options"]["steps"] == 20 and doc["result"] == text.out.rstrip().split("\n")[-1]
    assert len(list(csv.DictReader(open(out / "torch_e2e.csv")))) == 6
    md = (out / "torch_e2e.md").read_text()
    assert md.startswith("# torch_e2e\n") and "- torch: fake\n" in md and md.endswith(doc["result"] + "\n")


def test_main_all_met(monkeypatch, tmp_path, capsys):
    plan = {"train/ccalloc": {"peak_reserved": 90}, "generate/ccalloc": {"times_ns": [1020000]}}
    status, out = fake_main(monkeypatch, tmp_path, plan, ["--rounds", "2"])
    text = capsys.readouterr().out
    assert status == 0 and text.rstrip().endswith("torch_e2e: ok: every run measured, 8 targets met")
    assert "| train | ccalloc | 0.0 MiB | 0.9000 | 0.9000 |" in text
    assert len(json.load(open(out / "torch_e2e.json"))["runs"]) == 12


def test_main_outputs_that_differ_fail(monkeypatch, tmp_path, capsys):
    status, _ = fake_main(monkeypatch, tmp_path, {"train/ccalloc": {"checksum": "abd"}},
                          ["--workloads", "train", "--settings", "ccalloc,pytorch"])
    text = capsys.readouterr().out
    assert status == 1 and "outputs: train: DIFFER with deterministic kernels: ccalloc abd, pytorch abc" in text


def test_an_unwritable_out_folder_is_exit_1(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(te, "cuda_missing", lambda: None)
    monkeypatch.setattr(te, "child_argv", lambda w, s, args: [sys.executable, "-c", FAKE_CHILD, w, s])
    monkeypatch.setenv("FAKE_PLAN", "{}")
    blocker = tmp_path / "f"
    blocker.write_text("")
    assert te.main(["--workloads", "train", "--settings", "pytorch", "--out", str(blocker / "sub")]) == 1
    assert "torch_e2e: cannot write %s: " % (blocker / "sub") in capsys.readouterr().err
    # the folder made, one of its files not: that file is named, not the folder
    out = tmp_path / "out"
    (out / "torch_e2e.csv").mkdir(parents=True)
    assert te.main(["--workloads", "train", "--settings", "pytorch", "--out", str(out)]) == 1
    assert "torch_e2e: cannot write %s: Is a directory" % (out / "torch_e2e.csv") in capsys.readouterr().err


def test_the_meters_read_each_allocators_own_statistics(monkeypatch):
    """PyTorch's: max_memory_reserved/allocated, reset_peak_memory_stats;
    ccalloc's: its stats' peaks and the plug allocator's reset (PyTorch
    refuses its own statistics with a plug-in allocator)."""
    calls = []
    cuda = types.SimpleNamespace(max_memory_reserved=lambda: 7, max_memory_allocated=lambda: 5,
                                 reset_peak_memory_stats=lambda: calls.append("torch reset"),
                                 current_device=lambda: 0)
    torch = types.SimpleNamespace(cuda=cuda)
    m = te.TorchMeter(torch)
    assert m.peaks() == (7, 5)
    m.reset()
    ct = types.SimpleNamespace(stats=lambda: {"reserved_bytes_peak": 11, "allocated_bytes_peak": 3})
    plug = types.SimpleNamespace(allocator=lambda dev: types.SimpleNamespace(
        reset_peak_stats=lambda: calls.append("ccalloc reset %d" % dev)))
    pkg = types.ModuleType("ccalloc")
    pkg.library_path, pkg.plug, pkg.torch = (lambda: "/lib/libccalloc.so"), plug, ct
    monkeypatch.setitem(sys.modules, "ccalloc", pkg)
    monkeypatch.setitem(sys.modules, "ccalloc.plug", plug)
    monkeypatch.setitem(sys.modules, "ccalloc.torch", ct)
    c = te.CcallocMeter(torch)
    assert c.peaks() == (11, 3) and "/lib/libccalloc.so" in c.describe
    c.reset()
    assert calls == ["torch reset", "ccalloc reset 0"]
