//! The "What-if" tab: a slider on the communication scale and, per rank,
//! the measured against the predicted median step time (core's what-if
//! replay, `streamscope whatif --comm-scale X`).

use egui::{RichText, Ui};
use streamscope_core::analysis::whatif::{whatif, Changes, WhatIfOptions, WhatIfReport};

use crate::model::Model;

/// The slider and the last replay.
#[derive(Debug, Clone)]
pub struct WhatIfState {
    /// Communication (NCCL transfer) scale.
    pub comm_scale: f32,
    /// The scale of the replay shown, and the replay (or why there is none).
    pub shown: Option<(f32, Result<WhatIfReport, String>)>,
}

impl Default for WhatIfState {
    fn default() -> Self {
        WhatIfState {
            comm_scale: 1.0,
            shown: None,
        }
    }
}

impl WhatIfState {
    /// Replays `model`'s trace at the slider's scale unless that replay is
    /// the one shown.
    pub fn update(&mut self, model: &Model) {
        if self
            .shown
            .as_ref()
            .is_some_and(|(s, _)| *s == self.comm_scale)
        {
            return;
        }
        let opts = WhatIfOptions {
            changes: Changes {
                comm_scale: (self.comm_scale != 1.0).then_some(self.comm_scale as f64),
                ..Default::default()
            },
            drop_syncs: Vec::new(),
            launch_queue: None,
        };
        self.shown = Some((self.comm_scale, whatif(&model.trace, &opts)));
    }

    /// Per rank: (rank, measured median ms, predicted median ms) of the replay shown.
    pub fn rows(&self) -> Vec<(u32, f64, f64)> {
        match &self.shown {
            Some((_, Ok(r))) => r
                .ranks
                .iter()
                .filter_map(|k| {
                    Some((
                        k.rank,
                        k.measured_median_step_us? / 1000.0,
                        k.predicted_median_step_us? / 1000.0,
                    ))
                })
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// Draws the slider and the bars; replays when the slider is let go.
pub fn whatif_ui(ui: &mut Ui, model: &Model, st: &mut WhatIfState) {
    let slider = ui.add(
        egui::Slider::new(&mut st.comm_scale, 0.25..=8.0)
            .logarithmic(true)
            .text("communication ×"),
    );
    if !slider.dragged() {
        st.update(model);
    }
    ui.label(
        RichText::new("NCCL transfers (after the last rank arrives) scaled; predicted median step time per rank")
            .small(),
    );
    let report = match &st.shown {
        Some((_, Ok(r))) => r,
        Some((_, Err(why))) => {
            ui.label(format!("no prediction: {why}"));
            return;
        }
        None => return,
    };
    ui.label(
        RichText::new(format!(
            "unchanged replay within {:.3} % of every measured step",
            report.consistency_max_error_pct
        ))
        .small(),
    );
    let rows = st.rows();
    let max = rows
        .iter()
        .map(|r| r.1.max(r.2))
        .fold(0.0f64, f64::max)
        .max(1e-9);
    egui::Grid::new("whatif_rows").striped(true).show(ui, |ui| {
        ui.label(RichText::new("rank").strong());
        ui.label(RichText::new("step ms").strong());
        ui.label("");
        ui.end_row();
        for (rank, m, p) in &rows {
            for (what, v, color) in [
                ("measured", *m, egui::Color32::from_gray(150)),
                ("predicted", *p, egui::Color32::from_rgb(80, 140, 220)),
            ] {
                ui.label(if what == "measured" {
                    format!("rank {rank}")
                } else {
                    String::new()
                });
                ui.label(format!("{what} {v:.2}"));
                let w = 160.0 * (v / max) as f32;
                let (r, _) = ui.allocate_exact_size(egui::vec2(160.0, 10.0), egui::Sense::hover());
                ui.painter().rect_filled(
                    egui::Rect::from_min_size(r.min, egui::vec2(w, 10.0)),
                    2.0,
                    color,
                );
                ui.end_row();
            }
        }
    });
    // The regime of each collective in the first steady step of each rank.
    for k in &report.ranks {
        if let Some(s) = k.steps.iter().find(|s| s.in_window) {
            for g in &s.regimes {
                ui.label(
                    RichText::new(format!(
                        "rank {} {}: t_comm/t_compute {} -> {} ({})",
                        k.rank,
                        g.collective,
                        g.measured_ratio.map_or("-".into(), |x| format!("{x:.2}")),
                        g.predicted_ratio.map_or("-".into(), |x| format!("{x:.2}")),
                        g.regime
                    ))
                    .small(),
                );
            }
        }
    }
}
