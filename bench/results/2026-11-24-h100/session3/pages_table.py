"""The GPU page-size table: each `ccbench replay -s ccalloc-cuda -s
ccalloc-cuda-expandable --vm-granularity G` run (rG/results.csv), expandable
against the classic strategy OF THE SAME RUN (classic does not depend on G,
so its three runs also show the run-to-run spread). Cells: peak reserved /
live-peak lower bound, upstream calls (allocs+frees), total ms of the replay
on the GPU (median of 3)."""
import csv

gs = ["2M", "8M", "32M"]
d, order = {}, []
for g in gs:
    for r in csv.DictReader(open(f"r{g}/results.csv")):
        if r["trace"] not in order:
            order.append(r["trace"])
        d[(g, r["trace"], r["strategy"])] = r


def cell(r):
    return f'{float(r["ratio"]):.3f} / {int(r["upstream_allocs"]) + int(r["upstream_frees"])} / {float(r["total_ms"]):.2f}'


print("| trace | " + " | ".join(f"classic (run {g}) | expandable, {g} pages" for g in gs) + " |")
print("|---|" + "--:|" * (2 * len(gs)))
for t in order:
    print(f"| {t} | " + " | ".join(f'{cell(d[(g, t, "ccalloc-cuda")])} | {cell(d[(g, t, "ccalloc-cuda-expandable")])}'
                                   for g in gs) + " |")
print()
for g in gs:
    e = [d[(g, t, "ccalloc-cuda-expandable")] for t in order]
    c = [d[(g, t, "ccalloc-cuda")] for t in order]
    fast = sum(float(x["total_ms"]) < float(y["total_ms"]) for x, y in zip(e, c))
    mem = sum(float(x["ratio"]) <= float(y["ratio"]) for x, y in zip(e, c))
    worst = max(float(x["ratio"]) for x in e)
    print(f"- {g} pages: faster than classic in the same run on {fast} of {len(order)} traces; "
          f"peak reserved at most classic's on {mem}; worst peak {worst:.3f}x the live peak")
