//! The what-if report's types: what to replay, and per rank and step the
//! measured and predicted figures.

use serde::Serialize;

use super::{Changes, WhatIfNote};

/// What to replay.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WhatIfOptions {
    /// Durations changed.
    pub changes: Changes,
    /// `--drop-syncs` specs: `FILE:LINE` of the Python line, or a substring
    /// of the API name or Python location.
    pub drop_syncs: Vec<String>,
    /// Launches the host may queue ahead of the GPU before a launch call
    /// blocks (`None`: [`super::LAUNCH_QUEUE_DEPTH`]).
    pub launch_queue: Option<u32>,
}

/// The critical path of a step, shares of its length.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct CriticalPath {
    /// Length walked (µs): from the step's end back to its start.
    pub length_us: f64,
    /// Non-NCCL GPU work, %.
    pub compute_pct: f64,
    /// NCCL kernels, %.
    pub communication_pct: f64,
    /// Host time between and inside non-blocking API calls, %.
    pub host_pct: f64,
    /// Host sync calls, %.
    pub sync_pct: f64,
}

/// t_comm / t_compute of one collective kind in a step.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct Regime {
    /// Canonical collective ("AllGather", ...) or the kernel's name when unknown.
    pub collective: String,
    /// NCCL kernels of this kind in the step.
    pub count: u64,
    /// Measured transfer time (after the last rank arrived), summed, µs.
    pub measured_comm_us: f64,
    /// Compute each kernel could hide behind (compute busy time from its
    /// start to the next kernel of its kind on its stream, or the step end), summed, µs.
    pub measured_compute_us: f64,
    /// measured_comm / measured_compute (None without compute).
    pub measured_ratio: Option<f64>,
    /// Predicted transfer time, summed, µs.
    pub predicted_comm_us: f64,
    /// Predicted compute it could hide behind, summed, µs.
    pub predicted_compute_us: f64,
    /// predicted_comm / predicted_compute.
    pub predicted_ratio: Option<f64>,
    /// Kernels whose predicted transfer outlasts their compute (past the communication wall).
    pub past_wall: u64,
    /// "hidden" (ratio ≤ 1) or "past the wall" (ratio > 1), predicted.
    pub regime: String,
}

/// One step of one rank.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct StepWhatIf {
    /// Rank.
    pub rank: u32,
    /// Step number (as `report` numbers steps).
    pub step: i64,
    /// Whether the step is in the rank's headline window (steady state).
    pub in_window: bool,
    /// Measured step time, µs: for host-timed steps the GPU's, from the
    /// step's first GPU work to the next step's, as `report`'s.
    pub measured_step_us: f64,
    /// Predicted step time under the changes, µs.
    pub predicted_step_us: f64,
    /// The unchanged replay's step time, µs (the model's consistency check).
    pub replayed_step_us: f64,
    /// The predicted host interval between the step's markers, µs
    /// (host-timed steps; the step itself otherwise), beside the GPU's side
    /// (`predicted_gpu_us`: from the previous step's end to this step's
    /// last GPU work; 0 unless host-timed with GPU work). The step is the
    /// GPU's side when its last GPU work ends after its markers.
    pub predicted_host_us: f64,
    /// See `predicted_host_us`.
    pub predicted_gpu_us: f64,
    /// 100 |replayed − measured| / measured.
    pub replay_error_pct: f64,
    /// 100 (predicted − measured) / measured.
    pub change_pct: f64,
    /// Measured overlap of communication with compute, %.
    pub measured_overlap_pct: Option<f64>,
    /// Predicted overlap, %.
    pub predicted_overlap_pct: Option<f64>,
    /// Measured exposed communication, µs.
    pub measured_exposed_comm_us: f64,
    /// Predicted exposed communication, µs.
    pub predicted_exposed_comm_us: f64,
    /// Critical path of the predicted step.
    pub critical_path: CriticalPath,
    /// Per collective kind: t_comm / t_compute.
    pub regimes: Vec<Regime>,
}

/// One rank.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct RankWhatIf {
    /// Rank.
    pub rank: u32,
    /// Display label.
    pub label: String,
    /// Where its steps came from.
    pub step_source: String,
    /// Median measured step time over the headline window, µs.
    pub measured_median_step_us: Option<f64>,
    /// Median predicted step time over the headline window, µs.
    pub predicted_median_step_us: Option<f64>,
    /// Mean measured step over the headline window, µs.
    pub measured_mean_step_us: Option<f64>,
    /// Mean predicted step over the headline window, µs: the GPU's time
    /// from the window's first step to the step after it, per step (a host
    /// that runs ahead in one step and waits in the next nets out; the
    /// steady pace, which `report`'s findings take their gains from).
    pub predicted_mean_step_us: Option<f64>,
    /// Its steps.
    pub steps: Vec<StepWhatIf>,
    /// Deeper prefetch only: the peak memory it adds, estimated as one more
    /// unit's gathered parameters per unit of depth (the depth added × the
    /// largest all-gather's output bytes); `None` otherwise, or when no
    /// all-gather's bytes are known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefetch_peak_delta_bytes: Option<u64>,
}

/// The replay of a trace.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct WhatIfReport {
    /// The changes, in words ("none" for the consistency replay only).
    pub changes: String,
    /// Largest |replayed − measured| / measured over every step of every
    /// rank, % (the unchanged replay; the model's consistency check).
    pub consistency_max_error_pct: f64,
    /// Nodes (GPU activities and host API calls) in the graph.
    pub graph_nodes: u64,
    /// Dependency edges in the graph.
    pub graph_edges: u64,
    /// Ranks.
    pub ranks: Vec<RankWhatIf>,
    /// Launches the host may queue ahead of the GPU (the assumed depth).
    pub launch_queue_depth: u32,
    /// Launch calls the full launch queue held in the prediction.
    pub launch_queue_waits: u64,
    /// Notes: syncs dropped, kernels kept as measured, cycles broken.
    pub notes: Vec<WhatIfNote>,
}

/// Why a trace cannot be replayed.
pub type Refusal = String;
