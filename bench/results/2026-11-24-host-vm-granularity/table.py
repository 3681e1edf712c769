import csv, sys
gs = ["2M", "4M", "8M", "16M", "32M"]
data = {}
order = []
for g in gs:
    for r in csv.DictReader(open(f"g{g}/results.csv")):
        key = (r["trace"], r["strategy"])
        if r["trace"] not in order: order.append(r["trace"])
        data[(g,) + key] = r
def cell(r):
    return f'{float(r["ratio"]):.3f} / {int(r["upstream_allocs"])+int(r["upstream_frees"])} / {float(r["driver_total_ms"]):.2f}'
print("| trace | classic growth | " + " | ".join(f"expandable, {g} pages" for g in gs) + " |")
print("|---|" + "--:|" * (len(gs) + 1))
for t in order:
    c = data[("2M", t, "ccalloc-growth")]
    row = [cell(c)] + [cell(data[(g, t, "ccalloc-expandable")]) for g in gs]
    print(f"| {t} | " + " | ".join(row) + " |")
# how many traces does each page beat classic on total ms with driver
for g in gs:
    wins = sum(float(data[(g,t,"ccalloc-expandable")]["driver_total_ms"]) < float(data[("2M",t,"ccalloc-growth")]["driver_total_ms"]) for t in order)
    mem = sum(float(data[(g,t,"ccalloc-expandable")]["ratio"]) <= float(data[("2M",t,"ccalloc-growth")]["ratio"]) for t in order)
    worst = max(float(data[(g,t,"ccalloc-expandable")]["ratio"]) for t in order)
    print(f"{g}: faster with driver on {wins}/{len(order)}, peak <= classic on {mem}/{len(order)}, worst ratio {worst:.3f}")
