"""A single-GPU training loop with one planted host sync per step, for
checking `streamscope whatif --drop-syncs` against a run without the sync
(docs/WHATIF.md, "Dropped syncs against real runs"; scripts/gpu/whatif-validate.sh).

    python examples/whatif_sync.py --host-ms 3            # sync, then 3 ms of host work
    python examples/whatif_sync.py --host-ms 3 --no-sync  # the same job without the sync
    python examples/whatif_sync.py --host-ms 0            # a GPU-bound loop with a sync

Each step: forward and backward of an MLP of --layers Linear+GELU blocks
(bf16, --dim wide, --batch rows), SGD; then the loss is read with
`.item()` (the line marked `# SYNC: item`; the host waits for the GPU),
then --host-ms of host work (a busy loop on the CPU: a data loader, a
logger, Python bookkeeping) before the next step's launches. With the
sync, the GPU idles through the host work every step; with --no-sync the
loss stays on the GPU (summed there, read once at the end), the host
launches the next step while the GPU still runs this one, and the step
time is the GPU's.

The job times itself on the GPU's clock: a CUDA event before each step's
first launch; the step time is the gap between consecutive events, so it
is the pace of the loop with or without the sync. It prints one JSON line:
sync, host_ms, steps, median_step_ms and mean_step_ms (steps after the
first --skip), sync_line (the line of the planted sync, for --drop-syncs).
"""

import argparse
import json
import statistics
import time

import torch
import torch.nn as nn


def busy(ms: float) -> None:
    """Host work: the CPU busy for `ms` milliseconds (no sleep)."""
    end = time.perf_counter() + ms / 1000.0
    x = 0
    while time.perf_counter() < end:
        x += 1


def sync_line() -> int:
    """The line of this file marked as the planted sync."""
    with open(__file__, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.rstrip().endswith("# SYNC: item"):
                return n
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--skip", type=int, default=5, help="steps left out of the timing (warm-up)")
    ap.add_argument("--dim", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--host-ms", type=float, default=3.0, help="host work after the sync, per step")
    ap.add_argument("--no-sync", action="store_true", help="do not read the loss each step")
    args = ap.parse_args()

    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    layers = []
    for _ in range(args.layers):
        layers += [nn.Linear(args.dim, args.dim), nn.GELU()]
    model = nn.Sequential(*layers).to(dev, torch.bfloat16)
    opt = torch.optim.SGD(model.parameters(), lr=1e-6)
    x = torch.randn(args.batch, args.dim, device=dev, dtype=torch.bfloat16)
    total = torch.zeros((), device=dev, dtype=torch.float32)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(args.steps + 1)]
    v = 0.0
    for i in range(args.steps):
        starts[i].record()
        loss = model(x).float().square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if args.no_sync:
            total += loss.detach()
        else:
            v += loss.item()  # SYNC: item
        busy(args.host_ms)
    starts[args.steps].record()
    torch.cuda.synchronize()
    v += float(total)
    times = [starts[i].elapsed_time(starts[i + 1]) for i in range(args.steps)][args.skip :]
    print(
        json.dumps(
            {
                "sync": not args.no_sync,
                "host_ms": args.host_ms,
                "steps": len(times),
                "median_step_ms": round(statistics.median(times), 4),
                "mean_step_ms": round(statistics.fmean(times), 4),
                "sync_line": sync_line(),
                "loss": v,
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
