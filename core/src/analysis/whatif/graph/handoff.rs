//! Hand-offs between a rank's launching threads.
//!
//! PyTorch runs a CUDA backward pass on the autograd engine's own thread:
//! the main thread launches the forward, hands the graph to that thread,
//! and waits (on a CPU condition, no CUDA call) until it has launched the
//! backward; then the main thread launches the optimizer. Each thread's own
//! order keeps the time between its calls, so without an edge between the
//! threads the engine thread's first launch of a step stays a fixed time
//! after its last launch of the step before, and a replay that frees the
//! main thread (a dropped sync) cannot move the backward earlier.
//!
//! A call that follows an idle stretch of its thread, and starts shortly
//! after a call of another launching thread of the rank ended inside that
//! stretch, waits for that call: it was handed the work. "Shortly": at most
//! [`HANDOFF_MAX_NS`], and at most half the idle stretch (a thread busy on
//! its own, calls close together, is left alone; so are threads that never
//! launch GPU work, such as NCCL's watchdog polling its events).

use super::super::super::rank::{IntMap, RankCtx};
use super::Builder;
use crate::model::Trace;

/// The shortest idle stretch (ns) of a thread after which its next call may
/// be a hand-off from another thread.
pub const HANDOFF_MIN_IDLE_NS: i64 = 100_000;

/// The longest time (ns) from another thread's call to the call it handed
/// work to (Python between the two: the autograd engine's start, hooks).
pub const HANDOFF_MAX_NS: i64 = 2_000_000;

impl Builder {
    /// Edges from a call of one launching thread of rank `ci` to the next
    /// call of another that it handed work to (module doc).
    pub(super) fn handoff_edges(&mut self, t: &Trace, ci: usize, ctx: &RankCtx) {
        let threads = &self.host_threads[ci];
        let all = &self.nodes;
        if threads.len() < 2 {
            return;
        }
        // Thread index per host node of the rank.
        let mut thread_of: IntMap<u32, u32> = IntMap::default();
        for (k, (_, nodes)) in threads.iter().enumerate() {
            for &n in nodes {
                thread_of.insert(n, k as u32);
            }
        }
        // Threads that launched GPU work.
        let sl = t.slices();
        let mut launching = vec![false; threads.len()];
        for e in &ctx.gpu {
            let Some(h) = ctx.corr.get(sl.correlation()[e.id as usize]) else {
                continue;
            };
            if let Some(k) = self.host_of.get(&h).and_then(|n| thread_of.get(n)) {
                launching[*k as usize] = true;
            }
        }
        if launching.iter().filter(|&&l| l).count() < 2 {
            return;
        }
        // (end, thread, node) of every call of a launching thread, by end.
        let mut ends: Vec<(i64, u32, u32)> = threads
            .iter()
            .enumerate()
            .filter(|(k, _)| launching[*k])
            .flat_map(|(k, (_, nodes))| {
                nodes.iter().map(move |&n| (all[n as usize].e, k as u32, n))
            })
            .collect();
        ends.sort_unstable();
        let mut added = Vec::new();
        for (k, (_, nodes)) in threads.iter().enumerate() {
            if !launching[k] {
                continue;
            }
            for w in nodes.windows(2) {
                let (prev, cur) = (&all[w[0] as usize], &all[w[1] as usize]);
                let idle = cur.s.saturating_sub(prev.e);
                if idle < HANDOFF_MIN_IDLE_NS {
                    continue;
                }
                let at = ends.partition_point(|x| x.0 <= cur.s);
                let from = ends[..at]
                    .iter()
                    .rev()
                    .take_while(|x| x.0 > prev.e)
                    .find(|x| x.1 != k as u32);
                if let Some(&(end, _, q)) = from {
                    let handoff = cur.s - end;
                    if handoff <= HANDOFF_MAX_NS && handoff.saturating_mul(2) <= idle {
                        added.push((2 * w[1], 2 * q + 1));
                    }
                }
            }
        }
        self.edges.extend(added);
    }
}
