#!/usr/bin/env bash
# GPU memory from `record` (issue 36), on 1 GPU, under 9 minutes:
#   1. torch-fsdp2-memory: examples/torch_fsdp2.py (FSDP2, 1 rank) recorded
#      with `--memory lines` (MEMORY_MODE=on|off: that mode instead);
#      the report's peak allocated / reserved against the job's own
#      torch.cuda.max_memory_allocated / max_memory_reserved (its JSON line).
#   2. cost: the same job, recorded with the allocator history
#      (STREAMSCOPE_MEMORY=1), with it but no stacks (=nostacks) and
#      without (=0), alternating, ROUNDS each (default 0: separate processes
#      differ by more than the 1 % measured; 2b is the cost); the job's own median step.
#   2b. cost in one process (scripts/gpu/memory-cost.py): the history's
#      variants switched every few steps, COST_ROUNDS rounds (default 40);
#      separate processes differ by more than the 1 % asked.
#   2c. cost per event (scripts/gpu/memory-event-cost.py): a tight
#      allocator loop, history off / on / lines, EV_ROUNDS rounds (default 30).
#   3. oom: the job with --oom-step 5 (asks for twice the card), recorded:
#      the report names the failed allocation and its line.
#   4. native: examples/legacy_stream.cu recorded (no PyTorch): device
#      memory from CUPTI's memory records.
#   5. prefetch: fsdp-ref --prefetch 0 / 1 / 2 on 2 GPUs, recorded: the
#      byte-seconds held early per depth (skipped, and said, on 1 GPU).
# Builds nothing but the native example (scripts/build-carry.sh first):
#
#   BIN=.carry/bin OUT=<results> bash scripts/gpu/memory.sh
#
# Results: $OUT/memory.log (everything; "MEMORY key=value" lines last),
# $OUT/torch-fsdp2-memory.tar.gz (the recording of part 1, for
# traces/), $OUT/memory-oom.tar.gz, $OUT/memory-prefetch.tar.gz.
set -u

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
gpu_setup memory.log
BUDGET_END=$((SECONDS + ${MEMORY_BUDGET_S:-520}))
export STREAMSCOPE_COLLECTOR="$BIN/libstreamscope_collector.so"
nccl_shim "$(mktemp -d)"
W="$(mktemp -d)"
SUMMARY="$W/summary.txt"
: > "$SUMMARY"
X=examples/torch_fsdp2.py
TR="$(dirname "$PY")/torchrun"
[ -x "$TR" ] || TR="$PY -m torch.distributed.run"
STEPS=${STEPS:-20}
ROUNDS=${ROUNDS:-0}
say() { echo "MEMORY $*" | tee -a "$W/results.txt"; }
: > "$W/results.txt"

echo "=== machine $(date -u +%FT%TZ)"
nvidia-smi -L

# 1. The memory recording, checked against the job's own peaks.
D="$W/torch-fsdp2-memory"
step fsdp2-memory 120 env -u STREAMSCOPE_MEMORY "$S" record --memory "${MEMORY_MODE:-lines}" -o "$D" -- $TR --nproc_per_node 1 "$X" --steps "$STEPS" > "$W/fsdp2-memory.out" 2>&1
tail -5 "$W/fsdp2-memory.out"
grep '^{' "$W/fsdp2-memory.out" | tail -1 > "$D/job-timing.txt"
"$S" report "$D" --full | tee "$W/fsdp2-memory.report.txt" | sed -n '1,200p'
"$S" report "$D" --format json > "$W/fsdp2-memory.json"
"$PY" - "$D/job-timing.txt" "$W/fsdp2-memory.json" <<'PY' | tee -a "$W/results.txt"
import json, sys
job = json.load(open(sys.argv[1]))
rep = json.load(open(sys.argv[2]))
m = (rep["ranks"][0].get("memory") or {})
for k, j in (("peak_allocated_bytes", "max_memory_allocated"), ("peak_reserved_bytes", "max_memory_reserved")):
    ours, truth = m.get(k), job.get(j)
    err = None if not ours or not truth else 100 * (ours - truth) / truth
    print(f"MEMORY check={k} report={ours} job={truth} error_pct={err}")
print(f"MEMORY samples={m.get('samples')} source={m.get('source')} peak_device_bytes={m.get('peak_device_bytes')}"
      f" live_listed={len(m.get('live_at_peak') or [])} first_live={(m.get('live_at_peak') or [{}])[0]}")
PY

# 2. What the allocator history costs: recorded with and without it.
for i in $(seq 1 "$ROUNDS"); do
  for mode in history nostacks off; do
    case $mode in history) env_mem=STREAMSCOPE_MEMORY=1 ;; nostacks) env_mem=STREAMSCOPE_MEMORY=nostacks ;; *) env_mem=STREAMSCOPE_MEMORY=0 ;; esac
    step "cost-$mode-$i" 90 env $env_mem "$S" record -o "$W/cost-$mode-$i" -- $TR --nproc_per_node 1 "$X" --steps 30 \
      > "$W/cost-$mode-$i.out" 2>&1
    ms=$(grep '^{' "$W/cost-$mode-$i.out" | tail -1 | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["step_ms_median"])' 2>/dev/null)
    say "cost mode=$mode round=$i step_ms=$ms"
    rm -rf "$W/cost-$mode-$i"
  done
done

# 2b. The same cost in one process, variants alternating every few steps.
if [ "${COST_ROUNDS:-40}" -gt 0 ]; then
  step cost-inprocess 240 "$PY" scripts/gpu/memory-cost.py --rounds "${COST_ROUNDS:-40}" > "$W/cost.out" 2>&1
  grep '^COST' "$W/cost.out" | sed 's/^COST /MEMORY cost_inprocess /' | tee -a "$W/results.txt"
  grep -v '^COST' "$W/cost.out" | tail -5
fi

# 2c. The history's host cost per event (scripts/gpu/memory-event-cost.py):
# a tight allocator loop with the history off, on and with lines.
if [ "${EV_ROUNDS:-30}" -gt 0 ]; then
  step cost-per-event 180 "$PY" scripts/gpu/memory-event-cost.py --rounds "${EV_ROUNDS:-30}" > "$W/evcost.out" 2>&1
  grep '^EVCOST' "$W/evcost.out" | sed 's/^EVCOST /MEMORY cost_per_event /' | tee -a "$W/results.txt"
  grep -v '^EVCOST' "$W/evcost.out" | tail -5
fi

# 3. Out of memory: the job dies; the report names the allocation.
step oom 90 env STREAMSCOPE_MEMORY=1 "$S" record -o "$W/memory-oom" -- $TR --nproc_per_node 1 "$X" --steps 10 --oom-step 5 > "$W/oom.out" 2>&1
grep -i "out of memory\|OutOfMemory" "$W/oom.out" | head -3
"$S" report "$W/memory-oom" --full | grep -i -A4 "memory" | head -40
"$S" report "$W/memory-oom" --format json > "$W/oom.json"
"$PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); m=r["ranks"][0].get("memory") or {}; print("MEMORY oom=", m.get("out_of_memory"))' "$W/oom.json" | tee -a "$W/results.txt"
echo "want line: $X:$(grep -n 'OOM: planted' "$X" | cut -d: -f1)" | tee -a "$W/results.txt"

# 4. A native program: device memory from CUPTI.
CUDA=/usr/local/cuda; [ -d "$CUDA" ] || CUDA=/usr/local/cuda-13.0
if step native-build 120 "$CUDA/bin/nvcc" -O2 -g -std=c++17 -arch=sm_90 -o "$W/legacy_stream" examples/legacy_stream.cu; then
  step native 60 "$S" record -o "$W/native" -- "$W/legacy_stream" --steps 20 > "$W/native.out" 2>&1
  "$S" report "$W/native" --format json > "$W/native.json"
  "$PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); m=r["ranks"][0].get("memory") or {}; print("MEMORY native source=%s peak=%s device_peak=%s samples=%s" % (m.get("source"), m.get("peak_allocated_bytes"), m.get("peak_device_bytes"), m.get("samples")))' "$W/native.json" | tee -a "$W/results.txt"
fi

# 5. Prefetch depth: byte-seconds held early (all-gathers need 2 GPUs).
mkdir -p "$W/memory-prefetch"
NGPU=$(nvidia-smi -L | grep -c '^GPU')
[ "$NGPU" -ge 2 ] || say "prefetch skipped: $NGPU GPU(s), fsdp-ref's all-gathers need 2"
for pf in $([ "$NGPU" -ge 2 ] && echo 0 1 2); do
  d="$W/memory-prefetch/prefetch-$pf"
  step "prefetch-$pf" 90 "$S" record -o "$d" -- "$F" --gpus 2 --mode overlap --prefetch $pf --layers 8 --dim 4096 \
    --batch 4 --seq 1024 --steps 10 --warmup 3 > "$W/pf$pf.out" 2>&1
  tail -1 "$W/pf$pf.out"
  "$S" report "$d" --format json > "$W/pf$pf.json" 2>/dev/null
  "$PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); p=[k.get("prefetch") for k in r["ranks"]]; print("MEMORY prefetch=%s %s" % (sys.argv[2], [{x: (q or {}).get(x) for x in ("all_gathers","sized","held_early_byte_s","late","mean_us")} for q in p]))' "$W/pf$pf.json" "$pf" | tee -a "$W/results.txt"
done

tar czf "$OUT/torch-fsdp2-memory.tar.gz" -C "$W" torch-fsdp2-memory 2>/dev/null
tar czf "$OUT/memory-oom.tar.gz" -C "$W" memory-oom 2>/dev/null
tar czf "$OUT/memory-prefetch.tar.gz" -C "$W" memory-prefetch native 2>/dev/null
echo
cat "$SUMMARY"
cat "$W/results.txt"
