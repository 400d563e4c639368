#!/usr/bin/env bash
# fsdp-ref on the GPU machine: the ignored GPU tests, then serial and overlap
# runs on 1 GPU and on all GPUs, a network-wall run, planted syncs, the
# multi-process (torchrun-style) launch, an NCCL knob and two bad inputs.
# Builds nothing. Run from the repository root:
#
#   BIN=<folder with fsdp-ref and kernels-gpu-tests> OUT=<log folder> bash scripts/gpu/fsdp-ref.sh
#
# Every run is teed to $OUT/fsdp-ref-<name>.log; one failure never stops the
# script; $OUT/fsdp-ref-summary.txt lists each run's exit code and
# $OUT/fsdp-ref-summary.jsonl the --json lines.
set -u

: "${BIN:?set BIN to the folder holding fsdp-ref and kernels-gpu-tests}"
: "${OUT:?set OUT to a folder for logs}"
mkdir -p "$OUT"
export LD_LIBRARY_PATH="/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
export NCCL_NVLS_ENABLE=0   # never NVLink multicast on this machine

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
nccl_shim "$(mktemp -d)"

SUMMARY="$OUT/fsdp-ref-summary.txt"
JSONL="$OUT/fsdp-ref-summary.jsonl"
: > "$SUMMARY"
: > "$JSONL"
{
  echo "date: $(date -u +%FT%TZ)"
  echo "nccl: ${NCCL_SO:-not found}"
  nvidia-smi -L 2>&1
  nvidia-smi topo -m 2>&1
} > "$OUT/fsdp-ref-machine.log"
cat "$OUT/fsdp-ref-machine.log"

NGPU="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)"
[ "${NGPU:-0}" -ge 1 ] || NGPU=1

# run NAME CMD... : runs CMD with a hard 300 s limit, tees its output, records rc.
run() {
  local name="$1"; shift
  local log="$OUT/fsdp-ref-$name.log"
  echo "=== $name: $*" | tee "$log"
  local start=$SECONDS
  timeout 300 "$@" 2>&1 | tee -a "$log"
  local rc=${PIPESTATUS[0]}
  echo "=== $name: rc=$rc in $((SECONDS - start)) s" | tee -a "$log"
  printf '%-28s rc=%-4s %4ss\n' "$name" "$rc" "$((SECONDS - start))" >> "$SUMMARY"
}

# run_json NAME ARGS... : one --json run, its line appended to the .jsonl.
run_json() {
  local name="$1"; shift
  run "$name" "$BIN/fsdp-ref" --json "$@"
  grep -h '^{' "$OUT/fsdp-ref-$name.log" >> "$JSONL" || true
}

F="$BIN/fsdp-ref"
W="--timeout-s 240"
# Modest config: d=4096, 8 blocks, 4096 tokens per step (2048 per rank on 2 GPUs):
# per layer ~0.27 GB gathered (bf16) and ~0.54 GB reduce-scattered (fp32)
# against ~0.9 ms forward / ~1.8 ms backward of GEMMs, i.e. communication
# comparable to compute, where overlap pays most.
MODEST="--layers 8 --dim 4096 --batch 4 --seq 1024 --steps 10 --warmup 3"
# Network wall: same model, 128 tokens per step: GEMMs far shorter than the gathers.
WALL="--layers 8 --dim 4096 --batch 1 --seq 128 --steps 10 --warmup 3"

# 1. Correctness (CPU reference of a block; N-GPU loss vs 1-GPU; schedules agree).
run tests "$BIN/kernels-gpu-tests" --ignored --test-threads=1

# 2. Serial vs overlap, 1 GPU and all GPUs.
run 1gpu-serial   $F --gpus 1 --mode serial $MODEST $W
run 1gpu-overlap  $F --gpus 1 --mode overlap --prefetch 1 $MODEST $W
if [ "$NGPU" -ge 2 ]; then
run ${NGPU}gpu-serial  $F --gpus "$NGPU" --mode serial $MODEST $W
run ${NGPU}gpu-overlap $F --gpus "$NGPU" --mode overlap --prefetch 1 $MODEST $W
run ${NGPU}gpu-overlap-prefetch0 $F --gpus "$NGPU" --mode overlap --prefetch 0 $MODEST $W
run ${NGPU}gpu-overlap-prefetch2 $F --gpus "$NGPU" --mode overlap --prefetch 2 $MODEST $W
fi

# 3. The network wall (on one GPU there is no network: the wall needs two).
run ${NGPU}gpu-wall-serial  $F --gpus "$NGPU" --mode serial $WALL $W
run ${NGPU}gpu-wall-overlap $F --gpus "$NGPU" --mode overlap --prefetch 1 $WALL $W

# 4. Planted host syncs (loss.item() every step, a stream sync every 2 blocks).
run ${NGPU}gpu-overlap-syncs $F --gpus "$NGPU" --mode overlap --item-sync --sync-every 2 $MODEST $W

# 5. One NCCL knob: fewer channels leave more SMs to the GEMMs, less bandwidth.
run ${NGPU}gpu-overlap-nchannels4 env NCCL_MAX_NCHANNELS=4 $F --gpus "$NGPU" --mode overlap $MODEST $W

# 6. One process per GPU, torchrun convention (rank 0 hands out the NCCL id over TCP).
if [ "$NGPU" -ge 2 ]; then
  name=${NGPU}proc-overlap
  log="$OUT/fsdp-ref-$name.log"
  echo "=== $name: $NGPU processes" | tee "$log"
  start=$SECONDS
  pids=()
  for r in $(seq 0 $((NGPU - 1))); do
    RANK=$r WORLD_SIZE=$NGPU LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=29611 \
      timeout 300 $F --mode overlap $MODEST $W --rendezvous-timeout-s 60 \
      > "$OUT/fsdp-ref-$name-rank$r.out" 2>&1 &
    pids+=($!)
  done
  rc=0
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  cat "$OUT"/fsdp-ref-"$name"-rank*.out | tee -a "$log"
  echo "=== $name: rc=$rc in $((SECONDS - start)) s" | tee -a "$log"
  printf '%-28s rc=%-4s %4ss\n' "$name" "$rc" "$((SECONDS - start))" >> "$SUMMARY"
fi

# 7. The same pairs as one JSON line each, for scripts.
run_json json-1gpu-serial  --gpus 1 --mode serial $MODEST $W
run_json json-1gpu-overlap --gpus 1 --mode overlap $MODEST $W
if [ "$NGPU" -ge 2 ]; then
  run_json json-${NGPU}gpu-serial  --gpus "$NGPU" --mode serial $MODEST $W
  run_json json-${NGPU}gpu-overlap --gpus "$NGPU" --mode overlap $MODEST $W
fi
run_json json-${NGPU}gpu-wall-serial  --gpus "$NGPU" --mode serial $WALL $W
run_json json-${NGPU}gpu-wall-overlap --gpus "$NGPU" --mode overlap $WALL $W

# 8. Bad input must fail fast with one line: dims that do not divide, a rank that never arrives.
run bad-dim $F --gpus "$NGPU" --dim 12 $W
run bad-rank0-unreachable env RANK=1 WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29613 \
  $F $MODEST --rendezvous-timeout-s 5 $W
run bad-rank1-never-arrives env RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29615 \
  $F $MODEST --rendezvous-timeout-s 5 $W

rm -rf "$SHIM"
echo "=== summary"
cat "$SUMMARY"
