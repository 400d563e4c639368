#!/usr/bin/env bash
# Issue 34: what recording costs a host-bound job, against torch.profiler
# on the same loop, in alternating rounds on one GPU (under 10 minutes;
# COST_BUDGET_S, default 540 s: steps past it are skipped and say so).
#
#   OUT=<results> BIN=.carry/bin bash scripts/gpu/record-cost.sh [PART...]
#
# Variants (COST_VARIANTS picks those of `launch` and `zoo`):
#   plain     no collector;
#   recorded  `streamscope record` as users run it;
#   floor     CUPTI's kernel tracing and nothing else of ours (every other
#             activity kind off, no Python hooks, no API callback);
#   kineto    no collector, the job under torch.profiler (CPU and CUDA);
#   full      `record --trace-api full`, where the collector has it;
#   hw        `recorded` with STREAMSCOPE_HW_TRACE=1.
# Parts (default: check launch zoo):
#   check   a short recording of each workload: its launches must link to
#           their kernels (flows = kernels + copies + memsets), and the sync
#           at launch_bound.py's SYNC line must be found;
#   api     examples/api_cost.py, µs per call (COST_API_ROUNDS, default 2);
#   launch  examples/launch_bound.py (>= 2,400 launches a step)
#           (COST_ROUNDS, default 6), and the GPU idle per sync: the
#           report's (recorded runs) against the job's CUDA events;
#   zoo     examples/sync_zoo.py (COST_ROUNDS);
#   fsdp2   torch FSDP2 on the GPUs there are (at most 2), plain / recorded
#           (COST_FSDP2_ROUNDS, default 3);
#   hw      recorded with and without STREAMSCOPE_HW_TRACE=1 on
#           launch_bound (2 rounds): does hardware kernel tracing take?
# Results: record-cost.log, record-cost.json (every run's JSON line, one per line).
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/gpu/lib.sh
gpu_setup record-cost.log
J="$OUT/record-cost.json"
SUMMARY="$OUT/record-cost-summary.txt"
: > "$J"
: > "$SUMMARY"
BUDGET_END=$((SECONDS + ${COST_BUDGET_S:-540}))
W=$(mktemp -d)
PARTS="${*:-check launch zoo}"
VARIANTS=${COST_VARIANTS:-plain recorded floor kineto}
part() { [[ " $PARTS " == *" $1 "* ]]; }
ROUNDS=${COST_ROUNDS:-6}
echo "record-cost.sh: parts [$PARTS], rounds $ROUNDS, $(nvidia-smi -L | head -2 | tr '\n' ' ')"
"$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'

# variant NAME TAG: the command prefix of a variant.
variant() {
  case "$1" in
    plain | kineto) ;;
    recorded) echo "$S record -o $W/$2" ;;
    full) echo "$S record --trace-api full -o $W/$2" ;;
    floor) echo "env STREAMSCOPE_ACTIVITY_OFF=memcpy,memset,synchronization,runtime,driver,overhead,nvtx $S record --no-python-hooks --no-python-lines -o $W/$2" ;;
    hw) echo "env STREAMSCOPE_HW_TRACE=1 $S record -o $W/$2" ;;
  esac
}
vargs() { [ "$1" = kineto ] && echo --profiler; return 0; }
# run WORKLOAD VARIANT ROUND ARGS...: one run, its JSON line into record-cost.json.
run() {
  local wl="$1" v="$2" i="$3"; shift 3
  local tag="$wl-$v-$i"
  step "$tag" 120 $(variant "$v" "$tag") "$PY" "$@" $(vargs "$v") > "$W/$tag.out" 2> "$W/$tag.err"
  local line
  line=$(grep '^{' "$W/$tag.out" | tail -1)
  echo "$tag: ${line:-no result; stderr tail: $(tail -3 "$W/$tag.err" | tr '\n' ' ')}"
  [ -n "$line" ] && echo "{\"workload\": \"$wl\", \"variant\": \"$v\", \"round\": $i, \"result\": $line}" >> "$J"
  return 0
}

if part check; then
  for wl in launch_bound api_cost sync_zoo; do
    args="--steps 20"; [ "$wl" = api_cost ] && args=""
    step "check-$wl" 120 "$S" record -o "$W/check-$wl" -- "$PY" "examples/$wl.py" $args > "$W/check-$wl.out" 2>&1
    tail -2 "$W/check-$wl.out"
    "$S" info "$W/check-$wl" 2>&1 | head -14
    "$S" info "$W/check-$wl" 2>&1 | "$PY" -c '
import re, sys, json
t = sys.stdin.read()
flows = int(re.search(r"flows: (\d+)", t).group(1))
gpu = sum(int(m) for m in re.findall(r"^  (?:kernel|memcpy|memset)\s+(\d+)", t, re.M))
api = sum(int(m) for m in re.findall(r"^  (?:runtime|driver)\s+(\d+)", t, re.M))
print(json.dumps({"check": sys.argv[1], "flows": flows, "gpu_records": gpu, "api_records": api,
                  "linked_pct": round(100.0 * flows / max(gpu, 1), 2)}))' "$wl" | tee -a "$J"
  done
  "$S" report "$W/check-launch_bound" 2>&1 | head -30
  "$S" report "$W/check-sync_zoo" 2>&1 | grep -n "sync_zoo.py" | head -30
  "$S" report --format json "$W/check-launch_bound" > "$W/check-lb.json" 2>/dev/null
  "$PY" - "$W/check-lb.json" <<'PY' | tee -a "$J"
import json, sys
r = json.load(open(sys.argv[1]))
s = [x for x in r["ranks"][0]["syncs"] if "launch_bound.py" in (x.get("where") or "")]
print(json.dumps({"check_syncs": [{k: x.get(k) for k in ("where", "api", "count", "gpu_idle_us", "host_blocked_us")} for x in s]}))
PY
  tar czf "$OUT/record-cost-check-traces.tar.gz" -C "$W" check-launch_bound check-sync_zoo 2>/dev/null
fi

if part api; then
  for i in $(seq "${COST_API_ROUNDS:-2}"); do
    for v in plain recorded floor; do run api_cost "$v" "$i" examples/api_cost.py; done
  done
fi

if part launch; then
  for i in $(seq "$ROUNDS"); do
    for v in $VARIANTS; do
      run launch_bound "$v" "$i" examples/launch_bound.py --steps 40
      # The report's GPU idle per sync of the recorded run, for the gap check.
      if [ "$v" = recorded ] && [ -d "$W/launch_bound-recorded-$i" ]; then
        "$S" report --format json "$W/launch_bound-recorded-$i" 2>/dev/null | "$PY" -c '
import json, sys
r = json.load(sys.stdin)
s = [x for x in r["ranks"][0]["syncs"] if "launch_bound.py" in (x.get("where") or "")]
for x in s:
    print(json.dumps({"workload": "launch_bound_report", "pattern": x.get("pattern"), "api": x.get("api"), "round": int(sys.argv[1]), "where": x["where"],
                      "count": x["count"], "gpu_idle_us": x["gpu_idle_us"],
                      "idle_per_sync_us": x["gpu_idle_us"] / max(x["count"], 1)}))' "$i" | tee -a "$J"
      fi
    done
  done
fi

if part zoo; then
  for i in $(seq "$ROUNDS"); do
    for v in $VARIANTS; do run sync_zoo "$v" "$i" examples/sync_zoo.py --steps 60; done
  done
fi

if part hw; then
  for i in 1 2; do
    for v in recorded hw; do run launch_bound "$v" "$i" examples/launch_bound.py --steps 40; done
  done
  "$S" info "$W/launch_bound-hw-1" 2>&1 | grep -i "hw_trace" | head -3
  grep -ih "hardware" "$W/launch_bound-hw-1.err" | head -3
fi

if part fsdp2; then
  NP=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU'); [ "$NP" -gt 2 ] && NP=2
  for i in $(seq "${COST_FSDP2_ROUNDS:-3}"); do
    for v in plain recorded; do
      tag="fsdp2-$v-$i"
      step "$tag" 120 $(variant "$v" "$tag") torchrun --nproc_per_node "$NP" examples/torch_fsdp2.py --dim 4096 --seq 1024 --steps 30 --no-nvtx > "$W/$tag.out" 2> "$W/$tag.err"
      line=$(grep '^{' "$W/$tag.out" | tail -1)
      echo "$tag: ${line:-no result}"
      [ -n "$line" ] && echo "{\"workload\": \"fsdp2_${NP}gpu\", \"variant\": \"$v\", \"round\": $i, \"result\": $line}" >> "$J"
    done
  done
fi

# Summary: per workload and variant, the median of the runs' median steps,
# and the paired cost against plain (each run against its round's plain).
"$PY" - "$J" <<'PY' | tee -a "$J"
import json, statistics, sys, collections
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{"workload"')]
by = collections.defaultdict(dict)
for r in rows:
    if "result" in r and "step_ms_median" in r["result"]:
        by[(r["workload"], r["variant"])][r["round"]] = r["result"]["step_ms_median"]
out = {}
for (wl, v), runs in sorted(by.items()):
    d = {"runs_ms": [runs[i] for i in sorted(runs)], "median_ms": statistics.median(runs.values())}
    plain = by.get((wl, "plain"), {})
    pairs = [100 * (runs[i] - plain[i]) / plain[i] for i in runs if i in plain and v != "plain"]
    if pairs:
        d["vs_plain_paired_pct"] = round(statistics.mean(pairs), 2)
        d["vs_plain_medians_pct"] = round(100 * (d["median_ms"] - statistics.median(plain.values())) / statistics.median(plain.values()), 2)
    out[f"{wl}/{v}"] = d
api = collections.defaultdict(list)
for r in rows:
    if r["workload"] == "api_cost":
        api[r["variant"]].append(r["result"])
out["api_cost_us"] = {v: {k: statistics.median(x[k] for x in rs) for k in rs[0] if k.endswith("_us")} for v, rs in api.items()}
gaps = [r["result"]["sync_gap_us_median"] for r in rows if r["workload"] == "launch_bound" and r["variant"] == "plain" and r["result"].get("sync_gap_us_median")]
lean_gaps = [r["result"]["sync_gap_us_median"] for r in rows if r["workload"] == "launch_bound" and r["variant"] == "recorded" and r["result"].get("sync_gap_us_median")]
# Per recorded run, the GPU idle the report charges to the SYNC line, per step.
per_run = collections.defaultdict(float)
for r in rows:
    if r["workload"] == "launch_bound_report":
        per_run[r["round"]] += r["gpu_idle_us"]
steps = {r["round"]: r["result"]["steps"] for r in rows if r["workload"] == "launch_bound" and r["variant"] == "recorded"}
rep = [per_run[i] / steps[i] for i in per_run if steps.get(i)]
if gaps and rep:
    out["sync_idle"] = {"plain_event_gap_us": statistics.median(gaps), "recorded_event_gap_us": statistics.median(lean_gaps) if lean_gaps else None,
                        "recorded_report_idle_per_step_us": statistics.median(rep),
                        "report_vs_plain_pct": round(100 * (statistics.median(rep) - statistics.median(gaps)) / statistics.median(gaps), 2)}
print(json.dumps({"summary": out}))
PY
cat "$SUMMARY"
