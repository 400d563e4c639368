//! Prefetch per layer: the all-gathers of a window grouped by their
//! position in the step. Under a fixed schedule (FSDP's: one all-gather
//! per unit, forward then backward, in the same order every step) the k-th
//! all-gather of each step gathers the same unit, so position is the
//! layer's identity whether or not the program annotates it. Each group is
//! labelled with the annotation around the first launch, when there is one.

use super::rank::{RankCtx, NONE};
use super::report::PrefetchLayer;
use super::steps::is_step_name;
use super::waits::AllGatherSlack;
use crate::model::{SliceId, SliceKind, Trace, TrackId};

/// Groups `ags` (in start order) by their position in their step; the
/// all-gathers of no step are left out. `bytes_of` sizes an all-gather.
pub(crate) fn prefetch_layers(
    t: &Trace,
    ctx: &RankCtx,
    ags: &[AllGatherSlack],
    bytes_of: &dyn Fn(u32) -> Option<u64>,
) -> Vec<PrefetchLayer> {
    let mut seen_in_step: rustc_hash::FxHashMap<u32, u32> = Default::default();
    let mut layers: Vec<PrefetchLayer> = Vec::new();
    let mut first_of: Vec<u32> = Vec::new();
    let mut slack_sum: Vec<(f64, u64)> = Vec::new();
    let mut late_ns: Vec<i64> = Vec::new();
    let mut held: Vec<f64> = Vec::new();
    for ag in ags.iter().filter(|a| a.step != NONE) {
        let n = seen_in_step.entry(ag.step).or_insert(0);
        let pos = *n as usize;
        *n += 1;
        if pos == layers.len() {
            layers.push(PrefetchLayer {
                position: pos as u32,
                ..Default::default()
            });
            first_of.push(ag.id);
            slack_sum.push((0.0, 0));
            late_ns.push(0);
            held.push(0.0);
        }
        let l = &mut layers[pos];
        l.all_gathers += 1;
        if ag.wait_ns > 0 {
            l.late += 1;
            late_ns[pos] = late_ns[pos].saturating_add(ag.wait_ns);
        }
        let Some(slack_ns) = ag.slack_ns else {
            continue;
        };
        let slack_us = slack_ns as f64 / 1000.0;
        slack_sum[pos].0 += slack_us;
        slack_sum[pos].1 += 1;
        if let Some(b) = bytes_of(ag.id) {
            l.sized += 1;
            l.bytes.get_or_insert(b);
            held[pos] += b as f64 * slack_us * 1e-6;
        }
    }
    let mut labels = Labels::new(t, ctx);
    for (pos, l) in layers.iter_mut().enumerate() {
        l.late_us = late_ns[pos] as f64 / 1000.0;
        let (sum, n) = slack_sum[pos];
        l.mean_slack_us = (n > 0).then(|| sum / n as f64);
        l.held_early_byte_s = (l.sized > 0).then_some(held[pos]);
        l.label = labels.around_launch(first_of[pos]);
    }
    layers
}

/// The innermost annotation around a GPU slice's launch call.
struct Labels<'a> {
    t: &'a Trace,
    ctx: &'a RankCtx,
    /// Annotation ranges of each host track, by start (built on first use).
    ranges: rustc_hash::FxHashMap<TrackId, Vec<u32>>,
}

impl<'a> Labels<'a> {
    fn new(t: &'a Trace, ctx: &'a RankCtx) -> Self {
        Labels {
            t,
            ctx,
            ranges: Default::default(),
        }
    }

    /// The innermost NVTX range or user annotation open over the whole
    /// launch call of GPU slice `id`, step ranges and the communication
    /// library's own ranges left out (they name the step or the call, not
    /// the layer); `None` without a launch call or a range.
    fn around_launch(&mut self, id: u32) -> Option<String> {
        let (t, ctx) = (self.t, self.ctx);
        let sl = t.slices();
        let launch = ctx.corr.get(sl.correlation()[id as usize])?;
        let track = sl.track()[launch as usize];
        let ranges = self.ranges.entry(track).or_insert_with(|| {
            let mut v: Vec<u32> = ctx
                .host
                .iter()
                .copied()
                .filter(|&h| {
                    sl.track()[h as usize] == track && sl.kind()[h as usize] == SliceKind::Range
                })
                .collect();
            v.sort_by_key(|&h| sl.start_ns()[h as usize]);
            v
        });
        let (ls, le) = (
            sl.start_ns()[launch as usize],
            sl.end_ns(SliceId::from_index(launch as usize)),
        );
        let k = ranges.partition_point(|&h| sl.start_ns()[h as usize] <= ls);
        // The latest-starting range that encloses the call is the innermost.
        ranges[..k]
            .iter()
            .rev()
            .filter(|&&h| sl.end_ns(SliceId::from_index(h as usize)) >= le)
            .map(|&h| t.str(sl.name()[h as usize]))
            .find(|name| !is_step_name(name) && !is_library_range(name))
            .map(str::to_string)
    }
}

/// A range NCCL (or PyTorch around it) opens for its own call
/// ("ncclAllGather", "ncclGroupEnd", "nccl:all_gather", "record_param_comms").
fn is_library_range(name: &str) -> bool {
    name.get(..4)
        .is_some_and(|p| p.eq_ignore_ascii_case("nccl"))
        || name == "record_param_comms"
}
