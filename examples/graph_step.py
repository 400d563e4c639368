"""One training job, three ways of running its step, for step detection on
CUDA graphs and compiled models (docs/METRICS.md, "Steps").

    python examples/graph_step.py --mode graph     # the whole step in one CUDA graph, replayed
    python examples/graph_step.py --mode eager     # the same step, eagerly
    python examples/graph_step.py --mode compile   # torch.compile(mode="reduce-overhead")

The model is an MLP of --depth blocks (Linear width -> 4 width, GELU,
Linear back), bf16 autocast, AdamW. Each step copies a new batch into the
input (a device-to-device copy, as a data loader's prefetch would), runs
forward, backward and the optimizer; the loss is read (`.item()`, a host
sync) every --read-every steps. In graph mode, --warmup eager steps run
on a side stream, then one step is captured with `torch.cuda.graph` and
replayed --steps times (AdamW with capturable=True).

The job times itself on the GPU's clock: a CUDA event before each step's
first launch; the step time is the gap between consecutive events. It
prints one JSON line: mode, steps, median_step_ms (steps after the first
--skip), mean_step_ms, replays, loss.
"""

import argparse
import json
import statistics
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


def build(width: int, depth: int) -> nn.Module:
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width)]
    return nn.Sequential(*layers)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=["graph", "eager", "compile"], default="graph")
    ap.add_argument("--steps", type=int, default=60, help="timed steps (replays in graph mode)")
    ap.add_argument("--warmup", type=int, default=3, help="eager steps before capture / timing")
    ap.add_argument("--read-every", type=int, default=10, help="read the loss every N steps")
    ap.add_argument("--skip", type=int, default=2, help="first timed steps left out of the median")
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--batches", type=int, default=4, help="distinct input batches cycled")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("graph_step.py: no CUDA device", file=sys.stderr)
        return 2

    dev = torch.device("cuda")
    torch.manual_seed(0)
    model = build(args.width, args.depth).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, capturable=args.mode == "graph")
    data = [torch.randn(args.tokens, args.width, device=dev) for _ in range(args.batches)]
    target = torch.randn(args.tokens, args.width, device=dev)
    static_x = torch.empty_like(data[0])

    fwd = model
    if args.mode == "compile":
        fwd = torch.compile(model, mode="reduce-overhead")

    def step(i: int) -> torch.Tensor:
        static_x.copy_(data[i % len(data)])
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
            out = fwd(static_x)
        loss = F.mse_loss(out.float(), target)
        loss.backward()
        opt.step()
        return loss

    replays = 0
    if args.mode == "graph":
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for i in range(args.warmup):
                step(i)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            static_x.copy_(data[0])
            with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
                out = model(static_x)
            static_loss = F.mse_loss(out.float(), target)
            static_loss.backward()
            opt.step()

        def run(i: int) -> torch.Tensor:
            nonlocal replays
            static_x.copy_(data[i % len(data)])
            graph.replay()
            replays += 1
            return static_loss

    else:
        for i in range(args.warmup):
            if args.mode == "compile":
                torch.compiler.cudagraph_mark_step_begin()
            step(i)
        torch.cuda.synchronize()

        def run(i: int) -> torch.Tensor:
            if args.mode == "compile":
                torch.compiler.cudagraph_mark_step_begin()
            return step(i)

    starts = [torch.cuda.Event(enable_timing=True) for _ in range(args.steps + 1)]
    loss_value = float("nan")
    for i in range(args.steps):
        starts[i].record()
        loss = run(i)
        if (i + 1) % args.read_every == 0:
            loss_value = loss.item()
    starts[args.steps].record()
    torch.cuda.synchronize()
    times = [starts[i].elapsed_time(starts[i + 1]) for i in range(args.steps)]
    kept = times[args.skip:] or times
    print(
        json.dumps(
            {
                "mode": args.mode,
                "steps": args.steps,
                "median_step_ms": round(statistics.median(kept), 4),
                "mean_step_ms": round(statistics.fmean(kept), 4),
                "replays": replays,
                "loss": loss_value,
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
