//! The "Compare" tab of `view --compare A B`: per rank the change of step
//! time, overlap, exposed communication and idle, then the kernels and
//! collectives whose time per step moved most (the same figures as
//! `streamscope compare`).

use egui::{RichText, Ui};
use streamscope_core::analysis::compare::{Comparison, ItemDiff};

/// Rows of the kernel list shown.
const KERNEL_ROWS: usize = 25;

fn ms(us: f64) -> String {
    format!("{:.3}", us / 1e3)
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or("-".into(), f)
}

fn items_ui(ui: &mut Ui, id: &str, items: &[ItemDiff], rows: usize) {
    egui::Grid::new(id).striped(true).show(ui, |ui| {
        for h in ["Δ ms/step", "A ms", "B ms", "name"] {
            ui.label(RichText::new(h).strong());
        }
        ui.end_row();
        for k in items.iter().take(rows) {
            let color = if k.delta_us > 0.0 {
                ui.visuals().warn_fg_color
            } else {
                ui.visuals().text_color()
            };
            ui.colored_label(color, format!("{:+.3}", k.delta_us / 1e3));
            ui.label(ms(k.control_us));
            ui.label(ms(k.test_us));
            let name: String = k.name.chars().take(60).collect();
            ui.label(RichText::new(name).small())
                .on_hover_text(format!("{} ({})", k.name, k.class));
            ui.end_row();
        }
    });
}

/// Draws the comparison.
pub fn compare_ui(ui: &mut Ui, c: &Comparison) {
    ui.label(RichText::new(format!("A (control): {}", c.control)).small());
    ui.label(RichText::new(format!("B (test): {}", c.test)).small());
    let how = match c.aligned_step {
        Some(n) => format!("B is moved in time so that its step {n} starts with A's."),
        None => "B is moved in time so that its first step starts with A's.".into(),
    };
    ui.label(RichText::new(how).small().weak());
    ui.separator();
    egui::ScrollArea::vertical()
        .id_salt("compare")
        .show(ui, |ui| {
            egui::Grid::new("compare_ranks")
                .striped(true)
                .show(ui, |ui| {
                    for h in [
                        "rank",
                        "step A",
                        "step B",
                        "Δ",
                        "overlap A/B",
                        "exposed A/B",
                        "idle A/B",
                    ] {
                        ui.label(RichText::new(h).strong());
                    }
                    ui.end_row();
                    for r in &c.ranks {
                        ui.label(r.rank.to_string());
                        ui.label(opt(r.control.step_us, |v| format!("{} ms", ms(v))));
                        ui.label(opt(r.test.step_us, |v| format!("{} ms", ms(v))));
                        ui.label(opt(r.step_delta_pct, |v| format!("{v:+.1} %")));
                        ui.label(format!(
                            "{} / {} %",
                            opt(r.control.overlap_pct, |v| format!("{v:.1}")),
                            opt(r.test.overlap_pct, |v| format!("{v:.1}"))
                        ));
                        ui.label(format!(
                            "{} / {} ms",
                            ms(r.control.exposed_comm_us_per_step),
                            ms(r.test.exposed_comm_us_per_step)
                        ));
                        ui.label(format!(
                            "{} / {} %",
                            opt(r.control.idle_pct, |v| format!("{v:.1}")),
                            opt(r.test.idle_pct, |v| format!("{v:.1}"))
                        ));
                        ui.end_row();
                    }
                });
            if !c.collectives.is_empty() {
                ui.separator();
                ui.strong("Collectives, per step and rank");
                items_ui(ui, "compare_coll", &c.collectives, usize::MAX);
            }
            ui.separator();
            ui.strong(format!(
                "Kernels, per step and rank (top {} of {} by change)",
                KERNEL_ROWS.min(c.kernels.len()),
                c.kernels.len()
            ));
            items_ui(ui, "compare_kernels", &c.kernels, KERNEL_ROWS);
            for d in &c.diagnostics {
                ui.label(RichText::new(d.to_string()).small().weak());
            }
        });
}
