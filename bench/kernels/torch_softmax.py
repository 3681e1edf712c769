#!/usr/bin/env python3
"""torch_softmax.py — time torch.softmax on the shapes cck_bench uses, on a GPU.

    python3 bench/kernels/torch_softmax.py [--reps 20] [--csv torch_softmax.csv]
    python3 bench/kernels/torch_softmax.py --list-shapes   # one ROWSxCOLS a line, no torch needed

Same shapes and method as cck_bench's main softmax table: 4096 x {128, 1000,
4096, 32768} and the engine's softmax heads, 8 x 10 and 1024 x 10, float32;
one launch per rep timed with CUDA events, L2 flushed (a fill of twice its
size) before each; bandwidth counts read x + write y = 8 * rows * cols bytes
and is divided by a device-to-device copy of the same bytes measured in this
run. Prints "skipped: ..." and exits 0 when torch or a CUDA device is absent.
The CSV is opened before anything is timed, as cck_bench's: one that cannot
be written (a missing directory, a directory, a full disk) is
"torch_softmax.py: cannot write PATH: REASON", exit 1, with nothing timed
or, failing at its close, after the table.
scripts/gpu_session.sh runs it (step torch_softmax) right after cck_bench.
"""
import argparse
import statistics
import sys

# the shapes of softmax_shapes in bench/kernels/cck_bench.c: the CTest
# cck_bench_torch_same_shapes compares both programs' --list-shapes
SHAPES = [(4096, 128), (4096, 1000), (4096, 4096), (4096, 32768), (8, 10), (1024, 10)]


def reps(text):
    """--reps as cck_bench reads it: ASCII digits in 1..1000000 (int() took "+5", "1_000", 0 and -1), leading
    zeros dropped before int() (which refuses a text of more than 4300 digits: 5000 zeros and a 7 are 7)."""
    digits = text.lstrip("0") or "0"
    if text.isascii() and text.isdigit() and len(digits) <= 7 and 1 <= int(digits) <= 1000000:
        return int(digits)
    raise argparse.ArgumentTypeError("'%s' is not a count in 1..1000000 (plain decimal)" % text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=reps, default=20, help="timed launches per configuration, 1..1000000 (default 20)")
    ap.add_argument("--csv", default="torch_softmax.csv")
    ap.add_argument("--list-shapes", action="store_true", help="print the shapes, one ROWSxCOLS a line, and exit")
    args = ap.parse_args()
    if args.list_shapes:
        for rows, cols in SHAPES:
            print(f"{rows}x{cols}")
        return 0
    try:
        import torch
    except ImportError:
        print("skipped: torch is not installed")
        return 0
    if not torch.cuda.is_available():
        print("skipped: no CUDA device visible to torch")
        return 0
    try:
        csv = open(args.csv, "w")  # before anything is timed
    except OSError as e:
        return cannot_write(args.csv, e)
    dev = torch.device("cuda:0")
    props = torch.cuda.get_device_properties(dev)
    l2 = getattr(props, "L2_cache_size", 64 << 20)
    flush = torch.empty(2 * l2, dtype=torch.uint8, device=dev)

    def time_ms(fn):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        out = []
        for r in range(args.reps + 1):  # first rep: warm-up
            flush.fill_(r & 0xFF)
            start.record()
            fn()
            end.record()
            end.synchronize()
            if r:
                out.append(start.elapsed_time(end))
        return statistics.median(out), min(out), max(out)

    print(f"## torch {torch.__version__}, {props.name}\n")
    print("| op | shape | median ms | spread ms | GB/s | vs copy |")
    print("|---|---|---|---|---|---|")
    rows_csv = ["device,op,rows,cols,median_ms,min_ms,max_ms,gbps,frac_of_copy"]
    for rows, cols in SHAPES:
        g = torch.Generator(device=dev).manual_seed(cols)
        x = (torch.rand(rows, cols, device=dev, generator=g) * 2 - 1) * 8
        y = torch.empty_like(x)
        ref = torch.softmax(x.double(), dim=-1)
        got = torch.softmax(x, dim=-1)
        err = ((got.double() - ref).abs() / ref.abs().clamp_min(1e-30)).max().item()
        if err > 1e-4:
            print(f"FAILED correctness {rows}x{cols}: relative error {err:.3g}")
            csv.close()
            return 1
        nbytes = 2 * x.numel() * 4
        for op, fn in (("copy", lambda: y.copy_(x)), ("torch.softmax", lambda: torch.softmax(x, dim=-1))):
            med, lo, hi = time_ms(fn)
            gbps = nbytes / med * 1e-6
            if op == "copy":
                copy_gbps = gbps
            frac = gbps / copy_gbps
            print(f"| {op} | {rows}x{cols} | {med:.4f} | {lo:.4f}–{hi:.4f} | {gbps:.1f} | {100 * frac:.1f}% |")
            rows_csv.append(f'"{props.name}",{op},{rows},{cols},{med:.6f},{lo:.6f},{hi:.6f},{gbps:.3f},{frac:.4f}')
    try:
        with csv:
            csv.write("\n".join(rows_csv) + "\n")
    except OSError as e:
        return cannot_write(args.csv, e)
    print(f"\nCSV: {args.csv}")
    return 0


def cannot_write(path, e):
    print(f"torch_softmax.py: cannot write {path}: {e.strerror or e}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
