"""What the allocator history costs the host per event, in one process (1 GPU).

A tight loop of allocator traffic, timed with the history off and on, the
variants alternating in blocks of BLOCK iterations, in a rotating order,
ROUNDS times (the per-round difference against "off", median and
quartiles). Two loops:

    empty   torch.empty(N) then del: one allocation and its free, no kernel
    op      y = x + 1 then del y: the same traffic behind a kernel launch,
            as in a training step (the op's own host cost beside it)

and three variants, those of `record --memory`:

    off     enabled=None
    on      enabled="all", context=None: trace entries, no stack gathered
    lines   enabled="all", context="alloc", stacks="python"

The events per iteration are counted from the history itself (a snapshot
after a block), so the cost per event is exact, not assumed.

    python3 scripts/gpu/memory-event-cost.py [--rounds 30] [--block 4000]

Prints "EVCOST key=value" lines.
"""

import argparse
import statistics
import time

from rounds import quartiles


def say(k, v):
    print(f"EVCOST {k}={v}", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--block", type=int, default=4000)
    a = p.parse_args()

    import torch

    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    hist = torch.cuda.memory._record_memory_history
    x = torch.ones(1 << 14, device=dev)

    def set_mode(m):
        if m == "off":
            hist(enabled=None)
        elif m == "on":
            hist(enabled="all", context=None, stacks="python", max_entries=1_000_000)
        else:
            hist(enabled="all", context="alloc", stacks="python", max_entries=1_000_000)

    def loop_empty(n):
        for _ in range(n):
            y = torch.empty(1 << 14, device=dev)
            del y

    def loop_op(n):
        for _ in range(n):
            y = x + 1
            del y

    loops = {"empty": loop_empty, "op": loop_op}
    say("torch", torch.__version__)
    say("gpu", torch.cuda.get_device_name(dev))

    # Events per iteration, from the history itself.
    for name, fn in loops.items():
        set_mode("on")
        fn(100)
        torch.cuda.synchronize()
        t0 = int(time.time() * 1e6)
        fn(1000)
        torch.cuda.synchronize()
        s = torch.cuda.memory._snapshot()
        n = sum(1 for e in s["device_traces"][0] if e.get("time_us", 0) >= t0)
        set_mode("off")
        say(f"{name}_events_per_iter", f"{n / 1000:.2f}")

    modes = ["off", "on", "lines"]
    for name, fn in loops.items():
        per = {m: [] for m in modes}
        for r in range(a.rounds):
            order = modes[r % 3:] + modes[: r % 3]
            for m in order:
                set_mode(m)
                fn(200)  # settle
                torch.cuda.synchronize()
                t = time.perf_counter_ns()
                fn(a.block)
                dt = time.perf_counter_ns() - t
                torch.cuda.synchronize()
                per[m].append(dt / a.block)
        set_mode("off")
        say(f"{name}_off_ns_per_iter", f"{statistics.median(per['off']):.1f}")
        for m in ("on", "lines"):
            d = [per[m][i] - per["off"][i] for i in range(a.rounds)]
            q = quartiles(d)
            say(f"{name}_{m}_extra_ns_per_iter", f"{q[1]:.1f} (quartiles {q[0]:.1f} / {q[2]:.1f})")


if __name__ == "__main__":
    main()
