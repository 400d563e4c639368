#!/usr/bin/env bash
# Measured GPU metrics (issue 13) on 2 GPUs: what `record --gpu-metrics`
# samples and whether it is right. Under 8 minutes; builds nothing
# (scripts/build-carry.sh, here, first). From the repo root:
#
#   BIN=.carry/bin OUT=<results> bash scripts/gpu/metrics.sh
#
#   (a) probe: fsdp-ref on 1 GPU recorded with --gpu-metrics (the default
#       set plus a few raw CUPTI names): the sampler process's stderr (the
#       metrics each GPU accepted, refused, its sampling stats), `info`
#       (counter tracks, gpu_metrics metadata) and the measured table;
#   (b) fsdp-ref overlap and serial, two processes (one per GPU), recorded
#       with --gpu-metrics, and the report's JSON. Checks:
#         - SM active >= 90 % while compute kernels run (the GEMM phases):
#           ranks[].measured.sm_active_compute_pct, both schedules;
#         - NVLink bytes per step (nvlink tx/rx GB/s x the step's GPU span)
#           within 10 % of what the all-gathers and reduce-scatters move per
#           rank: sum over fsdp-ref's collectives of bytes x per_step x
#           (n-1)/n (ring; n = 2), steps of the second half only (the
#           sampler starts after the first flush);
#         - the contention ratio (ranks[].sm_contention.compute_slowdown_pct,
#           overlapped / alone in the overlap trace) within 10 % of
#           fsdp-ref's own per-layer CUDA-event times, overlap run against
#           serial run ((fwd + bwd) overlap / (fwd + bwd) serial);
#       (METRICS_B_LIST: the --gpu-metrics list of (b), default "default");
#   (c) overhead: fsdp-ref overlap recorded with and without --gpu-metrics,
#       alternating, METRICS_ROUNDS rounds (default 2): step_ms_median, and
#       the kernels each recording kept (sampling must silence none);
#   (d) the same on torch FSDP2 under torchrun (METRICS_FSDP2_ROUNDS,
#       default 2; target <= 1 %).
# PM sampling runs in the sampler process record starts
# (streamscope-gpu-sampler), never in the recorded program.
#
# On a machine of one GPU, (b) is skipped and (c), (d) run one process.
#
# Results (4 files):
#   $OUT/metrics.log   everything
#   $OUT/metrics.json  the checks and figures, one JSON object per line
#   $OUT/fsdp-ref-overlap-metrics-h200x2.tar.gz,
#   $OUT/fsdp-ref-serial-metrics-h200x2.tar.gz: trace folders, to unpack
#     into traces/ (`tar xzf F -C traces/`); on one GPU instead
#   $OUT/fsdp-ref-serial-metrics-h200.tar.gz (the probe's recording).
# Each step has a time limit, the whole a budget (METRICS_BUDGET_S, default
# 450 s); one failing step never stops the script.
set -u



. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
gpu_setup metrics.log
BUDGET_END=$((SECONDS + ${METRICS_BUDGET_S:-450}))
W="$(mktemp -d)"
J="$OUT/metrics.json"
: > "$J"

nccl_shim "$W/shim"
SUMMARY="$W/summary.txt"
: > "$SUMMARY"

pack() { # NAME: $W/NAME -> $OUT/NAME.tar.gz
  ls -la "$W/$1" 2>&1
  tar czf "$OUT/$1.tar.gz" -C "$W" "$1" && ls -la "$OUT/$1.tar.gz"
}
# two PORT OUTPREFIX ARGS...: fsdp-ref ARGS as two processes (RANK 0/1),
# each one's output in OUTPREFIX-rankR.txt.
two() {
  local port="$1" pre="$2"; shift 2
  for r in 0 1; do
    RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      "$F" "$@" > "$pre-rank$r.txt" 2>&1 &
  done
  wait
}
export -f two
export F

# section REGEX: the report's table whose title matches (title, blank
# line, table, up to the next blank line), from stdin.
section() {
  awk -v pat="$1" '$0 ~ pat {on = 1; blanks = 0} on {print; if ($0 == "" && ++blanks == 2) on = 0}'
}

echo "=== machine $(date -u +%FT%TZ)"
nvidia-smi -L
nvidia-smi topo -m 2>&1 | head -6
"$S" --version 2>&1 | head -1

CFG="--layers 8 --dim 4096 --batch 4 --seq 1024 --steps 50 --warmup 5 --json --timeout-s 100"
EXTRA="nvlrx__bytes_data_user.sum,nvltx__bytes_data_user.sum,gr__cycles_active.avg,sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active"

# (a) The probe: one process, one GPU; the sampler's stderr is in the log.
d="$W/metrics-probe-h200"
step probe 90 "$S" record -o "$d" --gpu-metrics="default,$EXTRA" -- \
  "$F" --gpus 1 --mode serial $CFG
step probe-info 30 "$S" info "$d"
"$S" report "$d" | section 'Measured GPU metrics' | head -12

# On one GPU (METRICS_GPUS, default: the GPUs nvidia-smi lists) the probe's
# recording is kept as a trace, (b) is skipped (it needs two ranks) and (c)
# and (d) run one process.
GPUS=${METRICS_GPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')}
if [ "${GPUS:-0}" -lt 2 ]; then
  rm -rf "$W/fsdp-ref-serial-metrics-h200"; cp -r "$d" "$W/fsdp-ref-serial-metrics-h200"
  "$S" report "$d" --format json > "$W/probe.report.json" 2>&1
  "$PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); print(json.dumps({"probe_measured": [k.get("measured") for k in r.get("ranks", [])], "probe_steps": [s.get("measured") for s in r.get("steps", [])][:3]}))' "$W/probe.report.json" | tee -a "$J"
  pack fsdp-ref-serial-metrics-h200
  echo "=== (b) skipped: one GPU"
fi

# (b) Overlap and serial on 2 GPUs, recorded with the default set.
for mode in overlap serial; do
  [ "${GPUS:-0}" -lt 2 ] && break
  d="$W/fsdp-ref-$mode-metrics-h200x2"
  port=29810; [ "$mode" = serial ] && port=29811
  pf=""; [ "$mode" = overlap ] && pf="--prefetch 1"
  step "fsdp-ref-$mode" 120 "$S" record -o "$d" --gpu-metrics="${METRICS_B_LIST:-default}" -- \
    bash -c "two $port '$W/$mode' --mode $mode $pf $CFG"
  for r in 0 1; do
    echo "--- $mode rank $r (collector and fsdp-ref stderr)"
    grep -v '^{' "$W/$mode-rank$r.txt" | tail -40
  done
  grep -h '^{' "$W/$mode-rank0.txt" | tail -1 > "$W/$mode.fsdp.json"
  for r in 0 1; do grep -h '^{' "$W/$mode-rank$r.txt" | tail -1 > "$W/$mode.fsdp.rank$r.json"; done
  step "$mode-info" 30 "$S" info "$d" | grep -E 'gpu_metrics|counter|^rank'
  "$S" report "$d" --format json > "$W/$mode.report.json" 2> "$W/$mode.report.err"
  tail -3 "$W/$mode.report.err"
  "$S" report "$d" > "$W/$mode.report.txt" 2>&1
  for t in 'SM occupancy' 'Measured GPU metrics' 'SM contention'; do
    section "$t" < "$W/$mode.report.txt" | head -40
  done
done

[ "${GPUS:-0}" -ge 2 ] && "$PY" - "$W" <<'PY' | tee -a "$J"
import json, os, statistics, sys
W = sys.argv[1]
def load(p):
    try:
        return json.load(open(p))
    except Exception as e:
        return {"_error": f"{p}: {e}"}
out = {}
fs = {m: load(f"{W}/{m}.fsdp.json") for m in ("overlap", "serial")}
rp = {m: load(f"{W}/{m}.report.json") for m in ("overlap", "serial")}
# SM active while compute kernels run.
sm = {}
for m in ("overlap", "serial"):
    for k in rp[m].get("ranks", []):
        me = k.get("measured") or {}
        sm[f"{m}/rank{k['rank']}"] = {key: me.get(key) for key in (
            "sm_active_compute_pct", "sm_active_pct", "warps_active_pct", "tensor_active_pct",
            "dram_gbps", "nvlink_rx_gbps", "nvlink_tx_gbps", "pcie_read_gbps", "pcie_write_gbps",
            "samples", "span_us")}
vals = [v["sm_active_compute_pct"] for v in sm.values() if v["sm_active_compute_pct"] is not None]
out["measured"] = sm
out["sm_active_in_compute_ge_90"] = bool(vals) and min(vals) >= 90.0
# NVLink bytes per step against the ring's share of the collectives.
nv = {}
for m in ("overlap", "serial"):
    f = fs[m]
    n = f.get("world") or 2
    want = sum(c["bytes"] * c["per_step"] for c in f.get("collectives", [])) * (n - 1) / n / 1e9
    steps = [s for s in rp[m].get("steps", []) if (s.get("measured") or {}).get("samples")]
    for rank in sorted({s["rank"] for s in steps}):
        rows = sorted((s for s in steps if s["rank"] == rank), key=lambda s: s["step"])
        rows = rows[len(rows) // 2:]
        for d in ("tx", "rx"):
            g = [s["measured"][f"nvlink_{d}_gbps"] * s["measured"]["span_us"] / 1e6
                 for s in rows if s["measured"].get(f"nvlink_{d}_gbps") is not None]
            # The report's own figure: NVLink GB against its collectives' bus share.
            rr = [s["measured"][f"nvlink_{d}_gb"] / s["measured"]["collective_link_gb"] for s in rows
                  if s["measured"].get(f"nvlink_{d}_gb") is not None and s["measured"].get("collective_link_gb")]
            if g and want > 0:
                med = statistics.median(g)
                nv[f"{m}/rank{rank}/{d}"] = {"measured_gb_per_step": med, "collectives_gb_per_step": want,
                                            "ratio": med / want, "steps": len(g),
                                            "report_ratio": statistics.median(rr) if rr else None}
out["nvlink"] = nv
out["nvlink_within_10pct"] = bool(nv) and all(abs(v["ratio"] - 1) <= 0.10 for v in nv.values())
# Contention: the trace's overlapped/alone against fsdp-ref's CUDA events,
# each rank against its own events (overlap run over serial run).
def events_ratio(rank):
    mo = load(f"{W}/overlap.fsdp.rank{rank}.json").get("measured") or {}
    ms = load(f"{W}/serial.fsdp.rank{rank}.json").get("measured") or {}
    if not (mo and ms) or (ms.get("t_fwd_compute_ms", 0) + ms.get("t_bwd_compute_ms", 0)) <= 0:
        return None
    r = (mo["t_fwd_compute_ms"] + mo["t_bwd_compute_ms"]) / (ms["t_fwd_compute_ms"] + ms["t_bwd_compute_ms"])
    out.setdefault("events", {})[f"rank{rank}"] = {
        "fwd_overlap_ms": mo["t_fwd_compute_ms"], "fwd_serial_ms": ms["t_fwd_compute_ms"],
        "bwd_overlap_ms": mo["t_bwd_compute_ms"], "bwd_serial_ms": ms["t_bwd_compute_ms"], "ratio": r}
    return r
con = {}
for k in rp["overlap"].get("ranks", []):
    c = k.get("sm_contention") or {}
    p = c.get("compute_slowdown_pct")
    ev = events_ratio(k["rank"])
    con[f"rank{k['rank']}"] = {"compute_slowdown_pct": p, "cost_per_step_us": c.get("cost_per_step_us"),
                              "groups": c.get("groups"), "alone": c.get("kernels_alone"),
                              "overlapped": c.get("kernels_overlapped"),
                              "ratio_vs_events": (1 + p / 100) / ev if (p is not None and ev) else None}
out["contention"] = con
out["contention_within_10pct"] = bool(con) and all(
    v["ratio_vs_events"] is not None and abs(v["ratio_vs_events"] - 1) <= 0.10 for v in con.values())
out["step_ms_median"] = {m: fs[m].get("step_ms_median") for m in fs}
print(json.dumps({"metrics_checks": out}))
PY
if [ "${GPUS:-0}" -ge 2 ]; then
  pack fsdp-ref-overlap-metrics-h200x2
  pack fsdp-ref-serial-metrics-h200x2
fi

# (c) Overhead: recorded with and without --gpu-metrics, alternating.
: > "$W/cost.jsonl"
for i in $(seq "${METRICS_ROUNDS:-2}"); do
  for m in metrics plain; do
    flag=""; [ "$m" = metrics ] && flag="--gpu-metrics"
    rm -rf "$W/cost"
    port=$((29820 + i * 2)); [ "$m" = plain ] && port=$((port + 1))
    if [ "${GPUS:-0}" -ge 2 ]; then
      step "cost-$m-$i" 90 "$S" record $flag -o "$W/cost" -- \
        bash -c "two $port '$W/cost-$m-$i' --mode overlap --prefetch 1 $CFG"
    else
      step "cost-$m-$i" 90 "$S" record $flag -o "$W/cost" -- \
        bash -c "'$F' --gpus 1 --mode serial $CFG > '$W/cost-$m-$i-rank0.txt' 2>&1"
    fi
    # The kernels each recording kept: PM sampling must not silence the
    # collector's activity records (it did when both ran in one process).
    k=$("$S" info "$W/cost" 2>/dev/null | awk '$1 == "kernel" {print $2; exit}')
    grep -h '^{' "$W/cost-$m-$i-rank0.txt" | tail -1 | sed "s/^{/{\"mode\":\"$m\",\"kernels\":${k:-null},/" >> "$W/cost.jsonl"
    grep -h 'streamscope: GPU' "$W/cost-$m-$i-rank0.txt" | tail -3
  done
done
"$PY" - "$W/cost.jsonl" <<'PY' | tee -a "$J"
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
a = [r["step_ms_median"] for r in rows if r["mode"] == "metrics"]
b = [r["step_ms_median"] for r in rows if r["mode"] == "plain"]
o = {"with_metrics_ms": a, "without_ms": b,
     "kernels_with_metrics": [r.get("kernels") for r in rows if r["mode"] == "metrics"],
     "kernels_without": [r.get("kernels") for r in rows if r["mode"] == "plain"]}
if a and b:
    o["overhead_pct"] = 100 * (statistics.mean(a) / statistics.mean(b) - 1)
print(json.dumps({"gpu_metrics_overhead": o}))
PY

# (d) Overhead on torch FSDP2 (GPU-paced size), both recorded, with and
# without --gpu-metrics, alternating (target <= 1 %).
if [ -n "$(command -v torchrun)" ]; then
  FA=${METRICS_FSDP2_ARGS:---dim 4096 --seq 1024}
  : > "$W/fsdp2.jsonl"
  for i in $(seq "${METRICS_FSDP2_ROUNDS:-2}"); do
    for m in metrics plain; do
      flag=""; [ "$m" = metrics ] && flag="--gpu-metrics"
      rm -rf "$W/fsdp2"
      step "fsdp2-$m-$i" 150 "$S" record $flag -o "$W/fsdp2" -- torchrun --nproc_per_node "$(( GPUS < 2 ? 1 : 2 ))" \
        --master_port $((29840 + i)) examples/torch_fsdp2.py $FA --steps "${METRICS_FSDP2_STEPS:-60}" --no-nvtx \
        | grep '^{' | sed "s/^{/{\"mode\":\"$m\",/" >> "$W/fsdp2.jsonl"
      "$S" info "$W/fsdp2" 2>/dev/null | grep -E '^(processes|counts)|^  kernel|counter GPU [0-9] · SM'
    done
  done
  "$PY" - "$W/fsdp2.jsonl" <<'PY' | tee -a "$J"
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
key = "step_ms_median"
a = [r.get(key) for r in rows if r["mode"] == "metrics" and r.get(key)]
b = [r.get(key) for r in rows if r["mode"] == "plain" and r.get(key)]
o = {"with_metrics_ms": a, "without_ms": b}
if a and b:
    o["overhead_pct"] = 100 * (statistics.mean(a) / statistics.mean(b) - 1)
print(json.dumps({"gpu_metrics_overhead_fsdp2": o}))
PY
fi

echo
echo "=== summary"
cat "$SUMMARY"
cat "$J"
rm -rf "$W"
