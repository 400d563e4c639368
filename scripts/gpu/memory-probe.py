"""What PyTorch's allocator history costs and holds, on this machine (1 GPU).

Measures, for the design of `record`'s memory samples (issue 36):
- the step time of a 1-rank FSDP2 loop (examples/torch_fsdp2.py's shapes)
  with the allocator history off and under each variant of
  torch.cuda.memory._record_memory_history, alternating rounds;
- allocator events per step, what a trace entry holds, its clock
  (time_us against time.time_ns and time.monotonic_ns);
- what the snapshot costs to take;
- whether enabling the history initializes CUDA (a fresh subprocess);
- what an out-of-memory observer and the history see of a failed allocation.

    python3 scripts/gpu/memory-probe.py [--steps 20] [--rounds 3]

Prints one "PROBE key=value" line per figure.
"""

import argparse
import inspect
import os
import statistics
import subprocess
import sys
import time


def say(k, v):
    print(f"PROBE {k}={v}", flush=True)


def lazy_init_check():
    code = (
        "import torch\n"
        "torch.cuda.memory._record_memory_history(max_entries=1000)\n"
        "print('INIT', torch.cuda.is_initialized())\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    say("history_call_initializes_cuda", (r.stdout.strip() or r.stderr.strip()[-300:]).replace("\n", " | "))
    code2 = (
        "import torch\n"
        "torch.cuda._lazy_call(lambda: torch.cuda.memory._record_memory_history(max_entries=1000))\n"
        "print('BEFORE', torch.cuda.is_initialized())\n"
        "x = torch.ones(4, device='cuda')\n"
        "s = torch.cuda.memory._snapshot()\n"
        "print('AFTER', torch.cuda.is_initialized(), len(s['device_traces'][0]))\n"
    )
    r = subprocess.run([sys.executable, "-c", code2], capture_output=True, text=True, timeout=120)
    say("lazy_call_history", (r.stdout.strip() or r.stderr.strip()[-300:]).replace("\n", " | "))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()

    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    say("torch", torch.__version__)
    say("signature", str(inspect.signature(torch.cuda.memory._record_memory_history)).replace(" ", ""))
    say("has_oom_observer", hasattr(torch._C, "_cuda_attach_out_of_memory_observer"))
    say("has_lazy_call", hasattr(torch.cuda, "_lazy_call"))
    lazy_init_check()

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)

    class Block(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.norm = nn.LayerNorm(dim)
            self.up = nn.Linear(dim, 4 * dim)
            self.down = nn.Linear(4 * dim, dim)

        def forward(self, x):
            return x + self.down(F.gelu(self.up(self.norm(x))))

    dim = 2048
    torch.manual_seed(0)
    model = nn.Sequential(*[Block(dim) for _ in range(8)]).to(dev)
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for b in model:
        fully_shard(b, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(8, 512, dim, device=dev)
    tgt = torch.randn_like(x)

    def run(n):
        ts = []
        for _ in range(n):
            t0 = time.perf_counter()
            out = model(x)
            loss = F.mse_loss(out.float(), tgt)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            loss.item()
            ts.append(time.perf_counter() - t0)
        return 1e3 * statistics.median(ts)

    run(10)
    hist = torch.cuda.memory._record_memory_history
    variants = {
        "off": None,
        "state_only": dict(context=None, stacks="python"),
        "alloc_python": dict(context="alloc", stacks="python"),
        "all_python": dict(context="all", stacks="python"),
    }
    times = {k: [] for k in variants}
    for r in range(a.rounds):
        for k, kw in variants.items():
            if kw is None:
                hist(enabled=None)
            else:
                hist(enabled="all", max_entries=1_000_000, **kw)
            run(3)
            times[k].append(run(a.steps))
            hist(enabled=None)
    base = statistics.median(times["off"])
    for k, v in times.items():
        m = statistics.median(v)
        say(f"step_ms_{k}", f"{m:.3f} rounds={['%.3f' % t for t in v]} overhead_pct={100 * (m - base) / base:.2f}")

    # Entries per step, and what an entry holds.
    torch.cuda.memory._record_memory_history(enabled="all", context="alloc", stacks="python", max_entries=1_000_000)
    run(a.steps)
    t0 = time.perf_counter()
    s = torch.cuda.memory._snapshot()
    say("snapshot_s", f"{time.perf_counter() - t0:.3f}")
    say("snapshot_keys", sorted(s.keys()))
    tr = s["device_traces"][0]
    say("entries_per_step", f"{len(tr) / a.steps:.1f}")
    acts = {}
    for e in tr:
        acts[e["action"]] = acts.get(e["action"], 0) + 1
    say("actions", acts)
    for e in tr[:2] + [x for x in tr if x["action"] == "segment_alloc"][:1]:
        d = dict(e)
        fr = d.pop("frames", [])
        say("entry", f"{d} frames={len(fr)} first_frames={fr[:3]}")
    say("segment_keys", sorted(s["segments"][0].keys()) if s["segments"] else None)
    xs = torch.empty(1 << 20, device=dev)
    t_real = time.time_ns() // 1000
    t_mono = time.monotonic_ns() // 1000
    s = torch.cuda.memory._snapshot()
    last = [e for e in s["device_traces"][0] if e["action"] == "alloc"][-1]
    say("clock", f"time_us={last.get('time_us')} real_us={t_real} mono_us={t_mono} "
        f"minus_real={last.get('time_us', 0) - t_real} minus_mono={last.get('time_us', 0) - t_mono}")
    del xs

    # Out of memory: the observer's arguments and the history's entry.
    seen = []
    if hasattr(torch._C, "_cuda_attach_out_of_memory_observer"):
        torch._C._cuda_attach_out_of_memory_observer(lambda *args: seen.append(args))
    try:
        torch.empty(1 << 45, dtype=torch.uint8, device=dev)
    except torch.OutOfMemoryError as e:
        say("oom_message", str(e).splitlines()[0][:200])
    say("oom_observer_args", seen)
    s = torch.cuda.memory._snapshot()
    ooms = [dict(e) for e in s["device_traces"][0] if e["action"] == "oom"]
    for e in ooms[-1:]:
        fr = e.pop("frames", [])
        say("oom_entry", f"{e} frames={fr[:4]}")
    torch.cuda.memory._record_memory_history(enabled=None)
    say("max_memory_allocated", torch.cuda.max_memory_allocated(dev))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
