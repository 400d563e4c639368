"""A launch-bound training-like loop, to measure what recording costs the
host (issue 34), and the GPU idle each host sync causes, measured by the
job itself with CUDA events (the truth the report's sync idle is held to).

Each step:
- `--launches` (default 2,400) tiny kernels: in-place adds on a small
  tensor, a few µs of GPU work each, so the host's launch path sets the
  pace (as in a small model's eager step);
- one 2048³ bf16 GEMM (~0.1 ms of GPU work), then `.item()` of one
  element (line marked SYNC below: a device-to-host copy and a wait): the
  GPU sits idle from there until the host launches again. Two CUDA
  events measure that idle: one recorded just before the copy, one before
  the next step's first kernel.

    python3 examples/launch_bound.py --steps 60
    streamscope record -o /tmp/lb -- python3 examples/launch_bound.py --steps 60
    python3 examples/launch_bound.py --steps 60 --profiler   # torch.profiler's cost

Prints one JSON line: the median step time (host clock, steps after the
warm-up), launches per step, µs per launch, and the median sync gap (µs).
"""
import argparse
import contextlib
import json
import statistics
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--launches", type=int, default=2400)
    ap.add_argument("--profiler", action="store_true",
                    help="run under torch.profiler (CPU and CUDA activities)")
    a = ap.parse_args()
    dev = torch.device("cuda")
    x = torch.zeros(256, device=dev)
    w = torch.randn(2048, 2048, device=dev, dtype=torch.bfloat16)
    h = torch.randn(2048, 2048, device=dev, dtype=torch.bfloat16)
    out = torch.empty(2048, 2048, device=dev, dtype=torch.bfloat16)
    ctx = contextlib.nullcontext()
    if a.profiler:
        from torch.profiler import ProfilerActivity, profile
        ctx = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    steps, gaps = [], []
    pending = None  # (after_gemm, before_next) of the previous step
    with ctx:
        for i in range(a.warmup + a.steps):
            t0 = time.perf_counter()
            before = torch.cuda.Event(enable_timing=True)
            before.record()
            if pending is not None:
                pending.append(before)
            for _ in range(a.launches):
                x.add_(1.0)
            torch.matmul(w, h, out=out)
            first = out[0, 0].float()
            after = torch.cuda.Event(enable_timing=True)
            after.record()
            loss = first.item()  # SYNC: the host waits here
            if pending is not None and i > a.warmup:
                gaps.append(pending[0].elapsed_time(pending[1]) * 1000.0)
            pending = [after]
            if i >= a.warmup:
                steps.append((time.perf_counter() - t0) * 1000.0)
    torch.cuda.synchronize()
    med = statistics.median(steps)
    print(json.dumps({
        "step_ms_median": round(med, 4),
        "launches_per_step": a.launches + 3,
        "us_per_launch": round(med * 1000.0 / (a.launches + 3), 3),
        "sync_gap_us_median": round(statistics.median(gaps), 2) if gaps else None,
        "steps": a.steps,
        "loss": loss,
    }))


if __name__ == "__main__":
    main()
