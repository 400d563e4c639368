//! The kernels a rank spent its GPU time in (headline window), by name,
//! with the Python line that launched them when the trace knows it.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::intervals::enclosing_each;
use super::rank::{Ev, RankCtx};
use super::sync::{is_library_frame, python_location};
use crate::model::{SliceId, SliceKind, Trace, TrackId};

/// Per kernel name: launches, total ns, sampled slice ids, HTA class.
type PerName = (u64, i64, Vec<u32>, &'static str);
/// Per thread: its python frames and the launches (start, group) on it.
type PerThread = (Vec<u32>, Vec<(i64, usize)>);

/// Kernels kept per rank.
pub const TOP_KERNELS: usize = 10;
/// Launches per kernel whose Python line is looked up.
const SAMPLED_LAUNCHES: usize = 16;

/// One kernel name of one rank over its headline window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct TopKernel {
    /// Kernel name (demangled).
    pub name: String,
    /// HTA class: "compute", "communication", "memory", ...
    pub class: String,
    /// Launches in the window.
    pub count: u64,
    /// Total kernel time, ms.
    pub total_ms: f64,
    /// Mean kernel time, ms.
    pub mean_ms: f64,
    /// Total per step of the window (`None` without steps), ms.
    pub per_step_ms: Option<f64>,
    /// 100 total / the summed duration of every GPU activity (kernels,
    /// copies, memsets) of the window, %.
    pub share_pct: Option<f64>,
    /// The Python line that launched most of the sampled launches
    /// ("file:line (function)"), "" when the trace has none.
    pub python: String,
}

/// The [`TOP_KERNELS`] kernels of `head` (the rank's headline-window GPU
/// events) with the most time, most first; `steps` is the window's step count.
pub(super) fn top_kernels(t: &Trace, ctx: &RankCtx, head: &[&Ev], steps: usize) -> Vec<TopKernel> {
    let sl = t.slices();
    let mut busy_ns: i64 = 0;
    // name -> (count, total ns, sampled slice ids, class)
    let mut by_name: HashMap<u32, PerName> = HashMap::new();
    for e in head {
        let d = e.e.saturating_sub(e.s).max(0);
        busy_ns = busy_ns.saturating_add(d);
        if sl.kind()[e.id as usize] != SliceKind::Kernel {
            continue;
        }
        let v = by_name.entry(sl.name()[e.id as usize].get()).or_insert((
            0,
            0,
            Vec::new(),
            e.class.name(),
        ));
        v.0 += 1;
        v.1 = v.1.saturating_add(d);
        if v.2.len() < SAMPLED_LAUNCHES {
            v.2.push(e.id);
        }
    }
    let mut all: Vec<(u32, PerName)> = by_name.into_iter().collect();
    all.sort_by(|a, b| b.1 .1.cmp(&a.1 .1).then(a.0.cmp(&b.0)));
    all.truncate(TOP_KERNELS);
    let samples: Vec<&[u32]> = all.iter().map(|(_, v)| &v.2[..]).collect();
    let python = launch_lines(t, ctx, &samples);
    all.iter()
        .zip(python)
        .map(|((name, (count, ns, _, class)), python)| {
            let total_ms = *ns as f64 / 1e6;
            TopKernel {
                name: t
                    .str(crate::model::StrId::from_index(*name as usize))
                    .to_string(),
                class: class.to_string(),
                count: *count,
                total_ms,
                mean_ms: total_ms / (*count).max(1) as f64,
                per_step_ms: (steps > 0).then(|| total_ms / steps as f64),
                share_pct: (busy_ns > 0).then(|| 100.0 * *ns as f64 / busy_ns as f64),
                python,
            }
        })
        .collect()
}

/// Per group of kernel slices, the Python line most of their launches
/// came from: the launch call's `python` argument (the collector's), else
/// the innermost Kineto python_function open around the launch on its
/// thread (user code before library frames); "" when neither is known.
fn launch_lines(t: &Trace, ctx: &RankCtx, groups: &[&[u32]]) -> Vec<String> {
    let sl = t.slices();
    let launch = |id: u32| ctx.corr.get(sl.correlation()[id as usize]);
    // (group, launch slice) of every sampled launch with a known call.
    let points: Vec<(usize, u32)> = groups
        .iter()
        .enumerate()
        .flat_map(|(g, ids)| ids.iter().filter_map(move |&id| Some((g, launch(id)?))))
        .collect();
    let mut found: Vec<Vec<String>> = vec![Vec::new(); groups.len()];
    let mut rest: Vec<(usize, u32)> = Vec::new();
    for &(g, h) in &points {
        match t.arg_string(SliceId::from_index(h as usize), "python") {
            Some(p) if !p.is_empty() => found[g].push(p),
            _ => rest.push((g, h)),
        }
    }
    if !rest.is_empty() {
        for (g, p) in kineto_frames(t, ctx, &rest) {
            found[g].push(p);
        }
    }
    found.into_iter().map(most_common).collect()
}

/// The most frequent entry (the first met on a tie), "" for none.
fn most_common(v: Vec<String>) -> String {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for s in v {
        match counts.iter_mut().find(|(x, _)| *x == s) {
            Some(c) => c.1 += 1,
            None => counts.push((s, 1)),
        }
    }
    let best = counts.iter().map(|c| c.1).max().unwrap_or(0);
    counts
        .into_iter()
        .find(|c| c.1 == best)
        .map(|c| c.0)
        .unwrap_or_default()
}

/// For launches `(group, host slice)`, the innermost python_function frame
/// of user code open around each (else the innermost frame): one sweep per
/// thread over its python frames, which nest.
fn kineto_frames(t: &Trace, ctx: &RankCtx, points: &[(usize, u32)]) -> Vec<(usize, String)> {
    let sl = t.slices();
    let mut by_track: HashMap<TrackId, PerThread> = HashMap::new();
    for &(g, h) in points {
        by_track
            .entry(sl.track()[h as usize])
            .or_default()
            .1
            .push((sl.start_ns()[h as usize], g));
    }
    let mut loc: HashMap<u32, Option<String>> = HashMap::new();
    for &h in &ctx.host {
        if sl.kind()[h as usize] != SliceKind::CpuOp {
            continue;
        }
        let Some(e) = by_track.get_mut(&sl.track()[h as usize]) else {
            continue;
        };
        let n = sl.name()[h as usize].get();
        let l = loc
            .entry(n)
            .or_insert_with(|| python_location(t.str(crate::model::StrId::from_index(n as usize))));
        if l.is_some() {
            e.0.push(h);
        }
    }
    let mut out = Vec::new();
    for (mut frames, mut at) in by_track.into_values() {
        if frames.is_empty() {
            continue;
        }
        at.sort_unstable();
        let times: Vec<i64> = at.iter().map(|a| a.0).collect();
        enclosing_each(sl, &mut frames, &times, |i, open| {
            let open: Vec<&String> = open
                .iter()
                .filter_map(|&r| loc.get(&sl.name()[r as usize].get())?.as_ref())
                .collect();
            let user = open.iter().rev().find(|f| !is_library_frame(f));
            if let Some(p) = user.or(open.last()) {
                out.push((at[i].1, (*p).clone()));
            }
        });
    }
    out
}
