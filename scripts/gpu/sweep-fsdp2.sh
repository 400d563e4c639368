#!/usr/bin/env bash
# `streamscope sweep` on torch FSDP2 (2 GPUs, under 6 minutes): NCCL
# channels x protocol (SWEEP_CHANNELS, SWEEP_PROTOS) over
# examples/torch_fsdp2.py --dim 4096 --seq 1024 --no-nvtx (SWEEP_STEPS steps).
# Builds nothing. From the repo root:
#   BIN=.carry/bin OUT=<results> bash scripts/gpu/sweep-fsdp2.sh
# Results: $OUT/sweep-fsdp2.log, sweep-fsdp2.md, sweep-fsdp2.svg, sweep-fsdp2.json
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
gpu_setup sweep-fsdp2.log
W="$(mktemp -d)"
SUMMARY="$W/summary"; : > "$SUMMARY"
BUDGET_END=$((SECONDS + ${SWEEP_BUDGET_S:-330}))
step sweep-fsdp2 "${SWEEP_BUDGET_S:-330}" "$S" sweep -o "$W/sweep" --repeat "${SWEEP_REPEAT:-3}" \
  --env "NCCL_MAX_NCHANNELS=${SWEEP_CHANNELS:-4,32}" --env "NCCL_PROTO=${SWEEP_PROTOS:-Simple,LL128}" -- \
  torchrun --nproc_per_node 2 --master_port 29790 examples/torch_fsdp2.py --dim 4096 --seq 1024 \
  --steps "${SWEEP_STEPS:-30}" --no-nvtx
for f in sweep.md sweep.svg sweep.json; do cp "$W/sweep/$f" "$OUT/${f/sweep/sweep-fsdp2}" 2>/dev/null; done
cat "$OUT/sweep-fsdp2.md" 2>/dev/null
cat "$SUMMARY"
rm -rf "$W"
