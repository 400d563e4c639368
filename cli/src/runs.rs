//! `report A B`: traces of different runs are refused unless `--merge`.
//!
//! Two ranks belong to different runs when they carry the same rank number,
//! or when their wall-clock spans (first event to last, from the trace's
//! realtime clock reading) do not overlap: the ranks of one job run at the
//! same time. Docs: docs/METRICS.md, "Which files make one run".

use std::path::PathBuf;

use anyhow::bail;
use streamscope_core::analysis::{RankReport, Report};

/// Why the ranks of `report` cannot be one run, if they cannot.
pub fn mixed_runs(report: &Report) -> Option<String> {
    let ranks = &report.ranks;
    // Two files claiming one rank (the load numbers the second anew).
    if let Some(d) = report
        .diagnostics
        .iter()
        .find(|d| d.kind == streamscope_core::diagnostic::Kind::DuplicateRank)
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
