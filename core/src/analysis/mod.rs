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
pub(crate) mod rank;
pub mod relocate;
pub mod render;
mod report;
mod step_rows;
mod steps;
pub mod streamed;
pub(crate) mod sync;
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
pub use steps::is_step_name;
pub use steps::period_starts;
pub use window::step_list;
pub use xrank::{Instance, MatchKey, MatchNote, Matching, Part, RankCount};

use crate::diagnostic::{Diagnostic, Kind};
use serde::{Deserialize, Serialize};

use crate::model::{SliceClass, Trace};
use breakdown::Unions;
use rank::{Ev, RankCtx, NONE};
use step_rows::{assign_steps, host_runs_ahead, step_rows};
use window::headline_window;

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
    let parts = par_map(ctxs, &|planned| {
        let ctx = planned.fill(trace, &classes);
        if opts.rank.is_none_or(|r| r == ctx.rank) {
            analyze_rank_alone(trace, ctx, opts, hta_filter, &nccl, &keys, split)
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

/// Analyzes one rank on its own (everything but what needs the other
/// ranks' collectives), and takes its collective records.
pub(crate) fn analyze_rank_alone(
    trace: &Trace,
    mut ctx: RankCtx,
    opts: &AnalysisOptions,
    hta_filter: bool,
    nccl: &collectives::NcclNames,
    keys: &crate::comms::CommKeys,
    split: bool,
) -> RankPart {
    let mut report = Report::default();
    let detected = steps::detect(trace, &ctx);
    let (steps, source) = (&detected.steps, detected.source);
    assign_steps(trace, &mut ctx, steps);
    let (window, keep, window_steps) = headline_window(
        trace,
        &ctx,
        &detected,
        hta_filter,
        opts,
        &mut report.diagnostics,
    );
    let head: Vec<&Ev> = ctx.gpu.iter().filter(|e| keep(e)).collect();
    let all: Vec<&Ev> = ctx.gpu.iter().collect();
    let comms = xrank::collect(trace, &ctx, nccl, keys, &*keep);
    let gpu_span = head
        .iter()
        .map(|e| e.s)
        .min()
        .zip(head.iter().map(|e| e.e).max());
    let sync_window = sync::SyncWindow {
        start: window.start_ns,
        end: window.end_ns,
        gpu_span,
        label: &window.label,
        steps: window_steps.clone(),
    };
    let is_all_gather = |id| nccl.is_all_gather(trace, id);
    // Per step: the communication kernels launched in each step.
    let mut comm_by_step: Vec<Vec<&Ev>> = vec![Vec::new(); steps.len()];
    for e in &ctx.gpu {
        if e.class == SliceClass::Communication && e.step != NONE {
            if let Some(v) = comm_by_step.get_mut(e.step as usize) {
                v.push(e);
            }
        }
    }
    // The figures below are independent: computed in two halves, each on a
    // core of its own when cores are spare (the report is the same).
    let (mine, theirs) = join(
        split,
        || {
            let idle = waits::idle_by_stream(trace, &ctx, &head, opts.consecutive_kernel_delay_ns);
            // One search for the stalls of the window, for both figures (and
            // for the steps' when the window holds every event).
            let hits = waits::stall_hits(trace, &ctx, &head, opts.stall_tolerance_ns);
            let (comm_stalls, _) = waits::comm_stalls_of(&ctx, &head, &hits);
            let prefetch = waits::prefetch_slack_of(&ctx, &head, &hits, is_all_gather);
            let all_hits = (head.len() == all.len()).then_some(hits);
            let rows = step_rows(
                trace,
                &ctx,
                steps,
                &detected.graph_corrs,
                &all,
                &is_all_gather,
                all_hits,
                opts,
            );
            (idle, comm_stalls, prefetch, rows)
        },
        || {
            let unions = Unions::of(head.iter().copied());
            let mut comm_head: Vec<(i64, i64)> = Vec::new();
            let mut extra: Vec<(i64, i64)> = Vec::new();
            for e in head.iter().filter(|e| e.class == SliceClass::Communication) {
                comm_head.push((e.s, e.e));
                if !xrank::is_comm_kernel(trace, e) {
                    extra.push((e.s.min(e.e), e.e));
                }
            }
            intervals::union_in_place(&mut comm_head);
            let local = RankLocal {
                steps: steps.iter().map(|s| s.number).collect(),
                exposed: intervals::difference(&comm_head, &unions.compute),
                extra,
            };
            let found = sync::find(trace, &ctx, steps, &sync_window, opts);
            let contention =
                measured::sm_contention(trace, &ctx, &head, steps.len(), window_steps.len());
            let series = measured::rank_series(trace, &ctx);
            let param_comms = collectives::param_comms_by_track(trace, &ctx);
            let colls = collectives::stats_with(trace, &ctx, &head, nccl, &param_comms);
            let per_step: Vec<Option<Vec<_>>> = (comm_by_step.iter())
                .map(|evs| {
                    (!evs.is_empty())
                        .then(|| collectives::stats_with(trace, &ctx, evs, nccl, &param_comms))
                })
                .collect();
            let occupancy = occupancy::devices(trace, &ctx, opts);
            (
                unions, local, found, contention, series, colls, per_step, occupancy,
            )
        },
    );
    let (idle_by_stream, comm_stalls, prefetch, mut rows) = mine;
    let (unions, local, found, contention, series, mut colls, per_step_colls, occupancy) = theirs;
    let b = unions.breakdown();
    report
        .sync_warnings
        .extend(found.groups.iter().filter(|s| s.warning.is_some()).cloned());
    for (row, &(syncs, blocked_ns)) in rows.iter_mut().zip(&found.per_step) {
        row.syncs = syncs;
        row.sync_host_blocked_us = blocked_ns as f64 / 1000.0;
    }
    let (sm_contention, contention_per_step) = contention;
    if !series.is_empty() {
        let mut spans: Vec<Option<(i64, i64)>> = vec![None; steps.len()];
        let mut compute: Vec<Vec<(i64, i64)>> = vec![Vec::new(); steps.len()];
        for e in &ctx.gpu {
            if let Some(sp) = spans.get_mut(e.step as usize) {
                *sp = Some(sp.map_or((e.s, e.e), |(a, b)| (a.min(e.s), b.max(e.e))));
            }
            if e.class == SliceClass::Compute {
                if let Some(c) = compute.get_mut(e.step as usize) {
                    c.push((e.s, e.e));
                }
            }
        }
        for ((row, sp), c) in rows.iter_mut().zip(&spans).zip(compute) {
            let (a, b) = sp.unwrap_or((row.start_ns, row.end_ns));
            row.measured = measured::measure(&series, a, b, &intervals::union(c));
        }
    }
    for (row, c) in rows.iter_mut().zip(contention_per_step) {
        row.sm_contention_cost_us = c;
    }
    let rank_measured = match gpu_span {
        Some((a, b)) if !series.is_empty() => measured::measure(&series, a, b, &unions.compute),
        _ => measured::Measured::default(),
    };
    if let Some(d) = host_runs_ahead(ctx.rank, &rows) {
        report.diagnostics.push(d);
    }
    let bounds: Vec<(i64, i64, i64)> = rows
        .iter()
        .map(|r| (r.step, r.start_ns, r.end_ns))
        .collect();
    let memory = memory::of_rank(trace, &ctx, &bounds).map(|(rank, per_step)| {
        for (row, m) in rows.iter_mut().zip(per_step) {
            row.memory = m;
        }
        rank
    });
    report.steps.extend(rows);
    let syncs = found.groups;
    colls
        .iter_mut()
        .for_each(|c| c.window = window.label.clone());
    let mut rank_measured = rank_measured;
    if rank_measured.any() {
        rank_measured.collective_link_gb = measured::collective_link_gb(&colls);
    }
    report.collectives.extend(colls);
    // This rank's step rows are the last `steps.len()` ones.
    let first_row = report.steps.len().saturating_sub(steps.len());
    for (k, rows) in per_step_colls.into_iter().enumerate() {
        let Some(mut rows) = rows else {
            continue;
        };
        rows.iter_mut()
            .for_each(|c| c.window = format!("step {}", steps[k].number));
        if let Some(row) = report.steps.get_mut(first_row + k) {
            if row.measured.any() {
                row.measured.collective_link_gb = measured::collective_link_gb(&rows);
            }
        }
        report.collectives_per_step.extend(rows);
    }
    report.occupancy.extend(occupancy);
    let p = &trace.processes()[ctx.process.index()];
    let mut device: Vec<String> = trace
        .devices_of(ctx.process)
        .filter(|d| ctx.device.is_none_or(|only| only == *d))
        .map(|d| trace.devices()[d.index()].name.clone())
        .collect();
    device.dedup();
    report.ranks.push(RankReport {
        rank: ctx.rank,
        process: ctx.process,
        label: match ctx.device {
            Some(d) => format!("{} · GPU {}", p.label(), trace.devices()[d.index()].ordinal),
            None => p.label(),
        },
        device: device.join(", "),
        has_gpu_events: !ctx.gpu.is_empty(),
        window,
        breakdown: b,
        step_source: source.name().to_string(),
        idle_by_stream,
        comm_stalls,
        prefetch,
        syncs,
        startup_syncs: found.startup,
        after_window_syncs: found.after,
        exposed_wait_us: None,
        exposed_transfer_us: None,
        measured: rank_measured,
        sm_contention,
        memory,
        ..RankReport::default()
    });
    headline::stamp(trace, &ctx, &head, window_steps.len(), &mut report.ranks);
    // Kept until every rank is read (many ranks): no spare capacity.
    report.collectives_per_step.shrink_to_fit();
    report.collectives.shrink_to_fit();
    report.sync_warnings.shrink_to_fit();
    report.steps.shrink_to_fit();
    RankPart {
        report,
        local,
        comms,
        analyzed: true,
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
        let n = sl.name()[i].0 as usize;
        if is_step.of(sl.name()[i]) && !names.contains(&(n as u32)) {
            names.push(n as u32);
            if names.len() >= 2 {
                break;
            }
        }
    }
    names
        .into_iter()
        .map(|n| t.str(crate::model::StrId(n)).to_string())
        .collect()
}
