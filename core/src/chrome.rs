//! chrome-json (Trace Event Format) export, for tools that read it
//! (chrome://tracing, older Perfetto UI loaders, speedscope, HTA-style
//! scripts).
//!
//! Each process keeps its pid; every track becomes a "thread" of that pid
//! (host threads keep their tid, other tracks get a synthetic tid above
//! 2^31 named after the track). Slices are complete ("X") events with µs
//! timestamps at ns precision, counters are "C" events, and launch→kernel
//! flows are "s"/"f" pairs keyed by the flow id. The model's allocations
//! (GPU memory blocks, `Trace::allocations`) are not written yet.
//!
//! The file is also marked as ours (`"streamscope":1`, the first key) and
//! carries what Trace Event Format cannot say: one `streamscope` metadata
//! event with the processes, devices and tracks of the model, the track of
//! each event (`sst`) and typed free-form arguments (`ssargs`). Tools ignore
//! these fields; `read_json` reads such a file back into the model it was
//! written from (flows are rebuilt from correlation ids, as every reader
//! does), so an exported file reports what its source reported.

use crate::diagnostic::{Diagnostic, Kind};
use std::io::{self, Write};
use std::path::Path;

use serde_json::{json, Value};

use crate::error::{Result, TraceError};
use crate::model::*;

/// How an exported file starts: the marker [`is_ours`] looks for.
const MARKER: &[u8] = b"{\"streamscope\":1,";

fn synthetic_tid(track: usize) -> u64 {
    (1u64 << 31) + track as u64
}

fn tid_of(t: &Trace, track: TrackId) -> u64 {
    match t.track(track).kind {
        TrackKind::Thread { tid } => tid as u64,
        _ => synthetic_tid(track.index()),
    }
}

fn us(ns: i64) -> String {
    let sign = if ns < 0 { "-" } else { "" };
    let a = ns.unsigned_abs();
    format!("{sign}{}.{:03}", a / 1000, a % 1000)
}

fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// Writes `trace` as Trace Event Format JSON.
pub(crate) fn write_chrome_json<W: Write>(trace: &Trace, out: W) -> io::Result<W> {
    let mut w = io::BufWriter::with_capacity(1 << 20, out);
    w.write_all(MARKER)?;
    writeln!(w, "\"displayTimeUnit\":\"ns\",\"traceEvents\":[")?;
    write!(
        w,
        "{{\"ph\":\"M\",\"name\":\"streamscope\",\"pid\":{},\"args\":{{}},\"streamscope\":{}}}",
        trace.processes().first().map_or(0, |p| p.pid),
        model_json(trace)
    )?;
    write_process_names(&mut w, trace)?;
    write_track_names(&mut w, trace)?;
    for i in 0..trace.slices().len() {
        write_slice(&mut w, trace, i)?;
    }
    write_flows(&mut w, trace)?;
    write_counters(&mut w, trace)?;
    writeln!(w, "\n]}}")?;
    w.into_inner().map_err(|e| e.into_error())
}

/// Ends the event before (the first is the `streamscope` metadata event).
fn sep(w: &mut impl Write) -> io::Result<()> {
    w.write_all(b",\n")
}

/// The pid of the process of `track` (0 when it has none).
fn pid_of(trace: &Trace, track: TrackId) -> u32 {
    trace
        .processes()
        .get(trace.track(track).process.index())
        .map(|p| p.pid)
        .unwrap_or(0)
}

/// `process_name` (and `process_labels` for a rank) metadata events.
fn write_process_names(w: &mut impl Write, trace: &Trace) -> io::Result<()> {
    for p in trace.processes() {
        sep(w)?;
        let name = if p.name.is_empty() {
            p.label()
        } else {
            p.name.clone()
        };
        write!(
            w,
            "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{},\"args\":{{\"name\":{}}}}}",
            p.pid,
            json_str(&name)
        )?;
        if let Some(r) = p.rank {
            sep(w)?;
            write!(w, "{{\"ph\":\"M\",\"name\":\"process_labels\",\"pid\":{},\"args\":{{\"labels\":\"rank {r}\"}}}}", p.pid)?;
        }
    }
    Ok(())
}

/// `thread_name` and `thread_sort_index` metadata events, one pair per track.
fn write_track_names(w: &mut impl Write, trace: &Trace) -> io::Result<()> {
    for (i, tr) in trace.tracks().iter().enumerate() {
        let pid = pid_of(trace, TrackId::from_index(i));
        let tid = tid_of(trace, TrackId::from_index(i));
        let mut name = trace.str(tr.name).to_string();
        if let Some(parent) = tr.parent {
            name = format!("{} / {name}", trace.track_name(parent));
        }
        sep(w)?;
        write!(w, "{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"name\":{}}}}}", json_str(&name))?;
        sep(w)?;
        write!(w, "{{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"sort_index\":{i}}}}}")?;
    }
    Ok(())
}

/// Slice `i` as a complete ("X") event.
fn write_slice(w: &mut impl Write, trace: &Trace, i: usize) -> io::Result<()> {
    let sl = trace.slices();
    let tr = trace.track(sl.track()[i]);
    let pid = pid_of(trace, sl.track()[i]);
    let tid = tid_of(trace, sl.track()[i]);
    sep(w)?;
    write!(
        w,
        "{{\"ph\":\"X\",\"cat\":\"{}\",\"name\":{},\"pid\":{pid},\"tid\":{tid},\"sst\":{},\"ts\":{},\"dur\":{},\"args\":{{\"class\":\"{}\"",
        sl.kind()[i].name(),
        json_str(trace.str(sl.name()[i])),
        sl.track()[i].get(),
        us(sl.start_ns()[i]),
        us(sl.dur_ns()[i]),
        sl.class()[i].name()
    )?;
    if sl.correlation()[i] != 0 {
        write!(w, ",\"correlation\":{}", sl.correlation()[i])?;
    }
    if let TrackKind::Stream { device, stream } = tr.kind {
        let ord = trace
            .devices()
            .get(device.index())
            .map(|d| d.ordinal)
            .unwrap_or(device.get());
        write!(w, ",\"device\":{ord},\"stream\":{stream}")?;
    }
    write_typed_fields(w, trace, SliceId::from_index(i))?;
    write_args(w, trace, SliceId::from_index(i))?;
    w.write_all(b"}")?;
    write_typed_args(w, trace, SliceId::from_index(i))?;
    w.write_all(b"}")
}

/// The launch configuration and copy of a slice, inside its `args`.
fn write_typed_fields(w: &mut impl Write, trace: &Trace, id: SliceId) -> io::Result<()> {
    if let Some(lc) = trace.launch_of(id) {
        write!(
            w,
            ",\"grid\":[{},{},{}],\"block\":[{},{},{}],\"registers per thread\":{},\"static shared memory\":{},\"dynamic shared memory\":{}",
            lc.grid[0], lc.grid[1], lc.grid[2], lc.block[0], lc.block[1], lc.block[2],
            lc.registers_per_thread, lc.static_smem_bytes, lc.dynamic_smem_bytes
        )?;
    }
    if let Some(c) = trace.copy_of(id) {
        write!(
            w,
            ",\"bytes\":{},\"copy kind\":\"{}\",\"pageable\":{}",
            c.bytes,
            c.kind.name(),
            c.pageable
        )?;
    }
    Ok(())
}

/// The free-form arguments of a slice, flat inside its `args`.
fn write_args(w: &mut impl Write, trace: &Trace, id: SliceId) -> io::Result<()> {
    for (k, v) in trace.args_of(id) {
        let v = match v {
            ArgValue::Int(x) => x.to_string(),
            ArgValue::UInt(x) => x.to_string(),
            ArgValue::Double(x) if x.is_finite() => x.to_string(),
            ArgValue::Double(x) => json_str(&x.to_string()),
            ArgValue::Bool(x) => x.to_string(),
            ArgValue::Str(s) => json_str(trace.str(*s)),
        };
        write!(w, ",{}:{v}", json_str(trace.str(*k)))?;
    }
    Ok(())
}

/// `ssargs`: the free-form arguments typed, in order (what the flat args
/// cannot say); nothing without arguments.
fn write_typed_args(w: &mut impl Write, trace: &Trace, id: SliceId) -> io::Result<()> {
    let args = trace.args_of(id);
    if args.is_empty() {
        return Ok(());
    }
    let typed: Vec<Value> = args
        .iter()
        .map(|(k, v)| {
            let k = trace.str(*k);
            match v {
                ArgValue::Int(x) => json!([k, "i", x]),
                ArgValue::UInt(x) => json!([k, "u", x]),
                ArgValue::Double(x) if x.is_finite() => json!([k, "d", x]),
                ArgValue::Double(x) => json!([k, "d", x.to_string()]),
                ArgValue::Bool(x) => json!([k, "b", x]),
                ArgValue::Str(s) => json!([k, "s", trace.str(*s)]),
            }
        })
        .collect();
    write!(w, ",\"ssargs\":{}", Value::Array(typed))
}

/// Each flow as a start ("s") and finish ("f") event.
fn write_flows(w: &mut impl Write, trace: &Trace) -> io::Result<()> {
    let sl = trace.slices();
    for f in trace.flows() {
        for (ph, s, extra) in [("s", f.from, ""), ("f", f.to, ",\"bp\":\"e\"")] {
            let s = s.index();
            let pid = pid_of(trace, sl.track()[s]);
            sep(w)?;
            write!(
                w,
                "{{\"ph\":\"{ph}\",\"cat\":\"flow\",\"name\":\"launch\",\"id\":{},\"pid\":{pid},\"tid\":{},\"ts\":{}{extra}}}",
                f.id,
                tid_of(trace, sl.track()[s]),
                us(sl.start_ns()[s])
            )?;
        }
    }
    Ok(())
}

/// Counter samples as "C" events (a value that is not finite: 0, with the
/// value as text in `ssvalue`).
fn write_counters(w: &mut impl Write, trace: &Trace) -> io::Result<()> {
    let c = trace.counters();
    for i in 0..c.len() {
        let tr = trace.track(c.track()[i]);
        let pid = pid_of(trace, c.track()[i]);
        let v = if c.value()[i].is_finite() {
            c.value()[i]
        } else {
            0.0
        };
        sep(w)?;
        write!(
            w,
            "{{\"ph\":\"C\",\"name\":{},\"pid\":{pid},\"sst\":{},\"ts\":{},\"args\":{{\"value\":{v}}}{}}}",
            json_str(trace.str(tr.name)),
            c.track()[i].get(),
            us(c.ts_ns()[i]),
            if c.value()[i].is_finite() {
                String::new()
            } else {
                format!(",\"ssvalue\":{}", json_str(&c.value()[i].to_string()))
            }
        )?;
    }
    Ok(())
}

/// Processes, devices and tracks of the model, for the `streamscope`
/// metadata event.
fn model_json(t: &Trace) -> Value {
    let processes: Vec<Value> = t
        .processes()
        .iter()
        .map(|p| {
            json!({
                "pid": p.pid, "name": p.name, "rank": p.rank, "local_rank": p.local_rank,
                "world_size": p.world_size, "hostname": p.hostname, "cmdline": p.cmdline,
                "clock": p.clock.name(), "dropped_records": p.dropped_records,
                "capture_start_ns": p.capture_start_ns, "capture_end_ns": p.capture_end_ns,
                "clock_snapshot": p.clock_snapshot, "metadata": p.metadata,
            })
        })
        .collect();
    let devices: Vec<Value> = t
        .devices()
        .iter()
        .map(|d| {
            json!({
                "process": d.process.get(), "ordinal": d.ordinal, "name": d.name,
                "compute_major": d.compute_major, "compute_minor": d.compute_minor,
                "sm_count": d.sm_count, "warp_size": d.warp_size,
                "max_threads_per_block": d.max_threads_per_block,
                "max_threads_per_sm": d.max_threads_per_sm,
                "max_blocks_per_sm": d.max_blocks_per_sm, "regs_per_sm": d.regs_per_sm,
                "regs_per_block": d.regs_per_block, "smem_per_sm_bytes": d.smem_per_sm_bytes,
                "smem_per_block_bytes": d.smem_per_block_bytes,
                "global_mem_bytes": d.global_mem_bytes,
            })
        })
        .collect();
    let tracks: Vec<Value> = t
        .tracks()
        .iter()
        .map(|tr| {
            let mut v = json!({
                "process": tr.process.get(),
                "parent": tr.parent.map(|p| p.get()),
                "name": t.str(tr.name),
            });
            let (kind, extra) = match tr.kind {
                TrackKind::Thread { tid } => ("thread", json!({ "tid": tid })),
                TrackKind::Gpu { device } => ("gpu", json!({ "device": device.get() })),
                TrackKind::Stream { device, stream } => (
                    "stream",
                    json!({ "device": device.get(), "stream": stream }),
                ),
                TrackKind::Counter { device } => {
                    ("counter", json!({ "device": device.map(|d| d.get()) }))
                }
                TrackKind::Other => ("other", json!({})),
            };
            if let (Value::Object(m), Value::Object(e)) = (&mut v, extra) {
                m.insert("kind".into(), kind.into());
                m.extend(e);
            }
            v
        })
        .collect();
    json!({ "version": 1, "processes": processes, "devices": devices, "tracks": tracks })
}

/// Whether `json` is chrome-json exported by streamscope (starts with the
/// marker, after any byte-order mark and whitespace).
pub(crate) fn is_ours(json: &[u8]) -> bool {
    let json = json.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(json);
    let start = json
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(json.len());
    json[start..].starts_with(MARKER)
}

/// One event of an exported file, as read back.
#[derive(serde::Deserialize)]
struct Ev<'a> {
    #[serde(default)]
    ph: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    cat: String,
    sst: Option<u32>,
    #[serde(borrow)]
    ts: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow)]
    dur: Option<&'a serde_json::value::RawValue>,
    #[serde(default)]
    args: Value,
    #[serde(default)]
    ssargs: Vec<(String, String, Value)>,
    ssvalue: Option<String>,
    streamscope: Option<Value>,
}

#[derive(serde::Deserialize)]
#[allow(non_snake_case)]
struct Doc<'a> {
    #[serde(borrow)]
    traceEvents: Vec<Ev<'a>>,
}

/// Reads chrome-json written by [`write_chrome_json`] back into the model
/// it was written from (see the module docs). `path` names it in errors.
pub(crate) fn read_json(path: &Path, json: &[u8]) -> Result<Trace> {
    let bad = |why: String| TraceError::Json {
        path: path.to_path_buf(),
        why: format!("streamscope chrome-json: {why}"),
    };
    let doc: Doc = serde_json::from_slice(json).map_err(|e| bad(e.to_string()))?;
    let model = doc
        .traceEvents
        .iter()
        .find(|e| e.ph == "M" && e.name == "streamscope")
        .and_then(|e| e.streamscope.as_ref())
        .ok_or_else(|| bad("no streamscope metadata event".into()))?;
    let mut t = TraceBuilder::new();
    for p in list(model, "processes") {
        t.add_process(read_process(&p));
    }
    for d in list(model, "devices") {
        let device = read_device(&d, t.processes().len() as u32).map_err(bad)?;
        t.add_device(device);
    }
    let tracks = list(model, "tracks");
    let ntracks = tracks.len() as u32;
    for tr in &tracks {
        add_track(&mut t, tr, ntracks).map_err(bad)?;
    }
    let mut bad_events = read_events(&mut t, &doc.traceEvents, ntracks);
    bad_events += t.break_parent_cycles();
    if bad_events > 0 {
        t.push_diagnostic(
            Diagnostic::new(
                Kind::MalformedEvents,
                bad_events as u64,
                format!("{bad_events} events or arguments that do not read back skipped"),
            )
            .in_file(path.display()),
        );
    }
    t.link_flows_by_correlation();
    Ok(t.finish())
}

fn u32_of(v: &Value, k: &str) -> Option<u32> {
    v.get(k).and_then(Value::as_u64).map(|x| x as u32)
}

fn str_of(v: &Value, k: &str) -> String {
    v.get(k).and_then(Value::as_str).unwrap_or("").to_string()
}

/// The array `k` of `v` (empty when absent).
fn list(v: &Value, k: &str) -> Vec<Value> {
    v.get(k)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// A process of the `streamscope` metadata event.
fn read_process(p: &Value) -> Process {
    Process {
        pid: u32_of(p, "pid").unwrap_or(0),
        name: str_of(p, "name"),
        rank: u32_of(p, "rank"),
        local_rank: u32_of(p, "local_rank"),
        world_size: u32_of(p, "world_size"),
        hostname: str_of(p, "hostname"),
        cmdline: str_of(p, "cmdline"),
        clock: match str_of(p, "clock").as_str() {
            "realtime" => ClockDomain::Realtime,
            "monotonic" => ClockDomain::Monotonic,
            _ => ClockDomain::Boottime,
        },
        dropped_records: p
            .get("dropped_records")
            .and_then(Value::as_u64)
            .unwrap_or(0),
        capture_start_ns: p.get("capture_start_ns").and_then(Value::as_i64),
        capture_end_ns: p.get("capture_end_ns").and_then(Value::as_i64),
        clock_snapshot: list(p, "clock_snapshot")
            .iter()
            .filter_map(|c| Some((c.get(0)?.as_u64()? as u32, c.get(1)?.as_i64()?)))
            .collect(),
        metadata: list(p, "metadata")
            .iter()
            .filter_map(|c| {
                Some((
                    c.get(0)?.as_str()?.to_string(),
                    c.get(1)?.as_str()?.to_string(),
                ))
            })
            .collect(),
    }
}

/// A device of the `streamscope` metadata event, of one of the `nproc`
/// processes.
fn read_device(d: &Value, nproc: u32) -> std::result::Result<Device, String> {
    let n = |k: &str| u32_of(d, k).unwrap_or(0);
    let n64 = |k: &str| d.get(k).and_then(Value::as_u64).unwrap_or(0);
    let process = n("process");
    if process >= nproc {
        return Err(format!("device of process {process}, beyond {nproc}"));
    }
    Ok(Device {
        process: ProcessId::from_index(process as usize),
        ordinal: n("ordinal"),
        name: str_of(d, "name"),
        compute_major: n("compute_major"),
        compute_minor: n("compute_minor"),
        sm_count: n("sm_count"),
        warp_size: n("warp_size"),
        max_threads_per_block: n("max_threads_per_block"),
        max_threads_per_sm: n("max_threads_per_sm"),
        max_blocks_per_sm: n("max_blocks_per_sm"),
        regs_per_sm: n("regs_per_sm"),
        regs_per_block: n("regs_per_block"),
        smem_per_sm_bytes: n64("smem_per_sm_bytes"),
        smem_per_block_bytes: n64("smem_per_block_bytes"),
        global_mem_bytes: n64("global_mem_bytes"),
    })
}

/// Adds a track of the `streamscope` metadata event (one of `ntracks`);
/// its process, parent and device must exist.
fn add_track(t: &mut TraceBuilder, tr: &Value, ntracks: u32) -> std::result::Result<(), String> {
    let nproc = t.processes().len() as u32;
    let ndev = t.devices().len() as u32;
    let process = u32_of(tr, "process").unwrap_or(u32::MAX);
    let parent = u32_of(tr, "parent");
    let device = u32_of(tr, "device");
    if process >= nproc || parent.is_some_and(|p| p >= ntracks) || device.is_some_and(|d| d >= ndev)
    {
        return Err("a track names a process, parent or device it lacks".into());
    }
    let dev = device.unwrap_or(0);
    let kind = match str_of(tr, "kind").as_str() {
        "thread" => TrackKind::Thread {
            tid: u32_of(tr, "tid").unwrap_or(0),
        },
        "gpu" if device.is_some() => TrackKind::Gpu {
            device: DeviceId::from_index(dev as usize),
        },
        "stream" if device.is_some() => TrackKind::Stream {
            device: DeviceId::from_index(dev as usize),
            stream: u32_of(tr, "stream").unwrap_or(0),
        },
        "counter" => TrackKind::Counter {
            device: device.map(|d| DeviceId::from_index(d as usize)),
        },
        _ => TrackKind::Other,
    };
    t.add_track(
        ProcessId::from_index(process as usize),
        parent.map(|p| TrackId::from_index(p as usize)),
        kind,
        &str_of(tr, "name"),
    );
    Ok(())
}

fn time(r: Option<&serde_json::value::RawValue>) -> Option<i64> {
    r.and_then(|r| crate::kineto::us_text_to_ns(r.get()))
}

/// The slices ("X") and counter samples ("C") of the events that name one
/// of the `ntracks` tracks; returns how many events or arguments were bad.
fn read_events(t: &mut TraceBuilder, events: &[Ev], ntracks: u32) -> usize {
    let mut bad_events = 0usize;
    for e in events {
        let Some(track) = e
            .sst
            .filter(|&s| s < ntracks)
            .map(|s| TrackId::from_index(s as usize))
        else {
            if e.sst.is_some() {
                bad_events += 1;
            }
            continue;
        };
        let Some(ts) = time(e.ts) else {
            bad_events += 1;
            continue;
        };
        match e.ph.as_str() {
            "X" => bad_events += read_slice(t, e, track, ts),
            "C" => {
                let v = e
                    .ssvalue
                    .as_deref()
                    .and_then(|s| s.parse().ok())
                    .or_else(|| e.args.get("value").and_then(Value::as_f64))
                    .unwrap_or(0.0);
                t.push_counter(track, ts, v);
            }
            _ => {}
        }
    }
    bad_events
}

/// Adds the slice of an "X" event; returns how many of its typed
/// arguments were bad (skipped).
fn read_slice(t: &mut TraceBuilder, e: &Ev, track: TrackId, ts: i64) -> usize {
    let kind = SliceKind::from_name(&e.cat).unwrap_or(SliceKind::Other);
    let name = t.intern(&e.name);
    let mut s = NewSlice::new(track, kind, name, ts, time(e.dur).unwrap_or(0));
    let a = &e.args;
    let num = |k: &str| a.get(k).and_then(Value::as_u64);
    s.class = a
        .get("class")
        .and_then(Value::as_str)
        .and_then(SliceClass::from_name)
        .unwrap_or(SliceClass::None);
    s.correlation = num("correlation").unwrap_or(0) as u32;
    let dims = |k: &str| {
        let v = a.get(k)?.as_array()?;
        let d = |i: usize| v.get(i).and_then(Value::as_u64).unwrap_or(0) as u32;
        Some([d(0), d(1), d(2)])
    };
    if kind == SliceKind::Kernel {
        if let (Some(grid), Some(block)) = (dims("grid"), dims("block")) {
            s.launch = Some(LaunchConfig {
                grid,
                block,
                registers_per_thread: num("registers per thread").unwrap_or(0) as u32,
                static_smem_bytes: num("static shared memory").unwrap_or(0) as u32,
                dynamic_smem_bytes: num("dynamic shared memory").unwrap_or(0) as u32,
            });
        }
    }
    if matches!(kind, SliceKind::Memcpy | SliceKind::Memset) {
        if let Some(ck) = a.get("copy kind").and_then(Value::as_str) {
            s.copy = Some(CopyInfo {
                bytes: num("bytes").unwrap_or(0),
                kind: CopyKind::from_name(ck),
                pageable: a.get("pageable").and_then(Value::as_bool).unwrap_or(false),
            });
        }
    }
    let mut bad_args = 0;
    for (k, ty, v) in &e.ssargs {
        match typed_arg(t, ty, v) {
            Some(v) => s.args.push((t.intern(k), v)),
            None => bad_args += 1,
        }
    }
    t.push_slice(s);
    bad_args
}

/// One `ssargs` value of type `ty` (`i`, `u`, `d`, `b` or `s`).
fn typed_arg(t: &mut TraceBuilder, ty: &str, v: &Value) -> Option<ArgValue> {
    match ty {
        "i" => v.as_i64().map(ArgValue::Int),
        "u" => v.as_u64().map(ArgValue::UInt),
        "d" => v
            .as_f64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
            .map(ArgValue::Double),
        "b" => v.as_bool().map(ArgValue::Bool),
        "s" => v.as_str().map(|s| ArgValue::Str(t.intern(s))),
        _ => None,
    }
}

/// Writes `trace` as Trace Event Format JSON to `path`, replacing it.
pub fn write_file(trace: &Trace, path: &std::path::Path) -> crate::Result<()> {
    write_new_file(trace, path, true)
}

/// Writes `trace` as Trace Event Format JSON to `path` through a temporary
/// file renamed into place; an existing `path` is replaced only with
/// `overwrite`. A trace without processes is an error.
pub fn write_new_file(trace: &Trace, path: &std::path::Path, overwrite: bool) -> crate::Result<()> {
    crate::output::write_model_file(trace, path, overwrite, |t, w| {
        write_chrome_json(t, w).map(|_| ())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::{fsdp_like, SynthOptions};

    #[test]
    fn export_is_valid_json_with_every_slice() {
        let t = fsdp_like(&SynthOptions {
            target_slices: 2_000,
            ..Default::default()
        });
        let bytes = write_chrome_json(&t, Vec::new()).expect("write");
        let v: serde_json::Value = serde_json::from_slice(&bytes).expect("valid JSON");
        let events = v["traceEvents"].as_array().expect("traceEvents");
        let x = events.iter().filter(|e| e["ph"] == "X").count();
        assert_eq!(x, t.slices().len());
        let flows = events.iter().filter(|e| e["ph"] == "s").count();
        assert_eq!(flows, t.flows().len());
        // ns precision survives: ts is µs with 3 decimals.
        let first = events.iter().find(|e| e["ph"] == "X").expect("a slice");
        let ts = first["ts"].as_f64().expect("ts");
        assert!((ts * 1000.0 - t.slices().start_ns()[0] as f64).abs() < 1.0);
    }

    #[test]
    fn microseconds_keep_nanoseconds() {
        assert_eq!(us(1_234_567), "1234.567");
        assert_eq!(us(5), "0.005");
        assert_eq!(us(-1_500), "-1.500");
    }
}
