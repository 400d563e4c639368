//! Replays the dependency graph with changed durations: one topological
//! pass (Kahn) over every rank's vertices, each vertex's time the latest of
//! what it waits for plus its residual; the predecessor that decided it is
//! kept for the critical path.

use super::super::nccl::bus_factor;
use super::super::xrank::Matching;
use super::graph::{Graph, NodeKind, NONE};

/// What to change.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Changes {
    /// NCCL kernels' transfer part × this.
    pub comm_scale: Option<f64>,
    /// NCCL kernels' transfer part recomputed at this bus bandwidth (GB/s).
    pub link_bw_gbps: Option<f64>,
    /// Non-NCCL kernels × this.
    pub compute_scale: Option<f64>,
    /// Drop the syncs the graph marked droppable.
    pub drop_syncs: bool,
    /// Run the legacy default stream's work as if on a non-blocking stream:
    /// the waits the graph marked as its implicit synchronization
    /// (the graph's `legacy_release`) are dropped.
    pub unblock_legacy: bool,
    /// Issue each all-gather this many positions earlier in its step
    /// (deeper prefetch; the graph is rewired by `whatif::prefetch`).
    pub prefetch_deeper: Option<u32>,
}

impl Changes {
    /// Whether nothing changes.
    pub fn is_none(&self) -> bool {
        self.comm_scale.is_none()
            && self.link_bw_gbps.is_none()
            && self.compute_scale.is_none()
            && !self.drop_syncs
            && !self.unblock_legacy
            && self.prefetch_deeper.is_none()
    }
}

/// Times of every vertex after the replay.
pub struct Replayed {
    /// Predicted time per vertex (ns, each rank's own clock).
    pub at: Vec<i64>,
    /// The predecessor that decided each vertex ([`NONE`] when none did).
    pub bound_by: Vec<u32>,
    /// Vertices evaluated before all they wait for were (a cycle broken by measured order).
    pub cycle_breaks: u64,
    /// NCCL kernels whose transfer kept its measured time under `--link-bw` (no bytes known).
    pub without_bytes: u64,
    /// Launch calls the full launch queue held past their own duration.
    pub queue_waits: u64,
    /// A predicted duration or time left the range of i64 nanoseconds
    /// (the factors are too large): the times are not to be used.
    pub overflowed: bool,
}

/// Predicted transfer of instance `inst` under `ch`, as a factor on each part's measured transfer.
fn transfer_factor(m: &Matching, inst: u32, ch: &Changes) -> Option<f64> {
    let i = &m.instances[inst as usize];
    if let Some(bw) = ch.link_bw_gbps {
        let bytes = i.bytes? as f64 * bus_factor(&i.kind, i.group_size)?;
        let ns = bytes / bw;
        return Some(if i.transfer_ns > 0 {
            ns / i.transfer_ns as f64
        } else {
            1.0
        });
    }
    Some(ch.comm_scale.unwrap_or(1.0))
}

/// Times and durations this far from 0 (ns, about 146 years) are out of
/// range: sums of two stay within i64.
const LIMIT: f64 = (1u64 << 62) as f64;

/// `ns` × `f`, rounded; `None` when out of range.
fn scaled(ns: i64, f: f64) -> Option<i64> {
    let x = (ns as f64 * f).round();
    (x.abs() < LIMIT).then_some(x as i64)
}

/// `a` + `b`, or `None` out of range (an error: the replay is refused).
fn add(a: i64, b: Option<i64>) -> Option<i64> {
    let s = a.checked_add(b?)?;
    (s.unsigned_abs() < 1 << 62).then_some(s)
}

/// Replays `g` under `ch`.
pub fn replay(g: &Graph, m: &Matching, ch: &Changes) -> Replayed {
    replay_scaled(g, m, ch, None)
}

/// [`replay`], each compute kernel's duration also × `node_scale[node]`.
pub fn replay_scaled(
    g: &Graph,
    m: &Matching,
    ch: &Changes,
    node_scale: Option<&[f64]>,
) -> Replayed {
    let nv = g.vertices();
    let mut indeg: Vec<u32> = g.pred_off.windows(2).map(|w| w[1] - w[0]).collect();
    let factors: Vec<Option<f64>> = (0..m.instances.len() as u32)
        .map(|i| transfer_factor(m, i, ch))
        .collect();
    let comm_scale = ch.comm_scale.unwrap_or(1.0);
    let compute_scale = ch.compute_scale.unwrap_or(1.0);
    let mut out = Replayed {
        at: vec![0; nv],
        bound_by: vec![NONE; nv],
        cycle_breaks: 0,
        without_bytes: 0,
        queue_waits: 0,
        overflowed: false,
    };
    let mut done = vec![false; nv];
    let mut queue: Vec<u32> = (0..nv as u32).filter(|&v| indeg[v as usize] == 0).collect();
    let mut by_time: Option<(Vec<u32>, usize)> = None;
    let mut processed = 0usize;
    while processed < nv {
        let v = match queue.pop() {
            Some(v) => v,
            None => {
                // A cycle (clock noise between host and GPU): go on with
                // the earliest vertex not yet evaluated.
                let (order, at) = by_time.get_or_insert_with(|| {
                    let mut o: Vec<u32> = (0..nv as u32).collect();
                    o.sort_by_key(|&v| (g.measured(v), v));
                    (o, 0)
                });
                while done[order[*at] as usize] {
                    *at += 1;
                }
                out.cycle_breaks += 1;
                order[*at]
            }
        };
        if done[v as usize] {
            continue;
        }
        let value = |p: u32, out: &Replayed| {
            if done[p as usize] {
                out.at[p as usize]
            } else {
                g.measured(p)
            }
        };
        let ps = g.preds_of(v);
        let n = &g.nodes[(v / 2) as usize];
        let (t, by) = if v.is_multiple_of(2) {
            // Start: the latest of what it waits for, plus its residual.
            let mut best: Option<(i64, u32)> = None;
            let skip: &[u32] = match g.legacy_release.get(&(v / 2)) {
                Some(r) if ch.unblock_legacy => r,
                _ => &[],
            };
            for &p in ps.iter().filter(|&&p| !skip.contains(&p)) {
                let x = value(p, &out);
                if best.is_none_or(|b| x > b.0) {
                    best = Some((x, p));
                }
            }
            match best {
                Some((x, p)) => (add(x, Some(g.residual[v as usize])), p),
                None => (Some(n.s), NONE),
            }
        } else {
            let start = value(v - 1, &out);
            let dur = n.e.saturating_sub(n.s);
            match n.kind {
                NodeKind::Compute => {
                    let f = node_scale.map_or(1.0, |x| x[(v / 2) as usize]);
                    (add(start, scaled(dur, compute_scale * f)), v - 1)
                }
                NodeKind::Host if g.queued[(v / 2) as usize] && ps.len() > 1 => {
                    // A full launch queue holds the call until the GPU
                    // takes the work launched `queue_depth` launches before.
                    let own = add(start, Some(dur));
                    let q = ps[1];
                    match (own, add(value(q, &out), Some(g.residual[v as usize]))) {
                        (Some(o), Some(held)) if held > o => {
                            out.queue_waits += 1;
                            (Some(held), q)
                        }
                        (o, _) => (o, v - 1),
                    }
                }
                NodeKind::Memory | NodeKind::Host => (add(start, Some(dur)), v - 1),
                NodeKind::Sync => {
                    if ch.drop_syncs && g.droppable[(v / 2) as usize] {
                        (Some(start), v - 1)
                    } else if let Some(&w) = ps.get(1) {
                        match add(value(w, &out), Some(g.residual[v as usize])) {
                            Some(via) if via > start => (Some(via), w),
                            Some(_) => (Some(start), v - 1),
                            None => (None, w),
                        }
                    } else {
                        (add(start, Some(dur)), v - 1)
                    }
                }
                NodeKind::Comm => {
                    let inst = g.instance[(v / 2) as usize];
                    let off = |vx: u32| g.offset(vx);
                    // A kernel that ended before the last rank's started
                    // (clocks too far apart to compare) is not coupled.
                    let ended_first = ps.get(1..).is_some_and(|rest| {
                        rest.iter()
                            .any(|&p| g.measured(p) + off(p) - off(v - 1) > n.e)
                    });
                    if inst == NONE || ps.len() < 2 || ended_first {
                        (add(start, scaled(dur, comm_scale)), v - 1)
                    } else {
                        // The transfer starts when the last rank arrives
                        // (times compared on the first rank's clock).
                        let mut last = (start.saturating_add(off(v - 1)), v - 1);
                        for &p in &ps[1..] {
                            let x = value(p, &out).saturating_add(off(p));
                            if x > last.0 {
                                last = (x, p);
                            }
                        }
                        let own_off = off(v - 1);
                        let measured_last = n.s.max(
                            ps[1..]
                                .iter()
                                .map(|&p| {
                                    g.measured(p).saturating_add(off(p)).saturating_sub(own_off)
                                })
                                .max()
                                .unwrap_or(n.s),
                        );
                        let transfer = n.e.saturating_sub(measured_last).max(0);
                        let f = match factors[inst as usize] {
                            Some(f) => f,
                            None => {
                                out.without_bytes += 1;
                                1.0
                            }
                        };
                        (
                            add(last.0.saturating_sub(own_off), scaled(transfer, f)),
                            last.1,
                        )
                    }
                }
            }
        };
        let t = t.unwrap_or_else(|| {
            out.overflowed = true;
            0
        });
        out.at[v as usize] = t;
        out.bound_by[v as usize] = by;
        done[v as usize] = true;
        processed += 1;
        let (a, b) = (
            g.succ_off[v as usize] as usize,
            g.succ_off[v as usize + 1] as usize,
        );
        for &s in &g.succ[a..b] {
            indeg[s as usize] -= 1;
            if indeg[s as usize] == 0 {
                queue.push(s);
            }
        }
    }
    out
}

/// Where the critical path's time went (ns).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PathShare {
    /// Non-NCCL GPU work (kernels, copies) and the GPU-side latency after it.
    pub compute: i64,
    /// NCCL kernels (waiting for peers and transfer).
    pub communication: i64,
    /// Host time: between API calls, inside non-blocking calls, launch latency.
    pub host: i64,
    /// Host sync calls: their own time, and from the GPU work they waited for to their return.
    pub sync: i64,
}

/// Walks the critical path back from vertex `from` to time `until` (both
/// predicted), charging each segment to what it was spent on.
pub fn critical_path(g: &Graph, r: &Replayed, from: u32, until: i64) -> PathShare {
    let mut share = PathShare::default();
    let mut v = from;
    let mut steps = 0usize;
    while v != NONE && steps < g.vertices() {
        steps += 1;
        let t = r.at[v as usize];
        if t <= until {
            break;
        }
        let p = r.bound_by[v as usize];
        let lo = if p == NONE {
            until
        } else {
            r.at[p as usize].max(until)
        };
        let seg = t.saturating_sub(lo).max(0);
        let n = &g.nodes[(v / 2) as usize];
        let kind_of = |x: u32| g.nodes[(x / 2) as usize].kind;
        let charge = if v % 2 == 1 {
            n.kind
        } else if p == NONE {
            NodeKind::Host
        } else {
            // A start waits on what bound it: a launch call (host) or GPU
            // work / the end of a sync.
            match kind_of(p) {
                NodeKind::Sync if p.is_multiple_of(2) => NodeKind::Host,
                k => k,
            }
        };
        match charge {
            NodeKind::Compute | NodeKind::Memory => {
                share.compute = share.compute.saturating_add(seg)
            }
            NodeKind::Comm => share.communication = share.communication.saturating_add(seg),
            NodeKind::Host => share.host = share.host.saturating_add(seg),
            NodeKind::Sync => share.sync = share.sync.saturating_add(seg),
        }
        v = p;
    }
    share
}
