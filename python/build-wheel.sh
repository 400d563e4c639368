#!/usr/bin/env bash
# Builds the streamscope wheel into python/dist/ (or OUT_DIR): the CLI, the
# collector library and the GPU sampler (cargo, profile `wheel`: optimized,
# no fat LTO) copied into streamscope/_bin/, then the Python module by
# maturin (`pip install maturin` first). The wheel's manylinux tag is the
# newest glibc any bundled file needs (this machine's glibc bounds it:
# build on an older distribution for a wider tag). docs/PYTHON.md.
#   bash python/build-wheel.sh            # then: pip install python/dist/streamscope-*.whl
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
out=${OUT_DIR:-$here/dist}
target=${CARGO_TARGET_DIR:-$root/target}
export CARGO_TARGET_DIR="$target"

command -v maturin >/dev/null || { echo "build-wheel: maturin not found (pip install maturin)" >&2; exit 1; }

(cd "$root" && cargo build --locked --profile wheel -p streamscope -p streamscope-collector)
bin="$here/streamscope/_bin"
rm -rf "$bin"
mkdir -p "$bin"
for f in streamscope streamscope-gpu-sampler libstreamscope_collector.so; do
  install -m 755 "$target/wheel/$f" "$bin/$f"
done

# The newest GLIBC_2.N symbol version the bundled files need.
glibc=$(for f in "$bin"/*; do objdump -T "$f"; done | grep -o 'GLIBC_2\.[0-9]*' |
  sed 's/GLIBC_2\.//' | sort -n | tail -1)
compat="manylinux_2_${glibc:-17}"
echo "build-wheel: bundled binaries need glibc 2.${glibc:-17}: tagging $compat"

cd "$here"
maturin build --locked --profile wheel --compatibility "$compat" --out "$out"
ls -l "$out"/streamscope-*.whl
