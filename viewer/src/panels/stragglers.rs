//! The "Stragglers" tab: per step, the rank the others waited for most and
//! how long (the analysis's cross-rank matching); a click zooms to that
//! step's worst collective, its kernels on every rank linked.

use egui::{RichText, Ui};

use crate::model::Model;
use crate::style::fmt_ns;

/// What a click asks for: the window to show, the kernels to link (the
/// worst instance's, first one selected).
pub struct Jump {
    pub start_ns: i64,
    pub end_ns: i64,
    pub kernels: Vec<u32>,
}

/// One row per step number that has a straggler, in step order.
fn rows(model: &Model) -> Vec<(i64, u32, f64, i64, i64)> {
    let mut out: Vec<(i64, u32, f64, i64, i64)> = Vec::new();
    for s in &model.report.steps {
        let (Some(rank), Some(wait)) = (s.straggler_rank, s.straggler_wait_us) else {
            continue;
        };
        match out.iter_mut().find(|r| r.0 == s.step) {
            // The step's span over every rank.
            Some(r) => {
                r.3 = r.3.min(s.start_ns);
                r.4 = r.4.max(s.end_ns);
            }
            None => out.push((s.step, rank, wait, s.start_ns, s.end_ns)),
        }
    }
    out.sort_by_key(|r| r.0);
    out
}

/// The collective of the step span `[a, b)` whose waiting rank waited
/// longest: its kernels, and the window around them.
fn worst_in(model: &Model, a: i64, b: i64) -> Option<Jump> {
    let m = model.matching();
    let inst = m
        .instances
        .iter()
        .filter(|i| i.parts.iter().all(|p| p.start_ns >= a && p.start_ns < b))
        .max_by_key(|i| i.parts.iter().map(|p| p.wait_ns).max().unwrap_or(0))?;
    let start = inst.parts.iter().map(|p| p.start_ns).min()?;
    let end = inst.parts.iter().map(|p| p.end_ns).max()?;
    let pad = (end - start) / 4;
    Some(Jump {
        start_ns: start.saturating_sub(pad),
        end_ns: end.saturating_add(pad),
        kernels: inst.parts.iter().map(|p| p.slice.get()).collect(),
    })
}

/// Draws the table; returns where to go when a row is clicked.
pub fn stragglers_ui(ui: &mut Ui, model: &Model) -> Option<Jump> {
    let rows = rows(model);
    if rows.is_empty() {
        ui.label(
            RichText::new(
                "No straggler: one rank only, no steps, or collectives that could not be matched across ranks (see the report's notes).",
            )
            .weak(),
        );
        return None;
    }
    ui.label(
        RichText::new("Per step, the rank the others waited for most. Click a step: its worst collective on every rank.")
            .small()
            .weak(),
    );
    let mut jump = None;
    egui::ScrollArea::vertical()
        .id_salt("stragglers")
        .show(ui, |ui| {
            egui::Grid::new("stragglers_grid")
                .striped(true)
                .show(ui, |ui| {
                    for h in ["step", "straggler", "others waited"] {
                        ui.label(RichText::new(h).strong());
                    }
                    ui.end_row();
                    for &(step, rank, wait_us, a, b) in &rows {
                        if ui.link(format!("step {step}")).clicked() {
                            jump = worst_in(model, a, b).or(Some(Jump {
                                start_ns: a,
                                end_ns: b,
                                kernels: Vec::new(),
                            }));
                        }
                        ui.label(format!("rank {rank}"));
                        ui.label(fmt_ns(wait_us * 1e3));
                        ui.end_row();
                    }
                });
        });
    jump
}
