//! Two runs side by side: a control (A) and a test (B) trace of the same
//! job, each analyzed as `report` does, then compared per rank (step time,
//! overlap, exposed communication, idle) and per kernel and collective
//! (time per step, sorted by how much the change moved it).
//!
//! HTA's trace diff is the reference for the kernel table (counts and
//! durations of each name in both traces, and their differences); this one
//! normalizes per step of each run's headline window, so runs of different
//! lengths compare, and averages over the ranks both runs have.

use std::collections::BTreeMap;

use serde::Serialize;

use super::report::Report;
use super::{analyze, rank, AnalysisOptions};
use crate::diagnostic::{Diagnostic, Kind};
use crate::model::{SliceClass, Trace};

/// One run's headline figures for one rank.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct Side {
    /// Steps in the headline window (0: the window is not made of steps).
    pub steps: u64,
    /// Median step duration, µs (None without steps).
    pub step_us: Option<f64>,
    /// Twice the standard error of that median, µs (its noise).
    pub step_noise_us: Option<f64>,
    /// Overlap of communication with compute, % (HTA's definition).
    pub overlap_pct: Option<f64>,
    /// Communication not hidden under compute, µs per step (per window
    /// without steps).
    pub exposed_comm_us_per_step: f64,
    /// GPU idle, % of the window.
    pub idle_pct: Option<f64>,
}

/// One rank in both runs.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct RankDiff {
    /// The rank number.
    pub rank: u32,
    /// The control run (A).
    pub control: Side,
    /// The test run (B).
    pub test: Side,
    /// Test minus control median step time, µs.
    pub step_delta_us: Option<f64>,
    /// The same, % of the control.
    pub step_delta_pct: Option<f64>,
    /// The noise of the difference: both medians' noise combined
    /// (root of the sum of squares), µs.
    pub step_delta_noise_us: Option<f64>,
    /// Whether |Δ step| exceeds its noise (None without steps): a
    /// difference within noise is no difference.
    pub step_delta_beyond_noise: Option<bool>,
}

/// One kernel name (or collective kind), per step of each run's headline
/// window, averaged over the ranks compared.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct ItemDiff {
    /// Kernel name, or collective kind for the collectives table.
    pub name: String,
    /// "compute", "communication", "memory" (kernels), or "collective".
    pub class: String,
    /// Instances per step and rank in the control run.
    pub control_count: f64,
    /// Instances per step and rank in the test run.
    pub test_count: f64,
    /// GPU time per step and rank in the control run, µs.
    pub control_us: f64,
    /// GPU time per step and rank in the test run, µs.
    pub test_us: f64,
    /// `test_us - control_us`.
    pub delta_us: f64,
}

/// The comparison of two runs.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct Comparison {
    /// What the control run was loaded from.
    pub control: String,
    /// What the test run was loaded from.
    pub test: String,
    /// Ranks present in both runs, by rank number.
    pub ranks: Vec<RankDiff>,
    /// Kernels by name, the largest |delta| first.
    pub kernels: Vec<ItemDiff>,
    /// Collectives by kind, the largest |delta| first.
    pub collectives: Vec<ItemDiff>,
    /// Both runs' diagnostics (files named) and the comparison's own.
    pub diagnostics: Vec<Diagnostic>,
    /// Laid side by side ([`side_by_side`]): the step number that starts
    /// at the same time in both runs (None: the first steps or windows).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aligned_step: Option<i64>,
}

/// Per-rank, per-name accumulation: (count, total ns).
type PerName = BTreeMap<(String, &'static str), (u64, i64)>;

/// Kernel time by name inside each rank's headline window, per rank.
fn kernels_by_rank(t: &Trace, report: &Report, opts: &AnalysisOptions) -> BTreeMap<u32, PerName> {
    let mut out: BTreeMap<u32, PerName> = BTreeMap::new();
    for ctx in rank::build(t, opts.hta_rounding) {
        let Some(r) = report
            .ranks
            .iter()
            .find(|r| r.process == ctx.process && r.rank == ctx.rank)
        else {
            continue;
        };
        let (Some(a), Some(b)) = (r.window.start_ns, r.window.end_ns) else {
            continue;
        };
        let names = out.entry(ctx.rank).or_default();
        for ev in &ctx.gpu {
            if ev.s < a || ev.s >= b || ev.class == SliceClass::None {
                continue;
            }
            let name = t.str(t.slices().name()[ev.id as usize]).to_string();
            let e = names.entry((name, ev.class.name())).or_default();
            e.0 += 1;
            e.1 = e.1.saturating_add(ev.e.saturating_sub(ev.s).max(0));
        }
    }
    out
}

fn side(report: &Report, rank: u32) -> Option<Side> {
    let r = report.ranks.iter().find(|r| r.rank == rank)?;
    let d: Vec<f64> = report.window_steps(rank).map(|s| s.duration_us).collect();
    let steps = d.len() as u64;
    Some(Side {
        steps,
        step_us: report.median_step_us(rank),
        step_noise_us: (!d.is_empty()).then(|| super::findings::median_noise(&d)),
        overlap_pct: r.breakdown.overlap_pct,
        exposed_comm_us_per_step: r.breakdown.exposed_comm_us / steps.max(1) as f64,
        idle_pct: r.breakdown.idle_pct,
    })
}

/// Steps of `rank`'s headline window, at least 1 (a window without steps
/// counts as one).
fn steps_of(report: &Report, rank: u32) -> f64 {
    side(report, rank).map_or(1, |s| s.steps.max(1)) as f64
}

fn sorted(mut items: Vec<ItemDiff>) -> Vec<ItemDiff> {
    items.sort_by(|x, y| {
        y.delta_us
            .abs()
            .total_cmp(&x.delta_us.abs())
            .then_with(|| x.name.cmp(&y.name))
    });
    items
}

/// Compares `test` (B) against `control` (A). `labels` name them (the
/// paths given). Ranks are matched by number; a rank in one run only is
/// named in a diagnostic and left out of the averages.
pub fn compare(
    control: &Trace,
    test: &Trace,
    labels: (&str, &str),
    opts: &AnalysisOptions,
) -> Comparison {
    let ra = analyze(control, opts);
    let rb = analyze(test, opts);
    compare_reports((control, &ra), (test, &rb), labels, opts)
}

/// [`compare`] over reports already made with `opts`.
fn compare_reports(
    (control, ra): (&Trace, &Report),
    (test, rb): (&Trace, &Report),
    labels: (&str, &str),
    opts: &AnalysisOptions,
) -> Comparison {
    let mut diagnostics: Vec<Diagnostic> = Vec::new();
    for (label, r) in [(labels.0, ra), (labels.1, rb)] {
        for d in &r.diagnostics {
            let mut d = d.clone();
            if d.file.is_none() {
                d.file = Some(label.to_string());
            }
            diagnostics.push(d);
        }
    }
    let ranks_of = |r: &Report| -> Vec<u32> {
        let mut v: Vec<u32> = r.ranks.iter().map(|k| k.rank).collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    let (a_ranks, b_ranks) = (ranks_of(ra), ranks_of(rb));
    let both: Vec<u32> = a_ranks
        .iter()
        .copied()
        .filter(|r| b_ranks.contains(r))
        .collect();
    for (label, mine, other) in [
        (labels.0, &a_ranks, &b_ranks),
        (labels.1, &b_ranks, &a_ranks),
    ] {
        let only: Vec<String> = mine
            .iter()
            .filter(|r| !other.contains(r))
            .map(u32::to_string)
            .collect();
        if !only.is_empty() {
            diagnostics.push(
                Diagnostic::new(
                    Kind::NoSuchRank,
                    only.len() as u64,
                    format!(
                        "rank(s) {} only in this run: left out of the comparison",
                        only.join(", ")
                    ),
                )
                .in_file(label),
            );
        }
    }
    let ranks: Vec<RankDiff> = both
        .iter()
        .filter_map(|&rank| {
            let (a, b) = (side(ra, rank)?, side(rb, rank)?);
            let step_delta_us = a.step_us.zip(b.step_us).map(|(x, y)| y - x);
            let step_delta_pct = step_delta_us
                .zip(a.step_us)
                .and_then(|(d, x)| (x > 0.0).then(|| 100.0 * d / x));
            let noise = a
                .step_noise_us
                .zip(b.step_noise_us)
                .map(|(x, y)| x.hypot(y));
            Some(RankDiff {
                rank,
                control: a,
                test: b,
                step_delta_us,
                step_delta_pct,
                step_delta_noise_us: noise,
                step_delta_beyond_noise: step_delta_us.zip(noise).map(|(d, n)| d.abs() > n),
            })
        })
        .collect();
    let n = both.len().max(1) as f64;

    // Kernels: per name, mean over the ranks of (count, time) per step.
    let (ka, kb) = (
        kernels_by_rank(control, ra, opts),
        kernels_by_rank(test, rb, opts),
    );
    let mut items: BTreeMap<(String, &'static str), ItemDiff> = BTreeMap::new();
    for &rank in &both {
        for (is_test, per, report) in [(false, &ka, ra), (true, &kb, rb)] {
            let steps = steps_of(report, rank);
            for ((name, class), (count, ns)) in per.get(&rank).into_iter().flatten() {
                let it = items
                    .entry((name.clone(), class))
                    .or_insert_with(|| ItemDiff {
                        name: name.clone(),
                        class: class.to_string(),
                        ..Default::default()
                    });
                let (c, us) = (*count as f64 / steps / n, *ns as f64 / 1e3 / steps / n);
                if is_test {
                    it.test_count += c;
                    it.test_us += us;
                } else {
                    it.control_count += c;
                    it.control_us += us;
                }
            }
        }
    }
    let kernels = sorted(
        items
            .into_values()
            .map(|mut it| {
                it.delta_us = it.test_us - it.control_us;
                it
            })
            .collect(),
    );

    // Collectives: per kind, from each run's collective statistics.
    let mut coll: BTreeMap<String, ItemDiff> = BTreeMap::new();
    for (is_test, report) in [(false, ra), (true, rb)] {
        for c in report.collectives.iter().filter(|c| both.contains(&c.rank)) {
            let steps = steps_of(report, c.rank);
            let it = coll
                .entry(c.collective.clone())
                .or_insert_with(|| ItemDiff {
                    name: c.collective.clone(),
                    class: "collective".into(),
                    ..Default::default()
                });
            let (cnt, us) = (c.count as f64 / steps / n, c.total_us / steps / n);
            if is_test {
                it.test_count += cnt;
                it.test_us += us;
            } else {
                it.control_count += cnt;
                it.control_us += us;
            }
        }
    }
    let collectives = sorted(
        coll.into_values()
            .map(|mut it| {
                it.delta_us = it.test_us - it.control_us;
                it
            })
            .collect(),
    );
    if ranks.is_empty() {
        diagnostics.push(Diagnostic::new(
            Kind::NoSuchRank,
            1,
            "the two runs have no rank in common: nothing to compare",
        ));
    }
    Comparison {
        control: labels.0.to_string(),
        test: labels.1.to_string(),
        ranks,
        kernels,
        collectives,
        diagnostics,
        aligned_step: None,
    }
}

/// Rows of a kernel or collective table shown in text and markdown.
const TOP_ROWS: usize = 20;

fn ms(us: f64) -> String {
    format!("{:.3}", us / 1e3)
}

fn signed_ms(us: f64) -> String {
    format!("{:+.3}", us / 1e3)
}

fn tables(c: &Comparison) -> Vec<super::render::Table> {
    use super::render::{opt1, pct, Table};
    let opt_ms = |v: Option<f64>| v.map_or("-".to_string(), ms);
    let mut out = vec![Table {
        title: "Per rank (each run's headline window; A = control, B = test)".into(),
        headers: vec![
            "rank",
            "steps A",
            "steps B",
            "step A ms",
            "step B ms",
            "Δ step ms",
            "Δ step %",
            "Δ beyond noise",
            "overlap A %",
            "overlap B %",
            "exposed comm A ms/step",
            "exposed comm B ms/step",
            "idle A %",
            "idle B %",
        ],
        rows: c
            .ranks
            .iter()
            .map(|r| {
                vec![
                    r.rank.to_string(),
                    r.control.steps.to_string(),
                    r.test.steps.to_string(),
                    opt_ms(r.control.step_us),
                    opt_ms(r.test.step_us),
                    r.step_delta_us.map_or("-".into(), signed_ms),
                    opt1(r.step_delta_pct),
                    match (r.step_delta_beyond_noise, r.step_delta_noise_us) {
                        (Some(true), Some(n)) => format!("yes (±{})", ms(n)),
                        (Some(false), Some(n)) => format!("no (±{})", ms(n)),
                        _ => "-".into(),
                    },
                    pct(r.control.overlap_pct),
                    pct(r.test.overlap_pct),
                    ms(r.control.exposed_comm_us_per_step),
                    ms(r.test.exposed_comm_us_per_step),
                    pct(r.control.idle_pct),
                    pct(r.test.idle_pct),
                ]
            })
            .collect(),
    }];
    for (title, items) in [
        (
            "Kernels, per step and rank (largest change first)",
            &c.kernels,
        ),
        (
            "Collectives, per step and rank (largest change first)",
            &c.collectives,
        ),
    ] {
        if items.is_empty() {
            continue;
        }
        let shown = items.len().min(TOP_ROWS);
        out.push(Table {
            title: if items.len() > shown {
                format!(
                    "{title}; top {shown} of {} (all in --format json)",
                    items.len()
                )
            } else {
                title.to_string()
            },
            headers: vec![
                "Δ ms", "A ms", "B ms", "A count", "B count", "class", "name",
            ],
            rows: items
                .iter()
                .take(shown)
                .map(|k| {
                    vec![
                        signed_ms(k.delta_us),
                        ms(k.control_us),
                        ms(k.test_us),
                        format!("{:.1}", k.control_count),
                        format!("{:.1}", k.test_count),
                        k.class.clone(),
                        k.name.chars().take(100).collect(),
                    ]
                })
                .collect(),
        });
    }
    out
}

fn header(c: &Comparison) -> Vec<String> {
    vec![
        "streamscope compare".into(),
        format!("  A (control): {}", c.control),
        format!("  B (test):    {}", c.test),
    ]
}

/// Aligned text tables.
pub fn text(c: &Comparison) -> String {
    super::render::text_of(&header(c), &tables(c), &c.diagnostics)
}

/// GitHub-flavoured markdown.
pub fn markdown(c: &Comparison) -> String {
    super::render::markdown_of(
        "streamscope compare",
        &header(c)[1..],
        &tables(c),
        &c.diagnostics,
    )
}

/// Pretty JSON of the whole comparison.
pub fn json(c: &Comparison) -> String {
    serde_json::to_string_pretty(c).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

/// Starts of `rank`'s steps in its headline window, by step number.
fn step_starts(report: &Report, rank: u32) -> BTreeMap<i64, i64> {
    report
        .window_steps(rank)
        .map(|s| (s.step, s.start_ns))
        .collect()
}

/// How far to move the test run so that `rank`'s steps line up: step
/// `at` when both headline windows hold it, else the first step number
/// both hold, starts at the same time; without one, the first steps (or
/// the windows) start together.
fn alignment(ra: &Report, rb: &Report, rank: u32, at: Option<i64>) -> Option<(i64, Option<i64>)> {
    let (a, b) = (step_starts(ra, rank), step_starts(rb, rank));
    if let Some(n) = at.filter(|n| a.contains_key(n) && b.contains_key(n)) {
        return Some((a[&n].saturating_sub(b[&n]), Some(n)));
    }
    if let Some((n, ta)) = a.iter().find(|(n, _)| b.contains_key(n)) {
        return Some((ta.saturating_sub(b[n]), Some(*n)));
    }
    let first = |r: &Report, s: &BTreeMap<i64, i64>| {
        s.values().next().copied().or_else(|| {
            r.ranks
                .iter()
                .find(|k| k.rank == rank)
                .and_then(|k| k.window.start_ns)
        })
    };
    Some((first(ra, &a)?.saturating_sub(first(rb, &b)?), None))
}

/// Both runs in one trace for the viewer: the test run moved in time so
/// that step `align_at` (when given and in both headline windows), else
/// the first step number both hold, starts at the same time in both
/// (lowest rank both have, or `opts.rank`; see `alignment`), its
/// processes named "B · ..." after the control's "A · ...", and the
/// comparison. Without a rank in common the test run is not moved.
pub fn side_by_side(
    control: &Trace,
    test: &Trace,
    labels: (&str, &str),
    align_at: Option<i64>,
    opts: &AnalysisOptions,
) -> (Trace, Comparison) {
    let (ra, rb) = (analyze(control, opts), analyze(test, opts));
    let mut c = compare_reports((control, &ra), (test, &rb), labels, opts);
    let shift = c
        .ranks
        .first()
        .and_then(|r| alignment(&ra, &rb, r.rank, align_at));
    let mut merged = control.clone();
    let mut b = test.clone();
    b.shift_time(shift.map_or(0, |s| s.0));
    c.aligned_step = shift.and_then(|s| s.1);
    merged.mark_compare_run("A");
    b.mark_compare_run("B");
    merged.append(b);
    (merged, c)
}
