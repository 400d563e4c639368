//! The legacy default stream's implicit synchronization, by launch order.
//!
//! Work on the legacy default stream waits for all the work launched before
//! it on the device's blocking streams, and work on a blocking stream waits
//! for the legacy-stream work launched before it (CUDA's stream semantics;
//! non-blocking streams are exempt). The cross-stream edges of
//! `gpu_edges` infer waits from timing, so they hold these only where the
//! wait showed in the recording. In a loop that synchronizes the device
//! every iteration, the next iteration's work starts after its own launch
//! and no wait shows; with that sync dropped it would still wait. Where the
//! trace says how each stream was created (`record`'s `cuda_streams`
//! metadata), these edges come from the launch order. Each is marked in
//! `legacy_release`, so `--legacy-stream-nonblocking` drops it.

use std::collections::BTreeMap;

use super::super::super::rank::RankCtx;
use super::{Builder, NONE};
use crate::model::Trace;
use crate::protocol::streams::StreamCreation;

impl Builder {
    /// Edges of the legacy default stream's implicit synchronization on
    /// rank `ci` (module doc), `creations` its streams' (by stream index).
    pub(super) fn legacy_order_edges(
        &mut self,
        t: &Trace,
        ci: usize,
        ctx: &RankCtx,
        creations: &[Option<StreamCreation>],
    ) {
        if !creations.contains(&Some(StreamCreation::Legacy)) {
            return;
        }
        let sl = t.slices();
        // (device, launch call's start, node, stream, legacy?) of every GPU
        // activity on a legacy or blocking stream whose launch is known.
        let mut items = Vec::new();
        for (e, &n) in ctx.gpu.iter().zip(&self.gpu_nodes[ci]) {
            let legacy = match creations.get(e.stream as usize).copied().flatten() {
                Some(StreamCreation::Legacy) => true,
                Some(StreamCreation::Blocking) => false,
                _ => continue,
            };
            let Some(h) = ctx.corr.get(sl.correlation()[e.id as usize]) else {
                continue;
            };
            let Some(&hn) = self.host_of.get(&h) else {
                continue;
            };
            let dev = ctx.streams[e.stream as usize].device();
            items.push((dev, self.nodes[hn as usize].s, n, e.stream, legacy));
        }
        items.sort_unstable_by_key(|x| (x.0, x.1, x.2));
        let mut dev = None;
        let mut last_legacy = NONE;
        // The last node launched on each blocking stream since the last
        // legacy-stream node (which waited for the ones before).
        let mut last_blocking: BTreeMap<u16, u32> = BTreeMap::new();
        for (d, _, n, stream, legacy) in items {
            if dev != Some(d) {
                dev = Some(d);
                last_legacy = NONE;
                last_blocking.clear();
            }
            if legacy {
                let before: Vec<u32> = last_blocking.values().copied().collect();
                for p in before {
                    self.legacy_edge(n, p);
                }
                last_blocking.clear();
                last_legacy = n;
            } else {
                if last_legacy != NONE {
                    self.legacy_edge(n, last_legacy);
                }
                last_blocking.insert(stream, n);
            }
        }
    }

    /// Node `n` starts after node `p` ends, unless the recording shows `n`
    /// starting first (then the semantics did not hold as read, and the
    /// timing's own edges stand).
    fn legacy_edge(&mut self, n: u32, p: u32) {
        if self.nodes[p as usize].e > self.nodes[n as usize].s {
            return;
        }
        self.edges.push((2 * n, 2 * p + 1));
        self.legacy_release.entry(n).or_default().push(2 * p + 1);
    }
}
