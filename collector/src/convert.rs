//! CUPTI activity records -> model slices, batch by batch.
//!
//! The converter owns the batch [`Trace`]: one process, its devices and
//! tracks (kept for the whole run), and the slices of the records seen since
//! the last write (cleared by the writer thread after each batch).

use std::collections::HashMap;
use std::ffi::CStr;
use std::sync::Arc;

use streamscope_core::*;

use crate::capture::CaptureWindow;
use crate::marker_names::{self, MarkerNames, MAX_MARKER_NAMES};
use crate::python::PyLines;
use crate::records::*;

/// What the converter asks of the process (CUPTI names, driver properties).
pub trait HostInfo: Send {
    /// Properties of CUDA device `ordinal` (`process` is filled in by the caller).
    fn device(&mut self, ordinal: u32) -> Device;
    /// Name of a runtime (or driver) API function.
    fn api_name(&mut self, driver: bool, cbid: u32) -> String;
    /// Name of a host thread, if known.
    fn thread_name(&mut self, tid: u32) -> Option<String>;
}

/// A synchronization record waiting for its API call (to find its thread).
struct PendingSync {
    raw: RawSync,
    age: u8,
}

pub struct Converter {
    pub trace: TraceBuilder,
    process: ProcessId,
    pid: u32,
    /// Added to every CUPTI timestamp (0 when CUPTI uses our clock).
    pub ts_offset_ns: i64,
    host: Box<dyn HostInfo>,
    window: Arc<CaptureWindow>,
    python: Arc<PyLines>,
    /// Thread whose API calls are the collector's own (device queries).
    pub own_tid: Option<u32>,
    devices: HashMap<u32, (DeviceId, TrackId)>,
    streams: HashMap<(u32, u32), TrackId>,
    threads: HashMap<u32, TrackId>,
    counters: HashMap<String, TrackId>,
    context_device: HashMap<u32, u32>,
    /// (context, stream) -> `CUpti_ActivityStreamFlag`, from stream records.
    stream_flags: std::collections::BTreeMap<(u32, u32), u32>,
    /// Stream records not yet in the metadata (their context's device unknown).
    stream_flags_pending: bool,
    api_names: HashMap<(bool, u32), StrId>,
    kernel_names: HashMap<Box<[u8]>, StrId>,
    copy_names: HashMap<(u8, u8, u8), StrId>,
    /// Marker id -> (start, name, tid, batch it opened in).
    open_markers: HashMap<u32, (i64, StrId, u32, u64)>,
    marker_names: MarkerNames,
    /// Batches after which a range that never ended is forgotten.
    pub marker_max_batches: u64,
    /// Ranges forgotten because they never ended.
    pub markers_abandoned: u64,
    batches: u64,
    pending_syncs: Vec<PendingSync>,
    /// Correlation id -> thread track of API calls, this batch and the last.
    api_thread: [HashMap<u32, TrackId>; 2],
    /// Device memory held per GPU ordinal (CUPTI memory records).
    device_memory: HashMap<u32, i64>,
    unknown_thread: Option<TrackId>,
    overhead_track: Option<TrackId>,
    python_key: StrId,
    /// `protocol::CALLER_ARG`: a native program's C/C++ caller of a sync.
    caller_key: StrId,
    symbolizer: crate::native_caller::Symbolizer,
    return_key: StrId,
    graph_key: StrId,
    graph_node_key: StrId,
    /// Capturing lines of graph nodes, interned.
    node_lines: HashMap<u64, Option<StrId>>,
    /// Records converted (including those outside the capture window).
    pub records_seen: u64,
    /// Records skipped because they had no end yet (counted as dropped).
    pub incomplete_records: u64,
    /// Launch calls and NCCL kernels, for the NCCL plugin's operations.
    pub nccl_links: crate::nccl_plugin::link::KernelLinks,
    /// Step counting of an armed `capture --steps N` (None otherwise).
    pub step_probe: Option<crate::step_probe::StepProbe>,
}

/// How many batches a sync record waits for its API call.
const SYNC_MAX_AGE: u8 = 3;
/// How many batches (about ten a second) an NVTX range may stay open
/// before it is taken for one that never ends (a push without a pop): 4 h.
const MARKER_MAX_BATCHES: u64 = 4 * 3600 * 10;
/// Process metadata key counting such ranges.
pub const ABANDONED_KEY: &str = "nvtx_ranges_never_ended";

fn ts(raw: u64, offset: i64) -> i64 {
    (raw as i64).saturating_add(offset)
}

/// Drops CUPTI's version suffix: "cudaStreamSynchronize_v3020" -> "cudaStreamSynchronize".
pub fn normalize_api_name(name: &str) -> &str {
    if let Some(i) = name.rfind("_v") {
        let tail = &name[i + 2..];
        if tail.len() >= 4 && tail.bytes().all(|b| b.is_ascii_digit()) {
            return &name[..i];
        }
    }
    name
}

/// Demangles a kernel name when it is a mangled C++ name.
pub fn demangle(mangled: &str) -> String {
    if mangled.starts_with("_Z") {
        if let Ok(sym) = cpp_demangle::Symbol::new(mangled) {
            if let Ok(s) = sym.demangle(&cpp_demangle::DemangleOptions::default()) {
                return s;
            }
        }
    }
    mangled.to_string()
}

fn memory_kind_name(k: u8) -> &'static str {
    match k {
        1 => "Pageable",
        2 => "Pinned",
        3 => "Device",
        4 => "Array",
        5 => "Managed",
        6 => "Device Static",
        7 => "Managed Static",
        _ => "Unknown",
    }
}

fn copy_kind(k: u8) -> CopyKind {
    match k {
        1 | 3 => CopyKind::HostToDevice,
        2 | 4 => CopyKind::DeviceToHost,
        5..=8 => CopyKind::DeviceToDevice,
        9 => CopyKind::HostToHost,
        10 => CopyKind::PeerToPeer,
        _ => CopyKind::Unknown,
    }
}

/// Slice name of a CUPTI synchronization type.
pub fn sync_name(sync_type: u32) -> &'static str {
    match sync_type {
        1 => "Event Sync",
        2 => "Stream Wait Event",
        3 => "Stream Sync",
        4 => "Context Sync",
        _ => "Sync",
    }
}

impl Converter {
    pub fn new(
        process: Process,
        host: Box<dyn HostInfo>,
        window: Arc<CaptureWindow>,
        python: Arc<PyLines>,
    ) -> Self {
        let mut trace = TraceBuilder::new();
        let pid = process.pid;
        let p = trace.add_process(process);
        let python_key = trace.intern("python");
        let caller_key = trace.intern(streamscope_core::protocol::CALLER_ARG);
        let return_key = trace.intern("return");
        let graph_key = trace.intern(protocol::GRAPH_ID_ARG);
        let graph_node_key = trace.intern(protocol::GRAPH_NODE_ARG);
        Converter {
            trace,
            process: p,
            pid,
            ts_offset_ns: 0,
            host,
            window,
            python,
            own_tid: None,
            devices: HashMap::new(),
            streams: HashMap::new(),
            threads: HashMap::new(),
            counters: HashMap::new(),
            context_device: HashMap::new(),
            stream_flags: Default::default(),
            stream_flags_pending: false,
            api_names: HashMap::new(),
            kernel_names: HashMap::new(),
            copy_names: HashMap::new(),
            open_markers: HashMap::new(),
            marker_names: MarkerNames::new(MAX_MARKER_NAMES),
            marker_max_batches: MARKER_MAX_BATCHES,
            markers_abandoned: 0,
            batches: 0,
            pending_syncs: Vec::new(),
            api_thread: [HashMap::new(), HashMap::new()],
            device_memory: HashMap::new(),
            unknown_thread: None,
            overhead_track: None,
            python_key,
            caller_key,
            symbolizer: Default::default(),
            return_key,
            graph_key,
            graph_node_key,
            node_lines: HashMap::new(),
            records_seen: 0,
            incomplete_records: 0,
            nccl_links: Default::default(),
            step_probe: None,
        }
    }

    pub fn process_mut(&mut self) -> &mut Process {
        self.trace.process_mut(self.process)
    }

    /// The "GPU d · NAME" track of CUDA device `ordinal` (adds the device).
    pub fn gpu_track(&mut self, ordinal: u32) -> (DeviceId, TrackId) {
        if let Some(&d) = self.devices.get(&ordinal) {
            return d;
        }
        let mut dev = self.host.device(ordinal);
        dev.process = self.process;
        dev.ordinal = ordinal;
        let label = if dev.name.is_empty() {
            format!("GPU {ordinal}")
        } else {
            format!("GPU {ordinal} · {}", dev.name)
        };
        let d = self.trace.add_device(dev);
        let t = self
            .trace
            .add_track(self.process, None, TrackKind::Gpu { device: d }, &label);
        self.devices.insert(ordinal, (d, t));
        (d, t)
    }

    /// The track of CUDA stream `stream` of device `ordinal`.
    pub fn stream_track(&mut self, ordinal: u32, stream: u32) -> TrackId {
        if let Some(&t) = self.streams.get(&(ordinal, stream)) {
            return t;
        }
        let (d, gpu) = self.gpu_track(ordinal);
        let t = self.trace.add_track(
            self.process,
            Some(gpu),
            TrackKind::Stream { device: d, stream },
            &format!("stream {stream}"),
        );
        self.streams.insert((ordinal, stream), t);
        t
    }

    /// CUDA device ordinals seen so far (in records).
    pub fn device_ordinals(&self) -> Vec<u32> {
        self.devices.keys().copied().collect()
    }

    /// The counter track `name` of device `ordinal` (a child of its GPU
    /// track; added on first use).
    pub fn counter_track(&mut self, ordinal: u32, name: &str) -> TrackId {
        if let Some(&t) = self.counters.get(name) {
            return t;
        }
        let (d, gpu) = self.gpu_track(ordinal);
        let t = self.trace.add_track(
            self.process,
            Some(gpu),
            TrackKind::Counter { device: Some(d) },
            name,
        );
        self.counters.insert(name.to_string(), t);
        t
    }

    /// The track of host thread `tid`.
    pub fn thread_track(&mut self, tid: u32) -> TrackId {
        if let Some(&t) = self.threads.get(&tid) {
            return t;
        }
        let name = match self.host.thread_name(tid) {
            Some(n) if tid == self.pid => format!("{n} (main thread {tid})"),
            Some(n) => format!("{n} ({tid})"),
            None => format!("thread {tid}"),
        };
        let t = self
            .trace
            .add_track(self.process, None, TrackKind::Thread { tid }, &name);
        self.threads.insert(tid, t);
        t
    }

    fn kernel_name(&mut self, name: &CStr) -> StrId {
        if let Some(&id) = self.kernel_names.get(name.to_bytes()) {
            return id;
        }
        let text = demangle(&name.to_string_lossy());
        let id = self.trace.intern(&text);
        self.kernel_names.insert(name.to_bytes().into(), id);
        id
    }

    fn api_name(&mut self, driver: bool, cbid: u32) -> StrId {
        if let Some(&id) = self.api_names.get(&(driver, cbid)) {
            return id;
        }
        let raw = self.host.api_name(driver, cbid);
        let id = self.trace.intern(normalize_api_name(&raw));
        self.api_names.insert((driver, cbid), id);
        id
    }

    /// Converts one record into the batch.
    pub fn push(&mut self, rec: Record<'_>) {
        self.records_seen += 1;
        match rec {
            Record::Kernel(r, name) => self.kernel(&r, name),
            Record::Memcpy(r) => self.memcpy(&r),
            Record::Memset(r) => self.memset(&r),
            Record::Api { raw, driver } => self.api(&raw, driver),
            Record::Sync(r) => self.pending_syncs.push(PendingSync { raw: r, age: 0 }),
            Record::Marker(r, name) => self.marker(&r, name),
            Record::Overhead(r) => self.overhead(&r),
            Record::Stream(r) => {
                self.stream_flags
                    .insert((r.context_id, r.stream_id), r.flag);
                self.stream_flags_pending = true;
            }
            Record::Memory(r) => self.device_memory(&r),
            Record::Other(_) => {}
        }
    }

    /// A CUPTI memory record: the running total of device memory held by
    /// cudaMalloc-style allocations on its GPU, as a counter sample
    /// ("GPU N device memory (bytes)"; the collector starts with CUDA, so
    /// the total starts at 0 and sees every allocation).
    fn device_memory(&mut self, r: &RawMemory) {
        if r.memory_kind != MEMORY_KIND_DEVICE {
            return;
        }
        let signed = match r.operation {
            MEMORY_OP_ALLOCATION => r.bytes as i64,
            MEMORY_OP_RELEASE => -(r.bytes as i64),
            _ => return,
        };
        let ordinal = r.device_id;
        let total = self.device_memory.entry(ordinal).or_insert(0);
        *total = (*total + signed).max(0);
        let value = *total as f64;
        let t = ts(r.timestamp, self.ts_offset_ns);
        if self.window.keep(t, t) {
            let track = self.counter_track(ordinal, &crate::memory::device_track(ordinal));
            self.trace.push_counter(track, t, value);
        }
    }

    /// The track "host (thread unknown)": events whose host thread the
    /// records do not say.
    pub fn unknown_thread_track(&mut self) -> TrackId {
        if let Some(t) = self.unknown_thread {
            return t;
        }
        let t = self.trace.add_track(
            self.process,
            None,
            TrackKind::Thread { tid: 0 },
            "host (thread unknown)",
        );
        self.unknown_thread = Some(t);
        t
    }

    fn times(&mut self, start: u64, end: u64) -> Option<(i64, i64)> {
        if end == 0 {
            // Still running (or not begun) at a forced flush. Lost, and
            // counted, only when it belongs to the window: work that
            // begins after a closed capture window is outside it anyway.
            let inside = if start == 0 {
                self.window.bounds().1.is_none()
            } else {
                let s = ts(start, self.ts_offset_ns);
                self.window.keep(s, s)
            };
            if inside {
                self.incomplete_records += 1;
            }
            return None;
        }
        if start == 0 {
            return None;
        }
        let s = ts(start, self.ts_offset_ns);
        let e = ts(end, self.ts_offset_ns).max(s);
        self.window.keep(s, e).then_some((s, e - s))
    }

    fn kernel(&mut self, r: &RawKernel, name: &CStr) {
        let (dev, ctx, stream) = (r.device_id, r.context_id, r.stream_id);
        self.context_device.insert(ctx, dev);
        let Some((start, dur)) = self.times(r.start, r.end) else {
            return;
        };
        let track = self.stream_track(dev, stream);
        let name = self.kernel_name(name);
        let g = |v: i32| v.max(0) as u32;
        let launch = LaunchConfig {
            grid: [g(r.grid_x), g(r.grid_y), g(r.grid_z)],
            block: [g(r.block_x), g(r.block_y), g(r.block_z)],
            registers_per_thread: u32::from(r.registers_per_thread),
            static_smem_bytes: g(r.static_shared_memory),
            dynamic_smem_bytes: g(r.dynamic_shared_memory),
        };
        let mut s = NewSlice::new(track, SliceKind::Kernel, name, start, dur);
        s.class = SliceClass::of_gpu_name(SliceKind::Kernel, self.trace.str(name));
        if s.class == SliceClass::Communication {
            self.nccl_links.nccl_kernel(r.correlation_id);
        }
        s.correlation = r.correlation_id;
        s.launch = Some(launch);
        if let Some(p) = &mut self.step_probe {
            p.gpu(track.get(), name, start, r.graph_id, r.correlation_id);
        }
        self.graph_args(&mut s, r.graph_id, r.graph_node_id);
        self.trace.push_slice(s);
    }

    /// The graph and node that ran a GPU record, and the Python line that
    /// captured the node (when the collector saw it captured).
    fn graph_args(&mut self, s: &mut NewSlice, graph: u32, node: u64) {
        if graph == 0 && node == 0 {
            return;
        }
        s.args
            .push((self.graph_key, ArgValue::UInt(u64::from(graph))));
        s.args.push((self.graph_node_key, ArgValue::UInt(node)));
        let line = match self.node_lines.get(&node) {
            Some(&l) => l,
            None => {
                let l = self
                    .python
                    .node_line(node)
                    .map(|loc| self.trace.intern(&loc));
                // A node seen before its line is known is asked again.
                if l.is_some() {
                    self.node_lines.insert(node, l);
                }
                l
            }
        };
        if let Some(v) = line {
            s.args.push((self.python_key, ArgValue::Str(v)));
        }
    }

    fn memcpy(&mut self, r: &RawMemcpy) {
        self.context_device.insert(r.context_id, r.device_id);
        let Some((start, dur)) = self.times(r.start, r.end) else {
            return;
        };
        let track = self.stream_track(r.device_id, r.stream_id);
        let kind = copy_kind(r.copy_kind);
        let key = (r.copy_kind, r.src_kind, r.dst_kind);
        let name = match self.copy_names.get(&key) {
            Some(&n) => n,
            None => {
                let text = format!(
                    "Memcpy {} ({} -> {})",
                    kind.name(),
                    memory_kind_name(r.src_kind),
                    memory_kind_name(r.dst_kind)
                );
                let n = self.trace.intern(&text);
                self.copy_names.insert(key, n);
                n
            }
        };
        let mut s = NewSlice::new(track, SliceKind::Memcpy, name, start, dur);
        s.class = SliceClass::Memory;
        s.correlation = r.correlation_id;
        s.copy = Some(CopyInfo {
            bytes: r.bytes,
            kind,
            pageable: r.src_kind == 1 || r.dst_kind == 1,
        });
        self.graph_args(&mut s, r.graph_id, r.graph_node_id);
        self.trace.push_slice(s);
    }

    fn memset(&mut self, r: &RawMemset) {
        self.context_device.insert(r.context_id, r.device_id);
        let Some((start, dur)) = self.times(r.start, r.end) else {
            return;
        };
        let track = self.stream_track(r.device_id, r.stream_id);
        let name = self.trace.intern(&format!(
            "Memset ({})",
            memory_kind_name(r.memory_kind as u8)
        ));
        let mut s = NewSlice::new(track, SliceKind::Memset, name, start, dur);
        s.class = SliceClass::Memory;
        s.correlation = r.correlation_id;
        s.copy = Some(CopyInfo {
            bytes: r.bytes,
            kind: CopyKind::Unknown,
            pageable: r.memory_kind == 1,
        });
        self.graph_args(&mut s, r.graph_id, r.graph_node_id);
        self.trace.push_slice(s);
    }

    fn api(&mut self, r: &RawApi, driver: bool) {
        if Some(r.thread_id) == self.own_tid {
            return;
        }
        let corr = r.correlation_id;
        let python = self.python.take(corr);
        let native = self.python.take_native(corr);
        let Some((start, dur)) = self.times(r.start, r.end) else {
            return;
        };
        let track = self.thread_track(r.thread_id);
        self.api_thread[0].insert(corr, track);
        let name = self.api_name(driver, r.cbid);
        let (tid, end) = (r.thread_id, start + dur);
        let text = self.trace.str(name);
        self.nccl_links.api(driver, r.cbid, text, corr, tid, end);
        let kind = if driver {
            SliceKind::Driver
        } else {
            SliceKind::Runtime
        };
        let mut s = NewSlice::new(track, kind, name, start, dur);
        s.correlation = corr;
        if let Some(p) = python {
            let v = self.trace.intern(&p);
            s.args.push((self.python_key, ArgValue::Str(v)));
        } else if let Some(ip) = native {
            let name = self.symbolizer.name(&ip);
            let v = self.trace.intern(&name);
            s.args.push((self.caller_key, ArgValue::Str(v)));
        }
        if r.return_value != 0 {
            s.args
                .push((self.return_key, ArgValue::UInt(u64::from(r.return_value))));
        }
        self.trace.push_slice(s);
    }

    /// Places a synchronization record; false when it must wait for its API call.
    fn place_sync(&mut self, r: &RawSync, give_up: bool) -> bool {
        let device = self.context_device.get(&r.context_id).copied();
        let track = match (r.stream_id, device) {
            (stream, Some(dev)) if stream != SYNC_INVALID => self.stream_track(dev, stream),
            _ => match self
                .api_thread
                .iter()
                .find_map(|m| m.get(&r.correlation_id))
            {
                Some(&t) => t,
                None if give_up => self.unknown_thread_track(),
                None => return false,
            },
        };
        if let Some((start, dur)) = self.times(r.start, r.end) {
            let name = self.trace.intern(sync_name(r.sync_type));
            let mut s = NewSlice::new(track, SliceKind::Sync, name, start, dur);
            s.correlation = r.correlation_id;
            self.trace.push_slice(s);
        }
        true
    }

    fn marker(&mut self, r: &RawMarker, name: Option<&CStr>) {
        let tid = if r.object_kind == OBJECT_THREAD {
            r.object_id[1]
        } else {
            0
        };
        let t = ts(r.timestamp, self.ts_offset_ns);
        let flags = r.flags;
        if flags & MARKER_START != 0 {
            let n = self.marker_name(name);
            self.open_markers.insert(r.id, (t, n, tid, self.batches));
        } else if flags & MARKER_END != 0 {
            if let Some((start, n, tid, _)) = self.open_markers.remove(&r.id) {
                let end = t.max(start);
                if self.window.keep(start, end) {
                    let track = self.thread_track(tid);
                    self.trace.push_slice(NewSlice::new(
                        track,
                        SliceKind::Range,
                        n,
                        start,
                        end - start,
                    ));
                }
            }
        } else if flags & MARKER_INSTANTANEOUS != 0 && self.window.keep(t, t) {
            let n = self.marker_name(name);
            let track = self.thread_track(tid);
            self.trace
                .push_slice(NewSlice::new(track, SliceKind::Range, n, t, 0));
        }
    }

    fn marker_name(&mut self, name: Option<&CStr>) -> StrId {
        let text = name.map(|c| c.to_string_lossy()).unwrap_or_default();
        let limited = self.marker_names.limit_reached();
        let id = self.marker_names.resolve(&mut self.trace, &text);
        if !limited && self.marker_names.limit_reached() {
            crate::warn!(
                "streamscope: more than {MAX_MARKER_NAMES} distinct NVTX names; later ones are shortened"
            );
        }
        id
    }

    /// Sets process metadata `key` (replacing an earlier value).
    fn set_metadata(&mut self, key: &str, value: String) {
        let meta = &mut self.process_mut().metadata;
        match meta.iter_mut().find(|(k, _)| k == key) {
            Some(kv) => kv.1 = value,
            None => meta.push((key.to_string(), value)),
        }
    }

    fn overhead(&mut self, r: &RawOverhead) {
        let Some((start, dur)) = self.times(r.start, r.end) else {
            return;
        };
        let track = if r.object_kind == OBJECT_THREAD {
            self.thread_track(r.object_id[1])
        } else {
            match self.overhead_track {
                Some(t) => t,
                None => {
                    let t = self.trace.add_track(
                        self.process,
                        None,
                        TrackKind::Other,
                        "CUPTI overhead",
                    );
                    self.overhead_track = Some(t);
                    t
                }
            }
        };
        let name = self.trace.intern(overhead_name(r.overhead_kind));
        let mut s = NewSlice::new(track, SliceKind::Other, name, start, dur);
        s.correlation = r.correlation_id;
        self.trace.push_slice(s);
    }

    /// An optimizer step noted by the Python hooks on host thread `tid`: a
    /// `protocol::OPTIMIZER_STEP_RANGE` range, kept when it overlaps the
    /// capture window, with the optimizer's key as
    /// `protocol::OPTIMIZER_KEY_ARG` when said (not 0).
    pub fn optimizer_step(&mut self, tid: u32, start_ns: i64, end_ns: i64, key: u64) {
        let end = end_ns.max(start_ns);
        if !self.window.keep(start_ns, end) {
            return;
        }
        let track = self.thread_track(tid);
        let n = self.trace.intern(protocol::OPTIMIZER_STEP_RANGE);
        let mut s = NewSlice::new(track, SliceKind::Range, n, start_ns, end - start_ns);
        if key != 0 {
            let k = self.trace.intern(protocol::OPTIMIZER_KEY_ARG);
            s.args = vec![(k, ArgValue::UInt(key))];
        }
        self.trace.push_slice(s);
    }

    /// This process in the batch trace (for new tracks).
    pub fn process_index(&self) -> ProcessId {
        self.process
    }

    /// Whether a host interval overlaps the capture window.
    pub fn in_window(&self, start_ns: i64, end_ns: i64) -> bool {
        self.window.keep(start_ns, end_ns)
    }

    /// Sets process metadata `key` (replacing an earlier value).
    pub fn set_process_metadata(&mut self, key: &str, value: String) {
        self.set_metadata(key, value);
    }

    /// Writes how each stream was created into the process metadata
    /// (`protocol::streams`), per device ordinal, for the streams whose
    /// context's device is known (from its GPU records); the others wait.
    fn write_stream_creations(&mut self) {
        use std::collections::BTreeMap;
        use streamscope_core::protocol::streams::{self, StreamCreation};
        let mut by_ordinal: BTreeMap<u32, Vec<(u32, StreamCreation)>> = BTreeMap::new();
        let mut unresolved = false;
        for (&(ctx, stream), &flag) in &self.stream_flags {
            let Some(&ordinal) = self.context_device.get(&ctx) else {
                unresolved = true;
                continue;
            };
            let kind = match flag & 0xffff {
                stream_flag::NULL => StreamCreation::Legacy,
                stream_flag::DEFAULT => StreamCreation::Blocking,
                stream_flag::NON_BLOCKING => StreamCreation::NonBlocking,
                _ => continue,
            };
            by_ordinal.entry(ordinal).or_default().push((stream, kind));
        }
        for (ordinal, v) in by_ordinal {
            self.set_metadata(&streams::key(ordinal), streams::format(&v));
        }
        self.stream_flags_pending = unresolved;
    }

    /// Ends a batch: places the synchronization records whose thread is now
    /// known (or that waited long enough). `last` places all of them.
    pub fn finish_batch(&mut self, last: bool) {
        let pending = std::mem::take(&mut self.pending_syncs);
        for mut p in pending {
            let give_up = last || p.age >= SYNC_MAX_AGE;
            if !self.place_sync(&p.raw, give_up) {
                p.age += 1;
                self.pending_syncs.push(p);
            }
        }
        let [cur, prev] = &mut self.api_thread;
        std::mem::swap(cur, prev);
        cur.clear();
        self.nccl_links.finish_batch();
        self.batches += 1;
        let (now, max) = (self.batches, self.marker_max_batches);
        let before = self.open_markers.len();
        self.open_markers
            .retain(|_, m| now.saturating_sub(m.3) <= max);
        let gone = (before - self.open_markers.len()) as u64;
        if gone > 0 {
            self.markers_abandoned += gone;
            let v = self.markers_abandoned.to_string();
            self.set_metadata(ABANDONED_KEY, v);
        }
        if self.marker_names.limit_reached() {
            let v = self.marker_names.describe();
            self.set_metadata(marker_names::LIMIT_KEY, v);
        }
        if self.stream_flags_pending {
            self.write_stream_creations();
        }
    }
}
