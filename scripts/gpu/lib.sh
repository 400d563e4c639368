# Shared by the scripts/gpu/*.sh runs (sourced, not run).

# nccl_shim DIR: cudarc opens libnccl.so, not libnccl.so.2: a link to the
# system's libnccl.so.2 in DIR, put first on LD_LIBRARY_PATH.
nccl_shim() {
  local so
  so=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 / {print $NF; exit}')
  [ -z "$so" ] && [ -e /usr/lib/x86_64-linux-gnu/libnccl.so.2 ] && so=/usr/lib/x86_64-linux-gnu/libnccl.so.2
  if [ -n "$so" ]; then
    mkdir -p "$1" && ln -sf "$so" "$1/libnccl.so"
    export LD_LIBRARY_PATH="$1:${LD_LIBRARY_PATH:-}"
  fi
}

# step NAME LIMIT_S CMD... : CMD with a time limit, its exit code in
# $SUMMARY. With BUDGET_END set (a $SECONDS value) the limit is cut to the
# budget left, and a step with under 20 s left is skipped (and says so).
# Returns CMD's exit code (1 when skipped).
step() {
  local name="$1" limit="$2"; shift 2
  echo
  if [ -n "${BUDGET_END:-}" ]; then
    local left=$((BUDGET_END - SECONDS))
    if [ "$left" -lt 20 ]; then
      echo "=== $name: skipped (the script's time budget is spent)"
      printf '%-30s skipped (budget)\n' "$name" >> "$SUMMARY"
      return 1
    fi
    [ "$limit" -gt "$left" ] && limit=$left
  fi
  echo "=== $name (limit ${limit}s): $*"
  local start=$SECONDS
  timeout -k 5 "$limit" "$@"
  local rc=$?
  echo "=== $name: rc=$rc in $((SECONDS - start)) s"
  printf '%-30s rc=%-4s %4ss\n' "$name" "$rc" "$((SECONDS - start))" >> "$SUMMARY"
  return $rc
}

# gpu_setup LOG: the start every GPU script shares. BIN and OUT (required)
# made absolute, everything also written to $OUT/LOG, CUDA 13's libraries
# and CUPTI, NVLink multicast off, unbuffered Python; S, F, LIB (the
# binaries in BIN) and PY (PyTorch's python3 where there is one, first on
# PATH) set.
gpu_setup() {
  : "${BIN:?set BIN to the folder holding streamscope, libstreamscope_collector.so, fsdp-ref}"
  : "${OUT:?set OUT to a folder for results}"
  BIN="$(cd "$BIN" && pwd)"
  mkdir -p "$OUT"
  OUT="$(cd "$OUT" && pwd)"
  exec > >(tee -a "$OUT/$1") 2>&1
  export LD_LIBRARY_PATH="/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
  export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
  local cupti=/usr/local/cuda-13.0/targets/x86_64-linux/lib/libcupti.so.13
  [ -e "$cupti" ] && export STREAMSCOPE_CUPTI_LIB="$cupti"
  S="$BIN/streamscope"
  F="$BIN/fsdp-ref"
  LIB="$BIN/libstreamscope_collector.so"
  PY=python3
  [ -x /opt/torch/.venv/bin/python3 ] && PY=/opt/torch/.venv/bin/python3
  export PATH="$(dirname "$PY"):$PATH"
}
