//! The What-if tab: a slider on the communication scale, predicted against
//! measured step time per rank (egui_kittest, headless).

use std::path::PathBuf;

use egui_kittest::kittest::Queryable;
use egui_kittest::Harness;
use streamscope_viewer::app::Tab;
use streamscope_viewer::ViewerApp;

fn bundled(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../traces")
        .join(name)
}

#[test]
fn slider_on_the_communication_scale_predicts_each_ranks_step() {
    let mut app = ViewerApp::open(vec![bundled("fsdp-ref-serial-h200x2")]);
    assert!(app.model.is_some());
    app.tab = Tab::WhatIf;
    let mut h = Harness::builder()
        .with_size([1500.0, 950.0])
        .build_ui_state(|ui, app: &mut ViewerApp| app.ui_root(ui), app);
    h.run();
    assert!(h.query_by_label("What-if").is_some(), "the tab is there");
    // Unchanged: the prediction is the measurement.
    let rows = h.state().whatif.rows();
    assert_eq!(rows.len(), 2);
    for (rank, m, p) in &rows {
        assert!((m - p).abs() < 1e-9, "rank {rank}: {m} vs {p}");
    }
    assert!(h
        .query_by_label_contains("unchanged replay within 0.000 %")
        .is_some());
    // Communication twice as slow: a serial schedule pays all of it.
    h.state_mut().whatif.comm_scale = 2.0;
    h.run();
    let slow = h.state().whatif.rows();
    for ((_, m, p), (_, m0, _)) in slow.iter().zip(&rows) {
        assert_eq!(m, m0);
        assert!(*p > 1.3 * m, "{m} -> {p}");
    }
    // One bar label per rank shows the predicted time.
    for (_, _, p) in &slow {
        let label = format!("predicted {p:.2}");
        assert!(h.query_by_label(&label).is_some(), "{label}");
    }
    assert!(h.query_all_by_label_contains("(past the wall)").count() >= 2);
}

#[test]
fn a_trace_without_communication_says_why() {
    let mut app = ViewerApp::open(vec![bundled("sync-zoo-h200")]);
    app.tab = Tab::WhatIf;
    app.whatif.comm_scale = 2.0;
    let mut h = Harness::builder()
        .with_size([1500.0, 950.0])
        .build_ui_state(|ui, app: &mut ViewerApp| app.ui_root(ui), app);
    h.run();
    assert!(h
        .query_by_label_contains("no prediction: no communication")
        .is_some());
    assert!(h.state().whatif.rows().is_empty());
}
