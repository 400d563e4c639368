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
//! A `Trace` is sealed: its tables are read through accessors returning
//! slices (`trace.slices().start_ns()`), and only a [`TraceBuilder`] makes
//! one. [`TraceBuilder::finish`] sorts the slices (by track, then start) and
//! remaps flows, so every `Trace` is sorted; ids ([`SliceId`], [`TrackId`],
//! [`ProcessId`], [`DeviceId`]) index its tables.
//!
//! All times are `i64` nanoseconds on the process's clock ([`ClockDomain`]).

mod allocations;
mod builder;
#[cfg(test)]
mod differential_tests;
#[cfg(test)]
mod tests;
mod trace;

pub use allocations::Allocations;
pub use builder::{NewSlice, TraceBuilder};
pub use trace::{Counters, Slices, Trace};

use rustc_hash::FxHashMap as HashMap;

/// Index into the [`StringPool`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct StrId(pub(in crate::model) u32);

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

/// Declares an id type of a model table: a `u32` index only the model
/// makes, ordered, hashable, and serialized as the bare number.
macro_rules! table_id {
    ($(#[$doc:meta])* $t:ident) => {
        $(#[$doc])*
        #[derive(
            Debug,
            Clone,
            Copy,
            PartialEq,
            Eq,
            Hash,
            PartialOrd,
            Ord,
            Default,
            serde::Serialize,
            serde::Deserialize,
        )]
        #[serde(transparent)]
        pub struct $t(pub(in crate::model) u32);
    };
}

table_id!(
    /// Index of a process in [`Trace::processes`].
    ProcessId
);

table_id!(
    /// Index of a device in [`Trace::devices`] (the model device index).
    DeviceId
);

macro_rules! id_index {
    ($($t:ident),*) => {$(
        impl $t {
            /// The id as an index into its table.
            #[inline]
            pub fn index(self) -> usize {
                self.0 as usize
            }
            /// The id of index `i` (which must fit in 32 bits).
            #[inline]
            pub const fn from_index(i: usize) -> Self {
                $t(i as u32)
            }
            /// The id as stored: its index as a `u32`.
            #[inline]
            pub fn get(self) -> u32 {
                self.0
            }
        }
    )*};
}
id_index!(SliceId, TrackId, ProcessId, DeviceId, StrId);

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
    /// Owning process.
    pub process: ProcessId,
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

/// Index of a track in [`Trace::tracks`].
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct TrackId(pub(in crate::model) u32);

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
        /// The device.
        device: DeviceId,
    },
    /// One CUDA stream of a device (a model device index).
    Stream {
        /// The device.
        device: DeviceId,
        /// CUDA stream id.
        stream: u32,
    },
    /// A counter series (SMs in use, ...), optionally tied to a device.
    Counter {
        /// The device, if the counter belongs to a device.
        device: Option<DeviceId>,
    },
    /// Anything else (tracks of foreign Perfetto traces).
    Other,
}

/// A timeline track.
#[derive(Debug, Clone, PartialEq)]
pub struct Track {
    /// Owning process.
    pub process: ProcessId,
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

/// `payload` value for a slice without launch configuration or copy.
pub const NO_PAYLOAD: u32 = u32::MAX;
/// `args` value for a slice without free-form arguments.
pub const NO_ARGS: u32 = u32::MAX;

/// A free-form argument value.
#[derive(Debug, Clone, Copy, PartialEq)]
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

table_id!(
    /// Index of a slice in a [`Trace`]'s [`Slices`]. (A builder's slice ids
    /// are its own: [`TraceBuilder::finish`] reorders slices.) Serialized as
    /// the bare number.
    SliceId
);

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
