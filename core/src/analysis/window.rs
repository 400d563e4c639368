//! The headline window of a rank: which of its steps (or which part of
//! its GPU work) the headline figures cover (docs/METRICS.md, "Windows").

use super::rank::{self, Ev, RankCtx, NONE};
use super::steps::{self, StepSource};
use super::{names, AnalysisOptions, Window, WindowRule, WHOLE_TRACE};
use crate::diagnostic::{Diagnostic, Kind};
use crate::model::{SliceClass, Trace};

type Keep<'a> = Box<dyn Fn(&Ev) -> bool + 'a>;

/// Why `--steps` cannot select anything on a rank: its step list and source.
pub(crate) fn no_steps_reason(ctx: &RankCtx, detected: &steps::Detected) -> String {
    let rep = match &detected.repeating {
        Some(r) => format!(
            "; its kernels repeat with a period of {} kernels only {} full time(s), fewer than 3",
            r.period, r.cycles
        ),
        None => "; no repeating kernel sequence was found".to_string(),
    };
    format!(
        "rank {} has no steps: no ProfilerStep or NVTX step ranges, no optimizer-step markers{rep}",
        ctx.rank
    )
}

/// The window of the headline numbers, the test for GPU events in it, and
/// the index range of its steps in the rank's step list.
pub(crate) fn headline_window<'a>(
    t: &'a Trace,
    ctx: &'a RankCtx,
    detected: &steps::Detected,
    hta_filter: bool,
    opts: &AnalysisOptions,
    notes: &mut Vec<Diagnostic>,
) -> (Window, Keep<'a>, std::ops::Range<usize>) {
    let steps = &detected.steps;
    let source = detected.source;
    if let Some((a, b)) = opts.steps {
        let chosen: Vec<usize> = (0..steps.len())
            .filter(|&k| (a..=b).contains(&steps[k].number))
            .collect();
        let in_range: Vec<bool> = steps.iter().map(|s| (a..=b).contains(&s.number)).collect();
        let label = if steps.is_empty() {
            let why = no_steps_reason(ctx, detected);
            notes.push(Diagnostic::new(
                Kind::StepsUnavailable,
                1,
                format!("--steps {a}..{b}: {why}"),
            ));
            format!("steps {a}..{b}: none ({why})")
        } else if chosen.is_empty() {
            let have = step_list(&steps.iter().map(|s| s.number).collect::<Vec<_>>());
            let why = format!(
                "rank {} has steps {have} ({}), none in {a}..{b}",
                ctx.rank,
                source.name()
            );
            notes.push(Diagnostic::new(
                Kind::StepsUnavailable,
                1,
                format!("--steps {a}..{b}: {why}"),
            ));
            format!("steps {a}..{b}: none ({why})")
        } else {
            format!("steps {a}..{b} ({})", source.name())
        };
        let w = Window {
            rule: WindowRule::SelectedSteps,
            steps: chosen.iter().map(|&k| steps[k].number).collect(),
            start_ns: chosen.first().map(|&k| steps[k].start_ns),
            end_ns: chosen.last().map(|&k| steps[k].end_ns),
            label,
        };
        let range = match (chosen.first(), chosen.last()) {
            (Some(&f), Some(&l)) => f..l + 1,
            _ => 0..0,
        };
        return (
            w,
            Box::new(move |e: &Ev| in_range.get(e.step as usize).copied().unwrap_or(false)),
            range,
        );
    }
    let sl = t.slices();
    let last_step_start = if hta_filter && source == StepSource::ProfilerStep {
        let mut is_step = names::profiler_step(t);
        ctx.host
            .iter()
            .filter(|&&h| is_step.of(sl.name()[h as usize]))
            .map(|&h| sl.start_ns()[h as usize])
            .max()
    } else {
        None
    };
    if let Some(last) = last_step_start {
        let round = move |ns: i64| if ctx.rounded { rank::ceil_us(ns) } else { ns };
        let last_r = round(last);
        let kept: Vec<i64> = steps
            .iter()
            .filter(|s| round(s.start_ns) < last_r)
            .map(|s| s.number)
            .collect();
        let w = Window {
            rule: WindowRule::HtaSteps,
            start_ns: steps.first().map(|s| s.start_ns),
            end_ns: Some(last),
            label: format!("steps {} (HTA: last step dropped)", step_list(&kept)),
            steps: kept.clone(),
        };
        let keep = move |e: &Ev| match sl.correlation()[e.id as usize] {
            0 => true,
            c => ctx
                .corr
                .get(c)
                .is_some_and(|h| round(sl.start_ns()[h as usize]) < last_r),
        };
        return (w, Box::new(keep), 0..kept.len());
    }
    let warmup_outside = source == StepSource::Repetition
        && detected
            .repeating
            .as_ref()
            .is_some_and(|r| !r.first_is_warmup);
    if warmup_outside && !steps.is_empty() {
        // The kernels repeat from a point inside an earlier, different step
        // (the warm-up): every full period is the steady state.
        let kept: Vec<i64> = steps.iter().map(|s| s.number).collect();
        let w = Window {
            rule: WindowRule::SteadySteps,
            start_ns: steps.first().map(|s| s.start_ns),
            end_ns: steps.last().map(|s| s.end_ns),
            label: format!(
                "steps {} (repetition; the warm-up step before them repeats only in part)",
                step_list(&kept)
            ),
            steps: kept,
        };
        return (w, Box::new(|e: &Ev| e.step != NONE), 0..steps.len());
    }
    if steps.len() >= 2 {
        // The steady state: the first step (lazy initialization, allocator
        // growth, NCCL setup) and everything before it are start-up; with
        // graph replays after marker steps, everything up to the first
        // replay after them.
        let from0 = detected.steady_from.unwrap_or(1).clamp(1, steps.len() - 1);
        let from = slow_start(ctx, steps.len(), from0);
        let kept: Vec<i64> = steps[from..].iter().map(|s| s.number).collect();
        let mut why = if from0 == 1 {
            "first step dropped as warm-up".to_string()
        } else {
            "steps before them and the first replay dropped as warm-up and capture".to_string()
        };
        if from > from0 {
            why += &format!(
                ", and {} more over twice the median step (start-up: compilation, graph recording, allocator growth)",
                from.saturating_sub(from0)
            );
        }
        let w = Window {
            rule: WindowRule::SteadySteps,
            start_ns: steps.get(from).map(|s| s.start_ns),
            end_ns: steps.last().map(|s| s.end_ns),
            label: format!("steps {} ({}; {why})", step_list(&kept), source.name()),
            steps: kept,
        };
        let from32 = from as u32;
        return (
            w,
            Box::new(move |e: &Ev| e.step != NONE && e.step >= from32),
            from..steps.len(),
        );
    }
    if let [only] = steps.as_slice() {
        let w = Window {
            rule: WindowRule::Step,
            start_ns: Some(only.start_ns),
            end_ns: Some(only.end_ns),
            label: format!("step {} ({}; the only step)", only.number, source.name()),
            steps: vec![only.number],
        };
        return (w, Box::new(|e: &Ev| e.step == 0), 0..1);
    }
    // No steps: never start-up. From the first repeating kernel sequence,
    // else from the first collective.
    let first_comm = ctx
        .gpu
        .iter()
        .find(|e| e.class == SliceClass::Communication)
        .map(|e| e.s);
    let (rule, from, label) = match (&detected.repeating, first_comm) {
        (Some(r), _) => (
            WindowRule::FromFirstRepeat,
            Some(r.start_ns),
            "from the first repeating kernel sequence (no steps found)".to_string(),
        ),
        (None, Some(c)) => (
            WindowRule::FromFirstCollective,
            Some(c),
            "from the first collective (no steps found)".to_string(),
        ),
        (None, None) => (WindowRule::WholeTrace, None, WHOLE_TRACE.to_string()),
    };
    let w = Window {
        rule,
        steps: Vec::new(),
        start_ns: from,
        end_ns: None,
        label,
    };
    let from = from.unwrap_or(i64::MIN);
    (w, Box::new(move |e: &Ev| e.s >= from), 0..0)
}

/// The first steady step at or after `from`: leading steps whose GPU time
/// (first GPU start to the next step's) exceeds twice the median of the
/// steps from `from` on are start-up too (a compiled model's recording
/// steps, a CUDA graph's capture), at most a tenth of the steps.
pub(crate) fn slow_start(ctx: &RankCtx, n: usize, from: usize) -> usize {
    let mut first = vec![i64::MAX; n];
    for e in &ctx.gpu {
        if let Some(f) = first.get_mut(e.step as usize) {
            *f = (*f).min(e.s);
        }
    }
    let dur = |k: usize| -> Option<i64> {
        let (a, b) = (*first.get(k)?, *first.get(k + 1)?);
        (a != i64::MAX && b != i64::MAX).then_some(b - a)
    };
    let mut d: Vec<i64> = (from..n).filter_map(dur).collect();
    d.sort_unstable();
    let Some(&median) = d.get(d.len() / 2) else {
        return from;
    };
    let limit = from + ((n - from) / 10).max(1);
    let mut f = from;
    while f < limit && f + 2 < n && dur(f).is_some_and(|x| x > 2 * median) {
        f += 1;
    }
    f
}

/// "4, 5" or "2..5" for a run.
pub fn step_list(v: &[i64]) -> String {
    match v {
        [] => "none".to_string(),
        [a] => a.to_string(),
        [a, .., b] if v.windows(2).all(|w| w[0].checked_add(1) == Some(w[1])) && v.len() > 2 => {
            format!("{a}..{b}")
        }
        _ => v
            .iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(", "),
    }
}
