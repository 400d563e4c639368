//! The headline block at the top of a report: within [`WIDTH`] columns,
//! in ms. Per rank up to [`PER_RANK_MAX`] ranks, summarized past them.

use super::super::headline::RankHeadline;
use super::super::report::Report;
use super::{aligned, short, Table};

/// Columns the headline block fits in.
pub const WIDTH: usize = 100;
/// Ranks listed one by one; past this the block summarizes.
pub const PER_RANK_MAX: usize = 8;

fn ms(v: f64) -> String {
    super::ms(v * 1000.0)
}

/// A percentage with one decimal, "-" for none.
fn p1(v: Option<f64>) -> String {
    v.map_or("-".into(), |p| format!("{p:.1}"))
}

fn opt_ms(v: Option<f64>) -> String {
    v.map_or("-".into(), ms)
}

/// "33.6 (33.4-33.9)", or "-" without steps.
fn step_cell(h: &RankHeadline) -> String {
    match (h.median_step_ms, h.min_step_ms, h.max_step_ms) {
        (Some(m), Some(a), Some(b)) => format!("{} ({}-{})", ms(m), ms(a), ms(b)),
        _ => "-".into(),
    }
}

/// The per-rank table of the headline (`label` names each row's rank).
fn table(rows: &[(String, &RankHeadline)]) -> Table {
    Table {
        title: String::new(),
        headers: vec![
            "rank",
            "step ms: median (min-max)",
            "steps",
            "overlap %",
            "exposed comm ms/step",
            "GPU idle %",
        ],
        rows: rows
            .iter()
            .map(|(label, h)| {
                if !h.has_gpu_events {
                    return vec![
                        label.clone(),
                        "no GPU events".into(),
                        "-".into(),
                        "-".into(),
                        "-".into(),
                        "-".into(),
                    ];
                }
                vec![
                    label.clone(),
                    step_cell(h),
                    h.steps.to_string(),
                    p1(h.overlap_pct),
                    // No communication at all: nothing to expose.
                    match h.overlap_pct {
                        None if h.exposed_comm_ms_per_step == 0.0 => "-".into(),
                        _ => ms(h.exposed_comm_ms_per_step),
                    },
                    p1(h.idle_pct),
                ]
            })
            .collect(),
    }
}

/// The ranks the block shows, labelled: every rank up to
/// [`PER_RANK_MAX`], else the slowest, fastest and median step time, the
/// most exposed communication and the most idle.
fn shown(r: &Report) -> Vec<(String, &RankHeadline)> {
    let all = &r.headline.ranks;
    if all.len() <= PER_RANK_MAX {
        return all.iter().map(|h| (h.rank.to_string(), h)).collect();
    }
    let mut by_step: Vec<&RankHeadline> =
        all.iter().filter(|h| h.median_step_ms.is_some()).collect();
    by_step.sort_by(|a, b| {
        a.median_step_ms
            .unwrap_or(0.0)
            .total_cmp(&b.median_step_ms.unwrap_or(0.0))
    });
    let mut picks: Vec<(&str, Option<&RankHeadline>)> = vec![
        ("slowest", by_step.last().copied()),
        ("median", by_step.get(by_step.len() / 2).copied()),
        ("fastest", by_step.first().copied()),
    ];
    let most = |f: &dyn Fn(&RankHeadline) -> f64| {
        all.iter()
            .filter(|h| h.has_gpu_events)
            .max_by(|a, b| f(a).total_cmp(&f(b)))
    };
    picks.push(("most exposed", most(&|h| h.exposed_comm_ms_per_step)));
    picks.push(("most idle", most(&|h| h.idle_pct.unwrap_or(0.0))));
    let mut out: Vec<(String, &RankHeadline)> = Vec::new();
    for (why, h) in picks {
        let Some(h) = h else { continue };
        match out.iter_mut().find(|(_, x)| x.rank == h.rank) {
            Some(e) => e.0 = format!("{}, {why})", e.0.trim_end_matches(')')),
            None => out.push((format!("{} ({why})", h.rank), h)),
        }
    }
    out
}

/// The lines of the headline block, each at most [`WIDTH`] columns.
pub(super) fn lines(r: &Report) -> Vec<String> {
    let all = &r.headline.ranks;
    let mut out: Vec<String> = Vec::new();
    if all.is_empty() {
        return out;
    }
    // The window: one line when the ranks share it.
    let mut windows: Vec<(&str, Vec<u32>)> = Vec::new();
    for h in all {
        match windows.iter_mut().find(|w| w.0 == h.window) {
            Some(w) => w.1.push(h.rank),
            None => windows.push((&h.window, vec![h.rank])),
        }
    }
    if windows.len() == 1 {
        out.push(format!("headline window: {}", windows[0].0));
    } else {
        for (w, ranks) in windows.iter().take(3) {
            out.push(format!("headline window of rank(s) {}: {w}", list(ranks)));
        }
    }
    if all.len() > PER_RANK_MAX {
        let mut steps: Vec<f64> = all.iter().filter_map(|h| h.median_step_ms).collect();
        steps.sort_by(f64::total_cmp);
        if let (Some(a), Some(b)) = (steps.first(), steps.last()) {
            out.push(format!(
                "{} ranks: median step time {} ms at the median rank, from {} to {} ms",
                all.len(),
                ms(steps[steps.len() / 2]),
                ms(*a),
                ms(*b)
            ));
        }
    }
    out.push(String::new());
    out.extend(aligned(&table(&shown(r))));
    out.push(String::new());
    if let Some(s) = &r.headline.straggler {
        out.push(format!(
            "straggler: rank {}, last to arrive in {} of {} steps; the longest wait for it: \
             {} ms/step (median)",
            s.rank,
            s.steps,
            s.of_steps,
            opt_ms(s.median_wait_ms)
        ));
    }
    let detail: Vec<&RankHeadline> = if all.len() <= PER_RANK_MAX {
        all.iter().collect()
    } else {
        // The costliest sync of any rank, the top kernel of the slowest.
        let sync = all.iter().max_by(|a, b| {
            let g = |h: &RankHeadline| h.costliest_sync.as_ref().map_or(0.0, |s| s.gpu_idle_ms);
            g(a).total_cmp(&g(b))
        });
        sync.into_iter()
            .chain(shown(r).first().map(|x| x.1))
            .collect()
    };
    for h in &detail {
        if let Some(s) = &h.costliest_sync {
            let per = s
                .gpu_idle_ms_per_step
                .map_or(format!("{} ms GPU idle", ms(s.gpu_idle_ms)), |p| {
                    format!("{} ms GPU idle/step", ms(p))
                });
            let l = format!(
                "costliest sync, rank {}: {per}, {}, {} x{} ({})",
                h.rank, s.where_, s.pattern, s.count, s.api
            );
            // Wrapped, never cut: the line of the sync is the point.
            out.extend(super::wrap(&l, WIDTH, "  ").lines().map(String::from));
        }
    }
    for h in &detail {
        if h.graph_launches_per_step > 0.0 {
            out.push(format!(
                "CUDA graphs, rank {}: {:.1} launch(es)/step, {} % of GPU time run by graphs",
                h.rank,
                h.graph_launches_per_step,
                p1(h.graph_gpu_pct)
            ));
        }
        if let Some(k) = &h.top_kernel {
            let per = k.per_step_ms.map_or(format!("{} ms", ms(k.total_ms)), |p| {
                format!("{} ms/step", ms(p))
            });
            let at = if k.python.is_empty() {
                String::new()
            } else {
                format!(", launched at {}", k.python)
            };
            // The name last: a long one is cut at the block's width.
            out.push(format!(
                "top kernel, rank {}: {} % of GPU time, {per}{at}: {}",
                h.rank,
                p1(k.share_pct),
                super::kernel_name(&k.name)
            ));
        }
    }
    out.extend(super::findings::fix_first_lines(r));
    out.into_iter()
        .flat_map(|l| {
            if l.chars().count() <= WIDTH {
                vec![l]
            } else if !l.starts_with("top kernel") {
                // Lines other than the top kernel's wrap rather than lose words.
                super::wrap(&l, WIDTH, "  ")
                    .lines()
                    .map(String::from)
                    .collect::<Vec<_>>()
            } else {
                vec![short(&l, WIDTH)]
            }
        })
        .collect()
}

/// "0, 1, 2" (the first 8, then "...").
fn list(ranks: &[u32]) -> String {
    let mut v: Vec<String> = ranks.iter().take(8).map(u32::to_string).collect();
    if ranks.len() > 8 {
        v.push("...".into());
    }
    v.join(", ")
}
