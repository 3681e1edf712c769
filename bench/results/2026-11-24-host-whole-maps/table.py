# table.md from run.sh's results (run in OUT): each cell peak reserved / live-peak lower bound,
# upstream calls (allocs+frees), total ms with the driver's cost, and what stays after the trace's
# final empty_cache when that is not 0 (live blocks left)
import csv, sys
runs = [("pages2M", "ccalloc-growth", "classic growth"),
        ("pages2M", "ccalloc-expandable", "pages of 2M"),
        ("pages32M", "ccalloc-expandable", "pages of 32M"),
        ("whole2M", "ccalloc-expandable", "whole maps, chunk 128M (default)"),
        ("whole2M", "ccalloc=expandable:1,expandable_chunk:32M", "whole maps, chunk 32M"),
        ("whole2M", "ccalloc=expandable:1,expandable_chunk:0", "whole maps, no chunk")]
data, order = {}, []
for run in sorted({r for r, _, _ in runs}):
    for r in csv.DictReader(open(f"{run}/results.csv")):
        if r["trace"] not in order: order.append(r["trace"])
        data[(run, r["trace"], r["strategy"])] = r
def mib(b): return f"{int(b) / 2**20:.0f}M"
def cell(r):
    s = f'{float(r["ratio"]):.3f} / {int(r["upstream_allocs"]) + int(r["upstream_frees"])} / {float(r["driver_total_ms"]):.2f}'
    return s + (f' / {mib(r["reserved_after_empty"])} kept' if int(r["reserved_after_empty"]) else "")
print("| trace | " + " | ".join(name for _, _, name in runs) + " |")
print("|---|" + "--:|" * len(runs))
for t in order:
    print(f"| {t} | " + " | ".join(cell(data[(run, t, s)]) for run, s, _ in runs) + " |")
print()
classic = lambda t: data[("pages2M", t, "ccalloc-growth")]
for run, s, name in runs[1:]:
    rows = [data[(run, t, s)] for t in order]
    faster = sum(float(r["driver_total_ms"]) < float(classic(t)["driver_total_ms"]) for r, t in zip(rows, order))
    mem = sum(float(r["ratio"]) <= float(classic(t)["ratio"]) for r, t in zip(rows, order))
    worst = max(float(r["ratio"]) for r in rows)
    ms = sum(float(r["driver_total_ms"]) for r in rows)
    print(f"- {name}: faster than classic with the driver's cost on {faster}/{len(order)}, peak <= classic's on "
          f"{mem}/{len(order)}, worst peak ratio {worst:.3f}, {ms:.1f} ms over all traces")
print(f"- classic growth: {sum(float(classic(t)['driver_total_ms']) for t in order):.1f} ms over all traces")
