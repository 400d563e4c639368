//! What the viewer shows of one loaded trace set: the trace (sorted), the
//! analysis report, the drawing index and lane tree, and top kernels.

use streamscope_core::analysis::{
    analyze, match_collectives, AnalysisOptions, Instance, Matching, Part, Report,
};
use streamscope_core::{SliceId, Trace, TrackKind};

use crate::panels::top_kernels::TopKernels;
use crate::timeline::index::TimelineIndex;
use crate::timeline::layout::LaneTree;

pub struct Model {
    pub trace: Trace,
    pub report: Report,
    pub index: TimelineIndex,
    pub lanes: LaneTree,
    pub top: TopKernels,
    /// Per process: its GPU rows (those with a coverage pyramid), for the
    /// summary strip of a collapsed rank.
    pub gpu_rows: Vec<Vec<u32>>,
    /// NCCL kernels matched across ranks, and per matched kernel the
    /// share of its duration spent waiting for the last rank (drawn apart
    /// from the transfer). Made with the model for traces of up to
    /// [`EAGER_MATCHING_SLICES`] slices, else at the first use (a click on
    /// an NCCL kernel, the Stragglers tab): matching builds per-rank event
    /// lists again, which a 10 M-slice trace cannot afford at load.
    matching: std::sync::OnceLock<(Matching, std::collections::HashMap<u32, f32>)>,
}

/// Traces up to this many slices have their NCCL kernels matched across
/// ranks at load (the wait shading shows at once); larger ones at first use.
pub const EAGER_MATCHING_SLICES: usize = 2_000_000;

impl Model {
    /// Analyzes the trace (sorted, so slice ids are stable and the
    /// report's slice ids refer to this order) and preprocesses it.
    pub fn new(mut trace: Trace) -> Self {
        let mut report = analyze(&trace, &AnalysisOptions::default());
        streamscope_core::analysis::findings::attach(&mut report, Some(&trace));
        add_sm_counters(&mut trace, &report);
        let index = TimelineIndex::build(&trace);
        let lanes = LaneTree::build(&trace, &index);
        let top = TopKernels::compute(&trace);
        let mut gpu_rows = vec![Vec::new(); trace.processes().len()];
        for (r, row) in index.rows.iter().enumerate() {
            if matches!(index.coverage.get(r), Some(Some(_))) {
                let p = trace.track(row.track).process.index();
                if let Some(v) = gpu_rows.get_mut(p) {
                    v.push(r as u32);
                }
            }
        }
        let model = Model {
            trace,
            report,
            index,
            lanes,
            top,
            gpu_rows,
            matching: std::sync::OnceLock::new(),
        };
        if model.trace.slices().len() <= EAGER_MATCHING_SLICES {
            let _ = model.matching();
        }
        model
    }

    /// NCCL kernels matched across ranks (made at the first call).
    pub fn matching(&self) -> &Matching {
        &self.matched().0
    }

    fn matched(&self) -> &(Matching, std::collections::HashMap<u32, f32>) {
        self.matching.get_or_init(|| {
            let m = match_collectives(&self.trace);
            let mut share = std::collections::HashMap::new();
            for inst in &m.instances {
                for p in &inst.parts {
                    let dur = p.end_ns.saturating_sub(p.start_ns);
                    if p.wait_ns > 0 && dur > 0 {
                        share.insert(
                            p.slice.get(),
                            (p.wait_ns as f64 / dur as f64).min(1.0) as f32,
                        );
                    }
                }
            }
            (m, share)
        })
    }

    /// Per matched NCCL kernel, the share of its duration spent waiting for
    /// the last rank, once the matching is made (see [`Self::matching`]).
    pub fn wait_share(&self) -> Option<&std::collections::HashMap<u32, f32>> {
        self.matching.get().map(|m| &m.1)
    }

    /// The collective instance NCCL kernel `slice` belongs to, and its part
    /// in it, when the kernels of every rank could be matched.
    pub fn collective_of(&self, slice: u32) -> Option<(&Instance, &Part)> {
        let m = self.matching();
        let &(i, p) = m.by_slice.get(&SliceId::from_index(slice as usize))?;
        let inst = m.instances.get(i as usize)?;
        Some((inst, inst.parts.get(p as usize)?))
    }
}

/// Gives each device without a counter track the analysis's estimated
/// "SMs in use" series as one (counters do not move slice ids).
fn add_sm_counters(trace: &mut Trace, report: &Report) {
    let mut b = std::mem::take(trace).into_builder();
    for occ in &report.occupancy {
        let d = occ.device;
        let Some(dev) = b.devices().get(d.index()) else {
            continue;
        };
        let counter = TrackKind::Counter { device: Some(d) };
        if occ.sms_in_use.iter().all(|&(_, sms)| sms == 0)
            || b.find_track(dev.process, counter).is_some()
        {
            continue;
        }
        let track = b.add_track(dev.process, None, counter, "SMs in use (estimated)");
        for &(ts, sms) in &occ.sms_in_use {
            b.push_counter(track, ts, sms as f64);
        }
    }
    *trace = b.finish();
}
