"""FSDP2 (torch.distributed.fsdp.fully_shard) on a stack of MLP blocks, bf16.

A small real workload for `streamscope record`:

    streamscope record -o traces/torch -- torchrun --nproc_per_node 2 examples/torch_fsdp2.py

Each step is an NVTX range "step N" (streamscope finds steps from it;
`--no-nvtx` leaves them out, and steps then end at each optimizer step), and
`loss.item()` runs every step: the host synchronization streamscope should
flag, with this file's line. Rank 0 prints one JSON line with the median
step time.
"""

import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard


class Block(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 4 * dim)
        self.down = nn.Linear(4 * dim, dim)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.norm(x))))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--dim", type=int, default=2048)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--oom-step", type=int, default=-1, help="at this step, ask for twice the card (a CUDA OOM)")
    p.add_argument("--no-nvtx", action="store_true", help="no NVTX step ranges (steps end at optimizer.step())")
    args = p.parse_args()

    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=device)

    torch.manual_seed(0)
    model = nn.Sequential(*[Block(args.dim) for _ in range(args.layers)]).to(device)
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model:
        fully_shard(block, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    torch.manual_seed(1 + rank)
    x = torch.randn(args.batch, args.seq, args.dim, device=device)
    target = torch.randn_like(x)

    step_s = []
    loss_value = float("nan")
    for step in range(args.steps):
        if not args.no_nvtx:
            torch.cuda.nvtx.range_push(f"step {step}")
        t0 = time.perf_counter()
        out = model(x)
        loss = F.mse_loss(out.float(), target)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss_value = loss.item()  # host sync every step, on purpose
        step_s.append(time.perf_counter() - t0)
        if step == args.oom_step:
            free, total = torch.cuda.mem_get_info(device)
            too_much = torch.empty(2 * total, dtype=torch.uint8, device=device)  # OOM: planted
        if not args.no_nvtx:
            torch.cuda.nvtx.range_pop()

    if rank == 0:
        steady = step_s[len(step_s) // 5 :] or step_s
        print(json.dumps({
            "workload": "torch_fsdp2",
            "world_size": dist.get_world_size(),
            "steps": args.steps,
            "step_ms_median": 1e3 * statistics.median(steady),
            "loss": loss_value,
            # The allocator's own peaks (torch.cuda.max_memory_*), to
            # check streamscope's memory figures against.
            "max_memory_allocated": torch.cuda.max_memory_allocated(device),
            "max_memory_reserved": torch.cuda.max_memory_reserved(device),
        }), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
