//! The analysis result: plain serde data, shared by the CLI renderers, the
//! viewer's panels and the collector's end-of-run summary.
//!
//! Times are microseconds as `f64` (`_us`), or nanoseconds as `i64` (`_ns`)
//! where a value locates something on the timeline. A percentage whose
//! denominator is zero is `None` (JSON `null`), never NaN.

use super::rank::StreamKey;
use crate::model::{DeviceId, ProcessId, SliceId};
use serde::{Deserialize, Serialize};

/// Everything `analyze` found, over all ranks of a trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Report {
    /// One entry per traced process (rank), in trace order.
    pub ranks: Vec<RankReport>,
    /// Traced processes with no GPU work of their own (a launcher such as
    /// torchrun's, a data-loader worker): not ranks.
    pub other_processes: Vec<OtherProcess>,
    /// Per-step rows of every rank (rank-major, step order).
    pub steps: Vec<StepReport>,
    /// Per-collective statistics of every rank (headline window).
    pub collectives: Vec<CollectiveStats>,
    /// The same per step (`window` = "step N"), rank-major, step order.
    pub collectives_per_step: Vec<CollectiveStats>,
    /// Per-device SM occupancy.
    pub occupancy: Vec<DeviceOccupancy>,
    /// Collectives matched across ranks: who waits for whom.
    pub cross_rank: CrossRank,
    /// Synchronization groups of the headline window that cost at least the
    /// GPU-idle threshold, most GPU idle first.
    pub sync_warnings: Vec<SyncGroup>,
    /// Records the collector or importer could not deliver, over the trace.
    pub dropped_records: u64,
    /// Loader diagnostics carried over from the trace, then the analysis's.
    pub diagnostics: Vec<crate::diagnostic::Diagnostic>,
    /// The first screen: per rank step time, overlap, exposed
    /// communication, idle, costliest sync and top kernel; the straggler
    /// (milliseconds; docs/METRICS.md, "Headline").
    #[serde(default)]
    pub headline: super::headline::Headline,
    /// What to fix first: findings ranked by the step time each would
    /// save, as the what-if replay predicts it (docs/METRICS.md,
    /// "Findings"); filled by `findings::attach` (`report`, the viewer),
    /// not by `analyze`.
    #[serde(default)]
    pub findings: Vec<super::findings::Finding>,
}

impl Report {
    /// The steps of `rank` inside its headline window, in report order.
    pub fn window_steps(&self, rank: u32) -> impl Iterator<Item = &StepReport> + '_ {
        let window = self
            .ranks
            .iter()
            .find(|r| r.rank == rank)
            .map(|r| &r.window);
        self.steps
            .iter()
            .filter(move |s| s.rank == rank && window.is_some_and(|w| w.steps.contains(&s.step)))
    }

    /// Median duration of `rank`'s headline-window steps, µs (the mean of
    /// the middle two for an even count); None without steps.
    pub fn median_step_us(&self, rank: u32) -> Option<f64> {
        self.step_time(rank).map(|s| s.median_us)
    }

    /// The step time of `rank` over its headline-window (steady-state)
    /// steps, from each step row's `duration_us`: median and spread; None
    /// without steps. The one place the headline, `compare` and the JSON
    /// `median_step_ms` take step time from.
    pub fn step_time(&self, rank: u32) -> Option<StepTime> {
        let mut d: Vec<f64> = self.window_steps(rank).map(|s| s.duration_us).collect();
        d.sort_by(f64::total_cmp);
        let n = d.len();
        let median_us = match n {
            0 => return None,
            _ if n % 2 == 1 => d[n / 2],
            _ => (d[n / 2 - 1] + d[n / 2]) / 2.0,
        };
        Some(StepTime {
            steps: n as u64,
            median_us,
            min_us: d[0],
            max_us: d[n - 1],
        })
    }
}

/// Step time of one rank over its headline-window steps.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct StepTime {
    /// Steps counted.
    pub steps: u64,
    /// Median duration (the mean of the middle two for an even count), µs.
    pub median_us: f64,
    /// Shortest step, µs.
    pub min_us: f64,
    /// Longest step, µs.
    pub max_us: f64,
}

/// A traced process without GPU work.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct OtherProcess {
    /// The process in the trace (its index).
    pub process: ProcessId,
    /// OS process id.
    pub pid: u32,
    /// RANK as the process saw it, when it had one.
    pub rank: Option<u32>,
    /// Display label ("rank N" or "pid N").
    pub label: String,
    /// Process name.
    pub name: String,
    /// Host-side slices it recorded (API calls, ranges).
    pub host_slices: u64,
}

/// Label of the whole-trace window.
pub const WHOLE_TRACE: &str = "whole trace";

/// Which part of the timeline a number covers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Window {
    /// How the window was chosen.
    pub rule: WindowRule,
    /// Step numbers it covers (empty when steps are unknown).
    pub steps: Vec<i64>,
    /// Host-time bounds of the window; `None` = unbounded on that side.
    pub start_ns: Option<i64>,
    /// See `start_ns`.
    pub end_ns: Option<i64>,
    /// Human-readable: "whole trace", "steps 4..5 (HTA: last step dropped)".
    pub label: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
/// How a [`Window`] was chosen (JSON: snake_case).
pub enum WindowRule {
    /// Every GPU event of the rank.
    #[default]
    WholeTrace,
    /// HTA's rule: with >= 2 ProfilerStep markers, GPU events launched
    /// (by correlation) before the last step's start; µs-rounded times.
    HtaSteps,
    /// Steps chosen with `--steps A..B`.
    SelectedSteps,
    /// Steps without HTA's rule (NVTX, optimizer-step markers, repetition):
    /// the GPU work of the steps after the first (warm-up: lazy
    /// initialization, allocator growth, NCCL setup); start-up and teardown
    /// outside the steps are left out (docs/METRICS.md for repetition).
    SteadySteps,
    /// One step.
    Step,
    /// No steps: from the start of the first repeating kernel sequence.
    FromFirstRepeat,
    /// No steps and no repetition: from the first collective.
    FromFirstCollective,
}

/// HTA-style numbers over one window (all `_us` from merged intervals).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Breakdown {
    /// Merged compute-kernel time |C|.
    pub compute_us: f64,
    /// Merged communication-kernel time |M|.
    pub comm_us: f64,
    /// |C ∩ M|.
    pub overlap_us: f64,
    /// |M \ C|.
    pub exposed_comm_us: f64,
    /// 100 |C ∩ M| / |M|; `None` without communication.
    pub overlap_pct: Option<f64>,
    /// 100 |C ∩ M| / min(|C|, |M|); `None` when either is zero.
    pub overlap_efficiency_pct: Option<f64>,
    /// Last GPU end − first GPU start.
    pub kernel_time_us: f64,
    /// kernel_time − merged busy time of all GPU work.
    pub idle_us: f64,
    /// kernel_time − compute − idle (communication, copies not under compute).
    pub non_compute_us: f64,
    /// 100 idle / kernel_time; `None` when kernel_time is 0.
    pub idle_pct: Option<f64>,
    /// 100 compute / kernel_time; `None` when kernel_time is 0.
    pub compute_pct: Option<f64>,
    /// 100 non_compute / kernel_time; `None` when kernel_time is 0.
    pub non_compute_pct: Option<f64>,
    /// GPU slices (kernels, copies, sets) in the window.
    pub gpu_events: u64,
}

/// One rank (process).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct RankReport {
    /// The rank, or the process index when the trace has no rank.
    pub rank: u32,
    /// Its process in the trace (its index).
    pub process: ProcessId,
    /// Display label of the rank's process.
    pub label: String,
    /// Device name(s) of the rank ("" when unknown).
    pub device: String,
    /// False when the rank has no GPU event at all (every GPU number is 0 / null).
    pub has_gpu_events: bool,
    /// Window of the headline (HTA-compatible) numbers below.
    pub window: Window,
    /// The headline numbers over `window` (flat in JSON: `overlap_pct`,
    /// `exposed_comm_us`, ... sit beside `rank`).
    #[serde(flatten)]
    pub breakdown: Breakdown,
    /// Where steps came from: "ProfilerStep", "nvtx", "optimizer-step",
    /// "repetition" or "none".
    pub step_source: String,
    /// Idle time per stream by HTA's categories (headline window).
    pub idle_by_stream: Vec<StreamIdle>,
    /// Compute streams waiting on communication (headline window).
    pub comm_stalls: CommStalls,
    /// All-gather prefetch slack (headline window).
    pub prefetch: PrefetchSlack,
    /// Host-blocking synchronization groups of this rank that started in
    /// the headline window (their GPU idle is clipped to it).
    pub syncs: Vec<SyncGroup>,
    /// Those that started before the window (start-up, warm-up step).
    pub startup_syncs: Vec<SyncGroup>,
    /// Those that started after it (teardown, the step HTA drops).
    pub after_window_syncs: Vec<SyncGroup>,
    /// Exposed communication (`exposed_comm_us`) while every running
    /// collective waited for a peer; `None` when no collective of the rank
    /// was matched across ranks.
    pub exposed_wait_us: Option<f64>,
    /// The rest of `exposed_comm_us`: a collective was transferring (or
    /// unmatched); `None` as `exposed_wait_us`.
    pub exposed_transfer_us: Option<f64>,
    /// Measured GPU metrics (PM sampling) over the headline window's GPU
    /// span; every value `None` when the trace has no samples for the rank.
    pub measured: super::measured::Measured,
    /// Compute kernels slowed by NCCL kernels sharing the SMs (headline
    /// window; needs no sampling).
    pub sm_contention: super::measured::SmContention,
    /// Median step time over the headline window's steps, ms (`None`
    /// without steps; [`Report::step_time`]).
    #[serde(default)]
    pub median_step_ms: Option<f64>,
    /// The kernels with the most time in the headline window, most first.
    #[serde(default)]
    pub top_kernels: Vec<super::top_kernels::TopKernel>,
    /// Host the rank ran on ("" when unknown).
    #[serde(default)]
    pub host: String,
    /// Wall-clock time (Unix epoch, ns) of the rank's first event, when
    /// the trace holds a realtime clock reading; tells runs apart.
    #[serde(default)]
    pub first_event_unix_ns: Option<i64>,
    /// The same of its last event's end: two ranks whose spans do not
    /// overlap ran at different times (different runs).
    #[serde(default)]
    pub last_event_unix_ns: Option<i64>,
    /// GPU memory from the allocator's samples (Kineto `[memory]` events);
    /// `None` without them.
    #[serde(default)]
    pub memory: Option<super::memory::RankMemory>,
}

/// HTA idle categories of one stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct StreamIdle {
    /// The stream (JSON: `device`, `stream`, and `track` off any device).
    #[serde(flatten)]
    pub at: StreamKey,
    /// Gaps where the launch call started after the previous event's end (host late).
    pub host_wait_us: f64,
    /// Gaps shorter than the kernel-wait threshold (`--kernel-wait-us`, 30 µs).
    pub kernel_wait_us: f64,
    /// The remaining gaps.
    pub other_us: f64,
    /// Sum of the three categories.
    pub total_us: f64,
}

/// Time compute streams sat idle because their next kernel waited on
/// communication (docs/METRICS.md, "Communication stalls").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct CommStalls {
    /// Number of stalls.
    pub count: u64,
    /// Total stall time.
    pub total_us: f64,
    /// Per compute stream.
    pub by_stream: Vec<StreamStall>,
    /// The longest stalls (slice id of the compute kernel that waited).
    pub worst: Vec<Stall>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
/// Communication stalls of one compute stream.
pub struct StreamStall {
    /// The stream (JSON: `device`, `stream`, and `track` off any device).
    #[serde(flatten)]
    pub at: StreamKey,
    /// Number of stalls.
    pub count: u64,
    /// Total stall time.
    pub total_us: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
/// One communication stall.
pub struct Stall {
    /// The compute kernel that started once the communication ended.
    pub slice: SliceId,
    /// The communication kernel it waited for.
    pub comm_slice: SliceId,
    /// Start of the wait (ns).
    pub start_ns: i64,
    /// End of the wait: the compute kernel's start (ns).
    pub end_ns: i64,
    /// Length of the wait.
    pub stall_us: f64,
}

/// All-gather prefetches: late ones (a compute kernel waited for them) and
/// the slack of the others (next compute start on the device minus their end).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct PrefetchSlack {
    /// All-gather kernels considered.
    pub all_gathers: u64,
    /// All-gathers a compute kernel waited for (late prefetches).
    pub late: u64,
    /// How long their consumers waited, in all.
    pub late_us: f64,
    /// Smallest slack; `None` without all-gathers.
    pub min_us: Option<f64>,
    /// Median slack; `None` without all-gathers.
    pub median_us: Option<f64>,
    /// Mean slack; `None` without all-gathers.
    pub mean_us: Option<f64>,
    /// (all-gather slice id, slack µs), in time order.
    pub per_all_gather: Vec<(SliceId, f64)>,
    /// All-gathers with a slack whose bytes are known.
    #[serde(default)]
    pub sized: u64,
    /// Memory prefetching held before any compute kernel ran after it:
    /// over the sized all-gathers, bytes × slack, in byte-seconds; `None`
    /// when none is sized.
    #[serde(default)]
    pub held_early_byte_s: Option<f64>,
    /// The same per layer: the window's all-gathers grouped by their
    /// position in the step (rank entries only; empty in step rows).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_layer: Vec<PrefetchLayer>,
}

/// The all-gathers at one position in the step over a window: under a
/// fixed schedule (FSDP's), the prefetches of one layer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PrefetchLayer {
    /// Position in the step: 0 for each step's first all-gather.
    pub position: u32,
    /// The innermost annotation (NVTX range, `record_function`) around the
    /// launch of the first of them, step ranges left out; `None` without one.
    pub label: Option<String>,
    /// All-gathers at this position (one per step that has one).
    pub all_gathers: u64,
    /// How many a compute kernel waited for.
    pub late: u64,
    /// How long their consumers waited, in all.
    pub late_us: f64,
    /// Mean slack over those with a slack; `None` when none has one.
    pub mean_slack_us: Option<f64>,
    /// Those with a slack whose bytes are known.
    pub sized: u64,
    /// Bytes the first sized one materialized.
    pub bytes: Option<u64>,
    /// Over the sized ones, bytes × slack, in byte-seconds.
    pub held_early_byte_s: Option<f64>,
}

impl PrefetchSlack {
    /// Fills `sized` and `held_early_byte_s` from `per_all_gather` and
    /// each all-gather's bytes.
    pub(crate) fn add_held_early(&mut self, bytes_of: &dyn Fn(u32) -> Option<u64>) {
        let mut sum = 0.0f64;
        for &(id, slack_us) in &self.per_all_gather {
            if let Some(b) = bytes_of(id.get()) {
                self.sized += 1;
                sum += b as f64 * slack_us * 1e-6;
            }
        }
        self.held_early_byte_s = (self.sized > 0).then_some(sum);
    }
}

/// One step of one rank.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct StepReport {
    /// The rank.
    pub rank: u32,
    /// Step number.
    pub step: i64,
    /// Step name (e.g. "ProfilerStep#4").
    pub name: String,
    /// "ProfilerStep", "nvtx", "optimizer-step" or "repetition".
    pub source: String,
    /// Step bounds (host time for marked steps and graph launches, GPU
    /// time for repetition).
    pub start_ns: i64,
    /// See `start_ns`.
    pub end_ns: i64,
    /// The step time on the GPU's clock: from the step's first GPU start to
    /// the next step's first GPU start (the last step, and a step the next
    /// of which ran nothing: to its last GPU end); the host interval when
    /// the step ran no GPU work.
    pub duration_us: f64,
    /// end − start: the host's interval for marked steps.
    #[serde(default)]
    pub host_interval_us: f64,
    /// First GPU start of the step's work (None: it ran none).
    #[serde(default)]
    pub gpu_start_ns: Option<i64>,
    /// CUDA graph launches whose work ran in the step.
    #[serde(default)]
    pub graph_launches: u32,
    /// GPU time (summed durations) of the step's work run by graphs, µs.
    #[serde(default)]
    pub graph_gpu_us: f64,
    /// GPU time of the step's work launched eagerly (not by a graph), µs.
    #[serde(default)]
    pub eager_gpu_us: f64,
    /// GPU work launched in the step (by correlation), or starting in it.
    pub breakdown: Breakdown,
    /// HTA idle categories per stream over the step's GPU work.
    pub idle_by_stream: Vec<StreamIdle>,
    /// All-gather prefetch slack over the step's GPU work (summary only:
    /// `per_all_gather` is empty here, it is in the rank's entry).
    pub prefetch: PrefetchSlack,
    /// Communication stall time of the step.
    pub comm_stall_us: f64,
    /// Host synchronizations that started in the step.
    pub syncs: u64,
    /// Host time those synchronizations blocked.
    pub sync_host_blocked_us: f64,
    /// The rank another rank waited for longest in the collectives this
    /// rank launched in the step; `None` without matched collectives or waits.
    pub straggler_rank: Option<u32>,
    /// That wait: the union of the waiting rank's waits for it, µs.
    pub straggler_wait_us: Option<f64>,
    /// This rank's own waiting for peers in those collectives (union), µs.
    pub comm_wait_us: Option<f64>,
    /// Measured GPU metrics over the GPU span of the step's work.
    pub measured: super::measured::Measured,
    /// Compute time of the step beyond the alone medians of its kernels
    /// (SM contention, `super::measured::SmContention`); `None` when no
    /// kernel of the step is in a group seen both alone and overlapped.
    pub sm_contention_cost_us: Option<f64>,
    /// The step's GPU memory peaks (the rank's `memory`); `None` without
    /// allocator samples.
    #[serde(default)]
    pub memory: Option<super::memory::StepMemory>,
}

/// One collective type of one rank.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct CollectiveStats {
    /// The rank.
    pub rank: u32,
    /// Label of the window covered (the rank's headline window).
    pub window: String,
    /// AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, SendRecv, ...
    pub collective: String,
    /// NCCL algorithm (RING, TREE, ...) from the kernel name.
    pub algorithm: String,
    /// NCCL protocol (LL, LL128, SIMPLE) from the kernel name.
    pub protocol: String,
    /// Data type from the kernel name.
    pub dtype: String,
    /// Reduction op from the kernel name (Sum, ...).
    pub reduce_op: String,
    /// Number of kernels.
    pub count: u64,
    /// Total kernel time.
    pub total_us: f64,
    /// Mean kernel time.
    pub mean_us: f64,
    /// Sum of message bytes, over the kernels whose size is known.
    pub bytes: Option<u64>,
    /// Kernels with a known size.
    pub sized: u64,
    /// Algorithm bandwidth (bytes / time) over the sized kernels, GB/s.
    pub alg_bw_gbps: Option<f64>,
    /// Bus bandwidth (nccl-tests factors), GB/s.
    pub bus_bw_gbps: Option<f64>,
}

/// Occupancy of one device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct DeviceOccupancy {
    /// The rank.
    pub rank: u32,
    /// Always "whole trace".
    pub window: String,
    /// The device (its model index).
    pub device: DeviceId,
    /// Device name.
    pub name: String,
    /// Number of SMs.
    pub sm_count: u32,
    /// "9.0"
    pub compute_capability: String,
    /// Kernels whose occupancy could be computed / could not (no launch config or limits).
    pub kernels_known: u64,
    /// See `kernels_known`.
    pub kernels_unknown: u64,
    /// Time-weighted mean theoretical occupancy of the compute kernels, %.
    pub mean_compute_occupancy_pct: Option<f64>,
    /// Mean share of the SMs held by NCCL kernels while compute kernels run, %.
    pub nccl_sm_share_pct: Option<f64>,
    /// Per kernel name and launch configuration, busiest first.
    pub kernels: Vec<KernelOccupancy>,
    /// Estimated SMs in use: (ts_ns, sms) step points, value holds until the next point.
    pub sms_in_use: Vec<(i64, u32)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
/// Occupancy of one kernel name and launch configuration.
pub struct KernelOccupancy {
    /// Kernel name.
    pub name: String,
    /// HTA class name ("compute", "communication", ...).
    pub class: String,
    /// Number of launches.
    pub count: u64,
    /// Total kernel time.
    pub total_us: f64,
    /// Grid dimensions, in blocks.
    pub grid: [u32; 3],
    /// Block dimensions, in threads.
    pub block: [u32; 3],
    /// Registers per thread.
    pub registers_per_thread: u32,
    /// Static + dynamic shared memory per block, in bytes.
    pub smem_bytes: u32,
    /// Resident blocks per SM.
    pub blocks_per_sm: u32,
    /// Active warps / max warps per SM, %.
    pub theoretical_occupancy_pct: f64,
    /// What bounds blocks per SM: "warps", "registers", "shared memory", "blocks".
    pub limiter: String,
    /// SMs filled at full occupancy: min(SMs, ceil(blocks / blocks_per_sm)).
    pub sms_filled: u32,
    /// SMs the grid touches: min(SMs, blocks).
    pub sms_touched: u32,
}

/// Host-blocking synchronizations of one pattern at one call site.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct SyncGroup {
    /// The rank.
    pub rank: u32,
    /// The headline window's label, "start-up (before the window)" or
    /// "after the window".
    pub window: String,
    /// "item-like", "cpu-copy", "device-sync", "stream-sync" or "event-sync".
    pub pattern: String,
    /// The API (cudaStreamSynchronize, Stream Sync, Memcpy DtoH, ...).
    pub api: String,
    /// Python file:line (function) when known (a native program's C/C++
    /// caller, from the collector), else the enclosing NVTX range path,
    /// else the API.
    #[serde(rename = "where")]
    pub where_: String,
    /// Innermost enclosing NVTX range path ("" when none).
    pub nvtx: String,
    /// Python location ("" when the trace has none); for a native program
    /// recorded by `streamscope record`, its C/C++ caller
    /// (`protocol::CALLER_ARG`: "FILE:LINE (function)" with debug info).
    pub python: String,
    /// Innermost enclosing CPU operator of the first occurrence (aten::item, ...), "" when none.
    pub op: String,
    /// Occurrences.
    pub count: u64,
    /// Steps it occurs in (of the window's steps, for a group in the window).
    pub steps_with: u64,
    /// Occurrences per step of the window (`None` outside it or without steps).
    pub per_step: Option<f64>,
    /// Total duration of the blocking calls.
    pub host_blocked_us: f64,
    /// GPU idle the synchronizations caused (docs/METRICS.md).
    pub gpu_idle_us: f64,
    /// Why it is a warning; `None` when it is not.
    pub warning: Option<String>,
    /// Slice ids of the occurrences (first 256).
    pub slices: Vec<SliceId>,
    /// First occurrence bounds.
    pub start_ns: i64,
    /// See `start_ns`.
    pub end_ns: i64,
}

/// NCCL kernels matched across ranks (docs/METRICS.md, "Cross-rank collectives").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct CrossRank {
    /// The instances summarized: those in every rank's headline window.
    pub window: String,
    /// "sequence" (process group, sequence number), "order" (per NCCL
    /// stream and collective), or "" when nothing was matched.
    pub method: String,
    /// The ranks' clocks ("monotonic, one host").
    pub clocks: String,
    /// Whether the ranks' timestamps can be compared.
    pub comparable: bool,
    /// Communication kernels of all ranks, and those matched.
    pub comm_kernels: u64,
    /// See `comm_kernels`.
    pub matched_kernels: u64,
    /// Matched instances (one per collective call), and those in the window.
    pub instances: u64,
    /// See `instances`.
    pub instances_in_window: u64,
    /// Per collective kind and matching group.
    pub kinds: Vec<CollectiveSkew>,
    /// Who waits for whom: per (waiting rank, last rank to arrive).
    pub waits: Vec<WaitPair>,
    /// Offsets of the clocks other than the first rank's (other hosts),
    /// estimated from the matched collectives' ends.
    pub clock_offsets: Vec<ClockOffset>,
    /// Why kernels were not matched (a rank missing, counts differ, clocks).
    pub notes: Vec<super::xrank::MatchNote>,
}

/// Skew and transfer of one collective kind over matched instances.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct CollectiveSkew {
    /// Collective kind (AllGather, ...).
    pub collective: String,
    /// The matching group ("stream 22", "pg 0").
    pub group: String,
    /// Matched instances.
    pub count: u64,
    /// Arrival skew (last kernel start − first), µs.
    pub skew_median_us: Option<f64>,
    /// 95th percentile arrival skew, µs.
    pub skew_p95_us: Option<f64>,
    /// Largest arrival skew, µs.
    pub skew_max_us: Option<f64>,
    /// Sums over every rank's kernel: duration, waiting and transfer parts, µs.
    pub kernel_us: f64,
    /// See `kernel_us`.
    pub wait_us: f64,
    /// See `kernel_us`.
    pub transfer_us: f64,
    /// (rank, instances it arrived last at).
    pub last_rank: Vec<(u32, u64)>,
    /// Message bytes of the instances whose size is known (null when none is).
    pub bytes: Option<u64>,
    /// Bus bandwidth over the transfer part (latest end − last start), GB/s.
    pub bus_bw_gbps: Option<f64>,
}

/// How long one rank waited for another (summed over instances).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct WaitPair {
    /// The rank that waited.
    pub waiting_rank: u32,
    /// The last rank to arrive.
    pub for_rank: u32,
    /// Instances it waited in.
    pub count: u64,
    /// Total wait.
    pub wait_us: f64,
}

/// A clock (a host's) other than the first rank's, and its offset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ClockOffset {
    /// Host of the ranks on this clock.
    pub host: String,
    /// Clock domain ("monotonic").
    pub clock: String,
    /// Ranks on this clock.
    pub ranks: Vec<u32>,
    /// Added to this clock's times at `at_ns`, puts them on the first
    /// rank's clock (estimated from the matched instances' kernel ends:
    /// docs/METRICS.md, "Clocks").
    pub offset_ns: i64,
    /// How fast the offset changes: at time t it is `offset_ns` +
    /// drift × (t − `at_ns`), µs per s (ppm).
    #[serde(default)]
    pub drift_us_per_s: f64,
    /// The moment (first rank's clock, ns) where the offset is
    /// `offset_ns`: the middle of the matched instances.
    #[serde(default)]
    pub at_ns: i64,
    /// Median absolute deviation of the end differences from their
    /// medians (per collective kind and size, and arrival order), once
    /// the drift is taken out, µs.
    pub residual_us: f64,
    /// Matched instances it was estimated from.
    pub instances: u64,
}
