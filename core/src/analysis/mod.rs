//! Analyses: overlap, exposed communication, idle time, steps, sync stalls, SM occupancy.
//!
//! `analyze` splits the trace per process (rank) in one pass, sorts each
//! rank's GPU events once, and derives every metric by sweeps over merged
//! intervals. Definitions and windows: docs/METRICS.md.

mod assemble;
mod breakdown;
pub(crate) mod collectives;
pub mod compare;
pub mod findings;
mod graph_steps;
pub mod headline;
pub(crate) mod intervals;
pub mod invariants;
pub mod job;
mod measured;
pub mod memory;
mod names;
pub(crate) use crate::nccl;
mod occupancy;
mod passes;
mod prefetch_layers;
pub(crate) mod rank;
pub mod relocate;
pub mod render;
mod report;
mod step_marks;
mod step_rows;
mod steps;
mod stream_creation;
mod stream_key;
pub mod streamed;
pub(crate) mod sync;
mod sync_steps;
pub mod top_kernels;
mod waits;
pub mod whatif;
mod window;
mod xrank;

#[cfg(test)]
mod split_tests;

pub use crate::arg_keys::ARG_KEYS;
pub use findings::Finding;
pub use measured::Measured;
pub use nccl::bus_factor;
pub use report::*;
pub use step_marks::running_step_ends;
pub use steps::is_step_name;
pub use steps::period_starts;
pub use window::step_list;
pub use xrank::{Instance, MatchKey, MatchNote, Matching, Part, RankCount};

use crate::diagnostic::{Diagnostic, Kind};
use serde::{Deserialize, Serialize};

use crate::model::Trace;
pub(crate) use passes::analyze_rank_alone;
use rank::RankCtx;

/// What to analyze and the thresholds used.
#[derive(Debug, Clone, PartialEq)]
pub struct AnalysisOptions {
    /// Only this rank (None = all).
    pub rank: Option<u32>,
    /// Only steps `a..=b` for the headline numbers (None = HTA's window).
    pub steps: Option<(i64, i64)>,
    /// HTA rounding to whole µs: `None` = for Kineto-sourced ranks only.
    pub hta_rounding: Option<bool>,
    /// HTA's consecutive_kernel_delay: gaps below it are "kernel wait".
    /// HTA's default is 30 in its trace unit, µs for Kineto traces.
    pub consecutive_kernel_delay_ns: i64,
    /// A sync group costing at least this much GPU idle is a warning.
    pub sync_gpu_idle_threshold_us: f64,
    /// How close a kernel's start must follow the end of what it waited for
    /// (a collective, or the copy queued behind one) to count as released by it.
    pub stall_tolerance_ns: i64,
    /// Cap on the points of each SMs-in-use series (max per bucket beyond it).
    pub sm_series_max_points: usize,
}

impl Default for AnalysisOptions {
    fn default() -> Self {
        AnalysisOptions {
            rank: None,
            steps: None,
            hta_rounding: None,
            consecutive_kernel_delay_ns: 30_000,
            sync_gpu_idle_threshold_us: 50.0,
            stall_tolerance_ns: 25_000,
            sm_series_max_points: 100_000,
        }
    }
}

/// Analyzes every rank of `trace`.
pub fn analyze(trace: &Trace, opts: &AnalysisOptions) -> Report {
    analyze_split(trace, opts, None)
}

/// [`analyze`], each rank's work in two halves on two threads as `split`
/// says (`None`: when cores are left over by the ranks).
fn analyze_split(trace: &Trace, opts: &AnalysisOptions, split: Option<bool>) -> Report {
    // Planned first (slice ids only), each rank's events gathered by the
    // thread that analyzes it: the events of every rank never coexist.
    let all = rank::plan(trace, opts.hta_rounding);
    let classes = rank::ClassTable::new(trace);
    let hta_filter = hta_filter_active(trace);
    let mut report = Report {
        dropped_records: trace.dropped_records(),
        diagnostics: trace.diagnostics().to_vec(),
        ..Default::default()
    };
    let mut ctxs = split_other_processes(trace, all, &mut report.other_processes);
    if ctxs.is_empty() {
        report.diagnostics.push(no_gpu_work(&format!(
            "{} event(s) of {} process(es)",
            trace.slices().len(),
            trace.processes().len()
        )));
    }
    rank::number_ranks(trace, &mut ctxs);
    let nccl = collectives::NcclNames::new(trace);
    let keys = crate::comms::CommKeys::new(trace);
    if let Some(r) = opts.rank {
        if !ctxs.iter().any(|c| c.ctx.rank == r) {
            report.diagnostics.push(no_such_rank(r));
        }
    }
    // Ranks are independent: analyze them on all cores, in rank order so
    // the report does not depend on the thread count. Collectives across
    // ranks are matched over every rank, before `--rank` narrows them.
    // Cores left over by the ranks split the work of each.
    let split = split.unwrap_or_else(|| cores() > ctxs.len());
    let input = passes::Inputs {
        trace,
        opts,
        hta_filter,
        nccl: &nccl,
        keys: &keys,
        split,
    };
    let parts = par_map(ctxs, &|planned| {
        let ctx = planned.fill(trace, &classes);
        if opts.rank.is_none_or(|r| r == ctx.rank) {
            analyze_rank_alone(&input, ctx)
        } else {
            records_only(trace, &ctx, &nccl, &keys)
        }
    });
    let mut asm = assemble::Assembly::default();
    for p in parts {
        asm.push(p);
    }
    let matching = xrank::match_records(&asm.comms);
    asm.finish(report, &matching, opts)
}

/// The cores this process may use.
fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `f` over `items` on all cores (contiguous chunks, one per thread),
/// results in the order of `items`.
pub(crate) fn par_map<T: Send, R: Send>(items: Vec<T>, f: &(dyn Fn(T) -> R + Sync)) -> Vec<R> {
    let threads = cores().min(items.len().max(1));
    let per_thread = items.len().div_ceil(threads.max(1)).max(1);
    let mut chunks: Vec<Vec<T>> = Vec::new();
    let mut it = items.into_iter().peekable();
    while it.peek().is_some() {
        chunks.push(it.by_ref().take(per_thread).collect());
    }
    // The first chunk runs on the calling thread: what its allocator keeps
    // of the work's memory is reused by the caller afterwards, where a
    // spawned thread's would stay with that thread's arena.
    let mut chunks = chunks.into_iter();
    let first = chunks.next();
    std::thread::scope(|scope| {
        let handles: Vec<_> = chunks
            .map(|chunk| scope.spawn(move || chunk.into_iter().map(f).collect::<Vec<R>>()))
            .collect();
        let mut out: Vec<R> = first.into_iter().flatten().map(f).collect();
        for h in handles {
            out.extend(
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            );
        }
        out
    })
}

/// `(a(), b())`: `b` on a second thread when `split`, else after `a`.
fn join<A, B: Send>(split: bool, a: impl FnOnce() -> A, b: impl FnOnce() -> B + Send) -> (A, B) {
    if !split {
        let x = a();
        return (x, b());
    }
    crate::par::beside(a, b)
}

/// NCCL kernels matched across ranks, as [`analyze`] matches them: the
/// processes with GPU work are the ranks, numbered as in its report.
pub fn match_collectives(trace: &Trace) -> Matching {
    let mut others = Vec::new();
    let mut ctxs = split_other_processes(trace, rank::build(trace, None), &mut others);
    rank::number_ranks(trace, &mut ctxs);
    xrank::match_ranks(trace, &ctxs, &collectives::NcclNames::new(trace))
}

/// The diagnostic for `--rank R` naming no rank.
/// No rank to report: no GPU work in `what` (a trace's events, files).
pub(crate) fn no_gpu_work(what: &str) -> Diagnostic {
    Diagnostic::new(
        Kind::NoGpuWork,
        1,
        format!("no GPU work (kernels, copies, memsets) in {what}: no rank to report"),
    )
}

pub(crate) fn no_such_rank(r: u32) -> Diagnostic {
    Diagnostic::new(Kind::NoSuchRank, 1, format!("no rank {r} in the trace"))
}

/// Rank contexts of `all`, the processes without GPU work (a launcher is
/// not a rank) moved to `others`.
pub(crate) fn split_other_processes<C: rank::RankLike>(
    trace: &Trace,
    all: Vec<C>,
    others: &mut Vec<OtherProcess>,
) -> Vec<C> {
    let mut ctxs: Vec<C> = Vec::with_capacity(all.len());
    for planned in all {
        let c = planned.as_ref();
        if planned.gpu_events() == 0 && c.device.is_none() {
            let p = &trace.processes()[c.process.index()];
            others.push(OtherProcess {
                process: c.process,
                pid: p.pid,
                rank: p.rank,
                label: format!("pid {}", p.pid),
                name: p.name.clone(),
                host_slices: c.host.len() as u64,
            });
        } else {
            ctxs.push(planned);
        }
    }
    ctxs
}

/// What a rank's cross-rank figures need from its own analysis, once the
/// collectives of every rank are matched.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RankLocal {
    /// The rank's step numbers, in its step order.
    pub steps: Vec<i64>,
    /// Its exposed communication in the headline window, M \ C (disjoint, ascending).
    pub exposed: Vec<(i64, i64)>,
    /// Its communication slices in the window that are not kernels (never matched).
    pub extra: Vec<(i64, i64)>,
}

/// One rank analyzed on its own: its rows, what its cross-rank figures
/// need, and its collective records.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RankPart {
    /// Its rows (`ranks` holds this rank alone; `cross_rank`, straggler and
    /// wait fields are filled once the collectives are matched).
    pub report: Report,
    /// See [`RankLocal`].
    pub local: RankLocal,
    /// Its NCCL kernels.
    pub comms: xrank::RankComms,
    /// False when `--rank` left it out: only `comms` is meaningful.
    pub analyzed: bool,
}

/// The records of a rank `--rank` leaves out (its kernels are still matched).
pub(crate) fn records_only(
    trace: &Trace,
    ctx: &RankCtx,
    nccl: &collectives::NcclNames,
    keys: &crate::comms::CommKeys,
) -> RankPart {
    RankPart {
        comms: xrank::collect(trace, ctx, nccl, keys, &|_| false),
        ..Default::default()
    }
}

/// HTA filters by steps only when the trace names at least two distinct ProfilerStep events.
fn hta_filter_active(t: &Trace) -> bool {
    profiler_step_names(t).len() >= 2
}

/// The first two distinct names of host slices that contain "ProfilerStep"
/// (what [`hta_filter_active`] decides on).
pub(crate) fn profiler_step_names(t: &Trace) -> Vec<String> {
    let mut names: Vec<u32> = Vec::new();
    let sl = t.slices();
    let mut is_step = names::profiler_step(t);
    for i in 0..sl.len() {
        if sl.kind()[i].is_gpu_activity() {
            continue;
        }
        let n = sl.name()[i].index();
        if is_step.of(sl.name()[i]) && !names.contains(&(n as u32)) {
            names.push(n as u32);
            if names.len() >= 2 {
                break;
            }
        }
    }
    names
        .into_iter()
        .map(|n| {
            t.str(crate::model::StrId::from_index(n as usize))
                .to_string()
        })
        .collect()
}
