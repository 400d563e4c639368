#!/usr/bin/env bash
# Every GPU step of the project, in one script for the lent GPU machine
# (see docs/GPU.md). Builds nothing: run scripts/build-carry.sh here first,
# then on the device, from the repo root, with .carry carried:
#   OUT=$OUT bash scripts/gpu-check.sh [fsdp-ref|collector|all]
# Logs and traces land under $OUT.
set -u
cd "$(dirname "$0")/.."
export BIN=${BIN:-$PWD/.carry/bin}
export OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
chmod +x "$BIN"/* 2>/dev/null || true
{
  echo "== $(date -u) on $(hostname)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv 2>&1 || echo "no nvidia-smi"
} > "$OUT/machine.txt"
what=${1:-all}
if [ "$what" = all ] || [ "$what" = fsdp-ref ]; then
  bash scripts/gpu/fsdp-ref.sh || echo "fsdp-ref.sh failed: $?"
fi
if [ "$what" = all ] || [ "$what" = collector ]; then
  bash scripts/gpu/collector.sh || echo "collector.sh failed: $?"
fi
ls -la "$OUT"
