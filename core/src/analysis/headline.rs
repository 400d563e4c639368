//! The first screen of a report: per rank the step time and its spread,
//! overlap, exposed communication per step, idle, the costliest host sync
//! and the top kernel; across ranks the straggler. Milliseconds.
//! Definitions: docs/METRICS.md, "Headline".

use serde::{Deserialize, Serialize};

use super::report::{Report, SyncGroup};
use crate::model::{ClockDomain, Trace};

/// The headline of a report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Headline {
    /// Per rank, in report order.
    pub ranks: Vec<RankHeadline>,
    /// The rank the others waited for most often (none without
    /// collectives matched across ranks).
    pub straggler: Option<Straggler>,
}

/// One rank's headline figures (over its headline window).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct RankHeadline {
    /// The rank.
    pub rank: u32,
    /// Its GPU(s).
    pub device: String,
    /// False when the rank has no GPU event (every figure is null).
    pub has_gpu_events: bool,
    /// The headline window's label.
    pub window: String,
    /// Steps in the window (0 without steps).
    pub steps: u64,
    /// Median step time, ms.
    pub median_step_ms: Option<f64>,
    /// Shortest and longest step of the window, ms.
    pub min_step_ms: Option<f64>,
    /// See `min_step_ms`.
    pub max_step_ms: Option<f64>,
    /// Share of the communication time under compute, % (HTA's overlap).
    pub overlap_pct: Option<f64>,
    /// Communication not under compute, per step of the window (the whole
    /// window when it has no steps), ms.
    pub exposed_comm_ms_per_step: f64,
    /// GPU idle over the window's GPU span, %.
    pub idle_pct: Option<f64>,
    /// The host-sync call site that cost the most GPU idle in the window.
    pub costliest_sync: Option<HeadlineSync>,
    /// The kernel with the most time in the window.
    pub top_kernel: Option<super::top_kernels::TopKernel>,
}

/// A host-sync call site of the headline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct HeadlineSync {
    /// item-like, cpu-copy, device-sync, stream-sync, event-sync.
    pub pattern: String,
    /// The blocking API.
    pub api: String,
    /// Python line (file:line (function)), else the NVTX path, else the API.
    #[serde(rename = "where")]
    pub where_: String,
    /// Occurrences in the window.
    pub count: u64,
    /// GPU idle it caused over the window, ms.
    pub gpu_idle_ms: f64,
    /// That per step of the window (`None` without steps), ms.
    pub gpu_idle_ms_per_step: Option<f64>,
}

/// The straggler over the steps with matched collectives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Straggler {
    /// The rank named straggler in the most steps.
    pub rank: u32,
    /// Steps it was named in.
    pub steps: u64,
    /// Steps with a straggler named.
    pub of_steps: u64,
    /// Median over those steps of the longest wait of another rank for it, ms.
    pub median_wait_ms: Option<f64>,
}

/// Fills `ranks[].median_step_ms` and `headline` from the report's rows.
pub(super) fn fill(report: &mut Report) {
    let mut ranks = Vec::with_capacity(report.ranks.len());
    for k in 0..report.ranks.len() {
        let r = &report.ranks[k];
        let time = report.step_time(r.rank);
        let steps = time.map_or(0, |t| t.steps);
        let per = steps.max(1) as f64;
        let ms = |us: f64| us / 1000.0;
        let costliest_sync = r
            .syncs
            .iter()
            .filter(|g| g.gpu_idle_us > 0.0)
            .max_by(|a, b| a.gpu_idle_us.total_cmp(&b.gpu_idle_us))
            .map(|g: &SyncGroup| HeadlineSync {
                pattern: g.pattern.clone(),
                api: g.api.clone(),
                where_: g.where_.clone(),
                count: g.count,
                gpu_idle_ms: ms(g.gpu_idle_us),
                gpu_idle_ms_per_step: (steps > 0).then(|| ms(g.gpu_idle_us) / per),
            });
        let h = RankHeadline {
            rank: r.rank,
            device: r.device.clone(),
            has_gpu_events: r.has_gpu_events,
            window: r.window.label.clone(),
            steps,
            median_step_ms: time.map(|t| ms(t.median_us)),
            min_step_ms: time.map(|t| ms(t.min_us)),
            max_step_ms: time.map(|t| ms(t.max_us)),
            overlap_pct: r.breakdown.overlap_pct,
            exposed_comm_ms_per_step: ms(r.breakdown.exposed_comm_us) / per,
            idle_pct: r.breakdown.idle_pct,
            costliest_sync,
            top_kernel: r.top_kernels.first().cloned(),
        };
        ranks.push(h);
    }
    for (r, h) in report.ranks.iter_mut().zip(&ranks) {
        r.median_step_ms = h.median_step_ms;
    }
    report.headline = Headline {
        straggler: straggler(report),
        ranks,
    };
}

/// The rank named straggler in the most steady-state steps (one vote per
/// step number: the rows of one step name the same straggler).
fn straggler(report: &Report) -> Option<Straggler> {
    let mut per_step: Vec<(i64, u32, f64)> = Vec::new();
    for r in &report.ranks {
        for s in report.window_steps(r.rank) {
            if let (Some(k), Some(w)) = (s.straggler_rank, s.straggler_wait_us) {
                if !per_step.iter().any(|p| p.0 == s.step) {
                    per_step.push((s.step, k, w));
                }
            }
        }
    }
    let of_steps = per_step.len() as u64;
    let mut counts: Vec<(u32, u64)> = Vec::new();
    for &(_, k, _) in &per_step {
        match counts.iter_mut().find(|c| c.0 == k) {
            Some(c) => c.1 += 1,
            None => counts.push((k, 1)),
        }
    }
    counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let &(rank, steps) = counts.first()?;
    let mut waits: Vec<f64> = per_step
        .iter()
        .filter(|p| p.1 == rank)
        .map(|p| p.2 / 1000.0)
        .collect();
    waits.sort_by(f64::total_cmp);
    let n = waits.len();
    let median_wait_ms = match n {
        0 => None,
        _ if n % 2 == 1 => Some(waits[n / 2]),
        _ => Some((waits[n / 2 - 1] + waits[n / 2]) / 2.0),
    };
    Some(Straggler {
        rank,
        steps,
        of_steps,
        median_wait_ms,
    })
}

/// Wall-clock time (Unix ns) of `first_ns` on process `p`'s clock: the
/// time itself on a realtime clock, else through the process's clock
/// snapshot; `None` when neither says.
pub(super) fn unix_ns(t: &Trace, process: crate::model::ProcessId, first_ns: i64) -> Option<i64> {
    let p = t.processes().get(process.index())?;
    if p.clock == ClockDomain::Realtime {
        return Some(first_ns);
    }
    let at = |id: u32| p.clock_snapshot.iter().find(|c| c.0 == id).map(|c| c.1);
    let own = at(p.clock.perfetto_id())?;
    let real = at(ClockDomain::Realtime.perfetto_id())?;
    Some(first_ns.saturating_sub(own).saturating_add(real))
}

/// The last rank row of `ranks` (the one just analyzed): its top kernels,
/// host and the wall-clock time of its first event.
pub(super) fn stamp(
    t: &Trace,
    ctx: &super::rank::RankCtx,
    head: &[&super::rank::Ev],
    steps: usize,
    ranks: &mut [super::report::RankReport],
) {
    let Some(row) = ranks.last_mut() else {
        return;
    };
    row.top_kernels = super::top_kernels::top_kernels(t, ctx, head, steps);
    row.host = t
        .processes()
        .get(ctx.process.index())
        .map(|p| p.hostname.clone())
        .unwrap_or_default();
    let sl = t.slices();
    let host = ctx.host.iter().map(|&h| {
        let s = sl.start_ns()[h as usize];
        (s, s.saturating_add(sl.dur_ns()[h as usize]))
    });
    let gpu = ctx.gpu.iter().map(|e| (e.s, e.e));
    let span = host.chain(gpu).reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)));
    row.first_event_unix_ns = span.and_then(|s| unix_ns(t, ctx.process, s.0));
    row.last_event_unix_ns = span.and_then(|s| unix_ns(t, ctx.process, s.1));
}
