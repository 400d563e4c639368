"""torch.compile in its default mode (Inductor's Triton kernels, no CUDA
graphs) on a transformer-style MLP stack, AdamW, no annotations, the loss
read every step."""

import argparse

import torch
import torch.nn as nn

from common import StepClock


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=50)
    a = ap.parse_args()
    dev = torch.device("cuda", 0)
    d = 2048
    layers = []
    for _ in range(6):
        layers += [nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d)]
    model = nn.Sequential(*layers).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    step_fn = torch.compile(model)
    x = torch.randn(16, 256, d, device=dev)
    clock = StepClock(a.steps)
    last = 0.0
    for _ in range(a.steps):
        clock.mark()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step_fn(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        last = loss.item()
    clock.say(10, loss=last, workload="compile_default")


if __name__ == "__main__":
    main()
