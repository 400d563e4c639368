#!/usr/bin/env bash
# What the collector must prove on a real GPU (2 GPUs; under 9 minutes):
#   1. the Python frame reader on this machine's python3 (GIL released),
#   2. examples/sync_zoo.py recorded (1 GPU): every planted sync by its line,
#      the pinned copy not flagged, optimizer-step ranges, the report,
#   3. the torch FSDP2 example under torchrun (2 GPUs), once with NVTX step
#      ranges, once with no NVTX and no profiler,
#   4. fsdp-ref --prefetch 0 / 1 / 2, two processes (one per GPU),
#   5. crash loss: SIGKILL and a real segfault of a recorded process after
#      N s: last kernel end in the trace vs the moment of the kill,
#   6. one clock for --delay/--duration: two processes started 3 s apart
#      must capture the same wall-clock interval,
#   7. torch.profiler inside the recorded job: said once, at that moment,
#   8. the hooks' overhead: sync_zoo plain / recorded without hooks /
#      recorded with hooks, and FSDP2 plain / recorded, alternating,
#   11. (part nccl, not by default) the NCCL profiler plugin: fsdp-ref on
#      2 GPUs, NCCL operations per rank and the first few.
#   12. (part capture, not by default) on-demand captures: torch FSDP2 on
#      2 GPUs under `record --armed`, a capture of 3 steps and one of
#      400 ms, their windows across ranks, their reports against a full
#      recording of the same job, and armed vs plain step time (rounds).
#   11b. (part nccl-cost, not by default) the NCCL plugin's cost: fsdp-ref
#      recorded with and without the plugin, alternating.
# Builds nothing (scripts/build-carry.sh, here, first). From the repo root:
#
#   BIN=.carry/bin OUT=<results> [TRUTH_PARTS="main overhead serial nccl capture gputests"] [TRUTH_ROUNDS=2] bash scripts/gpu/truth.sh
#
# Results (8 files at most come back from the lent machine):
#   $OUT/truth.log    everything, one file
#   $OUT/truth.json   the measured numbers (overhead, crash loss, windows, checks)
#   $OUT/sync-zoo-h200.tar.gz, torch-fsdp2-nvtx-h200x2.tar.gz,
#   $OUT/torch-fsdp2-plain-h200x2.tar.gz, fsdp-ref-prefetch-h200x2.tar.gz:
#     trace folders, to unpack into traces/ (`tar xzf F -C traces/`, then
#     `gzip -9 -n traces/NAME/*.pftrace`: traces/ ships them compressed).
# Each step has a time limit, the whole script a budget (TRUTH_BUDGET_S,
# default 510 s: later steps are skipped, and say so, when it runs out);
# one failing step never stops the script.
set -u

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
gpu_setup truth.log
BUDGET_END=$((SECONDS + ${TRUTH_BUDGET_S:-510}))
W="$(mktemp -d)"
J="$W/json"   # one JSON object per line, joined into truth.json at the end
: > "$J"
note() { echo "$1" >> "$J"; }
# part NAME: whether TRUTH_PARTS (default "main overhead") names it; "all" is every part.
part() { case " ${TRUTH_PARTS:-main overhead} " in *" all "*|*" $1 "*) return 0;; esac; return 1; }

nccl_shim "$W/shim"

SUMMARY="$W/summary.txt"
: > "$SUMMARY"
# pack NAME: $W/NAME (trace folder) -> $OUT/NAME.tar.gz, without the launcher's pid-*.pftrace.
pack() {
  find "$W/$1" -name 'pid-*.pftrace' -print -delete 2>/dev/null
  ls -la "$W/$1" 2>&1
  tar czf "$OUT/$1.tar.gz" -C "$W" "$1" && ls -la "$OUT/$1.tar.gz"
}
chrome() { # DIR -> DIR.trace.json (Trace Event JSON: absolute CLOCK_MONOTONIC µs)
  "$S" export "$1" --to chrome-json -o "$1.trace.json" 2>&1 >/dev/null | tail -1 | sed "s|^|export of $1: |"
}

echo "=== machine $(date -u +%FT%TZ)"
nvidia-smi -L
ls -la "$BIN"
"$PY" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'
"$S" --version

# zoo_lines DIR KEY: which planted lines of sync_zoo.py the trace in DIR
# gives a Python line to (its API slices' `python` arg), into truth.json.
zoo_lines() {
  chrome "$1"
  "$PY" - "$1.trace.json" examples/sync_zoo.py "$2" <<'PY' | tee -a "$J"
import collections, json, re, sys
try:
    ev = json.load(open(sys.argv[1])); ev = ev["traceEvents"] if isinstance(ev, dict) else ev
except Exception as e:
    print(json.dumps({sys.argv[3]: {"error": str(e)}})); sys.exit()
want = {}
for i, l in enumerate(open(sys.argv[2]), 1):
    m = re.search(r"  # (SYNC|NOT-A-SYNC): (\S+)$", l)
    if m: want[i] = (m.group(1), m.group(2))
lines = collections.Counter(); opt = 0
for e in ev:
    a = e.get("args") or {}
    p = a.get("python")
    if p and "sync_zoo.py:" in p:
        lines[(e["name"], int(p.split("sync_zoo.py:")[1].split()[0]))] += 1
    if e.get("name") == "streamscope:optimizer.step": opt += 1
per_line = collections.defaultdict(list)
for (api, ln), n in lines.items(): per_line[ln].append(f"{api}x{n}")
missing = [f"{ln} {k}" for ln, (s, k) in want.items() if s == "SYNC" and ln not in per_line]
for ln in sorted(per_line): print(f"  line {ln:4} {want.get(ln, ('?', 'unplanted'))[1]:20} {' '.join(per_line[ln])}", file=sys.stderr)
print(json.dumps({sys.argv[3]: {"lines_with_python_arg": len(per_line), "planted_without_line": missing,
      "optimizer_step_ranges": opt}}))
PY
}

if part main || part zoo; then
# 1. The frame reader, on this python: a C-ABI function of the collector
#    called through ctypes.CDLL (GIL released) must return the caller's line.
cat > "$W/frames.py" <<'PY'
import ctypes, json, sys, threading
lib = ctypes.CDLL(sys.argv[1])  # CDLL: the GIL is released during the call
f = lib.streamscope_debug_python_location
f.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
f.restype = ctypes.c_size_t
def probe():
    buf = ctypes.create_string_buffer(512)
    n = f(buf, 512)  # LINE-A
    return buf.value.decode()
def nested():
    return probe()
res = {"python": sys.version.split()[0]}
got = nested()
res["main_thread"] = got
res["ok"] = got.endswith(f"frames.py:{[i for i, l in enumerate(open(__file__), 1) if 'LINE-A' in l and 'res' not in l][0]} (probe)")
out = {}
t = threading.Thread(target=lambda: out.setdefault("v", nested())); t.start(); t.join()
res["other_thread"] = out.get("v")
res["ok"] = res["ok"] and out.get("v") == got
print(json.dumps({"frame_reader": res}))
PY
step frame-reader 60 "$PY" "$W/frames.py" "$LIB" | tee "$W/frames.out"
grep '^{' "$W/frames.out" >> "$J"

# 2. sync_zoo recorded (the trace for traces/sync-zoo-h200/).
step sync-zoo 120 env RANK=0 "$S" record -o "$W/sync-zoo-h200" -- "$PY" examples/sync_zoo.py --steps 12 2>&1 | tee "$W/zoo.out"
step sync-zoo-report 60 "$S" report "$W/sync-zoo-h200"
zoo_lines "$W/sync-zoo-h200" sync_zoo_trace
pack sync-zoo-h200
fi # main or zoo

if part main; then
# 3. torch FSDP2 under torchrun, 2 GPUs: with NVTX step ranges, then without NVTX/profiler.
step fsdp2-nvtx 150 "$S" record -o "$W/torch-fsdp2-nvtx-h200x2" -- torchrun --nproc_per_node 2 examples/torch_fsdp2.py --steps 10
step fsdp2-nvtx-report 60 "$S" report "$W/torch-fsdp2-nvtx-h200x2"
pack torch-fsdp2-nvtx-h200x2
step fsdp2-plain 150 "$S" record -o "$W/torch-fsdp2-plain-h200x2" -- torchrun --nproc_per_node 2 examples/torch_fsdp2.py --steps 10 --no-nvtx
step fsdp2-plain-report 60 "$S" report "$W/torch-fsdp2-plain-h200x2"
pack torch-fsdp2-plain-h200x2

# 4. fsdp-ref prefetch 0/1/2, two processes (RANK 0/1; rank 0 hands out the NCCL id).
CFG="--mode overlap --layers 8 --dim 4096 --batch 4 --seq 1024 --steps 10 --warmup 3 --item-sync --timeout-s 100"
mkdir -p "$W/fsdp-ref-prefetch-h200x2"
for pf in 0 1 2; do
  d="$W/fsdp-ref-prefetch-h200x2/prefetch-$pf"
  step "fsdp-ref-prefetch-$pf" 90 "$S" record -o "$d" -- bash -c "
    for r in 0 1; do RANK=\$r WORLD_SIZE=2 LOCAL_RANK=\$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$((29740 + pf)) \
      '$F' $CFG --prefetch $pf > '$W/pf$pf-rank'\$r.txt 2>&1 & done; wait"
  cat "$W/pf$pf-rank0.txt" 2>/dev/null | tail -5
  step "fsdp-ref-prefetch-$pf-report" 40 "$S" report "$d" | head -40
done
pack fsdp-ref-prefetch-h200x2

# 5. Crash loss: the last kernel in the trace vs the moment of the kill.
last_kernel() { # DIR -> last kernel end, CLOCK_MONOTONIC ns
  chrome "$1"
  "$PY" -c 'import json,sys
ev=json.load(open(sys.argv[1])); ev=ev["traceEvents"] if isinstance(ev,dict) else ev
e=[float(x["ts"])+float(x.get("dur",0)) for x in ev if x.get("ph")=="X" and x.get("cat")=="kernel"]
print(int(max(e)*1000) if e else 0)' "$1.trace.json" 2>/dev/null || echo 0
}
crash_json() { # KIND DIR T_NS
  local last; last=$(last_kernel "$2")
  ls -la "$2" 2>&1
  "$PY" -c 'import json,sys
k,last,t=sys.argv[1],int(sys.argv[2]),int(sys.argv[3])
print(json.dumps({"crash_"+k:{"kill_ns":t,"last_kernel_end_ns":last,"lost_ms":(t-last)/1e6 if last and t else None,"target_ms":250}}))' "$1" "$last" "$3" | tee -a "$J"
}
if step crash-sigkill-start 5 true; then
  RANK=0 "$S" record -o "$W/crash-kill" -- "$PY" examples/sync_zoo.py --steps 0 --seconds 40 > "$W/kill.out" 2>&1 &
  rec=$!
  sleep 16   # torch import + CUDA start + several seconds of steps
  child=$(pgrep -P "$rec" | head -1)   # the recorded python (a child of streamscope)
  t_kill=$("$PY" -c 'import os,sys,time; t=time.clock_gettime_ns(time.CLOCK_MONOTONIC); os.kill(int(sys.argv[1]),9); print(t)' "${child:-0}" 2>/dev/null || echo 0)
  wait "$rec"; echo "record rc=$? (child $child killed at $t_kill)"; tail -20 "$W/kill.out"
  crash_json sigkill "$W/crash-kill" "$t_kill"
fi
step crash-sigsegv 90 env RANK=0 "$S" record -o "$W/crash-segv" -- "$PY" examples/sync_zoo.py --steps 0 --seconds 30 --crash-after 8 2>&1 | tee "$W/segv.out" | tail -20
t_segv=$(grep -o 'segfault at CLOCK_MONOTONIC [0-9]*' "$W/segv.out" | awk '{print $4}')
crash_json sigsegv "$W/crash-segv" "${t_segv:-0}"
# A segfault 1 s after CUDA starts must not leave an empty trace.
step crash-early-segv 60 env RANK=0 "$S" record -o "$W/crash-early" -- "$PY" -c 'import ctypes, time, torch; x = torch.ones(1 << 20, device="cuda"); y = (x * 2).sum(); torch.cuda.synchronize(); time.sleep(1); ctypes.string_at(0)'
ls -la "$W/crash-early"
step crash-early-info 30 "$S" info "$W/crash-early"

# 6. One clock: two processes started 3 s apart, --delay 11 --duration 2.
step window 80 "$S" record --delay 11 --duration 2 -o "$W/window" -- bash -c "
  RANK=0 LOCAL_RANK=0 '$PY' examples/sync_zoo.py --steps 0 --seconds 16 --dim 2048 > '$W/win0.txt' 2>&1 &
  sleep 3
  RANK=1 LOCAL_RANK=1 '$PY' examples/sync_zoo.py --steps 0 --seconds 13 --dim 2048 > '$W/win1.txt' 2>&1 &
  wait"
"$S" info "$W/window" 2>&1 | grep -i -E 'capture|rank|span' | head -20
chrome "$W/window"
"$PY" - "$W/window.trace.json" <<'PY' | tee -a "$J"
import collections, json, sys
try:
    ev = json.load(open(sys.argv[1])); ev = ev["traceEvents"] if isinstance(ev, dict) else ev
except Exception as e:
    print(json.dumps({"window": {"error": str(e)}})); sys.exit()
names = {e["pid"]: e["args"]["name"] for e in ev if e.get("ph") == "M" and e.get("name") == "process_name"}
span = collections.defaultdict(lambda: [float("inf"), 0.0])
for e in ev:
    if e.get("ph") == "X" and e.get("cat") == "kernel":
        s = span[e["pid"]]; s[0] = min(s[0], float(e["ts"])); s[1] = max(s[1], float(e["ts"]) + float(e.get("dur", 0)))
r = {names.get(p, str(p)): {"first_kernel_us": s[0], "last_kernel_us": s[1]} for p, s in span.items()}
v = list(span.values())
if len(v) == 2:
    r["start_diff_ms"] = abs(v[0][0] - v[1][0]) / 1e3; r["end_diff_ms"] = abs(v[0][1] - v[1][1]) / 1e3
print(json.dumps({"window": r}))
PY

# 7. torch.profiler inside the recorded job: one line at its start, one in the summary.
step profiler 100 env RANK=0 "$S" record -o "$W/profiler" -- "$PY" examples/sync_zoo.py --steps 4 --profiler 2>&1 | tee "$W/prof.out" | grep -i -n 'streamscope' | head -20
"$S" info "$W/profiler" 2>&1 | head -30   # our trace must still hold the GPU work
note "{\"torch_profiler\": {\"lines_mentioning_profiler\": $(grep -ci 'torch.profiler' "$W/prof.out")}}"

fi # main

if part overhead; then
# 8. Overhead, alternating runs:
#    - api_cost.py: host µs per call by kind of call, plain / recorded /
#      --no-python-hooks / --all-apis / --no-python-lines (where it goes),
#    - sync_zoo plain / recorded --no-python-hooks / recorded,
#    - FSDP2 at a size where the GPU sets the pace (~100 ms steps, like the
#      jobs our users run; TRUTH_FSDP2_ARGS) plain / recorded.
#    Enough steps that one slow step moves no median.
ZS=${TRUTH_ZOO_STEPS:-100}
FS=${TRUTH_FSDP2_STEPS:-30}
FA=${TRUTH_FSDP2_ARGS:---dim 4096 --seq 1024}
# FSDP2 on 2 GPUs; on a 1-GPU machine on 1 (said in truth.json).
NP=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
[ "$NP" -gt 2 ] && NP=2
[ "$NP" -lt 1 ] && NP=1
note "{\"overhead_fsdp2\": {\"gpus\": $NP, \"args\": \"$FA --steps $FS\"}}"
# variant NAME: the command prefix of an overhead variant.
#   plain | hooks | nohooks | allapis | nolines | off-KIND[+KIND...]
#   (STREAMSCOPE_ACTIVITY_OFF: activity kinds left out, to see their cost)
#   | hwtrace (the collector says on stderr, in the log, whether it took)
#   | floor (CUPTI kernel tracing alone) | bare (all records, no hooks, no callbacks)
#   | kineto (torch.profiler, no collector)
#   | oldlib (another collector build, TRUTH_OLD_COLLECTOR=path/to/.so, for
#     a before/after in one run)
#   (cuptiActivityEnableHWTrace asked for; `info` says if it took)
variant() {
  case "$1" in
    plain) ;;
    hooks) echo "$S record -o $W/ov-$2" ;;
    nohooks) echo "$S record --no-python-hooks -o $W/ov-$2" ;;
    allapis) echo "$S record --all-apis -o $W/ov-$2" ;;
    nolines) echo "$S record --no-python-lines -o $W/ov-$2" ;;
    off-*) k="${1#off-}"; echo "env STREAMSCOPE_ACTIVITY_OFF=${k//+/,} $S record -o $W/ov-$2" ;;
    hwtrace) echo "env STREAMSCOPE_HW_TRACE=1 $S record -o $W/ov-$2" ;;
    oldlib) echo "env STREAMSCOPE_COLLECTOR=${TRUTH_OLD_COLLECTOR:?oldlib needs TRUTH_OLD_COLLECTOR=path/to/libstreamscope_collector.so} $S record -o $W/ov-$2" ;;
    # Every activity kind, but no Python hooks and no API callback.
    bare) echo "$S record --no-python-hooks --no-python-lines -o $W/ov-$2" ;;
    # CUPTI's kernel tracing and nothing of ours: every other activity kind
    # off, no Python hooks, no API callback (the floor of any CUPTI tracer).
    floor) echo "env STREAMSCOPE_ACTIVITY_OFF=memcpy,memset,synchronization,runtime,driver,overhead,nvtx $S record --no-python-hooks --no-python-lines -o $W/ov-$2" ;;
    # kineto: no collector; the workload runs under torch.profiler (CPU and
    # CUDA activities, its defaults), the reference tool's cost on the loop.
    kineto) ;;
  esac
}
# variant_args NAME: what a variant adds to the workload's own arguments.
variant_args() { [ "$1" = kineto ] && echo --profiler; return 0; }
for i in $(seq "${TRUTH_API_ROUNDS:-2}"); do
  for v in ${TRUTH_API_VARIANTS:-plain hooks nohooks allapis nolines}; do
    step "api-$v-$i" 60 $(variant "$v" "api-$v-$i") "$PY" examples/api_cost.py ${TRUTH_API_ARGS:-} > "$W/ov-api-$v-$i.json"
    echo "api-$v-$i: $(grep '^{' "$W/ov-api-$v-$i.json" | tail -1)"
  done
done
for i in $(seq "${TRUTH_ROUNDS:-2}"); do
  for v in ${TRUTH_ZOO_VARIANTS:-plain nohooks hooks}; do
    step "zoo-$v-$i" 60 $(variant "$v" "zoo-$v-$i") "$PY" examples/sync_zoo.py --steps "$ZS" $(variant_args "$v") > "$W/ov-zoo-$v-$i.json"
    echo "zoo-$v-$i: $(grep '^{' "$W/ov-zoo-$v-$i.json" | tail -1)"
  done
done
for i in $(seq "${TRUTH_FSDP2_ROUNDS:-${TRUTH_ROUNDS:-2}}"); do
  for v in plain hooks; do
    step "fsdp2-$v-$i" 90 $(variant "$v" "fsdp2-$v-$i") torchrun --nproc_per_node "$NP" examples/torch_fsdp2.py $FA --steps "$FS" --no-nvtx > "$W/ov-fsdp2-$v-$i.json"
  done
done
# What one recorded FSDP2 rank holds, by API (the most frequent 25).
[ -e "$W/ov-fsdp2-hooks-1/rank-0.pftrace" ] &&
"$S" export --to chrome-json -o "$W/fsdp2-r0.json" "$W/ov-fsdp2-hooks-1/rank-0.pftrace" >/dev/null 2>&1 &&
"$PY" - "$W/fsdp2-r0.json" <<'PY'
import collections, json, sys
ev = json.load(open(sys.argv[1]))
ev = ev["traceEvents"] if isinstance(ev, dict) else ev
c = collections.Counter(e.get("name") for e in ev if e.get("ph") == "X")
print("fsdp2 rank 0, slices by name (hooks run 1):", sum(c.values()))
for n, k in c.most_common(25): print(f"{k:8d} {n[:100]}")
PY
# CUPTI's own overhead records in each recorded sync_zoo variant's first
# run: the buffer requests and flushes it timed, on which threads.
for v in $(echo "${TRUTH_ZOO_VARIANTS:-plain nohooks hooks}"); do
  [ -d "$W/ov-zoo-$v-1" ] || continue
  chrome "$W/ov-zoo-$v-1"
  "$PY" - "$W/ov-zoo-$v-1.trace.json" "$v" <<'PY' | tee -a "$J"
import collections, json, sys
try:
    ev = json.load(open(sys.argv[1])); ev = ev["traceEvents"] if isinstance(ev, dict) else ev
except Exception as e:
    print(json.dumps({"cupti_overhead_" + sys.argv[2]: {"error": str(e)}})); sys.exit()
steps = [e for e in ev if e.get("ph") == "X" and e.get("name") == "streamscope:optimizer.step"]
lo = min((e["ts"] for e in steps), default=0)
r = collections.defaultdict(lambda: {"n": 0, "total_us": 0.0, "max_us": 0.0, "in_steps_us": 0.0})
for e in ev:
    if e.get("ph") == "X" and e.get("name", "").startswith("CUPTI overhead"):
        d = r[e["name"][16:]]; u = float(e.get("dur", 0))
        d["n"] += 1; d["total_us"] = round(d["total_us"] + u, 1); d["max_us"] = max(d["max_us"], round(u, 1))
        if steps and e["ts"] >= lo: d["in_steps_us"] = round(d["in_steps_us"] + u, 1)
print(json.dumps({"cupti_overhead_" + sys.argv[2]: r}))
PY
done
# The frame reader needs no hooks: the same lines from a --no-python-hooks run.
[ -d "$W/ov-zoo-nohooks-1" ] && zoo_lines "$W/ov-zoo-nohooks-1" sync_zoo_without_hooks
"$PY" - "$W" <<'PY' | tee -a "$J"
import glob, json, re, statistics, sys
def by_round(pat):
    """{round: median step ms} of the runs matching pat-ROUND.json."""
    v = {}
    for f in glob.glob(f"{sys.argv[1]}/{pat}-[0-9]*.json"):
        m = re.search(r"-(\d+)\.json$", f)  # not the exports (-1.trace.json)
        if not m: continue
        i = int(m.group(1))
        for l in open(f):
            if l.startswith("{"):
                try: v[i] = float(json.loads(l)["step_ms_median"])
                except Exception: pass
    return v
def med(pat):
    v = by_round(pat)
    return [v[i] for i in sorted(v)]
api = {}
import os, re
variants = sorted({re.sub(r"^ov-api-(.*)-\d+\.json$", r"\1", os.path.basename(f)) for f in glob.glob(f"{sys.argv[1]}/ov-api-*-*.json")})
for k in variants:
    rows = []
    for f in sorted(glob.glob(f"{sys.argv[1]}/ov-api-{k}-[0-9]*.json")):
        for l in open(f):
            if l.startswith("{"):
                try: rows.append(json.loads(l))
                except Exception: pass
    if rows:
        api[k] = {c: statistics.median(r[c] for r in rows) for c in rows[0] if c.endswith("_us")}
r = {"api_cost_us": api}
zv = tuple(os.environ.get("TRUTH_ZOO_VARIANTS", "plain nohooks hooks").split())
for w, kinds in (("zoo", zv), ("fsdp2", ("plain", "hooks"))):
    runs = {k: med(f"ov-{w}-{k}") for k in kinds}
    d = {k + "_runs_ms": v for k, v in runs.items()}
    for k, v in runs.items():
        if v: d[k + "_median_ms"] = statistics.median(v)
    b = d.get("plain_median_ms")
    for k in kinds[1:]:
        m = d.get(k + "_median_ms")
        if b and m: d[k + "_vs_plain_pct"] = 100 * (m - b) / b
        # Paired: each run against the plain run of its round (the runs
        # alternate), then the mean; slow drift between rounds cancels.
        pl, rk = by_round(f"ov-{w}-plain"), by_round(f"ov-{w}-{k}")
        pairs = [100 * (rk[i] - pl[i]) / pl[i] for i in sorted(pl) if i in rk and pl[i]]
        if pairs:
            d[k + "_vs_plain_paired_pct"] = statistics.mean(pairs)
            if len(pairs) > 1: d[k + "_vs_plain_paired_sd_pct"] = statistics.stdev(pairs)
    if d.get("nohooks_median_ms") and d.get("hooks_median_ms"):
        d["hooks_vs_nohooks_pct"] = 100 * (d["hooks_median_ms"] - d["nohooks_median_ms"]) / d["nohooks_median_ms"]
    r[w] = d
print(json.dumps({"overhead": r}))
PY

fi # overhead

# 9. fsdp-ref serial (the non-overlapped baseline of traces/), two processes.
if part serial; then
  d="$W/fsdp-ref-serial-h200x2"
  SCFG="--mode serial --layers 8 --dim 4096 --batch 4 --seq 1024 --steps 10 --warmup 3 --item-sync --timeout-s 100"
  step fsdp-ref-serial 90 "$S" record -o "$d" -- bash -c "
    for r in 0 1; do RANK=\$r WORLD_SIZE=2 LOCAL_RANK=\$r MASTER_ADDR=127.0.0.1 MASTER_PORT=29750 \
      '$F' $SCFG > '$W/serial-rank'\$r.txt 2>&1 & done; wait"
  tail -5 "$W/serial-rank0.txt" 2>/dev/null
  step fsdp-ref-serial-report 40 "$S" report "$d" | head -40
  pack fsdp-ref-serial-h200x2
fi

# 11. The NCCL profiler plugin (part nccl, not run by default): fsdp-ref
# prefetch 1, two processes, recorded (record sets NCCL_PROFILER_PLUGIN);
# per rank: whether NCCL loaded the plugin (metadata nccl_profiler_plugin),
# how many NCCL operations the trace holds, by function, and the first few.
if part nccl; then
  d="$W/fsdp-ref-nccl-h200x2"
  NCFG="--mode overlap --layers 8 --dim 4096 --batch 4 --seq 1024 --steps 10 --warmup 3 --item-sync --timeout-s 100"
  step fsdp-ref-nccl 90 "$S" record -o "$d" -- bash -c "
    for r in 0 1; do RANK=\$r WORLD_SIZE=2 LOCAL_RANK=\$r MASTER_ADDR=127.0.0.1 MASTER_PORT=29760 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV \
      '$F' $NCFG --prefetch 1 > '$W/nccl-rank'\$r.txt 2>&1 & done; wait"
  grep -ih "profiler" "$W/nccl-rank0.txt" 2>/dev/null | head -5
  chrome "$d"
  "$PY" - "$d.trace.json" <<'PY'
import json, sys, collections
t = json.load(open(sys.argv[1]))
ev = t["traceEvents"] if isinstance(t, dict) else t
model = next((e.get("streamscope") for e in ev if e.get("name") == "streamscope" and e.get("ph") == "M"), None) or {}
names = {e["pid"]: e["args"]["name"] for e in ev if e.get("ph") == "M" and e.get("name") == "process_name"}
for p in model.get("processes", []):
    meta = dict(map(tuple, p.get("metadata", [])))
    print("pid", p["pid"], "rank", p.get("rank"), "plugin:", meta.get("nccl_profiler_plugin"), "lost:", meta.get("nccl_records_lost", 0))
ops = collections.defaultdict(list)
for e in ev:
    if e.get("ph") == "X" and str(e.get("name", "")).startswith("NCCL "):
        ops[e["pid"]].append(e)
counts = {}
for pid, es in sorted(ops.items()):
    es.sort(key=lambda e: float(e["ts"]))
    by = collections.Counter(e["name"] for e in es)
    print(names.get(pid, pid), len(es), "NCCL operations:", dict(by))
    for e in es[:4]:
        a = e.get("args", {})
        print("  ts", e["ts"], "dur_us", e.get("dur"), {k: a.get(k) for k in ("comm", "seq", "func", "count", "dtype", "bytes", "root", "peer", "algo", "proto", "channels", "rank", "nranks", "tid")})
    counts[str(names.get(pid, pid))] = len(es)
print(json.dumps({"nccl_plugin_ops": counts}))
PY
  pack fsdp-ref-nccl-h200x2
fi

# 12. On-demand captures (part capture, not run by default), torch FSDP2
# on 2 GPUs (no NVTX: steps from the optimizer-step markers):
#   a. a full recording of the same job (TRUTH_CAPTURE_FULL_STEPS steps),
#      the reference the captures' reports are held against;
#   b. the job under `record --armed` (TRUTH_CAPTURE_STEPS steps); once both
#      ranks have their control socket and training is under way: capture 1
#      `--steps 3` (each rank from its next step boundary), capture 2
#      `--duration 400ms` (the same wall-clock instant on every rank);
#   c. TRUTH_CAPTURE_ROUNDS rounds of plain / armed (no capture), alternating:
#      the armed-mode overhead (target <= 0.1 %).
# Checks: per capture, each rank's window (capture_start/end_ns) against
# the other rank's (target: within 1 ms), steps found, and per rank the
# captured steps' median duration and overlap against the full recording's.
if part capture; then
  cn=torch-fsdp2-capture-h200x2
  d="$W/$cn"
  CA=${TRUTH_FSDP2_ARGS:---dim 4096 --seq 1024}
  CSTEPS=${TRUTH_CAPTURE_STEPS:-260}
  full="$W/torch-fsdp2-full-h200x2"
  step fsdp2-full-record 150 "$S" record -o "$full" -- torchrun --nproc_per_node 2 --master_port 29769 \
      examples/torch_fsdp2.py $CA --steps "${TRUTH_CAPTURE_FULL_STEPS:-24}" --no-nvtx
  ( step fsdp2-armed 240 "$S" record --armed -o "$d" -- torchrun --nproc_per_node 2 --master_port 29770 \
      examples/torch_fsdp2.py $CA --steps "$CSTEPS" --no-nvtx > "$W/capture-armed.json" ) &
  armed_pid=$!
  for _ in $(seq 150); do
    [ "$(ls "$d/.control" 2>/dev/null | grep -c '\.sock$')" -ge 2 ] && break
    sleep 1
  done
  ls -la "$d/.control" 2>&1
  sleep "${TRUTH_CAPTURE_WAIT_S:-12}"
  step capture-1 30 "$S" capture "$d" --steps 3
  sleep 5
  step capture-2 30 "$S" capture "$d" --duration 400ms --ranks 0,1
  wait "$armed_pid"
  cat "$W/capture-armed.json"
  ls -la "$d" 2>&1
  for k in 1 2; do
    "$S" report "$d"/rank-*.capture-$k.pftrace --format json > "$W/capture-$k.report.json" 2>"$W/capture-$k.report.err"
    cat "$W/capture-$k.report.err"
    step "capture-$k-report" 60 "$S" report "$d"/rank-*.capture-$k.pftrace | head -30
    "$S" export "$d"/rank-*.capture-$k.pftrace --to chrome-json -o "$W/capture-$k.trace.json" 2>&1 | tail -1
  done
  "$S" report "$full" --format json > "$W/full.report.json" 2>/dev/null
  "$S" export "$full" --to chrome-json -o "$W/full.trace.json" 2>&1 | tail -1
  : > "$W/capture-rounds.jsonl"
  for i in $(seq "${TRUTH_CAPTURE_ROUNDS:-2}"); do
    step "fsdp2-plain-$i" 150 torchrun --nproc_per_node 2 --master_port 29771 \
      examples/torch_fsdp2.py $CA --steps "$CSTEPS" --no-nvtx | grep '^{' | sed 's/^{/{"mode":"plain",/' >> "$W/capture-rounds.jsonl"
    rm -rf "$W/armed-idle"
    step "fsdp2-armed-$i" 150 "$S" record --armed -o "$W/armed-idle" -- torchrun --nproc_per_node 2 --master_port 29772 \
      examples/torch_fsdp2.py $CA --steps "$CSTEPS" --no-nvtx | grep '^{' | sed 's/^{/{"mode":"armed",/' >> "$W/capture-rounds.jsonl"
  done
  cat "$W/capture-rounds.jsonl"
  "$PY" - "$W" "$d" <<'PY' | tee -a "$J"
import glob, json, os, statistics, sys
w, d = sys.argv[1], sys.argv[2]
def load(p):
    try: return json.load(open(p))
    except Exception as e: return {"error": str(e)}
def windows(trace_json):
    t = load(trace_json)
    ev = t.get("traceEvents", []) if isinstance(t, dict) else []
    m = next((e.get("streamscope") for e in ev if e.get("name") == "streamscope" and e.get("ph") == "M"), None) or {}
    out = {}
    for p in m.get("processes", []):
        meta = dict(map(tuple, p.get("metadata", [])))
        out[str(p.get("rank"))] = {"start_ns": p.get("capture_start_ns"), "end_ns": p.get("capture_end_ns"),
                                   "dropped": p.get("dropped_records"), "nccl_plugin": meta.get("nccl_profiler_plugin")}
    return out
def per_rank(rep, skip=1):
    res = {}
    for r in rep.get("ranks", []):
        # Whole steps only: a capture's first step is partial; FSDP2 warms
        # up over its first ~3 steps in a whole recording.
        st = [s for s in rep.get("steps", []) if s.get("rank") == r["rank"] and s.get("step", 0) >= skip]
        durs = [s["duration_us"] for s in st]
        med = lambda v: statistics.median(v) if v else None
        res[str(r["rank"])] = {"steps": len(durs), "step_ms_median": med(durs) / 1e3 if durs else None,
                               "step_overlap_pct_median": med([s["breakdown"]["overlap_pct"] for s in st]),
                               "step_idle_pct_median": med([s["breakdown"]["idle_pct"] for s in st]),
                               "overlap_pct": r.get("overlap_pct"), "idle_pct": r.get("idle_pct"),
                               "step_source": r.get("step_source")}
    return res
out = {"full": per_rank(load(os.path.join(w, "full.report.json")), skip=4),
       "full_processes": windows(os.path.join(w, "full.trace.json"))}
for k in (1, 2):
    win = windows(os.path.join(w, f"capture-{k}.trace.json"))
    starts = [v["start_ns"] for v in win.values() if v["start_ns"] is not None]
    ends = [v["end_ns"] for v in win.values() if v["end_ns"] is not None]
    out[f"capture_{k}"] = {"windows": win,
        "start_spread_ms": (max(starts) - min(starts)) / 1e6 if len(starts) > 1 else None,
        "end_spread_ms": (max(ends) - min(ends)) / 1e6 if len(ends) > 1 else None,
        "ranks": per_rank(load(os.path.join(w, f"capture-{k}.report.json")))}
rows = [json.loads(l) for l in open(os.path.join(w, "capture-rounds.jsonl")) if l.strip().startswith("{")]
pl = [r["step_ms_median"] for r in rows if r["mode"] == "plain"]
ar = [r["step_ms_median"] for r in rows if r["mode"] == "armed"]
ov = {"plain_ms": pl, "armed_ms": ar}
if pl and ar:
    ov["overhead_pct"] = 100 * (statistics.mean(ar) / statistics.mean(pl) - 1)
out["armed_overhead"] = ov
out["capture_files"] = sorted(os.path.basename(f) for f in glob.glob(os.path.join(d, "*.capture-*.pftrace")))
print(json.dumps({"capture": out}))
PY
  find "$d" -name '*.capture-*.pftrace' -size +0 | head -20
  # Ship the captures (not the armed run's own empty files) and the full recording.
  mkdir -p "$W/ship/$cn" "$W/ship/torch-fsdp2-full-h200x2"
  cp "$d"/rank-*.capture-*.pftrace "$W/ship/$cn/" 2>/dev/null
  cp "$full"/rank-*.pftrace "$W/ship/torch-fsdp2-full-h200x2/" 2>/dev/null
  tar czf "$OUT/$cn.tar.gz" -C "$W/ship" "$cn" torch-fsdp2-full-h200x2 && ls -la "$OUT/$cn.tar.gz"
fi

# 11b. The NCCL plugin's cost (part nccl-cost): fsdp-ref on 2 GPUs in one
# process, recorded with the plugin and with --no-nccl-plugin, alternating;
# the step time is the median of the recorded NVTX steps (report JSON).
if part nccl-cost; then
  : > "$W/nccl-cost.jsonl"
  NC="--gpus 2 --mode overlap --prefetch 1 --layers 8 --dim 4096 --batch 4 --seq 1024 --steps 30 --warmup 5 --timeout-s 100"
  for i in $(seq "${TRUTH_NCCL_COST_ROUNDS:-3}"); do
    for m in plugin noplugin; do
      flag=""; [ "$m" = noplugin ] && flag="--no-nccl-plugin"
      rm -rf "$W/ncost"
      step "nccl-cost-$m-$i" 60 "$S" record $flag -o "$W/ncost" -- "$F" $NC > "$W/ncost.out" 2>&1
      grep -i "step\|error" "$W/ncost.out" | tail -3
      "$S" report "$W/ncost" --format json 2>/dev/null | "$PY" -c '
import json, statistics, sys
r = json.load(sys.stdin)
d = [s["duration_us"] for s in r.get("steps", []) if s.get("step", 0) >= 1]
print(json.dumps({"mode": sys.argv[1], "steps": len(d), "step_ms_median": statistics.median(d) / 1e3 if d else None}))' "$m" >> "$W/nccl-cost.jsonl"
    done
  done
  cat "$W/nccl-cost.jsonl"
  "$PY" - "$W/nccl-cost.jsonl" <<'PY' | tee -a "$J"
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
p = [r["step_ms_median"] for r in rows if r["mode"] == "plugin" and r["step_ms_median"]]
n = [r["step_ms_median"] for r in rows if r["mode"] == "noplugin" and r["step_ms_median"]]
o = {"plugin_ms": p, "no_plugin_ms": n}
if p and n: o["plugin_overhead_pct"] = 100 * (statistics.mean(p) / statistics.mean(n) - 1)
print(json.dumps({"nccl_plugin_cost": o}))
PY
fi

# 9c. A known straggler (part `straggler`, not run by default): fsdp-ref
#     with rank 1 sleeping STRAGGLER_MS on the host before each of its 16
#     all-gathers per step, and the same run without the straggler just
#     before it. The report must name rank 1 in every step, and the wait it
#     reports must account for what the other rank lost: rank 0's NCCL time
#     per step against the baseline's (within 10 %). The planted host sleep
#     (16 x STRAGGLER_MS) is an upper bound: while rank 1's host sleeps, its
#     GPU still runs the work queued before the sleep.
if part straggler; then
  d="$W/fsdp-ref-straggler-h200x2"
  base="$W/straggler-baseline"
  SMS=${STRAGGLER_MS:-5}
  SCFG="--mode overlap --prefetch 1 --layers 8 --dim 4096 --batch 4 --seq 1024 --steps 10 --warmup 3 --item-sync --timeout-s 100"
  step fsdp-ref-straggler-baseline 90 "$S" record -o "$base" -- bash -c "
    for r in 0 1; do RANK=\$r WORLD_SIZE=2 LOCAL_RANK=\$r MASTER_ADDR=127.0.0.1 MASTER_PORT=29773 \
      '$F' $SCFG > '$W/straggler-base-rank'\$r.txt 2>&1 & done; wait"
  step fsdp-ref-straggler 90 "$S" record -o "$d" -- bash -c "
    for r in 0 1; do RANK=\$r WORLD_SIZE=2 LOCAL_RANK=\$r MASTER_ADDR=127.0.0.1 MASTER_PORT=29770 \
      '$F' $SCFG --straggler 1:$SMS > '$W/straggler-rank'\$r.txt 2>&1 & done; wait"
  "$S" report "$d" --format json > "$d.report.json" 2>/dev/null
  "$S" report "$base" --format json > "$base.report.json" 2>/dev/null
  "$S" report "$d" | sed -n '/Who waits/,/^$/p' | head -30
  "$PY" - "$d.report.json" "$base.report.json" "$SMS" <<'PY' | tee -a "$J"
import json, statistics, sys
r = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2])); ms = float(sys.argv[3])
def per_rank(rep, rank, key):
    return [s["breakdown"][key] for s in rep.get("steps", []) if s.get("rank") == rank and s.get("step", 0) >= 1]
rows = {}
for s in r.get("steps", []):
    if s.get("straggler_rank") is not None and s.get("step", 0) >= 1:
        rows.setdefault(s["step"], (s["straggler_rank"], s["straggler_wait_us"]))
named = [k for k, (rank, _) in rows.items() if rank == 1]
waits = [w / 1e3 for (rank, w) in rows.values() if rank == 1]
med = statistics.median(waits) if waits else 0.0
comm = statistics.median(per_rank(r, 0, "comm_us")) / 1e3 if per_rank(r, 0, "comm_us") else None
comm0 = statistics.median(per_rank(b, 0, "comm_us")) / 1e3 if per_rank(b, 0, "comm_us") else None
step_of = lambda rep: statistics.median(s["duration_us"] for s in rep.get("steps", []) if s.get("rank") == 0 and s.get("step", 0) >= 1) / 1e3
lost = (comm - comm0) if comm is not None and comm0 is not None else None
print(json.dumps({"straggler": {"planted_host_sleep_ms_per_step": 16 * ms, "steps": len(rows), "steps_naming_rank_1": len(named),
      "median_wait_ms": med, "rank0_nccl_ms_per_step": comm, "baseline_rank0_nccl_ms_per_step": comm0,
      "rank0_nccl_added_ms_per_step": lost, "step_ms": step_of(r), "baseline_step_ms": step_of(b),
      "wait_vs_added_pct": (100 * (med / lost - 1)) if lost else None,
      "within_10pct": bool(lost) and abs(med - lost) <= 0.1 * lost and len(named) == len(rows)}}))
PY
  pack fsdp-ref-straggler-h200x2
fi

# 10. The collector's #[ignore]d GPU tests.
if part gputests && [ -x "$BIN/collector-gpu-tests" ]; then
  step collector-gpu-tests 240 env COLLECTOR_SO="$LIB" FSDP_REF="$F" "$BIN/collector-gpu-tests" --ignored --test-threads=1
fi

"$PY" -c 'import json,sys
d={}
for l in open(sys.argv[1]):
    l=l.strip()
    if l.startswith("{"):
        try: d.update(json.loads(l))
        except Exception: pass
json.dump(d, open(sys.argv[2], "w"), indent=1)' "$J" "$OUT/truth.json"
echo
echo "=== truth.json"; cat "$OUT/truth.json"
echo "=== summary"; cat "$SUMMARY"
echo "=== results"
find "$OUT" -type f -printf '%10s %p\n' | sort -k2
find "$OUT" -type f -size +15M -printf 'too big to come back: %p\n'
rm -rf "$W"
