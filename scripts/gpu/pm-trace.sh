#!/usr/bin/env bash
# The GPU sampler's CUPTI calls traced (STREAMSCOPE_PM_VERBOSE=1), alone on
# one GPU while fsdp-ref runs there: once per variant given as
# "GPU|NAME|VAR=value ..." arguments (default: the default settings, then
# a 200 ms decode period, both on GPU 0). Under a minute.
#   BIN=.carry/bin OUT=<results> bash scripts/gpu/pm-trace.sh [VARIANT...]
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
gpu_setup pm-trace.log
W="$(mktemp -d)"
SAMPLER="$BIN/streamscope-gpu-sampler"
CFG="--gpus 1 --mode serial --layers 8 --dim 4096 --batch 4 --seq 1024 --steps 40 --warmup 5 --timeout-s 60"
[ $# -eq 0 ] && set -- "0|default|" "0|decode-200ms|STREAMSCOPE_PM_DECODE_MS=200"
for v in "$@"; do
  IFS='|' read -r gpu name envs <<< "$v"
  d="$W/$name"; mkdir -p "$d"
  echo "=== $name on GPU $gpu: $envs"
  ( sleep 6 ) | env STREAMSCOPE_GPU_METRICS=default STREAMSCOPE_PM_VERBOSE=1 $envs \
      CUDA_VISIBLE_DEVICES=$gpu timeout -k 3 30 "$SAMPLER" --dir "$d" > "$d/stdout" 2> "$d/stderr" &
  spid=$!
  for _ in $(seq 50); do grep -q ready "$d/stdout" 2>/dev/null && break; sleep 0.2; done
  CUDA_VISIBLE_DEVICES=$gpu timeout 40 "$F" $CFG > /dev/null 2>&1
  wait "$spid"; echo "sampler rc=$?"
  head -c 12000 "$d/stderr"
  for m in "$d"/.gpu-metrics-feed-*.meta; do [ -e "$m" ] && cat "$m"; done
  for p in "$d"/.gpu-metrics-feed-*.points; do [ -e "$p" ] && echo "points: $(( $(stat -c %s "$p") / 20 ))"; done
done
rm -rf "$W"
