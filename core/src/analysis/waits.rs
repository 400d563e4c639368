//! What GPU streams wait for: HTA's idle categories per stream, compute
//! streams stalled on communication, and the slack each all-gather
//! prefetch leaves before compute needs it.

use super::rank::{Ev, RankCtx};
use super::report::{CommStalls, PrefetchSlack, Stall, StreamIdle, StreamStall};
use crate::model::{DeviceId, SliceClass, SliceId, Trace};

/// HTA's idle breakdown: the gap before each GPU event on its stream is
/// host wait when its launch call started after the previous event ended,
/// else kernel wait when shorter than `consecutive_kernel_delay_ns`, else other.
pub fn idle_by_stream(
    t: &Trace,
    ctx: &RankCtx,
    events: &[&Ev],
    consecutive_kernel_delay_ns: i64,
) -> Vec<StreamIdle> {
    let mut acc: Vec<(i64, i64, i64, Option<i64>)> = vec![(0, 0, 0, None); ctx.streams.len()];
    for e in events {
        let a = &mut acc[e.stream as usize];
        if let Some(prev_end) = a.3 {
            let gap = e.s.saturating_sub(prev_end);
            if gap > 0 {
                let host_wait = ctx.launch_start(t, e.id).is_some_and(|l| l > prev_end);
                if host_wait {
                    a.0 = a.0.saturating_add(gap);
                } else if gap < consecutive_kernel_delay_ns {
                    a.1 = a.1.saturating_add(gap);
                } else {
                    a.2 = a.2.saturating_add(gap);
                }
            }
        }
        // HTA compares with the previous event's end in start order.
        a.3 = Some(e.e);
    }
    let us = |ns: i64| ns as f64 / 1000.0;
    let mut out: Vec<StreamIdle> = acc
        .iter()
        .enumerate()
        .filter(|(_, a)| a.3.is_some())
        .map(|(k, a)| StreamIdle {
            at: ctx.streams[k],
            host_wait_us: us(a.0),
            kernel_wait_us: us(a.1),
            other_us: us(a.2),
            total_us: us(a.0.saturating_add(a.1).saturating_add(a.2)),
        })
        .collect();
    out.sort_by_key(|s| s.at);
    out
}

/// One compute kernel that waited on communication.
#[derive(Debug, Clone, Copy)]
pub struct StallHit {
    /// Position of the compute kernel in the events given.
    pub pos: usize,
    /// How long its stream sat idle waiting (ns).
    pub ns: i64,
    /// Where the wait began (ns).
    pub from: i64,
    /// The communication kernel it waited for.
    pub comm: u32,
}

/// Compute kernels whose stream sat idle because they waited on
/// communication. For a compute kernel K on stream S, the wait is
/// `[max(end of S's previous compute kernel, K's launch call), K's start)`;
/// it is a communication stall when what released K is communication: the
/// event just before K on S (a collective in the same stream, as in a
/// serial schedule) or an event on another stream of the device ending
/// within `tolerance_ns` before K starts (a cross-stream wait), either a
/// communication kernel or queued back to back behind one (an all-gather's
/// copy-out kernel).
pub fn stall_hits(t: &Trace, ctx: &RankCtx, events: &[&Ev], tolerance_ns: i64) -> Vec<StallHit> {
    let device_of = |e: &Ev| ctx.streams[e.stream as usize].device();
    // Previous event on the same stream (positions), for walking back a queue.
    let mut last_pos: Vec<u32> = vec![u32::MAX; ctx.streams.len()];
    let mut prev_on_stream: Vec<u32> = vec![u32::MAX; events.len()];
    for (pos, e) in events.iter().enumerate() {
        prev_on_stream[pos] = last_pos[e.stream as usize];
        last_pos[e.stream as usize] = pos as u32;
    }
    // Every event by (device, end), to find what ended just before a kernel
    // (16 bytes an event: positions fit in u32, a rank's events are slices).
    // Laid out stream by stream first: a stream's kernels run one after the
    // other, so each stream is one run of ascending ends, and the sort only
    // merges the runs.
    let mut next: Vec<usize> = vec![0; ctx.streams.len() + 1];
    for e in events {
        next[e.stream as usize + 1] += 1;
    }
    for k in 1..next.len() {
        next[k] = next[k].saturating_add(next[k - 1]);
    }
    let mut by_end: Vec<(Option<DeviceId>, i64, u32)> = vec![(None, 0, 0); events.len()];
    for (pos, e) in events.iter().enumerate() {
        let at = &mut next[e.stream as usize];
        by_end[*at] = (device_of(e), e.e, pos as u32);
        *at += 1;
    }
    // Keys are distinct (positions): the stable sort gives the same order.
    by_end.sort();
    // What released the event at `pos`: of the event just before it on its
    // stream (when it ended within the tolerance of its start: it was
    // queued behind it) and the events of other streams of the device that
    // ended within the tolerance before its start, the latest to end
    // (communication first among equals).
    let release_of = |pos: usize| -> Option<usize> {
        let e = events[pos];
        let mut best: Option<(i64, usize)> = None;
        let mut offer = |end: i64, p: usize| {
            let better = best.is_none_or(|(b, bp)| {
                end > b
                    || (end == b
                        && events[p].class == SliceClass::Communication
                        && events[bp].class != SliceClass::Communication)
            });
            if better {
                best = Some((end, p));
            }
        };
        let prev = prev_on_stream[pos] as usize;
        if prev != u32::MAX as usize
            && events[prev].e <= e.s
            && events[prev].e >= e.s.saturating_sub(tolerance_ns)
        {
            offer(events[prev].e, prev);
        }
        let dev = device_of(e);
        let lo = by_end.partition_point(|c| (c.0, c.1) < (dev, e.s.saturating_sub(tolerance_ns)));
        for c in by_end[lo..].iter().take_while(|c| c.0 == dev && c.1 <= e.s) {
            if events[c.2 as usize].stream != e.stream {
                offer(c.1, c.2 as usize);
            }
        }
        best.map(|b| b.1)
    };
    // Communication behind `pos`: what released it, followed back through
    // at most three events (an all-gather's copy-out, a memset, the copy
    // that waited for the collective).
    let comm_behind = |pos: usize| -> Option<u32> {
        let mut at = release_of(pos)?;
        for _ in 0..3 {
            let e = events[at];
            if e.class == SliceClass::Communication {
                return Some(e.id);
            }
            at = release_of(at)?;
        }
        (events[at].class == SliceClass::Communication).then_some(events[at].id)
    };
    let mut prev_compute_end: Vec<Option<i64>> = vec![None; ctx.streams.len()];
    let mut hits = Vec::new();
    for (pos, e) in events.iter().enumerate() {
        let k = e.stream as usize;
        if e.class != SliceClass::Compute {
            continue;
        }
        let pc = prev_compute_end[k];
        prev_compute_end[k] = Some(pc.map_or(e.e, |p| p.max(e.e)));
        // The first compute kernel of a stream here waits from its launch.
        let launch = ctx.launch_start(t, e.id);
        let from = match (pc, launch) {
            (Some(pc), l) => l.map_or(pc, |l| l.max(pc)),
            (None, Some(l)) => l.max(previous_end_on_stream(ctx, e)),
            (None, None) => continue,
        };
        if e.s <= from {
            continue;
        }
        // Released by communication, directly or through a short queue; a
        // compute kernel released by the compute kernel before it on its
        // stream did not wait on communication.
        // What ended before the kernel was launched (or before its stream
        // was free) did not hold it back.
        let released_by_own_compute_or_earlier = release_of(pos).is_none_or(|r| {
            (events[r].stream == e.stream && events[r].class == SliceClass::Compute)
                || events[r].e <= from
        });
        if released_by_own_compute_or_earlier {
            continue;
        }
        if let Some(comm) = comm_behind(pos) {
            hits.push(StallHit {
                pos,
                ns: e.s.saturating_sub(from),
                from,
                comm,
            });
        }
    }
    hits
}

/// End of the event before `e` on its stream among all the rank's GPU
/// events (the events given to [`stall_hits`] may be one step's).
fn previous_end_on_stream(ctx: &RankCtx, e: &Ev) -> i64 {
    let at = ctx.gpu.partition_point(|g| (g.s, g.id) < (e.s, e.id));
    ctx.gpu[..at]
        .iter()
        .rev()
        .take(1 << 16)
        .find(|g| g.stream == e.stream)
        .map_or(i64::MIN, |g| g.e)
}

/// Communication stalls of compute streams from the [`stall_hits`] of
/// `events` (computed once for this and [`prefetch_slack_of`]). Also
/// returns (position in `events`, stall ns) of every stall.
pub fn comm_stalls_of(
    ctx: &RankCtx,
    events: &[&Ev],
    hits: &[StallHit],
) -> (CommStalls, Vec<(usize, i64)>) {
    let mut per_stream: Vec<(u64, i64)> = vec![(0, 0); ctx.streams.len()];
    let mut stalls: Vec<Stall> = Vec::with_capacity(hits.len());
    for h in hits {
        let e = events[h.pos];
        per_stream[e.stream as usize].0 += 1;
        per_stream[e.stream as usize].1 = per_stream[e.stream as usize].1.saturating_add(h.ns);
        stalls.push(Stall {
            slice: e.slice(),
            comm_slice: SliceId::from_index(h.comm as usize),
            start_ns: h.from,
            end_ns: e.s,
            stall_us: h.ns as f64 / 1000.0,
        });
    }
    stalls.sort_by(|a, b| b.stall_us.total_cmp(&a.stall_us));
    stalls.truncate(10);
    let by_stream: Vec<StreamStall> = per_stream
        .iter()
        .enumerate()
        .filter(|(_, p)| p.0 > 0)
        .map(|(k, p)| StreamStall {
            at: ctx.streams[k],
            count: p.0,
            total_us: p.1 as f64 / 1000.0,
        })
        .collect();
    let stalls = CommStalls {
        count: by_stream.iter().map(|s| s.count).sum(),
        total_us: per_stream.iter().fold(0i64, |a, p| a.saturating_add(p.1)) as f64 / 1000.0,
        by_stream,
        worst: stalls,
    };
    (stalls, hits.iter().map(|h| (h.pos, h.ns)).collect())
}

/// All-gather prefetches. An all-gather is late when a compute kernel
/// waited for it (a communication stall released by it, see
/// [`stall_hits`]), late by how long that consumer waited. Slack: the
/// start of the next compute kernel on its device after it ends, minus its
/// end (0 for a late one).
pub fn prefetch_slack(
    t: &Trace,
    ctx: &RankCtx,
    events: &[&Ev],
    is_all_gather: impl Fn(u32) -> bool,
    tolerance_ns: i64,
) -> PrefetchSlack {
    let hits = stall_hits(t, ctx, events, tolerance_ns);
    prefetch_slack_of(ctx, events, &hits, is_all_gather)
}

/// One all-gather of `events`, as the prefetch figures see it.
pub(crate) struct AllGatherSlack {
    /// Its slice.
    pub id: u32,
    /// Index into the rank's steps, or `NONE` (from its event).
    pub step: u32,
    /// How long the compute kernels it released waited (ns; 0 when on time).
    pub wait_ns: i64,
    /// Its slack (0 when late); `None` when no compute kernel ran after it
    /// on its device.
    pub slack_ns: Option<i64>,
}

/// Every all-gather of `events` (in their order) with its wait and slack,
/// from the [`stall_hits`] of `events`.
pub(crate) fn all_gather_slacks(
    ctx: &RankCtx,
    events: &[&Ev],
    hits: &[StallHit],
    is_all_gather: impl Fn(u32) -> bool,
) -> Vec<AllGatherSlack> {
    let device_of = |e: &Ev| ctx.streams[e.stream as usize].device();
    let mut waited: rustc_hash::FxHashMap<u32, i64> = Default::default();
    for h in hits {
        let w = waited.entry(h.comm).or_insert(0);
        *w = w.saturating_add(h.ns);
    }
    let mut compute_starts: Vec<(Option<DeviceId>, i64)> = events
        .iter()
        .filter(|e| e.class == SliceClass::Compute)
        .map(|e| (device_of(e), e.s))
        .collect();
    compute_starts.sort_unstable();
    events
        .iter()
        .filter(|e| e.class == SliceClass::Communication && is_all_gather(e.id))
        .map(|e| {
            let wait_ns = waited.get(&e.id).copied().unwrap_or(0);
            let slack_ns = if wait_ns > 0 {
                Some(0)
            } else {
                let dev = device_of(e);
                let k = compute_starts.partition_point(|c| *c < (dev, e.e));
                match compute_starts.get(k) {
                    Some(&(d, next)) if d == dev => Some(next.saturating_sub(e.e)),
                    _ => None,
                }
            };
            AllGatherSlack {
                id: e.id,
                step: e.step,
                wait_ns,
                slack_ns,
            }
        })
        .collect()
}

/// [`prefetch_slack`] from the [`stall_hits`] of `events`.
pub fn prefetch_slack_of(
    ctx: &RankCtx,
    events: &[&Ev],
    hits: &[StallHit],
    is_all_gather: impl Fn(u32) -> bool,
) -> PrefetchSlack {
    prefetch_slack_from(&all_gather_slacks(ctx, events, hits, is_all_gather))
}

/// [`prefetch_slack`] from the [`all_gather_slacks`] of the events.
pub(crate) fn prefetch_slack_from(ags: &[AllGatherSlack]) -> PrefetchSlack {
    let mut out = PrefetchSlack::default();
    let mut slacks: Vec<f64> = Vec::new();
    let mut late_ns = 0i64;
    for ag in ags {
        out.all_gathers += 1;
        if ag.wait_ns > 0 {
            out.late += 1;
            late_ns = late_ns.saturating_add(ag.wait_ns);
        }
        let Some(slack_ns) = ag.slack_ns else {
            continue;
        };
        let slack = slack_ns as f64 / 1000.0;
        slacks.push(slack);
        out.per_all_gather
            .push((SliceId::from_index(ag.id as usize), slack));
    }
    out.late_us = late_ns as f64 / 1000.0;
    if !slacks.is_empty() {
        let mut sorted = slacks.clone();
        sorted.sort_by(|a, b| a.total_cmp(b));
        out.min_us = sorted.first().copied();
        out.median_us = Some(sorted[sorted.len() / 2]);
        out.mean_us = Some(sorted.iter().sum::<f64>() / sorted.len() as f64);
    }
    out
}
