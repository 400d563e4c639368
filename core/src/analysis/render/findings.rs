//! Findings in text and markdown: the ranked table (`report --full`,
//! markdown) and the "fix first:" lines of the first screen.

use super::super::findings::{self, Finding};
use super::super::report::Report;
use super::{ms, Table};

/// Where a finding is, in words: "rank 0, step 5, train.py:42 (main), kernel".
pub fn where_words(f: &Finding) -> String {
    let w = &f.where_;
    let mut v = vec![format!("rank {}", w.rank)];
    if let Some(s) = w.step {
        v.push(format!("step {s}"));
    }
    if !w.line.is_empty() {
        v.push(w.line.clone());
    }
    if !w.kernel.is_empty() {
        v.push(super::short(&super::kernel_name(&w.kernel), 48));
    }
    v.join(", ")
}

/// The kind in words.
pub fn kind_words(kind: &str) -> &str {
    match kind {
        "sync" => "host sync",
        "exposed_collective" => "exposed collective",
        "late_prefetch" => "late prefetch",
        "straggler" => "straggler rank",
        "host_idle" => "GPU idle caused by the host",
        "launch_bound" => "launch-bound stretches",
        "fp32_gemm" => "fp32 GEMM without tensor cores",
        "pageable_copy" => "pageable copies",
        other => other,
    }
}

/// The ranked findings (none: no table).
pub(super) fn table(r: &Report) -> Option<Table> {
    if r.findings.is_empty() {
        return None;
    }
    let rows = r
        .findings
        .iter()
        .enumerate()
        .map(|(i, f)| {
            vec![
                (i + 1).to_string(),
                kind_words(&f.kind).to_string(),
                where_words(f),
                f.predicted_gain_us.map_or("not predicted".into(), ms),
                f.predicted_gain_pct
                    .map_or("-".into(), |p| format!("{p:.1}")),
                ms(f.cost_per_step_us),
                if f.beyond_noise {
                    format!("yes (±{})", ms(f.noise_us))
                } else {
                    format!("no (±{})", ms(f.noise_us))
                },
                f.evidence.clone(),
                f.prediction.clone(),
            ]
        })
        .collect();
    Some(Table {
        title:
            "Findings, ranked by the step time each fix saves (what-if predicted; headline window)"
                .into(),
        headers: vec![
            "#",
            "finding",
            "where",
            "predicted gain ms/step",
            "gain %",
            "cost ms/step",
            "beyond noise",
            "evidence",
            "prediction",
        ],
        rows,
    })
}

/// "fix first:" lines for the first screen: up to three findings whose
/// predicted gain is beyond noise; one line saying none is when findings
/// exist but none is; nothing without findings.
pub(super) fn fix_first_lines(r: &Report) -> Vec<String> {
    if r.findings.is_empty() {
        return Vec::new();
    }
    let top = findings::fix_first(r, 3);
    if top.is_empty() {
        return vec![format!(
            "fix first: no predicted gain beyond noise ({} finding(s) with --full)",
            r.findings.len()
        )];
    }
    top.iter()
        .enumerate()
        .map(|(i, f)| {
            format!(
                "fix first {}: {} at {}: saves {} ({})",
                i + 1,
                kind_words(&f.kind),
                where_words(f),
                f.gain_words(),
                f.prediction
            )
        })
        .collect()
}
