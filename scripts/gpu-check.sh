#!/usr/bin/env bash
# Every GPU step of the project, in one script for the lent GPU machine
# (see docs/GPU.md). Builds nothing: run scripts/build-carry.sh here first,
# then on the device, from the repo root, with .carry carried:
#   OUT=$OUT bash scripts/gpu-check.sh [fsdp-ref|collector|all|traces|truth|metrics|graphs]
# Logs and traces land under $OUT.
set -u
cd "$(dirname "$0")/.."
export BIN=${BIN:-$PWD/.carry/bin}
export OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
chmod +x "$BIN"/* 2>/dev/null || true
what=${1:-all}
if [ "$what" = all ] || [ "$what" = fsdp-ref ]; then
  # fsdp-ref.sh writes a log per run; only 8 files come back from the
  # device, so they are joined into one.
  work=$(mktemp -d)
  OUT=$work bash scripts/gpu/fsdp-ref.sh > "$work/all.log" 2>&1 || echo "fsdp-ref.sh failed: $?"
  { cat "$work/all.log"; for f in "$work"/fsdp-ref-*.log "$work"/*.out; do [ -f "$f" ] && { echo "##### $(basename "$f")"; cat "$f"; }; done; } > "$OUT/fsdp-ref.log"
  cp "$work/fsdp-ref-summary.jsonl" "$OUT/" 2>/dev/null
  rm -rf "$work"
fi
if [ "$what" = all ] || [ "$what" = collector ]; then
  bash scripts/gpu/collector.sh || echo "collector.sh failed: $?"
fi
if [ "$what" = metrics ]; then
  # Measured GPU metrics on 2 GPUs (under 8 min): scripts/gpu/metrics.sh.
  bash scripts/gpu/metrics.sh || echo "metrics.sh failed: $?"
fi
if [ "$what" = truth ]; then
  # The collector's measurements on 2 GPUs (under 9 min): scripts/gpu/truth.sh.
  bash scripts/gpu/truth.sh || echo "truth.sh failed: $?"
fi
if [ "$what" = graphs ]; then
  # CUDA graphs and compiled models on one GPU (under 4 min): scripts/gpu/graphs.sh.
  bash scripts/gpu/graphs.sh all || echo "graphs.sh failed: $?"
fi
if [ "$what" = traces ]; then
  bash scripts/gpu/traces.sh || echo "traces.sh failed: $?"
fi
ls -la "$OUT"
