//! The viewer on real Kineto traces (HTA's two-rank sample, in
//! core/tests/data/hta): loading a folder of ranks, lane labels, level of
//! detail that accounts for every slice, and the overlap panel.

use std::path::{Path, PathBuf};

use egui_kittest::kittest::Queryable;
use egui_kittest::Harness;
use streamscope_viewer::timeline::lod::{fold_row, Item, TimeMap};
use streamscope_viewer::ViewerApp;

fn ranks_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../core/tests/data/hta/trace_filter")
}

fn app() -> ViewerApp {
    let mut app = ViewerApp::empty();
    app.load(vec![ranks_dir()]);
    for f in &app.files {
        assert!(f.result.is_ok(), "{}: {:?}", f.path.display(), f.result);
    }
    app
}

#[test]
fn a_folder_of_ranks_opens_with_labelled_lanes() {
    let mut h = Harness::builder()
        .with_size([1500.0, 1000.0])
        .build_ui_state(|ui, app: &mut ViewerApp| app.ui_root(ui), app());
    h.run();
    let m = h.state().model.as_ref().expect("both ranks load");
    assert_eq!(m.trace.processes().len(), 2);
    for label in ["stream 7 · compute", "stream 84 · NCCL", "stream 25 · copy"] {
        assert_eq!(
            h.query_all_by_label(label).count(),
            2,
            "{label} once per rank"
        );
    }
    // The headline overlap of each rank, as the analysis computed it.
    for r in &m.report.ranks {
        let pct = r.breakdown.overlap_pct.expect("the ranks communicate");
        let text = format!("{pct:.1}% of communication hidden");
        assert!(h.query_by_label(&text).is_some(), "missing {text}");
    }
    assert!(h.state().timeline.painted_rows() > 10);
}

#[test]
fn folding_accounts_for_every_slice_at_every_zoom() {
    let app = app();
    let m = app.model.as_ref().expect("both ranks load");
    let rows_total: usize = m.index.rows.iter().map(|r| r.len()).sum();
    assert_eq!(
        rows_total,
        m.trace.slices().len(),
        "every slice sits on one row"
    );
    let (a, b) = m.index.span_ns;
    for width_px in [300.0, 1500.0, 20_000.0, 2_000_000.0] {
        let map = TimeMap {
            origin_ns: a,
            start_rel_ns: 0.0,
            ns_per_px: (b - a) as f64 / width_px,
            left_px: 0.0,
            width_px,
        };
        let mut drawn = 0usize;
        let mut items = Vec::new();
        for row in &m.index.rows {
            items.clear();
            fold_row(m.trace.slices(), row, &map, &mut items);
            let mut last_x1 = f32::MIN;
            for it in &items {
                let (x0, x1, n) = match *it {
                    Item::Slice { x0, x1, .. } => (x0, x1, 1),
                    Item::Folded { x0, x1, count, .. } => (x0, x1, count as usize),
                };
                assert!(x0 >= last_x1 - 1.0, "items overlap: {x0} after {last_x1}");
                assert!(x1 >= x0);
                last_x1 = x1;
                drawn += n;
            }
            if width_px <= 1500.0 {
                assert!(
                    items.len() as f64 <= width_px,
                    "a row draws at most one item per pixel"
                );
            }
        }
        assert_eq!(
            drawn, rows_total,
            "at {width_px} px every slice is drawn or folded once"
        );
    }
}
