"""What one CUDA call costs the host, per kind of call: the collector's
overhead taken apart (run it plain, then under `streamscope record`, and
compare the figures).

    python3 examples/api_cost.py
    streamscope record -o /tmp/ac -- python3 examples/api_cost.py

Each case runs N calls in a tight loop (after a warm-up) and prints the
median over several repeats of host microseconds per call, as one JSON line:
- launch:      a one-element in-place add (a tiny kernel launch; the GPU
               keeps up, so this is the host's launch path),
- copy_d2d:    a small device-to-device copy (cudaMemcpyAsync),
- copy_h2d_pinned: a small non-blocking host-to-device copy from pinned memory,
- item:        `.item()` on a fresh result (a kernel, a device-to-host copy
               and a stream sync: the host waits for the GPU each time),
- sync:        torch.cuda.synchronize() on an idle GPU,
- event:       an event record plus a stream wait on it (what FSDP2 does
               around each collective).
With `--gpu`, two more cases where the GPU, not the host, sets the pace
(calls queue faster than they run), so the figure is GPU time per kernel and
recorded minus plain is what tracing adds to each kernel on the GPU:
- gpu_gemm:    a 4096 x 4096 x 4096 bf16 matmul into a preallocated output
               (~0.2 ms each, the GEMMs of examples/sync_zoo.py),
- gpu_small:   an in-place add on 16 M floats (~40 µs, memory-bound).
and three where the host waits for each GEMM, as sync_zoo.py does: per call
one GEMM then a host sync, so the figure minus gpu_gemm is the time from the
GEMM's end to the next GEMM's start (the sync's return, the next launch),
which tracing lengthens wherever it adds to that path:
- sync_item:   GEMM, then `.item()` of one element (D2H copy, stream sync),
- sync_cpu:    GEMM, then `.cpu()` of a 4 x 4 slice,
- sync_device: GEMM, then torch.cuda.synchronize().
"""
import argparse
import json
import statistics
import time

import torch


def per_call_us(fn, n, repeats):
    for _ in range(max(10, n // 10)):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
        out.append(1e6 * (time.perf_counter() - t0) / n)
    return statistics.median(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=20000, help="calls per repeat")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--gpu", action="store_true", help="add the GPU-bound cases")
    args = p.parse_args()
    dev = torch.device("cuda", 0)
    x = torch.zeros(1, device=dev)
    a = torch.zeros(256, device=dev)
    b = torch.empty_like(a)
    h = torch.zeros(256, pin_memory=True)
    s2 = torch.cuda.Stream()
    ev = torch.cuda.Event()
    cur = torch.cuda.current_stream()

    def event():
        ev.record(cur)
        s2.wait_event(ev)

    cases = {
        "launch": lambda: x.add_(1),
        "copy_d2d": lambda: b.copy_(a),
        "copy_h2d_pinned": lambda: b.copy_(h, non_blocking=True),
        "item": lambda: (x + 1).item(),
        "sync": torch.cuda.synchronize,
        "event": event,
    }
    counts = {"item": max(1, args.n // 4), "sync": max(1, args.n // 4)}
    if args.gpu:
        ga = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
        gb = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
        gc = torch.empty_like(ga)
        big = torch.zeros(16 << 20, device=dev)
        cases["gpu_gemm"] = lambda: torch.matmul(ga, gb, out=gc)
        cases["gpu_small"] = lambda: big.add_(1)
        cases["sync_item"] = lambda: torch.matmul(ga, gb, out=gc)[0, 0].item()
        cases["sync_cpu"] = lambda: torch.matmul(ga, gb, out=gc)[:4, :4].cpu()
        cases["sync_device"] = lambda: (torch.matmul(ga, gb, out=gc), torch.cuda.synchronize())
        counts.update(gpu_gemm=500, gpu_small=5000, sync_item=400, sync_cpu=400, sync_device=400)
    r = {"workload": "api_cost", "n": args.n}
    for name, fn in cases.items():
        r[name + "_us"] = per_call_us(fn, counts.get(name, args.n), args.repeats)
    print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
