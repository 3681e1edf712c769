#!/usr/bin/env python3
"""summary.py DIR... — the summary tables of bench/results/2026-11-29-iterations
from each DIR's iterations.csv (ccbench replay --iterations 5): which strategies
call upstream after the first iteration and on which traces, first vs later
calls and peaks on the recorded traces, and each strategy's total time with
the driver's cost against ccalloc-growth's (the classic default). Standard
library only; markdown on stdout."""
import csv
import sys

GENERATED = ["uniform", "lognormal", "mlp", "models", "adversarial"]
# traces with release events (empty_cache / trim / domain_release): they do not
# repeat their work without releasing, so calls after the first iteration are theirs
RELEASING = {"ccrun-resident", "torch-multi-model"}


def mib(b):
    return f"{int(b) / 2**20:.0f}" if b else "—"


def calls(r, part):
    a, f = r[f"{part}_upstream_allocs"], r[f"{part}_upstream_frees"]
    return None if a == "" else int(a) + int(f)


def load(d):
    rows = list(csv.DictReader(open(f"{d}/iterations.csv")))
    traces = list(dict.fromkeys(r["trace"] for r in rows))
    strategies = list(dict.fromkeys(r["strategy"] for r in rows))
    return {(r["trace"], r["strategy"]): r for r in rows}, traces, strategies


def main():
    for d in sys.argv[1:]:
        cell, traces, strategies = load(d)
        real = [t for t in traces if t not in GENERATED]
        print(f"## {d}\n")
        print("### Upstream calls after the first iteration\n")
        print("| strategy | traces that repeat their work with calls after the first iteration (later allocs+frees) | "
              "traces with release events (calls first → later) |")
        print("|---|---|---|")
        for s in strategies:
            rep, rel = [], []
            for t in traces:
                r = cell[(t, s)]
                later, first = calls(r, "later"), calls(r, "first")
                if later is None:
                    continue
                if t in RELEASING:
                    rel.append(f"{t} {first} → {later}")
                elif later:
                    rep.append(f"{t} ({r['later_upstream_allocs']}+{r['later_upstream_frees']})")
            if calls(cell[(traces[0], s)], "first") is None:
                print(f"| {s} | — (no device) | — |")
            else:
                print(f"| {s} | {', '.join(rep) if rep else 'none'} | {', '.join(rel)} |")
        print("\n### Recorded traces: upstream calls first / later, peak reserved MiB first / later\n")
        print("| strategy | " + " | ".join(real) + " |")
        print("|---|" + "--:|" * len(real))
        for s in strategies:
            if calls(cell[(real[0], s)], "first") is None:
                continue
            cells = []
            for t in real:
                r = cell[(t, s)]
                cells.append(f"{calls(r, 'first')} / {calls(r, 'later')}, "
                             f"{mib(r['first_peak_reserved'])} / {mib(r['later_peak_reserved'])}")
            print(f"| {s} | " + " | ".join(cells) + " |")
        ref = "ccalloc-growth" if "ccalloc-growth" in strategies else None
        print("\n### Total ms of the 5 iterations with the driver's cost\n")
        head = "| strategy | all traces, ms |"
        if ref:
            head += " × ccalloc-growth's (all) | traces within growth's + 5% |"
        print(head)
        print("|---|--:|" + ("--:|--:|" if ref else ""))
        for s in strategies:
            ms = [cell[(t, s)]["driver_total_ms"] for t in traces]
            if any(m == "" for m in ms):
                continue
            tot = sum(float(m) for m in ms)
            line = f"| {s} | {tot:.1f} |"
            if ref:
                g = [float(cell[(t, ref)]["driver_total_ms"]) for t in traces]
                within = sum(float(m) <= 1.05 * x for m, x in zip(ms, g))
                line += f" {tot / sum(g):.2f} | {within} of {len(traces)} |"
            print(line)
        pair = [x for x in ("ccalloc-growth", "ccalloc-expandable") if x in strategies]
        if "ccalloc-expandable" not in pair:  # another pair (e.g. ccalloc-default): every strategy
            pair = list(strategies)
        print("\n### Per trace: ms with the driver's cost, first / later (iterations 2..5) / total\n")
        print("| trace | " + " | ".join(pair) + " |")
        print("|---|" + "--:|" * len(pair))
        for t in traces:
            cells = []
            for s in pair:
                r = cell[(t, s)]
                cells.append(f"{float(r['first_driver_total_ms']):.2f} / {float(r['later_driver_total_ms']):.2f} / "
                             f"{float(r['driver_total_ms']):.2f}")
            print(f"| {t} | " + " | ".join(cells) + " |")
        print()


main()
