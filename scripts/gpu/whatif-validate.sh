#!/usr/bin/env bash
# Dropped syncs and findings against real runs (1 GPU; under 6 minutes):
# examples/whatif_sync.py in two shapes, each run with its planted sync and
# without it (--no-sync), recorded:
#   host-after-sync  --host-ms 3  the loss read every step, then 3 ms of host work
#   gpu-bound        --host-ms 0  the loss read every step, nothing after it
# and examples/legacy_stream.cu (built with nvcc): "with" is its blocking
# streams and the tiny legacy-stream kernel between them, "without" the
# same program with non-blocking streams; the prediction is
# `whatif --legacy-stream-nonblocking`, the finding `legacy_stream`.
# On each with-sync recording: `streamscope whatif --drop-syncs
# whatif_sync.py:LINE` (predicted step: the mean over the headline window,
# and the median) and `report --format json` (the finding at that line:
# its predicted gain). Measured: each job's own CUDA-event step time (its
# JSON line), with and without the sync. One parseable line per shape:
#   RESULT shape=NAME with_ms=X without_ms=Y predicted_mean_ms=P
#     predicted_median_ms=Q error_pct=E finding_gain_ms=G measured_gain_ms=M
#     gain_error_pct_of_step=D
# (error_pct: 100 (P - Y) / Y; gain_error_pct_of_step: 100 (G - M) / X,
# the validation table's target: within 5 % of step time).
# Builds nothing (scripts/build-carry.sh first). From the repo root:
#
#   BIN=.carry/bin OUT=<results> bash scripts/gpu/whatif-validate.sh
#
# Results: $OUT/whatif-validate.log (everything, the RESULT lines last),
# $OUT/whatif-validate.json (the RESULT lines as JSON), and the with-sync
# recordings in $OUT/whatif-validate-traces.tar.gz. Each step has a time
# limit, the script a budget (VALIDATE_BUDGET_S, default 330 s); STEPS
# (default 40) steps per run.
# SMI_MS=N samples the GPU's clocks and power with nvidia-smi every N ms
# during each recorded job ($OUT/NAME.smi.csv and an "SMI" line each);
# KEEP_NOSYNC=1 keeps the recordings without the sync too.
set -u

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
gpu_setup whatif-validate.log
BUDGET_END=$((SECONDS + ${VALIDATE_BUDGET_S:-330}))
export STREAMSCOPE_COLLECTOR="$BIN/libstreamscope_collector.so"
W="$(mktemp -d)"
SUMMARY="$W/summary.txt"
: > "$SUMMARY"
X=examples/whatif_sync.py
STEPS=${STEPS:-40}
LINE=$(grep -n '# SYNC: item$' "$X" | cut -d: -f1)

echo "=== machine $(date -u +%FT%TZ)"
nvidia-smi -L
echo "=== planted sync: $X:$LINE"

# smi_start NAME / smi_stop NAME: with SMI_MS set, nvidia-smi samples the
# GPU's SM and memory clocks, power, temperature and clock-event reasons
# every SMI_MS ms while NAME runs, into $OUT/NAME.smi.csv, and a line
# "SMI name=NAME ..." gives the median SM clock and power over the samples
# where the GPU drew more than halfway between its least and most power
# (the busy part; most samples are idle: start-up, the job's warm-up).
SMI_PID=""
smi_start() {
  [ -n "${SMI_MS:-}" ] && command -v nvidia-smi >/dev/null || return 0
  nvidia-smi -i 0 --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
    --format=csv,noheader,nounits -lms "$SMI_MS" > "$OUT/$1.smi.csv" 2>/dev/null &
  SMI_PID=$!
  sleep 0.5
}
smi_stop() {
  [ -n "$SMI_PID" ] || return 0
  kill "$SMI_PID" 2>/dev/null; wait "$SMI_PID" 2>/dev/null; SMI_PID=""
  "$PY" - "$OUT/$1.smi.csv" "$1" <<'PY'
import statistics, sys
rows = []
for l in open(sys.argv[1]):
    f = [x.strip() for x in l.split(",")]
    try:
        rows.append((float(f[1]), float(f[3]), float(f[4]), f[5]))
    except (ValueError, IndexError):
        pass
if rows:
    lo, hi = min(r[1] for r in rows), max(r[1] for r in rows)
    busy = [r for r in rows if r[1] > (lo + hi) / 2] or rows
    print(f"SMI name={sys.argv[2]} samples={len(rows)} busy={len(busy)} sm_mhz_median={statistics.median(r[0] for r in busy):.0f} "
          f"sm_mhz_min={min(r[0] for r in busy):.0f} power_w_median={statistics.median(r[1] for r in busy):.0f} "
          f"temp_c_max={max(r[2] for r in busy):.0f} reasons={sorted(set(r[3] for r in busy))}")
PY
}

# job NAME ARGS...: the example recorded into $W/NAME; its JSON line in $W/NAME.job.json.
job() {
  local name="$1"; shift
  smi_start "$name"
  step "$name" 120 "$S" record -o "$W/$name" -- "$PY" "$X" --steps "$STEPS" "$@" > "$W/$name.out" 2>&1
  smi_stop "$name"
  grep '^{' "$W/$name.out" | tail -1 > "$W/$name.job.json"
  cat "$W/$name.job.json"
}

for shape in host-after-sync:3 gpu-bound:0; do
  name=${shape%%:*}; ms=${shape##*:}
  job "$name-sync" --host-ms "$ms"
  job "$name-nosync" --host-ms "$ms" --no-sync
  # The plain (unrecorded) no-sync job: the collector's own cost on the truth.
  step "$name-nosync-plain" 120 "$PY" "$X" --steps "$STEPS" --host-ms "$ms" --no-sync | grep '^{' | tail -1 \
    > "$W/$name-nosync-plain.job.json"
  cat "$W/$name-nosync-plain.job.json"
  "$S" whatif "$W/$name-sync" --drop-syncs "whatif_sync.py:$LINE" --format json \
    > "$W/$name.whatif.json" 2> "$W/$name.whatif.err" || cat "$W/$name.whatif.err"
  "$S" whatif "$W/$name-sync" --drop-syncs "whatif_sync.py:$LINE"
  "$S" report "$W/$name-sync" --full
  "$S" report "$W/$name-sync" --format json > "$W/$name.report.json" 2>/dev/null
done

# The legacy default stream (examples/legacy_stream.cu, built here): the
# blocking program recorded (its report's legacy_stream finding, and
# `whatif --legacy-stream-nonblocking`), against the same program run with
# non-blocking streams, and the blocking one unrecorded.
CUDA=/usr/local/cuda
[ -d "$CUDA" ] || CUDA=/usr/local/cuda-13.0
if step legacy-build 120 "$CUDA/bin/nvcc" -O2 -g -std=c++17 -arch=sm_90 -o "$W/legacy_stream" examples/legacy_stream.cu; then
  step legacy-stream-sync 60 "$S" record -o "$W/legacy-stream-sync" -- "$W/legacy_stream" --steps "$STEPS" \
    > "$W/legacy-stream-sync.out" 2>&1
  grep '^{' "$W/legacy-stream-sync.out" | tail -1 > "$W/legacy-stream-sync.job.json"
  for mode in blocking nonblocking; do
    flag=""; [ "$mode" = nonblocking ] && flag=--nonblocking
    step "legacy-$mode-plain" 60 "$W/legacy_stream" $flag --steps "$STEPS" | grep '^{' | tail -1 \
      > "$W/legacy-$mode-plain.job.json"
    cat "$W/legacy-$mode-plain.job.json"
  done
  cp "$W/legacy-nonblocking-plain.job.json" "$W/legacy-stream-nosync.job.json"
  cp "$W/legacy-nonblocking-plain.job.json" "$W/legacy-stream-nosync-plain.job.json"
  "$S" whatif "$W/legacy-stream-sync" --legacy-stream-nonblocking --format json \
    > "$W/legacy-stream.whatif.json" 2> "$W/legacy-stream.whatif.err" || cat "$W/legacy-stream.whatif.err"
  "$S" report "$W/legacy-stream-sync" --full
  "$S" report "$W/legacy-stream-sync" --format json > "$W/legacy-stream.report.json" 2>/dev/null
  "$S" info "$W/legacy-stream-sync" | grep -i cuda_streams
  # The native caller of its cudaDeviceSynchronize (built with -g): the
  # sync rows should name examples/legacy_stream.cu:LINE (main).
  echo "=== native caller of the sync (want legacy_stream.cu:$(grep -n 'CHECK(cudaDeviceSynchronize());' examples/legacy_stream.cu | cut -d: -f1))"
  grep -o '"where": "[^"]*"' "$W/legacy-stream.report.json" | sort | uniq -c | head -5
fi

echo
echo "=== results"
"$PY" - "$W" "$LINE" <<'PY' | tee "$W/results.txt"
import json, os, sys
w, line = sys.argv[1], sys.argv[2]
def load(p):
    try:
        with open(os.path.join(w, p)) as f:
            return json.load(f)
    except Exception as e:
        print(f"# {p}: {e}", file=sys.stderr)
        return None
rows = []
for shape in ("host-after-sync", "gpu-bound", "legacy-stream"):
    a, b = load(f"{shape}-sync.job.json"), load(f"{shape}-nosync.job.json")
    plain = load(f"{shape}-nosync-plain.job.json")
    wi, rep = load(f"{shape}.whatif.json"), load(f"{shape}.report.json")
    r = {"shape": shape}
    if a: r["with_ms"] = a["median_step_ms"]
    if b: r["without_ms"] = b["median_step_ms"]
    if plain: r["without_plain_ms"] = plain["median_step_ms"]
    if wi and wi.get("ranks"):
        k = wi["ranks"][0]
        r["predicted_mean_ms"] = (k.get("predicted_mean_step_us") or 0) / 1000
        r["predicted_median_ms"] = (k.get("predicted_median_step_us") or 0) / 1000
        r["measured_mean_recorded_ms"] = (k.get("measured_mean_step_us") or 0) / 1000
    if rep:
        if shape == "legacy-stream":
            f = [x for x in rep.get("findings", []) if x["kind"] == "legacy_stream"]
        else:
            f = [x for x in rep.get("findings", []) if x["kind"] == "sync"
                 and x["where"]["line"].split(" (")[0].endswith(f"whatif_sync.py:{line}")]
        if f and f[0].get("predicted_gain_us") is not None:
            r["finding_gain_ms"] = f[0]["predicted_gain_us"] / 1000
            r["finding_rank"] = rep["findings"].index(f[0]) + 1
    if "predicted_mean_ms" in r and "without_ms" in r:
        r["error_pct"] = 100 * (r["predicted_mean_ms"] - r["without_ms"]) / r["without_ms"]
    if "with_ms" in r and "without_ms" in r:
        r["measured_gain_ms"] = r["with_ms"] - r["without_ms"]
        if "finding_gain_ms" in r:
            r["gain_error_pct_of_step"] = 100 * (r["finding_gain_ms"] - r["measured_gain_ms"]) / r["with_ms"]
    rows.append(r)
    print("RESULT " + " ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items()))
with open(os.path.join(w, "results.json"), "w") as f:
    json.dump(rows, f, indent=1)
PY
cp "$W/results.json" "$OUT/whatif-validate.json" 2>/dev/null
tar czf "$OUT/whatif-validate-traces.tar.gz" -C "$W" host-after-sync-sync gpu-bound-sync legacy-stream-sync \
  $([ -n "${KEEP_NOSYNC:-}" ] && echo host-after-sync-nosync gpu-bound-nosync) 2>/dev/null
echo
cat "$SUMMARY"
grep '^RESULT' "$W/results.txt"
