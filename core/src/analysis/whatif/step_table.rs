//! A prediction's step rows: each measured step mapped onto the replayed
//! timeline (by the host's or the GPU's clock, as the step was timed), with
//! its overlap, exposed communication, critical path and regimes.

use super::super::breakdown::Unions;
use super::super::collectives::NcclNames;
use super::super::rank::{Ev, RankCtx, NONE};
use super::super::steps;
use super::graph::Graph;
use super::replay::{self, Replayed};
use super::{CriticalPath, Regime, StepWhatIf};
use crate::model::{SliceClass, SliceKind, Trace};

/// Maps measured times of a rank to replayed ones.
struct TimeMap<'a> {
    g: &'a Graph,
    /// Host nodes of the step thread, in start order.
    thread: &'a [u32],
    /// GPU nodes in start order.
    gpu: &'a [u32],
    host_time: bool,
}

impl TimeMap<'_> {
    /// Replayed time of measured time `t`, and the vertex that anchors it.
    fn map(&self, r: &Replayed, t: i64) -> (i64, u32) {
        let nodes = if self.host_time && !self.thread.is_empty() {
            self.thread
        } else {
            self.gpu
        };
        let g = self.g;
        let k = nodes.partition_point(|&n| g.nodes[n as usize].s <= t);
        if k == 0 {
            let n = nodes[0];
            return (
                r.at[2 * n as usize].saturating_sub(g.nodes[n as usize].s.saturating_sub(t)),
                2 * n,
            );
        }
        let n = nodes[k - 1];
        let node = &g.nodes[n as usize];
        if self.host_time && t >= node.e {
            (
                r.at[2 * n as usize + 1].saturating_add(t.saturating_sub(node.e)),
                2 * n + 1,
            )
        } else {
            (
                r.at[2 * n as usize].saturating_add(t.saturating_sub(node.s)),
                2 * n,
            )
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn step_rows(
    t: &Trace,
    ctx: &RankCtx,
    ci: usize,
    steps: &[steps::Step],
    window: &[i64],
    g: &Graph,
    base: &Replayed,
    pred: &Replayed,
    nccl: &NcclNames,
) -> Vec<StepWhatIf> {
    let sl = t.slices();
    // The step thread: where the step markers are, else the busiest thread.
    let marker_track = ctx.host.iter().find_map(|&h| {
        let i = h as usize;
        let n = t.str(sl.name()[i]);
        (matches!(sl.kind()[i], SliceKind::CpuOp | SliceKind::Range)
            && (steps::is_step_name(n) || n == crate::protocol::OPTIMIZER_STEP_RANGE))
            .then_some(sl.track()[i].get())
    });
    let threads = &g.host_threads[ci];
    let thread = marker_track
        .and_then(|tr| threads.iter().find(|(x, _)| *x == tr))
        .or_else(|| threads.iter().max_by_key(|(_, v)| v.len()))
        .map_or(&[][..], |(_, v)| v.as_slice());
    let gpu = &g.gpu_nodes[ci];
    let tm = TimeMap {
        g,
        thread,
        gpu,
        host_time: steps.first().is_some_and(|s| s.host_time),
    };
    let mut per_step: Vec<Vec<usize>> = vec![Vec::new(); steps.len()];
    for (k, e) in ctx.gpu.iter().enumerate() {
        if e.step != NONE {
            per_step[e.step as usize].push(k);
        }
    }
    let us = |ns: i64| ns as f64 / 1000.0;
    // A host-timed step ends when both sides are done with it: its host
    // markers' end and its last GPU work's end, whichever is later; its
    // time runs from the previous step's end to its own (the first step:
    // from its start). The GPU cannot finish a step before the host
    // launched it, nor before the work queued ahead of it ran, so this is
    // the loop's pace whichever side sets it: a host that runs ahead of
    // the GPU (its markers a few milliseconds apart while the GPU needs
    // twenty) does not make the step look short, nor does a stream that
    // runs ahead of the others.
    let lasts = |r: Option<&Replayed>| -> Vec<Option<i64>> {
        per_step
            .iter()
            .map(|v| {
                v.iter()
                    .map(|&i| r.map_or(ctx.gpu[i].e, |r| r.at[2 * gpu[i] as usize + 1]))
                    .max()
            })
            .collect()
    };
    // The end vertex of the step's last GPU work, predicted.
    let last_gpu = |k: usize| -> Option<u32> {
        per_step[k]
            .iter()
            .map(|&i| 2 * gpu[i] + 1)
            .max_by_key(|&v| pred.at[v as usize])
    };
    let (m_last, b_last, p_last) = (lasts(None), lasts(Some(base)), lasts(Some(pred)));
    let pred_end = &p_last;
    // Each step's end on one timeline: (start of the first step, ends).
    let ends = |last: &[Option<i64>], map: &dyn Fn(i64) -> i64| -> (i64, Vec<i64>) {
        let first = steps.first().map_or(0, |s| map(s.start_ns));
        let e = steps
            .iter()
            .zip(last)
            .map(|(s, l)| {
                let h = map(s.end_ns);
                l.map_or(h, |g| g.max(h))
            })
            .collect();
        (first, e)
    };
    let (m_ends, b_ends, p_ends) = if tm.host_time {
        (
            ends(&m_last, &|x| x),
            ends(&b_last, &|x| tm.map(base, x).0),
            ends(&p_last, &|x| tm.map(pred, x).0),
        )
    } else {
        Default::default()
    };
    // (step time, whether the GPU's end set it rather than the host's).
    let step_time = |ends: &(i64, Vec<i64>), k: usize, a: i64, b: i64| {
        if !tm.host_time {
            return (b.saturating_sub(a), false);
        }
        let prev = k.checked_sub(1).map_or(ends.0, |j| ends.1[j]);
        let end = ends.1[k];
        (end.saturating_sub(prev), end > b)
    };
    steps
        .iter()
        .enumerate()
        .map(|(k, s)| {
            let (measured, _) = step_time(&m_ends, k, s.start_ns, s.end_ns);
            let (b0, _) = tm.map(base, s.start_ns);
            let (b1, _) = tm.map(base, s.end_ns);
            let (p0, _) = tm.map(pred, s.start_ns);
            let (p1, anchor) = tm.map(pred, s.end_ns);
            let (replayed, _) = step_time(&b_ends, k, b0, b1);
            let (predicted, gpu_paced) = step_time(&p_ends, k, p0, p1);
            let host_len = p1.saturating_sub(p0);
            // The GPU's side of the step: from the previous step's end to
            // this step's last GPU work (0 unless host-timed with GPU work).
            let gpu_len = match (tm.host_time, p_last[k]) {
                (true, Some(g)) => {
                    let prev = k.checked_sub(1).map_or(p_ends.0, |j| p_ends.1[j]);
                    g.saturating_sub(prev).max(0)
                }
                _ => 0,
            };
            let evs = |r: Option<&Replayed>| -> Vec<Ev> {
                per_step[k]
                    .iter()
                    .map(|&i| {
                        let e = ctx.gpu[i];
                        match r {
                            Some(r) => {
                                let n = gpu[i] as usize;
                                Ev {
                                    s: r.at[2 * n],
                                    e: r.at[2 * n + 1].max(r.at[2 * n]),
                                    ..e
                                }
                            }
                            None => e,
                        }
                    })
                    .collect()
            };
            let (m_evs, p_evs) = (evs(None), evs(Some(pred)));
            let (mu, pu) = (Unions::of(m_evs.iter()), Unions::of(p_evs.iter()));
            let (mb, pb) = (mu.breakdown(), pu.breakdown());
            // The critical path: back from the step's last GPU work to the
            // previous step's when the GPU set the pace, else from the
            // host's step end (the host time after its anchor included).
            let share = match last_gpu(k).filter(|_| gpu_paced) {
                Some(v) => {
                    let until = k.checked_sub(1).and_then(|j| pred_end[j]).unwrap_or(p0);
                    replay::critical_path(g, pred, v, until)
                }
                None => {
                    let mut sh = replay::critical_path(g, pred, anchor, p0);
                    sh.host = sh
                        .host
                        .saturating_add(p1.saturating_sub(pred.at[anchor as usize]).max(0));
                    sh
                }
            };
            let total = share
                .compute
                .saturating_add(share.communication)
                .saturating_add(share.host)
                .saturating_add(share.sync);
            let pct = |x: i64| {
                if total > 0 {
                    100.0 * x as f64 / total as f64
                } else {
                    0.0
                }
            };
            StepWhatIf {
                rank: ctx.rank,
                step: s.number,
                in_window: window.contains(&s.number),
                measured_step_us: us(measured),
                predicted_step_us: us(predicted),
                replayed_step_us: us(replayed),
                predicted_host_us: us(host_len),
                predicted_gpu_us: us(gpu_len),
                replay_error_pct: if measured > 0 {
                    100.0 * (replayed - measured).abs() as f64 / measured as f64
                } else {
                    0.0
                },
                change_pct: if measured > 0 {
                    100.0 * (predicted - measured) as f64 / measured as f64
                } else {
                    0.0
                },
                measured_overlap_pct: mb.overlap_pct,
                predicted_overlap_pct: pb.overlap_pct,
                measured_exposed_comm_us: mb.exposed_comm_us,
                predicted_exposed_comm_us: pb.exposed_comm_us,
                critical_path: CriticalPath {
                    length_us: us(total),
                    compute_pct: pct(share.compute),
                    communication_pct: pct(share.communication),
                    host_pct: pct(share.host),
                    sync_pct: pct(share.sync),
                },
                regimes: regimes(
                    t,
                    ctx,
                    &per_step[k],
                    (&m_evs, &mu, s.end_ns),
                    (&p_evs, &pu, p1),
                    g,
                    pred,
                    ci,
                    nccl,
                ),
            }
        })
        .collect()
}

/// Compute busy time of `u` inside `[a, b)`.
fn compute_within(u: &Unions, a: i64, b: i64) -> i64 {
    let c = &u.compute;
    let k = c.partition_point(|x| x.1 <= a);
    c[k..]
        .iter()
        .take_while(|x| x.0 < b)
        .map(|x| x.1.min(b).saturating_sub(x.0.max(a)))
        .filter(|&d| d > 0)
        .fold(0i64, |s, d| s.saturating_add(d))
}

type Side<'a> = (&'a [Ev], &'a Unions, i64);

/// Per collective kind of a step: transfer time against the compute it can hide behind.
#[allow(clippy::too_many_arguments)]
fn regimes(
    t: &Trace,
    ctx: &RankCtx,
    idx: &[usize],
    measured: Side,
    predicted: Side,
    g: &Graph,
    pred: &Replayed,
    ci: usize,
    nccl: &NcclNames,
) -> Vec<Regime> {
    let sl = t.slices();
    let gpu = &g.gpu_nodes[ci];
    // (kind, stream, position in idx) of the step's NCCL kernels.
    let mut comm: Vec<(String, u16, usize)> = Vec::new();
    for (pos, &i) in idx.iter().enumerate() {
        let e = &ctx.gpu[i];
        if e.class != SliceClass::Communication || sl.kind()[e.id as usize] != SliceKind::Kernel {
            continue;
        }
        let kind = nccl
            .info(t, e.id)
            .map(|n| n.collective.clone())
            .filter(|k| !k.is_empty())
            .unwrap_or_else(|| t.str(sl.name()[e.id as usize]).to_string());
        comm.push((kind, e.stream, pos));
    }
    // Transfer: the kernel from the last rank's arrival (what bound its end) to its end.
    let transfer = |pos: usize, r: Option<&Replayed>| -> i64 {
        let n = gpu[idx[pos]];
        let (v0, v1) = (2 * n, 2 * n + 1);
        let at = |v: u32| r.map_or(g.measured(v), |r| r.at[v as usize]);
        let off = |v: u32| g.offset(v);
        let last = g.preds_of(v1)[1..]
            .iter()
            .map(|&p| at(p).saturating_add(off(p)).saturating_sub(off(v0)))
            .fold(at(v0), i64::max);
        at(v1).saturating_sub(last).max(0)
    };
    // The next kernel of the same kind on the same stream, by a backward scan.
    let mut next_of: Vec<Option<usize>> = vec![None; comm.len()];
    let mut seen: std::collections::HashMap<(&str, u16), usize> = Default::default();
    for (j, (kind, stream, pos)) in comm.iter().enumerate().rev() {
        next_of[j] = seen.insert((kind.as_str(), *stream), *pos);
    }
    let mut out: Vec<Regime> = Vec::new();
    for (j, (kind, _, pos)) in comm.iter().enumerate() {
        let next = next_of[j];
        let window = |side: &Side| {
            let (evs, _, end) = side;
            let a = evs[*pos].s;
            let b = next.map_or(*end, |q| evs[q].s).max(a);
            (a, b)
        };
        let (ma, mbnd) = window(&measured);
        let (pa, pbnd) = window(&predicted);
        let (mc, pc) = (
            compute_within(measured.1, ma, mbnd),
            compute_within(predicted.1, pa, pbnd),
        );
        let (mt, pt) = (transfer(*pos, None), transfer(*pos, Some(pred)));
        let row = match out.iter_mut().find(|r| r.collective == *kind) {
            Some(r) => r,
            None => {
                out.push(Regime {
                    collective: kind.clone(),
                    ..Default::default()
                });
                out.last_mut().expect("just pushed")
            }
        };
        row.count += 1;
        row.measured_comm_us += mt as f64 / 1000.0;
        row.measured_compute_us += mc as f64 / 1000.0;
        row.predicted_comm_us += pt as f64 / 1000.0;
        row.predicted_compute_us += pc as f64 / 1000.0;
        row.past_wall += u64::from(pt > pc);
    }
    for r in &mut out {
        let ratio = |c: f64, k: f64| (k > 0.0).then(|| c / k);
        r.measured_ratio = ratio(r.measured_comm_us, r.measured_compute_us);
        r.predicted_ratio = ratio(r.predicted_comm_us, r.predicted_compute_us);
        r.regime = match r.predicted_ratio {
            Some(x) if x <= 1.0 => "hidden".into(),
            _ => "past the wall".into(),
        };
    }
    out
}
