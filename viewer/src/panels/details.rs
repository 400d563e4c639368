//! Selection details: every attribute of the selected slice, its launch
//! call (or GPU work), and the kernel's occupancy from the analysis.

use egui::{Grid, RichText, Ui};
use streamscope_core::analysis::KernelOccupancy;
use streamscope_core::SliceId;
use streamscope_core::{Trace, TrackKind};

use crate::model::Model;
use crate::style::fmt_ns;
use crate::timeline::{flows, TimelineState};

fn row(ui: &mut Ui, key: &str, value: impl Into<String>) {
    ui.label(RichText::new(key).weak());
    ui.add(egui::Label::new(value.into()).wrap());
    ui.end_row();
}

fn location(trace: &Trace, s: usize) -> String {
    let track = trace.slices().track()[s];
    let t = trace.track(track);
    let proc_ = trace
        .processes()
        .get(t.process.index())
        .map(|p| p.label())
        .unwrap_or_default();
    let place = match t.kind {
        TrackKind::Stream { device, stream } => {
            let dev = trace.devices().get(device.index());
            let name = dev
                .map(|d| format!("GPU {} {}", d.ordinal, d.name))
                .unwrap_or_default();
            format!("{name} · stream {stream}")
        }
        TrackKind::Thread { tid } => format!("thread {tid} {}", trace.track_name(track)),
        _ => trace.track_name(track).to_string(),
    };
    format!("{proc_} · {place}")
}

/// The analysis's occupancy row of kernel `s` (same device, name, grid, block).
fn occupancy_of(model: &Model, s: usize) -> Option<&KernelOccupancy> {
    let trace = &model.trace;
    let lc = trace.launch_of(SliceId::from_index(s))?;
    let device = trace.track_device(trace.slices().track()[s])?;
    let name = trace.str(trace.slices().name()[s]);
    model
        .report
        .occupancy
        .iter()
        .filter(|o| o.device == device)
        .flat_map(|o| o.kernels.iter())
        .find(|k| k.name == name && k.grid == lc.grid && k.block == lc.block)
}

/// Details of the selection; returns a slice to jump to (the linked one).
pub fn details_ui(ui: &mut Ui, model: &Model, st: &TimelineState) -> Option<u32> {
    let mut jump = None;
    if let Some((a, b)) = st.range_ns {
        ui.label(format!(
            "range selection: {} (shift-drag or right-drag to change, Esc to clear)",
            fmt_ns((b - a) as f64)
        ));
    }
    let Some(sel) = st.selected else {
        ui.label(
            RichText::new("Click a slice to see its details. Wheel or W/S zoom, drag or A/D pan.")
                .weak(),
        );
        return None;
    };
    let s = sel as usize;
    let trace = &model.trace;
    let sl = trace.slices();
    let origin = model.index.span_ns.0;
    egui::ScrollArea::vertical().id_salt("details").show(ui, |ui| {
        ui.heading(RichText::new(trace.str(sl.name()[s])).strong());
        Grid::new("details_grid").num_columns(2).striped(true).show(ui, |ui| {
            row(ui, "kind", format!("{} ({})", sl.kind()[s].name(), sl.class()[s].name()));
            row(ui, "where", location(trace, s));
            row(ui, "start", format!("{} after trace start ({} ns)", fmt_ns((sl.start_ns()[s] - origin) as f64), sl.start_ns()[s]));
            row(ui, "duration", fmt_ns(sl.dur_ns()[s] as f64));
            if sl.correlation()[s] != 0 {
                row(ui, "correlation", sl.correlation()[s].to_string());
            }
            if let Some(lc) = trace.launch_of(SliceId::from_index(s)) {
                row(ui, "grid", format!("{} × {} × {} ({} blocks)", lc.grid[0], lc.grid[1], lc.grid[2], lc.blocks()));
                row(ui, "block", format!("{} × {} × {} ({} threads)", lc.block[0], lc.block[1], lc.block[2], lc.threads_per_block()));
                row(ui, "registers / thread", lc.registers_per_thread.to_string());
                row(ui, "shared memory", format!("{} B static, {} B dynamic", lc.static_smem_bytes, lc.dynamic_smem_bytes));
            }
            if let Some(k) = occupancy_of(model, s) {
                row(
                    ui,
                    "occupancy",
                    format!(
                        "{:.0}% theoretical ({} blocks/SM, limited by {}), fills {} SMs, touches {}",
                        k.theoretical_occupancy_pct, k.blocks_per_sm, k.limiter, k.sms_filled, k.sms_touched
                    ),
                );
            }
            if let Some(c) = trace.copy_of(SliceId::from_index(s)) {
                row(ui, "bytes", c.bytes.to_string());
                row(ui, "copy", format!("{}{}", c.kind.name(), if c.pageable { ", pageable host memory" } else { "" }));
            }
            for (k, v) in trace.args_of(SliceId::from_index(s)) {
                row(ui, trace.str(*k), trace.arg_value_string(v));
            }
        });
        if let Some((inst, part)) = model.collective_of(sel) {
            let last = &inst.parts[inst.last];
            ui.separator();
            ui.label(RichText::new("this collective on every rank").strong());
            ui.label(format!(
                "{}{} · last to arrive: rank {} · skew {} · this rank waited {}, then transferred {}",
                inst.kind,
                inst.seq.map_or(String::new(), |q| format!(" seq {q}")),
                last.rank,
                fmt_ns(inst.skew_ns as f64),
                fmt_ns(part.wait_ns as f64),
                fmt_ns(part.transfer_ns() as f64),
            ));
        }
        for &(from, to) in &st.links {
            let other = if from == sel { to } else { from } as usize;
            let what = if from != sel {
                "launched by"
            } else if model.collective_of(other as u32).is_some() && sl.kind()[other] == sl.kind()[s] {
                "same collective"
            } else {
                "GPU work"
            };
            ui.horizontal(|ui| {
                ui.label(RichText::new(what).weak());
                if ui.link(trace.str(sl.name()[other])).clicked() {
                    jump = Some(other as u32);
                }
                ui.label(format!("{} · {}", fmt_ns(sl.dur_ns()[other] as f64), location(trace, other)));
            });
        }
        if let Some(call) = flows::launch_call(trace, &st.links, s) {
            ui.label(format!("launch latency: {} (from call start to GPU start)", fmt_ns((sl.start_ns()[s] - sl.start_ns()[call]) as f64)));
        }
    });
    jump
}
