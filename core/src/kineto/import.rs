//! Kineto events → [`Trace`]: one process per file (one rank).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use serde_json::value::RawValue;
use serde_json::Value;

use super::category::{copy_kind_of, Cat};
use super::devices::{parse_device_properties, unknown_device};
use super::json::{ArgJson, Event, Id, Top};
use super::time::{ns_text_to_ns, us_text_to_ns};
use crate::error::{Result, TraceError};
use crate::model::{
    ArgSet, ArgValue, ClockDomain, CopyInfo, Device, LaunchConfig, NewSlice, Process, SliceClass,
    SliceKind, Trace, TrackId, TrackKind,
};

/// Where an event goes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Place {
    Thread(u32),
    Gpu(u32),
    Stream(u32, u32),
}

/// Args the model keeps in columns or payloads, so not repeated in the arg set.
const KERNEL_CONSUMED: &[&str] = &[
    "device",
    "stream",
    "correlation",
    "grid",
    "block",
    "registers per thread",
    "shared memory",
];
const COPY_CONSUMED: &[&str] = &["device", "stream", "correlation", "bytes"];
const OTHER_CONSUMED: &[&str] = &["correlation"];

/// Why events were left out, counted for one warning line each.
#[derive(Default)]
struct Skipped {
    malformed: usize,
    no_ts: usize,
    unplaced: usize,
    unknown_cats: BTreeMap<String, usize>,
}

pub fn import(path: &Path, json: &[u8]) -> Result<Trace> {
    let mut top = parse_top(path, json)?;
    let Some(parsed) = top.trace_events.take() else {
        return Err(not_a_trace(path, "no traceEvents"));
    };
    let events = parsed.events;
    let mut skipped = Skipped {
        malformed: parsed.malformed,
        ..Default::default()
    };
    let label = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let base_ns = top
        .base_time_ns
        .and_then(|r| ns_text_to_ns(r.get()))
        .unwrap_or(0);
    let mut b = Builder::new(&label, base_ns, &events);
    b.read_process(&top);
    b.read_devices(&top);
    b.create_tracks(&events);
    b.push_events(&events, &mut skipped);
    b.finish(skipped)
}

fn not_a_trace(path: &Path, why: &str) -> TraceError {
    TraceError::NotATrace {
        path: path.to_path_buf(),
        why: why.to_string(),
    }
}

fn parse_top<'a>(path: &Path, json: &'a [u8]) -> Result<Top<'a>> {
    let json = json.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(json);
    let Some(first) = json.iter().find(|b| !b.is_ascii_whitespace()) else {
        return Err(TraceError::Empty {
            path: path.to_path_buf(),
        });
    };
    if *first != b'{' {
        return Err(
            match serde_json::from_slice::<serde::de::IgnoredAny>(json) {
                Ok(_) => not_a_trace(path, "top level is not a JSON object"),
                Err(e) => TraceError::Json {
                    path: path.to_path_buf(),
                    why: e.to_string(),
                },
            },
        );
    }
    serde_json::from_slice::<Top>(json).map_err(|e| match e.classify() {
        serde_json::error::Category::Data => not_a_trace(path, &e.to_string()),
        _ => TraceError::Json {
            path: path.to_path_buf(),
            why: e.to_string(),
        },
    })
}

fn raw_text(r: Option<&RawValue>) -> Option<String> {
    let r = r?;
    match serde_json::from_str::<Value>(r.get()) {
        Ok(Value::String(s)) => Some(s),
        Ok(Value::Null) | Err(_) => None,
        Ok(v) => Some(v.to_string()),
    }
}

fn to_u32(n: i64) -> Option<u32> {
    u32::try_from(n).ok()
}

struct Builder {
    trace: Trace,
    label: String,
    base_ns: i64,
    host_pid: i64,
    process_names: HashMap<i64, String>,
    thread_names: HashMap<u32, String>,
    /// Text tids (rare) get ids from the top of the u32 range.
    text_tids: HashMap<String, u32>,
    /// Correlation id → host thread of the runtime call, to place
    /// stream-less syncs (context/device synchronize) on the calling thread.
    corr_thread: HashMap<u32, u32>,
    props: HashMap<u32, Device>,
    devices: BTreeMap<u32, u32>,
    tracks: HashMap<Place, TrackId>,
    counters: HashMap<(String, Option<u32>), TrackId>,
}

impl Builder {
    fn new(label: &str, base_ns: i64, events: &[Event]) -> Builder {
        let mut b = Builder {
            trace: Trace::new(),
            label: label.to_string(),
            base_ns,
            host_pid: 0,
            process_names: HashMap::new(),
            thread_names: HashMap::new(),
            text_tids: HashMap::new(),
            corr_thread: HashMap::new(),
            props: HashMap::new(),
            devices: BTreeMap::new(),
            tracks: HashMap::new(),
            counters: HashMap::new(),
        };
        b.host_pid = host_pid(events);
        for e in events.iter().filter(|e| e.ph() == "M") {
            let (Some(pid), Some(name)) = (
                e.pid.as_ref().and_then(Id::num),
                e.arg("name").and_then(ArgJson::as_str),
            ) else {
                continue;
            };
            match e.name() {
                "process_name" => {
                    b.process_names.insert(pid, name.to_string());
                }
                "thread_name" if pid == b.host_pid => {
                    if let Some(tid) = e.tid.as_ref() {
                        let tid = b.tid_of(tid);
                        b.thread_names.insert(tid, name.trim().to_string());
                    }
                }
                _ => {}
            }
        }
        for e in events
            .iter()
            .filter(|e| e.ph() == "X" && matches!(Cat::of(e.cat()), Cat::Runtime | Cat::Driver))
        {
            if let (Some(c), Some(tid)) = (correlation(e), e.tid.as_ref()) {
                if c != 0 {
                    let tid = b.tid_of(tid);
                    b.corr_thread.entry(c).or_insert(tid);
                }
            }
        }
        b
    }

    fn tid_of(&mut self, tid: &Id) -> u32 {
        match tid {
            // Linux tids fit u32; Kineto sometimes writes a negative
            // (truncated pthread id): keep its bits.
            Id::Num(n) => *n as u32,
            Id::Text(s) => {
                let next = u32::MAX - self.text_tids.len() as u32;
                *self.text_tids.entry(s.to_string()).or_insert(next)
            }
        }
    }

    fn read_process(&mut self, top: &Top) {
        let mut p = Process {
            pid: self.host_pid as u32,
            name: self
                .process_names
                .get(&self.host_pid)
                .cloned()
                .unwrap_or_default(),
            clock: ClockDomain::Realtime,
            ..Default::default()
        };
        p.metadata.push(("source_file".into(), self.label.clone()));
        p.metadata.push(("format".into(), "kineto".into()));
        if let Some(v) = raw_text(top.schema_version) {
            p.metadata.push(("schemaVersion".into(), v));
        }
        if let Some(v) = raw_text(top.trace_name) {
            p.metadata.push(("traceName".into(), v));
        }
        if let Some(v) = raw_text(top.base_time_ns) {
            p.metadata.push(("baseTimeNanoseconds".into(), v));
        }
        let dist = top
            .distributed_info
            .and_then(|r| serde_json::from_str::<Value>(r.get()).ok());
        if let Some(d) = dist.as_ref().filter(|d| d.is_object()) {
            let num = |k: &str| {
                d.get(k)
                    .and_then(Value::as_u64)
                    .and_then(|x| u32::try_from(x).ok())
            };
            p.rank = num("rank");
            p.world_size = num("world_size");
            for key in ["backend", "nccl_version", "pg_count"] {
                if let Some(v) = d.get(key).filter(|v| !v.is_null()) {
                    let text = v
                        .as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| v.to_string());
                    p.metadata.push((format!("distributed.{key}"), text));
                }
            }
            if let Some(s) = d.get("pg_config").and_then(pg_config_summary) {
                p.metadata.push(("distributed.pg_config".into(), s));
            }
        }
        self.trace.add_process(p);
    }

    fn read_devices(&mut self, top: &Top) {
        let Some(raw) = top.device_properties else {
            return;
        };
        match serde_json::from_str::<Value>(raw.get()) {
            Ok(v) => self.props = parse_device_properties(&v),
            Err(e) => self
                .trace
                .warnings
                .push(format!("{}: deviceProperties unreadable: {e}", self.label)),
        }
    }

    /// Where event `e` of category `cat` goes; `None` when it cannot be placed.
    fn place(&mut self, e: &Event, cat: Cat) -> Option<Place> {
        let pid = e.pid.as_ref().and_then(Id::num);
        let tid = e.tid.as_ref().and_then(Id::num);
        let arg = |k: &str| e.arg(k).and_then(ArgJson::as_i64);
        match cat {
            Cat::Kernel | Cat::Memcpy | Cat::Memset | Cat::GpuAnnotation => {
                let device = arg("device").or(pid).and_then(to_u32)?;
                let stream = arg("stream").or(tid).and_then(to_u32)?;
                Some(Place::Stream(device, stream))
            }
            Cat::Sync => {
                let stream = arg("stream").or(tid);
                let device = arg("device").or(pid).and_then(to_u32);
                if let (Some(d), Some(s)) = (device, stream.and_then(to_u32)) {
                    if pid != Some(self.host_pid) {
                        return Some(Place::Stream(d, s));
                    }
                }
                if let Some(t) = correlation(e)
                    .filter(|&c| c != 0)
                    .and_then(|c| self.corr_thread.get(&c))
                {
                    return Some(Place::Thread(*t));
                }
                if pid == Some(self.host_pid) {
                    return e.tid.as_ref().map(|t| Place::Thread(self.tid_of(t)));
                }
                device.map(Place::Gpu)
            }
            Cat::ProfilerSpan => None,
            _ if cat.is_host() || pid == Some(self.host_pid) => {
                e.tid.as_ref().map(|t| Place::Thread(self.tid_of(t)))
            }
            // Other GPU-side records (cuda_event, ...) that name their stream.
            _ => {
                let device = arg("device").and_then(to_u32)?;
                let stream = arg("stream").and_then(to_u32)?;
                Some(Place::Stream(device, stream))
            }
        }
    }

    fn create_tracks(&mut self, events: &[Event]) {
        let mut places = BTreeSet::new();
        for e in events.iter().filter(|e| e.ph() == "X") {
            let cat = Cat::of(e.cat());
            if let Some(p) = self.place(e, cat) {
                places.insert(p);
            }
        }
        let mut device_ids: BTreeSet<u32> = places
            .iter()
            .filter_map(|p| match p {
                Place::Gpu(d) | Place::Stream(d, _) => Some(*d),
                Place::Thread(_) => None,
            })
            .collect();
        for e in events.iter().filter(|e| is_memory_event(e)) {
            if let Some(d) = gpu_memory_device(e) {
                device_ids.insert(d);
            }
        }
        // Host threads first, the main thread (tid = pid) leading.
        let host = self.host_pid as u32;
        let mut threads: Vec<u32> = places
            .iter()
            .filter_map(|p| {
                if let Place::Thread(t) = p {
                    Some(*t)
                } else {
                    None
                }
            })
            .collect();
        threads.sort_by_key(|&t| (t != host, t));
        for t in threads {
            let name = self
                .thread_names
                .get(&t)
                .cloned()
                .unwrap_or_else(|| format!("thread {}", thread_label(t)));
            let id = self
                .trace
                .add_track(0, None, TrackKind::Thread { tid: t }, &name);
            self.tracks.insert(Place::Thread(t), id);
        }
        for ordinal in device_ids {
            let mut dev = self
                .props
                .get(&ordinal)
                .cloned()
                .unwrap_or_else(|| unknown_device(ordinal));
            dev.process = 0;
            let name = format!("GPU {ordinal} · {}", dev.name);
            let d = self.trace.add_device(dev);
            self.devices.insert(ordinal, d);
            let gpu = self
                .trace
                .add_track(0, None, TrackKind::Gpu { device: d }, &name);
            self.tracks.insert(Place::Gpu(ordinal), gpu);
            for p in places.iter() {
                if let Place::Stream(o, s) = *p {
                    if o == ordinal {
                        let id = self.trace.add_track(
                            0,
                            Some(gpu),
                            TrackKind::Stream {
                                device: d,
                                stream: s,
                            },
                            &format!("stream {s}"),
                        );
                        self.tracks.insert(Place::Stream(o, s), id);
                    }
                }
            }
        }
    }

    fn ts_ns(&self, r: Option<&RawValue>) -> Option<i64> {
        us_text_to_ns(r?.get())?.checked_add(self.base_ns)
    }

    fn push_events(&mut self, events: &[Event], skipped: &mut Skipped) {
        self.trace.reserve_slices(events.len());
        for e in events {
            match e.ph() {
                "X" => self.push_complete(e, skipped),
                "C" => self.push_counter(e, skipped),
                "i" | "I" if is_memory_event(e) => self.push_memory(e, skipped),
                // Metadata was read up front; flow events (ac2g, fwdbwd) are
                // rebuilt from correlation ids; other instants carry nothing
                // the analyses use.
                _ => {}
            }
        }
    }

    fn push_complete(&mut self, e: &Event, skipped: &mut Skipped) {
        let cat = Cat::of(e.cat());
        let Some(start_ns) = self.ts_ns(e.ts) else {
            skipped.no_ts += 1;
            return;
        };
        let dur_ns = e.dur.and_then(|r| us_text_to_ns(r.get())).unwrap_or(0);
        if cat == Cat::ProfilerSpan {
            let p = &mut self.trace.processes[0];
            if p.capture_start_ns.is_none() {
                p.capture_start_ns = Some(start_ns);
                p.capture_end_ns = Some(start_ns + dur_ns);
            }
            return;
        }
        let Some(place) = self.place(e, cat) else {
            if cat == Cat::Other {
                *skipped.unknown_cats.entry(e.cat().to_string()).or_default() += 1;
            } else {
                skipped.unplaced += 1;
            }
            return;
        };
        let Some(&track) = self.tracks.get(&place) else {
            skipped.unplaced += 1;
            return;
        };
        let name = e.name();
        let kind = cat.slice_kind(name);
        let name_id = self.trace.intern(name);
        let mut s = NewSlice::new(track, kind, name_id, start_ns, dur_ns);
        s.correlation = correlation(e).unwrap_or(0);
        let consumed = match kind {
            SliceKind::Kernel => {
                s.launch = Some(launch_config(e));
                KERNEL_CONSUMED
            }
            SliceKind::Memcpy | SliceKind::Memset => {
                let (copy_kind, pageable) = copy_kind_of(name);
                let bytes = e.arg("bytes").and_then(ArgJson::as_u64).unwrap_or(0);
                s.copy = Some(CopyInfo {
                    bytes,
                    kind: copy_kind,
                    pageable,
                });
                COPY_CONSUMED
            }
            _ => OTHER_CONSUMED,
        };
        if kind.is_gpu_activity() {
            s.class = SliceClass::of_gpu_name(kind, name);
        }
        s.args = self.arg_set(e, consumed);
        self.trace.push_slice(s);
    }

    fn arg_set(&mut self, e: &Event, consumed: &[&str]) -> ArgSet {
        let Some(args) = e.args.as_ref() else {
            return Vec::new();
        };
        let mut out = Vec::with_capacity(args.0.len());
        for (k, v) in &args.0 {
            if consumed.contains(&k.as_str()) {
                continue;
            }
            let value = match v {
                ArgJson::Int(x) => ArgValue::Int(*x),
                ArgJson::UInt(x) => ArgValue::UInt(*x),
                ArgJson::Double(x) => ArgValue::Double(*x),
                ArgJson::Bool(x) => ArgValue::Bool(*x),
                ArgJson::Str(s) => ArgValue::Str(self.trace.intern(s)),
                ArgJson::Json(j) => ArgValue::Str(self.trace.intern(&j.to_string())),
                ArgJson::Null => continue,
            };
            out.push((self.trace.intern(k.as_str()), value));
        }
        out
    }

    fn counter_track(&mut self, name: String, ordinal: Option<u32>) -> TrackId {
        if let Some(&t) = self.counters.get(&(name.clone(), ordinal)) {
            return t;
        }
        let device = ordinal.and_then(|o| self.devices.get(&o).copied());
        let parent = ordinal.and_then(|o| self.tracks.get(&Place::Gpu(o)).copied());
        let t = self
            .trace
            .add_track(0, parent, TrackKind::Counter { device }, &name);
        self.counters.insert((name, ordinal), t);
        t
    }

    /// Chrome counter events: one series per (event name, arg key).
    fn push_counter(&mut self, e: &Event, skipped: &mut Skipped) {
        let Some(ts) = self.ts_ns(e.ts) else {
            skipped.no_ts += 1;
            return;
        };
        let Some(args) = e.args.as_ref() else { return };
        let single = args.0.len() == 1;
        let series: Vec<(String, f64)> = args
            .0
            .iter()
            .filter_map(|(k, v)| {
                let name = if single {
                    e.name().to_string()
                } else {
                    format!("{} {}", e.name(), k.as_str())
                };
                v.as_f64().map(|x| (name, x))
            })
            .collect();
        for (name, value) in series {
            let t = self.counter_track(name, None);
            self.trace.push_counter(t, ts, value);
        }
    }

    /// "[memory]" instants (profile_memory=True): allocator totals after each
    /// allocation or free, as counters per device.
    fn push_memory(&mut self, e: &Event, skipped: &mut Skipped) {
        let Some(ts) = self.ts_ns(e.ts) else {
            skipped.no_ts += 1;
            return;
        };
        let ordinal = gpu_memory_device(e);
        let who = match ordinal {
            Some(o) => format!("GPU {o}"),
            None => "CPU".to_string(),
        };
        for (key, what) in [
            ("Total Allocated", "allocated"),
            ("Total Reserved", "reserved"),
        ] {
            if let Some(v) = e.arg(key).and_then(ArgJson::as_f64) {
                let t = self.counter_track(format!("{who} memory {what} (bytes)"), ordinal);
                self.trace.push_counter(t, ts, v);
            }
        }
    }

    fn finish(mut self, skipped: Skipped) -> Result<Trace> {
        let l = &self.label;
        let w = &mut self.trace.warnings;
        if skipped.malformed > 0 {
            w.push(format!(
                "{l}: {} malformed events skipped",
                skipped.malformed
            ));
        }
        if skipped.no_ts > 0 {
            w.push(format!(
                "{l}: {} events without a valid ts skipped",
                skipped.no_ts
            ));
        }
        if skipped.unplaced > 0 {
            w.push(format!(
                "{l}: {} events without a device/stream or thread skipped",
                skipped.unplaced
            ));
        }
        if !skipped.unknown_cats.is_empty() {
            let cats: Vec<String> = skipped
                .unknown_cats
                .iter()
                .map(|(c, n)| format!("{c} ({n})"))
                .collect();
            w.push(format!(
                "{l}: events of unknown categories off the host process skipped: {}",
                cats.join(", ")
            ));
        }
        self.trace.link_flows_by_correlation();
        self.trace.sort_slices();
        Ok(self.trace)
    }
}

/// A tid as Kineto wrote it: tids above i32::MAX came from negative numbers.
fn thread_label(t: u32) -> String {
    (t as i32).to_string()
}

/// The CUDA correlation id, when present and within u32.
fn correlation(e: &Event) -> Option<u32> {
    e.arg("correlation")
        .and_then(ArgJson::as_u64)
        .and_then(|c| u32::try_from(c).ok())
}

/// The host process: the pid most host-side events carry (GPU rows use the
/// device ordinal as pid); ties go to the smaller pid.
fn host_pid(events: &[Event]) -> i64 {
    let mut counts: HashMap<i64, usize> = HashMap::new();
    for e in events
        .iter()
        .filter(|e| e.ph() == "X" && Cat::of(e.cat()).is_host())
    {
        if let Some(p) = e.pid.as_ref().and_then(Id::num) {
            *counts.entry(p).or_default() += 1;
        }
    }
    if let Some((&p, _)) = counts
        .iter()
        .max_by_key(|(p, n)| (**n, std::cmp::Reverse(**p)))
    {
        return p;
    }
    events
        .iter()
        .find(|e| {
            e.name() == "process_labels" && e.arg("labels").and_then(ArgJson::as_str) == Some("CPU")
        })
        .and_then(|e| e.pid.as_ref().and_then(Id::num))
        .unwrap_or(0)
}

fn launch_config(e: &Event) -> LaunchConfig {
    let u32_arg = |k: &str| {
        e.arg(k)
            .and_then(ArgJson::as_u64)
            .and_then(|x| u32::try_from(x).ok())
            .unwrap_or(0)
    };
    LaunchConfig {
        grid: e.arg("grid").and_then(ArgJson::as_dim3).unwrap_or([0; 3]),
        block: e.arg("block").and_then(ArgJson::as_dim3).unwrap_or([0; 3]),
        registers_per_thread: u32_arg("registers per thread"),
        // Kineto's "shared memory" is CUPTI's static + dynamic shared memory
        // per block; the split is not recorded, so the total sits here.
        static_smem_bytes: u32_arg("shared memory"),
        dynamic_smem_bytes: 0,
    }
}

fn is_memory_event(e: &Event) -> bool {
    matches!(e.ph(), "i" | "I") && e.name() == "[memory]"
}

/// The CUDA ordinal of a "[memory]" event on a GPU ("Device Type" 1 is CUDA).
fn gpu_memory_device(e: &Event) -> Option<u32> {
    if e.arg("Device Type").and_then(ArgJson::as_i64) != Some(1) {
        return None;
    }
    e.arg("Device Id")
        .and_then(ArgJson::as_i64)
        .and_then(to_u32)
}

/// "0 (default_pg): cuda:nccl, size 2, ranks [0, 1]; ..." for at most 16 groups.
fn pg_config_summary(v: &Value) -> Option<String> {
    let list = v.as_array()?;
    const SHOWN: usize = 16;
    let mut parts: Vec<String> = list
        .iter()
        .take(SHOWN)
        .map(|pg| {
            let s = |k: &str| {
                pg.get(k).map(|v| {
                    v.as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| v.to_string())
                })
            };
            let mut text = s("pg_name").unwrap_or_default();
            if let Some(d) = s("pg_desc") {
                text.push_str(&format!(" ({d})"));
            }
            let mut fields = Vec::new();
            if let Some(b) = s("backend_config") {
                fields.push(b);
            }
            if let Some(n) = s("pg_size") {
                fields.push(format!("size {n}"));
            }
            if let Some(r) = s("ranks") {
                fields.push(format!("ranks {r}"));
            }
            if !fields.is_empty() {
                text.push_str(": ");
                text.push_str(&fields.join(", "));
            }
            text
        })
        .collect();
    if list.len() > SHOWN {
        parts.push(format!("and {} more", list.len() - SHOWN));
    }
    Some(parts.join("; "))
}
