#!/usr/bin/env bash
# The CUPTI collector on the GPU machine: a smoke run, the ignored GPU tests,
# `streamscope record` of the torch FSDP2 example (torchrun, 2 ranks) and of
# fsdp-ref overlap/serial, `streamscope report` on each, and the overhead
# benchmark (fsdp-ref with and without the collector, median step time).
# Builds nothing. Run from the repository root:
#
#   BIN=<folder with streamscope, libstreamscope_collector.so, fsdp-ref, collector-gpu-tests> \
#   OUT=<results folder> bash scripts/gpu/collector.sh
#
# Results in $OUT (6 files at most): collector.log (everything, one file),
# overhead.json, torch/rank-{0,1}.pftrace, fsdp-overlap/pid-HOST-N.pftrace,
# fsdp-serial/pid-HOST-N.pftrace. One failing step never stops the script.
set -u

: "${BIN:?set BIN to the folder holding streamscope, libstreamscope_collector.so, fsdp-ref, collector-gpu-tests}"
: "${OUT:?set OUT to a folder for results}"
BIN="$(cd "$BIN" && pwd)"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
LOG="$OUT/collector.log"
: > "$LOG"
exec > >(tee -a "$LOG") 2>&1

export LD_LIBRARY_PATH="/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
export NCCL_NVLS_ENABLE=0   # never NVLink multicast on this machine
CUPTI=/usr/local/cuda-13.0/targets/x86_64-linux/lib/libcupti.so.13
[ -e "$CUPTI" ] && export STREAMSCOPE_CUPTI_LIB="$CUPTI"
export COLLECTOR_SO="$BIN/libstreamscope_collector.so"
export FSDP_REF="$BIN/fsdp-ref"
S="$BIN/streamscope"
F="$BIN/fsdp-ref"
WORK="$(mktemp -d)"

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
nccl_shim "$WORK/shim"

SUMMARY="$WORK/summary.txt"
: > "$SUMMARY"

echo "=== machine $(date -u +%FT%TZ)"
nvidia-smi -L
ls -la "$BIN"
ls -la "$CUPTI" 2>&1
echo "nccl: ${NCCL_SO:-not found}"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'
"$S" --version
"$F" --help 2>&1 | head -60

# 0. Smoke: one tiny CUDA program injected by hand, then what the trace holds.
export STREAMSCOPE_OUT="$WORK/smoke"
step smoke 120 env CUDA_INJECTION64_PATH="$COLLECTOR_SO" NVTX_INJECTION64_PATH="${STREAMSCOPE_CUPTI_LIB:-}" \
  python3 -c 'import torch; x = torch.ones(1024, device="cuda"); print("sum", (x * 2).sum().item())'
unset STREAMSCOPE_OUT
ls -la "$WORK/smoke" 2>&1
step smoke-info 60 "$S" info "$WORK/smoke"

# 1. The ignored GPU tests (fsdp-ref trace, python lines, capture windows, SIGTERM).
step gpu-tests 400 "$BIN/collector-gpu-tests" --ignored --test-threads=1 --nocapture

# 2. torch FSDP2, 2 ranks under torchrun.
step torch-fsdp2 400 "$S" record -o "$OUT/torch" -- torchrun --nproc_per_node 2 examples/torch_fsdp2.py
step report-torch 120 "$S" report "$OUT/torch"

# 3. fsdp-ref overlap and serial, one process driving both GPUs.
CFG="--layers 8 --dim 4096 --batch 4 --seq 1024 --steps 10 --warmup 3 --timeout-s 240"
step fsdp-overlap 300 "$S" record -o "$OUT/fsdp-overlap" -- "$F" --gpus 2 --mode overlap --item-sync $CFG
step report-fsdp-overlap 120 "$S" report "$OUT/fsdp-overlap"
step fsdp-serial 300 "$S" record -o "$OUT/fsdp-serial" -- "$F" --gpus 2 --mode serial --item-sync $CFG
step report-fsdp-serial 120 "$S" report "$OUT/fsdp-serial"

# 4. Overhead: the same fsdp-ref run with and without the collector, twice
#    each, alternating; 25 measured steps per run.
BENCH="--gpus 2 --mode overlap --layers 8 --dim 4096 --batch 4 --seq 1024 --steps 25 --warmup 5 --timeout-s 240 --json"
for i in 1 2; do
  step "bench-base-$i" 300 sh -c "\"$F\" $BENCH > \"$WORK/base-$i.json\""
  cat "$WORK/base-$i.json"
  step "bench-traced-$i" 300 sh -c "\"$S\" record -o \"$WORK/bench-$i\" -- \"$F\" $BENCH > \"$WORK/traced-$i.json\""
  cat "$WORK/traced-$i.json"
done
python3 - "$WORK" "$OUT/overhead.json" <<'PY'
import glob, json, statistics, sys
work, out = sys.argv[1], sys.argv[2]
def medians(kind):
    v = []
    for f in sorted(glob.glob(f"{work}/{kind}-*.json")):
        for line in open(f):
            line = line.strip()
            if line.startswith("{"):
                try:
                    v.append(float(json.loads(line)["step_ms_median"]))
                except (ValueError, KeyError) as e:
                    print(f"{f}: {e}", file=sys.stderr)
    return v
base, traced = medians("base"), medians("traced")
res = {"workload": "fsdp-ref --gpus 2 --mode overlap d=4096 L=8 tokens=4096, 25 steps per run",
       "baseline_step_ms_median": base, "traced_step_ms_median": traced}
if base and traced:
    b, t = statistics.median(base), statistics.median(traced)
    res.update(baseline_ms=b, traced_ms=t, overhead_pct=100.0 * (t - b) / b)
json.dump(res, open(out, "w"), indent=1)
print(json.dumps(res))
PY

# Only what fits comes back: 16 MB per file.
echo
echo "=== results"
find "$OUT" -type f -printf '%10s %p\n' | sort -k2
find "$OUT" -type f -size +15M -printf 'too big to return, moved to %f in $WORK: %p\n' -exec mv {} "$WORK/" \;
echo "=== summary"
cat "$SUMMARY"
rm -rf "$WORK"
