//! Overlap per rank and per step, as the analysis computed it: overlap %,
//! exposed communication, efficiency, and a stacked bar of compute-only /
//! overlapped / communication-only / idle time.

use egui::{Color32, Rect, RichText, Sense, Ui, Vec2};
use streamscope_core::analysis::{Breakdown, RankReport, Report};

use crate::style::{fmt_ns, COMMUNICATION, COMPUTE};

pub const OVERLAPPED: Color32 = Color32::from_rgb(90, 190, 120);
pub const IDLE: Color32 = Color32::from_rgb(70, 70, 70);
pub const OTHER_GPU: Color32 = Color32::from_rgb(150, 150, 150);

/// The parts of a stacked bar, µs: compute-only, overlapped, comm-only, idle,
/// other GPU work (copies outside compute) so the parts add up to the kernel time.
pub fn bar_parts(
    compute_us: f64,
    comm_us: f64,
    overlap_us: f64,
    idle_us: f64,
    kernel_time_us: f64,
) -> [f64; 5] {
    let compute_only = (compute_us - overlap_us).max(0.0);
    let comm_only = (comm_us - overlap_us).max(0.0);
    let other = (kernel_time_us - compute_only - overlap_us - comm_only - idle_us).max(0.0);
    [compute_only, overlap_us, comm_only, idle_us, other]
}

const PART_NAMES: [&str; 5] = [
    "compute only",
    "overlapped",
    "comm only",
    "idle",
    "other GPU",
];
const PART_COLORS: [Color32; 5] = [COMPUTE, OVERLAPPED, COMMUNICATION, IDLE, OTHER_GPU];

fn stacked_bar(ui: &mut Ui, parts: [f64; 5], width: f32) {
    let total: f64 = parts.iter().sum();
    let (rect, resp) = ui.allocate_exact_size(Vec2::new(width, 14.0), Sense::hover());
    if total <= 0.0 {
        return;
    }
    let mut x = rect.left();
    for (i, p) in parts.iter().enumerate() {
        let w = (*p / total) as f32 * rect.width();
        if w > 0.0 {
            ui.painter().rect_filled(
                Rect::from_min_size(egui::pos2(x, rect.top()), Vec2::new(w, rect.height())),
                0.0,
                PART_COLORS[i],
            );
        }
        x += w;
    }
    resp.on_hover_text(
        PART_NAMES
            .iter()
            .zip(parts)
            .map(|(n, p)| format!("{n}: {} ({:.1}%)", fmt_ns(p * 1e3), 100.0 * p / total))
            .collect::<Vec<_>>()
            .join("\n"),
    );
}

fn pct(v: Option<f64>) -> String {
    v.map(|p| format!("{p:.1}%")).unwrap_or_else(|| "–".into())
}

fn legend(ui: &mut Ui) {
    ui.horizontal_wrapped(|ui| {
        for (n, c) in PART_NAMES.iter().zip(PART_COLORS) {
            let (r, _) = ui.allocate_exact_size(Vec2::splat(10.0), Sense::hover());
            ui.painter().rect_filled(r, 2.0, c);
            ui.label(RichText::new(*n).small());
        }
    });
}

fn rank_ui(ui: &mut Ui, r: &RankReport) {
    ui.strong(format!("{} {}", r.label, r.device));
    if !r.has_gpu_events {
        ui.label("no GPU events");
        return;
    }
    egui::Grid::new(("overlap_rank", r.process))
        .num_columns(2)
        .show(ui, |ui| {
            ui.label("overlap");
            ui.label(format!(
                "{} of communication hidden",
                pct(r.breakdown.overlap_pct)
            ));
            ui.end_row();
            ui.label("exposed comm");
            ui.label(fmt_ns(r.breakdown.exposed_comm_us * 1e3));
            ui.end_row();
            ui.label("efficiency");
            ui.label(pct(r.breakdown.overlap_efficiency_pct))
                .on_hover_text("overlap / min(compute, communication)");
            ui.end_row();
            ui.label("compute / comm");
            ui.label(format!(
                "{} / {}",
                fmt_ns(r.breakdown.compute_us * 1e3),
                fmt_ns(r.breakdown.comm_us * 1e3)
            ));
            ui.end_row();
            ui.label("idle");
            ui.label(format!(
                "{} ({})",
                fmt_ns(r.breakdown.idle_us * 1e3),
                pct(r.breakdown.idle_pct)
            ));
            ui.end_row();
            ui.label("window");
            ui.label(&r.window.label);
            ui.end_row();
        });
    let w = ui.available_width().min(360.0);
    stacked_bar(
        ui,
        bar_parts(
            r.breakdown.compute_us,
            r.breakdown.comm_us,
            r.breakdown.overlap_us,
            r.breakdown.idle_us,
            r.breakdown.kernel_time_us,
        ),
        w,
    );
}

fn step_bar(ui: &mut Ui, b: &Breakdown, width: f32) {
    stacked_bar(
        ui,
        bar_parts(
            b.compute_us,
            b.comm_us,
            b.overlap_us,
            b.idle_us,
            b.kernel_time_us,
        ),
        width,
    );
}

/// The panel; returns a step window (absolute ns) to zoom to when clicked.
/// Steps are a virtual list (`show_rows`): a long trace has thousands.
pub fn overlap_ui(ui: &mut Ui, report: &Report) -> Option<(i64, i64)> {
    let mut zoom = None;
    legend(ui);
    egui::ScrollArea::vertical()
        .id_salt("overlap_ranks")
        .max_height(ui.available_height() * 0.55)
        .show(ui, |ui| {
            for r in &report.ranks {
                rank_ui(ui, r);
                ui.separator();
            }
            for n in &report.diagnostics {
                ui.label(RichText::new(n.to_string()).small().weak());
            }
        });
    if report.steps.is_empty() {
        return None;
    }
    ui.separator();
    ui.strong(format!(
        "{} steps (click one to zoom to it)",
        report.steps.len()
    ));
    let cols = [110.0, 70.0, 55.0, 70.0];
    ui.horizontal(|ui| {
        for (h, w) in ["step", "duration", "overlap", "exposed"].iter().zip(cols) {
            ui.add_sized([w, 16.0], egui::Label::new(RichText::new(*h).strong()));
        }
        ui.strong("breakdown");
    });
    let row_h = 18.0;
    egui::ScrollArea::vertical()
        .id_salt("overlap_steps")
        .show_rows(ui, row_h, report.steps.len(), |ui, range| {
            for s in &report.steps[range] {
                ui.horizontal(|ui| {
                    let name = format!("r{} {}", s.rank, s.name);
                    let link = ui.add_sized([cols[0], row_h], egui::Link::new(name));
                    if link.on_hover_text("zoom to this step").clicked() {
                        zoom = Some((s.start_ns, s.end_ns));
                    }
                    ui.add_sized(
                        [cols[1], row_h],
                        egui::Label::new(fmt_ns(s.duration_us * 1e3)),
                    );
                    ui.add_sized(
                        [cols[2], row_h],
                        egui::Label::new(pct(s.breakdown.overlap_pct)),
                    );
                    let exposed = fmt_ns(s.breakdown.exposed_comm_us * 1e3);
                    ui.add_sized([cols[3], row_h], egui::Label::new(exposed));
                    step_bar(ui, &s.breakdown, 100.0);
                });
            }
        });
    zoom
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bar_parts_add_up_to_kernel_time() {
        let p = bar_parts(60.0, 30.0, 20.0, 15.0, 100.0);
        assert_eq!(p, [40.0, 20.0, 10.0, 15.0, 15.0]);
        assert_eq!(p.iter().sum::<f64>(), 100.0);
    }
}
