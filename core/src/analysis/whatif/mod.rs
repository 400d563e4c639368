//! What-if replay of the steps of a trace: the dependency graph of every
//! rank (`graph`) replayed with changed durations (`replay`): NCCL
//! transfers scaled or recomputed at another bus bandwidth, compute
//! kernels scaled, host syncs dropped. Per rank and step: the measured and
//! predicted step time, overlap and exposed communication, the critical
//! path's share and the communication regime per collective
//! (t_comm / t_compute). Definitions and limits: docs/METRICS.md, "What-if".

mod graph;
pub mod notes;
mod prefetch;
pub mod render;
mod replay;
mod report;
mod step_table;

use super::collectives::NcclNames;
use super::rank::{self, RankCtx};
use super::{steps, xrank, AnalysisOptions};
use crate::model::Trace;
pub(crate) use graph::is_sync_api;
use graph::Graph;
pub use graph::LAUNCH_QUEUE_DEPTH;
pub use notes::WhatIfNote;
pub use replay::Changes;
pub use report::*;
use step_table::step_rows;

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
        if ch.unblock_legacy && self.g.legacy_release.is_empty() {
            return Err(
                "--legacy-stream-nonblocking: no GPU work in the trace waited on the legacy default stream's implicit synchronization (that needs a recording that says how each stream was created: `streamscope record`'s cuda_streams metadata)"
                    .into(),
            );
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
        let rewired = match ch.prefetch_deeper {
            Some(by) => {
                let seqs = prefetch::all_gather_sequences(t, ctxs, g, nccl);
                if seqs.iter().all(|s| s.len() < 2) {
                    return Err(format!(
                        "--prefetch-deeper {by}: no step of the trace issues two NCCL all-gathers: there is no prefetch to deepen"
                    ));
                }
                let streams = prefetch::streams_of_nodes(ctxs, g);
                Some(prefetch::deeper(g, &seqs, by, &streams))
            }
            None => None,
        };
        let pred = match (&rewired, ch.is_none()) {
            (_, true) => None,
            (None, false) => Some(replay::replay(g, matching, &ch)),
            (Some(rg), false) => {
                // Moved all-gathers overlap other compute: a second pass
                // with each compute kernel's contention as predicted.
                let first = replay::replay(rg, matching, &ch);
                let slowdown: Vec<f64> = ctxs
                    .iter()
                    .enumerate()
                    .map(|(ci, ctx)| {
                        let all: Vec<&rank::Ev> = ctx.gpu.iter().collect();
                        let (c, _) = super::measured::sm_contention(
                            t,
                            ctx,
                            &all,
                            detected[ci].steps.len(),
                            windows[ci].len(),
                        );
                        c.compute_slowdown_pct.map_or(0.0, |p| (p / 100.0).max(0.0))
                    })
                    .collect();
                let scale = prefetch::contention_scale(ctxs, rg, &first.at, &slowdown);
                Some(replay::replay_scaled(rg, matching, &ch, Some(&scale)))
            }
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
                    Some(sum(&|r| r.predicted_step_us) / n),
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
                prefetch_peak_delta_bytes: ch.prefetch_deeper.and_then(|by| {
                    let sizer = super::collectives::Sizer::new(t, ctx, nccl);
                    ctx.gpu
                        .iter()
                        .filter(|e| nccl.is_all_gather(t, e.id))
                        .filter_map(|e| sizer.bytes(e.id))
                        .max()
                        .map(|b| b.saturating_mul(u64::from(by)))
                }),
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
    if ch.unblock_legacy {
        v.push("legacy default stream's work on a non-blocking stream".into());
    }
    if let Some(by) = ch.prefetch_deeper {
        v.push(format!(
            "all-gathers issued {by} position(s) earlier (deeper prefetch)"
        ));
    }
    if v.is_empty() {
        "none (the replay of the measured steps)".into()
    } else {
        v.join(", ")
    }
}
