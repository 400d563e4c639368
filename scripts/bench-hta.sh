#!/usr/bin/env bash
# Times Holistic Trace Analysis (HTA) against `streamscope report` on the
# same Kineto trace(s): HTA's load + comm/comp overlap + temporal breakdown
# versus streamscope's load + full analysis (JSON). Not run in CI.
#
# usage: scripts/bench-hta.sh TRACE.json[.gz]...   (one file per rank)
# env:   HTA_VENV (default .venv-hta; created with pip install HolisticTraceAnalysis)
#        RUNS (default 3): best of RUNS is reported
#        STREAMSCOPE_BIN: time this binary instead of building target/release/streamscope
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: $0 TRACE.json[.gz]..." >&2; exit 2; }
VENV=${HTA_VENV:-.venv-hta}
RUNS=${RUNS:-3}
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q HolisticTraceAnalysis
fi
if [ -n "${STREAMSCOPE_BIN:-}" ]; then
  BIN=$STREAMSCOPE_BIN
else
  cargo build -q --release -p streamscope
  BIN=target/release/streamscope
fi

# HTA wants a directory of rank files.
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
i=0
for f in "$@"; do
  case "$f" in *.gz) ext=json.gz ;; *) ext=json ;; esac
  cp "$f" "$DIR/rank-$i.$ext"
  i=$((i + 1))
done

best() { sort -n | head -1; }

hta_s=$(for _ in $(seq "$RUNS"); do
  "$VENV/bin/python" - "$DIR" <<'PY' 2>/dev/null
import sys, time, logging
logging.disable(logging.WARNING)
t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
ta = TraceAnalysis(trace_dir=sys.argv[1])
ta.get_comm_comp_overlap(visualize=False)
ta.get_temporal_breakdown(visualize=False)
print(f"{time.perf_counter() - t0:.3f}")
PY
done | best)

ss_s=$(for _ in $(seq "$RUNS"); do
  s=$(date +%s.%N); "$BIN" report "$@" --format json >/dev/null; e=$(date +%s.%N)
  echo "$e - $s" | bc -l | xargs printf '%.3f\n'
done | best)

echo "traces: $*"
echo "HTA (import + TraceAnalysis + overlap + temporal breakdown): ${hta_s} s"
echo "streamscope report --format json (load + all analyses):       ${ss_s} s"
