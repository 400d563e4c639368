//! Opening files: several ranks at once (Perfetto and Kineto alike), and a
//! file that fails to load shows its error while the others stay open.

mod common;

use std::path::PathBuf;

use egui_kittest::kittest::Queryable;
use egui_kittest::Harness;
use streamscope_viewer::ViewerApp;

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("streamscope-viewer-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).ok();
    d
}

#[test]
fn a_bad_file_shows_its_error_and_the_good_ones_stay_open() {
    let dir = temp_dir("files");
    let good = dir.join("ranks.pftrace");
    streamscope_core::perfetto::writer::write_file(&common::two_rank_trace(), &good)
        .expect("write trace");
    let bad = dir.join("broken.json");
    std::fs::write(&bad, b"{\"traceEvents\": [ {\"ph\": ").expect("write bad file");

    let mut app = ViewerApp::empty();
    app.load(vec![good.clone(), bad.clone()]);
    let model = app.model.as_ref().expect("the good file is open");
    assert_eq!(model.trace.processes.len(), 2);
    assert!(app.files[0].result.is_ok());
    let err = app.files[1]
        .result
        .clone()
        .expect_err("the broken file fails");
    assert!(err.contains("broken.json"), "{err}");

    let mut h = Harness::builder()
        .with_size([1400.0, 900.0])
        .build_ui_state(|ui, app: &mut ViewerApp| app.ui_root(ui), app);
    h.run();
    assert!(
        h.query_by_label_contains("failed:").is_some(),
        "the error is shown"
    );
    assert!(
        h.state().timeline.painted_rows() > 0,
        "the good trace is drawn"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn no_trace_shows_the_open_prompt() {
    let mut app = ViewerApp::empty();
    app.message = Some("No trace given".into());
    let mut h = Harness::builder()
        .with_size([800.0, 600.0])
        .build_ui_state(|ui, app: &mut ViewerApp| app.ui_root(ui), app);
    h.run();
    assert!(h.query_by_label("No trace given").is_some());
    assert!(h.query_by_label("Open").is_some());
}
