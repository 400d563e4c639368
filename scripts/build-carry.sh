#!/usr/bin/env bash
# Builds, here (no CUDA needed), everything the GPU machine runs, into
# .carry/bin (ignored by git; named in the device run's `carry`):
#   streamscope, libstreamscope_collector.so, streamscope-gpu-sampler, fsdp-ref,
#   kernels-gpu-tests and collector-gpu-tests (the #[ignore] GPU tests).
set -euo pipefail
cd "$(dirname "$0")/.."
out=.carry/bin
mkdir -p "$out"
cargo build --release -p streamscope -p streamscope-collector -p streamscope-kernels
cp target/release/streamscope target/release/fsdp-ref target/release/libstreamscope_collector.so \
  target/release/streamscope-gpu-sampler "$out/"
# Test executables of the GPU-only tests (built, not run, here).
exe_of() { # package, test target name
  cargo test --release -p "$1" --test "$2" --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m.get("executable") and m["target"]["name"]==sys.argv[1]:
        print(m["executable"])' "$2" | tail -1
}
for spec in "streamscope-kernels gpu kernels-gpu-tests" "streamscope-collector gpu collector-gpu-tests"; do
  set -- $spec
  if exe=$(exe_of "$1" "$2") && [ -n "$exe" ]; then cp "$exe" "$out/$3"; else echo "note: no $2 test target in $1"; fi
done
strip "$out"/* 2>/dev/null || true
# The device run sends the whole working tree (64 MiB at most): carry the
# compressed copy (`carry: [".carry/bin.tar.xz"]`) and unpack it there first:
#   tar xJf .carry/bin.tar.xz -C .carry && BIN=.carry/bin ...
tar cJf .carry/bin.tar.xz -C .carry bin
ls -la "$out" .carry/bin.tar.xz
du -sh "$out"
