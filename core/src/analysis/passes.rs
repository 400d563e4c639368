//! One rank's analysis, as a pipeline of passes over one context.
//!
//! [`analyze_rank_alone`] runs the passes in order; each reads what the
//! ones before it left in the context and adds its own:
//!
//! 1. [`Stepped::new`]: the rank's steps (markers, CUDA graph launches or
//!    repetition) and each GPU event's step;
//! 2. [`Windowed::new`]: the headline window, the events in it, the
//!    rank's collective records and communication kernels per step;
//! 3. [`Windowed::figures`]: everything that depends only on 1-2, in two
//!    independent halves (on two cores when some are spare): per-stream
//!    idle, communication stalls, prefetch slack and the step rows | the
//!    overlap unions, exposed communication, syncs, SM contention, the
//!    measured series, collectives and occupancy;
//! 4. [`Windowed::fill_steps`]: per-step syncs, measured metrics, SM
//!    contention cost and GPU memory, onto the step rows;
//! 5. [`Windowed::finish`]: the collectives' windows and link traffic, the
//!    rank's row and its headline stamp.
//!
//! What needs every rank (matching collectives, stragglers, waits) runs
//! after all ranks' pipelines, in `assemble`.

use super::breakdown::Unions;
use super::collectives::{self, NcclNames};
use super::rank::{Ev, RankCtx, NONE};
use super::step_rows::{assign_steps, host_runs_ahead, step_rows};
use super::steps::{self, Detected};
use super::window::headline_window;
use super::{
    headline, intervals, measured, memory, occupancy, sync, waits, xrank, AnalysisOptions,
    CollectiveStats, CommStalls, DeviceOccupancy, PrefetchSlack, RankLocal, RankPart, RankReport,
    Report, StepReport, StreamIdle, Window,
};
use crate::comms::CommKeys;
use crate::model::{SliceClass, Trace};

/// What every pass reads: the trace, the options and the name tables.
pub(crate) struct Inputs<'a> {
    pub trace: &'a Trace,
    pub opts: &'a AnalysisOptions,
    pub hta_filter: bool,
    pub nccl: &'a NcclNames,
    pub keys: &'a CommKeys,
    /// Whether the two halves of pass 3 may run on two threads.
    pub split: bool,
}

/// Pass 1's context: the rank with its steps found and its events placed in them.
pub(crate) struct Stepped {
    ctx: RankCtx,
    detected: Detected,
}

impl Stepped {
    /// Pass 1.
    pub fn new(t: &Trace, mut ctx: RankCtx) -> Stepped {
        let detected = steps::detect(t, &ctx);
        assign_steps(t, &mut ctx, &detected.steps);
        Stepped { ctx, detected }
    }
}

/// Pass 2's context: the headline window and the events it keeps.
pub(crate) struct Windowed<'r> {
    input: &'r Inputs<'r>,
    ctx: &'r RankCtx,
    detected: &'r Detected,
    window: Window,
    window_steps: std::ops::Range<usize>,
    /// GPU events in the window, and all of them (both by start).
    head: Vec<&'r Ev>,
    all: Vec<&'r Ev>,
    /// First start and last end of the window's events.
    gpu_span: Option<(i64, i64)>,
    /// The rank's collective records (the window's marked).
    comms: xrank::RankComms,
    /// Per step: its communication kernels.
    comm_by_step: Vec<Vec<&'r Ev>>,
    /// Diagnostics of the rank's own (the window's, host running ahead).
    report: Report,
}

/// Pass 3's figures, before the passes after it place them.
pub(crate) struct Figures {
    idle_by_stream: Vec<StreamIdle>,
    comm_stalls: CommStalls,
    prefetch: PrefetchSlack,
    rows: Vec<StepReport>,
    unions: Unions,
    local: RankLocal,
    found: sync::SyncFindings,
    sm_contention: measured::SmContention,
    contention_per_step: Vec<Option<f64>>,
    series: Vec<(crate::gpu_metrics::Metric, measured::Series)>,
    collectives: Vec<CollectiveStats>,
    collectives_per_step: Vec<Option<Vec<CollectiveStats>>>,
    occupancy: Vec<DeviceOccupancy>,
    memory: Option<memory::RankMemory>,
}

/// What pass 3's second half makes.
struct OverlapHalf {
    unions: Unions,
    local: RankLocal,
    found: sync::SyncFindings,
    contention: (measured::SmContention, Vec<Option<f64>>),
    series: Vec<(crate::gpu_metrics::Metric, measured::Series)>,
    collectives: Vec<CollectiveStats>,
    per_step: Vec<Option<Vec<CollectiveStats>>>,
    occupancy: Vec<DeviceOccupancy>,
}

impl<'r> Windowed<'r> {
    /// Pass 2.
    pub fn new(input: &'r Inputs<'r>, s: &'r Stepped) -> Windowed<'r> {
        let (t, ctx) = (input.trace, &s.ctx);
        let mut report = Report::default();
        let (window, keep, window_steps) = headline_window(
            t,
            ctx,
            &s.detected,
            input.hta_filter,
            input.opts,
            &mut report.diagnostics,
        );
        let head: Vec<&Ev> = ctx.gpu.iter().filter(|e| keep(e)).collect();
        let all: Vec<&Ev> = ctx.gpu.iter().collect();
        let comms = xrank::collect(t, ctx, input.nccl, input.keys, &*keep);
        let gpu_span = head
            .iter()
            .map(|e| e.s)
            .min()
            .zip(head.iter().map(|e| e.e).max());
        let mut comm_by_step: Vec<Vec<&Ev>> = vec![Vec::new(); s.detected.steps.len()];
        for e in &ctx.gpu {
            if e.class == SliceClass::Communication && e.step != NONE {
                if let Some(v) = comm_by_step.get_mut(e.step as usize) {
                    v.push(e);
                }
            }
        }
        Windowed {
            input,
            ctx,
            detected: &s.detected,
            window,
            window_steps,
            head,
            all,
            gpu_span,
            comms,
            comm_by_step,
            report,
        }
    }

    /// Pass 3: the figures that depend only on the steps and the window.
    /// They are independent, computed in two halves, each on a core of its
    /// own when cores are spare (the report is the same either way).
    pub fn figures(&self) -> Figures {
        let (t, ctx, opts) = (self.input.trace, self.ctx, self.input.opts);
        let steps = &self.detected.steps;
        let head = &self.head;
        let nccl = self.input.nccl;
        let is_all_gather = |id| nccl.is_all_gather(t, id);
        // Each communication kernel's arguments and bytes, for both halves.
        let sizer = collectives::Sizer::new(t, ctx, nccl);
        let sizer = &sizer;
        let ((idle_by_stream, comm_stalls, prefetch, rows), theirs) = super::join(
            self.input.split,
            || {
                let idle = waits::idle_by_stream(t, ctx, head, opts.consecutive_kernel_delay_ns);
                // One search for the stalls of the window, for both figures (and
                // for the steps' when the window holds every event).
                let hits = waits::stall_hits(t, ctx, head, opts.stall_tolerance_ns);
                let (comm_stalls, _) = waits::comm_stalls_of(ctx, head, &hits);
                let ags = waits::all_gather_slacks(ctx, head, &hits, is_all_gather);
                let mut prefetch = waits::prefetch_slack_from(&ags);
                let bytes_of = |id: u32| sizer.bytes(id);
                prefetch.add_held_early(&bytes_of);
                prefetch.per_layer =
                    super::prefetch_layers::prefetch_layers(t, ctx, &ags, &bytes_of);
                let all_hits = (head.len() == self.all.len()).then_some(hits);
                let rows = step_rows(
                    t,
                    ctx,
                    steps,
                    &self.detected.graph_corrs,
                    &self.all,
                    &is_all_gather,
                    &bytes_of,
                    all_hits,
                    opts,
                );
                (idle, comm_stalls, prefetch, rows)
            },
            || self.overlap_half(sizer),
        );
        let (sm_contention, contention_per_step) = theirs.contention;
        Figures {
            idle_by_stream,
            comm_stalls,
            prefetch,
            rows,
            unions: theirs.unions,
            local: theirs.local,
            found: theirs.found,
            sm_contention,
            contention_per_step,
            series: theirs.series,
            collectives: theirs.collectives,
            collectives_per_step: theirs.per_step,
            occupancy: theirs.occupancy,
            memory: None,
        }
    }

    /// Pass 3's second half: overlap, syncs, contention, series,
    /// collectives, occupancy.
    fn overlap_half(&self, sizer: &collectives::Sizer) -> OverlapHalf {
        let (t, ctx, opts) = (self.input.trace, self.ctx, self.input.opts);
        let steps = &self.detected.steps;
        let head = &self.head;
        let nccl = self.input.nccl;
        let unions = Unions::of(head.iter().copied());
        let mut comm_head: Vec<(i64, i64)> = Vec::new();
        let mut extra: Vec<(i64, i64)> = Vec::new();
        for e in head.iter().filter(|e| e.class == SliceClass::Communication) {
            comm_head.push((e.s, e.e));
            if !xrank::is_comm_kernel(t, e) {
                extra.push((e.s.min(e.e), e.e));
            }
        }
        intervals::union_in_place(&mut comm_head);
        let local = RankLocal {
            steps: steps.iter().map(|s| s.number).collect(),
            exposed: intervals::difference(&comm_head, &unions.compute),
            extra,
        };
        let sync_window = sync::SyncWindow {
            start: self.window.start_ns,
            end: self.window.end_ns,
            gpu_span: self.gpu_span,
            label: &self.window.label,
            steps: self.window_steps.clone(),
        };
        let found = sync::find(t, ctx, steps, &sync_window, opts);
        let contention =
            measured::sm_contention(t, ctx, head, steps.len(), self.window_steps.len());
        let series = measured::rank_series(t, ctx);
        let colls = collectives::stats_with(t, ctx, head, nccl, sizer);
        let per_step: Vec<Option<Vec<_>>> = (self.comm_by_step.iter())
            .map(|evs| (!evs.is_empty()).then(|| collectives::stats_with(t, ctx, evs, nccl, sizer)))
            .collect();
        let occupancy = occupancy::devices(t, ctx, opts);
        OverlapHalf {
            unions,
            local,
            found,
            contention,
            series,
            collectives: colls,
            per_step,
            occupancy,
        }
    }

    /// Pass 4: per-step syncs, measured metrics, SM contention cost and
    /// GPU memory, onto the step rows (and the rank's memory).
    pub fn fill_steps(&mut self, f: &mut Figures) {
        let (t, ctx) = (self.input.trace, self.ctx);
        let steps = &self.detected.steps;
        for (row, &(syncs, blocked_ns)) in f.rows.iter_mut().zip(&f.found.per_step) {
            row.syncs = syncs;
            row.sync_host_blocked_us = blocked_ns as f64 / 1000.0;
        }
        if !f.series.is_empty() {
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
            for ((row, sp), c) in f.rows.iter_mut().zip(&spans).zip(compute) {
                let (a, b) = sp.unwrap_or((row.start_ns, row.end_ns));
                row.measured = measured::measure(&f.series, a, b, &intervals::union(c));
            }
        }
        for (row, c) in f.rows.iter_mut().zip(&f.contention_per_step) {
            row.sm_contention_cost_us = *c;
        }
        if let Some(d) = host_runs_ahead(ctx.rank, &f.rows) {
            self.report.diagnostics.push(d);
        }
        let bounds: Vec<(i64, i64, i64)> = f
            .rows
            .iter()
            .map(|r| (r.step, r.start_ns, r.end_ns))
            .collect();
        f.memory = memory::of_rank(t, ctx, &bounds).map(|(rank, per_step)| {
            for (row, m) in f.rows.iter_mut().zip(per_step) {
                row.memory = m;
            }
            rank
        });
    }

    /// Pass 5: the collectives' windows and link traffic, the rank's row
    /// and its headline stamp; the rank's part of the report.
    pub fn finish(mut self, f: Figures) -> RankPart {
        let (t, ctx) = (self.input.trace, self.ctx);
        let steps = &self.detected.steps;
        let window = std::mem::take(&mut self.window);
        let mut report = std::mem::take(&mut self.report);
        let b = f.unions.breakdown();
        report.sync_warnings.extend(
            f.found
                .groups
                .iter()
                .filter(|s| s.warning.is_some())
                .cloned(),
        );
        let mut rank_measured = match self.gpu_span {
            Some((a, b)) if !f.series.is_empty() => {
                measured::measure(&f.series, a, b, &f.unions.compute)
            }
            _ => measured::Measured::default(),
        };
        report.steps.extend(f.rows);
        let mut colls = f.collectives;
        colls
            .iter_mut()
            .for_each(|c| c.window = window.label.clone());
        if rank_measured.any() {
            rank_measured.collective_link_gb = measured::collective_link_gb(&colls);
        }
        report.collectives.extend(colls);
        // This rank's step rows are the last `steps.len()` ones.
        let first_row = report.steps.len().saturating_sub(steps.len());
        for (k, rows) in f.collectives_per_step.into_iter().enumerate() {
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
        report.occupancy.extend(f.occupancy);
        let p = &t.processes()[ctx.process.index()];
        let mut device: Vec<String> = t
            .devices_of(ctx.process)
            .filter(|d| ctx.device.is_none_or(|only| only == *d))
            .map(|d| t.devices()[d.index()].name.clone())
            .collect();
        device.dedup();
        report.ranks.push(RankReport {
            rank: ctx.rank,
            process: ctx.process,
            label: match ctx.device {
                Some(d) => format!("{} · GPU {}", p.label(), t.devices()[d.index()].ordinal),
                None => p.label(),
            },
            device: device.join(", "),
            has_gpu_events: !ctx.gpu.is_empty(),
            window,
            breakdown: b,
            step_source: self.detected.source.name().to_string(),
            idle_by_stream: f.idle_by_stream,
            comm_stalls: f.comm_stalls,
            prefetch: f.prefetch,
            syncs: f.found.groups,
            startup_syncs: f.found.startup,
            after_window_syncs: f.found.after,
            exposed_wait_us: None,
            exposed_transfer_us: None,
            measured: rank_measured,
            sm_contention: f.sm_contention,
            memory: f.memory,
            ..RankReport::default()
        });
        headline::stamp(
            t,
            ctx,
            &self.head,
            self.window_steps.len(),
            &mut report.ranks,
        );
        // Kept until every rank is read (many ranks): no spare capacity.
        report.collectives_per_step.shrink_to_fit();
        report.collectives.shrink_to_fit();
        report.sync_warnings.shrink_to_fit();
        report.steps.shrink_to_fit();
        RankPart {
            report,
            local: f.local,
            comms: self.comms,
            analyzed: true,
        }
    }
}

/// Analyzes one rank on its own (everything but what needs the other
/// ranks' collectives), and takes its collective records: passes 1-5.
pub(crate) fn analyze_rank_alone(input: &Inputs, ctx: RankCtx) -> RankPart {
    let stepped = Stepped::new(input.trace, ctx);
    let mut w = Windowed::new(input, &stepped);
    let mut figures = w.figures();
    w.fill_steps(&mut figures);
    w.finish(figures)
}
