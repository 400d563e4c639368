#!/usr/bin/env bash
# Where does CUPTI PM sampling break on this machine? scripts/gpu/pm-probe.cu
# (the smallest sampling loop, built here with nvcc) under one setting at a
# time, from the least to the most demanding, then streamscope's own
# sampler under the same load. Each line of the probe is one decode round.
# About 2 minutes. From the repo root:
#   BIN=.carry/bin OUT=<results> bash scripts/gpu/pm-probe.sh [PROBE-ARGS...]
# With PROBE-ARGS, only the probe with those settings (and the defaults).
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
gpu_setup pm-probe.log
CUDA=/usr/local/cuda
[ -d "$CUDA" ] || CUDA=/usr/local/cuda-13.0
echo "kernel $(uname -r); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -2 | tr '\n' ' ')"
ls -la "$CUDA/extras/CUPTI/lib64/" 2>&1 | grep -E "cupti|nvperf" | head -12
find / -xdev -name 'libnvperf_host.so*' 2>/dev/null | head -8
export LD_LIBRARY_PATH="$CUDA/extras/CUPTI/lib64:$LD_LIBRARY_PATH"
W="$(mktemp -d)"
SUMMARY="$W/summary.txt"
P="$W/pm-probe"
step build 120 "$CUDA/bin/nvcc" -O2 -std=c++17 -arch=sm_90 -I"$CUDA/extras/CUPTI/include" \
  scripts/gpu/pm-probe.cu -L"$CUDA/extras/CUPTI/lib64" -lcupti -lcuda -o "$P" || exit 1
probe() { step "probe $*" 40 "$P" "$@"; }
if [ $# -gt 0 ]; then probe "$@"; exit 0; fi
SIX=sm__cycles_active.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed,dram__bytes.sum,pcie__read_bytes.sum,pcie__write_bytes.sum
probe secs=2 interval=1000000 decode_ms=100
probe secs=2 interval=100000
probe secs=2 interval=100000 metrics=$SIX
probe secs=2 interval=100000 metrics=$SIX reset=copy order=config hw=64
probe secs=2 interval=100000 metrics=$SIX append=1
# The workload in another process, as with streamscope's sampler.
( "$P" mode=work secs=4 > "$W/work.log" 2>&1 & ) ; sleep 0.5
probe secs=2 interval=100000 metrics=$SIX work=0
probe secs=2 interval=100000 metrics=$SIX work=0 ctx=1
sleep 2; cat "$W/work.log"
# streamscope's sampler while fsdp-ref runs (as pm-trace.sh), its libraries.
d="$W/ours"; mkdir -p "$d"
( sleep 8 ) | env STREAMSCOPE_GPU_METRICS=default STREAMSCOPE_PM_VERBOSE=1 \
  timeout -k 3 30 "$BIN/streamscope-gpu-sampler" --dir "$d" > "$d/stdout" 2> "$d/stderr" &
spid=$!
for _ in $(seq 50); do grep -q ready "$d/stdout" 2>/dev/null && break; sleep 0.2; done
grep -E "cupti|nvperf|libcuda\." /proc/$spid/maps 2>/dev/null | awk '{print "ours maps:", $NF}' | sort -u
timeout 40 "$F" --gpus 1 --mode serial --layers 8 --dim 4096 --batch 4 --seq 1024 --steps 40 --warmup 5 --timeout-s 60 > /dev/null 2>&1
wait "$spid"; echo "ours rc=$?"
head -c 6000 "$d/stderr"
for p in "$d"/.gpu-metrics-feed-*.points; do [ -e "$p" ] && echo "ours points: $(( $(stat -c %s "$p") / 20 ))"; done
# The same probe again last: did a failure above leave the GPU unusable?
probe secs=2 interval=100000
cat "$SUMMARY"
rm -rf "$W"
