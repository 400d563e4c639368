#!/usr/bin/env bash
# Records the traces the project ships in traces/ (each under 10 MB): the
# torch FSDP2 example under torchrun, and fsdp-ref overlap and serial as two
# processes (one per GPU, the torchrun convention), so every file is one
# rank. Run from the repo root with BIN (streamscope, collector, fsdp-ref)
# and OUT; each run's folder under $OUT holds rank-0/1.pftrace (traces/
# ships them as `gzip -9 -n` .pftrace.gz), and $OUT/traces.log the output
# and reports.
set -u
: "${BIN:?}" "${OUT:?}"
BIN="$(cd "$BIN" && pwd)"
mkdir -p "$OUT"
exec > >(tee -a "$OUT/traces.log") 2>&1
export LD_LIBRARY_PATH="/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
export NCCL_NVLS_ENABLE=0
S="$BIN/streamscope"; F="$BIN/fsdp-ref"
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
nccl_shim "$(mktemp -d)"

rec() { # NAME CMD...
  local name=$1; shift
  echo "=== record $name: $*"
  timeout -k 10 300 "$S" record -o "$OUT/$name" -- "$@"
  echo "=== $name rc=$?"
  # The torchrun launcher makes CUDA calls of its own but runs no GPU work:
  # keep the ranks only.
  find "$OUT/$name" -name 'pid-*.pftrace' -print -delete
  "$S" info "$OUT/$name" | head -40
  "$S" report "$OUT/$name"
}

rec torch-fsdp2-h200x2 torchrun --nproc_per_node 2 examples/torch_fsdp2.py --steps 10

CFG="--layers 8 --dim 4096 --batch 4 --seq 1024 --steps 10 --warmup 3 --item-sync --timeout-s 240"
two_ranks() { # MODE PORT: fsdp-ref as two processes, rank 0 hands out the NCCL id
  for r in 0 1; do
    RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$2 "$F" --mode "$1" $CFG > "$OUT/fsdp-ref-$1-rank$r.txt" 2>&1 &
  done
  wait
  cat "$OUT/fsdp-ref-$1-rank0.txt"; rm -f "$OUT"/fsdp-ref-"$1"-rank*.txt
}
export -f two_ranks; export F CFG OUT
rec fsdp-ref-overlap-h200x2 bash -c 'two_ranks overlap 29721'
rec fsdp-ref-serial-h200x2 bash -c 'two_ranks serial 29731'
find "$OUT" -type f -printf '%10s %p\n' | sort -k2
