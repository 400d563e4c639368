//! Host-blocking synchronizations: found, labelled with their likely
//! pattern, attributed to a call site, grouped, and costed (host time
//! blocked, GPU idle caused).
//!
//! Sources: sync API calls (cudaStreamSynchronize & co.), synchronous
//! cudaMemcpy / cuMemcpyDtoH, Sync slices (Kineto cuda_sync, CUPTI
//! synchronization records; deduplicated against their API call by
//! correlation or time), and device-to-host copies that block the host
//! (pageable or synchronous) and are not already explained by a sync.

use crate::model::SliceId;
use rustc_hash::FxHashMap as HashMap;

use super::intervals::{enclosing_each, union};
use super::rank::{RankCtx, NONE};
use super::report::SyncGroup;
use super::steps::{is_step_name, step_at, Step};
use super::AnalysisOptions;
use crate::model::{CopyKind, SliceKind, Trace, TrackId};
use crate::protocol::{self, Blocks, OPTIMIZER_STEP_RANGE};

/// Pattern labels.
pub const ITEM_LIKE: &str = "item-like";
/// A device-to-host copy of more than [`ITEM_BYTES`] (or the sync right after one).
pub const CPU_COPY: &str = "cpu-copy";
/// cudaDeviceSynchronize / cuCtxSynchronize (or a context/device Sync slice).
pub const DEVICE_SYNC: &str = "device-sync";
/// A stream synchronization.
pub const STREAM_SYNC: &str = "stream-sync";
/// An event synchronization.
pub const EVENT_SYNC: &str = "event-sync";

/// Largest D2H copy still read as a scalar (`.item()`).
pub const ITEM_BYTES: u64 = 8;

/// The pattern of a host-blocking sync call ([`protocol::BLOCKING_CALLS`]).
fn api_pattern(name: &str) -> Option<&'static str> {
    Some(match protocol::blocking_call(name)? {
        Blocks::Stream => STREAM_SYNC,
        Blocks::Device => DEVICE_SYNC,
        Blocks::Event => EVENT_SYNC,
        Blocks::Copy => return None,
    })
}

fn is_sync_memcpy_api(name: &str) -> bool {
    protocol::blocking_call(name) == Some(Blocks::Copy)
}

fn sync_slice_pattern(name: &str) -> Option<&'static str> {
    let l = name.to_ascii_lowercase();
    if l.contains("wait") {
        return None; // Stream Wait Event: GPU-side, the host does not block.
    }
    Some(if l.contains("context") || l.contains("device") {
        DEVICE_SYNC
    } else if l.contains("event") {
        EVENT_SYNC
    } else {
        STREAM_SYNC
    })
}

fn copy_pattern(bytes: u64) -> &'static str {
    if bytes <= ITEM_BYTES {
        ITEM_LIKE
    } else {
        CPU_COPY
    }
}

/// One host-blocking occurrence.
struct Occ {
    /// The slice that blocked (API call, sync slice or the copy).
    slice: u32,
    /// Host slice used for location (thread, NVTX, python).
    host: u32,
    pattern: &'static str,
    api: String,
    start_ns: i64,
    end_ns: i64,
    host_blocked_ns: i64,
}

/// Sync groups of a rank: in the headline window, before it (start-up)
/// and after it; and, per step, (occurrences, host ns blocked).
pub struct SyncFindings {
    /// Groups that started in the headline window.
    pub groups: Vec<SyncGroup>,
    /// Groups that started before it (start-up).
    pub startup: Vec<SyncGroup>,
    /// Groups that started after it.
    pub after: Vec<SyncGroup>,
    /// Per step of the rank: (occurrences, host ns blocked).
    pub per_step: Vec<(u64, i64)>,
}

/// Where the headline window lies, for sorting and charging syncs.
#[derive(Debug, Clone)]
pub struct SyncWindow<'a> {
    /// Host-time bounds: a sync starting before `start` is start-up, at or
    /// after `end` is after the window (None = unbounded).
    pub start: Option<i64>,
    /// See `start`.
    pub end: Option<i64>,
    /// GPU span of the window's GPU events (first start, last end): the
    /// idle charged to the window's syncs is clipped to it.
    pub gpu_span: Option<(i64, i64)>,
    /// Label of the window.
    pub label: &'a str,
    /// Index range of the window's steps in the rank's step list.
    pub steps: std::ops::Range<usize>,
}

/// Memcpy GPU slices of a rank: by correlation (for synchronous copies),
/// and the device-to-host ones as (copy slice, launch host slice or NONE).
fn gpu_copies(t: &Trace, ctx: &RankCtx) -> (HashMap<u32, u32>, Vec<(u32, u32)>) {
    let sl = t.slices();
    let mut copy_by_corr: HashMap<u32, u32> = HashMap::default();
    let mut d2h: Vec<(u32, u32)> = Vec::new(); // (copy slice, launch host slice or NONE)
    for e in &ctx.gpu {
        let i = e.id as usize;
        if sl.kind()[i] != SliceKind::Memcpy {
            continue;
        }
        if sl.correlation()[i] != 0 {
            copy_by_corr.insert(sl.correlation()[i], e.id);
        }
        if t.copy_of(SliceId::from_index(i))
            .is_some_and(|c| c.kind == CopyKind::DeviceToHost)
        {
            d2h.push((e.id, ctx.corr.get(sl.correlation()[i]).unwrap_or(NONE)));
        }
    }
    (copy_by_corr, d2h)
}

/// Blocking sync API calls and synchronous memcpy calls of a rank (their
/// copies marked `consumed`), with the host intervals of those calls.
fn api_occurrences(
    t: &Trace,
    ctx: &RankCtx,
    copy_by_corr: &HashMap<u32, u32>,
    consumed: &mut HashMap<u32, ()>,
) -> (Vec<Occ>, Vec<(i64, i64)>) {
    let sl = t.slices();
    let end = |i: usize| sl.start_ns()[i].saturating_add(sl.dur_ns()[i]);
    let mut occs: Vec<Occ> = Vec::new();
    let mut api_intervals: Vec<(i64, i64)> = Vec::new();
    for &h in &ctx.host {
        let i = h as usize;
        if !matches!(sl.kind()[i], SliceKind::Runtime | SliceKind::Driver) {
            continue;
        }
        let name = t.str(sl.name()[i]);
        let pattern = if let Some(p) = api_pattern(name) {
            p
        } else if is_sync_memcpy_api(name) {
            match copy_by_corr.get(&sl.correlation()[i]).and_then(|&c| {
                t.copy_of(SliceId::from_index(c as usize))
                    .map(|ci| (c, *ci))
            }) {
                Some((c, ci)) if ci.kind == CopyKind::DeviceToHost => {
                    consumed.insert(c, ());
                    copy_pattern(ci.bytes)
                }
                // A device-to-device cudaMemcpy does not make the host wait
                // (CUDA's "API synchronization behavior"; the collector
                // takes no line for it either).
                Some((_, ci)) if ci.kind == CopyKind::DeviceToDevice => continue,
                Some((c, _)) => {
                    consumed.insert(c, ());
                    STREAM_SYNC
                }
                None => CPU_COPY,
            }
        } else {
            continue;
        };
        api_intervals.push((sl.start_ns()[i], end(i)));
        occs.push(Occ {
            slice: h,
            host: h,
            pattern,
            api: name.to_string(),
            start_ns: sl.start_ns()[i],
            end_ns: end(i),
            host_blocked_ns: sl.dur_ns()[i],
        });
    }
    (occs, api_intervals)
}

/// Appends to `occs` the Sync slices of a rank not already counted through
/// their API call (`api_union`: the union of the counted calls' intervals).
fn sync_slice_occurrences(t: &Trace, ctx: &RankCtx, api_union: &[(i64, i64)], occs: &mut Vec<Occ>) {
    let sl = t.slices();
    let end = |i: usize| sl.start_ns()[i].saturating_add(sl.dur_ns()[i]);
    for &h in &ctx.host {
        let i = h as usize;
        if sl.kind()[i] != SliceKind::Sync {
            continue;
        }
        let name = t.str(sl.name()[i]);
        let Some(pattern) = sync_slice_pattern(name) else {
            continue;
        };
        let launch = ctx.corr.get(sl.correlation()[i]).filter(|&l| l != h);
        // With its API call in the trace, the call decides: a blocking sync
        // API was counted above, and anything else (cudaEventQuery, which
        // CUPTI also reports as an event synchronization, cudaStreamQuery,
        // cudaStreamWaitEvent) does not block the host.
        if launch.is_some_and(|l| {
            matches!(
                sl.kind()[l as usize],
                SliceKind::Runtime | SliceKind::Driver
            )
        }) {
            continue;
        }
        let mid = sl.start_ns()[i].saturating_add(sl.dur_ns()[i] / 2);
        if super::intervals::contains(api_union, mid) {
            continue;
        }
        occs.push(Occ {
            slice: h,
            host: launch.unwrap_or(h),
            pattern,
            api: name.to_string(),
            start_ns: sl.start_ns()[i],
            end_ns: end(i),
            host_blocked_ns: sl.dur_ns()[i],
        });
    }
}

/// Appends to `occs` the device-to-host copies nothing else explains, when
/// they block the host (not `consumed`, and not an async launch of pinned
/// memory).
fn unexplained_d2h_copies(
    t: &Trace,
    d2h: &[(u32, u32)],
    consumed: &HashMap<u32, ()>,
    occs: &mut Vec<Occ>,
) {
    let sl = t.slices();
    let end = |i: usize| sl.start_ns()[i].saturating_add(sl.dur_ns()[i]);
    for &(c, launch) in d2h {
        if consumed.contains_key(&c) {
            continue;
        }
        let ci = t.copy_of(SliceId::from_index(c as usize)).copied();
        let bytes = ci.map_or(0, |x| x.bytes);
        let pageable = ci.is_some_and(|x| x.pageable);
        let async_launch = launch != NONE && t.str(sl.name()[launch as usize]).contains("Async");
        if async_launch && !pageable {
            continue;
        }
        let (host, s, e, blocked, api) = if launch != NONE {
            let l = launch as usize;
            (
                launch,
                sl.start_ns()[l],
                end(l),
                sl.dur_ns()[l],
                t.str(sl.name()[l]).to_string(),
            )
        } else {
            let k = c as usize;
            (
                c,
                sl.start_ns()[k],
                end(k),
                0,
                t.str(sl.name()[k]).to_string(),
            )
        };
        occs.push(Occ {
            slice: c,
            host,
            pattern: copy_pattern(bytes),
            api,
            start_ns: s,
            end_ns: e,
            host_blocked_ns: blocked,
        });
    }
}

/// Finds the host-blocking synchronizations of a rank and groups them by call site, split by `window`.
pub fn find(
    t: &Trace,
    ctx: &RankCtx,
    steps: &[Step],
    window: &SyncWindow,
    opts: &AnalysisOptions,
) -> SyncFindings {
    // Memcpy GPU slices by correlation, for synchronous copies and D2H lookups.
    let (copy_by_corr, d2h) = gpu_copies(t, ctx);
    let mut consumed: HashMap<u32, ()> = HashMap::default();
    // API calls first: they carry the thread, NVTX context and python location.
    let (mut occs, api_intervals) = api_occurrences(t, ctx, &copy_by_corr, &mut consumed);
    let api_union = union(api_intervals);
    sync_slice_occurrences(t, ctx, &api_union, &mut occs);
    refine_with_preceding_copies(t, &mut occs, &d2h, &mut consumed);
    // Device-to-host copies nothing else explains, when they block the host.
    unexplained_d2h_copies(t, &d2h, &consumed, &mut occs);
    group(t, ctx, steps, occs, window, opts)
}

/// A sync preceded on its thread by a D2H copy launch (since the previous
/// sync) waits for that copy: `.item()`-like when it is at most 8 bytes,
/// `.cpu()`-like otherwise.
fn refine_with_preceding_copies(
    t: &Trace,
    occs: &mut [Occ],
    d2h: &[(u32, u32)],
    consumed: &mut HashMap<u32, ()>,
) {
    let sl = t.slices();
    let mut launches: HashMap<TrackId, Vec<(i64, u32)>> = HashMap::default();
    for &(c, l) in d2h {
        // A copy whose launch call returned only after the copy finished
        // (pageable memory makes cudaMemcpyAsync synchronous) blocked the
        // host by itself: a later sync does not wait for it, and the copy
        // is its own occurrence.
        let (ci, li) = (c as usize, l as usize);
        if l != NONE
            && sl.start_ns()[li].saturating_add(sl.dur_ns()[li])
                >= sl.start_ns()[ci].saturating_add(sl.dur_ns()[ci])
        {
            continue;
        }
        if l != NONE && !consumed.contains_key(&c) {
            launches
                .entry(sl.track()[l as usize])
                .or_default()
                .push((sl.start_ns()[l as usize], c));
        }
    }
    for v in launches.values_mut() {
        v.sort_unstable();
    }
    let mut order: Vec<usize> = (0..occs.len()).collect();
    order.sort_by_key(|&k| (sl.track()[occs[k].host as usize].get(), occs[k].start_ns));
    let mut prev: Option<(TrackId, i64)> = None;
    for k in order {
        let track = sl.track()[occs[k].host as usize];
        let since = match prev {
            Some((tr, s)) if tr == track => s,
            _ => i64::MIN,
        };
        prev = Some((track, occs[k].start_ns));
        if !matches!(occs[k].pattern, STREAM_SYNC | DEVICE_SYNC | EVENT_SYNC) {
            continue;
        }
        let Some(v) = launches.get(&track) else {
            continue;
        };
        let upto = v.partition_point(|&(s, _)| s <= occs[k].start_ns);
        let from = v.partition_point(|&(s, _)| s <= since);
        if upto > from {
            let c = v[upto - 1].1;
            let bytes = t
                .copy_of(SliceId::from_index(c as usize))
                .map_or(u64::MAX, |ci| ci.bytes);
            occs[k].pattern = copy_pattern(bytes);
            for &(_, cc) in &v[from..upto] {
                consumed.insert(cc, ());
            }
        }
    }
}

/// For each occurrence, the slices of `kind` open around its start on its
/// thread, outermost first: one sweep per thread with a stack (slices of
/// one thread nest).
fn enclosing(t: &Trace, ctx: &RankCtx, occs: &[Occ], kind: SliceKind) -> Vec<Vec<u32>> {
    let sl = t.slices();
    let mut by_track: HashMap<TrackId, (Vec<u32>, Vec<usize>)> = HashMap::default();
    for (k, o) in occs.iter().enumerate() {
        by_track
            .entry(sl.track()[o.host as usize])
            .or_default()
            .1
            .push(k);
    }
    for &h in &ctx.host {
        if sl.kind()[h as usize] == kind {
            if let Some(e) = by_track.get_mut(&sl.track()[h as usize]) {
                e.0.push(h);
            }
        }
    }
    let mut out = vec![Vec::new(); occs.len()];
    for (mut ranges, mut at) in by_track.into_values() {
        at.sort_by_key(|&k| occs[k].start_ns);
        let times: Vec<i64> = at.iter().map(|&k| occs[k].start_ns).collect();
        enclosing_each(sl, &mut ranges, &times, |i, open| {
            let k = at[i];
            out[k] = open
                .iter()
                .copied()
                .filter(|&r| r != occs[k].host)
                .collect();
        });
    }
    out
}

/// A frame of PyTorch or an installed package rather than of the program.
pub(crate) fn is_library_frame(location: &str) -> bool {
    location.contains("site-packages/")
        || location.contains("dist-packages/")
        || location.starts_with("torch/")
        || location.contains("/torch/")
}

/// "train.py:42 (step)" from a Kineto python_function name "train.py(42): step".
pub fn python_location(name: &str) -> Option<String> {
    let (head, func) = name.split_once("): ")?;
    let (file, line) = head.rsplit_once('(')?;
    line.parse::<u32>().ok()?;
    (!file.is_empty()).then(|| format!("{file}:{line} ({func})"))
}

/// GPU idle each occurrence caused: when the device was busy when the host
/// began to wait (running, or with work launched before the wait still to
/// run) and drained before the wait ended, the gap from the drain (the end
/// of the busy period that work ends in) to the device's next work; a wait
/// on an already idle device, or one the device outlasts, costs nothing. A
/// gap is charged once (to the first sync that drained into it), and only
/// its part inside the sync's region (before, inside or after the window's
/// GPU span).
fn charge(
    t: &Trace,
    ctx: &RankCtx,
    occs: &[Occ],
    region: &[u8],
    span: Option<(i64, i64)>,
) -> Vec<i64> {
    let busy = union(ctx.gpu.iter().map(|e| (e.s, e.e)).collect());
    // Work known to the device at time x: the latest end of the GPU events
    // launched (or, without a launch call, started) by x.
    let mut launched: Vec<(i64, i64)> = ctx
        .gpu
        .iter()
        .map(|e| (ctx.launch_start(t, e.id).unwrap_or(e.s).min(e.s), e.e))
        .collect();
    launched.sort_unstable();
    let mut latest = Vec::with_capacity(launched.len());
    let mut m = i64::MIN;
    for &(_, e) in &launched {
        m = m.max(e);
        latest.push(m);
    }
    let mut order: Vec<usize> = (0..occs.len()).collect();
    order.sort_by_key(|&k| (occs[k].start_ns, occs[k].end_ns));
    let mut charged: rustc_hash::FxHashSet<i64> = Default::default();
    let mut idle = vec![0i64; occs.len()];
    let (lo, hi) = span.unwrap_or((i64::MIN, i64::MAX));
    for k in order {
        let o = &occs[k];
        let known = launched.partition_point(|&(l, _)| l <= o.start_ns);
        let Some(&pending_end) = known.checked_sub(1).and_then(|i| latest.get(i)) else {
            continue;
        };
        if pending_end <= o.start_ns {
            continue; // the device was idle when the host began to wait
        }
        // The busy period that work ends in.
        let at = busy.partition_point(|&(s, _)| s < pending_end);
        let Some(&(_, drain)) = at.checked_sub(1).and_then(|i| busy.get(i)) else {
            continue;
        };
        if drain > o.end_ns {
            continue; // the device outlasted the wait: nothing drained
        }
        let Some(&(next, _)) = busy.get(at) else {
            continue; // nothing ran after: the end of the trace, not a cost
        };
        if !charged.insert(drain) {
            continue;
        }
        let (a, b) = match region[k] {
            0 => (drain, next.min(lo)),
            1 => (drain.max(lo), next.min(hi)),
            _ => (drain.max(hi), next),
        };
        idle[k] = b.saturating_sub(a).max(0);
    }
    idle
}

/// Where an occurrence starting at `start_ns` lies relative to the window:
/// 0: start-up (before the window), 1: in the window, 2: after it.
fn region_of(window: &SyncWindow, start_ns: i64) -> u8 {
    if window.start.is_some_and(|s| start_ns < s) {
        0
    } else if window.end.is_some_and(|e| start_ns >= e) {
        2
    } else {
        1
    }
}

/// Python location of an occurrence: the collector's arg, else a native
/// program's C/C++ caller (`protocol::CALLER_ARG`), else the innermost
/// Kineto python_function around the call (the innermost frame
/// of user code, else the innermost frame). `ops` are the CPU ops open
/// around it, outermost first.
fn python_of(t: &Trace, o: &Occ, ops: &[u32]) -> String {
    let sl = t.slices();
    let arg = |key: &str| {
        t.arg_string(SliceId::from_index(o.slice as usize), key)
            .or_else(|| t.arg_string(SliceId::from_index(o.host as usize), key))
    };
    arg("python")
        .or_else(|| arg(crate::protocol::CALLER_ARG))
        .or_else(|| {
            let frames: Vec<String> = ops
                .iter()
                .filter_map(|&r| python_location(t.str(sl.name()[r as usize])))
                .collect();
            let user = frames.iter().rev().find(|f| !is_library_frame(f));
            user.or(frames.last()).cloned()
        })
        .unwrap_or_default()
}

/// The NVTX ranges open around an occurrence (outermost first), step and
/// optimizer-step ranges left out, joined with " > ".
fn nvtx_path(t: &Trace, ranges: &[u32]) -> String {
    let sl = t.slices();
    ranges
        .iter()
        .map(|&r| t.str(sl.name()[r as usize]))
        .filter(|n| !is_step_name(n) && *n != OPTIMIZER_STEP_RANGE)
        .collect::<Vec<_>>()
        .join(" > ")
}

/// The innermost CPU op around an occurrence that is not a python frame
/// ("" if none).
fn innermost_op(t: &Trace, ops: &[u32]) -> String {
    let sl = t.slices();
    ops.iter()
        .rev()
        .map(|&r| t.str(sl.name()[r as usize]))
        .find(|n| python_location(n).is_none())
        .unwrap_or("")
        .to_string()
}

/// A sync group being accumulated.
struct Acc {
    g: SyncGroup,
    steps: Vec<u32>,
    blocked_ns: i64,
    idle_ns: i64,
}

/// Key of a sync group: (region, pattern, api, python, nvtx).
type GroupKey = (u8, &'static str, String, String, String);

impl Acc {
    /// An empty group for the first occurrence `o` of its key.
    fn new(rank: u32, label: String, o: &Occ, python: String, nvtx: String, op: String) -> Acc {
        Acc {
            g: SyncGroup {
                rank,
                window: label,
                pattern: o.pattern.to_string(),
                api: o.api.clone(),
                where_: if !python.is_empty() {
                    python.clone()
                } else if !nvtx.is_empty() {
                    nvtx.clone()
                } else {
                    o.api.clone()
                },
                nvtx,
                python,
                op,
                start_ns: o.start_ns,
                end_ns: o.end_ns,
                ..Default::default()
            },
            steps: Vec::new(),
            blocked_ns: 0,
            idle_ns: 0,
        }
    }

    /// Counts occurrence `o` (GPU idle `idle_ns`, in step `step` or NONE).
    fn add(&mut self, o: &Occ, idle_ns: i64, step: u32) {
        self.g.count += 1;
        self.blocked_ns = self.blocked_ns.saturating_add(o.host_blocked_ns);
        self.idle_ns = self.idle_ns.saturating_add(idle_ns);
        if self.g.slices.len() < 256 {
            self.g.slices.push(SliceId::from_index(o.slice as usize));
        }
        if o.start_ns < self.g.start_ns {
            self.g.start_ns = o.start_ns;
            self.g.end_ns = o.end_ns;
        }
        if step != NONE && self.steps.last() != Some(&step) {
            self.steps.push(step);
        }
    }

    /// Settles the group's step count and totals (steps outside the window
    /// dropped for a group in it) and returns it.
    fn finish(mut self, region: u8, window: &SyncWindow) -> SyncGroup {
        self.steps.sort_unstable();
        self.steps.dedup();
        self.steps
            .retain(|s| window.steps.contains(&(*s as usize)) || region != 1);
        self.g.steps_with = self.steps.len() as u64;
        self.g.host_blocked_us = self.blocked_ns as f64 / 1000.0;
        self.g.gpu_idle_us = self.idle_ns as f64 / 1000.0;
        self.g
    }
}

/// Per-step rate and warning of a group in the window (`idle_ns`: its GPU
/// idle in ns, `window_steps`: the window's step count).
fn rate_in_window(g: &mut SyncGroup, idle_ns: i64, window_steps: usize, opts: &AnalysisOptions) {
    g.per_step = (window_steps > 0).then(|| g.count as f64 / window_steps as f64);
    // A warning means a cost: GPU idle caused in the window. A sync
    // that repeats but leaves the device busy is listed, not raised.
    if g.gpu_idle_us >= opts.sync_gpu_idle_threshold_us && idle_ns > 0 {
        let mut why = vec![format!(
            "costs {:.2} ms of GPU idle",
            g.gpu_idle_us / 1000.0
        )];
        if window_steps >= 2 && g.steps_with >= 2 {
            why.push(format!("in {} of {} steps", g.steps_with, window_steps));
        } else if g.count >= 2 {
            why.push(format!("{} times", g.count));
        }
        g.warning = Some(why.join("; "));
    }
}

/// Order of sync groups: GPU idle, then host time blocked (both
/// descending), then call site.
fn by_cost(a: &SyncGroup, b: &SyncGroup) -> std::cmp::Ordering {
    b.gpu_idle_us
        .total_cmp(&a.gpu_idle_us)
        .then(b.host_blocked_us.total_cmp(&a.host_blocked_us))
        .then(a.where_.cmp(&b.where_))
}

fn group(
    t: &Trace,
    ctx: &RankCtx,
    steps: &[Step],
    occs: Vec<Occ>,
    window: &SyncWindow,
    opts: &AnalysisOptions,
) -> SyncFindings {
    let region: Vec<u8> = occs.iter().map(|o| region_of(window, o.start_ns)).collect();
    let idle = charge(t, ctx, &occs, &region, window.gpu_span);
    let ranges = enclosing(t, ctx, &occs, SliceKind::Range);
    let ops = enclosing(t, ctx, &occs, SliceKind::CpuOp);
    let mut per_step = vec![(0u64, 0i64); steps.len()];
    let mut groups: HashMap<GroupKey, Acc> = HashMap::default();
    for (k, o) in occs.iter().enumerate() {
        let python = python_of(t, o, &ops[k]);
        let nvtx = nvtx_path(t, &ranges[k]);
        let op = innermost_op(t, &ops[k]);
        let idle_ns = idle[k];
        let step = step_at(steps, o.start_ns);
        if step != NONE {
            per_step[step as usize].0 += 1;
            per_step[step as usize].1 = per_step[step as usize].1.saturating_add(o.host_blocked_ns);
        }
        let key = (
            region[k],
            o.pattern,
            o.api.clone(),
            python.clone(),
            nvtx.clone(),
        );
        let label = match region[k] {
            0 => "start-up (before the window)".to_string(),
            1 => window.label.to_string(),
            _ => "after the window".to_string(),
        };
        let acc = groups
            .entry(key)
            .or_insert_with(|| Acc::new(ctx.rank, label, o, python, nvtx, op));
        acc.add(o, idle_ns, step);
    }
    let window_steps = window.steps.len();
    let (mut inside, mut startup, mut after) = (Vec::new(), Vec::new(), Vec::new());
    for ((region, ..), a) in groups {
        let idle_ns = a.idle_ns;
        let mut g = a.finish(region, window);
        match region {
            0 => startup.push(g),
            1 => {
                rate_in_window(&mut g, idle_ns, window_steps, opts);
                inside.push(g);
            }
            _ => after.push(g),
        }
    }
    inside.sort_by(by_cost);
    startup.sort_by(by_cost);
    after.sort_by(by_cost);
    SyncFindings {
        groups: inside,
        startup,
        after,
        per_step,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_blocking_runtime_call_gets_its_python_line() {
        let runtime: Vec<&str> = (protocol::BLOCKING_CALLS.iter())
            .map(|(n, _)| *n)
            .filter(|n| n.starts_with("cuda"))
            .collect();
        assert!(runtime.len() >= 6, "{runtime:?}");
        for n in runtime {
            assert!(
                protocol::HOST_SYNC_APIS.contains(&n),
                "{n} not hooked by the collector"
            );
        }
        assert_eq!(api_pattern("cuCtxSynchronize"), Some(DEVICE_SYNC));
        assert_eq!(api_pattern("cudaStreamQuery"), None);
        assert!(is_sync_memcpy_api("cuMemcpyDtoH_v2") && !is_sync_memcpy_api("cudaMemcpyAsync"));
    }

    #[test]
    fn kineto_python_function_names() {
        assert_eq!(
            python_location("train.py(42): step").as_deref(),
            Some("train.py:42 (step)")
        );
        assert_eq!(
            python_location("/a/b(c)/m.py(7): <module>").as_deref(),
            Some("/a/b(c)/m.py:7 (<module>)")
        );
        assert_eq!(python_location("aten::item"), None);
        assert_eq!(python_location("nn.Module: Linear_0"), None);
    }
}
