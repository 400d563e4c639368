//! Training steps of a rank, in this order: ProfilerStep#N markers, NVTX
//! step ranges, the collector's optimizer-step ranges (each ends a step),
//! or else the period of the main stream's kernel sequence.

use regex::Regex;

use super::rank::{RankCtx, NONE};
use super::step_marks::{step_ends, Marker};
use crate::model::{ArgValue, SliceId, SliceKind, StrId, Trace};
use crate::protocol::{OPTIMIZER_KEY_ARG, OPTIMIZER_STEP_RANGE};

/// One training step of a rank.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Step number.
    pub number: i64,
    /// Step name (e.g. "ProfilerStep#4").
    pub name: String,
    /// Start of the step (ns).
    pub start_ns: i64,
    /// End of the step (ns).
    pub end_ns: i64,
    /// Bounds are host time (markers) rather than GPU time (repetition).
    pub host_time: bool,
    /// Where this step came from (marker steps followed by graph launches
    /// differ within a rank).
    pub source: StepSource,
}

/// Where a rank's steps came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepSource {
    /// `ProfilerStep#N` markers.
    ProfilerStep,
    /// NVTX step ranges (`step N`, `train_step`, ...).
    Nvtx,
    /// The collector's optimizer-step ranges (`protocol::OPTIMIZER_STEP_RANGE`).
    OptimizerStep,
    /// Launches of one CUDA graph, at a regular period.
    GraphLaunch,
    /// The period of the main stream's kernel sequence.
    Repetition,
    /// A blocking sync called once per iteration from one site
    /// (`analysis::sync_steps`: a native loop without markers).
    Sync,
    /// No steps found.
    None,
}

impl StepSource {
    /// Name as reported in `step_source` ("ProfilerStep", "nvtx",
    /// "optimizer-step", "graph-launch", "repetition", "none").
    pub fn name(self) -> &'static str {
        match self {
            StepSource::ProfilerStep => "ProfilerStep",
            StepSource::Nvtx => "nvtx",
            StepSource::OptimizerStep => "optimizer-step",
            StepSource::GraphLaunch => "graph-launch",
            StepSource::Repetition => "repetition",
            StepSource::Sync => "sync",
            StepSource::None => "none",
        }
    }
}

/// The step number of a "ProfilerStep#N" name.
pub fn profiler_step_number(name: &str) -> Option<i64> {
    name.strip_prefix("ProfilerStep#")?.trim().parse().ok()
}

/// Compiled once: `is_step_name` runs for every enclosing range of every sync.
fn nvtx_step_regex() -> Option<&'static Regex> {
    static RE: std::sync::OnceLock<Option<Regex>> = std::sync::OnceLock::new();
    RE.get_or_init(|| Regex::new(r"(?i)^\s*(?:train[_ ]?)?step(?:[ _#:]*(\d+))?\s*$").ok())
        .as_ref()
}

/// Whether a range name marks a step (those are left out of NVTX call-site paths).
pub fn is_step_name(name: &str) -> bool {
    profiler_step_number(name).is_some() || nvtx_step_regex().is_some_and(|r| r.is_match(name))
}

/// The steps of a rank, where they came from, and (without steps) where
/// a repeating kernel sequence begins.
pub struct Detected {
    /// The steps, in order.
    pub steps: Vec<Step>,
    /// Where they came from.
    pub source: StepSource,
    /// The repeating kernel sequence, when the period detector found one.
    pub repeating: Option<Repeating>,
    /// The first step of the steady state when it is not the second
    /// (marker steps followed by graph replays: the first replay after them).
    pub steady_from: Option<usize>,
    /// Correlation ids of the rank's graph launches that ran GPU work, sorted.
    pub graph_corrs: Vec<u32>,
}

/// Finds the steps of a rank. A step whose end comes before its start
/// (a damaged trace's times: a flipped byte in a timestamp) is left out
/// rather than reported with a negative time.
pub fn detect(t: &Trace, ctx: &RankCtx) -> Detected {
    let mut d = detect_any(t, ctx);
    if d.steps.iter().any(|s| s.end_ns < s.start_ns) {
        let steps = &d.steps;
        d.steady_from = d.steady_from.map(|k| {
            let k = k.min(steps.len());
            k - steps[..k].iter().filter(|s| s.end_ns < s.start_ns).count()
        });
        d.steps.retain(|s| s.end_ns >= s.start_ns);
        if d.steady_from.is_some_and(|k| k >= d.steps.len()) {
            d.steady_from = None;
        }
    }
    d
}

fn detect_any(t: &Trace, ctx: &RankCtx) -> Detected {
    let sl = t.slices();
    // Name ids that mark steps, decided once per distinct name.
    let mut decided: rustc_hash::FxHashMap<StrId, Option<(bool, Option<i64>)>> = Default::default();
    let re = nvtx_step_regex();
    let mut profiler: Vec<Step> = Vec::new();
    let mut nvtx: Vec<Step> = Vec::new();
    let marker = t.strings().lookup(OPTIMIZER_STEP_RANGE);
    let mut markers: Vec<Marker> = Vec::new();
    let mut first_launch = i64::MAX;
    for &h in &ctx.host {
        let i = h as usize;
        if sl.correlation()[i] != 0
            && matches!(sl.kind()[i], SliceKind::Runtime | SliceKind::Driver)
        {
            first_launch = first_launch.min(sl.start_ns()[i]);
        }
        if !matches!(sl.kind()[i], SliceKind::CpuOp | SliceKind::Range) {
            continue;
        }
        if sl.kind()[i] == SliceKind::Range && Some(sl.name()[i]) == marker {
            let key = match t.arg(SliceId::from_index(i), OPTIMIZER_KEY_ARG) {
                Some(ArgValue::UInt(x)) => *x,
                Some(ArgValue::Int(x)) => *x as u64,
                _ => 0,
            };
            markers.push(Marker {
                start_ns: sl.start_ns()[i],
                end_ns: sl.start_ns()[i].saturating_add(sl.dur_ns()[i]),
                key,
            });
            continue;
        }
        let d = *decided.entry(sl.name()[i]).or_insert_with(|| {
            let name = t.str(sl.name()[i]);
            if let Some(n) = profiler_step_number(name) {
                return Some((true, Some(n)));
            }
            let caps = re.as_ref()?.captures(name)?;
            Some((false, caps.get(1).and_then(|m| m.as_str().parse().ok())))
        });
        let Some((is_profiler, number)) = d else {
            continue;
        };
        let step = Step {
            number: number.unwrap_or(-1),
            name: t.str(sl.name()[i]).to_string(),
            start_ns: sl.start_ns()[i],
            end_ns: sl.start_ns()[i].saturating_add(sl.dur_ns()[i]),
            host_time: true,
            source: if is_profiler {
                StepSource::ProfilerStep
            } else {
                StepSource::Nvtx
            },
        };
        if is_profiler {
            profiler.push(step);
        } else if sl.kind()[i] == SliceKind::Range {
            nvtx.push(step);
        }
    }
    let launches = super::graph_steps::launches(t, ctx);
    let mut graph_corrs: Vec<u32> = launches.iter().map(|l| l.corr).collect();
    graph_corrs.sort_unstable();
    let graph_corrs = &graph_corrs;
    let found = |steps: Vec<Step>, source: StepSource| Detected {
        steps,
        source,
        repeating: None,
        steady_from: None,
        graph_corrs: graph_corrs.clone(),
    };
    let host_end = ctx
        .host
        .iter()
        .map(|&h| sl.start_ns()[h as usize].saturating_add(sl.dur_ns()[h as usize]))
        .max()
        .unwrap_or(0);
    // Marker steps, then graph replays once the markers stop (a step
    // captured whole in a graph runs no Python optimizer step after the
    // capture): the replays are the steady state.
    let with_tail = |mut steps: Vec<Step>, source: StepSource| {
        let after = steps.last().map_or(i64::MIN, |s| s.end_ns);
        let next = steps.last().map_or(0, |s| s.number + 1);
        match super::graph_steps::graph_steps(&launches, after, host_end, next) {
            Some(tail) => {
                let from = steps.len() + 1;
                steps.extend(tail);
                Detected {
                    steady_from: Some(from.min(steps.len() - 1)),
                    ..found(steps, StepSource::GraphLaunch)
                }
            }
            None => found(steps, source),
        }
    };
    if !profiler.is_empty() {
        return found(outermost(profiler, false), StepSource::ProfilerStep);
    }
    if !nvtx.is_empty() {
        return with_tail(outermost(nvtx, true), StepSource::Nvtx);
    }
    if !markers.is_empty() {
        return with_tail(
            marker_steps(step_ends(markers), first_launch),
            StepSource::OptimizerStep,
        );
    }
    if let Some(steps) = super::graph_steps::graph_steps(&launches, i64::MIN, host_end, 0) {
        return found(steps, StepSource::GraphLaunch);
    }
    let (found_steps, repeating) = repetition(t, ctx);
    let (steps, source) = match found_steps {
        Some(steps) => (steps, StepSource::Repetition),
        None => match super::sync_steps::sync_steps(t, ctx) {
            Some(steps) => (steps, StepSource::Sync),
            None => (Vec::new(), StepSource::None),
        },
    };
    Detected {
        steps,
        source,
        repeating,
        steady_from: None,
        graph_corrs: graph_corrs.clone(),
    }
}

/// Steps a rank's optimizer steps end (`ends`, [`step_ends`]): step k runs from the end of
/// step k-1 (for the first, from the rank's first launch call) to the end
/// of step k.
fn marker_steps(mut ends: Vec<i64>, first_launch: i64) -> Vec<Step> {
    ends.sort_unstable();
    ends.dedup();
    let mut prev = first_launch.min(ends[0]);
    ends.iter()
        .enumerate()
        .map(|(k, &end_ns)| {
            let s = Step {
                number: k as i64,
                name: format!("optimizer step {k}"),
                start_ns: prev,
                end_ns: end_ns.saturating_add(1),
                host_time: true,
                source: StepSource::OptimizerStep,
            };
            prev = end_ns.saturating_add(1);
            s
        })
        .collect()
}

/// Sorts by start, drops steps nested in (or duplicating) an earlier one,
/// and numbers unnumbered steps by order.
fn outermost(mut v: Vec<Step>, renumber: bool) -> Vec<Step> {
    v.sort_by_key(|s| (s.start_ns, std::cmp::Reverse(s.end_ns)));
    let mut out: Vec<Step> = Vec::with_capacity(v.len());
    let mut seen: rustc_hash::FxHashSet<i64> = Default::default();
    for s in v {
        let nested = out.last().is_some_and(|last| s.start_ns < last.end_ns);
        if nested || (s.number >= 0 && seen.contains(&s.number)) {
            continue;
        }
        seen.insert(s.number);
        out.push(s);
    }
    if renumber && out.iter().any(|s| s.number < 0) {
        for (k, s) in out.iter_mut().enumerate() {
            s.number = k as i64;
        }
    }
    out
}

/// What the period detector found on the main stream of a rank.
#[derive(Debug, Clone, PartialEq)]
pub struct Repeating {
    /// GPU time where the repeating kernel sequence begins.
    pub start_ns: i64,
    /// Period in kernels of the main stream.
    pub period: usize,
    /// Full periods found.
    pub cycles: usize,
    /// Whether the first full period is the warm-up step.
    pub first_is_warmup: bool,
}

/// End times of the rank's blocking host synchronization calls, sorted.
fn sync_call_ends(t: &Trace, ctx: &RankCtx) -> Vec<i64> {
    let sl = t.slices();
    let mut blocking = super::names::NameTest::new(t, |n: &str| {
        n.contains("Synchronize") || n.starts_with("cuMemcpyDtoH") || n == "cudaMemcpy"
    });
    let mut v: Vec<i64> = ctx
        .host
        .iter()
        .map(|&h| h as usize)
        .filter(|&i| matches!(sl.kind()[i], SliceKind::Runtime | SliceKind::Driver))
        .filter(|&i| blocking.of(sl.name()[i]))
        .map(|i| sl.start_ns()[i].saturating_add(sl.dur_ns()[i]))
        .collect();
    v.sort_unstable();
    v
}

/// Positions of `seq` whose name is not rare: a name seen fewer than a
/// quarter as often as the median name (counted over distinct names seen at
/// least twice) is an extra copy or sync every few steps, or start-up.
/// Also returns how often each name id occurs.
fn steady_split(seq: &[u32]) -> (Vec<usize>, Vec<usize>) {
    let distinct = seq.iter().copied().max().map_or(0, |m| m as usize + 1);
    let mut count = vec![0usize; distinct];
    for &x in seq {
        count[x as usize] += 1;
    }
    let mut c: Vec<usize> = count.iter().copied().filter(|&n| n >= 2).collect();
    c.sort_unstable();
    let median = c.get(c.len() / 2).copied().unwrap_or(0);
    let kept = (0..seq.len())
        .filter(|&i| count[seq[i] as usize] * 4 >= median)
        .collect();
    (kept, count)
}

/// The period of `seq` as [`find_period`] finds it, on the whole sequence
/// or with its rare names left out ([`steady_split`]): the second when
/// every name it leaves out occurs less than every other period it finds,
/// it finds more periods, and its region spans at least 90 % of the
/// first's (a copy every N steps breaks the whole sequence's period; a
/// name seen once a step is not rare). Returns the positions of `seq` the
/// period was found on and `(period, a, b)` over them.
fn best_period(seq: &[u32]) -> Option<(Vec<usize>, (usize, usize, usize))> {
    let span = |kept: &[usize], (_, a, b): (usize, usize, usize)| kept[b - 1] + 1 - kept[a];
    let all: Vec<usize> = (0..seq.len()).collect();
    let whole = find_period(seq).map(|r| (all, r));
    let (kept, count) = steady_split(seq);
    if kept.len() == seq.len() {
        return whole;
    }
    let sub: Vec<u32> = kept.iter().map(|&i| seq[i]).collect();
    // The most often a left-out name occurs.
    let mut is_kept = vec![false; seq.len()];
    for &i in &kept {
        is_kept[i] = true;
    }
    let left_out_max = (0..seq.len())
        .filter(|&i| !is_kept[i])
        .map(|i| count[seq[i] as usize])
        .max()
        .unwrap_or(0);
    let steady = find_period(&sub).map(|r| (kept, r));
    let cycles = |(p, a, b): (usize, usize, usize)| (b - a) / p;
    match (whole, steady) {
        // The steady period only when what it leaves out is rare for it
        // (seen less than every other period), it finds more periods and
        // spans about as much.
        (Some(w), Some(s))
            if left_out_max * 2 < cycles(s.1)
                && cycles(s.1) > cycles(w.1)
                && span(&s.0, s.1) * 10 >= span(&w.0, w.1) * 9 =>
        {
            Some(s)
        }
        (Some(w), _) => Some(w),
        (None, s) => s.filter(|s| left_out_max * 2 < cycles(s.1)),
    }
}

/// Where each full period of a kernel-name sequence begins (indices into
/// `seq`, ascending; the last is where the period after the last full one
/// would begin), by the rules of the repetition steps: rare names left
/// out, the longest repeating region, the shortest period covering it.
/// Empty when nothing repeats 3 times.
pub fn period_starts(seq: &[u32]) -> Vec<usize> {
    let Some((kept, (p, a, b))) = best_period(seq) else {
        return Vec::new();
    };
    (a..=b.saturating_sub(p).max(a))
        .step_by(p)
        .filter_map(|i| kept.get(i).copied())
        .chain(kept.get(a + (b - a) / p * p).copied())
        .collect::<std::collections::BTreeSet<usize>>()
        .into_iter()
        .collect()
}

/// Fewest full periods taken as steps.
const MIN_CYCLES: usize = 3;

/// Sampled share of positions `i` with `seq[i] == seq[i + p]`.
fn sampled_ratio(seq: &[u32], p: usize) -> f64 {
    const SAMPLES: usize = 4_000;
    let span = seq.len().saturating_sub(p);
    if span == 0 {
        return 0.0;
    }
    if span <= SAMPLES {
        let same = (0..span).filter(|&i| seq[i] == seq[i + p]).count();
        return same as f64 / span as f64;
    }
    // Pseudo-random positions, so no stride can alias with the period.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut same = 0usize;
    for _ in 0..SAMPLES {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let i = ((x >> 33) as usize) % span;
        same += (seq[i] == seq[i + p]) as usize;
    }
    same as f64 / SAMPLES as f64
}

/// The longest region `[a, b)` of `seq` that repeats with period `p`: a
/// run of positions `i` where `seq[i] == seq[i + p]`, a mismatch being
/// tolerated when the `p` comparisons around it hold at most `p / 20`
/// mismatches (kernels whose order varies a little from step to step).
fn repeating_region(seq: &[u32], p: usize) -> (usize, usize) {
    let n = seq.len();
    if p == 0 || n <= p {
        return (0, 0);
    }
    let m = n - p;
    let matches = |i: usize| seq[i] == seq[i + p];
    let mut pre = vec![0u32; m + 1];
    for i in 0..m {
        pre[i + 1] = pre[i] + u32::from(!matches(i));
    }
    let allowed = (p / 20) as u32;
    let ok = |i: usize| {
        matches(i) || {
            let lo = i.saturating_sub(p / 2);
            let hi = (i + p.div_ceil(2)).min(m);
            allowed > 0 && pre[hi] - pre[lo] <= allowed
        }
    };
    let (mut best, mut i) = ((0usize, 0usize), 0usize);
    while i < m {
        if !matches(i) {
            i += 1;
            continue;
        }
        let a = i;
        let mut last_match = i;
        while i < m && ok(i) {
            if matches(i) {
                last_match = i;
            }
            i += 1;
        }
        let b = last_match + 1 + p;
        if b - a > best.1 - best.0 {
            best = (a, b);
        }
    }
    best
}

/// Finds the period of the main stream's kernel-name sequence and its
/// repeating region. Candidates: for every kernel name seen at least 3
/// times, the median and last distances between its consecutive
/// occurrences; the 48 best by sampled match ratio are scanned fully; the
/// longest repeating region wins, and among periods covering about as
/// much (multiples of the period cover the same region) the smallest.
fn find_period(seq: &[u32]) -> Option<(usize, usize, usize)> {
    let n = seq.len();
    if n < 2 * MIN_CYCLES {
        return None;
    }
    let distinct = seq.iter().copied().max().map_or(0, |m| m as usize + 1);
    let mut last: Vec<usize> = vec![usize::MAX; distinct];
    let mut gaps: Vec<Vec<usize>> = vec![Vec::new(); distinct];
    for (i, &x) in seq.iter().enumerate() {
        let l = last[x as usize];
        if l != usize::MAX {
            gaps[x as usize].push(i - l);
        }
        last[x as usize] = i;
    }
    let mut cands: Vec<usize> = Vec::new();
    for mut g in gaps.into_iter().filter(|g| g.len() + 1 >= MIN_CYCLES) {
        if let Some(&l) = g.last() {
            cands.push(l);
        }
        g.sort_unstable();
        cands.push(g[g.len() / 2]);
    }
    cands.retain(|&p| p >= 2 && p * MIN_CYCLES <= n);
    cands.sort_unstable();
    cands.dedup();
    let mut scored: Vec<(usize, f64)> = cands.iter().map(|&p| (p, sampled_ratio(seq, p))).collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scored.truncate(48);
    let regions: Vec<(usize, usize, usize)> = scored
        .iter()
        .map(|&(p, _)| {
            let (a, b) = repeating_region(seq, p);
            (p, a, b)
        })
        .filter(|&(p, a, b)| b > a && (b - a) / p >= MIN_CYCLES)
        .collect();
    let best = regions.iter().map(|r| r.2 - r.1).max()?;
    regions
        .iter()
        .filter(|r| (r.2 - r.1) as f64 >= 0.97 * best as f64)
        .min_by_key(|r| r.0)
        .copied()
}

/// Steps from the period of the GPU-event name sequence of the busiest
/// stream: full periods of the repeating region, each starting at the
/// phase of the period that follows a host synchronization in most
/// periods, else where the stream idles longest before a kernel (the step
/// boundary, where the host syncs, reads data or runs the optimizer's host
/// side). Also returns where the repetition begins, with fewer than 3 full
/// periods too.
pub fn repetition(t: &Trace, ctx: &RankCtx) -> (Option<Vec<Step>>, Option<Repeating>) {
    let mut per_stream = vec![0usize; ctx.streams.len()];
    for e in &ctx.gpu {
        per_stream[e.stream as usize] += 1;
    }
    let Some(main) = per_stream
        .iter()
        .enumerate()
        .max_by_key(|(_, c)| **c)
        .map(|(k, _)| k as u16)
    else {
        return (None, None);
    };
    let all_evs: Vec<(StrId, i64, i64, u32)> = ctx
        .gpu
        .iter()
        .filter(|e| e.stream == main)
        .map(|e| (t.slices().name()[e.id as usize], e.s, e.e, e.id))
        .collect();
    // Dense name ids; rare names (a loss read or a log every N steps)
    // left out, so they do not break the period.
    let mut ids: rustc_hash::FxHashMap<StrId, u32> = Default::default();
    let full: Vec<u32> = all_evs
        .iter()
        .map(|e| {
            let next = ids.len() as u32;
            *ids.entry(e.0).or_insert(next)
        })
        .collect();
    let Some((kept, (p, a, b))) = best_period(&full) else {
        return (None, None);
    };
    let evs: Vec<(StrId, i64, i64)> = kept
        .iter()
        .map(|&i| (all_evs[i].0, all_evs[i].1, all_evs[i].2))
        .collect();
    let main_ids: Vec<u32> = kept.iter().map(|&i| all_evs[i].3).collect();
    let seq: Vec<u32> = kept.iter().map(|&i| full[i]).collect();

    // Phase: the step boundary. Where the launching thread blocked in a
    // host synchronization between two launches in most periods (the
    // per-step `loss.item()`, logging, a barrier); among those, or without
    // any, where the stream idled longest before a kernel, summed over the
    // periods.
    let syncs = sync_call_ends(t, ctx);
    let launches: Vec<Option<i64>> = main_ids.iter().map(|&id| ctx.launch_start(t, id)).collect();
    let mut synced = vec![0u32; p];
    let mut idle = vec![0i64; p];
    let mut seen = vec![0i64; p];
    for j in a.max(1)..b {
        let k = (j - a) % p;
        seen[k] += 1;
        if let (Some(x), Some(y)) = (launches[j - 1], launches[j]) {
            let at = syncs.partition_point(|&e| e <= x);
            if syncs.get(at).is_some_and(|&e| e <= y) {
                synced[k] += 1;
            }
        }
        let prev_end = evs[..j]
            .iter()
            .rev()
            .take(4)
            .map(|e| e.2)
            .max()
            .unwrap_or(evs[j].1);
        idle[k] = idle[k].saturating_add(evs[j].1.saturating_sub(prev_end).max(0));
    }
    let cycles_seen = ((b - a) / p).max(1) as u32;
    let score: Vec<(u32, i64)> = (0..p)
        .map(|k| {
            let s = if synced[k] * 5 >= cycles_seen * 4 {
                synced[k]
            } else {
                0
            };
            // Mean gap, so a phase seen once less is not penalized.
            (s, idle[k] / seen[k].max(1))
        })
        .collect();
    let phase = (0..p)
        .max_by_key(|&k| (score[k], std::cmp::Reverse(k)))
        .unwrap_or(0);
    let first = a + phase;
    let cycles = (b - first) / p;
    let rep = Repeating {
        start_ns: evs[a].1,
        period: p,
        cycles,
        // Decided below once the periods are known.
        first_is_warmup: true,
    };
    if cycles < MIN_CYCLES {
        return (None, Some(rep));
    }
    let steps = (0..cycles)
        .map(|k| {
            let i = first + k * p;
            let j = i + p;
            let start_ns = evs[i].1;
            // Up to the next period's first kernel; the last full period ends
            // at the next kernel only when a new period begins there.
            let end_ns = if j < b || (j < evs.len() && seq[j] == seq[i]) {
                evs[j].1
            } else {
                evs[i..j].iter().map(|e| e.2).max().unwrap_or(evs[j - 1].2)
            };
            Step {
                number: k as i64,
                name: format!("step {k}"),
                start_ns,
                end_ns,
                host_time: false,
                source: StepSource::Repetition,
            }
        })
        .collect::<Vec<Step>>();
    // A warm-up step that launched other kernels ran just before the
    // repetition (at least half a period of kernels, closer to it than a
    // period lasts): the first full period is already steady. Otherwise
    // the first full period is the warm-up.
    let mut durs: Vec<i64> = steps
        .iter()
        .map(|s| s.end_ns.saturating_sub(s.start_ns))
        .collect();
    durs.sort_unstable();
    let median = durs.get(durs.len() / 2).copied().unwrap_or(0);
    let warmup_before = a * 2 >= p && a > 0 && evs[a].1 - evs[a - 1].2 < median;
    let first_is_warmup = !warmup_before || too_slow(&steps, median);
    (
        Some(steps),
        Some(Repeating {
            first_is_warmup,
            ..rep
        }),
    )
}

/// Whether the first full period lasts more than twice the median period
/// (first-time allocations, lazy initialization, NCCL setup).
fn too_slow(steps: &[Step], median: i64) -> bool {
    steps
        .first()
        .is_some_and(|f| f.end_ns.saturating_sub(f.start_ns) > median.saturating_mul(2))
}

/// Index of the step containing `t` in steps sorted by start, or `NONE`.
pub fn step_at(steps: &[Step], t: i64) -> u32 {
    let k = steps.partition_point(|s| s.start_ns <= t);
    if k > 0 && t < steps[k - 1].end_ns {
        (k - 1) as u32
    } else {
        NONE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_names() {
        assert_eq!(profiler_step_number("ProfilerStep#12"), Some(12));
        for n in ["step 3", "step_3", "train_step", "Step#4", "train step 7"] {
            assert!(is_step_name(n), "{n}");
        }
        for n in ["stepper", "forward", "optimizer.step"] {
            assert!(!is_step_name(n), "{n}");
        }
    }
}
