#!/usr/bin/env bash
# CUDA graphs and compiled models on one GPU (docs/METRICS.md, "Steps"):
# examples/graph_step.py run plain (its own GPU-clock step timing) and
# recorded, in graph, eager and compile (reduce-overhead) modes; then an
# armed job whose `capture --steps N` must end by itself. Reports of every
# recording in $OUT/graphs.log; the recordings under $OUT/<name>/.
#   BIN=.carry/bin OUT=$OUT bash scripts/gpu/graphs.sh [record|capture|all]
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
gpu_setup graphs.log
SUMMARY="$OUT/graphs-summary.txt"
: > "$SUMMARY"
what=${1:-all}
G=examples/graph_step.py
STEPS=${STEPS:-60}

if [ "$what" = all ] || [ "$what" = record ]; then
  for mode in graph eager compile; do
    step "plain-$mode" 240 "$PY" "$G" --mode "$mode" --steps "$STEPS" | tee "$OUT/plain-$mode.json"
  done
  for mode in graph eager compile; do
    name=graph-$mode-h200
    [ "$mode" = graph ] && name=graph-step-h200
    [ "$mode" = compile ] && name=graph-compile-h200
    [ "$mode" = eager ] && name=graph-eager-h200
    step "record-$mode" 300 "$S" record -o "$OUT/$name" -- "$PY" "$G" --mode "$mode" --steps "$STEPS" | tee "$OUT/$name.job.json"
    "$S" info "$OUT/$name" | head -30
    "$S" report "$OUT/$name"
    "$S" report "$OUT/$name" --format json > "$OUT/$name.report.json"
  done
fi

if [ "$what" = all ] || [ "$what" = capture ]; then
  # An armed whole-step-graph job without step marks after capture; a
  # capture of 3 steps must end on its own, long before the job does.
  rm -rf "$OUT/armed"
  "$S" record --armed -o "$OUT/armed" -- "$PY" "$G" --mode graph --steps 3000 > "$OUT/armed-job.txt" 2>&1 &
  job=$!
  sleep 25
  step capture-steps 90 "$S" capture "$OUT/armed" --steps 3
  # The capture ends on its own once 3 steps are seen (graph launches).
  sleep 8
  ls -la "$OUT/armed"
  step capture-after 60 "$S" capture "$OUT/armed" --duration 1s
  wait "$job"
  echo "armed job rc=$?"
  tail -5 "$OUT/armed-job.txt"
  for f in "$OUT"/armed/*.capture-*.pftrace; do
    [ -e "$f" ] && "$S" report "$f" | head -20
  done
fi
cat "$SUMMARY"
find "$OUT" -type f -printf '%10s %p\n' | sort -k2
# Only 8 files come back from the device: the recordings go in one tar.
find "$OUT" -name '*.pftrace' -exec gzip -9 -n {} +
(cd "$OUT" && tar cf graphs-traces.tar --exclude='*.sock' graph-*-h200 armed plain-*.json ./*.job.json 2>/dev/null)
ls -la "$OUT/graphs-traces.tar"
# ... and nothing else but the log and the summary stays.
(cd "$OUT" && rm -rf graph-*-h200 armed ./*.json run.log)
