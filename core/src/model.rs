//! The trace model: struct-of-arrays tables with a string pool.
//!
//! A [`Trace`] holds any number of processes (one per rank); each process has
//! devices and tracks (host threads, GPU streams, counters). Slices are stored
//! column by column in [`Slices`]: the hot columns (start, duration, track,
//! name, kind, class, correlation) are plain vectors, and the rarer attributes
//! live in side tables referenced by a 32-bit index (`payload` for launch
//! configurations and copy descriptions, `args` for free-form arguments).
//! A kernel slice costs 38 bytes of columns (see `slice_column_bytes`), its
//! launch configuration is shared with every kernel launched the same way.
//!
//! All times are `i64` nanoseconds on the process's clock ([`ClockDomain`]).

use rustc_hash::FxHashMap as HashMap;

/// Index into the [`StringPool`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct StrId(pub u32);

impl StrId {
    /// The empty string, always present at index 0.
    pub const EMPTY: StrId = StrId(0);
}

/// Interned strings; index 0 is the empty string.
#[derive(Debug, Clone)]
pub struct StringPool {
    strings: Vec<Box<str>>,
    index: HashMap<Box<str>, StrId>,
}

impl Default for StringPool {
    fn default() -> Self {
        let mut pool = StringPool {
            strings: Vec::new(),
            index: HashMap::default(),
        };
        pool.intern("");
        pool
    }
}

impl StringPool {
    /// Returns the id of `s`, adding it if new.
    pub fn intern(&mut self, s: &str) -> StrId {
        if let Some(&id) = self.index.get(s) {
            return id;
        }
        let id = StrId(self.strings.len() as u32);
        self.strings.push(s.into());
        self.index.insert(s.into(), id);
        id
    }

    /// Looks `s` up without adding it.
    pub fn lookup(&self, s: &str) -> Option<StrId> {
        self.index.get(s).copied()
    }

    /// The string for `id` ("" for an id out of range).
    pub fn get(&self, id: StrId) -> &str {
        self.strings.get(id.0 as usize).map(|s| &**s).unwrap_or("")
    }

    /// Number of interned strings, the empty string included.
    pub fn len(&self) -> usize {
        self.strings.len()
    }

    /// True when the pool holds only the empty string.
    pub fn is_empty(&self) -> bool {
        self.strings.len() <= 1
    }

    /// Bytes held by the string data (not counting the hash index).
    pub fn heap_bytes(&self) -> usize {
        self.strings.iter().map(|s| s.len()).sum::<usize>() * 2
            + self.strings.capacity() * std::mem::size_of::<Box<str>>()
    }
}

/// Clock the timestamps of a process are on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum ClockDomain {
    /// CLOCK_REALTIME (Unix epoch ns): Kineto traces.
    Realtime,
    /// CLOCK_MONOTONIC.
    Monotonic,
    /// CLOCK_BOOTTIME, Perfetto's default trace clock.
    #[default]
    Boottime,
}

impl ClockDomain {
    /// Perfetto's builtin clock id.
    pub fn perfetto_id(self) -> u32 {
        match self {
            ClockDomain::Realtime => 1,
            ClockDomain::Monotonic => 3,
            ClockDomain::Boottime => 6,
        }
    }

    /// The clock domain of Perfetto builtin clock `id`, if it is one of ours.
    pub fn from_perfetto_id(id: u32) -> Option<Self> {
        match id {
            1 => Some(ClockDomain::Realtime),
            3 => Some(ClockDomain::Monotonic),
            6 => Some(ClockDomain::Boottime),
            _ => None,
        }
    }

    /// Lowercase name ("realtime", "monotonic", "boottime").
    pub fn name(self) -> &'static str {
        match self {
            ClockDomain::Realtime => "realtime",
            ClockDomain::Monotonic => "monotonic",
            ClockDomain::Boottime => "boottime",
        }
    }
}

/// One traced process: a rank of a distributed job.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Process {
    /// OS process id.
    pub pid: u32,
    /// Process name.
    pub name: String,
    /// Global rank in the distributed job, if known.
    pub rank: Option<u32>,
    /// Rank on its host, if known.
    pub local_rank: Option<u32>,
    /// Number of ranks in the job, if known.
    pub world_size: Option<u32>,
    /// Host the process ran on.
    pub hostname: String,
    /// Command line of the process.
    pub cmdline: String,
    /// Clock the process's timestamps are on.
    pub clock: ClockDomain,
    /// Records CUPTI (or the importer) could not deliver.
    pub dropped_records: u64,
    /// Capture window, when the collector limited it.
    pub capture_start_ns: Option<i64>,
    /// End of the capture window (ns), when the collector limited it.
    pub capture_end_ns: Option<i64>,
    /// Simultaneous readings of several clocks, as (Perfetto clock id, ns):
    /// lets Perfetto put this process's clock on its trace clock.
    pub clock_snapshot: Vec<(u32, i64)>,
    /// Anything else, in order (collector version, source file, NCCL version, ...).
    pub metadata: Vec<(String, String)>,
}

/// Process metadata naming the run a process belongs to when two runs are
/// shown side by side ("A" or "B"); [`Process::label`] leads with it.
pub const COMPARE_RUN_KEY: &str = "compare_run";

impl Process {
    /// Display label: "rank N" (or "pid N"), led by the compare run name if any.
    pub fn label(&self) -> String {
        let base = match self.rank {
            Some(r) => format!("rank {r}"),
            None => format!("pid {}", self.pid),
        };
        match self.metadata.iter().find(|(k, _)| k == COMPARE_RUN_KEY) {
            Some((_, run)) => format!("{run} · {base}"),
            None => base,
        }
    }
}

/// A GPU of a process, with the limits occupancy needs.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Device {
    /// Owning process (index into `Trace::processes`).
    pub process: u32,
    /// CUDA device ordinal inside the process.
    pub ordinal: u32,
    /// Device name (e.g. "NVIDIA H200").
    pub name: String,
    /// Compute capability, major version.
    pub compute_major: u32,
    /// Compute capability, minor version.
    pub compute_minor: u32,
    /// Number of streaming multiprocessors.
    pub sm_count: u32,
    /// Threads per warp.
    pub warp_size: u32,
    /// Maximum threads per block.
    pub max_threads_per_block: u32,
    /// Maximum resident threads per SM.
    pub max_threads_per_sm: u32,
    /// Maximum resident blocks per SM.
    pub max_blocks_per_sm: u32,
    /// 32-bit registers per SM.
    pub regs_per_sm: u32,
    /// 32-bit registers available to one block.
    pub regs_per_block: u32,
    /// Shared memory per SM, in bytes.
    pub smem_per_sm_bytes: u64,
    /// Shared memory available to one block, in bytes.
    pub smem_per_block_bytes: u64,
    /// Global memory, in bytes.
    pub global_mem_bytes: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
/// Index into `Trace::tracks`.
pub struct TrackId(pub u32);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
/// What a track shows.
pub enum TrackKind {
    /// A host thread: CUDA API calls, NVTX ranges, CPU ops.
    Thread {
        /// OS thread id.
        tid: u32,
    },
    /// Grouping track for one GPU ("GPU 0 · NVIDIA H200").
    Gpu {
        /// Model device index.
        device: u32,
    },
    /// One CUDA stream of a device (a model device index).
    Stream {
        /// Model device index.
        device: u32,
        /// CUDA stream id.
        stream: u32,
    },
    /// A counter series (SMs in use, ...), optionally tied to a device.
    Counter {
        /// Model device index, if the counter belongs to a device.
        device: Option<u32>,
    },
    /// Anything else (tracks of foreign Perfetto traces).
    Other,
}

/// A timeline track.
#[derive(Debug, Clone, PartialEq)]
pub struct Track {
    /// Owning process (index into `Trace::processes`).
    pub process: u32,
    /// Parent track (e.g. the GPU group of a stream), if any.
    pub parent: Option<TrackId>,
    /// What the track shows.
    pub kind: TrackKind,
    /// Display name.
    pub name: StrId,
}

/// What a slice is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum SliceKind {
    /// A GPU kernel.
    Kernel = 0,
    /// A GPU memory copy.
    Memcpy = 1,
    /// A GPU memory set.
    Memset = 2,
    /// A host-blocking synchronization (stream, device, event sync).
    Sync = 3,
    /// CUDA runtime API call.
    Runtime = 4,
    /// CUDA driver API call.
    Driver = 5,
    /// NVTX range, user annotation, ProfilerStep.
    Range = 6,
    /// CPU operator (torch op) or Python function.
    CpuOp = 7,
    /// A GPU-side annotation (Kineto gpu_user_annotation).
    GpuRange = 8,
    /// Anything else.
    Other = 9,
}

impl SliceKind {
    /// Every kind, in discriminant order.
    pub const ALL: [SliceKind; 10] = [
        SliceKind::Kernel,
        SliceKind::Memcpy,
        SliceKind::Memset,
        SliceKind::Sync,
        SliceKind::Runtime,
        SliceKind::Driver,
        SliceKind::Range,
        SliceKind::CpuOp,
        SliceKind::GpuRange,
        SliceKind::Other,
    ];

    /// Lowercase name ("kernel", "memcpy", ...).
    pub fn name(self) -> &'static str {
        match self {
            SliceKind::Kernel => "kernel",
            SliceKind::Memcpy => "memcpy",
            SliceKind::Memset => "memset",
            SliceKind::Sync => "sync",
            SliceKind::Runtime => "runtime",
            SliceKind::Driver => "driver",
            SliceKind::Range => "range",
            SliceKind::CpuOp => "cpu_op",
            SliceKind::GpuRange => "gpu_range",
            SliceKind::Other => "other",
        }
    }

    /// The kind named `s` (inverse of [`SliceKind::name`]).
    pub fn from_name(s: &str) -> Option<Self> {
        SliceKind::ALL.into_iter().find(|k| k.name() == s)
    }

    /// The kind with discriminant `v`; [`SliceKind::Other`] when out of range.
    pub fn from_u8(v: u8) -> SliceKind {
        SliceKind::ALL
            .get(v as usize)
            .copied()
            .unwrap_or(SliceKind::Other)
    }

    /// Work that runs on a GPU stream.
    pub fn is_gpu_activity(self) -> bool {
        matches!(
            self,
            SliceKind::Kernel | SliceKind::Memcpy | SliceKind::Memset
        )
    }
}

/// HTA-compatible class of a GPU slice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum SliceClass {
    /// Not a GPU slice, or unclassified.
    None = 0,
    /// Compute kernel.
    Compute = 1,
    /// Communication (NCCL) kernel.
    Communication = 2,
    /// Memory copy or set.
    Memory = 3,
}

impl SliceClass {
    /// Lowercase name ("none", "compute", "communication", "memory").
    pub fn name(self) -> &'static str {
        match self {
            SliceClass::None => "none",
            SliceClass::Compute => "compute",
            SliceClass::Communication => "communication",
            SliceClass::Memory => "memory",
        }
    }

    /// The class named `s` (inverse of [`SliceClass::name`]).
    pub fn from_name(s: &str) -> Option<Self> {
        [
            SliceClass::None,
            SliceClass::Compute,
            SliceClass::Communication,
            SliceClass::Memory,
        ]
        .into_iter()
        .find(|c| c.name() == s)
    }

    /// The class with discriminant `v`; [`SliceClass::None`] when out of range.
    pub fn from_u8(v: u8) -> SliceClass {
        match v {
            1 => SliceClass::Compute,
            2 => SliceClass::Communication,
            3 => SliceClass::Memory,
            _ => SliceClass::None,
        }
    }

    /// HTA's rule: communication if the name starts with "nccl" or contains
    /// "ncclKernel"; memory if it starts with Memcpy/Memset/dma; compute otherwise.
    pub fn of_gpu_name(kind: SliceKind, name: &str) -> SliceClass {
        let lower_starts = |p: &str| {
            name.len() >= p.len() && name.as_bytes()[..p.len()].eq_ignore_ascii_case(p.as_bytes())
        };
        if name.starts_with("nccl") || name.contains("ncclKernel") {
            SliceClass::Communication
        } else if matches!(kind, SliceKind::Memcpy | SliceKind::Memset)
            || lower_starts("memcpy")
            || lower_starts("memset")
            || name.starts_with("dma")
        {
            SliceClass::Memory
        } else if kind == SliceKind::Kernel {
            SliceClass::Compute
        } else {
            SliceClass::None
        }
    }
}

/// Launch configuration of a kernel (shared by all kernels launched alike).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct LaunchConfig {
    /// Grid dimensions (x, y, z), in blocks.
    pub grid: [u32; 3],
    /// Block dimensions (x, y, z), in threads.
    pub block: [u32; 3],
    /// Registers per thread.
    pub registers_per_thread: u32,
    /// Static shared memory per block, in bytes.
    pub static_smem_bytes: u32,
    /// Dynamic shared memory per block, in bytes.
    pub dynamic_smem_bytes: u32,
}

impl LaunchConfig {
    /// Blocks in the grid (zero dimensions count as 1).
    pub fn blocks(&self) -> u64 {
        self.grid.iter().map(|&g| g.max(1) as u64).product()
    }
    /// Threads per block (zero dimensions count as 1).
    pub fn threads_per_block(&self) -> u64 {
        self.block.iter().map(|&b| b.max(1) as u64).product()
    }
}

/// Direction of a memory copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum CopyKind {
    /// Direction not known.
    Unknown = 0,
    /// Host to device.
    HostToDevice = 1,
    /// Device to host.
    DeviceToHost = 2,
    /// Device to device.
    DeviceToDevice = 3,
    /// Host to host.
    HostToHost = 4,
    /// Peer to peer (between devices).
    PeerToPeer = 5,
}

impl CopyKind {
    /// Short name ("HtoD", "DtoH", "DtoD", "HtoH", "PtoP", "unknown").
    pub fn name(self) -> &'static str {
        match self {
            CopyKind::Unknown => "unknown",
            CopyKind::HostToDevice => "HtoD",
            CopyKind::DeviceToHost => "DtoH",
            CopyKind::DeviceToDevice => "DtoD",
            CopyKind::HostToHost => "HtoH",
            CopyKind::PeerToPeer => "PtoP",
        }
    }
    /// The kind named `s`; [`CopyKind::Unknown`] for any other name.
    pub fn from_name(s: &str) -> CopyKind {
        match s {
            "HtoD" => CopyKind::HostToDevice,
            "DtoH" => CopyKind::DeviceToHost,
            "DtoD" => CopyKind::DeviceToDevice,
            "HtoH" => CopyKind::HostToHost,
            "PtoP" => CopyKind::PeerToPeer,
            _ => CopyKind::Unknown,
        }
    }
}

/// A memcpy or memset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CopyInfo {
    /// Bytes copied or set.
    pub bytes: u64,
    /// Direction of the copy.
    pub kind: CopyKind,
    /// Host memory was pageable (the copy blocks the host).
    pub pageable: bool,
}

/// What a slice's `payload` index points to (by its kind).
pub const NO_PAYLOAD: u32 = u32::MAX;
/// `args` value for a slice without free-form arguments.
pub const NO_ARGS: u32 = u32::MAX;

/// A free-form argument value.
#[derive(Debug, Clone, PartialEq)]
pub enum ArgValue {
    /// Signed integer.
    Int(i64),
    /// Unsigned integer.
    UInt(u64),
    /// Floating point number.
    Double(f64),
    /// Boolean.
    Bool(bool),
    /// String (in the trace's string pool).
    Str(StrId),
}

/// A set of named arguments.
pub type ArgSet = Vec<(StrId, ArgValue)>;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
/// Index of a slice in [`Slices`].
pub struct SliceId(pub u32);

/// Slices, column by column. Index `i` of every column is slice `i`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Slices {
    /// Start time (ns).
    pub start_ns: Vec<i64>,
    /// Duration (ns).
    pub dur_ns: Vec<i64>,
    /// Track the slice is on.
    pub track: Vec<TrackId>,
    /// Slice name.
    pub name: Vec<StrId>,
    /// What the slice is.
    pub kind: Vec<SliceKind>,
    /// HTA class (GPU slices).
    pub class: Vec<SliceClass>,
    /// CUDA correlation id (0 when none).
    pub correlation: Vec<u32>,
    /// Kernel: index into `Trace::launch_configs`; memcpy/memset: into
    /// `Trace::copies`; otherwise [`NO_PAYLOAD`].
    pub payload: Vec<u32>,
    /// Index into `Trace::arg_sets`, or [`NO_ARGS`].
    pub args: Vec<u32>,
}

impl Slices {
    /// Number of slices.
    pub fn len(&self) -> usize {
        self.start_ns.len()
    }
    /// True when there are no slices.
    pub fn is_empty(&self) -> bool {
        self.start_ns.is_empty()
    }
    /// End time (ns) of slice `i`: start + duration, saturating.
    pub fn end_ns(&self, i: usize) -> i64 {
        self.start_ns[i].saturating_add(self.dur_ns[i])
    }
    /// Bytes of column data per slice.
    pub const fn slice_column_bytes() -> usize {
        std::mem::size_of::<i64>() * 2
            + std::mem::size_of::<TrackId>()
            + std::mem::size_of::<StrId>()
            + std::mem::size_of::<SliceKind>()
            + std::mem::size_of::<SliceClass>()
            + std::mem::size_of::<u32>() * 3
    }
    /// Heap bytes the columns hold (capacity).
    pub fn heap_bytes(&self) -> usize {
        self.start_ns.capacity() * 8
            + self.dur_ns.capacity() * 8
            + self.track.capacity() * 4
            + self.name.capacity() * 4
            + self.kind.capacity()
            + self.class.capacity()
            + (self.correlation.capacity() + self.payload.capacity() + self.args.capacity()) * 4
    }
    fn reserve(&mut self, n: usize) {
        self.start_ns.reserve(n);
        self.dur_ns.reserve(n);
        self.track.reserve(n);
        self.name.reserve(n);
        self.kind.reserve(n);
        self.class.reserve(n);
        self.correlation.reserve(n);
        self.payload.reserve(n);
        self.args.reserve(n);
    }
}

/// A flow arrow (launch call -> GPU work), keyed by an id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Flow {
    /// Flow id.
    pub id: u64,
    /// Slice the arrow starts at (the launch call).
    pub from: SliceId,
    /// Slice the arrow ends at (the GPU work).
    pub to: SliceId,
}

/// Counter samples, column by column.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counters {
    /// Counter track of each sample.
    pub track: Vec<TrackId>,
    /// Sample time (ns).
    pub ts_ns: Vec<i64>,
    /// Sample value.
    pub value: Vec<f64>,
}

impl Counters {
    /// Number of samples.
    pub fn len(&self) -> usize {
        self.ts_ns.len()
    }
    /// True when there are no samples.
    pub fn is_empty(&self) -> bool {
        self.ts_ns.is_empty()
    }
}

/// A new slice, for [`Trace::push_slice`].
#[derive(Debug, Clone, PartialEq)]
pub struct NewSlice {
    /// Track the slice goes on.
    pub track: TrackId,
    /// Start time (ns).
    pub start_ns: i64,
    /// Duration (ns).
    pub dur_ns: i64,
    /// Slice name.
    pub name: StrId,
    /// What the slice is.
    pub kind: SliceKind,
    /// HTA class.
    pub class: SliceClass,
    /// CUDA correlation id (0 when none).
    pub correlation: u32,
    /// Launch configuration (kernels).
    pub launch: Option<LaunchConfig>,
    /// Copy description (memcpy/memset).
    pub copy: Option<CopyInfo>,
    /// Free-form arguments.
    pub args: ArgSet,
}

impl NewSlice {
    /// A slice with no class, correlation, payload or arguments.
    pub fn new(track: TrackId, kind: SliceKind, name: StrId, start_ns: i64, dur_ns: i64) -> Self {
        NewSlice {
            track,
            start_ns,
            dur_ns,
            name,
            kind,
            class: SliceClass::None,
            correlation: 0,
            launch: None,
            copy: None,
            args: Vec::new(),
        }
    }
}

/// A whole trace: one or more processes (ranks).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trace {
    /// Interned strings.
    pub strings: StringPoolEq,
    /// Processes (ranks); indexed by process number.
    pub processes: Vec<Process>,
    /// GPUs of all processes; indexed by model device index.
    pub devices: Vec<Device>,
    /// Tracks; indexed by [`TrackId`].
    pub tracks: Vec<Track>,
    /// Slices, column by column.
    pub slices: Slices,
    /// Distinct kernel launch configurations (kernel slices' payload).
    pub launch_configs: Vec<LaunchConfig>,
    /// Distinct copy descriptions (memcpy/memset slices' payload).
    pub copies: Vec<CopyInfo>,
    /// Free-form argument sets (slices' `args`).
    pub arg_sets: Vec<ArgSet>,
    /// Flow arrows.
    pub flows: Vec<Flow>,
    /// Counter samples.
    pub counters: Counters,
    /// Problems met while loading (truncation, skipped events, ...).
    pub diagnostics: Vec<crate::diagnostic::Diagnostic>,
    launch_index: HashMap<LaunchConfig, u32>,
    copy_index: HashMap<CopyInfo, u32>,
}

/// A string pool compared by content (ids and strings), for round-trip tests.
#[derive(Debug, Clone, Default)]
pub struct StringPoolEq(pub StringPool);

impl PartialEq for StringPoolEq {
    fn eq(&self, other: &Self) -> bool {
        self.0.strings == other.0.strings
    }
}

impl std::ops::Deref for StringPoolEq {
    type Target = StringPool;
    fn deref(&self) -> &StringPool {
        &self.0
    }
}

impl std::ops::DerefMut for StringPoolEq {
    fn deref_mut(&mut self) -> &mut StringPool {
        &mut self.0
    }
}

impl Trace {
    /// An empty trace.
    pub fn new() -> Self {
        Self::default()
    }

    /// Interns `s` in the trace's string pool.
    pub fn intern(&mut self, s: &str) -> StrId {
        self.strings.intern(s)
    }

    /// The string for `id`.
    pub fn str(&self, id: StrId) -> &str {
        self.strings.get(id)
    }

    /// Adds a process; returns its index.
    pub fn add_process(&mut self, p: Process) -> u32 {
        self.processes.push(p);
        (self.processes.len() - 1) as u32
    }

    /// Adds a device; returns its model index.
    pub fn add_device(&mut self, d: Device) -> u32 {
        self.devices.push(d);
        (self.devices.len() - 1) as u32
    }

    /// Adds a track of `process`; returns its id.
    pub fn add_track(
        &mut self,
        process: u32,
        parent: Option<TrackId>,
        kind: TrackKind,
        name: &str,
    ) -> TrackId {
        let name = self.intern(name);
        self.tracks.push(Track {
            process,
            parent,
            kind,
            name,
        });
        TrackId((self.tracks.len() - 1) as u32)
    }

    /// Finds a track of `process` with this kind, if any.
    pub fn find_track(&self, process: u32, kind: TrackKind) -> Option<TrackId> {
        self.tracks
            .iter()
            .position(|t| t.process == process && t.kind == kind)
            .map(|i| TrackId(i as u32))
    }

    /// The track `id`.
    pub fn track(&self, id: TrackId) -> &Track {
        &self.tracks[id.0 as usize]
    }

    /// Name of track `id`.
    pub fn track_name(&self, id: TrackId) -> &str {
        self.str(self.track(id).name)
    }

    /// The device a track belongs to (stream, GPU group or device counter).
    pub fn track_device(&self, id: TrackId) -> Option<u32> {
        match self.track(id).kind {
            TrackKind::Stream { device, .. } | TrackKind::Gpu { device } => Some(device),
            TrackKind::Counter { device } => device,
            _ => None,
        }
    }

    /// Index of `lc` in `launch_configs`, adding it if new.
    pub fn intern_launch(&mut self, lc: LaunchConfig) -> u32 {
        if let Some(&i) = self.launch_index.get(&lc) {
            return i;
        }
        let i = self.launch_configs.len() as u32;
        self.launch_configs.push(lc);
        self.launch_index.insert(lc, i);
        i
    }

    /// Index of `c` in `copies`, adding it if new.
    pub fn intern_copy(&mut self, c: CopyInfo) -> u32 {
        if let Some(&i) = self.copy_index.get(&c) {
            return i;
        }
        let i = self.copies.len() as u32;
        self.copies.push(c);
        self.copy_index.insert(c, i);
        i
    }

    /// Reserves room for `n` more slices.
    pub fn reserve_slices(&mut self, n: usize) {
        self.slices.reserve(n);
    }

    /// Appends a slice, interning its payload and arguments; returns its id.
    pub fn push_slice(&mut self, s: NewSlice) -> SliceId {
        let payload = match (s.launch, s.copy) {
            (Some(lc), _) => self.intern_launch(lc),
            (None, Some(c)) => self.intern_copy(c),
            (None, None) => NO_PAYLOAD,
        };
        let args = if s.args.is_empty() {
            NO_ARGS
        } else {
            self.arg_sets.push(s.args);
            (self.arg_sets.len() - 1) as u32
        };
        self.push_slice_raw(
            s.track,
            s.start_ns,
            s.dur_ns,
            s.name,
            s.kind,
            s.class,
            s.correlation,
            payload,
            args,
        )
    }

    /// Appends a slice whose payload and args are already indices.
    #[allow(clippy::too_many_arguments)]
    pub fn push_slice_raw(
        &mut self,
        track: TrackId,
        start_ns: i64,
        dur_ns: i64,
        name: StrId,
        kind: SliceKind,
        class: SliceClass,
        correlation: u32,
        payload: u32,
        args: u32,
    ) -> SliceId {
        let sl = &mut self.slices;
        sl.start_ns.push(start_ns);
        sl.dur_ns.push(dur_ns.max(0));
        sl.track.push(track);
        sl.name.push(name);
        sl.kind.push(kind);
        sl.class.push(class);
        sl.correlation.push(correlation);
        sl.payload.push(payload);
        sl.args.push(args);
        SliceId((sl.len() - 1) as u32)
    }

    /// Appends a counter sample.
    pub fn push_counter(&mut self, track: TrackId, ts_ns: i64, value: f64) {
        self.counters.track.push(track);
        self.counters.ts_ns.push(ts_ns);
        self.counters.value.push(value);
    }

    /// Launch configuration of kernel slice `i`.
    pub fn launch_of(&self, i: usize) -> Option<&LaunchConfig> {
        if self.slices.kind[i] != SliceKind::Kernel {
            return None;
        }
        self.launch_configs.get(self.slices.payload[i] as usize)
    }

    /// Copy description of memcpy/memset slice `i`.
    pub fn copy_of(&self, i: usize) -> Option<&CopyInfo> {
        if !matches!(self.slices.kind[i], SliceKind::Memcpy | SliceKind::Memset) {
            return None;
        }
        self.copies.get(self.slices.payload[i] as usize)
    }

    /// Free-form arguments of slice `i`.
    pub fn args_of(&self, i: usize) -> &[(StrId, ArgValue)] {
        match self.slices.args[i] {
            NO_ARGS => &[],
            a => self
                .arg_sets
                .get(a as usize)
                .map(|v| v.as_slice())
                .unwrap_or(&[]),
        }
    }

    /// Argument `key` of slice `i`.
    pub fn arg(&self, i: usize, key: &str) -> Option<&ArgValue> {
        let k = self.strings.lookup(key)?;
        self.args_of(i)
            .iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v)
    }

    /// Argument `key` of slice `i` as text.
    pub fn arg_string(&self, i: usize, key: &str) -> Option<String> {
        self.arg(i, key).map(|v| self.arg_value_string(v))
    }

    /// An argument value as text.
    pub fn arg_value_string(&self, v: &ArgValue) -> String {
        match v {
            ArgValue::Int(x) => x.to_string(),
            ArgValue::UInt(x) => x.to_string(),
            ArgValue::Double(x) => x.to_string(),
            ArgValue::Bool(x) => x.to_string(),
            ArgValue::Str(s) => self.str(*s).to_string(),
        }
    }

    /// Process of slice `i`.
    pub fn slice_process(&self, i: usize) -> u32 {
        self.track(self.slices.track[i]).process
    }

    /// Sorts slices by (track, start, longest first, kind, name) and remaps
    /// flows: the canonical order readers produce and writers expect.
    pub fn sort_slices(&mut self) {
        let n = self.slices.len();
        let sl = &self.slices;
        let mut order: Vec<u32> = (0..n as u32).collect();
        let sorted = order.windows(2).all(|w| {
            let (a, b) = (w[0] as usize, w[1] as usize);
            slice_key(sl, a) <= slice_key(sl, b)
        });
        if sorted {
            return;
        }
        order.sort_by_key(|&i| slice_key(sl, i as usize));
        // One column at a time, so the transient is one column (at most 8
        // bytes a slice), not a second copy of every column.
        fn permute<T: Copy>(v: &mut Vec<T>, order: &[u32]) {
            let sorted: Vec<T> = order.iter().map(|&i| v[i as usize]).collect();
            *v = sorted;
        }
        let sl = &mut self.slices;
        permute(&mut sl.start_ns, &order);
        permute(&mut sl.dur_ns, &order);
        permute(&mut sl.track, &order);
        permute(&mut sl.name, &order);
        permute(&mut sl.kind, &order);
        permute(&mut sl.class, &order);
        permute(&mut sl.correlation, &order);
        permute(&mut sl.payload, &order);
        permute(&mut sl.args, &order);
        if self.flows.is_empty() {
            return;
        }
        let mut inverse = vec![0u32; n];
        for (new_i, &old_i) in order.iter().enumerate() {
            inverse[old_i as usize] = new_i as u32;
        }
        drop(order);
        for f in &mut self.flows {
            f.from = SliceId(inverse[f.from.0 as usize]);
            f.to = SliceId(inverse[f.to.0 as usize]);
        }
    }

    /// Drops slices, counters, flows and argument sets but keeps processes,
    /// devices, tracks and strings: the collector's batch after a flush.
    pub fn clear_events(&mut self) {
        let sl = &mut self.slices;
        sl.start_ns.clear();
        sl.dur_ns.clear();
        sl.track.clear();
        sl.name.clear();
        sl.kind.clear();
        sl.class.clear();
        sl.correlation.clear();
        sl.payload.clear();
        sl.args.clear();
        self.arg_sets.clear();
        self.flows.clear();
        self.counters = Counters::default();
    }

    /// Rebuilds `flows` from CUDA correlation ids: per process, each GPU
    /// activity slice (kernel, memcpy, memset) with a nonzero correlation
    /// gets a flow from the runtime/driver call of that process with the same
    /// id (the earliest, if several), with the correlation as flow id.
    pub fn link_flows_by_correlation(&mut self) {
        self.flows.clear();
        let sl = &self.slices;
        let process_of = |i: usize| self.tracks[sl.track[i].0 as usize].process;
        // Correlation ids are dense per process (CUPTI and Kineto count up),
        // so a table indexed by (process, correlation) beats hashing; fall
        // back to a map when they are not.
        let max_corr = sl.correlation.iter().copied().max().unwrap_or(0) as usize;
        let nproc = self.processes.len().max(1);
        let dense = (max_corr + 1).saturating_mul(nproc) <= 4 * sl.len() + 1024;
        let mut table: Vec<u32> = if dense {
            vec![u32::MAX; (max_corr + 1) * nproc]
        } else {
            Vec::new()
        };
        let mut map: HashMap<(u32, u32), u32> = HashMap::default();
        let key = |p: u32, c: u32| p as usize * (max_corr + 1) + c as usize;
        for i in 0..sl.len() {
            if sl.correlation[i] == 0
                || !matches!(sl.kind[i], SliceKind::Runtime | SliceKind::Driver)
            {
                continue;
            }
            let (p, c) = (process_of(i), sl.correlation[i]);
            let e = if dense {
                &mut table[key(p, c)]
            } else {
                map.entry((p, c)).or_insert(u32::MAX)
            };
            if *e == u32::MAX || (sl.start_ns[i], i) < (sl.start_ns[*e as usize], *e as usize) {
                *e = i as u32;
            }
        }
        for i in 0..sl.len() {
            if sl.correlation[i] == 0 || !sl.kind[i].is_gpu_activity() {
                continue;
            }
            let (p, c) = (process_of(i), sl.correlation[i]);
            let from = if dense {
                table[key(p, c)]
            } else {
                map.get(&(p, c)).copied().unwrap_or(u32::MAX)
            };
            if from != u32::MAX {
                self.flows.push(Flow {
                    id: u64::from(c),
                    from: SliceId(from),
                    to: SliceId(i as u32),
                });
            }
        }
    }

    /// Count of slices per kind.
    pub fn count_by_kind(&self) -> Vec<(SliceKind, usize)> {
        let mut counts = [0usize; 10];
        for k in &self.slices.kind {
            counts[*k as usize] += 1;
        }
        SliceKind::ALL
            .iter()
            .map(|&k| (k, counts[k as usize]))
            .filter(|(_, c)| *c > 0)
            .collect()
    }

    /// (first start, last end) over all slices, if any.
    pub fn time_span(&self) -> Option<(i64, i64)> {
        let sl = &self.slices;
        if sl.is_empty() {
            return None;
        }
        let mut lo = i64::MAX;
        let mut hi = i64::MIN;
        for i in 0..sl.len() {
            lo = lo.min(sl.start_ns[i]);
            hi = hi.max(sl.start_ns[i].saturating_add(sl.dur_ns[i]));
        }
        Some((lo, hi))
    }

    /// Devices of `process`, as model indices.
    pub fn devices_of(&self, process: u32) -> impl Iterator<Item = u32> + '_ {
        self.devices
            .iter()
            .enumerate()
            .filter(move |(_, d)| d.process == process)
            .map(|(i, _)| i as u32)
    }

    /// Total dropped records over all processes.
    pub fn dropped_records(&self) -> u64 {
        self.processes.iter().map(|p| p.dropped_records).sum()
    }

    /// Moves every timestamp by `dt_ns` (saturating): slices, counters and
    /// capture bounds. Used to lay one run next to another.
    pub fn shift_time(&mut self, dt_ns: i64) {
        for s in &mut self.slices.start_ns {
            *s = s.saturating_add(dt_ns);
        }
        for t in &mut self.counters.ts_ns {
            *t = t.saturating_add(dt_ns);
        }
        for p in &mut self.processes {
            for b in [&mut p.capture_start_ns, &mut p.capture_end_ns]
                .into_iter()
                .flatten()
            {
                *b = b.saturating_add(dt_ns);
            }
        }
    }

    /// Moves everything of `other` into `self` (a multi-rank trace).
    pub fn append(&mut self, other: Trace) {
        let p0 = self.processes.len() as u32;
        let d0 = self.devices.len() as u32;
        let t0 = self.tracks.len() as u32;
        let s0 = self.slices.len() as u32;
        let mut smap = Vec::with_capacity(other.strings.len());
        for i in 0..other.strings.len() {
            smap.push(self.strings.intern(other.strings.get(StrId(i as u32))));
        }
        let ms = |s: StrId| smap[s.0 as usize];
        self.processes.extend(other.processes);
        for mut d in other.devices {
            d.process += p0;
            self.devices.push(d);
        }
        for t in &other.tracks {
            let kind = match t.kind {
                TrackKind::Gpu { device } => TrackKind::Gpu {
                    device: device + d0,
                },
                TrackKind::Stream { device, stream } => TrackKind::Stream {
                    device: device + d0,
                    stream,
                },
                TrackKind::Counter { device } => TrackKind::Counter {
                    device: device.map(|d| d + d0),
                },
                k => k,
            };
            self.tracks.push(Track {
                process: t.process + p0,
                parent: t.parent.map(|p| TrackId(p.0 + t0)),
                kind,
                name: ms(t.name),
            });
        }
        let lmap: Vec<u32> = other
            .launch_configs
            .iter()
            .map(|&l| self.intern_launch(l))
            .collect();
        let cmap: Vec<u32> = other.copies.iter().map(|&c| self.intern_copy(c)).collect();
        let a0 = self.arg_sets.len() as u32;
        for set in other.arg_sets {
            let set = set
                .into_iter()
                .map(|(k, v)| {
                    let v = match v {
                        ArgValue::Str(s) => ArgValue::Str(ms(s)),
                        v => v,
                    };
                    (ms(k), v)
                })
                .collect();
            self.arg_sets.push(set);
        }
        let o = &other.slices;
        self.slices.reserve(o.len());
        for i in 0..o.len() {
            let payload = match o.kind[i] {
                _ if o.payload[i] == NO_PAYLOAD => NO_PAYLOAD,
                SliceKind::Kernel => lmap[o.payload[i] as usize],
                SliceKind::Memcpy | SliceKind::Memset => cmap[o.payload[i] as usize],
                _ => NO_PAYLOAD,
            };
            let args = if o.args[i] == NO_ARGS {
                NO_ARGS
            } else {
                o.args[i] + a0
            };
            self.push_slice_raw(
                TrackId(o.track[i].0 + t0),
                o.start_ns[i],
                o.dur_ns[i],
                ms(o.name[i]),
                o.kind[i],
                o.class[i],
                o.correlation[i],
                payload,
                args,
            );
        }
        for f in other.flows {
            self.flows.push(Flow {
                id: f.id,
                from: SliceId(f.from.0 + s0),
                to: SliceId(f.to.0 + s0),
            });
        }
        for i in 0..other.counters.len() {
            self.push_counter(
                TrackId(other.counters.track[i].0 + t0),
                other.counters.ts_ns[i],
                other.counters.value[i],
            );
        }
        self.diagnostics.extend(other.diagnostics);
    }
}

fn slice_key(sl: &Slices, i: usize) -> (u32, i64, std::cmp::Reverse<i64>, u8, u32) {
    (
        sl.track[i].0,
        sl.start_ns[i],
        std::cmp::Reverse(sl.dur_ns[i]),
        sl.kind[i] as u8,
        sl.name[i].0,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_slice_fits_in_48_bytes() {
        assert!(
            Slices::slice_column_bytes() <= 48,
            "{}",
            Slices::slice_column_bytes()
        );
        // Measure what a million kernels really hold, launch configs shared.
        let mut t = Trace::new();
        let p = t.add_process(Process::default());
        let tr = t.add_track(
            p,
            None,
            TrackKind::Stream {
                device: 0,
                stream: 7,
            },
            "stream 7",
        );
        let n = 1_000_000;
        t.reserve_slices(n);
        let names: Vec<StrId> = (0..50).map(|i| t.intern(&format!("kernel_{i}"))).collect();
        for i in 0..n {
            let mut s = NewSlice::new(tr, SliceKind::Kernel, names[i % 50], i as i64 * 10, 5);
            s.class = SliceClass::Compute;
            s.correlation = i as u32;
            s.launch = Some(LaunchConfig {
                grid: [(i % 8) as u32 + 1, 1, 1],
                block: [128, 1, 1],
                ..Default::default()
            });
            t.push_slice(s);
        }
        let per_slice = (t.slices.heap_bytes()
            + t.launch_configs.capacity() * std::mem::size_of::<LaunchConfig>())
            as f64
            / n as f64;
        assert!(
            per_slice <= 48.0,
            "resident bytes per kernel slice: {per_slice}"
        );
        assert_eq!(t.launch_configs.len(), 8);
    }

    #[test]
    fn hta_classification() {
        use SliceClass::*;
        let k = SliceKind::Kernel;
        assert_eq!(
            SliceClass::of_gpu_name(k, "ncclDevKernel_AllGather_RING_LL(x)"),
            Communication
        );
        assert_eq!(
            SliceClass::of_gpu_name(k, "void ncclKernel_AllReduce_RING_LL_Sum_float(x)"),
            Communication
        );
        assert_eq!(
            SliceClass::of_gpu_name(k, "Memcpy DtoH (Device -> Pinned)"),
            Memory
        );
        assert_eq!(
            SliceClass::of_gpu_name(SliceKind::Memset, "anything"),
            Memory
        );
        assert_eq!(
            SliceClass::of_gpu_name(k, "ampere_sgemm_128x64_nn"),
            Compute
        );
    }

    #[test]
    fn sort_remaps_flows() {
        let mut t = Trace::new();
        let p = t.add_process(Process::default());
        let tr = t.add_track(p, None, TrackKind::Thread { tid: 1 }, "t");
        let n = t.intern("x");
        let a = t.push_slice(NewSlice::new(tr, SliceKind::Runtime, n, 100, 5));
        let b = t.push_slice(NewSlice::new(tr, SliceKind::Runtime, n, 10, 5));
        t.flows.push(Flow {
            id: 1,
            from: a,
            to: b,
        });
        t.sort_slices();
        assert_eq!(t.slices.start_ns, vec![10, 100]);
        assert_eq!(t.flows[0].from, SliceId(1));
        assert_eq!(t.flows[0].to, SliceId(0));
    }

    #[test]
    fn append_offsets_everything() {
        let mk = |pid| {
            let mut t = Trace::new();
            let p = t.add_process(Process {
                pid,
                ..Default::default()
            });
            let d = t.add_device(Device {
                process: p,
                ..Default::default()
            });
            let tr = t.add_track(
                p,
                None,
                TrackKind::Stream {
                    device: d,
                    stream: 7,
                },
                "stream 7",
            );
            let nm = t.intern(&format!("k{pid}"));
            let mut s = NewSlice::new(tr, SliceKind::Kernel, nm, 1, 2);
            s.launch = Some(LaunchConfig {
                grid: [pid, 1, 1],
                ..Default::default()
            });
            t.push_slice(s);
            t
        };
        let mut a = mk(1);
        a.append(mk(2));
        assert_eq!(a.processes.len(), 2);
        assert_eq!(a.track(a.slices.track[1]).process, 1);
        assert_eq!(a.track_device(a.slices.track[1]), Some(1));
        assert_eq!(a.str(a.slices.name[1]), "k2");
        assert_eq!(a.launch_of(1).map(|l| l.grid[0]), Some(2));
    }

    #[test]
    fn flows_link_gpu_work_to_earliest_launch_per_process() {
        let mut t = Trace::new();
        let mut tracks = Vec::new();
        for pid in [1, 2] {
            let p = t.add_process(Process {
                pid,
                ..Default::default()
            });
            let d = t.add_device(Device {
                process: p,
                ..Default::default()
            });
            let host = t.add_track(p, None, TrackKind::Thread { tid: pid }, "t");
            let stream = t.add_track(
                p,
                None,
                TrackKind::Stream {
                    device: d,
                    stream: 7,
                },
                "s",
            );
            tracks.push((host, stream));
        }
        let n = t.intern("x");
        let push = |t: &mut Trace, track, kind, start, corr| {
            let mut s = NewSlice::new(track, kind, n, start, 1);
            s.correlation = corr;
            t.push_slice(s)
        };
        let (h1, s1) = tracks[0];
        let (h2, s2) = tracks[1];
        let late = push(&mut t, h1, SliceKind::Runtime, 50, 9);
        let early = push(&mut t, h1, SliceKind::Driver, 40, 9);
        let k1 = push(&mut t, s1, SliceKind::Kernel, 60, 9);
        let m1 = push(&mut t, s1, SliceKind::Memcpy, 70, 9);
        let other = push(&mut t, h2, SliceKind::Runtime, 10, 9);
        let k2 = push(&mut t, s2, SliceKind::Kernel, 20, 9);
        push(&mut t, s2, SliceKind::Kernel, 30, 0);
        push(&mut t, s2, SliceKind::Kernel, 31, 77);
        push(&mut t, h2, SliceKind::CpuOp, 5, 3);
        push(&mut t, s2, SliceKind::Memset, 32, 3);
        t.flows.push(Flow {
            id: 1,
            from: late,
            to: late,
        });
        t.link_flows_by_correlation();
        assert_eq!(
            t.flows,
            vec![
                Flow {
                    id: 9,
                    from: early,
                    to: k1
                },
                Flow {
                    id: 9,
                    from: early,
                    to: m1
                },
                Flow {
                    id: 9,
                    from: other,
                    to: k2
                },
            ]
        );
    }
}
