//! Training steps of a rank: ProfilerStep#N markers, NVTX step ranges, or
//! else the period of the main stream's kernel sequence.

use regex::Regex;

use super::rank::{RankCtx, NONE};
use crate::model::{SliceKind, StrId, Trace};

#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub number: i64,
    pub name: String,
    pub start_ns: i64,
    pub end_ns: i64,
    /// Bounds are host time (markers) rather than GPU time (repetition).
    pub host_time: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepSource {
    ProfilerStep,
    Nvtx,
    Repetition,
    None,
}

impl StepSource {
    pub fn name(self) -> &'static str {
        match self {
            StepSource::ProfilerStep => "ProfilerStep",
            StepSource::Nvtx => "nvtx",
            StepSource::Repetition => "repetition",
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

/// Finds the steps of a rank.
pub fn detect(t: &Trace, ctx: &RankCtx) -> (Vec<Step>, StepSource) {
    let sl = &t.slices;
    // Name ids that mark steps, decided once per distinct name.
    let mut decided: std::collections::HashMap<StrId, Option<(bool, Option<i64>)>> =
        Default::default();
    let re = nvtx_step_regex();
    let mut profiler: Vec<Step> = Vec::new();
    let mut nvtx: Vec<Step> = Vec::new();
    for &h in &ctx.host {
        let i = h as usize;
        if !matches!(sl.kind[i], SliceKind::CpuOp | SliceKind::Range) {
            continue;
        }
        let d = *decided.entry(sl.name[i]).or_insert_with(|| {
            let name = t.str(sl.name[i]);
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
            name: t.str(sl.name[i]).to_string(),
            start_ns: sl.start_ns[i],
            end_ns: sl.start_ns[i] + sl.dur_ns[i],
            host_time: true,
        };
        if is_profiler {
            profiler.push(step);
        } else if sl.kind[i] == SliceKind::Range {
            nvtx.push(step);
        }
    }
    if !profiler.is_empty() {
        return (outermost(profiler, false), StepSource::ProfilerStep);
    }
    if !nvtx.is_empty() {
        return (outermost(nvtx, true), StepSource::Nvtx);
    }
    match repetition(t, ctx) {
        Some(steps) => (steps, StepSource::Repetition),
        None => (Vec::new(), StepSource::None),
    }
}

/// Sorts by start, drops steps nested in (or duplicating) an earlier one,
/// and numbers unnumbered steps by order.
fn outermost(mut v: Vec<Step>, renumber: bool) -> Vec<Step> {
    v.sort_by_key(|s| (s.start_ns, std::cmp::Reverse(s.end_ns)));
    let mut out: Vec<Step> = Vec::with_capacity(v.len());
    let mut seen: std::collections::HashSet<i64> = Default::default();
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

/// Share of sampled positions `i` where `seq[i]` and `seq[i + p]` have the same name.
fn match_ratio(seq: &[(StrId, i64, i64)], p: usize) -> f64 {
    const SAMPLES: usize = 20_000;
    let span = seq.len() - p;
    if span <= SAMPLES {
        let same = (0..span).filter(|&i| seq[i].0 == seq[i + p].0).count();
        return same as f64 / span.max(1) as f64;
    }
    // Pseudo-random positions, so no stride can alias with the period.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut same = 0usize;
    for _ in 0..SAMPLES {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let i = ((x >> 33) as usize) % span;
        same += (seq[i].0 == seq[i + p].0) as usize;
    }
    same as f64 / SAMPLES as f64
}

/// Steps from the period of the GPU-event name sequence of the busiest
/// stream. Candidates are the recurrences of the first name; the best
/// match ratio wins (at least 95%), and among periods matching about as
/// well (within 0.2 points: multiples of the period do) the smallest.
/// A workload whose steps differ only in timing (forward and backward
/// launching the same kernels) can yield sub-step periods. Fewer than 3
/// repetitions are not taken as steps.
fn repetition(t: &Trace, ctx: &RankCtx) -> Option<Vec<Step>> {
    let mut per_stream = vec![0usize; ctx.streams.len()];
    for e in &ctx.gpu {
        per_stream[e.stream as usize] += 1;
    }
    let main = per_stream.iter().enumerate().max_by_key(|(_, c)| **c)?.0 as u16;
    let seq: Vec<(StrId, i64, i64)> = ctx
        .gpu
        .iter()
        .filter(|e| e.stream == main)
        .map(|e| (t.slices.name[e.id as usize], e.s, e.e))
        .collect();
    let n = seq.len();
    if n < 4 {
        return None;
    }
    let first = seq[0].0;
    let scored: Vec<(usize, f64)> = (1..=n / 2)
        .filter(|&k| seq[k].0 == first)
        .take(256)
        .map(|p| (p, match_ratio(&seq, p)))
        .collect();
    let best = scored.iter().map(|c| c.1).fold(0.0f64, f64::max);
    if best < 0.95 {
        return None;
    }
    let period = scored.iter().find(|c| c.1 >= best - 0.002)?.0;
    let count = n / period;
    if count < 3 {
        return None;
    }
    let steps = (0..count)
        .map(|k| {
            let start_ns = seq[k * period].1;
            let end_ns = if (k + 1) * period < n {
                seq[(k + 1) * period].1
            } else {
                seq[n - 1].2
            };
            Step {
                number: k as i64,
                name: format!("step {k}"),
                start_ns,
                end_ns,
                host_time: false,
            }
        })
        .collect();
    Some(steps)
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
