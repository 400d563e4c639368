//! The report, comparison and replay of paths on disk, as the CLI's
//! `report`, `compare` and `whatif` make them, with the same checks and
//! the same error messages: one implementation for the CLI and the Python
//! module (python/).
//!
//! Errors are [`anyhow::Error`]s whose [`error_line`] is the CLI's
//! one-line message.
//!
//! Two ranks belong to different runs when they carry the same rank number,
//! or when their wall-clock spans (first event to last, from the trace's
//! realtime clock reading) do not overlap: the ranks of one job run at the
//! same time. Docs: docs/METRICS.md, "Which files make one run".

use std::path::PathBuf;

use anyhow::{bail, Context};

use super::compare::{self, Comparison};
use super::streamed::{self, Summary};
use super::whatif::{self, WhatIfOptions, WhatIfReport};
use super::{analyze, findings, AnalysisOptions, RankReport, Report};
use crate::diagnostic::Kind;
use crate::load::{self, KeepArgs};
use crate::model::Trace;

/// Progress of a multi-file analysis: `(files done, files in all)`.
pub type Progress<'a> = &'a (dyn Fn(usize, usize) + Sync);

/// Why a `--steps` range does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StepsError {
    /// A step of `A..B` that is not a number.
    #[error("bad step number {text:?}: {source}")]
    Number {
        /// The text given.
        text: String,
        /// Why it is not a number.
        source: std::num::ParseIntError,
    },
    /// `B..A` with B after A.
    #[error("empty step range {0:?}")]
    Empty(String),
}

/// "A..B", "A..=B" or "A": the inclusive step numbers of `report --steps`.
pub fn parse_steps(s: &str) -> Result<(i64, i64), StepsError> {
    let num = |x: &str| {
        x.trim()
            .parse::<i64>()
            .map_err(|source| StepsError::Number {
                text: x.to_string(),
                source,
            })
    };
    let (a, b) = match s.split_once("..") {
        Some((a, b)) => (num(a)?, num(b.trim_start_matches('='))?),
        None => {
            let a = num(s)?;
            (a, a)
        }
    };
    if b < a {
        return Err(StepsError::Empty(s.to_string()));
    }
    Ok((a, b))
}

/// The analysis options of `report`'s flags, checked (thresholds in µs).
pub fn options(
    rank: Option<u32>,
    steps: Option<(i64, i64)>,
    sync_idle_threshold_us: f64,
    kernel_wait_us: f64,
) -> anyhow::Result<AnalysisOptions> {
    if sync_idle_threshold_us.is_nan() || sync_idle_threshold_us < 0.0 {
        bail!("--sync-idle-threshold-us must be a non-negative number");
    }
    if kernel_wait_us.is_nan() || kernel_wait_us < 0.0 {
        bail!("--kernel-wait-us must be a non-negative number");
    }
    if let Some((a, b)) = steps {
        if b < a {
            bail!("empty step range {a}..{b}");
        }
    }
    Ok(AnalysisOptions {
        rank,
        steps,
        sync_gpu_idle_threshold_us: sync_idle_threshold_us,
        consecutive_kernel_delay_ns: (kernel_wait_us * 1000.0).round() as i64,
        ..AnalysisOptions::default()
    })
}

/// Whether every input is a summary (some but not all is an error).
pub fn summary_inputs(paths: &[PathBuf]) -> anyhow::Result<bool> {
    let is: Vec<bool> = paths.iter().map(|p| Summary::is_summary_file(p)).collect();
    match (is.iter().all(|&x| x), is.iter().any(|&x| x)) {
        (true, _) => Ok(true),
        (false, false) => Ok(false),
        (false, true) => bail!(
            "{}: summaries and trace files mixed; give either summaries (to merge) or traces",
            display_paths(paths)
        ),
    }
}

/// Rank files a report loads whole for its findings' replays.
pub const MAX_REPLAY_FILES: usize = 16;

/// The report of `paths` (traces or summaries) under `opts`, with its
/// findings: one file is loaded whole, several are analyzed one file at a
/// time per core.
fn build_report(
    paths: &[PathBuf],
    opts: &AnalysisOptions,
    progress: Progress,
) -> anyhow::Result<Report> {
    let what = || format!("loading {}", display_paths(paths));
    if summary_inputs(paths)? {
        let mut r = streamed::merge_summaries(paths, opts).with_context(what)?;
        findings::attach(&mut r, None);
        note_no_gpu_work(&mut r, paths);
        return Ok(r);
    }
    let files = load::sources(paths).with_context(what)?;
    if files.len() < 2 {
        // Only analyzed: a Kineto file's arguments no analysis reads are skipped.
        let trace = load::load_paths_keeping(paths, KeepArgs::Analysis).with_context(what)?;
        let mut report = analyze(&trace, opts);
        findings::attach(&mut report, Some(&trace));
        return Ok(report);
    }
    let mut report = streamed::analyze_files(paths, opts, progress).with_context(what)?;
    // The findings' gains come from the what-if replay, which needs every
    // rank's events at once: loaded whole up to MAX_REPLAY_FILES files.
    if files.len() <= MAX_REPLAY_FILES {
        let trace = load::load_paths_keeping(paths, KeepArgs::Analysis).with_context(what)?;
        findings::attach(&mut report, Some(&trace));
    } else {
        findings::attach_or(
            &mut report,
            None,
            &format!(
                "{} rank files: the replay loads the whole job, done up to {MAX_REPLAY_FILES} files (`streamscope whatif` replays any)",
                files.len()
            ),
        );
    }
    note_no_gpu_work(&mut report, paths);
    Ok(report)
}

/// A report of several files (or summaries) without a rank says why, as
/// one file's analysis does.
fn note_no_gpu_work(report: &mut Report, paths: &[PathBuf]) {
    if report.ranks.is_empty() && report.diagnostics.iter().all(|d| d.kind != Kind::NoGpuWork) {
        let files = display_paths(paths);
        report.diagnostics.push(super::no_gpu_work(&files));
    }
}

/// `report PATHS...`: the report, or an error when it breaks its
/// invariants, mixes runs (unless `merge`), or when `opts.rank` /
/// `opts.steps` select nothing.
pub fn report(
    paths: &[PathBuf],
    opts: &AnalysisOptions,
    merge: bool,
    progress: Progress,
) -> anyhow::Result<Report> {
    let report = build_report(paths, opts, progress)?;
    if let Err(why) = super::invariants::check(&report) {
        bail!(
            "{}: the report breaks its invariants ({why}): damaged input or a bug; not printed",
            display_paths(paths)
        );
    }
    if !merge {
        refuse_mixed_runs(paths, &report)?;
    }
    if let Some(r) = opts.rank {
        if report.ranks.is_empty() {
            bail!("rank {r} is not in {}", display_paths(paths));
        }
    }
    if let Some((a, b)) = opts.steps {
        // A selection that found no step is an error that says why, never
        // a report of zeros.
        let empty = report.ranks.iter().any(|k| k.window.steps.is_empty());
        if empty {
            let why: Vec<&str> = report
                .diagnostics
                .iter()
                .filter(|d| d.kind == Kind::StepsUnavailable)
                .map(|d| d.detail.split_once(": ").map_or(d.detail.as_str(), |x| x.1))
                .collect();
            bail!("--steps {a}..{b} selects nothing: {}", why.join("; "));
        }
    }
    Ok(report)
}

/// `compare CONTROL TEST`: the two runs side by side (only `rank`, if given).
pub fn compare(control: &PathBuf, test: &PathBuf, rank: Option<u32>) -> anyhow::Result<Comparison> {
    // Only analyzed: a Kineto file's arguments no analysis reads are skipped.
    let load = |p: &PathBuf| {
        load::load_paths_keeping(std::slice::from_ref(p), KeepArgs::Analysis)
            .with_context(|| format!("loading {}", p.display()))
    };
    let (a, b) = (load(control)?, load(test)?);
    let opts = AnalysisOptions {
        rank,
        ..AnalysisOptions::default()
    };
    let labels = (control.display().to_string(), test.display().to_string());
    let c = compare::compare(&a, &b, (&labels.0, &labels.1), &opts);
    if c.ranks.is_empty() {
        match rank {
            Some(r) => bail!("rank {r} is not in both {} and {}", labels.0, labels.1),
            None => bail!("{} and {} have no rank in common", labels.0, labels.1),
        }
    }
    Ok(c)
}

/// `whatif PATHS...` on their loaded `trace` (loaded keeping
/// [`KeepArgs::Analysis`]): the steps replayed with the changes of `opts`.
pub fn whatif(
    paths: &[PathBuf],
    trace: &Trace,
    opts: &WhatIfOptions,
) -> anyhow::Result<WhatIfReport> {
    match whatif::whatif(trace, opts) {
        Ok(r) => Ok(r),
        Err(why) => {
            let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
            bail!("{}: {why}", names.join(" "))
        }
    }
}

/// Why the ranks of `report` cannot be one run, if they cannot.
pub fn mixed_runs(report: &Report) -> Option<String> {
    let ranks = &report.ranks;
    // Two files claiming one rank (the load numbers the second anew).
    if let Some(d) = report
        .diagnostics
        .iter()
        .find(|d| d.kind == Kind::DuplicateRank)
    {
        let detail = d
            .detail
            .split(": two runs mixed?")
            .next()
            .unwrap_or(&d.detail);
        return Some(detail.to_string());
    }
    // The spans, earliest first: one that starts after every earlier one
    // ended is a run of its own.
    let mut spans: Vec<(i64, i64, &RankReport)> = ranks
        .iter()
        .filter_map(|r| Some((r.first_event_unix_ns?, r.last_event_unix_ns?, r)))
        .collect();
    spans.sort_by_key(|s| (s.0, s.1));
    let mut end: Option<(i64, &RankReport)> = None;
    for &(a, b, r) in &spans {
        if let Some((e, before)) = end {
            if a > e {
                return Some(format!(
                    "rank {} ({}) started {:.1} s after rank {} ({}) had ended",
                    r.rank,
                    where_(r),
                    (a - e) as f64 / 1e9,
                    before.rank,
                    where_(before)
                ));
            }
        }
        if end.is_none_or(|(e, _)| b > e) {
            end = Some((b, r));
        }
    }
    None
}

/// "host vm" of a rank ("host unknown" without one).
fn where_(r: &RankReport) -> String {
    if r.host.is_empty() {
        "host unknown".into()
    } else {
        format!("host {}", r.host)
    }
}

/// Refuses a report of several arguments whose ranks are not one run.
pub fn refuse_mixed_runs(paths: &[PathBuf], report: &Report) -> anyhow::Result<()> {
    if paths.len() < 2 {
        return Ok(());
    }
    if let Some(why) = mixed_runs(report) {
        let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        let (a, b) = (&names[0], &names[names.len() - 1]);
        bail!(
            "{} hold traces of different runs: {why}; to put two runs side by side: \
             streamscope compare {a} {b}; to analyze them as one job anyway: --merge",
            names.join(", ")
        );
    }
    Ok(())
}

/// One line: the error and its causes, without repeating what the outer
/// message already says (the CLI's `streamscope: error: LINE`).
pub fn error_line(e: &anyhow::Error) -> String {
    let mut line = e.to_string();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if line.contains(&c) {
            continue;
        }
        // "loading X" then "X: No such file": the path once.
        let c = match c.split_once(": ") {
            Some((head, rest)) if line.ends_with(head) => rest.to_string(),
            _ => c,
        };
        line.push_str(": ");
        line.push_str(&c);
    }
    line.replace('\n', " ")
}

/// The paths, comma-separated.
pub fn display_paths(p: &[PathBuf]) -> String {
    p.iter()
        .map(|x| x.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_line_says_the_path_once() {
        let missing = PathBuf::from("no/such/trace.pftrace");
        let e = report(
            std::slice::from_ref(&missing),
            &AnalysisOptions::default(),
            false,
            &|_, _| {},
        )
        .err()
        .map(|e| error_line(&e))
        .unwrap_or_default();
        assert!(e.starts_with("loading no/such/trace.pftrace: "), "{e}");
        assert_eq!(e.matches("no/such/trace.pftrace").count(), 1, "{e}");
        assert!(!e.contains('\n'));
    }

    #[test]
    fn options_are_checked() {
        assert!(options(None, None, -1.0, 30.0).is_err());
        assert!(options(None, None, 50.0, f64::NAN).is_err());
        assert!(options(None, Some((6, 4)), 50.0, 30.0).is_err());
        let o = options(Some(1), Some((4, 6)), 10.0, 2.5).ok();
        assert_eq!(
            o.as_ref().map(|o| o.consecutive_kernel_delay_ns),
            Some(2500)
        );
        assert_eq!(o.map(|o| (o.rank, o.steps)), Some((Some(1), Some((4, 6)))));
        assert_eq!(parse_steps("4..=6"), Ok((4, 6)));
        assert!(parse_steps("6..4").is_err());
    }
}
