//! Sync warnings from the analysis: pattern, count, cost and where. A click
//! zooms the timeline onto an occurrence and highlights it; further clicks
//! step through the occurrences.

use egui::{RichText, Ui};
use streamscope_core::analysis::{Report, SyncGroup};

use crate::style::fmt_ns;

/// Where to point the timeline.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SyncTarget {
    pub start_ns: i64,
    pub end_ns: i64,
    pub slice: Option<u32>,
}

#[derive(Debug, Clone, Default)]
pub struct SyncsState {
    /// Show every sync group, not only the warnings.
    pub show_all: bool,
    /// (group index, occurrence) last shown.
    pub shown: Option<(usize, usize)>,
}

/// Button text of a group (also what UI tests click).
pub fn group_title(g: &SyncGroup) -> String {
    format!("rank {} · {} ×{} · {}", g.rank, g.pattern, g.count, g.api)
}

fn target(
    g: &SyncGroup,
    occurrence: usize,
    slice_bounds: impl Fn(u32) -> (i64, i64),
) -> SyncTarget {
    match g.slices.get(occurrence) {
        Some(&s) => {
            let (a, b) = slice_bounds(s.get());
            SyncTarget {
                start_ns: a,
                end_ns: b,
                slice: Some(s.get()),
            }
        }
        None => SyncTarget {
            start_ns: g.start_ns,
            end_ns: g.end_ns,
            slice: None,
        },
    }
}

/// The panel; `slice_bounds` gives a slice's (start, end).
pub fn syncs_ui(
    ui: &mut Ui,
    report: &Report,
    st: &mut SyncsState,
    slice_bounds: impl Fn(u32) -> (i64, i64),
) -> Option<SyncTarget> {
    let mut out = None;
    let all: Vec<&SyncGroup> = report.ranks.iter().flat_map(|r| r.syncs.iter()).collect();
    ui.horizontal(|ui| {
        ui.label(format!(
            "{} warning(s), {} sync group(s)",
            report.sync_warnings.len(),
            all.len()
        ));
        ui.checkbox(&mut st.show_all, "show all");
    });
    let groups: Vec<&SyncGroup> = if st.show_all {
        all
    } else {
        report.sync_warnings.iter().collect()
    };
    if groups.is_empty() {
        ui.label(RichText::new("No host-blocking synchronization worth a warning.").weak());
        return None;
    }
    egui::ScrollArea::vertical()
        .id_salt("syncs")
        .show(ui, |ui| {
            for (i, g) in groups.iter().enumerate() {
                let title = group_title(g);
                let shown_here = st.shown.filter(|(gi, _)| *gi == i).map(|(_, o)| o);
                let b = ui.add(
                    egui::Button::new(RichText::new(&title).strong())
                        .selected(shown_here.is_some()),
                );
                if b.on_hover_text("zoom to it; click again for the next occurrence")
                    .clicked()
                {
                    let occ = match shown_here {
                        Some(o) if g.slices.len() > 1 => (o + 1) % g.slices.len(),
                        _ => 0,
                    };
                    st.shown = Some((i, occ));
                    out = Some(target(g, occ, &slice_bounds));
                }
                egui::Grid::new(("sync", i)).num_columns(2).show(ui, |ui| {
                    ui.label(RichText::new("where").weak());
                    ui.add(egui::Label::new(&g.where_).wrap());
                    ui.end_row();
                    ui.label(RichText::new("cost").weak());
                    ui.label(format!(
                        "host blocked {}, GPU idle {}",
                        fmt_ns(g.host_blocked_us * 1e3),
                        fmt_ns(g.gpu_idle_us * 1e3)
                    ));
                    ui.end_row();
                    if let Some(p) = g.per_step {
                        ui.label(RichText::new("per step").weak());
                        ui.label(format!("{p:.1} in {} step(s)", g.steps_with));
                        ui.end_row();
                    }
                    if let Some(o) = shown_here {
                        ui.label(RichText::new("showing").weak());
                        ui.label(format!("occurrence {} of {}", o + 1, g.slices.len().max(1)));
                        ui.end_row();
                    }
                });
                if let Some(w) = &g.warning {
                    ui.colored_label(ui.visuals().warn_fg_color, w);
                }
                ui.separator();
            }
        });
    out
}
