//! What-if replay of the steps of a trace: the dependency graph of every
//! rank (`graph`) replayed with changed durations (`replay`): NCCL
//! transfers scaled or recomputed at another bus bandwidth, compute
//! kernels scaled, host syncs dropped. Per rank and step: the measured and
//! predicted step time, overlap and exposed communication, the critical
//! path's share and the communication regime per collective
//! (t_comm / t_compute). Definitions and limits: docs/METRICS.md, "What-if".

mod graph;
pub mod notes;
pub mod render;
mod replay;

use serde::Serialize;

use super::breakdown::Unions;
use super::collectives::NcclNames;
use super::rank::{self, Ev, RankCtx, NONE};
use super::{steps, xrank, AnalysisOptions};
use crate::model::{SliceClass, SliceKind, Trace};
use graph::Graph;
pub use graph::LAUNCH_QUEUE_DEPTH;
pub use notes::WhatIfNote;
pub use replay::Changes;
use replay::Replayed;

/// What to replay.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WhatIfOptions {
    /// Durations changed.
    pub changes: Changes,
    /// `--drop-syncs` specs: `FILE:LINE` of the Python line, or a substring
    /// of the API name or Python location.
    pub drop_syncs: Vec<String>,
    /// Launches the host may queue ahead of the GPU before a launch call
    /// blocks (`None`: [`LAUNCH_QUEUE_DEPTH`]).
    pub launch_queue: Option<u32>,
}

/// The critical path of a step, shares of its length.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct CriticalPath {
    /// Length walked (µs): from the step's end back to its start.
    pub length_us: f64,
    /// Non-NCCL GPU work, %.
    pub compute_pct: f64,
    /// NCCL kernels, %.
    pub communication_pct: f64,
    /// Host time between and inside non-blocking API calls, %.
    pub host_pct: f64,
    /// Host sync calls, %.
    pub sync_pct: f64,
}

/// t_comm / t_compute of one collective kind in a step.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct Regime {
    /// Canonical collective ("AllGather", ...) or the kernel's name when unknown.
    pub collective: String,
    /// NCCL kernels of this kind in the step.
    pub count: u64,
    /// Measured transfer time (after the last rank arrived), summed, µs.
    pub measured_comm_us: f64,
    /// Compute each kernel could hide behind (compute busy time from its
    /// start to the next kernel of its kind on its stream, or the step end), summed, µs.
    pub measured_compute_us: f64,
    /// measured_comm / measured_compute (None without compute).
    pub measured_ratio: Option<f64>,
    /// Predicted transfer time, summed, µs.
    pub predicted_comm_us: f64,
    /// Predicted compute it could hide behind, summed, µs.
    pub predicted_compute_us: f64,
    /// predicted_comm / predicted_compute.
    pub predicted_ratio: Option<f64>,
    /// Kernels whose predicted transfer outlasts their compute (past the communication wall).
    pub past_wall: u64,
    /// "hidden" (ratio ≤ 1) or "past the wall" (ratio > 1), predicted.
    pub regime: String,
}

/// One step of one rank.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct StepWhatIf {
    /// Rank.
    pub rank: u32,
    /// Step number (as `report` numbers steps).
    pub step: i64,
    /// Whether the step is in the rank's headline window (steady state).
    pub in_window: bool,
    /// Measured step time, µs.
    pub measured_step_us: f64,
    /// Predicted step time under the changes, µs.
    pub predicted_step_us: f64,
    /// The unchanged replay's step time, µs (the model's consistency check).
    pub replayed_step_us: f64,
    /// The predicted step's two bounds, µs: the host's interval (host-timed
    /// steps; the step itself otherwise) and the GPU's period (0 unless
    /// host-timed); `predicted_step_us` is the larger.
    pub predicted_host_us: f64,
    /// See `predicted_host_us`.
    pub predicted_gpu_us: f64,
    /// 100 |replayed − measured| / measured.
    pub replay_error_pct: f64,
    /// 100 (predicted − measured) / measured.
    pub change_pct: f64,
    /// Measured overlap of communication with compute, %.
    pub measured_overlap_pct: Option<f64>,
    /// Predicted overlap, %.
    pub predicted_overlap_pct: Option<f64>,
    /// Measured exposed communication, µs.
    pub measured_exposed_comm_us: f64,
    /// Predicted exposed communication, µs.
    pub predicted_exposed_comm_us: f64,
    /// Critical path of the predicted step.
    pub critical_path: CriticalPath,
    /// Per collective kind: t_comm / t_compute.
    pub regimes: Vec<Regime>,
}

/// One rank.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct RankWhatIf {
    /// Rank.
    pub rank: u32,
    /// Display label.
    pub label: String,
    /// Where its steps came from.
    pub step_source: String,
    /// Median measured step time over the headline window, µs.
    pub measured_median_step_us: Option<f64>,
    /// Median predicted step time over the headline window, µs.
    pub predicted_median_step_us: Option<f64>,
    /// Mean measured step over the headline window, µs.
    pub measured_mean_step_us: Option<f64>,
    /// Mean predicted step over the headline window, µs: the larger of the
    /// host's and the GPU's time summed over the window, per step (a host
    /// that runs ahead in one step and waits in the next nets out; the
    /// steady pace, which `report`'s findings take their gains from).
    pub predicted_mean_step_us: Option<f64>,
    /// Its steps.
    pub steps: Vec<StepWhatIf>,
}

/// The replay of a trace.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct WhatIfReport {
    /// The changes, in words ("none" for the consistency replay only).
    pub changes: String,
    /// Largest |replayed − measured| / measured over every step of every
    /// rank, % (the unchanged replay; the model's consistency check).
    pub consistency_max_error_pct: f64,
    /// Nodes (GPU activities and host API calls) in the graph.
    pub graph_nodes: u64,
    /// Dependency edges in the graph.
    pub graph_edges: u64,
    /// Ranks.
    pub ranks: Vec<RankWhatIf>,
    /// Launches the host may queue ahead of the GPU (the assumed depth).
    pub launch_queue_depth: u32,
    /// Launch calls the full launch queue held in the prediction.
    pub launch_queue_waits: u64,
    /// Notes: syncs dropped, kernels kept as measured, cycles broken.
    pub notes: Vec<WhatIfNote>,
}

/// Why a trace cannot be replayed.
pub type Refusal = String;

/// Replays the steps of `t` under `opts`.
pub fn whatif(t: &Trace, opts: &WhatIfOptions) -> Result<WhatIfReport, Refusal> {
    if opts.drop_syncs.iter().any(|s| s.trim().is_empty()) {
        return Err(
            "--drop-syncs '': an empty pattern would match every sync; give FILE:LINE or part of an API name or Python location"
                .into(),
        );
    }
    prepare(t, opts.launch_queue)?.replay(opts)
}

/// A trace's graph, built once and replayed under many changes (`report`'s
/// findings replay one change each).
pub struct Prepared<'t> {
    t: &'t Trace,
    ctxs: Vec<RankCtx>,
    detected: Vec<steps::Detected>,
    windows: Vec<Vec<i64>>,
    matching: xrank::Matching,
    nccl: NcclNames,
    g: Graph,
    base: replay::Replayed,
}

/// Builds the graph of `t` and its unchanged replay (`queue`: the launch
/// queue's depth, `None` for [`LAUNCH_QUEUE_DEPTH`]).
pub fn prepare(t: &Trace, queue: Option<u32>) -> Result<Prepared<'_>, Refusal> {
    let all = rank::build(t, None);
    let mut ctxs: Vec<RankCtx> = all
        .into_iter()
        .filter(|c| !c.gpu.is_empty() || c.device.is_some())
        .collect();
    if ctxs.iter().all(|c| c.gpu.is_empty()) {
        return Err("no GPU activity in the trace: nothing to replay".into());
    }
    rank::number_ranks(t, &mut ctxs);
    let nccl = NcclNames::new(t);
    let matching = xrank::match_ranks(t, &ctxs, &nccl);
    // Steps per rank, GPU work assigned to the step that launched it.
    let hta = super::hta_filter_active(t);
    let mut detected = Vec::with_capacity(ctxs.len());
    let mut windows = Vec::with_capacity(ctxs.len());
    for ctx in ctxs.iter_mut() {
        let d = steps::detect(t, ctx);
        super::step_rows::assign_steps(t, ctx, &d.steps);
        let mut notes = Vec::new();
        let (w, _, _) = super::window::headline_window(
            t,
            ctx,
            &d,
            hta,
            &AnalysisOptions::default(),
            &mut notes,
        );
        windows.push(w.steps);
        detected.push(d);
    }
    if detected.iter().all(|d| d.steps.is_empty()) {
        return Err(
            "no steps in the trace (no ProfilerStep or NVTX step ranges, no optimizer-step markers, no repeating kernel sequence): a step time cannot be predicted"
                .into(),
        );
    }
    let g = graph::build(
        t,
        &ctxs,
        &matching,
        &[],
        queue.unwrap_or(LAUNCH_QUEUE_DEPTH),
    );
    let base = replay::replay(&g, &matching, &Changes::default());
    Ok(Prepared {
        t,
        ctxs,
        detected,
        windows,
        matching,
        nccl,
        g,
        base,
    })
}

/// One host sync site of a prepared trace: its `FILE:LINE` (or API name
/// when it has no Python location) and its calls.
#[derive(Debug, Clone, PartialEq)]
pub struct SyncSite {
    /// The `--drop-syncs` spec that selects it.
    pub spec: String,
    /// Calls.
    pub calls: u64,
}

impl Prepared<'_> {
    /// The sync sites of the trace, by `FILE:LINE` of their Python location.
    pub fn sync_sites(&self) -> Vec<SyncSite> {
        let mut out: Vec<SyncSite> = Vec::new();
        for (_, _, python) in &self.g.sync_sites {
            let fl = python.split(" (").next().unwrap_or("").trim();
            if fl.is_empty() {
                continue;
            }
            match out.iter_mut().find(|s| s.spec == fl) {
                Some(s) => s.calls += 1,
                None => out.push(SyncSite {
                    spec: fl.to_string(),
                    calls: 1,
                }),
            }
        }
        out
    }

    /// The steps replayed under `opts` (its `launch_queue` is the prepared one's).
    pub fn replay(&mut self, opts: &WhatIfOptions) -> Result<WhatIfReport, Refusal> {
        let (t, ctxs, detected, windows, matching, nccl) = (
            self.t,
            &self.ctxs,
            &self.detected,
            &self.windows,
            &self.matching,
            &self.nccl,
        );
        let comm_kernels = matching.comm_kernels;
        let ch = &opts.changes;
        let comm_change = ch.comm_scale.is_some() || ch.link_bw_gbps.is_some();
        if comm_change && comm_kernels == 0 {
            return Err(
            "no communication in the trace (no NCCL kernel): --comm-scale / --link-bw have nothing to change"
                .into(),
        );
        }
        if ch.link_bw_gbps.is_some() && !matching.instances.iter().any(|i| i.bytes.is_some()) {
            return Err(format!(
            "--link-bw needs each collective's bytes (record_param_comms or the NCCL plugin's metadata); {}",
            if matching.instances.is_empty() {
                "no collective is matched across ranks".to_string()
            } else {
                format!("none of the {} matched collectives has them", matching.instances.len())
            }
        ));
        }
        self.g.set_drops(&opts.drop_syncs);
        let g = &self.g;
        let mut notes = Vec::new();
        for (spec, &hits) in opts.drop_syncs.iter().zip(&g.spec_hits) {
            if hits == 0 {
                return Err(format!(
                    "--drop-syncs {spec}: matches no host sync of the trace"
                ));
            }
            notes.push(WhatIfNote::SyncsDropped {
                spec: spec.clone(),
                calls: hits,
            });
        }
        let base = &self.base;
        let mut ch = ch.clone();
        ch.drop_syncs = !opts.drop_syncs.is_empty();
        let pred = if ch.is_none() {
            None
        } else {
            Some(replay::replay(g, matching, &ch))
        };
        let p = pred.as_ref().unwrap_or(base);
        if p.overflowed || base.overflowed {
            return Err(format!(
            "{}: the predicted times leave the range streamscope represents (±146 years in ns); give a smaller change",
            describe(&ch, &opts.drop_syncs)
        ));
        }
        if p.cycle_breaks > 0 {
            notes.push(WhatIfNote::CycleBroken {
                vertices: p.cycle_breaks,
            });
        }
        if p.queue_waits > 0 {
            notes.push(WhatIfNote::LaunchQueueFull {
                calls: p.queue_waits,
                depth: g.queue_depth,
            });
        }
        if p.without_bytes > 0 {
            notes.push(WhatIfNote::BytesUnknown {
                kernels: p.without_bytes,
            });
        }
        if comm_kernels > 0 && matching.instances.is_empty() {
            notes.push(WhatIfNote::CommUnmatched);
        }
        if comm_kernels == 0 {
            notes.push(WhatIfNote::NoCommunication);
        }
        let mut report = WhatIfReport {
            changes: describe(&ch, &opts.drop_syncs),
            graph_nodes: g.nodes.len() as u64,
            graph_edges: g.preds.len() as u64,
            launch_queue_depth: g.queue_depth,
            launch_queue_waits: p.queue_waits,
            notes,
            ..Default::default()
        };
        for (ci, ctx) in ctxs.iter().enumerate() {
            let d = &detected[ci];
            if d.steps.is_empty() {
                report.notes.push(WhatIfNote::NoSteps { rank: ctx.rank });
                continue;
            }
            let rows = step_rows(t, ctx, ci, &d.steps, &windows[ci], g, base, p, nccl);
            let median = |f: &dyn Fn(&StepWhatIf) -> f64| {
                let mut v: Vec<f64> = rows.iter().filter(|r| r.in_window).map(f).collect();
                v.sort_by(f64::total_cmp);
                let n = v.len();
                match n {
                    0 => None,
                    _ if n % 2 == 1 => Some(v[n / 2]),
                    _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
                }
            };
            for r in &rows {
                report.consistency_max_error_pct =
                    report.consistency_max_error_pct.max(r.replay_error_pct);
            }
            let inw: Vec<&StepWhatIf> = rows.iter().filter(|r| r.in_window).collect();
            let n = inw.len() as f64;
            let sum = |f: &dyn Fn(&StepWhatIf) -> f64| inw.iter().map(|r| f(r)).sum::<f64>();
            let (mean_m, mean_p) = if inw.is_empty() {
                (None, None)
            } else {
                (
                    Some(sum(&|r| r.measured_step_us) / n),
                    Some(sum(&|r| r.predicted_host_us).max(sum(&|r| r.predicted_gpu_us)) / n),
                )
            };
            report.ranks.push(RankWhatIf {
                rank: ctx.rank,
                measured_mean_step_us: mean_m,
                predicted_mean_step_us: mean_p,
                label: t.processes()[ctx.process.index()].label(),
                step_source: d.source.name().to_string(),
                measured_median_step_us: median(&|r| r.measured_step_us),
                predicted_median_step_us: median(&|r| r.predicted_step_us),
                steps: rows,
            });
        }
        report.ranks.sort_by_key(|r| r.rank);
        Ok(report)
    }
}

/// The changes in words.
fn describe(ch: &Changes, drops: &[String]) -> String {
    let mut v = Vec::new();
    if let Some(x) = ch.comm_scale {
        v.push(format!("NCCL transfers ×{x}"));
    }
    if let Some(x) = ch.link_bw_gbps {
        v.push(format!("NCCL transfers at {x} GB/s bus bandwidth"));
    }
    if let Some(x) = ch.compute_scale {
        v.push(format!("compute kernels ×{x}"));
    }
    for d in drops {
        v.push(format!("syncs {d} dropped"));
    }
    if v.is_empty() {
        "none (the replay of the measured steps)".into()
    } else {
        v.join(", ")
    }
}

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
fn step_rows(
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
    // A host-timed step lasts at least its GPU period: from the end of the
    // previous step's GPU work to the end of its own (a host that no longer
    // waits for the GPU runs ahead until the launch queue fills; the GPU
    // sets the pace), less what the measured GPU period already exceeded
    // the measured step by (work left running past the step's end).
    let gpu_end = |r: &Replayed| -> Vec<Option<i64>> {
        per_step
            .iter()
            .map(|v| v.iter().map(|&i| r.at[2 * gpu[i] as usize + 1]).max())
            .collect()
    };
    // The end vertex of the step's last GPU work, predicted.
    let last_gpu = |k: usize| -> Option<u32> {
        per_step[k]
            .iter()
            .map(|&i| 2 * gpu[i] + 1)
            .max_by_key(|&v| pred.at[v as usize])
    };
    let (base_end, pred_end) = (gpu_end(base), gpu_end(pred));
    let period = |ends: &[Option<i64>], k: usize, a: i64| -> Option<i64> {
        let prev = k.checked_sub(1).and_then(|j| ends[j]).unwrap_or(a);
        ends[k].map(|e| e.saturating_sub(prev))
    };
    let measured_end: Vec<Option<i64>> = per_step
        .iter()
        .map(|v| v.iter().map(|&i| ctx.gpu[i].e).max())
        .collect();
    // (host interval, GPU period less the excess; 0 unless host-timed).
    let bounds = |ends: &[Option<i64>], k: usize, a: i64, b: i64| -> (i64, i64) {
        if !tm.host_time {
            return (b - a, 0);
        }
        let s = &steps[k];
        let excess = period(&measured_end, k, s.start_ns).map_or(0, |p| {
            p.saturating_sub(s.end_ns.saturating_sub(s.start_ns)).max(0)
        });
        (
            b.saturating_sub(a),
            period(ends, k, a).map_or(0, |p| p.saturating_sub(excess)),
        )
    };
    // (step time, whether the GPU period set it).
    let step_time = |ends: &[Option<i64>], k: usize, a: i64, b: i64| -> (i64, bool) {
        let (h, p) = bounds(ends, k, a, b);
        if p > h {
            (p, true)
        } else {
            (h, false)
        }
    };
    steps
        .iter()
        .enumerate()
        .map(|(k, s)| {
            let measured = s.end_ns.saturating_sub(s.start_ns);
            let (b0, _) = tm.map(base, s.start_ns);
            let (b1, _) = tm.map(base, s.end_ns);
            let (p0, _) = tm.map(pred, s.start_ns);
            let (p1, anchor) = tm.map(pred, s.end_ns);
            let (replayed, _) = step_time(&base_end, k, b0, b1);
            let (predicted, gpu_paced) = step_time(&pred_end, k, p0, p1);
            let (host_len, gpu_len) = bounds(&pred_end, k, p0, p1);
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
