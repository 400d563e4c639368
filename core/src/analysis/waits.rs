//! What GPU streams wait for: HTA's idle categories per stream, compute
//! streams stalled on communication, and the slack each all-gather
//! prefetch leaves before compute needs it.

use super::intervals::contains;
use super::rank::{Ev, RankCtx};
use super::report::{CommStalls, PrefetchSlack, Stall, StreamIdle, StreamStall};
use crate::model::{SliceClass, Trace};

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
            let gap = e.s - prev_end;
            if gap > 0 {
                let host_wait = ctx.launch_start(t, e.id).is_some_and(|l| l > prev_end);
                if host_wait {
                    a.0 += gap;
                } else if gap < consecutive_kernel_delay_ns {
                    a.1 += gap;
                } else {
                    a.2 += gap;
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
            device: ctx.streams[k].device,
            stream: ctx.streams[k].stream,
            host_wait_us: us(a.0),
            kernel_wait_us: us(a.1),
            other_us: us(a.2),
            total_us: us(a.0 + a.1 + a.2),
        })
        .collect();
    out.sort_by_key(|s| (s.device, s.stream));
    out
}

/// Gaps before compute kernels that close when a communication kernel on
/// another stream of the same device ends (within `tolerance_ns`), while
/// the compute kernel had already been launched. Also returns (position
/// in `events`, stall ns) of every stall.
pub fn comm_stalls(
    t: &Trace,
    ctx: &RankCtx,
    events: &[&Ev],
    tolerance_ns: i64,
) -> (CommStalls, Vec<(usize, i64)>) {
    let device_of = |e: &Ev| ctx.streams[e.stream as usize].device;
    // Communication ends per device, sorted.
    let mut comm_ends: Vec<(u32, i64, u16, u32)> = events
        .iter()
        .filter(|e| e.class == SliceClass::Communication)
        .map(|e| (device_of(e), e.e, e.stream, e.id))
        .collect();
    comm_ends.sort_unstable();
    let mut prev_end: Vec<Option<i64>> = vec![None; ctx.streams.len()];
    let mut per_stream: Vec<(u64, i64)> = vec![(0, 0); ctx.streams.len()];
    let mut stalls: Vec<Stall> = Vec::new();
    let mut per_kernel: Vec<(usize, i64)> = Vec::new();
    for (pos, e) in events.iter().enumerate() {
        let k = e.stream as usize;
        let pe = prev_end[k];
        prev_end[k] = Some(pe.map_or(e.e, |p| p.max(e.e)));
        if e.class != SliceClass::Compute {
            continue;
        }
        let Some(pe) = pe else { continue };
        if e.s <= pe {
            continue;
        }
        let dev = device_of(e);
        let lo = pe.max(e.s.saturating_sub(tolerance_ns));
        let from = comm_ends.partition_point(|c| (c.0, c.1) < (dev, lo));
        let launch = ctx.launch_start(t, e.id);
        let hit = comm_ends[from..]
            .iter()
            .take_while(|c| c.0 == dev && c.1 <= e.s)
            .find(|c| c.2 != e.stream && launch.is_none_or(|l| l <= c.1));
        if let Some(c) = hit {
            let gap = e.s - pe;
            per_stream[k].0 += 1;
            per_stream[k].1 += gap;
            per_kernel.push((pos, gap));
            stalls.push(Stall {
                slice: e.id,
                comm_slice: c.3,
                start_ns: pe,
                end_ns: e.s,
                stall_us: gap as f64 / 1000.0,
            });
        }
    }
    stalls.sort_by(|a, b| b.stall_us.total_cmp(&a.stall_us));
    stalls.truncate(10);
    let by_stream: Vec<StreamStall> = per_stream
        .iter()
        .enumerate()
        .filter(|(_, p)| p.0 > 0)
        .map(|(k, p)| StreamStall {
            device: ctx.streams[k].device,
            stream: ctx.streams[k].stream,
            count: p.0,
            total_us: p.1 as f64 / 1000.0,
        })
        .collect();
    let stalls = CommStalls {
        count: by_stream.iter().map(|s| s.count).sum(),
        total_us: per_stream.iter().map(|p| p.1).sum::<i64>() as f64 / 1000.0,
        by_stream,
        worst: stalls,
    };
    (stalls, per_kernel)
}

/// For each all-gather: the start of the next compute kernel on its device
/// after it ends, minus its end. Late when compute was idle just before its end and
/// the next compute kernel started within `tolerance_ns`.
pub fn prefetch_slack(
    ctx: &RankCtx,
    events: &[&Ev],
    compute_union: &[(i64, i64)],
    is_all_gather: impl Fn(u32) -> bool,
    tolerance_ns: i64,
) -> PrefetchSlack {
    let device_of = |e: &Ev| ctx.streams[e.stream as usize].device;
    let mut compute_starts: Vec<(u32, i64)> = events
        .iter()
        .filter(|e| e.class == SliceClass::Compute)
        .map(|e| (device_of(e), e.s))
        .collect();
    compute_starts.sort_unstable();
    let mut out = PrefetchSlack::default();
    let mut slacks: Vec<f64> = Vec::new();
    for e in events
        .iter()
        .filter(|e| e.class == SliceClass::Communication && is_all_gather(e.id))
    {
        out.all_gathers += 1;
        let dev = device_of(e);
        let k = compute_starts.partition_point(|c| *c < (dev, e.e));
        let Some(&(d, next)) = compute_starts.get(k) else {
            continue;
        };
        if d != dev {
            continue;
        }
        let slack_ns = next - e.e;
        if slack_ns <= tolerance_ns && !contains(compute_union, e.e - 1) {
            out.late += 1;
        }
        let slack = slack_ns as f64 / 1000.0;
        slacks.push(slack);
        out.per_all_gather.push((e.id, slack));
    }
    if !slacks.is_empty() {
        let mut sorted = slacks.clone();
        sorted.sort_by(|a, b| a.total_cmp(b));
        out.min_us = sorted.first().copied();
        out.median_us = Some(sorted[sorted.len() / 2]);
        out.mean_us = Some(sorted.iter().sum::<f64>() / sorted.len() as f64);
    }
    out
}
