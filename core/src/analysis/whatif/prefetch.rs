//! Deeper all-gather prefetch: the graph rewired so that each all-gather
//! is issued `by` positions earlier in its step's sequence of all-gathers.
//!
//! Under FSDP's schedule (one all-gather per unit, in the same order every
//! step, each issued `depth` units ahead of the compute that uses it), the
//! all-gather at position k waits for two things besides its stream: the
//! launch call that issues it, and a buffer freed by the compute of an
//! earlier unit (a cross-stream wait). With `by` more units of prefetch it
//! is issued when the all-gather `by` positions before it was, and waits
//! for the buffer that one waited for: its launch and cross-stream
//! predecessors become those of position k − by (the first of the step for
//! k < by: nothing is gathered before the step begins, as the parameters
//! change with the optimizer step). Its stream order, its residual (event
//! latency) and the compute that waits for it are kept; so is the
//! duration of every kernel (compute that runs beside more communication
//! may slow down: the replay does not model that contention).

use super::super::collectives::NcclNames;
use super::super::rank::{RankCtx, NONE as NO_STEP};
use super::graph::{Graph, NodeKind, NONE};
use crate::model::Trace;

/// Per rank context and step: its all-gather nodes, in start order.
pub(super) fn all_gather_sequences(
    t: &Trace,
    ctxs: &[RankCtx],
    g: &Graph,
    nccl: &NcclNames,
) -> Vec<Vec<u32>> {
    let mut out = Vec::new();
    for (ci, ctx) in ctxs.iter().enumerate() {
        let mut by_step: Vec<(u32, Vec<u32>)> = Vec::new();
        for (e, &n) in ctx.gpu.iter().zip(&g.gpu_nodes[ci]) {
            if e.step == NO_STEP
                || g.nodes[n as usize].kind != NodeKind::Comm
                || !nccl.is_all_gather(t, e.id)
            {
                continue;
            }
            match by_step.iter_mut().find(|(s, _)| *s == e.step) {
                Some((_, v)) => v.push(n),
                None => by_step.push((e.step, vec![n])),
            }
        }
        out.extend(by_step.into_iter().map(|(_, v)| v));
    }
    out
}

/// What an all-gather's start waits for: its launch call's start, and the
/// end of another stream's activity (`NONE` where there is none).
#[derive(Clone, Copy)]
struct Waits {
    launch: u32,
    release: u32,
}

/// `g` with every all-gather of `seqs` issued `by` positions earlier.
pub(super) fn deeper(g: &Graph, seqs: &[Vec<u32>], by: u32, stream_of: &[u32]) -> Graph {
    let waits_of = |n: u32| {
        let mut w = Waits {
            launch: NONE,
            release: NONE,
        };
        for &p in g.preds_of(2 * n) {
            let pn = (p / 2) as usize;
            match (g.nodes[pn].kind, p % 2) {
                (NodeKind::Host, 0) => w.launch = p,
                (NodeKind::Compute | NodeKind::Memory | NodeKind::Comm, 1)
                    if stream_of[pn] != stream_of[n as usize] =>
                {
                    w.release = p
                }
                _ => {}
            }
        }
        w
    };
    // New predecessors of each moved all-gather's start vertex.
    let mut moved: rustc_hash::FxHashMap<u32, Vec<u32>> = Default::default();
    for seq in seqs {
        let waits: Vec<Waits> = seq.iter().map(|&n| waits_of(n)).collect();
        for (k, &n) in seq.iter().enumerate() {
            let from = k.saturating_sub(by as usize);
            if from == k {
                continue;
            }
            let (own, src) = (waits[k], waits[from]);
            let mut preds: Vec<u32> = g
                .preds_of(2 * n)
                .iter()
                .copied()
                .filter(|&p| p != own.launch && p != own.release)
                .collect();
            preds.extend([src.launch, src.release].into_iter().filter(|&p| p != NONE));
            preds.sort_unstable();
            preds.dedup();
            moved.insert(2 * n, preds);
        }
    }
    let nv = g.vertices();
    let mut pred_off = Vec::with_capacity(nv + 1);
    let mut preds = Vec::with_capacity(g.preds.len());
    pred_off.push(0u32);
    for v in 0..nv as u32 {
        match moved.get(&v) {
            Some(p) => preds.extend_from_slice(p),
            None => preds.extend_from_slice(g.preds_of(v)),
        }
        pred_off.push(preds.len() as u32);
    }
    let (succ_off, succ) = super::graph::successors(nv, &pred_off, &preds);
    Graph {
        nodes: g.nodes.clone(),
        pred_off,
        preds,
        succ_off,
        succ,
        residual: g.residual.clone(),
        instance: g.instance.clone(),
        droppable: g.droppable.clone(),
        ctx_offset: g.ctx_offset.clone(),
        comm_offset: g.comm_offset.clone(),
        gpu_nodes: g.gpu_nodes.clone(),
        host_threads: g.host_threads.clone(),
        spec_hits: g.spec_hits.clone(),
        sync_sites: g.sync_sites.clone(),
        queue_depth: g.queue_depth,
        queued: g.queued.clone(),
        legacy_release: g.legacy_release.clone(),
    }
}

/// Per node: its stream (rank context × 65536 + stream index), or `NONE`
/// for host nodes.
pub(super) fn streams_of_nodes(ctxs: &[RankCtx], g: &Graph) -> Vec<u32> {
    let mut out = vec![NONE; g.nodes.len()];
    for (ci, ctx) in ctxs.iter().enumerate() {
        for (e, &n) in ctx.gpu.iter().zip(&g.gpu_nodes[ci]) {
            out[n as usize] = ((ci as u32) << 16) | u32::from(e.stream);
        }
    }
    out
}

/// Per node: the factor on a compute kernel's measured duration for the SM
/// contention it meets in the prediction `at` rather than as measured. A
/// kernel of a rank whose compute runs `slowdown[ci]` slower under NCCL
/// kernels (a fraction, measured by `report`'s SM contention on the same
/// trace) lasts alone × (1 + slowdown × f), f its share of time under NCCL
/// kernels of its rank: (1 + slowdown × f_predicted) / (1 + slowdown ×
/// f_measured). 1 for every other node.
pub(super) fn contention_scale(
    ctxs: &[RankCtx],
    g: &Graph,
    at: &[i64],
    slowdown: &[f64],
) -> Vec<f64> {
    let mut out = vec![1.0; g.nodes.len()];
    for (ci, _) in ctxs.iter().enumerate() {
        let s = slowdown[ci];
        if s <= 0.0 {
            continue;
        }
        let nodes = &g.gpu_nodes[ci];
        let comm = |times: &dyn Fn(u32) -> (i64, i64)| {
            super::super::intervals::union(
                nodes
                    .iter()
                    .filter(|&&n| g.nodes[n as usize].kind == NodeKind::Comm)
                    .map(|&n| times(n))
                    .collect(),
            )
        };
        let measured = |n: u32| (g.nodes[n as usize].s, g.nodes[n as usize].e);
        let predicted = |n: u32| (at[2 * n as usize], at[2 * n as usize + 1]);
        let (cm, cp) = (comm(&measured), comm(&predicted));
        for &n in nodes {
            if g.nodes[n as usize].kind != NodeKind::Compute {
                continue;
            }
            let share = |u: &[(i64, i64)], (a, b): (i64, i64)| {
                if b > a {
                    super::super::measured::covered(u, a, b) as f64 / (b - a) as f64
                } else {
                    0.0
                }
            };
            let (fm, fp) = (share(&cm, measured(n)), share(&cp, predicted(n)));
            out[n as usize] = (1.0 + s * fp) / (1.0 + s * fm);
        }
    }
    out
}
