//! Text, markdown and JSON of a [`WhatIfReport`].

use super::super::render::{markdown_of, pct, text_of, Table};
use super::WhatIfReport;

fn ms(us: f64) -> String {
    format!("{:.2}", us / 1000.0)
}

fn opt_ms(us: Option<f64>) -> String {
    us.map_or("-".into(), ms)
}

fn header(r: &WhatIfReport) -> Vec<String> {
    let mut v = vec![
        "streamscope whatif".into(),
        format!("  changes: {}", r.changes),
        format!(
            "  consistency: the unchanged replay reproduces every measured step within {:.3} % (graph: {} nodes, {} edges)",
            r.consistency_max_error_pct, r.graph_nodes, r.graph_edges
        ),
    ];
    let memory: Vec<String> = r
        .ranks
        .iter()
        .filter_map(|k| {
            k.prefetch_peak_delta_bytes
                .map(|b| format!("rank {} +{:.2} GB", k.rank, b as f64 / 1e9))
        })
        .collect();
    if !memory.is_empty() {
        v.push(format!(
            "  memory: the deeper prefetch holds one more gathered unit per unit of depth at the peak (an estimate from the largest all-gather): {}",
            memory.join(", ")
        ));
    }
    v
}

fn tables(r: &WhatIfReport) -> Vec<Table> {
    let mut out = vec![Table {
        title: "Step time per rank (median over the headline window's steps; mean: the steady pace, the GPU's time from the window's first step to the step after it)".into(),
        headers: vec![
            "rank",
            "steps",
            "measured ms",
            "predicted ms",
            "change %",
            "mean measured ms",
            "mean predicted ms",
            "mean change %",
        ],
        rows: r
            .ranks
            .iter()
            .map(|k| {
                let change = match (k.measured_median_step_us, k.predicted_median_step_us) {
                    (Some(m), Some(p)) if m > 0.0 => format!("{:+.1}", 100.0 * (p - m) / m),
                    _ => "-".into(),
                };
                vec![
                    k.rank.to_string(),
                    format!("{} ({})", k.steps.len(), k.step_source),
                    opt_ms(k.measured_median_step_us),
                    opt_ms(k.predicted_median_step_us),
                    change,
                    opt_ms(k.measured_mean_step_us),
                    opt_ms(k.predicted_mean_step_us),
                    match (k.measured_mean_step_us, k.predicted_mean_step_us) {
                        (Some(m), Some(p)) if m > 0.0 => format!("{:+.1}", 100.0 * (p - m) / m),
                        _ => "-".into(),
                    },
                ]
            })
            .collect(),
    }];
    out.push(Table {
        title: "Per rank and step: measured vs predicted (overlap %, exposed communication), critical path %".into(),
        headers: vec![
            "rank",
            "step",
            "measured ms",
            "predicted ms",
            "replay err %",
            "overlap % m/p",
            "exposed comm ms m/p",
            "path compute/comm/host/sync %",
        ],
        rows: r
            .ranks
            .iter()
            .flat_map(|k| &k.steps)
            .map(|s| {
                let c = &s.critical_path;
                vec![
                    s.rank.to_string(),
                    format!("{}{}", s.step, if s.in_window { "" } else { " (warm-up)" }),
                    ms(s.measured_step_us),
                    ms(s.predicted_step_us),
                    format!("{:.3}", s.replay_error_pct),
                    format!(
                        "{} / {}",
                        pct(s.measured_overlap_pct),
                        pct(s.predicted_overlap_pct)
                    ),
                    format!(
                        "{} / {}",
                        ms(s.measured_exposed_comm_us),
                        ms(s.predicted_exposed_comm_us)
                    ),
                    format!(
                        "{:.0} / {:.0} / {:.0} / {:.0}",
                        c.compute_pct, c.communication_pct, c.host_pct, c.sync_pct
                    ),
                ]
            })
            .collect(),
    });
    let regime_rows: Vec<Vec<String>> = r
        .ranks
        .iter()
        .flat_map(|k| &k.steps)
        .filter(|s| s.in_window)
        .flat_map(|s| {
            s.regimes.iter().map(move |g| {
                let ratio = |x: Option<f64>| x.map_or("-".into(), |v| format!("{v:.2}"));
                vec![
                    s.rank.to_string(),
                    s.step.to_string(),
                    g.collective.clone(),
                    g.count.to_string(),
                    format!("{} / {}", ms(g.measured_comm_us), ms(g.measured_compute_us)),
                    ratio(g.measured_ratio),
                    format!(
                        "{} / {}",
                        ms(g.predicted_comm_us),
                        ms(g.predicted_compute_us)
                    ),
                    ratio(g.predicted_ratio),
                    format!("{} of {}", g.past_wall, g.count),
                    g.regime.clone(),
                ]
            })
        })
        .collect();
    if !regime_rows.is_empty() {
        out.push(Table {
            title: "Regime per collective (t_comm / t_compute; > 1: past the communication wall)"
                .into(),
            headers: vec![
                "rank",
                "step",
                "collective",
                "kernels",
                "measured comm / compute ms",
                "ratio",
                "predicted comm / compute ms",
                "ratio",
                "past the wall",
                "regime",
            ],
            rows: regime_rows,
        });
    }
    out
}

fn with_notes(mut s: String, r: &WhatIfReport, prefix: &str) -> String {
    for n in &r.notes {
        s.push_str(&format!("{prefix}{n}\n"));
    }
    s
}

/// Aligned text tables.
pub fn text(r: &WhatIfReport) -> String {
    with_notes(text_of(&header(r), &tables(r), &[]), r, "note: ")
}

/// GitHub-flavoured markdown.
pub fn markdown(r: &WhatIfReport) -> String {
    let mut s = markdown_of("streamscope whatif", &header(r)[1..], &tables(r), &[]);
    if !r.notes.is_empty() {
        s.push_str("\nNotes:\n\n");
        s = with_notes(s, r, "- ");
    }
    s
}

/// Pretty JSON of the whole replay.
pub fn json(r: &WhatIfReport) -> String {
    serde_json::to_string_pretty(r).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}
