#!/usr/bin/env bash
# NVIDIA's own CUPTI PM sampling sample (extras/CUPTI/samples/pm_sampling of
# the CUDA toolkit), built here with its Makefile and run on GPU 0 and on
# GPU 1: does CUPTI's decode work on this machine at all, outside
# streamscope? Under 2 minutes. From the repo root:
#   OUT=<results> bash scripts/gpu/pm-nvidia-sample.sh
# Result: $OUT/pm-nvidia-sample.log.
set -u
: "${OUT:?set OUT}"
mkdir -p "$OUT"
exec > >(tee -a "$OUT/pm-nvidia-sample.log") 2>&1
CUDA=${CUDA_HOME:-/usr/local/cuda}
[ -d "$CUDA" ] || CUDA=/usr/local/cuda-13.0
W="$(mktemp -d)"
cp -r "$CUDA/extras/CUPTI/samples" "$W/" 2>&1 | tail -2
ls "$W/samples" | head -50
cd "$W/samples/pm_sampling" || exit 1
ls
export PATH="$CUDA/bin:$PATH" LD_LIBRARY_PATH="$CUDA/extras/CUPTI/lib64:$CUDA/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
timeout 120 make CUDA_INSTALL_PATH="$CUDA" 2>&1 | tail -15
exe=$(find . -maxdepth 1 -type f -executable | head -1)
echo "=== built: $exe"
[ -n "$exe" ] || exit 1
timeout 20 "$exe" --help 2>&1 | head -30
for g in 0 1; do
  echo "=== GPU $g: $exe (defaults)"
  CUDA_VISIBLE_DEVICES=$g timeout 60 "$exe" 2>&1 | tail -40
  echo "=== GPU $g: rc=$?"
done
rm -rf "$W"
