#!/usr/bin/env bash
# The what-if replay against reality (2 GPUs; under 9 minutes): fsdp-ref
# recorded once as a baseline, then recorded again with its collectives
# made slower for real (NCCL_MAX_NCHANNELS=1, 2, 4; NCCL_P2P_DISABLE=1),
# in the network-wall shape (--batch 1 --seq 64: 64 tokens per rank; its
# own baseline, then NCCL_MAX_NCHANNELS=1), and without --item-sync. Each
# row: `streamscope whatif` on the matching baseline recording
#   - comm rows: --comm-scale = (measured transfer time of the run) /
#     (that of the baseline), both from the recordings' matched NCCL
#     kernels (transfer = after the last rank arrived), median step; and
#     --link-bw = the run's bus bandwidth (report's collectives, weighted
#     by time; the NCCL plugin gives the bytes),
#   - the no-item-sync row: --drop-syncs cuMemcpyDtoH (fsdp-ref's
#     --item-sync copies the loss to the host with cuMemcpyDtoH),
# against the run's measured median step (mean of the ranks' medians over
# the steady steps). Then `streamscope sweep` over NCCL_MAX_NCHANNELS x
# NCCL_PROTO (WHATIF_SWEEP_CHANNELS, WHATIF_SWEEP_PROTOS).
# Builds nothing (scripts/build-carry.sh first). From the repo root:
#
#   BIN=.carry/bin OUT=<results> bash scripts/gpu/whatif.sh
#
# BIN holds streamscope, fsdp-ref and libstreamscope_collector.so.
# Results (5 files):
#   $OUT/whatif.log          everything
#   $OUT/whatif.json         per row: predicted (comm-scale, link-bw), measured, error %
#   $OUT/whatif-traces.tar.gz  the two baseline recordings and the NCCL_MAX_NCHANNELS=1 run
#   $OUT/sweep.md, $OUT/sweep.svg  the sweep's table and plot (sweep.json inside the log)
# Each step has a time limit, the whole script a budget (WHATIF_BUDGET_S,
# default 500 s); a failing step never stops the script.
set -u

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
gpu_setup whatif.log
BUDGET_END=$((SECONDS + ${WHATIF_BUDGET_S:-500}))
export STREAMSCOPE_COLLECTOR="$BIN/libstreamscope_collector.so"
W="$(mktemp -d)"
nccl_shim "$W/shim"
SUMMARY="$W/summary.txt"
: > "$SUMMARY"

echo "=== machine $(date -u +%FT%TZ)"
nvidia-smi -L

SHAPE="--mode overlap --prefetch 1 --layers 8 --dim 4096 --steps 10 --warmup 3 --timeout-s 100"
BASE="$SHAPE --batch 4 --seq 1024"
WALL="$SHAPE --batch 1 --seq 64"
PORT=29800

# two NAME ENVS ARGS: fsdp-ref on 2 GPUs (RANK 0/1, one process each)
# with ENVS set, recorded into $W/NAME; then its whatif and report JSON.
two() {
  local name="$1" envs="$2" args="$3"
  PORT=$((PORT + 1))
  step "$name" 90 env $envs "$S" record -o "$W/$name" -- bash -c "
    for r in 0 1; do RANK=\$r WORLD_SIZE=2 LOCAL_RANK=\$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT \
      '$F' $args > '$W/$name-rank'\$r.txt 2>&1 & done; wait"
  find "$W/$name" -name 'pid-*.pftrace' -delete 2>/dev/null
  "$S" whatif "$W/$name" --format json > "$W/$name.whatif.json" 2> "$W/$name.whatif.err" \
    || echo "whatif $name: $(cat "$W/$name.whatif.err")"
  "$S" report "$W/$name" --format json > "$W/$name.report.json" 2>/dev/null
  tail -2 "$W/$name-rank0.txt" 2>/dev/null
}

two base "" "$BASE --item-sync"
two nch1 "NCCL_MAX_NCHANNELS=1" "$BASE --item-sync"
two nch2 "NCCL_MAX_NCHANNELS=2" "$BASE --item-sync"
two nch4 "NCCL_MAX_NCHANNELS=4" "$BASE --item-sync"
two p2p-off "NCCL_P2P_DISABLE=1" "$BASE --item-sync"
two wall "" "$WALL --item-sync"
two wall-nch1 "NCCL_MAX_NCHANNELS=1" "$WALL --item-sync"
two no-item-sync "" "$BASE"

echo
echo "=== the replay of the baseline, unchanged and at 2x communication"
"$S" whatif "$W/base" | head -12
"$S" whatif "$W/base" --comm-scale 2 | sed -n '/Regime/,$p' | head -12

"$PY" - "$S" "$W" "$OUT/whatif.json" <<'PY'
import json, statistics, subprocess, sys
S, W, out = sys.argv[1], sys.argv[2], sys.argv[3]

def load(path):
    try:
        return json.load(open(path))
    except Exception:
        return None

def whatif(name, *args):
    p = subprocess.run([S, "whatif", f"{W}/{name}", "--format", "json", *args],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"rc {p.returncode}"
    return json.loads(p.stdout), None

def medians(w, key):
    v = [r[key] for r in w["ranks"] if r.get(key) is not None]
    return statistics.mean(v) if v else None

def transfer(w):
    # Per rank: median over the steady steps of the step's NCCL transfer time; mean over ranks.
    per = []
    for r in w["ranks"]:
        steps = [sum(g["measured_comm_us"] for g in s["regimes"]) for s in r["steps"] if s["in_window"]]
        if steps:
            per.append(statistics.median(steps))
    return statistics.mean(per) if per else None

def bus_bw(name):
    r = load(f"{W}/{name}.report.json")
    if not r:
        return None
    rows = [c for c in r.get("collectives", []) if c.get("bus_bw_gbps") and c.get("total_us")]
    t = sum(c["total_us"] for c in rows)
    return sum(c["bus_bw_gbps"] * c["total_us"] for c in rows) / t if t else None

rows = []
def row(name, base, what, measured_w, pred_args, extra_args=None):
    m = medians(measured_w, "measured_median_step_us") if measured_w else None
    p, why = whatif(base, *pred_args)
    pred = medians(p, "predicted_median_step_us") if p else None
    e = {"run": name, "baseline": base, "change": what, "args": " ".join(pred_args),
         "measured_ms": m and m / 1e3, "predicted_ms": pred and pred / 1e3,
         "error_pct": (100 * (pred - m) / m) if (m and pred) else None, "why": why}
    if extra_args:
        p2, why2 = whatif(base, *extra_args)
        pred2 = medians(p2, "predicted_median_step_us") if p2 else None
        e.update({"link_bw_args": " ".join(extra_args), "predicted_link_bw_ms": pred2 and pred2 / 1e3,
                  "error_link_bw_pct": (100 * (pred2 - m) / m) if (m and pred2) else None, "why_link_bw": why2})
    rows.append(e)

W_ = {n: load(f"{W}/{n}.whatif.json") for n in
      ["base", "nch1", "nch2", "nch4", "p2p-off", "wall", "wall-nch1", "no-item-sync"]}
for n in ["base", "wall"]:
    if W_[n]:
        rows.append({"run": n, "baseline": n, "change": "none (consistency)", "args": "",
                     "measured_ms": (medians(W_[n], "measured_median_step_us") or 0) / 1e3,
                     "predicted_ms": (medians(W_[n], "predicted_median_step_us") or 0) / 1e3,
                     "error_pct": W_[n]["consistency_max_error_pct"], "why": None})
for name, base, what in [("nch1", "base", "NCCL_MAX_NCHANNELS=1"), ("nch2", "base", "NCCL_MAX_NCHANNELS=2"),
                         ("nch4", "base", "NCCL_MAX_NCHANNELS=4"), ("p2p-off", "base", "NCCL_P2P_DISABLE=1"),
                         ("wall-nch1", "wall", "NCCL_MAX_NCHANNELS=1, 64 tokens/rank")]:
    w, b = W_.get(name), W_.get(base)
    if not (w and b):
        rows.append({"run": name, "baseline": base, "change": what, "why": "a recording is missing"})
        continue
    tr, tb = transfer(w), transfer(b)
    scale = tr / tb if (tr and tb) else None
    bw = bus_bw(name)
    row(name, base, what, w, ["--comm-scale", f"{scale:.4f}"] if scale else ["--comm-scale", "1"],
        ["--link-bw", f"{bw:.2f}"] if bw else None)
if W_.get("no-item-sync") and W_.get("base"):
    row("no-item-sync", "base", "--item-sync removed", W_["no-item-sync"], ["--drop-syncs", "cuMemcpyDtoH"])

print()
print(f"{'run':<14} {'change':<38} {'measured ms':>11} {'predicted ms':>12} {'err %':>7} {'link-bw ms':>10} {'err %':>7}  args")
f = lambda v, d=2: "-" if v is None else f"{v:.{d}f}"
for r in rows:
    print(f"{r['run']:<14} {r['change']:<38} {f(r.get('measured_ms')):>11} {f(r.get('predicted_ms')):>12} "
          f"{f(r.get('error_pct'), 1):>7} {f(r.get('predicted_link_bw_ms')):>10} {f(r.get('error_link_bw_pct'), 1):>7}  "
          f"{r.get('args', '')} {r.get('link_bw_args', '')} {r.get('why') or ''}")
json.dump({"rows": rows}, open(out, "w"), indent=1)
PY

tar czf "$OUT/whatif-traces.tar.gz" -C "$W" base wall nch1 2>/dev/null && ls -la "$OUT/whatif-traces.tar.gz"

CH=${WHATIF_SWEEP_CHANNELS:-2,4,8,16,32}
PR=${WHATIF_SWEEP_PROTOS:-Simple,LL,LL128}
step sweep 240 "$S" sweep -o "$W/sweep" --repeat "${WHATIF_SWEEP_REPEAT:-1}" --env "NCCL_MAX_NCHANNELS=$CH" --env "NCCL_PROTO=$PR" -- bash -c "
  P=\$((30000 + RANDOM % 2000))
  for r in 0 1; do RANK=\$r WORLD_SIZE=2 LOCAL_RANK=\$r MASTER_ADDR=127.0.0.1 MASTER_PORT=\$P \
    '$F' $BASE --item-sync > /dev/null 2>&1 & done; wait"
for f in sweep.md sweep.svg; do cp "$W/sweep/$f" "$OUT/$f" 2>/dev/null; done
echo "=== sweep.json"; cat "$W/sweep/sweep.json" 2>/dev/null

echo "=== summary"; cat "$SUMMARY"
echo "=== results"
find "$OUT" -type f -printf '%10s %p\n' | sort -k2
rm -rf "$W"
