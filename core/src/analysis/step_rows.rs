//! Steps to rows: which step each GPU event belongs to, and one row per
//! step with its figures (docs/METRICS.md, "Windows", "Steps").

use super::breakdown::Unions;
use super::rank::{Ev, RankCtx, NONE};
use super::steps::{self, Step};
use super::{waits, AnalysisOptions, StepReport};
use crate::diagnostic::{Diagnostic, Kind};
use crate::model::Trace;

/// Step of each GPU event: by its launch call's start for host-timed steps
/// (GPU work belongs to the step that launched it), else by its own start.
pub(crate) fn assign_steps(t: &Trace, ctx: &mut RankCtx, steps: &[Step]) {
    if steps.is_empty() {
        return;
    }
    let host_time = steps[0].host_time;
    let launch: Vec<Option<i64>> = if host_time {
        ctx.gpu
            .iter()
            .map(|e| {
                ctx.corr
                    .get(t.slices().correlation()[e.id as usize])
                    .map(|h| t.slices().start_ns()[h as usize])
            })
            .collect()
    } else {
        Vec::new()
    };
    for (k, e) in ctx.gpu.iter_mut().enumerate() {
        let at = launch
            .get(k)
            .copied()
            .flatten()
            .unwrap_or(t.slices().start_ns()[e.id as usize]);
        e.step = steps::step_at(steps, at);
    }
}

/// A note when the host launched steps more than a step ahead of the GPU:
/// step k+1's host start came before step k's first GPU start.
pub(crate) fn host_runs_ahead(rank: u32, rows: &[StepReport]) -> Option<Diagnostic> {
    let ahead = rows
        .windows(2)
        .filter(|w| w[0].gpu_start_ns.is_some_and(|g| w[1].start_ns < g))
        .count();
    (ahead > 0 && rows.first().is_some_and(|r| r.source != "repetition")).then(|| {
        let host: Vec<f64> = rows.iter().map(|r| r.host_interval_us).collect();
        let gpu: Vec<f64> = rows.iter().map(|r| r.duration_us).collect();
        let med = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v.get(v.len() / 2).copied().unwrap_or(0.0) / 1000.0
        };
        Diagnostic::new(
            Kind::HostRunsAhead,
            ahead as u64,
            format!(
                "rank {rank}: the host ran more than a step ahead of the GPU in {ahead} step(s) \
                 (median host interval {:.3} ms, GPU step {:.3} ms): step times are the GPU's",
                med(host),
                med(gpu)
            ),
        )
    })
}

/// One row per step: the metrics over the GPU work each step launched
/// (its syncs are the caller's to fill in).
#[allow(clippy::too_many_arguments)]
pub(crate) fn step_rows(
    t: &Trace,
    ctx: &RankCtx,
    steps: &[Step],
    graph_corrs: &[u32],
    all: &[&Ev],
    is_all_gather: &dyn Fn(u32) -> bool,
    bytes_of: &dyn Fn(u32) -> Option<u64>,
    all_hits: Option<Vec<waits::StallHit>>,
    opts: &AnalysisOptions,
) -> Vec<StepReport> {
    if steps.is_empty() {
        return Vec::new();
    }
    let mut buckets: Vec<Vec<&Ev>> = vec![Vec::new(); steps.len()];
    for e in all {
        if e.step != NONE {
            buckets[e.step as usize].push(e);
        }
    }
    let all_hits =
        all_hits.unwrap_or_else(|| waits::stall_hits(t, ctx, all, opts.stall_tolerance_ns));
    let (_, stalls) = waits::comm_stalls_of(ctx, all, &all_hits);
    drop(all_hits);
    let mut stall_ns = vec![0i64; steps.len()];
    for (pos, gap) in stalls {
        let s = all[pos].step;
        if s != NONE {
            stall_ns[s as usize] = stall_ns[s as usize].saturating_add(gap);
        }
    }
    let gpu_first: Vec<Option<i64>> = buckets
        .iter()
        .map(|b| b.iter().map(|e| e.s).min())
        .collect();
    let gpu_last: Vec<Option<i64>> = buckets
        .iter()
        .map(|b| b.iter().map(|e| e.e).max())
        .collect();
    steps
        .iter()
        .enumerate()
        .map(|(k, s)| {
            let host_ns = s.end_ns.saturating_sub(s.start_ns);
            let gpu_ns = match (gpu_first[k], gpu_first.get(k + 1).copied().flatten()) {
                (Some(a), Some(b)) if b >= a => b.saturating_sub(a),
                (Some(a), _) => gpu_last[k].map_or(host_ns, |e| e.saturating_sub(a)),
                (None, _) => host_ns,
            };
            let (mut graph_ns, mut eager_ns) = (0i64, 0i64);
            let mut launches: Vec<u32> = Vec::new();
            for e in &buckets[k] {
                let c = t.slices().correlation()[e.id as usize];
                if c != 0 && graph_corrs.binary_search(&c).is_ok() {
                    graph_ns = graph_ns.saturating_add(e.e.saturating_sub(e.s));
                    launches.push(c);
                } else {
                    eager_ns = eager_ns.saturating_add(e.e.saturating_sub(e.s));
                }
            }
            launches.sort_unstable();
            launches.dedup();
            let unions = Unions::of(buckets[k].iter().copied());
            let mut prefetch =
                waits::prefetch_slack(t, ctx, &buckets[k], is_all_gather, opts.stall_tolerance_ns);
            prefetch.add_held_early(bytes_of);
            prefetch.per_all_gather = Vec::new(); // kept once, at rank level
            StepReport {
                rank: ctx.rank,
                step: s.number,
                name: s.name.clone(),
                source: s.source.name().to_string(),
                start_ns: s.start_ns,
                end_ns: s.end_ns,
                duration_us: gpu_ns as f64 / 1000.0,
                host_interval_us: host_ns as f64 / 1000.0,
                graph_launches: launches.len() as u32,
                graph_gpu_us: graph_ns as f64 / 1000.0,
                eager_gpu_us: eager_ns as f64 / 1000.0,
                gpu_start_ns: gpu_first[k],
                breakdown: unions.breakdown(),
                idle_by_stream: waits::idle_by_stream(
                    t,
                    ctx,
                    &buckets[k],
                    opts.consecutive_kernel_delay_ns,
                ),
                prefetch,
                comm_stall_us: stall_ns[k] as f64 / 1000.0,
                ..Default::default()
            }
        })
        .collect()
}
