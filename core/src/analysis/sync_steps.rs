//! Steps of a loop that synchronizes once per iteration, for traces with
//! no step marker and no repeating kernel sequence: a native CUDA program's
//! `for (...) { launch...; cudaDeviceSynchronize(); }` whose kernels all
//! share one name (the period detector keys on names, and finds none).
//!
//! The (thread, blocking sync API, call site) called most often, the site
//! being the caller the collector symbolized or the Python line, with GPU
//! work launched on that thread between every two of its calls, ends the
//! steps: step k runs from the return of call k-1 (the first from the
//! first launch) to the return of call k, on the host's clock.

use super::rank::RankCtx;
use super::steps::{Step, StepSource};
use super::whatif::is_sync_api;
use crate::model::{SliceId, SliceKind, StrId, Trace};

/// Fewest sync calls that make steps (the period detector asks as many cycles).
const MIN_SYNCS: usize = 4;

/// Sync-delimited steps of `ctx`, or `None` when no sync site recurs with
/// GPU work launched between every two of its calls.
pub fn sync_steps(t: &Trace, ctx: &RankCtx) -> Option<Vec<Step>> {
    let sl = t.slices();
    let site_keys = [
        t.strings().lookup(crate::protocol::CALLER_ARG),
        t.strings().lookup("python"),
    ];
    // Host API calls in start order: (thread, start, end, is launch, sync site).
    type Call = (u32, i64, i64, bool, Option<(StrId, String)>);
    let mut calls: Vec<Call> = Vec::new();
    // Host calls that launched GPU work (every API call has a correlation
    // id; a launch is one whose id a GPU activity carries).
    let launched: rustc_hash::FxHashSet<u32> = ctx
        .gpu
        .iter()
        .filter_map(|e| ctx.corr.get(sl.correlation()[e.id as usize]))
        .collect();
    let mut first_launch = i64::MAX;
    for &h in &ctx.host {
        let i = h as usize;
        if !matches!(sl.kind()[i], SliceKind::Runtime | SliceKind::Driver) {
            continue;
        }
        let (s, e) = (
            sl.start_ns()[i],
            sl.start_ns()[i].saturating_add(sl.dur_ns()[i]),
        );
        let launch = launched.contains(&h);
        if launch {
            first_launch = first_launch.min(s);
        }
        let name = sl.name()[i];
        let site = is_sync_api(t.str(name)).then(|| {
            let args = t.args_of(SliceId::from_index(i));
            let at = site_keys
                .iter()
                .flatten()
                .find_map(|&k| args.iter().find(|(n, _)| *n == k))
                .map(|(_, v)| t.arg_value_string(v))
                .unwrap_or_default();
            (name, at)
        });
        calls.push((sl.track()[i].get(), s, e, launch, site));
    }
    calls.sort_by_key(|c| (c.0, c.1));
    // Per (thread, API, site): its calls' ends; the thread's launch count
    // at its last call (none before the first); whether a launch came
    // between every two calls.
    type Group = (Vec<i64>, Option<usize>, bool);
    let mut groups: rustc_hash::FxHashMap<(u32, StrId, String), Group> = Default::default();
    let mut launches: rustc_hash::FxHashMap<u32, usize> = Default::default();
    for (track, _, e, launch, site) in calls {
        let n = launches.entry(track).or_insert(0);
        if launch {
            *n += 1;
        }
        let Some((api, at)) = site else { continue };
        let g = groups
            .entry((track, api, at))
            .or_insert((Vec::new(), None, true));
        if g.1 == Some(*n) {
            g.2 = false;
        }
        g.0.push(e);
        g.1 = Some(*n);
    }
    let (ends, _, _) = groups
        .into_values()
        .filter(|(ends, _, every)| *every && ends.len() >= MIN_SYNCS)
        .max_by_key(|(ends, _, _)| ends.len())?;
    if first_launch == i64::MAX {
        return None;
    }
    let mut prev = first_launch.min(ends[0]);
    Some(
        ends.iter()
            .enumerate()
            .map(|(k, &end_ns)| {
                let s = Step {
                    number: k as i64,
                    name: format!("sync {k}"),
                    start_ns: prev,
                    end_ns,
                    host_time: true,
                    source: StepSource::Sync,
                };
                prev = end_ns;
                s
            })
            .collect(),
    )
}
