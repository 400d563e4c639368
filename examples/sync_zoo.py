"""A single-GPU training loop that plants one host sync per line.

    streamscope record -o traces/sync-zoo -- python3 examples/sync_zoo.py

Every line marked `# SYNC: kind` blocks the host on the GPU once per step
(each right after GPU work, so it really waits); the line marked
`# NOT-A-SYNC` is a non-blocking copy from pinned memory, which must not be
flagged. streamscope should report each marked line, by its own file:line,
and nothing else (cli/tests/sync_zoo.rs pins that on the recorded trace).
The optimizer step of every step is what streamscope's Python hooks mark
as the end of a step.

Prints one JSON line at the end: the median step time (for the hooks'
overhead, scripts/gpu/truth.sh). `--profiler` runs the loop under
torch.profiler (streamscope must say once that its CUDA events are missing).
"""

import argparse
import contextlib
import json
import os
import statistics
import time

import torch
import torch.nn as nn


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--dim", type=int, default=4096)
    p.add_argument("--batch", type=int, default=4096)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--profiler", action="store_true", help="run under torch.profiler")
    p.add_argument("--crash-after", type=float, default=0.0,
                   help="after this many seconds: segfault (a real one) in this process (crash-loss test)")
    p.add_argument("--seconds", type=float, default=0.0,
                   help="run steps until this many seconds have passed (crash-loss tests)")
    args = p.parse_args()

    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    layers = []
    for _ in range(args.layers):
        layers += [nn.Linear(args.dim, args.dim), nn.GELU()]
    model = nn.Sequential(*layers).to(dev, torch.bfloat16)
    opt = torch.optim.SGD(model.parameters(), lr=1e-6)
    x = torch.randn(args.batch, args.dim, device=dev, dtype=torch.bfloat16)
    pinned = torch.randn(args.batch, args.dim, dtype=torch.bfloat16).pin_memory()
    side = torch.cuda.Stream()
    sink = open(os.devnull, "w")
    if args.crash_after > 0:
        import ctypes
        import sys
        import threading

        def crash():
            t = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
            print(f"sync_zoo: segfault at CLOCK_MONOTONIC {t} ns", file=sys.stderr, flush=True)
            ctypes.string_at(0)  # a real SIGSEGV, on this thread

        threading.Timer(args.crash_after, crash).start()

    def work():
        # Enough GPU work that the next line really waits for the GPU.
        return model(x).float()

    prof = contextlib.nullcontext()
    if args.profiler:
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA])
    step_s = []
    t_start = time.perf_counter()
    with prof:
        step = 0
        while step < args.steps or (args.seconds > 0 and time.perf_counter() - t_start < args.seconds):
            step += 1
            t0 = time.perf_counter()
            y = work()
            loss = y.square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            y = work()
            v = loss.item()  # SYNC: item
            y = work()
            v = float(y.mean())  # SYNC: float
            y = work()
            if (y > 1e9).any():  # SYNC: if-any
                v += 1
            y = work()
            c = y[:4, :4].cpu()  # SYNC: cpu
            y = work()
            c = y[0, :4].tolist()  # SYNC: tolist
            y = work()
            c = y[:4, :4].to("cpu")  # SYNC: to-cpu
            y = work()
            nz = torch.nonzero(y[0] > 0)  # SYNC: nonzero
            y = work()
            sel = y[0][y[0] > 0]  # SYNC: mask-index
            y = work()
            print(y[0, :2], file=sink)  # SYNC: print
            y = work()
            t = torch.tensor([v, 1.0, 2.0], device=dev)  # SYNC: tensor-from-list
            y = work()
            torch.cuda.synchronize()  # SYNC: cuda-synchronize
            with torch.cuda.stream(side):
                y2 = model(x)
            side.synchronize()  # SYNC: stream-synchronize
            y = work()
            ev = torch.cuda.Event()
            ev.record()
            ev.synchronize()  # SYNC: event-synchronize
            y = work()
            n = int(y[0, 0])  # SYNC: int
            y = work()
            same = torch.equal(y[0], y[1])  # SYNC: equal
            y = work()
            u = torch.unique(y[0, :16])  # SYNC: unique
            y = work()
            m = torch.masked_select(y[0], y[0] > 0)  # SYNC: masked-select
            y = work()
            g = pinned.to(dev, non_blocking=True)  # NOT-A-SYNC: pinned-h2d
            y = work()
            s = y[0, 0].item() + g[0, 0].item()  # SYNC: item-2
            step_s.append(time.perf_counter() - t0)
            del c, nz, sel, t, y2, n, same, u, m, s
    torch.cuda.synchronize()
    steady = step_s[len(step_s) // 5:] or step_s
    print(json.dumps({"workload": "sync_zoo", "steps": len(step_s),
                      "step_ms_median": 1e3 * statistics.median(steady), "value": v}), flush=True)


if __name__ == "__main__":
    main()
