//! Steps from CUDA graph launches: a job that captured its step (or most
//! of it) in a graph launches the same executable graph once a step, so
//! the launches of that graph are the step boundaries (`step_source`
//! "graph-launch"). Docs: docs/METRICS.md, "Steps".

use rustc_hash::FxHashMap;

use super::names::NameTest;
use super::rank::RankCtx;
use super::steps::{Step, StepSource};
use crate::model::{ArgValue, SliceKind, StrId, Trace};
use crate::protocol::{GRAPH_ID_ARG, GRAPH_LAUNCH_APIS};

/// Fewest launches of one graph taken as steps.
const MIN_LAUNCHES: usize = 3;

/// One graph launch call of a rank and the GPU work it ran.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Launch {
    /// The launch call on the host.
    pub host_start: i64,
    /// See `host_start`.
    pub host_end: i64,
    /// First GPU start of its work.
    pub gpu_start: i64,
    /// Which graph: its id when the trace has it (the collector's
    /// `graph_id`), else a signature of its work (count and first name).
    pub key: u64,
    /// GPU events it ran.
    pub events: u32,
    /// Their summed duration.
    pub busy_ns: i64,
    /// The launch call's correlation id (shared by all its GPU work).
    pub corr: u32,
}

/// The graph launches of a rank that ran GPU work, in host order.
pub fn launches(t: &Trace, ctx: &RankCtx) -> Vec<Launch> {
    let sl = t.slices();
    let mut is_launch = NameTest::new(t, |n: &str| GRAPH_LAUNCH_APIS.contains(&n));
    let mut by_corr: FxHashMap<u32, usize> = FxHashMap::default();
    let mut out: Vec<Launch> = Vec::new();
    for &h in &ctx.host {
        let i = h as usize;
        let c = sl.correlation()[i];
        if c == 0
            || !matches!(sl.kind()[i], SliceKind::Runtime | SliceKind::Driver)
            || !is_launch.of(sl.name()[i])
        {
            continue;
        }
        by_corr.entry(c).or_insert_with(|| {
            out.push(Launch {
                host_start: sl.start_ns()[i],
                host_end: sl.start_ns()[i].saturating_add(sl.dur_ns()[i]),
                gpu_start: i64::MAX,
                key: 0,
                events: 0,
                busy_ns: 0,
                corr: c,
            });
            out.len() - 1
        });
    }
    if out.is_empty() {
        return out;
    }
    let graph_key = t.strings().lookup(GRAPH_ID_ARG);
    let mut first_name: Vec<Option<StrId>> = vec![None; out.len()];
    let mut graph_id: Vec<Option<u64>> = vec![None; out.len()];
    for e in &ctx.gpu {
        let c = sl.correlation()[e.id as usize];
        let Some(&k) = by_corr.get(&c) else { continue };
        let l = &mut out[k];
        if l.events == 0 {
            l.gpu_start = e.s;
            first_name[k] = Some(sl.name()[e.id as usize]);
            graph_id[k] = graph_key.and_then(|key| {
                t.args_of(e.slice())
                    .iter()
                    .find(|(k2, _)| *k2 == key)
                    .and_then(|(_, v)| match v {
                        ArgValue::UInt(g) => Some(*g),
                        ArgValue::Int(g) => u64::try_from(*g).ok(),
                        _ => None,
                    })
            });
        }
        l.gpu_start = l.gpu_start.min(e.s);
        l.events += 1;
        l.busy_ns = l.busy_ns.saturating_add(e.e.saturating_sub(e.s));
    }
    for (k, l) in out.iter_mut().enumerate() {
        l.key = match (graph_id[k], first_name[k]) {
            (Some(g), _) => g,
            // No graph id: the same graph runs the same work each time.
            (None, Some(n)) => (1 << 63) | (u64::from(l.events) << 32) | u64::from(n.get()),
            (None, None) => 0,
        };
    }
    out.retain(|l| l.events > 0);
    out.sort_by_key(|l| l.host_start);
    out
}

/// Steps from the launches of one graph among `launches` whose call starts
/// at or after `after`: the graph with the most GPU time among those
/// launched at least 3 times, or, when several graphs are launched about as
/// often (a forward and a backward graph), the one launched first in the
/// run. Step k lasts, on the host, from launch k's call to launch k+1's
/// (the last: one median period, within the rank's host activity), so GPU
/// work goes to the step whose launch preceded it. Numbered from `first`.
pub fn graph_steps(
    launches: &[Launch],
    after: i64,
    host_end: i64,
    first: i64,
) -> Option<Vec<Step>> {
    let tail: Vec<&Launch> = launches.iter().filter(|l| l.host_start >= after).collect();
    let mut per_key: FxHashMap<u64, (usize, i64, i64)> = FxHashMap::default();
    for l in &tail {
        let e = per_key.entry(l.key).or_insert((0, 0, l.host_start));
        e.0 += 1;
        e.1 = e.1.saturating_add(l.busy_ns);
    }
    let (_, &(n, _, _)) = per_key
        .iter()
        .filter(|(_, v)| v.0 >= MIN_LAUNCHES)
        .max_by_key(|(k, v)| (v.1, std::cmp::Reverse(**k)))?;
    // Among graphs launched about as often, the earliest in the run.
    let (&key, _) = per_key
        .iter()
        .filter(|(_, v)| v.0 * 10 >= n * 9 && v.0 * 10 <= n * 11)
        .min_by_key(|(k, v)| (v.2, **k))?;
    let starts: Vec<i64> = tail
        .iter()
        .filter(|l| l.key == key)
        .map(|l| l.host_start)
        .collect();
    let mut gaps: Vec<i64> = starts
        .windows(2)
        .map(|w| w[1].saturating_sub(w[0]))
        .collect();
    gaps.sort_unstable();
    let period = gaps.get(gaps.len() / 2).copied().unwrap_or(0);
    let last_launch_end = tail
        .iter()
        .filter(|l| l.key == key)
        .map(|l| l.host_end)
        .max()
        .unwrap_or(0);
    let steps = starts
        .iter()
        .enumerate()
        .map(|(k, &start_ns)| {
            let end_ns = match starts.get(k + 1) {
                Some(&next) => next,
                None => (start_ns + period).min(host_end).max(last_launch_end + 1),
            };
            Step {
                number: first + k as i64,
                name: format!("graph launch {}", first + k as i64),
                start_ns,
                end_ns,
                host_time: true,
                source: StepSource::GraphLaunch,
            }
        })
        .collect();
    Some(steps)
}
