"""What the allocator history costs per step, in one process (1 GPU).

examples/torch_fsdp2.py's model and loop (FSDP2, one rank), with
torch.cuda.memory._record_memory_history switched between three variants
every BLOCK steps, in a rotating order, ROUNDS times:

    off       the history off (enabled=None)
    nostacks  enabled="all", context=None: trace entries, no stack gathered
    stacks    enabled="all", context="alloc", stacks="python": what
              STREAMSCOPE_MEMORY=1 turns on

Runs of separate processes differ by more than 1 % from one another (GPU
clocks, placement), so the variants share one process and alternate
finely; each round's three blocks are adjacent, and the cost is the
per-round difference against "off" (median over rounds, with its quartiles).
Per step: wall time (perf_counter around the step, loss.item() included)
and host time (up to the loss.item() call: the launches alone).

    python3 scripts/gpu/memory-cost.py [--rounds 40] [--block 6]

Prints "COST key=value" lines.
"""

import argparse
import os
import statistics
import sys
import time

from rounds import quartiles

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))


def say(k, v):
    print(f"COST {k}={v}", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--block", type=int, default=6)
    a = p.parse_args()

    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch_fsdp2 import Block

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29541")
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)
    say("torch", torch.__version__)
    say("gpu", torch.cuda.get_device_name(dev))

    torch.manual_seed(0)
    model = nn.Sequential(*[Block(2048) for _ in range(8)]).to(dev)
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for b in model:
        fully_shard(b, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(8, 512, 2048, device=dev)
    tgt = torch.randn_like(x)

    def step():
        t0 = time.perf_counter()
        out = model(x)
        loss = F.mse_loss(out.float(), tgt)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        t1 = time.perf_counter()
        loss.item()
        t2 = time.perf_counter()
        return (t2 - t0) * 1e3, (t1 - t0) * 1e3

    hist = torch.cuda.memory._record_memory_history
    variants = {
        "off": None,
        "nostacks": dict(context=None, stacks="python"),
        "stacks": dict(context="alloc", stacks="python"),
    }
    names = list(variants)

    def switch(name):
        kw = variants[name]
        hist(enabled=None)
        if kw is not None:
            hist(enabled="all", max_entries=1_000_000, **kw)

    for _ in range(10):
        step()
    wall = {k: [] for k in names}
    host = {k: [] for k in names}
    for r in range(a.rounds):
        order = names[r % 3:] + names[:r % 3]
        for k in order:
            switch(k)
            step()  # the first step after a switch is not counted
            ws, hs = zip(*(step() for _ in range(a.block)))
            wall[k].append(statistics.median(ws))
            host[k].append(statistics.median(hs))
    switch("nostacks")
    for _ in range(a.block):
        step()
    n = len(torch.cuda.memory._snapshot()["device_traces"][0])
    hist(enabled=None)
    say("events_per_step", f"{n / a.block:.0f}")
    for what, table in (("wall", wall), ("host", host)):
        say(f"{what}_ms_off", f"{statistics.median(table['off']):.3f}")
        for k in names[1:]:
            d = [100 * (v - o) / o for v, o in zip(table[k], table["off"])]
            q1, med, q3 = quartiles(d)
            slower = sum(1 for x in d if x > 0)
            say(f"{what}_cost_pct_{k}",
                f"{med:.2f} q1={q1:.2f} q3={q3:.2f} rounds_slower={slower}/{len(d)} "
                f"median_ms={statistics.median(table[k]):.3f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
