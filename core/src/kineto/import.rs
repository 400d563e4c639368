//! Kineto events → [`Trace`]: one process per file (one rank).
//!
//! Events are mapped as the parser delivers them (the fast reader,
//! `document::scan`, or, when it declines, serde_json's one-pass parser,
//! `document::parse_document_partial`), so memory holds the JSON text (for
//! a large gzip file, a few MiB of it at a time: see `split`) and the growing
//! trace, never a list of all events. What can only be known at the end is
//! settled in `finish`: the time base (`baseTimeNanoseconds` follows the
//! events), which pid is the host process, device properties, thread
//! names, the few events whose placement depends on those, and the display
//! order of tracks.

mod finish;
mod intern;

use crate::diagnostic::{Diagnostic, Kind};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::mpsc::{Receiver, Sender};

use rustc_hash::FxHashMap as HashMap;

use super::category::{copy_kind_of, Cat};
use super::devices::unknown_device;
use super::document::{parse_document_fast, parse_document_partial, EventSink, TopInfo};
use super::event::Event;
use super::json::{ArgJson, Id};
use super::time::us_text_to_ns;
use super::KeepArgs;
use crate::error::{Result, TraceError};
use crate::model::{
    ArgValue, ClockDomain, CopyInfo, DeviceId, NewSlice, Process, ProcessId, SliceClass, SliceKind,
    StrId, Trace, TraceBuilder, TrackId, TrackKind,
};

/// Where an event goes: a host thread, a GPU's own track, or a stream
/// (devices and streams by CUDA ordinal and stream id).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Place {
    Thread(u32),
    Gpu(u32),
    Stream(u32, u32),
}

/// Args the model keeps in columns or payloads, so not repeated in the arg
/// set; with [`OTHER_CONSUMED`], every argument of a complete event the
/// import itself reads (what [`KeepArgs::Analysis`] must still read).
pub(super) const KERNEL_CONSUMED: &[&str] = &[
    "device",
    "stream",
    "correlation",
    "grid",
    "block",
    "registers per thread",
    "shared memory",
];
pub(super) const COPY_CONSUMED: &[&str] = &["device", "stream", "correlation", "bytes"];
pub(super) const OTHER_CONSUMED: &[&str] = &["correlation"];

/// Why events were left out, counted for one warning line each.
#[derive(Default)]
struct Skipped {
    malformed: usize,
    no_ts: usize,
    /// Complete events whose dur is missing, negative, not a number or
    /// beyond ±2^63 ns: loaded with duration 0, counted.
    bad_dur: usize,
    unplaced: usize,
    unknown_cats: BTreeMap<String, usize>,
}

/// Imports a whole document, every argument kept.
#[cfg(test)]
pub fn import(path: &Path, json: &[u8]) -> Result<Trace> {
    import_keeping(path, json, KeepArgs::All)
}

/// Imports a whole document, keeping the arguments `keep` says.
pub fn import_keeping(path: &Path, json: &[u8], keep: KeepArgs) -> Result<Trace> {
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
    let new_builder = || {
        let mut b = Builder::new(path, keep);
        b.trace.reserve_slices(json.len() / BYTES_PER_SLICE);
        b
    };
    let mut b = new_builder();
    let (result, info) = match parse_document_fast(json, &mut b) {
        Some(info) => (Ok(()), info),
        // Something the fast reader leaves to serde_json (or an error):
        // read again by the one-pass parser, so errors are its own.
        None => {
            b = new_builder();
            parse_document_partial(json, &mut b)
        }
    };
    match result {
        Ok(()) => {}
        // Cut short inside its events (a truncated file or gzip stream):
        // what was read loads, with a warning saying where it stopped.
        Err(e) if e.classify() == serde_json::error::Category::Eof && b.events > 0 => {
            let events = b.events;
            let mut t = b.finish(&info);
            t.add_diagnostics([
                Diagnostic::new(
                    Kind::Truncated,
                    1,
                    format!(
                        "JSON ends early (line {}, column {}): loaded the {events} events before the cut",
                        e.line(),
                        e.column()
                    ),
                )
                .in_file(path.display()),
            ]);
            return Ok(t);
        }
        Err(e) => {
            return Err(match e.classify() {
                serde_json::error::Category::Data => not_a_trace(path, &e.to_string()),
                _ => json_error(path, e),
            })
        }
    }
    if !info.has_events {
        return Err(not_a_trace(path, "no traceEvents"));
    }
    Ok(b.finish(&info))
}

fn label_of(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A document read piece by piece (see `split`): each piece is a document
/// of its own (`{"traceEvents":[` before the events of all but the first,
/// `]}` after those of all but the last), cut between two events.
pub(super) struct Pieces {
    builder: Builder,
    info: TopInfo,
}

impl Pieces {
    /// Ready for the pieces of a document of about `total_bytes`.
    pub(super) fn new(path: &Path, total_bytes: usize, keep: KeepArgs) -> Pieces {
        let mut builder = Builder::new(path, keep);
        builder.trace.reserve_slices(total_bytes / BYTES_PER_SLICE);
        Pieces {
            builder,
            info: TopInfo::default(),
        }
    }

    /// Parses `json` and maps its events, after those of the pieces before.
    /// `false` unless it reads as a document that ends inside `traceEvents`
    /// (any document, for the last piece), which proves the cut before it
    /// sat between two events (the caller then imports the whole text in
    /// one pass, so any error is the one-pass import's).
    pub(super) fn piece(&mut self, json: &[u8], first: bool, last: bool) -> bool {
        let json = if first {
            let json = json.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(json);
            if json.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
                return false;
            }
            json
        } else {
            json
        };
        match parse_document_fast(json, &mut self.builder) {
            Some(info) => self.then(info, 0, last),
            None => false,
        }
    }

    /// Maps events of a piece parsed on another thread, in file order.
    pub(super) fn map_events(&mut self, events: &[Event]) {
        for e in events {
            self.builder.map(e);
        }
    }

    /// Closes a piece parsed on another thread (see [`Pieces::piece`]).
    pub(super) fn parsed(&mut self, end: ParsedEnd, last: bool) -> bool {
        self.then(end.info, end.malformed, last)
    }

    fn then(&mut self, info: TopInfo, malformed: usize, last: bool) -> bool {
        if !(last || info.ends_in_events) {
            return false;
        }
        self.builder.skipped.malformed += malformed;
        self.info = std::mem::take(&mut self.info).then(info);
        true
    }

    /// The trace, once the last piece is read.
    pub(super) fn finish(self) -> Trace {
        self.builder.finish(&self.info)
    }
}

/// Typical bytes of Kineto JSON per mapped slice (about 440 on HTA's
/// traces), to size the slice columns once instead of growing them.
const BYTES_PER_SLICE: usize = 400;

/// Receives a piece of a document while it is parsed on another thread:
/// the events the importer maps, in file order, in batches sent to the
/// thread that maps them.
struct RestSink<'d, 'r> {
    to_mapper: Sender<Vec<Event<'d>>>,
    /// Batches the mapper is done with, freed (and reused) on this thread:
    /// freeing another thread's allocations contends for its malloc arena.
    spent: &'r Receiver<Vec<Event<'d>>>,
    batch: Vec<Event<'d>>,
    malformed: usize,
    /// The mapper hung up (the first part failed): events are dropped.
    abandoned: bool,
    keep: KeepArgs,
}

/// Events per batch sent to the mapping thread: large enough that sending
/// costs nothing, small enough that mapping follows parsing closely.
const REST_BATCH: usize = 1024;

impl<'d> EventSink<'d> for RestSink<'d, '_> {
    fn event(&mut self, e: Event<'d>) {
        if self.abandoned || !is_mapped(&e) {
            return;
        }
        self.batch.push(e);
        if self.batch.len() == REST_BATCH {
            self.send();
        }
    }

    fn malformed(&mut self) {
        self.malformed += 1;
    }

    fn keep_args(&self) -> KeepArgs {
        self.keep
    }
}

impl RestSink<'_, '_> {
    fn send(&mut self) {
        let next = match self.spent.try_recv() {
            Ok(mut spent) => {
                spent.clear();
                spent
            }
            Err(_) => Vec::with_capacity(REST_BATCH),
        };
        let batch = std::mem::replace(&mut self.batch, next);
        self.abandoned |= self.to_mapper.send(batch).is_err();
        // Free the rest of what came back while the mapper keeps up.
        while let Ok(spent) = self.spent.try_recv() {
            drop(spent);
        }
    }
}

/// What a piece parsed on another thread tells besides its events.
pub(super) struct ParsedEnd {
    info: TopInfo,
    malformed: usize,
}

/// Parses `json`, a piece (see [`Pieces`]) other than the first, sending
/// its events to `to_mapper` in batches that come back on `spent`; `None`
/// when it does not parse.
pub(super) fn parse_piece<'d>(
    json: &'d [u8],
    to_mapper: Sender<Vec<Event<'d>>>,
    spent: &Receiver<Vec<Event<'d>>>,
    keep: KeepArgs,
) -> Option<ParsedEnd> {
    let mut sink = RestSink {
        to_mapper,
        spent,
        batch: Vec::with_capacity(REST_BATCH),
        malformed: 0,
        abandoned: false,
        keep,
    };
    let info = parse_document_fast(json, &mut sink)?;
    sink.send();
    Some(ParsedEnd {
        info,
        malformed: sink.malformed,
    })
}

/// The events `Builder::event` maps (the others it ignores), so the rest of
/// a cut document keeps only these.
fn is_mapped(e: &Event) -> bool {
    matches!(e.ph(), "X" | "M" | "C") || e.is_memory()
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

/// The one process of an import.
const HOST: ProcessId = ProcessId::from_index(0);

struct Builder {
    trace: TraceBuilder,
    /// The file's name, kept in the process metadata (`source_file`).
    label: String,
    /// The file as the user gave it, named by the diagnostics.
    file: String,
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
    devices: HashMap<u32, DeviceId>,
    tracks: HashMap<Place, TrackId>,
    counters: HashMap<(String, Option<u32>), TrackId>,
    /// Allocator counter tracks by (device, which total), so the tens of
    /// thousands of "[memory]" events do not format their names.
    memory_tracks: HashMap<(Option<u32>, usize), TrackId>,
    /// Events whose track depends on the host pid or on correlations seen
    /// later (stream-less syncs, unknown categories): few, placed at the end.
    deferred: Vec<Event<'static>>,
    /// The profiler's span, relative to the time base.
    capture: Option<(i64, i64)>,
    skipped: Skipped,
    /// Events received from the parser.
    events: usize,
    /// The arguments of the slice being pushed (one buffer for all).
    args: Vec<(StrId, ArgValue)>,
    arg_keys: intern::ArgKeys,
    names: intern::Names,
    keep: KeepArgs,
}

impl<'de> EventSink<'de> for Builder {
    fn event(&mut self, e: Event<'de>) {
        self.events += 1;
        self.map(&e);
    }

    fn malformed(&mut self) {
        self.skipped.malformed += 1;
    }

    fn keep_args(&self) -> KeepArgs {
        self.keep
    }
}

impl Builder {
    /// Maps one event (by reference, so a batch from another thread is
    /// freed by that thread, not here).
    fn map(&mut self, e: &Event) {
        match e.ph() {
            "X" => self.complete(e),
            "M" => self.metadata(e),
            "C" => self.counter(e),
            "i" | "I" if e.is_memory() => self.memory(e),
            // Flow events (ac2g, fwdbwd) are rebuilt from correlation ids;
            // other instants carry nothing the analyses use.
            _ => {}
        }
    }

    fn new(path: &Path, keep: KeepArgs) -> Builder {
        let (label, file) = (label_of(path), path.display().to_string());
        let mut trace = TraceBuilder::new();
        trace.add_process(Process {
            clock: ClockDomain::Realtime,
            ..Default::default()
        });
        Builder {
            trace,
            label,
            file,
            host_events: HashMap::default(),
            cpu_labelled: None,
            process_names: HashMap::default(),
            thread_names: HashMap::default(),
            text_tids: HashMap::default(),
            corr_thread: HashMap::default(),
            devices: HashMap::default(),
            tracks: HashMap::default(),
            counters: HashMap::default(),
            memory_tracks: HashMap::default(),
            deferred: Vec::new(),
            capture: None,
            skipped: Skipped::default(),
            events: 0,
            args: Vec::new(),
            arg_keys: intern::ArgKeys::default(),
            names: intern::Names::default(),
            keep,
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

    fn rel_ns(r: Option<&str>) -> Option<i64> {
        us_text_to_ns(r?)
    }

    /// A complete event's duration; a bad one is 0, counted.
    fn dur_ns(&mut self, e: &Event) -> i64 {
        match Self::rel_ns(e.dur.as_deref()) {
            Some(d) if d >= 0 => d,
            _ => {
                self.skipped.bad_dur += 1;
                0
            }
        }
    }

    fn complete(&mut self, e: &Event) {
        let cat = Cat::of(e.cat());
        let pid = e.pid.as_ref().and_then(Id::num);
        if cat.is_host() {
            if let Some(p) = pid {
                *self.host_events.entry(p).or_default() += 1;
            }
        }
        if matches!(cat, Cat::Runtime | Cat::Driver) {
            if let (Some(c), Some(tid)) = (e.correlation().filter(|&c| c != 0), e.tid.as_ref()) {
                let tid = self.tid_of(tid);
                self.corr_thread.entry(c).or_insert(tid);
            }
        }
        let Some(start) = Self::rel_ns(e.ts.as_deref()) else {
            self.skipped.no_ts += 1;
            return;
        };
        if cat == Cat::ProfilerSpan {
            let dur = self.dur_ns(e);
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
                        self.deferred.push(e.to_static());
                        return;
                    }
                }
            }
        };
        self.push_slice(e, cat, place, start);
    }

    /// Places a deferred event once the host pid and all correlations are known.
    fn place_deferred(&mut self, e: &Event, host_pid: i64) -> Option<Place> {
        let pid = e.pid.as_ref().and_then(Id::num);
        let on_host_thread = |b: &mut Self| e.tid.as_ref().map(|t| Place::Thread(b.tid_of(t)));
        if Cat::of(e.cat()) == Cat::Sync {
            if let Some(&t) = e
                .correlation()
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

    fn device(&mut self, ordinal: u32) -> DeviceId {
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
            Place::Thread(tid) => self
                .trace
                .add_track(HOST, None, TrackKind::Thread { tid }, ""),
            Place::Gpu(o) => {
                let device = self.device(o);
                self.trace
                    .add_track(HOST, None, TrackKind::Gpu { device }, "")
            }
            Place::Stream(o, stream) => {
                let gpu = self.track(Place::Gpu(o));
                let device = self.device(o);
                let kind = TrackKind::Stream { device, stream };
                self.trace
                    .add_track(HOST, Some(gpu), kind, &format!("stream {stream}"))
            }
        };
        self.tracks.insert(place, t);
        t
    }

    fn push_slice(&mut self, e: &Event, cat: Cat, place: Place, start_rel_ns: i64) {
        let track = self.track(place);
        let dur_ns = self.dur_ns(e);
        let name = e.name();
        let kind = cat.slice_kind(name);
        let name_id = self.names.intern(&mut self.trace, name);
        let mut s = NewSlice::new(track, kind, name_id, start_rel_ns, dur_ns);
        s.correlation = e.correlation().unwrap_or(0);
        let (consumed, list) = match kind {
            SliceKind::Kernel => {
                s.launch = Some(e.launch_config());
                (KERNEL_CONSUMED, 0)
            }
            SliceKind::Memcpy | SliceKind::Memset => {
                let (copy_kind, pageable) = copy_kind_of(name);
                let bytes = e.arg("bytes").and_then(ArgJson::as_u64).unwrap_or(0);
                s.copy = Some(CopyInfo {
                    bytes,
                    kind: copy_kind,
                    pageable,
                });
                (COPY_CONSUMED, 1)
            }
            _ => (OTHER_CONSUMED, 2),
        };
        if kind.is_gpu_activity() {
            s.class = SliceClass::of_gpu_name(kind, name);
        }
        let mut args = std::mem::take(&mut self.args);
        self.arg_set(e, (cat as usize * 3 + list, consumed), &mut args);
        self.trace.push_slice_with_args(s, &args);
        self.args = args;
    }

    /// The arguments of `e` but `consumed`, into `out`; `kind` numbers
    /// the event's category and `consumed` list (see `intern::ArgKeys`).
    fn arg_set(
        &mut self,
        e: &Event,
        (kind, consumed): (usize, &[&str]),
        out: &mut Vec<(StrId, ArgValue)>,
    ) {
        out.clear();
        let Some(args) = e.args.as_ref() else {
            return;
        };
        let trace = &mut self.trace;
        for (pos, (k, v)) in args.0.iter().enumerate() {
            let (key, consumed) =
                self.arg_keys
                    .key(trace, kind, pos, k.as_str(), consumed, self.keep);
            if consumed {
                continue;
            }
            let value = match v {
                ArgJson::Int(x) => ArgValue::Int(*x),
                ArgJson::UInt(x) => ArgValue::UInt(*x),
                ArgJson::Double(x) => ArgValue::Double(*x),
                ArgJson::Bool(x) => ArgValue::Bool(*x),
                ArgJson::Str(s) => ArgValue::Str(self.arg_keys.str_value(trace, kind, pos, s)),
                ArgJson::Json(j) => ArgValue::Str(trace.intern(&j.to_string())),
                ArgJson::Null => continue,
            };
            out.push((key, value));
        }
    }

    fn counter_track(&mut self, name: String, ordinal: Option<u32>) -> TrackId {
        if let Some(&t) = self.counters.get(&(name.clone(), ordinal)) {
            return t;
        }
        let parent = ordinal.map(|o| self.track(Place::Gpu(o)));
        let device = ordinal.map(|o| self.device(o));
        let t = self
            .trace
            .add_track(HOST, parent, TrackKind::Counter { device }, &name);
        self.counters.insert((name, ordinal), t);
        t
    }

    /// Chrome counter events: one series per (event name, arg key).
    fn counter(&mut self, e: &Event) {
        let Some(ts) = Self::rel_ns(e.ts.as_deref()) else {
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
    /// allocation or free, as counters per device; on a GPU, the block
    /// itself (address, signed bytes) and the host thread, as an allocation.
    fn memory(&mut self, e: &Event) {
        let Some(ts) = Self::rel_ns(e.ts.as_deref()) else {
            self.skipped.no_ts += 1;
            return;
        };
        let ordinal = e.gpu_memory_device();
        for (i, (key, what)) in [
            ("Total Allocated", "allocated"),
            ("Total Reserved", "reserved"),
        ]
        .into_iter()
        .enumerate()
        {
            let Some(v) = e.arg(key).and_then(ArgJson::as_f64) else {
                continue;
            };
            let t = match self.memory_tracks.get(&(ordinal, i)) {
                Some(&t) => t,
                None => {
                    let who = match ordinal {
                        Some(o) => format!("GPU {o}"),
                        None => "CPU".to_string(),
                    };
                    let t = self.counter_track(format!("{who} memory {what} (bytes)"), ordinal);
                    self.memory_tracks.insert((ordinal, i), t);
                    t
                }
            };
            self.trace.push_counter(t, ts, v);
        }
        // An address is a pointer's bits (a negative one, as some writers
        // print them, keeps its bits).
        let address = e
            .arg("Addr")
            .and_then(|a| a.as_u64().or_else(|| a.as_i64().map(|a| a as u64)));
        let bytes = e.arg("Bytes").and_then(ArgJson::as_i64);
        if let (Some(o), Some(address), Some(bytes), Some(tid)) =
            (ordinal, address, bytes, e.tid.as_ref())
        {
            let thread = self.tid_of(tid);
            let track = self.track(Place::Thread(thread));
            let device = self.device(o);
            self.trace
                .push_allocation(track, device, ts, address, bytes, None);
        }
    }
}

fn to_u32(n: i64) -> Option<u32> {
    u32::try_from(n).ok()
}
