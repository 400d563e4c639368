//! The timeline's lines as drawn at a frame: header bands (with a collapsed
//! rank's summary strip), rows of folded items, counters, and the items'
//! labels.

use egui::{Mesh, Pos2, Rect};

use super::layout::{self, GroupKey, LineKind};
use super::lod::{self, TimeMap};
use super::{paint, SummaryView, TimelineState};
use crate::model::Model;

/// A collapsed rank's utilization summary strip, into `mesh` (cached in
/// `summaries` while the view and the strip's size stay).
#[allow(clippy::too_many_arguments)]
fn mesh_rank_summary(
    mesh: &mut Mesh,
    summaries: &mut std::collections::HashMap<u32, (SummaryView, Vec<paint::SummaryRun>)>,
    model: &Model,
    map: &TimeMap,
    lanes: Rect,
    p: u32,
    y: f32,
    h: f32,
) {
    let inner = (h - 4.0).clamp(1.0, 255.0) as u8;
    let view = (
        map.start_rel_ns.to_bits(),
        map.ns_per_px.to_bits(),
        lanes.left().to_bits(),
        lanes.right().to_bits(),
        inner,
    );
    let fresh = matches!(summaries.get(&p), Some((v, _)) if *v == view);
    if !fresh {
        let rows = model.gpu_rows.get(p as usize).map_or(&[][..], |r| r);
        let runs = paint::rank_summary(
            &model.trace,
            &model.index,
            rows,
            map,
            inner,
            lanes.left(),
            lanes.right(),
        );
        summaries.insert(p, (view, runs));
    }
    if let Some((_, runs)) = summaries.get(&p) {
        paint::mesh_summary_runs(mesh, runs, y + h - 2.0);
    }
}

/// The visible lines (header bands and rows) as one mesh; folds the rows'
/// items into `st.items` and returns, per row, its screen y (NaN when not
/// drawn).
pub(super) fn mesh_lines(
    model: &Model,
    st: &mut TimelineState,
    map: &TimeMap,
    lanes: Rect,
    visuals: &egui::Visuals,
) -> (Mesh, Vec<f32>) {
    st.items.clear();
    st.row_items.clear();
    st.coverage_rows.clear();
    let mut mesh = Mesh::default();
    let mut row_y = vec![f32::NAN; model.index.rows.len()];
    let no_waits = std::collections::HashMap::new();
    for line in &st.lines {
        let y = lanes.top() + line.y - st.scroll_y;
        if y + line.h < lanes.top() || y > lanes.bottom() {
            continue;
        }
        match line.kind {
            LineKind::Header { key, collapsed } => {
                let band = Rect::from_min_max(
                    Pos2::new(lanes.left(), y),
                    Pos2::new(lanes.right(), y + line.h),
                );
                mesh.add_colored_rect(band, visuals.faint_bg_color);
                // A collapsed rank: one utilization summary strip.
                if let (true, GroupKey::Process(p)) = (collapsed, key) {
                    mesh_rank_summary(
                        &mut mesh,
                        &mut st.summaries,
                        model,
                        map,
                        lanes,
                        p,
                        y,
                        line.h,
                    );
                }
            }
            LineKind::Row { row, .. } => {
                row_y[row as usize] = y;
                let first = st.items.len();
                let r = &model.index.rows[row as usize];
                lod::fold_row(model.trace.slices(), r, map, &mut st.items);
                st.row_items
                    .push((row, first as u32, st.items.len() as u32, y));
                match model
                    .index
                    .coverage
                    .get(row as usize)
                    .and_then(|c| c.as_ref())
                {
                    Some(cov) => {
                        let n = paint::mesh_row_coverage(
                            &mut mesh,
                            &model.trace,
                            &model.index,
                            model.wait_share().unwrap_or(&no_waits),
                            cov,
                            r,
                            &st.items[first..],
                            map,
                            y,
                            line.h,
                            lanes.left(),
                            lanes.right(),
                        );
                        if n > 0 {
                            st.coverage_rows.push((row, n as u32));
                        }
                    }
                    None => paint::mesh_items(
                        &mut mesh,
                        &model.trace,
                        &model.index,
                        &st.items[first..],
                        y,
                        line.h,
                        lanes.left(),
                        lanes.right(),
                    ),
                }
            }
            LineKind::Counter { track } => {
                let r = Rect::from_min_max(
                    Pos2::new(lanes.left(), y),
                    Pos2::new(lanes.right(), y + line.h),
                );
                paint::mesh_counter(&mut mesh, &model.trace, &model.index, track.get(), map, r);
            }
        }
    }
    (mesh, row_y)
}

/// The labels of the items drawn at this frame (rows without coverage
/// fold their labels).
pub(super) fn label_rows(painter: &egui::Painter, model: &Model, st: &TimelineState, lanes: Rect) {
    for &(row, a, b, y) in &st.row_items {
        let fold_labels = model
            .index
            .coverage
            .get(row as usize)
            .is_none_or(|c| c.is_none());
        paint::label_items(
            painter,
            &model.trace,
            &st.items[a as usize..b as usize],
            fold_labels,
            y,
            layout::ROW_H,
            lanes.left(),
            lanes.right(),
        );
    }
}
