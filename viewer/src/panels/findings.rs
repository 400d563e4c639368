//! Findings from the analysis, ranked by the step time each fix saves (as
//! the what-if replay predicts it): kind, where, gain, evidence. A click
//! zooms the timeline onto the finding (a sync's first call, the worst
//! communication stall, a step of the rank) and highlights it.

use egui::{RichText, Ui};
use streamscope_core::analysis::render::{kind_words, where_words};
use streamscope_core::analysis::{Finding, Report};

use super::syncs::SyncTarget;

/// Button text of a finding (also what UI tests click).
pub fn finding_title(rank: usize, f: &Finding) -> String {
    format!("{}. {} · {}", rank + 1, kind_words(&f.kind), f.gain_words())
}

#[derive(Debug, Clone, Default)]
pub struct FindingsState {
    /// Also list findings within noise.
    pub show_all: bool,
    /// The finding last shown (its index in the report).
    pub shown: Option<usize>,
}

/// Where a finding points the timeline: its slice, else its span.
fn target(f: &Finding, slice_bounds: &impl Fn(u32) -> (i64, i64)) -> Option<SyncTarget> {
    match (f.slice.map(|s| s.get()), f.start_ns, f.end_ns) {
        (Some(s), _, _) => {
            let (a, b) = slice_bounds(s);
            Some(SyncTarget {
                start_ns: a,
                end_ns: b,
                slice: Some(s),
            })
        }
        (None, Some(a), Some(b)) => Some(SyncTarget {
            start_ns: a,
            end_ns: b.max(a + 1),
            slice: None,
        }),
        _ => None,
    }
}

/// The panel; `slice_bounds` gives a slice's (start, end).
pub fn findings_ui(
    ui: &mut Ui,
    report: &Report,
    st: &mut FindingsState,
    slice_bounds: impl Fn(u32) -> (i64, i64),
) -> Option<SyncTarget> {
    let mut out = None;
    let beyond = report.findings.iter().filter(|f| f.beyond_noise).count();
    ui.horizontal(|ui| {
        ui.label(format!(
            "{} finding(s), {beyond} beyond noise; ranked by predicted gain",
            report.findings.len()
        ));
        ui.checkbox(&mut st.show_all, "show all");
    });
    let shown: Vec<(usize, &Finding)> = report
        .findings
        .iter()
        .enumerate()
        .filter(|(_, f)| st.show_all || f.beyond_noise)
        .collect();
    if shown.is_empty() {
        ui.label(
            RichText::new(if report.findings.is_empty() {
                "Nothing measured costs step time."
            } else {
                "No finding beyond noise (tick \"show all\")."
            })
            .weak(),
        );
        return None;
    }
    egui::ScrollArea::vertical()
        .id_salt("findings")
        .show(ui, |ui| {
            for (i, f) in shown {
                let title = finding_title(i, f);
                let b = ui.add(
                    egui::Button::new(RichText::new(&title).strong()).selected(st.shown == Some(i)),
                );
                if b.on_hover_text("zoom to it").clicked() {
                    st.shown = Some(i);
                    out = target(f, &slice_bounds);
                }
                egui::Grid::new(("finding", i))
                    .num_columns(2)
                    .show(ui, |ui| {
                        ui.label(RichText::new("where").weak());
                        ui.add(egui::Label::new(where_words(f)).wrap());
                        ui.end_row();
                        ui.label(RichText::new("evidence").weak());
                        ui.add(egui::Label::new(&f.evidence).wrap());
                        ui.end_row();
                        ui.label(RichText::new("prediction").weak());
                        ui.add(egui::Label::new(&f.prediction).wrap());
                        ui.end_row();
                        ui.label(RichText::new("noise").weak());
                        ui.label(format!(
                            "±{:.2} ms/step ({})",
                            f.noise_us / 1000.0,
                            if f.beyond_noise { "beyond" } else { "within" }
                        ));
                        ui.end_row();
                    });
                ui.separator();
            }
        });
    out
}
