//! What the matched instances say per rank, per step and per collective
//! kind: exposed waiting vs transfer, the straggler of each step, skew and
//! transfer bandwidth.

use std::collections::BTreeMap;

use super::{CommRec, Matching};
use crate::analysis::intervals::{intersection_measure, measure, union, union_in_place};
use crate::analysis::rank::NONE;
use crate::analysis::report::{CollectiveSkew, CrossRank, WaitPair};

/// Exposed communication of one rank split into (waiting, transfer), ns:
/// transfer = |T \ C| where T is the union of the transfer parts of the
/// rank's communication kernels in its headline window (whole kernels
/// when unmatched; `extra`: its other communication slices there), C its
/// compute, waiting = the rest of |M \ C|. `exposed` is M \ C (disjoint,
/// ascending), which is all of C the split needs (T lies in M). `c` is the
/// rank's index in the matching. `None` when none of the rank's kernels
/// in the window was matched.
pub fn exposed_split(
    m: &Matching,
    c: usize,
    recs: &[CommRec],
    extra: &[(i64, i64)],
    exposed: &[(i64, i64)],
) -> Option<(i64, i64)> {
    let mut transfer = Vec::new();
    let mut matched = false;
    let of = m.of_rec.get(c);
    for (k, r) in recs.iter().enumerate().filter(|(_, r)| r.head) {
        let wait = match of.and_then(|v| v.get(k)).copied().filter(|&i| i != NONE) {
            Some(i) => {
                matched = true;
                m.instances[i as usize].parts[c].wait_ns
            }
            None => 0,
        };
        transfer.push((r.s.saturating_add(wait).min(r.e), r.e));
    }
    if !matched {
        return None;
    }
    transfer.extend_from_slice(extra);
    union_in_place(&mut transfer);
    let exposed_ns = measure(exposed);
    let exposed_transfer = intersection_measure(&transfer, exposed).clamp(0, exposed_ns.max(0));
    Some((
        exposed_ns.max(0).saturating_sub(exposed_transfer),
        exposed_transfer,
    ))
}

/// One rank's waiting in one of its steps for one straggler.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepWait {
    /// Step number.
    pub step: i64,
    /// The rank that waited.
    pub rank: u32,
    /// The rank it waited for (the last to arrive).
    pub straggler: u32,
    /// Union of its wait intervals, ns.
    pub wait_ns: i64,
}

/// Per step of one rank (index into its steps; an instance belongs to the
/// step of this rank's kernel): this rank's own waiting (union, ns; `None`
/// without matched collectives in the step), and its waits per straggler.
/// `c` is the rank's index in the matching, `recs` its records.
pub fn step_waits(
    m: &Matching,
    c: usize,
    rank: u32,
    recs: &[CommRec],
    numbers: &[i64],
) -> (Vec<Option<i64>>, Vec<StepWait>) {
    let steps = numbers.len();
    let mut own: Vec<Option<Vec<(i64, i64)>>> = vec![None; steps];
    let mut by: BTreeMap<(usize, u32), Vec<(i64, i64)>> = BTreeMap::new();
    let of = m.of_rec.get(c);
    for (k, r) in recs.iter().enumerate() {
        if r.step == NONE || r.step as usize >= steps {
            continue;
        }
        let Some(i) = of.and_then(|v| v.get(k)).copied().filter(|&i| i != NONE) else {
            continue;
        };
        let inst = &m.instances[i as usize];
        let me = inst.parts[c];
        let w = (me.start_ns, me.start_ns.saturating_add(me.wait_ns));
        own[r.step as usize].get_or_insert_with(Vec::new).push(w);
        if me.wait_ns > 0 {
            let straggler = inst.parts[inst.last].rank;
            by.entry((r.step as usize, straggler)).or_default().push(w);
        }
    }
    let waits = by
        .into_iter()
        .map(|((k, straggler), v)| StepWait {
            step: numbers[k],
            rank,
            straggler,
            wait_ns: measure(&union(v)),
        })
        .collect();
    (
        own.into_iter()
            .map(|o| o.map(|v| measure(&union(v))))
            .collect(),
        waits,
    )
}

/// The straggler of each step number: the rank some rank waited for
/// longest (ties: the lower ranks), with that wait.
pub fn stragglers(waits: &[StepWait]) -> BTreeMap<i64, (u32, i64)> {
    let mut out: BTreeMap<i64, (u32, i64)> = BTreeMap::new();
    for w in waits {
        let e = out.entry(w.step).or_insert((w.straggler, w.wait_ns));
        if w.wait_ns > e.1 || (w.wait_ns == e.1 && w.straggler < e.0) {
            *e = (w.straggler, w.wait_ns);
        }
    }
    out
}

fn quantile(sorted: &[i64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let k = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted.get(k).map(|&v| v as f64 / 1000.0)
}

/// The cross-rank summary over the instances marked in `in_window`.
pub fn cross_rank(m: &Matching, in_window: &[bool], window: &str) -> CrossRank {
    let us = |ns: i64| ns as f64 / 1000.0;
    let mut kinds: BTreeMap<(String, String), Vec<usize>> = BTreeMap::new();
    let mut pairs: BTreeMap<(u32, u32), (u64, i64)> = BTreeMap::new();
    for (i, inst) in m.instances.iter().enumerate() {
        if !in_window.get(i).copied().unwrap_or(false) {
            continue;
        }
        kinds
            .entry((inst.kind.clone(), inst.group.clone()))
            .or_default()
            .push(i);
        let straggler = inst.parts[inst.last].rank;
        for q in inst.parts.iter().filter(|q| q.wait_ns > 0) {
            let e = pairs.entry((q.rank, straggler)).or_default();
            e.0 += 1;
            e.1 = e.1.saturating_add(q.wait_ns);
        }
    }
    let kinds = kinds
        .into_iter()
        .map(|((collective, group), ids)| {
            let mut skews: Vec<i64> = ids.iter().map(|&i| m.instances[i].skew_ns).collect();
            skews.sort_unstable();
            let (mut wait, mut transfer, mut kernel) = (0i64, 0i64, 0i64);
            let (mut bytes, mut bus_bytes, mut sized_ns, mut sized) = (0u64, 0f64, 0i64, 0u64);
            let mut last: BTreeMap<u32, u64> = BTreeMap::new();
            for &i in &ids {
                let inst = &m.instances[i];
                for p in &inst.parts {
                    wait = wait.saturating_add(p.wait_ns);
                    transfer = transfer.saturating_add(p.transfer_ns());
                    kernel = kernel.saturating_add(p.end_ns.saturating_sub(p.start_ns));
                }
                *last.entry(inst.parts[inst.last].rank).or_default() += 1;
                if let (Some(b), Some(f)) =
                    (inst.bytes, super::bus_factor(&inst.kind, inst.group_size))
                {
                    bytes = bytes.saturating_add(b);
                    bus_bytes += b as f64 * f;
                    sized_ns = sized_ns.saturating_add(inst.transfer_ns);
                    sized += 1;
                }
            }
            CollectiveSkew {
                collective,
                group,
                count: ids.len() as u64,
                skew_median_us: quantile(&skews, 0.5),
                skew_p95_us: quantile(&skews, 0.95),
                skew_max_us: skews.last().map(|&v| us(v)),
                kernel_us: us(kernel),
                wait_us: us(wait),
                transfer_us: us(transfer),
                last_rank: last.into_iter().collect(),
                bytes: (sized > 0).then_some(bytes),
                bus_bw_gbps: (sized > 0 && sized_ns > 0).then(|| bus_bytes / sized_ns as f64),
            }
        })
        .collect();
    CrossRank {
        window: window.to_string(),
        method: m.method.clone(),
        clocks: m.clocks.clone(),
        comparable: m.comparable,
        comm_kernels: m.comm_kernels,
        matched_kernels: m.matched_kernels(),
        instances: m.instances.len() as u64,
        instances_in_window: in_window.iter().filter(|&&b| b).count() as u64,
        kinds,
        waits: pairs
            .into_iter()
            .map(|((waiting_rank, for_rank), (count, ns))| WaitPair {
                waiting_rank,
                for_rank,
                count,
                wait_us: us(ns),
            })
            .collect(),
        clock_offsets: m.clock_offsets.clone(),
        notes: m.notes.clone(),
    }
}
