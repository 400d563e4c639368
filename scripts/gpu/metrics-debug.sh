tar xJf .carry/bin.tar.xz -C .carry
export STREAMSCOPE_EXPERIMENTAL_GPU_METRICS=1
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib:$LD_LIBRARY_PATH STREAMSCOPE_CUPTI_LIB=/usr/local/cuda-13.0/targets/x86_64-linux/lib/libcupti.so.13 NCCL_NVLS_ENABLE=0
. scripts/gpu/lib.sh; nccl_shim /tmp/shim
S=.carry/bin/streamscope; F=.carry/bin/fsdp-ref
for spec in sm_active dram default; do echo "=== $spec"; timeout 60 $S record -o /tmp/p-$spec --gpu-metrics=$spec -- $F --gpus 1 --mode serial --layers 8 --dim 4096 --batch 4 --seq 1024 --steps 50 --warmup 5 --json --timeout-s 50 2>&1 | grep -v "^{" | tail -45; echo "rc=${PIPESTATUS[0]}"; $S info /tmp/p-$spec 2>&1 | grep -i "counter\|gpu_metrics" | head -20; done
