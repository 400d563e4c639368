"""Shared by the held-out workloads: GPU-clock step timing and the JSON line."""

import json
import statistics

import torch


class StepClock:
    """A CUDA event before each step's first launch; step k's time is the
    gap between events k and k+1 (the loop's pace on the GPU's clock)."""

    def __init__(self, steps: int):
        self.ev = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
        self.n = 0

    def mark(self):
        self.ev[self.n].record()
        self.n += 1

    def say(self, skip: int, **extra):
        torch.cuda.synchronize()
        ms = [self.ev[i].elapsed_time(self.ev[i + 1]) for i in range(skip, self.n - 1)]
        out = {"steps": len(ms), "median_step_ms": statistics.median(ms), "mean_step_ms": statistics.mean(ms),
               # The caching allocator's own peaks since the start, what a
               # recording's memory lane must give back.
               "max_allocated_bytes": torch.cuda.max_memory_allocated(),
               "max_reserved_bytes": torch.cuda.max_memory_reserved()}
        out.update(extra)
        print(json.dumps(out), flush=True)
