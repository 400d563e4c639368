"""DDP (one process, NCCL) on a small conv net, bf16 autocast, AdamW, no
annotations; the loss is read every --read-every steps."""

import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--read-every", type=int, default=10)
    a = ap.parse_args()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29611")
    dist.init_process_group("nccl", rank=0, world_size=1)
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    net = nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.Conv2d(64, 128, 3, padding=1, stride=2), nn.BatchNorm2d(128), nn.ReLU(),
        nn.Conv2d(128, 256, 3, padding=1, stride=2), nn.BatchNorm2d(256), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, 100),
    ).to(dev).to(memory_format=torch.channels_last)
    model = nn.parallel.DistributedDataParallel(net, device_ids=[0])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(128, 3, 96, 96, device=dev).to(memory_format=torch.channels_last)
    y = torch.randint(0, 100, (128,), device=dev)
    clock = StepClock(a.steps)
    last = 0.0
    for i in range(a.steps):
        clock.mark()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if (i + 1) % a.read_every == 0:
            last = loss.item()
    clock.say(5, loss=last, workload="ddp_cnn")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
