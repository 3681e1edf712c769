#!/usr/bin/env python3
"""pytorch_record.py — record a real PyTorch workload's GPU allocations and
convert them to ccbench's trace format (seq,op,id,size,stream).

Run where a GPU and PyTorch are present (the lent GPU machine):

    python3 bench/scripts/pytorch_record.py --workload mlp-infer -o bench/traces/pytorch-mlp-infer.csv
    python3 bench/scripts/pytorch_record.py --workload transformer-train -o bench/traces/pytorch-tf-train.csv
    python3 bench/scripts/pytorch_record.py --convert snapshot.pickle -o out.csv   # an existing snapshot

Without torch or without CUDA it prints "skipped: ..." and exits 0.

How: torch.cuda.memory._record_memory_history() records every caching-
allocator event; torch.cuda.memory._snapshot()["device_traces"] lists them
with action, addr, size and stream. We keep 'alloc' and 'free_completed'
(the moment the block really returned to PyTorch's pool; 'free_requested'
is kept instead when a snapshot has no completed frees), pair them by
address, number streams in order of first use (0 = the default stream) and
write one section. Sizes are PyTorch's block sizes (the request rounded up
to 512 bytes), which replay through ccalloc identically since ccalloc rounds
to 512 bytes too; this is said in the header comment of every trace.
Blocks alive before recording started have no alloc event: their frees are
dropped (counted in the header comment).
"""
import argparse
import datetime
import pickle
import platform
import sys


def skipped(why):
    print("skipped: " + why)
    sys.exit(0)


def workload(torch, name, steps):
    dev = "cuda"
    nn = torch.nn
    if name == "mlp-infer":
        model = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                              nn.Linear(4096, 1024)).to(dev).eval()
        g = torch.Generator().manual_seed(1)
        with torch.no_grad():
            for _ in range(steps):
                batch = int(torch.randint(1, 257, (1,), generator=g))
                x = torch.randn(batch, 1024, device=dev)
                y = model(x)
                del x, y
        del model
    elif name == "transformer-train":
        layer = nn.TransformerEncoderLayer(d_model=512, nhead=8, dim_feedforward=2048, batch_first=True)
        model = nn.TransformerEncoder(layer, num_layers=4).to(dev)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        g = torch.Generator().manual_seed(1)
        for _ in range(steps):
            seq = int(torch.randint(32, 513, (1,), generator=g))
            x = torch.randn(16, seq, 512, device=dev)
            loss = model(x).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            del x, loss
        del model, opt
    else:
        raise SystemExit("unknown workload " + name)
    torch.cuda.synchronize()


def convert(snapshot, out, provenance):
    traces = snapshot.get("device_traces", [])
    events = [e for dev in traces for e in dev]
    have_completed = any(e.get("action") == "free_completed" for e in events)
    free_action = "free_completed" if have_completed else "free_requested"
    streams, live, lines = {}, {}, []
    next_id, dropped = 1, 0
    for e in events:
        action = e.get("action")
        if action not in ("alloc", free_action):
            continue
        s = e.get("stream", 0) or 0
        if s not in streams:
            streams[s] = 0 if s == 0 else len([k for k in streams if k != 0]) + 1
        sn = streams[s]
        if action == "alloc":
            live[e["addr"]] = (next_id, e["size"], sn)
            lines.append("alloc,%d,%d,%d" % (next_id, e["size"], sn))
            next_id += 1
        else:
            if e["addr"] not in live:
                dropped += 1
                continue
            i, size, sn0 = live.pop(e["addr"])
            lines.append("free,%d,%d,%d" % (i, size, sn0))
    with open(out, "w") as f:
        f.write("# ccalloc trace v1\n")
        for p in provenance:
            f.write("# %s\n" % p)
        f.write("# sizes are PyTorch block sizes (requests rounded up to 512 B); frees are '%s' events\n"
                % free_action)
        f.write("# %d frees of blocks allocated before recording were dropped; %d blocks live at the end\n"
                % (dropped, len(live)))
        f.write("seq,op,id,size,stream\n")
        for k, line in enumerate(lines):
            f.write("%d,%s\n" % (k, line))
    print("wrote %s: %d events, %d streams" % (out, len(lines), len(streams)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workload", default="mlp-infer", choices=["mlp-infer", "transformer-train"])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--convert", metavar="SNAPSHOT.pickle", help="convert an existing snapshot instead")
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()
    if args.convert:
        with open(args.convert, "rb") as f:
            snap = pickle.load(f)
        convert(snap, args.output, ["source: converted from %s by pytorch_record.py" % args.convert])
        return
    try:
        import torch
    except ImportError:
        skipped("PyTorch is not installed")
    if not torch.cuda.is_available():
        skipped("no CUDA device visible to PyTorch")
    torch.cuda.empty_cache()
    torch.cuda.memory._record_memory_history(max_entries=1000000)
    workload(torch, args.workload, args.steps)
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    prov = ["source: PyTorch %s workload %s, %d steps (bench/scripts/pytorch_record.py)"
            % (torch.__version__, args.workload, args.steps),
            "device: %s; host: %s; recorded %s" % (torch.cuda.get_device_name(0), platform.platform(),
                                                 datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"))]
    convert(snap, args.output, prov)


if __name__ == "__main__":
    main()
