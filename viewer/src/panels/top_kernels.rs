//! Top kernels: per kernel name, count, total, mean and max time; computed
//! once per load, sorted on demand.

use egui::Ui;
use streamscope_core::{SliceKind, StrId, Trace};

use crate::style::fmt_ns;

#[derive(Debug, Clone, PartialEq)]
pub struct KernelStat {
    pub name: StrId,
    pub count: u64,
    pub total_ns: i64,
    pub max_ns: i64,
    /// The longest instance, to jump to.
    pub longest: u32,
}

impl KernelStat {
    pub fn mean_ns(&self) -> f64 {
        self.total_ns as f64 / self.count.max(1) as f64
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SortBy {
    #[default]
    Total,
    Count,
    Mean,
}

/// Aggregated kernels of a trace (all ranks together).
#[derive(Debug, Clone, Default)]
pub struct TopKernels {
    pub rows: Vec<KernelStat>,
    pub sort: SortBy,
}

impl TopKernels {
    pub fn compute(trace: &Trace) -> Self {
        let sl = trace.slices();
        let mut by_name: Vec<Option<KernelStat>> = vec![None; trace.strings().len()];
        for i in 0..sl.len() {
            if sl.kind()[i] != SliceKind::Kernel {
                continue;
            }
            let d = sl.dur_ns()[i];
            let e = by_name[sl.name()[i].index()].get_or_insert(KernelStat {
                name: sl.name()[i],
                count: 0,
                total_ns: 0,
                max_ns: -1,
                longest: i as u32,
            });
            e.count += 1;
            e.total_ns += d;
            if d > e.max_ns {
                e.max_ns = d;
                e.longest = i as u32;
            }
        }
        let mut t = TopKernels {
            rows: by_name.into_iter().flatten().collect(),
            sort: SortBy::Total,
        };
        t.sort_by(SortBy::Total);
        t
    }

    pub fn sort_by(&mut self, by: SortBy) {
        self.sort = by;
        match by {
            SortBy::Total => self.rows.sort_by_key(|r| std::cmp::Reverse(r.total_ns)),
            SortBy::Count => self.rows.sort_by_key(|r| std::cmp::Reverse(r.count)),
            SortBy::Mean => self
                .rows
                .sort_by(|a, b| b.mean_ns().total_cmp(&a.mean_ns())),
        }
    }
}

/// The table; returns the longest instance of a clicked kernel.
pub fn top_kernels_ui(ui: &mut Ui, trace: &Trace, top: &mut TopKernels) -> Option<u32> {
    let mut jump = None;
    ui.horizontal(|ui| {
        ui.label("sort by");
        for (by, label) in [
            (SortBy::Total, "total"),
            (SortBy::Count, "count"),
            (SortBy::Mean, "mean"),
        ] {
            if ui.selectable_label(top.sort == by, label).clicked() {
                top.sort_by(by);
            }
        }
    });
    if top.rows.is_empty() {
        ui.label("no kernels in this trace");
        return None;
    }
    // Fixed columns on the right, the name takes the rest (truncated).
    let cols = [60.0, 80.0, 75.0];
    let name_w = (ui.available_width() - cols.iter().sum::<f32>() - 30.0).max(80.0);
    let row_h = ui.text_style_height(&egui::TextStyle::Body) + 4.0;
    ui.horizontal(|ui| {
        for (h, w) in [
            ("kernel", name_w),
            ("count", cols[0]),
            ("total", cols[1]),
            ("mean", cols[2]),
        ] {
            ui.add_sized(
                [w, row_h],
                egui::Label::new(egui::RichText::new(h).strong()),
            );
        }
    });
    egui::ScrollArea::vertical()
        .id_salt("top_kernels")
        .show_rows(ui, row_h, top.rows.len(), |ui, range| {
            for r in &top.rows[range] {
                ui.horizontal(|ui| {
                    let name = trace.str(r.name);
                    let label = egui::Label::new(name)
                        .truncate()
                        .sense(egui::Sense::click());
                    let resp = ui.add_sized([name_w, row_h], label);
                    let hover = format!(
                        "{name}\nclick: longest instance ({})",
                        fmt_ns(r.max_ns as f64)
                    );
                    if resp.on_hover_text(hover).clicked() {
                        jump = Some(r.longest);
                    }
                    ui.add_sized([cols[0], row_h], egui::Label::new(r.count.to_string()));
                    ui.add_sized(
                        [cols[1], row_h],
                        egui::Label::new(fmt_ns(r.total_ns as f64)),
                    );
                    ui.add_sized([cols[2], row_h], egui::Label::new(fmt_ns(r.mean_ns())));
                });
            }
        });
    jump
}

#[cfg(test)]
mod tests {
    use super::*;
    use streamscope_core::TraceBuilder;
    use streamscope_core::{NewSlice, Process, TrackKind};

    #[test]
    fn aggregates_and_sorts() {
        let mut t = TraceBuilder::new();
        let p = t.add_process(Process::default());
        let d0 = t.add_device(streamscope_core::Device {
            process: p,
            ..Default::default()
        });
        let s = t.add_track(
            p,
            None,
            TrackKind::Stream {
                device: d0,
                stream: 7,
            },
            "s",
        );
        let a = t.intern("a");
        let b = t.intern("b");
        for (n, st, d) in [(a, 0, 10), (a, 20, 30), (b, 60, 35), (a, 100, 2)] {
            t.push_slice(NewSlice::new(s, SliceKind::Kernel, n, st, d));
        }
        let t = t.finish();
        let mut top = TopKernels::compute(&t);
        assert_eq!(
            top.rows.iter().map(|r| r.name).collect::<Vec<_>>(),
            vec![a, b]
        );
        assert_eq!(
            (top.rows[0].count, top.rows[0].total_ns, top.rows[0].longest),
            (3, 42, 1)
        );
        top.sort_by(SortBy::Mean);
        assert_eq!(top.rows[0].name, b);
        top.sort_by(SortBy::Count);
        assert_eq!(top.rows[0].name, a);
    }
}
