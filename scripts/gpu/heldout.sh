#!/usr/bin/env bash
# Workloads no test or example was built around (scripts/gpu/heldout/), each
# run plain and recorded on 1 GPU: the report's headline step time against
# the job's own CUDA-event median step (its JSON line), where its syncs
# are said to be, and anything refused or noted. Under 8 minutes:
#   ddp_cnn          DDP (1 process, NCCL), conv net, bf16, AdamW, no annotations
#   decode_tokens    token-by-token decoding, a host sync per token, no optimizer
#   compile_default  torch.compile default mode (Triton, no CUDA graphs), AdamW
#   cublas_loop      native C++ with cuBLAS, pageable synchronous copies
#   gan_two_optim    two optimizers stepped every iteration (a GAN), no annotations
#   gan_capture      the same, armed: `capture --steps 4` ends after 4 iterations
#   memory           the PyTorch ones with `record --memory on`: the report's
#                    peaks against torch.cuda.max_memory_allocated/reserved
# Builds only the native one (scripts/build-carry.sh first). From the repo root:
#   BIN=.carry/bin OUT=<results> [ONLY="ddp_cnn cublas_loop"] bash scripts/gpu/heldout.sh
# Results: $OUT/heldout.log ("HELDOUT key=value" lines last) and the
# recordings in $OUT/heldout-traces.tar.gz.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
gpu_setup heldout.log
BUDGET_END=$((SECONDS + ${HELDOUT_BUDGET_S:-450}))
export STREAMSCOPE_COLLECTOR="$BIN/libstreamscope_collector.so"
nccl_shim "$(mktemp -d)"
W="$(mktemp -d)"
SUMMARY="$W/summary.txt"
: > "$SUMMARY"
H=scripts/gpu/heldout
echo "=== machine $(date -u +%FT%TZ)"
nvidia-smi -L
CUDA=/usr/local/cuda; [ -d "$CUDA" ] || CUDA=/usr/local/cuda-13.0
mkdir -p "$W/bin"
step cublas-build 120 "$CUDA/bin/nvcc" -O2 -g -std=c++17 -arch=sm_90 -o "$W/bin/cublas_loop" "$H/cublas_loop.cu" -lcublas

# one NAME CMD...: plain, then recorded, then reported.
one() {
  local name="$1"; shift
  step "$name-plain" 180 "$@" > "$W/$name.plain.out" 2>&1
  tail -3 "$W/$name.plain.out"
  step "$name-record" 180 "$S" record -o "$W/$name" -- "$@" > "$W/$name.rec.out" 2>&1
  tail -3 "$W/$name.rec.out"
  "$S" report "$W/$name" 2>&1 | tee "$W/$name.report.txt"
  "$S" report "$W/$name" --format json > "$W/$name.report.json" 2> "$W/$name.report.err"
  "$S" info "$W/$name" > "$W/$name.info.txt" 2>&1
  "$PY" - "$name" "$W" <<'PY'
import json, os, sys
name, w = sys.argv[1], sys.argv[2]
def job(p):
    try:
        return json.loads([l for l in open(p) if l.startswith("{")][-1])
    except Exception:
        return {}
plain, rec = job(f"{w}/{name}.plain.out"), job(f"{w}/{name}.rec.out")
try:
    r = json.load(open(f"{w}/{name}.report.json"))
except Exception as e:
    print(f"HELDOUT name={name} report_error={e!r} {open(f'{w}/{name}.report.err').read()[:300]!r}")
    sys.exit()
k = r["ranks"][0] if r.get("ranks") else {}
h = (r.get("headline") or {}).get("ranks", [{}])[0]
med = h.get("median_step_ms")
job_ms = rec.get("median_step_ms")
err = None if not med or not job_ms else 100 * (med - job_ms) / job_ms
syncs = [(s.get("where") or s.get("python") or s.get("api"), s.get("count")) for s in (k.get("syncs") or [])][:4]
fnd = [(f["kind"], f["where"].get("line") or f["where"].get("kernel"), f.get("predicted_gain_us")) for f in r.get("findings", [])][:4]
print(f"HELDOUT name={name} job_ms={job_ms} plain_ms={plain.get('median_step_ms')} report_ms={med} err_pct={err} "
      f"steps={h.get('steps')} source={k.get('step_source')} syncs={syncs} findings={fnd} "
      f"diagnostics={[d.get('kind') for d in r.get('diagnostics', [])]}")
PY
}

want() { [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $1 "* ]]; }
want ddp_cnn && one ddp_cnn "$PY" "$H/ddp_cnn.py" --steps 60
want decode_tokens && one decode_tokens "$PY" "$H/decode_tokens.py" --tokens 80
want compile_default && one compile_default "$PY" "$H/compile_default.py" --steps 50
want gan_two_optim && one gan_two_optim "$PY" "$H/gan_two_optim.py" --steps 60
want cublas_loop && [ -x "$W/bin/cublas_loop" ] && one cublas_loop "$W/bin/cublas_loop" 60

# memory: the PyTorch workloads recorded with `--memory on`; each rank's
# peak allocated and reserved bytes in the report against the job's own
# torch.cuda.max_memory_allocated() / max_memory_reserved() (issue 36).
mem() {
  local name="$1"; shift
  step "mem-$name" 180 "$S" record --memory on -o "$W/mem-$name" -- "$@" > "$W/mem-$name.rec.out" 2>&1
  tail -2 "$W/mem-$name.rec.out"
  "$S" report "$W/mem-$name" --format json > "$W/mem-$name.report.json" 2> "$W/mem-$name.report.err"
  "$PY" - "$name" "$W" <<'PY'
import json, sys
name, w = sys.argv[1], sys.argv[2]
try:
    job = json.loads([l for l in open(f"{w}/mem-{name}.rec.out") if l.startswith("{")][-1])
    r = json.load(open(f"{w}/mem-{name}.report.json"))
except Exception as e:
    print(f"HELDOUT name=mem_{name} error={e!r}"); sys.exit()
m = ((r.get("ranks") or [{}])[0]).get("memory") or {}
def pct(a, b):
    return None if not a or not b else round(100 * (a - b) / b, 3)
ja, jr = job.get("max_allocated_bytes"), job.get("max_reserved_bytes")
ra, rr = m.get("peak_allocated_bytes"), m.get("peak_reserved_bytes")
steps_with = sum(1 for s in r.get("steps", []) if s.get("memory"))
print(f"HELDOUT name=mem_{name} job_alloc={ja} report_alloc={ra} alloc_err_pct={pct(ra, ja)} "
      f"job_reserved={jr} report_reserved={rr} reserved_err_pct={pct(rr, jr)} "
      f"peak_step={m.get('peak_step')} live_blocks={len(m.get('live_at_peak') or [])} "
      f"source={m.get('source')} steps_with_memory={steps_with} job_ms={job.get('median_step_ms')}")
PY
}
if want memory; then
  mem ddp_cnn "$PY" "$H/ddp_cnn.py" --steps 60
  mem decode_tokens "$PY" "$H/decode_tokens.py" --tokens 80
  mem compile_default "$PY" "$H/compile_default.py" --steps 50
  mem gan_two_optim "$PY" "$H/gan_two_optim.py" --steps 60
fi

# gan_capture: the GAN loop armed; `capture --steps 4` must end by itself
# after 4 iterations (not 2: each iteration steps two optimizers), and the
# report of the capture must count them as iterations.
if want gan_capture; then
  A="$W/gan-armed"
  # Long enough to outlast the capture on any card (it is stopped below).
  "$S" record --armed -o "$A" -- "$PY" "$H/gan_two_optim.py" --steps 100000 > "$W/gan-armed.job.out" 2>&1 &
  job=$!
  sleep 15
  # --wait: back once the capture (4 iterations) is written.
  step gan-capture-steps 90 "$S" capture "$A" --steps 4 --wait
  f=$(ls "$A"/*.capture-*.pftrace 2>/dev/null | head -1)
  # The file is whole while the job still runs.
  [ -n "$f" ] && "$S" report "$f" --format json 2>/dev/null | "$PY" -c '
import json, sys
n = len(json.load(sys.stdin).get("steps", []))
print(f"HELDOUT name=gan_capture_wait steps_listed_while_running={n}")'
  # Then the job is stopped (SIGTERM: the collector flushes; SIGKILL to it
  # and its children 30 s later if it has not ended).
  kill -TERM "$job" 2>/dev/null
  for _ in $(seq 30); do kill -0 "$job" 2>/dev/null || break; sleep 1; done
  kill -0 "$job" 2>/dev/null && { pkill -KILL -P "$job"; kill -KILL "$job"; }
  wait "$job" 2>/dev/null
  f=$(ls "$A"/*.capture-*.pftrace 2>/dev/null | head -1)
  if [ -n "$f" ]; then
    "$S" report "$f" | head -12
    "$S" report "$f" --format json > "$W/gan-capture.report.json" 2> "$W/gan-capture.report.err"
    "$PY" - "$W/gan-capture.report.json" "$W/gan-armed.job.out" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
if not r.get("ranks"):
    print("HELDOUT name=gan_capture ranks=0"); sys.exit(0)
k = r["ranks"][0]
h = (r.get("headline") or {}).get("ranks", [{}])[0]
w = k.get("window") or {}
span = [(s["start_ns"], s["end_ns"]) for s in r.get("steps", [])]
print(f"HELDOUT name=gan_capture steps={h.get('steps')} steps_listed={len(span)} "
      f"source={k.get('step_source')} report_ms={h.get('median_step_ms')} "
      f"window_ms={(w.get('end_ns', 0) - w.get('start_ns', 0)) / 1e6} "
      f"steps_ms={[round((b - a) / 1e6, 2) for a, b in span]}")
PY
  else
    echo "HELDOUT name=gan_capture no_capture_file"; ls -la "$A"; tail -5 "$W/gan-armed.job.out"
  fi
fi

tar czf "$OUT/heldout-traces.tar.gz" -C "$W" $(cd "$W" && ls -d */ 2>/dev/null | grep -v "^bin/$") 2>/dev/null
cp "$W"/*.report.json "$W"/*.info.txt "$OUT/" 2>/dev/null
echo
cat "$SUMMARY"
grep -h '^HELDOUT' "$OUT/heldout.log"
