//! Kineto events → [`Trace`]: one process per file (one rank).
//!
//! Events are mapped as the parser delivers them (see `json::parse_document`),
//! so memory holds the JSON text and the growing trace, never a list of all
//! events. What can only be known at the end is settled in `finish`: the
//! time base (`baseTimeNanoseconds` follows the events), which pid is the
//! host process, device properties, thread names, the few events whose
//! placement depends on those, and the display order of tracks.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde_json::value::RawValue;
use serde_json::Value;

use super::category::{copy_kind_of, Cat};
use super::devices::{parse_device_properties, unknown_device};
use super::json::{parse_document, ArgJson, Event, EventSink, Id, TopInfo};
use super::order::reorder;
use super::time::{ns_text_to_ns, us_text_to_ns};
use crate::error::{Result, TraceError};
use crate::model::{
    ArgSet, ArgValue, ClockDomain, CopyInfo, LaunchConfig, NewSlice, Process, SliceClass,
    SliceKind, Trace, TrackId, TrackKind,
};

/// Where an event goes: a host thread, a GPU's own track, or a stream
/// (devices and streams by CUDA ordinal and stream id).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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
                Err(e) => json_error(path, e),
            },
        );
    }
    let label = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut b = Builder::new(label);
    let info = parse_document(json, &mut b).map_err(|e| match e.classify() {
        serde_json::error::Category::Data => not_a_trace(path, &e.to_string()),
        _ => json_error(path, e),
    })?;
    if !info.has_events {
        return Err(not_a_trace(path, "no traceEvents"));
    }
    Ok(b.finish(&info))
}

fn not_a_trace(path: &Path, why: &str) -> TraceError {
    TraceError::NotATrace {
        path: path.to_path_buf(),
        why: why.to_string(),
    }
}

fn json_error(path: &Path, e: serde_json::Error) -> TraceError {
    TraceError::Json {
        path: path.to_path_buf(),
        why: e.to_string(),
    }
}

struct Builder<'de> {
    trace: Trace,
    label: String,
    /// Host-side events per pid: the most frequent is the host process.
    host_events: HashMap<i64, usize>,
    /// The pid Kineto labels "CPU", for traces without host events.
    cpu_labelled: Option<i64>,
    process_names: HashMap<i64, String>,
    thread_names: HashMap<(i64, u32), String>,
    /// Text tids (rare) get ids from the top of the u32 range.
    text_tids: HashMap<String, u32>,
    /// Correlation id → host thread of the runtime call, to place
    /// stream-less syncs (context/device synchronize) on the calling thread.
    corr_thread: HashMap<u32, u32>,
    /// CUDA ordinal → model device index.
    devices: HashMap<u32, u32>,
    tracks: HashMap<Place, TrackId>,
    counters: HashMap<(String, Option<u32>), TrackId>,
    /// Events whose track depends on the host pid or on correlations seen
    /// later (stream-less syncs, unknown categories): few, placed at the end.
    deferred: Vec<Event<'de>>,
    /// The profiler's span, relative to the time base.
    capture: Option<(i64, i64)>,
    skipped: Skipped,
}

impl<'de> EventSink<'de> for Builder<'de> {
    fn event(&mut self, e: Event<'de>) {
        match e.ph() {
            "X" => self.complete(e),
            "M" => self.metadata(&e),
            "C" => self.counter(&e),
            "i" | "I" if is_memory_event(&e) => self.memory(&e),
            // Flow events (ac2g, fwdbwd) are rebuilt from correlation ids;
            // other instants carry nothing the analyses use.
            _ => {}
        }
    }

    fn malformed(&mut self) {
        self.skipped.malformed += 1;
    }
}

impl<'de> Builder<'de> {
    fn new(label: String) -> Builder<'de> {
        let mut trace = Trace::new();
        trace.add_process(Process {
            clock: ClockDomain::Realtime,
            ..Default::default()
        });
        Builder {
            trace,
            label,
            host_events: HashMap::new(),
            cpu_labelled: None,
            process_names: HashMap::new(),
            thread_names: HashMap::new(),
            text_tids: HashMap::new(),
            corr_thread: HashMap::new(),
            devices: HashMap::new(),
            tracks: HashMap::new(),
            counters: HashMap::new(),
            deferred: Vec::new(),
            capture: None,
            skipped: Skipped::default(),
        }
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

    fn metadata(&mut self, e: &Event) {
        let Some(pid) = e.pid.as_ref().and_then(Id::num) else {
            return;
        };
        match e.name() {
            "process_name" => {
                if let Some(n) = e.arg("name").and_then(ArgJson::as_str) {
                    self.process_names.insert(pid, n.to_string());
                }
            }
            "process_labels" if e.arg("labels").and_then(ArgJson::as_str) == Some("CPU") => {
                self.cpu_labelled.get_or_insert(pid);
            }
            "thread_name" => {
                if let (Some(n), Some(tid)) =
                    (e.arg("name").and_then(ArgJson::as_str), e.tid.as_ref())
                {
                    let name = n.trim().to_string();
                    let tid = self.tid_of(tid);
                    self.thread_names.insert((pid, tid), name);
                }
            }
            _ => {}
        }
    }

    fn rel_ns(r: Option<&RawValue>) -> Option<i64> {
        us_text_to_ns(r?.get())
    }

    fn complete(&mut self, e: Event<'de>) {
        let cat = Cat::of(e.cat());
        let pid = e.pid.as_ref().and_then(Id::num);
        if cat.is_host() {
            if let Some(p) = pid {
                *self.host_events.entry(p).or_default() += 1;
            }
        }
        if matches!(cat, Cat::Runtime | Cat::Driver) {
            if let (Some(c), Some(tid)) = (correlation(&e).filter(|&c| c != 0), e.tid.as_ref()) {
                let tid = self.tid_of(tid);
                self.corr_thread.entry(c).or_insert(tid);
            }
        }
        let Some(start) = Self::rel_ns(e.ts) else {
            self.skipped.no_ts += 1;
            return;
        };
        if cat == Cat::ProfilerSpan {
            let dur = Self::rel_ns(e.dur).unwrap_or(0);
            self.capture
                .get_or_insert((start, start.saturating_add(dur)));
            return;
        }
        let arg = |k: &str| e.arg(k).and_then(ArgJson::as_i64);
        let tid = e.tid.as_ref().and_then(Id::num);
        let place = match cat {
            Cat::Kernel | Cat::Memcpy | Cat::Memset | Cat::GpuAnnotation => {
                match (
                    arg("device").or(pid).and_then(to_u32),
                    arg("stream").or(tid).and_then(to_u32),
                ) {
                    (Some(d), Some(s)) => Place::Stream(d, s),
                    _ => {
                        self.skipped.unplaced += 1;
                        return;
                    }
                }
            }
            _ if cat.is_host() => match e.tid.as_ref() {
                Some(t) => Place::Thread(self.tid_of(t)),
                None => {
                    self.skipped.unplaced += 1;
                    return;
                }
            },
            // Syncs with a stream, and GPU-side records of other categories
            // (cuda_event, ...) that name their stream, go on that stream.
            _ => {
                // (cuda_sync rows also use pid = device, tid = stream, but
                // args are the unambiguous source.)
                let stream = arg("stream");
                let device = if cat == Cat::Sync {
                    arg("device").or(pid)
                } else {
                    arg("device")
                };
                match (device.and_then(to_u32), stream.and_then(to_u32)) {
                    (Some(d), Some(s)) => Place::Stream(d, s),
                    _ => {
                        self.deferred.push(e);
                        return;
                    }
                }
            }
        };
        self.push_slice(&e, cat, place, start);
    }

    /// Places a deferred event once the host pid and all correlations are known.
    fn place_deferred(&mut self, e: &Event, host_pid: i64) -> Option<Place> {
        let pid = e.pid.as_ref().and_then(Id::num);
        let on_host_thread = |b: &mut Self| e.tid.as_ref().map(|t| Place::Thread(b.tid_of(t)));
        if Cat::of(e.cat()) == Cat::Sync {
            if let Some(&t) = correlation(e)
                .filter(|&c| c != 0)
                .and_then(|c| self.corr_thread.get(&c))
            {
                return Some(Place::Thread(t));
            }
            if pid == Some(host_pid) {
                return on_host_thread(self);
            }
            let device = e
                .arg("device")
                .and_then(ArgJson::as_i64)
                .or(pid)
                .and_then(to_u32);
            return device.map(Place::Gpu);
        }
        if pid == Some(host_pid) {
            return on_host_thread(self);
        }
        *self
            .skipped
            .unknown_cats
            .entry(e.cat().to_string())
            .or_default() += 1;
        None
    }

    fn device(&mut self, ordinal: u32) -> u32 {
        if let Some(&d) = self.devices.get(&ordinal) {
            return d;
        }
        let d = self.trace.add_device(unknown_device(ordinal));
        self.devices.insert(ordinal, d);
        d
    }

    /// The track for `place`, created on first use (named and ordered in `finish`).
    fn track(&mut self, place: Place) -> TrackId {
        if let Some(&t) = self.tracks.get(&place) {
            return t;
        }
        let t = match place {
            Place::Thread(tid) => self.trace.add_track(0, None, TrackKind::Thread { tid }, ""),
            Place::Gpu(o) => {
                let device = self.device(o);
                self.trace.add_track(0, None, TrackKind::Gpu { device }, "")
            }
            Place::Stream(o, stream) => {
                let gpu = self.track(Place::Gpu(o));
                let device = self.device(o);
                let kind = TrackKind::Stream { device, stream };
                self.trace
                    .add_track(0, Some(gpu), kind, &format!("stream {stream}"))
            }
        };
        self.tracks.insert(place, t);
        t
    }

    fn push_slice(&mut self, e: &Event, cat: Cat, place: Place, start_rel_ns: i64) {
        let track = self.track(place);
        let dur_ns = Self::rel_ns(e.dur).unwrap_or(0);
        let name = e.name();
        let kind = cat.slice_kind(name);
        let name_id = self.trace.intern(name);
        let mut s = NewSlice::new(track, kind, name_id, start_rel_ns, dur_ns);
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
        let parent = ordinal.map(|o| self.track(Place::Gpu(o)));
        let device = ordinal.map(|o| self.device(o));
        let t = self
            .trace
            .add_track(0, parent, TrackKind::Counter { device }, &name);
        self.counters.insert((name, ordinal), t);
        t
    }

    /// Chrome counter events: one series per (event name, arg key).
    fn counter(&mut self, e: &Event) {
        let Some(ts) = Self::rel_ns(e.ts) else {
            self.skipped.no_ts += 1;
            return;
        };
        let Some(args) = e.args.as_ref() else { return };
        let single = args.0.len() == 1;
        for (k, v) in &args.0 {
            let Some(value) = v.as_f64() else { continue };
            let name = if single {
                e.name().to_string()
            } else {
                format!("{} {}", e.name(), k.as_str())
            };
            let t = self.counter_track(name, None);
            self.trace.push_counter(t, ts, value);
        }
    }

    /// "[memory]" instants (profile_memory=True): allocator totals after each
    /// allocation or free, as counters per device.
    fn memory(&mut self, e: &Event) {
        let Some(ts) = Self::rel_ns(e.ts) else {
            self.skipped.no_ts += 1;
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

    /// The host process: the pid most host-side events carry (GPU rows use
    /// the device ordinal as pid), ties to the smaller pid; else the pid
    /// labelled "CPU".
    fn host_pid(&self) -> i64 {
        self.host_events
            .iter()
            .max_by_key(|(p, n)| (**n, std::cmp::Reverse(**p)))
            .map(|(p, _)| *p)
            .or(self.cpu_labelled)
            .unwrap_or(0)
    }

    fn finish(mut self, info: &TopInfo) -> Trace {
        let host_pid = self.host_pid();
        for e in std::mem::take(&mut self.deferred) {
            if let Some(place) = self.place_deferred(&e, host_pid) {
                let start = Self::rel_ns(e.ts).unwrap_or(0);
                self.push_slice(&e, Cat::of(e.cat()), place, start);
            }
        }
        self.shift_to_epoch(info);
        self.fill_process(info, host_pid);
        self.fill_devices(info);
        self.name_tracks(host_pid);
        reorder(&mut self.trace, host_pid as u32);
        self.warn();
        self.trace.link_flows_by_correlation();
        self.trace.sort_slices();
        self.trace
    }

    /// Newer traces give ts relative to `baseTimeNanoseconds`; older ones
    /// give epoch µs and no base. A base with ts that already look like
    /// epoch times (at least half the base) is not added twice.
    fn shift_to_epoch(&mut self, info: &TopInfo) {
        let Some(base) = info.base_time_ns.and_then(|r| ns_text_to_ns(r.get())) else {
            return;
        };
        let first = self
            .trace
            .slices
            .start_ns
            .iter()
            .min()
            .copied()
            .unwrap_or(0);
        if base <= 0 || first >= base / 2 {
            return;
        }
        for t in self
            .trace
            .slices
            .start_ns
            .iter_mut()
            .chain(self.trace.counters.ts_ns.iter_mut())
        {
            *t = t.saturating_add(base);
        }
        if let Some((s, e)) = self.capture.as_mut() {
            *s = s.saturating_add(base);
            *e = e.saturating_add(base);
        }
    }

    fn fill_process(&mut self, info: &TopInfo, host_pid: i64) {
        let p = &mut self.trace.processes[0];
        p.pid = host_pid as u32;
        p.name = self
            .process_names
            .get(&host_pid)
            .cloned()
            .unwrap_or_default();
        p.capture_start_ns = self.capture.map(|c| c.0);
        p.capture_end_ns = self.capture.map(|c| c.1);
        p.metadata.push(("source_file".into(), self.label.clone()));
        p.metadata.push(("format".into(), "kineto".into()));
        for (key, raw) in [
            ("schemaVersion", info.schema_version),
            ("traceName", info.trace_name),
            ("baseTimeNanoseconds", info.base_time_ns),
        ] {
            if let Some(v) = raw_text(raw) {
                p.metadata.push((key.into(), v));
            }
        }
        let dist = info
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
    }

    /// Only the devices this rank's events use become devices (Kineto lists
    /// every visible GPU); their properties come from `deviceProperties`.
    fn fill_devices(&mut self, info: &TopInfo) {
        let Some(raw) = info.device_properties else {
            return;
        };
        let props = match serde_json::from_str::<Value>(raw.get()) {
            Ok(v) => parse_device_properties(&v),
            Err(e) => {
                self.trace
                    .warnings
                    .push(format!("{}: deviceProperties unreadable: {e}", self.label));
                return;
            }
        };
        for (ordinal, &d) in &self.devices {
            if let Some(p) = props.get(ordinal) {
                self.trace.devices[d as usize] = p.clone();
            }
        }
    }

    fn name_tracks(&mut self, host_pid: i64) {
        for i in 0..self.trace.tracks.len() {
            let name = match self.trace.tracks[i].kind {
                TrackKind::Thread { tid } => match self.thread_names.get(&(host_pid, tid)) {
                    Some(n) => n.clone(),
                    None => match self.text_tids.iter().find(|(_, &t)| t == tid) {
                        Some((text, _)) => text.clone(),
                        None => format!("thread {}", tid as i32),
                    },
                },
                TrackKind::Gpu { device } => {
                    let d = &self.trace.devices[device as usize];
                    format!("GPU {} · {}", d.ordinal, d.name)
                }
                _ => continue,
            };
            self.trace.tracks[i].name = self.trace.intern(&name);
        }
    }

    fn warn(&mut self) {
        let l = &self.label;
        let s = &self.skipped;
        let w = &mut self.trace.warnings;
        if s.malformed > 0 {
            w.push(format!("{l}: {} malformed events skipped", s.malformed));
        }
        if s.no_ts > 0 {
            w.push(format!(
                "{l}: {} events without a valid ts skipped",
                s.no_ts
            ));
        }
        if s.unplaced > 0 {
            w.push(format!(
                "{l}: {} events without a device/stream or thread skipped",
                s.unplaced
            ));
        }
        if !s.unknown_cats.is_empty() {
            let cats: Vec<String> = s
                .unknown_cats
                .iter()
                .map(|(c, n)| format!("{c} ({n})"))
                .collect();
            w.push(format!(
                "{l}: events of unknown categories off the host process skipped: {}",
                cats.join(", ")
            ));
        }
    }
}

fn to_u32(n: i64) -> Option<u32> {
    u32::try_from(n).ok()
}

/// The CUDA correlation id, when present and within u32.
fn correlation(e: &Event) -> Option<u32> {
    e.arg("correlation")
        .and_then(ArgJson::as_u64)
        .and_then(|c| u32::try_from(c).ok())
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

fn raw_text(r: Option<&RawValue>) -> Option<String> {
    let r = r?;
    match serde_json::from_str::<Value>(r.get()) {
        Ok(Value::String(s)) => Some(s),
        Ok(Value::Null) | Err(_) => None,
        Ok(v) => Some(v.to_string()),
    }
}
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
