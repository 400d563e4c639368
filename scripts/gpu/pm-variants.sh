#!/usr/bin/env bash
# Diagnosis of CUPTI PM sampling on this GPU and driver (issue 13): the
# sampler process (streamscope-gpu-sampler) alone, on GPU 0, while fsdp-ref
# runs there, once per way of driving CUPTI (the STREAMSCOPE_PM_* settings
# of collector/src/pm_sampling, mod.rs `Tuning`). Per variant: the
# sampler's exit (139 = SIGSEGV), its last stats line and the points its
# feed holds. Then cuda-gdb's backtrace of the first variant that crashed.
# Under 2 minutes; builds nothing. From the repo root:
#
#   BIN=.carry/bin OUT=<results> bash scripts/gpu/pm-variants.sh
#
# Results: $OUT/pm-variants.log, $OUT/pm-variants.json (one line per
# variant), and $OUT/pm-variant.env: the first variant that sampled without
# a fault (`VAR=value ...`, empty for the default), for metrics.sh.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
gpu_setup pm-variants.log
W="$(mktemp -d)"
J="$OUT/pm-variants.json"
: > "$J"
: > "$OUT/pm-variant.env"
SAMPLER="$BIN/streamscope-gpu-sampler"
CFG="--gpus 1 --mode serial --layers 8 --dim 4096 --batch 4 --seq 1024 --steps 60 --warmup 5 --timeout-s 60"
VARIANTS=(
  "default|"
  "reset-copy|STREAMSCOPE_PM_RESET=copy"
  "fresh-eval-host|STREAMSCOPE_PM_EVAL_HOST=fresh"
  "no-evaluate|STREAMSCOPE_PM_EVALUATE=0"
  "sysclk|STREAMSCOPE_PM_TRIGGER=sysclk"
  "config-first|STREAMSCOPE_PM_ORDER=config-first"
  "image-5000|STREAMSCOPE_PM_IMAGE_SAMPLES=5000"
  "copy+fresh+sysclk|STREAMSCOPE_PM_RESET=copy STREAMSCOPE_PM_EVAL_HOST=fresh STREAMSCOPE_PM_TRIGGER=sysclk"
  "one-metric|STREAMSCOPE_GPU_METRICS=sm_active"
)
crashed=""
for v in "${VARIANTS[@]}"; do
  name="${v%%|*}"; envs="${v#*|}"
  d="$W/$name"; mkdir -p "$d"
  echo "=== variant $name: $envs"
  ( sleep 9 ) | env STREAMSCOPE_GPU_METRICS=default STREAMSCOPE_GPU_METRICS_HZ=10000 $envs \
      CUDA_VISIBLE_DEVICES=0 timeout -k 3 30 "$SAMPLER" --dir "$d" > "$d/stdout" 2> "$d/stderr" &
  spid=$!
  for _ in $(seq 50); do grep -q ready "$d/stdout" 2>/dev/null && break; sleep 0.2; done
  CUDA_VISIBLE_DEVICES=0 timeout 40 "$F" $CFG > "$d/fsdp.txt" 2>&1
  frc=$?
  wait "$spid"; src=$?
  pts=0
  for p in "$d"/.gpu-metrics-feed-*.points; do [ -e "$p" ] && pts=$(( $(stat -c %s "$p") / 20 )); done
  cat "$d/stderr"
  stats=$(grep -E 'samples,' "$d/stderr" | tail -1 | tr '"' "'")
  echo "{\"variant\": \"$name\", \"env\": \"$envs\", \"sampler_rc\": $src, \"fsdp_rc\": $frc, \"points\": $pts, \"stats\": \"$stats\"}" | tee -a "$J"
  if [ "$src" = 0 ] && [ "$pts" -gt 0 ] && [ ! -s "$OUT/pm-variant.env" ]; then
    echo "$envs" > "$OUT/pm-variant.env"; echo "$name" > "$W/picked"
  fi
  [ "$src" != 0 ] && [ -z "$crashed" ] && crashed="$envs|$name"
done
echo "=== picked: $(cat "$W/picked" 2>/dev/null || echo none)"
if [ -n "$crashed" ] && command -v cuda-gdb >/dev/null; then
  envs="${crashed%%|*}"
  echo "=== cuda-gdb on variant ${crashed#*|}"
  d="$W/gdb"; mkdir -p "$d"
  CUDA_VISIBLE_DEVICES=0 "$F" $CFG > "$d/fsdp.txt" 2>&1 &
  ( sleep 8 ) | env STREAMSCOPE_GPU_METRICS=default $envs CUDA_VISIBLE_DEVICES=0 timeout -k 3 60 \
     cuda-gdb -q -batch -ex run -ex bt -ex 'info registers rip rdi rsi' -ex 'x/6i $pc-12' --args "$SAMPLER" --dir "$d" 2>&1 | grep -v '^\[' | tail -40
  wait
fi
rm -rf "$W"
