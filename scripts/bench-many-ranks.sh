#!/usr/bin/env bash
# Many-ranks benchmark (docs/PERFORMANCE.md, "Many ranks"): writes a
# generated job of RANKS rank files x SLICES slices (synth::fsdp_like_rank,
# collectives matched across ranks, 8 ranks per host), times
# `streamscope report DIR` (text, then JSON) under /usr/bin/time RUNS
# times, then deletes the files.
#
#   RANKS=1024 SLICES=100000 RUNS=3 scripts/bench-many-ranks.sh
#
# 1024 x 100 K slices is about 9.7 GB of Perfetto: DIR (default: a new
# folder under /tmp) needs that much free space.
set -euo pipefail
cd "$(dirname "$0")/.."
RANKS=${RANKS:-1024}
SLICES=${SLICES:-100000}
RUNS=${RUNS:-3}
cargo build --release -p streamscope
cargo build --release -p streamscope-core --features testing --bin synth-ranks
DIR=${DIR:-$(mktemp -d /tmp/ss-many-ranks.XXXXXX)}
trap 'rm -rf "$DIR"' EXIT
df -h "$DIR"
/usr/bin/time -f 'generate: %e s %M KB' target/release/synth-ranks "$DIR" "$RANKS" "$SLICES"
du -sh "$DIR"
nproc
for i in $(seq "$RUNS"); do
    uptime
    /usr/bin/time -f "report (text): %e s %M KB" target/release/streamscope report "$DIR" > /dev/null
done
uptime
/usr/bin/time -f "report (json): %e s %M KB" target/release/streamscope report "$DIR" --format json > /dev/null
